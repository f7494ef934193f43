/*
 * bench/daemon.c - xpjitd (issue 6): what a kernel costs when the per-user
 * compile daemon serves it, and what the daemon saves when many processes
 * start at once.
 *
 * (a) Hit latency. A daemon (build/bin/xpjitd next to this program's
 *     build directory, its own socket and cache in a private directory)
 *     has axpy<f32> and axpy<f64> (examples/axpy.xpk, ndim 1, CPU, O2) in
 *     memory. 1, 8 and 64 client processes (forked; this process never
 *     creates an xpjit context) each open their own connection (handshake
 *     done before the clock starts), are released together and send GET
 *     requests for axpy<f32> in a closed loop for --seconds: the request
 *     libxpjit sends a daemon that answers LOOKUP (the digest of the
 *     kernel's key, its timeout: 90 bytes), one at a time, each reply read
 *     whole and decoded (a KERNEL with the object file, 1.3 KB); and at
 *     64 clients the GET libxpjit sends when the daemon asks for it
 *     (source, file name, canonical target, options, digest: 5.4 KB). Reported: p50, p99, mean and max
 *     of the round trip in microseconds over all clients, the throughput,
 *     and the daemon's CPU time per request (/proc/PID/stat, 10 ms ticks).
 *     By Little's law the mean latency of a closed loop is clients /
 *     throughput, whatever the daemon does; so a fourth level has the 64
 *     clients pause after each reply for an exponentially distributed time
 *     (mean 10 ms: a Poisson stream of about 6,000 requests/s, a fraction
 *     of what the daemon can serve), which shows the latency of a loaded
 *     but not saturated daemon. And the single client once more with it
 *     and the daemon pinned to CPU 0: on this virtual machine a wake-up
 *     across CPUs costs tens of microseconds (and is charged to the waker),
 *     so the unpinned 1-client figures depend on where the scheduler puts
 *     the two processes.
 *
 * (a2) The same hit at a fixed offered load (--rates, requests/s in all:
 *     2000, 10000, 20000, 30000): 64 client processes, each its own
 *     connection, send at the times of a Poisson stream (exponential gaps),
 *     one request at a time each; a request whose time comes while the one
 *     before is out goes when that one is answered, and its latency counts
 *     from its intended time (no coordinated omission). The closed loop
 *     above cannot show the latency of a daemon that is not saturated: with
 *     64 clients and no pause, the mean is 64 / throughput whatever the
 *     daemon does. Side by side in the same rounds, alternately first: the
 *     same kernel from a cache file of the client's own (xpj_cache_get on
 *     a handle each client opened before the clock: the L2 hit libxpjit
 *     makes without a daemon), at the same times. Also reported: how late
 *     the clients woke from their sleeps when idle, this machine's own
 *     noise, which every latency includes.
 *
 * (a3) The 64 clients with random pauses, alone and while one more client
 *     sends a 7 MiB source (another each round) that takes seconds to
 *     parse: the hits must not wait for the parse.
 *
 *     Then the same hit through libxpjit's public API in a fresh process
 *     (exec'd): xpj_program_get_binary(axpy, T=f32, ndim 1, "cpu") with
 *     XPJIT_CACHE=off, so that it can only come from the daemon (the
 *     counters are checked: 1 daemon hit, no compile): the first get
 *     (specialise + key, connect + handshake, GET) and a second kernel
 *     (axpy<f64>, the same connection). Side by side: the same two gets
 *     from the process's own cache file (L2 hit, daemon off) and compiled
 *     (cache and daemon off).
 *
 * (b) The start-up storm. --procs (32) fresh processes (this program
 *     exec'd with --child storm, spawned back to back) each create a
 *     context on the CPU, parse examples/axpy.xpk and get, launch (1000
 *     elements) and check 20 kernels: axpy, axpby, scale, copy, fill x
 *     f32, f64, i32, i64, ndim 1 (bench/cache's "whole process"). Variants,
 *     each on new, empty cache directories:
 *       daemon, shared cache   a fresh daemon and the clients on one cache
 *                              directory (the default set-up: the clients
 *                              look in the file the daemon writes)
 *       daemon, client cache off  the same with XPJIT_CACHE=off in the
 *                              clients: every kernel through the daemon
 *       no daemon, shared cache   XPJIT_DAEMON=off, one cache directory
 *                              for all (the realistic peer: a process uses
 *                              what another one has finished, and waits
 *                              for what another one is compiling: single
 *                              flight, docs/cache.md "Tiers"; with
 *                              XPJIT_CACHE_SINGLE_FLIGHT=0 in the bench's
 *                              environment, each compiles what it misses)
 *       no daemon, own caches  XPJIT_DAEMON=off, an empty directory each
 *                              (every process compiles all 20)
 *       warm cache             XPJIT_DAEMON=off on a cache that holds all
 *                              20: no compile anywhere; the processes' own
 *                              work (start, context, JIT loads, launches)
 *       process start          --procs processes that exec and exit
 *       compile once           one process, cache and daemon off: the 20
 *                              compiles, the reference of the goal
 *     Wall time: from the first spawn to the last exit (a daemon is
 *     started before and stopped after the clock). CPU time: user + system
 *     of every process of the variant, clients, their compile servers and
 *     workers, the daemon (from its start to its exit) and its workers:
 *     getrusage(RUSAGE_CHILDREN) before and after, once everything has
 *     exited and been waited for (the daemon waits for its workers; this
 *     program is a child subreaper, so the compile servers the clients
 *     leave behind come back to it and are waited for too). The daemon
 *     process's own part (its workers not) is read from /proc before it
 *     stops. Every client's counters are checked against the
 *     variant (e.g. no local compile with a daemon) and so is the daemon's
 *     compile count (20).
 *
 * Goals (docs/benchmarks.md): a hit's p99 under 1 ms with 64 clients; the
 * storm's CPU time within 1.2x of compiling each kernel once. The second
 * is reported two ways: against "compile once" alone (as stated) and
 * against "warm cache + compile once - one warm process" (the least any
 * storm of these processes can cost: their own work, and each kernel
 * compiled once).
 *
 * Variants are interleaved in --rounds rounds; medians are reported.
 * Everything lives in a mkdtemp directory, removed at the end. Timings are
 * never asserted; the exit status is 1 only for functional errors.
 *
 * (c) With --cluster, only the storm across simulated nodes (below,
 *     "--cluster"): with one Redis for every node, and without.
 *
 * usage: daemon [--quick] [--rounds N] [--seconds S] [--procs N]
 *               [--api-runs N] [--examples DIR] [--xpjitd PATH] [--keep]
 *               [--parts closed,open,parse,api,storm] [--rates R1,R2,...]
 *        daemon --cluster [--nodes N] [--procs-per-node N] [--rounds N]
 */
#define _GNU_SOURCE /* mkdtemp */
#include "daemon.h"
#include "proto.h"
#include "../tests/storm20.h"
#include "xpjit.h"

#include "bench_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ---- options, small helpers ----------------------------------------------- */

static int opt_rounds = 3;
static double opt_seconds = 2.0;
static int opt_procs = 32;
static int opt_api_runs = 20;
static bool opt_keep = false;
/* --parts: which parts run */
static bool part_closed = true, part_open = true, part_parse = true, part_api = true,
            part_storm = true;
/* --rates: the open loop's offered loads, requests/s in all */
static double opt_rates[8] = {2000, 10000, 20000, 30000};
static int opt_nrates = 4;
static char opt_examples[PATH_MAX] = "examples";
static char opt_xpjitd[PATH_MAX];
static char self_exe[PATH_MAX];
static char tmpdir[64];
static char axpy_path[PATH_MAX + 16];
static int failures;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

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

/* A new directory under tmpdir: what-N. */
static void new_dir(char *buf, size_t size, const char *what) {
  static unsigned serial;
  snprintf(buf, size, "%s/%s-%u", tmpdir, what, serial++);
  if (mkdir(buf, 0700) != 0) {
    fprintf(stderr, "daemon: mkdir %s: %s\n", buf, strerror(errno));
    exit(1);
  }
}

/* nearest-rank percentile of sorted v[0..n) */
static double pct_sorted(const double *v, size_t n, double p) {
  if (!n)
    return NAN;
  long i = (long)ceil(p / 100.0 * (double)n) - 1;
  if (i < 0)
    i = 0;
  if ((size_t)i >= n)
    i = (long)n - 1;
  return v[i];
}

static double med(double *v, int n) { return n ? median(v, n) : NAN; }

static double cpu_children_ms(void) {
  struct rusage ru;
  getrusage(RUSAGE_CHILDREN, &ru);
  return (double)ru.ru_utime.tv_sec * 1e3 + (double)ru.ru_utime.tv_usec * 1e-3 +
         (double)ru.ru_stime.tv_sec * 1e3 + (double)ru.ru_stime.tv_usec * 1e-3;
}

/* Waits for every process left under this one: the compile servers of
 * exited clients (xpjit-cc, docs/abi.md) are orphans that come back here,
 * this program being a child subreaper, so that their CPU time counts in
 * RUSAGE_CHILDREN like everything else a variant ran. */
static void reap_orphans(void) {
  double deadline = now_ms() + 20000;
  for (;;) {
    pid_t r = waitpid(-1, NULL, WNOHANG);
    if (r < 0 && errno == ECHILD)
      return;
    if (r > 0 || (r < 0 && errno == EINTR))
      continue;
    if (now_ms() > deadline) {
      fail("processes left 20 s after a variant (a compile server that did not end)");
      return;
    }
    sleep_ms(1);
  }
}

/* user + system time of a live process, in ms (10 ms ticks) */
static double proc_cpu_ms(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return NAN;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')'); /* after the command name */
  unsigned long ut = 0, st = 0;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
    return NAN;
  return (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

/* ---- processes ------------------------------------------------------------ */

/* environ without XPJIT_* settings, plus extra "NAME=VALUE" strings (NULL
 * ended); malloc'd array (the strings are not copied). */
static char **child_env(const char *const *extra) {
  size_t n = 0, m = 0;
  while (environ[n])
    n++;
  while (extra && extra[m])
    m++;
  char **env = malloc((n + m + 1) * sizeof *env);
  if (!env) {
    fprintf(stderr, "daemon: out of memory\n");
    exit(1);
  }
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "XPJIT_", 6) ||
        !strncmp(environ[i], "XPJIT_CACHE_SINGLE_FLIGHT=", 26)) /* A/B */
      env[k++] = environ[i];
  for (size_t i = 0; i < m; i++)
    env[k++] = (char *)extra[i];
  env[k] = NULL;
  return env;
}

/* Spawns this program with argv (argv[0] included) and env; its stdout
 * goes to out_fd (-1: /dev/null), stderr stays ours. */
static pid_t spawn_self(char *const *argv, char **env, int out_fd) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (out_fd >= 0)
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  else
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int rc = posix_spawn(&pid, self_exe, &fa, NULL, argv, env);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    fprintf(stderr, "daemon: cannot start %s: %s\n", self_exe, strerror(rc));
    exit(1);
  }
  return pid;
}

/* A daemon of this benchmark: a directory with its socket, cache and log. */
typedef struct daemon_t {
  pid_t pid;
  char dir[PATH_MAX], sock[108], cache[PATH_MAX], log[PATH_MAX];
  double cpu_ms; /* at exit: the daemon and its workers (wait4) */
} daemon_t;

static bool daemon_stats(daemon_t *d, char *text, size_t size);

/* Starts xpjitd --foreground on a socket in dir, cache dir cache (a
 * directory: the shared cache of a variant, or dir/cache), and waits for
 * its handshake. */
/* env: one more NAME=VALUE for the daemon, or NULL. */
static void daemon_start(daemon_t *d, const char *dir, const char *cache, const char *env1) {
  memset(d, 0, sizeof *d);
  snprintf(d->dir, sizeof d->dir, "%s", dir);
  if ((size_t)snprintf(d->sock, sizeof d->sock, "%s/xpjitd.sock", dir) >= sizeof d->sock) {
    fprintf(stderr, "daemon: socket path too long\n");
    exit(1);
  }
  if (cache)
    snprintf(d->cache, sizeof d->cache, "%s", cache);
  else {
    snprintf(d->cache, sizeof d->cache, "%s/cache", dir);
    mkdir(d->cache, 0700);
  }
  snprintf(d->log, sizeof d->log, "%s/xpjitd.log", dir);
  char envc[PATH_MAX + 32];
  snprintf(envc, sizeof envc, "XPJIT_CACHE_DIR=%s", d->cache);
  const char *extra[] = {envc, env1, NULL};
  char **env = child_env(extra);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, d->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
  char *argv[] = {"xpjitd", "--foreground", "--socket", d->sock, NULL};
  int rc = posix_spawn(&d->pid, opt_xpjitd, &fa, NULL, argv, env);
  posix_spawn_file_actions_destroy(&fa);
  free(env);
  if (rc != 0) {
    fprintf(stderr, "daemon: cannot start %s: %s\n", opt_xpjitd, strerror(rc));
    exit(1);
  }
  double deadline = now_ms() + 20000;
  for (;;) {
    char err[512];
    int fd = xpd_connect(d->sock, 1000, err, sizeof err, NULL, NULL);
    if (fd >= 0) {
      close(fd);
      return;
    }
    int ws;
    if (waitpid(d->pid, &ws, WNOHANG) == d->pid || now_ms() > deadline) {
      fprintf(stderr, "daemon: xpjitd did not start (%s); see %s\n", err, d->log);
      exit(1);
    }
    sleep_ms(5);
  }
}

/* SHUTDOWN and wait; d->cpu_ms gets what it and its workers used. */
static void daemon_stop(daemon_t *d) {
  char err[512];
  int fd = xpd_connect(d->sock, 5000, err, sizeof err, NULL, NULL);
  if (fd >= 0) {
    xpd_buf b = {0};
    xpd_begin(&b, XPD_SHUTDOWN, 1);
    xpd_end(&b, 0);
    xpd_header h;
    uint8_t *pl = NULL;
    if (xpd_call(fd, &b, XPD_MAX_REPLY, 5000, &h, &pl, err, sizeof err) != XPD_E_OK)
      fail("xpjitd: SHUTDOWN: %s", err);
    free(pl);
    xpd_buf_free(&b);
    close(fd);
  } else {
    fail("xpjitd: cannot connect to stop it: %s", err);
    kill(d->pid, SIGTERM);
  }
  int ws = 0;
  struct rusage ru;
  double deadline = now_ms() + 30000;
  for (;;) {
    pid_t r = wait4(d->pid, &ws, WNOHANG, &ru);
    if (r == d->pid)
      break;
    if (now_ms() > deadline) {
      fail("xpjitd did not exit after SHUTDOWN; killed");
      kill(d->pid, SIGKILL);
      wait4(d->pid, &ws, 0, &ru);
      break;
    }
    sleep_ms(2);
  }
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
    fail("xpjitd ended with status 0x%x (log %s)", ws, d->log);
  d->cpu_ms = (double)ru.ru_utime.tv_sec * 1e3 + (double)ru.ru_utime.tv_usec * 1e-3 +
              (double)ru.ru_stime.tv_sec * 1e3 + (double)ru.ru_stime.tv_usec * 1e-3;
  d->pid = 0;
}

static bool stats_over(int fd, char *text, size_t size) {
  xpd_buf b = {0};
  xpd_begin(&b, XPD_STATS, 2);
  xpd_end(&b, 0);
  xpd_header h;
  uint8_t *pl = NULL;
  char err[512];
  xpd_err e = xpd_call(fd, &b, XPD_MAX_REPLY, 5000, &h, &pl, err, sizeof err);
  xpd_buf_free(&b);
  xpd_msg m;
  const uint8_t *t = NULL;
  size_t n = 0;
  bool ok = e == XPD_E_OK && h.op == XPD_STATS_REPLY &&
            xpd_payload_decode(pl, h.len, &m) == XPD_E_OK &&
            xpd_get_bytes(&m, XPD_F_TEXT, false, size - 1, &t, &n) == XPD_E_OK;
  if (ok) {
    memcpy(text, t, n);
    text[n] = 0;
  }
  free(pl);
  return ok;
}

static bool daemon_stats(daemon_t *d, char *text, size_t size) {
  char err[512];
  int fd = xpd_connect(d->sock, 5000, err, sizeof err, NULL, NULL);
  if (fd < 0)
    return false;
  bool ok = stats_over(fd, text, size);
  close(fd);
  return ok;
}

static long long stat_of(const char *text, const char *name) {
  size_t L = strlen(name);
  for (const char *p = text; *p;) {
    if (!strncmp(p, name, L) && p[L] == ' ')
      return strtoll(p + L + 1, NULL, 10);
    const char *nl = strchr(p, '\n');
    if (!nl)
      break;
    p = nl + 1;
  }
  return -1;
}

/* ---- the kernels of the storm: examples/axpy.xpk, ndim 1, the 20 of
 * tests/storm20.h, launched on N elements ------------------------------------ */

enum { N = 1000 };

/* ---- children ---------------------------------------------------------------- */

/* A child writes one line to stdout, with one write: "ok V1 V2 ..." or
 * "error MESSAGE". */
static int child_line(const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
  va_end(ap);
  if (n < 0)
    return 1;
  if ((size_t)n > sizeof buf - 2)
    n = (int)sizeof buf - 2;
  oneline(buf);
  buf[n] = '\n';
  return write(1, buf, (size_t)n + 1) == n + 1 ? 0 : 1;
}

#define CHILD_CK(call, what)                                                                       \
  do {                                                                                             \
    if ((call) != XPJ_OK) {                                                                        \
      child_line("error %s: %s", what, xpj_last_error());                                          \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

/* --child storm: the 20 kernels; prints ok compiles daemon_hits l2_hits
 * fallbacks ms */
static int child_storm(void) {
  double t0 = now_ms();
  xpj_context *ctx;
  xpj_device *dev;
  xpj_program *p;
  xpj_queue *q;
  void *x, *y;
  xpj_context_desc d = {.visible = "cpu", .no_env_bundles = 1};
  CHILD_CK(xpj_context_create(&d, &ctx), "context");
  CHILD_CK(xpj_device_select(ctx, "cpu", &dev), "device");
  CHILD_CK(xpj_program_create_file(ctx, axpy_path, NULL, &p), "program");
  CHILD_CK(xpj_queue_create(dev, NULL, &q), "queue");
  CHILD_CK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * 8, 0, &x), "alloc");
  CHILD_CK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * 8, 0, &y), "alloc");
  for (int i = 0; i < NKERNELS; i++) {
    int kind = i / NDT;
    xpj_kernel *k;
    CHILD_CK(xpj_program_get_kernel(p, knames[kind], dts[i % NDT].dtypes, 1, dev, NULL, &k),
             knames[kind]);
    if (storm_launch_check(q, k, kind, dts[i % NDT].t, x, y, N, NULL, 0)) {
      child_line("error %s %s: wrong result (%s)", knames[kind], dts[i % NDT].dtypes,
                 xpj_last_error());
      return 1;
    }
  }
  xpj_cache_counters c;
  CHILD_CK(xpj_context_cache_counters(ctx, &c), "counters");
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, y);
  xpj_queue_destroy(q);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  return child_line("ok %llu %llu %llu %llu %.3f %llu %llu", (unsigned long long)c.compiles,
                    (unsigned long long)c.daemon_hits, (unsigned long long)c.l2_hits,
                    (unsigned long long)c.daemon_fallbacks, now_ms() - t0,
                    (unsigned long long)c.redis_hits,
                    (unsigned long long)(c.redis_errors + c.redis_skipped));
}

/* --child api: two xpj_program_get_binary calls on "cpu"; prints ok ctx_ms
 * prog_ms get1_ms get2_ms compiles daemon_hits l2_hits */
static int child_api(void) {
  xpj_context *ctx;
  xpj_program *p;
  xpj_context_desc d = {.visible = "cpu", .no_env_bundles = 1};
  double t0 = now_ms();
  CHILD_CK(xpj_context_create(&d, &ctx), "context");
  double t1 = now_ms();
  CHILD_CK(xpj_program_create_file(ctx, axpy_path, NULL, &p), "program");
  double t2 = now_ms();
  void *data = NULL;
  size_t size = 0;
  CHILD_CK(xpj_program_get_binary(p, "axpy", "T=f32", 1, "cpu", NULL, &data, &size), "get f32");
  double t3 = now_ms();
  free(data);
  data = NULL;
  CHILD_CK(xpj_program_get_binary(p, "axpy", "T=f64", 1, "cpu", NULL, &data, &size), "get f64");
  double t4 = now_ms();
  free(data);
  xpj_cache_counters c;
  CHILD_CK(xpj_context_cache_counters(ctx, &c), "counters");
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  return child_line("ok %.4f %.4f %.4f %.4f %llu %llu %llu", t1 - t0, t2 - t1, t3 - t2, t4 - t3,
                    (unsigned long long)c.compiles, (unsigned long long)c.daemon_hits,
                    (unsigned long long)c.l2_hits);
}

/* Reads every line the children write to fd until all have closed it;
 * lines[i] (malloc'd) in arrival order; returns how many. */
static int read_lines(int fd, char **lines, int max) {
  size_t cap = 65536, len = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (len + 4096 > cap) {
      cap *= 2;
      buf = realloc(buf, cap);
    }
    if (!buf) {
      fprintf(stderr, "daemon: out of memory\n");
      exit(1);
    }
    ssize_t r = read(fd, buf + len, cap - len - 1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    len += (size_t)r;
  }
  buf[len] = 0;
  int n = 0;
  for (char *s = buf, *e; n < max && *s; s = e + 1) {
    e = strchr(s, '\n');
    if (!e)
      e = s + strlen(s) - 1;
    lines[n++] = strndup(s, (size_t)(e - s + 1));
    if (!e[1])
      break;
  }
  free(buf);
  return n;
}

/* Runs one child (argv) with extra env and parses "ok V..." into vals;
 * returns the count, or -1 (with a FAIL) on an error. */
static int run_child(char *const *argv, const char *const *extra, double *vals, int maxvals,
                     double *wall_ms) {
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) {
    fprintf(stderr, "daemon: pipe: %s\n", strerror(errno));
    exit(1);
  }
  char **env = child_env(extra);
  double t0 = now_ms();
  pid_t pid = spawn_self(argv, env, pfd[1]);
  free(env);
  close(pfd[1]);
  char *line = NULL;
  int nl = read_lines(pfd[0], &line, 1);
  close(pfd[0]);
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  if (wall_ms)
    *wall_ms = now_ms() - t0;
  int n = -1;
  if (nl == 1 && !strncmp(line, "ok", 2) && WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
    n = 0;
    char *p = line + 2, *end;
    while (n < maxvals) {
      double v = strtod(p, &end);
      if (end == p)
        break;
      vals[n++] = v;
      p = end;
    }
  } else {
    fail("child %s %s: %s (status 0x%x)", argv[1], argv[2], nl == 1 ? line : "no output", ws);
  }
  if (nl == 1)
    free(line);
  return n;
}

/* ---- (a) hit latency ------------------------------------------------------------ */

/* The GET libxpjit sends for axpy<dtype> ndim 1 on this CPU (digest from a
 * first reply: the daemon checks it only for a log line). */
static void build_get(xpd_buf *b, const char *src, size_t len, const char *dtypes,
                      const char *digest) {
  xpd_get g;
  memset(&g, 0, sizeof g);
  g.source = (const uint8_t *)src;
  g.source_len = len;
  snprintf(g.filename, sizeof g.filename, "%.255s", axpy_path);
  snprintf(g.kernel, sizeof g.kernel, "axpy");
  snprintf(g.dtypes, sizeof g.dtypes, "%s", dtypes);
  g.ndim = 1;
  xpj_target t;
  char err[256];
  if (xpj_target_parse("cpu", &t, err, sizeof err) != XPJ_OK) {
    fprintf(stderr, "daemon: target cpu: %s\n", err);
    exit(1);
  }
  xpj_target_str(&t, g.target, sizeof g.target);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  g.opt_level = o.opt_level;
  g.fast_math = o.fast_math != 0;
  g.debug = o.debug_info != 0;
  g.checks = o.checks;
  g.timeout_ms = o.timeout_ms;
  if (digest)
    snprintf(g.digest, sizeof g.digest, "%s", digest);
  memset(b, 0, sizeof *b);
  xpd_begin(b, XPD_GET, 1);
  xpd_put_get(b, &g);
  xpd_end(b, 0);
}

/* src and a kernel whose body is one long sum, size bytes in all
 * (malloc'd): seconds to parse; tag makes each one another source. */
static char *big_source(const char *src, size_t src_len, size_t size, int tag, size_t *len) {
  static const char head[] = "kernel big<T>(y: global T[]) range {\n"
                             "    let i = global_id(0);\n"
                             "    y[i] = y[i]";
  static const char term[] = " + y[i]", tail[] = ";\n}\n";
  char *s = malloc(size + 64);
  if (!s) {
    fprintf(stderr, "daemon: out of memory\n");
    exit(1);
  }
  int n0 = snprintf(s, size + 64, "// %d\n", tag);
  size_t n = (size_t)n0;
  memcpy(s + n, src, src_len);
  n += src_len;
  memcpy(s + n, head, sizeof head - 1);
  n += sizeof head - 1;
  while (n + sizeof term + sizeof tail < size) {
    memcpy(s + n, term, sizeof term - 1);
    n += sizeof term - 1;
  }
  memcpy(s + n, tail, sizeof tail);
  *len = n + sizeof tail - 1;
  return s;
}

/* One GET and its reply, decoded; the reply's digest into digest (may be
 * NULL). 0 when it is a successful KERNEL with a binary. */
static int one_get(int fd, const xpd_buf *b, char *digest, char *err, size_t errsize) {
  xpd_header h;
  uint8_t *pl = NULL;
  xpd_err e = xpd_call_one(fd, b, XPD_MAX_REPLY, 120000, &h, &pl, err, errsize);
  xpd_msg m;
  xpd_kernel k;
  int rc = 0;
  if (e != XPD_E_OK)
    rc = -1;
  else if (h.op != XPD_KERNEL || xpd_payload_decode(pl, h.len, &m) != XPD_E_OK ||
           xpd_kernel_decode(&m, &k) != XPD_E_OK || k.v.failed || !k.v.size) {
    snprintf(err, errsize, "not a kernel (op %u)", h.op);
    rc = -1;
  } else if (digest) {
    snprintf(digest, 65, "%s", k.digest);
  }
  free(pl);
  return rc;
}

/* Shared with the forked clients of one level. */
typedef struct lat_shared {
  double release_ms;
  double big_ms; /* the large request's round trip (-1: it failed) */
  double end_ms[64];
  int count[64];
  int errors[64];
  char err[64][128];
} lat_shared;

typedef struct lat_res {
  int clients;
  size_t n;
  double p50, p99, mean, max, rps, daemon_us_per_req;
  int errors;
} lat_res;

/* clients processes, each its own connection, a closed loop for
 * opt_seconds; samples (microseconds) into a shared array. big (may be
 * NULL): a GET that one more process sends at the start, on its own
 * connection; its round trip (ms) into *big_ms. */
static void latency_level(daemon_t *d, const xpd_buf *get, int clients, int pause_ms,
                          bool one_cpu, double **all, size_t *nall, lat_res *out,
                          const xpd_buf *big, double *big_ms) {
  size_t cap = (size_t)(4000000 / clients); /* samples per client */
  size_t bytes = sizeof(lat_shared) + (size_t)clients * cap * sizeof(double);
  lat_shared *sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) {
    fprintf(stderr, "daemon: mmap: %s\n", strerror(errno));
    exit(1);
  }
  double *samples = (double *)(sh + 1);
  int gate[2], ready[2];
  if (pipe(gate) || pipe(ready)) {
    fprintf(stderr, "daemon: pipe: %s\n", strerror(errno));
    exit(1);
  }
  fflush(NULL);
  pid_t pids[64], bigpid = -1;
  if (big) { /* connected first, then released with the others */
    bigpid = fork();
    if (bigpid < 0) {
      fprintf(stderr, "daemon: fork: %s\n", strerror(errno));
      exit(1);
    }
    if (bigpid == 0) {
      close(gate[1]);
      close(ready[0]);
      char err[512] = "";
      int fd = xpd_connect(d->sock, 10000, err, sizeof err, NULL, NULL);
      char ch = fd >= 0 ? 'y' : 'n';
      if (write(ready[1], &ch, 1) != 1)
        _exit(1);
      close(ready[1]);
      while (read(gate[0], &ch, 1) < 0 && errno == EINTR) {
      }
      double t0 = now_ms();
      sh->big_ms = fd >= 0 && !one_get(fd, big, NULL, err, sizeof err) ? now_ms() - t0 : -1;
      _exit(0);
    }
  }
  for (int c = 0; c < clients; c++) {
    pids[c] = fork();
    if (pids[c] < 0) {
      fprintf(stderr, "daemon: fork: %s\n", strerror(errno));
      exit(1);
    }
    if (pids[c] == 0) {
      close(gate[1]);
      close(ready[0]);
      if (one_cpu) {
        cpu_set_t cs;
        CPU_ZERO(&cs);
        CPU_SET(0, &cs);
        sched_setaffinity(0, sizeof cs, &cs);
      }
      char err[512] = "";
      int fd = xpd_connect(d->sock, 10000, err, sizeof err, NULL, NULL);
      char ch = fd >= 0 ? 'y' : 'n';
      if (write(ready[1], &ch, 1) != 1)
        _exit(1);
      close(ready[1]);
      while (read(gate[0], &ch, 1) < 0 && errno == EINTR) {
      }
      if (fd < 0) {
        sh->errors[c] = 1;
        snprintf(sh->err[c], sizeof sh->err[c], "%s", err);
        _exit(1);
      }
      double *mine = samples + (size_t)c * cap;
      unsigned seed = (unsigned)getpid();
      double end = sh->release_ms + opt_seconds * 1000.0;
      size_t n = 0;
      for (;;) {
        double a = now_ms();
        if (a >= end || n == cap)
          break;
        if (one_get(fd, get, NULL, err, sizeof err)) {
          sh->errors[c]++;
          snprintf(sh->err[c], sizeof sh->err[c], "%s", err);
          break;
        }
        mine[n++] = (now_ms() - a) * 1000.0;
        if (pause_ms) { /* exponential: the clients' requests arrive as a Poisson stream */
          double u = ((double)rand_r(&seed) + 1.0) / ((double)RAND_MAX + 2.0);
          double us = -log(u) * pause_ms * 1000.0;
          struct timespec ts = {0, (long)((us < 100000 ? us : 100000) * 1000.0)};
          nanosleep(&ts, NULL);
        }
      }
      sh->count[c] = (int)n;
      sh->end_ms[c] = now_ms();
      close(fd);
      _exit(0);
    }
  }
  close(ready[1]);
  close(gate[0]);
  char ch;
  for (int c = 0; c < clients + (big != NULL); c++)
    if (read(ready[0], &ch, 1) != 1 || ch != 'y')
      fail("latency: a client could not connect");
  close(ready[0]);
  cpu_set_t daemon_cpus;
  if (one_cpu) { /* the daemon joins its client on CPU 0 for this level */
    cpu_set_t cs;
    CPU_ZERO(&cs);
    CPU_SET(0, &cs);
    if (sched_getaffinity(d->pid, sizeof daemon_cpus, &daemon_cpus) != 0 ||
        sched_setaffinity(d->pid, sizeof cs, &cs) != 0)
      fail("latency: cannot pin xpjitd to CPU 0: %s", strerror(errno));
  }
  double cpu0 = proc_cpu_ms(d->pid);
  sh->release_ms = now_ms();
  close(gate[1]); /* go */
  for (int c = 0; c < clients; c++)
    while (waitpid(pids[c], NULL, 0) < 0 && errno == EINTR) {
    }
  double cpu1 = proc_cpu_ms(d->pid);
  if (big) {
    while (waitpid(bigpid, NULL, 0) < 0 && errno == EINTR) {
    }
    *big_ms = sh->big_ms;
    if (sh->big_ms < 0)
      fail("latency: the large GET failed");
  }
  if (one_cpu)
    sched_setaffinity(d->pid, sizeof daemon_cpus, &daemon_cpus);
  memset(out, 0, sizeof *out);
  out->clients = clients;
  double last = sh->release_ms, sum = 0;
  size_t n = 0;
  for (int c = 0; c < clients; c++) {
    if (sh->errors[c]) {
      fail("latency, %d clients: client %d: %s", clients, c, sh->err[c]);
      out->errors += sh->errors[c];
    }
    if (sh->end_ms[c] > last)
      last = sh->end_ms[c];
    n += (size_t)sh->count[c];
  }
  double *v = malloc((n ? n : 1) * sizeof *v);
  *all = realloc(*all, (*nall + n + 1) * sizeof **all);
  if (!v || !*all) {
    fprintf(stderr, "daemon: out of memory\n");
    exit(1);
  }
  size_t k = 0;
  for (int c = 0; c < clients; c++)
    for (int i = 0; i < sh->count[c]; i++) {
      double s = samples[(size_t)c * cap + (size_t)i];
      v[k++] = s;
      (*all)[(*nall)++] = s;
      sum += s;
    }
  qsort(v, n, sizeof *v, cmp_double);
  out->n = n;
  out->p50 = pct_sorted(v, n, 50);
  out->p99 = pct_sorted(v, n, 99);
  out->mean = n ? sum / (double)n : NAN;
  out->max = n ? v[n - 1] : NAN;
  out->rps = (double)n / ((last - sh->release_ms) / 1000.0);
  out->daemon_us_per_req = n ? (cpu1 - cpu0) * 1000.0 / (double)n : NAN;
  free(v);
  munmap(sh, bytes);
}

/* ---- (a2) hit latency at a fixed offered load (open loop) ----------------------- */

/* --clients (64) processes, each its own connection to the daemon (or, for
 * the peer, its own handle on a cache file that holds the kernel), send
 * requests at the times of a Poisson stream: exponential gaps, rate /
 * clients each, for opt_seconds. One request at a time per client, as
 * libxpjit sends them: a request whose time comes while the one before is
 * still out goes when that one is answered, and its latency counts from
 * its intended time, so a slow reply is charged to every request it held
 * up (no coordinated omission). Also recorded: how late a client that was
 * idle woke for its request (the sleep's own error, which the latency
 * includes). */
enum { SRC_DAEMON, SRC_L2, NSRC };
static const char *const src_names[NSRC] = {"xpjitd (memory hit)", "own cache file (L2 hit)"};

typedef struct open_shared {
  double release_ms;
  int count[64], late_count[64], errors[64];
  char err[64][128];
} open_shared;

typedef struct open_res {
  double offered, achieved, daemon_us_per_req;
  size_t n;
  int errors;
} open_res;

/* The L2 peer's key (the daemon's compile of axpy<f32>, as listed in its
 * cache file) and the file that holds only it. */
static struct {
  char path[PATH_MAX];
  char code[65], kernel[256], dtypes[256], target[1200], options[64], versions[128];
  unsigned ndim;
  bool ok;
} l2peer;

static double exp_gap_ms(unsigned *seed, double mean_ms) {
  double u = ((double)rand_r(seed) + 1.0) / ((double)RAND_MAX + 2.0);
  return -log(u) * mean_ms;
}

static void sleep_until_ms(double t) {
  struct timespec ts = {(time_t)(t / 1000.0), 0};
  ts.tv_nsec = (long)((t - (double)ts.tv_sec * 1000.0) * 1e6);
  if (ts.tv_nsec >= 1000000000L)
    ts.tv_sec++, ts.tv_nsec -= 1000000000L;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

/* One level: clients at rate requests/s in all from src; samples (us) of
 * the latency from the intended time into *all, the wake-up lateness of
 * idle clients into *late. */
static void open_level(daemon_t *d, const xpd_buf *get, int src, int clients, double rate,
                       double **all, size_t *nall, double **late, size_t *nlate, open_res *out) {
  double per_client = rate / clients;
  size_t cap = (size_t)(per_client * opt_seconds * 1.5) + 1000;
  size_t bytes = sizeof(open_shared) + 2 * (size_t)clients * cap * sizeof(double);
  open_shared *sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) {
    fprintf(stderr, "daemon: mmap: %s\n", strerror(errno));
    exit(1);
  }
  double *samples = (double *)(sh + 1), *lates = samples + (size_t)clients * cap;
  int gate[2], ready[2];
  if (pipe(gate) || pipe(ready)) {
    fprintf(stderr, "daemon: pipe: %s\n", strerror(errno));
    exit(1);
  }
  fflush(NULL);
  pid_t pids[64];
  for (int c = 0; c < clients; c++) {
    pids[c] = fork();
    if (pids[c] < 0) {
      fprintf(stderr, "daemon: fork: %s\n", strerror(errno));
      exit(1);
    }
    if (pids[c] != 0)
      continue;
    close(gate[1]);
    close(ready[0]);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* wake when asked, not 50 us later */
    char err[512] = "";
    int fd = -1;
    xpj_cache *cache = NULL;
    xpj_cache_key key = {l2peer.code,   l2peer.kernel,  l2peer.dtypes,  l2peer.ndim,
                         l2peer.target, l2peer.options, l2peer.versions};
    if (src == SRC_DAEMON) {
      fd = xpd_connect(d->sock, 10000, err, sizeof err, NULL, NULL);
    } else {
      xpj_cache_config cc = {.path = l2peer.path, .mode = XPJ_CACHE_MODE_RW};
      if (xpj_cache_open(&cc, &cache) != XPJ_OK || xpj_cache_mode_of(cache) == XPJ_CACHE_MODE_OFF)
        snprintf(err, sizeof err, "cache %.200s: %.200s", l2peer.path, xpj_cache_last_error());
      else
        fd = 0;
    }
    char ch = fd >= 0 ? 'y' : 'n';
    if (write(ready[1], &ch, 1) != 1)
      _exit(1);
    close(ready[1]);
    while (read(gate[0], &ch, 1) < 0 && errno == EINTR) {
    }
    if (fd < 0) {
      sh->errors[c] = 1;
      snprintf(sh->err[c], sizeof sh->err[c], "%s", err);
      _exit(1);
    }
    double *mine = samples + (size_t)c * cap, *lmine = lates + (size_t)c * cap;
    unsigned seed = (unsigned)getpid() * 2654435761u;
    double mean = 1000.0 / per_client;
    double end = sh->release_ms + opt_seconds * 1000.0;
    double t = sh->release_ms + exp_gap_ms(&seed, mean);
    size_t n = 0, nl = 0;
    while (t < end && n < cap) {
      double now = now_ms();
      if (now < t) {
        sleep_until_ms(t);
        lmine[nl++] = (now_ms() - t) * 1000.0;
      }
      int rc;
      if (src == SRC_DAEMON) {
        rc = one_get(fd, get, NULL, err, sizeof err);
      } else {
        xpj_cache_entry e;
        rc = xpj_cache_get(cache, &key, &e) == XPJ_OK && e.size ? 0 : -1;
        if (rc)
          snprintf(err, sizeof err, "L2 miss: %s", xpj_cache_last_error());
        else
          xpj_cache_entry_clear(&e);
      }
      if (rc) {
        sh->errors[c]++;
        snprintf(sh->err[c], sizeof sh->err[c], "%s", err);
        break;
      }
      mine[n++] = (now_ms() - t) * 1000.0;
      t += exp_gap_ms(&seed, mean);
    }
    sh->count[c] = (int)n;
    sh->late_count[c] = (int)nl;
    if (cache)
      xpj_cache_close(cache);
    if (fd > 0)
      close(fd);
    _exit(0);
  }
  close(ready[1]);
  close(gate[0]);
  char ch;
  for (int c = 0; c < clients; c++)
    if (read(ready[0], &ch, 1) != 1 || ch != 'y')
      fail("open loop: a client could not connect");
  close(ready[0]);
  double cpu0 = proc_cpu_ms(d->pid);
  sh->release_ms = now_ms() + 20; /* every client asleep before the first request */
  close(gate[1]);
  for (int c = 0; c < clients; c++)
    while (waitpid(pids[c], NULL, 0) < 0 && errno == EINTR) {
    }
  double cpu1 = proc_cpu_ms(d->pid);
  memset(out, 0, sizeof *out);
  out->offered = rate;
  size_t n = 0, nl = 0;
  for (int c = 0; c < clients; c++) {
    if (sh->errors[c]) {
      fail("open loop, %s, %.0f/s: client %d: %s", src_names[src], rate, c, sh->err[c]);
      out->errors += sh->errors[c];
    }
    n += (size_t)sh->count[c];
    nl += (size_t)sh->late_count[c];
  }
  *all = realloc(*all, (*nall + n + 1) * sizeof **all);
  *late = realloc(*late, (*nlate + nl + 1) * sizeof **late);
  if (!*all || !*late) {
    fprintf(stderr, "daemon: out of memory\n");
    exit(1);
  }
  for (int c = 0; c < clients; c++) {
    memcpy(*all + *nall, samples + (size_t)c * cap, (size_t)sh->count[c] * sizeof(double));
    *nall += (size_t)sh->count[c];
    memcpy(*late + *nlate, lates + (size_t)c * cap, (size_t)sh->late_count[c] * sizeof(double));
    *nlate += (size_t)sh->late_count[c];
  }
  out->n = n;
  out->achieved = (double)n / opt_seconds;
  out->daemon_us_per_req = src == SRC_DAEMON && n ? (cpu1 - cpu0) * 1000.0 / (double)n : NAN;
  munmap(sh, bytes);
}

/* Percentiles of v[0..n) (sorted here) into a line for a round. */
static void pct_line(double *v, size_t n, double *p50, double *p99, double *p999, double *max) {
  qsort(v, n, sizeof *v, cmp_double);
  *p50 = pct_sorted(v, n, 50);
  *p99 = pct_sorted(v, n, 99);
  *p999 = pct_sorted(v, n, 99.9);
  *max = n ? v[n - 1] : NAN;
}

/* Fills l2peer: a cache file of its own holding the daemon's axpy<f32>
 * (digest), copied from the daemon's file. */
static void l2peer_setup(daemon_t *d, const char *digest) {
  char dpath[PATH_MAX + 32];
  snprintf(dpath, sizeof dpath, "%s/cache-v2.db", d->cache);
  xpj_cache_config rc = {.path = dpath, .mode = XPJ_CACHE_MODE_RO};
  xpj_cache *from = NULL, *to = NULL;
  xpj_cache_entry e;
  memset(&e, 0, sizeof e);
  if (xpj_cache_open(&rc, &from) != XPJ_OK || xpj_cache_find(from, digest, &e) != XPJ_OK) {
    fail("L2 peer: the daemon's cache file %s has no %s: %s", dpath, digest,
         xpj_cache_last_error());
    xpj_cache_close(from);
    return;
  }
  char dir[PATH_MAX - 32];
  new_dir(dir, sizeof dir, "l2peer");
  snprintf(l2peer.path, sizeof l2peer.path, "%s/cache-v2.db", dir);
  snprintf(l2peer.code, sizeof l2peer.code, "%s", e.code);
  snprintf(l2peer.kernel, sizeof l2peer.kernel, "%s", e.kernel);
  snprintf(l2peer.dtypes, sizeof l2peer.dtypes, "%s", e.dtypes);
  snprintf(l2peer.target, sizeof l2peer.target, "%s", e.target);
  snprintf(l2peer.options, sizeof l2peer.options, "%s", e.options);
  snprintf(l2peer.versions, sizeof l2peer.versions, "%s", e.versions);
  l2peer.ndim = e.ndim;
  xpj_cache_key k = {l2peer.code,   l2peer.kernel,  l2peer.dtypes,  l2peer.ndim,
                     l2peer.target, l2peer.options, l2peer.versions};
  xpj_cache_value v = {e.failed, e.data, e.size, e.entry, e.log, e.local_bytes, e.scratch_bytes,
                       e.compile_ms, 0};
  xpj_cache_config wc = {.path = l2peer.path, .mode = XPJ_CACHE_MODE_RW};
  if (xpj_cache_open(&wc, &to) != XPJ_OK || xpj_cache_put(to, &k, &v) != XPJ_OK)
    fail("L2 peer: cannot write %s: %s", l2peer.path, xpj_cache_last_error());
  else
    l2peer.ok = true;
  xpj_cache_close(to);
  xpj_cache_entry_clear(&e);
  xpj_cache_close(from);
}

/* ---- (b) storms ------------------------------------------------------------------- */

enum {
  V_DAEMON_SHARED,
  V_DAEMON_NOCACHE,
  V_LOCAL_SHARED,
  V_LOCAL_OWN,
  V_WARM,
  V_NOP,
  V_ONCE,
  NV
};
static const char *const vnames[NV] = {
    "daemon, shared cache",    "daemon, client cache off", "no daemon, shared cache",
    "no daemon, own caches",   "warm cache (no compile)",  "process start only",
    "compile once (1 process)"};

typedef struct storm_res {
  double wall_ms, cpu_ms, daemon_cpu_ms, client_ms_max;
  double daemon_own_ms; /* the daemon process alone, its workers not (/proc, 10 ms ticks) */
  uint64_t compiles, daemon_hits, l2_hits, fallbacks;
  long long daemon_compiles;
  int failed;
} storm_res;

static char warm_dir[PATH_MAX];

/* One variant: the processes spawned back to back, waited for; a daemon
 * before and after the clock where the variant has one. */
static void storm(int v, storm_res *out) {
  memset(out, 0, sizeof *out);
  out->daemon_compiles = -1;
  char dir[256], cache[PATH_MAX];
  new_dir(dir, sizeof dir, "storm");
  snprintf(cache, sizeof cache, "%s/cache", dir);
  mkdir(cache, 0700);
  int procs = v == V_ONCE ? 1 : opt_procs;
  daemon_t d;
  bool has_daemon = v == V_DAEMON_SHARED || v == V_DAEMON_NOCACHE;
  reap_orphans(); /* what earlier parts left is not this variant's */
  double cpu0 = cpu_children_ms();
  if (has_daemon)
    daemon_start(&d, dir, cache, NULL);
  char env_daemon[160], env_cache[PATH_MAX + 32];
  if (has_daemon)
    snprintf(env_daemon, sizeof env_daemon, "XPJIT_DAEMON=%s", d.sock);
  else
    snprintf(env_daemon, sizeof env_daemon, "XPJIT_DAEMON=off");
  snprintf(env_cache, sizeof env_cache, "XPJIT_CACHE_DIR=%s", v == V_WARM ? warm_dir : cache);
  const char *cache_mode = v == V_DAEMON_NOCACHE || v == V_ONCE ? "XPJIT_CACHE=off" : NULL;
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) {
    fprintf(stderr, "daemon: pipe: %s\n", strerror(errno));
    exit(1);
  }
  /* environments made before the clock */
  char ***envs = calloc((size_t)procs, sizeof *envs);
  char (*own)[PATH_MAX + 32] = calloc((size_t)procs, sizeof *own);
  if (!envs || !own) {
    fprintf(stderr, "daemon: out of memory\n");
    exit(1);
  }
  for (int i = 0; i < procs; i++) {
    const char *extra[4] = {env_daemon, env_cache, cache_mode, NULL};
    if (v == V_LOCAL_OWN) {
      char od[PATH_MAX];
      snprintf(od, sizeof od, "%s/own-%d", dir, i);
      mkdir(od, 0700);
      snprintf(own[i], sizeof own[i], "XPJIT_CACHE_DIR=%s", od);
      extra[1] = own[i];
    }
    envs[i] = child_env(extra);
  }
  char *argv[] = {"daemon", "--child", v == V_NOP ? "nop" : "storm", "--examples", opt_examples,
                  NULL};
  pid_t *pids = calloc((size_t)procs, sizeof *pids);
  double t0 = now_ms();
  for (int i = 0; i < procs; i++)
    pids[i] = spawn_self(argv, envs[i], pfd[1]);
  close(pfd[1]);
  char **lines = calloc((size_t)procs, sizeof *lines);
  int nl = read_lines(pfd[0], lines, procs);
  close(pfd[0]);
  for (int i = 0; i < procs; i++) {
    int ws = 0;
    while (waitpid(pids[i], &ws, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
      out->failed++;
  }
  out->wall_ms = now_ms() - t0;
  if (has_daemon) {
    char text[8192];
    if (daemon_stats(&d, text, sizeof text))
      out->daemon_compiles = stat_of(text, "compiles");
    out->daemon_own_ms = proc_cpu_ms(d.pid);
    daemon_stop(&d);
    out->daemon_cpu_ms = d.cpu_ms;
  }
  reap_orphans();
  out->cpu_ms = cpu_children_ms() - cpu0;
  for (int i = 0; i < nl; i++) {
    unsigned long long c, dh, l2, fb;
    double ms;
    if (v != V_NOP && sscanf(lines[i], "ok %llu %llu %llu %llu %lf", &c, &dh, &l2, &fb, &ms) == 5) {
      out->compiles += c;
      out->daemon_hits += dh;
      out->l2_hits += l2;
      out->fallbacks += fb;
      if (ms > out->client_ms_max)
        out->client_ms_max = ms;
      /* what each process must have seen */
      bool ok = c + dh + l2 == NKERNELS && fb == 0;
      switch (v) {
      case V_DAEMON_SHARED: ok = ok && c == 0; break;
      case V_DAEMON_NOCACHE: ok = ok && c == 0 && dh == NKERNELS; break;
      case V_LOCAL_SHARED: ok = ok && dh == 0; break;
      case V_LOCAL_OWN:
      case V_ONCE: ok = ok && c == NKERNELS; break;
      case V_WARM: ok = ok && l2 == NKERNELS; break;
      }
      if (!ok)
        fail("%s: a process counted compiles %llu daemon_hits %llu l2_hits %llu fallbacks %llu",
             vnames[v], c, dh, l2, fb);
    } else if (v != V_NOP || strncmp(lines[i], "ok", 2)) {
      fail("%s: %s", vnames[v], lines[i]);
    }
    free(lines[i]);
  }
  if (v != V_NOP && nl != procs)
    fail("%s: %d of %d processes reported", vnames[v], nl, procs);
  if (out->failed)
    fail("%s: %d processes failed", vnames[v], out->failed);
  if (has_daemon && out->daemon_compiles != NKERNELS)
    fail("%s: xpjitd compiled %lld kernels, expected %d", vnames[v], out->daemon_compiles,
         NKERNELS);
  for (int i = 0; i < procs; i++)
    free(envs[i]);
  free(envs);
  free(own);
  free(pids);
  free(lines);
  rm_tree(dir);
}

/* ---- (c) --cluster: storms across simulated nodes ------------------------------------ */

/* --nodes (4) "nodes", each a cache directory and an xpjitd of its own, run
 * --procs-per-node (8) storm processes each, all spawned at once; with one
 * Redis (a unix socket, XPJIT_REDIS) shared by every node, and without.
 * Wall: first spawn to last exit; CPU: every process, daemon, worker and
 * redis-server (RUSAGE_CHILDREN). The daemons ask Redis (XPJIT_REDIS in
 * their environment), the processes ask their daemon. Checked: every
 * result, the compiles of all daemons together (20 with Redis, 20 per node
 * without), and that no process asked Redis itself. */
static int opt_nodes = 4, opt_per_node = 8;
static bool opt_cluster = false;

typedef struct cluster_res {
  double wall_ms, cpu_ms;
  long long compiles; /* by every daemon */
  unsigned long long redis_hits, daemon_hits;
  long long daemon_redis_hits; /* kernels the daemons' workers found there */
  unsigned long long redis_errors; /* failed, timed out or skipped */
} cluster_res;

static void cluster_storm(bool redis, cluster_res *out) {
  memset(out, 0, sizeof *out);
  char dir[256], rsock[PATH_MAX], env_redis[PATH_MAX + 32];
  new_dir(dir, sizeof dir, redis ? "cluster-redis" : "cluster");
  int nodes = opt_nodes, procs = opt_nodes * opt_per_node;
  daemon_t *d = calloc((size_t)nodes, sizeof *d);
  char ***envs = calloc((size_t)procs, sizeof *envs);
  char (*ed)[160] = calloc((size_t)nodes, sizeof *ed);
  char (*ec)[PATH_MAX + 32] = calloc((size_t)nodes, sizeof *ec);
  pid_t *pids = calloc((size_t)procs, sizeof *pids);
  char **lines = calloc((size_t)procs, sizeof *lines);
  if (!d || !envs || !ed || !ec || !pids || !lines) {
    fprintf(stderr, "daemon: out of memory\n");
    exit(1);
  }
  reap_orphans();
  double cpu0 = cpu_children_ms();
  pid_t rpid = -1;
  if (redis) {
    char why[PATH_MAX + 64];
    if ((rpid = bench_redis_start(dir, rsock, sizeof rsock, why, sizeof why)) < 0) {
      fprintf(stderr, "daemon: %s\n", why);
      exit(1);
    }
    snprintf(env_redis, sizeof env_redis, "XPJIT_REDIS=unix:%s", rsock);
  } else {
    snprintf(env_redis, sizeof env_redis, "XPJIT_REDIS=off");
  }
  for (int n = 0; n < nodes; n++) {
    char nd[PATH_MAX], cache[PATH_MAX + 16];
    snprintf(nd, sizeof nd, "%s/node%d", dir, n);
    mkdir(nd, 0700);
    snprintf(cache, sizeof cache, "%s/cache", nd);
    mkdir(cache, 0700);
    daemon_start(&d[n], nd, cache, env_redis); /* the daemons ask Redis */
    snprintf(ed[n], sizeof ed[n], "XPJIT_DAEMON=%s", d[n].sock);
    snprintf(ec[n], sizeof ec[n], "XPJIT_CACHE_DIR=%s", cache);
  }
  for (int i = 0; i < procs; i++) {
    const char *extra[] = {ed[i % nodes], ec[i % nodes], env_redis, NULL};
    envs[i] = child_env(extra);
  }
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) {
    fprintf(stderr, "daemon: pipe: %s\n", strerror(errno));
    exit(1);
  }
  char *argv[] = {"daemon", "--child", "storm", "--examples", opt_examples, NULL};
  double t0 = now_ms();
  for (int i = 0; i < procs; i++)
    pids[i] = spawn_self(argv, envs[i], pfd[1]);
  close(pfd[1]);
  int nl = read_lines(pfd[0], lines, procs);
  close(pfd[0]);
  int failed = 0;
  for (int i = 0; i < procs; i++) {
    int ws = 0;
    while (waitpid(pids[i], &ws, 0) < 0 && errno == EINTR) {
    }
    failed += !WIFEXITED(ws) || WEXITSTATUS(ws) != 0;
  }
  out->wall_ms = now_ms() - t0;
  for (int n = 0; n < nodes; n++) {
    char text[8192];
    if (daemon_stats(&d[n], text, sizeof text)) {
      out->compiles += stat_of(text, "compiles");
      out->daemon_redis_hits += stat_of(text, "hits_redis");
    }
    daemon_stop(&d[n]);
  }
  bench_redis_stop(rpid);
  reap_orphans();
  out->cpu_ms = cpu_children_ms() - cpu0;
  const char *name = redis ? "with Redis" : "without Redis";
  for (int i = 0; i < nl; i++) {
    unsigned long long c, dh, l2, fb, rh = 0, re = 0;
    double ms;
    if (sscanf(lines[i], "ok %llu %llu %llu %llu %lf %llu %llu", &c, &dh, &l2, &fb, &ms, &rh,
               &re) == 7) {
      out->redis_hits += rh;
      out->redis_errors += re;
      out->daemon_hits += dh;
      if (c != 0 || c + dh + l2 + rh != NKERNELS || fb)
        fail("cluster %s: a process counted compiles %llu daemon_hits %llu l2_hits %llu "
             "redis_hits %llu fallbacks %llu", name, c, dh, l2, rh, fb);
      if (rh)
        fail("cluster %s: a process asked Redis itself (%llu hits): its daemon does", name, rh);
    } else {
      fail("cluster %s: %s", name, lines[i]);
    }
    free(lines[i]);
  }
  if (nl != procs || failed)
    fail("cluster %s: %d of %d processes reported, %d failed", name, nl, procs, failed);
  long long want = redis ? NKERNELS : (long long)NKERNELS * nodes;
  if (out->compiles != want)
    fail("cluster %s: the daemons compiled %lld kernels, expected %lld", name, out->compiles,
         want);
  for (int i = 0; i < procs; i++)
    free(envs[i]);
  free(envs);
  free(ed);
  free(ec);
  free(pids);
  free(lines);
  free(d);
  rm_tree(dir);
}

static int run_cluster(void) {
  cluster_res cr[2][16];
  int rounds = opt_rounds > 16 ? 16 : opt_rounds;
  for (int r = 0; r < rounds; r++)
    for (int v = 0; v < 2; v++) {
      cluster_storm(v == 1, &cr[v][r]);
      cluster_res *c = &cr[v][r];
      printf("cluster round %d, %-13s wall %6.0f ms, CPU %6.0f ms, compiles %3lld, daemon hits "
             "%4llu, the daemons' Redis hits %3lld, the processes' %llu (errors or skips %llu)\n",
             r + 1, v ? "with Redis" : "without Redis", c->wall_ms, c->cpu_ms, c->compiles,
             c->daemon_hits, c->daemon_redis_hits, c->redis_hits, c->redis_errors);
      fflush(stdout);
    }
  double w[2], cpu[2];
  for (int v = 0; v < 2; v++) {
    double ws[16], cs[16];
    for (int r = 0; r < rounds; r++)
      ws[r] = cr[v][r].wall_ms, cs[r] = cr[v][r].cpu_ms;
    w[v] = med(ws, rounds);
    cpu[v] = med(cs, rounds);
  }
  printf("\n(c) %d nodes x %d processes x 20 kernels, an xpjitd and a cache per node (median "
         "of %d rounds)\n", opt_nodes, opt_per_node, rounds);
  printf("| variant | wall | CPU | compiles | daemon hits | the daemons' Redis hits |\n"
         "|---|---:|---:|---:|---:|---:|\n");
  for (int v = 0; v < 2; v++)
    printf("| %s | %.0f ms | %.0f ms | %lld | %llu | %lld |\n",
           v ? "one Redis for all nodes" : "no Redis", w[v], cpu[v], cr[v][0].compiles,
           cr[v][0].daemon_hits, cr[v][0].daemon_redis_hits);
  printf("(counts: round 1)\nratios without / with Redis: wall %.2fx, CPU %.2fx\n", w[0] / w[1],
         cpu[0] / cpu[1]);
  return 0;
}

/* ---- output ----------------------------------------------------------------------- */

static void usage(void) {
  fprintf(stderr, "usage: daemon [--quick] [--rounds N] [--seconds S] [--procs N] [--api-runs N]\n"
                  "              [--examples DIR] [--xpjitd PATH] [--keep]\n"
                  "              [--parts closed,open,parse,api,storm] [--rates R1,R2,...]\n"
                  "       daemon --cluster [--nodes N] [--procs-per-node N] [--rounds N]\n");
  exit(2);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--child") && val) {
      i++;
      continue; /* handled below, after the options it needs */
    } else if (!strcmp(a, "--quick")) {
      opt_rounds = 1, opt_seconds = 0.5, opt_api_runs = 5;
    } else if (!strcmp(a, "--rounds") && val) {
      opt_rounds = atoi(argv[++i]);
    } else if (!strcmp(a, "--seconds") && val) {
      opt_seconds = atof(argv[++i]);
    } else if (!strcmp(a, "--procs") && val) {
      opt_procs = atoi(argv[++i]);
    } else if (!strcmp(a, "--api-runs") && val) {
      opt_api_runs = atoi(argv[++i]);
    } else if (!strcmp(a, "--examples") && val) {
      snprintf(opt_examples, sizeof opt_examples, "%s", argv[++i]);
    } else if (!strcmp(a, "--xpjitd") && val) {
      snprintf(opt_xpjitd, sizeof opt_xpjitd, "%s", argv[++i]);
    } else if (!strcmp(a, "--keep")) {
      opt_keep = true;
    } else if (!strcmp(a, "--parts") && val) {
      part_closed = strstr(val, "closed") != NULL;
      part_open = strstr(val, "open") != NULL;
      part_parse = strstr(val, "parse") != NULL;
      part_api = strstr(val, "api") != NULL;
      part_storm = strstr(val, "storm") != NULL;
      i++;
    } else if (!strcmp(a, "--rates") && val) {
      opt_nrates = 0;
      for (char *p = argv[++i], *e; *p && opt_nrates < 8; p = *e ? e + 1 : e) {
        double r = strtod(p, &e);
        if (e == p || r < 64 || r > 1e6 || (*e && *e != ','))
          usage();
        opt_rates[opt_nrates++] = r;
      }
    } else if (!strcmp(a, "--cluster")) {
      opt_cluster = true;
    } else if (!strcmp(a, "--nodes") && val) {
      opt_nodes = atoi(argv[++i]);
    } else if (!strcmp(a, "--procs-per-node") && val) {
      opt_per_node = atoi(argv[++i]);
    } else {
      usage();
    }
  }
  if (opt_rounds < 1 || opt_rounds > 16 || opt_seconds <= 0 || opt_procs < 1 || opt_procs > 4096 ||
      opt_api_runs < 1 || opt_nodes < 1 || opt_nodes > 64 || opt_per_node < 1 ||
      opt_per_node > 256)
    usage();
  snprintf(axpy_path, sizeof axpy_path, "%s/axpy.xpk", opt_examples);
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--child")) {
      if (!strcmp(argv[i + 1], "storm"))
        return child_storm();
      if (!strcmp(argv[i + 1], "api"))
        return child_api();
      if (!strcmp(argv[i + 1], "nop"))
        return child_line("ok");
      usage();
    }

  ssize_t sl = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
  if (sl <= 0) {
    fprintf(stderr, "daemon: cannot find its own executable\n");
    return 1;
  }
  self_exe[sl] = 0;
  /* orphaned compile servers come back to us (reap_orphans) */
  prctl(PR_SET_CHILD_SUBREAPER, 1UL, 0, 0, 0);
  if (!opt_xpjitd[0]) { /* BUILD/bench/daemon -> BUILD/bin/xpjitd */
    char d[PATH_MAX - 16];
    snprintf(d, sizeof d, "%.*s", (int)sizeof d - 1, self_exe);
    char *s = strrchr(d, '/');
    if (s)
      *s = 0;
    s = strrchr(d, '/');
    if (s)
      *s = 0;
    snprintf(opt_xpjitd, sizeof opt_xpjitd, "%s/bin/xpjitd", d);
  }
  if (access(opt_xpjitd, X_OK) != 0) {
    fprintf(stderr, "daemon: no xpjitd at %s (make, or --xpjitd PATH)\n", opt_xpjitd);
    return 1;
  }
  size_t src_len = 0;
  char *src = slurp(axpy_path, &src_len);
  if (!src) {
    fprintf(stderr, "daemon: cannot read %s (run from the repository root, or --examples)\n",
            axpy_path);
    return 1;
  }
  snprintf(tmpdir, sizeof tmpdir, "/tmp/xpjd-bench-XXXXXX");
  if (!mkdtemp(tmpdir)) {
    fprintf(stderr, "daemon: mkdtemp: %s\n", strerror(errno));
    return 1;
  }

  char date[64], model[256], la[64];
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d %H:%M", localtime(&now));
  struct utsname un;
  uname(&un);
  cpu_model(model, sizeof model);
  loadavg(la, sizeof la);
  char vers[128], tstr[1200] = "?";
  xpj_versions_str(vers, sizeof vers);
  {
    xpj_target t;
    char err[256];
    if (xpj_target_parse("cpu", &t, err, sizeof err) == XPJ_OK)
      xpj_target_str(&t, tstr, sizeof tstr);
  }
  printf("bench/daemon: xpjitd hit latency (raw protocol, 1/8/64 client processes) and the "
         "start-up storm\n");
  printf("command:   ");
  for (int i = 0; i < argc; i++)
    printf("%s%s", i ? " " : "", argv[i]);
  printf("\ndate:      %s\n", date);
  printf("machine:   %s %s, %s, %ld online cores\n", un.sysname, un.machine, model,
         sysconf(_SC_NPROCESSORS_ONLN));
  printf("xpjit:     %s, target %.40s...\n", vers, tstr);
  printf("xpjitd:    %s (default workers: one per online core)\n", opt_xpjitd);
  printf("settings:  %d rounds; latency %.1f s per level and round; storm %d processes; "
         "%d API children per mode\n",
         opt_rounds, opt_seconds, opt_procs, opt_api_runs);
  printf("load:      %s (before)\n", la);
  fflush(stdout);
  double t_start = now_ms();
  if (opt_cluster) {
    int rc = run_cluster();
    loadavg(la, sizeof la);
    printf("load:      %s (after)\n", la);
    if (!opt_keep)
      rm_tree(tmpdir);
    if (failures)
      printf("\n%d FAILURES\n", failures);
    return rc || failures ? 1 : 0;
  }

  /* ---- (a) ---- */
  char ldir[PATH_MAX];
  new_dir(ldir, sizeof ldir, "lat");
  daemon_t ld;
  daemon_start(&ld, ldir, NULL, NULL);
  char digest32[65] = "", digest64[65] = "", err[512];
  {
    xpd_buf b32, b64;
    build_get(&b32, src, src_len, "T=f32", NULL);
    build_get(&b64, src, src_len, "T=f64", NULL);
    int fd = xpd_connect(ld.sock, 5000, err, sizeof err, NULL, NULL);
    if (fd < 0 || one_get(fd, &b32, digest32, err, sizeof err) ||
        one_get(fd, &b64, digest64, err, sizeof err)) {
      fprintf(stderr, "daemon: priming xpjitd: %s\n", err);
      return 1;
    }
    close(fd);
    xpd_buf_free(&b32);
    xpd_buf_free(&b64);
  }
  /* what libxpjit sends a daemon that answers LOOKUP (the digest of the
   * kernel's key), and the GET it sends when asked for it (the source) */
  xpd_buf get32, look32 = {0};
  build_get(&get32, src, src_len, "T=f32", digest32);
  {
    xpj_compile_opts o;
    xpj_compile_opts_default(&o);
    xpd_lookup lk = {.timeout_ms = o.timeout_ms ? o.timeout_ms : 60000};
    memcpy(lk.digest, digest32, sizeof lk.digest);
    xpd_begin(&look32, XPD_LOOKUP, 1);
    xpd_put_lookup(&look32, &lk);
    xpd_end(&look32, 0);
  }
  enum { NLEV = 6 };
  static const int levels[NLEV] = {1, 1, 8, 64, 64, 64},
                   pauses[NLEV] = {0, 0, 0, 0, 0, 10};
  static const bool one_cpu[NLEV] = {false, true, false, false, false, false};
  static const bool with_source[NLEV] = {false, false, false, false, true, false};
  static const char *const lnames[NLEV] = {
      "", ", client and xpjitd on one CPU", "", "", ", GET with the source",
      ", random pauses (mean 10 ms)"};
  double *pooled[NLEV] = {NULL};
  size_t npooled[NLEV] = {0};
  double rps[NLEV][64], dus[NLEV][64];
  for (int r = 0; part_closed && r < opt_rounds; r++) {
    for (int l = 0; l < NLEV; l++) {
      lat_res lr;
      latency_level(&ld, with_source[l] ? &get32 : &look32, levels[l], pauses[l], one_cpu[l],
                    &pooled[l], &npooled[l], &lr, NULL, NULL);
      rps[l][r] = lr.rps;
      dus[l][r] = lr.daemon_us_per_req;
      printf("latency round %d, %2d clients%s: %zu requests, p50 %.1f us, p99 %.1f us, mean %.1f "
             "us, max %.0f us, %.0f req/s, daemon %.1f us CPU per request\n",
             r + 1, levels[l], lnames[l], lr.n, lr.p50, lr.p99,
             lr.mean, lr.max, lr.rps, lr.daemon_us_per_req);
      fflush(stdout);
    }
  }

  /* (a3) the 64 clients with pauses, alone and while a 7 MiB source is
   * parsed (another each round) */
  double *ppooled[2] = {NULL}, bigms[16];
  size_t nppooled[2] = {0};
  for (int r = 0; part_parse && r < opt_rounds; r++)
    for (int with = 0; with < 2; with++) {
      xpd_buf big = {0};
      if (with) {
        size_t blen = 0;
        char *bsrc = big_source(src, src_len, 7u << 20, r, &blen);
        build_get(&big, bsrc, blen, "T=f32", NULL);
        free(bsrc);
      }
      lat_res lr;
      double bms = 0;
      latency_level(&ld, &look32, 64, 10, false, &ppooled[with], &nppooled[with], &lr,
                    with ? &big : NULL, &bms);
      if (with)
        bigms[r] = bms;
      printf("parse round %d, 64 clients, random pauses (mean 10 ms)%s: %zu requests, p50 %.1f "
             "us, p99 %.1f us, max %.0f us, %.0f req/s",
             r + 1, with ? ", a 7 MiB source sent at the start" : "", lr.n, lr.p50, lr.p99,
             lr.max, lr.rps);
      if (with)
        printf("; the 7 MiB GET answered in %.0f ms", bms);
      printf("\n");
      fflush(stdout);
      xpd_buf_free(&big);
    }

  /* (a2) the open loop, and its peer: the same hit from a cache file */
  double *opooled[8][NSRC] = {{NULL}}, *olate[8][NSRC] = {{NULL}};
  size_t nopooled[8][NSRC] = {{0}}, nolate[8][NSRC] = {{0}};
  double oach[8][NSRC][16], ocpu[8][16];
  if (part_open)
    l2peer_setup(&ld, digest32);
  for (int r = 0; part_open && r < opt_rounds; r++)
    for (int q = 0; q < opt_nrates; q++)
      for (int k = 0; k < NSRC; k++) {
        int sx = (k + r) % NSRC; /* the two alternate which goes first */
        if (sx == SRC_L2 && !l2peer.ok)
          continue;
        open_res o;
        size_t from = nopooled[q][sx], lfrom = nolate[q][sx];
        open_level(&ld, &look32, sx, 64, opt_rates[q], &opooled[q][sx], &nopooled[q][sx],
                   &olate[q][sx], &nolate[q][sx], &o);
        oach[q][sx][r] = o.achieved;
        if (sx == SRC_DAEMON)
          ocpu[q][r] = o.daemon_us_per_req;
        /* this round's own percentiles, on a copy */
        size_t n = nopooled[q][sx] - from, nl = nolate[q][sx] - lfrom;
        double *v = malloc((n + nl + 1) * sizeof *v), p50, p99, p999, mx, l50, l99, l999, lmx;
        if (!v) {
          fprintf(stderr, "daemon: out of memory\n");
          return 1;
        }
        memcpy(v, opooled[q][sx] + from, n * sizeof *v);
        pct_line(v, n, &p50, &p99, &p999, &mx);
        memcpy(v, olate[q][sx] + lfrom, nl * sizeof *v);
        pct_line(v, nl, &l50, &l99, &l999, &lmx);
        free(v);
        printf("open loop round %d, 64 clients, %6.0f req/s offered, %-24s %6zu requests, "
               "%6.0f req/s, p50 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.0f us; idle "
               "clients woke late p50 %.1f us, p99 %.1f us; daemon %.1f us CPU per request\n",
               r + 1, opt_rates[q], src_names[sx], n, o.achieved, p50, p99, p999, mx, l50, l99,
               o.daemon_us_per_req);
        fflush(stdout);
      }
  xpd_buf_free(&get32);
  xpd_buf_free(&look32);
  char ltext[8192] = "";
  daemon_stats(&ld, ltext, sizeof ltext);

  /* the public API in fresh processes: daemon, L2, compile */
  enum { A_DAEMON, A_L2, A_COMPILE, NA };
  static const char *const anames[NA] = {"xpjitd (memory hit)", "own cache file (L2 hit)",
                                         "compiled in-process"};
  double api[NA][4][256];
  int napi[NA] = {0};
  if (part_api) {
  char env_d[160], env_l2[PATH_MAX + 32];
  snprintf(env_d, sizeof env_d, "XPJIT_DAEMON=%s", ld.sock);
  char l2dir[PATH_MAX];
  new_dir(l2dir, sizeof l2dir, "api-l2");
  snprintf(env_l2, sizeof env_l2, "XPJIT_CACHE_DIR=%s", l2dir);
  const char *aenv[NA][4] = {{env_d, "XPJIT_CACHE=off", NULL},
                             {"XPJIT_DAEMON=off", env_l2, NULL},
                             {"XPJIT_DAEMON=off", "XPJIT_CACHE=off", NULL}};
  char *aargv[] = {"daemon", "--child", "api", "--examples", opt_examples, NULL};
  {
    double vals[8];
    /* untimed: the daemon learns the API's request; the L2 file is filled */
    run_child(aargv, aenv[A_DAEMON], vals, 8, NULL);
    run_child(aargv, aenv[A_L2], vals, 8, NULL);
  }
  int api_runs = opt_api_runs > 256 ? 256 : opt_api_runs;
  for (int i = 0; i < api_runs; i++)
    for (int a = 0; a < NA; a++) {
      if (a == A_COMPILE && i >= (api_runs + 3) / 4)
        continue; /* compiles are slow and steady: a quarter of the samples */
      double vals[8];
      if (run_child(aargv, aenv[a], vals, 8, NULL) != 7)
        continue;
      unsigned long long c = (unsigned long long)vals[4], dh = (unsigned long long)vals[5],
                         l2 = (unsigned long long)vals[6];
      bool ok = a == A_DAEMON ? c == 0 && dh == 2 : a == A_L2 ? c == 0 && l2 == 2 : c == 2;
      if (!ok)
        fail("API, %s: compiles %llu daemon_hits %llu l2_hits %llu", anames[a], c, dh, l2);
      for (int j = 0; j < 4; j++)
        api[a][j][napi[a]] = vals[j];
      napi[a]++;
    }
  }
  daemon_stop(&ld);
  printf("latency part done at %.1f s\n", (now_ms() - t_start) / 1e3);
  fflush(stdout);

  /* ---- (b) ---- */
  storm_res sr[NV][16];
  int rounds = opt_rounds;
  if (part_storm) {
  new_dir(warm_dir, sizeof warm_dir, "warm");
  {
    char env_w[PATH_MAX + 32];
    snprintf(env_w, sizeof env_w, "XPJIT_CACHE_DIR=%s", warm_dir);
    const char *wenv[] = {"XPJIT_DAEMON=off", env_w, NULL};
    char *wargv[] = {"daemon", "--child", "storm", "--examples", opt_examples, NULL};
    double vals[8];
    run_child(wargv, wenv, vals, 8, NULL); /* fills the warm cache */
  }
  for (int r = 0; r < rounds; r++) {
    for (int v = 0; v < NV; v++) {
      storm(v, &sr[v][r]);
      storm_res *s = &sr[v][r];
      printf("storm round %d, %-26s wall %7.0f ms, CPU %7.0f ms (xpjitd %5.0f ms, its own "
             "process %3.0f ms), compiles %4llu, daemon hits %4llu, L2 hits %4llu, xpjitd "
             "compiles %lld\n",
             r + 1, vnames[v], s->wall_ms, s->cpu_ms, s->daemon_cpu_ms, s->daemon_own_ms,
             (unsigned long long)s->compiles, (unsigned long long)s->daemon_hits,
             (unsigned long long)s->l2_hits, s->daemon_compiles);
      fflush(stdout);
    }
  }
  loadavg(la, sizeof la);
  printf("storm part done at %.1f s; load %s (after)\n", (now_ms() - t_start) / 1e3, la);
  }

  /* ---- tables ---- */
  if (part_closed) {
  printf("\n(a) a hit served from xpjitd's memory, raw protocol, closed loop, each client its "
         "own connection\n");
  printf("| clients | requests | p50 | p99 | mean | max | throughput | xpjitd CPU / request | "
         "p99 < 1 ms |\n|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  for (int l = 0; l < NLEV; l++) {
    size_t n = npooled[l];
    qsort(pooled[l], n, sizeof *pooled[l], cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
      sum += pooled[l][i];
    double p99v = pct_sorted(pooled[l], n, 99);
    printf("| %d%s | %zu | %.1f us | %.1f us | %.1f us | %.0f us | %.0f req/s | %.1f us | %s |\n",
           levels[l], lnames[l], n,
           pct_sorted(pooled[l], n, 50), p99v, n ? sum / (double)n : NAN,
           n ? pooled[l][n - 1] : NAN, med(rps[l], rounds), med(dus[l], rounds),
           levels[l] == 64 ? (p99v < 1000 ? "met" : "missed") : "-");
    free(pooled[l]);
  }
  printf("(percentiles over all samples of all rounds; throughput and CPU: median of the "
         "rounds)\n");
  }
  if (part_open) {
    printf("\n(a2) a hit at a fixed offered load: 64 client processes, requests at exponential "
           "intervals, one at a time each, latency from the intended send time\n");
    printf("| offered | from | requests | achieved | p50 | p99 | p99.9 | max | idle clients "
           "woke late, p99 | xpjitd CPU / request | p99 < 1 ms |\n"
           "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (int q = 0; q < opt_nrates; q++)
      for (int sx = 0; sx < NSRC; sx++) {
        size_t n = nopooled[q][sx];
        if (!n)
          continue;
        double p50, p99, p999, mx, l50, l99, l999, lmx;
        pct_line(opooled[q][sx], n, &p50, &p99, &p999, &mx);
        pct_line(olate[q][sx], nolate[q][sx], &l50, &l99, &l999, &lmx);
        char cpu[32] = "-";
        if (sx == SRC_DAEMON)
          snprintf(cpu, sizeof cpu, "%.1f us", med(ocpu[q], opt_rounds));
        printf("| %.0f req/s | %s | %zu | %.0f req/s | %.1f us | %.1f us | %.1f us | %.0f us | "
               "%.1f us | %s | %s |\n",
               opt_rates[q], src_names[sx], n, med(oach[q][sx], opt_rounds), p50, p99, p999, mx,
               l99, cpu, p99 < 1000 ? "met" : "missed");
        free(opooled[q][sx]);
        free(olate[q][sx]);
      }
    printf("(percentiles over all samples of all rounds; achieved rate and CPU: median of the "
           "rounds)\n");
  }
  if (part_parse) {
    printf("\n(a3) the 64 clients with random pauses (mean 10 ms), alone and while another "
           "client's 7 MiB source is parsed (%.1f s per round)\n", opt_seconds);
    printf("| while | requests | p50 | p99 | p99.9 | max | the 7 MiB GET |\n"
           "|---|---:|---:|---:|---:|---:|---:|\n");
    for (int with = 0; with < 2; with++) {
      double p50, p99, p999, mx;
      pct_line(ppooled[with], nppooled[with], &p50, &p99, &p999, &mx);
      char bm[64] = "-";
      if (with)
        snprintf(bm, sizeof bm, "%.0f ms (median)", med(bigms, opt_rounds));
      printf("| %s | %zu | %.1f us | %.1f us | %.1f us | %.0f us | %s |\n",
             with ? "a 7 MiB source is parsed" : "nothing else", nppooled[with], p50, p99, p999,
             mx, bm);
      free(ppooled[with]);
    }
  }
  if (part_closed || part_open || part_parse)
    printf("xpjitd after part (a): requests %lld (lookups %lld, of them missed %lld), "
           "hits_memory %lld, compiles %lld\n",
           stat_of(ltext, "requests"), stat_of(ltext, "lookups"), stat_of(ltext, "lookups_missed"),
           stat_of(ltext, "hits_memory"), stat_of(ltext, "compiles"));

  if (part_api) {
  printf("\n(a') xpj_program_get_binary(axpy, ndim 1, \"cpu\") in a fresh process (p50 of %d, "
         "compile: %d)\n",
         napi[A_DAEMON], napi[A_COMPILE]);
  printf("| source | context | parse | first get (f32) | second get (f64) |\n"
         "|---|---:|---:|---:|---:|\n");
  for (int a = 0; a < NA; a++)
    printf("| %s | %.2f ms | %.2f ms | %.3f ms | %.3f ms |\n", anames[a],
           med(api[a][0], napi[a]), med(api[a][1], napi[a]), med(api[a][2], napi[a]),
           med(api[a][3], napi[a]));
  }

  if (part_storm) {
  printf("\n(b) the storm: %d processes x 20 kernels (median of %d rounds; CPU = user + system "
         "of every process, daemon and workers included)\n",
         opt_procs, rounds);
  double wm[NV], cm[NV], dm[NV], om[NV];
  for (int v = 0; v < NV; v++) {
    double w[16], c[16], d[16], o[16];
    for (int r = 0; r < rounds; r++)
      w[r] = sr[v][r].wall_ms, c[r] = sr[v][r].cpu_ms, d[r] = sr[v][r].daemon_cpu_ms,
      o[r] = sr[v][r].daemon_own_ms;
    wm[v] = med(w, rounds);
    cm[v] = med(c, rounds);
    dm[v] = med(d, rounds);
    om[v] = med(o, rounds);
  }
  /* what no storm of these processes can go below by much: every process's
   * own work (warm) and each kernel compiled once, less the one process
   * counted twice */
  double base = cm[V_WARM] + cm[V_ONCE] - cm[V_WARM] / opt_procs;
  printf("| variant | wall | CPU | of which xpjitd | CPU / compile once | CPU / (warm + once) | "
         "local compiles | daemon hits | L2 hits |\n"
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int v = 0; v < NV; v++) {
    storm_res *s = &sr[v][0];
    char dcpu[32] = "-", base_ratio[32] = "-";
    if (v == V_DAEMON_SHARED || v == V_DAEMON_NOCACHE)
      snprintf(dcpu, sizeof dcpu, "%.0f ms (process %.0f)", dm[v], om[v]);
    if (v != V_ONCE && v != V_NOP && v != V_WARM)
      snprintf(base_ratio, sizeof base_ratio, "%.2fx", cm[v] / base);
    printf("| %s | %.0f ms | %.0f ms | %s | %.2fx | %s | %llu | %llu | %llu |\n", vnames[v], wm[v],
           cm[v], dcpu, cm[v] / cm[V_ONCE], base_ratio, (unsigned long long)s->compiles,
           (unsigned long long)s->daemon_hits, (unsigned long long)s->l2_hits);
  }
  printf("(counts: round 1. warm + once = warm cache + compile once - one warm process = %.0f "
         "ms)\n",
         base);
  printf("\nratios (CPU; wall in parentheses):\n");
  printf("  no daemon, shared cache / daemon, shared cache:  %.2fx (%.2fx)\n",
         cm[V_LOCAL_SHARED] / cm[V_DAEMON_SHARED], wm[V_LOCAL_SHARED] / wm[V_DAEMON_SHARED]);
  printf("  no daemon, own caches / daemon, shared cache:    %.2fx (%.2fx)\n",
         cm[V_LOCAL_OWN] / cm[V_DAEMON_SHARED], wm[V_LOCAL_OWN] / wm[V_DAEMON_SHARED]);
  printf("  daemon, shared cache / compile once:             %.2fx  goal 1.2x: %s\n",
         cm[V_DAEMON_SHARED] / cm[V_ONCE],
         cm[V_DAEMON_SHARED] / cm[V_ONCE] <= 1.2 ? "met" : "missed");
  printf("  daemon, shared cache / (warm + once):            %.2fx  goal 1.2x: %s\n",
         cm[V_DAEMON_SHARED] / base, cm[V_DAEMON_SHARED] / base <= 1.2 ? "met" : "missed");
  printf("  xpjitd alone (its 20 compiles) / compile once:   %.2fx\n",
         dm[V_DAEMON_SHARED] / cm[V_ONCE]);
  printf("  the daemon process alone (no worker) / compile once: %.2fx\n",
         om[V_DAEMON_SHARED] / cm[V_ONCE]);
  }

  free(src);
  if (!opt_keep)
    rm_tree(tmpdir);
  else
    printf("\nkept %s\n", tmpdir);
  if (failures)
    printf("\n%d FAILURES\n", failures);
  return failures ? 1 : 0;
}
