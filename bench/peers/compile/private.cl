// private.cl -- the kernels of examples/private.xpk in OpenCL C 2.0 (peer of bench/compile).
// Private arrays are zero-initialised, as in xpjit.
#include "xpk_peer.clh"

#define TAPS ((i64)9)
#define MAX_DEGREE ((i64)8)
#define RB ((i64)4)
#define NBUCKETS ((i64)16)

// 3x3 median filter with an insertion sort of the window.
#if defined(ALL) || defined(K_median3x3)
__kernel void median3x3(PV2(const T, img), PV2(T, out), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 y = GLOBAL_ID(0);
  i64 x = GLOBAL_ID(1);
  i64 h = img_s0;
  i64 w = img_s1;
  if (y >= h || x >= w) {
    return;
  }

  T win[TAPS] = {0};
  i64 k = 0;
  for (i64 dy = -1; dy <= 1; dy++) {
    for (i64 dx = -1; dx <= 1; dx++) {
      i64 yy = xk_clamp(y + dy, (i64)0, h - 1);
      i64 xx = xk_clamp(x + dx, (i64)0, w - 1);
      win[k] = A2(img, yy, xx);
      k++;
    }
  }

  for (i64 i = 1; i < TAPS; i++) {
    T v = win[i];
    i64 j = i - 1;
    while (j >= 0 && win[j] > v) {
      win[j + 1] = win[j];
      j--;
    }
    win[j + 1] = v;
  }
  A2(out, y, x) = win[TAPS / 2];
}
#endif

// Horner's rule with the coefficients in a private array.
#if defined(ALL) || defined(K_polyval)
__kernel void polyval(PV1(const T, coeffs), PVN(const T, x), PVN(T, y), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= SIZEN(x)) {
    return;
  }
  T c[MAX_DEGREE] = {0};
  i64 d = xk_min(coeffs_s0, MAX_DEGREE);
  for (i64 k = 0; k < d; k++) {
    c[k] = A1(coeffs, k);
  }

  T v = AN(x, i);
  T acc = c[MAX_DEGREE - 1];
  for (i64 k = MAX_DEGREE - 2; k >= 0; k--) {
    acc = acc * v + c[k];
  }
  AN(y, i) = acc;
}
#endif

// Matrix multiplication with an RB x RB register block per work-item.
#if defined(ALL) || defined(K_matmul_regblock)
__kernel void matmul_regblock(PV2(const T, a), PV2(const T, b), PV2(T, c),
                              RANGE_PARAMS) {
  RANGE_GUARD;
  i64 row0 = GLOBAL_ID(0) * RB;
  i64 col0 = GLOBAL_ID(1) * RB;
  i64 m = c_s0;
  i64 n = c_s1;
  i64 kdim = a_s1;
  if (row0 >= m || col0 >= n) {
    return;
  }

  T acc[RB][RB] = {{0}};
  T av[RB] = {0};
  T bv[RB] = {0};
  for (i64 k = 0; k < kdim; k++) {
    for (i64 r = 0; r < RB; r++) {
      av[r] = row0 + r < m ? A2(a, row0 + r, k) : (T)0;
      bv[r] = col0 + r < n ? A2(b, k, col0 + r) : (T)0;
    }
    for (i64 r = 0; r < RB; r++) {
      for (i64 s = 0; s < RB; s++) {
        acc[r][s] += av[r] * bv[s];
      }
    }
  }

  for (i64 r = 0; r < RB; r++) {
    if (row0 + r >= m) {
      break;
    }
    for (i64 s = 0; s < RB; s++) {
      if (col0 + s >= n) {
        break;
      }
      A2(c, row0 + r, col0 + s) = acc[r][s];
    }
  }
}
#endif

// Per-work-item nibble histogram in a private array.
#if defined(ALL) || defined(K_nibble_histogram)
__kernel void nibble_histogram(PV1(const u32, words), i64 chunk, PV1(u32, hist),
                               RANGE_PARAMS) {
  RANGE_GUARD;
  u32 counts[NBUCKETS] = {0};
  i64 begin = GLOBAL_ID(0) * chunk;
  i64 end = xk_min(begin + chunk, words_s0);
  for (i64 i = begin; i < end; i++) {
    u32 w = A1(words, i);
    for (i32 k = 0; k < 8; k++) {
      counts[w & 0xf] += 1;
      w >>= 4;
    }
  }
  for (i64 b = 0; b < NBUCKETS; b++) {
    if (counts[b] == 0) {
      continue;
    }
    ATOMIC_ADD(G, u32, A1(hist, b), counts[b], RELAXED, DEVICE);
  }
}
#endif

// Reverse every row of length <= 16 through a private buffer.
#if defined(ALL) || defined(K_reverse_rows)
__kernel void reverse_rows(PV2(T, m), PV1(i64, info), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 r = GLOBAL_ID(0);
  if (r >= m_s0) {
    return;
  }
  T buf[16] = {0};
  i64 cols = xk_min(m_s1, (i64)16);
  i64 j = 0;
  for (j = 0; j < cols; j++) {
    buf[j] = A2(m, r, j);
  }
  {
    i64 j = cols - 1;
    for (i64 k = 0; k < cols; k++) {
      A2(m, r, k) = buf[j];
      j--;
    }
  }
  if (r == 0) {
    A1(info, 0) = 1;
    A1(info, 1) = 16;
    A1(info, 2) = 2;
    A1(info, 3) = m_t1;
  }
}
#endif
