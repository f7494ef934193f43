/* test_daemon_storm.c - xpjitd with real processes, under load and under
 * failure. Every test starts its own daemon ($BUILD/bin/xpjitd, default
 * build/) on a socket in a private temporary directory, with its own cache
 * directory, and talks to it with the raw protocol (runtime/daemon.h) for
 * its statistics.
 *
 *   storm      32 client processes released at once get the same 20
 *              kernels: the daemon compiles each once, every client gets
 *              all 20 from it (no local compile) and every launch is right
 *   sigkill    the daemon is killed with SIGKILL while its worker compiles
 *              for 8 clients: every client still finishes right, through
 *              its local fallback; the daemon's cache file verifies clean,
 *              and a daemon restarted on the same socket and cache serves
 *              what was compiled before the kill from that file and
 *              compiles only the rest
 *   fallbacks  XPJIT_DAEMON naming a missing socket, a stale socket file,
 *              a SIGSTOPped daemon (the 2 s handshake timeout) and
 *              XPJIT_DAEMON=off: correct kernels, compiled locally, no hang
 *   deadline   a daemon whose workers hang: a client waits for it at most
 *              XPJIT_DAEMON_TIMEOUT, compiles itself, does not ask again
 *              during its back-off, then asks with a 1 s wait
 *   remembered a compile that timed out in the daemon: two processes get
 *              the failure without compiling it, and keep it out of their
 *              own cache file; one that allows longer than the daemon
 *              gives a compile compiles it itself
 *
 * Clients are forked children of this process, which never creates an
 * xpjit context itself (forking after that is not supported); each child
 * creates one, with XPJIT_CACHE=off so that its own cache cannot serve it,
 * and writes its counters into shared memory. This process is a child
 * subreaper, so compile workers orphaned by a killed daemon come back to
 * it; every test ends with no process left, and every wait has a
 * deadline (anything still running then is killed). */
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
#include "testutil.h"
#include "xpjit.h"
#include "xpjit_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Five elementwise kernels x four dtypes: 20 distinct cache keys. */
static const char src[] =
    "kernel axpy<T>(a: T, x: global const T[], y: global T[]) range {\n"
    "    let i = global_id(0);\n"
    "    if i < size(y) { y[i] = a * x[i] + y[i]; }\n"
    "}\n"
    "kernel axpby<T>(a: T, x: global const T[], b: T, y: global T[]) range {\n"
    "    let i = global_id(0);\n"
    "    if i < size(y) { y[i] = a * x[i] + b * y[i]; }\n"
    "}\n"
    "kernel scale<T>(alpha: T, x: global T[]) range {\n"
    "    let i = global_id(0);\n"
    "    if i < size(x) { x[i] *= alpha; }\n"
    "}\n"
    "kernel copy<T>(src: global const T[], dst: global T[]) range {\n"
    "    let i = global_id(0);\n"
    "    if i < size(dst) { dst[i] = src[i]; }\n"
    "}\n"
    "kernel fill<T>(x: global T[], value: T) range {\n"
    "    let i = global_id(0);\n"
    "    if i < size(x) { x[i] = value; }\n"
    "}\n";

enum { N = 100 };

/* ---- the fixture: a private directory and the processes we started ---- */

enum { MAXPIDS = 64 };
static struct {
  char dir[64];       /* mkdtemp, 0700 */
  char sock[128];     /* dir/xpjitd.sock */
  char cache_dir[96]; /* the daemon's XPJIT_CACHE_DIR */
  char log[96];       /* the daemon's stderr */
  pid_t daemon;
  pid_t pids[MAXPIDS]; /* clients still to be waited for */
} fx;

static int setup(void **state) {
  (void)state;
  end_escaped_child(); /* a forked child back in cmocka's runner */
  memset(&fx, 0, sizeof fx);
  snprintf(fx.dir, sizeof fx.dir, "/tmp/xpjd-test-XXXXXX");
  if (!mkdtemp(fx.dir))
    return -1;
  snprintf(fx.sock, sizeof fx.sock, "%s/xpjitd.sock", fx.dir);
  snprintf(fx.cache_dir, sizeof fx.cache_dir, "%s/dcache", fx.dir);
  snprintf(fx.log, sizeof fx.log, "%s/xpjitd.log", fx.dir);
  return mkdir(fx.cache_dir, 0700);
}

static int teardown(void **state) {
  (void)state;
  end_escaped_child(); /* it would kill the parent's processes */
  if (fx.daemon > 0)
    kill(fx.daemon, SIGKILL);
  for (int i = 0; i < MAXPIDS; i++)
    if (fx.pids[i] > 0)
      kill(fx.pids[i], SIGKILL);
  reap_all(now_ms() + 10000);
  if (fx.dir[0])
    rm_tree(fx.dir);
  return 0;
}

/* The end of the daemon's log, for a failure message. */
static void dump_log(void) {
  size_t n = 0;
  FILE *f = fopen(fx.log, "r");
  if (!f)
    return;
  static char buf[1 << 16];
  n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *tail = n > 6000 ? buf + n - 6000 : buf;
  fprintf(stderr, "---- end of %s ----\n%s---- (log ends) ----\n", fx.log,
          tail);
}

#define CHECK(cond, ...)                                                     \
  do {                                                                       \
    if (!(cond)) {                                                           \
      dump_log();                                                            \
      fail_msg(__VA_ARGS__);                                                 \
    }                                                                        \
  } while (0)

/* ---- the daemon ---- */

/* A connection with its handshake done, or -1. */
static int stats_conn(int timeout_ms) {
  char err[512];
  return xpd_connect(fx.sock, timeout_ms, err, sizeof err, NULL, NULL);
}

/* Starts xpjitd --foreground on fx.sock with fx.cache_dir as its cache and
 * waits until it answers a handshake. fault: XPJIT_WORKER_FAULT (NULL:
 * none); extra: more options, NULL-terminated (or NULL). */
static void daemon_start_with(unsigned workers, const char *fault,
                              const char *const *extra) {
  char exe[PATH_MAX], nw[16];
  snprintf(exe, sizeof exe, "%s/bin/xpjitd", build_dir());
  snprintf(nw, sizeof nw, "%u", workers);
  assert_int_equal(access(exe, X_OK), 0);
  pid_t parent = getpid();
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    child_prepare(parent, fx.log); /* never outlive the test */
    setenv("XPJIT_CACHE_DIR", fx.cache_dir, 1);
    unsetenv("XPJIT_CACHE");
    unsetenv("XPJIT_CACHE_MAX_SIZE");
    unsetenv("XPJIT_BUNDLE_PATH");
    if (fault)
      setenv("XPJIT_WORKER_FAULT", fault, 1);
    else
      unsetenv("XPJIT_WORKER_FAULT");
    const char *argv[24] = {"xpjitd",    "--foreground", "--socket",
                            fx.sock,     "--workers",    nw,
                            "--log-level", "debug"};
    for (int i = 0, n = 8; extra && extra[i] && n < 23; i++)
      argv[n++] = extra[i];
    execv(exe, (char *const *)argv);
    _exit(127);
  }
  fx.daemon = pid;
  char err[512];
  int ws = 0;
  int r = daemon_wait_ready(fx.sock, pid, now_ms() + 20000.0 * SLOW, &ws,
                            err, sizeof err);
  if (r > 0)
    fx.daemon = 0;
  CHECK(r <= 0, "xpjitd exited at start-up (status 0x%x)", ws);
  CHECK(r == 0, "xpjitd did not serve %s in time", fx.sock);
}

static void daemon_start(unsigned workers) {
  daemon_start_with(workers, NULL, NULL);
}

/* A fresh connection's statistics; fails the test when there are none. */
static void daemon_stats(char *buf, size_t size) {
  int fd = stats_conn(2000 * SLOW);
  CHECK(fd >= 0, "cannot connect to xpjitd for its statistics");
  bool ok = stats_text(fd, buf, size);
  close(fd);
  CHECK(ok, "xpjitd did not answer STATS");
}

/* SHUTDOWN, then the daemon must exit 0 (and with it its workers). */
static void daemon_stop(void) {
  int fd = stats_conn(2000 * SLOW);
  CHECK(fd >= 0, "cannot connect to xpjitd to stop it");
  xpd_header h;
  uint8_t *pl = NULL;
  char err[512];
  xpd_err e = daemon_request(fd, XPD_SHUTDOWN, 9, &h, &pl, err, sizeof err);
  free(pl);
  close(fd);
  CHECK(e == XPD_E_OK && h.op == XPD_OK, "SHUTDOWN not acknowledged: %s",
        e == XPD_E_OK ? "another reply" : err);
  int ws = wait_deadline(fx.daemon, now_ms() + 20000.0 * SLOW);
  fx.daemon = 0;
  CHECK(ws != -1, "xpjitd did not exit after SHUTDOWN");
  CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
        "xpjitd ended with status 0x%x after SHUTDOWN", ws);
}

/* What /proc lists as our children, "pid cmdline; ..." into buf. */
static void list_children(char *buf, size_t size) {
  char path[64], line[256];
  size_t used = 0;
  buf[0] = 0;
  snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
  FILE *f = fopen(path, "r");
  int pid;
  while (f && fscanf(f, "%d", &pid) == 1 && used < size) {
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    FILE *g = fopen(path, "r");
    size_t n = g ? fread(line, 1, sizeof line - 1, g) : 0;
    if (g)
      fclose(g);
    for (size_t i = 0; i < n; i++)
      if (!line[i])
        line[i] = ' ';
    line[n] = 0;
    int w = snprintf(buf + used, size - used, "%d %s; ", pid, line);
    used += w > 0 ? (size_t)w : 0;
  }
  if (f)
    fclose(f);
}

/* Nothing of ours may still run: what is still there must end by itself
 * within a few seconds (it is killed, and the test fails, if not). */
static void assert_no_children(void) {
  errno = 0;
  pid_t r = waitpid(-1, NULL, WNOHANG);
  if (r < 0 && errno == ECHILD)
    return;
  char left[1024];
  list_children(left, sizeof left);
  int killed = reap_all(now_ms() + 10000.0 * SLOW);
  if (left[0])
    print_message("still running after the test: %s(%s)\n", left,
                  killed ? "killed" : "they ended by themselves");
  assert_int_equal(killed, 0);
}

/* ---- the clients ---- */

typedef struct client_result {
  int done;            /* reached the end */
  int correct;         /* kernels whose launch gave the right values */
  int from_daemon;     /* kernels with origin XPJ_ORIGIN_DAEMON */
  uint64_t compiles, daemon_hits, daemon_fallbacks, l2_hits;
  double ms;           /* from release to the end */
  double kernel_ms[NKERNELS]; /* each xpj_program_get_kernel */
  char err[256];
} client_result;

/* Clients pause this long before their kernel number pause_at (-1:
 * never). Set before clients_start; the children inherit it. */
static int pause_at = -1, pause_ms;

/* A client's life: a context on the CPU (its own cache off), the program,
 * nk kernels got, launched and checked, its counters. */
static void client_body(int nk, client_result *r) {
  double t0 = now_ms();
  cpu_client cc;
  if (!cpu_client_open(&cc, "storm.xpk", src, strlen(src), N)) {
    snprintf(r->err, sizeof r->err, "set-up: %s", xpj_last_error());
    goto out;
  }
  for (int i = 0; i < nk; i++) {
    int kind = i / NDT;
    xpj_scalar t = dts[i % NDT].t;
    xpj_kernel *k = NULL;
    if (i == pause_at)
      sleep_ms(pause_ms);
    double k0 = now_ms();
    xpj_status gs = xpj_program_get_kernel(cc.p, knames[kind],
                                           dts[i % NDT].dtypes, 0, cc.dev,
                                           NULL, &k);
    r->kernel_ms[i] = now_ms() - k0;
    if (gs != XPJ_OK) {
      snprintf(r->err, sizeof r->err, "get %s %s: %s", knames[kind],
               dts[i % NDT].dtypes, xpj_last_error());
      goto out;
    }
    xpj_kernel_info info;
    if (xpj_kernel_get_info(k, &info) == XPJ_OK &&
        info.origin == XPJ_ORIGIN_DAEMON)
      r->from_daemon++;
    if (storm_launch_check(cc.q, k, kind, t, cc.x, cc.y, N, r->err,
                           sizeof r->err))
      goto out;
    r->correct++;
  }
  xpj_cache_counters c;
  if (xpj_context_cache_counters(cc.ctx, &c) == XPJ_OK) {
    r->compiles = c.compiles;
    r->daemon_hits = c.daemon_hits;
    r->daemon_fallbacks = c.daemon_fallbacks;
    r->l2_hits = c.l2_hits;
  }
  r->done = 1;
out:
  cpu_client_close(&cc);
  r->ms = now_ms() - t0;
}

typedef struct client_args {
  int nk;
  const char *daemon_env;
  const char *cache_dir; /* NULL: XPJIT_CACHE=off */
  client_result *res;
} client_args;

/* Client i (gate_fork's body): its exit status. */
static int client_main(int i, void *arg) {
  const client_args *a = arg;
  setenv("XPJIT_DAEMON", a->daemon_env, 1);
  if (a->cache_dir) {
    setenv("XPJIT_CACHE_DIR", a->cache_dir, 1);
    unsetenv("XPJIT_CACHE");
  } else {
    setenv("XPJIT_CACHE", "off", 1);
  }
  client_body(a->nk, &a->res[i]);
  return a->res[i].done ? 0 : 1;
}

/* Forks n clients, each with XPJIT_DAEMON=daemon_env and XPJIT_CACHE=off
 * (cache_dir: XPJIT_CACHE_DIR=cache_dir instead), blocked on one pipe
 * until all are forked; then releases them at once. The results live in
 * shared memory (munmap them). */
static client_result *clients_start_in(int n, int nk, const char *daemon_env,
                                       const char *cache_dir) {
  assert_true(n <= MAXPIDS);
  client_result *res = mmap(NULL, (size_t)n * sizeof *res,
                            PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                            -1, 0);
  assert_true(res != MAP_FAILED);
  memset(res, 0, (size_t)n * sizeof *res);
  client_args a = {nk, daemon_env, cache_dir, res};
  int gate[2];
  assert_int_equal(gate_fork(n, fx.pids, client_main, &a, gate), 0);
  gate_release(gate); /* EOF for every child: go */
  return res;
}

static client_result *clients_start(int n, int nk, const char *daemon_env) {
  return clients_start_in(n, nk, daemon_env, NULL);
}

/* Waits for the n clients (deadline: each client's share of the wall time
 * is small; the bound is for a hang). Fails on a crash or a timeout. */
static void clients_wait(int n, client_result *res, double deadline) {
  for (int i = 0; i < n; i++) {
    int ws = wait_deadline(fx.pids[i], deadline);
    fx.pids[i] = 0;
    CHECK(ws != -1, "client %d did not finish in time (hung?)", i);
    CHECK(WIFEXITED(ws) && (WEXITSTATUS(ws) == 0 || !res[i].done),
          "client %d ended with status 0x%x after its work", i, ws);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0 && res[i].done,
          "client %d failed (status 0x%x): %s", i, ws, res[i].err);
  }
}

/* ---- tests ---- */

/* 32 processes at once, 20 kernels each: 20 compiles in all. */
static void test_storm(void **state) {
  (void)state;
  enum { P = 32 };
  daemon_start(2);
  double t0 = now_ms();
  client_result *res = clients_start(P, NKERNELS, fx.sock);
  clients_wait(P, res, t0 + 120000.0 * SLOW);
  double wall = now_ms() - t0;
  for (int i = 0; i < P; i++) {
    client_result *r = &res[i];
    CHECK(r->correct == NKERNELS, "client %d: %d of %d kernels right", i,
          r->correct, NKERNELS);
    CHECK(r->compiles == 0 && r->daemon_hits == NKERNELS &&
              r->from_daemon == NKERNELS && r->daemon_fallbacks == 0 &&
              r->l2_hits == 0,
          "client %d: compiles %llu daemon_hits %llu origin-daemon %d "
          "fallbacks %llu l2_hits %llu (expected 0, 20, 20, 0, 0)",
          i, (unsigned long long)r->compiles,
          (unsigned long long)r->daemon_hits, r->from_daemon,
          (unsigned long long)r->daemon_fallbacks,
          (unsigned long long)r->l2_hits);
  }
  munmap(res, P * sizeof *res);
  char text[8192];
  daemon_stats(text, sizeof text);
  long long compiles = stat_of(text, "compiles"),
            requests = stat_of(text, "requests"),
            mem = stat_of(text, "hits_memory"),
            disk = stat_of(text, "hits_cache"),
            waited = stat_of(text, "coalesced");
  CHECK(compiles == NKERNELS, "xpjitd compiled %lld times, expected %d",
        compiles, NKERNELS);
  CHECK(requests == P * NKERNELS && disk == 0 &&
            mem + waited + compiles == requests &&
            stat_of(text, "compile_failures") == 0,
        "xpjitd's counts do not add up:\n%s", text);
  print_message("storm: %d processes x %d kernels in %.0f ms; xpjitd: %lld "
                "compiles, %lld waited on a compile, %lld from memory\n",
                P, NKERNELS, wall, compiles, waited, mem);
  daemon_stop();
  /* what it compiled is in its cache file, intact */
  char db[PATH_MAX];
  snprintf(db, sizeof db, "%s/cache-v%d.db", fx.cache_dir,
           XPJ_CACHE_SCHEMA_VERSION);
  xpj_cache_config cc = {.path = db, .mode = XPJ_CACHE_MODE_RO};
  xpj_cache *c = NULL;
  assert_int_equal(xpj_cache_open(&cc, &c), XPJ_OK);
  uint64_t checked = 0, bad = 0;
  assert_int_equal(xpj_cache_verify(c, 0, NULL, NULL, &checked, &bad),
                   XPJ_OK);
  xpj_cache_close(c);
  assert_int_equal(checked, NKERNELS);
  assert_int_equal(bad, 0);
  assert_no_children();
}

/* No daemon, 8 processes at once on one cache directory: each kernel is
 * compiled once among them (single flight, cache/hitfile.h); the others
 * wait for its row, every launch is right, and no lock file is left. */
static void test_no_daemon_single_flight(void **state) {
  (void)state;
  enum { P = 8 };
  double t0 = now_ms();
  client_result *res = clients_start_in(P, NKERNELS, "off", fx.cache_dir);
  clients_wait(P, res, t0 + 120000.0 * SLOW);
  uint64_t compiles = 0;
  for (int i = 0; i < P; i++) {
    client_result *r = &res[i];
    CHECK(r->correct == NKERNELS && r->compiles + r->l2_hits == NKERNELS &&
              r->daemon_hits == 0,
          "client %d: %d right, compiles %llu l2_hits %llu daemon_hits %llu",
          i, r->correct, (unsigned long long)r->compiles,
          (unsigned long long)r->l2_hits, (unsigned long long)r->daemon_hits);
    compiles += r->compiles;
  }
  munmap(res, P * sizeof *res);
  CHECK(compiles == NKERNELS, "%d processes compiled %llu times in all, "
        "expected %d", P, (unsigned long long)compiles, NKERNELS);
  char flight[PATH_MAX];
  snprintf(flight, sizeof flight, "%s/cache-v%d.db.flight", fx.cache_dir,
           XPJ_CACHE_SCHEMA_VERSION);
  DIR *d = opendir(flight);
  assert_non_null(d);
  int left = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    left += e->d_name[0] != '.';
  closedir(d);
  CHECK(left == 0, "%d lock files left in %s", left, flight);
  print_message("no daemon: %d processes x %d kernels in %.0f ms, %llu "
                "compiles\n", P, NKERNELS, now_ms() - t0,
                (unsigned long long)compiles);
  assert_no_children();
}

static int count_entry(void *ud, const xpj_cache_entry *e) {
  (void)e;
  ++*(uint64_t *)ud;
  return 0;
}

/* The daemon killed with SIGKILL mid-storm; then restarted on the same
 * socket and cache. */
static void test_sigkill(void **state) {
  (void)state;
  enum { P = 8 };
  daemon_start(1); /* one compile at a time: a wide window */
  int sfd = stats_conn(2000 * SLOW);
  CHECK(sfd >= 0, "no statistics connection");
  double t0 = now_ms();
  client_result *res = clients_start(P, NKERNELS, fx.sock);
  /* kill it once a few compiles are in its cache and one is running */
  char text[8192];
  long long done = -1, busy = -1;
  double deadline = t0 + 60000.0 * SLOW;
  for (;;) {
    CHECK(stats_text(sfd, text, sizeof text), "STATS failed mid-storm");
    done = stat_of(text, "compiles");
    busy = stat_of(text, "workers_busy");
    if (done >= 3 && busy > 0)
      break;
    CHECK(done < NKERNELS, "all %lld kernels compiled before the kill", (long long)done);
    CHECK(now_ms() < deadline, "no compile running after %.0f ms",
          now_ms() - t0);
    sleep_ms(1);
  }
  close(sfd);
  assert_int_equal(kill(fx.daemon, SIGKILL), 0);
  int ws = wait_deadline(fx.daemon, now_ms() + 10000);
  fx.daemon = 0;
  assert_true(ws != -1 && WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
  clients_wait(P, res, now_ms() + 120000.0 * SLOW);
  int fell_back = 0;
  for (int i = 0; i < P; i++) {
    client_result *r = &res[i];
    CHECK(r->correct == NKERNELS, "client %d: %d of %d kernels right", i,
          r->correct, NKERNELS);
    /* each kernel from the daemon or compiled here; the daemon died before
     * it had all of them */
    CHECK(r->compiles + r->daemon_hits == NKERNELS && r->compiles > 0 &&
              r->from_daemon == (int)r->daemon_hits,
          "client %d: compiles %llu daemon_hits %llu origin-daemon %d", i,
          (unsigned long long)r->compiles,
          (unsigned long long)r->daemon_hits, r->from_daemon);
    fell_back += r->daemon_fallbacks > 0;
  }
  CHECK(fell_back > 0, "no client counted a fallback");
  munmap(res, P * sizeof *res);
  /* the orphaned compile worker finishes its job, cannot deliver it and
   * exits; it came back to us */
  CHECK(reap_all(now_ms() + 30000.0 * SLOW) == 0,
        "an orphaned compile worker did not exit");

  /* the cache file the daemon was killed over: intact */
  char db[PATH_MAX];
  snprintf(db, sizeof db, "%s/cache-v%d.db", fx.cache_dir,
           XPJ_CACHE_SCHEMA_VERSION);
  xpj_cache_config cc = {.path = db, .mode = XPJ_CACHE_MODE_RO};
  xpj_cache *c = NULL;
  assert_int_equal(xpj_cache_open(&cc, &c), XPJ_OK);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_RO);
  uint64_t checked = 0, bad = 0, entries = 0;
  assert_int_equal(xpj_cache_verify(c, 0, NULL, NULL, &checked, &bad),
                   XPJ_OK);
  assert_int_equal(xpj_cache_list(c, count_entry, &entries), XPJ_OK);
  xpj_cache_close(c);
  CHECK(bad == 0 && checked == entries, "cache verify: %llu bad of %llu",
        (unsigned long long)bad, (unsigned long long)checked);
  CHECK(entries >= (uint64_t)done && entries < NKERNELS,
        "%llu entries in the cache; %lld compiles were done at the kill",
        (unsigned long long)entries, done);

  /* restarted on the same socket (a stale file now) and cache */
  daemon_start(1);
  res = clients_start(1, NKERNELS, fx.sock);
  clients_wait(1, res, now_ms() + 60000.0 * SLOW);
  CHECK(res[0].correct == NKERNELS && res[0].compiles == 0 &&
            res[0].daemon_hits == NKERNELS,
        "after the restart: %d right, compiles %llu, daemon_hits %llu",
        res[0].correct, (unsigned long long)res[0].compiles,
        (unsigned long long)res[0].daemon_hits);
  munmap(res, sizeof *res);
  daemon_stats(text, sizeof text);
  long long hits = stat_of(text, "hits_cache"),
            compiles = stat_of(text, "compiles");
  CHECK(hits > 0 && hits == (long long)entries &&
            compiles == NKERNELS - (long long)entries &&
            stat_of(text, "compile_failures") == 0,
        "restarted xpjitd: hits_cache %lld, compiles %lld; %llu entries "
        "were in the cache",
        hits, compiles, (unsigned long long)entries);
  print_message("sigkill: killed after %lld compiles; %llu entries in the "
                "cache; the restart served %lld from it and compiled "
                "%lld\n",
                done, (unsigned long long)entries, hits, compiles);
  daemon_stop();
  assert_no_children();
}

/* One client that cannot use the daemon: correct kernels, all compiled
 * locally, in bounded time. Returns its result (by value). */
static client_result one_fallback(const char *env, int nk) {
  client_result *res = clients_start(1, nk, env);
  clients_wait(1, res, now_ms() + 60000.0 * SLOW);
  client_result r = res[0];
  munmap(res, sizeof *res);
  assert_int_equal(r.correct, nk);
  assert_int_equal(r.compiles, nk);
  assert_int_equal(r.daemon_hits, 0);
  assert_int_equal(r.from_daemon, 0);
  return r;
}

static void test_fallback_missing(void **state) {
  (void)state;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/none.sock", fx.dir);
  client_result r = one_fallback(path, NKERNELS);
  assert_int_equal(r.daemon_fallbacks, 0); /* no socket: not even tried */
  assert_no_children();
}

static void test_fallback_stale(void **state) {
  (void)state;
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s/stale.sock", fx.dir);
  const char *path = a.sun_path;
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_true(s >= 0);
  assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
  close(s); /* the file stays; nobody listens */
  client_result r = one_fallback(path, NKERNELS);
  assert_true(r.daemon_fallbacks >= 1);
  assert_no_children();
}

static void test_fallback_stopped(void **state) {
  (void)state;
  enum { NK = 5 };
  daemon_start(1);
  assert_int_equal(kill(fx.daemon, SIGSTOP), 0);
  int ws;
  assert_int_equal(waitpid(fx.daemon, &ws, WUNTRACED), fx.daemon);
  assert_true(WIFSTOPPED(ws));
  /* the connection is accepted by the kernel's backlog; the handshake
   * times out after 2 s */
  client_result r = one_fallback(fx.sock, NK);
  assert_int_equal(kill(fx.daemon, SIGCONT), 0);
  assert_true(r.daemon_fallbacks >= 1);
  CHECK(r.ms < 12000.0 * SLOW, "a stopped daemon held the client %.0f ms",
        r.ms);
  print_message("stopped daemon: %d kernels compiled locally in %.0f ms "
                "(%llu fallbacks)\n",
                NK, r.ms, (unsigned long long)r.daemon_fallbacks);
  char text[8192];
  daemon_stats(text, sizeof text);
  CHECK(stat_of(text, "compiles") == 0 && stat_of(text, "requests") == 0,
        "the stopped daemon got work:\n%s", text);
  daemon_stop();
  assert_no_children();
}

static void test_fallback_off(void **state) {
  (void)state;
  client_result r = one_fallback("off", NKERNELS);
  assert_int_equal(r.daemon_fallbacks, 0);
  assert_no_children();
}

/* A daemon whose workers all hang: a process waits for it at most
 * XPJIT_DAEMON_TIMEOUT (4 s here), compiles the kernel itself, and leaves
 * the daemon alone for its back-off (1 s): the next kernel is not asked
 * of it. After the back-off, one more is asked with a shorter wait (1 s,
 * a probe), since the last answer came too late. */
static void test_deadline(void **state) {
  (void)state;
  enum { NK = 3 };
  daemon_start_with(2, "hang", (const char *const[]){"--grace", "0", NULL});
  setenv("XPJIT_DAEMON_TIMEOUT", "4000", 1);
  pause_at = 2;
  pause_ms = 1200;
  client_result *res = clients_start(1, NK, fx.sock);
  unsetenv("XPJIT_DAEMON_TIMEOUT");
  pause_at = -1;
  clients_wait(1, res, now_ms() + 60000.0 * SLOW);
  client_result r = res[0];
  munmap(res, sizeof *res);
  print_message("hung workers: kernels in %.0f, %.0f and %.0f ms (after a "
                "%d ms pause); %llu compiled here, %llu fallbacks\n",
                r.kernel_ms[0], r.kernel_ms[1], r.kernel_ms[2], pause_ms,
                (unsigned long long)r.compiles,
                (unsigned long long)r.daemon_fallbacks);
  CHECK(r.correct == NK && r.compiles == NK && r.daemon_hits == 0,
        "%d right, %llu compiled here, %llu from the daemon", r.correct,
        (unsigned long long)r.compiles, (unsigned long long)r.daemon_hits);
  CHECK(r.kernel_ms[0] >= 3900 && r.kernel_ms[0] < 4000 + 6000.0 * SLOW,
        "the first kernel took %.0f ms (deadline 4000 ms)", r.kernel_ms[0]);
  CHECK(r.kernel_ms[2] >= 900 && r.kernel_ms[2] + 2000 < r.kernel_ms[0],
        "the probe took %.0f ms (expected about 1 s plus a compile)",
        r.kernel_ms[2]);
  CHECK(r.daemon_fallbacks == 2, "%llu fallbacks, expected 2",
        (unsigned long long)r.daemon_fallbacks);
  char text[8192];
  daemon_stats(text, sizeof text);
  CHECK(stat_of(text, "requests") == 2,
        "the daemon got %lld requests, expected 2 (none in the back-off)",
        stat_of(text, "requests"));
  daemon_stop();
  assert_no_children();
}

/* What one process saw asking for axpy [T=f32]. */
typedef struct asked {
  int done;
  xpj_status status;
  double ms;
  uint64_t compiles, daemon_hits;
  xpj_kernel_origin origin;
  bool opened; /* its cache file was open when it had the kernel */
  char msg[1024];
} asked;

/* The compile time limit ask_axpy_with's process asks for (0: none). */
static unsigned ask_timeout_ms;

/* In a child: a context with the cache directory cache_dir that asks for
 * axpy [T=f32] once, through the daemon at fx.sock (daemon: NULL) or none
 * ("off"), with the bundle (NULL: none). */
static void ask_axpy_with(asked *a, const char *cache_dir, const char *daemon,
                          const char *bundle) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    setenv("XPJIT_DAEMON", daemon ? daemon : fx.sock, 1);
    setenv("XPJIT_CACHE", "rw", 1);
    setenv("XPJIT_CACHE_DIR", cache_dir, 1);
    if (bundle)
      setenv("XPJIT_BUNDLE_PATH", bundle, 1);
    xpj_context_desc d = {.visible = "cpu", .cpu_threads = 1,
                          .no_env_bundles = !bundle};
    xpj_context *ctx = NULL;
    xpj_device *dev = NULL;
    xpj_program *p = NULL;
    if (xpj_context_create(&d, &ctx) != XPJ_OK ||
        xpj_device_select(ctx, "cpu", &dev) != XPJ_OK ||
        xpj_program_create(ctx, "storm.xpk", src, strlen(src), NULL, &p) !=
            XPJ_OK)
      _exit(2);
    xpj_kernel *k = NULL;
    xpj_compile_opts o;
    xpj_compile_opts_default(&o);
    o.timeout_ms = ask_timeout_ms;
    double t0 = now_ms();
    a->status = xpj_program_get_kernel(p, "axpy", "T=f32", 0, dev,
                                       ask_timeout_ms ? &o : NULL, &k);
    a->ms = now_ms() - t0;
    snprintf(a->msg, sizeof a->msg, "%s", xpj_last_error());
    xpj_kernel_info info;
    if (a->status == XPJ_OK && xpj_kernel_get_info(k, &info) == XPJ_OK)
      a->origin = info.origin;
    char db[PATH_MAX];
    snprintf(db, sizeof db, "%s/cache-v%d.db", cache_dir,
             XPJ_CACHE_SCHEMA_VERSION);
    a->opened = file_open_here(db);
    xpj_cache_counters c;
    if (xpj_context_cache_counters(ctx, &c) == XPJ_OK) {
      a->compiles = c.compiles;
      a->daemon_hits = c.daemon_hits;
    }
    a->done = 1;
    xpj_program_destroy(p);
    xpj_context_destroy(ctx);
    _exit(0);
  }
  fx.pids[0] = pid;
  int ws = wait_deadline(pid, now_ms() + 30000.0 * SLOW);
  fx.pids[0] = 0;
  CHECK(ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0 && a->done,
        "the asking process failed (status 0x%x)", ws);
}

/* In a child with its own cache directory (not the daemon's): a context
 * that asks for axpy [T=f32] once, through the daemon at fx.sock. */
static void ask_axpy(asked *a, const char *cache_dir) {
  ask_axpy_with(a, cache_dir, NULL, NULL);
}

/* The same through the daemon at daemon (NULL: fx.sock) with a wait of a
 * minute (XPJIT_DAEMON_TIMEOUT=60000): a process that waited for the
 * daemon shows in its time. */
static void ask_axpy_patient(asked *a, const char *cache_dir,
                             const char *daemon) {
  setenv("XPJIT_DAEMON_TIMEOUT", "60000", 1);
  ask_axpy_with(a, cache_dir, daemon, NULL);
  unsetenv("XPJIT_DAEMON_TIMEOUT");
}

/* Empties the hit-file directory of the cache file in dir. */
static void drop_hit_files(const char *dir) {
  char hits[PATH_MAX];
  snprintf(hits, sizeof hits, "%s/cache-v%d.db.hits", dir,
           XPJ_CACHE_SCHEMA_VERSION);
  DIR *d = opendir(hits);
  struct dirent *de;
  while (d && (de = readdir(d))) {
    char p[PATH_MAX + 300];
    snprintf(p, sizeof p, "%s/%s", hits, de->d_name);
    if (de->d_name[0] != '.')
      unlink(p);
  }
  if (d)
    closedir(d);
}

/* A process whose kernel is not in its hit files asks a daemon that keeps
 * its very cache file before it opens that file (the daemon looks in it,
 * and in its memory, for the process: kcache.c daemon_first); a process
 * with a cache file of its own, or with a bundle, looks in its cache file
 * first, as before. */
static void test_daemon_first(void **state) {
  (void)state;
  daemon_start(1);
  char own[PATH_MAX], bundle[PATH_MAX + 16];
  snprintf(own, sizeof own, "%s/own-cache", fx.dir);
  snprintf(bundle, sizeof bundle, "%s/axpy.xpb", fx.dir);
  asked *a = mmap(NULL, 5 * sizeof *a, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(a != MAP_FAILED);
  memset(a, 0, 5 * sizeof *a);
  /* 0: the daemon's cache file, empty: compiled by the daemon, the
   * process's file never opened */
  ask_axpy_with(&a[0], fx.cache_dir, NULL, NULL);
  /* 1: the row in that file but not its hit file: the daemon answers,
   * the file stays closed */
  drop_hit_files(fx.cache_dir);
  ask_axpy_with(&a[1], fx.cache_dir, NULL, NULL);
  /* 2: a cache file of its own with the row (compiled without the
   * daemon), no hit file: the file first */
  ask_axpy_with(&a[2], own, "off", NULL);
  drop_hit_files(own);
  ask_axpy_with(&a[3], own, NULL, NULL);
  /* 3: the daemon's cache file and a bundle (of the file above): the
   * cache file before the bundle and the daemon */
  char owndb[PATH_MAX + 16];
  snprintf(owndb, sizeof owndb, "%s/cache-v%d.db", own,
           XPJ_CACHE_SCHEMA_VERSION);
  xpj_cache_config cfg = {.path = owndb, .mode = XPJ_CACHE_MODE_RO};
  xpj_cache *oc = NULL;
  uint64_t nexp = 0;
  assert_int_equal(xpj_cache_open(&cfg, &oc), XPJ_OK);
  assert_int_equal(xpj_cache_export(oc, bundle, &nexp), XPJ_OK);
  xpj_cache_close(oc);
  CHECK(nexp == 1, "the bundle has %llu entries", (unsigned long long)nexp);
  drop_hit_files(fx.cache_dir);
  ask_axpy_with(&a[4], fx.cache_dir, NULL, bundle);
  static const xpj_kernel_origin want[5] = {
      XPJ_ORIGIN_DAEMON, XPJ_ORIGIN_DAEMON, XPJ_ORIGIN_COMPILED,
      XPJ_ORIGIN_CACHE, XPJ_ORIGIN_CACHE};
  static const bool opened[5] = {false, false, true, true, true};
  for (int i = 0; i < 5; i++)
    CHECK(a[i].status == XPJ_OK && a[i].origin == want[i] &&
              a[i].opened == opened[i] &&
              a[i].daemon_hits == (want[i] == XPJ_ORIGIN_DAEMON) &&
              a[i].compiles == (want[i] == XPJ_ORIGIN_COMPILED),
          "process %d: status %d, origin %d (expected %d), cache file %s "
          "(expected %s), %llu daemon hits, %llu compiles: %s",
          i, a[i].status, (int)a[i].origin, (int)want[i],
          a[i].opened ? "opened" : "closed", opened[i] ? "opened" : "closed",
          (unsigned long long)a[i].daemon_hits,
          (unsigned long long)a[i].compiles, a[i].msg);
  munmap(a, 5 * sizeof *a);
  char text[8192];
  daemon_stats(text, sizeof text);
  CHECK(stat_of(text, "compiles") == 1, "xpjitd compiled axpy %lld times",
        (long long)stat_of(text, "compiles"));
  daemon_stop();
  assert_no_children();
}

/* The cache file of the cache directory dir, into buf. */
static void db_of(const char *dir, char *buf, size_t size) {
  snprintf(buf, size, "%s/cache-v%d.db", dir, XPJ_CACHE_SCHEMA_VERSION);
}

/* A daemon that greets as xpjitd does, naming the cache file db as its
 * own (path, device and inode), then reads requests and never answers
 * one: a daemon stopped after its greeting. Returns its pid. */
static pid_t silent_daemon(const char *sock, const char *db) {
  struct stat sb;
  assert_int_equal(stat(db, &sb), 0);
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(lfd >= 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  assert_true(strlen(sock) < sizeof a.sun_path);
  memcpy(a.sun_path, sock, strlen(sock) + 1);
  unlink(sock);
  assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(lfd, 16), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    char vers[128];
    xpj_versions_str(vers, sizeof vers);
    for (;;) {
      int fd = accept(lfd, NULL, NULL);
      if (fd < 0)
        continue;
      xpd_header h;
      uint8_t *pl = NULL;
      char err[256];
      if (xpd_read_frame(fd, 1u << 20, xpd_now_ms() + 5000, &h, &pl, err,
                         sizeof err) != XPD_E_OK) {
        close(fd);
        continue;
      }
      free(pl);
      xpd_buf b = {0};
      xpd_begin(&b, XPD_WELCOME, h.id);
      xpd_put_u64(&b, XPD_F_PROTO, XPD_VERSION);
      xpd_put_u64(&b, XPD_F_CAPS, XPD_CAP_GET);
      xpd_put_str(&b, XPD_F_VERSIONS, vers);
      xpd_put_u64(&b, XPD_F_PID, (uint64_t)getpid());
      xpd_put_str(&b, XPD_F_CACHE_PATH, db);
      xpd_put_u64(&b, XPD_F_CACHE_DEV, (uint64_t)sb.st_dev);
      xpd_put_u64(&b, XPD_F_CACHE_INO, (uint64_t)sb.st_ino);
      xpd_end(&b, 0);
      xpd_write_all(fd, b.p, b.len, xpd_now_ms() + 5000);
      xpd_buf_free(&b);
      /* the connection stays open, its requests unanswered */
    }
  }
  close(lfd);
  return pid;
}

/* A first look must not make a process depend on the daemon for what its
 * cache file has: a daemon that greets and then answers nothing costs a
 * process whose kernel is in its cache file (not in its hit files) the
 * first look's short wait, not XPJIT_DAEMON_TIMEOUT; a failure the daemon
 * remembers, and a compile of it under way, do not hide (or delay) a good
 * row of the file; a daemon whose cache file has the same name but is
 * another file (replaced since it opened it) is not asked first. */
static void test_first_hostile(void **state) {
  (void)state;
  asked *a = mmap(NULL, 9 * sizeof *a, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(a != MAP_FAILED);
  memset(a, 0, 9 * sizeof *a);
  char own[PATH_MAX], owndb[PATH_MAX + 16], fake[PATH_MAX];
  snprintf(own, sizeof own, "%s/own-cache", fx.dir);
  db_of(own, owndb, sizeof owndb);
  snprintf(fake, sizeof fake, "%s/silent.sock", fx.dir);

  /* 1. the row in the file (compiled without a daemon), no hit file; a
   * daemon that keeps this file greets and falls silent */
  ask_axpy_with(&a[0], own, "off", NULL);
  drop_hit_files(own);
  pid_t silent = silent_daemon(fake, owndb);
  ask_axpy_patient(&a[1], own, fake);
  kill(silent, SIGKILL);
  waitpid(silent, NULL, 0);
  CHECK(a[1].status == XPJ_OK && a[1].origin == XPJ_ORIGIN_CACHE &&
            a[1].compiles == 0 && a[1].ms < 20000.0,
        "a silent daemon: status %d, origin %d, %llu compiles, %.0f ms: %s",
        a[1].status, (int)a[1].origin, (unsigned long long)a[1].compiles,
        a[1].ms, a[1].msg);

  /* 2. the daemon remembers a timeout of axpy (its worker hangs); then a
   * process without the daemon compiles axpy into the same file; one
   * asking for the same 300 ms limit gets the file's kernel, not the
   * daemon's remembered failure */
  daemon_start_with(1, "hang:axpy",
                    (const char *const[]){"--compile-timeout", "300",
                                          "--grace", "0", NULL});
  ask_timeout_ms = 300;
  ask_axpy_with(&a[2], fx.cache_dir, NULL, NULL);
  ask_timeout_ms = 0;
  CHECK(a[2].status != XPJ_OK && strstr(a[2].msg, "remembers"),
        "the daemon's hanging worker: status %d: %s", a[2].status, a[2].msg);
  ask_axpy_with(&a[3], fx.cache_dir, "off", NULL);
  CHECK(a[3].status == XPJ_OK && a[3].compiles == 1,
        "compiled without the daemon: status %d, %llu compiles: %s",
        a[3].status, (unsigned long long)a[3].compiles, a[3].msg);
  drop_hit_files(fx.cache_dir);
  ask_timeout_ms = 300;
  ask_axpy_with(&a[4], fx.cache_dir, NULL, NULL);
  ask_timeout_ms = 0;
  CHECK(a[4].status == XPJ_OK && a[4].compiles == 0,
        "a remembered failure against a good row: status %d, origin %d, "
        "%llu compiles: %s", a[4].status, (int)a[4].origin,
        (unsigned long long)a[4].compiles, a[4].msg);
  /* the same with the default limit, which the remembered failure does
   * not answer (the daemon would compile again, its worker hangs): the
   * row, at once */
  drop_hit_files(fx.cache_dir);
  ask_axpy_patient(&a[6], fx.cache_dir, NULL);
  CHECK(a[6].status == XPJ_OK && a[6].compiles == 0 && a[6].ms < 20000.0,
        "a remembered failure a longer limit passes, against a good row: "
        "status %d, %llu compiles, %.0f ms: %s", a[6].status,
        (unsigned long long)a[6].compiles, a[6].ms, a[6].msg);
  daemon_stop();

  /* 2b. a compile of axpy under way in the daemon (its worker hangs); a
   * process that gave up on it (a 500 ms wait) compiled axpy into the
   * file itself: the next process gets the row, not the wait */
  rm_tree(fx.cache_dir);
  mkdir(fx.cache_dir, 0700);
  daemon_start_with(1, "hang:axpy",
                    (const char *const[]){"--compile-timeout", "120000",
                                          NULL});
  setenv("XPJIT_DAEMON_TIMEOUT", "500", 1);
  ask_axpy_with(&a[7], fx.cache_dir, NULL, NULL);
  CHECK(a[7].status == XPJ_OK && a[7].compiles == 1,
        "gave up on the daemon: status %d, %llu compiles: %s", a[7].status,
        (unsigned long long)a[7].compiles, a[7].msg);
  drop_hit_files(fx.cache_dir);
  ask_axpy_patient(&a[8], fx.cache_dir, NULL);
  CHECK(a[8].status == XPJ_OK && a[8].compiles == 0 && a[8].ms < 20000.0,
        "a compile under way against a good row: status %d, %llu "
        "compiles, %.0f ms: %s", a[8].status,
        (unsigned long long)a[8].compiles, a[8].ms, a[8].msg);
  daemon_stop();

  /* 2c. the daemon's worker crashes on axpy (a transient failure) after
   * the first look's PENDING: the process compiles axpy itself, without
   * asking the daemon again (one crash, as without first looks) */
  rm_tree(fx.cache_dir);
  mkdir(fx.cache_dir, 0700);
  daemon_start_with(1, "crash:axpy", NULL);
  ask_axpy_with(&a[7], fx.cache_dir, NULL, NULL);
  char text[8192];
  daemon_stats(text, sizeof text);
  CHECK(a[7].status == XPJ_OK && a[7].compiles == 1 &&
            stat_of(text, "worker_crashes") == 1 &&
            stat_of(text, "requests") == 1,
        "a crash after PENDING: status %d, %llu compiles here; the "
        "daemon:\n%s", a[7].status, (unsigned long long)a[7].compiles,
        text);
  daemon_stop();

  /* 3. the daemon's cache directory moved away after it opened its file,
   * a new one made at the same path with axpy in it: the name the
   * daemon gives is the process's file, the file is not */
  char moved[PATH_MAX];
  rm_tree(fx.cache_dir);
  mkdir(fx.cache_dir, 0700);
  daemon_start(1);
  snprintf(moved, sizeof moved, "%s/moved", fx.dir);
  assert_int_equal(rename(fx.cache_dir, moved), 0);
  assert_int_equal(mkdir(fx.cache_dir, 0700), 0);
  ask_axpy_with(&a[5], fx.cache_dir, "off", NULL);
  CHECK(a[5].status == XPJ_OK && a[5].compiles == 1,
        "compiled into the new file: status %d: %s", a[5].status, a[5].msg);
  drop_hit_files(fx.cache_dir);
  ask_axpy_with(&a[5], fx.cache_dir, NULL, NULL);
  CHECK(a[5].status == XPJ_OK && a[5].origin == XPJ_ORIGIN_CACHE &&
            a[5].opened && a[5].daemon_hits == 0,
        "a replaced cache file: status %d, origin %d, cache file %s, %llu "
        "daemon hits: %s", a[5].status, (int)a[5].origin,
        a[5].opened ? "opened" : "closed",
        (unsigned long long)a[5].daemon_hits, a[5].msg);
  daemon_stats(text, sizeof text);
  CHECK(stat_of(text, "requests") == 0, "the daemon was asked:\n%s", text);
  daemon_stop();
  munmap(a, 9 * sizeof *a);
  assert_no_children();
}

typedef struct expiring {
  int failed, expiring;
} expiring;

static int count_expiring(void *ud, const xpj_cache_entry *e) {
  expiring *ex = ud;
  ex->failed += e->failed != 0;
  ex->expiring += e->failed && e->expires_ms > 0;
  return 0;
}

/* A compile that times out in the daemon is remembered: the process that
 * waited for it, and one that asks later, get the failure without
 * compiling (the later one at once, from the daemon or from its own cache
 * file), and whatever cache file holds it holds it only until it expires,
 * never for good. Both allow a compile no longer than the daemon's 300
 * ms: a process that allows longer (libxpjit's default, 60 s) is told to
 * compile it itself, and does (docs/daemon.md, "Known limits"). */
static void test_remembered_failure(void **state) {
  (void)state;
  daemon_start_with(1, "hang:axpy",
                    (const char *const[]){"--compile-timeout", "300",
                                          "--grace", "0", NULL});
  char dir[PATH_MAX], cache[PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/client-cache", fx.dir);
  snprintf(cache, sizeof cache, "%s/cache-v%d.db", dir,
           XPJ_CACHE_SCHEMA_VERSION);
  asked *a = mmap(NULL, 3 * sizeof *a, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(a != MAP_FAILED);
  memset(a, 0, 3 * sizeof *a);
  ask_timeout_ms = 300;
  ask_axpy(&a[0], dir);
  ask_axpy(&a[1], dir);
  ask_timeout_ms = 0;
  for (int i = 0; i < 2; i++)
    print_message("process %d: status %d after %.0f ms, %llu compiled "
                  "here: %s\n", i, a[i].status, a[i].ms,
                  (unsigned long long)a[i].compiles, a[i].msg);
  for (int i = 0; i < 2; i++) {
    CHECK(a[i].status != XPJ_OK && a[i].compiles == 0 &&
              a[i].daemon_hits == (i == 0) && strstr(a[i].msg, "remembers"),
          "process %d: status %d, %llu compiles, %llu daemon hits: %s", i,
          a[i].status, (unsigned long long)a[i].compiles,
          (unsigned long long)a[i].daemon_hits, a[i].msg);
  }
  CHECK(a[1].ms < 1000.0 * SLOW, "the second process waited %.0f ms",
        a[1].ms);
  /* the default allowance, a cache file of its own: compiled here */
  char own[PATH_MAX];
  snprintf(own, sizeof own, "%s/client-cache-60s", fx.dir);
  ask_axpy(&a[2], own);
  print_message("process 2 (60 s allowed): status %d after %.0f ms, %llu "
                "compiled here\n", a[2].status, a[2].ms,
                (unsigned long long)a[2].compiles);
  CHECK(a[2].status == XPJ_OK && a[2].compiles == 1 &&
            a[2].daemon_hits == 0,
        "process 2: status %d, %llu compiles, %llu daemon hits: %s",
        a[2].status, (unsigned long long)a[2].compiles,
        (unsigned long long)a[2].daemon_hits, a[2].msg);
  munmap(a, 3 * sizeof *a);
  daemon_stop();
  /* in the daemon's cache file and the processes' own, and expiring in
   * both: never kept for good */
  char dcache[PATH_MAX + 16];
  snprintf(dcache, sizeof dcache, "%s/cache-v%d.db", fx.cache_dir,
           XPJ_CACHE_SCHEMA_VERSION);
  const char *files[] = {cache, dcache};
  for (int f = 0; f < 2; f++) {
    xpj_cache_config cc = {.path = files[f], .mode = XPJ_CACHE_MODE_RO};
    xpj_cache *c = NULL;
    assert_int_equal(xpj_cache_open(&cc, &c), XPJ_OK);
    expiring ex = {0, 0};
    assert_int_equal(xpj_cache_list(c, count_expiring, &ex), XPJ_OK);
    xpj_cache_close(c);
    CHECK(ex.failed == 1 && ex.expiring == 1,
          "%s: %d failures stored, %d of them expiring", files[f], ex.failed,
          ex.expiring);
  }
  assert_no_children();
}

/* Interrupted (a harness's timeout, ^C): the processes and the directory
 * of the running test go first. */
static void interrupted(void) {
  teardown(NULL);
  fx.dir[0] = 0;
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  test_process_init(interrupted); /* a subreaper; SIGTERM, SIGINT, SIGHUP */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_storm, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_daemon_single_flight, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_sigkill, setup, teardown),
      cmocka_unit_test_setup_teardown(test_daemon_first, setup, teardown),
      cmocka_unit_test_setup_teardown(test_first_hostile, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fallback_missing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fallback_stale, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fallback_stopped, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fallback_off, setup, teardown),
      cmocka_unit_test_setup_teardown(test_deadline, setup, teardown),
      cmocka_unit_test_setup_teardown(test_remembered_failure, setup,
                                      teardown),
  };
  /* XPJD_TEST_FILTER=test_deadline: run some tests only */
  if (getenv("XPJD_TEST_FILTER"))
    cmocka_set_test_filter(getenv("XPJD_TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
