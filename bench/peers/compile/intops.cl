// intops.cl -- the kernels of examples/intops.xpk in OpenCL C 2.0 (peer of bench/compile).
// Integer arithmetic wraps and shift counts are taken modulo the width, as
// in xpjit: signed arithmetic that may overflow is done in unsigned types and
// run-time shift counts are masked.
#include "xpk_peer.clh"

#define MASK_LOW ((u32)0x0000ffffu)
#define GOLDEN64 ((u64)0x9e3779b97f4a7c15UL)
#define MILLION ((i64)1000000)

/* gcd_pairs and total_popcount need an integer T. When every kernel is
 * compiled at once (-DALL, with T a float type for the others) they use
 * int; when compiled alone they use T. */
#if defined(ALL)
#define TI int
#else
#define TI T
#endif

// Bit counting.
#if defined(ALL) || defined(K_bit_stats)
__kernel void bit_stats(PV1(const u32, x), PV1(i32, pop), PV1(i32, lead),
                        PV1(i32, trail), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= x_s0) {
    return;
  }
  u32 v = A1(x, i);
  A1(pop, i) = (i32)xk_popcount(v);
  A1(lead, i) = v == 0 ? 32 : (i32)xk_clz(v);
  A1(trail, i) = v == 0 ? 32 : (i32)xk_ctz(v);
}
#endif

// Floor of log2 and the next power of two, via clz.
#if defined(ALL) || defined(K_pow2_info)
XK_DEV u64 ilog2(u64 v) { return (u64)63 - xk_clz(v); }

XK_DEV u64 next_pow2(u64 v) {
  if (v <= 1) {
    return 1;
  }
  return (u64)1 << (((u64)64 - xk_clz(v - 1)) & 63);
}
#endif

#if defined(ALL) || defined(K_pow2_info)
__kernel void pow2_info(PV1(const u64, x), PV1(u64, log2_out), PV1(u64, next),
                        RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < x_s0 && A1(x, i) != 0) {
    A1(log2_out, i) = ilog2(A1(x, i));
    A1(next, i) = next_pow2(A1(x, i));
  }
}
#endif

// Reverse the bits of a 32-bit word with masks and shifts.
#if defined(ALL) || defined(K_reverse_bits)
XK_DEV u32 bit_reverse32(u32 v) {
  u32 x = v;
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
  u32 hi = x >> 16;
  x <<= 16;
  x |= hi;
  return x;
}
#endif

#if defined(ALL) || defined(K_reverse_bits)
__kernel void reverse_bits(PV1(u32, x), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < x_s0) {
    A1(x, i) = bit_reverse32(A1(x, i));
  }
}
#endif

// MurmurHash3 32-bit finaliser.
#if defined(ALL) || defined(K_hash_keys)
XK_DEV u32 fmix32(u32 h) {
  u32 x = h;
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return x;
}
#endif

#if defined(ALL) || defined(K_hash_keys)
XK_DEV u32 hash_combine(u32 seed, u32 key) {
  u32 k = key * 0xcc9e2d51u;
  k = xk_rotl(k, 15u);
  k *= 0x1b873593u;
  u32 h = seed ^ k;
  h = xk_rotl(h, 13u) * 5u + 0xe6546b64u;
  return fmix32(h);
}
#endif

#if defined(ALL) || defined(K_hash_keys)
__kernel void hash_keys(PV1(const u32, keys), u32 seed, PV1(u32, out), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < keys_s0) {
    A1(out, i) = hash_combine(seed, A1(keys, i));
  }
}
#endif

// PCG-XSH-RR output function.
#if defined(ALL) || defined(K_random_numbers)
XK_DEV u32 pcg_output(u64 state) {
  u32 xorshifted = (u32)(((state >> 18) ^ state) >> 27);
  u32 rot = (u32)(state >> 59);
  return xk_rotr(xorshifted, rot);
}
#endif

#if defined(ALL) || defined(K_random_numbers)
__kernel void random_numbers(u64 seed, PV1(u32, bits), PV1(f32, uniform),
                             RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= bits_s0) {
    return;
  }
  u64 state = seed + (u64)i * GOLDEN64;
  state = state * (u64)6364136223846793005UL + (u64)1442695040888963407UL;
  u32 r = pcg_output(state);
  A1(bits, i) = r;
  A1(uniform, i) = (f32)(r >> 8) / 16777216.0f;
}
#endif

// Unsigned division by 7 with mul_hi, checked against `/`.
#if defined(ALL) || defined(K_div7)
__kernel void div7(PV1(const u32, x), PV1(u32, q), PV1(u32, mismatches), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= x_s0) {
    return;
  }
  u32 n = A1(x, i);
  u32 t = xk_mul_hi(n, 0x24924925u);
  u32 quotient = (t + ((n - t) >> 1)) >> 2;
  A1(q, i) = quotient;
  if (quotient != n / 7) {
    ATOMIC_ADD(G, u32, A1(mismatches, 0), 1u, RELAXED, DEVICE);
  }
}
#endif

// Lemire's multiply-shift range reduction.
#if defined(ALL) || defined(K_bucket_of)
__kernel void bucket_of(PV1(const u64, hashes), u64 nbuckets, PV1(u64, out),
                        RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < hashes_s0) {
    A1(out, i) = xk_mul_hi(A1(hashes, i), nbuckets);
  }
}
#endif

// Signed mul_hi, and the full product split in two halves.
#if defined(ALL) || defined(K_wide_multiply)
__kernel void wide_multiply(PV1(const i32, a), PV1(const i32, b), PV1(i32, hi),
                            PV1(u32, lo), PV1(i64, full), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < a_s0) {
    A1(hi, i) = xk_mul_hi(A1(a, i), A1(b, i));
    A1(lo, i) = (u32)A1(a, i) * (u32)A1(b, i);
    A1(full, i) = (i64)A1(a, i) * (i64)A1(b, i);
  }
}
#endif

// Shift counts are taken modulo the width.
#if defined(ALL) || defined(K_shifts)
__kernel void shifts(PV1(const u32, x), PV1(const u32, s), PV1(u32, shl), PV1(u32, shr),
                     PV1(i32, sar), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= x_s0) {
    return;
  }
  u32 v = A1(x, i);
  u32 c = A1(s, i);
  A1(shl, i) = v << (c & 31);
  A1(shr, i) = v >> (c & 31);
  A1(sar, i) = (i32)v >> ((i32)c & 31);
}
#endif

// Wrapping arithmetic at the edges of each type, and casts.
#if defined(ALL) || defined(K_wraparound)
__kernel void wraparound(PV1(const i32, x), PV2(i64, out), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= x_s0) {
    return;
  }
  i32 v = A1(x, i);

  i8 small = (i8)v;
  u8 byte = (u8)v;
  i8 max8 = 127;
  i32 min32 = -2147483647 - 1;

  A2(out, i, 0) = (i64)small;
  A2(out, i, 1) = (i64)byte;
  A2(out, i, 2) = (i64)(i8)(max8 + (i8)1);
  A2(out, i, 3) = (i64)(u8)((u8)255 + byte);
  A2(out, i, 4) = (i64)(u32)v;
  A2(out, i, 5) = (i64)(i32)((u32)0 - (u32)min32);
  A2(out, i, 6) = (i64)~v;
  A2(out, i, 7) = (i64)(i32)((u32)v * 65536u * 65536u);

  u16 u = (u16)v;
  u -= 1;
  u++;
  u--;
  A2(out, i, 8) = (i64)u;

  i64 w = 7;
  w %= 4;
  w &= 0x2;
  w |= 0x8;
  w ^= 0xf;
  w <<= 2;
  w >>= 1;
  w /= 3;
  w -= MILLION;
  w *= -1;
  A2(out, i, 9) = w;
}
#endif

// Float <-> integer casts.
#if defined(ALL) || defined(K_float_casts)
__kernel void float_casts(PV1(const f64, x), PV1(i32, to_int), PV1(f32, to_f32),
                          PV1(f64, back), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < x_s0) {
    f64 v = fmax(fmin(A1(x, i), 2147483647.0), -2147483648.0);
    A1(to_int, i) = (i32)v;
    A1(to_f32, i) = (f32)A1(x, i);
    A1(back, i) = (f64)(i32)v + 0.5;
  }
}
#endif

// Guarded division.
#if defined(ALL) || defined(K_safe_divide)
__kernel void safe_divide(PV1(const i32, a), PV1(const i32, b), PV1(i32, q),
                          PV1(i32, r), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i >= a_s0) {
    return;
  }
  i32 num = A1(a, i);
  i32 den = A1(b, i);
  bool ok = den != 0 && !(num == -2147483647 - 1 && den == -1);
  A1(q, i) = ok ? num / den : 0;
  A1(r, i) = ok ? num % den : 0;
}
#endif

// Greatest common divisor, generic over the integer types.
#if defined(ALL) || defined(K_gcd_pairs)
XK_DEV TI gcd(TI a, TI b) {
  TI x = xk_abs(a);
  TI y = xk_abs(b);
  while (y != 0) {
    TI t = x % y;
    x = y;
    y = t;
  }
  return x;
}
#endif

#if defined(ALL) || defined(K_gcd_pairs)
__kernel void gcd_pairs(PVN(const TI, a), PVN(const TI, b), PVN(TI, out), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < SIZEN(out)) {
    AN(out, i) = gcd(AN(a, i), AN(b, i));
  }
}
#endif

// Count the set bits across an array of any integer type.
#if defined(ALL) || defined(K_total_popcount)
__kernel void total_popcount(PVN(const TI, x), PV1(i64, total), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < SIZEN(x)) {
    ATOMIC_ADD(G, i64, A1(total, 0), (i64)xk_popcount(AN(x, i)), RELAXED, DEVICE);
  }
}
#endif

// Saturating u8 addition using a wider type and min.
#if defined(ALL) || defined(K_add_saturate_u8)
__kernel void add_saturate_u8(PV2(const u8, a), PV2(const u8, b), PV2(u8, out),
                              RANGE_PARAMS) {
  RANGE_GUARD;
  i64 y = GLOBAL_ID(0);
  i64 x = GLOBAL_ID(1);
  if (y < out_s0 && x < out_s1) {
    u16 s = (u16)((u16)A2(a, y, x) + (u16)A2(b, y, x));
    A2(out, y, x) = (u8)xk_min(s, (u16)255);
  }
}
#endif

// Masks and the low/high halves of a word.
#if defined(ALL) || defined(K_split_halves)
__kernel void split_halves(PV1(const u32, x), PV1(u16, lo), PV1(u16, hi),
                           RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < x_s0) {
    A1(lo, i) = (u16)(A1(x, i) & MASK_LOW);
    A1(hi, i) = (u16)(A1(x, i) >> 16);
  }
}
#endif
