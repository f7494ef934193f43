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
#include <stdlib.h>
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
 * char; ../shared/LLVM22-NOTES.md), bool and / or / xor as unsigned min /
 * max / add of 0 and 1. Work-group mul / and / or / xor are
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
    /* unsigned: the first work-item of an exclusive scan gets 0 (or,
     * xor) and ~0 (and) from the builtin, false and true; a signed max
     * gave INT_MIN, true (found by an outside probe) */
    ws = XPJ_U32;
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

/* The high half of a 64-bit product from four 32 x 32 -> 64 products:
 * the unsigned one, corrected for each operand taken as signed (xs, ys):
 * hi(x y) = uhi(x, y) - (x < 0 ? y : 0) - (y < 0 ? x : 0). */
static LLVMValueRef mul_hi64(cg *c, LLVMBuilderRef B, LLVMValueRef x, bool xs,
                             LLVMValueRef y, bool ys) {
  LLVMValueRef m32 = cg_i64(c, 0xffffffffll), s32 = cg_i64(c, 32);
  LLVMValueRef xl = LLVMBuildAnd(B, x, m32, ""), xh = LLVMBuildLShr(B, x, s32, "");
  LLVMValueRef yl = LLVMBuildAnd(B, y, m32, ""), yh = LLVMBuildLShr(B, y, s32, "");
  LLVMValueRef ll = LLVMBuildMul(B, xl, yl, ""), lh = LLVMBuildMul(B, xl, yh, "");
  LLVMValueRef hl = LLVMBuildMul(B, xh, yl, ""), hh = LLVMBuildMul(B, xh, yh, "");
  LLVMValueRef mid = LLVMBuildAdd(
      B, LLVMBuildAdd(B, LLVMBuildLShr(B, ll, s32, ""), LLVMBuildAnd(B, lh, m32, ""), ""),
      LLVMBuildAnd(B, hl, m32, ""), "");
  LLVMValueRef hi = LLVMBuildAdd(
      B, LLVMBuildAdd(B, hh, LLVMBuildLShr(B, lh, s32, ""), ""),
      LLVMBuildAdd(B, LLVMBuildLShr(B, hl, s32, ""), LLVMBuildLShr(B, mid, s32, ""), ""),
      "");
  LLVMValueRef zero = cg_i64(c, 0);
  if (xs)
    hi = LLVMBuildSub(B, hi, LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, x, zero, ""),
                                             y, zero, ""), "");
  if (ys)
    hi = LLVMBuildSub(B, hi, LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, y, zero, ""),
                                             x, zero, ""), "");
  return hi;
}

/* A 128-bit integer is a type SPIR-V has not (the backend aborts on it),
 * and kernels have none; but the optimiser makes one of a 64-bit high
 * half written by hand (four 32-bit products: a * b >> 64 of the operands
 * widened) and of OpenCL's s_mul_hi of longs written as such below. Each
 * trunc of such a product (its low half) or of the product shifted right
 * by 64 (its high half) is made again of 64-bit operations, and the
 * 128-bit ones left unused go; true when none is left. */
static bool ext_operand(LLVMValueRef e, LLVMValueRef *v, bool *sg) {
  LLVMOpcode op = LLVMIsAInstruction(e) ? LLVMGetInstructionOpcode(e) : 0;
  if (op != LLVMZExt && op != LLVMSExt)
    return false;
  *v = LLVMGetOperand(e, 0);
  *sg = op == LLVMSExt;
  return LLVMGetIntTypeWidth(LLVMTypeOf(*v)) <= 64;
}

static bool is_int128(LLVMValueRef v) {
  LLVMTypeRef t = LLVMTypeOf(v);
  return LLVMGetTypeKind(t) == LLVMIntegerTypeKind &&
         LLVMGetIntTypeWidth(t) > 64;
}

static bool narrow_trunc(cg *c, LLVMBuilderRef B, LLVMValueRef in) {
  if (!LLVMIsATruncInst(in) || !is_int128(LLVMGetOperand(in, 0)) ||
      LLVMGetIntTypeWidth(LLVMTypeOf(in)) > 64)
    return false;
  LLVMValueRef m = LLVMGetOperand(in, 0);
  bool high = false;
  if (LLVMIsAInstruction(m) &&
      (LLVMGetInstructionOpcode(m) == LLVMLShr ||
       LLVMGetInstructionOpcode(m) == LLVMAShr) &&
      LLVMIsAConstantInt(LLVMGetOperand(m, 1)) &&
      LLVMConstIntGetZExtValue(LLVMGetOperand(m, 1)) == 64) {
    high = true;
    m = LLVMGetOperand(m, 0);
  }
  LLVMValueRef x, y;
  bool xs, ys;
  if (!LLVMIsAInstruction(m) || LLVMGetInstructionOpcode(m) != LLVMMul ||
      LLVMGetIntTypeWidth(LLVMTypeOf(m)) != 128 ||
      !ext_operand(LLVMGetOperand(m, 0), &x, &xs) ||
      !ext_operand(LLVMGetOperand(m, 1), &y, &ys))
    return false;
  LLVMPositionBuilderBefore(B, in);
  x = xs ? LLVMBuildSExt(B, x, c->t_i64, "") : LLVMBuildZExt(B, x, c->t_i64, "");
  y = ys ? LLVMBuildSExt(B, y, c->t_i64, "") : LLVMBuildZExt(B, y, c->t_i64, "");
  LLVMValueRef r = high ? mul_hi64(c, B, x, xs, y, ys) : LLVMBuildMul(B, x, y, "");
  LLVMReplaceAllUsesWith(in, LLVMBuildTrunc(B, r, LLVMTypeOf(in), ""));
  LLVMInstructionEraseFromParent(in);
  return true;
}

/* Integers wider than 64 bits (up to 128) in general, made of pairs of
 * 64-bit ones: the closed forms of sums that scalar evolution gives a
 * loop's exit value (IndVarSimplify): sum k for k < n is
 * trunc(lshr(mul i65 (zext n), (zext n-1)), 1), sum k*k a product of
 * three in i65 (the odd factor 3 of 6 goes by a 64-bit inverse), sum k^3
 * and k^4 products in i67 shifted by 2 and 3; nested loops the same
 * inside the outer one. An iN value (64 < N <= 128) is {lo, hi}, its
 * bits 0-63 and 64-127, of which only the N low bits mean anything
 * (mul, add, sub, shl, and, or, xor and truncs depend only on those);
 * what reads the high bits (lshr, ashr, extensions, divisions, compares)
 * first makes bits N and up a zero or sign extension (wide_norm).
 * Shapes not below (a wide phi, a variable shift, an intrinsic) are left:
 * the caller then optimises again without exit values (compile_llvm.c). */
typedef struct {
  LLVMValueRef v, lo, hi;
} wide_pair;

typedef struct {
  wide_pair *p;
  size_t n, cap;
} wide_map;

static unsigned int_width(LLVMValueRef v) {
  LLVMTypeRef t = LLVMTypeOf(v);
  return LLVMGetTypeKind(t) == LLVMIntegerTypeKind ? LLVMGetIntTypeWidth(t)
                                                   : 0;
}

static bool is_wide(LLVMValueRef v) {
  unsigned w = int_width(v);
  return w > 64 && w <= 128;
}

/* hi with bits N and up (N = its pair's width) a zero or sign extension */
static LLVMValueRef wide_norm(cg *c, LLVMBuilderRef B, LLVMValueRef hi,
                              unsigned n, bool sg) {
  if (n >= 128)
    return hi;
  unsigned k = n - 64; /* 1..63 bits of hi mean anything */
  if (sg)
    return LLVMBuildAShr(B, LLVMBuildShl(B, hi, cg_i64(c, 64 - k), ""),
                         cg_i64(c, 64 - k), "");
  return LLVMBuildAnd(B, hi, cg_i64(c, (int64_t)((1ull << k) - 1)), "");
}

/* {lo, hi} shifted by a constant s (0 <= s < 128): shl, lshr or ashr */
static void wide_shift(cg *c, LLVMBuilderRef B, LLVMOpcode op, uint64_t s,
                       LLVMValueRef *lo, LLVMValueRef *hi) {
  LLVMValueRef l = *lo, h = *hi;
  if (s == 0)
    return;
  if (op == LLVMShl) {
    if (s >= 64) {
      *hi = s == 64 ? l : LLVMBuildShl(B, l, cg_i64(c, (int64_t)s - 64), "");
      *lo = cg_i64(c, 0);
    } else {
      *hi = LLVMBuildOr(B, LLVMBuildShl(B, h, cg_i64(c, (int64_t)s), ""),
                        LLVMBuildLShr(B, l, cg_i64(c, 64 - (int64_t)s), ""), "");
      *lo = LLVMBuildShl(B, l, cg_i64(c, (int64_t)s), "");
    }
    return;
  }
  bool sg = op == LLVMAShr;
  LLVMValueRef fill = sg ? LLVMBuildAShr(B, h, cg_i64(c, 63), "") : cg_i64(c, 0);
  if (s >= 64) {
    *lo = s == 64 ? h
                  : sg ? LLVMBuildAShr(B, h, cg_i64(c, (int64_t)s - 64), "")
                       : LLVMBuildLShr(B, h, cg_i64(c, (int64_t)s - 64), "");
    *hi = fill;
  } else {
    *lo = LLVMBuildOr(B, LLVMBuildLShr(B, l, cg_i64(c, (int64_t)s), ""),
                      LLVMBuildShl(B, h, cg_i64(c, 64 - (int64_t)s), ""), "");
    *hi = sg ? LLVMBuildAShr(B, h, cg_i64(c, (int64_t)s), "")
             : LLVMBuildLShr(B, h, cg_i64(c, (int64_t)s), "");
  }
}

/* A constant amount of a shift (below the width), or a power of two to
 * divide by (its log2), in *s; false when the operand is neither. */
static bool const_amount(cg *c, LLVMBuilderRef B, LLVMValueRef v, bool pow2,
                         uint64_t *s) {
  unsigned w = int_width(v);
  if (!LLVMIsAConstantInt(v) || w > 128)
    return false;
  if (w > 64) { /* (folded) */
    LLVMValueRef h = LLVMBuildTrunc(
        B, LLVMBuildLShr(B, v, LLVMConstInt(LLVMTypeOf(v), 64, 0), ""),
        c->t_i64, "");
    if (!LLVMIsAConstantInt(h) || LLVMConstIntGetZExtValue(h) != 0)
      return false;
    v = LLVMBuildTrunc(B, v, c->t_i64, "");
    if (!LLVMIsAConstantInt(v))
      return false;
  }
  unsigned long long z = LLVMConstIntGetZExtValue(v);
  if (!pow2) {
    *s = z;
    return z < w;
  }
  if (z == 0 || (z & (z - 1)))
    return false;
  *s = (uint64_t)__builtin_ctzll(z);
  return true;
}

static bool wide_split(cg *c, LLVMBuilderRef B, wide_map *m, LLVMValueRef v,
                       LLVMValueRef *lo, LLVMValueRef *hi);

/* The pair of in's wide operand i; false when it has none (see above) */
static bool wide_operand(cg *c, LLVMBuilderRef B, wide_map *m, LLVMValueRef in,
                         unsigned i, LLVMValueRef *lo, LLVMValueRef *hi) {
  return wide_split(c, B, m, LLVMGetOperand(in, i), lo, hi);
}

static bool wide_split(cg *c, LLVMBuilderRef B, wide_map *m, LLVMValueRef v,
                       LLVMValueRef *lo, LLVMValueRef *hi) {
  for (size_t i = 0; i < m->n; i++)
    if (m->p[i].v == v) {
      *lo = m->p[i].lo;
      *hi = m->p[i].hi;
      return true;
    }
  if (!is_wide(v))
    return false;
  unsigned n = int_width(v);
  if (LLVMIsAConstantInt(v) || LLVMIsAUndefValue(v)) {
    /* folded by the builder, wherever it stands */
    *lo = LLVMBuildTrunc(B, v, c->t_i64, "");
    *hi = LLVMBuildTrunc(
        B, LLVMBuildLShr(B, v, LLVMConstInt(LLVMTypeOf(v), 64, 0), ""),
        c->t_i64, "");
    return LLVMIsAConstant(*lo) && LLVMIsAConstant(*hi);
  }
  if (!LLVMIsAInstruction(v))
    return false;
  LLVMOpcode op = LLVMGetInstructionOpcode(v);
  LLVMValueRef al = NULL, ah = NULL, bl = NULL, bh = NULL, r0, r1;
  uint64_t s;
  switch (op) {
  case LLVMZExt:
  case LLVMSExt: {
    LLVMValueRef x = LLVMGetOperand(v, 0);
    unsigned xw = int_width(x);
    bool sg = op == LLVMSExt;
    if (xw == 0)
      return false;
    if (xw <= 64) {
      LLVMPositionBuilderBefore(B, v);
      r0 = xw == 64 ? x
           : sg     ? LLVMBuildSExt(B, x, c->t_i64, "")
                    : LLVMBuildZExt(B, x, c->t_i64, "");
      r1 = sg ? LLVMBuildAShr(B, r0, cg_i64(c, 63), "") : cg_i64(c, 0);
    } else {
      if (!wide_operand(c, B, m, v, 0, &al, &ah))
        return false;
      LLVMPositionBuilderBefore(B, v);
      r0 = al;
      r1 = wide_norm(c, B, ah, xw, sg);
    }
    break;
  }
  case LLVMTrunc: /* to a narrower wide one: the same bits */
    if (!wide_operand(c, B, m, v, 0, &r0, &r1))
      return false;
    break;
  case LLVMAdd:
  case LLVMSub:
  case LLVMMul:
  case LLVMAnd:
  case LLVMOr:
  case LLVMXor:
    if (!wide_operand(c, B, m, v, 0, &al, &ah) ||
        !wide_operand(c, B, m, v, 1, &bl, &bh))
      return false;
    LLVMPositionBuilderBefore(B, v);
    if (op == LLVMAdd) {
      r0 = LLVMBuildAdd(B, al, bl, "");
      LLVMValueRef carry = LLVMBuildZExt(
          B, LLVMBuildICmp(B, LLVMIntULT, r0, al, ""), c->t_i64, "");
      r1 = LLVMBuildAdd(B, LLVMBuildAdd(B, ah, bh, ""), carry, "");
    } else if (op == LLVMSub) {
      r0 = LLVMBuildSub(B, al, bl, "");
      LLVMValueRef borrow = LLVMBuildZExt(
          B, LLVMBuildICmp(B, LLVMIntULT, al, bl, ""), c->t_i64, "");
      r1 = LLVMBuildSub(B, LLVMBuildSub(B, ah, bh, ""), borrow, "");
    } else if (op == LLVMMul) {
      r0 = LLVMBuildMul(B, al, bl, "");
      r1 = LLVMBuildAdd(
          B, mul_hi64(c, B, al, false, bl, false),
          LLVMBuildAdd(B, LLVMBuildMul(B, al, bh, ""),
                       LLVMBuildMul(B, ah, bl, ""), ""), "");
    } else {
      LLVMValueRef (*f)(LLVMBuilderRef, LLVMValueRef, LLVMValueRef,
                        const char *) =
          op == LLVMAnd ? LLVMBuildAnd : op == LLVMOr ? LLVMBuildOr : LLVMBuildXor;
      r0 = f(B, al, bl, "");
      r1 = f(B, ah, bh, "");
    }
    break;
  case LLVMShl:
  case LLVMLShr:
  case LLVMAShr:
  case LLVMUDiv:
  case LLVMURem: {
    bool div = op == LLVMUDiv || op == LLVMURem;
    if (!const_amount(c, B, LLVMGetOperand(v, 1), div, &s) ||
        !wide_operand(c, B, m, v, 0, &r0, &r1))
      return false;
    LLVMPositionBuilderBefore(B, v);
    if (op != LLVMShl)
      r1 = wide_norm(c, B, r1, n, op == LLVMAShr);
    if (op == LLVMURem) { /* x mod 2^s: its s low bits */
      if (s < 64) {
        r0 = LLVMBuildAnd(B, r0, cg_i64(c, (int64_t)((1ull << s) - 1)), "");
        r1 = cg_i64(c, 0);
      } else if (s > 64) {
        r1 = LLVMBuildAnd(B, r1, cg_i64(c, (int64_t)((1ull << (s - 64)) - 1)), "");
      } else {
        r1 = cg_i64(c, 0);
      }
    } else {
      wide_shift(c, B, op == LLVMUDiv ? LLVMLShr : op, s, &r0, &r1);
    }
    break;
  }
  case LLVMSelect: {
    LLVMValueRef cond = LLVMGetOperand(v, 0);
    if (is_wide(cond) || LLVMGetTypeKind(LLVMTypeOf(cond)) != LLVMIntegerTypeKind ||
        !wide_operand(c, B, m, v, 1, &al, &ah) ||
        !wide_operand(c, B, m, v, 2, &bl, &bh))
      return false;
    LLVMPositionBuilderBefore(B, v);
    r0 = LLVMBuildSelect(B, cond, al, bl, "");
    r1 = LLVMBuildSelect(B, cond, ah, bh, "");
    break;
  }
  case LLVMFreeze:
    if (!wide_operand(c, B, m, v, 0, &al, &ah))
      return false;
    LLVMPositionBuilderBefore(B, v);
    r0 = LLVMBuildFreeze(B, al, "");
    r1 = LLVMBuildFreeze(B, ah, "");
    break;
  default: /* phis, calls, divisions by others, variable shifts, ... */
    return false;
  }
  if (m->n == m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 16;
    wide_pair *p = realloc(m->p, cap * sizeof *p);
    if (!p)
      return false;
    m->p = p;
    m->cap = cap;
  }
  m->p[m->n++] = (wide_pair){v, r0, r1};
  *lo = r0;
  *hi = r1;
  return true;
}

/* A narrow instruction that reads wide values, made of their pairs: a
 * trunc to 64 bits or fewer, or a compare. False: another one. */
static bool wide_user(cg *c, LLVMBuilderRef B, wide_map *m, LLVMValueRef in) {
  LLVMValueRef al, ah, bl, bh, r;
  if (LLVMIsATruncInst(in)) {
    if (!wide_operand(c, B, m, in, 0, &al, &ah))
      return false;
    LLVMPositionBuilderBefore(B, in);
    r = int_width(in) == 64 ? al : LLVMBuildTrunc(B, al, LLVMTypeOf(in), "");
  } else if (LLVMIsAICmpInst(in)) {
    LLVMIntPredicate p = LLVMGetICmpPredicate(in);
    bool sg = p == LLVMIntSLT || p == LLVMIntSLE || p == LLVMIntSGT ||
              p == LLVMIntSGE;
    unsigned n = int_width(LLVMGetOperand(in, 0));
    if (!wide_operand(c, B, m, in, 0, &al, &ah) ||
        !wide_operand(c, B, m, in, 1, &bl, &bh))
      return false;
    LLVMPositionBuilderBefore(B, in);
    ah = wide_norm(c, B, ah, n, sg);
    bh = wide_norm(c, B, bh, n, sg);
    LLVMValueRef heq = LLVMBuildICmp(B, LLVMIntEQ, ah, bh, "");
    if (p == LLVMIntEQ || p == LLVMIntNE) {
      r = LLVMBuildAnd(B, heq, LLVMBuildICmp(B, LLVMIntEQ, al, bl, ""), "");
      if (p == LLVMIntNE)
        r = LLVMBuildNot(B, r, "");
    } else {
      /* the high halves decide unless equal; then the low ones, unsigned */
      LLVMIntPredicate lp = p == LLVMIntSLT ? LLVMIntULT
                            : p == LLVMIntSLE ? LLVMIntULE
                            : p == LLVMIntSGT ? LLVMIntUGT
                            : p == LLVMIntSGE ? LLVMIntUGE
                                              : p;
      LLVMIntPredicate hp = p == LLVMIntSLE   ? LLVMIntSLT
                            : p == LLVMIntSGE ? LLVMIntSGT
                            : p == LLVMIntULE ? LLVMIntULT
                            : p == LLVMIntUGE ? LLVMIntUGT
                                              : p;
      r = LLVMBuildSelect(B, heq, LLVMBuildICmp(B, lp, al, bl, ""),
                          LLVMBuildICmp(B, hp, ah, bh, ""), "");
    }
  } else {
    return false;
  }
  LLVMReplaceAllUsesWith(in, r);
  LLVMInstructionEraseFromParent(in);
  return true;
}

static bool reads_wide(LLVMValueRef in) {
  int k = LLVMGetNumOperands(in);
  for (int i = 0; i < k; i++)
    if (is_wide(LLVMGetOperand(in, i)))
      return true;
  return false;
}

/* The widest integer above 64 bits left in f (after the 128-bit products
 * above and the pairs; the unused ones gone); 0 when none is. */
static unsigned no_int128(cg *c, LLVMBuilderRef B, LLVMValueRef f) {
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb;
       bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb), next; in; in = next) {
      next = LLVMGetNextInstruction(in);
      narrow_trunc(c, B, in);
    }
  wide_map m = {0};
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f);
       bb && !c->no_wide_pairs; bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb), next; in; in = next) {
      next = LLVMGetNextInstruction(in);
      if (!is_int128(in) && reads_wide(in))
        wide_user(c, B, &m, in);
    }
  free(m.p);
  bool gone;
  do { /* the wide values, unused now */
    gone = false;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb;
         bb = LLVMGetNextBasicBlock(bb))
      for (LLVMValueRef in = LLVMGetFirstInstruction(bb), next; in; in = next) {
        next = LLVMGetNextInstruction(in);
        if (is_int128(in) && !LLVMGetFirstUse(in)) {
          LLVMInstructionEraseFromParent(in);
          gone = true;
        }
      }
  } while (gone);
  unsigned widest = 0;
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb;
       bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in;
         in = LLVMGetNextInstruction(in)) {
      unsigned w = int_width(in);
      int k = LLVMGetNumOperands(in);
      for (int i = 0; i < k; i++)
        if (int_width(LLVMGetOperand(in, i)) > w)
          w = int_width(LLVMGetOperand(in, i));
      if (w > 64 && w > widest)
        widest = w;
    }
  return widest;
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

/* An atomic's pointer that is a constant getelementptr expression (a
 * local array's element at a constant index: getelementptr (i8, @local,
 * 4), as the optimiser writes it) is lowered by LLVM 22's SPIR-V backend
 * as an access chain of the atomic's element type with the byte offset
 * for index: t[1] of an i32 array became t[4] (found by an outside probe:
 * every local atomic at a constant index above 0 touched another element,
 * or none; written with the element type, the same). An instruction is
 * lowered right: the offset is made one, from a frozen index (a builder
 * folds constant operands back into an expression; nothing folds a
 * freeze before the backend, and it costs nothing at run time). */
static LLVMValueRef offset_instruction(LLVMBuilderRef b, LLVMValueRef p) {
  LLVMValueRef idx[8];
  unsigned n = LLVMIsAConstantExpr(p) &&
                       LLVMGetConstOpcode(p) == LLVMGetElementPtr
                   ? (unsigned)LLVMGetNumOperands(p)
                   : 0;
  if (n < 2 || n - 1 > sizeof idx / sizeof *idx)
    return p;
  /* the first index (over the pointer) frozen: it may be any value; the
   * others, into arrays or structures, stay as they are */
  idx[0] = LLVMBuildFreeze(b, LLVMGetOperand(p, 1), "");
  for (unsigned i = 2; i < n; i++)
    idx[i - 1] = LLVMGetOperand(p, i);
  return LLVMBuildGEPWithNoWrapFlags(b, LLVMGetGEPSourceElementType(p),
                                     LLVMGetOperand(p, 0), idx, n - 1, "",
                                     LLVMGEPGetNoWrapFlags(p));
}

/* The atomics' pointers, offset_instruction's way: atomicrmw, cmpxchg,
 * atomic loads and stores, and calls of the __spirv_Atomic* builtins
 * (their pointer first). */
static void atomic_pointer(LLVMBuilderRef b, LLVMValueRef in,
                           const char *callee) {
  bool atomic_access = (LLVMIsALoadInst(in) || LLVMIsAStoreInst(in)) &&
                       LLVMGetOrdering(in) != LLVMAtomicOrderingNotAtomic;
  unsigned op = LLVMIsAStoreInst(in) ? 1 : 0;
  if (!atomic_access && !LLVMIsAAtomicRMWInst(in) &&
      !LLVMIsAAtomicCmpXchgInst(in) &&
      !(!strncmp(callee, "_Z", 2) && strstr(callee, "__spirv_Atomic")))
    return;
  LLVMPositionBuilderBefore(b, in);
  LLVMValueRef p = LLVMGetOperand(in, op);
  LLVMValueRef q = offset_instruction(b, p);
  if (q != p)
    LLVMSetOperand(in, op, q);
}

/* The storage-class bits of a SPIR-V MemorySemantics for memory in
 * address space as: WorkgroupMemory 0x100 (local), CrossWorkgroupMemory
 * 0x200 (global), both for a generic pointer (it may point at either). */
static unsigned memory_bits(unsigned as) {
  return as == 3 ? 0x100 : as == 4 ? 0x300 : 0x200;
}

/* An atomic load or store as the builtin __spirv_AtomicLoad or
 * __spirv_AtomicStore (OpAtomicLoad, OpAtomicStore): LLVM 22's SPIR-V
 * backend lowers "load atomic" and "store atomic" to a plain OpLoad and
 * OpStore, without their scope and ordering (found by an outside probe:
 * atomic_load(.., acquire) and atomic_store(.., release) published
 * nothing to a SPIR-V device that reorders). Floats go through the
 * integer of their width. The call, or NULL for anything else. */
static LLVMValueRef atomic_access_call(cg *c, LLVMValueRef in) {
  bool load = LLVMIsALoadInst(in) != NULL;
  if ((!load && !LLVMIsAStoreInst(in)) ||
      LLVMGetOrdering(in) == LLVMAtomicOrderingNotAtomic)
    return NULL;
  LLVMValueRef p = LLVMGetOperand(in, load ? 0 : 1);
  LLVMTypeRef t = load ? LLVMTypeOf(in) : LLVMTypeOf(LLVMGetOperand(in, 0));
  LLVMTypeKind k = LLVMGetTypeKind(t);
  unsigned bits = k == LLVMIntegerTypeKind ? LLVMGetIntTypeWidth(t)
                  : k == LLVMFloatTypeKind ? 32
                  : k == LLVMDoubleTypeKind ? 64
                                            : 0;
  if (bits != 32 && bits != 64)
    return NULL; /* (16-bit atomics go through their 32-bit word) */
  unsigned as = LLVMGetPointerAddressSpace(LLVMTypeOf(p));
  /* MemorySemantics: Acquire 0x2, Release 0x4, AcquireRelease 0x8,
   * SequentiallyConsistent 0x10, with memory_bits; Scope: Device 1,
   * Workgroup 2 */
  unsigned sem = 0;
  switch (LLVMGetOrdering(in)) {
  case LLVMAtomicOrderingAcquire: sem = 0x2; break;
  case LLVMAtomicOrderingRelease: sem = 0x4; break;
  case LLVMAtomicOrderingAcquireRelease: sem = 0x8; break;
  case LLVMAtomicOrderingSequentiallyConsistent: sem = 0x10; break;
  default: break;
  }
  if (sem)
    sem |= memory_bits(as);
  unsigned wg = LLVMGetSyncScopeID(c->ctx, "workgroup", 9);
  unsigned scope = LLVMGetAtomicSyncScopeID(in) == wg ? 2 : 1;
  LLVMTypeRef it = LLVMIntTypeInContext(c->ctx, bits);
  char w = bits == 64 ? 'l' : 'i', name[64];
  LLVMPositionBuilderBefore(c->b, in);
  LLVMValueRef a[4] = {p, cg_i32(c, (int32_t)scope), cg_i32(c, (int32_t)sem)};
  LLVMValueRef r;
  if (load) {
    snprintf(name, sizeof name, "_Z18__spirv_AtomicLoadPU3AS%u%cii", as, w);
    r = cg_call(c, name, it, a, 3, LLVMSPIRFUNCCallConv);
    LLVMValueRef v = it == t ? r : LLVMBuildBitCast(c->b, r, t, "");
    LLVMReplaceAllUsesWith(in, v);
  } else {
    snprintf(name, sizeof name, "_Z19__spirv_AtomicStorePU3AS%u%cii%c", as, w,
             w);
    a[3] = LLVMGetOperand(in, 0);
    if (it != t)
      a[3] = LLVMBuildBitCast(c->b, a[3], it, "");
    r = cg_call(c, name, LLVMVoidTypeInContext(c->ctx), a, 4,
                LLVMSPIRFUNCCallConv);
  }
  LLVMInstructionEraseFromParent(in);
  return r;
}

static void spirv_before_codegen(cg *c) {
  c->local_bytes = cg_simt_local_bytes(c); /* the optimised module's */
  LLVMBuilderRef b = LLVMCreateBuilderInContext(c->ctx);
  for (LLVMValueRef f = LLVMGetFirstFunction(c->mod); f;
       f = LLVMGetNextFunction(f)) {
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb;
         bb = LLVMGetNextBasicBlock(bb)) {
      LLVMValueRef in = LLVMGetFirstInstruction(bb);
      while (in) {
        LLVMValueRef next = LLVMGetNextInstruction(in);
        LLVMValueRef call = atomic_access_call(c, in);
        if (call)
          in = call;
        LLVMValueRef callee =
            LLVMIsACallInst(in) ? LLVMGetCalledValue(in) : NULL;
        size_t len = 0;
        const char *name = callee && LLVMIsAFunction(callee)
                               ? LLVMGetValueName2(callee, &len)
                               : "";
        atomic_pointer(b, in, name);
        if (!strcmp(name, "_Z6mul_hill")) {
          /* OpenCL's s_mul_hi of longs, made of 64-bit products
           * (mul_hi64): Intel's CPU runtime (2025.x) loses stores after
           * one in a block some work-items skip (an unconditional store
           * that follows wrote nothing; found by an outside probe, pinned
           * on the SPIR-V: the module with the s_mul_hi replaced runs
           * right) */
          LLVMPositionBuilderBefore(b, in);
          LLVMValueRef r = mul_hi64(c, b, LLVMGetOperand(in, 0), true,
                                    LLVMGetOperand(in, 1), true);
          LLVMReplaceAllUsesWith(in, r);
          LLVMInstructionEraseFromParent(in);
        } else if (strncmp(name, "llvm.bitreverse.i", 17) == 0 &&
            LLVMGetTypeKind(LLVMTypeOf(in)) == LLVMIntegerTypeKind) {
          LLVMPositionBuilderBefore(b, in);
          LLVMValueRef r = expand_bitreverse(c, b, LLVMGetOperand(in, 0));
          LLVMReplaceAllUsesWith(in, r);
          LLVMInstructionEraseFromParent(in);
        }
        in = next;
      }
    }
    unsigned wide = no_int128(c, b, f);
    if (wide && c->status == XPJ_OK) {
      size_t len;
      if (c->exit_values_again) /* (compile_llvm.c) */
        c->wide_left = wide;
      else
        cg_fail(c, XPJ_ERR_UNSUPPORTED, "%s: the optimiser made a %u-bit "
                "integer operation of it that could not be made of 64-bit "
                "ones, and SPIR-V has no integers wider than 64 bits",
                LLVMGetValueName2(f, &len), wide);
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
   * SequentiallyConsistent 0x10; with memory_bits. Scope: Device 1,
   * Workgroup 2. */
  unsigned storage = memory_bits(as), eq = 0, neq = 0;
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
    .exit_values_again = true,
};
