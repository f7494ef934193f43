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
 * rounds; ratios portable/native. */
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
  const char *sfx[] = {"", "-wal", "-shm", ".lock"};
  char f[300];
  for (int i = 0; i < 4; i++) {
    snprintf(f, sizeof f, "%s%s", dbpath, sfx[i]);
    unlink(f);
  }
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
  snprintf(dbpath, sizeof dbpath, "/tmp/xpjit-bench-opencl-%d.db",
           (int)getpid());
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
  free(src);
  return bad ? 1 : 0;
}
