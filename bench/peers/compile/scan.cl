// scan.cl -- the kernels of examples/scan.xpk in OpenCL C 2.0 (peer of bench/compile).
#include "xpk_peer.clh"

#define SCAN_N ((i64)512)
#define HS_N ((i64)256)

// Work-efficient (Blelloch) exclusive scan of one block in local memory.
#if defined(ALL) || defined(K_scan_block)
__kernel void scan_block(PV1(const T, x), PV1(T, y), PV1(T, block_sums)) {
  __local T temp[SCAN_N];

  i64 n = x_s0;
  i64 lid = LOCAL_ID(0);
  i64 base = GROUP_ID(0) * SCAN_N;
  i64 ai = 2 * lid;
  i64 bi = ai + 1;

  temp[ai] = base + ai < n ? A1(x, base + ai) : (T)0;
  temp[bi] = base + bi < n ? A1(x, base + bi) : (T)0;

  i64 offset = 1;
  for (i64 d = SCAN_N >> 1; d > 0; d >>= 1) {
    BARRIER_LOCAL();
    if (lid < d) {
      i64 a = offset * (2 * lid + 1) - 1;
      i64 b = offset * (2 * lid + 2) - 1;
      temp[b] += temp[a];
    }
    offset <<= 1;
  }

  if (lid == 0) {
    A1(block_sums, GROUP_ID(0)) = temp[SCAN_N - 1];
    temp[SCAN_N - 1] = (T)0;
  }

  for (i64 d = 1; d < SCAN_N; d <<= 1) {
    offset >>= 1;
    BARRIER_LOCAL();
    if (lid < d) {
      i64 a = offset * (2 * lid + 1) - 1;
      i64 b = offset * (2 * lid + 2) - 1;
      T t = temp[a];
      temp[a] = temp[b];
      temp[b] += t;
    }
  }
  BARRIER_LOCAL();

  if (base + ai < n) {
    A1(y, base + ai) = temp[ai];
  }
  if (base + bi < n) {
    A1(y, base + bi) = temp[bi];
  }
}
#endif

// y[i] += offsets[i / SCAN_N].
#if defined(ALL) || defined(K_add_block_offsets)
__kernel void add_block_offsets(PV1(T, y), PV1(const T, offsets), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < y_s0) {
    A1(y, i) += A1(offsets, i / SCAN_N);
  }
}
#endif

// Inclusive (Hillis-Steele) scan, double-buffered through a 2-D local array.
#if defined(ALL) || defined(K_scan_inclusive_block)
__kernel void scan_inclusive_block(PV1(const T, x), PV1(T, y)) {
  __local T buf[2][HS_N];

  i64 lid = LOCAL_ID(0);
  i64 gid = GLOBAL_ID(0);
  i64 n = x_s0;

  i64 src = 0;
  buf[src][lid] = gid < n ? A1(x, gid) : (T)0;
  BARRIER_LOCAL();

  i64 offset = 1;
  while (offset < LOCAL_SIZE(0)) {
    i64 dst = 1 - src;
    if (lid >= offset) {
      buf[dst][lid] = buf[src][lid] + buf[src][lid - offset];
    } else {
      buf[dst][lid] = buf[src][lid];
    }
    BARRIER_LOCAL();
    src = dst;
    offset *= 2;
  }

  if (gid < n) {
    A1(y, gid) = buf[src][lid];
  }
}
#endif

// Stream compaction: keep the elements for which keep[i] is true.
#if defined(ALL) || defined(K_scatter_if)
__kernel void scatter_if(PV1(const T, x), PV1(const bool, keep),
                         PV1(const i32, positions), PV1(T, out), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < x_s0 && A1(keep, i)) {
    A1(out, A1(positions, i)) = A1(x, i);
  }
}
#endif

// keep[i] = x[i] > threshold, as bool and as 0/1 i32 flags.
#if defined(ALL) || defined(K_flag_greater)
__kernel void flag_greater(PV1(const T, x), T threshold, PV1(bool, keep),
                           PV1(i32, flags), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < x_s0) {
    bool k = A1(x, i) > threshold;
    A1(keep, i) = k;
    A1(flags, i) = k ? 1 : 0;
  }
}
#endif
