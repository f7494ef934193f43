/* test_half.c - the 16-bit float types against bit-exact C references:
 * f16 (IEEE 754 binary16, an arithmetic type) and bf16 (bfloat16, a storage
 * type). The host helpers (xpj_f16_from_double, ...) exhaustively and on
 * rounding edges; every cast pair with f16 or bf16 on one side (all 65536
 * f16 / bf16 sources; ties, near-ties, double rounding through f32,
 * overflow, subnormals, NaN); f16 arithmetic and comparisons, rounded after
 * each operation; literals, scalar parameters, limits; every math builtin
 * on all 65536 f16 inputs; atomics on global and local f16 (neighbours
 * share 32-bit words); work-group and sub-group collectives (sums
 * accumulated in f32 and rounded once); broadcasts and shuffles of f16 and
 * bf16; bf16 computed in f32; local tiles; and the compile errors of
 * arithmetic on bf16. Kernels: tests/conformance/half.xpk. Device:
 * XPJIT_TEST_DEVICE (tests/run_tests.sh runs it on the CPU and on
 * OpenCL). */
#include "conformance/common.h"

#include <float.h>
#include <stdarg.h>
#include <stdbool.h>

/* common.h's helpers this suite has no use for */
__attribute__((unused)) static void unused_helpers(void) {
  (void)ulps_f32;
  (void)ulps_f64;
  (void)rnd_fill;
  (void)rnd_real;
}

/* ---- references -------------------------------------------------------- */

/* x rounded to nearest (ties to even) in a binary format of p significant
 * bits, smallest normal exponent emin (subnormals below) and largest finite
 * value maxv; beyond it +-inf. Exact: one rounding, from the double. */
static double round_fmt(double x, int p, int emin, double maxv) {
  if (x == 0 || !isfinite(x))
    return x;
  int e;
  frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
  int q = e - 1 < emin ? emin : e - 1;
  double r = ldexp(nearbyint(ldexp(x, p - 1 - q)), q - (p - 1));
  return fabs(r) > maxv ? copysign(INFINITY, x) : r;
}
static double r16(double x) { return round_fmt(x, 11, -14, 65504.0); }
static double rbf(double x) { return round_fmt(x, 8, -126, 0x1.fep127); }

static bool h_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
static bool b_nan(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f); }

/* the f16 bits of v, an f16 value (or inf or NaN) */
static uint16_t h_enc(double v) {
  uint16_t s = signbit(v) ? 0x8000 : 0;
  double a = fabs(v);
  if (isnan(v))
    return 0x7e00;
  if (isinf(a))
    return s | 0x7c00;
  if (a < 0x1p-14)
    return s | (uint16_t)(a * 0x1p24);
  int e;
  frexp(a, &e);
  return s | (uint16_t)((e + 14) << 10) | (uint16_t)(ldexp(a, 11 - e) - 1024);
}
static double h_dec(uint16_t h) {
  int e = h >> 10 & 31, m = h & 1023;
  double v = e == 31 ? (m ? NAN : INFINITY)
             : e     ? ldexp(1024 + m, e - 25)
                     : ldexp(m, -24);
  return h & 0x8000 ? -v : v;
}
static uint16_t b_enc(double v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  return isnan(v) ? (uint16_t)(0x7fc0 | (u >> 16 & 0x8000))
                  : (uint16_t)(u >> 16);
}
static double b_dec(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
/* x rounded once to f16 / bf16, as bits */
static uint16_t h16(double x) { return h_enc(r16(x)); }
static uint16_t b16(double x) { return b_enc(rbf(x)); }

/* f16 bits as a monotone integer (+-0 both 0; inf one past the maximum) */
static int h_ord(uint16_t h) {
  return h & 0x8000 ? -(int)(h & 0x7fff) : (int)h;
}
/* f16 units in the last place between got and want (both NaN: 0) */
static int h_ulps(uint16_t got, uint16_t want) {
  if (h_nan(got) || h_nan(want))
    return h_nan(got) && h_nan(want) ? 0 : 1 << 20;
  return abs(h_ord(got) - h_ord(want));
}
/* same bits, or both NaN */
static bool h_same(uint16_t got, uint16_t want) {
  return got == want || (h_nan(got) && h_nan(want));
}
static bool b_same(uint16_t got, uint16_t want) {
  return got == want || (b_nan(got) && b_nan(want));
}

/* a random f16: finite with an exponent field in [lo, hi] (0 and 31 give
 * subnormals and inf/NaN) with a random sign and mantissa */
static uint16_t rnd_h(unsigned lo, unsigned hi) {
  uint16_t b = (uint16_t)rnd64();
  return (uint16_t)((b & 0x83ff) | (lo + rnd64() % (hi - lo + 1)) << 10);
}
/* mostly moderate (2^-7 .. 2^8), some from every binade, some any bits */
static uint16_t rnd_hmix(void) {
  unsigned q = (unsigned)(rnd64() % 8);
  return q < 5 ? rnd_h(8, 22) : q < 7 ? rnd_h(0, 30) : (uint16_t)rnd64();
}

static bool on_cpu(void) { return strncmp(C.info.target, "cpu", 3) == 0; }

/* conf_free of each argument up to a NULL */
static void conf_free_all(void *p, ...) {
  va_list ap;
  va_start(ap, p);
  for (; p; p = va_arg(ap, void *))
    conf_free(p);
  va_end(ap);
}

/* 1-D array of n 16-bit elements of dtype s over p */
static xpj_array arr16(void *p, xpj_scalar s, size_t n) {
  return xpj_array_1d(p, s, (int64_t)n);
}

/* ---- host helpers ------------------------------------------------------ */

/* the same double: equal with the same sign, or both NaN */
static bool same_d(double a, double b) {
  return (a == b && signbit(a) == signbit(b)) || (isnan(a) && isnan(b));
}

/* round to odd to f32 (then rounding to bf16 is the one rounding of x) */
static float to_odd(double x) {
  float t = (float)x;
  if (isnan(x) || (double)t == x)
    return t;
  if (fabs((double)t) > fabs(x))
    t = nextafterf(t, 0);
  uint32_t u;
  memcpy(&u, &t, 4);
  u |= 1;
  memcpy(&t, &u, 4);
  return t;
}
/* the bit-level bf16 of an f32: round to nearest even on the top half */
static uint16_t bf16_bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (isnan(f))
    return (uint16_t)(u >> 16 | 0x40);
  return (uint16_t)((u + 0x7fff + (u >> 16 & 1)) >> 16);
}

/* doubles on the rounding edges of both formats */
static const double edges[] = {
    0.0, -0.0, 1.0, -1.0, 0.5, 1.5, -2.5, 0.1, 0.3, 100.0, -1e5, 1e10,
    65504, -65504, 65519, 65520, -65520, 65519.99, 65519.9999999, 65536,
    0x1p-24, -0x1p-24, 0x1.8p-23, 0x1p-25, -0x1p-25, 0x1.000002p-25,
    0x1.0000000001p-25, 0x1.8p-24, 0x1.4p-23, 0x1p-26, 1e-8, 0x1.ff8p-15,
    0x1.ffcp-15, INFINITY, -INFINITY, NAN, 1 + 0x1p-11, 1 + 3 * 0x1p-11,
    -(1 + 0x1p-11), 1 + 0x1p-11 + 0x1p-40, -(1 + 0x1p-11 + 0x1p-40),
    1 + 0x1p-11 - 0x1p-40, 2049, 2051, 2050, 4097, 1 + 0x1p-8,
    1 + 3 * 0x1p-8, -(1 + 0x1p-8), 1 + 0x1p-8 + 0x1p-40,
    -(1 + 0x1p-8 + 0x1p-40), 257, 259, 385, 0x1.fep127, -0x1.fep127,
    0x1.ffp127, 0x1.fefffffffffffp127, 0x1.fffffep127, 3.0e38, 1e39, 1e300,
    -1e300, 1e-300, 0x1p-126, 0x1p-133, 0x1p-134, 0x1.0000000001p-134,
    0x1.8p-133, 0x1p-149, 1e-40, 1e-45, 16777215, 16777217};
#define NEDGES (sizeof edges / sizeof *edges)

/* the C API's scalar names, and the helpers against the references
 * (which are first checked against GCC's _Float16 and against the
 * bit-level bf16 rounding through round-to-odd) */
static void test_host_helpers(void **state) {
  (void)state;
  assert_string_equal(xpj_scalar_name(XPJ_F16), "f16");
  assert_string_equal(xpj_scalar_name(XPJ_BF16), "bf16");
  assert_int_equal(xpj_scalar_parse("f16"), XPJ_F16);
  assert_int_equal(xpj_scalar_parse("bf16"), XPJ_BF16);
  assert_int_equal(xpj_scalar_bits(XPJ_F16), 16);
  assert_int_equal(xpj_scalar_bits(XPJ_BF16), 16);
  assert_int_equal(XPJ_F16, XPJ_F64 + 1);
  assert_int_equal(XPJ_BF16, XPJ_F64 + 2);
  enum { NR = 200000 };
  double *xs = malloc((NEDGES + NR) * sizeof *xs);
  assert_non_null(xs);
  memcpy(xs, edges, sizeof edges);
  for (size_t i = 0; i < NR; i++) {
    uint64_t r = rnd64();
    double v;
    switch (i % 4) {
    case 0: /* f16 ties, exact and off by 2^-30 ulp either way */
    case 1: {
      uint16_t h = (uint16_t)(r % 0x7bff);
      double lo = h_dec(h), ulp = h_dec((uint16_t)(h + 1)) - lo;
      v = lo + ulp / 2 + (i % 4 ? ulp * 0x1p-30 * (r >> 63 ? 1 : -1) : 0);
      break;
    }
    case 2: { /* bf16 ties likewise */
      uint16_t b = (uint16_t)(r % 0x7f7f);
      double lo = b_dec(b), ulp = b_dec((uint16_t)(b + 1)) - lo;
      v = lo + ulp / 2 + (r >> 40 & 1 ? ulp * 0x1p-30 * (r >> 63 ? 1 : -1) : 0);
      break;
    }
    default: /* any double from 2^-160 to 2^140 */
      v = ldexp((double)(r >> 11) * 0x1p-53 + 0.5, (int)(rnd64() % 300) - 160);
    }
    xs[NEDGES + i] = r >> 62 & 1 ? -v : v;
  }
  /* the references (GCC's _Float16 converts correctly rounded), and the
   * helpers' way back */
  for (uint32_t h = 0; h < 65536; h++) {
    uint16_t hb = (uint16_t)h;
    if (!h_nan(hb) && h_enc(h_dec(hb)) != h)
      fail_msg("reference: f16 0x%04x round trip", h);
#ifdef __FLT16_MANT_DIG__
    _Float16 g;
    memcpy(&g, &hb, 2);
    if (!same_d((double)g, h_dec(hb)))
      fail_msg("reference: f16 0x%04x is %a, _Float16 says %a", h, h_dec(hb),
               (double)g);
#endif
    if (!same_d(xpj_f16_to_double(hb), h_dec(hb)))
      fail_msg("xpj_f16_to_double(0x%04x) = %a, want %a", h,
               xpj_f16_to_double(hb), h_dec(hb));
    if (!same_d(xpj_bf16_to_double(hb), b_dec(hb)))
      fail_msg("xpj_bf16_to_double(0x%04x) = %a, want %a", h,
               xpj_bf16_to_double(hb), b_dec(hb));
  }
  for (size_t i = 0; i < NEDGES + NR; i++) {
    double x = xs[i];
#ifdef __FLT16_MANT_DIG__
    volatile double vx = x;
    _Float16 g = (_Float16)vx;
    uint16_t gb;
    memcpy(&gb, &g, 2);
    if (!h_same(h16(x), gb))
      fail_msg("reference: f16 of %a: 0x%04x, _Float16 says 0x%04x", x,
               h16(x), gb);
#endif
    if (!b_same(b16(x), bf16_bits_of(to_odd(x))))
      fail_msg("reference: bf16 of %a: 0x%04x, through round-to-odd 0x%04x",
               x, b16(x), bf16_bits_of(to_odd(x)));
    if (!b_same(b16((double)(float)x), bf16_bits_of((float)x)))
      fail_msg("reference: bf16 of f32 %a", (double)(float)x);
  }
  /* the two examples of double rounding */
  assert_int_equal(h16(1 + 0x1p-11 + 0x1p-40), 0x3c01);
  assert_int_equal(h16((float)(1 + 0x1p-11 + 0x1p-40)), 0x3c00);
  assert_int_equal(b16(1 + 0x1p-8 + 0x1p-40), 0x3f81);
  assert_int_equal(b16((float)(1 + 0x1p-8 + 0x1p-40)), 0x3f80);
  int bad = 0;
  for (size_t i = 0; i < NEDGES + NR; i++) {
    double x = xs[i];
    uint16_t g = xpj_f16_from_double(x), w = h16(x);
    if (!h_same(g, w) && bad++ < 5)
      fprintf(stderr, "  xpj_f16_from_double(%a) = 0x%04x, want 0x%04x\n", x,
              g, w);
    if (isnan(x) && (g & 0x7e00) != 0x7e00 && bad++ < 5)
      fprintf(stderr, "  xpj_f16_from_double(NaN) = 0x%04x: not a quiet NaN\n",
              g);
    g = xpj_bf16_from_double(x), w = b16(x);
    if (!b_same(g, w) && bad++ < 5)
      fprintf(stderr, "  xpj_bf16_from_double(%a) = 0x%04x, want 0x%04x\n", x,
              g, w);
    if (isnan(x) && (g & 0x7fc0) != 0x7fc0 && bad++ < 5)
      fprintf(stderr, "  xpj_bf16_from_double(NaN) = 0x%04x: not a quiet "
                      "NaN\n", g);
  }
  free(xs);
  if (bad)
    fail_msg("host helpers: %d wrong roundings", bad);
}

/* ---- casts ------------------------------------------------------------- */

typedef struct ty {
  const char *name;
  xpj_scalar s;
  unsigned bytes;
  char k; /* b bool, i signed, u unsigned, f f32/f64, h f16, g bf16 */
} ty;

static const ty TY[] = {
    {"bool", XPJ_BOOL, 1, 'b'}, {"i8", XPJ_I8, 1, 'i'},
    {"i16", XPJ_I16, 2, 'i'},   {"i32", XPJ_I32, 4, 'i'},
    {"i64", XPJ_I64, 8, 'i'},   {"u8", XPJ_U8, 1, 'u'},
    {"u16", XPJ_U16, 2, 'u'},   {"u32", XPJ_U32, 4, 'u'},
    {"u64", XPJ_U64, 8, 'u'},   {"f32", XPJ_F32, 4, 'f'},
    {"f64", XPJ_F64, 8, 'f'},   {"f16", XPJ_F16, 2, 'h'},
    {"bf16", XPJ_BF16, 2, 'g'}};
#define NTY (sizeof TY / sizeof *TY)

/* a source element: its exact value (f) and, for integers, the integer */
typedef struct sval {
  double f;
  int64_t i;  /* signed and bool */
  uint64_t u; /* unsigned */
} sval;

static sval ld_src(const ty *t, const void *base, size_t k) {
  const uint8_t *p = (const uint8_t *)base + k * t->bytes;
  sval v = {0, 0, 0};
  uint16_t h;
  switch (t->k) {
  case 'b':
  case 'i':
    v.i = conf_load_int(p, t->bytes, 1);
    v.f = (double)v.i;
    break;
  case 'u':
    v.u = (uint64_t)conf_load_int(p, t->bytes, 0);
    v.f = (double)v.u;
    break;
  case 'f':
    if (t->bytes == 4) {
      float f;
      memcpy(&f, p, 4);
      v.f = f;
    } else {
      memcpy(&v.f, p, 8);
    }
    break;
  default:
    memcpy(&h, p, 2);
    v.f = t->k == 'h' ? h_dec(h) : b_dec(h);
  }
  return v;
}

/* the integer of type t (bits) nearest to r in magnitude below 2^24 */
static void st_int(const ty *t, void *base, size_t k, int64_t r) {
  uint8_t *p = (uint8_t *)base + k * t->bytes;
  if (t->k == 'u' && t->bytes >= 4 && r < 0)
    r = -r;
  memcpy(p, &r, t->bytes);
}

static bool fits(const ty *t, int64_t v) {
  unsigned w = t->bytes * 8;
  if (t->k == 'u')
    return v >= 0 && (w == 64 || v < (int64_t)1 << (w > 62 ? 62 : w));
  return w == 64 ||
         (v >= -((int64_t)1 << (w - 1)) && v < (int64_t)1 << (w - 1));
}

/* a float source for destination d (f16 or bf16): ties, near-ties (by an
 * f32 ulp, and for f64 by 2^-30 ulp: invisible through f32), random
 * values in d's range and random bits */
static double gen_float(const ty *s, const ty *d) {
  bool f64 = s->bytes == 8, tof16 = d->k == 'h';
  uint64_t r = rnd64();
  unsigned q = (unsigned)(r % 10);
  double v;
  if (q < 6) {
    double lo, ulp;
    if (tof16) {
      uint16_t h = (uint16_t)(rnd64() % 0x7bff);
      lo = h_dec(h), ulp = h_dec((uint16_t)(h + 1)) - lo;
    } else {
      uint16_t b = (uint16_t)(rnd64() % 0x7f7f);
      lo = b_dec(b), ulp = b_dec((uint16_t)(b + 1)) - lo;
    }
    v = lo + ulp / 2;
    if (q >= 2) {
      double dir = r >> 20 & 1 ? 1 : -1;
      if (f64 && q >= 4)
        v += dir * ulp * 0x1p-30;
      else
        v = nextafterf((float)v, dir > 0 ? INFINITY : -INFINITY);
    }
  } else if (q < 9) {
    int e = tof16 ? (int)(rnd64() % 46) - 28 : (int)(rnd64() % 280) - 150;
    v = ldexp((double)(rnd64() >> 11) * 0x1p-53 + 0.5, e);
  } else if (f64) {
    v = ldexp((double)(rnd64() >> 11) * 0x1p-53 + 0.5,
              (int)(rnd64() % 2000) - 1000);
  } else {
    uint32_t u = (uint32_t)rnd64();
    float f;
    memcpy(&f, &u, 4);
    v = f;
  }
  v = r >> 63 ? -v : v;
  return f64 ? v : (double)(float)v;
}

/* fills n source elements of s for the pair (s, d); returns n */
static size_t gen_cast_src(const ty *s, const ty *d, void *src) {
  static const int64_t iedges[] = {
      0,     1,     2,      3,      -1,     -2,      7,        100,
      127,   -128,  255,    256,    257,    259,     385,      1023,
      2047,  2048,  2049,   2050,   2051,   4095,    4097,     32767,
      -32768, -32767, 65504, 65519, 65520,  65535,   65536,    -65504,
      -65519, -65520, 100000, 16777215, -16777215, 16777213, 8388609};
  size_t n = 0;
  switch (s->k) {
  case 'h':
  case 'g':
    for (uint32_t h = 0; h < 65536; h++)
      ((uint16_t *)src)[n++] = (uint16_t)h;
    return n;
  case 'b':
    for (; n < 64; n++)
      ((uint8_t *)src)[n] = (uint8_t)(n % 3 == 1);
    return n;
  case 'i':
  case 'u':
    for (size_t e = 0; e < sizeof iedges / sizeof *iedges; e++)
      if (fits(s, iedges[e]))
        st_int(s, src, n++, iedges[e]);
    while (n < 4096) {
      int64_t r = rnd64() % 2 ? (int64_t)(rnd64() % 601) - 300
                              : (int64_t)(rnd64() % (1u << 25)) - (1 << 24) + 1;
      st_int(s, src, n++, r); /* wraps in narrow types: still below 2^24 */
    }
    return n;
  default:
    for (size_t e = 0; e < NEDGES; e++) {
      double v = s->bytes == 4 ? (double)(float)edges[e] : edges[e];
      if (s->bytes == 4)
        ((float *)src)[n++] = (float)v;
      else
        ((double *)src)[n++] = v;
    }
    if (s->bytes == 4) { /* NaNs whose payload is in the low bits only */
      static const uint32_t nans[] = {0x7f800001, 0xff800001, 0x7fa00000,
                                      0x7f80ffff};
      memcpy((float *)src + n, nans, sizeof nans);
      n += sizeof nans / sizeof *nans;
    } else {
      static const uint64_t nans[] = {0x7ff0000000000001, 0xfff0000000000001,
                                      0x7ff0000100000000};
      memcpy((double *)src + n, nans, sizeof nans);
      n += sizeof nans / sizeof *nans;
    }
    while (n < 4096) {
      double v = gen_float(s, d);
      if (s->bytes == 4)
        ((float *)src)[n++] = (float)v;
      else
        ((double *)src)[n++] = v;
    }
    return n;
  }
}

static void show(char *buf, size_t len, const ty *t, const void *base,
                 size_t k) {
  const uint8_t *p = (const uint8_t *)base + k * t->bytes;
  sval v = ld_src(t, base, k);
  uint16_t h;
  if (t->k == 'h' || t->k == 'g') {
    memcpy(&h, p, 2);
    snprintf(buf, len, "%a (0x%04x)", v.f, h);
  } else if (t->k == 'f') {
    snprintf(buf, len, "%a", v.f);
  } else if (t->k == 'u') {
    snprintf(buf, len, "%llu", (unsigned long long)v.u);
  } else {
    snprintf(buf, len, "%lld", (long long)v.i);
  }
}

/* checks y[k] = D(x[k]); returns false with want written out if not
 * (true also for out-of-range float -> integer, which is unspecified) */
static bool check_cast(const ty *s, const ty *d, const void *x, const void *y,
                       size_t k, char *want, size_t wl) {
  sval v = ld_src(s, x, k);
  const uint8_t *p = (const uint8_t *)y + k * d->bytes;
  bool sint = s->k == 'i' || s->k == 'u' || s->k == 'b';
  switch (d->k) {
  case 'h':
  case 'g': {
    uint16_t got, w;
    memcpy(&got, p, 2);
    double val = s->k == 'u' ? (double)v.u : sint ? (double)v.i : v.f;
    w = d->k == 'h' ? h16(val) : b16(val);
    snprintf(want, wl, "%a (0x%04x)", d->k == 'h' ? h_dec(w) : b_dec(w), w);
    return d->k == 'h' ? h_same(got, w) : b_same(got, w);
  }
  case 'f': {
    double got;
    if (d->bytes == 4) {
      float f;
      memcpy(&f, p, 4);
      got = f;
    } else {
      memcpy(&got, p, 8);
    }
    snprintf(want, wl, "%a", v.f);
    if (isnan(v.f))
      return isnan(got);
    return got == v.f && signbit(got) == signbit(v.f);
  }
  case 'b':
    snprintf(want, wl, "%d", v.f != 0);
    return *p == (v.f != 0);
  default: {
    if (isnan(v.f))
      return true;
    double t = trunc(v.f);
    unsigned w = d->bytes * 8;
    if (d->k == 'u') {
      if (!(t >= 0 && t < ldexp(1, (int)w)))
        return true;
      uint64_t got = (uint64_t)conf_load_int(p, d->bytes, 0);
      snprintf(want, wl, "%llu", (unsigned long long)(uint64_t)t);
      return got == (uint64_t)t;
    }
    if (!(t >= -ldexp(1, (int)w - 1) && t < ldexp(1, (int)w - 1)))
      return true;
    int64_t got = conf_load_int(p, d->bytes, 1);
    snprintf(want, wl, "%lld", (long long)(int64_t)t);
    return got == (int64_t)t;
  }
  }
}

/* every (S, D) with f16 or bf16 on one side, identities included */
static void test_casts(void **state) {
  (void)state;
  void *x = conf_alloc(65536 * 8), *y = conf_alloc(65536 * 8);
  char failed[1024] = "";
  int nfailed = 0, npairs = 0;
  for (size_t a = 0; a < NTY; a++)
    for (size_t b = 0; b < NTY; b++) {
      const ty *s = &TY[a], *d = &TY[b];
      if (s->k != 'h' && s->k != 'g' && d->k != 'h' && d->k != 'g')
        continue;
      npairs++;
      char dt[32];
      snprintf(dt, sizeof dt, "S=%s,D=%s", s->name, d->name);
      xpj_kernel *k = conf_kernel("half.xpk", "cast", dt, 0);
      size_t n = gen_cast_src(s, d, x);
      memset(y, 0x5a, n * d->bytes);
      xpj_array ax = xpj_array_1d(x, s->s, (int64_t)n);
      xpj_array ay = xpj_array_1d(y, d->s, (int64_t)n);
      xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ay)};
      conf_run(k, xpj_range_1d(n, 0), 2, args);
      size_t bad = 0;
      for (size_t i = 0; i < n; i++) {
        char want[64], xs[64], got[64];
        if (check_cast(s, d, x, y, i, want, sizeof want))
          continue;
        if (bad++ < 4) {
          show(xs, sizeof xs, s, x, i);
          show(got, sizeof got, d, y, i);
          fprintf(stderr, "  cast %s -> %s [%zu]: x = %s: got %s, want %s\n",
                  s->name, d->name, i, xs, got, want);
        }
      }
      if (bad) {
        fprintf(stderr, "cast %s -> %s: %zu of %zu wrong\n", s->name, d->name,
                bad, n);
        nfailed++;
        size_t l = strlen(failed);
        snprintf(failed + l, sizeof failed - l, " %s->%s", s->name, d->name);
      }
    }
  assert_int_equal(npairs, 48);
  conf_free(x);
  conf_free(y);
  if (nfailed)
    fail_msg("casts: %d of %d pairs wrong:%s", nfailed, npairs, failed);
}

/* ---- arithmetic, literals, parameters, limits -------------------------- */

static const double arith_pairs[][2] = {
    {INFINITY, -INFINITY}, {INFINITY, INFINITY}, {0, 0},     {1, 0},
    {-1, 0},               {1, -0.0},            {65504, 65504},
    {65504, 16},           {65504, 15},          {2048, 1},  {2048, 3},
    {0x1p-24, 0.5},        {0x1.8p-23, 0.5},     {1, 0x1p-11},
    {1, 0x1.8p-10},        {0.0, -0.0},          {-0.0, -0.0},
    {1, 1},                {NAN, 1},             {1, NAN},   {1, 3},
    {-7, 3},               {0x1p-14, 0x1p-10},   {3, 0x1p-14},
    {1000, 0x1p-5},        {2, 2},               {-2, 2},    {0.1, 0.1}};

/* a (f16 bits) op b as the reference: op 0..7 as arith's o[i, op] */
static uint16_t arith_ref(int op, uint16_t ha, uint16_t hb) {
  double a = h_dec(ha), b = h_dec(hb);
  switch (op) {
  case 0: return h16(a + b);
  case 1: return h16(a - b);
  case 2: return h16(a * b);
  case 3: return h16(a / b);
  case 4: return h_nan(ha) ? 0x7e00 : ha ^ 0x8000;
  case 5: return h16(r16(a * r16(0.1)) + 1);
  case 6: return h16(r16(a + b) * b);
  default: return h16(r16(a * b) + a);
  }
}

static int cmp_ref(double a, double b) {
  return (a < b) | (a <= b) << 1 | (a == b) << 2 | (a != b) << 3 |
         (a > b) << 4 | (a >= b) << 5;
}

static void test_arith(void **state) {
  (void)state;
  static const char *const opn[] = {"a + b", "a - b", "a * b", "a / b", "-a",
                                    "a * 0.1 + 1", "(a + b) * b",
                                    "a * b + a"};
  xpj_kernel *k = conf_kernel("half.xpk", "arith", "T=f16", 0);
  const size_t np = sizeof arith_pairs / sizeof *arith_pairs, n = 65536 + np;
  uint16_t *x = conf_alloc(n * 2), *y = conf_alloc(n * 2),
           *o = conf_alloc(n * 8 * 2);
  int32_t *c = conf_alloc(n * 4);
  for (size_t i = 0; i < n; i++) {
    if (i < np) {
      x[i] = h16(arith_pairs[i][0]);
      y[i] = h16(arith_pairs[i][1]);
    } else if (i % 4 == 0) { /* close magnitudes: cancellation and ties */
      x[i] = rnd_hmix();
      y[i] = (uint16_t)((x[i] & 0x7c00) | (rnd64() & 0x83ff));
    } else {
      x[i] = rnd_hmix();
      y[i] = rnd_hmix();
    }
  }
  xpj_array ax = arr16(x, XPJ_F16, n), ay = arr16(y, XPJ_F16, n);
  xpj_array ao = xpj_array_2d(o, XPJ_F16, (int64_t)n, 8);
  xpj_array ac = xpj_array_1d(c, XPJ_I32, (int64_t)n);
  xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ay),
                    xpj_arg_array(&ao), xpj_arg_array(&ac)};
  conf_run(k, xpj_range_1d(n, 0), 4, args);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    for (int op = 0; op < 8; op++) {
      uint16_t got = o[i * 8 + (size_t)op], w = arith_ref(op, x[i], y[i]);
      if (!h_same(got, w) && bad++ < 10)
        fprintf(stderr, "  f16 %s: a = %a (0x%04x), b = %a (0x%04x): got %a "
                "(0x%04x), want %a (0x%04x)\n", opn[op], h_dec(x[i]), x[i],
                h_dec(y[i]), y[i], h_dec(got), got, h_dec(w), w);
    }
    int w = cmp_ref(h_dec(x[i]), h_dec(y[i]));
    if (c[i] != w && bad++ < 10)
      fprintf(stderr, "  f16 compare %a (0x%04x), %a (0x%04x): bits 0x%x, "
              "want 0x%x (1 <, 2 <=, 4 ==, 8 !=, 16 >, 32 >=)\n",
              h_dec(x[i]), x[i], h_dec(y[i]), y[i], (unsigned)c[i],
              (unsigned)w);
  }
  conf_free_all(x, y, o, c, NULL);
  if (bad)
    fail_msg("f16 arithmetic on %s: %zu wrong results", C.info.target, bad);
}

/* y = a * x + y with an f16 parameter (rounded from a double by the
 * runtime), on a whole array and on a view at an odd 2-byte offset; the
 * argument checks; bf16 refused for the arithmetic at specialisation */
static void test_axpy(void **state) {
  (void)state;
  xpj_kernel *k = conf_kernel("half.xpk", "axpy", "T=f16", 0);
  xpj_kernel_arg_info ai;
  assert_int_equal(xpj_kernel_get_arg_info(k, 0, &ai), XPJ_OK);
  assert_int_equal(ai.dtype, XPJ_F16);
  assert_int_equal(ai.kind, XPJ_ARG_SCALAR);
  assert_int_equal(xpj_kernel_get_arg_info(k, 1, &ai), XPJ_OK);
  assert_int_equal(ai.dtype, XPJ_F16);
  const size_t n = 4099;
  uint16_t *x = conf_alloc(n * 2), *y = conf_alloc(n * 2), *y0 = malloc(n * 2);
  assert_non_null(y0);
  static const double as[] = {0.1, 1 + 0x1p-11 + 0x1p-40, -3.7, 65519};
  for (size_t t = 0; t < 2 * sizeof as / sizeof *as; t++) {
    double av = as[t / 2];
    int64_t off = (int64_t)(t % 2); /* the view from element 1 */
    for (size_t i = 0; i < n; i++) {
      x[i] = rnd_h(8, 20);
      y[i] = y0[i] = rnd_h(8, 22);
    }
    xpj_array ax = arr16(x, XPJ_F16, n), ay = arr16(y, XPJ_F16, n);
    ax.offset = ay.offset = off;
    ax.shape[0] = ay.shape[0] = (int64_t)n - off;
    xpj_arg args[] = {xpj_arg_f16(av), xpj_arg_array(&ax), xpj_arg_array(&ay)};
    conf_run(k, xpj_range_1d(n - (size_t)off, 0), 3, args);
    double a = r16(av);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
      uint16_t w = (int64_t)i < off ? y0[i]
                                    : h16(r16(a * h_dec(x[i])) + h_dec(y0[i]));
      if (!h_same(y[i], w) && bad++ < 5)
        fprintf(stderr, "  axpy<f16> a = %a (from %a), x = %a, y = %a [%zu]: "
                "got %a (0x%04x), want %a (0x%04x)\n", a, av, h_dec(x[i]),
                h_dec(y0[i]), i, h_dec(y[i]), y[i], h_dec(w), w);
    }
    if (bad)
      fail_msg("axpy<f16> (a = %a, offset %lld): %zu wrong", av,
               (long long)off, bad);
  }
  /* arguments of the wrong types */
  xpj_array ax = arr16(x, XPJ_F16, n), ay = arr16(y, XPJ_F16, n);
  xpj_array af = xpj_array_1d(x, XPJ_F32, (int64_t)n / 2);
  xpj_array ab = arr16(y, XPJ_BF16, n);
  xpj_arg bad1[] = {xpj_arg_f32(0.5f), xpj_arg_array(&ax), xpj_arg_array(&ay)};
  xpj_arg bad2[] = {xpj_arg_bf16(0.5), xpj_arg_array(&ax), xpj_arg_array(&ay)};
  xpj_arg bad3[] = {xpj_arg_f16(0.5), xpj_arg_array(&af), xpj_arg_array(&ay)};
  xpj_arg bad4[] = {xpj_arg_f16(0.5), xpj_arg_array(&ax), xpj_arg_array(&ab)};
  const xpj_arg *bads[] = {bad1, bad2, bad3, bad4};
  for (int b = 0; b < 4; b++) {
    xpj_range r = xpj_range_1d(n, 0);
    xpj_status st = xpj_launch(C.q, k, &r, 3, bads[b], NULL);
    if (st != XPJ_ERR_INVALID)
      fail_msg("axpy<f16> with a wrongly typed argument (case %d): %s, want "
               "XPJ_ERR_INVALID", b + 1, xpj_status_name(st));
  }
  assert_int_equal(xpj_queue_wait(C.q), XPJ_OK);
  conf_free(x);
  conf_free(y);
  free(y0);
}

static void test_literals(void **state) {
  (void)state;
  xpj_kernel *k = conf_kernel("half.xpk", "lits", NULL, 0);
  const size_t n = 1000;
  uint16_t *x = conf_alloc(n * 2), *o = conf_alloc(n * 5 * 2),
           *b = conf_alloc(n * 5 * 2);
  for (size_t i = 0; i < n; i++)
    x[i] = i < 4 ? h16((double[]){1.0, -0.0, 1.5, 2049}[i]) : rnd_h(8, 24);
  xpj_array ax = arr16(x, XPJ_F16, n);
  xpj_array ao = xpj_array_2d(o, XPJ_F16, (int64_t)n, 5);
  xpj_array ab = xpj_array_2d(b, XPJ_BF16, (int64_t)n, 5);
  xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ao),
                    xpj_arg_array(&ab)};
  conf_run(k, xpj_range_1d(n, 0), 3, args);
  static const char *const on[] = {"v * 0.5 + 1.5f16", "let h: f16 = 0.1",
                                   "0 + v * h (private array)",
                                   "1.000488281250909", "v > 1.0 ? v : -v"};
  static const char *const bn[] = {"let z: bf16 = 1.5", "0.25",
                                   "1.0039062500009095", "bf16(v)", "0.1"};
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    double v = h_dec(x[i]), h = r16(0.1);
    uint16_t wo[5] = {h16(r16(v * 0.5) + 1.5), h16(0.1), h16(0.0 + r16(v * h)),
                      0x3c01, h16(v > 1.0 ? v : -v)};
    uint16_t wb[5] = {0x3fc0, 0x3e80, 0x3f81, b16(v), b16(0.1)};
    for (int j = 0; j < 5; j++) {
      uint16_t g = o[i * 5 + (size_t)j];
      if (!h_same(g, wo[j]) && bad++ < 10)
        fprintf(stderr, "  lits f16 %s, v = %a: got %a (0x%04x), want %a "
                "(0x%04x)\n", on[j], v, h_dec(g), g, h_dec(wo[j]), wo[j]);
      g = b[i * 5 + (size_t)j];
      if (!b_same(g, wb[j]) && bad++ < 10)
        fprintf(stderr, "  lits bf16 %s, v = %a: got %a (0x%04x), want %a "
                "(0x%04x)\n", bn[j], v, b_dec(g), g, b_dec(wb[j]), wb[j]);
    }
  }
  conf_free_all(x, o, b, NULL);
  if (bad)
    fail_msg("literals: %zu wrong", bad);
}

/* scalar f16 and bf16 parameters, rounded from doubles by the runtime */
static void test_params(void **state) {
  (void)state;
  static const double v[][2] = {
      {0.1, 0.3},
      {1 + 0x1p-11 + 0x1p-40, 1 + 0x1p-8 + 0x1p-40},
      {65519, 0x1.fefffffffffffp127},
      {65520, 1e39},
      {-0.0, -0.0},
      {0x1.8p-23, 0x1p-133},
      {1e-8, 0x1p-134},
      {NAN, NAN},
      {-INFINITY, INFINITY},
      {2049, 257},
      {-2051, 385}};
  xpj_kernel *k = conf_kernel("half.xpk", "params", NULL, 0);
  xpj_kernel_arg_info ai;
  assert_int_equal(xpj_kernel_get_arg_info(k, 0, &ai), XPJ_OK);
  assert_int_equal(ai.dtype, XPJ_F16);
  assert_int_equal(xpj_kernel_get_arg_info(k, 1, &ai), XPJ_OK);
  assert_int_equal(ai.dtype, XPJ_BF16);
  assert_int_equal(xpj_kernel_get_arg_info(k, 3, &ai), XPJ_OK);
  assert_int_equal(ai.dtype, XPJ_BF16);
  uint16_t *o = conf_alloc(4), *ob = conf_alloc(4);
  xpj_array ao = arr16(o, XPJ_F16, 2), ab = arr16(ob, XPJ_BF16, 2);
  size_t bad = 0;
  for (size_t t = 0; t < sizeof v / sizeof *v; t++) {
    xpj_arg args[] = {xpj_arg_f16(v[t][0]), xpj_arg_bf16(v[t][1]),
                      xpj_arg_array(&ao), xpj_arg_array(&ab)};
    memset(o, 0x5a, 4);
    memset(ob, 0x5a, 4);
    conf_run(k, xpj_range_1d(1, 0), 4, args);
    double a = r16(v[t][0]), b = rbf(v[t][1]);
    uint16_t w[4] = {h16(a), h16(a + a), b16(b), b16((double)((float)b * 2))};
    uint16_t g[4] = {o[0], o[1], ob[0], ob[1]};
    for (int j = 0; j < 4; j++)
      if (!(j < 2 ? h_same(g[j], w[j]) : b_same(g[j], w[j])) && bad++ < 10)
        fprintf(stderr, "  params a = xpj_arg_f16(%a), b = xpj_arg_bf16(%a): "
                "%s = 0x%04x, want 0x%04x\n", v[t][0], v[t][1],
                (const char *[]){"o[0] = a", "o[1] = a + a", "ob[0] = b",
                                 "ob[1] = bf16(f32(b) * 2)"}[j], g[j], w[j]);
  }
  conf_free(o);
  conf_free(ob);
  if (bad)
    fail_msg("scalar parameters: %zu wrong", bad);
}

static void test_limits(void **state) {
  (void)state;
  xpj_kernel *k = conf_kernel("half.xpk", "hlimits", "T=f16", 0);
  uint16_t *out = conf_alloc(16);
  int32_t *f = conf_alloc(11 * 4);
  memset(out, 0x5a, 16);
  memset(f, 0x5a, 44);
  xpj_array ao = arr16(out, XPJ_F16, 8);
  xpj_array af = xpj_array_1d(f, XPJ_I32, 11);
  xpj_arg args[] = {xpj_arg_array(&ao), xpj_arg_array(&af)};
  conf_run(k, xpj_range_1d(1, 0), 2, args);
  static const uint16_t w[8] = {0x7bff, 0xfbff, 0x0400, 0x1400,
                                0x7c00, 0x7e00, 0xfc00, 0x7bff};
  static const char *const names[8] = {
      "max_value", "min_value", "min_positive", "epsilon", "infinity",
      "nan",       "-infinity", "max_value(f16)"};
  static const char *const rel[11] = {
      "1 + eps > 1",       "1 + eps / 2 == 1 (tie to even)",
      "max * 2 == inf",    "max + 16 == inf (tie to even)",
      "max + 15 == max",   "min_positive / 1024 > 0 (subnormal)",
      "min_positive / 2048 == 0 (tie to even)",
      "min_positive / 1024 * 1.5 == min_positive / 512 (subnormal tie)",
      "isnan(nan)",        "nan != nan", "-inf < min_value"};
  int bad = 0;
  for (int i = 0; i < 8; i++)
    if (!h_same(out[i], w[i]) && ++bad)
      fprintf(stderr, "  %s(f16) = 0x%04x, want 0x%04x\n", names[i], out[i],
              w[i]);
  for (int i = 0; i < 11; i++)
    if (f[i] != 1 && ++bad)
      fprintf(stderr, "  f16: %s is false (%d)\n", rel[i], f[i]);
  conf_free(out);
  conf_free(f);
  if (bad)
    fail_msg("f16 limits: %d wrong", bad);
}

/* ---- math builtins ----------------------------------------------------- */

static float rsqrt_f(float x) { return 1.0f / sqrtf(x); }

typedef struct mfn {
  const char *name;
  float (*f)(float);
  int exact; /* 1: bit for bit */
} mfn;

/* in the order of hmath1's columns */
static const mfn math1[] = {
    {"sqrt", sqrtf, 1},   {"rsqrt", rsqrt_f, 0}, {"cbrt", cbrtf, 0},
    {"exp", expf, 0},     {"exp2", exp2f, 0},    {"expm1", expm1f, 0},
    {"log", logf, 0},     {"log2", log2f, 0},    {"log10", log10f, 0},
    {"log1p", log1pf, 0}, {"sin", sinf, 0},      {"cos", cosf, 0},
    {"tan", tanf, 0},     {"asin", asinf, 0},    {"acos", acosf, 0},
    {"atan", atanf, 0},   {"sinh", sinhf, 0},    {"cosh", coshf, 0},
    {"tanh", tanhf, 0},   {"fabs", fabsf, 1},    {"floor", floorf, 1},
    {"ceil", ceilf, 1},   {"round", roundf, 1},  {"trunc", truncf, 1},
    {"erf", erff, 0},     {"erfc", erfcf, 0},    {"lgamma", lgammaf, 0},
    {"tgamma", tgammaf, 0}};
#define NMATH1 (sizeof math1 / sizeof *math1)

/* the bound in f16 ulps from the f32 function rounded to f16: 1 on the
 * CPU device (which evaluates in f32 too), 2 elsewhere (the device's own
 * f32 functions within their ulp bounds, each side 1 from the exact) */
static int math_bound(int exact) { return exact ? 0 : on_cpu() ? 1 : 2; }

/* every f16 input, every one-argument function */
static void test_math1(void **state) {
  (void)state;
  xpj_kernel *k = conf_kernel("half.xpk", "hmath1", NULL, 0);
  const size_t n = 65536, nf = NMATH1;
  uint16_t *x = conf_alloc(n * 2), *o = conf_alloc(n * nf * 2);
  int32_t *c = conf_alloc(n * 4);
  for (size_t i = 0; i < n; i++)
    x[i] = (uint16_t)i;
  xpj_array ax = arr16(x, XPJ_F16, n);
  xpj_array ao = xpj_array_2d(o, XPJ_F16, (int64_t)n, (int64_t)nf);
  xpj_array ac = xpj_array_1d(c, XPJ_I32, (int64_t)n);
  xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ao),
                    xpj_arg_array(&ac)};
  conf_run(k, xpj_range_1d(n, 0), 3, args);
  int failed = 0;
  for (size_t f = 0; f < nf; f++) {
    const mfn *fn = &math1[f];
    int bound = math_bound(fn->exact), worst = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
      double v = h_dec(x[i]);
      /* lgamma has no accuracy bound in OpenCL: off the CPU, positive
       * arguments away from its zeros at 1 and 2, as test_conformance_b */
      if (!strcmp(fn->name, "lgamma") && !on_cpu() && !isnan(v) &&
          (v <= 0 || fabs(v - 1) < 0.01 || fabs(v - 2) < 0.01))
        continue;
      uint16_t got = o[i * nf + f], w = h16((double)fn->f((float)v));
      int e = fn->exact ? (h_same(got, w) ? 0 : 1 << 20) : h_ulps(got, w);
      worst = e > worst ? e : worst;
      if (e > bound && bad++ < 3)
        fprintf(stderr, "  f16 %s(%a [0x%04x]) = %a [0x%04x], want %a "
                "[0x%04x] (%d ulp, bound %d)\n", fn->name, v, x[i],
                h_dec(got), got, h_dec(w), w, e, bound);
    }
    fprintf(stderr, "f16 %-7s worst %d ulp (bound %d)%s\n", fn->name,
            worst > 99 ? 99 : worst, bound, bad ? " FAILED" : "");
    failed += bad > 0;
  }
  for (size_t i = 0; i < n; i++) {
    double v = h_dec(x[i]);
    int w = (isnan(v) ? 1 : 0) | (isinf(v) ? 2 : 0) | (isfinite(v) ? 4 : 0);
    if (c[i] != w && failed++ < 3)
      fprintf(stderr, "  f16 classify 0x%04x: %d, want %d\n", x[i], c[i], w);
  }
  conf_free_all(x, o, c, NULL);
  if (failed)
    fail_msg("f16 math1 on %s: %d functions wrong", C.info.target, failed);
}

static float min_f(float a, float b) { return b < a ? b : a; }
static float max_f(float a, float b) { return b > a ? b : a; }

static void test_math2(void **state) {
  (void)state;
  static const char *const names[] = {"pow", "atan2", "hypot", "fmin",
                                      "fmax", "copysign", "fma", "min",
                                      "max", "clamp", "abs"};
  /* 0: 1 (2 off the CPU) ulp; 1: bit for bit; 2: value (+-0 either) */
  /* fma is rounded once (the reference: f64's fma of f16 inputs, exact
   * enough for every f16 result) */
  static const int kind[] = {0, 0, 0, 2, 2, 1, 1, 2, 2, 2, 1};
  const size_t nf = 11, n = 40000;
  xpj_kernel *k = conf_kernel("half.xpk", "hmath2", NULL, 0);
  uint16_t *x = conf_alloc(n * 2), *y = conf_alloc(n * 2),
           *z = conf_alloc(n * 2), *o = conf_alloc(n * nf * 2);
  for (size_t i = 0; i < n; i++) {
    switch (i % 4) {
    case 0: /* pow's interesting range: x in [0.25, 4), |y| < 16 */
      x[i] = rnd_h(13, 16) & 0x7fff;
      y[i] = rnd_h(0, 18);
      z[i] = rnd_hmix();
      break;
    case 1: /* fma: z cancels the rounded product */
      x[i] = rnd_h(8, 20);
      y[i] = rnd_h(8, 20);
      z[i] = h16(-r16(h_dec(x[i]) * h_dec(y[i])));
      break;
    default:
      x[i] = rnd_hmix();
      y[i] = i % 4 == 2 ? (uint16_t)rnd64() : rnd_hmix();
      z[i] = rnd_hmix();
    }
    if (i % 4 == 3 && i < 8000) {
      /* fma: a product exactly halfway between two f16 values, at least
       * 2 (so that the smallest subnormal z is below half an f32 ulp): z
       * decides the rounding, which an f32 fma would lose */
      for (;;) {
        x[i] = rnd_h(14, 17) & 0x7fff;
        y[i] = rnd_h(14, 17) & 0x7fff;
        double p = h_dec(x[i]) * h_dec(y[i]);
        int e;
        frexp(p, &e);
        double u = ldexp(1.0, e - 11); /* f16 ulp at p */
        if (p >= 2 && p < 32768 && fmod(p, u) == u / 2)
          break;
      }
      z[i] = i % 8 == 3 ? 0x0001 : 0x8001; /* +-2^-24 */
    }
  }
  xpj_array ax = arr16(x, XPJ_F16, n), ay = arr16(y, XPJ_F16, n),
            az = arr16(z, XPJ_F16, n);
  xpj_array ao = xpj_array_2d(o, XPJ_F16, (int64_t)n, (int64_t)nf);
  xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ay),
                    xpj_arg_array(&az), xpj_arg_array(&ao)};
  conf_run(k, xpj_range_1d(n, 0), 4, args);
  int failed = 0;
  for (size_t f = 0; f < nf; f++) {
    size_t bad = 0;
    int bound = math_bound(kind[f] != 0), worst = 0;
    for (size_t i = 0; i < n; i++) {
      float a = (float)h_dec(x[i]), b = (float)h_dec(y[i]),
            cz = (float)h_dec(z[i]), r;
      bool has_nan = isnan(a) || isnan(b);
      switch (f) {
      case 0: r = powf(a, b); break;
      case 1: r = atan2f(a, b); break;
      case 2: r = hypotf(a, b); break;
      case 3: r = fminf(a, b); break;
      case 4: r = fmaxf(a, b); break;
      case 5: r = copysignf(a, b); break;
      case 6: r = 0; break; /* below, in double */
      case 7: r = min_f(a, b); break;
      case 8: r = max_f(a, b); break;
      case 9: r = fminf(fmaxf(a, -fabsf(b)), fabsf(b)); break;
      default: r = fabsf(a);
      }
      if (has_nan && (f == 7 || f == 8 || f == 9))
        continue; /* min, max, clamp of NaN: unspecified */
      uint16_t got = o[i * nf + f],
               w = h16(f == 6 ? fma((double)a, (double)b, (double)cz)
                              : (double)r);
      int e = kind[f] == 1   ? (h_same(got, w) ? 0 : 1 << 20)
              : kind[f] == 2 ? (h_ulps(got, w) ? 1 << 20 : 0)
                             : h_ulps(got, w);
      worst = e > worst ? e : worst;
      if (e > bound && bad++ < 3)
        fprintf(stderr, "  f16 %s(%a, %a%s) = %a [0x%04x], want %a [0x%04x] "
                "(%d ulp, bound %d)\n", names[f], (double)a, (double)b,
                f == 6 ? ", z" : "", h_dec(got), got, h_dec(w), w, e, bound);
    }
    fprintf(stderr, "f16 %-8s worst %d ulp (bound %d)%s\n", names[f],
            worst > 99 ? 99 : worst, bound, bad ? " FAILED" : "");
    failed += bad > 0;
  }
  conf_free_all(x, y, z, o, NULL);
  if (failed)
    fail_msg("f16 math2 on %s: %d functions wrong", C.info.target, failed);
}

/* ---- atomics ----------------------------------------------------------- */

static int cmp_u16h(const void *a, const void *b) {
  double x = h_dec(*(const uint16_t *)a), y = h_dec(*(const uint16_t *)b);
  return x < y ? -1 : x > y;
}

/* vals[0..n) (f16) are exactly first, first + 1, ..., in some order */
static bool is_run(uint16_t *vals, size_t n, double first) {
  qsort(vals, n, 2, cmp_u16h);
  for (size_t i = 0; i < n; i++)
    if (h_dec(vals[i]) != first + (double)i)
      return false;
  return true;
}

static void test_atomics_global(void **state) {
  (void)state;
  xpj_kernel *k = conf_kernel("half.xpk", "hatomics", NULL, 0);
  for (int rep = 0; rep < 3; rep++) {
    const size_t n = rep == 0 ? 1500 : rep == 1 ? 7 : 2046;
    uint16_t *c = conf_alloc(16), *olds = conf_alloc(n * 2),
             *tok = conf_alloc(n * 2), *st = conf_alloc(n * 2),
             *ld = conf_alloc(n * 2), *tmp = malloc((n + 1) * 2);
    assert_non_null(tmp);
    static const double init[8] = {0, 0, 0, 0, 7.5, -1, -3.75, 1234};
    for (int j = 0; j < 8; j++)
      c[j] = h16(init[j]);
    for (size_t i = 0; i < n; i++)
      tok[i] = h16((double)i);
    xpj_array ac = arr16(c, XPJ_F16, 8), ao = arr16(olds, XPJ_F16, n),
              at = arr16(tok, XPJ_F16, n), as = arr16(st, XPJ_F16, n),
              al = arr16(ld, XPJ_F16, n);
    xpj_arg args[] = {xpj_arg_array(&ac), xpj_arg_array(&ao),
                      xpj_arg_array(&at), xpj_arg_array(&as),
                      xpj_arg_array(&al)};
    conf_run(k, xpj_range_1d(n, 0), 5, args);
    size_t n0 = (n + 2) / 3, n1 = (n + 1) / 3, n2 = n / 3;
    double w[8] = {(double)n0, -0.5 * (double)n1, 0.25 * (double)n,
                   (double)n2, 7.5, 0, -3.75, 1234};
    int bad = 0;
    for (int j = 0; j < 8; j++)
      if (j != 5 && !h_same(c[j], h16(w[j])) && ++bad)
        fprintf(stderr, "  hatomics n %zu: c[%d] = %a (0x%04x), want %a\n", n,
                j, h_dec(c[j]), c[j], w[j]);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
      if (i % 3 == 0)
        tmp[m++] = olds[i];
      else if (olds[i] != h16(-1) && ++bad)
        fprintf(stderr, "  hatomics: olds[%zu] = 0x%04x\n", i, olds[i]);
      if (st[i] != h16((double)i * 0.5) && ++bad)
        fprintf(stderr, "  hatomics: atomic_store st[%zu] = %a, want %a\n",
                i, h_dec(st[i]), (double)i * 0.5);
      if (ld[i] != h16(-3.75) && ++bad)
        fprintf(stderr, "  hatomics: atomic_load ld[%zu] = %a\n", i,
                h_dec(ld[i]));
    }
    if (!is_run(tmp, m, 0) && ++bad)
      fprintf(stderr, "  hatomics n %zu: atomic_add's old values are not "
              "0 .. %zu\n", n, m - 1);
    memcpy(tmp, tok, n * 2);
    tmp[n] = c[5];
    if (!is_run(tmp, n + 1, -1) && ++bad)
      fprintf(stderr, "  hatomics n %zu: the exchanged tokens and the slot "
              "are not -1 .. %zu\n", n, n - 1);
    conf_free_all(c, olds, tok, st, ld, NULL);
    free(tmp);
    if (bad)
      fail_msg("f16 atomics in global memory (n %zu): %d wrong", n, bad);
  }
}

static void test_atomics_local(void **state) {
  (void)state;
  xpj_kernel *k = conf_kernel("half.xpk", "hatomics_local", NULL, 0);
  static const unsigned Ls[] = {1, 7, 64, 256, 1000};
  const unsigned G = 3;
  for (size_t s = 0; s < sizeof Ls / sizeof *Ls; s++) {
    unsigned L = Ls[s];
    size_t n = (size_t)L * G;
    uint16_t *out = conf_alloc(G * 8 * 2), *olds = conf_alloc(n * 2),
             *tmp = malloc(L * 2);
    assert_non_null(tmp);
    xpj_array ao = xpj_array_2d(out, XPJ_F16, G, 8);
    xpj_array al = arr16(olds, XPJ_F16, n);
    xpj_arg args[] = {xpj_arg_array(&ao), xpj_arg_array(&al)};
    conf_run(k, xpj_range_1d(n, L), 2, args);
    int bad = 0;
    for (unsigned g = 0; g < G; g++) {
      for (unsigned j = 0; j < 8; j++) {
        unsigned cnt = 0;
        for (unsigned lid = 0; lid < L; lid++)
          cnt += j < 4 ? lid % 4 == j : j < 6 ? lid % 2 == j - 4 : 1;
        double w = j < 4 ? cnt : j < 6 ? 0.0 - 0.5 * cnt : j == 6 ? L : -3.75;
        uint16_t got = out[g * 8 + j];
        if (!h_same(got, h16(w)) && ++bad)
          fprintf(stderr, "  hatomics_local L %u group %u: l[%u] = %a, want "
                  "%a\n", L, g, j, h_dec(got), w);
        if (j >= 4)
          continue;
        size_t m = 0;
        for (unsigned lid = j; lid < L; lid += 4)
          tmp[m++] = olds[(size_t)g * L + lid];
        if (!is_run(tmp, m, 0) && ++bad)
          fprintf(stderr, "  hatomics_local L %u group %u: the old values of "
                  "l[%u] are not 0 .. %zu\n", L, g, j, m - 1);
      }
    }
    conf_free(out);
    conf_free(olds);
    free(tmp);
    if (bad)
      fail_msg("f16 atomics in local memory (L %u): %d wrong", L, bad);
  }
}

/* ---- collectives ------------------------------------------------------- */

/* Sums of f16 are accumulated in f32 and rounded once: got lies between
 * the roundings of S - d and S + d, S the exact sum (a double: exact for
 * these inputs), d the f32 error bound for any order (0 where every
 * partial sum is exact in f32). */
static bool sum_ok(uint16_t got, double S, double d) {
  double g = h_dec(got);
  return !isnan(g) && r16(S - d) <= g && g <= r16(S + d);
}

/* checks sums (and exclusive sums) of x over members[0..m) in that order */
static int check_sums(const char *what, const uint16_t *x, const size_t *mem,
                      unsigned m, const uint16_t *red, const uint16_t *inc,
                      const uint16_t *exc, bool exact) {
  double S = 0, A = 0;
  int bad = 0;
  for (unsigned j = 0; j < m; j++) {
    double v = h_dec(x[mem[j]]), d = exact ? 0 : 1.01 * j * 0x1p-24 * A;
    if (exc && !sum_ok(exc[mem[j]], S, d) && bad++ < 3)
      fprintf(stderr, "  %s exclusive sum [%zu]: %a, want %a (+- %g)\n", what,
              mem[j], h_dec(exc[mem[j]]), r16(S), d);
    S += v;
    A += fabs(v);
    d = exact ? 0 : 1.01 * (j + 1) * 0x1p-24 * A;
    if (inc && !sum_ok(inc[mem[j]], S, d) && bad++ < 3)
      fprintf(stderr, "  %s inclusive sum [%zu]: %a, want %a (+- %g)\n", what,
              mem[j], h_dec(inc[mem[j]]), r16(S), d);
  }
  double d = exact ? 0 : 1.01 * m * 0x1p-24 * A;
  for (unsigned j = 0; red && j < m; j++)
    if (!sum_ok(red[mem[j]], S, d) && bad++ < 3)
      fprintf(stderr, "  %s sum [%zu]: %a, want %a (+- %g)\n", what, mem[j],
              h_dec(red[mem[j]]), r16(S), d);
  return bad;
}

/* The sub-groups of group g (L work-items from g * L) as info reports
 * them: calls fn for each with its members in lane order. */
static int for_sub_groups(const int64_t *info, unsigned g, unsigned L,
                          size_t *mem,
                          int (*fn)(const size_t *mem, unsigned m, void *u),
                          void *u) {
  int bad = 0;
  unsigned covered = 0;
  for (int64_t sg = 0; covered < L; sg++) {
    unsigned m = 0;
    int64_t size = -1;
    for (unsigned j = 0; j < L; j++)
      mem[j] = SIZE_MAX;
    for (unsigned j = 0; j < L; j++) {
      size_t kk = (size_t)g * L + j;
      const int64_t *in = &info[kk * 3];
      if (in[1] != sg)
        continue;
      if (size < 0)
        size = in[0];
      if (in[0] != size || size > (int64_t)L || in[2] < 0 || in[2] >= size ||
          mem[in[2]] != SIZE_MAX)
        fail_msg("sub-group %lld of group %u: size %lld lane %lld (twice?)",
                 (long long)sg, g, (long long)in[0], (long long)in[2]);
      mem[in[2]] = kk;
      m++;
    }
    if (m == 0 || (int64_t)m != size || sg > (int64_t)L)
      fail_msg("group %u (L %u): sub-group %lld has %u work-items, reports "
               "size %lld", g, L, (long long)sg, m, (long long)size);
    covered += m;
    bad += fn(mem, m, u);
  }
  if (covered != L)
    fail_msg("group %u: the sub-groups hold %u of %u work-items", g, covered,
             L);
  return bad;
}

typedef struct subck {
  const char *what;
  const uint16_t *x, *red, *exc;
  bool exact;
} subck;

static int sub_sums(const size_t *mem, unsigned m, void *u) {
  const subck *s = u;
  return check_sums(s->what, s->x, mem, m, s->red, NULL, s->exc, s->exact);
}

static void run_hcoll(unsigned L, unsigned G, bool exact) {
  size_t n = (size_t)L * G;
  uint16_t *x = conf_alloc(n * 2), *a[7];
  for (int j = 0; j < 7; j++)
    a[j] = conf_alloc(n * 2);
  int64_t *info = conf_alloc(n * 3 * 8);
  for (size_t i = 0; i < n; i++) /* exact: multiples of 1/16 in [-16, 64] */
    x[i] = exact ? h16((double)((int)(rnd64() % 1281) - 256) / 16)
                 : rnd_h(1, 24);
  xpj_array ax = arr16(x, XPJ_F16, n), aa[7];
  int64_t ishape[2] = {(int64_t)n, 3};
  xpj_array ai = xpj_array_nd(info, XPJ_I64, 2, ishape);
  xpj_arg args[9];
  args[0] = xpj_arg_array(&ax);
  for (int j = 0; j < 7; j++) {
    aa[j] = arr16(a[j], XPJ_F16, n);
    args[1 + j] = xpj_arg_array(&aa[j]);
  }
  args[8] = xpj_arg_array(&ai);
  conf_run(conf_kernel("half.xpk", "hcoll", NULL, 0), xpj_range_1d(n, L), 9,
           args);
  uint16_t *red = a[0], *inc = a[1], *exc = a[2], *mn = a[3], *mx = a[4];
  size_t *mem = malloc(L * sizeof *mem);
  assert_non_null(mem);
  int bad = 0;
  char what[64];
  snprintf(what, sizeof what, "hcoll L %u (%s)", L, exact ? "exact" : "bound");
  for (unsigned g = 0; g < G; g++) {
    for (unsigned j = 0; j < L; j++)
      mem[j] = (size_t)g * L + j;
    bad += check_sums(what, x, mem, L, red, inc, exc, exact);
    double lo = INFINITY, hi = -INFINITY;
    for (unsigned j = 0; j < L; j++)
      lo = fmin(lo, h_dec(x[mem[j]]));
    for (unsigned j = 0; j < L; j++) {
      hi = fmax(hi, h_dec(x[mem[j]]));
      if (h_dec(mn[mem[j]]) != lo && bad++ < 3)
        fprintf(stderr, "  %s min [%zu]: %a, want %a\n", what, mem[j],
                h_dec(mn[mem[j]]), lo);
      if (h_dec(mx[mem[j]]) != hi && bad++ < 3)
        fprintf(stderr, "  %s inclusive max [%zu]: %a, want %a\n", what,
                mem[j], h_dec(mx[mem[j]]), hi);
    }
    subck sc = {"sub-group", x, a[5], a[6], exact};
    bad += for_sub_groups(info, g, L, mem, sub_sums, &sc);
  }
  free(mem);
  conf_free(x);
  for (int j = 0; j < 7; j++)
    conf_free(a[j]);
  conf_free(info);
  if (bad)
    fail_msg("f16 collectives (%s): %d wrong", what, bad);
}

static const unsigned coll_L[] = {1, 7, 64, 100, 256};

static void test_collectives(void **state) {
  (void)state;
  for (size_t s = 0; s < sizeof coll_L / sizeof *coll_L; s++) {
    run_hcoll(coll_L[s], 3, true);
    run_hcoll(coll_L[s], 3, false);
  }
}

/* work-group products (SPIR-V: SPV_KHR_uniform_group_instructions) of
 * +-1, +-2, +-0.5 and at most 8 of +-1.5: every partial
 * product is exact in f32, so the result is the exact product rounded */
static void test_collectives_mul(void **state) {
  (void)state;
  xpj_kernel *k = conf_kernel("half.xpk", "hmul", NULL, 0);
  static const double f[] = {1, -1, 1, -1, 1, 1, 2, -2, 0.5, -0.5, 1.5, -1.5};
  for (size_t s = 0; s < sizeof coll_L / sizeof *coll_L; s++) {
    unsigned L = coll_L[s], G = 3;
    size_t n = (size_t)L * G;
    uint16_t *x = conf_alloc(n * 2), *red = conf_alloc(n * 2),
             *inc = conf_alloc(n * 2), *exc = conf_alloc(n * 2);
    for (unsigned g = 0; g < G; g++)
      for (unsigned j = 0, thirds = 0; j < L; j++) {
        double v = f[rnd64() % 12];
        if (fabs(v) == 1.5 && ++thirds > 8)
          v = 1;
        x[(size_t)g * L + j] = h16(v);
      }
    xpj_array ax = arr16(x, XPJ_F16, n), ar = arr16(red, XPJ_F16, n),
              ai = arr16(inc, XPJ_F16, n), ae = arr16(exc, XPJ_F16, n);
    xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ar),
                      xpj_arg_array(&ai), xpj_arg_array(&ae)};
    conf_run(k, xpj_range_1d(n, L), 4, args);
    int bad = 0;
    for (unsigned g = 0; g < G; g++) {
      double P = 1, T = 1;
      for (unsigned j = 0; j < L; j++)
        T *= h_dec(x[(size_t)g * L + j]);
      for (unsigned j = 0; j < L; j++) {
        size_t kk = (size_t)g * L + j;
        if (!h_same(exc[kk], h16(P)) && bad++ < 3)
          fprintf(stderr, "  hmul L %u [%zu] exclusive: %a, want %a\n", L, kk,
                  h_dec(exc[kk]), r16(P));
        P *= h_dec(x[kk]);
        if (!h_same(inc[kk], h16(P)) && bad++ < 3)
          fprintf(stderr, "  hmul L %u [%zu] inclusive: %a, want %a\n", L, kk,
                  h_dec(inc[kk]), r16(P));
        if (!h_same(red[kk], h16(T)) && bad++ < 3)
          fprintf(stderr, "  hmul L %u [%zu] product: %a, want %a\n", L, kk,
                  h_dec(red[kk]), r16(T));
      }
    }
    conf_free_all(x, red, inc, exc, NULL);
    if (bad)
      fail_msg("f16 work-group products (L %u): %d wrong", L, bad);
  }
}

typedef struct mvck {
  const uint16_t *x, *sb, *sh;
  const char *t;
} mvck;

static int sub_moves(const size_t *mem, unsigned m, void *u) {
  const mvck *s = u;
  int bad = 0;
  for (unsigned j = 0; j < m; j++) {
    size_t kk = mem[j];
    if (s->sb[kk] != s->x[mem[0]] && bad++ < 3)
      fprintf(stderr, "  moves<%s> sub_group_broadcast [%zu]: 0x%04x, want "
              "0x%04x\n", s->t, kk, s->sb[kk], s->x[mem[0]]);
    if (s->sh[kk] != s->x[mem[m - 1 - j]] && bad++ < 3)
      fprintf(stderr, "  moves<%s> sub_group_shuffle [%zu]: 0x%04x, want "
              "0x%04x\n", s->t, kk, s->sh[kk], s->x[mem[m - 1 - j]]);
  }
  return bad;
}

/* broadcasts and shuffles move f16 and bf16 bits (every non-NaN pattern:
 * -0, subnormals, infinities) */
static void test_moves(void **state) {
  (void)state;
  for (int t = 0; t < 2; t++) {
    const char *tn = t ? "bf16" : "f16";
    xpj_scalar s = t ? XPJ_BF16 : XPJ_F16;
    xpj_kernel *k = conf_kernel("half.xpk", "moves", t ? "T=bf16" : "T=f16", 0);
    for (size_t z = 0; z < sizeof coll_L / sizeof *coll_L; z++) {
      unsigned L = coll_L[z], G = 3;
      size_t n = (size_t)L * G;
      uint16_t *x = conf_alloc(n * 2), *bc = conf_alloc(n * 2),
               *sb = conf_alloc(n * 2), *sh = conf_alloc(n * 2);
      int64_t *info = conf_alloc(n * 3 * 8);
      for (size_t i = 0; i < n; i++) {
        do
          x[i] = (uint16_t)rnd64();
        while (t ? b_nan(x[i]) : h_nan(x[i]));
        if (i % 16 == 3)
          x[i] = (uint16_t)(0x8000 | (rnd64() % 4)); /* -0 and subnormals */
      }
      int64_t src = (int64_t)(rnd64() % L), ishape[2] = {(int64_t)n, 3};
      xpj_array ax = arr16(x, s, n), ab = arr16(bc, s, n),
                as = arr16(sb, s, n), ah = arr16(sh, s, n),
                ai = xpj_array_nd(info, XPJ_I64, 2, ishape);
      xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ab),
                        xpj_arg_array(&as), xpj_arg_array(&ah),
                        xpj_arg_array(&ai), xpj_arg_i64(src)};
      conf_run(k, xpj_range_1d(n, L), 6, args);
      size_t *mem = malloc(L * sizeof *mem);
      assert_non_null(mem);
      int bad = 0;
      mvck mc = {x, sb, sh, tn};
      for (unsigned g = 0; g < G; g++) {
        for (unsigned j = 0; j < L; j++) {
          size_t kk = (size_t)g * L + j, w = (size_t)g * L + (size_t)src;
          if (bc[kk] != x[w] && bad++ < 3)
            fprintf(stderr, "  moves<%s> L %u group_broadcast [%zu]: 0x%04x, "
                    "want 0x%04x\n", tn, L, kk, bc[kk], x[w]);
        }
        bad += for_sub_groups(info, g, L, mem, sub_moves, &mc);
      }
      free(mem);
      conf_free_all(x, bc, sb, sh, info, NULL);
      if (bad)
        fail_msg("moves<%s> L %u: %d wrong", tn, L, bad);
    }
  }
}

/* ---- bf16 storage, local tiles ----------------------------------------- */

/* a random bf16: exponent field in [lo, hi], random sign and mantissa */
static uint16_t rnd_b(unsigned lo, unsigned hi) {
  uint16_t b = (uint16_t)rnd64();
  return (uint16_t)((b & 0x807f) | (lo + rnd64() % (hi - lo + 1)) << 7);
}

static void test_bf16_axpy(void **state) {
  (void)state;
  xpj_kernel *k = conf_kernel("half.xpk", "baxpy", NULL, 0);
  const size_t n = 4099;
  uint16_t *x = conf_alloc(n * 2), *y = conf_alloc(n * 2), *y0 = malloc(n * 2);
  assert_non_null(y0);
  static const double as[] = {0.3, 1 + 0x1p-8 + 0x1p-40, -1e30, 0x1p-130};
  for (size_t t = 0; t < sizeof as / sizeof *as; t++) {
    for (size_t i = 0; i < n; i++) {
      unsigned q = (unsigned)(i % 8);
      x[i] = q < 5   ? rnd_b(110, 140)
             : q < 7 ? rnd_b(0, 254)
                     : (uint16_t)rnd64();
      y[i] = y0[i] = q < 5 ? rnd_b(110, 140) : rnd_b(0, 254);
    }
    xpj_array ax = arr16(x, XPJ_BF16, n), ay = arr16(y, XPJ_BF16, n);
    xpj_arg args[] = {xpj_arg_bf16(as[t]), xpj_arg_array(&ax),
                      xpj_arg_array(&ay)};
    conf_run(k, xpj_range_1d(n, 0), 3, args);
    float a = (float)rbf(as[t]);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
      volatile float p = a * (float)b_dec(x[i]); /* f32, no fma */
      volatile float s = p + (float)b_dec(y0[i]);
      uint16_t w = b16((double)s);
      if (!b_same(y[i], w) && bad++ < 5)
        fprintf(stderr, "  baxpy a = %a (from %a), x = %a, y = %a: got %a "
                "(0x%04x), want %a (0x%04x)\n", (double)a, as[t],
                b_dec(x[i]), b_dec(y0[i]), b_dec(y[i]), y[i], b_dec(w), w);
    }
    if (bad)
      fail_msg("bf16 axpy (a = %a): %zu wrong", as[t], bad);
  }
  conf_free(x);
  conf_free(y);
  free(y0);
}

static void test_tiles(void **state) {
  (void)state;
  xpj_kernel *k = conf_kernel("half.xpk", "tiles", NULL, 0);
  static const unsigned Ls[] = {1, 7, 64, 100, 256};
  for (size_t z = 0; z < sizeof Ls / sizeof *Ls; z++) {
    unsigned L = Ls[z], G = 4;
    size_t n = (size_t)L * G;
    uint16_t *x = conf_alloc(n * 2), *y = conf_alloc(n * 2),
             *xb = conf_alloc(n * 2), *yb = conf_alloc(n * 2);
    for (size_t i = 0; i < n; i++) {
      x[i] = rnd_hmix();
      xb[i] = (uint16_t)rnd64();
    }
    xpj_array ax = arr16(x, XPJ_F16, n), ay = arr16(y, XPJ_F16, n),
              axb = arr16(xb, XPJ_BF16, n), ayb = arr16(yb, XPJ_BF16, n);
    xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ay),
                      xpj_arg_array(&axb), xpj_arg_array(&ayb)};
    conf_run(k, xpj_range_1d(n, L), 4, args);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
      size_t m = i / L * L + (L - 1 - i % L);
      uint16_t w = h16(h_dec(x[m]) + h_dec(x[i]));
      if (!h_same(y[i], w) && bad++ < 3)
        fprintf(stderr, "  tiles L %u [%zu]: f16 %a + %a = %a, want %a\n", L,
                i, h_dec(x[m]), h_dec(x[i]), h_dec(y[i]), h_dec(w));
      if (!b_same(yb[i], xb[m]) && bad++ < 3)
        fprintf(stderr, "  tiles L %u [%zu]: bf16 0x%04x, want 0x%04x\n", L,
                i, yb[i], xb[m]);
    }
    conf_free_all(x, y, xb, yb, NULL);
    if (bad)
      fail_msg("local tiles (L %u): %d wrong", L, bad);
  }
}

/* ---- bf16 is a storage type: arithmetic on it is an error -------------- */

/* Each body, in a kernel k(x: global bf16[]) (nd-range when it uses
 * collectives), must fail to compile with a message naming bf16; with f16
 * in its place it must compile. */
static const char *const bf16_bodies[] = {
    "x[i] = x[i] + x[0];",
    "let t = x[i]; t *= x[0]; x[i] = t;",
    "x[i] = -x[i];",
    "x[i] = x[i] * 2.0;",
    "x[i] = x[i] / x[1] - x[0];",
    "if x[i] < x[0] { x[i] = x[0]; }",
    "if x[i] == x[0] { x[i] = x[1]; }",
    "x[i] = sqrt(x[i]);",
    "x[i] = fmax(x[i], x[0]);",
    "x[i] = min(x[i], x[0]);",
    "if isnan(x[i]) { x[i] = x[0]; }",
    "atomic_add(&x[0], x[i]);",
    "x[i] = atomic_xchg(&x[0], x[i]);",
    "x[i] = atomic_load(&x[0]);",
    "atomic_store(&x[0], x[i]);",
    "x[i] = group_reduce_add(x[i]);",
    "x[i] = group_scan_inclusive_max(x[i]);",
    "x[i] = sub_group_reduce_add(x[i]);",
    "x[i] = sub_group_scan_exclusive_min(x[i]);",
};

/* compiles body in a kernel k(x: global TYPE[]) for the device */
static xpj_status compile_body(const char *type, const char *body) {
  char src[512];
  snprintf(src, sizeof src,
           "kernel k(x: global %s[]) %s {\n    let i = global_id(0);\n"
           "    %s\n}\n", type,
           strstr(body, "group_") ? "ndrange(1)" : "range", body);
  xpj_program *p = NULL;
  xpj_kernel *k = NULL;
  xpj_status st = xpj_program_create(C.ctx, "t.xpk", src, strlen(src), NULL,
                                     &p);
  if (st == XPJ_OK) {
    st = xpj_program_get_kernel(p, "k", NULL, 0, C.dev, NULL, &k);
    xpj_program_destroy(p);
  }
  return st;
}

static void test_bf16_errors(void **state) {
  (void)state;
  int bad = 0;
  for (size_t b = 0; b < sizeof bf16_bodies / sizeof *bf16_bodies; b++) {
    const char *body = bf16_bodies[b];
    xpj_status st = compile_body("bf16", body);
    if (st == XPJ_OK || !strstr(xpj_last_error(), "bf16")) {
      fprintf(stderr, "  bf16 `%s`: %s: %s (want an error naming bf16)\n",
              body, xpj_status_name(st), st ? xpj_last_error() : "");
      bad++;
    }
    /* the f16 version compiles */
    if ((st = compile_body("f16", body)) != XPJ_OK) {
      fprintf(stderr, "  f16 `%s`: %s: %s\n", body, xpj_status_name(st),
              xpj_last_error());
      bad++;
    }
  }
  /* generic kernels (arith: a + b): refused when specialised with
   * T=bf16, naming it */
  static const char *const gk[] = {"arith", "axpy", "hlimits"};
  for (size_t g = 0; g < sizeof gk / sizeof *gk; g++) {
    xpj_kernel *k = NULL;
    xpj_status st = xpj_program_get_kernel(conf_program("half.xpk"), gk[g],
                                           "T=bf16", 0, C.dev, NULL, &k);
    if (st != XPJ_ERR_SPECIALIZE || !strstr(xpj_last_error(), "bf16")) {
      fprintf(stderr, "  %s<T=bf16>: %s: %s (want XPJ_ERR_SPECIALIZE naming "
              "bf16)\n", gk[g], xpj_status_name(st),
              st ? xpj_last_error() : "");
      bad++;
    }
  }
  if (bad)
    fail_msg("bf16 storage-only rules: %d wrong", bad);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_helpers),
      cmocka_unit_test(test_casts),
      cmocka_unit_test(test_arith),
      cmocka_unit_test(test_axpy),
      cmocka_unit_test(test_literals),
      cmocka_unit_test(test_params),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_math1),
      cmocka_unit_test(test_math2),
      cmocka_unit_test(test_atomics_global),
      cmocka_unit_test(test_atomics_local),
      cmocka_unit_test(test_collectives),
      cmocka_unit_test(test_collectives_mul),
      cmocka_unit_test(test_moves),
      cmocka_unit_test(test_bf16_axpy),
      cmocka_unit_test(test_tiles),
      cmocka_unit_test(test_bf16_errors),
  };
  return cmocka_run_group_tests(tests, conf_setup, conf_teardown);
}
