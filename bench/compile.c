/*
 * bench/compile.c - per-kernel compile latency against NVRTC and clang.
 *
 * For every kernel of every example file and every target (spirv:1.2,
 * ptx:sm_90, cpu), the time from kernel source text to validated output:
 * xpj_parse of the file + xpj_specialize + xpj_compile (O2), with the
 * product's default isolation (a worker process per compile) and, for PTX
 * and the CPU, also in process (XPJ_ISOLATE_NONE), so the cost of the
 * worker is visible. Median of repeated runs, taken in rounds (run r of
 * every kernel, shuffled, before run r + 1 of any; --back-to-back: all
 * runs of one kernel together); each summary line is
 * followed by the same of each side's fastest run. Type parameters are bound to
 * f32 where the kernel accepts it, else the first of i32 u32 i64 f64 that
 * it accepts; generic-rank kernels get ndim 2.
 *
 * Peers, timed in the same run, interleaved with xpjit run by run, on the
 * same kernels written in their languages (bench/peers/compile/NAME.cu and
 * NAME.cl, one per examples/NAME.xpk, equivalent algorithms, the same
 * argument lists):
 *   - NVRTC (libnvrtc.so, loaded with dlopen) compiling the CUDA C kernel
 *     to PTX for compute_90: nvrtcCreateProgram + nvrtcAddNameExpression +
 *     nvrtcCompileProgram + nvrtcGetPTX, in process, like xpjit's library;
 *   - clang-22 compiling the OpenCL C 2.0 kernel to SPIR-V (a whole
 *     process, start-up included), next to xpjit's library and next to
 *     `xpjit-cli emit` as a whole process too.
 * Ratios are peer / xpjit: above 1 means xpjit is faster.
 *
 * NVRTC and the in-process compiles run in helper processes forked at
 * start-up, so that this process, which forks xpjit's compile workers,
 * keeps a small footprint (fork cost grows with the parent's mappings) and
 * LLVM is never initialised in it. A helper answers one request at a time;
 * nothing runs concurrently with a measurement.
 *
 * --isolation-cost N: then, for the first kernel, PTX, N compiles each in
 * process (the helper), isolated with 20 ms between them, and isolated
 * back to back: what the compile server's isolation costs (p50).
 *
 * --fresh N: then, for the first kernel, PTX, a program's first compile
 * as a whole process, N times each, alternated: `xpjit-cli emit` (process
 * start, the compile server's start, the compile, exit) against this
 * program re-run to make one NVRTC compile (start, dlopen of libnvrtc, the
 * compile, exit), and a process that does nothing (/bin/true) for scale.
 *
 * --startup N: then a program's start-up as a whole process, N times
 * each, alternated: every PTX kernel of the first file compiled back to
 * back by xpjit (default isolation: the compile server starts cold with
 * the process) and by NVRTC, and a process that does nothing for scale.
 *
 * --save-ptx DIR: every PTX output is also written (outside the timing)
 * to DIR/xpjit/FILE.KERNEL.ptx and DIR/nvrtc/FILE.KERNEL.ptx, for
 * bench/sass.py to compare what ptxas makes of the two.
 *
 * usage: compile [-n RUNS] [--clang PATH] [--nvrtc PATH] [--cli PATH]
 *                [--peers DIR] [--targets spirv,ptx,cpu]
 *                [--isolation-cost N] [--fresh N] [--startup N]
 *                [--save-ptx DIR] [--back-to-back]
 *                FILE.xpk...
 */
#include "xpjit_codegen.h"
#include "xpjit_compiler.h"
#include "xpjit_ir.h"
#include "bench_util.h"
#include "nvrtc.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum { T_SPIRV, T_PTX, T_CPU, NTARGETS };
static const char *const target_str[NTARGETS] = {"spirv", "ptx:sm_90", "cpu"};

/* what one measurement is of */
enum {
  M_XPJIT,    /* library, default isolation (worker process) */
  M_XPJIT_NP, /* library, in process (PTX, CPU) */
  M_CLI,      /* xpjit-cli emit, whole process (SPIR-V) */
  M_CLANG,    /* clang-22 OpenCL C -> SPIR-V, whole process */
  M_NVRTC,    /* NVRTC CUDA C -> PTX, in process */
  NKINDS
};

enum { S_SKIP = 0, S_OK, S_NA, S_FAIL };

typedef struct meas {
  int state;     /* S_* */
  double ms;     /* median */
  double best;   /* the fastest run */
  char msg[320]; /* S_FAIL / S_NA: why */
} meas;

typedef struct src_file {
  const char *path;
  const char *base; /* file name without directory and .xpk */
  char *text;
  size_t len;
  char *cu; /* peer sources (NULL: missing) */
  char cl_path[1024];
  bool has_cl;
} src_file;

typedef struct krow {
  int file;
  char name[96];
  unsigned ntp;
  const char *tpn[XPJ_MAX_TPARAMS];
  xpj_scalar type; /* binding of every type parameter */
  unsigned ndim;   /* 0: fixed rank */
  bool spec_ok;
  char spec_err[320];
  meas m[NTARGETS][NKINDS];
} krow;

static src_file *files;
static int nfiles;
static krow *rows;
static int nrows;
static int runs = 5;
static const char *clang_path = "clang-22";
static const char *nvrtc_path = "/usr/local/cuda/lib64/libnvrtc.so";
static const char *cli_path = "build/bin/xpjit-cli";
static const char *peer_dir = "bench/peers/compile";
static const char *save_dir; /* --save-ptx */
static bool back_to_back;    /* --back-to-back: all runs of a kernel together */

/* Writes a PTX output to save_dir/WHO/FILE.KERNEL.ptx (when asked). */
static void save_ptx(const char *who, const krow *k, const void *ptx, size_t n) {
  if (!save_dir)
    return;
  char path[1400];
  int len = snprintf(path, sizeof path, "%s/%s/", save_dir, who);
  for (int i = 1; i < len && len < (int)sizeof path; i++)
    if (path[i] == '/') { /* DIR and DIR/WHO, parents included */
      path[i] = 0;
      mkdir(path, 0755);
      path[i] = '/';
    }
  len = snprintf(path, sizeof path, "%s/%s/%s.%s.ptx", save_dir, who,
                 files[k->file].base, k->name);
  FILE *f = len < (int)sizeof path ? fopen(path, "wb") : NULL;
  if (!f || fwrite(ptx, 1, n, f) != n)
    fprintf(stderr, "--save-ptx: cannot write %s\n", path);
  if (f)
    fclose(f);
}
static bool want[NTARGETS] = {true, true, true};
static char tmp_out[64];
static char *cuh_text; /* xpk_peer.cuh, handed to NVRTC in memory */

/* ---- small helpers ------------------------------------------------- */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}




/* dst = a + b, cut to size (snprintf would warn about the cut) */
static void join(char *dst, size_t size, const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la >= size)
    la = size - 1;
  if (lb >= size - la)
    lb = size - la - 1;
  memcpy(dst, a, la);
  memcpy(dst + la, b, lb);
  dst[la + lb] = 0;
}

static void set_msg(meas *m, int state, const char *fmt, ...) {
  m->state = state;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->msg, sizeof m->msg, fmt, ap);
  va_end(ap);
  /* one line */
  for (char *p = m->msg; *p; p++)
    if (*p == '\n' || *p == '\r' || *p == '\t')
      *p = ' ';
}

static const char *cuda_type(xpj_scalar s) {
  switch (s) {
  case XPJ_F32: return "float";
  case XPJ_F64: return "double";
  case XPJ_I32: return "int";
  case XPJ_U32: return "unsigned int";
  case XPJ_I64: return "long long";
  default: return "?";
  }
}

static const char *cl_type(xpj_scalar s) {
  switch (s) {
  case XPJ_F32: return "float";
  case XPJ_F64: return "double";
  case XPJ_I32: return "int";
  case XPJ_U32: return "uint";
  case XPJ_I64: return "long";
  default: return "?";
  }
}

/* ---- xpjit --------------------------------------------------------- */

/* Source text to output, timed: parse + specialise + compile. */
static int xpjit_once(const krow *k, int tgt, xpj_isolation iso, double *ms, char *msg,
                      size_t msgsize) {
  const src_file *f = &files[k->file];
  xpj_target t;
  char err[256];
  if (xpj_target_parse(target_str[tgt], &t, err, sizeof err) != XPJ_OK) {
    snprintf(msg, msgsize, "target %s: %s", target_str[tgt], err);
    return S_FAIL;
  }
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.isolation = iso;
  xpj_scalar types[XPJ_MAX_TPARAMS];
  for (unsigned j = 0; j < k->ntp; j++)
    types[j] = k->type;
  xpj_spec sp = {k->ntp, k->tpn, types, k->ndim, 0, NULL, NULL};

  xpj_module *m = NULL, *s = NULL;
  xpj_result *r = NULL;
  if (xpj_module_create(&m) != XPJ_OK) {
    snprintf(msg, msgsize, "out of memory");
    return S_FAIL;
  }
  double t0 = now_ms();
  xpj_status st = xpj_parse(m, f->path, f->text, f->len, NULL);
  if (st == XPJ_OK)
    st = xpj_specialize(m, k->name, &sp, &s, NULL);
  if (st == XPJ_OK)
    st = xpj_compile(s, k->name, &t, &o, XPJ_EMIT_BIN, &r);
  size_t len = 0;
  const uint8_t *data = st == XPJ_OK ? xpj_result_data(r, &len) : NULL;
  double t1 = now_ms();
  int state = S_OK;
  if (st != XPJ_OK || !data || !len) {
    snprintf(msg, msgsize, "%s", r ? xpj_result_log(r) : "parse or specialise failed");
    state = S_FAIL;
  } else if (t.kind == XPJ_TARGET_PTX) {
    save_ptx("xpjit", k, data, len);
  }
  xpj_result_destroy(r);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
  *ms = t1 - t0;
  return state;
}

/* ---- whole processes ----------------------------------------------- */

/* Runs argv to completion with its output thrown away; wall time in ms.
 * Returns S_OK, S_FAIL (non-zero exit) or S_NA (cannot start). */
static int process_once(char *const argv[], double *ms) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", 0, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", 1, 0);
  double t0 = now_ms();
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    return S_NA;
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  *ms = now_ms() - t0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? S_OK : S_FAIL;
}

static void render_argv(char *const argv[], char *buf, size_t size) {
  size_t n = 0;
  buf[0] = 0;
  for (int i = 0; argv[i] && n < size; i++)
    n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? " " : "", argv[i]);
}

static int clang_once(const krow *k, double *ms, char *msg, size_t msgsize) {
  const src_file *f = &files[k->file];
  if (!f->has_cl) {
    join(msg, msgsize, "no ", f->cl_path);
    return S_NA;
  }
  char kdef[128], ndim[32], tdef[XPJ_MAX_TPARAMS][64];
  snprintf(kdef, sizeof kdef, "-DK_%s", k->name);
  snprintf(ndim, sizeof ndim, "-DNDIM=%u", k->ndim ? k->ndim : 2);
  char *argv[32 + XPJ_MAX_TPARAMS];
  int n = 0;
  argv[n++] = (char *)clang_path;
  argv[n++] = "-x";
  argv[n++] = "cl";
  argv[n++] = "-cl-std=CL2.0";
  argv[n++] = "--target=spirv64v1.2";
  argv[n++] = "-O2";
  argv[n++] = "-ffp-contract=off"; /* xpjit's SPIR-V: ContractionOff */
  argv[n++] = "-mllvm";
  /* float atomic add as in xpjit; bit instructions because clang turns
   * intops' bit_reverse32 into llvm.bitreverse, which the backend cannot
   * emit without them */
  argv[n++] = "--spirv-ext=+SPV_EXT_shader_atomic_float_add,+SPV_KHR_bit_instructions";
  argv[n++] = "-DXK_FLOAT_ATOMICS"; /* native float atomics: see xpk_peer.clh */
  argv[n++] = "-c";
  argv[n++] = kdef;
  argv[n++] = ndim;
  for (unsigned j = 0; j < k->ntp; j++) {
    snprintf(tdef[j], sizeof tdef[j], "-D%s=%s", k->tpn[j], cl_type(k->type));
    argv[n++] = tdef[j];
  }
  argv[n++] = "-o";
  argv[n++] = tmp_out;
  argv[n++] = (char *)f->cl_path;
  argv[n] = NULL;
  int st = process_once(argv, ms);
  if (st == S_FAIL) {
    char cmd[1024];
    render_argv(argv, cmd, sizeof cmd);
    join(msg, msgsize, "failed: ", cmd);
  } else if (st == S_NA) {
    snprintf(msg, msgsize, "cannot run %s", clang_path);
  }
  return st;
}

static int cli_once(const krow *k, const char *target, double *ms, char *msg,
                    size_t msgsize) {
  const src_file *f = &files[k->file];
  char ndim[16], dt[XPJ_MAX_TPARAMS][64];
  char *argv[24 + 2 * XPJ_MAX_TPARAMS];
  int n = 0;
  argv[n++] = (char *)cli_path;
  argv[n++] = "emit";
  argv[n++] = (char *)f->path;
  argv[n++] = "--kernel";
  argv[n++] = (char *)k->name;
  for (unsigned j = 0; j < k->ntp; j++) {
    snprintf(dt[j], sizeof dt[j], "%s=%s", k->tpn[j], xpj_scalar_name(k->type));
    argv[n++] = "--dtype";
    argv[n++] = dt[j];
  }
  if (k->ndim) {
    snprintf(ndim, sizeof ndim, "%u", k->ndim);
    argv[n++] = "--ndim";
    argv[n++] = ndim;
  }
  argv[n++] = "--target";
  argv[n++] = (char *)target;
  argv[n++] = "-o";
  argv[n++] = tmp_out;
  argv[n] = NULL;
  int st = process_once(argv, ms);
  if (st != S_OK) {
    char cmd[1024];
    render_argv(argv, cmd, sizeof cmd);
    join(msg, msgsize, st == S_NA ? "cannot run: " : "failed: ", cmd);
  }
  return st;
}

/* ---- NVRTC --------------------------------------------------------- */

static nvrtc_api nv;
static char nvrtc_error[320];

static bool nvrtc_load(void) {
  return nvrtc_open(nvrtc_path, &nv, NULL, 0, nvrtc_error, sizeof nvrtc_error);
}

/* "axpy<float>", "convert<float, float>", "bit_stats<>" */
static void name_expr(const krow *k, char *buf, size_t size) {
  size_t n = (size_t)snprintf(buf, size, "%s<", k->name);
  for (unsigned j = 0; j < k->ntp && n < size; j++)
    n += (size_t)snprintf(buf + n, size - n, "%s%s", j ? ", " : "", cuda_type(k->type));
  if (n < size)
    snprintf(buf + n, size - n, ">");
}

static int nvrtc_once(const krow *k, double *ms, char *msg, size_t msgsize) {
  const src_file *f = &files[k->file];
  if (!f->cu) {
    snprintf(msg, msgsize, "no %s/%s.cu", peer_dir, f->base);
    return S_NA;
  }
  char ne[160], ndim[32];
  name_expr(k, ne, sizeof ne);
  snprintf(ndim, sizeof ndim, "-DNDIM=%u", k->ndim ? k->ndim : 2);
  /* -w: the unused static helpers of the file would warn; --fmad=false:
   * no contraction into fma, as in xpjit */
  const char *opts[] = {"--gpu-architecture=compute_90", "--fmad=false", "-w", ndim};
  const char *hname = "xpk_peer.cuh";
  char cu_name[256];
  snprintf(cu_name, sizeof cu_name, "%s.cu", f->base);

  nvrtc_prog p = NULL;
  char *ptx = NULL;
  size_t n = 0;
  double t0 = now_ms();
  int rc = nv.create(&p, f->cu, cu_name, 1, (const char *const *)&cuh_text, &hname);
  if (rc == 0)
    rc = nv.add_name(p, ne);
  int crc = rc == 0 ? nv.compile(p, 4, opts) : rc;
  if (crc == 0 && nv.ptx_size(p, &n) == 0 && (ptx = malloc(n)) && nv.ptx(p, ptx) != 0) {
    free(ptx);
    ptx = NULL;
  }
  double t1 = now_ms();
  *ms = t1 - t0;
  int state = S_OK;
  if (crc == 0 && ptx && strstr(ptx, ".entry"))
    save_ptx("nvrtc", k, ptx, strlen(ptx));
  if (crc != 0 || !ptx || !strstr(ptx, ".entry")) {
    state = S_FAIL;
    size_t ln = 0;
    char *log = NULL;
    if (p && nv.log_size(p, &ln) == 0 && (log = malloc(ln + 1)) && nv.log(p, log) == 0)
      log[ln] = 0;
    snprintf(msg, msgsize, "%s: nvrtc error %d: %s", ne, crc, log ? log : "");
    free(log);
  }
  free(ptx);
  if (p)
    nv.destroy(&p);
  /* --save-ptx: NVRTC's default (--fmad=true) too, outside the timing,
   * for bench/ptx_quality.py's reference at NVRTC's own settings */
  if (save_dir && state == S_OK) {
    const char *fopts[] = {"--gpu-architecture=compute_90", "--fmad=true",
                           "-w", ndim};
    p = NULL;
    ptx = NULL;
    n = 0;
    if (nv.create(&p, f->cu, cu_name, 1, (const char *const *)&cuh_text,
                  &hname) == 0 &&
        nv.add_name(p, ne) == 0 && nv.compile(p, 4, fopts) == 0 &&
        nv.ptx_size(p, &n) == 0 && (ptx = malloc(n)) && nv.ptx(p, ptx) == 0 &&
        strstr(ptx, ".entry"))
      save_ptx("nvrtc-fmad", k, ptx, strlen(ptx));
    free(ptx);
    if (p)
      nv.destroy(&p);
  }
  return state;
}

/* ---- helper processes ---------------------------------------------- */

typedef struct request {
  int kind, row, target;
} request;
typedef struct reply {
  int state;
  double ms;
  char msg[320];
} reply;

typedef struct helper {
  pid_t pid;
  int to, from; /* pipe ends: requests out, replies in */
  bool is_nvrtc;
} helper;

static helper h_inproc = {-1, -1, -1, false}, h_nvrtc = {-1, -1, -1, true};

static bool read_full(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    p += r;
    n -= (size_t)r;
  }
  return true;
}

static bool write_full(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n) {
    ssize_t r = write(fd, p, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    p += r;
    n -= (size_t)r;
  }
  return true;
}

static void serve(int in, int out, bool is_nvrtc) {
  bool ok = !is_nvrtc || nvrtc_load();
  request q;
  while (read_full(in, &q, sizeof q)) {
    reply a;
    memset(&a, 0, sizeof a);
    const krow *k = &rows[q.row];
    if (!ok) {
      a.state = S_NA;
      snprintf(a.msg, sizeof a.msg, "%s", nvrtc_error);
    } else if (q.kind == M_NVRTC) {
      a.state = nvrtc_once(k, &a.ms, a.msg, sizeof a.msg);
    } else {
      a.state = xpjit_once(k, q.target, XPJ_ISOLATE_NONE, &a.ms, a.msg, sizeof a.msg);
    }
    if (!write_full(out, &a, sizeof a))
      break;
  }
  _exit(0);
}

static bool helper_start(helper *h) {
  int down[2], up[2];
  if (pipe(down) || pipe(up))
    return false;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0)
    return false;
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    /* the other helper's pipe ends: its EOF must not wait for us */
    const helper *other[] = {&h_inproc, &h_nvrtc};
    for (int i = 0; i < 2; i++)
      if (other[i]->pid > 0) {
        close(other[i]->to);
        close(other[i]->from);
      }
    serve(down[0], up[1], h->is_nvrtc);
  }
  close(down[0]);
  close(up[1]);
  h->pid = pid;
  h->to = down[1];
  h->from = up[0];
  return true;
}

static void helper_stop(helper *h);

static int helper_ask(helper *h, int kind, int row, int target, double *ms, char *msg,
                      size_t msgsize) {
  request q = {kind, row, target};
  reply a;
  if (h->pid < 0 || !write_full(h->to, &q, sizeof q) ||
      !read_full(h->from, &a, sizeof a)) {
    /* the compile crashed the helper: report it, start a fresh one */
    int status = 0;
    if (h->pid > 0) {
      close(h->to);
      close(h->from);
      waitpid(h->pid, &status, 0);
      h->pid = -1;
    }
    if (WIFSIGNALED(status))
      snprintf(msg, msgsize, "crashed the process (signal %d)", WTERMSIG(status));
    else
      snprintf(msg, msgsize, "the helper process ended");
    helper_start(h);
    return S_FAIL;
  }
  *ms = a.ms;
  snprintf(msg, msgsize, "%s", a.msg);
  return a.state;
}

static void helper_stop(helper *h) {
  if (h->pid < 0)
    return;
  close(h->to);
  close(h->from);
  int status;
  waitpid(h->pid, &status, 0);
  h->pid = -1;
}

/* ---- measuring ----------------------------------------------------- */

static bool applies(int tgt, int kind) {
  switch (kind) {
  case M_XPJIT: return true;
  case M_XPJIT_NP: return tgt != T_SPIRV; /* SPIR-V always uses a worker */
  case M_CLI:
  case M_CLANG: return tgt == T_SPIRV;
  case M_NVRTC: return tgt == T_PTX;
  }
  return false;
}

static int measure_once(int row, int tgt, int kind, double *ms, char *msg,
                        size_t msgsize) {
  const krow *k = &rows[row];
  switch (kind) {
  case M_XPJIT: return xpjit_once(k, tgt, XPJ_ISOLATE_DEFAULT, ms, msg, msgsize);
  case M_XPJIT_NP: return helper_ask(&h_inproc, kind, row, tgt, ms, msg, msgsize);
  case M_CLI: return cli_once(k, "spirv", ms, msg, msgsize);
  case M_CLANG: return clang_once(k, ms, msg, msgsize);
  case M_NVRTC: return helper_ask(&h_nvrtc, kind, row, tgt, ms, msg, msgsize);
  }
  return S_FAIL;
}

/* All runs of one kernel, interleaved: run r of every measurement before
 * run r + 1 of any, so that slow drifts of the machine hit all alike. */
static int iso_runs; /* --isolation-cost */

/* p50 of iso_runs compiles of row's PTX: kind, with gap_ms between. */
static double iso_series(int row, int kind, int gap_ms) {
  double *v = calloc((size_t)iso_runs, sizeof *v);
  int n = 0;
  for (int i = 0; i < iso_runs; i++) {
    double ms;
    char msg[320];
    if (measure_once(row, T_PTX, kind, &ms, msg, sizeof msg) == S_OK)
      v[n++] = ms;
    if (gap_ms)
      usleep((useconds_t)gap_ms * 1000);
  }
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  double p50 = n ? v[n / 2] : NAN;
  free(v);
  return p50;
}

/* The median of the n samples in v, which it frees; NAN when none. */
static double p50_free(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  double p = n ? v[n / 2] : NAN;
  free(v);
  return p;
}

/* One of the three whole-process measurements of --fresh and --startup:
 * number w, once; S_OK with its time in *ms. */
typedef int (*process_fn)(int w, const void *ctx, double *ms);

/* The medians of `times` runs of each of three measurements, alternated
 * run by run, into p. */
static void alternate3(int times, process_fn once, const void *ctx, double p[3]) {
  double *v[3];
  int n[3] = {0, 0, 0};
  for (int i = 0; i < 3; i++)
    v[i] = calloc((size_t)times, sizeof *v[i]);
  for (int r = 0; r < times; r++)
    for (int w = 0; w < 3; w++) {
      double ms;
      if (once(w, ctx, &ms) == S_OK)
        v[w][n[w]++] = ms;
    }
  for (int i = 0; i < 3; i++)
    p[i] = p50_free(v[i], n[i]);
}

static char iso_line[512]; /* printed after the tables */
static int fresh_runs;      /* --fresh */
static char fresh_line[640];
static char self_path[1024]; /* this program, for its NVRTC child */

/* The command line (at most 63 words) that runs this program again as a
 * child: mode (--nvrtc-child, --startup-child) with its argument, the
 * NVRTC library and peers as here, and the files. */
static void child_args(char *argv[64], const char *mode, const char *arg,
                       char *const *file_args) {
  int a = 0;
  argv[a++] = self_path;
  argv[a++] = (char *)mode;
  argv[a++] = (char *)arg;
  argv[a++] = "--nvrtc";
  argv[a++] = (char *)nvrtc_path;
  argv[a++] = "--peers";
  argv[a++] = (char *)peer_dir;
  for (int i = 0; file_args[i] && a < 63; i++)
    argv[a++] = file_args[i];
  argv[a] = NULL;
}

typedef struct fresh_ctx {
  const krow *k;
  char **nvrtc; /* the NVRTC child's command line */
} fresh_ctx;

static int fresh_once(int w, const void *ctx, double *ms) {
  const fresh_ctx *c = ctx;
  char msg[320];
  char *tr[] = {"/bin/true", NULL};
  return w == 0   ? cli_once(c->k, "ptx:sm_90", ms, msg, sizeof msg)
         : w == 1 ? process_once(c->nvrtc, ms)
                  : process_once(tr, ms);
}

/* --fresh: row's PTX compile as a whole process, fresh_runs times each of
 * xpjit-cli, an NVRTC child of this program and /bin/true, alternated. */
static void fresh_compile(int row, char *const *file_args) {
  const krow *k = &rows[row];
  char rowarg[16];
  snprintf(rowarg, sizeof rowarg, "%d", row);
  char *nvargs[64];
  child_args(nvargs, "--nvrtc-child", rowarg, file_args);
  fresh_ctx c = {k, nvargs};
  double p[3];
  alternate3(fresh_runs, fresh_once, &c, p);
  snprintf(fresh_line, sizeof fresh_line,
           "\na program's first compile, %s/%s, PTX, whole process (start to exit), p50 of "
           "%d each:\n  xpjit-cli emit %.2f ms; NVRTC (a process that loads libnvrtc and "
           "compiles once) %.2f ms; ratio %.1fx; a process that does nothing %.2f ms\n",
           files[k->file].base, k->name, fresh_runs, p[0], p[1], p[1] / p[0], p[2]);
}

static int startup_runs; /* --startup */
static char startup_line[768];

/* --startup's child process (who: "xpjit" or "nvrtc"): every PTX kernel
 * of the first file, compiled back to back, as a program does at its
 * start; 0 when every one compiled. */
static int startup_child(const char *who) {
  bool nvrtc = strcmp(who, "nvrtc") == 0;
  if (nvrtc && !nvrtc_load())
    return 1;
  int bad = 0;
  for (int i = 0; i < nrows; i++) {
    if (rows[i].file != 0 || !rows[i].spec_ok)
      continue;
    double ms;
    char msg[320];
    bad |= (nvrtc ? nvrtc_once(&rows[i], &ms, msg, sizeof msg)
                  : xpjit_once(&rows[i], T_PTX, XPJ_ISOLATE_DEFAULT, &ms, msg,
                               sizeof msg)) != S_OK;
  }
  return bad;
}

static int startup_once(int w, const void *ctx, double *ms) {
  char **const *argvs = ctx;
  return process_once(argvs[w], ms);
}

/* --startup: a program's start-up as a whole process, startup_runs times
 * each, alternated: this program re-run to compile every PTX kernel of
 * the first file back to back with xpjit (a fresh compile server: the
 * first jobs find it cold) and with NVRTC, and a process that does
 * nothing. */
static void startup(char *const *file_args) {
  int nk = 0;
  for (int i = 0; i < nrows; i++)
    nk += rows[i].file == 0 && rows[i].spec_ok;
  char *xpjit[64], *nvrtc[64], *tr[] = {"/bin/true", NULL};
  child_args(xpjit, "--startup-child", "xpjit", file_args);
  child_args(nvrtc, "--startup-child", "nvrtc", file_args);
  char **argvs[3] = {xpjit, nvrtc, tr};
  double p[3];
  alternate3(startup_runs, startup_once, argvs, p);
  snprintf(startup_line, sizeof startup_line,
           "\na program's start-up, %s: its %d PTX kernels compiled back to back in a "
           "fresh process (start to exit), p50 of %d each:\n  xpjit %.1f ms (%.2f ms a "
           "kernel); NVRTC %.1f ms (%.2f ms a kernel); ratio %.1fx; a process that does "
           "nothing %.2f ms\n",
           files[0].base, nk, startup_runs, p[0], p[0] / nk, p[1], p[1] / nk,
           p[1] / p[0], p[2]);
}

static void isolation_cost(int row) {
  const krow *k = &rows[row];
  double inproc = iso_series(row, M_XPJIT_NP, 20);
  double gap = iso_series(row, M_XPJIT, 20);
  double b2b = iso_series(row, M_XPJIT, 0);
  snprintf(iso_line, sizeof iso_line, "\nisolation cost, %s/%s, PTX, p50 of %d compiles (source text to "
         "PTX):\n  in process %.2f ms; isolated, 20 ms apart %.2f ms (+%.2f); "
         "isolated, back to back %.2f ms (+%.2f)\n",
           files[k->file].base, k->name, iso_runs, inproc, gap, gap - inproc,
           b2b, b2b - inproc);
}

/* Run r of every measurement of one kernel, the measurements one after
 * the other; samples holds the kernel's NTARGETS * NKINDS * runs */
static void measure_run(int row, int r, double *samples) {
  krow *k = &rows[row];
  for (int t = 0; t < NTARGETS; t++)
    for (int kind = 0; kind < NKINDS; kind++) {
      meas *m = &k->m[t][kind];
      if (!want[t] || !applies(t, kind) || !k->spec_ok)
        continue;
      if (m->state == S_NA || m->state == S_FAIL)
        continue; /* failed or not available: once is enough */
      double ms = 0;
      char msg[320] = "";
      int st = measure_once(row, t, kind, &ms, msg, sizeof msg);
      if (st != S_OK) {
        set_msg(m, st, "%s", msg);
        continue;
      }
      m->state = S_OK;
      samples[(t * NKINDS + kind) * runs + r] = ms;
    }
}

/* The median and the fastest of a kernel's runs */
static void finish_row(int row, double *samples) {
  krow *k = &rows[row];
  for (int t = 0; t < NTARGETS; t++)
    for (int kind = 0; kind < NKINDS; kind++)
      if (k->m[t][kind].state == S_OK) {
        double *v = &samples[(t * NKINDS + kind) * runs];
        k->m[t][kind].ms = median(v, runs); /* sorted: v[0] is the fastest */
        k->m[t][kind].best = v[0];
      }
}

/* Every run of every kernel. By default in rounds: run r of every kernel,
 * in an order shuffled anew each round, before run r + 1 of any, so that
 * each kernel's runs are spread over the whole benchmark: a host whose
 * speed moves in phases of a second or two (docs/benchmarks.md, "where
 * the noise comes from") then slows every kernel's runs on both sides
 * alike, where all runs of one kernel back to back (--back-to-back) fall
 * in one phase, which can differ between the two sides (Google
 * Benchmark's --benchmark_enable_random_interleaving, for the same
 * reason). The order is the same from run to run of the benchmark (a
 * fixed seed). */
static void measure_all(double *samples) {
  size_t per_row = (size_t)NTARGETS * NKINDS * (size_t)runs;
  if (back_to_back) {
    for (int i = 0; i < nrows; i++) {
      fprintf(stderr, "\r[%d/%d] %s/%-28s", i + 1, nrows, files[rows[i].file].base,
              rows[i].name);
      for (int r = 0; r < runs; r++)
        measure_run(i, r, samples + (size_t)i * per_row);
    }
  } else {
    int *order = malloc((size_t)nrows * sizeof *order);
    uint64_t seed = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < nrows; i++)
      order[i] = i;
    for (int r = 0; r < runs; r++) {
      for (int i = nrows - 1; i > 0; i--) { /* Fisher-Yates, xorshift64 */
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        int j = (int)(seed % (uint64_t)(i + 1)), x = order[i];
        order[i] = order[j];
        order[j] = x;
      }
      for (int i = 0; i < nrows; i++) {
        fprintf(stderr, "\r[run %d/%d, %d/%d] %s/%-28s", r + 1, runs, i + 1, nrows,
                files[rows[order[i]].file].base, rows[order[i]].name);
        measure_run(order[i], r, samples + (size_t)order[i] * per_row);
      }
    }
    free(order);
  }
  for (int i = 0; i < nrows; i++)
    finish_row(i, samples + (size_t)i * per_row);
  fprintf(stderr, "\r%72s\r", "");
}

/* ---- setup --------------------------------------------------------- */

static void load_file(int fi, const char *path) {
  src_file *f = &files[fi];
  f->path = path;
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  char *base = strdup(b);
  char *dot = strrchr(base, '.');
  if (dot && strcmp(dot, ".xpk") == 0)
    *dot = 0;
  f->base = base;
  f->text = slurp(path, &f->len);
  char p[1024];
  snprintf(p, sizeof p, "%s/%s.cu", peer_dir, base);
  f->cu = slurp(p, NULL);
  snprintf(f->cl_path, sizeof f->cl_path, "%s/%s.cl", peer_dir, base);
  f->has_cl = access(f->cl_path, R_OK) == 0;
}

/* Enumerates the kernels of file fi and chooses their specialisation. */
static void add_kernels(int fi) {
  src_file *f = &files[fi];
  xpj_module *m;
  xpj_diags *d;
  if (xpj_module_create(&m) != XPJ_OK || xpj_diags_create(&d) != XPJ_OK) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  if (!f->text || xpj_parse(m, f->path, f->text, f->len, d) != XPJ_OK) {
    char *txt = NULL;
    size_t len;
    if (f->text && xpj_diags_render(d, &txt, &len) == XPJ_OK)
      fprintf(stderr, "%s", txt);
    else
      fprintf(stderr, "%s: cannot read\n", f->path);
    free(txt);
    printf("%s: FAIL (cannot read or parse; skipped)\n", f->path);
    xpj_diags_destroy(d);
    xpj_module_destroy(m);
    return;
  }
  static const xpj_scalar tries[] = {XPJ_F32, XPJ_I32, XPJ_U32, XPJ_I64, XPJ_F64};
  for (unsigned i = 0; i < xpj_module_func_count(m); i++) {
    xpj_func *fn = xpj_module_func(m, i);
    if (xpj_func_kind_of(fn) == XPJ_FUNC_DEVICE)
      continue;
    rows = realloc(rows, (size_t)(nrows + 1) * sizeof *rows);
    krow *k = &rows[nrows++];
    memset(k, 0, sizeof *k);
    k->file = fi;
    snprintf(k->name, sizeof k->name, "%s", xpj_func_name(fn));
    k->ntp = xpj_func_tparam_count(fn);
    for (unsigned j = 0; j < k->ntp; j++)
      k->tpn[j] = strdup(xpj_func_tparam_name(fn, j));
    k->ndim = xpj_func_has_generic_rank(fn) ? 2u : 0u;
    size_t ntries = k->ntp ? sizeof tries / sizeof tries[0] : 1;
    for (size_t t = 0; t < ntries && !k->spec_ok; t++) {
      xpj_scalar types[XPJ_MAX_TPARAMS];
      for (unsigned j = 0; j < k->ntp; j++)
        types[j] = tries[t];
      xpj_spec sp = {k->ntp, k->tpn, types, k->ndim, 0, NULL, NULL};
      xpj_module *s = NULL;
      xpj_diags_clear(d);
      if (xpj_specialize(m, k->name, &sp, &s, d) == XPJ_OK) {
        k->spec_ok = true;
        k->type = tries[t];
      } else if (t == 0) {
        xpj_diag dg;
        if (xpj_diags_get(d, 0, &dg) == XPJ_OK)
          snprintf(k->spec_err, sizeof k->spec_err, "%s", dg.message);
      }
      xpj_module_destroy(s);
    }
  }
  xpj_diags_destroy(d);
  xpj_module_destroy(m);
}

static bool clang_available(void) {
  char *argv[] = {(char *)clang_path, "--version", NULL};
  double ms;
  return process_once(argv, &ms) == S_OK;
}

/* ---- report -------------------------------------------------------- */

static void cell(const meas *m, char *buf, size_t size) {
  switch (m->state) {
  case S_OK: snprintf(buf, size, "%.2f", m->ms); break;
  case S_NA: snprintf(buf, size, "n/a"); break;
  case S_FAIL: snprintf(buf, size, "FAIL"); break;
  default: snprintf(buf, size, "-"); break;
  }
}

static bool ratio_of(const meas *peer, const meas *ours, double *r) {
  if (peer->state != S_OK || ours->state != S_OK || ours->ms <= 0)
    return false;
  *r = peer->ms / ours->ms;
  return true;
}

/* The same of each side's fastest run */
static bool best_ratio_of(const meas *peer, const meas *ours, double *r) {
  if (peer->state != S_OK || ours->state != S_OK || ours->best <= 0)
    return false;
  *r = peer->best / ours->best;
  return true;
}

static void ratio_cell(const meas *peer, const meas *ours, char *buf, size_t size) {
  double r;
  if (ratio_of(peer, ours, &r))
    snprintf(buf, size, "%.1fx", r);
  else
    snprintf(buf, size, peer->state == S_NA ? "n/a" : "-");
}

static void dtype_of(const krow *k, char *buf, size_t size) {
  if (!k->ntp) {
    snprintf(buf, size, "-");
    return;
  }
  size_t n = 0;
  for (unsigned j = 0; j < k->ntp && n < size; j++)
    n += (size_t)snprintf(buf + n, size - n, "%s%s", j ? "," : "", k->tpn[j]);
  if (n < size)
    snprintf(buf + n, size - n, "=%s", xpj_scalar_name(k->type));
}

typedef struct summary {
  const char *label;
  double goal;
  int peer, ours; /* kinds */
} summary;

/* One line of s: the ratios of the medians, or (best) of the fastest
 * runs */
static void print_summary_of(int tgt, const summary *s, bool best) {
  double logsum = 0, lo = INFINITY;
  int n = 0, below = 0, lo_row = -1;
  char label[64];
  snprintf(label, sizeof label, "%s", best ? "  the fastest run of each:" : s->label);
  for (int i = 0; i < nrows; i++) {
    double r;
    const meas *peer = &rows[i].m[tgt][s->peer], *ours = &rows[i].m[tgt][s->ours];
    if (!(best ? best_ratio_of(peer, ours, &r) : ratio_of(peer, ours, &r)))
      continue;
    logsum += log(r);
    n++;
    below += r < s->goal;
    if (r < lo) {
      lo = r;
      lo_row = i;
    }
  }
  if (!n) {
    printf("  %-44s no ratios\n", label);
    return;
  }
  printf("  %-44s geomean %5.1fx  min %5.1fx (%s/%s)  %d of %d below %.0fx\n", label,
         exp(logsum / n), lo, files[rows[lo_row].file].base, rows[lo_row].name, below, n,
         s->goal);
}

/* The ratios of the medians, then of each side's fastest run: on a host
 * whose speed moves in phases (other tenants), a median can come from a
 * slow phase on one side and a fast one on the other; the fastest run is
 * what the work itself costs (docs/benchmarks.md, "the fastest run") */
static void print_summary(int tgt, const summary *s) {
  print_summary_of(tgt, s, false);
  if (runs > 1)
    print_summary_of(tgt, s, true);
}

/* Every failure, and each distinct reason for a missing peer once. */
static void print_failures(int tgt) {
  static const char *const kind_name[NKINDS] = {"xpjit", "xpjit in-process", "xpjit-cli",
                                                "clang", "nvrtc"};
  for (int i = 0; i < nrows; i++)
    for (int kind = 0; kind < NKINDS; kind++) {
      const meas *m = &rows[i].m[tgt][kind];
      if (m->state == S_FAIL)
        printf("  FAIL %s/%s: %s: %s\n", files[rows[i].file].base, rows[i].name,
               kind_name[kind], m->msg);
      if (m->state != S_NA)
        continue;
      bool seen = false;
      for (int j = 0; j < i && !seen; j++)
        seen = rows[j].m[tgt][kind].state == S_NA &&
               strcmp(rows[j].m[tgt][kind].msg, m->msg) == 0;
      if (!seen)
        printf("  n/a %s: %s\n", kind_name[kind], m->msg);
    }
}

static int wfile = 10, wkern = 25; /* column widths */

static void print_tables(void) {
  char a[32], b[32], c[32], d[32], e[32], f[32], dt[40];
  for (int i = 0; i < nrows; i++) {
    int lf = (int)strlen(files[rows[i].file].base), lk = (int)strlen(rows[i].name);
    wfile = lf > wfile ? lf : wfile;
    wkern = lk > wkern ? lk : wkern;
  }
  if (want[T_SPIRV]) {
    printf("\nSPIR-V (spirv:1.2), ms, median of %d runs\n", runs);
    printf("  xpjit: library, source text to validated SPIR-V (worker process)\n");
    printf("  clang: clang-22 OpenCL C 2.0 to SPIR-V, whole process\n");
    printf("  cli:   xpjit-cli emit --target spirv, whole process\n");
    printf("%-*s %-*s %-9s %8s %8s %7s %8s %8s\n", wfile, "file", wkern, "kernel",
           "dtype", "xpjit", "clang", "ratio", "cli", "ratio-cli");
    for (int i = 0; i < nrows; i++) {
      krow *k = &rows[i];
      meas *m = k->m[T_SPIRV];
      dtype_of(k, dt, sizeof dt);
      cell(&m[M_XPJIT], a, sizeof a);
      cell(&m[M_CLANG], b, sizeof b);
      ratio_cell(&m[M_CLANG], &m[M_XPJIT], c, sizeof c);
      cell(&m[M_CLI], d, sizeof d);
      ratio_cell(&m[M_CLANG], &m[M_CLI], e, sizeof e);
      printf("%-*s %-*s %-9s %8s %8s %7s %8s %8s\n", wfile, files[k->file].base, wkern,
             k->name, dt, a, b, c, d, e);
    }
    summary s1 = {"clang / xpjit (library vs process):", 3, M_CLANG, M_XPJIT};
    summary s2 = {"clang / xpjit-cli (process vs process):", 3, M_CLANG, M_CLI};
    print_summary(T_SPIRV, &s1);
    print_summary(T_SPIRV, &s2);
    print_failures(T_SPIRV);
  }
  if (want[T_PTX]) {
    printf("\nPTX (ptx:sm_90), ms, median of %d runs\n", runs);
    printf("  xpjit:   library, source text to PTX (worker process, the default)\n");
    printf("  in-proc: the same with isolation off (XPJ_ISOLATE_NONE)\n");
    printf("  nvrtc:   NVRTC CUDA C to PTX for compute_90, in process\n");
    printf("%-*s %-*s %-9s %8s %8s %8s %7s %8s\n", wfile, "file", wkern, "kernel",
           "dtype", "xpjit", "in-proc", "nvrtc", "ratio", "ratio-ip");
    for (int i = 0; i < nrows; i++) {
      krow *k = &rows[i];
      meas *m = k->m[T_PTX];
      dtype_of(k, dt, sizeof dt);
      cell(&m[M_XPJIT], a, sizeof a);
      cell(&m[M_XPJIT_NP], b, sizeof b);
      cell(&m[M_NVRTC], c, sizeof c);
      ratio_cell(&m[M_NVRTC], &m[M_XPJIT], d, sizeof d);
      ratio_cell(&m[M_NVRTC], &m[M_XPJIT_NP], e, sizeof e);
      printf("%-*s %-*s %-9s %8s %8s %8s %7s %8s\n", wfile, files[k->file].base, wkern,
             k->name, dt, a, b, c, d, e);
    }
    summary s1 = {"nvrtc / xpjit (default, worker):", 5, M_NVRTC, M_XPJIT};
    summary s2 = {"nvrtc / xpjit in-process:", 5, M_NVRTC, M_XPJIT_NP};
    print_summary(T_PTX, &s1);
    print_summary(T_PTX, &s2);
    print_failures(T_PTX);
  }
  if (want[T_CPU]) {
    printf("\nCPU (cpu: this machine), ms, median of %d runs (no peer)\n", runs);
    printf("%-*s %-*s %-9s %8s %8s %8s\n", wfile, "file", wkern, "kernel", "dtype",
           "xpjit", "in-proc", "worker");
    for (int i = 0; i < nrows; i++) {
      krow *k = &rows[i];
      meas *m = k->m[T_CPU];
      dtype_of(k, dt, sizeof dt);
      cell(&m[M_XPJIT], a, sizeof a);
      cell(&m[M_XPJIT_NP], b, sizeof b);
      if (m[M_XPJIT].state == S_OK && m[M_XPJIT_NP].state == S_OK)
        snprintf(f, sizeof f, "%+.2f", m[M_XPJIT].ms - m[M_XPJIT_NP].ms);
      else
        snprintf(f, sizeof f, "-");
      printf("%-*s %-*s %-9s %8s %8s %8s\n", wfile, files[k->file].base, wkern, k->name,
             dt, a, b, f);
    }
    print_failures(T_CPU);
  }
  for (int i = 0; i < nrows; i++)
    if (!rows[i].spec_ok)
      printf("FAIL %s/%s: no dtype fits: %s\n", files[rows[i].file].base, rows[i].name,
             rows[i].spec_err);
}

/* ---- main ---------------------------------------------------------- */

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [-n RUNS] [--clang PATH] [--nvrtc PATH] [--cli PATH]\n"
          "          [--peers DIR] [--targets spirv,ptx,cpu]\n"
          "          [--isolation-cost N] [--fresh N] [--startup N] [--save-ptx DIR]\n"
          "          [--back-to-back]\n"
          "          FILE.xpk...\n",
          argv0);
  exit(2);
}

static void parse_targets(const char *s, const char *argv0) {
  for (int t = 0; t < NTARGETS; t++)
    want[t] = false;
  char *copy = strdup(s), *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (strcmp(tok, "spirv") == 0)
      want[T_SPIRV] = true;
    else if (strcmp(tok, "ptx") == 0)
      want[T_PTX] = true;
    else if (strcmp(tok, "cpu") == 0)
      want[T_CPU] = true;
    else
      usage(argv0);
  }
  free(copy);
}

int main(int argc, char **argv) {
  int first = 1, nvrtc_child = -1;
  const char *startup_who = NULL;
  for (; first < argc && argv[first][0] == '-'; first++) {
    const char *a = argv[first];
    bool has = first + 1 < argc;
    if (strcmp(a, "-n") == 0 && has)
      runs = atoi(argv[++first]);
    else if (strcmp(a, "--clang") == 0 && has)
      clang_path = argv[++first];
    else if (strcmp(a, "--nvrtc") == 0 && has)
      nvrtc_path = argv[++first];
    else if (strcmp(a, "--cli") == 0 && has)
      cli_path = argv[++first];
    else if (strcmp(a, "--peers") == 0 && has)
      peer_dir = argv[++first];
    else if (strcmp(a, "--targets") == 0 && has)
      parse_targets(argv[++first], argv[0]);
    else if (strcmp(a, "--isolation-cost") == 0 && has)
      iso_runs = atoi(argv[++first]);
    else if (strcmp(a, "--fresh") == 0 && has)
      fresh_runs = atoi(argv[++first]);
    else if (strcmp(a, "--save-ptx") == 0 && has)
      save_dir = argv[++first];
    else if (strcmp(a, "--nvrtc-child") == 0 && has)
      nvrtc_child = atoi(argv[++first]);
    else if (strcmp(a, "--startup") == 0 && has)
      startup_runs = atoi(argv[++first]);
    else if (strcmp(a, "--back-to-back") == 0)
      back_to_back = true;
    else if (strcmp(a, "--startup-child") == 0 && has)
      startup_who = argv[++first];
    else
      usage(argv[0]);
  }
  if (first >= argc)
    usage(argv[0]);
  if (runs < 1)
    runs = 1;
  signal(SIGPIPE, SIG_IGN);

  nfiles = argc - first;
  files = calloc((size_t)nfiles, sizeof *files);
  for (int i = 0; i < nfiles; i++) {
    load_file(i, argv[first + i]);
    add_kernels(i);
  }
  char hp[1024];
  snprintf(hp, sizeof hp, "%s/xpk_peer.cuh", peer_dir);
  cuh_text = slurp(hp, NULL);
  if (!cuh_text)
    for (int i = 0; i < nfiles; i++) {
      free(files[i].cu); /* the .cu files cannot compile without it */
      files[i].cu = NULL;
    }
  if (nvrtc_child >= 0) { /* --fresh's NVRTC process: one compile */
    double ms;
    char msg[320];
    return nvrtc_child < nrows && nvrtc_load() &&
                   nvrtc_once(&rows[nvrtc_child], &ms, msg, sizeof msg) == S_OK
               ? 0
               : 1;
  }
  if (startup_who) /* --startup's process */
    return startup_child(startup_who);
  ssize_t sl = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
  self_path[sl > 0 ? sl : 0] = 0;

  snprintf(tmp_out, sizeof tmp_out, "/tmp/xpjit-bench-compile-XXXXXX");
  int fd = mkstemp(tmp_out);
  if (fd < 0) {
    perror("mkstemp");
    return 1;
  }
  close(fd);

  bool have_clang = want[T_SPIRV] && clang_available();
  if ((want[T_PTX] || want[T_CPU]) && !helper_start(&h_inproc))
    fprintf(stderr, "cannot start the in-process helper\n");
  if (want[T_PTX] && !helper_start(&h_nvrtc))
    fprintf(stderr, "cannot start the NVRTC helper\n");

  char tv[128];
  xpj_target t;
  char err[64];
  printf("compile latency, per kernel, median of %d runs %s (xpjit %s, LLVM %s)\n", runs,
         back_to_back ? "back to back" : "in shuffled rounds", xpj_version(),
         xpj_llvm_version());
  if (want[T_PTX] && xpj_target_parse("ptx:sm_90", &t, err, sizeof err) == XPJ_OK) {
    xpj_target_str(&t, tv, sizeof tv);
    printf("PTX target %s; libdevice %s\n", tv,
           xpj_libdevice_path() ? xpj_libdevice_path() : "not found");
  }
  if (want[T_SPIRV])
    printf("clang: %s%s\n", clang_path, have_clang ? "" : " (not available: n/a)");
  if (want[T_PTX])
    printf("nvrtc: %s\n", nvrtc_path);
  printf("peer sources: %s\n", peer_dir);

  /* Mark the peers that cannot run, then warm up every path once
   * (first-use costs: loading libdevice, NVRTC's builtins, page cache). */
  for (int i = 0; i < nrows; i++)
    if (!have_clang && want[T_SPIRV])
      set_msg(&rows[i].m[T_SPIRV][M_CLANG], S_NA, "cannot run %s", clang_path);
  int warm = -1;
  for (int i = 0; i < nrows && warm < 0; i++)
    if (rows[i].spec_ok)
      warm = i;
  if (warm >= 0)
    for (int tg = 0; tg < NTARGETS; tg++)
      for (int kind = 0; kind < NKINDS; kind++)
        if (want[tg] && applies(tg, kind) && rows[warm].m[tg][kind].state != S_NA) {
          double ms;
          char msg[320];
          measure_once(warm, tg, kind, &ms, msg, sizeof msg);
        }

  double *samples =
      calloc((size_t)nrows * NTARGETS * NKINDS * (size_t)runs, sizeof *samples);
  double t0 = now_ms();
  measure_all(samples);
  if (iso_runs > 0 && want[T_PTX] && warm >= 0)
    isolation_cost(warm);
  if (fresh_runs > 0 && want[T_PTX] && warm >= 0 && self_path[0])
    fresh_compile(warm, argv + first);
  if (startup_runs > 0 && want[T_PTX] && self_path[0])
    startup(argv + first);
  helper_stop(&h_inproc);
  helper_stop(&h_nvrtc);
  unlink(tmp_out);

  print_tables();
  fputs(iso_line, stdout);
  fputs(fresh_line, stdout);
  fputs(startup_line, stdout);
  printf("\n%d kernels in %d files, %d runs each, %.1f s\n", nrows, nfiles, runs,
         (now_ms() - t0) / 1e3);
  free(samples);
  return 0;
}
