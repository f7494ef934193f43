/*
 * test_ir.c - the IR: the builder and its typing rules, constant folding,
 * the verifier, the printer, the canonical hash, and specialisation.
 */
#include "testutil.h"

#include "buf.h"
#include "ir_impl.h"

#include <fenv.h>
#include <math.h>
#include <stdio.h>

#define PINNED_AXPY_F32_1 "778b8bdf3240dd85fba44503b4f1730669286602b185f1d4c5853d6971222fd0"

static const xpj_loc L = {0, 1, 1};

/* ---- builder -------------------------------------------------------- */

/* axpy<T>(a: T, x: global const T[*], y: global T[*]) range, built by hand:
 * the same program the parser makes from the source below. */
static const char *axpy_src =
    "kernel axpy<T>(a: T, x: global const T[*], y: global T[*]) range {\n"
    "    let i = global_linear_id();\n"
    "    y[i] = a * x[i] + y[i];\n"
    "}\n";

static xpj_module *build_axpy(void) {
  xpj_module *m;
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  const char *tp[] = {"T"};
  xpj_func *f = xpj_func_create(m, "axpy", XPJ_FUNC_RANGE, 0, 1, tp, L);
  assert_non_null(f);
  xpj_type T = xpj_type_param(m, 0);
  xpj_val a = xpj_func_add_param(f, "a", T, L);
  xpj_val x = xpj_func_add_param(f, "x", xpj_type_view(m, T, XPJ_RANK_GENERIC, 1), L);
  xpj_val y = xpj_func_add_param(f, "y", xpj_type_view(m, T, XPJ_RANK_GENERIC, 0), L);
  assert_true(a && x && y);
  xpj_block b = xpj_func_body(f);
  xpj_val id = xpj_b_wi(f, b, XPJ_WI_GLOBAL_LINEAR_ID, 0, L);
  xpj_val var = xpj_b_var(f, b, xpj_val_type(f, id), "i", L);
  assert_non_null((void *)(uintptr_t)xpj_b_store(f, b, var, id, L));
  xpj_val i1 = xpj_b_load(f, b, var, L);
  xpj_val py = xpj_b_index(f, b, y, 1, &i1, L);
  xpj_val i2 = xpj_b_load(f, b, var, L);
  xpj_val px = xpj_b_index(f, b, x, 1, &i2, L);
  xpj_val vx = xpj_b_load(f, b, px, L);
  xpj_val ax = xpj_b_binop(f, b, XPJ_MUL, a, vx, L);
  xpj_val i3 = xpj_b_load(f, b, var, L);
  xpj_val py2 = xpj_b_index(f, b, y, 1, &i3, L);
  xpj_val vy = xpj_b_load(f, b, py2, L);
  xpj_val sum = xpj_b_binop(f, b, XPJ_ADD, ax, vy, L);
  assert_true(xpj_b_store(f, b, py, sum, L) != 0);
  const char *msg;
  assert_int_equal(xpj_module_verify(m, &msg), XPJ_OK);
  return m;
}

static void hash_of(const xpj_module *m, const char *k, const char *t,
                    xpj_scalar s, unsigned ndim, char hex[65]) {
  const char *names[] = {t};
  xpj_scalar types[] = {s};
  xpj_spec sp = {t ? 1u : 0u, names, types, ndim, 0, NULL, NULL};
  xpj_module *out = NULL;
  assert_int_equal(xpj_specialize(m, k, &sp, &out, NULL), XPJ_OK);
  assert_int_equal(xpj_module_hash(out, k, NULL, hex), XPJ_OK);
  xpj_module_destroy(out);
}

/* The parser is a client of the builder: both make the same program. */
static void test_builder_matches_parser(void **state) {
  (void)state;
  xpj_module *built = build_axpy(), *parsed = NULL;
  assert_int_equal(parse_src(axpy_src, &parsed, NULL), XPJ_OK);
  char h1[65], h2[65];
  for (unsigned nd = 1; nd <= 3; nd++) {
    hash_of(built, "axpy", "T", XPJ_F32, nd, h1);
    hash_of(parsed, "axpy", "T", XPJ_F32, nd, h2);
    assert_string_equal(h1, h2);
  }
  xpj_module_destroy(built);
  xpj_module_destroy(parsed);
}

static void test_builder_type_errors(void **state) {
  (void)state;
  xpj_module *m;
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  xpj_func *f = xpj_func_create(m, "k", XPJ_FUNC_RANGE, 1, 0, NULL, L);
  xpj_type f32 = xpj_type_scalar(m, XPJ_F32), i32 = xpj_type_scalar(m, XPJ_I32);
  xpj_val x = xpj_func_add_param(f, "x", xpj_type_view(m, f32, 1, 1), L);
  xpj_block b = xpj_func_body(f);
  xpj_val one = xpj_b_const_float(f, b, f32, 1.0, L);
  xpj_val two = xpj_b_const_int(f, b, i32, 2, L);
  assert_int_equal(xpj_b_binop(f, b, XPJ_ADD, one, two, L), 0);
  assert_string_equal(xpj_module_errmsg(m),
                      "mismatched types f32 and i32 for operator '+' (use a cast)");
  /* poison: no new message */
  m->errmsg[0] = 0;
  assert_int_equal(xpj_b_binop(f, b, XPJ_ADD, 0, two, L), 0);
  assert_string_equal(xpj_module_errmsg(m), "");
  assert_int_equal(xpj_b_binop(f, b, XPJ_REM, one, one, L), 0);
  assert_string_equal(xpj_module_errmsg(m),
                      "operator '%' needs integer operands, got f32");
  assert_int_equal(xpj_b_const_int(f, b, xpj_type_scalar(m, XPJ_U8), 256, L), 0);
  assert_string_equal(xpj_module_errmsg(m), "integer constant 256 does not fit in u8");
  /* store into a read-only view */
  xpj_val p = xpj_b_index(f, b, x, 1, &two, L);
  assert_true(p != 0);
  assert_int_equal(xpj_b_store(f, b, p, one, L), 0);
  assert_string_equal(xpj_module_errmsg(m),
                      "cannot assign to an element of a read-only array");
  /* atomics: private memory, unsupported type */
  int64_t d4[] = {4};
  xpj_val arr = xpj_b_array(f, b, xpj_type_static(m, XPJ_SPACE_PRIVATE, i32, 1, d4), "a", L);
  xpj_val pa = xpj_b_index(f, b, arr, 1, &two, L);
  assert_int_equal(xpj_b_atomic(f, b, XPJ_ATOMIC_ADD, pa, two, XPJ_ORDER_RELAXED,
                                XPJ_SCOPE_DEVICE, L), 0);
  assert_string_equal(xpj_module_errmsg(m),
                      "atomic_add needs global or local memory, not private memory");
  /* local array outside an ndrange kernel */
  assert_int_equal(xpj_b_array(f, b, xpj_type_static(m, XPJ_SPACE_LOCAL, i32, 1, d4),
                               "t", L), 0);
  assert_string_equal(xpj_module_errmsg(m),
                      "local arrays are only allowed in ndrange kernels");
  assert_int_equal(xpj_b_barrier(f, b, XPJ_FENCE_LOCAL, L), 0);
  assert_int_equal(xpj_b_break(f, b, L), 0);
  assert_string_equal(xpj_module_errmsg(m), "'break' outside of a loop");
  assert_int_equal(xpj_b_return(f, b, one, L), 0);
  assert_null(xpj_func_create(m, "k", XPJ_FUNC_DEVICE, 0, 0, NULL, L));
  assert_string_equal(xpj_module_errmsg(m), "redefinition of 'k'");
  assert_null(xpj_func_create(m, "n", XPJ_FUNC_NDRANGE, 4, 0, NULL, L));
  assert_int_equal(xpj_module_status(m), XPJ_OK);
  xpj_module_destroy(m);
}

static void test_constant_folding(void **state) {
  (void)state;
  xpj_module *m;
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  xpj_func *f = xpj_func_create(m, "f", XPJ_FUNC_DEVICE, 0, 0, NULL, L);
  xpj_block b = xpj_func_body(f);
  xpj_type u8 = xpj_type_scalar(m, XPJ_U8), i32 = xpj_type_scalar(m, XPJ_I32);
  int64_t v;
  xpj_val s = xpj_b_binop(f, b, XPJ_ADD, xpj_b_const_int(f, b, u8, 250, L),
                          xpj_b_const_int(f, b, u8, 10, L), L);
  assert_true(xpj_val_const(f, s, &v, NULL));
  assert_int_equal(v, 4); /* wraps */
  s = xpj_b_binop(f, b, XPJ_SHL, xpj_b_const_int(f, b, i32, 1, L),
                  xpj_b_const_int(f, b, i32, 33, L), L);
  assert_true(xpj_val_const(f, s, &v, NULL));
  assert_int_equal(v, 2); /* shift count modulo the width */
  s = xpj_b_binop(f, b, XPJ_DIV, xpj_b_const_int(f, b, i32, 1, L),
                  xpj_b_const_int(f, b, i32, 0, L), L);
  assert_true(s != 0);
  assert_false(xpj_val_const(f, s, NULL, NULL)); /* left to the backend */
  s = xpj_b_unop(f, b, XPJ_NEG, xpj_b_const_int(f, b, xpj_type_scalar(m, XPJ_I8), -128, L), L);
  assert_true(xpj_val_const(f, s, &v, NULL));
  assert_int_equal(v, -128);
  xpj_module_destroy(m);
}

/* Constants and the host's f16/bf16 conversions round to nearest even
 * whatever rounding mode the application has set (a constant may be
 * cached and served to other processes), and leave the mode as found. */
static void test_rounding_mode(void **state) {
  (void)state;
  static const int modes[] = {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
  for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
    assert_int_equal(fesetround(modes[i]), 0);
    xpj_module *m;
    assert_int_equal(xpj_module_create(&m), XPJ_OK);
    xpj_func *f = xpj_func_create(m, "f", XPJ_FUNC_DEVICE, 0, 0, NULL, L);
    xpj_block b = xpj_func_body(f);
    double d = 0;
    /* ties and near-ties that the three modes round differently */
    xpj_val c = xpj_b_const_float(f, b, xpj_type_scalar(m, XPJ_F32),
                                  1.0 + 0x1p-25, L);
    assert_true(xpj_val_const(f, c, NULL, &d));
    assert_true(d == 1.0);
    c = xpj_b_const_float(f, b, xpj_type_scalar(m, XPJ_F16), -(1.0 + 0x1p-12), L);
    assert_true(xpj_val_const(f, c, NULL, &d));
    assert_true(d == -1.0);
    c = xpj_b_const_float(f, b, xpj_type_scalar(m, XPJ_BF16), 1.0 + 3 * 0x1p-8, L);
    assert_true(xpj_val_const(f, c, NULL, &d));
    assert_true(d == 1.0 + 4 * 0x1p-8); /* the tie to even */
    xpj_module_destroy(m);
    assert_int_equal(xpj_f16_from_double(1.0 + 0x1p-12), 0x3c00);
    assert_int_equal(xpj_f16_from_double(1.0 + 3 * 0x1p-11), 0x3c02);
    assert_int_equal(xpj_bf16_from_double(1.0 + 0x1p-9), 0x3f80);
    assert_int_equal(xpj_f16_from_double(65519.99), 0x7bff);
    assert_int_equal(xpj_f16_from_double(65520.0), 0x7c00);
    assert_int_equal(fegetround(), modes[i]);
  }
  fesetround(FE_TONEAREST);
}

/* xpj_float_round_dir: a double halfway between two values of f32, f16 or
 * bf16 goes to the one on the side of the decimal it is the nearest double
 * of (dir), to even without one; not halfway, dir changes nothing; at the
 * overflow midpoint a decimal below it is the largest finite value, one
 * above it infinity; below the smallest subnormal, zero of v's sign; f64
 * is v itself. In every rounding mode. */
static void test_round_dir(void **state) {
  (void)state;
  static const int modes[] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD,
                              FE_TOWARDZERO};
  double f32max = 0x1.fffffep127, f32past = 0x1p128 - 0x1p103;
  struct {
    int s;
    double v;
    int dir;
    double want;
  } c[] = {
      {XPJ_F32, 1 + 0x1p-24, 1, 1 + 0x1p-23},
      {XPJ_F32, 1 + 0x1p-24, -1, 1},
      {XPJ_F32, 1 + 0x1p-24, 0, 1},
      {XPJ_F32, 1 + 3 * 0x1p-24, -1, 1 + 0x1p-23},
      {XPJ_F32, 1 + 3 * 0x1p-24, 0, 1 + 0x1p-22},
      {XPJ_F32, -(1 + 0x1p-24), -1, -(1 + 0x1p-23)},
      {XPJ_F32, -(1 + 0x1p-24), 1, -1},
      {XPJ_F32, 1 + 0x1p-24 + 0x1p-40, -1, 1 + 0x1p-23}, /* not halfway */
      {XPJ_F32, 1 + 0x1p-23, -1, 1 + 0x1p-23},           /* a value of f32 */
      {XPJ_F32, f32past, -1, f32max},
      {XPJ_F32, f32past, 1, HUGE_VAL},
      {XPJ_F32, f32past, 0, HUGE_VAL},
      {XPJ_F32, -f32past, 1, -f32max},
      {XPJ_F32, 0x1p-150, 1, 0x1p-149},
      {XPJ_F32, 0x1p-150, -1, 0},
      {XPJ_F32, -0x1p-150, 1, -0.0},
      {XPJ_F16, 65520, -1, 65504},
      {XPJ_F16, 65520, 1, HUGE_VAL},
      {XPJ_F16, 0x1p-25, 1, 0x1p-24},
      {XPJ_F16, 0x1p-25, -1, 0},
      {XPJ_F16, 1 + 0x1p-11, 1, 1 + 0x1p-10},
      {XPJ_BF16, 1 + 0x1p-8, 1, 1 + 0x1p-7},
      {XPJ_BF16, 1 + 0x1p-8, -1, 1},
      {XPJ_BF16, 0x1.ffp127, -1, 0x1.fep127},
      {XPJ_BF16, 0x1.ffp127, 1, HUGE_VAL},
      {XPJ_F64, 1 + 0x1p-24, 1, 1 + 0x1p-24},
  };
  for (size_t k = 0; k < sizeof modes / sizeof *modes; k++) {
    assert_int_equal(fesetround(modes[k]), 0);
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
      double got = xpj_float_round_dir(c[i].s, c[i].v, c[i].dir);
      if (got != c[i].want || signbit(got) != signbit(c[i].want)) {
        fesetround(FE_TONEAREST);
        fail_msg("mode %zu case %zu: %a rounded to %a, want %a", k, i,
                 c[i].v, got, c[i].want);
      }
    }
    assert_int_equal(fegetround(), modes[k]);
  }
  fesetround(FE_TONEAREST);
}

static void test_verifier(void **state) {
  (void)state;
  xpj_module *m;
  const char *msg;
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  xpj_func *f = xpj_func_create(m, "f", XPJ_FUNC_DEVICE, 0, 0, NULL, L);
  xpj_block b = xpj_func_body(f), t, e;
  xpj_type i32 = xpj_type_scalar(m, XPJ_I32), bt = xpj_type_scalar(m, XPJ_BOOL);
  xpj_val c = xpj_b_const_int(f, b, bt, 1, L);
  xpj_val iff = xpj_b_if(f, b, c, &t, &e, L);
  assert_true(iff != 0);
  xpj_val inner = xpj_b_const_int(f, t, i32, 7, L);
  assert_int_equal(xpj_module_verify(m, &msg), XPJ_OK);
  /* a value of the then-block used after the if: not visible */
  xpj_val v = xpj_b_var(f, b, i32, "v", L);
  assert_true(xpj_b_store(f, b, v, inner, L) != 0);
  assert_int_equal(xpj_module_verify(m, &msg), XPJ_ERR_VERIFY);
  assert_non_null(strstr(msg, "not visible"));
  xpj_module_destroy(m);

  /* code after a return in the same block */
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  f = xpj_func_create(m, "g", XPJ_FUNC_DEVICE, 0, 0, NULL, L);
  b = xpj_func_body(f);
  assert_true(xpj_b_return(f, b, 0, L) != 0);
  assert_true(xpj_b_const_int(f, b, xpj_type_scalar(m, XPJ_I32), 1, L) != 0);
  assert_int_equal(xpj_module_verify(m, &msg), XPJ_ERR_VERIFY);
  assert_non_null(strstr(msg, "not the last instruction"));
  xpj_module_destroy(m);

  /* recursion through the builder is caught by the call-graph check */
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  f = xpj_func_create(m, "r", XPJ_FUNC_DEVICE, 0, 0, NULL, L);
  assert_true(xpj_b_call(f, xpj_func_body(f), f, 0, NULL, 0, NULL, L) != 0);
  assert_int_equal(xpj_module_verify(m, &msg), XPJ_ERR_VERIFY);
  assert_non_null(strstr(msg, "recursive call"));
  xpj_module_destroy(m);
}

static void test_print(void **state) {
  (void)state;
  xpj_module *m = build_axpy();
  char *text;
  assert_int_equal(xpj_module_print(m, &text, NULL), XPJ_OK);
  assert_string_equal(
      text, "kernel @axpy<T>(%0 a: T, %1 x: global const T[*], %2 y: global T[*]) range {\n"
            "  %3 = wi global_linear_id : i64\n"
            "  %4 = var \"i\" : ptr private i64\n"
            "  store %4, %3\n"
            "  %5 = load %4 : i64\n"
            "  %6 = index %2, %5 : ptr global T\n"
            "  %7 = load %4 : i64\n"
            "  %8 = index %1, %7 : ptr global const T\n"
            "  %9 = load %8 : T\n"
            "  %10 = mul %0, %9 : T\n"
            "  %11 = load %4 : i64\n"
            "  %12 = index %2, %11 : ptr global T\n"
            "  %13 = load %12 : T\n"
            "  %14 = add %10, %13 : T\n"
            "  store %6, %14\n"
            "}\n");
  free(text);
  xpj_module_destroy(m);
}

/* ---- the canonical hash -------------------------------------------- */

static void hash_src(const char *src, const char *k, xpj_scalar t,
                     unsigned ndim, char hex[65]) {
  char *diag = NULL;
  xpj_status st = spec_hash(src, k, "T", t, ndim, hex, &diag);
  if (st != XPJ_OK)
    fail_msg("spec failed (%d): %s", st, diag ? diag : "");
  free(diag);
}

static const char *base =
    "// reduction\n"
    "fn twice<T>(v: T) -> T { return v + v; }\n"
    "kernel red<T>(x: global const T[*], out: global T[], n: i64) ndrange(1) {\n"
    "    local tile: T[64];\n"
    "    let l = local_id(0);\n"
    "    let g = global_id(0);\n"
    "    tile[l] = g < n ? twice(x[g]) : T(0);\n"
    "    barrier(local);\n"
    "    for (let s = local_size(0) / 2; s > 0; s = s / 2) {\n"
    "        if l < s { tile[l] += tile[l + s]; }\n"
    "        barrier(local);\n"
    "    }\n"
    "    if l == 0 { atomic_add(&out[0], tile[0] * T(2), relaxed, device); }\n"
    "}\n";

/* Equal: the same program written differently. */
static const char *same[] = {
    /* comments and whitespace */
    "/* a block comment */ fn twice<T>(v: T) -> T {\n\n return v + v; // x\n}\n"
    "kernel red<T>(x: global const T[*],out: global T[],n: i64) ndrange(1){\n"
    "local tile: T[64]; let l = local_id(0); let g = global_id(0);\n"
    "tile[l] = g < n ? twice(x[g]) : T(0); barrier(local);\n"
    "for (let s = local_size(0) / 2; s > 0; s = s / 2) {\n"
    "if l < s { tile[l] += tile[l + s]; } barrier(local); }\n"
    "if l == 0 { atomic_add(&out[0], tile[0] * T(2), relaxed, device); } }\n",
    /* local names changed, functions defined in another order */
    "kernel red<T>(x: global const T[*], out: global T[], n: i64) ndrange(1) {\n"
    "    local buf: T[64];\n"
    "    let lid = local_id(0);\n"
    "    let gid = global_id(0);\n"
    "    buf[lid] = gid < n ? dbl(x[gid]) : T(0);\n"
    "    barrier(local);\n"
    "    for (let stride = local_size(0) / 2; stride > 0; stride = stride / 2) {\n"
    "        if lid < stride { buf[lid] += buf[lid + stride]; }\n"
    "        barrier(local);\n"
    "    }\n"
    "    if lid == 0 { atomic_add(&out[0], buf[0] * T(2), relaxed, device); }\n"
    "}\n"
    "fn dbl<T>(w: T) -> T { return w + w; }\n",
};

/* Different: one change each. */
static const struct {
  const char *what, *from, *to;
} diffs[] = {
    {"a constant", "T(2)", "T(3)"},
    {"an operation", "return v + v;", "return v * v;"},
    {"a comparison", "g < n ?", "g <= n ?"},
    {"a memory order", "relaxed, device", "seq_cst, device"},
    {"a scope", "relaxed, device", "relaxed, work_group"},
    {"a barrier fence", "barrier(local);\n    for", "barrier(global);\n    for"},
    {"a local size", "T[64]", "T[128]"},
    {"a parameter name", "n: i64", "count: i64) ndrange(1) { let n = count;"
                                   "\n    if true {} //"},
    {"an atomic op", "atomic_add(", "atomic_sub("},
    {"a loop step", "s = s / 2)", "s = s / 4)"},
    {"a required local size", "n: i64) ndrange(1) {", "n: i64) ndrange(1) local(64) {"},
};

static char *replace(const char *s, const char *from, const char *to) {
  const char *at = strstr(s, from);
  assert_non_null(at);
  size_t n = strlen(s) - strlen(from) + strlen(to) + 1;
  char *r = malloc(n);
  assert_non_null(r);
  memcpy(r, s, (size_t)(at - s));
  strcpy(r + (at - s), to);
  strcat(r, at + strlen(from));
  return r;
}

static void test_hash_equal_and_different(void **state) {
  (void)state;
  char h0[65], h[65];
  hash_src(base, "red", XPJ_F32, 1, h0);
  for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
    hash_src(same[i], "red", XPJ_F32, 1, h);
    if (strcmp(h, h0) != 0)
      fail_msg("equivalent source %zu hashed differently", i);
  }
  /* dtype and ndim are part of the specialised kernel */
  hash_src(base, "red", XPJ_F64, 1, h);
  assert_string_not_equal(h, h0);
  hash_src(base, "red", XPJ_F32, 2, h);
  assert_string_not_equal(h, h0);
  for (size_t i = 0; i < sizeof diffs / sizeof *diffs; i++) {
    char *src = replace(base, diffs[i].from, diffs[i].to);
    hash_src(src, "red", XPJ_F32, 1, h);
    if (strcmp(h, h0) == 0)
      fail_msg("changing %s did not change the hash", diffs[i].what);
    free(src);
  }
}

/* The hash of a fixed kernel is pinned: a change of the serialization
 * format must be deliberate (and bump its version). */
static void test_hash_pinned(void **state) {
  (void)state;
  char h[65];
  hash_src(axpy_src, "axpy", XPJ_F32, 1, h);
  assert_string_equal(h, PINNED_AXPY_F32_1);
}

/* ---- specialisation ------------------------------------------------- */

static void spec_fails(const char *src, const char *k, const char *tnames,
                       xpj_scalar t, unsigned ndim, xpj_status want,
                       const char *msg) {
  char *diag = NULL;
  xpj_status st = spec_hash(src, k, tnames, t, ndim, NULL, &diag);
  if (st != want || !strstr(diag, msg))
    fail_msg("want status %d and '%s'; got %d:\n%s", want, msg, st, diag);
  free(diag);
}

static void test_specialize_errors(void **state) {
  (void)state;
  spec_fails(axpy_src, "axpy", "T,U", XPJ_F32, 1, XPJ_ERR_SPECIALIZE,
             "error: kernel 'axpy' has no type parameter 'U' (it has: T)");
  spec_fails(axpy_src, "axpy", "", XPJ_F32, 1, XPJ_ERR_SPECIALIZE,
             "error: kernel 'axpy' needs a dtype for type parameter 'T' (e.g. "
             "--dtype T=f32); it takes 1 (T)");
  spec_fails(axpy_src, "axpy", "T,T", XPJ_F32, 1, XPJ_ERR_SPECIALIZE,
             "error: type parameter 'T' is bound twice");
  spec_fails(axpy_src, "axpy", "T", XPJ_F32, 0, XPJ_ERR_SPECIALIZE,
             "error: kernel 'axpy' has arrays of generic rank ([*]): give an "
             "ndim from 1 to 8");
  spec_fails(axpy_src, "axpy", "T", XPJ_F32, 9, XPJ_ERR_SPECIALIZE,
             "error: ndim 9 is out of range for kernel 'axpy' (1 to 8)");
  spec_fails(axpy_src, "nope", "T", XPJ_F32, 1, XPJ_ERR_NOT_FOUND,
             "error: no kernel named 'nope'");
  const char *fixed = "kernel k(x: global f32[]) range { x[0] = 1.0; }\n";
  spec_fails(fixed, "k", "", XPJ_F32, 2, XPJ_ERR_SPECIALIZE,
             "error: kernel 'k' has no arrays of generic rank ([*]); ndim must "
             "not be given");
  spec_fails(fixed, "k", "T", XPJ_F32, 0, XPJ_ERR_SPECIALIZE,
             "error: kernel 'k' is not generic: it takes no dtypes, but 'T' "
             "was given");
  /* operations that do not fit the bound type, at their source position */
  spec_fails(axpy_src, "axpy", "T", XPJ_BOOL, 1, XPJ_ERR_SPECIALIZE,
             "t.xpk:3:14: error: operator '*' needs numeric operands, got bool "
             "(with T=bool, ndim=1)");
  const char *half = "kernel h<T>(x: global T[]) range { x[0] = x[0] * 0.5; }\n";
  spec_fails(half, "h", "T", XPJ_I32, 0, XPJ_ERR_SPECIALIZE,
             "t.xpk:1:50: error: floating-point literal 0.5 cannot have type "
             "i32; use a cast (with T=i32)");
  const char *mat = "kernel m<T>(x: global T[*]) range { x[0, 1] = T(1); }\n";
  spec_fails(mat, "m", "T", XPJ_F32, 3, XPJ_ERR_SPECIALIZE,
             "t.xpk:1:38: error: array of rank 3 indexed with 2 subscripts "
             "(use 3, or 1 flat index) (with T=f32, ndim=3)");
  const char *amin = "kernel a<T>(x: global T[]) range { atomic_min(&x[0], T(1)); }\n";
  spec_fails(amin, "a", "T", XPJ_F64, 0, XPJ_ERR_SPECIALIZE,
             "error: atomic_min is not supported on f64");
  const char *inf = "kernel i<T>(x: global T[]) range { x[0] = infinity(T); }\n";
  spec_fails(inf, "i", "T", XPJ_I32, 0, XPJ_ERR_SPECIALIZE,
             "t.xpk:1:43: error: infinity() needs a floating-point type, got "
             "i32 (with T=i32)");
  spec_fails(inf, "i", "T", XPJ_BOOL, 0, XPJ_ERR_SPECIALIZE,
             "error: infinity() needs a floating-point type, got bool");
}

static void test_specialize_instances(void **state) {
  (void)state;
  const char *src =
      "fn sq<T>(v: T) -> T { return v * v; }\n"
      "fn both<T>(v: T) -> T { return sq(v) + sq(v); }\n"
      "kernel k<T>(x: global T[], y: global f64[]) range {\n"
      "    x[0] = both(x[0]);\n"
      "    y[0] = sq(y[0]) + sq(2.0);\n"
      "}\n";
  xpj_module *m = NULL, *s = NULL;
  assert_int_equal(parse_src(src, &m, NULL), XPJ_OK);
  const char *names[] = {"T"};
  xpj_scalar types[] = {XPJ_I32};
  xpj_spec sp = {1, names, types, 0, 0, NULL, NULL};
  assert_int_equal(xpj_specialize(m, "k", &sp, &s, NULL), XPJ_OK);
  /* k, both<i32>, sq<i32>, sq<f64>: each instance made once */
  assert_int_equal(xpj_module_func_count(s), 4);
  assert_non_null(xpj_module_find(s, "k"));
  assert_non_null(xpj_module_find(s, "both<i32>"));
  assert_non_null(xpj_module_find(s, "sq<i32>"));
  assert_non_null(xpj_module_find(s, "sq<f64>"));
  assert_int_equal(xpj_func_param_count(xpj_module_find(s, "k")), 2);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

/* A literal a cast gives a type parameter's type (T(1)) is converted as
 * the cast of the literal when T is bound (docs/language.md 4.3: a cast to
 * bool is x != 0, a float to an integer truncates), as bool(1) and
 * i32(2.5) are; a literal the context types (let x: T = 1) stays a
 * literal, refused for bool as `let x: bool = 1` is. */
static char *spec_print(const char *src, const char *k, xpj_scalar t) {
  xpj_module *m = NULL, *s = NULL;
  assert_int_equal(parse_src(src, &m, NULL), XPJ_OK);
  const char *names[] = {"T"};
  xpj_spec sp = {1, names, &t, 0, 0, NULL, NULL};
  assert_int_equal(xpj_specialize(m, k, &sp, &s, NULL), XPJ_OK);
  char *text = NULL;
  assert_int_equal(xpj_module_print(s, &text, NULL), XPJ_OK);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
  return text;
}

static void test_specialize_literal_casts(void **state) {
  (void)state;
  const char *src =
      "kernel k<T>(o: global T[]) range {\n"
      "    o[0] = T(0); o[1] = T(1); o[2] = T(2.5); o[3] = T(-2.5);\n"
      "    o[4] = T(0.0);\n"
      "}\n";
  /* in the order of the stores: the value each stores (an integer
   * literal's cast folded; a float literal's a cast of the f64, as
   * bool(2.5) and i32(2.5) are) */
  static const struct {
    xpj_scalar t;
    const char *want[5][2]; /* a constant, then (if any) the cast's type */
  } cases[] = {
      {XPJ_BOOL, {{"const 0 : bool", NULL}, {"const 1 : bool", NULL},
                  {"const 2.5 : f64", ": bool"}, {"const -2.5 : f64", ": bool"},
                  {"const 0.0 : f64", ": bool"}}},
      {XPJ_I32, {{"const 0 : i32", NULL}, {"const 1 : i32", NULL},
                 {"const 2.5 : f64", ": i32"}, {"const -2.5 : f64", ": i32"},
                 {"const 0.0 : f64", ": i32"}}},
      {XPJ_F32, {{"const 0.0 : f32", NULL}, {"const 1.0 : f32", NULL},
                 {"const 2.5 : f32", NULL}, {"const -2.5 : f32", NULL},
                 {"const 0.0 : f32", NULL}}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char *text = spec_print(src, "k", cases[c].t);
    const char *at = text;
    for (int i = 0; i < 5; i++) {
      const char *const *w = cases[c].want[i];
      const char *hit = strstr(at, w[0]);
      if (hit && w[1]) { /* then cast %N : T */
        hit = strstr(hit, "cast %");
        hit = hit ? strstr(hit, w[1]) : NULL;
      }
      const char *store = hit ? strstr(hit, "store") : NULL;
      const char *next = store ? strstr(store + 1, "store") : NULL;
      if (!store || (i < 4 && !next) || (next && hit > next))
        fail_msg("T=%s: store %d is not of '%s'%s%s in\n%s",
                 xpj_scalar_name(cases[c].t), i, w[0], w[1] ? " cast to " : "",
                 w[1] ? w[1] : "", text);
      at = store + 1;
    }
    free(text);
  }
  /* the generic IR says which literals a cast typed */
  xpj_module *m = NULL;
  assert_int_equal(parse_src(src, &m, NULL), XPJ_OK);
  char *text = NULL;
  assert_int_equal(xpj_module_print(m, &text, NULL), XPJ_OK);
  assert_non_null(strstr(text, "const cast 1 : T"));
  free(text);
  xpj_module_destroy(m);
  /* literals the context types are literals still */
  spec_fails("kernel l<T>(o: global T[]) range { let x: T = 1; o[0] = x; }\n",
             "l", "T", XPJ_BOOL, 0, XPJ_ERR_SPECIALIZE,
             "integer literal cannot have type bool");
  spec_fails("kernel h<T>(x: global T[]) range { x[0] = x[0] * 0.5; }\n", "h",
             "T", XPJ_I32, 0, XPJ_ERR_SPECIALIZE,
             "floating-point literal 0.5 cannot have type i32; use a cast");
  /* and a cast keeps the literal's range check where the type has one */
  spec_fails("kernel u<T>(o: global T[]) range { o[0] = T(-1); }\n", "u", "T",
             XPJ_U8, 0, XPJ_ERR_SPECIALIZE,
             "integer constant -1 does not fit in u8");
  /* an integer literal beyond f16's range rounds to infinity: refused as a
   * float literal's T(1e5) is, cast or typed by its context (4.4) */
  spec_fails("kernel h<T>(o: global T[]) range { o[0] = T(70000); }\n", "h",
             "T", XPJ_F16, 0, XPJ_ERR_SPECIALIZE,
             "integer constant 70000 is out of range for f16");
  spec_fails("kernel h<T>(o: global T[]) range { let x: T = 65520; o[0] = x; }"
             "\n", "h", "T", XPJ_F16, 0, XPJ_ERR_SPECIALIZE,
             "integer constant 65520 is out of range for f16");
  /* (the line quoted after a byte order mark starts after it, as its
   * column counts) */
  spec_fails("\xef\xbb\xbfkernel u<T>(o: global T[]) range { o[0] = T(-1); }\n",
             "u", "T", XPJ_U8, 0, XPJ_ERR_SPECIALIZE,
             "t.xpk:1:45: error: integer constant -1 does not fit in u8 (with "
             "T=u8)\n  kernel u<T>(o: global T[]) range { o[0] = T(-1); }\n"
             "                                              ^");
}

static void test_null_arguments(void **state) {
  (void)state;
  xpj_module_destroy(NULL);
  assert_int_equal(xpj_module_create(NULL), XPJ_ERR_INVALID);
  assert_int_equal(xpj_module_print(NULL, NULL, NULL), XPJ_ERR_INVALID);
  assert_int_equal(xpj_module_hash(NULL, "k", NULL, NULL), XPJ_ERR_INVALID);
  assert_int_equal(xpj_specialize(NULL, "k", NULL, NULL, NULL), XPJ_ERR_INVALID);
  assert_null(xpj_module_find(NULL, "k"));
  assert_int_equal(xpj_func_param_count(NULL), 0);
  assert_string_equal(xpj_status_name(XPJ_ERR_NOMEM), "out of memory");
  assert_int_equal(xpj_scalar_parse("f64"), XPJ_F64);
  assert_int_equal(xpj_scalar_parse("float"), XPJ_VOID);
  /* NULL is no name and no function, as for the other getters and
   * lookups (these four dereferenced it: found probing the C API with a
   * NULL for every argument of every exported function) */
  assert_int_equal(xpj_scalar_parse(NULL), XPJ_VOID);
  assert_int_equal(xpj_math_lookup(NULL), XPJ_MATH_COUNT);
  assert_int_equal(xpj_limit_lookup(NULL), XPJ_LIMIT_COUNT);
  assert_int_equal(xpj_func_kind_of(NULL), XPJ_FUNC_DEVICE);
  assert_int_equal(xpj_limit_lookup("epsilon"), XPJ_LIMIT_EPSILON);
}

/* xpj_dec: the digits of v, as "%llu" writes them (its one- and two-digit
 * shortcuts and the loop for the rest), in keys and texts made without
 * printf */
static void test_dec(void **state) {
  (void)state;
  static const uint64_t v[] = {0, 1, 9, 10, 11, 42, 99, 100, 101, 999, 1000,
                               65535, 4294967296ull, 10000000000000000000ull,
                               UINT64_MAX};
  for (unsigned i = 0; i < sizeof v / sizeof *v; i++) {
    char got[32], want[32];
    size_t n = xpj_dec(got, v[i]);
    got[n] = 0;
    snprintf(want, sizeof want, "%llu", (unsigned long long)v[i]);
    assert_string_equal(got, want);
    assert_int_equal(n, strlen(want));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dec),
      cmocka_unit_test(test_builder_matches_parser),
      cmocka_unit_test(test_builder_type_errors),
      cmocka_unit_test(test_constant_folding),
      cmocka_unit_test(test_rounding_mode),
      cmocka_unit_test(test_round_dir),
      cmocka_unit_test(test_verifier),
      cmocka_unit_test(test_print),
      cmocka_unit_test(test_hash_equal_and_different),
      cmocka_unit_test(test_hash_pinned),
      cmocka_unit_test(test_specialize_errors),
      cmocka_unit_test(test_specialize_instances),
      cmocka_unit_test(test_specialize_literal_casts),
      cmocka_unit_test(test_null_arguments),
  };
  return cmocka_run_group_tests_name("ir", tests, NULL, NULL);
}
