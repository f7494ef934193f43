/* test_launch_local.c - the local size a kernel requires (`ndrange(2)
 * local(16, 16)`, docs/language.md): used when a launch leaves the local
 * size to the runtime, refused when a launch gives another one (the error
 * names both), reported by xpj_kernel_get_info and
 * xpj_kernel_suggest_local. The tiled stencil that crashed the host when
 * the runtime chose 256 x 1 for it (issue 17) runs with local = 0 and
 * matches a C reference, with the attribute and without it (the runtime
 * then derives the size from the tile's indices, ir/localfit.c); a kernel
 * that overruns its tile whatever the size is refused. Run on XPJIT_TEST_DEVICE (default: the CPU
 * device; tests/run_tests.sh runs it again on the OpenCL device). */
#include "testutil.h"

#include "devtest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a 5-point stencil over a tile with a one-element halo, indexed by local
 * id: only correct for TS x TS groups */
#define STENCIL_BODY                                                          \
  "  local t: f32[TS + 2, TS + 2];\n"                                         \
  "  let gy = global_id(0);\n"                                                \
  "  let gx = global_id(1);\n"                                                \
  "  let ly = local_id(0) + 1;\n"                                             \
  "  let lx = local_id(1) + 1;\n"                                             \
  "  let h = shape(u, 0);\n"                                                  \
  "  let w = shape(u, 1);\n"                                                  \
  "  t[ly, lx] = u[gy, gx];\n"                                                \
  "  if ly == 1 { t[0, lx] = u[max(gy - 1, 0), gx]; }\n"                      \
  "  if ly == TS { t[TS + 1, lx] = u[min(gy + 1, h - 1), gx]; }\n"            \
  "  if lx == 1 { t[ly, 0] = u[gy, max(gx - 1, 0)]; }\n"                      \
  "  if lx == TS { t[ly, TS + 1] = u[gy, min(gx + 1, w - 1)]; }\n"            \
  "  barrier(local);\n"                                                       \
  "  out[gy, gx] = 0.25f32 * (t[ly - 1, lx] + t[ly + 1, lx] + "               \
  "t[ly, lx - 1] + t[ly, lx + 1]);\n"                                         \
  "}\n"

static const char src[] =
    "const TS: i64 = 16;\n"
    "kernel stencil(u: global const f32[,], out: global f32[,]) "
    "ndrange(2) local(TS, TS) {\n" STENCIL_BODY
    /* the same without the attribute: the runtime derives 16 x 16 from
     * the tile's indices */
    "kernel stencil_free(u: global const f32[,], out: global f32[,]) "
    "ndrange(2) {\n" STENCIL_BODY
    /* a tree reduction over a 64-element tile */
    "kernel reduce64(x: global const i64[], o: global i64[]) ndrange(1) {\n"
    "  local t: i64[64];\n"
    "  let lid = local_id(0);\n"
    "  t[lid] = x[global_id(0)];\n"
    "  barrier(local);\n"
    "  for (let s = local_size(0) / 2; s > 0; s >>= 1) {\n"
    "    if lid < s { t[lid] += t[lid + s]; }\n"
    "    barrier(local);\n"
    "  }\n"
    "  if lid == 0 { o[group_id(0)] = t[0]; }\n"
    "}\n"
    /* the same with a constant trip count: LLVM unrolls the loop, and
     * without `convergent` on SPIR-V's barrier it copied the barriers into
     * both arms of `lid < s` (OpenCL then wrote nothing) */
    "kernel reduce64c(x: global const i64[], o: global i64[]) ndrange(1) "
    "local(64) {\n"
    "  local t: i64[64];\n"
    "  let lid = local_id(0);\n"
    "  t[lid] = x[global_id(0)];\n"
    "  barrier(local);\n"
    "  for (let s = 32; s > 0; s >>= 1) {\n"
    "    if lid < s { t[lid] += t[lid + s]; }\n"
    "    barrier(local);\n"
    "  }\n"
    "  if lid == 0 { o[group_id(0)] = t[0]; }\n"
    "}\n"
    /* overruns its tile whatever the group: the runtime will not choose */
    "kernel overrun(o: global f32[]) ndrange(1) {\n"
    "  local t: f32[256];\n"
    "  t[local_id(0) + 300] = 1.0f32;\n"
    "  o[global_id(0)] = 0.0f32;\n"
    "}\n"
    /* what the work-items see of their group */
    "kernel ids(o: global i64[,]) ndrange(2) local(2, 8) {\n"
    "  o[global_id(0), global_id(1)] = local_size(0) * 1000 + "
    "local_size(1) * 100 + local_linear_id();\n"
    "}\n"
    "kernel free(o: global i64[]) ndrange(1) {\n"
    "  o[global_id(0)] = local_size(0);\n"
    "}\n";

static int setup(void **state) {
  (void)state;
  return devtest_setup("test_launch_local", "launch_local.xpk", src);
}

static void *alloc(size_t bytes) { return dev_alloc(bytes, 0x5a); }

static xpj_status launch(xpj_kernel *k, const xpj_range *r, unsigned n,
                         const xpj_arg *a) {
  xpj_status st = xpj_launch(q, k, r, n, a, NULL);
  if (st == XPJ_OK && xpj_queue_wait(q) != XPJ_OK)
    fail_msg("wait: %s", xpj_last_error());
  return st;
}

/* The stencil, local = 0: the runtime takes the required 16 x 16,
 * and for the same kernel without the attribute, the 16 x 16 its tile
 * allows (the runtime used to take 1 x 256 and overrun it). */
static void check_stencil(const char *name) {
  enum { H = 48, W = 64 };
  xpj_kernel *k = kern(name);
  uint64_t global[2] = {H, W}, local[2] = {0, 0};
  assert_int_equal(xpj_kernel_suggest_local(k, 2, global, local), XPJ_OK);
  if (local[0] != 16 || local[1] != 16)
    fail_msg("%s: suggested %llu x %llu, want 16 x 16", name,
             (unsigned long long)local[0], (unsigned long long)local[1]);
  float *u = alloc(H * W * 4), *out = alloc(H * W * 4);
  for (int i = 0; i < H * W; i++)
    u[i] = (float)((i * 37) % 101) / 7.0f;
  xpj_array U = xpj_array_2d(u, XPJ_F32, H, W), O = xpj_array_2d(out, XPJ_F32, H, W);
  xpj_arg args[2] = {xpj_arg_array(&U), xpj_arg_array(&O)};
  xpj_range r = xpj_range_2d(H, W, 0, 0);
  if (launch(k, &r, 2, args) != XPJ_OK)
    fail_msg("%s: %s", name, xpj_last_error());
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) {
      int ym = y > 0 ? y - 1 : 0, yp = y < H - 1 ? y + 1 : H - 1;
      int xm = x > 0 ? x - 1 : 0, xp = x < W - 1 ? x + 1 : W - 1;
      float want = 0.25f * (u[ym * W + x] + u[yp * W + x] + u[y * W + xm] +
                            u[y * W + xp]);
      if (out[y * W + x] != want)
        fail_msg("%s at (%d, %d): %g, want %g", name, y, x, out[y * W + x],
                 want);
    }
  xpj_mem_free(dev, u);
  xpj_mem_free(dev, out);
}

static void test_stencil_default_local(void **state) {
  (void)state;
  check_stencil("stencil");
  check_stencil("stencil_free");
}

/* A reduction over a 64-element tile, local = 0 over 1024 items: the
 * runtime takes 64 (its plain choice would be 256, or the kernel requires
 * it), and every group's sum is right. */
static void check_reduce(const char *name) {
  enum { N = 1024 };
  xpj_kernel *k = kern(name);
  uint64_t global = N, local = 0;
  assert_int_equal(xpj_kernel_suggest_local(k, 1, &global, &local), XPJ_OK);
  assert_int_equal(local, 64);
  int64_t *x = alloc(N * 8), *o = alloc(N / 64 * 8);
  for (int i = 0; i < N; i++)
    x[i] = i * 3 - 7;
  xpj_array X = xpj_array_1d(x, XPJ_I64, N), O = xpj_array_1d(o, XPJ_I64, N / 64);
  xpj_arg args[2] = {xpj_arg_array(&X), xpj_arg_array(&O)};
  xpj_range r = xpj_range_1d(N, 0);
  if (launch(k, &r, 2, args) != XPJ_OK)
    fail_msg("%s: %s", name, xpj_last_error());
  for (int g = 0; g < N / 64; g++) {
    int64_t want = 0;
    for (int i = g * 64; i < (g + 1) * 64; i++)
      want += x[i];
    if (o[g] != want)
      fail_msg("%s: group %d: %lld, want %lld", name, g, (long long)o[g],
               (long long)want);
  }
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, o);
}

static void test_reduce_default_local(void **state) {
  (void)state;
  check_reduce("reduce64");
  check_reduce("reduce64c");
}

/* A kernel that overruns its tile in every group: local = 0 is refused
 * with the array, the index's position and its range; nothing runs. */
static void test_refused_default(void **state) {
  (void)state;
  xpj_kernel *k = kern("overrun");
  float *o = alloc(64 * 4);
  xpj_array O = xpj_array_1d(o, XPJ_F32, 64);
  xpj_arg arg = xpj_arg_array(&O);
  xpj_range r = xpj_range_1d(64, 0);
  assert_int_equal(launch(k, &r, 1, &arg), XPJ_ERR_INVALID);
  const char *e = xpj_last_error();
  if (!strstr(e, "'t'") || !strstr(e, "launch_local.xpk:") ||
      !strstr(e, "300..300") || !strstr(e, "256") || !strstr(e, "local size"))
    fail_msg("the error does not say what overruns where: %s", e);
  uint64_t global = 64, local = 0;
  assert_int_equal(xpj_kernel_suggest_local(k, 1, &global, &local),
                   XPJ_ERR_INVALID);
  xpj_mem_free(dev, o);
}

/* The required size is what the work-items see, what the runtime
 * suggests, and the only local size a launch may give. */
static void test_required_size(void **state) {
  (void)state;
  enum { H = 4, W = 16 };
  xpj_kernel *k = kern("ids");
  xpj_kernel_info ki;
  assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
  assert_int_equal(ki.reqd_local[0], 2);
  assert_int_equal(ki.reqd_local[1], 8);
  assert_int_equal(ki.reqd_local[2], 0);
  uint64_t global[2] = {H, W}, local[2] = {0, 0};
  assert_int_equal(xpj_kernel_suggest_local(k, 2, global, local), XPJ_OK);
  assert_int_equal(local[0], 2);
  assert_int_equal(local[1], 8);

  int64_t *o = alloc(H * W * 8);
  xpj_array O = xpj_array_2d(o, XPJ_I64, H, W);
  xpj_arg arg = xpj_arg_array(&O);
  xpj_range r = xpj_range_2d(H, W, 0, 0);
  assert_int_equal(launch(k, &r, 1, &arg), XPJ_OK);
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++)
      assert_int_equal(o[y * W + x], 2 * 1000 + 8 * 100 + (y % 2) * 8 + x % 8);
  r = xpj_range_2d(H, W, 2, 8); /* the same, given */
  assert_int_equal(launch(k, &r, 1, &arg), XPJ_OK);

  r = xpj_range_2d(H, W, 4, 4);
  assert_int_equal(launch(k, &r, 1, &arg), XPJ_ERR_INVALID);
  const char *e = xpj_last_error();
  if (!strstr(e, "4 x 4") || !strstr(e, "2 x 8") || !strstr(e, "ids"))
    fail_msg("the error does not name both sizes and the kernel: %s", e);
  r = xpj_range_2d(H, W, 8, 2); /* the transpose is another size */
  assert_int_equal(launch(k, &r, 1, &arg), XPJ_ERR_INVALID);
  r = xpj_range_2d(H, 12, 0, 0); /* 12 is not a multiple of 8 */
  assert_int_equal(launch(k, &r, 1, &arg), XPJ_ERR_INVALID);
  xpj_mem_free(dev, o);
}

/* Kernels without a required size keep the runtime's choice. */
static void test_free_size(void **state) {
  (void)state;
  enum { N = 512 };
  xpj_kernel *k = kern("free");
  xpj_kernel_info ki;
  assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
  assert_int_equal(ki.reqd_local[0], 0);
  int64_t *o = alloc(N * 8);
  xpj_array O = xpj_array_1d(o, XPJ_I64, N);
  xpj_arg arg = xpj_arg_array(&O);
  uint64_t global = N, local = 0;
  assert_int_equal(xpj_kernel_suggest_local(k, 1, &global, &local), XPJ_OK);
  xpj_range r = xpj_range_1d(N, 0);
  assert_int_equal(launch(k, &r, 1, &arg), XPJ_OK);
  for (int i = 0; i < N; i++)
    assert_int_equal(o[i], (int64_t)local);
  xpj_mem_free(dev, o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stencil_default_local),
      cmocka_unit_test(test_reduce_default_local),
      cmocka_unit_test(test_refused_default),
      cmocka_unit_test(test_required_size),
      cmocka_unit_test(test_free_size),
  };
  return cmocka_run_group_tests(tests, setup, devtest_teardown);
}
