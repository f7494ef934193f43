/* storm20.h - the 20 kernels of the daemon's start-up storm (five
 * elementwise kernels of examples/axpy.xpk x four dtypes), launched on n
 * elements and checked. Shared by tests/test_daemon_storm.c and
 * bench/daemon.c; header-only. */
#ifndef XPJIT_STORM20_H
#define XPJIT_STORM20_H

#include "xpjit.h"

#include <stdint.h>
#include <stdio.h>

enum { K_AXPY, K_AXPBY, K_SCALE, K_COPY, K_FILL, NKN };
static const char *const knames[NKN] = {"axpy", "axpby", "scale", "copy",
                                        "fill"};
static const struct {
  const char *dtypes;
  xpj_scalar t;
} dts[] = {{"T=f32", XPJ_F32}, {"T=f64", XPJ_F64}, {"T=i32", XPJ_I32},
           {"T=i64", XPJ_I64}};
enum { NDT = 4, NKERNELS = NKN * NDT };

static void storm_put(void *p, xpj_scalar t, size_t i, double v) {
  switch (t) {
  case XPJ_F32: ((float *)p)[i] = (float)v; break;
  case XPJ_F64: ((double *)p)[i] = v; break;
  case XPJ_I32: ((int32_t *)p)[i] = (int32_t)v; break;
  default: ((int64_t *)p)[i] = (int64_t)v; break;
  }
}

static double storm_get(const void *p, xpj_scalar t, size_t i) {
  switch (t) {
  case XPJ_F32: return ((const float *)p)[i];
  case XPJ_F64: return ((const double *)p)[i];
  case XPJ_I32: return ((const int32_t *)p)[i];
  default: return (double)((const int64_t *)p)[i];
  }
}

static xpj_arg storm_scalar(xpj_scalar t, double v) {
  switch (t) {
  case XPJ_F32: return xpj_arg_f32((float)v);
  case XPJ_F64: return xpj_arg_f64(v);
  case XPJ_I32: return xpj_arg_i32((int32_t)v);
  default: return xpj_arg_i64((int64_t)v);
  }
}

/* Launches kernel (kind, dtype t) over x and y (n elements each), waits
 * and checks: 0 right, -1 the launch failed, 1 a wrong value (err, when
 * not NULL, says which). */
static int storm_launch_check(xpj_queue *q, xpj_kernel *k, int kind,
                              xpj_scalar t, void *x, void *y, size_t n,
                              char *err, size_t errsize) {
  for (size_t i = 0; i < n; i++) {
    storm_put(x, t, i, (double)(i % 7 + 1));
    storm_put(y, t, i, (double)(i % 5 + 2));
  }
  xpj_array ax = xpj_array_1d(x, t, n), ay = xpj_array_1d(y, t, n);
  xpj_arg a[4];
  unsigned na = 0;
  switch (kind) {
  case K_AXPY:
    a[na++] = storm_scalar(t, 3), a[na++] = xpj_arg_array(&ax);
    a[na++] = xpj_arg_array(&ay);
    break;
  case K_AXPBY:
    a[na++] = storm_scalar(t, 2), a[na++] = xpj_arg_array(&ax);
    a[na++] = storm_scalar(t, 3), a[na++] = xpj_arg_array(&ay);
    break;
  case K_SCALE:
    a[na++] = storm_scalar(t, 4), a[na++] = xpj_arg_array(&ax);
    break;
  case K_COPY:
    a[na++] = xpj_arg_array(&ax), a[na++] = xpj_arg_array(&ay);
    break;
  default:
    a[na++] = xpj_arg_array(&ay), a[na++] = storm_scalar(t, 9);
    break;
  }
  xpj_range r = xpj_range_1d(n, 0);
  xpj_status st = xpj_launch(q, k, &r, na, a, NULL);
  if (st == XPJ_OK)
    st = xpj_queue_wait(q);
  if (st != XPJ_OK) {
    if (err)
      snprintf(err, errsize, "launch of %s: %s", knames[kind],
               xpj_last_error());
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    double xv = (double)(i % 7 + 1), yv = (double)(i % 5 + 2), want, got;
    switch (kind) {
    case K_AXPY: want = 3 * xv + yv, got = storm_get(y, t, i); break;
    case K_AXPBY: want = 2 * xv + 3 * yv, got = storm_get(y, t, i); break;
    case K_SCALE: want = 4 * xv, got = storm_get(x, t, i); break;
    case K_COPY: want = xv, got = storm_get(y, t, i); break;
    default: want = 9, got = storm_get(y, t, i); break;
    }
    if (got != want) {
      if (err)
        snprintf(err, errsize, "%s: element %zu is %g, expected %g",
                 knames[kind], i, got, want);
      return 1;
    }
  }
  return 0;
}

#endif
