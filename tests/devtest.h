/* devtest.h - the fixture of the tests that run kernels on one device:
 * a context, the device XPJIT_TEST_DEVICE names (default: the CPU
 * device; tests/run_tests.sh runs such tests again on the OpenCL device),
 * a queue and a program from source; kernels by name; shared allocations.
 * Include after testutil.h; one fixture per test program. */
#ifndef XPJ_DEVTEST_H
#define XPJ_DEVTEST_H

#include "xpjit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static xpj_context *ctx;
static xpj_device *dev;
static xpj_queue *q;
static xpj_program *prog;

/* 0, or -1 with a message naming test (cmocka group setups) */
static inline int devtest_setup(const char *test, const char *file,
                                const char *src) {
  if (xpj_context_create(NULL, &ctx) != XPJ_OK)
    return -1;
  const char *want = getenv("XPJIT_TEST_DEVICE");
  if (!want || !*want)
    want = "cpu";
  if (xpj_device_select(ctx, want, &dev) != XPJ_OK) {
    fprintf(stderr, "%s: no device %s: %s\n", test, want, xpj_last_error());
    return -1;
  }
  if (xpj_queue_create(dev, NULL, &q) != XPJ_OK ||
      xpj_program_create(ctx, file, src, strlen(src), NULL, &prog) != XPJ_OK) {
    fprintf(stderr, "%s: %s\n", test, xpj_last_error());
    return -1;
  }
  return 0;
}

static inline int devtest_teardown(void **state) {
  (void)state;
  xpj_queue_destroy(q);
  xpj_program_destroy(prog);
  xpj_context_destroy(ctx);
  return 0;
}

/* kernel name of the program (no type parameters), or the test fails */
static inline xpj_kernel *kern(const char *name) {
  xpj_kernel *k = NULL;
  if (xpj_program_get_kernel(prog, name, NULL, 0, dev, NULL, &k) != XPJ_OK)
    fail_msg("%s: %s", name, xpj_last_error());
  return k;
}

/* bytes of shared memory of the device, every byte set to fill */
static inline void *dev_alloc(size_t bytes, int fill) {
  void *p = NULL;
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, bytes, 0, &p), XPJ_OK);
  memset(p, fill, bytes);
  return p;
}

#endif
