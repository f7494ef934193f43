/* test_collectives.c - work-group and sub-group collectives against C
 * references, for every dtype each takes: reductions, inclusive and
 * exclusive scans (add, mul, min, max; and, or, xor on integers and
 * bools), broadcasts, in 1-D and 2-D groups of several sizes (powers of two
 * and not), from kernels and device functions, inside uniform branches and
 * loops and in the right operands of &&, || and ?: (and while conditions); sub-group size, ids, reductions, scans, shuffles and broadcasts,
 * checked against the partition the device reports. Kernels:
 * tests/conformance/collectives.xpk. Device: XPJIT_TEST_DEVICE
 * (tests/run_tests.sh runs it on the CPU and on OpenCL). */
#include "conformance/common.h"

#include <float.h>
#include <stdbool.h>

/* common.h's helpers this suite has no use for */
__attribute__((unused)) static void unused_helpers(void) {
  (void)ulps_f32;
  (void)ulps_f64;
  (void)rnd_fill;
}

typedef struct dt {
  const char *dtypes; /* "T=i8" */
  xpj_scalar s;
  unsigned bytes;
  int fl, sg;
} dt;

static const dt DT[] = {
    {"T=i8", XPJ_I8, 1, 0, 1},   {"T=i16", XPJ_I16, 2, 0, 1},
    {"T=i32", XPJ_I32, 4, 0, 1}, {"T=i64", XPJ_I64, 8, 0, 1},
    {"T=u8", XPJ_U8, 1, 0, 0},   {"T=u16", XPJ_U16, 2, 0, 0},
    {"T=u32", XPJ_U32, 4, 0, 0}, {"T=u64", XPJ_U64, 8, 0, 0},
    {"T=f32", XPJ_F32, 4, 1, 1}, {"T=f64", XPJ_F64, 8, 1, 1}};
#define NDT (sizeof DT / sizeof *DT)

enum { ADD, MUL, MIN, MAX, AND, OR, XOR };
static const char *const opname[] = {"add", "mul", "min", "max",
                                     "and", "or",  "xor"};

/* A value of any dtype: the integer (sign- or zero-extended) or the
 * float (an f32 held exactly in a double). */
typedef struct val {
  int64_t i;
  double f;
} val;

static val ld(const dt *t, const void *base, size_t k) {
  const uint8_t *p = (const uint8_t *)base + k * t->bytes;
  val v = {0, 0};
  if (t->fl) {
    if (t->bytes == 4) {
      float f;
      memcpy(&f, p, 4);
      v.f = f;
    } else {
      memcpy(&v.f, p, 8);
    }
    return v;
  }
  v.i = conf_load_int(p, t->bytes, t->sg);
  return v;
}

static void st(const dt *t, void *base, size_t k, val v) {
  uint8_t *p = (uint8_t *)base + k * t->bytes;
  if (t->fl && t->bytes == 4) {
    float f = (float)v.f;
    memcpy(p, &f, 4);
  } else if (t->fl) {
    memcpy(p, &v.f, 8);
  } else {
    memcpy(p, &v.i, t->bytes);
  }
}

/* a random input for op: products stay finite, floats are exact in T */
static val gen(const dt *t, int op) {
  val v = {(int64_t)rnd64(), 0};
  if (!t->fl) {
    uint8_t b[8];
    memcpy(b, &v.i, 8);
    return ld(t, b, 0);
  }
  v.f = op == MUL ? rnd_real(0.9, 1.1) : rnd_real(-100, 100);
  if (t->bytes == 4)
    v.f = (float)v.f;
  return v;
}

static val identity(const dt *t, int op) {
  val v = {0, 0};
  unsigned bits = t->bytes * 8;
  switch (op) {
  case MUL:
    v.i = 1;
    v.f = 1;
    break;
  case MIN:
    v.f = INFINITY;
    v.i = t->sg ? (int64_t)((UINT64_C(1) << (bits - 1)) - 1) : -1;
    break;
  case MAX:
    v.f = -INFINITY;
    v.i = t->sg ? -(int64_t)((UINT64_C(1) << (bits - 1)) - 1) - 1 : 0;
    break;
  case AND:
    v.i = -1;
    break;
  default:
    break;
  }
  return v;
}

/* a op b, computed as the device does in sequence (floats rounded to T) */
static val combine(const dt *t, int op, val a, val b) {
  val r = a;
  uint64_t ua = (uint64_t)a.i, ub = (uint64_t)b.i;
  bool less = t->fl ? b.f < a.f : t->sg ? b.i < a.i : ub < ua;
  switch (op) {
  case ADD:
    r.i = (int64_t)(ua + ub);
    r.f = a.f + b.f;
    break;
  case MUL:
    r.i = (int64_t)(ua * ub);
    r.f = a.f * b.f;
    break;
  case MIN:
    r = less ? b : a;
    break;
  case MAX:
    r = !less && (t->fl ? b.f != a.f : b.i != a.i) ? b : a;
    break;
  case AND: r.i = (int64_t)(ua & ub); break;
  case OR: r.i = (int64_t)(ua | ub); break;
  default: r.i = (int64_t)(ua ^ ub); break;
  }
  if (t->fl && t->bytes == 4)
    r.f = (float)r.f;
  return r;
}

/* got equals want: integers in T's width; floats exactly, or for add and
 * mul within the rounding of any order of n terms whose magnitudes add up
 * to mag (the device may combine in a tree) */
static bool same(const dt *t, int op, val got, val want, unsigned n,
                 double mag) {
  if (!t->fl) {
    uint64_t m = t->bytes == 8 ? ~UINT64_C(0)
                               : (UINT64_C(1) << (t->bytes * 8)) - 1;
    return (((uint64_t)got.i ^ (uint64_t)want.i) & m) == 0;
  }
  if (got.f == want.f)
    return true;
  if (op != ADD && op != MUL)
    return false;
  double eps = t->bytes == 4 ? FLT_EPSILON : DBL_EPSILON;
  return fabs(got.f - want.f) <= 2.0 * n * eps * mag;
}

static void fail_at(const dt *t, const char *what, int op, size_t k,
                    val got, val want) {
  if (t->fl)
    fail_msg("%s %s_%s [%zu]: got %.17g, want %.17g", t->dtypes, what,
             opname[op], k, got.f, want.f);
  fail_msg("%s %s_%s [%zu]: got %lld, want %lld", t->dtypes, what, opname[op],
           k, (long long)got.i, (long long)want.i);
}

/* Checks reduction red, scans inc / exc (either may be NULL) of the
 * members[0..n) of one group (indices into x in the group's linear
 * order). */
static void check_group(const dt *t, int op, const void *x,
                        const size_t *members, unsigned n, const void *red,
                        const void *inc, const void *exc) {
  val acc = identity(t, op);
  double mag = 0, run = 0;
  for (unsigned j = 0; j < n; j++) {
    size_t k = members[j];
    val v = ld(t, x, k);
    run += op == MUL ? 0 : fabs(v.f);
    if (exc && !same(t, op, ld(t, exc, k), acc, j, op == MUL ? fabs(acc.f) : run - fabs(v.f)))
      fail_at(t, "scan_exclusive", op, k, ld(t, exc, k), acc);
    acc = combine(t, op, acc, v);
    if (inc && !same(t, op, ld(t, inc, k), acc, j + 1, op == MUL ? fabs(acc.f) : run))
      fail_at(t, "scan_inclusive", op, k, ld(t, inc, k), acc);
  }
  mag = op == MUL ? fabs(acc.f) : run;
  for (unsigned j = 0; red && j < n; j++)
    if (!same(t, op, ld(t, red, members[j]), acc, n, mag))
      fail_at(t, "reduce", op, members[j], ld(t, red, members[j]), acc);
}

/* 1-D groups of L work-items, ngroups of them: coll (op < AND) or
 * collbits, then the references group by group. */
static void run_1d(const dt *t, int op, unsigned L, unsigned ngroups) {
  size_t n = (size_t)L * ngroups, b = n * t->bytes;
  void *x = conf_alloc(b), *red = conf_alloc(b), *inc = conf_alloc(b),
       *exc = conf_alloc(b), *bc = conf_alloc(b);
  for (size_t k = 0; k < n; k++)
    st(t, x, k, gen(t, op));
  int64_t src = (int64_t)(rnd64() % L);
  xpj_array ax = xpj_array_1d(x, t->s, (int64_t)n);
  xpj_array ar = xpj_array_1d(red, t->s, (int64_t)n);
  xpj_array ai = xpj_array_1d(inc, t->s, (int64_t)n);
  xpj_array ae = xpj_array_1d(exc, t->s, (int64_t)n);
  xpj_array ab = xpj_array_1d(bc, t->s, (int64_t)n);
  xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ar),
                    xpj_arg_array(&ai), xpj_arg_array(&ae),
                    xpj_arg_array(&ab), xpj_arg_i32(op),
                    xpj_arg_i64(src)};
  bool bits = op >= AND || op == MUL;
  const char *kn = op == MUL ? "collmul" : bits ? "collbits" : "coll";
  xpj_kernel *k = NULL;
  if (xpj_program_get_kernel(conf_program("collectives.xpk"), kn, t->dtypes, 0,
                             C.dev, NULL, &k) != XPJ_OK)
    fail_msg("%s %s: %s", kn, t->dtypes, xpj_last_error());
  if (bits)
    args[4] = xpj_arg_i32(op);
  conf_run(k, xpj_range_1d(n, L), bits ? 5 : 7, args);
  size_t *members = malloc(L * sizeof *members);
  assert_non_null(members);
  for (unsigned g = 0; g < ngroups; g++) {
    for (unsigned j = 0; j < L; j++)
      members[j] = (size_t)g * L + j;
    check_group(t, op, x, members, L, red, inc, exc);
    for (unsigned j = 0; j < L && !bits; j++) {
      val got = ld(t, bc, members[j]), want = ld(t, x, members[src]);
      if (t->fl ? got.f != want.f : got.i != want.i)
        fail_at(t, "broadcast", op, members[j], got, want);
    }
  }
  free(members);
  conf_free(x);
  conf_free(red);
  conf_free(inc);
  conf_free(exc);
  conf_free(bc);
}

static const unsigned sizes_1d[] = {1, 7, 64, 100, 256};

/* add, min, max */
static void test_group_arith(void **state) {
  (void)state;
  for (size_t d = 0; d < NDT; d++)
    for (int op = ADD; op <= MAX; op += op == ADD ? 2 : 1)
      for (size_t s = 0; s < sizeof sizes_1d / sizeof *sizes_1d; s++)
        run_1d(&DT[d], op, sizes_1d[s], 3);
}

static void test_group_mul(void **state) {
  (void)state;
  for (size_t d = 0; d < NDT; d++)
    for (size_t s = 0; s < sizeof sizes_1d / sizeof *sizes_1d; s++)
      run_1d(&DT[d], MUL, sizes_1d[s], 3);
}

static void test_group_bitwise(void **state) {
  (void)state;
  for (size_t d = 0; d < NDT; d++)
    for (int op = AND; op <= XOR && !DT[d].fl; op++)
      for (size_t s = 0; s < sizeof sizes_1d / sizeof *sizes_1d; s++)
        run_1d(&DT[d], op, sizes_1d[s], 3);
}

/* group_reduce_or / _and of bools: any and all */
static void test_group_any_all(void **state) {
  (void)state;
  xpj_kernel *k = conf_kernel("collectives.xpk", "anyall", NULL, 0);
  const unsigned L = 64, G = 4;
  uint8_t *x = conf_alloc(L * G), *any = conf_alloc(L * G),
          *all = conf_alloc(L * G);
  for (unsigned g = 0; g < G; g++) /* none, one, all but one, all */
    for (unsigned j = 0; j < L; j++)
      x[g * L + j] = g == 0 ? 0 : g == 1 ? j == 5 : g == 2 ? j != 9 : 1;
  xpj_array ax = xpj_array_1d(x, XPJ_BOOL, L * G);
  xpj_array aa = xpj_array_1d(any, XPJ_BOOL, L * G);
  xpj_array al = xpj_array_1d(all, XPJ_BOOL, L * G);
  xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&aa),
                    xpj_arg_array(&al)};
  conf_run(k, xpj_range_1d(L * G, L), 3, args);
  for (unsigned i = 0; i < L * G; i++) {
    unsigned g = i / L;
    if (any[i] != (g > 0) || all[i] != (g == 3))
      fail_msg("anyall [%u]: any %u all %u", i, any[i], all[i]);
  }
  conf_free(x);
  conf_free(any);
  conf_free(all);
}

/* Scans of bools over the members of a group, in order (m[0..n)): or,
 * and, xor; inclusive (row 2 op) and exclusive (row 2 op + 1, whose first
 * gets the identity: false, true, false). rows: r's rows from base. */
static void check_bool_scans(const uint8_t *x, const uint8_t *r, size_t N,
                             const size_t *m, unsigned n, unsigned base,
                             const char *what) {
  for (unsigned op = 0; op < 3; op++) {
    unsigned acc = op == 1; /* or, and, xor */
    for (unsigned j = 0; j < n; j++) {
      unsigned before = acc, v = x[m[j]];
      acc = op == 0 ? acc | v : op == 1 ? acc & v : acc ^ v;
      unsigned inc = r[(base + 2 * op) * N + m[j]],
               exc = r[(base + 2 * op + 1) * N + m[j]];
      if (inc != acc || exc != before)
        fail_msg("%s scan %s of bools, member %u (item %zu): inclusive %u "
                 "(want %u), exclusive %u (want %u)", what,
                 op == 0 ? "or" : op == 1 ? "and" : "xor", j, m[j], inc, acc,
                 exc, before);
    }
  }
}

/* group_ and sub_group_scan_* of bools: or, and, xor (the first work-item
 * of an exclusive or was true on OpenCL: the wide identity of a signed
 * max) */
static void test_bool_scans(void **state) {
  (void)state;
  xpj_kernel *k = conf_kernel("collectives.xpk", "boolscans", NULL, 0);
  const unsigned L = 64, G = 5;
  const size_t N = (size_t)L * G;
  uint8_t *x = conf_alloc(N), *r = conf_alloc(12 * N);
  int64_t *sg = conf_alloc(2 * N * 8);
  for (unsigned g = 0; g < G; g++) /* none, one, all but one, all, random */
    for (unsigned j = 0; j < L; j++)
      x[g * L + j] = g == 0   ? 0
                     : g == 1 ? j == 5
                     : g == 2 ? j != 9
                     : g == 3 ? 1
                              : (uint8_t)(rnd64() & 1);
  int64_t rs[2] = {12, (int64_t)N}, ss[2] = {2, (int64_t)N};
  xpj_array ax = xpj_array_1d(x, XPJ_BOOL, N);
  xpj_array ar = xpj_array_nd(r, XPJ_BOOL, 2, rs);
  xpj_array as = xpj_array_nd(sg, XPJ_I64, 2, ss);
  xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ar),
                    xpj_arg_array(&as)};
  conf_run(k, xpj_range_1d(N, L), 3, args);
  size_t m[64];
  for (unsigned g = 0; g < G; g++) {
    for (unsigned j = 0; j < L; j++)
      m[j] = (size_t)g * L + j;
    check_bool_scans(x, r, N, m, L, 0, "group");
    for (int64_t s = 0; s < (int64_t)L; s++) { /* each sub-group, by lane */
      unsigned n = 0;
      for (int64_t lane = 0; lane < (int64_t)L; lane++)
        for (unsigned j = 0; j < L; j++)
          if (sg[(size_t)g * L + j] == s && sg[N + (size_t)g * L + j] == lane)
            m[n++] = (size_t)g * L + j;
      if (n)
        check_bool_scans(x, r, N, m, n, 6, "sub-group");
    }
  }
  conf_free(x);
  conf_free(r);
  conf_free(sg);
}

/* 2-D groups: row-major linear order; collectives feeding a loop */
static void run_2d(const dt *t, unsigned lr, unsigned lc) {
  const unsigned gr = 2, gc = 3;
  size_t R = (size_t)lr * gr, Cn = (size_t)lc * gc, n = R * Cn,
         b = n * t->bytes;
  void *x = conf_alloc(b), *red = conf_alloc(b), *inc = conf_alloc(b),
       *bc = conf_alloc(b);
  int64_t *ids = conf_alloc(n * 8);
  for (size_t k = 0; k < n; k++)
    st(t, x, k, gen(t, ADD));
  unsigned L = lr * lc;
  int64_t src = (int64_t)(rnd64() % L);
  int64_t shape[2] = {(int64_t)R, (int64_t)Cn};
  xpj_array ax = xpj_array_nd(x, t->s, 2, shape);
  xpj_array ar = xpj_array_nd(red, t->s, 2, shape);
  xpj_array ai = xpj_array_nd(inc, t->s, 2, shape);
  xpj_array ab = xpj_array_nd(bc, t->s, 2, shape);
  xpj_array ad = xpj_array_nd(ids, XPJ_I64, 2, shape);
  xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&ar),
                    xpj_arg_array(&ai), xpj_arg_array(&ab),
                    xpj_arg_array(&ad), xpj_arg_i64(src)};
  xpj_kernel *k = conf_kernel("collectives.xpk", "coll2d", t->dtypes, 0);
  conf_run(k, xpj_range_2d(R, Cn, lr, lc), 6, args);
  size_t *members = malloc(L * sizeof *members);
  assert_non_null(members);
  for (unsigned g0 = 0; g0 < gr; g0++)
    for (unsigned g1 = 0; g1 < gc; g1++) {
      for (unsigned a = 0; a < lr; a++)
        for (unsigned c = 0; c < lc; c++)
          members[a * lc + c] = (g0 * lr + a) * Cn + g1 * lc + c;
      check_group(t, ADD, x, members, L, red, inc, NULL);
      for (unsigned j = 0; j < L; j++) {
        val got = ld(t, bc, members[j]), want = ld(t, x, members[src]);
        if (t->fl ? got.f != want.f : got.i != want.i)
          fail_at(t, "2-D broadcast", ADD, members[j], got, want);
        int64_t w = (int64_t)(L - 1) * 1000 + (int64_t)L * j;
        if (ids[members[j]] != w)
          fail_msg("%s coll2d %ux%u ids[%zu] = %lld, want %lld", t->dtypes,
                   lr, lc, members[j], (long long)ids[members[j]],
                   (long long)w);
      }
    }
  free(members);
  conf_free(x);
  conf_free(red);
  conf_free(inc);
  conf_free(bc);
  conf_free(ids);
}

static void test_group_2d(void **state) {
  (void)state;
  static const unsigned sz[][2] = {{4, 8}, {3, 5}, {16, 16}, {1, 9}};
  for (size_t d = 0; d < NDT; d++)
    for (size_t s = 0; s < sizeof sz / sizeof *sz; s++)
      run_2d(&DT[d], sz[s][0], sz[s][1]);
}

/* &&, || and ?: whose right operand (chosen arm) holds a collective or a
 * call of a function with barriers, a while condition that does, and
 * those in a device function (condcoll): the CPU refused every one ("a
 * conditional expression that reaches a barrier") before it ran them at
 * work-group level. Group g's flag is g % 4; its values are small (0..3),
 * any (0..63) or at least 5 (5..29) by g / 4, so each condition goes
 * both ways; every result is checked exactly. */
static void test_conditional_collectives(void **state) {
  (void)state;
  xpj_kernel *k = conf_kernel("collectives.xpk", "condcoll", NULL, 0);
  static const unsigned sizes[] = {1, 7, 64, 100};
  enum { G = 12, R = 9 };
  unsigned seen[6] = {0};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    unsigned L = sizes[s];
    size_t N = (size_t)L * G;
    int32_t *x = conf_alloc(N * 4), *f = conf_alloc(G * 4),
            *r = conf_alloc(R * N * 4);
    for (unsigned g = 0; g < G; g++) {
      f[g] = (int32_t)(g % 4);
      for (unsigned j = 0; j < L; j++) {
        uint64_t u = rnd64();
        x[g * L + j] = (int32_t)(g / 4 == 0   ? u % 4
                                 : g / 4 == 1 ? u % 64
                                              : 5 + u % 25);
      }
    }
    memset(r, 0x55, R * N * 4);
    int64_t rs[2] = {R, (int64_t)N};
    xpj_array ax = xpj_array_1d(x, XPJ_I32, (int64_t)N);
    xpj_array af = xpj_array_1d(f, XPJ_I32, G);
    xpj_array ar = xpj_array_nd(r, XPJ_I32, 2, rs);
    xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&af),
                      xpj_arg_array(&ar), xpj_arg_local(L)};
    conf_run(k, xpj_range_1d(N, L), 4, args);
    for (unsigned g = 0; g < G; g++) {
      const int32_t *v = &x[g * L];
      int32_t fg = f[g], sum = 0, mx = INT32_MIN, mn = INT32_MAX;
      for (unsigned j = 0; j < L; j++) {
        sum += v[j];
        mx = v[j] > mx ? v[j] : mx;
        mn = v[j] < mn ? v[j] : mn;
      }
      bool a = fg > 0 && sum > 10, b = fg > 1 || mx > 50,
           e = fg == 0 || (sum > 40 && mn < 5), wc = fg > 0 && mn < 5;
      int32_t trips = 60 - mx < fg ? 60 - mx : fg;
      if (trips < 0)
        trips = 0;
      seen[0] |= 1u << a;
      seen[1] |= 1u << b;
      seen[2] |= 1u << e;
      seen[3] |= 1u << wc;
      seen[4] |= 1u << (trips > 0);
      seen[5] |= 1u << (fg > 0 && sum >= 200);
      int32_t before = 0;
      for (unsigned j = 0; j < L; j++) {
        int32_t want[R];
        want[0] = a;
        want[1] = b;
        want[2] = fg > 0 ? before + v[j] : 2 * v[j];
        want[3] = fg > 1 ? sum : -1;
        want[4] = e;
        want[5] = wc ? (int32_t)L + v[j] : 0;
        want[6] = (int32_t)j * trips * (trips + 1) / 2;
        int32_t w = fg > 1 ? sum : mx;
        int32_t u = wc ? w + 1 : w;
        want[7] = fg > 2 ? before + u : u;
        want[8] = 0;
        while (want[8] < fg && sum + (int32_t)L * want[8] < 200)
          want[8]++;
        before += v[j];
        for (unsigned q = 0; q < R; q++) {
          int32_t got = r[(size_t)q * N + g * L + j];
          if (got != want[q])
            fail_msg("condcoll L %u group %u (flag %d) work-item %u: "
                     "result %u is %d, want %d", L, g, fg, j, q, got,
                     want[q]);
        }
      }
    }
    conf_free(x);
    conf_free(f);
    conf_free(r);
  }
  for (unsigned q = 0; q < 6; q++) /* the inputs take each way */
    assert_int_equal(seen[q], 3);
}

/* Sub-groups: the partition the device reports must be one (each
 * sub-group's lanes 0..size-1, ids 0..num-1, sizes adding up to the
 * group), and the collectives must match it. */
static void run_sub(const dt *t, unsigned L, unsigned ngroups) {
  size_t n = (size_t)L * ngroups, b = n * t->bytes;
  void *x = conf_alloc(b), *red = conf_alloc(b), *inc = conf_alloc(b),
       *exc = conf_alloc(b), *shf = conf_alloc(b), *shx = conf_alloc(b),
       *bc = conf_alloc(b);
  int64_t *info = conf_alloc(n * 4 * 8);
  for (size_t k = 0; k < n; k++)
    st(t, x, k, gen(t, ADD));
  int64_t ishape[2] = {(int64_t)n, 4};
  xpj_array ax = xpj_array_1d(x, t->s, (int64_t)n);
  xpj_array an = xpj_array_nd(info, XPJ_I64, 2, ishape);
  xpj_array ar = xpj_array_1d(red, t->s, (int64_t)n);
  xpj_array ai = xpj_array_1d(inc, t->s, (int64_t)n);
  xpj_array ae = xpj_array_1d(exc, t->s, (int64_t)n);
  xpj_array as = xpj_array_1d(shf, t->s, (int64_t)n);
  xpj_array aq = xpj_array_1d(shx, t->s, (int64_t)n);
  xpj_array ab = xpj_array_1d(bc, t->s, (int64_t)n);
  xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&an),
                    xpj_arg_array(&ar), xpj_arg_array(&ai),
                    xpj_arg_array(&ae), xpj_arg_array(&as),
                    xpj_arg_array(&aq), xpj_arg_array(&ab)};
  xpj_kernel *k = conf_kernel("collectives.xpk", "subgroups", t->dtypes, 0);
  conf_run(k, xpj_range_1d(n, L), 8, args);
  size_t *members = malloc(L * sizeof *members);
  assert_non_null(members);
  for (unsigned g = 0; g < ngroups; g++) {
    int64_t num = info[(size_t)g * L * 4 + 3];
    if (num < 1 || num > (int64_t)L)
      fail_msg("%s L %u: num_sub_groups %lld", t->dtypes, L, (long long)num);
    unsigned covered = 0;
    for (int64_t sgid = 0; sgid < num; sgid++) {
      unsigned m = 0;
      int64_t size = -1;
      for (unsigned j = 0; j < L; j++)
        members[j] = SIZE_MAX;
      for (unsigned j = 0; j < L; j++) {
        size_t kk = (size_t)g * L + j;
        const int64_t *in = &info[kk * 4];
        if (in[3] != num)
          fail_msg("%s L %u [%zu]: num_sub_groups %lld, not %lld",
                   t->dtypes, L, kk, (long long)in[3], (long long)num);
        if (in[1] != sgid)
          continue;
        if (size < 0)
          size = in[0];
        if (in[0] != size || in[2] < 0 || in[2] >= size)
          fail_msg("%s L %u [%zu]: sub-group %lld size %lld lane %lld",
                   t->dtypes, L, kk, (long long)sgid, (long long)in[0],
                   (long long)in[2]);
        if (members[in[2]] != SIZE_MAX)
          fail_msg("%s L %u: two work-items in lane %lld of sub-group %lld",
                   t->dtypes, L, (long long)in[2], (long long)sgid);
        members[in[2]] = kk;
        m++;
      }
      if ((int64_t)m != size)
        fail_msg("%s L %u: sub-group %lld has %u work-items, reports size "
                 "%lld", t->dtypes, L, (long long)sgid, m, (long long)size);
      covered += m;
      check_group(t, ADD, x, members, m, red, NULL, exc);
      val acc = identity(t, MAX);
      for (unsigned j = 0; j < m; j++) {
        size_t kk = members[j];
        acc = combine(t, MAX, acc, ld(t, x, kk));
        val got = ld(t, inc, kk);
        if (t->fl ? got.f != acc.f : got.i != acc.i)
          fail_at(t, "sub_group_scan_inclusive", MAX, kk, got, acc);
        val s1 = ld(t, shf, kk), w1 = ld(t, x, members[m - 1 - j]);
        val s2 = ld(t, bc, kk), w2 = ld(t, x, members[0]);
        if (t->fl ? s1.f != w1.f || s2.f != w2.f : s1.i != w1.i || s2.i != w2.i)
          fail_msg("%s L %u [%zu]: shuffle / broadcast wrong", t->dtypes, L,
                   kk);
        if ((j ^ 1) < m) {
          val s3 = ld(t, shx, kk), w3 = ld(t, x, members[j ^ 1]);
          if (t->fl ? s3.f != w3.f : s3.i != w3.i)
            fail_msg("%s L %u [%zu]: shuffle_xor wrong", t->dtypes, L, kk);
        }
      }
    }
    if (covered != L)
      fail_msg("%s L %u: the sub-groups hold %u of %u work-items", t->dtypes,
               L, covered, L);
  }
  free(members);
  conf_free(x);
  conf_free(red);
  conf_free(inc);
  conf_free(exc);
  conf_free(shf);
  conf_free(shx);
  conf_free(bc);
  conf_free(info);
}

static void test_sub_groups(void **state) {
  (void)state;
  static const unsigned L[] = {1, 7, 64, 100};
  for (size_t d = 0; d < NDT; d++)
    for (size_t s = 0; s < sizeof L / sizeof *L; s++)
      run_sub(&DT[d], L[s], 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_group_arith),
      cmocka_unit_test(test_group_mul),
      cmocka_unit_test(test_group_bitwise),
      cmocka_unit_test(test_group_any_all),
      cmocka_unit_test(test_bool_scans),
      cmocka_unit_test(test_group_2d),
      cmocka_unit_test(test_conditional_collectives),
      cmocka_unit_test(test_sub_groups),
  };
  return cmocka_run_group_tests(tests, conf_setup, conf_teardown);
}
