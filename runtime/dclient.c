/* dclient.c - libxpjit's side of xpjitd (docs/daemon.md): find the socket,
 * connect, check that the daemon is this user's, and ask it for kernels.
 * Anything that goes wrong (no socket, a refused or slow connection, a
 * different version, a daemon killed mid-request, a reply that does not
 * decode or names another key) makes rt_dc_get return false and the
 * caller compiles in-process: the application never sees a daemon error.
 * This file is the daemon tier (tier.h): after the local tiers, before
 * the cluster's Redis, which the daemon asks itself.
 *
 * A GET waits at most XPJIT_DAEMON_TIMEOUT (10 s by default), queue and
 * compile together. A daemon that cannot answer in time (its workers
 * hang, or are busy with longer compiles) costs the process that wait
 * once; then it is left alone for a while (1 s, doubling up to 60 s, as
 * after a failed connection), and asked again with a wait of at most 1 s
 * until an answer comes in time.
 *
 * A first look (before the process opens its cache file, kcache.c fetch)
 * asks only a daemon that keeps that very file. The daemon answers from
 * its memory (a kernel) or that file, and only once the file has no row
 * does it compile or wait for a compile, after saying so (PENDING). The
 * process waits at most RT_DC_FIRST_MS, greeting included, for the answer
 * or PENDING, and after PENDING as for any GET; without either it opens
 * its cache file and asks no more first looks, and the daemon is not
 * backed off from. A failure comes only after PENDING, when the file has
 * no row: what the walk would get from the daemon too.
 *
 * Connections are kept per context after their handshake and reused, one
 * request at a time each; a forked child never reuses its parent's. */
#define _GNU_SOURCE /* struct ucred */
#include "daemon.h"
#include "rt.h"
#include "tier.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static char vers_buf[128];
static pthread_once_t vers_once = PTHREAD_ONCE_INIT;
static void vers_init(void) { xpj_versions_str(vers_buf, sizeof vers_buf); }
static const char *versions(void) {
  pthread_once(&vers_once, vers_init);
  return vers_buf;
}

uint64_t xpd_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

bool xpd_default_path(char *buf, size_t size) {
  const char *rt = getenv("XDG_RUNTIME_DIR");
  int n;
  if (rt && rt[0] == '/')
    n = snprintf(buf, size, "%s/xpjit/xpjitd.sock", rt);
  else
    n = snprintf(buf, size, "/tmp/xpjit-%u/xpjitd.sock",
                 (unsigned)geteuid());
  return n > 0 && (size_t)n < size && (size_t)n < sizeof(
                                          ((struct sockaddr_un *)0)->sun_path);
}

bool xpd_env_path(char *buf, size_t size) {
  return xpd_setting_path(getenv("XPJIT_DAEMON"), buf, size);
}

bool xpd_setting_path(const char *e, char *buf, size_t size) {
  buf[0] = 0;
  if (!e || !*e || !strcmp(e, "auto"))
    return xpd_default_path(buf, size);
  if (!strcmp(e, "off") || !strcmp(e, "0") || !strcmp(e, "no"))
    return true;
  int n = snprintf(buf, size, "%s", e);
  if (n <= 0 || (size_t)n >= size ||
      (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
    buf[0] = 0;
    return false;
  }
  return true;
}

static int wait_fd(int fd, short ev, uint64_t deadline) {
  for (;;) {
    uint64_t now = xpd_now_ms();
    if (now >= deadline)
      return 0;
    struct pollfd p = {fd, ev, 0};
    int r = poll(&p, 1, (int)(deadline - now));
    if (r < 0 && errno == EINTR)
      continue;
    return r;
  }
}

bool xpd_write_all(int fd, const void *p, size_t n, uint64_t deadline) {
  const uint8_t *b = p;
  while (n) {
    ssize_t w = send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      b += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (wait_fd(fd, POLLOUT, deadline) <= 0)
        return false;
      continue;
    }
    return false;
  }
  return true;
}

/* Reads at least want and at most cap bytes into b: the count, or -1 on
 * EOF, error or timeout (why in err). Never blocks in recv: poll waits
 * for the bytes, first of all when wait_first says they cannot be there
 * yet (the answer to a request just sent). A recv blocked on a Unix
 * socket is woken whenever its peer reads what this process sent
 * (unix_write_space wakes every sleeper on the socket; poll's wake-up
 * sees that it asked for POLLIN, not POLLOUT, and sleeps on): a blocking
 * recv cost every daemon answer a second wake-up, two switches per GET of
 * a start-up storm instead of one. */
static ssize_t read_some(int fd, uint8_t *b, size_t want, size_t cap,
                         uint64_t deadline, bool wait_first, char *err,
                         size_t errsize) {
  size_t got = 0;
  bool wait = wait_first;
  while (got < want) {
    if (wait) {
      int w = wait_fd(fd, POLLIN, deadline);
      if (w <= 0) {
        snprintf(err, errsize, w == 0 ? "timed out waiting for the daemon"
                                      : "poll: %s", strerror(errno));
        return -1;
      }
    }
    ssize_t r = recv(fd, b + got, cap - got, MSG_DONTWAIT);
    wait = false;
    if (r > 0) {
      got += (size_t)r;
      continue;
    }
    if (r == 0) {
      snprintf(err, errsize, "connection closed by the daemon");
      return -1;
    }
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait = true;
      continue;
    }
    snprintf(err, errsize, "reading from the daemon: %s", strerror(errno));
    return -1;
  }
  return (ssize_t)got;
}

/* Reads exactly n bytes; 0 ok, -1 EOF/error/timeout (why in err). */
static int read_n(int fd, uint8_t *b, size_t n, uint64_t deadline,
                  char *err, size_t errsize) {
  return read_some(fd, b, n, n, deadline, false, err, errsize) < 0 ? -1 : 0;
}

/* One frame: its header and up to cap - XPD_HEADER bytes of what follows
 * with the first reads into buf (cap XPD_HEADER: the header alone), the
 * rest of the payload after them. Bytes read past the frame are the
 * daemon's error. wait_first: the frame cannot have come yet (read_some). */
static xpd_err read_frame_into(int fd, uint8_t *buf, size_t cap, uint32_t max,
                               uint64_t deadline, bool wait_first,
                               xpd_header *h, uint8_t **payload, char *err,
                               size_t errsize) {
  *payload = NULL;
  ssize_t n = read_some(fd, buf, XPD_HEADER, cap, deadline, wait_first, err,
                        errsize);
  if (n < 0)
    return XPD_E_SHORT;
  xpd_err e = xpd_header_decode(buf, XPD_HEADER, max, h);
  if (e != XPD_E_OK) {
    snprintf(err, errsize, "bad frame from the daemon: %s", xpd_err_str(e));
    return e;
  }
  size_t have = (size_t)n - XPD_HEADER;
  if (have > h->len) { /* a second frame: no request here asks for one */
    snprintf(err, errsize, "the daemon sent %zu bytes after its reply",
             have - h->len);
    return XPD_E_OP;
  }
  if (!h->len)
    return XPD_E_OK;
  uint8_t *p = malloc(h->len);
  if (!p) {
    snprintf(err, errsize, "out of memory");
    return XPD_E_TOO_BIG;
  }
  memcpy(p, buf + XPD_HEADER, have);
  if (read_n(fd, p + have, h->len - have, deadline, err, errsize)) {
    free(p);
    return XPD_E_SHORT;
  }
  *payload = p;
  return XPD_E_OK;
}

xpd_err xpd_read_frame(int fd, uint32_t max, uint64_t deadline,
                       xpd_header *h, uint8_t **payload, char *err,
                       size_t errsize) {
  uint8_t hb[XPD_HEADER];
  return read_frame_into(fd, hb, sizeof hb, max, deadline, false, h, payload,
                         err, errsize);
}

xpd_err xpd_read_reply(int fd, uint32_t max, uint64_t deadline,
                       xpd_header *h, uint8_t **payload, char *err,
                       size_t errsize) {
  uint8_t buf[8192];
  return read_frame_into(fd, buf, sizeof buf, max, deadline, false, h,
                         payload, err, errsize);
}

/* Sends b on a connection of xpd_connect's, then reads its answer: one
 * frame (whole false: nothing past it is read), or a reply read whole
 * (with one recv when it is small); waited for in poll. */
static xpd_err call(int fd, const xpd_buf *b, uint32_t max, int timeout_ms,
                    bool whole, xpd_header *h, uint8_t **payload, char *err,
                    size_t errsize) {
  uint64_t deadline = xpd_now_ms() + (uint64_t)timeout_ms;
  *payload = NULL;
  if (b->oom) {
    snprintf(err, errsize, "out of memory");
    return XPD_E_TOO_BIG;
  }
  if (!xpd_write_all(fd, b->p, b->len, deadline)) {
    snprintf(err, errsize, "writing to the daemon: %s",
             errno ? strerror(errno) : "timed out");
    return XPD_E_SHORT;
  }
  uint8_t buf[8192];
  return read_frame_into(fd, buf, whole ? sizeof buf : XPD_HEADER, max,
                         deadline, true, h, payload, err, errsize);
}

xpd_err xpd_call(int fd, const xpd_buf *b, uint32_t max, int timeout_ms,
                 xpd_header *h, uint8_t **payload, char *err,
                 size_t errsize) {
  return call(fd, b, max, timeout_ms, false, h, payload, err, errsize);
}

xpd_err xpd_call_one(int fd, const xpd_buf *b, uint32_t max, int timeout_ms,
                     xpd_header *h, uint8_t **payload, char *err,
                     size_t errsize) {
  return call(fd, b, max, timeout_ms, true, h, payload, err, errsize);
}

int xpd_connect(const char *path, int timeout_ms, char *err, size_t errsize,
                uint8_t **welcome, size_t *welcome_len) {
  if (welcome)
    *welcome = NULL;
  if (welcome_len)
    *welcome_len = 0;
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof a.sun_path) {
    snprintf(err, errsize, "socket path too long: %s", path);
    return -1;
  }
  strcpy(a.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    snprintf(err, errsize, "socket: %s", strerror(errno));
    return -1;
  }
  uint64_t deadline = xpd_now_ms() + (uint64_t)timeout_ms;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    /* a Unix socket connects at once or not at all (EAGAIN: backlog full) */
    snprintf(err, errsize, "cannot connect to %s: %s", path,
             strerror(errno));
    close(fd);
    return -1;
  }
  struct ucred cr;
  socklen_t cl = sizeof cr;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
    snprintf(err, errsize, "%s: whose it is cannot be told (%s): not used",
             path, strerror(errno));
    close(fd);
    return -1;
  }
  if (cr.uid != geteuid()) {
    snprintf(err, errsize, "%s is served by uid %u, not this user (%u): "
             "not used", path, (unsigned)cr.uid, (unsigned)geteuid());
    close(fd);
    return -2;
  }
  xpd_buf b = {0};
  xpd_begin(&b, XPD_HELLO, 0);
  xpd_put_u64(&b, XPD_F_PROTO, XPD_VERSION);
  xpd_put_str(&b, XPD_F_VERSIONS, versions());
  xpd_put_u64(&b, XPD_F_PID, (uint64_t)getpid());
  xpd_end(&b, 0);
  xpd_header h;
  uint8_t *pl = NULL;
  int left = (int)(deadline > xpd_now_ms() ? deadline - xpd_now_ms() : 1);
  xpd_err e = xpd_call(fd, &b, 1u << 20, left, &h, &pl, err, errsize);
  xpd_buf_free(&b);
  if (e == XPD_E_OK && h.op == XPD_ERROR) {
    xpd_msg m;
    char msg[512] = "";
    if (xpd_payload_decode(pl, h.len, &m) == XPD_E_OK)
      xpd_get_str(&m, XPD_F_MESSAGE, true, msg, sizeof msg);
    snprintf(err, errsize, "the daemon refused: %s", msg);
    e = XPD_E_OP;
  } else if (e == XPD_E_OK && h.op != XPD_WELCOME) {
    snprintf(err, errsize, "the daemon answered HELLO with operation %u",
             h.op);
    e = XPD_E_OP;
  }
  if (e != XPD_E_OK) {
    free(pl);
    close(fd);
    return -1;
  }
  if (welcome) {
    *welcome = pl;
    if (welcome_len)
      *welcome_len = h.len;
  } else {
    free(pl);
  }
  return fd;
}

/* ---- the runtime's client ---- */

#define RT_DC_WAIT_MS 10000 /* XPJIT_DAEMON_TIMEOUT's default */
#define RT_DC_PROBE_MS 1000 /* the wait after an answer came too late */
#define RT_DC_FIRST_MS 100  /* a first look's longest wait */

/* setting: xpj_context_desc.daemon, else XPJIT_DAEMON (NULL: auto) */
static void rt_dc_init(rt_dc *dc, const char *setting, const char *what) {
  memset(dc, 0, sizeof *dc);
  pthread_mutex_init(&dc->mu, NULL);
  dc->wait_ms = RT_DC_WAIT_MS;
  uint64_t ms;
  int got = xpj_env_uint("XPJIT_DAEMON_TIMEOUT", 1, 3600000, &ms);
  if (got == 1)
    dc->wait_ms = ms;
  else if (got < 0 && xpj_env_first_complaint("XPJIT_DAEMON_TIMEOUT"))
    rt_warn("XPJIT_DAEMON_TIMEOUT: '%.64s' is not a time in ms (1 to "
            "3600000); %d is used", xpj_env("XPJIT_DAEMON_TIMEOUT"),
            RT_DC_WAIT_MS);
  char path[sizeof dc->path];
  bool env = !strcmp(what, "XPJIT_DAEMON");
  if (!xpd_setting_path(setting, path, sizeof path)) {
    if (!env || xpj_env_first_complaint("XPJIT_DAEMON"))
      rt_warn("%s: socket path too long; the daemon is not used", what);
    dc->mode = RT_DC_OFF;
    return;
  }
  /* a relative path would depend on the working directory: a typo of
   * "auto" or "off" more likely than a socket */
  if (path[0] && path[0] != '/') {
    if (!env || xpj_env_first_complaint("XPJIT_DAEMON"))
      rt_warn("%s=%.64s is not auto, off or an absolute socket path; the "
              "daemon is not used", what, setting);
    dc->mode = RT_DC_OFF;
    return;
  }
  if (!path[0]) {
    dc->mode = RT_DC_OFF;
    return;
  }
  dc->mode = (!setting || !*setting || !strcmp(setting, "auto"))
                 ? RT_DC_AUTO
                 : RT_DC_PATH;
  snprintf(dc->path, sizeof dc->path, "%s", path);
}

static void rt_dc_fini(rt_dc *dc) {
  if (dc->idle_pid == (int)getpid())
    for (unsigned i = 0; i < dc->nidle; i++)
      close(dc->idle[i]);
  dc->nidle = 0;
  pthread_mutex_destroy(&dc->mu);
}

/* After a failure (a connection refused or not greeted in time, an
 * answer past the deadline): no request before retry_ms, and later each
 * time: 1 s, 2 s, ... 60 s. Under dc->mu. */
static void backoff_locked(rt_dc *dc) {
  dc->backoff_ms = dc->backoff_ms ? dc->backoff_ms * 2 : 1000;
  if (dc->backoff_ms > 60000)
    dc->backoff_ms = 60000;
  dc->retry_ms = xpd_now_ms() + dc->backoff_ms;
}

/* A connection: an idle one, or a new one greeted by deadline (1 s at
 * most); -1 when there is no daemon (*tried false), while backing off
 * from it, or when none is to be had (then the next try waits a while;
 * for a first look, there is no first look again). */
static int take_conn(rt_dc *dc, uint64_t deadline, bool first, bool *reused,
                     bool *tried, char *why, size_t why_size) {
  *tried = false;
  *reused = false;
  pthread_mutex_lock(&dc->mu);
  if (dc->idle_pid != (int)getpid()) { /* forked: the parent's, not ours */
    for (unsigned i = 0; i < dc->nidle; i++)
      close(dc->idle[i]); /* our copies only; the parent keeps its own */
    dc->nidle = 0;
    dc->idle_pid = (int)getpid();
  }
  uint64_t now = xpd_now_ms();
  if (now < dc->retry_ms) {
    snprintf(why, why_size, "backing off after a failure, %llu ms more",
             (unsigned long long)(dc->retry_ms - now));
    pthread_mutex_unlock(&dc->mu);
    return -1;
  }
  if (dc->nidle) {
    int fd = dc->idle[--dc->nidle];
    pthread_mutex_unlock(&dc->mu);
    *reused = true;
    return fd;
  }
  pthread_mutex_unlock(&dc->mu);
  struct stat st;
  if (stat(dc->path, &st) != 0 || !S_ISSOCK(st.st_mode))
    return -1; /* no daemon: the common case, and cheap */
  *tried = true;
  char err[512];
  uint8_t *wp = NULL;
  size_t wl = 0;
  /* a live daemon answers HELLO in microseconds; a stopped one must not
   * cost much, and costs less each time (the back-off below) */
  int greet = deadline > now + 1000 ? 1000 : deadline > now
                                               ? (int)(deadline - now)
                                               : 1;
  int fd = xpd_connect(dc->path, greet, err, sizeof err, &wp, &wl);
  bool ok = fd >= 0;
  if (!ok)
    snprintf(why, why_size, "%s", err);
  /* another user serves this user's socket path: someone took it (a
   * daemon path in /tmp made before this user's daemon), which no one
   * learnt below XPJIT_LOG=info. Said once per process */
  static atomic_bool squat_told;
  if (fd == -2 && !atomic_exchange(&squat_told, true))
    rt_warn("daemon: %s; kernels are compiled here. Someone else holds "
            "this path: set XPJIT_DAEMON to a socket of your own (or "
            "XDG_RUNTIME_DIR) and start xpjitd there", err);
  char cache[sizeof dc->daemon_cache] = "";
  uint64_t proto = 0, caps = 0, cdev = 0, cino = 0;
  bool id = false;
  if (ok) {
    xpd_msg m;
    char vers[256];
    ok = xpd_payload_decode(wp, wl, &m) == XPD_E_OK &&
         xpd_get_u64(&m, XPD_F_PROTO, false, &proto) == XPD_E_OK &&
         xpd_get_u64(&m, XPD_F_CAPS, false, &caps) == XPD_E_OK &&
         xpd_get_str(&m, XPD_F_VERSIONS, false, vers, sizeof vers) ==
             XPD_E_OK &&
         xpd_get_str(&m, XPD_F_CACHE_PATH, true, cache, sizeof cache) ==
             XPD_E_OK &&
         xpd_get_u64(&m, XPD_F_CACHE_DEV, true, &cdev) == XPD_E_OK &&
         xpd_get_u64(&m, XPD_F_CACHE_INO, true, &cino) == XPD_E_OK &&
         proto == XPD_VERSION && (caps & XPD_CAP_GET) &&
         !strcmp(vers, versions());
    id = ok && xpd_find(&m, XPD_F_CACHE_DEV) && xpd_find(&m, XPD_F_CACHE_INO);
    if (!ok) {
      snprintf(why, why_size, "its greeting does not match (protocol %llu, "
               "this process speaks %d; or another xpjit or LLVM version)",
               (unsigned long long)proto, XPD_VERSION);
      close(fd);
      fd = -1;
    }
  }
  free(wp);
  pthread_mutex_lock(&dc->mu);
  if (ok) { /* the back-off ends when a request is answered in time */
    snprintf(dc->daemon_cache, sizeof dc->daemon_cache, "%s", cache);
    dc->daemon_id = id;
    dc->daemon_dev = cdev;
    dc->daemon_ino = cino;
    dc->daemon_redis = (caps & XPD_CAP_REDIS) != 0;
    dc->daemon_lookup = (caps & XPD_CAP_LOOKUP) != 0;
  } else if (first) { /* its own short wait: the walk asks again */
    dc->no_first = true;
  } else { /* refused, stale, hung, another version: ask again later */
    backoff_locked(dc);
  }
  pthread_mutex_unlock(&dc->mu);
  return fd;
}

/* Whether the daemon's cache file (its greeting said which) is the file
 * at path: the same device and inode, not only the same name. */
static bool keeps_file(rt_dc *dc, const char *path) {
  struct stat sb;
  if (!path || !*path || stat(path, &sb) != 0)
    return false;
  pthread_mutex_lock(&dc->mu);
  bool same = dc->daemon_id && dc->daemon_dev == (uint64_t)sb.st_dev &&
              dc->daemon_ino == (uint64_t)sb.st_ino;
  pthread_mutex_unlock(&dc->mu);
  return same;
}

static void give_conn(rt_dc *dc, int fd) {
  pthread_mutex_lock(&dc->mu);
  if (dc->nidle < RT_DC_IDLE && dc->idle_pid == (int)getpid())
    dc->idle[dc->nidle++] = fd;
  else
    close(fd);
  pthread_mutex_unlock(&dc->mu);
}

/* A LOOKUP's answer that asks for the GET: an ERROR XPJ_ERR_NOT_FOUND. */
static bool asks_for_get(const xpd_header *h, const uint8_t *pl) {
  xpd_msg m;
  uint64_t status = 0;
  return h->op == XPD_ERROR && xpd_payload_decode(pl, h->len, &m) == XPD_E_OK &&
         xpd_get_u64(&m, XPD_F_STATUS, false, &status) == XPD_E_OK &&
         status == (uint64_t)XPJ_ERR_NOT_FOUND;
}

/* One request on fd and its answer by taken_by; after a first look's
 * PENDING, the answer that follows by deadline (*pending set). */
static xpd_err ask(int fd, const xpd_buf *b, bool first, uint64_t taken_by,
                   uint64_t deadline, xpd_header *h, uint8_t **pl,
                   bool *pending, char *err, size_t errsize) {
  uint64_t now = xpd_now_ms();
  if (now >= taken_by) {
    *pl = NULL;
    snprintf(err, errsize, "timed out waiting for the daemon");
    return XPD_E_SHORT;
  }
  /* a first look may be told PENDING, with its answer behind it: read
   * frame by frame; any other request has one frame for its answer, read
   * with one recv when it is small */
  xpd_err e;
  if (first) {
    e = xpd_call(fd, b, XPD_MAX_REPLY, (int)(taken_by - now), h, pl, err,
                 errsize);
  } else {
    e = xpd_call_one(fd, b, XPD_MAX_REPLY, (int)(taken_by - now), h, pl, err,
                     errsize);
  }
  if (first && e == XPD_E_OK && h->op == XPD_PENDING) {
    /* no row in the file: its compile, waited for as the walk would */
    *pending = true;
    free(*pl);
    *pl = NULL;
    e = xpd_read_frame(fd, XPD_MAX_REPLY, deadline, h, pl, err, errsize);
  }
  return e;
}

/* A kernel from xpjitd. On 1, *payload (free it) holds the reply and k
 * points into it; *same_cache says the daemon wrote it to the cache file
 * at l2_path already (a failure it remembers for a while only carries
 * k->expires_ms: stored, it must expire too). 0: no daemon, or (first) a
 * first look that did not end in a kernel (a daemon that keeps another
 * cache file, no answer or PENDING in RT_DC_FIRST_MS, an ERROR before
 * PENDING): the walk asks again after the cache file; -1: it could not
 * serve (for a first look: after PENDING), or not before the deadline
 * (the caller goes on). A daemon that answers LOOKUP is asked for the
 * kernel by its digest first, without the source: a kernel in its memory
 * costs a request of a hundred bytes; it asks for the GET otherwise. */
static int rt_dc_get(rt_dc *dc, const rt_request *rq, const char *digest,
                     const char *l2_path, bool first, xpd_kernel *k,
                     uint8_t **payload, bool *same_cache, char *why,
                     size_t why_size) {
  /* digest NULL: a request the caller has not keyed (asked by its source
   * alone, kcache.c daemon_by_source): a GET without DIGEST, which the
   * daemon keys (once for every process that asks the same); only a
   * kernel answers it (the caller keys the request for anything else) */
  const rt_source *src = &rq->src;
  const char *kernel = rq->kernel, *dtypes = rq->dtypes;
  const char *tstr = rq->target_str;
  const xpj_compile_opts *o = rq->o;
  unsigned ndim = rq->ndim;
  *payload = NULL;
  if (dc->mode == RT_DC_OFF || !src || !src->text ||
      src->len > XPD_MAX_SOURCE || strlen(kernel) >= 256 ||
      strlen(dtypes) >= 256 || strlen(tstr) >= 1200)
    return 0;
  /* the limit a compile here would have: the daemon stops it there (at
   * most the protocol's hour) */
  uint64_t timeout_ms = o->timeout_ms ? o->timeout_ms : XPJ_COMPILE_TIMEOUT_MS;
  if (timeout_ms > XPD_MAX_TIMEOUT_MS)
    timeout_ms = XPD_MAX_TIMEOUT_MS;
  xpd_buf lb = {0}, b = {0};
  /* queue and compile together: beyond this the process compiles the
   * kernel itself (the daemon finishes it for the next process) */
  pthread_mutex_lock(&dc->mu);
  uint64_t wait = dc->probing && dc->wait_ms > RT_DC_PROBE_MS
                      ? RT_DC_PROBE_MS
                      : dc->wait_ms;
  pthread_mutex_unlock(&dc->mu);
  uint64_t now = xpd_now_ms(), deadline = now + wait;
  /* a first look: greeted, and answered or told PENDING, by this */
  uint64_t taken_by =
      first ? now + (wait < RT_DC_FIRST_MS ? wait : RT_DC_FIRST_MS)
            : deadline;
  bool served = false, tried = false, answered = false, late = false,
       pending = false, looked = false;
  for (int attempt = 0; attempt < 2 && !served; attempt++) {
    bool reused, t;
    int fd = take_conn(dc, taken_by, first, &reused, &t, why, why_size);
    tried = tried || t || reused;
    if (fd < 0)
      break;
    if (first && !keeps_file(dc, l2_path)) { /* the walk's order */
      give_conn(dc, fd);
      break;
    }
    if (xpd_now_ms() >= taken_by) { /* the greeting took it all */
      snprintf(why, why_size, "its greeting took all of %llu ms",
               (unsigned long long)(taken_by + wait - deadline));
      late = !first;
      give_conn(dc, fd);
      pthread_mutex_lock(&dc->mu);
      dc->no_first |= first;
      pthread_mutex_unlock(&dc->mu);
      break;
    }
    pthread_mutex_lock(&dc->mu);
    bool by_digest = digest && dc->daemon_lookup && !looked;
    pthread_mutex_unlock(&dc->mu);
    xpd_header h;
    uint8_t *pl = NULL;
    char err[512];
    xpd_err e = XPD_E_OK;
    bool told = false; /* this attempt was told PENDING */
    /* a first look says how long it waits for PENDING or the answer (the
     * daemon holds PENDING back for up to half of that: a compile that
     * ends sooner is answered alone) */
    uint64_t at = xpd_now_ms(),
             first_wait = first && taken_by > at ? taken_by - at : 0;
    if (by_digest && !lb.len) {
      xpd_lookup l = {.timeout_ms = timeout_ms, .first = first,
                      .first_wait_ms = first_wait};
      memcpy(l.digest, digest, 65);
      xpd_begin(&lb, XPD_LOOKUP, 1);
      xpd_put_lookup(&lb, &l);
      xpd_end(&lb, 0);
    }
    if (by_digest) {
      e = ask(fd, &lb, first, taken_by, deadline, &h, &pl, &told, err,
              sizeof err);
      if (e == XPD_E_OK && asks_for_get(&h, pl)) {
        looked = true; /* not in its memory: the GET, on this connection */
        free(pl);
        pl = NULL;
        by_digest = false;
      }
    }
    if (!by_digest) {
      if (!b.len) {
        xpd_get g = {0};
        g.source = (const uint8_t *)src->text;
        g.source_len = src->len;
        snprintf(g.filename, sizeof g.filename, "%s",
                 src->name ? src->name : "");
        snprintf(g.kernel, sizeof g.kernel, "%s", kernel);
        snprintf(g.dtypes, sizeof g.dtypes, "%s", dtypes);
        g.ndim = ndim;
        snprintf(g.target, sizeof g.target, "%s", tstr);
        g.opt_level = o->opt_level;
        g.fast_math = o->fast_math != 0;
        g.debug = o->debug_info != 0;
        g.checks = o->checks;
        g.contract = o->fp_contract != 0;
        g.first = first;
        g.first_wait_ms = first_wait;
        g.timeout_ms = timeout_ms;
        if (digest)
          memcpy(g.digest, digest, 65);
        xpd_begin(&b, XPD_GET, 1);
        xpd_put_get(&b, &g);
        xpd_end(&b, 0);
      }
      e = ask(fd, &b, first, taken_by, deadline, &h, &pl, &told, err,
              sizeof err);
    }
    pending = pending || told;
    if (first && !told && e == XPD_E_SHORT && xpd_now_ms() >= taken_by) {
      /* no answer in time: the reply may still come, so this connection
       * is not used again; no first look from now on */
      close(fd);
      pthread_mutex_lock(&dc->mu);
      dc->no_first = true;
      pthread_mutex_unlock(&dc->mu);
      snprintf(why, why_size, "a first look not answered within %llu ms",
               (unsigned long long)(taken_by + wait - deadline));
      break;
    }
    answered = answered || e == XPD_E_OK;
    xpd_msg m;
    if (e == XPD_E_OK && h.op == XPD_KERNEL &&
        xpd_payload_decode(pl, h.len, &m) == XPD_E_OK &&
        xpd_kernel_decode(&m, k) == XPD_E_OK &&
        (digest ? !strcmp(k->digest, digest)
                : k->digest[0] && !k->v.failed) &&
        (k->status == XPJ_OK) == !k->v.failed &&
        !(k->v.failed && k->transient)) {
      served = true;
      *payload = pl;
      give_conn(dc, fd);
      break;
    }
    if (e != XPD_E_OK)
      snprintf(why, why_size, "%s (%s)", xpd_err_str(e), err);
    else if (h.op == XPD_ERROR)
      snprintf(why, why_size, "it answered with an error");
    else if (h.op == XPD_KERNEL && k->transient)
      snprintf(why, why_size, "a transient failure (%s%s%.300s)",
               xpj_status_name((xpj_status)k->status),
               k->v.log && *k->v.log ? ": " : "",
               k->v.log ? k->v.log : "");
    else
      snprintf(why, why_size, "an answer it should not have given (op %u)",
               (unsigned)h.op);
    free(pl);
    /* an answer that says "compile it yourself" (an ERROR, a failure)
     * leaves the connection usable */
    if (e == XPD_E_OK && (h.op == XPD_ERROR || h.op == XPD_KERNEL))
      give_conn(dc, fd);
    else
      close(fd);
    /* no answer by the deadline: the reply may still come, so this
     * connection is not used again */
    if (e == XPD_E_SHORT && xpd_now_ms() >= deadline) {
      snprintf(why, why_size, "no answer within %llu ms "
               "(XPJIT_DAEMON_TIMEOUT)", (unsigned long long)wait);
      late = true;
      break;
    }
    /* an idle connection the daemon had closed: once more, afresh */
    if (!(reused && e == XPD_E_SHORT))
      break;
  }
  xpd_buf_free(&lb);
  xpd_buf_free(&b);
  pthread_mutex_lock(&dc->mu);
  if (answered) {
    dc->probing = false;
    dc->backoff_ms = 0;
  } else if (late) { /* leave the daemon alone for a while, then probe */
    dc->probing = true;
    backoff_locked(dc);
  }
  /* the same file: by identity where the greeting gave it, else by name */
  bool by_id = dc->daemon_id;
  bool by_name = l2_path && *l2_path && !strcmp(l2_path, dc->daemon_cache);
  pthread_mutex_unlock(&dc->mu);
  if (served) /* a first look asked only a daemon that keeps the file */
    *same_cache = first || (by_id ? keeps_file(dc, l2_path) : by_name);
  if (first) /* after PENDING, as any GET: the daemon could not serve */
    return served ? 1 : late || pending ? -1 : 0;
  return served ? 1 : tried ? -1 : 0;
}

/* ---- the tier ---- */

static xpj_status open_tier(rt_cc *cc, const xpj_context_desc *desc,
                            void **state) {
  (void)cc;
  rt_dc *dc = malloc(sizeof *dc);
  if (!dc)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  if (desc && desc->daemon)
    /* "" is off here, as for the Redis tier (XPJIT_DAEMON= is auto) */
    rt_dc_init(dc, *desc->daemon ? desc->daemon : "off",
               "xpj_context_desc.daemon");
  else
    rt_dc_init(dc, getenv("XPJIT_DAEMON"), "XPJIT_DAEMON");
  if (dc->mode == RT_DC_OFF) { /* no tier: the walk says "daemon off" */
    rt_dc_fini(dc);
    free(dc);
    dc = NULL;
  }
  *state = dc;
  return XPJ_OK;
}

static void close_tier(void *state) {
  if (state) {
    rt_dc_fini(state);
    free(state);
  }
}

/* Whether a first look may ask this daemon (one went unanswered: no). */
static bool first_looks(rt_dc *dc) {
  pthread_mutex_lock(&dc->mu);
  bool yes = !dc->no_first;
  pthread_mutex_unlock(&dc->mu);
  return yes;
}

/* xpjitd, which compiles each key once for every process. A first look
 * (ob->peek, before the cache file is opened: kcache.c fetch) asks only a
 * daemon that keeps this very cache file: it looks in that file, and in
 * its memory, before it compiles, so it answers what the walk would. */
static bool get(void *state, rt_obtain *ob, fetched *f) {
  rt_dc *dc = state;
  if (!dc || dc->mode == RT_DC_OFF || (ob->peek && !first_looks(dc)))
    return false;
  xpd_kernel dk = {0};
  char why[600] = "";
  int r = rt_dc_get(dc, ob->rq, ob->digest,
                    ob->l2 ? xpj_cache_path(ob->l2) : NULL, ob->peek, &dk,
                    &f->dpay, &f->same_cache, why, sizeof why);
  if (ob->peek && !first_looks(dc)) /* said once: none are taken after */
    xpj_log(XPJ_LOG_INFO, "kernel %s: the daemon at %s: %s; the cache "
            "file is opened, and no first look asked from now on",
            ob->rq->kernel, dc->path, why[0] ? why : "no answer");
  if (r < 0)
    xpj_log(XPJ_LOG_INFO, "kernel %s: the daemon at %s could not serve: %s",
            ob->rq->kernel, dc->path, why[0] ? why : "no reason given");
  f->fell_back = r < 0;
  f->absent = r == 0;
  /* not keyed: the caller counts a fallback, keys the request and asks
   * the whole way (without this tier after a fallback) */
  if (!ob->digest && r != 1)
    return false;
  xpj_cache_counters d = {0};
  d.daemon_hits = r == 1;
  d.daemon_fallbacks = r < 0;
  if (ob->l2 && r)
    xpj_cache_note(ob->l2, &d);
  if (r != 1)
    return false;
  /* this process has a Redis tier, which it leaves to its daemon: say so
   * once when the daemon has none */
  if (ob->cc->tier_state[RT_TIER_redis]) {
    pthread_mutex_lock(&dc->mu);
    bool first = !dc->daemon_redis && !dc->warned_redis;
    dc->warned_redis |= first;
    pthread_mutex_unlock(&dc->mu);
    if (first)
      rt_warn("xpjitd (%s) has no Redis tier: kernels it compiles are not "
              "shared with the cluster; start it with --redis or "
              "XPJIT_REDIS (docs/cluster.md)", dc->path);
  }
  if (!ob->digest)
    memcpy(ob->named, dk.digest, sizeof ob->named);
  /* the record points into the reply (f->dpay) */
  f->origin = XPJ_ORIGIN_DAEMON;
  f->status = (xpj_status)dk.status;
  f->cacheable = !dk.transient;
  f->v = dk.v;
  /* a failure the daemon forgets after a while: so do we */
  f->v.expires_ms = dk.expires_ms ? rt_wall_ms() + (int64_t)dk.expires_ms : 0;
  return true;
}

const rt_tier rt_tier_daemon = {"daemon",   RT_TIER_REMOTE, open_tier,
                                close_tier, get,            NULL,
                                NULL};
