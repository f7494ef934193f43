/*
 * test_cpu_exec.c - runs CPU code from the compiler against C references:
 * range kernels over strided views, and nd-range kernels whose barriers sit
 * in loops (the work-item loop transformation), with local memory and
 * local/global atomics, at sizes that are not multiples of the group size.
 * The entry point is called directly, as the runtime will (docs/abi.md).
 * The full conformance suite through the public runtime API is separate.
 */
#include "cgutil.h"

#include <math.h>

typedef struct kargs {
  void *ptrs[256];
  int64_t vals[256];
  unsigned n;
} kargs;

static void add_i64(kargs *a, int64_t v) {
  a->vals[a->n] = v;
  a->ptrs[a->n] = &a->vals[a->n];
  a->n++;
}
static void add_ptr(kargs *a, void *p) {
  memcpy(&a->vals[a->n], &p, sizeof p);
  a->ptrs[a->n] = &a->vals[a->n];
  a->n++;
}
static void add_f32(kargs *a, float v) {
  memcpy(&a->vals[a->n], &v, sizeof v);
  a->ptrs[a->n] = &a->vals[a->n];
  a->n++;
}
/* A view: pointer, offset, shape, strides (elements). */
static void add_view(kargs *a, void *p, int64_t off, int rank,
                     const int64_t *shape, const int64_t *strides) {
  add_ptr(a, p);
  add_i64(a, off);
  for (int d = 0; d < rank; d++)
    add_i64(a, shape[d]);
  for (int d = 0; d < rank; d++)
    add_i64(a, strides[d]);
}
static void add_vec(kargs *a, void *p, int64_t n) {
  int64_t one = 1;
  add_view(a, p, 0, 1, &n, &one);
}

typedef struct compiled {
  xpj_module *m, *s;
  xpj_result *r;
  LLVMOrcLLJITRef jit;
  cpu_entry fn;
} compiled;

static void build(compiled *c, const char *file, const char *kernel,
                  xpj_scalar t, unsigned ndim) {
  c->m = load_example(file);
  c->s = spec_kernel(c->m, kernel, t, ndim);
  assert_non_null(c->s);
  c->r = compile_for(c->s, kernel, "cpu", XPJ_EMIT_BIN);
  size_t len;
  const uint8_t *d = xpj_result_data(c->r, &len);
  c->fn = (cpu_entry)jit_load(d, len, xpj_result_entry(c->r), &c->jit);
}

static void release(compiled *c) {
  LLVMOrcDisposeLLJIT(c->jit);
  xpj_result_destroy(c->r);
  xpj_module_destroy(c->s);
  xpj_module_destroy(c->m);
}

/* A range launch, split into three unequal chunks like a thread pool. */
static void run_range(compiled *c, kargs *a, int64_t g0, int64_t g1,
                      int64_t g2) {
  int64_t launch[9] = {g0, g1, g2, 1, 1, 1, 1, 1, 1};
  int64_t total = g0 * g1 * g2, cut1 = total / 3, cut2 = total - total / 5;
  /* range kernels with interchanged loops use scratch (docs/abi.md) */
  uint64_t sb = xpj_result_scratch_bytes(c->r);
  void *sc = sb ? malloc(sb * XPJ_CPU_SCRATCH_STRIDE) : NULL;
  assert_true(!sb || sc);
  c->fn(a->ptrs, launch, NULL, sc, 0, cut1);
  c->fn(a->ptrs, launch, NULL, sc, cut1, cut2);
  c->fn(a->ptrs, launch, NULL, sc, cut2, total);
  free(sc);
}

/* An nd-range launch: groups run in two chunks with their own memory. */
static void run_nd(compiled *c, kargs *a, const int64_t groups[3],
                   const int64_t local[3]) {
  int64_t launch[9];
  int64_t wgs = local[0] * local[1] * local[2];
  for (int d = 0; d < 3; d++) {
    launch[d] = groups[d] * local[d];
    launch[3 + d] = local[d];
    launch[6 + d] = groups[d];
  }
  int64_t ng = groups[0] * groups[1] * groups[2];
  uint64_t lb = xpj_result_local_bytes(c->r), sb = xpj_result_scratch_bytes(c->r);
  /* scratch: per-item arrays at constant offsets (docs/abi.md) */
  assert_true(wgs <= XPJ_CPU_GROUP_MAX);
  void *lm = malloc(lb ? lb : 1), *sc = malloc(sb ? sb * XPJ_CPU_SCRATCH_STRIDE : 1);
  assert_non_null(lm);
  assert_non_null(sc);
  memset(lm, 0xa5, lb ? lb : 1); /* local memory starts as garbage */
  c->fn(a->ptrs, launch, lm, sc, 0, ng / 2);
  c->fn(a->ptrs, launch, lm, sc, ng / 2, ng);
  free(lm);
  free(sc);
}

static uint32_t rng = 12345;
static uint32_t rnd(void) {
  rng = rng * 1664525u + 1013904223u;
  return rng >> 8;
}

/* y = a*x + y on 2-D views, x transposed (non-contiguous). */
static void test_axpy_strided(void **state) {
  (void)state;
  compiled c;
  build(&c, "axpy.xpk", "axpy", XPJ_F32, 2);
  enum { R = 13, C = 7 };
  float xs[C][R], y[R][C], want[R][C];
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) {
      xs[j][i] = (float)(rnd() % 1000) / 10.0f;
      y[i][j] = (float)(rnd() % 1000) / 7.0f;
      want[i][j] = 2.5f * xs[j][i] + y[i][j];
    }
  kargs a = {0};
  add_f32(&a, 2.5f);
  int64_t shape[2] = {R, C}, xstr[2] = {1, R}, ystr[2] = {C, 1};
  add_view(&a, xs, 0, 2, shape, xstr);
  add_view(&a, y, 0, 2, shape, ystr);
  run_range(&c, &a, 10, 1, 1); /* fewer work-items than elements */
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++)
      assert_float_equal(y[i][j], want[i][j], 1e-4);
  release(&c);
}

/* Barrier inside a loop, local memory, one atomic per group. */
static void test_block_sum(void **state) {
  (void)state;
  compiled c;
  build(&c, "reduce.xpk", "block_sum", XPJ_I32, 0);
  enum { N = 10007 };
  int32_t *x = malloc(N * sizeof *x), total = 0, want = 0;
  for (int i = 0; i < N; i++) {
    x[i] = (int32_t)(rnd() % 2001) - 1000;
    want += x[i];
  }
  for (int64_t lsz = 1; lsz <= 256; lsz *= 4) {
    total = 0;
    kargs a = {0};
    add_vec(&a, x, N);
    add_vec(&a, &total, 1);
    int64_t groups[3] = {7, 1, 1}, local[3] = {lsz, 1, 1};
    run_nd(&c, &a, groups, local);
    assert_int_equal(total, want);
  }
  free(x);
  release(&c);
}

/* Local atomics between barriers; local memory is not zeroed for us. */
static void test_histogram_local(void **state) {
  (void)state;
  compiled c;
  build(&c, "histogram.xpk", "histogram_local", XPJ_VOID, 0);
  enum { N = 5003 };
  uint8_t *d = malloc(N);
  uint32_t hist[256] = {0}, want[256] = {0};
  for (int i = 0; i < N; i++) {
    d[i] = (uint8_t)(rnd() % 97 + (i & 1 ? 100 : 0));
    want[d[i]]++;
  }
  kargs a = {0};
  add_vec(&a, d, N);
  add_vec(&a, hist, 256);
  int64_t groups[3] = {5, 1, 1}, local[3] = {48, 1, 1};
  run_nd(&c, &a, groups, local);
  assert_memory_equal(hist, want, sizeof want);
  free(d);
  release(&c);
}

/* Tiled matmul: 2-D groups, two barriers per tile, ragged edges. */
static void test_matmul_tiled(void **state) {
  (void)state;
  compiled c;
  build(&c, "matmul.xpk", "matmul_tiled", XPJ_F64, 0);
  enum { M = 37, K = 41, N = 29 };
  double *A = malloc(M * K * sizeof *A), *B = malloc(K * N * sizeof *B),
         *C = calloc(M * N, sizeof *C);
  for (int i = 0; i < M * K; i++)
    A[i] = (double)(rnd() % 100) / 9.0;
  for (int i = 0; i < K * N; i++)
    B[i] = (double)(rnd() % 100) / 11.0;
  kargs a = {0};
  int64_t sa[2] = {M, K}, ta[2] = {K, 1}, sb[2] = {K, N}, tb[2] = {N, 1},
          sc[2] = {M, N}, tc[2] = {N, 1};
  add_view(&a, A, 0, 2, sa, ta);
  add_view(&a, B, 0, 2, sb, tb);
  add_view(&a, C, 0, 2, sc, tc);
  /* the entry point takes the launch in hardware order: the fast
   * dimension (logical 1, the columns) first */
  int64_t groups[3] = {2, 3, 1}, local[3] = {16, 16, 1};
  run_nd(&c, &a, groups, local);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int k = 0; k < K; k++)
        s += A[i * K + k] * B[k * N + j];
      assert_float_equal(C[i * N + j], s, 1e-9 * (1 + fabs(s)));
    }
  free(A);
  free(B);
  free(C);
  release(&c);
}

/* Work-efficient scan: barriers in two loops with changing strides. */
static void test_scan_block(void **state) {
  (void)state;
  compiled c;
  build(&c, "scan.xpk", "scan_block", XPJ_I32, 0);
  enum { N = 1300, SCAN_N = 512 };
  int32_t x[N], y[N], sums[3];
  for (int i = 0; i < N; i++)
    x[i] = (int32_t)(rnd() % 100) - 30;
  kargs a = {0};
  add_vec(&a, x, N);
  add_vec(&a, y, N);
  add_vec(&a, sums, 3);
  int64_t groups[3] = {3, 1, 1}, local[3] = {SCAN_N / 2, 1, 1};
  run_nd(&c, &a, groups, local);
  for (int b = 0; b < 3; b++) {
    int32_t acc = 0;
    for (int i = b * SCAN_N; i < (b + 1) * SCAN_N && i < N; i++) {
      assert_int_equal(y[i], acc);
      acc += x[i];
    }
    assert_int_equal(sums[b], acc);
  }
  release(&c);
}

/* Bitonic sort in local memory: nested loops with a barrier inside. */
static void test_bitonic_block(void **state) {
  (void)state;
  compiled c;
  build(&c, "sort.xpk", "bitonic_sort_block", XPJ_I32, 0);
  enum { B = 512, NB = 4 };
  int32_t x[B * NB], orig[B * NB];
  for (int i = 0; i < B * NB; i++)
    orig[i] = x[i] = (int32_t)(rnd() % 100000) - 50000;
  kargs a = {0};
  add_vec(&a, x, B * NB);
  int64_t groups[3] = {NB, 1, 1}, local[3] = {B / 2, 1, 1};
  run_nd(&c, &a, groups, local);
  for (int b = 0; b < NB; b++) {
    int64_t s1 = 0, s2 = 0;
    for (int i = 0; i < B; i++) {
      s1 += orig[b * B + i];
      s2 += x[b * B + i];
      if (i)
        assert_true(b % 2 == 0 ? x[b * B + i - 1] <= x[b * B + i]
                               : x[b * B + i - 1] >= x[b * B + i]);
    }
    assert_int_equal(s1, s2);
  }
  release(&c);
}

/* A value-returning device function with barriers, uniform early return
 * and a work-item-dependent return before a barrier. */
static void test_wg_control(void **state) {
  (void)state;
  const char *src2 =
      "kernel k(x: global const i32[], out: global i32[], n: i64) ndrange(1) {\n"
      "    local t: i32[64];\n"
      "    let lid = local_id(0);\n"
      "    if group_id(0) >= n { return; }\n"
      "    t[lid] = x[global_id(0)];\n"
      "    barrier(local);\n"
      "    let s = 0i32;\n"
      "    for (let k: i64 = 0; k < local_size(0); k++) {\n"
      "        if k == 5 { continue; }\n"
      "        s += t[k];\n"
      "        if k >= 40 { break; }\n"
      "        barrier();\n"
      "    }\n"
      "    if lid >= 30 { return; }\n"
      "    barrier();\n"
      "    out[global_id(0)] = s + i32(lid);\n"
      "}\n";
  xpj_module *m = NULL;
  char *diag = NULL;
  xpj_status st = parse_src(src2, &m, &diag);
  if (st != XPJ_OK)
    fprintf(stderr, "%s", diag);
  free(diag);
  assert_int_equal(st, XPJ_OK);
  compiled c = {0};
  c.m = m;
  c.s = spec_kernel(m, "k", XPJ_VOID, 0);
  assert_non_null(c.s);
  c.r = compile_for(c.s, "k", "cpu", XPJ_EMIT_BIN);
  size_t len;
  const uint8_t *d = xpj_result_data(c.r, &len);
  c.fn = (cpu_entry)jit_load(d, len, xpj_result_entry(c.r), &c.jit);
  enum { L = 48, G = 4 };
  int32_t x[L * G], out[L * G];
  for (int i = 0; i < L * G; i++) {
    x[i] = (int32_t)(rnd() % 50);
    out[i] = -1;
  }
  kargs a = {0};
  add_vec(&a, x, L * G);
  add_vec(&a, out, L * G);
  add_i64(&a, 3); /* group 3 returns at once */
  int64_t groups[3] = {G, 1, 1}, local[3] = {L, 1, 1};
  run_nd(&c, &a, groups, local);
  for (int g = 0; g < G; g++) {
    int32_t s = 0;
    for (int k = 0; k < L; k++) {
      if (k == 5)
        continue;
      s += x[g * L + k];
      if (k >= 40)
        break;
    }
    for (int l = 0; l < L; l++) {
      int32_t want = (g >= 3 || l >= 30) ? -1 : s + l;
      assert_int_equal(out[g * L + l], want);
    }
  }
  release(&c);
}

/* Value ifs (&&, ||, ?:) that reach a barrier, run at work-group level
 * (docs/abi.md, "Barriers on the CPU"), with work-items 0-2 of each
 * group returned first: their slots are never written, so the values the
 * group's own code reads (a while condition, an if's) must come from the
 * work-items still running (work-item 0's slot read garbage). A device
 * function that reaches barriers yields a value if and returns one. And
 * the one refusal left: a work-item-dependent return in such a function,
 * named by file, line and column. */
static void test_wg_value_if(void **state) {
  (void)state;
  const char *src =
      "fn bsum(v: i32) -> i32 {\n"
      "    barrier(local);\n"
      "    let s = group_reduce_add(v);\n"
      "    let big = s > 100 && group_reduce_max(v) > 20;\n"
      "    return big ? s : -s;\n"
      "}\n"
      "fn twice(v: i32, f: i32) -> i32 {\n"
      "    return f > 1 ? bsum(v) * 2 : group_reduce_min(v);\n"
      "}\n"
      "kernel k(x: global const i32[], out: global i32[,], f: i32) ndrange(1) {\n"
      "    let i = global_id(0);\n"
      "    let v = x[i];\n"
      "    if local_id(0) < 3 { return; }\n"
      "    let m = 0i32;\n"
      "    let n = 0i32;\n"
      "    while m < f && group_reduce_max(v) + m < 33 {\n"
      "        m += 1;\n"
      "        n += group_scan_exclusive_add(m);\n"
      "    }\n"
      "    let w = 0i32;\n"
      "    if f > 0 || group_reduce_add(1) > 1000 {\n"
      "        barrier(local);\n"
      "        w = 1;\n"
      "    }\n"
      "    out[0, i] = n;\n"
      "    out[1, i] = w;\n"
      "    out[2, i] = f > 0 ? twice(v, f) : 7;\n"
      "    out[3, i] = f == 0 || group_reduce_min(v) > 2 ? 1 : 0;\n"
      "}\n";
  xpj_module *m = NULL;
  char *diag = NULL;
  xpj_status st = parse_src(src, &m, &diag);
  if (st != XPJ_OK)
    fprintf(stderr, "%s", diag);
  free(diag);
  assert_int_equal(st, XPJ_OK);
  compiled c = {0};
  c.m = m;
  c.s = spec_kernel(m, "k", XPJ_VOID, 0);
  assert_non_null(c.s);
  c.r = compile_for(c.s, "k", "cpu", XPJ_EMIT_BIN);
  size_t len;
  const uint8_t *d = xpj_result_data(c.r, &len);
  c.fn = (cpu_entry)jit_load(d, len, xpj_result_entry(c.r), &c.jit);
  enum { L = 40, G = 3 };
  for (int32_t f = 0; f < 4; f++) {
    int32_t x[L * G], out[4][L * G];
    for (int i = 0; i < L * G; i++)
      x[i] = (int32_t)(rnd() % (i / L == 0 ? 8 : i / L == 1 ? 32 : 36));
    memset(out, 0xff, sizeof out);
    kargs a = {0};
    int64_t shape[2] = {4, L * G}, strides[2] = {L * G, 1};
    add_vec(&a, x, L * G);
    add_view(&a, out, 0, 2, shape, strides);
    add_i64(&a, f);
    int64_t groups[3] = {G, 1, 1}, local[3] = {L, 1, 1};
    run_nd(&c, &a, groups, local);
    for (int g = 0; g < G; g++) {
      /* over the work-items that have not returned: 3 .. L-1 */
      int32_t sum = 0, mx = INT32_MIN, mn = INT32_MAX;
      for (int l = 3; l < L; l++) {
        int32_t v = x[g * L + l];
        sum += v;
        mx = v > mx ? v : mx;
        mn = v < mn ? v : mn;
      }
      int32_t trips = 33 - mx < f ? 33 - mx : f;
      trips = trips < 0 ? 0 : trips;
      for (int l = 0; l < L; l++) {
        int i = g * L + l;
        int32_t want[4] = {-1, -1, -1, -1};
        if (l >= 3) {
          int32_t b = sum > 100 && mx > 20 ? sum : -sum;
          want[0] = (l - 3) * trips * (trips + 1) / 2;
          want[1] = f > 0 ? 1 : 0;
          want[2] = f == 0 ? 7 : f == 1 ? mn : 2 * b;
          want[3] = f == 0 || mn > 2;
        }
        for (int q = 0; q < 4; q++)
          if (out[q][i] != want[q])
            fail_msg("f %d group %d work-item %d: out[%d] = %d, want %d", f,
                     g, l, q, out[q][i], want[q]);
      }
    }
  }
  release(&c);
  const char *early =
      "fn early() -> i32 {\n"
      "    if local_id(0) == 0 { return 5; }\n"
      "    barrier(local);\n"
      "    return 6;\n"
      "}\n"
      "kernel e(o: global i32[]) ndrange(1) {\n"
      "    o[global_id(0)] = early();\n"
      "}\n";
  assert_int_equal(parse_src(early, &m, NULL), XPJ_OK);
  xpj_module *sp = spec_kernel(m, "e", XPJ_VOID, 0);
  xpj_target tg;
  assert_int_equal(xpj_target_parse("cpu", &tg, NULL, 0), XPJ_OK);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.isolation = XPJ_ISOLATE_NONE;
  xpj_result *r = NULL;
  assert_int_equal(xpj_compile(sp, "e", &tg, &o, XPJ_EMIT_BIN, &r),
                   XPJ_ERR_UNSUPPORTED);
  const char *log = xpj_result_log(r);
  if (!strstr(log, "t.xpk:2:27: a 'return' inside an if") ||
      !strstr(log, "device function 'early'"))
    fail_msg("the refusal: %s", log);
  xpj_result_destroy(r);
  xpj_module_destroy(sp);
  xpj_module_destroy(m);
}

/* Kernels named like the functions their code calls: libm's expf, sinf,
 * powf and sqrtf, and memset and memcpy, which LLVM calls to clear and copy
 * private arrays; __nv_expf and _Z13get_global_idj are libdevice's and
 * OpenCL's (test_codegen.c compiles them for PTX and SPIR-V). The entry
 * point has a reserved name (docs/abi.md), so these calls reach the C
 * library; named like the kernel, they called the kernel itself. */
static const char *named_src =
    "kernel expf(x: global const f32[], y: global f32[]) range {\n"
    "    let i = global_id(0);\n"
    "    y[i] = exp(x[i]);\n"
    "}\n"
    "kernel sinf(x: global const f32[], y: global f32[]) range {\n"
    "    let i = global_id(0);\n"
    "    y[i] = sin(x[i]);\n"
    "}\n"
    "kernel powf(x: global const f32[], y: global f32[]) range {\n"
    "    let i = global_id(0);\n"
    "    y[i] = pow(x[i], 1.5f32);\n"
    "}\n"
    "kernel sqrtf(x: global const f32[], y: global f32[]) range {\n"
    "    let i = global_id(0);\n"
    "    y[i] = sqrt(x[i]);\n"
    "}\n"
    "kernel __nv_expf(x: global const f32[], y: global f32[]) range {\n"
    "    let i = global_id(0);\n"
    "    y[i] = exp(x[i]);\n"
    "}\n"
    "kernel _Z13get_global_idj(x: global const f32[], y: global f32[])\n"
    "    range {\n"
    "    let i = global_id(0);\n"
    "    y[i] = exp(x[i]);\n"
    "}\n"
    /* a zeroed private array of 4 KiB: a call to memset */
    "kernel memset(x: global const f32[], y: global f32[]) range {\n"
    "    let i = global_id(0);\n"
    "    let a: f32[1024];\n"
    "    a[i % 1024] = x[i];\n"
    "    y[i] = a[i % 1024] + a[(i + 1) % 1024];\n"
    "}\n"
    /* and a copy of one: a call to memcpy */
    "kernel memcpy(x: global const f32[], y: global f32[]) range {\n"
    "    let i = global_id(0);\n"
    "    let n = shape(x, 0);\n"
    "    let a: f32[1024];\n"
    "    let b: f32[1024];\n"
    "    for (let k: i64 = 0; k < 1024; k++) { a[k] = x[(i + k) % n]; }\n"
    "    for (let k: i64 = 0; k < 1024; k++) { b[k] = a[k]; }\n"
    "    for (let k: i64 = 0; k < 1024; k++) { a[k] = a[k] + 1.0f32; }\n"
    "    y[i] = a[i % 1024] + b[(i * 7) % 1024];\n"
    "}\n";

static float named_ref(const char *kernel, const float *x, int64_t n,
                       int64_t i) {
  if (!strcmp(kernel, "sinf"))
    return sinf(x[i]);
  if (!strcmp(kernel, "powf"))
    return powf(x[i], 1.5f);
  if (!strcmp(kernel, "sqrtf"))
    return sqrtf(x[i]);
  if (!strcmp(kernel, "memset"))
    return x[i];
  if (!strcmp(kernel, "memcpy"))
    return (x[(i + i % 1024) % n] + 1.0f) + x[(i + (i * 7) % 1024) % n];
  return expf(x[i]);
}

static void test_libc_names(void **state) {
  (void)state;
  static const char *const names[] = {"expf",      "sinf",
                                      "powf",      "sqrtf",
                                      "__nv_expf", "_Z13get_global_idj",
                                      "memset",    "memcpy"};
  xpj_module *m = NULL;
  assert_int_equal(parse_src(named_src, &m, NULL), XPJ_OK);
  enum { N = 3001 };
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
  assert_non_null(x);
  assert_non_null(y);
  for (int i = 0; i < N; i++)
    x[i] = 0.05f + (float)(rnd() % 2000) / 1000.0f;
  for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
    compiled c = {0};
    c.s = spec_kernel(m, names[k], XPJ_VOID, 0);
    assert_non_null(c.s);
    c.r = compile_for(c.s, names[k], "cpu", XPJ_EMIT_BIN);
    char want[64];
    snprintf(want, sizeof want, "__xpj_k_%s", names[k]);
    assert_string_equal(xpj_result_entry(c.r), want);
    size_t len;
    const uint8_t *d = xpj_result_data(c.r, &len);
    c.fn = (cpu_entry)jit_load(d, len, xpj_result_entry(c.r), &c.jit);
    assert_non_null(c.fn);
    for (int i = 0; i < N; i++)
      y[i] = -1.0f;
    kargs a = {0};
    add_vec(&a, x, N);
    add_vec(&a, y, N);
    run_range(&c, &a, N, 1, 1);
    for (int64_t i = 0; i < N; i++) {
      float r = named_ref(names[k], x, N, i);
      if (fabsf(y[i] - r) > 1e-6f * fabsf(r))
        fail_msg("kernel %s: y[%lld] = %g, want %g", names[k], (long long)i,
                 (double)y[i], (double)r);
    }
    release(&c);
  }
  free(x);
  free(y);
  xpj_module_destroy(m);
}

/* A loop too long for LLVM's vectoriser to plan in reasonable time runs
 * unvectorised (target_cpu.c), with the right results: 1000 dependent
 * statements per work-item. */
static void test_long_chain(void **state) {
  (void)state;
  enum { STMTS = 1000, N = 517 };
  size_t cap = 200 + 32 * STMTS, k = 0;
  char *src = malloc(cap);
  assert_non_null(src);
  k += (size_t)snprintf(src + k, cap - k,
                        "kernel chain(x: global f32[], c: f32) range {\n"
                        "    let i = global_id(0);\n    let a = x[i];\n");
  for (int j = 0; j < STMTS; j++)
    k += (size_t)snprintf(src + k, cap - k, "    a = a * 1.0001f32 + c;\n");
  snprintf(src + k, cap - k, "    x[i] = a;\n}\n");
  compiled c = {0};
  assert_int_equal(parse_src(src, &c.m, NULL), XPJ_OK);
  free(src);
  c.s = spec_kernel(c.m, "chain", XPJ_VOID, 0);
  assert_non_null(c.s);
  c.r = compile_for(c.s, "chain", "cpu", XPJ_EMIT_BIN);
  size_t len;
  const uint8_t *d = xpj_result_data(c.r, &len);
  c.fn = (cpu_entry)jit_load(d, len, xpj_result_entry(c.r), &c.jit);
  float x[N], want[N];
  for (int i = 0; i < N; i++) {
    x[i] = want[i] = (float)(rnd() % 1000) / 100.0f;
    for (int j = 0; j < STMTS; j++)
      want[i] = want[i] * 1.0001f + 0.25f;
  }
  kargs a = {0};
  add_vec(&a, x, N);
  add_f32(&a, 0.25f);
  run_range(&c, &a, N, 1, 1);
  for (int i = 0; i < N; i++)
    assert_float_equal(x[i], want[i], 1e-5 * fabsf(want[i]));
  release(&c);
}

/* Kernels that require a local size (`local(...)`): their values live
 * across barriers are arrays in the entry point's frame, not in the
 * runtime's scratch (codegen.c scratch_alloc), and groups whose rows are
 * narrower than 16 run in a unit-stride version and a strided one
 * (lower_versions). Both versions, against a C reference: contiguous
 * views, then x transposed and y every other column. A value, a private
 * array and a group-uniform sum cross the barrier. The same kernel
 * without the required size keeps its values in scratch. */
static const char *fixed_src =
    "kernel fixed(x: global const f32[,], y: global f32[,]) ndrange(2) "
    "local(4, 8) {\n"
    "    local t: f32[4, 8];\n"
    "    let i = global_id(0);\n"
    "    let j = global_id(1);\n"
    "    let v = x[i, j] * 3.0f32 + 1.0f32;\n"
    "    let p: f32[3];\n"
    "    for (let k: i64 = 0; k < 3; k++) { p[k] = x[i, j] - f32(k); }\n"
    "    t[local_id(0), local_id(1)] = x[i, j];\n"
    "    barrier(local);\n"
    "    let m = t[3 - local_id(0), 7 - local_id(1)];\n"
    "    barrier(local);\n"
    "    y[i, j] = m * v + p[i64(j) % 3];\n"
    "}\n";

static void run_fixed(const char *src, bool fixed, bool strided) {
  enum { R = 12, C = 16 }; /* 3 x 2 groups of 4 x 8 */
  xpj_module *m = NULL;
  assert_int_equal(parse_src(src, &m, NULL), XPJ_OK);
  compiled c = {0};
  c.m = m;
  c.s = spec_kernel(m, "fixed", XPJ_VOID, 0);
  assert_non_null(c.s);
  c.r = compile_for(c.s, "fixed", "cpu", XPJ_EMIT_BIN);
  size_t len;
  const uint8_t *d = xpj_result_data(c.r, &len);
  c.fn = (cpu_entry)jit_load(d, len, xpj_result_entry(c.r), &c.jit);
  if (fixed)
    assert_int_equal(xpj_result_scratch_bytes(c.r), 0);
  else
    assert_true(xpj_result_scratch_bytes(c.r) > 0);
  static float x[C][R], y[R][2 * C];
  float want[R][C];
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) {
      x[j][i] = (float)(rnd() % 1000) / 8.0f;
      y[i][2 * j] = y[i][2 * j + 1] = -1.0f;
    }
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) {
      int gi = i / 4 * 4, gj = j / 8 * 8;
      float v = x[j][i] * 3.0f + 1.0f;
      float mm = x[gj + 7 - (j - gj)][gi + 3 - (i - gi)];
      want[i][j] = mm * v + (x[j][i] - (float)(j % 3));
    }
  int64_t shape[2] = {R, C};
  int64_t xstr[2] = {1, R}, ystr[2] = {2 * C, 2};
  static float xc[R][C], yc[R][C];
  kargs a = {0};
  if (strided) {
    add_view(&a, x, 0, 2, shape, xstr);
    add_view(&a, y, 1, 2, shape, ystr);
  } else {
    for (int i = 0; i < R; i++)
      for (int j = 0; j < C; j++)
        xc[i][j] = x[j][i];
    int64_t cstr[2] = {C, 1};
    add_view(&a, xc, 0, 2, shape, cstr);
    add_view(&a, yc, 0, 2, shape, cstr);
  }
  int64_t groups[3] = {C / 8, R / 4, 1}, local[3] = {8, 4, 1};
  run_nd(&c, &a, groups, local);
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) {
      float got = strided ? y[i][2 * j + 1] : yc[i][j];
      if (got != want[i][j])
        fail_msg("%s, %s views: y[%d, %d] = %g, want %g",
                 fixed ? "local(4, 8)" : "any local size",
                 strided ? "strided" : "contiguous", i, j, (double)got,
                 (double)want[i][j]);
      if (strided)
        assert_true(y[i][2 * j] == -1.0f);
    }
  release(&c);
}

static void test_fixed_groups(void **state) {
  (void)state;
  run_fixed(fixed_src, true, false);
  run_fixed(fixed_src, true, true);
  /* the same kernel for any local size */
  char *src = strdup(fixed_src);
  assert_non_null(src);
  char *at = strstr(src, "local(4, 8)");
  memset(at, ' ', strlen("local(4, 8)"));
  run_fixed(src, false, false);
  run_fixed(src, false, true);
  free(src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_axpy_strided),  cmocka_unit_test(test_block_sum),
      cmocka_unit_test(test_histogram_local), cmocka_unit_test(test_matmul_tiled),
      cmocka_unit_test(test_scan_block),    cmocka_unit_test(test_bitonic_block),
      cmocka_unit_test(test_wg_control),    cmocka_unit_test(test_wg_value_if),
      cmocka_unit_test(test_libc_names),
      cmocka_unit_test(test_long_chain),    cmocka_unit_test(test_fixed_groups),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
