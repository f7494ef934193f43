/*
 * target_spirv.c - SPIR-V (spirv64) for OpenCL 2.x/3.0 and Level Zero.
 *
 * Work-item queries and barriers are the OpenCL builtins (mangled names,
 * SPIR_FUNC calling convention), which the backend turns into BuiltIn
 * variables and OpControlBarrier. Math goes through OpenCL.std extended
 * instructions, reached by the same mangled builtin names. Float atomic
 * add/sub need SPV_EXT_shader_atomic_float_add, which the worker enables
 * (compile.c). Facts behind these choices: ../shared/LLVM22-NOTES.md.
 */
#include "cg.h"

#include <stdio.h>
#include <string.h>

static LLVMTargetMachineRef spirv_machine(cg *c) {
  char triple[64], *err = NULL;
  snprintf(triple, sizeof triple, "spirv64v1.%u-unknown-unknown",
           c->target->spirv_minor);
  LLVMTargetRef t;
  if (LLVMGetTargetFromTriple(triple, &t, &err)) {
    cg_fail(c, XPJ_ERR_COMPILE, "SPIR-V target unavailable: %s", err);
    LLVMDisposeMessage(err);
    return NULL;
  }
  LLVMSetTarget(c->mod, triple);
  LLVMCodeGenOptLevel lvl = c->opts->opt_level == 0 ? LLVMCodeGenLevelNone
                                                    : LLVMCodeGenLevelDefault;
  return LLVMCreateTargetMachine(t, triple, "", "", lvl, LLVMRelocDefault,
                                 LLVMCodeModelDefault);
}

static void spirv_init(cg *c) {
  /* OpenCL C 2.0 source language: OpSource OpenCL_C, and no contraction
   * of a*b+c into fma (ContractionOff) unless fast-math or fp_contract
   * asks for it */
  LLVMValueRef v[2] = {LLVMConstInt(c->t_i32, 2, 0), LLVMConstInt(c->t_i32, 0, 0)};
  LLVMAddNamedMetadataOperand(c->mod, "opencl.ocl.version",
                              LLVMMDNodeInContext(c->ctx, v, 2));
  if (c->opts->fast_math || c->opts->fp_contract)
    LLVMAddNamedMetadataOperand(c->mod, "opencl.enable.FP_CONTRACT",
                                LLVMMDNodeInContext(c->ctx, NULL, 0));
}

static LLVMValueRef spirv_wi(cg *c, xpj_wi w, unsigned d) {
  const char *name;
  switch (w) {
  case XPJ_WI_SUB_GROUP_SIZE: name = "_Z18get_sub_group_sizev"; break;
  case XPJ_WI_SUB_GROUP_LOCAL_ID: name = "_Z22get_sub_group_local_idv"; break;
  case XPJ_WI_SUB_GROUP_ID: name = "_Z16get_sub_group_idv"; break;
  case XPJ_WI_NUM_SUB_GROUPS: name = "_Z18get_num_sub_groupsv"; break;
  default: name = NULL; break;
  }
  if (name) { /* uint */
    LLVMValueRef r = cg_call(c, name, c->t_i32, NULL, 0, LLVMSPIRFUNCCallConv);
    return LLVMBuildZExt(c->b, r, c->t_i64, "");
  }
  switch (w) {
  case XPJ_WI_GLOBAL_ID: name = "_Z13get_global_idj"; break;
  case XPJ_WI_GLOBAL_SIZE: name = "_Z15get_global_sizej"; break;
  case XPJ_WI_LOCAL_ID: name = "_Z12get_local_idj"; break;
  case XPJ_WI_LOCAL_SIZE: name = "_Z14get_local_sizej"; break;
  case XPJ_WI_GROUP_ID: name = "_Z12get_group_idj"; break;
  case XPJ_WI_NUM_GROUPS: name = "_Z14get_num_groupsj"; break;
  default:
    cg_fail(c, XPJ_ERR_COMPILE, "internal: SPIR-V work-item query %d", (int)w);
    return cg_i64(c, 0);
  }
  LLVMValueRef a = cg_i32(c, (int32_t)d);
  return cg_call(c, name, c->t_i64, &a, 1, LLVMSPIRFUNCCallConv);
}

static void spirv_barrier(cg *c, unsigned fences) {
  /* CLK_LOCAL_MEM_FENCE 1, CLK_GLOBAL_MEM_FENCE 2 */
  unsigned flags = 0;
  if (fences & XPJ_FENCE_LOCAL)
    flags |= 1;
  if (fences & XPJ_FENCE_GLOBAL)
    flags |= 2;
  LLVMValueRef a = cg_i32(c, (int32_t)flags);
  LLVMValueRef call =
      cg_call(c, "_Z7barrierj", c->t_void, &a, 1, LLVMSPIRFUNCCallConv);
  /* convergent, like OpenCL C's barrier(): no pass may make it depend on
   * more control flow than the source does. Without it, jump threading
   * copied the barrier of `for (s = 4; ...) { if lid < s {...} barrier }`
   * into both arms of the if, and the work-items of a group waited at
   * different barriers (Intel's OpenCL CPU runtime then wrote nothing). */
  LLVMAttributeRef conv = LLVMCreateEnumAttribute(
      c->ctx, LLVMGetEnumAttributeKindForName("convergent", 10), 0);
  LLVMAddAttributeAtIndex(LLVMGetNamedFunction(c->mod, "_Z7barrierj"),
                          LLVMAttributeFunctionIndex, conv);
  LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex, conv);
}

static const char *spirv_scope(cg *c, xpj_scope s, xpj_space sp) {
  (void)c;
  (void)sp;
  return s == XPJ_SCOPE_WORK_GROUP ? "workgroup" : "device";
}

/* Itanium mangling of one OpenCL scalar parameter. */
static char mangle_code(xpj_scalar s) {
  switch (s) {
  case XPJ_I8: return 'c';
  case XPJ_U8: return 'h';
  case XPJ_I16: return 's';
  case XPJ_U16: return 't';
  case XPJ_I32: return 'i';
  case XPJ_U32: return 'j';
  case XPJ_I64: return 'l';
  case XPJ_U64: return 'm';
  case XPJ_F32: return 'f';
  case XPJ_F64: return 'd';
  default: return 'v';
  }
}

static LLVMValueRef ocl_builtin(cg *c, const char *name, xpj_scalar s,
                                LLVMValueRef *a, unsigned n) {
  char buf[64];
  int k = snprintf(buf, sizeof buf, "_Z%zu%s", strlen(name), name);
  for (unsigned i = 0; i < n && k < (int)sizeof buf - 1; i++)
    buf[k++] = mangle_code(s);
  buf[k] = 0;
  return cg_call(c, buf, LLVMTypeOf(a[0]), a, n, LLVMSPIRFUNCCallConv);
}

/* Collectives: OpenCL's work_group_* and sub_group_* builtins (OpGroup*
 * with the Groups capability; shuffles and the sub-group mul / and / or /
 * xor are OpGroupNonUniform*, SPIR-V 1.3). Narrow integers and bools go
 * through 32 bits (Intel's runtime crashes on work_group_reduce_min of
 * char; ../shared/LLVM22-NOTES.md), bool and / or / xor as min / max /
 * add of 0 and 1. Work-group mul / and / or / xor are
 * SPV_KHR_uniform_group_instructions (OpGroupIMulKHR, ...: OpenCL's
 * cl_khr_work_group_uniform_arithmetic), which Intel's CPU runtime runs
 * although it does not list the extension. */
static LLVMValueRef spirv_group(cg *c, const xpj_coll_desc *d, xpj_scalar s,
                                LLVMValueRef x, LLVMValueRef id) {
  static const char *const kinds[] = {"reduce_", "scan_inclusive_",
                                      "scan_exclusive_"};
  static const char *const ops[] = {"add", "mul", "min", "max",
                                    "and", "or",  "xor"};
  xpj_scalar ws = s;
  xpj_group_op op = d->op;
  if (s == XPJ_BOOL) {
    ws = XPJ_I32;
    x = LLVMBuildZExt(c->b, x, c->t_i32, "");
    op = op == XPJ_GOP_AND ? XPJ_GOP_MIN : op == XPJ_GOP_OR ? XPJ_GOP_MAX
                                                             : XPJ_GOP_ADD;
  } else if (!cg_scalar_is_float(s) && xpj_scalar_bits(s) < 32) {
    bool sg = cg_scalar_is_signed(s);
    ws = sg ? XPJ_I32 : XPJ_U32;
    x = sg ? LLVMBuildSExt(c->b, x, c->t_i32, "") : LLVMBuildZExt(c->b, x, c->t_i32, "");
  }
  bool combines = d->kind < XPJ_COLL_BROADCAST;
  bool extended = combines && op != XPJ_GOP_ADD && op != XPJ_GOP_MIN &&
                  op != XPJ_GOP_MAX;
  /* shuffles below 1.3: Intel's (SPV_INTEL_subgroups, allowed by the
   * worker: compile.c) */
  bool intel = d->kind >= XPJ_COLL_SHUFFLE && c->target->spirv_minor < 3;
  bool v13 = extended && d->sub_group;
  char nm[64], name[96];
  xpj_coll_name(d, nm, sizeof nm);
  if (v13 && c->target->spirv_minor < 3) {
    cg_fail(c, XPJ_ERR_UNSUPPORTED, "%s() needs SPIR-V 1.3 or later "
            "(target spirv:1.%u)", nm, c->target->spirv_minor);
    return x;
  }
  const char *scope = d->sub_group ? "sub_group_" : "work_group_";
  char code = mangle_code(ws);
  LLVMValueRef args[4] = {x};
  unsigned n = 1;
  if (combines) {
    char base[64];
    snprintf(base, sizeof base, "%s%s%s%s", scope,
             v13 ? "non_uniform_" : "", kinds[d->kind], ops[op]);
    snprintf(name, sizeof name, "_Z%zu%s%c", strlen(base), base, code);
  } else if (d->sub_group) { /* lane: uint */
    const char *base = d->kind == XPJ_COLL_BROADCAST ? "sub_group_broadcast"
                       : d->kind == XPJ_COLL_SHUFFLE
                           ? (intel ? "intel_sub_group_shuffle" : "sub_group_shuffle")
                           : (intel ? "intel_sub_group_shuffle_xor"
                                    : "sub_group_shuffle_xor");
    args[n++] = LLVMBuildTrunc(c->b, id, c->t_i32, "");
    snprintf(name, sizeof name, "_Z%zu%s%cj", strlen(base), base, code);
  } else { /* the linear id as one size_t per dimension, OpenCL's order */
    unsigned dims = c->kernel->dims ? c->kernel->dims : 1;
    LLVMValueRef rest = id;
    for (unsigned h = 0; h < dims; h++) {
      if (h + 1 == dims) {
        args[n++] = rest;
        break;
      }
      LLVMValueRef size = spirv_wi(c, XPJ_WI_LOCAL_SIZE, h);
      args[n++] = LLVMBuildURem(c->b, rest, size, "");
      rest = LLVMBuildUDiv(c->b, rest, size, "");
    }
    snprintf(name, sizeof name, "_Z20work_group_broadcast%c%.*s", code,
                 (int)dims, "mmm");
  }
  LLVMValueRef r = cg_call(c, name, LLVMTypeOf(x), args, n, LLVMSPIRFUNCCallConv);
  if (ws != s && d->kind == XPJ_COLL_SCAN_EXCL &&
      (op == XPJ_GOP_MIN || op == XPJ_GOP_MAX) && s != XPJ_BOOL) {
    /* the first work-item gets the wide identity: T's instead */
    LLVMValueRef first = LLVMBuildICmp(c->b, LLVMIntEQ, r,
                                       cg_group_identity(c, op, ws), "");
    r = LLVMBuildSelect(c->b, first,
                        LLVMBuildSExt(c->b, cg_group_identity(c, op, s), c->t_i32, ""),
                        r, "");
  }
  if (s == XPJ_BOOL) {
    if (d->op == XPJ_GOP_XOR)
      r = LLVMBuildAnd(c->b, r, cg_i32(c, 1), "");
    /* != 0, not a trunc: LLVM 22's SPIR-V backend lowers an i32 -> i1
     * trunc at -O0 to an OpBitwiseAnd of mixed widths, which fails
     * validation (nothing at -O1 and above folds it away there) */
    return LLVMBuildICmp(c->b, LLVMIntNE, r, cg_i32(c, 0), "");
  }
  return ws != s ? LLVMBuildTrunc(c->b, r, cg_scalar_type(c, s), "") : r;
}

static LLVMValueRef spirv_math(cg *c, xpj_math m, xpj_scalar s,
                               LLVMValueRef *a, unsigned n) {
  bool fast = c->opts->fast_math && s == XPJ_F32;
  switch (m) {
  /* native_* are the fast, implementation-defined-precision variants */
  case XPJ_MATH_SQRT: return ocl_builtin(c, fast ? "native_sqrt" : "sqrt", s, a, n);
  case XPJ_MATH_RSQRT: return ocl_builtin(c, fast ? "native_rsqrt" : "rsqrt", s, a, n);
  case XPJ_MATH_EXP: return ocl_builtin(c, fast ? "native_exp" : "exp", s, a, n);
  case XPJ_MATH_EXP2: return ocl_builtin(c, fast ? "native_exp2" : "exp2", s, a, n);
  case XPJ_MATH_LOG: return ocl_builtin(c, fast ? "native_log" : "log", s, a, n);
  case XPJ_MATH_LOG2: return ocl_builtin(c, fast ? "native_log2" : "log2", s, a, n);
  case XPJ_MATH_LOG10: return ocl_builtin(c, fast ? "native_log10" : "log10", s, a, n);
  case XPJ_MATH_SIN: return ocl_builtin(c, fast ? "native_sin" : "sin", s, a, n);
  case XPJ_MATH_COS: return ocl_builtin(c, fast ? "native_cos" : "cos", s, a, n);
  case XPJ_MATH_TAN: return ocl_builtin(c, fast ? "native_tan" : "tan", s, a, n);
  case XPJ_MATH_CBRT: return ocl_builtin(c, "cbrt", s, a, n);
  case XPJ_MATH_ERF: return ocl_builtin(c, "erf", s, a, n);
  case XPJ_MATH_ERFC: return ocl_builtin(c, "erfc", s, a, n);
  case XPJ_MATH_LGAMMA: return ocl_builtin(c, "lgamma", s, a, n);
  case XPJ_MATH_TGAMMA: return ocl_builtin(c, "tgamma", s, a, n);
  case XPJ_MATH_EXPM1: return ocl_builtin(c, "expm1", s, a, n);
  case XPJ_MATH_LOG1P: return ocl_builtin(c, "log1p", s, a, n);
  case XPJ_MATH_POW: return ocl_builtin(c, "pow", s, a, n);
  case XPJ_MATH_ASIN: return ocl_builtin(c, "asin", s, a, n);
  case XPJ_MATH_ACOS: return ocl_builtin(c, "acos", s, a, n);
  case XPJ_MATH_ATAN: return ocl_builtin(c, "atan", s, a, n);
  case XPJ_MATH_ATAN2: return ocl_builtin(c, "atan2", s, a, n);
  case XPJ_MATH_SINH: return ocl_builtin(c, "sinh", s, a, n);
  case XPJ_MATH_COSH: return ocl_builtin(c, "cosh", s, a, n);
  case XPJ_MATH_TANH: return ocl_builtin(c, "tanh", s, a, n);
  case XPJ_MATH_HYPOT: return ocl_builtin(c, "hypot", s, a, n);
  case XPJ_MATH_FABS: return ocl_builtin(c, "fabs", s, a, n);
  case XPJ_MATH_FLOOR: return ocl_builtin(c, "floor", s, a, n);
  case XPJ_MATH_CEIL: return ocl_builtin(c, "ceil", s, a, n);
  case XPJ_MATH_ROUND: return ocl_builtin(c, "round", s, a, n);
  case XPJ_MATH_TRUNC: return ocl_builtin(c, "trunc", s, a, n);
  case XPJ_MATH_FMA: return ocl_builtin(c, "fma", s, a, n);
  case XPJ_MATH_FMIN: return ocl_builtin(c, "fmin", s, a, n);
  case XPJ_MATH_FMAX: return ocl_builtin(c, "fmax", s, a, n);
  case XPJ_MATH_COPYSIGN: return ocl_builtin(c, "copysign", s, a, n);
  case XPJ_MATH_MIN:
    return ocl_builtin(c, cg_scalar_is_float(s) ? "fmin" : "min", s, a, n);
  case XPJ_MATH_MAX:
    return ocl_builtin(c, cg_scalar_is_float(s) ? "fmax" : "max", s, a, n);
  case XPJ_MATH_CLAMP: { /* min(max(x, lo), hi), as language.md 9.4
                            * defines it also for lo > hi (OpenCL's
                            * clamp leaves that undefined: Intel's gave lo) */
    bool fl = cg_scalar_is_float(s);
    LLVMValueRef lo[2] = {a[0], a[1]};
    LLVMValueRef t = ocl_builtin(c, fl ? "fmax" : "max", s, lo, 2);
    LLVMValueRef hi[2] = {t, a[2]};
    return ocl_builtin(c, fl ? "fmin" : "min", s, hi, 2);
  }
  case XPJ_MATH_ABS:
    if (cg_scalar_is_float(s))
      return ocl_builtin(c, "fabs", s, a, n);
    return cg_scalar_is_signed(s) ? ocl_builtin(c, "abs", s, a, n) : a[0];
  case XPJ_MATH_POPCOUNT: return ocl_builtin(c, "popcount", s, a, n);
  case XPJ_MATH_CLZ: return ocl_builtin(c, "clz", s, a, n);
  case XPJ_MATH_CTZ: return ocl_builtin(c, "ctz", s, a, n);
  case XPJ_MATH_MUL_HI: return ocl_builtin(c, "mul_hi", s, a, n);
  case XPJ_MATH_ROTL: return ocl_builtin(c, "rotate", s, a, n);
  case XPJ_MATH_ROTR: {
    LLVMValueRef r[2] = {a[0], LLVMBuildNeg(c->b, a[1], "")};
    return ocl_builtin(c, "rotate", s, r, 2);
  }
  default:
    return NULL; /* isnan, isinf, isfinite: comparisons */
  }
}

/* The optimiser recognises bit-reversal loops and forms llvm.bitreverse,
 * which the SPIR-V backend can only lower with SPV_KHR_bit_instructions (it
 * aborts otherwise). OpenCL has no such builtin: expand it back into the
 * swap network before code generation. */
static LLVMValueRef expand_bitreverse(cg *c, LLVMBuilderRef b, LLVMValueRef x) {
  LLVMTypeRef t = LLVMTypeOf(x);
  unsigned bits = LLVMGetIntTypeWidth(t);
  static const unsigned long long masks[] = {
      0x5555555555555555ull, 0x3333333333333333ull, 0x0f0f0f0f0f0f0f0full,
      0x00ff00ff00ff00ffull, 0x0000ffff0000ffffull, 0x00000000ffffffffull};
  unsigned step = 0;
  for (unsigned sh = 1; sh < bits; sh <<= 1, step++) {
    LLVMValueRef m = LLVMConstInt(t, masks[step], 0);
    LLVMValueRef n = LLVMConstInt(t, sh, 0);
    LLVMValueRef lo = LLVMBuildShl(b, LLVMBuildAnd(b, x, m, ""), n, "");
    LLVMValueRef hi = LLVMBuildAnd(b, LLVMBuildLShr(b, x, n, ""), m, "");
    x = LLVMBuildOr(b, lo, hi, "");
  }
  (void)c;
  return x;
}

static void spirv_before_codegen(cg *c) {
  c->local_bytes = cg_simt_local_bytes(c); /* the optimised module's */
  LLVMBuilderRef b = LLVMCreateBuilderInContext(c->ctx);
  for (LLVMValueRef f = LLVMGetFirstFunction(c->mod); f;
       f = LLVMGetNextFunction(f))
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb;
         bb = LLVMGetNextBasicBlock(bb)) {
      LLVMValueRef in = LLVMGetFirstInstruction(bb);
      while (in) {
        LLVMValueRef next = LLVMGetNextInstruction(in);
        LLVMValueRef callee =
            LLVMIsACallInst(in) ? LLVMGetCalledValue(in) : NULL;
        size_t len = 0;
        const char *name = callee && LLVMIsAFunction(callee)
                               ? LLVMGetValueName2(callee, &len)
                               : "";
        if (strncmp(name, "llvm.bitreverse.i", 17) == 0 &&
            LLVMGetTypeKind(LLVMTypeOf(in)) == LLVMIntegerTypeKind) {
          LLVMPositionBuilderBefore(b, in);
          LLVMValueRef r = expand_bitreverse(c, b, LLVMGetOperand(in, 0));
          LLVMReplaceAllUsesWith(in, r);
          LLVMInstructionEraseFromParent(in);
        }
        in = next;
      }
    }
  LLVMDisposeBuilder(b);
}

/* Compare-exchange as the SPIR-V builtin OpAtomicCompareExchange, which
 * returns the old value itself: LLVM 22's SPIR-V backend lowers the {T, i1}
 * result of a cmpxchg instruction into invalid SPIR-V (an OpPhi of the
 * struct) once the old value flows around a loop. */
static LLVMValueRef spirv_cmpxchg(cg *c, LLVMValueRef p, unsigned as,
                                  LLVMTypeRef it, LLVMValueRef expected,
                                  LLVMValueRef desired, xpj_scope scope,
                                  xpj_order order) {
  /* MemorySemantics: Acquire 0x2, Release 0x4, AcquireRelease 0x8,
   * SequentiallyConsistent 0x10; WorkgroupMemory 0x100, CrossWorkgroup
   * 0x200. Scope: Device 1, Workgroup 2. */
  unsigned storage = as == 3 ? 0x100 : 0x200, eq = 0, neq = 0;
  switch (order) {
  case XPJ_ORDER_ACQUIRE: eq = neq = 0x2; break;
  case XPJ_ORDER_RELEASE: eq = 0x4; break;
  case XPJ_ORDER_ACQ_REL: eq = 0x8; neq = 0x2; break;
  case XPJ_ORDER_SEQ_CST: eq = neq = 0x10; break;
  default: break;
  }
  if (eq)
    eq |= storage;
  if (neq)
    neq |= storage;
  bool wide = LLVMGetIntTypeWidth(it) == 64;
  char name[64];
  snprintf(name, sizeof name, "_Z29__spirv_AtomicCompareExchangePU3AS%ui%s",
           as, wide ? "iiill" : "iiiii");
  LLVMValueRef a[6] = {p, cg_i32(c, scope == XPJ_SCOPE_WORK_GROUP ? 2 : 1),
                       cg_i32(c, (int32_t)eq), cg_i32(c, (int32_t)neq),
                       desired, expected};
  return cg_call(c, name, it, a, 6, LLVMSPIRFUNCCallConv);
}

/* A required local size: OpenCL's reqd_work_group_size metadata, which
 * the backend writes as the LocalSize execution mode. */
static void spirv_finish(cg *c, LLVMValueRef fn) {
  /* SPIR-V's limit on a function's parameters (OpTypeFunction): said
   * here, not as a validation failure of the module */
  unsigned np = LLVMCountParams(fn);
  if (np > 255) {
    cg_fail(c, XPJ_ERR_UNSUPPORTED, "the kernel takes %u parameters with "
            "its hidden ones (an array parameter is a pointer, an offset, "
            "and a shape and a stride per dimension); SPIR-V allows 255",
            np);
    return;
  }
  uint32_t hw[3];
  if (!cg_reqd_local_hw(c, hw))
    return;
  LLVMMetadataRef ops[3];
  for (int d = 0; d < 3; d++)
    ops[d] = LLVMValueAsMetadata(LLVMConstInt(c->t_i32, hw[d], 0));
  LLVMGlobalSetMetadata(fn, LLVMGetMDKindIDInContext(c->ctx, "reqd_work_group_size", 20),
                        LLVMMDNodeInContext2(c->ctx, ops, 3));
}

const cg_target_ops xpj_target_spirv_ops = {
    .cmpxchg = spirv_cmpxchg,
    .xchg_float_as_int = true,
    .atomic16_by_word = true,
    .name = "spirv",
    .simt = true,
    .as_global = 1,
    .as_local = 3,
    .kernel_cc = LLVMSPIRKERNELCallConv,
    .machine = spirv_machine,
    .init_module = spirv_init,
    .wi = spirv_wi,
    .barrier = spirv_barrier,
    .group = spirv_group,
    .syncscope = spirv_scope,
    .math = spirv_math,
    .before_codegen = spirv_before_codegen,
    .finish_kernel = spirv_finish,
};
