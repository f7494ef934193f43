/* test_cluster.c - a start-up storm across simulated nodes (issue 18's
 * acceptance; bench/daemon --cluster is the same storm as a benchmark).
 *
 * Four "nodes", each a cache directory (XPJIT_CACHE_DIR) and an xpjitd of
 * its own ($BUILD/bin/xpjitd, default build/) listening at the default
 * socket of the node's own runtime directory (XDG_RUNTIME_DIR/xpjit/
 * xpjitd.sock; the processes find it with XPJIT_DAEMON unset). Eight
 * processes per node, 32 in all, released at once, each get the 20 kernels
 * of tests/storm20.h (examples/axpy.xpk, ndim 1) on the CPU, launch every
 * one and check it against the C reference, and report their counters.
 *
 *   redis     one redis-server (started here on a unix socket in the
 *             test's directory) given to every daemon and every process
 *             (XPJIT_REDIS=unix:PATH): exactly 20 compiles in all, daemons
 *             and processes together
 *   no_redis  the same storm with XPJIT_REDIS=off: 80 compiles, 20 on
 *             each node
 *
 * The daemons ask Redis (their workers, before compiling): a process
 * served by its daemon never does, so the processes' own Redis lookups
 * (redis_hits + redis_misses) must be 0. On a failure every node's and
 * every process's counts are printed.
 *
 * The processes are forked children of this process, which never creates
 * an xpjit context itself; they write their results into shared memory.
 * Every process started here dies with it (PR_SET_PDEATHSIG), this process
 * is a child subreaper (compile workers come back to it), every wait has a
 * deadline, an alarm bounds the whole run, and the temporary directory is
 * removed on every exit path, signals included. */
#define _GNU_SOURCE /* mkdtemp, prctl */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "daemon.h"
#include "procutil.h"
#include "proto.h"
#include "storm20.h"
#include "xpjit.h"
#include "xpjit_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { NODES = 4, PER_NODE = 8, PROCS = NODES * PER_NODE, N = 1000 };
/* The longest the storm may take before its processes are killed, and the
 * whole program (an alarm) before it stops itself. */
enum { STORM_MS = 60000 * SLOW, ALARM_S = 180 * SLOW };

/* The Redis tier's command timeout here. The count is under test, not
 * the default timeout (50 ms): on this 2-core machine, busy with 36
 * processes and their compile workers (more so under ASan or beside a
 * build), a command that times out sends its kernel to a compile of its
 * own (docs/cache.md) and the count to 21 or more. */
#define REDIS_TIMEOUT "2s"

extern char **environ;

/* ---- small helpers ---- */

/* Removes every XPJIT_* variable (a forked child, before its own). */
static void clear_xpjit_env(void) {
  for (;;) {
    char name[256] = "";
    for (char **e = environ; *e; e++)
      if (!strncmp(*e, "XPJIT_", 6)) {
        size_t n = strcspn(*e, "=");
        if (n >= sizeof name)
          n = sizeof name - 1;
        memcpy(name, *e, n);
        name[n] = 0;
        break;
      }
    if (!name[0] || unsetenv(name) != 0)
      return;
  }
}

/* ---- the fixture ---- */

typedef struct node {
  char dir[96];   /* fx.dir/nodeN */
  char run[112];  /* its XDG_RUNTIME_DIR */
  char sock[128]; /* run/xpjit/xpjitd.sock, xpjitd's default there */
  char cache[112];
  char log[112]; /* the daemon's stderr */
  pid_t daemon;
  char stats[8192]; /* its STATS text after the storm ("" if none) */
} node;

/* What a process reports (shared memory). */
typedef struct proc_result {
  int done;    /* reached the end */
  int correct; /* kernels whose launch gave the right values */
  int origin[XPJ_ORIGIN_REDIS + 1]; /* kernels by xpj_kernel_info.origin */
  xpj_cache_counters c;
  double ms;
  char err[256];
} proc_result;

static struct {
  char dir[64]; /* mkdtemp, 0700 */
  char redis_sock[96], redis_log[96];
  pid_t redis;
  node nodes[NODES];
  pid_t pids[PROCS];
  proc_result *res; /* PROCS, MAP_SHARED */
} fx;

static int setup(void **state) {
  (void)state;
  end_escaped_child(); /* a forked child back in cmocka's runner */
  memset(&fx, 0, sizeof fx);
  snprintf(fx.dir, sizeof fx.dir, "/tmp/xpjit-cluster-XXXXXX");
  if (!mkdtemp(fx.dir)) {
    fx.dir[0] = 0;
    return -1;
  }
  fx.res = mmap(NULL, PROCS * sizeof *fx.res, PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (fx.res == MAP_FAILED) {
    fx.res = NULL;
    return -1;
  }
  char top[sizeof fx.dir], base[sizeof fx.nodes[0].dir];
  memcpy(top, fx.dir, sizeof top); /* (not fx itself: -Wrestrict) */
  for (int n = 0; n < NODES; n++) {
    node *d = &fx.nodes[n];
    snprintf(base, sizeof base, "%s/node%d", top, n);
    snprintf(d->dir, sizeof d->dir, "%s", base);
    snprintf(d->run, sizeof d->run, "%s/run", base);
    snprintf(d->sock, sizeof d->sock, "%s/run/xpjit/xpjitd.sock", base);
    snprintf(d->cache, sizeof d->cache, "%s/cache", base);
    snprintf(d->log, sizeof d->log, "%s/xpjitd.log", base);
    if (mkdir(d->dir, 0700) || mkdir(d->run, 0700) || mkdir(d->cache, 0700))
      return -1;
  }
  snprintf(fx.redis_sock, sizeof fx.redis_sock, "%s/redis.sock", top);
  snprintf(fx.redis_log, sizeof fx.redis_log, "%s/redis.log", top);
  return 0;
}

/* Everything still running is killed and reaped; the directory goes. Safe
 * to call twice, and from a signal handler of the test process. */
static int teardown(void **state) {
  (void)state;
  end_escaped_child(); /* it would kill the parent's processes */
  for (int n = 0; n < NODES; n++)
    if (fx.nodes[n].daemon > 0)
      kill(fx.nodes[n].daemon, SIGKILL);
  for (int i = 0; i < PROCS; i++)
    if (fx.pids[i] > 0)
      kill(fx.pids[i], SIGKILL);
  if (fx.redis > 0)
    kill(fx.redis, SIGKILL);
  reap_all(now_ms() + 10000);
  for (int n = 0; n < NODES; n++)
    fx.nodes[n].daemon = 0;
  memset(fx.pids, 0, sizeof fx.pids);
  fx.redis = 0;
  if (fx.dir[0])
    rm_tree(fx.dir);
  fx.dir[0] = 0;
  if (fx.res)
    munmap(fx.res, PROCS * sizeof *fx.res);
  fx.res = NULL;
  return 0;
}

/* The last bytes of a log file, for a failure message. */
static void print_tail(const char *path, size_t max) {
  static char buf[1 << 16];
  FILE *f = fopen(path, "r");
  if (!f)
    return;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *t = buf;
  if (n > max) { /* from the first whole line of the last max bytes */
    t = strchr(buf + n - max, '\n');
    t = t ? t + 1 : buf + n - max;
  }
  print_message("---- end of %s ----\n%s---- (log ends) ----\n", path, t);
}

/* ---- redis-server ---- */

static redisContext *redis_connect(void) {
  struct timeval tv = {1, 0};
  redisContext *c = redisConnectUnixWithTimeout(fx.redis_sock, tv);
  if (c && c->err) {
    redisFree(c);
    return NULL;
  }
  if (c)
    redisSetTimeout(c, tv);
  return c;
}

/* Starts redis-server on fx.redis_sock (no TCP port, nothing saved) and
 * waits until it answers PING. */
static void redis_start(void) {
  pid_t parent = getpid();
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    child_prepare(parent, NULL);
    const char *argv[] = {"redis-server", "--port",      "0",
                          "--unixsocket", fx.redis_sock, "--unixsocketperm",
                          "700",          "--save",      "",
                          "--appendonly", "no",          "--logfile",
                          fx.redis_log,   NULL};
    execvp("redis-server", (char *const *)argv);
    _exit(127);
  }
  fx.redis = pid;
  double deadline = now_ms() + 10000.0 * SLOW;
  for (;;) {
    redisContext *c = redis_connect();
    redisReply *r = c ? redisCommand(c, "PING") : NULL;
    bool ok = r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "PONG");
    if (r)
      freeReplyObject(r);
    if (c)
      redisFree(c);
    if (ok)
      return;
    int ws;
    if (waitpid(pid, &ws, WNOHANG) == pid) {
      fx.redis = 0;
      print_tail(fx.redis_log, 2000);
      fail_msg("redis-server exited at start-up (status 0x%x%s)", ws,
               WIFEXITED(ws) && WEXITSTATUS(ws) == 127
                   ? ": not installed? (apt-get install redis-server)"
                   : "");
    }
    if (now_ms() > deadline) {
      print_tail(fx.redis_log, 2000);
      fail_msg("redis-server did not answer on %s in time", fx.redis_sock);
    }
    sleep_ms(10);
  }
}

/* How many keys match pattern; -1 when Redis does not answer. */
static long long redis_count(const char *pattern) {
  redisContext *c = redis_connect();
  redisReply *r = c ? redisCommand(c, "KEYS %s", pattern) : NULL;
  long long n = r && r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : -1;
  if (r)
    freeReplyObject(r);
  if (c)
    redisFree(c);
  return n;
}

/* SIGTERM (nothing to save), then it must exit in time. */
static void redis_stop(void) {
  if (fx.redis <= 0)
    return;
  kill(fx.redis, SIGTERM);
  int ws = wait_deadline(fx.redis, now_ms() + 10000.0 * SLOW);
  fx.redis = 0;
  assert_true(ws != -1);
}

/* ---- the daemons ---- */

/* Forks xpjitd for node d: its own runtime directory (the socket at its
 * default path there), its own cache directory, XPJIT_REDIS=redis. */
static void daemon_spawn(node *d, const char *redis) {
  char exe[PATH_MAX];
  snprintf(exe, sizeof exe, "%s/bin/xpjitd", build_dir());
  assert_int_equal(access(exe, X_OK), 0);
  pid_t parent = getpid();
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    child_prepare(parent, d->log);
    clear_xpjit_env();
    setenv("XDG_RUNTIME_DIR", d->run, 1);
    setenv("XPJIT_CACHE_DIR", d->cache, 1);
    setenv("XPJIT_REDIS", redis, 1);
    setenv("XPJIT_REDIS_TIMEOUT", REDIS_TIMEOUT, 1);
    const char *argv[] = {"xpjitd",      "--foreground", "--workers", "2",
                          "--log-level", "info",         NULL};
    execv(exe, (char *const *)argv);
    _exit(127);
  }
  d->daemon = pid;
}

/* Waits until d's daemon answers a handshake on its socket. */
static void daemon_ready(node *d, double deadline) {
  char err[512];
  int ws = 0;
  int r = daemon_wait_ready(d->sock, d->daemon, deadline, &ws, err,
                            sizeof err);
  if (r > 0) {
    d->daemon = 0;
    print_tail(d->log, 4000);
    fail_msg("xpjitd of %s exited at start-up (status 0x%x)", d->dir, ws);
  }
  if (r < 0) {
    print_tail(d->log, 4000);
    fail_msg("xpjitd of %s did not serve %s in time: %s", d->dir, d->sock,
             err);
  }
}

/* One request, one reply on a fresh connection to d; the reply's TEXT
 * field into text (STATS), or "" for SHUTDOWN's OK. false on a failure. */
static bool daemon_call(node *d, xpd_op op, char *text, size_t size) {
  char err[512];
  int fd = xpd_connect(d->sock, 2000 * SLOW, err, sizeof err, NULL, NULL);
  if (fd < 0)
    return false;
  bool ok;
  if (op == XPD_STATS) {
    ok = stats_text(fd, text, size);
  } else {
    xpd_header h;
    uint8_t *pl = NULL;
    ok = daemon_request(fd, op, 7, &h, &pl, err, sizeof err) == XPD_E_OK &&
         h.op == XPD_OK;
    free(pl);
  }
  close(fd);
  return ok;
}

/* SHUTDOWN, then it must exit 0 in time. false (and killed) if not. */
static bool daemon_stop(node *d) {
  bool ok = daemon_call(d, XPD_SHUTDOWN, NULL, 0);
  int ws = wait_deadline(d->daemon, now_ms() + 20000.0 * SLOW);
  d->daemon = 0;
  return ok && ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
}

/* ---- the processes ---- */

/* A process's life: its node's environment, a context on the CPU, the 20
 * kernels got, launched and checked, its counters. */
static void proc_body(const node *d, const char *redis, proc_result *r) {
  double t0 = now_ms();
  clear_xpjit_env(); /* XPJIT_DAEMON unset: the default socket of d->run */
  setenv("XDG_RUNTIME_DIR", d->run, 1);
  setenv("XPJIT_CACHE_DIR", d->cache, 1);
  setenv("XPJIT_REDIS", redis, 1);
  setenv("XPJIT_REDIS_TIMEOUT", REDIS_TIMEOUT, 1);
  cpu_client c;
  if (!cpu_client_open(&c, "examples/axpy.xpk", NULL, 0, N)) {
    snprintf(r->err, sizeof r->err, "set-up: %s", xpj_last_error());
    goto out;
  }
  for (int i = 0; i < NKERNELS; i++) {
    int kind = i / NDT;
    xpj_kernel *k = NULL;
    if (xpj_program_get_kernel(c.p, knames[kind], dts[i % NDT].dtypes, 1,
                               c.dev, NULL, &k) != XPJ_OK) {
      snprintf(r->err, sizeof r->err, "get %s %s: %s", knames[kind],
               dts[i % NDT].dtypes, xpj_last_error());
      goto out;
    }
    xpj_kernel_info info;
    if (xpj_kernel_get_info(k, &info) == XPJ_OK && info.origin >= 0 &&
        info.origin <= XPJ_ORIGIN_REDIS)
      r->origin[info.origin]++;
    char err[200];
    if (storm_launch_check(c.q, k, kind, dts[i % NDT].t, c.x, c.y, N, err,
                           sizeof err)) {
      snprintf(r->err, sizeof r->err, "%s: %s", dts[i % NDT].dtypes, err);
      goto out;
    }
    r->correct++;
  }
  if (xpj_context_cache_counters(c.ctx, &r->c) != XPJ_OK) {
    snprintf(r->err, sizeof r->err, "counters: %s", xpj_last_error());
    goto out;
  }
  r->done = 1;
out:
  if (!r->done && c.ctx) /* what it did until then, for the report */
    xpj_context_cache_counters(c.ctx, &r->c);
  cpu_client_close(&c);
  r->ms = now_ms() - t0;
}

/* Process i (gate_fork's body; redis: XPJIT_REDIS): its exit status. */
static int proc_main(int i, void *redis) {
  proc_body(&fx.nodes[i % NODES], redis, &fx.res[i]);
  return fx.res[i].done ? 0 : 1;
}

/* ---- the storm ---- */

static const char *const onames[] = {"compiled", "memory", "cache",
                                     "bundle",   "daemon", "redis"};

/* Every node's and every process's counts (on a failure). */
static void report(const int *ws) {
  print_message("per node (xpjitd statistics after the storm):\n");
  for (int n = 0; n < NODES; n++) {
    const char *t = fx.nodes[n].stats;
    print_message("  node %d: compiles %lld compile_failures %lld requests "
                  "%lld hits_memory %lld hits_cache %lld coalesced %lld "
                  "request_errors %lld%s\n",
                  n, stat_of(t, "compiles"), stat_of(t, "compile_failures"),
                  stat_of(t, "requests"), stat_of(t, "hits_memory"),
                  stat_of(t, "hits_cache"), stat_of(t, "coalesced"),
                  stat_of(t, "request_errors"),
                  t[0] ? "" : " (no statistics: -1)");
  }
  print_message("per process (node.index: status, counters, origins):\n");
  char st[PROCS][40];
  for (int i = 0; i < PROCS; i++)
    if (ws[i] == -1)
      snprintf(st[i], sizeof st[i], "KILLED at the deadline,");
    else if (WIFEXITED(ws[i]))
      snprintf(st[i], sizeof st[i], "exit %d,", WEXITSTATUS(ws[i]));
    else
      snprintf(st[i], sizeof st[i], "signal %d,",
               WIFSIGNALED(ws[i]) ? WTERMSIG(ws[i]) : -1);
  for (int i = 0; i < PROCS; i++) {
    const proc_result *r = &fx.res[i];
    const xpj_cache_counters *c = &r->c;
    char org[160] = "";
    size_t u = 0;
    for (int o = 0; o <= XPJ_ORIGIN_REDIS; o++)
      if (r->origin[o] && u < sizeof org)
        u += (size_t)snprintf(org + u, sizeof org - u, " %s %d", onames[o],
                              r->origin[o]);
    print_message(
        "  %d.%d: %s, %s correct %d/%d, %.0f ms; compiles %llu "
        "daemon_hits %llu daemon_fallbacks %llu l2_hits %llu l1_hits %llu "
        "redis_hits %llu redis_misses %llu redis_stores %llu redis_waits "
        "%llu redis_errors %llu redis_skipped %llu redis_refused %llu; "
        "origins:%s%s%s\n",
        i % NODES, i / NODES, r->done ? "done" : "NOT DONE", st[i], r->correct,
        NKERNELS, r->ms, (unsigned long long)c->compiles,
        (unsigned long long)c->daemon_hits,
        (unsigned long long)c->daemon_fallbacks, (unsigned long long)c->l2_hits,
        (unsigned long long)c->l1_hits, (unsigned long long)c->redis_hits,
        (unsigned long long)c->redis_misses,
        (unsigned long long)c->redis_stores, (unsigned long long)c->redis_waits,
        (unsigned long long)c->redis_errors,
        (unsigned long long)c->redis_skipped,
        (unsigned long long)c->redis_refused, org, r->err[0] ? "; " : "",
        r->err);
  }
  for (int n = 0; n < NODES; n++)
    print_tail(fx.nodes[n].log, 1500);
}

/* Four nodes, eight processes each, released at once; with one Redis for
 * all (want: 20 compiles) or none (want: 20 per node). */
static void storm(bool with_redis) {
  const char *name = with_redis ? "with Redis" : "without Redis";
  char redis[160] = "off";
  if (with_redis) {
    redis_start();
    snprintf(redis, sizeof redis, "unix:%s", fx.redis_sock);
  }
  double deadline = now_ms() + 20000.0 * SLOW;
  for (int n = 0; n < NODES; n++)
    daemon_spawn(&fx.nodes[n], redis);
  for (int n = 0; n < NODES; n++)
    daemon_ready(&fx.nodes[n], deadline);

  /* the processes, forked and held on a pipe, then released together;
   * process i lives on node i % NODES */
  int gate[2];
  assert_int_equal(gate_fork(PROCS, fx.pids, proc_main, redis, gate), 0);
  double t0 = now_ms();
  gate_release(gate); /* EOF for every process: go */

  int ws[PROCS];
  bool bad = false;
  char why[1024] = "";
  size_t wu = 0;
#define WHY(...)                                                               \
  do {                                                                         \
    bad = true;                                                                \
    if (wu < sizeof why)                                                       \
      wu += (size_t)snprintf(why + wu, sizeof why - wu, __VA_ARGS__);          \
  } while (0)
  int failed = 0, hung = 0;
  for (int i = 0; i < PROCS; i++) {
    ws[i] = wait_deadline(fx.pids[i], t0 + STORM_MS);
    fx.pids[i] = 0;
    hung += ws[i] == -1;
    failed += ws[i] == -1 || !WIFEXITED(ws[i]) || WEXITSTATUS(ws[i]) != 0 ||
              !fx.res[i].done || fx.res[i].correct != NKERNELS;
  }
  double wall = now_ms() - t0;
  if (failed)
    WHY("%d of %d processes failed or did not report (%d killed at the "
        "deadline); ",
        failed, PROCS, hung);

  /* every daemon's count, then every daemon stopped */
  long long dcompiles = 0;
  for (int n = 0; n < NODES; n++) {
    node *d = &fx.nodes[n];
    if (!daemon_call(d, XPD_STATS, d->stats, sizeof d->stats)) {
      d->stats[0] = 0;
      WHY("no statistics from node %d's xpjitd; ", n);
    }
    long long c = stat_of(d->stats, "compiles");
    dcompiles += c > 0 ? c : 0;
    if (!with_redis && c != NKERNELS)
      WHY("node %d's xpjitd compiled %lld, expected %d; ", n, c, NKERNELS);
  }
  for (int n = 0; n < NODES; n++)
    if (!daemon_stop(&fx.nodes[n]))
      WHY("node %d's xpjitd did not stop cleanly; ", n);
  long long values = -1;
  if (with_redis) {
    values = redis_count("xpjit:k:*");
    redis_stop();
  }

  unsigned long long pcompiles = 0, lookups = 0, rhits = 0, dhits = 0,
                     rerrs = 0;
  for (int i = 0; i < PROCS; i++) {
    const xpj_cache_counters *c = &fx.res[i].c;
    pcompiles += c->compiles;
    lookups += c->redis_hits + c->redis_misses;
    rhits += c->redis_hits;
    dhits += c->daemon_hits;
    rerrs += c->redis_errors + c->redis_skipped;
  }
  long long total = dcompiles + (long long)pcompiles;
  long long want = with_redis ? NKERNELS : (long long)NKERNELS * NODES;
  if (total != want)
    WHY("%lld compiles in all (daemons %lld, processes %llu), expected "
        "%lld; ",
        total, dcompiles, pcompiles, want);
  if (!with_redis && rhits)
    WHY("%llu Redis hits without Redis; ", rhits);
  /* every process was served by its node's daemon, which asks Redis */
  if (lookups)
    WHY("the processes asked Redis %llu times themselves (their daemons "
        "ask it for them); ",
        lookups);

  print_message("cluster %s: %d nodes x %d processes x %d kernels in %.0f "
                "ms: %lld compiles (daemons %lld, processes %llu), daemon "
                "hits %llu, Redis hits %llu, Redis errors or skips %llu%s\n",
                name, NODES, PER_NODE, NKERNELS, wall, total, dcompiles,
                pcompiles, dhits, rhits, rerrs,
                failed ? "" : ", every result right");
  if (with_redis)
    print_message("info: Redis holds %lld kernel values\n", values);
  if (bad) {
    print_message("FAIL: cluster %s: %s\n", name, why);
    report(ws);
    fail_msg("cluster %s: %s", name, why);
  }
#undef WHY
  assert_int_equal(reap_all(now_ms() + 10000.0 * SLOW), 0);
}

static void test_redis(void **state) {
  (void)state;
  storm(true);
}

static void test_no_redis(void **state) {
  (void)state;
  storm(false);
}

/* Interrupted (a harness's timeout, ^C, the alarm): the processes and the
 * directory go first. */
static void interrupted(void) { teardown(NULL); }

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  test_process_init(interrupted); /* a subreaper; SIGTERM, SIGINT, SIGHUP */
  signal(SIGALRM, test_on_signal);
  alarm(ALARM_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_redis, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_redis, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
