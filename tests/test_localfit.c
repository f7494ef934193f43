/*
 * test_localfit.c - xpj_func_local_fit (ir/localfit.c): which work-group
 * shapes keep an nd-range kernel's static arrays in bounds, judged by an
 * interval analysis. Each case is a kernel, a launch geometry and the
 * verdict: the ones that fit must (the runtime would choose them), and the
 * ones that do not must name the array and the index's line. The cases
 * cover the guards the analysis reads (if, early return, break, && and ||,
 * loop conditions), the arithmetic it follows (offsets, factors, shifts,
 * remainders, min/clamp, casts that wrap), calls, and what it must refuse
 * to trust (indices loaded from static arrays, 32-bit overflow).
 */
#include "testutil.h"

#include <stdio.h>

typedef struct fit_case {
  const char *name;
  const char *src; /* kernel k, no type parameters */
  unsigned ndim;
  uint64_t global[3], local[3];
  int fits;
  const char *array; /* when it does not fit: the array and the line */
  unsigned line;
} fit_case;

#define STENCIL                                                               \
  "const TS: i64 = 16;\n"                                                     \
  "kernel k(u: global const f32[,], out: global f32[,]) ndrange(2) {\n"       \
  "  local t: f32[TS + 2, TS + 2];\n"                                         \
  "  let gy = global_id(0);\n"                                                \
  "  let gx = global_id(1);\n"                                                \
  "  let ly = local_id(0) + 1;\n"                                             \
  "  let lx = local_id(1) + 1;\n"                                             \
  "  t[ly, lx] = u[gy, gx];\n"                                                \
  "  if ly == 1 { t[0, lx] = u[max(gy - 1, 0), gx]; }\n"                      \
  "  if lx == TS { t[ly, TS + 1] = u[gy, gx]; }\n"                            \
  "  barrier(local);\n"                                                       \
  "  out[gy, gx] = t[ly - 1, lx] + t[ly + 1, lx] + t[ly, lx + 1];\n"         \
  "}\n"

#define REDUCE                                                                \
  "kernel k(x: global const f32[], o: global f32[]) ndrange(1) {\n"           \
  "  local t: f32[256];\n"                                                    \
  "  let lid = local_id(0);\n"                                                \
  "  t[lid] = x[global_id(0)];\n"                                             \
  "  barrier(local);\n"                                                       \
  "  for (let s = local_size(0) / 2; s > 0; s >>= 1) {\n"                     \
  "    if lid < s { t[lid] += t[lid + s]; }\n"                                \
  "    barrier(local);\n"                                                     \
  "  }\n"                                                                     \
  "  if lid == 0 { o[group_id(0)] = t[0]; }\n"                                \
  "}\n"

/* any local size: the tail folded below the largest power of two, which a
 * function computes (a loop doubling p while p * 2 <= n) */
#define POW2                                                                  \
  "fn pow2_floor(n: i64) -> i64 {\n"                                          \
  "  let p: i64 = 1;\n"                                                       \
  "  while p * 2 <= n { p *= 2; }\n"                                          \
  "  return p;\n"                                                             \
  "}\n"                                                                       \
  "kernel k(x: global f32[]) ndrange(1) {\n"                                  \
  "  local t: f32[1024];\n"                                                   \
  "  let lid = local_id(0);\n"                                                \
  "  let lsz = local_size(0);\n"                                              \
  "  t[lid] = x[global_id(0)];\n"                                             \
  "  let p = pow2_floor(lsz);\n"                                              \
  "  if p < lsz { if lid < lsz - p { t[lid] += t[lid + p]; } }\n"             \
  "  for (let s = p / 2; s > 0; s >>= 1) {\n"                                 \
  "    if lid < s { t[lid] += t[lid + s]; }\n"                                \
  "  }\n"                                                                     \
  "  x[global_id(0)] = t[0];\n"                                               \
  "}\n"

#define K1(decl, body)                                                        \
  "kernel k(x: global f32[], idx: global const i64[], n: i64) ndrange(1) {\n" \
  "  " decl "\n" body "}\n"

static const fit_case cases[] = {
    /* the tiled stencil: 16 x 16 is the only fit */
    {"stencil 16x16", STENCIL, 2, {1024, 1024}, {16, 16}, 1, NULL, 0},
    {"stencil 8x8", STENCIL, 2, {1024, 1024}, {8, 8}, 1, NULL, 0},
    {"stencil 1x256", STENCIL, 2, {1024, 1024}, {1, 256}, 0, "t", 8},
    {"stencil 16x17", STENCIL, 2, {1024, 1024}, {16, 17}, 0, "t", 12},
    {"stencil 17x16", STENCIL, 2, {1024, 1024}, {17, 16}, 0, "t", 12},
    /* a tree reduction: lid + s < 2 s <= local size */
    {"reduce 256", REDUCE, 1, {4096}, {256}, 1, NULL, 0},
    {"reduce 96", REDUCE, 1, {4096}, {96}, 1, NULL, 0},
    {"reduce 512", REDUCE, 1, {4096}, {512}, 0, "t", 4},
    /* a call's result, widened and narrowed back to [1, n]; the tail fold
     * lid + p < n is relational: intervals allow 2 n - 3 < 1024 */
    {"pow2 3", POW2, 1, {3000}, {3}, 1, NULL, 0},
    {"pow2 500", POW2, 1, {1000}, {500}, 1, NULL, 0},
    {"pow2 1024", POW2, 1, {1024}, {1024}, 0, "t", 12},
    {"pow2 1000", POW2, 1, {1000}, {1000}, 0, "t", 12},
    {"pow2 2048", POW2, 1, {2048}, {2048}, 0, "t", 10},
    /* guards */
    {"early return", K1("local t: f32[8];",
                        "  if local_id(0) >= 8 { return; }\n"
                        "  t[local_id(0)] = 1.0f32;\n"),
     1, {4096}, {4096}, 1, NULL, 0},
    {"no guard", K1("local t: f32[8];", "  t[local_id(0)] = 1.0f32;\n"), 1,
     {4096}, {9}, 0, "t", 3},
    {"|| return",
     "kernel k(x: global f32[]) ndrange(2) {\n"
     "  local t: f32[4, 8];\n"
     "  let ly = local_id(0);\n"
     "  let lx = local_id(1);\n"
     "  if ly >= 4 || lx >= 8 { return; }\n"
     "  t[ly, lx] = 1.0f32;\n"
     "}\n",
     2, {64, 64}, {16, 16}, 1, NULL, 0},
    {"&& guard", K1("local t: f32[8];",
                    "  let lid = local_id(0);\n"
                    "  if lid >= 2 && lid < 10 { t[lid - 2] = 1.0f32; }\n"),
     1, {4096}, {4096}, 1, NULL, 0},
    {"! guard", K1("local t: f32[8];",
                   "  let lid = local_id(0);\n"
                   "  if !(lid >= 8) { t[lid] = 1.0f32; }\n"),
     1, {4096}, {4096}, 1, NULL, 0},
    {"guard on a product", K1("local t: f32[16];",
                              "  let lid = local_id(0);\n"
                              "  if lid * 4 < 64 { t[lid] = 1.0f32; }\n"),
     1, {4096}, {4096}, 1, NULL, 0},
    {"break", K1("local t: f32[32];",
                 "  let k = local_id(0);\n"
                 "  while true {\n"
                 "    if k >= 32 { break; }\n"
                 "    t[k] = 1.0f32;\n"
                 "    k += 1;\n"
                 "  }\n"),
     1, {4096}, {4096}, 1, NULL, 0},
    {"strided loop", K1("local t: f32[64];",
                        "  for (let i = local_id(0); i < 64; "
                        "i += local_size(0)) {\n"
                        "    t[i] = 0.0f32;\n"
                        "  }\n"),
     1, {4096}, {4096}, 1, NULL, 0},
    {"unreachable", K1("local t: f32[16];",
                       "  if local_id(0) > 100000 { t[local_id(0)] = 1.0f32; }\n"),
     1, {4096}, {4096}, 1, NULL, 0},
    /* arithmetic */
    {"rem", K1("local t: f32[16];", "  t[local_id(0) % 16] = 1.0f32;\n"), 1,
     {4096}, {4096}, 1, NULL, 0},
    {"and mask", K1("local t: f32[16];", "  t[local_id(0) & 15] = 1.0f32;\n"),
     1, {4096}, {4096}, 1, NULL, 0},
    {"shift fits", K1("local t: f32[4];", "  t[local_id(0) >> 2] = 1.0f32;\n"),
     1, {4096}, {16}, 1, NULL, 0},
    {"shift overruns", K1("local t: f32[4];",
                          "  t[local_id(0) >> 2] = 1.0f32;\n"),
     1, {4096}, {17}, 0, "t", 3},
    {"min", K1("local t: f32[16];", "  t[min(local_id(0), 15)] = 1.0f32;\n"),
     1, {4096}, {4096}, 1, NULL, 0},
    {"clamp", K1("local t: f32[8];",
                 "  t[clamp(local_id(0) - 1, 0, 7)] = 1.0f32;\n"),
     1, {4096}, {4096}, 1, NULL, 0},
    {"negative", K1("local t: f32[8];", "  t[local_id(0) - 1] = 1.0f32;\n"),
     1, {4096}, {1}, 0, "t", 3},
    {"flat 2-D", "kernel k(x: global f32[]) ndrange(2) {\n"
                 "  local t: f32[64];\n"
                 "  t[local_linear_id()] = 1.0f32;\n"
                 "}\n",
     2, {64, 64}, {8, 8}, 1, NULL, 0},
    {"flat 2-D overruns", "kernel k(x: global f32[]) ndrange(2) {\n"
                          "  local t: f32[64];\n"
                          "  t[local_linear_id()] = 1.0f32;\n"
                          "}\n",
     2, {64, 64}, {8, 16}, 0, "t", 3},
    /* 32-bit arithmetic that wraps is not trusted */
    {"i32 fits", K1("local t: f32[16];",
                    "  let j = i32(local_id(0)) * 1000000;\n"
                    "  t[j / 1000000] = 1.0f32;\n"),
     1, {4096}, {16}, 1, NULL, 0},
    {"i32 wraps", K1("local t: f32[4096];",
                     "  let j = i32(local_id(0)) * 1000000;\n"
                     "  t[j / 1000000] = 1.0f32;\n"),
     1, {4096}, {4096}, 0, "t", 4},
    /* a device function that reads the local id */
    {"call", "fn slot() -> i64 { return local_id(0) + 1; }\n"
             "kernel k(x: global f32[]) ndrange(1) {\n"
             "  local t: f32[16];\n"
             "  t[slot()] = 1.0f32;\n"
             "}\n",
     1, {4096}, {15}, 1, NULL, 0},
    {"call overruns", "fn slot() -> i64 { return local_id(0) + 1; }\n"
                      "kernel k(x: global f32[]) ndrange(1) {\n"
                      "  local t: f32[16];\n"
                      "  t[slot()] = 1.0f32;\n"
                      "}\n",
     1, {4096}, {16}, 0, "t", 4},
    /* found by a hostile review (each was called safe before) */
    {"stale guard", K1("local t: f32[8];",
                       "  let i = local_id(0);\n"
                       "  const ok = i < 8;\n"
                       "  i = i + 4;\n"
                       "  if ok { t[i] = 1.0f32; }\n"),
     1, {4096}, {8}, 0, "t", 6},
    {"control: a count", K1("local t: f32[4];",
                            "  let steps: i64 = 0;\n"
                            "  for (let s: i64 = 1; s < local_size(0); "
                            "s *= 2) { steps += 1; }\n"
                            "  t[steps] = 1.0f32;\n"),
     1, {4096}, {64}, 0, "t", 5},
    {"control: a ternary", K1("local t: f32[8];",
                              "  t[local_id(0) < 4 ? 0 : 100] = 1.0f32;\n"),
     1, {4096}, {8}, 0, "t", 3},
    {"control: a branch", K1("local t: f32[8];",
                             "  let slot: i64 = 0;\n"
                             "  if local_id(0) >= 4 { slot = 100; }\n"
                             "  t[slot] = 1.0f32;\n"),
     1, {4096}, {8}, 0, "t", 5},
    {"u64 wraps through a cast", K1("local t: f32[8];",
                                    "  let d = u64(local_id(0) - 1);\n"
                                    "  if i64(d) < 8 { t[i64(d)] = 1.0f32; }\n"),
     1, {4096}, {4}, 0, "t", 4},
    {"u64 hash", K1("local t: f32[8];",
                    "  let h = u64(local_id(0)) * 0x9E3779B97F4A7C15u64;\n"
                    "  t[h >> 60] = 1.0f32;\n"),
     1, {4096}, {4}, 0, "t", 4},
    {"infinity is not a number",
     K1("local t: f32[1];",
        "  t[local_id(0) + 4611686018427387904 - 4611686018427387904] = "
        "1.0f32;\n"),
     1, {4096}, {4}, 0, "t", 3},
    {"masked shift count", K1("local t: f32[2];",
                              "  t[i64(i32(local_id(0)) >> 32)] = 1.0f32;\n"),
     1, {4096}, {4}, 0, "t", 3},
    {"calls five deep", "fn g5() { let a: f32[4]; a[local_id(0)] = 1.0f32; }\n"
                        "fn g4() { g5(); }\nfn g3() { g4(); }\n"
                        "fn g2() { g3(); }\nfn g1() { g2(); }\n"
                        "kernel k(x: global f32[]) ndrange(1) { g1(); }\n",
     1, {4096}, {64}, 0, "?", 2},
    /* collectives: what they return depends on how many work-items the
     * group has, and on which of them hands its value on */
    {"scan as an index, 31 fit", K1("local t: f32[32];",
                                    "  t[group_scan_inclusive_add(1i64)] = "
                                    "1.0f32;\n"),
     1, {1024}, {31}, 1, NULL, 0},
    {"scan as an index, 32 do not", K1("local t: f32[32];",
                                       "  t[group_scan_inclusive_add(1i64)] = "
                                       "1.0f32;\n"),
     1, {1024}, {32}, 0, "t", 3},
    {"exclusive scan, 32 fit", K1("local t: f32[32];",
                                  "  t[group_scan_exclusive_add(1i64)] = "
                                  "1.0f32;\n"),
     1, {1024}, {32}, 1, NULL, 0},
    {"exclusive scan, 33 do not", K1("local t: f32[32];",
                                     "  t[group_scan_exclusive_add(1i64)] = "
                                     "1.0f32;\n"),
     1, {1024}, {33}, 0, "t", 3},
    {"reduction of a sum", K1("local t: f32[64];",
                              "  t[group_reduce_add(2i64)] = 1.0f32;\n"),
     1, {1024}, {32}, 0, "t", 3},
    {"reduction, then a guard", K1("local t: f32[64];",
                                   "  let s = group_reduce_add(2i64);\n"
                                   "  if s < 64 { t[s] = 1.0f32; }\n"),
     1, {1024}, {64}, 1, NULL, 0},
    {"broadcast of the last local id", K1("local t: f32[16];",
                                          "  t[group_broadcast(local_id(0), "
                                          "local_size(0) - 1) + 1] = 1.0f32;\n"),
     1, {1024}, {16}, 0, "t", 3},
    /* a broadcast or shuffle is not trusted (another work-item's value,
     * or what a target leaves for an id past the group) */
    {"broadcast, not trusted at 1", K1("local t: f32[16];",
                                       "  t[group_broadcast(local_id(0), "
                                       "local_size(0) - 1) + 1] = 1.0f32;\n"),
     1, {1024}, {1}, 0, "t", 3},
    {"broadcast after a guard", K1("local t: f32[8];",
                                   "  if local_id(0) >= 4 { return; }\n"
                                   "  t[group_broadcast(local_id(0), 6)] = "
                                   "1.0f32;\n"),
     1, {1024}, {8}, 0, "t", 4},
    {"a global value handed on", K1("local t: f32[16];",
                                    "  t[sub_group_shuffle(global_id(0), 0)] "
                                    "= 1.0f32;\n"),
     1, {1024}, {8}, 0, "t", 3},
    {"max of local ids", K1("local t: f32[8];",
                            "  t[group_reduce_max(local_id(0)) + 1] = "
                            "1.0f32;\n"),
     1, {1024}, {8}, 0, "t", 3},
    {"or of small values", K1("local t: f32[8];",
                              "  t[group_reduce_or(local_id(0) & 3)] = "
                              "1.0f32;\n"),
     1, {1024}, {256}, 1, NULL, 0},
    {"a product", K1("local t: f32[8];",
                     "  t[group_reduce_mul(1i64)] = 1.0f32;\n"),
     1, {1024}, {1}, 0, "t", 3},
    {"a float sum as an index", K1("local t: f32[8];",
                                   "  t[i64(group_reduce_add(0.5f32))] = "
                                   "1.0f32;\n"),
     1, {1024}, {4}, 0, "t", 3},
    {"a function returns a collective",
     "fn g() -> i64 { return group_reduce_add(1i64); }\n"
     "kernel k(x: global f32[]) ndrange(1) {\n"
     "  local t: f32[8];\n"
     "  t[g()] = 1.0f32;\n"
     "}\n",
     1, {1024}, {8}, 0, "t", 4},
    /* what the analysis cannot see through is refused, not trusted */
    {"index from a local array", K1("local t: f32[16];\n  local s: i64[16];",
                                    "  s[0] = local_id(0);\n"
                                    "  t[s[0]] = 1.0f32;\n"),
     1, {4096}, {1}, 0, "t", 5},
    {"relational", K1("local t: f32[8];",
                      "  t[global_id(0) - group_id(0) * local_size(0)] = "
                      "1.0f32;\n"),
     1, {4096}, {1}, 0, "t", 3},
};

static xpj_module *spec_k(const char *src, xpj_module **parsed) {
  xpj_module *m = NULL, *s = NULL;
  char *diag = NULL;
  if (parse_src(src, &m, &diag) != XPJ_OK)
    fail_msg("parse: %s", diag);
  free(diag);
  xpj_spec sp = {0, NULL, NULL, 0, 0, NULL, NULL};
  assert_int_equal(xpj_specialize(m, "k", &sp, &s, NULL), XPJ_OK);
  *parsed = m;
  return s;
}

/* The fit of kernel k of src, 1-D, for one global and local size. */
static xpj_fit fit_1d(const char *src, uint64_t g, uint64_t l) {
  xpj_module *m, *s = spec_k(src, &m);
  xpj_fit fit;
  assert_int_equal(
      xpj_func_local_fit(xpj_module_find(s, "k"), 1, &g, &l, &fit), XPJ_OK);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
  return fit;
}

static void test_cases(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const fit_case *c = &cases[i];
    xpj_module *m, *s = spec_k(c->src, &m);
    xpj_fit fit;
    assert_int_equal(xpj_func_local_fit(xpj_module_find(s, "k"), c->ndim,
                                        c->global, c->local, &fit),
                     XPJ_OK);
    if (fit.fits != c->fits)
      fail_msg("%s: fits = %d, want %d (%s[%u] in %lld..%lld, extent %lld, "
               "line %u)", c->name, fit.fits, c->fits, fit.array, fit.index,
               (long long)fit.lo, (long long)fit.hi, (long long)fit.extent,
               fit.loc.line);
    if (!c->fits && (strcmp(fit.array, c->array) || fit.loc.line != c->line))
      fail_msg("%s: blames %s at line %u, want %s at line %u", c->name,
               fit.array, fit.loc.line, c->array, c->line);
    if (!c->fits && fit.lo >= 0 && fit.hi < fit.extent)
      fail_msg("%s: the reported range %lld..%lld is within %lld", c->name,
               (long long)fit.lo, (long long)fit.hi, (long long)fit.extent);
    assert_true(fit.shape_indices > 0);
    xpj_module_destroy(s);
    xpj_module_destroy(m);
  }
}

/* Indices that no local size moves are not judged: an index read from a
 * global array, a parameter, a constant. */
static void test_not_judged(void **state) {
  (void)state;
  xpj_fit fit = fit_1d(K1("local t: f32[16];",
                          "  t[idx[global_id(0)]] = 1.0f32;\n"
                          "  t[n] = 2.0f32;\n"
                          "  t[3] = 3.0f32;\n"
                          "  t[global_id(0)] = 4.0f32;\n"),
                       4096, 4096);
  assert_int_equal(fit.shape_indices, 0);
  assert_int_equal(fit.fits, 1);
}

static void test_bad_arguments(void **state) {
  (void)state;
  xpj_module *m, *s = spec_k(REDUCE, &m);
  const xpj_func *f = xpj_module_find(s, "k");
  uint64_t g[4] = {64, 1, 1, 1}, l[4] = {0, 0, 0, 0};
  xpj_fit fit;
  assert_int_equal(xpj_func_local_fit(NULL, 1, g, l, &fit), XPJ_ERR_INVALID);
  assert_int_equal(xpj_func_local_fit(f, 1, NULL, l, &fit), XPJ_ERR_INVALID);
  assert_int_equal(xpj_func_local_fit(f, 1, g, NULL, &fit), XPJ_ERR_INVALID);
  assert_int_equal(xpj_func_local_fit(f, 1, g, l, NULL), XPJ_ERR_INVALID);
  assert_int_equal(xpj_func_local_fit(f, 4, g, l, &fit), XPJ_ERR_INVALID);
  /* local 0 counts as 1, huge sizes saturate */
  assert_int_equal(xpj_func_local_fit(f, 1, g, l, &fit), XPJ_OK);
  assert_int_equal(fit.fits, 1);
  g[0] = l[0] = UINT64_MAX;
  assert_int_equal(xpj_func_local_fit(f, 1, g, l, &fit), XPJ_OK);
  assert_int_equal(fit.fits, 0);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

/* Blocks nested as deep as the parser allows, under a guard each. */
static void test_deep_nesting(void **state) {
  (void)state;
  size_t cap = 64 * 1024, n = 0;
  char *src = malloc(cap);
  assert_non_null(src);
  n += (size_t)snprintf(src + n, cap - n,
                        "kernel k(x: global f32[]) ndrange(1) {\n"
                        "  local t: f32[8];\n  let lid = local_id(0);\n");
  for (int i = 0; i < 150; i++)
    n += (size_t)snprintf(src + n, cap - n, "if lid < %d {\n", 1000 - i);
  n += (size_t)snprintf(src + n, cap - n, "if lid < 8 { t[lid] = 1.0f32; }\n");
  for (int i = 0; i < 150; i++)
    n += (size_t)snprintf(src + n, cap - n, "}\n");
  snprintf(src + n, cap - n, "}\n");
  xpj_fit fit = fit_1d(src, 4096, 4096);
  assert_int_equal(fit.fits, 1);
  assert_int_equal(fit.shape_indices, 1);
  free(src);
}

/* A call tree of 2^26 calls (each function calls the next twice): the
 * analysis stops after a bounded number of callee analyses, refusing to
 * call the index safe, instead of running for hours. */
static void test_call_tree(void **state) {
  (void)state;
  size_t cap = 8192, n = 0;
  char *src = malloc(cap);
  assert_non_null(src);
  n += (size_t)snprintf(src + n, cap - n,
                        "fn g26(a: i64) -> i64 { return a + 1; }\n");
  for (int i = 25; i >= 0; i--)
    n += (size_t)snprintf(src + n, cap - n,
                          "fn g%d(a: i64) -> i64 { return g%d(a) + "
                          "g%d(a + 1); }\n", i, i + 1, i + 1);
  snprintf(src + n, cap - n,
           "kernel k(x: global f32[]) ndrange(1) {\n"
           "  local t: f32[8];\n"
           "  t[local_id(0) + g0(0)] = 1.0f32;\n"
           "}\n");
  xpj_fit fit = fit_1d(src, 4096, 4);
  assert_int_equal(fit.fits, 0); /* g0's result is not followed */
  free(src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cases),
      cmocka_unit_test(test_not_judged),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_deep_nesting),
      cmocka_unit_test(test_call_tree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
