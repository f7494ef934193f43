/*
 * test_codegen.c - code generation: every example kernel for every target
 * (checked by the external validators too), the structure that matters
 * (barriers, local memory, atomic scopes), determinism, error statuses and
 * the isolation of crashes inside LLVM.
 */
#include "cgutil.h"
#include "procutil.h" /* guarded_test */
#include "llvm.h"
#include "llvm_emit.h"
#include "spirv_check.h"
#include "worker.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <llvm-c/IRReader.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];
static const char *ptxas;       /* NULL: not installed */
static const char *spirv_val;   /* NULL: not installed */

static const char *find_tool(const char *name, const char *fallback) {
  static char buf[2][512];
  static int k;
  char *b = buf[k++ & 1];
  const char *path = getenv("PATH");
  if (path) {
    const char *p = path;
    while (*p) {
      const char *e = strchr(p, ':');
      size_t n = e ? (size_t)(e - p) : strlen(p);
      snprintf(b, 512, "%.*s/%s", (int)n, p, name);
      if (access(b, X_OK) == 0)
        return b;
      p += n + (e ? 1 : 0);
    }
  }
  if (fallback && access(fallback, X_OK) == 0)
    return fallback;
  return NULL;
}

static int setup(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/xpjit-cg-XXXXXX");
  if (!mkdtemp(tmpdir))
    return -1;
  ptxas = find_tool("ptxas", "/usr/local/cuda/bin/ptxas");
  spirv_val = find_tool("spirv-val", NULL);
  if (!ptxas)
    printf("NOTE: ptxas not found: PTX is not checked by ptxas\n");
  if (!spirv_val)
    printf("NOTE: spirv-val not found: only the in-process validator runs\n");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *path, const uint8_t *d, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(d, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

/* SPIR-V declares capability Int64Atomics (12)? */

static void test_targets(void **state) {
  (void)state;
  xpj_target t;
  char err[256], buf[1200];
  assert_int_equal(xpj_target_parse("spirv", &t, err, sizeof err), XPJ_OK);
  xpj_target_str(&t, buf, sizeof buf);
  assert_string_equal(buf, "spirv:1.2");
  assert_int_equal(xpj_target_parse("spirv:1.0", &t, err, sizeof err), XPJ_OK);
  assert_int_equal(t.spirv_minor, 0);
  assert_int_equal(xpj_target_parse("ptx:sm_90", &t, err, sizeof err), XPJ_OK);
  xpj_target_str(&t, buf, sizeof buf);
  assert_string_equal(buf, "ptx:sm_90:ptx78");
  assert_int_equal(xpj_target_parse("ptx:sm_80:ptx75", &t, err, sizeof err),
                   XPJ_OK);
  xpj_target_str(&t, buf, sizeof buf);
  assert_string_equal(buf, "ptx:sm_80:ptx75");
  assert_int_equal(xpj_target_parse("cpu", &t, err, sizeof err), XPJ_OK);
  assert_true(strlen(t.cpu) > 0);
  xpj_target_str(&t, buf, sizeof buf);
  assert_true(strncmp(buf, "cpu:", 4) == 0);
  assert_int_equal(xpj_target_parse("cpu:x86-64", &t, err, sizeof err), XPJ_OK);
  xpj_target_str(&t, buf, sizeof buf);
  assert_string_equal(buf, "cpu:x86-64:");
  /* empty feature items are dropped: a trailing or doubled comma names
   * the same target (and cache key) as the list without it */
  static const char *const commas[][2] = {
      {"cpu:x86-64:+avx2,", "cpu:x86-64:+avx2"},
      {"cpu:x86-64:,,+avx2,,,-fma,", "cpu:x86-64:+avx2,-fma"},
      {"cpu:x86-64:,", "cpu:x86-64:"}};
  for (size_t i = 0; i < sizeof commas / sizeof *commas; i++) {
    assert_int_equal(xpj_target_parse(commas[i][0], &t, err, sizeof err),
                     XPJ_OK);
    xpj_target_str(&t, buf, sizeof buf);
    assert_string_equal(buf, commas[i][1]);
  }
  const char *bad[] = {"", "gpu", "spirv:2.0", "spirv:1.9", "ptx", "ptx:sm_60",
                       "ptx:sm_90:ptx50", "ptx:sm90", "ptx:sm_90:x",
                       "cpu:pentium9", "cpu:", "spirv:1.2x",
                       /* trailing text was dropped: sm_90a is not sm_90 */
                       "ptx:sm_90a", "ptx:sm_80xyz", "ptx:sm_90:ptx80x",
                       "ptx:sm_ 90", "ptx:sm_90:", "ptx:sm_90:ptx 80"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    err[0] = 0;
    assert_int_equal(xpj_target_parse(bad[i], &t, err, sizeof err),
                     XPJ_ERR_INVALID);
    assert_true(strlen(err) > 0);
  }
  assert_int_equal(xpj_target_parse(NULL, &t, err, sizeof err), XPJ_ERR_INVALID);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  xpj_compile_opts_str(&o, buf, sizeof buf);
  assert_string_equal(buf, "O2");
  o.opt_level = 3;
  o.fast_math = 1;
  o.debug_info = 1;
  xpj_compile_opts_str(&o, buf, sizeof buf);
  assert_string_equal(buf, "O3+fast-math+g");
  o.fp_contract = 1; /* implied by fast-math: the same output */
  xpj_compile_opts_str(&o, buf, sizeof buf);
  assert_string_equal(buf, "O3+fast-math+g");
  xpj_compile_opts_default(&o);
  o.fp_contract = 1;
  xpj_compile_opts_str(&o, buf, sizeof buf);
  assert_string_equal(buf, "O2+contract");
  assert_string_equal(xpj_llvm_version(), "22.1.8");
  assert_int_equal(xpj_abi_version(), 6);
}

/* Every example kernel, two dtypes, ranks 1 and 2 where generic, for
 * SPIR-V, PTX sm_90 and sm_80, and the CPU. */
static void test_emit_examples(void **state) {
  (void)state;
  static const xpj_scalar types[] = {XPJ_F32, XPJ_F64, XPJ_I32,
                                     XPJ_I64, XPJ_U32, XPJ_U64};
  static const char *const targets[] = {"spirv", "ptx:sm_90", "ptx:sm_80",
                                        "cpu"};
  DIR *dir = opendir("examples");
  assert_non_null(dir);
  struct dirent *de;
  unsigned modules = 0, spirv_checked = 0, int64_atomics = 0, ptx_checked = 0,
           cpu_loaded = 0, kernels = 0;
  char names[64][256];
  unsigned nnames = 0;
  while ((de = readdir(dir)) && nnames < 64) {
    size_t l = strlen(de->d_name);
    if (l > 4 && strcmp(de->d_name + l - 4, ".xpk") == 0)
      snprintf(names[nnames++], 256, "%s", de->d_name);
  }
  closedir(dir);
  assert_true(nnames >= 10);
  for (unsigned fi = 0; fi < nnames; fi++) {
    xpj_module *m = load_example(names[fi]);
    for (unsigned i = 0; i < xpj_module_func_count(m); i++) {
      const xpj_func *k = xpj_module_func(m, i);
      if (xpj_func_kind_of(k) == XPJ_FUNC_DEVICE)
        continue;
      const char *kn = xpj_func_name(k);
      kernels++;
      bool generic = xpj_func_tparam_count(k) > 0;
      unsigned ranks[2] = {0, 0}, nranks = 1;
      if (xpj_func_has_generic_rank(k)) {
        ranks[0] = 1;
        ranks[1] = 2;
        nranks = 2;
      }
      unsigned done_types = 0;
      for (size_t ti = 0; ti < (generic ? 6u : 1u) && done_types < 2; ti++) {
        xpj_module *specs[2] = {NULL, NULL};
        bool ok = true;
        for (unsigned r = 0; r < nranks; r++) {
          specs[r] = spec_kernel(m, kn, generic ? types[ti] : XPJ_VOID,
                                 ranks[r]);
          ok = ok && specs[r];
        }
        if (!ok) {
          for (unsigned r = 0; r < nranks; r++)
            xpj_module_destroy(specs[r]);
          continue;
        }
        done_types++;
        for (unsigned r = 0; r < nranks; r++) {
          for (size_t tg = 0; tg < 4; tg++) {
            xpj_result *res = compile_for(specs[r], kn, targets[tg], XPJ_EMIT_BIN);
            size_t len;
            const uint8_t *d = xpj_result_data(res, &len);
            assert_true(len > 0);
            modules++;
            char path[512], cmd[1200];
            if (tg == 0) {
              snprintf(path, sizeof path, "%s/%s.spv", tmpdir, kn);
              write_file(path, d, len);
              if (spirv_val) {
                int i64a =
                    xpj_spirv_has_capability(d, len, XPJ_SPV_CAP_INT64_ATOMICS);
                int64_atomics += i64a;
                /* Int64Atomics and Float16 are optional in OpenCL (64-bit
                 * atomics extensions, cl_khr_fp16); SPIRV-Tools' OpenCL 2.2
                 * environment rejects them outright, so such modules are
                 * checked as SPIR-V 1.2 */
                int opt = i64a || xpj_spirv_has_capability(
                                      d, len, XPJ_SPV_CAP_FLOAT16);
                snprintf(cmd, sizeof cmd, "'%s' --target-env %s '%s'",
                         spirv_val, opt ? "spv1.2" : "opencl2.2", path);
                if (system(cmd) != 0)
                  fail_msg("spirv-val rejects %s (%s)", kn, names[fi]);
                spirv_checked++;
              }
            } else if (tg <= 2) {
              snprintf(path, sizeof path, "%s/%s.ptx", tmpdir, kn);
              write_file(path, d, len);
              if (ptxas) {
                snprintf(cmd, sizeof cmd, "'%s' -arch=%s '%s' -o /dev/null",
                         ptxas, tg == 1 ? "sm_90" : "sm_80", path);
                if (system(cmd) != 0)
                  fail_msg("ptxas rejects %s for %s", kn, targets[tg]);
                ptx_checked++;
              }
            } else {
              LLVMOrcLLJITRef jit;
              void *fn = jit_load(d, len, xpj_result_entry(res), &jit);
              assert_non_null(fn);
              LLVMOrcDisposeLLJIT(jit);
              cpu_loaded++;
            }
            xpj_result_destroy(res);
          }
          xpj_module_destroy(specs[r]);
        }
      }
      if (done_types < (generic ? 2u : 1u))
        fail_msg("%s in %s specialises for only %u dtypes", kn, names[fi],
                 done_types);
    }
    xpj_module_destroy(m);
  }
  printf("emit: %u kernels, %u modules; spirv-val %u (%u with Int64Atomics "
         "as spv1.2), ptxas %u, CPU objects loaded %u\n",
         kernels, modules, spirv_checked, int64_atomics, ptx_checked,
         cpu_loaded);
  assert_true(kernels >= 80);
}

static const char *scope_src =
    "kernel scopes(g: global i32[], f: global f32[]) ndrange(1) {\n"
    "    local t: i32[64];\n"
    "    let l = local_id(0);\n"
    "    t[l] = 0;\n"
    "    barrier(local);\n"
    "    atomic_add(&g[0], 1i32, acq_rel, work_group);\n"
    "    atomic_add(&g[1], 1i32, acq_rel, device);\n"
    "    atomic_add(&t[0], 1i32, relaxed, work_group);\n"
    "    atomic_add(&f[0], 1.0f32, relaxed, device);\n"
    "    barrier(global);\n"
    "    g[2 + l] = t[0];\n"
    "}\n";

static char *emit_text(const char *src, const char *kernel, const char *target,
                       xpj_emit_kind emit) {
  xpj_module *m = NULL;
  assert_int_equal(parse_src(src, &m, NULL), XPJ_OK);
  xpj_module *s = spec_kernel(m, kernel, XPJ_VOID, 0);
  assert_non_null(s);
  xpj_result *r = compile_for(s, kernel, target, emit);
  size_t len;
  char *text = strdup((const char *)xpj_result_data(r, &len));
  xpj_result_destroy(r);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
  return text;
}

/* Atomic loads and stores are OpAtomicLoad / OpAtomicStore with their
 * scope and semantics (LLVM 22's backend made plain OpLoad / OpStore of
 * "load atomic"); a local atomic at a constant index goes through a byte
 * access chain (the backend chained the array's element type with the
 * byte offset: t[1] of an i32 array was t[4]). */
static const char *atomic_access_src =
    "kernel acc(x: global u32[], o: global u32[]) ndrange(1) local(4) {\n"
    "    local t: u32[4];\n"
    "    let i = global_id(0);\n"
    "    if local_id(0) == 0 {\n"
    "        t[0] = 0u32; t[1] = 0u32; t[2] = 0u32; t[3] = 0u32;\n"
    "    }\n"
    "    barrier(local);\n"
    "    atomic_add(&t[1], 1u32, relaxed, work_group);\n"
    "    barrier(local);\n"
    "    o[i] = t[local_id(0)] + atomic_load(&x[i], acquire);\n"
    "    atomic_store(&x[i], 5u32, release);\n"
    "}\n";

static void test_spirv_atomic_access(void **state) {
  (void)state;
  char *spv = emit_text(atomic_access_src, "acc", "spirv", XPJ_EMIT_ASM);
  /* Device scope (1); Acquire | CrossWorkgroupMemory = 0x202, Release |
   * CrossWorkgroupMemory = 0x204 */
  assert_non_null(strstr(spv, "OpAtomicLoad %uint %"));
  assert_non_null(strstr(spv, " %uint_1 %uint_514"));
  assert_non_null(strstr(spv, "OpAtomicStore %"));
  assert_non_null(strstr(spv, " %uint_1 %uint_516 %uint_5"));
  /* t[1]: byte 4 of a uchar chain, not element 4 of a uint one */
  assert_non_null(strstr(spv, "AccessChain %_ptr_Workgroup_uchar"));
  for (const char *l = spv; (l = strstr(l, "AccessChain %_ptr_Workgroup_uint"));
       l++) {
    const char *eol = strchr(l, '\n');
    const char *four = strstr(l, "%ulong_4");
    if (four && (!eol || four < eol))
      fail_msg("t[1] as element 4: %.80s", l);
  }
  free(spv);
}

static void test_structure(void **state) {
  (void)state;
  char *spv = emit_text(scope_src, "scopes", "spirv", XPJ_EMIT_ASM);
  /* barrier(local): Workgroup execution and memory scope, semantics
   * WorkgroupMemory | SequentiallyConsistent = 0x110 */
  assert_non_null(strstr(spv, "OpControlBarrier %uint_2 %uint_2 %uint_272"));
  /* barrier(global): CrossWorkgroupMemory | SequentiallyConsistent */
  assert_non_null(strstr(spv, "OpControlBarrier %uint_2 %uint_2 %uint_528"));
  /* the local array is a Workgroup variable */
  assert_non_null(strstr(spv, "OpVariable %_ptr_Workgroup_"));
  /* scopes: Workgroup (2) and Device (1); acq_rel = 8 */
  assert_non_null(strstr(spv, "%uint_2 %uint_8"));
  assert_non_null(strstr(spv, "%uint_1 %uint_8"));
  assert_non_null(strstr(spv, "OpAtomicFAddEXT %float"));
  assert_non_null(strstr(spv, "OpExtension \"SPV_EXT_shader_atomic_float_add\""));
  free(spv);

  char *ptx = emit_text(scope_src, "scopes", "ptx:sm_90", XPJ_EMIT_ASM);
  assert_non_null(strstr(ptx, ".version 7.8"));
  assert_non_null(strstr(ptx, ".target sm_90"));
  assert_non_null(strstr(ptx, "bar.sync"));
  assert_non_null(strstr(ptx, ".shared .align 16 .b8"));
  assert_non_null(strstr(ptx, "atom.shared.add.u32"));
  assert_non_null(strstr(ptx, "atom.global.add.f32"));
  /* ordered RMWs are one instruction of the requested scope, as NVRTC
   * emits them: no fence on either side */
  assert_non_null(strstr(ptx, "atom.acq_rel.cta.global.add.u32"));
  assert_non_null(strstr(ptx, "atom.acq_rel.gpu.global.add.u32"));
  assert_null(strstr(ptx, "fence.acq_rel"));
  free(ptx);
  /* every op and width that has an instruction; seq_cst is fence.sc and
   * an acquire atom (libcu++'s mapping); what has none keeps the fences */
  static const char ord_src[] =
      "kernel ords(a: global i64[], u: global u32[], f: global f32[],\n"
      "            d: global f64[], h: global f16[]) ndrange(1) {\n"
      "    atomic_sub(&a[0], 3i64, release, device);\n"
      "    atomic_min(&a[1], 3i64, acquire, device);\n"
      "    atomic_max(&u[0], 3u32, seq_cst, work_group);\n"
      "    atomic_xor(&u[1], 3u32, acq_rel, device);\n"
      "    atomic_xchg(&f[0], 1.0f32, acq_rel, device);\n"
      "    atomic_add(&d[0], 1.0, acq_rel, device);\n"
      "    atomic_sub(&f[1], 1.0f32, acq_rel, device);\n"
      "}\n";
  ptx = emit_text(ord_src, "ords", "ptx:sm_90", XPJ_EMIT_ASM);
  assert_non_null(strstr(ptx, "atom.release.gpu.global.add.u64"));
  assert_non_null(strstr(ptx, "atom.acquire.gpu.global.min.s64"));
  assert_non_null(strstr(ptx, "fence.sc.cta;"));
  assert_non_null(strstr(ptx, "atom.acquire.cta.global.max.u32"));
  assert_non_null(strstr(ptx, "atom.acq_rel.gpu.global.xor.b32"));
  assert_non_null(strstr(ptx, "atom.acq_rel.gpu.global.exch.b32"));
  assert_non_null(strstr(ptx, "atom.acq_rel.gpu.global.add.f64"));
  /* float subtraction: no instruction, a relaxed add between fences */
  assert_non_null(strstr(ptx, "fence.acq_rel.gpu"));
  free(ptx);

  /* The CPU: atomics on local memory are plain read-modify-writes (one
   * thread runs a group and owns its local memory); the three on global
   * memory stay atomic, work_group scope included (other groups run on
   * other threads). */
  char *ll = emit_text(scope_src, "scopes", "cpu", XPJ_EMIT_LLVM);
  assert_non_null(strstr(ll, "atomicrmw add ptr"));
  assert_non_null(strstr(ll, "atomicrmw fadd"));
  assert_null(strstr(ll, "singlethread"));
  free(ll);
}

/* The same kernel, target and options give the same bytes, compile after
 * compile (each in its own worker process). */
static void test_determinism(void **state) {
  (void)state;
  static const struct {
    const char *file, *kernel;
    xpj_scalar t;
    unsigned ndim;
  } ks[] = {{"reduce.xpk", "block_sum", XPJ_F32, 0},
            {"matmul.xpk", "matmul_tiled", XPJ_F64, 0},
            {"axpy.xpk", "axpy", XPJ_F32, 2},
            {"math.xpk", "math_table", XPJ_F32, 0},
            {"sort.xpk", "bitonic_sort_block", XPJ_I32, 0}};
  static const char *const targets[] = {"spirv", "ptx:sm_90", "cpu"};
  for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) {
    xpj_module *m = load_example(ks[i].file);
    xpj_module *s = spec_kernel(m, ks[i].kernel, ks[i].t, ks[i].ndim);
    assert_non_null(s);
    for (size_t t = 0; t < 3; t++)
      for (int e = 0; e < 2; e++) {
        xpj_emit_kind ek = e ? XPJ_EMIT_ASM : XPJ_EMIT_BIN;
        xpj_result *a = compile_for(s, ks[i].kernel, targets[t], ek);
        xpj_result *b = compile_for(s, ks[i].kernel, targets[t], ek);
        size_t la, lb;
        const uint8_t *da = xpj_result_data(a, &la), *db = xpj_result_data(b, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(da, db, la);
        xpj_result_destroy(a);
        xpj_result_destroy(b);
      }
    xpj_module_destroy(s);
    xpj_module_destroy(m);
  }
}

/* Compiles with options o; the log and the failure kind come back, and
 * the kind must agree with the status and xpj_result_transient. */
static xpj_status compile_with(const xpj_module *s, const char *kernel,
                               const char *target, const xpj_compile_opts *o,
                               char *log, size_t n, xpj_failure_kind *kind) {
  xpj_target t;
  char err[256];
  assert_int_equal(xpj_target_parse(target, &t, err, sizeof err), XPJ_OK);
  xpj_result *r = NULL;
  xpj_status st = xpj_compile(s, kernel, &t, o, XPJ_EMIT_BIN, &r);
  assert_non_null(r);
  assert_int_equal(xpj_result_status(r), st);
  snprintf(log, n, "%s", xpj_result_log(r));
  xpj_failure_kind k = xpj_result_failure_kind(r);
  assert_int_equal(k == XPJ_FAILURE_NONE, st == XPJ_OK);
  assert_int_equal(xpj_result_transient(r) != 0,
                   k == XPJ_FAILURE_TIMEOUT || k == XPJ_FAILURE_MEMORY ||
                       k == XPJ_FAILURE_SYSTEM);
  if (st != XPJ_OK) {
    size_t len = 1;
    assert_null(xpj_result_data(r, &len));
    assert_int_equal(len, 0);
  }
  if (kind)
    *kind = k;
  xpj_result_destroy(r);
  return st;
}

static xpj_status compile_status(const xpj_module *s, const char *kernel,
                                 const char *target, unsigned timeout,
                                 char *log, size_t n) {
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.timeout_ms = timeout;
  return compile_with(s, kernel, target, &o, log, n, NULL);
}

/* A crash inside the compiler becomes an error status here, and the result
 * says which kind of failure it was (xpj_result_failure_kind). */
static void test_faults(void **state) {
  (void)state;
  xpj_module *m = load_example("reduce.xpk");
  xpj_module *s = spec_kernel(m, "block_sum", XPJ_F32, 0);
  assert_non_null(s);
  char log[4096];
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  xpj_failure_kind kind;

  setenv("XPJIT_FAULT_INJECT", "crash", 1);
  assert_int_equal(compile_with(s, "block_sum", "cpu", &o, log, sizeof log,
                                &kind), XPJ_ERR_COMPILE);
  assert_non_null(strstr(log, "killed by signal 11"));
  assert_int_equal(kind, XPJ_FAILURE_CRASH);

  /* A real LLVM fatal error: float atomics without the SPIR-V extension
   * make the 22.1.8 backend call report_fatal_error. */
  setenv("XPJIT_FAULT_INJECT", "llvm-fatal", 1);
  assert_int_equal(compile_with(s, "block_sum", "spirv", &o, log, sizeof log,
                                &kind), XPJ_ERR_COMPILE);
  assert_non_null(strstr(log, "LLVM ERROR"));
  assert_non_null(strstr(log, "SPV_EXT_shader_atomic_float_add"));
  assert_int_equal(kind, XPJ_FAILURE_INPUT);

  setenv("XPJIT_FAULT_INJECT", "hang", 1);
  o.timeout_ms = 300;
  assert_int_equal(compile_with(s, "block_sum", "ptx:sm_90", &o, log,
                                sizeof log, &kind), XPJ_ERR_COMPILE);
  assert_non_null(strstr(log, "timed out after 300 ms"));
  assert_int_equal(kind, XPJ_FAILURE_TIMEOUT);
  /* Without isolation there is nothing to time out: SPIR-V still uses a
   * worker, which times out; PTX compiles in this process, the hang hook
   * (a worker's) does not apply and timeout_ms is ignored (docs/abi.md) */
  o.isolation = XPJ_ISOLATE_NONE;
  assert_int_equal(compile_with(s, "block_sum", "spirv", &o, log, sizeof log,
                                &kind), XPJ_ERR_COMPILE);
  assert_int_equal(kind, XPJ_FAILURE_TIMEOUT);
  o.timeout_ms = 1;
  assert_int_equal(compile_with(s, "block_sum", "ptx:sm_90", &o, log,
                                sizeof log, &kind), XPJ_OK);

  /* A complete reply is the result: the caller waits neither for the
   * worker's end nor for its sockets' end of file. This worker stays after
   * its reply until its deadline kills it, 60 s later; the compile is back
   * long before (before, it came back at the kill: the reply was taken at
   * the end of file). */
  setenv("XPJIT_FAULT_INJECT", "linger", 1);
  o.isolation = XPJ_ISOLATE_DEFAULT;
  o.timeout_ms = 60000;
  const char *const linger_targets[] = {"ptx:sm_90", "spirv"};
  for (size_t i = 0; i < 2; i++) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    assert_int_equal(compile_with(s, "block_sum", linger_targets[i], &o, log,
                                  sizeof log, &kind), XPJ_OK);
    clock_gettime(CLOCK_MONOTONIC, &b);
    assert_true(b.tv_sec - a.tv_sec < 30);
  }
  unsetenv("XPJIT_FAULT_INJECT");

  /* and the next compile works */
  assert_int_equal(compile_status(s, "block_sum", "spirv", 0, log, sizeof log),
                   XPJ_OK);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

static void test_errors(void **state) {
  (void)state;
  xpj_module *m = load_example("math.xpk");
  xpj_target t;
  char err[256], log[4096];
  assert_int_equal(xpj_target_parse("ptx:sm_90", &t, err, sizeof err), XPJ_OK);
  xpj_result *r = NULL;
  /* generic kernels must be specialised first */
  assert_int_equal(xpj_compile(m, "math_table", &t, NULL, XPJ_EMIT_BIN, &r),
                   XPJ_ERR_INVALID);
  assert_non_null(strstr(xpj_result_log(r), "specialise"));
  xpj_result_destroy(r);
  assert_int_equal(xpj_compile(m, "nope", &t, NULL, XPJ_EMIT_BIN, &r),
                   XPJ_ERR_NOT_FOUND);
  assert_int_equal(xpj_result_failure_kind(r), XPJ_FAILURE_INPUT);
  assert_false(xpj_result_transient(r));
  xpj_result_destroy(r);
  assert_int_equal(xpj_compile(NULL, "x", &t, NULL, XPJ_EMIT_BIN, &r),
                   XPJ_ERR_INVALID);
  xpj_result_destroy(r);
  assert_int_equal(xpj_compile(m, "x", &t, NULL, XPJ_EMIT_BIN, NULL),
                   XPJ_ERR_INVALID);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.opt_level = 4;
  xpj_module *s = spec_kernel(m, "math_table", XPJ_F32, 0);
  assert_non_null(s);
  assert_int_equal(xpj_compile(s, "math_table", &t, &o, XPJ_EMIT_BIN, &r),
                   XPJ_ERR_INVALID);
  xpj_result_destroy(r);
  /* an isolation outside the enum: refused too (it compiled isolated) */
  xpj_compile_opts_default(&o);
  o.isolation = (xpj_isolation)77;
  assert_int_equal(xpj_compile(s, "math_table", &t, &o, XPJ_EMIT_BIN, &r),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_result_failure_kind(r), XPJ_FAILURE_INPUT);
  xpj_result_destroy(r);
  xpj_compile_opts_default(&o);
  /* libdevice missing: a clear error, not a broken module */
  setenv("XPJIT_LIBDEVICE", "/nonexistent/libdevice.bc", 1);
  assert_int_equal(compile_status(s, "math_table", "ptx:sm_90", 0, log,
                                  sizeof log), XPJ_ERR_UNSUPPORTED);
  assert_non_null(strstr(log, "libdevice"));
  unsetenv("XPJIT_LIBDEVICE");
  /* a concrete kernel that calls a generic function: only specialisation
   * makes the callee concrete (else its T would be lowered as no type) */
  xpj_module *gm = NULL;
  assert_int_equal(parse_src("fn q<T>(x: T, y: T) -> T { return x / y; }\n"
                             "kernel k(a: global i32[], b: global i32[]) "
                             "range {\n  let i = global_id(0);\n"
                             "  a[i] = q(a[i], b[i]);\n}\n", &gm, NULL),
                   XPJ_OK);
  assert_int_equal(xpj_compile(gm, "k", &t, NULL, XPJ_EMIT_BIN, &r),
                   XPJ_ERR_INVALID);
  assert_non_null(strstr(xpj_result_log(r), "calls the generic function 'q'"));
  xpj_result_destroy(r);
  xpj_module *gs = spec_kernel(gm, "k", XPJ_VOID, 0);
  assert_non_null(gs);
  xpj_result *gr = compile_for(gs, "k", "ptx:sm_90", XPJ_EMIT_BIN);
  size_t glen;
  assert_non_null(strstr((const char *)xpj_result_data(gr, &glen), "div.s32"));
  xpj_result_destroy(gr);
  xpj_module_destroy(gs);
  xpj_module_destroy(gm);
  xpj_result_destroy(NULL);
  assert_int_equal(xpj_result_status(NULL), XPJ_ERR_INVALID);
  assert_int_equal(xpj_result_failure_kind(NULL), XPJ_FAILURE_NONE);
  static const char *const kinds[] = {"none",    "input",         "crash",
                                      "timeout", "out of memory", "system"};
  for (int k = XPJ_FAILURE_NONE; k <= XPJ_FAILURE_SYSTEM; k++)
    assert_string_equal(xpj_failure_kind_name((xpj_failure_kind)k), kinds[k]);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

/* Options change the output, and in-process compiles match the worker's. */
static void test_options(void **state) {
  (void)state;
  xpj_module *m = load_example("math.xpk");
  xpj_module *s = spec_kernel(m, "math_table", XPJ_F32, 0);
  assert_non_null(s);
  xpj_target t;
  char err[256];
  assert_int_equal(xpj_target_parse("ptx:sm_90", &t, err, sizeof err), XPJ_OK);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  const char *outs[4];
  xpj_result *rs[4];
  for (int i = 0; i < 4; i++) {
    xpj_compile_opts oi = o;
    if (i == 1)
      oi.fast_math = 1;
    if (i == 2)
      oi.opt_level = 0;
    if (i == 3)
      oi.isolation = XPJ_ISOLATE_NONE;
    assert_int_equal(xpj_compile(s, "math_table", &t, &oi, XPJ_EMIT_ASM, &rs[i]),
                     XPJ_OK);
    size_t len;
    outs[i] = (const char *)xpj_result_data(rs[i], &len);
  }
  {
    xpj_compile_opts g = o;
    g.debug_info = 1;
    xpj_result *rg = NULL;
    assert_int_equal(xpj_compile(s, "math_table", &t, &g, XPJ_EMIT_ASM, &rg),
                     XPJ_OK);
    const char *txt = (const char *)xpj_result_data(rg, NULL);
    assert_non_null(strstr(txt, "\t.loc\t"));
    assert_non_null(strstr(txt, "math.xpk"));
    assert_null(strstr(outs[0], "\t.loc\t"));
    xpj_result_destroy(rg);
  }
  assert_string_not_equal(outs[0], outs[1]);
  assert_string_not_equal(outs[0], outs[2]);
  assert_string_equal(outs[0], outs[3]);
  for (int i = 0; i < 4; i++)
    xpj_result_destroy(rs[i]);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

/* IEEE-correct sqrt and division by default; approximate with fast-math. */
static void test_ptx_precision(void **state) {
  (void)state;
  const char *src = "kernel q(x: global f32[]) range {\n"
                    "    let i = global_id(0);\n"
                    "    x[i] = sqrt(x[i]) / x[i + 1];\n"
                    "}\n";
  char *ieee = emit_text(src, "q", "ptx:sm_90", XPJ_EMIT_ASM);
  assert_non_null(strstr(ieee, "sqrt.rn.f32"));
  assert_non_null(strstr(ieee, "div.rn.f32"));
  assert_null(strstr(ieee, "approx"));
  free(ieee);
  xpj_module *m = NULL;
  assert_int_equal(parse_src(src, &m, NULL), XPJ_OK);
  xpj_module *s = spec_kernel(m, "q", XPJ_VOID, 0);
  xpj_target t;
  char err[128];
  assert_int_equal(xpj_target_parse("ptx:sm_90", &t, err, sizeof err), XPJ_OK);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.fast_math = 1;
  xpj_result *r = NULL;
  assert_int_equal(xpj_compile(s, "q", &t, &o, XPJ_EMIT_ASM, &r), XPJ_OK);
  const char *fast = (const char *)xpj_result_data(r, NULL);
  assert_non_null(strstr(fast, "sqrt.approx"));
  assert_null(strstr(fast, "div.rn.f32"));
  xpj_result_destroy(r);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

/* A flat index into a view of rank 2 or more on a GPU: a contiguous
 * row-major view takes its flat index as the offset, and only others
 * unravel it through the shape (divisions); rank 1 has nothing to
 * unravel. The conformance suite runs both paths on OpenCL (contiguous,
 * strided, reversed and broadcast views). */
static size_t count_str(const char *s, const char *needle);

static void test_flat_index_contiguous(void **state) {
  (void)state;
  static const char src[] =
      "kernel axpy<T>(a: T, x: global const T[*], y: global T[*]) range {\n"
      "    let i = global_id(0);\n"
      "    if i < size(y) { y[i] = a * x[i] + y[i]; }\n"
      "}\n";
  xpj_module *m = NULL;
  assert_int_equal(parse_src(src, &m, NULL), XPJ_OK);
  for (unsigned ndim = 1; ndim <= 3; ndim++) {
    xpj_module *s = spec_kernel(m, "axpy", XPJ_F32, ndim);
    assert_non_null(s);
    for (int t = 0; t < 2; t++) {
      xpj_result *r = compile_for(s, "axpy", t ? "spirv" : "ptx:sm_90",
                                  XPJ_EMIT_LLVM);
      const char *ir = (const char *)xpj_result_data(r, NULL);
      /* x and y: each tested once; y's read and write share its test */
      assert_int_equal(count_str(ir, "flat.strided:") > 0, ndim > 1);
      assert_int_equal(count_str(ir, "udiv") > 0, ndim > 1);
      xpj_result_destroy(r);
    }
    xpj_module_destroy(s);
  }
  xpj_module_destroy(m);
}

/* a * b + c of kernel K of SRC for target TGT, as text: fp_contract set
 * or not */
static char *contract_text(const char *src, const char *tgt, xpj_emit_kind e,
                           int contract) {
  xpj_module *m = NULL;
  assert_int_equal(parse_src(src, &m, NULL), XPJ_OK);
  xpj_module *s = spec_kernel(m, "muladd", XPJ_VOID, 0);
  xpj_target t;
  assert_int_equal(xpj_target_parse(tgt, &t, NULL, 0), XPJ_OK);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.fp_contract = contract;
  xpj_result *r = NULL;
  assert_int_equal(xpj_compile(s, "muladd", &t, &o, e, &r), XPJ_OK);
  size_t len;
  const char *data = (const char *)xpj_result_data(r, &len);
  char *text = strndup(data, len);
  xpj_result_destroy(r);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
  return text;
}

/* fp_contract fuses a * b + c into a fused multiply-add and nothing else
 * (division stays IEEE); without it nothing is fused on any target, and
 * SPIR-V says so to the driver (ContractionOff). */
static void test_fp_contract(void **state) {
  (void)state;
  static const char src[] =
      "kernel muladd(a: global const f32[], b: global const f32[],\n"
      "              c: global f32[]) range {\n"
      "    let i = global_id(0);\n"
      "    if i < shape(c, 0) { c[i] = a[i] * b[i] + c[i] / a[i]; }\n"
      "}\n";
  char *p0 = contract_text(src, "ptx:sm_90", XPJ_EMIT_ASM, 0);
  char *p1 = contract_text(src, "ptx:sm_90", XPJ_EMIT_ASM, 1);
  assert_null(strstr(p0, "fma.rn.f32"));
  assert_non_null(strstr(p1, "fma.rn.f32"));
  assert_non_null(strstr(p1, "div.rn.f32")); /* not approximated */
  free(p0);
  free(p1);
  char *c0 = contract_text(src, "cpu:x86-64-v3", XPJ_EMIT_LLVM, 0);
  char *c1 = contract_text(src, "cpu:x86-64-v3", XPJ_EMIT_LLVM, 1);
  assert_null(strstr(c0, "contract"));
  assert_non_null(strstr(c1, "fmul contract"));
  assert_null(strstr(c1, "fast"));
  assert_null(strstr(c1, "reassoc"));
  free(c0);
  free(c1);
  char *s0 = contract_text(src, "spirv", XPJ_EMIT_ASM, 0);
  char *s1 = contract_text(src, "spirv", XPJ_EMIT_ASM, 1);
  assert_non_null(strstr(s0, "ContractionOff"));
  assert_null(strstr(s1, "ContractionOff"));
  free(s0);
  free(s1);
}

/* Entry points have a name of their own on every target (docs/abi.md):
 * kernels named like functions their code calls (libm's expf, sinf, powf;
 * memset and memcpy; libdevice's __nv_expf; OpenCL's get_global_id)
 * compile to valid PTX and SPIR-V with the reserved entry, and a name of
 * the longest kind is cut to 255 bytes. test_cpu_exec.c runs them. */
static void test_entry_names(void **state) {
  (void)state;
  char longname[256];
  memset(longname, 'k', 255);
  longname[255] = 0;
  const char *const names[] = {"expf",   "sinf",      "powf",
                               "sqrtf",  "memset",    "memcpy",
                               "__nv_expf", "_Z13get_global_idj", longname};
  static const char *const targets[] = {"ptx:sm_90", "spirv", "cpu"};
  for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
    char src[1024], want[256], path[512], cmd[1200];
    snprintf(src, sizeof src,
             "kernel %s(x: global const f32[], y: global f32[]) range {\n"
             "    let i = global_id(0);\n"
             "    let a: f32[1024];\n"
             "    let b: f32[1024];\n"
             "    a[i %% 1024] = x[i];\n"
             "    for (let k: i64 = 0; k < 1024; k++) { b[k] = a[k]; }\n"
             "    a[0] = 1.0f32;\n"
             "    y[i] = exp(b[i %% 1024]) + sin(a[i %% 7]) + pow(x[i], 1.5f32)"
             " + sqrt(x[i]);\n"
             "}\n", names[k]);
    snprintf(want, sizeof want, "__xpj_k_%s", names[k]);
    for (size_t tg = 0; tg < 3; tg++) {
      xpj_module *m = NULL;
      assert_int_equal(parse_src(src, &m, NULL), XPJ_OK);
      xpj_module *s = spec_kernel(m, names[k], XPJ_VOID, 0);
      assert_non_null(s);
      xpj_result *r = compile_for(s, names[k], targets[tg], XPJ_EMIT_BIN);
      assert_string_equal(xpj_result_entry(r), want);
      /* the public way to the name, for binaries without a result */
      char named[300];
      assert_int_equal(xpj_entry_name(names[k], named, sizeof named),
                       strlen(want));
      assert_string_equal(named, want);
      char small[8];
      assert_int_equal(xpj_entry_name(names[k], small, sizeof small),
                       strlen(want));
      assert_string_equal(small, "__xpj_k");
      size_t len;
      const uint8_t *d = xpj_result_data(r, &len);
      if (tg == 0) {
        char head[300];
        snprintf(head, sizeof head, ".entry %s(", want);
        assert_non_null(strstr((const char *)d, head));
        snprintf(path, sizeof path, "%s/entry.ptx", tmpdir);
        write_file(path, d, len);
        snprintf(cmd, sizeof cmd, "'%s' -arch=sm_90 '%s' -o /dev/null", ptxas,
                 path);
        if (ptxas && system(cmd) != 0)
          fail_msg("ptxas rejects kernel %s", names[k]);
      } else if (tg == 1) {
        snprintf(path, sizeof path, "%s/entry.spv", tmpdir);
        write_file(path, d, len);
        snprintf(cmd, sizeof cmd, "'%s' --target-env opencl2.2 '%s'",
                 spirv_val, path);
        if (spirv_val && system(cmd) != 0)
          fail_msg("spirv-val rejects kernel %s", names[k]);
        xpj_result *a = compile_for(s, names[k], "spirv", XPJ_EMIT_ASM);
        char ep[300];
        snprintf(ep, sizeof ep, " \"%s\" ", want);
        const char *txt = (const char *)xpj_result_data(a, NULL);
        const char *line = strstr(txt, "OpEntryPoint Kernel");
        assert_non_null(line);
        assert_true(strstr(line, ep) && strstr(line, ep) < strchr(line, '\n'));
        xpj_result_destroy(a);
      } else {
        LLVMOrcLLJITRef jit;
        assert_non_null(jit_load(d, len, want, &jit));
        LLVMOrcDisposeLLJIT(jit);
      }
      xpj_result_destroy(r);
      xpj_module_destroy(s);
      xpj_module_destroy(m);
    }
  }
}

/* Kernel source with n statements `a = a * 1.0001 + c` (chain), or
 * `u = u * u + c` on a value the same for every work-item (square), or the
 * latter in a loop of n iterations (loop). */
static char *long_kernel(const char *shape, unsigned n) {
  size_t cap = 256 + 40 * (size_t)n;
  char *src = malloc(cap);
  assert_non_null(src);
  size_t k = (size_t)snprintf(src, cap,
                              "kernel %s(x: global f32[], y: global f32[], "
                              "c: f32) range {\n"
                              "    let i = global_id(0);\n"
                              "    let a = x[%s];\n",
                              shape, strcmp(shape, "chain") ? "0" : "i");
  if (!strcmp(shape, "loop"))
    k += (size_t)snprintf(src + k, cap - k,
                          "    for (let k: i64 = 0; k < %u; k++) {\n"
                          "        a = a * a + c;\n    }\n", n);
  else
    for (unsigned j = 0; j < n; j++)
      k += (size_t)snprintf(src + k, cap - k, "    a = a * %s + c;\n",
                            strcmp(shape, "chain") ? "a" : "1.0001f32");
  snprintf(src + k, cap - k, "    y[i] = a;\n}\n");
  return src;
}

/* LLVM 22's loop vectoriser takes time quadratic in a loop's dependence
 * chains and exponential in uniform values built from each other
 * (target_cpu.c): such loops are marked not to be vectorised, ordinary ones
 * still are. */
static void test_vectorize_guard(void **state) {
  (void)state;
  static const struct {
    const char *shape;
    unsigned n;
    bool guarded;
  } cases[] = {{"chain", 100, false}, {"chain", 1000, true},
               {"square", 10, false}, {"square", 20, true},
               {"loop", 20, true}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *src = long_kernel(cases[i].shape, cases[i].n);
    char *ll = emit_text(src, cases[i].shape, "cpu", XPJ_EMIT_LLVM);
    bool guard =
        strstr(ll, "!\"llvm.loop.vectorize.enable\", i1 false") != NULL;
    bool vector = strstr(ll, " x float>") != NULL;
    if (guard != cases[i].guarded || vector == cases[i].guarded)
      fail_msg("%s of %u: vectorize.enable=false %s, vector code %s",
               cases[i].shape, cases[i].n, guard ? "set" : "not set",
               vector ? "present" : "absent");
    free(ll);
    free(src);
  }
}

/* The work-item loops of an nd-range kernel with barriers are vectorised
 * but neither unrolled nor interleaved (target_cpu.c: the unrolled and
 * interleaved copies cost most of the compile; the vectoriser consumes the
 * interleave hint, the unroll one stays); those of a kernel without
 * barriers, nd-range or range, keep every optimisation. */
static void test_barrier_loops(void **state) {
  (void)state;
  static const char src[] =
      "kernel wg_tile(x: global const f32[], y: global f32[]) ndrange(1) {\n"
      "    local t: f32[256];\n"
      "    let i = local_id(0);\n"
      "    t[i] = x[global_id(0)] * 2.0f32;\n"
      "    barrier(local);\n"
      "    y[global_id(0)] = t[255 - i] + 1.0f32;\n"
      "}\n"
      "kernel wg_flat(x: global const f32[], y: global f32[]) ndrange(1) {\n"
      "    let g = global_id(0);\n"
      "    y[g] = x[g] * 2.0f32 + 1.0f32;\n"
      "}\n"
      "kernel flat(x: global const f32[], y: global f32[]) range(1) {\n"
      "    let g = global_id(0);\n"
      "    y[g] = x[g] * 2.0f32 + 1.0f32;\n"
      "}\n";
  static const struct {
    const char *kernel;
    bool marked;
  } cases[] = {{"wg_tile", true}, {"wg_flat", false}, {"flat", false}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *ll = emit_text(src, cases[i].kernel, "cpu", XPJ_EMIT_LLVM);
    bool novec =
        strstr(ll, "!\"llvm.loop.vectorize.enable\", i1 false") != NULL;
    bool nounroll = strstr(ll, "!\"llvm.loop.unroll.disable\"") != NULL;
    bool vector = strstr(ll, " x float>") != NULL;
    /* blocks of a loop unrolled at run time */
    bool unrolled = strstr(ll, "unr-lcssa") != NULL || strstr(ll, ".prol") != NULL;
    if (novec || !vector || (cases[i].marked && (!nounroll || unrolled)))
      fail_msg("%s: vectorize.enable=false %s, unroll.disable %s, vector "
               "code %s, %sunrolled", cases[i].kernel,
               novec ? "set" : "not set", nounroll ? "set" : "not set",
               vector ? "present" : "absent", unrolled ? "" : "not ");
    free(ll);
  }
}

/* Loops inside the work-item with a uniform trip count run at work-group
 * level with the work-item loop inside (uniform.c, docs/abi.md "Loops
 * inside the work-item"): the range kernel runs in chunks (its entry has
 * a "chunk" loop) and the work-item loop inside the k loop is vectorised
 * across work-items (a vector of b's row, a's element broadcast). A loop
 * over a row per work-item (a gather across work-items) and a loop of
 * constant trip count are left inside the work-item. */
static void test_interchange(void **state) {
  (void)state;
  static const char src[] =
      "kernel mm(a: global const f32[,], b: global const f32[,], "
      "c: global f32[,]) range(2) {\n"
      "    let row = global_id(0);\n"
      "    let col = global_id(1);\n"
      "    let acc = 0.0f32;\n"
      "    for (let k: i64 = 0; k < shape(a, 1); k++) {\n"
      "        acc += a[row, k] * b[k, col];\n"
      "    }\n"
      "    c[row, col] = acc;\n"
      "}\n"
      "kernel rowdot(a: global const f32[,], x: global const f32[], "
      "y: global f32[]) range(1) {\n"
      "    let i = global_id(0);\n"
      "    let acc = 0.0f32;\n"
      "    for (let k: i64 = 0; k < shape(a, 1); k++) {\n"
      "        acc += a[i, k] * x[k];\n"
      "    }\n"
      "    y[i] = acc;\n"
      "}\n"
      "kernel fixed(x: global const f32[], y: global f32[]) range(1) {\n"
      "    let i = global_id(0);\n"
      "    let acc = 0.0f32;\n"
      "    for (let k: i64 = 0; k < 4; k++) {\n"
      "        acc += x[i + k];\n"
      "    }\n"
      "    y[i] = acc;\n"
      "}\n";
  static const struct {
    const char *kernel;
    bool interchanged;
  } cases[] = {{"mm", true}, {"rowdot", false}, {"fixed", false}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *ll = emit_text(src, cases[i].kernel, "cpu:x86-64", XPJ_EMIT_LLVM);
    bool chunked = strstr(ll, "chunk") != NULL;
    if (chunked != cases[i].interchanged)
      fail_msg("%s: %s", cases[i].kernel,
               chunked ? "interchanged" : "not interchanged");
    if (cases[i].interchanged && !strstr(ll, "<4 x float>"))
      fail_msg("%s: the work-item loop is not vectorised", cases[i].kernel);
    free(ll);
  }
}

/* CPU memory facts the optimiser is given (codegen.c alias_scopes,
 * lower_loop_versions): local arrays are alias scopes of their own, so
 * the work-item loop that fills two tiles needs no run-time overlap check;
 * a loop of one work-item over views has a version for unit strides; and
 * vectorised loops get no vectorised epilogue (compile.c llvm_init). */
static void test_cpu_memory(void **state) {
  (void)state;
  static const char src[] =
      "kernel tiles(a: global const f32[,], b: global const f32[,], "
      "c: global f32[,]) ndrange(2) {\n"
      "    local ta: f32[16, 16];\n"
      "    local tb: f32[16, 16];\n"
      "    let ty = local_id(0);\n"
      "    let tx = local_id(1);\n"
      "    ta[ty, tx] = a[global_id(0), global_id(1)];\n"
      "    tb[ty, tx] = b[global_id(0), global_id(1)];\n"
      "    barrier(local);\n"
      "    c[global_id(0), global_id(1)] = ta[tx, ty] + tb[ty, tx];\n"
      "}\n"
      "kernel hist(data: global const u8[], h: global u32[], per: i64) "
      "range(1) {\n"
      "    let i0 = global_id(0) * per;\n"
      "    for (let i = i0; i < i0 + per; i++) {\n"
      "        h[global_id(0) * 256 + i64(data[i])] += 1u32;\n"
      "    }\n"
      "}\n";
  char *ll = emit_text(src, "tiles", "cpu:x86-64", XPJ_EMIT_LLVM);
  if (!strstr(ll, "store <4 x float>") || !strstr(ll, "!alias.scope"))
    fail_msg("tiles: the tile stores are not vectorised with alias scopes");
  if (strstr(ll, "memcheck") || strstr(ll, "vec.epilog"))
    fail_msg("tiles: run-time overlap checks or a vectorised epilogue");
  free(ll);
  ll = emit_text(src, "hist", "cpu:x86-64", XPJ_EMIT_LLVM);
  if (!strstr(ll, "%unit = icmp eq i64") || !strstr(ll, "versions.end"))
    fail_msg("hist: the loop has no unit-stride version");
  if (!strstr(ll, "!\"llvm.loop.vectorize.enable\", i1 false"))
    fail_msg("hist: the strided version is not left scalar");
  free(ll);
  /* GPUs: no versions */
  char *ptx = emit_text(src, "hist", "ptx:sm_90", XPJ_EMIT_ASM);
  char *spv = emit_text(src, "hist", "spirv", XPJ_EMIT_ASM);
  assert_null(strstr(ptx, "unit"));
  assert_null(strstr(spv, "unit"));
  free(ptx);
  free(spv);
}

/* A required local size reaches each target: SPIR-V's LocalSize execution
 * mode and PTX's .reqntid, in hardware order (the last dimension is x),
 * and ptxas takes it. */
/* ptxas (when installed) accepts the PTX text ptx for arch ("sm_90"). */
static void ptxas_accepts(const char *ptx, const char *arch) {
  if (!ptxas)
    return;
  char path[] = "/tmp/xpj_ptx_XXXXXX", cmd[600];
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, ptx, strlen(ptx)), (ssize_t)strlen(ptx));
  close(fd);
  snprintf(cmd, sizeof cmd, "'%s' -arch=%s '%s' -o /dev/null", ptxas, arch,
           path);
  int rc = system(cmd);
  unlink(path);
  if (rc != 0)
    fail_msg("ptxas rejects the PTX for %s", arch);
}

static void test_reqd_local(void **state) {
  (void)state;
  static const char src[] =
      "kernel rl(o: global f32[,]) ndrange(2) local(16, 8) {\n"
      "    o[global_id(0), global_id(1)] = f32(local_linear_id());\n"
      "}\n";
  char *spv = emit_text(src, "rl", "spirv", XPJ_EMIT_ASM);
  if (!strstr(spv, "OpExecutionMode %__xpj_k_rl LocalSize 8 16 1"))
    fail_msg("no LocalSize 8 16 1 in the SPIR-V");
  free(spv);
  char *ptx = emit_text(src, "rl", "ptx:sm_90", XPJ_EMIT_ASM);
  if (!strstr(ptx, ".reqntid 8, 16, 1"))
    fail_msg("no .reqntid 8, 16, 1 in the PTX");
  ptxas_accepts(ptx, "sm_90");
  free(ptx);
}

/* Collectives on the GPU targets (test_collectives runs them on the CPU
 * and OpenCL devices): PTX from warp shuffles and shared memory, accepted
 * by ptxas; SPIR-V from OpGroup* (validated by the compiler), shuffles
 * from Intel's SPV_INTEL_subgroups below 1.3 and OpGroupNonUniformShuffle
 * from 1.3; the work-group mul / and / or / xor of integers that SPIR-V
 * lacks are refused cleanly. */
static void test_collectives_gpu(void **state) {
  (void)state;
  static const char src[] =
      "kernel coll(a: global i8[], b: global i64[], c: global f64[], "
      "f: global bool[], u: global u16[]) ndrange(2) {\n"
      "    let i = local_linear_id();\n"
      "    a[i] = group_reduce_min(a[i]) + group_scan_exclusive_max(a[i]);\n"
      "    b[i] = group_scan_inclusive_add(b[i]) + group_broadcast(b[i], 3);\n"
      "    c[i] = group_reduce_add(c[i]) + sub_group_shuffle(c[i], 0) +\n"
      "           sub_group_scan_exclusive_max(c[i]) + sub_group_shuffle_xor(c[i], 1);\n"
      "    f[i] = group_reduce_or(f[i]) && sub_group_reduce_and(f[i]);\n"
      "    u[i] = u16(sub_group_size() + sub_group_local_id() + sub_group_id() +\n"
      "               num_sub_groups()) + group_reduce_max(u[i]);\n"
      "}\n"
      "kernel mul(b: global i64[]) ndrange(1) {\n"
      "    b[global_id(0)] = group_reduce_mul(b[global_id(0)]);\n"
      "}\n";
  static const char *const archs[] = {"sm_75", "sm_90"};
  for (int k = 0; k < 2; k++) {
    char target[16];
    snprintf(target, sizeof target, "ptx:%s", archs[k]);
    char *ptx = emit_text(src, "coll", target, XPJ_EMIT_ASM);
    if (!strstr(ptx, "shfl.sync.bfly") || !strstr(ptx, "shfl.sync.up") ||
        !strstr(ptx, "shfl.sync.idx") || !strstr(ptx, "bar.sync"))
      fail_msg("%s: no warp shuffles or barriers in the collectives", archs[k]);
    ptxas_accepts(ptx, archs[k]);
    free(ptx);
  }
  char *spv = emit_text(src, "coll", "spirv", XPJ_EMIT_ASM);
  if (!strstr(spv, "OpGroupSMin") || !strstr(spv, "OpGroupBroadcast") ||
      !strstr(spv, "OpSubgroupShuffleINTEL") || !strstr(spv, "ExclusiveScan"))
    fail_msg("SPIR-V 1.2: collectives missing");
  free(spv);
  spv = emit_text(src, "coll", "spirv:1.3", XPJ_EMIT_ASM);
  if (!strstr(spv, "OpGroupNonUniformShuffle ") ||
      !strstr(spv, "OpGroupNonUniformShuffleXor"))
    fail_msg("SPIR-V 1.3: no non-uniform shuffles");
  free(spv);
  /* work-group mul / and / or / xor: SPV_KHR_uniform_group_instructions */
  spv = emit_text(src, "mul", "spirv", XPJ_EMIT_ASM);
  if (!strstr(spv, "OpExtension \"SPV_KHR_uniform_group_instructions\"") ||
      !strstr(spv, "OpGroupIMulKHR %ulong %uint_2 Reduce"))
    fail_msg("SPIR-V: work-group mul is not OpGroupIMulKHR");
  free(spv);
}

/* f16 and bf16 (issue 17): f16 arithmetic, math through f32, atomics on
 * global and local memory, collectives, and bf16 conversions pass ptxas
 * (sm_75, sm_90) and SPIRV-Tools (Float16; 16-bit atomics as 32-bit
 * compare-exchange loops, since OpenCL has none), and the CPU code for the
 * baseline x86-64 (no F16C: libgcc's conversions) compiles. */
static void test_half_gpu(void **state) {
  (void)state;
  static const char src[] =
      "kernel half(x: global f16[], b: global bf16[], d: global f64[], "
      "a: f16) ndrange(1) {\n"
      "    local t: f16[64];\n"
      "    let i = global_id(0);\n"
      "    t[local_id(0)] = x[i] * a + 1.5f16;\n"
      "    barrier();\n"
      "    let s = group_reduce_add(t[63 - local_id(0)]) + sub_group_shuffle(x[i], 0);\n"
      "    atomic_add(&x[0], exp(s) / a);\n"
      "    atomic_sub(&t[1], 0.5);\n"
      "    let o = atomic_cmpxchg(&x[1], s, 2.0);\n"
      "    atomic_store(&x[2], max_value(f16) + atomic_load(&t[2]) + o);\n"
      "    b[i] = bf16(d[i] + f64(x[i]) + f64(b[i]));\n"
      "    d[i] = f64(group_broadcast(b[i], 3)) + f64(u64(x[i]) + u64(b[i]));\n"
      "    x[3] = f16(d[i]);\n"
      "}\n";
  static const char *const archs[] = {"sm_75", "sm_90"};
  for (int k = 0; k < 2; k++) {
    char target[16];
    snprintf(target, sizeof target, "ptx:%s", archs[k]);
    char *ptx = emit_text(src, "half", target, XPJ_EMIT_ASM);
    if (!strstr(ptx, ".f16") || !strstr(ptx, "atom."))
      fail_msg("%s: no f16 arithmetic or atomics", archs[k]);
    ptxas_accepts(ptx, archs[k]);
    free(ptx);
  }
  char *spv = emit_text(src, "half", "spirv", XPJ_EMIT_ASM);
  if (!strstr(spv, "OpCapability Float16\n") ||
      !strstr(spv, "OpAtomicCompareExchange %uint") ||
      strstr(spv, "OpAtomicCompareExchange %ushort") ||
      strstr(spv, "OpAtomicFAddEXT") || strstr(spv, "OpTypeFloat 16 0"))
    fail_msg("SPIR-V: f16 atomics not through 32-bit words, or bf16 as a "
             "float type:\n%.2000s", spv);
  free(spv);
  char *cpu = emit_text(src, "half", "cpu:x86-64", XPJ_EMIT_ASM);
  if (!strstr(cpu, "__truncdfhf2") || !strstr(cpu, "__extendhfsf2"))
    fail_msg("baseline x86-64: no libgcc f16 conversions");
  free(cpu);
}

/* Local array parameters (`t: local T[]`): PTX reads them from the dynamic
 * shared memory (an extern .shared array) at a byte offset, SPIR-V takes
 * them as Workgroup pointers; both pass their checkers. */
static void test_local_params_gpu(void **state) {
  (void)state;
  static const char src[] =
      "kernel k(x: global f32[], t: local f32[], u: local i64[]) ndrange(1) {\n"
      "    local s: f32[8];\n"
      "    t[local_id(0)] = x[global_id(0)];\n"
      "    u[0] = 1;\n"
      "    s[local_id(0) % 8] = 2.0;\n"
      "    barrier();\n"
      "    atomic_add(&t[0], 1.0);\n"
      "    x[global_id(0)] = t[shape(t, 0) - 1 - local_id(0)] + f32(u[0]) + s[0];\n"
      "}\n";
  char *ptx = emit_text(src, "k", "ptx:sm_80", XPJ_EMIT_ASM);
  if (!strstr(ptx, ".extern .shared .align 16 .b8 __xpj_dyn[]"))
    fail_msg("PTX: no dynamic shared memory:\n%.1500s", ptx);
  ptxas_accepts(ptx, "sm_80");
  free(ptx);
  char *spv = emit_text(src, "k", "spirv", XPJ_EMIT_ASM);
  if (!strstr(spv, "OpFunctionParameter %_ptr_Workgroup_float") ||
      !strstr(spv, "OpFunctionParameter %_ptr_Workgroup_ulong"))
    fail_msg("SPIR-V: local array parameters are not Workgroup pointers");
  free(spv);
}

/* Every PTX architecture LLVM 22 knows (issue 17): a kernel with local
 * memory, a barrier, a float atomic, a math function from libdevice and a
 * 64-bit atomic compiles, names the architecture and the PTX ISA it needs
 * (LLVM's minimum), and passes ptxas where this ptxas knows the
 * architecture (CUDA 13's: not sm_70, sm_72 or sm_101). A newer PTX ISA
 * may be asked for; one past 9.0 or below the minimum is refused. */
/* libdevice's answer for the GPU it runs on: __nvvm_reflect("__CUDA_ARCH")
 * is the target's sm * 10 at every level, not 0 (the -O2 pipeline's
 * nvvm-reflect pass, named in text, knows no target: an adversarial
 * review found tgammaf compiled for sm_90 as for a GPU older than
 * sm_83). tgammaf takes another path from sm_83 on: its PTX for sm_80 and
 * sm_90 must differ past the header, as at -O3, and sm_90's at -O2 must
 * be the sm_90 path (as long as -O3's, within a tenth). */
static size_t count_str(const char *s, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
    n++;
  return n;
}

/* What ptx:sm_90 makes of kernel K of SRC at -O<LEVEL> (emit: PTX or the
 * LLVM IR code generation starts from), in process */
static char *ptx_emit(const char *src, const char *k, int level, xpj_emit_kind emit) {
  xpj_module *m = NULL;
  assert_int_equal(parse_src(src, &m, NULL), XPJ_OK);
  xpj_module *sp = spec_kernel(m, k, XPJ_VOID, 0);
  assert_non_null(sp);
  xpj_target tg;
  assert_int_equal(xpj_target_parse("ptx:sm_90", &tg, NULL, 0), XPJ_OK);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.opt_level = level;
  o.isolation = XPJ_ISOLATE_NONE;
  xpj_result *r = NULL;
  assert_int_equal(xpj_compile(sp, k, &tg, &o, emit, &r), XPJ_OK);
  size_t len;
  const char *data = (const char *)xpj_result_data(r, &len);
  char *text = strndup(data, len);
  assert_non_null(text);
  xpj_result_destroy(r);
  xpj_module_destroy(sp);
  xpj_module_destroy(m);
  return text;
}

static char *ptx_at(const char *src, const char *k, int level) {
  return ptx_emit(src, k, level, XPJ_EMIT_BIN);
}

/* PTX: the addresses a counted loop's variable indexes are induction
 * variables of the code generator's own (codegen.c scaled_pointer: a
 * pointer per view and other indices fixed in the loop; scaled_index: an
 * offset where another index changes in it), each stepped through a hint that
 * hides it from scalar evolution before code generation (target_ptx.c
 * opaque_scaled: launder.invariant.group for a pointer, expect for an
 * offset), so that loop strength reduction has nothing left to search;
 * not in loops of constant trip count (LLVM unrolls them), nor at -O0.
 * The four-trip copies share the loop's pointer. */
static void test_ptx_scaled(void **state) {
  (void)state;
  static const char src[] =
      "kernel mv(a: global const f32[,], x: global const f32[], y: global f32[])\n"
      "        range(1) {\n"
      "    let r = global_id(0);\n"
      "    if r >= shape(a, 0) { return; }\n"
      "    let acc = 0.0f32;\n"
      "    for (let k: i64 = 0; k < shape(a, 1); k++) {\n"
      "        acc += a[r, k] * x[k];\n"
      "    }\n"
      "    for (let k: i64 = 0; k < 4; k++) {\n"
      "        acc += a[r, k];\n"
      "    }\n"
      "    y[r] = acc;\n"
      "}\n"
      "kernel cols(a: global const f32[,], y: global f32[]) range(1) {\n"
      "    let acc = 0.0f32;\n"
      "    for (let k: i64 = 0; k < shape(a, 1); k++) {\n"
      "        for (let j: i64 = 0; j < shape(a, 0); j++) {\n"
      "            acc += a[j, k];\n"
      "        }\n"
      "    }\n"
      "    y[global_id(0)] = acc;\n"
      "}\n"
      "kernel pairs(a: global const f32[,], y: global f32[]) range(1) {\n"
      "    let acc = 0.0f32;\n"
      "    for (let k: i64 = 0; k < shape(a, 1); k++) {\n"
      "        for (let j: i64 = 0; j < 2; j++) {\n"
      "            acc += a[j + 1, k];\n"
      "        }\n"
      "    }\n"
      "    y[global_id(0)] = acc;\n"
      "}\n"
      "kernel gsum(x: global const f32[], y: global f32[]) ndrange(1) {\n"
      "    let acc = 0.0f32;\n"
      "    for (let i = global_id(0); i < shape(x, 0); i += global_size(0)) {\n"
      "        acc += x[i];\n"
      "    }\n"
      "    y[global_id(0)] = acc;\n"
      "}\n";
  static const char launder[] = "call ptr addrspace(1) @llvm.launder.invariant.group";
  static const char expect[] = "call i64 @llvm.expect.i64";
  char *mv = ptx_emit(src, "mv", 2, XPJ_EMIT_LLVM);
  /* a[r, k] and x[k]: two pointers; the constant loop none */
  assert_int_equal(count_str(mv, launder), 2);
  assert_int_equal(count_str(mv, expect), 0);
  assert_int_equal(count_str(mv, "!xpjit.scaled"), 2);
  free(mv);
  /* -O0: none */
  mv = ptx_emit(src, "mv", 0, XPJ_EMIT_LLVM);
  assert_int_equal(count_str(mv, "launder") + count_str(mv, "xpjit.scaled"), 0);
  free(mv);
  /* a[j, k]: a pointer of the inner loop (k fixed in it) */
  char *cl = ptx_emit(src, "cols", 2, XPJ_EMIT_LLVM);
  assert_int_equal(count_str(cl, launder), 1);
  assert_int_equal(count_str(cl, expect), 0);
  free(cl);
  /* a[j + 1, k], j a constant loop's: an offset of the k loop (the row
   * changes in it) */
  char *pr = ptx_emit(src, "pairs", 2, XPJ_EMIT_LLVM);
  assert_int_equal(count_str(pr, launder), 0);
  assert_int_equal(count_str(pr, expect), 1);
  free(pr);
  /* the four copies read one pointer (and the loop of the last trips goes
   * on with it) */
  char *gs = ptx_emit(src, "gsum", 2, XPJ_EMIT_LLVM);
  assert_int_equal(count_str(gs, launder), 2);
  free(gs);
}

/* The GPU -O2 pipeline unrolls loops of constant trip count completely;
 * a grid-stride loop that loads global memory runs four trips at a time
 * (four loads in flight, as NVRTC's loops have: docs/benchmarks.md, "PTX
 * quality"; codegen.c lower_four_trips); other loops of
 * unknown trip count stay rolled (ptxas unrolls what it finds worth it);
 * -O3 keeps LLVM's runtime unrolling. */
static void test_ptx_unroll(void **state) {
  (void)state;
  static const char src[] =
      "kernel dot(x: global const f32[], y: global const f32[],\n"
      "           out: global f32[]) range {\n"
      "    let i = global_id(0);\n"
      "    if i >= size(out) { return; }\n"
      "    let acc: f32 = 0.0;\n"
      "    for (let k: i64 = 0; k < size(x); k++) { acc += x[k] * y[k]; }\n"
      "    let c: f32[4];\n"
      "    for (let k: i64 = 0; k < 4; k++) { c[k] = x[k] * f32(i); }\n"
      "    out[i] = acc + c[0] * c[1] + c[2] * c[3];\n"
      "}\n"
      /* a grid-stride loop bounded by a shape; an arithmetic loop */
      "kernel gsum(x: global const f32[], total: global f32[], n: i64)\n"
      "        ndrange(1) {\n"
      "    let acc: f32 = 0.0;\n"
      "    for (let i = global_id(0); i < shape(x, 0); i += global_size(0)) {\n"
      "        acc += x[i];\n"
      "    }\n"
      "    let p: f32 = 1.0;\n"
      "    for (let k: i64 = 0; k < n; k++) { p = p * 0.5 + f32(k); }\n"
      "    atomic_add(&total[0], acc + p);\n"
      "}\n"
      /* the same loop bounded by a scalar (any i64: the four trips are
       * taken while i < n - 3 * global_size, saturating) */
      "kernel nsum(x: global const f32[], total: global f32[], n: i64)\n"
      "        ndrange(1) {\n"
      "    let acc: f32 = 0.0;\n"
      "    for (let i = global_id(0); i < n; i += global_size(0)) {\n"
      "        acc += x[i];\n"
      "    }\n"
      "    atomic_add(&total[0], acc);\n"
      "}\n"
      /* a grid-stride loop whose loads feed an atomic in a function it
       * calls: rolled, as with the atomic written in the loop */
      "fn bump(h: global u32[], v: u32) {\n"
      "    atomic_add(&h[i64(v % 16u32)], 1u32, relaxed, device);\n"
      "}\n"
      "kernel hsum(x: global const u32[], h: global u32[]) ndrange(1) {\n"
      "    for (let i = global_id(0); i < shape(x, 0); i += global_size(0)) {\n"
      "        bump(h, x[i]);\n"
      "    }\n"
      "}\n";
  char *o2 = ptx_at(src, "dot", 2), *o3 = ptx_at(src, "dot", 3);
  /* -O2: the dot loop's two loads (a loop of constant step: rolled), the
   * constant loop's four, no stack */
  assert_int_equal(count_str(o2, "ld.global"), 6);
  assert_int_equal(count_str(o2, "local_depot"), 0);
  /* -O3: the dot loop unrolled (iterations and a remainder) */
  assert_true(count_str(o3, "ld.global") >= 14);
  free(o2);
  free(o3);
  char *g = ptx_at(src, "gsum", 2);
  /* four loads and the remainder's one; the arithmetic loop rolled (one
   * multiply-add of p per trip: the text has one mul.rn.f32) */
  assert_int_equal(count_str(g, "ld.global"), 5);
  assert_int_equal(count_str(g, "mul.rn.f32"), 1);
  /* the unrolled loop and the loop of the last trips: ptxas leaves both
   * (the arithmetic loop is its to unroll) */
  assert_int_equal(count_str(g, "pragma \"nounroll\""), 2);
  free(g);
  /* both marked as the code generator's own canonical loops, which the
   * -O2 pipeline's xpj-indvars leaves alone (test_own_indvars): the
   * marker is in the optimised IR (one node, in both loops' IDs) */
  char *gi = ptx_emit(src, "gsum", 2, XPJ_EMIT_LLVM);
  assert_int_equal(count_str(gi, "!\"xpjit.loop.canonical\"}"), 1);
  assert_true(count_str(gi, "!llvm.loop") >= 2);
  free(gi);
  char *n = ptx_at(src, "nsum", 2);
  assert_int_equal(count_str(n, "ld.global"), 5);
  free(n);
  char *h = ptx_at(src, "hsum", 2);
  assert_int_equal(count_str(h, "ld.global"), 1);
  free(h);
}

/* At -O2 the steps of induction variables that are not constants reach
 * the loop passes and code generation frozen (target_ptx.c, opaque_steps:
 * scalar evolution no longer works through the ranges of nctaid * ntid),
 * and the copies of a loop run four trips at a time step from the trip's
 * first value, i0 + 2s rather than (i0 + s) + s (codegen.c,
 * lower_four_trips: ptxas kept the loads behind such a chain). */
static void test_ptx_opaque_steps(void **state) {
  (void)state;
  static const char src[] =
      "kernel gsum(x: global const f32[], total: global f32[]) ndrange(1) {\n"
      "    let acc: f32 = 0.0;\n"
      "    for (let i = global_id(0); i < shape(x, 0); i += global_size(0)) {\n"
      "        acc += x[i];\n"
      "    }\n"
      "    atomic_add(&total[0], acc);\n"
      "}\n"
      "kernel csum(x: global const f32[], total: global f32[]) ndrange(1) {\n"
      "    let acc: f32 = 0.0;\n"
      "    for (let i: i64 = 0; i < shape(x, 0); i += 3) { acc += x[i]; }\n"
      "    atomic_add(&total[0], acc);\n"
      "}\n";
  char *ll = ptx_emit(src, "gsum", 2, XPJ_EMIT_LLVM);
  assert_true(count_str(ll, "= freeze i64 ") >= 1);
  /* the four copies' block: each copy's address is the trip's pointer
   * (codegen.c scaled_pointer) plus a multiple of the step, not the
   * previous copy's plus the step (a chain ptxas issued the loads behind) */
  const char *b = strstr(ll, "\nfour.body:");
  assert_non_null(b);
  const char *end = strstr(b + 1, "\n\n");
  char *blk = strndup(b, end ? (size_t)(end - b) : strlen(b));
  const char *ph = strstr(blk, " = phi ptr addrspace(1) ");
  assert_non_null(ph);
  const char *nm = ph;
  while (nm > blk && nm[-1] != ' ')
    nm--;
  char from[96], load[96];
  snprintf(from, sizeof from, "getelementptr i8, ptr addrspace(1) %.*s, ",
           (int)(ph - nm), nm);
  snprintf(load, sizeof load, "load float, ptr addrspace(1) %.*s, ",
           (int)(ph - nm), nm);
  if (count_str(blk, from) != 3 || count_str(blk, load) != 1)
    fail_msg("the copies' addresses are not the trip's pointer and three "
             "offsets from it (%zu, %zu) in:\n%s", count_str(blk, from),
             count_str(blk, load), blk);
  free(blk);
  free(ll);
  /* a constant step is left as it is */
  ll = ptx_emit(src, "csum", 2, XPJ_EMIT_LLVM);
  assert_int_equal(count_str(ll, "freeze"), 0);
  free(ll);
}

/* A kernel that calls no function of its own takes the -O2 pipeline
 * without inlining (target_ptx.c, ptx_o2_leaf): a local array its clean-up
 * leaves unused is still dropped, as after inlining (no .shared for it). */
static void test_ptx_leaf_dead_local(void **state) {
  (void)state;
  static const char src[] =
      "kernel k(x: global f32[]) ndrange(1) {\n"
      "    local t: f32[8192];\n"
      "    let i = global_id(0);\n"
      "    if i < 0 { t[local_id(0)] = x[i]; barrier(local);\n"
      "               x[i] = t[(local_id(0) + 1) % 8192]; }\n"
      "    x[i] = x[i] + 1.0;\n"
      "}\n";
  char *ptx = ptx_at(src, "k", 2);
  if (strstr(ptx, ".shared"))
    fail_msg("a dead local array is declared:\n%s", ptx);
  free(ptx);
}

/* Kernel k with n private arrays of 512 KiB (f64[65536]) */
static void private_arrays_src(char *src, size_t size, int n) {
  int k = snprintf(src, size, "kernel k(x: global f64[]) range {\n"
                   "  let i = global_id(0);\n  let s = 0.0;\n");
  for (int a = 0; a < n; a++)
    k += snprintf(src + k, size - (size_t)k,
                  "  let a%d: f64[65536];\n  a%d[i %% 65536] = 1.0;\n"
                  "  s += a%d[(i + 1) %% 65536];\n", a, a, a);
  snprintf(src + k, size - (size_t)k, "  x[i] = s;\n}\n");
}

/* Compiles kernel k of src for target: the status, the log in log. */
static xpj_status compile_src(const char *src, const char *target,
                              char *log, size_t n, xpj_failure_kind *kind) {
  xpj_module *m = NULL;
  assert_int_equal(parse_src(src, &m, NULL), XPJ_OK);
  xpj_module *sp = spec_kernel(m, "k", XPJ_VOID, 0);
  assert_non_null(sp);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.isolation = XPJ_ISOLATE_NONE;
  xpj_status st = compile_with(sp, "k", target, &o, log, n, kind);
  xpj_module_destroy(sp);
  xpj_module_destroy(m);
  return st;
}

/* A kernel's private arrays, kept in its frame, take at most 4 MiB per
 * work-item (CG_PRIVATE_MAX_BYTES), each device function's arrays counted
 * at each call: past it the compile is refused (XPJ_ERR_UNSUPPORTED, an
 * input failure, naming the array that goes past), on every target.
 * Before, the CPU device ran any such kernel on a thread whose stack it
 * overflowed (SIGSEGV: 20 calls of a function with one f64[65536]; found
 * probing the C API). Exactly 4 MiB compiles. */
static void test_private_limit(void **state) {
  (void)state;
  static const char calls[] =
      "fn f(i: i64) -> f64 {\n"
      "  let a: f64[65536];\n"
      "  a[i % 65536] = 1.0;\n"
      "  return a[(i + 1) % 65536];\n"
      "}\n"
      "kernel k(x: global f64[]) range {\n"
      "  let i = global_id(0);\n"
      "  x[i] = f(i) + f(i + 1) + f(i + 2) + f(i + 3) + f(i + 4) + f(i + 5) +\n"
      "         f(i + 6) + f(i + 7) + f(i + 8);\n"
      "}\n";
  static const char *const targets[] = {"cpu", "ptx:sm_90"};
  char src[2048], log[4096];
  for (unsigned t = 0; t < 2; t++) {
    xpj_failure_kind kind;
    private_arrays_src(src, sizeof src, 9);
    assert_int_equal(compile_src(src, targets[t], log, sizeof log, &kind),
                     XPJ_ERR_UNSUPPORTED);
    assert_int_equal(kind, XPJ_FAILURE_INPUT);
    if (!strstr(log, "t.xpk:28:7: private array 'a8' brings the private "
                "arrays of kernel k to 4718592 bytes per work-item, more "
                "than the 4 MiB a work-item may have"))
      fail_msg("%s: %s", targets[t], log);
    private_arrays_src(src, sizeof src, 8);
    assert_int_equal(compile_src(src, targets[t], log, sizeof log, NULL),
                     XPJ_OK);
    assert_int_equal(compile_src(calls, targets[t], log, sizeof log, NULL),
                     XPJ_ERR_UNSUPPORTED);
    if (!strstr(log, "t.xpk:2:7: private array 'a' of function f brings the "
                "private arrays of kernel k to 4718592 bytes"))
      fail_msg("%s: %s", targets[t], log);
  }
}

/* More than 48 KiB of static local memory in a kernel is refused when
 * the PTX is made (XPJ_ERR_UNSUPPORTED, naming the limit), not by ptxas
 * when a process loads it: 48,896 bytes of array and the collectives'
 * 256 assemble, 64 bytes more do not; what optimisation removed does not
 * count (an adversarial review; mutation-checked). */
static void test_ptx_static_shared_limit(void **state) {
  (void)state;
  static const char fmt[] =
      "kernel k(x: global f32[]) ndrange(1) {\n"
      "    local t: f32[%d];\n"
      "    t[local_id(0)] = x[global_id(0)];\n"
      "    barrier(local);\n"
      "    x[global_id(0)] = t[%d - 1 - local_id(0)] + group_reduce_add(x[0]);\n"
      "}\n";
  char src[512];
  snprintf(src, sizeof src, fmt, 12224, 12224);
  char *ptx = ptx_at(src, "k", 2);
  if (ptxas)
    ptxas_accepts(ptx, "sm_90");
  free(ptx);
  snprintf(src, sizeof src, fmt, 12240, 12240);
  xpj_module *m = NULL;
  assert_int_equal(parse_src(src, &m, NULL), XPJ_OK);
  xpj_module *sp = spec_kernel(m, "k", XPJ_VOID, 0);
  assert_non_null(sp);
  char log[4096];
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.isolation = XPJ_ISOLATE_NONE;
  assert_int_equal(compile_with(sp, "k", "ptx:sm_90", &o, log, sizeof log,
                                NULL), XPJ_ERR_UNSUPPORTED);
  assert_non_null(strstr(log, "take 49216 bytes; PTX allows 49152 (48 KiB)"));
  xpj_module_destroy(sp);
  xpj_module_destroy(m);
  /* a dead 64 KiB array: removed, not refused */
  static const char dead[] =
      "kernel k(x: global f32[]) ndrange(1) {\n"
      "    local t: f32[16384];\n"
      "    let i = global_id(0);\n"
      "    if i < 0 { t[local_id(0)] = x[i]; barrier(local);\n"
      "               x[i] = t[(local_id(0) + 1) % 16384]; }\n"
      "    x[i] = x[i] + 1.0;\n"
      "}\n";
  ptx = ptx_at(dead, "k", 2);
  free(ptx);
  /* what the result reports is what the PTX and the SPIR-V declare (a
   * launch counts it beside its local array parameters); the CPU lays
   * the arrays out before optimisation, at fixed offsets */
  static const char off[] = /* dead wherever it is compiled */
      "const ON: bool = false;\n"
      "kernel k(x: global f32[]) ndrange(1) {\n"
      "    local t: f32[16384];\n"
      "    if ON { t[local_id(0)] = x[0]; barrier(local); x[0] = t[1]; }\n"
      "    x[global_id(0)] = 1.0;\n"
      "}\n";
  static const struct {
    const char *src, *target;
    uint64_t bytes;
  } counted[] = {
      {dead, "ptx:sm_90", 0},
      /* (SPIR-V's global_id is not known to be unsigned: the array stays) */
      {dead, "spirv", 65536},
      {off, "spirv", 0},
      {off, "ptx:sm_90", 0},
      {dead, "cpu", 65536},
      {"kernel k(x: global f32[]) ndrange(1) {\n"
       "    local t: f32[100];\n"
       "    t[local_id(0)] = x[global_id(0)];\n"
       "    barrier(local);\n"
       "    x[global_id(0)] = t[99 - local_id(0)] + group_reduce_add(x[0]);\n"
       "}\n",
       "ptx:sm_90", 400 + 256 - 400 % 8 + 0},
  };
  for (size_t i = 0; i < sizeof counted / sizeof *counted; i++) {
    assert_int_equal(parse_src(counted[i].src, &m, NULL), XPJ_OK);
    sp = spec_kernel(m, "k", XPJ_VOID, 0);
    assert_non_null(sp);
    xpj_target t;
    char err[128];
    assert_int_equal(xpj_target_parse(counted[i].target, &t, err, sizeof err),
                     XPJ_OK);
    xpj_result *r = NULL;
    assert_int_equal(xpj_compile(sp, "k", &t, &o, XPJ_EMIT_BIN, &r), XPJ_OK);
    if (xpj_result_local_bytes(r) != counted[i].bytes)
      fail_msg("%s, case %zu: %llu bytes of local memory, want %llu",
               counted[i].target, i,
               (unsigned long long)xpj_result_local_bytes(r),
               (unsigned long long)counted[i].bytes);
    xpj_result_destroy(r);
    xpj_module_destroy(sp);
    xpj_module_destroy(m);
  }
}

/* A CPU target whose name or features LLVM does not know is refused with
 * XPJ_ERR_INVALID, in process too: LLVM would ignore an unknown feature
 * with a warning on stderr, and end the process on a CPU without 64-bit
 * mode (cpu:i386:). Empty entries of the list are allowed. */
static void test_cpu_target_names(void **state) {
  (void)state;
  xpj_module *m = NULL;
  assert_int_equal(parse_src("kernel k(x: global f32[]) range {\n"
                             "    x[global_id(0)] = 1.0;\n}\n",
                             &m, NULL),
                   XPJ_OK);
  xpj_module *sp = spec_kernel(m, "k", XPJ_VOID, 0);
  assert_non_null(sp);
  static const struct {
    const char *target, *says;
  } bad[] = {
      {"cpu:x86-64:+nonsense", "'+nonsense' is not a CPU feature LLVM knows"},
      {"cpu:foo:+avx", "'foo' is not a CPU LLVM knows"},
      {"cpu:x86-64:avx2", "'avx2' needs a sign"},
      {"cpu:i386:", "CPU 'i386' cannot run 64-bit code"},
      {"cpu:x86-64:+avx2,-64bit", "cannot run 64-bit code"},
      /* the mode, not the instructions: LLVM aborted the process ("Do not
       * know how to expand the result of this operator!") */
      {"cpu:x86-64:-64bit-mode", "cannot run 64-bit code"},
  };
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.isolation = XPJ_ISOLATE_NONE;
  char log[4096];
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(compile_with(sp, "k", bad[i].target, &o, log,
                                  sizeof log, NULL),
                     XPJ_ERR_INVALID);
    if (!strstr(log, bad[i].says))
      fail_msg("%s: '%s' not in: %s", bad[i].target, bad[i].says, log);
  }
  /* the same from a compile worker */
  xpj_compile_opts iso;
  xpj_compile_opts_default(&iso);
  assert_int_equal(compile_with(sp, "k", "cpu:i386:", &iso, log, sizeof log,
                                NULL),
                   XPJ_ERR_INVALID);
  assert_non_null(strstr(log, "cannot run 64-bit code"));
  static const char *const good[] = {"cpu:x86-64:+avx2,,+fma,-avx512f",
                                     "cpu:x86-64-v2:", "cpu:skylake:"};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++)
    if (compile_with(sp, "k", good[i], &o, log, sizeof log, NULL) != XPJ_OK)
      fail_msg("%s: %s", good[i], log);
  xpj_module_destroy(sp);
  xpj_module_destroy(m);
  /* an error LLVM's code generator reports (libm's sin returns a double
   * in an SSE2 register) fails the compile with its message, in-process
   * and in a worker: without a diagnostic handler LLVM printed it and
   * called exit(1), which ended the caller of an in-process compile
   * (found probing the C API) */
  assert_int_equal(parse_src("kernel k(x: global f64[]) range {\n"
                             "    x[global_id(0)] = sin(x[global_id(0)]);\n}\n",
                             &m, NULL),
                   XPJ_OK);
  sp = spec_kernel(m, "k", XPJ_VOID, 0);
  assert_non_null(sp);
  const xpj_compile_opts *both[] = {&o, &iso};
  for (unsigned i = 0; i < 2; i++) {
    xpj_failure_kind kind;
    assert_int_equal(compile_with(sp, "k", "cpu:x86-64:-sse2", both[i], log,
                                  sizeof log, &kind),
                     XPJ_ERR_COMPILE);
    assert_int_equal(kind, XPJ_FAILURE_INPUT);
    if (!strstr(log, "LLVM: ") ||
        !strstr(log, "SSE2 register return with SSE2 disabled") ||
        log[strlen(log) - 1] == '\n')
      fail_msg("%s: %s", i ? "in a worker" : "in-process", log);
  }
  xpj_module_destroy(sp);
  xpj_module_destroy(m);
}

/* Instructions matching `op` (a word followed by '.') inside the PTX's
 * loops: between a label and a later branch back to it. */
static unsigned in_loops(const char *ptx, const char *op) {
  unsigned n = 0;
  size_t oplen = strlen(op);
  for (const char *b = strstr(ptx, "bra"); b; b = strstr(b + 3, "bra")) {
    const char *t = strstr(b, "$L__BB");
    const char *eol = strchr(b, '\n');
    if (!t || (eol && t > eol))
      continue;
    char label[64];
    size_t len = strcspn(t, ";\n");
    if (len + 2 > sizeof label)
      continue;
    memcpy(label, t, len);
    label[len] = ':';
    label[len + 1] = 0;
    const char *head = strstr(ptx, label);
    if (!head || head > b)
      continue; /* a forward branch */
    for (const char *p = head; p < b; p++)
      if (!strncmp(p, op, oplen) && p[oplen] == '.' &&
          (p == ptx || p[-1] == '\t' || p[-1] == ' '))
        n++;
  }
  return n;
}

/* Passes of the -O2 pipeline after full unrolling that the 95 example
 * kernels did not need but other kernels do (target_ptx.c, ptx_o2_loops;
 * docs/benchmarks.md, issue 19, seventeenth session): LICM (divisions
 * that became invariant once the inner loop was unrolled leave the loop
 * around), SROA that may change the CFG (a private array indexed by a
 * data-dependent 0/1 stays out of local memory), GVN (a global element
 * stored, then loaded again across a branch), DSE (a zero-initialised
 * private array, overwritten). */
static void test_ptx_cleanup_passes(void **state) {
  (void)state;
  static const char src[] =
      "kernel inv_div(x: global const i32[], y: global i32[], n: i64,\n"
      "               p: i32, q: i32) range {\n"
      "    let i = global_id(0);\n"
      "    if i >= shape(y, 0) { return; }\n"
      "    let acc = 0;\n"
      "    for (let j: i64 = 0; j < n; j++) {\n"
      "        let v = x[(i + j) % shape(x, 0)];\n"
      "        for (let k = 0; k < 4; k++) {\n"
      "            acc += v * (p / (q + k)) + (p % (q + 2 * k));\n"
      "        }\n"
      "    }\n"
      "    y[i] = acc;\n"
      "}\n"
      "kernel split2(x: global const f32[], out: global f32[,], t: f32)\n"
      "        range(1) {\n"
      "    let i = global_id(0);\n"
      "    if i >= shape(out, 0) { return; }\n"
      "    let s: f32[2];\n"
      "    let c: i32[2];\n"
      "    for (let j = i; j < shape(x, 0); j += global_size(0)) {\n"
      "        let v = x[j];\n"
      "        let b = v < t ? 0 : 1;\n"
      "        s[b] += v;\n"
      "        c[b] += 1;\n"
      "    }\n"
      "    out[i, 0] = s[0] / f32(max(c[0], 1));\n"
      "    out[i, 1] = s[1] / f32(max(c[1], 1));\n"
      "}\n"
      "kernel reload(x: global const f32[], y: global f32[]) range {\n"
      "    let i = global_id(0);\n"
      "    if i >= shape(y, 0) { return; }\n"
      "    y[i] = 0.0;\n"
      "    for (let k: i64 = 0; k < 4; k++) {\n"
      "        if x[(i + k) % shape(x, 0)] > 0.0 {\n"
      "            y[i] = y[i] + x[(i + k) % shape(x, 0)];\n"
      "        }\n"
      "    }\n"
      "}\n"
      "kernel dead_init(x: global const f32[,], idx: global const i32[],\n"
      "                 y: global f32[]) range(1) {\n"
      "    let i = global_id(0);\n"
      "    if i >= shape(y, 0) { return; }\n"
      "    let a: f32[4, 8];\n"
      "    for (let r: i64 = 0; r < 4; r++) {\n"
      "        for (let c: i64 = 0; c < 8; c++) {\n"
      "            a[r, c] = x[(i + r) % shape(x, 0), c % shape(x, 1)];\n"
      "        }\n"
      "    }\n"
      "    let k = idx[i];\n"
      "    y[i] = a[k & 3, (k >> 2) & 7];\n"
      "}\n";
  /* the j loop keeps its own % (index), not the eight of p and q */
  char *d = ptx_at(src, "inv_div", 2);
  assert_true(in_loops(d, "div") + in_loops(d, "rem") <= 2);
  assert_int_equal(count_str(d, "div.") + count_str(d, "rem."), 8);
  free(d);
  char *s2 = ptx_at(src, "split2", 2);
  assert_int_equal(count_str(s2, "local_depot"), 0);
  free(s2);
  /* x[.] twice and y[i] once per trip: 4 loads, not 7 */
  char *r = ptx_at(src, "reload", 2);
  assert_int_equal(count_str(r, "ld.global"), 4);
  free(r);
  /* the array is read at a data-dependent index: in local memory, its
   * 32 elements stored once each (not zeroed first) */
  char *z = ptx_at(src, "dead_init", 2);
  assert_int_equal(count_str(z, "st.local"), 32);
  free(z);
}

/* The exit test of a loop stepping by a constant reads the stepped value
 * (j + 8 < 32, not j < 24, which InstCombine makes of it): ptxas then
 * counts the trips and unrolls the loop (transpose_tiled: four loads in
 * flight instead of one; docs/benchmarks.md, "PTX quality"). */
static void test_ptx_stepped_exit(void **state) {
  (void)state;
  static const char src[] =
      "kernel tile(src: global const f32[,], dst: global f32[,]) ndrange(2) {\n"
      "    local t: f32[32, 33];\n"
      "    let ly = local_id(0);\n"
      "    let lx = local_id(1);\n"
      "    for (let j = ly; j < 32; j += 8) {\n"
      "        if j < shape(src, 0) && lx < shape(src, 1) {\n"
      "            t[j, lx] = src[j, lx];\n"
      "        }\n"
      "    }\n"
      "    barrier(local);\n"
      "    if ly < shape(dst, 0) && lx < shape(dst, 1) {\n"
      "        dst[ly, lx] = t[lx, ly];\n"
      "    }\n"
      "}\n";
  char *p = ptx_at(src, "tile", 2);
  assert_int_equal(count_str(p, ", 24;"), 0);
  assert_true(count_str(p, ", 32;") >= 1);
  free(p);
}

/* Every math builtin, f32 and f64, with and without fast-math, at -O1 and
 * -O2 (libdevice linked early and late): compiled, and nothing left for
 * ptxas to find missing (an external function: fast-math exp2 on f32 once
 * called a __nv_fast_exp2f that libdevice does not have). */
static void test_libdevice_names(void **state) {
  (void)state;
  if (!xpj_libdevice_path())
    skip();
  static const char src[] =
      "kernel all<T>(x: global T[], y: global T[]) range {\n"
      "    let i = global_id(0);\n"
      "    if i >= size(x) { return; }\n"
      "    let a = x[i];\n"
      "    let b = y[i];\n"
      "    let s = sqrt(a) + rsqrt(a) + cbrt(a) + exp(a) + exp2(a) + expm1(a)\n"
      "          + log(a) + log2(a) + log10(a) + log1p(a) + pow(a, b)\n"
      "          + sin(a) + cos(a) + tan(a) + asin(a) + acos(a) + atan(a)\n"
      "          + atan2(a, b) + sinh(a) + cosh(a) + tanh(a) + round(a)\n"
      "          + hypot(a, b) + erf(a) + erfc(a) + lgamma(a) + tgamma(a);\n"
      "    y[i] = s;\n"
      "}\n";
  xpj_module *m = NULL;
  assert_int_equal(parse_src(src, &m, NULL), XPJ_OK);
  xpj_target tg;
  assert_int_equal(xpj_target_parse("ptx:sm_90", &tg, NULL, 0), XPJ_OK);
  static const xpj_scalar types[2] = {XPJ_F32, XPJ_F64};
  for (int t = 0; t < 2; t++) {
    xpj_module *sp = spec_kernel(m, "all", types[t], 0);
    assert_non_null(sp);
    for (int fast = 0; fast < 2; fast++)
      for (unsigned lvl = 1; lvl <= 2; lvl++) {
        xpj_compile_opts o;
        xpj_compile_opts_default(&o);
        o.opt_level = lvl;
        o.fast_math = fast;
        o.isolation = XPJ_ISOLATE_NONE;
        xpj_result *r = NULL;
        xpj_status st = xpj_compile(sp, "all", &tg, &o, XPJ_EMIT_BIN, &r);
        if (st != XPJ_OK)
          fail_msg("%s fast=%d -O%u: %s", t ? "f64" : "f32", fast, lvl,
                   xpj_result_log(r));
        size_t len;
        const char *d = (const char *)xpj_result_data(r, &len);
        char *text = strndup(d, len);
        if (strstr(text, ".extern") || strstr(text, "__nv_"))
          fail_msg("%s fast=%d -O%u: a libdevice function left external",
                   t ? "f64" : "f32", fast, lvl);
        free(text);
        xpj_result_destroy(r);
      }
    xpj_module_destroy(sp);
  }
  xpj_module_destroy(m);
}

/* -O2 links libdevice after optimising the kernel (target_ptx.c,
 * ptx_before_codegen): every call is inlined in the end, a call the
 * optimiser removed needs no libdevice at all, and one it kept still says
 * that libdevice is missing. */
static void test_libdevice_late(void **state) {
  (void)state;
  static const char src[] =
      "kernel polar(r: global const f32[], x: global f32[], y: global f32[])"
      " range {\n"
      "    let i = global_id(0);\n"
      "    if i < size(x) { x[i] = r[i] * cos(r[i]); y[i] = r[i] * sin(r[i]); }\n"
      "}\n"
      "kernel dead(x: global f32[]) range {\n"
      "    let i = global_id(0);\n"
      "    let unused = sin(x[i]);\n"
      "    if i < size(x) { x[i] = x[i] + 1.0; }\n"
      "}\n";
  if (!xpj_libdevice_path())
    skip();
  char *p = ptx_at(src, "polar", 2);
  assert_int_equal(count_str(p, "call"), 0);
  assert_int_equal(count_str(p, ".func"), 0);
  assert_int_equal(count_str(p, "__nv_"), 0);
  free(p);
  const char *old = getenv("XPJIT_LIBDEVICE");
  char *keep = old ? strdup(old) : NULL;
  setenv("XPJIT_LIBDEVICE", "/nonexistent/libdevice.10.bc", 1);
  free(ptx_at(src, "dead", 2)); /* compiles */
  xpj_module *m = NULL;
  assert_int_equal(parse_src(src, &m, NULL), XPJ_OK);
  xpj_module *sp = spec_kernel(m, "polar", XPJ_VOID, 0);
  xpj_target tg;
  assert_int_equal(xpj_target_parse("ptx:sm_90", &tg, NULL, 0), XPJ_OK);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.isolation = XPJ_ISOLATE_NONE;
  xpj_result *r = NULL;
  assert_int_equal(xpj_compile(sp, "polar", &tg, &o, XPJ_EMIT_BIN, &r),
                   XPJ_ERR_UNSUPPORTED);
  assert_non_null(strstr(xpj_result_log(r), "need libdevice"));
  xpj_result_destroy(r);
  xpj_module_destroy(sp);
  xpj_module_destroy(m);
  if (keep)
    setenv("XPJIT_LIBDEVICE", keep, 1);
  else
    unsetenv("XPJIT_LIBDEVICE");
  free(keep);
}

/* In a child: kernel k of sp compiled here for target (into *tg) as a
 * job of the plugin's, as a compile server's worker does (job.worker) or
 * not, into *r; exits 98 when target does not parse. */
static void compile_job(const xpj_module *sp, const char *k,
                        const char *target, const char *libdevice,
                        bool worker, xpj_emit_kind emit, xpj_target *tg,
                        xpj_result *r) {
  if (xpj_target_parse(target, tg, NULL, 0) != XPJ_OK)
    _exit(98);
  xpj_job j;
  memset(&j, 0, sizeof j);
  j.m = sp;
  j.kernel = xpj_module_find(sp, k);
  j.target = tg;
  xpj_compile_opts_default(&j.opts);
  j.emit = emit;
  xpj_entry_name(k, j.entry, sizeof j.entry);
  snprintf(j.libdevice, sizeof j.libdevice, "%s", libdevice);
  j.worker = worker;
  memset(r, 0, sizeof *r);
  xpj_llvm_plugin_api.compile(&j, r);
}

/* Compiles kernel k of sp for ptx:sm_90 in a child, as a worker does
 * (job.worker: it may take libdevice read ahead) or not; the child's exit
 * status: 0 compiled, 99 refused libdevice as not bitcode, 97 other. */
static int compile_in_child(const xpj_module *sp, const char *k,
                            const char *libdevice, bool worker,
                            bool no_files) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* no file can be opened: only what was read ahead can serve */
    struct rlimit none = {0, 0};
    if (no_files && setrlimit(RLIMIT_NOFILE, &none) != 0)
      _exit(96);
    xpj_target tg;
    xpj_result r;
    compile_job(sp, k, "ptx:sm_90", libdevice, worker, XPJ_EMIT_BIN, &tg, &r);
    if (r.status == XPJ_OK)
      _exit(0);
    /* the failure expected of a spoilt file, or another */
    _exit(r.log && strstr(r.log, "is not valid bitcode") ? 99 : 97);
  }
  int ws;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  assert_true(WIFEXITED(ws));
  return WEXITSTATUS(ws);
}

/* Overwrites path in place with as many bytes of garbage, its
 * modification time kept (its change time moves). */
static void spoil(const char *path) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  int fd = open(path, O_WRONLY);
  assert_true(fd >= 0);
  char junk[4096];
  memset(junk, 'x', sizeof junk);
  for (off_t at = 0; at < st.st_size; at += (off_t)sizeof junk) {
    size_t n = st.st_size - at < (off_t)sizeof junk ? (size_t)(st.st_size - at)
                                                   : sizeof junk;
    assert_int_equal(pwrite(fd, junk, n, at), (ssize_t)n);
  }
  close(fd);
  struct timespec ts[2] = {st.st_atim, st.st_mtim};
  assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* libdevice read ahead by a compile server (read_ahead) serves the PTX
 * compiles of the workers forked after it, and only theirs, and only while
 * the file is the one read: here a copy the test changes in place; a
 * FIFO named as libdevice does not hang it. */
static void test_libdevice_ahead(void **state) {
  (void)state;
  const char *orig = xpj_libdevice_path();
  if (!orig)
    skip();
  char path[512], cmd[1200];
  snprintf(path, sizeof path, "%s/libdevice.10.bc", tmpdir);
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", orig, path);
  assert_int_equal(system(cmd), 0);
  static const char src[] =
      "kernel tg(x: global f32[]) range {\n"
      "    let i = global_id(0);\n"
      "    if i < size(x) { x[i] = tgamma(x[i]); }\n"
      "}\n";
  xpj_module *m = NULL;
  assert_int_equal(parse_src(src, &m, NULL), XPJ_OK);
  xpj_module *sp = spec_kernel(m, "tg", XPJ_VOID, 0);
  assert_non_null(sp);
  xpj_llvm_plugin_api.read_ahead(path);
  assert_int_equal(compile_in_child(sp, "tg", path, true, false), 0);
  /* a worker that can open no file compiles from what was read ahead;
   * any other compile must read the file */
  assert_int_equal(compile_in_child(sp, "tg", path, true, true), 0);
  assert_int_equal(compile_in_child(sp, "tg", path, false, true), 97);
  /* the file's bytes replaced in place, size and modification time kept
   * (its change time moves): read again, and refused */
  spoil(path);
  assert_int_equal(compile_in_child(sp, "tg", path, true, false), 99);
  /* another path: not taken */
  assert_int_equal(compile_in_child(sp, "tg", orig, true, true), 97);
  assert_int_equal(compile_in_child(sp, "tg", orig, true, false), 0);
  unlink(path);
  /* a FIFO: refused at once, not read (nobody writes it) */
  assert_int_equal(mkfifo(path, 0600), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    alarm(10);
    xpj_llvm_plugin_api.read_ahead(path);
    _exit(0);
  }
  int ws;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  unlink(path);
  xpj_module_destroy(sp);
  xpj_module_destroy(m);
}

/* kernel k of sp as LLVM IR for target, parsed into ctx */
static LLVMModuleRef ir_module(LLVMContextRef ctx, const xpj_module *sp,
                               const char *k, const char *target) {
  xpj_result *r = compile_for(sp, k, target, XPJ_EMIT_LLVM);
  size_t n;
  const uint8_t *ir = xpj_result_data(r, &n);
  LLVMMemoryBufferRef mb =
      LLVMCreateMemoryBufferWithMemoryRangeCopy((const char *)ir, n, "ir");
  LLVMModuleRef mod = NULL;
  char *msg = NULL;
  if (LLVMParseIRInContext(ctx, mb, &mod, &msg))
    fail_msg("IR: %s", msg);
  xpj_result_destroy(r);
  return mod;
}

/* A code generator built before its module (llvm_emit.cpp) emits what
 * LLVMTargetMachineEmitToMemoryBuffer emits for the same module and
 * machine, PTX text and CPU objects alike; it fits its own machine and
 * file type only, and runs once. */
/* A machine for PTX sm_90 at -O2 (LLVM initialised) */
static LLVMTargetMachineRef sm90_machine(void) {
  char *msg = NULL;
  LLVMTargetRef t;
  assert_int_equal(LLVMGetTargetFromTriple("nvptx64-nvidia-cuda", &t, &msg), 0);
  return LLVMCreateTargetMachine(t, "nvptx64-nvidia-cuda", "sm_90", "+ptx78",
                                 LLVMCodeGenLevelDefault, LLVMRelocPIC,
                                 LLVMCodeModelDefault);
}

static void test_emitter(void **state) {
  (void)state;
  xpj_llvm_plugin_api.init();
  xpj_module *m = load_example("reduce.xpk");
  xpj_module *sp = spec_kernel(m, "dot", XPJ_F32, 0);
  assert_non_null(sp);
  static const struct {
    const char *target, *triple, *cpu, *features;
    LLVMCodeGenFileType ft;
  } cases[] = {
      {"ptx:sm_90", "nvptx64-nvidia-cuda", "sm_90", "+ptx78", LLVMAssemblyFile},
      {"cpu:x86-64", "x86_64-pc-linux-gnu", "x86-64", "", LLVMObjectFile},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef a = ir_module(ctx, sp, "dot", cases[i].target);
    LLVMModuleRef b = LLVMCloneModule(a);
    char *msg = NULL;
    LLVMTargetRef t;
    assert_int_equal(LLVMGetTargetFromTriple(cases[i].triple, &t, &msg), 0);
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(
        t, cases[i].triple, cases[i].cpu, cases[i].features,
        LLVMCodeGenLevelDefault, LLVMRelocPIC, LLVMCodeModelDefault);
    LLVMTargetMachineRef other = LLVMCreateTargetMachine(
        t, cases[i].triple, cases[i].cpu, cases[i].features,
        LLVMCodeGenLevelDefault, LLVMRelocPIC, LLVMCodeModelDefault);
    LLVMCodeGenFileType wrong =
        cases[i].ft == LLVMAssemblyFile ? LLVMObjectFile : LLVMAssemblyFile;
    xpj_emitter *e = xpj_emitter_create(tm, cases[i].ft);
    assert_non_null(e);
    assert_true(xpj_emitter_fits(e, tm, cases[i].ft));
    assert_false(xpj_emitter_fits(e, tm, wrong));
    assert_false(xpj_emitter_fits(e, other, cases[i].ft));
    assert_false(xpj_emitter_fits(NULL, tm, cases[i].ft));
    const char *d;
    size_t n;
    assert_int_equal(xpj_emitter_run(e, a, &d, &n), 0);
    LLVMMemoryBufferRef ref = NULL;
    assert_int_equal(
        LLVMTargetMachineEmitToMemoryBuffer(tm, b, cases[i].ft, &msg, &ref), 0);
    assert_true(n > 0);
    assert_int_equal(n, LLVMGetBufferSize(ref));
    assert_memory_equal(d, LLVMGetBufferStart(ref), n);
    if (cases[i].ft == LLVMAssemblyFile)
      assert_non_null(strstr(d, ".entry"));
    /* once only */
    assert_false(xpj_emitter_fits(e, tm, cases[i].ft));
    assert_int_equal(xpj_emitter_run(e, b, &d, &n), -1);
    LLVMDisposeMemoryBuffer(ref);
    xpj_emitter_destroy(e);
    LLVMDisposeTargetMachine(other);
    LLVMDisposeTargetMachine(tm);
    LLVMDisposeModule(a);
    LLVMDisposeModule(b);
    LLVMContextDispose(ctx);
  }
  xpj_emitter_destroy(NULL);
  /* an optimisation pipeline built ahead gives LLVMRunPasses's module */
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef a = ir_module(ctx, sp, "dot", "ptx:sm_90");
  LLVMModuleRef b = LLVMCloneModule(a);
  LLVMTargetMachineRef tm = sm90_machine();
  static const char text[] = "default<O3>";
  /* a text that does not parse: LLVM's reason, naming the pass */
  char why[256] = "x";
  assert_null(xpj_passes_create(tm, "no-such-pass", true, why, sizeof why));
  assert_non_null(strstr(why, "no-such-pass"));
  assert_null(xpj_passes_create(tm, "function(no-such-pass)", true, NULL, 0));
  xpj_passes *p = xpj_passes_create(tm, text, true, why, sizeof why);
  assert_string_equal(why, "");
  assert_non_null(p);
  assert_true(xpj_passes_fits(p, tm, "default<O3>"));
  assert_false(xpj_passes_fits(p, tm, "default<O2>"));
  assert_false(xpj_passes_fits(NULL, tm, text));
  assert_int_equal(xpj_passes_run(p, a), 0);
  LLVMPassBuilderOptionsRef pbo = LLVMCreatePassBuilderOptions();
  LLVMPassBuilderOptionsSetLoopVectorization(pbo, 0);
  LLVMPassBuilderOptionsSetSLPVectorization(pbo, 0);
  assert_null(LLVMRunPasses(b, text, tm, pbo));
  LLVMDisposePassBuilderOptions(pbo);
  char *sa = LLVMPrintModuleToString(a), *sb = LLVMPrintModuleToString(b);
  assert_string_equal(sa, sb);
  LLVMDisposeMessage(sa);
  LLVMDisposeMessage(sb);
  assert_false(xpj_passes_fits(p, tm, text));
  assert_int_equal(xpj_passes_run(p, b), -1);
  xpj_passes_destroy(p);
  xpj_passes_destroy(NULL);
  LLVMDisposeTargetMachine(tm);
  LLVMDisposeModule(a);
  LLVMDisposeModule(b);
  LLVMContextDispose(ctx);
  xpj_module_destroy(sp);
  xpj_module_destroy(m);
}

/* The instructions of opcode op left in function name of m (compares:
 * of predicate pred only) */
static unsigned count_in(LLVMModuleRef m, const char *name, LLVMOpcode op,
                         LLVMIntPredicate pred) {
  unsigned n = 0;
  LLVMValueRef f = LLVMGetNamedFunction(m, name);
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb; bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i))
      n += LLVMGetInstructionOpcode(i) == op &&
           (op != LLVMICmp || LLVMGetICmpPredicate(i) == pred);
  return n;
}
#define STORES_IN(m, name) count_in(m, name, LLVMStore, 0)
#define SLT_IN(m, name) count_in(m, name, LLVMICmp, LLVMIntSLT)

/* LLVM IR text parsed into a module of ctx */
static LLVMModuleRef parse_ir(LLVMContextRef ctx, const char *ir) {
  LLVMMemoryBufferRef buf =
      LLVMCreateMemoryBufferWithMemoryRangeCopy(ir, strlen(ir), "test.ll");
  LLVMModuleRef m = NULL;
  char *msg = NULL;
  assert_int_equal(LLVMParseIRInContext(ctx, buf, &m, &msg), 0);
  return m;
}

/* The pipeline text run on m through xpj_passes, as the compiler runs it */
static void run_passes(LLVMTargetMachineRef tm, const char *text,
                       LLVMModuleRef m) {
  xpj_passes *p = xpj_passes_create(tm, text, true, NULL, 0);
  assert_non_null(p);
  assert_int_equal(xpj_passes_run(p, m), 0);
  xpj_passes_destroy(p);
}

/* xpj-private-dse, the compiler's own pass (llvm_emit.cpp): dead store
 * elimination in a function that keeps memory of its own (an alloca), and
 * nothing in one that does not. */
static void test_private_dse(void **state) {
  (void)state;
  static const char ir[] =
      "target triple = \"nvptx64-nvidia-cuda\"\n"
      "define void @priv(ptr addrspace(1) %out, i32 %i) {\n"
      "  %a = alloca [4 x float]\n"
      "  %p = getelementptr [4 x float], ptr %a, i32 0, i32 %i\n"
      "  store float 1.0, ptr %p\n"
      "  store float 2.0, ptr %p\n"
      "  %v = load float, ptr %p\n"
      "  store float %v, ptr addrspace(1) %out\n"
      "  ret void\n"
      "}\n"
      "define void @glob(ptr addrspace(1) %out, ptr addrspace(1) %q) {\n"
      "  store float 1.0, ptr addrspace(1) %out\n"
      "  store float 3.0, ptr addrspace(1) %q\n"
      "  store float 2.0, ptr addrspace(1) %out\n"
      "  ret void\n"
      "}\n";
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = parse_ir(ctx, ir), d = LLVMCloneModule(m);
  xpj_llvm_plugin_api.init();
  LLVMTargetMachineRef tm = sm90_machine();
  run_passes(tm, "function(xpj-private-dse)", m);
  assert_int_equal(STORES_IN(m, "priv"), 2); /* the first store is dead */
  assert_int_equal(STORES_IN(m, "glob"), 3); /* DSE not run there */
  /* plain DSE would have removed the first store of @glob: the test can
   * tell the two apart */
  run_passes(tm, "function(dse)", d);
  assert_int_equal(STORES_IN(d, "glob"), 2);
  LLVMDisposeTargetMachine(tm);
  LLVMDisposeModule(m);
  LLVMDisposeModule(d);
  LLVMContextDispose(ctx);
}

/* xpj-indvars, the compiler's own loop pass (llvm_emit.cpp):
 * induction-variable simplification, except in a loop marked
 * xpjit.loop.canonical (codegen.c's four-trip loops and their rest). The
 * same loop twice: simplified where it is not marked (its exit test
 * `i + 1 < n` becomes `i + 1 != n`), left as it is where it is; plain
 * indvars simplifies both (the test can tell them apart). IndVarSimplify
 * needs the data layout's legal integer widths to do this. */
#define IV_LOOP(name, latch_md)                                               \
  "define void @" name "(ptr addrspace(1) %p, i32 %n) {\n"                   \
  "entry:\n"                                                                  \
  "  %c0 = icmp sgt i32 %n, 0\n"                                              \
  "  br i1 %c0, label %loop, label %exit\n"                                   \
  "loop:\n"                                                                   \
  "  %i = phi i32 [ 0, %entry ], [ %i1, %loop ]\n"                            \
  "  %w = sext i32 %i to i64\n"                                               \
  "  %q = getelementptr float, ptr addrspace(1) %p, i64 %w\n"                 \
  "  store float 1.0, ptr addrspace(1) %q\n"                                  \
  "  %i1 = add nsw i32 %i, 1\n"                                               \
  "  %c = icmp slt i32 %i1, %n\n"                                             \
  "  br i1 %c, label %loop, label %exit" latch_md "\n"                        \
  "exit:\n"                                                                   \
  "  ret void\n"                                                              \
  "}\n"
static void test_own_indvars(void **state) {
  (void)state;
  static const char ir[] =
      "target datalayout = \"e-i64:64-i128:128-v16:16-v32:32-n16:32:64\"\n"
      "target triple = \"nvptx64-nvidia-cuda\"\n"
      IV_LOOP("plain", "") IV_LOOP("own", ", !llvm.loop !0")
      "!0 = distinct !{!0, !1, !2}\n"
      "!1 = !{!\"llvm.loop.unroll.disable\"}\n"
      "!2 = !{!\"xpjit.loop.canonical\"}\n";
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = parse_ir(ctx, ir), d = LLVMCloneModule(m);
  xpj_llvm_plugin_api.init();
  LLVMTargetMachineRef tm = sm90_machine();
  run_passes(tm, "function(loop(xpj-indvars))", m);
  assert_int_equal(SLT_IN(m, "plain"), 0); /* simplified */
  assert_int_equal(SLT_IN(m, "own"), 1);   /* left alone */
  run_passes(tm, "function(loop(indvars))", d);
  assert_int_equal(SLT_IN(d, "plain"), 0);
  assert_int_equal(SLT_IN(d, "own"), 0);
  LLVMDisposeTargetMachine(tm);
  LLVMDisposeModule(m);
  LLVMDisposeModule(d);
  LLVMContextDispose(ctx);
}
#undef IV_LOOP

/* Kernel k of sp compiled in a child for target as a worker of a compile
 * server (job.worker) or not: 0 when its binary is ref's (n bytes), 1
 * when another, 2 when the compile failed; + 4 when it used a code
 * generator built ahead (xpj_emitted_ahead), + 8 when every optimisation
 * pipeline it ran was built ahead (xpj_passes_ahead: one for the CPU's
 * default<O2>, two for PTX, the -O2 pipeline and the loops'). */
static int emit_in_child(const xpj_module *sp, const char *k,
                         const char *target, bool worker, xpj_emit_kind emit,
                         const uint8_t *ref, size_t n) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    xpj_target tg;
    xpj_result r;
    unsigned emitted = xpj_emitted_ahead, passes = xpj_passes_ahead;
    compile_job(sp, k, target, "", worker, emit, &tg, &r);
    int used =
        (xpj_emitted_ahead - emitted == 1 ? 4 : 0) +
        (xpj_passes_ahead - passes == (tg.kind == XPJ_TARGET_PTX ? 2u : 1u)
             ? 8
             : 0);
    if (r.status != XPJ_OK)
      _exit(2 + used);
    _exit((r.len == n && !memcmp(r.data, ref, n) ? 0 : 1) + used);
  }
  int ws;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  assert_true(WIFEXITED(ws));
  return WEXITSTATUS(ws);
}

/* Kernel "dot" of sp compiled here (the machine is kept) for target. */
static xpj_result *dot_here(const xpj_module *sp, const char *target,
                            xpj_emit_kind emit) {
  xpj_target t;
  assert_int_equal(xpj_target_parse(target, &t, NULL, 0), XPJ_OK);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.isolation = XPJ_ISOLATE_NONE;
  xpj_result *r = NULL;
  assert_int_equal(xpj_compile(sp, "dot", &t, &o, emit, &r), XPJ_OK);
  return r;
}

/* A compile server's code generators and optimisation pipelines built
 * ahead (emit_ahead) serve the workers forked after it, one compile each,
 * for the machine, file type and pipeline they were built for, and give
 * the bytes the C API gives; a process that is no worker or another
 * target builds its own. */
static void test_emit_ahead(void **state) {
  (void)state;
  xpj_module *m = load_example("reduce.xpk");
  xpj_module *sp = spec_kernel(m, "dot", XPJ_F32, 0);
  assert_non_null(sp);
  static const char *const targets[] = {"ptx:sm_90", "cpu:x86-64"};
  for (size_t i = 0; i < 2; i++) {
    xpj_result *r = dot_here(sp, targets[i], XPJ_EMIT_BIN);
    size_t n;
    const uint8_t *ref = xpj_result_data(r, &n);
    assert_int_equal(
        emit_in_child(sp, "dot", targets[i], true, XPJ_EMIT_BIN, ref, n), 0);
    xpj_llvm_plugin_api.emit_ahead();
    assert_int_equal(
        emit_in_child(sp, "dot", targets[i], true, XPJ_EMIT_BIN, ref, n), 12);
    assert_int_equal(
        emit_in_child(sp, "dot", targets[i], false, XPJ_EMIT_BIN, ref, n), 0);
    /* this process never uses them: its compiles are the same as before,
     * and the workers forked after them still find theirs */
    assert_int_equal(
        emit_in_child(sp, "dot", targets[i], true, XPJ_EMIT_BIN, ref, n), 12);
    unsigned before = xpj_emitted_ahead, pbefore = xpj_passes_ahead;
    xpj_result *again = dot_here(sp, targets[i], XPJ_EMIT_BIN);
    assert_int_equal(xpj_emitted_ahead, before);
    assert_int_equal(xpj_passes_ahead, pbefore);
    size_t n2;
    const uint8_t *d2 = xpj_result_data(again, &n2);
    assert_int_equal(n2, n);
    assert_memory_equal(d2, ref, n);
    xpj_result_destroy(again);
    assert_int_equal(
        emit_in_child(sp, "dot", targets[i], true, XPJ_EMIT_BIN, ref, n), 12);
    xpj_result_destroy(r);
  }
  /* a CPU assembly job: the optimisation pipeline built ahead, not the
   * code generator (built for objects) */
  xpj_result *r = dot_here(sp, "cpu:x86-64", XPJ_EMIT_ASM);
  size_t n;
  const uint8_t *ref = xpj_result_data(r, &n);
  assert_non_null(strstr((const char *)ref, ".text"));
  assert_int_equal(
      emit_in_child(sp, "dot", "cpu:x86-64", true, XPJ_EMIT_ASM, ref, n), 8);
  xpj_result_destroy(r);
  /* a target no machine was kept for (no test here compiles for sm_89):
   * compiled (other bytes), not ahead */
  assert_int_equal(
      emit_in_child(sp, "dot", "ptx:sm_89", true, XPJ_EMIT_BIN, NULL, 0), 1);
  xpj_module_destroy(sp);
  xpj_module_destroy(m);
}

/* With KEPT_MAX (8) machines kept, the next one given back takes the
 * place of the one given back longest ago: the newest target's machine
 * is kept, and what is built ahead for it serves a worker (before, a
 * process that had kept eight targets' machines kept no other). */
static void test_kept_newest(void **state) {
  (void)state;
  xpj_module *m = load_example("reduce.xpk");
  xpj_module *sp = spec_kernel(m, "dot", XPJ_F32, 0);
  assert_non_null(sp);
  static const char *const others[] = {
      "cpu:x86-64:+sse4.1", "cpu:x86-64:+sse4.2", "cpu:x86-64:+avx",
      "cpu:x86-64:+popcnt", "cpu:x86-64:+bmi",    "cpu:x86-64:+bmi2",
      "cpu:x86-64:+lzcnt",  "cpu:x86-64:+movbe",  "cpu:x86-64:+f16c"};
  for (size_t i = 0; i < sizeof others / sizeof *others; i++)
    xpj_result_destroy(dot_here(sp, others[i], XPJ_EMIT_BIN));
  xpj_result *r = dot_here(sp, "ptx:sm_87", XPJ_EMIT_BIN);
  size_t n;
  const uint8_t *ref = xpj_result_data(r, &n);
  xpj_llvm_plugin_api.emit_ahead();
  assert_int_equal(
      emit_in_child(sp, "dot", "ptx:sm_87", true, XPJ_EMIT_BIN, ref, n), 12);
  xpj_result_destroy(r);
  xpj_module_destroy(sp);
  xpj_module_destroy(m);
}

static void test_libdevice_arch(void **state) {
  (void)state;
  static const char src[] =
      "kernel tg(x: global f32[]) range {\n"
      "    let i = global_id(0);\n"
      "    if i < size(x) { x[i] = tgamma(x[i]); }\n"
      "}\n";
  char *ptx[2][2];
  static const char *const targets[2] = {"ptx:sm_80", "ptx:sm_90"};
  for (int lvl = 0; lvl < 2; lvl++)
    for (int t = 0; t < 2; t++) {
      xpj_module *m = NULL;
      assert_int_equal(parse_src(src, &m, NULL), XPJ_OK);
      xpj_module *sp = spec_kernel(m, "tg", XPJ_VOID, 0);
      assert_non_null(sp);
      xpj_target tg;
      assert_int_equal(xpj_target_parse(targets[t], &tg, NULL, 0), XPJ_OK);
      xpj_compile_opts o;
      xpj_compile_opts_default(&o);
      o.opt_level = lvl ? 3 : 2;
      o.isolation = XPJ_ISOLATE_NONE;
      xpj_result *r = NULL;
      assert_int_equal(xpj_compile(sp, "tg", &tg, &o, XPJ_EMIT_BIN, &r), XPJ_OK);
      size_t len;
      const char *text = (const char *)xpj_result_data(r, &len);
      /* past the header (.version, .target) */
      const char *body = strstr(text, ".address_size");
      assert_non_null(body);
      ptx[lvl][t] = strdup(body);
      xpj_result_destroy(r);
      xpj_module_destroy(sp);
      xpj_module_destroy(m);
    }
  for (int lvl = 0; lvl < 2; lvl++)
    if (!strcmp(ptx[lvl][0], ptx[lvl][1]))
      fail_msg("-O%d: tgammaf's PTX is the same for sm_80 and sm_90",
               lvl ? 3 : 2);
  size_t o2 = strlen(ptx[0][1]), o3 = strlen(ptx[1][1]);
  assert_true(o2 * 10 > o3 * 9 && o2 * 9 < o3 * 10);
  for (int lvl = 0; lvl < 2; lvl++)
    for (int t = 0; t < 2; t++)
      free(ptx[lvl][t]);
}

static void test_ptx_archs(void **state) {
  (void)state;
  static const char src[] =
      "kernel arch(x: global f32[], s: global f32[], c: global u64[]) "
      "ndrange(1) {\n"
      "    local t: f32[64];\n"
      "    let l = local_id(0);\n"
      "    t[l] = erf(x[global_id(0)]);\n"
      "    barrier(local);\n"
      "    atomic_add(&s[0], t[63 - l], relaxed, device);\n"
      "    atomic_add(&c[0], 1u64, relaxed, device);\n"
      "}\n";
  static const struct { unsigned sm, ptx; } archs[] = {
      {70, 60},  {72, 61},  {75, 63},  {80, 70},  {86, 71},
      {87, 74},  {88, 90},  {89, 78},  {90, 78},  {100, 86},
      {101, 86}, {103, 88}, {110, 90}, {120, 87}, {121, 88}};
  char known[4096] = "";
  if (ptxas) {
    char cmd[600];
    /* the architectures of its --gpu-name, 'sm_75' ... */
    snprintf(cmd, sizeof cmd, "'%s' --help 2>/dev/null | grep -o \"'sm_[0-9a-z]*'\" "
             "| tr '\\n' ' '", ptxas);
    FILE *f = popen(cmd, "r");
    if (f) {
      size_t n = fread(known, 1, sizeof known - 1, f);
      known[n] = 0;
      pclose(f);
    }
  }
  unsigned checked = 0;
  for (size_t i = 0; i < sizeof archs / sizeof *archs; i++) {
    char target[32], want[64], arch[16];
    snprintf(target, sizeof target, "ptx:sm_%u", archs[i].sm);
    snprintf(arch, sizeof arch, "sm_%u", archs[i].sm);
    char *ptx = emit_text(src, "arch", target, XPJ_EMIT_ASM);
    snprintf(want, sizeof want, ".version %u.%u\n.target %s", archs[i].ptx / 10,
             archs[i].ptx % 10, arch);
    if (!strstr(ptx, want))
      fail_msg("%s: no '%s' in the PTX", target, want);
    char quoted[24];
    snprintf(quoted, sizeof quoted, "'%s'", arch);
    if (ptxas && strstr(known, quoted)) {
      ptxas_accepts(ptx, arch);
      checked++;
    }
    free(ptx);
  }
  if (ptxas)
    printf("ptx archs: %u of %zu checked by ptxas\n", checked,
           sizeof archs / sizeof *archs);
  xpj_target t;
  char err[256];
  assert_int_equal(xpj_target_parse("ptx:sm_120:ptx90", &t, err, sizeof err),
                   XPJ_OK);
  assert_int_equal(t.ptx_version, 90);
  assert_int_equal(xpj_target_parse("ptx:sm_120:ptx86", &t, err, sizeof err),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_target_parse("ptx:sm_90:ptx91", &t, err, sizeof err),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_target_parse("ptx:sm_91", &t, err, sizeof err),
                   XPJ_ERR_INVALID);
  assert_non_null(strstr(err, "sm_121"));
}

/* Every compile worker may use a bounded amount of memory beyond what it
 * inherits (docs/abi.md): past it, the compile fails as out of memory, a
 * transient failure with that reason, not as a crash. The kernel, 2000
 * statements `y[i + j] = x[i + j] * c`, needs 32 MiB (SPIR-V) to 256 MiB
 * (PTX) to compile, far more than the free heap a worker inherits from
 * this test (which it may reuse: only new mappings can be bounded). */
static xpj_module *hungry_kernel(xpj_module **m, int stmts) {
  size_t cap = 200 + 48 * (size_t)stmts, k = 0;
  char *src = malloc(cap);
  assert_non_null(src);
  k += (size_t)snprintf(src + k, cap - k,
                        "kernel mem(x: global const f32[], y: global f32[], "
                        "c: f32) range {\n    let i = global_id(0) * %d;\n",
                        stmts);
  for (int j = 0; j < stmts; j++)
    k += (size_t)snprintf(src + k, cap - k,
                          "    y[i + %d] = x[i + %d] * c;\n", j, j);
  snprintf(src + k, cap - k, "}\n");
  assert_int_equal(parse_src(src, m, NULL), XPJ_OK);
  free(src);
  xpj_module *s = spec_kernel(*m, "mem", XPJ_VOID, 0);
  assert_non_null(s);
  return s;
}

static xpj_module *memory_hungry_kernel(xpj_module **m) {
  return hungry_kernel(m, 2000);
}

static void test_memory_limit(void **state) {
  (void)state;
#if defined(__SANITIZE_ADDRESS__)
  /* ASan's allocator reports its own out-of-memory and aborts before
   * LLVM's handler can run: this checks the normal build only. */
  printf("NOTE: test_memory_limit skipped under AddressSanitizer\n");
  return;
#endif
  xpj_module *m = NULL;
  xpj_module *s = memory_hungry_kernel(&m);
  char log[4096];
  xpj_failure_kind kind;
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.memory_limit_mb = 1;
  static const char *const targets[] = {"cpu", "ptx:sm_90", "spirv"};
  for (int i = 0; i < 3; i++) {
    xpj_status st = compile_with(s, "mem", targets[i], &o, log, sizeof log,
                                 &kind);
    if (st != XPJ_ERR_NOMEM || kind != XPJ_FAILURE_MEMORY ||
        !strstr(log, "more than the 1 MiB of memory a compile worker may use"))
      fail_msg("%s: %s, %s: '%s'", targets[i], xpj_status_name(st),
               xpj_failure_kind_name(kind), log);
  }
  /* the variable when the option is 0 */
  o.memory_limit_mb = 0;
  setenv("XPJIT_COMPILE_MEMORY_LIMIT", "2M", 1);
  assert_int_equal(compile_with(s, "mem", "spirv", &o, log, sizeof log,
                                &kind), XPJ_ERR_NOMEM);
  assert_int_equal(kind, XPJ_FAILURE_MEMORY);
  assert_non_null(strstr(log, "the 2 MiB of memory"));
  xpj_module_destroy(s);
  xpj_module_destroy(m);

  /* "off" lifts the limit; a malformed value leaves the default, with a
   * warning in the log; a limit a real kernel fits in */
  m = load_example("reduce.xpk");
  s = spec_kernel(m, "block_sum", XPJ_F32, 0);
  assert_non_null(s);
  setenv("XPJIT_COMPILE_MEMORY_LIMIT", "off", 1);
  assert_int_equal(compile_with(s, "block_sum", "cpu", &o, log, sizeof log,
                                &kind), XPJ_OK);
  assert_string_equal(log, "");
  setenv("XPJIT_COMPILE_MEMORY_LIMIT", "lots", 1);
  assert_int_equal(compile_with(s, "block_sum", "cpu", &o, log, sizeof log,
                                &kind), XPJ_OK);
  assert_non_null(strstr(log, "XPJIT_COMPILE_MEMORY_LIMIT=lots is not a size"));
  unsetenv("XPJIT_COMPILE_MEMORY_LIMIT");
  o.memory_limit_mb = 64;
  for (int i = 0; i < 3; i++)
    assert_int_equal(compile_with(s, "block_sum", targets[i], &o, log,
                                  sizeof log, &kind), XPJ_OK);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

/* A compile server's spare that has waited for its job grows its heap by
 * 2 MiB (cserver.c, pad_heap); a memory limit smaller than that bounds the
 * pad too. A small kernel (20 statements: 2-3 MiB for PTX) is refused at
 * 1 MiB, each time after its spare has had the time to make the pad, and
 * compiles at 64 MiB (mutation-checked: with the pad kept for such a
 * limit, three of the four compiles fitted). */
static void test_memory_limit_pad(void **state) {
  (void)state;
#if defined(__SANITIZE_ADDRESS__)
  printf("NOTE: test_memory_limit_pad skipped under AddressSanitizer\n");
  return;
#endif
  xpj_module *m = NULL;
  xpj_module *s = hungry_kernel(&m, 20);
  char log[4096];
  xpj_failure_kind kind;
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.memory_limit_mb = 64;
  assert_int_equal(compile_with(s, "mem", "ptx:sm_90", &o, log, sizeof log,
                                &kind), XPJ_OK);
  o.memory_limit_mb = 1;
  for (int i = 0; i < 3; i++) {
    usleep(100 * 1000); /* the next spare pads its heap */
    xpj_status st = compile_with(s, "mem", "ptx:sm_90", &o, log, sizeof log,
                                 &kind);
    if (st != XPJ_ERR_NOMEM || kind != XPJ_FAILURE_MEMORY)
      fail_msg("compile %d: %s, %s: '%s'", i, xpj_status_name(st),
               xpj_failure_kind_name(kind), log);
  }
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

/* xpj_compile_limit_memory bounds a process that compiles in-process, as
 * xpjitd's workers do: an allocation failure inside LLVM ends it with
 * "xpjit: out of memory" and exit status 75 (EX_TEMPFAIL), not an abort.
 * It runs in a child process, which the limit and the handler outlive. */
static void test_limit_process(void **state) {
  (void)state;
#if defined(__SANITIZE_ADDRESS__)
  printf("NOTE: test_limit_process skipped under AddressSanitizer\n");
  return;
#endif
  xpj_module *m = NULL;
  xpj_module *s = memory_hungry_kernel(&m);
  int errp[2];
  assert_int_equal(pipe(errp), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(errp[1], 2);
    setenv("XPJIT_COMPILE_MEMORY_LIMIT", "1M", 1);
    if (xpj_compile_limit_memory() != XPJ_OK)
      _exit(10);
    xpj_target t;
    xpj_target_parse("cpu", &t, NULL, 0);
    xpj_compile_opts o;
    xpj_compile_opts_default(&o);
    o.isolation = XPJ_ISOLATE_NONE;
    xpj_result *r = NULL;
    xpj_compile(s, "mem", &t, &o, XPJ_EMIT_BIN, &r);
    _exit(11); /* the compile should not have fitted */
  }
  close(errp[1]);
  char err[1024];
  size_t n = 0;
  ssize_t got;
  while ((got = read(errp[0], err + n, sizeof err - 1 - n)) > 0)
    n += (size_t)got;
  err[n] = 0;
  close(errp[0]);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 75)
    fail_msg("the child ended with status 0x%x: %s", st, err);
  assert_non_null(strstr(err, "xpjit: out of memory: the compile needs more "
                              "than the 1 MiB of memory"));
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

/* Threads compiling at once, in workers and in-process, get exactly the
 * bytes a lone compile gets. */
typedef struct thread_job {
  const xpj_module *s;
  const char *kernel, *target;
  xpj_isolation iso;
  const uint8_t *want;
  size_t want_len;
  int ok;
} thread_job;

static void *thread_main(void *p) {
  thread_job *j = p;
  xpj_target t;
  char err[128];
  j->ok = 0;
  if (xpj_target_parse(j->target, &t, err, sizeof err) != XPJ_OK)
    return NULL;
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.isolation = j->iso;
  for (int rep = 0; rep < 3; rep++) {
    xpj_result *r = NULL;
    if (xpj_compile(j->s, j->kernel, &t, &o, XPJ_EMIT_BIN, &r) != XPJ_OK) {
      fprintf(stderr, "thread compile for %s failed: %s\n", j->target,
              xpj_result_log(r));
      xpj_result_destroy(r);
      return NULL;
    }
    size_t len;
    const uint8_t *d = xpj_result_data(r, &len);
    int same = len == j->want_len && memcmp(d, j->want, len) == 0;
    xpj_result_destroy(r);
    if (!same)
      return NULL;
  }
  j->ok = 1;
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  /* Workers are forked by the compile server, a single-threaded process:
   * this one never forks while its threads allocate (GCC 12's libasan
   * takes no lock around fork(), which deadlocked this test under ASan
   * when each compile forked the caller). */
  xpj_module *m = load_example("matmul.xpk");
  xpj_module *s = spec_kernel(m, "matmul_tiled", XPJ_F32, 0);
  assert_non_null(s);
  static const char *const targets[] = {"spirv", "ptx:sm_90", "cpu"};
  xpj_result *ref[3];
  for (int i = 0; i < 3; i++)
    ref[i] = compile_for(s, "matmul_tiled", targets[i], XPJ_EMIT_BIN);
  enum { NT = 6 };
  pthread_t th[NT];
  thread_job jobs[NT];
  for (int i = 0; i < NT; i++) {
    jobs[i].s = s;
    jobs[i].kernel = "matmul_tiled";
    jobs[i].target = targets[i % 3];
    /* half of the PTX and CPU jobs compile in this process */
    jobs[i].iso = (i >= 3 && i % 3) ? XPJ_ISOLATE_NONE : XPJ_ISOLATE_DEFAULT;
    jobs[i].want = xpj_result_data(ref[i % 3], &jobs[i].want_len);
    assert_int_equal(pthread_create(&th[i], NULL, thread_main, &jobs[i]), 0);
  }
  for (int i = 0; i < NT; i++) {
    pthread_join(th[i], NULL);
    if (!jobs[i].ok)
      fail_msg("thread %d (%s) got a different or failed compile", i,
               jobs[i].target);
  }
  for (int i = 0; i < 3; i++)
    xpj_result_destroy(ref[i]);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

/* Groups of a required local size narrower than 16 work-items per row
 * (codegen.c SMALL_ROW): LLVM does not vectorise loops of fewer than 16
 * iterations that need its own run-time stride checks, so the 8-wide rows
 * of local(8, 8) stayed scalar; such groups run in a unit-stride version,
 * vectorised, and a strided one. 16-wide rows are left to LLVM. */
static void test_small_groups(void **state) {
  (void)state;
  static const char src[] =
      "kernel tile8(x: global const f32[,], y: global f32[,]) ndrange(2) "
      "local(8, 8) {\n"
      "    local t: f32[8, 8];\n"
      "    let v = x[global_id(0), global_id(1)] * 3.0f32;\n"
      "    t[local_id(0), local_id(1)] = x[global_id(0), global_id(1)];\n"
      "    barrier(local);\n"
      "    y[global_id(0), global_id(1)] = t[7 - local_id(0), 7 - local_id(1)] * v;\n"
      "}\n"
      "kernel tile16(x: global const f32[,], y: global f32[,]) ndrange(2) "
      "local(16, 16) {\n"
      "    local t: f32[16, 16];\n"
      "    let v = x[global_id(0), global_id(1)] * 3.0f32;\n"
      "    t[local_id(0), local_id(1)] = x[global_id(0), global_id(1)];\n"
      "    barrier(local);\n"
      "    y[global_id(0), global_id(1)] = t[15 - local_id(0), 15 - local_id(1)] * v;\n"
      "}\n";
  char *ll = emit_text(src, "tile8", "cpu:x86-64", XPJ_EMIT_LLVM);
  if (!strstr(ll, "versions.end") || !strstr(ll, "store <4 x float>"))
    fail_msg("tile8: no vectorised unit-stride version of the group");
  free(ll);
  ll = emit_text(src, "tile16", "cpu:x86-64", XPJ_EMIT_LLVM);
  if (strstr(ll, "versions.end") || !strstr(ll, "store <4 x float>"))
    fail_msg("tile16: versioned, or not vectorised");
  free(ll);
}

/* ---- the compile server (docs/abi.md, Isolation) ------------------- */

/* Whether process pid is called comm. */
static bool named(int pid, const char *comm) {
  char path[64], buf[64];
  snprintf(path, sizeof path, "/proc/%d/comm", pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  buf[strcspn(buf, "\n")] = 0;
  return !strcmp(buf, comm);
}

/* /proc/PID/stat of process pid (a decimal string), NUL-terminated in
 * buf; false when there is no such process. */
static bool read_stat(const char *pid, char *buf, size_t size) {
  char path[300];
  snprintf(path, sizeof path, "/proc/%s/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return false;
  size_t n = fread(buf, 1, size - 1, f);
  fclose(f);
  buf[n] = 0;
  return true;
}

/* Waits (up to 10 s) until process pid has ended: a server whose caller
 * let go of its control socket exits, but on a loaded machine not at
 * once, and server_named would find it first. */
static bool gone(pid_t pid) {
  char id[16];
  snprintf(id, sizeof id, "%d", (int)pid);
  for (int i = 0; i < 1000; i++) {
    char buf[256];
    if (!read_stat(id, buf, sizeof buf))
      return true;
    char *close = strrchr(buf, ')');
    if (close && (close[2] == 'Z' || close[2] == 'X'))
      return true;
    usleep(10 * 1000);
  }
  return false;
}

/* This process's compile server: a process named comm in our process
 * group that is not our child (the server is re-parented: docs/abi.md,
 * Isolation) and has not ended. */
static pid_t server_named(const char *comm) {
  DIR *d = opendir("/proc");
  assert_non_null(d);
  pid_t found = 0;
  struct dirent *e;
  while (!found && (e = readdir(d))) {
    char buf[512];
    if (!read_stat(e->d_name, buf, sizeof buf))
      continue;
    char *open = strchr(buf, '('), *close = strrchr(buf, ')');
    int ppid, pgrp;
    char st;
    if (!open || !close ||
        sscanf(close + 1, " %c %d %d", &st, &ppid, &pgrp) != 3 ||
        pgrp != getpgrp() || ppid == getpid() || st == 'Z' || st == 'X')
      continue;
    *close = 0;
    /* not its spares and workers (children of a process of that name;
     * with pids wrapped around, one of them may come first in /proc) */
    if (!strcmp(open + 1, comm) && !named(ppid, comm))
      found = (pid_t)atoi(buf);
  }
  closedir(d);
  return found;
}

/* How many processes that have not ended are children of pid (a compile
 * server's spares and workers). */
static int children_of(pid_t pid) {
  DIR *d = opendir("/proc");
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    char buf[512];
    if (!read_stat(e->d_name, buf, sizeof buf))
      continue;
    char *close = strrchr(buf, ')');
    int ppid;
    char st;
    if (close && sscanf(close + 1, " %c %d", &st, &ppid) == 2 &&
        ppid == pid && st != 'Z' && st != 'X')
      n++;
  }
  closedir(d);
  return n;
}

/* Kills this process's compile server, if any, and waits for its end:
 * the next compile starts a new one, cold. */
static void end_server(void) {
  pid_t old = server_named("xpjit-cc");
  if (old) {
    kill(old, SIGKILL);
    assert_true(gone(old));
  }
}

/* Waits for child pid (who: what it is, for the message) and fails the
 * test unless it exited with status 0 (forked children report by their
 * exit status: no cmocka asserts there). */
static void child_ok(pid_t pid, const char *who) {
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fail_msg("the %s %s %d", who, WIFEXITED(st) ? "exited with" : "died of signal",
             WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

static void compile_ok(const xpj_module *s, const char *kernel,
                       const char *target, const uint8_t *want, size_t n) {
  char log[4096];
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  xpj_target t;
  assert_int_equal(xpj_target_parse(target, &t, NULL, 0), XPJ_OK);
  xpj_result *r = NULL;
  xpj_status st = xpj_compile(s, kernel, &t, &o, XPJ_EMIT_BIN, &r);
  snprintf(log, sizeof log, "%s", xpj_result_log(r));
  if (st != XPJ_OK)
    fail_msg("%s: %s: %s", target, xpj_status_name(st), log);
  assert_string_equal(log, ""); /* nothing the caller notices */
  size_t len;
  const uint8_t *d = xpj_result_data(r, &len);
  if (want && (len != n || memcmp(d, want, n)))
    fail_msg("%s: different output through another server", target);
  xpj_result_destroy(r);
}

static void *kill_later(void *p) {
  usleep(300 * 1000);
  kill(*(pid_t *)p, SIGKILL);
  return NULL;
}

/* A cold compile server warms up beside a worker when no job waits
 * (cserver.c, warm_when_idle), not only once no worker runs: a stream of
 * jobs that never left it idle kept it cold, and every worker set LLVM
 * up again. Seen from here as the two warm spares it forks then: beside a
 * worker that stays after its reply (until its deadline, 60 s), a server
 * that waited for idleness had none. */
static void test_compile_server_warms_busy(void **state) {
  (void)state;
  xpj_module *m = load_example("reduce.xpk");
  xpj_module *s = spec_kernel(m, "block_sum", XPJ_F32, 0);
  assert_non_null(s);
  end_server(); /* the next compile starts a new, cold one */
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.timeout_ms = 60000;
  char log[4096];
  xpj_failure_kind kind;
  setenv("XPJIT_FAULT_INJECT", "linger", 1);
  assert_int_equal(compile_with(s, "block_sum", "ptx:sm_90", &o, log,
                                sizeof log, &kind), XPJ_OK);
  unsetenv("XPJIT_FAULT_INJECT");
  pid_t server = server_named("xpjit-cc");
  if (!server)
    fail_msg("no xpjit-cc server: the compile server was not exec'd");
  int kids = 0;
  for (int i = 0; i < 1000 && (kids = children_of(server)) < 3; i++)
    usleep(10 * 1000);
  kill(server, SIGKILL); /* and its lingering worker with it */
  assert_true(gone(server));
  assert_int_equal(kids, 3); /* the worker and two warm spares */
  compile_ok(s, "block_sum", "ptx:sm_90", NULL, 0); /* a new server */
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

/* A bad target (x86-64 code for a CPU without its 64-bit mode, on which
 * LLVM fails with a fatal error) on a fresh server's first job fails that
 * job, not the server: beside a cold worker the server warms up only for
 * a target a worker has compiled for, or the default of the kind. When it
 * warmed up for the job's own target, LLVM's error ended the server, the
 * job failed as a system error, and the process fell back to forked
 * servers (an adversarial review; mutation-checked). The target is now
 * refused before LLVM sees it (test_cpu_target_names). */
static void test_compile_server_bad_first_target(void **state) {
  (void)state;
  xpj_module *m = load_example("reduce.xpk");
  xpj_module *s = spec_kernel(m, "block_sum", XPJ_F32, 0);
  assert_non_null(s);
  end_server();
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  char log[4096];
  xpj_failure_kind kind;
  assert_int_equal(compile_with(s, "block_sum", "cpu:i386:", &o, log,
                                sizeof log, &kind), XPJ_ERR_INVALID);
  assert_int_equal(kind, XPJ_FAILURE_INPUT);
  assert_non_null(strstr(log, "cannot run 64-bit code"));
  pid_t server = server_named("xpjit-cc");
  if (!server)
    fail_msg("no xpjit-cc server after the failed job");
  compile_ok(s, "block_sum", "ptx:sm_90", NULL, 0);
  compile_ok(s, "block_sum", "cpu:x86-64", NULL, 0);
  assert_int_equal(server_named("xpjit-cc"), server);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

/* Isolated compiles go to one exec'd xpjit-cc per process; one that is
 * killed between jobs or during one is replaced without the caller
 * noticing; an executable that does not work gives way to a server forked
 * from this process. */
static void test_compile_server(void **state) {
  (void)state;
  xpj_module *m = load_example("reduce.xpk");
  xpj_module *s = spec_kernel(m, "block_sum", XPJ_F32, 0);
  assert_non_null(s);
  xpj_result *ref = compile_for(s, "block_sum", "ptx:sm_90", XPJ_EMIT_BIN);
  size_t n;
  const uint8_t *want = xpj_result_data(ref, &n);
  pid_t first = server_named("xpjit-cc");
  if (!first)
    fail_msg("no xpjit-cc server: the compile server was not exec'd");
  compile_ok(s, "block_sum", "spirv", NULL, 0);
  assert_int_equal(server_named("xpjit-cc"), first); /* one per process */

  /* killed between jobs; the next server keeps none of this process's
   * descriptors (a pipe's write end held there would keep its reader
   * from ever seeing its end) */
  assert_int_equal(kill(first, SIGKILL), 0);
  usleep(50 * 1000);
  int p[2];
  assert_int_equal(pipe(p), 0); /* not close-on-exec */
  compile_ok(s, "block_sum", "ptx:sm_90", want, n);
  close(p[1]);
  char c;
  assert_int_equal(read(p[0], &c, 1), 0); /* end of file, not a hang */
  close(p[0]);
  assert_true(gone(first));
  pid_t second = server_named("xpjit-cc");
  assert_true(second > 0 && second != first);

  /* killed during a job: the job is run again by the next server (here it
   * hangs there too, and times out, rather than failing as a crash) */
  setenv("XPJIT_FAULT_INJECT", "hang", 1);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, kill_later, &second), 0);
  char log[4096];
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.timeout_ms = 1500;
  xpj_failure_kind kind;
  assert_int_equal(compile_with(s, "block_sum", "ptx:sm_90", &o, log,
                                sizeof log, &kind), XPJ_ERR_COMPILE);
  pthread_join(th, NULL);
  unsetenv("XPJIT_FAULT_INJECT");
  if (kind != XPJ_FAILURE_TIMEOUT || !strstr(log, "timed out after 1500 ms"))
    fail_msg("%s: %s", xpj_failure_kind_name(kind), log);
  assert_true(gone(second));
  pid_t third = server_named("xpjit-cc");
  assert_true(third > 0 && third != second);
  compile_ok(s, "block_sum", "ptx:sm_90", want, n);

  /* a program that closes every descriptor (as daemons do) and opens its
   * own in their place: its file is left alone, another server starts */
  for (int fd = 3; fd < 1024; fd++)
    close(fd);
  int mine = open("/dev/null", O_RDONLY);
  assert_true(mine >= 3);
  compile_ok(s, "block_sum", "ptx:sm_90", want, n);
  assert_int_equal(fcntl(mine, F_GETFD), 0); /* still open, still ours */
  close(mine);
  assert_true(gone(third)); /* it lost its control socket: it ends */
  pid_t fourth = server_named("xpjit-cc");
  assert_true(fourth > 0 && fourth != third);
  third = fourth;

  /* an executable that is not a compile server: a fork of this process */
  assert_int_equal(kill(third, SIGKILL), 0);
  usleep(50 * 1000);
  setenv("XPJIT_COMPILE_SERVER", "/bin/true", 1);
  compile_ok(s, "block_sum", "ptx:sm_90", want, n);
  compile_ok(s, "block_sum", "spirv", NULL, 0);
  unsetenv("XPJIT_COMPILE_SERVER");
  assert_int_equal(server_named("xpjit-cc"), 0);
  xpj_result_destroy(ref);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

static void write_exe(const char *path, const char *text, mode_t mode) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  assert_int_equal(chmod(path, mode), 0);
}

/* The compile server's executable runs from the descriptor its check was
 * made on: a name pointed at another file between the check and the
 * spawn (a symbolic link flipped by another user: an outside probe ran
 * its script as the caller 1 time in 40) runs the file checked. And what
 * the check refuses is refused at once: not executable, writable by
 * others, a FIFO (not waited on). */
static void test_compile_server_runs_checked_file(void **state) {
  (void)state;
  char dir[] = "/tmp/xpj-cs-XXXXXX", cc[64], good[64], evil[64], tmp[64],
       ran[64], text[200], path[PATH_MAX];
  assert_non_null(mkdtemp(dir));
  snprintf(cc, sizeof cc, "%s/cc", dir);
  snprintf(good, sizeof good, "%s/good", dir);
  snprintf(evil, sizeof evil, "%s/evil", dir);
  snprintf(tmp, sizeof tmp, "%s/cc.new", dir);
  snprintf(ran, sizeof ran, "%s/ran", dir);
  snprintf(text, sizeof text, "#!/bin/sh\necho checked >> %s\n", ran);
  write_exe(good, text, 0700);
  snprintf(text, sizeof text, "#!/bin/sh\necho swapped >> %s\n", ran);
  write_exe(evil, text, 0700);
  assert_int_equal(symlink(good, cc), 0);
  setenv("XPJIT_COMPILE_SERVER", cc, 1);
  int exe = xpj_cs_open_exe(path, sizeof path);
  assert_true(exe >= 0);
  assert_string_equal(path, cc);
  /* checked: now the name leads elsewhere */
  assert_int_equal(symlink(evil, tmp), 0);
  assert_int_equal(rename(tmp, cc), 0);
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv),
                   0);
  int ctl = fcntl(sv[1], F_DUPFD_CLOEXEC, 4);
  assert_true(ctl >= 4);
  close(sv[1]);
  pid_t pid = xpj_cs_spawn(exe, ctl);
  assert_true(pid > 0);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  close(exe);
  close(ctl);
  close(sv[0]);
  char out[64] = "";
  FILE *f = fopen(ran, "r");
  assert_non_null(f);
  size_t n = fread(out, 1, sizeof out - 1, f);
  fclose(f);
  out[n] = 0;
  assert_string_equal(out, "checked\n");

  /* refused: not executable, writable by others, a FIFO */
  write_exe(good, text, 0600);
  unlink(cc);
  assert_int_equal(symlink(good, cc), 0);
  assert_int_equal(xpj_cs_open_exe(path, sizeof path), -1);
  assert_false(xpj_cs_find_exe(path, sizeof path));
  assert_int_equal(chmod(good, 0722), 0);
  assert_int_equal(xpj_cs_open_exe(path, sizeof path), -1);
  unlink(cc);
  assert_int_equal(mkfifo(cc, 0700), 0);
  assert_int_equal(xpj_cs_open_exe(path, sizeof path), -1);
  unsetenv("XPJIT_COMPILE_SERVER");
  unlink(cc);
  unlink(good);
  unlink(evil);
  unlink(ran);
  rmdir(dir);
}

/* A compile server that stopped answering (SIGSTOP: it takes the job's
 * datagram into its queue and nothing more) is ended 5 s after the job's
 * deadline, and the job is given to a new one: the caller gets its
 * binary. It got a timeout, which is remembered as the kernel's for the
 * failure TTL (an adversarial review; mutation-checked). An executable
 * that never says hello is given up after one such wait for a server
 * forked from this process: it was started again for the next job. */
static void test_compile_server_stopped(void **state) {
  (void)state;
  xpj_module *m = load_example("reduce.xpk");
  xpj_module *s = spec_kernel(m, "block_sum", XPJ_F32, 0);
  assert_non_null(s);
  compile_ok(s, "block_sum", "ptx:sm_90", NULL, 0);
  pid_t server = server_named("xpjit-cc");
  if (!server)
    fail_msg("no xpjit-cc server: the compile server was not exec'd");
  assert_int_equal(kill(server, SIGSTOP), 0);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.timeout_ms = 500;
  char log[4096];
  xpj_failure_kind kind;
  if (compile_with(s, "block_sum", "ptx:sm_90", &o, log, sizeof log,
                   &kind) != XPJ_OK)
    fail_msg("%s: %s", xpj_failure_kind_name(kind), log);
  assert_true(gone(server));
  pid_t next = server_named("xpjit-cc");
  assert_true(next > 0 && next != server);

  /* an executable that is no server and never ends */
  char dir[] = "/tmp/xpj-cs-XXXXXX", exe[64], starts[64];
  assert_non_null(mkdtemp(dir));
  snprintf(exe, sizeof exe, "%s/sleeper", dir);
  snprintf(starts, sizeof starts, "%s/starts", dir);
  FILE *f = fopen(exe, "w");
  assert_non_null(f);
  fprintf(f, "#!/bin/sh\necho started >> %s\nexec sleep 60\n", starts);
  fclose(f);
  assert_int_equal(chmod(exe, 0700), 0);
  /* in a forked child: the process keeps to forked servers after */
  xpj_target t;
  assert_int_equal(xpj_target_parse("ptx:sm_90", &t, NULL, 0), XPJ_OK);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) { /* no cmocka asserts here: exit statuses */
    alarm(60);
    setenv("XPJIT_COMPILE_SERVER", exe, 1);
    for (int i = 0; i < 2; i++) {
      xpj_result *r = NULL;
      if (xpj_compile(s, "block_sum", &t, &o, XPJ_EMIT_BIN, &r) != XPJ_OK) {
        fprintf(stderr, "#%d: %s\n", i, xpj_result_log(r));
        _exit(2 + i);
      }
      xpj_result_destroy(r);
    }
    _exit(0);
  }
  child_ok(pid, "child");
  f = fopen(starts, "r");
  assert_non_null(f);
  int lines = 0;
  for (int c; (c = fgetc(f)) != EOF;)
    lines += c == '\n';
  fclose(f);
  assert_int_equal(lines, 1); /* started once, then a fork of this process */
  unlink(starts);
  unlink(exe);
  rmdir(dir);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

/* Isolated compiles work under a descriptor limit of 10 (stdin, stdout,
 * stderr and what the compile needs): the server and its workers moved
 * their descriptors to 64 and 10 and up, and every compile failed, as a
 * crash, under a limit of 64 or less (an adversarial review;
 * mutation-checked). In a forked child, whose server is its own. */
static void test_compile_server_few_fds(void **state) {
  (void)state;
  xpj_module *m = load_example("reduce.xpk");
  xpj_module *s = spec_kernel(m, "block_sum", XPJ_F32, 0);
  assert_non_null(s);
  static const char *const targets[] = {"ptx:sm_90", "cpu:x86-64", "spirv"};
  xpj_target t[3];
  for (int i = 0; i < 3; i++)
    assert_int_equal(xpj_target_parse(targets[i], &t[i], NULL, 0), XPJ_OK);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) { /* no cmocka asserts here: exit statuses */
    alarm(60);
    for (int fd = 3; fd < 4096; fd++)
      close(fd);
    struct rlimit rl = {10, 10};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
      _exit(2);
    for (int i = 0; i < 3; i++) {
      xpj_result *r = NULL;
      xpj_status st = xpj_compile(s, "block_sum", &t[i], NULL, XPJ_EMIT_BIN, &r);
      if (st != XPJ_OK) {
        fprintf(stderr, "%s: %s\n", targets[i], xpj_result_log(r));
        _exit(3 + i);
      }
      xpj_result_destroy(r);
    }
    _exit(0);
  }
  child_ok(pid, "child");
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

/* How many live processes called xpjit-cc have mark in their
 * environment (a caller's server, its spares and workers). */
static int marked_servers(const char *mark) {
  DIR *d = opendir("/proc");
  if (!d)
    return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    char buf[512], path[300];
    if (!read_stat(e->d_name, buf, sizeof buf))
      continue;
    char *open = strchr(buf, '('), *close = strrchr(buf, ')');
    if (!open || !close || close[2] == 'Z' || close[2] == 'X')
      continue;
    *close = 0;
    if (strcmp(open + 1, "xpjit-cc"))
      continue;
    snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    static char env[1 << 16];
    size_t len = fread(env, 1, sizeof env - 1, f);
    fclose(f);
    for (size_t i = 0; i < len; i += strlen(env + i) + 1) {
      env[len] = 0;
      if (!strcmp(env + i, mark)) {
        n++;
        break;
      }
    }
  }
  closedir(d);
  return n;
}

/* A caller's compile server ends with the caller's process, even while a
 * child it forked (a daemon's usual start) holds a copy of the control
 * socket and never compiles: the server waited for that copy's end too
 * (an adversarial review; mutation-checked). */
static void test_compile_server_ends_with_caller(void **state) {
  (void)state;
  xpj_module *m = load_example("reduce.xpk");
  xpj_module *s = spec_kernel(m, "block_sum", XPJ_F32, 0);
  assert_non_null(s);
  xpj_target t;
  assert_int_equal(xpj_target_parse("ptx:sm_90", &t, NULL, 0), XPJ_OK);
  char mark[64];
  snprintf(mark, sizeof mark, "XPJ_TEST_CALLER=%d", (int)getpid());
  int p[2];
  assert_int_equal(pipe(p), 0);
  fflush(NULL);
  pid_t a = fork();
  assert_true(a >= 0);
  if (a == 0) { /* no cmocka asserts here: exit statuses */
    alarm(60);
    char *eq = strchr(mark, '=');
    *eq = 0;
    setenv(mark, eq + 1, 1);
    *eq = '=';
    xpj_result *r = NULL;
    if (xpj_compile(s, "block_sum", &t, NULL, XPJ_EMIT_BIN, &r) != XPJ_OK)
      _exit(2);
    xpj_result_destroy(r);
    if (marked_servers(mark) < 1)
      _exit(3); /* its server (exec'd) is not there */
    pid_t b = fork();
    if (b == 0) { /* lives until the test closes its end of the pipe */
      close(p[1]);
      char c;
      while (read(p[0], &c, 1) < 0 && errno == EINTR) {
      }
      _exit(0);
    }
    _exit(b < 0 ? 4 : 0);
  }
  close(p[0]);
  child_ok(a, "caller");
  int left = -1;
  for (int i = 0; i < 1000 && (left = marked_servers(mark)) != 0; i++)
    usleep(10 * 1000);
  close(p[1]); /* the caller's child ends */
  assert_int_equal(left, 0);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}

/* A program that waits for all of its children (as shells and some
 * launchers do) is not held up by its compile server: the server is not
 * its child (docs/abi.md, Isolation), and the process that started it has
 * ended. In a forked child, which an alarm ends if it hangs. */
static void test_wait_for_children(void **state) {
  (void)state;
  xpj_module *m = load_example("reduce.xpk");
  xpj_module *s = spec_kernel(m, "block_sum", XPJ_F32, 0);
  assert_non_null(s);
  xpj_target t;
  assert_int_equal(xpj_target_parse("ptx:sm_90", &t, NULL, 0), XPJ_OK);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) { /* no cmocka asserts here: exit statuses */
    alarm(30);
    xpj_result *r = NULL;
    if (xpj_compile(s, "block_sum", &t, NULL, XPJ_EMIT_BIN, &r) != XPJ_OK)
      _exit(2);
    xpj_result_destroy(r);
    while (wait(NULL) > 0 || errno == EINTR) {
    }
    if (errno != ECHILD)
      _exit(3);
    r = NULL; /* the server still serves */
    if (xpj_compile(s, "block_sum", &t, NULL, XPJ_EMIT_BIN, &r) != XPJ_OK)
      _exit(4);
    xpj_result_destroy(r);
    _exit(0);
  }
  child_ok(pid, "child");
  xpj_module_destroy(s);
  xpj_module_destroy(m);
}


/* Sums in loops whose exit values scalar evolution writes in closed form
 * with integers of 65 to 67 bits (sum k: trunc(lshr(mul i65 (zext n),
 * (zext n-1)), 1); k*k, k^3, k^4: products in i65 and i67 shifted; nested
 * loops; i32 loops summed into i64; unsigned): SPIR-V has no such
 * integers, and target_spirv.c makes them of pairs of 64-bit ones, or
 * (test hook wide-pairs-off) compile_llvm.c optimises the module again
 * with IndVarSimplify's exit values off. Every one compiles at -O0 to -O3
 * both ways and spirv-val accepts it; the hook's SPIR-V is other bytes
 * (the loop kept). With neither (wide-left) the refusal names the width,
 * not mul_hi. test_opencl test_wide_sums runs them. */
#include "wide_sums.inc"

static xpj_status wide_compile(const xpj_module *s, const char *k, int level,
                               const char *hook, xpj_result **r) {
  if (hook)
    setenv("XPJIT_FAULT_INJECT", hook, 1);
  xpj_target t;
  assert_int_equal(xpj_target_parse("spirv", &t, NULL, 0), XPJ_OK);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.opt_level = level;
  *r = NULL;
  xpj_status st = xpj_compile(s, k, &t, &o, XPJ_EMIT_BIN, r);
  unsetenv("XPJIT_FAULT_INJECT");
  return st;
}

static void test_spirv_wide_sums(void **state) {
  (void)state;
  static const char *const names[] = {"s64",  "s32w", "sq",   "cube",
                                      "quart", "us",  "nest", "span"};
  static const char *const hooks[] = {NULL, "wide-pairs-off"};
  xpj_module *m = NULL;
  assert_int_equal(parse_src(wide_sums_src, &m, NULL), XPJ_OK);
  for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
    xpj_module *s = spec_kernel(m, names[k], XPJ_VOID, 0);
    assert_non_null(s);
    for (int level = 0; level <= 3; level++) {
      size_t len[2];
      uint8_t *bin[2];
      for (int h = 0; h < 2; h++) {
        xpj_result *r;
        xpj_status st = wide_compile(s, names[k], level, hooks[h], &r);
        if (st != XPJ_OK)
          fail_msg("%s -O%d%s%s: %s: %s", names[k], level,
                   hooks[h] ? " hook " : "", hooks[h] ? hooks[h] : "",
                   xpj_status_name(st), xpj_result_log(r));
        const uint8_t *d = xpj_result_data(r, &len[h]);
        bin[h] = malloc(len[h]);
        assert_non_null(bin[h]);
        memcpy(bin[h], d, len[h]);
        char path[512], cmd[1200];
        snprintf(path, sizeof path, "%s/wide.spv", tmpdir);
        write_file(path, d, len[h]);
        snprintf(cmd, sizeof cmd, "'%s' --target-env opencl2.2 '%s'",
                 spirv_val, path);
        if (spirv_val && system(cmd) != 0)
          fail_msg("spirv-val rejects %s -O%d%s%s", names[k], level,
                   hooks[h] ? " hook " : "", hooks[h] ? hooks[h] : "");
        xpj_result_destroy(r);
      }
      /* the hook took effect where there is a closed form (not -O0) */
      if (level > 0 &&
          len[0] == len[1] && memcmp(bin[0], bin[1], len[0]) == 0)
        fail_msg("%s -O%d: the same SPIR-V with wide-pairs-off", names[k],
                 level);
      free(bin[0]);
      free(bin[1]);
    }
    xpj_module_destroy(s);
  }
  /* neither: refused, with the width */
  static const struct {
    const char *k, *width;
  } refused[] = {{"s64", "a 65-bit integer"}, {"quart", "a 67-bit integer"}};
  for (size_t i = 0; i < 2; i++) {
    xpj_module *s = spec_kernel(m, refused[i].k, XPJ_VOID, 0);
    assert_non_null(s);
    xpj_result *r;
    assert_int_equal(wide_compile(s, refused[i].k, 2, "wide-left", &r),
                     XPJ_ERR_UNSUPPORTED);
    const char *log = xpj_result_log(r);
    if (!strstr(log, refused[i].width) || strstr(log, "mul_hi"))
      fail_msg("%s refused with: %s", refused[i].k, log);
    xpj_result_destroy(r);
    xpj_module_destroy(s);
  }
  xpj_module_destroy(m);
}

int main(void) {
  test_owner_init();
  const struct CMUnitTest tests[] = {
      guarded_test(test_targets),     guarded_test(test_errors),
      guarded_test(test_structure),   guarded_test(test_spirv_atomic_access),
      guarded_test(test_faults),
      guarded_test(test_options),     guarded_test(test_ptx_precision),
      guarded_test(test_determinism), guarded_test(test_threads),
      guarded_test(test_emit_examples),
      guarded_test(test_wait_for_children),
      guarded_test(test_entry_names),
      guarded_test(test_spirv_wide_sums),
      guarded_test(test_vectorize_guard),
      guarded_test(test_barrier_loops),
      guarded_test(test_interchange),
      guarded_test(test_cpu_memory),
      guarded_test(test_small_groups),
      guarded_test(test_reqd_local),
      guarded_test(test_ptx_archs),
      guarded_test(test_libdevice_arch),
      guarded_test(test_ptx_unroll),
      guarded_test(test_ptx_scaled),
      guarded_test(test_ptx_opaque_steps),
      guarded_test(test_ptx_leaf_dead_local),
      guarded_test(test_ptx_static_shared_limit),
      guarded_test(test_private_limit),
      guarded_test(test_cpu_target_names),
      guarded_test(test_ptx_cleanup_passes),
      guarded_test(test_ptx_stepped_exit),
      guarded_test(test_fp_contract),
      guarded_test(test_flat_index_contiguous),
      guarded_test(test_libdevice_ahead),
      guarded_test(test_emitter),
      guarded_test(test_private_dse),
      guarded_test(test_own_indvars),
      guarded_test(test_emit_ahead),
      guarded_test(test_kept_newest),
      guarded_test(test_libdevice_late),
      guarded_test(test_libdevice_names),
      guarded_test(test_collectives_gpu),
      guarded_test(test_half_gpu),
      guarded_test(test_local_params_gpu),
      guarded_test(test_memory_limit),
      guarded_test(test_memory_limit_pad),
      guarded_test(test_limit_process),
      guarded_test(test_compile_server_warms_busy),
      guarded_test(test_compile_server_bad_first_target),
      /* last: it leaves this process with a forked compile server */
      /* before test_compile_server: it leaves this process to forked
       * servers */
      guarded_test(test_compile_server_runs_checked_file),
      guarded_test(test_compile_server_stopped),
      guarded_test(test_compile_server_few_fds),
      guarded_test(test_compile_server_ends_with_caller),
      guarded_test(test_compile_server),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
