/* bench/opencl.c - getting kernels ready on an OpenCL device that takes
 * SPIR-V (Intel's OpenCL runtime for CPUs: sh tools/intel-ocl.sh), per
 * fresh context (as a new process would):
 *
 *   cold      empty cache: xpjit compiles to SPIR-V, the driver builds it
 *   portable  SPIR-V from the cache, the driver builds it: what a runtime
 *             that caches only the portable binary pays in every process
 *             (the peer: XPJIT_NATIVE_CACHE=off)
 *   native    the driver's own binary from the cache: nothing is built
 *
 * over the storm's 20 kernels (tests/storm20.h), each launched and checked
 * once so that a binary that does not run cannot look fast. Median of R
 * rounds; ratios portable/native.
 *
 * Then launch overhead: N launches of a tiny kernel (scale, 256 f32) and
 * one wait, through xpjit (arguments checked and marshalled per launch)
 * and through bare OpenCL on the same device with the same SPIR-V
 * (clEnqueueNDRangeKernel in a loop, arguments set once, one clFinish):
 * microseconds per launch and the ratio. */
#define CL_TARGET_OPENCL_VERSION 300
#define BENCH_WANT_OPENCL 1
#include "../tests/storm20.h"
#include "bench_util.h"

#include "xpjit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static char dbpath[256];

/* One fresh context: all 20 kernels got and launched; ms to get them. */
static double round_ms(const char *src, size_t len, int *bad) {
  xpj_context_desc desc = {.visible = "opencl", .cache_path = dbpath,
                           .cache_mode = XPJ_CACHE_MODE_RW};
  xpj_context *ctx;
  xpj_device *dev;
  if (xpj_context_create(&desc, &ctx) != XPJ_OK ||
      xpj_device_select(ctx, "opencl", &dev) != XPJ_OK) {
    fprintf(stderr, "bench/opencl: no OpenCL device that takes SPIR-V: %s\n"
            "(sh tools/intel-ocl.sh; export OCL_ICD_VENDORS=...)\n",
            xpj_last_error());
    exit(2);
  }
  xpj_program *p;
  if (xpj_program_create(ctx, "axpy.xpk", src, len, NULL, &p) != XPJ_OK) {
    fprintf(stderr, "bench/opencl: %s\n", xpj_last_error());
    exit(1);
  }
  xpj_kernel *ks[NKERNELS];
  double t0 = now_ms();
  for (int k = 0; k < NKN; k++)
    for (int d = 0; d < NDT; d++)
      if (xpj_program_get_kernel(p, knames[k], dts[d].dtypes, 1, dev, NULL,
                                 &ks[k * NDT + d]) != XPJ_OK) {
        fprintf(stderr, "bench/opencl: %s\n", xpj_last_error());
        exit(1);
      }
  double ms = now_ms() - t0;
  xpj_queue *q;
  void *x = NULL, *y = NULL;
  if (xpj_queue_create(dev, NULL, &q) != XPJ_OK ||
      xpj_mem_alloc(dev, XPJ_MEM_SHARED, 1000 * 8, 0, &x) != XPJ_OK ||
      xpj_mem_alloc(dev, XPJ_MEM_SHARED, 1000 * 8, 0, &y) != XPJ_OK) {
    fprintf(stderr, "bench/opencl: %s\n", xpj_last_error());
    exit(1);
  }
  char err[256];
  for (int k = 0; k < NKN; k++)
    for (int d = 0; d < NDT; d++)
      if (storm_launch_check(q, ks[k * NDT + d], k, dts[d].t, x, y, 1000, err,
                             sizeof err)) {
        fprintf(stderr, "bench/opencl: %s %s: %s\n", knames[k],
                dts[d].dtypes, err);
        ++*bad;
      }
  xpj_queue_destroy(q);
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, y);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  return ms;
}

static void clear_db(void) {
  const char *sfx[] = {"", "-wal", "-shm", ".lock", ".key"};
  char f[300];
  for (int i = 0; i < 5; i++) {
    snprintf(f, sizeof f, "%s%s", dbpath, sfx[i]);
    unlink(f);
  }
}

/* ---- launch overhead ---------------------------------------------------- */

enum { NL = 2000, NE = 256 };

static double xpjit_launch_us(const char *src, size_t len, const uint8_t **spv,
                             size_t *spv_len) {
  xpj_context_desc desc = {.visible = "opencl"};
  xpj_context *ctx;
  xpj_device *dev;
  xpj_program *p;
  xpj_kernel *k;
  xpj_queue *q;
  float *x;
  if (xpj_context_create(&desc, &ctx) != XPJ_OK ||
      xpj_device_select(ctx, "opencl", &dev) != XPJ_OK ||
      xpj_program_create(ctx, "axpy.xpk", src, len, NULL, &p) != XPJ_OK ||
      xpj_program_get_kernel(p, "scale", "T=f32", 1, dev, NULL, &k) !=
          XPJ_OK ||
      xpj_queue_create(dev, NULL, &q) != XPJ_OK ||
      xpj_mem_alloc(dev, XPJ_MEM_SHARED, NE * 4, 0, (void **)&x) != XPJ_OK ||
      xpj_program_get_binary(p, "scale", "T=f32", 1, "spirv:1.2", NULL,
                             (void **)spv, spv_len) != XPJ_OK) {
    fprintf(stderr, "bench/opencl: %s\n", xpj_last_error());
    exit(1);
  }
  for (int i = 0; i < NE; i++)
    x[i] = 1.0f;
  xpj_array a = xpj_array_1d(x, XPJ_F32, NE);
  xpj_arg args[] = {xpj_arg_f32(1.0f), xpj_arg_array(&a)};
  xpj_range r = xpj_range_1d(NE, 0);
  for (int i = 0; i < 100; i++)
    xpj_launch(q, k, &r, 2, args, NULL);
  xpj_queue_wait(q);
  double t0 = now_ms();
  for (int i = 0; i < NL; i++)
    if (xpj_launch(q, k, &r, 2, args, NULL) != XPJ_OK) {
      fprintf(stderr, "bench/opencl: %s\n", xpj_last_error());
      exit(1);
    }
  xpj_status st = xpj_queue_wait(q);
  double us = (now_ms() - t0) * 1e3 / NL;
  if (st != XPJ_OK || x[0] != 1.0f) {
    fprintf(stderr, "bench/opencl: launches failed: %s\n", xpj_last_error());
    exit(1);
  }
  xpj_mem_free(dev, x);
  xpj_queue_destroy(q);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  return us;
}

static double bare_launch_us(const uint8_t *spv, size_t spv_len) {
  void *h = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  bench_cl_api cl;
  char why[400];
  if (!h || !bench_cl_load(h, "libOpenCL.so.1", &cl, why, sizeof why) ||
      !cl.CreateProgramWithIL)
    return -1;
  cl_platform_id pl;
  cl_device_id d;
  cl_int e;
  cl_uint n;
  if (cl.GetPlatformIDs(1, &pl, &n) != CL_SUCCESS ||
      cl.GetDeviceIDs(pl, 0xFFFFFFFF, 1, &d, &n) != CL_SUCCESS)
    return -1;
  cl_context c = cl.CreateContext(NULL, 1, &d, NULL, NULL, &e);
  cl_command_queue q = cl.CreateCommandQueue(c, d, 0, &e);
  cl_program pr = cl.CreateProgramWithIL(c, spv, spv_len, &e);
  if (!pr || cl.BuildProgram(pr, 1, &d, "", NULL, NULL) != CL_SUCCESS)
    return -1;
  /* the entry point of kernel scale (docs/abi.md) */
  cl_kernel k = cl.CreateKernel(pr, "__xpj_k_scale", &e);
  float init[NE];
  for (int i = 0; i < NE; i++)
    init[i] = 1.0f;
  cl_mem b = cl.CreateBuffer(c, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                            sizeof init, init, &e);
  float alpha = 1.0f;
  int64_t off = 0, shape = NE, stride = 1, g[3] = {NE, 1, 1};
  cl.SetKernelArg(k, 0, 4, &alpha);
  cl.SetKernelArg(k, 1, sizeof b, &b);
  cl.SetKernelArg(k, 2, 8, &off);
  cl.SetKernelArg(k, 3, 8, &shape);
  cl.SetKernelArg(k, 4, 8, &stride);
  for (int i = 0; i < 3; i++)
    cl.SetKernelArg(k, 5 + (cl_uint)i, 8, &g[i]);
  size_t gs = NE;
  for (int i = 0; i < 100; i++)
    cl.EnqueueNDRangeKernel(q, k, 1, NULL, &gs, NULL, 0, NULL, NULL);
  cl.Finish(q);
  double t0 = now_ms();
  for (int i = 0; i < NL; i++)
    if (cl.EnqueueNDRangeKernel(q, k, 1, NULL, &gs, NULL, 0, NULL, NULL) !=
        CL_SUCCESS)
      return -1;
  if (cl.Finish(q) != CL_SUCCESS)
    return -1;
  return (now_ms() - t0) * 1e3 / NL; /* objects live to the process end */
}

int main(int argc, char **argv) {
  int R = argc > 1 ? atoi(argv[1]) : 5;
  if (R < 1)
    R = 1;
  size_t len;
  char *src = slurp("examples/axpy.xpk", &len);
  if (!src) {
    fprintf(stderr, "bench/opencl: run from the repository root\n");
    return 2;
  }
  setenv("XPJIT_DAEMON", "off", 1);
  /* a directory of our own: the cache refuses one others can write (/tmp) */
  static char dir[] = "/tmp/xpjit-bench-opencl-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("bench/opencl: mkdtemp");
    return 2;
  }
  snprintf(dbpath, sizeof dbpath, "%s/cache.db", dir);
  double cold[64], port[64], nat[64];
  int bad = 0;
  if (R > 64)
    R = 64;
  for (int r = 0; r < R; r++) {
    clear_db();
    unsetenv("XPJIT_NATIVE_CACHE");
    cold[r] = round_ms(src, len, &bad);
    setenv("XPJIT_NATIVE_CACHE", "off", 1);
    port[r] = round_ms(src, len, &bad);
    unsetenv("XPJIT_NATIVE_CACHE");
    nat[r] = round_ms(src, len, &bad);
  }
  clear_db();
  double c = median(cold, R), p = median(port, R), n = median(nat, R);
  printf("bench/opencl: %d kernels per fresh context on OpenCL (SPIR-V), "
         "median of %d rounds\n", NKERNELS, R);
  printf("  cold (compile + driver build)        %8.1f ms\n", c);
  printf("  portable cache (driver build; peer)  %8.1f ms\n", p);
  printf("  native cache (driver binary)         %8.1f ms\n", n);
  printf("  native vs portable: %.1fx faster; vs cold: %.1fx\n", p / n, c / n);
  printf("  launches checked: %s\n", bad ? "FAILED" : "all correct");
  double xl[64], bl[64];
  const uint8_t *spv = NULL;
  size_t spv_len = 0;
  for (int r = 0; r < R; r++) {
    free((void *)spv);
    xl[r] = xpjit_launch_us(src, len, &spv, &spv_len);
    bl[r] = bare_launch_us(spv, spv_len);
  }
  free((void *)spv);
  double xu = median(xl, R), bu = median(bl, R);
  printf("launch overhead: %d launches of scale (%d f32) and one wait, "
         "median of %d\n", NL, NE, R);
  printf("  xpjit                                %8.2f us/launch\n", xu);
  if (bu > 0)
    printf("  bare OpenCL (same SPIR-V; peer)      %8.2f us/launch\n"
           "  xpjit / bare: %.2fx\n", bu, xu / bu);
  else
    printf("  bare OpenCL: unavailable\n");
  free(src);
  clear_db();
  rmdir(dir);
  return bad ? 1 : 0;
}
