/* test_dimorder.c - the dimension order (docs/abi.md, "Dimension order"):
 * in a launch of rank r, dimension r-1 varies fastest; linear ids are
 * row-major over the ids; a kernel without a declared rank is laid out by
 * the highest dimension it reads. Run on XPJIT_TEST_DEVICE (default: the
 * CPU device; tests/run_tests.sh runs it again on the OpenCL device); the
 * PTX checks need no device. The CUDA and Level Zero stand-ins check the
 * grid each launch becomes (tests/test_cuda.c, tests/test_ze.c). */
#include "testutil.h"

#include "devtest.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char src[] =
    /* every id of a 2-D nd-range, per work-item */
    "kernel ids2(out: global i64[,,]) ndrange(2) {\n"
    "  let i = global_id(0);\n"
    "  let j = global_id(1);\n"
    "  out[i, j, 0] = global_linear_id();\n"
    "  out[i, j, 1] = local_linear_id();\n"
    "  out[i, j, 2] = group_linear_id();\n"
    "  out[i, j, 3] = local_id(0) * 100 + local_id(1);\n"
    "  out[i, j, 4] = group_id(0) * 100 + group_id(1);\n"
    "  out[i, j, 5] = global_size(0) * 100 + global_size(1);\n"
    "  out[i, j, 6] = local_size(0) * 100 + local_size(1);\n"
    "  out[i, j, 7] = num_groups(0) * 100 + num_groups(1);\n"
    "}\n"
    /* the same through a barrier (the CPU's work-group code) */
    "kernel ids2b(out: global i64[,,]) ndrange(2) {\n"
    "  local t: i64[64];\n"
    "  t[local_linear_id()] = global_linear_id();\n"
    "  barrier(local);\n"
    "  let i = global_id(0);\n"
    "  let j = global_id(1);\n"
    "  out[i, j, 0] = t[local_linear_id()];\n"
    "  out[i, j, 1] = local_linear_id();\n"
    "  out[i, j, 2] = group_linear_id();\n"
    "  out[i, j, 3] = local_id(0) * 100 + local_id(1);\n"
    "  out[i, j, 4] = group_id(0) * 100 + group_id(1);\n"
    "}\n"
    /* 3-D: ids of a declared-rank range kernel */
    "kernel ids3(out: global i64[,,,]) range(3) {\n"
    "  out[global_id(0), global_id(1), global_id(2), 0] = global_linear_id();\n"
    "  out[global_id(0), global_id(1), global_id(2), 1] =\n"
    "      (global_id(0) * 100 + global_id(1)) * 100 + global_id(2);\n"
    "}\n"
    /* shape and stride of a dimension computed at run time */
    "kernel dimq(x: global f32[,], o: global i64[], d: i64) range(1) {\n"
    "  o[0] = shape(x, d);\n"
    "  o[1] = stride(x, d);\n"
    "}\n"
    /* a declared work-group size */
    "kernel fixed(out: global i64[,]) ndrange(2) local(4, 8) {\n"
    "  out[global_id(0), global_id(1)] = local_linear_id();\n"
    "}\n"
    /* no declared rank: reads only dimension 0 */
    "kernel flat(out: global i64[]) range {\n"
    "  out[global_linear_id()] = global_id(0);\n"
    "}\n"
    /* no declared rank: reads dimensions 0 and 1 */
    "kernel two(out: global i64[,]) range {\n"
    "  out[global_id(0), global_id(1)] = global_linear_id();\n"
    "}\n"
    /* which work-item ran before which, inside one group */
    "kernel order(seq: global i64[,], n: global i64[]) ndrange(2) {\n"
    "  seq[global_id(0), global_id(1)] =\n"
    "      atomic_add(&n[0], 1);\n"
    "}\n";

static bool is_cpu;

static int setup(void **state) {
  (void)state;
  if (devtest_setup("test_dimorder", "dimorder.xpk", src) != 0)
    return -1;
  xpj_device_info di;
  if (xpj_device_get_info(dev, &di) != XPJ_OK)
    return -1;
  is_cpu = di.backend == XPJ_BACKEND_CPU;
  printf("device: %s\n", di.name);
  return 0;
}

static int64_t *alloc_i64(size_t n) { return dev_alloc(n * 8, 0xff); }

static void run(xpj_kernel *k, const xpj_range *r, unsigned n,
                const xpj_arg *a) {
  if (xpj_launch(q, k, r, n, a, NULL) != XPJ_OK ||
      xpj_queue_wait(q) != XPJ_OK)
    fail_msg("launch: %s", xpj_last_error());
}

static void expect(const char *what, int64_t got, int64_t want, int i,
                   int j) {
  if (got != want)
    fail_msg("%s at (%d, %d): %lld, want %lld", what, i, j, (long long)got,
             (long long)want);
}

/* Global (6, 8), local (3, 4): groups (2, 2); dimension 1 fastest. */
static void check_ids2(const char *name, int fields) {
  enum { G0 = 6, G1 = 8, L0 = 3, L1 = 4, F = 8 };
  int64_t *out = alloc_i64(G0 * G1 * F);
  xpj_array a = {out, XPJ_I64, 3, 0, {G0, G1, F}, {G1 * F, F, 1}};
  xpj_arg arg = xpj_arg_array(&a);
  xpj_range r = xpj_range_2d(G0, G1, L0, L1);
  run(kern(name), &r, 1, &arg);
  for (int i = 0; i < G0; i++)
    for (int j = 0; j < G1; j++) {
      const int64_t *o = &out[(i * G1 + j) * F];
      int li = i % L0, lj = j % L1, gi = i / L0, gj = j / L1;
      expect("global_linear_id", o[0], i * G1 + j, i, j);
      expect("local_linear_id", o[1], li * L1 + lj, i, j);
      expect("group_linear_id", o[2], gi * (G1 / L1) + gj, i, j);
      expect("local_id", o[3], li * 100 + lj, i, j);
      expect("group_id", o[4], gi * 100 + gj, i, j);
      if (fields > 5) {
        expect("global_size", o[5], G0 * 100 + G1, i, j);
        expect("local_size", o[6], L0 * 100 + L1, i, j);
        expect("num_groups", o[7], (G0 / L0) * 100 + G1 / L1, i, j);
      }
    }
  xpj_mem_free(dev, out);
}

static void test_ndrange_ids(void **state) {
  (void)state;
  check_ids2("ids2", 8);
  check_ids2("ids2b", 5);
}

static void test_range3_ids(void **state) {
  (void)state;
  enum { A = 3, B = 5, C = 7 };
  int64_t *out = alloc_i64(A * B * C * 2);
  xpj_array a = {out, XPJ_I64, 4, 0, {A, B, C, 2}, {B * C * 2, C * 2, 2, 1}};
  xpj_arg arg = xpj_arg_array(&a);
  xpj_range r = xpj_range_3d(A, B, C, 0, 0, 0);
  run(kern("ids3"), &r, 1, &arg);
  for (int i = 0; i < A * B * C; i++) {
    int x = i / (B * C), y = i / C % B, z = i % C;
    expect("global_linear_id", out[2 * i], i, i, 0);
    expect("ids", out[2 * i + 1], (x * 100 + y) * 100 + z, i, 0);
  }
  xpj_mem_free(dev, out);
}

/* A kernel without a declared rank that reads dimension 0 only, launched
 * in 1, 2 and 3 dimensions: the linear id stays row-major over the launch. */
static void test_undeclared_rank(void **state) {
  (void)state;
  xpj_kernel *k = kern("flat");
  const uint64_t shapes[3][3] = {{37, 1, 1}, {5, 7, 1}, {3, 4, 5}};
  for (unsigned nd = 1; nd <= 3; nd++) {
    const uint64_t *g = shapes[nd - 1];
    size_t n = (size_t)(g[0] * g[1] * g[2]);
    int64_t *out = alloc_i64(n);
    xpj_array a = xpj_array_1d(out, XPJ_I64, (int64_t)n);
    xpj_arg arg = xpj_arg_array(&a);
    xpj_range r = {nd, {g[0], g[1], g[2]}, {0, 0, 0}};
    run(k, &r, 1, &arg);
    for (size_t i = 0; i < n; i++)
      expect("global_id(0)", out[i], (int64_t)(i / (n / g[0])), (int)i, (int)nd);
    xpj_mem_free(dev, out);
  }
  /* reads dimensions 0 and 1; launched in 2 dimensions and in 1 */
  k = kern("two");
  int64_t *out = alloc_i64(6 * 9);
  xpj_array a = xpj_array_2d(out, XPJ_I64, 6, 9);
  xpj_arg arg = xpj_arg_array(&a);
  xpj_range r = xpj_range_2d(6, 9, 0, 0);
  run(k, &r, 1, &arg);
  for (int i = 0; i < 54; i++)
    expect("global_linear_id", out[i], i, i / 9, i % 9);
  memset(out, 0xff, 6 * 9 * 8);
  r = xpj_range_1d(6, 0);
  run(k, &r, 1, &arg);
  for (int i = 0; i < 6; i++)
    expect("global_linear_id (1-D)", out[i * 9], i, i, 0);
  xpj_mem_free(dev, out);
}

/* The CPU device runs a group's work-items in a loop nest whose innermost
 * loop is the last dimension: the order they ran in is row-major. */
static void test_cpu_order(void **state) {
  (void)state;
  if (!is_cpu) {
    printf("NOTE: test_cpu_order: the execution order is the CPU device's\n");
    return;
  }
  int64_t *seq = alloc_i64(4 * 8), *n = alloc_i64(1);
  n[0] = 0;
  xpj_array as = xpj_array_2d(seq, XPJ_I64, 4, 8), an = xpj_array_1d(n, XPJ_I64, 1);
  xpj_arg args[] = {xpj_arg_array(&as), xpj_arg_array(&an)};
  xpj_range r = xpj_range_2d(4, 8, 4, 8); /* one group */
  run(kern("order"), &r, 2, args);
  for (int i = 0; i < 32; i++)
    expect("position in the run", seq[i], i, i / 8, i % 8);
  xpj_mem_free(dev, seq);
  xpj_mem_free(dev, n);
}

/* The runtime's local size puts the budget on the fastest dimension. */
static void test_suggest_local(void **state) {
  (void)state;
  uint64_t g[2] = {1024, 1024}, l[2];
  assert_int_equal(xpj_kernel_suggest_local(kern("ids2"), 2, g, l), XPJ_OK);
  if (l[1] < l[0])
    fail_msg("suggested local size %llu x %llu: dimension 1 is the fastest",
             (unsigned long long)l[0], (unsigned long long)l[1]);
}

/* shape(x, d) and stride(x, d) of a d computed at run time: the
 * dimension's, and 0 for a d that names none (dimension 0's before: 3 and
 * 4 for d = 5 of a 3 x 4 array), as a constant d folds to. */
static void test_runtime_dimension_query(void **state) {
  (void)state;
  float *x = NULL;
  int64_t *o = NULL;
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, 12 * 4, 0,
                                 (void **)&x), XPJ_OK);
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, 2 * 8, 0,
                                 (void **)&o), XPJ_OK);
  int64_t shape[2] = {3, 4}, n2 = 2;
  xpj_array X = xpj_array_nd(x, XPJ_F32, 2, shape);
  xpj_array O = xpj_array_nd(o, XPJ_I64, 1, &n2);
  static const int64_t ds[] = {0, 1, 2, 5, -1, INT64_MIN};
  static const int64_t want[][2] = {{3, 4}, {4, 1}, {0, 0}, {0, 0}, {0, 0},
                                    {0, 0}};
  for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) {
    xpj_arg args[3] = {xpj_arg_array(&X), xpj_arg_array(&O),
                       xpj_arg_i64(ds[i])};
    o[0] = o[1] = -7;
    xpj_range r = xpj_range_1d(1, 0);
    run(kern("dimq"), &r, 3, args);
    if (o[0] != want[i][0] || o[1] != want[i][1])
      fail_msg("d = %lld: shape %lld, stride %lld; expected %lld, %lld",
               (long long)ds[i], (long long)o[0], (long long)o[1],
               (long long)want[i][0], (long long)want[i][1]);
  }
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, o);
}

/* xpj_kernel_suggest_local refuses what a launch refuses, rather than
 * suggesting a size the launch then turns down: a global size the
 * declared local size does not divide (it suggested local(4, 8) itself),
 * more than 2^62 work-items in all (it suggested a size), and the rest
 * as before. */
static void test_suggest_refuses(void **state) {
  (void)state;
  uint64_t l[3] = {0, 0, 0};
  uint64_t ok[2] = {8, 16}, odd[2] = {8, 12}, huge[2] = {1ull << 40, 1ull << 40};
  assert_int_equal(xpj_kernel_suggest_local(kern("fixed"), 2, ok, l), XPJ_OK);
  assert_true(l[0] == 4 && l[1] == 8);
  assert_int_equal(xpj_kernel_suggest_local(kern("fixed"), 2, odd, l),
                   XPJ_ERR_INVALID);
  assert_non_null(strstr(xpj_last_error(), "12 in dimension 1 is not a "
                         "multiple of the local size 8 the kernel requires"));
  assert_int_equal(xpj_kernel_suggest_local(kern("ids2"), 2, huge, l),
                   XPJ_ERR_INVALID);
  assert_non_null(strstr(xpj_last_error(), "more than 2^62 in all"));
  /* and the launch says the same of both */
  int64_t shape[2] = {8, 12};
  int64_t *out = NULL;
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, 8 * 12 * 8, 0,
                                 (void **)&out), XPJ_OK);
  xpj_array a = xpj_array_nd(out, XPJ_I64, 2, shape);
  xpj_arg arg = xpj_arg_array(&a);
  xpj_range r = {2, {8, 12, 1}, {0, 0, 0}};
  assert_int_equal(xpj_launch(q, kern("fixed"), &r, 1, &arg, NULL),
                   XPJ_ERR_INVALID);
  assert_non_null(strstr(xpj_last_error(), "not a multiple"));
  xpj_range rh = {2, {1ull << 40, 1ull << 40, 1}, {0, 0, 0}};
  assert_int_equal(xpj_launch(q, kern("ids2"), &rh, 1, &arg, NULL),
                   XPJ_ERR_INVALID);
  assert_non_null(strstr(xpj_last_error(), "more than 2^62 in all"));
  uint64_t zero[2] = {0, 4};
  assert_int_equal(xpj_kernel_suggest_local(kern("ids2"), 2, zero, l),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_kernel_suggest_local(kern("ids2"), 3, ok, l),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_kernel_suggest_local(NULL, 2, ok, l), XPJ_ERR_INVALID);
  xpj_mem_free(dev, out);
}

/* PTX of a kernel that reads one local id. */
static char *ptx_of(const char *id) {
  char k[160];
  snprintf(k, sizeof k, "kernel p(out: global i64[]) ndrange(2) {\n"
           "  out[0] = %s;\n}\n", id);
  xpj_program *p = NULL;
  assert_int_equal(xpj_program_create(ctx, "p.xpk", k, strlen(k), NULL, &p),
                   XPJ_OK);
  void *bin = NULL;
  size_t n = 0;
  if (xpj_program_get_binary(p, "p", NULL, 0, "ptx:sm_90", NULL, &bin, &n) !=
      XPJ_OK)
    fail_msg("ptx: %s", xpj_last_error());
  char *text = calloc(1, n + 1);
  memcpy(text, bin, n);
  free(bin);
  xpj_program_destroy(p);
  return text;
}

/* PTX: dimension 1 of a 2-D kernel is x, dimension 0 is y. */
static void test_ptx(void **state) {
  (void)state;
  char *t1 = ptx_of("local_id(1)"), *t0 = ptx_of("local_id(0)");
  if (!strstr(t1, "%tid.x") || strstr(t1, "%tid.y"))
    fail_msg("local_id(1) of a 2-D kernel is not %%tid.x:\n%s", t1);
  if (!strstr(t0, "%tid.y") || strstr(t0, "%tid.x"))
    fail_msg("local_id(0) of a 2-D kernel is not %%tid.y:\n%s", t0);
  free(t1);
  free(t0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ndrange_ids),
      cmocka_unit_test(test_range3_ids),
      cmocka_unit_test(test_undeclared_rank),
      cmocka_unit_test(test_cpu_order),
      cmocka_unit_test(test_suggest_local),
      cmocka_unit_test(test_suggest_refuses),
      cmocka_unit_test(test_runtime_dimension_query),
      cmocka_unit_test(test_ptx),
  };
  return cmocka_run_group_tests(tests, setup, devtest_teardown);
}
