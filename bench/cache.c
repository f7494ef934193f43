/*
 * bench/cache.c - the compile cache: time from "get kernel" to "ready to
 * launch" for a cold compile, a second-level (disk) hit in a fresh process
 * and a first-level (memory) hit, for CPU, PTX and SPIR-V kernels, and the
 * whole-process time of a small program that runs 20 kernels on a cold and
 * on a warm cache; side by side with PoCL's own kernel cache.
 *
 * "Get kernel": on the CPU, xpj_program_get_kernel on the CPU device (the
 * binary found or compiled, then loaded into an ORC JIT: ready to launch);
 * for PTX ("ptx:sm_90") and SPIR-V ("spirv"), xpj_program_get_binary with
 * a buffer for the bytes (there is no GPU here, so the binary is the whole
 * path). Kernels (examples/): axpy<f32> ndim 1 (axpy.xpk, a range kernel),
 * block_sum<f32> (reduce.xpk, nd-range with barriers and an atomic) and
 * matmul_tiled<f32> (matmul.xpk, nd-range, 2-D, local tiles), default
 * options (O2, a worker process per compile).
 *
 * Cases, per target and kernel:
 *   compile, fresh process   a child process (this program, exec'd with a
 *                            hidden --child argument) creates a context on
 *                            an empty cache file (created just before; the
 *                            one-time creation of a cache file is reported
 *                            on its own) and gets the kernel; only the get
 *                            is timed, which opens the cache file (origin
 *                            COMPILED, one compile in its counters)
 *   compile, warm process    the same in this process, which has compiled
 *                            before: a new context on a new, empty cache
 *                            file per sample, opened before the timed get
 *                            (the same specialisation, so the two compile
 *                            rows are the same work)
 *   L2 hit, fresh process    a child on a cache file that holds the kernel:
 *                            origin CACHE (CPU), no compile, one L2 hit;
 *                            its context creation and program parse are
 *                            reported separately, and so is the sum; also
 *                            on the same file opened read-only (no
 *                            last_used/hits update on a hit)
 *   L1 hit                   in one process, after the kernel is loaded:
 *                            CPU: xpj_program_get_kernel again on the same
 *                            program (the program's own list), per call and
 *                            as the mean of a batch (no timer overhead);
 *                            and the first get on a second program parsed
 *                            from the same file in the same context (the
 *                            context's first level, origin MEMORY).
 *                            PTX / SPIR-V: xpj_program_get_binary again
 *                            (always through the context's first level)
 * CPU L2 hit breakdown: a child that opens the L2 first (timed), then gets
 * the kernel and repeats the pieces of that get with the public APIs
 * (specialise + hash the kernel's IR; xpj_cache_get: SQLite read, checksum
 * and the hit's bookkeeping; a load of the object by runtime/elfload.c, as
 * runtime/cpu.c loads it, twice), or does the pieces first and the get
 * after them (what a hit costs once SQLite and the loader are warm).
 * A child that does nothing gives the cost of a process start and exit.
 *
 * Where a fresh-process L2 hit's cache work goes (CPU entries): a child
 * that creates a context, then times xpj_cache_open, xpj_cache_get and
 * xpj_cache_close on the kernel's file, and a child that replays that
 * path call by call (cache/trust.c's checks, the key file, SQLite's
 * initialisation, read-only open, identity check and lookup, the row's
 * HMAC), each step timed; --steps-only runs this table alone, and with
 * --stale the entry's last use is set two hours back before each l2api
 * child (its use time is then due, and written at close: what a process
 * pays once an hour; without it the row was used a moment ago and close
 * writes nothing to the file; each child reports whether its close
 * changed the database or its WAL). --put-cost MB times puts into a file
 * of MB of 16 KiB entries (the size limit's check), alone.
 *
 * Whole process: a child creates a context on the CPU, parses
 * examples/axpy.xpk and runs 20 kernels (axpy, axpby, scale, copy, fill x
 * f32, f64, i32, i64, ndim 1), each launched once over 1000 elements,
 * waited for and checked; timed from spawn to waitpid, on a new empty
 * cache file (cold) and on one that a previous run filled (warm). A warm
 * run must compile nothing: its compile counter is printed and a non-zero
 * count is a FAIL. --whole-only runs the warm case alone, interleaved with
 * the same program without its kernel work (context, queue, parse,
 * buffers, and the same host work on the data: inputs set and outputs
 * checked for each of the 20, the verdict unused; the cache is never
 * opened: issue 19's "within 1.5x of the same process start"; until
 * 2026-11-28 it set the inputs 4 times instead of 20 and checked nothing,
 * about 0.15 ms less) and a child that does nothing, and says whether the
 * warm runs wrote the cache file.
 *
 * The peer, PoCL's kernel cache (OpenCL on the CPU through libOpenCL.so.1,
 * POCL_KERNEL_CACHE=1, POCL_CACHE_DIR a private directory): the same
 * kernels in OpenCL C (bench/peers/compile/, the sources of bench/compile,
 * with xpk_peer.clh pasted in so that the program is one source string),
 * in a fresh process each: clCreateProgramWithSource + clBuildProgram +
 * clCreateKernel on an empty cache directory (cold) and on one a previous
 * process filled (warm); its platform and context set-up is reported
 * separately. PoCL compiles the work-group function at the first launch,
 * so "+ first launch" rows (a small launch and clFinish) are reported for
 * both, and xpjit's too. The 20-kernel program is run on PoCL the same way.
 * Ratios against PoCL are PoCL time / xpjit time: above 1, xpjit is faster.
 *
 * Every sample of every case is taken in interleaved rounds (the load of a
 * noisy machine falls on all of them); p50 and p99 are nearest-rank
 * percentiles of the samples (with few samples p99 is the maximum). Cache
 * files live in a mkdtemp directory (never the user's cache) that is
 * removed at the end. Timings are never asserted; the exit status is 1
 * only for functional errors (a failed call, a wrong origin or result, a
 * compile where there should be none).
 *
 * usage: cache [--quick] [--rounds N] [--l2-runs N] [--l1-calls N]
 *              [--whole-runs N] [--no-pocl] [--opencl-lib PATH]
 *              [--examples DIR] [--peers DIR] [--keep] [--steps-only [--stale]]
 *              [--whole-only] [--put-cost MB]
 */
#define CL_TARGET_OPENCL_VERSION 120
#include "xpjit.h"

#include "elfload.h" /* the split case loads objects as runtime/cpu.c does */

#define BENCH_WANT_OPENCL 1
#include "bench_util.h"
#include "../cache/trust.h" /* the replay of a hit's steps calls cache/trust.c */

#include <nettle/hmac.h>
#include <nettle/sha2.h>
#include <sqlite3.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;


/* ---- options, small helpers ----------------------------------------------- */

static int opt_rounds = 6;   /* rounds of the get-kernel cases */
static int opt_l2_runs = 30; /* L2-hit children per target and kernel */
static int opt_l1_calls = 100000;
static int opt_whole_runs = 10; /* warm whole-process runs (cold: a third) */
static bool opt_pocl = true, opt_keep = false;
static bool opt_steps_only = false; /* --steps-only: the L2 hit's steps alone */
static bool opt_stale = false;      /* --stale: l2api's row last used 2 hours ago */
static bool opt_whole_only = false; /* --whole-only: the whole-process rows alone */
static bool opt_launch_only = false; /* --launch-only: the small-launch rows alone */
static int opt_put_cost_mb = 0;      /* --put-cost MB: a put into a full file, alone */
static const char *opt_opencl = "libOpenCL.so.1";
static char opt_examples[PATH_MAX] = "examples";
/* unix:SOCKET of the redis-server this benchmark started, or "" */
static char redis_url[PATH_MAX + 16];
static void redis_stop(void);
static char opt_peers[PATH_MAX] = "bench/peers/compile";
static char self_exe[PATH_MAX];
static char tmpdir[1024];
static int failures;
static volatile sig_atomic_t stop_signal; /* SIGINT / SIGTERM: clean up, stop */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}




/* A series of samples, in milliseconds. */
typedef struct series {
  double *v;
  int n, cap;
} series;

static void add(series *s, double ms) {
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 16;
    double *nv = realloc(s->v, (size_t)cap * sizeof *nv);
    if (!nv) {
      fprintf(stderr, "cache: out of memory\n");
      exit(1);
    }
    s->v = nv;
    s->cap = cap;
  }
  s->v[s->n++] = ms;
}

/* nearest-rank percentile; NAN when empty */
static double pct(series *s, double p) {
  if (s->n == 0)
    return NAN;
  qsort(s->v, (size_t)s->n, sizeof *s->v, cmp_double);
  int i = (int)ceil(p / 100.0 * s->n) - 1;
  if (i < 0)
    i = 0;
  if (i >= s->n)
    i = s->n - 1;
  return s->v[i];
}
static double p50(series *s) { return pct(s, 50); }
static double p99(series *s) { return pct(s, 99); }

/* A time for a table: ns, us, ms or s with 3 significant digits. */
static const char *ft(double ms, char *buf, size_t size) {
  char t[32];
  if (isnan(ms))
    snprintf(buf, size, "-");
  else if (ms < 0)
    snprintf(buf, size, "-%s", ft(-ms, t, sizeof t));
  else if (ms >= 1000)
    snprintf(buf, size, "%.2f s", ms / 1e3);
  else if (ms >= 100)
    snprintf(buf, size, "%.0f ms", ms);
  else if (ms >= 10)
    snprintf(buf, size, "%.1f ms", ms);
  else if (ms >= 1)
    snprintf(buf, size, "%.2f ms", ms);
  else if (ms >= 0.1)
    snprintf(buf, size, "%.0f us", ms * 1e3);
  else if (ms >= 0.01)
    snprintf(buf, size, "%.1f us", ms * 1e3);
  else if (ms >= 0.001)
    snprintf(buf, size, "%.2f us", ms * 1e3);
  else
    snprintf(buf, size, "%.0f ns", ms * 1e6);
  return buf;
}
#define FT(ms) ft((ms), (char[32]){0}, 32)

static const char *fr(double ratio, char *buf, size_t size) {
  if (isnan(ratio) || isinf(ratio))
    snprintf(buf, size, "-");
  else if (ratio >= 100)
    snprintf(buf, size, "%.0fx", ratio);
  else if (ratio >= 10)
    snprintf(buf, size, "%.1fx", ratio);
  else
    snprintf(buf, size, "%.2fx", ratio);
  return buf;
}
#define FR(r) fr((r), (char[32]){0}, 32)

static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("FAIL: ");
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
  va_end(ap);
  failures++;
}

/* ---- the kernels ------------------------------------------------------------ */

enum { S_AXPY, S_BSUM, S_MATMUL };

typedef struct kcase {
  const char *label; /* for tables */
  const char *xpk;   /* file under examples/ */
  const char *kernel;
  const char *dtypes;
  unsigned ndim;
  const char *cl_file; /* peer under bench/peers/compile/ */
  const char *cl_defs;
  int shape;
} kcase;

static const kcase kcases[] = {
    {"axpy f32 nd1", "axpy.xpk", "axpy", "T=f32", 1, "axpy.cl", "-DT=float -DNDIM=1", S_AXPY},
    {"block_sum f32", "reduce.xpk", "block_sum", "T=f32", 0, "reduce.cl", "-DT=float", S_BSUM},
    {"matmul_tiled f32", "matmul.xpk", "matmul_tiled", "T=f32", 0, "matmul.cl", "-DT=float",
     S_MATMUL},
};
enum { NK = sizeof kcases / sizeof kcases[0] };

static const char *const targets[] = {"cpu", "ptx:sm_90", "spirv"};
enum { NT = 3 };

/* ---- xpjit helpers ------------------------------------------------------------ */

/* A context that sees the CPU only, on a private cache file, without the
 * bundles of XPJIT_BUNDLE_PATH. */
/* the Redis tier of a child that measures it (--child get ... URL), else
 * none whatever XPJIT_REDIS says */
static const char *child_redis = "off";

static xpj_status make_ctx_mode(const char *cache_path, xpj_cache_mode mode, unsigned threads,
                                xpj_context **ctx, xpj_device **dev) {
  xpj_context_desc d = {0};
  d.redis = child_redis;
  d.visible = "cpu";
  d.cpu_threads = threads;
  d.cache_mode = mode;
  d.cache_path = cache_path;
  d.no_env_bundles = 1;
  xpj_status st = xpj_context_create(&d, ctx);
  if (st == XPJ_OK)
    st = xpj_device_select(*ctx, "cpu", dev);
  return st;
}

static xpj_status make_ctx(const char *cache_path, unsigned threads, xpj_context **ctx,
                           xpj_device **dev) {
  return make_ctx_mode(cache_path, XPJ_CACHE_MODE_RW, threads, ctx, dev);
}

/* The get of the benchmark: the kernel on the CPU device, or the binary
 * (into a buffer that is freed) for any other target. */
static xpj_status get_one(xpj_program *p, xpj_device *dev, const kcase *k, const char *target,
                          xpj_kernel **out) {
  if (!strcmp(target, "cpu"))
    return xpj_program_get_kernel(p, k->kernel, k->dtypes, k->ndim, dev, NULL, out);
  void *data = NULL;
  size_t size = 0;
  xpj_status st =
      xpj_program_get_binary(p, k->kernel, k->dtypes, k->ndim, target, NULL, &data, &size);
  if (st == XPJ_OK && (!data || !size))
    st = XPJ_ERR_INVALID; /* not expected: an empty binary */
  free(data);
  if (out)
    *out = NULL;
  return st;
}

static void xpath(char *buf, size_t size, const char *dir, const char *file) {
  snprintf(buf, size, "%s/%s", dir, file);
}

/* ---- children: protocol -------------------------------------------------------- */

/* A child writes one line to stdout: "ok V1 V2 ..." or "error MESSAGE". */
#define CHILD_CK(call)                                                                             \
  do {                                                                                             \
    xpj_status st_ = (call);                                                                       \
    if (st_ != XPJ_OK) {                                                                           \
      char m_[1024];                                                                               \
      snprintf(m_, sizeof m_, "%s", xpj_last_error());                                             \
      oneline(m_);                                                                                 \
      printf("error %s: %s: %s\n", #call, xpj_status_name(st_), m_);                               \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

static int child_error(const char *fmt, ...) {
  char m[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  oneline(m);
  printf("error %s\n", m);
  return 1;
}

/* The environment of a child: ours, with NAME=VALUE pairs replaced or added. */
static char **child_env(const char *const *sets, int nsets) {
  int n = 0;
  while (environ[n])
    n++;
  char **env = calloc((size_t)(n + nsets + 1), sizeof *env);
  if (!env)
    return NULL;
  int m = 0;
  for (int i = 0; i < n; i++) {
    bool replaced = false;
    for (int j = 0; j < nsets; j++) {
      size_t L = strcspn(sets[j], "=");
      if (!strncmp(environ[i], sets[j], L) && environ[i][L] == '=')
        replaced = true;
    }
    if (!replaced)
      env[m++] = environ[i];
  }
  for (int j = 0; j < nsets; j++)
    env[m++] = (char *)sets[j];
  env[m] = NULL;
  return env;
}

static void check_stop(void);

/* Spawns this program with argv (argv[0] is set here) and env (NULL: ours),
 * reads its stdout, waits. vals gets the numbers of its "ok" line. Returns
 * the number of values, or -1 (msg says why). *wall_ms: spawn to waitpid. */
static int run_child(const char **argv, char **env, double *vals, int maxvals, double *wall_ms,
                     char *msg, size_t msgsize) {
  int pfd[2];
  if (pipe(pfd) != 0) {
    snprintf(msg, msgsize, "pipe: %s", strerror(errno));
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
  posix_spawn_file_actions_addclose(&fa, pfd[0]);
  posix_spawn_file_actions_addclose(&fa, pfd[1]);
  argv[0] = self_exe;
  fflush(stdout);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t def;
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);
  posix_spawnattr_setsigdefault(&at, &def);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF);
  pid_t pid;
  double t0 = now_ms();
  int rc = posix_spawn(&pid, self_exe, &fa, &at, (char *const *)argv, env ? env : environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(pfd[1]);
  if (rc != 0) {
    close(pfd[0]);
    snprintf(msg, msgsize, "posix_spawn %.300s: %s", self_exe, strerror(rc));
    return -1;
  }
  char out[8192];
  size_t len = 0;
  for (;;) {
    ssize_t r = read(pfd[0], out + len, sizeof out - 1 - len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    len += (size_t)r;
    if (len == sizeof out - 1)
      break;
  }
  out[len] = 0;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  *wall_ms = now_ms() - t0;
  close(pfd[0]);
  check_stop();
  char *line = strstr(out, "ok ");
  if (line && (line == out || line[-1] == '\n') && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    int n = 0;
    char *p = line + 3, *end;
    while (n < maxvals) {
      double v = strtod(p, &end);
      if (end == p)
        break;
      vals[n++] = v;
      p = end;
    }
    return n;
  }
  char *err = strstr(out, "error ");
  if (err) {
    snprintf(msg, msgsize, "%.900s", err + 6);
  } else if (WIFSIGNALED(status)) {
    snprintf(msg, msgsize, "child killed by signal %d", WTERMSIG(status));
  } else {
    snprintf(msg, msgsize, "child exited with %d and printed: %.600s",
             WIFEXITED(status) ? WEXITSTATUS(status) : -1, out);
  }
  oneline(msg);
  return -1;
}

/* ---- children: xpjit get ---------------------------------------------------------- */

/* Host data for the small launches of the three kernels. */
typedef struct kdata {
  float *a, *b, *c; /* axpy: a = x, b = y; block_sum: a = x, b = total;
                       matmul: a, b, c */
  float *ref;
  size_t na, nb, nc;
} kdata;

enum { AX_N = 1000, BS_N = 4096, BS_LOCAL = 64, BS_GLOBAL = 256, MM_N = 32, MM_TILE = 16 };

static void kdata_fill(const kcase *k, kdata *d) {
  switch (k->shape) {
  case S_AXPY:
    for (size_t i = 0; i < AX_N; i++) {
      d->a[i] = (float)(i % 7 + 1);
      d->b[i] = (float)(i % 5 + 2);
      d->ref[i] = 3.0f * d->a[i] + d->b[i];
    }
    break;
  case S_BSUM: {
    double s = 0;
    for (size_t i = 0; i < BS_N; i++) {
      d->a[i] = (float)(i % 7 + 1);
      s += d->a[i];
    }
    d->b[0] = 0;
    d->ref[0] = (float)s;
    break;
  }
  case S_MATMUL:
    for (size_t i = 0; i < MM_N; i++)
      for (size_t j = 0; j < MM_N; j++) {
        d->a[i * MM_N + j] = (float)((i + j) % 3);
        d->b[i * MM_N + j] = (float)((i * 2 + j) % 5);
        d->c[i * MM_N + j] = -1;
      }
    for (size_t i = 0; i < MM_N; i++)
      for (size_t j = 0; j < MM_N; j++) {
        float s = 0;
        for (size_t l = 0; l < MM_N; l++)
          s += d->a[i * MM_N + l] * d->b[l * MM_N + j];
        d->ref[i * MM_N + j] = s;
      }
    break;
  }
}

static bool kdata_check(const kcase *k, const kdata *d) {
  switch (k->shape) {
  case S_AXPY:
    for (size_t i = 0; i < AX_N; i++)
      if (d->b[i] != d->ref[i])
        return false;
    return true;
  case S_BSUM:
    return d->b[0] == d->ref[0];
  default:
    for (size_t i = 0; i < MM_N * MM_N; i++)
      if (d->c[i] != d->ref[i])
        return false;
    return true;
  }
}

static void kdata_sizes(const kcase *k, kdata *d) {
  switch (k->shape) {
  case S_AXPY:
    d->na = d->nb = AX_N, d->nc = 1;
    break;
  case S_BSUM:
    d->na = BS_N, d->nb = 1, d->nc = 1;
    break;
  default:
    d->na = d->nb = d->nc = MM_N * MM_N;
    break;
  }
}

static xpj_status xpjit_launch(xpj_queue *q, xpj_kernel *kern, const kcase *k, kdata *d) {
  xpj_array aa, ab, ac;
  xpj_arg args[3];
  xpj_range r;
  unsigned n;
  switch (k->shape) {
  case S_AXPY:
    aa = xpj_array_1d(d->a, XPJ_F32, AX_N);
    ab = xpj_array_1d(d->b, XPJ_F32, AX_N);
    args[0] = xpj_arg_f32(3.0f);
    args[1] = xpj_arg_array(&aa);
    args[2] = xpj_arg_array(&ab);
    n = 3;
    r = xpj_range_1d(AX_N, 0);
    break;
  case S_BSUM:
    aa = xpj_array_1d(d->a, XPJ_F32, BS_N);
    ab = xpj_array_1d(d->b, XPJ_F32, 1);
    args[0] = xpj_arg_array(&aa);
    args[1] = xpj_arg_array(&ab);
    n = 2;
    r = xpj_range_1d(BS_GLOBAL, BS_LOCAL);
    break;
  default:
    aa = xpj_array_2d(d->a, XPJ_F32, MM_N, MM_N);
    ab = xpj_array_2d(d->b, XPJ_F32, MM_N, MM_N);
    ac = xpj_array_2d(d->c, XPJ_F32, MM_N, MM_N);
    args[0] = xpj_arg_array(&aa);
    args[1] = xpj_arg_array(&ab);
    args[2] = xpj_arg_array(&ac);
    n = 3;
    r = xpj_range_2d(MM_N, MM_N, MM_TILE, MM_TILE);
    break;
  }
  xpj_status st = xpj_launch(q, kern, &r, n, args, NULL);
  if (st == XPJ_OK)
    st = xpj_queue_wait(q);
  return st;
}

static const kcase *find_kcase(const char *kernel) {
  for (int i = 0; i < NK; i++)
    if (!strcmp(kcases[i].kernel, kernel))
      return &kcases[i];
  return NULL;
}

/* --child get TARGET KERNEL CACHE EXPECT(compiled|cache|cache-ro|redis)
 * LAUNCH(0|1) [REDIS-URL]
 * prints: ok ctx_ms prog_ms get_ms launch_ms compiles l2_hits */
static int child_get(int argc, char **argv) {
  if (argc < 7)
    return child_error("child get: arguments");
  const char *target = argv[2];
  const kcase *k = find_kcase(argv[3]);
  const char *cache = argv[4];
  bool read_only = !strcmp(argv[5], "cache-ro");
  bool expect_redis = !strcmp(argv[5], "redis");
  bool expect_cache = read_only || !strcmp(argv[5], "cache");
  if (argc > 7 && strncmp(argv[7], "--", 2))
    child_redis = argv[7];
  bool launch = atoi(argv[6]) != 0;
  if (!k)
    return child_error("unknown kernel %s", argv[3]);
  char path[PATH_MAX + 64];
  xpath(path, sizeof path, opt_examples, k->xpk);
  xpj_context *ctx;
  xpj_device *dev;
  xpj_program *p;
  xpj_kernel *kern = NULL;
  double t0 = now_ms();
  CHILD_CK(make_ctx_mode(cache, read_only ? XPJ_CACHE_MODE_RO : XPJ_CACHE_MODE_RW, 0, &ctx, &dev));
  double t1 = now_ms();
  CHILD_CK(xpj_program_create_file(ctx, path, NULL, &p));
  double t2 = now_ms();
  CHILD_CK(get_one(p, dev, k, target, &kern));
  double t3 = now_ms();
  xpj_cache_counters c;
  CHILD_CK(xpj_context_cache_counters(ctx, &c));
  bool is_cpu = !strcmp(target, "cpu");
  if (is_cpu) {
    xpj_kernel_info info;
    CHILD_CK(xpj_kernel_get_info(kern, &info));
    xpj_kernel_origin want = expect_redis   ? XPJ_ORIGIN_REDIS
                             : expect_cache ? XPJ_ORIGIN_CACHE
                                            : XPJ_ORIGIN_COMPILED;
    if (info.origin != want)
      return child_error("%s %s: origin %d, expected %d", target, k->kernel, (int)info.origin,
                         (int)want);
  }
  if (expect_redis && (c.compiles != 0 || c.redis_hits != 1))
    return child_error("%s %s: counters compiles %llu redis_hits %llu (expected 0 compiles, "
                       "1 Redis hit)", target, k->kernel, (unsigned long long)c.compiles,
                       (unsigned long long)c.redis_hits);
  if (expect_redis)
    ;
  else if (expect_cache ? (c.compiles != 0 || c.l2_hits != 1) : (c.compiles != 1))
    return child_error("%s %s: counters compiles %llu l2_hits %llu (expected %s)", target,
                       k->kernel, (unsigned long long)c.compiles, (unsigned long long)c.l2_hits,
                       expect_cache ? "0 compiles, 1 L2 hit" : "1 compile");
  double launch_ms = NAN;
  if (launch && is_cpu) {
    xpj_queue *q;
    CHILD_CK(xpj_queue_create(dev, NULL, &q));
    kdata d = {0};
    kdata_sizes(k, &d);
    CHILD_CK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, d.na * 4, 0, (void **)&d.a));
    CHILD_CK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, d.nb * 4, 0, (void **)&d.b));
    CHILD_CK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, d.nc * 4, 0, (void **)&d.c));
    d.ref = malloc(MM_N * MM_N * 4 + AX_N * 4);
    if (!d.ref)
      return child_error("out of memory");
    kdata_fill(k, &d);
    double t4 = now_ms();
    CHILD_CK(xpjit_launch(q, kern, k, &d));
    launch_ms = now_ms() - t4;
    if (!kdata_check(k, &d))
      return child_error("%s: wrong result of the launch", k->kernel);
    xpj_mem_free(dev, d.a);
    xpj_mem_free(dev, d.b);
    xpj_mem_free(dev, d.c);
    free(d.ref);
    xpj_queue_destroy(q);
  }
  printf("ok %.6f %.6f %.6f %.6f %llu %llu\n", t1 - t0, t2 - t1, t3 - t2, launch_ms,
         (unsigned long long)c.compiles, (unsigned long long)c.l2_hits);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  return 0;
}

/* ---- children: the pieces of a CPU L2 hit ------------------------------------------ */

/* The pieces of a CPU L2 hit, with the public APIs: specialise + hash, the
 * L2 read, two LLJIT loads. */
typedef struct pieces {
  double spechash, l2get, jitmake, jit[2];
  size_t bytes;
} pieces;

/* The runtime's binder, less its policy: what the process has. */
static void *bench_resolve(void *ctx, const char *name) {
  (void)ctx;
  return dlsym(RTLD_DEFAULT, name);
}

/* The cache key of a kernel on the CPU device, made as the runtime makes
 * it: the kernel specialised and its IR hashed, the device's target, the
 * default options, the versions. The key points into kk. */
typedef struct kkey {
  xpj_device_info di;
  char code[65], ostr[64], versions[256];
  xpj_cache_key key;
} kkey;

static int kernel_key(const kcase *k, const char *path, xpj_device *dev, kkey *kk,
                      double *spechash_ms) {
  xpj_module *m = NULL, *sm = NULL;
  CHILD_CK(xpj_module_create(&m));
  CHILD_CK(xpj_parse_file(m, path, NULL));
  const xpj_func *f = xpj_module_find(m, k->kernel);
  if (!f)
    return child_error("no kernel %s", k->kernel);
  const char *tname = xpj_func_tparam_name(f, 0);
  xpj_scalar ty = XPJ_F32;
  xpj_spec spec = {1, &tname, &ty, k->ndim, 0, NULL, NULL};
  uint8_t raw[32];
  double t0 = now_ms();
  CHILD_CK(xpj_specialize(m, k->kernel, &spec, &sm, NULL));
  CHILD_CK(xpj_module_hash(sm, k->kernel, raw, kk->code));
  *spechash_ms = now_ms() - t0;
  xpj_module_destroy(sm);
  xpj_module_destroy(m);
  CHILD_CK(xpj_device_get_info(dev, &kk->di));
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  xpj_compile_opts_str(&o, kk->ostr, sizeof kk->ostr);
  xpj_versions_str(kk->versions, sizeof kk->versions);
  kk->key = (xpj_cache_key){kk->code,      k->kernel, k->dtypes,   k->ndim,
                            kk->di.target, kk->ostr,  kk->versions};
  return 0;
}

static int split_pieces(const kcase *k, const char *path, xpj_device *dev, xpj_cache *l2,
                        pieces *out) {
  kkey kk;
  if (kernel_key(k, path, dev, &kk, &out->spechash))
    return 1;
  xpj_cache_entry ce;
  double t0 = now_ms();
  xpj_status st = xpj_cache_get(l2, &kk.key, &ce);
  out->l2get = now_ms() - t0;
  if (st != XPJ_OK)
    return child_error("xpj_cache_get %s: %s (the bench's key differs from the runtime's?)",
                       k->kernel, xpj_status_name(st));
  out->bytes = ce.size;
  /* the loader (runtime/elfload.c, as runtime/cpu.c calls it): nothing to
   * make first (jitmake stays 0; it was ORC's LLJIT), the object loaded
   * twice */
  out->jitmake = 0;
  for (int rep = 0; rep < 2; rep++) {
    double a = now_ms();
    xpj_elf_image *img = NULL;
    void *fn = NULL;
    char why[300];
    xpj_status est = xpj_elf_load(ce.data, ce.size, ce.entry, bench_resolve, NULL, &img, &fn,
                                  why, sizeof why);
    out->jit[rep] = now_ms() - a;
    if (est != XPJ_OK)
      return child_error("loading %s: %s", ce.entry, why);
    xpj_elf_unload(img);
  }
  xpj_cache_entry_clear(&ce);
  return 0;
}

/* --child split KERNEL CACHE ORDER: the L2 opened first, then (ORDER 0)
 * the get and then its pieces, or (ORDER 1) the pieces and then the get
 * (so that the get finds the loader and SQLite warmed up).
 * prints: ok ctx_ms prog_ms l2open_ms get_ms spechash_ms l2get_ms load1_ms load2_ms bytes
 *         jitmake_ms */
static int child_split(int argc, char **argv) {
  if (argc < 5)
    return child_error("child split: arguments");
  const kcase *k = find_kcase(argv[2]);
  const char *cache = argv[3];
  int order = atoi(argv[4]);
  if (!k)
    return child_error("unknown kernel %s", argv[2]);
  char path[PATH_MAX + 64];
  xpath(path, sizeof path, opt_examples, k->xpk);
  xpj_context *ctx;
  xpj_device *dev;
  xpj_program *p;
  xpj_kernel *kern = NULL;
  double t0 = now_ms();
  CHILD_CK(make_ctx(cache, 0, &ctx, &dev));
  double t1 = now_ms();
  CHILD_CK(xpj_program_create_file(ctx, path, NULL, &p));
  double t2 = now_ms();
  xpj_cache *l2 = xpj_context_cache(ctx);
  double t3 = now_ms();
  if (!l2)
    return child_error("xpj_context_cache: NULL");
  pieces pc;
  if (order == 1 && split_pieces(k, path, dev, l2, &pc))
    return 1;
  double t4 = now_ms();
  CHILD_CK(xpj_program_get_kernel(p, k->kernel, k->dtypes, k->ndim, dev, NULL, &kern));
  double t5 = now_ms();
  xpj_kernel_info info;
  CHILD_CK(xpj_kernel_get_info(kern, &info));
  if (info.origin != XPJ_ORIGIN_CACHE)
    return child_error("split %s: origin %d, expected CACHE", k->kernel, (int)info.origin);
  if (order == 0 && split_pieces(k, path, dev, l2, &pc))
    return 1;
  printf("ok %.6f %.6f %.6f %.6f %.6f %.6f %.6f %.6f %zu %.6f\n", t1 - t0, t2 - t1, t3 - t2,
         t5 - t4, pc.spechash, pc.l2get, pc.jit[0], pc.jit[1], pc.bytes, pc.jitmake);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  return 0;
}

/* ---- children: where a fresh-process L2 hit's cache work goes ----------------------- */

/* Each child first creates a context (the CPU device and its thread pool: the state an application is in when it asks for a kernel)
 * and makes the key of a CPU entry that is in the cache file. Then
 *   l2api     times xpj_cache_open, xpj_cache_get and xpj_cache_close: the
 *             library itself (close settles the hit's bookkeeping: the use
 *             time written when due, else the hit appended to the side
 *             file; it prints whether the database or its WAL changed);
 *   l2replay  makes the calls cache/cache.c makes on that path, one timed
 *             step each: cache/trust.c's checks, the key file, SQLite's
 *             open (read-only), the identity check in one read
 *             transaction, the lookup, the row's verification. Its checksum
 *             must equal the stored one, or the replay no longer does what
 *             cache.c does and the child fails. */
#define REPLAY_STEPS(X)                                                                            \
  X(resolve, "resolve the directory (realpath)")                                                   \
  X(trust, "trust checks (directories, 7 files), access")                                        \
  X(keyfile, "the signing key (open, fstat, read)")                                               \
  X(init, "sqlite3_initialize")                                                                    \
  X(open, "sqlite3_open_v2, read-only, and its settings")                                         \
  X(first, "BEGIN + PRAGMA application_id (1st read: WAL index)")                                  \
  X(uver, "PRAGMA user_version")                                                                   \
  X(schema, "schema text from sqlite_master (schema parsed)")                                      \
  X(commit, "COMMIT")                                                                              \
  X(digest, "key digest (SHA-256 of the key text)")                                               \
  X(prepare, "lookup: prepare")                                                                    \
  X(step, "lookup: step (B-tree, the row's pages)")                                               \
  X(row, "row read (columns and binary copied)")                                                  \
  X(verify, "verify: key digest and HMAC-SHA256 of the row")
#define REPLAY_INDEX(id, what) RS_##id,
enum { REPLAY_STEPS(REPLAY_INDEX) NRS };
#undef REPLAY_INDEX

/* --child l2api KERNEL CACHE: prints ok open_ms get_ms close_ms wrote */
static int child_l2api(int argc, char **argv) {
  if (argc < 4)
    return child_error("child l2api: arguments");
  const kcase *k = find_kcase(argv[2]);
  if (!k)
    return child_error("unknown kernel %s", argv[2]);
  char path[PATH_MAX + 64];
  xpath(path, sizeof path, opt_examples, k->xpk);
  xpj_context *ctx;
  xpj_device *dev;
  CHILD_CK(make_ctx(argv[3], 0, &ctx, &dev));
  kkey kk;
  double sh;
  if (kernel_key(k, path, dev, &kk, &sh))
    return 1;
  xpj_cache_config cfg = {.path = argv[3], .mode = XPJ_CACHE_MODE_RW};
  xpj_cache *c = NULL;
  xpj_cache_entry e;
  double t0 = now_ms();
  CHILD_CK(xpj_cache_open(&cfg, &c));
  double t1 = now_ms();
  xpj_status st = xpj_cache_get(c, &kk.key, &e);
  double t2 = now_ms();
  if (st != XPJ_OK || xpj_cache_mode_of(c) != XPJ_CACHE_MODE_RW)
    return child_error("l2api %s: get %s, mode %d", k->kernel, xpj_status_name(st),
                       (int)xpj_cache_mode_of(c));
  xpj_cache_entry_clear(&e);
  struct stat db0, wal0, db1, wal1;
  char wal[PATH_MAX + 8];
  snprintf(wal, sizeof wal, "%s-wal", argv[3]);
  memset(&wal0, 0, sizeof wal0);
  memset(&wal1, 0, sizeof wal1);
  stat(argv[3], &db0);
  stat(wal, &wal0);
  double t3 = now_ms();
  xpj_cache_close(c);
  double t4 = now_ms();
  stat(argv[3], &db1);
  stat(wal, &wal1);
  /* did close write the database or its WAL (size or mtime changed)? */
  bool wrote = db1.st_size != db0.st_size || wal1.st_size != wal0.st_size ||
               db1.st_mtim.tv_nsec != db0.st_mtim.tv_nsec ||
               db1.st_mtim.tv_sec != db0.st_mtim.tv_sec ||
               wal1.st_mtim.tv_nsec != wal0.st_mtim.tv_nsec ||
               wal1.st_mtim.tv_sec != wal0.st_mtim.tv_sec;
  printf("ok %.6f %.6f %.6f %d\n", t1 - t0, t2 - t1, t4 - t3, wrote);
  xpj_context_destroy(ctx);
  return 0;
}

static void hmac_u64(struct hmac_sha256_ctx *h, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t)(v >> (8 * i));
  hmac_sha256_update(h, 8, b);
}

static void hmac_str(struct hmac_sha256_ctx *h, const char *s) {
  size_t n = s ? strlen(s) : 0;
  hmac_u64(h, n);
  if (n)
    hmac_sha256_update(h, n, (const uint8_t *)s);
}

static char *col_dup(sqlite3_stmt *s, int i) {
  const unsigned char *t = sqlite3_column_text(s, i);
  return strdup(t ? (const char *)t : "");
}

/* --child l2replay KERNEL CACHE: prints ok STEP_ms... close_ms */
static int child_l2replay(int argc, char **argv) {
  if (argc < 4)
    return child_error("child l2replay: arguments");
  const kcase *k = find_kcase(argv[2]);
  if (!k)
    return child_error("unknown kernel %s", argv[2]);
  char path[PATH_MAX + 64];
  xpath(path, sizeof path, opt_examples, k->xpk);
  xpj_context *ctx;
  xpj_device *dev;
  CHILD_CK(make_ctx(argv[3], 0, &ctx, &dev));
  kkey kk;
  double sh, t[NRS + 1], at = now_ms();
#define STEP(id) (t[RS_##id] = now_ms() - at, at = now_ms())
  if (kernel_key(k, path, dev, &kk, &sh))
    return 1;
  at = now_ms();

  char dir[PATH_MAX], db[PATH_MAX + 16], why[4600];
  snprintf(dir, sizeof dir, "%s", argv[3]);
  *strrchr(dir, '/') = 0;
  char *rdir = realpath(dir, NULL);
  if (!rdir)
    return child_error("realpath %s: %s", dir, strerror(errno));
  snprintf(db, sizeof db, "%s/%s", rdir, strrchr(argv[3], '/') + 1);
  STEP(resolve);
  trust tr;
  trust_for_cache(&tr);
  bool ok = trust_dirs(&tr, rdir, why, sizeof why) == TRUST_OK;
  static const char *const sides[] = {"", "-wal", "-shm", "-journal", ".lock", ".key", ".stats"};
  for (size_t i = 0; ok && i < sizeof sides / sizeof *sides; i++) {
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s%s", db, sides[i]);
    ok = trust_file(&tr, p, why, sizeof why) != TRUST_REFUSED;
  }
  struct stat sb;
  ok = ok && access(db, R_OK) == 0 && lstat(db, &sb) == 0 && sb.st_size > 0;
  STEP(trust);
  if (!ok)
    return child_error("trust: %s", why);
  char kp[PATH_MAX + 32];
  snprintf(kp, sizeof kp, "%s.key", db);
  uint8_t key[33];
  int fd = open(kp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  ok = fd >= 0 && trust_fd(&tr, fd, kp, true, why, sizeof why) == TRUST_OK &&
       read(fd, key, sizeof key) == 32;
  if (fd >= 0)
    close(fd);
  STEP(keyfile);
  if (!ok)
    return child_error("%s: unusable", kp);

  sqlite3_initialize();
  STEP(init);
  sqlite3 *h = NULL;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
                      NULL) != SQLITE_OK)
    return child_error("sqlite3_open_v2 %s: %s", db, sqlite3_errmsg(h));
  sqlite3_db_config(h, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
  sqlite3_db_config(h, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
  sqlite3_extended_result_codes(h, 1);
  sqlite3_busy_timeout(h, 2000);
  STEP(open);
  sqlite3_stmt *s = NULL;
  ok = sqlite3_exec(h, "BEGIN", NULL, NULL, NULL) == SQLITE_OK &&
       sqlite3_prepare_v2(h, "PRAGMA application_id", -1, &s, NULL) == SQLITE_OK &&
       sqlite3_step(s) == SQLITE_ROW && sqlite3_column_int64(s, 0) == 0x58504a43;
  sqlite3_finalize(s);
  STEP(first);
  ok = ok && sqlite3_prepare_v2(h, "PRAGMA user_version", -1, &s, NULL) == SQLITE_OK &&
       sqlite3_step(s) == SQLITE_ROW && sqlite3_column_int64(s, 0) == XPJ_CACHE_SCHEMA_VERSION;
  sqlite3_finalize(s);
  STEP(uver);
  sqlite3_str *b = sqlite3_str_new(NULL);
  ok = ok && sqlite3_prepare_v2(h, "SELECT type, name, tbl_name, coalesce(sql, '') FROM "
                                   "sqlite_master",
                                -1, &s, NULL) == SQLITE_OK;
  while (ok && sqlite3_step(s) == SQLITE_ROW)
    for (int i = 0; i < 4; i++)
      sqlite3_str_appendf(b, "%s%c", sqlite3_column_text(s, i), i == 3 ? '\n' : ' ');
  sqlite3_finalize(s);
  sqlite3_free(sqlite3_str_finish(b));
  STEP(schema);
  ok = ok && sqlite3_exec(h, "COMMIT", NULL, NULL, NULL) == SQLITE_OK;
  STEP(commit);
  if (!ok)
    return child_error("%s: identity check: %s", db, sqlite3_errmsg(h));

  char digest[65], *text = NULL;
  CHILD_CK(xpj_cache_key_digest(&kk.key, &text, digest));
  STEP(digest);
  ok = sqlite3_prepare_v3(h,
                          "SELECT digest, key, code, kernel, dtypes, ndim, target, options, "
                          "versions, failed, entry, local_bytes, scratch_bytes, size, log, "
                          "compile_ms, created, last_used, hits, checksum, expires, data FROM "
                          "entries WHERE digest=?",
                          -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) == SQLITE_OK;
  STEP(prepare);
  ok = ok && sqlite3_bind_text(s, 1, digest, -1, SQLITE_STATIC) == SQLITE_OK &&
       sqlite3_step(s) == SQLITE_ROW;
  STEP(step);
  if (!ok)
    return child_error("%s: lookup: %s", db, sqlite3_errmsg(h));
  char *cols[21];
  for (int i = 0; i < 21; i++)
    cols[i] = col_dup(s, i);
  int n = sqlite3_column_bytes(s, 21);
  uint8_t *data = malloc(n > 0 ? (size_t)n : 1);
  if (n > 0)
    memcpy(data, sqlite3_column_blob(s, 21), (size_t)n);
  int64_t failed = sqlite3_column_int64(s, 9), local = sqlite3_column_int64(s, 11),
          scratch = sqlite3_column_int64(s, 12), expires = sqlite3_column_int64(s, 20);
  STEP(row);
  uint8_t d[SHA256_DIGEST_SIZE];
  struct sha256_ctx kh;
  sha256_init(&kh);
  sha256_update(&kh, strlen(cols[1]), (const uint8_t *)cols[1]);
  sha256_digest(&kh, sizeof d, d);
  char hex[65], sum[65];
  for (int i = 0; i < 32; i++)
    snprintf(hex + 2 * i, 3, "%02x", d[i]);
  struct hmac_sha256_ctx hm;
  hmac_sha256_set_key(&hm, 32, key);
  hmac_str(&hm, cols[0]);
  hmac_u64(&hm, (uint64_t)failed);
  hmac_str(&hm, cols[10]);
  hmac_u64(&hm, (uint64_t)local);
  hmac_u64(&hm, (uint64_t)scratch);
  hmac_u64(&hm, (uint64_t)n);
  if (n > 0)
    hmac_sha256_update(&hm, (size_t)n, data);
  hmac_str(&hm, cols[14]);
  hmac_u64(&hm, (uint64_t)expires);
  hmac_sha256_digest(&hm, sizeof d, d);
  for (int i = 0; i < 32; i++)
    snprintf(sum + 2 * i, 3, "%02x", d[i]);
  ok = !strcmp(hex, digest) && !strcmp(cols[1], text) && !strcmp(sum, cols[19]);
  STEP(verify);
  if (!ok)
    return child_error("%s: the replay's digest or checksum differs from the row's (cache.c "
                       "changed?)", db);
  sqlite3_finalize(s);
  double c0 = now_ms();
  sqlite3_close(h);
  t[NRS] = now_ms() - c0;
#undef STEP
  /* as a process of the library ends (its close writes): a read-write
   * connection, the last, removes the WAL and its index, which the next
   * child would otherwise find made */
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) == SQLITE_OK)
    sqlite3_exec(h, "PRAGMA user_version", NULL, NULL, NULL);
  sqlite3_close(h);
  printf("ok");
  for (int i = 0; i <= NRS; i++)
    printf(" %.6f", t[i]);
  printf("\n");
  for (int i = 0; i < 21; i++)
    free(cols[i]);
  free(data);
  free(text);
  free(rdir);
  xpj_context_destroy(ctx);
  return 0;
}

/* ---- children: the 20-kernel program ----------------------------------------------- */

enum { W_N = 1000 };
static const char *const w_kernels[] = {"axpy", "axpby", "scale", "copy", "fill"};
static const char *const w_types[] = {"f32", "f64", "i32", "i64"};
static const char *const w_cltypes[] = {"float", "double", "int", "long"};
enum { W_NK = 5, W_NT = 4 };

/* argument lists: x, y arrays; s scalars (values in order) */
static const char *const w_sig[W_NK] = {"sxy", "sxsy", "sx", "xy", "xs"};
static const double w_scal[W_NK][2] = {{3, 0}, {3, 2}, {3, 0}, {0, 0}, {5, 0}};

static xpj_scalar w_scalar(int t) {
  static const xpj_scalar s[W_NT] = {XPJ_F32, XPJ_F64, XPJ_I32, XPJ_I64};
  return s[t];
}

static void w_put(void *p, int t, size_t i, double v) {
  switch (t) {
  case 0:
    ((float *)p)[i] = (float)v;
    break;
  case 1:
    ((double *)p)[i] = v;
    break;
  case 2:
    ((int32_t *)p)[i] = (int32_t)v;
    break;
  default:
    ((int64_t *)p)[i] = (int64_t)v;
    break;
  }
}

static double w_get(const void *p, int t, size_t i) {
  switch (t) {
  case 0:
    return ((const float *)p)[i];
  case 1:
    return ((const double *)p)[i];
  case 2:
    return ((const int32_t *)p)[i];
  default:
    return (double)((const int64_t *)p)[i];
  }
}

static size_t w_size(int t) { return (t == 0 || t == 2) ? 4 : 8; }

static void w_init(void *x, void *y, int t) {
  for (size_t i = 0; i < W_N; i++) {
    w_put(x, t, i, (double)(i % 7 + 1));
    w_put(y, t, i, (double)(i % 5 + 2));
  }
}

/* checks the output array of kernel kk (x for scale and fill, else y);
 * every element, right or wrong: the check costs the same either way (the
 * whole-process child without kernels does it too) */
static bool w_check(int kk, const void *x, const void *y, int t) {
  size_t bad = 0;
  for (size_t i = 0; i < W_N; i++) {
    double x0 = (double)(i % 7 + 1), y0 = (double)(i % 5 + 2), want, got;
    switch (kk) {
    case 0:
      want = 3 * x0 + y0, got = w_get(y, t, i);
      break;
    case 1:
      want = 3 * x0 + 2 * y0, got = w_get(y, t, i);
      break;
    case 2:
      want = 3 * x0, got = w_get(x, t, i);
      break;
    case 3:
      want = x0, got = w_get(y, t, i);
      break;
    default:
      want = 5, got = w_get(x, t, i);
      break;
    }
    bad += want != got;
  }
  return bad == 0;
}

static xpj_arg w_arg_scalar(int t, double v) {
  switch (t) {
  case 0:
    return xpj_arg_f32((float)v);
  case 1:
    return xpj_arg_f64(v);
  case 2:
    return xpj_arg_i32((int32_t)v);
  default:
    return xpj_arg_i64((int64_t)v);
  }
}

/* --child whole CACHE: prints ok inchild_ms ctx_ms compiles l2_hits l1_hits
 * --child bare CACHE: the same process without its kernel work (the
 * context, queue, program parse, buffers, and the host's own work on the
 * data: each kernel's inputs set and its output checked, the verdict
 * unused; no kernel got or launched: the cache is never opened); prints
 * ok inchild_ms ctx_ms */
static volatile unsigned w_sink;
static int child_whole(int argc, char **argv, bool work) {
  if (argc < 3)
    return child_error("child whole/bare: arguments");
  double t0 = now_ms();
  char path[PATH_MAX + 64];
  xpath(path, sizeof path, opt_examples, "axpy.xpk");
  xpj_context *ctx;
  xpj_device *dev;
  xpj_queue *q;
  xpj_program *p;
  CHILD_CK(make_ctx(argv[2], 0, &ctx, &dev));
  double t1 = now_ms();
  CHILD_CK(xpj_queue_create(dev, NULL, &q));
  CHILD_CK(xpj_program_create_file(ctx, path, NULL, &p));
  void *x, *y;
  CHILD_CK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, W_N * 8, 0, &x));
  CHILD_CK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, W_N * 8, 0, &y));
  for (int kk = 0; kk < W_NK; kk++)
    for (int t = 0; t < W_NT; t++) {
      w_init(x, y, t);
      if (!work) { /* the host's work alone (no kernel ran: any verdict) */
        w_sink += w_check(kk, x, y, t);
        continue;
      }
      char dt[16];
      snprintf(dt, sizeof dt, "T=%s", w_types[t]);
      xpj_kernel *kern;
      CHILD_CK(xpj_program_get_kernel(p, w_kernels[kk], dt, 1, dev, NULL, &kern));
      xpj_array ax = xpj_array_1d(x, w_scalar(t), W_N), ay = xpj_array_1d(y, w_scalar(t), W_N);
      xpj_arg args[4];
      unsigned n = 0, ns = 0;
      for (const char *s = w_sig[kk]; *s; s++)
        args[n++] = *s == 'x'   ? xpj_arg_array(&ax)
                    : *s == 'y' ? xpj_arg_array(&ay)
                                : w_arg_scalar(t, w_scal[kk][ns++]);
      xpj_range r = xpj_range_1d(W_N, 0);
      CHILD_CK(xpj_launch(q, kern, &r, n, args, NULL));
      CHILD_CK(xpj_queue_wait(q));
      if (!w_check(kk, x, y, t))
        return child_error("%s %s: wrong result", w_kernels[kk], dt);
    }
  xpj_cache_counters c = {0};
  if (work)
    CHILD_CK(xpj_context_cache_counters(ctx, &c));
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, y);
  xpj_program_destroy(p);
  xpj_queue_destroy(q);
  xpj_context_destroy(ctx);
  if (work)
    printf("ok %.6f %.6f %llu %llu %llu\n", now_ms() - t0, t1 - t0,
           (unsigned long long)c.compiles, (unsigned long long)c.l2_hits,
           (unsigned long long)c.l1_hits);
  else
    printf("ok %.6f %.6f\n", now_ms() - t0, t1 - t0);
  return 0;
}

/* ---- a small launch and its wait ---------------------------------------------------- */

/* --child launch CACHE HELP: copy<T=f32> over W_N elements launched and
 * waited for LN times (after LN/10 untimed), XPJIT_QUEUE_HELP=HELP;
 * prints ok p10 p50 p90 in microseconds. The same loop on PoCL:
 * --child pocl-launch. */
enum { LN = 2000 };
static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static void print_lat(double *us) {
  qsort(us, LN, sizeof *us, cmp_dbl);
  printf("ok %.6f %.6f %.6f\n", us[LN / 10], us[LN / 2], us[LN * 9 / 10]);
}

static int child_launch(int argc, char **argv) {
  if (argc < 4)
    return child_error("child launch: arguments");
  setenv("XPJIT_QUEUE_HELP", argv[3], 1);
  char path[PATH_MAX + 64];
  xpath(path, sizeof path, opt_examples, "axpy.xpk");
  xpj_context *ctx;
  xpj_device *dev;
  xpj_queue *q;
  xpj_program *p;
  xpj_kernel *k;
  CHILD_CK(make_ctx(argv[2], 0, &ctx, &dev));
  CHILD_CK(xpj_queue_create(dev, NULL, &q));
  CHILD_CK(xpj_program_create_file(ctx, path, NULL, &p));
  CHILD_CK(xpj_program_get_kernel(p, "copy", "T=f32", 1, dev, NULL, &k));
  void *x, *y;
  CHILD_CK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, W_N * 4, 0, &x));
  CHILD_CK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, W_N * 4, 0, &y));
  w_init(x, y, 0);
  xpj_array ax = xpj_array_1d(x, XPJ_F32, W_N), ay = xpj_array_1d(y, XPJ_F32, W_N);
  xpj_arg args[2] = {xpj_arg_array(&ax), xpj_arg_array(&ay)};
  xpj_range r = xpj_range_1d(W_N, 0);
  static double us[LN];
  for (int i = -LN / 10; i < LN; i++) {
    double t0 = now_ms();
    CHILD_CK(xpj_launch(q, k, &r, 2, args, NULL));
    CHILD_CK(xpj_queue_wait(q));
    if (i >= 0)
      us[i] = (now_ms() - t0) * 1e3;
  }
  if (!w_check(3, x, y, 0))
    return child_error("copy f32: wrong result");
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, y);
  xpj_program_destroy(p);
  xpj_queue_destroy(q);
  xpj_context_destroy(ctx);
  print_lat(us);
  return 0;
}

/* ---- PoCL through libOpenCL.so.1 (children only) ------------------------------------ */

static bench_cl_api cl;

static struct {
  cl_platform_id plat;
  cl_device_id dev;
  cl_context ctx;
  cl_command_queue q;
  char version[256], device[256];
} P;

/* Loads libOpenCL, finds PoCL's CPU device, makes a context and queue.
 * why gets the reason on failure. */
static bool pocl_open(char *why, size_t whysize) {
  void *lib = dlopen(opt_opencl, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(why, whysize, "%s", dlerror());
    return false;
  }
  if (!bench_cl_load(lib, opt_opencl, &cl, why, whysize))
    return false;
  cl_platform_id plats[16];
  cl_uint np = 0;
  if (cl.GetPlatformIDs(16, plats, &np) != CL_SUCCESS || np == 0) {
    snprintf(why, whysize, "no OpenCL platform");
    return false;
  }
  if (np > 16)
    np = 16;
  for (cl_uint i = 0; i < np && !P.plat; i++) {
    char name[256] = "";
    cl.GetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
    cl_device_id d;
    cl_uint nd = 0;
    if (strstr(name, "Portable Computing Language") &&
        cl.GetDeviceIDs(plats[i], CL_DEVICE_TYPE_CPU, 1, &d, &nd) == CL_SUCCESS && nd > 0) {
      P.plat = plats[i];
      P.dev = d;
    }
  }
  if (!P.plat) {
    snprintf(why, whysize, "no Portable Computing Language platform with a CPU device");
    return false;
  }
  cl.GetPlatformInfo(P.plat, CL_PLATFORM_VERSION, sizeof P.version - 1, P.version, NULL);
  cl.GetDeviceInfo(P.dev, CL_DEVICE_NAME, sizeof P.device - 1, P.device, NULL);
  cl_int err = 0;
  P.ctx = cl.CreateContext(NULL, 1, &P.dev, NULL, NULL, &err);
  if (P.ctx)
    P.q = cl.CreateCommandQueue(P.ctx, P.dev, 0, &err);
  if (!P.ctx || !P.q) {
    snprintf(why, whysize, "cannot create a context and queue (error %d)", err);
    return false;
  }
  return true;
}

/* The peer source of a kernel file: xpk_peer.clh pasted in place of its
 * #include (one source string, so PoCL's cache key covers all of it). */
static char *peer_source(const char *file, size_t *len) {
  char hp[PATH_MAX + 32], fp[PATH_MAX + 64];
  snprintf(hp, sizeof hp, "%s/xpk_peer.clh", opt_peers);
  snprintf(fp, sizeof fp, "%s/%s", opt_peers, file);
  size_t hl = 0, fl = 0;
  char *h = slurp(hp, &hl), *f = slurp(fp, &fl);
  char *src = h && f ? malloc(hl + fl + 2) : NULL;
  if (src) {
    const char *inc = "#include \"xpk_peer.clh\"";
    char *at = strstr(f, inc);
    if (at)
      memset(at, ' ', strlen(inc));
    memcpy(src, h, hl);
    src[hl] = '\n';
    memcpy(src + hl + 1, f, fl + 1);
    *len = hl + 1 + fl;
  }
  free(h);
  free(f);
  return src;
}

static cl_kernel pocl_get(const char *file, const char *kernel, const char *defs, cl_program *pp,
                          char *why, size_t whysize) {
  size_t len = 0;
  char *src = peer_source(file, &len);
  if (!src) {
    snprintf(why, whysize, "cannot read %.400s/%.40s and xpk_peer.clh", opt_peers, file);
    return NULL;
  }
  char opts[512];
  snprintf(opts, sizeof opts, "-cl-std=CL3.0 -DK_%s %s", kernel, defs);
  cl_int err = 0;
  const char *srcs[1] = {src};
  cl_program prog = cl.CreateProgramWithSource(P.ctx, 1, srcs, &len, &err);
  free(src);
  if (!prog) {
    snprintf(why, whysize, "clCreateProgramWithSource: error %d", err);
    return NULL;
  }
  err = cl.BuildProgram(prog, 1, &P.dev, opts, NULL, NULL);
  if (err != CL_SUCCESS) {
    char log[2048] = "";
    cl.GetProgramBuildInfo(prog, P.dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    snprintf(why, whysize, "clBuildProgram %.40s %.200s: error %d: %.400s", file, opts, err, log);
    cl.ReleaseProgram(prog);
    return NULL;
  }
  cl_kernel k = cl.CreateKernel(prog, kernel, &err);
  if (!k) {
    snprintf(why, whysize, "clCreateKernel %s: error %d", kernel, err);
    cl.ReleaseProgram(prog);
    return NULL;
  }
  *pp = prog;
  return k;
}

/* kernel arguments: the next index and the first failure */
typedef struct clargs {
  cl_kernel k;
  cl_uint i;
  cl_int err;
} clargs;

static void cl_arg(clargs *a, size_t size, const void *v) {
  cl_int e = cl.SetKernelArg(a->k, a->i++, size, v);
  if (e != CL_SUCCESS && a->err == CL_SUCCESS)
    a->err = e;
}
static void carg_long(clargs *a, int64_t v) {
  cl_long x = v;
  cl_arg(a, sizeof x, &x);
}
/* PV1 / PV2 views of xpk_peer.clh: buffer, offset, shape, strides */
static void carg_v1(clargs *a, cl_mem *m, int64_t n) {
  cl_arg(a, sizeof *m, m);
  carg_long(a, 0);
  carg_long(a, n);
  carg_long(a, 1);
}
static void carg_v2(clargs *a, cl_mem *m, int64_t r, int64_t c) {
  cl_arg(a, sizeof *m, m);
  carg_long(a, 0);
  carg_long(a, r);
  carg_long(a, c);
  carg_long(a, c);
  carg_long(a, 1);
}
static void carg_range(clargs *a, int64_t n) {
  carg_long(a, n);
  carg_long(a, 1);
  carg_long(a, 1);
}

static cl_mem cbuf(void *host, size_t bytes, cl_int *err) {
  return cl.CreateBuffer(P.ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, host, err);
}

/* One small launch of a bench kernel on PoCL, checked. */
static bool pocl_launch(cl_kernel k, const kcase *kc, char *why, size_t whysize) {
  kdata d = {0};
  kdata_sizes(kc, &d);
  float *buf = malloc((d.na + d.nb + d.nc) * 4 + (MM_N * MM_N + AX_N) * 4);
  if (!buf) {
    snprintf(why, whysize, "out of memory");
    return false;
  }
  d.a = buf;
  d.b = d.a + d.na;
  d.c = d.b + d.nb;
  d.ref = d.c + d.nc;
  kdata_fill(kc, &d);
  cl_int err = 0;
  cl_mem ma = cbuf(d.a, d.na * 4, &err), mb = ma ? cbuf(d.b, d.nb * 4, &err) : NULL,
         mc = mb ? cbuf(d.c, d.nc * 4, &err) : NULL;
  bool ok = mc != NULL;
  clargs a = {k, 0, CL_SUCCESS};
  size_t g[2], l[2];
  cl_uint dims = 1;
  bool local = true;
  if (ok) {
    switch (kc->shape) {
    case S_AXPY: {
      float s = 3.0f;
      cl_arg(&a, sizeof s, &s);
      carg_v1(&a, &ma, AX_N);
      carg_v1(&a, &mb, AX_N);
      carg_range(&a, AX_N);
      g[0] = AX_N;
      local = false;
      break;
    }
    case S_BSUM:
      carg_v1(&a, &ma, BS_N);
      carg_v1(&a, &mb, 1);
      g[0] = BS_GLOBAL;
      l[0] = BS_LOCAL;
      break;
    default:
      carg_v2(&a, &ma, MM_N, MM_N);
      carg_v2(&a, &mb, MM_N, MM_N);
      carg_v2(&a, &mc, MM_N, MM_N);
      dims = 2;
      g[0] = g[1] = MM_N;
      l[0] = l[1] = MM_TILE;
      break;
    }
    err = a.err;
    if (err == CL_SUCCESS)
      err = cl.EnqueueNDRangeKernel(P.q, k, dims, NULL, g, local ? l : NULL, 0, NULL, NULL);
    cl_mem out = kc->shape == S_MATMUL ? mc : mb;
    float *host = kc->shape == S_MATMUL ? d.c : d.b;
    size_t bytes = (kc->shape == S_MATMUL ? d.nc : d.nb) * 4;
    if (err == CL_SUCCESS)
      err = cl.EnqueueReadBuffer(P.q, out, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
    if (err == CL_SUCCESS)
      err = cl.Finish(P.q);
    ok = err == CL_SUCCESS;
  }
  if (!ok)
    snprintf(why, whysize, "PoCL launch of %s: error %d", kc->kernel, err);
  else if (!kdata_check(kc, &d)) {
    snprintf(why, whysize, "PoCL %s: wrong result", kc->kernel);
    ok = false;
  }
  if (ma)
    cl.ReleaseMemObject(ma);
  if (mb)
    cl.ReleaseMemObject(mb);
  if (mc)
    cl.ReleaseMemObject(mc);
  free(buf);
  return ok;
}

/* --child pocl-probe: prints "ok" and the version on the next line */
static int child_pocl_probe(void) {
  char why[512];
  if (!pocl_open(why, sizeof why)) {
    printf("na %s\n", why);
    return 0;
  }
  printf("ok\nversion %s | %s\n", P.version, P.device);
  return 0;
}

/* --child pocl-get KERNEL: prints ok ctx_ms get_ms launch_ms */
static int child_pocl_get(int argc, char **argv) {
  if (argc < 3)
    return child_error("child pocl-get: arguments");
  const kcase *k = find_kcase(argv[2]);
  if (!k)
    return child_error("unknown kernel %s", argv[2]);
  char why[1024];
  double t0 = now_ms();
  if (!pocl_open(why, sizeof why))
    return child_error("PoCL: %s", why);
  double t1 = now_ms();
  cl_program prog;
  cl_kernel kern = pocl_get(k->cl_file, k->kernel, k->cl_defs, &prog, why, sizeof why);
  if (!kern)
    return child_error("%s", why);
  double t2 = now_ms();
  if (!pocl_launch(kern, k, why, sizeof why))
    return child_error("%s", why);
  double t3 = now_ms();
  printf("ok %.6f %.6f %.6f\n", t1 - t0, t2 - t1, t3 - t2);
  cl.ReleaseKernel(kern);
  cl.ReleaseProgram(prog);
  cl.ReleaseCommandQueue(P.q);
  cl.ReleaseContext(P.ctx);
  return 0;
}

/* --child pocl-whole: the 20-kernel program on PoCL; prints ok inchild_ms ctx_ms */
static int child_pocl_whole(void) {
  char why[1024];
  double t0 = now_ms();
  if (!pocl_open(why, sizeof why))
    return child_error("PoCL: %s", why);
  double t1 = now_ms();
  static double xs[W_N], ys[W_N]; /* 8-aligned storage for any of the types */
  void *x = xs, *y = ys;
  for (int kk = 0; kk < W_NK; kk++)
    for (int t = 0; t < W_NT; t++) {
      char defs[128];
      snprintf(defs, sizeof defs, "-DT=%s -DNDIM=1", w_cltypes[t]);
      cl_program prog;
      cl_kernel k = pocl_get("axpy.cl", w_kernels[kk], defs, &prog, why, sizeof why);
      if (!k)
        return child_error("%s", why);
      w_init(x, y, t);
      cl_int err = 0;
      size_t bytes = W_N * w_size(t);
      cl_mem mx = cbuf(x, bytes, &err), my = mx ? cbuf(y, bytes, &err) : NULL;
      if (!my)
        return child_error("clCreateBuffer: error %d", err);
      clargs a = {k, 0, CL_SUCCESS};
      unsigned ns = 0;
      for (const char *s = w_sig[kk]; *s; s++) {
        if (*s == 'x' || *s == 'y') {
          carg_v1(&a, *s == 'x' ? &mx : &my, W_N);
          continue;
        }
        double v = w_scal[kk][ns++];
        union {
          float f;
          double d;
          int32_t i;
          int64_t l;
        } u;
        w_put(&u, t, 0, v);
        cl_arg(&a, w_size(t), &u);
      }
      carg_range(&a, W_N);
      size_t g = W_N;
      err = a.err;
      if (err == CL_SUCCESS)
        err = cl.EnqueueNDRangeKernel(P.q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
      if (err == CL_SUCCESS)
        err = cl.EnqueueReadBuffer(P.q, mx, CL_TRUE, 0, bytes, x, 0, NULL, NULL);
      if (err == CL_SUCCESS)
        err = cl.EnqueueReadBuffer(P.q, my, CL_TRUE, 0, bytes, y, 0, NULL, NULL);
      if (err != CL_SUCCESS)
        return child_error("PoCL %s %s: error %d", w_kernels[kk], w_types[t], err);
      if (!w_check(kk, x, y, t))
        return child_error("PoCL %s %s: wrong result", w_kernels[kk], w_types[t]);
      cl.ReleaseMemObject(mx);
      cl.ReleaseMemObject(my);
      cl.ReleaseKernel(k);
      cl.ReleaseProgram(prog);
    }
  cl.ReleaseCommandQueue(P.q);
  cl.ReleaseContext(P.ctx);
  printf("ok %.6f %.6f\n", now_ms() - t0, t1 - t0);
  return 0;
}

/* --child pocl-launch: child_launch's loop on PoCL (clEnqueueNDRangeKernel,
 * clFinish); prints ok p10 p50 p90 in microseconds */
static int child_pocl_launch(void) {
  char why[1024];
  if (!pocl_open(why, sizeof why))
    return child_error("PoCL: %s", why);
  static float xs[W_N], ys[W_N];
  w_init(xs, ys, 0);
  cl_program prog;
  cl_kernel k = pocl_get("axpy.cl", "copy", "-DT=float -DNDIM=1", &prog, why, sizeof why);
  if (!k)
    return child_error("%s", why);
  cl_int err = 0;
  cl_mem mx = cbuf(xs, sizeof xs, &err), my = mx ? cbuf(ys, sizeof ys, &err) : NULL;
  if (!my)
    return child_error("clCreateBuffer: error %d", err);
  clargs a = {k, 0, CL_SUCCESS};
  carg_v1(&a, &mx, W_N);
  carg_v1(&a, &my, W_N);
  carg_range(&a, W_N);
  if (a.err != CL_SUCCESS)
    return child_error("clSetKernelArg: error %d", a.err);
  size_t g = W_N;
  static double us[LN];
  for (int i = -LN / 10; i < LN; i++) {
    double t0 = now_ms();
    err = cl.EnqueueNDRangeKernel(P.q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    if (err == CL_SUCCESS)
      err = cl.Finish(P.q);
    if (err != CL_SUCCESS)
      return child_error("PoCL copy: error %d", err);
    if (i >= 0)
      us[i] = (now_ms() - t0) * 1e3;
  }
  err = cl.EnqueueReadBuffer(P.q, my, CL_TRUE, 0, sizeof ys, ys, 0, NULL, NULL);
  if (err != CL_SUCCESS || !w_check(3, xs, ys, 0))
    return child_error("PoCL copy: wrong result (%d)", err);
  cl.ReleaseMemObject(mx);
  cl.ReleaseMemObject(my);
  cl.ReleaseKernel(k);
  cl.ReleaseProgram(prog);
  cl.ReleaseCommandQueue(P.q);
  cl.ReleaseContext(P.ctx);
  print_lat(us);
  return 0;
}

static int child_main(int argc, char **argv) {
  /* argv[0] --child MODE ... ; shift so that argv[1] is MODE */
  argc--;
  argv++;
  const char *mode = argv[1];
  if (!strcmp(mode, "get"))
    return child_get(argc, argv);
  if (!strcmp(mode, "split"))
    return child_split(argc, argv);
  if (!strcmp(mode, "whole"))
    return child_whole(argc, argv, true);
  if (!strcmp(mode, "bare"))
    return child_whole(argc, argv, false);
  if (!strcmp(mode, "l2api"))
    return child_l2api(argc, argv);
  if (!strcmp(mode, "l2replay"))
    return child_l2replay(argc, argv);
  if (!strcmp(mode, "pocl-probe"))
    return child_pocl_probe();
  if (!strcmp(mode, "pocl-get"))
    return child_pocl_get(argc, argv);
  if (!strcmp(mode, "pocl-whole"))
    return child_pocl_whole();
  if (!strcmp(mode, "launch"))
    return child_launch(argc, argv);
  if (!strcmp(mode, "pocl-launch"))
    return child_pocl_launch();
  if (!strcmp(mode, "nop")) { /* process start and exit, no xpjit call */
    printf("ok 0\n");
    return 0;
  }
  return child_error("unknown child mode %s", mode);
}

/* ---- the parent: files ---------------------------------------------------------------- */

/* A SQLite cache file and its WAL and shared-memory files. */
static void rm_db(const char *db) {
  char p[PATH_MAX + 16];
  unlink(db);
  snprintf(p, sizeof p, "%s-wal", db);
  unlink(p);
  snprintf(p, sizeof p, "%s-shm", db);
  unlink(p);
}

static void check_stop(void) {
  if (!stop_signal)
    return;
  if (*tmpdir && !opt_keep)
    redis_stop(), rm_tree(tmpdir);
  fprintf(stderr, "cache: interrupted (signal %d)%s\n", (int)stop_signal,
          opt_keep ? "" : "; removed the cache files");
  _exit(128 + (int)stop_signal);
}

static void on_signal(int sig) { stop_signal = sig; }

static unsigned long serial;
static void fresh_name(char *buf, size_t size, const char *what) {
  snprintf(buf, size, "%s/%s-%lu.db", tmpdir, what, serial++);
}

/* The redis-server of the Redis rows, or -1. */
static pid_t redis_pid = -1;
static void redis_stop(void) {
  bench_redis_stop(redis_pid);
  redis_pid = -1;
}

/* ---- the parent: results ---------------------------------------------------------------- */

typedef struct xres {
  series cold_get, cold_ctx, cold_launch; /* fresh process, empty cache */
  series warm_compile;                    /* this process, empty cache */
  series l2_get, l2_ctx, l2_prog, l2_sum, l2_launch, l2_wall;
  series l2ro_get;                  /* the same on a read-only cache (no use-time update) */
  series redis_get; /* fresh process, empty cache file, the kernel in Redis */
  series l1_same, l1_ctx;           /* per call */
  double l1_same_mean, l1_ctx_mean; /* batch means (ms per call) */
  int l1_ctx_calls;
  char l2db[PATH_MAX];
} xres;

static xres X[NT][NK];

typedef struct sres {
  series ctx, prog, l2open, get, spechash, l2get, jit, jit2, jitmake;
  double bytes;
} sres;
static sres S[2][NK]; /* [order][kernel] */

typedef struct tres {
  series open, get, close; /* l2api */
  int close_wrote;         /* l2api children whose close wrote the file */
  series step[NRS], rclose; /* l2replay */
} tres;
static tres T[NK];

typedef struct pres {
  series cold_ctx, cold_get, cold_launch, warm_ctx, warm_get, warm_launch;
  char warmdir[PATH_MAX];
} pres;
static pres PR[NK];
static bool pocl_ok;
static char pocl_desc[600];

static struct {
  series x_cold, x_warm, x_warm_inchild, x_cold_inchild, p_cold, p_warm;
  series nop;              /* spawn to waitpid of a child that does nothing */
  series bare;             /* the whole-process child without kernel work */
  series dbcreate;         /* creating an empty cache file (this process) */
  int warm_compiling_runs; /* warm runs that compiled anything */
  unsigned long long cold_compiles, warm_l2_hits, warm_l1_hits; /* of the last run */
  unsigned long long max_warm_compiles;
  char xdb[PATH_MAX], pdir[PATH_MAX];
} W;

static double timer_ns; /* p50 of back-to-back clock_gettime pairs */

/* ---- the parent: the cases ---------------------------------------------------------------- */

/* what a get child expects: a compile, an L2 hit, an L2 hit on a read-only cache */
enum { G_COLD, G_L2, G_L2RO, G_REDIS, G_REDIS_FILL };



static void xpjit_child_get(int ti, int ki, const char *db, int kind, bool record) {
  const kcase *k = &kcases[ki];
  bool expect_cache = kind == G_L2 || kind == G_L2RO;
  bool redis = kind == G_REDIS || kind == G_REDIS_FILL;
  const char *argv[] = {NULL,
                        "--child",
                        "get",
                        targets[ti],
                        k->kernel,
                        db,
                        kind == G_L2RO    ? "cache-ro"
                        : kind == G_REDIS ? "redis"
                        : expect_cache    ? "cache"
                                          : "compiled",
                        "1",
                        redis ? redis_url : "--examples",
                        redis ? "--examples" : opt_examples,
                        redis ? opt_examples : NULL,
                        NULL};
  double v[8], wall;
  char msg[1024];
  int n = run_child(argv, NULL, v, 8, &wall, msg, sizeof msg);
  if (n < 6) {
    fail("%s %s (%s): %s", targets[ti], k->label,
         kind == G_L2RO    ? "L2 hit, read-only"
         : kind == G_REDIS ? "Redis hit"
         : expect_cache    ? "L2 hit"
                           : "cold",
         n < 0 ? msg : "short reply");
    return;
  }
  if (!record)
    return;
  xres *r = &X[ti][ki];
  if (kind == G_REDIS) {
    add(&r->redis_get, v[2]);
  } else if (kind == G_L2RO) {
    add(&r->l2ro_get, v[2]);
  } else if (expect_cache) {
    add(&r->l2_ctx, v[0]);
    add(&r->l2_prog, v[1]);
    add(&r->l2_get, v[2]);
    add(&r->l2_sum, v[0] + v[1] + v[2]);
    if (!isnan(v[3]))
      add(&r->l2_launch, v[3]);
    add(&r->l2_wall, wall);
  } else {
    add(&r->cold_ctx, v[0]);
    add(&r->cold_get, v[2]);
    if (!isnan(v[3]))
      add(&r->cold_launch, v[3]);
  }
}

/* Creates an empty cache file (what a first use ever does), timed. */
/* After a Redis hit: the kernel was copied into the cache file db. */
static void check_copied(const char *db) {
  xpj_cache_config cfg = {.path = db, .mode = XPJ_CACHE_MODE_RO};
  xpj_cache *c = NULL;
  xpj_cache_stats s = {0};
  if (xpj_cache_open(&cfg, &c) != XPJ_OK || xpj_cache_get_stats(c, &s) != XPJ_OK ||
      s.entries != 1)
    fail("a Redis hit was not copied into the cache file %s (%llu entries)", db,
         (unsigned long long)s.entries);
  xpj_cache_close(c);
}

static void create_db(const char *db) {
  xpj_context *ctx = NULL;
  xpj_device *dev;
  xpj_status st = make_ctx(db, 1, &ctx, &dev);
  double t0 = now_ms();
  xpj_cache *c = st == XPJ_OK ? xpj_context_cache(ctx) : NULL;
  double t = now_ms() - t0;
  if (!c || xpj_cache_mode_of(c) != XPJ_CACHE_MODE_RW)
    fail("creating the cache file %s: %s", db, st != XPJ_OK ? xpj_last_error() : "not writable");
  else
    add(&W.dbcreate, t);
  xpj_context_destroy(ctx);
}

static void xpjit_warm_compile(int ti, int ki) {
  const kcase *k = &kcases[ki];
  char db[PATH_MAX], path[PATH_MAX + 64];
  fresh_name(db, sizeof db, "warm");
  xpath(path, sizeof path, opt_examples, k->xpk);
  xpj_context *ctx = NULL;
  xpj_device *dev;
  xpj_program *p = NULL;
  xpj_kernel *kern = NULL;
  xpj_status st = make_ctx(db, 1, &ctx, &dev);
  if (st == XPJ_OK)
    st = xpj_program_create_file(ctx, path, NULL, &p);
  if (st == XPJ_OK && !xpj_context_cache(ctx)) /* open (create) it first */
    st = XPJ_ERR_NOMEM;
  double t = 0;
  if (st == XPJ_OK) {
    double t0 = now_ms();
    st = get_one(p, dev, k, targets[ti], &kern);
    t = now_ms() - t0;
  }
  xpj_cache_counters c = {0};
  if (st == XPJ_OK)
    st = xpj_context_cache_counters(ctx, &c);
  if (st != XPJ_OK)
    fail("%s %s (warm compile): %s", targets[ti], k->label, xpj_last_error());
  else if (c.compiles != 1)
    fail("%s %s (warm compile): %llu compiles", targets[ti], k->label,
         (unsigned long long)c.compiles);
  else
    add(&X[ti][ki].warm_compile, t);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  rm_db(db);
}

static void xpjit_split(int ki, int order) {
  const kcase *k = &kcases[ki];
  const char *argv[] = {NULL,         "--child",     "split",
                        k->kernel,    X[0][ki].l2db, order ? "1" : "0",
                        "--examples", opt_examples,  NULL};
  double v[10], wall;
  char msg[1024];
  int n = run_child(argv, NULL, v, 10, &wall, msg, sizeof msg);
  if (n < 10) {
    fail("cpu %s (L2 breakdown): %s", k->label, n < 0 ? msg : "short reply");
    return;
  }
  sres *s = &S[order][ki];
  add(&s->ctx, v[0]);
  add(&s->prog, v[1]);
  add(&s->l2open, v[2]);
  add(&s->get, v[3]);
  add(&s->spechash, v[4]);
  add(&s->l2get, v[5]);
  add(&s->jit, v[6]);
  add(&s->jit2, v[7]);
  s->bytes = v[8];
  add(&s->jitmake, v[9]);
}

/* Every row of the cache file db: last used ago_ms before now (--stale). */
static void set_last_used(const char *db, double ago_ms) {
  sqlite3 *h = NULL;
  char sql[128];
  snprintf(sql, sizeof sql, "UPDATE entries SET last_used = %lld",
           (long long)((double)time(NULL) * 1e3 - ago_ms));
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
      sqlite3_busy_timeout(h, 10000) != SQLITE_OK ||
      sqlite3_exec(h, sql, NULL, NULL, NULL) != SQLITE_OK)
    fail("%s: %s", db, sqlite3_errmsg(h));
  sqlite3_close(h);
}

/* One l2api and one l2replay child on kernel ki's CPU cache file. */
static void xpjit_steps(int ki) {
  const kcase *k = &kcases[ki];
  const char *argv[] = {NULL, "--child", "l2api", k->kernel, X[0][ki].l2db,
                        "--examples", opt_examples, NULL};
  double v[NRS + 1], wall;
  char msg[1024];
  tres *t = &T[ki];
  if (opt_stale) /* the row's use time is due: a hit writes it at close */
    set_last_used(X[0][ki].l2db, 2 * 3600 * 1000);
  int got = run_child(argv, NULL, v, 4, &wall, msg, sizeof msg);
  if (got < 3) {
    fail("cpu %s (l2api): %s", k->label, msg);
  } else {
    add(&t->open, v[0]);
    add(&t->get, v[1]);
    add(&t->close, v[2]);
    t->close_wrote += got > 3 && v[3] != 0;
  }
  argv[2] = "l2replay";
  if (run_child(argv, NULL, v, NRS + 1, &wall, msg, sizeof msg) < NRS + 1) {
    fail("cpu %s (l2replay): %s", k->label, msg);
    return;
  }
  for (int i = 0; i < NRS; i++)
    add(&t->step[i], v[i]);
  add(&t->rclose, v[NRS]);
}

static char **pocl_env(const char *dir) {
  static char cd[PATH_MAX + 32];
  snprintf(cd, sizeof cd, "POCL_CACHE_DIR=%s", dir);
  const char *sets[] = {cd, "POCL_KERNEL_CACHE=1"};
  return child_env(sets, 2);
}

static void pocl_child_get(int ki, const char *dir, bool warm, bool record) {
  const kcase *k = &kcases[ki];
  const char *argv[] = {NULL,      "--child",      "pocl-get", k->kernel, "--peers",
                        opt_peers, "--opencl-lib", opt_opencl, NULL};
  char **env = pocl_env(dir);
  double v[4], wall;
  char msg[1024];
  int n = run_child(argv, env, v, 4, &wall, msg, sizeof msg);
  free(env);
  if (n < 3) {
    fail("PoCL %s (%s): %s", k->label, warm ? "warm" : "cold", n < 0 ? msg : "short reply");
    return;
  }
  if (!record)
    return;
  pres *r = &PR[ki];
  add(warm ? &r->warm_ctx : &r->cold_ctx, v[0]);
  add(warm ? &r->warm_get : &r->cold_get, v[1]);
  add(warm ? &r->warm_launch : &r->cold_launch, v[2]);
}

static void pocl_cold(int ki) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/pocl-cold-%lu", tmpdir, serial++);
  if (mkdir(dir, 0700) != 0) {
    fail("mkdir %s: %s", dir, strerror(errno));
    return;
  }
  pocl_child_get(ki, dir, false, true);
  rm_tree(dir);
}

static void whole_xpjit(const char *db, bool warm) {
  const char *argv[] = {NULL, "--child", "whole", db, "--examples", opt_examples, NULL};
  double v[6], wall;
  char msg[1024];
  int n = run_child(argv, NULL, v, 6, &wall, msg, sizeof msg);
  if (n < 5) {
    fail("whole process (%s): %s", warm ? "warm" : "cold", n < 0 ? msg : "short reply");
    return;
  }
  unsigned long long compiles = (unsigned long long)v[2];
  if (warm) {
    W.warm_l2_hits = (unsigned long long)v[3];
    W.warm_l1_hits = (unsigned long long)v[4];
    add(&W.x_warm, wall);
    add(&W.x_warm_inchild, v[0]);
    if (compiles) {
      W.warm_compiling_runs++;
      if (compiles > W.max_warm_compiles)
        W.max_warm_compiles = compiles;
      fail("whole process on a warm cache compiled %llu kernels (expected 0)", compiles);
    }
  } else {
    add(&W.x_cold, wall);
    add(&W.x_cold_inchild, v[0]);
    W.cold_compiles = compiles;
    if (compiles != W_NK * W_NT)
      fail("whole process on a cold cache compiled %llu kernels (expected %d)", compiles,
           W_NK * W_NT);
  }
}

static void whole_pocl(const char *dir, bool warm) {
  const char *argv[] = {NULL,      "--child",      "pocl-whole", "--peers",
                        opt_peers, "--opencl-lib", opt_opencl,   NULL};
  char **env = pocl_env(dir);
  double v[4], wall;
  char msg[1024];
  int n = run_child(argv, env, v, 4, &wall, msg, sizeof msg);
  free(env);
  if (n < 2) {
    fail("PoCL whole process (%s): %s", warm ? "warm" : "cold", n < 0 ? msg : "short reply");
    return;
  }
  add(warm ? &W.p_warm : &W.p_cold, wall);
}

/* First-level hits in this process, on the populated cache file of (ti, ki). */
/* --put-cost MB: what a put costs in a cache file that holds MB of 16 KiB
 * entries, in this process, on a handle opened after the file was filled
 * (as by a new process): p50 and p99 of 40 puts of new entries, with the
 * size limit above the file (the limit is checked, nothing is evicted)
 * and at it (each put evicts the least recently used entry). */
static int put_cost(int mb) {
  enum { ROW = 16 << 10, PUTS = 40 };
  char db[PATH_MAX];
  snprintf(db, sizeof db, "%s/put-cost.db", tmpdir);
  uint8_t *data = malloc(ROW);
  if (!data)
    return 1;
  for (int i = 0; i < ROW; i++)
    data[i] = (uint8_t)(i * 131 + (i >> 8));
  unsigned rows = (unsigned)mb * 64, next = 0;
  /* no limit while filling: the fill is not what is measured */
  xpj_cache_config cfg = {.path = db, .mode = XPJ_CACHE_MODE_RW, .max_size = UINT64_MAX};
  double t0 = now_ms();
  for (int phase = 0; phase < 3; phase++) {
    if (phase)
      cfg.max_size = phase == 1 ? 2ull * rows * ROW : (uint64_t)rows * ROW;
    xpj_cache *c = NULL;
    if (xpj_cache_open(&cfg, &c) != XPJ_OK || xpj_cache_mode_of(c) != XPJ_CACHE_MODE_RW) {
      fail("put-cost: %s", xpj_cache_last_error());
      xpj_cache_close(c);
      free(data);
      return 1;
    }
    series s = {0};
    for (unsigned i = 0; i < (phase ? (unsigned)PUTS : rows); i++, next++) {
      char code[65];
      snprintf(code, sizeof code, "%064x", next);
      xpj_cache_key k = {code, "k", "T=f32", 1, "cpu:bench", "O2", "bench=1"};
      xpj_cache_value v = {0, data, ROW, "k", "", 0, 0, 1.0, 0};
      double a = now_ms();
      xpj_cache_put(c, &k, &v);
      add(&s, now_ms() - a);
    }
    if (phase == 0)
      printf("filled %s with %u entries of %d KiB (%d MB) in %.1f s\n", db, rows, ROW >> 10, mb,
             (now_ms() - t0) / 1e3);
    else
      printf("put of a %d KiB entry into %d MB, limit %s: p50 %s, p99 %s (n %d)\n", ROW >> 10, mb,
             phase == 1 ? "twice the file (no eviction)" : "the file (evicts one)", FT(p50(&s)),
             FT(p99(&s)), s.n);
    free(s.v);
    xpj_cache_close(c);
  }
  free(data);
  return failures ? 1 : 0;
}

static void l1_case(int ti, int ki) {
  const kcase *k = &kcases[ki];
  xres *r = &X[ti][ki];
  char path[PATH_MAX + 64];
  xpath(path, sizeof path, opt_examples, k->xpk);
  xpj_context *ctx = NULL;
  xpj_device *dev;
  xpj_program *p = NULL;
  xpj_kernel *kern = NULL, *again = NULL;
  const char *target = targets[ti];
  bool is_cpu = !strcmp(target, "cpu");
  xpj_status st = make_ctx(r->l2db, 1, &ctx, &dev);
  if (st == XPJ_OK)
    st = xpj_program_create_file(ctx, path, NULL, &p);
  if (st == XPJ_OK)
    st = get_one(p, dev, k, target, &kern); /* from the L2 */
  if (st != XPJ_OK) {
    fail("%s %s (L1): %s", target, k->label, xpj_last_error());
    goto out;
  }
  xpj_kernel_info ki0;
  if (is_cpu && (xpj_kernel_get_info(kern, &ki0) != XPJ_OK || ki0.origin != XPJ_ORIGIN_CACHE)) {
    fail("cpu %s (L1): the first get did not come from the L2", k->label);
    goto out;
  }
  uint64_t want_l1 = 0; /* context first-level hits the calls below must make */
  if (is_cpu) {
    /* the same program: its own list of kernels */
    int calls = opt_l1_calls;
    for (int i = 0; i < calls && st == XPJ_OK; i++) {
      struct timespec a, b;
      clock_gettime(CLOCK_MONOTONIC, &a);
      st = xpj_program_get_kernel(p, k->kernel, k->dtypes, k->ndim, dev, NULL, &again);
      clock_gettime(CLOCK_MONOTONIC, &b);
      add(&r->l1_same,
          (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) * 1e-6);
      if (st == XPJ_OK && again != kern) {
        fail("cpu %s (L1, same program): a different kernel object", k->label);
        goto out;
      }
    }
    double t0 = now_ms();
    for (int i = 0; i < calls && st == XPJ_OK; i++)
      st = xpj_program_get_kernel(p, k->kernel, k->dtypes, k->ndim, dev, NULL, &again);
    r->l1_same_mean = (now_ms() - t0) / calls;
    if (st != XPJ_OK) {
      fail("cpu %s (L1, same program): %s", k->label, xpj_last_error());
      goto out;
    }
    /* a second program from the same file: the context's first level */
    int progs = opt_l1_calls / 100 < 200 ? 200 : opt_l1_calls / 100;
    double total = 0;
    for (int i = 0; i < progs && st == XPJ_OK; i++) {
      xpj_program *p2 = NULL;
      xpj_kernel *k2 = NULL;
      st = xpj_program_create_file(ctx, path, NULL, &p2);
      double t1 = now_ms();
      if (st == XPJ_OK)
        st = xpj_program_get_kernel(p2, k->kernel, k->dtypes, k->ndim, dev, NULL, &k2);
      double dt = now_ms() - t1;
      xpj_kernel_info info;
      if (st == XPJ_OK)
        st = xpj_kernel_get_info(k2, &info);
      if (st == XPJ_OK && info.origin != XPJ_ORIGIN_MEMORY) {
        fail("cpu %s (L1, second program): origin %d, expected MEMORY", k->label, (int)info.origin);
        xpj_program_destroy(p2);
        goto out;
      }
      add(&r->l1_ctx, dt);
      total += dt;
      xpj_program_destroy(p2);
    }
    r->l1_ctx_mean = total / progs;
    r->l1_ctx_calls = progs;
    want_l1 = (uint64_t)progs; /* the same program's calls never reach the context */
  } else {
    /* binaries: every call goes through the context's first level */
    int calls = opt_l1_calls / 10 < 1000 ? 1000 : opt_l1_calls / 10;
    for (int i = 0; i < calls && st == XPJ_OK; i++) {
      double t1 = now_ms();
      st = get_one(p, dev, k, target, NULL);
      add(&r->l1_ctx, now_ms() - t1);
    }
    double t0 = now_ms();
    for (int i = 0; i < calls && st == XPJ_OK; i++)
      st = get_one(p, dev, k, target, NULL);
    r->l1_ctx_mean = (now_ms() - t0) / calls;
    r->l1_ctx_calls = calls;
    want_l1 = 2 * (uint64_t)calls;
  }
  if (st != XPJ_OK)
    fail("%s %s (L1): %s", target, k->label, xpj_last_error());
  xpj_cache_counters c;
  if (st == XPJ_OK && xpj_context_cache_counters(ctx, &c) == XPJ_OK &&
      (c.compiles != 0 || c.l2_hits != 1 || c.l1_hits != want_l1))
    fail("%s %s (L1): counters compiles %llu, L2 hits %llu, L1 hits %llu (expected 0, 1, %llu)",
         target, k->label, (unsigned long long)c.compiles, (unsigned long long)c.l2_hits,
         (unsigned long long)c.l1_hits, (unsigned long long)want_l1);
out:
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
}

static void bare_child(const char *db) {
  const char *argv[] = {NULL, "--child", "bare", db, "--examples", opt_examples, NULL};
  double v[2], wall;
  char msg[1024];
  if (run_child(argv, NULL, v, 2, &wall, msg, sizeof msg) < 2)
    fail("bare child: %s", msg);
  else
    add(&W.bare, wall);
}

static void nop_child(void) {
  const char *argv[] = {NULL, "--child", "nop", NULL};
  double v[2], wall;
  char msg[1024];
  if (run_child(argv, NULL, v, 2, &wall, msg, sizeof msg) < 1)
    fail("nop child: %s", msg);
  else
    add(&W.nop, wall);
}

static void measure_timer(void) {
  series s = {0};
  for (int i = 0; i < 20000; i++) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    clock_gettime(CLOCK_MONOTONIC, &b);
    add(&s, (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec));
  }
  timer_ns = p50(&s);
  free(s.v);
}

/* ---- the parent: output --------------------------------------------------------------- */

static void row(const char *target, const char *kernel, const char *what, series *s, double cold,
                double warm) {
  if (!s->n)
    return;
  double m = p50(s), h = p99(s);
  printf("%-6s %-17s %-34s %9s %9s %6d %9s %9s\n", target, kernel, what, FT(m), FT(h), s->n,
         isnan(cold) ? "" : FR(cold / m), isnan(warm) ? "" : FR(warm / m));
}

static const char *short_target(int ti) { return ti == 0 ? "cpu" : ti == 1 ? "ptx" : "spirv"; }

static void steps_row(const char *name, const double v[NK]) {
  printf("%-54s", name);
  for (int ki = 0; ki < NK; ki++)
    printf(" %17s", FT(v[ki]));
  printf("\n");
}

/* The table of child_l2api and child_l2replay. */
static void print_steps(void) {
  static const char *const what[NRS] = {
#define REPLAY_WHAT(id, w) w,
      REPLAY_STEPS(REPLAY_WHAT)
#undef REPLAY_WHAT
  };
  printf("\nwhere a fresh-process L2 hit's cache work goes (CPU entry; p50 of n children; each "
         "child creates a context\nfirst, as an application would): the library's calls, and "
         "the same path replayed call by call\n");
  printf("%-54s", "step");
  for (int ki = 0; ki < NK; ki++)
    printf(" %17s", kcases[ki].label);
  printf("\n");
  for (int i = 0; i < NRS; i++) {
    printf("  %-52s", what[i]);
    for (int ki = 0; ki < NK; ki++)
      printf(" %17s", FT(p50(&T[ki].step[i])));
    printf("\n");
  }
  double sum[NK], lib[NK], open[NK], get[NK], close[NK], rclose[NK];
  for (int ki = 0; ki < NK; ki++) {
    tres *t = &T[ki];
    sum[ki] = 0;
    for (int i = 0; i < NRS; i++)
      sum[ki] += p50(&t->step[i]);
    open[ki] = p50(&t->open);
    get[ki] = p50(&t->get);
    lib[ki] = open[ki] + get[ki];
    close[ki] = p50(&t->close);
    rclose[ki] = p50(&t->rclose);
  }
  steps_row("sum of the steps (the replayed hit)", sum);
  steps_row("xpj_cache_open + xpj_cache_get (the library)", lib);
  steps_row("  xpj_cache_open", open);
  steps_row("  xpj_cache_get", get);
  steps_row(opt_stale ? "xpj_cache_close (the use time due: written)"
                      : "xpj_cache_close (the row used recently)",
            close);
  steps_row("sqlite3_close of the replay (read-only)", rclose);
  printf("n: %d children of each kind per kernel; closes that wrote the database or its WAL:",
         T[0].open.n);
  for (int ki = 0; ki < NK; ki++)
    printf(" %d", T[ki].close_wrote);
  printf("\n");
}

static void print_results(void) {
  printf("\nget kernel -> ready to launch: p50 and p99 (nearest rank) of n samples;\n"
         "ratios: compile p50 / this p50 (cold = compile in a fresh process, warm = compile in "
         "this process)\n");
  printf("%-6s %-17s %-34s %9s %9s %6s %9s %9s\n", "target", "kernel", "case", "p50", "p99", "n",
         "vs cold", "vs warm");
  for (int ti = 0; ti < NT; ti++)
    for (int ki = 0; ki < NK; ki++) {
      xres *r = &X[ti][ki];
      const char *t = short_target(ti), *kn = kcases[ki].label;
      double cold = p50(&r->cold_get), warm = p50(&r->warm_compile);
      bool cpu = ti == 0;
      row(t, kn, "compile, fresh process", &r->cold_get, cold, warm);
      row(t, kn, "compile, warm process", &r->warm_compile, cold, warm);
      row(t, kn, "L2 hit, fresh process (get)", &r->l2_get, cold, warm);
      row(t, kn, "L2 hit: ctx + parse + get", &r->l2_sum, cold, warm);
      row(t, kn, "L2 hit, read-only cache (get)", &r->l2ro_get, cold, warm);
      if (r->redis_get.n)
        row(t, kn, "Redis hit, fresh process (get)", &r->redis_get, cold, warm);
      if (cpu) {
        row(t, kn, "L1 hit, same program (per call)", &r->l1_same, cold, warm);
        row(t, kn, "L1 hit, 2nd program (ctx L1)", &r->l1_ctx, cold, warm);
      } else {
        row(t, kn, "L1 hit, get_binary (ctx L1)", &r->l1_ctx, cold, warm);
      }
      printf("\n");
    }
  printf("L1 batch means (timer overhead excluded; clock_gettime pair p50 %.0f ns):\n", timer_ns);
  for (int ti = 0; ti < NT; ti++)
    for (int ki = 0; ki < NK; ki++) {
      xres *r = &X[ti][ki];
      if (ti == 0)
        printf("  cpu    %-17s same program %s per call (%d calls); second program, first get "
               "%s (%d programs)\n",
               kcases[ki].label, FT(r->l1_same_mean), opt_l1_calls, FT(r->l1_ctx_mean),
               r->l1_ctx_calls);
      else
        printf("  %-6s %-17s get_binary %s per call (%d calls)\n", short_target(ti),
               kcases[ki].label, FT(r->l1_ctx_mean), r->l1_ctx_calls);
    }

  printf("\nfresh-process parts (p50): context creation (CPU device discovery, thread pool), "
         "program parse, get; first launch (CPU)\n");
  printf("%-6s %-17s %10s %10s %10s %10s %12s %12s %10s\n", "target", "kernel", "ctx cold",
         "ctx L2", "parse L2", "get L2", "get+ctx L2", "spawn->exit", "launch1");
  for (int ti = 0; ti < NT; ti++)
    for (int ki = 0; ki < NK; ki++) {
      xres *r = &X[ti][ki];
      printf("%-6s %-17s %10s %10s %10s %10s %12s %12s %10s\n", short_target(ti), kcases[ki].label,
             FT(p50(&r->cold_ctx)), FT(p50(&r->l2_ctx)), FT(p50(&r->l2_prog)), FT(p50(&r->l2_get)),
             FT(p50(&r->l2_sum)), FT(p50(&r->l2_wall)), ti == 0 ? FT(p50(&r->l2_launch)) : "-");
    }
  printf("creating an empty cache file (a first use ever; not in the rows above): p50 %s, p99 %s, "
         "n %d\n",
         FT(p50(&W.dbcreate)), FT(p99(&W.dbcreate)), W.dbcreate.n);

  printf("\nwhere a CPU L2 hit's get goes (child process, p50 of n): the L2 opened first; then\n"
         "  get first:    the get, then its parts repeated with the public APIs: specialise + "
         "hash, xpj_cache_get,\n"
         "                and the object loaded twice by runtime/elfload.c, as runtime/cpu.c "
         "loads a kernel\n"
         "  parts first:  the parts first (their first use in the process), then the get\n");
  printf("%-17s %-11s %2s %7s %7s %7s %7s | %9s %8s %8s %8s %8s %8s %7s\n", "kernel", "order", "n",
         "ctx", "parse", "L2 open", "get", "spec+hash", "L2 read", "-", "load 1", "load 2",
         "residual", "object");
  for (int ki = 0; ki < NK; ki++)
    for (int o = 0; o < 2; o++) {
      sres *s = &S[o][ki];
      if (!s->get.n)
        continue;
      double get = p50(&s->get), sh = p50(&s->spechash), lg = p50(&s->l2get), j = p50(&s->jit);
      printf("%-17s %-11s %2d %7s %7s %7s %7s | %9s %8s %8s %8s %8s %8s %5.0f B\n",
             kcases[ki].label, o ? "parts first" : "get first", s->get.n, FT(p50(&s->ctx)),
             FT(p50(&s->prog)), FT(p50(&s->l2open)), FT(get), FT(sh), FT(lg), FT(p50(&s->jitmake)),
             FT(j), FT(p50(&s->jit2)), o ? "-" : FT(get - sh - lg - j), s->bytes);
    }
  printf("  (residual = get - spec+hash - L2 read - load 1, with the parts of the same row: what "
         "the parts do\n   not cover (resolving the request, the L1 entry, the kernel object) "
         "plus what the get's first use\n   of SQLite and of the device's JIT costs more than "
         "the parts' second use; 'parts first': its get\n   is an L2 hit in a process that has "
         "used SQLite and the JIT before)\n");

  print_steps();

  printf("\npeer: PoCL kernel cache (CPU), fresh process each, clCreateProgramWithSource + "
         "clBuildProgram + clCreateKernel\n");
  if (!pocl_ok) {
    printf("peer: PoCL not available (%s)\n", pocl_desc);
  } else {
    printf("PoCL: %s\n", pocl_desc);
    printf("%-17s %-30s %9s %9s %5s | %-30s %9s %12s\n", "kernel", "PoCL case", "p50", "p99", "n",
           "xpjit (CPU) case", "p50", "PoCL/xpjit");
    for (int ki = 0; ki < NK; ki++) {
      pres *r = &PR[ki];
      xres *x = &X[0][ki];
      const char *kn = kcases[ki].label;
      series cg_l = {0}, wg_l = {0}, xc_l = {0}, xw_l = {0};
      for (int i = 0; i < r->cold_get.n && i < r->cold_launch.n; i++)
        add(&cg_l, r->cold_get.v[i] + r->cold_launch.v[i]);
      for (int i = 0; i < r->warm_get.n && i < r->warm_launch.n; i++)
        add(&wg_l, r->warm_get.v[i] + r->warm_launch.v[i]);
      for (int i = 0; i < x->cold_get.n && i < x->cold_launch.n; i++)
        add(&xc_l, x->cold_get.v[i] + x->cold_launch.v[i]);
      for (int i = 0; i < x->l2_get.n && i < x->l2_launch.n; i++)
        add(&xw_l, x->l2_get.v[i] + x->l2_launch.v[i]);
      struct {
        const char *pc;
        series *ps;
        const char *xc;
        series *xs;
      } rows[] = {
          {"cold: get kernel", &r->cold_get, "compile, fresh process", &x->cold_get},
          {"cold: get kernel + 1st launch", &cg_l, "compile + 1st launch", &xc_l},
          {"warm: get kernel (disk hit)", &r->warm_get, "L2 hit, fresh process", &x->l2_get},
          {"warm: get kernel + 1st launch", &wg_l, "L2 hit + 1st launch", &xw_l},
          {"context set-up, warm", &r->warm_ctx, "context creation, L2", &x->l2_ctx},
      };
      for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (!rows[i].ps->n)
          continue;
        double pm = p50(rows[i].ps), xm = p50(rows[i].xs);
        printf("%-17s %-30s %9s %9s %5d | %-30s %9s %12s\n", kn, rows[i].pc, FT(pm),
               FT(p99(rows[i].ps)), rows[i].ps->n, rows[i].xc, FT(xm), FR(pm / xm));
      }
      free(cg_l.v);
      free(wg_l.v);
      free(xc_l.v);
      free(xw_l.v);
    }
  }

  printf("\nwhole process: context, parse examples/axpy.xpk, 20 kernels (axpy axpby scale copy "
         "fill x f32 f64 i32 i64, ndim 1)\nlaunched once over %d elements each, waited and "
         "checked; spawn to waitpid\n",
         W_N);
  printf("%-36s %9s %9s %5s\n", "case", "p50", "p99", "n");
  printf("%-36s %9s %9s %5d\n", "xpjit, cold cache", FT(p50(&W.x_cold)), FT(p99(&W.x_cold)),
         W.x_cold.n);
  printf("%-36s %9s %9s %5d\n", "xpjit, warm cache", FT(p50(&W.x_warm)), FT(p99(&W.x_warm)),
         W.x_warm.n);
  printf("%-36s %9s %9s %5d\n", "  (of which inside main, warm)", FT(p50(&W.x_warm_inchild)),
         FT(p99(&W.x_warm_inchild)), W.x_warm_inchild.n);
  printf("%-36s %9s %9s %5d\n", "  (a child that does nothing)", FT(p50(&W.nop)), FT(p99(&W.nop)),
         W.nop.n);
  if (W.p_cold.n || W.p_warm.n) {
    printf("%-36s %9s %9s %5d\n", "PoCL, cold cache", FT(p50(&W.p_cold)), FT(p99(&W.p_cold)),
           W.p_cold.n);
    printf("%-36s %9s %9s %5d\n", "PoCL, warm cache", FT(p50(&W.p_warm)), FT(p99(&W.p_warm)),
           W.p_warm.n);
  }
  printf("xpjit cold / warm: %s", FR(p50(&W.x_cold) / p50(&W.x_warm)));
  if (W.p_cold.n && W.p_warm.n)
    printf("; PoCL cold / warm: %s; PoCL/xpjit cold %s, warm %s",
           FR(p50(&W.p_cold) / p50(&W.p_warm)), FR(p50(&W.p_cold) / p50(&W.x_cold)),
           FR(p50(&W.p_warm) / p50(&W.x_warm)));
  printf("\nxpjit counters: cold run %llu compiles; warm runs at most %llu compiles, the last "
         "one %llu L2 hits, %llu L1 hits\n",
         W.cold_compiles, W.max_warm_compiles, W.warm_l2_hits, W.warm_l1_hits);
  printf("xpjit warm runs that compiled anything: %d of %d\n", W.warm_compiling_runs, W.x_warm.n);

  printf("\ngoals\n");
  printf("  L2 hit >= 20x faster than a compile (p50 of the get in a fresh process, against the "
         "compile in a fresh / in a warm process):\n");
  for (int ti = 0; ti < NT; ti++)
    for (int ki = 0; ki < NK; ki++) {
      xres *r = &X[ti][ki];
      double l2 = p50(&r->l2_get), c1 = p50(&r->cold_get), c2 = p50(&r->warm_compile);
      double r1 = c1 / l2, r2 = c2 / l2;
      double ro = p50(&r->l2ro_get);
      printf("    %-6s %-17s L2 %9s  compile %9s / %9s  %7s / %7s  %-7s (read-only cache: %s, "
             "%s / %s)\n",
             short_target(ti), kcases[ki].label, FT(l2), FT(c1), FT(c2), FR(r1), FR(r2),
             r1 >= 20 && r2 >= 20   ? "met"
             : r1 >= 20 || r2 >= 20 ? "partly"
                                    : "MISSED",
             FT(ro), FR(c1 / ro), FR(c2 / ro));
    }
  if (redis_url[0]) {
    printf("  Redis hit in a fresh process within 2x of an L2 hit (p50 of the get; the Redis hit's "
           "copy into the cache file is written at close, outside the get, and checked):\n");
    for (int ti = 0; ti < NT; ti++)
      for (int ki = 0; ki < NK; ki++) {
        xres *r = &X[ti][ki];
        double rd = p50(&r->redis_get), l2 = p50(&r->l2_get);
        printf("    %-6s %-17s Redis %9s  L2 %9s  %7s  %s\n", short_target(ti), kcases[ki].label,
               FT(rd), FT(l2), FR(rd / l2), rd <= 2 * l2 ? "met" : "MISSED");
      }
  }
  printf("  L1 hit < 1 us (p50 per call):\n");
  for (int ti = 0; ti < NT; ti++)
    for (int ki = 0; ki < NK; ki++) {
      xres *r = &X[ti][ki];
      if (ti == 0) {
        double a = p50(&r->l1_same), b = p50(&r->l1_ctx);
        printf("    cpu    %-17s same program %9s %-6s  second program (context L1) %9s %s\n",
               kcases[ki].label, FT(a), a < 1e-3 ? "met" : "MISSED", FT(b),
               b < 1e-3 ? "met" : "MISSED");
      } else {
        double b = p50(&r->l1_ctx);
        printf("    %-6s %-17s get_binary (context L1) %9s %s\n", short_target(ti),
               kcases[ki].label, FT(b), b < 1e-3 ? "met" : "MISSED");
      }
    }
  printf("  warm process does no compiling: %s (%d of %d warm runs compiled; most %llu)\n",
         W.x_warm.n && !W.warm_compiling_runs ? "met" : "MISSED (FAIL)", W.warm_compiling_runs,
         W.x_warm.n, W.max_warm_compiles);
}

/* --whole-only: the 20-kernel program on a warm cache against the same
 * program without its kernel work (issue 19: within 1.5x) and an empty
 * process, interleaved; and whether the warm runs wrote the cache file. */
static int whole_only(void) {
  snprintf(W.xdb, sizeof W.xdb, "%s/whole-warm.db", tmpdir);
  whole_xpjit(W.xdb, false); /* fills it */
  W.x_cold.n = W.x_cold_inchild.n = 0;
  whole_xpjit(W.xdb, true); /* untimed: the page cache warm */
  W.x_warm.n = W.x_warm_inchild.n = 0;
  struct stat a, b;
  char wal[PATH_MAX + 8];
  snprintf(wal, sizeof wal, "%s-wal", W.xdb);
  stat(W.xdb, &a);
  off_t wal_a = 0, wal_b = 0;
  struct stat ws;
  if (stat(wal, &ws) == 0)
    wal_a = ws.st_size;
  for (int r = 0; r < opt_whole_runs; r++) {
    whole_xpjit(W.xdb, true);
    bare_child(W.xdb);
    nop_child();
  }
  stat(W.xdb, &b);
  if (stat(wal, &ws) == 0)
    wal_b = ws.st_size;
  bool wrote = a.st_size != b.st_size || a.st_mtim.tv_sec != b.st_mtim.tv_sec ||
               a.st_mtim.tv_nsec != b.st_mtim.tv_nsec || wal_a != wal_b;
  printf("\nwhole process: context, parse examples/axpy.xpk, 20 kernels (axpy axpby scale copy "
         "fill x f32 f64 i32 i64, ndim 1)\nlaunched once over %d elements each, waited and "
         "checked; spawn to waitpid\n",
         W_N);
  printf("%-44s %9s %9s %5s\n", "case", "p50", "p99", "n");
  printf("%-44s %9s %9s %5d\n", "xpjit, warm cache (20 L2 hits)", FT(p50(&W.x_warm)),
         FT(p99(&W.x_warm)), W.x_warm.n);
  printf("%-44s %9s %9s %5d\n", "  (of which inside main)", FT(p50(&W.x_warm_inchild)),
         FT(p99(&W.x_warm_inchild)), W.x_warm_inchild.n);
  printf("%-44s %9s %9s %5d\n", "the same without kernel work (no cache use)",
         FT(p50(&W.bare)), FT(p99(&W.bare)), W.bare.n);
  printf("%-44s %9s %9s %5d\n", "a child that does nothing", FT(p50(&W.nop)), FT(p99(&W.nop)),
         W.nop.n);
  double ratio = p50(&W.x_warm) / p50(&W.bare);
  printf("warm / without kernel work: %s (goal 1.5x: %s); warm - without: %s\n", FR(ratio),
         ratio <= 1.5 ? "met" : "MISSED", FT(p50(&W.x_warm) - p50(&W.bare)));
  printf("the warm runs wrote the cache file (database or WAL): %s; last run: %llu L2 hits, %llu "
         "L1 hits\n",
         wrote ? "yes" : "no", W.warm_l2_hits, W.warm_l1_hits);
  if (failures)
    printf("\n%d FAILURES\n", failures);
  return failures ? 1 : 0;
}

/* ---- a small launch: launch and wait, waiting thread helping or not, PoCL ----------- */

/* One child of each kind per round, interleaved (rounds: opt_rounds); the
 * table is the median over the rounds of each child's p10/p50/p90 of LN
 * launch+wait pairs of copy<f32> over W_N elements on one thread. */
static int launch_section(void) {
  char db[PATH_MAX];
  snprintf(db, sizeof db, "%s/launch.db", tmpdir);
  char pd[PATH_MAX];
  snprintf(pd, sizeof pd, "%s/pocl-launch", tmpdir);
  mkdir(pd, 0700);
  series v[3][3]; /* [help, no help, PoCL][p10, p50, p90] */
  memset(v, 0, sizeof v);
  bool pocl_failed = false;
  for (int r = 0; r < opt_rounds; r++)
    for (int c = 0; c < 3; c++) {
      if (c == 2 && (!pocl_ok || pocl_failed))
        continue;
      const char *xa[] = {NULL, "--child", "launch", db, c == 0 ? "1" : "0", "--examples",
                          opt_examples, NULL};
      const char *pa[] = {NULL, "--child", "pocl-launch", "--peers", opt_peers,
                          "--opencl-lib", opt_opencl, NULL};
      double out[3], wall;
      char msg[1024];
      int n = run_child(c == 2 ? pa : xa, c == 2 ? pocl_env(pd) : NULL, out, 3, &wall, msg,
                        sizeof msg);
      if (n < 3) {
        if (c == 2) {
          pocl_failed = true;
          printf("PoCL launch child: %s\n", n < 0 ? msg : "short reply");
          continue;
        }
        fail("launch child (help %d): %s", c == 0, n < 0 ? msg : "short reply");
        return 1;
      }
      for (int i = 0; i < 3; i++)
        add(&v[c][i], out[i]);
    }
  printf("\nsmall launch: copy<f32> over %d elements, xpj_launch + xpj_queue_wait (clEnqueueNDRange"
         "Kernel + clFinish)\non one thread, %d times per child after %d untimed; median over "
         "%d children of each\n",
         W_N, LN, LN / 10, opt_rounds);
  printf("%-52s %9s %9s %9s\n", "case", "p10", "p50", "p90");
  static const char *const names[3] = {"xpjit, the waiting thread runs it (default)",
                                       "xpjit, XPJIT_QUEUE_HELP=0 (the queue's thread)",
                                       "PoCL"};
  for (int c = 0; c < 3; c++) {
    if (!v[c][1].n)
      continue;
    printf("%-52s %7.2f us %7.2f us %7.2f us\n", names[c], p50(&v[c][0]), p50(&v[c][1]),
           p50(&v[c][2]));
  }
  if (v[1][1].n)
    printf("p50 queue's thread / waiting thread: %.1fx\n", p50(&v[1][1]) / p50(&v[0][1]));
  if (v[2][1].n)
    printf("p50 PoCL / xpjit: %.1fx\n", p50(&v[2][1]) / p50(&v[0][1]));
  return 0;
}

/* ---- main ------------------------------------------------------------------------------- */

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--quick] [--rounds N] [--l2-runs N] [--l1-calls N] [--whole-runs N]\n"
          "          [--no-pocl] [--opencl-lib PATH] [--examples DIR] [--peers DIR] [--keep]\n"
          "          [--steps-only [--stale]] [--whole-only] [--launch-only] [--put-cost MB]\n",
          argv0);
  exit(2);
}

int main(int argc, char **argv) {
  bool child = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has = i + 1 < argc;
    if (!strcmp(a, "--child")) {
      child = true;
      break;
    } else if (!strcmp(a, "--quick")) {
      opt_rounds = 3, opt_l2_runs = 9, opt_l1_calls = 20000, opt_whole_runs = 3;
    } else if (!strcmp(a, "--rounds") && has) {
      opt_rounds = atoi(argv[++i]);
    } else if (!strcmp(a, "--l2-runs") && has) {
      opt_l2_runs = atoi(argv[++i]);
    } else if (!strcmp(a, "--l1-calls") && has) {
      opt_l1_calls = atoi(argv[++i]);
    } else if (!strcmp(a, "--whole-runs") && has) {
      opt_whole_runs = atoi(argv[++i]);
    } else if (!strcmp(a, "--no-pocl")) {
      opt_pocl = false;
    } else if (!strcmp(a, "--opencl-lib") && has) {
      opt_opencl = argv[++i];
    } else if (!strcmp(a, "--examples") && has) {
      snprintf(opt_examples, sizeof opt_examples, "%s", argv[++i]);
    } else if (!strcmp(a, "--peers") && has) {
      snprintf(opt_peers, sizeof opt_peers, "%s", argv[++i]);
    } else if (!strcmp(a, "--keep")) {
      opt_keep = true;
    } else if (!strcmp(a, "--steps-only")) {
      opt_steps_only = true;
      opt_pocl = false;
    } else if (!strcmp(a, "--stale")) {
      opt_stale = true;
    } else if (!strcmp(a, "--whole-only")) {
      opt_whole_only = true;
      opt_pocl = false;
    } else if (!strcmp(a, "--launch-only")) {
      opt_launch_only = true;
    } else if (!strcmp(a, "--put-cost") && has) {
      opt_put_cost_mb = atoi(argv[++i]);
    } else {
      usage(argv[0]);
    }
  }
  if (child) {
    /* options after the mode: --examples, --peers, --opencl-lib */
    for (int i = 1; i + 1 < argc; i++) {
      if (!strcmp(argv[i], "--examples"))
        snprintf(opt_examples, sizeof opt_examples, "%s", argv[i + 1]);
      else if (!strcmp(argv[i], "--peers"))
        snprintf(opt_peers, sizeof opt_peers, "%s", argv[i + 1]);
      else if (!strcmp(argv[i], "--opencl-lib"))
        opt_opencl = argv[i + 1];
    }
    int c = 1;
    while (strcmp(argv[c], "--child"))
      c++;
    return child_main(argc - c + 1, argv + c - 1);
  }
  if (opt_rounds < 1 || opt_l2_runs < 1 || opt_l1_calls < 1 || opt_whole_runs < 1)
    usage(argv[0]);

  char rp[PATH_MAX];
  if (!realpath(opt_examples, rp)) {
    fprintf(stderr, "cache: %s: %s (run from the repository root, or --examples DIR)\n",
            opt_examples, strerror(errno));
    return 2;
  }
  snprintf(opt_examples, sizeof opt_examples, "%s", rp);
  if (realpath(opt_peers, rp))
    snprintf(opt_peers, sizeof opt_peers, "%s", rp);
  ssize_t sl = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
  if (sl <= 0) {
    if (!realpath(argv[0], self_exe)) {
      fprintf(stderr, "cache: cannot find this program's path\n");
      return 2;
    }
  } else {
    self_exe[sl] = 0;
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/xpjit-bench-cache.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(tmpdir)) {
    fprintf(stderr, "cache: mkdtemp %s: %s\n", tmpdir, strerror(errno));
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN); /* a closed stdout must not skip the clean-up */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  /* what runs where */
  char model[256], la[64], date[64];
  cpu_model(model, sizeof model);
  loadavg(la, sizeof la);
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d %H:%M", localtime(&now));
  struct utsname un;
  uname(&un);
  xpj_device_info di;
  {
    xpj_context *ctx;
    xpj_device *dev;
    char db[PATH_MAX];
    fresh_name(db, sizeof db, "info");
    if (make_ctx(db, 1, &ctx, &dev) != XPJ_OK || xpj_device_get_info(dev, &di) != XPJ_OK) {
      fprintf(stderr, "cache: no xpjit CPU device: %s\n", xpj_last_error());
      redis_stop(), rm_tree(tmpdir);
      return 1;
    }
    xpj_context_destroy(ctx);
    rm_db(db);
  }
  if (opt_pocl) {
    const char *argv2[] = {NULL, "--child", "pocl-probe", "--opencl-lib", opt_opencl, NULL};
    char pd[PATH_MAX];
    snprintf(pd, sizeof pd, "%s/pocl-probe", tmpdir);
    mkdir(pd, 0700);
    char **env = pocl_env(pd);
    int pfd[2];
    /* the probe prints "ok" or "na WHY": read it raw */
    if (pipe(pfd) == 0) {
      posix_spawn_file_actions_t fa;
      posix_spawn_file_actions_init(&fa);
      posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
      posix_spawn_file_actions_addclose(&fa, pfd[0]);
      posix_spawn_file_actions_addclose(&fa, pfd[1]);
      argv2[0] = self_exe;
      pid_t pid;
      int rc = posix_spawn(&pid, self_exe, &fa, NULL, (char *const *)argv2, env);
      posix_spawn_file_actions_destroy(&fa);
      close(pfd[1]);
      char out[2048] = "";
      size_t len = 0;
      ssize_t r;
      while (rc == 0 && len < sizeof out - 1 &&
             (r = read(pfd[0], out + len, sizeof out - 1 - len)) > 0)
        len += (size_t)r;
      out[len] = 0;
      close(pfd[0]);
      int status = 0;
      if (rc == 0)
        waitpid(pid, &status, 0);
      char *v = strstr(out, "\nversion ");
      if (rc == 0 && !strncmp(out, "ok", 2) && v) {
        pocl_ok = true;
        snprintf(pocl_desc, sizeof pocl_desc, "%s", v + 9);
        pocl_desc[strcspn(pocl_desc, "\n")] = 0;
      } else {
        snprintf(pocl_desc, sizeof pocl_desc, "%.500s",
                 !strncmp(out, "na ", 3) ? out + 3
                 : rc                    ? strerror(rc)
                                         : "probe failed");
        pocl_desc[500] = 0;
        oneline(pocl_desc);
        for (size_t L = strlen(pocl_desc); L && pocl_desc[L - 1] == ' ';)
          pocl_desc[--L] = 0;
      }
    }
    free(env);
    rm_tree(pd);
  } else {
    snprintf(pocl_desc, sizeof pocl_desc, "disabled (--no-pocl)");
  }

  printf("bench/cache: compile cache, get kernel -> ready to launch; xpjit vs PoCL's kernel "
         "cache\n");
  printf("command:   ");
  for (int i = 0; i < argc; i++)
    printf("%s%s", i ? " " : "", argv[i]);
  printf("\ndate:      %s\n", date);
  printf("machine:   %s %s, %s, %ld online cores\n", un.sysname, un.machine, model,
         sysconf(_SC_NPROCESSORS_ONLN));
  printf("xpjit:     %s, LLVM %s, ABI %u, device %s, target %.60s...\n", XPJ_VERSION_STRING,
         xpj_llvm_version(), xpj_abi_version(), "cpu:0", di.target);
  printf("PoCL:      %s\n", pocl_ok ? pocl_desc : "not available");
  printf("kernels:   axpy<f32> ndim 1 (axpy.xpk), block_sum<f32> (reduce.xpk), "
         "matmul_tiled<f32> (matmul.xpk); O2, compiles in a worker process\n");
  printf("targets:   cpu (xpj_program_get_kernel: L1/L2/compile + load by elfload.c), ptx:sm_90 and "
         "spirv (xpj_program_get_binary)\n");
  printf("caches:    private files under %s (removed at the end); PoCL: POCL_CACHE_DIR under it\n",
         tmpdir);
  if (opt_put_cost_mb)
    printf("samples:   40 puts per case (--put-cost)\n");
  else if (opt_steps_only)
    printf("samples:   %d rounds of an l2api and an l2replay child per kernel (--steps-only%s)\n",
           opt_l2_runs, opt_stale ? ", --stale: the rows last used 2 hours before each" : "");
  else if (opt_whole_only)
    printf("samples:   %d rounds of a warm whole-process child, the same child without kernel "
           "work and a child that does nothing (--whole-only)\n",
           opt_whole_runs);
  else
    printf("samples:   %d rounds, interleaved: per round and kernel, per target one cold child, "
           "one warm compile,\n           %d L2 children; PoCL %d cold, %d warm; L1 %d calls; "
           "whole process %d cold, %d warm\n",
           opt_rounds, (opt_l2_runs + opt_rounds - 1) / opt_rounds, (opt_rounds + 1) / 2,
           (opt_l2_runs + opt_rounds - 1) / opt_rounds, opt_l1_calls, (opt_whole_runs + 2) / 3,
           opt_whole_runs);
  printf("load:      %s (before)\n", la);
  if (!pocl_ok)
    printf("peer: PoCL not available (%s)\n", pocl_desc);
  measure_timer();

  if (opt_put_cost_mb > 0) {
    int rc = put_cost(opt_put_cost_mb);
    if (!opt_keep)
      rm_tree(tmpdir);
    return rc;
  }
  if (opt_launch_only) {
    int rc = launch_section();
    if (!opt_keep)
      rm_tree(tmpdir);
    return rc || failures ? 1 : 0;
  }
  if (opt_whole_only) {
    int rc = whole_only();
    if (!opt_keep)
      rm_tree(tmpdir);
    else
      printf("\nkept %s\n", tmpdir);
    return rc;
  }
  double t_start = now_ms();
  /* populate: one untimed cold child per target and kernel fills its L2
   * file (and warms the page cache); PoCL's warm directories likewise */
  for (int ti = 0; ti < (opt_steps_only ? 1 : NT); ti++)
    for (int ki = 0; ki < NK; ki++) {
      snprintf(X[ti][ki].l2db, sizeof X[ti][ki].l2db, "%s/l2-%s-%s.db", tmpdir, short_target(ti),
               kcases[ki].kernel);
      xpjit_child_get(ti, ki, X[ti][ki].l2db, G_COLD, false);
    }
  if (opt_steps_only) {
    for (int r = 0; r < opt_l2_runs; r++)
      for (int ki = 0; ki < NK; ki++)
        xpjit_steps(ki);
    print_steps();
    if (!opt_keep)
      rm_tree(tmpdir);
    else
      printf("\nkept %s\n", tmpdir);
    return failures ? 1 : 0;
  }
  if (pocl_ok)
    for (int ki = 0; ki < NK; ki++) {
      snprintf(PR[ki].warmdir, sizeof PR[ki].warmdir, "%s/pocl-warm-%s", tmpdir, kcases[ki].kernel);
      mkdir(PR[ki].warmdir, 0700);
      pocl_child_get(ki, PR[ki].warmdir, false, false);
    }
  /* the Redis rows: every kernel compiled once into a Redis of our own */
  char rsock[PATH_MAX], rwhy[PATH_MAX + 64];
  redis_pid = bench_redis_start(tmpdir, rsock, sizeof rsock, rwhy, sizeof rwhy);
  if (redis_pid > 0)
    snprintf(redis_url, sizeof redis_url, "unix:%s", rsock);
  if (redis_url[0])
    for (int ti = 0; ti < NT; ti++)
      for (int ki = 0; ki < NK; ki++) {
        char db[PATH_MAX];
        fresh_name(db, sizeof db, "redis-fill");
        xpjit_child_get(ti, ki, db, G_REDIS_FILL, false);
        rm_db(db);
      }
  else
    printf("peer: no Redis rows (%s)\n", rwhy);
  /* one untimed compile in this process: after it, this process is warm */
  xpjit_warm_compile(0, 0);
  X[0][0].warm_compile.n = 0;
  printf("populated in %.1f s\n", (now_ms() - t_start) / 1e3);

  int l2_per_round = (opt_l2_runs + opt_rounds - 1) / opt_rounds;
  for (int r = 0; r < opt_rounds; r++) {
    for (int ki = 0; ki < NK; ki++) {
      for (int ti = 0; ti < NT; ti++) {
        char db[PATH_MAX];
        fresh_name(db, sizeof db, "cold");
        create_db(db);
        xpjit_child_get(ti, ki, db, G_COLD, true);
        rm_db(db);
        xpjit_warm_compile(ti, ki);
        for (int j = 0; j < l2_per_round && X[ti][ki].l2_get.n < opt_l2_runs; j++)
          xpjit_child_get(ti, ki, X[ti][ki].l2db, G_L2, true);
        for (int j = 0; j < 2 && X[ti][ki].l2ro_get.n < opt_l2_runs / 3; j++)
          xpjit_child_get(ti, ki, X[ti][ki].l2db, G_L2RO, true);
        /* a Redis hit: a fresh process on an existing, empty cache file,
         * which the hit is then written into (the default path: with the
         * file's next write or at close, outside the timed get; checked) */
        for (int j = 0; redis_url[0] && j < l2_per_round && X[ti][ki].redis_get.n < opt_l2_runs;
             j++) {
          fresh_name(db, sizeof db, "redis");
          create_db(db);
          xpjit_child_get(ti, ki, db, G_REDIS, true);
          check_copied(db);
          rm_db(db);
        }
      }
      xpjit_split(ki, 0);
      xpjit_split(ki, 1);
      for (int j = 0; j < l2_per_round && T[ki].open.n < opt_l2_runs; j++)
        xpjit_steps(ki);
      if (pocl_ok) {
        if (r % 2 == 0)
          pocl_cold(ki);
        for (int j = 0; j < l2_per_round && PR[ki].warm_get.n < opt_l2_runs; j++)
          pocl_child_get(ki, PR[ki].warmdir, true, true);
      }
    }
    printf("round %d of %d done at %.1f s\n", r + 1, opt_rounds, (now_ms() - t_start) / 1e3);
  }

  for (int ti = 0; ti < NT; ti++)
    for (int ki = 0; ki < NK; ki++)
      l1_case(ti, ki);
  printf("L1 done at %.1f s\n", (now_ms() - t_start) / 1e3);

  /* whole process: populate the warm cache, then interleave */
  snprintf(W.xdb, sizeof W.xdb, "%s/whole-warm.db", tmpdir);
  snprintf(W.pdir, sizeof W.pdir, "%s/pocl-whole-warm", tmpdir);
  whole_xpjit(W.xdb, false);
  W.x_cold.n = W.x_cold_inchild.n = 0;
  if (pocl_ok) {
    mkdir(W.pdir, 0700);
    whole_pocl(W.pdir, false);
    W.p_cold.n = 0;
  }
  int cold_runs = (opt_whole_runs + 2) / 3;
  for (int r = 0; r < opt_whole_runs; r++) {
    if (r < cold_runs) {
      char db[PATH_MAX];
      fresh_name(db, sizeof db, "whole-cold");
      whole_xpjit(db, false);
      rm_db(db);
    }
    whole_xpjit(W.xdb, true);
    nop_child();
    if (pocl_ok) {
      if (r < (cold_runs + 1) / 2) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s/pocl-whole-cold-%lu", tmpdir, serial++);
        mkdir(dir, 0700);
        whole_pocl(dir, false);
        rm_tree(dir);
      }
      if (r < (opt_whole_runs + 1) / 2)
        whole_pocl(W.pdir, true);
    }
  }
  loadavg(la, sizeof la);
  printf("whole process done at %.1f s; load %s (after)\n", (now_ms() - t_start) / 1e3, la);

  print_results();
  launch_section();
  if (!opt_keep)
    redis_stop(), rm_tree(tmpdir);
  else
    printf("\nkept %s\n", tmpdir);
  if (failures)
    printf("\n%d FAILURES\n", failures);
  return failures ? 1 : 0;
}
