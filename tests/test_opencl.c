/* test_opencl.c - the OpenCL backend: discovery and its absence, memory
 * and commands, error paths with the driver's messages, and the native
 * binary cache. Runs on Intel's OpenCL CPU runtime when tools/intel-ocl.sh
 * installed it ($XPJIT_INTEL_OCL or ~/.cache/xpjit/intel-opencl); the
 * tests that need a device skip without one. The conformance suite runs
 * on it too (tests/run_tests.sh). */
#include "procutil.h" /* rm_tree, guarded_test */
#include "testutil.h"

#include "rt.h"
#include "xpjit.h"
#include "xpjit_cache.h"

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <dlfcn.h>
#include <pthread.h>
#include <sys/wait.h>
#include <stdio.h>
#include <unistd.h>

static char cache_dir[512];

/* Points the ICD loader at the Intel runtime; false if it is not there. */
static bool use_intel(void) {
  const char *d = getenv("XPJIT_INTEL_OCL");
  char icd[600];
  if (d && *d)
    snprintf(icd, sizeof icd, "%s/icd", d);
  else
    snprintf(icd, sizeof icd, "%s/.cache/xpjit/intel-opencl/icd",
             getenv("HOME") ? getenv("HOME") : "/");
  char f[700];
  snprintf(f, sizeof f, "%s/intel-cpu.icd", icd);
  if (access(f, R_OK) != 0)
    return false;
  setenv("OCL_ICD_VENDORS", icd, 1);
  return true;
}

static xpj_context *ctx_opencl(xpj_device **dev) {
  xpj_context_desc desc = {.visible = "opencl;cpu", .cache_path = NULL};
  xpj_context *ctx = NULL;
  assert_int_equal(xpj_context_create(&desc, &ctx), XPJ_OK);
  *dev = NULL;
  if (xpj_device_select(ctx, "opencl", dev) != XPJ_OK) {
    xpj_context_destroy(ctx);
    return NULL;
  }
  return ctx;
}

/* ---- absence ---------------------------------------------------------- */

static void test_no_loader(void **state) {
  (void)state;
  setenv("XPJIT_OPENCL_LIBRARY", "/nonexistent/libOpenCL.so.1", 1);
  xpj_context *ctx = NULL;
  assert_int_equal(xpj_context_create(NULL, &ctx), XPJ_OK);
  xpj_device *d = NULL;
  unsigned n = 0;
  assert_int_equal(xpj_device_list(ctx, "opencl", &d, 1, &n), XPJ_OK);
  assert_int_equal(n, 0);
  const char *note = xpj_context_backend_note(ctx, XPJ_BACKEND_OPENCL);
  if (!strstr(note, "/nonexistent/libOpenCL.so.1"))
    fail_msg("note: '%s'", note);
  assert_int_equal(xpj_device_select(ctx, "opencl", &d), XPJ_ERR_NOT_FOUND);
  const char *msg = xpj_last_error();
  if (!strstr(msg, "opencl: ") || !strstr(msg, "nonexistent"))
    fail_msg("the error does not say why: '%s'", msg);
  /* the CPU is still there */
  assert_int_equal(xpj_device_select(ctx, "cpu", &d), XPJ_OK);
  xpj_context_destroy(ctx);
  /* a filter that excludes OpenCL does not even open the loader */
  xpj_context_desc desc = {.visible = "cpu"};
  assert_int_equal(xpj_context_create(&desc, &ctx), XPJ_OK);
  if (!strstr(xpj_context_backend_note(ctx, XPJ_BACKEND_OPENCL),
              "not looked for"))
    fail_msg("note: '%s'",
             xpj_context_backend_note(ctx, XPJ_BACKEND_OPENCL));
  xpj_context_destroy(ctx);
  /* the default device's error names only the backends the filter let in */
  setenv("XPJIT_ZE_LIBRARY", "/nonexistent/libze_loader.so.1", 1);
  desc.visible = "level_zero";
  assert_int_equal(xpj_context_create(&desc, &ctx), XPJ_OK);
  assert_int_equal(xpj_device_select(ctx, NULL, &d), XPJ_ERR_NOT_FOUND);
  msg = xpj_last_error();
  if (!strstr(msg, "level_zero: ") || strstr(msg, "opencl: ") ||
      strstr(msg, "not looked for"))
    fail_msg("default-device error: '%s'", msg);
  xpj_context_destroy(ctx);
  unsetenv("XPJIT_ZE_LIBRARY");
  unsetenv("XPJIT_OPENCL_LIBRARY");
}

/* ---- discovery ---------------------------------------------------------- */

static void test_discovery(void **state) {
  (void)state;
  xpj_device *dev;
  xpj_context *ctx = ctx_opencl(&dev);
  if (!ctx)
    skip();
  xpj_device_info in;
  assert_int_equal(xpj_device_get_info(dev, &in), XPJ_OK);
  assert_int_equal(in.backend, XPJ_BACKEND_OPENCL);
  assert_string_equal(xpj_device_id(dev), "opencl:0");
  assert_string_equal(in.target, "spirv:1.2");
  assert_true(in.compute_units >= 1);
  assert_true(in.max_work_group_size >= 64);
  assert_true(in.local_mem_size >= 16 * 1024);
  assert_true(in.global_mem_size > 0);
  assert_true(in.mem_base_align >= 64);
  assert_true(in.name[0] && in.vendor[0] && in.driver_version[0]);
  assert_true(dev->native_id[0] != 0);
  xpj_context_destroy(ctx);
}

/* xpj_device_native: the device's cl_device_id, cl_context and
 * cl_platform_id, as the driver itself relates them (the context's one
 * device, the device's platform) */
static void test_native_handles(void **state) {
  (void)state;
  xpj_device *dev;
  xpj_context *ctx = ctx_opencl(&dev);
  if (!ctx)
    skip();
  void *id = NULL, *cctx = NULL, *plat = NULL;
  assert_int_equal(xpj_device_native(dev, XPJ_NATIVE_DEVICE, &id), XPJ_OK);
  assert_int_equal(xpj_device_native(dev, XPJ_NATIVE_CONTEXT, &cctx), XPJ_OK);
  assert_int_equal(xpj_device_native(dev, XPJ_NATIVE_PLATFORM, &plat),
                   XPJ_OK);
  assert_non_null(id);
  assert_non_null(cctx);
  assert_non_null(plat);
  void *cl = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  assert_non_null(cl);
  typedef int (*info_fn)(void *, unsigned, size_t, void *, size_t *);
  info_fn ctx_info, dev_info;
  *(void **)&ctx_info = dlsym(cl, "clGetContextInfo");
  *(void **)&dev_info = dlsym(cl, "clGetDeviceInfo");
  assert_non_null(ctx_info);
  assert_non_null(dev_info);
  unsigned ndev = 0, refs = 0;
  void *devs[4] = {0}, *p = NULL;
  assert_int_equal(ctx_info(cctx, CL_CONTEXT_NUM_DEVICES, sizeof ndev, &ndev,
                            NULL), 0);
  assert_int_equal(ndev, 1);
  assert_int_equal(ctx_info(cctx, CL_CONTEXT_DEVICES, sizeof devs, devs,
                            NULL), 0);
  assert_ptr_equal(devs[0], id);
  assert_int_equal(dev_info(id, CL_DEVICE_PLATFORM, sizeof p, &p, NULL), 0);
  assert_ptr_equal(p, plat);
  /* not retained for the caller: asking twice changes no count */
  unsigned before = 0;
  assert_int_equal(ctx_info(cctx, CL_CONTEXT_REFERENCE_COUNT, sizeof before,
                            &before, NULL), 0);
  assert_int_equal(xpj_device_native(dev, XPJ_NATIVE_CONTEXT, &p), XPJ_OK);
  assert_int_equal(ctx_info(cctx, CL_CONTEXT_REFERENCE_COUNT, sizeof refs,
                            &refs, NULL), 0);
  assert_int_equal(refs, before);
  /* the same device of another xpjit context: the same cl_device_id (the
   * driver's), another cl_context */
  xpj_device *dev2;
  xpj_context *ctx2 = ctx_opencl(&dev2);
  assert_non_null(ctx2);
  assert_int_equal(xpj_device_native(dev2, XPJ_NATIVE_DEVICE, &p), XPJ_OK);
  assert_ptr_equal(p, id);
  assert_int_equal(xpj_device_native(dev2, XPJ_NATIVE_CONTEXT, &p), XPJ_OK);
  assert_ptr_not_equal(p, cctx);
  xpj_context_destroy(ctx2);
  /* bad kinds and arguments */
  p = (void *)1;
  assert_int_equal(xpj_device_native(dev, (xpj_native_kind)3, &p),
                   XPJ_ERR_INVALID);
  assert_null(p);
  assert_int_equal(xpj_device_native(dev, XPJ_NATIVE_DEVICE, NULL),
                   XPJ_ERR_INVALID);
  dlclose(cl);
  xpj_context_destroy(ctx);
}

/* ---- memory and commands -------------------------------------------------- */

static void test_memory(void **state) {
  (void)state;
  xpj_device *dev;
  xpj_context *ctx = ctx_opencl(&dev);
  if (!ctx)
    skip();
  xpj_queue *q;
  assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
  enum { N = 4096 };
  uint8_t host[N], back[N];
  for (int i = 0; i < N; i++)
    host[i] = (uint8_t)(i * 7 + 1);
  for (int kind = XPJ_MEM_DEVICE; kind <= XPJ_MEM_SHARED; kind++) {
    void *p = NULL;
    assert_int_equal(xpj_mem_alloc(dev, (xpj_mem_kind)kind, N, 0, &p), XPJ_OK);
    assert_true((uintptr_t)p % 64 == 0);
    assert_int_equal(xpj_enqueue_copy(q, p, host, N, NULL), XPJ_OK);
    memset(back, 0, N);
    assert_int_equal(xpj_enqueue_copy(q, back, p, N, NULL), XPJ_OK);
    assert_int_equal(xpj_queue_wait(q), XPJ_OK);
    assert_memory_equal(back, host, N);
    /* fills of every pattern size the API takes */
    static const size_t psizes[] = {1, 2, 4, 8, 16, 32, 64, 128};
    for (size_t t = 0; t < sizeof psizes / sizeof *psizes; t++) {
      uint8_t pat[128];
      for (size_t i = 0; i < psizes[t]; i++)
        pat[i] = (uint8_t)(0xA0 + i + t);
      size_t bytes = (N / psizes[t]) * psizes[t];
      assert_int_equal(xpj_enqueue_fill(q, p, pat, psizes[t], bytes, NULL),
                       XPJ_OK);
      assert_int_equal(xpj_enqueue_copy(q, back, p, bytes, NULL), XPJ_OK);
      assert_int_equal(xpj_queue_wait(q), XPJ_OK);
      for (size_t i = 0; i < bytes; i++)
        if (back[i] != pat[i % psizes[t]])
          fail_msg("kind %d, pattern of %zu: byte %zu is %u", kind, psizes[t],
                   i, back[i]);
    }
    if (kind == XPJ_MEM_DEVICE) { /* not plain host memory to the CPU */
      xpj_device *cpu;
      xpj_queue *cq;
      assert_int_equal(xpj_device_select(ctx, "cpu", &cpu), XPJ_OK);
      assert_int_equal(xpj_queue_create(cpu, NULL, &cq), XPJ_OK);
      assert_int_equal(xpj_enqueue_copy(cq, back, p, 16, NULL),
                       XPJ_ERR_INVALID);
      if (!strstr(xpj_last_error(), "device memory of opencl:0"))
        fail_msg("message: '%s'", xpj_last_error());
      xpj_queue_destroy(cq);
    }
    /* plain host memory on both sides is not the device's to copy */
    assert_int_equal(xpj_enqueue_copy(q, back, host, 16, NULL),
                     XPJ_ERR_INVALID);
    if (kind != XPJ_MEM_DEVICE) { /* the host reaches it directly */
      ((uint8_t *)p)[5] = 42;
      assert_int_equal(((uint8_t *)p)[5], 42);
    }
    assert_int_equal(xpj_mem_free(dev, p), XPJ_OK);
  }
  xpj_queue_destroy(q);
  xpj_context_destroy(ctx);
}

/* ---- kernels -------------------------------------------------------------- */

static const char src[] =
    "kernel fill_ids(out: global i64[], base: i64) range {\n"
    "  let i = global_id(0);\n"
    "  if i < size(out) { out[i] = base + i; }\n"
    "}\n";

/* A range kernel over an odd size: every element once, none past the end
 * (the hidden global-size arguments). */
static void run_fill_ids(xpj_device *dev, xpj_kernel *k) {
  xpj_queue *q;
  assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
  enum { N = 1001 };
  int64_t *out;
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, (N + 8) * 8, 0,
                                 (void **)&out), XPJ_OK);
  for (int i = 0; i < N + 8; i++)
    out[i] = -1;
  xpj_array a = xpj_array_1d(out, XPJ_I64, N);
  xpj_arg args[] = {xpj_arg_array(&a), xpj_arg_i64(1000)};
  xpj_range r = xpj_range_1d(N, 0);
  assert_int_equal(xpj_launch(q, k, &r, 2, args, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  for (int i = 0; i < N; i++)
    assert_int_equal(out[i], 1000 + i);
  for (int i = N; i < N + 8; i++)
    assert_int_equal(out[i], -1);
  assert_int_equal(xpj_mem_free(dev, out), XPJ_OK);
  xpj_queue_destroy(q);
}

static void test_bad_binaries(void **state) {
  (void)state;
  xpj_device *dev;
  xpj_context *ctx = ctx_opencl(&dev);
  if (!ctx)
    skip();
  /* not SPIR-V at all */
  static const uint8_t junk[64] = {0x03, 0x02, 0x23, 0x07, 1, 2, 3};
  void *native = NULL;
  xpj_status st = dev->ops->kernel_load(dev, junk, sizeof junk, "k", &native);
  assert_int_equal(st, XPJ_ERR_COMPILE);
  assert_null(native);
  const char *m = xpj_last_error();
  if (!strstr(m, "opencl:0") || !strstr(m, "SPIR-V"))
    fail_msg("message: '%s'", m);
  /* valid SPIR-V, but no such entry point */
  xpj_program *p;
  assert_int_equal(xpj_program_create(ctx, "t.xpk", src, strlen(src), NULL, &p),
                   XPJ_OK);
  uint8_t *bin = NULL;
  size_t len = 0;
  assert_int_equal(xpj_program_get_binary(p, "fill_ids", NULL, 0, "spirv:1.2",
                                          NULL, (void **)&bin, &len),
                   XPJ_OK);
  st = dev->ops->kernel_load(dev, bin, len, "no_such_kernel", &native);
  assert_int_equal(st, XPJ_ERR_COMPILE);
  if (!strstr(xpj_last_error(), "no_such_kernel") ||
      !strstr(xpj_last_error(), "CL_INVALID_KERNEL_NAME"))
    fail_msg("message: '%s'", xpj_last_error());
  /* truncated, mid-instruction and at an instruction boundary: refused
   * before the driver sees it */
  size_t cut = 5;
  for (size_t i = 5; i < len / 8;) {
    uint32_t w;
    memcpy(&w, bin + 4 * i, 4);
    i += w >> 16;
    cut = i;
  }
  st = dev->ops->kernel_load(dev, bin, 4 * cut, "__xpj_k_fill_ids", &native);
  assert_int_equal(st, XPJ_ERR_COMPILE);
  if (!strstr(xpj_last_error(), "invalid SPIR-V"))
    fail_msg("cut SPIR-V: '%s'", xpj_last_error());
  st = dev->ops->kernel_load(dev, bin, len / 2 & ~(size_t)3,
                             "__xpj_k_fill_ids", &native);
  assert_int_equal(st, XPJ_ERR_COMPILE);
  if (!strstr(xpj_last_error(), "word count") &&
      !strstr(xpj_last_error(), "invalid SPIR-V"))
    fail_msg("truncated SPIR-V: '%s'", xpj_last_error());
  /* (A well-formed module the driver cannot take, such as one asking for
   * the Shader capability, crashes Intel's SPIR-V reader outright: what
   * reaches a driver must be validated, which the compiler does.) */
  /* a native binary that is not one is refused, not crashed on */
  st = dev->ops->native_load(dev, junk, sizeof junk, "__xpj_k_fill_ids",
                             &native);
  assert_true(st != XPJ_OK);
  /* and the real thing works, under its entry point's name (docs/abi.md) */
  assert_int_equal(
      dev->ops->kernel_load(dev, bin, len, "__xpj_k_fill_ids", &native),
      XPJ_OK);
  dev->ops->kernel_unload(dev, native);
  free(bin);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
}

/* ---- the native cache ------------------------------------------------------ */

static xpj_context *ctx_cached(xpj_device **dev, xpj_program **p,
                               xpj_kernel **k, xpj_kernel_origin *origin) {
  xpj_context_desc desc = {.visible = "opencl", .cache_path = cache_dir,
                           .cache_mode = XPJ_CACHE_MODE_RW};
  xpj_context *ctx = NULL;
  assert_int_equal(xpj_context_create(&desc, &ctx), XPJ_OK);
  assert_int_equal(xpj_device_select(ctx, "opencl", dev), XPJ_OK);
  assert_int_equal(xpj_program_create(ctx, "t.xpk", src, strlen(src), NULL, p),
                   XPJ_OK);
  assert_int_equal(xpj_program_get_kernel(*p, "fill_ids", NULL, 0, *dev, NULL,
                                          k),
                   XPJ_OK);
  xpj_kernel_info ki;
  assert_int_equal(xpj_kernel_get_info(*k, &ki), XPJ_OK);
  *origin = ki.origin;
  return ctx;
}

typedef struct found {
  xpj_cache_entry e;
  int n;
} found;

static int find_native(void *ud, const xpj_cache_entry *e) {
  found *f = ud;
  if (!strncmp(e->target, "native:opencl:", 14)) {
    f->n++;
    f->e.code = strdup(e->code);
    f->e.kernel = strdup(e->kernel);
    f->e.dtypes = strdup(e->dtypes);
    f->e.ndim = e->ndim;
    f->e.target = strdup(e->target);
    f->e.options = strdup(e->options);
    f->e.versions = strdup(e->versions);
    f->e.entry = strdup(e->entry);
  }
  return 0;
}

/* test_native_cache's directory, of its own (the cache refuses one that
 * others can write, as /tmp): made by its setup, and removed by its
 * teardown whether the test passed, skipped or failed part-way. */
static char native_dir[64];

static int native_setup(void **state) {
  (void)state;
  end_escaped_child();
  snprintf(native_dir, sizeof native_dir, "/tmp/xpjit-test-ocl-XXXXXX");
  if (!mkdtemp(native_dir)) {
    native_dir[0] = 0;
    return -1;
  }
  snprintf(cache_dir, sizeof cache_dir, "%s/cache.db", native_dir);
  return 0;
}

/* With the cache's side directories (.hits, .stats, .flight: removing its
 * files by name left them, and so the directory): one left is a failure
 * of the test. */
static int native_teardown(void **state) {
  (void)state;
  end_escaped_child();
  if (!native_dir[0])
    return 0;
  rm_tree(native_dir);
  bool gone = access(native_dir, F_OK) == -1;
  native_dir[0] = 0;
  cache_dir[0] = 0;
  return gone ? 0 : -1;
}

static void test_native_cache(void **state) {
  (void)state;
  xpj_device *dev;
  xpj_context *probe = ctx_opencl(&dev);
  if (!probe)
    skip();
  xpj_context_destroy(probe);
  xpj_program *p;
  xpj_kernel *k;
  xpj_kernel_origin o;
  xpj_cache_counters c;

  /* cold: compiled, built by the driver, its binary stored */
  xpj_context *ctx = ctx_cached(&dev, &p, &k, &o);
  assert_int_equal(o, XPJ_ORIGIN_COMPILED);
  run_fill_ids(dev, k);
  assert_int_equal(xpj_context_cache_counters(ctx, &c), XPJ_OK);
  assert_int_equal(c.native_hits, 0);
  assert_int_equal(c.native_stores, 1);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);

  /* warm: the driver's binary is loaded, nothing is built */
  ctx = ctx_cached(&dev, &p, &k, &o);
  assert_int_equal(o, XPJ_ORIGIN_CACHE);
  run_fill_ids(dev, k);
  assert_int_equal(xpj_context_cache_counters(ctx, &c), XPJ_OK);
  assert_int_equal(c.native_hits, 1);
  assert_int_equal(c.native_stores, 0);
  xpj_program_destroy(p);

  /* a native entry the driver refuses (a new driver, a bad write) is
   * replaced from the portable binary, and the kernel still works */
  found f = {0};
  xpj_cache *l2 = xpj_context_cache(ctx);
  assert_non_null(l2);
  assert_int_equal(xpj_cache_list(l2, find_native, &f), XPJ_OK);
  assert_int_equal(f.n, 1);
  xpj_cache_key key = {f.e.code, f.e.kernel, f.e.dtypes, f.e.ndim,
                       f.e.target, f.e.options, f.e.versions};
  static const uint8_t bogus[] = "not a program binary";
  xpj_cache_value v = {0, bogus, sizeof bogus, f.e.entry, "", 0, 0, 1.0, 0};
  assert_int_equal(xpj_cache_put(l2, &key, &v), XPJ_OK);
  xpj_context_destroy(ctx);
  ctx = ctx_cached(&dev, &p, &k, &o);
  run_fill_ids(dev, k);
  assert_int_equal(xpj_context_cache_counters(ctx, &c), XPJ_OK);
  assert_int_equal(c.native_hits, 0);
  assert_int_equal(c.native_stores, 1);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  ctx = ctx_cached(&dev, &p, &k, &o);
  assert_int_equal(xpj_context_cache_counters(ctx, &c), XPJ_OK);
  assert_int_equal(c.native_hits, 1);
  run_fill_ids(dev, k);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  free((char *)f.e.code);
  free((char *)f.e.kernel);
  free((char *)f.e.dtypes);
  free((char *)f.e.target);
  free((char *)f.e.options);
  free((char *)f.e.versions);
  free((char *)f.e.entry);
}

/* A thread in xpj_queue_wait runs the commands of a device with streams
 * itself when the queue's thread is idle (runtime/queue.c help_streams):
 * batches submitted and synchronised once, host tasks and event waits
 * alone, in order (make test runs this again with XPJIT_QUEUE_HELP=0: all
 * on the queue's thread). The same results, events completed in order,
 * profiling times one after the other. */
static int count_done(void *u) {
  /* a host task: every command before it has finished */
  int *v = u;
  (*v)++;
  return 0;
}

static void help_run(xpj_device *dev, unsigned flags) {
  static const char add1[] =
      "kernel add1(x: global i32[]) range {\n"
      "  let i = global_id(0);\n"
      "  if i < shape(x, 0) { x[i] += 1; }\n"
      "}\n";
  xpj_program *p;
  assert_int_equal(
      xpj_program_create(dev->ctx, "h", add1, sizeof add1 - 1, NULL, &p),
      XPJ_OK);
  xpj_kernel *k;
  assert_int_equal(xpj_program_get_kernel(p, "add1", NULL, 0, dev, NULL, &k),
                   XPJ_OK);
  xpj_queue_desc qd = {flags, 0};
  xpj_queue *q;
  assert_int_equal(xpj_queue_create(dev, &qd, &q), XPJ_OK);
  enum { N = 1000, L = 150 };
  int32_t *x, host[N];
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_DEVICE, sizeof host, 0,
                                 (void **)&x), XPJ_OK);
  int32_t zero = 0;
  int tasks = 0;
  xpj_array a = xpj_array_1d(x, XPJ_I32, N);
  xpj_arg args[1] = {xpj_arg_array(&a)};
  xpj_range r = xpj_range_1d(N, 0);
  xpj_event *ev[L];
  assert_int_equal(xpj_enqueue_fill(q, x, &zero, sizeof zero, sizeof host,
                                    NULL), XPJ_OK);
  for (int round = 0; round < 3; round++) {
    /* more than the 64 a batch takes, a host task in the middle */
    for (int i = 0; i < L; i++) {
      if (i == L / 2)
        assert_int_equal(xpj_enqueue_host_task(q, count_done, &tasks, NULL),
                         XPJ_OK);
      assert_int_equal(xpj_launch(q, k, &r, 1, args, &ev[i]), XPJ_OK);
    }
    assert_int_equal(xpj_queue_wait(q), XPJ_OK);
    uint64_t last_end = 0;
    for (int i = 0; i < L; i++) {
      assert_int_equal(xpj_event_query(ev[i]), XPJ_EVENT_COMPLETE);
      if (flags & XPJ_QUEUE_PROFILING) {
        uint64_t qt, st, et;
        assert_int_equal(xpj_event_profile(ev[i], &qt, &st, &et), XPJ_OK);
        assert_true(st >= last_end && et >= st); /* one after the other */
        last_end = et;
      }
      xpj_event_release(ev[i]);
    }
    assert_int_equal(tasks, round + 1);
  }
  assert_int_equal(xpj_enqueue_copy(q, host, x, sizeof host, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  for (int i = 0; i < N; i++)
    assert_int_equal(host[i], 3 * L);
  xpj_mem_free(dev, x);
  xpj_queue_destroy(q);
  xpj_program_destroy(p);
}

static void test_waiter_runs_commands(void **state) {
  (void)state;
  xpj_device *dev;
  xpj_context *ctx = ctx_opencl(&dev);
  if (!ctx)
    skip();
  help_run(dev, 0);
  help_run(dev, XPJ_QUEUE_PROFILING);
  xpj_context_destroy(ctx);
}

/* ---- loops run four trips at a time (codegen.c lower_four_trips) ------ */

/* The stride loops GPUs run four trips at a time (PTX, -O2), built for
 * SPIR-V by the test hook XPJIT_FAULT_INJECT=unroll-loads so that they run
 * here: every trip count from 0 to 21 per work-item (a remainder of 0 to 3
 * after the unrolled trips), each loop form taken (< and <= bounds, a step
 * in a variable, local_size strides, a continue in a copy, a device
 * function and a constant loop in the body), and results that depend on
 * the order of the trips, against the same kernels compiled without the
 * hook and against the host. */
static const char four_src[] =
    "kernel lt_sum(x: global const i64[], out: global i64[]) ndrange(1) {\n"
    "    let acc: i64 = 0;\n"
    "    for (let i = global_id(0); i < shape(x, 0); i += global_size(0)) {\n"
    "        acc += 1;\n"
    "        if x[i] % 7 == 3 { continue; }\n"
    "        acc = acc * 3 + x[i];\n"
    "    }\n"
    "    out[global_id(0)] = acc;\n"
    "}\n"
    "kernel le_sum(x: global const i64[], out: global i64[]) ndrange(1) {\n"
    "    let g = global_size(0);\n"
    "    let acc: i64 = 0;\n"
    "    for (let i = global_id(0); i <= shape(x, 0) - 1; i += g) {\n"
    "        let v = x[i];\n"
    "        for (let k: i64 = 0; k < 3; k++) { v = v * 3 + k; }\n"
    "        acc = acc * 5 + v;\n"
    "    }\n"
    "    out[global_id(0)] = acc;\n"
    "}\n"
    "fn twice(a: global const i64[], j: i64) -> i64 { return a[j] * 2; }\n"
    "kernel ls_sum(x: global const i64[], out: global i64[]) ndrange(1) {\n"
    "    let acc: i64 = 0;\n"
    "    for (let j = local_id(0); j < shape(x, 0); j += local_size(0)) {\n"
    "        acc = acc * 7 + twice(x, j);\n"
    "    }\n"
    "    out[global_id(0)] = acc;\n"
    "}\n"
    "kernel sc_sum(x: global const i64[], out: global i64[], n: i64)\n"
    "        ndrange(1) {\n"
    "    let acc: i64 = 0;\n"
    "    for (let i = global_id(0); i < n; i += global_size(0)) {\n"
    "        acc = acc * 11 + x[i];\n"
    "    }\n"
    "    out[global_id(0)] = acc;\n"
    "}\n";

/* What kernel `which` of four_src leaves in out[w] (arithmetic wraps). */
static uint64_t four_ref(int which, const int64_t *x, uint64_t n, int64_t sn,
                         uint64_t w, uint64_t local, uint64_t global) {
  uint64_t acc = 0;
  if (which == 0) {
    for (uint64_t i = w; i < n; i += global) {
      acc += 1;
      if (x[i] % 7 != 3)
        acc = acc * 3 + (uint64_t)x[i];
    }
  } else if (which == 1) {
    for (uint64_t i = w; i + 1 <= n; i += global) {
      uint64_t v = (uint64_t)x[i];
      for (uint64_t k = 0; k < 3; k++)
        v = v * 3 + k;
      acc = acc * 5 + v;
    }
  } else if (which == 2) {
    for (uint64_t j = w % local; j < n; j += local)
      acc = acc * 7 + 2 * (uint64_t)x[j];
  } else {
    for (int64_t i = (int64_t)w; i < sn; i += (int64_t)global)
      acc = acc * 11 + (uint64_t)x[i];
  }
  return acc;
}

/* A context on the OpenCL device with the cache and the daemon off, and
 * text as a program, compiled with the test hook unroll-loads (hook) or
 * without; NULL (nothing left open) when there is no OpenCL device. The
 * hook stays set for the caller's compiles. */
static xpj_program *hook_program(const char *text, bool hook,
                                 xpj_context **ctx, xpj_device **dev) {
  if (hook)
    setenv("XPJIT_FAULT_INJECT", "unroll-loads", 1);
  else
    unsetenv("XPJIT_FAULT_INJECT");
  setenv("XPJIT_DAEMON", "off", 1);
  xpj_context_desc desc = {.visible = "opencl",
                           .cache_mode = XPJ_CACHE_MODE_OFF};
  assert_int_equal(xpj_context_create(&desc, ctx), XPJ_OK);
  if (xpj_device_select(*ctx, "opencl", dev) != XPJ_OK) {
    xpj_context_destroy(*ctx);
    unsetenv("XPJIT_FAULT_INJECT");
    return NULL;
  }
  xpj_program *p = NULL;
  assert_int_equal(xpj_program_create(*ctx, "hook.xpk", text, strlen(text),
                                      NULL, &p),
                   XPJ_OK);
  return p;
}

static void test_four_trips(void **state) {
  (void)state;
  static const char *const names[4] = {"lt_sum", "le_sum", "ls_sum",
                                       "sc_sum"};
  xpj_context *ctx[2];
  xpj_device *dev[2];
  xpj_program *p[2];
  xpj_kernel *k[2][4];
  size_t size[2][4];
  for (int h = 0; h < 2; h++) {
    p[h] = hook_program(four_src, h == 1, &ctx[h], &dev[h]);
    if (!p[h]) {
      if (h) {
        xpj_program_destroy(p[0]);
        xpj_context_destroy(ctx[0]);
      }
      skip();
    }
    for (int i = 0; i < 4; i++) {
      assert_int_equal(xpj_program_get_kernel(p[h], names[i], NULL, 0, dev[h],
                                              NULL, &k[h][i]),
                       XPJ_OK);
      void *bin = NULL;
      assert_int_equal(xpj_program_get_binary(p[h], names[i], NULL, 0,
                                              "spirv", NULL, &bin,
                                              &size[h][i]),
                       XPJ_OK);
      free(bin);
    }
  }
  unsetenv("XPJIT_FAULT_INJECT");
  /* the hook took effect: the loop built anew is larger (LLVM does not
   * unroll it for SPIR-V) */
  for (int i = 0; i < 4; i++)
    if (size[1][i] <= size[0][i])
      fail_msg("%s: %zu bytes of SPIR-V with the hook, %zu without",
               names[i], size[1][i], size[0][i]);
  enum { NMAX = 4 * 21 + 3 };
  static const uint64_t locals[] = {1, 1, 2, 4, 4};
  static const uint64_t globals[] = {1, 3, 4, 4, 8};
  for (int h = 0; h < 2; h++) {
    xpj_queue *q;
    assert_int_equal(xpj_queue_create(dev[h], NULL, &q), XPJ_OK);
    int64_t *x, *out;
    assert_int_equal(xpj_mem_alloc(dev[h], XPJ_MEM_SHARED, NMAX * 8, 0,
                                   (void **)&x), XPJ_OK);
    assert_int_equal(xpj_mem_alloc(dev[h], XPJ_MEM_SHARED, 8 * 8, 0,
                                   (void **)&out), XPJ_OK);
    for (int i = 0; i < NMAX; i++)
      x[i] = (int64_t)(i * 2654435761u % 1000) - 300;
    for (uint64_t n = 0; n <= NMAX; n += n < 24 ? 1 : 21)
      for (unsigned g = 0; g < sizeof globals / sizeof *globals; g++)
        for (int i = 0; i < 4 + 3; i++) {
          /* sc_sum's bound: n, and bounds below every i */
          static const int64_t below[3] = {-1, -5, INT64_MIN};
          int64_t sn = i < 4 ? (int64_t)n : below[i - 4];
          int ki = i < 4 ? i : 3;
          for (int w = 0; w < 8; w++)
            out[w] = -1;
          xpj_array ax = xpj_array_1d(x, XPJ_I64, n);
          xpj_array ao = xpj_array_1d(out, XPJ_I64, globals[g]);
          xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ao),
                            xpj_arg_i64(sn)};
          xpj_range r = xpj_range_1d(globals[g], locals[g]);
          assert_int_equal(xpj_launch(q, k[h][ki], &r, ki == 3 ? 3 : 2, args,
                                      NULL),
                           XPJ_OK);
          assert_int_equal(xpj_queue_wait(q), XPJ_OK);
          for (uint64_t w = 0; w < globals[g]; w++) {
            uint64_t want =
                four_ref(ki, x, n, sn, w, locals[g], globals[g]);
            if ((uint64_t)out[w] != want)
              fail_msg("%s%s: n %lld, global %llu, local %llu: work-item "
                       "%llu has %lld, not %lld", names[ki],
                       h ? " (four trips)" : "", (long long)sn,
                       (unsigned long long)globals[g],
                       (unsigned long long)locals[g], (unsigned long long)w,
                       (long long)out[w], (long long)want);
          }
        }
    assert_int_equal(xpj_mem_free(dev[h], x), XPJ_OK);
    assert_int_equal(xpj_mem_free(dev[h], out), XPJ_OK);
    xpj_queue_destroy(q);
  }
  for (int h = 0; h < 2; h++) {
    xpj_program_destroy(p[h]);
    xpj_context_destroy(ctx[h]);
  }
}


/* ---- sums whose closed forms need integers of 65 to 67 bits ---------- */

/* The loops test_codegen test_spirv_wide_sums compiles (scalar evolution
 * rewrites their exit values as products in i65-i67, which target_spirv.c
 * makes of 64-bit pairs), run here at -O1, -O2 and -O3, and at -O2 with
 * the test hook wide-pairs-off (the module optimised again with the exit
 * values off: the loops kept), for n = 0, 1, 2, 3, 1000 and, without the
 * hook, sizes whose products pass 2^64 (2^32 + 5, 3037000507: the sums
 * are then defined modulo 2^64, as the kernels' arithmetic wraps), against
 * exact sums modulo 2^64. */
#include "wide_sums.inc"

/* C(n, m) modulo 2^64 (m <= 5): the m factors n, n - 1, ... with m!'s
 * primes divided out of them one at a time (m consecutive integers hold
 * them all), then multiplied, wrapping */
static uint64_t binom64(uint64_t n, unsigned m) {
  if (n < m)
    return 0;
  uint64_t t[5], r = 1;
  for (unsigned i = 0; i < m; i++)
    t[i] = n - i;
  for (unsigned d = 2; d <= m; d++)
    for (unsigned x = d, p = 2; x > 1; p++)
      while (x % p == 0) {
        x /= p;
        unsigned i = 0;
        while (t[i] % p)
          i++;
        t[i] /= p;
      }
  for (unsigned i = 0; i < m; i++)
    r *= t[i];
  return r;
}

/* sum of k^p for 0 <= k < n modulo 2^64, from k^p in the binomial basis
 * (Stirling numbers times j!) and sum_{k<n} C(k, j) = C(n, j + 1) */
static uint64_t power_sum(uint64_t n, unsigned p) {
  static const uint64_t c[5][5] = {
      {0}, {0, 1}, {0, 1, 2}, {0, 1, 6, 6}, {0, 1, 14, 36, 24}};
  uint64_t r = 0;
  for (unsigned j = 1; j <= p; j++)
    r += c[p][j] * binom64(n, j + 1);
  return r;
}

/* what kernel `which` of wide_sums_src leaves (a: span's start) */
static uint64_t wide_ref(int which, int64_t a, uint64_t n) {
  switch (which) {
  case 0: case 5: return power_sum(n, 1);
  case 1: case 2: return power_sum(n, 2);
  case 3: return power_sum(n, 3);
  case 4: return power_sum(n, 4);
  case 6: return binom64(n, 4);
  default: { /* -3 (a + ... + n - 1) */
    if ((int64_t)n <= a)
      return 0;
    __int128 cnt = (__int128)(int64_t)n - a, top = (__int128)(int64_t)n + a - 1;
    if (cnt % 2 == 0)
      cnt /= 2;
    else
      top /= 2;
    return (uint64_t)0 - 3 * ((uint64_t)cnt * (uint64_t)top);
  }
  }
}

static void test_wide_sums(void **state) {
  (void)state;
  static const char *const names[8] = {"s64",   "s32w", "sq",   "cube",
                                       "quart", "us",   "nest", "span"};
  /* the model against the loops themselves */
  for (uint64_t n = 0; n < 40; n++)
    for (int w = 0; w < 8; w++) {
      uint64_t acc = 0;
      int64_t a = w == 7 ? (int64_t)n / 2 - 9 : 0;
      for (int64_t k = a; k < (int64_t)n; k++) {
        uint64_t u = (uint64_t)k;
        if (w == 6)
          for (uint64_t j = 0; j < u; j++)
            acc += j * (j - 1) / 2;
        else
          acc += w == 7 ? (uint64_t)0 - 3 * u
                 : w == 0 || w == 5 ? u
                 : w <= 2 ? u * u
                 : w == 3 ? u * u * u
                          : u * u * u * u;
      }
      if (acc != wide_ref(w, a, n))
        fail_msg("model of %s, n %llu: %llu, not %llu", names[w],
                 (unsigned long long)n, (unsigned long long)wide_ref(w, a, n),
                 (unsigned long long)acc);
    }
  /* n (n - 1) passes 2^64; n^2 just below 2^63 */
  static const uint64_t big[] = {(1ull << 32) + 5, 3037000507ull};
  static const uint64_t small[] = {0, 1, 2, 3, 1000};
  struct {
    const char *hook;
    unsigned level;
  } runs[] = {{NULL, 1}, {NULL, 2}, {NULL, 3}, {"wide-pairs-off", 2}};
  for (size_t ri = 0; ri < sizeof runs / sizeof *runs; ri++) {
    if (runs[ri].hook)
      setenv("XPJIT_FAULT_INJECT", runs[ri].hook, 1);
    else
      unsetenv("XPJIT_FAULT_INJECT");
    setenv("XPJIT_DAEMON", "off", 1);
    xpj_context *ctx;
    xpj_device *dev;
    xpj_context_desc desc = {.visible = "opencl",
                             .cache_mode = XPJ_CACHE_MODE_OFF};
    assert_int_equal(xpj_context_create(&desc, &ctx), XPJ_OK);
    if (xpj_device_select(ctx, "opencl", &dev) != XPJ_OK) {
      xpj_context_destroy(ctx);
      unsetenv("XPJIT_FAULT_INJECT");
      skip();
    }
    xpj_program *p = NULL;
    assert_int_equal(xpj_program_create(ctx, "wide.xpk", wide_sums_src,
                                        strlen(wide_sums_src), NULL, &p),
                     XPJ_OK);
    xpj_compile_opts o;
    xpj_compile_opts_default(&o);
    o.opt_level = runs[ri].level;
    xpj_queue *q;
    assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
    int64_t *out;
    assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, 8, 0, (void **)&out),
                     XPJ_OK);
    for (int w = 0; w < 8; w++) {
      xpj_kernel *k;
      xpj_status st =
          xpj_program_get_kernel(p, names[w], NULL, 0, dev, &o, &k);
      if (st != XPJ_OK)
        fail_msg("%s -O%u%s: %s", names[w], runs[ri].level,
                 runs[ri].hook ? " (wide-pairs-off)" : "",
                 xpj_last_error());
      /* the loops kept run their trips: the small sizes only (nest's
       * two outer loops are kept at every level: LLVM closes the inner
       * one only) */
      size_t nn = 5 + (runs[ri].hook || w == 6 ? 0 : 2);
      for (size_t i = 0; i < nn; i++) {
        uint64_t n = i < 5 ? small[i] : big[i - 5];
        if (w == 1 && n > INT32_MAX) /* s32w: an i32 bound */
          n = INT32_MAX;
        int64_t a = w == 7 ? (int64_t)n / 2 - 9 : 0;
        xpj_array ao = xpj_array_1d(out, w == 5 ? XPJ_U64 : XPJ_I64, 1);
        xpj_arg args[3];
        unsigned na = 0;
        if (w == 7)
          args[na++] = xpj_arg_i64(a);
        args[na++] = w == 1   ? xpj_arg_i32((int32_t)n)
                     : w == 5 ? xpj_arg_u64(n)
                              : xpj_arg_i64((int64_t)n);
        args[na++] = xpj_arg_array(&ao);
        out[0] = 0x5a5a;
        xpj_range r = xpj_range_1d(1, 0);
        assert_int_equal(xpj_launch(q, k, &r, na, args, NULL), XPJ_OK);
        assert_int_equal(xpj_queue_wait(q), XPJ_OK);
        uint64_t want = wide_ref(w, a, n);
        if ((uint64_t)out[0] != want)
          fail_msg("%s -O%u%s, n %llu: %llu, not %llu", names[w],
                   runs[ri].level, runs[ri].hook ? " (wide-pairs-off)" : "",
                   (unsigned long long)n, (unsigned long long)out[0],
                   (unsigned long long)want);
      }
    }
    unsetenv("XPJIT_FAULT_INJECT");
    assert_int_equal(xpj_mem_free(dev, out), XPJ_OK);
    xpj_queue_destroy(q);
    xpj_program_destroy(p);
    xpj_context_destroy(ctx);
  }
}

/* Views indexed by a counted loop's variable: the code generator's own
 * induction variables (codegen.c scaled_pointer, scaled_index; PTX's at
 * -O2, built for SPIR-V by the same hook): a pointer per view and fixed
 * other indices (a variable, a parameter), an offset where another index
 * changes in the loop (an inner loop's), a step of 2 from 1, a continue,
 * a read of the variable after the loop, a four-trip loop over a row of a
 * 2-D view, and views of every kind of stride (transposed, negative, 0),
 * against the host, with the hook and without. */
static const char scaled_src[] =
    "kernel mv(a: global const i64[,], x: global const i64[], out: global i64[]) range(1) {\n"
    "    let r = global_id(0);\n"
    "    if r >= shape(a, 0) { return; }\n"
    "    let acc: i64 = 0;\n"
    "    for (let k: i64 = 0; k < shape(a, 1); k++) {\n"
    "        acc = acc * 3 + a[r, k] * x[k];\n"
    "    }\n"
    "    let s: i64 = 0;\n"
    "    let k2: i64 = 1;\n"
    "    for (k2 = 1; k2 < shape(a, 1); k2 += 2) {\n"
    "        for (let j: i64 = 0; j < shape(a, 0); j++) {\n"
    "            s = s * 5 + a[j, k2];\n"
    "        }\n"
    "        if a[r, k2] % 4 == 1 { continue; }\n"
    "        s = s * 7 + x[k2 - 1] + a[r, k2];\n"
    "    }\n"
    "    out[r] = acc * 11 + s * 13 + k2;\n"
    "}\n"
    "kernel rowsum(a: global const i64[,], out: global i64[]) ndrange(1) {\n"
    "    let acc: i64 = 0;\n"
    "    let r = shape(a, 0) - 1;\n"
    "    for (let i = global_id(0); i < shape(a, 1); i += global_size(0)) {\n"
    "        acc = acc * 3 + a[r, i] - a[0, i];\n"
    "    }\n"
    "    out[global_id(0)] = acc;\n"
    "}\n";

/* element [i, j] of a view over base */
static int64_t view_at(const int64_t *base, const xpj_array *v, int64_t i,
                       int64_t j) {
  return base[v->offset + i * v->strides[0] + j * v->strides[1]];
}

static uint64_t mv_ref(const int64_t *base, const xpj_array *a,
                       const int64_t *x, int64_t r) {
  int64_t rows = a->shape[0], cols = a->shape[1];
  uint64_t acc = 0, s = 0;
  for (int64_t k = 0; k < cols; k++)
    acc = acc * 3 + (uint64_t)(view_at(base, a, r, k) * x[k]);
  int64_t k2;
  for (k2 = 1; k2 < cols; k2 += 2) {
    for (int64_t j = 0; j < rows; j++)
      s = s * 5 + (uint64_t)view_at(base, a, j, k2);
    if (view_at(base, a, r, k2) % 4 == 1)
      continue;
    s = s * 7 + (uint64_t)x[k2 - 1] + (uint64_t)view_at(base, a, r, k2);
  }
  return acc * 11 + s * 13 + (uint64_t)k2;
}

static uint64_t rowsum_ref(const int64_t *base, const xpj_array *a,
                           uint64_t w, uint64_t global) {
  uint64_t acc = 0;
  for (uint64_t i = w; i < (uint64_t)a->shape[1]; i += global)
    acc = acc * 3 + (uint64_t)(view_at(base, a, a->shape[0] - 1, (int64_t)i) -
                               view_at(base, a, 0, (int64_t)i));
  return acc;
}

static void test_scaled_views(void **state) {
  (void)state;
  for (int h = 0; h < 2; h++) {
    xpj_context *ctx;
    xpj_device *dev;
    xpj_program *p = hook_program(scaled_src, h == 1, &ctx, &dev);
    if (!p)
      skip();
    xpj_kernel *mv, *rowsum;
    assert_int_equal(xpj_program_get_kernel(p, "mv", NULL, 0, dev, NULL, &mv),
                     XPJ_OK);
    assert_int_equal(xpj_program_get_kernel(p, "rowsum", NULL, 0, dev, NULL,
                                            &rowsum),
                     XPJ_OK);
    unsetenv("XPJIT_FAULT_INJECT");
    xpj_queue *q;
    assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
    enum { N = 64 * 64 };
    int64_t *base, *x, *out;
    assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * 8, 0, (void **)&base), XPJ_OK);
    assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, 64 * 8, 0, (void **)&x), XPJ_OK);
    assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, 64 * 8, 0, (void **)&out), XPJ_OK);
    for (int i = 0; i < N; i++)
      base[i] = (int64_t)(i * 2654435761u % 1000) - 300;
    for (int i = 0; i < 64; i++)
      x[i] = (int64_t)(i * 40503u % 97) - 40;
    /* shape, strides, offset: C order, transposed, both strides negative,
     * a row repeated (stride 0), a column of a wider matrix */
    static const struct {
      int64_t rows, cols, s0, s1, off;
    } views[] = {
        {5, 7, 7, 1, 0},      {6, 9, 1, 6, 0},   {4, 11, -11, -1, 43},
        {3, 13, 0, 2, 5},     {7, 1, 64, 1, 3},  {9, 22, 64, 2, 1},
        {1, 0, 4, 1, 0},      {8, 21, -64, 3, 64 * 7 + 1},
    };
    for (unsigned v = 0; v < sizeof views / sizeof *views; v++) {
      int64_t shape[2] = {views[v].rows, views[v].cols},
              strides[2] = {views[v].s0, views[v].s1};
      xpj_array a = xpj_array_view(base, XPJ_I64, 2, shape, strides, views[v].off);
      xpj_array ax = xpj_array_1d(x, XPJ_I64, 64);
      xpj_array ao = xpj_array_1d(out, XPJ_I64, 64);
      for (int w = 0; w < 64; w++)
        out[w] = -1;
      xpj_arg args[] = {xpj_arg_array(&a), xpj_arg_array(&ax), xpj_arg_array(&ao)};
      xpj_range r = xpj_range_1d((uint64_t)(views[v].rows ? views[v].rows : 1), 0);
      assert_int_equal(xpj_launch(q, mv, &r, 3, args, NULL), XPJ_OK);
      assert_int_equal(xpj_queue_wait(q), XPJ_OK);
      for (int64_t row = 0; row < views[v].rows; row++)
        if ((uint64_t)out[row] != mv_ref(base, &a, x, row))
          fail_msg("mv%s, view %u: row %lld has %lld, not %lld",
                   h ? " (hook)" : "", v, (long long)row, (long long)out[row],
                   (long long)mv_ref(base, &a, x, row));
      if (!views[v].rows)
        continue;
      for (uint64_t g = 1; g <= 8; g *= 2) {
        xpj_arg args2[] = {xpj_arg_array(&a), xpj_arg_array(&ao)};
        xpj_range r2 = xpj_range_1d(g, g);
        assert_int_equal(xpj_launch(q, rowsum, &r2, 2, args2, NULL), XPJ_OK);
        assert_int_equal(xpj_queue_wait(q), XPJ_OK);
        for (uint64_t w = 0; w < g; w++)
          if ((uint64_t)out[w] != rowsum_ref(base, &a, w, g))
            fail_msg("rowsum%s, view %u, global %llu: work-item %llu has "
                     "%lld, not %lld", h ? " (hook)" : "", v,
                     (unsigned long long)g, (unsigned long long)w,
                     (long long)out[w], (long long)rowsum_ref(base, &a, w, g));
      }
    }
    assert_int_equal(xpj_mem_free(dev, base), XPJ_OK);
    assert_int_equal(xpj_mem_free(dev, x), XPJ_OK);
    assert_int_equal(xpj_mem_free(dev, out), XPJ_OK);
    xpj_queue_destroy(q);
    xpj_program_destroy(p);
    xpj_context_destroy(ctx);
  }
}

/* Loops the four trips must leave alone or get right (an adversarial
 * review found both): a step that is not one (i = g + (i + 10) is no
 * `i += g`), and a step so large that 3 * step wraps (a shape of 3.5e18,
 * from a view of stride 0), with the hook and without: one work-item
 * counts its trips and keeps its last i (3.5e18: below XPJ_MAX_EXTENT, as
 * launches check, and wrapping, 3 * 3.5e18 > 2^63, to 92 trips, not a
 * hang). */
static const char edge_src[] =
    "kernel odd_step(x: global const i64[], out: global i64[], n: i64)\n"
    "        ndrange(1) {\n"
    "    let cnt: i64 = 0;\n"
    "    let last: i64 = -1;\n"
    "    for (let i: i64 = 0; i < n; i = global_size(0) + (i + 10)) {\n"
    "        cnt += 1;\n"
    "        last = i + x[0];\n"
    "    }\n"
    "    out[0] = cnt;\n"
    "    out[1] = last;\n"
    "}\n"
    "kernel huge_step(x: global const i64[], big: global const i64[],\n"
    "                 out: global i64[], n: i64) ndrange(1) {\n"
    "    let cnt: i64 = 0;\n"
    "    let last: i64 = -1;\n"
    "    for (let i: i64 = 0; i < n; i += shape(big, 0)) {\n"
    "        cnt += 1;\n"
    "        last = i + x[0];\n"
    "    }\n"
    "    out[0] = cnt;\n"
    "    out[1] = last;\n"
    "}\n";

static void test_four_trips_edges(void **state) {
  (void)state;
  for (int h = 0; h < 2; h++) {
    xpj_context *ctx = NULL;
    xpj_device *dev = NULL;
    xpj_program *p = hook_program(edge_src, h == 1, &ctx, &dev);
    if (!p)
      skip();
    xpj_kernel *odd, *huge;
    assert_int_equal(xpj_program_get_kernel(p, "odd_step", NULL, 0, dev, NULL,
                                            &odd),
                     XPJ_OK);
    assert_int_equal(xpj_program_get_kernel(p, "huge_step", NULL, 0, dev,
                                            NULL, &huge),
                     XPJ_OK);
    unsetenv("XPJIT_FAULT_INJECT");
    xpj_queue *q;
    assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
    int64_t *x, *out, *big;
    assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, 8, 0, (void **)&x),
                     XPJ_OK);
    assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, 16, 0, (void **)&out),
                     XPJ_OK);
    assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, 8, 0, (void **)&big),
                     XPJ_OK);
    x[0] = -300;
    big[0] = 7;
    xpj_array ax = xpj_array_1d(x, XPJ_I64, 1),
              ao = xpj_array_1d(out, XPJ_I64, 2);
    int64_t shape[1] = {3500000000000000000}, stride[1] = {0};
    xpj_array ab = xpj_array_view(big, XPJ_I64, 1, shape, stride, 0);
    xpj_range r = xpj_range_1d(1, 1);
    /* odd_step: i = 0, 11, ..., 99 */
    xpj_arg a1[] = {xpj_arg_array(&ax), xpj_arg_array(&ao), xpj_arg_i64(100)};
    assert_int_equal(xpj_launch(q, odd, &r, 3, a1, NULL), XPJ_OK);
    assert_int_equal(xpj_queue_wait(q), XPJ_OK);
    if (out[0] != 10 || out[1] != 99 - 300)
      fail_msg("odd_step%s: %lld trips, last %lld (expected 10, -201)",
               h ? " (four trips)" : "", (long long)out[0], (long long)out[1]);
    /* huge_step: one trip (3 * step wraps: four trips must not run) */
    xpj_arg a2[] = {xpj_arg_array(&ax), xpj_arg_array(&ab), xpj_arg_array(&ao),
                    xpj_arg_i64(100)};
    assert_int_equal(xpj_launch(q, huge, &r, 4, a2, NULL), XPJ_OK);
    assert_int_equal(xpj_queue_wait(q), XPJ_OK);
    if (out[0] != 1 || out[1] != -300)
      fail_msg("huge_step%s: %lld trips, last %lld (expected 1, -300)",
               h ? " (four trips)" : "", (long long)out[0], (long long)out[1]);
    xpj_mem_free(dev, x);
    xpj_mem_free(dev, out);
    xpj_mem_free(dev, big);
    xpj_queue_destroy(q);
    xpj_program_destroy(p);
    xpj_context_destroy(ctx);
  }
}

/* Contexts created and destroyed by four threads at once, each finding
 * the OpenCL devices: PoCL 3.1 (Debian 12's ICD) crashed in
 * clGetDeviceIDs/clGetDeviceInfo while another thread was in discovery
 * (an adversarial review: 5 crashes in 5 runs). In a child process that
 * loads OpenCL afresh with the system's ICDs, PoCL's among them where it
 * is installed (this process uses Intel's). */
static void *create_contexts(void *arg) {
  (void)arg;
  for (int i = 0; i < 10; i++) {
    xpj_context *c = NULL;
    if (xpj_context_create(NULL, &c) != XPJ_OK)
      return (void *)1;
    xpj_context_destroy(c);
  }
  return NULL;
}

static void test_contexts_from_threads(void **state) {
  (void)state;
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (access("/etc/OpenCL/vendors", R_OK) == 0)
      setenv("OCL_ICD_VENDORS", "/etc/OpenCL/vendors", 1);
    unsetenv("XPJIT_DEVICE");
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
      if (pthread_create(&t[i], NULL, create_contexts, NULL))
        _exit(3);
    int bad = 0;
    for (int i = 0; i < 4; i++) {
      void *r;
      pthread_join(t[i], &r);
      bad |= r != NULL;
    }
    _exit(bad ? 2 : 0);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status))
    fail_msg("the child %s %d", WIFEXITED(status) ? "exited" : "died of signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

int main(void) {
  test_owner_init();
  bool intel = use_intel();
  if (!intel)
    print_message("no Intel OpenCL runtime (sh tools/intel-ocl.sh): the "
                  "device tests skip\n");
  const struct CMUnitTest tests[] = {
      guarded_test(test_contexts_from_threads), /* before any loads */
      guarded_test(test_no_loader),
      guarded_test(test_discovery),
      guarded_test(test_native_handles),
      guarded_test(test_memory),
      guarded_test(test_bad_binaries),
      cmocka_unit_test_setup_teardown(test_native_cache, native_setup,
                                      native_teardown),
      guarded_test(test_waiter_runs_commands),
      guarded_test(test_four_trips),
      guarded_test(test_wide_sums),
      guarded_test(test_scaled_views),
      guarded_test(test_four_trips_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
