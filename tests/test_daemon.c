/* test_daemon.c - xpjitd from the outside, over its real socket.
 *
 * - Hostile input: frames cut short, bad headers (magic, version, flags,
 *   op, a 4 GiB length answered at once), bad payloads (duplicate and
 *   overrunning fields, missing or out-of-range values, NULs), frames out
 *   of order (before HELLO, HELLO twice, reply ops), strings that are not
 *   UTF-8: each gets one ERROR and a close, or a request error.
 * - Hostile clients: slow ones (--io-timeout), one that vanishes with a
 *   compile pending, one that half-closes after its requests, one that
 *   never reads, one that pipelines and reads behind, a thousand at once, more than --max-connections, more than
 *   the descriptors, payload buffers claimed and never sent.
 * - Single flight, 256 outstanding GETs, compile workers that crash or
 *   hang (XPJIT_WORKER_FAULT), STATS with long strings, the cache file
 *   across a restart.
 * - Start-up: unsafe socket directories and files refused, a stale socket
 *   replaced, a live one kept, daemons racing for one path (the losers
 *   naming the winner); the peer-uid
 *   check (as root: a client running as nobody); SIGTERM and SHUTDOWN.
 * After each attack the daemon must still serve a fresh client, and its
 * STATS counters must say what happened.
 *
 * Each test starts its own daemon (BUILD/bin/xpjitd) in a private temp
 * directory with a fresh cache, in its own process group, and the
 * teardown kills that group (workers included) whatever the test did.
 * Every wait has a deadline, and an alarm ends the program if a test
 * still hangs. XPJD_TEST_FILTER=NAME runs some tests only;
 * XPJD_TEST_KEEP=1 keeps the directories (and the daemons' logs). */
#define _GNU_SOURCE /* prlimit */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "daemon.h"
#include "procutil.h" /* sleep_ms, end_escaped_child */
#include "proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Three kernels of the same shape under different names: "boom" and
 * "slow" are the ones the fault hook picks on. */
static const char kernels_src[] =
    "kernel saxpy<T>(a: T, x: global const T[], y: global T[]) range {\n"
    "    let i = global_id(0);\n"
    "    y[i] = a * x[i] + y[i];\n"
    "}\n"
    "kernel boom<T>(a: T, x: global const T[], y: global T[]) range {\n"
    "    let i = global_id(0);\n"
    "    y[i] = a * x[i] - y[i];\n"
    "}\n"
    "kernel slow<T>(a: T, x: global const T[], y: global T[]) range {\n"
    "    let i = global_id(0);\n"
    "    y[i] = a * x[i] * y[i];\n"
    "}\n";
static const char *const target = "cpu:x86-64";

/* Built with ThreadSanitizer (make tsan): its shadow memory counts in the
 * daemon's RSS, and its allocator dies under a worker's memory limit. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

/* ---- daemons ---- */

typedef struct dmn {
  pid_t pid;  /* 0 once reaped */
  int status; /* its wait status, once reaped */
  char dir[96], sock[128], log[128];
} dmn;

/* What the teardown (or the watchdog) must clean up. */
#define MAX_DAEMONS 8
static pid_t running[MAX_DAEMONS];
static char base[64]; /* this test's private directory */
static char cache_dir[4096]; /* XPJIT_CACHE_DIR: "" for base/cache */
static rlim_t nofile; /* the daemon's RLIMIT_NOFILE (0: inherited) */
static char exe[128]; /* the daemon's binary: "" for BUILD/bin/xpjitd */
/* ASAN_OPTIONS added for the daemon: the memory tests keep ASan's
 * quarantine of freed memory small, or it would count as held */
static const char *asan_extra;
static unsigned nlogs;

static void forget(pid_t pid) {
  for (int i = 0; i < MAX_DAEMONS; i++)
    if (running[i] == pid)
      running[i] = 0;
}

/* The daemon and its workers: each daemon leads its own process group. */
static void kill_all(void) {
  for (int i = 0; i < MAX_DAEMONS; i++)
    if (running[i] > 0) {
      kill(-running[i], SIGKILL);
      kill(running[i], SIGKILL);
      waitpid(running[i], NULL, 0);
      running[i] = 0;
    }
}

static void watchdog(int sig) {
  (void)sig;
  static const char msg[] = "test_daemon: a test hung; daemons killed\n";
  for (int i = 0; i < MAX_DAEMONS; i++)
    if (running[i] > 0)
      kill(-running[i], SIGKILL);
  if (write(2, msg, sizeof msg - 1) < 0)
    _exit(1);
  _exit(1);
}

static const char *daemon_path(void) {
  static char p[512];
  const char *b = getenv("BUILD");
  snprintf(p, sizeof p, "%s/bin/xpjitd", b && *b ? b : "build");
  return p;
}

/* A daemon description for the socket directory base/NAME. */
static void dmn_init(dmn *d, const char *name) {
  memset(d, 0, sizeof *d);
  snprintf(d->dir, sizeof d->dir, "%s/%s", base, name);
  snprintf(d->sock, sizeof d->sock, "%s/xpjitd.sock", d->dir);
  snprintf(d->log, sizeof d->log, "%s/daemon%u.log", base, nlogs++);
}

static void make_dir(dmn *d) {
  assert_int_equal(mkdir(d->dir, 0700), 0);
}

/* Starts the daemon (it may refuse to; see dmn_exit). fault: the worker
 * fault hook, or NULL; args: more options, NULL-terminated. */
static void dmn_spawn(dmn *d, const char *fault, const char *const *args) {
  const char *argv[32];
  int n = 0;
  argv[n++] = exe[0] ? exe : daemon_path();
  argv[n++] = "--foreground";
  argv[n++] = "--socket";
  argv[n++] = d->sock;
  for (int i = 0; args && args[i] && n < 31; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  char cache[sizeof cache_dir];
  if (cache_dir[0])
    memcpy(cache, cache_dir, sizeof cache);
  else
    snprintf(cache, sizeof cache, "%s/cache", base);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    setpgid(0, 0);
    int lf = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (lf < 0 || nul < 0)
      _exit(126);
    dup2(nul, 0);
    dup2(nul, 1);
    dup2(lf, 2);
    if (nofile) {
      struct rlimit rl = {nofile, nofile};
      if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        _exit(126);
    }
    setenv("XPJIT_CACHE_DIR", cache, 1);
    unsetenv("XPJIT_CACHE");
    if (fault)
      setenv("XPJIT_WORKER_FAULT", fault, 1);
    else
      unsetenv("XPJIT_WORKER_FAULT");
    /* a crashing worker is the point of those tests: under ASan let it
     * die of its signal instead of printing a report */
    const char *ao = getenv("ASAN_OPTIONS");
    char opts[512];
    snprintf(opts, sizeof opts, "%s%s%s%s%s", ao ? ao : "",
             ao && *ao ? ":" : "", fault ? "handle_segv=0" : "",
             fault && asan_extra ? ":" : "", asan_extra ? asan_extra : "");
    if (fault || asan_extra)
      setenv("ASAN_OPTIONS", opts, 1);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  setpgid(pid, pid);
  d->pid = pid;
  for (int i = 0; i < MAX_DAEMONS; i++)
    if (!running[i]) {
      running[i] = pid;
      break;
    }
}

/* Reaps the daemon if it has exited; true then (status in d->status). */
static bool dmn_reaped(dmn *d) {
  if (!d->pid)
    return true;
  pid_t r = waitpid(d->pid, &d->status, WNOHANG);
  if (r != d->pid)
    return false;
  kill(-d->pid, SIGKILL); /* a worker left behind */
  forget(d->pid);
  d->pid = 0;
  return true;
}

/* Waits up to ms for the daemon to exit; its exit code, or -1 (still
 * running) or 128+N (killed by signal N). */
static int dmn_exit(dmn *d, unsigned ms) {
  uint64_t end = xpd_now_ms() + ms;
  while (!dmn_reaped(d) && xpd_now_ms() < end)
    sleep_ms(10);
  if (d->pid)
    return -1;
  if (WIFEXITED(d->status))
    return WEXITSTATUS(d->status);
  return 128 + WTERMSIG(d->status);
}

static char *slurp(const char *path) {
  static char buf[65536];
  buf[0] = 0;
  FILE *f = fopen(path, "r");
  if (f) {
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
  }
  return buf;
}

/* One PING round trip on a new connection. */
static bool ping_once(const char *sock) {
  char err[256];
  int fd = xpd_connect(sock, 2000, err, sizeof err, NULL, NULL);
  if (fd < 0)
    return false;
  xpd_buf b = {0};
  xpd_begin(&b, XPD_PING, 7);
  xpd_end(&b, 0);
  xpd_header h;
  uint8_t *pl = NULL;
  xpd_err e = xpd_call(fd, &b, 1u << 20, 2000, &h, &pl, err, sizeof err);
  xpd_buf_free(&b);
  free(pl);
  close(fd);
  return e == XPD_E_OK && h.op == XPD_PONG && h.id == 7;
}

/* Waits until the daemon answers a PING; false if it exited first or did
 * not answer in time. */
static bool dmn_serving(dmn *d, unsigned ms) {
  uint64_t end = xpd_now_ms() + ms;
  while (xpd_now_ms() < end) {
    if (dmn_reaped(d))
      return false;
    if (ping_once(d->sock))
      return true;
    sleep_ms(20);
  }
  return false;
}

static void dmn_start(dmn *d, const char *fault, const char *const *args) {
  dmn_spawn(d, fault, args);
  if (!dmn_serving(d, 30000))
    fail_msg("xpjitd did not start serving %s; its stderr:\n%s", d->sock,
             slurp(d->log));
}

/* SIGTERM, and the daemon must exit 0 (under ASan: with no leak). */
static void dmn_stop(dmn *d) {
  if (!d->pid)
    return;
  kill(d->pid, SIGTERM);
  int code = dmn_exit(d, 15000);
  if (code != 0)
    fail_msg("xpjitd did not exit 0 on SIGTERM (%d); its stderr:\n%s", code,
             slurp(d->log));
}

/* ---- clients ---- */

static int client(const dmn *d) {
  char err[256];
  int fd = xpd_connect(d->sock, 5000, err, sizeof err, NULL, NULL);
  if (fd < 0)
    fail_msg("connect: %s", err);
  return fd;
}

/* A whole HELLO (PROTO, VERSIONS, PID: all required), its frame begun
 * in b; the caller ends it. */
static void put_hello(xpd_buf *b, uint32_t id) {
  char v[256];
  xpj_versions_str(v, sizeof v);
  xpd_begin(b, XPD_HELLO, id);
  xpd_put_u64(b, XPD_F_PROTO, XPD_VERSION);
  xpd_put_str(b, XPD_F_VERSIONS, v);
  xpd_put_u64(b, XPD_F_PID, (uint64_t)getpid());
}

/* a.sun_path = path (short enough: ours are). */
static void set_path(struct sockaddr_un *a, const char *path) {
  size_t n = strlen(path);
  assert_true(n < sizeof a->sun_path);
  memcpy(a->sun_path, path, n + 1);
}

/* A connection without the handshake. -1 with errno on failure. */
static int raw_connect(const char *sock) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  set_path(&a, sock);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

static int raw_client(const dmn *d) {
  int fd = raw_connect(d->sock);
  if (fd < 0)
    fail_msg("connect %s: %s", d->sock, strerror(errno));
  return fd;
}

static void send_bytes(int fd, const void *p, size_t n) {
  assert_true(xpd_write_all(fd, p, n, xpd_now_ms() + 5000));
}

/* Finishes the frame begun at 0 in b and sends it. */
static void send_frame(int fd, xpd_buf *b) {
  assert_true(xpd_end(b, 0));
  send_bytes(fd, b->p, b->len);
  xpd_buf_free(b);
}

static void send_op(int fd, xpd_op op, uint32_t id) {
  xpd_buf b = {0};
  xpd_begin(&b, op, id);
  send_frame(fd, &b);
}

/* Reads one frame within ms; fails the test if none comes. The payload
 * is decoded into m (it points into *pl: free it). */
static xpd_header read_reply(int fd, unsigned ms, uint8_t **pl,
                             xpd_msg *m) {
  xpd_header h;
  char err[256];
  xpd_err e = xpd_read_frame(fd, XPD_MAX_REPLY, xpd_now_ms() + ms, &h, pl,
                             err, sizeof err);
  if (e != XPD_E_OK)
    fail_msg("no reply: %s", e == XPD_E_SHORT ? err : xpd_err_str(e));
  assert_int_equal(xpd_payload_decode(*pl, h.len, m), XPD_E_OK);
  return h;
}

/* True when the daemon closed fd within ms (EOF or reset); fails if data
 * comes instead. */
static bool closed_within(int fd, unsigned ms) {
  uint64_t end = xpd_now_ms() + ms;
  for (;;) {
    char c[256];
    ssize_t n = recv(fd, c, sizeof c, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE)))
      return true;
    if (n > 0)
      fail_msg("unexpected %zd bytes after the daemon's last reply", n);
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return true;
    uint64_t now = xpd_now_ms();
    if (now >= end)
      return false;
    struct pollfd p = {fd, POLLIN, 0};
    poll(&p, 1, (int)(end - now));
  }
}

/* The daemon's answer to a malformed frame: one ERROR with a status and a
 * message, then the connection closed. Returns the message. */
static const char *expect_error_close(int fd, const char *what) {
  static char msg[1024];
  uint8_t *pl = NULL;
  xpd_msg m;
  xpd_header h = read_reply(fd, 5000, &pl, &m);
  if (h.op != XPD_ERROR)
    fail_msg("%s: got operation %u, not ERROR", what, h.op);
  uint64_t status = 0;
  assert_int_equal(xpd_get_u64(&m, XPD_F_STATUS, false, &status), XPD_E_OK);
  assert_true(status != 0);
  assert_int_equal(xpd_get_str(&m, XPD_F_MESSAGE, false, msg, sizeof msg),
                   XPD_E_OK);
  assert_true(msg[0] != 0);
  free(pl);
  if (!closed_within(fd, 5000))
    fail_msg("%s: the connection stayed open after the ERROR", what);
  close(fd);
  return msg;
}

/* A GET frame for kernel of source (kernels_src when NULL) with dtypes
 * T=dtype; timeout_ms 0: the daemon's. */
static void build_get_src(xpd_buf *b, uint32_t id, const char *source,
                          size_t source_len, const char *kernel,
                          const char *dtype, uint64_t timeout_ms) {
  xpd_get g;
  memset(&g, 0, sizeof g);
  g.source = (const uint8_t *)(source ? source : kernels_src);
  g.source_len = source ? source_len : strlen(kernels_src);
  snprintf(g.filename, sizeof g.filename, "kernels.xpk");
  snprintf(g.kernel, sizeof g.kernel, "%s", kernel);
  snprintf(g.dtypes, sizeof g.dtypes, "T=%s", dtype);
  snprintf(g.target, sizeof g.target, "%s", target);
  g.opt_level = 2;
  g.timeout_ms = timeout_ms;
  xpd_begin(b, XPD_GET, id);
  xpd_put_get(b, &g);
}

/* A GET frame for kernel of kernels_src (dtypes T=f32). */
static void build_get(xpd_buf *b, uint32_t id, const char *kernel,
                      uint64_t timeout_ms) {
  build_get_src(b, id, NULL, 0, kernel, "f32", timeout_ms);
}

/* The same with another element type: another cache key. */
static void build_get_dt(xpd_buf *b, uint32_t id, const char *kernel,
                         const char *dtype, uint64_t timeout_ms) {
  build_get_src(b, id, NULL, 0, kernel, dtype, timeout_ms);
}

/* A GET's reply: a KERNEL (decoded into k, log copied into log). */
typedef struct kreply {
  xpd_kernel k;
  char log[2048];
  uint64_t ms; /* how long it took */
} kreply;

static void read_kernel(int fd, uint32_t id, unsigned ms, kreply *r,
                        uint64_t t0) {
  uint8_t *pl = NULL;
  xpd_msg m;
  xpd_header h = read_reply(fd, ms, &pl, &m);
  r->ms = xpd_now_ms() - t0;
  assert_int_equal(h.id, id);
  if (h.op == XPD_ERROR) {
    char msg[1024] = "";
    xpd_get_str(&m, XPD_F_MESSAGE, true, msg, sizeof msg);
    fail_msg("GET answered with ERROR: %s", msg);
  }
  assert_int_equal(h.op, XPD_KERNEL);
  assert_int_equal(xpd_kernel_decode(&m, &r->k), XPD_E_OK);
  snprintf(r->log, sizeof r->log, "%.2000s", r->k.v.log);
  /* they pointed into pl */
  r->k.v.data = NULL;
  r->k.v.entry = r->k.v.log = NULL;
  free(pl);
}

static void get_kernel(int fd, const char *kernel, kreply *r) {
  xpd_buf b = {0};
  build_get(&b, 42, kernel, 0);
  uint64_t t0 = xpd_now_ms();
  send_frame(fd, &b);
  read_kernel(fd, 42, 60000, r, t0);
}

/* ---- other processes, the log, descriptors ---- */

/* A connection, handshake done, made by another process: a child connects
 * and hands the descriptor over (SCM_RIGHTS) before it exits. The daemon
 * sees another client, as SO_PEERCRED names the process that connected. */
static int other_client(const dmn *d) {
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
                   0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  union {
    struct cmsghdr h;
    char b[CMSG_SPACE(sizeof(int))];
  } u;
  char byte = 0;
  struct iovec iov = {&byte, 1};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
                      .msg_control = u.b, .msg_controllen = sizeof u.b};
  if (pid == 0) {
    char err[256];
    int fd = xpd_connect(d->sock, 5000, err, sizeof err, NULL, NULL);
    if (fd < 0)
      _exit(1);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    _exit(sendmsg(sv[1], &mh, MSG_NOSIGNAL) == 1 ? 0 : 1);
  }
  close(sv[1]);
  ssize_t n = recvmsg(sv[0], &mh, MSG_CMSG_CLOEXEC);
  close(sv[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
  if (n != 1 || !cm || cm->cmsg_type != SCM_RIGHTS)
    fail_msg("the child could not connect to %s (status %d)", d->sock, st);
  int fd;
  memcpy(&fd, CMSG_DATA(cm), sizeof fd);
  return fd;
}

/* Lines of the daemon's log that contain what. */
static unsigned log_lines(const dmn *d, const char *what) {
  unsigned n = 0;
  FILE *f = fopen(d->log, "r");
  char line[2048];
  while (f && fgets(line, sizeof line, f))
    n += strstr(line, what) != NULL;
  if (f)
    fclose(f);
  return n;
}

/* The RLIMIT_NOFILE under which pid has exactly `room` descriptor numbers
 * free. */
static rlim_t nofile_with_room(pid_t pid, unsigned room) {
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/fd", (int)pid);
  static bool open_fd[65536];
  memset(open_fd, 0, sizeof open_fd);
  DIR *dir = opendir(p);
  assert_non_null(dir);
  struct dirent *de;
  while ((de = readdir(dir)))
    if (de->d_name[0] != '.') {
      long fd = strtol(de->d_name, NULL, 10);
      if (fd >= 0 && fd < 65536)
        open_fd[fd] = true;
    }
  closedir(dir);
  unsigned used = 0;
  for (rlim_t lim = 1; lim < 65536; lim++) {
    used += open_fd[lim - 1];
    if (lim - used == room)
      return lim;
  }
  fail_msg("no descriptor limit leaves %u free", room);
  return 0;
}

/* The daemon still serves a new client (another process: this one may
 * have compiles running, up to its limit): PING, and a GET that compiles
 * (or is found) and succeeds. */
static void check_serves(const dmn *d) {
  int fd = other_client(d);
  send_op(fd, XPD_PING, 5);
  uint8_t *pl = NULL;
  xpd_msg m;
  xpd_header h = read_reply(fd, 5000, &pl, &m);
  free(pl);
  assert_int_equal(h.op, XPD_PONG);
  assert_int_equal(h.id, 5);
  kreply r;
  get_kernel(fd, "saxpy", &r);
  if (r.k.v.failed)
    fail_msg("saxpy failed to compile: %s", r.log);
  assert_int_equal(r.k.status, 0);
  assert_true(r.k.v.size > 0);
  close(fd);
}

/* ---- statistics ---- */

typedef struct stats {
  char text[4096];
} stats;

static void get_stats(const dmn *d, stats *s) {
  int fd = client(d);
  send_op(fd, XPD_STATS, 9);
  uint8_t *pl = NULL;
  xpd_msg m;
  xpd_header h = read_reply(fd, 5000, &pl, &m);
  assert_int_equal(h.op, XPD_STATS_REPLY);
  const uint8_t *t;
  size_t n;
  assert_int_equal(xpd_get_bytes(&m, XPD_F_TEXT, false, 4095, &t, &n),
                   XPD_E_OK);
  memcpy(s->text, t, n);
  s->text[n] = 0;
  free(pl);
  close(fd);
}

static uint64_t stat_field(const stats *s, const char *name) {
  size_t l = strlen(name);
  for (const char *p = s->text; *p;) {
    if (!strncmp(p, name, l) && p[l] == ' ')
      return strtoull(p + l + 1, NULL, 10);
    p = strchr(p, '\n');
    if (!p)
      break;
    p++;
  }
  fail_msg("no '%s' in the statistics:\n%s", name, s->text);
  return 0;
}

static uint64_t stat1(const dmn *d, const char *name) {
  stats s;
  get_stats(d, &s);
  return stat_field(&s, name);
}

/* Polls a counter until it reaches want (the daemon notices closes and
 * timeouts asynchronously); its last value. */
static uint64_t stat_reaches(const dmn *d, const char *name, uint64_t want,
                             unsigned ms) {
  uint64_t end = xpd_now_ms() + ms, v;
  while ((v = stat1(d, name)) != want && xpd_now_ms() < end)
    sleep_ms(20);
  return v;
}

/* ---- fixtures ---- */

static int setup(void **state) {
  (void)state;
  end_escaped_child(); /* a forked child back in cmocka's runner */
  snprintf(base, sizeof base, "/tmp/xpjd-XXXXXX");
  if (!mkdtemp(base))
    return -1;
  nlogs = 0;
  cache_dir[0] = 0;
  nofile = 0;
  exe[0] = 0;
  asan_extra = NULL;
  alarm(120);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  end_escaped_child(); /* it would kill the parent's daemons */
  alarm(0);
  kill_all();
  if (getenv("XPJD_TEST_KEEP")) { /* to read the daemons' logs */
    print_message("kept %s\n", base);
    return 0;
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  return system(cmd) == 0 ? 0 : -1;
}

/* ---- hostile input ---- */

/* A frame cut short, in its header or in its payload, then closed: the
 * daemon drops the connection without complaint and keeps serving. */
static void test_truncated_frames(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  xpd_buf b = {0};
  build_get(&b, 1, "saxpy", 0);
  assert_true(xpd_end(&b, 0));
  static const size_t cuts[] = {1, 4, 5, 10, 15, 16, 17, 40};
  for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
    int fd = i % 2 ? client(&d) : raw_client(&d); /* before/after HELLO */
    send_bytes(fd, b.p, cuts[i] < b.len ? cuts[i] : b.len - 1);
    close(fd);
  }
  /* the whole frame but its last byte */
  int fd = client(&d);
  send_bytes(fd, b.p, b.len - 1);
  close(fd);
  xpd_buf_free(&b);
  check_serves(&d);
  stats s;
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "malformed_frames"), 0);
  assert_int_equal(stat_field(&s, "requests"), 1); /* check_serves' GET */
  assert_int_equal(stat_reaches(&d, "connections", 1, 5000), 1);
  dmn_stop(&d);
}

/* A 16-byte header with these fields. */
static void header(uint8_t h[16], const char *magic, uint8_t version,
                   uint8_t op, uint16_t flags, uint32_t len) {
  memcpy(h, magic, 4);
  h[4] = version;
  h[5] = op;
  h[6] = (uint8_t)flags;
  h[7] = (uint8_t)(flags >> 8);
  memset(h + 8, 0, 4);
  for (int i = 0; i < 4; i++)
    h[12 + i] = (uint8_t)(len >> (8 * i));
}

static uint64_t vm_peak_kb(pid_t pid) {
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
  const char *s = strstr(slurp(p), "VmPeak:");
  return s ? strtoull(s + 7, NULL, 10) : 0;
}

/* Bad headers, each on a fresh connection (with or without HELLO first):
 * one ERROR at once (no payload is sent: the daemon must judge the header
 * alone), then the connection closed. */
static void test_bad_headers(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  static const struct {
    const char *what, *magic;
    uint8_t version, op;
    uint16_t flags;
    uint32_t len;
    const char *says;
  } cases[] = {
      {"bad magic", "XPJX", XPD_VERSION, XPD_PING, 0, 0, "magic"},
      {"HTTP", "GET ", XPD_VERSION, XPD_PING, 0, 0, "magic"},
      {"a later version", "XPJD", XPD_VERSION + 1, XPD_PING, 0, 0,
       "version"},
      {"version 0", "XPJD", 0, XPD_PING, 0, 0, "version"},
      {"flags", "XPJD", XPD_VERSION, XPD_PING, 1, 0, "flags"},
      {"high flags", "XPJD", XPD_VERSION, XPD_PING, 0x8000, 0, "flags"},
      {"op 0", "XPJD", XPD_VERSION, 0, 0, 0, "operation"},
      {"op 12", "XPJD", XPD_VERSION, 12, 0, 0, "operation"},
      {"op 19", "XPJD", XPD_VERSION, 19, 0, 0, "operation"},
      {"op 22", "XPJD", XPD_VERSION, 22, 0, 0, "operation"},
      {"op 255", "XPJD", XPD_VERSION, 255, 0, 0, "operation"},
      {"4 GiB payload", "XPJD", XPD_VERSION, XPD_GET, 0, 0xFFFFFFFFu,
       "limit"},
      {"payload over the limit", "XPJD", XPD_VERSION, XPD_GET, 0,
       XPD_MAX_REQUEST + 1, "limit"},
  };
  size_t n = sizeof cases / sizeof *cases;
  uint64_t peak0 = vm_peak_kb(d.pid);
  for (size_t i = 0; i < n; i++) {
    int fd = i % 2 ? client(&d) : raw_client(&d);
    uint8_t h[16];
    header(h, cases[i].magic, cases[i].version, cases[i].op, cases[i].flags,
           cases[i].len);
    uint64_t t0 = xpd_now_ms();
    send_bytes(fd, h, sizeof h);
    const char *msg = expect_error_close(fd, cases[i].what);
    if (!strstr(msg, cases[i].says))
      fail_msg("%s: message '%s' does not say '%s'", cases[i].what, msg,
               cases[i].says);
    assert_true(xpd_now_ms() - t0 < 3000); /* no waiting for the rest */
  }
  /* garbage is judged on its first bytes, before a whole header */
  int fd = raw_client(&d);
  send_bytes(fd, "\x16\x03\x01", 3); /* a TLS hello */
  expect_error_close(fd, "3 bytes of garbage");
  /* the 4 GiB length was refused, not allocated (a 16 MiB payload, the
   * limit, may be) */
  uint64_t peak1 = vm_peak_kb(d.pid);
  print_message("daemon VmPeak %llu -> %llu kB\n",
                (unsigned long long)peak0, (unsigned long long)peak1);
  assert_true(peak1 < peak0 + (1u << 20));
  check_serves(&d);
  assert_int_equal(stat1(&d, "malformed_frames"), n + 1);
  dmn_stop(&d);
}

/* Appends raw bytes to b: the encoder itself only writes honest fields. */
static void put_raw(xpd_buf *b, const void *p, size_t n) {
  size_t at = b->len;
  xpd_put_bytes(b, 0, p, n);
  assert_false(b->oom);
  memmove(b->p + at, b->p + at + 6, n);
  b->len = at + n;
}

/* A field whose header claims len bytes, followed by vlen bytes. */
static void put_field(xpd_buf *b, uint16_t tag, uint32_t len, const void *v,
                      size_t vlen) {
  uint8_t f[6] = {(uint8_t)tag, (uint8_t)(tag >> 8)};
  for (int i = 0; i < 4; i++)
    f[2 + i] = (uint8_t)(len >> (8 * i));
  put_raw(b, f, sizeof f);
  if (vlen)
    put_raw(b, v, vlen);
}

/* The fields of a good GET of saxpy but for those in skip (the caller
 * adds its own). */
static void get_fields(xpd_buf *b, const uint16_t *skip, size_t nskip) {
  static const struct {
    uint16_t tag;
    const char *s;
    uint64_t u;
  } f[] = {
      {XPD_F_SOURCE, kernels_src, 0}, {XPD_F_KERNEL, "saxpy", 0},
      {XPD_F_DTYPES, "T=f32", 0},     {XPD_F_TARGET, "cpu:x86-64", 0},
      {XPD_F_OPT_LEVEL, NULL, 2},
  };
  for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
    bool skipped = false;
    for (size_t j = 0; j < nskip; j++)
      skipped = skipped || skip[j] == f[i].tag;
    if (skipped)
      continue;
    if (f[i].s)
      xpd_put_str(b, f[i].tag, f[i].s);
    else
      xpd_put_u64(b, f[i].tag, f[i].u);
  }
}

/* Frames with a sound header and a bad payload or in a bad order, each
 * answered with one ERROR and a close. */
static void test_bad_payloads(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  unsigned expected_malformed = 0;
  xpd_buf b = {0};
  int fd;

  /* requests before HELLO */
  static const xpd_op before[] = {XPD_PING, XPD_GET, XPD_STATS,
                                  XPD_SHUTDOWN};
  for (size_t i = 0; i < sizeof before / sizeof *before; i++) {
    fd = raw_client(&d);
    xpd_begin(&b, before[i], 1);
    if (before[i] == XPD_GET)
      get_fields(&b, NULL, 0);
    send_frame(fd, &b);
    const char *msg = expect_error_close(fd, "request before HELLO");
    assert_non_null(strstr(msg, "HELLO"));
    expected_malformed++;
  }
  assert_true(dmn_serving(&d, 1000)); /* the SHUTDOWN was not obeyed */

  /* HELLO twice */
  fd = client(&d);
  xpd_begin(&b, XPD_HELLO, 2);
  xpd_put_u64(&b, XPD_F_PROTO, XPD_VERSION);
  send_frame(fd, &b);
  assert_non_null(strstr(expect_error_close(fd, "HELLO twice"), "twice"));
  expected_malformed++;

  /* HELLO without a version, HELLO for a later version (refused, though
   * not malformed) */
  fd = raw_client(&d);
  xpd_begin(&b, XPD_HELLO, 1);
  send_frame(fd, &b);
  expect_error_close(fd, "HELLO without a version");
  expected_malformed++;
  /* HELLO without its other required fields, VERSIONS and PID (one of
   * PROTO alone, or with an empty VERSIONS, was welcomed: an outside
   * probe) */
  for (int k = 0; k < 5; k++) {
    static const char *const what[] = {"PROTO alone", "an empty VERSIONS",
                                       "no PID", "PID 0", "no VERSIONS"};
    fd = raw_client(&d);
    xpd_begin(&b, XPD_HELLO, 1);
    xpd_put_u64(&b, XPD_F_PROTO, XPD_VERSION);
    if (k == 1)
      xpd_put_str(&b, XPD_F_VERSIONS, "");
    if (k == 2 || k == 3)
      xpd_put_str(&b, XPD_F_VERSIONS, "xpjit=0.1.0");
    if (k == 3 || k == 4)
      xpd_put_u64(&b, XPD_F_PID, k == 3 ? 0 : (uint64_t)getpid());
    send_frame(fd, &b);
    const char *msg = expect_error_close(fd, what[k]);
    if (!strstr(msg, k == 2 || k == 3 ? "PID" : "VERSIONS"))
      fail_msg("HELLO with %s: %s", what[k], msg);
    expected_malformed++;
  }
  fd = raw_client(&d);
  xpd_begin(&b, XPD_HELLO, 1);
  xpd_put_u64(&b, XPD_F_PROTO, XPD_VERSION + 1);
  send_frame(fd, &b);
  expect_error_close(fd, "HELLO for a later version");

  /* operations only the daemon or its workers send */
  static const xpd_op replies[] = {XPD_HELLO + 1, XPD_KERNEL,
                                   XPD_STATS_REPLY, XPD_PONG, XPD_OK,
                                   XPD_ERROR, XPD_PENDING, XPD_JOB,
                                   XPD_RESULT};
  for (size_t i = 0; i < sizeof replies / sizeof *replies; i++) {
    fd = client(&d);
    xpd_begin(&b, replies[i], 3);
    if (replies[i] == XPD_JOB)
      get_fields(&b, NULL, 0);
    send_frame(fd, &b);
    expect_error_close(fd, "a reply operation sent as a request");
    expected_malformed++;
  }

  /* broken payloads, after HELLO */
  struct {
    const char *what;
    xpd_op op;
    uint16_t skip;
    int extra; /* what to append */
  } cases[] = {
      {"duplicate field", XPD_GET, 0, 1},
      {"duplicate field in a PING", XPD_PING, 0, 2},
      {"field length past the payload", XPD_GET, 0, 3},
      {"field header cut short", XPD_PING, 0, 4},
      {"field length 0xFFFFFFFF", XPD_GET, 0, 5},
      {"GET without a source", XPD_GET, XPD_F_SOURCE, 0},
      {"GET without a kernel", XPD_GET, XPD_F_KERNEL, 0},
      {"GET without a target", XPD_GET, XPD_F_TARGET, 0},
      {"GET with an empty kernel name", XPD_GET, XPD_F_KERNEL, 6},
      {"NUL in the kernel name", XPD_GET, XPD_F_KERNEL, 7},
      {"NUL in the target", XPD_GET, XPD_F_TARGET, 8},
      {"NUL in the file name", XPD_GET, 0, 9},
      {"NUL in the dtypes", XPD_GET, XPD_F_DTYPES, 10},
      {"kernel name of 256 bytes", XPD_GET, XPD_F_KERNEL, 11},
      {"u64 field of 4 bytes", XPD_GET, 0, 12},
      {"opt level 7", XPD_GET, XPD_F_OPT_LEVEL, 13},
      {"digest not hex", XPD_GET, 0, 14},
      {"65 fields", XPD_PING, 0, 15},
      {"timeout over an hour", XPD_GET, 0, 16},
      {"ndim 17", XPD_GET, 0, 17},
      {"source over 8 MiB", XPD_GET, XPD_F_SOURCE, 18},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    fd = client(&d);
    xpd_begin(&b, cases[i].op, 4);
    if (cases[i].op == XPD_GET)
      get_fields(&b, &cases[i].skip, 1);
    char big[300];
    switch (cases[i].extra) {
    case 1:
      xpd_put_str(&b, XPD_F_KERNEL, "saxpy");
      break;
    case 2:
      xpd_put_u64(&b, XPD_F_PID, 1);
      xpd_put_u64(&b, XPD_F_PID, 1);
      break;
    case 3:
      put_field(&b, XPD_F_FILENAME, 100, "abc", 3);
      break;
    case 4:
      put_raw(&b, "\x04\x00\x08", 3); /* 3 bytes of a field header */
      break;
    case 5:
      put_field(&b, XPD_F_FILENAME, 0xFFFFFFFFu, "abcdefgh", 8);
      break;
    case 6:
      xpd_put_str(&b, XPD_F_KERNEL, "");
      break;
    case 7:
      xpd_put_bytes(&b, XPD_F_KERNEL, "sax\0py", 6);
      break;
    case 8:
      xpd_put_bytes(&b, XPD_F_TARGET, "cpu\0:x86-64", 11);
      break;
    case 9:
      xpd_put_bytes(&b, XPD_F_FILENAME, "a\0b", 3);
      break;
    case 10:
      xpd_put_bytes(&b, XPD_F_DTYPES, "T=f32\0", 6);
      break;
    case 11:
      memset(big, 'k', 256);
      big[256] = 0;
      xpd_put_str(&b, XPD_F_KERNEL, big);
      break;
    case 12:
      xpd_put_bytes(&b, XPD_F_NDIM, "\1\0\0\0", 4);
      break;
    case 13:
      xpd_put_u64(&b, XPD_F_OPT_LEVEL, 7);
      break;
    case 14:
      memset(big, 'g', 64);
      big[64] = 0;
      xpd_put_str(&b, XPD_F_DIGEST, big);
      break;
    case 15:
      for (uint16_t t = 100; t < 165; t++)
        xpd_put_u64(&b, t, t);
      break;
    case 16:
      xpd_put_u64(&b, XPD_F_TIMEOUT, 3600001);
      break;
    case 17:
      xpd_put_u64(&b, XPD_F_NDIM, 17);
      break;
    case 18: {
      char *src = malloc(XPD_MAX_SOURCE + 1);
      assert_non_null(src);
      memset(src, ' ', XPD_MAX_SOURCE + 1);
      xpd_put_bytes(&b, XPD_F_SOURCE, src, XPD_MAX_SOURCE + 1);
      free(src);
      break;
    }
    }
    send_frame(fd, &b);
    expect_error_close(fd, cases[i].what);
    expected_malformed++;
  }
  check_serves(&d);
  stats s;
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "malformed_frames"), expected_malformed);
  assert_int_equal(stat_reaches(&d, "connections", 1, 5000), 1);
  dmn_stop(&d);
}

/* Strings that decode but are not UTF-8 (protocol.md: strings are
 * UTF-8), or name nothing: an ERROR, and either the connection goes on
 * (a request error) or it is closed (malformed). Never a crash, never a
 * forged line in the daemon's log. */
static void test_non_utf8_strings(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  static const struct {
    uint16_t tag;
    const char *val;
  } cases[] = {
      {XPD_F_KERNEL, "\xff\xfe\x80sax"},
      {XPD_F_KERNEL, "sax\xc3(py"},
      {XPD_F_TARGET, "cpu:\xff\xff"},
      {XPD_F_DTYPES, "T=\xe2\x82"},
      {XPD_F_FILENAME, "\xc0\xaf" "etc/passwd"},
      {XPD_F_SOURCE, "kernel \xff\xfe() range { }\n"},
      {XPD_F_KERNEL, "saxpy\n2026-01-01T00:00:00Z xpjitd[1] error: forged"},
  };
  size_t n = sizeof cases / sizeof *cases;
  for (size_t i = 0; i < n; i++) {
    int fd = client(&d);
    xpd_buf b = {0};
    xpd_begin(&b, XPD_GET, (uint32_t)(10 + i));
    get_fields(&b, &cases[i].tag, 1);
    xpd_put_str(&b, cases[i].tag, cases[i].val);
    send_frame(fd, &b);
    uint8_t *pl = NULL;
    xpd_msg m;
    xpd_header h = read_reply(fd, 10000, &pl, &m);
    assert_int_equal(h.id, 10 + i);
    if (h.op == XPD_KERNEL) { /* the file name only names the source */
      xpd_kernel k;
      assert_int_equal(xpd_kernel_decode(&m, &k), XPD_E_OK);
      assert_int_equal(cases[i].tag, XPD_F_FILENAME);
      free(pl);
      close(fd);
      continue;
    }
    assert_int_equal(h.op, XPD_ERROR);
    char msg[1024];
    assert_int_equal(xpd_get_str(&m, XPD_F_MESSAGE, false, msg, sizeof msg),
                     XPD_E_OK);
    assert_true(msg[0] != 0);
    if (getenv("XPJD_TEST_VERBOSE"))
      print_message("case %zu: %s\n", i, msg);
    free(pl);
    /* kept (then it still answers) or closed */
    send_op(fd, XPD_PING, 99);
    xpd_header p;
    char err[256];
    if (xpd_read_frame(fd, XPD_MAX_REPLY, xpd_now_ms() + 5000, &p, &pl, err,
                       sizeof err) == XPD_E_OK)
      assert_int_equal(p.op, XPD_PONG);
    free(pl);
    close(fd);
  }
  check_serves(&d);
  stats s;
  get_stats(&d, &s);
  uint64_t bad = stat_field(&s, "malformed_frames"),
           errs = stat_field(&s, "request_errors");
  print_message("non-UTF-8 strings: %llu malformed, %llu request errors\n",
                (unsigned long long)bad, (unsigned long long)errs);
  assert_true(bad + errs >= n - 1 && bad + errs <= n);
  /* a forged line in the log would start at the beginning of a line */
  assert_null(strstr(slurp(d.log), "\n2026-01-01T00:00:00Z"));
  dmn_stop(&d);
}

/* Half a frame, then silence: closed after --io-timeout, counted. */
static void test_slow_client(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, (const char *const[]){"--io-timeout", "300", NULL});
  xpd_buf b = {0};
  build_get(&b, 1, "saxpy", 0);
  assert_true(xpd_end(&b, 0));
  int fd1 = client(&d), fd2 = client(&d), fd3 = raw_client(&d);
  uint64_t t0 = xpd_now_ms();
  send_bytes(fd1, b.p, 8);          /* half a header */
  send_bytes(fd2, b.p, b.len / 2);  /* half a payload */
  send_bytes(fd3, b.p, 1);          /* one byte, before HELLO */
  /* meanwhile, others are served */
  check_serves(&d);
  assert_true(closed_within(fd1, 5000));
  assert_true(closed_within(fd2, 5000));
  assert_true(closed_within(fd3, 5000));
  uint64_t ms = xpd_now_ms() - t0;
  print_message("slow clients closed after %llu ms\n",
                (unsigned long long)ms);
  assert_true(ms >= 250);
  close(fd1);
  close(fd2);
  close(fd3);
  xpd_buf_free(&b);
  stats s;
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "io_timeouts"), 3);
  assert_int_equal(stat_field(&s, "malformed_frames"), 0);
  dmn_stop(&d);
}

/* A GET, then the client vanishes before the reply, once its compile has
 * started: the compile still completes, and the next GET for it is a
 * memory hit. */
static void test_vanishing_client(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, (const char *const[]){"--workers", "1", NULL});
  int fd = client(&d);
  xpd_buf b = {0};
  build_get(&b, 1, "slow", 0);
  send_frame(fd, &b);
  /* keyed on a parse thread: its job then went to the free worker at once
   * (a compile takes far longer than this) */
  assert_int_equal(stat_reaches(&d, "keyed", 1, 30000), 1);
  close(fd);
  assert_int_equal(stat_reaches(&d, "compiles", 1, 60000), 1);
  fd = client(&d);
  kreply r;
  get_kernel(fd, "slow", &r);
  close(fd);
  assert_int_equal(r.k.v.failed, 0);
  assert_true(r.k.v.size > 0);
  assert_int_equal(r.k.origin, XPD_FROM_MEMORY);
  stats s;
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "compiles"), 1);
  assert_int_equal(stat_field(&s, "hits_memory"), 1);
  assert_int_equal(stat_field(&s, "requests"), 2);
  check_serves(&d);
  dmn_stop(&d);
}

static uint64_t vm_rss_kb(pid_t pid) {
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
  const char *s = strstr(slurp(p), "VmRSS:");
  return s ? strtoull(s + 6, NULL, 10) : 0;
}

static uint64_t vm_hwm_kb(pid_t pid) {
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
  const char *s = strstr(slurp(p), "VmHWM:");
  return s ? strtoull(s + 6, NULL, 10) : 0;
}

/* A client that sends requests and never reads the replies: closed once
 * its replies have not moved for --io-timeout; others are served. */
static void test_client_never_reads(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, (const char *const[]){"--io-timeout", "300", NULL});
  uint64_t rss0 = vm_rss_kb(d.pid);
  int fd = client(&d);
  uint8_t reqs[256 * XPD_HEADER];
  for (int i = 0; i < 256; i++) {
    xpd_buf b = {0};
    xpd_begin(&b, XPD_STATS, (uint32_t)i);
    assert_true(xpd_end(&b, 0));
    memcpy(reqs + i * XPD_HEADER, b.p, XPD_HEADER);
    xpd_buf_free(&b);
  }
  uint64_t t0 = xpd_now_ms(), end = t0 + 20000;
  size_t sent = 0;
  bool closed = false;
  while (!closed && xpd_now_ms() < end) {
    ssize_t n = send(fd, reqs, sizeof reqs, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += (size_t)n;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd p = {fd, POLLOUT, 0};
      poll(&p, 1, 50);
    } else if (n < 0 && errno != EINTR) {
      closed = true; /* EPIPE or ECONNRESET: the daemon let go */
    }
  }
  uint64_t rss1 = d.pid ? vm_rss_kb(d.pid) : 0;
  print_message("never-reading client: %zu bytes of requests, closed after "
                "%llu ms; daemon RSS %llu -> %llu kB\n",
                sent, (unsigned long long)(xpd_now_ms() - t0),
                (unsigned long long)rss0, (unsigned long long)rss1);
  assert_true(closed);
  close(fd);
  check_serves(&d);
  assert_int_equal(stat1(&d, "io_timeouts"), 1);
  dmn_stop(&d);
}

/* A client that reads its replies slowly but steadily (4 KB every 100 ms)
 * is not one that does not read them: a daemon that saw progress only
 * when the socket became writable again (once most of what it holds is
 * read: about 4 s at this pace) closed it after --io-timeout (found by a
 * helper's probe: 80 KB/s closed under --io-timeout 2000). */
static void test_client_reads_slowly(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, (const char *const[]){"--io-timeout", "1000", NULL});
  int fd = client(&d);
  enum { NREQ = 3000 };
  uint8_t *reqs = malloc(NREQ * XPD_HEADER);
  assert_non_null(reqs);
  for (int i = 0; i < NREQ; i++) {
    xpd_buf b = {0};
    xpd_begin(&b, XPD_STATS, (uint32_t)i);
    assert_true(xpd_end(&b, 0));
    memcpy(reqs + (size_t)i * XPD_HEADER, b.p, XPD_HEADER);
    xpd_buf_free(&b);
  }
  size_t sent = 0, got = 0;
  bool closed = false;
  uint64_t t0 = xpd_now_ms();
  while (!closed && xpd_now_ms() - t0 < 5000) {
    if (sent < (size_t)NREQ * XPD_HEADER) {
      ssize_t n = send(fd, reqs + sent, (size_t)NREQ * XPD_HEADER - sent,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0)
        sent += (size_t)n;
      else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
               errno != EINTR)
        closed = true;
    }
    uint8_t buf[4096];
    ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r > 0)
      got += (size_t)r;
    else if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                        errno != EINTR))
      closed = true;
    sleep_ms(100);
  }
  print_message("slow reader: %zu bytes of requests sent, %zu of replies "
                "read in %llu ms%s\n", sent, got,
                (unsigned long long)(xpd_now_ms() - t0),
                closed ? ": closed by the daemon" : "");
  assert_false(closed);
  assert_true(got > 100000); /* past what one writable event would take */
  close(fd);
  free(reqs);
  assert_int_equal(stat1(&d, "io_timeouts"), 0);
  dmn_stop(&d);
}

/* Waiting GETs answered at once, on a connection that reads none of
 * them: at most a megabyte of replies and the last one are held for it,
 * the rest are told to ask again (every binary was appended: an outside
 * probe's 255 GETs of a 513 KB kernel held 134 MB for one connection). */
static void test_waiters_unread(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  /* the one worker held by a compile that hangs: the GETs all wait */
  dmn_start(&d, "hang:slow",
            (const char *const[]){"--workers", "1", "--grace", "0", NULL});
  int f0 = client(&d);
  xpd_buf sb = {0};
  build_get(&sb, 1, "slow", 300);
  send_frame(f0, &sb);
  xpd_buf_free(&sb);
  assert_int_equal(stat_reaches(&d, "workers_busy", 1, 5000), 1);
  /* a kernel whose object is 180 KB: -O0, line tables */
  size_t cap = 200000, len = 0;
  char *src = malloc(cap);
  assert_non_null(src);
  len += (size_t)snprintf(src + len, cap - len,
                          "kernel big(x: global f32[]) range {\n"
                          "    let i = global_id(0);\n"
                          "    let v = x[i];\n");
  for (int k = 0; k < 1500; k++)
    len += (size_t)snprintf(src + len, cap - len,
                            "    x[i] = x[i] * v + %d.5f32;\n", k);
  len += (size_t)snprintf(src + len, cap - len, "}\n");
  int fd = client(&d);
  const int N = 200;
  for (int i = 0; i < N; i++) {
    xpd_get g;
    memset(&g, 0, sizeof g);
    g.source = (const uint8_t *)src;
    g.source_len = len;
    snprintf(g.kernel, sizeof g.kernel, "big");
    snprintf(g.target, sizeof g.target, "%s", target);
    g.opt_level = 0;
    g.debug = 1;
    xpd_buf b = {0};
    xpd_begin(&b, XPD_GET, (uint32_t)i + 1);
    xpd_put_get(&b, &g);
    assert_true(xpd_end(&b, 0));
    send_frame(fd, &b);
    xpd_buf_free(&b);
  }
  /* compiled once; all answered at once, most refused */
  uint64_t end = xpd_now_ms() + 60000;
  while (stat1(&d, "refused_memory") == 0 && xpd_now_ms() < end)
    sleep_ms(20);
  kreply r;
  read_kernel(f0, 1, 15000, &r, xpd_now_ms());
  close(f0);
  sleep_ms(300);
  uint64_t held = stat1(&d, "client_bytes");
  print_message("%d waiting GETs unread: %llu bytes held, %llu refused\n", N,
                (unsigned long long)held,
                (unsigned long long)stat1(&d, "refused_memory"));
  assert_true(held < (4u << 20));
  /* what was sent arrives: kernels first, then ERRORs, one per request */
  int kernels = 0, errors = 0;
  for (int i = 0; i < N; i++) {
    uint8_t *pl = NULL;
    xpd_msg m;
    xpd_header h = read_reply(fd, 10000, &pl, &m);
    kernels += h.op == XPD_KERNEL;
    errors += h.op == XPD_ERROR;
    free(pl);
  }
  print_message("%d kernels, %d errors\n", kernels, errors);
  assert_true(kernels >= 1);
  assert_int_equal(kernels + errors, N);
  close(fd);
  free(src);
  check_serves(&d);
  dmn_stop(&d);
}

/* A client that pipelines requests and reads the replies steadily, a
 * couple of megabytes behind: what the daemon holds for it must stay
 * about what is unread, not grow with everything sent so far. */
static void test_pipelining_reader(void **state) {
  (void)state;
  enum { TOTAL = 64 * 1000, AHEAD = 2048, BATCH = 64, CHUNK = 32768 };
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  int fd = client(&d);
  uint8_t reqs[BATCH * XPD_HEADER];
  for (int i = 0; i < BATCH; i++) {
    xpd_buf b = {0};
    xpd_begin(&b, XPD_STATS, (uint32_t)i);
    assert_true(xpd_end(&b, 0));
    memcpy(reqs + i * XPD_HEADER, b.p, XPD_HEADER);
    xpd_buf_free(&b);
  }
  uint64_t rss0 = vm_rss_kb(d.pid), t0 = xpd_now_ms();
  uint64_t end = t0 + 60000;
  static uint8_t in[1 << 18];
  size_t have = 0;
  unsigned sent = 0, replies = 0, most_behind = 0;
  while (replies < TOTAL && xpd_now_ms() < end) {
    while (sent < TOTAL && sent - replies < AHEAD) {
      send_bytes(fd, reqs, sizeof reqs);
      sent += BATCH;
    }
    if (sent - replies > most_behind)
      most_behind = sent - replies;
    /* about 32 MB/s: slower than the daemon answers STATS */
    sleep_ms(1);
    struct pollfd p = {fd, POLLIN, 0};
    poll(&p, 1, 1000);
    size_t room = sizeof in - have < CHUNK ? sizeof in - have : CHUNK;
    ssize_t n = recv(fd, in + have, room, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      fail_msg("the daemon closed a client that reads its replies");
    if (n < 0)
      continue;
    have += (size_t)n;
    size_t at = 0;
    while (have - at >= XPD_HEADER) {
      size_t len = (size_t)in[at + 12] | (size_t)in[at + 13] << 8 |
                   (size_t)in[at + 14] << 16 | (size_t)in[at + 15] << 24;
      assert_int_equal(in[at + 5], XPD_STATS_REPLY);
      if (have - at < XPD_HEADER + len)
        break;
      at += XPD_HEADER + len;
      replies++;
    }
    memmove(in, in + at, have - at);
    have -= at;
  }
  uint64_t hwm = vm_hwm_kb(d.pid);
  print_message("%u replies in %llu ms, up to %u behind; daemon RSS %llu "
                "kB, peak %llu kB\n",
                replies, (unsigned long long)(xpd_now_ms() - t0),
                most_behind, (unsigned long long)rss0,
                (unsigned long long)hwm);
  assert_int_equal(replies, TOTAL);
  close(fd);
  /* 2048 replies of about 1 KB are unread at most */
  if (hwm > rss0 + 16 * 1024)
    fail_msg("the daemon's memory grew by %llu kB for a client never more "
             "than %u replies behind",
             (unsigned long long)(hwm - rss0), most_behind);
  check_serves(&d);
  dmn_stop(&d);
}

/* CPU time pid has used (user and system), in ms. */
static uint64_t cpu_ms(pid_t pid) {
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
  const char *s = strrchr(slurp(p), ')');
  unsigned long long ut = 0, stime = 0;
  if (!s || sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                          "%llu %llu", &ut, &stime) != 2)
    fail_msg("cannot read the CPU time of pid %d", (int)pid);
  return (ut + stime) * 1000 / (uint64_t)sysconf(_SC_CLK_TCK);
}

/* Reads one reply of operation op and id on fd within ms; its payload
 * decoded into m (free *pl). */
static void expect_reply(int fd, xpd_op op, uint32_t id, unsigned ms,
                         uint8_t **pl, xpd_msg *m) {
  xpd_header h = read_reply(fd, ms, pl, m);
  if (h.op != op || h.id != id)
    fail_msg("expected operation %u for id %u, got operation %u for id %u",
             op, id, h.op, h.id);
}

/* A client that sends its requests and then shuts down its writing side
 * (shutdown(SHUT_WR), as an HTTP client may) gets every answer, then the
 * end of file: the answers given at once, a GET parsed and compiled, a
 * LOOKUP. One whose GET waits for a long compile stays open until it is
 * answered, no longer, and costs no CPU meanwhile (its end of file is
 * not read again and again); one that closes altogether is closed at
 * once, and its queued compile dropped. (The daemon closed a connection
 * at its end of file: a GET sent before it was never answered; found by
 * an outside probe.) */
static void test_half_close(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, "hang:slow",
            (const char *const[]){"--workers", "1", "--grace", "0", NULL});
  /* HELLO, PING and a GET, in one write, and the end */
  int fd = raw_client(&d);
  xpd_buf b = {0};
  put_hello(&b, 1);
  assert_true(xpd_end(&b, 0));
  size_t at = b.len;
  xpd_begin(&b, XPD_PING, 2);
  assert_true(xpd_end(&b, at));
  at = b.len;
  build_get(&b, 3, "saxpy", 0);
  assert_true(xpd_end(&b, at));
  send_bytes(fd, b.p, b.len);
  xpd_buf_free(&b);
  assert_int_equal(shutdown(fd, SHUT_WR), 0);
  uint8_t *pl = NULL;
  xpd_msg m;
  expect_reply(fd, XPD_WELCOME, 1, 5000, &pl, &m);
  free(pl);
  expect_reply(fd, XPD_PONG, 2, 5000, &pl, &m);
  free(pl);
  kreply r;
  read_kernel(fd, 3, 60000, &r, xpd_now_ms());
  assert_int_equal(r.k.v.failed, 0);
  assert_true(r.k.v.size > 0);
  assert_int_equal(r.k.origin, XPD_FROM_COMPILED);
  if (!closed_within(fd, 5000))
    fail_msg("a half-closed connection stayed open once answered");
  close(fd);
  /* a LOOKUP of it and a PING, after the handshake */
  fd = client(&d);
  xpd_lookup l = {.timeout_ms = 0};
  memcpy(l.digest, r.k.digest, sizeof l.digest);
  xpd_begin(&b, XPD_LOOKUP, 4);
  xpd_put_lookup(&b, &l);
  assert_true(xpd_end(&b, 0));
  at = b.len;
  xpd_begin(&b, XPD_PING, 5);
  assert_true(xpd_end(&b, at));
  send_bytes(fd, b.p, b.len);
  xpd_buf_free(&b);
  assert_int_equal(shutdown(fd, SHUT_WR), 0);
  read_kernel(fd, 4, 5000, &r, xpd_now_ms());
  assert_int_equal(r.k.origin, XPD_FROM_MEMORY);
  expect_reply(fd, XPD_PONG, 5, 5000, &pl, &m);
  free(pl);
  if (!closed_within(fd, 5000))
    fail_msg("a half-closed connection stayed open once answered");
  close(fd);

  /* a GET whose compile hangs (stopped 5 s after its 300 ms), the end */
  fd = client(&d);
  build_get(&b, 6, "slow", 300);
  send_frame(fd, &b);
  assert_int_equal(shutdown(fd, SHUT_WR), 0);
  assert_int_equal(stat_reaches(&d, "workers_busy", 1, 30000), 1);
  uint64_t t0 = xpd_now_ms(), cpu0 = cpu_ms(d.pid);
  /* meanwhile one that closes altogether goes at once, with its queued
   * compile */
  int gone = client(&d);
  build_get_dt(&b, 7, "slow", "f64", 300);
  send_frame(gone, &b);
  assert_int_equal(stat_reaches(&d, "queue", 1, 30000), 1);
  close(gone);
  assert_int_equal(stat_reaches(&d, "jobs_dropped", 1, 2000), 1);
  /* the half-closed one and the STATS connection asking */
  assert_int_equal(stat_reaches(&d, "connections", 2, 2000), 2);
  read_kernel(fd, 6, 20000, &r, t0);
  uint64_t cpu = cpu_ms(d.pid) - cpu0;
  print_message("the half-closed GET answered after %llu ms; the daemon "
                "used %llu ms of CPU meanwhile\n",
                (unsigned long long)r.ms, (unsigned long long)cpu);
  assert_int_equal(r.k.v.failed, 1);
  assert_non_null(strstr(r.log, "300 ms"));
  if (!closed_within(fd, 5000))
    fail_msg("a half-closed connection stayed open once answered");
  close(fd);
  assert_int_equal(stat_reaches(&d, "connections", 1, 2000), 1);
  if (cpu > r.ms / 4)
    fail_msg("the daemon used %llu ms of CPU in %llu ms with a half-closed "
             "connection waiting", (unsigned long long)cpu,
             (unsigned long long)r.ms);

  /* a half-closed connection whose client then goes altogether: closed
   * at once, not when its compile ends */
  fd = client(&d);
  build_get_dt(&b, 8, "slow", "i32", 300);
  send_frame(fd, &b);
  assert_int_equal(stat_reaches(&d, "workers_busy", 1, 30000), 1);
  assert_int_equal(shutdown(fd, SHUT_WR), 0);
  sleep_ms(200);
  assert_int_equal(stat1(&d, "connections"), 2);
  close(fd);
  assert_int_equal(stat_reaches(&d, "connections", 1, 2000), 1);
  assert_int_equal(stat1(&d, "workers_busy"), 1); /* it hangs on */
  check_serves(&d);
  dmn_stop(&d);
}

/* A thousand connections at once, each HELLO and PING; another client is
 * served meanwhile. */
static void test_thousand_connections(void **state) {
  (void)state;
  enum { N = 1000 };
  struct rlimit rl;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
  if (rl.rlim_cur < N + 64) {
    if (rl.rlim_max < N + 64) {
      print_message("skipped: RLIMIT_NOFILE hard limit %llu\n",
                    (unsigned long long)rl.rlim_max);
      skip();
    }
    rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
  }
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  static int fds[N];
  for (int i = 0; i < N; i++)
    fds[i] = raw_client(&d);
  uint8_t hello[256], ping[XPD_HEADER];
  xpd_buf b = {0};
  put_hello(&b, 1);
  assert_true(xpd_end(&b, 0));
  assert_true(b.len <= sizeof hello);
  size_t hello_len = b.len;
  memcpy(hello, b.p, b.len);
  xpd_buf_free(&b);
  xpd_begin(&b, XPD_PING, 2);
  assert_true(xpd_end(&b, 0));
  memcpy(ping, b.p, XPD_HEADER);
  xpd_buf_free(&b);
  for (int i = 0; i < N; i++)
    send_bytes(fds[i], hello, hello_len);
  for (int i = 0; i < N; i++) {
    uint8_t *pl = NULL;
    xpd_msg m;
    assert_int_equal(read_reply(fds[i], 30000, &pl, &m).op, XPD_WELCOME);
    free(pl);
  }
  for (int i = 0; i < N; i++)
    send_bytes(fds[i], ping, sizeof ping);
  check_serves(&d); /* while the thousand wait for their PONGs */
  for (int i = 0; i < N; i++) {
    uint8_t *pl = NULL;
    xpd_msg m;
    xpd_header h = read_reply(fds[i], 30000, &pl, &m);
    assert_int_equal(h.op, XPD_PONG);
    assert_int_equal(h.id, 2);
    free(pl);
  }
  stats s;
  get_stats(&d, &s);
  assert_true(stat_field(&s, "connections") >= N);
  assert_int_equal(stat_field(&s, "refused_busy"), 0);
  for (int i = 0; i < N; i++)
    close(fds[i]);
  assert_int_equal(stat_reaches(&d, "connections", 1, 10000), 1);
  check_serves(&d);
  dmn_stop(&d);
}

/* Connections that announce payloads up to the 1 GiB budget for payload
 * buffers (docs/protocol.md) and send none of it: new frames may be
 * refused meanwhile, but the reply of a compile worker that is already
 * at work must not be (it is the daemon's own, not a client's). */
static void test_claimed_payloads(void **state) {
  (void)state;
  enum { HOGS = 80 }; /* 80 x 16 MiB > 1 GiB */
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, (const char *const[]){"--workers", "1", NULL});
  /* a compile on its way: its worker answers after the hogs are in */
  int fd = client(&d);
  xpd_buf b = {0};
  build_get(&b, 3, "slow", 0);
  uint64_t t0 = xpd_now_ms();
  send_frame(fd, &b);
  static int hogs[HOGS];
  uint8_t h[16];
  header(h, "XPJD", XPD_VERSION, XPD_GET, 0, XPD_MAX_REQUEST);
  for (int i = 0; i < HOGS; i++) {
    hogs[i] = raw_client(&d);
    send_bytes(hogs[i], h, sizeof h);
  }
  kreply r;
  read_kernel(fd, 3, 30000, &r, t0);
  close(fd);
  for (int i = 0; i < HOGS; i++)
    close(hogs[i]);
  if (r.k.v.failed)
    fail_msg("a compile failed while clients held payload buffers: %s",
             r.log);
  assert_int_equal(stat1(&d, "worker_crashes"), 0);
  check_serves(&d);
  dmn_stop(&d);
}

/* STATS with long strings in it (a cache path of 3,600 bytes): the text
 * is cut or grown, never read past its buffer. */
static void test_stats_long_cache_path(void **state) {
  (void)state;
  /* under a regular file: the cache cannot open and stays off, its path
   * is still reported */
  int n = snprintf(cache_dir, sizeof cache_dir, "%s/file", base);
  int f = open(cache_dir, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  assert_true(f >= 0);
  close(f);
  while (n < 3600)
    n += snprintf(cache_dir + n, sizeof cache_dir - (size_t)n,
                  "/%0200d", n);
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  int fd = client(&d);
  send_op(fd, XPD_STATS, 9);
  uint8_t *pl = NULL;
  xpd_msg m;
  xpd_header h = read_reply(fd, 5000, &pl, &m);
  assert_int_equal(h.op, XPD_STATS_REPLY);
  const uint8_t *t;
  size_t len;
  assert_int_equal(xpd_get_bytes(&m, XPD_F_TEXT, false, 1u << 20, &t, &len),
                   XPD_E_OK);
  print_message("STATS text of %zu bytes\n", len);
  /* text only, every line "name value" */
  if (memchr(t, 0, len))
    fail_msg("the STATS text has a NUL byte at %zu of %zu: bytes from "
             "past its buffer",
             (size_t)((const uint8_t *)memchr(t, 0, len) - t), len);
  free(pl);
  close(fd);
  check_serves(&d);
  dmn_stop(&d);
}

/* Requests for one kernel while it compiles (pipelined on one connection
 * and from another) share the compile: one compile, one reply each, the
 * one that started it told so. A PING behind them is not held up. */
static void test_single_flight(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  int fa = raw_client(&d);
  xpd_buf b = {0};
  put_hello(&b, 1);
  assert_true(xpd_end(&b, 0));
  static const uint32_t ids[] = {2, 3, 5};
  for (size_t i = 0; i < 3; i++) {
    size_t at = b.len;
    if (i == 2) { /* a PING between the GETs */
      xpd_begin(&b, XPD_PING, 4);
      assert_true(xpd_end(&b, at));
      at = b.len;
    }
    xpd_buf g = {0};
    build_get(&g, ids[i], "slow", 0);
    assert_true(xpd_end(&g, 0));
    xpd_put_bytes(&b, 0, g.p, g.len); /* then drop the field header */
    memmove(b.p + at, b.p + at + 6, g.len);
    b.len = at + g.len;
    xpd_buf_free(&g);
  }
  send_bytes(fa, b.p, b.len); /* all in one write */
  xpd_buf_free(&b);
  int fb = client(&d);
  build_get(&b, 6, "slow", 0);
  send_frame(fb, &b);
  uint8_t *pl = NULL;
  xpd_msg m;
  xpd_header h = read_reply(fa, 5000, &pl, &m);
  assert_int_equal(h.op, XPD_WELCOME);
  free(pl);
  h = read_reply(fa, 5000, &pl, &m);
  free(pl);
  if (h.op != XPD_PONG)
    fail_msg("the PING waited behind the GETs (got operation %u)", h.op);
  uint64_t origin[8] = {0};
  unsigned compiled = 0, waited = 0;
  for (int i = 0; i < 4; i++) {
    int fd = i < 3 ? fa : fb;
    h = read_reply(fd, 30000, &pl, &m);
    assert_int_equal(h.op, XPD_KERNEL);
    assert_true(h.id >= 2 && h.id <= 6 && h.id != 4);
    xpd_kernel k;
    assert_int_equal(xpd_kernel_decode(&m, &k), XPD_E_OK);
    assert_int_equal(k.v.failed, 0);
    assert_true(k.v.size > 0);
    origin[h.id] = k.origin;
    compiled += k.origin == XPD_FROM_COMPILED;
    waited += k.origin == XPD_FROM_WAITED;
    free(pl);
  }
  close(fa);
  close(fb);
  stats s;
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "compiles"), 1);
  assert_int_equal(stat_field(&s, "coalesced"), 3);
  assert_int_equal(compiled, 1);
  assert_int_equal(waited, 3);
  if (origin[2] != XPD_FROM_COMPILED)
    fail_msg("the GET that started the compile was told origin %llu; "
             "COMPILED went to id %d",
             (unsigned long long)origin[2],
             origin[3] == XPD_FROM_COMPILED   ? 3
             : origin[5] == XPD_FROM_COMPILED ? 5
                                              : 6);
  dmn_stop(&d);
}

/* 256 GETs may wait on one connection; the 257th is refused. (Another
 * process starts the compile first, so that every GET of the test waits
 * on it at once: GETs keyed on a parse thread count as waiting too.) */
static void test_outstanding_limit(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, "hang:slow",
            (const char *const[]){"--workers", "2", "--grace", "0", NULL});
  int first = other_client(&d);
  xpd_buf fb0 = {0};
  build_get(&fb0, 1, "slow", 0);
  send_frame(first, &fb0);
  assert_int_equal(stat_reaches(&d, "workers_busy", 1, 30000), 1);
  int fd = client(&d);
  xpd_buf b = {0};
  for (uint32_t id = 1; id <= 257; id++) {
    size_t at = b.len;
    xpd_buf g = {0};
    build_get(&g, id, "slow", 0);
    assert_true(xpd_end(&g, 0));
    xpd_put_bytes(&b, 0, g.p, g.len);
    assert_false(b.oom);
    memmove(b.p + at, b.p + at + 6, g.len);
    b.len = at + g.len;
    xpd_buf_free(&g);
  }
  send_bytes(fd, b.p, b.len);
  xpd_buf_free(&b);
  assert_non_null(strstr(expect_error_close(fd, "257 GETs waiting"),
                         "outstanding"));
  check_serves(&d); /* the other worker */
  stats s;
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "coalesced"), 256);
  assert_int_equal(stat_field(&s, "malformed_frames"), 1);
  /* the limit is the process's, over all its connections */
  int fa = client(&d), fb = client(&d);
  for (uint32_t id = 1; id <= 257; id++) {
    build_get(&b, id, "slow", 0);
    send_frame(id <= 200 ? fa : fb, &b);
    if (id == 256)
      assert_int_equal(stat_reaches(&d, "coalesced", 256 + 256, 5000),
                       256 + 256);
  }
  assert_non_null(strstr(expect_error_close(fb, "the process's 257th GET"),
                         "outstanding"));
  close(fa);
  close(first);
  dmn_stop(&d);
}

/* --max-connections: the one too many gets an ERROR; out of descriptors:
 * connections are dropped, never the daemon. */
static void test_connection_limits(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, (const char *const[]){"--max-connections", "4",
                                            NULL});
  int fds[4];
  for (int i = 0; i < 4; i++)
    fds[i] = client(&d);
  const char *msg = expect_error_close(raw_client(&d), "a fifth client");
  assert_non_null(strstr(msg, "too many"));
  /* the refusals are in the log too, not a line each */
  for (int i = 0; i < 20; i++)
    expect_error_close(raw_client(&d), "one more client");
  unsigned lines = log_lines(&d, "too many connections");
  print_message("21 connections refused: %u log lines\n", lines);
  assert_true(lines >= 1 && lines <= 2);
  for (int i = 0; i < 4; i++)
    close(fds[i]);
  uint64_t end = xpd_now_ms() + 5000;
  while (!ping_once(d.sock) && xpd_now_ms() < end)
    sleep_ms(20);
  check_serves(&d);
  assert_true(stat1(&d, "refused_busy") >= 1); /* our retries may count */
  dmn_stop(&d);

  /* 64 descriptors, 100 clients (warnings off: a flood of them would say
   * what went wrong) */
  enum { N = 100 };
  nofile = 64;
  dmn_init(&d, "t");
  make_dir(&d);
  dmn_start(&d, NULL, (const char *const[]){"--log-level", "error", NULL});
  static int many[N];
  for (int i = 0; i < N; i++)
    many[i] = raw_client(&d); /* a Unix connect does not wait for accept */
  /* the daemon lowers --max-connections to what its descriptors allow,
   * so the clients past it get a "too many connections" ERROR, then the
   * close; any beyond the backlog are dropped */
  unsigned dropped = 0;
  for (int i = 0; i < N; i++) {
    char buf[512];
    size_t got = 0;
    bool eof = false;
    uint64_t until = xpd_now_ms() + 1000;
    while (!eof && xpd_now_ms() < until) {
      struct pollfd p = {many[i], POLLIN, 0};
      if (poll(&p, 1, 50) <= 0)
        continue;
      ssize_t n = recv(many[i], buf + got, sizeof buf - got, MSG_DONTWAIT);
      if (n > 0)
        got += (size_t)n;
      else if (n == 0 || (errno != EAGAIN && errno != EINTR))
        eof = true;
    }
    if (got) { /* refused with a reason */
      xpd_header h;
      assert_int_equal(xpd_header_decode((const uint8_t *)buf, got,
                                         XPD_MAX_REPLY, &h),
                       XPD_E_OK);
      assert_int_equal(h.op, XPD_ERROR);
      bool named = false;
      for (size_t at = 0; at + 8 <= got && !named; at++)
        named = !memcmp(buf + at, "too many", 8);
      assert_true(named);
    }
    dropped += eof;
  }
  print_message("out of descriptors: %u of %d connections refused\n",
                dropped, N);
  assert_true(dropped > 0);
  for (int i = 0; i < N; i++)
    close(many[i]);
  end = xpd_now_ms() + 5000;
  bool back = false;
  while (!(back = ping_once(d.sock)) && xpd_now_ms() < end)
    sleep_ms(20);
  if (!back)
    fail_msg("the daemon no longer serves once its clients have gone "
             "(refused_busy keeps growing: it spins in accept_all)");
  check_serves(&d);
  assert_true(stat1(&d, "refused_busy") >= 1);
  dmn_stop(&d);
}

/* ---- compile worker faults ---- */

static void test_worker_crash(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, "crash:boom", (const char *const[]){"--workers", "1", NULL});
  int fd = client(&d);
  for (int round = 1; round <= 2; round++) { /* transient: not cached */
    kreply r;
    get_kernel(fd, "boom", &r);
    assert_int_equal(r.k.v.failed, 1);
    assert_int_equal(r.k.transient, 1);
    assert_true(r.k.status != 0);
    if (!strstr(r.log, "boom"))
      fail_msg("the failure does not name the kernel: '%s'", r.log);
    print_message("crash reply: %s\n", r.log);
    assert_int_equal(stat1(&d, "worker_crashes"), (uint64_t)round);
  }
  kreply r;
  get_kernel(fd, "saxpy", &r);
  assert_int_equal(r.k.v.failed, 0);
  assert_true(r.k.v.size > 0);
  close(fd);
  stats s;
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "worker_crashes"), 2);
  assert_int_equal(stat_field(&s, "worker_spawns"), 3);
  assert_int_equal(stat_field(&s, "compile_transient"), 2);
  dmn_stop(&d);

  /* a worker that exits instead */
  dmn_init(&d, "t");
  make_dir(&d);
  dmn_start(&d, "exit:boom", (const char *const[]){"--workers", "1", NULL});
  fd = client(&d);
  get_kernel(fd, "boom", &r);
  assert_int_equal(r.k.v.failed, 1);
  assert_int_equal(r.k.transient, 1);
  assert_non_null(strstr(r.log, "boom"));
  get_kernel(fd, "saxpy", &r);
  assert_int_equal(r.k.v.failed, 0);
  close(fd);
  assert_int_equal(stat1(&d, "worker_crashes"), 1);
  dmn_stop(&d);
}

static void test_worker_hang(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, "hang:slow",
            (const char *const[]){"--workers", "1", "--compile-timeout",
                                  "500", "--failure-ttl", "0", NULL});
  int fd = client(&d);
  kreply r;
  get_kernel(fd, "slow", &r);
  print_message("hung compile answered after %llu ms: %s\n",
                (unsigned long long)r.ms, r.log);
  assert_int_equal(r.k.v.failed, 1);
  assert_int_equal(r.k.transient, 1);
  assert_true(r.log[0] != 0);
  assert_true(r.ms >= 500);
  assert_true(r.ms < 30000);
  stats s;
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "worker_timeouts"), 1);
  assert_int_equal(stat_field(&s, "worker_crashes"), 0);
  get_kernel(fd, "saxpy", &r);
  assert_int_equal(r.k.v.failed, 0);
  close(fd);
  dmn_stop(&d);
}

/* Process pid's name, state and parent from /proc/PID/stat; false when
 * it is gone or cannot be read. */
static bool proc_stat(const char *pid, char comm[64], char *st, int *ppid) {
  char path[300], buf[512];
  snprintf(path, sizeof path, "/proc/%s/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *open_ = strchr(buf, '('), *close_ = strrchr(buf, ')');
  if (!open_ || !close_ || close_ < open_ ||
      sscanf(close_ + 1, " %c %d", st, ppid) != 2)
    return false;
  snprintf(comm, 64, "%.*s", (int)(close_ - open_ - 1), open_ + 1);
  return true;
}

/* The pid of a live process called xpjitd-worker whose parent is ppid, or
 * 0 (a zombie counts as gone). */
static pid_t worker_of(pid_t ppid) {
  DIR *dd = opendir("/proc");
  assert_non_null(dd);
  pid_t found = 0;
  struct dirent *e;
  char comm[64], st;
  int pp;
  while (!found && (e = readdir(dd)))
    if (proc_stat(e->d_name, comm, &st, &pp) &&
        !strcmp(comm, "xpjitd-worker") && st != 'Z' && st != 'X' &&
        pp == ppid)
      found = (pid_t)atoi(e->d_name);
  closedir(dd);
  return found;
}

static bool pid_alive(pid_t pid) {
  char p[24], comm[64], st;
  int pp;
  snprintf(p, sizeof p, "%d", (int)pid);
  return proc_stat(p, comm, &st, &pp) && st != 'Z' && st != 'X';
}

/* A daemon killed while its worker is in a compile that never ends takes
 * the worker with it (PR_SET_PDEATHSIG): it was left running, re-parented
 * (an adversarial review, with the hang hook; a compile that loops in
 * LLVM would have burnt a CPU for good). */
static void test_worker_ends_with_daemon(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "w");
  make_dir(&d);
  dmn_start(&d, "hang:slow",
            (const char *const[]){"--workers", "1", "--compile-timeout",
                                  "60000", "--failure-ttl", "0", NULL});
  int fd = client(&d);
  xpd_buf b = {0};
  build_get(&b, 42, "slow", 0);
  send_frame(fd, &b);
  pid_t w = 0;
  for (int i = 0; i < 1000 && !(w = worker_of(d.pid)); i++)
    sleep_ms(10);
  assert_true(w > 0);
  sleep_ms(200); /* in its hang by now */
  kill(d.pid, SIGKILL);
  bool gone = false;
  for (int i = 0; i < 500 && !(gone = !pid_alive(w)); i++)
    sleep_ms(10);
  if (!gone)
    kill(w, SIGKILL);
  close(fd);
  dmn_exit(&d, 5000);
  assert_true(gone);
}

/* ---- what a client can cost the others ---- */

/* The daemon's binary deleted under it, as a package upgrade does: its
 * workers still start (from the image it runs), and GETs are served. */
static void copy_file(const char *from, const char *to, mode_t mode) {
  int in = open(from, O_RDONLY | O_CLOEXEC);
  int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  assert_true(in >= 0 && out >= 0);
  char buf[65536];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0)
    assert_int_equal(write(out, buf, (size_t)n), n);
  close(in);
  close(out);
}

static void test_binary_deleted(void **state) {
  (void)state;
  /* an installed daemon and its LLVM plugin (bin/, lib/), both gone
   * after the start: its workers run its image and load the plugin it
   * opened then */
  char dir[600], plugin[700], from[600];
  snprintf(dir, sizeof dir, "%s/bin", base);
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(dir, sizeof dir, "%s/lib", base);
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(exe, sizeof exe, "%s/bin/xpjitd-copy", base);
  snprintf(plugin, sizeof plugin, "%s/libxpjit-llvm.so.0", dir);
  const char *bd = getenv("BUILD");
  snprintf(from, sizeof from, "%s/lib/libxpjit-llvm.so.0",
           bd && *bd ? bd : "build");
  copy_file(daemon_path(), exe, 0700);
  copy_file(from, plugin, 0600);
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, (const char *const[]){"--workers", "1", NULL});
  assert_int_equal(unlink(exe), 0);
  assert_int_equal(unlink(plugin), 0);
  int fd = client(&d);
  xpd_buf b = {0};
  build_get(&b, 7, "saxpy", 0);
  uint64_t t0 = xpd_now_ms();
  send_frame(fd, &b);
  kreply r;
  read_kernel(fd, 7, 20000, &r, t0);
  close(fd);
  if (r.k.v.failed)
    fail_msg("with its binary deleted: %s", r.log);
  assert_true(r.k.v.size > 0);
  assert_int_equal(log_lines(&d, "cannot start"), 0);
  dmn_stop(&d);
}

/* No worker can start (the daemon is out of descriptors): GETs are
 * answered at once with a transient failure (clients compile themselves),
 * the log says so a bounded number of times, nothing stays queued; once
 * descriptors are back, a worker starts again. */
static void test_spawn_failure(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, "crash:boom", (const char *const[]){"--workers", "1", NULL});
  int fd = client(&d);
  kreply r;
  get_kernel(fd, "saxpy", &r); /* the cache file opened, a worker started */
  assert_int_equal(r.k.v.failed, 0);
  get_kernel(fd, "boom", &r); /* and gone: the next job needs a new one */
  assert_int_equal(r.k.transient, 1);
  close(fd);
  sleep_ms(300); /* the daemon has closed its side */
  struct rlimit old;
  assert_int_equal(prlimit(d.pid, RLIMIT_NOFILE, NULL, &old), 0);
  /* room for this client's connection and one more, not for a worker's
   * socket pair besides */
  struct rlimit low = {nofile_with_room(d.pid, 2), old.rlim_max};
  assert_int_equal(prlimit(d.pid, RLIMIT_NOFILE, &low, NULL), 0);
  fd = client(&d);
  static const char *const dts[] = {"f64", "i32", "i64", "u32"};
  for (uint32_t i = 0; i < 4; i++) {
    xpd_buf b = {0};
    build_get_dt(&b, 10 + i, "saxpy", dts[i], 0);
    uint64_t t0 = xpd_now_ms();
    send_frame(fd, &b);
    read_kernel(fd, 10 + i, 5000, &r, t0);
    print_message("no worker can start: answered in %llu ms: %s\n",
                  (unsigned long long)r.ms, r.log);
    assert_int_equal(r.k.v.failed, 1);
    assert_int_equal(r.k.transient, 1);
    assert_true(r.ms < 2000);
    assert_non_null(strstr(r.log, "worker"));
  }
  assert_int_equal(stat1(&d, "queue"), 0);
  close(fd);
  unsigned lines = log_lines(&d, "cannot start a compiler worker");
  print_message("%u log lines about it\n", lines);
  assert_true(lines >= 1 && lines <= 3);
  /* descriptors back: a worker starts on a later try */
  assert_int_equal(prlimit(d.pid, RLIMIT_NOFILE, &old, NULL), 0);
  uint64_t end = xpd_now_ms() + 20000;
  bool served = false;
  while (!served && xpd_now_ms() < end) {
    fd = client(&d);
    xpd_buf b = {0};
    build_get_dt(&b, 20, "saxpy", "f64", 0); /* failed, not remembered */
    uint64_t t0 = xpd_now_ms();
    send_frame(fd, &b);
    read_kernel(fd, 20, 60000, &r, t0);
    close(fd);
    served = !r.k.v.failed;
    if (!served)
      sleep_ms(100);
  }
  assert_true(served);
  assert_int_equal(stat1(&d, "worker_spawns"), 2);
  dmn_stop(&d);
}

/* A client that leaves while its compile is still queued: the job goes
 * with it, unless another client waits for the same kernel. */
static void test_queued_job_dropped(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, "hang:slow",
            (const char *const[]){"--workers", "1", "--grace", "0", NULL});
  int fa = client(&d), fb = client(&d), fc = client(&d);
  xpd_buf b = {0};
  build_get(&b, 1, "slow", 0); /* takes the worker for good */
  send_frame(fa, &b);
  assert_int_equal(stat_reaches(&d, "workers_busy", 1, 10000), 1);
  build_get(&b, 2, "saxpy", 0); /* queued behind it */
  send_frame(fb, &b);
  assert_int_equal(stat_reaches(&d, "queue", 1, 5000), 1);
  build_get(&b, 3, "saxpy", 0); /* waits for the same */
  send_frame(fc, &b);
  assert_int_equal(stat_reaches(&d, "coalesced", 1, 5000), 1);
  close(fb);
  sleep_ms(300);
  assert_int_equal(stat1(&d, "queue"), 1); /* fc still waits */
  close(fc);
  assert_int_equal(stat_reaches(&d, "queue", 0, 3000), 0);
  assert_int_equal(stat1(&d, "jobs_dropped"), 1);
  close(fa);
  dmn_stop(&d);
}

/* A kernel another process has queued behind others is compiled sooner
 * when this one asks for it too: the job moves to the shorter queue. */
static void test_coalesced_moves_up(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, "hang:slow",
            (const char *const[]){"--workers", "1", "--grace", "0",
                                  "--compile-timeout", "1000", NULL});
  uint64_t held0 = stat1(&d, "client_bytes"); /* the STATS client's own */
  int fa = client(&d);
  xpd_buf b = {0};
  build_get(&b, 1, "slow", 0); /* the worker, for 6 s */
  send_frame(fa, &b);
  assert_int_equal(stat_reaches(&d, "workers_busy", 1, 10000), 1);
  static const char *const dts[] = {"f64", "i32", "i64"};
  for (uint32_t i = 0; i < 3; i++) { /* queued behind it */
    build_get_dt(&b, 2 + i, "saxpy", dts[i], 0);
    send_frame(fa, &b);
  }
  assert_int_equal(stat_reaches(&d, "queue", 3, 5000), 3);
  int fb = other_client(&d);
  build_get_dt(&b, 9, "saxpy", "i64", 0); /* the last of them */
  uint64_t t0 = xpd_now_ms();
  send_frame(fb, &b);
  kreply r;
  read_kernel(fb, 9, 20000, &r, t0);
  assert_int_equal(r.k.v.failed, 0);
  print_message("asked for the third in another process's queue: %llu ms "
                "(one stopped compile ahead)\n", (unsigned long long)r.ms);
  /* first answered there: the stopped one, then that same kernel */
  uint8_t *pl = NULL;
  xpd_msg m;
  assert_int_equal(read_reply(fa, 5000, &pl, &m).id, 1);
  free(pl);
  assert_int_equal(read_reply(fa, 5000, &pl, &m).id, 4);
  free(pl);
  for (int i = 0; i < 2; i++) { /* then the other two */
    assert_int_equal(read_reply(fa, 20000, &pl, &m).op, XPD_KERNEL);
    free(pl);
  }
  close(fb);
  close(fa);
  /* all done: what the clients held is all given back */
  assert_int_equal(stat_reaches(&d, "client_bytes", held0, 3000), held0);
  assert_int_equal(stat1(&d, "clients"), 1); /* the STATS client */
  dmn_stop(&d);
}

/* One process with many slow compiles does not hold up another process's
 * trivial kernel: per-process queues are served in turn, and a process
 * has at most --client-compiles (default: all workers but one) compiles
 * running. */
static void test_fairness(void **state) {
  (void)state;
  static const char *const dts[] = {"f32", "f64", "i32", "i64",
                                    "u32", "u64", "i16", "u16"};
  /* two workers: the busy process takes one, the other is free */
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, "hang:slow",
            (const char *const[]){"--workers", "2", "--grace", "0", NULL});
  int fa = client(&d);
  for (uint32_t i = 0; i < 8; i++) {
    xpd_buf b = {0};
    build_get_dt(&b, 100 + i, "slow", dts[i], 0);
    send_frame(fa, &b);
  }
  assert_true(stat_reaches(&d, "requests", 8, 5000) == 8);
  int fb = other_client(&d);
  xpd_buf b = {0};
  build_get(&b, 1, "saxpy", 0);
  uint64_t t0 = xpd_now_ms();
  send_frame(fb, &b);
  kreply r;
  read_kernel(fb, 1, 10000, &r, t0);
  print_message("2 workers, 8 hung compiles of another process: a trivial "
                "kernel took %llu ms\n", (unsigned long long)r.ms);
  assert_int_equal(r.k.v.failed, 0);
  close(fb);
  close(fa);
  dmn_stop(&d);

  /* one worker: the trivial kernel waits for the one compile running, not
   * for the other process's queue (hung compiles stopped after 1 + 5 s) */
  dmn_init(&d, "t");
  make_dir(&d);
  dmn_start(&d, "hang:slow",
            (const char *const[]){"--workers", "1", "--grace", "0",
                                  "--compile-timeout", "1000", NULL});
  fa = client(&d);
  for (uint32_t i = 0; i < 4; i++) {
    build_get_dt(&b, 100 + i, "slow", dts[i], 0);
    send_frame(fa, &b);
  }
  assert_int_equal(stat_reaches(&d, "workers_busy", 1, 10000), 1);
  fb = other_client(&d);
  build_get_dt(&b, 1, "saxpy", "f64", 0); /* not in the cache file yet */
  t0 = xpd_now_ms();
  send_frame(fb, &b);
  read_kernel(fb, 1, 15000, &r, t0);
  assert_int_equal(r.k.origin, XPD_FROM_COMPILED);
  print_message("1 worker, 4 hung compiles of another process queued: a "
                "trivial kernel took %llu ms\n", (unsigned long long)r.ms);
  assert_int_equal(r.k.v.failed, 0);
  assert_true(r.ms < 9000); /* one stopped compile: 6 s */
  close(fb);
  close(fa);
}

/* Many connections that each send one large source the daemon rejects:
 * the daemon does not keep their sources. */
static void test_memory_rejected_sources(void **state) {
  (void)state;
  enum { CONNS = 48, SRC = 8 << 20 };
  asan_extra = "quarantine_size_mb=4";
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  char *junk = malloc(SRC);
  assert_non_null(junk);
  memset(junk, '@', SRC);
  uint64_t rss0 = vm_rss_kb(d.pid);
  static int fds[CONNS];
  for (int i = 0; i < CONNS; i++) {
    fds[i] = client(&d);
    xpd_buf b = {0};
    build_get_src(&b, 5, junk, SRC, "saxpy", "f32", 0);
    send_frame(fds[i], &b);
    uint8_t *pl = NULL;
    xpd_msg m;
    xpd_header h = read_reply(fds[i], 10000, &pl, &m);
    free(pl);
    assert_int_equal(h.op, XPD_ERROR); /* not a program */
  }
  uint64_t rss1 = vm_rss_kb(d.pid);
  print_message("%d connections, one rejected %d MiB source each: daemon "
                "RSS %llu -> %llu kB\n", CONNS, SRC >> 20,
                (unsigned long long)rss0, (unsigned long long)rss1);
  free(junk);
  check_serves(&d);
  for (int i = 0; i < CONNS; i++)
    close(fds[i]);
  if (rss1 > rss0 + 96 * 1024)
    fail_msg("the daemon grew by %llu kB for %d rejected sources",
             (unsigned long long)(rss1 - rss0), CONNS);
  dmn_stop(&d);
}

/* Memory held for a burst of clients goes back to the system when they
 * leave: 10 connections each 4 MiB into a 16 MiB request (80 MiB held:
 * buffers grow by doubling), then gone. (The heap retention the red team
 * saw after many concurrent 8 MiB sources that parse a long way, 142 MB
 * kept here instead of 59, needs minutes of parsing to show: measured in
 * docs/testing.md, not here.) */
static void test_memory_given_back(void **state) {
  (void)state;
  enum { CONNS = 10, PART = 4 << 20 };
  asan_extra = "quarantine_size_mb=4";
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  uint64_t rss0 = vm_rss_kb(d.pid);
  uint64_t held0 = stat1(&d, "client_bytes"); /* the STATS client's own */
  char *part = malloc(PART);
  assert_non_null(part);
  memset(part, 0, PART);
  static int fds[CONNS];
  for (int i = 0; i < CONNS; i++) {
    fds[i] = client(&d);
    uint8_t h[16];
    header(h, "XPJD", XPD_VERSION, XPD_GET, 0, XPD_MAX_REQUEST);
    send_bytes(fds[i], h, sizeof h);
    if (!xpd_write_all(fds[i], part, PART, xpd_now_ms() + 5000)) {
      uint8_t *pl = NULL;
      xpd_msg m;
      xpd_header rh = read_reply(fds[i], 1000, &pl, &m);
      char msg[512] = "";
      xpd_get_str(&m, XPD_F_MESSAGE, true, msg, sizeof msg);
      fail_msg("connection %d: op %d: %s", i, rh.op, msg);
    }
  }
  uint64_t held = 0;
  for (int t = 0; t < 100 && held < (uint64_t)CONNS * PART; t++) {
    held = stat1(&d, "client_bytes");
    if (held < (uint64_t)CONNS * PART)
      sleep_ms(100);
  }
  assert_true(held >= (uint64_t)CONNS * PART);
  uint64_t rss1 = vm_rss_kb(d.pid);
  for (int i = 0; i < CONNS; i++)
    close(fds[i]);
  free(part);
  assert_int_equal(stat_reaches(&d, "client_bytes", held0, 5000), held0);
  uint64_t rss2 = rss1;
  for (int t = 0; t < 30 && rss2 > rss0 + 16 * 1024; t++) {
    sleep_ms(100);
    rss2 = vm_rss_kb(d.pid);
  }
  print_message("RSS %llu kB, %llu with %d x %d MiB held, %llu after\n",
                (unsigned long long)rss0, (unsigned long long)rss1, CONNS,
                PART >> 20, (unsigned long long)rss2);
  assert_true(rss1 > rss0 + 32 * 1024); /* it was held */
  if (rss2 > rss0 + 16 * 1024)
    fail_msg("the daemon kept %llu kB after the clients left",
             (unsigned long long)(rss2 - rss0));
  check_serves(&d);
  dmn_stop(&d);
}

/* Large payloads announced by one process (64 x 16 MiB: the whole budget,
 * were announcements to count) and then partly sent: another process is
 * still served a large request, and the sender is refused past its share
 * of the budget (1/8: 128 MiB of the default 1 GiB). */
static void test_memory_announced(void **state) {
  (void)state;
  enum { HOGS = 64, SENT = 15 << 20 };
  asan_extra = "quarantine_size_mb=4";
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  uint64_t rss0 = vm_rss_kb(d.pid);
  uint64_t held0 = stat1(&d, "client_bytes"); /* the STATS client's own */
  static int hogs[HOGS];
  for (int i = 0; i < HOGS; i++) {
    hogs[i] = client(&d);
    uint8_t h[16];
    header(h, "XPJD", XPD_VERSION, XPD_GET, 0, XPD_MAX_REQUEST);
    send_bytes(hogs[i], h, sizeof h);
  }
  /* a GET with a source of 1 MiB, from another process */
  size_t pad = 1u << 20, base_len = strlen(kernels_src);
  char *src = malloc(base_len + pad);
  assert_non_null(src);
  memcpy(src, kernels_src, base_len);
  memset(src + base_len, ' ', pad);
  for (size_t at = base_len; at + 80 <= base_len + pad; at += 80) {
    memcpy(src + at, "//", 2);
    src[at + 79] = '\n';
  }
  int fv = other_client(&d);
  xpd_buf b = {0};
  build_get_src(&b, 9, src, base_len + pad, "saxpy", "f32", 0);
  uint64_t t0 = xpd_now_ms();
  send_frame(fv, &b);
  kreply r;
  read_kernel(fv, 9, 30000, &r, t0);
  assert_int_equal(r.k.v.failed, 0);
  /* the hogs send: past its share, this process is refused */
  char *bytes = calloc(1, SENT);
  assert_non_null(bytes);
  int refused = 0, accepted = 0;
  for (int i = 0; i < 12; i++) {
    if (!xpd_write_all(hogs[i], bytes, SENT, xpd_now_ms() + 10000)) {
      refused++;
      continue;
    }
    struct pollfd p = {hogs[i], POLLIN, 0};
    if (poll(&p, 1, 200) == 1)
      refused++; /* an ERROR, then the close */
    else
      accepted++;
  }
  uint64_t rss1 = vm_rss_kb(d.pid);
  print_message("one process announced %d x 16 MiB and sent 15 MiB into "
                "12: %d accepted, %d refused; daemon RSS %llu -> %llu kB\n",
                HOGS, accepted, refused, (unsigned long long)rss0,
                (unsigned long long)rss1);
  assert_true(refused >= 1);
  assert_true(accepted <= 9);
  /* a new announcement by it is refused at once, before any payload */
  int late = client(&d);
  uint8_t h[16];
  header(h, "XPJD", XPD_VERSION, XPD_GET, 0, XPD_MAX_REQUEST);
  send_bytes(late, h, sizeof h);
  expect_error_close(late, "an announcement past the process's share");
  /* the other process is still served a large request */
  build_get_src(&b, 10, src, base_len + pad, "saxpy", "f64", 0);
  t0 = xpd_now_ms();
  send_frame(fv, &b);
  read_kernel(fv, 10, 30000, &r, t0);
  assert_int_equal(r.k.v.failed, 0);
  close(fv);
  free(src);
  free(bytes);
  for (int i = 0; i < HOGS; i++)
    close(hogs[i]);
#ifndef UNDER_TSAN /* its shadow memory grows with what is touched */
  assert_true(rss1 < rss0 + 200 * 1024);
#endif
  check_serves(&d);
  /* what the clients held is all given back */
  assert_int_equal(stat_reaches(&d, "client_bytes", held0, 3000), held0);
  dmn_stop(&d);
}

/* Asks for slow with a 300 ms limit on fd: the reply. */
static void get_slow_300(int fd, uint32_t id, kreply *r) {
  xpd_buf b = {0};
  build_get(&b, id, "slow", 300);
  uint64_t t0 = xpd_now_ms();
  send_frame(fd, &b);
  read_kernel(fd, id, 20000, r, t0);
}

/* A compile that timed out is remembered (--failure-ttl, 10 minutes by
 * default): later requests for it, from any process, are answered at once
 * with the failure, not compiled again; a request that allows a longer
 * compile, or one after the time to live, tries again. */
static void test_remembered_timeout(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, "hang:slow",
            (const char *const[]){"--workers", "2", "--grace", "0", NULL});
  int fd = client(&d);
  kreply r;
  get_slow_300(fd, 1, &r); /* stopped 5 s past its limit */
  print_message("timed out after %llu ms: %s\n", (unsigned long long)r.ms,
                r.log);
  assert_int_equal(r.k.v.failed, 1);
  assert_non_null(strstr(r.log, "300 ms"));
  /* asked again, from this process and from another: at once */
  for (int i = 0; i < 2; i++) {
    int f = i ? other_client(&d) : fd;
    get_slow_300(f, 2, &r);
    print_message("asked again: %llu ms: %s\n", (unsigned long long)r.ms,
                  r.log);
    assert_int_equal(r.k.v.failed, 1);
    assert_int_equal(r.k.transient, 0);
    assert_true(r.ms < 1000);
    assert_non_null(strstr(r.log, "remember"));
    if (i)
      close(f);
  }
  assert_int_equal(stat1(&d, "compiles"), 1);
  /* a longer limit: compiled again (a worker is busy with it) */
  xpd_buf b = {0};
  build_get(&b, 3, "slow", 10000);
  send_frame(fd, &b);
  assert_int_equal(stat_reaches(&d, "workers_busy", 1, 5000), 1);
  close(fd);
  dmn_stop(&d);

  /* the cache file remembers it too: a restarted daemon answers at once */
  dmn_init(&d, "r");
  make_dir(&d);
  dmn_start(&d, "hang:slow",
            (const char *const[]){"--workers", "1", "--grace", "0", NULL});
  fd = client(&d);
  get_slow_300(fd, 1, &r);
  print_message("after a restart: %llu ms: %s\n", (unsigned long long)r.ms,
                r.log);
  assert_int_equal(r.k.v.failed, 1);
  assert_int_equal(r.k.transient, 0);
  assert_true(r.k.expires_ms > 0);
  assert_true(r.ms < 1000);
  assert_int_equal(stat1(&d, "compiles"), 0);
  close(fd);
  dmn_stop(&d);

  /* after --failure-ttl, tried again (a cache file of its own) */
  snprintf(cache_dir, sizeof cache_dir, "%s/cache-ttl", base);
  dmn_init(&d, "t");
  make_dir(&d);
  dmn_start(&d, "hang:slow",
            (const char *const[]){"--workers", "1", "--grace", "0",
                                  "--failure-ttl", "1", NULL});
  fd = client(&d);
  get_slow_300(fd, 1, &r);
  get_slow_300(fd, 2, &r);
  assert_true(r.ms < 1000);
  assert_int_equal(r.k.transient, 0);
  sleep_ms(1100);
  build_get(&b, 3, "slow", 300);
  send_frame(fd, &b);
  assert_int_equal(stat_reaches(&d, "workers_busy", 1, 5000), 1);
  struct pollfd p = {fd, POLLIN, 0};
  assert_int_equal(poll(&p, 1, 300), 0); /* compiling, not answered */
  close(fd);
  dmn_stop(&d);

  /* another process's request that allows longer, waiting on the compile
   * a 300 ms request started: not answered with that timeout (an outside
   * probe's client got it as final, remembered for 10 minutes), but told
   * to compile it itself */
  snprintf(cache_dir, sizeof cache_dir, "%s/cache-w", base);
  dmn_init(&d, "w");
  make_dir(&d);
  dmn_start(&d, "hang:slow",
            (const char *const[]){"--workers", "1", "--grace", "0", NULL});
  fd = client(&d);
  int f2 = other_client(&d);
  xpd_buf_free(&b);
  build_get(&b, 1, "slow", 300);
  send_frame(fd, &b);
  assert_int_equal(stat_reaches(&d, "workers_busy", 1, 5000), 1);
  xpd_buf_free(&b);
  build_get(&b, 2, "slow", 60000);
  send_frame(f2, &b);
  assert_int_equal(stat_reaches(&d, "coalesced", 1, 5000), 1);
  read_kernel(fd, 1, 15000, &r, xpd_now_ms());
  assert_int_equal(r.k.v.failed, 1);
  assert_int_equal(r.k.transient, 0);
  uint8_t *pl = NULL;
  xpd_msg m;
  xpd_header h = read_reply(f2, 15000, &pl, &m);
  char msg[512] = "";
  xpd_get_str(&m, XPD_F_MESSAGE, true, msg, sizeof msg);
  print_message("the request allowing 60 s: op %u: %s\n", h.op, msg);
  assert_int_equal(h.op, XPD_ERROR);
  assert_int_equal(h.id, 2);
  assert_non_null(strstr(msg, "compile it here"));
  free(pl);
  close(f2);
  close(fd);
  xpd_buf_free(&b);
  dmn_stop(&d);
}

/* A remembered timeout at the daemon's own limit, asked for by a client
 * that allows longer: the daemon cannot do better, so it says so (an
 * ERROR: the client compiles it itself) instead of the remembered answer
 * (red team N4b). A client that allows no longer gets the answer. */
static void test_remembered_beyond_limit(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, "hang:slow",
            (const char *const[]){"--workers", "1", "--grace", "0",
                                  "--compile-timeout", "300", NULL});
  int fd = client(&d);
  kreply r;
  get_slow_300(fd, 1, &r); /* remembered, at the daemon's limit */
  assert_int_equal(r.k.v.failed, 1);
  get_slow_300(fd, 2, &r);
  assert_true(r.ms < 1000);
  assert_non_null(strstr(r.log, "remember"));
  for (int round = 0; round < 2; round++) { /* from memory; restarted */
    xpd_buf b = {0};
    build_get(&b, 3, "slow", 60000);
    send_frame(fd, &b);
    uint8_t *pl = NULL;
    xpd_msg m;
    xpd_header h = read_reply(fd, 5000, &pl, &m);
    assert_int_equal(h.id, 3);
    assert_int_equal(h.op, XPD_ERROR);
    char msg[1024] = "";
    xpd_get_str(&m, XPD_F_MESSAGE, true, msg, sizeof msg);
    free(pl);
    if (!strstr(msg, "compile it here"))
      fail_msg("round %d: %s", round, msg);
    assert_int_equal(stat1(&d, "compiles"), round ? 0 : 1);
    if (round)
      break;
    close(fd);
    dmn_stop(&d); /* the cache file remembers the limit too */
    dmn_init(&d, "r");
    make_dir(&d);
    dmn_start(&d, "hang:slow",
              (const char *const[]){"--workers", "1", "--grace", "0",
                                    "--compile-timeout", "300", NULL});
    fd = client(&d);
  }
  close(fd);
  dmn_stop(&d);
}

/* The ERROR message of the reply to id on fd ("" if it is not an ERROR:
 * a KERNEL's failure goes into *r, when given). */
static const char *read_error_or_kernel(int fd, uint32_t id, kreply *r) {
  static char msg[1024];
  msg[0] = 0;
  uint8_t *pl = NULL;
  xpd_msg m;
  xpd_header h = read_reply(fd, 20000, &pl, &m);
  assert_int_equal(h.id, id);
  if (h.op == XPD_ERROR) {
    xpd_get_str(&m, XPD_F_MESSAGE, true, msg, sizeof msg);
  } else {
    assert_int_equal(h.op, XPD_KERNEL);
    assert_int_equal(xpd_kernel_decode(&m, &r->k), XPD_E_OK);
    snprintf(r->log, sizeof r->log, "%.2000s", r->k.v.log);
    r->k.v.data = NULL;
    r->k.v.entry = r->k.v.log = NULL;
  }
  free(pl);
  return msg;
}

/* The same at the daemon's own limit for a request that waited for the
 * compile that ran out: answered as it would be later, one rule for
 * both. The request that allows no longer than the daemon gives gets the
 * remembered failure; the one that allows 60 s, waiting on it, is told
 * to compile it itself, as a later one that allows 60 s is. (The waiter
 * got the failure, as final, while a later request got the ERROR.) */
static void test_remembered_waiter_beyond_limit(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, "hang:slow",
            (const char *const[]){"--workers", "1", "--grace", "0",
                                  "--compile-timeout", "300", NULL});
  int fd = client(&d), f2 = other_client(&d);
  xpd_buf b = {0};
  build_get(&b, 1, "slow", 300);
  send_frame(fd, &b);
  assert_int_equal(stat_reaches(&d, "workers_busy", 1, 30000), 1);
  build_get(&b, 2, "slow", 60000);
  send_frame(f2, &b);
  assert_int_equal(stat_reaches(&d, "coalesced", 1, 5000), 1);
  kreply r;
  memset(&r, 0, sizeof r);
  const char *msg = read_error_or_kernel(fd, 1, &r);
  if (*msg)
    fail_msg("the request that allowed 300 ms: ERROR: %s", msg);
  assert_int_equal(r.k.v.failed, 1);
  assert_int_equal(r.k.transient, 0);
  assert_non_null(strstr(r.log, "remember"));
  msg = read_error_or_kernel(f2, 2, &r);
  print_message("the waiter that allowed 60 s: %s\n", *msg ? msg : r.log);
  if (!strstr(msg, "compile it here"))
    fail_msg("the waiter that allowed 60 s was not told to compile it "
             "itself: %s", *msg ? msg : r.log);
  /* later, on the same connections: the same answers */
  build_get(&b, 3, "slow", 60000);
  send_frame(f2, &b);
  const char *later = read_error_or_kernel(f2, 3, &r);
  if (!strstr(later, "compile it here"))
    fail_msg("a later request that allows 60 s: %s", *later ? later : r.log);
  get_slow_300(fd, 4, &r);
  assert_true(r.ms < 1000);
  assert_non_null(strstr(r.log, "remember"));
  assert_int_equal(stat1(&d, "compiles"), 1);
  close(f2);
  close(fd);
  dmn_stop(&d);
}

/* A worker that reaches its memory limit (XPJIT_COMPILE_MEMORY_LIMIT in
 * the daemon's environment) exits with status 75: that is out of memory,
 * remembered like a timeout, not a crash retried by every request (red
 * team N4c). */
static void test_worker_out_of_memory(void **state) {
  (void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(UNDER_TSAN)
  printf("NOTE: test_worker_out_of_memory skipped under a sanitizer (its "
         "allocator dies before LLVM's out-of-memory handler runs)\n");
  return;
#endif
  dmn d;
  dmn_init(&d, "m");
  make_dir(&d);
  setenv("XPJIT_COMPILE_MEMORY_LIMIT", "1M", 1);
  dmn_start(&d, NULL, (const char *const[]){"--workers", "1", NULL});
  unsetenv("XPJIT_COMPILE_MEMORY_LIMIT");
  int fd = client(&d);
  kreply r;
  get_kernel(fd, "saxpy", &r);
  print_message("out of memory: %s\n", r.log);
  /* decoded as a row keeps it: failed with its status (xpd_failed_input) */
  assert_int_equal(r.k.status, XPJ_ERR_NOMEM);
  assert_int_equal(r.k.v.failed, xpd_failed_input(XPJ_ERR_NOMEM));
  assert_int_equal(r.k.transient, 0);
  assert_non_null(strstr(r.log, "1 MiB of memory"));
  assert_non_null(strstr(r.log, "remember"));
  get_kernel(fd, "saxpy", &r); /* remembered: no second compile */
  assert_true(r.ms < 1000);
  assert_int_equal(stat1(&d, "compiles"), 1);
  assert_int_equal(stat1(&d, "worker_crashes"), 1);
  close(fd);
  dmn_stop(&d);
}

/* A program of about 2 MiB whose kernel k differs by tag (another cache
 * key): 2,500 functions of 200 additions, k calling the first. */
static char *big_program(unsigned tag, size_t *len) {
  enum { FNS = 2500, ADDS = 200 };
  size_t cap = (size_t)FNS * (ADDS * 4 + 80) + 256, n = 0;
  char *s = malloc(cap);
  assert_non_null(s);
  for (unsigned i = 0; i < FNS; i++) {
    n += (size_t)snprintf(s + n, cap - n,
                          "fn g_%u(a: f32) -> f32 {\n    let v = a", i);
    for (unsigned k = 0; k < ADDS; k++)
      n += (size_t)snprintf(s + n, cap - n, " + a");
    n += (size_t)snprintf(s + n, cap - n, ";\n    return v;\n}\n");
  }
  n += (size_t)snprintf(s + n, cap - n,
                        "kernel k(x: global f32[]) range {\n"
                        "    let i = global_id(0);\n"
                        "    x[i] = g_0(x[i]) + %u.0;\n}\n", tag);
  assert_true(n < cap);
  *len = n;
  return s;
}

/* A worker keeps the programs of its last jobs, parsed, but not without
 * bound: it kept eight of any size (8 x 3.3 MiB: 810 MB, for good), and
 * what it keeps counts against its memory limit, so that under a 750 MB
 * limit a program's compile failed "out of memory", remembered for every
 * process, where a fresh worker compiled it (an outside probe). Six
 * programs of 2 MiB, one after the other: the worker's memory after the
 * sixth is about what it was after the second (what it freed is used
 * again), not four programs more. */
static void test_worker_keeps_bounded(void **state) {
  (void)state;
  enum { PROGS = 6 };
  asan_extra = "quarantine_size_mb=4";
  alarm(600); /* twelve parses of 2 MiB, slow under a sanitizer */
  dmn d;
  dmn_init(&d, "w");
  make_dir(&d);
  dmn_start(&d, NULL, (const char *const[]){"--workers", "1", NULL});
  int fd = client(&d);
  uint64_t rss[PROGS + 1] = {0};
  pid_t wp = 0;
  for (unsigned t = 0; t <= PROGS; t++) {
    size_t len;
    char *src = t ? big_program(t, &len) : NULL;
    xpd_buf b = {0};
    if (!t) {
      build_get(&b, 1, "saxpy", 0); /* the worker, started */
    } else { /* k has no type parameters: no dtypes */
      xpd_get g;
      memset(&g, 0, sizeof g);
      g.source = (const uint8_t *)src;
      g.source_len = len;
      snprintf(g.filename, sizeof g.filename, "big%u.xpk", t);
      snprintf(g.kernel, sizeof g.kernel, "k");
      snprintf(g.target, sizeof g.target, "%s", target);
      g.opt_level = 2;
      xpd_begin(&b, XPD_GET, 1);
      xpd_put_get(&b, &g);
    }
    send_frame(fd, &b);
    kreply r;
    read_kernel(fd, 1, 300000, &r, xpd_now_ms());
    free(src);
    if (r.k.v.failed)
      fail_msg("program %u: %s", t, r.log);
    if (!wp)
      wp = worker_of(d.pid);
    assert_true(wp > 0);
    assert_int_equal(worker_of(d.pid), wp); /* the same worker */
    rss[t] = vm_rss_kb(wp);
    print_message("worker RSS after program %u: %llu kB\n", t,
                  (unsigned long long)rss[t]);
  }
  uint64_t one = rss[1] > rss[0] ? rss[1] - rss[0] : 0; /* a program */
  assert_true(one > 8 * 1024);
  uint64_t grew = rss[PROGS] > rss[2] ? rss[PROGS] - rss[2] : 0;
  if (grew > one + one / 2)
    fail_msg("the worker grew by %llu kB over programs 3 to %d (a program "
             "parsed takes %llu kB): it keeps them all",
             (unsigned long long)grew, PROGS, (unsigned long long)one);
  close(fd);
  dmn_stop(&d);
}

/* ---- start-up ---- */

/* The daemon must refuse to start: non-zero exit, message on stderr. */
static void expect_refusal(dmn *d, const char *says) {
  dmn_spawn(d, NULL, NULL);
  int code = dmn_exit(d, 15000);
  const char *err = slurp(d->log);
  if (code <= 0 || code >= 128)
    fail_msg("xpjitd on %s: exit %d, expected a refusal; stderr:\n%s",
             d->sock, code, err);
  if (!strstr(err, says))
    fail_msg("xpjitd on %s: stderr does not say '%s':\n%s", d->sock, says,
             err);
}

static void test_unsafe_socket_dirs(void **state) {
  (void)state;
  dmn d;
  /* a symbolic link to a good directory */
  dmn_init(&d, "real");
  make_dir(&d);
  dmn_init(&d, "link");
  char real[128];
  snprintf(real, sizeof real, "%s/real", base);
  assert_int_equal(symlink(real, d.dir), 0);
  expect_refusal(&d, "symbolic link");
  /* the fix named: someone else may hold the path (an outside probe) */
  expect_refusal(&d, "give --socket a path in a directory of your own, or "
                 "set XDG_RUNTIME_DIR");
  struct stat sb;
  char p[160];
  snprintf(p, sizeof p, "%s/xpjitd.sock", real);
  assert_int_equal(lstat(p, &sb), -1);
  /* writable by the group, by others; the mode said whole (a sticky
   * directory's was "777") */
  static const struct {
    const char *name;
    mode_t mode;
    const char *says;
  } modes[] = {{"g", 0770, "writable by group or others (mode 0770)"},
               {"o", 0703, "writable by group or others (mode 0703)"},
               {"sticky", 01777, "writable by group or others (mode 1777)"}};
  for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
    dmn_init(&d, modes[i].name);
    make_dir(&d);
    assert_int_equal(chmod(d.dir, modes[i].mode), 0);
    expect_refusal(&d, modes[i].says);
    assert_int_equal(lstat(d.sock, &sb), -1);
  }
  /* a regular file where the socket goes */
  dmn_init(&d, "file");
  make_dir(&d);
  int f = open(d.sock, O_WRONLY | O_CREAT, 0600);
  assert_true(f >= 0);
  close(f);
  expect_refusal(&d, "not a socket");
  assert_int_equal(lstat(d.sock, &sb), 0);
  assert_true(S_ISREG(sb.st_mode));
  /* the directory is someone else's */
  if (geteuid() == 0) {
    dmn_init(&d, "nobody");
    make_dir(&d);
    assert_int_equal(chown(d.dir, 65534, 65534), 0);
    expect_refusal(&d, "owned by uid 65534, not by this user (0), who could "
                   "take the socket over; give --socket a path in a "
                   "directory of your own, or set XDG_RUNTIME_DIR");
    /* a socket file of someone else's in a good directory */
    dmn_init(&d, "theirs");
    make_dir(&d);
    int so = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    set_path(&a, d.sock);
    assert_int_equal(bind(so, (struct sockaddr *)&a, sizeof a), 0);
    close(so);
    assert_int_equal(lchown(d.sock, 65534, 65534), 0);
    expect_refusal(&d, "owned by");
    assert_int_equal(lstat(d.sock, &sb), 0);
    assert_int_equal(sb.st_uid, 65534);
  } else {
    print_message("not root: the foreign-owner case is not tried\n");
  }
  /* no socket directory at all is made, private */
  dmn_init(&d, "new");
  dmn_start(&d, NULL, NULL);
  assert_int_equal(stat(d.dir, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0700);
  assert_int_equal(lstat(d.sock, &sb), 0);
  assert_int_equal(sb.st_mode & 0077, 0);
  dmn_stop(&d);
}

/* A socket file nobody serves (its owner died) is replaced. */
static void test_stale_socket(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  set_path(&a, d.sock);
  assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
  close(s);
  dmn_start(&d, NULL, NULL);
  assert_non_null(strstr(slurp(d.log), "stale"));
  check_serves(&d);
  dmn_stop(&d);
  struct stat sb;
  assert_int_equal(lstat(d.sock, &sb), -1); /* removed at exit */
}

/* A live socket is never taken over: neither another xpjitd's nor a
 * stranger's. */
static void test_live_socket(void **state) {
  (void)state;
  dmn d, d2;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  dmn_init(&d2, "s");
  char says[64];
  snprintf(says, sizeof says, "another xpjitd (pid %d)", (int)d.pid);
  expect_refusal(&d2, says);
  assert_true(dmn_serving(&d, 2000));
  check_serves(&d);
  dmn_stop(&d);

  /* a listening socket that is not xpjitd's (no lock file held) */
  dmn_init(&d, "t");
  make_dir(&d);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  set_path(&a, d.sock);
  assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(s, 8), 0);
  expect_refusal(&d, "served by another process");
  int c = raw_connect(d.sock);
  assert_true(c >= 0); /* still ours */
  close(c);
  close(s);
}

/* Daemons started at the same moment on one path: exactly one serves. */
static void test_simultaneous_start(void **state) {
  (void)state;
  for (int round = 0; round < 3; round++) {
    enum { K = 3 };
    dmn d[K];
    char name[16];
    snprintf(name, sizeof name, "r%d", round);
    for (int i = 0; i < K; i++)
      dmn_init(&d[i], name);
    if (round == 1)
      make_dir(&d[0]); /* else: they all race to create it, too */
    for (int i = 0; i < K; i++)
      dmn_spawn(&d[i], NULL, NULL);
    /* the losers go at once; give them 5 s */
    uint64_t end = xpd_now_ms() + 5000;
    for (;;) {
      int gone = 0;
      for (int i = 0; i < K; i++)
        gone += dmn_reaped(&d[i]);
      if (gone >= K - 1 || xpd_now_ms() > end)
        break;
      sleep_ms(10);
    }
    sleep_ms(100); /* and the winner does not follow them */
    int refused = 0, winner = -1;
    for (int i = 0; i < K; i++) {
      int code = dmn_exit(&d[i], 0);
      if (code == -1) {
        if (winner >= 0)
          fail_msg("round %d: two daemons running on one socket", round);
        winner = i;
      } else if (code > 0 && code < 128) {
        refused++;
      } else {
        fail_msg("round %d: a daemon ended with %d; stderr:\n%s", round,
                 code, slurp(d[i].log));
      }
    }
    assert_true(winner >= 0);
    assert_int_equal(refused, K - 1);
    /* each loser names the winner (it said "pid ?" when it looked before
     * the winner had written its pid) */
    char says[64];
    snprintf(says, sizeof says, "another xpjitd (pid %d) is running",
             (int)d[winner].pid);
    for (int i = 0; i < K; i++)
      if (i != winner && !strstr(slurp(d[i].log), says))
        fail_msg("round %d: a loser does not say '%s':\n%s", round, says,
                 slurp(d[i].log));
    assert_true(dmn_serving(&d[winner], 10000));
    /* and the one that serves is the winner */
    stats s;
    get_stats(&d[winner], &s);
    assert_int_equal(stat_field(&s, "pid"), (uint64_t)d[winner].pid);
    dmn_stop(&d[winner]);
  }
}

/* The loser of a start names the winner by the lock file's pid, which
 * the winner writes only once it knows which process serves (after its
 * fork, when it detaches): a loser that looks before waits for it (it
 * said "pid ?"), and says plainly when none comes. The lock is held here,
 * as by a winner that has not written its pid yet. */
static void test_loser_waits_for_pid(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  char lp[160];
  snprintf(lp, sizeof lp, "%s/xpjitd.sock.lock", d.dir);
  int lf = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  assert_true(lf >= 0);
  assert_int_equal(flock(lf, LOCK_EX), 0);
  dmn_spawn(&d, NULL, NULL);
  sleep_ms(200);
  assert_int_equal(pwrite(lf, "4242\n", 5, 0), 5);
  int code = dmn_exit(&d, 15000);
  const char *err = slurp(d.log);
  if (code != 3 || !strstr(err, "another xpjitd (pid 4242) is running"))
    fail_msg("exit %d (want 3), stderr:\n%s", code, err);
  /* no pid comes */
  assert_int_equal(ftruncate(lf, 0), 0);
  dmn_init(&d, "s");
  dmn_spawn(&d, NULL, NULL);
  code = dmn_exit(&d, 15000);
  err = slurp(d.log);
  if (code != 3 || !strstr(err, "another xpjitd is already running on") ||
      strstr(err, "pid ?"))
    fail_msg("no pid: exit %d (want 3), stderr:\n%s", code, err);
  close(lf);
}

/* ---- security ---- */

/* In a child running as nobody: connect and HELLO. Exit codes: 0 refused
 * (ERROR or closed), 1 WELCOME, 2 connect failed with EACCES, 3 other
 * connect failure, 4 could not drop privileges, 5 no answer. */
static int nobody_tries(const char *sock) {
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    alarm(10);
    if (setgroups(0, NULL) != 0 || setgid(65534) != 0 ||
        setuid(65534) != 0 || getuid() != 65534)
      _exit(4);
    int fd = raw_connect(sock);
    if (fd < 0)
      _exit(errno == EACCES ? 2 : 3);
    uint8_t hello[] = {'X', 'P', 'J', 'D', XPD_VERSION, XPD_HELLO, 0, 0, 1,
                       0, 0, 0, 14, 0, 0, 0, XPD_F_PROTO, 0, 8, 0, 0, 0,
                       XPD_VERSION, 0, 0, 0, 0, 0, 0, 0};
    if (send(fd, hello, sizeof hello, MSG_NOSIGNAL) < 0) /* closed already */
      _exit(0);
    uint8_t h[16];
    size_t got = 0;
    while (got < sizeof h) {
      ssize_t n = recv(fd, h + got, sizeof h - got, 0);
      if (n <= 0)
        _exit(0); /* closed without a word: refused */
      got += (size_t)n;
    }
    _exit(h[5] == XPD_WELCOME ? 1 : h[5] == XPD_ERROR ? 0 : 5);
  }
  int st = 0;
  uint64_t end = xpd_now_ms() + 15000;
  while (waitpid(pid, &st, WNOHANG) == 0) {
    if (xpd_now_ms() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    sleep_ms(10);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_peer_uid(void **state) {
  (void)state;
  if (geteuid() != 0) {
    print_message("skipped: needs root to run a client as another user\n");
    skip();
  }
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  assert_int_equal(chmod(base, 0711), 0); /* let nobody walk to it */
  dmn_start(&d, NULL, NULL);
  /* default permissions: nobody cannot even connect */
  int r = nobody_tries(d.sock);
  if (r != 2)
    fail_msg("nobody connecting through a 0700 directory: %d", r);
  assert_int_equal(stat1(&d, "refused_uid"), 0);
  /* opened up: the connection reaches the daemon, which refuses it */
  assert_int_equal(chmod(d.dir, 0711), 0);
  assert_int_equal(chmod(d.sock, 0666), 0);
  r = nobody_tries(d.sock);
  if (r != 0)
    fail_msg("nobody through an open socket: %d (1: it was welcomed)", r);
  assert_true(stat1(&d, "refused_uid") >= 1);
  check_serves(&d);
  dmn_stop(&d);
}

/* The warnings of this process (xpj_set_warning_handler). */
static char squat_warnings[8192];
static void squat_warned(void *ud, const char *msg) {
  (void)ud;
  size_t n = strlen(squat_warnings);
  snprintf(squat_warnings + n, sizeof squat_warnings - n, "%s\n", msg);
}

static unsigned count_of(const char *hay, const char *needle) {
  unsigned n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
    n++;
  return n;
}

/* Another user serves this user's daemon socket path (an outside probe:
 * /tmp/xpjit-UID squatted before the user's daemon made it): not used,
 * kernels compiled here, and one warning per process at the default
 * level that says so and names the fix (it was said only at
 * XPJIT_LOG=info, where nobody learnt of it). */
static void test_squatted_socket(void **state) {
  (void)state;
  if (geteuid() != 0) {
    print_message("skipped: needs root to serve a socket as another user\n");
    skip();
  }
  char dir[128], sock[160];
  snprintf(dir, sizeof dir, "%s/squat", base);
  snprintf(sock, sizeof sock, "%s/xpjitd.sock", dir);
  assert_int_equal(chmod(base, 0711), 0); /* let nobody walk to it */
  assert_int_equal(mkdir(dir, 0755), 0);
  assert_int_equal(chown(dir, 65534, 65534), 0);
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) { /* nobody listens there, and never answers */
    close(ready[0]);
    if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
      _exit(4);
    int so = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    set_path(&a, sock);
    if (so < 0 || bind(so, (struct sockaddr *)&a, sizeof a) != 0 ||
        chmod(sock, 0666) != 0 || listen(so, 16) != 0)
      _exit(5);
    if (write(ready[1], "r", 1) != 1)
      _exit(6);
    alarm(60);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char r = 0;
  assert_int_equal(read(ready[0], &r, 1), 1);
  close(ready[0]);
  squat_warnings[0] = 0;
  xpj_set_warning_handler(squat_warned, NULL);
  for (int i = 0; i < 2; i++) { /* two contexts: still one warning */
    xpj_context_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.cache_mode = XPJ_CACHE_MODE_OFF;
    desc.no_env_bundles = 1;
    desc.daemon = sock;
    desc.visible = "cpu";
    xpj_context *ctx = NULL;
    xpj_device *dev = NULL;
    xpj_program *p = NULL;
    xpj_kernel *k = NULL;
    assert_int_equal(xpj_context_create(&desc, &ctx), XPJ_OK);
    assert_int_equal(xpj_device_select(ctx, "cpu", &dev), XPJ_OK);
    assert_int_equal(xpj_program_create(ctx, "kernels.xpk", kernels_src,
                                        strlen(kernels_src), NULL, &p),
                     XPJ_OK);
    assert_int_equal(
        xpj_program_get_kernel(p, "saxpy", "T=f32", 0, dev, NULL, &k),
        XPJ_OK);
    xpj_kernel_info ki;
    assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
    assert_int_equal(ki.origin, XPJ_ORIGIN_COMPILED);
    xpj_program_destroy(p);
    xpj_context_destroy(ctx);
  }
  xpj_set_warning_handler(NULL, NULL);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  char says[256];
  snprintf(says, sizeof says, "daemon: %s is served by uid 65534, not this "
           "user (0)", sock);
  if (count_of(squat_warnings, says) != 1 ||
      !strstr(squat_warnings, "Someone else holds this path: set "
              "XPJIT_DAEMON to a socket of your own (or XDG_RUNTIME_DIR)"))
    fail_msg("want one warning '%s ...' naming the fix; warnings:\n%s",
             says, squat_warnings);
}

/* ---- parsing off the event loop ---- */

/* kernels_src and a kernel whose body is long sums (y[i] = y[i] + y[i] +
 * ..., a statement every 512 terms: language.md bounds how deep one
 * expression nests at 1024) to `size` bytes in all (malloc'd): seconds to
 * parse, not to read. tag makes sources of the same size differ. */
static char *slow_source(size_t size, char tag, size_t *len) {
  static const char head[] = "kernel big<T>(y: global T[]) range {\n"
                             "    let i = global_id(0);\n"
                             "    y[i] = y[i]";
  static const char term[] = " + y[i]", next[] = ";\n    y[i] = y[i]",
                    tail[] = ";\n}\n";
  char *s = malloc(size + 64);
  assert_non_null(s);
  size_t n = (size_t)snprintf(s, size + 64, "// %c\n%s%s", tag, kernels_src,
                              head);
  assert_true(n < size);
  for (unsigned terms = 1;
       n + sizeof next + sizeof term + sizeof tail < size; terms++) {
    const char *t = terms % 512 ? term : next;
    size_t tl = terms % 512 ? sizeof term - 1 : sizeof next - 1;
    memcpy(s + n, t, tl);
    n += tl;
  }
  memcpy(s + n, tail, sizeof tail);
  *len = n + sizeof tail - 1;
  return s;
}

/* Sends a GET for saxpy of src (id) on fd. */
static void send_src_get(int fd, uint32_t id, const char *src, size_t len) {
  xpd_buf b = {0};
  build_get_src(&b, id, src, len, "saxpy", "f32", 0);
  send_frame(fd, &b);
}

/* True when a byte is waiting on fd (a reply has come). */
static bool readable_now(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

/* A source of 7 MiB that takes long to parse, from one process, and many
 * memory hits from another meanwhile: every hit is answered while the
 * large request is still with a parse thread (its reply not sent, the
 * daemon's `keying` still 1), then the large one is answered too. Checked
 * by order, not by time: the hits cannot wait for the parse. */
static void test_parse_off_loop(void **state) {
  (void)state;
  enum { HITS = 200, SRC = 7 << 20 };
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  int fh = client(&d);
  kreply r;
  get_kernel(fh, "saxpy", &r); /* compiled: hits from now on */
  assert_int_equal(r.k.v.failed, 0);
  size_t len;
  char *src = slow_source(SRC, 'a', &len);
  int fb = other_client(&d);
  uint64_t t0 = xpd_now_ms();
  send_src_get(fb, 9, src, len);
  /* the large GET has reached a parse thread */
  assert_int_equal(stat_reaches(&d, "keying", 1, 30000), 1);
  uint64_t t1 = xpd_now_ms();
  for (int i = 0; i < HITS; i++) {
    get_kernel(fh, "saxpy", &r);
    assert_int_equal(r.k.origin, XPD_FROM_MEMORY);
  }
  uint64_t t2 = xpd_now_ms();
  /* all answered, the large one still parsing */
  bool pending = stat1(&d, "keying") == 1 && !readable_now(fb);
  kreply big;
  read_kernel(fb, 9, 60000, &big, t0);
  print_message("%d hits in %llu ms while a %zu-byte source was parsed "
                "(answered after %llu ms)\n", HITS,
                (unsigned long long)(t2 - t1), len,
                (unsigned long long)big.ms);
  if (!pending)
    fail_msg("the large source was parsed before %d hits were answered "
             "(%llu ms): it no longer takes long enough to show anything",
             HITS, (unsigned long long)(t2 - t1));
  assert_int_equal(big.k.v.failed, 0);
  assert_true(big.k.v.size > 0);
  stats s;
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "keying"), 0);
  assert_int_equal(stat_field(&s, "hits_memory"), HITS + 1);
  close(fb);
  close(fh);
  free(src);
  check_serves(&d);
  dmn_stop(&d);
}

/* Clients that leave while their GETs are with the parse threads: one
 * whose large source is being parsed, one whose GET is queued behind it
 * (big sources are parsed one at a time with two threads), and one whose
 * identical request waits for another's parse, which stays answered. No
 * reply goes anywhere, nothing is held for them afterwards, a queued
 * parse is not run, and the daemon serves on. */
static void test_disconnect_during_parse(void **state) {
  (void)state;
  enum { SRC = 7 << 20 };
  asan_extra = "quarantine_size_mb=4";
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  uint64_t held0 = stat1(&d, "client_bytes"); /* the STATS client's own */
  size_t la, lb;
  char *sa = slow_source(SRC, 'a', &la), *sb = slow_source(SRC, 'b', &lb);
  /* one process: A parsing, B queued behind it */
  int fa = other_client(&d), fbq = other_client(&d);
  send_src_get(fa, 1, sa, la);
  assert_int_equal(stat_reaches(&d, "keying", 1, 30000), 1);
  send_src_get(fbq, 2, sb, lb);
  assert_int_equal(stat_reaches(&d, "keying", 2, 30000), 2);
  /* another process asks what A asks: it waits for A's parse */
  int ff = other_client(&d);
  send_src_get(ff, 3, sa, la);
  assert_int_equal(stat_reaches(&d, "keyed_shared", 1, 30000), 1);
  close(fa);
  close(fbq);
  assert_true(stat1(&d, "keyed") == 0); /* A is still being parsed */
  /* A's follower gets A's parse */
  kreply r;
  read_kernel(ff, 3, 60000, &r, xpd_now_ms());
  assert_int_equal(r.k.v.failed, 0);
  close(ff);
  assert_int_equal(stat_reaches(&d, "keying", 0, 60000), 0);
  stats s;
  get_stats(&d, &s);
  print_message("keyed %llu, keyed_shared %llu, requests %llu\n",
                (unsigned long long)stat_field(&s, "keyed"),
                (unsigned long long)stat_field(&s, "keyed_shared"),
                (unsigned long long)stat_field(&s, "requests"));
  /* A's parse only: B's never ran */
  assert_int_equal(stat_field(&s, "keyed"), 1);
  assert_int_equal(stat_reaches(&d, "client_bytes", held0, 5000), held0);
  free(sa);
  free(sb);
  check_serves(&d);
  dmn_stop(&d);
}

/* SIGTERM while a large source is parsed: its client is told at once (an
 * ERROR), the parse runs to its end, and the daemon exits 0 (under ASan:
 * nothing leaked, nothing used after it was freed). */
static void test_shutdown_during_parse(void **state) {
  (void)state;
  enum { SRC = 7 << 20 };
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  size_t len;
  char *src = slow_source(SRC, 'a', &len), *src2 = slow_source(SRC, 'b',
                                                              &len);
  int fa = client(&d), fb = client(&d), fc = client(&d);
  send_src_get(fa, 1, src, len);
  assert_int_equal(stat_reaches(&d, "keying", 1, 30000), 1);
  send_src_get(fb, 2, src2, len); /* queued behind it */
  assert_int_equal(stat_reaches(&d, "keying", 2, 30000), 2);
  assert_int_equal(kill(d.pid, SIGTERM), 0);
  uint8_t *pl = NULL;
  xpd_msg m;
  for (int i = 0; i < 2; i++) {
    int fd = i ? fb : fa;
    xpd_header h = read_reply(fd, 10000, &pl, &m);
    assert_int_equal(h.id, (uint32_t)(i + 1));
    assert_int_equal(h.op, XPD_ERROR);
    free(pl);
  }
  /* the loop still answers while the parse runs on */
  send_op(fc, XPD_PING, 3);
  xpd_header h = read_reply(fc, 5000, &pl, &m);
  assert_int_equal(h.op, XPD_PONG);
  free(pl);
  int code = dmn_exit(&d, 60000);
  if (code != 0)
    fail_msg("exit %d; stderr:\n%s", code, slurp(d.log));
  close(fa);
  close(fb);
  close(fc);
  free(src);
  free(src2);
}

/* ---- shutdown ---- */

/* SIGTERM with nothing running and a client that reads none of its
 * replies: the daemon gives readers one second once its compiles are
 * done, not the whole grace period (it waited 10 s here with nothing to
 * do; found by an outside probe). */
static void test_sigterm_unread_client(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "u");
  make_dir(&d);
  dmn_start(&d, NULL, (const char *const[]){"--grace", "30000", NULL});
  int fd = client(&d);
  int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  /* STATS replies (a kilobyte each) that are never read: the daemon's
   * output to this client backs up */
  for (uint32_t i = 0; i < 600; i++)
    send_op(fd, XPD_STATS, 100 + i);
  /* taken in, their replies waiting: the client's share of memory */
  uint64_t end = xpd_now_ms() + 10000;
  while (stat1(&d, "client_bytes") < (256u << 10) && xpd_now_ms() < end)
    sleep_ms(20);
  assert_true(stat1(&d, "client_bytes") >= (256u << 10));
  uint64_t t0 = xpd_now_ms();
  assert_int_equal(kill(d.pid, SIGTERM), 0);
  /* a second, with room for a slow machine: not the I/O timeout (10 s)
   * after which the daemon closes a client that takes nothing */
  int code = dmn_exit(&d, 6000);
  print_message("SIGTERM with an unread client: exit %d after %llu ms\n",
                code, (unsigned long long)(xpd_now_ms() - t0));
  if (code != 0)
    fail_msg("exit %d (-1: still running after 6 s of a 30 s grace); "
             "stderr:\n%s", code, slurp(d.log));
  close(fd);
}

/* SIGTERM with a compile running and one queued behind it: the queued
 * one is refused at once, a connected client still gets answers (a GET:
 * an ERROR) during the grace period, the running one ends with it; the
 * daemon exits 0, its socket and its workers gone. */
static void test_sigterm_in_flight(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, "hang:slow",
            (const char *const[]){"--workers", "1", "--grace", "1000",
                                  NULL});
  int fa = client(&d), fb = client(&d), fc = client(&d);
  xpd_buf b = {0};
  build_get(&b, 77, "slow", 0);
  send_frame(fa, &b);
  /* wait until the compile is running, then queue another */
  uint64_t end = xpd_now_ms() + 30000;
  while (stat1(&d, "workers_busy") != 1 && xpd_now_ms() < end)
    sleep_ms(20);
  assert_int_equal(stat1(&d, "workers_busy"), 1);
  build_get(&b, 78, "saxpy", 0);
  send_frame(fb, &b);
  assert_int_equal(stat_reaches(&d, "queue", 1, 5000), 1);
  pid_t pgid = d.pid;
  uint64_t t0 = xpd_now_ms();
  assert_int_equal(kill(d.pid, SIGTERM), 0);
  uint8_t *pl = NULL;
  xpd_msg m;
  /* the queued GET: refused now, not after the grace period */
  xpd_header h = read_reply(fb, 5000, &pl, &m);
  uint64_t queued_ms = xpd_now_ms() - t0;
  assert_int_equal(h.id, 78);
  assert_int_equal(h.op, XPD_ERROR);
  free(pl);
  close(fb);
  /* a client already connected: answered, its GET refused */
  build_get(&b, 79, "saxpy", 0);
  send_frame(fc, &b);
  h = read_reply(fc, 5000, &pl, &m);
  assert_int_equal(h.id, 79);
  assert_int_equal(h.op, XPD_ERROR);
  free(pl);
  send_op(fc, XPD_PING, 80);
  h = read_reply(fc, 5000, &pl, &m);
  assert_int_equal(h.op, XPD_PONG);
  free(pl);
  /* no new clients */
  assert_true(raw_connect(d.sock) < 0);
  /* the running compile's client hears back */
  h = read_reply(fa, 10000, &pl, &m);
  uint64_t running_ms = xpd_now_ms() - t0;
  assert_int_equal(h.id, 77);
  assert_true(h.op == XPD_ERROR || h.op == XPD_KERNEL);
  free(pl);
  close(fa);
  int code = dmn_exit(&d, 10000);
  print_message("SIGTERM: queued GET refused after %llu ms, running one "
                "answered after %llu ms, exit %d after %llu ms\n",
                (unsigned long long)queued_ms,
                (unsigned long long)running_ms, code,
                (unsigned long long)(xpd_now_ms() - t0));
  if (code != 0)
    fail_msg("exit %d; stderr:\n%s", code, slurp(d.log));
  assert_true(queued_ms < 900);
  assert_true(running_ms >= 900);
  close(fc);
  struct stat sb;
  assert_int_equal(lstat(d.sock, &sb), -1);
  /* the hung worker did not outlive its daemon */
  sleep_ms(50);
  errno = 0;
  assert_int_equal(kill(-pgid, 0), -1);
  assert_int_equal(errno, ESRCH);
}

/* SHUTDOWN: OK, then a clean exit; an idle connection is closed after
 * --idle-timeout (not counted as an I/O timeout). */
static void test_idle_and_shutdown(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, (const char *const[]){"--idle-timeout", "300", NULL});
  int fd = client(&d);
  uint64_t t0 = xpd_now_ms();
  assert_true(closed_within(fd, 5000));
  assert_true(xpd_now_ms() - t0 >= 250);
  close(fd);
  assert_int_equal(stat1(&d, "io_timeouts"), 0);
  fd = client(&d);
  send_op(fd, XPD_SHUTDOWN, 3);
  uint8_t *pl = NULL;
  xpd_msg m;
  xpd_header h = read_reply(fd, 5000, &pl, &m);
  assert_int_equal(h.op, XPD_OK);
  assert_int_equal(h.id, 3);
  free(pl);
  close(fd);
  assert_int_equal(dmn_exit(&d, 10000), 0);
  struct stat sb;
  assert_int_equal(lstat(d.sock, &sb), -1);

  /* --idle-exit: gone once nobody has used it for a second */
  dmn_init(&d, "t");
  make_dir(&d);
  dmn_start(&d, NULL, (const char *const[]){"--idle-exit", "1", NULL});
  assert_int_equal(dmn_exit(&d, 10000), 0);
  assert_int_equal(lstat(d.sock, &sb), -1);
}

/* A signal the moment the socket appears (before the loop reads its
 * signalfd): still a clean stop, exit 0 and the socket removed (it was
 * blocked only after the socket was made: the signal killed the daemon,
 * 19 of 40 times, leaving the socket). */
static void test_signal_at_start(void **state) {
  (void)state;
  const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  for (int i = 0; i < 8; i++) {
    dmn d;
    char name[16];
    snprintf(name, sizeof name, "e%d", i);
    dmn_init(&d, name);
    make_dir(&d);
    dmn_spawn(&d, NULL, NULL);
    struct stat sb;
    uint64_t end = xpd_now_ms() + 30000;
    while (lstat(d.sock, &sb) != 0 && !dmn_reaped(&d) && xpd_now_ms() < end)
      ;
    assert_int_equal(lstat(d.sock, &sb), 0);
    kill(d.pid, sigs[i % 4]);
    int code = dmn_exit(&d, 15000);
    if (code != 0)
      fail_msg("signal %d at start: exit %d; its stderr:\n%s", sigs[i % 4],
               code, slurp(d.log));
    assert_int_equal(lstat(d.sock, &sb), -1);
  }
}

/* The signals whose default action ends a process but that mean nothing
 * to the daemon (SIGUSR1, SIGUSR2, SIGALRM, SIGPROF, ...) are logged and
 * ignored: it goes on serving (one of them killed it, its socket left
 * behind); SIGQUIT stops it cleanly, as SIGTERM does. */
static void test_signals_ignored(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  const int sigs[] = {SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO};
  for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
    assert_int_equal(kill(d.pid, sigs[i]), 0);
    stats s;
    get_stats(&d, &s); /* still serving */
  }
  assert_false(dmn_reaped(&d));
  char want[128];
  snprintf(want, sizeof want, "SIGUSR1 (from pid %d): xpjitd has no use for "
           "it; ignored", (int)getpid());
  char *log = slurp(d.log);
  if (!strstr(log, want))
    fail_msg("no '%s' in the log:\n%s", want, log);
  assert_int_equal(kill(d.pid, SIGQUIT), 0);
  int code = dmn_exit(&d, 15000);
  if (code != 0)
    fail_msg("SIGQUIT: exit %d; its log:\n%s", code, slurp(d.log));
  struct stat sb;
  assert_int_equal(lstat(d.sock, &sb), -1);
  assert_non_null(strstr(slurp(d.log), "shutting down (SIGQUIT)"));
}

/* A datagram from ns within ms into buf ("" when none came). */
static void recv_notify(int ns, char *buf, size_t size, unsigned ms) {
  buf[0] = 0;
  struct pollfd p = {ns, POLLIN, 0};
  if (poll(&p, 1, (int)ms) == 1) {
    ssize_t n = recv(ns, buf, size - 1, 0);
    buf[n > 0 ? n : 0] = 0;
  }
}

/* systemd's readiness protocol (Type=notify): READY=1 once it serves,
 * STOPPING=1 on SIGTERM; the socket as a path and in the abstract
 * namespace; a malformed NOTIFY_SOCKET is a warning in the log, not a
 * failure; workers do not inherit it. */
static void test_sd_notify(void **state) {
  (void)state;
  for (int abstract = 0; abstract < 2; abstract++) {
    dmn d;
    dmn_init(&d, abstract ? "na" : "np");
    make_dir(&d);
    int ns = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(ns >= 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    char name[120];
    snprintf(name, sizeof name, "%s%s/notify%d", abstract ? "@" : "", base,
             abstract);
    assert_true(strlen(name) < sizeof a.sun_path);
    memcpy(a.sun_path, name, strlen(name));
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
                                strlen(name) + !abstract);
    if (abstract)
      a.sun_path[0] = 0;
    assert_int_equal(bind(ns, (struct sockaddr *)&a, len), 0);
    setenv("NOTIFY_SOCKET", name, 1);
    dmn_spawn(&d, NULL, NULL);
    unsetenv("NOTIFY_SOCKET");
    char buf[256];
    recv_notify(ns, buf, sizeof buf, 20000);
    assert_non_null(strstr(buf, "READY=1"));
    assert_true(ping_once(d.sock)); /* ready means serving */
    kill(d.pid, SIGTERM);
    recv_notify(ns, buf, sizeof buf, 10000);
    assert_non_null(strstr(buf, "STOPPING=1"));
    assert_int_equal(dmn_exit(&d, 10000), 0);
    close(ns);
  }
  /* not a path or @name: it serves all the same, and says why not */
  dmn d;
  dmn_init(&d, "nb");
  make_dir(&d);
  setenv("NOTIFY_SOCKET", "relative/notify", 1);
  dmn_start(&d, NULL, NULL);
  unsetenv("NOTIFY_SOCKET");
  assert_true(ping_once(d.sock));
  assert_non_null(strstr(slurp(d.log), "NOTIFY_SOCKET=relative/notify is "
                                       "not a socket path"));
}

/* What one daemon compiled, the next finds in the cache file. */
static void test_cache_across_restart(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  int fd = client(&d);
  kreply r;
  get_kernel(fd, "saxpy", &r);
  close(fd);
  assert_int_equal(r.k.origin, XPD_FROM_COMPILED);
  size_t len = r.k.v.size;
  dmn_stop(&d);
  dmn_start(&d, NULL, NULL);
  fd = client(&d);
  get_kernel(fd, "saxpy", &r);
  close(fd);
  assert_int_equal(r.k.v.failed, 0);
  assert_int_equal(r.k.origin, XPD_FROM_CACHE);
  assert_int_equal(r.k.v.size, len);
  stats s;
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "hits_cache"), 1);
  assert_int_equal(stat_field(&s, "compiles"), 0);
  dmn_stop(&d);
}

/* A first look (XPD_F_FIRST): the greeting names the daemon's cache
 * file by device and inode; a first look is answered from memory or the
 * cache file without PENDING; when the file has no row, PENDING comes
 * first, then the compile's KERNEL (one started for it, or one under way:
 * a second first look of it waits without being keyed again, the file
 * unchanged); FIRST 2 is malformed. */

/* A GET of kernel<T=dtype> with FIRST and FIRST_WAIT (each left out when
 * 0). */
static void first_get_wait(int fd, uint32_t id, const char *kernel,
                           const char *dtype, uint64_t first,
                           uint64_t wait_ms, uint64_t timeout_ms) {
  xpd_buf b = {0};
  build_get_dt(&b, id, kernel, dtype, timeout_ms);
  if (first)
    xpd_put_u64(&b, XPD_F_FIRST, first);
  if (wait_ms)
    xpd_put_u64(&b, XPD_F_FIRST_WAIT, wait_ms);
  send_frame(fd, &b);
}

/* A first look (FIRST first, no FIRST_WAIT) of kernel<T=f32>. */
static void first_get(int fd, uint32_t id, const char *kernel,
                      uint64_t first) {
  first_get_wait(fd, id, kernel, "f32", first, 0, 0);
}

/* The next frame on fd: PENDING for id, or (pending false) a KERNEL for
 * id, which must be a kernel from origin (-1: any). */
static void expect_first(int fd, uint32_t id, bool pending, int origin) {
  uint8_t *pl = NULL;
  xpd_msg m;
  xpd_header h = read_reply(fd, 30000, &pl, &m);
  assert_int_equal(h.id, id);
  if (pending) {
    free(pl);
    if (h.op != XPD_PENDING)
      fail_msg("a first look of a kernel not in the file: operation %u, "
               "not PENDING", h.op);
    assert_int_equal(h.len, 0);
    return;
  }
  if (h.op != XPD_KERNEL)
    fail_msg("a first look: operation %u, not KERNEL", h.op);
  xpd_kernel k;
  assert_int_equal(xpd_kernel_decode(&m, &k), XPD_E_OK);
  assert_int_equal(k.status, XPJ_OK);
  assert_true(k.v.size > 0);
  if (origin >= 0)
    assert_int_equal(k.origin, (uint64_t)origin);
  free(pl);
}

/* ---- lookups ---- */

/* A context of this process that asks the daemon d only (no cache file,
 * no bundles). */
static xpj_context *context_of(const dmn *d) {
  xpj_context_desc desc;
  memset(&desc, 0, sizeof desc);
  desc.cache_mode = XPJ_CACHE_MODE_OFF;
  desc.no_env_bundles = 1;
  desc.daemon = d ? d->sock : "off";
  xpj_context *ctx = NULL;
  assert_int_equal(xpj_context_create(&desc, &ctx), XPJ_OK);
  return ctx;
}

/* The digest of kernel<T=dtype> of kernels_src for target, as libxpjit
 * computes it: what its LOOKUP names. */
static void key_of(const char *kernel, const char *dtype, char out[65]) {
  xpj_context *ctx = context_of(NULL);
  xpj_program *p = NULL;
  assert_int_equal(xpj_program_create(ctx, "kernels.xpk", kernels_src,
                                      strlen(kernels_src), NULL, &p),
                   XPJ_OK);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.opt_level = 2;
  char dt[32];
  snprintf(dt, sizeof dt, "T=%s", dtype);
  rt_keyed k;
  assert_int_equal(rt_program_keyed(p, kernel, dt, 0, target, &o, &k),
                   XPJ_OK);
  memcpy(out, k.digest, 65);
  rt_keyed_free(&k);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
}

static void send_lookup(int fd, uint32_t id, const char *digest,
                        uint64_t timeout_ms, uint64_t first) {
  xpd_lookup l = {.timeout_ms = timeout_ms, .first = first};
  snprintf(l.digest, sizeof l.digest, "%s", digest);
  xpd_buf b = {0};
  xpd_begin(&b, XPD_LOOKUP, id);
  xpd_put_lookup(&b, &l);
  send_frame(fd, &b);
}

/* The answer that asks for the GET: ERROR XPJ_ERR_NOT_FOUND for id, and
 * the connection still answers. */
static void expect_not_found(int fd, uint32_t id) {
  uint8_t *pl = NULL;
  xpd_msg m;
  xpd_header h = read_reply(fd, 5000, &pl, &m);
  assert_int_equal(h.id, id);
  if (h.op != XPD_ERROR)
    fail_msg("a LOOKUP of a kernel not in memory: operation %u, not ERROR",
             h.op);
  uint64_t status = 0;
  assert_int_equal(xpd_get_u64(&m, XPD_F_STATUS, false, &status), XPD_E_OK);
  assert_int_equal(status, (uint64_t)XPJ_ERR_NOT_FOUND);
  free(pl);
  send_op(fd, XPD_PING, id + 1000);
  h = read_reply(fd, 5000, &pl, &m);
  assert_int_equal(h.op, XPD_PONG);
  assert_int_equal(h.id, id + 1000);
  free(pl);
}

/* xpd_read_reply, libxpjit's reader of a one-frame answer: header and
 * payload in one recv when small, the rest of a large one after it, a
 * header that comes in pieces, an empty frame; bytes past the frame (a
 * second frame nothing asked for) and an end of file are errors. */
static void test_read_reply(void **state) {
  (void)state;
  static uint8_t big[20000];
  for (size_t i = 0; i < sizeof big; i++)
    big[i] = (uint8_t)(i * 7);
  for (int c = 0; c < 6; c++) {
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
                     0);
    xpd_buf b = {0};
    xpd_begin(&b, c == 3 ? XPD_PONG : XPD_KERNEL, 9);
    if (c != 3)
      xpd_put_bytes(&b, XPD_F_BINARY, big,
                    c == 0 || c == 4 ? 1500 : sizeof big);
    assert_true(xpd_end(&b, 0));
    pid_t pid = -1;
    if (c == 2) { /* the header in two pieces, 50 ms apart */
      pid = fork();
      assert_true(pid >= 0);
      if (pid == 0) {
        if (write(sv[0], b.p, 10) != 10)
          _exit(1);
        sleep_ms(50);
        _exit(write(sv[0], b.p + 10, b.len - 10) == (ssize_t)(b.len - 10)
                  ? 0
                  : 1);
      }
    } else if (c == 5) { /* ends inside the header */
      assert_int_equal(write(sv[0], b.p, 7), 7);
      close(sv[0]);
      sv[0] = -1;
    } else {
      assert_int_equal(write(sv[0], b.p, b.len), (ssize_t)b.len);
      if (c == 4) /* a second frame behind it */
        assert_int_equal(write(sv[0], b.p, 5), 5);
    }
    xpd_header h;
    uint8_t *pl = NULL;
    char err[256] = "";
    xpd_err e = xpd_read_reply(sv[1], XPD_MAX_REPLY, xpd_now_ms() + 5000, &h,
                               &pl, err, sizeof err);
    if (c == 4) {
      assert_int_equal(e, XPD_E_OP);
      assert_non_null(strstr(err, "after its reply"));
    } else if (c == 5) {
      assert_int_equal(e, XPD_E_SHORT);
      assert_null(pl);
    } else {
      assert_int_equal(e, XPD_E_OK);
      assert_int_equal(h.id, 9);
      assert_int_equal(h.len, b.len - XPD_HEADER);
      if (c == 3) {
        assert_null(pl);
      } else {
        assert_memory_equal(pl, b.p + XPD_HEADER, h.len);
        /* nothing of the frame left behind */
        char x;
        assert_int_equal(recv(sv[1], &x, 1, MSG_DONTWAIT), -1);
      }
    }
    free(pl);
    if (pid > 0) {
      int ws;
      assert_int_equal(waitpid(pid, &ws, 0), pid);
      assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    }
    xpd_buf_free(&b);
    if (sv[0] >= 0)
      close(sv[0]);
    close(sv[1]);
  }
}

/* A fake daemon on base/fake.sock: greets, then answers each request
 * after the next of delays_ms (-1: never; the connection held 3 s). */
static pid_t fake_daemon(const char *sock, const int *delays_ms, int n) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
  int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(l >= 0);
  assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(l, 4), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid > 0) {
    close(l);
    return pid;
  }
  alarm(20);
  int fd = accept(l, NULL, NULL);
  for (int i = -1; fd >= 0 && i < n; i++) {
    xpd_header h;
    uint8_t *pl = NULL;
    char err[128];
    if (xpd_read_frame(fd, 1u << 20, xpd_now_ms() + 10000, &h, &pl, err,
                       sizeof err) != XPD_E_OK)
      _exit(1);
    free(pl);
    if (i >= 0 && delays_ms[i] < 0) {
      sleep_ms(3000);
      _exit(0);
    }
    if (i >= 0)
      sleep_ms((unsigned)delays_ms[i]);
    xpd_buf b = {0};
    xpd_begin(&b, i < 0 ? XPD_WELCOME : XPD_PONG, h.id);
    xpd_end(&b, 0);
    if (!xpd_write_all(fd, b.p, b.len, xpd_now_ms() + 5000))
      _exit(1);
    xpd_buf_free(&b);
  }
  _exit(0);
}

/* xpd_call on a connection of xpd_connect's waits for its reply in a
 * blocking recv woken every few milliseconds: a reply that comes late is
 * read, and none at all ends the call at its timeout, not at the first
 * slice nor long after; a timeout shorter than a slice too. */
static void test_call_waits(void **state) {
  (void)state;
  char sock[200];
  snprintf(sock, sizeof sock, "%s/fake.sock", base);
  const int delays[] = {0, 60, 250, -1};
  pid_t pid = fake_daemon(sock, delays, 4);
  char err[256] = "";
  int fd = xpd_connect(sock, 2000, err, sizeof err, NULL, NULL);
  assert_true(fd >= 0);
  xpd_buf b = {0};
  xpd_begin(&b, XPD_PING, 5);
  xpd_end(&b, 0);
  for (int i = 0; i < 4; i++) {
    int timeout = i == 3 ? 400 : 2000;
    xpd_header h;
    uint8_t *pl = NULL;
    uint64_t t0 = xpd_now_ms();
    xpd_err e = i == 1 ? xpd_call_one(fd, &b, 1u << 20, timeout, &h, &pl,
                                      err, sizeof err)
                       : xpd_call(fd, &b, 1u << 20, timeout, &h, &pl, err,
                                  sizeof err);
    uint64_t took = xpd_now_ms() - t0;
    free(pl);
    if (i < 3) {
      assert_int_equal(e, XPD_E_OK);
      assert_int_equal(h.op, XPD_PONG);
      assert_int_equal(h.id, 5);
      assert_true(took >= (uint64_t)delays[i]);
      assert_true(took < (uint64_t)delays[i] + 1500);
    } else {
      assert_int_equal(e, XPD_E_SHORT);
      assert_non_null(strstr(err, "timed out"));
      assert_true(took >= 400);
      assert_true(took < 1400);
    }
  }
  close(fd);
  int ws;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  /* a timeout under one slice: over in about that time */
  const int never[] = {-1};
  unlink(sock);
  pid = fake_daemon(sock, never, 1);
  fd = xpd_connect(sock, 2000, err, sizeof err, NULL, NULL);
  assert_true(fd >= 0);
  xpd_header h;
  uint8_t *pl = NULL;
  uint64_t t0 = xpd_now_ms();
  assert_int_equal(xpd_call(fd, &b, 1u << 20, 3, &h, &pl, err, sizeof err),
                   XPD_E_SHORT);
  assert_true(xpd_now_ms() - t0 < 500);
  close(fd);
  kill(pid, SIGKILL);
  waitpid(pid, &ws, 0);
  xpd_buf_free(&b);
}

/* saxpy<T=f32> through libxpjit on the CPU device of a fresh context
 * (this daemon; its cache file cache, or off), with checks: launched on
 * 1000 elements and checked; the kernel came from where want says. */
static void saxpy_from_daemon(const dmn *d, const char *cache,
                              unsigned checks, xpj_kernel_origin want) {
  xpj_context_desc desc;
  memset(&desc, 0, sizeof desc);
  desc.cache_mode = cache ? XPJ_CACHE_MODE_RW : XPJ_CACHE_MODE_OFF;
  desc.cache_path = cache;
  desc.no_env_bundles = 1;
  desc.daemon = d->sock;
  desc.visible = "cpu";
  xpj_context *ctx = NULL;
  xpj_device *dev = NULL;
  xpj_program *p = NULL;
  xpj_queue *q = NULL;
  xpj_kernel *k = NULL;
  assert_int_equal(xpj_context_create(&desc, &ctx), XPJ_OK);
  assert_int_equal(xpj_device_select(ctx, "cpu", &dev), XPJ_OK);
  assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
  assert_int_equal(xpj_program_create(ctx, "kernels.xpk", kernels_src,
                                      strlen(kernels_src), NULL, &p),
                   XPJ_OK);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.checks = checks;
  assert_int_equal(
      xpj_program_get_kernel(p, "saxpy", "T=f32", 0, dev, &o, &k), XPJ_OK);
  xpj_kernel_info ki;
  assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
  assert_int_equal(ki.origin, want);
  enum { N = 1000 };
  float *x = NULL, *y = NULL;
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * 4, 0, (void **)&x),
                   XPJ_OK);
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * 4, 0, (void **)&y),
                   XPJ_OK);
  for (int i = 0; i < N; i++)
    x[i] = (float)i, y[i] = 1;
  xpj_array ax = xpj_array_1d(x, XPJ_F32, N), ay = xpj_array_1d(y, XPJ_F32, N);
  xpj_arg args[] = {xpj_arg_f32(2.0f), xpj_arg_array(&ax),
                    xpj_arg_array(&ay)};
  xpj_range r = xpj_range_1d(N, 0);
  assert_int_equal(xpj_launch(q, k, &r, 3, args, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  for (int i = 0; i < N; i++)
    if (y[i] != 2.0f * (float)i + 1)
      fail_msg("y[%d] = %g, not %g", i, (double)y[i], 2.0 * i + 1);
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, y);
  xpj_queue_destroy(q);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
}

/* LOOKUP (docs/protocol.md, "Lookups"): a kernel by its key's digest, from
 * the daemon's memory as a GET would have it; not there (or an answer
 * only the GET can give): ERROR XPJ_ERR_NOT_FOUND, connection kept; a
 * compile under way is waited for; a malformed one closes. libxpjit asks
 * by digest, then with the GET when told to. */
static void test_lookup(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, "hang:slow",
            (const char *const[]){"--workers", "2", "--grace", "0", NULL});
  char dsax[65], dslow[65], d64[65];
  key_of("saxpy", "f32", dsax);
  key_of("slow", "f32", dslow);
  key_of("saxpy", "f64", d64);
  int fd = client(&d);
  /* nothing compiled: asked for the GET, first look or not */
  send_lookup(fd, 1, dsax, 0, 0);
  expect_not_found(fd, 1);
  send_lookup(fd, 2, dsax, 0, 1);
  expect_not_found(fd, 2);
  /* the GET compiles it, under the key the client computed */
  kreply g, r;
  get_kernel(fd, "saxpy", &g);
  assert_string_equal(g.k.digest, dsax);
  /* then LOOKUP answers from memory, plain or as a first look, on this
   * connection and another process's */
  for (int i = 0; i < 3; i++) {
    int f = i == 2 ? other_client(&d) : fd;
    uint64_t t0 = xpd_now_ms();
    send_lookup(f, 3, dsax, 0, i == 1);
    read_kernel(f, 3, 5000, &r, t0);
    assert_int_equal(r.k.status, XPJ_OK);
    assert_int_equal(r.k.origin, XPD_FROM_MEMORY);
    assert_string_equal(r.k.digest, dsax);
    assert_int_equal(r.k.v.size, g.k.v.size);
    if (f != fd)
      close(f);
  }
  assert_int_equal(stat1(&d, "compiles"), 1);
  /* a compile under way is waited for (here it times out: remembered) */
  int fs = client(&d);
  xpd_buf b = {0};
  build_get(&b, 4, "slow", 300);
  uint64_t t0 = xpd_now_ms();
  send_frame(fs, &b);
  assert_int_equal(stat_reaches(&d, "workers_busy", 1, 5000), 1);
  send_lookup(fd, 5, dslow, 300, 0);
  read_kernel(fd, 5, 20000, &r, t0);
  assert_int_equal(r.k.v.failed, 1);
  assert_int_equal(r.k.transient, 0);
  assert_non_null(strstr(r.log, "300 ms"));
  read_kernel(fs, 4, 20000, &r, t0);
  assert_int_equal(r.k.v.failed, 1);
  close(fs);
  /* the remembered timeout answers a LOOKUP that allows no longer; one
   * that allows longer, and a first look, are asked for the GET */
  t0 = xpd_now_ms();
  send_lookup(fd, 6, dslow, 300, 0);
  read_kernel(fd, 6, 5000, &r, t0);
  assert_int_equal(r.k.v.failed, 1);
  assert_non_null(strstr(r.log, "remember"));
  send_lookup(fd, 7, dslow, 10000, 0);
  expect_not_found(fd, 7);
  send_lookup(fd, 8, dslow, 300, 1);
  expect_not_found(fd, 8);
  assert_int_equal(stat1(&d, "compiles"), 2);

  /* libxpjit keys a request whose kernel needs its body later (bounds
   * checks: a kernel is never asked by its source alone then) and asks by
   * digest: not in the daemon's memory, then the GET (compiled once);
   * from another context, by digest again: a hit in the daemon's memory */
  stats s0, s1;
  for (int round = 0; round < 2; round++) {
    get_stats(&d, &s0);
    saxpy_from_daemon(&d, NULL, XPJ_CHECK_BOUNDS, XPJ_ORIGIN_DAEMON);
    get_stats(&d, &s1);
    assert_int_equal(stat_field(&s1, "lookups") - stat_field(&s0, "lookups"),
                     1);
    assert_int_equal(stat_field(&s1, "lookups_missed") -
                         stat_field(&s0, "lookups_missed"),
                     round == 0);
    assert_int_equal(stat_field(&s1, "requests") -
                         stat_field(&s0, "requests"),
                     1);
    assert_int_equal(stat_field(&s1, "compiles") -
                         stat_field(&s0, "compiles"),
                     round == 0);
    assert_int_equal(stat_field(&s1, "malformed_frames"), 0);
  }
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.timeout_ms = 4000000; /* over the protocol's hour: sent as the hour */
  /* a binary it asks by the source alone (a GET without DIGEST, which
   * the daemon keys; test_source_get): saxpy<f32> is the one the raw GET
   * above compiled, saxpy<f64> is compiled */
  get_stats(&d, &s0);
  xpj_context *ctx = context_of(&d);
  xpj_program *p = NULL;
  assert_int_equal(xpj_program_create(ctx, "kernels.xpk", kernels_src,
                                      strlen(kernels_src), NULL, &p),
                   XPJ_OK);
  void *bin = NULL;
  size_t size = 0;
  assert_int_equal(xpj_program_get_binary(p, "saxpy", "T=f32", 0, target, &o,
                                          &bin, &size),
                   XPJ_OK);
  assert_int_equal(size, g.k.v.size);
  free(bin);
  o.timeout_ms = 0;
  assert_int_equal(xpj_program_get_binary(p, "saxpy", "T=f64", 0, target, &o,
                                          NULL, NULL),
                   XPJ_OK);
  get_stats(&d, &s1);
  assert_int_equal(stat_field(&s1, "lookups"), stat_field(&s0, "lookups"));
  assert_int_equal(stat_field(&s1, "requests") - stat_field(&s0, "requests"),
                   2);
  assert_int_equal(stat_field(&s1, "compiles") - stat_field(&s0, "compiles"),
                   1);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  /* another process's library: the f64 kernel by digest */
  fs = client(&d);
  t0 = xpd_now_ms();
  send_lookup(fs, 9, d64, 0, 0);
  read_kernel(fs, 9, 5000, &r, t0);
  assert_int_equal(r.k.status, XPJ_OK);
  assert_string_equal(r.k.digest, d64);
  close(fs);

  /* malformed: closed after one ERROR */
  static const struct {
    const char *what, *digest;
    uint64_t first;
  } bad[] = {
      {"an uppercase digest",
       "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef", 0},
      {"a short digest", "0123456789abcdef", 0},
      {"FIRST 2", NULL, 2},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    int f = client(&d);
    xpd_buf lb = {0};
    xpd_begin(&lb, XPD_LOOKUP, 10);
    xpd_put_str(&lb, XPD_F_DIGEST, bad[i].digest ? bad[i].digest : dsax);
    xpd_put_u64(&lb, XPD_F_FIRST, bad[i].first);
    send_frame(f, &lb);
    expect_error_close(f, bad[i].what);
  }
  int f = client(&d);
  send_op(f, XPD_LOOKUP, 11); /* no DIGEST */
  expect_error_close(f, "a LOOKUP without a digest");
  assert_int_equal(stat1(&d, "malformed_frames"), 4);
  close(fd);
  dmn_stop(&d);
}

/* A request libxpjit may answer through its alias (docs/cache.md,
 * "Aliases") with none in its hit files, or no cache file, is asked of the
 * daemon by its source alone (a GET without DIGEST: the daemon keys it,
 * once for every process that asks the same; the process keys nothing):
 * with the cache off, and as a first look on the daemon's own cache
 * file, where its answer leaves an alias for the next process. Each
 * kernel runs and is checked. */
static void test_source_get(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  stats s0, s1, s2;
  get_stats(&d, &s0);
  saxpy_from_daemon(&d, NULL, 0, XPJ_ORIGIN_DAEMON); /* keyed and compiled */
  get_stats(&d, &s1);
  saxpy_from_daemon(&d, NULL, 0, XPJ_ORIGIN_DAEMON); /* known to the daemon */
  get_stats(&d, &s2);
  assert_int_equal(stat_field(&s1, "compiles") - stat_field(&s0, "compiles"),
                   1);
  assert_int_equal(stat_field(&s1, "keyed") - stat_field(&s0, "keyed"), 1);
  assert_int_equal(stat_field(&s2, "compiles"), stat_field(&s1, "compiles"));
  assert_int_equal(stat_field(&s2, "keyed"), stat_field(&s1, "keyed"));
  assert_int_equal(stat_field(&s2, "hits_memory") -
                       stat_field(&s1, "hits_memory"),
                   1);
  assert_int_equal(stat_field(&s2, "lookups"), 0); /* no process keyed */
  assert_int_equal(stat_field(&s2, "requests"), 2);
  /* the daemon's cache file (its directory, as the daemon was given it):
   * a first look by source finds the kernel in the daemon's memory; the
   * process writes its alias, and the next one needs no daemon */
  char db[4200], hits[4300];
  snprintf(db, sizeof db, "%s/cache/cache-v%d.db", base,
           XPJ_CACHE_SCHEMA_VERSION);
  snprintf(hits, sizeof hits, "%s.hits", db);
  saxpy_from_daemon(&d, db, 0, XPJ_ORIGIN_DAEMON);
  get_stats(&d, &s1);
  assert_int_equal(stat_field(&s1, "requests"), 3);
  assert_int_equal(stat_field(&s1, "first_looks") -
                       stat_field(&s2, "first_looks"),
                   1);
  assert_int_equal(stat_field(&s1, "compiles"), 1);
  assert_int_equal(stat_field(&s1, "lookups"), 0);
  unsigned aliases = 0;
  DIR *dd = opendir(hits);
  assert_non_null(dd);
  for (struct dirent *e; (e = readdir(dd));)
    aliases += e->d_name[0] == 'a' && strlen(e->d_name) == 65;
  closedir(dd);
  assert_int_equal(aliases, 1);
  saxpy_from_daemon(&d, db, 0, XPJ_ORIGIN_CACHE);
  get_stats(&d, &s2);
  assert_int_equal(stat_field(&s2, "requests"), 3);
  assert_int_equal(stat_field(&s2, "compiles"), 1);
  assert_int_equal(stat_field(&s2, "malformed_frames"), 0);
  dmn_stop(&d);
}

/* A first look at a large program is answered at once with an ERROR that
 * leaves the connection usable (the process's own file first), without
 * keying it (a parse of a hundred milliseconds); a plain GET of it is
 * keyed and compiled as ever, and later first looks are still not keyed
 * (the process's file has the row its GET led to). */
static void test_first_look_large(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  size_t len;
  char *src = slow_source(2u << 20, 'f', &len);
  int fd = client(&d);
  xpd_buf b = {0};
  build_get_src(&b, 3, src, len, "saxpy", "f32", 0);
  xpd_put_u64(&b, XPD_F_FIRST, 1);
  uint64_t t0 = xpd_now_ms();
  send_frame(fd, &b);
  uint8_t *pl = NULL;
  xpd_msg m;
  xpd_header h = read_reply(fd, 30000, &pl, &m);
  uint64_t ms = xpd_now_ms() - t0;
  assert_int_equal(h.id, 3);
  if (h.op != XPD_ERROR)
    fail_msg("a first look at a 2 MB program: operation %u, not ERROR", h.op);
  {
    char msg[1024] = "";
    xpd_get_str(&m, XPD_F_MESSAGE, true, msg, sizeof msg);
    print_message("answered: %s\n", msg);
  }
  free(pl);
  stats s;
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "keyed"), 0);
  assert_int_equal(stat_field(&s, "keying"), 0);
  assert_int_equal(stat_field(&s, "first_looks"), 1);
  print_message("a first look at a %zu-byte program answered in %llu ms\n",
                len, (unsigned long long)ms);
  /* the same connection: a plain GET compiles it */
  send_src_get(fd, 4, src, len);
  kreply r;
  read_kernel(fd, 4, 60000, &r, xpd_now_ms());
  assert_int_equal(r.k.v.failed, 0);
  /* a first look again: the file first, not keyed */
  b = (xpd_buf){0};
  build_get_src(&b, 5, src, len, "saxpy", "f32", 0);
  xpd_put_u64(&b, XPD_F_FIRST, 1);
  send_frame(fd, &b);
  h = read_reply(fd, 30000, &pl, &m);
  assert_int_equal(h.id, 5);
  assert_int_equal(h.op, XPD_ERROR);
  free(pl);
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "keyed"), 1);
  assert_int_equal(stat_field(&s, "first_looks"), 2);
  close(fd);
  free(src);
  dmn_stop(&d);
}

static void test_first_look(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, NULL);
  char err[256], db[4200];
  uint8_t *wp = NULL;
  size_t wl = 0;
  int fd = xpd_connect(d.sock, 5000, err, sizeof err, &wp, &wl);
  if (fd < 0)
    fail_msg("connect: %s", err);
  xpd_msg m;
  assert_int_equal(xpd_payload_decode(wp, wl, &m), XPD_E_OK);
  uint64_t dev = 0, ino = 0;
  assert_int_equal(xpd_get_u64(&m, XPD_F_CACHE_DEV, false, &dev), XPD_E_OK);
  assert_int_equal(xpd_get_u64(&m, XPD_F_CACHE_INO, false, &ino), XPD_E_OK);
  free(wp);
  snprintf(db, sizeof db, "%s/cache/cache-v%d.db", base,
           XPJ_CACHE_SCHEMA_VERSION);
  struct stat sb;
  assert_int_equal(stat(db, &sb), 0);
  assert_true(dev == (uint64_t)sb.st_dev && ino == (uint64_t)sb.st_ino);
  /* nothing compiled: PENDING, then the compile */
  first_get(fd, 7, "saxpy", 1);
  expect_first(fd, 7, true, 0);
  expect_first(fd, 7, false, XPD_FROM_COMPILED);
  /* a compile under way: waited for; a second first look of it is not
   * keyed again */
  int fs = client(&d), f2 = client(&d);
  xpd_buf b = {0};
  build_get(&b, 8, "slow", 0);
  send_frame(fs, &b);
  first_get(fd, 9, "slow", 1);
  expect_first(fd, 9, true, 0);
  stats s;
  /* the plain GET's keying may still be on a parse thread: settled first */
  uint64_t until = xpd_now_ms() + 30000;
  do
    get_stats(&d, &s);
  while (stat_field(&s, "keying") && xpd_now_ms() < until);
  if (stat_field(&s, "keying"))
    fail_msg("%llu keyings still under way after 30 s; the daemon's log:\n%s",
             (unsigned long long)stat_field(&s, "keying"), slurp(d.log));
  uint64_t keyed = stat_field(&s, "keyed");
  first_get(f2, 12, "slow", 1);
  expect_first(f2, 12, true, 0);
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "keyed"), keyed);
  assert_int_equal(stat_field(&s, "first_waits"), 3);
  kreply r;
  read_kernel(fs, 8, 30000, &r, xpd_now_ms());
  /* compiled for it, or for the first look keyed before it */
  assert_true(r.k.origin == XPD_FROM_COMPILED ||
              r.k.origin == XPD_FROM_WAITED);
  assert_int_equal(r.k.v.failed, 0);
  expect_first(fd, 9, false, -1);
  expect_first(f2, 12, false, -1);
  close(fs);
  close(f2);
  /* compiled: from memory; after a restart, from the cache file; no
   * PENDING either time */
  for (int round = 0; round < 2; round++) {
    if (round == 1) {
      close(fd);
      dmn_stop(&d);
      dmn_start(&d, NULL, NULL);
      fd = client(&d);
    }
    first_get(fd, 10, "saxpy", 1);
    expect_first(fd, 10, false,
                 round == 0 ? XPD_FROM_MEMORY : XPD_FROM_CACHE);
  }
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "first_looks"), 1);
  assert_int_equal(stat_field(&s, "first_waits"), 0);
  assert_int_equal(stat_field(&s, "compiles"), 0);
  first_get(fd, 11, "saxpy", 2);
  expect_error_close(fd, "FIRST 2");
  dmn_stop(&d);
}

/* A first look that says how long it waits (FIRST_WAIT) is told PENDING
 * only when the compile has not answered by half of that: a compile that
 * ends sooner is answered alone (pendings_spared); one that takes longer
 * gets PENDING when half the wait is gone, then its answer; a failure
 * that comes sooner (a crashed worker) still comes after PENDING, as the
 * client's walk counts on; FIRST_WAIT without FIRST, or past an hour, is
 * malformed. */
static void test_first_look_held(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  /* slow hangs (until its 3 s timeout), boom crashes its worker */
  dmn_start(&d, "hang:slow", (const char *const[]){"--workers", "2", NULL});
  /* libxpjit's first look (on the daemon's own cache file) says how long
   * it waits: its PENDING is held */
  char db[4200];
  snprintf(db, sizeof db, "%s/cache/cache-v%d.db", base,
           XPJ_CACHE_SCHEMA_VERSION);
  saxpy_from_daemon(&d, db, 0, XPJ_ORIGIN_DAEMON);
  stats s;
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "first_waits"), 1);
  assert_int_equal(stat_field(&s, "pendings_held"), 1);
  uint64_t spared = stat_field(&s, "pendings_spared");
  int fd = client(&d);
  /* a compile well inside half of 60 s: the KERNEL alone */
  first_get_wait(fd, 7, "saxpy", "f64", 1, 60000, 0);
  expect_first(fd, 7, false, XPD_FROM_COMPILED);
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "first_waits"), 2);
  assert_int_equal(stat_field(&s, "pendings_held"), 2);
  assert_int_equal(stat_field(&s, "pendings_spared"), spared + 1);
  /* a compile that outlasts half of 400 ms: PENDING at 200 ms, then the
   * compile's answer (it timed out) */
  uint64_t t0 = xpd_now_ms();
  first_get_wait(fd, 8, "slow", "f32", 1, 400, 3000);
  expect_first(fd, 8, true, 0);
  uint64_t took = xpd_now_ms() - t0;
  if (took < 195 || took > 2500)
    fail_msg("PENDING of a first look that waits 400 ms came after %llu ms, "
             "not about 200", (unsigned long long)took);
  kreply r;
  read_kernel(fd, 8, 30000, &r, t0);
  assert_int_equal(r.k.v.failed, 1);
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "pendings_held"), 3);
  assert_int_equal(stat_field(&s, "pendings_spared"), spared + 1);
  /* no FIRST_WAIT: PENDING at once, as before */
  t0 = xpd_now_ms();
  first_get_wait(fd, 9, "slow", "f64", 1, 0, 1000);
  expect_first(fd, 9, true, 0);
  if (xpd_now_ms() - t0 > 900)
    fail_msg("PENDING without FIRST_WAIT took %llu ms",
             (unsigned long long)(xpd_now_ms() - t0));
  read_kernel(fd, 9, 30000, &r, t0);
  assert_int_equal(r.k.v.failed, 1);
  assert_int_equal(stat1(&d, "pendings_held"), 3);
  close(fd);
  dmn_stop(&d);
  /* a worker that crashes at once: PENDING first, then the failure */
  dmn_init(&d, "s2");
  make_dir(&d);
  dmn_start(&d, "crash:boom", (const char *const[]){"--workers", "1", NULL});
  fd = client(&d);
  first_get_wait(fd, 10, "boom", "f32", 1, 60000, 0);
  expect_first(fd, 10, true, 0);
  read_kernel(fd, 10, 30000, &r, xpd_now_ms());
  assert_int_equal(r.k.v.failed, 1);
  assert_int_equal(r.k.transient, 1);
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "pendings_held"), 1);
  assert_int_equal(stat_field(&s, "pendings_spared"), 0);
  /* malformed: FIRST_WAIT without FIRST; past an hour */
  first_get_wait(fd, 11, "saxpy", "f32", 0, 100, 0);
  expect_error_close(fd, "FIRST_WAIT without FIRST");
  fd = client(&d);
  first_get_wait(fd, 12, "saxpy", "f32", 1, XPD_MAX_TIMEOUT_MS + 1ull, 0);
  expect_error_close(fd, "FIRST_WAIT past an hour");
  dmn_stop(&d);
}

/* --memory-limit: what does not fit is evicted from memory and found
 * again in the cache file. */
static void test_memory_limit(void **state) {
  (void)state;
  dmn d;
  dmn_init(&d, "s");
  make_dir(&d);
  dmn_start(&d, NULL, (const char *const[]){"--memory-limit", "1", NULL});
  int fd = client(&d);
  kreply r;
  get_kernel(fd, "saxpy", &r);
  assert_int_equal(r.k.origin, XPD_FROM_COMPILED);
  get_kernel(fd, "saxpy", &r);
  assert_int_equal(r.k.v.failed, 0);
  assert_int_equal(r.k.origin, XPD_FROM_CACHE);
  close(fd);
  stats s;
  get_stats(&d, &s);
  assert_int_equal(stat_field(&s, "evictions"), 2);
  assert_int_equal(stat_field(&s, "entries"), 0);
  assert_int_equal(stat_field(&s, "memory_bytes"), 0);
  assert_int_equal(stat_field(&s, "compiles"), 1);
  dmn_stop(&d);
}

int main(void) {
  test_owner_init();
  signal(SIGPIPE, SIG_IGN);
  signal(SIGALRM, watchdog);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_sd_notify, setup, teardown),
      cmocka_unit_test_setup_teardown(test_truncated_frames, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_bad_headers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_payloads, setup, teardown),
      cmocka_unit_test_setup_teardown(test_non_utf8_strings, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_slow_client, setup, teardown),
      cmocka_unit_test_setup_teardown(test_vanishing_client, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_client_never_reads, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_client_reads_slowly, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_pipelining_reader, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_half_close, setup, teardown),
      cmocka_unit_test_setup_teardown(test_thousand_connections, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_single_flight, setup, teardown),
      cmocka_unit_test_setup_teardown(test_outstanding_limit, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_connection_limits, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_claimed_payloads, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_stats_long_cache_path, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_worker_crash, setup, teardown),
      cmocka_unit_test_setup_teardown(test_worker_hang, setup, teardown),
      cmocka_unit_test_setup_teardown(test_worker_ends_with_daemon, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_binary_deleted, setup, teardown),
      cmocka_unit_test_setup_teardown(test_spawn_failure, setup, teardown),
      cmocka_unit_test_setup_teardown(test_queued_job_dropped, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_fairness, setup, teardown),
      cmocka_unit_test_setup_teardown(test_coalesced_moves_up, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_memory_rejected_sources, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_memory_announced, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_memory_given_back, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_remembered_timeout, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_remembered_waiter_beyond_limit,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_remembered_beyond_limit, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_worker_out_of_memory, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_worker_keeps_bounded, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_unsafe_socket_dirs, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_stale_socket, setup, teardown),
      cmocka_unit_test_setup_teardown(test_live_socket, setup, teardown),
      cmocka_unit_test_setup_teardown(test_loser_waits_for_pid, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_simultaneous_start, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_peer_uid, setup, teardown),
      cmocka_unit_test_setup_teardown(test_squatted_socket, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sigterm_in_flight, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_sigterm_unread_client, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_first_look, setup, teardown),
      cmocka_unit_test_setup_teardown(test_first_look_held, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_first_look_large, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_lookup, setup, teardown),
      cmocka_unit_test_setup_teardown(test_source_get, setup, teardown),
      cmocka_unit_test_setup_teardown(test_read_reply, setup, teardown),
      cmocka_unit_test_setup_teardown(test_call_waits, setup, teardown),
      cmocka_unit_test_setup_teardown(test_signal_at_start, setup, teardown),
      cmocka_unit_test_setup_teardown(test_signals_ignored, setup, teardown),
      cmocka_unit_test_setup_teardown(test_waiters_unread, setup, teardown),
      cmocka_unit_test_setup_teardown(test_idle_and_shutdown, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_cache_across_restart, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_memory_limit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_parse_off_loop, setup, teardown),
      cmocka_unit_test_setup_teardown(test_disconnect_during_parse, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_shutdown_during_parse, setup,
                                      teardown),
  };
  /* XPJD_TEST_FILTER=test_slow*: run some tests only */
  if (getenv("XPJD_TEST_FILTER"))
    cmocka_set_test_filter(getenv("XPJD_TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
