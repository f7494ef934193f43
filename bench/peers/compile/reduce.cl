// reduce.cl -- the kernels of examples/reduce.xpk in OpenCL C 2.0 (peer of bench/compile).
#include "xpk_peer.clh"

#define BLOCK ((i64)256)

// total[0] += sum(x).
#if defined(ALL) || defined(K_block_sum)
__kernel void block_sum(PV1(const T, x), PV1(T, total)) {
  __local T tile[BLOCK];

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
#endif

// Two-pass variant: one partial sum per work-group, no atomics.
#if defined(ALL) || defined(K_block_partials)
__kernel void block_partials(PV1(const T, x), PV1(T, partial)) {
  __local T tile[BLOCK];

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
#endif

// Dot product with fused multiply-add.
#if defined(ALL) || defined(K_dot)
__kernel void dot(PV1(const T, x), PV1(const T, y), PV1(T, result)) {
  __local T tile[BLOCK];

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
#endif

// Maximum over the whole input, per group, written to partial[group].
#if defined(ALL) || defined(K_block_max)
__kernel void block_max(PV1(const T, x), PV1(T, partial)) {
  __local T tile[BLOCK];

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
#endif

// total[0] += sum(x) through OpenCL C 2.0's work-group reduction.
#if defined(ALL) || defined(K_group_sum)
__kernel void group_sum(PV1(const T, x), PV1(T, total)) {
  T acc = (T)0;
  for (i64 i = GLOBAL_ID(0); i < x_s0; i += GLOBAL_SIZE(0)) {
    acc += A1(x, i);
  }
  T s = work_group_reduce_add(acc);
  if (LOCAL_LINEAR_ID() == 0) {
    ATOMIC_ADD(G, T, A1(total, 0), s, RELAXED, DEVICE);
  }
}
#endif
