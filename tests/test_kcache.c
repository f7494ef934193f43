/* test_kcache.c - the compile cache as the runtime uses it: what hits and
 * what misses (every key component; comments do not matter), the first
 * level and single flight, cached compile failures, recovery from a damaged
 * cache with the recompiled kernel really used, cache modes, and bundles
 * (loaded, ignored with a reason, from XPJIT_BUNDLE_PATH). Public API only,
 * plus sqlite3 to damage files the way the world does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "testutil.h"
#include "xpjit.h"

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char saxpy_src[] =
    "kernel saxpy<T>(a: T, x: global const T[], y: global T[]) range {\n"
    "    let i = global_id(0);\n"
    "    y[i] = a * x[i] + y[i];\n"
    "}\n";

/* the same kernel: other comments, layout and local names */
static const char saxpy_src_commented[] =
    "// y = a x + y, said differently\n"
    "kernel saxpy<T>(a: T, x: global const T[], y: global T[]) range\n"
    "{   /* one element per work-item */\n"
    "    let idx = global_id(0);   // the index\n"
    "    y[idx] = a * x[idx] + y[idx];\n"
    "}\n";

/* a different computation */
static const char saxpy_src_changed[] =
    "kernel saxpy<T>(a: T, x: global const T[], y: global T[]) range {\n"
    "    let i = global_id(0);\n"
    "    y[i] = a * x[i] - y[i];\n"
    "}\n";

static const char rank_src[] =
    "kernel scale<T>(a: T, x: global T[*]) range {\n"
    "    let i = global_id(0);\n"
    "    if i < size(x) { x[i] = a * x[i]; }\n"
    "}\n";

static char dir[256];
static char warnings[8192];

static void capture(void *ud, const char *msg) {
  (void)ud;
  size_t n = strlen(warnings);
  snprintf(warnings + n, sizeof warnings - n, "%s\n", msg);
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/xpjit-kcache-XXXXXX");
  if (!mkdtemp(dir))
    return -1;
  warnings[0] = 0;
  xpj_set_warning_handler(capture, NULL);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  xpj_set_warning_handler(NULL, NULL);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static char *path_in(const char *name) {
  static char buf[32][512];
  static int k;
  char *p = buf[k++ & 31];
  snprintf(p, 512, "%s/%s", dir, name);
  return p;
}

static xpj_context *mkctx(const char *db, xpj_cache_mode mode) {
  xpj_context_desc d = {.visible = "cpu", .cpu_threads = 2,
                        .cache_mode = mode, .cache_path = db,
                        .no_env_bundles = 1};
  xpj_context *ctx = NULL;
  if (xpj_context_create(&d, &ctx) != XPJ_OK)
    fail_msg("context: %s", xpj_last_error());
  return ctx;
}

static xpj_device *cpu_of(xpj_context *ctx) {
  xpj_device *dev = NULL;
  assert_int_equal(xpj_device_select(ctx, "cpu", &dev), XPJ_OK);
  return dev;
}

typedef struct got {
  xpj_status st;
  xpj_kernel_origin origin;
  double compile_ms;
} got;

/* Gets a kernel from a new program of src in ctx, then destroys the
 * program (the context keeps the loaded kernel). */
static got get(xpj_context *ctx, const char *src, const char *name,
               const char *dtypes, unsigned ndim,
               const xpj_compile_opts *o) {
  xpj_program *p = NULL;
  if (xpj_program_create(ctx, "t.xpk", src, strlen(src), NULL, &p) != XPJ_OK)
    fail_msg("program: %s", xpj_last_error());
  xpj_kernel *k = NULL;
  got g = {xpj_program_get_kernel(p, name, dtypes, ndim, cpu_of(ctx), o, &k),
           XPJ_ORIGIN_COMPILED, 0};
  if (g.st == XPJ_OK) {
    xpj_kernel_info ki;
    assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
    g.origin = ki.origin;
    g.compile_ms = ki.compile_millis;
  }
  xpj_program_destroy(p);
  return g;
}

static uint64_t compiles(xpj_context *ctx) {
  xpj_cache_counters c;
  assert_int_equal(xpj_context_cache_counters(ctx, &c), XPJ_OK);
  return c.compiles;
}

/* Runs saxpy (a = 2, f32) from src through ctx on 1000 elements and checks
 * y = 2x + y (or 2x - y when minus). */
static void saxpy_check(xpj_device *dev, xpj_kernel *k, bool minus);

static void run_saxpy(xpj_context *ctx, const char *src, bool minus,
                      xpj_kernel_origin want) {
  xpj_device *dev = cpu_of(ctx);
  xpj_program *p = NULL;
  assert_int_equal(xpj_program_create(ctx, "s.xpk", src, strlen(src), NULL,
                                      &p), XPJ_OK);
  xpj_kernel *k = NULL;
  if (xpj_program_get_kernel(p, "saxpy", "T=f32", 0, dev, NULL, &k) != XPJ_OK)
    fail_msg("saxpy: %s", xpj_last_error());
  xpj_kernel_info ki;
  assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
  assert_int_equal(ki.origin, want);
  saxpy_check(dev, k, minus);
  xpj_program_destroy(p);
}

/* y = 2 x + y (minus: 2 x - y) through k, checked. */
static void saxpy_check(xpj_device *dev, xpj_kernel *k, bool minus) {
  enum { N = 1000 };
  float *x, *y;
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * 4, 0, (void **)&x),
                   XPJ_OK);
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * 4, 0, (void **)&y),
                   XPJ_OK);
  for (int i = 0; i < N; i++) {
    x[i] = (float)i;
    y[i] = (float)(3 * i + 1);
  }
  xpj_queue *q = NULL;
  assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
  xpj_array ax = xpj_array_1d(x, XPJ_F32, N), ay = xpj_array_1d(y, XPJ_F32, N);
  xpj_arg args[] = {xpj_arg_f32(2.0f), xpj_arg_array(&ax),
                    xpj_arg_array(&ay)};
  xpj_range r = xpj_range_1d(N, 0);
  assert_int_equal(xpj_launch(q, k, &r, 3, args, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  for (int i = 0; i < N; i++) {
    float want_y = minus ? 2.0f * i - (3 * i + 1) : 2.0f * i + (3 * i + 1);
    if (y[i] != want_y)
      fail_msg("y[%d] = %g, expected %g", i, y[i], want_y);
  }
  xpj_queue_destroy(q);
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, y);
}

static void exec_sql(const char *db, const char *sql) {
  sqlite3 *h = NULL;
  assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
  char *err = NULL;
  if (sqlite3_exec(h, sql, NULL, NULL, &err) != SQLITE_OK)
    fail_msg("%s: %s", sql, err ? err : "?");
  sqlite3_close(h);
}

/* The hit files of the cache db (db.hits/): gone. */
static void remove_hit_files(const char *db) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s.hits'", db);
  assert_int_equal(system(cmd), 0);
}

/* ---- keys ---------------------------------------------------------------- */

static void test_key_components(void **state) {
  (void)state;
  const char *db = path_in("c.db");
  xpj_context *a = mkctx(db, XPJ_CACHE_MODE_RW);
  got g = get(a, saxpy_src, "saxpy", "T=f32", 0, NULL);
  assert_int_equal(g.st, XPJ_OK);
  assert_int_equal(g.origin, XPJ_ORIGIN_COMPILED);
  assert_true(g.compile_ms > 0);
  /* same context, new program: the first level */
  g = get(a, saxpy_src, "saxpy", "T=f32", 0, NULL);
  assert_int_equal(g.origin, XPJ_ORIGIN_MEMORY);
  assert_int_equal(compiles(a), 1);
  xpj_context_destroy(a);

  /* a new context: the second level, also with other comments */
  xpj_context *b = mkctx(db, XPJ_CACHE_MODE_RW);
  g = get(b, saxpy_src_commented, "saxpy", "T=f32", 0, NULL);
  assert_int_equal(g.st, XPJ_OK);
  assert_int_equal(g.origin, XPJ_ORIGIN_CACHE);
  assert_true(g.compile_ms > 0); /* what the compile cost, remembered */
  assert_int_equal(compiles(b), 0);
  /* each component changed alone: a miss */
  g = get(b, saxpy_src, "saxpy", "T=f64", 0, NULL);
  assert_int_equal(g.origin, XPJ_ORIGIN_COMPILED);
  g = get(b, saxpy_src_changed, "saxpy", "T=f32", 0, NULL);
  assert_int_equal(g.origin, XPJ_ORIGIN_COMPILED);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.opt_level = 3;
  g = get(b, saxpy_src, "saxpy", "T=f32", 0, &o);
  assert_int_equal(g.origin, XPJ_ORIGIN_COMPILED);
  xpj_compile_opts_default(&o);
  o.fast_math = 1;
  g = get(b, saxpy_src, "saxpy", "T=f32", 0, &o);
  assert_int_equal(g.origin, XPJ_ORIGIN_COMPILED);
  xpj_compile_opts_default(&o);
  o.fp_contract = 1;
  g = get(b, saxpy_src, "saxpy", "T=f32", 0, &o);
  assert_int_equal(g.origin, XPJ_ORIGIN_COMPILED);
  /* options that do not change the output (isolation) do not matter */
  xpj_compile_opts_default(&o);
  o.timeout_ms = 30000;
  g = get(b, saxpy_src, "saxpy", "T=f32", 0, &o);
  assert_int_equal(g.origin, XPJ_ORIGIN_MEMORY); /* loaded above */
  /* ndim */
  g = get(b, rank_src, "scale", "T=f32", 1, NULL);
  assert_int_equal(g.origin, XPJ_ORIGIN_COMPILED);
  g = get(b, rank_src, "scale", "T=f32", 2, NULL);
  assert_int_equal(g.origin, XPJ_ORIGIN_COMPILED);
  assert_int_equal(compiles(b), 7);
  xpj_context_destroy(b);

  /* targets (binaries without a device) */
  xpj_context *c = mkctx(db, XPJ_CACHE_MODE_RW);
  xpj_program *p = NULL;
  assert_int_equal(xpj_program_create(c, "t.xpk", saxpy_src,
                                      strlen(saxpy_src), NULL, &p), XPJ_OK);
  void *b1 = NULL, *b2 = NULL;
  size_t n1 = 0, n2 = 0;
  assert_int_equal(xpj_program_get_binary(p, "saxpy", "T=f32", 0,
                                          "ptx:sm_80", NULL, &b1, &n1),
                   XPJ_OK);
  assert_int_equal(compiles(c), 1);
  assert_int_equal(xpj_program_get_binary(p, "saxpy", "T=f32", 0,
                                          "ptx:sm_90", NULL, &b2, &n2),
                   XPJ_OK);
  assert_int_equal(compiles(c), 2);
  assert_non_null(strstr((char *)b1, ".target sm_80"));
  assert_non_null(strstr((char *)b2, ".target sm_90"));
  free(b1);
  free(b2);
  assert_int_equal(xpj_program_get_binary(p, "saxpy", "T=f32", 0,
                                          "spirv", NULL, NULL, NULL),
                   XPJ_OK);
  assert_int_equal(compiles(c), 3);
  assert_int_equal(xpj_program_get_binary(p, "saxpy", "T=f32", 0,
                                          "bogus:1", NULL, NULL, NULL),
                   XPJ_ERR_INVALID);
  xpj_program_destroy(p);
  xpj_context_destroy(c);

  /* and all of them hit in a later context */
  xpj_context *d = mkctx(db, XPJ_CACHE_MODE_RW);
  assert_int_equal(xpj_program_create(d, "t.xpk", saxpy_src_commented,
                                      strlen(saxpy_src_commented), NULL, &p),
                   XPJ_OK);
  assert_int_equal(xpj_program_get_binary(p, "saxpy", "T=f32", 0,
                                          "ptx:sm_90", NULL, &b1, &n1),
                   XPJ_OK);
  assert_int_equal(n1, n2);
  free(b1);
  xpj_program_destroy(p);
  assert_int_equal(get(d, rank_src, "scale", "T=f32", 2, NULL).origin,
                   XPJ_ORIGIN_CACHE);
  assert_int_equal(compiles(d), 0);
  xpj_context_destroy(d);
}

/* ---- the first level from the request as given ------------------------------ */

/* a tile sum whose local size the runtime chooses (it checks its choice
 * against the kernel's static local array: the kernel keeps the module) */
static const char tile_src[] =
    "kernel tile_sum(x: global const i64[], o: global i64[]) ndrange(1) {\n"
    "  local t: i64[64];\n"
    "  let lid = local_id(0);\n"
    "  t[lid] = x[global_id(0)];\n"
    "  barrier(local);\n"
    "  if lid == 0 {\n"
    "    let s: i64 = 0;\n"
    "    for (let j = 0; j < local_size(0); j += 1) { s += t[j]; }\n"
    "    o[group_id(0)] = s;\n"
    "  }\n"
    "}\n";

/* Launches tile_sum from k over 256 elements with the local size left to
 * the runtime and checks the sum of the group sums. */
static void run_tile(xpj_device *dev, xpj_kernel *k) {
  enum { N = 256 };
  int64_t *x, *o;
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * 8, 0, (void **)&x),
                   XPJ_OK);
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * 8, 0, (void **)&o),
                   XPJ_OK);
  for (int i = 0; i < N; i++) {
    x[i] = i + 1;
    o[i] = 0;
  }
  xpj_queue *q = NULL;
  assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
  xpj_array ax = xpj_array_1d(x, XPJ_I64, N), ao = xpj_array_1d(o, XPJ_I64, N);
  xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ao)};
  xpj_range r = xpj_range_1d(N, 0);
  if (xpj_launch(q, k, &r, 2, args, NULL) != XPJ_OK)
    fail_msg("tile_sum: %s", xpj_last_error());
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  int64_t sum = 0;
  for (int i = 0; i < N; i++)
    sum += o[i];
  assert_int_equal(sum, (int64_t)N * (N + 1) / 2);
  xpj_queue_destroy(q);
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, o);
}

static uint64_t l1_hits(xpj_context *ctx) {
  xpj_cache_counters c;
  assert_int_equal(xpj_context_cache_counters(ctx, &c), XPJ_OK);
  return c.l1_hits;
}

/* A second program of the same source finds the kernel the context has
 * loaded from the request as given, without specialising it again, and
 * what it finds is right: the same source under the same name only (a
 * different source with the same kernel name and dtypes is compiled and
 * runs its own code), the kernel usable after the program that built it
 * is gone, its module kept for the runtime's local size check and for
 * bounds checks, get_binary's bytes the same. */
static void test_quick_first_level(void **state) {
  (void)state;
  xpj_context *ctx = mkctx(path_in("q.db"), XPJ_CACHE_MODE_OFF);
  xpj_device *dev = cpu_of(ctx);
  run_saxpy(ctx, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  uint64_t hits = l1_hits(ctx);
  run_saxpy(ctx, saxpy_src, false, XPJ_ORIGIN_MEMORY);
  assert_int_equal(l1_hits(ctx), hits + 1);
  /* the same kernel name, dtypes and program name, another body */
  run_saxpy(ctx, saxpy_src_changed, true, XPJ_ORIGIN_COMPILED);
  run_saxpy(ctx, saxpy_src_changed, true, XPJ_ORIGIN_MEMORY);
  run_saxpy(ctx, saxpy_src, false, XPJ_ORIGIN_MEMORY);
  assert_int_equal(compiles(ctx), 2);
  /* the same request spelled otherwise (positional dtypes), and a bad one
   * after a good one: parsed, found in memory, or refused as before */
  got g = get(ctx, saxpy_src, "saxpy", "f32", 0, NULL);
  assert_int_equal(g.st, XPJ_OK);
  assert_int_equal(g.origin, XPJ_ORIGIN_MEMORY);
  assert_int_equal(get(ctx, saxpy_src, "saxpy", "T=f33", 0, NULL).st,
                   XPJ_ERR_SPECIALIZE);
  /* what the caller gave is quoted with its control characters escaped:
   * no terminal escape, no character that vanishes when printed */
  assert_int_equal(get(ctx, saxpy_src, "saxpy", "T=\x1b[31m\x01", 0, NULL).st,
                   XPJ_ERR_SPECIALIZE);
  {
    const char *m = xpj_last_error();
    for (const char *c = m; *c; c++)
      if ((unsigned char)*c < 0x20 && *c != '\n' && *c != '\t')
        fail_msg("a control character (0x%02x) in: %s", (unsigned)*c, m);
    assert_non_null(strstr(m, "\\x1b[31m\\x01"));
  }
  assert_int_equal(get(ctx, saxpy_src, "saxpy", "f32", 0, NULL).origin,
                   XPJ_ORIGIN_MEMORY);
  assert_int_equal(compiles(ctx), 2);

  /* the first program goes; the second's kernel keeps working */
  for (int checks = 0; checks < 2; checks++) {
    xpj_compile_opts o;
    xpj_compile_opts_default(&o);
    o.checks = checks ? XPJ_CHECK_BOUNDS : 0;
    xpj_program *p1 = NULL, *p2 = NULL;
    assert_int_equal(xpj_program_create(ctx, "tile.xpk", tile_src,
                                        strlen(tile_src), NULL, &p1), XPJ_OK);
    assert_int_equal(xpj_program_create(ctx, "tile.xpk", tile_src,
                                        strlen(tile_src), NULL, &p2), XPJ_OK);
    xpj_kernel *k1 = NULL, *k2 = NULL;
    assert_int_equal(xpj_program_get_kernel(p1, "tile_sum", "", 0, dev, &o,
                                            &k1), XPJ_OK);
    assert_int_equal(xpj_program_get_kernel(p2, "tile_sum", "", 0, dev, &o,
                                            &k2), XPJ_OK);
    xpj_kernel_info ki;
    assert_int_equal(xpj_kernel_get_info(k2, &ki), XPJ_OK);
    assert_int_equal(ki.origin, XPJ_ORIGIN_MEMORY);
    assert_int_equal(ki.nargs, 2);
    xpj_program_destroy(p1);
    run_tile(dev, k2);
    xpj_program_destroy(p2);
  }
  assert_int_equal(compiles(ctx), 4);

  /* binaries: the second program's get_binary is the first's bytes */
  void *b1 = NULL, *b2 = NULL;
  size_t n1 = 0, n2 = 0;
  for (int i = 0; i < 2; i++) {
    xpj_program *p = NULL;
    assert_int_equal(xpj_program_create(ctx, "t.xpk", saxpy_src,
                                        strlen(saxpy_src), NULL, &p), XPJ_OK);
    hits = l1_hits(ctx);
    assert_int_equal(xpj_program_get_binary(p, "saxpy", "T=f32", 0,
                                            "ptx:sm_80", NULL,
                                            i ? &b2 : &b1, i ? &n2 : &n1),
                     XPJ_OK);
    assert_int_equal(l1_hits(ctx), hits + (unsigned)i);
    xpj_program_destroy(p);
  }
  assert_int_equal(compiles(ctx), 5);
  assert_int_equal(n1, n2);
  assert_memory_equal(b1, b2, n1);
  free(b2);
  /* the size alone (data NULL): the binary's, not 0 */
  {
    xpj_program *ps = NULL;
    size_t ns = 0;
    assert_int_equal(xpj_program_create(ctx, "t.xpk", saxpy_src,
                                        strlen(saxpy_src), NULL, &ps),
                     XPJ_OK);
    assert_int_equal(xpj_program_get_binary(ps, "saxpy", "T=f32", 0,
                                            "ptx:sm_80", NULL, NULL, &ns),
                     XPJ_OK);
    assert_int_equal(ns, n1);
    xpj_program_destroy(ps);
  }
  /* another body under the same names: its own binary */
  xpj_program *p = NULL;
  assert_int_equal(xpj_program_create(ctx, "t.xpk", saxpy_src_changed,
                                      strlen(saxpy_src_changed), NULL, &p),
                   XPJ_OK);
  assert_int_equal(xpj_program_get_binary(p, "saxpy", "T=f32", 0,
                                          "ptx:sm_80", NULL, &b2, &n2),
                   XPJ_OK);
  assert_int_equal(compiles(ctx), 6);
  assert_true(n1 != n2 || memcmp(b1, b2, n1) != 0);
  free(b1);
  free(b2);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
}

/* ---- the first level: single flight ----------------------------------------- */

/* A thread's get of saxpy with dtypes in program p, after the barrier go
 * (when not NULL) lets every thread of the test go at once. */
typedef struct flight {
  xpj_program *p;
  xpj_device *dev;
  const char *dtypes;
  pthread_barrier_t *go;
  xpj_kernel *k;
  xpj_status st;
} flight;

static void *fly(void *arg) {
  flight *f = arg;
  if (f->go)
    pthread_barrier_wait(f->go);
  f->st = xpj_program_get_kernel(f->p, "saxpy", f->dtypes, 0, f->dev, NULL,
                                 &f->k);
  return NULL;
}

static void test_single_flight(void **state) {
  (void)state;
#if defined(__SANITIZE_ADDRESS__)
  /* GCC 12's libasan and fork() from a threaded process (docs/testing.md):
   * the concurrent part runs in the plain build only. */
  skip();
#else
  xpj_context *ctx = mkctx(path_in("c.db"), XPJ_CACHE_MODE_RW);
  enum { T = 8 };
  xpj_program *progs[T];
  flight f[T];
  pthread_t th[T];
  for (int i = 0; i < T; i++) {
    /* separate programs: they meet in the context's first level */
    assert_int_equal(xpj_program_create(ctx, "t.xpk", saxpy_src,
                                        strlen(saxpy_src), NULL, &progs[i]),
                     XPJ_OK);
    f[i] = (flight){progs[i], cpu_of(ctx), "T=f64", NULL, NULL,
                    XPJ_ERR_INVALID};
  }
  for (int i = 0; i < T; i++)
    assert_int_equal(pthread_create(&th[i], NULL, fly, &f[i]), 0);
  for (int i = 0; i < T; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < T; i++)
    assert_int_equal(f[i].st, XPJ_OK);
  assert_int_equal(compiles(ctx), 1);
  xpj_cache_counters c;
  xpj_context_cache_counters(ctx, &c);
  assert_int_equal(c.l1_hits, T - 1);
  for (int i = 0; i < T; i++)
    xpj_program_destroy(progs[i]);
  xpj_context_destroy(ctx);
#endif
}

/* ---- cached failures ----------------------------------------------------------- */

static void test_failure_cached(void **state) {
  (void)state;
  const char *db = path_in("c.db");
  /* the compiler worker crashes on this kernel (test hook) */
  setenv("XPJIT_FAULT_INJECT", "crash", 1);
  xpj_context *a = mkctx(db, XPJ_CACHE_MODE_RW);
  got g = get(a, saxpy_src, "saxpy", "T=f32", 0, NULL);
  assert_int_equal(g.st, XPJ_ERR_COMPILE);
  assert_non_null(strstr(xpj_last_error(), "signal"));
  /* the same request again: remembered, not compiled again */
  g = get(a, saxpy_src, "saxpy", "T=f32", 0, NULL);
  assert_int_equal(g.st, XPJ_ERR_COMPILE);
  assert_int_equal(compiles(a), 1);
  xpj_context_destroy(a);
  unsetenv("XPJIT_FAULT_INJECT");

  /* a new process would get the same failure from the disk, with its
   * diagnostics, without compiling: the inputs did not change */
  xpj_context *b = mkctx(db, XPJ_CACHE_MODE_RW);
  g = get(b, saxpy_src, "saxpy", "T=f32", 0, NULL);
  assert_int_equal(g.st, XPJ_ERR_COMPILE);
  assert_non_null(strstr(xpj_last_error(), "cached result"));
  xpj_cache_counters c;
  xpj_context_cache_counters(b, &c);
  assert_int_equal(c.compiles, 0);
  assert_int_equal(c.failure_hits, 1);
  /* changed inputs (options): compiled, and it works */
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.opt_level = 1;
  g = get(b, saxpy_src, "saxpy", "T=f32", 0, &o);
  assert_int_equal(g.st, XPJ_OK);
  assert_int_equal(g.origin, XPJ_ORIGIN_COMPILED);
  xpj_context_destroy(b);

  /* a failure answered from the cache keeps the status the compile gave:
   * private arrays past the limit are XPJ_ERR_UNSUPPORTED, in the context
   * that compiled, from the cache file in a new one (XPJ_ERR_COMPILE
   * before: the row kept only that it failed), and from that context's
   * first level */
  static const char big_src[] =
      "kernel big(y: global f64[]) range {\n"
      "    let a: f64[65536]; let b: f64[65536]; let c: f64[65536];\n"
      "    let d: f64[65536]; let e: f64[65536]; let f: f64[65536];\n"
      "    let g: f64[65536]; let h: f64[65536]; let k: f64[65536];\n"
      "    let i = global_id(0);\n"
      "    a[i] = 1.0; b[i] = 1.0; c[i] = 1.0; d[i] = 1.0; e[i] = 1.0;\n"
      "    f[i] = 1.0; g[i] = 1.0; h[i] = 1.0; k[i] = 1.0;\n"
      "    y[i] = a[0] + b[0] + c[0] + d[0] + e[0] + f[0] + g[0] + h[0] + k[0];\n"
      "}\n";
  for (int round = 0; round < 2; round++) {
    xpj_context *u = mkctx(db, XPJ_CACHE_MODE_RW);
    for (int again = 0; again < 2; again++) {
      g = get(u, big_src, "big", "", 0, NULL);
      assert_int_equal(g.st, XPJ_ERR_UNSUPPORTED);
      assert_non_null(strstr(xpj_last_error(), "private array"));
    }
    assert_int_equal(compiles(u), round == 0 ? 1 : 0);
    xpj_context_destroy(u);
  }

  /* a timed-out compile is remembered for XPJIT_FAILURE_TTL, so that
   * every run does not pay for it again (issue 15), then retried */
  setenv("XPJIT_FAULT_INJECT", "hang", 1);
  setenv("XPJIT_FAILURE_TTL", "2s", 1);
  xpj_context *h = mkctx(db, XPJ_CACHE_MODE_RW);
  xpj_compile_opts_default(&o);
  o.timeout_ms = 300;
  g = get(h, saxpy_src, "saxpy", "T=f64", 0, &o);
  assert_int_equal(g.st, XPJ_ERR_COMPILE);
  assert_non_null(strstr(xpj_last_error(), "timed out"));
  assert_non_null(strstr(xpj_last_error(), "not tried again for 2 s"));
  unsetenv("XPJIT_FAULT_INJECT");
  g = get(h, saxpy_src, "saxpy", "T=f64", 0, &o);
  assert_int_equal(g.st, XPJ_ERR_COMPILE);
  assert_non_null(strstr(xpj_last_error(), "timed out"));
  assert_non_null(strstr(xpj_last_error(), "cached result"));
  assert_int_equal(compiles(h), 1);
  /* another process sees it too */
  xpj_context *h2 = mkctx(db, XPJ_CACHE_MODE_RW);
  g = get(h2, saxpy_src, "saxpy", "T=f64", 0, &o);
  assert_int_equal(g.st, XPJ_ERR_COMPILE);
  assert_int_equal(compiles(h2), 0);
  xpj_context_destroy(h2);
  /* once it has expired, it is compiled again */
  usleep(2100 * 1000);
  g = get(h, saxpy_src, "saxpy", "T=f64", 0, &o);
  assert_int_equal(g.st, XPJ_OK);
  assert_int_equal(g.origin, XPJ_ORIGIN_COMPILED);
  assert_int_equal(compiles(h), 2);
  xpj_context_destroy(h);

  /* it answers only requests that allow no more than it had: one with a
   * longer limit compiles (red team N4a) */
  setenv("XPJIT_FAULT_INJECT", "hang", 1);
  setenv("XPJIT_FAILURE_TTL", "10m", 1);
  h = mkctx(db, XPJ_CACHE_MODE_RW);
  g = get(h, saxpy_src, "saxpy", "T=u32", 0, &o);
  assert_int_equal(g.st, XPJ_ERR_COMPILE);
  unsetenv("XPJIT_FAULT_INJECT");
  o.timeout_ms = 200; /* less than it had: the remembered answer */
  g = get(h, saxpy_src, "saxpy", "T=u32", 0, &o);
  assert_int_equal(g.st, XPJ_ERR_COMPILE);
  assert_int_equal(compiles(h), 1);
  o.timeout_ms = 60000;
  g = get(h, saxpy_src, "saxpy", "T=u32", 0, &o);
  assert_int_equal(g.st, XPJ_OK);
  assert_int_equal(g.origin, XPJ_ORIGIN_COMPILED);
  assert_int_equal(compiles(h), 2);
  xpj_context_destroy(h);
  o.timeout_ms = 300;
#if !defined(__SANITIZE_ADDRESS__) /* ASan dies before LLVM's handler */
  /* the same for memory: 1 MiB is remembered, the default compiles. A
   * kernel of 400 statements: saxpy itself compiles within 1 MiB in a
   * worker that inherits its target machine (compile_llvm.c) */
  enum { HUNGRY = 400 };
  size_t hcap = 200 + 40 * HUNGRY, hk = 0;
  char *hungry = malloc(hcap);
  assert_non_null(hungry);
  hk += (size_t)snprintf(hungry + hk, hcap - hk,
                         "kernel saxpy<T>(a: T, x: global const T[], "
                         "y: global T[]) range {\n"
                         "    let i = global_id(0) * %d;\n", HUNGRY);
  for (int j = 0; j < HUNGRY; j++)
    hk += (size_t)snprintf(hungry + hk, hcap - hk,
                           "    y[i + %d] = a * x[i + %d];\n", j, j);
  snprintf(hungry + hk, hcap - hk, "}\n");
  h = mkctx(db, XPJ_CACHE_MODE_RW);
  xpj_compile_opts om;
  xpj_compile_opts_default(&om);
  om.memory_limit_mb = 1;
  g = get(h, hungry, "saxpy", "T=i64", 0, &om);
  assert_int_equal(g.st, XPJ_ERR_NOMEM);
  g = get(h, hungry, "saxpy", "T=i64", 0, &om);
  assert_int_equal(g.st, XPJ_ERR_NOMEM);
  assert_int_equal(compiles(h), 1);
  g = get(h, hungry, "saxpy", "T=i64", 0, NULL);
  assert_int_equal(g.st, XPJ_OK);
  assert_int_equal(compiles(h), 2);
  xpj_context_destroy(h);
  free(hungry);
#endif

  /* XPJIT_FAILURE_TTL=0: not remembered at all */
  setenv("XPJIT_FAULT_INJECT", "hang", 1);
  setenv("XPJIT_FAILURE_TTL", "0", 1);
  h = mkctx(db, XPJ_CACHE_MODE_RW);
  g = get(h, saxpy_src, "saxpy", "T=i32", 0, &o);
  assert_int_equal(g.st, XPJ_ERR_COMPILE);
  unsetenv("XPJIT_FAULT_INJECT");
  g = get(h, saxpy_src, "saxpy", "T=i32", 0, &o);
  assert_int_equal(g.st, XPJ_OK);
  assert_int_equal(compiles(h), 2);
  xpj_context_destroy(h);
  unsetenv("XPJIT_FAILURE_TTL");
}

/* ---- damage: the recompiled kernel is the one used -------------------------- */

typedef struct digests {
  char d[16][65];
  int n;
} digests;

static int collect(void *ud, const xpj_cache_entry *e) {
  digests *ds = ud;
  if (!e->failed && strncmp(e->target, "native:", 7) && ds->n < 16)
    memcpy(ds->d[ds->n++], e->digest, 65);
  return 0;
}

/* Rewrites the portable rows of db through the cache's own API (intact,
 * checked and signed rows): each one's value starts as the row's, and
 * edit changes what it wants. n: how many rows there must be (0: at
 * least one). */
typedef void (*row_edit)(const xpj_cache_entry *e, xpj_cache_value *v,
                         const void *ud);

static void rewrite_rows(const char *db, int n, row_edit edit,
                         const void *ud) {
  xpj_cache_config cfg = {.path = db, .mode = XPJ_CACHE_MODE_RW};
  xpj_cache *c = NULL;
  assert_int_equal(xpj_cache_open(&cfg, &c), XPJ_OK);
  digests ds = {.n = 0};
  assert_int_equal(xpj_cache_list(c, collect, &ds), XPJ_OK);
  if (n)
    assert_int_equal(ds.n, n);
  assert_true(ds.n > 0);
  for (int i = 0; i < ds.n; i++) {
    xpj_cache_entry e;
    assert_int_equal(xpj_cache_find(c, ds.d[i], &e), XPJ_OK);
    xpj_cache_key k = {e.code,   e.kernel,  e.dtypes, e.ndim,
                       e.target, e.options, e.versions};
    xpj_cache_value v = {0, e.data, e.size, e.entry, "", e.local_bytes,
                         e.scratch_bytes, 1.0, 0};
    edit(&e, &v, ud);
    assert_int_equal(xpj_cache_put(c, &k, &v), XPJ_OK);
    xpj_cache_entry_clear(&e);
  }
  xpj_cache_close(c);
}

/* The object built from C source ud (its entry point named like the
 * stored one: %s in it) instead of the row's binary. */
static void object_of(const xpj_cache_entry *e, xpj_cache_value *v,
                      const void *ud) {
  const char *cfile = path_in("planted.c"), *ofile = path_in("planted.o");
  FILE *f = fopen(cfile, "w");
  assert_non_null(f);
  fprintf(f, (const char *)ud, e->entry);
  fclose(f);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "cc -c -O1 -fPIC -o '%s' '%s'", ofile, cfile);
  assert_int_equal(system(cmd), 0);
  f = fopen(ofile, "rb");
  assert_non_null(f);
  static uint8_t obj[1 << 16];
  size_t n = fread(obj, 1, sizeof obj, f);
  fclose(f);
  assert_true(n > 0 && n < sizeof obj);
  v->data = obj;
  v->size = n;
}

/* Replaces the portable entry of kernel in db by the object built from C
 * source c_src: an intact, signed row holding foreign code. */
static void plant_object(const char *db, const char *c_src) {
  rewrite_rows(db, 1, object_of, c_src);
}

/* issue 15: the CPU loader resolved every symbol of the process, so an
 * object that reached it could call system(). It links libm and mem*
 * only: the planted object is refused, dropped, the kernel compiled, and
 * the command never runs. */
static void test_planted_object_cannot_call_out(void **state) {
  (void)state;
  const char *db = path_in("c.db");
  xpj_context *a = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(a, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  xpj_context_destroy(a);
  char marker[600], src[2048];
  snprintf(marker, sizeof marker, "%s/pwned", dir);
  snprintf(src, sizeof src,
           "#include <stdlib.h>\n"
           "void %%s(void *const *a, const long *l, void *m, void *s,\n"
           "        long b, long e) { system(\"touch %s\"); }\n",
           marker);
  plant_object(db, src);
  warnings[0] = 0;
  a = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(a, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  xpj_context_destroy(a);
  assert_int_not_equal(access(marker, F_OK), 0);
  if (!strstr(warnings, "refused the binary of saxpy") ||
      !strstr(warnings, "system"))
    fail_msg("warnings: %s", warnings);
  /* the same for a libc function that is not in libm */
  snprintf(src, sizeof src,
           "#include <unistd.h>\n"
           "void %%s(void *const *a, const long *l, void *m, void *s,\n"
           "        long b, long e) { unlink(\"%s\"); }\n",
           db);
  plant_object(db, src);
  a = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(a, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  xpj_context_destroy(a);
  assert_int_equal(access(db, F_OK), 0);
  /* libm, but not its floating-point environment, which is the whole
   * process's (red team N3) */
  snprintf(src, sizeof src,
           "#define _GNU_SOURCE\n#include <fenv.h>\n"
           "void %%s(void *const *a, const long *l, void *m, void *s,\n"
           "        long b, long e) { feenableexcept(FE_ALL_EXCEPT); }\n");
  plant_object(db, src);
  warnings[0] = 0;
  a = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(a, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  xpj_context_destroy(a);
  if (!strstr(warnings, "feenableexcept"))
    fail_msg("warnings: %s", warnings);
}

static void junk_of(const xpj_cache_entry *e, xpj_cache_value *v,
                    const void *ud) {
  (void)e;
  (void)ud;
  static const uint8_t junk[64] = "this is not an object file, a module or PTX";
  v->data = junk;
  v->size = sizeof junk;
}

/* Replaces every portable entry of db (successful ones) with bytes no
 * device takes: intact rows, checked and signed, whose binary is garbage
 * (as from a buggy writer). */
static void poison(const char *db) { rewrite_rows(db, 0, junk_of, NULL); }

static void entry_memset(const xpj_cache_entry *e, xpj_cache_value *v,
                         const void *ud) {
  (void)e;
  (void)ud;
  v->entry = "memset";
}

static void scratch_2_62(const xpj_cache_entry *e, xpj_cache_value *v,
                         const void *ud) {
  (void)e;
  (void)ud;
  v->scratch_bytes = (uint64_t)1 << 62;
}

/* issue 15: a binary the device refuses was kept, and every later run
 * failed with the same error. Now it is dropped where it came from (the
 * cache file; a read-only bundle is bypassed) and the kernel compiled. */
static void test_refused_binary_replaced(void **state) {
  (void)state;
  const char *db = path_in("c.db");
  xpj_context *a = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(a, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  xpj_context_destroy(a);
  poison(db);
  warnings[0] = 0;
  a = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(a, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  assert_int_equal(compiles(a), 1);
  xpj_context_destroy(a);
  assert_non_null(strstr(warnings, "refused the binary of saxpy"));
  assert_non_null(strstr(warnings, "dropped it"));
  /* the next process hits the good binary */
  a = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(a, saxpy_src, false, XPJ_ORIGIN_CACHE);
  xpj_context_destroy(a);

  /* a read-only cache cannot drop it, and says so (red team N6) */
  poison(db);
  warnings[0] = 0;
  a = mkctx(db, XPJ_CACHE_MODE_RO);
  run_saxpy(a, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  xpj_context_destroy(a);
  if (!strstr(warnings, "left it in place (the cache is read-only)") ||
      strstr(warnings, "dropped it"))
    fail_msg("warnings: %s", warnings);
  a = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(a, saxpy_src, false, XPJ_ORIGIN_COMPILED); /* drops it now */
  xpj_context_destroy(a);

  /* a row whose entry point is not the kernel's reserved name, with a
   * real object: the loader would find "memset" in libc (red team N3) */
  rewrite_rows(db, 1, entry_memset, NULL);
  warnings[0] = 0;
  a = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(a, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  xpj_context_destroy(a);
  if (!strstr(warnings, "entry point is 'memset', not __xpj_k_saxpy") ||
      !strstr(warnings, "dropped it"))
    fail_msg("warnings: %s", warnings);

  /* a row claiming 2^62 bytes of scratch per work-item, which every
   * launch would refuse: refused when placed, and compiled here (it was
   * taken, and each launch failed: an adversarial review) */
  rewrite_rows(db, 1, scratch_2_62, NULL);
  warnings[0] = 0;
  a = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(a, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  xpj_context_destroy(a);
  if (!strstr(warnings, "bytes of scratch per work-item") ||
      !strstr(warnings, "dropped it"))
    fail_msg("warnings: %s", warnings);

  /* a bundle whose entry the device refuses: compiled and cached here,
   * and from then on the cache (looked in first) serves it */
  const char *bdb = path_in("b.db"), *bundle = path_in("bad.xpb");
  a = mkctx(bdb, XPJ_CACHE_MODE_RW);
  run_saxpy(a, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  xpj_context_destroy(a);
  poison(bdb);
  a = mkctx(bdb, XPJ_CACHE_MODE_RW);
  uint64_t n = 0;
  assert_int_equal(xpj_cache_export(xpj_context_cache(a), bundle, &n), XPJ_OK);
  assert_int_equal(n, 1);
  xpj_context_destroy(a);
  const char *fresh = path_in("fresh.db");
  warnings[0] = 0;
  for (int run = 0; run < 2; run++) {
    xpj_context *c = mkctx(fresh, XPJ_CACHE_MODE_RW);
    assert_int_equal(xpj_context_add_bundle(c, bundle), XPJ_OK);
    run_saxpy(c, saxpy_src, false,
              run == 0 ? XPJ_ORIGIN_COMPILED : XPJ_ORIGIN_CACHE);
    xpj_context_destroy(c);
  }
  assert_non_null(strstr(warnings, "bundle"));
  assert_non_null(strstr(warnings, "refused the binary of saxpy"));

}

static void test_corrupt_row_recompiled(void **state) {
  (void)state;
  const char *db = path_in("c.db");
  xpj_context *a = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(a, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  xpj_context_destroy(a);
  /* flip bytes in the middle of the stored object */
  exec_sql(db, "UPDATE entries SET data = substr(data, 1, 200) || "
               "zeroblob(16) || substr(data, 217)");
  /* its hit file (docs/cache.md, "Hit files") is an intact, signed copy:
   * served, the row not read */
  warnings[0] = 0;
  xpj_context *h = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(h, saxpy_src, false, XPJ_ORIGIN_CACHE);
  assert_int_equal(compiles(h), 0);
  assert_string_equal(warnings, "");
  xpj_context_destroy(h);
  remove_hit_files(db);
  xpj_context *b = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(b, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  assert_non_null(strstr(warnings, "checksum"));
  assert_int_equal(compiles(b), 1);
  xpj_context_destroy(b);
  /* the recompiled entry replaced it */
  xpj_context *c = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(c, saxpy_src, false, XPJ_ORIGIN_CACHE);
  xpj_context_destroy(c);
}

/* A warning handler that asks for the very kernel whose lookup warned
 * (a damaged row): it waited for the first level's entry that its own
 * thread was building (red team N2). Warnings are now delivered once the
 * entry is settled. */
static xpj_program *reenter_prog;
static xpj_device *reenter_dev;
static int reenter_depth, reentered_ok;
static void reenter(void *ud, const char *msg) {
  capture(ud, msg);
  if (reenter_depth++ == 0) {
    xpj_kernel *k = NULL;
    reentered_ok += xpj_program_get_kernel(reenter_prog, "saxpy", "T=f32", 0,
                                           reenter_dev, NULL, &k) == XPJ_OK;
  }
  reenter_depth--;
}

static void on_alarm(int sig) {
  (void)sig;
  static const char m[] = "test_kcache: deadlocked\n";
  ssize_t r = write(2, m, sizeof m - 1);
  (void)r;
  _exit(1);
}

static void test_handler_reenters_lookup(void **state) {
  (void)state;
  const char *db = path_in("c.db");
  xpj_context *a = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(a, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  xpj_context_destroy(a);
  exec_sql(db, "UPDATE entries SET data = substr(data, 1, 200) || "
               "zeroblob(16) || substr(data, 217)");
  remove_hit_files(db); /* the row is what is read */
  warnings[0] = 0;
  reentered_ok = 0;
  signal(SIGALRM, on_alarm);
  alarm(60);
  xpj_context *b = mkctx(db, XPJ_CACHE_MODE_RW);
  reenter_dev = cpu_of(b);
  assert_int_equal(xpj_program_create(b, "s.xpk", saxpy_src,
                                      strlen(saxpy_src), NULL, &reenter_prog),
                   XPJ_OK);
  xpj_set_warning_handler(reenter, NULL);
  xpj_kernel *k = NULL;
  assert_int_equal(xpj_program_get_kernel(reenter_prog, "saxpy", "T=f32", 0,
                                          reenter_dev, NULL, &k),
                   XPJ_OK);
  alarm(0);
  xpj_set_warning_handler(capture, NULL);
  assert_non_null(strstr(warnings, "checksum"));
  assert_int_equal(reentered_ok, 1);
  xpj_kernel *k2 = NULL;
  assert_int_equal(xpj_program_get_kernel(reenter_prog, "saxpy", "T=f32", 0,
                                          reenter_dev, NULL, &k2),
                   XPJ_OK);
  assert_ptr_equal(k, k2);
  xpj_program_destroy(reenter_prog);
  xpj_context_destroy(b);
}

static void test_corrupt_file_recovered(void **state) {
  (void)state;
  const char *db = path_in("c.db");
  xpj_context *a = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(a, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  xpj_context_destroy(a);
  /* garbage over the whole file */
  FILE *f = fopen(db, "wb");
  assert_non_null(f);
  for (int i = 0; i < 65536; i++)
    fputc((i * 7919) & 0xff, f);
  fclose(f);
  char side[600];
  snprintf(side, sizeof side, "%s-wal", db);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", db);
  unlink(side);
  warnings[0] = 0;
  xpj_context *b = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(b, saxpy_src_changed, true, XPJ_ORIGIN_COMPILED);
  assert_non_null(strstr(warnings, "moved it to"));
  xpj_context_destroy(b);
  struct stat sb;
  snprintf(side, sizeof side, "%s.corrupt", db);
  assert_int_equal(stat(side, &sb), 0);
  xpj_context *c = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(c, saxpy_src_changed, true, XPJ_ORIGIN_CACHE);
  xpj_context_destroy(c);
}

/* ---- modes ------------------------------------------------------------------- */

static void test_modes(void **state) {
  (void)state;
  const char *db = path_in("c.db");
  for (int i = 0; i < 2; i++) { /* off: nothing remembered across contexts */
    xpj_context *c = mkctx(db, XPJ_CACHE_MODE_OFF);
    assert_int_equal(get(c, saxpy_src, "saxpy", "T=f32", 0, NULL).origin,
                     XPJ_ORIGIN_COMPILED);
    xpj_context_destroy(c);
  }
  struct stat sb;
  assert_int_not_equal(stat(db, &sb), 0); /* and no file was made */
  /* read-only: reads, never writes */
  xpj_context *w = mkctx(db, XPJ_CACHE_MODE_RW);
  get(w, saxpy_src, "saxpy", "T=f32", 0, NULL);
  xpj_context_destroy(w);
  for (int i = 0; i < 2; i++) {
    xpj_context *r = mkctx(db, XPJ_CACHE_MODE_RO);
    assert_int_equal(get(r, saxpy_src, "saxpy", "T=f32", 0, NULL).origin,
                     XPJ_ORIGIN_CACHE);
    assert_int_equal(get(r, saxpy_src, "saxpy", "T=i32", 0, NULL).origin,
                     XPJ_ORIGIN_COMPILED);
    xpj_context_destroy(r);
  }
  /* a place that cannot be written: a warning, and kernels still work */
  warnings[0] = 0;
  xpj_context *n = mkctx("/proc/xpjit-no-such-dir/c.db", XPJ_CACHE_MODE_RW);
  run_saxpy(n, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  assert_non_null(strstr(warnings, "without caching"));
  assert_int_equal(xpj_cache_mode_of(xpj_context_cache(n)),
                   XPJ_CACHE_MODE_OFF);
  xpj_context_destroy(n);
}

/* ---- bundles ----------------------------------------------------------------- */

static void make_bundle(const char *bundle, const char *target) {
  xpj_context *a = mkctx(path_in("build.db"), XPJ_CACHE_MODE_RW);
  xpj_program *p = NULL;
  assert_int_equal(xpj_program_create(a, "t.xpk", saxpy_src,
                                      strlen(saxpy_src), NULL, &p), XPJ_OK);
  assert_int_equal(xpj_program_get_binary(p, "saxpy", "T=f32", 0, target,
                                          NULL, NULL, NULL), XPJ_OK);
  xpj_program_destroy(p);
  uint64_t n = 0;
  assert_int_equal(xpj_cache_export(xpj_context_cache(a), bundle, &n),
                   XPJ_OK);
  assert_int_equal(n, 1);
  xpj_context_destroy(a);
  unlink(path_in("build.db"));
}

static void test_bundles(void **state) {
  (void)state;
  const char *cpu_b = path_in("cpu.xpb");
  make_bundle(cpu_b, "cpu");
  /* loaded: used before compiling */
  xpj_context *c = mkctx(path_in("fresh.db"), XPJ_CACHE_MODE_RW);
  assert_int_equal(xpj_context_add_bundle(c, cpu_b), XPJ_OK);
  run_saxpy(c, saxpy_src_commented, false, XPJ_ORIGIN_BUNDLE);
  xpj_cache_counters k;
  xpj_context_cache_counters(c, &k);
  assert_int_equal(k.compiles, 0);
  assert_int_equal(k.bundle_hits, 1);
  /* the cache file answers before a bundle, also when its hit file is
   * over its hour (a review found the first look at the tiers after it,
   * before it opens, asking bundles too) */
  const char *own = path_in("own.db");
  xpj_context *o = mkctx(own, XPJ_CACHE_MODE_RW);
  run_saxpy(o, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  xpj_context_destroy(o);
  char aged[1200];
  snprintf(aged, sizeof aged, "touch -h -d '3 hours ago' '%s.hits'/*", own);
  assert_int_equal(system(aged), 0);
  o = mkctx(own, XPJ_CACHE_MODE_RW);
  assert_int_equal(xpj_context_add_bundle(o, cpu_b), XPJ_OK);
  run_saxpy(o, saxpy_src, false, XPJ_ORIGIN_CACHE);
  xpj_context_destroy(o);
  /* not for this device */
  const char *ptx_b = path_in("ptx.xpb");
  make_bundle(ptx_b, "ptx:sm_90");
  assert_int_equal(xpj_context_add_bundle(c, ptx_b), XPJ_ERR_UNSUPPORTED);
  assert_non_null(strstr(xpj_last_error(), "no kernels for cpu:0"));
  /* missing, or not a bundle */
  assert_int_equal(xpj_context_add_bundle(c, path_in("none.xpb")),
                   XPJ_ERR_IO);
  FILE *f = fopen(path_in("junk.xpb"), "wb");
  fputs("this is not a database, not at all, not even close.......", f);
  fclose(f);
  assert_int_not_equal(xpj_context_add_bundle(c, path_in("junk.xpb")),
                       XPJ_OK);
  assert_true(strlen(xpj_last_error()) > 0);
  xpj_context_destroy(c);
  /* built by another version: its entries are; what its meta says
   * decides nothing, either way */
  const char *old = path_in("old.xpb");
  make_bundle(old, "cpu");
  exec_sql(old, "UPDATE entries SET versions='xpjit=0.0.1;llvm=18.1.0;abi=1'");
  c = mkctx(path_in("fresh2.db"), XPJ_CACHE_MODE_RW);
  assert_int_equal(xpj_context_add_bundle(c, old), XPJ_ERR_UNSUPPORTED);
  assert_non_null(strstr(xpj_last_error(), "built by xpjit=0.0.1"));
  xpj_context_destroy(c);
  const char *lying = path_in("lying.xpb");
  make_bundle(lying, "cpu");
  exec_sql(lying, "UPDATE meta SET value='xpjit=0.0.1;llvm=18.1.0;abi=1' "
                  "WHERE name='versions'");
  c = mkctx(path_in("fresh4.db"), XPJ_CACHE_MODE_RW);
  assert_int_equal(xpj_context_add_bundle(c, lying), XPJ_OK);
  run_saxpy(c, saxpy_src, false, XPJ_ORIGIN_BUNDLE);
  xpj_context_destroy(c);

  /* XPJIT_BUNDLE_PATH: a directory of bundles; the bad ones are ignored
   * with a warning, the good one used */
  char bdir[600];
  snprintf(bdir, sizeof bdir, "%s/bundles", dir);
  mkdir(bdir, 0700);
  char cmd[2000];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s/a.xpb' && cp '%s' '%s/b.xpb' && "
           "cp '%s' '%s/c.xpb'", old, bdir, ptx_b, bdir, cpu_b, bdir);
  assert_int_equal(system(cmd), 0);
  setenv("XPJIT_BUNDLE_PATH", bdir, 1);
  warnings[0] = 0;
  xpj_context_desc d = {.visible = "cpu", .cache_path = path_in("f3.db")};
  assert_int_equal(xpj_context_create(&d, &c), XPJ_OK);
  unsetenv("XPJIT_BUNDLE_PATH");
  assert_non_null(strstr(warnings, "a.xpb is not used"));
  assert_non_null(strstr(warnings, "b.xpb is not used"));
  assert_null(strstr(warnings, "c.xpb"));
  run_saxpy(c, saxpy_src, false, XPJ_ORIGIN_BUNDLE);
  xpj_context_destroy(c);
}

/* ---- aliases: a fresh process's kernel without specialising ------------ */

static const char alias_src[] =
    "kernel scale<T>(a: T, x: global T[*]) range {\n"
    "    let i = global_id(0);\n"
    "    if i < size(x) { x[i] = a * x[i]; }\n"
    "}\n"
    "kernel twice<T>(a: global T[], t: local T[]) ndrange(1) local(64) {\n"
    "    t[local_id(0)] = a[global_id(0)];\n"
    "    barrier(local);\n"
    "    a[global_id(0)] = t[local_id(0)] + t[local_id(0)];\n"
    "}\n";

/* A kernel of src as the runtime describes it: its signature, every
 * argument, kind, dims and required local size, in out; and its origin. */
static xpj_kernel_origin describe_of(xpj_context *ctx, const char *src,
                                     const char *name, const char *dtypes,
                                     unsigned ndim, char *out, size_t size) {
  xpj_program *p = NULL;
  assert_int_equal(xpj_program_create(ctx, "a.xpk", src, strlen(src), NULL,
                                      &p), XPJ_OK);
  xpj_kernel *k = NULL;
  if (xpj_program_get_kernel(p, name, dtypes, ndim, cpu_of(ctx), NULL, &k) !=
      XPJ_OK)
    fail_msg("%s: %s", name, xpj_last_error());
  xpj_kernel_info ki;
  assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
  int n = snprintf(out, size, "%s kind %d dims %u local %llu nargs %u local "
                   "bytes %llu;", xpj_kernel_signature(k), (int)ki.kind,
                   ki.dims, (unsigned long long)ki.reqd_local[0], ki.nargs,
                   (unsigned long long)ki.local_mem_bytes);
  for (unsigned i = 0; i < ki.nargs; i++) {
    xpj_kernel_arg_info ai;
    assert_int_equal(xpj_kernel_get_arg_info(k, i, &ai), XPJ_OK);
    n += snprintf(out + n, size - (size_t)n, " %s:%d:%d:%u:%d", ai.name,
                  (int)ai.kind, (int)ai.dtype, ai.rank, ai.is_const);
  }
  xpj_program_destroy(p);
  return ki.origin;
}

/* The scale kernel of alias_src on 1000 f64 (x = 3 x), checked. */
static void run_scale(xpj_context *ctx, const char *src) {
  xpj_device *dev = cpu_of(ctx);
  xpj_program *p = NULL;
  assert_int_equal(xpj_program_create(ctx, "a.xpk", src, strlen(src), NULL,
                                      &p), XPJ_OK);
  xpj_kernel *k = NULL;
  assert_int_equal(xpj_program_get_kernel(p, "scale", "T=f64", 1, dev, NULL,
                                          &k), XPJ_OK);
  enum { N = 1000 };
  double *x;
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * 8, 0, (void **)&x),
                   XPJ_OK);
  for (int i = 0; i < N; i++)
    x[i] = i;
  xpj_queue *q = NULL;
  assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
  xpj_array ax = xpj_array_1d(x, XPJ_F64, N);
  xpj_arg args[] = {xpj_arg_f64(3.0), xpj_arg_array(&ax)};
  xpj_range r = xpj_range_1d(N, 0);
  assert_int_equal(xpj_launch(q, k, &r, 2, args, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  for (int i = 0; i < N; i++)
    if (x[i] != 3.0 * i)
      fail_msg("x[%d] = %g", i, x[i]);
  xpj_queue_destroy(q);
  xpj_mem_free(dev, x);
  xpj_program_destroy(p);
}

/* A kernel a context has not loaded comes through its alias (its binary
 * from the hit file the request led to last time, the kernel described
 * from its signature alone): the same description as the whole way, the
 * right code for the source asked (never another source's), the same
 * binary for get_binary, and anything doubtful the whole way. */
static void test_aliases(void **state) {
  (void)state;
  const char *db = path_in("alias.db");
  static const struct {
    const char *name, *dtypes;
    unsigned ndim;
  } ks[] = {{"scale", "T=f32", 1}, {"scale", "T=i64", 3},
            {"twice", "T=f64", 0}};
  enum { NK = sizeof ks / sizeof *ks };
  char whole[NK][512], by_alias[NK][512];
  xpj_context *c = mkctx(db, XPJ_CACHE_MODE_RW);
  for (int i = 0; i < NK; i++)
    assert_int_equal(describe_of(c, alias_src, ks[i].name, ks[i].dtypes,
                                 ks[i].ndim, whole[i], sizeof whole[i]),
                     XPJ_ORIGIN_COMPILED);
  run_saxpy(c, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  run_scale(c, alias_src);
  void *bin1 = NULL;
  size_t size1 = 0;
  xpj_program *p = NULL;
  assert_int_equal(xpj_program_create(c, "b.xpk", alias_src,
                                      strlen(alias_src), NULL, &p), XPJ_OK);
  assert_int_equal(xpj_program_get_binary(p, "scale", "T=f32", 2, "spirv",
                                          NULL, &bin1, &size1), XPJ_OK);
  xpj_program_destroy(p);
  xpj_context_destroy(c);
  assert_int_equal(aliases_of(db), NK + 3);

  /* a fresh context: nothing compiled, the same description */
  c = mkctx(db, XPJ_CACHE_MODE_RW);
  for (int i = 0; i < NK; i++) {
    assert_int_equal(describe_of(c, alias_src, ks[i].name, ks[i].dtypes,
                                 ks[i].ndim, by_alias[i], sizeof by_alias[i]),
                     XPJ_ORIGIN_CACHE);
    assert_string_equal(whole[i], by_alias[i]);
  }
  run_saxpy(c, saxpy_src, false, XPJ_ORIGIN_CACHE);
  /* the same request spelled otherwise (positional dtypes): the context's
   * memory, not a second hit of the cache file (a review's finding) */
  xpj_cache_counters before, after;
  assert_int_equal(xpj_context_cache_counters(c, &before), XPJ_OK);
  char again[512];
  assert_int_equal(describe_of(c, alias_src, "scale", "f32", 1, again,
                               sizeof again),
                   XPJ_ORIGIN_MEMORY);
  assert_string_equal(again, whole[0]);
  assert_int_equal(xpj_context_cache_counters(c, &after), XPJ_OK);
  assert_int_equal(after.l2_hits, before.l2_hits);
  assert_int_equal(after.l1_hits, before.l1_hits + 1);
  assert_int_equal(xpj_program_create(c, "b.xpk", alias_src,
                                      strlen(alias_src), NULL, &p), XPJ_OK);
  void *bin2 = NULL;
  size_t size2 = 0;
  assert_int_equal(xpj_program_get_binary(p, "scale", "T=f32", 2, "spirv",
                                          NULL, &bin2, &size2), XPJ_OK);
  assert_true(size1 == size2 && !memcmp(bin1, bin2, size1));
  free(bin1);
  free(bin2);
  xpj_program_destroy(p);
  assert_int_equal(compiles(c), 0);
  xpj_context_destroy(c);

  /* another source with the same kernel: its own code, not the alias of
   * the first (then both, each right) */
  c = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(c, saxpy_src_changed, true, XPJ_ORIGIN_COMPILED);
  xpj_context_destroy(c);
  c = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(c, saxpy_src_changed, true, XPJ_ORIGIN_CACHE);
  run_saxpy(c, saxpy_src, false, XPJ_ORIGIN_CACHE);
  assert_int_equal(compiles(c), 0);
  xpj_context_destroy(c);

  /* every alias made to say what each other alias says in turn (among
   * them the other source's saxpy), then to name each hit file: as only
   * this user could; refused (the cache's HMAC of the alias's own name and
   * the file is not there), each kernel right the whole way */
  char hits[600], cmd[1400];
  snprintf(hits, sizeof hits, "%s.hits", db);
  assert_int_equal(aliases_of(db), NK + 4);
  for (int t = 1; t <= 2 * (NK + 4); t++) {
    /* aliases are "a" and 64 hex digits, hit files 64 hex digits (which
     * may begin with an "a" too) */
    snprintf(cmd, sizeof cmd, "cd '%s' && al=$(ls | grep -E '^a[0-9a-f]{64}$') "
             "&& t=$(ls | grep -E '^%s[0-9a-f]{64}$' | sed -n %dp) && "
             "[ -n \"$t\" ] && t=$(readlink \"$t\" || echo \"$t\") && for a "
             "in $al; do [ \"$a\" = \"$t\" ] || ln -sfn \"$t\" \"$a\"; done",
             hits, t <= NK + 4 ? "a" : "", t <= NK + 4 ? t : t - NK - 4);
    assert_int_equal(system(cmd), 0);
    c = mkctx(db, XPJ_CACHE_MODE_RW);
    run_saxpy(c, saxpy_src, false, XPJ_ORIGIN_CACHE);
    run_saxpy(c, saxpy_src_changed, true, XPJ_ORIGIN_CACHE);
    run_scale(c, alias_src);
    assert_int_equal(compiles(c), 0);
    xpj_context_destroy(c);
  }
  /* and made right again by those requests */
  c = mkctx(db, XPJ_CACHE_MODE_RW);
  run_scale(c, alias_src);
  xpj_context_destroy(c);

  /* rows gone (cleared): every alias with them, then all made again */
  xpj_cache *l2 = xpj_context_cache(c = mkctx(db, XPJ_CACHE_MODE_RW));
  assert_int_equal(xpj_cache_clear(l2), XPJ_OK);
  xpj_context_destroy(c);
  assert_int_equal(aliases_of(db), 0);
  c = mkctx(db, XPJ_CACHE_MODE_RW);
  run_scale(c, alias_src);
  assert_int_equal(compiles(c), 1);
  xpj_context_destroy(c);
  assert_true(aliases_of(db) >= 1);
}

/* A work-item dimension named by a const parameter (`global_id(D)`): the
 * kernel as parsed reads dimension 0 there (it is checked when D is
 * bound), so its launches take the rank the specialised kernel reads
 * (found by a review: a 2-D launch with D=1 swapped its dimensions). Compiled,
 * then from the cache, then from the context's memory. */
static void test_const_dimension(void **state) {
  (void)state;
  static const char src[] =
      "kernel k<const D: i64>(x: global i64[,]) range {\n"
      "  let i = global_id(0);\n"
      "  let j = global_id(D);\n"
      "  if i < shape(x, 0) && j < shape(x, 1) { x[i, j] = i * 1000 + j; }\n"
      "}\n";
  const char *db = path_in("constdim.db");
  for (int round = 0; round < 3; round++) {
    xpj_context *c = mkctx(db, XPJ_CACHE_MODE_RW);
    xpj_device *dev = cpu_of(c);
    for (int again = 0; again < 2; again++) {
      xpj_program *p = NULL;
      assert_int_equal(xpj_program_create(c, "c.xpk", src, strlen(src), NULL,
                                          &p), XPJ_OK);
      xpj_kernel *k = NULL;
      if (xpj_program_get_kernel(p, "k", "D=1", 0, dev, NULL, &k) != XPJ_OK)
        fail_msg("k: %s", xpj_last_error());
      enum { R = 4, C = 8 };
      int64_t *x;
      assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, R * C * 8, 0,
                                     (void **)&x), XPJ_OK);
      for (int i = 0; i < R * C; i++)
        x[i] = -1;
      xpj_queue *q = NULL;
      assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
      xpj_array a = xpj_array_2d(x, XPJ_I64, R, C);
      xpj_arg args[] = {xpj_arg_array(&a)};
      xpj_range r = xpj_range_2d(R, C, 0, 0);
      assert_int_equal(xpj_launch(q, k, &r, 1, args, NULL), XPJ_OK);
      assert_int_equal(xpj_queue_wait(q), XPJ_OK);
      for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
          if (x[i * C + j] != i * 1000 + j)
            fail_msg("round %d: x[%d, %d] = %lld, expected %d", round, i, j,
                     (long long)x[i * C + j], i * 1000 + j);
      xpj_queue_destroy(q);
      xpj_mem_free(dev, x);
      xpj_program_destroy(p);
    }
    xpj_context_destroy(c);
  }
}

/* Launches kernel `which` of test_quick_described's source (0 gen<f64>
 * ndim 2, 1 grp<i32, 3>, 2 fix) and checks what it wrote: what the launch
 * reads of the kernel's description (its ABI slots, local array
 * parameters, required local size, the rank of its ids) is right. */
static void launch_described(xpj_device *dev, xpj_kernel *k, int which) {
  xpj_queue *q = NULL;
  assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
  void *m1 = NULL, *m2 = NULL;
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, 256, 0, &m1), XPJ_OK);
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, 256, 0, &m2), XPJ_OK);
  if (which == 0) { /* y = 3 x + y over 3 x 4 */
    double *x = m1, *y = m2;
    for (int i = 0; i < 12; i++) {
      x[i] = 2.0;
      y[i] = i;
    }
    xpj_array ax = xpj_array_2d(x, XPJ_F64, 3, 4),
              ay = xpj_array_2d(y, XPJ_F64, 3, 4);
    xpj_arg args[] = {xpj_arg_f64(3.0), xpj_arg_array(&ax),
                      xpj_arg_array(&ay)};
    xpj_range r = xpj_range_1d(12, 0);
    if (xpj_launch(q, k, &r, 3, args, NULL) != XPJ_OK)
      fail_msg("gen: %s", xpj_last_error());
    assert_int_equal(xpj_queue_wait(q), XPJ_OK);
    for (int i = 0; i < 12; i++)
      assert_true(y[i] == 6.0 + i);
  } else if (which == 1) { /* s[g] = 3 x[4 g]: groups of 4 */
    int32_t *x = m1, *s = m2;
    for (int i = 0; i < 8; i++)
      x[i] = i + 1;
    s[0] = s[1] = 0;
    xpj_array ax = xpj_array_1d(x, XPJ_I32, 8), as = xpj_array_1d(s, XPJ_I32, 2);
    xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&as),
                      xpj_arg_local(4)};
    xpj_range r = xpj_range_1d(8, 0); /* a local array sized by the launch */
    assert_int_equal(xpj_launch(q, k, &r, 3, args, NULL), XPJ_ERR_INVALID);
    r = xpj_range_1d(8, 4);
    if (xpj_launch(q, k, &r, 3, args, NULL) != XPJ_OK)
      fail_msg("grp: %s", xpj_last_error());
    assert_int_equal(xpj_queue_wait(q), XPJ_OK);
    assert_int_equal(s[0], 3);
    assert_int_equal(s[1], 15);
  } else { /* every element of 8 x 4, in groups of its own 4 x 2 */
    int32_t *o = m1;
    memset(o, 0, 32 * sizeof *o);
    xpj_array ao = xpj_array_2d(o, XPJ_I32, 8, 4);
    xpj_arg args[] = {xpj_arg_array(&ao)};
    xpj_range r = xpj_range_2d(8, 4, 0, 0);
    if (xpj_launch(q, k, &r, 1, args, NULL) != XPJ_OK)
      fail_msg("fix: %s", xpj_last_error());
    assert_int_equal(xpj_queue_wait(q), XPJ_OK);
    for (int i = 0; i < 32; i++)
      assert_int_equal(o[i], 1);
  }
  xpj_queue_destroy(q);
  xpj_mem_free(dev, m1);
  xpj_mem_free(dev, m2);
}

/* A kernel found in the context's memory for a second program describes
 * itself as the one its request built: info, every argument and the
 * signature, also after the program that built it is gone; for range and
 * nd-range kernels, const and local array parameters, generic rank. */
static void test_quick_described(void **state) {
  (void)state;
  static const char src[] =
      "kernel gen<T>(a: T, x: global const T[*], y: global T[*]) range {\n"
      "  let i = global_id(0);\n"
      "  if i < size(y) { y[i] = a * x[i] + y[i]; }\n"
      "}\n"
      "kernel grp<T, const W: i64>(x: global const T[], s: global T[],\n"
      "                            t: local T[]) ndrange(1) {\n"
      "  let l = local_id(0);\n"
      "  t[l] = x[global_id(0)] * T(W);\n"
      "  barrier(local);\n"
      "  if l == 0 { s[group_id(0)] = t[0]; }\n"
      "}\n"
      "kernel fix(o: global i32[,]) ndrange(2) local(4, 2) {\n"
      "  o[global_id(0), global_id(1)] = 1;\n"
      "}\n";
  static const struct {
    const char *name, *dtypes;
    unsigned ndim;
  } asks[] = {{"gen", "T=f64", 2}, {"grp", "T=i32,W=3", 0}, {"fix", "", 0}};
  xpj_context *ctx = mkctx(path_in("d.db"), XPJ_CACHE_MODE_OFF);
  xpj_device *dev = cpu_of(ctx);
  for (size_t i = 0; i < sizeof asks / sizeof asks[0]; i++) {
    xpj_program *p1 = NULL, *p2 = NULL;
    xpj_kernel *k1 = NULL, *k2 = NULL;
    assert_int_equal(xpj_program_create(ctx, "d.xpk", src, strlen(src), NULL,
                                        &p1), XPJ_OK);
    assert_int_equal(xpj_program_create(ctx, "d.xpk", src, strlen(src), NULL,
                                        &p2), XPJ_OK);
    if (xpj_program_get_kernel(p1, asks[i].name, asks[i].dtypes,
                               asks[i].ndim, dev, NULL, &k1) != XPJ_OK)
      fail_msg("%s: %s", asks[i].name, xpj_last_error());
    assert_int_equal(xpj_program_get_kernel(p2, asks[i].name, asks[i].dtypes,
                                            asks[i].ndim, dev, NULL, &k2),
                     XPJ_OK);
    xpj_kernel_info a, b;
    assert_int_equal(xpj_kernel_get_info(k1, &a), XPJ_OK);
    char sig[512];
    snprintf(sig, sizeof sig, "%s", xpj_kernel_signature(k1));
    xpj_kernel_arg_info args[4];
    char names[4][32];
    assert_true(a.nargs <= 4);
    for (unsigned j = 0; j < a.nargs; j++) {
      assert_int_equal(xpj_kernel_get_arg_info(k1, j, &args[j]), XPJ_OK);
      snprintf(names[j], sizeof names[j], "%s", args[j].name);
    }
    xpj_program_destroy(p1);
    assert_int_equal(xpj_kernel_get_info(k2, &b), XPJ_OK);
    assert_int_equal(b.origin, XPJ_ORIGIN_MEMORY);
    assert_string_equal(b.name, asks[i].name);
    assert_int_equal(b.kind, a.kind);
    assert_int_equal(b.dims, a.dims);
    assert_memory_equal(b.reqd_local, a.reqd_local, sizeof a.reqd_local);
    assert_int_equal(b.nargs, a.nargs);
    assert_int_equal(b.local_mem_bytes, a.local_mem_bytes);
    assert_int_equal(b.max_work_group_size, a.max_work_group_size);
    assert_string_equal(xpj_kernel_signature(k2), sig);
    for (unsigned j = 0; j < b.nargs; j++) {
      xpj_kernel_arg_info c;
      assert_int_equal(xpj_kernel_get_arg_info(k2, j, &c), XPJ_OK);
      assert_string_equal(c.name, names[j]);
      assert_int_equal(c.kind, args[j].kind);
      assert_int_equal(c.dtype, args[j].dtype);
      assert_int_equal(c.rank, args[j].rank);
      assert_int_equal(c.is_const, args[j].is_const);
    }
    assert_int_equal(xpj_kernel_get_arg_info(k2, b.nargs, &(xpj_kernel_arg_info){0}),
                     XPJ_ERR_INVALID);
    launch_described(dev, k2, (int)i);
    xpj_program_destroy(p2);
  }
  assert_int_equal(compiles(ctx), 3);
  xpj_context_destroy(ctx);
}

/* Threads of one context that get the same request at once through
 * separate programs (an L2 hit: no compile, so no fork, and the test runs
 * under the sanitizers too): each builds the kernel, one remembers what
 * it described and the others' descriptions are dropped; the kernel that
 * survives its program's peers describes itself and runs. */
enum { RACERS = 6 };

static void test_quick_described_race(void **state) {
  (void)state;
  const char *db = path_in("race.db");
  xpj_context *warm = mkctx(db, XPJ_CACHE_MODE_RW);
  run_saxpy(warm, saxpy_src, false, XPJ_ORIGIN_COMPILED);
  xpj_context_destroy(warm);
  for (int round = 0; round < 4; round++) {
    xpj_context *ctx = mkctx(db, XPJ_CACHE_MODE_RW);
    xpj_device *dev = cpu_of(ctx);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, RACERS);
    flight r[RACERS];
    pthread_t th[RACERS];
    for (int i = 0; i < RACERS; i++) {
      r[i] = (flight){NULL, dev, "T=f32", &go, NULL, XPJ_ERR_INVALID};
      assert_int_equal(xpj_program_create(ctx, "s.xpk", saxpy_src,
                                          strlen(saxpy_src), NULL, &r[i].p),
                       XPJ_OK);
    }
    for (int i = 0; i < RACERS; i++)
      assert_int_equal(pthread_create(&th[i], NULL, fly, &r[i]), 0);
    for (int i = 0; i < RACERS; i++)
      pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);
    for (int i = 0; i < RACERS; i++)
      if (r[i].st != XPJ_OK)
        fail_msg("racer %d: %s", i, xpj_last_error());
    int keep = round % RACERS; /* one survives its peers */
    for (int i = 0; i < RACERS; i++)
      if (i != keep)
        xpj_program_destroy(r[i].p);
    xpj_kernel *k = r[keep].k;
    assert_string_equal(xpj_kernel_signature(k),
                        "saxpy(a: f32, x: global const f32[], y: global f32[])");
    const char *names[] = {"a", "x", "y"};
    for (unsigned j = 0; j < 3; j++) {
      xpj_kernel_arg_info ai;
      assert_int_equal(xpj_kernel_get_arg_info(k, j, &ai), XPJ_OK);
      assert_string_equal(ai.name, names[j]);
    }
    saxpy_check(dev, k, false);
    xpj_program_destroy(r[keep].p);
    xpj_context_destroy(ctx);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_key_components, setup, teardown),
      cmocka_unit_test_setup_teardown(test_quick_first_level, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_quick_described, setup, teardown),
      cmocka_unit_test_setup_teardown(test_quick_described_race, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_single_flight, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failure_cached, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refused_binary_replaced, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_planted_object_cannot_call_out,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_corrupt_row_recompiled, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_handler_reenters_lookup, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_corrupt_file_recovered, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_modes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bundles, setup, teardown),
      cmocka_unit_test_setup_teardown(test_aliases, setup, teardown),
      cmocka_unit_test_setup_teardown(test_const_dimension, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
