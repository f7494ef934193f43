// axpy.cl -- the kernels of examples/axpy.xpk in OpenCL C 2.0 (peer of bench/compile).
#include "xpk_peer.clh"

/* convert's second type parameter (-DU=...); T when not given */
#ifndef U
#define U T
#endif

// y = a * x + y
#if defined(ALL) || defined(K_axpy)
__kernel void axpy(T a, PVN(const T, x), PVN(T, y), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 n = SIZEN(y);
  i64 stride = RANGE_SIZE(0);
  for (i64 i = GLOBAL_ID(0); i < n; i += stride) {
    AN(y, i) = a * AN(x, i) + AN(y, i);
  }
}
#endif

// y = a * x + b * y
#if defined(ALL) || defined(K_axpby)
__kernel void axpby(T a, PVN(const T, x), T b, PVN(T, y), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < SIZEN(y)) {
    AN(y, i) = a * AN(x, i) + b * AN(y, i);
  }
}
#endif

// x *= alpha, in place.
#if defined(ALL) || defined(K_scale)
__kernel void scale(T alpha, PVN(T, x), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < SIZEN(x)) {
    AN(x, i) *= alpha;
  }
}
#endif

// dst = src.
#if defined(ALL) || defined(K_copy)
__kernel void copy(PVN(const T, src), PVN(T, dst), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= SIZEN(dst)) {
    return;
  }
  AN(dst, i) = AN(src, i);
}
#endif

// Fill every element with `value`.
#if defined(ALL) || defined(K_fill)
__kernel void fill(PVN(T, x), T value, RANGE_PARAMS) {
  RANGE_GUARD;
  i64 stride = RANGE_SIZE(0);
  i64 i = GLOBAL_ID(0);
  while (i < SIZEN(x)) {
    AN(x, i) = value;
    i += stride;
  }
}
#endif

// Element type conversion.
#if defined(ALL) || defined(K_convert)
__kernel void convert(PVN(const T, src), PVN(U, dst), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < SIZEN(dst)) {
    AN(dst, i) = (U)AN(src, i);
  }
}
#endif

// out = mask ? a : b, elementwise.
#if defined(ALL) || defined(K_select)
__kernel void select(PVN(const bool, mask), PVN(const T, a), PVN(const T, b),
                     PVN(T, out), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < SIZEN(out)) {
    AN(out, i) = AN(mask, i) ? AN(a, i) : AN(b, i);
  }
}
#endif

// The offset of every element from the start of the view's storage.
#if defined(ALL) || defined(K_element_offsets)
__kernel void element_offsets(PVN(const T, x), PV1(i64, out), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= SIZEN(x)) {
    return;
  }
  i64 rem = i;
  i64 off = 0;
  for (i64 d = NDIM - 1; d >= 0; d--) {
    i64 extent = SHAPEN(x, d);
    off += (rem % extent) * STRIDEN(x, d);
    rem /= extent;
  }
  A1(out, i) = off;
}
#endif

// Fixed-rank axpby on a 2-D grid of work-items.
#if defined(ALL) || defined(K_axpby_2d)
__kernel void axpby_2d(T a, PV2(const T, x), T b, PV2(T, y), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 r = GLOBAL_ID(0);
  i64 c = GLOBAL_ID(1);
  if (r < y_s0 && c < y_s1) {
    A2(y, r, c) = a * A2(x, r, c) + b * A2(y, r, c);
  }
}
#endif

// Elementwise logic on boolean masks.
#if defined(ALL) || defined(K_combine_masks)
__kernel void combine_masks(PVN(const bool, a), PVN(const bool, b), PVN(bool, both),
                            PVN(bool, either), PVN(bool, differ), PVN(bool, neither),
                            RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < SIZEN(a)) {
    bool x = AN(a, i);
    bool y = AN(b, i);
    AN(both, i) = x & y;
    AN(either, i) = x | y;
    AN(differ, i) = x ^ y;
    AN(neither, i) = !(x || y);
  }
}
#endif

// Mean of the elements of a view of any rank, accumulated in f64.
#if defined(ALL) || defined(K_mean_f64)
__kernel void mean_f64(PVN(const T, x), PV1(f64, out), RANGE_PARAMS) {
  RANGE_GUARD;
  if (GLOBAL_ID(0) != 0) {
    return;
  }
  f64 sum = 0.0;
  for (i64 i = 0; i < SIZEN(x); i++) {
    sum += (f64)AN(x, i);
  }
  A1(out, 0) = SIZEN(x) > 0 ? sum / (f64)SIZEN(x) : 0.0;
}
#endif
