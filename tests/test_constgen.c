/* test_constgen.c - const generic parameters (`kernel k<T, const TS: i64>`,
 * docs/language.md 5.3):
 * - the generic parse: declarations, the IR (const_param), checks that it
 *   defers (array sizes, local(...), work-item dimensions, shape() of an
 *   array sized by one) without false errors, and the errors it reports
 *   at once;
 * - specialisation: values folded into the IR (static array sizes, the
 *   required local size), distinct hashes; every error (missing, extra,
 *   out of range, a dtype for a const parameter and a value for a type
 *   parameter, a deferred check that fails) with the binding;
 * - xpj_const_parse / xpj_const_str and the binding string of
 *   xpj_program_get_kernel ("T=f32,TS=16", positional, "TS=0x10" the same
 *   kernel);
 * - on the device XPJIT_TEST_DEVICE names (default the CPU;
 *   tests/run_tests.sh runs it again on OpenCL): a block sum with
 *   `local t: T[TS]` and `local(TS)` for two values of TS, correct, and two
 *   entries in a private cache, which "TS=0x8" hits from a new context;
 * - on the CPU, through xpjitd (BUILD/bin/xpjitd, started here): the
 *   binding string reaches the daemon and comes back as two compiles. */
#include "testutil.h"

#include "xpjit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char src[] =
    "const TS: i64 = 1000; // shadowed by the kernels' own TS\n"
    "kernel blocksum<T, const TS: i64>(x: global const T[], o: global T[]) "
    "ndrange(1) local(TS) {\n"
    "  local t: T[TS];\n"
    "  let lid = local_id(0);\n"
    "  t[lid] = x[global_id(0)];\n"
    "  barrier(local);\n"
    "  for (let s = TS / 2; s > 0; s >>= 1) {\n"
    "    if lid < s { t[lid] += t[lid + s]; }\n"
    "    barrier(local);\n"
    "  }\n"
    "  if lid == 0 { o[group_id(0)] = t[0] + T(shape(t, 0) - TS); }\n"
    "}\n"
    "kernel fold<const N: i64>(o: global i64[]) range {\n"
    "  let a: i64[N + 1];\n"
    "  o[0] = N * 3 + 1;\n"
    "  o[1] = size(a);\n"
    "}\n"
    "kernel flags<const NEG: bool, T, const K: u8>(o: global T[]) range {\n"
    "  let i = global_id(0);\n"
    "  o[i] = NEG ? T(i) * T(K) : T(K);\n"
    "}\n";

/* ---- helpers ------------------------------------------------------------ */

static xpj_module *parse_ok(const char *s) {
  xpj_module *m = NULL;
  char *diag = NULL;
  xpj_status st = parse_src(s, &m, &diag);
  if (st != XPJ_OK)
    fail_msg("parse: %s\n%s", xpj_status_name(st), diag);
  free(diag);
  return m;
}

/* Specialises kernel k of m with T bound to type (when t is not NULL) and
 * the const parameters cnames (comma-separated) to values; returns the
 * status, the printed IR in *ir and the diagnostics in *diag (either may
 * be NULL). */
static xpj_status spec(const xpj_module *m, const char *k, const char *t,
                       xpj_scalar type, const char *cnames,
                       const int64_t *values, char **ir, char **diag) {
  const char *names[8], *cn[8];
  xpj_scalar types[8];
  unsigned nt = 0, nc = 0;
  char buf[128];
  if (t) {
    names[nt] = t;
    types[nt++] = type;
  }
  snprintf(buf, sizeof buf, "%s", cnames ? cnames : "");
  for (char *tok = strtok(buf, ","); tok && nc < 8; tok = strtok(NULL, ","))
    cn[nc++] = tok;
  xpj_spec sp = {nt, names, types, 0, nc, cn, values};
  xpj_diags *d = NULL;
  assert_int_equal(xpj_diags_create(&d), XPJ_OK);
  xpj_module *s = NULL;
  xpj_status st = xpj_specialize(m, k, &sp, &s, d);
  if (ir) {
    *ir = NULL;
    if (s)
      assert_int_equal(xpj_module_print(s, ir, NULL), XPJ_OK);
  }
  if (diag)
    assert_int_equal(xpj_diags_render(d, diag, NULL), XPJ_OK);
  xpj_diags_destroy(d);
  xpj_module_destroy(s);
  return st;
}

static void expect_spec_error(const xpj_module *m, const char *k,
                              const char *t, const char *cnames,
                              const int64_t *values, const char *want,
                              const char *want2) {
  char *diag = NULL;
  xpj_status st = spec(m, k, t, XPJ_F32, cnames, values, NULL, &diag);
  if (st != XPJ_ERR_SPECIALIZE || !strstr(diag, want) ||
      (want2 && !strstr(diag, want2)))
    fail_msg("%s [%s]: %s, diagnostics:\n%s\nwanted \"%s\"%s%s", k,
             cnames ? cnames : "", xpj_status_name(st), diag, want,
             want2 ? " and " : "", want2 ? want2 : "");
  free(diag);
}

static void expect_parse_error(const char *s, const char *want) {
  char *diag = NULL;
  xpj_status st = parse_src(s, NULL, &diag);
  if (st != XPJ_ERR_SYNTAX || !strstr(diag, want))
    fail_msg("%s\n-> %s:\n%s\nwanted \"%s\"", s, xpj_status_name(st), diag,
             want);
  free(diag);
}

/* ---- the generic parse -------------------------------------------------- */

static void test_declaration(void **state) {
  (void)state;
  xpj_module *m = parse_ok(src);
  const xpj_func *f = xpj_module_find(m, "flags");
  assert_non_null(f);
  assert_int_equal(xpj_func_tparam_count(f), 1);
  assert_int_equal(xpj_func_const_count(f), 2);
  assert_string_equal(xpj_func_const_name(f, 0), "NEG");
  assert_int_equal(xpj_func_const_type(f, 0), XPJ_BOOL);
  assert_string_equal(xpj_func_const_name(f, 1), "K");
  assert_int_equal(xpj_func_const_type(f, 1), XPJ_U8);
  assert_null(xpj_func_const_name(f, 2));
  /* declaration order: NEG, T, K */
  assert_int_equal(xpj_func_generic_count(f), 3);
  int is_const = -1;
  assert_int_equal(xpj_func_generic_at(f, 0, &is_const), 0);
  assert_int_equal(is_const, 1);
  assert_int_equal(xpj_func_generic_at(f, 1, &is_const), 0);
  assert_int_equal(is_const, 0);
  assert_int_equal(xpj_func_generic_at(f, 2, &is_const), 1);
  assert_int_equal(is_const, 1);
  assert_int_equal(xpj_func_generic_at(f, 3, &is_const), -1);
  /* the generic IR: const_param values; no required size recorded yet */
  char *text = NULL;
  assert_int_equal(xpj_module_print(m, &text, NULL), XPJ_OK);
  assert_non_null(strstr(text, "kernel @flags<const NEG: bool, T, const K: "
                               "u8>("));
  assert_non_null(strstr(text, "kernel @blocksum<T, const TS: i64>("));
  assert_non_null(strstr(text, "const_param TS : i64"));
  assert_non_null(strstr(text, "const_param ? : i64")); /* shape(t, 0) */
  assert_non_null(strstr(text, "array \"t\" : local T[?]"));
  uint64_t rl[3];
  assert_int_equal(xpj_func_reqd_local(xpj_module_find(m, "blocksum"), rl), 0);
  free(text);
  const char *msg;
  assert_int_equal(xpj_module_verify(m, &msg), XPJ_OK);
  char hex[65];
  assert_int_equal(xpj_module_hash(m, "blocksum", NULL, hex), XPJ_OK);
  xpj_module_destroy(m);
}

/* Constant contexts that depend on const parameters are checked when they
 * are bound, not before: none of these is an error generically. */
static const char deferred_src[] =
    "kernel k<T, const TS: i64, const D: i32>(o: global i64[]) "
    "ndrange(1) local(64 / (TS - 16)) {\n"
    "  local a: T[TS];\n"
    "  local b: T[size(a) - 2, shape(a, 0)];\n"
    "  const K = TS * 2 - 1;\n"
    "  let p: i64[K];\n"
    "  let q: T[2, 3];\n"
    "  o[0] = global_id(D) + shape(q, D) + stride(b, 0) + size(b) + "
    "i64(ndim(a));\n"
    "  let z = 10 / (TS - TS);\n"
    "  if TS > 8 { o[1] = K; }\n"
    "}\n";

static void test_deferred(void **state) {
  (void)state;
  xpj_module *m = parse_ok(deferred_src);
  char *ir = NULL;
  /* TS = 24: local(8), a[24], b[22, 24], p[47] */
  int64_t v[2] = {24, 0};
  assert_int_equal(spec(m, "k", "T", XPJ_F32, "TS,D", v, &ir, NULL), XPJ_OK);
  assert_non_null(strstr(ir, "ndrange(1) local(8)"));
  assert_non_null(strstr(ir, "local f32[24]"));
  assert_non_null(strstr(ir, "local f32[22, 24]"));
  assert_non_null(strstr(ir, "private i64[47]"));
  assert_null(strstr(ir, "const_param"));
  free(ir);
  /* each deferred check, failing, with the binding */
  int64_t z[2] = {16, 0}, d1[2] = {18, 1}, d2[2] = {18, 2}, one[2] = {1, 0},
          big[2] = {40000, 0}, two[2] = {2, 0};
  expect_spec_error(m, "k", "T", "TS,D", z,
                    "t.xpk:1:79: error: division by zero in a constant "
                    "expression (with T=f32, TS=16, D=0)", NULL);
  expect_spec_error(m, "k", "T", "TS,D", d1,
                    "dimension 1 is out of range for a 1-dimensional kernel "
                    "(with T=f32, TS=18, D=1)", NULL);
  expect_spec_error(m, "k", "T", "TS,D", d2,
                    "dimension 2 is out of range for an array of rank 2 "
                    "(with T=f32, TS=18, D=2)", NULL);
  expect_spec_error(m, "k", "T", "TS,D", one,
                    "a local size must be an integer constant from 1 to "
                    "4096 (with T=f32, TS=1, D=0)", NULL);
  expect_spec_error(m, "k", "T", "TS,D", two,
                    "t.xpk:1:76: error: a local size must be an integer "
                    "constant from 1 to 4096 (with T=f32, TS=2, D=0)", NULL);
  xpj_module_destroy(m);
  m = parse_ok("kernel k<const N: i64>(o: global i64[]) range {\n"
               "  let p: i64[N * 2 - 1];\n  o[0] = size(p);\n}\n");
  expect_spec_error(m, "k", NULL, "N", big,
                    "t.xpk:2:7: error: private array is too large (79999 "
                    "elements, at most 65536) (with N=40000)", NULL);
  int64_t n0 = 0;
  expect_spec_error(m, "k", NULL, "N", &n0,
                    "array dimension must be positive, not -1 (with N=0)",
                    NULL);
  xpj_module_destroy(m);
}

static void test_parse_errors(void **state) {
  (void)state;
  /* not constant whatever the binding: reported at once */
  expect_parse_error("kernel k<const N: i64>(o: global i64[]) ndrange(1) {\n"
                     "  local a: i64[N + global_id(0)];\n}\n",
                     "t.xpk:2:16: error: array dimension must be an integer "
                     "constant");
  expect_parse_error("kernel k<const N: bool>(o: global i64[]) range {\n"
                     "  let a: i64[N];\n}\n",
                     "array dimension must be an integer constant");
  expect_parse_error("kernel k<const N: i64>(o: global i64[]) ndrange(1) "
                     "local(N, 2) { }\n",
                     "'k' has 1 dimension: give 1 local size");
  expect_parse_error("kernel k<const X: f32>(o: global f32[]) range { }\n",
                     "const parameter 'X' must have an integer type or "
                     "bool, not 'f32' (pass floating-point values as kernel "
                     "arguments)");
  expect_parse_error("kernel k<T, const X: T>(o: global T[]) range { }\n",
                     "const parameter 'X' must have an integer type or "
                     "bool, not 'T'");
  expect_parse_error("fn f<const K: i64>(x: i64) -> i64 { return x + K; }\n"
                     "kernel k(o: global i64[]) range { o[0] = f(1); }\n",
                     "t.xpk:1:6: error: device functions cannot have const "
                     "parameters (only kernels can); pass 'K' as an "
                     "argument");
  expect_parse_error("kernel k<const N: i64, N>(o: global i64[]) range { }\n",
                     "duplicate generic parameter 'N'");
  expect_parse_error("kernel k<T, const T: i64>(o: global i64[]) range { }\n",
                     "duplicate generic parameter 'T'");
  expect_parse_error("kernel k<const N: i64>(N: i64) range { }\n",
                     "'N' is a const parameter and cannot name a variable");
  expect_parse_error("kernel k<const N: i64>(o: global i64[]) range {\n"
                     "  let N = 2;\n}\n",
                     "'N' is a const parameter and cannot name a variable");
  expect_parse_error("kernel k<const N: i64>(o: global i64[]) range {\n"
                     "  N = 2;\n}\n",
                     "cannot assign to constant 'N'");
  expect_parse_error("kernel k<const N: i64>(o: global N[]) range { }\n",
                     "'N' is a const parameter, not a type");
  expect_parse_error("kernel k<const N: i64>(o: global i64[]) range {\n"
                     "  o[0] = N(2);\n}\n",
                     "'N' is a const parameter, not a function");
  expect_parse_error("kernel k<const N: u32>(o: global u8[]) range {\n"
                     "  o[0] = N;\n}\n",
                     "expected a value of type u8, found u32");
  expect_parse_error("kernel k<const A: i8, const B: i8, const C: i8, const "
                     "D: i8, const E: i8, const F: i8, const G: i8, const H: "
                     "i8, const I: i8>(o: global i8[]) range { }\n",
                     "too many const parameters (at most 8)");
  expect_parse_error("kernel k<const N i64>(o: global i64[]) range { }\n",
                     "expected ':' after the const parameter name");
}

/* ---- specialisation ----------------------------------------------------- */

static void test_folded(void **state) {
  (void)state;
  xpj_module *m = parse_ok(src);
  char *ir = NULL;
  int64_t n16 = 16, n8 = 8;
  assert_int_equal(spec(m, "fold", NULL, XPJ_VOID, "N", &n16, &ir, NULL),
                   XPJ_OK);
  /* no arithmetic left: N * 3 + 1 is 49, the array has 17 elements */
  assert_non_null(strstr(ir, "const 49 : i64"));
  assert_non_null(strstr(ir, "private i64[17]"));
  assert_non_null(strstr(ir, "const 17 : i64"));
  assert_null(strstr(ir, " mul "));
  assert_null(strstr(ir, " add "));
  assert_null(strstr(ir, "const_param"));
  free(ir);
  /* the tile and the required size are the value's */
  assert_int_equal(spec(m, "blocksum", "T", XPJ_F32, "TS", &n16, &ir, NULL),
                   XPJ_OK);
  assert_non_null(strstr(ir, "ndrange(1) local(16)"));
  assert_non_null(strstr(ir, "array \"t\" : local f32[16]"));
  free(ir);
  assert_int_equal(spec(m, "blocksum", "T", XPJ_F32, "TS", &n8, &ir, NULL),
                   XPJ_OK);
  assert_non_null(strstr(ir, "ndrange(1) local(8)"));
  assert_non_null(strstr(ir, "array \"t\" : local f32[8]"));
  free(ir);
  /* distinct values, distinct kernels */
  const char *tn[1] = {"T"}, *cn[1] = {"TS"};
  xpj_scalar ty[1] = {XPJ_F32};
  char hex[3][65];
  int64_t vals[3] = {8, 16, 8};
  for (int i = 0; i < 3; i++) {
    xpj_spec sp = {1, tn, ty, 0, 1, cn, &vals[i]};
    xpj_module *s = NULL;
    assert_int_equal(xpj_specialize(m, "blocksum", &sp, &s, NULL), XPJ_OK);
    assert_int_equal(xpj_module_hash(s, "blocksum", NULL, hex[i]), XPJ_OK);
    uint64_t rl[3] = {0};
    assert_int_equal(xpj_func_reqd_local(xpj_module_find(s, "blocksum"), rl),
                     1);
    assert_int_equal(rl[0], (uint64_t)vals[i]);
    assert_int_equal(xpj_func_const_count(xpj_module_find(s, "blocksum")), 0);
    xpj_module_destroy(s);
  }
  assert_string_not_equal(hex[0], hex[1]);
  assert_string_equal(hex[0], hex[2]);
  /* bool and u8 values, in declaration order */
  int64_t fv[2] = {1, 255};
  assert_int_equal(spec(m, "flags", "T", XPJ_I32, "NEG,K", fv, &ir, NULL),
                   XPJ_OK);
  assert_non_null(strstr(ir, "const 255 : i32"));
  free(ir);
  xpj_module_destroy(m);
}

static void test_spec_errors(void **state) {
  (void)state;
  xpj_module *m = parse_ok(src);
  int64_t v[3] = {16, 300, 2};
  expect_spec_error(m, "blocksum", "T", NULL, NULL,
                    "error: kernel 'blocksum' needs a value for const "
                    "parameter 'TS: i64' (e.g. TS=16); it takes 1 (TS: i64)",
                    NULL);
  expect_spec_error(m, "blocksum", "T", "TS,X", v,
                    "error: kernel 'blocksum' has no const parameter 'X' (it "
                    "has: TS: i64)", NULL);
  expect_spec_error(m, "fold", NULL, "N,N", v,
                    "error: const parameter 'N' is bound twice", NULL);
  expect_spec_error(m, "flags", "T", "NEG,K", v,
                    "error: value 16 for const parameter 'NEG: bool' of "
                    "kernel 'flags' is not a bool (true or false)",
                    "error: value 300 is out of range for const parameter "
                    "'K: u8' of kernel 'flags' (0 to 255)");
  /* a value for a type parameter, a dtype for a const parameter */
  expect_spec_error(m, "blocksum", NULL, "TS,T", v,
                    "error: 'T' is a type parameter of kernel 'blocksum': "
                    "give it a dtype (T=f32), not a value", NULL);
  expect_spec_error(m, "blocksum", "TS", "T", v,
                    "error: 'TS' is a const parameter of kernel 'blocksum' "
                    "(TS: i64): give it a value (TS=16), not a dtype", NULL);
  /* a kernel without const parameters */
  xpj_module *m2 = parse_ok("kernel plain(o: global i64[]) range { }\n");
  expect_spec_error(m2, "plain", NULL, "N", v,
                    "error: kernel 'plain' has no const parameters, but a "
                    "value was given for 'N'", NULL);
  xpj_module_destroy(m2);
  /* NULL arrays with a count */
  xpj_spec bad = {0, NULL, NULL, 0, 1, NULL, NULL};
  xpj_module *s = NULL;
  assert_int_equal(xpj_specialize(m, "fold", &bad, &s, NULL), XPJ_ERR_INVALID);
  assert_null(s);
  xpj_module_destroy(m);
}

/* ---- values as text ------------------------------------------------------ */

static void expect_val(const char *text, xpj_scalar t, int64_t want,
                         const char *canon) {
  int64_t v = 12345;
  char err[160], out[32];
  if (xpj_const_parse(text, t, &v, err, sizeof err) != XPJ_OK)
    fail_msg("'%s' as %s: %s", text, xpj_scalar_name(t), err);
  assert_int_equal(v, want);
  assert_int_equal(xpj_const_str(t, v, out, sizeof out), strlen(canon));
  assert_string_equal(out, canon);
}

static void expect_bad_val(const char *text, xpj_scalar t,
                             const char *want) {
  int64_t v = 12345;
  char err[160];
  assert_int_equal(xpj_const_parse(text, t, &v, err, sizeof err),
                   XPJ_ERR_SPECIALIZE);
  assert_int_equal(v, 12345);
  if (!strstr(err, want))
    fail_msg("'%s' as %s: \"%s\", wanted \"%s\"", text, xpj_scalar_name(t),
             err, want);
}

static void test_const_parse(void **state) {
  (void)state;
  expect_val("16", XPJ_I64, 16, "16");
  expect_val("0x10", XPJ_I64, 16, "16");
  expect_val("0X1f", XPJ_U8, 31, "31");
  expect_val("+7", XPJ_I32, 7, "7");
  expect_val("-0x10", XPJ_I16, -16, "-16");
  expect_val("-0", XPJ_U32, 0, "0");
  expect_val("-128", XPJ_I8, -128, "-128");
  expect_val("255", XPJ_U8, 255, "255");
  expect_val("-9223372036854775808", XPJ_I64, INT64_MIN,
               "-9223372036854775808");
  expect_val("18446744073709551615", XPJ_U64, -1, "18446744073709551615");
  expect_val("0xffffffffffffffff", XPJ_U64, -1, "18446744073709551615");
  expect_val("true", XPJ_BOOL, 1, "true");
  expect_val("false", XPJ_BOOL, 0, "false");
  expect_bad_val("-129", XPJ_I8, "-129 is out of range for i8 (-128 to 127)");
  expect_bad_val("256", XPJ_U8, "out of range for u8 (0 to 255)");
  expect_bad_val("-1", XPJ_U64, "out of range for u64");
  expect_bad_val("9223372036854775808", XPJ_I64, "out of range for i64");
  expect_bad_val("18446744073709551616", XPJ_U64, "out of range");
  expect_bad_val("1", XPJ_BOOL, "'1' is not a bool (true or false)");
  expect_bad_val("True", XPJ_BOOL, "not a bool");
  expect_bad_val("", XPJ_I32, "is not an integer");
  expect_bad_val("0x", XPJ_I32, "is not an integer");
  expect_bad_val("--1", XPJ_I32, "is not an integer");
  expect_bad_val(" 1", XPJ_I32, "is not an integer");
  expect_bad_val("1e3", XPJ_I32, "is not an integer");
  expect_bad_val("12u8", XPJ_U8, "is not an integer");
  expect_bad_val("true", XPJ_I32, "is not an integer");
  int64_t v;
  assert_int_equal(xpj_const_parse("1", XPJ_F32, &v, NULL, 0),
                   XPJ_ERR_INVALID);
}

/* ---- on a device ---------------------------------------------------------- */

static char dir[256];
static char db[300];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/xpjit-constgen-XXXXXX");
  if (!mkdtemp(dir))
    return -1;
  snprintf(db, sizeof db, "%s/cache.db", dir);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static const char *test_device(void) {
  const char *want = getenv("XPJIT_TEST_DEVICE");
  return want && *want ? want : "cpu";
}

static xpj_context *mkctx_daemon(xpj_cache_mode mode, const char *daemon) {
  xpj_context_desc d = {.cache_mode = mode, .cache_path = db,
                        .no_env_bundles = 1, .daemon = daemon};
  xpj_context *ctx = NULL;
  if (xpj_context_create(&d, &ctx) != XPJ_OK)
    fail_msg("context: %s", xpj_last_error());
  return ctx;
}

static xpj_context *mkctx(xpj_cache_mode mode) {
  return mkctx_daemon(mode, NULL);
}

static xpj_device *device_of(xpj_context *ctx) {
  xpj_device *dev = NULL;
  if (xpj_device_select(ctx, test_device(), &dev) != XPJ_OK)
    fail_msg("no device %s: %s", test_device(), xpj_last_error());
  return dev;
}

/* Runs blocksum (dtypes) over 256 elements on dev, leaving the local size
 * to the runtime, and checks each group's sum. */
static xpj_kernel *run_blocksum(xpj_context *ctx, xpj_program *p,
                                const char *dtypes, uint64_t ts) {
  enum { N = 256 };
  xpj_device *dev = device_of(ctx);
  xpj_kernel *k = NULL;
  if (xpj_program_get_kernel(p, "blocksum", dtypes, 0, dev, NULL, &k) !=
      XPJ_OK)
    fail_msg("blocksum [%s]: %s", dtypes, xpj_last_error());
  xpj_kernel_info ki;
  assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
  assert_int_equal(ki.reqd_local[0], ts);
  float *x = NULL, *o = NULL;
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * 4, 0, (void **)&x),
                   XPJ_OK);
  assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * 4, 0, (void **)&o),
                   XPJ_OK);
  for (int i = 0; i < N; i++) {
    x[i] = (float)(i % 13);
    o[i] = -1.0f;
  }
  xpj_array X = xpj_array_1d(x, XPJ_F32, N), O = xpj_array_1d(o, XPJ_F32, N);
  xpj_arg args[2] = {xpj_arg_array(&X), xpj_arg_array(&O)};
  xpj_range r = xpj_range_1d(N, 0);
  xpj_queue *q = NULL;
  assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
  if (xpj_launch(q, k, &r, 2, args, NULL) != XPJ_OK ||
      xpj_queue_wait(q) != XPJ_OK)
    fail_msg("launch [%s]: %s", dtypes, xpj_last_error());
  xpj_queue_destroy(q);
  for (uint64_t g = 0; g < N / ts; g++) {
    float want = 0;
    for (uint64_t i = g * ts; i < (g + 1) * ts; i++)
      want += x[i];
    if (o[g] != want)
      fail_msg("[%s] group %llu: %g, want %g", dtypes, (unsigned long long)g,
               o[g], want);
  }
  assert_true(o[N / ts] == -1.0f);
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, o);
  return k;
}

typedef struct entries {
  unsigned n;
  char dtypes[8][64];
} entries;

static int collect(void *ud, const xpj_cache_entry *e) {
  entries *es = ud;
  /* the device's own binary (OpenCL) is stored beside the portable one */
  if (strcmp(e->kernel, "blocksum") || !strncmp(e->target, "native:", 7))
    return 0;
  if (es->n < 8)
    snprintf(es->dtypes[es->n], sizeof es->dtypes[0], "%s", e->dtypes);
  es->n++;
  return 0;
}

static entries cache_entries(xpj_context *ctx) {
  entries es = {0};
  assert_int_equal(xpj_cache_list(xpj_context_cache(ctx), collect, &es),
                   XPJ_OK);
  return es;
}

static void test_device_two_values(void **state) {
  (void)state;
  xpj_context *ctx = mkctx(XPJ_CACHE_MODE_RW);
  xpj_program *p = NULL;
  if (xpj_program_create(ctx, "constgen.xpk", src, strlen(src), NULL, &p) !=
      XPJ_OK)
    fail_msg("program: %s", xpj_last_error());
  xpj_kernel *k8 = run_blocksum(ctx, p, "T=f32,TS=8", 8);
  xpj_kernel *k32 = run_blocksum(ctx, p, "T=f32,TS=32", 32);
  assert_ptr_not_equal(k8, k32);
  /* the same binding written otherwise is the same kernel */
  assert_ptr_equal(run_blocksum(ctx, p, "TS=0x8,T=f32", 8), k8);
  assert_ptr_equal(run_blocksum(ctx, p, "f32,+32", 32), k32);
  entries es = cache_entries(ctx);
  assert_int_equal(es.n, 2);
  bool saw8 = false, saw32 = false;
  for (unsigned i = 0; i < 2; i++) {
    saw8 = saw8 || !strcmp(es.dtypes[i], "T=f32,TS=8");
    saw32 = saw32 || !strcmp(es.dtypes[i], "T=f32,TS=32");
  }
  assert_true(saw8 && saw32);
  /* binding errors, each XPJ_ERR_SPECIALIZE with a message */
  static const struct {
    const char *dtypes, *want;
  } bad[] = {
      {"T=f32", "no value for const parameter 'TS: i64'"},
      {"TS=16", "no dtype for type parameter 'T'"},
      {"T=f32,TS=16,X=1", "has no type or const parameter 'X'"},
      {"T=f32,TS=f32", "'TS' is a const parameter (TS: i64); it takes a "
                       "value, not the dtype 'f32'"},
      {"T=16,TS=16", "unknown dtype '16' for type parameter 'T'"},
      {"T=f32,TS=1e3", "const parameter 'TS: i64': '1e3' is not an integer"},
      {"T=f32,TS=8,TS=8", "const parameter 'TS' bound twice"},
      {"f32,8,9", "takes 2 type and const parameters"},
      {"T=f32,TS=0", "a local size must be an integer constant from 1 to "
                     "4096 (with T=f32, TS=0)"},
      {"T=f32,TS=8192", "constgen.xpk:2:88: error: a local size must be an "
                        "integer constant from 1 to 4096 (with T=f32, "
                        "TS=8192)"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    xpj_kernel *k = NULL;
    xpj_status st = xpj_program_get_kernel(p, "blocksum", bad[i].dtypes, 0,
                                           device_of(ctx), NULL, &k);
    if (st != XPJ_ERR_SPECIALIZE || !strstr(xpj_last_error(), bad[i].want))
      fail_msg("dtypes \"%s\": %s: %s (wanted \"%s\")", bad[i].dtypes,
               xpj_status_name(st), xpj_last_error(), bad[i].want);
  }
  /* positional, with a bool first */
  xpj_kernel *kf = NULL;
  assert_int_equal(xpj_program_get_kernel(p, "flags", "true,i32,0x7", 0,
                                          device_of(ctx), NULL, &kf),
                   XPJ_OK);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);

  /* a new context on the same file: "TS=0x20" is the stored TS=32 */
  ctx = mkctx(XPJ_CACHE_MODE_RW);
  assert_int_equal(xpj_program_create(ctx, "constgen.xpk", src, strlen(src),
                                      NULL, &p),
                   XPJ_OK);
  xpj_kernel *k = run_blocksum(ctx, p, "T=f32,TS=0x20", 32);
  xpj_kernel_info ki;
  assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
  assert_int_equal(ki.origin, XPJ_ORIGIN_CACHE);
  assert_int_equal(cache_entries(ctx).n, 2);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
}

/* The binding string through xpjitd: the client sends it, the daemon
 * parses and specialises it, compiles once per value and serves a second
 * client the same binding written otherwise. CPU only. */
static void test_daemon(void **state) {
  (void)state;
  if (strcmp(test_device(), "cpu")) {
    skip();
    return;
  }
  const char *b = getenv("BUILD");
  char bin[300], sock[300], cmd[2400];
  snprintf(bin, sizeof bin, "%s/bin", b && *b ? b : "build");
  snprintf(sock, sizeof sock, "%s/run/xpjitd.sock", dir);
  snprintf(cmd, sizeof cmd,
           "mkdir -m 700 '%s/run' && XPJIT_CACHE_DIR='%s/dcache' "
           "'%s/xpjitd' --socket '%s' --log '%s/dlog' >/dev/null",
           dir, dir, bin, sock, dir);
  if (system(cmd) != 0)
    fail_msg("cannot start %s/xpjitd", bin);
  char *old = getenv("XPJIT_DAEMON") ? strdup(getenv("XPJIT_DAEMON")) : NULL;
  setenv("XPJIT_DAEMON", sock, 1);
  /* rounds 0 and 1 find the daemon through XPJIT_DAEMON, round 2 through
   * xpj_context_desc.daemon, which wins over the variable */
  for (int round = 0; round < 3; round++) {
    if (round == 2)
      setenv("XPJIT_DAEMON", "off", 1);
    xpj_context *ctx = mkctx_daemon(XPJ_CACHE_MODE_OFF, round == 2 ? sock
                                                                   : NULL);
    xpj_program *p = NULL;
    assert_int_equal(xpj_program_create(ctx, "constgen.xpk", src,
                                        strlen(src), NULL, &p),
                     XPJ_OK);
    xpj_kernel *k8 = run_blocksum(ctx, p, round ? "f32,0x8" : "T=f32,TS=8",
                                  8);
    xpj_kernel *k16 = run_blocksum(ctx, p, "T=f32,TS=16", 16);
    xpj_kernel_info i8, i16;
    assert_int_equal(xpj_kernel_get_info(k8, &i8), XPJ_OK);
    assert_int_equal(xpj_kernel_get_info(k16, &i16), XPJ_OK);
    assert_int_equal(i8.origin, XPJ_ORIGIN_DAEMON);
    assert_int_equal(i16.origin, XPJ_ORIGIN_DAEMON);
    xpj_cache_counters c;
    assert_int_equal(xpj_context_cache_counters(ctx, &c), XPJ_OK);
    assert_int_equal(c.daemon_hits, 2);
    assert_int_equal(c.daemon_fallbacks, 0);
    xpj_program_destroy(p);
    xpj_context_destroy(ctx);
  }
  /* and "off" or "" in the description: compiled here, the daemon unasked */
  setenv("XPJIT_DAEMON", sock, 1);
  for (int round = 0; round < 2; round++) {
    xpj_context *ctx = mkctx_daemon(XPJ_CACHE_MODE_OFF, round ? "" : "off");
    xpj_program *p = NULL;
    assert_int_equal(xpj_program_create(ctx, "constgen.xpk", src,
                                        strlen(src), NULL, &p),
                     XPJ_OK);
    xpj_kernel *k = run_blocksum(ctx, p, "T=f32,TS=8", 8);
    xpj_kernel_info ki;
    assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
    assert_int_equal(ki.origin, XPJ_ORIGIN_COMPILED);
    xpj_cache_counters c;
    assert_int_equal(xpj_context_cache_counters(ctx, &c), XPJ_OK);
    assert_int_equal(c.daemon_hits + c.daemon_fallbacks, 0);
    xpj_program_destroy(p);
    xpj_context_destroy(ctx);
  }
  if (old) {
    setenv("XPJIT_DAEMON", old, 1);
    free(old);
  } else {
    unsetenv("XPJIT_DAEMON");
  }
  /* two compiles for the two values; the later rounds were memory hits */
  snprintf(cmd, sizeof cmd,
           "'%s/xpjit-cli' daemon stats --socket '%s' | "
           "awk '$1 == \"compiles\" {print $2}' > '%s/compiles'; "
           "'%s/xpjit-cli' daemon stop --socket '%s' >/dev/null",
           bin, sock, dir, bin, sock);
  assert_int_equal(system(cmd), 0);
  char path[300], got[32] = "";
  snprintf(path, sizeof path, "%s/compiles", dir);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  assert_non_null(fgets(got, sizeof got, f));
  fclose(f);
  assert_string_equal(got, "2\n");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_declaration),
      cmocka_unit_test(test_deferred),
      cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_folded),
      cmocka_unit_test(test_spec_errors),
      cmocka_unit_test(test_const_parse),
      cmocka_unit_test_setup_teardown(test_device_two_values, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_daemon, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
