/*
 * test_frontend.c - the parser and checker: every class of diagnostic with
 * its exact message and position, hostile inputs (binary garbage, NUL
 * bytes, deep nesting, huge and empty files), the examples, and running
 * out of memory at every allocation.
 */
#include "testutil.h"

#include "diag.h"     /* xpj_diags_render_styled */
#include "frontend.h" /* xpj_specialize_signature */
#include "ir_impl.h"  /* xpj_alloc_fail_after */
#include "lex.h"      /* xpj_lex: test_lex_punctuators, test_lex_words */

#include <fenv.h>
#include <stdio.h>
#include <time.h>

#define MAX_LINES 4

typedef struct diag_case {
  const char *name;
  const char *src;
  const char *errors[MAX_LINES]; /* every "file:line:col: error: msg" line */
} diag_case;

static const diag_case cases[] = {
#include "diag_cases.inc"
};

/* Collects the "error:" lines of rendered diagnostics. */
static int error_lines(char *text, char **out, int max) {
  int n = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
    if (strstr(line, ": error: ") && n < max + 1)
      out[n++] = line;
  return n;
}

static void test_diagnostics(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const diag_case *c = &cases[i];
    char *text = NULL;
    xpj_status st = parse_src(c->src, NULL, &text);
    char *lines[MAX_LINES + 1];
    int n = error_lines(text, lines, MAX_LINES);
    int want = 0;
    while (want < MAX_LINES && c->errors[want])
      want++;
    if (st != XPJ_ERR_SYNTAX || n != want)
      fail_msg("case %s: status %d, %d error lines, want %d", c->name, st, n,
               want);
    for (int k = 0; k < want; k++)
      if (strcmp(lines[k], c->errors[k]) != 0)
        fail_msg("case %s:\n  got:  %s\n  want: %s", c->name, lines[k],
                 c->errors[k]);
    free(text);
  }
}

/* m printed (m destroyed); fails unless it has every string of want (what
 * says which IR in the message). The caller frees it. */
static char *printed_with(xpj_module *m, const char *const *want, size_t n,
                          const char *what) {
  char *ir = NULL;
  size_t len;
  assert_int_equal(xpj_module_print(m, &ir, &len), XPJ_OK);
  xpj_module_destroy(m);
  for (size_t i = 0; i < n; i++)
    if (!strstr(ir, want[i]))
      fail_msg("%sno '%s' in:\n%s", what, want[i], ir);
  return ir;
}

/* Parses src, which must be accepted, and fails unless its printed IR
 * has every string of want; returns the IR (the caller frees it). */
static char *expect_ir(const char *src, const char *const *want, size_t n) {
  xpj_module *m = NULL;
  char *diag = NULL;
  if (parse_src(src, &m, &diag) != XPJ_OK)
    fail_msg("%s", diag);
  free(diag);
  return printed_with(m, want, n, "");
}

/* Untyped integer constant expressions have their exact value (or an
 * error, test_diagnostics): they wrapped at 64 bits, silently (an
 * adversarial review; 2^62 * 4 / 8 was 0). Module constants may be used
 * before their definition (language.md 3), in other constants, array
 * sizes and kernels. */
static void test_constant_values(void **state) {
  (void)state;
  static const char src[] =
      "const A: i64 = B * 2;\n"
      "const B: i64 = C + 1;\n"
      "kernel k(x: global i64[], u: global u64[]) range {\n"
      "    let z: i64[M];\n"
      "    x[0] = A;\n"
      "    u[0] = 9223372036854775807 + 1;\n"
      "    x[1] = -9223372036854775808;\n"
      "    x[2] = 9223372036854775807 + 1 - 2;\n"
      "    u[1] = 18446744073709551615 / 3;\n"
      "    x[3] = 9223372036854775807i64 + 1;\n" /* typed: wraps */
      "    u[2] = 18446744073709551615u64 >> 60u64;\n" /* logical */
      "    x[4] = -(1 << 62) >> 70;\n"
      "    x[5] = ~9223372036854775807;\n"
      "    z[0] = 7;\n"
      "    x[6] = z[0] + i64(size(z));\n"
      "}\n"
      "const C = 20;\n"
      "const M = 3 * N;\n"
      "const N = 2;\n";
  static const char *const want[] = {
      "const 42 : i64",
      "const 9223372036854775808 : u64",
      "const -9223372036854775808 : i64",
      "const 9223372036854775806 : i64",
      "const 6148914691236517205 : u64",
      "const 15 : u64",
      "const -1 : i64",
      "private i64[6]"};
  char *ir = expect_ir(src, want, sizeof want / sizeof *want);
  /* 2^63 - 1 + 1 with i64 operands wraps to -2^63, as at run time */
  assert_true(strstr(strstr(ir, "const -9223372036854775808 : i64") + 1,
                     "const -9223372036854775808 : i64") != NULL);
  free(ir);
}

/* Module constants of suffixed literals compute in their type, wrapping
 * and shifting by the count modulo its width as at run time (language.md
 * 4.4, 8.2); they wrapped at 64 bits, and shifted by the count modulo 64
 * (an adversarial review: (255u8 + 1u8) / 2u8 was 128, 256i32 >> 40 0). */
static void test_typed_constant_wrap(void **state) {
  (void)state;
  static const char src[] =
      "const A = (65535u16 * 2u16) >> 1u16;\n"
      "const B = (-127i8 - 1i8) / -1i8;\n"
      "const C = 1u32 << 33u32;\n"
      "const D = -1i16 >> 20i16;\n"
      "const E = (255u8 + 1u8) / 2u8;\n"
      "const F = 256i32 >> 40i32;\n"
      "kernel k(a: global i64[]) range(1) {\n"
      "    a[0] = i64(A); a[1] = i64(B); a[2] = i64(C);\n"
      "    a[3] = i64(D); a[4] = i64(E); a[5] = i64(F);\n"
      "}\n";
  static const char *const want[] = {"const 32767 : u16", "const -128 : i8",
                                     "const 2 : u32", "const -1 : i16",
                                     "const 0 : u8", "const 1 : i32"};
  char *ir = expect_ir(src, want, sizeof want / sizeof *want);
  free(ir);
}

/* Module constants with comparisons, !, &&, || and ?: (they were "not a
 * constant expression"), typed constants inside others, a chain of 300
 * forward references (66 hit the nesting limit), names of atomic orders
 * and scopes as variables, and constant casts of integers rounded once
 * as at run time (an adversarial review). */
static void test_constant_rules(void **state) {
  (void)state;
  char *chain = malloc(64 * 1024);
  assert_non_null(chain);
  size_t k = 0;
  for (int i = 0; i < 300; i++)
    k += (size_t)sprintf(chain + k, "const Q%d = Q%d + 2;\n", i, i + 1);
  sprintf(chain + k,
          "const Q300: i64 = 1;\n"
          "const A = 7;\n"
          "const I: bool = A < 8 && !(A == 3) || false;\n"
          "const K: u8 = I ? 200 : 2;\n"
          "const L = A > 10 ? 1.5 : 3;\n"
          "const T: i16 = 1000;\n"
          "const U = T * 40;\n"
          "const V: f32 = 0.1;\n"
          "const W = V * 3.0;\n"
          "kernel k(o: global i64[], b: global u8[], f: global f64[],\n"
          "         g: global f32[], h: global f16[], s: global i16[]) range(1) {\n"
          "    let device: i64 = 1;\n"
          "    atomic_add(&o[0], device, relaxed, device);\n"
          "    o[1] = Q0;\n"
          "    b[0] = K;\n"
          "    f[0] = L;\n"
          "    s[0] = U;\n"
          "    g[0] = W;\n"
          "    g[1] = f32(1152921573326323713i64);\n"
          "    g[2] = 1152921573326323713;\n"
          "    h[0] = f16(70000i32);\n"
          "    f[1] = 9223372036854775808;\n"
          "    let w = 3000000000;\n"
          "    o[2] = w + (I ? 1 : 3000000000);\n"
          "}\n");
  /* Q0 = 1 + 2 * 300; U wraps in i16: 40000 - 65536; 2^60 + 2^36 + 1
   * rounds once to 2^60 + 2^37 (through f64 it was 2^60); 0.1f32 * 3 */
  static const char *const want[] = {
      "const 601 : i64",        "const 200 : u8",
      "const 3.0 : f64",        "const -25536 : i16",
      "const 0.300000012 : f32", "const 1.15292164e+18 : f32",
      "const inf : f16",        "const 9.2233720368547758e+18 : f64",
      "const 3000000000 : i64", "atomic add %9, %10 relaxed device"};
  free(expect_ir(chain, want, sizeof want / sizeof *want));
  free(chain);
  /* bf16 constants hold values (untyped arithmetic rounded once to bf16,
   * as in a let); operators on bf16 itself are refused (const_bf16_ops) */
  static const char bf[] = "const C: bf16 = 0.1;\n"
                           "const Z: bf16 = -0.5;\n"
                           "const W: bf16 = 1.5 * 3.0;\n"
                           "const V = true ? C : Z;\n"
                           "kernel k(x: global bf16[]) range(1) {\n"
                           "    x[0] = V; x[1] = W; x[2] = Z;\n"
                           "}\n";
  static const char *const want_bf[] = {"const 0.10009765625 : bf16",
                                        "const 4.5 : bf16",
                                        "const -0.5 : bf16"};
  free(expect_ir(bf, want_bf, sizeof want_bf / sizeof *want_bf));
}

/* Casts in a module constant's value (language.md 3.3; they were "not a
 * constant expression", so an i64 constant could not be made of an i32
 * one: an outside probe): folded as a function's would be. */
static void test_constant_casts(void **state) {
  (void)state;
  static const char src[] =
      "const A = i64(4i32);\n"
      "const B = u8(300i32);\n"
      "const C = i32(2.5);\n"
      "const D = f32(16777217i64);\n"
      "const E = bool(3);\n"
      "const F = f16(C);\n"
      "const G = i64(-2.9f32);\n"
      "const H: u64 = u64(-1i64);\n"
      "const I = f64(1.00000005960464477539062500001f32);\n"
      "const J: i64 = i64(A) * 2;\n"
      "kernel k(o: global i64[], b: global u8[], i: global i32[],\n"
      "         f: global f32[], h: global f16[], u: global u64[],\n"
      "         d: global f64[]) range(1) {\n"
      "    o[0] = A; b[0] = B; i[0] = C; f[0] = D;\n"
      "    if E { h[0] = F; }\n"
      "    o[1] = G; u[0] = H; d[0] = I; o[2] = J;\n"
      "}\n";
  static const char *const want[] = {
      "const 4 : i64",  "const 44 : u8",         "const 2 : i32",
      "const 16777216.0 : f32", "const 1 : bool", "const 2.0 : f16",
      "const -2 : i64", "const 18446744073709551615 : u64",
      "const 1.0000001192092896 : f64", "const 8 : i64"};
  free(expect_ir(src, want, sizeof want / sizeof *want));
}

/* The IR of kernel k of m specialised with T = t; fails unless it has
 * every string of want. */
static void expect_spec_ir(xpj_module *m, xpj_scalar t,
                           const char *const *want, size_t n) {
  const char *names[] = {"T"};
  xpj_spec sp = {1, names, &t, 0, 0, NULL, NULL};
  xpj_module *s = NULL;
  assert_int_equal(xpj_specialize(m, "k", &sp, &s, NULL), XPJ_OK);
  char what[32];
  snprintf(what, sizeof what, "T=%s: ", xpj_scalar_name(t));
  free(printed_with(s, want, n, what));
}

/* A decimal literal is rounded once to its type (language.md 4.4): the
 * lexer knows on which side of its nearest double the decimal lies, and a
 * double halfway between two values of f32, f16 or bf16 goes to the one
 * on the decimal's side. Rounded through f64, each case below gave the
 * other neighbour (1.00000005960464477539062500001f32 was 1.0, as gcc's
 * strtof does not say), and 65519.99999999999999f16 and the decimal just
 * below f32's overflow midpoint were "out of range" (an outside probe).
 * The same in a module constant, an untyped one used as f32, one folded
 * with a suffixed operand, after unary minus, in T(...) and as T when T is
 * bound; a literal has no length limit (it was 127 characters); the
 * caller's rounding mode changes nothing and is left as found. */
static void test_decimal_literals(void **state) {
  (void)state;
  char src[2048];
  char longlit[260];
  memset(longlit, '3', sizeof longlit - 1);
  longlit[0] = '0', longlit[1] = '.';
  longlit[sizeof longlit - 1] = 0;
  snprintf(src, sizeof src,
           "const C = 8.000000476837158203125000001;\n"
           "const D: f32 = 32.0000019073486328125000001;\n"
           "const E = 16.000000953674316406250000001 * 1.0f32;\n"
           "kernel k(g: global f32[], h: global f16[], b: global bf16[],\n"
           "         d: global f64[]) range(1) {\n"
           "    g[0] = 1.00000005960464477539062500001f32;\n"
           "    g[1] = 2.000000357627868652343749999;\n"
           "    g[2] = f32(-1.00000005960464477539062500001);\n"
           "    g[3] = 340282356779733661637539395458142568447.0f32;\n"
           "    g[4] = C; g[5] = D; g[6] = E;\n"
           "    h[0] = 1.00048828125000000000001f16;\n"
           "    h[1] = -65519.99999999999999f16;\n"
           "    b[0] = 1.00390625000000000000001;\n"
           "    d[0] = 1.00000005960464477539062500001;\n"
           "    d[1] = %s;\n"
           "}\n",
           longlit);
  static const char *const want[] = {
      "const 1.00000012 : f32",      "const 2.00000024 : f32",
      "const -1.00000012 : f32",     "const 3.40282347e+38 : f32",
      "const 8.00000095 : f32",      "const 32.0000038 : f32",
      "const 16.0000019 : f32",      "const 1.0009765625 : f16",
      "const -65504.0 : f16",        "const 1.0078125 : bf16",
      "const 1.0000000596046448 : f64",
      "const 0.33333333333333331 : f64"};
  static const int modes[] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD,
                              FE_TOWARDZERO};
  for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
    /* parsed in the mode, printed in the default one (printf rounds in
     * the mode it finds) */
    xpj_module *m = NULL;
    assert_int_equal(fesetround(modes[i]), 0);
    xpj_status st = parse_src(src, &m, NULL);
    int left = fegetround();
    fesetround(FE_TONEAREST);
    assert_int_equal(left, modes[i]);
    assert_int_equal(st, XPJ_OK);
    char what[32];
    snprintf(what, sizeof what, "mode %zu: ", i);
    free(printed_with(m, want, sizeof want / sizeof *want, what));
  }
  /* as T: the side kept in the generic IR, used when T is bound */
  static const char gen[] =
      "kernel k<T>(o: global T[]) range(1) {\n"
      "    o[0] = T(1.00000005960464477539062500001);\n"
      "    o[1] = -1.00000005960464477539062500001;\n"
      "    o[2] = 2.000000357627868652343749999;\n"
      "}\n";
  static const char *const want_gen[] = {
      "const cast 1.0000000596046448 (literal above) : T",
      "const -1.0000000596046448 (literal below) : T",
      "const 2.0000003576278687 (literal below) : T"};
  free(expect_ir(gen, want_gen, sizeof want_gen / sizeof *want_gen));
  xpj_module *m = NULL;
  assert_int_equal(parse_src(gen, &m, NULL), XPJ_OK);
  static const char *const f32s[] = {"const 1.00000012 : f32",
                                     "const -1.00000012 : f32",
                                     "const 2.00000024 : f32"};
  expect_spec_ir(m, XPJ_F32, f32s, 3);
  static const char *const f16s[] = {"const 1.0 : f16", "const -1.0 : f16",
                                     "const 2.0 : f16"};
  expect_spec_ir(m, XPJ_F16, f16s, 3);
  static const char *const f64s[] = {"const 1.0000000596046448 : f64",
                                     "const -1.0000000596046448 : f64",
                                     "const 2.0000003576278687 : f64"};
  expect_spec_ir(m, XPJ_F64, f64s, 3);
  xpj_module_destroy(m);
}

/* A conditional of two literals takes the type its value is converted
 * to: a let's declared type, an assignment's target, a return type;
 * nested conditionals in its arms too (language.md 4.4). */
static void test_conditional_literals(void **state) {
  (void)state;
  static const char src[] =
      "fn sel(c: bool) -> i64 { return c ? -7 : 5000000000; }\n"
      "kernel k(x: global i64[], y: global f32[], z: global u8[],\n"
      "         c: bool, d: bool) range {\n"
      "    let b: i64 = c ? -1 : 0;\n"
      "    x[0] = b + sel(d);\n"
      "    x[1] += c ? d ? 11 : 12 : 13;\n"
      "    y[0] = c ? 1 : 2.5;\n"
      "    let e: f32 = d ? 3 : 4;\n"
      "    y[1] = e;\n"
      "    z[0] = c ? 255 : 6;\n"
      "    let f = c ? 8 : 9;\n"
      "    x[2] = i64(f);\n"
      "}\n";
  static const char *const want[] = {
      "const -7 : i64",   "const 5000000000 : i64", "const -1 : i64",
      "const 0 : i64",    "const 11 : i64",         "const 12 : i64",
      "const 13 : i64",   "const 1.0 : f32",        "const 2.5 : f32",
      "const 3.0 : f32",  "const 4.0 : f32",        "const 255 : u8",
      "const 6 : u8",     "const 8 : i32",          "const 9 : i32"};
  char *ir = expect_ir(src, want, sizeof want / sizeof *want);
  free(ir);
}

/* The rendered form: source line and a caret under the column. */
static void test_caret_rendering(void **state) {
  (void)state;
  char *text = NULL;
  parse_src("kernel k(x: global f32[]) range {\n\tx[0] = q;\n}\n", NULL, &text);
  assert_string_equal(text, "t.xpk:2:9: error: unknown name 'q'\n"
                            "  \tx[0] = q;\n"
                            "  \t       ^\n");
  free(text);
}

/* The rendered diagnostic in text: its quoted line and what stands at
 * its caret, at (tabs are mirrored, so the caret's index is the column's);
 * fails unless the quote is at most max bytes and starts and ends as
 * said ("..." where the line is cut) */
static void caret_at(const char *text, const char *at, size_t max,
                     const char *starts, const char *ends) {
  const char *q = strchr(text, '\n');
  assert_non_null(q);
  const char *c = strchr(q + 1, '\n');
  assert_non_null(c);
  q += 3; /* (the quote and the caret line are indented by two) */
  size_t qlen = (size_t)(c - q);
  const char *caret = strchr(c + 1, '^');
  assert_non_null(caret);
  size_t col = (size_t)(caret - (c + 3));
  if (qlen > max || strncmp(q, starts, strlen(starts)) != 0 ||
      qlen < strlen(ends) || strncmp(c - strlen(ends), ends, strlen(ends)) ||
      col > qlen || strncmp(q + col, at, strlen(at)) != 0 ||
      (!*at && col != qlen)) /* ("": just past the quote's end) */
    fail_msg("want '%s' at the caret, a quote of at most %zu bytes from "
             "'%s' to '%s'; got:\n%s", at, max, starts, ends, text);
  for (const char *k = c + 3; k < caret; k++)
    if (*k != (q[k - (c + 3)] == '\t' ? '\t' : ' '))
      fail_msg("the caret line does not mirror the quote:\n%s", text);
}

/* A long line is quoted in part, the caret under its character: the
 * first 400 bytes while the column is among the first 360, else 160
 * bytes either side of it, with "..." where it is cut (the line was cut
 * at 400 and the caret put at the column, past the quote); the same when
 * xpjit-cli copies the diagnostic to another list */
static void test_long_line_caret(void **state) {
  (void)state;
  char src[8192], *w = src;
  w += sprintf(w, "kernel k(x: global f32[]) range {\n  x[0] = 1.0");
  for (int i = 0; i < 300; i++) /* (tabs in the window: mirrored) */
    w += sprintf(w, i % 50 == 49 ? "\t+ 1.0" : " + 1.0");
  w += sprintf(w, " + qq + 1.0;");
  for (int i = 0; i < 100; i++)
    w += sprintf(w, " x[%d] = 2.0;", i + 1);
  sprintf(w, "\n  x[1] = 1.0 +\n}\n");
  char *text = NULL;
  assert_int_equal(parse_src(src, NULL, &text), XPJ_ERR_SYNTAX);
  /* "  x[0] = 1.0" is 12 bytes, then 300 terms of 6 */
  assert_non_null(strstr(text, "t.xpk:2:1816: error: unknown name 'qq'\n"));
  caret_at(text, "qq + 1.0; x[1] = 2.0;", 326, "...", "...");
  char *e = strstr(text, "t.xpk:4:1: error: expected an expression");
  assert_non_null(e); /* (the next error, on a short line) */
  caret_at(e, "}", 30, "}", "}");
  free(text);

  /* the column among the first 360: the line's start */
  w = src + sprintf(src, "kernel k(x: global f32[]) range {\n  x[0] = zz");
  for (int i = 0; i < 200; i++)
    w += sprintf(w, " + 1.0");
  sprintf(w, ";\n}\n");
  assert_int_equal(parse_src(src, NULL, &text), XPJ_ERR_SYNTAX);
  assert_non_null(strstr(text, "t.xpk:2:10: error: unknown name 'zz'\n"));
  caret_at(text, "zz + 1.0", 403, "  x[0] = zz", " + 1....");
  free(text);

  /* the column past the end of a long line: its last 160 bytes */
  w = src + sprintf(src, "kernel k(x: global f32[]) range {\n  x[0] = 1.0");
  for (int i = 0; i < 200; i++)
    w += sprintf(w, " + 1.0");
  sprintf(w, "\n}\n");
  assert_int_equal(parse_src(src, NULL, &text), XPJ_ERR_SYNTAX);
  assert_non_null(strstr(text, "t.xpk:2:1213: error: expected ';' after "
                               "statement, found '}'\n"));
  caret_at(text, "", 163, "...", " + 1.0");


  /* xpj_diags_get, then xpj_diags_add (xpjit-cli does): the same text,
   * and the column is still the line's */
  xpj_diags *d = NULL, *copy = NULL;
  char line[1200];
  memset(line, 'a', sizeof line - 1);
  line[sizeof line - 1] = 0;
  memcpy(line + 999, "HERE", 4);
  assert_int_equal(xpj_diags_create(&d), XPJ_OK);
  assert_int_equal(xpj_diags_create(&copy), XPJ_OK);
  assert_int_equal(xpj_diags_add(d, XPJ_SEV_ERROR, "f.xpk", 7, 1000, line,
                                 "here"), XPJ_OK);
  xpj_diag g;
  assert_int_equal(xpj_diags_get(d, 0, &g), XPJ_OK);
  assert_int_equal(g.col, 1000);
  assert_int_equal(strlen(g.source), 326);
  assert_int_equal(xpj_diags_add(copy, g.severity, g.file, g.line, g.col,
                                 g.source, g.message), XPJ_OK);
  char *t2 = NULL;
  free(text);
  assert_int_equal(xpj_diags_render(d, &text, NULL), XPJ_OK);
  assert_int_equal(xpj_diags_render(copy, &t2, NULL), XPJ_OK);
  assert_string_equal(text, t2);
  caret_at(text, "HEREaaa", 326, "...aaa", "aaa...");
  free(text);
  /* a column past the line's end (a tool's own diagnostic): its end */
  xpj_diags_clear(d);
  assert_int_equal(xpj_diags_add(d, XPJ_SEV_ERROR, "f.xpk", 7, 5000, line,
                                 "past"), XPJ_OK);
  assert_int_equal(xpj_diags_render(d, &text, NULL), XPJ_OK);
  caret_at(text, "", 163, "...aaa", "aaa");
  free(text);
  free(t2);
  xpj_diags_destroy(d);
  xpj_diags_destroy(copy);
}

/* xpj_diags_render_styled (diag.h): each part marked up and reset, the
 * source line never; without a style, xpj_diags_render's text exactly. */
static void test_styled_rendering(void **state) {
  (void)state;
  xpj_diags *d = NULL;
  assert_int_equal(xpj_diags_create(&d), XPJ_OK);
  assert_int_equal(xpj_diags_add(d, XPJ_SEV_ERROR, "k.xpk", 2, 3,
                                 "  x = y;", "bad"), XPJ_OK);
  assert_int_equal(xpj_diags_add(d, XPJ_SEV_WARNING, "k.xpk", 0, 0, NULL,
                                 "odd"), XPJ_OK);
  assert_int_equal(xpj_diags_add(d, XPJ_SEV_NOTE, "", 0, 0, NULL, "fyi"),
                   XPJ_OK);
  static const xpj_diag_style st = {"<L>", {"<E>", "<W>", "<N>"}, "<M>",
                                    "<C>", "</>"};
  char *styled = NULL, *plain = NULL, *none = NULL;
  assert_int_equal(xpj_diags_render_styled(d, &st, &styled, NULL), XPJ_OK);
  assert_string_equal(styled,
                      "<L>k.xpk:2:3:</> <E>error:</> <M>bad</>\n"
                      "    x = y;\n"
                      "    <C>^</>\n"
                      "<L>k.xpk:</> <W>warning:</> <M>odd</>\n"
                      "<N>note:</> <M>fyi</>\n");
  assert_int_equal(xpj_diags_render(d, &plain, NULL), XPJ_OK);
  assert_int_equal(xpj_diags_render_styled(d, NULL, &none, NULL), XPJ_OK);
  assert_string_equal(none, plain);
  assert_string_equal(plain, "k.xpk:2:3: error: bad\n"
                             "    x = y;\n"
                             "    ^\n"
                             "k.xpk: warning: odd\n"
                             "note: fyi\n");
  /* a style without some parts marks up the others */
  static const xpj_diag_style some = {.severity = {"<E>"}, .reset = "</>"};
  free(styled);
  assert_int_equal(xpj_diags_render_styled(d, &some, &styled, NULL), XPJ_OK);
  assert_non_null(strstr(styled, "k.xpk:2:3: <E>error:</> bad\n"));
  assert_non_null(strstr(styled, "k.xpk: warning: odd\n"));
  assert_int_equal(xpj_diags_render_styled(NULL, &st, &styled, NULL),
                   XPJ_ERR_INVALID);
  free(styled);
  free(plain);
  free(none);
  xpj_diags_destroy(d);
}

static void test_nul_bytes(void **state) {
  (void)state;
  static const char src[] = "kernel k(x: global f32[]) range {\n  let i = 1;\0\0\n}\n";
  xpj_module *m;
  xpj_diags *d;
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  assert_int_equal(xpj_diags_create(&d), XPJ_OK);
  assert_int_equal(xpj_parse(m, "t.xpk", src, sizeof src - 1, d),
                   XPJ_ERR_SYNTAX);
  assert_int_equal(xpj_diags_errors(d), 1);
  xpj_diag g;
  assert_int_equal(xpj_diags_get(d, 0, &g), XPJ_OK);
  assert_string_equal(g.message, "invalid byte 0x00 in source");
  assert_int_equal(g.line, 2);
  assert_int_equal(g.col, 13);
  assert_string_equal(g.source, "  let i = 1;??"); /* NULs shown as '?' */
  xpj_diags_destroy(d);
  xpj_module_destroy(m);
}

/* Comments are UTF-8 too (docs/language.md 2.1): bytes that are not, and
 * NULs, are an error, once a comment; well-formed UTF-8 is taken, and a
 * byte order mark before the first line is skipped (columns count from
 * after it). */
static void test_comment_bytes(void **state) {
  (void)state;
#define K "kernel k(x: global f32[]) range { x[0] = 1.0; }\n"
#define SRC(s) s, sizeof s - 1 /* (some hold a NUL) */
#define BAD(b) "invalid UTF-8 (byte 0x" b ") in a comment: source files are UTF-8"
  static const struct {
    const char *src;
    size_t n;
    int errors;
    const char *msg;
    unsigned line, col;
  } bytes[] = {
      {SRC("// h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80\n"
           "/* \xe6\x97\xa5\xe6\x9c\xac\n \xc2\xa0 */\n" K), 0, NULL, 0, 0},
      {SRC("// caf\xe9 \xe9\xe9\n" K), 1, BAD("e9"), 1, 7}, /* Latin-1 */
      {SRC(K "/* \xe2\x82 */"), 1, BAD("e2"), 2, 4},       /* cut short */
      {SRC("// \xc0\x80 \xed\xa0\x80\n" K), 1, BAD("c0"), 1, 4}, /* overlong */
      {SRC("// \xed\xa0\x80\n" K), 1, BAD("ed"), 1, 4},    /* a surrogate */
      {SRC("/* \xf4\x90\x80\x80 */\n" K), 1, BAD("f4"), 1, 4}, /* > U+10FFFF */
      {SRC("// a\0b\n" K), 1, "NUL byte in a comment", 1, 5},
      /* the comment's error hides no syntax error of its line */
      {SRC("kernel k(x: global f32[]) range { x[0] = ; // caf\xe9\n}\n"), 2,
       BAD("e9"), 1, 50},
      {SRC("\xef\xbb\xbf" "kernel k(x: global f32[]) range { x[0] = ; }\n"), 1,
       "expected an expression, found ';'", 1, 42},
      {SRC("\xef\xbb\xbf" K), 0, NULL, 0, 0},
      {SRC(K "\xef\xbb\xbf"), 1, "invalid byte 0xef in source", 2, 1},
  };
#undef BAD
#undef SRC
#undef K
  for (size_t i = 0; i < sizeof bytes / sizeof *bytes; i++) {
    xpj_module *m;
    xpj_diags *d;
    assert_int_equal(xpj_module_create(&m), XPJ_OK);
    assert_int_equal(xpj_diags_create(&d), XPJ_OK);
    assert_int_equal(xpj_parse(m, "t.xpk", bytes[i].src, bytes[i].n, d),
                     bytes[i].errors ? XPJ_ERR_SYNTAX : XPJ_OK);
    assert_int_equal(xpj_diags_errors(d), bytes[i].errors);
    if (bytes[i].errors) {
      xpj_diag g;
      assert_int_equal(xpj_diags_get(d, 0, &g), XPJ_OK);
      assert_string_equal(g.message, bytes[i].msg);
      assert_int_equal(g.line, bytes[i].line);
      assert_int_equal(g.col, bytes[i].col);
    }
    xpj_diags_destroy(d);
    xpj_module_destroy(m);
  }
}

/* ---- the lexer ---- */

static void lex_no_error(void *ud, uint32_t off, uint32_t line, uint32_t col,
                         const char *msg, bool damaged) {
  (void)ud, (void)off, (void)damaged;
  fail_msg("lexer error at %u:%u: %s", line, col, msg);
}

/* src's tokens, one word each, separated by spaces: a punctuator as its
 * text (checked against its length), `id`, `kw:WORD`, `ty:NAME`, `num`
 * (the caller frees) */
static char *lexed(const char *src) {
  lexer_out o = {0};
  assert_true(xpj_lex(src, (uint32_t)strlen(src), &o, lex_no_error, NULL));
  char *s = malloc((size_t)o.n * 16 + 1), *w = s;
  assert_non_null(s);
  *w = 0;
  for (uint32_t i = 0; i + 1 < o.n; i++) {
    const token *t = &o.toks[i];
    const char *p = xpj_punct_str((punct)t->punct);
    if (t->kind == TK_PUNCT && t->len != strlen(p))
      fail_msg("'%s': %s is %u bytes long", src, p, t->len);
    w += sprintf(w, "%s%s%.*s", i ? " " : "",
                 t->kind == TK_PUNCT  ? ""
                 : t->kind == TK_IDENT ? "id"
                 : t->kind == TK_TYPE  ? "ty:"
                 : t->kind >= TK_KW_KERNEL ? "kw:"
                                           : "num",
                 t->kind == TK_PUNCT                            ? (int)strlen(p)
                 : t->kind == TK_TYPE || t->kind >= TK_KW_KERNEL ? (int)t->len
                                                                 : 0,
                 t->kind == TK_PUNCT ? p : src + t->off);
  }
  assert_int_equal(o.toks[o.n - 1].kind, TK_EOF);
  free(o.toks);
  return s;
}

static void lexes_as(const char *src, const char *want) {
  char *got = lexed(src);
  if (strcmp(got, want) != 0)
    fail_msg("'%s' lexes as '%s', want '%s'", src, got, want);
  free(got);
}

/* Every punctuator alone, and the longest first where they run together
 * (compiler/lex.c punct_at, a switch on the first byte) */
static void test_lex_punctuators(void **state) {
  (void)state;
  for (int p = P_NONE + 1; p < P_COUNT; p++)
    lexes_as(xpj_punct_str((punct)p), xpj_punct_str((punct)p));
  assert_string_equal(xpj_punct_str(P_NONE), "?");
  assert_string_equal(xpj_punct_str(P_COUNT), "?");
  lexes_as("a<<=b>>=c", "id <<= id >>= id");
  lexes_as("<<<=>>>>=", "<< <= >> >>=");
  lexes_as("<<>>", "<< >>");
  lexes_as("x--->y", "id -- -> id");
  lexes_as("!===<=>=", "!= == <= >=");
  lexes_as("&&&=|||=&|", "&& &= || |= & |");
  lexes_as("+++=-=-*=/=%=^=", "++ += -= - *= /= %= ^=");
  lexes_as("=>-<~!?:;,.{}[]()", "= > - < ~ ! ? : ; , . { } [ ] ( )");
  lexes_as("a.b...", "id . id . . .");
  lexes_as("x/y/*c*/z//d\n%", "id / id id %");
  lexes_as("1-1 .5+a", "num - num num + id");
}

/* Every keyword and every scalar type name, and the words around them
 * that are neither (compiler/lex.c keyword_at and its type names) */
static void test_lex_words(void **state) {
  (void)state;
  static const char *const kws[] = {
#define X(id, s) s,
      XPJ_KEYWORDS(X)
#undef X
  };
  char src[64], want[64];
  for (size_t k = 0; k < sizeof kws / sizeof *kws; k++) {
    snprintf(want, sizeof want, "kw:%s", kws[k]);
    lexes_as(kws[k], want);
    assert_int_equal(xpj_tok_kind_str((tok_kind)(TK_KW_KERNEL + k))[0],
                     kws[k][0]);
    snprintf(src, sizeof src, "%sx _%s %.*s %c%s", kws[k], kws[k],
             (int)strlen(kws[k]) - 1, kws[k], kws[k][0] - 32, kws[k] + 1);
    lexes_as(src, "id id id id");
  }
  for (int t = XPJ_BOOL; t < XPJ_SCALAR_COUNT; t++) {
    const char *n = xpj_scalar_name((xpj_scalar)t);
    snprintf(want, sizeof want, "ty:%s", n);
    lexes_as(n, want);
    snprintf(src, sizeof src, "%s0 %.*s _%s", n, (int)strlen(n) - 1, n, n);
    lexes_as(src, "id id id");
  }
}

/* Precedence and associativity (docs/language.md 8.1, parse_binary's
 * table): each module constant has one value read as the table says, and
 * another, or a type error, read otherwise; private arrays sized by them
 * show the values */
static void test_precedence(void **state) {
  (void)state;
  static const char *const prec_cases[][2] = {
      {"100 + (1 | 1 ^ 1)", "101"},          /* | below ^ */
      {"200 + (1 ^ 1 & 0)", "201"},          /* ^ below & */
      {"(false & false == false) ? 300 : 301", "301"}, /* & below == */
      {"(false == 2 < 1) ? 401 : 400", "401"},         /* == below < */
      {"(3 > 2 == true) ? 501 : 500", "501"},
      {"(1 < 1 << 1) ? 601 : 600", "601"},   /* < below << */
      {"700 + (1 << 1 + 1)", "704"},         /* << below + */
      {"800 + 1 + 2 * 3", "807"},            /* + below * */
      {"900 + 7 % 4 * 2", "906"},            /* % and * alike, from the left */
      {"1000 + (8 - 4 - 2)", "1002"},        /* from the left */
      {"1100 + 16 / 4 / 2", "1102"},
      {"1200 + (64 >> 2 >> 1)", "1208"},
      {"1300 - 1 - 1", "1298"},
      {"(true || true && false) ? 1401 : 1400", "1401"}, /* || below && */
      {"(false && false | true) ? 1500 : 1501", "1501"}, /* && below | */
      {"true ? 1601 : 1600 + 10", "1601"},   /* ?: below all */
      {"1700 - -1", "1701"},
  };
  enum { N = sizeof prec_cases / sizeof *prec_cases };
  char src[4096], *w = src;
  for (int i = 0; i < N; i++)
    w += sprintf(w, "const C%d = %s;\n", i, prec_cases[i][0]);
  w += sprintf(w, "kernel k(x: global i64[]) range {\n");
  for (int i = 0; i < N; i++)
    w += sprintf(w, "  let a%d: i64[C%d];\n  a%d[0] = 0;\n", i, i, i);
  sprintf(w, "  x[0] = 1;\n}\n");
  char want[N][32];
  const char *wants[N];
  for (int i = 0; i < N; i++) {
    snprintf(want[i], sizeof want[i], "private i64[%s]", prec_cases[i][1]);
    wants[i] = want[i];
  }
  free(expect_ir(src, wants, N));
}

/* Deterministic garbage: never a crash, always a clean status. */
static void test_garbage(void **state) {
  (void)state;
  uint64_t x = 0x9e3779b97f4a7c15u;
  char buf[512];
  for (int iter = 0; iter < 2000; iter++) {
    size_t n = (size_t)(x % sizeof buf);
    for (size_t i = 0; i < n; i++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      /* half the inputs are mostly language tokens, half raw bytes */
      static const char alphabet[] = "kernel fn let if{}()[];,<>=+-*/T f32 "
                                     "global x 0 1.5 ?:&|!~\n";
      buf[i] = (iter & 1) ? (char)(x & 0xff)
                          : alphabet[x % (sizeof alphabet - 1)];
    }
    xpj_module *m;
    xpj_diags *d;
    assert_int_equal(xpj_module_create(&m), XPJ_OK);
    assert_int_equal(xpj_diags_create(&d), XPJ_OK);
    xpj_status st = xpj_parse(m, "g.xpk", buf, n, d);
    assert_true(st == XPJ_OK || st == XPJ_ERR_SYNTAX);
    assert_true(xpj_diags_count(d) <= XPJ_MAX_ERRORS + 1);
    char *r;
    assert_int_equal(xpj_diags_render(d, &r, NULL), XPJ_OK);
    free(r);
    xpj_diags_destroy(d);
    xpj_module_destroy(m);
  }
}

static void deep(const char *open, const char *close, const char *pre,
                 const char *post, int depth) {
  size_t lo = strlen(open), lc = strlen(close);
  size_t cap = strlen(pre) + strlen(post) + (size_t)depth * (lo + lc) + 8;
  char *s = malloc(cap), *w = s;
  assert_non_null(s);
  w += sprintf(w, "%s", pre);
  for (int i = 0; i < depth; i++, w += lo)
    memcpy(w, open, lo);
  *w++ = '1';
  for (int i = 0; i < depth; i++, w += lc)
    memcpy(w, close, lc);
  strcpy(w, post);
  char *text = NULL;
  assert_int_equal(parse_src(s, NULL, &text), XPJ_ERR_SYNTAX);
  assert_non_null(strstr(text, "nesting is too deep"));
  free(text);
  free(s);
}

/* src ("n.xpk") refused by the parser: its diagnostics rendered
 * (malloc'd), their number in *count */
static char *refused(const char *src, size_t *count) {
  xpj_module *m;
  xpj_diags *d;
  char *text = NULL;
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  assert_int_equal(xpj_diags_create(&d), XPJ_OK);
  assert_int_equal(xpj_parse(m, "n.xpk", src, strlen(src), d), XPJ_ERR_SYNTAX);
  assert_int_equal(xpj_diags_render(d, &text, NULL), XPJ_OK);
  *count = xpj_diags_count(d);
  xpj_diags_destroy(d);
  xpj_module_destroy(m);
  return text;
}

static void test_deep_nesting(void **state) {
  (void)state;
  deep("(", ")", "kernel k(x: global i32[]) range { x[0] = ", "; }", 100000);
  deep("- ", "", "kernel k(x: global i32[]) range { x[0] = ", "; }", 100000);
  deep("{", "}", "kernel k(x: global i32[]) range { ", " }", 20000);
  deep("if true {", "}", "kernel k(x: global i32[]) range { ", " }", 5000);
  deep("x[", "]", "kernel k(x: global i32[]) range { x[0] = ", "; }", 5000);
  /* one error for a function nested too deep, naming the limits, then
   * the next function's own errors, and nothing of the rest of it (the
   * parser left it at the end of the input: "expected '}' to end a
   * block, found end of file" followed) */
  char src[1024], *w = src;
  w += sprintf(w, "kernel k(x: global i32[]) range {\n  if true { x[0] = ");
  for (int i = 0; i < 70; i++)
    *w++ = '(';
  *w++ = '1';
  for (int i = 0; i < 70; i++)
    *w++ = ')';
  sprintf(w, "; }\n}\nkernel j(x: global i32[]) range { x[0] = nope; }\n");
  size_t count;
  char *text = refused(src, &count);
  if (count != 2)
    fail_msg("want two errors, got:\n%s", text);
  assert_non_null(strstr(text, "n.xpk:2:"));
  assert_non_null(strstr(text, "nesting is too deep: the limit is 200 nested "
                               "blocks or statements, or about 66 nested "
                               "parentheses, calls or subscripts"));
  assert_non_null(strstr(text, "n.xpk:4:"));
  assert_non_null(strstr(text, "nope"));
  free(text);
  /* the same for a module constant, parsed where a signature first uses
   * it or where it stands: the items around it are checked */
  static const char *const uses[] = {"local(N) ", ""};
  for (int u = 0; u < 2; u++) {
    w = src;
    w += sprintf(w, "kernel a(y: global f32[]) ndrange(1) %s{ y[0] = 1.0; }\n"
                    "kernel b(y: global f32[], z: badtype) range { }\n"
                    "const N = ", uses[u]);
    for (int i = 0; i < 80; i++)
      *w++ = '(';
    *w++ = '1';
    for (int i = 0; i < 80; i++)
      *w++ = ')';
    sprintf(w, ";\nkernel c(y: global f32[]) range { y[0] = qq; }\n");
    text = refused(src, &count);
    if (!strstr(text, "n.xpk:3:") || !strstr(text, "nesting is too deep") ||
        !strstr(text, "n.xpk:2:") || !strstr(text, "badtype") ||
        !strstr(text, "n.xpk:4:") || !strstr(text, "qq"))
      fail_msg("use %d: want the nesting error and b's and c's, got:\n%s", u,
               text);
    free(text);
  }
}

/* Flat chains that nest in the IR: each arm of an `else if` chain is a
 * block inside the one before, each call adds the callee's depth; the
 * passes after parsing recurse that deep (a chain of 20,000 arms parsed,
 * then overflowed the stack in specialisation; 5,000 passed `check` and
 * failed to compile with an internal message). XPJ_MAX_DEPTH bounds both,
 * with an error at the source. */
static char *elif_chain(int arms) {
  char *s = malloc((size_t)arms * 48 + 256), *w = s;
  assert_non_null(s);
  w += sprintf(w, "kernel k(x: global const i32[], o: global i32[]) range {\n"
                  "  let v = x[0];\n  if v == 0 { o[0] = 0; }");
  for (int i = 1; i < arms; i++)
    w += sprintf(w, " else if v == %d { o[0] = %d; }", i, i);
  strcpy(w, "\n}\n");
  return s;
}

static char *call_chain_src(int n) {
  char *s = malloc((size_t)n * 64 + 256), *w = s;
  assert_non_null(s);
  for (int i = 0; i < n; i++)
    w += sprintf(w, "fn g%d(x: i32) -> i32 { return g%d(x) + 1; }\n", i,
                 i + 1);
  w += sprintf(w, "fn g%d(x: i32) -> i32 { return x; }\n", n);
  strcpy(w, "kernel k(x: global const i32[], o: global i32[]) range "
            "{ o[0] = g0(x[0]); }\n");
  return s;
}

static void parses(const char *src) {
  xpj_module *m;
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  assert_int_equal(xpj_parse(m, "n.xpk", src, strlen(src), NULL), XPJ_OK);
  xpj_module_destroy(m);
}

static void test_flat_chains(void **state) {
  (void)state;
  /* the body, the first arm's block, one more per arm, one for k itself */
  char *src = elif_chain(XPJ_MAX_DEPTH - 2);
  parses(src);
  free(src);
  size_t count;
  src = elif_chain(XPJ_MAX_DEPTH - 1);
  char *text = refused(src, &count);
  if (count != 1 || !strstr(text, "n.xpk:1:8: error: 'k' nests 1025 deep") ||
      !strstr(text, "'else if' chain"))
    fail_msg("want one error at k, got:\n%.600s", text);
  free(text);
  free(src);
  static const int many[] = {XPJ_MAX_DEPTH + 2, 20000, 400000};
  for (size_t i = 0; i < sizeof many / sizeof *many; i++) {
    src = elif_chain(many[i]);
    text = refused(src, &count);
    if (count != 1 || !strstr(text, "n.xpk:3:") ||
        !strstr(text, "an 'else if' chain of more than 1024 arms"))
      fail_msg("%d arms: want one error, got:\n%.600s", many[i], text);
    free(text);
    free(src);
  }
  /* calls: each function counts its body and itself (the kernel too) */
  src = call_chain_src(XPJ_MAX_DEPTH / 2 - 2);
  parses(src);
  free(src);
  src = call_chain_src(XPJ_MAX_DEPTH / 2 + 100);
  text = refused(src, &count);
  if (count != 1 || !strstr(text, "nests 1026 deep") ||
      !strstr(text, "chain of calls"))
    fail_msg("a long chain of calls: want one error, got:\n%.600s", text);
  free(text);
  free(src);
  /* a long chain of calls, each from deep in its function: the check
   * stops where the chain goes past (it walks as deep as the chain: 3,000
   * functions of 150 levels each overflowed its stack) */
  enum { NF = 3000, LEVELS = 150 };
  char *big = malloc((size_t)NF * (LEVELS * 16 + 96) + 256), *w = big;
  assert_non_null(big);
  for (int i = 0; i < NF; i++) {
    w += sprintf(w, "fn g%d(x: i32) -> i32 {", i);
    for (int l = 0; l < LEVELS; l++)
      w += sprintf(w, " if x > %d {", l);
    w += i + 1 < NF ? sprintf(w, " return g%d(x);", i + 1)
                    : sprintf(w, " return x;");
    for (int l = 0; l < LEVELS; l++)
      *w++ = '}';
    w += sprintf(w, " return 0; }\n");
  }
  strcpy(w, "kernel k(x: global const i32[], o: global i32[]) range "
            "{ o[0] = g0(x[0]); }\n");
  text = refused(big, &count);
  if (count != 1 || !strstr(text, "the chain of calls that reaches 'g6'"))
    fail_msg("a deep chain of deep calls: want one error, got:\n%.600s",
             text);
  free(text);
  free(big);
}

/* Flat chains inside one expression: the parser loops over `a + b + c
 * ...`, so its recursion bound does not see them, but the tree is as deep
 * as the chain for every pass after it (100,000 terms were reported to
 * overflow LLVM's stack in a compile worker; for the CPU they take 40 s
 * to compile here). XPJ_MAX_EXPR_DEPTH bounds how deep operators, calls,
 * casts and subscripts nest; parentheses add nothing. Line 3 is
 * `  PRE` `a` (`OP a`) * n `POST;`. */
static char *chain_src(const char *pre, const char *op, int n,
                       const char *post) {
  size_t lo = strlen(op);
  char *s = malloc(strlen(pre) + strlen(post) + (size_t)n * (lo + 2) + 256);
  assert_non_null(s);
  char *w = s + sprintf(s, "kernel k(a: f32, y: global f32[], z: global "
                           "i32[]) range {\n  let i = global_id(0);\n  %sa",
                        pre);
  for (int k = 0; k < n; k++)
    w += sprintf(w, "%sa", op);
  sprintf(w, "%s;\n}\n", post);
  return s;
}

/* Each form at the limit parses; one more term is one error, at col (0:
 * at the chain's last operator, which goes past) */
static void chain_limit(const char *pre, const char *op, int n,
                        const char *post, unsigned col) {
  if (!col) /* (op is " OP ...": its operator one column in) */
    col = 3 + (unsigned)strlen(pre) + 1 + (unsigned)(strlen(op) + 1) *
          (unsigned)n + 1;
  char *src = chain_src(pre, op, n, post);
  parses(src);
  free(src);
  src = chain_src(pre, op, n + 1, post);
  size_t count;
  char *text = refused(src, &count);
  char want[200];
  snprintf(want, sizeof want, "n.xpk:3:%u: error: expression is too deep "
           "(%d operators nested, counting calls and subscripts; at most "
           "%d): split it into statements\n", col, XPJ_MAX_EXPR_DEPTH + 1,
           XPJ_MAX_EXPR_DEPTH);
  if (count != 1 || strncmp(text, want, strlen(want)) != 0)
    fail_msg("%sa (%sa) * %d%s: want one error\n%s got:\n%.400s", pre, op,
             n + 1, post, want, text);
  free(text);
  free(src);
}

static void test_deep_expressions(void **state) {
  (void)state;
  enum { M = XPJ_MAX_EXPR_DEPTH };
  chain_limit("y[i] = ", " + ", M, "", 0);
  chain_limit("y[i] = ", " * ", M, "", 0);
  /* ... - a > 0.0 ? 1 : 0: the comparison and the conditional add one
   * each, and it goes past at the '?' */
  chain_limit("z[i] = ", " - ", M - 2, " > 0.0 ? 1 : 0", 10 + 4 * (M - 1) + 8);
  /* a > a is 1 deep, and each `||` or `&&` one more */
  chain_limit("let b = a > ", " || a > ", M - 1, "", 0);
  chain_limit("let b = a > ", " && a > ", M - 1, "", 0);
  /* a call, a cast, a subscript, a unary operator and a compound
   * assignment each add one, at its name, '[', operator or '=' */
  chain_limit("y[i] = sqrt(", " + ", M - 1, ")", 10);
  chain_limit("z[i] = i32(", " + ", M - 1, ")", 10);
  chain_limit("y[i] = y[i64(", " + ", M - 2, ")]", 11);
  chain_limit("y[i] = -(", " + ", M - 1, ")", 10);
  chain_limit("y[i] += ", " + ", M - 1, "", 8);
  chain_limit("y[i] = a > a ? ", " + ", M - 1, " : a", 16);
  /* parentheses do not start again: (a + ... 600 terms) + ... */
  char pre[16 + 600 * 4], *w = pre + sprintf(pre, "y[i] = (a");
  for (int k = 0; k < 599; k++)
    w += sprintf(w, " + a");
  sprintf(w, ") + ");
  chain_limit(pre, " + ", M - 600, "", 0);
  /* literals alone fold to one constant: no depth at all */
  char *src = malloc(5 * M * 6 + 200);
  assert_non_null(src);
  w = src + sprintf(src, "kernel k(y: global f32[]) range {\n  y[0] = 1.0");
  for (int k = 0; k < 5 * M; k++)
    w += sprintf(w, " + 1.0");
  sprintf(w, " + y[0];\n}\n");
  parses(src);
  free(src);
  /* 100,000 terms: one error, where the chain goes past, quickly (the
   * rest of the chain is poison: nothing more is said of it) */
  static const char *const ops[] = {" + ", " && a > "};
  for (int o = 0; o < 2; o++) {
    src = chain_src(o ? "let b = a > " : "y[i] = ", ops[o], 100000, "");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t count;
    char *text = refused(src, &count);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) +
               (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (count != 1 || !strstr(text, "expression is too deep (1025 "))
      fail_msg("100,000 terms: want one error, got:\n%.400s", text);
    if (s > 10) /* (0.1 s or less here) */
      fail_msg("100,000 terms: refused in %.1f s", s);
    free(text);
    free(src);
  }
}

static void test_huge_and_empty(void **state) {
  (void)state;
  size_t n = XPJ_MAX_SOURCE + 1;
  char *s = malloc(n);
  assert_non_null(s);
  memset(s, ' ', n);
  xpj_module *m;
  xpj_diags *d;
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  assert_int_equal(xpj_diags_create(&d), XPJ_OK);
  assert_int_equal(xpj_parse(m, "big.xpk", s, n, d), XPJ_ERR_SYNTAX);
  xpj_diag g;
  assert_int_equal(xpj_diags_get(d, 0, &g), XPJ_OK);
  assert_non_null(strstr(g.message, "source is too large"));
  /* the largest allowed file of whitespace parses to an empty module */
  xpj_diags_clear(d);
  assert_int_equal(xpj_parse(m, "big.xpk", s, n - 1, d), XPJ_OK);
  assert_int_equal(xpj_module_func_count(m), 0);
  free(s);
  assert_int_equal(xpj_parse(m, "empty.xpk", "", 0, d), XPJ_OK);
  assert_int_equal(xpj_parse(m, "null.xpk", NULL, 0, d), XPJ_OK);
  assert_int_equal(xpj_diags_count(d), 0);
  xpj_diags_destroy(d);
  xpj_module_destroy(m);
}

static void test_error_limit(void **state) {
  (void)state;
  size_t cap = 200 * 40;
  char *s = malloc(cap);
  assert_non_null(s);
  strcpy(s, "kernel k(x: global i32[]) range {\n");
  for (int i = 0; i < 200; i++)
    strcat(s, "  x[0] = nope;\n");
  strcat(s, "}\n");
  xpj_module *m;
  xpj_diags *d;
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  assert_int_equal(xpj_diags_create(&d), XPJ_OK);
  assert_int_equal(xpj_parse(m, "t.xpk", s, strlen(s), d), XPJ_ERR_SYNTAX);
  assert_int_equal(xpj_diags_count(d), XPJ_MAX_ERRORS + 1);
  xpj_diag g;
  assert_int_equal(xpj_diags_get(d, XPJ_MAX_ERRORS, &g), XPJ_OK);
  assert_string_equal(g.message, "too many errors; stopping");
  xpj_diags_destroy(d);
  xpj_module_destroy(m);
  free(s);
}

/* Parses src, which must be refused with exactly the error lines want
 * (NULL-terminated), in order. */
static void expect_errors(const char *src, const char *const *want) {
  char *text = NULL;
  xpj_status st = parse_src(src, NULL, &text);
  char *lines[MAX_LINES + 1];
  int n = error_lines(text, lines, MAX_LINES);
  int nwant = 0;
  while (want[nwant])
    nwant++;
  if (st != XPJ_ERR_SYNTAX || n != nwant)
    fail_msg("status %d, %d error lines, want %d, for:\n%s\ngot:\n%s", st, n,
             nwant, src, text);
  for (int k = 0; k < nwant; k++)
    if (strcmp(lines[k], want[k]) != 0)
      fail_msg("for:\n%s\n  got:  %s\n  want: %s", src, lines[k], want[k]);
  free(text);
}

/* A function with a return type ends every path with a return (language.md
 * 3.2): a return, a nested block, an if with an else whose arms all do, or
 * a for without a condition that no break leaves. Conditions are not
 * evaluated: `while true` and `if true` may be passed by. A nested block
 * was refused (an outside probe), and a for (;;) that a break leaves was
 * accepted, reaching the function's end with no value to return. */
static void test_return_paths(void **state) {
  (void)state;
  static const char *const ok[] = {
      "fn f(x: i32) -> i32 { { return x; } }",
      "fn f(x: i32) -> i32 { let y = x; { { return y; } } }",
      "fn f<T>(x: T) -> T { { return x; } }",
      "fn f(x: i32) -> i32 { if x > 0 { return 1; } "
      "else if x < 0 { { return 2; } } else { return 3; } }",
      "fn f(x: i32) -> i32 { if x > 0 { { return 1; } } "
      "else { if x < 0 { return 2; } return 3; } }",
      "fn f(x: i32) -> i32 { while x > 0 { return x; } { return 0; } }",
      "fn f(x: i32) -> i32 { for (;;) { return x; } }",
      "fn f(x: i32) -> i32 { for (;;) { while x > 0 { break; } return x; } }",
      "fn f(x: i32) -> i32 { for (;;) { for (;;) { break; } "
      "if x > 0 { continue; } return x; } }",
      "fn f(x: i32) -> i32 { for (;;) { } }",
  };
  static const char *const bad[] = {
      "fn f(x: i32) -> i32 { while true { return x; } }",
      "fn f(x: i32) -> i32 { while x > 0 { return x; } }",
      "fn f(x: i32) -> i32 { if true { return x; } }",
      "fn f(x: i32) -> i32 { { if x > 0 { return x; } } }",
      "fn f(x: i32) -> i32 { { } }",
      ("fn f(x: i32) -> i32 { if x > 0 { return 1; } "
       "else if x < 0 { return 2; } }"), /* (one string, not two) */
      "fn f(x: i32) -> i32 { if x > 0 { return 1; } else { { } } }",
      "fn f(x: i32) -> i32 { for (; x > 0;) { return x; } }",
      "fn f(x: i32) -> i32 { for (;;) { if x > 0 { break; } return x; } }",
      "fn f(x: i32) -> i32 { for (;;) { { break; } } }",
      "fn f(x: i32) -> i32 { for (;;) { while x > 0 { } break; } }",
  };
  static const char kernel[] =
      "\nkernel k(o: global i32[]) range { o[0] = f(o[1]); }\n";
  char src[256], want[160];
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    snprintf(src, sizeof src, "%s%s", ok[i], kernel);
    char *text = NULL;
    if (parse_src(src, NULL, &text) != XPJ_OK)
      fail_msg("refused:\n%s\n%s", src, text);
    free(text);
  }
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    snprintf(src, sizeof src, "%s%s", bad[i], kernel);
    /* at the body's closing brace, the line's last character */
    snprintf(want, sizeof want, "t.xpk:1:%zu: error: 'f' may reach its end "
             "without returning a value of type i32", strlen(bad[i]));
    expect_errors(src, (const char *const[]){want, NULL});
  }
}

/* Each function that may reach its end is reported, not the file's first
 * only (an outside probe; cli.md: several errors per file); one with an
 * error of its own is not, as a return its error dropped is no proof. */
static void test_return_each_function(void **state) {
  (void)state;
  expect_errors(
      "fn a(x: i32) -> i32 { if x > 0 { return 1; } }\n"
      "fn b(x: i32) -> i32 { let y: i32 = 1.5; }\n"
      "fn c(x: i32) -> i32 { while true { return x; } }\n"
      "fn d(x: i32) -> i32 { return x; }\n"
      "fn e(x: i32) -> i32 { let y = 1; }\n"
      "kernel k(o: global i32[]) range { o[0] = a(1) + c(2) + d(3) + e(4); }\n",
      (const char *const[]){
          "t.xpk:1:46: error: 'a' may reach its end without returning a "
          "value of type i32",
          "t.xpk:2:36: error: floating-point literal cannot be used as i32 "
          "without a cast",
          "t.xpk:3:48: error: 'c' may reach its end without returning a "
          "value of type i32",
          "t.xpk:5:34: error: 'e' may reach its end without returning a "
          "value of type i32",
          NULL});
}

/* The limits language.md states (2.3, 10): identifiers of 255 characters,
 * 64 parameters of a kernel or a function, local array parameters
 * included; one more is an error. */
static void test_name_and_parameter_limits(void **state) {
  (void)state;
  char id[257], src[2200];
  memset(id, 'a', 256);
  id[255] = 0;
  snprintf(src, sizeof src,
           "kernel k(o: global i32[]) range { let %s = 1; o[0] = %s; }\n", id,
           id);
  assert_int_equal(parse_src(src, NULL, NULL), XPJ_OK);
  id[255] = 'a';
  id[256] = 0;
  snprintf(src, sizeof src,
           "kernel k(o: global i32[]) range { let %s = 1; o[0] = 1; }\n", id);
  expect_errors(src, (const char *const[]){
                         "t.xpk:1:39: error: identifier is too long (at most "
                         "255 characters)",
                         NULL});
  static const char *const heads[] = {"kernel k(", "fn f(", "kernel k("};
  static const char *const tails[] = {
      ") range { }\n",
      ") { }\nkernel k(o: global i32[]) range { }\n",
      "t: local f32[]) ndrange(1) local(64) { }\n"};
  for (size_t h = 0; h < sizeof heads / sizeof *heads; h++)
    for (int n = 64; n <= 65; n++) {
      /* n parameters in all: the local array is the last of them */
      size_t len = (size_t)snprintf(src, sizeof src, "%s", heads[h]);
      int scalars = h == 2 ? n - 1 : n;
      for (int i = 0; i < scalars; i++)
        len += (size_t)snprintf(src + len, sizeof src - len, "a%d: i32%s", i,
                                i + 1 < scalars || h == 2 ? ", " : "");
      snprintf(src + len, sizeof src - len, "%s", tails[h]);
      char *text = NULL;
      xpj_status st = parse_src(src, NULL, &text);
      if (n == 64 ? st != XPJ_OK
                  : st != XPJ_ERR_SYNTAX ||
                        !strstr(text, "error: too many parameters (at most "
                                      "64)"))
        fail_msg("%d parameters:\n%s\ngot:\n%s", n, src, text);
      free(text);
    }
}

static void test_file_errors(void **state) {
  (void)state;
  xpj_module *m;
  xpj_diags *d;
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  assert_int_equal(xpj_diags_create(&d), XPJ_OK);
  assert_int_equal(xpj_parse_file(m, "/nonexistent/k.xpk", d), XPJ_ERR_IO);
  assert_int_equal(xpj_parse_file(m, "/", d), XPJ_ERR_IO);
  assert_int_equal(xpj_diags_errors(d), 2);
  assert_int_equal(xpj_parse_file(NULL, "x", d), XPJ_ERR_INVALID);
  xpj_diags_destroy(d);
  xpj_module_destroy(m);
  xpj_module_destroy(NULL);
  xpj_diags_destroy(NULL);
}

static const char *const examples[] = {
    "examples/atomics.xpk", "examples/axpy.xpk",    "examples/histogram.xpk",
    "examples/intops.xpk",  "examples/math.xpk",    "examples/matmul.xpk",
    "examples/private.xpk", "examples/reduce.xpk",  "examples/scan.xpk",
    "examples/sort.xpk",    "examples/stencil.xpk", "examples/transpose.xpk"};

static void test_examples(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof examples / sizeof *examples; i++) {
    xpj_module *m;
    xpj_diags *d;
    assert_int_equal(xpj_module_create(&m), XPJ_OK);
    assert_int_equal(xpj_diags_create(&d), XPJ_OK);
    xpj_status st = xpj_parse_file(m, examples[i], d);
    if (st != XPJ_OK) {
      char *r;
      xpj_diags_render(d, &r, NULL);
      fail_msg("%s: %s", examples[i], r);
    }
    assert_true(xpj_module_func_count(m) > 0);
    xpj_diags_destroy(d);
    xpj_module_destroy(m);
  }
}

/* A kernel's signature alone (xpj_specialize_signature, what a kernel
 * from a cache is described by: runtime/program.c) is the signature of
 * the kernel specialised whole: kind, dims, required local size,
 * parameters and their types; and the rank of the work-item ids the
 * parsed kernel reads is the specialised one's. Every kernel of every
 * example, bound to each scalar type that specialises. */
static void test_signature_alone(void **state) {
  (void)state;
  static const xpj_scalar try[] = {XPJ_F32, XPJ_I32, XPJ_U64, XPJ_F64};
  unsigned compared = 0;
  for (size_t i = 0; i < sizeof examples / sizeof *examples; i++) {
    xpj_module *m;
    assert_int_equal(xpj_module_create(&m), XPJ_OK);
    assert_int_equal(xpj_parse_file(m, examples[i], NULL), XPJ_OK);
    for (uint32_t fi = 0; fi < xpj_module_func_count(m); fi++) {
      const xpj_func *f = xpj_module_func(m, fi);
      if (xpj_func_kind_of(f) == XPJ_FUNC_DEVICE || xpj_func_const_count(f))
        continue;
      for (size_t ti = 0; ti < sizeof try / sizeof *try; ti++) {
        unsigned nt = xpj_func_tparam_count(f);
        const char *names[XPJ_MAX_TPARAMS];
        xpj_scalar types[XPJ_MAX_TPARAMS];
        for (unsigned j = 0; j < nt; j++) {
          names[j] = xpj_func_tparam_name(f, j);
          types[j] = try[ti];
        }
        xpj_spec sp = {.ntypes = nt, .names = names, .types = types,
                       .ndim = xpj_func_has_generic_rank(f) ? 2u : 0u};
        xpj_module *whole = NULL, *sig = NULL;
        const char *name = xpj_func_name(f);
        if (xpj_specialize(m, name, &sp, &whole, NULL) != XPJ_OK)
          continue;
        assert_int_equal(xpj_specialize_signature(m, name, &sp, &sig, NULL),
                         XPJ_OK);
        const xpj_func *a = xpj_module_find(whole, name),
                       *b = xpj_module_find(sig, name);
        assert_non_null(a);
        assert_non_null(b);
        assert_int_equal(xpj_func_kind_of(a), xpj_func_kind_of(b));
        assert_int_equal(xpj_func_dims(a), xpj_func_dims(b));
        assert_int_equal(xpj_func_id_rank(f), xpj_func_id_rank(a));
        uint64_t ra[3] = {0}, rb[3] = {0};
        xpj_func_reqd_local(a, ra);
        xpj_func_reqd_local(b, rb);
        assert_memory_equal(ra, rb, sizeof ra);
        assert_int_equal(xpj_func_param_count(a), xpj_func_param_count(b));
        for (unsigned j = 0; j < xpj_func_param_count(a); j++) {
          char sa[128], sb[128];
          xpj_type_str(whole, xpj_func_param_type(a, j), sa, sizeof sa);
          xpj_type_str(sig, xpj_func_param_type(b, j), sb, sizeof sb);
          assert_string_equal(sa, sb);
          assert_string_equal(xpj_func_param_name(a, j),
                              xpj_func_param_name(b, j));
        }
        compared++;
        xpj_module_destroy(whole);
        xpj_module_destroy(sig);
      }
    }
    xpj_module_destroy(m);
  }
  assert_true(compared >= 40);
}

/* Fails every allocation in turn: each run must end in a clean status
 * (never a crash), and the sanitizer build proves nothing leaks. */
static void test_out_of_memory(void **state) {
  (void)state;
  static const char src[] =
      "const N = 64;\n"
      "fn sq<T>(v: T) -> T { return v * v; }\n"
      "kernel k<T>(x: global const T[*], y: global T[*], n: i64) ndrange(1) {\n"
      "  local t: T[N];\n"
      "  let i = global_id(0);\n"
      "  t[local_id(0)] = i < n ? sq(x[i]) : T(0);\n"
      "  barrier();\n"
      "  for (let s = 1; s < 4; s += 1) { if s == 2 { continue; } }\n"
      "  if i < n { y[i] = t[local_id(0)] + T(1); }\n"
      "}\n";
  int completed = 0;
  for (unsigned long n = 1; n < 100000 && !completed; n++) {
    xpj_module *m = NULL, *s = NULL;
    xpj_diags *d = NULL;
    xpj_alloc_fail_after(n);
    xpj_status st = xpj_module_create(&m);
    if (st == XPJ_OK)
      st = xpj_diags_create(&d);
    if (st == XPJ_OK)
      st = xpj_parse(m, "t.xpk", src, sizeof src - 1, d);
    if (st == XPJ_OK) {
      const char *names[] = {"T"};
      xpj_scalar types[] = {XPJ_F32};
      xpj_spec sp = {1, names, types, 2, 0, NULL, NULL};
      st = xpj_specialize(m, "k", &sp, &s, d);
    }
    char hex[65];
    if (st == XPJ_OK)
      st = xpj_module_hash(s, "k", NULL, hex);
    char *text = NULL;
    if (st == XPJ_OK)
      st = xpj_module_print(s, &text, NULL);
    free(text);
    bool failed_one = xpj_alloc_fail_pending() == 0;
    xpj_alloc_fail_after(0);
    /* an allocation that failed and a run that went on as if it had not
     * (how deep a function nests was taken as 0: the loop ended there,
     * and the allocations after it were never made to fail) */
    if (st == XPJ_OK && failed_one)
      fail_msg("allocation %lu failed, and the run succeeded", n);
    if (st == XPJ_OK)
      completed = 1;
    else if (st != XPJ_ERR_NOMEM && st != XPJ_ERR_SYNTAX &&
             st != XPJ_ERR_SPECIALIZE)
      fail_msg("allocation %lu: unexpected status %d", n, st);
    xpj_module_destroy(s);
    xpj_module_destroy(m);
    xpj_diags_destroy(d);
  }
  assert_true(completed);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_diagnostics),
      cmocka_unit_test(test_constant_values),
      cmocka_unit_test(test_conditional_literals),
      cmocka_unit_test(test_decimal_literals),
      cmocka_unit_test(test_constant_casts),
      cmocka_unit_test(test_typed_constant_wrap),
      cmocka_unit_test(test_constant_rules),
      cmocka_unit_test(test_caret_rendering),
      cmocka_unit_test(test_long_line_caret),
      cmocka_unit_test(test_styled_rendering),
      cmocka_unit_test(test_nul_bytes),
      cmocka_unit_test(test_comment_bytes),
      cmocka_unit_test(test_precedence),
      cmocka_unit_test(test_lex_punctuators),
      cmocka_unit_test(test_lex_words),
      cmocka_unit_test(test_garbage),
      cmocka_unit_test(test_deep_nesting),
      cmocka_unit_test(test_flat_chains),
      cmocka_unit_test(test_deep_expressions),
      cmocka_unit_test(test_huge_and_empty),
      cmocka_unit_test(test_error_limit),
      cmocka_unit_test(test_return_paths),
      cmocka_unit_test(test_return_each_function),
      cmocka_unit_test(test_name_and_parameter_limits),
      cmocka_unit_test(test_file_errors),
      cmocka_unit_test(test_examples),
      cmocka_unit_test(test_signature_alone),
      cmocka_unit_test(test_out_of_memory),
  };
  return cmocka_run_group_tests_name("frontend", tests, NULL, NULL);
}
