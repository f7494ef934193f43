/* cgutil.h - helpers for the code generation tests: load an example,
 * specialise a kernel, compile it, load a CPU object with ORC. */
#ifndef XPJ_CGUTIL_H
#define XPJ_CGUTIL_H

#include "testutil.h"
#include "xpjit_codegen.h"

#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <stdbool.h>
#include <stdio.h>

/* Parses examples/NAME (the tests run from the repository root). */
static inline xpj_module *load_example(const char *name) {
  size_t pl = strlen(name) + 16;
  char *path = malloc(pl);
  assert_non_null(path);
  snprintf(path, pl, "examples/%s", name);
  xpj_module *m = NULL;
  xpj_diags *d = NULL;
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  assert_int_equal(xpj_diags_create(&d), XPJ_OK);
  xpj_status st = xpj_parse_file(m, path, d);
  free(path);
  if (st != XPJ_OK) {
    char *t = NULL;
    xpj_diags_render(d, &t, NULL);
    fprintf(stderr, "%s", t ? t : "");
    free(t);
  }
  assert_int_equal(st, XPJ_OK);
  xpj_diags_destroy(d);
  return m;
}

/* Specialises kernel with every type parameter = type (XPJ_VOID: none);
 * NULL when it does not fit. */
static inline xpj_module *spec_kernel(const xpj_module *m, const char *kernel,
                                      xpj_scalar type, unsigned ndim) {
  const xpj_func *k = xpj_module_find(m, kernel);
  assert_non_null(k);
  unsigned nt = xpj_func_tparam_count(k);
  const char *names[XPJ_MAX_TPARAMS];
  xpj_scalar types[XPJ_MAX_TPARAMS];
  for (unsigned i = 0; i < nt; i++) {
    names[i] = xpj_func_tparam_name(k, i);
    types[i] = type;
  }
  xpj_spec sp = {nt, names, types, ndim, 0, NULL, NULL};
  xpj_module *out = NULL;
  if (xpj_specialize(m, kernel, &sp, &out, NULL) != XPJ_OK)
    return NULL;
  return out;
}

static inline xpj_result *compile_for(const xpj_module *spec,
                                      const char *kernel, const char *target,
                                      xpj_emit_kind emit) {
  xpj_target t;
  char err[256];
  assert_int_equal(xpj_target_parse(target, &t, err, sizeof err), XPJ_OK);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  xpj_result *r = NULL;
  xpj_status st = xpj_compile(spec, kernel, &t, &o, emit, &r);
  if (st != XPJ_OK)
    fprintf(stderr, "compile %s for %s: %s: %s\n", kernel, target,
            xpj_status_name(st), xpj_result_log(r));
  assert_int_equal(st, XPJ_OK);
  return r;
}

/* ---- CPU objects through ORC LLJIT ------------------------------- */

typedef void (*cpu_entry)(void *const *args, const int64_t *launch,
                          void *local_mem, void *scratch, int64_t begin,
                          int64_t end);

static inline void jit_init(void) {
  static int done;
  if (!done) {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
    done = 1;
  }
}

static inline void check_llvm_error(LLVMErrorRef e, const char *what) {
  if (e) {
    char *msg = LLVMGetErrorMessage(e);
    fprintf(stderr, "%s: %s\n", what, msg);
    LLVMDisposeErrorMessage(msg);
    fail_msg("%s failed", what);
  }
}

/* Loads a relocatable object and returns the address of symbol (process
 * symbols such as libm resolve through the process). *jit must be
 * disposed with LLVMOrcDisposeLLJIT. */
static inline void *jit_load(const uint8_t *obj, size_t len,
                             const char *symbol, LLVMOrcLLJITRef *jit) {
  jit_init();
  check_llvm_error(LLVMOrcCreateLLJIT(jit, NULL), "create LLJIT");
  LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(*jit);
  LLVMOrcDefinitionGeneratorRef gen = NULL;
  check_llvm_error(LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
                       &gen, LLVMOrcLLJITGetGlobalPrefix(*jit), NULL, NULL),
                   "process symbols");
  LLVMOrcJITDylibAddGenerator(jd, gen);
  LLVMMemoryBufferRef buf =
      LLVMCreateMemoryBufferWithMemoryRangeCopy((const char *)obj, len, "k.o");
  check_llvm_error(LLVMOrcLLJITAddObjectFile(*jit, jd, buf), "add object");
  LLVMOrcExecutorAddress addr = 0;
  check_llvm_error(LLVMOrcLLJITLookup(*jit, &addr, symbol), "lookup");
  return (void *)(uintptr_t)addr;
}

#endif
