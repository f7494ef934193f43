// intops.cu -- the kernels of examples/intops.xpk in CUDA C (peer of bench/compile).
// Integer arithmetic wraps and shift counts are taken modulo the width, as
// in xpjit: signed arithmetic that may overflow is done in unsigned types and
// run-time shift counts are masked.
#include "xpk_peer.cuh"

#define MASK_LOW ((u32)0x0000ffffu)
#define GOLDEN64 ((u64)0x9e3779b97f4a7c15UL)
#define MILLION ((i64)1000000)

// Bit counting.
template <typename = void>
__global__ void bit_stats(PV1(const u32, x), PV1(i32, pop), PV1(i32, lead),
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

// Floor of log2 and the next power of two, via clz.
XK_DEV u64 ilog2(u64 v) { return (u64)63 - xk_clz(v); }

XK_DEV u64 next_pow2(u64 v) {
  if (v <= 1) {
    return 1;
  }
  return (u64)1 << (((u64)64 - xk_clz(v - 1)) & 63);
}

template <typename = void>
__global__ void pow2_info(PV1(const u64, x), PV1(u64, log2_out), PV1(u64, next),
                          RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < x_s0 && A1(x, i) != 0) {
    A1(log2_out, i) = ilog2(A1(x, i));
    A1(next, i) = next_pow2(A1(x, i));
  }
}

// Reverse the bits of a 32-bit word with masks and shifts.
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

template <typename = void>
__global__ void reverse_bits(PV1(u32, x), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < x_s0) {
    A1(x, i) = bit_reverse32(A1(x, i));
  }
}

// MurmurHash3 32-bit finaliser.
XK_DEV u32 fmix32(u32 h) {
  u32 x = h;
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return x;
}

XK_DEV u32 hash_combine(u32 seed, u32 key) {
  u32 k = key * 0xcc9e2d51u;
  k = xk_rotl(k, 15u);
  k *= 0x1b873593u;
  u32 h = seed ^ k;
  h = xk_rotl(h, 13u) * 5u + 0xe6546b64u;
  return fmix32(h);
}

template <typename = void>
__global__ void hash_keys(PV1(const u32, keys), u32 seed, PV1(u32, out), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < keys_s0) {
    A1(out, i) = hash_combine(seed, A1(keys, i));
  }
}

// PCG-XSH-RR output function.
XK_DEV u32 pcg_output(u64 state) {
  u32 xorshifted = (u32)(((state >> 18) ^ state) >> 27);
  u32 rot = (u32)(state >> 59);
  return xk_rotr(xorshifted, rot);
}

template <typename = void>
__global__ void random_numbers(u64 seed, PV1(u32, bits), PV1(f32, uniform),
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

// Unsigned division by 7 with mul_hi, checked against `/`.
template <typename = void>
__global__ void div7(PV1(const u32, x), PV1(u32, q), PV1(u32, mismatches), RANGE_PARAMS) {
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

// Lemire's multiply-shift range reduction.
template <typename = void>
__global__ void bucket_of(PV1(const u64, hashes), u64 nbuckets, PV1(u64, out),
                          RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < hashes_s0) {
    A1(out, i) = xk_mul_hi(A1(hashes, i), nbuckets);
  }
}

// Signed mul_hi, and the full product split in two halves.
template <typename = void>
__global__ void wide_multiply(PV1(const i32, a), PV1(const i32, b), PV1(i32, hi),
                              PV1(u32, lo), PV1(i64, full), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < a_s0) {
    A1(hi, i) = xk_mul_hi(A1(a, i), A1(b, i));
    A1(lo, i) = (u32)A1(a, i) * (u32)A1(b, i);
    A1(full, i) = (i64)A1(a, i) * (i64)A1(b, i);
  }
}

// Shift counts are taken modulo the width.
template <typename = void>
__global__ void shifts(PV1(const u32, x), PV1(const u32, s), PV1(u32, shl), PV1(u32, shr),
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

// Wrapping arithmetic at the edges of each type, and casts.
template <typename = void>
__global__ void wraparound(PV1(const i32, x), PV2(i64, out), RANGE_PARAMS) {
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

// Float <-> integer casts.
template <typename = void>
__global__ void float_casts(PV1(const f64, x), PV1(i32, to_int), PV1(f32, to_f32),
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

// Guarded division.
template <typename = void>
__global__ void safe_divide(PV1(const i32, a), PV1(const i32, b), PV1(i32, q),
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

// Greatest common divisor, generic over the integer types.
template <typename T>
XK_DEV T gcd(T a, T b) {
  T x = xk_abs(a);
  T y = xk_abs(b);
  while (y != 0) {
    T t = x % y;
    x = y;
    y = t;
  }
  return x;
}

template <typename T>
__global__ void gcd_pairs(PVN(const T, a), PVN(const T, b), PVN(T, out), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < SIZEN(out)) {
    AN(out, i) = gcd(AN(a, i), AN(b, i));
  }
}

// Count the set bits across an array of any integer type.
template <typename T>
__global__ void total_popcount(PVN(const T, x), PV1(i64, total), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < SIZEN(x)) {
    ATOMIC_ADD(G, i64, A1(total, 0), (i64)xk_popcount(AN(x, i)), RELAXED, DEVICE);
  }
}

// Saturating u8 addition using a wider type and min.
template <typename = void>
__global__ void add_saturate_u8(PV2(const u8, a), PV2(const u8, b), PV2(u8, out),
                                RANGE_PARAMS) {
  RANGE_GUARD;
  i64 y = GLOBAL_ID(0);
  i64 x = GLOBAL_ID(1);
  if (y < out_s0 && x < out_s1) {
    u16 s = (u16)((u16)A2(a, y, x) + (u16)A2(b, y, x));
    A2(out, y, x) = (u8)xk_min(s, (u16)255);
  }
}

// Masks and the low/high halves of a word.
template <typename = void>
__global__ void split_halves(PV1(const u32, x), PV1(u16, lo), PV1(u16, hi),
                             RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  if (i < x_s0) {
    A1(lo, i) = (u16)(A1(x, i) & MASK_LOW);
    A1(hi, i) = (u16)(A1(x, i) >> 16);
  }
}
