/*
 * test_elfload.c - runtime/elfload.c, the CPU device's loader of kernel
 * objects (docs/abi.md, "Loading CPU objects").
 *
 * Real kernels: examples compiled in this process for "cpu" and for the
 * baseline "cpu:x86-64" are loaded and run, and every output buffer must be
 * bit for bit what the same object gives when ORC loads it: libm calls,
 * libgcc's f16 conversions, constant pools, jump tables, local memory and
 * barriers, mul_hi, atomics. Objects made from LLVM IR use what our
 * kernels do not (GOT loads of defined and external symbols, data, bss,
 * common symbols, 64-bit pointers to functions). Kernels are loaded and
 * unloaded many times over with no mapping left behind, and the image is
 * never writable and executable (/proc/self/maps).
 *
 * Through the CPU device (cpu.c): objects that refer to system, open or
 * fesetround are refused by the one policy both loaders use.
 *
 * Hostile objects: every truncation of a real object, every byte flipped,
 * random damage, and one case per check with its message; none may crash
 * (run under ASan by make asan).
 */
#define _GNU_SOURCE
#include "cgutil.h"
#include "elfload.h"
#include "rt.h"
#include "xpjit.h"

#include <dlfcn.h>
#include <elf.h>
#include <llvm-c/IRReader.h>
#include <llvm-c/TargetMachine.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- compiling and resolving ---------------------------------------- */

/* A compiled kernel: the modules it came from and its object. */
typedef struct obj {
  xpj_module *m, *s;
  xpj_result *r;
  const uint8_t *data;
  size_t len;
  const char *entry;
} obj;

static void obj_from_module(obj *o, xpj_module *m, const char *kernel,
                            xpj_scalar t, unsigned ndim, const char *target) {
  o->m = m;
  o->s = spec_kernel(m, kernel, t, ndim);
  assert_non_null(o->s);
  xpj_target tg;
  char err[256];
  assert_int_equal(xpj_target_parse(target, &tg, err, sizeof err), XPJ_OK);
  xpj_compile_opts co;
  xpj_compile_opts_default(&co);
  co.isolation = XPJ_ISOLATE_NONE;
  xpj_status st = xpj_compile(o->s, kernel, &tg, &co, XPJ_EMIT_BIN, &o->r);
  if (st != XPJ_OK)
    fail_msg("compile %s for %s: %s", kernel, target, xpj_result_log(o->r));
  o->data = xpj_result_data(o->r, &o->len);
  o->entry = xpj_result_entry(o->r);
}

/* examples/FILE's kernel, or src's when file is NULL */
static void obj_build(obj *o, const char *file, const char *src,
                      const char *kernel, xpj_scalar t, unsigned ndim,
                      const char *target) {
  xpj_module *m = NULL;
  if (file)
    m = load_example(file);
  else
    assert_int_equal(parse_src(src, &m, NULL), XPJ_OK);
  obj_from_module(o, m, kernel, t, ndim, target);
}

static void obj_free(obj *o) {
  xpj_result_destroy(o->r);
  xpj_module_destroy(o->s);
  xpj_module_destroy(o->m);
  memset(o, 0, sizeof *o);
}

/* The names an object asked for, and a policy like cpu.c's: memset and
 * friends, libgcc's conversions, and what libm defines. */
typedef struct asked {
  char names[64][48];
  unsigned n;
  const char *deny; /* refused although allowed */
} asked;

static void *test_resolve(void *ctx, const char *name) {
  asked *a = ctx;
  if (a && a->n < 64)
    snprintf(a->names[a->n++], sizeof a->names[0], "%s", name);
  if (a && a->deny && !strcmp(name, a->deny))
    return NULL;
  static const char *const mem[] = {"memset", "memcpy", "memmove", "memcmp"};
  for (size_t i = 0; i < sizeof mem / sizeof *mem; i++)
    if (!strcmp(name, mem[i]))
      return dlsym(RTLD_DEFAULT, name);
  if (!strncmp(name, "__extend", 8) || !strncmp(name, "__trunc", 7))
    return dlsym(RTLD_DEFAULT, name);
  if (!strncmp(name, "fe", 2))
    return NULL;
  void *libm = dlopen("libm.so.6", RTLD_LAZY | RTLD_NOLOAD);
  void *p = libm ? dlsym(libm, name) : NULL;
  Dl_info di;
  if (libm)
    dlclose(libm);
  if (!p || !dladdr(p, &di) || !di.dli_fname || !strstr(di.dli_fname, "libm"))
    return NULL;
  return dlsym(RTLD_DEFAULT, name);
}

static bool was_asked(const asked *a, const char *name) {
  for (unsigned i = 0; i < a->n; i++)
    if (!strcmp(a->names[i], name))
      return true;
  return false;
}

static xpj_elf_image *load_ok(const uint8_t *d, size_t len, const char *entry,
                              asked *a, void **fn) {
  xpj_elf_image *img = NULL;
  char err[512];
  xpj_status st = xpj_elf_load(d, len, entry, test_resolve, a, &img, fn, err,
                               sizeof err);
  if (st != XPJ_OK)
    fail_msg("loading %s: %s (%s)", entry, err, xpj_status_name(st));
  assert_non_null(img);
  assert_non_null(*fn);
  return img;
}

/* ---- running kernels --------------------------------------------------- */

/* One kernel to run: every view gets the shape shape[0..rank), range
 * kernels run over global, nd-range ones over groups of local. */
typedef struct kcase {
  const char *file, *src, *kernel;
  xpj_scalar type;
  unsigned ndim;
  const char *target;
  bool nd;
  int64_t global[3], local[3];
  int64_t shape[4];
  const char *needs; /* a symbol the object must bind ("": none) */
} kcase;

static const char sw_src[] =
    "fn pick(a: i32, b: i32) -> i32 {\n"
    "    if a == 0 { return b * 3 + 1; }\n"
    "    if a == 1 { return b ^ 77; }\n"
    "    if a == 2 { return b - 9; }\n"
    "    if a == 3 { return b * b; }\n"
    "    if a == 4 { return b >> 2; }\n"
    "    if a == 5 { return b + 1234567; }\n"
    "    if a == 6 { return b * 7 - 2; }\n"
    "    if a == 7 { return -b; }\n"
    "    return 0;\n"
    "}\n"
    "fn table(a: i32) -> i32 {\n"
    "    if a == 0 { return 11; }\n"
    "    if a == 1 { return 29; }\n"
    "    if a == 2 { return 3; }\n"
    "    if a == 3 { return 97; }\n"
    "    if a == 4 { return 50; }\n"
    "    if a == 5 { return 8; }\n"
    "    if a == 6 { return 123; }\n"
    "    return -1;\n"
    "}\n"
    "kernel sw(x: global const i32[], y: global i32[], z: global i32[]) "
    "range {\n"
    "    let i = global_id(0);\n"
    "    if i >= shape(x, 0) { return; }\n"
    "    y[i] = pick(x[i], i32(i));\n"
    "    z[i] = table(x[i]);\n"
    "}\n";

static const kcase cases[] = {
    {"saxpy.xpk", NULL, "saxpy", XPJ_F32, 0, "cpu", false, {1000, 1, 1},
     {0}, {1000}, ""},
    {"math.xpk", NULL, "math_table", XPJ_F32, 0, "cpu", false, {300, 1, 1},
     {0}, {300, 14}, "cbrtf"},
    {"math.xpk", NULL, "math_table", XPJ_F64, 0, "cpu", false, {300, 1, 1},
     {0}, {300, 14}, "cbrt"},
    {"math.xpk", NULL, "activations", XPJ_F16, 1, "cpu:x86-64", false,
     {300, 1, 1}, {0}, {300}, "__extendhfsf2"},
    {"half.xpk", NULL, "haxpy", XPJ_F16, 0, "cpu:x86-64", false, {300, 1, 1},
     {0}, {300}, "__truncsfhf2"},
    {"half.xpk", NULL, "hdot", XPJ_VOID, 0, "cpu:x86-64", true, {128, 1, 1},
     {32, 1, 1}, {1000}, "__extendhfsf2"},
    {NULL, sw_src, "sw", XPJ_VOID, 0, "cpu", false, {1000, 1, 1}, {0},
     {1000}, ""},
    {"intops.xpk", NULL, "div7", XPJ_VOID, 0, "cpu", false, {1000, 1, 1},
     {0}, {1000}, ""},
    {"reduce.xpk", NULL, "block_sum", XPJ_F32, 0, "cpu", true, {448, 1, 1},
     {64, 1, 1}, {1000}, ""},
    {"histogram.xpk", NULL, "histogram_local", XPJ_VOID, 0, "cpu", true,
     {240, 1, 1}, {48, 1, 1}, {1000}, ""},
    {"matmul.xpk", NULL, "matmul_tiled", XPJ_F64, 0, "cpu", true,
     {48, 48, 1}, {16, 16, 1}, {40, 40}, ""},
    {"sort.xpk", NULL, "bitonic_sort_block", XPJ_I32, 0, "cpu", true,
     {512, 1, 1}, {256, 1, 1}, {1024}, ""},
};

/* The flattened arguments of one launch and the buffers of its views. */
typedef struct kargs {
  void *ptrs[128];
  int64_t vals[128];
  unsigned n;
  void *bufs[16];
  size_t sizes[16];
  unsigned nbufs;
} kargs;

static void push(kargs *a, const void *v, size_t size) {
  assert_true(a->n < 128);
  a->vals[a->n] = 0;
  memcpy(&a->vals[a->n], v, size);
  a->ptrs[a->n] = &a->vals[a->n];
  a->n++;
}

static unsigned scalar_bytes(xpj_scalar s) {
  unsigned b = xpj_scalar_bits(s);
  return b < 8 ? 1 : b / 8;
}

/* Element i of a buffer of s: small positive values (no division by zero,
 * no out-of-range index, no NaN from sqrt or log). */
static void put_elem(uint8_t *p, xpj_scalar s, size_t i) {
  double v = 0.1 + (double)(i % 13) / 8.0;
  int64_t n = (int64_t)((i * 7 + 3) % 11 + 1);
  switch (s) {
  case XPJ_F32: {
    float f = (float)v;
    memcpy(p, &f, 4);
    break;
  }
  case XPJ_F64:
    memcpy(p, &v, 8);
    break;
  case XPJ_F16: {
    uint16_t h = xpj_f16_from_double(v);
    memcpy(p, &h, 2);
    break;
  }
  case XPJ_BF16: {
    uint16_t h = xpj_bf16_from_double(v);
    memcpy(p, &h, 2);
    break;
  }
  case XPJ_BOOL:
    *p = (uint8_t)(i & 1);
    break;
  default:
    if (s == XPJ_U8 || s == XPJ_I8)
      n = (int64_t)(i * 37 % 256); /* histogram bins: any byte */
    memcpy(p, &n, scalar_bytes(s));
  }
}

static void args_make(kargs *a, const obj *o, const kcase *c) {
  memset(a, 0, sizeof *a);
  const xpj_func *f = xpj_module_find(o->s, c->kernel);
  assert_non_null(f);
  for (unsigned i = 0; i < xpj_func_param_count(f); i++) {
    xpj_type t = xpj_func_param_type(f, i);
    xpj_scalar s = xpj_type_elem_scalar(o->s, t);
    if (xpj_type_kind_of(o->s, t) == XPJ_TYPE_SCALAR) {
      uint8_t v[8] = {0};
      put_elem(v, s, 5);
      push(a, v, 8);
      continue;
    }
    assert_int_equal(xpj_type_kind_of(o->s, t), XPJ_TYPE_VIEW);
    int rank = xpj_type_rank(o->s, t);
    assert_true(rank >= 1 && rank <= 4);
    size_t count = 1;
    for (int d = 0; d < rank; d++)
      count *= (size_t)c->shape[d];
    size_t es = scalar_bytes(s);
    uint8_t *buf = malloc(count * es);
    assert_non_null(buf);
    for (size_t k = 0; k < count; k++)
      put_elem(buf + k * es, s, k);
    assert_true(a->nbufs < 16);
    a->bufs[a->nbufs] = buf;
    a->sizes[a->nbufs++] = count * es;
    push(a, &buf, sizeof buf);
    int64_t zero = 0, stride = 1, strides[4];
    push(a, &zero, 8);
    for (int d = rank - 1; d >= 0; d--) {
      strides[d] = stride;
      stride *= c->shape[d];
    }
    for (int d = 0; d < rank; d++)
      push(a, &c->shape[d], 8);
    for (int d = 0; d < rank; d++)
      push(a, &strides[d], 8);
  }
}

static void args_free(kargs *a) {
  for (unsigned i = 0; i < a->nbufs; i++)
    free(a->bufs[i]);
}

/* Runs the kernel as the thread pool would, in uneven chunks. */
static void run(cpu_entry fn, const obj *o, const kcase *c, kargs *a) {
  int64_t launch[9];
  for (int d = 0; d < 3; d++) {
    launch[d] = c->global[d];
    launch[3 + d] = c->nd ? c->local[d] : 1;
    launch[6 + d] = c->nd ? c->global[d] / c->local[d] : c->global[d];
  }
  int64_t total = launch[6] * launch[7] * launch[8];
  uint64_t lb = xpj_result_local_bytes(o->r);
  uint64_t sb = xpj_result_scratch_bytes(o->r) * XPJ_CPU_SCRATCH_STRIDE;
  void *lm = malloc(lb ? lb : 16), *sc = malloc(sb ? sb : 16);
  assert_non_null(lm);
  assert_non_null(sc);
  memset(lm, 0xa5, lb ? lb : 16);
  int64_t cut1 = total / 3, cut2 = total - total / 5;
  fn(a->ptrs, launch, lm, sc, 0, cut1);
  fn(a->ptrs, launch, lm, sc, cut1, cut2);
  fn(a->ptrs, launch, lm, sc, cut2, total);
  free(lm);
  free(sc);
}

/* saxpy's y after y = a * x + y, where a is element 5 of the pattern and
 * x and y start as the pattern. */
static void check_saxpy(const float *y) {
  float a = (float)(0.1 + 5.0 / 8.0);
  for (int k = 0; k < 1000; k++) {
    float v = (float)(0.1 + (double)(k % 13) / 8.0), want = a * v + v;
    if (fabsf(y[k] - want) > 1e-6f * want)
      fail_msg("saxpy: y[%d] = %g, want %g", k, (double)y[k], (double)want);
  }
}

/* Every case, loaded by elfload.c and by ORC: the same bytes out. */
static void test_examples_match_orc(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const kcase *c = &cases[i];
    obj o;
    obj_build(&o, c->file, c->src, c->kernel, c->type, c->ndim, c->target);
    asked as = {0};
    void *fn = NULL;
    xpj_elf_image *img = load_ok(o.data, o.len, o.entry, &as, &fn);
    if (c->needs[0] && !was_asked(&as, c->needs))
      fail_msg("%s (%s) did not bind %s", c->kernel, c->target, c->needs);
    kargs mine, ref;
    args_make(&mine, &o, c);
    args_make(&ref, &o, c);
    run((cpu_entry)(uintptr_t)fn, &o, c, &mine);
    LLVMOrcLLJITRef jit;
    cpu_entry rfn =
        (cpu_entry)(uintptr_t)jit_load(o.data, o.len, o.entry, &jit);
    run(rfn, &o, c, &ref);
    bool changed = false;
    for (unsigned b = 0; b < mine.nbufs; b++) {
      if (memcmp(mine.bufs[b], ref.bufs[b], mine.sizes[b]))
        fail_msg("%s (%s): buffer %u differs from ORC's", c->kernel,
                 c->target, b);
      kargs init;
      args_make(&init, &o, c);
      changed |= memcmp(mine.bufs[b], init.bufs[b], mine.sizes[b]) != 0;
      args_free(&init);
    }
    if (!changed)
      fail_msg("%s: the kernel wrote nothing", c->kernel);
    /* and a few exact results */
    if (!strcmp(c->kernel, "saxpy"))
      check_saxpy(mine.bufs[1]);
    if (!strcmp(c->kernel, "sw")) {
      const int32_t *x = mine.bufs[0], *y = mine.bufs[1], *z = mine.bufs[2];
      static const int32_t tab[] = {11, 29, 3, 97, 50, 8, 123};
      for (int32_t k = 0; k < 1000; k++) {
        int32_t a = x[k], b = k;
        int32_t want = a == 0 ? b * 3 + 1 : a == 1 ? b ^ 77 : a == 2 ? b - 9
                       : a == 3 ? b * b : a == 4 ? b >> 2 : a == 5 ? b + 1234567
                       : a == 6 ? b * 7 - 2 : a == 7 ? -b : 0;
        assert_int_equal(y[k], want);
        assert_int_equal(z[k], a >= 0 && a < 7 ? tab[a] : -1);
      }
      /* it did use a jump table: relocations in .rodata */
      assert_non_null(memmem(o.data, o.len, ".rela.rodata", 13));
    }
    if (!strcmp(c->kernel, "math_table") && c->type == XPJ_F64) {
      const double *x = mine.bufs[0], *out = mine.bufs[1];
      for (int k = 0; k < 300; k++) {
        assert_true(out[k * 14 + 1] == cbrt(x[k]));
        assert_true(out[k * 14 + 11] == sinh(x[k]));
      }
    }
    args_free(&mine);
    args_free(&ref);
    LLVMOrcDisposeLLJIT(jit);
    xpj_elf_unload(img);
    obj_free(&o);
  }
}

/* ---- objects from LLVM IR: what our kernels do not use ------------------ */

static const char ir_src[] =
    "@counter = global i64 41, align 8\n"
    "@zeros = global [64 x i64] zeroinitializer, align 64\n"
    "@fnptr = global ptr @cos, align 8\n"
    "@cm = common global i64 0, align 8\n"
    "@msg = private unnamed_addr constant [6 x i8] c\"hello\\00\"\n"
    "declare double @cos(double)\n"
    "define ptr @get_cos() { ret ptr @cos }\n"
    "define ptr @get_counter() { ret ptr @counter }\n"
    "define i64 @bump() {\n"
    "  %v = load i64, ptr @counter\n"
    "  %n = add i64 %v, 1\n"
    "  store i64 %n, ptr @counter\n"
    "  ret i64 %n\n"
    "}\n"
    "define i64 @bump_twice() {\n"
    "  %a = call i64 @bump()\n"
    "  %b = call i64 @bump()\n"
    "  ret i64 %b\n"
    "}\n"
    "define double @via_ptr(double %x) {\n"
    "  %f = load ptr, ptr @fnptr\n"
    "  %r = call double %f(double %x)\n"
    "  ret double %r\n"
    "}\n"
    "define i64 @common_bump() {\n"
    "  %v = load i64, ptr @cm\n"
    "  %n = add i64 %v, 3\n"
    "  store i64 %n, ptr @cm\n"
    "  ret i64 %n\n"
    "}\n"
    "define i64 @zeros_sum(i64 %k) {\n"
    "  %p = getelementptr [64 x i64], ptr @zeros, i64 0, i64 %k\n"
    "  %v = load i64, ptr %p\n"
    "  %n = add i64 %v, %k\n"
    "  store i64 %n, ptr %p\n"
    "  ret i64 %n\n"
    "}\n"
    "define i8 @msg_at(i64 %k) {\n"
    "  %p = getelementptr [6 x i8], ptr @msg, i64 0, i64 %k\n"
    "  %v = load i8, ptr %p\n"
    "  ret i8 %v\n"
    "}\n";

/* ir_src compiled for x86-64 as the CPU target does (PIC, the default code
 * model); malloc'd. */
static uint8_t *ir_object(size_t *len) {
  jit_init();
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMMemoryBufferRef mb = LLVMCreateMemoryBufferWithMemoryRangeCopy(
      ir_src, sizeof ir_src - 1, "ir");
  LLVMModuleRef mod = NULL;
  char *msg = NULL;
  if (LLVMParseIRInContext(ctx, mb, &mod, &msg))
    fail_msg("IR: %s", msg);
  LLVMTargetRef t;
  assert_int_equal(LLVMGetTargetFromTriple("x86_64-pc-linux-gnu", &t, &msg), 0);
  LLVMTargetMachineRef tm = LLVMCreateTargetMachine(
      t, "x86_64-pc-linux-gnu", "x86-64", "", LLVMCodeGenLevelDefault,
      LLVMRelocPIC, LLVMCodeModelDefault);
  LLVMSetTarget(mod, "x86_64-pc-linux-gnu");
  LLVMMemoryBufferRef out = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMObjectFile, &msg, &out))
    fail_msg("emit: %s", msg);
  *len = LLVMGetBufferSize(out);
  uint8_t *d = malloc(*len);
  assert_non_null(d);
  memcpy(d, LLVMGetBufferStart(out), *len);
  LLVMDisposeMemoryBuffer(out);
  LLVMDisposeTargetMachine(tm);
  LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
  return d;
}

/* Relocation types in an object (bit t set for type t < 64). */
static uint64_t reloc_types(const uint8_t *d, size_t len) {
  Elf64_Ehdr eh;
  memcpy(&eh, d, sizeof eh);
  uint64_t types = 0;
  for (unsigned i = 0; i < eh.e_shnum; i++) {
    Elf64_Shdr sh;
    memcpy(&sh, d + eh.e_shoff + i * sizeof sh, sizeof sh);
    if (sh.sh_type != SHT_RELA)
      continue;
    for (size_t k = 0; k < sh.sh_size / sizeof(Elf64_Rela); k++) {
      Elf64_Rela r;
      memcpy(&r, d + sh.sh_offset + k * sizeof r, sizeof r);
      if (ELF64_R_TYPE(r.r_info) < 64)
        types |= (uint64_t)1 << ELF64_R_TYPE(r.r_info);
    }
  }
  (void)len;
  return types;
}

static void test_got_data_bss_common(void **state) {
  (void)state;
  size_t len;
  uint8_t *d = ir_object(&len);
  uint64_t types = reloc_types(d, len);
  assert_true(types & ((uint64_t)1 << R_X86_64_REX_GOTPCRELX));
  assert_true(types & ((uint64_t)1 << R_X86_64_64));
  assert_true(types & ((uint64_t)1 << R_X86_64_PLT32));
  assert_true(types & ((uint64_t)1 << R_X86_64_PC32));
  void *fn;
  asked as = {0};
  /* a GOT slot of an external function holds its real address */
  xpj_elf_image *img = load_ok(d, len, "get_cos", &as, &fn);
  assert_true(((void *(*)(void))(uintptr_t)fn)() == dlsym(RTLD_DEFAULT, "cos"));
  assert_true(was_asked(&as, "cos"));
  xpj_elf_unload(img);
  /* a GOT slot of a defined symbol, data written through it, a call
   * through the PLT to a defined global function; each image its own */
  for (int round = 0; round < 2; round++) {
    img = load_ok(d, len, "bump_twice", NULL, &fn);
    int64_t (*bt)(void) = (int64_t(*)(void))(uintptr_t)fn;
    assert_int_equal(bt(), 43);
    assert_int_equal(bt(), 45);
    xpj_elf_unload(img);
  }
  img = load_ok(d, len, "get_counter", NULL, &fn);
  int64_t *counter = ((int64_t * (*)(void))(uintptr_t) fn)();
  assert_int_equal(*counter, 41);
  void *base;
  size_t size;
  xpj_elf_image_range(img, &base, &size);
  assert_true((uint8_t *)counter >= (uint8_t *)base &&
              (uint8_t *)counter < (uint8_t *)base + size);
  xpj_elf_unload(img);
  /* a pointer to an external function in data (R_X86_64_64) */
  img = load_ok(d, len, "via_ptr", NULL, &fn);
  assert_true(((double (*)(double))(uintptr_t)fn)(0.5) == cos(0.5));
  xpj_elf_unload(img);
  /* a common symbol, zeroed and writable */
  img = load_ok(d, len, "common_bump", NULL, &fn);
  assert_int_equal(((int64_t(*)(void))(uintptr_t)fn)(), 3);
  assert_int_equal(((int64_t(*)(void))(uintptr_t)fn)(), 6);
  xpj_elf_unload(img);
  /* bss: zeroed, writable, 64-aligned */
  img = load_ok(d, len, "zeros_sum", NULL, &fn);
  int64_t (*zs)(int64_t) = (int64_t(*)(int64_t))(uintptr_t)fn;
  for (int64_t k = 0; k < 64; k++)
    assert_int_equal(zs(k), k);
  assert_int_equal(zs(63), 126);
  xpj_elf_unload(img);
  /* read-only data through a PC-relative address */
  img = load_ok(d, len, "msg_at", NULL, &fn);
  for (int k = 0; k < 5; k++)
    assert_int_equal(((char (*)(int64_t))(uintptr_t)fn)(k), "hello"[k]);
  xpj_elf_unload(img);
  /* cos refused: the load fails, naming it */
  asked deny = {.deny = "cos"};
  char err[256];
  xpj_elf_image *none = (void *)1;
  fn = (void *)1;
  assert_int_equal(xpj_elf_load(d, len, "msg_at", test_resolve, &deny, &none,
                                &fn, err, sizeof err),
                   XPJ_ERR_INVALID);
  assert_null(none);
  assert_null(fn);
  assert_non_null(strstr(err, "\"cos\""));
  free(d);
}

/* ---- W^X and repeated loads -------------------------------------------- */

/* The permissions of the mappings that overlap [base, base + size), as
 * "r-xp" strings, and how many. */
static unsigned maps_of(const void *base, size_t size, char perms[][8],
                        unsigned max) {
  FILE *f = fopen("/proc/self/maps", "r");
  assert_non_null(f);
  char line[512];
  unsigned n = 0;
  uintptr_t b = (uintptr_t)base, e = b + size;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char p[8];
    if (sscanf(line, "%lx-%lx %7s", &lo, &hi, p) != 3)
      continue;
    if (hi <= b || lo >= e)
      continue;
    if (n < max)
      snprintf(perms[n], 8, "%s", p);
    n++;
  }
  fclose(f);
  return n;
}

static unsigned count_maps(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  assert_non_null(f);
  char line[512];
  unsigned n = 0;
  while (fgets(line, sizeof line, f))
    n++;
  fclose(f);
  return n;
}

static void test_wx(void **state) {
  (void)state;
  size_t len;
  uint8_t *d = ir_object(&len);
  void *fn, *base;
  size_t size;
  xpj_elf_image *img = load_ok(d, len, "bump", NULL, &fn);
  xpj_elf_image_range(img, &base, &size);
  char perms[8][8];
  unsigned n = maps_of(base, size, perms, 8);
  assert_true(n >= 2 && n <= 8);
  bool code = false, rw = false;
  for (unsigned i = 0; i < n; i++) {
    if (strchr(perms[i], 'w') && strchr(perms[i], 'x'))
      fail_msg("a mapping of the image is writable and executable: %s",
               perms[i]);
    code |= !strcmp(perms[i], "r-xp"); /* code, constants and the GOT */
    rw |= !strcmp(perms[i], "rw-p");
  }
  assert_true(code && rw);
  /* the entry point is in the code, and the code is not writable */
  char p[1][8];
  assert_int_equal(maps_of(fn, 1, p, 1), 1);
  assert_string_equal(p[0], "r-xp");
  xpj_elf_unload(img);
  /* gone after unload */
  assert_int_equal(maps_of(base, size, perms, 8), 0);
  free(d);
  /* a kernel: code and constants */
  obj o;
  obj_build(&o, NULL, sw_src, "sw", XPJ_VOID, 0, "cpu");
  img = load_ok(o.data, o.len, o.entry, NULL, &fn);
  xpj_elf_image_range(img, &base, &size);
  n = maps_of(base, size, perms, 8);
  for (unsigned i = 0; i < n && i < 8; i++)
    assert_true(!strchr(perms[i], 'w') || !strchr(perms[i], 'x'));
  assert_int_equal(maps_of(fn, 1, p, 1), 1);
  assert_string_equal(p[0], "r-xp");
  xpj_elf_unload(img);
  obj_free(&o);
}

/* Several kernels loaded at once, unloaded in another order, again and
 * again: each runs right, and nothing stays mapped. */
static void test_load_unload_many(void **state) {
  (void)state;
  enum { NK = 5 };
  static const size_t pick[NK] = {0, 1, 3, 6, 8};
  obj o[NK];
  for (int i = 0; i < NK; i++) {
    const kcase *c = &cases[pick[i]];
    obj_build(&o[i], c->file, c->src, c->kernel, c->type, c->ndim, c->target);
  }
  xpj_elf_image *img[NK] = {0};
  void *fn[NK];
  unsigned before = count_maps();
  uint32_t seed = 7;
  for (int round = 0; round < 60; round++) {
    for (int i = 0; i < NK; i++) {
      seed = seed * 1664525u + 1013904223u;
      int k = (int)(seed >> 16) % NK;
      if (img[k]) {
        xpj_elf_unload(img[k]);
        img[k] = NULL;
      } else {
        img[k] = load_ok(o[k].data, o[k].len, o[k].entry, NULL, &fn[k]);
      }
    }
    /* saxpy, whenever it is loaded */
    if (img[0]) {
      kargs a;
      args_make(&a, &o[0], &cases[0]);
      run((cpu_entry)(uintptr_t)fn[0], &o[0], &cases[0], &a);
      check_saxpy(a.bufs[1]);
      args_free(&a);
    }
  }
  for (int i = 0; i < NK; i++) {
    xpj_elf_unload(img[i]);
    obj_free(&o[i]);
  }
  xpj_elf_unload(NULL);
  assert_int_equal(count_maps(), before);
}

/* ---- the policy, through the CPU device (cpu.c) ---------------------- */

/* A copy of o's object with the symbol name from renamed to to (no
 * longer than from, padded with NULs). */
static uint8_t *rename_symbol(const obj *o, const char *from, const char *to) {
  uint8_t *d = malloc(o->len);
  assert_non_null(d);
  memcpy(d, o->data, o->len);
  Elf64_Ehdr eh;
  memcpy(&eh, d, sizeof eh);
  for (unsigned i = 0; i < eh.e_shnum; i++) {
    Elf64_Shdr sh, st;
    memcpy(&sh, d + eh.e_shoff + i * sizeof sh, sizeof sh);
    if (sh.sh_type != SHT_SYMTAB)
      continue;
    memcpy(&st, d + eh.e_shoff + sh.sh_link * sizeof st, sizeof st);
    size_t fl = strlen(from);
    for (size_t k = 0; k < sh.sh_size / sizeof(Elf64_Sym); k++) {
      Elf64_Sym s;
      memcpy(&s, d + sh.sh_offset + k * sizeof s, sizeof s);
      char *n = (char *)d + st.sh_offset + s.st_name;
      if (s.st_name && !strcmp(n, from)) {
        memset(n, 0, fl);
        memcpy(n, to, strlen(to));
        return d;
      }
    }
  }
  fail_msg("no symbol %s", from);
  return NULL;
}

static xpj_device *cpu_device(xpj_context **ctx) {
  xpj_context_desc cd = {0};
  cd.visible = "cpu";
  assert_int_equal(xpj_context_create(&cd, ctx), XPJ_OK);
  xpj_device *dev = xpj_device_get(*ctx, 0);
  assert_non_null(dev);
  return dev;
}

static void test_policy_through_device(void **state) {
  (void)state;
  obj m, h;
  obj_build(&m, "math.xpk", NULL, "math_table", XPJ_F32, 0, "cpu");
  obj_build(&h, "math.xpk", NULL, "activations", XPJ_F16, 1, "cpu:x86-64");
  struct {
    const obj *o;
    const char *from, *to;
  } bad[] = {{&m, "expm1f", "system"},
             {&m, "tanf", "open"},
             {&h, "__extendhfsf2", "fesetround"},
             {&h, "__extendhfsf2", "feenableexcept"}};
  for (int loader = 0; loader < 2; loader++) {
    if (loader)
      setenv("XPJIT_CPU_LOADER", "orc", 1);
    else
      unsetenv("XPJIT_CPU_LOADER");
    xpj_context *ctx;
    xpj_device *dev = cpu_device(&ctx);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
      uint8_t *d = rename_symbol(bad[i].o, bad[i].from, bad[i].to);
      void *native = NULL;
      xpj_status st = dev->ops->kernel_load(dev, d, bad[i].o->len,
                                            bad[i].o->entry, &native);
      assert_int_equal(st, XPJ_ERR_DEVICE);
      assert_null(native);
      const char *msg = xpj_last_error();
      if (!strstr(msg, "loading the kernel's object") ||
          !strstr(msg, bad[i].to))
        fail_msg("%s loader, %s: '%s'", loader ? "ORC" : "ELF", bad[i].to,
                 msg);
      /* elfload.c's own words when it is the loader */
      if (!loader && !strstr(msg, "not available to kernels"))
        fail_msg("'%s'", msg);
      free(d);
    }
    /* the real objects load and run through either loader */
    const obj *good[] = {&m, &h};
    for (int i = 0; i < 2; i++) {
      void *native = NULL;
      assert_int_equal(dev->ops->kernel_load(dev, good[i]->data, good[i]->len,
                                             good[i]->entry, &native),
                       XPJ_OK);
      dev->ops->kernel_unload(dev, native);
    }
    xpj_context_destroy(ctx);
  }
  unsetenv("XPJIT_CPU_LOADER");
  obj_free(&m);
  obj_free(&h);
}

/* The public API with either loader: the same results. */
static void test_public_api_both_loaders(void **state) {
  (void)state;
  enum { N = 777 };
  float out[2][N * 14];
  for (int loader = 0; loader < 2; loader++) {
    if (loader)
      setenv("XPJIT_CPU_LOADER", "orc", 1);
    else
      unsetenv("XPJIT_CPU_LOADER");
    xpj_context *ctx;
    xpj_device *dev = cpu_device(&ctx);
    xpj_program *p;
    xpj_kernel *k;
    xpj_queue *q;
    assert_int_equal(
        xpj_program_create_file(ctx, "examples/math.xpk", NULL, &p), XPJ_OK);
    assert_int_equal(
        xpj_program_get_kernel(p, "math_table", "T=f32", 0, dev, NULL, &k),
        XPJ_OK);
    assert_int_equal(xpj_queue_create(dev, NULL, &q), XPJ_OK);
    float *x, *y;
    assert_int_equal(xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * 4, 0, (void **)&x),
                     XPJ_OK);
    assert_int_equal(
        xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * 14 * 4, 0, (void **)&y), XPJ_OK);
    for (int i = 0; i < N; i++)
      x[i] = (float)(i - N / 2) / 97.0f;
    xpj_array ax = xpj_array_1d(x, XPJ_F32, N);
    xpj_array ay = xpj_array_2d(y, XPJ_F32, N, 14);
    xpj_arg a[] = {xpj_arg_array(&ax), xpj_arg_array(&ay)};
    xpj_range r = xpj_range_1d(N, 0);
    assert_int_equal(xpj_launch(q, k, &r, 2, a, NULL), XPJ_OK);
    assert_int_equal(xpj_queue_wait(q), XPJ_OK);
    memcpy(out[loader], y, sizeof out[loader]);
    for (int i = 0; i < N; i++)
      assert_true(y[i * 14 + 1] == cbrtf(x[i]));
    xpj_mem_free(dev, x);
    xpj_mem_free(dev, y);
    xpj_queue_destroy(q);
    xpj_program_destroy(p);
    xpj_context_destroy(ctx);
  }
  unsetenv("XPJIT_CPU_LOADER");
  assert_memory_equal(out[0], out[1], sizeof out[0]);
}

/* ---- hostile objects --------------------------------------------------- */

static xpj_status try_load(const uint8_t *d, size_t len, const char *entry,
                           char *err, size_t errsize) {
  xpj_elf_image *img = (void *)1;
  void *fn = (void *)1;
  xpj_status st =
      xpj_elf_load(d, len, entry, test_resolve, NULL, &img, &fn, err, errsize);
  if (st == XPJ_OK) {
    assert_non_null(img);
    assert_non_null(fn);
  } else {
    assert_null(img);
    assert_null(fn);
    if (!err[0])
      fail_msg("status %s without a message", xpj_status_name(st));
  }
  xpj_elf_unload(img);
  return st;
}

static void test_truncations(void **state) {
  (void)state;
  obj o;
  obj_build(&o, "math.xpk", NULL, "math_table", XPJ_F32, 0, "cpu");
  char err[512];
  for (size_t n = 0; n < o.len; n++) {
    uint8_t *d = malloc(n ? n : 1); /* exact size: ASan sees overreads */
    memcpy(d, o.data, n);
    assert_int_equal(try_load(d, n, o.entry, err, sizeof err), XPJ_ERR_INVALID);
    free(d);
  }
  assert_int_equal(try_load(o.data, o.len, o.entry, err, sizeof err), XPJ_OK);
  obj_free(&o);
}

/* Every byte flipped three ways, then random damage: loaded or refused
 * with a message, never a crash (the code is never run). */
static void test_flipped_bytes(void **state) {
  (void)state;
  obj o;
  obj_build(&o, NULL, sw_src, "sw", XPJ_VOID, 0, "cpu");
  uint8_t *d = malloc(o.len);
  char err[512];
  unsigned refused = 0, loaded = 0;
  static const uint8_t masks[] = {0x01, 0x80, 0xff};
  for (size_t i = 0; i < o.len; i++)
    for (size_t m = 0; m < sizeof masks; m++) {
      memcpy(d, o.data, o.len);
      d[i] ^= masks[m];
      if (try_load(d, o.len, o.entry, err, sizeof err) == XPJ_OK)
        loaded++;
      else
        refused++;
    }
  uint32_t seed = 99;
  for (int it = 0; it < 3000; it++) {
    memcpy(d, o.data, o.len);
    int nflip = 1 + it % 8;
    for (int f = 0; f < nflip; f++) {
      seed = seed * 1664525u + 1013904223u;
      /* mostly the headers, the tables and the relocations */
      size_t at = it & 1 ? (seed >> 8) % o.len
                         : o.len - 1 - (seed >> 8) % (o.len / 3);
      seed = seed * 1664525u + 1013904223u;
      d[at] = (uint8_t)(seed >> 24);
    }
    if (try_load(d, o.len, o.entry, err, sizeof err) == XPJ_OK)
      loaded++;
    else
      refused++;
  }
  assert_true(refused > 1000);
  assert_true(loaded > 100); /* code and constant bytes do not matter */
  free(d);
  obj_free(&o);
}

/* A mutable copy of an object, and its parts. */
typedef struct ed {
  uint8_t *d;
  size_t len;
  Elf64_Ehdr eh;
} ed;

static void ed_open(ed *e, const uint8_t *d, size_t len) {
  e->d = malloc(len);
  memcpy(e->d, d, len);
  e->len = len;
  memcpy(&e->eh, d, sizeof e->eh);
}

static Elf64_Shdr *shdr_at(ed *e, unsigned i) {
  return (Elf64_Shdr *)(void *)(e->d + e->eh.e_shoff + i * sizeof(Elf64_Shdr));
}

/* The index of the section named name, or of the first of type (name
 * NULL). */
static unsigned sec_find(ed *e, const char *name, uint32_t type) {
  Elf64_Shdr *ns = shdr_at(e, e->eh.e_shstrndx);
  for (unsigned i = 1; i < e->eh.e_shnum; i++) {
    Elf64_Shdr *s = shdr_at(e, i);
    const char *n = (const char *)e->d + ns->sh_offset + s->sh_name;
    if (name ? !strcmp(n, name) : s->sh_type == type)
      return i;
  }
  fail_msg("no section %s", name ? name : "of that type");
  return 0;
}

/* The symbol table's string table. */
static Elf64_Shdr *strtab_of(ed *e) {
  return shdr_at(e, shdr_at(e, sec_find(e, NULL, SHT_SYMTAB))->sh_link);
}

static Elf64_Rela *rela_at(ed *e, const char *sec, size_t k) {
  Elf64_Shdr *s = shdr_at(e, sec_find(e, sec, 0));
  assert_true(k < s->sh_size / sizeof(Elf64_Rela));
  return (Elf64_Rela *)(void *)(e->d + s->sh_offset + k * sizeof(Elf64_Rela));
}

/* The symbol named name. */
static Elf64_Sym *sym_named(ed *e, const char *name) {
  Elf64_Shdr *st = shdr_at(e, sec_find(e, NULL, SHT_SYMTAB));
  Elf64_Shdr *str = shdr_at(e, st->sh_link);
  for (size_t k = 0; k < st->sh_size / sizeof(Elf64_Sym); k++) {
    Elf64_Sym *s = (Elf64_Sym *)(void *)(e->d + st->sh_offset + k * sizeof *s);
    if (!strcmp((const char *)e->d + str->sh_offset + s->st_name, name))
      return s;
  }
  fail_msg("no symbol %s", name);
  return NULL;
}

/* The object is refused with status st and a message containing want. */
static void refused(ed *e, const char *entry, xpj_status st, const char *want,
                    const char *what) {
  char err[512];
  xpj_status got = try_load(e->d, e->len, entry, err, sizeof err);
  if (got != st || !strstr(err, want))
    fail_msg("%s: status %s, '%s' (want %s and '%s')", what,
             xpj_status_name(got), err, xpj_status_name(st), want);
  free(e->d);
}

static void test_each_check(void **state) {
  (void)state;
  obj o; /* a jump table: .rodata with relocations */
  obj_build(&o, NULL, sw_src, "sw", XPJ_VOID, 0, "cpu");
  obj m; /* libm calls */
  obj_build(&m, "math.xpk", NULL, "math_table", XPJ_F32, 0, "cpu");
  const uint8_t *D = o.data;
  size_t L = o.len;
  const char *E = o.entry;
  ed e;
  char err[512];

  ed_open(&e, D, L);
  e.d[EI_CLASS] = ELFCLASS32;
  refused(&e, E, XPJ_ERR_INVALID, "ELF class 1, not 64-bit", "class");
  ed_open(&e, D, L);
  e.d[EI_DATA] = ELFDATA2MSB;
  refused(&e, E, XPJ_ERR_INVALID, "not little-endian", "data");
  ed_open(&e, D, L);
  e.d[0] = 0x7e;
  refused(&e, E, XPJ_ERR_INVALID, "not an ELF file", "magic");
  ed_open(&e, D, L);
  e.d[18] = EM_AARCH64;
  e.d[19] = 0;
  refused(&e, E, XPJ_ERR_INVALID, "machine 183, not x86-64", "machine");
  ed_open(&e, D, L);
  e.d[16] = ET_DYN;
  refused(&e, E, XPJ_ERR_INVALID, "not a relocatable object", "type");
  ed_open(&e, D, L);
  e.d[EI_OSABI] = 97; /* ARM */
  refused(&e, E, XPJ_ERR_INVALID, "OS ABI 97", "OS ABI");
  ed_open(&e, D, L);
  memset(e.d + 40, 0xff, 8); /* e_shoff */
  refused(&e, E, XPJ_ERR_INVALID, "lie outside the object", "e_shoff");
  ed_open(&e, D, L);
  e.d[60] = e.d[61] = 0; /* e_shnum */
  refused(&e, E, XPJ_ERR_INVALID, "no section headers", "e_shnum");
  ed_open(&e, D, L);
  e.d[62] = 0xf0; /* e_shstrndx */
  refused(&e, E, XPJ_ERR_INVALID, "section name table index", "e_shstrndx");
  ed_open(&e, D, L);
  e.d[58] = 40; /* e_shentsize */
  refused(&e, E, XPJ_ERR_INVALID, "section header size 40", "e_shentsize");

  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".text", 0))->sh_size = (uint64_t)1 << 40;
  refused(&e, E, XPJ_ERR_INVALID, "lie outside the object", "text size");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".text", 0))->sh_offset = UINT64_MAX - 8;
  refused(&e, E, XPJ_ERR_INVALID, "lie outside the object", "text offset");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".text", 0))->sh_addralign = (uint64_t)1 << 20;
  refused(&e, E, XPJ_ERR_INVALID, "alignment 1048576", "huge alignment");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".text", 0))->sh_addralign = 24;
  refused(&e, E, XPJ_ERR_INVALID, "alignment 24", "alignment not 2^n");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".text", 0))->sh_addralign = (uint64_t)1 << 63;
  refused(&e, E, XPJ_ERR_INVALID, "alignment", "alignment 2^63");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".text", 0))->sh_flags |= SHF_WRITE;
  refused(&e, E, XPJ_ERR_INVALID, "writable and executable", "W+X");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".rodata", 0))->sh_flags |= SHF_TLS;
  refused(&e, E, XPJ_ERR_INVALID, "thread-local storage", "TLS section");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".rodata", 0))->sh_type = SHT_INIT_ARRAY;
  refused(&e, E, XPJ_ERR_INVALID, "constructors", ".init_array");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".rodata", 0))->sh_type = SHT_DYNAMIC;
  refused(&e, E, XPJ_ERR_INVALID, "type 0x6", "dynamic");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".rodata", 0))->sh_flags |= SHF_COMPRESSED;
  refused(&e, E, XPJ_ERR_INVALID, "compressed", "compressed");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".rodata", 0))->sh_type = SHT_NOBITS;
  refused(&e, E, XPJ_ERR_INVALID, "no contents (NOBITS)", "reloc in NOBITS");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".text", 0))->sh_name = 0xfffffff;
  refused(&e, E, XPJ_ERR_INVALID, "outside the section name table", "name");
  /* a huge zero-filled section, and an image past the limit */
  ed_open(&e, D, L);
  {
    Elf64_Shdr *s = shdr_at(&e, sec_find(&e, ".note.GNU-stack", 0));
    s->sh_type = SHT_NOBITS;
    s->sh_flags = SHF_ALLOC | SHF_WRITE;
    s->sh_size = (uint64_t)1 << 40;
  }
  refused(&e, E, XPJ_ERR_INVALID, "an image has at most", "huge bss");
  ed_open(&e, D, L);
  {
    Elf64_Shdr *s = shdr_at(&e, sec_find(&e, ".note.GNU-stack", 0));
    s->sh_type = SHT_NOBITS;
    s->sh_flags = SHF_ALLOC | SHF_WRITE;
    s->sh_size = (uint64_t)256 << 20;
  }
  refused(&e, E, XPJ_ERR_INVALID, "the image would take more than", "total");
  /* a big one within the limit loads */
  ed_open(&e, D, L);
  {
    Elf64_Shdr *s = shdr_at(&e, sec_find(&e, ".note.GNU-stack", 0));
    s->sh_type = SHT_NOBITS;
    s->sh_flags = SHF_ALLOC | SHF_WRITE;
    s->sh_size = (uint64_t)64 << 20;
    s->sh_addralign = 4096;
  }
  assert_int_equal(try_load(e.d, e.len, E, err, sizeof err), XPJ_OK);
  free(e.d);

  /* symbol tables and strings */
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, NULL, SHT_SYMTAB))->sh_link = 0;
  refused(&e, E, XPJ_ERR_INVALID, "string table", "symtab link");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, NULL, SHT_SYMTAB))->sh_entsize = 16;
  refused(&e, E, XPJ_ERR_INVALID, "entries of 16 bytes", "symtab entsize");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, NULL, SHT_SYMTAB))->sh_type = SHT_PROGBITS;
  refused(&e, E, XPJ_ERR_INVALID, "0 symbol tables", "no symtab");
  ed_open(&e, D, L);
  strtab_of(&e)->sh_size = 3;
  refused(&e, E, XPJ_ERR_INVALID, "is outside the", "strtab cut");
  ed_open(&e, D, L);
  {
    /* the string table's last byte is no NUL: its last name has no end */
    Elf64_Shdr *st = strtab_of(&e);
    e.d[st->sh_offset + st->sh_size - 1] = 'x';
  }
  refused(&e, E, XPJ_ERR_INVALID, "is outside the", "no NUL");
  ed_open(&e, D, L);
  sym_named(&e, E)->st_shndx = 0xfff0;
  refused(&e, E, XPJ_ERR_INVALID, "section index 0xfff0", "reserved shndx");
  ed_open(&e, D, L);
  sym_named(&e, E)->st_shndx = 300;
  refused(&e, E, XPJ_ERR_INVALID, "section index 300 out of range", "shndx");
  ed_open(&e, D, L);
  sym_named(&e, E)->st_value = (uint64_t)1 << 50;
  refused(&e, E, XPJ_ERR_INVALID, "past the end of its section", "value");
  ed_open(&e, D, L);
  sym_named(&e, E)->st_info = ELF64_ST_INFO(STB_GLOBAL, STT_GNU_IFUNC);
  refused(&e, E, XPJ_ERR_INVALID, "IFUNC", "ifunc");
  ed_open(&e, D, L);
  sym_named(&e, E)->st_info = ELF64_ST_INFO(STB_GLOBAL, STT_TLS);
  refused(&e, E, XPJ_ERR_INVALID, "thread-local", "tls symbol");
  ed_open(&e, D, L);
  sym_named(&e, E)->st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT);
  refused(&e, E, XPJ_ERR_INVALID, "not a function", "entry is data");
  ed_open(&e, D, L);
  sym_named(&e, E)->st_info = ELF64_ST_INFO(7, STT_FUNC);
  refused(&e, E, XPJ_ERR_INVALID, "binding 7", "binding");
  ed_open(&e, D, L);
  sym_named(&e, E)->st_shndx = (uint16_t)sec_find(&e, ".rodata", 0);
  refused(&e, E, XPJ_ERR_INVALID, "not a function in an executable section",
          "entry in rodata");
  ed_open(&e, D, L);
  refused(&e, "__xpj_k_nothing", XPJ_ERR_NOT_FOUND,
          "no symbol \"__xpj_k_nothing\"", "no entry");
  ed_open(&e, D, L);
  {
    /* the symbol of the first relocation, moved to a section not loaded */
    Elf64_Rela *r = rela_at(&e, ".rela.text", 0);
    Elf64_Shdr *st = shdr_at(&e, sec_find(&e, NULL, SHT_SYMTAB));
    Elf64_Sym *s = (Elf64_Sym *)(void *)(e.d + st->sh_offset +
                                         ELF64_R_SYM(r->r_info) * sizeof *s);
    s->st_shndx = (uint16_t)sec_find(&e, NULL, SHT_SYMTAB);
  }
  refused(&e, E, XPJ_ERR_INVALID, "not loaded", "symbol not loaded");

  /* relocations */
  ed_open(&e, D, L);
  rela_at(&e, ".rela.text", 0)->r_offset =
      shdr_at(&e, sec_find(&e, ".text", 0))->sh_size - 2;
  refused(&e, E, XPJ_ERR_INVALID, "outside the section", "offset at the end");
  ed_open(&e, D, L);
  rela_at(&e, ".rela.rodata", 3)->r_offset = UINT64_MAX - 1;
  refused(&e, E, XPJ_ERR_INVALID, "outside the section", "offset huge");
  ed_open(&e, D, L);
  {
    Elf64_Rela *r = rela_at(&e, ".rela.text", 1);
    Elf64_Shdr *st = shdr_at(&e, sec_find(&e, NULL, SHT_SYMTAB));
    r->r_info = ELF64_R_INFO(st->sh_size / sizeof(Elf64_Sym), R_X86_64_PC32);
  }
  refused(&e, E, XPJ_ERR_INVALID, "out of range", "symbol index");
  ed_open(&e, D, L);
  rela_at(&e, ".rela.text", 0)->r_info =
      ELF64_R_INFO(ELF64_R_SYM(rela_at(&e, ".rela.text", 0)->r_info),
                   R_X86_64_TPOFF32);
  refused(&e, E, XPJ_ERR_INVALID, "type 23 is not supported", "TPOFF32");
  ed_open(&e, D, L);
  rela_at(&e, ".rela.text", 0)->r_info =
      ELF64_R_INFO(ELF64_R_SYM(rela_at(&e, ".rela.text", 0)->r_info),
                   R_X86_64_GOTOFF64);
  refused(&e, E, XPJ_ERR_INVALID, "type 25 is not supported", "GOTOFF64");
  ed_open(&e, D, L);
  rela_at(&e, ".rela.text", 0)->r_info =
      ELF64_R_INFO(ELF64_R_SYM(rela_at(&e, ".rela.text", 0)->r_info), 200);
  refused(&e, E, XPJ_ERR_INVALID, "type 200", "type 200");
  ed_open(&e, D, L);
  rela_at(&e, ".rela.text", 0)->r_addend = (int64_t)1 << 40;
  refused(&e, E, XPJ_ERR_INVALID, "does not fit 32 bits", "PC32 range");
  ed_open(&e, D, L);
  rela_at(&e, ".rela.rodata", 0)->r_addend = -((int64_t)1 << 33);
  refused(&e, E, XPJ_ERR_INVALID, "does not fit 32 bits", "PC32 range -");
  ed_open(&e, D, L);
  {
    /* an absolute 32-bit address of the image: mmap puts it above 4 GiB */
    Elf64_Rela *r = rela_at(&e, ".rela.text", 0);
    r->r_info = ELF64_R_INFO(ELF64_R_SYM(r->r_info), R_X86_64_32);
    r->r_addend = (int64_t)1 << 32;
  }
  refused(&e, E, XPJ_ERR_INVALID, "does not fit 32 bits", "R_X86_64_32");
  ed_open(&e, D, L);
  {
    Elf64_Rela *r = rela_at(&e, ".rela.text", 0);
    r->r_info = ELF64_R_INFO(ELF64_R_SYM(r->r_info), R_X86_64_32S);
    r->r_addend = (int64_t)1 << 31;
  }
  refused(&e, E, XPJ_ERR_INVALID, "does not fit 32 bits", "R_X86_64_32S");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".rela.text", 0))->sh_link = 2;
  refused(&e, E, XPJ_ERR_INVALID, "not the symbol table", "rela link");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".rela.text", 0))->sh_info = 999;
  refused(&e, E, XPJ_ERR_INVALID, "applies to section 999", "rela info");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".rela.text", 0))->sh_entsize = 16;
  refused(&e, E, XPJ_ERR_INVALID, "entries of 16 bytes", "rela entsize");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".rela.text", 0))->sh_size -= 5;
  refused(&e, E, XPJ_ERR_INVALID, "not a multiple of 24", "rela size");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".rela.text", 0))->sh_type = SHT_REL;
  refused(&e, E, XPJ_ERR_INVALID, "REL relocations", "REL");
  ed_open(&e, D, L);
  shdr_at(&e, sec_find(&e, ".rela.text", 0))->sh_flags |= SHF_ALLOC;
  refused(&e, E, XPJ_ERR_INVALID, "type 0x4", "allocated RELA");

  /* undefined symbols: refused by the binder, or with no name */
  ed_open(&e, m.data, m.len);
  {
    asked deny = {.deny = "powf"};
    xpj_elf_image *img = (void *)1;
    void *fn = (void *)1;
    assert_int_equal(xpj_elf_load(e.d, e.len, m.entry, test_resolve, &deny,
                                  &img, &fn, err, sizeof err),
                     XPJ_ERR_INVALID);
    assert_null(img);
    assert_string_equal(err, "undefined symbol \"powf\" is not available to "
                             "kernels");
    /* no binder binds nothing */
    assert_int_equal(xpj_elf_load(e.d, e.len, m.entry, NULL, NULL, &img, &fn,
                                  err, sizeof err),
                     XPJ_ERR_INVALID);
    assert_non_null(strstr(err, "not available to kernels"));
  }
  sym_named(&e, "powf")->st_name = 0;
  refused(&e, m.entry, XPJ_ERR_INVALID, "undefined and has no name",
          "nameless");
  /* names shown in messages are printable */
  ed_open(&e, m.data, m.len);
  {
    Elf64_Sym *s = sym_named(&e, "powf");
    Elf64_Shdr *str = strtab_of(&e);
    memcpy(e.d + str->sh_offset + s->st_name, "p\n\x1b", 3);
  }
  refused(&e, m.entry, XPJ_ERR_INVALID, "\"p??f\"", "unprintable name");

  /* the loader's arguments, and a message that does not fit */
  xpj_elf_image *img = NULL;
  void *fn = NULL;
  assert_int_equal(xpj_elf_load(D, L, NULL, test_resolve, NULL, &img, &fn, err,
                                sizeof err),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_elf_load(NULL, 0, E, test_resolve, NULL, &img, &fn,
                                err, sizeof err),
                   XPJ_ERR_INVALID);
  char tiny[8];
  assert_int_equal(xpj_elf_load(D, 10, E, test_resolve, NULL, &img, &fn, tiny,
                                sizeof tiny),
                   XPJ_ERR_INVALID);
  assert_int_equal(strlen(tiny), 7);
  assert_int_equal(xpj_elf_load(D, 10, E, test_resolve, NULL, &img, &fn, NULL,
                                0),
                   XPJ_ERR_INVALID);
#if defined(__x86_64__) && defined(__linux__)
  assert_true(xpj_elf_supported());
#endif
  obj_free(&o);
  obj_free(&m);
}

/* Random bytes behind a valid header: refused, never a crash. */
static void test_random_objects(void **state) {
  (void)state;
  obj o;
  obj_build(&o, "saxpy.xpk", NULL, "saxpy", XPJ_F32, 0, "cpu");
  uint32_t seed = 5;
  char err[512];
  for (int it = 0; it < 2000; it++) {
    size_t n = 128 + it % 700;
    uint8_t *d = malloc(n);
    memcpy(d, o.data, 64);
    for (size_t i = 64; i < n; i++) {
      seed = seed * 1664525u + 1013904223u;
      d[i] = (uint8_t)(seed >> 24);
    }
    /* section headers somewhere inside */
    uint64_t shoff = 64 + (it * 13) % (n - 64);
    memcpy(d + 40, &shoff, 8);
    uint16_t shnum = (uint16_t)((n - shoff) / 64);
    memcpy(d + 60, &shnum, 2);
    (void)try_load(d, n, o.entry, err, sizeof err);
    free(d);
  }
  obj_free(&o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_examples_match_orc),
      cmocka_unit_test(test_got_data_bss_common),
      cmocka_unit_test(test_wx),
      cmocka_unit_test(test_load_unload_many),
      cmocka_unit_test(test_policy_through_device),
      cmocka_unit_test(test_public_api_both_loaders),
      cmocka_unit_test(test_truncations),
      cmocka_unit_test(test_flipped_bytes),
      cmocka_unit_test(test_each_check),
      cmocka_unit_test(test_random_objects),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
