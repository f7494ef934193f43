/* test_env.c - the XPJIT_* variables and the log (ir/env.c): the table,
 * the parsers, typos named with the name they resemble, a bad value of
 * each variable reported once per process however many contexts read
 * it, and XPJIT_LOG=debug in XPJIT_LOG_FILE: one line per kernel obtained,
 * with its tier, key prefix, time and why it was compiled; a miss by a
 * kernel's alias is a debug line, not an error.
 *
 * main() sets XPJIT_LOG and XPJIT_LOG_FILE before anything reads them
 * (the log is set up once per process). */
#include "testutil.h"

#include "env.h"
#include "xpjit.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

static char dir[256], logpath[300];

/* ---- the table and the parsers ---- */

static void test_table(void **state) {
  (void)state;
  assert_true(xpj_env_nvars > 20 && xpj_env_nvars < 64); /* one flag each */
  for (size_t i = 0; i < xpj_env_nvars; i++) {
    const xpj_env_var *v = &xpj_env_vars[i];
    assert_int_equal(strncmp(v->name, "XPJIT_", 6), 0);
    assert_true(v->dflt && *v->dflt && v->values && *v->values &&
                v->effect && *v->effect && v->reader && *v->reader);
    for (size_t j = 0; j < i; j++)
      assert_string_not_equal(v->name, xpj_env_vars[j].name);
    assert_ptr_equal(xpj_env_find(v->name), v);
  }
  assert_null(xpj_env_find("XPJIT_NOPE"));
}

static void test_parsers(void **state) {
  (void)state;
  uint64_t v = 7;
  unsetenv("XPJIT_CPU_THREADS");
  assert_int_equal(xpj_env_uint("XPJIT_CPU_THREADS", 1, 1024, &v), 0);
  setenv("XPJIT_CPU_THREADS", "", 1);
  assert_int_equal(xpj_env_uint("XPJIT_CPU_THREADS", 1, 1024, &v), 0);
  setenv("XPJIT_CPU_THREADS", "12", 1);
  assert_int_equal(xpj_env_uint("XPJIT_CPU_THREADS", 1, 1024, &v), 1);
  assert_int_equal(v, 12);
  static const char *const bad[] = {"0",  "1025", "-3", "+3", " 3", "3 ",
                                    "3x", "abc",  "99999999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    setenv("XPJIT_CPU_THREADS", bad[i], 1);
    v = 7;
    assert_int_equal(xpj_env_uint("XPJIT_CPU_THREADS", 1, 1024, &v), -1);
    assert_int_equal(v, 7);
  }
  unsetenv("XPJIT_CPU_THREADS");
  static const char *const words[] = {"wal", "rollback", NULL};
  setenv("XPJIT_CACHE_JOURNAL", "rollback", 1);
  assert_int_equal(xpj_env_word("XPJIT_CACHE_JOURNAL", words), 1);
  setenv("XPJIT_CACHE_JOURNAL", "WAL", 1);
  assert_int_equal(xpj_env_word("XPJIT_CACHE_JOURNAL", words), -2);
  unsetenv("XPJIT_CACHE_JOURNAL");
  assert_int_equal(xpj_env_word("XPJIT_CACHE_JOURNAL", words), -1);
  static const struct {
    const char *v;
    int want;
  } bools[] = {{"1", 1},     {"on", 1},  {"yes", 1}, {"true", 1},
               {"0", 0},     {"off", 0}, {"no", 0},  {"false", 0},
               {"maybe", -1}, {"2", -1}, {"ON", -1}};
  for (size_t i = 0; i < sizeof bools / sizeof *bools; i++) {
    setenv("XPJIT_NATIVE_CACHE", bools[i].v, 1);
    assert_int_equal(xpj_env_bool("XPJIT_NATIVE_CACHE", 5), bools[i].want);
  }
  unsetenv("XPJIT_NATIVE_CACHE");
  assert_int_equal(xpj_env_bool("XPJIT_NATIVE_CACHE", 5), 5);
}

static void test_unknown_names(void **state) {
  (void)state;
  char buf[1024];
  setenv("XPJIT_CACHEDIR", "/x", 1);
  setenv("XPJIT_ZZZZZZZZZZZZZZZZ", "1", 1);
  xpj_env_unknown(buf, sizeof buf);
  assert_non_null(strstr(buf, "XPJIT_CACHEDIR (did you mean XPJIT_CACHE_DIR?)"));
  assert_non_null(strstr(buf, "XPJIT_ZZZZZZZZZZZZZZZZ"));
  assert_null(strstr(buf, "XPJIT_ZZZZZZZZZZZZZZZZ (did"));
  assert_null(strstr(buf, "XPJIT_LOG")); /* set by main: known */
  /* a buffer too small: cut at a whole name, never overrun */
  char small[20];
  memset(small, 'x', sizeof small);
  xpj_env_unknown(small, 16);
  assert_true(strlen(small) < 16 && small[17] == 'x');
  unsetenv("XPJIT_CACHEDIR");
  unsetenv("XPJIT_ZZZZZZZZZZZZZZZZ");
  xpj_env_unknown(buf, sizeof buf);
  assert_string_equal(buf, "");
}

/* ---- once per process ---- */

static char warned[64][256];
static unsigned nwarned;

static void collect(void *ud, const char *msg) {
  (void)ud;
  if (nwarned < 64)
    snprintf(warned[nwarned++], sizeof warned[0], "%s", msg);
}

static unsigned warnings_about(const char *name) {
  unsigned n = 0;
  char pat[80];
  snprintf(pat, sizeof pat, "%s", name);
  for (unsigned i = 0; i < nwarned; i++)
    n += strstr(warned[i], pat) != NULL;
  return n;
}

static const char *src = "kernel k(x: global i32[]) range {"
                         " x[global_id(0)] = 5; }";

/* A context on cache file db (NULL: off) and daemon (NULL: off) that
 * runs k on the CPU. */
static void run_k_daemon(const char *db, const char *daemon) {
  xpj_context_desc d = {.cache_mode = db ? XPJ_CACHE_MODE_DEFAULT
                                         : XPJ_CACHE_MODE_OFF,
                        .cache_path = db,
                        .no_env_bundles = 1,
                        .daemon = daemon ? daemon : "off"};
  xpj_context *ctx;
  xpj_device *dev;
  xpj_queue *q;
  xpj_program *p;
  xpj_kernel *k;
  assert_int_equal(xpj_context_create(&d, &ctx), XPJ_OK);
  assert_int_equal(xpj_device_select(ctx, "cpu", &dev), XPJ_OK);
  assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
  assert_int_equal(xpj_program_create(ctx, "k.xpk", src, strlen(src), NULL,
                                      &p),
                   XPJ_OK);
  assert_int_equal(xpj_program_get_kernel(p, "k", NULL, 0, dev, NULL, &k),
                   XPJ_OK);
  int32_t x[4] = {0};
  xpj_array a = xpj_array_1d(x, XPJ_I32, 4);
  xpj_arg arg = xpj_arg_array(&a);
  xpj_range r = xpj_range_1d(4, 0);
  assert_int_equal(xpj_launch(q, k, &r, 1, &arg, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  assert_int_equal(x[3], 5);
  xpj_program_destroy(p);
  xpj_queue_destroy(q);
  xpj_context_destroy(ctx);
}

static void run_k(const char *db) { run_k_daemon(db, NULL); }

static void test_bad_values_once(void **state) {
  (void)state;
  static const char *const set[][2] = {
      {"XPJIT_CPU_THREADS", "abc"},      {"XPJIT_DAEMON_TIMEOUT", "soon"},
      {"XPJIT_FAILURE_TTL", "forever"},  {"XPJIT_QUEUE_HELP", "maybe"},
      {"XPJIT_NATIVE_CACHE", "perhaps"}, {"XPJIT_CACHE_HIT_FILES", "2"},
      {"XPJIT_CACHE_JOURNAL", "WAL"},    {"XPJIT_CACHE", "sometimes"},
      {"XPJIT_CACHE_MAX_SIZE", "huge"},  {"XPJIT_CPU_LOADER", "fast"},
      {"XPJIT_CPU_STOP_SIGNAL", "9"},    {"XPJIT_CACHEDIR", "/x"},
      {"XPJIT_COMPILE_MEMORY_LIMIT", "lots"},
      {"XPJIT_COMPILE_SERVER", "/nonexistent/xpjit-cc"},
      {"XPJIT_LIBDEVICE", "/nonexistent/libdevice.10.bc"},
      {"XPJIT_FAULT_INJECT", "sometimes"}};
  enum { NSET = sizeof set / sizeof *set };
  for (int i = 0; i < NSET; i++)
    setenv(set[i][0], set[i][1], 1);
  xpj_set_warning_handler(collect, NULL);
  char db[300];
  /* three contexts, each compiling (XPJIT_FAILURE_TTL is read by every
   * compile) and one using a cache file (the cache's variables) */
  run_k(NULL);
  snprintf(db, sizeof db, "%s/once.db", dir);
  unsetenv("XPJIT_CACHE"); /* so that the cache file is used */
  run_k(db);
  setenv("XPJIT_CACHE", "sometimes", 1);
  run_k(NULL);
  xpj_context_desc dd = {.daemon = "off"};
  xpj_context *c2;
  assert_int_equal(xpj_context_create(&dd, &c2), XPJ_OK);
  xpj_context_destroy(c2);
  xpj_set_warning_handler(NULL, NULL);
  for (int i = 0; i < NSET; i++) {
    /* XPJIT_CACHE was read with its bad value only by run_k(NULL)'s
     * contexts, whose cache mode is given: not at all */
    if (!strcmp(set[i][0], "XPJIT_CACHE"))
      continue;
    unsigned n = warnings_about(set[i][0]);
    if (n != 1) {
      for (unsigned j = 0; j < nwarned; j++)
        fprintf(stderr, "  warning: %s\n", warned[j]);
      fail_msg("%s=%s: %u warnings, want 1", set[i][0], set[i][1], n);
    }
  }
  assert_int_equal(warnings_about("XPJIT_CACHEDIR (did you mean "
                                  "XPJIT_CACHE_DIR?)"),
                   1);
  for (int i = 0; i < NSET; i++)
    unsetenv(set[i][0]);
}

/* XPJIT_CACHE_MAX_SIZE that parses but is under 1M (0 included, the
 * default in the structs) made a cache that evicts everything it stores,
 * silently: now a warning, and the default applies. Each value in a child
 * of its own, since a variable complains once per process (so this test
 * runs before test_bad_values_once, whose complaint the child would
 * inherit). */
static unsigned cache_warnings;
static char cache_warning[256];
static void cache_warn(void *ud, const char *msg) {
  (void)ud;
  cache_warnings++;
  snprintf(cache_warning, sizeof cache_warning, "%s", msg);
}

static void test_small_cache_size(void **state) {
  (void)state;
  static const struct {
    const char *value;
    uint64_t limit;
    unsigned warnings;
  } cases[] = {{"0", XPJ_CACHE_DEFAULT_MAX_SIZE, 1},
               {"1", 1, 1},
               {"1K", 1024, 1},
               {"1023K", 1023 << 10, 1},
               {"1M", 1 << 20, 0},
               {"3G", 3ull << 30, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      char db[300];
      snprintf(db, sizeof db, "%s/small%zu.db", dir, i);
      setenv("XPJIT_CACHE_MAX_SIZE", cases[i].value, 1);
      xpj_cache_config cfg = {.path = db, .mode = XPJ_CACHE_MODE_RW,
                              .warn = cache_warn};
      xpj_cache *c = NULL;
      xpj_cache_stats st = {0};
      if (xpj_cache_open(&cfg, &c) != XPJ_OK ||
          xpj_cache_get_stats(c, &st) != XPJ_OK)
        _exit(2);
      xpj_cache_close(c);
      int bad = st.max_size != cases[i].limit ||
                cache_warnings != cases[i].warnings ||
                (cache_warnings &&
                 (!strstr(cache_warning, "XPJIT_CACHE_MAX_SIZE=") ||
                  !strstr(cache_warning, cases[i].limit ==
                                                 XPJ_CACHE_DEFAULT_MAX_SIZE
                                             ? "using 1G"
                                             : "under 1M")));
      if (bad)
        fprintf(stderr, "XPJIT_CACHE_MAX_SIZE=%s: limit %llu, %u warnings "
                "(%s)\n", cases[i].value, (unsigned long long)st.max_size,
                cache_warnings, cache_warning);
      _exit(bad);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      fail_msg("XPJIT_CACHE_MAX_SIZE=%s: child status %d", cases[i].value,
               status);
  }
}

static void test_bad_cache_mode_once(void **state) {
  (void)state;
  /* the default mode from XPJIT_CACHE: read by each context with a cache
   * file; said once */
  setenv("XPJIT_CACHE", "sometimes", 1);
  nwarned = 0;
  xpj_set_warning_handler(collect, NULL);
  char db[300];
  snprintf(db, sizeof db, "%s/mode.db", dir);
  run_k(db);
  run_k(db);
  xpj_set_warning_handler(NULL, NULL);
  unsetenv("XPJIT_CACHE");
  assert_int_equal(warnings_about("XPJIT_CACHE=sometimes"), 1);
}

/* ---- the log ---- */

static void test_log_file(void **state) {
  (void)state;
  char db[300];
  snprintf(db, sizeof db, "%s/log.db", dir);
  run_k(db); /* compiled */
  run_k(db); /* from the cache file */
  FILE *f = fopen(logpath, "r");
  assert_non_null(f);
  char line[2048];
  unsigned compiled = 0, cached = 0;
  char pid[32];
  snprintf(pid, sizeof pid, " xpjit[%ld] ", (long)getpid());
  while (fgets(line, sizeof line, f)) {
    /* 2026-11-29T02:33:40.217Z xpjit[PID] info: ... */
    assert_true(strlen(line) > 30 && line[4] == '-' && line[10] == 'T' &&
                line[23] == 'Z');
    assert_non_null(strstr(line, pid));
    if (strstr(line, "info: kernel k for cpu:0: compiled in ") &&
        strstr(line, "disk miss") && strstr(line, "daemon none") &&
        strstr(line, "[key "))
      compiled++;
    if (strstr(line, "info: kernel k for cpu:0: from the cache file in "))
      cached++;
  }
  fclose(f);
  /* the earlier tests compiled k with no cache file (twice) and with
   * one (once): three compiles, and the cache file's hits */
  assert_true(compiled >= 1);
  assert_true(cached >= 1);

  /* a daemon that cannot serve (a socket nobody listens on): the
   * fallback and its cause, and the compile's "daemon could not serve" */
  char sock[300];
  snprintf(sock, sizeof sock, "%s/dead.sock", dir);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  assert_true(strlen(sock) < sizeof a.sun_path);
  memcpy(a.sun_path, sock, strlen(sock));
  assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
  close(s); /* the file stays: a stale socket */
  run_k_daemon(NULL, sock);
  f = fopen(logpath, "r");
  assert_non_null(f);
  bool cause = false, said = false;
  while (fgets(line, sizeof line, f)) {
    cause = cause || (strstr(line, "info: kernel k: the daemon at ") &&
                      strstr(line, "could not serve: ") &&
                      strstr(line, "refused"));
    said = said || (strstr(line, "compiled in") &&
                    strstr(line, "daemon could not serve"));
  }
  fclose(f);
  assert_true(cause);
  assert_true(said);
  /* warnings go to the handler when there is one, else to the log */
  xpj_log_warning("a test warning");
  f = fopen(logpath, "r");
  assert_non_null(f);
  bool seen = false;
  while (fgets(line, sizeof line, f))
    seen = seen || strstr(line, " warning: a test warning\n");
  fclose(f);
  assert_true(seen);
}

/* A kernel asked by its alias whose hit file is gone is a miss, looked up
 * the whole way (here: found in the cache file), not a failure: one debug
 * line says so, and no error line (it was "error: kernel k for cpu:0:
 * failed after ... (compiled here): k: no alias", in every log of a
 * program whose hit file had been swept). */
static void test_alias_miss_log(void **state) {
  (void)state;
  char db[300], hits[320], path[400];
  snprintf(db, sizeof db, "%s/alias.db", dir);
  run_k(db); /* compiled: its row, hit file and alias */
  assert_int_equal(aliases_of(db), 1);
  snprintf(hits, sizeof hits, "%s.hits", db);
  DIR *d = opendir(hits);
  assert_non_null(d);
  struct dirent *e;
  unsigned gone = 0;
  while ((e = readdir(d)))
    if (strlen(e->d_name) == 64) { /* a hit file (an alias is "a" + 64) */
      assert_true(snprintf(path, sizeof path, "%s/%s", hits, e->d_name) <
                  (int)sizeof path);
      gone += unlink(path) == 0;
    }
  closedir(d);
  assert_int_equal(gone, 1);
  struct stat sb;
  assert_int_equal(stat(logpath, &sb), 0);
  run_k(db);
  FILE *f = fopen(logpath, "r");
  assert_non_null(f);
  assert_int_equal(fseek(f, (long)sb.st_size, SEEK_SET), 0);
  char line[2048];
  unsigned misses = 0, found = 0;
  while (fgets(line, sizeof line, f)) {
    if (strstr(line, " error: ") || strstr(line, "failed"))
      fail_msg("an alias's miss logged as a failure: %s", line);
    misses += strstr(line, " debug: kernel k for cpu:0: a miss by its alias "
                           "(the hit file it names is gone") != NULL;
    found += strstr(line, " info: kernel k for cpu:0: from the cache file "
                          "in ") != NULL;
  }
  fclose(f);
  assert_int_equal(misses, 1);
  assert_int_equal(found, 1);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/xpjit-test-env-XXXXXX");
  if (!mkdtemp(dir))
    return 1;
  snprintf(logpath, sizeof logpath, "%s/log", dir);
  setenv("XPJIT_LOG", "debug", 1);
  setenv("XPJIT_LOG_FILE", logpath, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table),
      cmocka_unit_test(test_parsers),
      cmocka_unit_test(test_unknown_names),
      cmocka_unit_test(test_small_cache_size),
      cmocka_unit_test(test_bad_values_once),
      cmocka_unit_test(test_bad_cache_mode_once),
      cmocka_unit_test(test_log_file),
      cmocka_unit_test(test_alias_miss_log),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    rc = rc ? rc : 1;
  return rc;
}
