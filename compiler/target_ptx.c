/*
 * target_ptx.c - PTX (nvptx64) for CUDA.
 *
 * Work-item ids come from the special registers, the barrier is bar.sync,
 * shared memory is address space 3. sqrt, division, fabs, floor, fma, ...
 * are LLVM operations the backend lowers IEEE-correctly (approximate only
 * under fast-math); the other math functions come from libdevice, linked
 * lazily (only the functions used are read) from the CUDA toolkit.
 */
#include "cg.h"

#include <llvm-c/BitReader.h>
#include <llvm-c/Linker.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *xpj_libdevice_path(void) {
  static __thread char buf[4096];
  const char *env = getenv("XPJIT_LIBDEVICE");
  if (env && *env)
    return access(env, R_OK) == 0 ? env : NULL;
  const char *homes[2] = {getenv("CUDA_HOME"), "/usr/local/cuda"};
  for (int i = 0; i < 2; i++) {
    if (!homes[i] || !*homes[i])
      continue;
    snprintf(buf, sizeof buf, "%s/nvvm/libdevice/libdevice.10.bc", homes[i]);
    if (access(buf, R_OK) == 0)
      return buf;
  }
  return NULL;
}

static LLVMTargetMachineRef ptx_machine(cg *c) {
  const char *triple = "nvptx64-nvidia-cuda";
  char cpu[16], feat[16], *err = NULL;
  snprintf(cpu, sizeof cpu, "sm_%u", c->target->sm);
  snprintf(feat, sizeof feat, "+ptx%u", c->target->ptx_version);
  LLVMTargetRef t;
  if (LLVMGetTargetFromTriple(triple, &t, &err)) {
    cg_fail(c, XPJ_ERR_COMPILE, "NVPTX target unavailable: %s", err);
    LLVMDisposeMessage(err);
    return NULL;
  }
  LLVMSetTarget(c->mod, triple);
  LLVMCodeGenOptLevel lvl = c->opts->opt_level == 0 ? LLVMCodeGenLevelNone
                            : c->opts->opt_level >= 3 ? LLVMCodeGenLevelAggressive
                                                      : LLVMCodeGenLevelDefault;
  return LLVMCreateTargetMachine(t, triple, cpu, feat, lvl, LLVMRelocDefault,
                                 LLVMCodeModelDefault);
}

static void ptx_init(cg *c) {
  /* libdevice: no flush-to-zero of denormals */
  LLVMAddModuleFlag(c->mod, LLVMModuleFlagBehaviorOverride, "nvvm-reflect-ftz",
                    16, LLVMValueAsMetadata(LLVMConstInt(c->t_i32, 0, 0)));
}

static LLVMValueRef sreg(cg *c, const char *reg, unsigned d) {
  char name[64];
  snprintf(name, sizeof name, "llvm.nvvm.read.ptx.sreg.%s.%c", reg, "xyz"[d]);
  LLVMValueRef r = cg_intrinsic(c, name, NULL, 0, NULL, 0);
  return LLVMBuildZExt(c->b, r, c->t_i64, "");
}

static LLVMValueRef ptx_wi(cg *c, xpj_wi w, unsigned d) {
  d = d > 2 ? 0 : d;
  switch (w) {
  case XPJ_WI_GLOBAL_ID:
    return LLVMBuildAdd(c->b,
                        LLVMBuildMul(c->b, sreg(c, "ctaid", d), sreg(c, "ntid", d), ""),
                        sreg(c, "tid", d), "");
  case XPJ_WI_GLOBAL_SIZE:
    return LLVMBuildMul(c->b, sreg(c, "nctaid", d), sreg(c, "ntid", d), "");
  case XPJ_WI_LOCAL_ID: return sreg(c, "tid", d);
  case XPJ_WI_LOCAL_SIZE: return sreg(c, "ntid", d);
  case XPJ_WI_GROUP_ID: return sreg(c, "ctaid", d);
  case XPJ_WI_NUM_GROUPS: return sreg(c, "nctaid", d);
  default:
    cg_fail(c, XPJ_ERR_COMPILE, "internal: PTX work-item query %d", (int)w);
    return cg_i64(c, 0);
  }
}

static void ptx_barrier(cg *c, unsigned fences) {
  /* bar.sync orders shared and global memory for the block's threads */
  (void)fences;
  LLVMValueRef a = cg_i32(c, 0);
  cg_intrinsic(c, "llvm.nvvm.barrier.cta.sync.aligned.all", NULL, 0, &a, 1);
}

static const char *ptx_scope(cg *c, xpj_scope s, xpj_space sp) {
  (void)c;
  (void)sp;
  return s == XPJ_SCOPE_WORK_GROUP ? "block" : "device";
}

static LLVMValueRef libdevice(cg *c, const char *name, xpj_scalar s,
                              LLVMValueRef *a, unsigned n) {
  char buf[48];
  snprintf(buf, sizeof buf, "__nv_%s%s", name, s == XPJ_F32 ? "f" : "");
  c->needs_libdevice = true;
  return cg_call(c, buf, cg_scalar_type(c, s), a, n, LLVMCCallConv);
}

static LLVMValueRef ptx_math(cg *c, xpj_math m, xpj_scalar s, LLVMValueRef *a,
                             unsigned n) {
  static const char *const names[XPJ_MATH_COUNT] = {
      [XPJ_MATH_CBRT] = "cbrt",   [XPJ_MATH_EXP] = "exp",
      [XPJ_MATH_EXP2] = "exp2",   [XPJ_MATH_EXPM1] = "expm1",
      [XPJ_MATH_LOG] = "log",     [XPJ_MATH_LOG2] = "log2",
      [XPJ_MATH_LOG10] = "log10", [XPJ_MATH_LOG1P] = "log1p",
      [XPJ_MATH_POW] = "pow",     [XPJ_MATH_SIN] = "sin",
      [XPJ_MATH_COS] = "cos",     [XPJ_MATH_TAN] = "tan",
      [XPJ_MATH_ASIN] = "asin",   [XPJ_MATH_ACOS] = "acos",
      [XPJ_MATH_ATAN] = "atan",   [XPJ_MATH_ATAN2] = "atan2",
      [XPJ_MATH_SINH] = "sinh",   [XPJ_MATH_COSH] = "cosh",
      [XPJ_MATH_TANH] = "tanh",   [XPJ_MATH_HYPOT] = "hypot",
      [XPJ_MATH_ERF] = "erf",     [XPJ_MATH_ERFC] = "erfc",
      [XPJ_MATH_LGAMMA] = "lgamma", [XPJ_MATH_TGAMMA] = "tgamma",
  };
  if (m == XPJ_MATH_RSQRT && c->opts->fast_math)
    return libdevice(c, "rsqrt", s, a, n);
  if (m == XPJ_MATH_ROUND)
    return libdevice(c, "round", s, a, n); /* half away from zero */
  if ((unsigned)m >= XPJ_MATH_COUNT || !names[m])
    return NULL; /* native instructions through LLVM intrinsics */
  if (c->opts->fast_math && s == XPJ_F32 &&
      (m == XPJ_MATH_SIN || m == XPJ_MATH_COS || m == XPJ_MATH_EXP ||
       m == XPJ_MATH_LOG || m == XPJ_MATH_EXP2 || m == XPJ_MATH_LOG2)) {
    char fast[24];
    snprintf(fast, sizeof fast, "fast_%s", names[m]);
    return libdevice(c, fast, s, a, n);
  }
  return libdevice(c, names[m], s, a, n);
}

/* Links the libdevice functions the kernel calls. */
static void ptx_finish(cg *c, LLVMValueRef fn) {
  uint32_t hw[3];
  if (cg_reqd_local_hw(c, hw)) { /* .reqntid x, y, z */
    char v[48];
    int n = snprintf(v, sizeof v, "%u,%u,%u", hw[0], hw[1], hw[2]);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(c->ctx, "nvvm.reqntid", 12,
                                                      v, (unsigned)n));
  }
  if (!c->needs_libdevice)
    return;
  const char *path = xpj_libdevice_path();
  if (!path) {
    cg_fail(c, XPJ_ERR_UNSUPPORTED, "this kernel calls math functions that "
            "need libdevice (nvvm/libdevice/libdevice.10.bc from the CUDA "
            "toolkit), which was not found: set XPJIT_LIBDEVICE or CUDA_HOME");
    return;
  }
  LLVMMemoryBufferRef buf;
  char *err = NULL;
  if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buf, &err)) {
    cg_fail(c, XPJ_ERR_COMPILE, "cannot read %s: %s", path, err);
    LLVMDisposeMessage(err);
    return;
  }
  LLVMModuleRef lib;
  if (LLVMGetBitcodeModuleInContext2(c->ctx, buf, &lib)) {
    cg_fail(c, XPJ_ERR_COMPILE, "%s is not valid bitcode", path);
    LLVMDisposeMemoryBuffer(buf);
    return;
  }
  LLVMSetTarget(lib, LLVMGetTarget(c->mod));
  LLVMSetDataLayout(lib, LLVMGetDataLayoutStr(c->mod));
  /* linkonce_odr definitions: the linker reads only those referenced */
  for (LLVMValueRef f = LLVMGetFirstFunction(lib); f; f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f))
      LLVMSetLinkage(f, LLVMLinkOnceODRLinkage);
  if (LLVMLinkModules2(c->mod, lib)) {
    cg_fail(c, XPJ_ERR_COMPILE, "linking libdevice failed");
    return;
  }
  for (LLVMValueRef f = LLVMGetFirstFunction(c->mod); f; f = LLVMGetNextFunction(f))
    if (f != c->fn && !LLVMIsDeclaration(f))
      LLVMSetLinkage(f, LLVMInternalLinkage);
  for (LLVMValueRef g = LLVMGetFirstGlobal(c->mod); g; g = LLVMGetNextGlobal(g))
    if (!LLVMIsDeclaration(g))
      LLVMSetLinkage(g, LLVMInternalLinkage);
}

const cg_target_ops xpj_target_ptx_ops = {
    .name = "ptx",
    .simt = true,
    .as_global = 1,
    .as_local = 3,
    .rmw_order_by_fences = true,
    .kernel_cc = LLVMPTXKernelCallConv,
    .machine = ptx_machine,
    .init_module = ptx_init,
    .wi = ptx_wi,
    .barrier = ptx_barrier,
    .syncscope = ptx_scope,
    .math = ptx_math,
    .finish_kernel = ptx_finish,
};
