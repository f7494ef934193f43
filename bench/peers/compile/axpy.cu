// axpy.cu -- the kernels of examples/axpy.xpk in CUDA C (peer of bench/compile).
#include "xpk_peer.cuh"

// y = a * x + y
template <typename T>
__global__ void axpy(T a, PVN(const T, x), PVN(T, y), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 n = SIZEN(y);
  i64 stride = RANGE_SIZE(0);
  for (i64 i = GLOBAL_ID(0); i < n; i += stride) {
    AN(y, i) = a * AN(x, i) + AN(y, i);
  }
}

// y = a * x + b * y
template <typename T>
__global__ void axpby(T a, PVN(const T, x), T b, PVN(T, y), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < SIZEN(y)) {
    AN(y, i) = a * AN(x, i) + b * AN(y, i);
  }
}

// x *= alpha, in place.
template <typename T>
__global__ void scale(T alpha, PVN(T, x), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < SIZEN(x)) {
    AN(x, i) *= alpha;
  }
}

// dst = src.
template <typename T>
__global__ void copy(PVN(const T, src), PVN(T, dst), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= SIZEN(dst)) {
    return;
  }
  AN(dst, i) = AN(src, i);
}

// Fill every element with `value`.
template <typename T>
__global__ void fill(PVN(T, x), T value, RANGE_PARAMS) {
  RANGE_GUARD;
  i64 stride = RANGE_SIZE(0);
  i64 i = GLOBAL_ID(0);
  while (i < SIZEN(x)) {
    AN(x, i) = value;
    i += stride;
  }
}

// Element type conversion.
template <typename T, typename U>
__global__ void convert(PVN(const T, src), PVN(U, dst), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < SIZEN(dst)) {
    AN(dst, i) = (U)AN(src, i);
  }
}

// out = mask ? a : b, elementwise.
template <typename T>
__global__ void select(PVN(const bool, mask), PVN(const T, a), PVN(const T, b),
                       PVN(T, out), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < SIZEN(out)) {
    AN(out, i) = AN(mask, i) ? AN(a, i) : AN(b, i);
  }
}

// The offset of every element from the start of the view's storage.
template <typename T>
__global__ void element_offsets(PVN(const T, x), PV1(i64, out), RANGE_PARAMS) {
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

// Fixed-rank axpby on a 2-D grid of work-items.
template <typename T>
__global__ void axpby_2d(T a, PV2(const T, x), T b, PV2(T, y), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 r = GLOBAL_ID(0);
  i64 c = GLOBAL_ID(1);
  if (r < y_s0 && c < y_s1) {
    A2(y, r, c) = a * A2(x, r, c) + b * A2(y, r, c);
  }
}

// Elementwise logic on boolean masks.
template <typename = void>
__global__ void combine_masks(PVN(const bool, a), PVN(const bool, b), PVN(bool, both),
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

// Mean of the elements of a view of any rank, accumulated in f64.
template <typename T>
__global__ void mean_f64(PVN(const T, x), PV1(f64, out), RANGE_PARAMS) {
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
