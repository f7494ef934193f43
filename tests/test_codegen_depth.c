/*
 * test_codegen_depth.c - deep chains of device function calls: what the
 * compiler asks about the call graph before it inlines (the id rank of a
 * range kernel, ir/ir.c xpj_func_id_rank; whether a call holds a barrier,
 * compiler/codegen.c barrier_memo) takes time linear in the module, not
 * exponential in the depth of the calls.
 *
 * The source that found it: 40 device functions, each calling the next
 * one twice. Walking every chain of calls visits 2^40 of them (0.1 s at
 * 24 levels, hours at 40) before the compile worker's timeout stops it.
 * Such a kernel cannot compile - inlining it would take 2^40 copies of the
 * innermost function - so the compile must end promptly with "too large
 * after inlining", as it does for any kernel past MAX_INLINED. The
 * innermost function adds up a thousand constants (instructions that
 * count towards that bound but fold away), so lowering reaches the bound
 * after a few thousand inlined calls and the test measures the analyses,
 * not the lowering. Chains of one call per level, 40 and 70 deep (past
 * the analyses' depth bound of 64), must compile.
 */
#include "cgutil.h"

#include <stdio.h>
#include <time.h>

#define DEPTH 40

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct sbuf {
  char *p;
  size_t n, cap;
} sbuf;

static void put(sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0,
                      fmt, ap);
    va_end(ap);
    assert_true(k >= 0);
    if (b->p && b->n + (size_t)k < b->cap) {
      b->n += (size_t)k;
      return;
    }
    b->cap = 2 * (b->cap + (size_t)k + 64);
    b->p = realloc(b->p, b->cap);
    assert_non_null(b->p);
  }
}

/* A module of two chains of depth functions and two kernels:
 *   r0 .. r{depth-1}: the innermost reads global_id(0) and global_id(1)
 *     (and adds pad constants); each other r calls the next one `calls`
 *     times; no barrier anywhere below r0, so a walk asking whether a
 *     call holds one must look at every chain of calls;
 *   b0 .. b{depth-1}: the innermost reads local_id(0) and has a barrier;
 *     each other b calls the next one `calls` times;
 *   deep_range: a range kernel of no declared rank calling r0 (its id
 *     rank comes from what r reads: 2);
 *   deep_nd: an nd-range kernel calling r0, then a barrier, then b0.
 * (b0 does not take r0's value: on the CPU, the value of a call lowered at
 * work-group level passed to another such call fails to compile, "used
 * before it was lowered", and past the depth bound r0 counts as one.) */
static char *chain_source(unsigned depth, unsigned calls, unsigned pad) {
  sbuf b = {0};
  put(&b, "const K: i64 = 1;\n\n");
  put(&b, "fn r%u(x: i64) -> i64 {\n    return x + (K", depth - 1);
  for (unsigned i = 1; i < pad; i++)
    put(&b, " + K");
  put(&b, ") + global_id(0) * global_id(1);\n}\n\n");
  put(&b, "fn b%u(x: i64) -> i64 {\n    let v = x + local_id(0);\n"
          "    barrier(local);\n    return v;\n}\n\n", depth - 1);
  for (unsigned i = depth - 1; i-- > 0;) {
    put(&b, "fn r%u(x: i64) -> i64 {\n    return r%u(x)", i, i + 1);
    for (unsigned k = 1; k < calls; k++)
      put(&b, " + r%u(x + %u)", i + 1, k);
    put(&b, ";\n}\n\n");
    put(&b, "fn b%u(x: i64) -> i64 {\n    return b%u(x)", i, i + 1);
    for (unsigned k = 1; k < calls; k++)
      put(&b, " + b%u(x + %u)", i + 1, k);
    put(&b, ";\n}\n\n");
  }
  put(&b, "kernel deep_range(y: global i64[]) range {\n"
          "    let i = global_linear_id();\n"
          "    if i < shape(y, 0) {\n"
          "        y[i] = r0(i);\n"
          "    }\n"
          "}\n\n");
  put(&b, "kernel deep_nd(y: global i64[]) ndrange(1) {\n"
          "    let i = global_id(0);\n"
          "    let v = r0(i);\n"
          "    barrier(local);\n"
          "    let w = b0(i);\n"
          "    if i < shape(y, 0) {\n"
          "        y[i] = v + w;\n"
          "    }\n"
          "}\n");
  return b.p;
}

static xpj_module *parse_spec(const char *src, const char *kernel) {
  xpj_module *m = NULL;
  char *diag = NULL;
  xpj_status st = parse_src(src, &m, &diag);
  if (st != XPJ_OK)
    fprintf(stderr, "%s", diag ? diag : "");
  free(diag);
  assert_int_equal(st, XPJ_OK);
  xpj_spec sp = {0, NULL, NULL, 0, 0, NULL, NULL};
  xpj_module *s = NULL;
  assert_int_equal(xpj_specialize(m, kernel, &sp, &s, NULL), XPJ_OK);
  xpj_module_destroy(m);
  return s;
}

/* Compiles kernel of spec for target (isolated, default options); returns
 * the result and its status, printing the time taken. */
static xpj_result *compile_timed(const xpj_module *spec, const char *kernel,
                                 const char *target, xpj_status *st) {
  xpj_target t;
  char err[256];
  assert_int_equal(xpj_target_parse(target, &t, err, sizeof err), XPJ_OK);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  xpj_result *r = NULL;
  double t0 = now();
  *st = xpj_compile(spec, kernel, &t, &o, XPJ_EMIT_BIN, &r);
  printf("  %-10s %-10s %s in %.2f s\n", kernel, target, xpj_status_name(*st),
         now() - t0);
  return r;
}

static const char *const targets[] = {"cpu", "ptx:sm_90", "spirv"};

/* Each function calls the next twice: the compile ends at once, refused by
 * the inlining bound. deep_range exercises the id rank on every target and
 * the barrier question on the CPU; deep_nd the barrier question at
 * work-group level on the CPU (the GPU targets ask neither for it). */
static void test_doubling_chain(void **state) {
  (void)state;
  char *src = chain_source(DEPTH, 2, 1000);
  const struct {
    const char *kernel;
    unsigned ntargets;
  } cases[] = {{"deep_range", 3}, {"deep_nd", 1}};
  double t0 = now();
  for (unsigned c = 0; c < 2; c++) {
    xpj_module *s = parse_spec(src, cases[c].kernel);
    for (unsigned t = 0; t < cases[c].ntargets; t++) {
      xpj_status st;
      xpj_result *r = compile_timed(s, cases[c].kernel, targets[t], &st);
      const char *log = xpj_result_log(r);
      if (st != XPJ_ERR_UNSUPPORTED ||
          !strstr(log, "too large after inlining"))
        fail_msg("%s for %s: %s: %s", cases[c].kernel, targets[t],
                 xpj_status_name(st), log);
      assert_int_equal(xpj_result_failure_kind(r), XPJ_FAILURE_INPUT);
      xpj_result_destroy(r);
    }
    if (c == 0) {
      /* in this process, after the workers showed it to be quick */
      const xpj_func *k = xpj_module_find(s, "deep_range");
      assert_non_null(k);
      assert_int_equal(xpj_func_id_rank(k), 2);
    }
    xpj_module_destroy(s);
  }
  printf("  doubling chain of %u: %.2f s in all\n", DEPTH, now() - t0);
  free(src);
}

/* One call per level compiles for every target, the barrier 40 and 70
 * calls down included; the id rank counts what functions read up to 64
 * calls below the kernel, as it always has. */
static void test_single_chain(void **state) {
  (void)state;
  const unsigned depths[] = {DEPTH, 70};
  for (unsigned d = 0; d < 2; d++) {
    char *src = chain_source(depths[d], 1, 1);
    for (unsigned c = 0; c < 2; c++) {
      const char *kernel = c ? "deep_nd" : "deep_range";
      xpj_module *s = parse_spec(src, kernel);
      if (c == 0)
        assert_int_equal(xpj_func_id_rank(xpj_module_find(s, kernel)),
                         depths[d] <= 64 ? 2 : 1);
      for (unsigned t = 0; t < 3; t++) {
        xpj_status st;
        xpj_result *r = compile_timed(s, kernel, targets[t], &st);
        if (st != XPJ_OK)
          fail_msg("%s (depth %u) for %s: %s: %s", kernel, depths[d],
                   targets[t], xpj_status_name(st), xpj_result_log(r));
        size_t len = 0;
        assert_non_null(xpj_result_data(r, &len));
        assert_true(len > 0);
        xpj_result_destroy(r);
      }
      xpj_module_destroy(s);
    }
    free(src);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_doubling_chain),
      cmocka_unit_test(test_single_chain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
