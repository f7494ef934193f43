// stencil.cl -- the kernels of examples/stencil.xpk in OpenCL C 2.0 (peer of bench/compile).
#include "xpk_peer.clh"

#define BY ((i64)16)
#define BX ((i64)16)

// One Jacobi sweep for Laplace's equation.
#if defined(ALL) || defined(K_jacobi5)
__kernel void jacobi5(PV2(const T, u), PV2(T, out), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  i64 j = GLOBAL_ID(1);
  i64 ny = u_s0;
  i64 nx = u_s1;
  if (i >= ny || j >= nx) {
    return;
  }
  if (i == 0 || j == 0 || i == ny - 1 || j == nx - 1) {
    A2(out, i, j) = A2(u, i, j);
    return;
  }
  A2(out, i, j) =
      (T)0.25 * (A2(u, i - 1, j) + A2(u, i + 1, j) + A2(u, i, j - 1) + A2(u, i, j + 1));
}
#endif

// Discrete Laplacian with clamped neighbours.
#if defined(ALL) || defined(K_laplacian_clamped)
__kernel void laplacian_clamped(PV2(const T, u), PV2(T, out), T h, RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  i64 j = GLOBAL_ID(1);
  i64 ny = u_s0;
  i64 nx = u_s1;
  if (i >= ny || j >= nx) {
    return;
  }
  i64 im = xk_max(i - 1, (i64)0);
  i64 ip = xk_min(i + 1, ny - 1);
  i64 jm = xk_max(j - 1, (i64)0);
  i64 jp = xk_min(j + 1, nx - 1);
  T sum = A2(u, im, j) + A2(u, ip, j) + A2(u, i, jm) + A2(u, i, jp) - (T)4 * A2(u, i, j);
  A2(out, i, j) = sum / (h * h);
}
#endif

// Periodic boundary: explicit heat-equation step.
#if defined(ALL) || defined(K_heat_periodic)
__kernel void heat_periodic(PV2(const T, u), PV2(T, out), T alpha, RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  i64 j = GLOBAL_ID(1);
  i64 ny = u_s0;
  i64 nx = u_s1;
  if (i >= ny || j >= nx) {
    return;
  }
  i64 up = i == 0 ? ny - 1 : i - 1;
  i64 down = i == ny - 1 ? 0 : i + 1;
  i64 left = (j + nx - 1) % nx;
  i64 right = (j + 1) % nx;
  T c = A2(u, i, j);
  A2(out, i, j) = c + alpha * (A2(u, up, j) + A2(u, down, j) + A2(u, i, left) +
                               A2(u, i, right) - (T)4 * c);
}
#endif

// Jacobi sweep through a local tile with a one-cell halo.
#if defined(ALL) || defined(K_jacobi5_tiled)
__kernel void jacobi5_tiled(PV2(const T, u), PV2(T, out)) {
  __local T tile[BY + 2][BX + 2];

  i64 ny = u_s0;
  i64 nx = u_s1;
  i64 i0 = GROUP_ID(0) * BY - 1;
  i64 j0 = GROUP_ID(1) * BX - 1;

  const i64 cells = (BY + 2) * (BX + 2);
  i64 nthreads = LOCAL_SIZE(0) * LOCAL_SIZE(1);
  for (i64 t = LOCAL_LINEAR_ID(); t < cells; t += nthreads) {
    i64 ti = t / (BX + 2);
    i64 tj = t % (BX + 2);
    i64 gi = xk_clamp(i0 + ti, (i64)0, ny - 1);
    i64 gj = xk_clamp(j0 + tj, (i64)0, nx - 1);
    tile[ti][tj] = A2(u, gi, gj);
  }
  BARRIER_LOCAL();

  i64 i = GLOBAL_ID(0);
  i64 j = GLOBAL_ID(1);
  if (i >= ny || j >= nx) {
    return;
  }
  if (i == 0 || j == 0 || i == ny - 1 || j == nx - 1) {
    A2(out, i, j) = A2(u, i, j);
  } else {
    i64 ci = LOCAL_ID(0) + 1;
    i64 cj = LOCAL_ID(1) + 1;
    A2(out, i, j) = (T)0.25 * (tile[ci - 1][cj] + tile[ci + 1][cj] + tile[ci][cj - 1] +
                               tile[ci][cj + 1]);
  }
}
#endif

// 3-D seven-point Laplacian, interior points only.
#if defined(ALL) || defined(K_laplacian7)
__kernel void laplacian7(PV3(const T, u), PV3(T, out), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 k = GLOBAL_ID(0);
  i64 i = GLOBAL_ID(1);
  i64 j = GLOBAL_ID(2);
  i64 nz = u_s0;
  i64 ny = u_s1;
  i64 nx = u_s2;
  if (k < 1 || i < 1 || j < 1 || k >= nz - 1 || i >= ny - 1 || j >= nx - 1) {
    return;
  }
  A3(out, k, i, j) = A3(u, k - 1, i, j) + A3(u, k + 1, i, j) + A3(u, k, i - 1, j) +
                     A3(u, k, i + 1, j) + A3(u, k, i, j - 1) + A3(u, k, i, j + 1) -
                     (T)6 * A3(u, k, i, j);
}
#endif
