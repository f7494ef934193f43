/* tier_redis.c - the cluster tier: compiled kernels shared by every node
 * of a cluster through one Redis (docs/cache.md, "The Redis tier").
 *
 * Walked after the local tiers and before a compile. A value carries the
 * full cache key it was stored under and a checksum of everything (an
 * HMAC when the cluster shares a secret): a value for another key or
 * version, damaged or forged, is refused and counted, never loaded. One
 * compile per key cluster-wide: a miss takes a short lock key
 * (SET NX PX); others poll for the value until it appears or the lock goes
 * (its holder finished or died), then take it themselves. Connecting (a
 * host name's lookup included) and every command have a timeout, a reply
 * no Redis gives to the command is a failure, and a Redis that fails or
 * times out is left alone for a while (a circuit breaker doubling from 1
 * to 30 s): the program goes on with its local tiers and compiles. */
#include "tier.h"

#include "../cache/trust.h"

#include <hiredis/hiredis.h>
#include <nettle/hmac.h>
#include <nettle/sha2.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define VALUE_MAGIC "XPJR"
#define VALUE_FORMAT 1u
#define FLAG_HMAC 1u
#define MAX_VALUE (512u << 20) /* larger values are refused */

#define MAX_ADDRS 8 /* of a name, tried in turn */
#define ADDR_LEN 80 /* a numeric address, an IPv6 scope included */

/* A name looked up in a thread of its own (getaddrinfo cannot be given a
 * time limit): the tier waits for it at most its timeout, and a lookup
 * that outlives the wait goes on, to be waited for again at the next
 * attempt (never a second thread for the same name). Held by the thread
 * and by the tier; the last to let go frees it. */
typedef struct lookup {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* on CLOCK_MONOTONIC */
  int refs;
  bool done;
  int err;   /* getaddrinfo's (0: n addresses) */
  int syserr; /* errno, for EAI_SYSTEM */
  int n;
  char addr[MAX_ADDRS][ADDR_LEN];
  char host[];
} lookup;

struct rt_redis {
  pthread_mutex_t mu;
  redisContext *c; /* NULL: not connected */
  pid_t pid;       /* the process that connected: a forked child makes
                      its own connection instead of sharing the socket */
  char *host, *unix_path, *user, *pass;
  int port, db;
  /* host's addresses, remembered from its last lookup until connecting to
   * them fails (then it is looked up again: Redis may have moved);
   * numeric: host is an address (hiredis is given it as before) */
  bool numeric;
  int naddr;
  char addr[MAX_ADDRS][ADDR_LEN];
  lookup *pending;   /* a lookup still running (of this process) */
  pid_t pending_pid; /* the process that started it */
  char shown[512]; /* the URL, password masked: for messages */
  struct timeval timeout;
  int64_t ttl_s;
  uint8_t secret[32];
  bool has_secret;
  int64_t down_until_ms; /* circuit breaker: no command before then */
  unsigned fails;        /* consecutive failures */
  bool warned_reply;     /* an error reply was reported */
  /* which Redis this is, for the process-wide distrust of its compile
   * locks (lock_distrusted): a hash of the URL without its credentials
   * (the socket, or the host and port; and the database) */
  uint64_t where;
};

/* The Redis servers (rt_redis.where) where a wait for another process's
 * compile (its lock) ended without its value: from then on this process
 * waits for no lock there, in any context (a lock planted by anyone who
 * can write the Redis stalls a process once, not each context it makes:
 * an outside probe saw 65 s per context). Without a lock of its own (a
 * child forked while one was held would wait for it for ever): the slots
 * fill in order, each taken by a compare-and-swap; with all of them
 * taken, no lock of any Redis is waited for. */
#define DISTRUST_MAX 32
static _Atomic uint64_t distrusted[DISTRUST_MAX];
static atomic_bool distrust_all;

static bool lock_distrusted(uint64_t where) {
  if (atomic_load(&distrust_all))
    return true;
  for (unsigned i = 0; i < DISTRUST_MAX; i++) {
    uint64_t v = atomic_load(&distrusted[i]);
    if (v == where)
      return true;
    if (!v)
      return false;
  }
  return false;
}

/* Distrusts where's locks: true for the call that did it (it warns). */
static bool distrust_locks(uint64_t where) {
  for (unsigned i = 0; i < DISTRUST_MAX; i++) {
    uint64_t seen = 0;
    if (atomic_compare_exchange_strong(&distrusted[i], &seen, where))
      return true;
    if (seen == where)
      return false;
  }
  return !atomic_exchange(&distrust_all, true);
}

/* FNV-1a of n bytes, continuing from h. */
static uint64_t fnv(uint64_t h, const void *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    h = (h ^ ((const uint8_t *)s)[i]) * 0x100000001b3ull;
  return h;
}

/* r->where from its parsed URL (never 0: an empty slot). */
static void set_where(rt_redis *r) {
  char tail[64];
  uint64_t h = 0xcbf29ce484222325ull;
  const char *name = r->unix_path ? r->unix_path : r->host;
  h = fnv(h, r->unix_path ? "unix" : "tcp", r->unix_path ? 5 : 4);
  h = fnv(h, name, strlen(name) + 1);
  int n = snprintf(tail, sizeof tail, "%d/%d", r->unix_path ? 0 : r->port,
                   r->db);
  h = fnv(h, tail, (size_t)n);
  r->where = h ? h : 1;
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void note(rt_obtain *ob, xpj_cache_counters d) { rt_cc_note(ob, &d); }

/* ---- configuration ---------------------------------------------------- */

static char *dup_n(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = 0;
  }
  return d;
}

/* Text from outside (a server's error reply, what hiredis says of it, the
 * URL) for a message: every byte that is not printable ASCII becomes '?'
 * (an escape sequence from a hostile server never reaches the terminal),
 * at most size - 1 bytes, "..." ending what was cut. */
static const char *clean(char *out, size_t size, const char *s, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n && k + 1 < size; i++)
    out[k++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
  if (k + 1 == size && k < n && size > 4)
    memcpy(out + size - 4, "...", 3);
  out[k] = 0;
  return out;
}

static int hexval(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

/* The user or password of a URL, percent-decoded (RFC 3986: "%40" is
 * '@'); NULL with *bad set for a '%' not followed by two hex digits, or
 * one that makes a NUL byte. */
static char *pct_decode(const char *s, size_t n, bool *bad) {
  char *d = malloc(n + 1);
  size_t k = 0;
  if (!d)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    if (s[i] != '%') {
      d[k++] = s[i];
      continue;
    }
    int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
    int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
    if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
      explicit_bzero(d, n + 1);
      free(d);
      *bad = true;
      return NULL;
    }
    d[k++] = (char)(hi << 4 | lo);
    i += 2;
  }
  d[k] = 0;
  return d;
}

/* redis://[[user]:password@]host[:port][/db] or unix:/path[?db=N]; what
 * names the setting it came from in messages (XPJIT_REDIS, or
 * xpj_context_desc.redis) */
static xpj_status parse_url(rt_redis *r, const char *url, const char *what) {
  if (!strncmp(url, "unix:", 5)) {
    const char *p = url + 5;
    while (p[0] == '/' && p[1] == '/')
      p++;
    const char *q = strstr(p, "?db=");
    size_t n = q ? (size_t)(q - p) : strlen(p);
    if (!n || *p != '/')
      return rt_err(XPJ_ERR_INVALID, "%s=%s: a unix socket needs an "
                    "absolute path (unix:/run/redis.sock)", what, url);
    if (q) {
      char *end;
      long db = strtol(q + 4, &end, 10);
      if (*end || db < 0 || db > 1000000)
        return rt_err(XPJ_ERR_INVALID, "%s: bad database number in %s",
                      what, url);
      r->db = (int)db;
    }
    r->unix_path = dup_n(p, n);
    clean(r->shown, sizeof r->shown, url, strlen(url));
    return r->unix_path ? XPJ_OK : rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  if (strncmp(url, "redis://", 8) != 0)
    return rt_err(XPJ_ERR_INVALID, "%s=%.200s: expected "
                  "redis://[user:password@]host[:port][/db] or unix:/path",
                  what, url);
  const char *p = url + 8, *at = strrchr(p, '@');
  if (at) {
    const char *colon = memchr(p, ':', (size_t)(at - p));
    bool bad_user = false, bad_pass = false;
    if (colon) {
      if (colon > p)
        r->user = pct_decode(p, (size_t)(colon - p), &bad_user);
      r->pass = pct_decode(colon + 1, (size_t)(at - colon - 1), &bad_pass);
    } else {
      r->pass = pct_decode(p, (size_t)(at - p), &bad_pass);
    }
    if (bad_user || bad_pass) /* (the password is never printed) */
      return rt_err(XPJ_ERR_INVALID, "%s: a bad %%-escape in the "
                    "URL's %s: '%%' must be followed by two hex digits, "
                    "not 00 (\"%%25\" is '%%', \"%%40\" '@', \"%%3A\" ':')",
                    what, bad_user ? "user name" : "password");
    if (!r->pass || (colon > p && !r->user))
      return rt_err(XPJ_ERR_NOMEM, "out of memory");
    p = at + 1;
  }
  const char *slash = strchr(p, '/');
  const char *hend = slash ? slash : p + strlen(p);
  const char *colon = NULL;
  if (*p == '[') { /* [ipv6]:port */
    const char *rb = memchr(p, ']', (size_t)(hend - p));
    if (!rb)
      return rt_err(XPJ_ERR_INVALID, "%s: unclosed [ in the host", what);
    r->host = dup_n(p + 1, (size_t)(rb - p - 1));
    colon = rb[1] == ':' ? rb + 1 : NULL;
  } else {
    colon = memchr(p, ':', (size_t)(hend - p));
    r->host = dup_n(p, (size_t)((colon ? colon : hend) - p));
  }
  r->port = 6379;
  if (colon) {
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (end != hend || port <= 0 || port > 65535)
      return rt_err(XPJ_ERR_INVALID, "%s: bad port in the URL", what);
    r->port = (int)port;
  }
  if (slash && slash[1]) {
    char *end;
    long db = strtol(slash + 1, &end, 10);
    if (*end || db < 0 || db > 1000000)
      return rt_err(XPJ_ERR_INVALID, "%s: bad database number in the URL",
                    what);
    r->db = (int)db;
  }
  if (!r->host || !*r->host)
    return rt_err(XPJ_ERR_INVALID, "%s: no host in the URL", what);
  char user[128], host[300];
  snprintf(r->shown, sizeof r->shown, "redis://%s%s%s%s:%d/%d",
           r->user ? clean(user, sizeof user, r->user, strlen(r->user)) : "",
           r->pass ? ":***" : "", r->user || r->pass ? "@" : "",
           clean(host, sizeof host, r->host, strlen(r->host)), r->port,
           r->db);
  struct in6_addr a6;
  r->numeric = inet_pton(AF_INET, r->host, &a6) == 1 ||
               inet_pton(AF_INET6, r->host, &a6) == 1;
  return XPJ_OK;
}

/* "alice (uid 1000)", or "uid 1234" for a uid without a name. */
static void owner_name(uid_t uid, char *buf, size_t size) {
  struct passwd pw, *res = NULL;
  char tmp[2048];
  if (getpwuid_r(uid, &pw, tmp, sizeof tmp, &res) == 0 && res)
    snprintf(buf, size, "%.100s (uid %u)", res->pw_name, (unsigned)uid);
  else
    snprintf(buf, size, "uid %u", (unsigned)uid);
}

/* May uid own the secret, a link on the way to it, or a directory above
 * it? The user, root, or an owner in XPJIT_TRUSTED_OWNERS (t: the rules
 * of bundles, cache/trust.c). */
static bool secret_owner_ok(const trust *t, uid_t uid) {
  if (uid == t->me || uid == 0)
    return true;
  for (unsigned i = 0; i < t->nowners; i++)
    if (t->owners[i] == uid)
      return true;
  return false;
}

/* Why the secret file open as fd cannot be the cluster's secret, or NULL.
 * Values signed with it are trusted as the cluster's own compiles, so it
 * must be private, as ssh wants a private key: a regular file (a FIFO
 * would block the open and the read: it is opened without blocking and
 * refused here), of this user, root or a trusted owner (its owner holds
 * it and may change it), that nobody else may write (they could put a
 * secret of their own there and sign what they like), that not every
 * user may read (a secret they all hold signs nothing), and with one name
 * only (a hard link someone else made, where the kernel lets them, to a
 * file of the user's whose bytes they know, such as xpjit's own
 * host-cpu-* file, would be a secret they hold). Readable by its group is
 * allowed: a team's secret (docs/cluster.md). */
static const char *secret_unfit(const trust *t, int fd, const char *path,
                                char *why, size_t size) {
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    snprintf(why, size, "XPJIT_REDIS_SECRET_FILE=%s: %s", path,
             strerror(errno));
    return why;
  }
  unsigned mode = (unsigned)(sb.st_mode & 07777);
  char owner[160], mine[160];
  if (S_ISDIR(sb.st_mode))
    snprintf(why, size, "XPJIT_REDIS_SECRET_FILE=%s is a directory, not a "
             "file", path);
  else if (!S_ISREG(sb.st_mode))
    snprintf(why, size, "XPJIT_REDIS_SECRET_FILE=%s is not a regular file "
             "(a FIFO, a socket or a device): the secret must be a file",
             path);
  else if (!secret_owner_ok(t, sb.st_uid)) {
    owner_name(sb.st_uid, owner, sizeof owner);
    owner_name(t->me, mine, sizeof mine);
    snprintf(why, size, "XPJIT_REDIS_SECRET_FILE=%s belongs to %s, not to "
             "you (%s) or root: its owner could change the secret. Use a "
             "copy of your own (mode 0600), or add its owner to "
             "XPJIT_TRUSTED_OWNERS if you trust them", path, owner, mine);
  } else if (sb.st_mode & (S_IWGRP | S_IWOTH))
    snprintf(why, size, "XPJIT_REDIS_SECRET_FILE=%s is writable by other "
             "users (mode %04o): they could replace the secret and sign "
             "values of their own. 'chmod 600 %s'", path, mode, path);
  else if (sb.st_mode & S_IROTH)
    snprintf(why, size, "XPJIT_REDIS_SECRET_FILE=%s is readable by every "
             "user (mode %04o): a secret they all know signs nothing. "
             "'chmod 600 %s' (or 640, to share it with the file's group "
             "only)", path, mode, path);
  else if (sb.st_nlink != 1)
    snprintf(why, size, "XPJIT_REDIS_SECRET_FILE=%s has %llu names (hard "
             "links): one made by someone else may be to a file whose bytes "
             "they know. Use a copy with one name (cp FILE NEW && chmod 600 "
             "NEW)", path, (unsigned long long)sb.st_nlink);
  else
    return NULL;
  return why;
}

/* The secret's path resolved as the kernel would, one name at a time,
 * into real (open it with O_NOFOLLOW), checked as ssh checks a key: each
 * symbolic link on the way must belong to the user, root or a trusted
 * owner and lie in a directory whose chain trust_dirs accepts (a link
 * someone else planted where the user's secret was to be, to a file of
 * the user's whose bytes they know, such as xpjit's host-cpu-* file,
 * made them holders of the secret: an outside probe), and so must the
 * directory the file is in. XPJ_OK, or the error (what is wrong and the
 * fix). */
static xpj_status secret_path(const trust *t, const char *path, char *real,
                              size_t size) {
  char rest[PATH_MAX * 2], cand[PATH_MAX], why[1400];
  size_t rl = 0; /* real's length: "" is "/" */
  if (path[0] != '/') {
    if (!getcwd(real, size))
      return rt_err(XPJ_ERR_IO, "XPJIT_REDIS_SECRET_FILE=%s: the current "
                    "directory: %s", path, strerror(errno));
    rl = strcmp(real, "/") ? strlen(real) : 0;
  }
  real[rl] = 0;
  if (snprintf(rest, sizeof rest, "%s", path) >= (int)sizeof rest)
    return rt_err(XPJ_ERR_INVALID, "XPJIT_REDIS_SECRET_FILE: too long");
  int links = 0;
  char *p = rest;
  for (;;) {
    while (*p == '/')
      p++;
    if (!*p)
      break;
    char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    char *next = slash ? slash : p + n;
    if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
      if (n == 2) /* real has no link in it: its parent, by name */
        while (rl && real[--rl] != '/')
          ;
      real[rl] = 0;
      p = next;
      continue;
    }
    if (rl + 1 + n >= sizeof cand)
      return rt_err(XPJ_ERR_INVALID, "XPJIT_REDIS_SECRET_FILE=%s: too long",
                    path);
    memcpy(cand, real, rl);
    cand[rl] = '/';
    memcpy(cand + rl + 1, p, n);
    cand[rl + 1 + n] = 0;
    struct stat sb;
    if (lstat(cand, &sb) != 0)
      return rt_err(XPJ_ERR_IO, "XPJIT_REDIS_SECRET_FILE=%s: %s", path,
                    strerror(errno));
    if (S_ISLNK(sb.st_mode)) {
      char owner[160], mine[160];
      if (++links > 40)
        return rt_err(XPJ_ERR_IO, "XPJIT_REDIS_SECRET_FILE=%s: %s", path,
                      strerror(ELOOP));
      if (!secret_owner_ok(t, sb.st_uid)) {
        owner_name(sb.st_uid, owner, sizeof owner);
        owner_name(t->me, mine, sizeof mine);
        return rt_err(XPJ_ERR_INVALID, "XPJIT_REDIS_SECRET_FILE=%s: the "
                      "symbolic link %s belongs to %s, not to you (%s) or "
                      "root: its owner chooses the file read as the secret "
                      "(one of yours whose bytes they know would sign "
                      "their values). Remove the link and name the file "
                      "itself, or add its owner to XPJIT_TRUSTED_OWNERS "
                      "if you trust them", path, cand, owner, mine);
      }
      if (trust_dirs(t, rl ? real : "/", why, sizeof why) != TRUST_OK)
        return rt_err(XPJ_ERR_INVALID, "XPJIT_REDIS_SECRET_FILE=%s: the "
                      "symbolic link %s is in a directory others could "
                      "change (the rules of bundles, docs/cache.md): %s",
                      path, cand, why);
      char target[PATH_MAX];
      ssize_t k = readlink(cand, target, sizeof target - 1);
      if (k <= 0)
        return rt_err(XPJ_ERR_IO, "XPJIT_REDIS_SECRET_FILE=%s: the link "
                      "%s: %s", path, cand,
                      k < 0 ? strerror(errno) : "empty");
      target[k] = 0;
      char tail[PATH_MAX * 2];
      if (snprintf(tail, sizeof tail, "%s/%s", target, next) >=
          (int)sizeof tail)
        return rt_err(XPJ_ERR_INVALID, "XPJIT_REDIS_SECRET_FILE=%s: too "
                      "long", path);
      memcpy(rest, tail, strlen(tail) + 1);
      p = rest;
      if (target[0] == '/')
        rl = 0;
      real[rl] = 0;
      continue;
    }
    if (rl + 1 + n >= size)
      return rt_err(XPJ_ERR_INVALID, "XPJIT_REDIS_SECRET_FILE=%s: too long",
                    path);
    memcpy(real, cand, rl + 1 + n + 1);
    rl += 1 + n;
    p = next;
    while (*p == '/')
      p++;
    if (*p && !S_ISDIR(sb.st_mode))
      return rt_err(XPJ_ERR_IO, "XPJIT_REDIS_SECRET_FILE=%s: %s", path,
                    strerror(ENOTDIR));
  }
  if (!rl) { /* "/": a directory (secret_unfit says so) */
    snprintf(real, size, "/");
    return XPJ_OK;
  }
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", real);
  char *slash = strrchr(dir, '/');
  if (slash == dir)
    dir[1] = 0;
  else
    *slash = 0;
  if (trust_dirs(t, dir, why, sizeof why) != TRUST_OK)
    return rt_err(XPJ_ERR_INVALID, "XPJIT_REDIS_SECRET_FILE=%s: its "
                  "directory %s could be changed by others (the rules of "
                  "bundles, docs/cache.md): %s", path, dir, why);
  return XPJ_OK;
}

/* XPJIT_REDIS_SECRET_FILE: a private file (secret_unfit), on a path no one
 * else could change (secret_path), of at least 16 bytes shared by the
 * cluster's users; values are then signed and checked with HMAC-SHA256
 * keyed with the SHA-256 of its first 4096 bytes. */
static xpj_status load_secret(rt_redis *r) {
  const char *path = getenv("XPJIT_REDIS_SECRET_FILE");
  if (!path || !*path)
    return XPJ_OK;
  trust t;
  char bad[256];
  if (!trust_for_bundles(&t, bad, sizeof bad) &&
      xpj_env_first_complaint("XPJIT_TRUSTED_OWNERS"))
    rt_warn("XPJIT_TRUSTED_OWNERS: %s names no user; ignored", bad);
  char real[PATH_MAX];
  xpj_status st = secret_path(&t, path, real, sizeof real);
  if (st != XPJ_OK)
    return st;
  /* O_NONBLOCK: a FIFO must not block the open (it is refused after);
   * O_NOFOLLOW: real has no link left in it, and none may appear */
  int fd = open(real, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY |
                          O_NOFOLLOW);
  if (fd < 0)
    return rt_err(XPJ_ERR_IO, "XPJIT_REDIS_SECRET_FILE=%s: %s", path,
                  strerror(errno));
  char why[1400];
  if (secret_unfit(&t, fd, path, why, sizeof why)) {
    close(fd);
    return rt_err(XPJ_ERR_INVALID, "%s", why);
  }
  uint8_t buf[4096];
  size_t n = 0;
  while (n < sizeof buf) {
    ssize_t k = read(fd, buf + n, sizeof buf - n);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0) {
      int e = errno;
      close(fd);
      explicit_bzero(buf, sizeof buf);
      return rt_err(XPJ_ERR_IO, "XPJIT_REDIS_SECRET_FILE=%s: %s", path,
                    strerror(e));
    }
    if (k == 0)
      break;
    n += (size_t)k;
  }
  close(fd);
  if (n < 16) {
    explicit_bzero(buf, sizeof buf);
    return rt_err(XPJ_ERR_INVALID, "XPJIT_REDIS_SECRET_FILE=%s: fewer than "
                  "16 bytes", path);
  }
  struct sha256_ctx h;
  sha256_init(&h);
  sha256_update(&h, n, buf);
  sha256_digest(&h, sizeof r->secret, r->secret);
  explicit_bzero(buf, sizeof buf);
  r->has_secret = true;
  return XPJ_OK;
}

static xpj_status redis_open(const char *url, const char *what,
                             rt_redis **out) {
  *out = NULL;
  rt_redis *r = calloc(1, sizeof *r);
  if (!r)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  pthread_mutex_init(&r->mu, NULL);
  int64_t ms = 50;
  const char *t = getenv("XPJIT_REDIS_TIMEOUT");
  xpj_status st = parse_url(r, url, what);
  if (st == XPJ_OK && t && *t &&
      (xpj_cache_parse_duration(t, &ms) != XPJ_OK || ms <= 0 ||
       ms > 60000))
    st = rt_err(XPJ_ERR_INVALID, "XPJIT_REDIS_TIMEOUT=%s: expected a "
                "duration from 1ms to 60s", t);
  r->timeout = (struct timeval){(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
  int64_t ttl = 7 * 24 * 3600 * 1000LL;
  const char *tt = getenv("XPJIT_REDIS_TTL");
  if (st == XPJ_OK && tt && *tt &&
      (xpj_cache_parse_duration(tt, &ttl) != XPJ_OK || ttl < 1000))
    st = rt_err(XPJ_ERR_INVALID, "XPJIT_REDIS_TTL=%s: expected a duration "
                "of at least 1s", tt);
  r->ttl_s = ttl / 1000;
  if (st == XPJ_OK)
    set_where(r);
  if (st == XPJ_OK)
    st = load_secret(r);
  if (st != XPJ_OK) {
    rt_redis_close(r);
    return st;
  }
  *out = r;
  return XPJ_OK;
}

xpj_status rt_redis_open(const char *url, rt_redis **out) {
  return redis_open(url, "XPJIT_REDIS", out);
}

static void lookup_unref(lookup *l);

void rt_redis_close(rt_redis *r) {
  if (!r)
    return;
  if (r->c)
    redisFree(r->c);
  /* a lookup still running is the thread's to free (one a parent started
   * is not this process's to touch) */
  if (r->pending && r->pending_pid == getpid())
    lookup_unref(r->pending);
  free(r->host);
  free(r->unix_path);
  free(r->user);
  if (r->pass)
    explicit_bzero(r->pass, strlen(r->pass));
  free(r->pass);
  explicit_bzero(r->secret, sizeof r->secret);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

/* ---- the connection, with its circuit breaker ------------------------- */

static int64_t timeout_ms(const rt_redis *r) {
  return (int64_t)r->timeout.tv_sec * 1000 + r->timeout.tv_usec / 1000;
}

/* Call with r->mu held: drops the connection and leaves Redis alone for a
 * while; says so when it was up (what, which may carry a server's text,
 * cleaned). */
static void trip(rt_redis *r, const char *what) {
  if (r->c)
    redisFree(r->c);
  r->c = NULL;
  unsigned shift = r->fails < 5 ? r->fails : 5;
  int64_t wait = (int64_t)1000 << shift;
  if (wait > 30000)
    wait = 30000;
  r->down_until_ms = mono_ms() + wait;
  char text[240];
  if (r->fails++ == 0)
    rt_warn("Redis tier %s: %s; using the local tiers and compiling here, "
            "trying it again in %lld s", r->shown,
            clean(text, sizeof text, what, strlen(what)),
            (long long)(wait / 1000));
}

/* Writing to a Redis that died raises SIGPIPE, which kills a program
 * that does not ignore it: the signal is blocked in this thread around
 * each exchange, and one it raised is taken back before unblocking (the
 * way libcurl does it). */
typedef struct sigpipe_guard {
  sigset_t old;
  bool pending; /* one was pending before: not ours to take */
} sigpipe_guard;

static void sigpipe_block(sigpipe_guard *g) {
  sigset_t pipe, pend;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  sigpending(&pend);
  g->pending = sigismember(&pend, SIGPIPE) == 1;
  pthread_sigmask(SIG_BLOCK, &pipe, &g->old);
}

static void sigpipe_restore(sigpipe_guard *g) {
  sigset_t pipe, pend;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  sigpending(&pend);
  if (!g->pending && sigismember(&pend, SIGPIPE) == 1) {
    struct timespec zero = {0, 0};
    int saved = errno;
    while (sigtimedwait(&pipe, NULL, &zero) < 0 && errno == EINTR)
      ;
    errno = saved;
  }
  pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

#define WANT(type) (1u << (type)) /* a kind of reply a command expects */

/* What a reply that no Redis sends for the command was, for a message. */
static void reply_kind(const redisReply *rep, char *out, size_t size) {
  switch (rep->type) {
  case REDIS_REPLY_INTEGER:
    snprintf(out, size, "an integer (%lld)", rep->integer);
    break;
  case REDIS_REPLY_STATUS:
    snprintf(out, size, "the status \"%.40s\"", rep->str ? rep->str : "");
    break;
  case REDIS_REPLY_NIL:
    snprintf(out, size, "nil");
    break;
  case REDIS_REPLY_STRING:
    snprintf(out, size, "a string of %zu bytes", rep->len);
    break;
  default:
    snprintf(out, size, "a reply of type %d", rep->type);
  }
}

/* The time left until deadline as fd's send timeout (SO_SNDTIMEO):
 * false when none is left. */
static bool send_time_left(int fd, int64_t deadline) {
  int64_t left = deadline - mono_ms();
  if (left <= 0)
    return false;
  struct timeval tv = {(time_t)(left / 1000),
                       (suseconds_t)(left % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return true;
}

/* One command and its reply, bounded as security.md says: the whole
 * exchange within the tier's time limit (hiredis's own timeout bounds
 * each read, so a server that trickles bytes would hold a blocking
 * redisCommand for as long as it likes), a reply no larger than a value
 * may be and its header (hiredis buffers a bulk string whole before it
 * says how long it is), and no array (no command here gets one; hiredis
 * makes room for every element an array's header announces). A reply
 * followed by more bytes is taken, and the connection dropped after it:
 * nothing is asked that could explain them. expect: the kinds of reply
 * (WANT) the command may get besides an error; any other ends it as a
 * failure. */
static redisReply *command(rt_redis *r, int argc, const char **argv,
                           const size_t *len, unsigned expect) {
  sigpipe_guard g;
  sigpipe_block(&g);
  redisContext *c = r->c;
  void *rep = NULL;
  char what[200] = "";
  int done = 0;
  if (redisAppendCommandArgv(c, argc, argv, len) != REDIS_OK)
    snprintf(what, sizeof what, "%s", c->errstr);
  int64_t deadline = mono_ms() + (int64_t)r->timeout.tv_sec * 1000 +
                     (int64_t)r->timeout.tv_usec / 1000;
  /* each write waits at most the time left (SO_SNDTIMEO): a server that
   * reads a large SET slowly, a few bytes per timeout, made each write
   * return late with a little sent, the loop going on for as long as it
   * liked */
  while (!what[0] && !done) {
    if (!send_time_left(c->fd, deadline))
      snprintf(what, sizeof what, "timed out");
    else if (redisBufferWrite(c, &done) != REDIS_OK)
      snprintf(what, sizeof what, "%s",
               errno == EAGAIN || errno == EWOULDBLOCK ? "timed out"
                                                       : c->errstr);
  }
  bool first = true;
  while (!what[0]) {
    if (redisGetReplyFromReader(c, &rep) != REDIS_OK) {
      snprintf(what, sizeof what, "%s", c->errstr);
      break;
    }
    if (rep)
      break;
    /* each read waits at most the time left, not the whole timeout
     * (SO_RCVTIMEO): one byte just before the deadline made a command
     * last twice the timeout (an outside probe: 2.07 s with 1 s) */
    int64_t left = deadline - mono_ms();
    struct pollfd pfd = {c->fd, POLLIN, 0};
    int ready = left > 0 ? poll(&pfd, 1, (int)left) : 0;
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready == 0) {
      snprintf(what, sizeof what, "timed out");
      break;
    }
    char buf[65536];
    ssize_t n = ready < 0 ? -1 : read(c->fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      snprintf(what, sizeof what, "%s",
               n == 0 ? "the server closed the connection"
               : errno == EAGAIN || errno == EWOULDBLOCK ? "timed out"
                                                         : strerror(errno));
      break;
    }
    if (first && buf[0] == '*') {
      snprintf(what, sizeof what, "an array reply, which no command of "
               "this tier gets");
      break;
    }
    if (first && buf[0] == '$') { /* a bulk string says its length first */
      unsigned long long blen = 0;
      ssize_t k = 1;
      while (k < n && k < 21 && buf[k] >= '0' && buf[k] <= '9')
        blen = blen * 10 + (unsigned long long)(buf[k++] - '0');
      if (blen > MAX_VALUE) {
        snprintf(what, sizeof what, "a reply of %llu bytes, more than %u "
                 "MiB", blen, MAX_VALUE >> 20);
        break;
      }
    }
    first = false;
    if (c->reader->len + (size_t)n > (size_t)MAX_VALUE + 64) {
      snprintf(what, sizeof what, "a reply of more than %u MiB",
               MAX_VALUE >> 20);
      break;
    }
    if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK) {
      snprintf(what, sizeof what, "out of memory");
      break;
    }
  }
  bool extra = rep && c->reader->pos < c->reader->len;
  sigpipe_restore(&g);
  redisReply *reply = rep;
  /* an error reply is always Redis's to give (NOAUTH, OOM...); any other
   * kind must be one the command gets (a status: OK), or this is no Redis
   * the tier knows (a wrong server or proxy on the port): a failure, as a
   * protocol error is, not a reply to act on (an integer taken for "the
   * lock is held" stalled every process for the compile limit) */
  if (reply && reply->type != REDIS_REPLY_ERROR &&
      (!(expect & WANT(reply->type)) ||
       (reply->type == REDIS_REPLY_STATUS &&
        strcmp(reply->str ? reply->str : "", "OK") != 0))) {
    char kind[80];
    reply_kind(reply, kind, sizeof kind);
    snprintf(what, sizeof what, "%s answered with %s, which Redis never "
             "sends for it", argv[0], kind);
    freeReplyObject(reply);
    reply = NULL;
  }
  if (!reply) {
    trip(r, what);
    return NULL;
  }
  if (extra) {
    redisFree(r->c); /* unasked bytes: the next command starts afresh */
    r->c = NULL;
  }
  return reply;
}

/* ---- the name's lookup, bounded ---------------------------------------- */

static void lookup_unref(lookup *l) {
  pthread_mutex_lock(&l->mu);
  bool last = --l->refs == 0;
  pthread_mutex_unlock(&l->mu);
  if (last) {
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
  }
}

static void *lookup_main(void *arg) {
  lookup *l = arg;
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int err = getaddrinfo(l->host, NULL, &hints, &res);
  int syserr = errno;
  char addr[MAX_ADDRS][ADDR_LEN] = {{0}};
  int n = 0;
  /* IPv4 first, as hiredis asks for them (then IPv6 when there is none) */
  for (int pass = 0; pass < 2 && !err; pass++)
    for (struct addrinfo *a = res; a && n < MAX_ADDRS; a = a->ai_next)
      if ((a->ai_family == AF_INET) == (pass == 0) &&
          (a->ai_family == AF_INET || a->ai_family == AF_INET6) &&
          getnameinfo(a->ai_addr, a->ai_addrlen, addr[n], ADDR_LEN, NULL, 0,
                      NI_NUMERICHOST) == 0)
        n++;
  if (res)
    freeaddrinfo(res);
  pthread_mutex_lock(&l->mu);
  l->err = err ? err : n ? 0 : EAI_NONAME;
  l->syserr = syserr;
  l->n = n;
  memcpy(l->addr, addr, sizeof addr);
  l->done = true;
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
  lookup_unref(l);
  return NULL;
}

/* Call with r->mu held: r->host's addresses into r->addr, looked up by
 * getaddrinfo (the hosts file, DNS...) in a thread of its own waited for
 * until deadline: a resolver that does not answer costs the tier's
 * timeout, not the resolver's own (2 x 5 s and more), at each attempt.
 * False with why otherwise. */
static bool resolve(rt_redis *r, int64_t deadline, char *why, size_t size) {
  if (r->pending && r->pending_pid != getpid())
    r->pending = NULL; /* the parent's: its thread is not in this process */
  lookup *l = r->pending;
  if (!l) {
    size_t hl = strlen(r->host);
    l = calloc(1, sizeof *l + hl + 1);
    if (!l) {
      snprintf(why, size, "cannot look up %s: out of memory", r->host);
      return false;
    }
    memcpy(l->host, r->host, hl + 1);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&l->mu, NULL);
    l->refs = 2; /* the thread's, the tier's */
    /* no signal of the program's is delivered to that thread */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    int e = pthread_create(&th, &at, lookup_main, l);
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) {
      pthread_mutex_destroy(&l->mu);
      pthread_cond_destroy(&l->cv);
      free(l);
      snprintf(why, size, "cannot look up %s: no thread for it (%s)",
               r->host, strerror(e));
      return false;
    }
    r->pending = l;
    r->pending_pid = getpid();
  }
  struct timespec until = {(time_t)(deadline / 1000),
                           (long)(deadline % 1000) * 1000000L};
  pthread_mutex_lock(&l->mu);
  while (!l->done)
    if (pthread_cond_timedwait(&l->cv, &l->mu, &until) != 0)
      break;
  bool done = l->done;
  int err = l->err, syserr = l->syserr;
  if (done) {
    r->naddr = l->n;
    memcpy(r->addr, l->addr, sizeof r->addr);
  }
  pthread_mutex_unlock(&l->mu);
  if (!done) { /* it goes on: the next attempt waits for it again */
    snprintf(why, size, "cannot look up %s: no answer within %lld ms "
             "(XPJIT_REDIS_TIMEOUT)", r->host, (long long)timeout_ms(r));
    return false;
  }
  r->pending = NULL;
  lookup_unref(l);
  if (err) {
    r->naddr = 0;
    snprintf(why, size, "cannot look up %s: %s", r->host,
             err == EAI_SYSTEM ? strerror(syserr) : gai_strerror(err));
    return false;
  }
  return true;
}

/* Call with r->mu held: a connection to r's address, or NULL with why.
 * A host name is looked up once (resolve) and its addresses remembered
 * until connecting to all of them fails; the lookup and the connects
 * together take at most the tier's timeout. */
static redisContext *connect_tcp(rt_redis *r, char *why, size_t size) {
  if (r->numeric) /* nothing to look up: hiredis's connect, as it is */
    return redisConnectWithTimeout(r->host, r->port, r->timeout);
  int64_t deadline = mono_ms() + timeout_ms(r);
  if (!r->naddr && !resolve(r, deadline, why, size))
    return NULL;
  for (int i = 0; i < r->naddr; i++) {
    int64_t left = deadline - mono_ms();
    if (left <= 0) {
      snprintf(why, size, "cannot connect: timed out");
      break;
    }
    struct timeval tv = {(time_t)(left / 1000),
                         (suseconds_t)(left % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(r->addr[i], r->port, tv);
    if (c && !c->err)
      return c;
    snprintf(why, size, "cannot connect to %s (%s): %s", r->addr[i],
             r->host, c ? c->errstr : "out of memory");
    if (c)
      redisFree(c);
  }
  r->naddr = 0; /* looked up again next time: Redis may have moved */
  return NULL;
}

/* Call with r->mu held: a usable connection, or false (Redis down). */
static bool connected(rt_redis *r) {
  if (r->c && r->pid != getpid()) {
    redisFree(r->c); /* the parent's socket: closed here, not there */
    r->c = NULL;
  }
  if (r->c)
    return true;
  if (mono_ms() < r->down_until_ms)
    return false;
  char what[400] = "";
  r->c = r->unix_path ? redisConnectUnixWithTimeout(r->unix_path, r->timeout)
                      : connect_tcp(r, what, sizeof what);
  if (!r->c || r->c->err) {
    if (r->c)
      snprintf(what, sizeof what, "cannot connect: %s", r->c->errstr);
    else if (!what[0])
      snprintf(what, sizeof what, "cannot connect: out of memory");
    trip(r, what);
    return false;
  }
  redisSetTimeout(r->c, r->timeout);
  r->pid = getpid();
  if (r->pass) {
    const char *argv[3] = {"AUTH", r->user ? r->user : r->pass, r->pass};
    redisReply *rep = command(r, r->user ? 3 : 2, argv, NULL,
                              WANT(REDIS_REPLY_STATUS));
    if (!rep)
      return false;
    bool ok = rep->type != REDIS_REPLY_ERROR;
    snprintf(what, sizeof what, "authentication failed (%.200s)",
             ok ? "" : rep->str);
    freeReplyObject(rep);
    if (!ok) {
      trip(r, what);
      return false;
    }
  }
  if (r->db) {
    char db[16];
    snprintf(db, sizeof db, "%d", r->db);
    const char *argv[2] = {"SELECT", db};
    redisReply *rep = command(r, 2, argv, NULL, WANT(REDIS_REPLY_STATUS));
    if (!rep)
      return false;
    bool ok = rep->type != REDIS_REPLY_ERROR;
    snprintf(what, sizeof what, "SELECT %s failed (%.200s)", db,
             ok ? "" : rep->str);
    freeReplyObject(rep);
    if (!ok) {
      trip(r, what);
      return false;
    }
  }
  return true;
}

/* Redis did its part of a request (a hit; a lock taken or found held; a
 * value stored): it is up, and the breaker closed. Not when merely
 * connected (a stopped Redis accepts connections), nor after one good
 * reply (a wrong server on the port may answer GET as Redis would and SET
 * with nonsense: that would flap, "back" and down every second). */
static void mark_up(rt_redis *r) {
  pthread_mutex_lock(&r->mu);
  if (r->fails)
    rt_warn("Redis tier %s: back", r->shown);
  r->fails = 0;
  pthread_mutex_unlock(&r->mu);
}

/* One command under the lock; NULL when Redis is down (counted, but not
 * for a first look: its lookup is asked again, and counted then). An
 * error reply is returned to the caller. */
static redisReply *run(rt_obtain *ob, rt_redis *r, int argc,
                       const char **argv, const size_t *len,
                       unsigned expect) {
  pthread_mutex_lock(&r->mu);
  bool up = connected(r);
  redisReply *rep = up ? command(r, argc, argv, len, expect) : NULL;
  pthread_mutex_unlock(&r->mu);
  if (!rep && !ob->peek)
    note(ob, (xpj_cache_counters){.redis_skipped = !up, .redis_errors = up});
  else if (rep && rep->type == REDIS_REPLY_ERROR) {
    if (!ob->peek)
      note(ob, (xpj_cache_counters){.redis_errors = 1});
    pthread_mutex_lock(&r->mu);
    bool first = !r->warned_reply;
    r->warned_reply = true;
    pthread_mutex_unlock(&r->mu);
    char text[240];
    if (first) /* once: NOAUTH, OOM, READONLY say what to fix */
      rt_warn("Redis tier %s: %s %s: %s; using the local tiers for what it "
              "refuses", r->shown, argv[0],
              argc > 1 && !strncmp(argv[1], "xpjit:", 6) ? argv[1] : "",
              rep->str ? clean(text, sizeof text, rep->str, rep->len)
                       : "an error");
  }
  return rep;
}

/* The Redis key of the request's value ("k") or compile lock ("lock"):
 * named by the digest of its full cache key. */
static void redis_key(char out[80], const char *kind, const rt_obtain *ob) {
  snprintf(out, 80, "xpjit:%s:%s", kind, ob->digest);
}

/* The request's full key text, which values carry (malloc'd; NULL when
 * out of memory). */
static char *key_text(const rt_obtain *ob) {
  char *text = NULL, hex[65];
  return xpj_cache_key_digest(ob->key, &text, hex) == XPJ_OK ? text : NULL;
}

/* ---- values ----------------------------------------------------------- */

static void put_u32(uint8_t **p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    *(*p)++ = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t **p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    *(*p)++ = (uint8_t)(v >> (8 * i));
}
static void put_bytes(uint8_t **p, const void *s, size_t n) {
  memcpy(*p, s, n);
  *p += n;
}

typedef struct reader {
  const uint8_t *p, *end;
  bool bad;
} reader;

static uint64_t get_le(reader *rd, int n) {
  if (rd->bad || rd->end - rd->p < n) {
    rd->bad = true;
    return 0;
  }
  uint64_t v = 0;
  for (int i = 0; i < n; i++)
    v |= (uint64_t)rd->p[i] << (8 * i);
  rd->p += n;
  return v;
}
static const uint8_t *get_bytes(reader *rd, uint64_t n) {
  if (rd->bad || (uint64_t)(rd->end - rd->p) < n) {
    rd->bad = true;
    return NULL;
  }
  const uint8_t *s = rd->p;
  rd->p += n;
  return s;
}

static void checksum(const rt_redis *r, const uint8_t *s, size_t n,
                     uint8_t out[32]) {
  if (r->has_secret) {
    struct hmac_sha256_ctx h;
    hmac_sha256_set_key(&h, sizeof r->secret, r->secret);
    hmac_sha256_update(&h, n, s);
    hmac_sha256_digest(&h, 32, out);
  } else {
    struct sha256_ctx h;
    sha256_init(&h);
    sha256_update(&h, n, s);
    sha256_digest(&h, 32, out);
  }
}

/* magic, format, flags, key text, entry, local and scratch bytes, compile
 * time, binary, then the checksum of all that (docs/cache.md) */
uint8_t *rt_redis_encode(const rt_redis *r, const char *keytext,
                         const fetched *f, size_t *len) {
  size_t kl = strlen(keytext), el = strlen(f->v.entry ? f->v.entry : "");
  size_t n = 4 + 4 + 4 + 4 + kl + 4 + el + 8 + 8 + 8 + 8 + f->v.size + 32;
  uint8_t *buf = malloc(n), *p = buf;
  if (!buf)
    return NULL;
  put_bytes(&p, VALUE_MAGIC, 4);
  put_u32(&p, VALUE_FORMAT);
  put_u32(&p, r->has_secret ? FLAG_HMAC : 0);
  put_u32(&p, (uint32_t)kl);
  put_bytes(&p, keytext, kl);
  put_u32(&p, (uint32_t)el);
  put_bytes(&p, f->v.entry ? f->v.entry : "", el);
  put_u64(&p, f->v.local_bytes);
  put_u64(&p, f->v.scratch_bytes);
  uint64_t ms;
  memcpy(&ms, &f->v.compile_ms, sizeof ms);
  put_u64(&p, ms);
  put_u64(&p, f->v.size);
  if (f->v.size)
    put_bytes(&p, f->v.data, f->v.size);
  checksum(r, buf, (size_t)(p - buf), p);
  *len = n;
  return buf;
}

/* Fills f from value v (copied into f->own), or says why not. */
const char *rt_redis_decode(const rt_redis *r, const char *keytext,
                            const uint8_t *v, size_t n, fetched *f) {
  if (n < 4 + 4 + 4 + 32 || memcmp(v, VALUE_MAGIC, 4) != 0)
    return "not an xpjit value";
  uint8_t sum[32];
  checksum(r, v, n - 32, sum);
  reader rd = {v + 4, v + n - 32, false};
  uint32_t format = (uint32_t)get_le(&rd, 4), flags = (uint32_t)get_le(&rd, 4);
  if (format != VALUE_FORMAT)
    return "written by another xpjit (value format)";
  if (((flags & FLAG_HMAC) != 0) != r->has_secret)
    return r->has_secret ? "not signed with the cluster's secret"
                         : "signed with a secret this process does not have "
                           "(XPJIT_REDIS_SECRET_FILE)";
  if (memcmp(sum, v + n - 32, 32) != 0)
    return r->has_secret ? "bad signature (damaged or forged)"
                         : "bad checksum (damaged)";
  uint64_t kl = get_le(&rd, 4);
  const uint8_t *k = get_bytes(&rd, kl);
  if (rd.bad || kl != strlen(keytext) || memcmp(k, keytext, kl) != 0)
    return "stored under another key";
  uint64_t el = get_le(&rd, 4);
  const uint8_t *e = get_bytes(&rd, el);
  uint64_t local = get_le(&rd, 8), scratch = get_le(&rd, 8);
  uint64_t ms = get_le(&rd, 8), dl = get_le(&rd, 8);
  const uint8_t *d = get_bytes(&rd, dl);
  if (rd.bad || rd.p != rd.end || el > 255 || memchr(e, 0, el))
    return "malformed";
  uint8_t *own = malloc(dl + el + 2);
  if (!own)
    return "out of memory";
  if (dl)
    memcpy(own, d, dl);
  memcpy(own + dl + 1, e, el);
  own[dl + 1 + el] = 0;
  own[dl] = 0;
  f->own = own;
  f->origin = XPJ_ORIGIN_REDIS;
  f->v.data = own;
  f->v.size = dl;
  f->v.entry = (const char *)own + dl + 1;
  f->v.log = "";
  f->v.local_bytes = local;
  f->v.scratch_bytes = scratch;
  memcpy(&f->v.compile_ms, &ms, sizeof ms);
  if (!(f->v.compile_ms >= 0 && f->v.compile_ms < 1e9))
    f->v.compile_ms = 0;
  f->cacheable = true;
  return NULL;
}

/* ---- the tier --------------------------------------------------------- */

static void random_token(char out[40]) {
  uint8_t b[16];
  FILE *fp = fopen("/dev/urandom", "rb");
  size_t n = fp ? fread(b, 1, sizeof b, fp) : 0;
  if (fp)
    fclose(fp);
  if (n != sizeof b) { /* unique enough for a lock's owner */
    uint64_t t = (uint64_t)mono_ms() ^ ((uint64_t)getpid() << 32);
    memcpy(b, &t, 8);
    memcpy(b + 8, &out, 8);
  }
  for (int i = 0; i < 16; i++)
    snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static bool get(void *state, rt_obtain *ob, fetched *f) {
  rt_redis *r = state;
  if (!r)
    return false;
  char vkey[80], lkey[80];
  redis_key(vkey, "k", ob);
  redis_key(lkey, "lock", ob);
  /* a compile holds the lock at most its time limit (2 min without) */
  uint64_t limit_ms, mb;
  xpj_compile_limits(ob->rq->o, &limit_ms, &mb);
  int64_t lock_ms = limit_ms ? (int64_t)limit_ms + 5000 : 120000;
  int64_t waiting_since = 0, deadline = 0, poll = 2;
  bool hit = false, waited = false;
  for (;;) {
    const char *get[2] = {"GET", vkey};
    redisReply *rep = run(ob, r, 2, get, NULL,
                          WANT(REDIS_REPLY_STRING) | WANT(REDIS_REPLY_NIL));
    if (!rep)
      break;
    if (rep->type == REDIS_REPLY_ERROR) { /* NOAUTH, a Redis loading... */
      freeReplyObject(rep);
      break;
    }
    if (rep->type == REDIS_REPLY_STRING) {
      char *keytext = rep->len > MAX_VALUE ? NULL : key_text(ob);
      const char *why = rep->len > MAX_VALUE ? "too large"
                        : !keytext           ? "out of memory"
                                             : rt_redis_decode(r, keytext,
                                                               (const uint8_t *)rep->str,
                                                               rep->len, f);
      free(keytext);
      freeReplyObject(rep);
      if (why && ob->peek)
        break; /* a first look takes only a good value; refused in full */
      if (!why) {
        mark_up(r);
        hit = true;
        note(ob, (xpj_cache_counters){.redis_hits = 1,
                                      .saved_ms = f->v.compile_ms,
                                      .redis_waits = waited});
        break;
      }
      rt_warn("Redis tier %s: refused the value for %s [%s] (%s); compiling "
              "it", r->shown, ob->rq->kernel, ob->rq->dtypes, why);
      note(ob, (xpj_cache_counters){.redis_refused = 1});
      f->refused = true; /* the log says "Redis refused", not "miss" */
      /* compile and overwrite it, without waiting for anyone */
      break;
    }
    freeReplyObject(rep);
    if (ob->held || ob->peek)
      break; /* still missing, and ours to compile; or a first look */
    random_token(ob->token);
    char px[24];
    snprintf(px, sizeof px, "%lld", (long long)lock_ms);
    const char *set[6] = {"SET", lkey, ob->token, "NX", "PX", px};
    /* +OK: ours; nil: held by another; an error: compile without it;
     * anything else ended the command as a failure (run) */
    rep = run(ob, r, 6, set, NULL,
              WANT(REDIS_REPLY_STATUS) | WANT(REDIS_REPLY_NIL));
    if (!rep)
      break;
    bool mine = rep->type == REDIS_REPLY_STATUS;
    bool refused = rep->type == REDIS_REPLY_ERROR; /* OOM, read-only... */
    freeReplyObject(rep);
    if (refused)
      break; /* compile without the lock */
    mark_up(r);
    if (mine) {
      /* the holder before us may have stored the value and let go
       * between our GET and our SET: look once more, holding the lock */
      ob->held = true;
      continue;
    }
    /* another process or node is compiling it: wait for its value */
    if (lock_distrusted(r->where))
      break;
    int64_t now = mono_ms();
    if (!deadline) {
      waiting_since = now;
      deadline = now + (ob->wait_ms ? ob->wait_ms : lock_ms);
    }
    /* (a request told to wait for nobody, wait_ms 1, after a daemon
     * that could not serve, distrusts nothing: the lock may well be
     * that daemon worker's, and real) */
    if (now >= deadline) {
      if (ob->wait_ms != 1 && distrust_locks(r->where))
        rt_warn("Redis tier %s: waited %lld ms for %s [%s] from the "
                "process or node holding its compile lock, which never "
                "stored it; compiling it here, and waiting for no lock "
                "of this Redis from now on, in any context of this "
                "process", r->shown,
                (long long)(now - waiting_since),
                ob->rq->kernel, ob->rq->dtypes);
      break;
    }
    waited = true;
    sleep_ms(poll);
    poll = poll < 32 ? poll * 2 : 50;
  }
  if (!hit && !ob->peek) /* (a first look's miss is asked again) */
    note(ob, (xpj_cache_counters){.redis_misses = 1});
  return hit;
}

static void done(void *state, rt_obtain *ob);

static void put(void *state, rt_obtain *ob, const fetched *f) {
  rt_redis *r = state;
  if (!r || f->v.failed || !f->loaded || !f->cacheable)
    return;
  char *keytext = key_text(ob);
  size_t n;
  uint8_t *v = keytext ? rt_redis_encode(r, keytext, f, &n) : NULL;
  free(keytext);
  if (v) {
    char vkey[80], ex[24];
    redis_key(vkey, "k", ob);
    snprintf(ex, sizeof ex, "%lld", (long long)r->ttl_s);
    const char *argv[5] = {"SET", vkey, (const char *)v, "EX", ex};
    size_t len[5] = {3, strlen(vkey), n, 2, strlen(ex)};
    redisReply *rep = run(ob, r, 5, argv, len, WANT(REDIS_REPLY_STATUS));
    free(v);
    if (rep) {
      if (rep->type == REDIS_REPLY_STATUS) {
        mark_up(r);
        note(ob, (xpj_cache_counters){.redis_stores = 1});
      }
      freeReplyObject(rep);
    }
  }
  done(r, ob);
}

/* After a miss that took the cluster-wide compile lock: releases it when
 * nothing was put (a failed compile), so that waiters stop waiting. */
static void done(void *state, rt_obtain *ob) {
  rt_redis *r = state;
  if (!ob->held || !r)
    return;
  /* only if it is still ours: it may have expired and been taken */
  static const char script[] =
      "if redis.call('get', KEYS[1]) == ARGV[1] then "
      "return redis.call('del', KEYS[1]) else return 0 end";
  char lkey[80];
  redis_key(lkey, "lock", ob);
  const char *argv[5] = {"EVAL", script, "1", lkey, ob->token};
  redisReply *rep = run(ob, r, 5, argv, NULL, WANT(REDIS_REPLY_INTEGER));
  if (rep)
    freeReplyObject(rep);
  ob->held = false;
}

const char *rt_redis_shown(const rt_redis *r) { return r->shown; }

static xpj_status open_tier(rt_cc *cc, const xpj_context_desc *desc,
                            void **state) {
  (void)cc;
  /* every setting is read now; it connects on first use */
  const char *url = desc && desc->redis ? desc->redis : getenv("XPJIT_REDIS");
  *state = NULL;
  if (!url || !*url || !strcmp(url, "off"))
    return XPJ_OK;
  return redis_open(url, desc && desc->redis ? "xpj_context_desc.redis"
                                             : "XPJIT_REDIS",
                    (rt_redis **)state);
}

static void close_tier(void *state) { rt_redis_close(state); }

const rt_tier rt_tier_redis = {"Redis",    RT_TIER_REMOTE, open_tier,
                               close_tier, get,            put,
                               done};
