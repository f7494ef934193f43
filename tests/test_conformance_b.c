/* test_conformance_b.c - conformance suite, part B: math builtins against
 * libm (ULPs), integer edge cases, scalar arguments of every dtype, work-item
 * ids over nd-ranges and ranges, control flow around barriers, and launch
 * validation. Kernels: tests/conformance/{math,intops,scalars,ids,control,
 * errors}.xpk. Device: XPJIT_TEST_DEVICE (see conformance/common.h). */
#include "conformance/common.h"

#include <float.h>
#include <limits.h>

/* ---- math.xpk ----------------------------------------------------------- */

/* Input domains of the math tests. */
enum {
  D_POS,   /* positive, every binade */
  D_ALL,   /* either sign, every binade */
  D_EXP,   /* exp: no overflow, no underflow to zero */
  D_EXP2,  /* exp2: likewise */
  D_EXPM1, /* expm1: near 0, and up to overflow */
  D_LOG1P, /* (-1, huge), many near 0 */
  D_TRIG,  /* [-10, 10] and [-1e5, 1e5] */
  D_UNIT,  /* [-1, 1] */
  D_HYP,   /* sinh/cosh: no overflow */
  D_TANH,  /* [-20, 20] and near 0 */
  D_ROUND, /* halves and quarters, and wide values */
  D_ERFC,  /* erfc: from -10 to where it underflows */
  D_LGAMMA,/* lgamma: positive, every binade, away from its zeros 1, 2 */
  D_TGAMMA,/* tgamma: negative non-integers, small, up to overflow */
};

/* x = +-2^u with u uniform in [lo, hi) */
static double rnd_binade(double lo, double hi, int neg) {
  double v = exp2(rnd_real(lo, hi));
  return neg && (rnd64() & 1) ? -v : v;
}

/* One random input of domain dom for f32 (is64 0) or f64. */
static double gen1(int dom, int is64) {
  int e = is64 ? 1022 : 126;
  int half = (int)(rnd64() & 1);
  switch (dom) {
  case D_POS:
    return rnd_binade(-e - (is64 ? 50 : 20), e + 1, 0);
  case D_ALL:
    return rnd_binade(-e, e + 1, 1);
  case D_EXP:
    return half ? rnd_binade(-30, 0, 1)
                : (is64 ? rnd_real(-708, 709.7) : rnd_real(-87, 88.7));
  case D_EXP2:
    return half ? rnd_binade(-30, 0, 1)
                : (is64 ? rnd_real(-1022, 1023.9) : rnd_real(-126, 127.9));
  case D_EXPM1:
    return half ? rnd_binade(-40, 0, 1)
                : (is64 ? rnd_real(-50, 709.7) : rnd_real(-30, 88.7));
  case D_LOG1P:
    return half ? rnd_binade(-40, 0, 1)
                : (rnd64() & 1 ? rnd_real(-1, 0) : rnd_binade(-10, e, 0));
  case D_TRIG:
    return half ? rnd_real(-10, 10) : rnd_real(-1e5, 1e5);
  case D_UNIT:
    return rnd_real(-1, 1);
  case D_HYP:
    return is64 ? rnd_real(-709, 709) : rnd_real(-88, 88);
  case D_TANH:
    return half ? rnd_real(-20, 20) : rnd_binade(-30, 0, 1);
  case D_ERFC:
    return half ? rnd_binade(-30, 0, 1) : rnd_real(-10, is64 ? 27 : 10);
  case D_LGAMMA: {
    double v = half ? rnd_binade(-e, 3, 0) : rnd_binade(1.6, e - 3, 0);
    return fabs(v - 1) < 0.01 || fabs(v - 2) < 0.01 ? v + 0.5 : v;
  }
  case D_TGAMMA:
    if (half)
      return is64 ? rnd_real(-170, 171.6) : rnd_real(-34, 35);
    return rnd_binade(-e, 0, 1);
  case D_ROUND:
    if (half)
      return (double)((int64_t)(rnd64() % 401) - 200) +
             0.25 * (double)(rnd64() % 4);
    return rnd_binade(-10, is64 ? 60 : 30, 1);
  }
  return 1;
}

static double rsqrt_d(double x) { return 1 / sqrt(x); }
static long double rsqrt_l(long double x) { return 1 / sqrtl(x); }

typedef struct math1_fn {
  const char *name;
  int dom;
  double bound;         /* ulps; < 0: exact (bit for bit, any NaN for a NaN) */
  double (*rd)(double); /* the reference for f32 */
  long double (*rl)(long double); /* the reference for f64 */
} math1_fn;

/* in the order of math1's fid */
static const math1_fn math1_fns[] = {
    {"sqrt", D_POS, -1, sqrt, sqrtl},
    {"rsqrt", D_POS, 4, rsqrt_d, rsqrt_l},
    {"cbrt", D_ALL, 4, cbrt, cbrtl},
    {"exp", D_EXP, 4, exp, expl},
    {"exp2", D_EXP2, 4, exp2, exp2l},
    {"expm1", D_EXPM1, 4, expm1, expm1l},
    {"log", D_POS, 4, log, logl},
    {"log2", D_POS, 4, log2, log2l},
    {"log10", D_POS, 4, log10, log10l},
    {"log1p", D_LOG1P, 4, log1p, log1pl},
    {"sin", D_TRIG, 4, sin, sinl},
    {"cos", D_TRIG, 4, cos, cosl},
    {"tan", D_TRIG, 4, tan, tanl},
    {"asin", D_UNIT, 4, asin, asinl},
    {"acos", D_UNIT, 4, acos, acosl},
    {"atan", D_ALL, 4, atan, atanl},
    {"sinh", D_HYP, 4, sinh, sinhl},
    {"cosh", D_HYP, 4, cosh, coshl},
    {"tanh", D_TANH, 4, tanh, tanhl},
    {"fabs", D_ALL, -1, fabs, fabsl},
    {"floor", D_ROUND, -1, floor, floorl},
    {"ceil", D_ROUND, -1, ceil, ceill},
    {"round", D_ROUND, -1, round, roundl},
    {"trunc", D_ROUND, -1, trunc, truncl},
    {"erf", D_ALL, 16, erf, erfl},
    {"erfc", D_ERFC, 16, erfc, erfcl},
    {"lgamma", D_LGAMMA, 16, lgamma, lgammal},
    {"tgamma", D_TGAMMA, 16, tgamma, tgammal},
};
#define N_MATH1 (sizeof math1_fns / sizeof *math1_fns)

/* Special inputs appended to every function's random ones. */
static const double math_specials[] = {
    NAN, INFINITY, -INFINITY, 0.0,   -0.0,   1.0,   -1.0,   0.5,  -0.5, 2.0,
    1.5, -2.5,     3.5,       1e-30, -1e-30, 100.0, -100.0, 1e30, -1e30};
#define N_SPECIALS (sizeof math_specials / sizeof *math_specials)

/* ULPs of got (f32) from the exact want, where a want beyond the float
 * range means the float overflow (inf). */
static double ulp32(float got, double want) {
  if (!isnan(want) && isinf((float)want))
    want = (float)want;
  return ulps_f32(got, want);
}

static double ulp64(double got, long double want) {
  if (!isnan((double)want) && isinf((double)want))
    want = (double)want;
  return ulps_f64(got, want);
}

/* got and want (both of the test's dtype, widened to double) are the same
 * bits, or both NaN */
static int same_value(double got, double want, int is64) {
  if (isnan(got) || isnan(want))
    return isnan(got) && isnan(want);
  if (is64)
    return !memcmp(&got, &want, sizeof got);
  float g = (float)got, w = (float)want;
  return !memcmp(&g, &w, sizeof g);
}

/* loads element i of an f32 or f64 array as a double */
static double ld(const void *p, int is64, size_t i) {
  return is64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}
static void st(void *p, int is64, size_t i, double v) {
  if (is64)
    ((double *)p)[i] = v;
  else
    ((float *)p)[i] = (float)v;
}

static void run_math1(int is64) {
  const char *dt = is64 ? "f64" : "f32";
  xpj_scalar t = is64 ? XPJ_F64 : XPJ_F32;
  size_t es = is64 ? 8 : 4;
  xpj_kernel *k = conf_kernel("math.xpk", "math1", is64 ? "T=f64" : "T=f32", 0);
  enum { NR = 4099 };
  size_t n = NR + N_SPECIALS;
  void *x = conf_alloc(n * es), *y = conf_alloc(n * es);
  xpj_array ax = xpj_array_1d(x, t, (int64_t)n);
  xpj_array ay = xpj_array_1d(y, t, (int64_t)n);
  int failed = 0;
  for (unsigned f = 0; f < N_MATH1; f++) {
    const math1_fn *fn = &math1_fns[f];
    for (size_t i = 0; i < NR; i++)
      st(x, is64, i, gen1(fn->dom, is64));
    for (size_t i = 0; i < N_SPECIALS; i++)
      st(x, is64, NR + i, math_specials[i]);
    if (!is64) /* the smallest subnormal and a subnormal */
      ((float *)x)[NR + 13] = 0x1p-149f, ((float *)x)[NR + 14] = -0x1.8p-130f;
    else
      ((double *)x)[NR + 13] = 0x1p-1074, ((double *)x)[NR + 14] = -0x1.8p-1030;
    memset(y, 0, n * es);
    xpj_arg args[] = {xpj_arg_i32((int32_t)f), xpj_arg_array(&ax),
                      xpj_arg_array(&ay)};
    conf_run(k, xpj_range_1d(n, 0), 3, args);
    double worst = 0, worst_x = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
      double xv = ld(x, is64, i), got = ld(y, is64, i);
      long double ref = is64 ? fn->rl(xv) : (long double)fn->rd(xv);
      double e = is64 ? ulp64(got, ref) : ulp32((float)got, (double)ref);
      int ok;
      if (fn->bound < 0) /* libm's double functions are exact here */
        ok = same_value(got, is64 ? fn->rd(xv) : (double)(float)fn->rd(xv),
                        is64);
      else
        ok = e <= fn->bound;
      if (!ok && bad++ < 3)
        fprintf(stderr, "  math %s %s(%a) = %a, want %a (%g ulp)\n", dt,
                fn->name, xv, got, (double)ref, e);
      if (!(e <= worst))
        worst = e, worst_x = xv;
    }
    fprintf(stderr, "math %s %-8s worst %.3g ulp", dt, fn->name, worst);
    if (worst > 0)
      fprintf(stderr, " at x = %a", worst_x);
    if (fn->bound < 0)
      fprintf(stderr, " (exact)%s\n", bad ? " FAILED" : "");
    else
      fprintf(stderr, " (bound %g)%s\n", fn->bound, bad ? " FAILED" : "");
    if (bad)
      failed++;
  }
  conf_free(x);
  conf_free(y);
  if (failed)
    fail_msg("math1 %s: %d functions out of bounds", dt, failed);
}

static void test_math1_f32(void **state) {
  (void)state;
  run_math1(0);
}

static void test_math1_f64(void **state) {
  (void)state;
  run_math1(1);
}

typedef struct math2_fn {
  const char *name;
  double bound; /* as in math1_fn */
} math2_fn;

/* in the order of math2's fid */
static const math2_fn math2_fns[] = {
    {"pow", 4},   {"atan2", 4},     {"hypot", 4}, {"fmin", -1},
    {"fmax", -1}, {"copysign", -1}, {"fma", -1},  {"min", -1},
    {"max", -1},  {"clamp", -1},    {"abs", -1},
};
#define N_MATH2 (sizeof math2_fns / sizeof *math2_fns)

static const double pair_specials[] = {
    NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 3.0, 2.5};
#define N_PAIR_SPECIALS (sizeof pair_specials / sizeof *pair_specials)

/* the exact (or long double) value of function f of math2 */
static long double math2_ref(int f, int is64, double a, double b, double c) {
  switch (f) {
  case 0:
    return is64 ? powl(a, b) : pow(a, b);
  case 1:
    return is64 ? atan2l(a, b) : atan2(a, b);
  case 2:
    return is64 ? hypotl(a, b) : hypot(a, b);
  case 3:
    return fmin(a, b);
  case 4:
    return fmax(a, b);
  case 5:
    return copysign(a, b);
  case 6:
    return is64 ? fma(a, b, c) : (double)fmaf((float)a, (float)b, (float)c);
  case 7:
    return a < b ? a : b;
  case 8:
    return a > b ? a : b;
  case 9: {
    double m = a > -b ? a : -b;
    return m < b ? m : b;
  }
  case 10:
    return fabs(a);
  }
  return 0;
}

/* random inputs (a, b, c) for function f of math2 */
static void math2_gen(int f, int is64, double *a, double *b, double *c) {
  int q = (int)(rnd64() % 4);
  *c = 0;
  switch (f) {
  case 0: /* pow */
    if (q < 2) {
      *a = rnd_binade(is64 ? -60 : -10, is64 ? 60 : 10, 0);
      *b = is64 ? rnd_real(-15, 15) : rnd_real(-8, 8);
    } else if (q == 2) {
      *a = rnd_real(-10, 10);
      *b = (double)((int)(rnd64() % 41) - 20);
    } else {
      *a = rnd_real(0.5, 2);
      *b = rnd_real(-100, 100);
    }
    break;
  case 1: /* atan2 */
    if (q < 2) {
      *a = rnd_real(-100, 100);
      *b = rnd_real(-100, 100);
    } else {
      *a = rnd_binade(is64 ? -1000 : -120, is64 ? 1000 : 120, 1);
      *b = rnd_binade(is64 ? -1000 : -120, is64 ? 1000 : 120, 1);
    }
    break;
  case 2: /* hypot: no undue overflow or underflow */
    *a = rnd_binade(is64 ? -1000 : -120, is64 ? 1000 : 120, 1);
    *b = q < 2 ? rnd_binade(is64 ? -1000 : -120, is64 ? 1000 : 120, 1)
               : *a * rnd_real(-4, 4);
    break;
  case 6: /* fma: c cancels the rounded product, so only a fused
           * multiply-add gives the exact residual */
    *a = rnd_real(-1000, 1000);
    *b = rnd_real(-1000, 1000);
    if (q < 2)
      *c = is64 ? -(*a * *b) : -(double)((float)*a * (float)*b);
    else
      *c = rnd_real(-1e6, 1e6);
    break;
  case 9: /* clamp(a, -b, b) with b > 0 */
    *a = rnd_real(-100, 100);
    *b = rnd_real(0, 100);
    break;
  default:
    *a = rnd_binade(-20, 20, 1);
    *b = rnd_binade(-20, 20, 1);
    break;
  }
}

static void run_math2(int is64) {
  const char *dt = is64 ? "f64" : "f32";
  xpj_scalar t = is64 ? XPJ_F64 : XPJ_F32;
  size_t es = is64 ? 8 : 4;
  xpj_kernel *k = conf_kernel("math.xpk", "math2", is64 ? "T=f64" : "T=f32", 0);
  enum { NR = 4099 };
  size_t n = NR + N_PAIR_SPECIALS * N_PAIR_SPECIALS;
  void *a = conf_alloc(n * es), *b = conf_alloc(n * es);
  void *c = conf_alloc(n * es), *y = conf_alloc(n * es);
  xpj_array aa = xpj_array_1d(a, t, (int64_t)n);
  xpj_array ab = xpj_array_1d(b, t, (int64_t)n);
  xpj_array ac = xpj_array_1d(c, t, (int64_t)n);
  xpj_array ay = xpj_array_1d(y, t, (int64_t)n);
  int failed = 0;
  for (unsigned f = 0; f < N_MATH2; f++) {
    const math2_fn *fn = &math2_fns[f];
    /* min, max, clamp: no NaN, no zeros (their sign is unspecified) */
    int specials = f <= 6;
    size_t m = specials ? n : NR;
    for (size_t i = 0; i < NR; i++) {
      double va, vb, vc;
      math2_gen((int)f, is64, &va, &vb, &vc);
      st(a, is64, i, va);
      st(b, is64, i, vb);
      st(c, is64, i, vc);
    }
    if (specials)
      for (size_t i = 0; i < N_PAIR_SPECIALS * N_PAIR_SPECIALS; i++) {
        st(a, is64, NR + i, pair_specials[i / N_PAIR_SPECIALS]);
        st(b, is64, NR + i, pair_specials[i % N_PAIR_SPECIALS]);
        st(c, is64, NR + i, 1.0);
      }
    aa.shape[0] = ab.shape[0] = ac.shape[0] = ay.shape[0] = (int64_t)m;
    memset(y, 0, n * es);
    xpj_arg args[] = {xpj_arg_i32((int32_t)f), xpj_arg_array(&aa),
                      xpj_arg_array(&ab), xpj_arg_array(&ac),
                      xpj_arg_array(&ay)};
    conf_run(k, xpj_range_1d(m, 0), 5, args);
    double worst = 0, wa = 0, wb = 0;
    size_t bad = 0;
    for (size_t i = 0; i < m; i++) {
      double va = ld(a, is64, i), vb = ld(b, is64, i), vc = ld(c, is64, i);
      double got = ld(y, is64, i), e;
      long double want = math2_ref((int)f, is64, va, vb, vc);
      if (fn->bound < 0) {
        e = same_value(got, (double)want, is64) ? 0 : INFINITY;
        /* fmin/fmax of zeros of both signs: either zero */
        if ((f == 3 || f == 4) && va == 0 && vb == 0 && got == 0)
          e = 0;
      } else {
        e = is64 ? ulp64(got, want) : ulp32((float)got, (double)want);
      }
      double lim = fn->bound < 0 ? 0 : fn->bound;
      if (!(e <= lim) && bad++ < 3)
        fprintf(stderr, "  math %s %s(%a, %a%s) = %a, want %a (%g ulp)\n", dt,
                fn->name, va, vb, f == 6 ? ", c" : "", got, (double)want, e);
      if (!(e <= worst))
        worst = e, wa = va, wb = vb;
    }
    fprintf(stderr, "math %s %-8s worst %.3g ulp", dt, fn->name, worst);
    if (worst > 0)
      fprintf(stderr, " at (%a, %a)", wa, wb);
    if (fn->bound < 0)
      fprintf(stderr, " (exact)%s\n", bad ? " FAILED" : "");
    else
      fprintf(stderr, " (bound %g)%s\n", fn->bound, bad ? " FAILED" : "");
    if (bad)
      failed++;
  }
  conf_free(a);
  conf_free(b);
  conf_free(c);
  conf_free(y);
  if (failed)
    fail_msg("math2 %s: %d functions out of bounds", dt, failed);
}

static void test_math2_f32(void **state) {
  (void)state;
  run_math2(0);
}

static void test_math2_f64(void **state) {
  (void)state;
  run_math2(1);
}

/* isnan / isinf / isfinite (and comparisons) on special and random values */
static void run_classify(int is64) {
  xpj_scalar t = is64 ? XPJ_F64 : XPJ_F32;
  size_t es = is64 ? 8 : 4;
  xpj_kernel *k =
      conf_kernel("math.xpk", "classify", is64 ? "T=f64" : "T=f32", 0);
  const double sp[] = {NAN,
                       -NAN,
                       INFINITY,
                       -INFINITY,
                       0.0,
                       -0.0,
                       1.0,
                       -1.0,
                       is64 ? DBL_MAX : FLT_MAX,
                       is64 ? -DBL_MAX : -FLT_MAX,
                       is64 ? DBL_MIN : FLT_MIN,
                       is64 ? 0x1p-1074 : 0x1p-149,
                       is64 ? -0x1p-1074 : -0x1p-149};
  size_t nsp = sizeof sp / sizeof *sp, n = nsp + 1000;
  void *x = conf_alloc(n * es);
  int32_t *out = conf_alloc(n * sizeof *out);
  for (size_t i = 0; i < n; i++) {
    double v =
        i < nsp ? sp[i] : rnd_binade(is64 ? -1074 : -149, is64 ? 1024 : 128, 1);
    st(x, is64, i, v);
    out[i] = -1;
  }
  /* NaNs with other payloads and signs */
  if (is64) {
    uint64_t bits[] = {0x7ff0000000000001ull, 0xfff8000000000123ull,
                       0x7ff7ffffffffffffull};
    memcpy((double *)x + nsp, bits, sizeof bits);
  } else {
    uint32_t bits[] = {0x7f800001u, 0xffc00123u, 0x7fbfffffu};
    memcpy((float *)x + nsp, bits, sizeof bits);
  }
  xpj_array ax = xpj_array_1d(x, t, (int64_t)n);
  xpj_array ao = xpj_array_1d(out, XPJ_I32, (int64_t)n);
  xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ao)};
  conf_run(k, xpj_range_1d(n, 0), 2, args);
  for (size_t i = 0; i < n; i++) {
    double v = ld(x, is64, i);
    int32_t want = (isnan(v) ? 1 : 0) | (isinf(v) ? 2 : 0) |
                   (isfinite(v) ? 4 : 0) | (v == v ? 8 : 0) | (v < 0 ? 16 : 0) |
                   (v > 0 ? 32 : 0);
    if (out[i] != want)
      fail_msg("classify %s x = %a: got %#x, want %#x", is64 ? "f64" : "f32", v,
               out[i], want);
  }
  conf_free(x);
  conf_free(out);
}

static void test_classify(void **state) {
  (void)state;
  run_classify(0);
  run_classify(1);
}

/* ---- intops.xpk --------------------------------------------------------- */

static int is_signed_t(xpj_scalar t) { return t >= XPJ_I8 && t <= XPJ_I64; }
static int is_float_t(xpj_scalar t) { return t == XPJ_F32 || t == XPJ_F64; }
static unsigned width_t(xpj_scalar t) {
  return t == XPJ_BOOL ? 8 : xpj_scalar_bits(t);
}
static size_t bytes_t(xpj_scalar t) { return width_t(t) / 8; }
static uint64_t mask_w(unsigned w) { return w == 64 ? ~0ull : (1ull << w) - 1; }
/* raw bits v (w wide) sign-extended */
static int64_t sext(uint64_t v, unsigned w) {
  if (w == 64)
    return (int64_t)v;
  uint64_t m = 1ull << (w - 1);
  return (int64_t)((v & mask_w(w)) ^ m) - (int64_t)m;
}

/* element i of an integer array as raw bits, zero-extended */
static uint64_t ld_bits(const void *p, xpj_scalar t, size_t i) {
  switch (bytes_t(t)) {
  case 1:
    return ((const uint8_t *)p)[i];
  case 2:
    return ((const uint16_t *)p)[i];
  case 4:
    return ((const uint32_t *)p)[i];
  default:
    return ((const uint64_t *)p)[i];
  }
}
static void st_bits(void *p, xpj_scalar t, size_t i, uint64_t v) {
  switch (bytes_t(t)) {
  case 1:
    ((uint8_t *)p)[i] = (uint8_t)v;
    break;
  case 2:
    ((uint16_t *)p)[i] = (uint16_t)v;
    break;
  case 4:
    ((uint32_t *)p)[i] = (uint32_t)v;
    break;
  default:
    ((uint64_t *)p)[i] = v;
    break;
  }
}

enum { N_INTOPS = 24 };

/* The reference of int_ops for a w-bit integer type (signed if sg) on x, y:
 * out[j] (raw bits), and chk[j] 0 where the value is unspecified. */
static void int_ref(unsigned w, int sg, uint64_t x, uint64_t y,
                    uint64_t out[N_INTOPS], int chk[N_INTOPS]) {
  uint64_t m = mask_w(w);
  x &= m;
  y &= m;
  int64_t sx = sext(x, w), sy = sext(y, w);
  uint64_t c = y & 127, sh = c % w;
  uint64_t tmin = sg ? 1ull << (w - 1) : 0;
  int lt = sg ? sx < sy : x < y;
  for (int j = 0; j < N_INTOPS; j++)
    chk[j] = 1;
  out[0] = (x + y) & m;
  out[1] = (x - y) & m;
  out[2] = (x * y) & m;
  out[3] = (0 - x) & m;
  out[4] = ~x & m;
  out[5] = (x << sh) & m;
  out[6] = sg ? (uint64_t)(sx >> sh) & m : x >> sh;
  int ok = y != 0 && !(x == tmin && y == m);
  if (ok) {
    out[7] = sg ? (uint64_t)(sx / sy) & m : x / y;
    out[8] = sg ? (uint64_t)(sx % sy) & m : x % y;
  } else {
    out[7] = out[8] = 0;
    chk[7] = chk[8] = 0; /* unspecified, but must not trap */
  }
  out[9] = ok ? out[7] : 0;
  out[10] = ok ? out[8] : 0;
  if (sg)
    out[11] = (uint64_t)(((__int128)sx * sy) >> w) & m;
  else
    out[11] = (uint64_t)(((unsigned __int128)x * y) >> w) & m;
  out[12] = (uint64_t)__builtin_popcountll(x);
  out[13] = x ? (uint64_t)(__builtin_clzll(x) - (64 - (int)w)) : w;
  out[14] = x ? (uint64_t)__builtin_ctzll(x) : w;
  out[15] = sh ? ((x << sh) | (x >> (w - sh))) & m : x;
  out[16] = sh ? ((x >> sh) | (x << (w - sh))) & m : x;
  out[17] = lt ? x : y;
  out[18] = lt ? y : x;
  out[19] = sg && sx < 0 ? (0 - x) & m : x;
  out[20] = ((x & y) ^ (x | c)) & m;
  /* clamp(x, min(y, c), max(y, c)) with c non-negative */
  int yc = sg ? sy < (int64_t)c : y < c;
  uint64_t lo = yc ? y : c, hi = yc ? c : y;
  uint64_t v = (sg ? sx < sext(lo, w) : x < lo) ? lo : x;
  out[21] = (sg ? sext(hi, w) < sext(v, w) : hi < v) ? hi : v;
  uint64_t t = x;
  t = (t + y) & m;
  t = (t * 3) & m;
  t = (t - c) & m;
  t ^= y;
  t = (t << 1) & m;
  t = sg ? (uint64_t)(sext(t, w) >> 2) & m : t >> 2;
  t = (t + 1) & m;
  out[22] = t;
  /* clamp(x, y, c) = min(max(x, y), c), also for y > c (OpenCL's clamp
   * leaves that undefined: the SPIR-V target used it) */
  uint64_t mx = (sg ? sx < sy : x < y) ? y : x;
  out[23] = (sg ? sext(c, w) < sext(mx, w) : c < mx) ? c : mx;
}

static const char *const intop_names[N_INTOPS] = {
    "x + y",    "x - y", "x * y",       "-x",        "~x",        "x << c",
    "x >> c",   "x / y", "x % y",       "guarded /", "guarded %", "mul_hi",
    "popcount", "clz",   "ctz",         "rotl",      "rotr",      "min",
    "max",      "abs",   "(x&y)^(x|c)", "clamp",     "compound",
    "clamp(x, y, c)"};

static void run_int_ops(xpj_scalar t) {
  const char *tn = xpj_scalar_name(t);
  char dt[16];
  snprintf(dt, sizeof dt, "T=%s", tn);
  xpj_kernel *k = conf_kernel("intops.xpk", "int_ops", dt, 0);
  unsigned w = width_t(t);
  int sg = is_signed_t(t);
  uint64_t m = mask_w(w), mn = sg ? 1ull << (w - 1) : 0;
  const uint64_t edges[] = {0,
                            1,
                            2,
                            3,
                            m,
                            mn,
                            (mn - 1) & m,
                            mn + 1,
                            w - 1,
                            w,
                            w + 1,
                            2 * w,
                            127,
                            128,
                            0x5555555555555555ull & m,
                            0xaaaaaaaaaaaaaaaaull & m,
                            (0 - 2ull) & m};
  size_t ne = sizeof edges / sizeof *edges;
  size_t n = ne * ne + 4099;
  size_t es = bytes_t(t);
  void *a = conf_alloc(n * es), *b = conf_alloc(n * es);
  void *out = conf_alloc(n * N_INTOPS * es);
  for (size_t i = 0; i < n; i++) {
    uint64_t x, y;
    if (i < ne * ne) {
      x = edges[i / ne];
      y = edges[i % ne];
    } else if (rnd64() % 4 == 0) { /* small values, either sign */
      x = (uint64_t)((int64_t)(rnd64() % 601) - 300) & m;
      y = (uint64_t)((int64_t)(rnd64() % 41) - 20) & m;
    } else {
      x = rnd64() & m;
      y = rnd64() & m;
    }
    st_bits(a, t, i, x);
    st_bits(b, t, i, y);
  }
  memset(out, 0xa5, n * N_INTOPS * es);
  xpj_array aa = xpj_array_1d(a, t, (int64_t)n);
  xpj_array ab = xpj_array_1d(b, t, (int64_t)n);
  xpj_array ao = xpj_array_2d(out, t, (int64_t)n, N_INTOPS);
  xpj_arg tmin = {XPJ_ARG_SCALAR, t, {0}, NULL};
  if (sg)
    tmin.v.i = sext(mn, w);
  else
    tmin.v.u = 0;
  xpj_arg args[] = {xpj_arg_array(&aa), xpj_arg_array(&ab), tmin,
                    xpj_arg_array(&ao)};
  conf_run(k, xpj_range_1d(n, 0), 4, args);
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t x = ld_bits(a, t, i), y = ld_bits(b, t, i), want[N_INTOPS];
    int chk[N_INTOPS];
    int_ref(w, sg, x, y, want, chk);
    for (int j = 0; j < N_INTOPS; j++) {
      uint64_t got = ld_bits(out, t, i * N_INTOPS + (size_t)j);
      if (chk[j] && got != want[j] && bad++ < 10)
        fprintf(stderr,
                "  int_ops %s %s: x = %#llx y = %#llx: got %#llx, "
                "want %#llx\n",
                tn, intop_names[j], (unsigned long long)x,
                (unsigned long long)y, (unsigned long long)got,
                (unsigned long long)want[j]);
    }
  }
  conf_free(a);
  conf_free(b);
  conf_free(out);
  if (bad)
    fail_msg("int_ops %s: %d wrong results", tn, bad);
}

/* the high half of a u64 product written by hand (four 32-bit products),
 * and a store after an i64 mul_hi in a branch nobody takes */
static void test_hand_mul_hi(void **state) {
  (void)state;
  xpj_kernel *k = conf_kernel("intops.xpk", "hand_mul_hi", NULL, 0);
  const uint64_t edges[] = {0, 1, 2, 0xffffffffull, 0x100000000ull,
                            0x8000000000000000ull, ~0ull, ~0ull - 1};
  size_t ne = sizeof edges / sizeof *edges, n = ne * ne + 1000;
  uint64_t *a = conf_alloc(n * 8), *b = conf_alloc(n * 8),
           *out = conf_alloc(n * 2 * 8);
  for (size_t i = 0; i < n; i++) {
    a[i] = i < ne * ne ? edges[i / ne] : rnd64();
    b[i] = i < ne * ne ? edges[i % ne] : rnd64();
  }
  xpj_array aa = xpj_array_1d(a, XPJ_U64, (int64_t)n);
  xpj_array ab = xpj_array_1d(b, XPJ_U64, (int64_t)n);
  xpj_array ao = xpj_array_2d(out, XPJ_U64, (int64_t)n, 2);
  xpj_arg args[] = {xpj_arg_array(&aa), xpj_arg_array(&ab),
                    xpj_arg_array(&ao)};
  conf_run(k, xpj_range_1d(n, 0), 3, args);
  for (size_t i = 0; i < n; i++) {
    unsigned __int128 p = (unsigned __int128)a[i] * b[i];
    if (out[2 * i] != (uint64_t)(p >> 64) || out[2 * i + 1] != (uint64_t)p)
      fail_msg("hand_mul_hi %#llx * %#llx: high %#llx low %#llx, want "
               "%#llx %#llx", (unsigned long long)a[i],
               (unsigned long long)b[i], (unsigned long long)out[2 * i],
               (unsigned long long)out[2 * i + 1],
               (unsigned long long)(p >> 64), (unsigned long long)p);
  }
  conf_free(a);
  conf_free(b);
  conf_free(out);
  k = conf_kernel("intops.xpk", "mul_hi_branch", NULL, 0);
  const size_t m = 64;
  int32_t *ia = conf_alloc(3 * m * 4);
  int64_t *ib = conf_alloc(3 * m * 8), *o = conf_alloc(4 * m * 8);
  for (size_t i = 0; i < 3 * m; i++) {
    ia[i] = (int32_t)i;
    ib[i] = (int64_t)i - 5;
  }
  for (size_t i = 0; i < 4 * m; i++)
    o[i] = 90;
  xpj_array xa = xpj_array_2d(ia, XPJ_I32, 3, (int64_t)m);
  xpj_array xb = xpj_array_2d(ib, XPJ_I64, 3, (int64_t)m);
  xpj_array xo = xpj_array_2d(o, XPJ_I64, 4, (int64_t)m);
  xpj_arg bargs[] = {xpj_arg_array(&xa), xpj_arg_array(&xb),
                     xpj_arg_array(&xo)};
  conf_run(k, xpj_range_1d(m, 0), 3, bargs);
  for (size_t i = 0; i < m; i++)
    if (o[3 * m + i] != (int64_t)i - 5 || o[2 * m + i] != 90)
      fail_msg("mul_hi_branch [%zu]: o[3] %lld (want %lld), o[2] %lld (want "
               "90: the branch is never taken)", i, (long long)o[3 * m + i],
               (long long)i - 5, (long long)o[2 * m + i]);
  conf_free(ia);
  conf_free(ib);
  conf_free(o);
}

static void test_intops_i32(void **state) {
  (void)state;
  run_int_ops(XPJ_I32);
}
static void test_intops_i64(void **state) {
  (void)state;
  run_int_ops(XPJ_I64);
}
static void test_intops_u32(void **state) {
  (void)state;
  run_int_ops(XPJ_U32);
}
static void test_intops_u64(void **state) {
  (void)state;
  run_int_ops(XPJ_U64);
}
static void test_intops_small(void **state) {
  (void)state;
  run_int_ops(XPJ_I8);
  run_int_ops(XPJ_I16);
  run_int_ops(XPJ_U8);
  run_int_ops(XPJ_U16);
}

/* A scalar of any dtype, as the C value it converts from: signed integers
 * and bool as int64, unsigned as uint64, floats as double (exact for f32). */
typedef struct cval {
  int kind; /* 0 signed, 1 unsigned, 2 float */
  int64_t i;
  uint64_t u;
  double f;
} cval;

static cval ld_val(const void *p, xpj_scalar t, size_t i) {
  cval v = {0, 0, 0, 0};
  if (is_float_t(t)) {
    v.kind = 2;
    v.f = ld(p, t == XPJ_F64, i);
  } else if (is_signed_t(t)) {
    v.i = sext(ld_bits(p, t, i), width_t(t));
  } else {
    v.kind = 1;
    v.u = ld_bits(p, t, i);
  }
  return v;
}

/* C's conversion of v to dtype u (float to integer in range: truncation;
 * to float: round to nearest; integer narrowing: low bits), stored at
 * element i of p */
static void st_conv(void *p, xpj_scalar u, size_t i, cval v) {
#define CONV_(T) (v.kind == 0 ? (T)v.i : v.kind == 1 ? (T)v.u : (T)v.f)
  switch (u) {
  case XPJ_BOOL:
    ((uint8_t *)p)[i] = v.kind == 0   ? v.i != 0
                        : v.kind == 1 ? v.u != 0
                                      : v.f != 0;
    break;
  case XPJ_I8:
    ((int8_t *)p)[i] =
        v.kind == 2 ? (int8_t)v.f : (int8_t)(uint8_t)CONV_(uint64_t);
    break;
  case XPJ_I16:
    ((int16_t *)p)[i] =
        v.kind == 2 ? (int16_t)v.f : (int16_t)(uint16_t)CONV_(uint64_t);
    break;
  case XPJ_I32:
    ((int32_t *)p)[i] =
        v.kind == 2 ? (int32_t)v.f : (int32_t)(uint32_t)CONV_(uint64_t);
    break;
  case XPJ_I64:
    ((int64_t *)p)[i] = v.kind == 2 ? (int64_t)v.f : (int64_t)CONV_(uint64_t);
    break;
  case XPJ_U8:
    ((uint8_t *)p)[i] = CONV_(uint8_t);
    break;
  case XPJ_U16:
    ((uint16_t *)p)[i] = CONV_(uint16_t);
    break;
  case XPJ_U32:
    ((uint32_t *)p)[i] = CONV_(uint32_t);
    break;
  case XPJ_U64:
    ((uint64_t *)p)[i] = CONV_(uint64_t);
    break;
  case XPJ_F32:
    ((float *)p)[i] = CONV_(float);
    break;
  case XPJ_F64:
    ((double *)p)[i] = CONV_(double);
    break;
  default:
    break;
  }
#undef CONV_
}

/* a random source value of dtype t for a conversion to dtype u (floats
 * converted to an integer type stay in its range) */
static void gen_conv(void *p, xpj_scalar t, xpj_scalar u, size_t i) {
  if (t == XPJ_BOOL) {
    ((uint8_t *)p)[i] = rnd64() & 1;
    return;
  }
  if (!is_float_t(t)) {
    uint64_t m = mask_w(width_t(t)), r = rnd64();
    if (r % 4 == 0)
      r = (uint64_t)((int64_t)(rnd64() % 601) - 300);
    st_bits(p, t, i, r & m);
    return;
  }
  int is64 = t == XPJ_F64;
  double v;
  if (is_float_t(u) || u == XPJ_BOOL) {
    v = rnd64() % 8 == 0
            ? 0.0
            : rnd_binade(is64 ? -1074 : -149, is64 ? 1024 : 128, 1);
  } else {
    unsigned w = width_t(u);
    /* the largest magnitude that converts: 2^(w-1) for signed (the source
     * type's value below it), 2^w for unsigned */
    double hi = ldexp(0.99, is_signed_t(u) ? (int)w - 1 : (int)w);
    double lo = is_signed_t(u) ? -hi : 0;
    v = rnd64() % 2 ? rnd_real(lo, hi)
                    : (double)((int64_t)(rnd64() % 401) - 200) / 4;
    if (v < lo)
      v = -v;
  }
  st(p, is64, i, v);
}

/* edge source values for a conversion from float t to u: integer limits
 * exactly, halfway cases for f64 -> f32, overflow and underflow */
static size_t conv_edges(xpj_scalar t, xpj_scalar u, double *e) {
  size_t n = 0;
  int is64 = t == XPJ_F64;
  if (!is_float_t(t))
    return 0;
  e[n++] = 0.0;
  e[n++] = -0.0;
  e[n++] = 0.75;
  e[n++] = 1.99;
  if (is_float_t(u) || u == XPJ_BOOL) {
    e[n++] = INFINITY;
    e[n++] = -INFINITY;
    if (u == XPJ_BOOL) {
      e[n++] = NAN;
      e[n++] = 0x1p-149;
    }
    if (is64 && u == XPJ_F32) {
      e[n++] = 1 + 0x1p-24;     /* tie: to even (1) */
      e[n++] = 1 + 3 * 0x1p-24; /* tie: to even (1 + 2^-22) */
      e[n++] = -(1 + 0x1p-24 + 0x1p-50);
      e[n++] = 1e300; /* overflow: inf */
      e[n++] = -1e300;
      e[n++] = 0x1p-149 * 0.75; /* to the smallest subnormal */
      e[n++] = 1e-300;          /* to zero */
      e[n++] = 0x1.fffffefp127; /* rounds to FLT_MAX */
    }
    return n;
  }
  e[n++] = -0.99;
  unsigned w = width_t(u);
  if (is_signed_t(u)) {
    e[n++] = -ldexp(1, (int)w - 1); /* the minimum, exactly */
    e[n++] = -ldexp(1, (int)w - 1) + 1;
    /* the largest value of t below 2^(w-1) */
    e[n++] = is64 ? nextafter(ldexp(1, (int)w - 1), 0)
                  : (double)nextafterf((float)ldexp(1, (int)w - 1), 0);
  } else {
    e[n++] = is64 ? nextafter(ldexp(1, (int)w), 0)
                  : (double)nextafterf((float)ldexp(1, (int)w), 0);
    if (w >= 32)
      e[n++] = ldexp(1, (int)w - 1); /* 2^(w-1): the sign bit */
    e[n++] = ldexp(1, (int)w - 1) + ldexp(1, (int)w - 2);
  }
  return n;
}

static void test_convert(void **state) {
  (void)state;
  static const char *const pairs[][2] = {
      {"f32", "i32"},  {"f64", "i64"},  {"f64", "u64"},  {"f32", "u64"},
      {"f32", "u32"},  {"f64", "i8"},   {"f32", "u16"},  {"f64", "u8"},
      {"f32", "i8"},   {"f32", "i64"},  {"f64", "i32"},  {"f64", "u32"},
      {"f64", "f32"},  {"f32", "f64"},  {"i64", "f32"},  {"u64", "f32"},
      {"u64", "f64"},  {"i64", "f64"},  {"i32", "f32"},  {"u32", "f64"},
      {"u8", "f32"},   {"i16", "f64"},  {"i8", "i64"},   {"i16", "u64"},
      {"u8", "i32"},   {"u16", "i16"},  {"i64", "i8"},   {"u64", "u16"},
      {"i32", "u32"},  {"u32", "i32"},  {"i64", "u32"},  {"u32", "u64"},
      {"bool", "i32"}, {"i32", "bool"}, {"f64", "bool"}, {"bool", "f32"},
      {"u64", "bool"}, {"bool", "u8"},
  };
  enum { N = 1000 };
  void *src = conf_alloc(N * 8), *dst = conf_alloc(N * 8),
       *want = malloc(N * 8);
  assert_non_null(want);
  for (size_t pi = 0; pi < sizeof pairs / sizeof *pairs; pi++) {
    xpj_scalar t = xpj_scalar_parse(pairs[pi][0]);
    xpj_scalar u = xpj_scalar_parse(pairs[pi][1]);
    char dt[32];
    snprintf(dt, sizeof dt, "T=%s,U=%s", pairs[pi][0], pairs[pi][1]);
    xpj_kernel *k = conf_kernel("intops.xpk", "convert", dt, 0);
    double e[32];
    size_t ne = conv_edges(t, u, e);
    for (size_t i = 0; i < N; i++) {
      if (i < ne)
        st(src, t == XPJ_F64, i, e[i]);
      else
        gen_conv(src, t, u, i);
    }
    if (!is_float_t(t) && t != XPJ_BOOL) { /* integer edges */
      unsigned w = width_t(t);
      st_bits(src, t, 0, 0);
      st_bits(src, t, 1, mask_w(w));
      st_bits(src, t, 2, 1ull << (w - 1));
      st_bits(src, t, 3, (1ull << (w - 1)) - 1);
      st_bits(src, t, 4, 1);
      st_bits(src, t, 5, mask_w(w) >> 9); /* many bits: rounds in f32 */
    }
    for (size_t i = 0; i < N; i++)
      st_conv(want, u, i, ld_val(src, t, i));
    memset(dst, 0xa5, N * 8);
    xpj_array as = xpj_array_1d(src, t, N), ad = xpj_array_1d(dst, u, N);
    xpj_arg args[] = {xpj_arg_array(&as), xpj_arg_array(&ad)};
    conf_run(k, xpj_range_1d(N, 0), 2, args);
    for (size_t i = 0; i < N; i++) {
      int ok;
      if (is_float_t(u))
        ok = same_value(ld(dst, u == XPJ_F64, i), ld(want, u == XPJ_F64, i),
                        u == XPJ_F64);
      else
        ok = ld_bits(dst, u, i) == ld_bits(want, u, i);
      if (!ok) {
        cval v = ld_val(src, t, i);
        if (is_float_t(u))
          fail_msg("convert %s -> %s of %a: got %a, want %a", pairs[pi][0],
                   pairs[pi][1],
                   v.kind == 2 ? v.f
                   : v.kind    ? (double)v.u
                               : (double)v.i,
                   ld(dst, u == XPJ_F64, i), ld(want, u == XPJ_F64, i));
        else if (v.kind == 2)
          fail_msg("convert %s -> %s of %a: got %#llx, want %#llx",
                   pairs[pi][0], pairs[pi][1], v.f,
                   (unsigned long long)ld_bits(dst, u, i),
                   (unsigned long long)ld_bits(want, u, i));
        else
          fail_msg("convert %s -> %s of %#llx: got %#llx, want %#llx",
                   pairs[pi][0], pairs[pi][1],
                   (unsigned long long)(v.kind ? v.u : (uint64_t)v.i),
                   (unsigned long long)ld_bits(dst, u, i),
                   (unsigned long long)ld_bits(want, u, i));
      }
    }
  }
  conf_free(src);
  conf_free(dst);
  free(want);
}

/* ---- ids.xpk ------------------------------------------------------------ */

enum { IDS_COLS = 21 };
#define IDS_UNSET ((int64_t)-7)

static void ids_check_local(xpj_kernel *k, unsigned nd, const uint64_t *g,
                            const uint64_t *l) {
  xpj_kernel_info ki;
  assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
  uint64_t wg = 1;
  for (unsigned d = 0; d < nd; d++) {
    if (l[d] == 0 || g[d] % l[d] || l[d] > C.info.max_work_item_sizes[d])
      fail_msg("suggested local size %llu for global %llu in dimension %u",
               (unsigned long long)l[d], (unsigned long long)g[d], d);
    wg *= l[d];
  }
  if (wg > ki.max_work_group_size || wg > C.info.max_work_group_size)
    fail_msg("suggested work-group of %llu work-items", (unsigned long long)wg);
}

/* Launches ids_nd<nd> over global g with local l (all zero: the runtime
 * chooses, which must be xpj_kernel_suggest_local's answer) and checks the
 * ids of every work-item. */
static void run_ids_nd(unsigned nd, uint64_t g0, uint64_t g1, uint64_t g2,
                       uint64_t l0, uint64_t l1, uint64_t l2) {
  static const char *const names[] = {"", "ids_nd1", "ids_nd2", "ids_nd3"};
  xpj_kernel *k = conf_kernel("ids.xpk", names[nd], NULL, 0);
  xpj_kernel_info ki;
  assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
  assert_int_equal(ki.kind, XPJ_FUNC_NDRANGE);
  assert_int_equal(ki.dims, nd);
  xpj_range r = {nd, {g0, g1, g2}, {l0, l1, l2}};
  for (unsigned d = nd; d < 3; d++)
    r.global[d] = 1, r.local[d] = l0 ? 1 : 0;
  uint64_t loc[3] = {1, 1, 1};
  if (l0 == 0) {
    assert_int_equal(xpj_kernel_suggest_local(k, nd, r.global, loc), XPJ_OK);
    ids_check_local(k, nd, r.global, loc);
  } else {
    for (unsigned d = 0; d < nd; d++)
      loc[d] = r.local[d];
  }
  uint64_t total = r.global[0] * r.global[1] * r.global[2];
  uint64_t ng[3], ngroups = 1, wg = loc[0] * loc[1] * loc[2];
  for (unsigned d = 0; d < 3; d++) {
    ng[d] = r.global[d] / loc[d];
    ngroups *= ng[d];
  }
  int64_t *out = conf_alloc(total * IDS_COLS * sizeof *out);
  for (uint64_t i = 0; i < total * IDS_COLS; i++)
    out[i] = IDS_UNSET;
  unsigned char *seen = calloc(total, 1), *seen_ll = calloc(total, 1);
  unsigned char *seen_gl = calloc(ngroups, 1);
  int64_t *glin = malloc(ngroups * sizeof *glin);
  assert_true(seen && seen_ll && seen_gl && glin);
  for (uint64_t i = 0; i < ngroups; i++)
    glin[i] = -1;
  xpj_array ao = xpj_array_2d(out, XPJ_I64, (int64_t)total, IDS_COLS);
  xpj_arg args[] = {xpj_arg_array(&ao)};
  conf_run(k, r, 1, args);
  for (uint64_t row = 0; row < total; row++) {
    const int64_t *o = out + row * IDS_COLS;
    char where[200];
    snprintf(where, sizeof where,
             "ids_nd%u global (%llu,%llu,%llu) local "
             "(%llu,%llu,%llu) row %llu",
             nd, (unsigned long long)g0, (unsigned long long)g1,
             (unsigned long long)g2, (unsigned long long)l0,
             (unsigned long long)l1, (unsigned long long)l2,
             (unsigned long long)row);
    if (o[18] != (int64_t)row)
      fail_msg("%s: global_linear_id %lld (row not written, or a duplicate "
               "id)",
               where, (long long)o[18]);
    uint64_t p = 0, gp = 0;
    for (unsigned d = 0; d < 3; d++) {
      const int64_t *c[6] = {&o[d],     &o[3 + d],  &o[6 + d],
                             &o[9 + d], &o[12 + d], &o[15 + d]};
      if (d >= nd) {
        for (int j = 0; j < 6; j++)
          if (*c[j] != IDS_UNSET)
            fail_msg("%s: column %d of unused dimension %u written", where,
                     (int)(c[j] - o), d);
        continue;
      }
      int64_t gid = o[d], G = (int64_t)r.global[d], L = (int64_t)loc[d];
      if (gid < 0 || gid >= G)
        fail_msg("%s: global_id(%u) = %lld", where, d, (long long)gid);
      if (o[3 + d] != gid % L || o[6 + d] != gid / L || o[9 + d] != G / L ||
          o[12 + d] != L || o[15 + d] != G)
        fail_msg("%s dim %u: global_id %lld local_id %lld group_id %lld "
                 "num_groups %lld local_size %lld global_size %lld; want "
                 "local size %lld",
                 where, d, (long long)gid, (long long)o[3 + d],
                 (long long)o[6 + d], (long long)o[9 + d], (long long)o[12 + d],
                 (long long)o[15 + d], (long long)L);
      p = p * (uint64_t)G + (uint64_t)gid;
      gp = gp * ng[d] + (uint64_t)(gid / L);
    }
    if (seen[p]++)
      fail_msg("%s: a second work-item with the same global ids", where);
    int64_t gl = o[20], ll = o[19];
    if (gl < 0 || (uint64_t)gl >= ngroups || ll < 0 || (uint64_t)ll >= wg)
      fail_msg("%s: group_linear_id %lld (of %llu), local_linear_id %lld "
               "(of %llu)",
               where, (long long)gl, (unsigned long long)ngroups, (long long)ll,
               (unsigned long long)wg);
    if (glin[gp] < 0) {
      if (seen_gl[gl]++)
        fail_msg("%s: two groups with group_linear_id %lld", where,
                 (long long)gl);
      glin[gp] = gl;
    } else if (glin[gp] != gl) {
      fail_msg("%s: group_linear_id %lld, another work-item of the group "
               "has %lld",
               where, (long long)gl, (long long)glin[gp]);
    }
    if (seen_ll[(uint64_t)gl * wg + (uint64_t)ll]++)
      fail_msg("%s: local_linear_id %lld twice in the group", where,
               (long long)ll);
  }
  free(seen);
  free(seen_ll);
  free(seen_gl);
  free(glin);
  conf_free(out);
}

static void test_ids_nd1(void **state) {
  (void)state;
  static const uint64_t gl[][2] = {
      {1, 1},    {1024, 1}, {1024, 64},  {1024, 256}, {1024, 1024}, {4099, 0},
      {1000, 0}, {1000, 8}, {1000, 125}, {65536, 0},  {7, 7},       {255, 0}};
  for (size_t i = 0; i < sizeof gl / sizeof *gl; i++)
    run_ids_nd(1, gl[i][0], 1, 1, gl[i][1], 0, 0);
  /* the largest work-group the device takes */
  uint64_t mx = C.info.max_work_group_size;
  if (mx > C.info.max_work_item_sizes[0])
    mx = C.info.max_work_item_sizes[0];
  if (mx <= 4096)
    run_ids_nd(1, 2 * mx, 1, 1, mx, 0, 0);
}

static void test_ids_nd2(void **state) {
  (void)state;
  static const uint64_t gl[][4] = {
      {48, 20, 8, 4},  {48, 20, 16, 5},  {48, 20, 1, 20}, {48, 20, 0, 0},
      {1, 1, 1, 1},    {64, 64, 16, 16}, {64, 64, 0, 0},  {1, 1000, 1, 8},
      {1000, 3, 0, 0}, {7, 13, 7, 1},    {30, 42, 6, 7}};
  for (size_t i = 0; i < sizeof gl / sizeof *gl; i++)
    run_ids_nd(2, gl[i][0], gl[i][1], 1, gl[i][2], gl[i][3], 0);
}

static void test_ids_nd3(void **state) {
  (void)state;
  static const uint64_t gl[][6] = {
      {12, 10, 6, 4, 5, 3},   {12, 10, 6, 0, 0, 0}, {12, 10, 6, 1, 1, 1},
      {12, 10, 6, 12, 10, 2}, {8, 8, 8, 2, 4, 8},   {1, 1, 1, 1, 1, 1},
      {5, 7, 11, 0, 0, 0},    {16, 4, 2, 16, 1, 2}, {3, 64, 3, 1, 8, 3}};
  for (size_t i = 0; i < sizeof gl / sizeof *gl; i++)
    run_ids_nd(3, gl[i][0], gl[i][1], gl[i][2], gl[i][3], gl[i][4], gl[i][5]);
}

/* ids_range over an nd-dimensional range (local: a hint, which need not
 * divide the global size); the unused dimensions have id 0 and size 1 */
static void run_ids_range(unsigned nd, uint64_t g0, uint64_t g1, uint64_t g2,
                          uint64_t l0, uint64_t l1, uint64_t l2) {
  xpj_kernel *k = conf_kernel("ids.xpk", "ids_range", NULL, 0);
  xpj_range r = {nd, {g0, g1, g2}, {l0, l1, l2}};
  for (unsigned d = nd; d < 3; d++)
    r.global[d] = 1, r.local[d] = l0 ? 1 : 0;
  uint64_t total = r.global[0] * r.global[1] * r.global[2];
  int64_t *out = conf_alloc(total * IDS_COLS * sizeof *out);
  for (uint64_t i = 0; i < total * IDS_COLS; i++)
    out[i] = IDS_UNSET;
  unsigned char *seen = calloc(total, 1);
  assert_non_null(seen);
  xpj_array ao = xpj_array_2d(out, XPJ_I64, (int64_t)total, IDS_COLS);
  xpj_arg args[] = {xpj_arg_array(&ao)};
  conf_run(k, r, 1, args);
  for (uint64_t row = 0; row < total; row++) {
    const int64_t *o = out + row * IDS_COLS;
    if (o[18] != (int64_t)row)
      fail_msg("ids_range %uD (%llu,%llu,%llu) hint %llu: row %llu has "
               "global_linear_id %lld",
               nd, (unsigned long long)g0, (unsigned long long)g1,
               (unsigned long long)g2, (unsigned long long)l0,
               (unsigned long long)row, (long long)o[18]);
    uint64_t p = 0;
    for (unsigned d = 0; d < 3; d++) {
      int64_t G = (int64_t)r.global[d];
      if (o[15 + d] != G || o[d] < 0 || o[d] >= G)
        fail_msg("ids_range %uD (%llu,%llu,%llu) row %llu dim %u: "
                 "global_id %lld global_size %lld",
                 nd, (unsigned long long)g0, (unsigned long long)g1,
                 (unsigned long long)g2, (unsigned long long)row, d,
                 (long long)o[d], (long long)o[15 + d]);
      p = p * (uint64_t)G + (uint64_t)o[d];
    }
    for (int c = 3; c < 15; c++)
      if (o[c] != IDS_UNSET)
        fail_msg("ids_range: column %d written", c);
    if (o[19] != IDS_UNSET || o[20] != IDS_UNSET)
      fail_msg("ids_range: columns 19/20 written");
    if (seen[p]++)
      fail_msg("ids_range %uD: two work-items at the same point", nd);
  }
  free(seen);
  conf_free(out);
}

static void test_ids_range(void **state) {
  (void)state;
  xpj_kernel_info ki;
  assert_int_equal(
      xpj_kernel_get_info(conf_kernel("ids.xpk", "ids_range", NULL, 0), &ki),
      XPJ_OK);
  assert_int_equal(ki.kind, XPJ_FUNC_RANGE);
  assert_int_equal(ki.dims, 0);
  run_ids_range(1, 1, 1, 1, 0, 0, 0);
  run_ids_range(1, 1000, 1, 1, 0, 0, 0);
  run_ids_range(1, 1000, 1, 1, 64, 0, 0); /* ragged */
  run_ids_range(1, 4099, 1, 1, 256, 0, 0);
  run_ids_range(1, 255, 1, 1, 1000, 0, 0); /* hint above the size */
  run_ids_range(2, 37, 29, 1, 0, 0, 0);
  run_ids_range(2, 37, 29, 1, 16, 16, 0);
  run_ids_range(2, 1, 300, 1, 1, 64, 0);
  run_ids_range(3, 7, 9, 5, 0, 0, 0);
  run_ids_range(3, 7, 9, 5, 4, 4, 4);
  run_ids_range(3, 17, 3, 20, 8, 2, 8);
}

/* every work-item of ragged ranges runs exactly once */
static void test_ids_count_hits(void **state) {
  (void)state;
  xpj_kernel *k = conf_kernel("ids.xpk", "count_hits", NULL, 0);
  static const uint64_t rs[][7] = {
      {1, 65537, 1, 1, 64, 0, 0},    {1, 65537, 1, 1, 0, 0, 0},
      {1, 100003, 1, 1, 1024, 0, 0}, {2, 1000, 37, 1, 16, 16, 0},
      {2, 1, 4099, 1, 0, 0, 0},      {3, 17, 33, 65, 4, 4, 4},
      {3, 65, 1, 33, 0, 0, 0},       {3, 2, 3, 4099, 1, 1, 256}};
  for (size_t i = 0; i < sizeof rs / sizeof *rs; i++) {
    xpj_range r = {(unsigned)rs[i][0],
                   {rs[i][1], rs[i][2], rs[i][3]},
                   {rs[i][4], rs[i][5], rs[i][6]}};
    uint64_t total = rs[i][1] * rs[i][2] * rs[i][3];
    uint32_t *hits = conf_alloc((total + 16) * sizeof *hits);
    memset(hits, 0, (total + 16) * sizeof *hits);
    xpj_array ah = xpj_array_1d(hits, XPJ_U32, (int64_t)total + 16);
    xpj_arg args[] = {xpj_arg_array(&ah)};
    conf_run(k, r, 1, args);
    for (uint64_t j = 0; j < total + 16; j++)
      if (hits[j] != (j < total ? 1u : 0u))
        fail_msg("count_hits %uD (%llu,%llu,%llu) hint (%llu,%llu,%llu): "
                 "hits[%llu] = %u",
                 r.ndim, (unsigned long long)rs[i][1],
                 (unsigned long long)rs[i][2], (unsigned long long)rs[i][3],
                 (unsigned long long)rs[i][4], (unsigned long long)rs[i][5],
                 (unsigned long long)rs[i][6], (unsigned long long)j, hits[j]);
    conf_free(hits);
  }
}

/* xpj_kernel_suggest_local gives valid work-groups for many shapes */
static void test_ids_suggest_local(void **state) {
  (void)state;
  for (unsigned nd = 1; nd <= 3; nd++) {
    static const char *const names[] = {"", "ids_nd1", "ids_nd2", "ids_nd3"};
    xpj_kernel *k = conf_kernel("ids.xpk", names[nd], NULL, 0);
    for (int i = 0; i < 200; i++) {
      uint64_t g[3], l[3] = {0, 0, 0};
      for (unsigned d = 0; d < nd; d++) {
        uint64_t r = rnd64();
        g[d] = r % 3 == 0   ? 1 + rnd64() % 5000
               : r % 3 == 1 ? (uint64_t)1 << (rnd64() % 14)
                            : (1 + rnd64() % 64) * (1 + rnd64() % 64);
      }
      assert_int_equal(xpj_kernel_suggest_local(k, nd, g, l), XPJ_OK);
      ids_check_local(k, nd, g, l);
    }
  }
}

/* ---- control.xpk -------------------------------------------------------- */

/* rotate_group<i32 or f32> over n elements with work-groups of L (0: the
 * runtime chooses) and the reference, one group at a time */
static void run_rotate(int isf, size_t n, uint64_t L, int iters, int back,
                       int flip) {
  xpj_kernel *k =
      conf_kernel("control.xpk", "rotate_group", isf ? "T=f32" : "T=i32", 0);
  uint64_t loc = L;
  uint64_t G = L ? (n + L - 1) / L * L : n;
  if (!L)
    assert_int_equal(xpj_kernel_suggest_local(k, 1, &G, &loc), XPJ_OK);
  assert_true(loc <= 1024 && G % loc == 0);
  /* integers in [-1000, 1000]: exact in f32 through +1 and * 2 */
  int32_t *x = conf_alloc(n * 4), *y = conf_alloc(n * 4);
  int64_t *want = malloc(G * sizeof *want), *tt = malloc(loc * sizeof *tt);
  int64_t *tv = malloc(loc * sizeof *tv);
  assert_true(want && tt && tv);
  for (size_t i = 0; i < n; i++) {
    int32_t v = (int32_t)(rnd64() % 2001) - 1000;
    if (isf)
      ((float *)x)[i] = (float)v;
    else
      x[i] = v;
    y[i] = 0x7f7f7f7f;
  }
  for (uint64_t g0 = 0; g0 < G; g0 += loc) {
    for (uint64_t l = 0; l < loc; l++)
      tt[l] =
          g0 + l < n ? (isf ? (int64_t)((float *)x)[g0 + l] : x[g0 + l]) : 0;
    for (int it = 0; it < iters; it++) {
      for (uint64_t l = 0; l < loc; l++)
        tv[l] = tt[(l + 1) % loc] + 1;
      memcpy(tt, tv, loc * sizeof *tt);
    }
    for (int it = 0; it < back; it++) {
      for (uint64_t l = 0; l < loc; l++)
        tv[l] = tt[(l + loc - 1) % loc];
      memcpy(tt, tv, loc * sizeof *tt);
    }
    if (flip) {
      for (uint64_t l = 0; l < loc; l++)
        tv[l] = tt[loc - 1 - l];
      memcpy(tt, tv, loc * sizeof *tt);
    }
    if ((g0 / loc) % 2 == 1) {
      for (uint64_t l = 0; l < loc; l++)
        tv[l] = tt[(l + 2) % loc] * 2;
      memcpy(tt, tv, loc * sizeof *tt);
    }
    memcpy(want + g0, tt, loc * sizeof *tt);
  }
  xpj_scalar t = isf ? XPJ_F32 : XPJ_I32;
  xpj_array ax = xpj_array_1d(x, t, (int64_t)n),
            ay = xpj_array_1d(y, t, (int64_t)n);
  xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ay), xpj_arg_i32(iters),
                    xpj_arg_i32(back), xpj_arg_bool(flip)};
  conf_run(k, xpj_range_1d(G, L), 5, args);
  for (size_t i = 0; i < n; i++) {
    int64_t got = isf ? (int64_t)((float *)y)[i] : y[i];
    if (got != want[i] || (isf && ((float *)y)[i] != (float)want[i]))
      fail_msg("rotate_group %s n %zu local %llu iters %d back %d flip %d: "
               "y[%zu] = %lld, want %lld",
               isf ? "f32" : "i32", n, (unsigned long long)loc, iters, back,
               flip, i, (long long)got, (long long)want[i]);
  }
  free(want);
  free(tt);
  free(tv);
  conf_free(x);
  conf_free(y);
}

static void test_control_barriers(void **state) {
  (void)state;
  run_rotate(0, 1000, 64, 3, 2, 1);
  run_rotate(0, 1000, 64, 0, 0, 0);
  run_rotate(1, 1000, 64, 5, 1, 0);
  run_rotate(0, 4099, 256, 1, 7, 1);
  run_rotate(1, 4099, 1024, 2, 3, 1);
  run_rotate(0, 4099, 0, 2, 2, 0); /* runtime-chosen local size */
  run_rotate(1, 65537, 0, 1, 1, 1);
  run_rotate(0, 255, 1, 4, 4, 1); /* one work-item per group */
  run_rotate(1, 7, 7, 6, 9, 0);
  run_rotate(0, 1, 3, 2, 1, 1);
  run_rotate(1, 1000, 100, 10, 0, 1);
  run_rotate(0, 3000, 1000, 1, 1, 0);
}

static void test_control_early_exit(void **state) {
  (void)state;
  static const char *const dts[] = {"T=i32", "T=i64", "T=f32", "T=f64"};
  static const xpj_scalar ts[] = {XPJ_I32, XPJ_I64, XPJ_F32, XPJ_F64};
  for (int ti = 0; ti < 4; ti++) {
    xpj_kernel *k = conf_kernel("control.xpk", "early_exit", dts[ti], 0);
    xpj_scalar t = ts[ti];
    size_t es = bytes_t(t);
    for (unsigned si = 0; si < CONF_NSIZES; si++) {
      size_t n = conf_sizes[si];
      void *x = conf_alloc(n * es), *y = conf_alloc((n + 64) * es);
      if (is_float_t(t))
        rnd_fill(x, t, n, -1000, 1000);
      else
        rnd_fill(x, t, n, -1e6, 1e6);
      memset(y, 0x5a, (n + 64) * es);
      xpj_array ax = xpj_array_1d(x, t, (int64_t)n);
      xpj_array ay = xpj_array_1d(y, t, (int64_t)n);
      xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ay)};
      conf_run(k, xpj_range_1d(n + 1 + si * 13, si % 2 ? 64 : 0), 2, args);
      for (size_t i = 0; i < n + 64; i++) {
        int ok;
        if (i >= n) { /* past the view: untouched */
          ok = ((unsigned char *)y)[i * es] == 0x5a;
        } else if (is_float_t(t)) {
          int is64 = t == XPJ_F64;
          double v = ld(x, is64, i), want;
          if (i % 3 == 0) {
            want = -v;
          } else if (is64) {
            double acc = 0;
            for (size_t kk = 0; kk <= i % 5 + 3; kk++)
              if (kk != i % 7)
                acc += v;
            want = acc;
          } else {
            float acc = 0;
            for (size_t kk = 0; kk <= i % 5 + 3; kk++)
              if (kk != i % 7)
                acc += (float)v;
            want = acc;
          }
          ok = same_value(ld(y, is64, i), want, is64);
        } else {
          int64_t v = sext(ld_bits(x, t, i), width_t(t));
          int64_t cnt = (int64_t)(i % 5 + 4) - (i % 7 <= i % 5 + 3 ? 1 : 0);
          int64_t want = i % 3 == 0 ? -v : v * cnt;
          ok = ld_bits(y, t, i) == ((uint64_t)want & mask_w(width_t(t)));
        }
        if (!ok)
          fail_msg("early_exit %s n %zu: element %zu wrong", dts[ti], n, i);
      }
      conf_free(x);
      conf_free(y);
    }
  }
}

/* ---- errors.xpk: launch validation --------------------------------------- */

/* The launch must fail with XPJ_ERR_INVALID, no event, and a message that
 * has s1 and s2 (when not NULL). */
static void expect_invalid(const char *what, xpj_kernel *k, xpj_range r,
                           unsigned nargs, const xpj_arg *args, const char *s1,
                           const char *s2) {
  xpj_event *ev = (xpj_event *)&ev;
  xpj_status st = xpj_launch(C.q, k, &r, nargs, args, &ev);
  if (st != XPJ_ERR_INVALID)
    fail_msg("%s: launch returned %s, want XPJ_ERR_INVALID", what,
             xpj_status_name(st));
  if (ev)
    fail_msg("%s: a failed launch returned an event", what);
  if (s1 && !strstr(xpj_last_error(), s1))
    fail_msg("%s: message \"%s\" lacks \"%s\"", what, xpj_last_error(), s1);
  if (s2 && !strstr(xpj_last_error(), s2))
    fail_msg("%s: message \"%s\" lacks \"%s\"", what, xpj_last_error(), s2);
}

static void expect_get_kernel(const char *what, const char *name,
                              const char *dtypes, unsigned ndim,
                              xpj_status want, const char *s1, const char *s2) {
  xpj_kernel *k = (xpj_kernel *)&k;
  xpj_status st = xpj_program_get_kernel(conf_program("errors.xpk"), name,
                                         dtypes, ndim, C.dev, NULL, &k);
  if (st != want)
    fail_msg("%s: get_kernel returned %s, want %s (%s)", what,
             xpj_status_name(st), xpj_status_name(want), xpj_last_error());
  if (k)
    fail_msg("%s: a failed get_kernel returned a kernel", what);
  if (s1 && !strstr(xpj_last_error(), s1))
    fail_msg("%s: message \"%s\" lacks \"%s\"", what, xpj_last_error(), s1);
  if (s2 && !strstr(xpj_last_error(), s2))
    fail_msg("%s: message \"%s\" lacks \"%s\"", what, xpj_last_error(), s2);
}

static void test_errors_get_kernel(void **state) {
  (void)state;
  expect_get_kernel("unknown kernel", "no_such_kernel", NULL, 0,
                    XPJ_ERR_NOT_FOUND, "no_such_kernel", NULL);
  expect_get_kernel("unknown kernel (case)", "ErrK", NULL, 0, XPJ_ERR_NOT_FOUND,
                    "ErrK", NULL);
  expect_get_kernel("unknown dtype", "errgen", "T=f128", 1, XPJ_ERR_SPECIALIZE,
                    "f128", NULL);
  expect_get_kernel("unknown type parameter", "errgen", "U=f32", 1,
                    XPJ_ERR_SPECIALIZE, "'U'", NULL);
  expect_get_kernel("too many dtypes", "errgen", "f32,i32", 1,
                    XPJ_ERR_SPECIALIZE, "f32,i32", NULL);
  expect_get_kernel("no dtypes", "errgen", "", 1, XPJ_ERR_SPECIALIZE, "'T'",
                    NULL);
  expect_get_kernel("NULL dtypes", "errgen", NULL, 1, XPJ_ERR_SPECIALIZE, "'T'",
                    NULL);
  expect_get_kernel("bound twice", "errgen", "T=f32,T=i32", 1,
                    XPJ_ERR_SPECIALIZE, "'T'", NULL);
  expect_get_kernel("malformed dtypes", "errgen", "T=f32,", 1,
                    XPJ_ERR_SPECIALIZE, "T=f32,", NULL);
  expect_get_kernel("empty type", "errgen", "T=", 1, XPJ_ERR_SPECIALIZE, NULL,
                    NULL);
  expect_get_kernel("dtypes for a kernel without type parameters", "errk",
                    "T=f32", 0, XPJ_ERR_SPECIALIZE, "errk", NULL);
  expect_get_kernel("missing ndim", "errgen", "T=f32", 0, XPJ_ERR_SPECIALIZE,
                    "ndim", NULL);
  expect_get_kernel("ndim 9", "errgen", "T=f32", 9, XPJ_ERR_SPECIALIZE, "ndim",
                    NULL);
  /* and the good ones still come */
  xpj_kernel *k1 = conf_kernel("errors.xpk", "errgen", "T=f32", 2);
  xpj_kernel *k2 = conf_kernel("errors.xpk", "errgen", "f32", 2);
  assert_ptr_equal(k1, k2);
  xpj_kernel_arg_info ai;
  assert_int_equal(xpj_kernel_get_arg_info(k1, 0, &ai), XPJ_OK);
  assert_int_equal(ai.rank, 2);
  assert_int_equal(ai.dtype, XPJ_F32);
}

static void test_errors_launch(void **state) {
  (void)state;
  xpj_kernel *k = conf_kernel("errors.xpk", "errk", NULL, 0);
  xpj_kernel *k2d = conf_kernel("errors.xpk", "err2d", NULL, 0);
  xpj_kernel *knd = conf_kernel("errors.xpk", "errnd", NULL, 0);
  xpj_kernel *kid2 = conf_kernel("ids.xpk", "ids_nd2", NULL, 0);
  enum { N = 1000 };
  float *src = conf_alloc(N * 4), *dst = conf_alloc(N * 4);
  double *d64 = conf_alloc(N * 8);
  rnd_fill(src, XPJ_F32, N, -10, 10);
  for (size_t i = 0; i < N; i++)
    dst[i] = -1.0f;
  xpj_array as = xpj_array_1d(src, XPJ_F32, N),
            ad = xpj_array_1d(dst, XPJ_F32, N);
  xpj_range r = xpj_range_1d(N, 0);
  xpj_arg good[] = {xpj_arg_f32(2.0f), xpj_arg_array(&as), xpj_arg_array(&ad)};
  xpj_arg a[4];

  /* argument count */
  expect_invalid("2 args", k, r, 2, good, "wrong number of arguments",
                 "2 given");
  memcpy(a, good, sizeof good);
  a[3] = xpj_arg_f32(1.0f);
  expect_invalid("4 args", k, r, 4, a, "wrong number of arguments", "4 given");
  expect_invalid("0 args", k, r, 0, NULL, "wrong number of arguments", NULL);
  expect_invalid("NULL args", k, r, 3, NULL, "args", NULL);

  /* kind */
  memcpy(a, good, sizeof good);
  a[1] = xpj_arg_f32(1.0f);
  expect_invalid("scalar for an array", k, r, 3, a, "'src'",
                 "is an array, given a scalar");
  memcpy(a, good, sizeof good);
  a[0] = xpj_arg_array(&as);
  expect_invalid("array for a scalar", k, r, 3, a, "'alpha'",
                 "is a scalar, given an array");

  /* scalar dtype */
  static const xpj_scalar wrong[] = {XPJ_F64, XPJ_I32, XPJ_BOOL, XPJ_U64,
                                     XPJ_VOID};
  for (int i = 0; i < 5; i++) {
    memcpy(a, good, sizeof good);
    a[0].dtype = wrong[i];
    expect_invalid("scalar dtype", k, r, 3, a, "'alpha'", "is f32, given");
  }
  memcpy(a, good, sizeof good);
  a[0].dtype = (xpj_scalar)99;
  expect_invalid("scalar dtype 99", k, r, 3, a, "'alpha'", NULL);

  /* array dtype and rank */
  xpj_array bad = xpj_array_1d(d64, XPJ_F64, N);
  memcpy(a, good, sizeof good);
  a[1] = xpj_arg_array(&bad);
  expect_invalid("array dtype", k, r, 3, a, "'src'", "given an array of f64");
  bad = xpj_array_1d(dst, XPJ_I32, N);
  a[1] = xpj_arg_array(&bad);
  expect_invalid("array dtype i32", k, r, 3, a, "'src'", "i32");
  bad = xpj_array_2d(src, XPJ_F32, 10, 100);
  a[1] = xpj_arg_array(&bad);
  expect_invalid("rank 2 for rank 1", k, r, 3, a, "'src'", "rank");
  bad = xpj_array_1d(src, XPJ_F32, N);
  bad.ndim = 0;
  a[1] = xpj_arg_array(&bad);
  expect_invalid("rank 0", k, r, 3, a, "'src'", "rank");
  bad = xpj_array_1d(dst, XPJ_F32, N);
  xpj_arg g2[] = {xpj_arg_array(&bad)};
  expect_invalid("rank 1 for rank 2", k2d, xpj_range_2d(10, 10, 0, 0), 1, g2,
                 "'grid'", "rank");

  /* NULL array, NULL data */
  memcpy(a, good, sizeof good);
  a[2].array = NULL;
  expect_invalid("NULL array", k, r, 3, a, "'dst'", "NULL");
  bad = xpj_array_1d(NULL, XPJ_F32, N);
  a[2] = xpj_arg_array(&bad);
  expect_invalid("NULL data", k, r, 3, a, "'dst'", "NULL");

  /* the view outside its allocation */
  memcpy(a, good, sizeof good);
  bad = xpj_array_1d(dst, XPJ_F32, N + 1);
  a[2] = xpj_arg_array(&bad);
  expect_invalid("shape too big", k, r, 3, a, "'dst'", "allocation");
  bad = xpj_array_1d(dst, XPJ_F32, N);
  bad.strides[0] = 2;
  a[2] = xpj_arg_array(&bad);
  expect_invalid("stride too big", k, r, 3, a, "'dst'", "allocation");
  bad = xpj_array_1d(dst, XPJ_F32, N);
  bad.strides[0] = -1;
  a[2] = xpj_arg_array(&bad);
  expect_invalid("negative stride before the start", k, r, 3, a, "'dst'",
                 "allocation");
  bad.offset = N - 2; /* still one element before */
  expect_invalid("negative stride, offset one short", k, r, 3, a, "'dst'",
                 "allocation");
  bad = xpj_array_1d(dst, XPJ_F32, 1);
  bad.offset = N;
  a[2] = xpj_arg_array(&bad);
  expect_invalid("offset past the end", k, r, 3, a, "'dst'", "allocation");
  bad.offset = -1;
  expect_invalid("negative offset", k, r, 3, a, "'dst'", "allocation");
  /* data and the first element outside, the last one inside: the view
   * reaches into the allocation from before it (host memory is taken
   * unchecked, memory of an allocation only inside it) */
  bad = xpj_array_1d(dst - 1, XPJ_F32, 2);
  a[2] = xpj_arg_array(&bad);
  expect_invalid("from before the start", k, r, 3, a, "'dst'", "allocation");
  bad = xpj_array_1d(src, XPJ_F32, 10);
  bad.offset = INT64_MAX / 2;
  a[1] = xpj_arg_array(&bad);
  a[2] = xpj_arg_array(&ad);
  expect_invalid("huge offset", k, r, 3, a, "'src'", NULL);
  bad = xpj_array_1d(src, XPJ_F32, 10);
  bad.shape[0] = -5;
  expect_invalid("negative shape", k, r, 3, a, "'src'", NULL);
  bad = xpj_array_1d(src, XPJ_F32, INT64_MAX);
  expect_invalid("huge shape", k, r, 3, a, "'src'", NULL);
  bad = xpj_array_1d(src, XPJ_F32, 3);
  bad.strides[0] = INT64_MAX;
  expect_invalid("huge stride", k, r, 3, a, "'src'", NULL);
  /* a broadcast view (stride 0) touches one element whatever its shape;
   * shapes of 2^62 or more are refused all the same (GPU code counts on
   * smaller ones: XPJ_MAX_EXTENT) */
  bad = xpj_array_1d(src, XPJ_F32, (int64_t)1 << 62);
  bad.strides[0] = 0;
  expect_invalid("shape 2^62, stride 0", k, r, 3, a, "'src'", "2^62 or more");
  bad.shape[0] = ((int64_t)1 << 62) - 1; /* the largest: accepted */
  a[1] = xpj_arg_array(&bad);
  a[2] = xpj_arg_array(&ad);
  assert_int_equal(xpj_launch(C.q, k, &r, 3, a, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(C.q), XPJ_OK);
  assert_true(dst[N - 1] == 2.0f * src[0]);
  for (size_t i = 0; i < N; i++) /* as the rejected launches must leave it */
    dst[i] = -1.0f;
  a[1] = xpj_arg_array(&as);
  bad = xpj_array_2d(src, XPJ_F32, 10, 100);
  bad.strides[1] = 10; /* reaches 9 * 100 + 99 * 10 */
  xpj_arg g2b[] = {xpj_arg_array(&bad)};
  expect_invalid("2-D view outside", k2d, xpj_range_2d(10, 100, 0, 0), 1, g2b,
                 "'grid'", "allocation");

  /* misaligned data */
  memcpy(a, good, sizeof good);
  bad = xpj_array_1d((char *)dst + 1, XPJ_F32, N - 1);
  a[2] = xpj_arg_array(&bad);
  expect_invalid("misaligned data", k, r, 3, a, "'dst'", "aligned");
  bad = xpj_array_1d((char *)src + 2, XPJ_F32, N - 1);
  a[1] = xpj_arg_array(&bad);
  a[2] = xpj_arg_array(&ad);
  expect_invalid("misaligned data by 2", k, r, 3, a, "'src'", "aligned");

  /* geometry */
  expect_invalid("global size 0", k, xpj_range_1d(0, 0), 3, good,
                 "global size is 0", "dimension 0");
  expect_invalid("global size 0 in dim 1", k, xpj_range_2d(10, 0, 0, 0), 3,
                 good, "global size is 0", "dimension 1");
  expect_invalid("global size 0 in dim 2", k, xpj_range_3d(10, 10, 0, 0, 0, 0),
                 3, good, "global size is 0", "dimension 2");
  expect_invalid("global size UINT64_MAX", k, xpj_range_1d(UINT64_MAX, 0), 3,
                 good, "global size", NULL);
  expect_invalid("global size 2^62 + 1", k, xpj_range_1d((1ull << 62) + 1, 0),
                 3, good, "global size", NULL);
  expect_invalid("global product 2^63", k,
                 xpj_range_3d(1ull << 21, 1ull << 21, 1ull << 21, 0, 0, 0), 3,
                 good, "global size", NULL);
  expect_invalid("global product 2^64 (wraps to 0)", k,
                 xpj_range_2d(1ull << 32, 1ull << 32, 0, 0), 3, good,
                 "global size", NULL);
  xpj_range r0 = r;
  r0.ndim = 0;
  expect_invalid("ndim 0", k, r0, 3, good, "ndim", NULL);
  xpj_range r4 = xpj_range_3d(10, 10, 10, 0, 0, 0);
  r4.ndim = 4;
  expect_invalid("ndim 4", k, r4, 3, good, "ndim", NULL);

  /* dimensions against the kernel's declaration */
  xpj_array grid = xpj_array_2d(dst, XPJ_F32, 10, 100);
  xpj_arg gg[] = {xpj_arg_array(&grid)};
  expect_invalid("1-D range for range(2)", k2d, xpj_range_1d(10, 0), 1, gg,
                 "1-dimensional", "2 dimensions");
  expect_invalid("3-D range for range(2)", k2d,
                 xpj_range_3d(10, 10, 1, 0, 0, 0), 1, gg, "3-dimensional",
                 "2 dimensions");
  xpj_array av = xpj_array_1d(dst, XPJ_F32, N);
  xpj_arg gv[] = {xpj_arg_array(&av)};
  expect_invalid("2-D range for ndrange(1)", knd, xpj_range_2d(64, 2, 64, 1), 1,
                 gv, "2-dimensional", "1 dimension");

  /* nd-range local sizes */
  expect_invalid("local does not divide global", knd, xpj_range_1d(100, 64), 1,
                 gv, "not a multiple", "64");
  expect_invalid("local above global", knd, xpj_range_1d(32, 64), 1, gv,
                 "not a multiple", NULL);
  int64_t ids_shape[2] = {1, 21};
  int64_t *ids_out = conf_alloc(21 * 8);
  xpj_array aid = xpj_array_nd(ids_out, XPJ_I64, 2, ids_shape);
  xpj_arg gid[] = {xpj_arg_array(&aid)};
  expect_invalid("global product 2^63 nd-range", kid2,
                 xpj_range_2d(1ull << 31, 1ull << 32, 1, 1), 1, gid,
                 "global size", NULL);
  expect_invalid("2-D local does not divide", kid2, xpj_range_2d(64, 30, 8, 8),
                 1, gid, "not a multiple", "dimension 1");
  expect_invalid("local given in one dimension only", kid2,
                 xpj_range_2d(64, 64, 8, 0), 1, gid, "local size is 0", NULL);
  expect_invalid("local given in dimension 1 only", kid2,
                 xpj_range_2d(64, 64, 0, 8), 1, gid, "local size is 0", NULL);
  xpj_range r3 = xpj_range_3d(8, 8, 8, 2, 2, 0);
  expect_invalid("local 0 in dimension 2 of a 3-D range", k, r3, 3, good,
                 "local size is 0", NULL);
  uint64_t mx = C.info.max_work_group_size;
  char num[32];
  snprintf(num, sizeof num, "%llu", (unsigned long long)(2 * mx));
  expect_invalid("local size above the maximum", knd,
                 xpj_range_1d(4 * mx, 2 * mx), 1, gv, num, NULL);
  /* each dimension within its limit, the product above the maximum */
  uint64_t l0 = 1;
  while (l0 * 2 <= mx && l0 * 2 <= C.info.max_work_item_sizes[0])
    l0 *= 2;
  uint64_t l1 = (mx / l0 + 1);
  if (l1 <= C.info.max_work_item_sizes[1]) {
    snprintf(num, sizeof num, "%llu", (unsigned long long)(l0 * l1));
    expect_invalid("work-group above the maximum", kid2,
                   xpj_range_2d(l0, l1, l0, l1), 1, gid, "work-group size",
                   num);
  }

  /* nothing ran, no error is pending, and the queue still works */
  assert_int_equal(xpj_queue_wait(C.q), XPJ_OK);
  for (size_t i = 0; i < N; i++)
    if (dst[i] != -1.0f)
      fail_msg("dst[%zu] changed by a rejected launch", i);
  conf_run(k, r, 3, good);
  for (size_t i = 0; i < N; i++)
    if (dst[i] != 2.0f * src[i])
      fail_msg("errk after the errors: dst[%zu] = %a, want %a", i, dst[i],
               2.0f * src[i]);
  /* a view with a negative stride inside the allocation: dst reversed */
  xpj_array rev = xpj_array_1d(dst, XPJ_F32, N);
  rev.offset = N - 1;
  rev.strides[0] = -1;
  xpj_arg ra[] = {xpj_arg_f32(-0.5f), xpj_arg_array(&as), xpj_arg_array(&rev)};
  conf_run(k, xpj_range_1d(N + 3, 0), 3, ra);
  for (size_t i = 0; i < N; i++)
    if (dst[N - 1 - i] != -0.5f * src[i])
      fail_msg("errk reversed: dst[%zu] = %a, want %a", N - 1 - i,
               dst[N - 1 - i], -0.5f * src[i]);
  /* a whole-allocation view at an offset, and the nd-range kernel */
  xpj_array tail = xpj_array_1d(dst, XPJ_F32, 1);
  tail.offset = N - 1;
  xpj_arg ta[] = {xpj_arg_f32(3.0f), xpj_arg_array(&as), xpj_arg_array(&tail)};
  conf_run(k, xpj_range_1d(1, 0), 3, ta);
  assert_true(dst[N - 1] == 3.0f * src[0]);
  conf_run(knd, xpj_range_1d(1024, 64), 1, gv);
  for (size_t i = 0; i < N; i++)
    assert_true(dst[i] == 1.0f);
  conf_free(ids_out);
  conf_free(src);
  conf_free(dst);
  conf_free(d64);
}

/* ---- scalars.xpk ------------------------------------------------------ */

static void check_all_scalars(xpj_kernel *k, int bv, int8_t a8, int16_t a16,
                              int32_t a32, int64_t a64, uint8_t b8,
                              uint16_t b16, uint32_t b32, uint64_t b64, float f,
                              double d, int64_t *ints, uint64_t *uints,
                              double *floats) {
  for (int i = 0; i < 10; i++)
    ints[i] = (int64_t)0x5a5a5a5a5a5a5a5all;
  for (int i = 0; i < 8; i++)
    uints[i] = 0xa5a5a5a5a5a5a5a5ull;
  for (int i = 0; i < 4; i++)
    floats[i] = -12345.0;
  xpj_array ai = xpj_array_1d(ints, XPJ_I64, 10);
  xpj_array au = xpj_array_1d(uints, XPJ_U64, 8);
  xpj_array af = xpj_array_1d(floats, XPJ_F64, 4);
  xpj_arg args[] = {xpj_arg_bool(bv),   xpj_arg_i8(a8),    xpj_arg_i16(a16),
                    xpj_arg_i32(a32),   xpj_arg_i64(a64),  xpj_arg_u8(b8),
                    xpj_arg_u16(b16),   xpj_arg_u32(b32),  xpj_arg_u64(b64),
                    xpj_arg_f32(f),     xpj_arg_f64(d),    xpj_arg_array(&ai),
                    xpj_arg_array(&au), xpj_arg_array(&af)};
  conf_run(k, xpj_range_1d(3, 0), 14, args);
  int64_t wi[10] = {bv ? 1 : 0,
                    a8,
                    a16,
                    a32,
                    a64,
                    (int8_t)(uint8_t)(a8 + 100),
                    (int16_t)(uint16_t)(a16 * 3),
                    (int32_t)((uint32_t)a32 - 7u),
                    (int64_t)((uint64_t)a64 * 5u),
                    bv ? 1 : 0};
  uint64_t wu[8] = {b8,
                    b16,
                    b32,
                    b64,
                    (uint8_t)(b8 + 200),
                    (uint16_t)(b16 * 7),
                    (uint32_t)(b32 + 0xfffffff0u),
                    b64 + 17};
  float f3 = f * 3.0f;
  double wf[4] = {(double)f, d, (double)f3, d / 3.0};
  for (int i = 0; i < 10; i++)
    if (ints[i] != wi[i])
      fail_msg("all_scalars ints[%d] = %lld, want %lld (a8 %d a16 %d a32 %d "
               "a64 %lld)",
               i, (long long)ints[i], (long long)wi[i], a8, a16, a32,
               (long long)a64);
  for (int i = 0; i < 8; i++)
    if (uints[i] != wu[i])
      fail_msg("all_scalars uints[%d] = %llu, want %llu (b8 %u b16 %u b32 %u "
               "b64 %llu)",
               i, (unsigned long long)uints[i], (unsigned long long)wu[i], b8,
               b16, b32, (unsigned long long)b64);
  for (int i = 0; i < 4; i++)
    if (memcmp(&floats[i], &wf[i], sizeof(double)) &&
        !(isnan(floats[i]) && isnan(wf[i])))
      fail_msg("all_scalars floats[%d] = %a, want %a (f %a d %a)", i, floats[i],
               wf[i], f, d);
}

static void test_scalars_all(void **state) {
  (void)state;
  xpj_kernel *k = conf_kernel("scalars.xpk", "all_scalars", NULL, 0);
  int64_t *ints = conf_alloc(10 * sizeof *ints);
  uint64_t *uints = conf_alloc(8 * sizeof *uints);
  double *floats = conf_alloc(4 * sizeof *floats);
  /* the extremes of every type */
  check_all_scalars(k, 1, INT8_MIN, INT16_MIN, INT32_MIN, INT64_MIN, 0, 0, 0, 0,
                    -FLT_MAX, -DBL_MAX, ints, uints, floats);
  check_all_scalars(k, 0, INT8_MAX, INT16_MAX, INT32_MAX, INT64_MAX, UINT8_MAX,
                    UINT16_MAX, UINT32_MAX, UINT64_MAX, FLT_MAX, DBL_MAX, ints,
                    uints, floats);
  check_all_scalars(k, 1, -1, -1, -1, -1, 1, 1, 1, 1, -0.0f, -0.0, ints, uints,
                    floats);
  check_all_scalars(k, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x1p-149f, 0x1p-1074, ints,
                    uints, floats);
  check_all_scalars(k, 1, 28, 10923, 7, 1844674407370955162ll, 56, 9363, 16,
                    UINT64_MAX - 16, INFINITY, -INFINITY, ints, uints, floats);
  check_all_scalars(k, 0, 1, 1, 1, 1, 1, 1, 1, 1, NAN, NAN, ints, uints,
                    floats);
  /* random values */
  for (int r = 0; r < 50; r++) {
    uint64_t v = rnd64();
    check_all_scalars(k, (int)(v & 1), (int8_t)rnd64(), (int16_t)rnd64(),
                      (int32_t)rnd64(), (int64_t)rnd64(), (uint8_t)rnd64(),
                      (uint16_t)rnd64(), (uint32_t)rnd64(), rnd64(),
                      (float)rnd_real(-1e6, 1e6), rnd_real(-1e300, 1e300), ints,
                      uints, floats);
  }
  conf_free(ints);
  conf_free(uints);
  conf_free(floats);
}

static void test_scalars_small_types(void **state) {
  (void)state;
  xpj_kernel *k = conf_kernel("scalars.xpk", "small_types", NULL, 0);
  for (unsigned si = 0; si < CONF_NSIZES; si++) {
    size_t n = conf_sizes[si];
    uint8_t *mask = conf_alloc(n), *a = conf_alloc(n), *ou8 = conf_alloc(n);
    uint8_t *ob = conf_alloc(n);
    int16_t *b = conf_alloc(n * 2), *oi16 = conf_alloc(n * 2);
    for (size_t i = 0; i < n; i++) {
      uint64_t v = rnd64();
      mask[i] = v & 1;
      a[i] = (uint8_t)(v >> 8);
      b[i] = (int16_t)(v >> 16);
      ou8[i] = 0x5a;
      oi16[i] = 0x5a5a;
      ob[i] = 0x5a;
    }
    if (n > 4) { /* edges */
      a[0] = 0;
      a[1] = 255;
      b[2] = INT16_MIN;
      b[3] = INT16_MAX;
    }
    for (int flag = 0; flag < 2; flag++) {
      uint8_t kk = (uint8_t)rnd64();
      int16_t s = (int16_t)rnd64();
      if (si == 0) {
        kk = 255;
        s = INT16_MIN;
      }
      xpj_array am = xpj_array_1d(mask, XPJ_BOOL, (int64_t)n);
      xpj_array aa = xpj_array_1d(a, XPJ_U8, (int64_t)n);
      xpj_array ab = xpj_array_1d(b, XPJ_I16, (int64_t)n);
      xpj_array aou8 = xpj_array_1d(ou8, XPJ_U8, (int64_t)n);
      xpj_array aoi16 = xpj_array_1d(oi16, XPJ_I16, (int64_t)n);
      xpj_array aob = xpj_array_1d(ob, XPJ_BOOL, (int64_t)n);
      xpj_arg args[] = {
          xpj_arg_array(&am),   xpj_arg_array(&aa),    xpj_arg_array(&ab),
          xpj_arg_bool(flag),   xpj_arg_u8(kk),        xpj_arg_i16(s),
          xpj_arg_array(&aou8), xpj_arg_array(&aoi16), xpj_arg_array(&aob)};
      conf_run(k, xpj_range_1d(n + 5, 0), 9, args);
      for (size_t i = 0; i < n; i++) {
        uint8_t w8 = mask[i] ? (uint8_t)(a[i] + kk) : (uint8_t)(a[i] - kk);
        int16_t w16 = flag ? (int16_t)(uint16_t)((uint16_t)b[i] * (uint16_t)s)
                           : (int16_t)(uint16_t)((uint16_t)b[i] + (uint16_t)s);
        uint8_t wb = (uint8_t)((mask[i] != flag) ^ (a[i] > kk));
        if (ou8[i] != w8 || oi16[i] != w16 || ob[i] != wb)
          fail_msg("small_types n %zu i %zu (mask %u a %u b %d flag %d k %u "
                   "s %d): got %u %d %u, want %u %d %u",
                   n, i, mask[i], a[i], b[i], flag, kk, s, ou8[i], oi16[i],
                   ob[i], w8, w16, wb);
      }
    }
    conf_free(mask);
    conf_free(a);
    conf_free(ou8);
    conf_free(ob);
    conf_free(b);
    conf_free(oi16);
  }
}

/* ---- limits of T (scalars.xpk) --------------------------------------- */

/* Runs int_limits or float_limits for dtype over x[0..n) into out[0..8)
 * (elements of bytes each). */
static void run_limits(const char *kernel, const char *dtype, xpj_scalar s,
                       const void *x, size_t n, void *out, size_t bytes) {
  xpj_kernel *k = conf_kernel("scalars.xpk", kernel, dtype, 0);
  void *dx = conf_alloc(n * bytes), *dout = conf_alloc(8 * bytes);
  memcpy(dx, x, n * bytes);
  memset(dout, 0x5a, 8 * bytes);
  xpj_array ax = xpj_array_1d(dx, s, (int64_t)n);
  xpj_array ao = xpj_array_1d(dout, s, 8);
  xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ao)};
  conf_run(k, xpj_range_1d(1, 0), 2, args);
  memcpy(out, dout, 8 * bytes);
  conf_free(dx);
  conf_free(dout);
}

/* Every integer dtype: max_value and min_value against <stdint.h>, and a
 * running minimum and maximum started from them. */
static void test_limits_int(void **state) {
  (void)state;
  static const struct {
    const char *name;
    xpj_scalar s;
    unsigned bytes;
    int is_signed;
  } ty[] = {{"i8", XPJ_I8, 1, 1},   {"i16", XPJ_I16, 2, 1},
            {"i32", XPJ_I32, 4, 1}, {"i64", XPJ_I64, 8, 1},
            {"u8", XPJ_U8, 1, 0},   {"u16", XPJ_U16, 2, 0},
            {"u32", XPJ_U32, 4, 0}, {"u64", XPJ_U64, 8, 0}};
  for (size_t t = 0; t < sizeof ty / sizeof *ty; t++) {
    unsigned bits = ty[t].bytes * 8;
    int64_t wmax = ty[t].is_signed ? (int64_t)((UINT64_C(1) << (bits - 1)) - 1)
                   : bits == 64    ? -1
                                   : (int64_t)((UINT64_C(1) << bits) - 1);
    int64_t wmin = ty[t].is_signed ? -wmax - 1 : 0;
    uint8_t x[64 * 8], out[8 * 8];
    for (size_t i = 0; i < sizeof x; i++)
      x[i] = (uint8_t)rnd64();
    run_limits("int_limits", ty[t].name, ty[t].s, x, 64, out, ty[t].bytes);
    int64_t got[8], xv[64];
    for (int i = 0; i < 8; i++)
      got[i] = conf_load_int(out + i * ty[t].bytes, ty[t].bytes,
                             ty[t].is_signed);
    for (int i = 0; i < 64; i++)
      xv[i] = conf_load_int(x + i * ty[t].bytes, ty[t].bytes, ty[t].is_signed);
    int64_t lo = xv[0], hi = xv[0];
    for (int i = 1; i < 64; i++) {
      int less = ty[t].is_signed ? xv[i] < lo : (uint64_t)xv[i] < (uint64_t)lo;
      int more = ty[t].is_signed ? xv[i] > hi : (uint64_t)xv[i] > (uint64_t)hi;
      lo = less ? xv[i] : lo;
      hi = more ? xv[i] : hi;
    }
    if (got[0] != wmax || got[1] != wmin || got[6] != lo || got[7] != hi)
      fail_msg("%s limits: max %lld min %lld running min %lld max %lld; want "
               "%lld %lld %lld %lld", ty[t].name, (long long)got[0],
               (long long)got[1], (long long)got[6], (long long)got[7],
               (long long)wmax, (long long)wmin, (long long)lo, (long long)hi);
  }
}

/* f32 and f64: the six limits against <float.h>. */
static void test_limits_float(void **state) {
  (void)state;
  float xf[16], of[8];
  double xd[16], od[8];
  for (int i = 0; i < 16; i++)
    xd[i] = (double)(xf[i] = (float)rnd_real(-1e6, 1e6));
  run_limits("float_limits", "f32", XPJ_F32, xf, 16, of, 4);
  run_limits("float_limits", "f64", XPJ_F64, xd, 16, od, 8);
  float wf[] = {FLT_MAX, -FLT_MAX, FLT_MIN, FLT_EPSILON, INFINITY};
  double wd[] = {DBL_MAX, -DBL_MAX, DBL_MIN, DBL_EPSILON, INFINITY};
  float mf = xf[0];
  for (int i = 1; i < 16; i++)
    mf = xf[i] < mf ? xf[i] : mf;
  for (int i = 0; i < 5; i++) {
    if (memcmp(&of[i], &wf[i], 4))
      fail_msg("f32 limit %d: %a, want %a", i, (double)of[i], (double)wf[i]);
    if (memcmp(&od[i], &wd[i], 8))
      fail_msg("f64 limit %d: %a, want %a", i, od[i], wd[i]);
  }
  if (!isnan(of[5]) || !isnan(od[5]))
    fail_msg("nan(T): %a %a", (double)of[5], od[5]);
  if (of[6] != mf || od[6] != (double)mf)
    fail_msg("running min from max_value: %a %a, want %a", (double)of[6],
             od[6], (double)mf);
  if (of[7] != 1 || od[7] != 1)
    fail_msg("limit relations in the kernel: %g %g", (double)of[7], od[7]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_limits_int),
      cmocka_unit_test(test_limits_float),
      cmocka_unit_test(test_math1_f32),
      cmocka_unit_test(test_math1_f64),
      cmocka_unit_test(test_math2_f32),
      cmocka_unit_test(test_math2_f64),
      cmocka_unit_test(test_classify),
      cmocka_unit_test(test_intops_i32),
      cmocka_unit_test(test_intops_i64),
      cmocka_unit_test(test_intops_u32),
      cmocka_unit_test(test_intops_u64),
      cmocka_unit_test(test_hand_mul_hi),
      cmocka_unit_test(test_intops_small),
      cmocka_unit_test(test_convert),
      cmocka_unit_test(test_scalars_all),
      cmocka_unit_test(test_scalars_small_types),
      cmocka_unit_test(test_ids_nd1),
      cmocka_unit_test(test_ids_nd2),
      cmocka_unit_test(test_ids_nd3),
      cmocka_unit_test(test_ids_range),
      cmocka_unit_test(test_ids_count_hits),
      cmocka_unit_test(test_ids_suggest_local),
      cmocka_unit_test(test_control_barriers),
      cmocka_unit_test(test_control_early_exit),
      cmocka_unit_test(test_errors_get_kernel),
      cmocka_unit_test(test_errors_launch),
  };
  return cmocka_run_group_tests(tests, conf_setup, conf_teardown);
}
