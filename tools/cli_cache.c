/*
 * cli_cache.c - xpjit-cli cache ... and xpjit-cli bundle ...: inspect and
 * maintain the compile cache, and build, list, verify and import bundles
 * of precompiled kernels. Each group's subcommands are one table; each
 * subcommand opens the cache in the mode it needs. Exit status: 0
 * success, 1 a problem found (bad entries, compile errors, nothing
 * matched), 2 usage errors.
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

/* options with a long name only (cache and bundle) */
enum {
  OPT_PATH = CLI_LONG,
  OPT_JSON,
  OPT_REPAIR,
  OPT_ZERO,
  OPT_MAX_SIZE,
  OPT_OLDER_THAN,
  OPT_DTYPE,
  OPT_CONST,
  OPT_NDIM,
  OPT_KERNEL,
  OPT_TARGET,
  OPT_FAST_MATH,
  OPT_FP_CONTRACT,
  OPT_KEEP_GOING,
  OPT_CHECK,
};

/* ---- output helpers ------------------------------------------------------- */

static void human_size(uint64_t b, char *buf, size_t n) {
  const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)b;
  int i = 0;
  while (v >= 1024 && i < 4) {
    v /= 1024;
    i++;
  }
  if (i == 0)
    snprintf(buf, n, "%llu B", (unsigned long long)b);
  else
    snprintf(buf, n, "%.1f %s", v, u[i]);
}

static void human_age(int64_t ms_epoch, char *buf, size_t n) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  /* a foreign file's time may be anything: no signed overflow */
  int64_t d;
  if (__builtin_sub_overflow(now, ms_epoch, &d))
    d = ms_epoch < 0 ? INT64_MAX : 0;
  int64_t s = d < 0 ? 0 : d / 1000;
  if (s < 120)
    snprintf(buf, n, "%llds ago", (long long)s);
  else if (s < 7200)
    snprintf(buf, n, "%lldm ago", (long long)s / 60);
  else if (s < 172800)
    snprintf(buf, n, "%lldh ago", (long long)s / 3600);
  else
    snprintf(buf, n, "%lldd ago", (long long)s / 86400);
}

/* "cpu:znver4:+avx,..." -> "cpu:znver4" (the feature list is for the
 * key, not the reader); others unchanged. */
static void short_target(const char *t, char *buf, size_t n) {
  snprintf(buf, n, "%s", t);
  if (!strncmp(buf, "cpu:", 4)) {
    char *c = strchr(buf + 4, ':');
    if (c)
      *c = 0;
  }
}

/* A label of the text reports, bold on a terminal, padded to w. */
static void label(const char *l, int w) {
  int pad = w - (int)strlen(l);
  printf("%s%s%s%*s", cli_sgr(stdout, SGR_BOLD), l,
         cli_sgr(stdout, SGR_RESET), pad > 0 ? pad : 0, "");
}

/* The library's warnings, on stderr. While a command opens the user
 * cache they are held (open_held): the one that turns the cache off says
 * the problem that the command reports, and is not said twice. */
static struct {
  bool hold;
  unsigned n;
  char *msg[16]; /* (the library's stop at 8 and "N more") */
} held;

static void warn_cb(void *ud, const char *msg) {
  (void)ud;
  if (held.hold && held.n < sizeof held.msg / sizeof *held.msg &&
      (held.msg[held.n] = strdup(msg)) != NULL) {
    held.n++;
    return;
  }
  /* (a warning may quote a damaged row, a bundle's meta) */
  fprintf(stderr, "%s: warning: ", cli_prog);
  cli_fputs_clean(stderr, msg, true);
  fputc('\n', stderr);
}

/* xpj_cache_open of the user cache, its warnings held and then printed,
 * but for the one of the problem that turned it off (xpj_cache_problem):
 * every command reports that itself, as the cache's state ("refusing the
 * cache ..."), not as a program's ("...; compiling without caching"). */
static bool held_defer; /* open_held leaves them for held_flush */

/* Whether msg is the warning of a file moved aside ("...; moved it to
 * ASIDE and started a new one") that finding ("file: ...; moved to ASIDE,
 * a new one was started", xpj_cache_verify's) reports already. */
static bool said_by(const char *msg, const char *finding) {
  const char *p = strstr(msg, "; moved it to "), *q;
  if (!finding || !p || !(q = strstr(p, " and started a new one")))
    return false;
  p += strlen("; moved it to ");
  char want[4400];
  int n = snprintf(want, sizeof want, "moved to %.*s, a new one was started",
                   (int)(q - p), p);
  return n > 0 && (size_t)n < sizeof want && strstr(finding, want);
}

/* The held warnings printed and let go, but for the one of the problem
 * that turned c off or read-only (NULL: not opened), which the command
 * reports, and the one replaced, a finding of verify, says already. (A
 * cache on a read-only mount was reported twice: the warning "... cannot
 * be written (...); using it read-only", then the same as `problem:` or
 * the command's error: an outside probe.) */
static void held_flush(xpj_cache *c, const char *replaced) {
  char problem[4600] = "";
  if (c)
    xpj_cache_problem(c, problem, sizeof problem);
  for (unsigned i = 0; i < held.n; i++) {
    if ((!*problem || strncmp(held.msg[i], problem, strlen(problem)) != 0) &&
        !said_by(held.msg[i], replaced))
      warn_cb(NULL, held.msg[i]);
    free(held.msg[i]);
  }
  held.n = 0;
}

static xpj_status open_held(const xpj_cache_config *cfg, xpj_cache **c) {
  held.hold = true;
  xpj_status st = xpj_cache_open(cfg, c);
  held.hold = false;
  if (!held_defer)
    held_flush(st == XPJ_OK ? *c : NULL, NULL);
  return st;
}

/* A call that writes the user cache (clear, prune, stats --zero, bundle
 * import), its warnings held: a cache found read-only only by that write
 * (a read-only mount where a reader left its -wal and -shm) was said by
 * the library's warning and again by the command's error. held_end lets
 * them go but for that one, and says the error (who: NULL, none): the
 * cache's problem when it has one now, else the call's error. 0, or
 * EXIT_INPUT when st is not XPJ_OK. */
static void held_begin(void) { held.hold = true; }

static int held_end(xpj_cache *c, xpj_status st, const char *who) {
  held.hold = false;
  char err[4600], problem[4600];
  snprintf(err, sizeof err, "%s", xpj_cache_last_error());
  bool has = xpj_cache_problem(c, problem, sizeof problem) > 0;
  held_flush(c, NULL);
  if (st == XPJ_OK)
    return 0;
  if (who)
    cli_error(who, "%s", has ? problem : err);
  return EXIT_INPUT;
}

/* ---- entries: listed, shown, verified (cache and bundle) ------------------- */

static json_t *entry_json(const xpj_cache_entry *e) {
  return json_pack("{s:o, s:o, s:o, s:I, s:o, s:o, s:o, s:b, s:o, s:o, s:I, "
                   "s:I, s:o, s:I}",
                   "digest", cli_jstr(e->digest), "kernel", cli_jstr(e->kernel),
                   "dtypes", cli_jstr(e->dtypes), "ndim", (json_int_t)e->ndim,
                   "target", cli_jstr(e->target), "options",
                   cli_jstr(e->options), "versions", cli_jstr(e->versions),
                   "failed", e->failed != 0, "size", cli_jint(e->size),
                   "compile_ms", cli_jms(e->compile_ms), "created_ms",
                   (json_int_t)e->created_ms, "last_used_ms",
                   (json_int_t)e->last_used_ms, "hits", cli_jint(e->hits),
                   "expires_ms", (json_int_t)e->expires_ms);
}

typedef struct listing {
  bool json;
  json_t *list; /* --json: the entries */
  cli_table table;
  bool failed;  /* out of memory */
} listing;

static int list_one(void *ud, const xpj_cache_entry *e) {
  listing *l = ud;
  if (l->json) {
    l->failed = l->failed || json_array_append_new(l->list, entry_json(e));
    return 0;
  }
  char digest[17], ndim[16], tg[256], sz[32], hits[24], age[64];
  snprintf(digest, sizeof digest, "%.16s", e->digest);
  snprintf(ndim, sizeof ndim, "%u", e->ndim);
  short_target(e->target, tg, sizeof tg);
  human_size(e->size, sz, sizeof sz);
  snprintf(hits, sizeof hits, "%llu", (unsigned long long)e->hits);
  human_age(e->last_used_ms, age, sizeof age);
  if (e->failed)
    strcat(age, "  (failed compile)");
  const char *row[] = {digest, e->kernel, *e->dtypes ? e->dtypes : "-", ndim,
                       tg, e->options, sz, hits, age};
  cli_table_row(&l->table, row);
  return 0;
}

/* The entries of c as a table (most recently used first), or with json
 * into the JSON array list. Exit status 1 when the cache is not in the
 * mode it was opened for (xpj_cache_problem says why): ls must not look
 * fine then. */
static int list_entries(xpj_cache *c, bool json, json_t *list) {
  static const char *const head[] = {"DIGEST", "KERNEL", "DTYPES",
                                     ">NDIM",  "TARGET", "OPTS",
                                     ">SIZE",  ">HITS",  "LAST USED"};
  listing l = {.json = json, .list = list};
  if (!json)
    cli_table_init(&l.table, 9, head);
  xpj_status st = xpj_cache_list(c, list_one, &l);
  int rc = 0;
  if (!json && l.table.nrows)
    rc = cli_table_print(&l.table);
  else if (!json)
    printf("(no entries)\n");
  if (l.failed || (json && !list)) { /* never a list with entries missing */
    cli_error(NULL, "out of memory making the JSON document");
    rc = EXIT_INPUT;
  }
  char problem[4600];
  if (st != XPJ_OK) {
    cli_error(NULL, "%s", xpj_cache_last_error());
    rc = EXIT_INPUT;
  } else if (xpj_cache_problem(c, problem, sizeof problem)) {
    cli_error(NULL, "%s", problem);
    rc = EXIT_INPUT;
  }
  return rc;
}

/* What verify found: printed, or with json into the JSON array list. */
typedef struct findings {
  bool json;
  json_t *list;
  uint64_t checked, bad;
  bool failed; /* out of memory: a line is missing from list */
  char *replaced; /* the finding of a file moved aside (held_flush) */
} findings;

static void verify_line(void *ud, const char *msg) {
  findings *f = ud;
  if (!f->replaced && !strncmp(msg, "file: ", 6) &&
      strstr(msg, ", a new one was started"))
    f->replaced = strdup(msg);
  if (f->json) {
    f->failed = f->failed || json_array_append_new(f->list, cli_jstr(msg));
    return;
  }
  /* a foreign file's kernel name: never raw to the terminal */
  printf("%sbad:%s ", cli_sgr(stdout, SGR_RED), cli_sgr(stdout, SGR_RESET));
  cli_print_clean(msg);
  printf("\n");
}

/* xpj_cache_verify into f; EXIT_INPUT when it could not run. */
static int verify(xpj_cache *c, bool repair, findings *f) {
  if (f->json && !f->list)
    f->failed = true;
  else if (xpj_cache_verify(c, repair, verify_line, f, &f->checked,
                            &f->bad) != XPJ_OK) {
    cli_error(NULL, "%s", xpj_cache_last_error());
    return EXIT_INPUT;
  }
  if (!f->failed)
    return 0;
  cli_error(NULL, "out of memory making the JSON document");
  return EXIT_INPUT;
}

/* ---- xpjit-cli cache ---------------------------------------------------------- */

typedef struct cache_req {
  const char *path; /* --path, else the default */
  bool json, repair, zero;
  const char *out; /* show -o */
  uint64_t max_size;
  int64_t older_ms;
  const char *operand; /* show's DIGEST, export's FILE */
} cache_req;

typedef struct cache_cmd {
  const char *name;
  const char *synopsis;
  const char *summary;
  const cli_opt *opts; /* --path and --json, and its own */
  const char *operand; /* what it takes, or NULL */
  int (*run)(const cache_req *r);
} cache_cmd;

/* Opens the cache for a subcommand that reads (XPJ_CACHE_MODE_DEFAULT:
 * as XPJIT_CACHE says), only looks (RO) or writes (RW). */
/* Big-endian 32 bits (SQLite's header fields). */
static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         p[3];
}

/* NULL when path (given with --path) may hold an xpjit cache: a regular
 * file that is an SQLite database (or whose pages are still in its -wal,
 * as a new cache's are until a checkpoint); else why not. The library
 * moves a damaged file aside and starts a new cache in its place, as a
 * program's cache should; a path given to a tool is not that: a typo,
 * or some other file, is left as it is (another program's SQLite
 * database the library itself refuses and leaves alone), and so is the
 * cache of another xpjit, whose schema version is in its file name
 * (cache-v1.db): the library takes xpjit's id with another user_version
 * at its own file's name for damage, and `cache --path cache-v1.db ls`
 * moved that xpjit's cache aside and made a new cache of this version
 * under its name. */
static const char *not_a_cache(const char *path) {
  static char why[160];
  char wal[4200];
  snprintf(wal, sizeof wal, "%s-wal", path);
  struct stat ws;
  bool has_wal = lstat(wal, &ws) == 0 && S_ISREG(ws.st_mode);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat sb;
  unsigned char h[72]; /* the header up to the application id */
  ssize_t got = 0;
  why[0] = 0;
  if (fd < 0 || fstat(fd, &sb) != 0)
    snprintf(why, sizeof why, "%s", strerror(errno));
  else if (!S_ISREG(sb.st_mode))
    ; /* a directory, a FIFO: the library refuses it, nothing is moved */
  else if (!has_wal && sb.st_size == 0)
    snprintf(why, sizeof why, "the file is empty");
  else if ((got = pread(fd, h, sizeof h, 0)) < 16 ||
           memcmp(h, "SQLite format 3", 16) != 0) {
    if (!has_wal)
      snprintf(why, sizeof why, "not an SQLite database");
  } else if (got == (ssize_t)sizeof h && be32(h + 68) == XPJ_CACHE_APP_ID &&
             be32(h + 60) != XPJ_CACHE_SCHEMA_VERSION) {
    /* (user_version at byte 60, application_id at 68: a cache's are set
     * in the transaction that makes it, so the file's header has both) */
    snprintf(why, sizeof why, "of another xpjit: its schema version is "
             "%lu, this xpjit's %d", (unsigned long)be32(h + 60),
             XPJ_CACHE_SCHEMA_VERSION);
  }
  if (fd >= 0)
    close(fd);
  return why[0] ? why : NULL;
}

/* 0 unless XPJIT_CACHE says nothing is written to the cache (ro, off):
 * then a subcommand that writes it (clear, prune, stats --zero, verify
 * --repair, bundle import) says so and stops, exit 1, having written and
 * created nothing; it does not override the setting, and a missing cache
 * is not made only to be cleared. path NULL: the default one. */
static int writes_forbidden(const char *who, const char *path) {
  xpj_cache_config cfg = {.path = path};
  xpj_cache_mode m = xpj_cache_config_mode(&cfg);
  if (m == XPJ_CACHE_MODE_RW)
    return 0;
  char dflt[4200];
  if (!path) {
    xpj_cache_default_path(dflt, sizeof dflt);
    path = dflt;
  }
  cli_error(who, "the cache %s is %s (XPJIT_CACHE=%s): nothing written",
            path, m == XPJ_CACHE_MODE_RO ? "read-only" : "off",
            getenv("XPJIT_CACHE"));
  return EXIT_INPUT;
}

static int open_cache(const cache_req *r, xpj_cache_mode mode,
                      xpj_cache **c) {
  /* a --path that names nothing is a typo, not a new cache to create
   * (the default path of a user who has cached nothing yet is empty) */
  struct stat sb;
  if (r->path && stat(r->path, &sb) != 0) {
    cli_error("cache", "no cache file at %s: %s", r->path, strerror(errno));
    return EXIT_INPUT;
  }
  const char *why = r->path ? not_a_cache(r->path) : NULL;
  if (why) {
    cli_error("cache", "%s is not an xpjit cache (%s); left as it is", r->path,
              why);
    return EXIT_INPUT;
  }
  int rc = mode == XPJ_CACHE_MODE_RW ? writes_forbidden("cache", r->path) : 0;
  if (rc)
    return rc;
  xpj_cache_config cfg = {.path = r->path, .mode = mode, .warn = warn_cb};
  if (open_held(&cfg, c) == XPJ_OK)
    return 0;
  cli_error("cache", "%s", xpj_cache_last_error());
  return EXIT_INPUT;
}

/* Opens the cache for a subcommand that reads its entries (ls, show,
 * export), as XPJIT_CACHE says: one that is off is an error that says why
 * (refused, unusable, or XPJIT_CACHE=off). Off for none of these (read-only
 * and no file yet), there is nothing to read: no entries. */
static int open_entries(const cache_req *r, const char *who,
                        xpj_cache **c) {
  int rc = open_cache(r, XPJ_CACHE_MODE_DEFAULT, c);
  if (rc || xpj_cache_mode_of(*c) != XPJ_CACHE_MODE_OFF)
    return rc;
  char problem[4600];
  if (xpj_cache_problem(*c, problem, sizeof problem))
    cli_error(who, "%s", problem);
  else if (xpj_cache_config_mode(&(xpj_cache_config){.path = r->path}) ==
           XPJ_CACHE_MODE_OFF)
    cli_error(who, "the cache %s is off (XPJIT_CACHE=%s)", xpj_cache_path(*c),
              getenv("XPJIT_CACHE"));
  else
    return 0;
  xpj_cache_close(*c);
  return EXIT_INPUT;
}

static const char *mode_name(xpj_cache_mode m) {
  switch (m) {
  case XPJ_CACHE_MODE_OFF: return "off";
  case XPJ_CACHE_MODE_RO: return "ro";
  case XPJ_CACHE_MODE_RW: return "rw";
  default: return "default";
  }
}

static json_t *stats_json(xpj_cache *c, xpj_cache_mode mode,
                          const xpj_cache_stats *s, const char *problem,
                          bool zeroed) {
  json_t *o = json_pack("{s:o, s:s}", "path", cli_jstr(xpj_cache_path(c)),
                        "mode", mode_name(mode));
  bool ok = o != NULL;
  if (*problem)
    ok = cli_jset(o, "problem", cli_jstr(problem));
  ok = ok && cli_jset(o, "entries", cli_jint(s->entries)) &&
       cli_jset(o, "failed_entries", cli_jint(s->failed_entries)) &&
       cli_jset(o, "bytes", cli_jint(s->bytes)) &&
       cli_jset(o, "file_bytes", cli_jint(s->file_bytes)) &&
       cli_jset(o, "max_size", cli_jint(s->max_size));
  const xpj_cache_counters *k = &s->counters;
#define JSON_U(name) cli_jint(k->name)
#define JSON_D(name) cli_jms(k->name) /* the counters in ms */
#define JSON(kind, name, what) ok = ok && cli_jset(o, #name, JSON_##kind(name));
  XPJ_CACHE_COUNTERS(JSON)
#undef JSON
#undef JSON_D
#undef JSON_U
  if (zeroed)
    ok = ok && cli_jset(o, "zeroed", json_true());
  if (!ok) {
    json_decref(o);
    return NULL;
  }
  return o;
}

static void stats_text(xpj_cache *c, xpj_cache_mode mode,
                       const xpj_cache_stats *s, const char *problem) {
  const xpj_cache_counters *k = &s->counters;
  char b1[32], b2[32], b3[32];
  human_size(s->bytes, b1, sizeof b1);
  human_size(s->file_bytes, b2, sizeof b2);
  human_size(s->max_size, b3, sizeof b3);
  uint64_t lookups = k->l2_hits + k->l2_misses;
  const int w = 18;
  label("cache:", w);
  printf("%s (%s)\n", xpj_cache_path(c), mode_name(mode));
  if (*problem) {
    label("problem:", w);
    cli_print_clean(problem);
    printf("\n");
  }
  label("entries:", w);
  printf("%llu (%llu failed compiles)\n", (unsigned long long)s->entries,
         (unsigned long long)s->failed_entries);
  label("size:", w);
  printf("%s of %s limit (file %s)\n", b1,
         s->max_size == UINT64_MAX ? "no" : b3, b2);
  label("first-level hits:", w);
  printf("%llu\n", (unsigned long long)k->l1_hits);
  label("disk hits:", w);
  printf("%llu of %llu lookups (%.1f%%)\n", (unsigned long long)k->l2_hits,
         (unsigned long long)lookups,
         lookups ? 100.0 * (double)k->l2_hits / (double)lookups : 0.0);
  label("bundle hits:", w);
  printf("%llu\n", (unsigned long long)k->bundle_hits);
  label("daemon hits:", w);
  printf("%llu (%llu times it could not serve)\n",
         (unsigned long long)k->daemon_hits,
         (unsigned long long)k->daemon_fallbacks);
  if (k->redis_hits + k->redis_misses + k->redis_errors + k->redis_skipped) {
    label("redis tier:", w);
    printf("%llu hits, %llu misses, %llu stored, %llu refused, %llu "
           "errors, %llu skipped while down, %llu waits\n",
           (unsigned long long)k->redis_hits,
           (unsigned long long)k->redis_misses,
           (unsigned long long)k->redis_stores,
           (unsigned long long)k->redis_refused,
           (unsigned long long)k->redis_errors,
           (unsigned long long)k->redis_skipped,
           (unsigned long long)k->redis_waits);
  }
  label("device binaries:", w);
  printf("%llu loaded, %llu stored\n", (unsigned long long)k->native_hits,
         (unsigned long long)k->native_stores);
  label("compiles:", w);
  printf("%llu (%llu failed), %.1f ms\n", (unsigned long long)k->compiles,
         (unsigned long long)k->compile_failures, k->compile_ms);
  label("compile saved:", w);
  printf("%.1f ms\n", k->saved_ms);
  label("cached failures:", w);
  printf("%llu served\n", (unsigned long long)k->failure_hits);
  label("evictions:", w);
  printf("%llu\n", (unsigned long long)k->evictions);
  label("corrupt dropped:", w);
  printf("%llu\n", (unsigned long long)k->corrupt);
}

/* stats [--zero]: the statistics; with --zero, then the counters reset
 * (the entries stay). Exit status 1 when the cache is not in the mode it
 * was opened for (xpj_cache_problem says why): it must not look fine. */
static int cache_stats(const cache_req *r) {
  xpj_cache *c;
  int rc = open_cache(r, r->zero ? XPJ_CACHE_MODE_RW : XPJ_CACHE_MODE_DEFAULT,
                      &c);
  if (rc)
    return rc;
  xpj_cache_stats s;
  char problem[4600] = "";
  if (xpj_cache_get_stats(c, &s) != XPJ_OK) {
    cli_error("cache stats", "%s", xpj_cache_last_error());
    xpj_cache_close(c);
    return EXIT_INPUT;
  }
  xpj_cache_mode mode = xpj_cache_mode_of(c);
  if (xpj_cache_problem(c, problem, sizeof problem)) {
    rc = EXIT_INPUT;
  } else if (mode == XPJ_CACHE_MODE_RW && access(xpj_cache_path(c), W_OK) &&
             errno != ENOENT) {
    /* a handle is read-only until its first write: a file that cannot be
     * written is found out by a program's first store (it warns then and
     * goes on read-only), never by stats, which stores nothing */
    snprintf(problem, sizeof problem, "cache %s cannot be written (%s): "
             "programs use it read-only", xpj_cache_path(c), strerror(errno));
    mode = XPJ_CACHE_MODE_RO;
    rc = EXIT_INPUT;
  }
  bool zeroed = false;
  if (r->zero && !rc) {
    held_begin();
    rc = held_end(c, xpj_cache_zero_stats(c), "cache stats");
    zeroed = !rc;
  }
  if (r->json) {
    int jrc = cli_json_print(stats_json(c, mode, &s, problem, zeroed));
    rc = rc ? rc : jrc;
  } else {
    stats_text(c, mode, &s, problem);
    if (zeroed)
      fprintf(stderr, "%s: the statistics of %s are reset to zero\n",
              cli_prog, xpj_cache_path(c));
  }
  xpj_cache_close(c);
  return rc;
}

/* ls: one line per entry, most recently used first. */
static int cache_ls(const cache_req *r) {
  xpj_cache *c;
  int rc = open_entries(r, "cache ls", &c);
  if (rc)
    return rc;
  json_t *list = r->json ? json_array() : NULL;
  rc = list_entries(c, r->json, list);
  if (r->json && !rc) /* else the error (cli_json_finish) */
    rc = cli_json_print(list);
  else
    json_decref(list);
  xpj_cache_close(c);
  return rc;
}

static json_t *entry_json_full(const xpj_cache_entry *e) {
  json_t *o = entry_json(e);
  bool ok = cli_jset(o, "code", cli_jstr(e->code)) &&
            cli_jset(o, "entry", cli_jstr(e->entry)) &&
            cli_jset(o, "local_bytes", cli_jint(e->local_bytes)) &&
            cli_jset(o, "scratch_bytes", cli_jint(e->scratch_bytes)) &&
            cli_jset(o, "key", cli_jstr(e->key)) &&
            cli_jset(o, "log", cli_jstr(e->log));
  if (!ok) {
    json_decref(o);
    return NULL;
  }
  return o;
}

/* One line of show: a label, then text of the file through cli_clean. */
static void field(const char *l, const char *text) {
  label(l, 12);
  cli_print_clean(text);
  printf("\n");
}

/* Every string of e comes from the file (a bundle's, imported): shown
 * through cli_clean, the key and the log with their line breaks. */
static void entry_text(const xpj_cache_entry *e) {
  char sz[32], age[32], line[96];
  human_size(e->size, sz, sizeof sz);
  human_age(e->last_used_ms, age, sizeof age);
  field("digest:", e->digest);
  field("kernel:", e->kernel);
  field("dtypes:", *e->dtypes ? e->dtypes : "-");
  snprintf(line, sizeof line, "%u", e->ndim);
  field("ndim:", line);
  field("target:", e->target);
  field("options:", e->options);
  field("versions:", e->versions);
  field("code hash:", e->code);
  field("status:", e->failed ? "failed compile" : "ok");
  label("binary:", 12);
  printf("%s, entry point ", sz);
  cli_print_clean(e->entry);
  printf("\n");
  label("local mem:", 12);
  printf("%llu bytes; scratch %llu bytes per work-item\n",
         (unsigned long long)e->local_bytes,
         (unsigned long long)e->scratch_bytes);
  label("compile:", 12);
  printf("%.1f ms\n", e->compile_ms);
  label("used:", 12);
  printf("%llu hits, last %s\n", (unsigned long long)e->hits, age);
  if (e->expires_ms) {
    label("expires:", 12);
    printf("%lld (ms since the epoch)\n", (long long)e->expires_ms);
  }
  label("key:", 0);
  printf("\n");
  cli_fputs_clean(stdout, e->key, true);
  if (*e->log) {
    label("log:", 0);
    printf("\n");
    cli_fputs_clean(stdout, e->log, true);
    printf("\n");
  }
}

/* The entry's binary to path ("-": standard output; never one of the
 * cache's own files, c's or the default one's: cli_write_output), and a
 * note of it on stderr. */
static int write_entry(const xpj_cache *c, const xpj_cache_entry *e,
                       const char *path) {
  int rc = cli_write_output("cache show", path, e->data, e->size,
                            xpj_cache_path(c));
  if (!rc && strcmp(path, "-")) {
    char digest[17];
    snprintf(digest, sizeof digest, "%.16s", e->digest);
    fprintf(stderr, "%s: wrote the %zu bytes of ", cli_prog, e->size);
    cli_fputs_clean(stderr, digest, false);
    fprintf(stderr, " to %s\n", path);
  }
  return rc;
}

/* show DIGEST [-o FILE]: the entry; with -o its binary, and nothing else
 * on standard output unless --json asks. */
static int cache_show(const cache_req *r) {
  if (r->out && !strcmp(r->out, "-") && (r->json || isatty(1))) {
    cli_error("cache show", "%s",
              r->json ? "-o - and --json would both write standard output"
                      : "not writing a binary to a terminal; use -o FILE");
    return EXIT_USAGE;
  }
  xpj_cache *c;
  int rc = open_entries(r, "cache show", &c);
  if (rc)
    return rc;
  xpj_cache_entry e;
  xpj_status st = xpj_cache_find(c, r->operand, &e);
  if (st != XPJ_OK) {
    cli_error(NULL, "%s", xpj_cache_last_error());
    xpj_cache_close(c);
    return st == XPJ_ERR_INVALID ? EXIT_USAGE : EXIT_INPUT;
  }
  if (r->out)
    rc = write_entry(c, &e, r->out);
  if (r->json) {
    int jrc = cli_json_print(json_pack("[o]", entry_json_full(&e)));
    rc = rc ? rc : jrc;
  } else if (!r->out) {
    entry_text(&e);
  }
  xpj_cache_entry_clear(&e);
  xpj_cache_close(c);
  return rc;
}

/* verify [--repair]: without --repair it only looks: opened read-only, it
 * reports a damaged file instead of replacing it. */
static int cache_verify(const cache_req *r) {
  xpj_cache *c;
  /* the open's warnings after the findings: a file found damaged and
   * moved aside is one of them, not said twice */
  held_defer = true;
  int rc = open_cache(r, r->repair ? XPJ_CACHE_MODE_RW : XPJ_CACHE_MODE_RO,
                      &c);
  held_defer = false;
  if (rc) {
    held_flush(NULL, NULL);
    return rc;
  }
  findings f = {.json = r->json, .list = r->json ? json_array() : NULL};
  rc = verify(c, r->repair, &f);
  held_flush(c, f.replaced);
  free(f.replaced);
  /* a cache refused or off (another's file, a lock that is a FIFO, a
   * disk it cannot write) was not touched: nothing was removed */
  bool usable = xpj_cache_mode_of(c) == XPJ_CACHE_MODE_RW;
  bool repaired = r->repair && f.bad && usable;
  if (!rc && r->json)
    rc = cli_json_print(json_pack("{s:o, s:o, s:o, s:b, s:o}", "path",
                                  cli_jstr(xpj_cache_path(c)), "checked",
                                  cli_jint(f.checked), "bad",
                                  cli_jint(f.bad), "repaired", repaired,
                                  "problems", f.list));
  else if (!rc)
    printf("%s: %llu entries checked, %llu bad%s\n", xpj_cache_path(c),
           (unsigned long long)f.checked, (unsigned long long)f.bad,
           repaired                     ? " (removed)"
           : r->repair && f.bad         ? " (nothing repaired: the cache "
                                          "cannot be used as it is; the "
                                          "line above says why)"
                                        : "");
  else
    json_decref(f.list);
  xpj_cache_close(c);
  return rc ? rc : f.bad ? EXIT_INPUT : 0;
}

static int cache_prune(const cache_req *r) {
  xpj_cache *c;
  int rc = open_cache(r, XPJ_CACHE_MODE_RW, &c);
  if (rc)
    return rc;
  uint64_t n = 0, freed = 0;
  held_begin();
  rc = held_end(c, xpj_cache_prune(c, r->max_size, r->older_ms, &n, &freed),
                "cache prune");
  if (rc) {
  } else if (r->json) {
    rc = cli_json_print(json_pack("{s:o, s:o}", "removed", cli_jint(n),
                                  "freed", cli_jint(freed)));
  } else {
    char b[32];
    human_size(freed, b, sizeof b);
    printf("removed %llu entries, %s\n", (unsigned long long)n, b);
  }
  xpj_cache_close(c);
  return rc;
}

/* clear: every entry and the counters. */
static int cache_clear(const cache_req *r) {
  xpj_cache *c;
  int rc = open_cache(r, XPJ_CACHE_MODE_RW, &c);
  if (rc)
    return rc;
  held_begin();
  rc = held_end(c, xpj_cache_clear(c), "cache clear");
  if (rc) {
  } else if (r->json) {
    rc = cli_json_print(json_pack("{s:b, s:o}", "cleared", 1, "path",
                                  cli_jstr(xpj_cache_path(c))));
  } else {
    printf("cleared %s\n", xpj_cache_path(c));
  }
  xpj_cache_close(c);
  return rc;
}

/* xpj_cache_export of c to path, in a directory made here (mkdtemp beside
 * path) whose temporaries (the bundle in it, its journal, the directory:
 * xpjit_cache.h) a signal removes; false when it said why not */
static bool export_to(xpj_cache *c, const char *who, const char *path,
                      uint64_t *n) {
  char dir[4200], tmp[4300], journal[4400];
  if (xpj_cache_export_template(path, dir, sizeof dir) != XPJ_OK) {
    cli_error(who, "cannot write %s: the name is too long", path);
    return false;
  }
  if (!mkdtemp(dir)) {
    cli_error(who, "cannot write %s: cannot make a directory beside it "
              "(%s)", path, strerror(errno));
    return false;
  }
  snprintf(tmp, sizeof tmp, "%s/" XPJ_CACHE_EXPORT_TEMP, dir);
  snprintf(journal, sizeof journal, "%s-journal", tmp);
  cli_temp_add(tmp, false);
  cli_temp_add(journal, false);
  cli_temp_add(dir, true);
  bool ok = xpj_cache_export_in(c, path, dir, n) == XPJ_OK;
  cli_temp_drop(tmp);
  cli_temp_drop(journal);
  cli_temp_drop(dir);
  if (!ok)
    cli_error(who, "%s", xpj_cache_last_error());
  return ok;
}

static int cache_export(const cache_req *r) {
  xpj_cache *c;
  if (!cli_output_ok("cache export", r->operand, NULL))
    return EXIT_INPUT;
  int rc = open_entries(r, "cache export", &c);
  if (rc)
    return rc;
  uint64_t n = 0;
  if (xpj_cache_mode_of(c) == XPJ_CACHE_MODE_OFF) { /* open_entries: ro */
    cli_error("cache export", "no cache at %s (XPJIT_CACHE=ro creates "
              "none): nothing to export", xpj_cache_path(c));
    rc = EXIT_INPUT;
  } else if (!export_to(c, "cache export", r->operand, &n)) {
    rc = EXIT_INPUT;
  } else if (r->json) {
    rc = cli_json_print(json_pack("{s:o, s:o}", "exported", cli_jint(n),
                                  "bundle", cli_jstr(r->operand)));
  } else {
    printf("exported %llu entries to %s\n", (unsigned long long)n,
           r->operand);
  }
  xpj_cache_close(c);
  return rc;
}

#define CACHE_OPTS {"path", OPT_PATH, true}, {"json", OPT_JSON, false}
static const cli_opt cache_opts[] = {CACHE_OPTS, {0}};
static const cli_opt stats_opts[] = {CACHE_OPTS, {"zero", OPT_ZERO, false},
                                     {0}};
static const cli_opt show_opts[] = {CACHE_OPTS, {"output", 'o', true}, {0}};
static const cli_opt verify_opts[] = {CACHE_OPTS,
                                      {"repair", OPT_REPAIR, false}, {0}};
static const cli_opt prune_opts[] = {CACHE_OPTS,
                                     {"max-size", OPT_MAX_SIZE, true},
                                     {"older-than", OPT_OLDER_THAN, true},
                                     {0}};

static const cache_cmd cache_cmds[] = {
    {"stats", "stats [--zero]",
     "hits per level, compiles, time saved, entries, size; --zero then "
     "resets the counters",
     stats_opts, NULL, cache_stats},
    {"ls", "ls", "entries, most recently used first", cache_opts, NULL,
     cache_ls},
    {"show", "show DIGEST [-o FILE]",
     "one entry (4+ hex digits of its digest); -o writes its binary",
     show_opts, "DIGEST", cache_show},
    {"verify", "verify [--repair]",
     "check the file and every entry's key, checksum and columns",
     verify_opts, NULL,
     cache_verify},
    {"prune", "prune [--max-size N] [--older-than D]",
     "remove entries unused for D (90s, 30m, 12h, 7d, 2w), then the least "
     "recently used beyond N (512M, 2G)",
     prune_opts, NULL, cache_prune},
    {"clear", "clear", "remove every entry and reset the statistics",
     cache_opts, NULL, cache_clear},
    {"export", "export FILE", "write the successful entries as a bundle",
     cache_opts, "FILE", cache_export},
};
static const size_t ncache_cmds = sizeof cache_cmds / sizeof *cache_cmds;

static void usage_cache(FILE *out) {
  fprintf(out, "usage: %s cache [--path DB] [--json] COMMAND [OPTIONS]\n"
          "\ncommands:\n", cli_prog);
  for (size_t i = 0; i < ncache_cmds; i++)
    fprintf(out, "  %-38s %s\n", cache_cmds[i].synopsis,
            cache_cmds[i].summary);
  fprintf(out,
          "\n"
          "  --path DB       the cache's database\n"
          "  --json          one JSON document on standard output\n"
          "  --color=WHEN    colour: auto (a terminal, without NO_COLOR), "
          "always, never\n"
          "\n"
          "The cache is XPJIT_CACHE_DIR/cache-v%d.db, else\n"
          "$XDG_CACHE_HOME/xpjit/cache-v%d.db, else "
          "~/.cache/xpjit/cache-v%d.db.\n"
          "Exit status: 0 success, 1 problems found, 2 usage errors.\n",
          XPJ_CACHE_SCHEMA_VERSION, XPJ_CACHE_SCHEMA_VERSION,
          XPJ_CACHE_SCHEMA_VERSION);
}

/* One option of the cache group or its subcommands into r. */
static int cache_option(const cli_args *a, int k, cache_req *r,
                        const cache_cmd *cmd) {
  switch (k) {
  case OPT_PATH:
    if (!*a->arg)
      return cli_bad_value(a, "--path takes a cache file, not ''");
    r->path = a->arg;
    return 0;
  case OPT_JSON: r->json = true; return 0;
  case OPT_ZERO: r->zero = true; return 0;
  case OPT_REPAIR: r->repair = true; return 0;
  case 'o': r->out = a->arg; return 0;
  case OPT_MAX_SIZE:
    if (xpj_cache_parse_size(a->arg, &r->max_size) != XPJ_OK)
      return cli_bad_value(a, "--max-size: %s", xpj_cache_last_error());
    if (!r->max_size)
      return cli_bad_value(a, "--max-size: must be above 0");
    return 0;
  case OPT_OLDER_THAN:
    if (xpj_cache_parse_duration(a->arg, &r->older_ms) != XPJ_OK)
      return cli_bad_value(a, "--older-than: %s", xpj_cache_last_error());
    return 0;
  case CLI_OPERAND:
    if (!cmd || !cmd->operand || r->operand)
      return cli_usage_error(a, "unexpected argument '%s'", a->arg);
    r->operand = a->arg;
    return 0;
  default:
    return 0;
  }
}

int cli_cache(int argc, char **argv) {
  cache_req r = {0};
  cli_args a;
  cli_args_init(&a, "cache", usage_cache, cache_opts, argc, argv);
  int rc = 0, k;
  while (!rc && (k = cli_next(&a)) > 0) /* options before the command */
    rc = cache_option(&a, k, &r, NULL);
  if (rc || a.exited)
    return a.exited ? a.status : rc;
  if (k == CLI_DONE)
    return cli_usage_error(&a, "no command");
  const cache_cmd *cmd = NULL;
  for (size_t i = 0; i < ncache_cmds && !cmd; i++)
    if (!strcmp(a.arg, cache_cmds[i].name))
      cmd = &cache_cmds[i];
  if (!cmd)
    return cli_usage_error(&a, "unknown command '%s'", a.arg);
  char name[32];
  snprintf(name, sizeof name, "cache %s", cmd->name);
  int n;
  char **sub = cli_rest(&a, &n);
  cli_args_init(&a, name, usage_cache, cmd->opts, n, sub);
  while (!rc && (k = cli_next(&a)) >= 0)
    rc = cache_option(&a, k, &r, cmd);
  if (rc || a.exited)
    return a.exited ? a.status : rc;
  if (cmd->operand && !r.operand)
    return cli_usage_error(&a, "needs %s", cmd->operand);
  return cmd->run(&r);
}

/* ---- xpjit-cli bundle ---------------------------------------------------------- */

static void usage_bundle(FILE *out) {
  fprintf(out,
          "usage: %s bundle build FILE... --dtype T=f32,f64 [--dtype U=...]\n"
          "          [--const N=16,32]... [--ndim 1,2,3] [--kernel NAME]...\n"
          "          --target TGT... [-O N] [--fast-math] [--fp-contract]\n"
          "          [--check=bounds] [-j N] [--keep-going]\n"
          "          [--json] -o OUT.xpb\n"
          "       %s bundle ls FILE [--json]\n"
          "       %s bundle verify FILE [--json]\n"
          "       %s bundle import FILE... [--path DB] [--json]\n"
          "\n"
          "build   compiles every kernel of every FILE (or those named by\n"
          "        --kernel) for every combination of the --dtype lists (one\n"
          "        per type parameter, or types by position: --dtype f32,i64),\n"
          "        the --const lists (one per const parameter: values such as\n"
          "        16, 0x10, -1, true; a kernel whose type and const\n"
          "        parameters are not all given is skipped), --ndim values\n"
          "        (kernels with [*] arrays; default 1,2,3) and targets, in\n"
          "        parallel (-j N, --jobs N: N at a time; default one per\n"
          "        core), into one bundle. --target: spirv, ptx:sm_80,sm_90,\n"
          "        cpu (this machine), cpu:x86-64, ... (repeatable). Each\n"
          "        entry is compiled here, with the options given: none is\n"
          "        taken from a bundle, the daemon or Redis, and XPJIT_CHECK\n"
          "        is not read (--check=bounds, as for emit).\n"
          "ls      the bundle's versions, targets and entries\n"
          "verify  every entry's key, checksum and columns, and whether\n"
          "        this xpjit can use the bundle\n"
          "import  copies the bundle's entries into the cache\n"
          "\n"
          "  --json          one JSON document on standard output\n"
          "  --color=WHEN    colour: auto (a terminal, without NO_COLOR), "
          "always, never\n"
          "\n"
          "Programs load bundles with xpj_context_add_bundle or\n"
          "XPJIT_BUNDLE_PATH=FILE_OR_DIR[:...].\n"
          "Exit status: 0 success, 1 problems found, 2 usage errors.\n",
          cli_prog, cli_prog, cli_prog, cli_prog);
}

/* ---- bundle build ---- */

#define MAX_LIST 64
#define MAX_FILES 256
#define MAX_KERNELS 64

typedef struct build_req {
  const char *files[MAX_FILES], *kernels[MAX_KERNELS], *outpath;
  unsigned nfiles, nkernels, nd, ntargets, jobs;
  unsigned ndims[XPJ_MAX_RANK]; /* each rank once */
  char *targets[MAX_LIST]; /* malloc'd */
  cli_bindings bs;
  xpj_compile_opts o;
  bool keep_going, json;
} build_req;

/* --ndim 1,2,3; repeated, the lists add up (as --dtype's do). An empty
 * item or a rank given twice is a usage error. */
static int ndim_list(const cli_args *a, build_req *b) {
  for (const char *p = a->arg;;) {
    size_t n = strcspn(p, ",");
    char item[16];
    long x;
    snprintf(item, sizeof item, "%.*s", (int)n, p);
    if (n >= sizeof item || !cli_number(item, 1, XPJ_MAX_RANK, &x))
      return cli_bad_value(a, "--ndim takes ranks 1 to %d separated by "
                              "commas, not '%s'", XPJ_MAX_RANK, a->arg);
    for (unsigned i = 0; i < b->nd; i++)
      if (b->ndims[i] == (unsigned)x)
        return cli_bad_value(a, "--ndim %s: rank %ld is given twice",
                             a->arg, x);
    b->ndims[b->nd++] = (unsigned)x;
    if (!p[n])
      return 0;
    p += n + 1; /* the item after the comma */
  }
}

/* Whether a --target item starts a target of its own: it names a kind
 * (cpu, spirv, ptx), alone or before a ':'. */
static bool names_kind(const char *item) {
  static const char *const kinds[] = {"cpu", "spirv", "ptx"};
  size_t n = strcspn(item, ":");
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
    if (strlen(kinds[i]) == n && !strncmp(item, kinds[i], n))
      return true;
  return false;
}

/* "%.*s%s%s" of head's first n bytes, sep and tail (malloc'd). */
static char *joined(const char *head, size_t n, const char *sep,
                    const char *tail) {
  size_t len = n + strlen(sep) + strlen(tail) + 1;
  char *s = malloc(len);
  if (s)
    snprintf(s, len, "%.*s%s%s", (int)n, head, sep, tail);
  return s;
}

/* One item of a --target list, after the targets from first on that the
 * same option gave: an item that names a kind starts a target; +feat or
 * -feat after a CPU target with a feature list (cpu:NAME:+f) is one more
 * feature of it; another item is another target of the kind before it
 * (sm_90 after ptx:sm_80, 1.4 after spirv:1.0, znver3 after cpu). */
static int target_item(const cli_args *a, build_req *b, unsigned first,
                       const char *item) {
  if (!*item)
    return cli_bad_value(a, "--target takes targets separated by commas, "
                            "not '%s'", a->arg);
  char **prev = b->ntargets > first ? &b->targets[b->ntargets - 1] : NULL;
  bool feature = *item == '+' || *item == '-';
  if (prev && feature && !strncmp(*prev, "cpu:", 4) &&
      strchr(*prev + 4, ':')) {
    size_t n = strlen(*prev); /* after cpu:NAME: (no feature) no comma */
    char *t = joined(*prev, n, (*prev)[n - 1] == ':' ? "" : ",", item);
    if (!t)
      return cli_bad_value(a, "out of memory");
    free(*prev);
    *prev = t;
    return 0;
  }
  if (b->ntargets == MAX_LIST)
    return cli_bad_value(a, "too many targets (at most %d)", MAX_LIST);
  char *t = !prev || names_kind(item)
                ? strdup(item)
                : joined(*prev, strcspn(*prev, ":"), ":", item);
  if (!t)
    return cli_bad_value(a, "out of memory");
  b->targets[b->ntargets++] = t;
  return 0;
}

/* --target: a list separated by commas (target_item); every target it
 * gives, once complete, checked. */
static int target_list(const cli_args *a, build_req *b) {
  char *items = strdup(a->arg);
  if (!items)
    return cli_bad_value(a, "out of memory");
  unsigned first = b->ntargets;
  int rc = 0;
  for (char *item = items, *comma = NULL; !rc && item;
       item = comma ? comma + 1 : NULL) {
    if ((comma = strchr(item, ',')))
      *comma = 0;
    rc = target_item(a, b, first, item);
  }
  free(items);
  for (unsigned i = first; !rc && i < b->ntargets; i++) {
    xpj_target pt;
    char err[256];
    if (!cli_target_ok(b->targets[i], &pt, err, sizeof err))
      rc = cli_bad_value(a, "--target %s: %s", b->targets[i], err);
  }
  return rc;
}

static int build_option(const cli_args *a, int k, build_req *b) {
  long n;
  switch (k) {
  case OPT_DTYPE: return cli_bindings_add(&b->bs, false, a->arg);
  case OPT_CONST: return cli_bindings_add(&b->bs, true, a->arg);
  case OPT_NDIM: return ndim_list(a, b);
  case OPT_TARGET: return target_list(a, b);
  case OPT_KERNEL:
    if (!*a->arg) /* (it was taken, and matched no kernel) */
      return cli_bad_value(a, "--kernel takes a kernel's name, not ''");
    if (b->nkernels == MAX_KERNELS)
      return cli_bad_value(a, "too many --kernel");
    b->kernels[b->nkernels++] = a->arg;
    return 0;
  case 'o': b->outpath = a->arg; return 0;
  case 'O':
    if (!cli_number(a->arg, 0, 3, &n))
      return cli_bad_value(a, "-O takes 0, 1, 2 or 3, not '%s'", a->arg);
    b->o.opt_level = (unsigned)n;
    return 0;
  case 'j':
    if (!cli_number(a->arg, 1, 256, &n))
      return cli_bad_value(a, "-j takes 1..256, not '%s'", a->arg);
    b->jobs = (unsigned)n;
    return 0;
  case OPT_FAST_MATH: b->o.fast_math = 1; return 0;
  case OPT_FP_CONTRACT: b->o.fp_contract = 1; return 0;
  case OPT_CHECK: return cli_checks_value(a, &b->o.checks);
  case OPT_KEEP_GOING: b->keep_going = true; return 0;
  case OPT_JSON: b->json = true; return 0;
  case CLI_OPERAND:
    if (b->nfiles == MAX_FILES)
      return cli_bad_value(a, "too many files");
    b->files[b->nfiles++] = a->arg;
    return 0;
  default:
    return 0;
  }
}

/* Removes a private directory of files (bundle build's cache). */
/* The build's private directory and what the cache made in it (its
 * .hits and .flight directories: one level down), links not followed. */
static void remove_dir_depth(const char *dir, int depth) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    char p[4400];
    struct stat sb;
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p)
      continue;
    if (depth > 0 && lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
      remove_dir_depth(p, depth - 1);
    else
      unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

static void remove_dir(const char *dir) { remove_dir_depth(dir, 2); }

/* One compile of the build: a kernel for one binding, rank and target. */
typedef struct job {
  xpj_program *prog;
  const char *file;
  const char *kernel;
  char *dtypes; /* malloc'd: the binding, NAME=VALUE,... */
  unsigned ndim;
  const char *target; /* the build's */
  xpj_status st;
  char *msg;
} job;

typedef struct jobs {
  job *v;
  size_t n, cap;
  size_t left_out; /* kernels of the files with no job: bindings missing */
  bool failed;     /* out of memory */
} jobs;

static void add_job(jobs *js, const job *j) {
  if (js->n == js->cap) {
    size_t nc = js->cap ? js->cap * 2 : 64;
    job *nj = realloc(js->v, nc * sizeof *nj);
    if (!nj) {
      js->failed = true;
      return;
    }
    js->v = nj;
    js->cap = nc;
  }
  js->v[js->n++] = *j;
}

/* The jobs of kernel kn of prog: every combination of its bindings, ranks
 * and targets; none (and a note) when the bindings do not cover it. 0, or
 * EXIT_INPUT when a --const value does not fit its parameter's type (as
 * for ir: an error of the input, not a combination to skip). */
static int plan_kernel(const build_req *b, xpj_program *prog,
                       const char *file, const char *kn, jobs *js) {
  const xpj_func *f = xpj_module_find(xpj_program_module(prog), kn);
  unsigned nt = xpj_func_generic_count(f);
  const cli_binding *lists[XPJ_MAX_TPARAMS + XPJ_MAX_CPARAMS];
  unsigned given = 0;
  for (unsigned j = 0; j < b->bs.n; j++)
    given += !b->bs.b[j].is_const;
  if (b->bs.positional && given > xpj_func_tparam_count(f)) {
    fprintf(stderr, "%s: skipping kernel %s: it takes %u type parameters, "
            "--dtype gives %u\n", file, kn, xpj_func_tparam_count(f), given);
    js->left_out++;
    return 0;
  }
  for (unsigned t = 0; t < nt; t++) { /* in declaration order */
    int is_const = 0, gi = xpj_func_generic_at(f, t, &is_const);
    lists[t] = cli_bindings_for(&b->bs, f, t);
    if (!lists[t]) {
      fprintf(stderr, "%s: skipping kernel %s: no %s for its %s parameter "
              "%s\n", file, kn, is_const ? "--const" : "--dtype",
              is_const ? "const" : "type",
              is_const ? xpj_func_const_name(f, (unsigned)gi)
                       : xpj_func_tparam_name(f, (unsigned)gi));
      js->left_out++;
      return 0;
    }
    int64_t v;
    for (unsigned i = 0; is_const && i < lists[t]->n; i++)
      if (cli_const_value(lists[t]->name, lists[t]->values[i], f, kn, file,
                          &v))
        return EXIT_INPUT;
  }
  bool generic = xpj_func_has_generic_rank(f);
  unsigned idx[XPJ_MAX_TPARAMS + XPJ_MAX_CPARAMS] = {0};
  for (;;) { /* every combination of the lists */
    job j = {.prog = prog, .file = file, .kernel = kn};
    char text[(XPJ_MAX_TPARAMS + XPJ_MAX_CPARAMS) * 320];
    size_t len = 0;
    text[0] = '\0'; /* a kernel without generic parameters: none */
    for (unsigned t = 0; t < nt && len < sizeof text; t++) {
      int is_const = 0, gi = xpj_func_generic_at(f, t, &is_const);
      const char *pn = is_const ? xpj_func_const_name(f, (unsigned)gi)
                                : xpj_func_tparam_name(f, (unsigned)gi);
      len += (size_t)snprintf(text + len, sizeof text - len, "%s%s=%s",
                              t ? "," : "", pn, lists[t]->values[idx[t]]);
    }
    if (len >= sizeof text) { /* never cut: another binding than asked */
      cli_error("bundle build", "%s: the binding of kernel %s is longer "
                "than %zu bytes", file, kn, sizeof text - 1);
      return EXIT_INPUT;
    }
    for (unsigned di = 0; di < (generic ? b->nd : 1); di++)
      for (unsigned ti = 0; ti < b->ntargets; ti++) {
        j.ndim = generic ? b->ndims[di] : 0;
        j.target = b->targets[ti];
        if (!(j.dtypes = strdup(text))) {
          js->failed = true;
          return 0;
        }
        add_job(js, &j);
        if (js->failed)
          free(j.dtypes);
      }
    unsigned t = 0;
    while (t < nt && ++idx[t] == lists[t]->n)
      idx[t++] = 0;
    if (t == nt)
      return 0;
  }
}

/* Every job of the build; the programs into progs. */
static int plan(const build_req *b, xpj_context *ctx, xpj_program **progs,
                jobs *js) {
  bool used[MAX_KERNELS] = {0};
  for (unsigned fi = 0; fi < b->nfiles; fi++) {
    if (xpj_program_create_file(ctx, b->files[fi], NULL, &progs[fi]) !=
        XPJ_OK) {
      cli_error("bundle build", "%s", xpj_last_error());
      return EXIT_INPUT;
    }
    for (unsigned ki = 0; ki < xpj_program_kernel_count(progs[fi]); ki++) {
      const char *kn = xpj_program_kernel_name(progs[fi], ki);
      bool want = !b->nkernels;
      for (unsigned q = 0; q < b->nkernels; q++)
        if (!strcmp(b->kernels[q], kn))
          want = used[q] = true;
      int rc = want ? plan_kernel(b, progs[fi], b->files[fi], kn, js) : 0;
      if (rc)
        return rc;
    }
  }
  for (unsigned q = 0; q < b->nkernels; q++)
    if (!used[q]) {
      cli_error("bundle build", "no kernel named '%s' in the files",
                b->kernels[q]);
      return EXIT_INPUT;
    }
  if (js->failed) {
    cli_error(NULL, "out of memory");
    return EXIT_INPUT;
  }
  if (!js->n) {
    cli_error("bundle build",
              "nothing to compile (give --dtype for "
              "the kernels' type parameters and --const for their const "
              "parameters)");
    return EXIT_INPUT;
  }
  return 0;
}

typedef struct pool {
  jobs *js;
  size_t next, done;
  const xpj_compile_opts *o;
  pthread_mutex_t mu;
  bool tty;
} pool;

static void progress(pool *p, const job *j) {
  if (!p->tty)
    return;
  const int W = 30;
  int fill = (int)(W * p->done / (p->js->n ? p->js->n : 1));
  fprintf(stderr, "\r[%.*s%*s] %zu/%zu %-40.40s", fill,
          "##############################", W - fill, "", p->done, p->js->n,
          j ? j->kernel : "");
  if (p->done == p->js->n)
    fputc('\n', stderr);
  fflush(stderr);
}

static void *worker(void *arg) {
  pool *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    if (p->next == p->js->n) {
      pthread_mutex_unlock(&p->mu);
      return NULL;
    }
    job *j = &p->js->v[p->next++];
    pthread_mutex_unlock(&p->mu);
    j->st = xpj_program_get_binary(j->prog, j->kernel, j->dtypes, j->ndim,
                                   j->target, p->o, NULL, NULL);
    if (j->st != XPJ_OK)
      j->msg = strdup(xpj_last_error());
    pthread_mutex_lock(&p->mu);
    p->done++;
    progress(p, j);
    pthread_mutex_unlock(&p->mu);
  }
}

/* Runs the jobs on nthreads threads (a progress bar on a terminal). */
static void run_jobs(jobs *js, const xpj_compile_opts *o, unsigned nthreads) {
#if defined(__SANITIZE_ADDRESS__)
  /* GCC 12's libasan takes no lock around fork(): a compile worker forked
   * while another thread allocates can inherit a held allocator lock and
   * hang until its timeout (docs/testing.md). Sanitizer builds compile
   * one at a time. */
  nthreads = 1;
#endif
  if (nthreads > js->n)
    nthreads = (unsigned)js->n;
  pool p = {js, 0, 0, o, PTHREAD_MUTEX_INITIALIZER, isatty(2) != 0};
  pthread_t th[256];
  unsigned started = 0;
  for (; started < nthreads; started++)
    if (pthread_create(&th[started], NULL, worker, &p) != 0)
      break;
  if (!started)
    worker(&p);
  for (unsigned t = 0; t < started; t++)
    pthread_join(th[t], NULL);
}

/* The jobs' outcome: a dtype a kernel does not accept (popcount of f64) is
 * not an error of the build (that combination does not exist), noted;
 * other failures are errors. *skipped, *failed. */
static void report_jobs(const jobs *js, size_t *skipped, size_t *failed) {
  *skipped = *failed = 0;
  for (size_t q = 0; q < js->n; q++) {
    const job *j = &js->v[q];
    const char *m = j->msg ? j->msg : "failed";
    if (j->st == XPJ_OK)
      continue;
    if (j->st == XPJ_ERR_SPECIALIZE) {
      if ((*skipped)++ < 3)
        fprintf(stderr, "note: skipped %s [%s] ndim=%u: %.*s\n", j->kernel,
                j->dtypes, j->ndim, (int)strcspn(m, "\n"), m);
      continue;
    }
    (*failed)++;
    cli_diag(XPJ_SEV_ERROR, j->file, "%s [%s] ndim=%u for %s: %s", j->kernel,
             j->dtypes, j->ndim, j->target, m);
  }
  if (*skipped > 3)
    fprintf(stderr, "note: ... %zu combinations skipped in all (the "
            "kernels do not accept those dtypes)\n", *skipped);
}

/* Compiles into a private cache in a new directory of our own (the cache
 * refuses shared directories such as /tmp), then exports it. */
/* The private caches of builds that ended without removing them (a
 * signal, a crash): directories of td named by bundle_tmpdir for a
 * process of this user that is gone */
static void sweep_builds(const char *td) {
  DIR *d = opendir(td);
  if (!d)
    return;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    static const char pre[] = "xpjit-bundle-";
    char *end, p[4400];
    if (strncmp(de->d_name, pre, sizeof pre - 1))
      continue;
    long pid = strtol(de->d_name + sizeof pre - 1, &end, 10);
    struct stat sb;
    if (pid <= 0 || *end != '-' ||
        snprintf(p, sizeof p, "%s/%s", td, de->d_name) >= (int)sizeof p ||
        lstat(p, &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != getuid())
      continue;
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
      remove_dir(p);
  }
  closedir(d);
}

/* The private cache's files, then its directory: removed by a signal
 * (cli_temp_add; add) or no longer (the build removed them). The cache's
 * side directories, if any, stay for the next build's sweep_builds. */
static void build_temps(const char *tmpdir, const char *tmpdb, bool add) {
  static const char *const files[] = {"", "-wal", "-shm", "-journal", ".key",
                                      ".lock"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char p[4300];
    snprintf(p, sizeof p, "%s%s", tmpdb, files[i]);
    add ? cli_temp_add(p, false) : cli_temp_drop(p);
  }
  add ? cli_temp_add(tmpdir, true) : cli_temp_drop(tmpdir);
}

/* What went into the bundle, from the private cache once exported: its
 * successful entries (each compiled by this build) and their options
 * columns (one set for the whole build: "O2", "O3+fast-math+bounds"). */
typedef struct built {
  char options[512]; /* the distinct ones, separated by ", " */
} built;

static int built_one(void *ud, const xpj_cache_entry *e) {
  built *w = ud;
  if (e->failed)
    return 0;
  size_t len = strlen(w->options), on = strlen(e->options);
  for (const char *p = w->options; *p;) { /* listed already */
    size_t k = strcspn(p, ",");
    if (k == on && !strncmp(p, e->options, on))
      return 0;
    p += k + (p[k] ? 2 : 0);
  }
  if (len + on + 3 < sizeof w->options)
    snprintf(w->options + len, sizeof w->options - len, "%s%s",
             len ? ", " : "", e->options);
  return 0;
}

/* A bundle is trusted as its builder's own work (security.md), so a build
 * compiles every entry itself: its context asks no bundle, no daemon and
 * no Redis (build), and should a kernel come from one all the same, or
 * the counters not say, nothing is written. */
static bool compiled_all(xpj_context *ctx, const char *out) {
  xpj_cache_counters k;
  if (xpj_context_cache_counters(ctx, &k) != XPJ_OK) {
    cli_error("bundle build", "%s; %s not written", xpj_last_error(), out);
    return false;
  }
  uint64_t taken = k.bundle_hits + k.daemon_hits + k.redis_hits;
  if (!taken)
    return true;
  cli_error("bundle build", "%llu kernels came from a bundle, the daemon or "
            "Redis instead of a compile here; %s not written",
            (unsigned long long)taken, out);
  return false;
}

static int build(const build_req *b) {
  /* (xpj_cache_export refuses only its own, private cache's files) */
  if (!cli_output_ok("bundle build", b->outpath, NULL))
    return EXIT_INPUT;
  char tmpdir[4096], tmpdb[4200];
  const char *td = getenv("TMPDIR");
  if (!td || *td != '/')
    td = "/tmp";
  sweep_builds(td);
  snprintf(tmpdir, sizeof tmpdir, "%s/xpjit-bundle-%ld-XXXXXX", td,
           (long)getpid());
  if (!mkdtemp(tmpdir)) {
    cli_error("bundle build", "cannot make a directory in %s: %s", td,
              strerror(errno));
    return EXIT_INPUT;
  }
  snprintf(tmpdb, sizeof tmpdb, "%s/build.db", tmpdir);
  build_temps(tmpdir, tmpdb, true);
  /* Every entry compiled here, into an empty private cache, with the
   * options of the command line: no bundle of XPJIT_BUNDLE_PATH, no
   * daemon (XPJIT_DAEMON), no Redis (XPJIT_REDIS: whoever may write it
   * would have their binary in a bundle its user trusts as their own),
   * and not the checks of XPJIT_CHECK, which the context adds to every
   * kernel (entries a run without it never asks for: --check says so;
   * emit does not read it either). The compile server is started after
   * this, and gets the environment without it. */
  unsetenv("XPJIT_CHECK");
  xpj_context_desc desc = {.visible = "cpu",
                           .cpu_threads = 1,
                           .cache_mode = XPJ_CACHE_MODE_RW,
                           .cache_path = tmpdb,
                           .cache_max_size = UINT64_MAX,
                           .no_env_bundles = 1,
                           .redis = "off",
                           .daemon = "off"};
  xpj_context *ctx = NULL;
  if (xpj_context_create(&desc, &ctx) != XPJ_OK) {
    cli_error("bundle build", "%s", xpj_last_error());
    remove_dir(tmpdir);
    build_temps(tmpdir, tmpdb, false);
    return EXIT_INPUT;
  }
  xpj_program *progs[MAX_FILES] = {0};
  jobs js = {0};
  int rc = plan(b, ctx, progs, &js);
  size_t skipped = 0, failed = 0;
  uint64_t n = 0;
  built w = {0};
  if (rc == 0) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    run_jobs(&js, &b->o, b->jobs ? b->jobs : (unsigned)(ncpu > 0 ? ncpu : 1));
    report_jobs(&js, &skipped, &failed);
    if (failed && !b->keep_going) {
      cli_error("bundle build",
                "%zu of %zu compiles failed; %s not written "
                "(--keep-going writes the rest)",
                failed, js.n, b->outpath);
      rc = EXIT_INPUT;
    } else if (skipped == js.n) { /* an empty bundle is no build */
      cli_error("bundle build", "nothing was compiled: every kernel and "
                "combination was skipped (the notes above say why); %s not "
                "written", b->outpath);
      rc = EXIT_INPUT;
    } else if (!compiled_all(ctx, b->outpath) ||
               !export_to(xpj_context_cache(ctx), "bundle build", b->outpath,
                          &n)) {
      rc = EXIT_INPUT;
    } else if (xpj_cache_list(xpj_context_cache(ctx), built_one, &w) !=
               XPJ_OK) {
      snprintf(w.options, sizeof w.options, "?");
    }
  }
  /* Every combination is counted once: compiled (an entry of the bundle),
   * failed, skipped, or a duplicate, the same kernel as another's (the
   * same code in two files, one target named twice), which is one entry */
  size_t ok = js.n - failed - skipped;
  size_t compiled = n < ok ? (size_t)n : ok, dups = ok - compiled;
  if (rc == 0 && b->json) {
    rc = cli_json_print(json_pack(
        "{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "bundle",
        cli_jstr(b->outpath), "kernels", cli_jint(n), "compiled",
        cli_jint(compiled), "failed", cli_jint(failed), "skipped",
        cli_jint(skipped), "duplicates", cli_jint(dups), "left_out",
        cli_jint(js.left_out), "options", cli_jstr(w.options)));
  } else if (rc == 0) {
    fprintf(stderr, "%s: %llu kernels (%zu compiled, %zu failed, %zu "
            "skipped", b->outpath, (unsigned long long)n, compiled, failed,
            skipped);
    if (dups)
      fprintf(stderr, ", %zu duplicate%s", dups, dups == 1 ? "" : "s");
    /* kernels with no combination at all (their skipping notes above):
     * counted, or "0 skipped" hid them */
    if (js.left_out)
      fprintf(stderr, "; %zu kernel%s of the files left out", js.left_out,
              js.left_out == 1 ? "" : "s");
    fprintf(stderr, "), options %s\n", *w.options ? w.options : "-");
  }
  for (size_t q = 0; q < js.n; q++) {
    free(js.v[q].msg);
    free(js.v[q].dtypes);
  }
  free(js.v);
  for (unsigned fi = 0; fi < b->nfiles; fi++)
    xpj_program_destroy(progs[fi]);
  xpj_context_destroy(ctx);
  remove_dir(tmpdir);
  build_temps(tmpdir, tmpdb, false);
  return rc;
}

static int bundle_build(int argc, char **argv) {
  static const cli_opt opts[] = {
      {"dtype", OPT_DTYPE, true},     {"const", OPT_CONST, true},
      {"ndim", OPT_NDIM, true},       {"kernel", OPT_KERNEL, true},
      {"target", OPT_TARGET, true},   {"output", 'o', true},
      {NULL, 'O', true},              {"jobs", 'j', true},
      {"fast-math", OPT_FAST_MATH, false},
      {"fp-contract", OPT_FP_CONTRACT, false},
      {"check", OPT_CHECK, true},
      {"keep-going", OPT_KEEP_GOING, false},
      {"json", OPT_JSON, false},      {0},
  };
  build_req *b = calloc(1, sizeof *b);
  if (!b) {
    cli_error(NULL, "out of memory");
    return EXIT_INPUT;
  }
  xpj_compile_opts_default(&b->o);
  cli_args a;
  cli_args_init(&a, "bundle build", usage_bundle, opts, argc, argv);
  cli_bindings_init(&b->bs, &a, true);
  int rc = 0, k;
  while (!rc && (k = cli_next(&a)) >= 0)
    rc = build_option(&a, k, b);
  if (!rc && !a.exited && (!b->nfiles || !b->ntargets || !b->outpath))
    rc = cli_usage_error(&a, "needs FILE..., --target and -o");
  for (unsigned i = 0; !rc && !a.exited && i < b->nfiles; i++) {
    if (cli_same_file(b->files[i], b->outpath))
      rc = cli_bad_value(&a, "-o %s is an input file", b->outpath);
    for (unsigned j = 0; !rc && j < i; j++) /* its kernels twice */
      if (cli_same_file(b->files[j], b->files[i]))
        rc = cli_bad_value(&a, "%s and %s are the same file: give it once",
                           b->files[j], b->files[i]);
  }
  if (!rc && !a.exited && !b->nd) {
    static const unsigned dflt[] = {1, 2, 3};
    memcpy(b->ndims, dflt, sizeof dflt);
    b->nd = 3;
  }
  if (!rc && !a.exited)
    rc = build(b);
  cli_bindings_free(&b->bs);
  for (unsigned i = 0; i < b->ntargets; i++)
    free(b->targets[i]);
  free(b);
  return a.exited ? a.status : rc;
}

/* ---- bundle ls, verify, import ---- */

typedef struct bundle_req {
  const char *files[MAX_FILES];
  unsigned nfiles;
  const char *path; /* import: the cache */
  bool json;
} bundle_req;

/* The bundle's meta "targets" (one per line) as a JSON array (NULL when
 * memory ran out), or printed (without the CPU feature lists). */
static json_t *targets_of(const char *targets, bool json) {
  json_t *list = json ? json_array() : NULL;
  for (const char *t = targets, *e; t && *t; t = e ? e + 1 : t + strlen(t)) {
    e = strchr(t, '\n');
    char tg[1200], sh[1200];
    snprintf(tg, sizeof tg, "%.*s", e ? (int)(e - t) : (int)strlen(t), t);
    if (json) {
      if (json_array_append_new(list, cli_jstr(tg))) {
        json_decref(list);
        return NULL;
      }
    } else {
      short_target(tg, sh, sizeof sh);
      printf("  ");
      cli_print_clean(sh);
      printf("\n");
    }
  }
  return list;
}

/* A bundle opened for ls, verify and import: which builds its entries
 * are of, and whether this one is among them. */
typedef struct bundle {
  const char *path;
  xpj_cache *c;
  char *versions, *targets; /* the entries': one line per distinct value */
  char *meta;  /* meta.versions, what the bundle says of itself, or NULL */
  const char *shown; /* what "built by" shows: meta, else the entries' */
  char mine[128];
  bool usable; /* some of its entries are of this build */
  bool empty;  /* no entries at all: nothing to refuse */
} bundle;

static int stop_at_first(void *ud, const xpj_cache_entry *e) {
  (void)e;
  *(bool *)ud = true;
  return 1;
}

static int bundle_open(const char *path, bundle *b) {
  memset(b, 0, sizeof *b);
  b->path = path;
  xpj_cache_config cfg = {.path = path, .bundle = 1, .warn = warn_cb};
  if (xpj_cache_open(&cfg, &b->c) != XPJ_OK) {
    cli_error("bundle", "%s", xpj_cache_last_error());
    return EXIT_INPUT;
  }
  /* from the entries, not from meta.versions, which nothing checks: a
   * bundle whose meta named this build while its entries were all of
   * another was called usable and imported (its entries never found),
   * the reverse refused, and a meta versions NULL or a blob made verify
   * say "not usable" and import import it (an outside probe) */
  if (xpj_cache_targets(b->c, &b->targets, &b->versions) != XPJ_OK) {
    cli_error("bundle", "%s: %s", path, xpj_cache_last_error());
    xpj_cache_close(b->c);
    return EXIT_INPUT;
  }
  bool any = false;
  if (xpj_cache_list(b->c, stop_at_first, &any) != XPJ_OK) {
    cli_error("bundle", "%s: %s", path, xpj_cache_last_error());
    free(b->targets);
    free(b->versions);
    xpj_cache_close(b->c);
    return EXIT_INPUT;
  }
  b->empty = !any;
  if (xpj_cache_get_meta(b->c, "versions", &b->meta) != XPJ_OK) {
    free(b->meta);
    b->meta = NULL;
  }
  b->shown = b->meta ? b->meta : b->versions;
  xpj_versions_str(b->mine, sizeof b->mine);
  size_t n = strlen(b->mine);
  for (const char *l = b->versions; *l;
       l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "")
    if (!strncmp(l, b->mine, n) && (l[n] == '\n' || !l[n]))
      b->usable = true;
  return 0;
}

/* A note when the bundle's meta.versions is not what its entries are of
 * (nothing checks it: a hint at most, never what decides usability). */
static void bundle_meta_note(const bundle *b) {
  if (b->empty || (b->meta && !strcmp(b->meta, b->versions)))
    return;
  cli_diag(XPJ_SEV_NOTE, b->path, "its meta names the build %s, but its "
           "entries are of %s (what this xpjit goes by)",
           b->meta && *b->meta ? b->meta : "(none)", b->versions);
}

static void bundle_close(bundle *b) {
  free(b->versions);
  free(b->targets);
  free(b->meta);
  xpj_cache_close(b->c);
}

/* ls FILE: versions, targets, entries. */
static int bundle_ls(const bundle_req *r) {
  bundle b;
  int rc = bundle_open(r->files[0], &b);
  if (rc)
    return rc;
  if (r->json) {
    /* a document with every entry, or none: {"error"} (cli_json_finish) */
    json_t *entries = json_array();
    rc = list_entries(b.c, true, entries);
    if (!rc)
      rc = cli_json_print(json_pack(
          "{s:o, s:o, s:b, s:o, s:o}", "path", cli_jstr(b.path), "versions",
          cli_jstr(b.shown), "usable", b.usable, "targets",
          targets_of(b.targets, true), "entries", entries));
    else
      json_decref(entries);
  } else {
    bundle_meta_note(&b);
    label("bundle:", 10);
    printf("%s\n", b.path);
    label("built by:", 10);
    cli_print_clean(*b.shown ? b.shown : "(unknown)");
    printf("%s\n", b.usable ? "" : "  (NOT usable by this xpjit)");
    label("targets:", 0);
    printf("\n");
    targets_of(b.targets, false);
    rc = list_entries(b.c, false, NULL);
  }
  bundle_close(&b);
  return rc;
}

/* verify FILE: every entry, and whether this xpjit can use the bundle. */
static int bundle_verify(const bundle_req *r) {
  bundle b;
  int rc = bundle_open(r->files[0], &b);
  if (rc)
    return rc;
  bundle_meta_note(&b);
  if (!r->json) {
    cli_print_clean(b.path);
    printf(": built by ");
    cli_print_clean(*b.shown ? b.shown : "(unknown)");
    printf("%s\n", b.usable ? " (matches this xpjit)" : "");
  }
  findings f = {.json = r->json, .list = r->json ? json_array() : NULL};
  rc = verify(b.c, false, &f);
  if (!rc && r->json)
    rc = cli_json_print(json_pack(
        "{s:o, s:o, s:b, s:o, s:o, s:b, s:o}", "path", cli_jstr(b.path),
        "versions", cli_jstr(b.shown), "usable", b.usable, "checked",
        cli_jint(f.checked), "bad", cli_jint(f.bad), "repaired", 0,
        "problems", f.list));
  else if (!rc)
    printf("%s: %llu entries checked, %llu bad\n", b.path,
           (unsigned long long)f.checked, (unsigned long long)f.bad);
  else
    json_decref(f.list);
  if (!b.usable)
    fprintf(stderr, "%s: not usable by this xpjit (%s)\n", b.path, b.mine);
  bundle_close(&b);
  return rc ? rc : f.bad || !b.usable ? EXIT_INPUT : 0;
}

/* warn_cb, counting: a warning while a bundle is imported (a damaged
 * entry, which is not imported) is a problem found (exit 1); how many
 * entries are damaged the import counts (its warnings stop at 8 and "N
 * more warnings") */
static unsigned import_warnings;
static void import_warn_cb(void *ud, const char *msg) {
  import_warnings++;
  warn_cb(ud, msg);
}

static int bundle_import(const bundle_req *r) {
  const char *why = r->path ? not_a_cache(r->path) : NULL;
  if (why) {
    cli_error("bundle import",
              "%s is not an xpjit cache (%s); left as it "
              "is",
              r->path, why);
    return EXIT_INPUT;
  }
  if (writes_forbidden("bundle import", r->path))
    return EXIT_INPUT;
  xpj_cache_config cfg = {.path = r->path, .mode = XPJ_CACHE_MODE_RW,
                          .warn = import_warn_cb};
  xpj_cache *c = NULL;
  if (open_held(&cfg, &c) != XPJ_OK) {
    cli_error("bundle import", "%s", xpj_cache_last_error());
    return EXIT_INPUT;
  }
  json_t *list = r->json ? json_array() : NULL;
  bool lost = false; /* out of memory: a bundle missing from list */
  int rc = 0;
  for (unsigned i = 0; i < r->nfiles; i++) {
    uint64_t imp = 0, present = 0, damaged = 0;
    import_warnings = 0;
    /* a bundle of another build: its entries would never be found (their
     * keys name that build), only take room; refused as verify says */
    bundle b;
    const char *refused = NULL;
    if (cli_same_file(r->files[i], xpj_cache_path(c))) {
      refused = "the cache's own file";
      cli_error("bundle import", "%s is the cache's own file, not a bundle "
                "to import into it", r->files[i]);
    } else if (bundle_open(r->files[i], &b) != 0) {
      refused = xpj_cache_last_error(); /* (said) */
    } else {
      bundle_meta_note(&b);
      /* (an empty bundle names no build: there is nothing to refuse) */
      if (!b.usable && !b.empty) {
        cli_error("bundle import", "%s was built by another xpjit (%s; "
                  "this is %s): none of its entries could be used; nothing "
                  "imported", r->files[i],
                  *b.versions ? b.versions : "unknown", b.mine);
        refused = "built by another xpjit";
      }
      bundle_close(&b);
    }
    if (refused) {
      rc = EXIT_INPUT;
      if (r->json)
        lost = lost ||
               json_array_append_new(
                   list, json_pack("{s:o, s:o}", "bundle",
                                   cli_jstr(r->files[i]), "error",
                                   cli_jstr(refused)));
      continue;
    }
    /* what the size limit evicted meanwhile (the bundle's own entries
     * among them: "imported 1314" of which 37 stayed, said nowhere) */
    xpj_cache_stats s0, s1;
    bool counted = xpj_cache_get_stats(c, &s0) == XPJ_OK;
    /* held: a cache found read-only only now (its first write: a
     * read-only mount where a reader left its -wal and -shm) is said
     * once, by the error below, not also by the library's warning */
    held_begin();
    bool ok = held_end(c, xpj_cache_import_counted(c, r->files[i], &imp,
                                                   &present, &damaged),
                       "bundle import") == 0;
    uint64_t evicted = 0;
    if (counted && xpj_cache_get_stats(c, &s1) == XPJ_OK &&
        s1.counters.evictions > s0.counters.evictions)
      evicted = s1.counters.evictions - s0.counters.evictions;
    if (ok && evicted)
      cli_diag(XPJ_SEV_WARNING, r->files[i], "%llu entries were evicted "
               "to keep %s "
               "within its size limit (%llu bytes: XPJIT_CACHE_MAX_SIZE); "
               "the bundle's own may be among them",
               (unsigned long long)evicted, xpj_cache_path(c),
               (unsigned long long)s1.max_size);
    if (!ok) {
      rc = EXIT_INPUT; /* (said by held_end) */
    } else if (import_warnings || damaged) {
      rc = EXIT_INPUT; /* problems found: said in the warnings */
    }
    if (r->json && ok)
      lost = lost ||
             json_array_append_new(
                 list, json_pack("{s:o, s:o, s:o, s:o, s:o}", "bundle",
                                 cli_jstr(r->files[i]), "imported",
                                 cli_jint(imp), "skipped",
                                 cli_jint(present + damaged), "damaged",
                                 cli_jint(damaged), "evicted",
                                 cli_jint(evicted)));
    else if (r->json)
      lost = lost ||
             json_array_append_new(
                 list, json_pack("{s:o, s:o}", "bundle",
                                 cli_jstr(r->files[i]), "error",
                                 cli_jstr(xpj_cache_last_error())));
    else if (ok)
      printf("%s: imported %llu entries into %s (%llu already there, %llu "
             "damaged)%s\n", r->files[i], (unsigned long long)imp,
             xpj_cache_path(c), (unsigned long long)present,
             (unsigned long long)damaged,
             evicted ? "; entries evicted by the size limit: see the "
                       "warning" : "");
  }
  if (r->json) { /* every bundle, or {"error"} */
    if (lost) {
      json_decref(list);
      list = NULL;
    }
    int jrc = cli_json_print(list ? json_pack("{s:o, s:o}", "cache",
                                              cli_jstr(xpj_cache_path(c)),
                                              "bundles", list)
                                  : NULL);
    rc = rc ? rc : jrc;
  }
  xpj_cache_close(c);
  return rc;
}

static const cli_opt bundle_opts[] = {{"json", OPT_JSON, false}, {0}};
static const cli_opt import_opts[] = {{"json", OPT_JSON, false},
                                      {"path", OPT_PATH, true}, {0}};

static const struct bundle_cmd {
  const char *name;
  const cli_opt *opts;
  bool many; /* FILE... (else one FILE) */
  int (*run)(const bundle_req *r);
} bundle_cmds[] = {
    {"ls", bundle_opts, false, bundle_ls},
    {"verify", bundle_opts, false, bundle_verify},
    {"import", import_opts, true, bundle_import},
};

/* The command's arguments (sub, n of them, the command's name first) with
 * the options given before the command (pre) put in front of them:
 * `bundle --json ls F` is `bundle ls --json F`, the command's own parser
 * judging them (ls takes no --path). NULL when out of memory. */
static char **with_options_first(char **sub, int n, const char *const *pre,
                                 int npre) {
  char **v = malloc(((size_t)n + (size_t)npre + 1) * sizeof *v);
  if (!v)
    return NULL;
  v[0] = sub[0];
  for (int i = 0; i < npre; i++)
    v[1 + i] = (char *)pre[i]; /* (getopt moves pointers, never text) */
  memcpy(v + 1 + npre, sub + 1, ((size_t)n - 1) * sizeof *v);
  v[n + npre] = NULL;
  return v;
}

static int bundle_command(int argc, char **argv);

int cli_bundle(int argc, char **argv) {
  cli_args a;
  /* options before the command, as `cache` takes them */
  cli_args_init(&a, "bundle", usage_bundle, import_opts, argc, argv);
  const char *pre[8];
  int npre = 0, k;
  bool json = false;
  while ((k = cli_next(&a)) > 0) {
    if (npre + 2 > (int)(sizeof pre / sizeof *pre))
      return cli_usage_error(&a, "too many options before the command");
    if (k == OPT_PATH) {
      pre[npre++] = "--path";
      pre[npre++] = a.arg;
    } else if (!json) {
      pre[npre++] = "--json";
      json = true;
    }
  }
  if (a.exited)
    return a.status;
  if (k == CLI_DONE)
    return cli_usage_error(&a, "no command");
  int n;
  char **sub = cli_rest(&a, &n);
  char **v = with_options_first(sub, n, pre, npre);
  if (!v) {
    cli_error("bundle", "out of memory");
    return EXIT_INPUT;
  }
  int rc = bundle_command(n + npre, v);
  free(v);
  return rc;
}

/* One bundle command: argv[0] is its name. */
static int bundle_command(int n, char **sub) {
  cli_args a;
  int k;
  if (!strcmp(sub[0], "build"))
    return bundle_build(n, sub);
  const struct bundle_cmd *cmd = NULL;
  for (size_t i = 0; i < sizeof bundle_cmds / sizeof *bundle_cmds; i++)
    if (!strcmp(sub[0], bundle_cmds[i].name))
      cmd = &bundle_cmds[i];
  if (!cmd) {
    cli_args_init(&a, "bundle", usage_bundle, NULL, 0, sub);
    return cli_usage_error(&a, "unknown command '%s'", sub[0]);
  }
  char name[32];
  snprintf(name, sizeof name, "bundle %s", cmd->name);
  bundle_req r = {0};
  cli_args_init(&a, name, usage_bundle, cmd->opts, n, sub);
  int rc = 0;
  while (!rc && (k = cli_next(&a)) >= 0) {
    if (k == OPT_JSON)
      r.json = true;
    else if (k == OPT_PATH)
      r.path = a.arg;
    else if (r.nfiles == MAX_FILES || (!cmd->many && r.nfiles == 1))
      rc = cli_usage_error(&a, "unexpected argument '%s'", a.arg);
    else
      r.files[r.nfiles++] = a.arg;
  }
  if (rc || a.exited)
    return a.exited ? a.status : rc;
  if (!r.nfiles)
    return cli_usage_error(&a, "needs %s", cmd->many ? "FILE..." : "FILE");
  return cmd->run(&r);
}
