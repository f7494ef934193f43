// math.cl -- the kernels of examples/math.xpk in OpenCL C 2.0 (peer of bench/compile).
#include "xpk_peer.clh"

#define PI 3.141592653589793
#define SQRT_2_OVER_PI 0.7978845608028654
#define EPS 1e-12
#define FAST_GELU true

#if defined(ALL) || defined(K_activations)
XK_DEV T cube(T x) {
  return x * x * x;
}
#endif

#if defined(ALL) || defined(K_math_table)
XK_DEV T square(T x) {
  return x * x;
}
#endif

#if defined(ALL) || defined(K_activations)
XK_DEV T sigmoid(T x) {
  return (T)1 / ((T)1 + exp(-x));
}
#endif

// log(1 + e^x) without overflow for large |x|.
#if defined(ALL) || defined(K_activations)
XK_DEV T softplus(T x) {
  if (x > (T)20) {
    return x;
  } else if (x < (T)-20) {
    return exp(x);
  } else {
    return log1p(exp(x));
  }
}
#endif

#if defined(ALL) || defined(K_activations)
XK_DEV T gelu(T x) {
  if (FAST_GELU) {
    const T k = (T)SQRT_2_OVER_PI;
    return (T)0.5 * x * ((T)1 + tanh(k * (x + (T)0.044715 * cube(x))));
  }
  return x * sigmoid((T)1.702 * x);
}
#endif

#if defined(ALL) || defined(K_to_polar) || defined(K_from_polar)
XK_DEV void store_pair(PV2(T, out), i64 row, T a, T b) {
  A2(out, row, 0) = a;
  A2(out, row, 1) = b;
}
#endif

// Activation functions over arrays of any rank.
#if defined(ALL) || defined(K_activations)
__kernel void activations(PVN(const T, x), PVN(T, sig), PVN(T, sp), PVN(T, ge),
                          RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= SIZEN(x)) {
    return;
  }
  T v = AN(x, i);
  AN(sig, i) = sigmoid(v);
  AN(sp, i) = softplus(v);
  AN(ge, i) = gelu(v);
}
#endif

// Clip to [lo, hi] and take the absolute value.
#if defined(ALL) || defined(K_clip_abs)
__kernel void clip_abs(PVN(T, x), T lo, T hi, RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < SIZEN(x)) {
    AN(x, i) = xk_abs(xk_clamp(AN(x, i), lo, hi));
  }
}
#endif

// Cartesian (x, y) rows to polar (r, theta) rows.
#if defined(ALL) || defined(K_to_polar)
__kernel void to_polar(PV2(const T, xy), PV2(T, polar), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < xy_s0) {
    T x = A2(xy, i, 0);
    T y = A2(xy, i, 1);
    store_pair(VA2(polar), i, hypot(x, y), atan2(y, x));
  }
}
#endif

// Polar back to Cartesian, and angles in degrees.
#if defined(ALL) || defined(K_from_polar)
__kernel void from_polar(PV2(const T, polar), PV2(T, xy), PV1(T, degrees),
                         RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < polar_s0) {
    T r = A2(polar, i, 0);
    T theta = A2(polar, i, 1);
    store_pair(VA2(xy), i, r * cos(theta), r * sin(theta));
    A1(degrees, i) = theta * (T)(180.0 / PI);
  }
}
#endif

// Normalise each row of a matrix to unit length.
#if defined(ALL) || defined(K_normalize_rows)
__kernel void normalize_rows(PV2(T, m), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 r = GLOBAL_ID(0);
  if (r >= m_s0) {
    return;
  }
  T ss = (T)0;
  i64 cols = m_s1;
  for (i64 c = 0; c < cols; c++) {
    ss = fma(A2(m, r, c), A2(m, r, c), ss);
  }
  if (ss > (T)EPS) {
    T inv = rsqrt(ss);
    for (i64 c = 0; c < cols; c++) {
      A2(m, r, c) *= inv;
    }
  }
}
#endif

// Numerically stable log-sum-exp of each row.
#if defined(ALL) || defined(K_logsumexp_rows)
__kernel void logsumexp_rows(PV2(const T, m), PV1(T, out), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 r = GLOBAL_ID(0);
  if (r >= m_s0) {
    return;
  }
  i64 cols = m_s1;
  T hi = A2(m, r, 0);
  for (i64 c = 1; c < cols; c++) {
    hi = fmax(hi, A2(m, r, c));
  }
  if (isinf(hi)) {
    A1(out, r) = hi;
    return;
  }
  T s = (T)0;
  for (i64 c = 0; c < cols; c++) {
    s += exp(A2(m, r, c) - hi);
  }
  A1(out, r) = hi + log(s);
}
#endif

// Replace NaN by `nan_value` and +-inf by +-`big`.
#if defined(ALL) || defined(K_sanitize)
__kernel void sanitize(PVN(T, x), T nan_value, T big, RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= SIZEN(x)) {
    return;
  }
  T v = AN(x, i);
  if (isnan(v)) {
    AN(x, i) = nan_value;
  } else if (!isfinite(v)) {
    AN(x, i) = copysign(big, v);
  }
}
#endif

// floor, ceil, round, trunc side by side.
#if defined(ALL) || defined(K_roundings)
__kernel void roundings(PV1(const T, x), PV2(T, out), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < x_s0) {
    T v = A1(x, i);
    A2(out, i, 0) = floor(v);
    A2(out, i, 1) = ceil(v);
    A2(out, i, 2) = round(v);
    A2(out, i, 3) = trunc(v);
  }
}
#endif

// A tour of the remaining unary and binary functions.
#if defined(ALL) || defined(K_math_table)
__kernel void math_table(PV1(const T, x), PV2(T, out), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= x_s0) {
    return;
  }
  T v = A1(x, i);
  T a = fabs(v);
  T u = fmin(fmax(v, (T)-1), (T)1);
  A2(out, i, 0) = sqrt(a);
  A2(out, i, 1) = cbrt(v);
  A2(out, i, 2) = exp2(v);
  A2(out, i, 3) = expm1(v);
  A2(out, i, 4) = log2(a);
  A2(out, i, 5) = log10(a);
  A2(out, i, 6) = pow(a, (T)1.5);
  A2(out, i, 7) = tan(v);
  A2(out, i, 8) = asin(u);
  A2(out, i, 9) = acos(u);
  A2(out, i, 10) = atan(v);
  A2(out, i, 11) = sinh(v);
  A2(out, i, 12) = cosh(v);
  A2(out, i, 13) = square(v);
}
#endif

// Batch normalisation (inference) of an NCHW tensor.
#if defined(ALL) || defined(K_batchnorm_nchw)
__kernel void batchnorm_nchw(PV4(T, x), PV1(const T, mean), PV1(const T, var),
                             PV1(const T, gamma), PV1(const T, beta), T eps,
                             RANGE_PARAMS) {
  RANGE_GUARD;
  i64 nc = GLOBAL_ID(0);
  i64 h = GLOBAL_ID(1);
  i64 w = GLOBAL_ID(2);
  i64 channels = x_s1;
  i64 n = nc / channels;
  i64 c = nc % channels;
  if (n >= x_s0 || h >= x_s2 || w >= x_s3) {
    return;
  }
  T scale = A1(gamma, c) * rsqrt(A1(var, c) + eps);
  A4(x, n, c, h, w) = (A4(x, n, c, h, w) - A1(mean, c)) * scale + A1(beta, c);
}
#endif
