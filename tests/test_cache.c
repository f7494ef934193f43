/* test_cache.c - the compile cache's second level (include/xpjit_cache.h):
 * round trips and statistics, keys (every component counts, forged rows
 * miss), corruption of rows and of whole files (recovered with a warning),
 * degraded modes (no directory, read-only, disk full), LRU eviction and
 * pruning, many processes and threads sharing one database, processes
 * killed while writing, bundles (export, open, import, damaged rows), and
 * the maintenance calls and parsers. Every test works in its own temporary
 * directory and records warnings through the warn callback, so nothing is
 * printed and a test can assert that a warning was (or was not) given. */
#define _GNU_SOURCE /* memmem */
#include "procutil.h" /* rm_tree, end_escaped_child */
#include "testutil.h"
#include "xpjit_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- fixture: a temporary directory and a warning log ------------------ */

typedef struct wlog {
  int n;
  char text[4096]; /* the messages, one a line (truncated) */
} wlog;

static void rec_warn(void *ud, const char *msg) {
  wlog *w = ud;
  w->n++;
  size_t len = strlen(w->text);
  if (len + 2 < sizeof w->text)
    snprintf(w->text + len, sizeof w->text - len, "%s\n", msg);
}

typedef struct fx {
  char dir[64];
  char path[128]; /* DIR/cache.db */
  wlog w;
} fx;

static int fx_setup(void **state) {
  end_escaped_child(); /* a forked child back in cmocka's runner */
  fx *f = calloc(1, sizeof *f);
  if (!f)
    return -1;
  snprintf(f->dir, sizeof f->dir, "/tmp/xpjit-cache-test-XXXXXX");
  if (!mkdtemp(f->dir)) {
    free(f);
    return -1;
  }
  snprintf(f->path, sizeof f->path, "%s/cache.db", f->dir);
  *state = f;
  return 0;
}

static int fx_teardown(void **state) {
  end_escaped_child(); /* not the parent's directory */
  fx *f = *state;
  rm_tree(f->dir);
  free(f);
  return 0;
}

static xpj_cache *open_cache(wlog *w, const char *path, xpj_cache_mode mode,
                             uint64_t max_size) {
  xpj_cache_config cfg = {.path = path,
                          .mode = mode,
                          .max_size = max_size,
                          .warn = rec_warn,
                          .warn_ud = w};
  xpj_cache *c = NULL;
  assert_int_equal(xpj_cache_open(&cfg, &c), XPJ_OK);
  assert_non_null(c);
  return c;
}

#define GiB (1ull << 30)

#define assert_warned(w, s)                                                    \
  do {                                                                         \
    if (!strstr((w)->text, (s)))                                               \
      fail_msg("warnings \"%s\" lack \"%s\"", (w)->text, (s));                 \
  } while (0)

#define assert_no_warning(w)                                                   \
  do {                                                                         \
    if ((w)->n)                                                                \
      fail_msg("unexpected warning(s): %s", (w)->text);                        \
  } while (0)

/* A check that once found a bug in cache/cache.c (now fixed): it fails
 * the test with the reason. */
#define KNOWN_BUG_FIXED(cond, ...)                                             \
  do {                                                                         \
    if (cond)                                                                  \
      fail_msg(__VA_ARGS__);                                                   \
  } while (0)

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(unsigned ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static bool exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

static bool exists2(const char *path, const char *suffix) {
  char p[512];
  snprintf(p, sizeof p, "%s%s", path, suffix);
  return exists(p);
}

static off_t file_len(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? sb.st_size : -1;
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *fp = fopen(path, "wb");
  assert_non_null(fp);
  if (n)
    assert_int_equal(fwrite(data, 1, n, fp), n);
  assert_int_equal(fclose(fp), 0);
}

static uint8_t *read_all(const char *path, size_t *n) {
  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  fseek(fp, 0, SEEK_END);
  long len = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  uint8_t *b = malloc((size_t)len + 1);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, (size_t)len, fp), (size_t)len);
  fclose(fp);
  *n = (size_t)len;
  return b;
}

/* ---- keys and values: deterministic functions of an index ---------------- */

typedef struct tkey {
  char code[80], kernel[32], dtypes[32], target[40], options[16], versions[48];
  xpj_cache_key k;
} tkey;

static const xpj_cache_key *key_of(tkey *t, unsigned i) {
  snprintf(t->code, sizeof t->code, "%08x%056x", i * 2654435761u, i);
  snprintf(t->kernel, sizeof t->kernel, "k%u", i);
  snprintf(t->dtypes, sizeof t->dtypes, "T=f32,U=i64");
  snprintf(t->target, sizeof t->target, "cpu:x86_64-znver4");
  snprintf(t->options, sizeof t->options, "O2");
  snprintf(t->versions, sizeof t->versions, "xpjit=0.1.0;llvm=22.1.8;abi=3");
  t->k = (xpj_cache_key){t->code,   t->kernel,  t->dtypes,  0,
                         t->target, t->options, t->versions};
  return &t->k;
}

static void digest_of(const xpj_cache_key *k, char hex[65]) {
  assert_int_equal(xpj_cache_key_digest(k, NULL, hex), XPJ_OK);
  assert_int_equal(strlen(hex), 64);
}

static uint8_t byte_of(unsigned i, size_t j) {
  return (uint8_t)((j * 131u + (j >> 9) * 7u + i * 29u) ^ (i >> 2));
}

typedef struct tval {
  uint8_t *data;
  char entry[32], log[32];
  xpj_cache_value v;
} tval;

/* The value stored for key i (size given by the test). */
static const xpj_cache_value *val_of(tval *t, unsigned i, size_t size) {
  t->data = malloc(size ? size : 1);
  if (!t->data)
    abort();
  for (size_t j = 0; j < size; j++)
    t->data[j] = byte_of(i, j);
  snprintf(t->entry, sizeof t->entry, "e%u", i);
  snprintf(t->log, sizeof t->log, "log %u", i);
  t->v = (xpj_cache_value){0,      t->data,   size, t->entry,
                           t->log, i * 16ull, i,    i + 0.25, 0};
  return &t->v;
}

static void val_free(tval *t) {
  free(t->data);
  t->data = NULL;
}

/* 0 when e is the value of key i with the given size, else a code. */
static int check_val(const xpj_cache_entry *e, unsigned i, size_t size) {
  char s[32];
  if (e->failed)
    return 1;
  if (e->size != size || !e->data)
    return 2;
  for (size_t j = 0; j < size; j++)
    if (e->data[j] != byte_of(i, j))
      return 3;
  snprintf(s, sizeof s, "e%u", i);
  if (!e->entry || strcmp(e->entry, s))
    return 4;
  snprintf(s, sizeof s, "log %u", i);
  if (!e->log || strcmp(e->log, s))
    return 5;
  if (e->local_bytes != i * 16ull || e->scratch_bytes != i ||
      e->compile_ms != i + 0.25)
    return 6;
  snprintf(s, sizeof s, "k%u", i);
  if (!e->kernel || strcmp(e->kernel, s))
    return 7;
  return 0;
}

static void put_i(xpj_cache *c, unsigned i, size_t size) {
  tkey t;
  tval v;
  assert_int_equal(xpj_cache_put(c, key_of(&t, i), val_of(&v, i, size)),
                   XPJ_OK);
  val_free(&v);
}

/* Asserts key i is a hit with the value of that size. */
static void expect_hit(xpj_cache *c, unsigned i, size_t size) {
  tkey t;
  xpj_cache_entry e;
  xpj_status st = xpj_cache_get(c, key_of(&t, i), &e);
  if (st != XPJ_OK)
    fail_msg("key %u: status %d (%s)", i, st, xpj_cache_last_error());
  int bad = check_val(&e, i, size);
  if (bad)
    fail_msg("key %u: wrong value (check %d)", i, bad);
  xpj_cache_entry_clear(&e);
}

static void expect_miss(xpj_cache *c, unsigned i) {
  tkey t;
  xpj_cache_entry e;
  xpj_status st = xpj_cache_get(c, key_of(&t, i), &e);
  if (st != XPJ_ERR_NOT_FOUND)
    fail_msg("key %u: status %d, expected a miss", i, st);
  assert_null(e.data);
  assert_null(e.key);
}

static xpj_cache_stats stats_of(xpj_cache *c) {
  xpj_cache_stats s;
  assert_int_equal(xpj_cache_get_stats(c, &s), XPJ_OK);
  return s;
}

static uint64_t verify_bad(xpj_cache *c, uint64_t *checked) {
  uint64_t bad = 99, chk = 0;
  assert_int_equal(xpj_cache_verify(c, 0, NULL, NULL, &chk, &bad), XPJ_OK);
  if (checked)
    *checked = chk;
  return bad;
}

/* ---- direct SQLite access (to forge and damage rows) -------------------- */

static sqlite3 *sql_open(const char *path) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL),
                   SQLITE_OK);
  sqlite3_busy_timeout(db, 10000);
  return db;
}

/* Runs sql with ?1 bound to a1 (when not NULL). */
static void sql_run(const char *path, const char *sql, const char *a1) {
  sqlite3 *db = sql_open(path);
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
    fail_msg("%s: %s", sql, sqlite3_errmsg(db));
  if (a1)
    sqlite3_bind_text(s, 1, a1, -1, SQLITE_TRANSIENT);
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW)
    ;
  if (rc != SQLITE_DONE)
    fail_msg("%s: %s", sql, sqlite3_errmsg(db));
  sqlite3_finalize(s);
  assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

static int64_t sql_int(const char *path, const char *sql, const char *a1) {
  sqlite3 *db = sql_open(path);
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
    fail_msg("%s: %s", sql, sqlite3_errmsg(db));
  if (a1)
    sqlite3_bind_text(s, 1, a1, -1, SQLITE_TRANSIENT);
  assert_int_equal(sqlite3_step(s), SQLITE_ROW);
  int64_t v = sqlite3_column_int64(s, 0);
  sqlite3_finalize(s);
  assert_int_equal(sqlite3_close(db), SQLITE_OK);
  return v;
}

/* Flips one byte (at offset at) of the data blob of the row digest. */
static void sql_flip_data(const char *path, const char *digest, size_t at) {
  sqlite3 *db = sql_open(path);
  sqlite3_stmt *s = NULL;
  assert_int_equal(sqlite3_prepare_v2(db,
                                      "SELECT data FROM entries WHERE digest=?",
                                      -1, &s, NULL),
                   SQLITE_OK);
  sqlite3_bind_text(s, 1, digest, -1, SQLITE_TRANSIENT);
  assert_int_equal(sqlite3_step(s), SQLITE_ROW);
  int n = sqlite3_column_bytes(s, 0);
  assert_true(n > 0 && (size_t)n > at);
  uint8_t *b = malloc((size_t)n);
  assert_non_null(b);
  memcpy(b, sqlite3_column_blob(s, 0), (size_t)n);
  sqlite3_finalize(s);
  b[at] ^= 0x20;
  assert_int_equal(
      sqlite3_prepare_v2(db, "UPDATE entries SET data=?1 WHERE digest=?2", -1,
                         &s, NULL),
      SQLITE_OK);
  sqlite3_bind_blob(s, 1, b, n, SQLITE_TRANSIENT);
  sqlite3_bind_text(s, 2, digest, -1, SQLITE_TRANSIENT);
  assert_int_equal(sqlite3_step(s), SQLITE_DONE);
  assert_int_equal(sqlite3_changes(db), 1);
  sqlite3_finalize(s);
  free(b);
  assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

/* The checksum anyone can compute (docs/cache.md): SHA-256 over the
 * digest, failed, entry, local_bytes, scratch_bytes, the length and bytes
 * of data, log and expires; integers as 8 little-endian bytes, strings
 * after their length. What a forger writes. */
static void pub_u64(struct sha256_ctx *m, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t)(v >> (8 * i));
  sha256_update(m, 8, b);
}

static void pub_str(struct sha256_ctx *m, const char *s) {
  pub_u64(m, strlen(s));
  sha256_update(m, strlen(s), (const uint8_t *)s);
}

/* The public checksum of row digest of the database at db, with data
 * replaced by n bytes of data (NULL: its own). */
static void public_checksum(sqlite3 *db, const char *digest,
                            const uint8_t *data, size_t n, char hex[65]) {
  sqlite3_stmt *s = NULL;
  assert_int_equal(
      sqlite3_prepare_v2(db,
                         "SELECT failed, entry, local_bytes, scratch_bytes, "
                         "log, expires, data FROM entries WHERE digest=?",
                         -1, &s, NULL),
      SQLITE_OK);
  sqlite3_bind_text(s, 1, digest, -1, SQLITE_TRANSIENT);
  assert_int_equal(sqlite3_step(s), SQLITE_ROW);
  if (!data) {
    data = sqlite3_column_blob(s, 6);
    n = (size_t)sqlite3_column_bytes(s, 6);
  }
  struct sha256_ctx m;
  sha256_init(&m);
  pub_str(&m, digest);
  pub_u64(&m, (uint64_t)sqlite3_column_int64(s, 0));
  pub_str(&m, (const char *)sqlite3_column_text(s, 1));
  pub_u64(&m, (uint64_t)sqlite3_column_int64(s, 2));
  pub_u64(&m, (uint64_t)sqlite3_column_int64(s, 3));
  pub_u64(&m, n);
  sha256_update(&m, n, data);
  pub_str(&m, (const char *)sqlite3_column_text(s, 4));
  pub_u64(&m, (uint64_t)sqlite3_column_int64(s, 5));
  uint8_t d[SHA256_DIGEST_SIZE];
  sha256_digest(&m, sizeof d, d);
  sqlite3_finalize(s);
  for (int i = 0; i < 32; i++)
    snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

/* Replaces the data of row digest by n bytes of evil and writes the public
 * checksum of the result. */
static void forge_row(const char *path, const char *digest, const uint8_t *evil,
                      size_t n) {
  sqlite3 *db = sql_open(path);
  sqlite3_stmt *s = NULL;
  char hex[65];
  public_checksum(db, digest, evil, n, hex);
  assert_int_equal(
      sqlite3_prepare_v2(db,
                         "UPDATE entries SET data=?1, checksum=?2 "
                         "WHERE digest=?3",
                         -1, &s, NULL),
      SQLITE_OK);
  sqlite3_bind_blob(s, 1, evil, (int)n, SQLITE_TRANSIENT);
  sqlite3_bind_text(s, 2, hex, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s, 3, digest, -1, SQLITE_TRANSIENT);
  assert_int_equal(sqlite3_step(s), SQLITE_DONE);
  assert_int_equal(sqlite3_changes(db), 1);
  sqlite3_finalize(s);
  assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

static int64_t rows_with(const char *path, const char *digest) {
  return sql_int(path, "SELECT count(*) FROM entries WHERE digest=?1", digest);
}

/* ---- listing helpers ---------------------------------------------------- */

typedef struct listing {
  unsigned n;
  unsigned stop_after; /* 0: never stop */
  char kernel[64][16];
  char digest[64][65];
  uint64_t size_sum;
  int64_t last_used[64];
} listing;

static int list_fn(void *ud, const xpj_cache_entry *e) {
  listing *l = ud;
  if (l->n < 64) {
    snprintf(l->kernel[l->n], sizeof l->kernel[0], "%s", e->kernel);
    memcpy(l->digest[l->n], e->digest, 65);
    l->last_used[l->n] = e->last_used_ms;
  }
  if (e->data)
    fail_msg("a listing loads the data");
  l->size_sum += e->size;
  l->n++;
  return l->stop_after && l->n >= l->stop_after;
}

static listing list_of(xpj_cache *c) {
  listing l;
  memset(&l, 0, sizeof l);
  assert_int_equal(xpj_cache_list(c, list_fn, &l), XPJ_OK);
  return l;
}

static bool listed(const listing *l, unsigned i) {
  char k[16];
  snprintf(k, sizeof k, "k%u", i);
  for (unsigned j = 0; j < l->n && j < 64; j++)
    if (!strcmp(l->kernel[j], k))
      return true;
  return false;
}

/* ======================================================================== */
/* 1. round trip, hits, statistics                                          */
/* ======================================================================== */

static void test_round_trip(void **state) {
  fx *f = *state;
  int64_t t0 = wall_ms();
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_RW);
  assert_string_equal(xpj_cache_path(c), f->path);
  assert_true(exists(f->path));

  tkey ka, kb;
  const xpj_cache_key *a = key_of(&ka, 1), *b = key_of(&kb, 2);
  xpj_cache_entry e;
  assert_int_equal(xpj_cache_get(c, a, &e), XPJ_ERR_NOT_FOUND);
  assert_true(xpj_cache_last_error()[0] != 0);

  /* binary bytes: every byte value, zeros included */
  uint8_t bin[700];
  for (size_t j = 0; j < sizeof bin; j++)
    bin[j] = (uint8_t)(j * 7 + (j >> 8));
  bin[0] = 0;
  bin[1] = 0xff;
  xpj_cache_value va = {0,    bin, sizeof bin, "main_kernel", "warning: w",
                        1024, 64,  12.5, 0};
  assert_int_equal(xpj_cache_put(c, a, &va), XPJ_OK);
  /* a cached failure: a log and no data; failed as the library writes
   * an XPJ_ERR_UNSUPPORTED (kind 1 + 16 x 9), stored as given and counted
   * once in the statistics (it was counted 145 times) */
  xpj_cache_value vb = {0x91, NULL, 0,  NULL, "error: no such intrinsic",
                        0, 0,    3.0, 0};
  assert_int_equal(xpj_cache_put(c, b, &vb), XPJ_OK);
  /* size without data is invalid */
  xpj_cache_value bad = {0, NULL, 5, "x", "", 0, 0, 0, 0};
  assert_int_equal(xpj_cache_put(c, a, &bad), XPJ_ERR_INVALID);

  char *text = NULL, hex[65];
  assert_int_equal(xpj_cache_key_digest(a, &text, hex), XPJ_OK);
  int64_t t_put = wall_ms();
  nap_ms(3);
  assert_int_equal(xpj_cache_get(c, a, &e), XPJ_OK);
  assert_string_equal(e.digest, hex);
  assert_string_equal(e.key, text);
  assert_string_equal(e.code, ka.code);
  assert_string_equal(e.kernel, "k1");
  assert_string_equal(e.dtypes, "T=f32,U=i64");
  assert_string_equal(e.target, "cpu:x86_64-znver4");
  assert_string_equal(e.options, "O2");
  assert_string_equal(e.versions, "xpjit=0.1.0;llvm=22.1.8;abi=3");
  assert_int_equal(e.ndim, 0);
  assert_int_equal(e.failed, 0);
  assert_int_equal(e.size, sizeof bin);
  assert_memory_equal(e.data, bin, sizeof bin);
  assert_string_equal(e.entry, "main_kernel");
  assert_string_equal(e.log, "warning: w");
  assert_int_equal(e.local_bytes, 1024);
  assert_int_equal(e.scratch_bytes, 64);
  assert_true(e.compile_ms == 12.5);
  assert_int_equal(e.hits, 0);
  assert_true(e.created_ms >= t0 && e.created_ms <= t_put);
  int64_t first_used = e.last_used_ms;
  assert_true(first_used >= e.created_ms);
  xpj_cache_entry_clear(&e);
  assert_null(e.key);
  free(text);

  nap_ms(5);
  int64_t t_get1 = wall_ms();
  assert_int_equal(xpj_cache_get(c, a, &e), XPJ_OK); /* one use so far */
  assert_int_equal(e.hits, 1);
  assert_true(e.last_used_ms > first_used);
  int64_t used2 = e.last_used_ms;
  xpj_cache_entry_clear(&e);
  nap_ms(5);
  assert_int_equal(xpj_cache_get(c, a, &e), XPJ_OK);
  assert_int_equal(e.hits, 2);
  assert_true(e.last_used_ms >= t_get1 && e.last_used_ms > used2);
  xpj_cache_entry_clear(&e);

  assert_int_equal(xpj_cache_get(c, b, &e), XPJ_OK);
  assert_int_equal(e.failed, 0x91);
  assert_int_equal(e.size, 0);
  assert_string_equal(e.log, "error: no such intrinsic");
  assert_string_equal(e.entry, "");
  assert_true(e.compile_ms == 3.0);
  xpj_cache_entry_clear(&e);

  /* hits 4 (3 of a, 1 of b), misses 1 */
  xpj_cache_stats s = stats_of(c);
  assert_int_equal(s.counters.l2_hits, 4);
  assert_int_equal(s.counters.l2_misses, 1);
  assert_int_equal(s.counters.failure_hits, 1);
  assert_true(s.counters.saved_ms == 3 * 12.5);
  assert_int_equal(s.counters.corrupt, 0);
  assert_int_equal(s.counters.evictions, 0);
  assert_int_equal(s.entries, 2);
  assert_int_equal(s.failed_entries, 1);
  assert_int_equal(s.max_size, GiB);
  listing l = list_of(c);
  assert_int_equal(l.n, 2);
  assert_int_equal(s.bytes, l.size_sum);
  assert_true(s.bytes >= sizeof bin + strlen("error: no such intrinsic"));
  assert_true(s.file_bytes > 0);
  uint64_t bytes = s.bytes;

  /* counters noted by the runtime are added */
  xpj_cache_counters d = {0};
  d.l1_hits = 5;
  d.compiles = 2;
  d.compile_ms = 7.5;
  xpj_cache_note(c, &d);
  xpj_cache_note(c, NULL);
  xpj_cache_note(NULL, &d);
  s = stats_of(c);
  assert_int_equal(s.counters.l1_hits, 5);
  assert_int_equal(s.counters.compiles, 2);
  xpj_cache_close(c);

  /* persisted across processes (here: handles) */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  s = stats_of(c);
  assert_int_equal(s.counters.l2_hits, 4);
  assert_int_equal(s.counters.l2_misses, 1);
  assert_int_equal(s.counters.failure_hits, 1);
  assert_int_equal(s.counters.l1_hits, 5);
  assert_int_equal(s.counters.compiles, 2);
  assert_true(s.counters.compile_ms == 7.5);
  assert_int_equal(s.entries, 2);
  assert_int_equal(s.bytes, bytes);
  expect_miss(c, 3);
  assert_int_equal(stats_of(c).counters.l2_misses, 2);

  /* a put replaces the row with that key */
  xpj_cache_value va2 = {0, bin + 1, 10, "other", "", 0, 0, 1.0, 0};
  assert_int_equal(xpj_cache_put(c, a, &va2), XPJ_OK);
  assert_int_equal(xpj_cache_get(c, a, &e), XPJ_OK);
  assert_int_equal(e.size, 10);
  assert_memory_equal(e.data, bin + 1, 10);
  assert_string_equal(e.entry, "other");
  assert_int_equal(e.hits, 0);
  xpj_cache_entry_clear(&e);
  assert_int_equal(stats_of(c).entries, 2);

  /* bad arguments */
  assert_int_equal(xpj_cache_get(NULL, a, &e), XPJ_ERR_INVALID);
  assert_int_equal(xpj_cache_get(c, NULL, &e), XPJ_ERR_INVALID);
  assert_int_equal(xpj_cache_put(c, a, NULL), XPJ_ERR_INVALID);
  assert_int_equal(xpj_cache_open(NULL, NULL), XPJ_ERR_INVALID);
  xpj_cache_config nb = {.bundle = 1};
  xpj_cache *x = (xpj_cache *)&nb;
  assert_int_equal(xpj_cache_open(&nb, &x), XPJ_ERR_INVALID);
  assert_null(x);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* A put that replaces an entry used a moment ago by the same handle: the
 * new entry starts afresh (no hits, used no earlier than it was stored);
 * uses of the old one that were not written yet must not land on it. */
static void test_replace_after_hit(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 100);
  put_i(c, 2, 100);
  expect_hit(c, 1, 100);
  expect_hit(c, 1, 100);
  nap_ms(5);
  int64_t t = wall_ms();
  put_i(c, 1, 200);
  tkey k;
  xpj_cache_entry e;
  assert_int_equal(xpj_cache_get(c, key_of(&k, 1), &e), XPJ_OK);
  assert_int_equal(check_val(&e, 1, 200), 0);
  uint64_t hits = e.hits;
  int64_t created = e.created_ms, used = e.last_used_ms;
  xpj_cache_entry_clear(&e);
  xpj_cache_close(c);
  assert_true(created >= t);
  KNOWN_BUG_FIXED(hits != 0 || used < t,
            "xpj_cache_put applies the deferred uses (flush_touches) after "
            "its INSERT OR REPLACE, so the new row inherits the old row's "
            "hits (%llu) and an older last_used (%lld ms before the put)",
            (unsigned long long)hits, (long long)(t - used));
  assert_no_warning(&f->w);
}

/* xpj_cache_remove: the row goes (and uses of it not written yet with it);
 * a missing row, a read-only handle, an off one and a bundle are quiet
 * no-ops. */
static void test_remove(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 100);
  put_i(c, 2, 100);
  expect_hit(c, 1, 100); /* a use not written yet */
  tkey t;
  char d1[65];
  digest_of(key_of(&t, 1), d1);
  assert_int_equal(xpj_cache_remove(c, key_of(&t, 1)), XPJ_OK);
  assert_int_equal(rows_with(f->path, d1), 0);
  expect_miss(c, 1);
  expect_hit(c, 2, 100);
  assert_int_equal(xpj_cache_remove(c, key_of(&t, 1)), XPJ_OK); /* gone */
  assert_int_equal(xpj_cache_remove(c, key_of(&t, 77)), XPJ_OK); /* never */
  /* stored again: a new row, no hits inherited */
  put_i(c, 1, 200);
  xpj_cache_entry e;
  assert_int_equal(xpj_cache_get(c, key_of(&t, 1), &e), XPJ_OK);
  assert_int_equal(check_val(&e, 1, 200), 0);
  assert_int_equal(e.hits, 0);
  xpj_cache_entry_clear(&e);
  /* bad arguments */
  assert_int_equal(xpj_cache_remove(NULL, key_of(&t, 1)), XPJ_ERR_INVALID);
  assert_int_equal(xpj_cache_remove(c, NULL), XPJ_ERR_INVALID);
  key_of(&t, 1);
  t.k.kernel = "a\nb";
  assert_int_equal(xpj_cache_remove(c, &t.k), XPJ_ERR_INVALID);
  char bpath[256];
  snprintf(bpath, sizeof bpath, "%s/r.xpjb", f->dir);
  assert_int_equal(xpj_cache_export(c, bpath, NULL), XPJ_OK);
  xpj_cache_close(c);

  /* read-only and off: nothing removed */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RO, 0);
  assert_int_equal(xpj_cache_remove(c, key_of(&t, 2)), XPJ_OK);
  expect_hit(c, 2, 100);
  xpj_cache_close(c);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_OFF, 0);
  assert_int_equal(xpj_cache_remove(c, key_of(&t, 2)), XPJ_OK);
  xpj_cache_close(c);
  char d2[65];
  digest_of(key_of(&t, 2), d2);
  assert_int_equal(rows_with(f->path, d2), 1);
  /* a bundle, even one opened read-write, is never changed by it */
  for (int mode = 0; mode < 2; mode++) {
    xpj_cache_config bc = {.path = bpath, .bundle = 1,
                           .mode = mode ? XPJ_CACHE_MODE_RW
                                        : XPJ_CACHE_MODE_DEFAULT,
                           .warn = rec_warn, .warn_ud = &f->w};
    xpj_cache *b = NULL;
    assert_int_equal(xpj_cache_open(&bc, &b), XPJ_OK);
    assert_int_equal(xpj_cache_remove(b, key_of(&t, 2)), XPJ_OK);
    expect_hit(b, 2, 100);
    xpj_cache_close(b);
  }
  assert_no_warning(&f->w);
}

/* Entries that expire (negative entries retried after a while), and
 * failed stored as given. */
static void test_expiry(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  tkey t;
  int64_t now = wall_ms();
  xpj_cache_value later = {7,   NULL, 0, "", "error: try later",
                           0,   0,    1.5, now + 3600 * 1000};
  assert_int_equal(xpj_cache_put(c, key_of(&t, 1), &later), XPJ_OK);
  xpj_cache_entry e;
  assert_int_equal(xpj_cache_get(c, key_of(&t, 1), &e), XPJ_OK);
  assert_int_equal(e.failed, 7); /* as given */
  assert_true(e.expires_ms == now + 3600 * 1000);
  assert_string_equal(e.log, "error: try later");
  xpj_cache_entry_clear(&e);
  /* never expires: 0, the default of positional initialisers */
  put_i(c, 2, 100);
  assert_int_equal(xpj_cache_get(c, key_of(&t, 2), &e), XPJ_OK);
  assert_true(e.expires_ms == 0);
  xpj_cache_entry_clear(&e);
  /* past its time: a miss, and the row is deleted */
  xpj_cache_value gone = {1, NULL, 0, "", "error: old", 0, 0, 1.5, now - 1};
  assert_int_equal(xpj_cache_put(c, key_of(&t, 3), &gone), XPJ_OK);
  char d3[65];
  digest_of(key_of(&t, 3), d3);
  assert_int_equal(rows_with(f->path, d3), 1);
  uint64_t misses = stats_of(c).counters.l2_misses;
  expect_miss(c, 3);
  assert_int_equal(stats_of(c).counters.l2_misses, misses + 1);
  assert_int_equal(rows_with(f->path, d3), 0);
  /* an expired row is not damage: verify is content, export skips it */
  assert_int_equal(xpj_cache_put(c, key_of(&t, 3), &gone), XPJ_OK);
  tval v;
  const xpj_cache_value *ok = val_of(&v, 4, 50);
  xpj_cache_value ok_old = *ok;
  ok_old.expires_ms = now - 1;
  assert_int_equal(xpj_cache_put(c, key_of(&t, 4), &ok_old), XPJ_OK);
  val_free(&v);
  assert_int_equal(verify_bad(c, NULL), 0);
  char bpath[256];
  snprintf(bpath, sizeof bpath, "%s/x.xpjb", f->dir);
  uint64_t n = 0;
  assert_int_equal(xpj_cache_export(c, bpath, &n), XPJ_OK);
  assert_int_equal(n, 1); /* key 2 only: 1 and 3 failed, 4 expired */
  xpj_cache_close(c);
  /* read-only: a miss, the row left alone */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RO, 0);
  expect_miss(c, 3);
  xpj_cache_close(c);
  assert_int_equal(rows_with(f->path, d3), 1);
  /* prune removes expired rows even without an age or size limit */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  uint64_t removed = 0;
  assert_int_equal(xpj_cache_prune(c, 0, 0, &removed, NULL), XPJ_OK);
  assert_int_equal(removed, 2);
  assert_int_equal(stats_of(c).entries, 2);
  expect_hit(c, 2, 100);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* ---- xpj_cache_put_later: a put written with the next write ----------- */

static void put_later_i(xpj_cache *c, unsigned i, size_t size) {
  tkey t;
  tval v;
  assert_int_equal(xpj_cache_put_later(c, key_of(&t, i), val_of(&v, i, size)),
                   XPJ_OK);
  val_free(&v);
}

static int64_t row_count(const char *path) {
  return sql_int(path, "SELECT count(*) FROM entries", NULL);
}

static int64_t rows_of(const char *path, unsigned i) {
  tkey t;
  char d[65];
  digest_of(key_of(&t, i), d);
  return rows_with(path, d);
}

/* Every column of row i that the value and key determine (all but created,
 * last_used and hits), one string; malloc'd. */
static char *row_text(const char *path, unsigned i) {
  tkey t;
  char d[65];
  digest_of(key_of(&t, i), d);
  sqlite3 *db = sql_open(path);
  sqlite3_stmt *s = NULL;
  assert_int_equal(
      sqlite3_prepare_v2(db,
                         "SELECT key||'|'||code||'|'||kernel||'|'||dtypes||'|'"
                         "||ndim||'|'||target||'|'||options||'|'||versions"
                         "||'|'||failed||'|'||entry||'|'||local_bytes||'|'"
                         "||scratch_bytes||'|'||hex(data)||'|'||log||'|'"
                         "||checksum||'|'||size||'|'||compile_ms||'|'||expires"
                         " FROM entries WHERE digest=?1",
                         -1, &s, NULL),
      SQLITE_OK);
  sqlite3_bind_text(s, 1, d, -1, SQLITE_TRANSIENT);
  assert_int_equal(sqlite3_step(s), SQLITE_ROW);
  char *r = strdup((const char *)sqlite3_column_text(s, 0));
  assert_non_null(r);
  sqlite3_finalize(s);
  assert_int_equal(sqlite3_close(db), SQLITE_OK);
  return r;
}

/* Served by the handle that put it, and only there, until that handle's
 * next write transaction (a put, a maintenance call) or its close; then
 * the row is the one xpj_cache_put writes (checksum included), and the
 * uses it had while it waited are counted. */
static void test_put_later(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  xpj_cache *c2 = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  int64_t t0 = wall_ms();
  put_later_i(c, 1, 3000);
  int64_t t1 = wall_ms();
  assert_int_equal(rows_of(f->path, 1), 0); /* not written */
  tkey t;
  xpj_cache_entry e;
  assert_int_equal(xpj_cache_get(c, key_of(&t, 1), &e), XPJ_OK);
  assert_int_equal(check_val(&e, 1, 3000), 0);
  assert_int_equal(e.hits, 0);
  assert_true(e.created_ms >= t0 && e.created_ms <= t1);
  assert_int_equal(e.last_used_ms, e.created_ms);
  assert_true(e.expires_ms == 0);
  xpj_cache_entry_clear(&e);
  assert_int_equal(xpj_cache_get(c, key_of(&t, 1), &e), XPJ_OK);
  assert_int_equal(e.hits, 1); /* the use above, not written yet either */
  xpj_cache_entry_clear(&e);
  expect_miss(c2, 1); /* another process does not see it */
  assert_int_equal(rows_of(f->path, 1), 0);

  /* the next write transaction (a put) writes it, as of when it was put,
   * then the uses */
  nap_ms(5);
  put_i(c, 2, 100);
  assert_int_equal(rows_of(f->path, 1), 1);
  assert_int_equal(xpj_cache_get(c2, key_of(&t, 1), &e), XPJ_OK);
  assert_int_equal(check_val(&e, 1, 3000), 0);
  assert_int_equal(e.hits, 2);
  assert_true(e.created_ms >= t0 && e.created_ms <= t1);
  xpj_cache_entry_clear(&e);
  assert_int_equal(verify_bad(c2, NULL), 0);
  /* exactly the row a put writes */
  char *deferred = row_text(f->path, 1);
  assert_int_equal(xpj_cache_remove(c, key_of(&t, 1)), XPJ_OK);
  put_i(c, 1, 3000);
  char *direct = row_text(f->path, 1);
  assert_string_equal(deferred, direct);
  free(deferred);
  free(direct);

  /* a later put_later of the key replaces the waiting value, and a put
   * the waiting one; a maintenance call writes */
  put_later_i(c, 3, 10);
  tval v;
  xpj_cache_value other = *val_of(&v, 3, 20);
  assert_int_equal(xpj_cache_put_later(c, key_of(&t, 3), &other), XPJ_OK);
  val_free(&v); /* copied */
  expect_hit(c, 3, 20);
  put_later_i(c, 4, 10);
  put_i(c, 4, 30);
  expect_hit(c, 4, 30);
  assert_int_equal(rows_of(f->path, 3), 1);
  expect_hit(c2, 3, 20);
  expect_hit(c2, 4, 30);
  put_later_i(c, 5, 40);
  expect_miss(c2, 5);
  (void)stats_of(c); /* a maintenance call */
  expect_hit(c2, 5, 40);

  /* close writes what waits */
  put_later_i(c, 6, 50);
  expect_miss(c2, 6);
  xpj_cache_close(c);
  expect_hit(c2, 6, 50);
  uint64_t checked = 0;
  assert_int_equal(verify_bad(c2, &checked), 0);
  assert_int_equal(checked, 6);
  /* bad arguments */
  assert_int_equal(xpj_cache_put_later(NULL, key_of(&t, 1), &other),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_cache_put_later(c2, key_of(&t, 1), NULL),
                   XPJ_ERR_INVALID);
  xpj_cache_value nodata = {0, NULL, 5, "x", "", 0, 0, 0, 0};
  assert_int_equal(xpj_cache_put_later(c2, key_of(&t, 1), &nodata),
                   XPJ_ERR_INVALID);
  t.k.kernel = "a\nb";
  assert_int_equal(xpj_cache_put_later(c2, &t.k, &other), XPJ_ERR_INVALID);
  xpj_cache_close(c2);
  assert_no_warning(&f->w);
}

/* xpj_cache_remove drops a waiting entry (a row stored before it too),
 * and is a write transaction: the others waiting are written. */
static void test_put_later_remove(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 3, 100);
  put_later_i(c, 1, 100);
  put_later_i(c, 2, 100);
  put_later_i(c, 3, 200); /* replaces the stored row when written */
  expect_hit(c, 1, 100);
  expect_hit(c, 3, 200);
  assert_int_equal(rows_of(f->path, 1), 0);
  assert_int_equal(rows_of(f->path, 2), 0);
  tkey t;
  assert_int_equal(xpj_cache_remove(c, key_of(&t, 1)), XPJ_OK);
  assert_int_equal(xpj_cache_remove(c, key_of(&t, 3)), XPJ_OK);
  expect_miss(c, 1);
  expect_miss(c, 3);
  assert_int_equal(rows_of(f->path, 2), 1); /* written by the remove */
  xpj_cache_close(c);
  assert_int_equal(rows_of(f->path, 1), 0);
  assert_int_equal(rows_of(f->path, 3), 0);
  assert_int_equal(row_count(f->path), 1);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  expect_miss(c, 1);
  expect_hit(c, 2, 100);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* xpj_cache_clear drops every waiting entry. */
static void test_put_later_clear(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 100);
  put_later_i(c, 2, 100);
  put_later_i(c, 3, 100);
  expect_hit(c, 2, 100);
  assert_int_equal(rows_of(f->path, 2), 0);
  assert_int_equal(xpj_cache_clear(c), XPJ_OK);
  expect_miss(c, 2);
  expect_miss(c, 3);
  xpj_cache_close(c);
  assert_int_equal(row_count(f->path), 0);
  assert_no_warning(&f->w);
}

/* A waiting entry past its expires_ms is neither served nor written. */
static void test_put_later_expiry(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  tkey t;
  int64_t now = wall_ms();
  xpj_cache_value soon = {1, NULL, 0, "", "error: try later", 0, 0, 1.5,
                          now + 500};
  xpj_cache_value hour = soon;
  hour.expires_ms = now + 3600 * 1000;
  xpj_cache_value past = soon;
  past.expires_ms = now - 1;
  assert_int_equal(xpj_cache_put_later(c, key_of(&t, 1), &soon), XPJ_OK);
  assert_int_equal(xpj_cache_put_later(c, key_of(&t, 2), &soon), XPJ_OK);
  assert_int_equal(xpj_cache_put_later(c, key_of(&t, 3), &hour), XPJ_OK);
  assert_int_equal(xpj_cache_put_later(c, key_of(&t, 4), &past), XPJ_OK);
  xpj_cache_entry e;
  assert_int_equal(xpj_cache_get(c, key_of(&t, 1), &e), XPJ_OK);
  assert_int_equal(e.failed, 1);
  assert_true(e.expires_ms == now + 500);
  assert_string_equal(e.log, "error: try later");
  xpj_cache_entry_clear(&e);
  expect_miss(c, 4);
  assert_int_equal(row_count(f->path), 0);
  while (wall_ms() <= now + 500)
    nap_ms(20);
  expect_miss(c, 1);
  xpj_cache_close(c); /* 2 is not written: its time is up */
  assert_int_equal(rows_of(f->path, 1), 0);
  assert_int_equal(rows_of(f->path, 2), 0);
  assert_int_equal(rows_of(f->path, 3), 1);
  assert_int_equal(rows_of(f->path, 4), 0);
  assert_int_equal(row_count(f->path), 1);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_get(c, key_of(&t, 3), &e), XPJ_OK);
  assert_true(e.expires_ms == now + 3600 * 1000);
  xpj_cache_entry_clear(&e);
  assert_int_equal(verify_bad(c, NULL), 0);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* At most 64 entries, or 64 MiB, wait: the 65th entry, or the one that
 * goes past 64 MiB, writes them all. */
static void test_put_later_limits(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  for (unsigned i = 0; i < 64; i++)
    put_later_i(c, i, 100);
  assert_int_equal(row_count(f->path), 0);
  put_later_i(c, 64, 100);
  assert_int_equal(row_count(f->path), 65);
  put_later_i(c, 65, 100); /* waits again */
  assert_int_equal(row_count(f->path), 65);
  xpj_cache_close(c);
  assert_int_equal(row_count(f->path), 66);

  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_clear(c), XPJ_OK);
  put_later_i(c, 100, 40u << 20);
  assert_int_equal(row_count(f->path), 0);
  put_later_i(c, 101, 30u << 20); /* 70 MiB */
  assert_int_equal(row_count(f->path), 2);
  xpj_cache *c2 = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  expect_hit(c2, 100, 40u << 20);
  expect_hit(c2, 101, 30u << 20);
  xpj_cache_close(c2);
  assert_int_equal(verify_bad(c, NULL), 0);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* Written, each as a put is, with the eviction for the size limit. */
static void test_put_later_eviction(void **state) {
  fx *f = *state;
  const uint64_t max = 64 * 1024; /* six rows of 10000 bytes */
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, max);
  for (unsigned i = 0; i < 6; i++) {
    put_i(c, i, 10000);
    nap_ms(3);
  }
  put_later_i(c, 6, 10000);
  nap_ms(3);
  put_later_i(c, 7, 10000);
  assert_int_equal(row_count(f->path), 6);
  assert_int_equal(rows_of(f->path, 6), 0);
  xpj_cache_close(c);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, max);
  xpj_cache_stats s = stats_of(c);
  assert_true(s.bytes <= max);
  assert_int_equal(s.entries, 6);
  assert_int_equal(s.counters.evictions, 2);
  listing l = list_of(c);
  assert_false(listed(&l, 0));
  assert_false(listed(&l, 1));
  assert_true(listed(&l, 2));
  assert_true(listed(&l, 6));
  assert_true(listed(&l, 7));
  expect_hit(c, 7, 10000);
  /* a put replaces a waiting entry: that one is not written first (it
   * would have evicted 3, 4, 5 on its way) */
  put_later_i(c, 8, 40000);
  put_i(c, 8, 10000);
  s = stats_of(c);
  assert_int_equal(s.counters.evictions, 3);
  l = list_of(c);
  assert_false(listed(&l, 2));
  for (unsigned i = 3; i < 9; i++)
    if (!listed(&l, i))
      fail_msg("key %u was evicted", i);
  assert_int_equal(verify_bad(c, NULL), 0);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* In a child: put_later waits; then the disk fills up (RLIMIT_FSIZE)
 * during a put, which writes it in its transaction: neither is stored,
 * the handle is read-only, and later ones are not kept. The exit code. */
static int put_later_full_child(const char *path) {
  wlog w;
  memset(&w, 0, sizeof w);
  xpj_cache_config cfg = {.path = path, .mode = XPJ_CACHE_MODE_RW,
                          .max_size = GiB, .warn = rec_warn, .warn_ud = &w};
  xpj_cache *c = NULL;
  if (xpj_cache_open(&cfg, &c) != XPJ_OK || !c)
    return 10;
  tkey t;
  tval v;
  xpj_cache_entry e;
  if (xpj_cache_put_later(c, key_of(&t, 5), val_of(&v, 5, 100)) != XPJ_OK)
    return 11;
  val_free(&v);
  if (xpj_cache_get(c, key_of(&t, 5), &e) != XPJ_OK)
    return 12;
  xpj_cache_entry_clear(&e);
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit rl = {64 * 1024, 64 * 1024};
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
    return 13;
  xpj_cache_put(c, key_of(&t, 6), val_of(&v, 6, 1 << 20));
  val_free(&v);
  if (xpj_cache_mode_of(c) != XPJ_CACHE_MODE_RO || w.n != 1)
    return 14;
  if (xpj_cache_put_later(c, key_of(&t, 7), val_of(&v, 7, 100)) != XPJ_OK)
    return 15;
  val_free(&v);
  if (xpj_cache_get(c, key_of(&t, 5), &e) != XPJ_ERR_NOT_FOUND ||
      xpj_cache_get(c, key_of(&t, 7), &e) != XPJ_ERR_NOT_FOUND)
    return 16;
  xpj_cache_close(c);
  return w.n == 1 ? 0 : 17;
}

/* Off, read-only and degraded handles keep nothing and write nothing;
 * the same calls on a writable handle do (the control). */
static void test_put_later_off_ro(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_later_i(c, 1, 500);
  expect_hit(c, 1, 500);
  assert_int_equal(row_count(f->path), 0);
  xpj_cache_close(c);
  assert_int_equal(rows_of(f->path, 1), 1);
  assert_false(exists2(f->path, "-wal"));
  struct stat before, after;
  assert_int_equal(stat(f->path, &before), 0);
  nap_ms(20);
  for (int mode = XPJ_CACHE_MODE_OFF; mode <= XPJ_CACHE_MODE_RO; mode++) {
    c = open_cache(&f->w, f->path, (xpj_cache_mode)mode, GiB);
    put_later_i(c, 2, 500);
    expect_miss(c, 2);
    put_later_i(c, 1, 600); /* does not shadow the stored row */
    if (mode == XPJ_CACHE_MODE_RO)
      expect_hit(c, 1, 500);
    xpj_cache_close(c);
    assert_int_equal(stat(f->path, &after), 0);
    assert_int_equal(after.st_size, before.st_size);
    assert_int_equal(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
    assert_int_equal(row_count(f->path), 1);
  }
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0)
    _exit(put_later_full_child(f->path));
  int ws = 0;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
    fail_msg("child: %s %d", WIFEXITED(ws) ? "exit" : "signal",
             WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
  assert_int_equal(rows_of(f->path, 5), 0);
  assert_int_equal(rows_of(f->path, 7), 0);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(verify_bad(c, NULL), 0);
  expect_hit(c, 1, 500);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* ======================================================================== */
/* 2. keys                                                                  */
/* ======================================================================== */

static void test_keys(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  tkey base;
  key_of(&base, 7);
  char d0[65];
  digest_of(&base.k, d0);
  char *text = NULL;
  char hex[65];
  assert_int_equal(xpj_cache_key_digest(&base.k, &text, hex), XPJ_OK);
  assert_string_equal(hex, d0);
  assert_non_null(strstr(text, "\nkernel k7\n"));
  assert_non_null(strstr(text, "\nndim 0\n"));
  assert_non_null(strstr(text, "\nversions xpjit=0.1.0;llvm=22.1.8;abi=3\n"));
  free(text);
  put_i(c, 7, 300);
  expect_hit(c, 7, 300);

  /* one component changed at a time: another digest, a miss */
  char seen[9][65];
  memcpy(seen[0], d0, 65);
  for (int which = 1; which <= 8; which++) {
    tkey t;
    key_of(&t, 7);
    switch (which) {
    case 1:
      t.code[63] = t.code[63] == '0' ? '1' : '0';
      break;
    case 2:
      t.k.kernel = "k7x";
      break;
    case 3:
      t.k.dtypes = "T=f64,U=i64";
      break;
    case 4:
      t.k.ndim = 2;
      break;
    case 5:
      t.k.target = "cpu:x86_64-skylake";
      break;
    case 6:
      t.k.options = "O3";
      break;
    case 7:
      t.k.versions = "xpjit=0.1.0;llvm=22.1.8;abi=2";
      break;
    case 8:
      t.k.dtypes = "";
      break;
    }
    char d[65];
    digest_of(&t.k, d);
    for (int j = 0; j < which; j++)
      if (!strcmp(d, seen[j]))
        fail_msg("component %d: same digest as variant %d", which, j);
    memcpy(seen[which], d, 65);
    xpj_cache_entry e;
    assert_int_equal(xpj_cache_get(c, &t.k, &e), XPJ_ERR_NOT_FOUND);
  }
  /* components may not run into each other: "a" "" vs "" "a" */
  {
    tkey t1, t2;
    key_of(&t1, 7);
    key_of(&t2, 7);
    t1.k.dtypes = "O2";
    t1.k.options = "";
    t2.k.dtypes = "";
    t2.k.options = "O2";
    char x1[65], x2[65];
    digest_of(&t1.k, x1);
    digest_of(&t2.k, x2);
    assert_string_not_equal(x1, x2);
  }

  /* missing components, empty required ones, newlines */
  for (int which = 0; which < 16; which++) {
    tkey t;
    key_of(&t, 7);
    switch (which) {
    case 0:
      t.k.code = NULL;
      break;
    case 1:
      t.k.kernel = NULL;
      break;
    case 2:
      t.k.dtypes = NULL;
      break;
    case 3:
      t.k.target = NULL;
      break;
    case 4:
      t.k.options = NULL;
      break;
    case 5:
      t.k.versions = NULL;
      break;
    case 6:
      t.k.code = "";
      break;
    case 7:
      t.k.kernel = "";
      break;
    case 8:
      t.k.target = "";
      break;
    case 9:
      t.k.versions = "";
      break;
    case 10:
      t.k.code = "ab\ncd";
      break;
    case 11:
      t.k.kernel = "k7\ncode x";
      break;
    case 12:
      t.k.dtypes = "T=f32\n";
      break;
    case 13:
      t.k.target = "\ncpu";
      break;
    case 14:
      t.k.options = "O2\nO3";
      break;
    case 15:
      t.k.versions = "v\n";
      break;
    }
    char d[65];
    char *tx = (char *)"x";
    if (xpj_cache_key_digest(&t.k, &tx, d) != XPJ_ERR_INVALID)
      fail_msg("key variant %d accepted", which);
    assert_null(tx);
    assert_true(xpj_cache_last_error()[0] != 0);
    xpj_cache_entry e;
    assert_int_equal(xpj_cache_get(c, &t.k, &e), XPJ_ERR_INVALID);
    tval v;
    assert_int_equal(xpj_cache_put(c, &t.k, val_of(&v, 7, 10)),
                     XPJ_ERR_INVALID);
    val_free(&v);
  }
  assert_int_equal(xpj_cache_key_digest(NULL, NULL, hex), XPJ_ERR_INVALID);
  assert_int_equal(stats_of(c).entries, 1);

  /* a row whose key text differs but whose digest is the one asked for (a
   * collision, or a forged row) is a miss, never a hit */
  put_i(c, 8, 200);
  tkey t8;
  char d8[65];
  digest_of(key_of(&t8, 8), d8);
  sql_run(f->path,
          "UPDATE entries SET key = replace(key, 'kernel k7', 'kernel k9') "
          "WHERE digest = ?1",
          d0);
  assert_int_equal(rows_with(f->path, d0), 1);
  expect_miss(c, 7);
  expect_hit(c, 8, 200);
  /* the forged row is reported by verify and dropped by a repair */
  uint64_t chk = 0;
  assert_int_equal(verify_bad(c, &chk), 1);
  assert_int_equal(chk, 2);
  /* the forged key text is exactly another key's text: still a miss for
   * that key (looked up by its own digest), and for ours */
  char *t8text = NULL;
  assert_int_equal(xpj_cache_key_digest(&t8.k, &t8text, hex), XPJ_OK);
  {
    sqlite3 *db = sql_open(f->path);
    sqlite3_stmt *s = NULL;
    assert_int_equal(
        sqlite3_prepare_v2(db, "UPDATE entries SET key=?1 WHERE digest=?2", -1,
                           &s, NULL),
        SQLITE_OK);
    sqlite3_bind_text(s, 1, t8text, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, d0, -1, SQLITE_STATIC);
    assert_int_equal(sqlite3_step(s), SQLITE_DONE);
    sqlite3_finalize(s);
    sqlite3_close(db);
  }
  free(t8text);
  expect_miss(c, 7);
  expect_hit(c, 8, 200);
  uint64_t bad = 0;
  assert_int_equal(xpj_cache_verify(c, 1, NULL, NULL, &chk, &bad), XPJ_OK);
  assert_int_equal(bad, 1);
  assert_int_equal(rows_with(f->path, d0), 0);
  assert_int_equal(verify_bad(c, NULL), 0);
  /* a new put of the key serves it again */
  put_i(c, 7, 300);
  expect_hit(c, 7, 300);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* ======================================================================== */
/* 3. corruption                                                            */
/* ======================================================================== */

/* (a) damaged rows: each field covered by the checksum */
static void test_corrupt_rows(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  for (unsigned i = 0; i < 9; i++)
    put_i(c, i, 1000 + i);
  static const char *damage[] = {
      NULL, /* the data blob: one byte flipped */
      "UPDATE entries SET log = log || 'x' WHERE digest=?1",
      "UPDATE entries SET entry = 'evil' WHERE digest=?1",
      "UPDATE entries SET local_bytes = local_bytes + 1 WHERE digest=?1",
      "UPDATE entries SET scratch_bytes = 0 WHERE digest=?1",
      "UPDATE entries SET failed = 1 WHERE digest=?1",
      "UPDATE entries SET data = substr(data, 1, length(data) - 1) "
      "WHERE digest=?1",
      /* a row made to expire (or never to) must fail, not quietly miss */
      "UPDATE entries SET expires = 1 WHERE digest=?1",
  };
  for (unsigned i = 1; i <= 8; i++) {
    tkey t;
    char d[65];
    digest_of(key_of(&t, i), d);
    if (damage[i - 1])
      sql_run(f->path, damage[i - 1], d);
    else
      sql_flip_data(f->path, d, 500);
    f->w.n = 0;
    f->w.text[0] = 0;
    expect_miss(c, i);
    if (f->w.n != 1)
      fail_msg("damage %u: %d warnings (%s)", i, f->w.n, f->w.text);
    assert_warned(&f->w, "failed its checksum");
    assert_int_equal(rows_with(f->path, d), 0); /* dropped */
    assert_int_equal(stats_of(c).counters.corrupt, i);
    /* recompiled: a new value is stored and served */
    tval v;
    assert_int_equal(xpj_cache_put(c, &t.k, val_of(&v, i, 2000 + i)), XPJ_OK);
    val_free(&v);
    expect_hit(c, i, 2000 + i);
  }
  expect_hit(c, 0, 1000);
  assert_int_equal(verify_bad(c, NULL), 0);
  xpj_cache_close(c);
  /* the counter was persisted */
  f->w.n = 0;
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(stats_of(c).counters.corrupt, 8);
  /* damage found by a read-only handle: a miss, nothing deleted */
  char d0[65];
  tkey t0;
  digest_of(key_of(&t0, 0), d0);
  xpj_cache_close(c);
  sql_flip_data(f->path, d0, 3);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RO, 0);
  f->w.text[0] = 0;
  expect_miss(c, 0);
  assert_int_equal(f->w.n, 1);
  assert_int_equal(rows_with(f->path, d0), 1);
  /* and the warning does not claim otherwise */
  KNOWN_BUG_FIXED(strstr(f->w.text, "dropped") != NULL,
                  "a read-only cache says it dropped a damaged entry it "
                  "left in place: %s", f->w.text);
  assert_warned(&f->w, "failed its checksum");
  assert_warned(&f->w, "left in place");
  assert_int_equal(verify_bad(c, NULL), 1);
  xpj_cache_close(c);
}

/* Ends a whole-file corruption test: a warning naming PATH.corrupt was
 * given, the file was moved there, and the new database works. */
static void expect_recovered(fx *f, xpj_cache *c) {
  char aside[256];
  snprintf(aside, sizeof aside, "%s.corrupt", f->path);
  assert_true(f->w.n >= 1);
  assert_warned(&f->w, aside);
  assert_true(exists(aside));
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_RW);
  put_i(c, 1000, 3000);
  expect_hit(c, 1000, 3000);
  /* verify reports the file this handle replaced, once */
  assert_int_equal(verify_bad(c, NULL), 1);
  assert_int_equal(verify_bad(c, NULL), 0);
  assert_true(stats_of(c).counters.corrupt >= 1);
}

/* Puts n entries of about size bytes and closes; the file is then one
 * self-contained database (the WAL checkpointed and removed). */
static void fill_and_close(fx *f, unsigned n, size_t size) {
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  for (unsigned i = 0; i < n; i++)
    put_i(c, i, size + i);
  xpj_cache_close(c);
  assert_false(exists2(f->path, "-wal"));
  assert_no_warning(&f->w);
}

/* (b) truncated to half its size */
static void test_corrupt_truncated(void **state) {
  fx *f = *state;
  fill_and_close(f, 60, 3000);
  off_t len = file_len(f->path);
  assert_true(len > 100 * 1024);
  assert_int_equal(truncate(f->path, len / 2), 0);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  /* whatever is served from the damaged file must be right */
  for (unsigned i = 0; i < 60; i++) {
    tkey t;
    xpj_cache_entry e;
    xpj_status st = xpj_cache_get(c, key_of(&t, i), &e);
    if (st == XPJ_OK && check_val(&e, i, 3000 + i))
      fail_msg("key %u served wrong after truncation", i);
    if (st != XPJ_OK && st != XPJ_ERR_NOT_FOUND)
      fail_msg("key %u: status %d", i, st);
    xpj_cache_entry_clear(&e);
  }
  expect_recovered(f, c);
  xpj_cache_close(c);
}

/* (b') garbage written into the middle of the file, its size unchanged:
 * SQLite notices only when it reads the damaged pages */
static void test_corrupt_middle(void **state) {
  fx *f = *state;
  fill_and_close(f, 60, 3000);
  off_t len = file_len(f->path);
  assert_true(len > 100 * 1024);
  int fd = open(f->path, O_WRONLY);
  assert_true(fd >= 0);
  uint8_t junk[16384];
  for (size_t j = 0; j < sizeof junk; j++)
    junk[j] = (uint8_t)(j * 37 + 11);
  /* page-aligned, well past the schema pages */
  off_t at = (len / 2) & ~(off_t)4095;
  assert_int_equal(pwrite(fd, junk, sizeof junk, at), (ssize_t)sizeof junk);
  close(fd);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  for (unsigned i = 0; i < 60; i++) {
    tkey t;
    xpj_cache_entry e;
    xpj_status st = xpj_cache_get(c, key_of(&t, i), &e);
    if (st == XPJ_OK && check_val(&e, i, 3000 + i))
      fail_msg("key %u served wrong after damage", i);
    if (st != XPJ_OK && st != XPJ_ERR_NOT_FOUND)
      fail_msg("key %u: status %d", i, st);
    xpj_cache_entry_clear(&e);
  }
  for (unsigned i = 0; i < 60; i++) {
    tval v;
    tkey t;
    assert_int_equal(xpj_cache_put(c, key_of(&t, i), val_of(&v, i, 100 + i)),
                     XPJ_OK);
    val_free(&v);
  }
  expect_recovered(f, c);
  xpj_cache_close(c);
}

/* (c) 64 KB of random bytes instead of a database */
static void test_corrupt_garbage(void **state) {
  fx *f = *state;
  size_t n = 64 * 1024;
  uint8_t *junk = malloc(n);
  assert_non_null(junk);
  unsigned seed = 12345;
  for (size_t j = 0; j < n; j++)
    junk[j] = (uint8_t)rand_r(&seed);
  write_file(f->path, junk, n);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  expect_miss(c, 1);
  expect_recovered(f, c);
  /* the bad file is kept, byte for byte */
  char aside[256];
  snprintf(aside, sizeof aside, "%s.corrupt", f->path);
  size_t m = 0;
  uint8_t *back = read_all(aside, &m);
  assert_int_equal(m, n);
  assert_memory_equal(back, junk, n);
  free(back);
  free(junk);
  xpj_cache_close(c);
  /* a second process finds the new database fine: no warning */
  f->w.n = 0;
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  expect_hit(c, 1000, 3000);
  assert_int_equal(stats_of(c).counters.corrupt, 1);
  assert_int_equal(f->w.n, 0);
  xpj_cache_close(c);
}

/* xpj_cache_settle writes what a handle deferred, as its close would: a
 * second handle counts the first's hits while the first stays open (an
 * interpreter ends without closing its cache: its hits never counted) */
static void test_settle(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 100);
  expect_hit(c, 1, 100);
  expect_hit(c, 1, 100);
  xpj_cache_settle(c);
  xpj_cache_settle(NULL);
  xpj_cache *other = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(stats_of(other).counters.l2_hits, 2);
  xpj_cache_close(other);
  expect_hit(c, 1, 100); /* still open, and what it settled not twice */
  xpj_cache_close(c);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(stats_of(c).counters.l2_hits, 3);
  xpj_cache_close(c);
}

/* A last_used in the future (a clock that was ahead) is rewritten by the
 * next use; it was kept (max), so the row never aged: prune --older-than
 * never removed it and eviction took rows used just now first */
static void test_future_last_used(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 100);
  xpj_cache_close(c);
  tkey t;
  char d[65], sql[160];
  digest_of(key_of(&t, 1), d);
  int64_t now = wall_ms();
  snprintf(sql, sizeof sql, "UPDATE entries SET last_used = %lld WHERE "
           "digest=?1", (long long)(now + 10LL * 86400 * 1000));
  sql_run(f->path, sql, d);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  expect_hit(c, 1, 100);
  xpj_cache_close(c);
  int64_t used = sql_int(f->path, "SELECT last_used FROM entries WHERE "
                         "digest=?1", d);
  assert_true(used >= now && used <= wall_ms() + 1000);
}

/* (c') a file moved aside earlier is kept: the next goes to .corrupt.1
 * (PATH.corrupt was replaced, and with it what was moved there before) */
static void test_corrupt_keeps_older(void **state) {
  fx *f = *state;
  char aside[256], aside1[256];
  snprintf(aside, sizeof aside, "%s.corrupt", f->path);
  snprintf(aside1, sizeof aside1, "%s.corrupt.1", f->path);
  static const char older[] = "moved aside before: keep me";
  write_file(aside, older, sizeof older);
  static const char junk[] = "not a database, and no SQLite header either";
  write_file(f->path, junk, sizeof junk);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  expect_miss(c, 1);
  assert_warned(&f->w, aside1);
  size_t m = 0;
  uint8_t *back = read_all(aside, &m);
  assert_int_equal(m, sizeof older);
  assert_memory_equal(back, older, sizeof older);
  free(back);
  back = read_all(aside1, &m);
  assert_int_equal(m, sizeof junk);
  assert_memory_equal(back, junk, sizeof junk);
  free(back);
  xpj_cache_close(c);
}

/* (d) valid SQLite files that are not ours or of another schema: another
 * program's database (k < 4) is refused and left as it is, nothing made
 * beside it (a cache path that names it by mistake must not cost its
 * owner the file); one of ours
 * of another schema version, or with the wrong tables, is moved aside and
 * replaced */
static void test_corrupt_foreign(void **state) {
  fx *f = *state;
  static const char *make[] = {
      "CREATE TABLE t(x); INSERT INTO t VALUES(42); PRAGMA user_version=99;",
      "CREATE TABLE t(x); INSERT INTO t VALUES(42); "
      "PRAGMA application_id=1234;",
      "CREATE TABLE t(x); INSERT INTO t VALUES(42);",
      /* no table, only a user version: another program's too (the CLI
       * said so, and made a key and a lock beside it) */
      "PRAGMA user_version=2;",
      /* ours, but a future schema version */
      "CREATE TABLE t(x); INSERT INTO t VALUES(42); "
      "PRAGMA application_id=1481656899; PRAGMA user_version=999;",
      /* ours by the numbers, but empty of tables */
      "PRAGMA application_id=1481656899; PRAGMA user_version=2; "
      "CREATE TABLE t(x); INSERT INTO t VALUES(42);",
  };
  for (unsigned k = 0; k < sizeof make / sizeof *make; k++) {
    char aside[256], key[256], lock[256];
    snprintf(aside, sizeof aside, "%s.corrupt", f->path);
    snprintf(key, sizeof key, "%s.key", f->path);
    snprintf(lock, sizeof lock, "%s.lock", f->path);
    unlink(f->path);
    unlink(aside);
    unlink(key); /* as beside a file named by mistake */
    unlink(lock);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, make[k], NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    f->w.n = 0;
    f->w.text[0] = 0;
    xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
    if (k < 4) {
      assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_OFF);
      assert_warned(&f->w, "another program's SQLite database");
      xpj_cache_close(c);
      struct stat sb;
      assert_int_equal(stat(aside, &sb), -1);
      /* and nothing made beside it */
      assert_int_equal(stat(key, &sb), -1);
      assert_int_equal(stat(lock, &sb), -1);
      if (k == 3)
        assert_int_equal(sql_int(f->path, "PRAGMA user_version", NULL), 2);
      else
        assert_int_equal(sql_int(f->path, "SELECT x FROM t", NULL), 42);
      continue;
    }
    /* the schema numbers right but not the tables (k == 5): damage too */
    expect_recovered(f, c);
    assert_warned(&f->w, k == 5 ? "schema" : "not an xpjit cache");
    xpj_cache_close(c);
    /* the moved file keeps its contents */
    assert_int_equal(sql_int(aside, "SELECT x FROM t", NULL), 42);
  }
}

/* Flips one bit of the entries table's stored CREATE statement, turning
 * the column compile_ms into compile_ls: the file stays well formed. */
static void flip_schema_bit(const char *path) {
  size_t n = 0;
  uint8_t *b = read_all(path, &n);
  static const char col[] = "compile_ms REAL";
  uint8_t *at = memmem(b, n, col, strlen(col));
  assert_non_null(at);
  assert_null(memmem(at + 1, n - (size_t)(at + 1 - b), col, strlen(col)));
  at[8] ^= 0x01; /* 'm' -> 'l' */
  write_file(path, b, n);
  free(b);
  /* SQLite's own check finds nothing wrong: the premise of the test */
  sqlite3 *db = sql_open(path);
  sqlite3_stmt *s = NULL;
  assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &s, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(s), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(s, 0), "ok");
  sqlite3_finalize(s);
  sqlite3_close(db);
}

/* (d') one flipped bit in the schema: the cache must not stay off for
 * good. Opening read-write moves the file aside like any damage; verify
 * --repair repairs it and clear clears it, for real. */
static void test_corrupt_schema_bit(void **state) {
  fx *f = *state;
  fill_and_close(f, 4, 500);
  size_t n = 0;
  uint8_t *good = read_all(f->path, &n);
  flip_schema_bit(f->path);
  /* a program: recovered when opened, then a working cache */
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  expect_miss(c, 1);
  KNOWN_BUG_FIXED(xpj_cache_mode_of(c) != XPJ_CACHE_MODE_RW,
                  "a flipped bit in the schema turns the cache off: %s",
                  f->w.text);
  expect_recovered(f, c);
  assert_warned(&f->w, "schema");
  xpj_cache_close(c);

  /* verify --repair: reports the file as bad, and afterwards it is good */
  write_file(f->path, good, n);
  flip_schema_bit(f->path);
  f->w.n = 0;
  f->w.text[0] = 0;
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  uint64_t chk = 0, bad = 0;
  assert_int_equal(xpj_cache_verify(c, 1, NULL, NULL, &chk, &bad), XPJ_OK);
  assert_int_equal(bad, 1);
  KNOWN_BUG_FIXED(verify_bad(c, NULL) != 0,
                  "verify --repair reported the damage but left it");
  put_i(c, 5, 100);
  expect_hit(c, 5, 100);
  xpj_cache_close(c);

  /* clear: an empty, working cache afterwards */
  write_file(f->path, good, n);
  flip_schema_bit(f->path);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_clear(c), XPJ_OK);
  put_i(c, 6, 100);
  tkey t;
  xpj_cache_entry e;
  xpj_status st = xpj_cache_get(c, key_of(&t, 6), &e);
  xpj_cache_entry_clear(&e);
  KNOWN_BUG_FIXED(st != XPJ_OK, "cache clear said it cleared a cache whose "
                  "lookups still fail: %s", f->w.text);
  assert_int_equal(stats_of(c).entries, 1);
  xpj_cache_close(c);

  /* read-only: nothing may be changed, so the cache is off, with a
   * warning that says why, from the start */
  write_file(f->path, good, n);
  flip_schema_bit(f->path);
  f->w.n = 0;
  f->w.text[0] = 0;
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RO, 0);
  KNOWN_BUG_FIXED(xpj_cache_mode_of(c) != XPJ_CACHE_MODE_OFF,
                  "a read-only cache with a damaged schema opens as usable");
  assert_int_equal(f->w.n, 1);
  assert_warned(&f->w, "schema");
  char why[1024];
  assert_true(xpj_cache_problem(c, why, sizeof why) > 0);
  assert_non_null(strstr(why, "schema"));
  expect_miss(c, 1);
  uint64_t rbad = 0;
  assert_int_equal(xpj_cache_verify(c, 0, NULL, NULL, NULL, &rbad), XPJ_OK);
  assert_int_equal(rbad, 1);
  xpj_cache_close(c);
  assert_int_equal(f->w.n, 1);
  free(good);
}

/* (e) a zero-length file: a new database, no warning */
static void test_empty_file(void **state) {
  fx *f = *state;
  write_file(f->path, "", 0);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_RW);
  put_i(c, 3, 500);
  expect_hit(c, 3, 500);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
  assert_false(exists2(f->path, ".corrupt"));
  assert_true(file_len(f->path) > 0);
  /* a zero-length file opened read-only: nothing there, nothing written */
  write_file(f->path, "", 0);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RO, 0);
  expect_miss(c, 3);
  xpj_cache_close(c);
  assert_int_equal(file_len(f->path), 0);
}

/* (f) rows written by someone else: the checksum is keyed (HMAC-SHA256
 * with the cache's own key), so recomputing it from the public fields, or
 * copying a row from another cache, gives a row that fails */
static void test_forged_rows(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  for (unsigned i = 1; i <= 3; i++)
    put_i(c, i, 300);
  xpj_cache_close(c);
  uint8_t evil[300];
  for (size_t j = 0; j < sizeof evil; j++)
    evil[j] = byte_of(666, j);
  tkey t;
  char d1[65];
  digest_of(key_of(&t, 1), d1);
  forge_row(f->path, d1, evil, sizeof evil);
  /* a row made in another cache (another key), copied over */
  char other[256];
  snprintf(other, sizeof other, "%s/other.db", f->dir);
  c = open_cache(&f->w, other, XPJ_CACHE_MODE_RW, GiB);
  tval v;
  assert_int_equal(xpj_cache_put(c, key_of(&t, 4), val_of(&v, 666, 300)),
                   XPJ_OK);
  val_free(&v);
  xpj_cache_close(c);
  {
    sqlite3 *db = sql_open(f->path);
    char sql[512];
    snprintf(sql, sizeof sql,
             "ATTACH '%s' AS o; INSERT INTO main.entries SELECT * FROM "
             "o.entries; DETACH o;", other);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
  }
  for (int rw = 0; rw < 2; rw++) {
    f->w.n = 0;
    f->w.text[0] = 0;
    c = open_cache(&f->w, f->path, rw ? XPJ_CACHE_MODE_RW : XPJ_CACHE_MODE_RO,
                   GiB);
    for (unsigned i = 1; i <= 4; i += 3) {
      xpj_cache_entry e;
      xpj_status st = xpj_cache_get(c, key_of(&t, i), &e);
      bool served = st == XPJ_OK && e.size == 300 &&
                    memcmp(e.data, evil, sizeof evil) == 0;
      xpj_cache_entry_clear(&e);
      KNOWN_BUG_FIXED(served, "key %u: a row %s was served", i,
                      i == 1 ? "with a recomputed public checksum"
                             : "copied from another cache");
      assert_int_equal(st, XPJ_ERR_NOT_FOUND);
    }
    assert_int_equal(f->w.n, 2);
    assert_warned(&f->w, "failed its checksum");
    expect_hit(c, 2, 300);
    if (!rw) /* read-only: reported, left in place */
      assert_int_equal(verify_bad(c, NULL), 2);
    xpj_cache_close(c);
  }
  /* read-write: both dropped */
  assert_int_equal(rows_with(f->path, d1), 0);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(verify_bad(c, NULL), 0);
  assert_int_equal(stats_of(c).entries, 2);
  /* bundles are distributed: their rows carry the public checksum (their
   * authenticity is their trusted owner's); an import signs them again */
  char bpath[256], d2[65];
  snprintf(bpath, sizeof bpath, "%s/b.xpjb", f->dir);
  assert_int_equal(xpj_cache_export(c, bpath, NULL), XPJ_OK);
  xpj_cache_close(c);
  digest_of(key_of(&t, 2), d2);
  char pub[65], stored[65];
  sqlite3 *db = sql_open(bpath);
  public_checksum(db, d2, NULL, 0, pub);
  sqlite3_close(db);
  db = sql_open(f->path);
  public_checksum(db, d2, NULL, 0, stored);
  sqlite3_close(db);
  assert_int_equal(sql_int(bpath, "SELECT count(*) FROM entries WHERE "
                                  "checksum = ?1", pub), 1);
  assert_int_equal(sql_int(f->path, "SELECT count(*) FROM entries WHERE "
                                    "checksum = ?1", stored), 0);
  c = open_cache(&f->w, other, XPJ_CACHE_MODE_RW, GiB);
  uint64_t imp = 0;
  assert_int_equal(xpj_cache_import(c, bpath, &imp, NULL), XPJ_OK);
  assert_int_equal(imp, 2);
  expect_hit(c, 2, 300);
  xpj_cache_close(c);
}

/* A key replaced while a handle is open (another process found it gone
 * or damaged and made a new one): the handle reads the new one, so that
 * it neither drops the rows the others sign nor signs rows, waiting puts
 * and hit files they drop (xpjitd kept its old key until restarted; found
 * by an outside probe). A key file that the handle may not trust leaves
 * the old key in use. */
static void test_key_replaced(void **state) {
  fx *f = *state;
  char kp[256];
  snprintf(kp, sizeof kp, "%s.key", f->path);
  xpj_cache *a = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(a, 1, 100);
  assert_int_equal(unlink(kp), 0);
  /* b makes a new key; what it signs, a (which kept the old one) finds */
  xpj_cache *b = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(b, 2, 200);
  expect_hit(a, 2, 200);
  /* what a puts after, now or later, b and a new handle find */
  put_i(a, 3, 300);
  tkey t;
  tval v;
  assert_int_equal(xpj_cache_put_later(a, key_of(&t, 4), val_of(&v, 4, 400)),
                   XPJ_OK);
  val_free(&v);
  xpj_cache_settle(a);
  expect_hit(b, 3, 300);
  expect_hit(b, 4, 400);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  for (unsigned i = 2; i <= 4; i++)
    expect_hit(c, i, 100 * i); /* hit files and rows */
  expect_miss(c, 1); /* signed with the lost key: dropped */
  xpj_cache_close(c);
  /* the same for a key written over in place (the same inode, a new
   * change time) */
  uint8_t fresh[32];
  for (unsigned i = 0; i < 32; i++)
    fresh[i] = (uint8_t)(i * 37 + 11);
  int fd = open(kp, O_WRONLY | O_TRUNC);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, fresh, sizeof fresh), (ssize_t)sizeof fresh);
  close(fd);
  xpj_cache *d = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(d, 5, 500);
  xpj_cache_close(d);
  expect_hit(a, 5, 500);
  /* a key file the handle may not trust: the old key stays in use */
  assert_int_equal(chmod(kp, 0644), 0);
  put_i(a, 6, 600);
  assert_int_equal(chmod(kp, 0600), 0);
  expect_hit(a, 6, 600);
  xpj_cache_close(a);
  xpj_cache_close(b);
}

/* A cache file reached by another name (a hard link; a bind mount of the
 * file alone is the same case) has no key beside that name, its key being
 * beside its own: no key is made there and nothing is written through it.
 * Before, `bundle import --path LINK` made LINK.key, found every row "not
 * intact" and signed it again under that key: the cache by its own name
 * then found them all bad (an outside probe). */
static void test_key_other_name(void **state) {
  fx *f = *state;
  char bpath[300], link2[300], lkey[320];
  snprintf(bpath, sizeof bpath, "%s/b.xpb", f->dir);
  snprintf(link2, sizeof link2, "%s/other.db", f->dir);
  snprintf(lkey, sizeof lkey, "%s.key", link2);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  for (unsigned i = 1; i <= 3; i++)
    put_i(c, i, 100 * i);
  assert_int_equal(xpj_cache_export(c, bpath, NULL), XPJ_OK);
  xpj_cache_close(c);
  assert_int_equal(link(f->path, link2), 0);
  xpj_cache_mode modes[] = {XPJ_CACHE_MODE_RW, XPJ_CACHE_MODE_RO};
  for (unsigned m = 0; m < 2; m++) {
    f->w.n = 0;
    f->w.text[0] = 0;
    c = open_cache(&f->w, link2, modes[m], GiB);
    assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_OFF);
    assert_int_equal(f->w.n, 1);
    assert_warned(&f->w, "the file has 2 names (hard links)");
    char why[4600];
    assert_true(xpj_cache_problem(c, why, sizeof why) > 0);
    assert_non_null(strstr(why, "no key is made here"));
    expect_miss(c, 1);
    uint64_t imp = 0, present = 0, damaged = 0;
    assert_int_not_equal(xpj_cache_import_counted(c, bpath, &imp, &present,
                                                  &damaged), XPJ_OK);
    assert_int_equal(imp, 0);
    xpj_cache_close(c);
    assert_false(exists(lkey));
  }
  /* by its own name: every row intact, signed with its key */
  f->w.n = 0;
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(verify_bad(c, NULL), 0);
  for (unsigned i = 1; i <= 3; i++)
    expect_hit(c, i, 100 * i);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
  unlink(link2);
}

/* The key that signs the rows: PATH.key, 32 random bytes, 0600, made by
 * the first writer; refused when others may read it; a lost or damaged key
 * costs the entries (each dropped as it is found), never the cache. */
static void test_key_file(void **state) {
  fx *f = *state;
  char kp[256];
  snprintf(kp, sizeof kp, "%s.key", f->path);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  for (unsigned i = 1; i <= 3; i++)
    put_i(c, i, 100);
  xpj_cache_close(c);
  struct stat sb;
  assert_int_equal(stat(kp, &sb), 0);
  assert_int_equal(sb.st_size, 32);
  assert_int_equal(sb.st_mode & 07777, 0600);
  size_t n = 0;
  uint8_t *key = read_all(kp, &n);
  /* no temporary left behind */
  DIR *d = opendir(f->dir);
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    if (strstr(de->d_name, ".key."))
      fail_msg("left behind: %s", de->d_name);
  closedir(d);
  /* readable by others: refused (it is a secret) */
  assert_int_equal(chmod(kp, 0644), 0);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_OFF);
  expect_miss(c, 1);
  xpj_cache_close(c);
  assert_int_equal(f->w.n, 1);
  assert_warned(&f->w, "readable by other users");
  assert_warned(&f->w, kp);
  assert_int_equal(chmod(kp, 0600), 0);
  f->w.n = 0;
  f->w.text[0] = 0;

  /* lost, read-only: nothing can be verified, the cache is off */
  assert_int_equal(unlink(kp), 0);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RO, 0);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_OFF);
  char why[4600];
  assert_true(xpj_cache_problem(c, why, sizeof why) > 0);
  assert_non_null(strstr(why, "no key"));
  expect_miss(c, 1);
  assert_int_equal(verify_bad(c, NULL), 1);
  xpj_cache_close(c);
  assert_false(exists(kp));
  assert_int_equal(f->w.n, 1);
  /* lost, read-write: a new key, said once (the file holds entries that
   * it makes unverifiable); the old rows fail, one at a time */
  f->w.n = 0;
  f->w.text[0] = 0;
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_RW);
  assert_int_equal(f->w.n, 1);
  assert_warned(&f->w, "was missing; made a new one");
  f->w.n = 0;
  expect_miss(c, 1);
  assert_int_equal(f->w.n, 1);
  assert_warned(&f->w, "failed its checksum");
  put_i(c, 1, 100);
  expect_hit(c, 1, 100);
  assert_int_equal(verify_bad(c, NULL), 2); /* 2 and 3 */
  xpj_cache_close(c);
  size_t n2 = 0;
  uint8_t *key2 = read_all(kp, &n2);
  assert_int_equal(n2, 32);
  assert_memory_not_equal(key, key2, 32); /* random, not derived */
  free(key);
  free(key2);

  /* damaged: off when read-only; replaced (with a warning) when writable */
  write_file(kp, "short", 5);
  assert_int_equal(chmod(kp, 0600), 0);
  f->w.n = 0;
  f->w.text[0] = 0;
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RO, 0);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_OFF);
  assert_warned(&f->w, "damaged");
  xpj_cache_close(c);
  f->w.n = 0;
  f->w.text[0] = 0;
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_RW);
  assert_int_equal(f->w.n, 1);
  assert_warned(&f->w, "made a new one");
  expect_miss(c, 1);
  put_i(c, 1, 100);
  expect_hit(c, 1, 100);
  xpj_cache_close(c);
  assert_int_equal(file_len(kp), 32);
  /* a long one: the warning says its size (it said the bytes read: "33
   * bytes, not 32" of a file of 100,000) */
  char *big = calloc(1, 100000);
  assert_non_null(big);
  write_file(kp, big, 100000);
  free(big);
  assert_int_equal(chmod(kp, 0600), 0);
  f->w.n = 0;
  f->w.text[0] = 0;
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RO, 0);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_OFF);
  assert_warned(&f->w, "damaged (100000 bytes, not 32)");
  xpj_cache_close(c);
}

/* ======================================================================== */
/* 4. degraded modes                                                        */
/* ======================================================================== */

static void test_no_directory(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, "/proc/xpjit-test-nodir/cache.db",
                            XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_OFF);
  assert_int_equal(f->w.n, 1);
  assert_warned(&f->w, "/proc/xpjit-test-nodir");
  /* the reason stays available: the cache is unusable, not empty */
  char why[1024];
  assert_true(xpj_cache_problem(c, why, sizeof why) > 0);
  assert_non_null(strstr(why, "/proc/xpjit-test-nodir"));
  assert_int_equal(xpj_cache_problem(c, NULL, 0), strlen(why));
  expect_miss(c, 1);
  put_i(c, 1, 100);
  expect_miss(c, 1);
  xpj_cache_stats s = stats_of(c);
  assert_int_equal(s.entries, 0);
  listing l = list_of(c);
  assert_int_equal(l.n, 0);
  uint64_t chk = 9, bad = 9;
  assert_int_equal(xpj_cache_verify(c, 1, NULL, NULL, &chk, &bad), XPJ_OK);
  assert_int_equal(chk, 0);
  assert_int_equal(bad, 1); /* verify tells the truth */
  assert_int_equal(xpj_cache_prune(c, 0, 0, NULL, NULL), XPJ_ERR_INVALID);
  assert_int_equal(xpj_cache_clear(c), XPJ_ERR_INVALID);
  assert_non_null(strstr(xpj_cache_last_error(), "/proc/xpjit-test-nodir"));
  xpj_cache_close(c);
  assert_int_equal(f->w.n, 1);

  /* the path is a directory: off (or read-only), with a warning, and the
   * directory is left alone */
  f->w.n = 0;
  char sub[256];
  snprintf(sub, sizeof sub, "%s/sub", f->dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  c = open_cache(&f->w, sub, XPJ_CACHE_MODE_RW, GiB);
  assert_int_not_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_RW);
  assert_int_equal(f->w.n, 1);
  assert_true(xpj_cache_problem(c, why, sizeof why) > 0);
  expect_miss(c, 1);
  put_i(c, 1, 100);
  assert_int_equal(xpj_cache_verify(c, 0, NULL, NULL, &chk, &bad), XPJ_OK);
  assert_int_equal(bad, 1);
  xpj_cache_close(c);
  /* read-only too */
  c = open_cache(&f->w, sub, XPJ_CACHE_MODE_RO, GiB);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_OFF);
  assert_true(xpj_cache_problem(c, why, sizeof why) > 0);
  xpj_cache_close(c);
  assert_int_equal(f->w.n, 2);
  struct stat sb;
  assert_int_equal(stat(sub, &sb), 0);
  assert_true(S_ISDIR(sb.st_mode));
  assert_false(exists2(sub, ".corrupt"));

  /* XPJIT_CACHE=off with the default mode */
  f->w.n = 0;
  setenv("XPJIT_CACHE", "off", 1);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_DEFAULT, GiB);
  unsetenv("XPJIT_CACHE");
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_OFF);
  assert_int_equal(xpj_cache_problem(c, why, sizeof why), 0); /* asked for */
  assert_string_equal(why, "");
  assert_int_equal(xpj_cache_verify(c, 0, NULL, NULL, &chk, &bad), XPJ_OK);
  assert_int_equal(bad, 0);
  put_i(c, 1, 100);
  xpj_cache_close(c);
  assert_false(exists(f->path));
  assert_int_equal(f->w.n, 0);
}

static void test_read_only(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 4000);
  expect_hit(c, 1, 4000);
  xpj_cache_close(c);
  assert_false(exists2(f->path, "-wal"));
  struct stat before, after;
  assert_int_equal(stat(f->path, &before), 0);
  nap_ms(20);

  /* read-only through the mode, and through XPJIT_CACHE=ro */
  for (int how = 0; how < 2; how++) {
    if (how)
      setenv("XPJIT_CACHE", "ro", 1);
    c = open_cache(&f->w, f->path,
                   how ? XPJ_CACHE_MODE_DEFAULT : XPJ_CACHE_MODE_RO, GiB);
    unsetenv("XPJIT_CACHE");
    assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_RO);
    tkey t;
    xpj_cache_entry e;
    assert_int_equal(xpj_cache_get(c, key_of(&t, 1), &e), XPJ_OK);
    assert_int_equal(check_val(&e, 1, 4000), 0);
    /* the RW get above was of a row used a moment ago: its hit waits in
     * the side file (a get returns the row as stored), which find adds */
    assert_int_equal(e.hits, 0);
    int64_t used = e.last_used_ms;
    char dg[65];
    memcpy(dg, e.digest, sizeof dg);
    xpj_cache_entry_clear(&e);
    assert_int_equal(xpj_cache_get(c, key_of(&t, 1), &e), XPJ_OK);
    assert_int_equal(e.hits, 0);
    assert_int_equal(e.last_used_ms, used);
    xpj_cache_entry_clear(&e);
    assert_int_equal(xpj_cache_find(c, dg, &e), XPJ_OK);
    assert_int_equal(e.hits, 1); /* the RW get above; no more */
    xpj_cache_entry_clear(&e);
    put_i(c, 2, 4000); /* a no-op */
    expect_miss(c, 2);
    assert_int_equal(stats_of(c).entries, 1);
    assert_int_equal(xpj_cache_prune(c, 1, 0, NULL, NULL), XPJ_ERR_INVALID);
    assert_int_equal(xpj_cache_clear(c), XPJ_ERR_INVALID);
    assert_int_equal(xpj_cache_set_meta(c, "x", "y"), XPJ_ERR_INVALID);
    uint64_t imp = 9;
    assert_int_equal(xpj_cache_import(c, f->path, &imp, NULL), XPJ_ERR_INVALID);
    xpj_cache_note(c, &(xpj_cache_counters){.compiles = 1});
    xpj_cache_close(c);
    assert_int_equal(stat(f->path, &after), 0);
    assert_int_equal(after.st_size, before.st_size);
    assert_int_equal(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
    assert_int_equal(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  }
  /* nothing of the read-only handles reached the database */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  xpj_cache_stats s = stats_of(c);
  assert_int_equal(s.counters.l2_hits, 1);
  assert_int_equal(s.counters.l2_misses, 0);
  assert_int_equal(s.counters.compiles, 0);
  assert_int_equal(s.entries, 1);
  xpj_cache_close(c);

  /* read-only where there is no database: off, and none is created */
  char missing[256];
  snprintf(missing, sizeof missing, "%s/none.db", f->dir);
  c = open_cache(&f->w, missing, XPJ_CACHE_MODE_RO, 0);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_OFF);
  assert_int_equal(xpj_cache_problem(c, NULL, 0), 0); /* nothing wrong */
  expect_miss(c, 1);
  xpj_cache_close(c);
  assert_false(exists(missing));
  assert_no_warning(&f->w);
}

/* In a child: the disk fills up (RLIMIT_FSIZE) during a 1 MB put. With
 * sig_dfl, SIGXFSZ keeps its default action (a program that does not
 * ignore it: the cache blocks it around its writes, and takes back one
 * they raise; it killed the process); else it is ignored. Returns the
 * exit code. */
static int disk_full_child(const char *path, bool sig_dfl) {
  wlog w;
  memset(&w, 0, sizeof w);
  xpj_cache_config cfg = {.path = path,
                          .mode = XPJ_CACHE_MODE_RW,
                          .max_size = GiB,
                          .warn = rec_warn,
                          .warn_ud = &w};
  xpj_cache *c = NULL;
  if (xpj_cache_open(&cfg, &c) != XPJ_OK || !c)
    return 10;
  if (xpj_cache_mode_of(c) != XPJ_CACHE_MODE_RW || w.n)
    return 11;
  signal(SIGXFSZ, sig_dfl ? SIG_DFL : SIG_IGN);
  struct rlimit rl = {64 * 1024, 64 * 1024};
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
    return 12;
  tkey t;
  tval v;
  xpj_status st = xpj_cache_put(c, key_of(&t, 2), val_of(&v, 2, 1 << 20));
  sigset_t pend, mask;
  sigpending(&pend);
  pthread_sigmask(SIG_SETMASK, NULL, &mask);
  if (sigismember(&pend, SIGXFSZ) == 1 || sigismember(&mask, SIGXFSZ) == 1)
    return 20; /* left pending, or the caller's mask changed */
  val_free(&v);
  if (st != XPJ_OK)
    return 13;
  if (w.n != 1 || !strstr(w.text, "storing an entry"))
    return 14;
  if (xpj_cache_mode_of(c) != XPJ_CACHE_MODE_RO)
    return 15;
  char why[1024];
  if (!xpj_cache_problem(c, why, sizeof why) || !strstr(why, "storing"))
    return 19;
  xpj_cache_entry e;
  if (xpj_cache_get(c, key_of(&t, 2), &e) != XPJ_ERR_NOT_FOUND)
    return 16;
  if (xpj_cache_get(c, key_of(&t, 1), &e) != XPJ_OK || check_val(&e, 1, 500))
    return 17;
  xpj_cache_entry_clear(&e);
  /* further puts are quiet no-ops */
  st = xpj_cache_put(c, key_of(&t, 3), val_of(&v, 3, 1 << 20));
  val_free(&v);
  if (st != XPJ_OK || w.n != 1)
    return 18;
  xpj_cache_close(c);
  return 0;
}

static void disk_full(fx *f, bool sig_dfl) {
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 500);
  xpj_cache_close(c);
  assert_true(file_len(f->path) < 48 * 1024);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0)
    _exit(disk_full_child(f->path, sig_dfl));
  int ws = 0;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
    fail_msg("disk-full child: %s %d", WIFEXITED(ws) ? "exit" : "signal",
             WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  uint64_t chk = 0;
  assert_int_equal(verify_bad(c, &chk), 0);
  assert_int_equal(chk, 1);
  expect_hit(c, 1, 500);
  expect_miss(c, 2);
  put_i(c, 2, 1 << 20);
  expect_hit(c, 2, 1 << 20);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

static void test_disk_full(void **state) { disk_full(*state, false); }

/* A file size limit (ulimit -f) with SIGXFSZ at its default action, as
 * most programs have it: the put fails as on a full disk, and the
 * program lives (it died of SIGXFSZ: a helper's probe of saxpy under
 * ulimit -f 20) */
static void test_disk_full_sigxfsz(void **state) { disk_full(*state, true); }

/* ======================================================================== */
/* 5. eviction and pruning                                                  */
/* ======================================================================== */

static void test_eviction(void **state) {
  fx *f = *state;
  const uint64_t max = 64 * 1024;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, max);
  assert_int_equal(stats_of(c).max_size, max);
  for (unsigned i = 0; i < 5; i++) {
    put_i(c, i, 10000);
    nap_ms(3);
  }
  /* 0 and 1 are used after 2, 3, 4 were put, and again after every put */
  for (unsigned i = 5; i < 16; i++) {
    expect_hit(c, 0, 10000);
    nap_ms(3);
    expect_hit(c, 1, 10000);
    nap_ms(3);
    put_i(c, i, 10000);
    xpj_cache_stats s = stats_of(c);
    if (s.bytes > max)
      fail_msg("after put %u: %llu bytes > %llu", i,
               (unsigned long long)s.bytes, (unsigned long long)max);
    nap_ms(3);
  }
  listing l = list_of(c);
  assert_true(listed(&l, 0));
  assert_true(listed(&l, 1));
  assert_true(listed(&l, 15));
  for (unsigned i = 2; i < 10; i++)
    if (listed(&l, i))
      fail_msg("key %u survived; least recently used", i);
  xpj_cache_stats s = stats_of(c);
  assert_true(s.entries >= 4 && s.entries <= 6);
  assert_int_equal(s.entries, l.n);
  assert_int_equal(s.counters.evictions, 16 - s.entries);
  /* the survivors are intact */
  expect_hit(c, 0, 10000);
  expect_hit(c, 15, 10000);
  expect_miss(c, 2);
  /* an entry larger than the limit does not leave the store over it */
  put_i(c, 40, 100000);
  assert_true(stats_of(c).bytes <= max);
  assert_int_equal(verify_bad(c, NULL), 0);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

static void test_prune(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  for (unsigned i = 0; i < 10; i++) {
    put_i(c, i, 10000);
    nap_ms(3);
  }
  expect_hit(c, 0, 10000); /* 0 is now the most recently used */
  listing before = list_of(c);
  assert_int_equal(before.n, 10);
  assert_string_equal(before.kernel[0], "k0");
  uint64_t one = before.size_sum / 10; /* all ten are the same size */
  assert_int_equal(before.size_sum % 10, 0);
  assert_int_equal(stats_of(c).bytes, before.size_sum);

  /* to a size: the least recently used go (1, 2, ...) */
  uint64_t removed = 0, freed = 0;
  assert_int_equal(xpj_cache_prune(c, 3 * one + one / 2, 0, &removed, &freed),
                   XPJ_OK);
  assert_int_equal(removed, 7);
  assert_int_equal(freed, 7 * one);
  assert_int_equal(stats_of(c).bytes, 3 * one);
  listing l = list_of(c);
  assert_int_equal(l.n, 3);
  assert_true(listed(&l, 0) && listed(&l, 9) && listed(&l, 8));
  assert_int_equal(stats_of(c).counters.evictions, 7);

  /* by age: rows last used two hours ago go; max_size 0 = the
   * configured. A hit writes a row's use time only once it is an hour old
   * (docs/cache.md, "Use times and hit counts"), so a row stored as used
   * 30 minutes ago may have been used a minute ago: it is kept by a
   * minute's limit (it was kept at 2 hours before the granularity too) */
  for (unsigned i = 20; i < 26; i++)
    put_i(c, i, 10000);
  for (unsigned i = 20; i < 23; i++) {
    tkey t;
    char d[65];
    digest_of(key_of(&t, i), d);
    char sql[160];
    snprintf(sql, sizeof sql,
             "UPDATE entries SET last_used = %lld WHERE digest=?1",
             (long long)(wall_ms() - 2 * 3600 * 1000));
    sql_run(f->path, sql, d);
  }
  {
    tkey t;
    char d[65];
    digest_of(key_of(&t, 25), d);
    char sql[160];
    snprintf(sql, sizeof sql,
             "UPDATE entries SET last_used = %lld WHERE digest=?1",
             (long long)(wall_ms() - 1800 * 1000));
    sql_run(f->path, sql, d);
  }
  uint64_t bytes_before = stats_of(c).bytes;
  assert_int_equal(xpj_cache_prune(c, 0, 60 * 1000, &removed, &freed), XPJ_OK);
  assert_int_equal(removed, 3);
  assert_true(freed > 3 * one && freed < 3 * one + 64);
  assert_int_equal(stats_of(c).bytes, bytes_before - freed);
  l = list_of(c);
  assert_int_equal(l.n, 6);
  for (unsigned i = 20; i < 23; i++)
    assert_false(listed(&l, i));
  assert_true(listed(&l, 23) && listed(&l, 24) && listed(&l, 0));
  assert_true(listed(&l, 25));
  /* nothing to do */
  assert_int_equal(xpj_cache_prune(c, 0, 60 * 1000, &removed, &freed), XPJ_OK);
  assert_int_equal(removed, 0);
  assert_int_equal(freed, 0);
  assert_int_equal(xpj_cache_prune(c, 1, 0, NULL, NULL), XPJ_OK);
  assert_int_equal(stats_of(c).entries, 0);
  assert_int_equal(xpj_cache_prune(NULL, 0, 0, NULL, NULL), XPJ_ERR_INVALID);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* ======================================================================== */
/* 6. many processes, many threads                                          */
/* ======================================================================== */

#define CONC_KEYS 40
#define CONC_PROCS 16
#define CONC_OPS 200

static size_t conc_size(unsigned i) { return 100 + (i * 7919u) % 20000; }

typedef struct conc_report {
  uint64_t put_mask; /* keys stored (put while the handle could write) */
  uint64_t gets, hits;
  uint64_t warnings;
  uint64_t degraded; /* handles that were not read-write at the end */
  char text[600];    /* the warnings (one child's; all of them in a sum) */
} conc_report;

/* One worker: random gets and puts on the shared key set. 0, or a code:
 * any status but OK and NOT_FOUND, any wrong value served, and any warning
 * when strict. */
static int conc_work(xpj_cache *c, wlog *w, bool strict, unsigned seed,
                     unsigned ops, conc_report *r) {
  for (unsigned op = 0; op < ops; op++) {
    unsigned i = (unsigned)rand_r(&seed) % CONC_KEYS;
    tkey t;
    key_of(&t, i);
    if (rand_r(&seed) & 1) {
      tval v;
      int nw = w->n;
      xpj_status st = xpj_cache_put(c, &t.k, val_of(&v, i, conc_size(i)));
      val_free(&v);
      if (st != XPJ_OK)
        return 21;
      if (w->n == nw && xpj_cache_mode_of(c) == XPJ_CACHE_MODE_RW)
        r->put_mask |= 1ull << i;
    } else {
      xpj_cache_entry e;
      xpj_status st = xpj_cache_get(c, &t.k, &e);
      r->gets++;
      if (st == XPJ_OK) {
        r->hits++;
        int bad = check_val(&e, i, conc_size(i));
        xpj_cache_entry_clear(&e);
        if (bad)
          return 22;
      } else if (st != XPJ_ERR_NOT_FOUND) {
        return 23;
      }
    }
    if (strict && w->n)
      return 24;
  }
  return 0;
}

static int conc_child(const char *path, unsigned id, int fd, bool strict) {
  wlog w;
  memset(&w, 0, sizeof w);
  xpj_cache_config cfg = {.path = path,
                          .mode = XPJ_CACHE_MODE_RW,
                          .max_size = GiB,
                          .warn = rec_warn,
                          .warn_ud = &w};
  xpj_cache *c = NULL;
  if (xpj_cache_open(&cfg, &c) != XPJ_OK)
    return 20;
  if (strict && (xpj_cache_mode_of(c) != XPJ_CACHE_MODE_RW || w.n))
    return 25;
  conc_report r;
  memset(&r, 0, sizeof r);
  int rc = conc_work(c, &w, strict, id * 7919u + 17, CONC_OPS, &r);
  if (rc)
    return rc;
  r.degraded = xpj_cache_mode_of(c) != XPJ_CACHE_MODE_RW;
  if (strict && r.degraded)
    return 26;
  xpj_cache_close(c);
  if (strict && w.n)
    return 27;
  r.warnings = (uint64_t)w.n;
  snprintf(r.text, sizeof r.text, "%.*s", (int)sizeof r.text - 1, w.text);
  if (write(fd, &r, sizeof r) != (ssize_t)sizeof r)
    return 28;
  return 0;
}

/* Runs CONC_PROCS children on f->path; returns what they did together. */
static conc_report run_children(fx *f, bool strict) {
  pid_t pids[CONC_PROCS];
  int fds[CONC_PROCS];
  fflush(NULL);
  for (unsigned p = 0; p < CONC_PROCS; p++) {
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pids[p] = fork();
    assert_true(pids[p] >= 0);
    if (pids[p] == 0) {
      close(pfd[0]);
      _exit(conc_child(f->path, p, pfd[1], strict));
    }
    close(pfd[1]);
    fds[p] = pfd[0];
  }
  conc_report all;
  memset(&all, 0, sizeof all);
  int failed = 0;
  for (unsigned p = 0; p < CONC_PROCS; p++) {
    int ws = 0;
    assert_int_equal(waitpid(pids[p], &ws, 0), pids[p]);
    conc_report r;
    ssize_t got = read(fds[p], &r, sizeof r);
    close(fds[p]);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0 || got != (ssize_t)sizeof r) {
      print_error("child %u: %s %d\n", p, WIFEXITED(ws) ? "exit" : "signal",
                  WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
      failed++;
      continue;
    }
    all.put_mask |= r.put_mask;
    all.gets += r.gets;
    all.hits += r.hits;
    all.warnings += r.warnings;
    all.degraded += r.degraded;
    size_t len = strlen(all.text);
    snprintf(all.text + len, sizeof all.text - len, "%.*s",
             (int)(sizeof all.text - len - 1), r.text);
  }
  assert_int_equal(failed, 0);
  assert_true(all.hits > 0 && all.hits < all.gets);
  return all;
}

/* Checks the database after run_children: every key stored is there and
 * right, nothing else is, the file is intact, and (when every child could
 * write to the end) no counter was lost between the processes. */
static void check_children(fx *f, const conc_report *all) {
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  xpj_cache_stats s = stats_of(c);
  if (!all->degraded) {
    assert_int_equal(s.counters.l2_hits, all->hits);
    assert_int_equal(s.counters.l2_misses, all->gets - all->hits);
  }
  unsigned npos = 0;
  for (unsigned i = 0; i < CONC_KEYS; i++)
    if (all->put_mask & (1ull << i)) {
      npos++;
      expect_hit(c, i, conc_size(i));
    } else if (!all->degraded) {
      expect_miss(c, i);
    }
  if (all->degraded)
    assert_true(s.entries >= npos);
  else
    assert_int_equal(s.entries, npos);
  uint64_t chk = 0;
  assert_int_equal(verify_bad(c, &chk), 0);
  assert_int_equal(chk, s.entries);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

static void test_processes(void **state) {
  fx *f = *state;
  /* the database does not exist yet: the children race to create it */
  conc_report all = run_children(f, true);
  assert_int_equal(all.warnings, 0);
  assert_int_equal(all.degraded, 0);
  check_children(f, &all);
  assert_false(exists2(f->path, ".corrupt"));
}

/* The children all find a damaged file at once: one of them moves it aside
 * (under the lock) and warns; the others use the new database, and nobody
 * loses an entry or is served a wrong one. */
static void test_processes_recover(void **state) {
  fx *f = *state;
  uint8_t junk[8192];
  for (size_t j = 0; j < sizeof junk; j++)
    junk[j] = (uint8_t)(j * 101 + 3);
  write_file(f->path, junk, sizeof junk);
  conc_report all = run_children(f, false);
  assert_true(exists2(f->path, ".corrupt"));
  assert_true(all.warnings >= 1);
  check_children(f, &all);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  uint64_t corrupt = stats_of(c).counters.corrupt;
  xpj_cache_close(c);
  assert_true(corrupt >= 1);
  KNOWN_BUG_FIXED(all.warnings != 1 || all.degraded,
            "concurrent recovery: %llu warnings (1 expected), %llu of %d "
            "processes lost the cache: %s",
            (unsigned long long)all.warnings, (unsigned long long)all.degraded,
            CONC_PROCS, all.text);
  assert_int_equal(corrupt, 1);
}

typedef struct thr_arg {
  xpj_cache *c;
  wlog *w;
  unsigned seed;
  conc_report r;
  int rc;
} thr_arg;

static void *thr_main(void *p) {
  thr_arg *a = p;
  a->rc = conc_work(a->c, a->w, true, a->seed, 150, &a->r);
  return NULL;
}

static void test_threads(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  thr_arg a[4];
  pthread_t th[4];
  for (unsigned i = 0; i < 4; i++) {
    memset(&a[i], 0, sizeof a[i]);
    a[i].c = c;
    a[i].w = &f->w;
    a[i].seed = 100 + i;
    a[i].rc = -1;
    assert_int_equal(pthread_create(&th[i], NULL, thr_main, &a[i]), 0);
  }
  uint64_t mask = 0, gets = 0, hits = 0;
  for (unsigned i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(a[i].rc, 0);
    mask |= a[i].r.put_mask;
    gets += a[i].r.gets;
    hits += a[i].r.hits;
  }
  xpj_cache_stats s = stats_of(c);
  assert_int_equal(s.counters.l2_hits, hits);
  assert_int_equal(s.counters.l2_misses, gets - hits);
  for (unsigned i = 0; i < CONC_KEYS; i++)
    if (mask & (1ull << i))
      expect_hit(c, i, conc_size(i));
  assert_int_equal(s.entries, (uint64_t)__builtin_popcountll(mask));
  assert_int_equal(verify_bad(c, NULL), 0);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* A warning handler may call back into the cache that warned (the runtime's
 * handler runs the application's, which may do anything). The cache must
 * not hold its lock while it warns. Run in a child with a watchdog, so that
 * a deadlock fails the test instead of hanging it. */
typedef struct reent {
  xpj_cache *c;
  int n, bad;
} reent;

static void reent_warn(void *ud, const char *msg) {
  reent *r = ud;
  r->n++;
  if (!r->c)
    return;
  xpj_cache_stats s;
  if (xpj_cache_get_stats(r->c, &s) != XPJ_OK)
    r->bad++;
  tkey t;
  xpj_cache_entry e;
  if (xpj_cache_get(r->c, key_of(&t, 3), &e) == XPJ_OK)
    xpj_cache_entry_clear(&e);
  (void)msg;
}

static int reent_child(const char *path, const char *bundle) {
  alarm(30); /* a watchdog, not a measurement: the work takes milliseconds */
  reent r = {0};
  xpj_cache_config cfg = {.path = path,
                          .mode = XPJ_CACHE_MODE_RW,
                          .max_size = GiB,
                          .warn = reent_warn,
                          .warn_ud = &r};
  xpj_cache *c = NULL;
  if (xpj_cache_open(&cfg, &c) != XPJ_OK)
    return 50;
  r.c = c;
  tkey t;
  xpj_cache_entry e;
  if (xpj_cache_get(c, key_of(&t, 1), &e) != XPJ_ERR_NOT_FOUND) /* damaged */
    return 51;
  if (r.n != 1)
    return 52;
  uint64_t imp = 0, skip = 0;
  if (xpj_cache_import(c, bundle, &imp, &skip) != XPJ_OK || skip < 1)
    return 53;
  if (r.n != 2)
    return 54;
  r.c = NULL;
  xpj_cache_close(c);
  return r.bad ? 55 : 0;
}

static void test_warn_reentrant(void **state) {
  fx *f = *state;
  char bpath[256], fresh[256];
  snprintf(bpath, sizeof bpath, "%s/r.xpjb", f->dir);
  snprintf(fresh, sizeof fresh, "%s/fresh.db", f->dir);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  for (unsigned i = 1; i <= 3; i++)
    put_i(c, i, 300);
  assert_int_equal(xpj_cache_export(c, bpath, NULL), XPJ_OK);
  xpj_cache_close(c);
  tkey t;
  char d1[65], d2[65];
  digest_of(key_of(&t, 1), d1);
  digest_of(key_of(&t, 2), d2);
  sql_flip_data(f->path, d1, 10);
  sql_flip_data(bpath, d2, 10);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0)
    _exit(reent_child(f->path, bpath));
  int ws = 0;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  KNOWN_BUG_FIXED(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGALRM,
                  "a warning handler that calls the cache deadlocks: "
                  "cache.c warns while holding the handle's lock");
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
    fail_msg("child: %s %d", WIFEXITED(ws) ? "exit" : "signal",
             WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
  assert_no_warning(&f->w);
}

/* ======================================================================== */
/* 7. processes killed while writing                                        */
/* ======================================================================== */

#define CRASH_KEYS 24
#define CRASH_ROUNDS 100
#define CRASH_WRITERS 4

static size_t crash_size(unsigned i) { return 1000 + (i * 104729u) % 200000; }

static void die_on_warn(void *ud, const char *msg) {
  (void)ud;
  (void)msg;
  _exit(40);
}

static void crash_writer(const char *path, unsigned seed) {
  xpj_cache_config cfg = {.path = path,
                          .mode = XPJ_CACHE_MODE_RW,
                          .max_size = 2 << 20,
                          .warn = die_on_warn};
  xpj_cache *c = NULL;
  if (xpj_cache_open(&cfg, &c) != XPJ_OK)
    _exit(41);
  if (xpj_cache_mode_of(c) != XPJ_CACHE_MODE_RW)
    _exit(42);
  for (;;) {
    unsigned i = (unsigned)rand_r(&seed) % CRASH_KEYS;
    tkey t;
    key_of(&t, i);
    if (rand_r(&seed) % 4 == 0) {
      xpj_cache_entry e;
      xpj_status st = xpj_cache_get(c, &t.k, &e);
      if (st == XPJ_OK && check_val(&e, i, crash_size(i)))
        _exit(43);
      if (st != XPJ_OK && st != XPJ_ERR_NOT_FOUND)
        _exit(44);
      xpj_cache_entry_clear(&e);
    } else {
      tval v;
      xpj_status st = xpj_cache_put(c, &t.k, val_of(&v, i, crash_size(i)));
      val_free(&v);
      if (st != XPJ_OK)
        _exit(45);
    }
  }
}

static int crash_entry_fn(void *ud, const xpj_cache_entry *e) {
  uint64_t *mask = ud;
  unsigned i = 0;
  if (sscanf(e->kernel, "k%u", &i) == 1 && i < 64)
    *mask |= 1ull << i;
  else
    *mask |= 1ull << 63;
  return 0;
}

static void test_crashes(void **state) {
  fx *f = *state;
  unsigned seed = 4242;
  uint64_t served = 0;
  for (unsigned round = 0; round < CRASH_ROUNDS; round++) {
    if (round % 10 == 5) { /* now and then start from nothing again */
      unlink(f->path);
      char p[256];
      snprintf(p, sizeof p, "%s-wal", f->path);
      unlink(p);
      snprintf(p, sizeof p, "%s-shm", f->path);
      unlink(p);
    }
    pid_t pids[CRASH_WRITERS];
    unsigned at[CRASH_WRITERS];
    fflush(NULL);
    for (unsigned w = 0; w < CRASH_WRITERS; w++) {
      at[w] = (unsigned)rand_r(&seed) % 21; /* ms */
      unsigned cs = (unsigned)rand_r(&seed);
      pids[w] = fork();
      if (pids[w] < 0) { /* the writers loop forever: stop them */
        for (unsigned v = 0; v < w; v++) {
          kill(pids[v], SIGKILL);
          waitpid(pids[v], NULL, 0);
        }
        fail_msg("fork: %s", strerror(errno));
      }
      if (pids[w] == 0)
        crash_writer(f->path, cs);
    }
    int64_t t0 = wall_ms();
    for (unsigned ms = 0; ms <= 20; ms++) {
      for (unsigned w = 0; w < CRASH_WRITERS; w++)
        if (at[w] == ms)
          kill(pids[w], SIGKILL);
      int64_t next = t0 + ms + 1, now = wall_ms();
      if (next > now)
        nap_ms((unsigned)(next - now));
    }
    for (unsigned w = 0; w < CRASH_WRITERS; w++) {
      int ws = 0;
      assert_int_equal(waitpid(pids[w], &ws, 0), pids[w]);
      if (!(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL))
        fail_msg("round %u writer %u: %s %d", round, w,
                 WIFEXITED(ws) ? "exit" : "signal",
                 WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
    }
    if (!exists(f->path))
      continue; /* all killed before they created it */
    xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, 2 << 20);
    assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_RW);
    uint64_t chk = 0, bad = 0;
    assert_int_equal(xpj_cache_verify(c, 0, NULL, NULL, &chk, &bad), XPJ_OK);
    if (bad)
      fail_msg("round %u: %llu bad of %llu", round, (unsigned long long)bad,
               (unsigned long long)chk);
    uint64_t mask = 0;
    assert_int_equal(xpj_cache_list(c, crash_entry_fn, &mask), XPJ_OK);
    assert_int_equal(mask >> CRASH_KEYS, 0);
    assert_int_equal((uint64_t)__builtin_popcountll(mask), chk);
    for (unsigned i = 0; i < CRASH_KEYS; i++)
      if (mask & (1ull << i)) {
        expect_hit(c, i, crash_size(i));
        served++;
      }
    assert_true(stats_of(c).bytes <= 2 << 20);
    xpj_cache_close(c);
    if (f->w.n)
      fail_msg("round %u: %s", round, f->w.text);
    assert_false(exists2(f->path, ".corrupt"));
  }
  /* the writers got something done */
  assert_true(served > 0);
}

/* ======================================================================== */
/* 8. bundles                                                               */
/* ======================================================================== */

/* An export builds its bundle in a directory of its own beside the output
 * (mkdtemp: 0700, a name nobody can guess), so that nobody can plant a
 * file (an SQLite journal) beside it; what is at the name it used before,
 * PATH.tmp.PID (a file, a link, a directory others may enter: planted by
 * another user in /tmp, each stopped the export), neither stops it nor is
 * touched; a long output name works (PATH.tmp.PID was then longer than a
 * name may be); nothing is left beside the output when it returns. And
 * xpj_cache_export_in builds in the caller's directory, a private one
 * only. */
static void test_export_private_dir(void **state) {
  fx *f = *state;
  char bpath[256], old[300];
  snprintf(bpath, sizeof bpath, "%s/e.xpjb", f->dir);
  snprintf(old, sizeof old, "%s.tmp.%ld", bpath, (long)getpid());
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  for (unsigned i = 0; i < 3; i++)
    put_i(c, i, 2000 + 10 * i);
  uint64_t n = 0;
  struct stat sb, before;
  FILE *fp = fopen(old, "w");
  assert_non_null(fp);
  fputs("theirs", fp);
  fclose(fp);
  assert_int_equal(xpj_cache_export(c, bpath, &n), XPJ_OK);
  assert_int_equal(n, 3);
  assert_int_equal(lstat(old, &sb), 0);
  assert_true(S_ISREG(sb.st_mode) && sb.st_size == 6); /* left alone */
  assert_int_equal(unlink(old), 0);
  assert_int_equal(symlink(f->dir, old), 0);
  assert_int_equal(xpj_cache_export(c, bpath, &n), XPJ_OK);
  assert_int_equal(unlink(old), 0);
  assert_int_equal(mkdir(old, 0755), 0);
  assert_int_equal(xpj_cache_export(c, bpath, &n), XPJ_OK);
  assert_int_equal(rmdir(old), 0);
  assert_false(exists2(bpath, "-journal"));
  DIR *dd = opendir(f->dir);
  assert_non_null(dd);
  for (struct dirent *e; (e = readdir(dd));)
    if (!strncmp(e->d_name, ".xpjit-export-", 14))
      fail_msg("left beside the output: %s", e->d_name);
  closedir(dd);
  /* a name of 250 bytes */
  char longp[600];
  int ln = snprintf(longp, sizeof longp, "%s/", f->dir);
  memset(longp + ln, 'x', 245);
  snprintf(longp + ln + 245, sizeof longp - (size_t)ln - 245, ".xpjb");
  assert_int_equal(xpj_cache_export(c, longp, &n), XPJ_OK);
  assert_int_equal(n, 3);
  assert_int_equal(unlink(longp), 0);
  /* the caller's directory: refused and left alone unless private */
  char mine[300];
  snprintf(mine, sizeof mine, "%s/mine-XXXXXX", f->dir);
  assert_non_null(mkdtemp(mine));
  assert_int_equal(chmod(mine, 0755), 0);
  assert_int_equal(stat(bpath, &before), 0);
  assert_int_equal(xpj_cache_export_in(c, bpath, mine, &n), XPJ_ERR_INVALID);
  assert_non_null(strstr(xpj_cache_last_error(), "private"));
  assert_int_equal(lstat(mine, &sb), 0);
  assert_int_equal(chmod(mine, 0700), 0);
  if (geteuid() == 0) { /* another user's private directory */
    assert_int_equal(chown(mine, 65534, 65534), 0);
    assert_int_equal(xpj_cache_export_in(c, bpath, mine, &n),
                     XPJ_ERR_INVALID);
    assert_int_equal(lstat(mine, &sb), 0);
    assert_int_equal(chown(mine, 0, 0), 0);
  }
  struct stat after;
  assert_int_equal(stat(bpath, &after), 0);
  assert_int_equal(before.st_ino, after.st_ino); /* not replaced */
  assert_int_equal(xpj_cache_export_in(c, bpath, mine, &n), XPJ_OK);
  assert_int_equal(n, 3);
  assert_int_not_equal(lstat(mine, &sb), 0); /* removed */
  char tpl[8];
  assert_int_equal(xpj_cache_export_template(bpath, tpl, sizeof tpl),
                   XPJ_ERR_INVALID); /* does not fit */
  /* and the bundle it wrote is whole */
  xpj_cache_close(c);
  xpj_cache_config bc = {
      .path = bpath, .bundle = 1, .warn = rec_warn, .warn_ud = &f->w};
  xpj_cache *b = NULL;
  assert_int_equal(xpj_cache_open(&bc, &b), XPJ_OK);
  for (unsigned i = 0; i < 3; i++)
    expect_hit(b, i, 2000 + 10 * i);
  xpj_cache_close(b);
}

static void test_bundles(void **state) {
  fx *f = *state;
  char bpath[256], dpath[256];
  snprintf(bpath, sizeof bpath, "%s/k.xpjb", f->dir);
  snprintf(dpath, sizeof dpath, "%s/damaged.xpjb", f->dir);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  for (unsigned i = 0; i < 4; i++)
    put_i(c, i, 3000 + 100 * i);
  tkey tf;
  xpj_cache_value failed = {1, NULL, 0, "", "error: failed", 0, 0, 1.0, 0};
  assert_int_equal(xpj_cache_put(c, key_of(&tf, 4), &failed), XPJ_OK);
  uint64_t n = 0;
  assert_int_equal(xpj_cache_export(c, bpath, &n), XPJ_OK);
  assert_int_equal(n, 4);
  assert_true(exists(bpath));
  assert_false(exists2(bpath, "-wal"));
  assert_false(exists2(bpath, "-journal"));
  /* no temporary left behind */
  {
    DIR *d = opendir(f->dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
      if (strstr(de->d_name, ".tmp."))
        fail_msg("left behind: %s", de->d_name);
    closedir(d);
  }
  /* exporting where it cannot be written is an error */
  assert_int_not_equal(xpj_cache_export(c, "/proc/xpjit-test-nodir/k.xpjb", &n),
                       XPJ_OK);
  assert_true(xpj_cache_last_error()[0] != 0);
  xpj_cache_close(c);

  /* the bundle, opened as one: read-only, the successful entries */
  struct stat before, after;
  assert_int_equal(stat(bpath, &before), 0);
  xpj_cache_config bc = {
      .path = bpath, .bundle = 1, .warn = rec_warn, .warn_ud = &f->w};
  xpj_cache *b = NULL;
  assert_int_equal(xpj_cache_open(&bc, &b), XPJ_OK);
  assert_int_equal(xpj_cache_mode_of(b), XPJ_CACHE_MODE_RO);
  for (unsigned i = 0; i < 4; i++)
    expect_hit(b, i, 3000 + 100 * i);
  expect_miss(b, 4);
  put_i(b, 9, 10);
  expect_miss(b, 9);
  xpj_cache_stats s = stats_of(b);
  assert_int_equal(s.entries, 4);
  assert_int_equal(s.failed_entries, 0);
  assert_int_equal(s.max_size, UINT64_MAX);
  char *kind = NULL;
  assert_int_equal(xpj_cache_get_meta(b, "kind", &kind), XPJ_OK);
  assert_string_equal(kind, "bundle");
  free(kind);
  /* self-describing: the targets and versions of its entries */
  assert_int_equal(xpj_cache_get_meta(b, "targets", &kind), XPJ_OK);
  assert_string_equal(kind, "cpu:x86_64-znver4");
  free(kind);
  assert_int_equal(xpj_cache_get_meta(b, "versions", &kind), XPJ_OK);
  assert_string_equal(kind, "xpjit=0.1.0;llvm=22.1.8;abi=3");
  free(kind);
  assert_int_equal(xpj_cache_get_meta(b, "nope", &kind), XPJ_ERR_NOT_FOUND);
  assert_null(kind);
  char *targets = NULL, *versions = NULL;
  assert_int_equal(xpj_cache_targets(b, &targets, &versions), XPJ_OK);
  assert_string_equal(targets, "cpu:x86_64-znver4");
  assert_string_equal(versions, "xpjit=0.1.0;llvm=22.1.8;abi=3");
  free(targets);
  free(versions);
  assert_int_equal(verify_bad(b, NULL), 0);
  xpj_cache_close(b);
  assert_int_equal(stat(bpath, &after), 0);
  assert_int_equal(after.st_size, before.st_size);
  assert_int_equal(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);

  /* imported into a fresh cache */
  char fresh[256];
  snprintf(fresh, sizeof fresh, "%s/fresh.db", f->dir);
  c = open_cache(&f->w, fresh, XPJ_CACHE_MODE_RW, GiB);
  uint64_t imp = 9, skip = 9;
  assert_int_equal(xpj_cache_import(c, bpath, &imp, &skip), XPJ_OK);
  assert_int_equal(imp, 4);
  assert_int_equal(skip, 0);
  for (unsigned i = 0; i < 4; i++)
    expect_hit(c, i, 3000 + 100 * i);
  expect_miss(c, 4);
  /* again: all present, all kept */
  assert_int_equal(xpj_cache_import(c, bpath, &imp, &skip), XPJ_OK);
  assert_int_equal(imp, 0);
  assert_int_equal(skip, 4);
  assert_int_equal(stats_of(c).entries, 4);
  assert_no_warning(&f->w);

  /* garbage, a missing file, a cache that is not a bundle of ours */
  char junk[256];
  snprintf(junk, sizeof junk, "%s/junk.xpjb", f->dir);
  uint8_t g[4096];
  for (size_t j = 0; j < sizeof g; j++)
    g[j] = (uint8_t)(j * 97 + 5);
  write_file(junk, g, sizeof g);
  xpj_status st = xpj_cache_import(c, junk, &imp, &skip);
  assert_int_not_equal(st, XPJ_OK);
  assert_true(xpj_cache_last_error()[0] != 0);
  assert_non_null(strstr(xpj_cache_last_error(), junk));
  char missing[256];
  snprintf(missing, sizeof missing, "%s/missing.xpjb", f->dir);
  st = xpj_cache_import(c, missing, &imp, &skip);
  assert_int_not_equal(st, XPJ_OK);
  assert_non_null(strstr(xpj_cache_last_error(), missing));
  assert_false(exists(missing));
  b = (xpj_cache *)&bc;
  bc.path = junk;
  assert_int_not_equal(xpj_cache_open(&bc, &b), XPJ_OK);
  assert_null(b);
  bc.path = missing;
  assert_int_not_equal(xpj_cache_open(&bc, &b), XPJ_OK);
  assert_null(b);
  write_file(junk, "", 0); /* empty: not a bundle either */
  bc.path = junk;
  assert_int_not_equal(xpj_cache_open(&bc, &b), XPJ_OK);
  assert_null(b);
  /* cut inside its last page (a copy cut short): SQLite reads the rest as
   * zeros and opened it, its index rows there lost; refused, as a cut on
   * a page boundary is */
  {
    size_t whole = 0;
    uint8_t *bytes = read_all(bpath, &whole);
    assert_true(whole > 4096);
    size_t cuts[] = {whole - 1, whole - 4096 + 10};
    for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
      write_file(junk, bytes, cuts[k]);
      b = (xpj_cache *)&bc;
      assert_int_equal(xpj_cache_open(&bc, &b), XPJ_ERR_INVALID);
      assert_null(b);
      if (!strstr(xpj_cache_last_error(), "truncated"))
        fail_msg("cut to %zu of %zu bytes: %s", cuts[k], whole,
                 xpj_cache_last_error());
      assert_int_not_equal(xpj_cache_import(c, junk, &imp, &skip), XPJ_OK);
    }
    free(bytes);
  }
  assert_int_equal(stats_of(c).entries, 4);
  xpj_cache_close(c);
  assert_no_warning(&f->w);

  /* a damaged row is skipped on import, with a warning */
  size_t blen = 0;
  uint8_t *bb = read_all(bpath, &blen);
  write_file(dpath, bb, blen);
  free(bb);
  tkey t2;
  char d2[65];
  digest_of(key_of(&t2, 2), d2);
  sql_flip_data(dpath, d2, 100);
  char fresh2[256];
  snprintf(fresh2, sizeof fresh2, "%s/fresh2.db", f->dir);
  c = open_cache(&f->w, fresh2, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_import(c, dpath, &imp, &skip), XPJ_OK);
  assert_int_equal(imp, 3);
  assert_int_equal(skip, 1);
  assert_int_equal(f->w.n, 1);
  assert_warned(&f->w, "damaged");
  expect_miss(c, 2);
  expect_hit(c, 1, 3100);
  expect_hit(c, 3, 3300);
  /* and is a miss when the damaged bundle is used directly */
  bc.path = dpath;
  assert_int_equal(xpj_cache_open(&bc, &b), XPJ_OK);
  f->w.n = 0;
  f->w.text[0] = 0;
  expect_miss(b, 2);
  assert_int_equal(f->w.n, 1);
  assert_int_equal(rows_with(dpath, d2), 1);
  KNOWN_BUG_FIXED(strstr(f->w.text, "dropped") != NULL,
                  "a bundle says it dropped a damaged entry it cannot "
                  "change: %s", f->w.text);
  assert_warned(&f->w, "bundle");
  assert_warned(&f->w, "not used");
  expect_hit(b, 1, 3100);
  assert_int_equal(verify_bad(b, NULL), 1);
  xpj_cache_close(b);
  /* re-exporting never carries the damaged row */
  uint64_t ne = 0;
  char again[256];
  snprintf(again, sizeof again, "%s/again.xpjb", f->dir);
  bc.path = dpath;
  bc.mode = XPJ_CACHE_MODE_RO;
  assert_int_equal(xpj_cache_open(&bc, &b), XPJ_OK);
  assert_int_equal(xpj_cache_export(b, again, &ne), XPJ_OK);
  assert_int_equal(ne, 3);
  xpj_cache_close(b);
  xpj_cache_close(c);
  assert_int_equal(xpj_cache_import(NULL, bpath, NULL, NULL), XPJ_ERR_INVALID);

  /* a row whose columns are not its key's (no checksum covers them: a
   * bundle's is plain SHA-256 anyway) is damaged for verify, show, export
   * and import, which counts it apart from what is already there, in
   * one reading of the bundle */
  bb = read_all(bpath, &blen);
  write_file(dpath, bb, blen);
  free(bb);
  tkey t3;
  char d3[65];
  digest_of(key_of(&t3, 3), d3);
  sql_run(dpath, "UPDATE entries SET kernel = 'other' WHERE digest=?1", d3);
  bc.path = dpath;
  bc.mode = XPJ_CACHE_MODE_RO;
  assert_int_equal(xpj_cache_open(&bc, &b), XPJ_OK);
  assert_int_equal(verify_bad(b, NULL), 1);
  xpj_cache_entry fe;
  char pre[9];
  snprintf(pre, sizeof pre, "%.8s", d3);
  assert_int_equal(xpj_cache_find(b, pre, &fe), XPJ_ERR_IO);
  assert_non_null(strstr(xpj_cache_last_error(), "damaged"));
  assert_int_equal(xpj_cache_export(b, again, &ne), XPJ_OK);
  assert_int_equal(ne, 3);
  xpj_cache_close(b);
  f->w.n = 0;
  snprintf(fresh2, sizeof fresh2, "%s/fresh3.db", f->dir);
  c = open_cache(&f->w, fresh2, XPJ_CACHE_MODE_RW, GiB);
  uint64_t present = 9, damaged = 9;
  assert_int_equal(
      xpj_cache_import_counted(c, dpath, &imp, &present, &damaged), XPJ_OK);
  assert_int_equal(imp, 3);
  assert_int_equal(present, 0);
  assert_int_equal(damaged, 1);
  assert_warned(&f->w, "damaged");
  expect_miss(c, 3);
  /* into a cache that has all: present and damaged apart; the bundle's
   * damaged row never replaces the good one */
  assert_int_equal(xpj_cache_import(c, bpath, &imp, NULL), XPJ_OK);
  assert_int_equal(imp, 1);
  expect_hit(c, 3, 3300);
  assert_int_equal(
      xpj_cache_import_counted(c, dpath, &imp, &present, &damaged), XPJ_OK);
  assert_int_equal(imp, 0);
  assert_int_equal(present, 3);
  assert_int_equal(damaged, 1);
  assert_int_equal(xpj_cache_import(c, dpath, &imp, &skip), XPJ_OK);
  assert_int_equal(skip, 4);
  /* and in the user's own cache: verify names it (leaving the thread's
   * last error as it was: the call succeeds), a good bundle row replaces
   * it, and repair removes it */
  sql_run(fresh2, "UPDATE entries SET kernel = '' WHERE digest=?1", d3);
  xpj_cache_close(c);
  c = open_cache(&f->w, fresh2, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_import(NULL, NULL, NULL, NULL), XPJ_ERR_INVALID);
  char said[256];
  snprintf(said, sizeof said, "%s", xpj_cache_last_error());
  assert_int_equal(verify_bad(c, NULL), 1);
  assert_string_equal(xpj_cache_last_error(), said);
  assert_int_equal(
      xpj_cache_import_counted(c, bpath, &imp, &present, &damaged), XPJ_OK);
  assert_int_equal(imp, 1);
  assert_int_equal(present, 3);
  assert_int_equal(damaged, 0);
  assert_int_equal(verify_bad(c, NULL), 0);
  sql_run(fresh2, "UPDATE entries SET code = 'x' || code WHERE digest=?1", d3);
  assert_int_equal(verify_bad(c, NULL), 1);
  uint64_t chk = 0, nb = 0;
  assert_int_equal(xpj_cache_verify(c, 1, NULL, NULL, &chk, &nb), XPJ_OK);
  assert_int_equal(nb, 1);
  assert_int_equal(verify_bad(c, NULL), 0);
  xpj_cache_close(c);
  assert_int_equal(xpj_cache_import_counted(NULL, bpath, &imp, &present,
                                            &damaged),
                   XPJ_ERR_INVALID);
  assert_int_equal(imp + present + damaged, 0);
}

/* An import enforces the cache's size limit like a put, whatever the number
 * of rows (they are copied in transactions of 64). */
static void test_import_eviction(void **state) {
  fx *f = *state;
  char bpath[256], small[256];
  snprintf(bpath, sizeof bpath, "%s/b.xpjb", f->dir);
  for (unsigned rows = 63; rows <= 65; rows++) {
    unlink(bpath);
    xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
    assert_int_equal(xpj_cache_clear(c), XPJ_OK);
    for (unsigned i = 0; i < rows; i++)
      put_i(c, i, 1000);
    uint64_t n = 0;
    assert_int_equal(xpj_cache_export(c, bpath, &n), XPJ_OK);
    assert_int_equal(n, rows);
    xpj_cache_close(c);
    snprintf(small, sizeof small, "%s/small%u.db", f->dir, rows);
    const uint64_t max = 16 * 1024;
    c = open_cache(&f->w, small, XPJ_CACHE_MODE_RW, max);
    uint64_t imp = 0, skip_n = 0;
    assert_int_equal(xpj_cache_import(c, bpath, &imp, &skip_n), XPJ_OK);
    assert_int_equal(imp, rows);
    assert_int_equal(skip_n, 0);
    xpj_cache_stats s = stats_of(c);
    xpj_cache_close(c);
    assert_no_warning(&f->w);
    if (s.bytes > max)
      fail_msg("%u rows imported: %llu bytes > %llu", rows,
               (unsigned long long)s.bytes, (unsigned long long)max);
    assert_true(s.entries > 0 && s.entries < rows);
  }
}

/* An import that fails part of the way (here a trigger that refuses the
 * 71st row) keeps the transactions of 64 committed before it, and counts
 * those only: the six rows of the batch rolled back are not imported. */
static void test_import_fails_midway(void **state) {
  fx *f = *state;
  char bpath[256], target[256];
  snprintf(bpath, sizeof bpath, "%s/b80.xpjb", f->dir);
  snprintf(target, sizeof target, "%s/t80.db", f->dir);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_clear(c), XPJ_OK);
  for (unsigned i = 0; i < 80; i++)
    put_i(c, i, 100);
  uint64_t n = 0;
  assert_int_equal(xpj_cache_export(c, bpath, &n), XPJ_OK);
  assert_int_equal(n, 80);
  xpj_cache_close(c);
  /* (added once the handle has checked the file's schema, which refuses
   * a trigger at open) */
  c = open_cache(&f->w, target, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_clear(c), XPJ_OK);
  sql_run(target, "CREATE TRIGGER full BEFORE INSERT ON entries WHEN "
                  "(SELECT count(*) FROM entries) >= 70 BEGIN "
                  "SELECT RAISE(ABORT, 'full'); END", NULL);
  uint64_t imp = 9, present = 9, damaged = 9;
  assert_int_equal(
      xpj_cache_import_counted(c, bpath, &imp, &present, &damaged),
      XPJ_ERR_IO);
  assert_int_equal(imp, 64);
  assert_int_equal(present, 0);
  assert_int_equal(damaged, 0);
  assert_int_equal(stats_of(c).entries, 64);
  xpj_cache_close(c);
}

/* ======================================================================== */
/* 9. maintenance and parsers                                               */
/* ======================================================================== */

static void test_list_find_clear(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  for (unsigned i = 0; i < 3; i++) {
    put_i(c, i, 100 + i);
    nap_ms(3);
  }
  expect_hit(c, 0, 100);
  listing l = list_of(c);
  assert_int_equal(l.n, 3);
  assert_string_equal(l.kernel[0], "k0");
  assert_string_equal(l.kernel[1], "k2");
  assert_string_equal(l.kernel[2], "k1");
  assert_true(l.last_used[0] > l.last_used[1] &&
              l.last_used[1] > l.last_used[2]);
  memset(&l, 0, sizeof l);
  l.stop_after = 1;
  assert_int_equal(xpj_cache_list(c, list_fn, &l), XPJ_OK);
  assert_int_equal(l.n, 1);
  assert_int_equal(xpj_cache_list(c, NULL, NULL), XPJ_ERR_INVALID);

  /* find by digest prefix */
  tkey t;
  char d0[65];
  digest_of(key_of(&t, 0), d0);
  xpj_cache_entry e;
  for (size_t len = 8; len <= 64; len += 56) {
    char pre[65];
    snprintf(pre, sizeof pre, "%.*s", (int)len, d0);
    assert_int_equal(xpj_cache_find(c, pre, &e), XPJ_OK);
    assert_string_equal(e.digest, d0);
    assert_int_equal(check_val(&e, 0, 100), 0);
    xpj_cache_entry_clear(&e);
  }
  static const char *invalid[] = {"",      "abc",  "ABCD", "zzzz",
                                  "abcd ", "ab-d", "%%%%", "ab_d"};
  for (size_t j = 0; j < sizeof invalid / sizeof *invalid; j++) {
    if (xpj_cache_find(c, invalid[j], &e) != XPJ_ERR_INVALID)
      fail_msg("find(\"%s\") accepted", invalid[j]);
    assert_null(e.key);
  }
  char long65[66];
  memset(long65, 'a', 65);
  long65[65] = 0;
  assert_int_equal(xpj_cache_find(c, long65, &e), XPJ_ERR_INVALID);
  /* two digests sharing their first 4 hex digits: ambiguous */
  char seen[4096][5];
  unsigned x = 0, y = 0;
  for (unsigned i = 100; i < 100 + 4096 && !y; i++) {
    char d[65];
    digest_of(key_of(&t, i), d);
    memcpy(seen[i - 100], d, 4);
    seen[i - 100][4] = 0;
    for (unsigned j = 100; j < i; j++)
      if (!strcmp(seen[j - 100], seen[i - 100])) {
        x = j;
        y = i;
        break;
      }
  }
  assert_true(y != 0);
  put_i(c, x, 50);
  put_i(c, y, 60);
  char dx[65], dy[65];
  digest_of(key_of(&t, x), dx);
  digest_of(key_of(&t, y), dy);
  char pre[65];
  snprintf(pre, sizeof pre, "%.4s", dx);
  assert_int_equal(xpj_cache_find(c, pre, &e), XPJ_ERR_INVALID);
  assert_non_null(strstr(xpj_cache_last_error(), "ambiguous"));
  assert_null(e.key);
  size_t k = 4;
  while (dx[k] == dy[k])
    k++;
  snprintf(pre, sizeof pre, "%.*s", (int)k + 1, dy);
  assert_int_equal(xpj_cache_find(c, pre, &e), XPJ_OK);
  assert_int_equal(check_val(&e, y, 60), 0);
  xpj_cache_entry_clear(&e);
  /* a prefix that matches nothing */
  char dn[65];
  for (unsigned i = 9000;; i++) {
    digest_of(key_of(&t, i), dn);
    bool clash = false;
    for (unsigned j = 0; j < 3 + 2; j++) {
      char dj[65];
      digest_of(key_of(&t, j < 3 ? j : (j == 3 ? x : y)), dj);
      if (!strncmp(dj, dn, 8))
        clash = true;
    }
    if (!clash)
      break;
  }
  snprintf(pre, sizeof pre, "%.8s", dn);
  assert_int_equal(xpj_cache_find(c, pre, &e), XPJ_ERR_NOT_FOUND);

  /* clear: no entries, counters reset, and persisted so */
  assert_true(stats_of(c).counters.l2_hits > 0);
  assert_int_equal(xpj_cache_clear(c), XPJ_OK);
  xpj_cache_stats s = stats_of(c);
  assert_int_equal(s.entries, 0);
  assert_int_equal(s.bytes, 0);
  assert_int_equal(s.counters.l2_hits, 0);
  assert_int_equal(s.counters.l2_misses, 0);
  assert_int_equal(s.counters.evictions, 0);
  expect_miss(c, 0);
  xpj_cache_close(c);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  s = stats_of(c);
  assert_int_equal(s.entries, 0);
  assert_int_equal(s.counters.l2_hits, 0);
  assert_int_equal(s.counters.l2_misses, 1);
  put_i(c, 0, 100);
  expect_hit(c, 0, 100);
  /* meta and targets */
  assert_int_equal(xpj_cache_set_meta(c, "versions", "v1"), XPJ_OK);
  char *v = NULL;
  assert_int_equal(xpj_cache_get_meta(c, "versions", &v), XPJ_OK);
  assert_string_equal(v, "v1");
  free(v);
  assert_int_equal(xpj_cache_get_meta(c, "kind", &v), XPJ_OK);
  assert_string_equal(v, "cache");
  free(v);
  /* the file's own: a cache set to "bundle" was refused as a user's
   * cache from then on */
  assert_int_equal(xpj_cache_set_meta(c, "kind", "bundle"), XPJ_ERR_INVALID);
  assert_non_null(strstr(xpj_cache_last_error(), "the file's own"));
  assert_int_equal(xpj_cache_set_meta(c, "created", "0"), XPJ_ERR_INVALID);
  assert_int_equal(xpj_cache_get_meta(c, "kind", &v), XPJ_OK);
  assert_string_equal(v, "cache");
  free(v);
  tkey tp;
  key_of(&tp, 50);
  tp.k.target = "ptx:sm_90";
  tval val;
  assert_int_equal(xpj_cache_put(c, &tp.k, val_of(&val, 50, 10)), XPJ_OK);
  val_free(&val);
  char *targets = NULL, *versions = NULL;
  assert_int_equal(xpj_cache_targets(c, &targets, &versions), XPJ_OK);
  assert_string_equal(targets, "cpu:x86_64-znver4\nptx:sm_90");
  assert_string_equal(versions, "xpjit=0.1.0;llvm=22.1.8;abi=3");
  free(targets);
  free(versions);
  xpj_cache_close(c);
  assert_no_warning(&f->w);

  xpj_cache_close(NULL); /* a no-op */
  assert_int_equal(xpj_cache_mode_of(NULL), XPJ_CACHE_MODE_OFF);
  assert_string_equal(xpj_cache_path(NULL), "");
  xpj_cache_entry_clear(NULL);
}

static void test_parsers(void **state) {
  (void)state;
  static const struct {
    const char *s;
    uint64_t v;
  } sizes[] = {
      {"0", 0},
      {"10", 10},
      {"1073741824", 1073741824ull},
      {"512K", 512ull << 10},
      {"512k", 512ull << 10},
      {"100M", 100ull << 20},
      {"2G", 2ull << 30},
      {"1GiB", 1ull << 30},
      {"3MB", 3ull << 20},
      {"1T", 1ull << 40},
      {"16777215T", 16777215ull << 40},
      {"18446744073709551599", 18446744073709551599ull},
  };
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    uint64_t v = 7;
    if (xpj_cache_parse_size(sizes[i].s, &v) != XPJ_OK)
      fail_msg("size \"%s\" rejected: %s", sizes[i].s, xpj_cache_last_error());
    if (v != sizes[i].v)
      fail_msg("size \"%s\": %llu", sizes[i].s, (unsigned long long)v);
  }
  static const char *bad_sizes[] = {"",
                                    "x",
                                    "10Q",
                                    "-1",
                                    " 1",
                                    "1 ",
                                    "1.5G",
                                    "K",
                                    "1KK",
                                    "1GiBx",
                                    "1iB",
                                    "0x10",
                                    "99999999999999999999",
                                    "16777216T",
                                    "18446744073709551616",
                                    NULL};
  for (size_t i = 0; bad_sizes[i]; i++) {
    uint64_t v = 7;
    if (xpj_cache_parse_size(bad_sizes[i], &v) != XPJ_ERR_INVALID)
      fail_msg("size \"%s\" accepted (%llu)", bad_sizes[i],
               (unsigned long long)v);
    assert_int_equal(v, 7);
    assert_true(xpj_cache_last_error()[0] != 0);
  }
  assert_int_equal(xpj_cache_parse_size(NULL, NULL), XPJ_ERR_INVALID);

  static const struct {
    const char *s;
    int64_t ms;
  } durs[] = {
      {"90s", 90000},    {"30m", 1800000},   {"12h", 43200000},
      {"7d", 604800000}, {"2w", 1209600000}, {"45", 45000},
      {"0", 0},          {"0s", 0},          {"10ms", 10},
      {"250ms", 250},    {"0ms", 0},
  };
  for (size_t i = 0; i < sizeof durs / sizeof *durs; i++) {
    int64_t v = 7;
    if (xpj_cache_parse_duration(durs[i].s, &v) != XPJ_OK)
      fail_msg("duration \"%s\" rejected", durs[i].s);
    if (v != durs[i].ms)
      fail_msg("duration \"%s\": %lld", durs[i].s, (long long)v);
  }
  static const char *bad_durs[] = {"",
                                   "x",
                                   "10x",
                                   "-5s",
                                   "5ss",
                                   "1.5h",
                                   "5 s",
                                   "s",
                                   "10mss",
                                   "10msx",
                                   "ms",
                                   "h1",
                                   "99999999999999999999",
                                   "9999999999999w",
                                   NULL};
  for (size_t i = 0; bad_durs[i]; i++) {
    int64_t v = 7;
    if (xpj_cache_parse_duration(bad_durs[i], &v) != XPJ_ERR_INVALID)
      fail_msg("duration \"%s\" accepted (%lld)", bad_durs[i], (long long)v);
    assert_int_equal(v, 7);
    assert_true(xpj_cache_last_error()[0] != 0);
  }
  assert_int_equal(xpj_cache_parse_duration(NULL, NULL), XPJ_ERR_INVALID);
}

/* The mode a handle of a config opens in, known before anything is
 * opened (what the host CPU's file and the CLI ask): the config's, else
 * read-only for a bundle, else XPJIT_CACHE's (rw unset or malformed). */
static void test_config_mode(void **state) {
  (void)state;
  static const struct {
    const char *env;
    xpj_cache_mode mode;
  } env[] = {
      {NULL, XPJ_CACHE_MODE_RW}, {"rw", XPJ_CACHE_MODE_RW},
      {"on", XPJ_CACHE_MODE_RW}, {"1", XPJ_CACHE_MODE_RW},
      {"ro", XPJ_CACHE_MODE_RO}, {"off", XPJ_CACHE_MODE_OFF},
      {"0", XPJ_CACHE_MODE_OFF}, {"sometimes", XPJ_CACHE_MODE_RW},
  };
  static const xpj_cache_mode asked[] = {
      XPJ_CACHE_MODE_OFF, XPJ_CACHE_MODE_RO, XPJ_CACHE_MODE_RW};
  for (size_t i = 0; i < sizeof env / sizeof *env; i++) {
    if (env[i].env)
      setenv("XPJIT_CACHE", env[i].env, 1);
    else
      unsetenv("XPJIT_CACHE");
    xpj_cache_config cfg = {.path = "/nonexistent/cache.db"};
    assert_int_equal(xpj_cache_config_mode(&cfg), env[i].mode);
    assert_int_equal(xpj_cache_config_mode(NULL), env[i].mode);
    cfg.bundle = 1;
    assert_int_equal(xpj_cache_config_mode(&cfg), XPJ_CACHE_MODE_RO);
    for (size_t j = 0; j < sizeof asked / sizeof *asked; j++) {
      cfg.mode = asked[j];
      cfg.bundle = (int)(j & 1);
      assert_int_equal(xpj_cache_config_mode(&cfg), asked[j]);
    }
  }
  unsetenv("XPJIT_CACHE");
  assert_false(exists("/nonexistent"));
}

/* The default path and the environment variables. */
static void test_environment(void **state) {
  fx *f = *state;
  char buf[512], home[512];
  snprintf(home, sizeof home, "%s", getenv("HOME") ? getenv("HOME") : "");
  assert_int_equal(XPJ_CACHE_SCHEMA_VERSION, 2);
  setenv("XPJIT_CACHE_DIR", "/x/y", 1);
  assert_int_equal(xpj_cache_default_path(buf, sizeof buf),
                   strlen("/x/y/cache-v2.db"));
  assert_string_equal(buf, "/x/y/cache-v2.db");
  unsetenv("XPJIT_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  xpj_cache_default_path(buf, sizeof buf);
  assert_string_equal(buf, "/xdg/xpjit/cache-v2.db");
  setenv("XDG_CACHE_HOME", "relative", 1); /* ignored */
  setenv("HOME", "/home/u", 1);
  xpj_cache_default_path(buf, sizeof buf);
  assert_string_equal(buf, "/home/u/.cache/xpjit/cache-v2.db");
  unsetenv("XDG_CACHE_HOME");
  if (home[0])
    setenv("HOME", home, 1);
  else
    unsetenv("HOME");

  /* the default location, created on first use */
  setenv("XPJIT_CACHE_DIR", f->dir, 1);
  xpj_cache_config cfg = {.mode = XPJ_CACHE_MODE_RW,
                          .max_size = GiB,
                          .warn = rec_warn,
                          .warn_ud = &f->w};
  xpj_cache *c = NULL;
  assert_int_equal(xpj_cache_open(&cfg, &c), XPJ_OK);
  unsetenv("XPJIT_CACHE_DIR");
  snprintf(buf, sizeof buf, "%s/cache-v2.db", f->dir);
  assert_string_equal(xpj_cache_path(c), buf);
  assert_true(exists(buf));
  /* XPJIT_CACHE_MAX_SIZE when max_size is 0 */
  xpj_cache_close(c);
  cfg.path = buf;
  cfg.max_size = 0;
  setenv("XPJIT_CACHE_MAX_SIZE", "2M", 1);
  assert_int_equal(xpj_cache_open(&cfg, &c), XPJ_OK);
  assert_int_equal(stats_of(c).max_size, 2 << 20);
  xpj_cache_close(c);
  setenv("XPJIT_CACHE_MAX_SIZE", "lots", 1);
  assert_int_equal(xpj_cache_open(&cfg, &c), XPJ_OK);
  unsetenv("XPJIT_CACHE_MAX_SIZE");
  assert_int_equal(stats_of(c).max_size, XPJ_CACHE_DEFAULT_MAX_SIZE);
  assert_int_equal(f->w.n, 1);
  assert_warned(&f->w, "XPJIT_CACHE_MAX_SIZE=lots");
  xpj_cache_close(c);
  /* a nested directory that does not exist yet is created */
  snprintf(buf, sizeof buf, "%s/a/b/c/cache.db", f->dir);
  cfg.path = buf;
  cfg.max_size = GiB;
  assert_int_equal(xpj_cache_open(&cfg, &c), XPJ_OK);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_RW);
  put_i(c, 1, 10);
  expect_hit(c, 1, 10);
  xpj_cache_close(c);
  assert_int_equal(f->w.n, 1);
}

/* ======================================================================== */
/* 10. trust: a file another user could have written is never read          */
/* ======================================================================== */

/* The two-user tests need root, to act as a second user (nobody) in a
 * child; CI runs as root. Elsewhere they say so and are skipped. */
#define NEED_ROOT()                                                            \
  do {                                                                         \
    if (geteuid() != 0) {                                                      \
      print_message("skipped: needs root to act as a second user "             \
                    "(nobody)\n");                                             \
      skip();                                                                  \
    }                                                                          \
  } while (0)

static struct passwd *nobody(void) {
  struct passwd *pw = getpwnam("nobody");
  if (!pw)
    fail_msg("no user 'nobody'");
  return pw;
}

/* Runs fn(arg) in a child that has become nobody; returns its exit code
 * (100 + the signal if it died of one). */
static int as_nobody(int (*fn)(void *), void *arg) {
  struct passwd *pw = nobody();
  uid_t uid = pw->pw_uid;
  gid_t gid = pw->pw_gid;
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid(uid) != 0 ||
        geteuid() != uid)
      _exit(90);
    _exit(fn(arg));
  }
  int ws = 0;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : 100 + WTERMSIG(ws);
}

/* A directory owned by nobody (mode given), made by root. */
static void nobody_dir(const char *dir, mode_t mode) {
  assert_int_equal(mkdir(dir, mode), 0);
  assert_int_equal(chown(dir, nobody()->pw_uid, nobody()->pw_gid), 0);
  assert_int_equal(chmod(dir, mode), 0);
}

static int copy_file(const char *from, const char *to) {
  int in = open(from, O_RDONLY), out = -1, rc = 0;
  if (in < 0)
    return errno == ENOENT ? 0 : -1;
  out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  char buf[8192];
  ssize_t n;
  while (out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, (size_t)n) != n)
      rc = -1;
  close(in);
  if (out < 0 || close(out) != 0)
    rc = -1;
  return rc;
}

/* As nobody, in nobody's directory arg: a cache made read-only (chmod
 * 400) is read, which leaves a -shm of mode 0400 (SQLite gives it the
 * database's mode); made writable again, the cache must store. It did
 * not: every writer failed ("attempt to write a readonly database"),
 * for good. 0, or where it went wrong. */
static int side_mode_child(void *arg) {
  char db[300];
  snprintf(db, sizeof db, "%s/cache.db", (const char *)arg);
  wlog w;
  memset(&w, 0, sizeof w);
  xpj_cache_config cfg = {.path = db, .mode = XPJ_CACHE_MODE_RW,
                          .max_size = GiB, .warn = rec_warn, .warn_ud = &w};
  xpj_cache *c = NULL;
  xpj_cache_entry e;
  tkey t;
  tval v;
  if (xpj_cache_open(&cfg, &c) != XPJ_OK)
    return 10;
  xpj_cache_put(c, key_of(&t, 1), val_of(&v, 1, 100));
  val_free(&v);
  xpj_cache_close(c);
  if (chmod(db, 0400) != 0 || xpj_cache_open(&cfg, &c) != XPJ_OK)
    return 11;
  if (xpj_cache_get(c, key_of(&t, 1), &e) != XPJ_OK)
    return 12;
  xpj_cache_entry_clear(&e);
  xpj_cache_close(c);
  if (chmod(db, 0600) != 0 || xpj_cache_open(&cfg, &c) != XPJ_OK)
    return 13;
  w.n = 0;
  if (xpj_cache_get(c, key_of(&t, 1), &e) == XPJ_OK)
    xpj_cache_entry_clear(&e);
  xpj_cache_put(c, key_of(&t, 2), val_of(&v, 2, 100));
  val_free(&v);
  xpj_cache_close(c);
  if (w.n)
    return 14; /* "storing an entry failed" */
  if (xpj_cache_open(&cfg, &c) != XPJ_OK)
    return 15;
  int rc = xpj_cache_get(c, key_of(&t, 2), &e) == XPJ_OK ? 0 : 16;
  if (rc == 0)
    xpj_cache_entry_clear(&e);
  xpj_cache_close(c);
  return rc;
}

static void test_side_file_mode(void **state) {
  NEED_ROOT();
  fx *f = *state;
  char dir[128];
  assert_int_equal(chmod(f->dir, 0755), 0); /* nobody may enter */
  snprintf(dir, sizeof dir, "%s/nb", f->dir);
  nobody_dir(dir, 0700);
  assert_int_equal(as_nobody(side_mode_child, dir), 0);
}

/* What "another user" plants: entries for keys 1 and 2 whose binary is
 * theirs (key 1's bytes are those of key 666). */
static void plant_entries(xpj_cache *c) {
  tkey t;
  tval v;
  xpj_cache_put(c, key_of(&t, 1), val_of(&v, 666, 300));
  val_free(&v);
  xpj_cache_put(c, key_of(&t, 2), val_of(&v, 2, 300));
  val_free(&v);
}

typedef struct plant {
  char own[128];    /* nobody's own directory */
  char into[128];   /* where the cache is copied (may equal own) */
  char bundle[192]; /* where a bundle of it is written ("" for none) */
} plant;

/* As nobody: a cache of planted entries, made with the library in
 * nobody's own directory (as anyone can), then copied (database and any
 * side file) to where the victim will look. */
static int plant_child(void *arg) {
  const plant *p = arg;
  char db[300];
  snprintf(db, sizeof db, "%s/cache.db", p->own);
  wlog w;
  memset(&w, 0, sizeof w);
  xpj_cache_config cfg = {.path = db, .mode = XPJ_CACHE_MODE_RW,
                          .max_size = GiB, .warn = rec_warn, .warn_ud = &w};
  xpj_cache *c = NULL;
  if (xpj_cache_open(&cfg, &c) != XPJ_OK)
    return 10;
  if (xpj_cache_mode_of(c) != XPJ_CACHE_MODE_RW)
    return 11; /* nobody's own cache must work for nobody */
  plant_entries(c);
  if (p->bundle[0] && xpj_cache_export(c, p->bundle, NULL) != XPJ_OK)
    return 12;
  xpj_cache_close(c);
  if (strcmp(p->own, p->into) != 0) {
    static const char *const sides[] = {"", ".key", NULL};
    for (int i = 0; sides[i]; i++) {
      char from[320], to[320];
      snprintf(from, sizeof from, "%s%s", db, sides[i]);
      snprintf(to, sizeof to, "%s/cache.db%s", p->into, sides[i]);
      if (copy_file(from, to) != 0)
        return 13;
    }
  }
  return 0;
}

/* Opens the victim's cache at path and asks for key 1: never the planted
 * bytes; refused with one warning naming path and owner. */
static void expect_refused(fx *f, const char *path, const char *needle) {
  f->w.n = 0;
  f->w.text[0] = 0;
  xpj_cache *c = open_cache(&f->w, path, XPJ_CACHE_MODE_RW, GiB);
  tkey t;
  xpj_cache_entry e;
  xpj_status st = xpj_cache_get(c, key_of(&t, 1), &e);
  bool planted = st == XPJ_OK && e.size == 300;
  for (size_t j = 0; planted && j < 300; j++)
    planted = e.data[j] == byte_of(666, j);
  xpj_cache_entry_clear(&e);
  KNOWN_BUG_FIXED(planted, "%s: another user's planted entry was served "
                  "(their code would run as us); warnings: %s", path,
                  f->w.text);
  assert_int_equal(st, XPJ_ERR_NOT_FOUND);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_OFF);
  assert_int_equal(f->w.n, 1);
  assert_warned(&f->w, "refusing the cache");
  assert_warned(&f->w, needle);
  char why[4600];
  assert_true(xpj_cache_problem(c, why, sizeof why) > 0);
  uint64_t bad = 0;
  assert_int_equal(xpj_cache_verify(c, 0, NULL, NULL, NULL, &bad), XPJ_OK);
  assert_int_equal(bad, 1);
  put_i(c, 3, 10); /* nothing is written into it either */
  xpj_cache_close(c);
  assert_int_equal(f->w.n, 1);
}

/* The issue's reproduction: a shared 1777 XPJIT_CACHE_DIR where another
 * user planted a cache; a cache directory that is a link to another
 * user's 0755 directory; another user's files in a directory that is
 * fine. */
static void test_trust_planted_cache(void **state) {
  NEED_ROOT();
  fx *f = *state;
  assert_int_equal(chmod(f->dir, 0755), 0); /* nobody may enter */
  plant p;
  snprintf(p.own, sizeof p.own, "%s/bob", f->dir);
  snprintf(p.into, sizeof p.into, "%s/shared", f->dir);
  p.bundle[0] = 0;
  nobody_dir(p.own, 0755);
  assert_int_equal(mkdir(p.into, 0700), 0);
  assert_int_equal(chmod(p.into, 01777), 0); /* ours, but open to all */
  assert_int_equal(as_nobody(plant_child, &p), 0);
  char path[300];
  snprintf(path, sizeof path, "%s/cache.db", p.into);
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal(sb.st_uid, nobody()->pw_uid); /* really planted */
  expect_refused(f, path, "writable by other users (mode 1777)");
  assert_warned(&f->w, p.into);

  /* the same directory made private again: the files are still nobody's */
  assert_int_equal(chmod(p.into, 0755), 0);
  expect_refused(f, path, "belongs to nobody");
  assert_warned(&f->w, path);

  /* a cache directory that is a link to another user's 0755 directory */
  char link[128];
  snprintf(link, sizeof link, "%s/link", f->dir);
  assert_int_equal(symlink(p.own, link), 0);
  snprintf(path, sizeof path, "%s/cache.db", link);
  expect_refused(f, path, "belongs to nobody");
  assert_warned(&f->w, p.own); /* named as it really is */

  /* another user's directory that everyone may write: chown would not
   * make it safe, so the advice is another directory (red team N10) */
  assert_int_equal(chmod(p.own, 01777), 0);
  expect_refused(f, path, "others can write it (mode 1777)");
  if (strstr(f->w.text, "chown"))
    fail_msg("advises chown for a directory others can write: %s",
             f->w.text);
  assert_int_equal(chmod(p.own, 0755), 0);

  /* a directory above the cache that belongs to another user */
  char deep[192];
  snprintf(deep, sizeof deep, "%s/cachedir", p.own);
  assert_int_equal(mkdir(deep, 0700), 0); /* ours, inside nobody's */
  snprintf(path, sizeof path, "%s/cache.db", deep);
  expect_refused(f, path, "not to you (root, uid 0) or root");
  assert_false(exists(path));
}

/* As nobody: the cache in arg's directories, each refused; the advice
 * says what nobody can do. */
typedef struct advice {
  char theirs[256]; /* a third user's 0755 directory */
  char roots[256];  /* root's 0755 directory */
} advice;

static int advice_child(void *arg) {
  const advice *a = arg;
  const char *dirs[] = {a->theirs, a->roots};
  for (int i = 0; i < 2; i++) {
    char db[300];
    snprintf(db, sizeof db, "%s/cache.db", dirs[i]);
    wlog w;
    memset(&w, 0, sizeof w);
    xpj_cache_config cfg = {.path = db, .mode = XPJ_CACHE_MODE_RW,
                            .max_size = GiB, .warn = rec_warn,
                            .warn_ud = &w};
    xpj_cache *c = NULL;
    if (xpj_cache_open(&cfg, &c) != XPJ_OK ||
        xpj_cache_mode_of(c) != XPJ_CACHE_MODE_OFF || w.n != 1)
      return 30 + i;
    xpj_cache_close(c);
    bool ok = strstr(w.text, "XPJIT_CACHE_DIR to a directory of your own");
    if (i == 0)
      ok = ok && !strstr(w.text, "chown");
    else
      ok = ok && strstr(w.text, "or have root run 'chown nobody");
    if (!ok) {
      fprintf(stderr, "advice for %s: %s", dirs[i], w.text);
      return 32 + i;
    }
  }
  return 0;
}

/* A cache directory of someone else's: another directory is the advice,
 * not 'chown USER DIR', which only root can run (an outside probe: alice
 * was told to take mallory's directory); when root owns it, root is who
 * would run it. */
static void test_trust_chown_advice(void **state) {
  NEED_ROOT();
  fx *f = *state;
  assert_int_equal(chmod(f->dir, 0755), 0); /* nobody may enter */
  advice a;
  snprintf(a.theirs, sizeof a.theirs, "%s/theirs", f->dir);
  snprintf(a.roots, sizeof a.roots, "%s/roots", f->dir);
  uid_t third = nobody()->pw_uid - 1; /* neither root nor nobody */
  assert_int_equal(mkdir(a.theirs, 0755), 0);
  assert_int_equal(chown(a.theirs, third, third), 0);
  assert_int_equal(mkdir(a.roots, 0755), 0);
  int r = as_nobody(advice_child, &a);
  if (r)
    fail_msg("as nobody: %d", r);
  /* root can run chown, and is told to */
  char path[300];
  snprintf(path, sizeof path, "%s/cache.db", a.theirs);
  f->w.n = 0;
  f->w.text[0] = 0;
  xpj_cache *c = open_cache(&f->w, path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_OFF);
  xpj_cache_close(c);
  assert_warned(&f->w, "or 'chown root ");
}

/* A cache directory that is a link to nothing (planted toward another's
 * directory): nothing is made through it, and the warning names the
 * link, its owner and where it points (it said "its directory: No such
 * file or directory"). */
static void test_trust_dangling_link(void **state) {
  fx *f = *state;
  char link[128], to[128], path[160], says[512];
  snprintf(link, sizeof link, "%s/link", f->dir);
  snprintf(to, sizeof to, "%s/nowhere/sub", f->dir);
  assert_int_equal(symlink(to, link), 0);
  snprintf(path, sizeof path, "%s/cache.db", link);
  f->w.n = 0;
  f->w.text[0] = 0;
  xpj_cache *c = open_cache(&f->w, path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_OFF);
  xpj_cache_close(c);
  assert_int_equal(f->w.n, 1);
  snprintf(says, sizeof says, "its directory %s is a symbolic link of uid "
           "%u to %s, which is not there", link, (unsigned)geteuid(), to);
  assert_warned(&f->w, says);
  assert_warned(&f->w, "remove the link, or set XPJIT_CACHE_DIR");
  struct stat sb;
  snprintf(path, sizeof path, "%s/nowhere", f->dir);
  assert_int_equal(lstat(path, &sb), -1);
}

typedef struct unreadable {
  char dir[256];
} unreadable;

/* As nobody, in nobody's directory: a cache whose file nobody cannot
 * read is unusable, says why, and verify counts it. */
static int unreadable_child(void *arg) {
  const unreadable *u = arg;
  char db[300];
  snprintf(db, sizeof db, "%s/cache.db", u->dir);
  wlog w;
  memset(&w, 0, sizeof w);
  xpj_cache_config cfg = {.path = db, .mode = XPJ_CACHE_MODE_RW,
                          .max_size = GiB, .warn = rec_warn, .warn_ud = &w};
  xpj_cache *c = NULL;
  if (xpj_cache_open(&cfg, &c) != XPJ_OK || xpj_cache_mode_of(c) !=
                                                XPJ_CACHE_MODE_RW)
    return 20;
  xpj_cache_close(c);
  if (chmod(db, 0) != 0)
    return 21;
  for (int mode = XPJ_CACHE_MODE_RO; mode <= XPJ_CACHE_MODE_RW; mode++) {
    cfg.mode = (xpj_cache_mode)mode;
    w.n = 0;
    if (xpj_cache_open(&cfg, &c) != XPJ_OK)
      return 22;
    char why[4600];
    uint64_t bad = 0;
    if (xpj_cache_mode_of(c) != XPJ_CACHE_MODE_OFF || w.n != 1 ||
        !xpj_cache_problem(c, why, sizeof why) || !strstr(why, "read"))
      return 23;
    if (xpj_cache_verify(c, 0, NULL, NULL, NULL, &bad) != XPJ_OK || bad != 1)
      return 24;
    xpj_cache_close(c);
  }
  return 0;
}

static void test_unreadable(void **state) {
  NEED_ROOT(); /* root reads anything: the reader must be someone else */
  fx *f = *state;
  assert_int_equal(chmod(f->dir, 0755), 0);
  unreadable u;
  snprintf(u.dir, sizeof u.dir, "%s/u", f->dir);
  nobody_dir(u.dir, 0700);
  assert_int_equal(as_nobody(unreadable_child, &u), 0);
}

/* Bundles are code: only the user's, root's, or a trusted owner's
 * (XPJIT_TRUSTED_OWNERS), and never writable by group or others. */
static void test_trust_bundles(void **state) {
  NEED_ROOT();
  fx *f = *state;
  assert_int_equal(chmod(f->dir, 0755), 0);
  plant p;
  snprintf(p.own, sizeof p.own, "%s/bob", f->dir);
  snprintf(p.into, sizeof p.into, "%s", p.own);
  snprintf(p.bundle, sizeof p.bundle, "%s/theirs.xpb", p.own);
  nobody_dir(p.own, 0755);
  assert_int_equal(as_nobody(plant_child, &p), 0);
  struct stat sb;
  assert_int_equal(stat(p.bundle, &sb), 0);
  assert_int_equal(sb.st_uid, nobody()->pw_uid);
  assert_int_equal(sb.st_mode & 0777, 0644);

  /* refused: opened, imported, with a message naming owner and fix */
  unsetenv("XPJIT_TRUSTED_OWNERS");
  xpj_cache_config bc = {.path = p.bundle, .bundle = 1, .warn = rec_warn,
                         .warn_ud = &f->w};
  xpj_cache *b = NULL;
  xpj_status st = xpj_cache_open(&bc, &b);
  bool served = false;
  if (st == XPJ_OK) {
    tkey t;
    xpj_cache_entry e;
    served = xpj_cache_get(b, key_of(&t, 1), &e) == XPJ_OK;
    xpj_cache_entry_clear(&e);
    xpj_cache_close(b);
    b = NULL;
  }
  KNOWN_BUG_FIXED(st == XPJ_OK, "another user's bundle was opened%s",
                  served ? " and its planted kernel served" : "");
  assert_int_equal(st, XPJ_ERR_UNSUPPORTED);
  assert_null(b);
  const char *m = xpj_cache_last_error();
  assert_non_null(strstr(m, p.bundle));
  assert_non_null(strstr(m, "nobody"));
  assert_non_null(strstr(m, "XPJIT_TRUSTED_OWNERS"));
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  uint64_t imp = 0, skip_n = 0;
  assert_int_not_equal(xpj_cache_import(c, p.bundle, &imp, &skip_n), XPJ_OK);
  assert_int_equal(imp, 0);
  expect_miss(c, 1);

  /* trusted by name, or by number: used, and imported */
  char uid[32];
  snprintf(uid, sizeof uid, "%u", (unsigned)nobody()->pw_uid);
  const char *lists[] = {"nobody", uid, "daemon, nobody"};
  for (int i = 0; i < 3; i++) {
    setenv("XPJIT_TRUSTED_OWNERS", lists[i], 1);
    assert_int_equal(xpj_cache_open(&bc, &b), XPJ_OK);
    expect_hit(b, 2, 300);
    xpj_cache_close(b);
  }
  assert_int_equal(xpj_cache_import(c, p.bundle, &imp, &skip_n), XPJ_OK);
  assert_int_equal(imp, 2);
  expect_hit(c, 2, 300);
  xpj_cache_close(c);
  /* a name that is no user: ignored, with a warning */
  setenv("XPJIT_TRUSTED_OWNERS", "no-such-user-xpjit", 1);
  f->w.n = 0;
  f->w.text[0] = 0;
  assert_int_equal(xpj_cache_open(&bc, &b), XPJ_ERR_UNSUPPORTED);
  assert_warned(&f->w, "no-such-user-xpjit");

  /* writable by others: refused whoever owns it, trusted or not */
  setenv("XPJIT_TRUSTED_OWNERS", "nobody", 1);
  assert_int_equal(chmod(p.bundle, 0666), 0);
  assert_int_equal(xpj_cache_open(&bc, &b), XPJ_ERR_UNSUPPORTED);
  assert_non_null(strstr(xpj_cache_last_error(), "writable by other users"));
  assert_int_equal(chown(p.bundle, 0, 0), 0); /* ours now */
  assert_int_equal(xpj_cache_open(&bc, &b), XPJ_ERR_UNSUPPORTED);
  assert_int_equal(chmod(p.bundle, 0644), 0);
  assert_int_equal(xpj_cache_open(&bc, &b), XPJ_OK);
  xpj_cache_close(b);
  /* in a directory of an untrusted owner: refused though the file is ours */
  unsetenv("XPJIT_TRUSTED_OWNERS");
  assert_int_equal(xpj_cache_open(&bc, &b), XPJ_ERR_UNSUPPORTED);
  assert_non_null(strstr(xpj_cache_last_error(), p.own));
  /* a hot journal beside it that is someone else's: refused */
  char ours[300], journal[320];
  snprintf(ours, sizeof ours, "%s/ours.xpb", f->dir);
  assert_int_equal(copy_file(p.bundle, ours), 0);
  bc.path = ours;
  assert_int_equal(xpj_cache_open(&bc, &b), XPJ_OK);
  xpj_cache_close(b);
  snprintf(journal, sizeof journal, "%s-journal", ours);
  write_file(journal, "x", 1);
  assert_int_equal(chown(journal, nobody()->pw_uid, 0), 0);
  assert_int_equal(xpj_cache_open(&bc, &b), XPJ_ERR_UNSUPPORTED);
  assert_non_null(strstr(xpj_cache_last_error(), journal));
  unlink(journal);
}

/* Modes, links and the umask, as one user. */
static void test_trust_modes(void **state) {
  fx *f = *state;
  char dir[300], path[320], side[340];
  snprintf(dir, sizeof dir, "%s/c", f->dir);
  snprintf(path, sizeof path, "%s/cache.db", dir);
  /* files 0600 and directories 0700 whatever the umask */
  static const mode_t masks[] = {0, 022, 0277};
  for (int i = 0; i < 3; i++) {
    mode_t old = umask(masks[i]);
    xpj_cache *c = open_cache(&f->w, path, XPJ_CACHE_MODE_RW, GiB);
    put_i(c, 1, 100);
    expect_hit(c, 1, 100); /* the WAL and shared memory exist now */
    struct stat sb;
    assert_int_equal(stat(dir, &sb), 0);
    if ((sb.st_mode & 07777) != 0700)
      fail_msg("umask %03o: directory mode %04o", (unsigned)masks[i],
               (unsigned)(sb.st_mode & 07777));
    static const char *const sides[] = {"", "-wal", "-shm", ".lock", ".key"};
    for (int j = 0; j < 5; j++) {
      snprintf(side, sizeof side, "%s%s", path, sides[j]);
      assert_int_equal(stat(side, &sb), 0);
      KNOWN_BUG_FIXED((sb.st_mode & 07777) != 0600,
                      "umask %03o: %s has mode %04o, not 0600",
                      (unsigned)masks[i], side,
                      (unsigned)(sb.st_mode & 07777));
    }
    /* a bundle is made to be shared: 0644 */
    char bpath[320];
    snprintf(bpath, sizeof bpath, "%s/b%d.xpb", f->dir, i);
    assert_int_equal(xpj_cache_export(c, bpath, NULL), XPJ_OK);
    assert_int_equal(stat(bpath, &sb), 0);
    if ((sb.st_mode & 07777) != 0644)
      fail_msg("umask %03o: bundle mode %04o", (unsigned)masks[i],
               (unsigned)(sb.st_mode & 07777));
    xpj_cache_close(c);
    umask(old);
    assert_no_warning(&f->w);
    rm_tree(dir);
  }

  xpj_cache *c = open_cache(&f->w, path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 100);
  xpj_cache_close(c);
  /* the cache's own directory open to others: refused, sticky or not */
  static const mode_t bad_dir[] = {0777, 0770, 0720, 01777, 0702};
  for (int i = 0; i < 5; i++) {
    assert_int_equal(chmod(dir, bad_dir[i]), 0);
    for (int mode = XPJ_CACHE_MODE_RO; mode <= XPJ_CACHE_MODE_RW; mode++) {
      f->w.n = 0;
      f->w.text[0] = 0;
      c = open_cache(&f->w, path, (xpj_cache_mode)mode, GiB);
      if (xpj_cache_mode_of(c) != XPJ_CACHE_MODE_OFF)
        fail_msg("cache directory mode %04o accepted", (unsigned)bad_dir[i]);
      expect_miss(c, 1);
      xpj_cache_close(c);
      assert_int_equal(f->w.n, 1);
      assert_warned(&f->w, "writable by other users");
      assert_warned(&f->w, dir);
    }
  }
  assert_int_equal(chmod(dir, 0755), 0); /* readable by others is fine */
  c = open_cache(&f->w, path, XPJ_CACHE_MODE_RO, GiB);
  expect_hit(c, 1, 100);
  xpj_cache_close(c);
  assert_int_equal(chmod(dir, 0700), 0);
  f->w.n = 0;
  f->w.text[0] = 0;

  /* a directory above: writable by others only when sticky */
  assert_int_equal(chmod(f->dir, 0777), 0);
  c = open_cache(&f->w, path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_OFF);
  xpj_cache_close(c);
  assert_warned(&f->w, "not sticky");
  assert_int_equal(chmod(f->dir, 01777), 0);
  c = open_cache(&f->w, path, XPJ_CACHE_MODE_RW, GiB);
  expect_hit(c, 1, 100);
  xpj_cache_close(c);
  assert_int_equal(chmod(f->dir, 0700), 0);
  assert_int_equal(f->w.n, 1);

  /* each file of the cache: writable by others, a link, not a file */
  static const char *const sides[] = {"", "-wal", "-shm", "-journal",
                                      ".lock", ".key"};
  for (int i = 0; i < 6; i++) {
    snprintf(side, sizeof side, "%s%s", path, sides[i]);
    char saved[360];
    snprintf(saved, sizeof saved, "%s.saved", side);
    bool had = exists(side);
    if (had)
      assert_int_equal(rename(side, saved), 0);
    for (int how = 0; how < 3; how++) {
      if (how == 0) {
        write_file(side, "", 0);
        assert_int_equal(chmod(side, 0662), 0);
      } else if (how == 1) {
        assert_int_equal(symlink(saved, side), 0);
      } else {
        assert_int_equal(mkdir(side, 0700), 0);
      }
      f->w.n = 0;
      f->w.text[0] = 0;
      c = open_cache(&f->w, path, XPJ_CACHE_MODE_RW, GiB);
      if (xpj_cache_mode_of(c) != XPJ_CACHE_MODE_OFF)
        fail_msg("%s (case %d) accepted", side, how);
      xpj_cache_close(c);
      assert_int_equal(f->w.n, 1);
      assert_warned(&f->w, side);
      assert_warned(&f->w, how == 0   ? "writable by other users"
                           : how == 1 ? "symbolic link"
                                      : "is a directory");
      how == 2 ? rmdir(side) : unlink(side);
    }
    if (had)
      assert_int_equal(rename(saved, side), 0);
  }
  c = open_cache(&f->w, path, XPJ_CACHE_MODE_RW, GiB);
  expect_hit(c, 1, 100);
  xpj_cache_close(c);
}

/* The journal a cache file uses (bytes 18 and 19 of a SQLite file: 1
 * rollback, 2 WAL). */
static int journal_of(const char *path) {
  size_t n = 0;
  uint8_t *b = read_all(path, &n);
  assert_true(n >= 100);
  int v = b[18] == b[19] ? b[18] : -1;
  free(b);
  return v;
}

/* A cache on a network file system (NFS, Lustre, GPFS, CIFS, ...: statfs
 * magic) uses SQLite's rollback journal, not WAL, which needs memory
 * shared between the machines (docs/cache.md, "Where the cache lives");
 * XPJIT_CACHE_JOURNAL=rollback forces it, =wal forces WAL. Entries
 * survive the switch both ways. */
static void test_network_journal(void **state) {
  fx *f = *state;
  wlog w = {0};
  setenv("XPJIT_CACHE_JOURNAL", "rollback", 1);
  xpj_cache *c = open_cache(&w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 100);
  xpj_cache_close(c);
  assert_int_equal(journal_of(f->path), 1);
  assert_false(exists2(f->path, "-wal"));
  unsetenv("XPJIT_CACHE_JOURNAL"); /* /tmp: a local file system */
  c = open_cache(&w, f->path, XPJ_CACHE_MODE_RW, GiB);
  expect_hit(c, 1, 100);
  put_i(c, 2, 100);
  xpj_cache_close(c);
  assert_int_equal(journal_of(f->path), 2);
  setenv("XPJIT_CACHE_JOURNAL", "rollback", 1);
  c = open_cache(&w, f->path, XPJ_CACHE_MODE_RW, GiB);
  expect_hit(c, 1, 100);
  expect_hit(c, 2, 100);
  xpj_cache_close(c);
  assert_int_equal(journal_of(f->path), 1);
  unsetenv("XPJIT_CACHE_JOURNAL");
  assert_no_warning(&w);
}

/* ======================================================================== */
/* 11. a hit in a fresh process: read-only until the first write; the      */
/*     entries' total size kept for the size limit                         */
/* ======================================================================== */

/* (a) a handle opened read-write serves hits from a read-only connection:
 * while another process holds the write lock the open and the hits take
 * no time waiting for it (a write would wait up to 30 s), nothing is
 * written (the file is byte for byte the same, the WAL empty, no lock
 * file made); the rows were used a moment ago, so no use time is due at
 * close either: the hits and counters go to the side file. */
static void test_hit_writes_nothing(void **state) {
  fx *f = *state;
  fill_and_close(f, 3, 2000);
  char lock[256];
  snprintf(lock, sizeof lock, "%s.lock", f->path);
  unlink(lock);
  size_t n0 = 0, n1 = 0;
  uint8_t *before = read_all(f->path, &n0);
  sqlite3 *w = sql_open(f->path);
  assert_int_equal(sqlite3_exec(w, "BEGIN IMMEDIATE", NULL, NULL, NULL),
                   SQLITE_OK);
  int64_t t0 = wall_ms();
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_RW);
  expect_hit(c, 1, 2001);
  expect_hit(c, 2, 2002);
  expect_hit(c, 1, 2001);
  expect_miss(c, 7);
  if (wall_ms() - t0 > 5000)
    fail_msg("a hit waited %lld ms for another process's write lock",
             (long long)(wall_ms() - t0));
  assert_false(exists(lock));
  uint8_t *after = read_all(f->path, &n1);
  assert_int_equal(n1, n0);
  assert_memory_equal(after, before, n0);
  assert_true(file_len(lock) < 0);
  char wal[256];
  snprintf(wal, sizeof wal, "%s-wal", f->path);
  assert_true(file_len(wal) <= 0); /* no frame written */
  assert_int_equal(sqlite3_exec(w, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_close(w), SQLITE_OK);
  /* the rows were used a moment ago (stored): no use time is due, and the
   * hits and counters go to the side file, not the database */
  xpj_cache_close(c);
  free(after);
  after = read_all(f->path, &n1);
  assert_int_equal(n1, n0);
  assert_memory_equal(after, before, n0);
  assert_true(file_len(wal) <= 0);
  assert_false(exists(lock)); /* no writer's connection was opened */
  assert_true(exists2(f->path, ".stats"));
  free(before);
  free(after);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  tkey t;
  xpj_cache_entry e;
  assert_int_equal(xpj_cache_get(c, key_of(&t, 1), &e), XPJ_OK);
  assert_int_equal(e.hits, 0); /* as stored; the side file's are not read */
  char dg[65];
  memcpy(dg, e.digest, sizeof dg);
  xpj_cache_entry_clear(&e);
  /* the side file's two and this get (find writes the handle's uses) */
  assert_int_equal(xpj_cache_find(c, dg, &e), XPJ_OK);
  assert_int_equal(e.hits, 3);
  xpj_cache_entry_clear(&e);
  xpj_cache_stats st = stats_of(c);
  assert_int_equal(st.counters.l2_hits, 4);
  assert_int_equal(st.counters.l2_misses, 1);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* (b) the first write of a handle that served hits reopens the file for
 * writing, in the middle of its life: puts, deferred puts, removals and
 * the hits around them all work. */
static void test_put_after_hits(void **state) {
  fx *f = *state;
  fill_and_close(f, 3, 500);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  expect_hit(c, 0, 500);
  expect_hit(c, 1, 501);
  put_i(c, 5, 700); /* the first write */
  expect_hit(c, 5, 700);
  expect_hit(c, 1, 501);
  tkey t;
  tval v;
  assert_int_equal(xpj_cache_remove(c, key_of(&t, 2)), XPJ_OK);
  expect_miss(c, 2);
  assert_int_equal(xpj_cache_put_later(c, key_of(&t, 6), val_of(&v, 6, 300)),
                   XPJ_OK);
  val_free(&v);
  expect_hit(c, 6, 300);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_RW);
  xpj_cache_close(c);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  expect_hit(c, 0, 500);
  expect_hit(c, 5, 700);
  expect_hit(c, 6, 300);
  expect_miss(c, 2);
  xpj_cache_stats st = stats_of(c);
  assert_int_equal(st.entries, 4);
  assert_int_equal(st.counters.l2_hits, 5 + 3);
  assert_int_equal(verify_bad(c, NULL), 0);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

typedef struct rodir {
  char dir[256];
} rodir;

static int ro_put(const char *db, unsigned i, size_t size) {
  wlog w;
  memset(&w, 0, sizeof w);
  xpj_cache_config cfg = {.path = db, .mode = XPJ_CACHE_MODE_RW,
                          .max_size = GiB, .warn = rec_warn, .warn_ud = &w};
  xpj_cache *c = NULL;
  if (xpj_cache_open(&cfg, &c) != XPJ_OK)
    return 1;
  tkey t;
  tval v;
  xpj_status st = xpj_cache_put(c, key_of(&t, i), val_of(&v, i, size));
  val_free(&v);
  bool ok = st == XPJ_OK && xpj_cache_mode_of(c) == XPJ_CACHE_MODE_RW && !w.n;
  xpj_cache_close(c);
  return ok ? 0 : 2;
}

/* A hit of key i in a handle of the given mode: 0, or a code. *w gets the
 * handle's warnings; after is what the handle's mode must be. */
static int ro_hit(const char *db, xpj_cache_mode mode, unsigned i, wlog *w,
                  xpj_cache_mode after) {
  memset(w, 0, sizeof *w);
  xpj_cache_config cfg = {.path = db, .mode = mode, .max_size = GiB,
                          .warn = rec_warn, .warn_ud = w};
  xpj_cache *c = NULL;
  if (xpj_cache_open(&cfg, &c) != XPJ_OK)
    return 1;
  tkey t;
  xpj_cache_entry e;
  xpj_status st = xpj_cache_get(c, key_of(&t, i), &e);
  int rc = st != XPJ_OK ? 2 : check_val(&e, i, 400) ? 3 : 0;
  if (!rc)
    xpj_cache_entry_clear(&e);
  if (!rc && xpj_cache_mode_of(c) != after)
    rc = 4;
  xpj_cache_close(c);
  return rc;
}

/* As nobody: a cache in a directory that cannot be written (read-only
 * media) still serves hits, and one whose file cannot be written (but
 * its directory can) says so only when something is to be written. */
static int rodir_child(void *arg) {
  const rodir *r = arg;
  char db[300], side[320];
  snprintf(db, sizeof db, "%s/cache.db", r->dir);
  if (ro_put(db, 1, 400) || ro_put(db, 2, 400))
    return 10;
  wlog w;
  /* row 1 was last used two hours ago: a hit's use time is then due */
  {
    tkey t;
    char d[65], sql[160];
    if (xpj_cache_key_digest(key_of(&t, 1), NULL, d) != XPJ_OK)
      return 17;
    snprintf(sql, sizeof sql,
             "UPDATE entries SET last_used = %lld WHERE digest='%s'",
             (long long)(wall_ms() - 2 * 3600 * 1000), d);
    sqlite3 *sq = NULL;
    int sr = sqlite3_open_v2(db, &sq, SQLITE_OPEN_READWRITE, NULL);
    if (sr == SQLITE_OK)
      sr = sqlite3_exec(sq, sql, NULL, NULL, NULL);
    if (sqlite3_close(sq) != SQLITE_OK || sr != SQLITE_OK)
      return 18;
  }
  /* the file cannot be written: no warning until a write is due (the
   * hit's use time, at close), which turns the handle read-only */
  if (chmod(db, 0400) != 0)
    return 11;
  int rc = ro_hit(db, XPJ_CACHE_MODE_RW, 1, &w, XPJ_CACHE_MODE_RW);
  if (rc)
    return 20 + rc;
  if (w.n != 1 || !strstr(w.text, "cannot be written"))
    return 25; /* the warning of the write at close */
  /* a hit of a row used a moment ago writes nothing (the side file has
   * its hit): nothing to warn about */
  memset(&w, 0, sizeof w);
  rc = ro_hit(db, XPJ_CACHE_MODE_RW, 2, &w, XPJ_CACHE_MODE_RW);
  if (rc || w.n)
    return 60 + rc;
  xpj_cache_config cfg = {.path = db, .mode = XPJ_CACHE_MODE_RW,
                          .max_size = GiB, .warn = rec_warn, .warn_ud = &w};
  memset(&w, 0, sizeof w);
  xpj_cache *c = NULL;
  if (xpj_cache_open(&cfg, &c) != XPJ_OK || w.n ||
      xpj_cache_mode_of(c) != XPJ_CACHE_MODE_RW)
    return 26; /* opening alone writes nothing: no reason to warn */
  tkey t;
  tval v;
  xpj_cache_put(c, key_of(&t, 3), val_of(&v, 3, 400));
  val_free(&v);
  if (w.n != 1 || xpj_cache_mode_of(c) != XPJ_CACHE_MODE_RO)
    return 27;
  xpj_cache_entry e;
  if (xpj_cache_get(c, key_of(&t, 2), &e) != XPJ_OK)
    return 28; /* still served */
  xpj_cache_entry_clear(&e);
  xpj_cache_close(c);
  /* writable again (the empty WAL and its index that the read-only
   * connections above made, and could not remove, got the file's mode
   * then: removed); a writer's close removes them */
  snprintf(side, sizeof side, "%s-wal", db);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", db);
  unlink(side);
  struct stat sb;
  if (chmod(db, 0600) != 0 || ro_put(db, 4, 400) || lstat(side, &sb) == 0)
    return 12;
  /* the directory cannot be written: not even a read-only SQLite
   * connection can make the WAL's index there; the file is read as it is */
  if (chmod(r->dir, 0500) != 0)
    return 13;
  rc = ro_hit(db, XPJ_CACHE_MODE_RW, 2, &w, XPJ_CACHE_MODE_RO);
  if (rc)
    return 30 + rc;
  if (w.n != 1 || !strstr(w.text, "cannot be written"))
    return 35;
  rc = ro_hit(db, XPJ_CACHE_MODE_RO, 1, &w, XPJ_CACHE_MODE_RO);
  if (rc || w.n)
    return 40 + rc;
  if (lstat(side, &sb) == 0)
    return 45; /* nothing was made beside it */
  snprintf(side, sizeof side, "%s-wal", db);
  /* a WAL that may hold commits the file lacks: never read without it */
  if (chmod(r->dir, 0700) != 0)
    return 14;
  int fd = open(side, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0 || write(fd, "not empty", 9) != 9 || close(fd) != 0)
    return 15;
  if (chmod(r->dir, 0500) != 0)
    return 16;
  memset(&w, 0, sizeof w);
  cfg.mode = XPJ_CACHE_MODE_RO;
  if (xpj_cache_open(&cfg, &c) != XPJ_OK)
    return 50;
  bool off = xpj_cache_mode_of(c) == XPJ_CACHE_MODE_OFF && w.n == 1;
  xpj_cache_close(c);
  chmod(r->dir, 0700);
  return off ? 0 : 51;
}

static void test_read_only_directory(void **state) {
  NEED_ROOT(); /* root writes anything: the reader must be someone else */
  fx *f = *state;
  assert_int_equal(chmod(f->dir, 0755), 0);
  rodir r;
  snprintf(r.dir, sizeof r.dir, "%s/ro", f->dir);
  nobody_dir(r.dir, 0700);
  int rc = as_nobody(rodir_child, &r);
  if (rc)
    fail_msg("read-only cache child: code %d", rc);
}

/* ---- (c) use times at a granularity; hits and counters in a side file -- */

/* What a writer would change in a cache's files: the database's bytes and
 * modification time, the WAL's length (-1: none), whether the lock file
 * (made by every writer's open) exists. */
typedef struct fstate {
  uint8_t sha[SHA256_DIGEST_SIZE];
  off_t len, wal;
  struct timespec mtime;
  bool lock;
} fstate;

static fstate files_of(const char *path) {
  fstate s;
  memset(&s, 0, sizeof s);
  size_t n = 0;
  uint8_t *b = read_all(path, &n);
  struct sha256_ctx m;
  sha256_init(&m);
  sha256_update(&m, n, b);
  sha256_digest(&m, sizeof s.sha, s.sha);
  free(b);
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  s.len = sb.st_size;
  s.mtime = sb.st_mtim;
  char p[512];
  snprintf(p, sizeof p, "%s-wal", path);
  s.wal = file_len(p);
  s.lock = exists2(path, ".lock");
  return s;
}

static void expect_untouched(const fstate *a, const fstate *b) {
  assert_memory_equal(a->sha, b->sha, sizeof a->sha);
  assert_int_equal(a->len, b->len);
  assert_int_equal(a->mtime.tv_sec, b->mtime.tv_sec);
  assert_int_equal(a->mtime.tv_nsec, b->mtime.tv_nsec);
  assert_true(b->wal <= 0); /* no frame written */
  assert_false(b->lock);    /* no writer's connection opened */
}

/* The side file's lines (0 when there is none). */
static unsigned side_lines(const char *path) {
  char p[512];
  snprintf(p, sizeof p, "%s.stats", path);
  if (file_len(p) <= 0)
    return 0;
  size_t n = 0;
  uint8_t *b = read_all(p, &n);
  unsigned lines = 0;
  for (size_t i = 0; i < n; i++)
    lines += b[i] == '\n';
  free(b);
  return lines;
}

static void side_add(const char *path, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s.stats", path);
  int fd = open(p, O_WRONLY | O_APPEND | O_CREAT, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  assert_int_equal(close(fd), 0);
}

/* Key i's row: last_used set to ago_ms before now; its last_used, hits. */
static void set_used(const char *path, unsigned i, int64_t ago_ms) {
  tkey t;
  char d[65], sql[160];
  digest_of(key_of(&t, i), d);
  snprintf(sql, sizeof sql, "UPDATE entries SET last_used = %lld "
           "WHERE digest=?1", (long long)(wall_ms() - ago_ms));
  sql_run(path, sql, d);
}

static int64_t row_col(const char *path, unsigned i, const char *col) {
  tkey t;
  char d[65], sql[160];
  digest_of(key_of(&t, i), d);
  snprintf(sql, sizeof sql, "SELECT %s FROM entries WHERE digest=?1", col);
  return sql_int(path, sql, d);
}

/* Key i's hits as xpj_cache_find reports them (the side file's too). */
static uint64_t hits_found(xpj_cache *c, unsigned i) {
  tkey t;
  char d[65];
  digest_of(key_of(&t, i), d);
  xpj_cache_entry e;
  assert_int_equal(xpj_cache_find(c, d, &e), XPJ_OK);
  uint64_t h = e.hits;
  xpj_cache_entry_clear(&e);
  return h;
}

/* A fresh process (fork): opens the cache read-write, gets keys first ..
 * first + n - 1 (fill_and_close's values of size + i bytes: hits) and
 * closes; its exit status (0: every one a hit, no warning). */
static int hit_process(const char *path, unsigned first, unsigned n,
                       size_t size) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    wlog w;
    memset(&w, 0, sizeof w);
    xpj_cache_config cfg = {.path = path, .mode = XPJ_CACHE_MODE_RW,
                            .max_size = GiB, .warn = rec_warn,
                            .warn_ud = &w};
    xpj_cache *c = NULL;
    if (xpj_cache_open(&cfg, &c) != XPJ_OK)
      _exit(2);
    for (unsigned i = first; i < first + n; i++) {
      tkey t;
      xpj_cache_entry e;
      if (xpj_cache_get(c, key_of(&t, i), &e) != XPJ_OK)
        _exit(3);
      int bad = check_val(&e, i, size + i);
      xpj_cache_entry_clear(&e);
      if (bad)
        _exit(4);
    }
    xpj_cache_close(c);
    _exit(w.n ? 5 : 0);
  }
  int ws = 0;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : 100 + WTERMSIG(ws);
}

/* A process that only hits rows used within the granularity (an hour)
 * leaves the database and its WAL byte for byte as they were and opens no
 * writer's connection; its hits and counters are one line of the side
 * file, which stats and find count, and which the next write (any
 * process's) folds into the tables exactly once. */
static void test_hit_process_writes_nothing(void **state) {
  fx *f = *state;
  fill_and_close(f, 3, 2000);
  char lock[256];
  snprintf(lock, sizeof lock, "%s.lock", f->path);
  unlink(lock);
  int64_t used0 = row_col(f->path, 0, "last_used");
  fstate a = files_of(f->path);
  nap_ms(20); /* a write would change the modification time */
  for (int r = 0; r < 3; r++)
    assert_int_equal(hit_process(f->path, 0, 3, 2000), 0);
  fstate b = files_of(f->path);
  expect_untouched(&a, &b);
  assert_int_equal(side_lines(f->path), 3);
  assert_int_equal(row_col(f->path, 0, "last_used"), used0);
  assert_int_equal(row_col(f->path, 0, "hits"), 0);
  char side[256];
  snprintf(side, sizeof side, "%s.stats", f->path);
  struct stat sb;
  assert_int_equal(lstat(side, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0600);

  /* counted: by stats and find (a read-only handle: nothing written) */
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RO, 0);
  xpj_cache_stats s = stats_of(c);
  assert_int_equal(s.counters.l2_hits, 9);
  assert_int_equal(s.counters.l2_misses, 0);
  assert_true(s.counters.saved_ms == 3 * (0.25 + 1.25 + 2.25));
  for (unsigned i = 0; i < 3; i++)
    assert_int_equal(hits_found(c, i), 3);
  listing l = list_of(c);
  assert_int_equal(l.n, 3);
  xpj_cache_close(c);
  b = files_of(f->path);
  expect_untouched(&a, &b);

  /* the next write folds it in (here a put of another process), once */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 7, 100);
  assert_int_equal(file_len(side), 0);
  assert_int_equal(row_col(f->path, 0, "hits"), 3);
  assert_int_equal(row_col(f->path, 2, "hits"), 3);
  assert_int_equal(row_col(f->path, 0, "last_used"), used0);
  s = stats_of(c);
  assert_int_equal(s.counters.l2_hits, 9);
  assert_int_equal(hits_found(c, 1), 3);
  put_i(c, 8, 100);
  xpj_cache_close(c);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RO, 0);
  s = stats_of(c);
  assert_int_equal(s.counters.l2_hits, 9);
  assert_true(s.counters.saved_ms == 3 * (0.25 + 1.25 + 2.25));
  assert_int_equal(hits_found(c, 1), 3);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* A hit on a row whose stored use time is older than the granularity
 * writes it at close (a writer's connection, once); the uses of the other
 * rows that process hit go with that write. The next process finds the
 * time recent and writes nothing. */
static void test_due_use_written(void **state) {
  fx *f = *state;
  fill_and_close(f, 3, 2000);
  set_used(f->path, 0, 2 * 3600 * 1000);
  set_used(f->path, 2, 2 * 3600 * 1000);
  int64_t used1 = row_col(f->path, 1, "last_used");
  int64_t used2 = row_col(f->path, 2, "last_used");
  char lock[256];
  snprintf(lock, sizeof lock, "%s.lock", f->path);
  unlink(lock);
  nap_ms(5);
  int64_t t0 = wall_ms();
  assert_int_equal(hit_process(f->path, 0, 2, 2000), 0);
  int64_t t1 = wall_ms();
  int64_t used0 = row_col(f->path, 0, "last_used");
  assert_true(used0 >= t0 && used0 <= t1);
  assert_int_equal(row_col(f->path, 0, "hits"), 1);
  /* row 1 was recent, but the write happened anyway: its use went too */
  int64_t used1b = row_col(f->path, 1, "last_used");
  assert_true(used1b >= t0 && used1b > used1);
  assert_int_equal(row_col(f->path, 1, "hits"), 1);
  assert_int_equal(row_col(f->path, 2, "last_used"), used2); /* not hit */
  assert_true(exists(lock));
  assert_int_equal(side_lines(f->path), 0);

  /* now recent: the next process writes nothing */
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  xpj_cache_close(c); /* checkpoints the WAL: a file of its own again */
  unlink(lock);
  fstate a = files_of(f->path);
  nap_ms(20);
  assert_int_equal(hit_process(f->path, 0, 2, 2000), 0);
  fstate b = files_of(f->path);
  expect_untouched(&a, &b);
  assert_int_equal(row_col(f->path, 0, "last_used"), used0);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RO, 0);
  assert_int_equal(hits_found(c, 0), 2);
  assert_int_equal(hits_found(c, 1), 2);
  assert_int_equal(stats_of(c).counters.l2_hits, 4);
  xpj_cache_close(c);

  /* the same in one handle: a due use is written at close, not before */
  set_used(f->path, 2, 2 * 3600 * 1000);
  used2 = row_col(f->path, 2, "last_used");
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  t0 = wall_ms();
  expect_hit(c, 2, 2002);
  assert_int_equal(row_col(f->path, 2, "last_used"), used2);
  xpj_cache_close(c);
  assert_true(row_col(f->path, 2, "last_used") >= t0);
  assert_no_warning(&f->w);
}

/* Eviction removes the least recently used at the granularity: a row hit
 * after its use time went stale moves to the back; a hit on a row used
 * within the hour does not move it (its time is not written), unless the
 * process that evicts made it (its own uses are written with its put). */
static void test_eviction_granular(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  for (unsigned i = 0; i < 3; i++)
    put_i(c, i, 10000);
  uint64_t one = stats_of(c).bytes / 3;
  xpj_cache_close(c);
  set_used(f->path, 0, 3 * 3600 * 1000);
  set_used(f->path, 1, 2 * 3600 * 1000);
  set_used(f->path, 2, 90 * 60 * 1000);
  /* 0 is the oldest, but a process uses it: written (it was stale) */
  assert_int_equal(hit_process(f->path, 0, 1, 10000 - 0), 0);
  uint64_t max = 3 * one + one / 2; /* three rows fit */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, max);
  put_i(c, 3, 10000); /* evicts 1 (2 hours), not 0 */
  nap_ms(3);
  put_i(c, 4, 10000); /* evicts 2 (90 minutes) */
  listing l = list_of(c);
  assert_int_equal(l.n, 3);
  assert_true(listed(&l, 0) && listed(&l, 3) && listed(&l, 4));
  xpj_cache_close(c);
  nap_ms(5);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, max);
  put_i(c, 5, 10000); /* evicts 0, the oldest stored and used */
  xpj_cache_close(c);
  /* rows 3, 4, 5 stored in that order; a process uses 3 a moment later:
   * within the granularity, not written, so 3 still goes first */
  assert_int_equal(hit_process(f->path, 3, 1, 10000 - 3), 0);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, max);
  put_i(c, 6, 10000);
  l = list_of(c);
  assert_int_equal(l.n, 3);
  assert_true(listed(&l, 4) && listed(&l, 5) && listed(&l, 6));
  /* this handle's own use of 4 is written with its put: 5 goes */
  nap_ms(3);
  expect_hit(c, 4, 10000);
  put_i(c, 7, 10000);
  l = list_of(c);
  assert_true(listed(&l, 4) && listed(&l, 6) && listed(&l, 7));
  assert_int_equal(stats_of(c).counters.evictions, 5);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* The side file: lines that are cut short, malformed or another
 * version's unknown tokens do not spoil the rest; a file past its limit
 * (256 KiB) makes the next process write the database, which folds it;
 * clear empties it; a file that is not the user's refuses the cache. */
static void test_side_file(void **state) {
  fx *f = *state;
  fill_and_close(f, 2, 1000);
  assert_int_equal(hit_process(f->path, 0, 2, 1000), 0);
  side_add(f->path, "garbage\n"
                    "x1 l2_hits=zz\n"
                    "x1 l2_hits=5 @0123:1:1\n"
                    "x1 l2_hits=3 future_counter=9 compile_ms=1.5\n"
                    "x1 l2_hits=100 @");
  /* the cut line at the end stays alone: the next record starts anew */
  assert_int_equal(hit_process(f->path, 1, 1, 1000), 0);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RO, 0);
  xpj_cache_stats s = stats_of(c);
  assert_int_equal(s.counters.l2_hits, 2 + 3 + 1);
  assert_true(s.counters.compile_ms == 1.5);
  assert_int_equal(hits_found(c, 0), 1);
  assert_int_equal(hits_found(c, 1), 2);
  xpj_cache_close(c);

  /* full: the next process writes the database instead, and folds it */
  char side[256];
  snprintf(side, sizeof side, "%s.stats", f->path);
  char *junk = malloc(300 * 1024 + 1);
  assert_non_null(junk);
  for (size_t i = 0; i < 300 * 1024; i += 3)
    memcpy(junk + i, "z\n\n", 3);
  junk[300 * 1024] = 0;
  side_add(f->path, junk);
  free(junk);
  char lock[256];
  snprintf(lock, sizeof lock, "%s.lock", f->path);
  unlink(lock);
  assert_int_equal(hit_process(f->path, 0, 2, 1000), 0);
  assert_true(exists(lock));
  assert_int_equal(file_len(side), 0);
  assert_int_equal(row_col(f->path, 0, "hits"), 2);
  assert_int_equal(row_col(f->path, 1, "hits"), 3);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  s = stats_of(c);
  assert_int_equal(s.counters.l2_hits, 2 + 3 + 1 + 2);
  xpj_cache_close(c);

  /* clear: the side file's counters go with the table's */
  assert_int_equal(hit_process(f->path, 0, 1, 1000), 0);
  assert_int_equal(side_lines(f->path), 1);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_clear(c), XPJ_OK);
  s = stats_of(c);
  assert_int_equal(s.counters.l2_hits, 0);
  assert_int_equal(s.entries, 0);
  xpj_cache_close(c);
  assert_int_equal(file_len(side), 0);

  /* the side file is a file of the cache: a link there is refused */
  unlink(side);
  assert_int_equal(symlink("/dev/null", side), 0);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_OFF);
  xpj_cache_close(c);
  assert_int_equal(f->w.n, 1);
  assert_warned(&f->w, "refusing");
  unlink(side);

  /* made 0600 whatever the umask */
  memset(&f->w, 0, sizeof f->w);
  fill_and_close(f, 1, 1000);
  mode_t um = umask(0277);
  int rc = hit_process(f->path, 0, 1, 1000);
  umask(um);
  assert_int_equal(rc, 0);
  struct stat sb;
  assert_int_equal(lstat(side, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0600);
  assert_int_equal(side_lines(f->path), 1);
}

/* The kept total of the entries' sizes (stats row "entry_bytes") equals
 * their sum. */
static void expect_total_kept(const char *path) {
  int64_t kept = sql_int(path,
                         "SELECT coalesce((SELECT value FROM stats WHERE "
                         "name='entry_bytes'), -1)",
                         NULL);
  int64_t sum = sql_int(path, "SELECT total(size) FROM entries", NULL);
  if (kept != sum)
    fail_msg("kept total %lld, the entries' sizes add up to %lld",
             (long long)kept, (long long)sum);
}

/* (c) every write that adds or removes a row keeps the total */
static void test_total_kept(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, 40 * 1024);
  for (unsigned i = 0; i < 4; i++)
    put_i(c, i, 1000 + 100 * i);
  expect_total_kept(f->path);
  put_i(c, 2, 5000); /* replaced */
  expect_total_kept(f->path);
  tkey t;
  tval v;
  assert_int_equal(xpj_cache_remove(c, key_of(&t, 1)), XPJ_OK);
  expect_total_kept(f->path);
  assert_int_equal(xpj_cache_put_later(c, key_of(&t, 9), val_of(&v, 9, 700)),
                   XPJ_OK);
  val_free(&v);
  put_i(c, 10, 800); /* writes the deferred put too */
  expect_total_kept(f->path);
  /* an expired row found by a lookup, a damaged one */
  xpj_cache_value gone = {1, NULL, 0, "", "old", 0, 0, 1.5, wall_ms() - 1};
  assert_int_equal(xpj_cache_put(c, key_of(&t, 11), &gone), XPJ_OK);
  expect_total_kept(f->path);
  expect_miss(c, 11);
  expect_total_kept(f->path);
  char dg[65];
  digest_of(key_of(&t, 3), dg);
  sql_flip_data(f->path, dg, 10);
  expect_miss(c, 3);
  expect_total_kept(f->path);
  /* eviction */
  for (unsigned i = 20; i < 40; i++)
    put_i(c, i, 3000);
  assert_true(stats_of(c).counters.evictions > 0);
  expect_total_kept(f->path);
  uint64_t removed = 0;
  assert_int_equal(xpj_cache_prune(c, 10 * 1024, 0, &removed, NULL), XPJ_OK);
  assert_true(removed > 0);
  expect_total_kept(f->path);
  assert_int_equal(xpj_cache_clear(c), XPJ_OK);
  put_i(c, 50, 100);
  expect_total_kept(f->path);
  xpj_cache_close(c);
  assert_warned(&f->w, "checksum"); /* the damaged row, only */
  assert_int_equal(f->w.n, 1);
}

/* (d) a file whose total is not kept (made before it was, or written by an
 * older xpjit, which does not keep it): summed once when first needed, and
 * again by prune; and the total kept is what the size limit is checked
 * against, not a sum of every row */
static void test_total_old_files(void **state) {
  fx *f = *state;
  fill_and_close(f, 4, 1000);
  sql_run(f->path, "DELETE FROM stats WHERE name='entry_bytes'", NULL);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  expect_hit(c, 1, 1001);
  put_i(c, 5, 1000);
  expect_total_kept(f->path); /* summed, then kept */
  /* a row written by an older xpjit: not counted until a prune */
  char dg[65];
  tkey t;
  digest_of(key_of(&t, 1), dg);
  sql_run(f->path,
          "INSERT INTO entries SELECT 'old' || digest, key, code, kernel, "
          "dtypes, ndim, target, options, versions, failed, entry, "
          "local_bytes, scratch_bytes, data, log, checksum, 7777, compile_ms, "
          "created, 0, hits, expires FROM entries WHERE digest=?1",
          dg);
  uint64_t removed = 9;
  assert_int_equal(xpj_cache_prune(c, 0, 0, &removed, NULL), XPJ_OK);
  assert_int_equal(removed, 0);
  expect_total_kept(f->path);
  /* the limit is checked against the kept total: one that says 3000
   * bytes more than there are evicts that much more (a sum would evict
   * nothing), and a prune sums again */
  xpj_cache_close(c);
  int64_t sum = sql_int(f->path, "SELECT total(size) FROM entries", NULL);
  sql_run(f->path, "UPDATE stats SET value = value + 3000 WHERE "
                   "name='entry_bytes'", NULL);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, (uint64_t)sum + 2500);
  put_i(c, 6, 100);
  assert_true(stats_of(c).counters.evictions > 0);
  assert_int_equal(xpj_cache_prune(c, 0, 0, NULL, NULL), XPJ_OK);
  expect_total_kept(f->path);
  expect_hit(c, 6, 100);
  /* a total below zero cannot be right: summed again */
  sql_run(f->path, "UPDATE stats SET value = -1e6 WHERE name='entry_bytes'",
          NULL);
  put_i(c, 7, 100);
  expect_total_kept(f->path);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* ---- hit files (cache/hitfile.h) --------------------------------------- */

#include "../cache/hitfile.h"

static void hit_path(const fx *f, unsigned i, char *p, size_t size) {
  tkey t;
  char d[65];
  digest_of(key_of(&t, i), d);
  snprintf(p, size, "%s.hits/%s", f->path, d);
}

static xpj_cache *open_lazy(wlog *w, const char *path, xpj_cache_mode mode) {
  xpj_cache_config cfg = {.path = path, .mode = mode, .max_size = GiB,
                          .warn = rec_warn, .warn_ud = w};
  xpj_cache *c = NULL;
  assert_int_equal(xpj_l2_open(&cfg, &c), XPJ_OK);
  return c;
}

/* A lazy handle's hit comes from the hit file: right value, database not
 * opened, the hit counted (through the side file) at close. */
static void expect_file_hit(fx *f, unsigned i, size_t size) {
  xpj_cache *l = open_lazy(&f->w, f->path, XPJ_CACHE_MODE_RW);
  expect_hit(l, i, size);
  if (file_open_here(f->path))
    fail_msg("key %u: the database was opened for a hit file's hit", i);
  xpj_cache_close(l);
}

/* The hit file mirrors the row: written by a put (0600 in a 0700
 * directory), read by a lazy handle without SQLite, its hits counted. */
static void test_hit_files(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 3000);
  put_i(c, 2, 0); /* an empty binary is still one */
  xpj_cache_close(c);
  char p[512], dir[300];
  hit_path(f, 1, p, sizeof p);
  struct stat sb;
  assert_int_equal(stat(p, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0600);
  snprintf(dir, sizeof dir, "%s.hits", f->path);
  assert_int_equal(stat(dir, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0700);
  expect_file_hit(f, 1, 3000);
  expect_file_hit(f, 2, 0);
  expect_file_hit(f, 1, 3000);
  /* a miss opens the database, and answers as it always did */
  xpj_cache *l = open_lazy(&f->w, f->path, XPJ_CACHE_MODE_RW);
  expect_miss(l, 3);
  assert_true(file_open_here(f->path));
  expect_hit(l, 2, 0);
  xpj_cache_close(l);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  xpj_cache_stats st = stats_of(c);
  assert_int_equal(st.counters.l2_hits, 4);
  assert_int_equal(st.counters.l2_misses, 1);
  assert_true(st.counters.saved_ms >= 3 * 1.25 - 1e-9);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* An alias through a fresh lazy handle (xpj_l2_alias_digest, then
 * xpj_l2_get_aliased), asking with key i's fields
 * and no code: 0 a hit with key i's code and value (the database not
 * opened), 2 a miss; the entry's code in code when given. */
static int alias_get_at(fx *f, const char *alias, unsigned i, size_t size,
                        xpj_cache_mode mode, int line) {
  xpj_cache *l = open_lazy(&f->w, f->path, mode);
  tkey t;
  xpj_cache_key k = *key_of(&t, i);
  k.code = NULL;
  xpj_cache_entry e;
  memset(&e, 0, sizeof e);
  char digest[65];
  xpj_status st = xpj_l2_alias_digest(l, alias, digest)
                      ? xpj_l2_get_aliased(l, alias, digest, &k, &e)
                      : XPJ_ERR_NOT_FOUND;
  if (file_open_here(f->path))
    fail_msg("alias %s (line %d): the database was opened", alias, line);
  int r = 2;
  if (st == XPJ_OK) {
    if (check_val(&e, i, size) || strcmp(e.code, t.code))
      fail_msg("alias %s (line %d): a wrong value or code", alias, line);
    r = 0;
  } else {
    assert_int_equal(st, XPJ_ERR_NOT_FOUND);
    assert_null(e.data);
  }
  xpj_cache_entry_clear(&e);
  xpj_cache_close(l);
  return r;
}

#define alias_get(f, a, i, size, mode) \
  alias_get_at(f, a, i, size, mode, __LINE__)

/* The alias file of text (cache.c, alias_file). */
static void alias_path(const fx *f, const char *text, char *p, size_t size) {
  uint8_t raw[SHA256_DIGEST_SIZE];
  struct sha256_ctx m;
  sha256_init(&m);
  sha256_update(&m, strlen(text), (const uint8_t *)text);
  sha256_digest(&m, sizeof raw, raw);
  int n = snprintf(p, size, "%s.hits/a", f->path);
  for (int j = 0; j < SHA256_DIGEST_SIZE; j++)
    n += snprintf(p + n, size - (size_t)n, "%02x", raw[j]);
}

/* Single flight among processes (xpj_l2_flight_begin): one holder of a
 * key's turn at a time (another open of the file, as another process
 * makes, waits and gives up at its limit); a turn ended marks its file
 * for those who waited on it, and removes it once the row is settled;
 * a child forked while the turn is held does not keep it; clear takes
 * the files left; nothing taken, at once, where the turn cannot be
 * trusted or is switched off. */
static void test_single_flight(void **state) {
  fx *f = *state;
  static const char d[] =
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  char lock[600], dir[300];
  snprintf(dir, sizeof dir, "%s.flight", f->path);
  snprintf(lock, sizeof lock, "%s/%s", dir, d);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  int64_t waited = -1;
  bool after = true;
  int a = xpj_l2_flight_begin(c, d, 1000, &waited, &after);
  assert_true(a >= 0);
  assert_true(waited >= 0 && waited < 500);
  assert_false(after);
  struct stat sb;
  assert_int_equal(stat(dir, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0700);
  /* held: another waits its limit, then goes without */
  int b = xpj_l2_flight_begin(c, d, 120, &waited, &after);
  assert_int_equal(b, -1);
  assert_true(waited >= 120);
  /* a child forked now does not hold it once the parent lets go */
  pid_t kid = fork();
  if (kid == 0) {
    sleep(5);
    _exit(0);
  }
  assert_true(kid > 0);
  /* not settled: the file stays, marked (the turn was had) */
  xpj_l2_flight_end(c, d, a, false);
  assert_int_equal(stat(lock, &sb), 0);
  assert_int_equal(sb.st_size, 1);
  a = xpj_l2_flight_begin(c, d, 1000, &waited, &after);
  assert_true(a >= 0); /* the child's copy was closed: not held by it */
  assert_true(waited < 500);
  assert_true(after);
  kill(kid, SIGKILL);
  waitpid(kid, NULL, 0);
  /* given up (yield): the next one in goes at once */
  xpj_l2_flight_yield(a);
  b = xpj_l2_flight_begin(c, d, 1000, &waited, &after);
  assert_true(b >= 0 && waited < 500);
  xpj_l2_flight_end(c, d, b, false);
  /* settled: gone; another open meanwhile made its own, which stays */
  xpj_l2_flight_end(c, d, a, true);
  assert_int_equal(stat(lock, &sb), -1);
  a = xpj_l2_flight_begin(c, d, 1000, &waited, &after);
  assert_true(a >= 0);
  assert_false(after); /* a new file */
  assert_int_equal(unlink(lock), 0);
  b = xpj_l2_flight_begin(c, d, 1000, &waited, &after); /* a new file: free */
  assert_true(b >= 0);
  xpj_l2_flight_end(c, d, a, true); /* not its file: left */
  assert_int_equal(stat(lock, &sb), 0);
  xpj_l2_flight_end(c, d, b, false);
  assert_int_equal(stat(lock, &sb), 0);
  /* clear takes what was left */
  assert_int_equal(xpj_cache_clear(c), XPJ_OK);
  assert_int_equal(stat(lock, &sb), -1);
  /* not a digest; a FIFO in its place: nothing, at once */
  assert_int_equal(xpj_l2_flight_begin(c, "../x", 1000, &waited, &after), -1);
  assert_int_equal(mkfifo(lock, 0600), 0);
  assert_int_equal(xpj_l2_flight_begin(c, d, 1000, &waited, &after), -1);
  assert_int_equal(waited, 0);
  assert_int_equal(unlink(lock), 0);
  /* a directory others may write: nothing */
  assert_int_equal(chmod(dir, 0770), 0);
  assert_int_equal(xpj_l2_flight_begin(c, d, 1000, &waited, &after), -1);
  assert_int_equal(chmod(dir, 0700), 0);
  xpj_cache_close(c);
  /* read-only, or switched off: nothing */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RO, GiB);
  assert_int_equal(xpj_l2_flight_begin(c, d, 1000, &waited, &after), -1);
  xpj_cache_close(c);
  setenv("XPJIT_CACHE_SINGLE_FLIGHT", "0", 1);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  unsetenv("XPJIT_CACHE_SINGLE_FLIGHT");
  assert_int_equal(xpj_l2_flight_begin(c, d, 1000, &waited, &after), -1);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* Which file a handle's writer connection has open (xpjitd names it to
 * its clients): the file at the path when it opened it, the new one when
 * it replaced a damaged file, and still its own after someone else put
 * another file at the path. */
static void expect_identity(xpj_cache *c, const char *path) {
  struct stat sb;
  uint64_t dev = 0, ino = 0;
  assert_int_equal(stat(path, &sb), 0);
  assert_true(xpj_l2_db_identity(c, true, &dev, &ino));
  assert_true(dev == (uint64_t)sb.st_dev && ino == (uint64_t)sb.st_ino);
  assert_true(xpj_l2_db_identity(c, false, &dev, &ino)); /* not held */
}

static void test_db_identity(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 100);
  expect_identity(c, f->path);
  /* another file put at the path (as another process could) */
  char old[200];
  snprintf(old, sizeof old, "%s.old", f->path);
  assert_int_equal(rename(f->path, old), 0);
  xpj_cache *d = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(d, 2, 100);
  expect_identity(d, f->path);
  expect_identity(c, old);
  xpj_cache_close(d);
  xpj_cache_close(c);
  /* a damaged file replaced: the new one */
  char bad[200];
  snprintf(bad, sizeof bad, "%s/bad.db", f->dir);
  static const char junk[] = "not a database, not at all, nothing like one";
  write_file(bad, junk, sizeof junk - 1);
  c = open_cache(&f->w, bad, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 3, 100);
  expect_identity(c, bad);
  xpj_cache_close(c);
  f->w.n = 0; /* the replacement's warning */
  /* read-only: no writer connection */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RO, GiB);
  uint64_t dev, ino;
  assert_false(xpj_l2_db_identity(c, true, &dev, &ino));
  xpj_cache_close(c);
}

/* An alias is made in place where there is none (one directory write, as
 * every process of a start-up storm that got the kernel at once tries),
 * left alone when another process made the same one, and replaced whole
 * (a temporary link renamed over it) when something else is there. */
static void test_alias_made_in_place(void **state) {
  fx *f = *state;
  int dfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(dfd >= 0);
  char a[66] = "a", d1[65], d2[65], t[65];
  memset(a + 1, '7', 64);
  a[65] = 0;
  memset(d1, '1', 64);
  memset(d2, '2', 64);
  memset(t, 'c', 64);
  d1[64] = d2[64] = t[64] = 0;
  char want[140], got[140];
  assert_true(xpj_hitfile_set_alias(dfd, a, d1, t));
  snprintf(want, sizeof want, "%s:%s", d1, t);
  ssize_t n = readlinkat(dfd, a, got, sizeof got - 1);
  assert_int_equal(n, 129);
  got[n] = 0;
  assert_string_equal(got, want);
  struct stat s1, s2;
  assert_int_equal(fstatat(dfd, a, &s1, AT_SYMLINK_NOFOLLOW), 0);
  /* the same one again: not made, the link untouched */
  assert_false(xpj_hitfile_set_alias(dfd, a, d1, t));
  assert_int_equal(fstatat(dfd, a, &s2, AT_SYMLINK_NOFOLLOW), 0);
  assert_true(s1.st_ino == s2.st_ino);
  /* another text there: replaced */
  assert_true(xpj_hitfile_set_alias(dfd, a, d2, t));
  snprintf(want, sizeof want, "%s:%s", d2, t);
  n = readlinkat(dfd, a, got, sizeof got - 1);
  assert_int_equal(n, 129);
  got[n] = 0;
  assert_string_equal(got, want);
  /* a regular file there: replaced by the link */
  assert_int_equal(unlinkat(dfd, a, 0), 0);
  int fd = openat(dfd, a, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  close(fd);
  assert_true(xpj_hitfile_set_alias(dfd, a, d1, t));
  assert_int_equal(fstatat(dfd, a, &s2, AT_SYMLINK_NOFOLLOW), 0);
  assert_true(S_ISLNK(s2.st_mode));
  /* nothing left behind */
  DIR *dir = fdopendir(dup(dfd));
  assert_non_null(dir);
  struct dirent *e;
  int entries = 0;
  while ((e = readdir(dir)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      entries++;
  closedir(dir);
  assert_int_equal(entries, 1);
  close(dfd);
}

/* An alias leads a request, given without its code, to its row's hit
 * file: a hit only for exactly the fields asked (the code the file names),
 * never for another key's file it was pointed at, gone with its row, and
 * never opening the database. */
static void test_aliases(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 2000);
  put_i(c, 2, 100);
  tkey t1, t2, t3;
  xpj_l2_set_alias(c, "one", key_of(&t1, 1));
  xpj_l2_set_alias(c, "two", key_of(&t2, 2));
  xpj_l2_set_alias(c, "three", key_of(&t3, 3)); /* no row: no alias */
  xpj_cache_close(c);
  char a1[512], a2[512], a3[512], h1[512], h2[512];
  alias_path(f, "one", a1, sizeof a1);
  alias_path(f, "two", a2, sizeof a2);
  alias_path(f, "three", a3, sizeof a3);
  hit_path(f, 1, h1, sizeof h1);
  hit_path(f, 2, h2, sizeof h2);
  struct stat sb;
  assert_int_equal(lstat(a1, &sb), 0);
  assert_true(S_ISLNK(sb.st_mode));
  assert_int_equal(lstat(a3, &sb), -1);
  assert_int_equal(alias_get(f, "one", 1, 2000, XPJ_CACHE_MODE_RW), 0);
  assert_int_equal(alias_get(f, "two", 2, 100, XPJ_CACHE_MODE_RW), 0);
  assert_int_equal(alias_get(f, "one", 1, 2000, XPJ_CACHE_MODE_RO), 0);
  /* asked with another key's fields: the file's key text is not theirs
   * (a read-only handle leaves the alias, a writer removes it) */
  assert_int_equal(alias_get(f, "one", 2, 100, XPJ_CACHE_MODE_RO), 2);
  assert_int_equal(lstat(a1, &sb), 0);
  assert_int_equal(alias_get(f, "one", 2, 100, XPJ_CACHE_MODE_RW), 2);
  assert_int_equal(lstat(a1, &sb), -1);
  assert_int_equal(alias_get(f, "nothing", 1, 2000, XPJ_CACHE_MODE_RW), 2);
  /* pointed at another key's file (as only this user could) */
  assert_int_equal(symlink(strrchr(h2, '/') + 1, a1), 0);
  assert_int_equal(alias_get(f, "one", 1, 2000, XPJ_CACHE_MODE_RW), 2);
  assert_int_equal(lstat(a1, &sb), -1);
  assert_int_equal(alias_get(f, "two", 2, 100, XPJ_CACHE_MODE_RW), 0);
  /* what another alias says, and its own file with a forged tag */
  char said[200];
  ssize_t sl = readlink(a2, said, sizeof said - 1);
  assert_int_equal(sl, 129);
  said[sl] = 0;
  assert_int_equal(symlink(said, a1), 0);
  assert_int_equal(alias_get(f, "one", 2, 100, XPJ_CACHE_MODE_RW), 2);
  assert_int_equal(lstat(a1, &sb), -1);
  assert_int_equal(unlink(a2), 0);
  said[64 + 1 + 10] ^= 1;
  assert_int_equal(symlink(said, a2), 0);
  assert_int_equal(alias_get(f, "two", 2, 100, XPJ_CACHE_MODE_RW), 2);
  assert_int_equal(lstat(a2, &sb), -1);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  xpj_l2_set_alias(c, "two", key_of(&t2, 2));
  xpj_cache_close(c);
  assert_int_equal(alias_get(f, "two", 2, 100, XPJ_CACHE_MODE_RW), 0);
  /* a regular file there: garbage, then a damaged copy of the hit file */
  write_file(a1, "garbage", 7);
  chmod(a1, 0600);
  assert_int_equal(alias_get(f, "one", 1, 2000, XPJ_CACHE_MODE_RW), 2);
  assert_int_equal(lstat(a1, &sb), -1);
  size_t n = 0;
  uint8_t *b = read_all(h1, &n);
  b[n - 1] ^= 1;
  write_file(a1, b, n);
  chmod(a1, 0600);
  free(b);
  assert_int_equal(alias_get(f, "one", 1, 2000, XPJ_CACHE_MODE_RW), 2);
  assert_int_equal(lstat(a1, &sb), -1); /* and the hit file kept */
  assert_int_equal(lstat(h1, &sb), 0);
  /* made again by a handle that found the row */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  expect_hit(c, 1, 2000);
  xpj_l2_set_alias(c, "one", key_of(&t1, 1));
  /* the row gone: the alias dangles, and a reader removes it (a
   * read-only one leaves it) */
  assert_int_equal(xpj_cache_remove(c, key_of(&t2, 2)), XPJ_OK);
  xpj_cache_close(c);
  assert_int_equal(alias_get(f, "one", 1, 2000, XPJ_CACHE_MODE_RW), 0);
  assert_int_equal(alias_get(f, "two", 2, 100, XPJ_CACHE_MODE_RO), 2);
  assert_int_equal(lstat(a2, &sb), 0);
  assert_int_equal(alias_get(f, "two", 2, 100, XPJ_CACHE_MODE_RW), 2);
  assert_int_equal(lstat(a2, &sb), -1);
  /* clear takes them all; a hit file's hour is the alias's */
  struct timespec old[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
  assert_int_equal(utimensat(AT_FDCWD, h1, old, AT_SYMLINK_NOFOLLOW), 0);
  assert_int_equal(alias_get(f, "one", 1, 2000, XPJ_CACHE_MODE_RW), 2);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_clear(c), XPJ_OK);
  xpj_cache_close(c);
  assert_int_equal(lstat(a1, &sb), -1);
  /* a handle that opened its database answers from it, not by alias */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 2000);
  xpj_l2_set_alias(c, "one", key_of(&t1, 1));
  xpj_cache_close(c);
  xpj_cache *l = open_lazy(&f->w, f->path, XPJ_CACHE_MODE_RW);
  expect_miss(l, 5); /* opens it */
  char digest[65];
  assert_false(xpj_l2_alias_digest(l, "one", digest));
  xpj_cache_close(l);
  assert_int_equal(alias_get(f, "one", 1, 2000, XPJ_CACHE_MODE_RW), 0);
  assert_no_warning(&f->w);
}

/* Aliases are bounded (a review found them growing with every build and
 * source): a prune, and an hour after the last sweep the next alias
 * made, remove those not the cache's or whose hit file is gone, then the
 * oldest beyond 4 per hit file and 64 more. */
static void test_alias_sweep(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 100);
  put_i(c, 2, 100);
  tkey t1, t2;
  char name[32];
  time_t base = time(NULL) - 1000;
  for (int i = 0; i < 200; i++) {
    snprintf(name, sizeof name, "x%d", i);
    xpj_l2_set_alias(c, name, key_of(&t1, 1));
    /* made one second after another (whatever the file system keeps) */
    char ap[512];
    alias_path(f, name, ap, sizeof ap);
    struct timespec at[2] = {{base + i, 0}, {base + i, 0}};
    assert_int_equal(utimensat(AT_FDCWD, ap, at, AT_SYMLINK_NOFOLLOW), 0);
  }
  xpj_l2_set_alias(c, "two", key_of(&t2, 2));
  xpj_cache_close(c);
  assert_int_equal(aliases_of(f->path), 201);
  /* one whose row goes, and one not the cache's */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_remove(c, key_of(&t2, 2)), XPJ_OK);
  char a[512];
  alias_path(f, "forged", a, sizeof a);
  char said[200];
  snprintf(said, sizeof said, "%064d:%064d", 0, 0);
  assert_int_equal(symlink(said, a), 0);
  assert_int_equal(aliases_of(f->path), 202);
  uint64_t removed = 0, freed = 0;
  assert_int_equal(xpj_cache_prune(c, 0, 0, &removed, &freed), XPJ_OK);
  xpj_cache_close(c);
  assert_int_equal(aliases_of(f->path), 1 * 4 + 64);
  struct stat sb;
  assert_int_equal(lstat(a, &sb), -1);
  /* the newest kept, the oldest gone */
  assert_int_equal(alias_get(f, "x199", 1, 100, XPJ_CACHE_MODE_RO), 0);
  assert_int_equal(alias_get(f, "x0", 1, 100, XPJ_CACHE_MODE_RO), 2);
  /* made without a prune: an hour after the last sweep, the next alias
   * made sweeps */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  for (int i = 0; i < 20; i++) {
    snprintf(name, sizeof name, "y%d", i);
    xpj_l2_set_alias(c, name, key_of(&t1, 1));
  }
  assert_int_equal(aliases_of(f->path), 68 + 20);
  char mark[600];
  snprintf(mark, sizeof mark, "%s.hits/.swept", f->path);
  struct timespec old[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
  assert_int_equal(utimensat(AT_FDCWD, mark, old, 0), 0);
  xpj_l2_set_alias(c, "z", key_of(&t1, 1));
  xpj_cache_close(c);
  assert_int_equal(aliases_of(f->path), 68);
  assert_int_equal(alias_get(f, "z", 1, 100, XPJ_CACHE_MODE_RO), 0);
  assert_no_warning(&f->w);
}

/* Reads key 1 through a lazy handle: 0 a hit without the database, 1 a
 * hit from the database (the file not believed), 2 a miss. */
static int lazy_get(fx *f, unsigned i, size_t size) {
  xpj_cache *l = open_lazy(&f->w, f->path, XPJ_CACHE_MODE_RW);
  tkey t;
  xpj_cache_entry e;
  xpj_status st = xpj_cache_get(l, key_of(&t, i), &e);
  int r = st != XPJ_OK ? 2 : file_open_here(f->path) ? 1 : 0;
  if (st == XPJ_OK && check_val(&e, i, size))
    fail_msg("key %u: a wrong value from a hit file", i);
  xpj_cache_entry_clear(&e);
  xpj_cache_close(l);
  return r;
}

/* A hit file that is damaged, another key's, another cache's (another
 * key file), writable or readable by others, a link, or too old to say
 * the row's use is recorded is not believed: the database answers, and
 * writes the file again. */
static void test_hit_files_refused(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 2000);
  put_i(c, 2, 100);
  xpj_cache_close(c);
  char p1[512], p2[512];
  hit_path(f, 1, p1, sizeof p1);
  hit_path(f, 2, p2, sizeof p2);
  size_t n = 0;
  uint8_t *good = read_all(p1, &n);
  assert_non_null(good);
  assert_int_equal(lazy_get(f, 1, 2000), 0);
  /* every byte flipped (a sample of them, and the whole header) */
  for (size_t at = 0; at < n; at += at < 200 ? 1 : 97) {
    good[at] ^= 0x40;
    write_file(p1, good, n);
    chmod(p1, 0600);
    int r = lazy_get(f, 1, 2000);
    if (r != 1)
      fail_msg("byte %zu flipped: %s", at, r ? "a miss" : "believed");
    good[at] ^= 0x40;
    size_t m = 0;
    uint8_t *again = read_all(p1, &m); /* written again from the row */
    assert_true(m == n && !memcmp(again, good, n));
    free(again);
  }
  /* cut short, and one byte more */
  write_file(p1, good, n - 1);
  chmod(p1, 0600);
  assert_int_equal(lazy_get(f, 1, 2000), 1);
  uint8_t *more = malloc(n + 1);
  memcpy(more, good, n);
  more[n] = 0;
  write_file(p1, more, n + 1);
  chmod(p1, 0600);
  assert_int_equal(lazy_get(f, 1, 2000), 1);
  free(more);
  /* key 1's file under key 2's name: never key 1's value for key 2 */
  size_t n2 = 0;
  uint8_t *two = read_all(p2, &n2);
  write_file(p2, good, n);
  chmod(p2, 0600);
  assert_int_equal(lazy_get(f, 2, 100), 1);
  free(two);
  /* group- or world-accessible, or a link: not read */
  chmod(p1, 0640);
  assert_int_equal(lazy_get(f, 1, 2000), 1);
  chmod(p1, 0606);
  assert_int_equal(lazy_get(f, 1, 2000), 1);
  chmod(p1, 0600);
  assert_int_equal(lazy_get(f, 1, 2000), 0);
  char real[600];
  snprintf(real, sizeof real, "%s/real-hit", f->dir);
  assert_int_equal(rename(p1, real), 0);
  assert_int_equal(symlink(real, p1), 0);
  struct stat sb, was;
  assert_int_equal(stat(real, &was), 0);
  assert_int_equal(lazy_get(f, 1, 2000), 1);
  /* not read, nor written through: the link is replaced by the file
   * written again (as anything no reader would read), its target left */
  assert_int_equal(lstat(p1, &sb), 0);
  assert_true(S_ISREG(sb.st_mode));
  assert_true(sb.st_ino != was.st_ino);
  assert_int_equal(lstat(real, &sb), 0);
  assert_true(sb.st_ino == was.st_ino && sb.st_size == was.st_size &&
              sb.st_mtim.tv_sec == was.st_mtim.tv_sec &&
              sb.st_mtim.tv_nsec == was.st_mtim.tv_nsec);
  assert_int_equal(lazy_get(f, 1, 2000), 0);
  unlink(p1);
  assert_int_equal(lazy_get(f, 1, 2000), 1); /* written again */
  assert_int_equal(lazy_get(f, 1, 2000), 0);
  /* the database file replaced by a copy (another inode): its old hit
   * files name another file, and are written again */
  char copy[600];
  snprintf(copy, sizeof copy, "cp '%s' '%s.copy' && mv '%s.copy' '%s'",
           f->path, f->path, f->path, f->path);
  assert_int_equal(system(copy), 0);
  assert_int_equal(lazy_get(f, 1, 2000), 1);
  assert_int_equal(lazy_get(f, 1, 2000), 0);
  /* another cache's file for the same key (its own key file) */
  char other[300];
  snprintf(other, sizeof other, "%s/other.db", f->dir);
  c = open_cache(&f->w, other, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 2000);
  xpj_cache_close(c);
  char po[600];
  tkey t;
  char d[65];
  digest_of(key_of(&t, 1), d);
  snprintf(po, sizeof po, "%s.hits/%s", other, d);
  size_t no = 0;
  uint8_t *foreign = read_all(po, &no);
  assert_non_null(foreign);
  write_file(p1, foreign, no);
  chmod(p1, 0600);
  assert_int_equal(lazy_get(f, 1, 2000), 1);
  free(foreign);
  /* file and row last used two hours ago: the database answers and
   * records the use (a write at close), and the file's time is renewed */
  struct timespec old[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
  assert_int_equal(utimensat(AT_FDCWD, p1, old, 0), 0);
  char ago[32];
  snprintf(ago, sizeof ago, "%lld", (long long)(wall_ms() - 7200 * 1000LL));
  sql_run(f->path, "UPDATE entries SET last_used = CAST(?1 AS INTEGER)", ago);
  int64_t used0 = sql_int(f->path, "SELECT last_used FROM entries WHERE "
                          "digest=?", d);
  nap_ms(5);
  assert_int_equal(lazy_get(f, 1, 2000), 1);
  assert_int_equal(stat(p1, &sb), 0);
  assert_true(sb.st_mtime >= time(NULL) - 60);
  assert_true(sql_int(f->path, "SELECT last_used FROM entries WHERE digest=?",
                      d) > used0);
  assert_int_equal(lazy_get(f, 1, 2000), 0);
  free(good);
  assert_no_warning(&f->w);
}

/* The files follow the rows: gone with a remove, a failure stored over
 * the row, an eviction, a prune, a clear; none for a read-only handle or
 * with XPJIT_CACHE_HIT_FILES=0. */
static void test_hit_files_follow_rows(void **state) {
  fx *f = *state;
  char p[512];
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, 5000);
  for (unsigned i = 1; i <= 3; i++)
    put_i(c, i, 1000);
  tkey t;
  assert_int_equal(xpj_cache_remove(c, key_of(&t, 1)), XPJ_OK);
  hit_path(f, 1, p, sizeof p);
  assert_false(exists(p));
  tval v;
  xpj_cache_value fv = *val_of(&v, 2, 0);
  fv.failed = 1;
  fv.size = 0;
  assert_int_equal(xpj_cache_put(c, key_of(&t, 2), &fv), XPJ_OK);
  val_free(&v);
  hit_path(f, 2, p, sizeof p);
  assert_false(exists(p));
  for (unsigned i = 4; i <= 9; i++) /* over 5000 bytes: 3, 4, ... evicted */
    put_i(c, i, 1000);
  unsigned files = 0;
  for (unsigned i = 1; i <= 9; i++) {
    hit_path(f, i, p, sizeof p);
    tkey tk;
    xpj_cache_entry e;
    bool row = xpj_cache_get(c, key_of(&tk, i), &e) == XPJ_OK && !e.failed;
    xpj_cache_entry_clear(&e);
    if (row != exists(p))
      fail_msg("key %u: row %d, hit file %d", i, row, exists(p));
    files += exists(p);
  }
  assert_true(files >= 3 && files <= 5);
  uint64_t removed = 0, freed = 0;
  assert_int_equal(xpj_cache_prune(c, 2000, 0, &removed, &freed), XPJ_OK);
  assert_true(removed > 0);
  unsigned left = 0;
  for (unsigned i = 1; i <= 9; i++) {
    hit_path(f, i, p, sizeof p);
    left += exists(p);
  }
  assert_int_equal(left, files - removed);
  assert_int_equal(xpj_cache_clear(c), XPJ_OK);
  for (unsigned i = 1; i <= 9; i++) {
    hit_path(f, i, p, sizeof p);
    assert_false(exists(p));
  }
  put_i(c, 1, 100);
  xpj_cache_close(c);
  hit_path(f, 1, p, sizeof p);
  assert_true(exists(p));
  /* read-only: hits read, nothing written */
  unlink(p);
  xpj_cache *r = open_lazy(&f->w, f->path, XPJ_CACHE_MODE_RO);
  expect_hit(r, 1, 100);
  xpj_cache_close(r);
  assert_false(exists(p));
  /* switched off */
  setenv("XPJIT_CACHE_HIT_FILES", "0", 1);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 5, 100);
  expect_hit(c, 1, 100);
  xpj_cache_close(c);
  unsetenv("XPJIT_CACHE_HIT_FILES");
  hit_path(f, 5, p, sizeof p);
  assert_false(exists(p));
  hit_path(f, 1, p, sizeof p);
  assert_false(exists(p));
  assert_no_warning(&f->w);
}

static void count_problem(void *ud, const char *msg) {
  wlog *w = ud;
  rec_warn(w, msg);
}

/* verify checks the hit files: a damaged one, and one whose row is gone
 * (deleted by a connection without the trigger, as an older xpjit's), are
 * reported (not counted bad: neither is served); repair removes both, and
 * temporary files. */
static void test_hit_files_verify(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  for (unsigned i = 1; i <= 4; i++)
    put_i(c, i, 500);
  /* aliases: one right, one whose hit file goes, one not the cache's */
  tkey t3, t4;
  xpj_l2_set_alias(c, "v3", key_of(&t3, 3));
  xpj_l2_set_alias(c, "v4", key_of(&t4, 4));
  xpj_cache_close(c);
  char a3[512], a4[512], ax[512], p4[512];
  alias_path(f, "v3", a3, sizeof a3);
  alias_path(f, "v4", a4, sizeof a4);
  alias_path(f, "vx", ax, sizeof ax);
  hit_path(f, 4, p4, sizeof p4);
  assert_int_equal(unlink(p4), 0);
  char said[200];
  ssize_t sl = readlink(a3, said, sizeof said - 1);
  assert_int_equal(sl, 129);
  said[sl] = 0;
  assert_int_equal(symlink(said, ax), 0);
  char p1[512], p2[512], tmp[600];
  hit_path(f, 1, p1, sizeof p1);
  hit_path(f, 2, p2, sizeof p2);
  size_t n = 0;
  uint8_t *b = read_all(p1, &n);
  b[n - 1] ^= 1;
  write_file(p1, b, n);
  chmod(p1, 0600);
  free(b);
  tkey t;
  char d2[65];
  digest_of(key_of(&t, 2), d2);
  sql_run(f->path, "DELETE FROM entries WHERE digest=?", d2);
  snprintf(tmp, sizeof tmp, "%s.hits/.tmp.left.over", f->path);
  write_file(tmp, "x", 1);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  uint64_t checked = 0, bad = 99;
  wlog probs = {0};
  assert_int_equal(xpj_cache_verify(c, 0, count_problem, &probs, &checked,
                                    &bad), XPJ_OK);
  assert_int_equal(checked, 3);
  assert_int_equal(bad, 0);
  assert_int_equal(probs.n, 4);
  assert_non_null(strstr(probs.text, "damaged"));
  assert_non_null(strstr(probs.text, "its entry is gone"));
  assert_non_null(strstr(probs.text, "not made for this cache"));
  assert_true(exists(p1) && exists(p2) && exists(tmp));
  struct stat sb;
  assert_true(!lstat(a3, &sb) && !lstat(a4, &sb) && !lstat(ax, &sb));
  memset(&probs, 0, sizeof probs);
  assert_int_equal(xpj_cache_verify(c, 1, count_problem, &probs, &checked,
                                    &bad), XPJ_OK);
  assert_int_equal(bad, 0);
  assert_int_equal(probs.n, 4);
  assert_non_null(strstr(probs.text, "(removed)"));
  assert_false(exists(p1) || exists(p2) || exists(tmp));
  assert_true(!lstat(a3, &sb) && lstat(a4, &sb) && lstat(ax, &sb));
  memset(&probs, 0, sizeof probs);
  assert_int_equal(xpj_cache_verify(c, 0, count_problem, &probs, &checked,
                                    &bad), XPJ_OK);
  assert_int_equal(bad, 0);
  assert_int_equal(probs.n, 0);
  expect_hit(c, 1, 500); /* the row, intact, answers; its file is back */
  xpj_cache_close(c);
  assert_true(exists(p1));
  assert_no_warning(&f->w);
}

/* Findings of a review (2026-11-28), each a way a hit file outlived or
 * misstated its row: a put evicted by its own size limit; rows removed by
 * a handle that keeps no hit files; a database file deleted and made
 * again (its inode may be the same); a file's time renewed when the use
 * was not recorded; a compile time the decoder refuses; a FIFO. */
static void test_hit_files_review(void **state) {
  fx *f = *state;
  char p[512];
  /* too big for the limit: evicted by its own put, no file */
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, 4096);
  put_i(c, 1, 10000);
  xpj_cache_close(c);
  hit_path(f, 1, p, sizeof p);
  assert_false(exists(p));
  assert_int_equal(lazy_get(f, 1, 10000), 2);
  /* removed and replaced by handles with hit files off: gone all the same */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 2, 300);
  put_i(c, 3, 300);
  xpj_cache_close(c);
  setenv("XPJIT_CACHE_HIT_FILES", "0", 1);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  tkey t;
  assert_int_equal(xpj_cache_remove(c, key_of(&t, 2)), XPJ_OK);
  put_i(c, 3, 400); /* another value for key 3 */
  xpj_cache_close(c);
  unsetenv("XPJIT_CACHE_HIT_FILES");
  assert_int_equal(lazy_get(f, 2, 300), 2);
  assert_int_equal(lazy_get(f, 3, 400), 1); /* the new row, not the file */
  /* the database deleted and made again: its old files are not hits */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 4, 300);
  xpj_cache_close(c);
  assert_int_equal(lazy_get(f, 4, 300), 0);
  char side[600];
  static const char *const parts[] = {"", "-wal", "-shm"};
  for (int i = 0; i < 3; i++) {
    snprintf(side, sizeof side, "%s%s", f->path, parts[i]);
    unlink(side);
  }
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  xpj_cache_close(c);
  assert_int_equal(lazy_get(f, 4, 300), 2);
  /* a file whose row's use is not due gets the row's time, not now */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 5, 300);
  xpj_cache_close(c);
  hit_path(f, 5, p, sizeof p);
  tkey t5;
  char d5[65];
  digest_of(key_of(&t5, 5), d5);
  int64_t fifty = wall_ms() - 50 * 60 * 1000;
  char when[32];
  snprintf(when, sizeof when, "%lld", (long long)fifty);
  sql_run(f->path, "UPDATE entries SET last_used = CAST(?1 AS INTEGER)", when);
  struct timespec old[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
  assert_int_equal(utimensat(AT_FDCWD, p, old, 0), 0);
  assert_int_equal(lazy_get(f, 5, 300), 1);
  struct stat sb;
  assert_int_equal(stat(p, &sb), 0);
  int64_t ft = (int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000;
  if (ft < fifty - 2000 || ft > fifty + 2000)
    fail_msg("file time %lld, the row's last use %lld", (long long)ft,
             (long long)fifty);
  /* a compile time the decoder would refuse: no file, the row serves */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  tval v;
  xpj_cache_value odd = *val_of(&v, 6, 100);
  odd.compile_ms = -1;
  assert_int_equal(xpj_cache_put(c, key_of(&t, 6), &odd), XPJ_OK);
  val_free(&v);
  xpj_cache_close(c);
  hit_path(f, 6, p, sizeof p);
  assert_false(exists(p));
  /* a FIFO in its place: no hang, the row serves */
  hit_path(f, 4, p, sizeof p);
  unlink(p);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 7, 300);
  xpj_cache_close(c);
  hit_path(f, 7, p, sizeof p);
  unlink(p);
  assert_int_equal(mkfifo(p, 0600), 0);
  alarm(20);
  assert_int_equal(lazy_get(f, 7, 300), 1);
  alarm(0);
  assert_no_warning(&f->w);
}

/* In a child: lazy_get of key i under a 10 s alarm (a hit must never wait
 * for a lock); its result as exit status, 9 when it was killed. */
static int lazy_get_child(fx *f, unsigned i, size_t size) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(10);
    _exit(lazy_get(f, i, size));
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 9;
}

/* Second review: a database hit whose file is missing must not wait for
 * another writer (the file is made later, by a write transaction that
 * does not wait), and a writer whose file was replaced at the path must
 * not label hit files with the new file. */
static void test_hit_files_review2(void **state) {
  fx *f = *state;
  char p[512];
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 300);
  xpj_cache_close(c);
  hit_path(f, 1, p, sizeof p);
  unlink(p);
  sqlite3 *w = sql_open(f->path);
  sqlite3_busy_timeout(w, 0);
  assert_int_equal(sqlite3_exec(w, "BEGIN IMMEDIATE", NULL, NULL, NULL),
                   SQLITE_OK);
  assert_int_equal(lazy_get_child(f, 1, 300), 1); /* answered, not blocked */
  assert_false(exists(p));                        /* left for later */
  assert_int_equal(sqlite3_exec(w, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(w);
  assert_int_equal(lazy_get(f, 1, 300), 1);
  assert_true(exists(p)); /* made, now that nobody else writes */
  assert_int_equal(lazy_get(f, 1, 300), 0);
  /* a writer whose file was moved aside and replaced */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 2, 300); /* its connection is a writer's now */
  char aside[600];
  snprintf(aside, sizeof aside, "%s.aside", f->path);
  assert_int_equal(rename(f->path, aside), 0);
  wlog w2 = {0};
  xpj_cache *n = open_cache(&w2, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(n, 9, 100);
  xpj_cache_close(n);
  put_i(c, 3, 300); /* into the file aside: no hit file for the new one */
  xpj_cache_close(c);
  hit_path(f, 3, p, sizeof p);
  assert_int_equal(lazy_get(f, 3, 300), 2);
  assert_int_equal(lazy_get(f, 2, 300), 2);
  assert_int_equal(lazy_get(f, 9, 100), 0);
}

/* xpj_cache_zero_stats: every counter to zero (the table's, the side
 * file's, this handle's), persisted; the entries stay with their hits and
 * the kept total of their sizes; what cannot be zeroed says why. */
static void test_zero_stats(void **state) {
  fx *f = *state;
  fill_and_close(f, 3, 1000);
  assert_int_equal(hit_process(f->path, 0, 2, 1000), 0);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  xpj_cache_stats s = stats_of(c);
  assert_int_equal(s.counters.l2_hits, 2);
  uint64_t bytes = s.bytes;
  /* then counters of every kind that wait: in the side file (a process
   * that only hit), this handle's uses and counters, and those noted with
   * xpj_cache_note; none is written when the counters are zeroed */
  assert_int_equal(hit_process(f->path, 0, 2, 1000), 0);
  assert_int_equal(side_lines(f->path), 2);
  expect_hit(c, 2, 1002);
  expect_miss(c, 7);
  xpj_cache_note(c, &(xpj_cache_counters){.compiles = 4, .compile_ms = 2.5,
                                          .redis_waits = 1});
  assert_int_equal(xpj_cache_zero_stats(c), XPJ_OK);
  s = stats_of(c);
  xpj_cache_counters zero = {0};
  if (memcmp(&s.counters, &zero, sizeof zero))
    fail_msg("counters left: l2_hits %llu l2_misses %llu compiles %llu "
             "compile_ms %f", (unsigned long long)s.counters.l2_hits,
             (unsigned long long)s.counters.l2_misses,
             (unsigned long long)s.counters.compiles,
             s.counters.compile_ms);
  assert_int_equal(s.entries, 3);
  assert_int_equal(s.bytes, bytes);
  assert_int_equal(side_lines(f->path), 0);
  xpj_cache_close(c);
  /* the rows keep their hits (the side file's were folded in first) */
  assert_int_equal(row_col(f->path, 0, "hits"), 2);
  assert_int_equal(row_col(f->path, 1, "hits"), 2);
  assert_int_equal(row_col(f->path, 2, "hits"), 1);
  expect_total_kept(f->path);
  /* persisted: a new handle counts from zero */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  s = stats_of(c);
  assert_int_equal(s.counters.l2_hits, 0);
  assert_int_equal(s.counters.compiles, 0);
  expect_hit(c, 0, 1000);
  assert_int_equal(stats_of(c).counters.l2_hits, 1);
  xpj_cache_close(c);
  assert_no_warning(&f->w);

  /* not writable: read-only, off, a bundle, NULL */
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RO, GiB);
  assert_int_equal(xpj_cache_zero_stats(c), XPJ_ERR_INVALID);
  assert_non_null(strstr(xpj_cache_last_error(), "not writable"));
  assert_int_equal(stats_of(c).counters.l2_hits, 1);
  xpj_cache_close(c);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_OFF, GiB);
  assert_int_equal(xpj_cache_zero_stats(c), XPJ_ERR_INVALID);
  xpj_cache_close(c);
  char bpath[256];
  snprintf(bpath, sizeof bpath, "%s/z.xpjb", f->dir);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  uint64_t n = 0;
  assert_int_equal(xpj_cache_export(c, bpath, &n), XPJ_OK);
  xpj_cache_close(c);
  xpj_cache_config bc = {.path = bpath, .bundle = 1,
                         .mode = XPJ_CACHE_MODE_RW, .warn = rec_warn,
                         .warn_ud = &f->w};
  xpj_cache *b = NULL;
  assert_int_equal(xpj_cache_open(&bc, &b), XPJ_OK);
  assert_int_equal(xpj_cache_zero_stats(b), XPJ_ERR_INVALID);
  assert_non_null(strstr(xpj_cache_last_error(), "bundle"));
  xpj_cache_close(b);
  assert_int_equal(xpj_cache_zero_stats(NULL), XPJ_ERR_INVALID);
  assert_no_warning(&f->w);
}

/* xpj_cache_owns_file: the database and every file the cache keeps
 * beside it, by inode (a hard link to one counts; a copy does not),
 * nothing else, and NULL or a missing path never; export and import
 * refuse the cache's own files as bundles, .stats included. */
static void test_owns_file(void **state) {
  fx *f = *state;
  wlog w = {0};
  xpj_cache *c = open_cache(&w, f->path, XPJ_CACHE_MODE_RW, 0);
  xpj_cache_close(c); /* the database and its key exist now */
  static const char *const sides[] = {"", "-wal", "-shm", "-journal",
                                      ".key", ".lock", ".stats"};
  char p[600], q[600];
  for (size_t i = 0; i < sizeof sides / sizeof *sides; i++) {
    snprintf(p, sizeof p, "%s%s", f->path, sides[i]);
    int fd = open(p, O_WRONLY | O_CREAT, 0600); /* (those SQLite removed) */
    assert_true(fd >= 0);
    close(fd);
    if (xpj_cache_owns_file(f->path, p) != 1)
      fail_msg("%s: not the cache's", p);
  }
  snprintf(p, sizeof p, "%s/linked", f->dir);
  assert_int_equal(link(f->path, p), 0);
  assert_int_equal(xpj_cache_owns_file(f->path, p), 1);
  snprintf(q, sizeof q, "%s/other.db", f->dir);
  int fd = open(q, O_WRONLY | O_CREAT, 0600);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(xpj_cache_owns_file(f->path, q), 0);
  snprintf(q, sizeof q, "%s.stats.x", f->path);
  assert_int_equal(xpj_cache_owns_file(f->path, q), 0); /* missing */
  assert_int_equal(xpj_cache_owns_file(NULL, p), 0);
  assert_int_equal(xpj_cache_owns_file(f->path, NULL), 0);
  /* the operations that would destroy it refuse */
  c = open_cache(&w, f->path, XPJ_CACHE_MODE_RW, 0);
  snprintf(p, sizeof p, "%s.stats", f->path);
  assert_int_equal(xpj_cache_export(c, p, NULL), XPJ_ERR_INVALID);
  assert_non_null(strstr(xpj_cache_last_error(), "the cache's own file"));
  snprintf(p, sizeof p, "%s/linked", f->dir);
  assert_int_equal(xpj_cache_import(c, p, NULL, NULL), XPJ_ERR_INVALID);
  assert_non_null(strstr(xpj_cache_last_error(), "the cache's own file"));
  xpj_cache_close(c);
}

/* ---- an outside probe's findings (2026-12-02) ---------------------------- */

/* Whether any file the user cache makes beside its file exists beside
 * path (the key, the lock, SQLite's, the side file, the hit files). */
static const char *made_beside(const char *path) {
  static const char *const sides[] = {".key", ".lock", "-wal", "-shm",
                                      "-journal", ".stats", ".hits",
                                      ".flight", ".corrupt"};
  for (size_t i = 0; i < sizeof sides / sizeof *sides; i++)
    if (exists2(path, sides[i]))
      return sides[i];
  return NULL;
}

/* A bundle opened as a user cache (`cache --path BUNDLE`) is refused and
 * left as it is, before anything is made beside it: meta.kind says what
 * it is. Before, the cache's handle made BUNDLE.key and BUNDLE.lock, took
 * every SHA-256 row for a forgery, and verify --repair deleted them all.
 * And a user cache opened as a bundle is refused with what it is. */
static void test_cache_refuses_bundle(void **state) {
  fx *f = *state;
  char bpath[256];
  snprintf(bpath, sizeof bpath, "%s/app.xpb", f->dir);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  for (unsigned i = 0; i < 5; i++)
    put_i(c, i, 200);
  uint64_t n = 0;
  assert_int_equal(xpj_cache_export(c, bpath, &n), XPJ_OK);
  assert_int_equal(n, 5);
  xpj_cache_close(c);
  size_t blen = 0;
  uint8_t *before = read_all(bpath, &blen);
  for (int pass = 0; pass < 3; pass++) {
    /* 0: nothing beside it; 1: a key beside it (left by an xpjit that
     * took it for a cache); 2: read-only */
    xpj_cache_mode mode = pass == 2 ? XPJ_CACHE_MODE_RO : XPJ_CACHE_MODE_RW;
    char kp[300];
    snprintf(kp, sizeof kp, "%s.key", bpath);
    if (pass == 1) {
      uint8_t k[32];
      memset(k, 7, sizeof k);
      write_file(kp, k, sizeof k);
      chmod(kp, 0600);
    }
    wlog w = {0};
    c = open_cache(&w, bpath, mode, GiB);
    assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_OFF);
    char problem[1024];
    assert_true(xpj_cache_problem(c, problem, sizeof problem) > 0);
    if (!strstr(problem, "bundle") || !strstr(problem, "left as it is"))
      fail_msg("pass %d: the problem says \"%s\"", pass, problem);
    assert_warned(&w, "not a cache");
    expect_miss(c, 1);
    uint64_t checked = 9, bad = 0;
    assert_int_equal(xpj_cache_verify(c, 1, NULL, NULL, &checked, &bad),
                     XPJ_OK);
    assert_int_equal(checked, 0);
    assert_int_equal(bad, 1); /* the file: unusable as a cache */
    assert_int_equal(xpj_cache_clear(c), XPJ_ERR_INVALID);
    assert_int_equal(xpj_cache_prune(c, 1, 0, NULL, NULL), XPJ_ERR_INVALID);
    put_i(c, 9, 100);
    xpj_cache_close(c);
    /* a libxpjit context's handle, which opens its file at a miss */
    xpj_cache_config lc = {.path = bpath, .mode = mode, .warn = rec_warn,
                           .warn_ud = &w};
    assert_int_equal(xpj_l2_open(&lc, &c), XPJ_OK);
    expect_miss(c, 2);
    put_i(c, 10, 100);
    xpj_cache_close(c);
    if (pass == 1)
      assert_int_equal(unlink(kp), 0);
    const char *side = made_beside(bpath);
    if (side)
      fail_msg("pass %d: %s made beside the bundle", pass, side);
    size_t m = 0;
    uint8_t *after = read_all(bpath, &m);
    if (m != blen || memcmp(after, before, m))
      fail_msg("pass %d: the bundle was changed", pass);
    free(after);
  }
  free(before);
  assert_int_equal(sql_int(bpath, "SELECT count(*) FROM entries", NULL), 5);
  /* the bundle is still one, whole */
  xpj_cache_config bc = {.path = bpath, .bundle = 1, .warn = rec_warn,
                         .warn_ud = &f->w};
  xpj_cache *b = NULL;
  assert_int_equal(xpj_cache_open(&bc, &b), XPJ_OK);
  uint64_t checked = 0;
  assert_int_equal(verify_bad(b, &checked), 0);
  assert_int_equal(checked, 5);
  xpj_cache_close(b);
  /* a user cache is no bundle */
  bc.path = f->path;
  assert_int_equal(xpj_cache_open(&bc, &b), XPJ_ERR_INVALID);
  assert_null(b);
  if (!strstr(xpj_cache_last_error(), "user cache"))
    fail_msg("opened as a bundle: \"%s\"", xpj_cache_last_error());
  char other[256];
  snprintf(other, sizeof other, "%s/other.db", f->dir);
  c = open_cache(&f->w, other, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_import(c, f->path, NULL, NULL), XPJ_ERR_INVALID);
  assert_non_null(strstr(xpj_cache_last_error(), "user cache"));
  assert_int_equal(stats_of(c).entries, 0);
  xpj_cache_close(c);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_mode_of(c), XPJ_CACHE_MODE_RW);
  assert_int_equal(stats_of(c).entries, 5);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* bundle import replaces a row that is there but fails its checksum
 * (signed with a key since replaced, or damaged) with the bundle's
 * intact one; before, it kept it as "already there", and the next lookup
 * dropped it. An intact row stays. */
static void test_import_replaces_damaged(void **state) {
  fx *f = *state;
  char bpath[256];
  snprintf(bpath, sizeof bpath, "%s/b.xpb", f->dir);
  char src[256];
  snprintf(src, sizeof src, "%s/src.db", f->dir);
  xpj_cache *c = open_cache(&f->w, src, XPJ_CACHE_MODE_RW, GiB);
  for (unsigned i = 0; i < 4; i++)
    put_i(c, i, 300);
  assert_int_equal(xpj_cache_export(c, bpath, NULL), XPJ_OK);
  xpj_cache_close(c);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  uint64_t imp = 0, present = 0, damaged = 0;
  assert_int_equal(xpj_cache_import_counted(c, bpath, &imp, &present,
                                            &damaged), XPJ_OK);
  assert_int_equal(imp, 4);
  xpj_cache_close(c);
  /* the key replaced: every row fails; then row 2 damaged as well */
  char kp[300];
  snprintf(kp, sizeof kp, "%s.key", f->path);
  uint8_t k[32];
  for (int i = 0; i < 32; i++)
    k[i] = (uint8_t)(i * 37 + 5);
  write_file(kp, k, sizeof k);
  chmod(kp, 0600);
  tkey t;
  char d2[65];
  digest_of(key_of(&t, 2), d2);
  sql_flip_data(f->path, d2, 10);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(verify_bad(c, NULL), 4);
  assert_int_equal(xpj_cache_import_counted(c, bpath, &imp, &present,
                                            &damaged), XPJ_OK);
  KNOWN_BUG_FIXED(present == 4 && imp == 0,
                  "import kept 4 rows that fail their checksum");
  assert_int_equal(imp, 4);
  assert_int_equal(present, 0);
  assert_int_equal(damaged, 0);
  assert_int_equal(verify_bad(c, NULL), 0);
  for (unsigned i = 0; i < 4; i++)
    expect_hit(c, i, 300);
  /* intact now: kept */
  assert_int_equal(xpj_cache_import_counted(c, bpath, &imp, &present,
                                            &damaged), XPJ_OK);
  assert_int_equal(imp, 0);
  assert_int_equal(present, 4);
  xpj_cache_close(c);
  assert_no_warning(&f->w);
}

/* SQLite's file change counter (header bytes 24-27): one more for each
 * transaction that changed a file in the rollback journal's mode. */
static uint32_t change_counter(const char *path) {
  size_t n = 0;
  uint8_t *h = read_all(path, &n);
  assert_true(n >= 100);
  uint32_t v = (uint32_t)h[24] << 24 | (uint32_t)h[25] << 16 |
               (uint32_t)h[26] << 8 | h[27];
  free(h);
  return v;
}

/* An export writes its rows in one transaction (it was one a row: the
 * commit's syncs made 2,000 rows take seconds, 20,000 minutes), and is
 * whole: every row, the metadata, nothing left beside the output. */
static void test_export_one_transaction(void **state) {
  fx *f = *state;
  char bpath[256], tmp[300];
  snprintf(bpath, sizeof bpath, "%s/all.xpb", f->dir);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  enum { N = 120 };
  for (unsigned i = 0; i < N; i++)
    put_i(c, i, 64 + i);
  uint64_t n = 0;
  assert_int_equal(xpj_cache_export(c, bpath, &n), XPJ_OK);
  assert_int_equal(n, N);
  xpj_cache_close(c);
  uint32_t commits = change_counter(bpath);
  KNOWN_BUG_FIXED(commits >= N, "the export committed %u times for %d rows",
                  commits, N);
  if (commits > 12)
    fail_msg("the export committed %u times", commits);
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", bpath, (long)getpid());
  assert_false(exists(tmp));
  xpj_cache_config bc = {.path = bpath, .bundle = 1, .warn = rec_warn,
                         .warn_ud = &f->w};
  xpj_cache *b = NULL;
  assert_int_equal(xpj_cache_open(&bc, &b), XPJ_OK);
  uint64_t checked = 0;
  assert_int_equal(verify_bad(b, &checked), 0);
  assert_int_equal(checked, N);
  for (unsigned i = 0; i < N; i += 17)
    expect_hit(b, i, 64 + i);
  char *v = NULL;
  assert_int_equal(xpj_cache_get_meta(b, "targets", &v), XPJ_OK);
  assert_string_equal(v, "cpu:x86_64-znver4");
  free(v);
  xpj_cache_close(b);
  assert_no_warning(&f->w);
}

/* A hit file no reader would read (empty, cut, over XPJ_HIT_MAX, a FIFO,
 * open to others) is written again when the database serves its row, by
 * a libxpjit handle or a plain one; before, one that was empty, too big
 * or a FIFO stayed, and every lookup of its row went to the database.
 * verify says what is wrong with each, and with a refused directory. */
static void test_hit_files_rewritten(void **state) {
  fx *f = *state;
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 900);
  xpj_cache_close(c);
  char p[512];
  hit_path(f, 1, p, sizeof p);
  size_t n = 0;
  uint8_t *good = read_all(p, &n);
  static const char *const what[] = {"empty", "cut short", "too big",
                                     "a FIFO", "readable or writable"};
  for (int kind = 0; kind < 5; kind++)
    for (int lazy = 0; lazy < 2; lazy++) {
      unlink(p);
      if (kind == 3) {
        assert_int_equal(mkfifo(p, 0600), 0);
      } else {
        write_file(p, good, kind == 1 ? 100 : kind == 4 ? n : 0);
        chmod(p, kind == 4 ? 0644 : 0600);
        if (kind == 2)
          assert_int_equal(truncate(p, (off_t)XPJ_HIT_MAX + 1), 0);
      }
      /* verify names it, and why */
      c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
      wlog probs = {0};
      uint64_t bad = 9;
      assert_int_equal(xpj_cache_verify(c, 0, count_problem, &probs, NULL,
                                        &bad), XPJ_OK);
      assert_int_equal(bad, 0);
      if (probs.n != 1 || !strstr(probs.text, what[kind]))
        fail_msg("kind %d: verify said \"%s\"", kind, probs.text);
      xpj_cache_close(c);
      alarm(20);
      if (lazy) {
        assert_int_equal(lazy_get(f, 1, 900), 1);
      } else {
        c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
        expect_hit(c, 1, 900);
        xpj_cache_close(c);
      }
      alarm(0);
      struct stat sb;
      assert_int_equal(lstat(p, &sb), 0);
      KNOWN_BUG_FIXED(!S_ISREG(sb.st_mode) || (size_t)sb.st_size != n,
                      "kind %d (%s), lazy %d: not written again (%lld "
                      "bytes)", kind, what[kind], lazy,
                      (long long)sb.st_size);
      assert_int_equal(sb.st_mode & 0777, 0600);
      assert_int_equal(lazy_get(f, 1, 900), 0); /* a hit file's hit again */
    }
  free(good);
  /* a hit-file directory refused: verify says so (nothing is counted) */
  char dir[300];
  snprintf(dir, sizeof dir, "%s.hits", f->path);
  assert_int_equal(chmod(dir, 0777), 0);
  c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  wlog probs = {0};
  uint64_t bad = 9;
  assert_int_equal(xpj_cache_verify(c, 0, count_problem, &probs, NULL, &bad),
                   XPJ_OK);
  assert_int_equal(bad, 0);
  if (probs.n != 1 || !strstr(probs.text, "is refused") ||
      !strstr(probs.text, "writable by others (mode 0777)"))
    fail_msg("verify said \"%s\"", probs.text);
  xpj_cache_close(c);
  assert_int_equal(chmod(dir, 0700), 0);
  assert_no_warning(&f->w);
}

/* Output names are the cache's by name too, there or not: the cache
 * file, its side files, what is made beside it (.hits, .flight, a file
 * moved aside, the host CPU's file) and anything in its hit-file and
 * single-flight directories; an export refuses them and writes nothing.
 * Before, only files that existed were compared (by inode): an export
 * onto an absent cache-v2.db made the user's cache a bundle. */
static void test_owns_file_by_name(void **state) {
  fx *f = *state;
  char p[600], q[600], link_dir[300];
  /* no cache file yet: only its directory */
  static const char *const mine[] = {
      "",        "-wal",     "-shm",      "-journal",  ".lock",
      ".key",    ".stats",   ".hits",     ".flight",   ".corrupt",
      ".corrupt.4"};
  for (size_t i = 0; i < sizeof mine / sizeof *mine; i++) {
    snprintf(p, sizeof p, "%s%s", f->path, mine[i]);
    assert_false(exists(p));
    if (xpj_cache_owns_file(f->path, p) != 1)
      fail_msg("%s: not the cache's", p);
  }
  static const char *const not_mine[] = {".stats.x", ".corruptx", ".corrupt.",
                                         ".corrupt.1a", "x", ".tmp"};
  for (size_t i = 0; i < sizeof not_mine / sizeof *not_mine; i++) {
    snprintf(p, sizeof p, "%s%s", f->path, not_mine[i]);
    if (xpj_cache_owns_file(f->path, p) != 0)
      fail_msg("%s: taken for the cache's", p);
  }
  snprintf(p, sizeof p, "%s/host-cpu-0123abcd", f->dir);
  assert_int_equal(xpj_cache_owns_file(f->path, p), 1);
  snprintf(p, sizeof p, "%s/host-cpX", f->dir);
  assert_int_equal(xpj_cache_owns_file(f->path, p), 0);
  snprintf(p, sizeof p, "%s/./cache.db.stats", f->dir); /* another spelling */
  assert_int_equal(xpj_cache_owns_file(f->path, p), 1);
  snprintf(link_dir, sizeof link_dir, "%s/via", f->dir);
  assert_int_equal(symlink(f->dir, link_dir), 0);
  snprintf(p, sizeof p, "%s/cache.db", link_dir);
  assert_int_equal(xpj_cache_owns_file(f->path, p), 1);
  snprintf(q, sizeof q, "%s/sub", f->dir); /* the same name elsewhere */
  assert_int_equal(mkdir(q, 0700), 0);
  snprintf(p, sizeof p, "%s/sub/cache.db", f->dir);
  assert_int_equal(xpj_cache_owns_file(f->path, p), 0);
  snprintf(p, sizeof p, "%s/missing/cache.db", f->dir);
  assert_int_equal(xpj_cache_owns_file(f->path, p), 0);
  /* the cache made: its hit files' directory, anything in it */
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 100);
  snprintf(p, sizeof p, "%s.hits/anything", f->path);
  assert_int_equal(xpj_cache_owns_file(f->path, p), 1);
  snprintf(p, sizeof p, "%s.hits/a0123", f->path);
  assert_int_equal(xpj_cache_owns_file(f->path, p), 1);
  /* an export refuses each, there or not, and writes nothing */
  const char *targets[] = {".stats", "-journal", ".hits/new", ".corrupt"};
  for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
    snprintf(p, sizeof p, "%s%s", f->path, targets[i]);
    unlink(p);
    if (xpj_cache_export(c, p, NULL) != XPJ_ERR_INVALID)
      fail_msg("exported onto %s", p);
    assert_non_null(strstr(xpj_cache_last_error(), "the cache's own file"));
    assert_false(exists(p));
  }
  snprintf(p, sizeof p, "%s/host-cpu-feed", f->dir);
  assert_int_equal(xpj_cache_export(c, p, NULL), XPJ_ERR_INVALID);
  assert_false(exists(p));
  xpj_cache_close(c);
  /* another cache's (absent) file: what `cache --path A export B` asks */
  snprintf(q, sizeof q, "%s/sub/cache.db", f->dir);
  assert_int_equal(xpj_cache_owns_file(q, q), 1);
  snprintf(p, sizeof p, "%s/sub/cache.db.key", f->dir);
  assert_int_equal(xpj_cache_owns_file(q, p), 1);
  assert_int_equal(xpj_cache_owns_file(q, f->path), 0);
  assert_no_warning(&f->w);
}

/* The maintenance calls that write fold the side file into the tables,
 * as docs/cache.md says any write does: prune, import and verify
 * --repair, with nothing of their own deferred. A verify that does not
 * repair writes nothing. */
static void test_maintenance_folds(void **state) {
  fx *f = *state;
  char side[300], bpath[256], empty[256];
  snprintf(side, sizeof side, "%s.stats", f->path);
  snprintf(bpath, sizeof bpath, "%s/one.xpb", f->dir);
  snprintf(empty, sizeof empty, "%s/empty.db", f->dir);
  xpj_cache *c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
  put_i(c, 1, 100);
  xpj_cache_close(c);
  c = open_cache(&f->w, empty, XPJ_CACHE_MODE_RW, GiB);
  assert_int_equal(xpj_cache_export(c, bpath, NULL), XPJ_OK); /* no rows */
  xpj_cache_close(c);
  tkey t;
  char d1[65];
  digest_of(key_of(&t, 1), d1);
  for (int call = 0; call < 4; call++) {
    /* a hit whose use is not due: its hit goes to the side file */
    c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
    expect_hit(c, 1, 100);
    xpj_cache_close(c);
    assert_true(file_len(side) > 0);
    int64_t hits = sql_int(f->path, "SELECT hits FROM entries WHERE digest=?",
                           d1);
    c = open_cache(&f->w, f->path, XPJ_CACHE_MODE_RW, GiB);
    uint64_t bad = 9;
    switch (call) {
    case 0:
      assert_int_equal(xpj_cache_verify(c, 0, NULL, NULL, NULL, &bad),
                       XPJ_OK);
      break;
    case 1:
      assert_int_equal(xpj_cache_prune(c, 0, 0, NULL, NULL), XPJ_OK);
      break;
    case 2:
      assert_int_equal(xpj_cache_import(c, bpath, NULL, NULL), XPJ_OK);
      break;
    case 3:
      assert_int_equal(xpj_cache_verify(c, 1, NULL, NULL, NULL, &bad),
                       XPJ_OK);
      break;
    }
    xpj_cache_close(c);
    int64_t now = sql_int(f->path, "SELECT hits FROM entries WHERE digest=?",
                          d1);
    if (call == 0) { /* read only */
      assert_true(file_len(side) > 0);
      assert_int_equal(now, hits);
      continue;
    }
    KNOWN_BUG_FIXED(file_len(side) != 0, "call %d left the side file "
                    "unfolded", call);
    assert_int_equal(now, hits + 1 + (call == 1)); /* (and call 0's) */
  }
  assert_true(sql_int(f->path, "SELECT value FROM stats WHERE "
                      "name='l2_hits'", NULL) >= 4);
  assert_no_warning(&f->w);
}

int main(void) {
  test_owner_init(); /* procutil.h: end_escaped_child */
  unsetenv("XPJIT_CACHE");
  unsetenv("XPJIT_CACHE_DIR");
  unsetenv("XPJIT_CACHE_MAX_SIZE");
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
      T(test_round_trip),
      T(test_owns_file),
      T(test_key_replaced),
      T(test_key_other_name),
      T(test_export_private_dir),
      T(test_hit_files),
      T(test_hit_files_refused),
      T(test_hit_files_follow_rows),
      T(test_hit_files_verify),
      T(test_hit_files_review),
      T(test_hit_files_review2),
      T(test_alias_made_in_place),
      T(test_db_identity),
      T(test_single_flight),
      T(test_aliases),
      T(test_alias_sweep),
      T(test_replace_after_hit),
      T(test_remove),
      T(test_expiry),
      T(test_put_later),
      T(test_put_later_remove),
      T(test_put_later_clear),
      T(test_put_later_expiry),
      T(test_put_later_limits),
      T(test_put_later_eviction),
      T(test_put_later_off_ro),
      T(test_network_journal),
      T(test_keys),
      T(test_corrupt_rows),
      T(test_corrupt_truncated),
      T(test_corrupt_middle),
      T(test_corrupt_garbage),
      T(test_corrupt_keeps_older),
      T(test_settle),
      T(test_future_last_used),
      T(test_side_file_mode),
      T(test_corrupt_foreign),
      T(test_corrupt_schema_bit),
      T(test_forged_rows),
      T(test_key_file),
      T(test_empty_file),
      T(test_no_directory),
      T(test_read_only),
      T(test_disk_full),
      T(test_disk_full_sigxfsz),
      T(test_eviction),
      T(test_prune),
      T(test_processes),
      T(test_processes_recover),
      T(test_threads),
      T(test_warn_reentrant),
      T(test_crashes),
      T(test_bundles),
      T(test_import_fails_midway),
      T(test_import_eviction),
      T(test_list_find_clear),
      T(test_parsers),
      T(test_environment),
      T(test_config_mode),
      T(test_trust_planted_cache),
      T(test_trust_chown_advice),
      T(test_trust_dangling_link),
      T(test_unreadable),
      T(test_trust_bundles),
      T(test_trust_modes),
      T(test_hit_writes_nothing),
      T(test_put_after_hits),
      T(test_read_only_directory),
      T(test_hit_process_writes_nothing),
      T(test_due_use_written),
      T(test_eviction_granular),
      T(test_side_file),
      T(test_total_kept),
      T(test_total_old_files),
      T(test_zero_stats),
      T(test_cache_refuses_bundle),
      T(test_import_replaces_damaged),
      T(test_export_one_transaction),
      T(test_hit_files_rewritten),
      T(test_owns_file_by_name),
      T(test_maintenance_folds),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
