/*
 * cache.c - the second-level compile cache and kernel bundles in SQLite.
 *
 * One table of entries keyed by the SHA-256 digest of the canonical key
 * text; the full key text is stored beside it and compared on every hit,
 * and a checksum over everything a user of the row relies on (status,
 * entry point, sizes, binary, log, expiry) is verified on every read: in
 * the user cache an HMAC-SHA256 with the cache's own random key (PATH.key,
 * 0600), so that only its owner's processes can write a row that passes;
 * in bundles plain SHA-256. Entries and bundles are code that will run:
 * before anything is read, the directory and files must pass the checks
 * of cache/trust.c (nobody else could have written them).
 *
 * The file carries an application id and the schema version (PRAGMA
 * application_id and user_version) and must hold exactly this version's
 * tables: anything else at the path is moved aside and a new database is
 * created. Recovery runs under an flock on PATH.lock so that processes
 * that find the same damage do not move each other's new file.
 *
 * A handle reads through a read-only connection until its first write
 * (to_writable): a process whose kernels are all in the file opens it,
 * checks it and reads its rows without a write, a lock of ours or the
 * WAL's set-up writes. The hits' bookkeeping waits for close, where a
 * row's use time is written only when the stored one is older than an
 * hour (USE_GRANULARITY_MS), and counters and hit counts that need no
 * write of their own go to a side file (PATH.stats) that the next write
 * transaction folds into the tables: a process that only hits rows used
 * within the hour never writes the database (see "deferred work").
 * Writes are short IMMEDIATE transactions in WAL mode (synchronous=NORMAL:
 * a killed process loses at most its last transaction, never tears one).
 * Busy databases are retried with backoff for up to 30 s; a lookup that
 * still cannot read is a miss and a write that cannot write is skipped,
 * so a process never sees an error because another is writing. Errors of
 * the file system (read-only, full, I/O) turn the handle read-only with
 * one warning.
 */
#define _GNU_SOURCE
#include "xpjit_cache.h"
#include "buf.h" /* xpj_dec */
#include "env.h"
#include "hitfile.h"
#include "sqlite_dl.h" /* SQLite, loaded at the first open */
#include "trust.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <nettle/hmac.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <signal.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#define APP_ID XPJ_CACHE_APP_ID /* "XPJC" */
#define BUSY_DEADLINE_MS 30000
#define KEY_MAGIC "xpjit-cache-key"
#define MAX_QUEUED 8 /* warnings held back while the lock is held */
#define KEY_BYTES 32 /* the cache's signing key (PATH.key) */
/* xpj_cache_put_later: at most this many entries, and bytes, wait */
#define LATER_MAX 64
#define LATER_MAX_BYTES (64u << 20)
/* A hit writes a row's last_used only when the stored one is at least this
 * old (docs/cache.md, "Use times and hit counts"): eviction and prune's
 * age are exact to within it. */
#define USE_GRANULARITY_MS (3600 * 1000LL)
/* The side file (PATH.stats) of counters and hits of handles that had
 * nothing else to write; past SIDE_MAX bytes the next one writes the
 * database instead, and folds the file into it. */
#define SIDE ".stats"
#define SIDE_MAX (256u << 10)
#define WANT_MAX 64 /* hit files to make at the next settle */
#define SIDE_READ_MAX (4u << 20) /* what a reader reads of it at most */
#define SIDE_LOCK_MS 50 /* how long its flock is waited for */
#define ENV_MIN_SIZE (1u << 20) /* XPJIT_CACHE_MAX_SIZE at least */

/* A put deferred to the cache's next write transaction
 * (xpj_cache_put_later): the row exactly as xpj_cache_put would write it,
 * signed when it is written (flush_deferred: with the key in use then);
 * k, v and text point into the allocation that holds it. */
struct later {
  char digest[65];
  int64_t t;    /* when it was put: the row's created and last_used */
  size_t bytes; /* the allocation's size (LATER_MAX_BYTES) */
  char *text;   /* the canonical key text */
  xpj_cache_key k;
  xpj_cache_value v;
};

struct xpj_cache {
  pthread_mutex_t mu;
  sqlite3 *db;
  unsigned generation;   /* connections opened into db so far */
  bool db_writes;        /* db was opened read-write (else read-only until
                            the first write: to_writable) */
  sqlite3_stmt *lookup;  /* the lookup, prepared once per connection */
  char *path;
  _Atomic(xpj_cache_mode) mode; /* in effect; read without the lock */
  bool bundle;
  bool recovered; /* recovery already tried on this handle */
  uint64_t max_size;
  xpj_cache_warn_fn warn;
  void *warn_ud;
  /* deferred work, written with the next write transaction
   * (flush_deferred) or on its own (flush_all): counters, uses, puts */
  xpj_cache_counters pending;
  /* uses not written yet, one per row: the last use, the hits, and
   * whether the row's stored last_used is older than USE_GRANULARITY_MS
   * (due: a write at close); created names the row (a row replaced
   * meanwhile is another) */
  struct touch {
    char digest[65];
    bool due;
    int64_t t, created;
    uint64_t n;
  } *touched;
  size_t ntouched, cap_touched;
  unsigned unsettled; /* hits since the deferred work was last settled */
  int side_fd; /* PATH.stats, locked, folded into the open transaction:
                  emptied when it commits (side_done); -1 */
  struct later *later[LATER_MAX + 1]; /* puts not written yet, in order */
  size_t nlater, later_bytes;
  char *queued[MAX_QUEUED]; /* warnings to give once unlocked (unlock) */
  unsigned nqueued, nlost;
  uint8_t key[KEY_BYTES]; /* signs the rows (user cache; set at open) */
  bool has_key;
  dev_t key_dev; /* the file it was read from (key_renewed) */
  ino_t key_ino;
  struct timespec key_ctime;
  /* hit files (hitfile.h): lazy (xpj_l2_open) until the database is
   * opened (db_tried); no_hits: none read or written by this handle (it
   * still removes those of rows it deletes) */
  bool lazy, db_tried, no_hits;
  /* compiles of one key taken in turn by the processes of this file
   * (xpj_l2_flight_begin): a user cache on a local file system, unless
   * XPJIT_CACHE_SINGLE_FLIGHT=0 */
  bool flight;
  /* the database file the writer's connection opened (taken under the
   * shared lock, which a replacement of the file waits for): hit files
   * are labelled with it, and written only while it is still the file at
   * the path */
  xpj_hit_db conn_db;
  bool conn_db_ok;
  /* PATH.hits kept open for the reads of hit_read and the aliases
   * (hits_dir_kept), and since when; the database file's identity, which
   * hit files must carry, for the same time (db_id_kept; 0: not taken
   * yet, 1: kept_db, -1: no file) */
  int kept_dfd;
  int64_t kept_ms;
  xpj_hit_db kept_db;
  int kept_db_state;
  /* hits the database served whose hit files are missing: made at the
   * next settle, in a write transaction that does not wait (make_wanted) */
  struct want {
    char digest[65];
    int64_t created;
  } want[WANT_MAX];
  unsigned nwant;
  char problem[4600];  /* why the mode is lower than asked (xpj_cache_problem) */
  char replaced[4600]; /* the file was moved aside: why (for verify) */
};

/* ---- messages -------------------------------------------------------- */

static _Thread_local char last_msg[2048];

const char *xpj_cache_last_error(void) { return last_msg; }

static xpj_status fail(xpj_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static xpj_status fail(xpj_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_msg, sizeof last_msg, fmt, ap);
  va_end(ap);
  return st;
}

static void deliver(const xpj_cache *c, const char *msg) {
  if (c->warn)
    c->warn(c->warn_ud, msg);
  else
    xpj_log_warning(msg);
}

/* Queues a warning; unlock() gives it. Called with c->mu held (or, in
 * xpj_cache_open, before anyone else can see c). */
static void warnf(xpj_cache *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void warnf(xpj_cache *c, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (c->nqueued < MAX_QUEUED && (c->queued[c->nqueued] = strdup(msg)))
    c->nqueued++;
  else
    c->nlost++;
}

/* A write past RLIMIT_FSIZE (ulimit -f, a batch system's file size
 * limit) raises SIGXFSZ, whose default action ends the process: a
 * program that does not ignore it died when its cache grew past the
 * limit (SQLite's -shm or file, a hit file), where a full disk only
 * turns the cache read-only. While a call of the cache runs with such a
 * limit set, the signal is blocked in its thread, so that the write
 * fails with EFBIG and is handled as a full disk is; one it raised is
 * taken back before the thread's mask is restored (as tier_redis.c does
 * with SIGPIPE). Nested (an export holds its cache and its bundle): the
 * outermost call blocks and restores. No limit: nothing is done. */
static _Thread_local struct {
  unsigned depth;
  bool on;      /* a limit was set: the signal is blocked */
  bool pending; /* one was pending before: not ours to take */
  sigset_t old;
} xfsz;

void xpj_l2_fsize_block(void) {
  if (xfsz.depth++)
    return;
  struct rlimit rl;
  xfsz.on = getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
  if (!xfsz.on)
    return;
  sigset_t sig, pend;
  sigemptyset(&sig);
  sigaddset(&sig, SIGXFSZ);
  sigpending(&pend);
  xfsz.pending = sigismember(&pend, SIGXFSZ) == 1;
  pthread_sigmask(SIG_BLOCK, &sig, &xfsz.old);
}

void xpj_l2_fsize_restore(void) {
  if (!xfsz.depth || --xfsz.depth || !xfsz.on)
    return;
  sigset_t sig, pend;
  sigemptyset(&sig);
  sigaddset(&sig, SIGXFSZ);
  sigpending(&pend);
  if (!xfsz.pending && sigismember(&pend, SIGXFSZ) == 1) {
    struct timespec zero = {0, 0};
    int saved = errno;
    while (sigtimedwait(&sig, NULL, &zero) < 0 && errno == EINTR)
      ;
    errno = saved;
  }
  pthread_sigmask(SIG_SETMASK, &xfsz.old, NULL);
}

/* Takes c->mu for a call (xpj_l2_fsize_block: its writes fail, never kill). */
static void lock(xpj_cache *c) {
  pthread_mutex_lock(&c->mu);
  xpj_l2_fsize_block();
}

/* Releases c->mu, then gives the warnings queued while it was held: the
 * handler runs unlocked, so it may call back into this cache (or set a new
 * handler) without deadlocking. */
static void unlock(xpj_cache *c) {
  char *q[MAX_QUEUED];
  unsigned n = c->nqueued, lost = c->nlost;
  memcpy(q, c->queued, n * sizeof *q);
  c->nqueued = c->nlost = 0;
  xpj_l2_fsize_restore();
  pthread_mutex_unlock(&c->mu);
  for (unsigned i = 0; i < n; i++) {
    deliver(c, q[i]);
    free(q[i]);
  }
  if (lost) {
    char msg[4400];
    snprintf(msg, sizeof msg, "cache %s: %u more warnings not shown",
             c->path ? c->path : "", lost);
    deliver(c, msg);
  }
}

/* ---- small helpers --------------------------------------------------- */

/* PATH.hits (made when create) as it is now, or -1; the caller closes
 * it. Opened each time: a handle must not act on a directory that has
 * since been removed or replaced. */
static int hits_dir(const xpj_cache *c, bool create) {
  return xpj_hitdir_open(c->path, create);
}

static void hits_close(int dfd) {
  if (dfd >= 0)
    close(dfd);
}

static int64_t now_ms(void);

/* PATH.hits for reading hit files (mu held; not closed by the caller):
 * kept open for up to a second, then opened and checked again. A fresh
 * process's hits then cost no open of the directory each; a read through
 * a directory replaced meanwhile is still of this user's files, each
 * checked (hit_check), and for at most that second. */
static int hits_dir_kept(xpj_cache *c) {
  int64_t now = now_ms();
  if (c->kept_dfd < 0 || now - c->kept_ms >= 1000 || now < c->kept_ms) {
    hits_close(c->kept_dfd);
    c->kept_dfd = hits_dir(c, false);
    c->kept_ms = now;
    c->kept_db_state = 0;
  }
  return c->kept_dfd;
}

/* The database file's identity (xpj_hitfile_db_id) for hit_check: taken
 * once while the hit-file directory is kept (hits_dir_kept), like it for
 * at most a second; a statx of the path was a tenth of a cached kernel's
 * get. A file replaced meanwhile is noticed at the next second: until
 * then the hit files of the file before are believed (each still checked
 * against the cache's key), those of the new one are not (a miss). */
static bool db_id_kept(xpj_cache *c, xpj_hit_db *db) {
  if (c->kept_dfd < 0)
    return xpj_hitfile_db_id(c->path, db);
  if (!c->kept_db_state)
    c->kept_db_state = xpj_hitfile_db_id(c->path, &c->kept_db) ? 1 : -1;
  *db = c->kept_db;
  return c->kept_db_state > 0;
}

static void hits_unlink(const xpj_cache *c, const char *digest) {
  int dfd = hits_dir(c, false);
  xpj_hitfile_unlink(dfd, digest);
  hits_close(dfd);
}

static void hits_wipe(xpj_cache *c) {
  int dfd = hits_dir(c, false);
  xpj_hitdir_wipe(dfd);
  hits_close(dfd);
}


static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}


/* The directory part of path: "." when it has none, "/" for "/x". */
static char *parent_of(const char *path, char *dir, size_t size) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    snprintf(dir, size, ".");
  else if (slash == path)
    snprintf(dir, size, "/");
  else
    snprintf(dir, size, "%.*s", (int)(slash - path), path);
  return dir;
}

static void to_hex(const uint8_t *d, size_t n, char *hex) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    hex[2 * i] = digits[d[i] >> 4];
    hex[2 * i + 1] = digits[d[i] & 15];
  }
  hex[2 * n] = 0;
}

static bool is_busy(int rc) {
  rc &= 0xff;
  return rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
}
static bool is_corrupt(int rc) {
  rc &= 0xff;
  return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB;
}
/* the file system will not let us write */
static bool is_env(int rc) {
  rc &= 0xff;
  return rc == SQLITE_FULL || rc == SQLITE_READONLY || rc == SQLITE_IOERR ||
         rc == SQLITE_CANTOPEN || rc == SQLITE_PERM || rc == SQLITE_AUTH;
}

/* private result codes of setup() */
#define RC_FOREIGN 1000 /* ours by its application id, another schema
                           version; or empty where we may not create it */
#define RC_SCHEMA 1001  /* ours by its numbers, but not its tables */
#define RC_NOT_OURS 1002 /* another program's SQLite database: never
                            moved aside nor replaced, only refused */
#define RC_NO_SQLITE 1003 /* SQLite could not be loaded (sqlite_dl.h) */
#define RC_IS_BUNDLE 1004 /* a user cache's handle found a bundle (meta
                             kind 'bundle'): refused, left as it is */
#define RC_IS_CACHE 1005 /* a bundle's handle found a user cache (meta kind
                            'cache'): refused */

/* The file is damaged (or is not what it should be): anything SQLite calls
 * corruption, a foreign or mismatched schema, and the generic SQL error
 * that statements written for this schema only get from another one. */
static bool is_damage(int rc) {
  return is_corrupt(rc) || rc == RC_FOREIGN || rc == RC_SCHEMA ||
         (rc & 0xff) == SQLITE_ERROR;
}

/* ---- the checksum ---------------------------------------------------- */

/* A row's checksum: HMAC-SHA256 keyed with the cache's own secret key in
 * the user cache, so that nobody without the key can write a row that
 * passes; plain SHA-256 in bundles, which are distributed and whose
 * authenticity comes from their trusted owner (docs/cache.md). */
typedef struct summer {
  const uint8_t *key; /* NULL: plain SHA-256 */
  struct sha256_ctx sha;
  struct hmac_sha256_ctx hmac;
} summer;

static void sum_init(summer *m, const uint8_t *key) {
  m->key = key;
  if (key)
    hmac_sha256_set_key(&m->hmac, KEY_BYTES, key);
  else
    sha256_init(&m->sha);
}

static void sum_update(summer *m, size_t n, const void *data) {
  if (m->key)
    hmac_sha256_update(&m->hmac, n, data);
  else
    sha256_update(&m->sha, n, data);
}

static void sum_hex(summer *m, char hex[65]) {
  uint8_t d[SHA256_DIGEST_SIZE];
  if (m->key)
    hmac_sha256_digest(&m->hmac, sizeof d, d);
  else
    sha256_digest(&m->sha, sizeof d, d);
  to_hex(d, sizeof d, hex);
}

static void put_u64(summer *m, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t)(v >> (8 * i));
  sum_update(m, 8, b);
}

static void put_str(summer *m, const char *s) {
  size_t n = s ? strlen(s) : 0;
  put_u64(m, n);
  if (n)
    sum_update(m, n, s);
}

static void sha256_hex(const void *data, size_t n, char hex[65]) {
  struct sha256_ctx m;
  uint8_t d[SHA256_DIGEST_SIZE];
  sha256_init(&m);
  sha256_update(&m, n, data);
  sha256_digest(&m, sizeof d, d);
  to_hex(d, sizeof d, hex);
}

/* The row's checksummed fields, in order. */
static void put_row(summer *m, const char *digest, int failed,
                    const char *entry, uint64_t local, uint64_t scratch,
                    const void *data, size_t size, const char *log,
                    int64_t expires) {
  put_str(m, digest);
  put_u64(m, (uint64_t)(int64_t)failed);
  put_str(m, entry);
  put_u64(m, local);
  put_u64(m, scratch);
  put_u64(m, size);
  if (size)
    sum_update(m, size, data);
  put_str(m, log);
  put_u64(m, (uint64_t)expires);
}

/* Over the digest and everything a user of the row relies on; key: the
 * cache's (HMAC), or NULL for a bundle's plain SHA-256. */
static void row_checksum(const uint8_t *key, const char *digest, int failed,
                         const char *entry, uint64_t local, uint64_t scratch,
                         const void *data, size_t size, const char *log,
                         int64_t expires, char hex[65]) {
  summer m;
  sum_init(&m, key);
  put_row(&m, digest, failed, entry, local, scratch, data, size, log,
          expires);
  sum_hex(&m, hex);
}

/* A hit file's checksum (hitfile.h): the cache's HMAC over what the row's
 * covers (a success, lasting) and the fields only the file adds, under a
 * name of its own (no row's checksum is ever a hit file's, or the
 * reverse). */
static void hit_sum(const uint8_t *key, const char *digest, const char *entry,
                    uint64_t local, uint64_t scratch, const void *data,
                    size_t size, const char *log, int64_t created,
                    double compile_ms, const xpj_hit_db *db, char hex[65]) {
  summer m;
  uint64_t ms;
  memcpy(&ms, &compile_ms, sizeof ms);
  sum_init(&m, key);
  put_str(&m, "xpjit hit file 1");
  put_row(&m, digest, 0, entry, local, scratch, data, size, log, 0);
  put_u64(&m, (uint64_t)created);
  put_u64(&m, ms);
  put_u64(&m, db->dev);
  put_u64(&m, db->ino);
  put_u64(&m, db->born);
  sum_hex(&m, hex);
}

/* ---- keys ------------------------------------------------------------ */

static bool field_ok(const char *s) { return s && !strchr(s, '\n'); }

/* s copied to w, NUL-terminated; the end */
static char *text_str(char *w, const char *s) {
  size_t n = strlen(s);
  memcpy(w, s, n + 1);
  return w + n;
}

/* Whether k's fields make a key: none with a newline, and code, kernel,
 * target and versions not empty. */
static bool key_ok(const xpj_cache_key *k) {
  return field_ok(k->code) && *k->code && field_ok(k->kernel) &&
         *k->kernel && field_ok(k->dtypes) && field_ok(k->target) &&
         *k->target && field_ok(k->options) && field_ok(k->versions) &&
         *k->versions;
}

xpj_status xpj_cache_key_digest(const xpj_cache_key *k, char **text,
                                char hex[65]) {
  if (text)
    *text = NULL;
  if (!k || !hex)
    return fail(XPJ_ERR_INVALID, "xpj_cache_key_digest: NULL argument");
  if (!key_ok(k))
    return fail(XPJ_ERR_INVALID,
                "cache key: a component is missing or contains a newline");
  size_t need = strlen(k->code) + strlen(k->kernel) + strlen(k->dtypes) +
                strlen(k->target) + strlen(k->options) +
                strlen(k->versions) + 160;
  char *t = malloc(need);
  if (!t)
    return fail(XPJ_ERR_NOMEM, "out of memory");
  /* "%s %d\ncode %s\nkernel %s\ndtypes %s\nndim %u\ntarget %s\n"
   * "options %s\nversions %s\n", built without printf (the target of
   * the CPU is a kilobyte of features, and every get makes a key) */
  char *w = t;
  w = text_str(w, KEY_MAGIC " ");
  w += xpj_dec(w, XPJ_CACHE_SCHEMA_VERSION);
  w = text_str(text_str(w, "\ncode "), k->code);
  w = text_str(text_str(w, "\nkernel "), k->kernel);
  w = text_str(text_str(w, "\ndtypes "), k->dtypes);
  w = text_str(w, "\nndim ");
  w += xpj_dec(w, k->ndim);
  w = text_str(text_str(w, "\ntarget "), k->target);
  w = text_str(text_str(w, "\noptions "), k->options);
  w = text_str(text_str(w, "\nversions "), k->versions);
  w = text_str(w, "\n");
  size_t n = (size_t)(w - t);
  sha256_hex(t, n, hex);
  if (text)
    *text = t;
  else
    free(t);
  return XPJ_OK;
}

/* Whether e's columns (code, kernel, dtypes, ndim, target, options,
 * versions) are the fields of its key text: what lookups compare is the
 * key, but listings, exports and imports read the columns, which no
 * checksum covers (one changed by hand would be shown, and copied into
 * the next cache, as if it were the key's). Leaves the thread's last
 * error alone (the calls that ask succeed). */
static bool columns_match(const xpj_cache_entry *e) {
  xpj_cache_key k = {e->code,   e->kernel,  e->dtypes,  e->ndim,
                     e->target, e->options, e->versions};
  if (!e->key || !key_ok(&k)) /* (xpj_cache_key_digest would say why) */
    return false;
  char *text = NULL, hex[65];
  bool same = xpj_cache_key_digest(&k, &text, hex) == XPJ_OK &&
              !strcmp(text, e->key) && !strcmp(hex, e->digest);
  free(text);
  return same;
}

/* ---- statements with retries ----------------------------------------- */

/* Runs sql (no results), retrying while busy up to the deadline. */
static int exec_retry(sqlite3 *db, const char *sql) {
  int64_t t0 = now_ms();
  unsigned wait = 1;
  for (;;) {
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    if (!is_busy(rc) || now_ms() - t0 > BUSY_DEADLINE_MS)
      return rc;
    sleep_ms(wait);
    if (wait < 64)
      wait *= 2;
  }
}

static int step_retry(sqlite3_stmt *s) {
  int64_t t0 = now_ms();
  unsigned wait = 1;
  for (;;) {
    int rc = sqlite3_step(s);
    if (!is_busy(rc) || now_ms() - t0 > BUSY_DEADLINE_MS)
      return rc;
    sqlite3_reset(s);
    sleep_ms(wait);
    if (wait < 64)
      wait *= 2;
  }
}

static int to_writable(xpj_cache *c);

/* A write transaction, on a connection that can write (to_writable). */
static int begin(xpj_cache *c) {
  int rc = to_writable(c);
  return rc == SQLITE_OK ? exec_retry(c->db, "BEGIN IMMEDIATE") : rc;
}

static void side_done(xpj_cache *c, bool committed);

/* Ends the write transaction: commits when rc says so, else rolls back.
 * The side file folded into it is emptied once it is committed. */
static int finish(xpj_cache *c, int rc) {
  if (!c->db) { /* begin could not open the file for writing */
    side_done(c, false);
    return rc;
  }
  if (rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW) {
    rc = exec_retry(c->db, "COMMIT");
    if (rc == SQLITE_OK) {
      side_done(c, true);
      return rc;
    }
  }
  if (!sqlite3_get_autocommit(c->db))
    sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
  side_done(c, false);
  return rc;
}

static int64_t query_int(sqlite3 *db, const char *sql, int *rc) {
  sqlite3_stmt *s = NULL;
  int64_t v = 0;
  *rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
  if (*rc == SQLITE_OK) {
    *rc = step_retry(s);
    if (*rc == SQLITE_ROW) {
      v = sqlite3_column_int64(s, 0);
      *rc = SQLITE_OK;
    } else if (*rc == SQLITE_DONE) {
      *rc = SQLITE_OK;
    }
  }
  sqlite3_finalize(s);
  return v;
}

/* ---- opening, the schema, recovery ------------------------------------ */

/* The schema, one object a line: type, name, table, and what follows the
 * name in its CREATE statement (NULL: an index SQLite makes for a primary
 * key). Both the statements that create it and the text a file of this
 * version holds in sqlite_master come from this one list. */
#define SCHEMA(X)                                                            \
  X("index", "entries_lru", "entries", " ON entries(last_used)")             \
  X("index", "sqlite_autoindex_entries_1", "entries", NULL)                  \
  X("index", "sqlite_autoindex_meta_1", "meta", NULL)                        \
  X("index", "sqlite_autoindex_stats_1", "stats", NULL)                      \
  X("table", "entries", "entries",                                           \
    "( digest TEXT PRIMARY KEY, key TEXT NOT NULL, code TEXT, kernel TEXT,"  \
    " dtypes TEXT, ndim INTEGER, target TEXT, options TEXT, versions TEXT,"  \
    " failed INTEGER NOT NULL, entry TEXT, local_bytes INTEGER,"             \
    " scratch_bytes INTEGER, data BLOB, log TEXT, checksum TEXT NOT NULL,"   \
    " size INTEGER NOT NULL, compile_ms REAL, created INTEGER,"              \
    " last_used INTEGER, hits INTEGER DEFAULT 0,"                            \
    " expires INTEGER NOT NULL DEFAULT 0)")                                  \
  X("table", "meta", "meta", "(name TEXT PRIMARY KEY, value TEXT)")          \
  X("table", "stats", "stats", "(name TEXT PRIMARY KEY, value REAL)")

/* CREATE ... IF NOT EXISTS for each object with a statement (tables
 * first: an index needs its table); sqlite3_free it. */
static char *schema_create(void) {
  sqlite3_str *b = sqlite3_str_new(NULL);
  for (int pass = 0; pass < 2; pass++) {
#define ONE(type, name, tbl, body)                                           \
    if ((body) && (pass == 0) == !strcmp(type, "table"))                     \
      sqlite3_str_appendf(b, "CREATE %s IF NOT EXISTS %s%s;",                \
                          !strcmp(type, "table") ? "TABLE" : "INDEX", name,   \
                          (const char *)(body));
    SCHEMA(ONE)
#undef ONE
  }
  return sqlite3_str_finish(b);
}

/* What SQLite keeps in sqlite_master for it: "CREATE TABLE " and the
 * text from the name on, one row a line as schema_text reads them (the
 * list is in (type, name) order); sqlite3_free it. */
static char *schema_expected(void) {
  sqlite3_str *b = sqlite3_str_new(NULL);
#define ONE(type, name, tbl, body)                                           \
  if (body)                                                                  \
    sqlite3_str_appendf(b, "%s %s %s CREATE %s %s%s\n", type, name, tbl,     \
                        !strcmp(type, "table") ? "TABLE" : "INDEX", name,     \
                        (const char *)(body));                               \
  else                                                                       \
    sqlite3_str_appendf(b, "%s %s %s \n", type, name, tbl);
  SCHEMA(ONE)
#undef ONE
  return sqlite3_str_finish(b);
}

static void db_close(xpj_cache *c) {
  c->conn_db_ok = false;
  sqlite3_finalize(c->lookup);
  c->lookup = NULL;
  if (c->db)
    sqlite3_close_v2(c->db);
  c->db = NULL;
  c->db_writes = false;
}

static int cmp_line(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The schema as SQLite keeps it, one object a line ("type name table
 * sql", in that order, so that sorted lines are in (type, name) order)
 * into *out (malloc'd; NULL on error), and how many objects it has;
 * SQLite's code. The lines are sorted here: an ORDER BY would run
 * SQLite's sorter, code a fresh process has not touched yet. */
static int schema_text(sqlite3 *db, char **out, int64_t *n) {
  enum { MAX_OBJECTS = 64 }; /* more: not ours (compared in full anyway) */
  sqlite3_stmt *s = NULL;
  char *line[MAX_OBJECTS];
  size_t nline = 0, len = 1;
  *out = NULL;
  *n = 0;
  int rc = sqlite3_prepare_v2(db,
                              "SELECT type, name, tbl_name, coalesce(sql, '') "
                              "FROM sqlite_master",
                              -1, &s, NULL);
  while (rc == SQLITE_OK && (rc = step_retry(s)) == SQLITE_ROW) {
    rc = SQLITE_OK;
    if (++*n > MAX_OBJECTS)
      continue;
    char *l = sqlite3_mprintf("%s %s %s %s\n", sqlite3_column_text(s, 0),
                              sqlite3_column_text(s, 1),
                              sqlite3_column_text(s, 2),
                              sqlite3_column_text(s, 3));
    if (!l) {
      rc = SQLITE_NOMEM;
      break;
    }
    line[nline++] = l;
    len += strlen(l);
  }
  sqlite3_finalize(s);
  if (rc == SQLITE_DONE && !(*out = malloc(len)))
    rc = SQLITE_NOMEM;
  if (rc == SQLITE_DONE) {
    qsort(line, nline, sizeof *line, cmp_line);
    char *at = *out;
    *at = 0;
    for (size_t i = 0; i < nline; i++)
      at = stpcpy(at, line[i]);
    if (*n > MAX_OBJECTS) /* never equal to ours */
      strcpy(*out, "?");
    rc = SQLITE_OK;
  } else if (rc == SQLITE_OK || rc == SQLITE_ROW) {
    rc = SQLITE_ERROR;
  }
  for (size_t i = 0; i < nline; i++)
    sqlite3_free(line[i]);
  return rc;
}

/* What a file of this schema version holds, twice: as SQLite has always
 * kept it (schema_expected: a string, cheap), and, only when a file
 * differs from that, schema_create run in a private in-memory database
 * and read back (an SQLite that normalises differently; it costs a third
 * of a fresh process's open, so never on the common path). */
static char *expected_schema, *reference_schema;
static void make_expected_schema(void) { expected_schema = schema_expected(); }
static void make_reference_schema(void) {
  sqlite3 *m = NULL;
  char *sql = schema_create();
  int64_t n;
  if (sql && sqlite3_open(":memory:", &m) == SQLITE_OK &&
      sqlite3_exec(m, sql, NULL, NULL, NULL) == SQLITE_OK)
    schema_text(m, &reference_schema, &n);
  sqlite3_free(sql);
  sqlite3_close(m);
}

/* Does the file hold exactly our tables (t: its schema_text)? One flipped
 * bit in a stored CREATE statement renames a column without SQLite's
 * checks noticing. */
static int check_schema(const char *t) {
  static pthread_once_t once = PTHREAD_ONCE_INIT, ref_once = PTHREAD_ONCE_INIT;
  pthread_once(&once, make_expected_schema);
  bool same = expected_schema && !strcmp(t, expected_schema);
  if (!same) {
    pthread_once(&ref_once, make_reference_schema);
    /* out of memory: no reason to doubt the file */
    same = !reference_schema || !strcmp(t, reference_schema);
  }
  return same ? SQLITE_OK : RC_SCHEMA;
}

/* The file's meta kind ('cache' or 'bundle', as setup wrote it) into
 * kind (size bytes); "" when there is none or it cannot be read (no meta
 * table: not an xpjit file, which the schema check says). */
static void read_kind(sqlite3 *db, char *kind, size_t size) {
  sqlite3_stmt *s = NULL;
  *kind = 0;
  if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE name='kind'", -1,
                         &s, NULL) == SQLITE_OK &&
      step_retry(s) == SQLITE_ROW) {
    const unsigned char *t = sqlite3_column_text(s, 0);
    snprintf(kind, size, "%s", t ? (const char *)t : "");
  }
  sqlite3_finalize(s);
}

/* What the file is: its application_id and user_version, its schema
 * (schema_text, malloc'd into *schema) with the number of objects in it,
 * and its meta kind (read_kind), read in one read transaction so that
 * another process's commit is seen whole. Plain PRAGMA statements: the
 * pragma_ table functions would build a virtual table each, which costs a
 * fresh process more than the rest of the check together. */
static int identify(sqlite3 *db, int64_t *app, int64_t *ver, char **schema,
                    int64_t *n, char *kind, size_t kind_size) {
  *schema = NULL;
  *kind = 0;
  int rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
  if (rc == SQLITE_OK)
    *app = query_int(db, "PRAGMA application_id", &rc);
  if (rc == SQLITE_OK)
    *ver = query_int(db, "PRAGMA user_version", &rc);
  if (rc == SQLITE_OK)
    rc = schema_text(db, schema, n);
  if (rc == SQLITE_OK && *app == APP_ID)
    read_kind(db, kind, kind_size);
  if (!sqlite3_get_autocommit(db))
    sqlite3_exec(db, rc == SQLITE_OK ? "COMMIT" : "ROLLBACK", NULL, NULL,
                 NULL);
  if (rc != SQLITE_OK) {
    free(*schema);
    *schema = NULL;
  }
  return rc;
}

/* Network file systems, by statfs magic (linux/magic.h and the file
 * systems' own sources): SQLite's WAL needs shared memory between the
 * processes that use a database, which these cannot give processes on
 * different machines (sqlite.org/wal.html, "WAL does not work over a
 * network filesystem"). */
static const struct {
  unsigned long magic;
  const char *name;
} network_fs[] = {
    {0x6969, "NFS"},          {0xFF534D42, "CIFS"},
    {0xFE534D42, "SMB2"},     {0x517B, "SMB"},
    {0x0BD00BD0, "Lustre"},   {0x47504653, "GPFS"},
    {0x00C36400, "CephFS"},   {0x19830326, "BeeGFS"},
    {0x01021997, "9P"},       {0x5346414F, "AFS"},
    {0x6B414653, "AFS"},      {0x013111A8, "IBRIX"},
    {0xAAD7AAEA, "PanFS"},    {0x7461636F, "OCFS2"},
    {0x01161970, "GFS2"},
};

/* The network file system the cache's directory is on, or NULL.
 * XPJIT_CACHE_JOURNAL=rollback treats any as one, =wal none. */
static const char *network_fs_of(const char *dbpath) {
  /* (a malformed value: the runtime warns at the first context) */
  static const char *const words[] = {"rollback", "wal", NULL};
  int force = xpj_env_word("XPJIT_CACHE_JOURNAL", words);
  if (force == 0)
    return "XPJIT_CACHE_JOURNAL=rollback";
  if (force == 1)
    return NULL;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", dbpath);
  char *slash = strrchr(dir, '/');
  if (slash)
    *(slash == dir ? slash + 1 : slash) = 0;
  else
    snprintf(dir, sizeof dir, ".");
  struct statfs sf;
  if (statfs(dir, &sf) != 0)
    return NULL;
  for (size_t i = 0; i < sizeof network_fs / sizeof *network_fs; i++)
    if ((unsigned long)(uint32_t)sf.f_type == network_fs[i].magic)
      return network_fs[i].name;
  return NULL;
}

/* Checks (and when writable creates) the schema. SQLITE_OK, RC_FOREIGN,
 * RC_SCHEMA, RC_NOT_OURS, RC_IS_BUNDLE, RC_IS_CACHE, or SQLite's code. */
static int setup(xpj_cache *c, bool writable) {
  int64_t app = 0, ver = 0, ntab = 0;
  char *schema = NULL, kind[16];
  /* identify the file before changing anything in it (WAL mode writes the
   * header) */
  int rc = identify(c->db, &app, &ver, &schema, &ntab, kind, sizeof kind);
  if (rc != SQLITE_OK)
    return rc;
  bool ours = app == APP_ID && ver == XPJ_CACHE_SCHEMA_VERSION;
  if (!ours && (app != 0 || ver != 0 || ntab != 0))
    rc = app == APP_ID ? RC_FOREIGN /* another schema version */
                       : RC_NOT_OURS; /* someone else's database */
  else if (ours)
    rc = check_schema(schema);
  /* the other kind of xpjit file: refused and left as it is, never taken
   * for damage (a bundle's SHA-256 rows would all fail a cache's HMAC,
   * and verify --repair, clear or prune would empty it). A kind this
   * version does not know is left to the checks above. */
  if (rc == SQLITE_OK && !strcmp(kind, c->bundle ? "cache" : "bundle"))
    rc = c->bundle ? RC_IS_CACHE : RC_IS_BUNDLE;
  free(schema);
  if (rc != SQLITE_OK)
    return rc;
  if (writable && !c->bundle) {
    /* on a network file system, SQLite's rollback journal with its
     * POSIX locks (which NFSv4, Lustre and GPFS implement), and every
     * commit synced: slower writes, but correct across machines */
    const char *netfs = network_fs_of(c->path);
    rc = exec_retry(c->db, netfs ? "PRAGMA journal_mode=DELETE"
                                 : "PRAGMA journal_mode=WAL");
    if (rc != SQLITE_OK)
      return rc;
    sqlite3_exec(c->db, netfs ? "PRAGMA synchronous=FULL"
                              : "PRAGMA synchronous=NORMAL",
                 NULL, NULL, NULL);
  }
  if (ours)
    return SQLITE_OK;
  if (!writable)
    return RC_FOREIGN; /* empty and we may not create it */
  rc = begin(c);
  if (rc != SQLITE_OK)
    return rc;
  /* another process may have created it while we waited */
  app = query_int(c->db, "PRAGMA application_id", &rc);
  if (rc == SQLITE_OK && app == APP_ID)
    return finish(c, SQLITE_OK);
  if (rc == SQLITE_OK) {
    char *sql = schema_create();
    rc = sql ? sqlite3_exec(c->db, sql, NULL, NULL, NULL) : SQLITE_NOMEM;
    sqlite3_free(sql);
  }
  if (rc == SQLITE_OK) {
    char sql[128];
    snprintf(sql, sizeof sql, "PRAGMA application_id=%d; PRAGMA user_version=%d",
             APP_ID, XPJ_CACHE_SCHEMA_VERSION);
    rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
  }
  if (rc == SQLITE_OK) {
    char sql[256];
    snprintf(sql, sizeof sql,
             "INSERT OR REPLACE INTO meta VALUES('kind','%s');"
             "INSERT OR REPLACE INTO meta VALUES('created','%lld');",
             c->bundle ? "bundle" : "cache", (long long)now_ms());
    rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
  }
  return finish(c, rc);
}

/* Creates path with exactly mode (whatever the umask) unless it exists;
 * never through a link. 0, or -1 with errno. */
static int create_file(const char *path, mode_t mode) {
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0)
    return errno == EEXIST ? 0 : -1;
  int rc = fchmod(fd, mode);
  close(fd);
  return rc;
}

static void hit_gone(sqlite3_context *ctx, int argc, sqlite3_value **argv);

/* Opens name (c->path, or a URI of it) with flags into c->db and checks
 * it (setup); SQLite's code, or setup's. */
static int connect(xpj_cache *c, const char *name, int flags, bool writable) {
  if (!xpj_sqlite_load())
    return RC_NO_SQLITE;
  flags |= SQLITE_OPEN_NOMUTEX; /* c->mu serialises every use */
#ifdef SQLITE_OPEN_NOFOLLOW
  flags |= SQLITE_OPEN_NOFOLLOW;
#endif
  int rc = sqlite3_open_v2(name, &c->db, flags, NULL);
  c->generation++;
  if (rc != SQLITE_OK) {
    db_close(c);
    return rc;
  }
  if (writable && sqlite3_db_readonly(c->db, "main") == 1) {
    db_close(c); /* SQLite fell back to reading a file we may not write */
    return SQLITE_READONLY;
  }
  c->db_writes = writable;
  /* the file is data: no functions or views in its schema run */
#ifdef SQLITE_DBCONFIG_TRUSTED_SCHEMA
  sqlite3_db_config(c->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
#endif
#ifdef SQLITE_DBCONFIG_DEFENSIVE
  sqlite3_db_config(c->db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
#endif
  sqlite3_extended_result_codes(c->db, 1);
  sqlite3_busy_timeout(c->db, 2000);
  rc = setup(c, writable);
  /* the file this writer has open: taken under the shared lock (see
   * conn_db) */
  if (rc == SQLITE_OK && writable && !c->bundle)
    c->conn_db_ok = xpj_hitfile_db_id(c->path, &c->conn_db);
  /* a writer's deletions take their hit files with them (hit_gone) */
  if (rc == SQLITE_OK && writable && !c->bundle &&
      (sqlite3_create_function(c->db, "xpj_hit_gone", 1, SQLITE_UTF8, c,
                               hit_gone, NULL, NULL) != SQLITE_OK ||
       sqlite3_exec(c->db, "CREATE TEMP TRIGGER hit_gone AFTER DELETE ON "
                    "main.entries BEGIN SELECT xpj_hit_gone(old.digest); END",
                    NULL, NULL, NULL) != SQLITE_OK))
    rc = SQLITE_ERROR;
  if (rc != SQLITE_OK)
    db_close(c);
  return rc;
}

/* SQLite gives a new -wal or -shm file the database's mode: a read-only
 * connection to a file made read-only (chmod 400) left a -shm of 0400,
 * and once the file was writable again every writer failed ("attempt to
 * write a readonly database") and nothing repaired it. A writer gives
 * such a side file of its own its owner's write bit back. */
static void side_files_writable(const char *path) {
  static const char *const sides[] = {"-wal", "-shm", NULL};
  for (size_t i = 0; sides[i]; i++) {
    char p[4200];
    snprintf(p, sizeof p, "%s%s", path, sides[i]);
    /* by its name, never opened here: closing a descriptor of the file
     * would drop every POSIX lock this process's SQLite connections hold
     * on it (the directory is the user's and no one else's: trusted) */
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISREG(st.st_mode) &&
        st.st_uid == geteuid() && !(st.st_mode & S_IWUSR))
      (void)chmod(p, (st.st_mode & 07777) | S_IWUSR);
  }
}

/* Opens the file read-write (created when missing), or read-only: then
 * nothing is created or written, not even the WAL's mode in its header. */
static int db_open(xpj_cache *c, bool writable) {
  c->kept_db_state = 0; /* a file made or replaced here: taken again */
  db_close(c);
  /* SQLite gives the WAL and shared-memory files the database's mode */
  if (writable && create_file(c->path, c->bundle ? 0644 : 0600) != 0)
    return SQLITE_CANTOPEN;
  if (writable && !c->bundle)
    side_files_writable(c->path);
  return connect(c, c->path,
                 writable ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
                          : SQLITE_OPEN_READONLY,
                 writable);
}

/* A user cache in a directory that we cannot write (read-only media, a
 * directory made read-only): SQLite cannot create the WAL's index (the
 * -shm file) there, so not even a read-only connection can read a WAL
 * file. Nobody can write it there either, since every SQLite writer needs
 * a -wal or -journal file beside it; so when neither holds anything (all
 * that was committed is in the file), the file is opened read-only and
 * immutable (no locks, no WAL). Else SQLITE_CANTOPEN. */
/* "file:PATH?immutable=1" (sqlite3_free it; NULL: no memory): the path as
 * a URI, '%', '?', '#' and anything unusual escaped. SQLite loaded. */
static char *immutable_uri(const char *path) {
  sqlite3_str *u = sqlite3_str_new(NULL);
  sqlite3_str_appendall(u, "file:");
  for (const unsigned char *p = (const unsigned char *)path; *p; p++)
    if (strchr("/-._~", *p) || (*p >= '0' && *p <= '9') ||
        ((*p | 0x20) >= 'a' && (*p | 0x20) <= 'z'))
      sqlite3_str_appendchar(u, 1, (char)*p);
    else
      sqlite3_str_appendf(u, "%%%02X", *p);
  sqlite3_str_appendall(u, "?immutable=1");
  return sqlite3_str_finish(u);
}

static int db_open_frozen(xpj_cache *c) {
  db_close(c);
  char dir[4096];
  parent_of(c->path, dir, sizeof dir);
  if (faccessat(AT_FDCWD, dir, W_OK, AT_EACCESS) == 0)
    return SQLITE_CANTOPEN;
  static const char *const sides[] = {"-wal", "-journal"};
  for (size_t i = 0; i < sizeof sides / sizeof *sides; i++) {
    char p[4200];
    struct stat sb;
    snprintf(p, sizeof p, "%s%s", c->path, sides[i]);
    if (lstat(p, &sb) == 0 && sb.st_size > 0)
      return SQLITE_CANTOPEN;
  }
  if (!xpj_sqlite_load())
    return RC_NO_SQLITE;
  char *uri = immutable_uri(c->path);
  int rc = uri ? connect(c, uri, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, false)
               : SQLITE_NOMEM;
  sqlite3_free(uri);
  return rc;
}

static const char *rc_str(int rc) {
  if (rc == RC_FOREIGN)
    return "not an xpjit cache of this schema version";
  if (rc == RC_NOT_OURS)
    return "another program's SQLite database (its application id is not "
           "xpjit's), left as it is";
  if (rc == RC_IS_BUNDLE)
    return "an xpjit bundle (its meta kind is 'bundle'), not a cache; left "
           "as it is ('xpjit-cli bundle ls' reads it, 'xpjit-cli bundle "
           "import' copies it into a cache)";
  if (rc == RC_IS_CACHE)
    return "an xpjit user cache (its meta kind is 'cache'), not a bundle; "
           "left as it is ('xpjit-cli cache --path FILE export OUT' makes a "
           "bundle of it)";
  if (rc == RC_NO_SQLITE || !xpj_sqlite.errstr) /* (not loaded: say why) */
    return xpj_sqlite_why();
  if (rc == RC_SCHEMA)
    return "its schema is not the one this version writes (damaged, or "
           "changed by something else)";
  return sqlite3_errstr(rc);
}

/* mkdir -p, each directory it makes 0700 whatever the umask. */
static int mkdir_0700(const char *dir) {
  if (mkdir(dir, 0700) == 0)
    return chmod(dir, 0700);
  return errno == EEXIST ? 0 : -1;
}

static int mkdirs(const char *dir) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp)
    return -1;
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir_0700(tmp) != 0)
        return -1;
      *p = '/';
    }
  return mkdir_0700(tmp);
}

/* Takes an flock (LOCK_SH or LOCK_EX) on PATH.lock (made 0600, never
 * through a link, and only used when it is the user's); returns the fd to
 * give to unlock_file, or -1 when there is no usable lock file (then
 * nothing is locked: the caller goes on, as without recovery). */
static int lock_file(const xpj_cache *c, int op) {
  char lock[4200], why[4096];
  snprintf(lock, sizeof lock, "%s.lock", c->path);
  int fd = open(lock, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                0600);
  if (fd >= 0)
    fchmod(fd, 0600);
  else if (errno == EEXIST)
    fd = open(lock, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  trust t;
  trust_for_cache(&t);
  if (fd >= 0 && trust_fd(&t, fd, lock, false, why, sizeof why) != TRUST_OK) {
    close(fd);
    fd = -1;
  }
  if (fd >= 0)
    while (flock(fd, op) != 0 && errno == EINTR)
      ;
  return fd;
}

/* ---- trust: who may have written what is read (cache/trust.c) --------- */

/* c->path with its directory resolved (realpath; with the last name too
 * when whole): the checks and every open then name the same files, and
 * no link on the way can be re-pointed in between. 0, or an errno. */
static int resolve(xpj_cache *c, bool whole) {
  char dir[4096];
  const char *slash = strrchr(c->path, '/');
  const char *base = slash ? slash + 1 : c->path;
  if (whole)
    snprintf(dir, sizeof dir, "%s", c->path);
  else
    parent_of(c->path, dir, sizeof dir);
  char *r = realpath(dir, NULL);
  if (!r)
    return errno;
  size_t n = strlen(r) + strlen(base) + 2;
  char *np = whole ? r : malloc(n);
  if (!np) {
    free(r);
    return ENOMEM;
  }
  if (!whole) {
    snprintf(np, n, "%s%s%s", r, strcmp(r, "/") ? "/" : "", base);
    free(r);
  }
  free(c->path);
  c->path = np;
  return 0;
}

/* The files of a store besides the database that SQLite or we read. */
static bool trusted_files(const trust *t, const char *path,
                          const char *const *sides, char *why, size_t size) {
  for (size_t i = 0; sides[i]; i++) {
    char p[4200];
    snprintf(p, sizeof p, "%s%s", path, sides[i]);
    if (trust_file(t, p, why, size) == TRUST_REFUSED)
      return false;
  }
  return true;
}

/* The files of a cache: its database, SQLite's beside it, its key, its
 * lock and its statistics (xpj_cache_owns_file, trusted_cache). */
static const char *const cache_files[] = {
    "", "-wal", "-shm", "-journal", ".lock", ".key", SIDE, NULL};

/* Whether path names, whether or not it exists, a file the cache at
 * cache_path has or may make: in the cache's directory (the same one,
 * compared by device and inode), the cache file's name with one of
 * cache_files' suffixes, ".hits", ".flight", ".corrupt" (a damaged file
 * moved aside, perhaps the only copy of something) or ".corrupt.N", or
 * the host CPU's file (host-cpu-*, docs/cache.md); or anything in the
 * cache's hit-file or single-flight directory. */
static bool owns_name(const char *cache_path, const char *path) {
  char cdir[4096], pdir[4096], sub[4200];
  const char *cs = strrchr(cache_path, '/'), *ps = strrchr(path, '/');
  const char *cbase = cs ? cs + 1 : cache_path, *pbase = ps ? ps + 1 : path;
  size_t cn = strlen(cbase);
  struct stat pd, d;
  if (!*cbase || !*pbase ||
      strlen(cache_path) >= sizeof cdir || strlen(path) >= sizeof pdir ||
      stat(parent_of(path, pdir, sizeof pdir), &pd) != 0)
    return false;
  static const char *const dirs[] = {".hits", ".flight"};
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
    if ((size_t)snprintf(sub, sizeof sub, "%s%s", cache_path, dirs[i]) <
            sizeof sub &&
        stat(sub, &d) == 0 && d.st_dev == pd.st_dev && d.st_ino == pd.st_ino)
      return true; /* a hit file, an alias, a lock file, or one to be */
  if (stat(parent_of(cache_path, cdir, sizeof cdir), &d) != 0 ||
      d.st_dev != pd.st_dev || d.st_ino != pd.st_ino)
    return false;
  if (!strncmp(pbase, "host-cpu-", 9))
    return true;
  if (strncmp(pbase, cbase, cn) != 0)
    return false;
  const char *rest = pbase + cn;
  for (size_t i = 0; cache_files[i]; i++)
    if (!strcmp(rest, cache_files[i]))
      return true;
  if (!strcmp(rest, ".hits") || !strcmp(rest, ".flight") ||
      !strcmp(rest, ".corrupt"))
    return true;
  return !strncmp(rest, ".corrupt.", 9) && rest[9] &&
         strspn(rest + 9, "0123456789") == strlen(rest + 9);
}

int xpj_cache_owns_file(const char *cache_path, const char *path) {
  struct stat a, b;
  if (!cache_path || !path)
    return 0;
  if (stat(path, &a) == 0)
    for (size_t i = 0; cache_files[i]; i++) {
      char p[4200];
      if ((size_t)snprintf(p, sizeof p, "%s%s", cache_path, cache_files[i]) <
              sizeof p &&
          stat(p, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return 1;
    }
  /* and by name, there or not: an export onto the cache file's name
   * while it was absent made the user's cache a bundle, and onto the
   * side file's a 0644 SQLite file the next write folded as counters */
  return owns_name(cache_path, path) ? 1 : 0;
}

/* The user cache: its directory, the directories above, and every file of
 * it that exists. */
static bool trusted_cache(const xpj_cache *c, char *why, size_t size) {
  trust t;
  trust_for_cache(&t);
  char dir[4096];
  return trust_dirs(&t, parent_of(c->path, dir, sizeof dir), why, size) ==
             TRUST_OK &&
         trusted_files(&t, c->path, cache_files, why, size);
}

/* A bundle (resolved path): the file, the files SQLite would read beside
 * it, and the directories above; owned by the user, root or an owner in
 * XPJIT_TRUSTED_OWNERS. */
static bool trusted_bundle(xpj_cache *c, char *why, size_t size) {
  static const char *const sides[] = {"-journal", "-wal", NULL};
  trust t;
  char bad[256];
  if (!trust_for_bundles(&t, bad, sizeof bad) &&
      xpj_env_first_complaint("XPJIT_TRUSTED_OWNERS"))
    warnf(c, "XPJIT_TRUSTED_OWNERS: %s names no user; ignored", bad);
  char dir[4096];
  if (trust_dirs(&t, parent_of(c->path, dir, sizeof dir), why, size) !=
      TRUST_OK)
    return false;
  trust_verdict v = trust_file(&t, c->path, why, size);
  if (v == TRUST_ABSENT)
    snprintf(why, size, "%s vanished while it was being checked", c->path);
  return v == TRUST_OK && trusted_files(&t, c->path, sides, why, size);
}

static void unlock_file(int fd) {
  if (fd >= 0) {
    flock(fd, LOCK_UN);
    close(fd);
  }
}

/* Moves path to the first of PATH.corrupt, PATH.corrupt.1 .. .9 that
 * does not exist (an earlier file moved aside is kept: it may be the only
 * copy of something); when all ten do, or where the file system has no
 * hard links, PATH.corrupt is replaced. The name used is left in aside. */
static bool move_aside(const char *path, char *aside, size_t size) {
  for (int i = 0; i < 10; i++) {
    if (i == 0)
      snprintf(aside, size, "%s.corrupt", path);
    else
      snprintf(aside, size, "%s.corrupt.%d", path, i);
    if (link(path, aside) == 0)
      return unlink(path) == 0 || errno == ENOENT;
    if (errno != EEXIST)
      break;
  }
  snprintf(aside, size, "%s.corrupt", path);
  return rename(path, aside) == 0;
}

/* With the exclusive lock held: moves the database aside (move_aside)
 * with its WAL, and opens a new one. Returns the new file's code, or why
 * when the file could not be moved. */
static int replace_file(xpj_cache *c, int why) {
  db_close(c);
  hits_wipe(c); /* copies of rows now gone */
  char aside[4200], side[4200];
  if (!move_aside(c->path, aside, sizeof aside))
    return why;
  snprintf(side, sizeof side, "%s-wal", c->path);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", c->path);
  unlink(side);
  warnf(c, "cache %s: %s; moved it to %s and started a new one", c->path,
        rc_str(why), aside);
  snprintf(c->replaced, sizeof c->replaced,
           "%s; moved to %s, a new one was started", rc_str(why), aside);
  c->pending.corrupt++;
  int rc = db_open(c, true);
  for (int i = 0; rc == RC_FOREIGN && i < 20; i++) {
    sleep_ms(5); /* another opener is creating the new file */
    rc = db_open(c, true);
  }
  return rc;
}

/* Is the open file damaged where its header and schema read fine? The
 * whole-file check runs only on this rare path. */
static bool fails_quick_check(xpj_cache *c) {
  sqlite3_stmt *s = NULL;
  int r = sqlite3_prepare_v2(c->db, "PRAGMA quick_check", -1, &s, NULL);
  if (r == SQLITE_OK)
    r = step_retry(s);
  const unsigned char *t = r == SQLITE_ROW ? sqlite3_column_text(s, 0) : NULL;
  bool bad = is_corrupt(r) ||
             (r == SQLITE_ROW && (!t || strcmp((const char *)t, "ok") != 0));
  sqlite3_finalize(s);
  return bad;
}

/* Under an flock on PATH.lock: reopens, and if the file is still bad moves
 * it aside and creates a new one (replace_file). */
static int recover(xpj_cache *c, int why) {
  c->recovered = true;
  db_close(c);
  int fd = lock_file(c, LOCK_EX);
  int rc = db_open(c, true);
  bool bad = rc != SQLITE_BUSY && is_damage(rc);
  if (bad) {
    why = rc; /* what opening says is the more precise reason */
  } else if (rc == SQLITE_OK && is_damage(why) && fails_quick_check(c)) {
    bad = true; /* found by a statement, not by opening */
  }
  if (bad)
    rc = replace_file(c, why);
  unlock_file(fd);
  return rc;
}

static void drop_later(xpj_cache *c, const char *digest);

/* The handle is in a lower mode than it was opened for: one warning (the
 * reason, and what a program does now), and the reason kept for
 * xpj_cache_problem (a tool that reports it compiles nothing). Puts still
 * waiting to be written never will be: they go. */
static void lower_mode(xpj_cache *c, xpj_cache_mode mode, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void lower_mode(xpj_cache *c, xpj_cache_mode mode, const char *fmt,
                       ...) {
  char was[sizeof c->problem];
  memcpy(was, c->problem, sizeof was);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->problem, sizeof c->problem, fmt, ap);
  va_end(ap);
  /* said once: a write tried again on a handle already turned read-only
   * for the same reason (bundle import's batches) warned each time */
  if (mode != c->mode || strcmp(was, c->problem) != 0)
    warnf(c, "%s; %s", c->problem,
          mode == XPJ_CACHE_MODE_OFF
              ? "compiling without caching"
              : "using it read-only (what is compiled from now on is not "
                "stored)");
  c->mode = mode;
  drop_later(c, NULL);
  if (mode == XPJ_CACHE_MODE_OFF)
    db_close(c);
}

/* Moves a damaged file aside and starts a new one under the exclusive
 * lock (replace_file); if even that fails, caching is off for this handle.
 * Returns the new file's code. */
static int start_over(xpj_cache *c, int why) {
  int fd = lock_file(c, LOCK_EX);
  int rc = replace_file(c, why);
  unlock_file(fd);
  if (rc != SQLITE_OK)
    lower_mode(c, XPJ_CACHE_MODE_OFF, "cache %s: %s", c->path, rc_str(rc));
  return rc;
}

/* Turns the handle read-only (or off when it cannot even read). */
static void degrade(xpj_cache *c, int rc, const char *what) {
  if (c->mode != XPJ_CACHE_MODE_RW)
    return;
  lower_mode(c, XPJ_CACHE_MODE_RO, "cache %s: %s failed (%s)", c->path, what,
             rc_str(rc));
}

/* XPJIT_CACHE's mode into *mode (rw when it is unset or no word of it);
 * xpj_env_word's index (-2: set to something else). The one list of its
 * words. */
static int env_mode(xpj_cache_mode *mode) {
  static const char *const words[] = {"rw", "on", "1", "ro", "off", "0",
                                      NULL};
  static const xpj_cache_mode modes[] = {
      XPJ_CACHE_MODE_RW, XPJ_CACHE_MODE_RW,  XPJ_CACHE_MODE_RW,
      XPJ_CACHE_MODE_RO, XPJ_CACHE_MODE_OFF, XPJ_CACHE_MODE_OFF};
  int i = xpj_env_word("XPJIT_CACHE", words);
  *mode = i >= 0 ? modes[i] : XPJ_CACHE_MODE_RW;
  return i;
}

/* An XPJIT_CACHE that is no word of it (rw applies): said once. */
static void env_complain(xpj_cache *c) {
  xpj_cache_mode m;
  if (env_mode(&m) == -2 && xpj_env_first_complaint("XPJIT_CACHE"))
    warnf(c, "XPJIT_CACHE=%.64s is not off, ro or rw; using rw",
          xpj_env("XPJIT_CACHE"));
}

xpj_cache_mode xpj_cache_config_mode(const xpj_cache_config *cfg) {
  xpj_cache_mode m = cfg ? cfg->mode : XPJ_CACHE_MODE_DEFAULT;
  if (m == XPJ_CACHE_MODE_DEFAULT) {
    if (cfg && cfg->bundle)
      m = XPJ_CACHE_MODE_RO;
    else
      env_mode(&m);
  }
  return m;
}

size_t xpj_cache_default_path(char *buf, size_t size) {
  if (!buf) /* (as snprintf(NULL, 0): the length only) */
    size = 0;
  const char *d = getenv("XPJIT_CACHE_DIR");
  if (d && *d)
    return (size_t)snprintf(buf, size, "%s/cache-v%d.db", d,
                            XPJ_CACHE_SCHEMA_VERSION);
  const char *x = getenv("XDG_CACHE_HOME");
  if (x && *x == '/')
    return (size_t)snprintf(buf, size, "%s/xpjit/cache-v%d.db", x,
                            XPJ_CACHE_SCHEMA_VERSION);
  const char *h = getenv("HOME");
  if (!h || !*h) {
    struct passwd *pw = getpwuid(getuid());
    h = pw && pw->pw_dir ? pw->pw_dir : "/tmp";
  }
  return (size_t)snprintf(buf, size, "%s/.cache/xpjit/cache-v%d.db", h,
                          XPJ_CACHE_SCHEMA_VERSION);
}

/* ---- the signing key (PATH.key) --------------------------------------- */

enum { KEY_OK, KEY_ABSENT, KEY_REFUSED, KEY_DAMAGED };

/* Reads PATH.key into c->key: KEY_OK, KEY_ABSENT, or KEY_REFUSED /
 * KEY_DAMAGED with why. It must be the user's, and secret (0600). */
static int read_key(xpj_cache *c, char *why, size_t size) {
  char kp[4200];
  snprintf(kp, sizeof kp, "%s.key", c->path);
  int fd = open(kp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT)
      return KEY_ABSENT;
    snprintf(why, size, "%s: %s", kp, strerror(errno));
    return KEY_REFUSED;
  }
  trust t;
  trust_for_cache(&t);
  if (trust_fd(&t, fd, kp, true, why, size) != TRUST_OK) {
    close(fd);
    return KEY_REFUSED;
  }
  uint8_t k[KEY_BYTES + 1];
  struct stat sb;
  bool st_ok = fstat(fd, &sb) == 0;
  int err = errno;
  ssize_t n = st_ok ? read(fd, k, sizeof k) : -1;
  close(fd);
  if (n != KEY_BYTES || sb.st_size != KEY_BYTES) {
    explicit_bzero(k, sizeof k); /* what was read of it, too */
    /* the file's size (it said the bytes read: "33 bytes" of 10 MB) */
    if (st_ok)
      snprintf(why, size, "its key %s is damaged (%lld bytes, not %d)", kp,
               (long long)sb.st_size, KEY_BYTES);
    else
      snprintf(why, size, "its key %s is damaged (%s)", kp, strerror(err));
    return KEY_DAMAGED;
  }
  memcpy(c->key, k, KEY_BYTES);
  explicit_bzero(k, sizeof k);
  c->has_key = true;
  c->key_dev = sb.st_dev;
  c->key_ino = sb.st_ino;
  c->key_ctime = sb.st_ctim;
  return KEY_OK;
}

/* Whether PATH.key is no longer the key this handle read, and the one
 * there now is read (true: the key changed). Another process replaces it
 * when it finds it gone or damaged (setup_key); a handle that kept the old
 * one (a daemon, a long-lived program) would go on signing rows and hit
 * files that every other process drops, and drop theirs. Asked, under the
 * lock, before signing (a stat: the file's identity and change time; a new
 * file may get the old one's inode) and when a checksum fails (reread:
 * the rare case of a new file that looks the same is caught there). A key
 * file now refused (another owner, open to others) leaves the old key in
 * use. */
static bool key_renewed_as(xpj_cache *c, bool reread) {
  char kp[4200], why[4600];
  struct stat sb;
  if (c->bundle || !c->has_key ||
      (size_t)snprintf(kp, sizeof kp, "%s.key", c->path) >= sizeof kp ||
      stat(kp, &sb) != 0 ||
      (!reread && sb.st_dev == c->key_dev && sb.st_ino == c->key_ino &&
       sb.st_ctim.tv_sec == c->key_ctime.tv_sec &&
       sb.st_ctim.tv_nsec == c->key_ctime.tv_nsec))
    return false;
  uint8_t old[KEY_BYTES];
  memcpy(old, c->key, KEY_BYTES);
  bool changed = read_key(c, why, sizeof why) == KEY_OK &&
                 memcmp(old, c->key, KEY_BYTES) != 0;
  explicit_bzero(old, sizeof old);
  return changed;
}
static bool key_renewed(xpj_cache *c) { return key_renewed_as(c, false); }

static int random_bytes(uint8_t *b, size_t n) {
  while (n) {
    ssize_t got = getrandom(b, n, 0);
    if (got < 0 && errno != EINTR)
      return -1;
    if (got > 0) {
      b += got;
      n -= (size_t)got;
    }
  }
  return 0;
}

/* Writes a new random key to a private temporary file, then puts it in
 * place: link() when there is none (of two makers, the second gets EEXIST
 * and reads the first's key; a reader never sees half a key), rename()
 * over a damaged one. 1: ours is in place; 0: someone else's; -1: error. */
static int make_key(const xpj_cache *c, bool replace) {
  char kp[4200], tmp[4300];
  snprintf(kp, sizeof kp, "%s.key", c->path);
  snprintf(tmp, sizeof tmp, "%s.key.XXXXXX", c->path);
  uint8_t k[KEY_BYTES];
  if (random_bytes(k, sizeof k) != 0)
    return -1;
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0)
    return -1;
  bool ok = fchmod(fd, 0600) == 0 && write(fd, k, sizeof k) == sizeof k &&
            fsync(fd) == 0;
  explicit_bzero(k, sizeof k);
  ok = close(fd) == 0 && ok;
  int rc = -1;
  if (ok && replace)
    rc = rename(tmp, kp) == 0 ? 1 : -1;
  else if (ok)
    rc = link(tmp, kp) == 0 ? 1 : errno == EEXIST ? 0 : -1;
  int e = errno;
  unlink(tmp); /* after rename: already gone */
  errno = e;
  return rc;
}

/* The first 72 bytes of the regular file at path into h, when it is an
 * SQLite database (its header's magic; never through a link, never
 * waiting on a FIFO); false otherwise. */
static bool sqlite_header(const char *path, unsigned char h[72]) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return false;
  struct stat sb;
  bool ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
            pread(fd, h, 72, 0) == 72;
  close(fd);
  return ok && !memcmp(h, "SQLite format 3", 16);
}

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         p[3];
}

/* Whether the file at path is another program's SQLite database: its
 * header (sqlite.org/fileformat.html: the application id at byte 68, the
 * user version at 60, the schema cookie at 40, all big-endian) names
 * another program, or has a version or tables without xpjit's id. Not a
 * missing file, one too short for a header (a new cache's pages may all
 * be in its -wal), nor one that is
 * not SQLite (damage, moved aside when opened). Asked before a key is
 * made beside a file: `cache --path other.db` leaves nothing behind. */
static bool foreign_file(const char *path) {
  unsigned char h[72];
  if (!sqlite_header(path, h))
    return false; /* damaged: moved aside when opened, as ever */
  uint32_t app = be32(h + 68);
  uint32_t cookie = be32(h + 40), ver = be32(h + 60);
  /* as setup judges it: an id, a version or tables not xpjit's (a file
   * with only another's user_version was called another program's there
   * and got a key beside it here) */
  return app != APP_ID && (app != 0 || ver != 0 || cookie != 0);
}

/* Whether the file at path is an xpjit bundle (meta kind 'bundle'),
 * which a user cache's handle refuses and leaves as it is (setup): asked,
 * like foreign_file, before a key is made beside a file, so that `cache
 * --path BUNDLE` leaves nothing beside it. Only a file of xpjit's id in
 * the rollback journal's mode (header bytes 18 and 19: 1), as every
 * bundle is, is opened to read its kind, read-only: SQLite makes nothing
 * beside such a file for a reader (it would make a WAL file's -shm). */
static bool bundle_file(const char *path) {
  unsigned char h[72];
  if (!sqlite_header(path, h) || be32(h + 68) != APP_ID || h[18] != 1 ||
      h[19] != 1 || !xpj_sqlite_load())
    return false;
  sqlite3 *db = NULL;
  char kind[16] = "";
  int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX;
#ifdef SQLITE_OPEN_NOFOLLOW
  flags |= SQLITE_OPEN_NOFOLLOW;
#endif
  if (sqlite3_open_v2(path, &db, flags, NULL) == SQLITE_OK) {
#ifdef SQLITE_DBCONFIG_TRUSTED_SCHEMA
    sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
#endif
    read_kind(db, kind, sizeof kind);
  }
  sqlite3_close(db);
  return !strcmp(kind, "bundle");
}

/* Whether the database file at path is reached by another name too: a
 * hard link (more than one link) or a mount of the file alone (a bind
 * mount of the file: the root of a mount). Its key, PATH.key, lives
 * beside its own name, so that another name has none beside it; and
 * SQLite keeps the WAL, shared memory and journal by name, so that two
 * names of one file are two journals of it. Says which in why. A
 * directory mounted elsewhere brings the key with it: not asked. */
static bool other_names(const char *path, char *why, size_t size) {
  struct statx sx;
  if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_NLINK, &sx) != 0 ||
      !S_ISREG(sx.stx_mode))
    return false;
  if (sx.stx_nlink > 1) {
    snprintf(why, size, "the file has %u names (hard links)",
             (unsigned)sx.stx_nlink);
    return true;
  }
#ifdef STATX_ATTR_MOUNT_ROOT
  if (sx.stx_attributes_mask & sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) {
    snprintf(why, size, "the file is mounted there by itself (a bind mount "
             "of another file)");
    return true;
  }
#endif
  return false;
}

/* Whether the user cache's file at path holds entries (rows signed with
 * some key), read without a lock and without making anything beside it:
 * the file alone, immutable; through a plain read-only connection when
 * a -wal beside it holds commits. Asked only when its key is missing. */
static bool holds_entries(const char *path) {
  char wal[4200];
  struct stat sb;
  unsigned char h[72];
  snprintf(wal, sizeof wal, "%s-wal", path);
  bool in_wal = lstat(wal, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0;
  if ((!in_wal && !sqlite_header(path, h)) || !xpj_sqlite_load())
    return false;
  char *uri = in_wal ? NULL : immutable_uri(path);
  if (!in_wal && !uri)
    return false;
  int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX |
              (uri ? SQLITE_OPEN_URI : 0);
#ifdef SQLITE_OPEN_NOFOLLOW
  flags |= SQLITE_OPEN_NOFOLLOW;
#endif
  sqlite3 *db = NULL;
  bool any = false;
  if (sqlite3_open_v2(uri ? uri : path, &db, flags, NULL) == SQLITE_OK) {
#ifdef SQLITE_DBCONFIG_TRUSTED_SCHEMA
    sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
#endif
    sqlite3_busy_timeout(db, 2000);
    sqlite3_stmt *st = NULL;
    any = sqlite3_prepare_v2(db, "SELECT 1 FROM entries LIMIT 1", -1, &st,
                             NULL) == SQLITE_OK &&
          sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  sqlite3_free(uri);
  return any;
}

/* The user cache's key: read, made by the first writer, or replaced when
 * damaged (under the exclusive lock, so that two processes do not each
 * make one). Rows signed with another key (the key was deleted or
 * replaced) fail their checksum and are dropped as they are found.
 * Without a key no row can be verified: the handle is off; returns false
 * then. */
static bool setup_key(xpj_cache *c) {
  char why[4600];
  bool rw = c->mode == XPJ_CACHE_MODE_RW;
  struct stat sb;
  bool had_rows = lstat(c->path, &sb) == 0 && sb.st_size > 0;
  int k = read_key(c, why, sizeof why);
  if (k != KEY_OK && bundle_file(c->path)) {
    /* nothing made beside it (opening it would say the same) */
    lower_mode(c, XPJ_CACHE_MODE_OFF, "cache %s: %s", c->path,
               rc_str(RC_IS_BUNDLE));
    return false;
  }
  if (k != KEY_OK && rw && foreign_file(c->path)) {
    /* nothing made beside it; opening it says what it is */
    lower_mode(c, XPJ_CACHE_MODE_OFF, "cache %s: %s", c->path,
               rc_str(RC_NOT_OURS));
    return false;
  }
  char names[256];
  if (k == KEY_ABSENT && other_names(c->path, names, sizeof names)) {
    /* its key is beside its other name: a key made here would re-sign
     * (bundle import) or drop (every reader, verify --repair) every row
     * the cache's own key signed (an outside probe: `bundle import --path`
     * a hard link of the cache made a second key and re-signed them all) */
    lower_mode(c, XPJ_CACHE_MODE_OFF, "cache %s: it has no key beside it "
               "(%s.key) and %s: its key is beside its other name; no key "
               "is made here (its entries would all fail their checksum "
               "under it). Open the cache by its own path", c->path, c->path,
               names);
    return false;
  }
  int made = 1, made_errno = 0;
  if (k == KEY_ABSENT && rw) {
    /* lost (deleted, or the file copied without it): a new key, said
     * aloud when there are entries that it makes unverifiable */
    bool entries = had_rows && holds_entries(c->path);
    made = make_key(c, false); /* ours, or another maker's: read it */
    made_errno = errno;
    k = read_key(c, why, sizeof why);
    if (made == 1 && k == KEY_OK && entries)
      warnf(c, "cache %s: its key %s.key was missing; made a new one (the "
            "entries signed with the lost one will fail their checksum and "
            "be dropped)", c->path, c->path);
  } else if (k == KEY_DAMAGED && rw) {
    int fd = lock_file(c, LOCK_EX);
    k = read_key(c, why, sizeof why);
    if (k == KEY_DAMAGED && make_key(c, true) == 1) {
      warnf(c, "cache %s: %s; made a new one (entries signed with the old "
            "one will fail their checksum and be dropped)", c->path, why);
      k = read_key(c, why, sizeof why);
    }
    unlock_file(fd);
  }
  if (k == KEY_OK)
    return true;
  if (k == KEY_REFUSED)
    lower_mode(c, XPJ_CACHE_MODE_OFF, "refusing the cache %s: %s", c->path,
               why);
  else if (!rw && !had_rows)
    c->mode = XPJ_CACHE_MODE_OFF; /* nothing there to read: no problem */
  else if (k == KEY_ABSENT && made < 0) /* a full disk, ulimit -f */
    lower_mode(c, XPJ_CACHE_MODE_OFF, "cache %s: it has no key (.key file), "
               "and one cannot be made (%s); its entries cannot be verified",
               c->path, strerror(made_errno));
  else
    lower_mode(c, XPJ_CACHE_MODE_OFF, "cache %s: %s; its entries cannot be "
               "verified", c->path,
               k == KEY_ABSENT ? "it has no key (.key file)" : why);
  return false;
}

/* A bundle is written whole (one transaction, renamed into place), so its
 * file is a whole number of pages, as many as its header says. SQLite
 * reads a file cut inside its last page as if the rest were zeros, and
 * opens it without a complaint: the index rows on that page are lost,
 * and with them, silently, the kernels they find (a copy cut short by a
 * byte was used, its lost kernels compiled). True, with the sizes in why,
 * for such a file. */
static bool bundle_cut_short(xpj_cache *c, char *why, size_t size) {
  int64_t v[2] = {0, 0};
  static const char *const q[2] = {"PRAGMA page_size", "PRAGMA page_count"};
  for (int i = 0; i < 2; i++) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(c->db, q[i], -1, &s, NULL) == SQLITE_OK &&
        step_retry(s) == SQLITE_ROW)
      v[i] = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
  }
  struct stat sb;
  if (v[0] <= 0 || stat(c->path, &sb) != 0)
    return false; /* nothing to compare: the reads below will say */
  if (sb.st_size % v[0] == 0 && sb.st_size >= v[0] * v[1])
    return false;
  snprintf(why, size, "%lld bytes, where its header says %lld pages of %lld bytes",
           (long long)sb.st_size, (long long)v[1], (long long)v[0]);
  return true;
}

/* A bundle: it must open; anything else is an error. It is code that will
 * run as the user: refused unless the user or someone trusted owns it. A
 * new one (opened read-write to be built) is made 0644. */
static xpj_status open_bundle(xpj_cache *c) {
  bool rw = c->mode == XPJ_CACHE_MODE_RW;
  int err = resolve(c, true);
  if (err == ENOENT && rw)
    err = resolve(c, false);
  else if (err == 0) {
    char why[4096];
    if (!trusted_bundle(c, why, sizeof why))
      return fail(XPJ_ERR_UNSUPPORTED, "bundle %s is refused: %s", c->path,
                  why);
  }
  if (err)
    return fail(err == ENOMEM ? XPJ_ERR_NOMEM : XPJ_ERR_IO, "bundle %s: %s",
                c->path, strerror(err));
  int rc = db_open(c, rw);
  char cut[256];
  if (rc == SQLITE_OK && !rw && bundle_cut_short(c, cut, sizeof cut)) {
    db_close(c);
    return fail(XPJ_ERR_INVALID, "bundle %s is truncated: %s (a copy cut "
                "short?)", c->path, cut);
  }
  if (rc == SQLITE_OK)
    return XPJ_OK;
  return fail(rc == SQLITE_CANTOPEN ? XPJ_ERR_IO : XPJ_ERR_INVALID,
              "bundle %s: %s", c->path,
              rc == RC_FOREIGN || rc == RC_NOT_OURS
                  ? "not an xpjit bundle of this schema version"
                  : rc_str(rc));
}

/* Before the user cache's file is opened: its directory made (writable)
 * and resolved, the trust check, readability, the key. False when the
 * handle had to be turned off (with the reason, unless there is simply
 * nothing to read). */
static bool ready_to_open(xpj_cache *c) {
  char dir[4096], why[4096];
  parent_of(c->path, dir, sizeof dir);
  int err = resolve(c, false);
  if (err == ENOENT && c->mode == XPJ_CACHE_MODE_RW) { /* made only now */
    if (mkdirs(dir) != 0) {
      lower_mode(c, XPJ_CACHE_MODE_OFF,
                 "cannot create the cache directory %s (%s)", dir,
                 strerror(errno));
      return false;
    }
    err = resolve(c, false);
  }
  if (err == ENOENT && c->mode == XPJ_CACHE_MODE_RO) {
    c->mode = XPJ_CACHE_MODE_OFF; /* nothing there to read: no problem */
    return false;
  }
  struct stat sb;
  char to[4096];
  ssize_t tn;
  if (err == ENOENT && lstat(dir, &sb) == 0 && S_ISLNK(sb.st_mode) &&
      (tn = readlink(dir, to, sizeof to - 1)) >= 0) {
    /* a dangling link (perhaps planted into another's directory): said
     * as it is, with whose link it is; nothing is made through it */
    to[tn] = 0;
    lower_mode(c, XPJ_CACHE_MODE_OFF, "cache %s: its directory %s is a "
               "symbolic link of uid %u to %s, which is not there (nothing "
               "is created through a link): remove the link, or set "
               "XPJIT_CACHE_DIR to a directory of your own", c->path, dir,
               (unsigned)sb.st_uid, to);
    return false;
  }
  if (err) {
    lower_mode(c, XPJ_CACHE_MODE_OFF, "cache %s: its directory: %s", c->path,
               strerror(err));
    return false;
  }
  if (!trusted_cache(c, why, sizeof why)) {
    lower_mode(c, XPJ_CACHE_MODE_OFF, "refusing the cache %s: %s", c->path,
               why);
    return false;
  }
  if (access(c->path, R_OK) != 0 && errno != ENOENT) {
    lower_mode(c, XPJ_CACHE_MODE_OFF, "cache %s cannot be read (%s)",
               c->path, strerror(errno));
    return false;
  }
  return setup_key(c);
}

/* The user cache opened as a writer opens it: created when missing, WAL
 * mode, under a shared lock (a process recovering the file, under the
 * exclusive lock, never moves or unlinks files under an opener). */
static int open_for_writing(xpj_cache *c) {
  int lfd = lock_file(c, LOCK_SH);
  int rc = db_open(c, true);
  unlock_file(lfd);
  return rc;
}

/* Read-only, and failing that (a directory we cannot write) frozen. */
static int open_for_reading(xpj_cache *c) {
  int rc = access(c->path, R_OK) == 0 ? db_open(c, false) : SQLITE_CANTOPEN;
  if (is_env(rc) && !c->bundle && db_open_frozen(c) == SQLITE_OK)
    rc = SQLITE_OK;
  return rc;
}

/* The user cache: whatever happens, the handle is usable (perhaps
 * degraded, with a warning). A cache opened read-write whose file holds
 * something is opened read-only all the same, until its first write
 * (to_writable): a hit then writes nothing and takes no lock of ours,
 * and its open does the least SQLite allows. */
static void open_user_file(xpj_cache *c);

static void open_user_cache(xpj_cache *c) {
  if (ready_to_open(c) && !c->lazy)
    open_user_file(c);
}

/* A lazy handle's database, opened at the first call that needs it (with
 * c->mu held: its warnings are given by unlock). */
/* A handle of xpj_l2_open that has not opened its database (mu held). */
static bool unopened(const xpj_cache *c) {
  return c->lazy && !c->db_tried && c->mode != XPJ_CACHE_MODE_OFF;
}

static void open_deferred(xpj_cache *c) {
  if (unopened(c))
    open_user_file(c);
  c->db_tried = true;
  hits_close(c->kept_dfd); /* hit files are read only until now */
  c->kept_dfd = -1;
  c->kept_db_state = 0;
}

/* Locks c for a call that needs the database. */
static void lock_db(xpj_cache *c) {
  lock(c);
  open_deferred(c);
}

static void unlock(xpj_cache *c);

void xpj_l2_ready(xpj_cache *c) {
  if (!c)
    return;
  lock_db(c);
  unlock(c);
}

int64_t xpj_l2_data_version(xpj_cache *c, bool wait) {
  if (!c)
    return -1;
  if (wait)
    pthread_mutex_lock(&c->mu);
  else if (pthread_mutex_trylock(&c->mu) != 0)
    return -1; /* a lookup holds it: unknown, never a wait */
  xpj_l2_fsize_block(); /* (unlock restores) */
  int64_t v = -1;
  sqlite3_stmt *st = NULL;
  /* one step, no retry: busy is unknown too */
  if (c->db && c->mode != XPJ_CACHE_MODE_OFF &&
      sqlite3_prepare_v2(c->db, "PRAGMA data_version", -1, &st, NULL) ==
          SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    int64_t got = sqlite3_column_int64(st, 0);
    /* a connection reopened (to_writable) starts its count afresh: its
     * values are told apart by the handle's generation */
    if (got >= 0 && got < (INT64_C(1) << 40))
      v = got + ((int64_t)(c->generation & 0x7fffff) << 40);
  }
  sqlite3_finalize(st);
  unlock(c);
  return v;
}

bool xpj_l2_db_identity(xpj_cache *c, bool wait, uint64_t *dev,
                        uint64_t *ino) {
  if (!c)
    return false;
  if (wait)
    pthread_mutex_lock(&c->mu);
  else if (pthread_mutex_trylock(&c->mu) != 0)
    return false; /* a lookup holds it: unknown, never a wait */
  xpj_l2_fsize_block(); /* (unlock restores) */
  bool ok = c->db && c->conn_db_ok && c->mode == XPJ_CACHE_MODE_RW;
  if (ok) {
    *dev = c->conn_db.dev;
    *ino = c->conn_db.ino;
  }
  unlock(c);
  return ok;
}

/* ---- single flight: one compile of a key at a time among processes ---- */

/* PATH.flight, a directory of this user that nobody else may write. */
static int flight_dir(const xpj_cache *c, bool create) {
  return xpj_l2_subdir_open(c->path, ".flight", create);
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The descriptors of turns this process holds (fd + 1; 0: free): a child
 * forked meanwhile closes its copies (flight_forked), so that it does not
 * keep another process waiting for a turn that is not its own. Lock-free:
 * the child has only the forking thread. */
static _Atomic int flight_held[32];
static pthread_once_t flight_once = PTHREAD_ONCE_INIT;

static void flight_forked(void) {
  for (size_t i = 0; i < sizeof flight_held / sizeof *flight_held; i++) {
    int v = atomic_exchange(&flight_held[i], 0);
    if (v > 0)
      close(v - 1); /* its copy: the parent's turn stays the parent's */
  }
}

static void flight_at_fork(void) { pthread_atfork(NULL, NULL, flight_forked); }

static void flight_note(int fd, bool held) {
  for (size_t i = 0; i < sizeof flight_held / sizeof *flight_held; i++) {
    int want = held ? 0 : fd + 1, to = held ? fd + 1 : 0;
    if (atomic_compare_exchange_strong(&flight_held[i], &want, to))
      return;
  }
  /* more than 32 turns at once in one process: a child forked meanwhile
   * keeps that one (docs/cache.md, "What is not done yet") */
}

int xpj_l2_flight_begin(xpj_cache *c, const char *digest, int64_t wait_ms,
                        int64_t *waited_ms, bool *after_one) {
  *waited_ms = 0;
  *after_one = false;
  if (!c || !c->flight || c->mode != XPJ_CACHE_MODE_RW || !digest ||
      strlen(digest) != 64 || strspn(digest, "0123456789abcdef") != 64)
    return -1;
  pthread_once(&flight_once, flight_at_fork);
  int dfd = flight_dir(c, true);
  if (dfd < 0)
    return -1;
  /* non-blocking: a FIFO planted there must not hang the open */
  int fd = openat(dfd, digest,
                  O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
  close(dfd);
  struct stat sb;
  if (fd >= 0 && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
                  sb.st_uid != geteuid())) {
    close(fd);
    fd = -1;
  }
  if (fd < 0)
    return -1;
  /* from its open: a child forked while this waits would share the open
   * file, and so the lock once this one has it */
  flight_note(fd, true);
  int64_t t0 = mono_ms(), now = t0;
  unsigned pause = 1;
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    now = mono_ms();
    if ((errno != EWOULDBLOCK && errno != EINTR) || now - t0 >= wait_ms) {
      flight_note(fd, false);
      close(fd); /* compiled here after all */
      *waited_ms = now - t0;
      return -1;
    }
    sleep_ms(pause);
    if (pause < 16)
      pause *= 2;
  }
  *waited_ms = mono_ms() - t0;
  /* marked: a process had the turn and gave it back (its row written, or
   * not: then this one does not hold up the others either) */
  *after_one = fstat(fd, &sb) == 0 && sb.st_size > 0;
  return fd;
}

void xpj_l2_flight_yield(int fd) {
  if (fd >= 0)
    flock(fd, LOCK_UN);
}

void xpj_l2_flight_end(xpj_cache *c, const char *digest, int fd,
                       bool settled) {
  if (fd < 0)
    return;
  /* the mark for those still waiting on this file: the turn was had */
  xpj_l2_fsize_block();
  ssize_t w = pwrite(fd, "1", 1, 0);
  xpj_l2_fsize_restore();
  (void)w;
  /* its name goes with the row written: a process that opens it later
   * makes another (and looks in the cache file first) */
  int dfd = settled && c ? flight_dir(c, false) : -1;
  struct stat mine, there;
  if (dfd >= 0 && fstat(fd, &mine) == 0 &&
      fstatat(dfd, digest, &there, AT_SYMLINK_NOFOLLOW) == 0 &&
      mine.st_dev == there.st_dev && mine.st_ino == there.st_ino)
    unlinkat(dfd, digest, 0);
  if (dfd >= 0)
    close(dfd);
  flight_note(fd, false);
  close(fd); /* and the lock with it */
}

/* Lock files left (keys whose turn ended without a row): cleared with the
 * rows. */
static void flight_wipe(xpj_cache *c) {
  int dfd = flight_dir(c, false);
  DIR *d = dfd >= 0 ? xpj_hitdir_list(dfd) : NULL;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strlen(e->d_name) == 64 &&
        strspn(e->d_name, "0123456789abcdef") == 64)
      unlinkat(dfd, e->d_name, 0);
  if (d)
    closedir(d);
  if (dfd >= 0)
    close(dfd);
}

/* The database part of opening the user cache. */
static void open_user_file(xpj_cache *c) {
  c->db_tried = true;
  bool rw = c->mode == XPJ_CACHE_MODE_RW;
  struct stat sb;
  bool has_data = lstat(c->path, &sb) == 0 && sb.st_size > 0;
  /* before any connection: one read-only from the start keeps the -shm
   * read-only for this process's later writer too (SQLite shares it) */
  if (rw && access(c->path, W_OK) == 0)
    side_files_writable(c->path);
  int rc = !rw || has_data ? db_open(c, false) : SQLITE_CANTOPEN;
  /* new, empty, or worth a writer's look (not a bundle: nothing is made
   * beside it, not even the lock file) */
  if (rc != SQLITE_OK && rw && rc != RC_IS_BUNDLE)
    rc = open_for_writing(c);
  if (is_damage(rc) && rw)
    rc = recover(c, rc);
  if (rc == SQLITE_OK) {
    return;
  } else if (rw && is_env(rc)) {
    /* cannot write here: read what is there, if anything */
    int rc2 = open_for_reading(c);
    lower_mode(c, rc2 == SQLITE_OK ? XPJ_CACHE_MODE_RO : XPJ_CACHE_MODE_OFF,
               "cache %s cannot be written (%s)", c->path, rc_str(rc));
  } else if (!rw && is_env(rc) && db_open_frozen(c) == SQLITE_OK) {
    return; /* read-only as asked */
  } else if (!rw && rc == SQLITE_CANTOPEN && lstat(c->path, &sb) != 0 &&
             errno == ENOENT) {
    c->mode = XPJ_CACHE_MODE_OFF; /* nothing there to read: no problem */
  } else {
    lower_mode(c, XPJ_CACHE_MODE_OFF, "cache %s: %s%s", c->path, rc_str(rc),
               is_damage(rc) ? " (opened read-write, for example by "
                               "'xpjit-cli cache verify --repair', it is "
                               "moved aside and replaced)"
                             : "");
  }
}

/* Before a write: a handle opened read-only until then gets a writer's
 * connection (open_for_writing; damage found then is recovered as an open
 * would). The read-only one stays open meanwhile, so that the WAL's index
 * stays set up for the new one (unless the writer leaves WAL mode, which
 * no other connection may hold open), and goes once that is open; if it
 * cannot be had, lookups go on through the read-only one, and a file that
 * cannot be written turns the handle read-only with the warning an open
 * would give. */
static int to_writable(xpj_cache *c) {
  if (c->db_writes)
    return SQLITE_OK;
  if (network_fs_of(c->path))
    db_close(c);
  sqlite3 *ro = c->db;
  sqlite3_stmt *ro_lookup = c->lookup;
  c->db = NULL;
  c->lookup = NULL;
  int rc = open_for_writing(c);
  if (rc == SQLITE_OK || is_damage(rc)) {
    sqlite3_finalize(ro_lookup);
    sqlite3_close_v2(ro);
  } else {
    c->db = ro;
    c->lookup = ro_lookup;
  }
  if (is_damage(rc) && !c->recovered && !c->bundle)
    rc = recover(c, rc);
  if (rc == SQLITE_OK)
    return rc;
  int rc2 = c->db ? SQLITE_OK : open_for_reading(c);
  if (is_env(rc) || rc2 != SQLITE_OK)
    lower_mode(c, rc2 == SQLITE_OK ? XPJ_CACHE_MODE_RO : XPJ_CACHE_MODE_OFF,
               "cache %s cannot be written (%s)", c->path, rc_str(rc));
  return rc;
}

static xpj_status open_handle(const xpj_cache_config *cfg, bool lazy,
                              xpj_cache **out);

xpj_status xpj_cache_open(const xpj_cache_config *cfg, xpj_cache **out) {
  return open_handle(cfg, false, out);
}

xpj_status xpj_l2_open(const xpj_cache_config *cfg, xpj_cache **out) {
  return open_handle(cfg, true, out);
}

/* XPJIT_CACHE_HIT_FILES=0: none read or written (an A/B switch) */
static bool hit_files_off(void) {
  /* (a malformed value: the runtime warns at the first context) */
  return xpj_env_bool("XPJIT_CACHE_HIT_FILES", 1) == 0;
}

static xpj_status open_handle(const xpj_cache_config *cfg, bool lazy,
                              xpj_cache **out) {
  if (!out)
    return fail(XPJ_ERR_INVALID, "xpj_cache_open: out is NULL");
  *out = NULL;
  xpj_cache_config def = {0};
  if (!cfg)
    cfg = &def;
  if (cfg->bundle && !cfg->path)
    return fail(XPJ_ERR_INVALID, "xpj_cache_open: a bundle needs a path");
  char path[4096];
  if (cfg->path)
    snprintf(path, sizeof path, "%s", cfg->path);
  else
    xpj_cache_default_path(path, sizeof path);
  xpj_cache *c = calloc(1, sizeof *c);
  if (!c || !(c->path = strdup(path))) {
    free(c);
    return fail(XPJ_ERR_NOMEM, "out of memory");
  }
  pthread_mutex_init(&c->mu, NULL);
  c->side_fd = -1;
  c->kept_dfd = -1;
  /* on a network file system the side file is not trusted with the uses
   * of hits (side_append), which hit files need */
  const char *netfs = network_fs_of(path);
  c->no_hits = cfg->bundle || hit_files_off() || netfs;
  c->flight = !cfg->bundle && !netfs &&
              xpj_env_bool("XPJIT_CACHE_SINGLE_FLIGHT", 1) != 0;
  c->lazy = lazy && !c->no_hits;
  c->warn = cfg->warn;
  c->warn_ud = cfg->warn_ud;
  c->bundle = cfg->bundle != 0;
  c->mode = xpj_cache_config_mode(cfg);
  if (cfg->mode == XPJ_CACHE_MODE_DEFAULT && !c->bundle)
    env_complain(c);
  c->max_size = cfg->max_size;
  if (c->bundle) {
    c->max_size = UINT64_MAX;
  } else if (!c->max_size) {
    const char *e = getenv("XPJIT_CACHE_MAX_SIZE");
    c->max_size = XPJ_CACHE_DEFAULT_MAX_SIZE;
    if (e && *e && xpj_cache_parse_size(e, &c->max_size) != XPJ_OK) {
      if (xpj_env_first_complaint("XPJIT_CACHE_MAX_SIZE"))
        warnf(c, "XPJIT_CACHE_MAX_SIZE=%.64s: %s; using 1G", e, last_msg);
      c->max_size = XPJ_CACHE_DEFAULT_MAX_SIZE;
    } else if (c->max_size == 0) {
      /* the default, as in the struct, is the likelier meaning; as a limit
       * it made a cache that evicts every entry it writes, silently */
      if (xpj_env_first_complaint("XPJIT_CACHE_MAX_SIZE"))
        warnf(c, "XPJIT_CACHE_MAX_SIZE=%.64s: a cache that would keep "
              "nothing (XPJIT_CACHE=off says that); using 1G", e);
      c->max_size = XPJ_CACHE_DEFAULT_MAX_SIZE;
    } else if (c->max_size < ENV_MIN_SIZE) {
      /* taken (a small cache is a choice: tests of eviction make one), but
       * said: one kernel's binary is often larger than such a limit */
      if (xpj_env_first_complaint("XPJIT_CACHE_MAX_SIZE"))
        warnf(c, "XPJIT_CACHE_MAX_SIZE=%.64s: under 1M, a cache that keeps "
              "few kernels if any (a kernel's binary is often larger)", e);
    }
  }
  xpj_status st = XPJ_OK;
  xpj_l2_fsize_block(); /* (a new file, the key, a file moved aside) */
  if (c->mode != XPJ_CACHE_MODE_OFF) {
    if (c->bundle)
      st = open_bundle(c);
    else
      open_user_cache(c);
  }
  xpj_l2_fsize_restore();
  lock(c);
  unlock(c); /* gives the warnings of opening */
  if (st != XPJ_OK) {
    char msg[sizeof last_msg];
    memcpy(msg, last_msg, sizeof msg); /* closing may overwrite it */
    xpj_cache_close(c);
    memcpy(last_msg, msg, sizeof msg);
    return st;
  }
  *out = c;
  return XPJ_OK;
}

static void flush_pending(xpj_cache *c);
static int flush_deferred(xpj_cache *c);
static void flush_all(xpj_cache *c);
static void settle(xpj_cache *c);

void xpj_cache_close(xpj_cache *c) {
  if (!c)
    return;
  lock(c);
  settle(c);
  drop_later(c, NULL); /* not written: the handle could not write */
  side_done(c, false);
  db_close(c);
  unlock(c);
  pthread_mutex_destroy(&c->mu);
  hits_close(c->kept_dfd);
  explicit_bzero(c->key, sizeof c->key);
  free(c->touched);
  free(c->path);
  free(c);
}

void xpj_cache_settle(xpj_cache *c) {
  if (!c)
    return;
  lock(c);
  settle(c);
  unlock(c);
}

xpj_cache_mode xpj_cache_mode_of(const xpj_cache *c) {
  return c ? c->mode : XPJ_CACHE_MODE_OFF;
}

const char *xpj_cache_path(const xpj_cache *c) { return c ? c->path : ""; }

/* ---- counters -------------------------------------------------------- */

/* the counters of include/xpjit_cache.h, by name */
#define COUNTERS(X) XPJ_CACHE_COUNTERS(X)

static void add_counters(xpj_cache_counters *a, const xpj_cache_counters *b) {
#define ADD(k, f, w) a->f += b->f;
  COUNTERS(ADD)
#undef ADD
}

void xpj_cache_note(xpj_cache *c, const xpj_cache_counters *delta) {
  if (!c || !delta)
    return;
  lock(c);
  add_counters(&c->pending, delta);
  unlock(c);
}

static bool counters_zero(const xpj_cache_counters *k) {
  return !memcmp(k, &(xpj_cache_counters){0}, sizeof *k);
}

/* Inside a write transaction: adds d to the counters in the table;
 * SQLite's code. */
static int add_stats(xpj_cache *c, const xpj_cache_counters *d) {
  if (counters_zero(d))
    return SQLITE_OK;
  sqlite3_stmt *s = NULL;
  int rc = sqlite3_prepare_v2(c->db,
                              "INSERT INTO stats(name, value) VALUES(?1, ?2) "
                              "ON CONFLICT(name) DO UPDATE SET value = value "
                              "+ ?2",
                              -1, &s, NULL);
#define FLUSH(k, f, w)                                                           \
  if (rc == SQLITE_OK && d->f != 0) {                                        \
    sqlite3_bind_text(s, 1, #f, -1, SQLITE_STATIC);                          \
    sqlite3_bind_double(s, 2, (double)d->f);                                 \
    rc = sqlite3_step(s);                                                    \
    rc = rc == SQLITE_DONE ? SQLITE_OK : rc;                                 \
    sqlite3_reset(s);                                                        \
  }
  COUNTERS(FLUSH)
#undef FLUSH
  sqlite3_finalize(s);
  return rc;
}

/* Inside a write transaction: adds the pending counters to the table. */
static void flush_pending(xpj_cache *c) {
  if (c->bundle)
    return;
  if (add_stats(c, &c->pending) == SQLITE_OK)
    memset(&c->pending, 0, sizeof c->pending);
}

/* ---- entries ---------------------------------------------------------- */

void xpj_cache_entry_clear(xpj_cache_entry *e) {
  if (!e)
    return;
  free(e->key);
  free(e->code);
  free(e->kernel);
  free(e->dtypes);
  free(e->target);
  free(e->options);
  free(e->versions);
  free(e->data);
  free(e->entry);
  free(e->log);
  memset(e, 0, sizeof *e);
}

#define ROW_COLS                                                             \
  "digest, key, code, kernel, dtypes, ndim, target, options, versions, "    \
  "failed, entry, local_bytes, scratch_bytes, size, log, compile_ms, "      \
  "created, last_used, hits, checksum, expires"
/* indexes of the columns of ROW_COLS that are read by number; the data
 * blob, when selected, follows them */
enum { COL_CHECKSUM = 19, COL_EXPIRES = 20, COL_DATA = 21 };

static char *col_text(sqlite3_stmt *s, int i) {
  const unsigned char *t = sqlite3_column_text(s, i);
  return strdup(t ? (const char *)t : "");
}

/* Reads the row's columns (ROW_COLS, then data at COL_DATA when
 * with_data) into e. */
static bool read_row(sqlite3_stmt *s, bool with_data, xpj_cache_entry *e) {
  memset(e, 0, sizeof *e);
  const unsigned char *dg = sqlite3_column_text(s, 0);
  snprintf(e->digest, sizeof e->digest, "%s", dg ? (const char *)dg : "");
  e->key = col_text(s, 1);
  e->code = col_text(s, 2);
  e->kernel = col_text(s, 3);
  e->dtypes = col_text(s, 4);
  e->ndim = (unsigned)sqlite3_column_int(s, 5);
  e->target = col_text(s, 6);
  e->options = col_text(s, 7);
  e->versions = col_text(s, 8);
  e->failed = sqlite3_column_int(s, 9);
  e->entry = col_text(s, 10);
  e->local_bytes = (uint64_t)sqlite3_column_int64(s, 11);
  e->scratch_bytes = (uint64_t)sqlite3_column_int64(s, 12);
  e->log = col_text(s, 14);
  e->compile_ms = sqlite3_column_double(s, 15);
  e->created_ms = sqlite3_column_int64(s, 16);
  e->last_used_ms = sqlite3_column_int64(s, 17);
  e->hits = (uint64_t)sqlite3_column_int64(s, 18);
  e->expires_ms = sqlite3_column_int64(s, COL_EXPIRES);
  e->size = 0;
  bool ok = e->key && e->code && e->kernel && e->dtypes && e->target &&
            e->options && e->versions && e->entry && e->log;
  if (with_data && ok) {
    const void *d = sqlite3_column_blob(s, COL_DATA);
    int n = sqlite3_column_bytes(s, COL_DATA);
    e->size = (size_t)n;
    e->data = malloc(n > 0 ? (size_t)n : 1);
    ok = e->data != NULL;
    if (ok && n > 0)
      memcpy(e->data, d, (size_t)n);
  } else {
    e->size = (size_t)sqlite3_column_int64(s, 13);
  }
  return ok;
}

/* The key that signs c's rows; NULL for a bundle (plain SHA-256). */
static const uint8_t *signing_key(const xpj_cache *c) {
  return c->bundle ? NULL : c->key;
}

/* Is e (read with its data) intact, and written by c's owner? Checks the
 * key digest and the checksum (keyed in the user cache: a handle with no
 * key can verify nothing). */
static bool row_intact(const xpj_cache *c, const xpj_cache_entry *e,
                       const char *checksum) {
  char hex[65], sum[65];
  sha256_hex(e->key, strlen(e->key), hex);
  if (strcmp(hex, e->digest) != 0 || (!c->bundle && !c->has_key))
    return false;
  row_checksum(signing_key(c), e->digest, e->failed, e->entry,
               e->local_bytes, e->scratch_bytes, e->data, e->size, e->log,
               e->expires_ms, sum);
  return checksum && strcmp(sum, checksum) == 0;
}

static bool expired_at(int64_t expires_ms) {
  return expires_ms != 0 && expires_ms <= now_ms();
}

static bool expired(const xpj_cache_entry *e) {
  return expired_at(e->expires_ms);
}

/* ---- the entries' total size ------------------------------------------ */

/* The total of the entries' sizes is kept in the stats table under this
 * name, by each statement of ours that adds or removes a row, inside its
 * transaction: the size limit is checked without reading every row (the
 * size column lies behind each row's binary, so a sum reads the whole
 * file: 35 ms a put at 100 MB). A file without it (made before it was
 * kept, or cleared) gets it from one sum when first needed, and a prune
 * sums again, which also counts rows written by an older xpjit (it does
 * not keep the total). No index is added for it: an older xpjit compares
 * the schema exactly and would take the file for a damaged one. */
#define TOTAL_SIZE "entry_bytes"

/* Inside a write transaction: the kept total, summed (and kept) when
 * there is none, or when it is below zero (rows an older xpjit added were
 * removed). */
static int64_t total_size(xpj_cache *c, int *rc) {
  sqlite3_stmt *s = NULL;
  *rc = sqlite3_prepare_v2(c->db,
                           "SELECT value FROM stats WHERE name='" TOTAL_SIZE
                           "'", -1, &s, NULL);
  int r = *rc == SQLITE_OK ? sqlite3_step(s) : *rc;
  int64_t total = r == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
  sqlite3_finalize(s);
  if (r == SQLITE_ROW && total >= 0)
    return total;
  if (r != SQLITE_ROW && r != SQLITE_DONE) {
    *rc = r;
    return 0;
  }
  total = query_int(c->db, "SELECT total(size) FROM entries", rc);
  char sql[160];
  snprintf(sql, sizeof sql, "INSERT OR REPLACE INTO stats VALUES('"
           TOTAL_SIZE "', %lld)", (long long)total);
  if (*rc == SQLITE_OK)
    *rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
  return total;
}

/* Inside a write transaction: adds delta to the kept total, if kept. */
static int add_size(xpj_cache *c, int64_t delta) {
  if (!delta)
    return SQLITE_OK;
  sqlite3_stmt *s = NULL;
  int rc = sqlite3_prepare_v2(c->db,
                              "UPDATE stats SET value = value + ?1 "
                              "WHERE name='" TOTAL_SIZE "'",
                              -1, &s, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(s, 1, delta);
    rc = sqlite3_step(s);
  }
  sqlite3_finalize(s);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Inside a write transaction: deletes the row of digest, if there is one,
 * and its size from the total; SQLite's code. */
static int delete_entry(xpj_cache *c, const char *digest) {
  sqlite3_stmt *s = NULL;
  int rc = sqlite3_prepare_v2(
      c->db, "DELETE FROM entries WHERE digest=? RETURNING size", -1, &s,
      NULL);
  int64_t gone = 0;
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(s, 1, digest, -1, SQLITE_TRANSIENT);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
      gone += sqlite3_column_int64(s, 0);
  }
  sqlite3_finalize(s);
  return rc == SQLITE_DONE ? add_size(c, -gone) : rc;
}

/* Deletes the row in a transaction of its own, which writes the deferred
 * work too; SQLite's code (SQLITE_OK when done, whether or not the row was
 * there). */
static int delete_row(xpj_cache *c, const char *digest) {
  if (c->mode != XPJ_CACHE_MODE_RW)
    return SQLITE_READONLY;
  int rc = begin(c);
  if (rc != SQLITE_OK)
    return rc;
  rc = flush_deferred(c);
  if (rc == SQLITE_OK)
    rc = delete_entry(c, digest);
  if (rc == SQLITE_OK)
    flush_pending(c);
  return finish(c, rc);
}

/* A row that failed its checksum: dropped when the store is writable, and
 * a warning that says which of the two happened. */
static void drop_damaged(xpj_cache *c, const char *digest, const char *kernel) {
  c->pending.corrupt++;
  if (c->bundle) {
    warnf(c, "bundle %s: entry %.16s (%s) is damaged (its checksum fails); "
          "not used, compiling instead", c->path, digest, kernel);
    return;
  }
  if (c->mode != XPJ_CACHE_MODE_RW) {
    warnf(c, "cache %s: entry %.16s (%s) failed its checksum; left in place "
          "(the cache is read-only), recompiling", c->path, digest, kernel);
    return;
  }
  int rc = delete_row(c, digest);
  if (rc == SQLITE_OK)
    warnf(c, "cache %s: entry %.16s (%s) failed its checksum; dropped it, "
          "recompiling", c->path, digest, kernel);
  else
    warnf(c, "cache %s: entry %.16s (%s) failed its checksum; could not drop "
          "it (%s), recompiling", c->path, digest, kernel, rc_str(rc));
}

/* One lookup; returns SQLite's code (SQLITE_ROW with *out filled, DONE for
 * a miss). The statement is prepared once per connection and reset after
 * each use, before anything that may write (and so reopen the file). */
static int lookup(xpj_cache *c, const char *digest, const char *text,
                  xpj_cache_entry *out) {
  int rc = c->lookup ? SQLITE_OK
                     : sqlite3_prepare_v3(c->db,
                                          "SELECT " ROW_COLS ", data FROM "
                                          "entries WHERE digest=?",
                                          -1, SQLITE_PREPARE_PERSISTENT,
                                          &c->lookup, NULL);
  if (rc != SQLITE_OK)
    return rc;
  sqlite3_stmt *s = c->lookup;
  sqlite3_bind_text(s, 1, digest, -1, SQLITE_STATIC);
  rc = step_retry(s);
  bool damaged = false, stale = false;
  if (rc == SQLITE_ROW) {
    if (!read_row(s, true, out)) {
      xpj_cache_entry_clear(out);
      rc = SQLITE_NOMEM;
    } else if (strcmp(out->key, text) != 0) {
      /* a digest collision (or a forged row): never a hit */
      xpj_cache_entry_clear(out);
      rc = SQLITE_DONE;
    } else {
      const unsigned char *sum = sqlite3_column_text(s, COL_CHECKSUM);
      damaged = !row_intact(c, out, (const char *)sum);
      if (damaged && key_renewed_as(c, true)) /* signed with the new key */
        damaged = !row_intact(c, out, (const char *)sum);
      stale = !damaged && expired(out); /* a negative entry whose time is up */
    }
  }
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  if (damaged)
    drop_damaged(c, digest, out->kernel);
  else if (stale && !c->bundle)
    delete_row(c, digest);
  if (damaged || stale) {
    xpj_cache_entry_clear(out);
    rc = SQLITE_DONE;
  }
  return rc;
}

/* ---- deferred work ----------------------------------------------------- */

/* What a handle has not written yet: the counters (xpj_cache_note and its
 * own events), the uses of hits (last_used, hits: a hit costs no write of
 * its own) and the puts of xpj_cache_put_later (a row copied from another
 * tier costs none either). All of it is written inside the next write
 * transaction (flush_deferred: a put, a remove, a row deleted because it
 * was damaged or expired, the maintenance calls), or in one of its own
 * (flush_all) past LATER_MAX waiting puts and by the maintenance calls
 * that read. At close, and every 64 hits, it is settled (settle): a row's
 * use time is written only when the stored one is older than
 * USE_GRANULARITY_MS (the use is "due"); when nothing is due and no put
 * waits, the counters and hits go to the side file (PATH.stats) with one
 * append, and the database is not written at all. Whoever writes the
 * database next folds the side file into it (side_fold). */

/* Inside a write transaction: records the deferred uses (on the row of
 * that digest created when the hit saw it: a row replaced since gets
 * none). */
static void flush_touches(xpj_cache *c) {
  if (!c->ntouched)
    return;
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(
          c->db,
          /* a stored time more than a minute ahead of this use (a clock
           * that was wrong) is replaced, or the row would never age */
          "UPDATE entries SET last_used = CASE WHEN coalesce(last_used, 0) "
          "> ?1 + 60000 THEN ?1 ELSE max(coalesce(last_used, 0), ?1) END, "
          "hits = coalesce(hits, 0) + ?2 WHERE digest = ?3 AND created IS ?4",
          -1, &s, NULL) != SQLITE_OK)
    return;
  /* the hit files' times follow the uses written (hit_seen) */
  int dfd = c->no_hits ? -1 : hits_dir(c, false);
  for (size_t i = 0; i < c->ntouched; i++) {
    sqlite3_bind_int64(s, 1, c->touched[i].t);
    sqlite3_bind_int64(s, 2, (int64_t)c->touched[i].n);
    sqlite3_bind_text(s, 3, c->touched[i].digest, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, c->touched[i].created);
    if (sqlite3_step(s) == SQLITE_DONE && sqlite3_changes(c->db) > 0 &&
        c->touched[i].due)
      xpj_hitfile_set_time(dfd, c->touched[i].digest, c->touched[i].t);
    sqlite3_reset(s);
  }
  hits_close(dfd);
  sqlite3_finalize(s);
  c->ntouched = 0;
}

/* ---- the side file: counters and hits that waited for a write --------- */

/* PATH.stats holds, one line per handle that settled its deferred work
 * without writing the database, "x1" and then its counters (NAME=VALUE,
 * the non-zero ones) and its hits (@DIGEST:CREATED:HITS), separated by
 * spaces. Lines are appended whole under an exclusive flock (one write);
 * the next write transaction of any handle reads the file under the same
 * lock, adds it to the tables and empties it once that transaction is
 * committed. Readers (stats, list, find) add what it holds to what the
 * tables say, under a shared lock. A line that is cut short or malformed
 * is skipped, and one written by a newer version keeps the tokens this
 * one knows. It is a file of the cache like the lock file: the user's,
 * 0600, never through a link (the trust checks). */

/* A row's hits, as the side file notes them. */
typedef struct side_hit {
  char digest[65];
  int64_t created;
  uint64_t n;
} side_hit;

/* What the side file holds: the counters summed, and the hits summed per
 * row, sorted by digest and created. */
typedef struct tally {
  xpj_cache_counters k;
  side_hit *hits;
  size_t nhits, cap;
} tally;

/* Opens PATH.stats with flags (O_RDONLY, O_RDWR, or O_RDWR | O_APPEND |
 * O_CREAT) and takes its flock op (LOCK_SH or LOCK_EX), waiting at most
 * SIDE_LOCK_MS for it; the fd (side_close), or -1: absent, not the
 * user's, empty when skip_empty, or held too long by another. */
static int side_open(const xpj_cache *c, int flags, int op, bool skip_empty) {
  char p[4200], why[4096];
  snprintf(p, sizeof p, "%s" SIDE, c->path);
  int fd = open(p, flags | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return -1;
  trust t;
  trust_for_cache(&t);
  struct stat sb;
  if (trust_fd(&t, fd, p, false, why, sizeof why) != TRUST_OK ||
      fstat(fd, &sb) != 0 || (skip_empty && sb.st_size == 0)) {
    close(fd);
    return -1;
  }
  if ((flags & O_CREAT) && (sb.st_mode & 0777) != 0600)
    fchmod(fd, 0600); /* made under a umask that took more than go-rwx */
  int64_t t0 = now_ms();
  unsigned wait = 1;
  while (flock(fd, op | LOCK_NB) != 0) {
    if ((errno != EWOULDBLOCK && errno != EINTR) ||
        now_ms() - t0 > SIDE_LOCK_MS) {
      close(fd);
      return -1;
    }
    sleep_ms(wait);
    if (wait < 8)
      wait *= 2;
  }
  return fd;
}

static void side_close(int fd) {
  if (fd >= 0) {
    flock(fd, LOCK_UN);
    close(fd);
  }
}

/* Digits only, into *v; false on anything else or an overflow. */
static bool side_u64(const char *s, uint64_t *v) {
  if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 20)
    return false;
  errno = 0;
  unsigned long long x = strtoull(s, NULL, 10);
  *v = (uint64_t)x;
  return errno == 0;
}

static bool side_dbl(const char *s, double *v) {
  char *end = NULL;
  errno = 0;
  *v = strtod(s, &end);
  return *s && end && !*end && errno == 0 && isfinite(*v);
}

#define SIDE_PARSE_U(s, v) side_u64(s, v)
#define SIDE_PARSE_D(s, v) side_dbl(s, v)

/* NAME=VALUE into k; a name this version does not know is ignored. */
static bool side_counter(char *tok, xpj_cache_counters *k) {
  char *eq = strchr(tok, '=');
  if (!eq || eq == tok || !eq[1])
    return false;
  *eq = 0;
  const char *name = tok, *val = eq + 1;
  if (strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(name))
    return false;
#define SIDE_TOK(kind, f, w)                                                     \
  if (!strcmp(name, #f)) {                                                   \
    __typeof__(k->f) v;                                                      \
    if (!SIDE_PARSE_##kind(val, &v))                                         \
      return false;                                                          \
    k->f += v;                                                               \
    return true;                                                             \
  }
  COUNTERS(SIDE_TOK)
#undef SIDE_TOK
  return true;
}

/* DIGEST:CREATED:HITS (the '@' gone) appended to t. */
static bool side_hit_tok(char *tok, tally *t) {
  char *c1 = strchr(tok, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
  if (!c2 || c1 - tok != 64 || strspn(tok, "0123456789abcdef") != 64)
    return false;
  *c1 = *c2 = 0;
  uint64_t created, n;
  if (!side_u64(c1 + 1, &created) || created > INT64_MAX ||
      !side_u64(c2 + 1, &n))
    return false;
  if (t->nhits == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    side_hit *h = realloc(t->hits, cap * sizeof *h);
    if (!h)
      return false;
    t->hits = h;
    t->cap = cap;
  }
  side_hit *h = &t->hits[t->nhits++];
  memcpy(h->digest, tok, 64);
  h->digest[64] = 0;
  h->created = (int64_t)created;
  h->n = n;
  return true;
}

/* One line (without its newline) into t; a malformed one adds nothing. */
static void side_line(char *line, tally *t) {
  char *save = NULL, *tok = strtok_r(line, " ", &save);
  if (!tok || strcmp(tok, "x1") != 0)
    return;
  xpj_cache_counters k;
  memset(&k, 0, sizeof k);
  size_t nh = t->nhits;
  bool ok = true;
  while (ok && (tok = strtok_r(NULL, " ", &save)))
    ok = *tok == '@' ? side_hit_tok(tok + 1, t) : side_counter(tok, &k);
  if (!ok) {
    t->nhits = nh;
    return;
  }
  add_counters(&t->k, &k);
}

static int cmp_hit(const void *a, const void *b) {
  const side_hit *x = a, *y = b;
  int r = strcmp(x->digest, y->digest);
  return r ? r : (x->created > y->created) - (x->created < y->created);
}

/* Reads the side file (fd, locked) into t (side_free): its whole lines
 * (at most SIDE_READ_MAX bytes of them). */
static void side_read(int fd, tally *t) {
  memset(t, 0, sizeof *t);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size <= 0)
    return;
  size_t n = (uint64_t)sb.st_size > SIDE_READ_MAX ? SIDE_READ_MAX
                                                  : (size_t)sb.st_size;
  char *buf = malloc(n + 1);
  if (!buf)
    return;
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, buf + got, n - got, (off_t)got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  buf[got] = 0;
  char *at = buf, *nl;
  while ((nl = memchr(at, '\n', (size_t)(buf + got - at)))) {
    *nl = 0;
    if (strlen(at) == (size_t)(nl - at)) /* no NUL inside */
      side_line(at, t);
    at = nl + 1;
  }
  free(buf);
  if (t->nhits > 1) {
    qsort(t->hits, t->nhits, sizeof *t->hits, cmp_hit);
    size_t j = 0;
    for (size_t i = 1; i < t->nhits; i++)
      if (!cmp_hit(&t->hits[j], &t->hits[i]))
        t->hits[j].n += t->hits[i].n;
      else
        t->hits[++j] = t->hits[i];
    t->nhits = j + 1;
  }
}

/* The side file as it is now (under a shared lock, held until
 * side_close(*fd): the caller reads the tables meanwhile, which a fold
 * cannot change then). */
static void side_peek(const xpj_cache *c, tally *t, int *fd) {
  /* an off handle reads nothing (its directory may have been refused) */
  *fd = c->bundle || !c->db ? -1 : side_open(c, O_RDONLY, LOCK_SH, true);
  side_read(*fd, t);
}

/* The hits the side file holds for a row (digest, created). */
static uint64_t side_hits_of(const tally *t, const char *digest,
                             int64_t created) {
  if (!t->nhits)
    return 0;
  side_hit key;
  snprintf(key.digest, sizeof key.digest, "%s", digest);
  key.created = created;
  const side_hit *h = bsearch(&key, t->hits, t->nhits, sizeof *t->hits,
                              cmp_hit);
  return h ? h->n : 0;
}

/* The deferred counters and hits as one side-file line; malloc'd, *len
 * its length. */
static char *side_record(const xpj_cache *c, size_t *len) {
  size_t ncounters = 0;
#define COUNT(k, f, w) ncounters++;
  COUNTERS(COUNT)
#undef COUNT
  size_t cap = 16 + ncounters * 64 + c->ntouched * 112, n = 0;
  char *b = malloc(cap);
  if (!b)
    return NULL;
  n += (size_t)snprintf(b + n, cap - n, "\nx1"); /* see side_append */
#define REC_U(f)                                                                 \
  n += (size_t)snprintf(b + n, cap - n, " %s=%llu", #f,                      \
                        (unsigned long long)c->pending.f);
#define REC_D(f) n += (size_t)snprintf(b + n, cap - n, " %s=%.17g", #f, c->pending.f);
#define REC(k, f, w)                                                             \
  if (c->pending.f != 0) {                                                   \
    REC_##k(f)                                                               \
  }
  COUNTERS(REC)
#undef REC
#undef REC_D
#undef REC_U
  for (size_t i = 0; i < c->ntouched; i++)
    if (c->touched[i].n && c->touched[i].created >= 0) /* (always) */
      n += (size_t)snprintf(b + n, cap - n, " @%s:%lld:%llu",
                            c->touched[i].digest,
                            (long long)c->touched[i].created,
                            (unsigned long long)c->touched[i].n);
  b[n++] = '\n';
  *len = n;
  return b;
}

/* The deferred counters and hits appended to the side file as one line:
 * no SQLite write and no writer's connection. False when that cannot be
 * done (a network file system, whose appends we do not trust to the
 * flock; a file that cannot be opened, locked or written; one that
 * reached SIDE_MAX): the caller writes the database instead. */
static bool side_append(xpj_cache *c) {
  if (network_fs_of(c->path))
    return false;
  size_t len = 0;
  char *rec = side_record(c, &len);
  if (!rec)
    return false;
  int fd = side_open(c, O_RDWR | O_APPEND | O_CREAT, LOCK_EX, false);
  struct stat sb;
  bool ok = false;
  if (fd >= 0 && fstat(fd, &sb) == 0 &&
      (uint64_t)sb.st_size + len <= SIDE_MAX) {
    /* the record starts with a newline only when the file does not end
     * with one (a line cut by a crash: it stays alone, skipped) */
    char last = '\n';
    if (sb.st_size > 0 && pread(fd, &last, 1, sb.st_size - 1) != 1)
      last = 0;
    const char *from = last == '\n' ? rec + 1 : rec;
    size_t n = last == '\n' ? len - 1 : len;
    ssize_t w = write(fd, from, n);
    ok = w == (ssize_t)n;
    if (!ok && w > 0 && ftruncate(fd, sb.st_size) != 0) {
      /* a cut line is skipped by its readers */
    }
  }
  side_close(fd);
  free(rec);
  return ok;
}

/* Inside a write transaction: adds what the side file holds to the
 * tables (counters to stats, hits to their rows) and keeps it locked
 * until the transaction ends (side_done empties it when that commits).
 * A file that cannot be had now is folded by a later write. */
static int side_fold(xpj_cache *c) {
  if (c->bundle || c->side_fd >= 0)
    return SQLITE_OK;
  int fd = side_open(c, O_RDWR, LOCK_EX, true);
  if (fd < 0)
    return SQLITE_OK;
  tally t;
  side_read(fd, &t);
  int rc = add_stats(c, &t.k);
  sqlite3_stmt *s = NULL;
  if (rc == SQLITE_OK && t.nhits)
    rc = sqlite3_prepare_v2(c->db,
                            "UPDATE entries SET hits = coalesce(hits, 0) + ?1 "
                            "WHERE digest = ?2 AND created IS ?3",
                            -1, &s, NULL);
  for (size_t i = 0; rc == SQLITE_OK && i < t.nhits; i++) {
    sqlite3_bind_int64(s, 1, (int64_t)t.hits[i].n);
    sqlite3_bind_text(s, 2, t.hits[i].digest, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, t.hits[i].created);
    rc = sqlite3_step(s);
    rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    sqlite3_reset(s);
  }
  sqlite3_finalize(s);
  free(t.hits);
  if (rc == SQLITE_OK)
    c->side_fd = fd;
  else
    side_close(fd);
  return rc;
}

/* The transaction the side file was folded into has ended: emptied if it
 * was committed, and unlocked. */
static void side_done(xpj_cache *c, bool committed) {
  if (c->side_fd < 0)
    return;
  if (committed && ftruncate(c->side_fd, 0) != 0) {
    /* counted again by the next fold: nothing better to do */
  }
  side_close(c->side_fd);
  c->side_fd = -1;
}

/* Forgets the uses of digest not written yet: they belong to a row that is
 * being removed or replaced. */
static void forget_uses(xpj_cache *c, const char *digest) {
  size_t j = 0;
  for (size_t i = 0; i < c->ntouched; i++)
    if (strcmp(c->touched[i].digest, digest) != 0)
      c->touched[j++] = c->touched[i];
  c->ntouched = j;
}

/* The waiting put of digest, or NULL. */
static struct later *find_later(const xpj_cache *c, const char *digest) {
  for (size_t i = 0; i < c->nlater; i++)
    if (!strcmp(c->later[i]->digest, digest))
      return c->later[i];
  return NULL;
}

/* Drops the waiting put of digest (NULL: every one), unwritten. */
static void drop_later(xpj_cache *c, const char *digest) {
  size_t j = 0;
  for (size_t i = 0; i < c->nlater; i++) {
    struct later *w = c->later[i];
    if (!digest || !strcmp(w->digest, digest)) {
      c->later_bytes -= w->bytes;
      free(w);
    } else {
      c->later[j++] = w;
    }
  }
  c->nlater = j;
}

static int insert(xpj_cache *c, const xpj_cache_key *k, const char *digest,
                  const char *text, const xpj_cache_value *v,
                  const char *sum, int64_t t);
static int evict_to(xpj_cache *c, uint64_t target, uint64_t *removed,
                    uint64_t *freed);

/* Inside a write transaction, before the transaction's own change: writes
 * the waiting puts, in order, each as xpj_cache_put writes one (the row,
 * then eviction for the size limit; one whose time is up is not written),
 * then the uses (which follow the puts they may use). The counters go
 * last, after what the transaction itself counts: its caller ends with
 * flush_pending. SQLite's code; the waiting puts are gone either way. */
static void hit_write(xpj_cache *c, const char *digest, const char *text,
                      const char *entry, const char *log, uint64_t local,
                      uint64_t scratch, const void *data, size_t size,
                      double compile_ms, int64_t created, int64_t used);

static int flush_deferred(xpj_cache *c) {
  int rc = SQLITE_OK;
  if (c->nlater)
    key_renewed(c);
  for (size_t i = 0; i < c->nlater && rc == SQLITE_OK; i++) {
    struct later *w = c->later[i];
    if (expired_at(w->v.expires_ms))
      continue;
    char sum[65]; /* signed now: with the key in use when it is written */
    row_checksum(signing_key(c), w->digest, w->v.failed, w->v.entry,
                 w->v.local_bytes, w->v.scratch_bytes, w->v.data, w->v.size,
                 w->v.log, w->v.expires_ms, sum);
    rc = insert(c, &w->k, w->digest, w->text, &w->v, sum, w->t);
    if (rc == SQLITE_OK && c->max_size != UINT64_MAX)
      rc = evict_to(c, c->max_size, NULL, NULL);
    /* its hit file, as a put makes it (a Redis hit written back is then
     * the next process's hit file hit) */
    if (rc == SQLITE_OK && !w->v.failed && !w->v.expires_ms)
      hit_write(c, w->digest, w->text, w->v.entry ? w->v.entry : "",
                w->v.log ? w->v.log : "", w->v.local_bytes,
                w->v.scratch_bytes, w->v.data, w->v.size, w->v.compile_ms,
                w->t, w->t);
  }
  drop_later(c, NULL);
  if (rc == SQLITE_OK)
    flush_touches(c);
  if (rc == SQLITE_OK)
    rc = side_fold(c);
  return rc;
}

/* Whether the side file holds anything (a stat: no open, no lock). */
static bool side_waits(const xpj_cache *c) {
  char p[4200];
  struct stat sb;
  return (size_t)snprintf(p, sizeof p, "%s" SIDE, c->path) < sizeof p &&
         lstat(p, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0;
}

/* Writes the deferred work in a transaction of its own; with fold, also
 * when the handle has nothing deferred but the side file holds something
 * (the maintenance calls that write: docs/cache.md, "Use times and hit
 * counts"). */
static void flush_all_as(xpj_cache *c, bool fold) {
  if (!c->db || c->mode != XPJ_CACHE_MODE_RW || c->bundle ||
      (!c->ntouched && !c->nlater && counters_zero(&c->pending) &&
       !(fold && side_waits(c))))
    return;
  int rc = begin(c);
  if (rc != SQLITE_OK) {
    if (is_env(rc))
      degrade(c, rc, "writing deferred uses and entries");
    return;
  }
  rc = flush_deferred(c);
  if (rc == SQLITE_OK)
    flush_pending(c);
  rc = finish(c, rc);
  if (rc != SQLITE_OK && is_env(rc))
    degrade(c, rc, "writing deferred uses and entries");
}

static void flush_all(xpj_cache *c) { flush_all_as(c, false); }

/* The deferred work, written the cheapest way that loses nothing: when a
 * use is due or a put waits, in a write transaction of its own
 * (flush_all: everything, the side file folded in); else the counters and
 * hits are appended to the side file, and the database is not written. */
static void make_wanted(xpj_cache *c);

static void settle(xpj_cache *c) {
  c->unsettled = 0;
  make_wanted(c);
  /* an unopened handle's hits were hit files */
  if ((!c->db && !unopened(c)) || c->mode != XPJ_CACHE_MODE_RW || c->bundle)
    return;
  bool due = c->nlater > 0, any = !counters_zero(&c->pending);
  for (size_t i = 0; i < c->ntouched; i++) {
    due = due || c->touched[i].due;
    any = any || c->touched[i].n;
  }
  if (!due && !any)
    return;
  if (!due && side_append(c)) {
    c->ntouched = 0;
    memset(&c->pending, 0, sizeof c->pending);
    return;
  }
  open_deferred(c);
  flush_all(c);
}

/* A hit on the row (digest, created) whose stored last_used is used: its
 * use is noted, due when used is older than USE_GRANULARITY_MS, or more
 * than a minute in the future. */
static void touch(xpj_cache *c, const char *digest, int64_t created,
                  int64_t used) {
  if (c->mode != XPJ_CACHE_MODE_RW || c->bundle)
    return;
  struct touch *t = NULL;
  for (size_t i = 0; i < c->ntouched && !t; i++)
    if (!strcmp(c->touched[i].digest, digest))
      t = &c->touched[i];
  if (t && t->created != created) { /* replaced since: another row */
    t->n = 0;
    t->due = false;
    t->created = created;
  }
  if (!t) {
    if (c->ntouched == c->cap_touched) {
      size_t n = c->cap_touched ? c->cap_touched * 2 : 16;
      struct touch *nt = realloc(c->touched, n * sizeof *nt);
      if (!nt)
        return; /* a use not recorded: harmless */
      c->touched = nt;
      c->cap_touched = n;
    }
    t = &c->touched[c->ntouched++];
    memcpy(t->digest, digest, 65);
    t->created = created;
    t->n = 0;
    t->due = false;
  }
  int64_t now = now_ms();
  t->t = now;
  t->n++;
  t->due = t->due || now - used >= USE_GRANULARITY_MS ||
           used > now + 60000; /* from a clock that was ahead: rewritten */
  if (++c->unsettled >= 64)
    settle(c);
}

/* A waiting put as a lookup returns its row (read_row): SQLITE_ROW with
 * *out filled, or SQLITE_NOMEM. */
static int later_entry(const struct later *w, xpj_cache_entry *out) {
  memset(out, 0, sizeof *out);
  memcpy(out->digest, w->digest, sizeof out->digest);
  out->key = strdup(w->text);
  out->code = strdup(w->k.code);
  out->kernel = strdup(w->k.kernel);
  out->dtypes = strdup(w->k.dtypes);
  out->target = strdup(w->k.target);
  out->options = strdup(w->k.options);
  out->versions = strdup(w->k.versions);
  out->ndim = w->k.ndim;
  out->failed = w->v.failed;
  out->entry = strdup(w->v.entry);
  out->log = strdup(w->v.log);
  out->local_bytes = w->v.local_bytes;
  out->scratch_bytes = w->v.scratch_bytes;
  out->compile_ms = w->v.compile_ms;
  out->created_ms = out->last_used_ms = w->t;
  out->expires_ms = w->v.expires_ms;
  out->size = w->v.size;
  out->data = malloc(w->v.size ? w->v.size : 1);
  if (out->data && w->v.size)
    memcpy(out->data, w->v.data, w->v.size);
  if (out->key && out->code && out->kernel && out->dtypes && out->target &&
      out->options && out->versions && out->entry && out->log && out->data)
    return SQLITE_ROW;
  xpj_cache_entry_clear(out);
  return SQLITE_NOMEM;
}

/* ---- hit files (hitfile.h) ---------------------------------------------- */


/* Whether the row (digest, created) is there, a success, and lasting:
 * what a hit file may copy. Read now (inside the caller's write
 * transaction, where the callers that write files are). */
static bool row_is(xpj_cache *c, const char *digest, int64_t created) {
  sqlite3_stmt *s = NULL;
  bool yes = false;
  if (c->db && sqlite3_prepare_v2(c->db,
                                  "SELECT 1 FROM entries WHERE digest=?1 AND "
                                  "created IS ?2 AND failed=0 AND expires=0",
                                  -1, &s, NULL) == SQLITE_OK) {
    sqlite3_bind_text(s, 1, digest, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, created);
    yes = sqlite3_step(s) == SQLITE_ROW;
  }
  sqlite3_finalize(s);
  return yes;
}

/* The hit file of digest as a row (read_row's, with the key's fields
 * from k), when it is one of ours for exactly this key text, intact, and
 * used within USE_GRANULARITY_MS (else the database says whether its use
 * is due: its hit goes there). A damaged file is removed. */
static bool hit_check(xpj_cache *c, int dfd, const char *name,
                      const xpj_cache_key *k, const char *digest,
                      const char *text, uint8_t *b, size_t n, int64_t mtime,
                      const xpj_hit *parsed, xpj_cache_entry *out);

static bool hit_read(xpj_cache *c, const xpj_cache_key *k, const char *digest,
                     const char *text, xpj_cache_entry *out) {
  if (c->no_hits || !c->has_key)
    return false;
  int dfd = hits_dir_kept(c);
  size_t n = 0;
  int64_t mtime = 0;
  uint8_t *b = xpj_hitfile_read(dfd, digest, &n, &mtime);
  return b &&
         hit_check(c, dfd, digest, k, digest, text, b, n, mtime, NULL, out);
}

/* hit_read's checks of the bytes b (n; freed here; parsed already when
 * parsed is given) of the hit file of digest, read as name in dfd (which
 * is removed when they are not right). */
static bool hit_check(xpj_cache *c, int dfd, const char *name,
                      const xpj_cache_key *k, const char *digest,
                      const char *text, uint8_t *b, size_t n, int64_t mtime,
                      const xpj_hit *parsed, xpj_cache_entry *out) {
  xpj_hit h;
  xpj_hit_db db;
  bool keyed = (parsed ? (h = *parsed, true)
                       : xpj_hitfile_parse(b, n, &h) == 0) &&
               h.key_len == strlen(text) && !memcmp(h.key, text, h.key_len);
  bool ours = keyed && db_id_kept(c, &db) && h.db.dev == db.dev &&
              h.db.ino == db.ino && h.db.born == db.born;
  if (keyed && !ours && c->kept_db_state) {
    /* the file may be of a database newer than the identity kept: taken
     * again before the file is judged (and, read-write, removed) */
    c->kept_db_state = 0;
    ours = db_id_kept(c, &db) && h.db.dev == db.dev && h.db.ino == db.ino &&
           h.db.born == db.born;
  }
  bool ok = ours;
  memset(out, 0, sizeof *out);
  if (ok) {
    out->entry = strndup(h.entry, h.entry_len);
    out->log = strndup(h.log, h.log_len);
    out->data = malloc(h.size ? h.size : 1);
    ok = out->entry && out->log && out->data;
  }
  if (ok) {
    char sum[65];
    if (h.size)
      memcpy(out->data, h.data, h.size);
    for (int pass = 0; pass < 2; pass++) {
      hit_sum(c->key, digest, out->entry, h.local_bytes, h.scratch_bytes,
              out->data, h.size, out->log, h.created_ms, h.compile_ms, &db,
              sum);
      ours = ok = !strcmp(sum, h.checksum);
      if (ok || !key_renewed_as(c, true)) /* once more: with the new key */
        break;
    }
  }
  /* damaged, cut, another key's or another cache's: written again from
   * the row (not on a lack of memory) */
  if (!ours && c->mode == XPJ_CACHE_MODE_RW)
    xpj_hitfile_unlink(dfd, name);
  free(b);
  int64_t now = now_ms();
  if (ok && now - mtime < USE_GRANULARITY_MS && mtime <= now + 60000) {
    memcpy(out->digest, digest, sizeof out->digest);
    out->key = strdup(text);
    out->code = strdup(k->code);
    out->kernel = strdup(k->kernel);
    out->dtypes = strdup(k->dtypes);
    out->target = strdup(k->target);
    out->options = strdup(k->options);
    out->versions = strdup(k->versions);
    out->ndim = k->ndim;
    out->size = h.size;
    out->local_bytes = h.local_bytes;
    out->scratch_bytes = h.scratch_bytes;
    out->compile_ms = h.compile_ms;
    out->created_ms = h.created_ms;
    out->last_used_ms = mtime;
    if (out->key && out->code && out->kernel && out->dtypes && out->target &&
        out->options && out->versions)
      return true;
  }
  xpj_cache_entry_clear(out);
  return false;
}

/* A hit a hit file answered (no database): counted when count, and its
 * use noted, for the side file at close (not due). */
static void note_file_hit(xpj_cache *c, const xpj_cache_entry *e,
                          bool count) {
  if (count) {
    c->pending.l2_hits++;
    c->pending.saved_ms += e->compile_ms;
  }
  touch(c, e->digest, e->created_ms, e->last_used_ms);
}

/* Inside a write transaction: the hit file of the row (digest, created),
 * when that row is there and a success (it may have been evicted by the
 * very put that made it), its time set to used. In the transaction, so
 * that a deletion by another process comes after it and takes it (the
 * trigger), never before it (which would leave a file without a row). */
static void hit_write(xpj_cache *c, const char *digest, const char *text,
                      const char *entry, const char *log, uint64_t local,
                      uint64_t scratch, const void *data, size_t size,
                      double compile_ms, int64_t created, int64_t used) {
  xpj_hit_db db;
  if (c->no_hits || !c->has_key || c->mode != XPJ_CACHE_MODE_RW ||
      !c->conn_db_ok || !row_is(c, digest, created) ||
      !xpj_hitfile_db_id(c->path, &db) || db.dev != c->conn_db.dev ||
      db.ino != c->conn_db.ino || db.born != c->conn_db.born)
    return; /* (the file at the path is not the one this row is in) */
  xpj_hit h = {created, local, scratch, compile_ms, db, "", text, entry,
               log, strlen(text), strlen(entry), strlen(log), data, size};
  hit_sum(c->key, digest, entry, local, scratch, data, size, log, created,
          compile_ms, &db, h.checksum);
  size_t n = 0;
  uint8_t *b = xpj_hitfile_encode(&h, &n);
  int dfd = b ? hits_dir(c, true) : -1;
  if (b && xpj_hitfile_write(dfd, digest, b, n))
    xpj_hitfile_set_time(dfd, digest, used);
  hits_close(dfd);
  free(b);
}

/* A hit served by the database (e, read with its data; used: the row's
 * stored last_used): a missing hit file is wanted (made at the next
 * settle: make_wanted), and so is one no reader would read (empty, cut
 * short, too big, a FIFO, a link, open to others: xpj_hitfile_state),
 * which the new one is renamed over (left in place, it sent every lookup
 * of its row to the database for good); an existing one gets the row's
 * stored use as its time (a use due now gets it once written:
 * flush_touches). A file is a hit only while that time is within the
 * hour, so the row's last_used is never more than an hour behind. (A file
 * of the right size whose bytes are wrong is found by a lazy handle's
 * read, which removes it.) */
static void hit_seen(xpj_cache *c, const xpj_cache_entry *e, int64_t used) {
  if (c->no_hits || !c->has_key || c->mode != XPJ_CACHE_MODE_RW ||
      e->failed || e->expires_ms || !(e->compile_ms >= 0 && e->compile_ms < 1e12))
    return; /* (a compile time a hit file cannot hold: none is made) */
  int dfd = hits_dir(c, false);
  struct stat sb;
  int there = xpj_hitfile_state(dfd, e->digest, &sb);
  if (there > 0) {
    int64_t t =
        (int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000;
    if (t < used - 1000 || t > used + 1000)
      xpj_hitfile_set_time(dfd, e->digest, used);
  } else if (there < 0 && S_ISDIR(sb.st_mode)) {
    /* a directory: no rename replaces it, and a write transaction at
     * every settle would not either */
  } else if (c->nwant < WANT_MAX) {
    bool dup = false;
    for (unsigned i = 0; i < c->nwant && !dup; i++)
      dup = !strcmp(c->want[i].digest, e->digest);
    if (!dup) {
      memcpy(c->want[c->nwant].digest, e->digest, 65);
      c->want[c->nwant++].created = e->created_ms;
    }
  }
  hits_close(dfd);
}

/* The wanted hit files, in a write transaction (hit_write) that does not
 * wait: when another process writes, they are left for a later one (a
 * hit must never wait for a lock). */
static void make_wanted(xpj_cache *c) {
  unsigned n = c->nwant;
  c->nwant = 0;
  if (!n || c->mode != XPJ_CACHE_MODE_RW || to_writable(c) != SQLITE_OK ||
      !c->db)
    return;
  key_renewed(c); /* the files signed with the key the others use */
  sqlite3_busy_timeout(c->db, 0);
  sqlite3_stmt *s = NULL;
  if (sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(c->db,
                         "SELECT key, entry, log, local_bytes, scratch_bytes, "
                         "data, compile_ms FROM entries WHERE digest=?1 AND "
                         "created IS ?2 AND failed=0 AND expires=0",
                         -1, &s, NULL) == SQLITE_OK) {
    for (unsigned i = 0; i < n; i++) {
      sqlite3_bind_text(s, 1, c->want[i].digest, -1, SQLITE_STATIC);
      sqlite3_bind_int64(s, 2, c->want[i].created);
      if (sqlite3_step(s) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(s, 0),
                   *entry = (const char *)sqlite3_column_text(s, 1),
                   *log = (const char *)sqlite3_column_text(s, 2);
        const void *data = sqlite3_column_blob(s, 5);
        int size = sqlite3_column_bytes(s, 5);
        if (key && size >= 0)
          hit_write(c, c->want[i].digest, key, entry ? entry : "",
                    log ? log : "", (uint64_t)sqlite3_column_int64(s, 3),
                    (uint64_t)sqlite3_column_int64(s, 4), data,
                    (size_t)size, sqlite3_column_double(s, 6),
                    c->want[i].created, now_ms());
      }
      sqlite3_reset(s);
    }
  }
  sqlite3_finalize(s);
  if (!sqlite3_get_autocommit(c->db))
    sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
  sqlite3_busy_timeout(c->db, 2000);
}

/* SQL function xpj_hit_gone(digest), called by a temporary trigger of
 * writers' connections for every row deleted (evicted, pruned, removed,
 * cleared, dropped): its hit file goes with it. */
static void hit_gone(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  xpj_cache *c = sqlite3_user_data(ctx);
  if (argc == 1 && sqlite3_value_type(argv[0]) == SQLITE_TEXT)
    hits_unlink(c, (const char *)sqlite3_value_text(argv[0]));
}

static xpj_status get(xpj_cache *c, const xpj_cache_key *k,
                      xpj_cache_entry *out, bool count, bool file_only);

xpj_status xpj_cache_get(xpj_cache *c, const xpj_cache_key *k,
                         xpj_cache_entry *out) {
  return get(c, k, out, true, false);
}

xpj_status xpj_l2_get_file(xpj_cache *c, const xpj_cache_key *k,
                           xpj_cache_entry *out) {
  return get(c, k, out, true, true);
}

bool xpj_l2_off(xpj_cache *c) {
  if (!c)
    return true;
  pthread_mutex_lock(&c->mu);
  bool r = c->mode == XPJ_CACHE_MODE_OFF;
  pthread_mutex_unlock(&c->mu);
  return r;
}

bool xpj_l2_unopened(xpj_cache *c) {
  if (!c)
    return false;
  pthread_mutex_lock(&c->mu);
  bool r = unopened(c);
  pthread_mutex_unlock(&c->mu);
  return r;
}

xpj_status xpj_cache_get_uncounted(xpj_cache *c, const xpj_cache_key *k,
                                   xpj_cache_entry *out) {
  return get(c, k, out, false, false);
}

/* A lookup: the hit file first while the database is not opened (only it
 * when file_only), then the database. */
static xpj_status get(xpj_cache *c, const xpj_cache_key *k,
                      xpj_cache_entry *out, bool count, bool file_only) {
  if (!c || !k || !out)
    return fail(XPJ_ERR_INVALID, "xpj_cache_get: NULL argument");
  memset(out, 0, sizeof *out);
  char digest[65], *text = NULL;
  xpj_status st = xpj_cache_key_digest(k, &text, digest);
  if (st != XPJ_OK)
    return st;
  lock(c);
  st = XPJ_ERR_NOT_FOUND;
  bool hit = unopened(c) && hit_read(c, k, digest, text, out);
  if (hit)
    note_file_hit(c, out, count);
  if (hit || file_only) {
    unlock(c);
    free(text);
    return hit ? XPJ_OK : fail(XPJ_ERR_NOT_FOUND, "not in a hit file");
  }
  open_deferred(c);
  if (c->db && c->mode != XPJ_CACHE_MODE_OFF) {
    /* a put waiting to be written is the row; past its time it goes, and
     * the store answers */
    struct later *w = find_later(c, digest);
    if (w && expired_at(w->v.expires_ms)) {
      drop_later(c, digest);
      w = NULL;
    }
    int rc = !w                        ? lookup(c, digest, text, out)
             : !strcmp(w->text, text) ? later_entry(w, out)
                                      : SQLITE_DONE; /* as lookup */
    if (is_damage(rc) && !c->recovered && !c->bundle &&
        c->mode == XPJ_CACHE_MODE_RW) {
      rc = recover(c, rc);
      if (rc == SQLITE_OK)
        rc = lookup(c, digest, text, out);
    }
    if (rc == SQLITE_ROW) {
      st = XPJ_OK;
      if (!c->bundle && count) {
        c->pending.l2_hits++;
        if (out->failed)
          c->pending.failure_hits++;
        else
          c->pending.saved_ms += out->compile_ms;
      }
      /* uses not written yet count (see touch) */
      int64_t used = out->last_used_ms;
      for (size_t i = 0; i < c->ntouched; i++)
        if (!strcmp(c->touched[i].digest, digest) &&
            c->touched[i].created == out->created_ms) {
          out->hits += c->touched[i].n;
          out->last_used_ms = c->touched[i].t;
        }
      touch(c, digest, out->created_ms, used);
      if (!c->bundle && !w)
        hit_seen(c, out, used);
    } else {
      if (rc != SQLITE_DONE && !is_busy(rc)) {
        if (c->bundle)
          warnf(c, "bundle %s: lookup failed (%s); compiling instead",
                c->path, rc_str(rc));
        else
          lower_mode(c, XPJ_CACHE_MODE_OFF, "cache %s: lookup failed (%s)",
                     c->path, rc_str(rc));
      }
      if (!c->bundle && count)
        c->pending.l2_misses++;
    }
  }
  unlock(c);
  free(text);
  if (st == XPJ_ERR_NOT_FOUND)
    fail(st, "not in the cache");
  return st;
}

/* ---- aliases: a request named by what the caller gave ----------------- */

/* "a" and the SHA-256 of the caller's alias text: the alias's name. */
static void alias_file(const char *alias, char name[66]) {
  name[0] = 'a';
  sha256_hex(alias, strlen(alias), name + 1);
}

/* The cache's HMAC of an alias's name and the hit file it leads to: an
 * alias is believed only with it (one pointed elsewhere, even by this
 * user, is not). */
static void alias_tag(const xpj_cache *c, const char *name,
                      const char *digest, char hex[65]) {
  summer m;
  sum_init(&m, c->key);
  put_str(&m, "xpjit alias 1");
  put_str(&m, name);
  put_str(&m, digest);
  sum_hex(&m, hex);
}

/* Whether a handle answers through aliases now (mu held): one of
 * xpj_l2_open that has not opened its database, with hit files. */
static bool aliases_now(const xpj_cache *c) {
  return unopened(c) && !c->no_hits && c->has_key;
}

/* What the alias name in dfd is: none there; there but not the cache's
 * (a link copied from another alias, pointed elsewhere, not a link); the
 * cache's, leading to digest, whose hit file is gone (dangling) or there
 * (good; without check_file, good means the cache's). *made, when made is
 * given, is the link's time. A lookup's costs one readlinkat. */
typedef enum { ALIAS_NONE, ALIAS_FOREIGN, ALIAS_DANGLING, ALIAS_GOOD } alias_is;

static alias_is alias_state(const xpj_cache *c, int dfd, const char *name,
                            char digest[65], int64_t *made, bool check_file) {
  char tag[65], want[65];
  struct stat sb;
  if (made) {
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
      return ALIAS_NONE;
    *made = (int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000;
  }
  errno = 0; /* set by the readlinkat only when it fails */
  if (!xpj_hitfile_alias(dfd, name, digest, tag))
    return errno == ENOENT ? ALIAS_NONE : ALIAS_FOREIGN;
  alias_tag(c, name, digest, want);
  if (strcmp(tag, want))
    return ALIAS_FOREIGN;
  if (!check_file)
    return ALIAS_GOOD;
  return fstatat(dfd, digest, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
                 S_ISREG(sb.st_mode)
             ? ALIAS_GOOD
             : ALIAS_DANGLING;
}

bool xpj_l2_alias_digest(xpj_cache *c, const char *alias, char digest[65]) {
  if (!c || !alias)
    return false;
  lock(c);
  char name[66];
  int dfd = aliases_now(c) ? hits_dir_kept(c) : -1;
  alias_is is = ALIAS_NONE;
  if (dfd >= 0) {
    alias_file(alias, name);
    /* (a dangling one is found, and removed, by xpj_l2_get_aliased) */
    is = alias_state(c, dfd, name, digest, NULL, false);
    if (is == ALIAS_FOREIGN && c->mode == XPJ_CACHE_MODE_RW)
      xpj_hitfile_unlink(dfd, name);
  }
  unlock(c);
  return is == ALIAS_GOOD;
}

xpj_status xpj_l2_get_aliased(xpj_cache *c, const char *alias,
                              const char *digest, const xpj_cache_key *k,
                              xpj_cache_entry *out) {
  if (!c || !alias || !digest || !k || !out)
    return fail(XPJ_ERR_INVALID, "xpj_l2_get_aliased: NULL argument");
  memset(out, 0, sizeof *out);
  lock(c);
  char name[66], code[65], *text = NULL;
  bool hit = false;
  int dfd = aliases_now(c) ? hits_dir_kept(c) : -1;
  if (dfd >= 0) {
    /* the hit file, believed (hit_check) only when its key text is k's
     * with the code it names, and that text's digest is digest */
    size_t n = 0;
    int64_t mtime = 0;
    uint8_t *b = xpj_hitfile_read(dfd, digest, &n, &mtime);
    xpj_hit h;
    xpj_cache_key kk = *k;
    kk.code = code;
    char d2[65];
    if (b && xpj_hitfile_parse(b, n, &h) == 0 &&
        xpj_hitfile_key_code(h.key, h.key_len, code) &&
        xpj_cache_key_digest(&kk, &text, d2) == XPJ_OK && !strcmp(d2, digest))
      hit = hit_check(c, dfd, digest, &kk, digest, text, b, n, mtime, &h,
                      out);
    else
      free(b);
    /* its row gone, or not this request's: the alias goes (made again
     * the whole way) */
    if (!hit && c->mode == XPJ_CACHE_MODE_RW) {
      alias_file(alias, name);
      xpj_hitfile_unlink(dfd, name);
    }
  }
  if (hit)
    note_file_hit(c, out, true);
  unlock(c);
  free(text);
  return hit ? XPJ_OK : fail(XPJ_ERR_NOT_FOUND, "no alias");
}

/* Aliases are made per request and per build of libxpjit (and of every
 * program it is linked into), so nothing else bounds them: a sweep, at
 * most once an hour (the time of PATH.hits/.swept) when one is made, and
 * at every prune, removes every alias that is not the cache's or whose
 * hit file is gone, and the oldest beyond ALIASES_PER_FILE per hit file
 * (and ALIASES_MIN more). One removed too soon costs its request one
 * lookup the whole way, which makes it again. */
enum { ALIASES_PER_FILE = 4, ALIASES_MIN = 64 };
#define ALIAS_SWEEP_MS (3600 * 1000LL)

typedef struct alias_seen {
  int64_t t; /* when it was made (the link's time) */
  char name[66];
} alias_seen;

static int older_alias(const void *a, const void *b) {
  int64_t x = ((const alias_seen *)a)->t, y = ((const alias_seen *)b)->t;
  return x < y ? -1 : x > y;
}

static void sweep_aliases(xpj_cache *c, int dfd) {
  DIR *d = xpj_hitdir_list(dfd);
  if (!d)
    return;
  alias_seen *v = NULL;
  size_t n = 0, cap = 0, files = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    const char *name = e->d_name;
    size_t len = strlen(name);
    if (len == 64 && strspn(name, "0123456789abcdef") == 64) {
      files++;
      continue;
    }
    if (len != 65 || name[0] != 'a' ||
        strspn(name + 1, "0123456789abcdef") != 64)
      continue;
    char dg[65];
    int64_t made = 0;
    if (alias_state(c, dfd, name, dg, &made, true) != ALIAS_GOOD) {
      xpj_hitfile_unlink(dfd, name);
      continue;
    }
    if (n == cap) {
      size_t nc = cap ? 2 * cap : 256;
      alias_seen *nv = realloc(v, nc * sizeof *nv);
      if (!nv)
        break; /* what was seen is still swept */
      v = nv;
      cap = nc;
    }
    v[n].t = made;
    memcpy(v[n].name, name, 66);
    n++;
  }
  closedir(d);
  size_t keep = files * ALIASES_PER_FILE + ALIASES_MIN;
  if (n > keep) {
    qsort(v, n, sizeof *v, older_alias);
    for (size_t i = 0; i < n - keep; i++)
      xpj_hitfile_unlink(dfd, v[i].name);
  }
  free(v);
}

/* sweep_aliases, when the last one (by any process) is an hour old. */
static void sweep_aliases_due(xpj_cache *c, int dfd) {
  struct stat sb;
  int64_t now = now_ms();
  if (fstatat(dfd, ".swept", &sb, AT_SYMLINK_NOFOLLOW) == 0) {
    int64_t t =
        (int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000;
    if (now - t < ALIAS_SWEEP_MS && t <= now)
      return;
    if (!S_ISREG(sb.st_mode))
      return; /* not ours to replace */
    utimensat(dfd, ".swept", NULL, AT_SYMLINK_NOFOLLOW);
  } else {
    int fd = openat(dfd, ".swept",
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
      return; /* another process makes it, and sweeps */
    close(fd);
  }
  sweep_aliases(c, dfd);
}

void xpj_l2_set_alias(xpj_cache *c, const char *alias,
                      const xpj_cache_key *k) {
  char digest[65];
  if (k && xpj_cache_key_digest(k, NULL, digest) == XPJ_OK)
    xpj_l2_set_alias_digest(c, alias, digest);
}

void xpj_l2_set_alias_digest(xpj_cache *c, const char *alias,
                             const char *digest) {
  char name[66], now[65], want[65];
  if (!c || !alias || !digest || strlen(digest) != 64 ||
      strspn(digest, "0123456789abcdef") != 64)
    return;
  lock(c);
  int dfd = c->bundle || c->no_hits || !c->has_key ||
                    c->mode != XPJ_CACHE_MODE_RW
                ? -1
                : hits_dir(c, false);
  if (dfd >= 0)
    key_renewed(c); /* tagged with the key the others use */
  alias_file(alias, name);
  alias_tag(c, name, digest, want);
  /* only for a hit file that is there (a row whose file is still to be
   * made gets its alias next time), and not again */
  struct stat sb;
  if (dfd >= 0 && fstatat(dfd, digest, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISREG(sb.st_mode) &&
      !(alias_state(c, dfd, name, now, NULL, false) == ALIAS_GOOD &&
        !strcmp(now, digest)) &&
      xpj_hitfile_set_alias(dfd, name, digest, want))
    sweep_aliases_due(c, dfd);
  hits_close(dfd);
  unlock(c);
}

/* Inside a write transaction: deletes least recently used rows until the
 * kept total (total_size) is at most target bytes. */
static int evict_to(xpj_cache *c, uint64_t target, uint64_t *removed,
                    uint64_t *freed) {
  int rc;
  int64_t total = total_size(c, &rc), kept = total;
  if (rc != SQLITE_OK || total <= 0 || (uint64_t)total <= target)
    return rc;
  sqlite3_stmt *sel = NULL, *del = NULL;
  rc = sqlite3_prepare_v2(c->db,
                          "SELECT digest, size FROM entries "
                          "ORDER BY last_used ASC, created ASC",
                          -1, &sel, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(c->db, "DELETE FROM entries WHERE digest=?", -1,
                            &del, NULL);
  while (rc == SQLITE_OK && (uint64_t)total > target) {
    int r = sqlite3_step(sel);
    if (r != SQLITE_ROW) {
      rc = r == SQLITE_DONE ? SQLITE_OK : r;
      break;
    }
    int64_t sz = sqlite3_column_int64(sel, 1);
    sqlite3_bind_text(del, 1, (const char *)sqlite3_column_text(sel, 0), -1,
                      SQLITE_TRANSIENT);
    r = sqlite3_step(del);
    sqlite3_reset(del);
    if (r != SQLITE_DONE) {
      rc = r;
      break;
    }
    total -= sz;
    c->pending.evictions++;
    if (removed)
      ++*removed;
    if (freed)
      *freed += (uint64_t)sz;
  }
  sqlite3_finalize(sel);
  sqlite3_finalize(del);
  if (rc == SQLITE_OK && total > 0 && (uint64_t)total > target)
    /* every row is gone and the total still says too much: it was wrong
     * (rows removed by something that does not keep it) */
    rc = sqlite3_exec(c->db, "UPDATE stats SET value = (SELECT total(size) "
                      "FROM entries) WHERE name='" TOTAL_SIZE "'",
                      NULL, NULL, NULL);
  else if (rc == SQLITE_OK)
    rc = add_size(c, total - kept);
  return rc;
}

/* Inside a write transaction: the row, created and last used at t. */
static int insert(xpj_cache *c, const xpj_cache_key *k, const char *digest,
                  const char *text, const xpj_cache_value *v,
                  const char *sum, int64_t t) {
  sqlite3_stmt *s = NULL;
  size_t logn = v->log ? strlen(v->log) : 0;
  uint64_t size = v->size + logn + strlen(text) + 256;
  int rc = delete_entry(c, digest); /* the row it replaces */
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(
        c->db,
        "INSERT INTO entries(digest, key, code, kernel, dtypes, ndim, "
        "target, options, versions, failed, entry, local_bytes, "
        "scratch_bytes, data, log, checksum, size, compile_ms, created, "
        "last_used, hits, expires) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,"
        "?11,?12,?13,?14,?15,?16,?17,?18,?19,?19,0,?20)",
        -1, &s, NULL);
  if (rc != SQLITE_OK)
    return rc;
  sqlite3_bind_text(s, 1, digest, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, text, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 3, k->code, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 4, k->kernel, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 5, k->dtypes, -1, SQLITE_STATIC);
  sqlite3_bind_int(s, 6, (int)k->ndim);
  sqlite3_bind_text(s, 7, k->target, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 8, k->options, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 9, k->versions, -1, SQLITE_STATIC);
  sqlite3_bind_int(s, 10, v->failed);
  sqlite3_bind_text(s, 11, v->entry ? v->entry : "", -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 12, (int64_t)v->local_bytes);
  sqlite3_bind_int64(s, 13, (int64_t)v->scratch_bytes);
  sqlite3_bind_blob64(s, 14, v->size ? (const void *)v->data : "",
                      v->size, SQLITE_STATIC);
  sqlite3_bind_text(s, 15, v->log ? v->log : "", -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 16, sum, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 17, (int64_t)size);
  sqlite3_bind_double(s, 18, v->compile_ms);
  sqlite3_bind_int64(s, 19, t);
  sqlite3_bind_int64(s, 20, v->expires_ms);
  rc = sqlite3_step(s);
  sqlite3_finalize(s);
  return rc == SQLITE_DONE ? add_size(c, (int64_t)size) : rc;
}

xpj_status xpj_cache_put(xpj_cache *c, const xpj_cache_key *k,
                         const xpj_cache_value *v) {
  if (!c || !k || !v || (v->size && !v->data))
    return fail(XPJ_ERR_INVALID, "xpj_cache_put: NULL argument");
  char digest[65], *text = NULL, sum[65];
  xpj_status st = xpj_cache_key_digest(k, &text, digest);
  if (st != XPJ_OK)
    return st;
  lock_db(c);
  drop_later(c, digest); /* this row replaces it */
  for (int attempt = 0; attempt < 2; attempt++) {
    if (!c->db || c->mode != XPJ_CACHE_MODE_RW)
      break;
    int rc = begin(c);
    if (rc == SQLITE_OK) /* before: uses belong to the row being replaced */
      rc = flush_deferred(c);
    /* signed with the key the others use (flush_deferred may have read
     * a new one already) */
    key_renewed(c);
    row_checksum(signing_key(c), digest, v->failed, v->entry ? v->entry : "",
                 v->local_bytes, v->scratch_bytes, v->data, v->size,
                 v->log ? v->log : "", v->expires_ms, sum);
    int64_t t = now_ms();
    if (rc == SQLITE_OK)
      rc = insert(c, k, digest, text, v, sum, t);
    if (rc == SQLITE_OK && c->max_size != UINT64_MAX)
      rc = evict_to(c, c->max_size, NULL, NULL);
    if (rc == SQLITE_OK) {
      flush_pending(c);
      /* the row's copy, if it is a success and still there */
      if (!v->failed && !v->expires_ms)
        hit_write(c, digest, text, v->entry ? v->entry : "",
                  v->log ? v->log : "", v->local_bytes, v->scratch_bytes,
                  v->data, v->size, v->compile_ms, t, t);
    }
    rc = finish(c, rc);
    if (rc == SQLITE_OK)
      break;
    hits_unlink(c, digest); /* not committed */
    if (is_damage(rc) && !c->recovered && !c->bundle &&
        recover(c, rc) == SQLITE_OK)
      continue;
    if (is_busy(rc)) {
      warnf(c, "cache %s: busy for %d s; this entry was not stored", c->path,
            BUSY_DEADLINE_MS / 1000);
    } else {
      degrade(c, rc, "storing an entry");
    }
    break;
  }
  unlock(c);
  free(text);
  return XPJ_OK;
}

/* Appends n bytes of src at *at; returns where they went. */
static void *take(char **at, const void *src, size_t n) {
  void *p = *at;
  if (n)
    memcpy(p, src, n);
  *at += n;
  return p;
}

/* A waiting put: k and v copied, the time now; NULL when out of memory.
 * (Signed when it is written: flush_deferred.) */
static struct later *later_make(const xpj_cache_key *k,
                                const xpj_cache_value *v, const char *digest,
                                const char *text) {
  const char *entry = v->entry ? v->entry : "", *log = v->log ? v->log : "";
  const char *strs[] = {text,      k->code,    k->kernel, k->dtypes,
                        k->target, k->options, k->versions, entry, log};
  size_t len[sizeof strs / sizeof *strs], n = sizeof(struct later) + v->size;
  for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
    n += (len[i] = strlen(strs[i]) + 1);
  struct later *w = malloc(n);
  if (!w)
    return NULL;
  char *at = (char *)(w + 1);
  w->bytes = n;
  w->t = now_ms();
  memcpy(w->digest, digest, sizeof w->digest);
  w->text = take(&at, strs[0], len[0]);
  w->k = (xpj_cache_key){take(&at, strs[1], len[1]),
                         take(&at, strs[2], len[2]),
                         take(&at, strs[3], len[3]),
                         k->ndim,
                         take(&at, strs[4], len[4]),
                         take(&at, strs[5], len[5]),
                         take(&at, strs[6], len[6])};
  w->v = *v;
  w->v.entry = take(&at, strs[7], len[7]);
  w->v.log = take(&at, strs[8], len[8]);
  w->v.data = take(&at, v->data, v->size);
  return w;
}

xpj_status xpj_cache_put_later(xpj_cache *c, const xpj_cache_key *k,
                               const xpj_cache_value *v) {
  if (!c || !k || !v || (v->size && !v->data))
    return fail(XPJ_ERR_INVALID, "xpj_cache_put_later: NULL argument");
  if (c->bundle) /* bundles defer nothing */
    return xpj_cache_put(c, k, v);
  char digest[65], *text = NULL;
  xpj_status st = xpj_cache_key_digest(k, &text, digest);
  if (st != XPJ_OK)
    return st;
  if (c->mode != XPJ_CACHE_MODE_RW) { /* never written: no copy */
    free(text);
    return XPJ_OK;
  }
  struct later *w = later_make(k, v, digest, text);
  free(text);
  if (!w)
    return fail(XPJ_ERR_NOMEM, "out of memory");
  /* a handle that has not opened its database keeps it so: the put
   * waits for the next write or the close, which open it (a Redis hit
   * written back should not pay for SQLite's opening) */
  lock(c);
  bool waits = unopened(c);
  if (!waits)
    open_deferred(c);
  if ((!c->db && !waits) || c->mode != XPJ_CACHE_MODE_RW) {
    free(w);
  } else {
    drop_later(c, digest); /* replaced, as a put would */
    forget_uses(c, digest);
    c->later[c->nlater++] = w;
    c->later_bytes += w->bytes;
    if (c->nlater > LATER_MAX || c->later_bytes > LATER_MAX_BYTES) {
      open_deferred(c);
      flush_all(c);
    }
    if (c->nlater > LATER_MAX || c->later_bytes > LATER_MAX_BYTES) {
      warnf(c, "cache %s: busy for %d s; %zu entries were not stored",
            c->path, BUSY_DEADLINE_MS / 1000, c->nlater);
      drop_later(c, NULL);
    }
  }
  unlock(c);
  return XPJ_OK;
}

xpj_status xpj_cache_remove(xpj_cache *c, const xpj_cache_key *k) {
  if (!c || !k)
    return fail(XPJ_ERR_INVALID, "xpj_cache_remove: NULL argument");
  char digest[65];
  xpj_status st = xpj_cache_key_digest(k, NULL, digest);
  if (st != XPJ_OK)
    return st;
  lock_db(c);
  if (c->db && c->mode == XPJ_CACHE_MODE_RW && !c->bundle) {
    /* a put or uses of the row not written yet die with it */
    drop_later(c, digest);
    forget_uses(c, digest);
    int rc = delete_row(c, digest);
    if (is_busy(rc))
      warnf(c, "cache %s: busy for %d s; an entry was not removed", c->path,
            BUSY_DEADLINE_MS / 1000);
    else if (rc != SQLITE_OK)
      degrade(c, rc, "removing an entry");
  }
  unlock(c);
  return XPJ_OK;
}

/* ---- statistics -------------------------------------------------------- */

static uint64_t file_size(const char *path, const char *suffix) {
  char p[4200];
  snprintf(p, sizeof p, "%s%s", path, suffix);
  struct stat sb;
  return stat(p, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

xpj_status xpj_cache_get_stats(xpj_cache *c, xpj_cache_stats *out) {
  if (!c || !out)
    return fail(XPJ_ERR_INVALID, "xpj_cache_get_stats: NULL argument");
  memset(out, 0, sizeof *out);
  lock_db(c);
  flush_all(c);
  out->max_size = c->max_size;
  out->counters = c->pending;
  xpj_status st = XPJ_OK;
  /* what waits in the side file counts (locked meanwhile: not folded
   * while the tables are read) */
  tally side;
  int sfd = -1;
  side_peek(c, &side, &sfd);
  add_counters(&out->counters, &side.k);
  free(side.hits);
  if (c->db) {
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(c->db, "SELECT name, value FROM stats", -1,
                                &s, NULL);
    while (rc == SQLITE_OK && (rc = step_retry(s)) == SQLITE_ROW) {
      const char *n = (const char *)sqlite3_column_text(s, 0);
      double v = sqlite3_column_double(s, 1);
      rc = SQLITE_OK;
      if (!n)
        continue;
#define READ(k, f, w)                                                            \
  if (!strcmp(n, #f))                                                        \
    out->counters.f += (__typeof__(out->counters.f))v;
      COUNTERS(READ)
#undef READ
    }
    sqlite3_finalize(s);
    s = NULL;
    if (rc == SQLITE_OK || rc == SQLITE_DONE)
      rc = sqlite3_prepare_v2(c->db,
                              "SELECT count(*), total(failed <> 0), total(size) "
                              "FROM entries",
                              -1, &s, NULL);
    if (rc == SQLITE_OK && (rc = step_retry(s)) == SQLITE_ROW) {
      out->entries = (uint64_t)sqlite3_column_int64(s, 0);
      out->failed_entries = (uint64_t)sqlite3_column_double(s, 1);
      out->bytes = (uint64_t)sqlite3_column_double(s, 2);
      rc = SQLITE_OK;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_OK && rc != SQLITE_DONE)
      st = fail(XPJ_ERR_IO, "cache %s: %s", c->path, rc_str(rc));
  }
  side_close(sfd);
  out->file_bytes = file_size(c->path, "") + file_size(c->path, "-wal");
  unlock(c);
  return st;
}

/* ---- maintenance -------------------------------------------------------- */

xpj_status xpj_cache_list(xpj_cache *c,
                          int (*fn)(void *ud, const xpj_cache_entry *e),
                          void *ud) {
  if (!c || !fn)
    return fail(XPJ_ERR_INVALID, "xpj_cache_list: NULL argument");
  lock_db(c);
  flush_all(c);
  xpj_status st = XPJ_OK;
  tally side; /* the hits waiting in the side file count */
  int sfd = -1;
  side_peek(c, &side, &sfd);
  if (c->db) {
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(c->db,
                                "SELECT " ROW_COLS " FROM entries "
                                "ORDER BY last_used DESC, digest",
                                -1, &s, NULL);
    while (rc == SQLITE_OK && (rc = step_retry(s)) == SQLITE_ROW) {
      xpj_cache_entry e;
      rc = SQLITE_OK;
      if (!read_row(s, false, &e)) {
        xpj_cache_entry_clear(&e);
        rc = SQLITE_NOMEM;
        break;
      }
      e.hits += side_hits_of(&side, e.digest, e.created_ms);
      int stop = fn(ud, &e);
      xpj_cache_entry_clear(&e);
      if (stop)
        break;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_OK && rc != SQLITE_DONE)
      st = fail(XPJ_ERR_IO, "cache %s: %s",
                c->path, rc_str(rc));
  }
  side_close(sfd);
  free(side.hits);
  unlock(c);
  return st;
}

xpj_status xpj_cache_find(xpj_cache *c, const char *prefix,
                          xpj_cache_entry *out) {
  if (!c || !prefix || !out)
    return fail(XPJ_ERR_INVALID, "xpj_cache_find: NULL argument");
  memset(out, 0, sizeof *out);
  size_t n = strlen(prefix);
  if (n < 4 || n > 64 || strspn(prefix, "0123456789abcdef") != n)
    return fail(XPJ_ERR_INVALID,
                "'%s' is not a key digest (4 to 64 lowercase hex digits)",
                prefix);
  lock_db(c);
  flush_all(c);
  xpj_status st = fail(XPJ_ERR_NOT_FOUND, "no entry %s", prefix);
  tally side; /* the hits waiting in the side file count */
  int sfd = -1;
  side_peek(c, &side, &sfd);
  if (c->db) {
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(c->db,
                                "SELECT " ROW_COLS ", data FROM entries "
                                "WHERE substr(digest, 1, ?2) = ?1 LIMIT 2",
                                -1, &s, NULL);
    if (rc == SQLITE_OK) {
      sqlite3_bind_text(s, 1, prefix, -1, SQLITE_STATIC);
      sqlite3_bind_int(s, 2, (int)n);
      rc = step_retry(s);
      if (rc == SQLITE_ROW) {
        if (!read_row(s, true, out)) {
          xpj_cache_entry_clear(out);
          st = fail(XPJ_ERR_NOMEM, "out of memory");
        } else if (!row_intact(c, out, (const char *)sqlite3_column_text(
                                        s, COL_CHECKSUM)) ||
                   !columns_match(out)) {
          st = fail(XPJ_ERR_IO, "entry %.16s is damaged (its key digest, "
                    "checksum or columns do not match); 'cache verify "
                    "--repair' removes it", out->digest);
          xpj_cache_entry_clear(out);
        } else if (step_retry(s) == SQLITE_ROW) {
          xpj_cache_entry_clear(out);
          st = fail(XPJ_ERR_INVALID, "digest prefix %s is ambiguous", prefix);
        } else {
          out->hits += side_hits_of(&side, out->digest, out->created_ms);
          st = XPJ_OK;
        }
      } else if (rc != SQLITE_DONE) {
        st = fail(XPJ_ERR_IO, "cache %s: %s", c->path, rc_str(rc));
      }
    }
    sqlite3_finalize(s);
  }
  side_close(sfd);
  free(side.hits);
  unlock(c);
  return st;
}

static void report(void (*fn)(void *, const char *), void *ud,
                   const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report(void (*fn)(void *, const char *), void *ud,
                   const char *fmt, ...) {
  if (!fn)
    return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fn(ud, msg);
}

/* Whether the hit file named digest (its bytes b, n) is intact: its key
 * text's digest is its name, it names this database file and its
 * checksum is right. */
static bool hit_intact(xpj_cache *c, const char *digest, const uint8_t *b,
                       size_t n) {
  xpj_hit h;
  xpj_hit_db db;
  char hex[65], sum[65];
  if (xpj_hitfile_parse(b, n, &h) != 0 ||
      !xpj_hitfile_db_id(c->path, &db) || h.db.dev != db.dev ||
      h.db.ino != db.ino || h.db.born != db.born)
    return false;
  sha256_hex(h.key, h.key_len, hex);
  char *entry = strndup(h.entry, h.entry_len), *log = strndup(h.log, h.log_len);
  bool ok = entry && log && !strcmp(hex, digest);
  if (ok) {
    hit_sum(c->key, digest, entry, h.local_bytes, h.scratch_bytes, h.data,
            h.size, log, h.created_ms, h.compile_ms, &db, sum);
    ok = !strcmp(sum, h.checksum);
  }
  free(entry);
  free(log);
  return ok;
}

/* verify's word on a hit-file directory (PATH.hits) that is there but
 * refused (xpj_hitdir_open: a link, not a directory, another's, writable
 * by others): no hit file is read or written through it, so the cache
 * works without them, silently but for this. */
static void verify_hits_dir(const xpj_cache *c,
                            void (*fn)(void *, const char *), void *ud) {
  char p[4200], what[160];
  struct stat sb;
  if ((size_t)snprintf(p, sizeof p, "%s.hits", c->path) >= sizeof p ||
      lstat(p, &sb) != 0)
    return; /* none: made by the first write of one */
  if (S_ISLNK(sb.st_mode))
    snprintf(what, sizeof what, "a symbolic link (never followed)");
  else if (!S_ISDIR(sb.st_mode))
    snprintf(what, sizeof what, "not a directory");
  else if (sb.st_uid != geteuid())
    snprintf(what, sizeof what, "owned by uid %u, not by this user",
             (unsigned)sb.st_uid);
  else if (sb.st_mode & 022)
    snprintf(what, sizeof what, "writable by others (mode %04o)",
             (unsigned)(sb.st_mode & 07777));
  else {
    int fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) { /* (made meanwhile, or fine now) */
      close(fd);
      return;
    }
    snprintf(what, sizeof what, "which cannot be opened (%s)",
             strerror(errno));
  }
  report(fn, ud, "hit files: %s is refused, %s: no hit file is read or "
         "written (remove it, or make it a directory of yours that only you "
         "may write)", p, what);
}

/* verify's part for the hit files (user cache, read-write or not): each
 * one intact and the copy of a successful row. A damaged one (or one
 * signed with a key the cache has since replaced) and the copy of a row
 * that is gone (left by a version of xpjit that did not remove it, or by
 * a put that raced an eviction) are reported, not counted: neither is
 * ever served. With repair both go, as do left-over temporary files. */
static void verify_hits(xpj_cache *c, int repair,
                        void (*fn)(void *, const char *), void *ud) {
  int dfd = c->bundle || !c->db ? -1 : hits_dir(c, false);
  DIR *d = xpj_hitdir_list(dfd);
  if (!d) {
    if (dfd < 0 && !c->bundle && c->db)
      verify_hits_dir(c, fn, ud);
    hits_close(dfd);
    return;
  }
  bool rm = repair && c->mode == XPJ_CACHE_MODE_RW;
  sqlite3_stmt *s = NULL;
  sqlite3_prepare_v2(c->db, "SELECT failed FROM entries WHERE digest=?", -1,
                     &s, NULL);
  struct dirent *e;
  while ((e = readdir(d))) {
    const char *name = e->d_name;
    if (!strncmp(name, ".tmp.", 5)) {
      if (rm)
        unlinkat(dfd, name, 0);
      continue;
    }
    if (name[0] == 'a' && strlen(name) == 65) {
      /* an alias: the cache's, and its hit file there */
      char dg[65];
      alias_is is = alias_state(c, dfd, name, dg, NULL, true);
      if (is == ALIAS_FOREIGN || is == ALIAS_DANGLING) {
        /* a directory of that name too (--repair said "(removed)" and
         * left it, to be reported again at every run): removed when
         * empty, else said to be left */
        bool gone = rm && (unlinkat(dfd, name, 0) == 0 ||
                           ((errno == EISDIR || errno == EPERM) &&
                            unlinkat(dfd, name, AT_REMOVEDIR) == 0));
        char left[160] = "";
        if (rm && !gone)
          snprintf(left, sizeof left, " (not removed: %s; remove it by "
                   "hand)", strerror(errno));
        report(fn, ud, "hit file alias %.17s: %s%s", name,
               is == ALIAS_DANGLING ? "its entry is gone"
                                    : "not made for this cache",
               gone ? " (removed)" : left);
      }
      continue;
    }
    if (strlen(name) != 64 || strspn(name, "0123456789abcdef") != 64)
      continue;
    size_t n = 0;
    int64_t mtime;
    char why[512];
    uint8_t *b = xpj_hitfile_read_why(dfd, name, &n, &mtime, why, sizeof why);
    if (!b || !hit_intact(c, name, b, n)) {
      report(fn, ud, "hit file %.16s: %s%s", name,
             b ? "damaged, or not written for this cache file" : why,
             rm ? " (removed)" : "");
    } else {
      int rc = SQLITE_ERROR;
      if (s) {
        sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        rc = sqlite3_step(s);
      }
      if (rc == SQLITE_ROW && sqlite3_column_int(s, 0) == 0) {
        free(b);
        sqlite3_reset(s);
        continue; /* the copy of its row */
      }
      if (s)
        sqlite3_reset(s);
      report(fn, ud, "hit file %.16s: its entry is gone%s", name,
             rm ? " (removed)" : "");
    }
    free(b);
    if (rm)
      unlinkat(dfd, name, 0);
  }
  sqlite3_finalize(s);
  closedir(d);
  hits_close(dfd);
}

/* verify's first part: the file as a whole. Returns 1 if it is bad. */
static uint64_t verify_file(xpj_cache *c, bool repair,
                            void (*fn)(void *, const char *), void *ud) {
  if (*c->replaced) { /* found damaged and replaced by this handle */
    report(fn, ud, "file: %s", c->replaced);
    *c->replaced = 0;
    return 1;
  }
  if (!c->db) {
    if (!*c->problem)
      return 0; /* off by request, or nothing there */
    report(fn, ud, "file: %s", c->problem);
    return 1;
  }
  uint64_t bad = 0;
  sqlite3_stmt *s = NULL;
  int rc = sqlite3_prepare_v2(c->db, "PRAGMA integrity_check", -1, &s, NULL);
  while (rc == SQLITE_OK && (rc = step_retry(s)) == SQLITE_ROW) {
    rc = SQLITE_OK;
    const char *t = (const char *)sqlite3_column_text(s, 0);
    if (t && strcmp(t, "ok") != 0) {
      report(fn, ud, "file: %s", t);
      bad = 1;
    }
  }
  sqlite3_finalize(s);
  if (rc != SQLITE_OK && rc != SQLITE_DONE) {
    report(fn, ud, "file: %s", rc_str(rc));
    bad = 1;
  }
  if (bad && repair && c->mode == XPJ_CACHE_MODE_RW && !c->bundle) {
    start_over(c, SQLITE_CORRUPT);
    *c->replaced = 0; /* reported above */
  }
  return bad;
}

xpj_status xpj_cache_verify(xpj_cache *c, int repair,
                            void (*fn)(void *ud, const char *problem),
                            void *ud, uint64_t *checked, uint64_t *bad) {
  if (!c)
    return fail(XPJ_ERR_INVALID, "xpj_cache_verify: NULL argument");
  uint64_t nchk = 0, nbad = 0;
  lock_db(c);
  key_renewed(c); /* a long-lived handle judges by the key in use */
  /* the rows this handle has yet to write are checked too; a repair is
   * a write: the side file folded */
  flush_all_as(c, repair != 0);
  nbad = verify_file(c, repair, fn, ud);
  if (c->db) {
    sqlite3_stmt *s = NULL;
    char (*drop)[65] = NULL;
    size_t ndrop = 0;
    int rc = sqlite3_prepare_v2(c->db, "SELECT " ROW_COLS ", data FROM entries",
                                -1, &s, NULL);
    while (rc == SQLITE_OK && (rc = step_retry(s)) == SQLITE_ROW) {
      rc = SQLITE_OK;
      xpj_cache_entry e;
      nchk++;
      bool read = read_row(s, true, &e),
           intact = read && row_intact(c, &e, (const char *)sqlite3_column_text(
                                                  s, COL_CHECKSUM)),
           ok = intact && columns_match(&e);
      if (!ok) {
        nbad++;
        if (intact) /* (its columns are not to be believed: not shown) */
          report(fn, ud, "entry %.16s: its code, kernel, dtypes, rank, "
                 "target, options or versions column is not its key's",
                 e.digest);
        else
          report(fn, ud, "entry %.16s (%s %s): key digest or checksum does "
                 "not match (damaged, or not written through this %s)",
                 e.digest, e.kernel ? e.kernel : "?", e.dtypes ? e.dtypes : "",
                 c->bundle ? "bundle" : "cache");
        char (*nd)[65] = realloc(drop, (ndrop + 1) * sizeof *drop);
        if (nd) {
          drop = nd;
          memcpy(drop[ndrop++], e.digest, 65);
        }
      }
      xpj_cache_entry_clear(&e);
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_OK && rc != SQLITE_DONE) {
      report(fn, ud, "reading entries: %s", rc_str(rc));
      if (!nbad)
        nbad = 1;
    }
    if (repair && c->mode == XPJ_CACHE_MODE_RW)
      for (size_t i = 0; i < ndrop; i++)
        delete_row(c, drop[i]);
    free(drop);
    verify_hits(c, repair, fn, ud);
  }
  unlock(c);
  if (checked)
    *checked = nchk;
  if (bad)
    *bad = nbad;
  return XPJ_OK;
}

size_t xpj_cache_problem(xpj_cache *c, char *buf, size_t size) {
  if (!c) {
    if (buf && size)
      *buf = 0;
    return 0;
  }
  lock_db(c);
  size_t n = (size_t)snprintf(buf, buf ? size : 0, "%s", c->problem);
  unlock(c);
  return n;
}

static xpj_status need_rw(xpj_cache *c, const char *what) {
  /* the problem names the cache and says why (it was quoted inside
   * "the cache X is not writable (read-only: cache X cannot be written
   * (...))": an outside probe) */
  if ((!c->db || c->mode != XPJ_CACHE_MODE_RW) && *c->problem)
    return fail(XPJ_ERR_INVALID, "%s: %s", what, c->problem);
  if (!c->db || c->mode != XPJ_CACHE_MODE_RW)
    return fail(XPJ_ERR_INVALID, "%s: the cache %s is not writable (%s)",
                what, c->path,
                c->mode == XPJ_CACHE_MODE_OFF ? "off" : "read-only");
  return XPJ_OK;
}

xpj_status xpj_cache_prune(xpj_cache *c, uint64_t max_size,
                           int64_t older_than_ms, uint64_t *removed,
                           uint64_t *freed) {
  if (!c)
    return fail(XPJ_ERR_INVALID, "xpj_cache_prune: NULL argument");
  uint64_t nrem = 0, nfree = 0;
  lock_db(c);
  xpj_status st = need_rw(c, "prune");
  if (st == XPJ_OK) {
    /* what waits goes in first (the side file folded too), then the
     * rows go */
    int rc = begin(c);
    if (rc == SQLITE_OK)
      rc = flush_deferred(c);
    if (rc == SQLITE_OK) {
      sqlite3_stmt *s = NULL;
      rc = sqlite3_prepare_v2(c->db,
                              "DELETE FROM entries WHERE last_used < ?1 "
                              "OR (expires != 0 AND expires <= ?2) "
                              "RETURNING size",
                              -1, &s, NULL);
      if (rc == SQLITE_OK) {
        /* a row's last_used may be up to USE_GRANULARITY_MS older than its
         * last use (hits write it no more often): only a row whose stored
         * time is that much older still is certainly unused for
         * older_than_ms */
        int64_t now = now_ms(), cut = INT64_MIN;
        if (older_than_ms > 0 && older_than_ms < now)
          cut = now - older_than_ms - USE_GRANULARITY_MS;
        sqlite3_bind_int64(s, 1, cut);
        sqlite3_bind_int64(s, 2, now);
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
          nrem++;
          nfree += (uint64_t)sqlite3_column_int64(s, 0);
        }
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
      }
      sqlite3_finalize(s);
    }
    if (rc == SQLITE_OK) /* summed again by evict_to (it may be off) */
      rc = sqlite3_exec(c->db, "DELETE FROM stats WHERE name='" TOTAL_SIZE
                        "'", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
      rc = evict_to(c, max_size ? max_size : c->max_size, &nrem, &nfree);
    if (rc == SQLITE_OK)
      flush_pending(c);
    rc = finish(c, rc);
    if (rc != SQLITE_OK)
      st = fail(XPJ_ERR_IO, "prune %s: %s", c->path, rc_str(rc));
  }
  int dfd = st == XPJ_OK && !c->bundle && !c->no_hits && c->has_key
                ? hits_dir(c, false)
                : -1;
  if (dfd >= 0) /* the aliases of what went, and of old builds */
    sweep_aliases(c, dfd);
  hits_close(dfd);
  unlock(c);
  if (removed)
    *removed = nrem;
  if (freed)
    *freed = nfree;
  return st;
}

xpj_status xpj_cache_clear(xpj_cache *c) {
  if (!c)
    return fail(XPJ_ERR_INVALID, "xpj_cache_clear: NULL argument");
  lock_db(c);
  /* the deferred work goes too: puts and uses of rows that are gone */
  drop_later(c, NULL);
  c->ntouched = 0;
  xpj_status st = need_rw(c, "clear");
  if (st == XPJ_OK) {
    int rc = begin(c);
    if (rc == SQLITE_OK)
      rc = sqlite3_exec(c->db, "DELETE FROM entries; DELETE FROM stats;",
                        NULL, NULL, NULL);
    if (rc == SQLITE_OK) { /* and any hit file whose row went another way */
      hits_wipe(c);
      flight_wipe(c);
    }
    rc = finish(c, rc);
    memset(&c->pending, 0, sizeof c->pending);
    if (is_damage(rc)) /* a new, empty file clears it just as well */
      rc = start_over(c, rc);
    if (rc != SQLITE_OK) {
      st = fail(XPJ_ERR_IO, "clear %s: %s", c->path, rc_str(rc));
    } else {
      /* the counters and hits waiting in the side file go too */
      int sfd = side_open(c, O_RDWR, LOCK_EX, true);
      if (sfd >= 0 && ftruncate(sfd, 0) != 0) {
        /* folded into the cleared tables by the next write */
      }
      side_close(sfd);
      /* give the space back; fails harmlessly while others read */
      sqlite3_exec(c->db, "VACUUM", NULL, NULL, NULL);
    }
  }
  unlock(c);
  return st;
}

xpj_status xpj_cache_zero_stats(xpj_cache *c) {
  if (!c)
    return fail(XPJ_ERR_INVALID, "xpj_cache_zero_stats: NULL argument");
  lock_db(c);
  xpj_status st = c->bundle ? fail(XPJ_ERR_INVALID, "zero the statistics: "
                                   "%s is a bundle (it keeps none)", c->path)
                            : need_rw(c, "zero the statistics");
  if (st == XPJ_OK) {
    /* what waits goes in first: the puts and uses to their rows, the side
     * file's hits too; its counters and this handle's with the rest */
    int rc = begin(c);
    if (rc == SQLITE_OK)
      rc = flush_deferred(c);
    if (rc == SQLITE_OK) /* every counter; the kept total is no counter */
      rc = sqlite3_exec(c->db, "DELETE FROM stats WHERE name <> '" TOTAL_SIZE
                        "'", NULL, NULL, NULL);
    rc = finish(c, rc);
    if (rc == SQLITE_OK)
      memset(&c->pending, 0, sizeof c->pending);
    else
      st = fail(XPJ_ERR_IO, "zero the statistics of %s: %s", c->path,
                rc_str(rc));
  }
  unlock(c);
  return st;
}

xpj_status xpj_cache_set_meta(xpj_cache *c, const char *name,
                              const char *value) {
  if (!c || !name || !value)
    return fail(XPJ_ERR_INVALID, "xpj_cache_set_meta: NULL argument");
  /* the file's own, written when it was made: 'kind' says whether it is a
   * cache or a bundle (a cache set to "bundle" was refused from then on
   * as a user's cache: found by a helper's probe) */
  if (!strcmp(name, "kind") || !strcmp(name, "created"))
    return fail(XPJ_ERR_INVALID, "xpj_cache_set_meta: '%s' is the file's "
                "own (written when it was made), not set by callers", name);
  lock_db(c);
  xpj_status st = need_rw(c, "set meta");
  if (st == XPJ_OK) {
    sqlite3_stmt *s = NULL;
    int rc = begin(c);
    if (rc == SQLITE_OK)
      rc = flush_deferred(c);
    if (rc == SQLITE_OK)
      rc = sqlite3_prepare_v2(c->db, "INSERT OR REPLACE INTO meta VALUES(?,?)",
                              -1, &s, NULL);
    if (rc == SQLITE_OK) {
      sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
      sqlite3_bind_text(s, 2, value, -1, SQLITE_STATIC);
      rc = sqlite3_step(s);
    }
    sqlite3_finalize(s);
    if (rc == SQLITE_DONE)
      flush_pending(c);
    rc = finish(c, rc);
    if (rc != SQLITE_OK)
      st = fail(XPJ_ERR_IO, "%s: %s", c->path, rc_str(rc));
  }
  unlock(c);
  return st;
}

xpj_status xpj_cache_get_meta(xpj_cache *c, const char *name, char **value) {
  if (!c || !name || !value)
    return fail(XPJ_ERR_INVALID, "xpj_cache_get_meta: NULL argument");
  *value = NULL;
  lock_db(c);
  xpj_status st = fail(XPJ_ERR_NOT_FOUND, "no meta '%s'", name);
  sqlite3_stmt *s = NULL;
  if (c->db &&
      sqlite3_prepare_v2(c->db, "SELECT value FROM meta WHERE name=?", -1, &s,
                         NULL) == SQLITE_OK) {
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    if (step_retry(s) == SQLITE_ROW) {
      *value = col_text(s, 0);
      st = *value ? XPJ_OK : fail(XPJ_ERR_NOMEM, "out of memory");
    }
  }
  sqlite3_finalize(s);
  unlock(c);
  return st;
}

static char *join_distinct(sqlite3 *db, const char *sql) {
  sqlite3_stmt *s = NULL;
  size_t len = 0, cap = 64;
  char *out = calloc(1, cap);
  if (!out || sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) {
    sqlite3_finalize(s);
    return out;
  }
  while (step_retry(s) == SQLITE_ROW) {
    const char *t = (const char *)sqlite3_column_text(s, 0);
    size_t n = t ? strlen(t) : 0;
    if (len + n + 2 > cap) {
      cap = (len + n + 2) * 2;
      char *no = realloc(out, cap);
      if (!no)
        break;
      out = no;
    }
    len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? "\n" : "",
                            t ? t : "");
  }
  sqlite3_finalize(s);
  return out;
}

xpj_status xpj_cache_targets(xpj_cache *c, char **targets, char **versions) {
  if (!c || !targets || !versions)
    return fail(XPJ_ERR_INVALID, "xpj_cache_targets: NULL argument");
  lock_db(c);
  *targets = c->db ? join_distinct(c->db, "SELECT DISTINCT target FROM "
                                          "entries ORDER BY 1")
                   : calloc(1, 1);
  *versions = c->db ? join_distinct(c->db, "SELECT DISTINCT versions FROM "
                                           "entries ORDER BY 1")
                    : calloc(1, 1);
  unlock(c);
  if (!*targets || !*versions) {
    free(*targets);
    free(*versions);
    *targets = *versions = NULL;
    return fail(XPJ_ERR_NOMEM, "out of memory");
  }
  return XPJ_OK;
}

xpj_status xpj_cache_finish_bundle(xpj_cache *c) {
  if (!c)
    return fail(XPJ_ERR_INVALID, "xpj_cache_finish_bundle: NULL argument");
  lock_db(c);
  xpj_status st = need_rw(c, "finish bundle");
  if (st == XPJ_OK) {
    int rc = exec_retry(c->db, "PRAGMA journal_mode=DELETE");
    if (rc == SQLITE_OK)
      rc = exec_retry(c->db, "UPDATE entries SET hits=0; VACUUM");
    if (rc != SQLITE_OK)
      st = fail(XPJ_ERR_IO, "bundle %s: %s", c->path, rc_str(rc));
  }
  unlock(c);
  return st;
}

/* An export builds its bundle in a directory of its own beside the
 * output (made by mkdtemp: 0700, a name nobody can guess), renamed into
 * place when it is whole: SQLite opens the bundle's journal by name,
 * without O_EXCL, and plays back a "hot" one it finds; in a directory
 * others may write to (/tmp), another user could plant one between two of
 * the export's transactions and have SQLite write their rows, their code,
 * into a bundle we sign (found by an outside probe). In a directory only
 * we may write to, nobody plants anything. (Its name was PATH.tmp.PID:
 * another user who planted something there in /tmp stopped the export,
 * and a long PATH made it longer than a file name may be.) */
static void export_dir_empty(const char *dir) {
  static const char *const files[] = {"", "-journal"}; /* (no WAL) */
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char p[4400];
    snprintf(p, sizeof p, "%s/" XPJ_CACHE_EXPORT_TEMP "%s", dir, files[i]);
    unlink(p);
  }
}

static void export_dir_remove(const char *dir) {
  export_dir_empty(dir);
  rmdir(dir);
}

/* dir, given for an export: a directory of this user's that nobody else
 * may enter (its old bundle and journal, if any, removed). */
static xpj_status export_dir_check(const char *dir) {
  struct stat sb;
  if (lstat(dir, &sb) != 0)
    return fail(XPJ_ERR_IO, "the export's directory %s: %s", dir,
                strerror(errno));
  if (!S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 077))
    return fail(XPJ_ERR_INVALID, "the export's directory %s is not a "
                "private directory of this user's (mode 0700): not used",
                dir);
  export_dir_empty(dir);
  return XPJ_OK;
}

xpj_status xpj_cache_export_template(const char *path, char *out,
                                     size_t size) {
  if (!path || !out)
    return XPJ_ERR_INVALID;
  const char *slash = strrchr(path, '/');
  int n = slash ? snprintf(out, size, "%.*s/.xpjit-export-XXXXXX",
                           (int)(slash - path), path)
                : snprintf(out, size, ".xpjit-export-XXXXXX");
  return n > 0 && (size_t)n < size ? XPJ_OK : XPJ_ERR_INVALID;
}

static xpj_status export_into(xpj_cache *c, const char *path,
                              const char *dir, uint64_t *n);

xpj_status xpj_cache_export(xpj_cache *c, const char *path, uint64_t *n) {
  if (!c || !path)
    return fail(XPJ_ERR_INVALID, "xpj_cache_export: NULL argument");
  if (n)
    *n = 0;
  char dir[4200];
  if (xpj_cache_export_template(path, dir, sizeof dir) != XPJ_OK)
    return fail(XPJ_ERR_INVALID, "%s: the name is too long", path);
  if (!mkdtemp(dir))
    return fail(XPJ_ERR_IO, "cannot make a directory for the export "
                "beside %s: %s", path, strerror(errno));
  return export_into(c, path, dir, n);
}

xpj_status xpj_cache_export_in(xpj_cache *c, const char *path,
                               const char *dir, uint64_t *n) {
  if (!c || !path || !dir)
    return fail(XPJ_ERR_INVALID, "xpj_cache_export_in: NULL argument");
  if (n)
    *n = 0;
  xpj_status st = export_dir_check(dir);
  return st == XPJ_OK ? export_into(c, path, dir, n) : st;
}

/* The export into dir (private, ours), which it removes. */
static xpj_status export_into(xpj_cache *c, const char *path,
                              const char *dir, uint64_t *n) {
  /* the bundle is renamed into place: only over nothing or a regular
   * file, never over a device, a FIFO or a link (as root, -o /dev/null
   * replaced the device node) */
  struct stat sb;
  xpj_status st = XPJ_OK;
  if (lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
    st = fail(XPJ_ERR_INVALID, "%s exists and is not a regular file (a "
              "link, a device, a FIFO, a directory): not replaced", path);
  else if (xpj_cache_owns_file(c->path, path))
    st = fail(XPJ_ERR_INVALID, "%s is the cache's own file: not "
              "replaced by a bundle of it", path);
  char tmp[4300];
  if (st == XPJ_OK &&
      (size_t)snprintf(tmp, sizeof tmp, "%s/" XPJ_CACHE_EXPORT_TEMP, dir) >=
          sizeof tmp)
    st = fail(XPJ_ERR_INVALID, "%s: the name is too long", dir);
  if (st != XPJ_OK) {
    export_dir_remove(dir);
    return st;
  }
  xpj_cache_config bc = {.path = tmp, .mode = XPJ_CACHE_MODE_RW, .bundle = 1,
                         .warn = c->warn, .warn_ud = c->warn_ud};
  xpj_cache *b = NULL;
  st = xpj_cache_open(&bc, &b);
  if (st != XPJ_OK) {
    export_dir_remove(dir);
    return st;
  }
  lock_db(c);
  key_renewed(c); /* rows are judged by the key in use */
  flush_all(c);
  if (!c->db)
    st = fail(XPJ_ERR_INVALID, "the cache %s is off", c->path);
  sqlite3_stmt *sel = NULL;
  int rc = SQLITE_OK;
  if (st == XPJ_OK)
    rc = sqlite3_prepare_v2(c->db,
                            "SELECT " ROW_COLS ", data FROM entries "
                            "WHERE failed = 0 AND target NOT LIKE 'native:%'",
                            -1, &sel, NULL);
  uint64_t count = 0;
  /* every row in one transaction of the new bundle's (it was one a row:
   * with its commit's syncs 2,000 rows took 3 to 33 s, 20,000 83 s; now
   * 0.2-0.4 s and 2.4 s). Nothing is lost by that: the bundle is made in
   * its private directory and renamed into place only once it is whole,
   * so a failure or a crash part of the way never leaves part of a
   * bundle at path, and one transaction leaves nothing of it at all. */
  pthread_mutex_lock(&b->mu);
  xpj_l2_fsize_block(); /* (the bundle's writes: c's unlock comes first) */
  if (st == XPJ_OK && rc == SQLITE_OK) {
    int r = begin(b);
    if (r != SQLITE_OK)
      st = fail(XPJ_ERR_IO, "writing %s: %s", tmp, rc_str(r));
  }
  while (st == XPJ_OK && rc == SQLITE_OK &&
         (rc = step_retry(sel)) == SQLITE_ROW) {
    rc = SQLITE_OK;
    xpj_cache_entry e;
    if (!read_row(sel, true, &e) ||
        !row_intact(c, &e,
                    (const char *)sqlite3_column_text(sel, COL_CHECKSUM)) ||
        !columns_match(&e) || expired(&e)) {
      xpj_cache_entry_clear(&e);
      continue; /* never export a damaged row, nor one of no more use */
    }
    xpj_cache_key k = {e.code, e.kernel, e.dtypes, e.ndim,
                       e.target, e.options, e.versions};
    xpj_cache_value v = {0, e.data, e.size, e.entry, e.log, e.local_bytes,
                         e.scratch_bytes, e.compile_ms, e.expires_ms};
    char sum[65]; /* a bundle's: plain SHA-256 */
    row_checksum(NULL, e.digest, 0, e.entry, e.local_bytes, e.scratch_bytes,
                 e.data, e.size, e.log, e.expires_ms, sum);
    int r = insert(b, &k, e.digest, e.key, &v, sum, now_ms());
    if (r != SQLITE_OK)
      st = fail(XPJ_ERR_IO, "writing %s: %s", tmp, rc_str(r));
    else
      count++;
    xpj_cache_entry_clear(&e);
  }
  sqlite3_finalize(sel);
  unlock(c);
  if (st == XPJ_OK && rc != SQLITE_OK && rc != SQLITE_DONE)
    st = fail(XPJ_ERR_IO, "reading %s: %s", c->path, rc_str(rc));
  if (b->db && !sqlite3_get_autocommit(b->db)) { /* begun: committed whole */
    int r = finish(b, st == XPJ_OK ? SQLITE_OK : SQLITE_ERROR);
    if (st == XPJ_OK && r != SQLITE_OK)
      st = fail(XPJ_ERR_IO, "writing %s: %s", tmp, rc_str(r));
  }
  xpj_l2_fsize_restore();
  pthread_mutex_unlock(&b->mu);
  if (st == XPJ_OK) { /* self-describing: what it holds, for whom */
    char *targets = NULL, *versions = NULL;
    st = xpj_cache_targets(b, &targets, &versions);
    if (st == XPJ_OK)
      st = xpj_cache_set_meta(b, "versions", versions);
    if (st == XPJ_OK)
      st = xpj_cache_set_meta(b, "targets", targets);
    free(targets);
    free(versions);
  }
  if (st == XPJ_OK)
    st = xpj_cache_finish_bundle(b);
  xpj_cache_close(b);
  if (st == XPJ_OK && rename(tmp, path) != 0)
    st = fail(XPJ_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  export_dir_remove(dir);
  if (st == XPJ_OK && n)
    *n = count;
  return st;
}

xpj_status xpj_cache_import(xpj_cache *c, const char *bundle_path,
                            uint64_t *imported, uint64_t *skipped) {
  uint64_t present = 0, damaged = 0;
  xpj_status st =
      xpj_cache_import_counted(c, bundle_path, imported, &present, &damaged);
  if (skipped)
    *skipped = present + damaged;
  return st;
}

xpj_status xpj_cache_import_counted(xpj_cache *c, const char *bundle_path,
                                    uint64_t *imported, uint64_t *present,
                                    uint64_t *damaged) {
  uint64_t nimp = 0, npresent = 0, ndamaged = 0;
  if (imported)
    *imported = 0;
  if (present)
    *present = 0;
  if (damaged)
    *damaged = 0;
  if (!c || !bundle_path)
    return fail(XPJ_ERR_INVALID, "xpj_cache_import: NULL argument");
  if (xpj_cache_owns_file(c->path, bundle_path))
    return fail(XPJ_ERR_INVALID, "%s is the cache's own file, not a bundle "
                "to import into it", bundle_path);
  xpj_cache_config bc = {.path = bundle_path, .bundle = 1,
                         .warn = c->warn, .warn_ud = c->warn_ud};
  xpj_cache *b = NULL;
  xpj_status st = xpj_cache_open(&bc, &b);
  if (st != XPJ_OK)
    return st;
  lock_db(c);
  key_renewed(c); /* its rows signed with the key the others use */
  st = need_rw(c, "import");
  if (st == XPJ_OK) /* a write: the side file folded (even with no row) */
    flush_all_as(c, true);
  sqlite3_stmt *sel = NULL;
  int rc = SQLITE_OK;
  if (st == XPJ_OK)
    rc = sqlite3_prepare_v2(b->db, "SELECT " ROW_COLS ", data FROM entries",
                            -1, &sel, NULL);
  bool in_txn = false;
  unsigned batch = 0;
  uint64_t batch_imp = 0; /* imported once its transaction commits */
  while (st == XPJ_OK && rc == SQLITE_OK &&
         (rc = sqlite3_step(sel)) == SQLITE_ROW) {
    rc = SQLITE_OK;
    xpj_cache_entry e;
    const char *sum = (const char *)sqlite3_column_text(sel, COL_CHECKSUM);
    if (!read_row(sel, true, &e) || !row_intact(b, &e, sum) ||
        !columns_match(&e)) {
      ndamaged++;
      warnf(c, "bundle %s: entry %.16s is damaged; not imported",
            bundle_path, e.digest);
      xpj_cache_entry_clear(&e);
      continue;
    }
    xpj_cache_key k = {e.code, e.kernel, e.dtypes, e.ndim,
                       e.target, e.options, e.versions};
    xpj_cache_value v = {e.failed, e.data, e.size, e.entry, e.log,
                         e.local_bytes, e.scratch_bytes, e.compile_ms,
                         e.expires_ms};
    if (!in_txn) {
      int r = begin(c);
      if (r != SQLITE_OK) {
        st = fail(XPJ_ERR_IO, "import into %s: %s", c->path, rc_str(r));
        xpj_cache_entry_clear(&e);
        break;
      }
      in_txn = true;
    }
    int r;
    sqlite3_stmt *ex = NULL;
    bool there = false;
    if (sqlite3_prepare_v2(c->db,
                           "SELECT " ROW_COLS ", data FROM entries WHERE "
                           "digest=?",
                           -1, &ex, NULL) == SQLITE_OK) {
      sqlite3_bind_text(ex, 1, e.digest, -1, SQLITE_STATIC);
      if (sqlite3_step(ex) == SQLITE_ROW) {
        /* kept only when it is intact (its checksum right under the
         * cache's key) and its columns are its key's: one that is not
         * (damaged, signed with a key since replaced) would be dropped
         * at its first lookup, so the bundle's row replaces it (insert) */
        xpj_cache_entry old;
        there = read_row(ex, true, &old) &&
                row_intact(c, &old, (const char *)sqlite3_column_text(
                                        ex, COL_CHECKSUM)) &&
                columns_match(&old);
        xpj_cache_entry_clear(&old);
      }
    }
    sqlite3_finalize(ex);
    if (there) {
      npresent++;
    } else { /* signed again, with the cache's key */
      char mine[65];
      row_checksum(signing_key(c), e.digest, e.failed, e.entry,
                   e.local_bytes, e.scratch_bytes, e.data, e.size, e.log,
                   e.expires_ms, mine);
      r = insert(c, &k, e.digest, e.key, &v, mine, now_ms());
      if (r != SQLITE_OK)
        st = fail(XPJ_ERR_IO, "import into %s: %s", c->path, rc_str(r));
      else
        batch_imp++;
    }
    xpj_cache_entry_clear(&e);
    if (in_txn && ++batch == 64) { /* short transactions */
      if (st == XPJ_OK)
        evict_to(c, c->max_size, NULL, NULL);
      r = finish(c, st == XPJ_OK ? SQLITE_OK : SQLITE_ERROR);
      in_txn = false;
      batch = 0;
      if (st == XPJ_OK && r != SQLITE_OK)
        st = fail(XPJ_ERR_IO, "import into %s: %s", c->path, rc_str(r));
      nimp += st == XPJ_OK ? batch_imp : 0; /* (else rolled back) */
      batch_imp = 0;
    }
  }
  if (st == XPJ_OK && rc != SQLITE_OK && rc != SQLITE_DONE)
    st = fail(XPJ_ERR_IO, "reading bundle %s: %s", bundle_path, rc_str(rc));
  if (in_txn) {
    if (st == XPJ_OK)
      evict_to(c, c->max_size, NULL, NULL);
    int r = finish(c, st == XPJ_OK ? SQLITE_OK : SQLITE_ERROR);
    if (st == XPJ_OK && r != SQLITE_OK)
      st = fail(XPJ_ERR_IO, "import into %s: %s", c->path, rc_str(r));
    nimp += st == XPJ_OK ? batch_imp : 0;
  }
  sqlite3_finalize(sel);
  unlock(c);
  xpj_cache_close(b);
  if (imported)
    *imported = nimp;
  if (present)
    *present = npresent;
  if (damaged)
    *damaged = ndamaged;
  return st;
}

/* ---- parsing sizes and durations ----------------------------------------- */

xpj_status xpj_cache_parse_size(const char *s, uint64_t *out) {
  if (!s || !out)
    return fail(XPJ_ERR_INVALID, "xpj_cache_parse_size: NULL argument");
  const char *p = s;
  uint64_t v = 0;
  if (*p < '0' || *p > '9')
    return fail(XPJ_ERR_INVALID, "size '%s': expected a number", s);
  while (*p >= '0' && *p <= '9') {
    if (v > (UINT64_MAX - 9) / 10)
      return fail(XPJ_ERR_INVALID, "size '%s' is too large", s);
    v = v * 10 + (uint64_t)(*p++ - '0');
  }
  unsigned shift = 0;
  switch (*p) {
  case 0: break;
  case 'k': case 'K': shift = 10; break;
  case 'm': case 'M': shift = 20; break;
  case 'g': case 'G': shift = 30; break;
  case 't': case 'T': shift = 40; break;
  default:
    return fail(XPJ_ERR_INVALID, "size '%s': unknown unit (K, M, G, T)", s);
  }
  if (*p) {
    p++;
    if ((*p == 'i' && p[1] == 'B' && !p[2]) || (*p == 'B' && !p[1]))
      p += strlen(p);
  }
  if (*p)
    return fail(XPJ_ERR_INVALID, "size '%s': unexpected '%s'", s, p);
  if (shift && v > (UINT64_MAX >> shift))
    return fail(XPJ_ERR_INVALID, "size '%s' is too large", s);
  *out = v << shift;
  return XPJ_OK;
}

xpj_status xpj_cache_parse_duration(const char *s, int64_t *out_ms) {
  if (!s || !out_ms)
    return fail(XPJ_ERR_INVALID, "xpj_cache_parse_duration: NULL argument");
  const char *p = s;
  int64_t v = 0;
  if (*p < '0' || *p > '9')
    return fail(XPJ_ERR_INVALID, "duration '%s': expected a number", s);
  while (*p >= '0' && *p <= '9') {
    if (v > 1000000000000LL)
      return fail(XPJ_ERR_INVALID, "duration '%s' is too long", s);
    v = v * 10 + (*p++ - '0');
  }
  int64_t unit = 1000;
  if (p[0] == 'm' && p[1] == 's') { /* milliseconds */
    unit = 1;
    p++;
  }
  switch (unit == 1 ? 's' : *p) {
  case 0: case 's': break;
  case 'm': unit = 60 * 1000LL; break;
  case 'h': unit = 3600 * 1000LL; break;
  case 'd': unit = 86400 * 1000LL; break;
  case 'w': unit = 7 * 86400 * 1000LL; break;
  default:
    return fail(XPJ_ERR_INVALID,
                "duration '%s': unknown unit (ms, s, m, h, d, w)", s);
  }
  if (*p && p[1])
    return fail(XPJ_ERR_INVALID, "duration '%s': unexpected '%s'", s, p + 1);
  if (v > INT64_MAX / unit)
    return fail(XPJ_ERR_INVALID, "duration '%s' is too long", s);
  *out_ms = v * unit;
  return XPJ_OK;
}
