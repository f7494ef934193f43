// histogram.cl -- the kernels of examples/histogram.xpk in CUDA C (peer of
// bench/compile).
#include "xpk_peer.clh"

#define NBINS ((i64)256)
#define COPIES ((i64)4)
#define COARSE ((i64)16)

// One global atomic per input byte.
#if defined(ALL) || defined(K_histogram_global)
__kernel void histogram_global(PV1(const u8, data), PV1(u32, hist), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 n = data_s0;
  for (i64 i = GLOBAL_ID(0); i < n; i += RANGE_SIZE(0)) {
    ATOMIC_ADD(G, u32, A1(hist, A1(data, i)), 1, RELAXED, DEVICE);
  }
}
#endif

// Privatised histogram in local memory.
#if defined(ALL) || defined(K_histogram_local)
__kernel void histogram_local(PV1(const u8, data), PV1(u32, hist)) {
  __local u32 bins[NBINS];

  i64 lid = LOCAL_ID(0);
  i64 lsz = LOCAL_SIZE(0);

  for (i64 b = lid; b < NBINS; b += lsz) {
    bins[b] = 0;
  }
  BARRIER_LOCAL();

  i64 n = data_s0;
  for (i64 i = GLOBAL_ID(0); i < n; i += GLOBAL_SIZE(0)) {
    ATOMIC_ADD(L, u32, bins[A1(data, i)], 1u, RELAXED, WORK_GROUP);
  }
  BARRIER_LOCAL();

  for (i64 b = lid; b < NBINS; b += lsz) {
    u32 count = bins[b];
    if (count != 0) {
      ATOMIC_ADD(G, u32, A1(hist, b), count, RELAXED, DEVICE);
    }
  }
}
#endif

// Histogram of floating-point samples over [lo, hi].
#if defined(ALL) || defined(K_histogram_float)
__kernel void histogram_float(PVN(const T, data), T lo, T hi, PV1(u32, hist),
                              RANGE_PARAMS) {
  RANGE_GUARD;
  i64 nbins = hist_s0;
  T scale = (T)nbins / (hi - lo);
  i64 n = SIZEN(data);
  for (i64 i = GLOBAL_ID(0); i < n; i += RANGE_SIZE(0)) {
    T v = AN(data, i);
    if (isnan(v) || v < lo || v > hi) {
      continue;
    }
    i64 b = xk_clamp((i64)((v - lo) * scale), (i64)0, nbins - 1);
    ATOMIC_ADD(G, u32, A1(hist, b), 1u, RELAXED, DEVICE);
  }
}
#endif

// Joint histogram of two byte images into a 256 x 256 table.
#if defined(ALL) || defined(K_joint_histogram)
__kernel void joint_histogram(PV2(const u8, a), PV2(const u8, b), PV2(u32, hist),
                              RANGE_PARAMS) {
  RANGE_GUARD;
  i64 y = GLOBAL_ID(0);
  i64 x = GLOBAL_ID(1);
  if (y < a_s0 && x < a_s1) {
    ATOMIC_ADD(G, u32, A2(hist, A2(a, y, x), A2(b, y, x)), 1u, RELAXED, DEVICE);
  }
}
#endif

// Histogram of 16 coarse bins with COPIES local copies.
#if defined(ALL) || defined(K_histogram_coarse)
__kernel void histogram_coarse(PV1(const u8, data), PV1(u32, hist)) {
  __local u32 bins[COPIES][COARSE];

  i64 lid = LOCAL_ID(0);
  i64 copy = lid % COPIES;
  for (i64 t = lid; t < COPIES * COARSE; t += LOCAL_SIZE(0)) {
    (&bins[0][0])[t] = 0;
  }
  BARRIER_LOCAL();

  i64 n = data_s0;
  for (i64 i = GLOBAL_ID(0); i < n; i += GLOBAL_SIZE(0)) {
    u8 bin = A1(data, i) >> 4;
    ATOMIC_ADD(L, u32, bins[copy][bin], 1u, RELAXED, WORK_GROUP);
  }
  BARRIER_LOCAL();

  for (i64 b = lid; b < COARSE; b += LOCAL_SIZE(0)) {
    u32 total = 0;
    for (i64 c = 0; c < COPIES; c++) {
      total += bins[c][b];
    }
    ATOMIC_ADD(G, u32, A1(hist, b), total, RELAXED, DEVICE);
  }
}
#endif
