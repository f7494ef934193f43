/* test_bounds.c - the bounds-checking mode (XPJIT_CHECK=bounds, the
 * context's checks, xpj_compile_opts.checks; docs/api.md, Checks): a kernel
 * that indexes one element past a view, before its start, past a
 * dimension of a 2-D view, past a flat index, past a local or a private
 * array, through a device function or an atomic, fails its launch with
 * XPJ_ERR_BOUNDS and a message naming the kernel, the array, the index,
 * the extent and line:col; the memory around the views is untouched;
 * correct kernels give the same results as unchecked ones; checked and
 * unchecked kernels are cached apart; malformed XPJIT_CHECK is refused.
 * Run on XPJIT_TEST_DEVICE (default: the CPU device; tests/run_tests.sh
 * runs it again on the OpenCL device). */
#include "testutil.h"

#include "devtest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char src[] =
    "kernel past_end(x: global const f32[], y: global f32[]) range(1) {\n"
    "  let i = global_id(0);\n"
    "  y[i + 1] = x[i];\n" /* 3:4, the [ */
    "}\n"
    "kernel before_start(x: global const f32[], y: global f32[]) range(1) {\n"
    "  let i = global_id(0);\n"
    "  y[i] = x[i - 1];\n" /* 7:11 */
    "}\n"
    "kernel grid(a: global f32[,]) range(2) {\n"
    "  let r = global_id(0);\n"
    "  let c = global_id(1);\n"
    "  a[r, c] = a[r, c] + 1.0f32;\n"
    "  if r == 2 && c == 3 { a[r, c * 3] = 7.0f32; }\n" /* 13:26 */
    "}\n"
    "kernel flat(a: global f32[,], k: i64) range(1) {\n"
    "  a[global_id(0) + k] = 5.0f32;\n" /* 16:4 */
    "}\n"
    "kernel tile(a: global f32[,]) ndrange(2) local(4, 4) {\n"
    "  local t: f32[4, 4];\n"
    "  let r = local_id(0);\n"
    "  let c = local_id(1);\n"
    "  t[r, c] = a[global_id(0), global_id(1)];\n"
    "  barrier(local);\n"
    "  a[global_id(0), global_id(1)] = t[r, c + 1];\n" /* 24:36 */
    "}\n"
    "kernel priv(a: global i64[], n: i64) range(1) {\n"
    "  let p: i64[4];\n"
    "  for (let k: i64 = 0; k < n; k++) { p[k] = k; }\n" /* 28:39 */
    "  a[global_id(0)] = p[0];\n"
    "}\n"
    "fn put(dst: global f32[], j: i64, v: f32) {\n"
    "  dst[j] = v;\n" /* 32:6 */
    "}\n"
    "kernel via_fn(src: global const f32[], out: global f32[]) range(1) {\n"
    "  let i = global_id(0);\n"
    "  put(out, i * 2, src[i]);\n"
    "}\n"
    "kernel hist(v: global const u32[], h: global u32[]) range(1) {\n"
    "  atomic_add(&h[v[global_id(0)]], 1u32, relaxed, device);\n" 
    "}\n"
    "kernel saxpy(a: f32, x: global const f32[], y: global f32[]) range(1) {\n"
    "  let i = global_id(0);\n"
    "  y[i] = a * x[i] + y[i];\n"
    "}\n"
    "kernel dyn(a: global f32[], t: local f32[]) ndrange(1) {\n"
    "  t[local_id(0)] = a[global_id(0)];\n"
    "  barrier(local);\n"
    "  a[global_id(0)] = t[local_id(0) + 1];\n" /* 48:22 */
    "}\n"
    "kernel bcast(src: global const f32[,], dst: global f32[]) range(1) {\n"
    "  dst[global_id(0)] = src[global_id(0)];\n"
    "}\n"
    "kernel unsig(y: global f32[], k: u64) range(1) {\n"
    "  y[k] = 1.0f32;\n" /* 54:4 */
    "}\n";

static int setup(void **state) {
  (void)state;
  setenv("XPJIT_CHECK", "bounds", 1);
  int r = devtest_setup("test_bounds", "bounds.xpk", src);
  unsetenv("XPJIT_CHECK");
  return r;
}

/* Launches k and waits: the launch's status (its event's). */
static xpj_status run(xpj_kernel *k, xpj_range r, unsigned n,
                      const xpj_arg *a) {
  xpj_event *ev = NULL;
  xpj_status st = xpj_launch(q, k, &r, n, a, &ev);
  if (st != XPJ_OK)
    fail_msg("launch: %s", xpj_last_error());
  st = xpj_event_wait(ev);
  xpj_event_release(ev);
  xpj_status qs = xpj_queue_wait(q); /* the queue reports it too, once */
  if (qs != st)
    fail_msg("queue %d, event %d", qs, st);
  return st;
}

/* The launch fails with XPJ_ERR_BOUNDS and a message that has each of
 * the NULL-terminated parts. */
static void expect_oob(xpj_kernel *k, xpj_range r, unsigned n,
                       const xpj_arg *a, ...) {
  xpj_status st = run(k, r, n, a);
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", xpj_last_error());
  if (st != XPJ_ERR_BOUNDS)
    fail_msg("status %d (%s), want XPJ_ERR_BOUNDS", st, msg);
  va_list ap;
  va_start(ap, a);
  for (const char *part; (part = va_arg(ap, const char *));)
    if (!strstr(msg, part))
      fail_msg("the message lacks \"%s\": %s", part, msg);
  va_end(ap);
}

enum { N = 1000, GUARD = 64 };

/* n floats in the middle of an allocation of n + 2 * GUARD, the guards
 * set to a pattern no kernel here writes */
static float *guarded(size_t n) {
  float *p = dev_alloc((n + 2 * GUARD) * sizeof(float), 0);
  for (size_t i = 0; i < n + 2 * GUARD; i++)
    p[i] = -77.0f;
  return p + GUARD;
}
static void check_guards(const float *p, size_t n) {
  for (int i = 1; i <= GUARD; i++)
    if (p[-i] != -77.0f || p[n - 1 + i] != -77.0f)
      fail_msg("memory around the view was written: [%d] %g, [%zu] %g", -i,
               p[-i], n - 1 + i, p[n - 1 + i]);
}
static void unguard(float *p) { xpj_mem_free(dev, p - GUARD); }

static void test_past_end(void **state) {
  (void)state;
  float *x = guarded(N), *y = guarded(N);
  for (int i = 0; i < N; i++)
    x[i] = (float)i;
  xpj_array X = xpj_array_1d(x, XPJ_F32, N), Y = xpj_array_1d(y, XPJ_F32, N);
  xpj_arg a[2] = {xpj_arg_array(&X), xpj_arg_array(&Y)};
  expect_oob(kern("past_end"), xpj_range_1d(N, 0), 2, a, "past_end(",
             "store to argument 1 'y'", "bounds.xpk:3:4", "index 0 is 1000",
             "extent is 1000", "went nowhere", (const char *)NULL);
  check_guards(y, N);
  for (int i = 1; i < N; i++) /* the accesses in bounds happened */
    if (y[i] != (float)(i - 1))
      fail_msg("y[%d] = %g", i, y[i]);
  unguard(x);
  unguard(y);
}

static void test_before_start(void **state) {
  (void)state;
  float *x = guarded(N), *y = guarded(N);
  xpj_array X = xpj_array_1d(x, XPJ_F32, N), Y = xpj_array_1d(y, XPJ_F32, N);
  xpj_arg a[2] = {xpj_arg_array(&X), xpj_arg_array(&Y)};
  expect_oob(kern("before_start"), xpj_range_1d(N, 0), 2, a,
             "load from argument 0 'x'", "bounds.xpk:7:11", "index 0 is -1",
             "extent is 1000", (const char *)NULL);
  check_guards(y, N);
  unguard(x);
  unguard(y);
}

/* An unsigned index is said as one: 2^64 - 1 was "index 0 is -1". */
static void test_unsigned_index(void **state) {
  (void)state;
  float *y = guarded(N);
  xpj_array Y = xpj_array_1d(y, XPJ_F32, N);
  xpj_arg a[2] = {xpj_arg_array(&Y), xpj_arg_u64(UINT64_MAX)};
  expect_oob(kern("unsig"), xpj_range_1d(1, 0), 2, a,
             "store to argument 0 'y'", "bounds.xpk:54:4",
             "index 0 is 18446744073709551615", "extent is 1000",
             (const char *)NULL);
  check_guards(y, N);
  unguard(y);
}

/* a[2, 9] of a 4 x 8 grid: dimension 1 named; the other work-items' +1
 * happened, a[2, 3] was not set to 7 through a wrong address */
static void test_grid(void **state) {
  (void)state;
  float *g = guarded(32);
  for (int i = 0; i < 32; i++)
    g[i] = (float)i;
  xpj_array A = xpj_array_2d(g, XPJ_F32, 4, 8);
  xpj_arg a[1] = {xpj_arg_array(&A)};
  expect_oob(kern("grid"), xpj_range_2d(4, 8, 0, 0), 1, a,
             "store to argument 0 'a'", "bounds.xpk:13:26", "index 1 is 9",
             "extent is 8", (const char *)NULL);
  check_guards(g, 32);
  for (int i = 0; i < 32; i++)
    if (g[i] != (float)i + 1.0f)
      fail_msg("a[%d] = %g", i, g[i]);
  unguard(g);
}

static void test_flat(void **state) {
  (void)state;
  float *g = guarded(12);
  xpj_array A = xpj_array_2d(g, XPJ_F32, 3, 4);
  xpj_arg a[2] = {xpj_arg_array(&A), xpj_arg_i64(5)};
  expect_oob(kern("flat"), xpj_range_1d(8, 0), 2, a, "argument 0 'a'",
             "bounds.xpk:16:4", "flat index 12", "has 12 elements",
             (const char *)NULL);
  check_guards(g, 12);
  for (int i = 5; i < 12; i++)
    if (g[i] != 5.0f)
      fail_msg("a[%d] = %g", i, g[i]);
  unguard(g);
}

/* a flat index into a broadcast view whose shapes multiply past 2^64: no
 * index is out of it (the flat extent saturates instead of wrapping) */
static void test_flat_broadcast(void **state) {
  (void)state;
  float *g = guarded(1), *out = guarded(4);
  g[0] = 3.0f;
  int64_t shape[2] = {(int64_t)1 << 32, (int64_t)1 << 32}, strides[2] = {0, 0};
  xpj_array S = xpj_array_view(g, XPJ_F32, 2, shape, strides, 0);
  xpj_array D = xpj_array_1d(out, XPJ_F32, 4);
  xpj_arg a[2] = {xpj_arg_array(&S), xpj_arg_array(&D)};
  assert_int_equal(run(kern("bcast"), xpj_range_1d(4, 0), 2, a), XPJ_OK);
  for (int i = 0; i < 4; i++)
    if (out[i] != 3.0f)
      fail_msg("out[%d] = %g", i, out[i]);
  check_guards(g, 1);
  check_guards(out, 4);
  unguard(g);
  unguard(out);
}

/* a local array parameter (sized by the launch: 8 for groups of 8): the
 * last work-item of a group reads t[8] */
static void test_local_param(void **state) {
  (void)state;
  float *g = guarded(16);
  xpj_array A = xpj_array_1d(g, XPJ_F32, 16);
  xpj_arg a[2] = {xpj_arg_array(&A), xpj_arg_local(8)};
  expect_oob(kern("dyn"), xpj_range_1d(16, 8), 2, a,
             "load from argument 1 't'", "bounds.xpk:48:22", "index 0 is 8",
             "extent is 8", "went to the array's first element",
             (const char *)NULL);
  check_guards(g, 16);
  unguard(g);
}

static void test_local(void **state) {
  (void)state;
  float *g = guarded(64);
  xpj_array A = xpj_array_2d(g, XPJ_F32, 8, 8);
  xpj_arg a[1] = {xpj_arg_array(&A)};
  expect_oob(kern("tile"), xpj_range_2d(8, 8, 4, 4), 1, a,
             "load from local array 't'", "bounds.xpk:24:36", "index 1 is 4",
             "extent is 4", "went to the array's first element",
             (const char *)NULL);
  check_guards(g, 64);
  unguard(g);
}

static void test_private(void **state) {
  (void)state;
  int64_t *o = dev_alloc(16 * 8, 0);
  xpj_array A = xpj_array_1d(o, XPJ_I64, 16);
  xpj_arg ok[2] = {xpj_arg_array(&A), xpj_arg_i64(4)};
  assert_int_equal(run(kern("priv"), xpj_range_1d(16, 0), 2, ok), XPJ_OK);
  xpj_arg bad[2] = {xpj_arg_array(&A), xpj_arg_i64(6)};
  expect_oob(kern("priv"), xpj_range_1d(16, 0), 2, bad,
             "store to private array 'p'", "bounds.xpk:28:39", "index 0 is 4",
             "extent is 4", (const char *)NULL);
  xpj_mem_free(dev, o);
}

static void test_device_function(void **state) {
  (void)state;
  float *s = guarded(N), *o = guarded(N);
  xpj_array S = xpj_array_1d(s, XPJ_F32, N), O = xpj_array_1d(o, XPJ_F32, N);
  xpj_arg a[2] = {xpj_arg_array(&S), xpj_arg_array(&O)};
  expect_oob(kern("via_fn"), xpj_range_1d(N, 0), 2, a,
             "store to argument 1 'out'", "(in function put, as dst)",
             "bounds.xpk:32:6", "extent is 1000", (const char *)NULL);
  check_guards(o, N);
  unguard(s);
  unguard(o);
}

static void test_atomic(void **state) {
  (void)state;
  uint32_t *v = dev_alloc(64 * 4, 0), *h = dev_alloc(16 * 4, 0);
  for (int i = 0; i < 64; i++)
    v[i] = i == 40 ? 4000000000u : (uint32_t)(i % 8);
  xpj_array V = xpj_array_1d(v, XPJ_U32, 64), H = xpj_array_1d(h, XPJ_U32, 8);
  xpj_arg a[2] = {xpj_arg_array(&V), xpj_arg_array(&H)};
  expect_oob(kern("hist"), xpj_range_1d(64, 0), 2, a,
             "atomic on argument 1 'h'", "index 0 is 4000000000",
             "extent is 8", (const char *)NULL);
  uint32_t total = 0;
  for (int i = 0; i < 16; i++)
    total += h[i];
  assert_int_equal(total, 63); /* 63 counted, the 64th went nowhere */
  xpj_mem_free(dev, v);
  xpj_mem_free(dev, h);
}

/* In bounds: the result is the unchecked kernel's, launch after launch
 * (the record starts clean each time). */
static void test_clean(void **state) {
  (void)state;
  float *x = dev_alloc(N * 4, 0), *y = dev_alloc(N * 4, 0);
  for (int i = 0; i < N; i++) {
    x[i] = (float)i;
    y[i] = 1.0f;
  }
  xpj_array X = xpj_array_1d(x, XPJ_F32, N), Y = xpj_array_1d(y, XPJ_F32, N);
  xpj_arg a[3] = {xpj_arg_f32(2.0f), xpj_arg_array(&X), xpj_arg_array(&Y)};
  for (int rep = 0; rep < 3; rep++)
    assert_int_equal(run(kern("saxpy"), xpj_range_1d(N, 0), 3, a), XPJ_OK);
  for (int i = 0; i < N; i++)
    if (y[i] != 1.0f + 3 * 2.0f * (float)i)
      fail_msg("y[%d] = %g", i, y[i]);
  /* a violation, then a clean launch of the same kernel */
  xpj_array Y1 = xpj_array_1d(y, XPJ_F32, N - 1);
  xpj_arg b[2] = {xpj_arg_array(&X), xpj_arg_array(&Y1)};
  assert_int_equal(run(kern("past_end"), xpj_range_1d(N - 1, 0), 2, b),
                   XPJ_ERR_BOUNDS);
  xpj_array Y2 = xpj_array_1d(y, XPJ_F32, N);
  xpj_array X2 = xpj_array_1d(x, XPJ_F32, N - 1);
  xpj_arg c[2] = {xpj_arg_array(&X2), xpj_arg_array(&Y2)};
  assert_int_equal(run(kern("past_end"), xpj_range_1d(N - 1, 0), 2, c),
                   XPJ_OK);
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, y);
}

/* The program destroyed while its checked launch is queued: the launch
 * still fails with the whole message (what explains it outlives the
 * kernel; ASan checks nothing it reads was freed). */
static void test_program_gone(void **state) {
  (void)state;
  xpj_program *p = NULL;
  assert_int_equal(xpj_program_create(ctx, "gone.xpk", src, strlen(src), NULL,
                                      &p), XPJ_OK);
  xpj_kernel *k = NULL;
  assert_int_equal(xpj_program_get_kernel(p, "past_end", NULL, 0, dev, NULL,
                                          &k), XPJ_OK);
  float *x = guarded(N), *y = guarded(N);
  xpj_array X = xpj_array_1d(x, XPJ_F32, N), Y = xpj_array_1d(y, XPJ_F32, N);
  xpj_arg a[2] = {xpj_arg_array(&X), xpj_arg_array(&Y)};
  xpj_range r = xpj_range_1d(N, 0);
  for (int i = 0; i < 4; i++)
    assert_int_equal(xpj_launch(q, k, &r, 2, a, NULL), XPJ_OK);
  xpj_program_destroy(p);
  assert_int_equal(xpj_queue_wait(q), XPJ_ERR_BOUNDS);
  assert_non_null(strstr(xpj_last_error(), "gone.xpk:3:4"));
  assert_non_null(strstr(xpj_last_error(), "argument 1 'y'"));
  check_guards(y, N);
  unguard(x);
  unguard(y);
}

/* Checks are part of what identifies a compile: the checked and the plain
 * binary differ, and the plain kernel of a context without checks runs
 * past the end without a word (what the mode is for). */
static void test_keyed_apart(void **state) {
  (void)state;
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  char s[64];
  o.checks = XPJ_CHECK_BOUNDS;
  xpj_compile_opts_str(&o, s, sizeof s);
  assert_string_equal(s, "O2+bounds");
  void *b1 = NULL, *b2 = NULL;
  size_t n1 = 0, n2 = 0;
  xpj_context *plain = NULL;
  assert_int_equal(xpj_context_create(NULL, &plain), XPJ_OK);
  xpj_program *p2 = NULL;
  assert_int_equal(xpj_program_create(plain, "bounds.xpk", src, strlen(src),
                                      NULL, &p2), XPJ_OK);
  assert_int_equal(xpj_program_get_binary(p2, "saxpy", NULL, 0, "cpu", &o,
                                          &b1, &n1), XPJ_OK);
  assert_int_equal(xpj_program_get_binary(p2, "saxpy", NULL, 0, "cpu", NULL,
                                          &b2, &n2), XPJ_OK);
  assert_true(n1 != n2 || memcmp(b1, b2, n1) != 0);
  free(b1);
  free(b2);
  o.checks = 0x80;
  assert_int_equal(xpj_program_get_binary(p2, "saxpy", NULL, 0, "cpu", &o,
                                          NULL, NULL), XPJ_ERR_INVALID);
  xpj_program_destroy(p2);
  xpj_context_destroy(plain);
}

/* PTX, offline: every kernel above compiles with checks for sm_80 and
 * sm_90, takes one more parameter than without, records with an atomic or
 * on global memory, and ptxas (when installed) accepts it. SPIR-V: the
 * same kernels pass validation (which every SPIR-V output goes through). */
static void test_ptx_and_spirv(void **state) {
  (void)state;
  const char *ptxas = access("/usr/local/cuda/bin/ptxas", X_OK) == 0
                          ? "/usr/local/cuda/bin/ptxas" : NULL;
  if (!ptxas && system("command -v ptxas >/dev/null 2>&1") == 0)
    ptxas = "ptxas";
  if (!ptxas)
    printf("NOTE: ptxas not found: checked PTX is not run through ptxas\n");
  xpj_compile_opts on;
  xpj_compile_opts_default(&on);
  on.checks = XPJ_CHECK_BOUNDS;
  char dir[] = "/tmp/xpjit-bounds-XXXXXX";
  assert_non_null(mkdtemp(dir));
  xpj_context *plain = NULL; /* no checks unless asked: not the fixture's */
  assert_int_equal(xpj_context_create(NULL, &plain), XPJ_OK);
  xpj_program *pp = NULL;
  assert_int_equal(xpj_program_create(plain, "bounds.xpk", src, strlen(src),
                                      NULL, &pp), XPJ_OK);
  unsigned nk = xpj_program_kernel_count(pp);
  assert_int_equal(nk, 12);
  for (unsigned i = 0; i < nk; i++) {
    const char *name = xpj_program_kernel_name(pp, i);
    for (int t = 0; t < 2; t++) {
      const char *target = t ? "ptx:sm_90" : "ptx:sm_80";
      char *with = NULL, *without = NULL;
      size_t nw = 0, nwo = 0;
      if (xpj_program_get_binary(pp, name, NULL, 0, target, &on,
                                 (void **)&with, &nw) != XPJ_OK ||
          xpj_program_get_binary(pp, name, NULL, 0, target, NULL,
                                 (void **)&without, &nwo) != XPJ_OK)
        fail_msg("%s for %s: %s", name, target, xpj_last_error());
      with = realloc(with, nw + 1);
      without = realloc(without, nwo + 1);
      with[nw] = without[nwo] = 0;
      unsigned pw = 0, pwo = 0;
      for (const char *p = with; (p = strstr(p, ".param .")); p++)
        pw++;
      for (const char *p = without; (p = strstr(p, ".param .")); p++)
        pwo++;
      if (pw != pwo + 1)
        fail_msg("%s for %s: %u parameters checked, %u without", name,
                 target, pw, pwo);
      if (!strstr(with, "atom.global.or.b32"))
        fail_msg("%s for %s: no atom.global.or.b32 in the checked PTX", name,
                 target);
      if (ptxas) {
        char path[128], cmd[512];
        snprintf(path, sizeof path, "%s/%s.ptx", dir, name);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fwrite(with, 1, nw, f);
        fclose(f);
        snprintf(cmd, sizeof cmd, "'%s' -arch=%s '%s' -o /dev/null", ptxas,
                 t ? "sm_90" : "sm_80", path);
        if (system(cmd) != 0)
          fail_msg("ptxas rejects the checked %s for %s", name, target);
        remove(path);
      }
      free(with);
      free(without);
    }
    if (xpj_program_get_binary(pp, name, NULL, 0, "spirv", &on, NULL,
                               NULL) != XPJ_OK)
      fail_msg("%s for SPIR-V: %s", name, xpj_last_error());
  }
  xpj_program_destroy(pp);
  xpj_context_destroy(plain);
  rmdir(dir);
}

static void test_bad_setting(void **state) {
  (void)state;
  xpj_context *c = NULL;
  setenv("XPJIT_CHECK", "bounds,speling", 1);
  assert_int_equal(xpj_context_create(NULL, &c), XPJ_ERR_INVALID);
  assert_null(c);
  assert_non_null(strstr(xpj_last_error(), "speling"));
  setenv("XPJIT_CHECK", "none", 1);
  assert_int_equal(xpj_context_create(NULL, &c), XPJ_OK);
  xpj_context_destroy(c);
  unsetenv("XPJIT_CHECK");
  xpj_context_desc d = {0};
  d.checks = 1u << 7;
  assert_int_equal(xpj_context_create(&d, &c), XPJ_ERR_INVALID);
  unsigned bits = 9;
  char err[128];
  assert_int_equal(xpj_checks_parse("all", &bits, err, sizeof err), XPJ_OK);
  assert_int_equal(bits, XPJ_CHECK_ALL);
  assert_int_equal(xpj_checks_parse("", &bits, err, sizeof err), XPJ_OK);
  assert_int_equal(bits, 0);
  assert_int_equal(xpj_checks_parse("bounds,", &bits, err, sizeof err), XPJ_OK);
  assert_int_equal(bits, XPJ_CHECK_BOUNDS);
  assert_int_equal(xpj_checks_parse("bound", &bits, err, sizeof err),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_checks_parse(NULL, &bits, err, sizeof err),
                   XPJ_ERR_INVALID);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_past_end),
      cmocka_unit_test(test_before_start),
      cmocka_unit_test(test_unsigned_index),
      cmocka_unit_test(test_grid),
      cmocka_unit_test(test_flat),
      cmocka_unit_test(test_flat_broadcast),
      cmocka_unit_test(test_local),
      cmocka_unit_test(test_local_param),
      cmocka_unit_test(test_private),
      cmocka_unit_test(test_device_function),
      cmocka_unit_test(test_atomic),
      cmocka_unit_test(test_clean),
      cmocka_unit_test(test_program_gone),
      cmocka_unit_test(test_keyed_apart),
      cmocka_unit_test(test_ptx_and_spirv),
      cmocka_unit_test(test_bad_setting),
  };
  return cmocka_run_group_tests(tests, setup, devtest_teardown);
}
