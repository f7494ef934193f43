/* test_cuda.c - the CUDA backend (runtime/cuda.c) against the stand-in
 * libcuda of tests/mock/mock_cuda.c (build/tests/mock/libmock_cuda.so, next
 * to this binary): no GPU and no real libcuda needed. Covers a missing
 * driver, discovery and target selection, memory, copies and fills with
 * readback, argument marshalling of real PTX kernels compiled by LLVM (the
 * mock reads each parameter's size from the PTX .entry), error paths (JIT
 * log, launch, asynchronous failure, allocation) and the native binary
 * hooks. Whether code runs correctly on a GPU is not tested here. */
#include "testutil.h"
#include "xpjit.h"
#include "rt.h"
#include "mock/mock_cuda.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

/* Set to 1 once kcache.c caches native binaries (native_get/native_load):
 * test_native_cache_across_contexts then insists on one JIT link for two
 * contexts sharing a cache. Before that it skips when it sees two. */
#ifndef KCACHE_NATIVE_WIRED
#define KCACHE_NATIVE_WIRED 1
#endif

static char mock_path[PATH_MAX];
static void *mock_lib;
static mock_cuda_get_fn mock_get;
static mock_cuda_reset_fn mock_reset;

#define assert_msg_has(s)                                                     \
  do {                                                                        \
    if (!strstr(xpj_last_error(), (s)))                                       \
      fail_msg("message \"%s\" lacks \"%s\"", xpj_last_error(), (s));         \
  } while (0)

static int group_setup(void **state) {
  (void)state;
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return -1;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash)
    return -1;
  *slash = 0;
  if (snprintf(mock_path, sizeof mock_path, "%s/mock/libmock_cuda.so", exe) >=
      (int)sizeof mock_path)
    return -1;
  mock_lib = dlopen(mock_path, RTLD_NOW | RTLD_LOCAL);
  if (!mock_lib) {
    fprintf(stderr, "cannot open the mock libcuda: %s\n", dlerror());
    return -1;
  }
  void *g = dlsym(mock_lib, "mock_cuda_get"), *r = dlsym(mock_lib,
                                                         "mock_cuda_reset");
  if (!g || !r)
    return -1;
  memcpy(&mock_get, &g, sizeof g);
  memcpy(&mock_reset, &r, sizeof r);
  unsetenv("XPJIT_DEVICE");
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  dlclose(mock_lib);
  return 0;
}

/* The mock's configuration for the next context (NULL: its default). */
static void mock_env(const char *devices, const char *cc, const char *driver,
                     const char *fail) {
  setenv("XPJIT_CUDA_LIBRARY", mock_path, 1);
  const char *names[] = {"MOCK_CUDA_DEVICES", "MOCK_CUDA_CC",
                         "MOCK_CUDA_DRIVER", "MOCK_CUDA_FAIL"};
  const char *vals[] = {devices, cc, driver, fail};
  for (int i = 0; i < 4; i++)
    if (vals[i])
      setenv(names[i], vals[i], 1);
    else
      unsetenv(names[i]);
  mock_reset();
}

/* A context without the second-level cache: every kernel of a new
 * context goes through the JIT, whatever earlier tests left on disk. */
static xpj_context *new_ctx(void) {
  xpj_context_desc desc;
  memset(&desc, 0, sizeof desc);
  desc.cache_mode = XPJ_CACHE_MODE_OFF;
  desc.no_env_bundles = 1;
  xpj_context *c = NULL;
  assert_int_equal(xpj_context_create(&desc, &c), XPJ_OK);
  return c;
}

static unsigned ncuda(xpj_context *c) {
  unsigned n = 99;
  assert_int_equal(xpj_device_list(c, "cuda", NULL, 0, &n), XPJ_OK);
  return n;
}

static xpj_device *cuda_dev(xpj_context *c, const char *id) {
  xpj_device *d = NULL;
  if (xpj_device_select(c, id, &d) != XPJ_OK)
    fail_msg("selecting %s: %s", id, xpj_last_error());
  return d;
}

/* Everything the backend took from the driver was given back. */
static void assert_all_released(void) {
  const mock_cuda_state *s = mock_get();
  assert_int_equal(s->live_allocs, 0);
  assert_int_equal(s->live_streams, 0);
  assert_int_equal(s->live_modules, 0);
  assert_int_equal(s->live_links, 0);
  assert_int_equal(s->retained_ctxs, 0);
  assert_int_equal(s->no_context, 0);
}

/* ---- no driver ---------------------------------------------------------- */

static void test_absent(void **state) {
  (void)state;
  setenv("XPJIT_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  xpj_context *c = new_ctx();
  assert_int_equal(ncuda(c), 0);
  assert_true(xpj_device_count(c) >= 1); /* the CPU is still there */
  const char *note = xpj_context_backend_note(c, XPJ_BACKEND_CUDA);
  if (!strstr(note, "/nonexistent/libcuda.so.1") ||
      !strstr(note, "cannot open shared object file"))
    fail_msg("note: \"%s\"", note);
  xpj_device *d = (xpj_device *)1;
  assert_int_equal(xpj_device_select(c, "cuda", &d), XPJ_ERR_NOT_FOUND);
  assert_null(d);
  assert_msg_has("no device matches \"cuda\"");
  assert_msg_has("cuda: /nonexistent/libcuda.so.1");
  xpj_context_destroy(c);

  /* a library that is not libcuda */
  setenv("XPJIT_CUDA_LIBRARY", "libm.so.6", 1);
  c = new_ctx();
  assert_int_equal(ncuda(c), 0);
  note = xpj_context_backend_note(c, XPJ_BACKEND_CUDA);
  if (!strstr(note, "lacks cuInit"))
    fail_msg("note: \"%s\"", note);
  xpj_context_destroy(c);
}

/* ---- discovery and targets ---------------------------------------------- */

static void test_discovery(void **state) {
  (void)state;
  mock_env("2", NULL, NULL, NULL);
  xpj_context *c = new_ctx();
  assert_int_equal(ncuda(c), 2);
  assert_string_equal(xpj_context_backend_note(c, XPJ_BACKEND_CUDA), "");
  assert_int_equal(mock_get()->retained_ctxs, 2);
  /* the CPU stays first: the default device */
  xpj_device *d;
  assert_int_equal(xpj_device_select(c, NULL, &d), XPJ_OK);
  assert_string_equal(xpj_device_id(d), "cpu:0");
  for (unsigned i = 0; i < 2; i++) {
    char id[16], name[64];
    snprintf(id, sizeof id, "cuda:%u", i);
    d = cuda_dev(c, id);
    assert_string_equal(xpj_device_id(d), id);
    xpj_device_info in;
    assert_int_equal(xpj_device_get_info(d, &in), XPJ_OK);
    snprintf(name, sizeof name, "Mock GPU %u (sm_90)", i);
    assert_string_equal(in.name, name);
    assert_string_equal(in.vendor, "NVIDIA Corporation");
    assert_string_equal(in.driver_version, "13.0");
    assert_int_equal(in.backend, XPJ_BACKEND_CUDA);
    assert_int_equal(in.type, XPJ_DEVICE_GPU);
    assert_int_equal(in.index, i);
    assert_int_equal(in.compute_units, 132);
    assert_int_equal(in.max_work_group_size, 1024);
    assert_int_equal(in.max_work_item_sizes[0], 1024);
    assert_int_equal(in.max_work_item_sizes[1], 1024);
    assert_int_equal(in.max_work_item_sizes[2], 64);
    assert_int_equal(in.max_global_size[0], 2147483647ull * 1024);
    assert_int_equal(in.max_global_size[1], 65535ull * 1024);
    assert_int_equal(in.max_global_size[2], 65535ull * 64);
    /* with a kernel's opt-in (sm_90: 227 KiB; test_dyn_shared_optin) */
    assert_int_equal(in.local_mem_size, 232448);
    assert_int_equal(in.global_mem_size, (16ull << 30) + i);
    assert_int_equal(in.mem_base_align, 256);
    assert_string_equal(in.target, "ptx:sm_90:ptx78");
    /* the target string is canonical: it round-trips */
    xpj_target t;
    char err[128], back[64];
    assert_int_equal(xpj_target_parse(in.target, &t, err, sizeof err), XPJ_OK);
    xpj_target_str(&t, back, sizeof back);
    assert_string_equal(back, in.target);
    char nid[256];
    snprintf(nid, sizeof nid,
             "cuda:Mock GPU %u (sm_90):%02x0102030405060708090a0b0c0d0e0f:"
             "sm_90:drv13000", i, 0xa0 + i);
    assert_string_equal(d->native_id, nid);
  }
  assert_int_equal(xpj_device_select(c, "gpu", &d), XPJ_OK);
  assert_string_equal(xpj_device_id(d), "cuda:0");
  /* xpj_device_native: the ordinal and the primary context, not
   * retained for the caller; CUDA has no platform */
  typedef int (*retain_fn)(void **, int);
  typedef int (*release_fn)(int);
  retain_fn retain;
  release_fn release;
  *(void **)&retain = dlsym(mock_lib, "cuDevicePrimaryCtxRetain");
  *(void **)&release = dlsym(mock_lib, "cuDevicePrimaryCtxRelease_v2");
  assert_non_null(retain);
  assert_non_null(release);
  for (unsigned i = 0; i < 2; i++) {
    char id[16];
    snprintf(id, sizeof id, "cuda:%u", i);
    d = cuda_dev(c, id);
    void *h = NULL, *primary = NULL;
    assert_int_equal(xpj_device_native(d, XPJ_NATIVE_DEVICE, &h), XPJ_OK);
    assert_int_equal((intptr_t)h, (intptr_t)i);
    int before = mock_get()->retained_ctxs;
    assert_int_equal(xpj_device_native(d, XPJ_NATIVE_CONTEXT, &h), XPJ_OK);
    assert_int_equal(mock_get()->retained_ctxs, before);
    assert_int_equal(retain(&primary, (int)i), 0);
    assert_int_equal(release((int)i), 0);
    assert_ptr_equal(h, primary);
    h = (void *)1;
    assert_int_equal(xpj_device_native(d, XPJ_NATIVE_PLATFORM, &h),
                     XPJ_ERR_UNSUPPORTED);
    assert_null(h);
  }
  xpj_context_destroy(c);
  assert_all_released();
}

typedef struct target_case {
  const char *cc, *driver, *target; /* target NULL: skipped */
  const char *note;                 /* in the note when skipped */
} target_case;

static void test_targets(void **state) {
  (void)state;
  static const target_case cases[] = {
      {"90", NULL, "ptx:sm_90:ptx78", NULL},
      {"130", NULL, "ptx:sm_121:ptx88", NULL}, /* PTX JITs forward */
      {"121", NULL, "ptx:sm_121:ptx88", NULL},
      {"120", NULL, "ptx:sm_120:ptx87", NULL},
      {"110", NULL, "ptx:sm_110:ptx90", NULL},
      {"103", NULL, "ptx:sm_103:ptx88", NULL},
      {"101", NULL, "ptx:sm_101:ptx86", NULL}, /* CUDA 12.x; 13 says 11.0 */
      {"100", NULL, "ptx:sm_100:ptx86", NULL},
      {"89", NULL, "ptx:sm_89:ptx78", NULL},
      {"88", NULL, "ptx:sm_88:ptx90", NULL},
      {"87", NULL, "ptx:sm_87:ptx74", NULL},
      {"86", NULL, "ptx:sm_86:ptx71", NULL},
      {"80", NULL, "ptx:sm_80:ptx70", NULL},
      {"75", NULL, "ptx:sm_75:ptx63", NULL},
      {"73", NULL, "ptx:sm_72:ptx61", NULL},
      {"70", NULL, "ptx:sm_70:ptx60", NULL},
      /* old drivers: the newest architecture whose PTX they take */
      {"90", "11080", "ptx:sm_90:ptx78", NULL},
      {"120", "12060", "ptx:sm_101:ptx86", NULL},
      {"88", "12080", "ptx:sm_87:ptx74", NULL},
      {"90", "11070", "ptx:sm_87:ptx74", NULL},
      {"86", "11000", "ptx:sm_80:ptx70", NULL},
      {"80", "10020", "ptx:sm_75:ptx63", NULL},
      {"60", NULL, NULL, "compute capability 6.0 is below 7.0"},
      {"70", "8000", NULL, "CUDA driver 8.0 is too old for PTX 6.0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const target_case *tc = &cases[i];
    mock_env("1", tc->cc, tc->driver, NULL);
    xpj_context *c = new_ctx();
    const char *note = xpj_context_backend_note(c, XPJ_BACKEND_CUDA);
    if (tc->target) {
      if (ncuda(c) != 1)
        fail_msg("cc %s driver %s: no device (%s)", tc->cc, tc->driver, note);
      xpj_device_info in;
      assert_int_equal(xpj_device_get_info(cuda_dev(c, "cuda:0"), &in), XPJ_OK);
      if (strcmp(in.target, tc->target))
        fail_msg("cc %s driver %s: %s, not %s", tc->cc, tc->driver, in.target,
                 tc->target);
    } else {
      assert_int_equal(ncuda(c), 0);
      if (!strstr(note, tc->note) || !strstr(note, "device 0"))
        fail_msg("cc %s: note \"%s\" lacks \"%s\"", tc->cc, note, tc->note);
      xpj_device *d;
      assert_int_equal(xpj_device_select(c, "cuda", &d), XPJ_ERR_NOT_FOUND);
      assert_msg_has(tc->note);
    }
    xpj_context_destroy(c);
    assert_all_released();
  }

  /* one usable device of two: it is cuda:0; no note */
  mock_env("2", "60,80", NULL, NULL);
  xpj_context *c = new_ctx();
  assert_int_equal(ncuda(c), 1);
  xpj_device_info in;
  assert_int_equal(xpj_device_get_info(cuda_dev(c, "cuda:0"), &in), XPJ_OK);
  assert_string_equal(in.name, "Mock GPU 1 (sm_80)");
  assert_string_equal(in.target, "ptx:sm_80:ptx70");
  assert_string_equal(xpj_context_backend_note(c, XPJ_BACKEND_CUDA), "");
  xpj_context_destroy(c);

  /* cuInit fails; the driver has no devices */
  mock_env("2", NULL, NULL, "init");
  c = new_ctx();
  assert_int_equal(ncuda(c), 0);
  assert_string_equal(xpj_context_backend_note(c, XPJ_BACKEND_CUDA),
                      "cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device "
                      "is detected)");
  xpj_context_destroy(c);
  mock_env("0", NULL, NULL, NULL);
  c = new_ctx();
  assert_int_equal(ncuda(c), 0);
  assert_non_null(strstr(xpj_context_backend_note(c, XPJ_BACKEND_CUDA),
                         "no devices"));
  xpj_context_destroy(c);
  assert_all_released();
}

/* ---- memory, copies, fills ---------------------------------------------- */

static void test_memory(void **state) {
  (void)state;
  mock_env("1", NULL, NULL, NULL);
  xpj_context *c = new_ctx();
  xpj_device *d = cuda_dev(c, "cuda:0");
  void *a[3];
  xpj_mem_kind kinds[3] = {XPJ_MEM_DEVICE, XPJ_MEM_HOST, XPJ_MEM_SHARED};
  size_t aligns[3] = {0, 4096, 1024}; /* 1024: more than the driver gives */
  for (int i = 0; i < 3; i++) {
    assert_int_equal(xpj_mem_alloc(d, kinds[i], 1000, aligns[i], &a[i]),
                     XPJ_OK);
    assert_int_equal((uintptr_t)a[i] % (aligns[i] ? aligns[i] : 256), 0);
    xpj_mem_kind k;
    size_t bytes;
    assert_int_equal(xpj_mem_query(d, (char *)a[i] + 999, NULL, &bytes, &k),
                     XPJ_OK);
    assert_int_equal(k, kinds[i]);
    assert_int_equal(bytes, 1000);
  }
  assert_int_equal(mock_get()->live_allocs, 3);
  for (int i = 0; i < 3; i++)
    assert_int_equal(xpj_mem_free(d, a[i]), XPJ_OK);
  assert_int_equal(mock_get()->live_allocs, 0);
  /* memory never freed goes with the context */
  assert_int_equal(xpj_mem_alloc(d, XPJ_MEM_DEVICE, 64, 4096, &a[0]), XPJ_OK);
  assert_int_equal(xpj_mem_alloc(d, XPJ_MEM_HOST, 64, 0, &a[1]), XPJ_OK);
  xpj_context_destroy(c);
  assert_all_released();

  mock_env("1", NULL, NULL, "alloc");
  c = new_ctx();
  d = cuda_dev(c, "cuda:0");
  assert_int_equal(xpj_mem_alloc(d, XPJ_MEM_DEVICE, 64, 0, &a[0]),
                   XPJ_ERR_NOMEM);
  assert_msg_has("CUDA_ERROR_OUT_OF_MEMORY");
  assert_msg_has("cuda:0");
  xpj_context_destroy(c);
  assert_all_released();
}

/* xpj_device_wait_native: another library's stream (CuPy's, PyTorch's)
 * waited for under the device's primary context; 0 is the whole context. */
static void test_wait_native(void **state) {
  (void)state;
  mock_env("1", NULL, NULL, NULL);
  xpj_context *c = new_ctx();
  xpj_device *d = cuda_dev(c, "cuda:0");
  assert_int_equal(xpj_device_wait_native(d, 0), XPJ_OK);
  assert_int_equal(mock_get()->ctx_syncs, 1);
  int syncs = mock_get()->syncs;
  assert_int_equal(xpj_device_wait_native(d, 1), XPJ_OK);
  assert_ptr_equal(mock_get()->last_synced, (void *)1);
  assert_int_equal(xpj_device_wait_native(d, 2), XPJ_OK);
  assert_ptr_equal(mock_get()->last_synced, (void *)2);
  assert_int_equal(mock_get()->syncs, syncs + 2);
  assert_int_equal(mock_get()->no_context, 0);
  /* the CPU device: nothing to wait for; no device: refused */
  xpj_device *cpu = cuda_dev(c, "cpu");
  assert_int_equal(xpj_device_wait_native(cpu, 12345), XPJ_OK);
  assert_int_equal(xpj_device_wait_native(NULL, 1), XPJ_ERR_INVALID);
  assert_msg_has("device is NULL");
  assert_int_equal(mock_get()->ctx_syncs, 1);
  xpj_context_destroy(c);
  assert_all_released();
}

static void test_copy_fill(void **state) {
  (void)state;
  mock_env("1", NULL, NULL, NULL);
  xpj_context *c = new_ctx();
  xpj_device *d = cuda_dev(c, "cuda:0");
  xpj_queue *q;
  assert_int_equal(xpj_queue_create(d, NULL, &q), XPJ_OK);
  assert_int_equal(mock_get()->live_streams, 1);
  uint8_t *a, *b;
  assert_int_equal(xpj_mem_alloc(d, XPJ_MEM_DEVICE, 4096, 128, (void **)&a),
                   XPJ_OK);
  assert_int_equal(xpj_mem_alloc(d, XPJ_MEM_HOST, 4096, 0, (void **)&b),
                   XPJ_OK);
  uint8_t pat[128];
  for (int i = 0; i < 128; i++)
    pat[i] = (uint8_t)(i * 7 + 1);
  for (size_t ps = 1; ps <= 128; ps *= 2) {
    size_t n = 4096 - 4 * ps; /* a multiple of ps, not of 4096 */
    memset(b, 0, 4096);
    assert_int_equal(xpj_enqueue_fill(q, a, pat, ps, n, NULL), XPJ_OK);
    assert_int_equal(xpj_enqueue_copy(q, b, a, n, NULL), XPJ_OK);
    assert_int_equal(xpj_queue_wait(q), XPJ_OK);
    for (size_t i = 0; i < n; i++)
      if (b[i] != pat[i % ps])
        fail_msg("fill pattern %zu: byte %zu is %u", ps, i, b[i]);
    assert_int_equal(b[n], 0); /* nothing past the end */
  }
  /* patterns of 1, 2 and 4 bytes are driver memsets; wider ones too when
   * they repeat (zeros), else staged copies */
  assert_int_equal(mock_get()->memsets, 3);
  uint8_t zero[16] = {0};
  assert_int_equal(xpj_enqueue_fill(q, a, zero, 16, 4096, NULL), XPJ_OK);
  assert_int_equal(xpj_enqueue_copy(q, b, a, 4096, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  assert_int_equal(mock_get()->memsets, 4);
  for (size_t i = 0; i < 4096; i++)
    assert_int_equal(b[i], 0);
  /* copies within device memory, and from host memory back */
  for (int i = 0; i < 256; i++)
    b[i] = (uint8_t)i;
  assert_int_equal(xpj_enqueue_copy(q, a, b, 256, NULL), XPJ_OK);
  assert_int_equal(xpj_enqueue_copy(q, a + 1024, a, 256, NULL), XPJ_OK);
  assert_int_equal(xpj_enqueue_copy(q, b + 2048, a + 1024, 256, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  for (int i = 0; i < 256; i++)
    assert_int_equal(b[2048 + i], i);
  /* plain host memory may be one side of a copy, not both */
  uint8_t local[8], local2[8];
  assert_int_equal(xpj_enqueue_copy(q, local2, local, 8, NULL),
                   XPJ_ERR_INVALID);
  assert_msg_has("is memory of cuda:0");
  xpj_queue_destroy(q);
  xpj_mem_free(d, a);
  xpj_mem_free(d, b);
  assert_int_equal(mock_get()->no_context, 0);
  xpj_context_destroy(c);
  assert_all_released();
}

/* ---- kernels and launches ----------------------------------------------- */

static const char src[] =
    "kernel args(a: i8, b: i16, c: i32, d: i64, e: f32, f: f64, g: bool,\n"
    "            x: global f32[], y: global f64[,]) range {\n"
    "  let i = global_id(0);\n"
    "  if g && i < size(x) {\n"
    "    x[i] = e + f32(a) + f32(b) + f32(c) + f32(d);\n"
    "    y[i % 10, 0] = f;\n"
    "  }\n"
    "}\n"
    "kernel nd(out: global i32[,]) ndrange(2) {\n"
    "  local t: i32[128];\n"
    "  t[local_linear_id()] = i32(local_linear_id());\n"
    "  barrier();\n"
    "  out[global_id(0), global_id(1)] = t[local_linear_id()];\n"
    "}\n"
    "kernel dyn(out: global i32[], a: local i32[], b: local f64[]) ndrange(1) {\n"
    "  local t: i32[128];\n"
    "  t[local_id(0)] = 1;\n"
    "  a[local_id(0)] = 2;\n"
    "  b[local_id(0)] = 3.0;\n"
    "  barrier();\n"
    "  out[global_id(0)] = t[local_id(0)] + a[0] + i32(b[1]);\n"
    "}\n"
    /* dyn's parameters, and a 256 KiB local array it never uses */
    "kernel dead(out: global i32[], a: local i32[], b: local f64[]) ndrange(1) {\n"
    "  local t: i32[65536];\n"
    "  a[local_id(0)] = 2;\n"
    "  b[local_id(0)] = 3.0;\n"
    "  barrier();\n"
    "  out[global_id(0)] = a[0] + i32(b[1]);\n"
    "}\n";

static xpj_program *new_prog(xpj_context *c) {
  xpj_program *p = NULL;
  if (xpj_program_create(c, "cuda.xpk", src, strlen(src), NULL, &p) != XPJ_OK)
    fail_msg("program: %s", xpj_last_error());
  return p;
}

static xpj_kernel *get(xpj_program *p, const char *name, xpj_device *d) {
  xpj_kernel *k = NULL;
  if (xpj_program_get_kernel(p, name, NULL, 0, d, NULL, &k) != XPJ_OK)
    fail_msg("kernel %s: %s", name, xpj_last_error());
  return k;
}

static uint64_t bits_f32(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static uint64_t bits_f64(double f) {
  uint64_t u;
  memcpy(&u, &f, 8);
  return u;
}

/* Checks a recorded launch's parameters against want (sizes and values). */
static void assert_params(const mock_cuda_launch *l, unsigned n,
                          const unsigned char *size, const uint64_t *want) {
  assert_int_equal(l->nparams, n);
  for (unsigned i = 0; i < n; i++) {
    if (l->size[i] != size[i])
      fail_msg("parameter %u: %u bytes in the PTX, expected %u", i,
               l->size[i], size[i]);
    if (l->value[i] != want[i])
      fail_msg("parameter %u: 0x%llx, expected 0x%llx", i,
               (unsigned long long)l->value[i], (unsigned long long)want[i]);
  }
}

/* Local array parameters are CUDA's dynamic shared memory: byte offsets
 * into it (16-aligned, the kernel's own .shared arrays apart) and counts as
 * parameters, their bytes as cuLaunchKernel's sharedMemBytes. */
static void test_local_params(void **state) {
  (void)state;
  mock_env("1", NULL, NULL, NULL);
  xpj_context *c = new_ctx();
  xpj_device *d = cuda_dev(c, "cuda:0");
  xpj_program *p = new_prog(c);
  xpj_kernel *k = get(p, "dyn", d);
  int32_t *out;
  assert_int_equal(xpj_mem_alloc(d, XPJ_MEM_DEVICE, 256 * 4, 0, (void **)&out),
                   XPJ_OK);
  xpj_array vo = xpj_array_1d(out, XPJ_I32, 256);
  xpj_arg args[] = {xpj_arg_array(&vo), xpj_arg_local(65), xpj_arg_local(64)};
  xpj_queue *q;
  assert_int_equal(xpj_queue_create(d, NULL, &q), XPJ_OK);
  xpj_range r = xpj_range_1d(256, 64);
  assert_int_equal(xpj_launch(q, k, &r, 3, args, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  const mock_cuda_launch *l = &mock_get()->launch[0];
  static const unsigned char size[8] = {8, 8, 8, 8, 8, 8, 8, 8};
  /* out (data, offset, shape, stride); a at 0, 65 of them; b after a's
   * 260 bytes rounded up to 272, 64 of them */
  uint64_t want[8] = {(uintptr_t)out, 0, 256, 1, 0, 65, 272, 64};
  assert_params(l, 8, size, want);
  assert_int_equal(l->shared, 272 + 64 * 8);
  /* local = 0 is refused: the sizes belong to the launch */
  r = xpj_range_1d(256, 0);
  assert_int_equal(xpj_launch(q, k, &r, 3, args, NULL), XPJ_ERR_INVALID);
  assert_msg_has("local array parameters");
  xpj_queue_destroy(q);
  xpj_mem_free(d, out);
  xpj_program_destroy(p);
  xpj_context_destroy(c);
}

/* Launches the kernel dyn with na i32 and nb f64 of local array
 * parameters, 64 work-items in one group; the launch's status. */
static xpj_status launch_dyn(xpj_device *d, xpj_kernel *k, uint64_t na,
                             uint64_t nb) {
  int32_t *out;
  assert_int_equal(xpj_mem_alloc(d, XPJ_MEM_DEVICE, 64 * 4, 0, (void **)&out),
                   XPJ_OK);
  xpj_array vo = xpj_array_1d(out, XPJ_I32, 64);
  xpj_arg args[] = {xpj_arg_array(&vo), xpj_arg_local(na), xpj_arg_local(nb)};
  xpj_queue *q;
  assert_int_equal(xpj_queue_create(d, NULL, &q), XPJ_OK);
  xpj_range r = xpj_range_1d(64, 64);
  xpj_status st = xpj_launch(q, k, &r, 3, args, NULL);
  if (st == XPJ_OK)
    st = xpj_queue_wait(q);
  xpj_queue_destroy(q);
  xpj_mem_free(d, out);
  return st;
}

/* More dynamic shared memory than the 48 KiB per block CUDA gives by
 * default: the kernel's opt-in (cuFuncSetAttribute), raised once for the
 * largest launch so far and never lowered, up to the device's opt-in
 * limit with the kernel's own 512 bytes; where the driver has no opt-in,
 * the device says 48 KiB and a launch over it is refused before the
 * driver sees it. */
static void test_dyn_shared_optin(void **state) {
  (void)state;
  mock_env("1", "90", NULL, NULL);
  xpj_context *c = new_ctx();
  xpj_device *d = cuda_dev(c, "cuda:0");
  xpj_device_info in;
  assert_int_equal(xpj_device_get_info(d, &in), XPJ_OK);
  assert_int_equal(in.local_mem_size, 232448);
  xpj_program *p = new_prog(c);
  xpj_kernel *k = get(p, "dyn", d);
  /* within 48 KiB beside the kernel's own 512 bytes: no opt-in */
  if (launch_dyn(d, k, 11000, 16) != XPJ_OK)
    fail_msg("%s", xpj_last_error());
  assert_int_equal(mock_get()->func_set_attributes, 0);
  assert_int_equal(mock_get()->launch[0].shared, 44000 + 128);
  /* all that 48 KiB leaves beside those 512 bytes, then 16 bytes more:
   * the first opt-in */
  uint64_t na = (49152 - 512 - 128) / 4;
  assert_int_equal(launch_dyn(d, k, na, 16), XPJ_OK);
  assert_int_equal(mock_get()->func_set_attributes, 0);
  assert_int_equal(launch_dyn(d, k, na + 4, 16), XPJ_OK);
  assert_int_equal(mock_get()->func_set_attributes, 1);
  assert_int_equal(mock_get()->last_max_dyn, 49152 - 512 + 16);
  /* 100 KiB: opted in to exactly what the launch takes */
  assert_int_equal(launch_dyn(d, k, 25600, 16), XPJ_OK);
  assert_int_equal(mock_get()->func_set_attributes, 2);
  assert_int_equal(mock_get()->last_max_dyn, 102400 + 128);
  assert_int_equal(mock_get()->launch[3].shared, 102400 + 128);
  /* less again: nothing lowered, no call */
  assert_int_equal(launch_dyn(d, k, 20000, 16), XPJ_OK);
  assert_int_equal(mock_get()->func_set_attributes, 2);
  /* the whole 227 KiB with the kernel's 512 bytes, then 16 more */
  na = (232448 - 512 - 128) / 4;
  assert_int_equal(launch_dyn(d, k, na, 16), XPJ_OK);
  assert_int_equal(mock_get()->func_set_attributes, 3);
  assert_int_equal(mock_get()->last_max_dyn, 232448 - 512);
  assert_int_equal(launch_dyn(d, k, na + 4, 16), XPJ_ERR_INVALID);
  assert_msg_has("232448 per work-group");
  assert_int_equal(mock_get()->launches, 6);
  xpj_program_destroy(p);
  xpj_context_destroy(c);
  assert_all_released();

  /* sm_80: 163 KiB */
  mock_env("1", "80", NULL, NULL);
  c = new_ctx();
  d = cuda_dev(c, "cuda:0");
  assert_int_equal(xpj_device_get_info(d, &in), XPJ_OK);
  assert_int_equal(in.local_mem_size, 166912);
  xpj_context_destroy(c);

  /* a driver without the opt-in: 48 KiB, refused before the driver */
  mock_env("1", "90", NULL, "optin");
  c = new_ctx();
  d = cuda_dev(c, "cuda:0");
  assert_int_equal(xpj_device_get_info(d, &in), XPJ_OK);
  assert_int_equal(in.local_mem_size, 49152);
  p = new_prog(c);
  k = get(p, "dyn", d);
  assert_int_equal(launch_dyn(d, k, 25600, 16), XPJ_ERR_INVALID);
  assert_msg_has("49152 per work-group");
  assert_int_equal(launch_dyn(d, k, 11000, 16), XPJ_OK);
  assert_int_equal(mock_get()->func_set_attributes, 0);
  assert_int_equal(mock_get()->launches, 1);
  xpj_program_destroy(p);
  xpj_context_destroy(c);

  /* the driver refuses the opt-in: the launch fails saying so */
  mock_env("1", "90", NULL, "setattr");
  c = new_ctx();
  d = cuda_dev(c, "cuda:0");
  p = new_prog(c);
  k = get(p, "dyn", d);
  assert_int_equal(launch_dyn(d, k, 25600, 16), XPJ_ERR_DEVICE);
  assert_msg_has("cuFuncSetAttribute: CUDA_ERROR_INVALID_VALUE");
  assert_int_equal(mock_get()->launches, 0);
  xpj_program_destroy(p);
  xpj_context_destroy(c);
  assert_all_released();
}

/* A local array the optimiser removed takes no local memory: the PTX
 * declares none, so the kernel loads on every device and its local array
 * parameters may take all the device has (the kernel's local_bytes is
 * counted after optimisation: docs/backend-cuda.md). The device's opt-in
 * limit is the driver's (sm_120: 99 KiB). */
static void test_dead_local_array(void **state) {
  (void)state;
  static const char *const fails[] = {NULL, "optin"};
  static const uint64_t limit[] = {232448, 49152};
  for (int i = 0; i < 2; i++) {
    mock_env("1", "90", NULL, fails[i]);
    xpj_context *c = new_ctx();
    xpj_device *d = cuda_dev(c, "cuda:0");
    xpj_program *p = new_prog(c);
    xpj_kernel *k = get(p, "dead", d);
    xpj_kernel_info ki;
    assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
    assert_int_equal(ki.local_mem_bytes, 0);
    uint64_t na = (limit[i] - 128) / 4;
    if (launch_dyn(d, k, na, 16) != XPJ_OK)
      fail_msg("%s", xpj_last_error());
    assert_int_equal(mock_get()->launch[0].shared, limit[i]);
    assert_int_equal(launch_dyn(d, k, na + 4, 16), XPJ_ERR_INVALID);
    xpj_program_destroy(p);
    xpj_context_destroy(c);
    assert_all_released();
  }
  mock_env("1", "120", NULL, NULL);
  xpj_context *c = new_ctx();
  xpj_device_info in;
  assert_int_equal(xpj_device_get_info(cuda_dev(c, "cuda:0"), &in), XPJ_OK);
  assert_int_equal(in.local_mem_size, 101376);
  xpj_context_destroy(c);
}

static void test_launch_args(void **state) {
  (void)state;
  mock_env("1", NULL, NULL, NULL);
  xpj_context *c = new_ctx();
  xpj_device *d = cuda_dev(c, "cuda:0");
  xpj_program *p = new_prog(c);
  xpj_kernel *k = get(p, "args", d), *nd = get(p, "nd", d);
  xpj_kernel_info ki;
  assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
  assert_string_equal(ki.target, "ptx:sm_90:ptx78");
  assert_int_equal(mock_get()->link_creates, 2);
  assert_true(mock_get()->had_error_log);
  assert_int_equal(mock_get()->module_loads, 2);
  assert_ptr_equal(get(p, "args", d), k); /* loaded once */
  assert_int_equal(mock_get()->link_creates, 2);

  float *x;
  double *y;
  assert_int_equal(xpj_mem_alloc(d, XPJ_MEM_DEVICE, 1000 * 4, 0, (void **)&x),
                   XPJ_OK);
  assert_int_equal(xpj_mem_alloc(d, XPJ_MEM_SHARED, 400 * 8, 0, (void **)&y),
                   XPJ_OK);
  xpj_array vx = {x, XPJ_F32, 1, 3, {997}, {1}};
  xpj_array vy = {y, XPJ_F64, 2, 1, {10, 20}, {40, 2}}; /* every 2nd column */
  xpj_arg args[] = {xpj_arg_i8(-5),       xpj_arg_i16(-300),
                    xpj_arg_i32(123456),  xpj_arg_i64(-1),
                    xpj_arg_f32(1.5f),    xpj_arg_f64(2.25),
                    xpj_arg_bool(1),      xpj_arg_array(&vx),
                    xpj_arg_array(&vy)};
  xpj_queue *q;
  assert_int_equal(xpj_queue_create(d, NULL, &q), XPJ_OK);
  xpj_range r1 = xpj_range_1d(1000, 0), r2 = xpj_range_1d(1000, 64);
  assert_int_equal(xpj_launch(q, k, &r1, 9, args, NULL), XPJ_OK);
  assert_int_equal(xpj_launch(q, k, &r2, 9, args, NULL), XPJ_OK);
  int32_t *out;
  assert_int_equal(xpj_mem_alloc(d, XPJ_MEM_DEVICE, 64 * 32 * 4, 0,
                                 (void **)&out), XPJ_OK);
  xpj_array vo = {out, XPJ_I32, 2, 0, {64, 32}, {32, 1}};
  xpj_arg oargs[] = {xpj_arg_array(&vo)};
  xpj_range r3 = xpj_range_2d(64, 32, 16, 8);
  assert_int_equal(xpj_launch(q, nd, &r3, 1, oargs, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);

  const mock_cuda_state *s = mock_get();
  assert_int_equal(s->launches, 3);
  /* the range kernel: 7 scalars, x (data, offset, shape, stride), y (data,
   * offset, 2 shapes, 2 strides), then the logical global size */
  static const unsigned char size[20] = {1, 2, 4, 8, 4, 8, 1, 8, 8, 8,
                                         8, 8, 8, 8, 8, 8, 8, 8, 8, 8};
  uint64_t want[20] = {0xfb, 0xfed4, 123456, UINT64_MAX, bits_f32(1.5f),
                       bits_f64(2.25), 1, (uintptr_t)x, 3, 997, 1,
                       (uintptr_t)y, 1, 10, 20, 40, 2, 1000, 1, 1};
  for (int i = 0; i < 2; i++) {
    const mock_cuda_launch *l = &s->launch[i];
    /* the runtime asks for the result's entry point, not the kernel's
     * name (docs/abi.md) */
    assert_string_equal(l->func, "__xpj_k_args");
    assert_params(l, 20, size, want);
    assert_int_equal(l->shared, 0);
    assert_ptr_equal(l->stream, s->launch[2].stream);
    assert_non_null(l->stream);
  }
  /* no hint: blocks of 256; the hint 64: blocks of 64; the grid covers
   * 1000 items and the kernel skips the rest */
  unsigned g0[3] = {4, 1, 1}, b0[3] = {256, 1, 1};
  unsigned g1[3] = {16, 1, 1}, b1[3] = {64, 1, 1};
  assert_memory_equal(s->launch[0].grid, g0, sizeof g0);
  assert_memory_equal(s->launch[0].block, b0, sizeof b0);
  assert_memory_equal(s->launch[1].grid, g1, sizeof g1);
  assert_memory_equal(s->launch[1].block, b1, sizeof b1);
  /* the nd-range kernel: no hidden arguments, grid = global / local */
  const mock_cuda_launch *l = &s->launch[2];
  assert_string_equal(l->func, "__xpj_k_nd");
  static const unsigned char osize[6] = {8, 8, 8, 8, 8, 8};
  uint64_t owant[6] = {(uintptr_t)out, 0, 64, 32, 32, 1};
  assert_params(l, 6, osize, owant);
  /* dimension 1 (32 items in groups of 8) is the fastest: CUDA x */
  unsigned g2[3] = {4, 4, 1}, b2[3] = {8, 16, 1};
  assert_memory_equal(l->grid, g2, sizeof g2);
  assert_memory_equal(l->block, b2, sizeof b2);

  /* a 2-D range without a hint: 256 threads over both dimensions; the
   * kernel reads only dimension 0, which stays fastest (docs/abi.md) */
  xpj_range r4 = xpj_range_2d(3, 1000, 0, 0);
  assert_int_equal(xpj_launch(q, k, &r4, 9, args, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  unsigned g4[3] = {1, 16, 1}, b4[3] = {4, 64, 1};
  assert_memory_equal(s->launch[3].grid, g4, sizeof g4);
  assert_memory_equal(s->launch[3].block, b4, sizeof b4);
  assert_int_equal(s->launch[3].value[17], 3);
  assert_int_equal(s->launch[3].value[18], 1000);

  /* a second queue is a second stream */
  xpj_queue *q2;
  assert_int_equal(xpj_queue_create(d, NULL, &q2), XPJ_OK);
  assert_int_equal(xpj_launch(q2, k, &r1, 9, args, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q2), XPJ_OK);
  assert_ptr_not_equal(s->launch[4].stream, s->launch[0].stream);
  xpj_queue_destroy(q2);

  /* more work-groups than the grid allows in y: logical dimension 0 of a
   * 2-D kernel */
  xpj_range big = xpj_range_2d(70000, 1, 1, 1);
  assert_int_equal(xpj_launch(q, nd, &big, 1, oargs, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_ERR_INVALID);
  assert_msg_has("70000 work-groups in grid dimension y");
  xpj_range wide = xpj_range_2d(1, 70000, 1, 1); /* x takes it (the mock
                                                   * runs nothing) */
  assert_int_equal(xpj_launch(q, nd, &wide, 1, oargs, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);

  xpj_queue_destroy(q);
  xpj_mem_free(d, x);
  xpj_mem_free(d, y);
  xpj_mem_free(d, out);
  xpj_program_destroy(p);
  assert_int_equal(s->no_context, 0);
  xpj_context_destroy(c);
  assert_all_released();
}

/* ---- errors ------------------------------------------------------------- */

static void test_jit_errors(void **state) {
  (void)state;
  mock_env("1", NULL, NULL, "link");
  xpj_context *c = new_ctx();
  xpj_device *d = cuda_dev(c, "cuda:0");
  xpj_program *p = new_prog(c);
  xpj_kernel *k = NULL;
  assert_int_equal(xpj_program_get_kernel(p, "args", NULL, 0, d, NULL, &k),
                   XPJ_ERR_COMPILE);
  assert_null(k);
  assert_msg_has("loading __xpj_k_args on cuda:0");
  assert_msg_has("cuLinkAddData: CUDA_ERROR_INVALID_PTX");
  assert_msg_has("uses too much shared data"); /* the JIT's log */
  /* a load failure is the device's: not remembered, tried again */
  assert_int_equal(xpj_program_get_kernel(p, "args", NULL, 0, d, NULL, &k),
                   XPJ_ERR_COMPILE);
  assert_int_equal(mock_get()->link_creates, 2);
  assert_int_equal(mock_get()->live_links, 0);
  xpj_program_destroy(p);
  xpj_context_destroy(c);
  assert_all_released();

  mock_env("1", NULL, NULL, "load");
  c = new_ctx();
  d = cuda_dev(c, "cuda:0");
  p = new_prog(c);
  assert_int_equal(xpj_program_get_kernel(p, "nd", NULL, 0, d, NULL, &k),
                   XPJ_ERR_DEVICE);
  assert_msg_has("loading __xpj_k_nd on cuda:0: cuModuleLoadData: "
                 "CUDA_ERROR_NO_BINARY_FOR_GPU");
  xpj_program_destroy(p);
  xpj_context_destroy(c);
  assert_all_released();
}

static void test_launch_errors(void **state) {
  (void)state;
  const char *fails[] = {"launch", "sync"};
  for (int i = 0; i < 2; i++) {
    mock_env("1", NULL, NULL, fails[i]);
    xpj_context *c = new_ctx();
    xpj_device *d = cuda_dev(c, "cuda:0");
    xpj_program *p = new_prog(c);
    xpj_kernel *k = get(p, "nd", d);
    int32_t *out;
    assert_int_equal(xpj_mem_alloc(d, XPJ_MEM_DEVICE, 256 * 4, 0,
                                   (void **)&out), XPJ_OK);
    xpj_array vo = {out, XPJ_I32, 2, 0, {16, 16}, {16, 1}};
    xpj_arg a[] = {xpj_arg_array(&vo)};
    xpj_queue *q;
    assert_int_equal(xpj_queue_create(d, NULL, &q), XPJ_OK);
    xpj_range r = xpj_range_2d(16, 16, 8, 8);
    xpj_event *ev = NULL;
    assert_int_equal(xpj_launch(q, k, &r, 1, a, &ev), XPJ_OK);
    assert_int_equal(xpj_queue_wait(q), XPJ_ERR_DEVICE);
    if (i == 0) {
      assert_msg_has("launch of __xpj_k_nd on cuda:0 (grid 2x2x1, block "
                     "8x8x1): cuLaunchKernel: "
                     "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES");
    } else {
      assert_msg_has("cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS (an "
                     "illegal memory access was encountered)");
    }
    assert_int_equal(xpj_event_query(ev), XPJ_EVENT_FAILED);
    assert_int_equal(xpj_event_wait(ev), XPJ_ERR_DEVICE);
    xpj_event_release(ev);
    /* the error was reported once; later work (no launch) is fine */
    assert_int_equal(xpj_enqueue_fill(q, out, "\0\0\0\0", 4, 1024, NULL),
                     XPJ_OK);
    assert_int_equal(xpj_queue_wait(q), XPJ_OK);
    xpj_queue_destroy(q);
    xpj_mem_free(d, out);
    xpj_program_destroy(p);
    xpj_context_destroy(c);
    assert_all_released();
  }
}

/* ---- native binaries ---------------------------------------------------- */

/* The hooks themselves: the cubin of a loaded kernel, and loading it back
 * without the JIT. */
static void test_native_hooks(void **state) {
  (void)state;
  mock_env("1", NULL, NULL, NULL);
  xpj_context *c = new_ctx();
  xpj_device *d = cuda_dev(c, "cuda:0");
  xpj_program *p = new_prog(c);
  xpj_kernel *k = get(p, "args", d);
  const rt_backend_ops *ops = &rt_cuda_backend;
  assert_ptr_equal(d->ops, ops);
  assert_non_null(ops->native_get);
  uint8_t *bin = NULL, *bin2 = NULL;
  size_t len = 0, len2 = 0;
  assert_int_equal(ops->native_get(d, k->native, &bin, &len), XPJ_OK);
  assert_true(len > 10 && !memcmp(bin, "MOCKCUBIN\n", 10));
  assert_non_null(strstr((char *)bin, ".entry __xpj_k_args("));
  int links = mock_get()->link_creates, loads = mock_get()->module_loads;
  void *nat = NULL;
  assert_int_equal(ops->native_load(d, bin, len, "__xpj_k_args", &nat), XPJ_OK);
  assert_int_equal(mock_get()->link_creates, links); /* no JIT */
  assert_int_equal(mock_get()->module_loads, loads + 1);
  assert_int_equal(ops->native_get(d, nat, &bin2, &len2), XPJ_OK);
  assert_int_equal(len2, len);
  assert_memory_equal(bin2, bin, len);
  ops->kernel_unload(d, nat);
  /* what is not a cubin, or lacks the entry */
  nat = NULL;
  assert_int_equal(ops->native_load(d, (const uint8_t *)"garbage", 8,
                                    "__xpj_k_args", &nat),
                   XPJ_ERR_DEVICE);
  assert_msg_has("CUDA_ERROR_INVALID_IMAGE");
  assert_int_equal(ops->native_load(d, bin, len, "nope", &nat),
                   XPJ_ERR_DEVICE);
  assert_msg_has("cuModuleGetFunction: CUDA_ERROR_NOT_FOUND");
  assert_null(nat);
  free(bin);
  free(bin2);
  xpj_program_destroy(p);
  xpj_context_destroy(c);
  assert_all_released();
}

/* Two contexts sharing a cache: once kcache.c keeps native binaries, the
 * second loads the cubin and never runs the JIT. */
static void test_native_cache_across_contexts(void **state) {
  (void)state;
  char dir[] = "/tmp/xpjit-cuda-XXXXXX", db[64], cmd[96];
  assert_non_null(mkdtemp(dir));
  snprintf(db, sizeof db, "%s/cache.db", dir);
  xpj_context_desc desc;
  memset(&desc, 0, sizeof desc);
  desc.cache_mode = XPJ_CACHE_MODE_RW;
  desc.cache_path = db;
  desc.no_env_bundles = 1;
  mock_env("1", NULL, NULL, NULL);
  xpj_kernel_origin origin[2];
  for (int i = 0; i < 2; i++) {
    xpj_context *c = NULL;
    assert_int_equal(xpj_context_create(&desc, &c), XPJ_OK);
    xpj_program *p = new_prog(c);
    xpj_kernel_info ki;
    assert_int_equal(xpj_kernel_get_info(get(p, "nd", cuda_dev(c, "cuda:0")),
                                         &ki), XPJ_OK);
    origin[i] = ki.origin;
    xpj_program_destroy(p);
    xpj_context_destroy(c);
  }
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  assert_all_released();
  assert_int_equal(origin[0], XPJ_ORIGIN_COMPILED);
  assert_int_equal(origin[1], XPJ_ORIGIN_CACHE);
  assert_int_equal(mock_get()->module_loads, 2);
  if (!KCACHE_NATIVE_WIRED && mock_get()->link_creates == 2)
    skip(); /* kcache.c does not use native_get/native_load yet */
  assert_int_equal(mock_get()->link_creates, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_absent),
      cmocka_unit_test(test_discovery),
      cmocka_unit_test(test_targets),
      cmocka_unit_test(test_memory),
      cmocka_unit_test(test_wait_native),
      cmocka_unit_test(test_copy_fill),
      cmocka_unit_test(test_launch_args),
      cmocka_unit_test(test_local_params),
      cmocka_unit_test(test_dyn_shared_optin),
      cmocka_unit_test(test_dead_local_array),
      cmocka_unit_test(test_jit_errors),
      cmocka_unit_test(test_launch_errors),
      cmocka_unit_test(test_native_hooks),
      cmocka_unit_test(test_native_cache_across_contexts),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
