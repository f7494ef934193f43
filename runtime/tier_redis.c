/* tier_redis.c - the cluster tier: compiled kernels shared by every node
 * of a cluster through one Redis (docs/cache.md, "The Redis tier").
 *
 * Walked after the local tiers and before a compile. A value carries the
 * full cache key it was stored under and a checksum of everything (an
 * HMAC when the cluster shares a secret): a value for another key or
 * version, damaged or forged, is refused and counted, never loaded. One
 * compile per key cluster-wide: a miss takes a short lock key
 * (SET NX PX); others poll for the value until it appears or the lock goes
 * (its holder finished or died), then take it themselves. Every command
 * has a timeout, and a Redis that fails or times out is left alone for a
 * while (a circuit breaker doubling from 1 to 30 s): the program goes on
 * with its local tiers and compiles. */
#include "tier.h"

#include <hiredis/hiredis.h>
#include <nettle/hmac.h>
#include <nettle/sha2.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define VALUE_MAGIC "XPJR"
#define VALUE_FORMAT 1u
#define FLAG_HMAC 1u
#define MAX_VALUE (512u << 20) /* larger values are refused */

struct rt_redis {
  pthread_mutex_t mu;
  redisContext *c; /* NULL: not connected */
  pid_t pid;       /* the process that connected: a forked child makes
                      its own connection instead of sharing the socket */
  char *host, *unix_path, *user, *pass;
  int port, db;
  char shown[512]; /* the URL, password masked: for messages */
  struct timeval timeout;
  int64_t ttl_s;
  uint8_t secret[32];
  bool has_secret;
  int64_t down_until_ms; /* circuit breaker: no command before then */
  unsigned fails;        /* consecutive failures */
  bool warned_reply;     /* an error reply was reported */
  /* a wait for another process's compile (its lock) ended without its
   * value: from then on this process waits for no lock (a lock planted
   * by anyone who can write the Redis stalls each kernel once at most) */
  _Atomic bool lock_distrust;
};

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

/* redis://[[user]:password@]host[:port][/db] or unix:/path[?db=N] */
static xpj_status parse_url(rt_redis *r, const char *url) {
  if (!strncmp(url, "unix:", 5)) {
    const char *p = url + 5;
    while (p[0] == '/' && p[1] == '/')
      p++;
    const char *q = strstr(p, "?db=");
    size_t n = q ? (size_t)(q - p) : strlen(p);
    if (!n || *p != '/')
      return rt_err(XPJ_ERR_INVALID, "XPJIT_REDIS=%s: a unix socket needs an "
                    "absolute path (unix:/run/redis.sock)", url);
    if (q) {
      char *end;
      long db = strtol(q + 4, &end, 10);
      if (*end || db < 0 || db > 1000000)
        return rt_err(XPJ_ERR_INVALID, "XPJIT_REDIS: bad database number in "
                      "%s", url);
      r->db = (int)db;
    }
    r->unix_path = dup_n(p, n);
    snprintf(r->shown, sizeof r->shown, "%s", url);
    return r->unix_path ? XPJ_OK : rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  if (strncmp(url, "redis://", 8) != 0)
    return rt_err(XPJ_ERR_INVALID, "XPJIT_REDIS=%.200s: expected "
                  "redis://[user:password@]host[:port][/db] or unix:/path",
                  url);
  const char *p = url + 8, *at = strrchr(p, '@');
  if (at) {
    const char *colon = memchr(p, ':', (size_t)(at - p));
    if (colon) {
      if (colon > p)
        r->user = dup_n(p, (size_t)(colon - p));
      r->pass = dup_n(colon + 1, (size_t)(at - colon - 1));
    } else {
      r->pass = dup_n(p, (size_t)(at - p));
    }
    p = at + 1;
  }
  const char *slash = strchr(p, '/');
  const char *hend = slash ? slash : p + strlen(p);
  const char *colon = NULL;
  if (*p == '[') { /* [ipv6]:port */
    const char *rb = memchr(p, ']', (size_t)(hend - p));
    if (!rb)
      return rt_err(XPJ_ERR_INVALID, "XPJIT_REDIS: unclosed [ in the host");
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
      return rt_err(XPJ_ERR_INVALID, "XPJIT_REDIS: bad port in the URL");
    r->port = (int)port;
  }
  if (slash && slash[1]) {
    char *end;
    long db = strtol(slash + 1, &end, 10);
    if (*end || db < 0 || db > 1000000)
      return rt_err(XPJ_ERR_INVALID, "XPJIT_REDIS: bad database number in "
                    "the URL");
    r->db = (int)db;
  }
  if (!r->host || !*r->host)
    return rt_err(XPJ_ERR_INVALID, "XPJIT_REDIS: no host in the URL");
  snprintf(r->shown, sizeof r->shown, "redis://%s%s%s%s:%d/%d",
           r->user ? r->user : "", r->pass ? ":***" : "",
           r->user || r->pass ? "@" : "", r->host, r->port, r->db);
  return XPJ_OK;
}

/* XPJIT_REDIS_SECRET_FILE: a file of at least 16 bytes shared by the
 * cluster's users; values are then signed and checked with HMAC-SHA256 of
 * its SHA-256. */
static xpj_status load_secret(rt_redis *r) {
  const char *path = getenv("XPJIT_REDIS_SECRET_FILE");
  if (!path || !*path)
    return XPJ_OK;
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return rt_err(XPJ_ERR_IO, "XPJIT_REDIS_SECRET_FILE=%s: %s", path,
                  strerror(errno));
  uint8_t buf[4096];
  size_t n = fread(buf, 1, sizeof buf, fp);
  fclose(fp);
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

xpj_status rt_redis_open(const char *url, rt_redis **out) {
  *out = NULL;
  rt_redis *r = calloc(1, sizeof *r);
  if (!r)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  pthread_mutex_init(&r->mu, NULL);
  int64_t ms = 50;
  const char *t = getenv("XPJIT_REDIS_TIMEOUT");
  xpj_status st = parse_url(r, url);
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
    st = load_secret(r);
  if (st != XPJ_OK) {
    rt_redis_close(r);
    return st;
  }
  *out = r;
  return XPJ_OK;
}

void rt_redis_close(rt_redis *r) {
  if (!r)
    return;
  if (r->c)
    redisFree(r->c);
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

/* Call with r->mu held: drops the connection and leaves Redis alone for a
 * while; says so when it was up. */
static void trip(rt_redis *r, const char *what) {
  if (r->c)
    redisFree(r->c);
  r->c = NULL;
  unsigned shift = r->fails < 5 ? r->fails : 5;
  int64_t wait = (int64_t)1000 << shift;
  if (wait > 30000)
    wait = 30000;
  r->down_until_ms = mono_ms() + wait;
  if (r->fails++ == 0)
    rt_warn("Redis tier %s: %s; using the local tiers and compiling here, "
            "trying it again in %lld s", r->shown, what,
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

/* One command and its reply, bounded as security.md says: the whole
 * exchange within the tier's time limit (hiredis's own timeout bounds
 * each read, so a server that trickles bytes would hold a blocking
 * redisCommand for as long as it likes), a reply no larger than a value
 * may be and its header (hiredis buffers a bulk string whole before it
 * says how long it is), and no array (no command here gets one; hiredis
 * makes room for every element an array's header announces). A reply
 * followed by more bytes is taken, and the connection dropped after it:
 * nothing is asked that could explain them. */
static redisReply *command(rt_redis *r, int argc, const char **argv,
                           const size_t *len) {
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
  while (!what[0] && !done)
    if (redisBufferWrite(c, &done) != REDIS_OK)
      snprintf(what, sizeof what, "%s",
               errno == EAGAIN || errno == EWOULDBLOCK ? "timed out"
                                                       : c->errstr);
  bool first = true;
  while (!what[0]) {
    if (redisGetReplyFromReader(c, &rep) != REDIS_OK) {
      snprintf(what, sizeof what, "%s", c->errstr);
      break;
    }
    if (rep)
      break;
    if (mono_ms() >= deadline) {
      snprintf(what, sizeof what, "timed out");
      break;
    }
    char buf[65536];
    ssize_t n = read(c->fd, buf, sizeof buf);
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
  if (!rep) {
    trip(r, what);
  } else if (extra) {
    redisFree(r->c); /* unasked bytes: the next command starts afresh */
    r->c = NULL;
  }
  return rep;
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
  r->c = r->unix_path ? redisConnectUnixWithTimeout(r->unix_path, r->timeout)
                      : redisConnectWithTimeout(r->host, r->port, r->timeout);
  if (!r->c || r->c->err) {
    char what[200];
    snprintf(what, sizeof what, "cannot connect: %s",
             r->c ? r->c->errstr : "out of memory");
    trip(r, what);
    return false;
  }
  redisSetTimeout(r->c, r->timeout);
  r->pid = getpid();
  if (r->pass) {
    const char *argv[3] = {"AUTH", r->user ? r->user : r->pass, r->pass};
    redisReply *rep = command(r, r->user ? 3 : 2, argv, NULL);
    if (!rep)
      return false;
    bool ok = rep->type != REDIS_REPLY_ERROR;
    char what[300];
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
    redisReply *rep = command(r, 2, argv, NULL);
    if (!rep)
      return false;
    bool ok = rep->type != REDIS_REPLY_ERROR;
    char what[300];
    snprintf(what, sizeof what, "SELECT %s failed (%.200s)", db,
             ok ? "" : rep->str);
    freeReplyObject(rep);
    if (!ok) {
      trip(r, what);
      return false;
    }
  }
  if (r->fails)
    rt_warn("Redis tier %s: back", r->shown);
  r->fails = 0;
  return true;
}

/* One command under the lock; NULL when Redis is down (counted, but not
 * for a first look: its lookup is asked again, and counted then). An
 * error reply is returned to the caller. */
static redisReply *run(rt_obtain *ob, rt_redis *r, int argc,
                       const char **argv, const size_t *len) {
  pthread_mutex_lock(&r->mu);
  bool up = connected(r);
  redisReply *rep = up ? command(r, argc, argv, len) : NULL;
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
    if (first) /* once: NOAUTH, OOM, READONLY say what to fix */
      rt_warn("Redis tier %s: %s %s: %.300s; using the local tiers for "
              "what it refuses", r->shown, argv[0],
              argc > 1 && !strncmp(argv[1], "xpjit:", 6) ? argv[1] : "",
              rep->str ? rep->str : "an error");
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
    redisReply *rep = run(ob, r, 2, get, NULL);
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
        hit = true;
        note(ob, (xpj_cache_counters){.redis_hits = 1,
                                      .saved_ms = f->v.compile_ms,
                                      .redis_waits = waited});
        break;
      }
      rt_warn("Redis tier %s: refused the value for %s [%s] (%s); compiling "
              "it", r->shown, ob->rq->kernel, ob->rq->dtypes, why);
      note(ob, (xpj_cache_counters){.redis_refused = 1});
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
    rep = run(ob, r, 6, set, NULL);
    if (!rep)
      break;
    bool mine = rep->type == REDIS_REPLY_STATUS;
    bool refused = rep->type == REDIS_REPLY_ERROR; /* OOM, read-only... */
    freeReplyObject(rep);
    if (refused)
      break; /* compile without the lock */
    if (mine) {
      /* the holder before us may have stored the value and let go
       * between our GET and our SET: look once more, holding the lock */
      ob->held = true;
      continue;
    }
    /* another process or node is compiling it: wait for its value */
    if (atomic_load(&r->lock_distrust))
      break;
    int64_t now = mono_ms();
    if (!deadline) {
      waiting_since = now;
      deadline = now + (ob->wait_ms ? ob->wait_ms : lock_ms);
    }
    if (now >= deadline) {
      if (!atomic_exchange(&r->lock_distrust, true))
        rt_warn("Redis tier %s: waited %lld ms for %s [%s] from the "
                "process or node holding its compile lock, which never "
                "stored it; compiling it here, and waiting for no lock "
                "from now on", r->shown,
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
    redisReply *rep = run(ob, r, 5, argv, len);
    free(v);
    if (rep) {
      if (rep->type == REDIS_REPLY_STATUS)
        note(ob, (xpj_cache_counters){.redis_stores = 1});
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
  redisReply *rep = run(ob, r, 5, argv, NULL);
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
  return rt_redis_open(url, (rt_redis **)state);
}

static void close_tier(void *state) { rt_redis_close(state); }

const rt_tier rt_tier_redis = {"Redis",    RT_TIER_REMOTE, open_tier,
                               close_tier, get,            put,
                               done};
