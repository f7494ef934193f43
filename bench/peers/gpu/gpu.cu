// gpu.cu -- bench/gpu.xpk's kernels in CUDA C (peers of bench/gpu).
#include "gpu_peer.cuh"

template <typename T = void>
__global__ void empty(RANGE_PARAMS) {}

XK_DEV f32 xk_log(f32 x) { return logf(x); }
XK_DEV f64 xk_log(f64 x) { return log(x); }
XK_DEV f32 xk_erfc(f32 x) { return erfcf(x); }
XK_DEV f64 xk_erfc(f64 x) { return erfc(x); }
XK_DEV f32 xk_expf(f32 x) { return expf(x); }
XK_DEV f64 xk_expf(f64 x) { return exp(x); }

template <typename T>
__global__ void blackscholes(PV1(T, call), PV1(T, put), PV1(const T, s), PV1(const T, x),
                             PV1(const T, t), T r, T v, RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  T st = sqrt(A1(t, i));
  T d1 = (xk_log(A1(s, i) / A1(x, i)) + (r + (T)0.5 * v * v) * A1(t, i)) / (v * st);
  T d2 = d1 - v * st;
  T c1 = (T)0.5 * xk_erfc(-d1 * (T)0.70710678118654752);
  T c2 = (T)0.5 * xk_erfc(-d2 * (T)0.70710678118654752);
  T ert = xk_expf(-r * A1(t, i));
  A1(call, i) = A1(s, i) * c1 - A1(x, i) * ert * c2;
  A1(put, i) = A1(x, i) * ert * ((T)1 - c2) - A1(s, i) * ((T)1 - c1);
}
