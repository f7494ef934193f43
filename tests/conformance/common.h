/* common.h - shared by the conformance suite's programs
 * (tests/test_conformance_*.c): the device under test, deterministic random
 * inputs, allocation and kernel helpers. Everything goes through the public
 * API (xpjit.h), so the suite runs unchanged on every device: set
 * XPJIT_TEST_DEVICE to a device filter (default: the default device). */
#ifndef XPJ_CONFORMANCE_COMMON_H
#define XPJ_CONFORMANCE_COMMON_H

#include "testutil.h"
#include "xpjit.h"

#include <math.h>
#include <stdio.h>

typedef struct conf {
  xpj_context *ctx;
  xpj_device *dev;
  xpj_device_info info;
  xpj_queue *q;
  xpj_program *progs[32];
  const char *names[32];
  unsigned nprogs;
} conf;

static conf C;

static int conf_setup(void **state) {
  (void)state;
  if (xpj_context_create(NULL, &C.ctx) != XPJ_OK ||
      xpj_device_select(C.ctx, getenv("XPJIT_TEST_DEVICE"), &C.dev) != XPJ_OK ||
      xpj_device_get_info(C.dev, &C.info) != XPJ_OK ||
      xpj_queue_create(C.dev, NULL, &C.q) != XPJ_OK) {
    fprintf(stderr, "conformance: no device: %s\n", xpj_last_error());
    return -1;
  }
  fprintf(stderr, "conformance: device %s: %s (%s)\n", xpj_device_id(C.dev),
          C.info.name, C.info.target);
  return 0;
}

static int conf_teardown(void **state) {
  (void)state;
  for (unsigned i = 0; i < C.nprogs; i++)
    xpj_program_destroy(C.progs[i]);
  xpj_queue_destroy(C.q);
  xpj_context_destroy(C.ctx);
  return 0;
}

/* The program tests/conformance/FILE (parsed once per process). */
static xpj_program *conf_program(const char *file) {
  for (unsigned i = 0; i < C.nprogs; i++)
    if (!strcmp(C.names[i], file))
      return C.progs[i];
  char path[256];
  snprintf(path, sizeof path, "tests/conformance/%s", file);
  xpj_program *p = NULL;
  if (xpj_program_create_file(C.ctx, path, NULL, &p) != XPJ_OK)
    fail_msg("%s: %s", path, xpj_last_error());
  assert_true(C.nprogs < 32);
  C.names[C.nprogs] = file;
  C.progs[C.nprogs++] = p;
  return p;
}

/* kernel of FILE for dtypes/ndim on the device under test; fails the test
 * with the compiler's message otherwise. */
static xpj_kernel *conf_kernel(const char *file, const char *name,
                               const char *dtypes, unsigned ndim) {
  xpj_kernel *k = NULL;
  if (xpj_program_get_kernel(conf_program(file), name, dtypes, ndim, C.dev,
                             NULL, &k) != XPJ_OK)
    fail_msg("%s %s [%s] ndim %u: %s", file, name, dtypes ? dtypes : "", ndim,
             xpj_last_error());
  return k;
}

/* The integer of `bytes` bytes at p, sign- or zero-extended (little-endian
 * hosts). */
static inline int64_t conf_load_int(const void *p, unsigned bytes,
                                    int is_signed) {
  uint64_t u = 0;
  memcpy(&u, p, bytes);
  if (bytes < 8 && is_signed && (u >> (bytes * 8 - 1)) & 1)
    u |= ~UINT64_C(0) << (bytes * 8);
  return (int64_t)u;
}

/* Shared memory of bytes (never 0), freed with conf_free. */
static void *conf_alloc(size_t bytes) {
  void *p = NULL;
  if (xpj_mem_alloc(C.dev, XPJ_MEM_SHARED, bytes ? bytes : 1, 0, &p) != XPJ_OK)
    fail_msg("alloc %zu: %s", bytes, xpj_last_error());
  return p;
}

static void conf_free(void *p) { assert_int_equal(xpj_mem_free(C.dev, p), XPJ_OK); }

/* Launches and waits; fails the test with the runtime's message. */
static void conf_run(xpj_kernel *k, xpj_range r, unsigned nargs,
                     const xpj_arg *args) {
  if (xpj_launch(C.q, k, &r, nargs, args, NULL) != XPJ_OK)
    fail_msg("launch %s: %s", xpj_kernel_signature(k), xpj_last_error());
  if (xpj_queue_wait(C.q) != XPJ_OK)
    fail_msg("wait %s: %s", xpj_kernel_signature(k), xpj_last_error());
}

/* ---- deterministic random inputs (splitmix64) ------------------------- */

static uint64_t conf_seed = 0x9e3779b97f4a7c15ull;

static uint64_t rnd64(void) {
  uint64_t z = (conf_seed += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* uniform in [lo, hi), never exactly 0 */
static double rnd_real(double lo, double hi) {
  for (;;) {
    double v = lo + (hi - lo) * (double)(rnd64() >> 11) * 0x1.0p-53;
    if (v != 0)
      return v;
  }
}

/* fills n elements of dtype at p with non-zero values in [lo, hi) */
static void rnd_fill(void *p, xpj_scalar t, size_t n, double lo, double hi) {
  for (size_t i = 0; i < n; i++) {
    double v = rnd_real(lo, hi);
    switch (t) {
    case XPJ_F32: ((float *)p)[i] = (float)v != 0 ? (float)v : 1.0f; break;
    case XPJ_F64: ((double *)p)[i] = v; break;
    case XPJ_I32: ((int32_t *)p)[i] = (int32_t)v ? (int32_t)v : 1; break;
    case XPJ_I64: ((int64_t *)p)[i] = (int64_t)v ? (int64_t)v : 1; break;
    case XPJ_U32: ((uint32_t *)p)[i] = (uint32_t)v ? (uint32_t)v : 1; break;
    case XPJ_U64: ((uint64_t *)p)[i] = (uint64_t)v ? (uint64_t)v : 1; break;
    case XPJ_U8: ((uint8_t *)p)[i] = (uint8_t)v ? (uint8_t)v : 1; break;
    default: fail_msg("rnd_fill: dtype %s", xpj_scalar_name(t));
    }
  }
}

/* Sizes used across the suite: small, odd and not multiples of any
 * work-group size, and larger. */
static const uint64_t conf_sizes[] = {1, 7, 255, 1000, 4099, 65537};
#define CONF_NSIZES (sizeof conf_sizes / sizeof *conf_sizes)

/* Units in the last place between a and b (as doubles of type t). */
static double ulps_f32(float got, double want) {
  if (isnan(got) && isnan(want))
    return 0;
  if (isinf(want) || isinf(got))
    return (double)got == want ? 0 : INFINITY;
  float w = (float)want;
  double ulp = nextafterf(fabsf(w), INFINITY) - fabsf(w);
  if (ulp == 0 || !isfinite(ulp))
    ulp = 0x1p-149;
  return fabs((double)got - want) / ulp;
}

static double ulps_f64(double got, long double want) {
  if (isnan(got) && isnan((double)want))
    return 0;
  if (isinf((double)want) || isinf(got))
    return got == (double)want ? 0 : INFINITY;
  double w = (double)want;
  double ulp = nextafter(fabs(w), INFINITY) - fabs(w);
  if (ulp == 0 || !isfinite(ulp))
    ulp = 0x1p-1074;
  return (double)fabsl((long double)got - want) / ulp;
}

#endif
