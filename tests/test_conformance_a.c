/* test_conformance_a.c - conformance suite, part A: the kernels of
 * tests/conformance/{elementwise,reduce,histogram,matmul,transpose,scan,
 * stencil,sort,atomics,private,functions}.xpk, each checked against a plain
 * C reference on random non-zero inputs, over several sizes (not multiples
 * of the work-group size), several work-group sizes (and 0: the runtime
 * chooses) and at least two dtypes per generic kernel.
 *
 * Comparisons are exact (bit for bit) where the kernel performs the same
 * operations in the same order as the reference (the language promises
 * IEEE arithmetic without contraction or reassociation unless fast-math is
 * requested; this file is compiled with -std=c11, where GCC does not
 * contract either). Where the kernel reorders a sum (reductions, scans,
 * float atomics) the tolerance is stated next to the check.
 *
 * Run from the repository root; XPJIT_TEST_DEVICE selects the device. */
#include "conformance/common.h"

#include <float.h>

/* ---- helpers ---------------------------------------------------------- */

#define NELEMS(a) (sizeof(a) / sizeof *(a))

static size_t dt_size(xpj_scalar t) {
  switch (t) {
  case XPJ_U8:
    return 1;
  case XPJ_I32:
  case XPJ_U32:
  case XPJ_F32:
    return 4;
  case XPJ_I64:
  case XPJ_U64:
  case XPJ_F64:
    return 8;
  default:
    fail_msg("dt_size: dtype %s", xpj_scalar_name(t));
  }
  return 0;
}

static int dt_float(xpj_scalar t) { return t == XPJ_F32 || t == XPJ_F64; }

/* element i of p as a double (floats) or an integer (the others) */
static double ld_f(const void *p, xpj_scalar t, int64_t i) {
  return t == XPJ_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

static int64_t ld_i(const void *p, xpj_scalar t, int64_t i) {
  switch (t) {
  case XPJ_I32:
    return ((const int32_t *)p)[i];
  case XPJ_U32:
    return ((const uint32_t *)p)[i];
  case XPJ_I64:
    return ((const int64_t *)p)[i];
  case XPJ_U64:
    return (int64_t)((const uint64_t *)p)[i];
  case XPJ_U8:
    return ((const uint8_t *)p)[i];
  default:
    fail_msg("ld_i: dtype %s", xpj_scalar_name(t));
  }
  return 0;
}

/* element i of p, printed */
static const char *fmt_el(char *buf, size_t cap, const void *p, xpj_scalar t,
                          int64_t i) {
  if (dt_float(t))
    snprintf(buf, cap, "%.17g", ld_f(p, t, i));
  else if (t == XPJ_U64)
    snprintf(buf, cap, "%llu", (unsigned long long)((const uint64_t *)p)[i]);
  else
    snprintf(buf, cap, "%lld", (long long)ld_i(p, t, i));
  return buf;
}

/* what a check is about, for failure messages */
typedef struct ctx_s {
  const char *kernel;
  xpj_scalar t;
  char size[256]; /* "n=1000", "7x13", ... */
  char local[64]; /* "local=16", "local=0", ... */
} ctx_s;

static ctx_s cx(const char *kernel, xpj_scalar t, const char *size,
                const char *local) {
  ctx_s c;
  c.kernel = kernel;
  c.t = t;
  snprintf(c.size, sizeof c.size, "%s", size);
  snprintf(c.local, sizeof c.local, "%s", local);
  return c;
}

static ctx_s cx1(const char *kernel, xpj_scalar t, uint64_t n, uint64_t l) {
  char s[64], lo[64];
  snprintf(s, sizeof s, "n=%llu", (unsigned long long)n);
  snprintf(lo, sizeof lo, "local=%llu", (unsigned long long)l);
  return cx(kernel, t, s, lo);
}

/* Exact check: got[i] and want[i] are the same bits for i < n. */
static void check_exact(const ctx_s *c, const void *got, const void *want,
                        size_t n) {
  size_t es = dt_size(c->t);
  for (size_t i = 0; i < n; i++) {
    if (memcmp((const char *)got + i * es, (const char *)want + i * es, es)) {
      char g[64], w[64], u[48] = "";
      if (c->t == XPJ_F32)
        snprintf(u, sizeof u, " (%.3g ulp)",
                 ulps_f32(((const float *)got)[i], ((const float *)want)[i]));
      else if (c->t == XPJ_F64)
        snprintf(u, sizeof u, " (%.3g ulp)",
                 ulps_f64(((const double *)got)[i], ((const double *)want)[i]));
      fail_msg("%s [%s] %s %s: first bad index %zu: got %s, want %s%s",
               c->kernel, xpj_scalar_name(c->t), c->size, c->local, i,
               fmt_el(g, sizeof g, got, c->t, (int64_t)i),
               fmt_el(w, sizeof w, want, c->t, (int64_t)i), u);
    }
  }
}

/* Float check with a per-element absolute tolerance tol[i]; want in long
 * double. */
static void check_close(const ctx_s *c, const void *got,
                        const long double *want, const long double *tol,
                        size_t n) {
  for (size_t i = 0; i < n; i++) {
    double g = ld_f(got, c->t, (int64_t)i);
    if (!(fabsl((long double)g - want[i]) <= tol[i]))
      fail_msg("%s [%s] %s %s: first bad index %zu: got %.17g, want %.17Lg "
               "(tolerance %.3Lg)",
               c->kernel, xpj_scalar_name(c->t), c->size, c->local, i, g,
               want[i], tol[i]);
  }
}

static double dt_eps(xpj_scalar t) {
  return t == XPJ_F32 ? FLT_EPSILON : DBL_EPSILON;
}

static uint64_t round_up(uint64_t n, uint64_t m) { return (n + m - 1) / m * m; }
static uint64_t min_u(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* The work-group size the kernel may use on this device. */
static uint64_t kmax_wg(xpj_kernel *k) {
  xpj_kernel_info ki;
  assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
  return ki.max_work_group_size;
}

/* Local sizes tried for 1-D launches (0: the runtime chooses). */
static const uint64_t locals_1d[] = {0, 1, 16, 64, 256};

static const char *dts(xpj_scalar t) { return xpj_scalar_name(t); }

/* An argument for a scalar of dtype t with value v (converted to t). */
static xpj_arg arg_num(xpj_scalar t, double v) {
  switch (t) {
  case XPJ_F32:
    return xpj_arg_f32((float)v);
  case XPJ_F64:
    return xpj_arg_f64(v);
  case XPJ_I32:
    return xpj_arg_i32((int32_t)v);
  case XPJ_I64:
    return xpj_arg_i64((int64_t)v);
  case XPJ_U32:
    return xpj_arg_u32((uint32_t)v);
  case XPJ_U64:
    return xpj_arg_u64((uint64_t)v);
  default:
    fail_msg("arg_num: dtype %s", xpj_scalar_name(t));
  }
  return xpj_arg_i32(0);
}

/* ---- elementwise.xpk: vadd, saxpy ------------------------------------- */

/* c = a + b in type t, elementwise, for n elements */
static void ref_add(xpj_scalar t, const void *a, const void *b, void *c,
                    size_t n) {
  for (size_t i = 0; i < n; i++) {
    switch (t) {
    case XPJ_F32:
      ((float *)c)[i] = ((const float *)a)[i] + ((const float *)b)[i];
      break;
    case XPJ_F64:
      ((double *)c)[i] = ((const double *)a)[i] + ((const double *)b)[i];
      break;
    case XPJ_I32:
      ((int32_t *)c)[i] = ((const int32_t *)a)[i] + ((const int32_t *)b)[i];
      break;
    case XPJ_I64:
      ((int64_t *)c)[i] = ((const int64_t *)a)[i] + ((const int64_t *)b)[i];
      break;
    default:
      fail_msg("ref_add: %s", dts(t));
    }
  }
}

static void test_vadd(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_F32, XPJ_F64, XPJ_I32, XPJ_I64};
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    xpj_kernel *k = conf_kernel("elementwise.xpk", "vadd", dts(t), 0);
    size_t es = dt_size(t);
    for (size_t si = 0; si < CONF_NSIZES; si++) {
      uint64_t n = conf_sizes[si];
      void *a = conf_alloc(n * es), *b = conf_alloc(n * es),
           *c = conf_alloc(n * es), *want = malloc(n * es);
      double lim = dt_float(t) ? 1000 : 1e6;
      rnd_fill(a, t, n, -lim, lim);
      rnd_fill(b, t, n, -lim, lim);
      ref_add(t, a, b, want, n);
      xpj_array aa = xpj_array_1d(a, t, (int64_t)n),
                ab = xpj_array_1d(b, t, (int64_t)n),
                ac = xpj_array_1d(c, t, (int64_t)n);
      xpj_arg args[] = {xpj_arg_array(&aa), xpj_arg_array(&ab),
                        xpj_arg_array(&ac)};
      for (size_t li = 0; li < NELEMS(locals_1d); li++) {
        uint64_t l = locals_1d[li];
        rnd_fill(c, t, n, -1, 1); /* stale values must be overwritten */
        /* with a local hint, more work-items than elements: the kernel's
         * bounds check skips the extra ones */
        conf_run(k, xpj_range_1d(l ? round_up(n, l) : n, l), 3, args);
        ctx_s cc = cx1("vadd", t, n, l);
        check_exact(&cc, c, want, n);
      }
      conf_free(a);
      conf_free(b);
      conf_free(c);
      free(want);
    }
  }
}

/* Loops over shape() with unannotated counters (i32 widened to i64 in
 * the comparison, a u32 step widened in the index), every dtype. */
static void test_row_sums(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_F32, XPJ_F64, XPJ_I32, XPJ_I64, XPJ_U32};
  enum { NR = 37, NC = 29 };
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    xpj_kernel *k = conf_kernel("elementwise.xpk", "row_sums", dts(t), 0);
    size_t es = dt_size(t);
    void *x = conf_alloc(NR * NC * es), *out = conf_alloc(NR * es);
    rnd_fill(x, t, NR * NC, -100, 100);
    xpj_array ax = xpj_array_2d(x, t, NR, NC), ao = xpj_array_1d(out, t, NR);
    xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ao),
                      xpj_arg_u32(1)};
    conf_run(k, xpj_range_1d(NR, 0), 3, args);
    for (int r = 0; r < NR; r++) {
      double want = 0, got;
      for (int c = 0; c < NC; c++)
        want += t == XPJ_F32 ? ((float *)x)[r * NC + c]
                : t == XPJ_F64 ? ((double *)x)[r * NC + c]
                : t == XPJ_I32 ? ((int32_t *)x)[r * NC + c]
                : t == XPJ_I64 ? (double)((int64_t *)x)[r * NC + c]
                               : ((uint32_t *)x)[r * NC + c];
      got = t == XPJ_F32 ? ((float *)out)[r]
            : t == XPJ_F64 ? ((double *)out)[r]
            : t == XPJ_I32 ? ((int32_t *)out)[r]
            : t == XPJ_I64 ? (double)((int64_t *)out)[r]
                           : ((uint32_t *)out)[r];
      if (t == XPJ_U32)
        want = (double)(uint32_t)(int64_t)want;
      if (fabs(got - want) > 1e-3 * (1 + fabs(want)))
        fail_msg("row_sums %s row %d: %g, want %g", xpj_scalar_name(t), r,
                 got, want);
    }
    conf_free(x);
    conf_free(out);
  }
}

static void test_saxpy(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_F32, XPJ_F64};
  /* grid-stride loop: launches smaller than, equal to and larger than n
   * (0 stands for n, 1 << 62 for 2n + 1) */
  const uint64_t globals[] = {1, 7, 256, 0, 1ull << 62};
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    xpj_kernel *k = conf_kernel("elementwise.xpk", "saxpy", dts(t), 0);
    size_t es = dt_size(t);
    for (size_t si = 0; si < CONF_NSIZES; si++) {
      uint64_t n = conf_sizes[si];
      void *x = conf_alloc(n * es), *y = conf_alloc(n * es),
           *want = malloc(n * es);
      double alpha = rnd_real(-4, 4);
      xpj_array ax = xpj_array_1d(x, t, (int64_t)n),
                ay = xpj_array_1d(y, t, (int64_t)n);
      xpj_arg args[] = {arg_num(t, alpha), xpj_arg_array(&ax),
                        xpj_arg_array(&ay)};
      for (size_t gi = 0; gi < NELEMS(globals); gi++) {
        uint64_t g = !globals[gi]                ? n
                     : globals[gi] == 1ull << 62 ? 2 * n + 1
                                                 : globals[gi];
        uint64_t l = locals_1d[gi % NELEMS(locals_1d)];
        rnd_fill(x, t, n, -100, 100);
        rnd_fill(y, t, n, -100, 100);
        for (size_t i = 0; i < n; i++) {
          if (t == XPJ_F32) {
            float p = (float)alpha * ((float *)x)[i];
            ((float *)want)[i] = p + ((float *)y)[i];
          } else {
            double p = alpha * ((double *)x)[i];
            ((double *)want)[i] = p + ((double *)y)[i];
          }
        }
        conf_run(k, xpj_range_1d(g, l), 3, args);
        char lo[64];
        snprintf(lo, sizeof lo, "global=%llu local=%llu", (unsigned long long)g,
                 (unsigned long long)l);
        char sz[32];
        snprintf(sz, sizeof sz, "n=%llu", (unsigned long long)n);
        ctx_s cc = cx("saxpy", t, sz, lo);
        check_exact(&cc, y, want, n);
      }
      conf_free(x);
      conf_free(y);
      free(want);
    }
  }
}

/* ---- elementwise.xpk: axpby on strided views -------------------------- */

enum { V_CONTIG, V_TRANS, V_STEP, V_NEG, V_BCAST, V_KINDS };
static const char *const vkind_name[] = {"contiguous", "transposed",
                                         "offset+step", "negative strides",
                                         "zero-stride broadcast"};

/* A view of logical shape sh[nd] over a base allocation of base_n
 * elements, built from the xpj_array fields directly. */
typedef struct view {
  xpj_array a;
  void *base;
  size_t base_n;
} view;

static void row_major(unsigned nd, const int64_t *sh, int64_t *st) {
  int64_t s = 1;
  for (unsigned d = nd; d-- > 0;) {
    st[d] = s;
    s *= sh[d];
  }
}

static view mkview(xpj_scalar t, unsigned nd, const int64_t *sh, int kind) {
  view v;
  memset(&v, 0, sizeof v);
  v.a.dtype = t;
  v.a.ndim = nd;
  int64_t bs[XPJ_MAX_RANK] = {0}, bst[XPJ_MAX_RANK] = {0};
  unsigned bnd = nd;
  for (unsigned d = 0; d < nd; d++)
    v.a.shape[d] = sh[d];
  switch (kind) {
  case V_CONTIG:
    for (unsigned d = 0; d < nd; d++)
      bs[d] = sh[d];
    row_major(nd, bs, bst);
    for (unsigned d = 0; d < nd; d++)
      v.a.strides[d] = bst[d];
    break;
  case V_TRANS: /* the base holds the dimensions in reverse order */
    for (unsigned d = 0; d < nd; d++)
      bs[d] = sh[nd - 1 - d];
    row_major(nd, bs, bst);
    for (unsigned d = 0; d < nd; d++)
      v.a.strides[d] = bst[nd - 1 - d];
    break;
  case V_STEP: /* base[1 + step_d * i_d] with steps 2, 3, 2, and a margin */
    for (unsigned d = 0; d < nd; d++)
      bs[d] = 1 + (sh[d] - 1) * (2 + d % 2) + 2;
    row_major(nd, bs, bst);
    for (unsigned d = 0; d < nd; d++) {
      v.a.offset += bst[d];
      v.a.strides[d] = (2 + d % 2) * bst[d];
    }
    break;
  case V_NEG: /* every dimension reversed: starts at the last element */
    for (unsigned d = 0; d < nd; d++)
      bs[d] = sh[d];
    row_major(nd, bs, bst);
    for (unsigned d = 0; d < nd; d++) {
      v.a.offset += (sh[d] - 1) * bst[d];
      v.a.strides[d] = -bst[d];
    }
    break;
  case V_BCAST: /* stride 0 in the even dimensions (read-only views) */
    bnd = 0;
    for (unsigned d = 0; d < nd; d++)
      if (d % 2)
        bs[bnd++] = sh[d];
    row_major(bnd, bs, bst);
    for (unsigned d = 0, b = 0; d < nd; d++)
      v.a.strides[d] = d % 2 ? bst[b++] : 0;
    break;
  }
  v.base_n = 1;
  for (unsigned d = 0; d < bnd; d++)
    v.base_n *= (size_t)bs[d];
  v.base = conf_alloc(v.base_n * dt_size(t));
  v.a.data = v.base;
  rnd_fill(v.base, t, v.base_n, -100, 100);
  return v;
}

/* element offset of the flat (row-major) index i of view a */
static int64_t vaddr(const xpj_array *a, int64_t i) {
  int64_t off = a->offset;
  for (unsigned d = a->ndim; d-- > 0;) {
    off += (i % a->shape[d]) * a->strides[d];
    i /= a->shape[d];
  }
  return off;
}

static int64_t vsize(const xpj_array *a) {
  int64_t n = 1;
  for (unsigned d = 0; d < a->ndim; d++)
    n *= a->shape[d];
  return n;
}

/* want (a copy of out's base) with the view's elements set to
 * alpha * x + beta * y, computed in the dtype */
static void ref_axpby(double alpha, const view *x, double beta, const view *y,
                      const view *out, void *want) {
  xpj_scalar t = out->a.dtype;
  int64_t n = vsize(&out->a);
  for (int64_t i = 0; i < n; i++) {
    int64_t ix = vaddr(&x->a, i), iy = vaddr(&y->a, i), io = vaddr(&out->a, i);
    if (t == XPJ_F32) {
      float p = (float)alpha * ((const float *)x->base)[ix];
      float q = (float)beta * ((const float *)y->base)[iy];
      ((float *)want)[io] = p + q;
    } else {
      double p = alpha * ((const double *)x->base)[ix];
      double q = beta * ((const double *)y->base)[iy];
      ((double *)want)[io] = p + q;
    }
  }
}

static void test_elementwise_views(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_F32, XPJ_F64};
  static const int64_t shapes[3][4][3] = {
      {{1}, {7}, {1000}, {4099}},
      {{1, 1}, {7, 13}, {33, 65}, {100, 257}},
      {{1, 1, 1}, {3, 5, 7}, {9, 17, 33}, {4, 31, 70}},
  };
  /* (x, y, out): every kind on each side; out is never broadcast */
  static const int combos[][3] = {
      {V_CONTIG, V_CONTIG, V_CONTIG}, {V_TRANS, V_STEP, V_NEG},
      {V_STEP, V_NEG, V_TRANS},       {V_NEG, V_BCAST, V_STEP},
      {V_BCAST, V_TRANS, V_CONTIG},   {V_BCAST, V_BCAST, V_NEG},
  };
  static const uint64_t loc2[][2] = {{0, 0}, {1, 1}, {16, 16}, {8, 32}};
  static const uint64_t loc3[][3] = {
      {0, 0, 0}, {1, 1, 1}, {4, 8, 8}, {2, 4, 16}};
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    for (unsigned nd = 1; nd <= 3; nd++) {
      xpj_kernel *kflat =
          conf_kernel("elementwise.xpk", "axpby_nd", dts(t), nd);
      xpj_kernel *kmulti =
          nd == 2   ? conf_kernel("elementwise.xpk", "axpby_2d", dts(t), 0)
          : nd == 3 ? conf_kernel("elementwise.xpk", "axpby_3d", dts(t), 0)
                    : NULL;
      for (size_t si = 0; si < 4; si++) {
        const int64_t *sh = shapes[nd - 1][si];
        char sz[96];
        if (nd == 1)
          snprintf(sz, sizeof sz, "%lld", (long long)sh[0]);
        else if (nd == 2)
          snprintf(sz, sizeof sz, "%lldx%lld", (long long)sh[0],
                   (long long)sh[1]);
        else
          snprintf(sz, sizeof sz, "%lldx%lldx%lld", (long long)sh[0],
                   (long long)sh[1], (long long)sh[2]);
        for (size_t ci = 0; ci < NELEMS(combos); ci++) {
          view x = mkview(t, nd, sh, combos[ci][0]);
          view y = mkview(t, nd, sh, combos[ci][1]);
          view out = mkview(t, nd, sh, combos[ci][2]);
          double alpha = rnd_real(-2, 2), beta = rnd_real(-2, 2);
          void *want = malloc(out.base_n * es);
          xpj_arg args[] = {arg_num(t, alpha), xpj_arg_array(&x.a),
                            arg_num(t, beta), xpj_arg_array(&y.a),
                            xpj_arg_array(&out.a)};
          char size[256];
          snprintf(size, sizeof size,
                   "%s x %s, y %s, out %s (index in out's "
                   "base)",
                   sz, vkind_name[combos[ci][0]], vkind_name[combos[ci][1]],
                   vkind_name[combos[ci][2]]);
          int64_t n = vsize(&out.a);
          /* flat indexing, 1-D launch; two local hints per view combo */
          for (size_t li = 0; li < 2; li++) {
            uint64_t l = locals_1d[(ci + si + li * 2) % NELEMS(locals_1d)];
            /* fresh values in out's base: the view's elements must be
             * overwritten, the others (margins, gaps) left alone */
            rnd_fill(out.base, t, out.base_n, -100, 100);
            memcpy(want, out.base, out.base_n * es);
            ref_axpby(alpha, &x, beta, &y, &out, want);
            conf_run(
                kflat,
                xpj_range_1d(l ? round_up((uint64_t)n, l) : (uint64_t)n, l), 5,
                args);
            char lo[64];
            snprintf(lo, sizeof lo, "ndim=%u local=%llu", nd,
                     (unsigned long long)l);
            ctx_s cc = cx("axpby_nd", t, size, lo);
            check_exact(&cc, out.base, want, out.base_n);
          }
          /* multi-index, 2-D and 3-D launches over the shape */
          for (size_t li = 0; kmulti && li < 4; li++) {
            rnd_fill(out.base, t, out.base_n, -100, 100);
            memcpy(want, out.base, out.base_n * es);
            ref_axpby(alpha, &x, beta, &y, &out, want);
            xpj_range r = nd == 2
                              ? xpj_range_2d((uint64_t)sh[0], (uint64_t)sh[1],
                                             loc2[li][0], loc2[li][1])
                              : xpj_range_3d((uint64_t)sh[0], (uint64_t)sh[1],
                                             (uint64_t)sh[2], loc3[li][0],
                                             loc3[li][1], loc3[li][2]);
            conf_run(kmulti, r, 5, args);
            char lo[64];
            if (nd == 2)
              snprintf(lo, sizeof lo, "local=%llux%llu",
                       (unsigned long long)loc2[li][0],
                       (unsigned long long)loc2[li][1]);
            else
              snprintf(lo, sizeof lo, "local=%llux%llux%llu",
                       (unsigned long long)loc3[li][0],
                       (unsigned long long)loc3[li][1],
                       (unsigned long long)loc3[li][2]);
            ctx_s cc = cx(nd == 2 ? "axpby_2d" : "axpby_3d", t, size, lo);
            check_exact(&cc, out.base, want, out.base_n);
          }
          free(want);
          conf_free(x.base);
          conf_free(y.base);
          conf_free(out.base);
        }
      }
    }
  }
}

/* ---- reduce.xpk ------------------------------------------------------- */

/* Partial sums of x as block_partials computes them: global size G in
 * groups of L; group g sums x[i] for i mod G in [gL, gL + L). Also the
 * number of terms and the sum of absolute values of each partial. */
static void ref_partials(xpj_scalar t, const void *x, uint64_t n, uint64_t G,
                         uint64_t L, long double *sum, long double *abs,
                         int64_t *isum, uint64_t *cnt) {
  uint64_t ng = G / L;
  for (uint64_t g = 0; g < ng; g++) {
    sum[g] = abs[g] = 0;
    isum[g] = 0;
    cnt[g] = 0;
  }
  for (uint64_t i = 0; i < n; i++) {
    uint64_t g = (i % G) / L;
    cnt[g]++;
    if (dt_float(t)) {
      long double v = ld_f(x, t, (int64_t)i);
      sum[g] += v;
      abs[g] += fabsl(v);
    } else {
      isum[g] = (int64_t)((uint64_t)isum[g] + (uint64_t)ld_i(x, t, (int64_t)i));
    }
  }
}

/* Stores v (float or integer, as t) at element i of p. */
static void st_num(void *p, xpj_scalar t, size_t i, long double f, int64_t v) {
  switch (t) {
  case XPJ_F32:
    ((float *)p)[i] = (float)f;
    break;
  case XPJ_F64:
    ((double *)p)[i] = (double)f;
    break;
  case XPJ_I32:
    ((int32_t *)p)[i] = (int32_t)(uint32_t)v;
    break;
  case XPJ_U32:
    ((uint32_t *)p)[i] = (uint32_t)v;
    break;
  case XPJ_I64:
    ((int64_t *)p)[i] = v;
    break;
  case XPJ_U64:
    ((uint64_t *)p)[i] = (uint64_t)v;
    break;
  default:
    fail_msg("st_num: %s", dts(t));
  }
}

static void test_reduce(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_F32, XPJ_F64, XPJ_I32, XPJ_I64};
  /* any local size up to BLOCK = 1024, not only powers of two */
  const uint64_t locals[] = {0, 1, 16, 100, 256, 1024};
  const uint64_t max_groups = 40;
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    xpj_kernel *kp = conf_kernel("reduce.xpk", "block_partials", dts(t), 0);
    xpj_kernel *ks = conf_kernel("reduce.xpk", "block_sum", dts(t), 0);
    uint64_t maxwg = min_u(kmax_wg(kp), kmax_wg(ks));
    for (size_t si = 0; si < CONF_NSIZES; si++) {
      uint64_t n = conf_sizes[si];
      void *x = conf_alloc(n * es);
      if (dt_float(t))
        rnd_fill(x, t, n, -1, 1);
      else
        rnd_fill(x, t, n, -30000, 30000); /* |sum| < 2^31 */
      xpj_array ax = xpj_array_1d(x, t, (int64_t)n);
      for (size_t li = 0; li < NELEMS(locals); li++) {
        uint64_t l = locals[li];
        if (l > maxwg)
          continue;
        /* a grid-stride launch of at most max_groups groups; local 0: the
         * global size is n, the runtime picks a divisor of it */
        uint64_t G = l ? l * min_u((n + l - 1) / l, max_groups) : n;
        uint64_t L = l;
        if (!L)
          if (xpj_kernel_suggest_local(kp, 1, &G, &L) != XPJ_OK)
            fail_msg("suggest_local: %s", xpj_last_error());
        uint64_t ng = G / L;
        void *part = conf_alloc(ng * es), *want = malloc(ng * es);
        long double *sum = malloc(ng * sizeof *sum),
                    *abs = malloc(ng * sizeof *abs),
                    *tol = malloc(ng * sizeof *tol);
        int64_t *isum = malloc(ng * sizeof *isum);
        uint64_t *cnt = malloc(ng * sizeof *cnt);
        ref_partials(t, x, n, G, L, sum, abs, isum, cnt);
        rnd_fill(part, t, ng, 1, 2);
        xpj_array ap = xpj_array_1d(part, t, (int64_t)ng);
        xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ap)};
        conf_run(kp, xpj_range_1d(G, l), 2, args);
        ctx_s cc = cx1("block_partials", t, n, l);
        if (dt_float(t)) {
          /* Any summation order of m terms in precision u errs by at most
           * (m - 1) u sum|x| (Higham, Accuracy and Stability, 4.2); eps =
           * 2u, so m eps sum|x| bounds it with room to spare. */
          for (uint64_t g = 0; g < ng; g++)
            tol[g] = (long double)cnt[g] * dt_eps(t) * abs[g];
          check_close(&cc, part, sum, tol, ng);
        } else {
          for (uint64_t g = 0; g < ng; g++)
            st_num(want, t, g, 0, isum[g]);
          check_exact(&cc, part, want, ng); /* integer sums are exact */
        }

        /* block_sum: the same, then one atomic add per group */
        void *total = conf_alloc(es);
        long double tsum = 0, tabs = 0;
        int64_t tisum = 0;
        for (uint64_t g = 0; g < ng; g++) {
          tsum += sum[g];
          tabs += abs[g];
          tisum = (int64_t)((uint64_t)tisum + (uint64_t)isum[g]);
        }
        st_num(total, t, 0, 0, 0);
        xpj_array at = xpj_array_1d(total, t, 1);
        xpj_arg sargs[] = {xpj_arg_array(&ax), xpj_arg_array(&at)};
        conf_run(ks, xpj_range_1d(G, l), 2, sargs);
        cc = cx1("block_sum", t, n, l);
        if (dt_float(t)) {
          long double ttol = (long double)n * dt_eps(t) * tabs; /* as above */
          check_close(&cc, total, &tsum, &ttol, 1);
        } else {
          st_num(want, t, 0, 0, tisum);
          check_exact(&cc, total, want, 1);
        }
        conf_free(total);
        conf_free(part);
        free(want);
        free(sum);
        free(abs);
        free(tol);
        free(isum);
        free(cnt);
      }
      conf_free(x);
    }
  }
}

/* ---- histogram.xpk ---------------------------------------------------- */

static void test_histogram(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_I32, XPJ_U32, XPJ_I64, XPJ_U64};
  const uint64_t ranges[] = {1, 7, 64, 1000, 0 /* n */};
  const uint64_t locals[] = {0, 1, 16, 64, 256};
  const uint64_t max_groups = 32;
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    xpj_kernel *kg = conf_kernel("histogram.xpk", "hist_global", dts(t), 0);
    xpj_kernel *kl = conf_kernel("histogram.xpk", "hist_local", dts(t), 0);
    for (size_t si = 0; si < CONF_NSIZES; si++) {
      uint64_t n = conf_sizes[si];
      uint8_t *data = conf_alloc(n);
      /* bytes 1..255 (rnd_fill never gives 0, so bin 0 must stay empty),
       * the second half crowded into bins 1..3 for contention */
      rnd_fill(data, XPJ_U8, n / 2, 0, 256);
      rnd_fill(data + n / 2, XPJ_U8, n - n / 2, 1, 4);
      uint64_t cnt[256] = {0};
      for (uint64_t i = 0; i < n; i++)
        cnt[data[i]]++;
      void *hist = conf_alloc(256 * es), *want = malloc(256 * es);
      for (int b = 0; b < 256; b++)
        st_num(want, t, (size_t)b, 0, (int64_t)cnt[b]);
      xpj_array ad = xpj_array_1d(data, XPJ_U8, (int64_t)n),
                ah = xpj_array_1d(hist, t, 256);
      xpj_arg args[] = {xpj_arg_array(&ad), xpj_arg_array(&ah)};
      for (size_t ri = 0; ri < NELEMS(ranges); ri++) {
        uint64_t g = ranges[ri] ? ranges[ri] : n;
        uint64_t l = locals_1d[ri % NELEMS(locals_1d)];
        memset(hist, 0, 256 * es);
        conf_run(kg, xpj_range_1d(g, l), 2, args);
        char sz[32], lo[64];
        snprintf(sz, sizeof sz, "n=%llu", (unsigned long long)n);
        snprintf(lo, sizeof lo, "global=%llu local=%llu (bin)",
                 (unsigned long long)g, (unsigned long long)l);
        ctx_s cc = cx("hist_global", t, sz, lo);
        check_exact(&cc, hist, want, 256);
      }
      for (size_t li = 0; li < NELEMS(locals); li++) {
        uint64_t l = locals[li];
        if (l > kmax_wg(kl))
          continue;
        uint64_t g = l ? l * min_u((n + l - 1) / l, max_groups) : n;
        memset(hist, 0, 256 * es);
        conf_run(kl, xpj_range_1d(g, l), 2, args);
        char sz[32], lo[64];
        snprintf(sz, sizeof sz, "n=%llu", (unsigned long long)n);
        snprintf(lo, sizeof lo, "global=%llu local=%llu (bin)",
                 (unsigned long long)g, (unsigned long long)l);
        ctx_s cc = cx("hist_local", t, sz, lo);
        check_exact(&cc, hist, want, 256);
      }
      conf_free(data);
      conf_free(hist);
      free(want);
    }
  }
}

/* ---- matmul.xpk ------------------------------------------------------- */

/* element [i, j] of a 2-D view */
static int64_t at2(const xpj_array *a, int64_t i, int64_t j) {
  return a->offset + i * a->strides[0] + j * a->strides[1];
}

static void test_matmul(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_F32, XPJ_F64, XPJ_I32};
  /* m, k, n: non-square, not multiples of the tiles (KT = 16, local) */
  static const int64_t dims[][3] = {
      {1, 1, 1}, {7, 13, 5}, {33, 65, 17}, {100, 257, 31}, {16, 32, 48}};
  /* local sizes up to MAXL = 32 per dimension */
  static const uint64_t locs[][2] = {
      {1, 1}, {16, 16}, {8, 32}, {32, 4}, {5, 3}};
  const uint64_t max_groups = 3; /* per dimension: grid-stride over tiles */
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    xpj_kernel *k = conf_kernel("matmul.xpk", "matmul_tiled", dts(t), 0);
    for (size_t di = 0; di < NELEMS(dims); di++) {
      int64_t m = dims[di][0], kd = dims[di][1], n = dims[di][2];
      /* A contiguous m x k; B either contiguous k x n, or the transpose
       * of an n x k matrix (strides 1, k); C contiguous m x n */
      void *a = conf_alloc((size_t)(m * kd) * es),
           *b = conf_alloc((size_t)(kd * n) * es),
           *c = conf_alloc((size_t)(m * n) * es),
           *want = malloc((size_t)(m * n) * es);
      double lim = dt_float(t) ? 4 : 100; /* |sum| < 257 * 100^2 */
      rnd_fill(a, t, (size_t)(m * kd), -lim, lim);
      rnd_fill(b, t, (size_t)(kd * n), -lim, lim);
      xpj_array aa = xpj_array_2d(a, t, m, kd), ac = xpj_array_2d(c, t, m, n);
      for (int btrans = 0; btrans < 2; btrans++) {
        xpj_array ab = xpj_array_2d(b, t, kd, n);
        if (btrans) {
          ab.strides[0] = 1;
          ab.strides[1] = kd;
        }
        /* products summed in the order k = 0, 1, ...: exact */
        for (int64_t i = 0; i < m; i++)
          for (int64_t j = 0; j < n; j++) {
            float accf = 0;
            double accd = 0;
            int32_t acci = 0;
            for (int64_t q = 0; q < kd; q++) {
              int64_t ia = at2(&aa, i, q), ib = at2(&ab, q, j);
              if (t == XPJ_F32) {
                float p = ((float *)a)[ia] * ((float *)b)[ib];
                accf = accf + p;
              } else if (t == XPJ_F64) {
                double p = ((double *)a)[ia] * ((double *)b)[ib];
                accd = accd + p;
              } else {
                acci += ((int32_t *)a)[ia] * ((int32_t *)b)[ib];
              }
            }
            size_t o = (size_t)(i * n + j);
            if (t == XPJ_F32)
              ((float *)want)[o] = accf;
            else if (t == XPJ_F64)
              ((double *)want)[o] = accd;
            else
              ((int32_t *)want)[o] = acci;
          }
        xpj_arg args[] = {xpj_arg_array(&aa), xpj_arg_array(&ab),
                          xpj_arg_array(&ac)};
        for (size_t li = 0; li < NELEMS(locs); li++) {
          uint64_t ly = locs[li][0], lx = locs[li][1];
          if (ly * lx > kmax_wg(k))
            continue;
          uint64_t gy = ly * min_u(((uint64_t)m + ly - 1) / ly, max_groups);
          uint64_t gx = lx * min_u(((uint64_t)n + lx - 1) / lx, max_groups);
          rnd_fill(c, t, (size_t)(m * n), -1, 1);
          conf_run(k, xpj_range_2d(gy, gx, ly, lx), 3, args);
          char sz[96], lo[64];
          snprintf(sz, sizeof sz, "%lldx%lld * %lldx%lld%s (index in C)",
                   (long long)m, (long long)kd, (long long)kd, (long long)n,
                   btrans ? " (B transposed view)" : "");
          snprintf(lo, sizeof lo, "local=%llux%llu", (unsigned long long)ly,
                   (unsigned long long)lx);
          ctx_s cc = cx("matmul_tiled", t, sz, lo);
          check_exact(&cc, c, want, (size_t)(m * n));
        }
      }
      conf_free(a);
      conf_free(b);
      conf_free(c);
      free(want);
    }
  }
}

/* ---- transpose.xpk ---------------------------------------------------- */

static void test_transpose(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_F32, XPJ_F64, XPJ_I32};
  static const int64_t dims[][2] = {
      {1, 1}, {7, 13}, {33, 65}, {100, 257}, {64, 32}};
  /* any 2-D local size; (0, 0): the runtime chooses */
  static const uint64_t locs[][2] = {{0, 0},  {1, 1},   {16, 16},
                                     {8, 32}, {32, 32}, {3, 5}};
  const uint64_t max_groups = 3;
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    xpj_kernel *k = conf_kernel("transpose.xpk", "transpose_tiled", dts(t), 0);
    for (size_t di = 0; di < NELEMS(dims); di++) {
      int64_t r = dims[di][0], c = dims[di][1];
      size_t n = (size_t)(r * c);
      void *src = conf_alloc(n * es), *dst = conf_alloc(n * es),
           *want = malloc(n * es);
      rnd_fill(src, t, n, -1e6, 1e6);
      for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++)
          memcpy((char *)want + (size_t)(j * r + i) * es,
                 (char *)src + (size_t)(i * c + j) * es, es);
      xpj_array as = xpj_array_2d(src, t, r, c),
                ad = xpj_array_2d(dst, t, c, r);
      xpj_arg args[] = {xpj_arg_array(&as), xpj_arg_array(&ad)};
      for (size_t li = 0; li < NELEMS(locs); li++) {
        uint64_t ly = locs[li][0], lx = locs[li][1];
        if (ly * lx > kmax_wg(k))
          continue;
        /* one group per 32 x 32 tile, at most max_groups per dimension */
        uint64_t ty = min_u(((uint64_t)r + 31) / 32, max_groups),
                 tx = min_u(((uint64_t)c + 31) / 32, max_groups);
        uint64_t gy = ly ? ty * ly : ty * 16, gx = lx ? tx * lx : tx * 16;
        rnd_fill(dst, t, n, -1, 1);
        conf_run(k, xpj_range_2d(gy, gx, ly, lx), 2, args);
        char sz[64], lo[64];
        snprintf(sz, sizeof sz, "%lldx%lld (index in dst)", (long long)r,
                 (long long)c);
        snprintf(lo, sizeof lo, "local=%llux%llu", (unsigned long long)ly,
                 (unsigned long long)lx);
        ctx_s cc = cx("transpose_tiled", t, sz, lo);
        check_exact(&cc, dst, want, n);
      }
      conf_free(src);
      conf_free(dst);
      free(want);
    }
  }
}

/* ---- scan.xpk --------------------------------------------------------- */

/* y = exclusive scan of x (n elements, on the device): scan_blocks with
 * local size l (at most max_groups groups), then the block sums scanned
 * recursively and added back with add_offsets. */
static void dev_scan(xpj_kernel *kb, xpj_kernel *ko, xpj_scalar t, void *x,
                     void *y, uint64_t n, uint64_t l, uint64_t max_groups) {
  size_t es = dt_size(t);
  uint64_t nb = 2 * l, nblocks = (n + nb - 1) / nb;
  void *sums = conf_alloc(nblocks * es);
  xpj_array ax = xpj_array_1d(x, t, (int64_t)n),
            ay = xpj_array_1d(y, t, (int64_t)n),
            as = xpj_array_1d(sums, t, (int64_t)nblocks);
  xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ay), xpj_arg_array(&as)};
  conf_run(kb, xpj_range_1d(l * min_u(nblocks, max_groups), l), 3, args);
  if (nblocks > 1) {
    void *offs = conf_alloc(nblocks * es);
    dev_scan(kb, ko, t, sums, offs, nblocks, l, max_groups);
    xpj_array ao = xpj_array_1d(offs, t, (int64_t)nblocks);
    xpj_arg oargs[] = {xpj_arg_array(&ay), xpj_arg_array(&ao),
                       xpj_arg_i64((int64_t)nb)};
    conf_run(ko, xpj_range_1d(n, 0), 3, oargs);
    conf_free(offs);
  }
  conf_free(sums);
}

static void test_scan(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_I32, XPJ_I64, XPJ_F32, XPJ_F64};
  /* power-of-two local sizes up to MAXB / 2 = 1024 */
  const uint64_t locals[] = {1, 16, 64, 256, 1024};
  const uint64_t max_groups = 16; /* blocks are visited grid-stride */
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    xpj_kernel *kb = conf_kernel("scan.xpk", "scan_blocks", dts(t), 0);
    xpj_kernel *ko = conf_kernel("scan.xpk", "add_offsets", dts(t), 0);
    for (size_t si = 0; si < CONF_NSIZES; si++) {
      uint64_t n = conf_sizes[si];
      void *x = conf_alloc(n * es), *y = conf_alloc(n * es),
           *want = malloc(n * es);
      long double *fw = malloc(n * sizeof *fw), *tol = malloc(n * sizeof *tol);
      if (dt_float(t))
        rnd_fill(x, t, n, -1, 1);
      else
        rnd_fill(x, t, n, -30000, 30000); /* |prefix| < 2^31 */
      int64_t isum = 0;
      long double fsum = 0, fabs_ = 0;
      for (uint64_t i = 0; i < n; i++) {
        if (dt_float(t)) {
          /* The scan adds the same terms in another order (a tree per
           * block, then block offsets): each prefix of i terms errs by at
           * most (i - 1) u sum|x_j| (any order), bounded by n eps
           * sum|x_j|; eps = 2u. */
          fw[i] = fsum;
          tol[i] = (long double)n * dt_eps(t) * fabs_;
          long double v = ld_f(x, t, (int64_t)i);
          fsum += v;
          fabs_ += fabsl(v);
        } else {
          st_num(want, t, i, 0, isum);
          isum += ld_i(x, t, (int64_t)i);
        }
      }
      for (size_t li = 0; li < NELEMS(locals); li++) {
        uint64_t l = locals[li];
        if (l > kmax_wg(kb))
          continue;
        rnd_fill(y, t, n, 1, 2);
        dev_scan(kb, ko, t, x, y, n, l, max_groups);
        ctx_s cc = cx1("scan_blocks+add_offsets", t, n, l);
        if (dt_float(t))
          check_close(&cc, y, fw, tol, n);
        else
          check_exact(&cc, y, want, n);
      }
      conf_free(x);
      conf_free(y);
      free(want);
      free(fw);
      free(tol);
    }
  }
}

/* ---- stencil.xpk ------------------------------------------------------ */

static void ref_jacobi(xpj_scalar t, const void *u, const xpj_array *au,
                       void *out, int64_t ny, int64_t nx) {
  for (int64_t i = 0; i < ny; i++)
    for (int64_t j = 0; j < nx; j++) {
      size_t o = (size_t)(i * nx + j);
      int edge = i == 0 || j == 0 || i == ny - 1 || j == nx - 1;
      if (t == XPJ_F32) {
        const float *p = u;
        if (edge) {
          ((float *)out)[o] = p[at2(au, i, j)];
        } else {
          float s = p[at2(au, i - 1, j)] + p[at2(au, i + 1, j)];
          s = s + p[at2(au, i, j - 1)];
          s = s + p[at2(au, i, j + 1)];
          ((float *)out)[o] = 0.25f * s;
        }
      } else {
        const double *p = u;
        if (edge) {
          ((double *)out)[o] = p[at2(au, i, j)];
        } else {
          double s = p[at2(au, i - 1, j)] + p[at2(au, i + 1, j)];
          s = s + p[at2(au, i, j - 1)];
          s = s + p[at2(au, i, j + 1)];
          ((double *)out)[o] = 0.25 * s;
        }
      }
    }
}

static void test_stencil(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_F32, XPJ_F64};
  static const int64_t dims[][2] = {
      {1, 1}, {7, 13}, {33, 65}, {100, 257}, {2, 40}};
  static const uint64_t locs[][2] = {{0, 0},  {1, 1},   {16, 16},
                                     {8, 32}, {32, 32}, {3, 5}};
  const uint64_t max_groups = 3;
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    xpj_kernel *kd = conf_kernel("stencil.xpk", "jacobi5", dts(t), 0);
    xpj_kernel *kt = conf_kernel("stencil.xpk", "jacobi5_tiled", dts(t), 0);
    for (size_t di = 0; di < NELEMS(dims); di++) {
      int64_t ny = dims[di][0], nx = dims[di][1];
      size_t n = (size_t)(ny * nx);
      void *u = conf_alloc(n * es), *out = conf_alloc(n * es),
           *want = malloc(n * es);
      rnd_fill(u, t, n, -10, 10);
      for (int utrans = 0; utrans < 2; utrans++) {
        /* u contiguous, or a transposed view of an nx x ny matrix */
        xpj_array au = xpj_array_2d(u, t, ny, nx);
        if (utrans) {
          au.strides[0] = 1;
          au.strides[1] = ny;
        }
        xpj_array ao = xpj_array_2d(out, t, ny, nx);
        xpj_arg args[] = {xpj_arg_array(&au), xpj_arg_array(&ao)};
        ref_jacobi(t, u, &au, want, ny, nx);
        char sz[64];
        snprintf(sz, sizeof sz, "%lldx%lld%s", (long long)ny, (long long)nx,
                 utrans ? " (u transposed view)" : "");
        for (size_t li = 0; li < NELEMS(locs); li++) {
          uint64_t ly = locs[li][0], lx = locs[li][1];
          char lo[64];
          snprintf(lo, sizeof lo, "local=%llux%llu", (unsigned long long)ly,
                   (unsigned long long)lx);
          /* range kernel: the grid, local is a hint */
          rnd_fill(out, t, n, 100, 200);
          conf_run(kd, xpj_range_2d((uint64_t)ny, (uint64_t)nx, ly, lx), 2,
                   args);
          ctx_s cc = cx("jacobi5", t, sz, lo);
          check_exact(&cc, out, want, n);
          /* tiled: local sizes up to SMAX = 32, so no local 0 */
          if (!ly || ly * lx > kmax_wg(kt))
            continue;
          uint64_t gy = ly * min_u(((uint64_t)ny + ly - 1) / ly, max_groups);
          uint64_t gx = lx * min_u(((uint64_t)nx + lx - 1) / lx, max_groups);
          rnd_fill(out, t, n, 100, 200);
          conf_run(kt, xpj_range_2d(gy, gx, ly, lx), 2, args);
          cc = cx("jacobi5_tiled", t, sz, lo);
          check_exact(&cc, out, want, n);
        }
      }
      conf_free(u);
      conf_free(out);
      free(want);
    }
  }
}

/* ---- sort.xpk --------------------------------------------------------- */

static xpj_scalar cmp_type;

static int cmp_el(const void *a, const void *b) {
  switch (cmp_type) {
#define CMP_(T)                                                                \
  return *(const T *)a < *(const T *)b ? -1 : *(const T *)a > *(const T *)b
  case XPJ_F32:
    CMP_(float);
  case XPJ_F64:
    CMP_(double);
  case XPJ_I32:
    CMP_(int32_t);
  case XPJ_U32:
    CMP_(uint32_t);
  case XPJ_I64:
    CMP_(int64_t);
  case XPJ_U64:
    CMP_(uint64_t);
#undef CMP_
  default:
    return 0;
  }
}

/* Enqueues one stage (k, j) of the global kernel; the caller waits. */
static void sort_stage(xpj_kernel *ks, xpj_array *ax, uint64_t n, int64_t k,
                       int64_t j, uint64_t l) {
  xpj_arg args[] = {xpj_arg_array(ax), xpj_arg_i64(k), xpj_arg_i64(j)};
  xpj_range r = xpj_range_1d(n, l);
  if (xpj_launch(C.q, ks, &r, 3, args, NULL) != XPJ_OK)
    fail_msg("launch bitonic_stage: %s", xpj_last_error());
}

static void test_sort(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_F32, XPJ_F64, XPJ_I32, XPJ_U32, XPJ_I64};
  const uint64_t sizes[] = {1, 2, 8, 256, 4096, 65536};
  const uint64_t block_locals[] = {1, 16, 64, 256};
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    xpj_kernel *ks = conf_kernel("sort.xpk", "bitonic_stage", dts(t), 0);
    xpj_kernel *kb = conf_kernel("sort.xpk", "bitonic_block", dts(t), 0);
    cmp_type = t;
    for (size_t si = 0; si < NELEMS(sizes); si++) {
      uint64_t n = sizes[si];
      void *x = conf_alloc(n * es), *orig = malloc(n * es),
           *want = malloc(n * es);
      /* floats of both signs; integers in a small range, so with
       * duplicates */
      if (t == XPJ_U32)
        rnd_fill(orig, t, n, 1, 1000);
      else
        rnd_fill(orig, t, n, dt_float(t) ? -1e3 : -500,
                 dt_float(t) ? 1e3 : 500);
      memcpy(want, orig, n * es);
      qsort(want, n, es, cmp_el);

      /* every stage with the global kernel; queued back to back (in-order
       * queue), one wait at the end */
      memcpy(x, orig, n * es);
      xpj_array ax = xpj_array_1d(x, t, (int64_t)n);
      uint64_t l = locals_1d[si % NELEMS(locals_1d)];
      for (int64_t k = 2; k <= (int64_t)n; k <<= 1)
        for (int64_t j = k >> 1; j > 0; j >>= 1)
          sort_stage(ks, &ax, n, k, j, l);
      if (xpj_queue_wait(C.q) != XPJ_OK)
        fail_msg("wait bitonic_stage: %s", xpj_last_error());
      ctx_s cc = cx1("bitonic_stage (full sort)", t, n, l);
      check_exact(&cc, x, want, n);

      /* bitonic_block for k <= 2 * local, then the global stages */
      for (size_t li = 0; li < NELEMS(block_locals); li++) {
        uint64_t bl = block_locals[li], nb = 2 * bl;
        if (n % nb || bl > kmax_wg(kb))
          continue;
        memcpy(x, orig, n * es);
        xpj_arg bargs[] = {xpj_arg_array(&ax)};
        /* at most 4 groups: blocks are visited grid-stride */
        conf_run(kb, xpj_range_1d(bl * min_u(n / nb, 4), bl), 1, bargs);
        for (int64_t k = 2 * (int64_t)nb; k <= (int64_t)n; k <<= 1)
          for (int64_t j = k >> 1; j > 0; j >>= 1)
            sort_stage(ks, &ax, n, k, j, 0);
        if (xpj_queue_wait(C.q) != XPJ_OK)
          fail_msg("wait bitonic_stage: %s", xpj_last_error());
        cc = cx1("bitonic_block+bitonic_stage", t, n, bl);
        check_exact(&cc, x, want, n);
      }
      conf_free(x);
      free(orig);
      free(want);
    }
  }
}

/* ---- atomics.xpk ------------------------------------------------------ */

/* the value v reduced to t's width, as the u64 bit pattern */
static uint64_t trunc_t(xpj_scalar t, uint64_t v) {
  return dt_size(t) == 4 ? (uint64_t)(uint32_t)v : v;
}

/* signed or unsigned comparison in t */
static int less_t(xpj_scalar t, uint64_t a, uint64_t b) {
  switch (t) {
  case XPJ_I32:
    return (int32_t)(uint32_t)a < (int32_t)(uint32_t)b;
  case XPJ_I64:
    return (int64_t)a < (int64_t)b;
  default:
    return a < b;
  }
}

static void test_atomic_int(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_I32, XPJ_U32, XPJ_I64, XPJ_U64};
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    int sgn = t == XPJ_I32 || t == XPJ_I64;
    xpj_kernel *k = conf_kernel("atomics.xpk", "atomic_int", dts(t), 0);
    for (size_t si = 0; si < CONF_NSIZES; si++) {
      uint64_t n = conf_sizes[si];
      void *x = conf_alloc(n * es), *acc = conf_alloc(9 * es),
           *want = malloc(9 * es);
      /* the whole range of the type (about) */
      double lim =
          sgn ? (es == 4 ? 2.1e9 : 9.2e18) : (es == 4 ? 4.2e9 : 1.8e19);
      rnd_fill(x, t, n, sgn ? -lim : 0, lim);
      /* identities: 0, 0, max, min, all ones, 0, 0, 1 (product), 0 */
      uint64_t tmax = sgn ? (es == 4 ? INT32_MAX : INT64_MAX)
                          : (es == 4 ? UINT32_MAX : UINT64_MAX);
      uint64_t tmin =
          sgn ? (es == 4 ? (uint64_t)(uint32_t)INT32_MIN : (uint64_t)INT64_MIN)
              : 0;
      uint64_t init[9] = {0, 0, tmax, tmin, trunc_t(t, ~0ull), 0, 0, 1, 0};
      /* the reference in unsigned arithmetic, which wraps like the
       * kernel's */
      uint64_t w[9];
      memcpy(w, init, sizeof w);
      for (uint64_t i = 0; i < n; i++) {
        uint64_t v = trunc_t(t, (uint64_t)ld_i(x, t, (int64_t)i));
        w[0] = trunc_t(t, w[0] + v);
        w[1] = trunc_t(t, w[1] - v);
        if (less_t(t, v, w[2]))
          w[2] = v;
        if (less_t(t, w[3], v))
          w[3] = v;
        w[4] &= v;
        w[5] |= v;
        w[6] ^= v;
        w[7] = trunc_t(t, w[7] * (v | 1));
        w[8] = trunc_t(t, w[8] + 1);
      }
      for (int j = 0; j < 9; j++) {
        st_num(acc, t, (size_t)j, 0, (int64_t)init[j]);
        st_num(want, t, (size_t)j, 0, (int64_t)w[j]);
      }
      xpj_array ax = xpj_array_1d(x, t, (int64_t)n),
                aa = xpj_array_1d(acc, t, 9);
      xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&aa)};
      uint64_t l = locals_1d[si % NELEMS(locals_1d)];
      conf_run(k, xpj_range_1d(l ? round_up(n, l) : n, l), 2, args);
      char sz[160];
      snprintf(sz, sizeof sz,
               "n=%llu (index: 0 add, 1 sub, 2 min, 3 max, 4 and, "
               "5 or, 6 xor, 7 cmpxchg product, 8 count)",
               (unsigned long long)n);
      char lo[32];
      snprintf(lo, sizeof lo, "local=%llu", (unsigned long long)l);
      ctx_s cc = cx("atomic_int", t, sz, lo);
      check_exact(&cc, acc, want, 9);
      conf_free(x);
      conf_free(acc);
      free(want);
    }
  }
}

static void test_local_counters(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_I32, XPJ_U32, XPJ_I64, XPJ_U64};
  const size_t L = 64, G = 6, n = L * G;
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    xpj_kernel *k = conf_kernel("atomics.xpk", "local_counters", dts(t), 0);
    void *x = conf_alloc(n * es), *out = conf_alloc(G * 7 * es),
         *want = malloc(G * 7 * es);
    assert_non_null(want);
    int sgn = t == XPJ_I32 || t == XPJ_I64;
    rnd_fill(x, t, n, sgn ? -1e9 : 0, 2e9);
    memset(out, 0, G * 7 * es);
    for (size_t g = 0; g < G; g++) {
      uint64_t w[7] = {0, 0, 0, 0, 0, 0, 0};
      for (size_t j = 0; j < L; j++) {
        uint64_t v = trunc_t(t, (uint64_t)ld_i(x, t, (int64_t)(g * L + j)));
        w[1] = trunc_t(t, w[1] + v);
        if (j == 0 || less_t(t, v, w[2]))
          w[2] = v;
        if (j == 0 || less_t(t, w[3], v))
          w[3] = v;
        w[4] = trunc_t(t, w[4] + 1);
        w[5] ^= v;
      }
      w[6] = w[4];
      for (size_t j = 0; j < 7; j++)
        st_num(want, t, g * 7 + j, 0, (int64_t)w[j]);
    }
    int64_t shape[2] = {(int64_t)G, 7};
    xpj_array ax = xpj_array_1d(x, t, (int64_t)n),
              ao = xpj_array_nd(out, t, 2, shape);
    xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ao)};
    conf_run(k, xpj_range_1d(n, L), 2, args);
    ctx_s cc = cx("local_counters", t,
                  "[group, 1 sum, 2 min, 3 max, 4 count, 5 xor, 6 count "
                  "again]", "local=64");
    check_exact(&cc, out, want, G * 7);
    conf_free(x);
    conf_free(out);
    free(want);
  }
}

static void test_float_atomics(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_F32, XPJ_F64};
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    xpj_kernel *k = conf_kernel("atomics.xpk", "float_atomics", dts(t), 0);
    for (size_t si = 0; si < CONF_NSIZES; si++) {
      uint64_t n = conf_sizes[si];
      void *x = conf_alloc(n * es), *res = conf_alloc(4 * es);
      rnd_fill(x, t, n, -1000, 1000);
      long double mx = -INFINITY, mn = INFINITY, sum = 0, abs = 0;
      for (uint64_t i = 0; i < n; i++) {
        long double v = ld_f(x, t, (int64_t)i);
        mx = v > mx ? v : mx;
        mn = v < mn ? v : mn;
        sum += v;
        abs += fabsl(v);
      }
      st_num(res, t, 0, -INFINITY, 0);
      st_num(res, t, 1, INFINITY, 0);
      st_num(res, t, 2, 0, 0);
      st_num(res, t, 3, 0, 0);
      xpj_array ax = xpj_array_1d(x, t, (int64_t)n),
                ar = xpj_array_1d(res, t, 4);
      xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ar)};
      uint64_t l = locals_1d[si % NELEMS(locals_1d)];
      conf_run(k, xpj_range_1d(n, l), 2, args);
      /* max and min are exact; the atomic sums add in any order: n terms
       * err by at most (n - 1) u sum|x| <= n eps sum|x| (eps = 2u) */
      long double want[4] = {mx, mn, sum, -sum};
      long double stol = (long double)n * dt_eps(t) * abs;
      long double tol[4] = {0, 0, stol, stol};
      char sz[160];
      snprintf(sz, sizeof sz,
               "n=%llu (index: 0 max by cmpxchg, 1 min by xchg, "
               "2 add, 3 sub)",
               (unsigned long long)n);
      char lo[32];
      snprintf(lo, sizeof lo, "local=%llu", (unsigned long long)l);
      ctx_s cc = cx("float_atomics", t, sz, lo);
      check_close(&cc, res, want, tol, 4);
      conf_free(x);
      conf_free(res);
    }
  }
}

static void test_token_swap(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_I32, XPJ_U64, XPJ_F32, XPJ_F64};
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    xpj_kernel *k = conf_kernel("atomics.xpk", "token_swap", dts(t), 0);
    cmp_type = t;
    for (size_t si = 0; si < CONF_NSIZES; si++) {
      uint64_t n = conf_sizes[si];
      /* tokens[0..n) and the slot; afterwards tokens + slot are a
       * permutation of the originals */
      void *tok = conf_alloc(n * es), *slot = conf_alloc(es);
      void *want = malloc((n + 1) * es), *got = malloc((n + 1) * es);
      rnd_fill(tok, t, n, 1, 1e9);
      rnd_fill(slot, t, 1, -1e9, -1); /* negative for signed types */
      if (t == XPJ_U64)
        rnd_fill(slot, t, 1, 2e9, 4e9);
      memcpy(want, tok, n * es);
      memcpy((char *)want + n * es, slot, es);
      qsort(want, n + 1, es, cmp_el);
      xpj_array at = xpj_array_1d(tok, t, (int64_t)n),
                as = xpj_array_1d(slot, t, 1);
      xpj_arg args[] = {xpj_arg_array(&at), xpj_arg_array(&as)};
      uint64_t l = locals_1d[si % NELEMS(locals_1d)];
      conf_run(k, xpj_range_1d(n, l), 2, args);
      memcpy(got, tok, n * es);
      memcpy((char *)got + n * es, slot, es);
      qsort(got, n + 1, es, cmp_el);
      ctx_s cc = cx1("token_swap (sorted tokens + slot)", t, n, l);
      check_exact(&cc, got, want, n + 1);
      conf_free(tok);
      conf_free(slot);
      free(want);
      free(got);
    }
  }
}

static void test_append_odd(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_I32, XPJ_U32, XPJ_I64};
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    xpj_kernel *k = conf_kernel("atomics.xpk", "append_odd", dts(t), 0);
    cmp_type = t;
    for (size_t si = 0; si < CONF_NSIZES; si++) {
      uint64_t n = conf_sizes[si];
      void *x = conf_alloc(n * es), *out = conf_alloc(n * es);
      uint32_t *count = conf_alloc(sizeof *count);
      void *want = malloc(n * es);
      rnd_fill(x, t, n, t == XPJ_U32 ? 1 : -1e6, 1e6);
      size_t nodd = 0;
      for (uint64_t i = 0; i < n; i++)
        if (ld_i(x, t, (int64_t)i) & 1)
          memcpy((char *)want + nodd++ * es, (char *)x + i * es, es);
      qsort(want, nodd, es, cmp_el);
      *count = 0;
      rnd_fill(out, t, n, 1, 2);
      xpj_array ax = xpj_array_1d(x, t, (int64_t)n),
                ao = xpj_array_1d(out, t, (int64_t)n),
                ac = xpj_array_1d(count, XPJ_U32, 1);
      xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ao),
                        xpj_arg_array(&ac)};
      uint64_t l = locals_1d[(si + 2) % NELEMS(locals_1d)];
      conf_run(k, xpj_range_1d(n, l), 3, args);
      if (*count != nodd)
        fail_msg("append_odd [%s] n=%llu local=%llu: count %u, want %zu",
                 dts(t), (unsigned long long)n, (unsigned long long)l, *count,
                 nodd);
      qsort(out, nodd, es, cmp_el);
      ctx_s cc = cx1("append_odd (sorted out)", t, n, l);
      check_exact(&cc, out, want, nodd);
      conf_free(x);
      conf_free(out);
      conf_free(count);
      free(want);
    }
  }
}

/* ---- private.xpk ------------------------------------------------------ */

static void test_median3x3(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_F32, XPJ_F64, XPJ_I32};
  static const int64_t dims[][2] = {{1, 1}, {7, 13}, {33, 65}, {100, 257}};
  static const uint64_t locs[][2] = {{0, 0}, {1, 1}, {16, 16}, {8, 32}};
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    xpj_kernel *k = conf_kernel("private.xpk", "median3x3", dts(t), 0);
    cmp_type = t;
    for (size_t di = 0; di < NELEMS(dims); di++) {
      int64_t h = dims[di][0], w = dims[di][1];
      size_t n = (size_t)(h * w);
      void *img = conf_alloc(n * es), *out = conf_alloc(n * es),
           *want = malloc(n * es);
      /* integers in a small range: windows with equal values */
      rnd_fill(img, t, n, -50, 50);
      for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++) {
          char win[9 * 8];
          int q = 0;
          for (int64_t dy = -1; dy <= 1; dy++)
            for (int64_t dx = -1; dx <= 1; dx++) {
              int64_t yy = y + dy < 0 ? 0 : y + dy >= h ? h - 1 : y + dy;
              int64_t xx = x + dx < 0 ? 0 : x + dx >= w ? w - 1 : x + dx;
              memcpy(win + (size_t)q++ * es,
                     (char *)img + (size_t)(yy * w + xx) * es, es);
            }
          qsort(win, 9, es, cmp_el);
          memcpy((char *)want + (size_t)(y * w + x) * es, win + 4 * es, es);
        }
      xpj_array ai = xpj_array_2d(img, t, h, w),
                ao = xpj_array_2d(out, t, h, w);
      xpj_arg args[] = {xpj_arg_array(&ai), xpj_arg_array(&ao)};
      for (size_t li = 0; li < NELEMS(locs); li++) {
        rnd_fill(out, t, n, 100, 200);
        conf_run(
            k, xpj_range_2d((uint64_t)h, (uint64_t)w, locs[li][0], locs[li][1]),
            2, args);
        char sz[64], lo[64];
        snprintf(sz, sizeof sz, "%lldx%lld", (long long)h, (long long)w);
        snprintf(lo, sizeof lo, "local=%llux%llu",
                 (unsigned long long)locs[li][0],
                 (unsigned long long)locs[li][1]);
        ctx_s cc = cx("median3x3", t, sz, lo);
        check_exact(&cc, out, want, n);
      }
      conf_free(img);
      conf_free(out);
      free(want);
    }
  }
}

static void test_polyval(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_F32, XPJ_F64};
  static const int64_t shapes[3][3] = {{1000}, {7, 13}, {3, 5, 7}};
  const size_t ncoeffs[] = {1, 3, 8, 12}; /* 12: only the first 8 count */
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    for (unsigned nd = 1; nd <= 3; nd++) {
      xpj_kernel *k = conf_kernel("private.xpk", "polyval", dts(t), nd);
      for (size_t ci = 0; ci < NELEMS(ncoeffs); ci++) {
        size_t nc = ncoeffs[ci];
        /* x a strided view (a different kind each time), y contiguous */
        int kind = (int)((nd + ci) % (V_KINDS - 1)); /* no broadcast */
        view x = mkview(t, nd, shapes[nd - 1], kind);
        rnd_fill(x.base, t, x.base_n, -1.5, 1.5);
        view y = mkview(t, nd, shapes[nd - 1], V_CONTIG);
        void *co = conf_alloc(nc * es);
        rnd_fill(co, t, nc, -2, 2);
        int64_t n = vsize(&y.a);
        void *want = malloc((size_t)n * es);
        for (int64_t i = 0; i < n; i++) {
          double c[8] = {0};
          for (size_t q = 0; q < nc && q < 8; q++)
            c[q] = ld_f(co, t, (int64_t)q);
          int64_t ix = vaddr(&x.a, i);
          if (t == XPJ_F32) {
            float v = ((float *)x.base)[ix], acc = (float)c[7];
            for (int q = 6; q >= 0; q--) {
              float p = acc * v;
              acc = p + (float)c[q];
            }
            ((float *)want)[i] = acc;
          } else {
            double v = ((double *)x.base)[ix], acc = c[7];
            for (int q = 6; q >= 0; q--) {
              double p = acc * v;
              acc = p + c[q];
            }
            ((double *)want)[i] = acc;
          }
        }
        xpj_array ac = xpj_array_1d(co, t, (int64_t)nc);
        xpj_arg args[] = {xpj_arg_array(&ac), xpj_arg_array(&x.a),
                          xpj_arg_array(&y.a)};
        uint64_t l = locals_1d[(nd + ci) % NELEMS(locals_1d)];
        conf_run(k, xpj_range_1d(l ? round_up((uint64_t)n, l) : (uint64_t)n, l),
                 3, args);
        char sz[128], lo[64];
        snprintf(sz, sizeof sz, "ndim=%u size=%lld, x %s, %zu coefficients", nd,
                 (long long)n, vkind_name[kind], nc);
        snprintf(lo, sizeof lo, "local=%llu", (unsigned long long)l);
        ctx_s cc = cx("polyval", t, sz, lo);
        check_exact(&cc, y.base, want, (size_t)n);
        conf_free(x.base);
        conf_free(y.base);
        conf_free(co);
        free(want);
      }
    }
  }
}

static void test_private_matrix(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_F32, XPJ_F64, XPJ_I32, XPJ_I64};
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    xpj_kernel *k = conf_kernel("private.xpk", "private_matrix", dts(t), 0);
    for (size_t si = 0; si < CONF_NSIZES; si++) {
      uint64_t n = conf_sizes[si];
      void *x = conf_alloc(n * es), *out = conf_alloc(n * es),
           *want = malloc(n * es);
      rnd_fill(x, t, n, -1000, 1000); /* |trace| < 9 * 3000^2 */
      for (uint64_t i = 0; i < n; i++) {
        if (dt_float(t)) {
          /* in the kernel's order and precision */
#define PM_(T)                                                                 \
  do {                                                                         \
    T xv = ((T *)x)[i], m[3][3], tr = 0;                                       \
    for (int r = 0; r < 3; r++)                                                \
      for (int q = 0; q < 3; q++) {                                            \
        T p = xv * (T)(r + 1);                                                 \
        m[r][q] = p - (T)q;                                                    \
      }                                                                        \
    for (int r = 0; r < 3; r++)                                                \
      for (int q = 0; q < 3; q++) {                                            \
        T p = m[r][q] * m[q][r];                                               \
        tr = tr + p;                                                           \
      }                                                                        \
    ((T *)want)[i] = tr;                                                       \
  } while (0)
          if (t == XPJ_F32)
            PM_(float);
          else
            PM_(double);
        } else if (t == XPJ_I32) {
          PM_(int32_t);
        } else {
          PM_(int64_t);
        }
#undef PM_
      }
      xpj_array ax = xpj_array_1d(x, t, (int64_t)n),
                ao = xpj_array_1d(out, t, (int64_t)n);
      xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ao)};
      uint64_t l = locals_1d[si % NELEMS(locals_1d)];
      rnd_fill(out, t, n, 1, 2);
      conf_run(k, xpj_range_1d(n, l), 2, args);
      ctx_s cc = cx1("private_matrix", t, n, l);
      check_exact(&cc, out, want, n);
      conf_free(x);
      conf_free(out);
      free(want);
    }
  }
}

/* ---- functions.xpk ---------------------------------------------------- */

static void test_funcs(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_F32, XPJ_F64, XPJ_I32, XPJ_I64};
  static const int64_t dims[][2] = {
      {1, 2}, {7, 3}, {255, 17}, {1000, 2}, {4099, 5}};
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    xpj_kernel *k = conf_kernel("functions.xpk", "funcs", dts(t), 0);
    for (size_t di = 0; di < NELEMS(dims); di++) {
      int64_t R = dims[di][0], Cn = dims[di][1];
      void *m = conf_alloc((size_t)(R * Cn) * es),
           *out = conf_alloc((size_t)(R * 7) * es),
           *want = malloc((size_t)(R * 7) * es);
      /* integers: |cube| <= 1000^3 < 2^31 */
      rnd_fill(m, t, (size_t)(R * Cn), dt_float(t) ? -10 : -1000,
               dt_float(t) ? 10 : 1000);
      /* a few exact zeros for sign() (rnd_fill gives none) */
      if (R > 3)
        st_num(m, t, (size_t)(3 * Cn), 0, 0);
      for (int64_t r = 0; r < R; r++) {
        int64_t cl = r - 5 < 0 ? 0 : r - 5 > 10 ? 10 : r - 5;
#define FN_(T)                                                                 \
  do {                                                                         \
    const T *mm = (const T *)m + r * Cn;                                       \
    T *o = (T *)want + r * 7, a = mm[0], b = mm[1];                            \
    o[0] = a * a;                                                              \
    T bb = b * b;                                                              \
    o[1] = bb * b;                                                             \
    T d = b - a;                                                               \
    T p = (T)3 * d;                                                            \
    o[2] = a + p;                                                              \
    T acc = 0;                                                                 \
    for (int64_t c = 0; c < Cn; c++)                                           \
      acc = acc + mm[c];                                                       \
    o[3] = acc;                                                                \
    o[4] = a > 0 ? (T)1 : a < 0 ? (T)-1 : (T)0;                                \
    o[5] = bb + bb;                                                            \
    o[6] = (T)cl;                                                              \
  } while (0)
        switch (t) {
        case XPJ_F32:
          FN_(float);
          break;
        case XPJ_F64:
          FN_(double);
          break;
        case XPJ_I32:
          FN_(int32_t);
          break;
        default:
          FN_(int64_t);
          break;
        }
#undef FN_
      }
      xpj_array am = xpj_array_2d(m, t, R, Cn), ao = xpj_array_2d(out, t, R, 7);
      xpj_arg args[] = {xpj_arg_array(&am), xpj_arg_array(&ao)};
      uint64_t l = locals_1d[di % NELEMS(locals_1d)];
      rnd_fill(out, t, (size_t)(R * 7), 100, 200);
      conf_run(k, xpj_range_1d((uint64_t)R, l), 2, args);
      char sz[96];
      snprintf(sz, sizeof sz, "%lldx%lld (index r*7+c in out)", (long long)R,
               (long long)Cn);
      char lo[32];
      snprintf(lo, sizeof lo, "local=%llu", (unsigned long long)l);
      ctx_s cc = cx("funcs", t, sz, lo);
      check_exact(&cc, out, want, (size_t)(R * 7));
      conf_free(m);
      conf_free(out);
      free(want);
    }
  }
}

static void test_reverse_chunks(void **state) {
  (void)state;
  const xpj_scalar types[] = {XPJ_F32, XPJ_F64, XPJ_I32};
  const uint64_t locals[] = {1, 16, 64, 256, 512};
  const uint64_t CHUNK = 512;
  for (size_t ti = 0; ti < NELEMS(types); ti++) {
    xpj_scalar t = types[ti];
    size_t es = dt_size(t);
    xpj_kernel *k = conf_kernel("functions.xpk", "reverse_chunks", dts(t), 0);
    for (size_t si = 0; si < CONF_NSIZES; si++) {
      uint64_t n = conf_sizes[si], ng = (n + CHUNK - 1) / CHUNK;
      void *src = conf_alloc(n * es), *scratch = conf_alloc(ng * CHUNK * es),
           *dst = conf_alloc(n * es), *want = malloc(n * es);
      rnd_fill(src, t, n, -1e6, 1e6);
      for (uint64_t base = 0; base < n; base += CHUNK) {
        uint64_t cnt = min_u(CHUNK, n - base);
        for (uint64_t i = 0; i < cnt; i++)
          memcpy((char *)want + (base + i) * es,
                 (char *)src + (base + cnt - 1 - i) * es, es);
      }
      xpj_array as = xpj_array_1d(src, t, (int64_t)n),
                ak = xpj_array_1d(scratch, t, (int64_t)(ng * CHUNK)),
                ad = xpj_array_1d(dst, t, (int64_t)n);
      xpj_arg args[] = {xpj_arg_array(&as), xpj_arg_array(&ak),
                        xpj_arg_array(&ad)};
      for (size_t li = 0; li < NELEMS(locals); li++) {
        uint64_t l = locals[li];
        if (l > kmax_wg(k))
          continue;
        rnd_fill(dst, t, n, 1, 2);
        /* num_groups(0) = ceil(n / CHUNK), as the kernel requires */
        conf_run(k, xpj_range_1d(ng * l, l), 3, args);
        ctx_s cc = cx1("reverse_chunks", t, n, l);
        check_exact(&cc, dst, want, n);
      }
      conf_free(src);
      conf_free(scratch);
      conf_free(dst);
      free(want);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vadd),
      cmocka_unit_test(test_saxpy),
      cmocka_unit_test(test_row_sums),
      cmocka_unit_test(test_elementwise_views),
      cmocka_unit_test(test_reduce),
      cmocka_unit_test(test_histogram),
      cmocka_unit_test(test_matmul),
      cmocka_unit_test(test_transpose),
      cmocka_unit_test(test_scan),
      cmocka_unit_test(test_stencil),
      cmocka_unit_test(test_sort),
      cmocka_unit_test(test_atomic_int),
      cmocka_unit_test(test_local_counters),
      cmocka_unit_test(test_float_atomics),
      cmocka_unit_test(test_token_swap),
      cmocka_unit_test(test_append_odd),
      cmocka_unit_test(test_median3x3),
      cmocka_unit_test(test_polyval),
      cmocka_unit_test(test_private_matrix),
      cmocka_unit_test(test_funcs),
      cmocka_unit_test(test_reverse_chunks),
  };
  return cmocka_run_group_tests(tests, conf_setup, conf_teardown);
}
