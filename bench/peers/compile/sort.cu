// sort.cu -- the kernels of examples/sort.xpk in CUDA C (peer of bench/compile).
#include "xpk_peer.cuh"

#define SORT_BLOCK ((i64)512)

// One global compare-exchange stage (k, j).
template <typename T>
__global__ void bitonic_stage(PV1(T, x), i64 k, i64 j, RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= x_s0) {
    return;
  }
  i64 l = i ^ j;
  if (l > i) {
    bool ascending = (i & k) == 0;
    T a = A1(x, i);
    T b = A1(x, l);
    if ((ascending && a > b) || (!ascending && a < b)) {
      A1(x, i) = b;
      A1(x, l) = a;
    }
  }
}

// Same stage with one work-item per pair.
template <typename T>
__global__ void bitonic_stage_pairs(PV1(T, x), i64 k, i64 j, RANGE_PARAMS) {
  RANGE_GUARD;
  i64 p = GLOBAL_ID(0);
  if (2 * p >= x_s0) {
    return;
  }
  i64 i = 2 * p - (p & (j - 1));
  i64 l = i + j;
  T a = A1(x, i);
  T b = A1(x, l);
  bool swap = (i & k) == 0 ? a > b : a < b;
  if (swap) {
    A1(x, i) = b;
    A1(x, l) = a;
  }
}

// Sorts each block of SORT_BLOCK elements in local memory.
template <typename T>
__global__ void bitonic_sort_block(PV1(T, x)) {
  __shared__ T s[SORT_BLOCK];

  i64 lid = LOCAL_ID(0);
  i64 half_size = LOCAL_SIZE(0);
  i64 base = GROUP_ID(0) * SORT_BLOCK;
  s[lid] = A1(x, base + lid);
  s[lid + half_size] = A1(x, base + lid + half_size);
  BARRIER_LOCAL();

  for (i64 k = 2; k <= SORT_BLOCK; k <<= 1) {
    for (i64 j = k >> 1; j > 0; j >>= 1) {
      i64 i = 2 * lid - (lid & (j - 1));
      i64 l = i + j;
      bool ascending = ((base + i) & k) == 0;
      T a = s[i];
      T b = s[l];
      if ((a > b) == ascending) {
        s[i] = b;
        s[l] = a;
      }
      BARRIER_LOCAL();
    }
  }

  A1(x, base + lid) = s[lid];
  A1(x, base + lid + half_size) = s[lid + half_size];
}

// Is x sorted ascending?
template <typename T>
__global__ void check_sorted(PV1(const T, x), PV1(u32, ok), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i + 1 < x_s0 && A1(x, i) > A1(x, i + 1)) {
    ATOMIC_AND(G, u32, A1(ok, 0), 0u, RELAXED, DEVICE);
  }
}
