// matmul.cl -- the kernels of examples/matmul.xpk in OpenCL C 2.0 (peer of bench/compile).
#include "xpk_peer.clh"

#define TILE ((i64)16)

// One work-item per element of C.
#if defined(ALL) || defined(K_matmul_naive)
__kernel void matmul_naive(PV2(const T, a), PV2(const T, b), PV2(T, c), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 row = GLOBAL_ID(0);
  i64 col = GLOBAL_ID(1);
  if (row >= c_s0 || col >= c_s1) {
    return;
  }
  T acc = (T)0;
  for (i64 k = 0; k < a_s1; k++) {
    acc += A2(a, row, k) * A2(b, k, col);
  }
  A2(c, row, col) = acc;
}
#endif

// Tiled version through local memory.
#if defined(ALL) || defined(K_matmul_tiled)
__kernel void matmul_tiled(PV2(const T, a), PV2(const T, b), PV2(T, c)) {
  __local T ta[TILE][TILE];
  __local T tb[TILE][TILE];

  i64 ty = LOCAL_ID(0);
  i64 tx = LOCAL_ID(1);
  i64 row = GLOBAL_ID(0);
  i64 col = GLOBAL_ID(1);
  i64 m = c_s0;
  i64 n = c_s1;
  i64 kdim = a_s1;

  T acc = (T)0;
  i64 ntiles = (kdim + TILE - 1) / TILE;
  for (i64 t = 0; t < ntiles; t++) {
    i64 ka = t * TILE + tx;
    i64 kb = t * TILE + ty;
    ta[ty][tx] = row < m && ka < kdim ? A2(a, row, ka) : (T)0;
    tb[ty][tx] = kb < kdim && col < n ? A2(b, kb, col) : (T)0;
    BARRIER_LOCAL();

    for (i64 k = 0; k < TILE; k++) {
      acc += ta[ty][k] * tb[k][tx];
    }
    BARRIER_LOCAL();
  }

  if (row < m && col < n) {
    A2(c, row, col) = acc;
  }
}
#endif

// C = alpha * A * B + beta * C for a batch of matrices.
#if defined(ALL) || defined(K_gemm_batched)
__kernel void gemm_batched(T alpha, PV3(const T, a), PV3(const T, b), T beta, PV3(T, c),
                           RANGE_PARAMS) {
  RANGE_GUARD;
  i64 p = GLOBAL_ID(0);
  i64 row = GLOBAL_ID(1);
  i64 col = GLOBAL_ID(2);
  if (p >= c_s0 || row >= c_s1 || col >= c_s2) {
    return;
  }
  T acc = (T)0;
  i64 kdim = a_s2;
  for (i64 k = 0; k < kdim; k++) {
    acc += A3(a, p, row, k) * A3(b, p, k, col);
  }
  A3(c, p, row, col) = alpha * acc + beta * A3(c, p, row, col);
}
#endif

// y = A * x, one work-item per row.
#if defined(ALL) || defined(K_gemv)
__kernel void gemv(PV2(const T, a), PV1(const T, x), PV1(T, y), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 row = GLOBAL_ID(0);
  if (row >= a_s0) {
    return;
  }
  T acc = (T)0;
  i64 k = 0;
  i64 kdim = a_s1;
  for (; k + 4 <= kdim; k += 4) {
    acc += A2(a, row, k) * A1(x, k) + A2(a, row, k + 1) * A1(x, k + 1) +
           A2(a, row, k + 2) * A1(x, k + 2) + A2(a, row, k + 3) * A1(x, k + 3);
  }
  for (; k < kdim;) {
    acc += A2(a, row, k) * A1(x, k);
    k++;
  }
  A1(y, row) = acc;
}
#endif
