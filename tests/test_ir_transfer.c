/*
 * test_ir_transfer.c - the transfer encoding of whole modules
 * (ir/transfer.h): round trips of every example and of specialised
 * modules (the bytes, every field, the printed form, the hashes, the PTX
 * they compile to), and hostile input: every truncation, byte mutations,
 * a corruption aimed at each check of the decoder, allocation failures and
 * the nesting bound. `make asan` runs it under ASan and UBSan.
 *
 * With XPJ_TRANSFER_SEEDS=DIR it only writes the fuzz seed corpus
 * (tests/fuzz/corpus/fuzz_ir_transfer) into DIR.
 */
#include "testutil.h"

#include "ir_impl.h"
#include "transfer.h"
#include "xpjit_codegen.h"

#include <dirent.h>
#include <stdio.h>

static const xpj_loc L = {0, 1, 1};

/* Every kind of instruction the decoder checks: calls with and without
 * type arguments, a recursion-free call chain, variables, a private and a
 * local array, a loop with break, a conditional expression, views' shape
 * and stride, work-item queries, a barrier, a collective, an atomic, a
 * math builtin, const parameters (CPARAM, an array sized by one). */
static const char sink_src[] =
    "const TS: i64 = 64;\n"
    "fn twice<T>(x: T) -> T {\n"
    "    return x + x;\n"
    "}\n"
    "fn quad<T>(x: T) -> T {\n"
    "    return twice(twice(x));\n"
    "}\n"
    "fn clampi(v: i32, hi: i32) -> i32 {\n"
    "    return v > hi ? hi : v;\n"
    "}\n"
    "kernel sink<T>(x: global const T[], y: global T[,], n: i64) range(2) {\n"
    "    let i = global_id(0);\n"
    "    let j = global_id(1);\n"
    "    let acc = T(0);\n"
    "    let p: i32[4];\n"
    "    for (let k = 0; k < n; k += 1) {\n"
    "        if k > 5 { break; }\n"
    "        acc += quad(x[k]);\n"
    "        p[k % 4] = -i32(k);\n"
    "    }\n"
    "    y[i, j] = acc + T(clampi(i32(i) + p[1], 7)) +\n"
    "              T(shape(y, 1) * stride(y, 0));\n"
    "}\n"
    "kernel groups(x: global const f32[], out: global f32[], "
    "cnt: global u32[]) ndrange(1) {\n"
    "    local t: f32[TS];\n"
    "    let lid = local_id(0);\n"
    "    t[lid] = sqrt(x[global_id(0)]);\n"
    "    barrier(local);\n"
    "    let s = group_reduce_add(t[lid]);\n"
    "    if lid == 0 {\n"
    "        out[group_id(0)] = s;\n"
    "        atomic_add(&cnt[0], u32(1), acq_rel, device);\n"
    "    }\n"
    "}\n"
    "kernel fold<const N: i64>(o: global i64[]) range {\n"
    "    let a: i64[N + 1];\n"
    "    o[0] = N * 3 + 1;\n"
    "    o[1] = size(a);\n"
    "}\n"
    "kernel flags<const NEG: bool, T, const K: u8>(o: global T[]) range {\n"
    "    let i = global_id(0);\n"
    "    o[i] = NEG ? T(i) * T(K) : T(K);\n"
    "}\n";

/* ---- helpers -------------------------------------------------------- */

typedef struct bytes {
  uint8_t *p;
  size_t n;
} bytes;

static bytes encode(const xpj_module *m) {
  bytes b = {NULL, 0};
  assert_int_equal(xpj_module_encode(m, &b.p, &b.n), XPJ_OK);
  assert_non_null(b.p);
  return b;
}

/* The decoder's messages are one line of printable ASCII. */
static void assert_one_line(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
      fail_msg("message byte 0x%02x is not printable", (unsigned char)*s);
}

/* Decodes an exact-size copy of p[0..n) (so that ASan sees reads past its
 * end); *out gets the module, err the message. */
static xpj_status decode_copy(const uint8_t *p, size_t n, xpj_module **out,
                              char *err, size_t size) {
  uint8_t *copy = malloc(n ? n : 1);
  assert_non_null(copy);
  if (n)
    memcpy(copy, p, n);
  xpj_status st = xpj_module_decode(copy, n, out, err, size);
  free(copy);
  if (st != XPJ_OK) {
    assert_null(*out);
    assert_true(err[0] != 0); /* every refusal says why */
    assert_one_line(err);
  }
  return st;
}

static xpj_module *decode_ok(bytes b) {
  xpj_module *m = NULL;
  char err[512];
  xpj_status st = decode_copy(b.p, b.n, &m, err, sizeof err);
  if (st != XPJ_OK)
    fail_msg("decode: %s: %s", xpj_status_name(st), err);
  return m;
}

static xpj_module *parse_text(const char *name, const char *src) {
  xpj_module *m = NULL;
  xpj_diags *d = NULL;
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  assert_int_equal(xpj_diags_create(&d), XPJ_OK);
  xpj_status st = xpj_parse(m, name, src, strlen(src), d);
  if (st != XPJ_OK) {
    char *r = NULL;
    xpj_diags_render(d, &r, NULL);
    fail_msg("%s: %s\n%s", name, xpj_status_name(st), r ? r : "");
  }
  xpj_diags_destroy(d);
  return m;
}

static xpj_module *parse_path(const char *path) {
  xpj_module *m = NULL;
  xpj_diags *d = NULL;
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  assert_int_equal(xpj_diags_create(&d), XPJ_OK);
  xpj_status st = xpj_parse_file(m, path, d);
  if (st != XPJ_OK) {
    char *r = NULL;
    xpj_diags_render(d, &r, NULL);
    fail_msg("%s: %s\n%s", path, xpj_status_name(st), r ? r : "");
  }
  xpj_diags_destroy(d);
  return m;
}

/* kernel of m specialised with type parameter tname (NULL: none) bound to
 * t, ndim, and const parameter cname (NULL: none) to cval. */
static xpj_module *specialise(const xpj_module *m, const char *kernel,
                              const char *tname, xpj_scalar t, unsigned ndim,
                              const char *cname, int64_t cval) {
  const char *names[] = {tname};
  xpj_scalar types[] = {t};
  const char *cnames[] = {cname};
  int64_t cvals[] = {cval};
  xpj_spec sp = {tname ? 1 : 0, names, types, ndim,
                 cname ? 1 : 0, cnames, cvals};
  xpj_diags *d = NULL;
  assert_int_equal(xpj_diags_create(&d), XPJ_OK);
  xpj_module *s = NULL;
  xpj_status st = xpj_specialize(m, kernel, &sp, &s, d);
  if (st != XPJ_OK) {
    char *r = NULL;
    xpj_diags_render(d, &r, NULL);
    fail_msg("specialise %s: %s\n%s", kernel, xpj_status_name(st),
             r ? r : "");
  }
  xpj_diags_destroy(d);
  return s;
}

static void assert_same_loc(xpj_loc a, xpj_loc b) {
  assert_int_equal(a.file, b.file);
  assert_int_equal(a.line, b.line);
  assert_int_equal(a.col, b.col);
}

static void assert_same_inst(const xpj_inst *a, const xpj_inst *b) {
  assert_int_equal(a->op, b->op);
  assert_int_equal(a->aux, b->aux);
  assert_int_equal(a->order, b->order);
  assert_int_equal(a->scope, b->scope);
  assert_int_equal(a->type, b->type);
  assert_int_equal(a->nargs, b->nargs);
  assert_int_equal(a->args, b->args);
  for (int k = 0; k < 3; k++)
    assert_int_equal(a->blk[k], b->blk[k]);
  assert_memory_equal(&a->imm, &b->imm, sizeof a->imm);
  assert_int_equal(a->ntargs, b->ntargs);
  assert_int_equal(a->in_block, b->in_block);
  assert_same_loc(a->loc, b->loc);
}

static void assert_same_func(const xpj_func *a, const xpj_func *b) {
  assert_string_equal(a->name, b->name);
  assert_int_equal(a->index, b->index);
  assert_int_equal(a->kind, b->kind);
  assert_int_equal(a->dims, b->dims);
  for (int d = 0; d < 3; d++)
    assert_int_equal(a->reqd_local[d], b->reqd_local[d]);
  assert_same_loc(a->loc, b->loc);
  assert_int_equal(a->ntparams, b->ntparams);
  for (unsigned i = 0; i < a->ntparams; i++)
    assert_string_equal(a->tparams[i], b->tparams[i]);
  assert_int_equal(a->ncparams, b->ncparams);
  for (unsigned i = 0; i < a->ncparams; i++) {
    assert_string_equal(a->cparams[i], b->cparams[i]);
    assert_int_equal(a->cptype[i], b->cptype[i]);
    assert_int_equal(a->cppos[i], b->cppos[i]);
  }
  assert_int_equal(a->nparams, b->nparams);
  for (unsigned i = 0; i < a->nparams; i++) {
    assert_string_equal(a->params[i].name, b->params[i].name);
    assert_int_equal(a->params[i].type, b->params[i].type);
    assert_int_equal(a->params[i].val, b->params[i].val);
    assert_same_loc(a->params[i].loc, b->params[i].loc);
  }
  assert_int_equal(a->ret, b->ret);
  assert_int_equal(a->ninsts, b->ninsts);
  for (uint32_t v = 0; v < a->ninsts; v++)
    assert_same_inst(&a->insts[v], &b->insts[v]);
  assert_int_equal(a->npool, b->npool);
  assert_memory_equal(a->pool, b->pool, a->npool * sizeof *a->pool);
  assert_int_equal(a->nblocks, b->nblocks);
  for (uint32_t k = 0; k < a->nblocks; k++) {
    assert_int_equal(a->blocks[k].parent, b->blocks[k].parent);
    assert_int_equal(a->blocks[k].n, b->blocks[k].n);
    if (a->blocks[k].n)
      assert_memory_equal(a->blocks[k].ids, b->blocks[k].ids,
                          a->blocks[k].n * sizeof *a->blocks[k].ids);
  }
}

/* Field by field, independently of the codec: a field both sides dropped
 * would leave the bytes equal. */
static void assert_same_module(const xpj_module *a, const xpj_module *b) {
  assert_int_equal(a->ntypes, b->ntypes);
  for (xpj_type t = 1; t < a->ntypes; t++) {
    const xpj_typeinfo *x = xpj_typeinfo_of(a, t), *y = xpj_typeinfo_of(b, t);
    assert_int_equal(x->kind, y->kind);
    assert_int_equal(x->scalar, y->scalar);
    assert_int_equal(x->space, y->space);
    assert_int_equal(x->is_const, y->is_const);
    assert_int_equal(x->rank, y->rank);
    assert_int_equal(x->param, y->param);
    assert_int_equal(x->elem, y->elem);
    assert_memory_equal(x->dims, y->dims, sizeof x->dims);
  }
  assert_int_equal(a->nstrings, b->nstrings);
  if (a->nstrings)
    assert_memory_equal(a->strings, b->strings, a->nstrings);
  assert_int_equal(a->nfiles, b->nfiles);
  for (uint32_t i = 1; i < a->nfiles; i++) {
    assert_string_equal(a->files[i].name, b->files[i].name);
    assert_int_equal(a->files[i].len, b->files[i].len);
    assert_memory_equal(a->files[i].text, b->files[i].text,
                        a->files[i].len + 1);
  }
  assert_int_equal(a->nfuncs, b->nfuncs);
  for (uint32_t i = 0; i < a->nfuncs; i++)
    assert_same_func(a->funcs[i], b->funcs[i]);
  assert_false(b->oom);
}

/* encode, decode, encode: the same bytes, the same fields, the same
 * printed form and hashes. Returns the decoded module. */
static xpj_module *round_trip(const xpj_module *m) {
  bytes b1 = encode(m);
  xpj_module *m2 = decode_ok(b1);
  bytes b2 = encode(m2);
  assert_int_equal(b1.n, b2.n);
  assert_memory_equal(b1.p, b2.p, b1.n);
  assert_same_module(m, m2);
  char *p1 = NULL, *p2 = NULL;
  assert_int_equal(xpj_module_print(m, &p1, NULL), XPJ_OK);
  assert_int_equal(xpj_module_print(m2, &p2, NULL), XPJ_OK);
  assert_string_equal(p1, p2);
  for (unsigned i = 0; i < xpj_module_func_count(m); i++) {
    const char *name = xpj_func_name(xpj_module_func(m, i));
    char h1[65], h2[65];
    assert_int_equal(xpj_module_hash(m, name, NULL, h1), XPJ_OK);
    assert_int_equal(xpj_module_hash(m2, name, NULL, h2), XPJ_OK);
    assert_string_equal(h1, h2);
  }
  free(p1);
  free(p2);
  free(b1.p);
  free(b2.p);
  return m2;
}

static int cmp_path(const void *a, const void *b) {
  return strcmp((const char *)a, (const char *)b);
}

/* The paths of the examples (.xpk in examples/), sorted; returns their
 * number. */
static unsigned example_paths(char paths[][320], unsigned max) {
  DIR *dp = opendir("examples");
  assert_non_null(dp);
  unsigned n = 0;
  struct dirent *de;
  while ((de = readdir(dp)) != NULL && n < max) {
    size_t len = strlen(de->d_name);
    if (len > 4 && strcmp(de->d_name + len - 4, ".xpk") == 0)
      snprintf(paths[n++], 320, "examples/%s", de->d_name);
  }
  closedir(dp);
  qsort(paths, n, 320, cmp_path);
  return n;
}

/* Where needle first occurs in p[0..n) (memmem is a GNU extension). */
static uint8_t *find_bytes(uint8_t *p, size_t n, const void *needle,
                           size_t len) {
  for (size_t i = 0; i + len <= n; i++)
    if (memcmp(p + i, needle, len) == 0)
      return p + i;
  return NULL;
}

/* ---- round trips ---------------------------------------------------- */

static void test_examples(void **state) {
  (void)state;
  char paths[64][320];
  unsigned n = example_paths(paths, 64);
  assert_true(n >= 15);
  for (unsigned i = 0; i < n; i++) {
    xpj_module *m = parse_path(paths[i]);
    xpj_module *m2 = round_trip(m);
    xpj_module_destroy(m2);
    xpj_module_destroy(m);
  }
}

static const struct {
  const char *file, *kernel, *tname;
  xpj_scalar t;
  unsigned ndim;
} specs[] = {
    {"examples/saxpy.xpk", "saxpy", "T", XPJ_F32, 0},
    {"examples/axpy.xpk", "axpy", "T", XPJ_F64, 2},
    {"examples/reduce.xpk", "block_sum", "T", XPJ_F32, 0},
    {"examples/matmul.xpk", "matmul_tiled", "T", XPJ_F64, 0},
    {"examples/sort.xpk", "bitonic_sort_block", "T", XPJ_I32, 0},
    {"examples/atomics.xpk", "product", "T", XPJ_U64, 0},
    {"examples/scan.xpk", "scan_block", "T", XPJ_I64, 0},
    {"examples/half.xpk", "haxpy", "T", XPJ_F16, 0},
    {"examples/workgroup.xpk", "reverse_chunks", "T", XPJ_F32, 0},
    {"examples/math.xpk", "math_table", "T", XPJ_F32, 0},
    {"examples/stencil.xpk", "jacobi5_tiled", "T", XPJ_F32, 0},
    {"examples/private.xpk", "matmul_regblock", "T", XPJ_F64, 0},
};

static void test_specialised(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    xpj_module *m = parse_path(specs[i].file);
    xpj_module *s = specialise(m, specs[i].kernel, specs[i].tname, specs[i].t,
                               specs[i].ndim, NULL, 0);
    xpj_module *s2 = round_trip(s);
    xpj_module_destroy(s2);
    xpj_module_destroy(s);
    xpj_module_destroy(m);
  }
}

/* What the compile server does with a generic module: specialising the
 * decoded one gives what specialising the original gives. A kernel with
 * const parameters is parsed again from the source the module keeps, so
 * this needs the files. */
static void test_specialise_decoded(void **state) {
  (void)state;
  xpj_module *m = parse_text("sink.xpk", sink_src);
  xpj_module *m2 = round_trip(m);
  static const struct {
    const char *kernel, *tname;
    xpj_scalar t;
    const char *cname;
    int64_t cval;
  } cases[] = {{"sink", "T", XPJ_F32, NULL, 0},
               {"groups", NULL, XPJ_VOID, NULL, 0},
               {"fold", NULL, XPJ_VOID, "N", 5}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    xpj_module *a = specialise(m, cases[i].kernel, cases[i].tname, cases[i].t,
                               0, cases[i].cname, cases[i].cval);
    xpj_module *b = specialise(m2, cases[i].kernel, cases[i].tname,
                               cases[i].t, 0, cases[i].cname, cases[i].cval);
    char h1[65], h2[65];
    assert_int_equal(xpj_module_hash(a, cases[i].kernel, NULL, h1), XPJ_OK);
    assert_int_equal(xpj_module_hash(b, cases[i].kernel, NULL, h2), XPJ_OK);
    assert_string_equal(h1, h2);
    xpj_module *c = round_trip(b);
    xpj_module_destroy(c);
    xpj_module_destroy(a);
    xpj_module_destroy(b);
  }
  xpj_module_destroy(m2);
  xpj_module_destroy(m);
}

/* A decoded module is a module like any other: the builder can extend it
 * (its arrays' capacities are what xpj_grow expects). */
static void test_build_on_decoded(void **state) {
  (void)state;
  xpj_module *m = parse_path("examples/saxpy.xpk");
  xpj_module *s = specialise(m, "saxpy", "T", XPJ_F32, 0, NULL, 0);
  xpj_module *d = round_trip(s);
  xpj_func *k = xpj_module_find(d, "saxpy");
  xpj_type i64 = xpj_type_scalar(d, XPJ_I64);
  for (int i = 0; i < 100; i++)
    assert_true(xpj_b_const_int(k, xpj_func_body(k), i64, i, L) != 0);
  xpj_func *f = xpj_func_create(d, "extra", XPJ_FUNC_RANGE, 1, 0, NULL, L);
  assert_non_null(f);
  xpj_type view = xpj_type_view(d, xpj_type_scalar(d, XPJ_F32), 1, 0);
  xpj_val x = xpj_func_add_param(f, "x", view, L);
  xpj_val id = xpj_b_wi(f, 1, XPJ_WI_GLOBAL_ID, 0, L);
  xpj_val p = xpj_b_index(f, 1, x, 1, &id, L);
  assert_true(xpj_b_store(f, 1, p, xpj_b_load(f, 1, p, L), L) != 0);
  assert_true(xpj_b_var(f, 1, i64, "added", L) != 0);
  const char *msg;
  assert_int_equal(xpj_module_verify(d, &msg), XPJ_OK);
  xpj_module *d2 = round_trip(d);
  xpj_module_destroy(d2);
  xpj_module_destroy(d);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

static char *compile_ptx(const xpj_module *m, const char *kernel,
                         size_t *len) {
  xpj_target t;
  char err[256];
  assert_int_equal(xpj_target_parse("ptx:sm_90", &t, err, sizeof err),
                   XPJ_OK);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.debug_info = 1; /* line tables: the positions must have come along */
  o.isolation = XPJ_ISOLATE_NONE;
  xpj_result *r = NULL;
  xpj_status st = xpj_compile(m, kernel, &t, &o, XPJ_EMIT_ASM, &r);
  if (st != XPJ_OK)
    fail_msg("compile %s: %s", kernel, r ? xpj_result_log(r) : "");
  const uint8_t *data = xpj_result_data(r, len);
  char *copy = malloc(*len + 1);
  assert_non_null(copy);
  memcpy(copy, data, *len);
  copy[*len] = 0;
  xpj_result_destroy(r);
  return copy;
}

/* The same PTX, byte for byte, with line tables, from a decoded module: a
 * specialised one, and one specialised after decoding. */
static void test_same_ptx(void **state) {
  (void)state;
  xpj_module *m = parse_path("examples/reduce.xpk");
  xpj_module *s = specialise(m, "block_sum", "T", XPJ_F32, 0, NULL, 0);
  xpj_module *s2 = round_trip(s);
  xpj_module *m2 = round_trip(m);
  xpj_module *s3 = specialise(m2, "block_sum", "T", XPJ_F32, 0, NULL, 0);
  size_t n1, n2, n3;
  char *a = compile_ptx(s, "block_sum", &n1);
  char *b = compile_ptx(s2, "block_sum", &n2);
  char *c = compile_ptx(s3, "block_sum", &n3);
  assert_non_null(strstr(a, "\t.loc\t"));
  assert_non_null(strstr(a, "reduce.xpk"));
  assert_int_equal(n1, n2);
  assert_memory_equal(a, b, n1);
  assert_int_equal(n1, n3);
  assert_memory_equal(a, c, n1);
  free(a);
  free(b);
  free(c);
  xpj_module_destroy(s3);
  xpj_module_destroy(m2);
  xpj_module_destroy(s2);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

/* ---- hostile input ------------------------------------------------- */

static void test_bad_arguments(void **state) {
  (void)state;
  uint8_t *p = NULL;
  size_t n = 0;
  xpj_module *m = NULL;
  char err[128];
  assert_int_equal(xpj_module_encode(NULL, &p, &n), XPJ_ERR_INVALID);
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  assert_int_equal(xpj_module_encode(m, NULL, &n), XPJ_ERR_INVALID);
  assert_int_equal(xpj_module_encode(m, &p, NULL), XPJ_ERR_INVALID);
  bytes b = encode(m); /* an empty module is a module */
  xpj_module *e = decode_ok(b);
  assert_int_equal(xpj_module_func_count(e), 0);
  xpj_module_destroy(e);
  assert_int_equal(xpj_module_decode(b.p, b.n, NULL, err, sizeof err),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_module_decode(NULL, 5, &e, err, sizeof err),
                   XPJ_ERR_INVALID);
  assert_null(e);
  assert_int_equal(xpj_module_decode(NULL, 0, &e, NULL, 0), XPJ_ERR_INVALID);
  assert_int_equal(xpj_module_decode(b.p, b.n - 1, &e, NULL, 0),
                   XPJ_ERR_INVALID);
  free(b.p);
  xpj_module_destroy(m);
}

static bytes saxpy_f32(void) {
  xpj_module *m = parse_path("examples/saxpy.xpk");
  xpj_module *s = specialise(m, "saxpy", "T", XPJ_F32, 0, NULL, 0);
  bytes b = encode(s);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
  return b;
}

/* Every proper prefix is refused, with a reason, and reads nothing past
 * itself. */
static void test_truncation(void **state) {
  (void)state;
  bytes b = saxpy_f32();
  assert_true(b.n < 4096);
  for (size_t n = 0; n < b.n; n++) {
    xpj_module *m = NULL;
    char err[512];
    if (decode_copy(b.p, n, &m, err, sizeof err) != XPJ_ERR_INVALID)
      fail_msg("a %zu-byte prefix of %zu was not refused", n, b.n);
  }
  free(b.p);
}

/* Single-byte changes: each is refused, or gives a module that verifies,
 * prints, and encodes back to exactly the changed bytes. */
static void mutate_all(bytes b, const uint8_t *flips, size_t nflips,
                       const char *what) {
  unsigned accepted = 0, tried = 0;
  uint8_t *c = malloc(b.n);
  assert_non_null(c);
  for (size_t off = 0; off < b.n; off++) {
    for (size_t k = 0; k <= nflips; k++) {
      memcpy(c, b.p, b.n);
      c[off] = k < nflips ? (uint8_t)(b.p[off] ^ flips[k]) : 0;
      if (c[off] == b.p[off])
        continue;
      tried++;
      xpj_module *m = NULL;
      char err[512];
      xpj_status st = decode_copy(c, b.n, &m, err, sizeof err);
      if (st == XPJ_ERR_INVALID)
        continue;
      assert_int_equal(st, XPJ_OK);
      accepted++;
      bytes e = encode(m);
      if (e.n != b.n || memcmp(e.p, c, b.n) != 0)
        fail_msg("%s: byte %zu changed to 0x%02x is accepted but does not "
                 "encode back to itself", what, off, c[off]);
      const char *msg;
      assert_int_equal(xpj_module_verify(m, &msg), XPJ_OK);
      char *txt = NULL;
      assert_int_equal(xpj_module_print(m, &txt, NULL), XPJ_OK);
      free(txt);
      free(e.p);
      xpj_module_destroy(m);
    }
  }
  print_message("%s: %zu bytes, %u changes, %u accepted\n", what, b.n, tried,
                accepted);
  free(c);
}

static void test_mutations(void **state) {
  (void)state;
  static const uint8_t flips[] = {0x01, 0x02, 0x10, 0x80, 0xff};
  bytes b = saxpy_f32();
  mutate_all(b, flips, sizeof flips, "saxpy<f32>");
  free(b.p);
  xpj_module *m = parse_text("sink.xpk", sink_src);
  bytes s = encode(m);
  static const uint8_t few[] = {0x01, 0x80};
  mutate_all(s, few, sizeof few, "sink.xpk");
  free(s.p);
  xpj_module_destroy(m);
}

/* ---- one corruption per check ---------------------------------------- */

static xpj_func *fn(xpj_module *m, const char *name) {
  xpj_func *f = xpj_module_find(m, name);
  assert_non_null(f);
  return f;
}

/* The nth instruction (0-based) with opcode op in f. */
static xpj_inst *nth(xpj_func *f, xpj_op op, unsigned n) {
  for (xpj_val v = 1; v < f->ninsts; v++)
    if (f->insts[v].op == op && n-- == 0)
      return &f->insts[v];
  fail_msg("no %s #%u in %s", xpj_op_names[op], n, f->name);
  return NULL;
}

static uint32_t *args(xpj_func *f, xpj_inst *in) { return &f->pool[in->args]; }

static xpj_typeinfo *tinfo(xpj_module *m, xpj_type t) {
  return &m->type_chunks[t / XPJ_TYPE_CHUNK][t % XPJ_TYPE_CHUNK];
}

static void c_type_range(xpj_module *m) {
  nth(fn(m, "sink"), XPJ_OP_BINOP, 0)->type = m->ntypes;
}
static void c_operand_range(xpj_module *m) {
  xpj_func *f = fn(m, "sink");
  args(f, nth(f, XPJ_OP_BINOP, 0))[1] = f->ninsts;
}
static void c_pool_range(xpj_module *m) {
  xpj_func *f = fn(m, "sink");
  nth(f, XPJ_OP_BINOP, 0)->args = f->npool - 1;
}
static void c_too_many_args(xpj_module *m) {
  xpj_func *f = fn(m, "sink");
  xpj_inst *in = nth(f, XPJ_OP_BINOP, 0);
  in->args = 0;
  in->nargs = 4; /* within the pool, but no binop takes 4 */
}
static void c_block_range(xpj_module *m) {
  xpj_func *f = fn(m, "sink");
  nth(f, XPJ_OP_BINOP, 0)->in_block = f->nblocks;
}
static void c_other_block(xpj_module *m) {
  nth(fn(m, "sink"), XPJ_OP_BREAK, 0)->in_block = 1;
}
static void c_block_entry(xpj_module *m) {
  xpj_func *f = fn(m, "sink");
  f->blocks[1].ids[3] = f->ninsts;
}
static void c_in_no_block(xpj_module *m) { fn(m, "sink")->blocks[1].n--; }
static void c_if_blocks(xpj_module *m) {
  xpj_inst *in = nth(fn(m, "clampi"), XPJ_OP_IF, 0);
  in->blk[1] = in->blk[0];
}
static void c_block_owner(xpj_module *m) {
  xpj_func *f = fn(m, "sink");
  f->blocks[nth(f, XPJ_OP_LOOP, 0)->blk[2]].parent = 0;
}
static void c_loc_file(xpj_module *m) {
  nth(fn(m, "sink"), XPJ_OP_STORE, 0)->loc.file = m->nfiles;
}
static void c_func_loc(xpj_module *m) { fn(m, "groups")->loc.file = 7; }
static void c_param_loc(xpj_module *m) {
  fn(m, "sink")->params[2].loc.file = m->nfiles;
}
static void c_callee_range(xpj_module *m) {
  nth(fn(m, "sink"), XPJ_OP_CALL, 0)->imm.callee = m->nfuncs;
}
static void c_callee_kernel(xpj_module *m) {
  nth(fn(m, "sink"), XPJ_OP_CALL, 0)->imm.callee = fn(m, "groups")->index;
}
static void c_recursion(xpj_module *m) {
  nth(fn(m, "quad"), XPJ_OP_CALL, 0)->imm.callee = fn(m, "quad")->index;
}
static void c_name_range(xpj_module *m) {
  nth(fn(m, "sink"), XPJ_OP_VAR, 0)->imm.name = m->nstrings + 1;
}
static void c_name_unterminated(xpj_module *m) {
  m->strings[m->nstrings - 1] = 'x';
}
static void c_cppos(xpj_module *m) {
  xpj_func *f = fn(m, "flags");
  f->cppos[1] = f->cppos[0];
}
static void c_param_val(xpj_module *m) { fn(m, "sink")->params[0].val = 0; }
static void c_param_aux(xpj_module *m) {
  nth(fn(m, "sink"), XPJ_OP_PARAM, 1)->aux = 0;
}
static void c_binop_aux(xpj_module *m) {
  nth(fn(m, "sink"), XPJ_OP_BINOP, 0)->aux = XPJ_BINOP_COUNT;
}
static void c_binop_types(xpj_module *m) {
  /* k < n: the i64 cast of k replaced by the i32 k itself */
  xpj_func *f = fn(m, "sink");
  uint32_t *a = args(f, nth(f, XPJ_OP_BINOP, 0));
  assert_int_equal(f->insts[a[0]].op, XPJ_OP_CAST);
  a[0] = args(f, &f->insts[a[0]])[0];
}
static void c_math_arity(xpj_module *m) {
  nth(fn(m, "groups"), XPJ_OP_MATH, 0)->aux = XPJ_MATH_POW;
}
static void c_wi_dim(xpj_module *m) {
  nth(fn(m, "sink"), XPJ_OP_WI, 1)->imm.i = 2; /* a range(2) kernel */
}
static void c_wi_query(xpj_module *m) {
  nth(fn(m, "sink"), XPJ_OP_WI, 0)->aux = XPJ_WI_COUNT;
}
static void c_barrier(xpj_module *m) {
  nth(fn(m, "groups"), XPJ_OP_BARRIER, 0)->aux = 0;
}
static void c_atomic_order(xpj_module *m) {
  nth(fn(m, "groups"), XPJ_OP_ATOMIC, 0)->order = 9;
}
static void c_loop_cond(xpj_module *m) {
  nth(fn(m, "sink"), XPJ_OP_LOOP, 0)->imm.i = INT64_C(1) << 40;
}
static void c_group_op(xpj_module *m) {
  nth(fn(m, "groups"), XPJ_OP_GROUP, 0)->order = XPJ_GOP_NONE;
}
static void c_unused_field(xpj_module *m) {
  nth(fn(m, "sink"), XPJ_OP_STORE, 0)->aux = 3;
}
/* a literal a cast typed (T(1)) is of a type parameter's type only */
static void c_const_cast(xpj_module *m) {
  xpj_func *s = fn(m, "sink");
  for (unsigned k = 0;; k++) {
    xpj_inst *in = nth(s, XPJ_OP_CONST, k);
    if (xpj_type_scalar_of(m, in->type) == XPJ_I32) {
      in->order = XPJ_CONST_CAST;
      return;
    }
  }
}
static void c_const_range(xpj_module *m) {
  xpj_func *s = fn(m, "sink");
  for (unsigned k = 0;; k++) {
    xpj_inst *in = nth(s, XPJ_OP_CONST, k);
    if (xpj_type_scalar_of(m, in->type) == XPJ_I32) {
      in->imm.i = INT64_C(1) << 40;
      return;
    }
  }
}
static void c_reqd_local(xpj_module *m) { fn(m, "groups")->reqd_local[1] = 4; }
static void c_kind(xpj_module *m) { fn(m, "groups")->kind = 3; }
static void c_type_dup(xpj_module *m) {
  *tinfo(m, m->ntypes - 1) = *tinfo(m, 1);
}
static void c_type_forward(xpj_module *m) {
  for (xpj_type t = 1; t + 1 < m->ntypes; t++)
    if (tinfo(m, t)->kind == XPJ_TK_PTR) {
      tinfo(m, t)->elem = t + 1;
      return;
    }
  fail_msg("no pointer type");
}
static void c_pool0(xpj_module *m) { fn(m, "sink")->pool[0] = 1; }
static void c_break_outside(xpj_module *m) {
  xpj_inst *in = nth(fn(m, "sink"), XPJ_OP_LOOP, 0);
  uint32_t b = in->blk[0];
  in->blk[0] = in->blk[1];
  in->blk[1] = b;
}
static void c_visibility(xpj_module *m) {
  xpj_blockdata *bd = &fn(m, "sink")->blocks[1];
  for (uint32_t i = 1; i < bd->n; i++)
    if (fn(m, "sink")->insts[bd->ids[i]].op == XPJ_OP_STORE) {
      uint32_t t = bd->ids[i];
      bd->ids[i] = bd->ids[i - 1];
      bd->ids[i - 1] = t;
      return;
    }
}
static void c_operand_stmt(xpj_module *m) {
  xpj_func *f = fn(m, "sink");
  xpj_inst *first = nth(f, XPJ_OP_STORE, 0);
  args(f, nth(f, XPJ_OP_STORE, 1))[1] = (uint32_t)(first - f->insts);
}
static void c_targ(xpj_module *m) {
  xpj_func *f = fn(m, "sink");
  xpj_inst *call = nth(f, XPJ_OP_CALL, 0);
  assert_int_equal(call->ntargs, 1);
  args(f, call)[0] = f->params[0].type; /* a view */
}
static void c_arg_type(xpj_module *m) {
  xpj_func *f = fn(m, "sink");
  xpj_inst *call = nth(f, XPJ_OP_CALL, 1); /* clampi(i32, i32) */
  assert_int_equal(call->imm.callee, fn(m, "clampi")->index);
  args(f, call)[0] = (uint32_t)(nth(f, XPJ_OP_WI, 0) - f->insts); /* i64 */
}
static void c_array_mask(xpj_module *m) {
  nth(fn(m, "fold"), XPJ_OP_ARRAY, 0)->aux = 0x80;
}
static void c_index_result(xpj_module *m) {
  xpj_func *f = fn(m, "sink");
  nth(f, XPJ_OP_INDEX, 0)->type = nth(f, XPJ_OP_INDEX, 1)->type;
}
static void c_private_huge(xpj_module *m) {
  xpj_func *f = fn(m, "sink");
  xpj_typeinfo *ti = tinfo(m, nth(f, XPJ_OP_ARRAY, 0)->type);
  /* the type stays valid alone (dims up to 2^31), the array does not */
  ti->dims[0] = 1 << 20;
}

typedef struct corruption {
  const char *name;
  void (*apply)(xpj_module *m);
  const char *expect; /* part of the decoder's message */
} corruption;

static const corruption corruptions[] = {
    {"type id", c_type_range, "type out of range"},
    {"operand id", c_operand_range, "operand out of range"},
    {"pool offset", c_pool_range, "operands outside the pool"},
    {"operand count", c_too_many_args, "too many operands"},
    {"block id", c_block_range, "block out of range"},
    {"in another block", c_other_block, "lists instruction"},
    {"block entry", c_block_entry, "lists instruction"},
    {"in no block", c_in_no_block, "is in no block"},
    {"if blocks", c_if_blocks, "child blocks malformed"},
    {"block owner", c_block_owner, "child blocks malformed"},
    {"instruction file", c_loc_file, "source position in file"},
    {"function file", c_func_loc, "source position in file"},
    {"parameter file", c_param_loc, "source position in file"},
    {"callee id", c_callee_range, "callee out of range"},
    {"callee kernel", c_callee_kernel, "calls a kernel"},
    {"recursion", c_recursion, "recursive calls"},
    {"name offset", c_name_range, "malformed variable or array"},
    {"name unterminated", c_name_unterminated, "does not end with a NUL"},
    {"const position", c_cppos, "const parameter 1 at position"},
    {"parameter value", c_param_val, "is not the value of its PARAM"},
    {"param aux", c_param_aux, "is not the value of its PARAM"},
    {"binop aux", c_binop_aux, "malformed binary operator"},
    {"binop types", c_binop_types, "operands are not two scalars"},
    {"math arity", c_math_arity, "malformed math builtin"},
    {"wi dimension", c_wi_dim, "dimension out of the kernel's range"},
    {"wi query", c_wi_query, "malformed work-item query"},
    {"barrier fences", c_barrier, "malformed barrier"},
    {"atomic order", c_atomic_order, "malformed atomic"},
    {"loop condition", c_loop_cond, "malformed loop"},
    {"collective op", c_group_op, "malformed collective"},
    {"unused field", c_unused_field, "a field its opcode does not use"},
    {"const cast", c_const_cast, "a constant a cast typed is of a type parameter's type"},
    {"constant range", c_const_range, "constant out of its type's range"},
    {"required local size", c_reqd_local, "required local size"},
    {"function kind", c_kind, "invalid kind"},
    {"duplicate type", c_type_dup, "is not a type the module's interning"},
    {"forward element", c_type_forward, "is not defined before it"},
    {"reserved pool entry", c_pool0, "reserved entries"},
    {"break outside loop", c_break_outside, "outside of a loop"},
    {"use before definition", c_visibility, "verification failed"},
    {"statement operand", c_operand_stmt, "is a statement, not a value"},
    {"type argument", c_targ, "type argument is not a scalar type"},
    {"argument type", c_arg_type, "argument's type does not match"},
    {"sized-by-const mask", c_array_mask, "sized-by-const mask"},
    {"index result", c_index_result, "not a pointer to the array's element"},
    {"private array size", c_private_huge, "private array is too large"},
};

static void expect_refused(bytes e, const char *name, const char *expect) {
  xpj_module *out = NULL;
  char err[512];
  xpj_status st = decode_copy(e.p, e.n, &out, err, sizeof err);
  if (st != XPJ_ERR_INVALID || !strstr(err, expect))
    fail_msg("%s: %s '%s', expected a refusal with '%s'", name,
             xpj_status_name(st), err, expect);
}

/* Each corruption of a decoded module, encoded (the encoder does not
 * check), is refused by the check aimed at. */
static void test_corruptions(void **state) {
  (void)state;
  xpj_module *base = parse_text("sink.xpk", sink_src);
  bytes b = encode(base);
  for (size_t i = 0; i < sizeof corruptions / sizeof *corruptions; i++) {
    xpj_module *m = decode_ok(b);
    corruptions[i].apply(m);
    bytes e = encode(m);
    expect_refused(e, corruptions[i].name, corruptions[i].expect);
    free(e.p);
    xpj_module_destroy(m);
  }
  /* and in the bytes themselves */
  uint8_t *c = malloc(b.n + 1);
  assert_non_null(c);
  memcpy(c, b.p, b.n);
  c[b.n] = 0;
  expect_refused((bytes){c, b.n + 1}, "trailing byte", "bytes after");
  c[0] = 'Y';
  expect_refused((bytes){c, b.n}, "magic", "bad magic");
  memcpy(c, b.p, b.n);
  c[6] = XPJ_TRANSFER_VERSION + 1;
  expect_refused((bytes){c, b.n}, "version", "version 2");
  memcpy(c, b.p, b.n);
  memset(c + 10, 0xff, 4); /* the number of types */
  expect_refused((bytes){c, b.n}, "type count", "types (1 to");
  memcpy(c, b.p, b.n);
  static const char named[] = "\x06\0\0\0clampi";
  uint8_t *at = find_bytes(c, b.n, named, sizeof named - 1);
  assert_non_null(at);
  at[6] = 0;
  expect_refused((bytes){c, b.n}, "NUL in a name", "contains a NUL byte");
  free(c);
  free(b.p);
  xpj_module_destroy(base);
}

/* Running out of memory anywhere in decoding or encoding is
 * XPJ_ERR_NOMEM, never a crash, a leak or a wrong refusal. */
static void test_alloc_failures(void **state) {
  (void)state;
  xpj_module *m = parse_text("sink.xpk", sink_src);
  bytes b = encode(m);
  unsigned long k;
  for (k = 1;; k++) {
    xpj_module *out = NULL;
    char err[512];
    xpj_alloc_fail_after(k);
    xpj_status st = xpj_module_decode(b.p, b.n, &out, err, sizeof err);
    bool failed_one = xpj_alloc_fail_pending() == 0;
    xpj_alloc_fail_after(0);
    if (st == XPJ_OK && failed_one) /* went on as if it had not failed */
      fail_msg("decoding: allocation %lu failed, and it succeeded", k);
    if (st == XPJ_OK) {
      xpj_module_destroy(out);
      break;
    }
    if (st != XPJ_ERR_NOMEM)
      fail_msg("allocation %lu failing: %s: %s", k, xpj_status_name(st), err);
    assert_null(out);
  }
  assert_true(k > 20);
  for (k = 1;; k++) {
    uint8_t *p = NULL;
    size_t n = 0;
    xpj_alloc_fail_after(k);
    xpj_status st = xpj_module_encode(m, &p, &n);
    bool failed_one = xpj_alloc_fail_pending() == 0;
    xpj_alloc_fail_after(0);
    if (st == XPJ_OK && failed_one)
      fail_msg("encoding: allocation %lu failed, and it succeeded", k);
    if (st == XPJ_OK) {
      assert_int_equal(n, b.n);
      assert_memory_equal(p, b.p, n);
      free(p);
      break;
    }
    assert_int_equal(st, XPJ_ERR_NOMEM);
    assert_null(p);
  }
  free(b.p);
  xpj_module_destroy(m);
}

/* ---- the nesting bound ------------------------------------------------ */

/* A range kernel whose body nests depth ifs. */
static xpj_module *nested_ifs(unsigned depth) {
  xpj_module *m = NULL;
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  xpj_func *f = xpj_func_create(m, "deep", XPJ_FUNC_RANGE, 1, 0, NULL, L);
  assert_non_null(f);
  xpj_block b = xpj_func_body(f);
  xpj_val c = xpj_b_const_int(f, b, xpj_type_scalar(m, XPJ_BOOL), 1, L);
  for (unsigned i = 0; i < depth; i++) {
    xpj_block t, e;
    assert_true(xpj_b_if(f, b, c, &t, &e, L) != 0);
    b = t;
  }
  const char *msg;
  assert_int_equal(xpj_module_verify(m, &msg), XPJ_OK);
  return m;
}

/* A kernel calling a chain of n device functions. */
static xpj_module *call_chain(unsigned n) {
  xpj_module *m = NULL;
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  xpj_func *k = xpj_func_create(m, "k", XPJ_FUNC_RANGE, 1, 0, NULL, L);
  assert_non_null(k);
  xpj_func *prev = k;
  for (unsigned i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "d%u", i);
    xpj_func *d = xpj_func_create(m, name, XPJ_FUNC_DEVICE, 0, 0, NULL, L);
    assert_non_null(d);
    assert_true(xpj_b_call(prev, 1, d, 0, NULL, 0, NULL, L) != 0);
    prev = d;
  }
  const char *msg;
  assert_int_equal(xpj_module_verify(m, &msg), XPJ_OK);
  return m;
}

/* Deeper nesting than the decoder allows is refused (the verifier and code
 * generation recurse that deep); up to it, modules decode. */
static void test_nesting_bound(void **state) {
  (void)state;
  /* a function's chain counts its block levels (ifs + the body) + 1 */
  unsigned most = XPJ_TRANSFER_MAX_DEPTH - 2;
  xpj_module *ok = nested_ifs(most);
  xpj_module *deep = nested_ifs(most + 1);
  bytes a = encode(ok), b = encode(deep);
  xpj_module *d = decode_ok(a);
  assert_same_module(ok, d);
  xpj_module_destroy(d);
  expect_refused(b, "nested ifs", "nest 4097 deep");
  free(a.p);
  free(b.p);
  xpj_module_destroy(ok);
  xpj_module_destroy(deep);
  /* each function of a chain counts 2: its body and itself */
  unsigned chain = XPJ_TRANSFER_MAX_DEPTH / 2 - 1;
  ok = call_chain(chain);
  deep = call_chain(chain + 1);
  a = encode(ok);
  b = encode(deep);
  d = decode_ok(a);
  assert_same_module(ok, d);
  xpj_module_destroy(d);
  expect_refused(b, "call chain", "deep (at most 4096)");
  free(a.p);
  free(b.p);
  xpj_module_destroy(ok);
  xpj_module_destroy(deep);
}

/* ---- the fuzz seed corpus --------------------------------------------- */

static void write_seed(const char *dir, const char *name, const xpj_module *m) {
  bytes b = encode(m);
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *fp = fopen(path, "wb");
  assert_non_null(fp);
  assert_int_equal(fwrite(b.p, 1, b.n, fp), b.n);
  assert_int_equal(fclose(fp), 0);
  printf("%s: %zu bytes\n", path, b.n);
  free(b.p);
}

static int write_seeds(const char *dir) {
  xpj_module *saxpy = parse_path("examples/saxpy.xpk");
  xpj_module *s = specialise(saxpy, "saxpy", "T", XPJ_F32, 0, NULL, 0);
  write_seed(dir, "seed_saxpy_generic", saxpy);
  write_seed(dir, "seed_saxpy_f32", s);
  xpj_module *sink = parse_text("sink.xpk", sink_src);
  write_seed(dir, "seed_sink", sink);
  xpj_module *g = specialise(sink, "groups", NULL, XPJ_VOID, 0, NULL, 0);
  write_seed(dir, "seed_sink_groups", g);
  xpj_module *reduce = parse_path("examples/reduce.xpk");
  xpj_module *r = specialise(reduce, "block_sum", "T", XPJ_F64, 0, NULL, 0);
  write_seed(dir, "seed_block_sum_f64", r);
  xpj_module *chain = call_chain(3);
  write_seed(dir, "seed_call_chain", chain);
  xpj_module *mods[] = {saxpy, s, sink, g, reduce, r, chain};
  for (size_t i = 0; i < sizeof mods / sizeof *mods; i++)
    xpj_module_destroy(mods[i]);
  return 0;
}

int main(void) {
  const char *seeds = getenv("XPJ_TRANSFER_SEEDS");
  if (seeds)
    return write_seeds(seeds);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_examples),
      cmocka_unit_test(test_specialised),
      cmocka_unit_test(test_specialise_decoded),
      cmocka_unit_test(test_build_on_decoded),
      cmocka_unit_test(test_same_ptx),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_truncation),
      cmocka_unit_test(test_mutations),
      cmocka_unit_test(test_corruptions),
      cmocka_unit_test(test_alloc_failures),
      cmocka_unit_test(test_nesting_bound),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
