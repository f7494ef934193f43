// reduce.cu -- the kernels of examples/reduce.xpk in CUDA C (peer of bench/compile).
#include "xpk_peer.cuh"

#define BLOCK ((i64)256)

// total[0] += sum(x).
template <typename T>
__global__ void block_sum(PV1(const T, x), PV1(T, total)) {
  __shared__ T tile[BLOCK];

  i64 lid = LOCAL_ID(0);
  i64 n = x_s0;

  T acc = (T)0;
  for (i64 i = GLOBAL_ID(0); i < n; i += GLOBAL_SIZE(0)) {
    acc += A1(x, i);
  }
  tile[lid] = acc;
  BARRIER_LOCAL();

  for (i64 s = LOCAL_SIZE(0) / 2; s > 0; s >>= 1) {
    if (lid < s) {
      tile[lid] += tile[lid + s];
    }
    BARRIER_LOCAL();
  }

  if (lid == 0) {
    ATOMIC_ADD(G, T, A1(total, 0), tile[0], RELAXED, DEVICE);
  }
}

// Two-pass variant: one partial sum per work-group, no atomics.
template <typename T>
__global__ void block_partials(PV1(const T, x), PV1(T, partial)) {
  __shared__ T tile[BLOCK];

  i64 lid = LOCAL_ID(0);
  i64 n = x_s0;
  T acc = (T)0;
  for (i64 i = GLOBAL_ID(0); i < n; i += GLOBAL_SIZE(0)) {
    acc += A1(x, i);
  }
  tile[lid] = acc;
  BARRIER_ALL();

  i64 s = LOCAL_SIZE(0) / 2;
  while (s > 0) {
    if (lid < s) {
      tile[lid] += tile[lid + s];
    }
    BARRIER_ALL();
    s /= 2;
  }

  if (lid == 0 && GROUP_ID(0) < partial_s0) {
    A1(partial, GROUP_ID(0)) = tile[0];
  }
}

// Dot product with fused multiply-add.
template <typename T>
__global__ void dot(PV1(const T, x), PV1(const T, y), PV1(T, result)) {
  __shared__ T tile[BLOCK];

  i64 lid = LOCAL_ID(0);
  i64 n = xk_min(x_s0, y_s0);
  T acc = (T)0;
  for (i64 i = GLOBAL_ID(0); i < n; i += GLOBAL_SIZE(0)) {
    acc = fma(A1(x, i), A1(y, i), acc);
  }
  tile[lid] = acc;
  BARRIER_LOCAL();

  for (i64 s = LOCAL_SIZE(0) >> 1; s > 0; s >>= 1) {
    if (lid < s) {
      tile[lid] += tile[lid + s];
    }
    BARRIER_LOCAL();
  }

  if (lid == 0) {
    ATOMIC_ADD(G, T, A1(result, 0), tile[0], RELAXED, DEVICE);
  }
}

// Maximum over the whole input, per group, written to partial[group].
template <typename T>
__global__ void block_max(PV1(const T, x), PV1(T, partial)) {
  __shared__ T tile[BLOCK];

  i64 lid = LOCAL_ID(0);
  i64 n = x_s0;
  if (n == 0) {
    return;
  }
  T best = A1(x, 0);
  for (i64 i = GLOBAL_ID(0); i < n; i += GLOBAL_SIZE(0)) {
    best = xk_max(best, A1(x, i));
  }
  tile[lid] = best;
  BARRIER_LOCAL();

  for (i64 s = LOCAL_SIZE(0) / 2; s > 0; s /= 2) {
    if (lid < s) {
      tile[lid] = xk_max(tile[lid], tile[lid + s]);
    }
    BARRIER_LOCAL();
  }
  if (lid == 0) {
    A1(partial, GROUP_LINEAR_ID()) = tile[0];
  }
}

// total[0] += sum(x) through a work-group reduction: warp shuffles, one
// shared slot per warp, a second shuffle over the slots (what xpjit emits
// for group_reduce_add).
template <typename T>
__global__ void group_sum(PV1(const T, x), PV1(T, total)) {
  __shared__ T warp_sums[32];

  T acc = (T)0;
  for (i64 i = GLOBAL_ID(0); i < x_s0; i += GLOBAL_SIZE(0)) {
    acc += A1(x, i);
  }
  i64 lid = LOCAL_LINEAR_ID();
  unsigned lane = (unsigned)lid & 31u;
  unsigned warp = (unsigned)(lid >> 5);
  unsigned warps = (unsigned)((LOCAL_SIZE(0) * LOCAL_SIZE(1) * LOCAL_SIZE(2) + 31) >> 5);
  for (int d = 16; d > 0; d >>= 1) {
    acc += __shfl_down_sync(0xffffffffu, acc, d);
  }
  if (lane == 0) {
    warp_sums[warp] = acc;
  }
  BARRIER_LOCAL();
  if (warp == 0) {
    T s = lane < warps ? warp_sums[lane] : (T)0;
    for (int d = 16; d > 0; d >>= 1) {
      s += __shfl_down_sync(0xffffffffu, s, d);
    }
    if (lid == 0) {
      ATOMIC_ADD(G, T, A1(total, 0), s, RELAXED, DEVICE);
    }
  }
}
