/* test_interchange.c - kernels whose loops the CPU device runs at
 * work-group level with the work-item loop inside (docs/abi.md, "Loops
 * inside the work-item"; compiler/uniform.c), and kernels next to them
 * that it must not interchange, against C references: range kernels run in
 * chunks that end mid-row and mid-launch, early returns before and inside
 * such loops, loop bounds that depend on a slower dimension, variables
 * updated identically by every work-item, nested loops, and `let` values
 * that must not follow later stores; a loop of one work-item over
 * contiguous and strided views (the CPU's two versions of it). Run on
 * XPJIT_TEST_DEVICE (default: the CPU device; tests/run_tests.sh runs it
 * again on the OpenCL device). */
#include "testutil.h"

#include "devtest.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char src[] =
    /* naive matmul: the k loop is interchanged */
    "kernel mm(a: global const i64[,], b: global const i64[,], c: global i64[,]) range(2) {\n"
    "  let row = global_id(0);\n"
    "  let col = global_id(1);\n"
    "  let acc: i64 = 0;\n"
    "  for (let k: i64 = 0; k < shape(a, 1); k++) {\n"
    "    acc += a[row, k] * b[k, col];\n"
    "  }\n"
    "  c[row, col] = acc;\n"
    "}\n"
    /* an early return before the loop, a variable every work-item updates
     * the same way, an inner loop whose bound depends on the outer counter,
     * and a let value read after its source is overwritten */
    "kernel mix(x: global const i64[], z: global i64[], y: global i64[], n: i64) range(1) {\n"
    "  let i = global_id(0);\n"
    "  if i >= n { return; }\n"
    "  let v = z[i];\n"
    "  z[i] = -1;\n"
    "  let s: i64 = 0;\n"
    "  let t: i64 = 1;\n"
    "  for (let k: i64 = 0; k < n; k++) {\n"
    "    for (let j: i64 = 0; j < k % 3; j++) {\n"
    "      s += x[k] * x[j];\n"
    "    }\n"
    "    s += v * t;\n"
    "    t = t * 3 % 1000;\n"
    "  }\n"
    "  y[i] = s + v;\n"
    "}\n"
    /* a bound from the slower dimension, a return inside the loop */
    "kernel tri(x: global const i64[], y: global i64[,]) range(2) {\n"
    "  let r = global_id(0);\n"
    "  let c = global_id(1);\n"
    "  let s: i64 = 0;\n"
    "  for (let k: i64 = 0; k <= r; k++) {\n"
    "    s += x[k] * (c + 1);\n"
    "    if s > 5000 { y[r, c] = -s; return; }\n"
    "  }\n"
    "  y[r, c] = s;\n"
    "}\n"
    /* not interchanged: a bound per work-item, and a break */
    "kernel own(x: global const i64[], y: global i64[]) range(1) {\n"
    "  let i = global_id(0);\n"
    "  let s: i64 = 0;\n"
    "  for (let k: i64 = 0; k < i % 7; k++) {\n"
    "    s += x[k];\n"
    "  }\n"
    "  for (let k: i64 = 0; k < shape(x, 0); k++) {\n"
    "    if x[k] == i { break; }\n"
    "    s += 1;\n"
    "  }\n"
    "  y[i] = s;\n"
    "}\n"
    /* nd-range without a barrier, and with one around the loop */
    "kernel ndsum(x: global const i64[], y: global i64[], m: i64) ndrange(1) {\n"
    "  let i = global_id(0);\n"
    "  let s: i64 = 0;\n"
    "  for (let k: i64 = 0; k < m; k++) {\n"
    "    s += x[k] * (local_id(0) + 1) + group_id(0);\n"
    "  }\n"
    "  y[i] = s;\n"
    "}\n"
    "kernel ndbar(x: global const i64[], y: global i64[], m: i64) ndrange(1) {\n"
    "  local t: i64[64];\n"
    "  let l = local_id(0);\n"
    "  t[l] = x[global_id(0)];\n"
    "  barrier(local);\n"
    "  let s: i64 = 0;\n"
    "  for (let k: i64 = 0; k < m; k++) {\n"
    "    s += t[(l + k) % local_size(0)];\n"
    "  }\n"
    "  barrier(local);\n"
    "  t[l] = s;\n"
    "  barrier(local);\n"
    "  y[global_id(0)] = t[local_size(0) - 1 - l];\n"
    "}\n"
    /* shape() and stride() of a dimension that differs per work-item,
     * kept across a barrier */
    "kernel dimvar(a: global const i64[,], o: global i64[]) ndrange(1) {\n"
    "  let i = global_id(0);\n"
    "  let d = shape(a, i % 2) * 10 + stride(a, i % 2);\n"
    "  barrier(local);\n"
    "  o[i] = d;\n"
    "}\n"
    /* a loop of one work-item over views (not interchanged: a bound per
     * work-item, a break): the CPU runs it in a version for unit last
     * strides and one for any; stride() inside sees the real strides */
    "kernel per(x: global const i64[], y: global i64[,], per: i64) range(1) {\n"
    "  let i = global_id(0);\n"
    "  for (let k = i * per; k < i * per + per + i % 3; k++) {\n"
    "    if k >= shape(x, 0) { break; }\n"
    "    y[i, x[k] % 4] += x[k] * stride(x, 0) + stride(y, 1);\n"
    "  }\n"
    "}\n";

static int setup(void **state) {
  (void)state;
  return devtest_setup("test_interchange", "interchange.xpk", src);
}

static int64_t *alloc_i64(size_t n) { return dev_alloc(n * 8, 0x5a); }

static void run(xpj_kernel *k, const xpj_range *r, unsigned n,
                const xpj_arg *a) {
  if (xpj_launch(q, k, r, n, a, NULL) != XPJ_OK || xpj_queue_wait(q) != XPJ_OK)
    fail_msg("launch: %s", xpj_last_error());
}

static void expect(const char *what, int64_t got, int64_t want, int i, int j) {
  if (got != want)
    fail_msg("%s at (%d, %d): %lld, want %lld", what, i, j, (long long)got,
             (long long)want);
}

static uint32_t seed = 7;
static int64_t rnd(int64_t mod) {
  seed = seed * 1664525u + 1013904223u;
  return (int64_t)((seed >> 8) % (uint32_t)mod);
}

/* Rows longer than a chunk, not a multiple of it, split across threads. */
static void test_matmul(void **state) {
  (void)state;
  enum { M = 5, K = 19, N = 700 };
  int64_t *a = alloc_i64(M * K), *b = alloc_i64(K * N), *c = alloc_i64(M * N);
  for (int i = 0; i < M * K; i++)
    a[i] = rnd(100) - 50;
  for (int i = 0; i < K * N; i++)
    b[i] = rnd(100) - 50;
  xpj_array A = xpj_array_2d(a, XPJ_I64, M, K), B = xpj_array_2d(b, XPJ_I64, K, N),
            C = xpj_array_2d(c, XPJ_I64, M, N);
  xpj_arg args[3] = {xpj_arg_array(&A), xpj_arg_array(&B), xpj_arg_array(&C)};
  xpj_range r = xpj_range_2d(M, N, 0, 0);
  run(kern("mm"), &r, 3, args);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      int64_t s = 0;
      for (int k = 0; k < K; k++)
        s += a[i * K + k] * b[k * N + j];
      expect("mm", c[i * N + j], s, i, j);
    }
  xpj_mem_free(dev, a);
  xpj_mem_free(dev, b);
  xpj_mem_free(dev, c);
}

static void test_mix(void **state) {
  (void)state;
  enum { N = 300, G = 333 };
  int64_t *x = alloc_i64(G), *z = alloc_i64(G), *y = alloc_i64(G), z0[G];
  for (int i = 0; i < G; i++) {
    x[i] = rnd(20) - 10;
    z0[i] = z[i] = rnd(20) - 10;
  }
  for (int i = N; i < G; i++)
    y[i] = 77;
  xpj_array X = xpj_array_1d(x, XPJ_I64, G), Z = xpj_array_1d(z, XPJ_I64, G),
            Y = xpj_array_1d(y, XPJ_I64, G);
  xpj_arg args[4] = {xpj_arg_array(&X), xpj_arg_array(&Z), xpj_arg_array(&Y),
                     xpj_arg_i64(N)};
  xpj_range r = xpj_range_1d(G, 0);
  run(kern("mix"), &r, 4, args);
  for (int i = 0; i < G; i++) {
    if (i >= N) {
      expect("returned y", y[i], 77, i, 0);
      expect("returned z", z[i], z0[i], i, 0);
      continue;
    }
    int64_t s = 0, t = 1;
    for (int k = 0; k < N; k++) {
      for (int j = 0; j < k % 3; j++)
        s += x[k] * x[j];
      s += z0[i] * t;
      t = t * 3 % 1000;
    }
    expect("mix", y[i], s + z0[i], i, 0);
    expect("z", z[i], -1, i, 0);
  }
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, z);
  xpj_mem_free(dev, y);
}

static void test_tri(void **state) {
  (void)state;
  enum { R = 40, C = 300 };
  int64_t *x = alloc_i64(R), *y = alloc_i64(R * C);
  for (int i = 0; i < R; i++)
    x[i] = rnd(30);
  xpj_array X = xpj_array_1d(x, XPJ_I64, R), Y = xpj_array_2d(y, XPJ_I64, R, C);
  xpj_arg args[2] = {xpj_arg_array(&X), xpj_arg_array(&Y)};
  xpj_range r = xpj_range_2d(R, C, 0, 0);
  run(kern("tri"), &r, 2, args);
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) {
      int64_t s = 0, want;
      int k;
      for (k = 0; k <= i; k++) {
        s += x[k] * (j + 1);
        if (s > 5000)
          break;
      }
      want = k <= i ? -s : s;
      expect("tri", y[i * C + j], want, i, j);
    }
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, y);
}

static void test_own(void **state) {
  (void)state;
  enum { N = 100 };
  int64_t *x = alloc_i64(N), *y = alloc_i64(N);
  for (int i = 0; i < N; i++)
    x[i] = rnd(N);
  xpj_array X = xpj_array_1d(x, XPJ_I64, N), Y = xpj_array_1d(y, XPJ_I64, N);
  xpj_arg args[2] = {xpj_arg_array(&X), xpj_arg_array(&Y)};
  xpj_range r = xpj_range_1d(N, 0);
  run(kern("own"), &r, 2, args);
  for (int i = 0; i < N; i++) {
    int64_t s = 0;
    for (int k = 0; k < i % 7; k++)
      s += x[k];
    for (int k = 0; k < N && x[k] != i; k++)
      s += 1;
    expect("own", y[i], s, i, 0);
  }
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, y);
}

static void test_ndrange(void **state) {
  (void)state;
  enum { G = 192, L = 64, M = 37 };
  int64_t *x = alloc_i64(G), *y = alloc_i64(G);
  for (int i = 0; i < G; i++)
    x[i] = rnd(50) - 25;
  xpj_array X = xpj_array_1d(x, XPJ_I64, G), Y = xpj_array_1d(y, XPJ_I64, G);
  xpj_arg args[3] = {xpj_arg_array(&X), xpj_arg_array(&Y), xpj_arg_i64(M)};
  xpj_range r = xpj_range_1d(G, L);
  run(kern("ndsum"), &r, 3, args);
  for (int i = 0; i < G; i++) {
    int64_t s = 0;
    for (int k = 0; k < M; k++)
      s += x[k] * (i % L + 1) + i / L;
    expect("ndsum", y[i], s, i, 0);
  }
  run(kern("ndbar"), &r, 3, args);
  for (int i = 0; i < G; i++) {
    int g = i / L, l = L - 1 - i % L;
    int64_t s = 0;
    for (int k = 0; k < M; k++)
      s += x[g * L + (l + k) % L];
    expect("ndbar", y[i], s, i, 0);
  }
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, y);
}

/* The same kernel over contiguous views and over strided ones (x every
 * other element, y transposed), so that both versions of the loop run. */
static void test_unit_strides(void **state) {
  (void)state;
  enum { N = 50, PER = 7, X = N * PER };
  int64_t *x = alloc_i64(2 * X), *y = alloc_i64(N * 4);
  for (int i = 0; i < 2 * X; i++)
    x[i] = rnd(1000);
  for (int strided = 0; strided < 2; strided++) {
    int64_t sx = strided ? 2 : 1;
    xpj_array XV = xpj_array_1d(x, XPJ_I64, X), YV = xpj_array_2d(y, XPJ_I64, N, 4);
    XV.strides[0] = sx;
    if (strided) { /* y[i, j] at j * N + i */
      YV.strides[0] = 1;
      YV.strides[1] = N;
    }
    memset(y, 0, N * 4 * sizeof *y);
    xpj_arg args[3] = {xpj_arg_array(&XV), xpj_arg_array(&YV),
                       xpj_arg_i64(PER)};
    xpj_range r = xpj_range_1d(N, 0);
    run(kern("per"), &r, 3, args);
    for (int i = 0; i < N; i++) {
      int64_t want[4] = {0, 0, 0, 0};
      for (int k = i * PER; k < i * PER + PER + i % 3 && k < X; k++)
        want[x[k * sx] % 4] += x[k * sx] * sx + YV.strides[1];
      for (int j = 0; j < 4; j++)
        expect(strided ? "per, strided" : "per, contiguous",
               y[j * YV.strides[1] + i * YV.strides[0]], want[j], i, j);
    }
  }
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, y);
}

static void test_dimvar(void **state) {
  (void)state;
  enum { N = 48 };
  int64_t *a = alloc_i64(15), *o = alloc_i64(N);
  xpj_array A = xpj_array_2d(a, XPJ_I64, 3, 5), O = xpj_array_1d(o, XPJ_I64, N);
  xpj_arg args[2] = {xpj_arg_array(&A), xpj_arg_array(&O)};
  xpj_range r = xpj_range_1d(N, 16);
  run(kern("dimvar"), &r, 2, args);
  for (int i = 0; i < N; i++)
    expect("dimvar", o[i], i % 2 ? 5 * 10 + 1 : 3 * 10 + 5, i, 0);
  xpj_mem_free(dev, a);
  xpj_mem_free(dev, o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul), cmocka_unit_test(test_mix),
      cmocka_unit_test(test_tri),    cmocka_unit_test(test_own),
      cmocka_unit_test(test_ndrange), cmocka_unit_test(test_unit_strides),
      cmocka_unit_test(test_dimvar),
  };
  return cmocka_run_group_tests(tests, setup, devtest_teardown);
}
