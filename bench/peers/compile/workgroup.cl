// workgroup.cl -- the kernels of examples/workgroup.xpk in CUDA C (peer of
// bench/compile).
#include "xpk_peer.clh"

#define CHUNK ((i64)1024)

// Every id of every work-item of a 2-D range launch.
#if defined(ALL) || defined(K_ids_range)
__kernel void ids_range(PV2(i64, ids), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 row = RANGE_LINEAR_ID();
  if (row >= ids_s0) {
    return;
  }
  A2(ids, row, 0) = GLOBAL_ID(0);
  A2(ids, row, 1) = GLOBAL_ID(1);
  A2(ids, row, 2) = RANGE_SIZE(0);
  A2(ids, row, 3) = RANGE_SIZE(1);
}
#endif

// The same for a 2-D nd-range launch, with the work-group ids.
#if defined(ALL) || defined(K_ids_ndrange)
__kernel void ids_ndrange(PV2(i64, ids)) {
  i64 row = GLOBAL_LINEAR_ID();
  if (row >= ids_s0) {
    return;
  }
  A2(ids, row, 0) = GLOBAL_ID(0);
  A2(ids, row, 1) = GLOBAL_ID(1);
  A2(ids, row, 2) = LOCAL_ID(0);
  A2(ids, row, 3) = LOCAL_ID(1);
  A2(ids, row, 4) = GROUP_ID(0);
  A2(ids, row, 5) = GROUP_ID(1);
  A2(ids, row, 6) = LOCAL_SIZE(0) * LOCAL_SIZE(1);
  A2(ids, row, 7) = NUM_GROUPS(0) * NUM_GROUPS(1);
  A2(ids, row, 8) = LOCAL_LINEAR_ID();
  A2(ids, row, 9) = GROUP_LINEAR_ID();
}
#endif

// Cooperative copy of `count` elements by the whole work-group.
#if defined(ALL) || defined(K_reverse_chunks)
XK_DEV void group_copy(PV1(const T, src), PV1(T, dst), i64 src_base, i64 dst_base,
                       i64 count) {
  for (i64 i = LOCAL_ID(0); i < count; i += LOCAL_SIZE(0)) {
    A1(dst, dst_base + i) = A1(src, src_base + i);
  }
  BARRIER_GLOBAL();
}
#endif

#if defined(ALL) || defined(K_reverse_chunks)
XK_DEV void stage_chunk(PV1(const T, src), PV1(T, scratch), i64 chunk) {
  i64 base = chunk * CHUNK;
  i64 count = xk_min(CHUNK, src_s0 - base);
  group_copy(VA1(src), VA1(scratch), base, GROUP_ID(0) * CHUNK, count);
}
#endif

// Stage a chunk in global scratch, then read it back reversed.
#if defined(ALL) || defined(K_reverse_chunks)
__kernel void reverse_chunks(PV1(const T, src), PV1(T, scratch), PV1(T, dst)) {
  i64 g = GROUP_ID(0);
  i64 base = g * CHUNK;
  stage_chunk(VA1(src), VA1(scratch), g);
  i64 count = xk_min(CHUNK, src_s0 - base);
  for (i64 i = LOCAL_ID(0); i < count; i += LOCAL_SIZE(0)) {
    A1(dst, base + i) = A1(scratch, g * CHUNK + (count - 1 - i));
  }
}
#endif

// Mean of each 3-D work-group's block.
#if defined(ALL) || defined(K_block_means)
__kernel void block_means(PV3(const f32, vol), PV3(f32, means)) {
  __local f32 acc[64];

  i64 lid = LOCAL_LINEAR_ID();
  i64 z = GLOBAL_ID(0);
  i64 y = GLOBAL_ID(1);
  i64 x = GLOBAL_ID(2);
  bool inside = z < vol_s0 && y < vol_s1 && x < vol_s2;
  acc[lid] = inside ? A3(vol, z, y, x) : 0.0f;
  BARRIER_ALL();

  i64 nthreads = LOCAL_SIZE(0) * LOCAL_SIZE(1) * LOCAL_SIZE(2);
  for (i64 s = nthreads / 2; s > 0; s /= 2) {
    if (lid < s) {
      acc[lid] += acc[lid + s];
    }
    BARRIER_ALL();
  }
  if (lid == 0) {
    A3(means, GROUP_ID(0), GROUP_ID(1), GROUP_ID(2)) = acc[0] / (f32)nthreads;
  }
}
#endif

// Grid-stride loop; `break` at the first NaN.
#if defined(ALL) || defined(K_first_nan)
__kernel void first_nan(PV1(const f32, x), PV1(i64, index), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 stride = RANGE_SIZE(0);
  i64 i = GLOBAL_ID(0);
  while (i < x_s0) {
    if (isnan(A1(x, i))) {
      ATOMIC_MIN(G, i64, A1(index, 0), i, RELAXED, DEVICE);
      break;
    }
    i += stride;
  }
}
#endif
