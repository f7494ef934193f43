// transpose.cu -- the kernels of examples/transpose.xpk in CUDA C (peer of
// bench/compile).
#include "xpk_peer.cuh"

#define TDIM ((i64)32)
#define ROWS ((i64)8)

// Direct version.
template <typename T>
__global__ void transpose_naive(PV2(const T, src), PV2(T, dst), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 r = GLOBAL_ID(0);
  i64 c = GLOBAL_ID(1);
  if (r < src_s0 && c < src_s1) {
    A2(dst, c, r) = A2(src, r, c);
  }
}

// Through a padded local tile.
template <typename T>
__global__ void transpose_tiled(PV2(const T, src), PV2(T, dst)) {
  __shared__ T tile[TDIM][TDIM + 1];

  i64 nr = src_s0;
  i64 nc = src_s1;
  i64 ly = LOCAL_ID(0);
  i64 lx = LOCAL_ID(1);
  i64 row0 = GROUP_ID(0) * TDIM;
  i64 col0 = GROUP_ID(1) * TDIM;

  for (i64 j = ly; j < TDIM; j += ROWS) {
    i64 r = row0 + j;
    i64 c = col0 + lx;
    if (r < nr && c < nc) {
      tile[j][lx] = A2(src, r, c);
    }
  }
  BARRIER_LOCAL();

  for (i64 j = ly; j < TDIM; j += ROWS) {
    i64 r = col0 + j;
    i64 c = row0 + lx;
    if (r < nc && c < nr) {
      A2(dst, r, c) = tile[lx][j];
    }
  }
}

// Swap the last two axes of a batch of matrices.
template <typename T>
__global__ void transpose_batched(PV3(const T, src), PV3(T, dst), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 b = GLOBAL_ID(0);
  i64 i = GLOBAL_ID(1);
  i64 j = GLOBAL_ID(2);
  if (b < src_s0 && i < src_s1 && j < src_s2) {
    A3(dst, b, j, i) = A3(src, b, i, j);
  }
}
