// atomics.cl -- the kernels of examples/atomics.xpk in OpenCL C 2.0 (peer of bench/compile).
#include "xpk_peer.clh"

#define WG ((i64)256)

// p[i] *= v atomically; returns the old value.
#if defined(ALL) || defined(K_product)
XK_DEV T fetch_mul(PV1(T, p), i64 i, T v) {
  T old = ATOMIC_LOAD(G, T, A1(p, i), RELAXED, DEVICE);
  T seen = ATOMIC_CMPXCHG(G, T, A1(p, i), old, old * v, ACQ_REL, DEVICE);
  while (seen != old) {
    old = seen;
    seen = ATOMIC_CMPXCHG(G, T, A1(p, i), old, old * v, ACQ_REL, DEVICE);
  }
  return old;
}
#endif

// p[i] = min(p[i] + v, cap) atomically; returns the amount added.
#if defined(ALL) || defined(K_allocate)
XK_DEV u32 add_capped(PV1(u32, p), i64 i, u32 v, u32 cap) {
  u32 old = ATOMIC_LOAD(G, u32, A1(p, i), RELAXED, DEVICE);
  while (true) {
    if (old >= cap) {
      return 0;
    }
    u32 room = cap - old;
    u32 add = xk_min(v, room);
    u32 seen = ATOMIC_CMPXCHG(G, u32, A1(p, i), old, old + add, RELAXED, DEVICE);
    if (seen == old) {
      return add;
    }
    old = seen;
  }
  return 0;
}
#endif

// Float maximum with the exchange loop.
#if defined(ALL) || defined(K_float_max)
XK_DEV void fetch_fmax(PV1(T, p), i64 i, T v) {
  if (ATOMIC_LOAD(G, T, A1(p, i), RELAXED, DEVICE) >= v) {
    return;
  }
  T val = v;
  T old = ATOMIC_XCHG(G, T, A1(p, i), val, ACQ_REL, DEVICE);
  while (old > val) {
    val = old;
    old = ATOMIC_XCHG(G, T, A1(p, i), val, ACQ_REL, DEVICE);
  }
}
#endif

// result[0] = product of x.
#if defined(ALL) || defined(K_product)
__kernel void product(PV1(const T, x), PV1(T, result), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < x_s0) {
    fetch_mul(VA1(result), 0, A1(x, i));
  }
}
#endif

// result[0] = max(x) for floats, with the exchange loop.
#if defined(ALL) || defined(K_float_max)
__kernel void float_max(PVN(const T, x), PV1(T, result), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < SIZEN(x) && !isnan(AN(x, i))) {
    fetch_fmax(VA1(result), 0, AN(x, i));
  }
}
#endif

// Hand out up to `cap` units of a shared budget.
#if defined(ALL) || defined(K_allocate)
__kernel void allocate(PV1(const u32, want), PV1(u32, budget_used), u32 cap,
                       PV1(u32, got), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < want_s0) {
    A1(got, i) = add_capped(VA1(budget_used), 0, A1(want, i), cap);
  }
}
#endif

// Append the positive values to `out` with an atomic slot counter.
#if defined(ALL) || defined(K_append_if_positive)
__kernel void append_if_positive(PV1(const T, x), PV1(T, out), PV1(u32, count),
                                 RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < x_s0 && A1(x, i) > 0) {
    u32 slot = ATOMIC_ADD(G, u32, A1(count, 0), 1u, RELAXED, DEVICE);
    A1(out, slot) = A1(x, i);
  }
}
#endif

// Integer bounding box of a set of 2-D points.
#if defined(ALL) || defined(K_bounding_box)
__kernel void bounding_box(PV2(const i32, points), PV1(i32, bbox), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= points_s0) {
    return;
  }
  i32 x = A2(points, i, 0);
  i32 y = A2(points, i, 1);
  ATOMIC_MIN(G, i32, A1(bbox, 0), x, RELAXED, DEVICE);
  ATOMIC_MIN(G, i32, A1(bbox, 1), y, RELAXED, DEVICE);
  ATOMIC_MAX(G, i32, A1(bbox, 2), x, RELAXED, DEVICE);
  ATOMIC_MAX(G, i32, A1(bbox, 3), y, RELAXED, DEVICE);
}
#endif

// Bit sets: insert values, count down the missing ones, keep a parity word.
#if defined(ALL) || defined(K_bitset_insert)
__kernel void bitset_insert(PV1(const u32, values), PV1(u64, present), PV1(u64, parity),
                            PV1(i64, missing), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= values_s0) {
    return;
  }
  u32 v = A1(values, i);
  i64 word = (i64)(v / 64);
  u64 bit = (u64)1 << (u64)(v % 64);
  if (word >= present_s0) {
    return;
  }
  u64 before = ATOMIC_OR(G, u64, A1(present, word), bit, RELAXED, DEVICE);
  if ((before & bit) == 0) {
    ATOMIC_SUB(G, i64, A1(missing, 0), 1, RELAXED, DEVICE);
  }
  ATOMIC_XOR(G, u64, A1(parity, 0), bit, RELAXED, DEVICE);
}
#endif

// Remove values from the bit set.
#if defined(ALL) || defined(K_bitset_remove)
__kernel void bitset_remove(PV1(const u32, values), PV1(u64, present),
                            PV1(bool, was_present), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= values_s0) {
    return;
  }
  u32 v = A1(values, i);
  i64 word = (i64)(v >> 6);
  u64 bit = (u64)1 << (u64)(v & 63);
  u64 before = ATOMIC_AND(G, u64, A1(present, word), ~bit, SEQ_CST, DEVICE);
  A1(was_present, i) = (before & bit) != 0;
}
#endif

// Floating-point accumulation of positive and negative parts.
#if defined(ALL) || defined(K_split_sum)
__kernel void split_sum(PV1(const T, x), PV1(T, pos), PV1(T, neg), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= x_s0) {
    return;
  }
  T v = A1(x, i);
  if (v >= 0) {
    ATOMIC_ADD(G, T, A1(pos, 0), v, RELAXED, DEVICE);
  } else {
    ATOMIC_SUB(G, T, A1(neg, 0), v, RELAXED, DEVICE);
  }
}
#endif

// Exchange tokens through a shared slot.
#if defined(ALL) || defined(K_token_swap)
__kernel void token_swap(PV1(T, tokens), PV1(T, slot), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < tokens_s0) {
    A1(tokens, i) = ATOMIC_XCHG(G, T, A1(slot, 0), A1(tokens, i), ACQ_REL, DEVICE);
  }
}
#endif

// Single-pass sum with the "last work-group finishes" pattern.
#if defined(ALL) || defined(K_sum_last_group)
__kernel void sum_last_group(PV1(const T, x), PV1(T, partial), PV1(u32, counter),
                             PV1(T, result)) {
  __local T tile[WG];
  __local bool is_last[1];

  i64 lid = LOCAL_ID(0);
  i64 lsz = LOCAL_SIZE(0);
  i64 n = x_s0;

  T acc = (T)0;
  for (i64 i = GLOBAL_ID(0); i < n; i += GLOBAL_SIZE(0)) {
    acc += A1(x, i);
  }
  tile[lid] = acc;
  BARRIER_LOCAL();
  for (i64 s = lsz / 2; s > 0; s /= 2) {
    if (lid < s) {
      tile[lid] += tile[lid + s];
    }
    BARRIER_LOCAL();
  }

  if (lid == 0) {
    A1(partial, GROUP_ID(0)) = tile[0];
    u32 done = ATOMIC_ADD(G, u32, A1(counter, 0), 1u, ACQ_REL, DEVICE);
    is_last[0] = (i64)done == NUM_GROUPS(0) - 1;
  }
  BARRIER_ALL();

  if (is_last[0]) {
    T total = (T)0;
    for (i64 g = lid; g < NUM_GROUPS(0); g += lsz) {
      total += A1(partial, g);
    }
    tile[lid] = total;
    BARRIER_LOCAL();
    for (i64 s = lsz / 2; s > 0; s /= 2) {
      if (lid < s) {
        tile[lid] += tile[lid + s];
      }
      BARRIER_LOCAL();
    }
    if (lid == 0) {
      ATOMIC_STORE(G, T, A1(result, 0), tile[0], RELEASE, DEVICE);
      ATOMIC_STORE(G, u32, A1(counter, 0), 0u, RELAXED, DEVICE);
    }
  }
}
#endif

// A flag published with release.
#if defined(ALL) || defined(K_publish)
__kernel void publish(PV1(f32, data), PV1(u32, ready), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 g = GLOBAL_ID(0);
  if (g < data_s0) {
    A1(data, g) = (f32)g * 0.5f;
    ATOMIC_STORE(G, u32, A1(ready, g), 1u, RELEASE, DEVICE);
  }
}
#endif

// ... and read with acquire.
#if defined(ALL) || defined(K_try_consume)
__kernel void try_consume(PV1(const f32, data), PV1(u32, ready), PV1(f32, out),
                          RANGE_PARAMS) {
  RANGE_GUARD;
  i64 g = GLOBAL_ID(0);
  if (g >= out_s0) {
    return;
  }
  if (ATOMIC_LOAD(G, u32, A1(ready, g), ACQUIRE, DEVICE) == 1) {
    A1(out, g) = A1(data, g);
  } else {
    A1(out, g) = -1.0f;
  }
}
#endif

// Local-memory atomics with work-group scope.
#if defined(ALL) || defined(K_count_negative_per_group)
__kernel void count_negative_per_group(PV1(const f64, x), PV1(i32, counts),
                                       PV1(i64, total)) {
  __local i32 group_count[1];

  i64 lid = LOCAL_ID(0);
  if (lid == 0) {
    ATOMIC_STORE(L, i32, group_count[0], 0, RELAXED, WORK_GROUP);
  }
  BARRIER_LOCAL();

  i64 i = GLOBAL_ID(0);
  if (i < x_s0 && A1(x, i) < 0.0) {
    ATOMIC_ADD(L, i32, group_count[0], 1, RELAXED, WORK_GROUP);
  }
  BARRIER_LOCAL();

  if (lid == 0) {
    i32 c = ATOMIC_LOAD(L, i32, group_count[0], SEQ_CST, WORK_GROUP);
    A1(counts, GROUP_ID(0)) = c;
    ATOMIC_ADD(G, i64, A1(total, 0), (i64)c, SEQ_CST, DEVICE);
  }
}
#endif
