/* test_ze.c - the Level Zero backend (runtime/ze.c) without a driver: with
 * the real loader (no driver: no devices, a note, no error), a missing or
 * wrong library, and the stand-in loader tests/mock/mock_ze.c (built as
 * build/tests/mock/libmock_ze.so next to this binary) for discovery, the
 * marshalling of every kind of argument as zeKernelSetArgumentValue sees
 * it, group sizes and counts, memory kinds, copies and fills, error paths
 * and the native-binary cache. Kernels are compiled from source by the real
 * SPIR-V compiler; nothing runs them (the mock records launches). */
#define _GNU_SOURCE
#include "testutil.h"
#include "xpjit.h"

#include "mock/mock_ze.h"
#include "rt.h" /* the backend's native hooks, until kcache calls them */

#include <dlfcn.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static char mock_path[4096];
static mock_ze_stats_fn get_stats;
static mock_ze_launch_fn get_launch;
static mock_ze_reset_fn reset;

#define assert_msg_has(s)                                                     \
  do {                                                                        \
    if (!strstr(xpj_last_error(), (s)))                                       \
      fail_msg("message \"%s\" lacks \"%s\"", xpj_last_error(), (s));         \
  } while (0)

#define assert_str_has(h, s)                                                  \
  do {                                                                        \
    if (!strstr((h), (s)))                                                    \
      fail_msg("\"%s\" lacks \"%s\"", (h), (s));                              \
  } while (0)

/* ---- set-up --------------------------------------------------------------- */

static void clear_mock_env(void) {
  unsetenv("MOCK_ZE_DEVICES");
  unsetenv("MOCK_ZE_SPIRV");
  unsetenv("MOCK_ZE_FILL_MAX");
  unsetenv("MOCK_ZE_FAIL");
}

static int group_setup(void **state) {
  (void)state;
  unsetenv("XPJIT_DEVICE");
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return -1;
  exe[n] = 0;
  snprintf(mock_path, sizeof mock_path, "%s/mock/libmock_ze.so",
           dirname(exe));
  void *h = dlopen(mock_path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "test_ze: %s\n", dlerror());
    return -1;
  }
  /* stays open: the runtime opens the same object and keeps it */
  *(void **)&get_stats = dlsym(h, "mock_ze_get_stats");
  *(void **)&get_launch = dlsym(h, "mock_ze_get_launch");
  *(void **)&reset = dlsym(h, "mock_ze_reset");
  return get_stats && get_launch && reset ? 0 : -1;
}

/* Objects alive when the test started (left by a test that failed). */
static mock_ze_stats baseline;

static int setup(void **state) {
  (void)state;
  clear_mock_env();
  setenv("XPJIT_ZE_LIBRARY", mock_path, 1);
  reset();
  get_stats(&baseline);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  clear_mock_env();
  unsetenv("XPJIT_ZE_LIBRARY");
  return 0;
}

static mock_ze_stats stats(void) {
  mock_ze_stats s;
  get_stats(&s);
  return s;
}

/* Every object the backend made is gone (after a context is destroyed). */
static void assert_nothing_live(void) {
  mock_ze_stats s = stats(), *b = &baseline;
  assert_int_equal(s.live_contexts, b->live_contexts);
  assert_int_equal(s.live_lists, b->live_lists);
  assert_int_equal(s.live_pools, b->live_pools);
  assert_int_equal(s.live_events, b->live_events);
  assert_int_equal(s.live_allocs, b->live_allocs);
  assert_int_equal(s.live_modules, b->live_modules);
  assert_int_equal(s.live_kernels, b->live_kernels);
  assert_int_equal(s.live_logs, b->live_logs);
}

/* A context without the compile cache (each test sees its own loads). */
static xpj_context *context(void) {
  xpj_context_desc desc = {.cache_mode = XPJ_CACHE_MODE_OFF};
  xpj_context *ctx = NULL;
  assert_int_equal(xpj_context_create(&desc, &ctx), XPJ_OK);
  return ctx;
}

static xpj_device *ze_device(xpj_context *ctx) {
  xpj_device *d = NULL;
  if (xpj_device_select(ctx, "level_zero", &d) != XPJ_OK)
    fail_msg("no level_zero device: %s", xpj_last_error());
  return d;
}

static unsigned ze_count(xpj_context *ctx) {
  unsigned n = 99;
  assert_int_equal(xpj_device_list(ctx, "level_zero", NULL, 0, &n), XPJ_OK);
  return n;
}

/* ---- (1) no driver ---------------------------------------------------------- */

/* Creates a context with stderr going to a file; checks nothing was written
 * there and that level_zero has no devices; returns the note. */
static void absent_case(const char *expect_note) {
  fflush(stderr);
  int saved = dup(2);
  char path[] = "/tmp/test_ze_stderr_XXXXXX";
  int fd = mkstemp(path);
  assert_true(saved >= 0 && fd >= 0);
  dup2(fd, 2);
  xpj_context *ctx = NULL;
  xpj_status st = xpj_context_create(NULL, &ctx);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  struct stat sb;
  assert_int_equal(fstat(fd, &sb), 0);
  close(fd);
  unlink(path);
  assert_int_equal(st, XPJ_OK);
  assert_int_equal(sb.st_size, 0);
  assert_int_equal(ze_count(ctx), 0);
  const char *note = xpj_context_backend_note(ctx, XPJ_BACKEND_LEVEL_ZERO);
  assert_str_has(note, expect_note);
  xpj_device *d = (xpj_device *)1;
  assert_int_equal(xpj_device_select(ctx, "level_zero", &d),
                   XPJ_ERR_NOT_FOUND);
  assert_null(d);
  assert_msg_has("level_zero: ");
  assert_msg_has(expect_note);
  /* the CPU is still there */
  assert_int_equal(xpj_device_select(ctx, "cpu", &d), XPJ_OK);
  xpj_context_destroy(ctx);
}

static void test_absent_real_loader(void **state) {
  (void)state;
  unsetenv("XPJIT_ZE_LIBRARY");
  void *h = dlopen("libze_loader.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) {
    dlclose(h);
    absent_case("no Level Zero driver (zeInit: ZE_RESULT_ERROR_UNINITIALIZED)");
  } else {
    absent_case("libze_loader.so.1: cannot open");
  }
}

static void test_absent_library(void **state) {
  (void)state;
  setenv("XPJIT_ZE_LIBRARY", "/nonexistent/libze_loader.so.1", 1);
  absent_case("/nonexistent/libze_loader.so.1: cannot open");
  /* a library that is not a Level Zero loader */
  setenv("XPJIT_ZE_LIBRARY", "libm.so.6", 1);
  absent_case("the Level Zero loader lacks zeInit");
}

/* ---- (2) discovery ------------------------------------------------------------ */

static void test_discovery(void **state) {
  (void)state;
  setenv("MOCK_ZE_DEVICES", "3", 1);
  xpj_context *ctx = context();
  assert_int_equal(ze_count(ctx), 3);
  assert_string_equal(xpj_context_backend_note(ctx, XPJ_BACKEND_LEVEL_ZERO),
                      "");
  unsigned gpus = 0;
  assert_int_equal(xpj_device_list(ctx, "gpu", NULL, 0, &gpus), XPJ_OK);
  assert_int_equal(gpus, 3);
  for (unsigned i = 0; i < 3; i++) {
    char filter[32], name[64];
    snprintf(filter, sizeof filter, "level_zero:%u", i);
    xpj_device *d = NULL;
    assert_int_equal(xpj_device_select(ctx, filter, &d), XPJ_OK);
    assert_string_equal(xpj_device_id(d), filter);
    xpj_device_info in;
    assert_int_equal(xpj_device_get_info(d, &in), XPJ_OK);
    snprintf(name, sizeof name, "Mock Level Zero GPU %u", i);
    assert_string_equal(in.name, name);
    assert_int_equal(in.backend, XPJ_BACKEND_LEVEL_ZERO);
    assert_int_equal(in.type, XPJ_DEVICE_GPU);
    assert_int_equal(in.index, i);
    assert_string_equal(in.vendor, "Intel");
    assert_string_equal(in.driver_version, "1.3.26918");
    assert_int_equal(in.compute_units, 2 * 4 * 8);
    assert_int_equal(in.max_work_group_size, 1024);
    assert_int_equal(in.max_work_item_sizes[0], 1024);
    assert_int_equal(in.max_work_item_sizes[1], 1024);
    assert_int_equal(in.max_work_item_sizes[2], 64);
    assert_true(in.max_global_size[0] == (uint64_t)0x7fffffff * 1024);
    assert_true(in.max_global_size[1] == (uint64_t)65535 * 1024);
    assert_true(in.max_global_size[2] == (uint64_t)65535 * 64);
    assert_int_equal(in.local_mem_size, 65536);
    assert_true(in.global_mem_size == (uint64_t)5 << 30);
    assert_int_equal(in.mem_base_align, 64);
    assert_string_equal(in.target, "spirv:1.2");
  }
  /* one ze context for the driver, shared by its three devices */
  assert_int_equal(stats().live_contexts, baseline.live_contexts + 1);
  /* xpj_device_native: the driver's device handles, its one context and
   * the driver */
  void *h = dlopen(mock_path, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(h);
  typedef int (*driver_get_fn)(uint32_t *, void **);
  typedef int (*device_get_fn)(void *, uint32_t *, void **);
  driver_get_fn driver_get;
  device_get_fn device_get;
  *(void **)&driver_get = dlsym(h, "zeDriverGet");
  *(void **)&device_get = dlsym(h, "zeDeviceGet");
  assert_non_null(driver_get);
  assert_non_null(device_get);
  uint32_t ndrv = 1, ndev = 3;
  void *drv = NULL, *devs[3] = {0}, *zctx = NULL;
  assert_int_equal(driver_get(&ndrv, &drv), 0);
  assert_int_equal(device_get(drv, &ndev, devs), 0);
  for (unsigned i = 0; i < 3; i++) {
    char filter[32];
    snprintf(filter, sizeof filter, "level_zero:%u", i);
    xpj_device *d = NULL;
    assert_int_equal(xpj_device_select(ctx, filter, &d), XPJ_OK);
    void *got = NULL;
    assert_int_equal(xpj_device_native(d, XPJ_NATIVE_DEVICE, &got), XPJ_OK);
    assert_ptr_equal(got, devs[i]);
    assert_int_equal(xpj_device_native(d, XPJ_NATIVE_PLATFORM, &got),
                     XPJ_OK);
    assert_ptr_equal(got, drv);
    assert_int_equal(xpj_device_native(d, XPJ_NATIVE_CONTEXT, &got),
                     XPJ_OK);
    assert_non_null(got);
    if (i)
      assert_ptr_equal(got, zctx);
    zctx = got;
  }
  dlclose(h);
  xpj_context_destroy(ctx);
  assert_nothing_live();
}

static void target_case(const char *spirv, const char *target) {
  setenv("MOCK_ZE_SPIRV", spirv, 1);
  xpj_context *ctx = context();
  xpj_device_info in;
  assert_int_equal(xpj_device_get_info(ze_device(ctx), &in), XPJ_OK);
  assert_string_equal(in.target, target);
  xpj_context_destroy(ctx);
}

static void test_discovery_targets(void **state) {
  (void)state;
  target_case("0x00010000", "spirv:1.0");
  target_case("0x00010001", "spirv:1.1");
  target_case("0x00010002", "spirv:1.2");
  target_case("0x00010006", "spirv:1.2");
  target_case("0x00020000", "spirv:1.2");
  /* no SPIR-V at all: the device is skipped, with a note */
  setenv("MOCK_ZE_SPIRV", "0", 1);
  xpj_context *ctx = context();
  assert_int_equal(ze_count(ctx), 0);
  assert_str_has(xpj_context_backend_note(ctx, XPJ_BACKEND_LEVEL_ZERO),
                 "takes no SPIR-V");
  xpj_context_destroy(ctx);
  assert_nothing_live();
}

static void test_discovery_failures(void **state) {
  (void)state;
  setenv("MOCK_ZE_FAIL", "init", 1);
  xpj_context *ctx = context();
  assert_int_equal(ze_count(ctx), 0);
  assert_string_equal(
      xpj_context_backend_note(ctx, XPJ_BACKEND_LEVEL_ZERO),
      "no Level Zero driver (zeInit: ZE_RESULT_ERROR_UNINITIALIZED)");
  xpj_context_destroy(ctx);
  unsetenv("MOCK_ZE_FAIL");
  setenv("MOCK_ZE_DEVICES", "0", 1);
  ctx = context();
  assert_int_equal(ze_count(ctx), 0);
  assert_string_equal(xpj_context_backend_note(ctx, XPJ_BACKEND_LEVEL_ZERO),
                      "the Level Zero driver has no devices");
  xpj_context_destroy(ctx);
  assert_nothing_live();
}

/* ---- (3) arguments ------------------------------------------------------------ */

static const char *const src =
    "kernel mix(flag: bool, a8: i8, a16: i16, a32: i32, a64: i64, f: f32,\n"
    "           d: f64, x: global f32[], m: global const f64[,]) range {\n"
    "    let i = global_id(0);\n"
    "    if flag && i < shape(x, 0) {\n"
    "        x[i] = f + f32(a8) + f32(a16) + f32(a32) + f32(a64)\n"
    "               + f32(d * m[i % shape(m, 0), i % shape(m, 1)]);\n"
    "    }\n"
    "}\n"
    "kernel grid(y: global i32[,], v: i32) range(2) {\n"
    "    let r = global_id(0);\n"
    "    let c = global_id(1);\n"
    "    if r < shape(y, 0) && c < shape(y, 1) {\n"
    "        y[r, c] = v;\n"
    "    }\n"
    "}\n"
    "kernel nd(x: global f32[], s: f32) ndrange(1) {\n"
    "    x[global_id(0)] = s * f32(local_id(0));\n"
    "}\n"
    "kernel dyn(x: global f32[], t: local f32[], u: local i64[]) ndrange(1) {\n"
    "    t[local_id(0)] = x[global_id(0)];\n"
    "    u[0] = 1;\n"
    "    barrier();\n"
    "    x[global_id(0)] = t[0] + f32(u[0]);\n"
    "}\n";

static xpj_kernel *kernel(xpj_context *ctx, xpj_device *dev,
                          xpj_program **p, const char *name) {
  if (!*p)
    assert_int_equal(
        xpj_program_create(ctx, "ze.xpk", src, strlen(src), NULL, p), XPJ_OK);
  xpj_kernel *k = NULL;
  xpj_status st = xpj_program_get_kernel(*p, name, NULL, 0, dev, NULL, &k);
  if (st != XPJ_OK)
    fail_msg("get_kernel %s: %s", name, xpj_last_error());
  return k;
}

/* Recorded argument i is exactly the n bytes at v. */
static void assert_arg(const mock_ze_launch *l, unsigned i, const void *v,
                       size_t n) {
  if (i >= l->nparams || !l->args[i].set)
    fail_msg("%s: argument %u was not set", l->kernel, i);
  if (l->args[i].size != n)
    fail_msg("%s: argument %u has size %u, expected %zu", l->kernel, i,
             l->args[i].size, n);
  if (memcmp(l->args[i].bytes, v, n))
    fail_msg("%s: argument %u has other bytes", l->kernel, i);
}

static void assert_i64(const mock_ze_launch *l, unsigned i, int64_t v) {
  assert_arg(l, i, &v, 8);
}

static void assert_geometry(const mock_ze_launch *l, uint32_t g0, uint32_t g1,
                            uint32_t g2, uint32_t c0, uint32_t c1,
                            uint32_t c2) {
  const uint32_t want[6] = {g0, g1, g2, c0, c1, c2};
  const uint32_t got[6] = {l->group[0], l->group[1], l->group[2],
                           l->count[0], l->count[1], l->count[2]};
  for (int i = 0; i < 6; i++)
    if (want[i] != got[i])
      fail_msg("%s: group %ux%ux%u count %ux%ux%u, expected %ux%ux%u "
               "count %ux%ux%u",
               l->kernel, got[0], got[1], got[2], got[3], got[4], got[5],
               want[0], want[1], want[2], want[3], want[4], want[5]);
}

static void test_arguments(void **state) {
  (void)state;
  xpj_context *ctx = context();
  xpj_device *dev = ze_device(ctx);
  xpj_queue *q = NULL;
  assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
  xpj_program *p = NULL;
  xpj_kernel *mix = kernel(ctx, dev, &p, "mix");
  xpj_kernel *grid = kernel(ctx, dev, &p, "grid");
  xpj_kernel *nd = kernel(ctx, dev, &p, "nd");
  assert_int_equal(stats().modules_il, 3);

  float *x;
  double *m;
  int32_t *y;
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_DEVICE, 256 * 4, 0, (void **)&x),
                   XPJ_OK);
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, 80 * 8, 0, (void **)&m),
                   XPJ_OK);
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_HOST, 1000 * 4, 0, (void **)&y),
                   XPJ_OK);
  /* x: every other element from 5; m: a 5x6 view of a 10x8 matrix,
   * transposed, from element 3 */
  xpj_array ax = xpj_array_1d(x, XPJ_F32, 100);
  ax.offset = 5;
  ax.strides[0] = 2;
  xpj_array am = {m, XPJ_F64, 2, 3, {5, 6}, {1, 10}};
  xpj_arg args[] = {xpj_arg_bool(1),       xpj_arg_i8(-5),
                    xpj_arg_i16(-1234),    xpj_arg_i32(123456789),
                    xpj_arg_i64(-9876543210123LL), xpj_arg_f32(2.5f),
                    xpj_arg_f64(-0.125),   xpj_arg_array(&ax),
                    xpj_arg_array(&am)};
  xpj_range r = xpj_range_1d(100, 0);
  assert_int_equal(xpj_launch(q, mix, &r, 9, args, NULL), XPJ_OK);
  /* 2-D range: dimension 1 (10 columns) is the fastest, x; the grid is
   * rounded up to the suggested 8 x 4 */
  xpj_array ay = xpj_array_2d(y, XPJ_I32, 100, 10);
  xpj_arg gargs[] = {xpj_arg_array(&ay), xpj_arg_i32(-7)};
  xpj_range r2 = xpj_range_2d(100, 10, 0, 0);
  assert_int_equal(xpj_launch(q, grid, &r2, 2, gargs, NULL), XPJ_OK);
  /* nd-range: exactly the given local size, no hidden arguments */
  xpj_array ax2 = xpj_array_1d(x, XPJ_F32, 256);
  xpj_arg nargs[] = {xpj_arg_array(&ax2), xpj_arg_f32(0.5f)};
  xpj_range r3 = xpj_range_1d(256, 64);
  assert_int_equal(xpj_launch(q, nd, &r3, 2, nargs, NULL), XPJ_OK);
  if (xpj_queue_wait(q) != XPJ_OK)
    fail_msg("wait: %s", xpj_last_error());

  mock_ze_launch l;
  assert_int_equal(get_launch(0, &l), 0);
  assert_string_equal(l.kernel, "__xpj_k_mix"); /* the entry point */
  assert_geometry(&l, 32, 1, 1, 4, 1, 1);
  assert_int_equal(l.nparams, 7 + 4 + 6 + 3);
  uint8_t b = 1;
  int8_t i8 = -5;
  int16_t i16 = -1234;
  int32_t i32 = 123456789;
  float f = 2.5f;
  double d = -0.125;
  assert_arg(&l, 0, &b, 1);
  assert_arg(&l, 1, &i8, 1);
  assert_arg(&l, 2, &i16, 2);
  assert_arg(&l, 3, &i32, 4);
  assert_i64(&l, 4, -9876543210123LL);
  assert_arg(&l, 5, &f, 4);
  assert_arg(&l, 6, &d, 8);
  assert_arg(&l, 7, &x, 8); /* x: data, offset, shape, stride */
  assert_i64(&l, 8, 5);
  assert_i64(&l, 9, 100);
  assert_i64(&l, 10, 2);
  assert_arg(&l, 11, &m, 8); /* m: data, offset, shape[2], strides[2] */
  assert_i64(&l, 12, 3);
  assert_i64(&l, 13, 5);
  assert_i64(&l, 14, 6);
  assert_i64(&l, 15, 1);
  assert_i64(&l, 16, 10);
  assert_i64(&l, 17, 100); /* the logical global size */
  assert_i64(&l, 18, 1);
  assert_i64(&l, 19, 1);

  assert_int_equal(get_launch(1, &l), 0);
  assert_string_equal(l.kernel, "__xpj_k_grid");
  assert_geometry(&l, 8, 4, 1, 2, 25, 1);
  assert_int_equal(l.nparams, 6 + 1 + 3);
  assert_arg(&l, 0, &y, 8);
  assert_i64(&l, 1, 0);
  assert_i64(&l, 2, 100);
  assert_i64(&l, 3, 10);
  assert_i64(&l, 4, 10);
  assert_i64(&l, 5, 1);
  i32 = -7;
  assert_arg(&l, 6, &i32, 4);
  assert_i64(&l, 7, 10); /* the logical global size, in hardware order */
  assert_i64(&l, 8, 100);
  assert_i64(&l, 9, 1);

  assert_int_equal(get_launch(2, &l), 0);
  assert_string_equal(l.kernel, "__xpj_k_nd");
  assert_geometry(&l, 64, 1, 1, 4, 1, 1);
  assert_int_equal(l.nparams, 4 + 1);
  assert_arg(&l, 0, &x, 8);
  assert_i64(&l, 1, 0);
  assert_i64(&l, 2, 256);
  assert_i64(&l, 3, 1);
  f = 0.5f;
  assert_arg(&l, 4, &f, 4);
  assert_int_equal(get_launch(3, &l), -1);

  /* a range smaller than the suggestion's cap: one group of the range */
  xpj_range r4 = xpj_range_1d(5, 0);
  assert_int_equal(xpj_launch(q, mix, &r4, 9, args, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  assert_int_equal(get_launch(3, &l), 0);
  assert_geometry(&l, 4, 1, 1, 2, 1, 1);
  assert_i64(&l, 17, 5);

  /* a view outside its allocation never reaches the driver */
  ax.offset = 100;
  assert_int_equal(xpj_launch(q, mix, &r, 9, args, NULL), XPJ_ERR_INVALID);
  assert_int_equal(stats().launches, 4);

  xpj_queue_destroy(q);
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, m);
  /* y is left for the context to free */
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  assert_nothing_live();
}

/* Local array parameters reach the driver as Level Zero wants them: the
 * bytes to reserve and no value, then the count. */
static void test_local_params(void **state) {
  (void)state;
  xpj_context *ctx = context();
  xpj_device *dev = ze_device(ctx);
  xpj_queue *q = NULL;
  assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
  xpj_program *p = NULL;
  xpj_kernel *k = kernel(ctx, dev, &p, "dyn");
  float *x;
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, 128 * 4, 0, (void **)&x),
                   XPJ_OK);
  xpj_array ax = xpj_array_1d(x, XPJ_F32, 128);
  xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_local(64), xpj_arg_local(3)};
  xpj_range r = xpj_range_1d(128, 64);
  assert_int_equal(xpj_launch(q, k, &r, 3, args, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  mock_ze_launch l;
  assert_int_equal(get_launch(0, &l), 0);
  assert_int_equal(l.nparams, 4 + 2 + 2);
  assert_arg(&l, 0, &x, 8);
  /* the mock refuses a local argument with a value or without a size */
  assert_true(l.args[4].set);
  assert_int_equal(l.args[4].size, 64 * 4);
  assert_i64(&l, 5, 64);
  assert_true(l.args[6].set);
  assert_int_equal(l.args[6].size, 3 * 8);
  assert_i64(&l, 7, 3);
  xpj_queue_destroy(q);
  xpj_mem_free(dev, x);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  assert_nothing_live();
}

/* The kernel object's arguments are shared state: launches of one kernel
 * from several queues at once must each see their own arguments. */
typedef struct worker {
  xpj_queue *q;
  xpj_kernel *k;
  int32_t *y;
  int id;
  xpj_status st;
} worker;

#define LAUNCHES 40

static void *launch_many(void *arg) {
  worker *w = arg;
  xpj_array ay = xpj_array_2d(w->y, XPJ_I32, 10, 10);
  for (int i = 0; i < LAUNCHES && w->st == XPJ_OK; i++) {
    int32_t v = w->id * 1000 + i;
    xpj_arg a[] = {xpj_arg_array(&ay), xpj_arg_i32(v)};
    xpj_range r = xpj_range_2d(1, (uint64_t)v + 1, 0, 0);
    w->st = xpj_launch(w->q, w->k, &r, 2, a, NULL);
  }
  if (w->st == XPJ_OK)
    w->st = xpj_queue_wait(w->q);
  return NULL;
}

static void test_concurrent_launches(void **state) {
  (void)state;
  xpj_context *ctx = context();
  xpj_device *dev = ze_device(ctx);
  xpj_program *p = NULL;
  xpj_kernel *k = kernel(ctx, dev, &p, "grid");
  int32_t *y;
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_DEVICE, 400, 0, (void **)&y),
                   XPJ_OK);
  worker w[4];
  pthread_t t[4];
  for (int i = 0; i < 4; i++) {
    w[i] = (worker){NULL, k, y, i + 1, XPJ_OK};
    assert_int_equal(xpj_queue_create(dev, NULL, &w[i].q), XPJ_OK);
  }
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&t[i], NULL, launch_many, &w[i]), 0);
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(w[i].st, XPJ_OK);
    xpj_queue_destroy(w[i].q);
  }
  assert_int_equal(stats().launches, 4 * LAUNCHES);
  for (unsigned i = 0; i < 4 * LAUNCHES; i++) {
    mock_ze_launch l;
    assert_int_equal(get_launch(i, &l), 0);
    int32_t v;
    memcpy(&v, l.args[6].bytes, 4);
    assert_i64(&l, 7, (int64_t)v + 1); /* this launch's own global size */
    assert_int_equal(l.count[0], ((uint32_t)v + 1 + 31) / 32);
  }
  xpj_mem_free(dev, y);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  assert_nothing_live();
}

/* ---- (4) memory, copies, fills ------------------------------------------------ */

static void fill_check(xpj_queue *q, uint8_t *dst, uint8_t *host,
                       size_t psize, size_t bytes) {
  uint8_t pat[128];
  for (size_t i = 0; i < psize; i++)
    pat[i] = (uint8_t)(0x31 * (i + 1) + psize);
  if (xpj_enqueue_fill(q, dst, pat, psize, bytes, NULL) != XPJ_OK ||
      xpj_enqueue_copy(q, host, dst, bytes, NULL) != XPJ_OK)
    fail_msg("fill of %zu: %s", psize, xpj_last_error());
  if (xpj_queue_wait(q) != XPJ_OK)
    fail_msg("fill of %zu: %s", psize, xpj_last_error());
  for (size_t i = 0; i < bytes; i++)
    if (host[i] != pat[i % psize])
      fail_msg("fill with a %zu-byte pattern: byte %zu is %u", psize, i,
               host[i]);
}

static void test_memory(void **state) {
  (void)state;
  xpj_context *ctx = context();
  xpj_device *dev = ze_device(ctx);
  xpj_queue *q = NULL;
  assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
  enum { N = 4096, BIG = 200000 };
  uint8_t *dm, *hm, *sm, *big, *bighost;
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_DEVICE, N, 128, (void **)&dm),
                   XPJ_OK);
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_HOST, N, 0, (void **)&hm),
                   XPJ_OK);
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, N, 256, (void **)&sm),
                   XPJ_OK);
  assert_int_equal((uintptr_t)sm % 256, 0);
  mock_ze_stats s = stats();
  assert_int_equal(s.allocs_device, 1);
  assert_int_equal(s.allocs_host, 1);
  assert_int_equal(s.allocs_shared, 1);
  xpj_mem_kind kind;
  assert_int_equal(xpj_mem_query(dev, dm + 10, NULL, NULL, &kind), XPJ_OK);
  assert_int_equal(kind, XPJ_MEM_DEVICE);
  assert_int_equal(xpj_mem_query(dev, sm, NULL, NULL, &kind), XPJ_OK);
  assert_int_equal(kind, XPJ_MEM_SHARED);

  /* host -> device -> shared, read back on the host */
  for (int i = 0; i < N; i++)
    hm[i] = (uint8_t)(i * 7 + 3);
  assert_int_equal(xpj_enqueue_copy(q, dm, hm, N, NULL), XPJ_OK);
  assert_int_equal(xpj_enqueue_copy(q, sm, dm, N, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  assert_memory_equal(sm, hm, N);
  unsigned copies = stats().copies;
  assert_int_equal(xpj_enqueue_copy(q, dm, hm, 0, NULL), XPJ_OK);
  assert_int_equal(xpj_enqueue_fill(q, dm, "ab", 2, 0, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  assert_int_equal(stats().copies, copies); /* nothing to append */
  /* plain host memory may be one side of a copy, not both */
  uint8_t local[16], local2[16];
  assert_int_equal(xpj_enqueue_copy(q, local2, local, 16, NULL),
                   XPJ_ERR_INVALID);

  /* patterns the device fills (up to its 16 bytes) and larger ones */
  for (size_t ps = 1; ps <= 128; ps *= 2)
    fill_check(q, dm, hm, ps, N);
  s = stats();
  assert_int_equal(s.fills, 5);       /* 1, 2, 4, 8, 16 */
  assert_true(s.copies >= 8 + 1 + 2); /* readbacks, fallbacks, first two */
  /* a fallback larger than its staging memory, at an offset */
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_DEVICE, BIG, 0, (void **)&big),
                   XPJ_OK);
  assert_int_equal(
      xpj_mem_alloc(dev, XPJ_MEM_HOST, BIG, 0, (void **)&bighost), XPJ_OK);
  fill_check(q, big + 64, bighost, 64, BIG - 64);
  fill_check(q, big, bighost, 8, BIG);
  assert_true(stats().event_syncs > 0);

  xpj_queue_destroy(q);
  assert_int_equal(stats().live_lists, baseline.live_lists);
  assert_int_equal(stats().live_events, baseline.live_events);
  assert_int_equal(xpj_mem_free(dev, dm), XPJ_OK);
  assert_int_equal(xpj_mem_free(dev, hm), XPJ_OK);
  assert_int_equal(xpj_mem_free(dev, bighost), XPJ_OK);
  /* sm and big: the context's */
  assert_int_equal(stats().live_allocs, baseline.live_allocs + 2);
  xpj_context_destroy(ctx);
  assert_nothing_live();
}

/* ---- (5) errors ----------------------------------------------------------------- */

static void test_module_failure(void **state) {
  (void)state;
  setenv("MOCK_ZE_FAIL", "module", 1);
  xpj_context *ctx = context();
  xpj_device *dev = ze_device(ctx);
  xpj_program *p = NULL;
  assert_int_equal(xpj_program_create(ctx, "ze.xpk", src, strlen(src), NULL,
                                      &p),
                   XPJ_OK);
  xpj_kernel *k = (xpj_kernel *)1;
  assert_int_equal(xpj_program_get_kernel(p, "mix", NULL, 0, dev, NULL, &k),
                   XPJ_ERR_COMPILE);
  assert_null(k);
  assert_msg_has("ZE_RESULT_ERROR_MODULE_BUILD_FAILURE");
  assert_msg_has(MOCK_ZE_BUILD_LOG);
  assert_msg_has("level_zero:0");
  assert_int_equal(stats().live_logs, baseline.live_logs);
  assert_int_equal(stats().live_modules, baseline.live_modules);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);

  setenv("MOCK_ZE_FAIL", "kernel", 1);
  ctx = context();
  dev = ze_device(ctx);
  p = NULL;
  assert_int_equal(xpj_program_create(ctx, "ze.xpk", src, strlen(src), NULL,
                                      &p),
                   XPJ_OK);
  assert_int_equal(xpj_program_get_kernel(p, "nd", NULL, 0, dev, NULL, &k),
                   XPJ_ERR_DEVICE);
  assert_msg_has("zeKernelCreate");
  assert_msg_has("ZE_RESULT_ERROR_INVALID_KERNEL_NAME");
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  assert_nothing_live();
}

static void test_launch_failure(void **state) {
  (void)state;
  setenv("MOCK_ZE_FAIL", "launch", 1);
  xpj_context *ctx = context();
  xpj_device *dev = ze_device(ctx);
  xpj_queue *q = NULL;
  assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
  xpj_program *p = NULL;
  xpj_kernel *k = kernel(ctx, dev, &p, "nd");
  float *x;
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_DEVICE, 1024, 0, (void **)&x),
                   XPJ_OK);
  xpj_array ax = xpj_array_1d(x, XPJ_F32, 256);
  xpj_arg a[] = {xpj_arg_array(&ax), xpj_arg_f32(1)};
  xpj_range r = xpj_range_1d(256, 64);
  xpj_event *ev = NULL;
  assert_int_equal(xpj_launch(q, k, &r, 2, a, &ev), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_ERR_NOMEM);
  assert_msg_has("zeCommandListAppendLaunchKernel");
  assert_msg_has("ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY");
  assert_int_equal(xpj_event_query(ev), XPJ_EVENT_FAILED);
  xpj_event_release(ev);
  /* the queue goes on */
  assert_int_equal(xpj_enqueue_fill(q, x, "abcd", 4, 1024, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  assert_memory_equal(x, "abcdabcd", 8);

  /* more groups than the device takes in y (65535): logical dimension 0
   * of a 2-D kernel */
  xpj_kernel *g = kernel(ctx, dev, &p, "grid");
  int32_t *y;
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_DEVICE, 64, 0, (void **)&y),
                   XPJ_OK);
  xpj_array ay = xpj_array_2d(y, XPJ_I32, 4, 4);
  xpj_arg ga[] = {xpj_arg_array(&ay), xpj_arg_i32(1)};
  xpj_range big = xpj_range_2d(65535 * 8, 1, 0, 0);
  assert_int_equal(xpj_launch(q, g, &big, 2, ga, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_ERR_INVALID);
  assert_msg_has("131070 groups of 4 in grid dimension y");
  xpj_queue_destroy(q);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  assert_nothing_live();
}

static void test_sync_failure(void **state) {
  (void)state;
  setenv("MOCK_ZE_FAIL", "sync", 1);
  xpj_context *ctx = context();
  xpj_device *dev = ze_device(ctx);
  xpj_queue *q = NULL;
  assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
  uint8_t *a, *b;
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_HOST, 64, 0, (void **)&a),
                   XPJ_OK);
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_DEVICE, 64, 0, (void **)&b),
                   XPJ_OK);
  assert_int_equal(xpj_enqueue_copy(q, b, a, 64, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_ERR_DEVICE);
  assert_msg_has("zeEventHostSynchronize");
  assert_msg_has("ZE_RESULT_ERROR_DEVICE_LOST");
  /* the error is returned once */
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  xpj_queue_destroy(q);
  xpj_context_destroy(ctx);
  assert_nothing_live();
}

/* ---- (6) the native-binary cache ------------------------------------------------ */

/* ze.c's native_get and native_load themselves, called the way kcache will
 * call them: the device's binary of a loaded kernel (the mock's
 * "MOCKZENATIVE" + SPIR-V), loaded back as ZE_MODULE_FORMAT_NATIVE; a
 * damaged one fails with the ze result's name. */
static void test_native_hooks(void **state) {
  (void)state;
  xpj_context *ctx = context();
  xpj_device *dev = ze_device(ctx);
  char uuid[33];
  for (int i = 0; i < 16; i++)
    sprintf(uuid + 2 * i, "%02x", i);
  char want[256];
  snprintf(want, sizeof want, "level_zero:Mock Level Zero GPU 0:%s:drv%u",
           uuid, (1u << 24) | (3u << 16) | 26918u);
  assert_string_equal(dev->native_id, want);
  assert_non_null(dev->ops->native_get);
  assert_non_null(dev->ops->native_load);
  xpj_program *p = NULL;
  xpj_kernel *k = kernel(ctx, dev, &p, "nd");
  uint8_t *bin = NULL;
  size_t len = 0;
  assert_int_equal(dev->ops->native_get(dev, k->native, &bin, &len), XPJ_OK);
  size_t magic = strlen(MOCK_ZE_NATIVE_MAGIC);
  assert_true(len > magic + 20);
  assert_memory_equal(bin, MOCK_ZE_NATIVE_MAGIC, magic);
  void *native = NULL;
  reset();
  assert_int_equal(dev->ops->native_load(dev, bin, len, "__xpj_k_nd", &native),
                   XPJ_OK);
  assert_int_equal(stats().modules_native, 1);
  assert_int_equal(stats().modules_il, 0);
  dev->ops->kernel_unload(dev, native);
  bin[0] = 'X';
  native = (void *)1;
  assert_int_equal(dev->ops->native_load(dev, bin, len, "__xpj_k_nd", &native),
                   XPJ_ERR_DEVICE);
  assert_msg_has("ZE_RESULT_ERROR_INVALID_NATIVE_BINARY");
  assert_msg_has("native binary");
  free(bin);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  assert_nothing_live();
}

/* Needs kcache.c to call native_get/native_load (being wired on main).
 * Runs when that is so (the first context asked for a native binary), or
 * always with XPJIT_TEST_ZE_NATIVE=1 (then it fails if it is not). */
static void test_native_cache(void **state) {
  (void)state;
  char dir[] = "/tmp/test_ze_cache_XXXXXX";
  assert_non_null(mkdtemp(dir));
  const char *old = getenv("XPJIT_CACHE_DIR");
  char *saved = old ? strdup(old) : NULL;
  setenv("XPJIT_CACHE_DIR", dir, 1);
  const char *force = getenv("XPJIT_TEST_ZE_NATIVE");
  bool required = force && !strcmp(force, "1");

  xpj_context *ctx = NULL;
  assert_int_equal(xpj_context_create(NULL, &ctx), XPJ_OK);
  xpj_program *p = NULL;
  xpj_kernel *k = kernel(ctx, ze_device(ctx), &p, "nd");
  xpj_kernel_info ki;
  assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
  assert_int_equal(ki.origin, XPJ_ORIGIN_COMPILED);
  mock_ze_stats s = stats();
  assert_int_equal(s.modules_il, 1);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  bool wired = s.native_gets > 0;

  if (wired || required) {
    reset();
    ctx = NULL;
    assert_int_equal(xpj_context_create(NULL, &ctx), XPJ_OK);
    p = NULL;
    k = kernel(ctx, ze_device(ctx), &p, "nd");
    assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
    assert_int_equal(ki.origin, XPJ_ORIGIN_CACHE);
    s = stats();
    assert_int_equal(s.modules_native, 1);
    assert_int_equal(s.modules_il, 0);
    xpj_program_destroy(p);
    xpj_context_destroy(ctx);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  if (saved)
    setenv("XPJIT_CACHE_DIR", saved, 1);
  else
    unsetenv("XPJIT_CACHE_DIR");
  free(saved);
  assert_nothing_live();
  if (!wired && !required)
    skip(); /* kcache does not ask backends for native binaries yet */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_absent_real_loader, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_absent_library, setup, teardown),
      cmocka_unit_test_setup_teardown(test_discovery, setup, teardown),
      cmocka_unit_test_setup_teardown(test_discovery_targets, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_discovery_failures, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_arguments, setup, teardown),
      cmocka_unit_test_setup_teardown(test_local_params, setup, teardown),
      cmocka_unit_test_setup_teardown(test_concurrent_launches, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_memory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_module_failure, setup, teardown),
      cmocka_unit_test_setup_teardown(test_launch_failure, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sync_failure, setup, teardown),
      cmocka_unit_test_setup_teardown(test_native_hooks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_native_cache, setup, teardown),
  };
  return cmocka_run_group_tests(tests, group_setup, NULL);
}
