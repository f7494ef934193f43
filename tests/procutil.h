/* procutil.h - helpers shared by the tests that fork processes and start
 * xpjitd (tests/test_daemon_storm.c, tests/test_cluster.c; the guard of
 * forked children for every test that forks; rm_tree also for
 * test_cache.c and test_opencl.c): a monotonic
 * clock, sleeps, a temporary tree removed; forked children prepared, held
 * at a gate and released at once, waited for with deadlines and reaped,
 * and ended when they come back into cmocka's runner; the test process as
 * a subreaper that cleans up when a signal ends it; a
 * client's CPU context, program, queue and buffers; a daemon's STATS over
 * the raw protocol (runtime/daemon.h). Header-only: every helper is
 * static inline (rm_tree: static, marked unused), so a test that uses only
 * some of them gets no unused-function warning. Needs _GNU_SOURCE (or
 * _DEFAULT_SOURCE) before the first include, and cmocka.h for
 * guarded_test. */
#ifndef XPJ_PROCUTIL_H
#define XPJ_PROCUTIL_H

#include "daemon.h"
#include "proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
enum { SLOW = 4 }; /* deadlines stretched under ASan */
#else
enum { SLOW = 1 };
#endif

/* ---- time ---- */

static inline double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* the whole time, a signal handled meanwhile (SIGPIPE, SIGCHLD) or not */
static inline void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- files ---- */

/* Removes dir and everything below it. Plain static (marked unused, for
 * the tests that do not call it), not inline: GCC's -Wformat-truncation
 * would take an inlined recursive call's dir for one of PATH_MAX bytes. */
__attribute__((unused)) static void rm_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *de;
    while ((de = readdir(d))) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
        continue;
      char p[PATH_MAX];
      snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
      struct stat sb;
      if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
        rm_tree(p);
      else
        unlink(p);
    }
    closedir(d);
  }
  rmdir(dir);
}

/* The build directory: $BUILD, default build. */
static inline const char *build_dir(void) {
  const char *b = getenv("BUILD");
  return b && *b ? b : "build";
}

/* ---- processes ---- */

/* The test process: main's (test_owner_init, or test_process_init). */
static pid_t test_owner;

static inline void test_owner_init(void) { test_owner = getpid(); }

/* A child that a test forks (and that does not exec) and that fails a
 * cmocka check, or dies of a signal cmocka catches (SIGSEGV, SIGBUS,
 * SIGILL, SIGFPE), returns into cmocka's runner in the child: it runs the
 * test's teardown, removing what the parent still uses, and then every
 * later test, until it ends or the parent kills it (test_cache's crash
 * writers did: commit d3bc6d8). end_escaped_child ends such a child, exit
 * status CHILD_ESCAPED, at its first fixture call: every test of a file
 * that forks has it in its setup and teardown (a file's own fixtures call
 * it first; a test without one is a guarded_test). */
enum { CHILD_ESCAPED = 86 };

static inline void end_escaped_child(void) {
  if (!test_owner) { /* every process would look escaped */
    fputs("procutil.h: main did not call test_owner_init\n", stderr);
    abort();
  }
  if (getpid() != test_owner)
    _exit(CHILD_ESCAPED);
}

/* The fixture of a test without one of its own: the guard alone. */
static inline int child_guard(void **state) {
  (void)state;
  end_escaped_child();
  return 0;
}

#define guarded_test(f) \
  cmocka_unit_test_setup_teardown(f, child_guard, child_guard)

/* In a forked child: die with the test, stdin and stdout on /dev/null,
 * stderr appended to log (NULL: /dev/null). */
static inline void child_prepare(pid_t parent, const char *log) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent)
    _exit(127);
  int dn = open("/dev/null", O_RDWR | O_CLOEXEC);
  int lf =
      log ? open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600) : dn;
  if (dn < 0 || lf < 0 || dup2(dn, 0) < 0 || dup2(dn, 1) < 0 || dup2(lf, 2) < 0)
    _exit(127);
}

/* Forks n children, each held at a gate (a pipe) until gate_release:
 * then child i (which dies with the test) runs body(i, arg) and exits with
 * what it returns. pids[i] gets child i's pid. 0, or -1 when the pipe or
 * a fork failed (pids has the children forked until then). */
static inline int gate_fork(int n, pid_t *pids, int (*body)(int, void *),
                            void *arg, int gate[2]) {
  if (pipe(gate) != 0)
    return -1;
  fflush(NULL);
  pid_t parent = getpid();
  for (int i = 0; i < n; i++) {
    pid_t pid = fork();
    if (pid < 0)
      return -1;
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent)
        _exit(127);
      close(gate[1]);
      char ch;
      while (read(gate[0], &ch, 1) < 0 && errno == EINTR) {
      }
      close(gate[0]);
      exit(body(i, arg));
    }
    pids[i] = pid;
  }
  close(gate[0]);
  return 0;
}

/* Releases every child of gate_fork at once (EOF on the gate). */
static inline void gate_release(int gate[2]) { close(gate[1]); }

/* Reaps every child (orphaned compile workers included, we are their
 * subreaper) until none is left or the deadline passes; then kills what
 * /proc lists as our children and reaps them. Returns the number that had
 * to be killed. */
static inline int reap_all(double deadline) {
  for (;;) {
    pid_t r = waitpid(-1, NULL, WNOHANG);
    if (r < 0 && errno == ECHILD)
      return 0;
    if (r > 0)
      continue;
    if (now_ms() > deadline)
      break;
    sleep_ms(5);
  }
  int killed = 0;
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
  FILE *f = fopen(path, "r");
  int pid;
  while (f && fscanf(f, "%d", &pid) == 1) {
    kill(pid, SIGKILL);
    killed++;
  }
  if (f)
    fclose(f);
  while (waitpid(-1, NULL, 0) > 0 || errno == EINTR) {
  }
  return killed;
}

/* Waits for pid until deadline; past it, kills it. The wait status, or -1
 * when it had to be killed. */
static inline int wait_deadline(pid_t pid, double deadline) {
  int ws = 0;
  for (;;) {
    pid_t r = waitpid(pid, &ws, WNOHANG);
    if (r == pid)
      return ws;
    if (r < 0 && errno != EINTR)
      return -1;
    if (now_ms() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &ws, 0);
      return -1;
    }
    sleep_ms(2);
  }
}

/* What the test process cleans up when a signal ends it (set by
 * test_process_init). */
static void (*test_cleanup)(void);

/* Interrupted (a harness's timeout, ^C, an alarm): in the test process
 * the cleanup goes first; then the signal ends it. */
static inline void test_on_signal(int sig) {
  if (getpid() == test_owner && test_cleanup)
    test_cleanup();
  signal(sig, SIG_DFL);
  raise(sig);
}

/* Makes this the test process: a child subreaper (orphaned compile
 * workers of a killed daemon come back to it), cleanup run when SIGTERM,
 * SIGINT or SIGHUP ends it (test_on_signal: install it for more). */
static inline void test_process_init(void (*cleanup)(void)) {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    perror("prctl(PR_SET_CHILD_SUBREAPER)");
  test_owner_init();
  test_cleanup = cleanup;
  signal(SIGTERM, test_on_signal);
  signal(SIGINT, test_on_signal);
  signal(SIGHUP, test_on_signal);
}

/* ---- a client process's xpjit objects ---- */

/* A context on the CPU (one thread, no bundles from the environment), its
 * device, a program, a queue and two shared buffers of n 8-byte
 * elements. */
typedef struct cpu_client {
  xpj_context *ctx;
  xpj_device *dev;
  xpj_program *p;
  xpj_queue *q;
  void *x, *y;
} cpu_client;

/* Creates c's objects; the program from src (len bytes) named name or, src
 * NULL, from the file name. false when one failed (xpj_last_error says
 * why). cpu_client_close c either way. */
static inline bool cpu_client_open(cpu_client *c, const char *name,
                                   const char *src, size_t len, size_t n) {
  xpj_context_desc desc = {
      .visible = "cpu", .cpu_threads = 1, .no_env_bundles = 1};
  memset(c, 0, sizeof *c);
  return xpj_context_create(&desc, &c->ctx) == XPJ_OK &&
         xpj_device_select(c->ctx, "cpu", &c->dev) == XPJ_OK &&
         (src ? xpj_program_create(c->ctx, name, src, len, NULL, &c->p)
              : xpj_program_create_file(c->ctx, name, NULL, &c->p)) ==
             XPJ_OK &&
         xpj_queue_create(c->dev, NULL, &c->q) == XPJ_OK &&
         xpj_mem_alloc(c->dev, XPJ_MEM_SHARED, n * 8, 0, &c->x) == XPJ_OK &&
         xpj_mem_alloc(c->dev, XPJ_MEM_SHARED, n * 8, 0, &c->y) == XPJ_OK;
}

static inline void cpu_client_close(cpu_client *c) {
  if (c->dev) {
    xpj_mem_free(c->dev, c->x);
    xpj_mem_free(c->dev, c->y);
  }
  xpj_queue_destroy(c->q);
  xpj_program_destroy(c->p);
  xpj_context_destroy(c->ctx);
}

/* ---- the daemon's protocol ---- */

/* Waits until the daemon pid answers a handshake on sock (each try waits
 * up to 1 s, 10 ms apart): 0 then; 1 when it exited first (reaped, *ws its
 * wait status); -1 once deadline has passed (err: why the last try
 * failed). */
static inline int daemon_wait_ready(const char *sock, pid_t pid,
                                    double deadline, int *ws, char *err,
                                    size_t errsize) {
  for (;;) {
    int fd = xpd_connect(sock, 1000, err, errsize, NULL, NULL);
    if (fd >= 0) {
      close(fd);
      return 0;
    }
    if (waitpid(pid, ws, WNOHANG) == pid)
      return 1;
    if (now_ms() > deadline)
      return -1;
    sleep_ms(10);
  }
}

/* Sends request op (no fields) with id over fd, a connection with its
 * handshake done, and reads the reply within 5 s (x SLOW): *h, and *pl
 * (free it, whatever the result). err (errsize) says why on an error. */
static inline xpd_err daemon_request(int fd, xpd_op op, uint32_t id,
                                     xpd_header *h, uint8_t **pl, char *err,
                                     size_t errsize) {
  xpd_buf b = {0};
  xpd_begin(&b, op, id);
  xpd_end(&b, 0);
  xpd_err e =
      xpd_call(fd, &b, XPD_MAX_REPLY, 5000 * SLOW, h, pl, err, errsize);
  xpd_buf_free(&b);
  return e;
}

/* The daemon's statistics text over fd (NUL-terminated, into buf). */
static inline bool stats_text(int fd, char *buf, size_t size) {
  xpd_header h;
  uint8_t *pl = NULL;
  char err[512];
  xpd_err e = daemon_request(fd, XPD_STATS, 7, &h, &pl, err, sizeof err);
  xpd_msg m;
  const uint8_t *t = NULL;
  size_t n = 0;
  bool ok = e == XPD_E_OK && h.op == XPD_STATS_REPLY &&
            xpd_payload_decode(pl, h.len, &m) == XPD_E_OK &&
            xpd_get_bytes(&m, XPD_F_TEXT, false, size - 1, &t, &n) ==
                XPD_E_OK;
  if (ok) {
    memcpy(buf, t, n);
    buf[n] = 0;
  }
  free(pl);
  return ok;
}

/* The value of "name value" in a statistics text; -1 when absent. */
static inline long long stat_of(const char *text, const char *name) {
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

#endif
