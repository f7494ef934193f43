// matmul.cu -- examples/matmul.xpk's matmul_tiled in CUDA C: the tiled
// gemm peer of bench/gpu (xpjit's parameters and dimension order).
#include "gpu_peer.cuh"

#define TILE ((i64)16)

template <typename T>
__global__ void matmul_tiled(PV2(const T, a), PV2(const T, b), PV2(T, c)) {
  __shared__ T ta[TILE][TILE];
  __shared__ T tb[TILE][TILE];
  i64 ty = L2(0);
  i64 tx = L2(1);
  i64 row = G2(0);
  i64 col = G2(1);
  i64 m = c_s0, n = c_s1, kdim = a_s1;
  T acc = (T)0;
  i64 ntiles = (kdim + TILE - 1) / TILE;
  for (i64 t = 0; t < ntiles; t++) {
    i64 ka = t * TILE + tx;
    i64 kb = t * TILE + ty;
    ta[ty][tx] = row < m && ka < kdim ? A2(a, row, ka) : (T)0;
    tb[ty][tx] = kb < kdim && col < n ? A2(b, kb, col) : (T)0;
    BARRIER_LOCAL();
    for (i64 k = 0; k < TILE; k++)
      acc += ta[ty][k] * tb[k][tx];
    BARRIER_LOCAL();
  }
  if (row < m && col < n)
    A2(c, row, col) = acc;
}
