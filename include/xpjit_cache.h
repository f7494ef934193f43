/*
 * xpjit_cache.h - the compile cache's second level and kernel bundles: an
 * SQLite store of compiled binaries, keyed by everything that determines
 * them. The cache stores bytes and keys; it knows nothing of kernels,
 * compilers or devices (the runtime fills keys, see docs/cache.md).
 *
 * Guarantees: a lookup returns an entry only when its full canonical key
 * equals the one asked for and its checksum verifies (in the user cache an
 * HMAC keyed with the cache's secret key, PATH.key: a row written by
 * anyone without the key fails); anything else is a miss. A corrupt row is dropped; a corrupt, foreign or wrong-schema
 * database file is moved aside and recreated, with a warning; a directory
 * or disk that cannot be written degrades the cache to read-only or off,
 * with a warning, never a failure. Many processes may share one database
 * (WAL mode, short write transactions, retries on busy).
 *
 * Trust (docs/cache.md, "Security model"): entries and bundles are code
 * that runs as the user, so nothing another local user could have written
 * is read. The user cache is refused (off, with a warning naming the path,
 * its owner and the fix) unless its directory and files are the user's
 * and not writable by group or others, and every directory above belongs
 * to the user or root and is not writable by others unless sticky. Its
 * directory is made 0700 and its files 0600, whatever the umask. A bundle
 * must belong, with every directory above it, to the user, root, or an
 * owner named in XPJIT_TRUSTED_OWNERS ("name,uid,..."), and none may be
 * writable by group or others.
 *
 * Ownership: xpj_cache_open returns a handle closed with xpj_cache_close
 * (NULL is a no-op). xpj_cache_entry fields are malloc'd and freed by
 * xpj_cache_entry_clear. Thread safety: one handle may be used from many
 * threads (calls are serialised on it).
 */
#ifndef XPJIT_CACHE_H
#define XPJIT_CACHE_H

#include "xpjit_ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the database schema; part of every key and of the file name
 * (cache-v2.db). 2: entries may expire (negative entries). */
#define XPJ_CACHE_SCHEMA_VERSION 2
/* The PRAGMA application_id of a cache and a bundle ("XPJC"); with
 * PRAGMA user_version, the schema version, in the file's header. */
#define XPJ_CACHE_APP_ID 0x58504a43
/* Default size limit of the user cache: 1 GiB. */
#define XPJ_CACHE_DEFAULT_MAX_SIZE (1ull << 30)

typedef struct xpj_cache xpj_cache;

typedef enum xpj_cache_mode {
  XPJ_CACHE_MODE_DEFAULT = 0, /* XPJIT_CACHE (off|ro|rw), else rw */
  XPJ_CACHE_MODE_OFF = 1,     /* no store: every lookup misses */
  XPJ_CACHE_MODE_RO = 2,      /* lookups only, nothing written */
  XPJ_CACHE_MODE_RW = 3,
} xpj_cache_mode;

/* Receives warnings (degraded modes, recovered corruption); msg has no
 * trailing newline. NULL: "xpjit: warning: MSG" on stderr. It is called
 * after the cache has released its lock, so it may call the cache (or
 * anything else) itself; the calling thread is the one whose call gave the
 * warning. */
typedef void (*xpj_cache_warn_fn)(void *ud, const char *msg);

typedef struct xpj_cache_config {
  /* The database file. NULL: XPJIT_CACHE_DIR, else $XDG_CACHE_HOME/xpjit,
   * else $HOME/.cache/xpjit; file cache-v2.db in it. */
  const char *path;
  xpj_cache_mode mode;
  /* Bytes; 0: XPJIT_CACHE_MAX_SIZE (e.g. "512M"), else 1 GiB;
   * UINT64_MAX: no limit. Enforced by least-recently-used eviction. */
  uint64_t max_size;
  /* A bundle: a single self-contained file (no WAL), no size limit, no
   * use statistics. Opened read-only unless mode is RW (a new bundle is
   * made 0644). Unlike the user cache, a bundle that cannot be read is an
   * error, not a warning, and so is one that is not trusted (above). */
  int bundle;
  xpj_cache_warn_fn warn;
  void *warn_ud;
} xpj_cache_config;

/* Opens (creating when writable) the cache. Fails only for bad arguments,
 * out of memory, and bundles: XPJ_ERR_IO when missing or unreadable,
 * XPJ_ERR_INVALID when not a bundle of this schema, XPJ_ERR_UNSUPPORTED
 * when refused by the trust check (the message says why). Problems with
 * the user cache, refusal included, degrade it (xpj_cache_mode_of and
 * xpj_cache_problem tell) and call warn. xpj_cache_path then names the
 * file with its directory resolved (realpath). */
xpj_status xpj_cache_open(const xpj_cache_config *cfg, xpj_cache **out);
/* Writes what was deferred (counters, uses, xpj_cache_put_later's
 * entries) and closes. */
void xpj_cache_close(xpj_cache *c);
/* Writes what the handle has deferred (the uses of its hits, its
 * counters; docs/cache.md, "Deferred work") as xpj_cache_close does, and
 * keeps it open. For a program that may end without closing its cache
 * (an interpreter at exit): its hits would not count, and its rows would
 * age as if unused. NULL: a no-op. */
void xpj_cache_settle(xpj_cache *c);
/* This thread's message for the last failing xpj_cache_* call. */
const char *xpj_cache_last_error(void);
/* The mode in effect after any degradation (safe to read from any thread
 * at any time). */
xpj_cache_mode xpj_cache_mode_of(const xpj_cache *c);
/* The mode a handle of cfg (NULL: the defaults) is opened in, before
 * anything is opened: cfg's mode, else read-only for a bundle, else
 * XPJIT_CACHE's (rw when unset or not one of its words). Whatever writes
 * beside the cache for it (the host CPU's file, a tool) asks this. Opening
 * may lower it (xpj_cache_mode_of). */
xpj_cache_mode xpj_cache_config_mode(const xpj_cache_config *cfg);
/* Why the mode in effect is lower than the one asked for: the file is
 * unusable (damaged and read-only, a directory, unreadable), cannot be
 * written, or was refused. Copied into buf like snprintf (buf may be NULL
 * when size is 0); returns its length, 0 (and "") when there is nothing
 * wrong, including a cache that is off because it was asked to be. */
size_t xpj_cache_problem(xpj_cache *c, char *buf, size_t size);
const char *xpj_cache_path(const xpj_cache *c);
/* Default database path (see config.path) into buf; length like snprintf. */
size_t xpj_cache_default_path(char *buf, size_t size);
/* 1 when path names the database at cache_path or a file the cache keeps
 * beside it (its -wal, -shm and -journal, .key, .lock and .stats files):
 * compared by device and inode when path exists (a hard link counts), and
 * by name whether or not it exists (in the cache's directory: those
 * names, <db>.hits, <db>.flight, <db>.corrupt[.N] and host-cpu-*; and
 * anything in <db>.hits/ or <db>.flight/): what a tool writing path would
 * destroy the cache, or make its next file, by writing; 0 otherwise, also
 * when either is NULL. */
int xpj_cache_owns_file(const char *cache_path, const char *path);

/* ---- keys ---------------------------------------------------------- */

/* Every component of a key is text without newlines; all are required
 * (dtypes and options may be ""). */
typedef struct xpj_cache_key {
  const char *code;     /* SHA-256 (hex) of the specialised kernel's IR */
  const char *kernel;   /* kernel name */
  const char *dtypes;   /* canonical "T=f32,U=i64" */
  unsigned ndim;        /* generic-rank ndim, 0 when none */
  const char *target;   /* canonical target with exact architecture */
  const char *options;  /* canonical compile options ("O2") */
  const char *versions; /* "xpjit=0.1.0;llvm=22.1.8;abi=6;codegen=5" */
} xpj_cache_key;

/* The canonical key text (malloc'd into *text when text is not NULL) and
 * its SHA-256 digest in hex. XPJ_ERR_INVALID for a missing component or
 * one containing a newline. */
xpj_status xpj_cache_key_digest(const xpj_cache_key *k, char **text,
                                char hex[65]);

/* ---- entries ------------------------------------------------------- */

/* What a compile produced, as stored. Fields are only ever appended, so
 * positional initialisers keep compiling. */
typedef struct xpj_cache_value {
  int failed;              /* non-zero: the compile failed (log says why);
                              stored and returned as given */
  const uint8_t *data;     /* the binary (NULL, 0 when failed) */
  size_t size;
  const char *entry;       /* entry point name */
  const char *log;         /* diagnostics or warnings ("" when none) */
  uint64_t local_bytes, scratch_bytes;
  double compile_ms;       /* what the compile cost */
  /* When the entry stops being served (Unix epoch, ms); 0: never. For
   * negative entries that should be retried after a while: a lookup past
   * this time is a miss, and the row is deleted when the store is
   * writable. */
  int64_t expires_ms;
} xpj_cache_value;

/* A stored entry; every pointer is malloc'd (xpj_cache_entry_clear). */
typedef struct xpj_cache_entry {
  char digest[65];
  char *key; /* canonical key text */
  char *code, *kernel, *dtypes, *target, *options, *versions;
  unsigned ndim;
  int failed;
  uint8_t *data; /* NULL in listings */
  size_t size;
  char *entry, *log;
  uint64_t local_bytes, scratch_bytes;
  double compile_ms;
  int64_t created_ms, last_used_ms; /* Unix epoch, milliseconds */
  uint64_t hits;
  int64_t expires_ms; /* 0: never (xpj_cache_value.expires_ms) */
} xpj_cache_entry;

void xpj_cache_entry_clear(xpj_cache_entry *e);

/* Looks k up. XPJ_OK: *out filled with a verified entry, as stored plus
 * this handle's own uses; unless read-only, the use is recorded (the use
 * time to the hour, written at close only when an hour old; the hit count
 * through the .stats side file: docs/cache.md, "Use times and hit
 * counts"). XPJ_ERR_NOT_FOUND: a miss, which
 * includes a stored row whose key text differs (digest collision) or
 * whose checksum fails (the row is dropped, with a warning). */
xpj_status xpj_cache_get(xpj_cache *c, const xpj_cache_key *k,
                         xpj_cache_entry *out);
/* xpj_cache_get that does not count as a hit or miss in the counters: for
 * secondary lookups (a device's own binary beside the portable one). */
xpj_status xpj_cache_get_uncounted(xpj_cache *c, const xpj_cache_key *k,
                                   xpj_cache_entry *out);
/* Stores v under k (replacing any row with that key), then evicts the
 * least recently used entries while the store is over its size limit.
 * XPJ_OK also when the cache is off, read-only or degraded (nothing is
 * stored then). */
xpj_status xpj_cache_put(xpj_cache *c, const xpj_cache_key *k,
                         const xpj_cache_value *v);
/* Like xpj_cache_put, but the row is written with the cache's next write
 * transaction (a put, a remove, a maintenance call) or at close, whichever
 * comes first; until then xpj_cache_get of k (in this handle) returns it.
 * v is copied. At most 64 entries or 64 MiB wait: past that, everything
 * waiting is written now. Nothing is written when the cache is off,
 * read-only or degraded (XPJ_OK). A waiting entry is dropped by
 * xpj_cache_remove of its key and by xpj_cache_clear, and is not served
 * (nor written) past its expires_ms. For a row copied from another tier
 * (a Redis hit): no write transaction, no fsync, on the hot path. A
 * bundle defers nothing (a plain put). */
xpj_status xpj_cache_put_later(xpj_cache *c, const xpj_cache_key *k,
                               const xpj_cache_value *v);
/* Removes the entry stored under k, if any (for example a cached failure
 * that is known to be stale). XPJ_OK whether or not there was one, and
 * also when the cache is off, read-only, degraded or a bundle (nothing is
 * removed then); XPJ_ERR_INVALID for a NULL argument or a bad key. */
xpj_status xpj_cache_remove(xpj_cache *c, const xpj_cache_key *k);

/* ---- statistics ---------------------------------------------------- */

/* Event counters, kept in the database across processes: every counter,
 * named once, as X(kind, name, meaning) with kind U (uint64_t) or D
 * (double). New counters are appended. */
#define XPJ_CACHE_COUNTERS(X)                                                \
  X(U, l1_hits, "in-process first-level hits")                               \
  X(U, l2_hits, "hits in this store")                                        \
  X(U, l2_misses, "misses in this store")                                    \
  X(U, bundle_hits, "kernels served from a bundle")                          \
  X(U, compiles, "compiles run (successful or not)")                         \
  X(U, compile_failures, "compiles that failed")                             \
  X(U, failure_hits, "cached failures served instead of compiling")          \
  X(U, corrupt, "rows dropped or files moved aside")                         \
  X(U, evictions, "entries evicted for the size limit")                      \
  X(D, compile_ms, "time spent compiling")                                   \
  X(D, saved_ms, "compile time of entries served from a cache")              \
  X(U, daemon_hits, "kernels xpjitd served (compiled or found)")             \
  X(U, daemon_fallbacks, "daemon unusable: compiled in-process")             \
  /* device-native binaries (cubin, Level Zero native module, OpenCL        \
   * program binary) loaded instead of running the driver's compiler, and  \
   * stored after such a compile */                                         \
  X(U, native_hits, "device-native binaries loaded from the cache")          \
  X(U, native_stores, "device-native binaries stored")                       \
  /* the cluster tier (docs/cache.md, "Redis") */                           \
  X(U, redis_hits, "kernels served by the Redis tier")                       \
  X(U, redis_misses, "Redis tier lookups that found nothing")                \
  X(U, redis_stores, "compiled kernels written to the Redis tier")           \
  X(U, redis_refused, "Redis values refused: damaged, forged or foreign")    \
  X(U, redis_errors, "Redis commands that failed or timed out")              \
  X(U, redis_skipped, "lookups that skipped Redis while it was down")        \
  X(U, redis_waits, "compiles awaited from another process or node")

#define XPJ_CACHE_COUNTER_U uint64_t
#define XPJ_CACHE_COUNTER_D double
#define XPJ_CACHE_COUNTER_FIELD(kind, name, what) XPJ_CACHE_COUNTER_##kind name;
typedef struct xpj_cache_counters {
  XPJ_CACHE_COUNTERS(XPJ_CACHE_COUNTER_FIELD)
} xpj_cache_counters;

/* Adds delta to the counters (written with the next write, or at close). */
void xpj_cache_note(xpj_cache *c, const xpj_cache_counters *delta);

typedef struct xpj_cache_stats {
  xpj_cache_counters counters;
  uint64_t entries, failed_entries;
  uint64_t bytes;     /* sum of entry sizes */
  uint64_t file_bytes; /* database file (and WAL) on disk */
  uint64_t max_size;
} xpj_cache_stats;

xpj_status xpj_cache_get_stats(xpj_cache *c, xpj_cache_stats *out);

/* ---- maintenance (xpjit-cli cache ...) ----------------------------- */

/* Calls fn for each entry (data not loaded), most recently used first;
 * fn returns non-zero to stop. */
xpj_status xpj_cache_list(xpj_cache *c,
                          int (*fn)(void *ud, const xpj_cache_entry *e),
                          void *ud);
/* The entry whose digest starts with prefix (at least 4 hex digits), data
 * included. XPJ_ERR_NOT_FOUND, or XPJ_ERR_INVALID when ambiguous. */
xpj_status xpj_cache_find(xpj_cache *c, const char *prefix,
                          xpj_cache_entry *out);
/* Checks the file's integrity, every row's key digest and checksum, and
 * the user cache's hit files (docs/cache.md); fn (may be NULL) gets one
 * line per problem. With repair, bad rows are deleted, so are damaged hit
 * files and those whose rows are gone, and a damaged file is moved aside
 * and replaced by a new one. *bad: rows found bad, plus 1 for the file
 * when it is damaged, was found damaged (and replaced) when this handle
 * opened it, or is unusable (xpj_cache_problem of a cache that is off);
 * hit files, never served when damaged, are not counted. */
xpj_status xpj_cache_verify(xpj_cache *c, int repair,
                            void (*fn)(void *ud, const char *problem),
                            void *ud, uint64_t *checked, uint64_t *bad);
/* Removes expired entries and those not used for older_than_ms (0: no age
 * limit), then the least recently used while over max_size (0: the
 * configured limit).
 * Reports entries removed and bytes freed (either may be NULL). */
xpj_status xpj_cache_prune(xpj_cache *c, uint64_t max_size,
                           int64_t older_than_ms, uint64_t *removed,
                           uint64_t *freed);
/* Removes every entry and resets the counters (a damaged file is replaced
 * by a new one); XPJ_ERR_INVALID, with the reason, when the cache is not
 * writable. */
xpj_status xpj_cache_clear(xpj_cache *c);
/* Resets the counters (XPJ_CACHE_COUNTERS: what xpj_cache_get_stats
 * reports in counters) to zero, those noted by this handle and waiting in
 * the side file included, and keeps every entry with its hits and use
 * times (they order eviction and prune). Counters that other open handles
 * have noted but not written yet are added afterwards. XPJ_ERR_INVALID,
 * with the reason, for NULL, a bundle, or a cache that is not writable
 * (off, read-only, degraded); XPJ_ERR_IO when the database cannot be
 * written. */
xpj_status xpj_cache_zero_stats(xpj_cache *c);
/* Writes every intact successful entry to a new bundle at path (replaced
 * atomically), with meta "versions" and "targets" (the distinct values of
 * its entries, one per line). *n: entries written. XPJ_ERR_INVALID when
 * path exists and is not a regular file (a link, device, FIFO or
 * directory is never replaced). The bundle is built as
 * DIR/XPJ_CACHE_EXPORT_TEMP in a directory DIR beside path that mkdtemp
 * makes from xpj_cache_export_template (0700, a name nobody can guess:
 * nobody else can put a file, such as an SQLite journal, beside it) and
 * renamed to path; the directory and what is in it are removed before the
 * call returns. */
#define XPJ_CACHE_EXPORT_TEMP "bundle"
xpj_status xpj_cache_export(xpj_cache *c, const char *path, uint64_t *n);
/* The same in dir, a directory the caller made (mkdtemp of
 * xpj_cache_export_template's name), so that a caller that catches
 * signals knows what to remove there (DIR/XPJ_CACHE_EXPORT_TEMP, its
 * "-journal", then DIR). XPJ_ERR_INVALID, dir left alone, unless dir is
 * a directory of this user's that nobody else may enter (mode 0700);
 * else dir is removed before the call returns, as by xpj_cache_export. */
xpj_status xpj_cache_export_in(xpj_cache *c, const char *path,
                               const char *dir, uint64_t *n);
/* The mkdtemp template of an export's directory beside path
 * ("DIR/.xpjit-export-XXXXXX") into out; XPJ_ERR_INVALID when it does not
 * fit (or an argument is NULL). */
xpj_status xpj_cache_export_template(const char *path, char *out,
                                     size_t size);
/* Copies a bundle's entries into c after verifying each; rows already
 * present are kept when intact (one that fails its checksum under the
 * cache's key, or whose columns are not its key's, is replaced by the
 * bundle's). *skipped: those kept, and the bundle's damaged ones. */
xpj_status xpj_cache_import(xpj_cache *c, const char *bundle_path,
                            uint64_t *imported, uint64_t *skipped);
/* xpj_cache_import, counting apart the entries already present (kept as
 * they are: intact ones; others are replaced, and counted as imported)
 * and the damaged ones (a key digest, checksum or column that
 * does not match: not imported, each named in a warning through c's warn
 * callback): one reading of the bundle says everything `bundle import`
 * reports. Any count pointer may be NULL; all are set (0 on failure
 * before the bundle is read). The entries are written in transactions of
 * 64: a failure part of the way keeps those committed before it, which
 * *imported counts. */
xpj_status xpj_cache_import_counted(xpj_cache *c, const char *bundle_path,
                                    uint64_t *imported, uint64_t *present,
                                    uint64_t *damaged);
/* Bundle metadata (name -> value), e.g. "versions", "targets". get: the
 * value malloc'd into *value, XPJ_ERR_NOT_FOUND when unset. set:
 * XPJ_ERR_INVALID for "kind" and "created", the file's own (written when
 * it was made: "kind" says cache or bundle). */
xpj_status xpj_cache_set_meta(xpj_cache *c, const char *name,
                              const char *value);
xpj_status xpj_cache_get_meta(xpj_cache *c, const char *name, char **value);
/* Distinct targets and versions strings stored, one per line (no final
 * newline), malloc'd. */
xpj_status xpj_cache_targets(xpj_cache *c, char **targets, char **versions);
/* Makes a bundle compact and self-contained (no WAL); used after building
 * or exporting. */
xpj_status xpj_cache_finish_bundle(xpj_cache *c);

/* "1073741824", "512K", "100M", "2G", "1T" (powers of 1024) -> bytes. */
xpj_status xpj_cache_parse_size(const char *s, uint64_t *out);
/* "250ms", "90s", "30m", "12h", "7d", "2w", or plain seconds -> milliseconds. */
xpj_status xpj_cache_parse_duration(const char *s, int64_t *out_ms);

#ifdef __cplusplus
}
#endif
#endif
