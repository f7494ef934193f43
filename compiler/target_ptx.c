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
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The thread's linear id in its block (x fastest: the order warps are
 * made in) and the block's size. */
static LLVMValueRef block_linear(cg *c) {
  LLVMValueRef r = LLVMBuildMul(c->b, sreg(c, "tid", 2), sreg(c, "ntid", 1), "");
  r = LLVMBuildAdd(c->b, r, sreg(c, "tid", 1), "");
  r = LLVMBuildMul(c->b, r, sreg(c, "ntid", 0), "");
  return LLVMBuildAdd(c->b, r, sreg(c, "tid", 0), "");
}
static LLVMValueRef block_size(cg *c) {
  return LLVMBuildMul(c->b, LLVMBuildMul(c->b, sreg(c, "ntid", 0), sreg(c, "ntid", 1), ""),
                      sreg(c, "ntid", 2), "");
}

/* A sub-group is a warp of 32 threads; the last one of a block whose size
 * is not a multiple of 32 has the rest. */
static LLVMValueRef sub_group_size(cg *c) {
  LLVMValueRef first = LLVMBuildAnd(c->b, block_linear(c), cg_i64(c, ~(int64_t)31), "");
  LLVMValueRef left = LLVMBuildSub(c->b, block_size(c), first, "");
  return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntULT, left, cg_i64(c, 32), ""),
                         left, cg_i64(c, 32), "");
}

static LLVMValueRef ptx_wi(cg *c, xpj_wi w, unsigned d) {
  d = d > 2 ? 0 : d;
  switch (w) {
  case XPJ_WI_SUB_GROUP_SIZE: return sub_group_size(c);
  case XPJ_WI_SUB_GROUP_LOCAL_ID:
    return LLVMBuildAnd(c->b, block_linear(c), cg_i64(c, 31), "");
  case XPJ_WI_SUB_GROUP_ID:
    return LLVMBuildLShr(c->b, block_linear(c), cg_i64(c, 5), "");
  case XPJ_WI_NUM_SUB_GROUPS:
    return LLVMBuildLShr(c->b, LLVMBuildAdd(c->b, block_size(c), cg_i64(c, 31), ""),
                         cg_i64(c, 5), "");
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

/* ---- collectives: warp shuffles, and shared memory across warps ---- */

/* The lanes of this thread's warp: all 32, or the low ones of a short
 * last warp. */
static LLVMValueRef warp_mask(cg *c) {
  LLVMValueRef n = LLVMBuildTrunc(c->b, sub_group_size(c), c->t_i32, "");
  LLVMValueRef low = LLVMBuildSub(c->b, LLVMBuildShl(c->b, cg_i32(c, 1), n, ""),
                                  cg_i32(c, 1), "");
  return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, n, cg_i32(c, 32), ""),
                         cg_i32(c, -1), low, "");
}

/* shfl.sync of x (scalar type s) in mode ("idx", "up", "down", "bfly")
 * with lane / delta b (i32): 32-bit pieces, the narrow types widened. */
static LLVMValueRef shfl(cg *c, const char *mode, xpj_scalar s, LLVMValueRef x,
                         LLVMValueRef b, LLVMValueRef mask) {
  char name[48];
  snprintf(name, sizeof name, "llvm.nvvm.shfl.sync.%s.i32", mode);
  /* c: the clamp for idx / down / bfly, 0 for up (PTX ISA, shfl.sync) */
  LLVMValueRef clamp = cg_i32(c, strcmp(mode, "up") ? 0x1f : 0);
  LLVMTypeRef t = cg_scalar_type(c, s);
  unsigned bits = xpj_scalar_bits(s);
  LLVMValueRef w;
  if (bits == 64) {
    LLVMValueRef v = cg_scalar_is_float(s) ? LLVMBuildBitCast(c->b, x, c->t_i64, "") : x;
    LLVMValueRef lo = LLVMBuildTrunc(c->b, v, c->t_i32, "");
    LLVMValueRef hi = LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, v, cg_i64(c, 32), ""),
                                     c->t_i32, "");
    LLVMValueRef a1[4] = {mask, lo, b, clamp}, a2[4] = {mask, hi, b, clamp};
    lo = cg_intrinsic(c, name, NULL, 0, a1, 4);
    hi = cg_intrinsic(c, name, NULL, 0, a2, 4);
    w = LLVMBuildOr(c->b, LLVMBuildZExt(c->b, lo, c->t_i64, ""),
                    LLVMBuildShl(c->b, LLVMBuildZExt(c->b, hi, c->t_i64, ""),
                                 cg_i64(c, 32), ""), "");
    return cg_scalar_is_float(s) ? LLVMBuildBitCast(c->b, w, t, "") : w;
  }
  LLVMValueRef v = cg_scalar_is_float(s) ? LLVMBuildBitCast(c->b, x, c->t_i32, "")
                   : bits < 32            ? LLVMBuildZExt(c->b, x, c->t_i32, "")
                                          : x;
  LLVMValueRef a[4] = {mask, v, b, clamp};
  w = cg_intrinsic(c, name, NULL, 0, a, 4);
  return cg_scalar_is_float(s) ? LLVMBuildBitCast(c->b, w, t, "")
         : bits < 32            ? LLVMBuildTrunc(c->b, w, t, "")
                                : w;
}

static LLVMValueRef lane_i32(cg *c) {
  return LLVMBuildTrunc(c->b, LLVMBuildAnd(c->b, block_linear(c), cg_i64(c, 31), ""),
                        c->t_i32, "");
}

/* The warp's reduction (every lane gets it) or inclusive scan of x: a
 * butterfly or a Hillis-Steele ladder; lanes past a short warp's end
 * count as the identity. */
static LLVMValueRef warp_combine(cg *c, bool scan, xpj_group_op op,
                                 xpj_scalar s, LLVMValueRef x) {
  LLVMValueRef mask = warp_mask(c), lane = lane_i32(c);
  LLVMValueRef n = LLVMBuildTrunc(c->b, sub_group_size(c), c->t_i32, "");
  LLVMValueRef id = cg_group_identity(c, op, s);
  for (int k = 0; k < 5; k++) {
    int off = scan ? 1 << k : 16 >> k;
    LLVMValueRef y = shfl(c, scan ? "up" : "bfly", s, x, cg_i32(c, off), mask);
    LLVMValueRef ok;
    if (scan) /* lane - off exists */
      ok = LLVMBuildICmp(c->b, LLVMIntUGE, lane, cg_i32(c, off), "");
    else /* lane ^ off is in the warp */
      ok = LLVMBuildICmp(c->b, LLVMIntULT,
                         LLVMBuildXor(c->b, lane, cg_i32(c, off), ""), n, "");
    y = LLVMBuildSelect(c->b, ok, y, id, "");
    x = scan ? cg_group_combine(c, op, s, y, x) : cg_group_combine(c, op, s, x, y);
  }
  return x;
}

/* The block's scratch for collectives: one 8-byte slot per warp. */
static LLVMValueRef coll_slot(cg *c, LLVMValueRef w) {
  LLVMValueRef g = LLVMGetNamedGlobal(c->mod, "__xpj_coll");
  LLVMTypeRef at = LLVMArrayType2(c->t_i64, 32);
  if (!g) {
    g = LLVMAddGlobalInAddressSpace(c->mod, at, "__xpj_coll", 3);
    LLVMSetInitializer(g, LLVMGetUndef(at));
    LLVMSetLinkage(g, LLVMInternalLinkage);
    LLVMSetAlignment(g, 8);
    c->local_bytes += 32 * 8;
  }
  LLVMValueRef idx[2] = {cg_i64(c, 0), w};
  return LLVMBuildInBoundsGEP2(c->b, at, g, idx, 2, "");
}

/* if (cond) *slot = x: through a branch */
static void store_if(cg *c, LLVMValueRef cond, LLVMValueRef slot, LLVMValueRef x) {
  LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "coll.put");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "coll.put.done");
  LLVMBuildCondBr(c->b, cond, yes, done);
  LLVMPositionBuilderAtEnd(c->b, yes);
  LLVMBuildStore(c->b, x, slot);
  LLVMBuildBr(c->b, done);
  LLVMPositionBuilderAtEnd(c->b, done);
}

/* op over the slots of the warps before `upto` (all warps: the number of
 * warps), in warp order: a loop of `upto` loads (unrolled over the 32
 * possible slots it cost every collective 32 loads, compares and selects,
 * and a third of the kernel's compile time) */
static LLVMValueRef slots_combine(cg *c, xpj_group_op op, xpj_scalar s,
                                  LLVMValueRef upto) {
  LLVMTypeRef t = cg_scalar_type(c, s);
  LLVMValueRef id = cg_group_identity(c, op, s);
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b);
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "coll.slots");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "coll.slots.done");
  LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntNE, upto, cg_i64(c, 0), ""), body, done);
  LLVMPositionBuilderAtEnd(c->b, body);
  LLVMValueRef w = LLVMBuildPhi(c->b, c->t_i64, "");
  LLVMValueRef acc = LLVMBuildPhi(c->b, t, "");
  LLVMValueRef v = LLVMBuildLoad2(c->b, t, coll_slot(c, w), "");
  LLVMValueRef next = cg_group_combine(c, op, s, acc, v);
  LLVMValueRef w1 = LLVMBuildAdd(c->b, w, cg_i64(c, 1), "");
  LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntULT, w1, upto, ""), body, done);
  LLVMValueRef w_in[2] = {cg_i64(c, 0), w1}, acc_in[2] = {id, next};
  LLVMBasicBlockRef from[2] = {pre, body};
  LLVMAddIncoming(w, w_in, from, 2);
  LLVMAddIncoming(acc, acc_in, from, 2);
  LLVMPositionBuilderAtEnd(c->b, done);
  LLVMValueRef r = LLVMBuildPhi(c->b, t, "");
  LLVMValueRef r_in[2] = {id, next};
  LLVMAddIncoming(r, r_in, from, 2);
  return r;
}

static void ptx_barrier(cg *c, unsigned fences);

static LLVMValueRef ptx_group(cg *c, const xpj_coll_desc *d, xpj_scalar s,
                              LLVMValueRef x, LLVMValueRef id) {
  bool wide = xpj_scalar_bits(s) < 8; /* bool: shuffled as i8 */
  xpj_scalar ws = wide ? XPJ_U8 : s;
  if (wide)
    x = LLVMBuildZExt(c->b, x, c->t_i8, "");
  LLVMValueRef r = NULL;
  if (d->sub_group) {
    LLVMValueRef mask = warp_mask(c);
    switch (d->kind) {
    case XPJ_COLL_REDUCE: r = warp_combine(c, false, d->op, ws, x); break;
    case XPJ_COLL_SCAN_INCL: r = warp_combine(c, true, d->op, ws, x); break;
    case XPJ_COLL_SCAN_EXCL: {
      LLVMValueRef inc = warp_combine(c, true, d->op, ws, x);
      LLVMValueRef y = shfl(c, "up", ws, inc, cg_i32(c, 1), mask);
      r = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, lane_i32(c), cg_i32(c, 0), ""),
                          cg_group_identity(c, d->op, ws), y, "");
      break;
    }
    case XPJ_COLL_SHUFFLE_XOR:
      r = shfl(c, "bfly", ws, x, LLVMBuildTrunc(c->b, id, c->t_i32, ""), mask);
      break;
    default: /* broadcast, shuffle */
      r = shfl(c, "idx", ws, x, LLVMBuildTrunc(c->b, id, c->t_i32, ""), mask);
      break;
    }
  } else {
    LLVMTypeRef t = cg_scalar_type(c, ws);
    LLVMValueRef lin = block_linear(c);
    LLVMValueRef warp = LLVMBuildLShr(c->b, lin, cg_i64(c, 5), "");
    ptx_barrier(c, XPJ_FENCE_LOCAL); /* the slots' last readers are done */
    if (d->kind == XPJ_COLL_BROADCAST) {
      store_if(c, LLVMBuildICmp(c->b, LLVMIntEQ, lin, id, ""), coll_slot(c, cg_i64(c, 0)), x);
      ptx_barrier(c, XPJ_FENCE_LOCAL);
      r = LLVMBuildLoad2(c->b, t, coll_slot(c, cg_i64(c, 0)), "");
    } else {
      bool scan = d->kind != XPJ_COLL_REDUCE;
      LLVMValueRef part = warp_combine(c, scan, d->op, ws, x);
      /* the warp's total: its last lane's scan, any lane's reduction */
      LLVMValueRef last = LLVMBuildSub(c->b, sub_group_size(c), cg_i64(c, 1), "");
      LLVMValueRef lane = LLVMBuildAnd(c->b, lin, cg_i64(c, 31), "");
      store_if(c, LLVMBuildICmp(c->b, LLVMIntEQ, lane, scan ? last : cg_i64(c, 0), ""),
               coll_slot(c, warp), part);
      ptx_barrier(c, XPJ_FENCE_LOCAL);
      if (!scan) {
        LLVMValueRef nw = LLVMBuildLShr(c->b, LLVMBuildAdd(c->b, block_size(c), cg_i64(c, 31), ""),
                                        cg_i64(c, 5), "");
        r = slots_combine(c, d->op, ws, nw);
      } else {
        LLVMValueRef before = slots_combine(c, d->op, ws, warp);
        if (d->kind == XPJ_COLL_SCAN_EXCL) {
          LLVMValueRef y = shfl(c, "up", ws, part, cg_i32(c, 1), warp_mask(c));
          part = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, lane, cg_i64(c, 0), ""),
                                 cg_group_identity(c, d->op, ws), y, "");
        }
        r = cg_group_combine(c, d->op, ws, before, part);
      }
    }
  }
  return wide ? LLVMBuildTrunc(c->b, r, c->t_i1, "") : r;
}

/* An ordered atomic read-modify-write as one instruction, as NVRTC emits
 * it: `atom.acq_rel.gpu.global.add.f32` (PTX ISA 6.0, sm_70). LLVM 22
 * drops the ordering of atomicrmw on NVPTX, so the portable lowering puts
 * a fence on each side of a relaxed atom (two MEMBAR.GPU in SASS); this is
 * one (every target is sm_70 and PTX ISA 6.0 or newer, which have it).
 * seq_cst is a fence.sc and an acquire atom, as libcu++ maps it. NULL
 * where the instruction does not exist: 8- and 16-bit values, float
 * subtraction and min/max, another address space. */
static LLVMValueRef ptx_ordered_rmw(cg *c, LLVMAtomicRMWBinOp op, xpj_scalar s,
                                    xpj_space sp, xpj_scope scope,
                                    LLVMValueRef p, LLVMValueRef v,
                                    LLVMAtomicOrdering ord) {
  unsigned bits = xpj_scalar_bits(s);
  bool fl = cg_scalar_is_float(s);
  if ((bits != 32 && bits != 64) || (sp != XPJ_SPACE_GLOBAL && sp != XPJ_SPACE_LOCAL))
    return NULL;
  const char *name, *type;
  char ty[8];
  switch (op) {
  case LLVMAtomicRMWBinOpAdd: name = "add"; type = "u"; break;
  case LLVMAtomicRMWBinOpFAdd: name = "add"; type = "f"; break;
  case LLVMAtomicRMWBinOpSub: /* atom has no sub: add the negation */
    name = "add";
    type = "u";
    v = LLVMBuildNeg(c->b, v, "");
    break;
  case LLVMAtomicRMWBinOpMin: name = "min"; type = "s"; break;
  case LLVMAtomicRMWBinOpMax: name = "max"; type = "s"; break;
  case LLVMAtomicRMWBinOpUMin: name = "min"; type = "u"; break;
  case LLVMAtomicRMWBinOpUMax: name = "max"; type = "u"; break;
  case LLVMAtomicRMWBinOpAnd: name = "and"; type = "b"; break;
  case LLVMAtomicRMWBinOpOr: name = "or"; type = "b"; break;
  case LLVMAtomicRMWBinOpXor: name = "xor"; type = "b"; break;
  case LLVMAtomicRMWBinOpXchg: name = "exch"; type = "b"; break;
  default: return NULL;
  }
  if (fl && strcmp(name, "add") && strcmp(name, "exch"))
    return NULL;
  snprintf(ty, sizeof ty, "%s%u", fl && *type == 'f' ? "f" : type, bits);
  const char *sem = ord == LLVMAtomicOrderingAcquire ? "acquire"
                    : ord == LLVMAtomicOrderingRelease ? "release"
                    : ord == LLVMAtomicOrderingAcquireRelease ? "acq_rel"
                                                              : "acquire";
  const char *sc = scope == XPJ_SCOPE_WORK_GROUP ? "cta" : "gpu";
  char text[128], cons[40];
  snprintf(text, sizeof text, "%s%s%satom.%s.%s.%s.%s.%s $0, [$1], $2;",
           ord == LLVMAtomicOrderingSequentiallyConsistent ? "fence.sc." : "",
           ord == LLVMAtomicOrderingSequentiallyConsistent ? sc : "",
           ord == LLVMAtomicOrderingSequentiallyConsistent ? ";\n\t" : "", sem,
           sc, sp == XPJ_SPACE_GLOBAL ? "global" : "shared", name, ty);
  /* registers: r (32-bit), l (64-bit), f (f32), d (f64); the address as
   * a 64-bit integer */
  const char *rc = fl ? (bits == 32 ? "f" : "d") : (bits == 32 ? "r" : "l");
  snprintf(cons, sizeof cons, "=%s,l,%s,~{memory}", rc, rc);
  LLVMTypeRef t = cg_scalar_type(c, s);
  LLVMTypeRef args[2] = {c->t_i64, t};
  LLVMTypeRef ft = LLVMFunctionType(t, args, 2, 0);
  LLVMValueRef asm_fn = LLVMGetInlineAsm(ft, text, strlen(text), cons, strlen(cons),
                                         1, 0, LLVMInlineAsmDialectATT, 0);
  LLVMValueRef a[2] = {LLVMBuildPtrToInt(c->b, p, c->t_i64, ""), v};
  return LLVMBuildCall2(c->b, ft, asm_fn, a, 2, "");
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
  LLVMValueRef r = cg_call(c, buf, cg_scalar_type(c, s), a, n, LLVMCCallConv);
  LLVMValueRef f = LLVMGetNamedFunction(c->mod, buf);
  /* what the optimiser may know before libdevice is linked (ptx_finish):
   * the function ends, throws nothing, writes no memory and reads none
   * the kernel could write (sin and cos read a table of libdevice's own
   * that nothing writes) */
  static const char *const pure[] = {"nounwind", "willreturn", "nosync",
                                     "nofree", "memory"};
  if (f && !LLVMGetFirstBasicBlock(f))
    for (unsigned i = 0; i < sizeof pure / sizeof *pure; i++) {
      unsigned kind = LLVMGetEnumAttributeKindForName(pure[i], strlen(pure[i]));
      if (!LLVMGetEnumAttributeAtIndex(f, LLVMAttributeFunctionIndex, kind))
        LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                                LLVMCreateEnumAttribute(c->ctx, kind, 0));
    }
  return r;
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
  /* libdevice's fast f32 variants (it has no __nv_fast_exp2f: exp2f is
   * fast already) */
  if (c->opts->fast_math && s == XPJ_F32 &&
      (m == XPJ_MATH_SIN || m == XPJ_MATH_COS || m == XPJ_MATH_EXP ||
       m == XPJ_MATH_LOG || m == XPJ_MATH_LOG2)) {
    char fast[24];
    snprintf(fast, sizeof fast, "fast_%s", names[m]);
    return libdevice(c, fast, s, a, n);
  }
  return libdevice(c, names[m], s, a, n);
}

/* libdevice asks __nvvm_reflect("__CUDA_ARCH") which GPU it runs on
 * (tgammaf, sinpif, fast tanhf take other paths from sm_73 and sm_83 on):
 * answered here with the target's sm * 10, as LLVM's default<O2> does
 * for NVPTX. The `nvvm-reflect` pass our -O2 pipeline names
 * (ptx_o2_pipeline) knows no target and would answer 0. */
static void fold_cuda_arch(cg *c) {
  LLVMValueRef f = LLVMGetNamedFunction(c->mod, "__nvvm_reflect");
  if (!f)
    return;
  LLVMValueRef arch = LLVMConstInt(c->t_i32, c->target->sm * 10u, 0);
  for (LLVMUseRef u = LLVMGetFirstUse(f); u;) {
    LLVMValueRef call = LLVMGetUser(u);
    u = LLVMGetNextUse(u);
    if (!LLVMIsACallInst(call) || LLVMGetCalledValue(call) != f ||
        LLVMGetNumArgOperands(call) != 1)
      continue;
    LLVMValueRef g = LLVMGetOperand(call, 0);
    LLVMValueRef init = LLVMIsAGlobalVariable(g) ? LLVMGetInitializer(g) : NULL;
    size_t n = 0;
    const char *name = init && LLVMIsAConstantDataSequential(init)
                           ? LLVMGetAsString(init, &n)
                           : NULL;
    if (!name || n != sizeof "__CUDA_ARCH" ||
        memcmp(name, "__CUDA_ARCH", sizeof "__CUDA_ARCH"))
      continue;
    LLVMReplaceAllUsesWith(call, arch);
    LLVMInstructionEraseFromParent(call);
  }
}

/* The whole regular file at path, malloc'd (at most 256 MiB), *st what
 * fstat says of the file read; NULL on failure (a FIFO, a device or a
 * directory among them: opened without blocking, then refused). */
static char *read_whole(const char *path, size_t *n, struct stat *st_out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  char *data = NULL;
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_size > 0 && st.st_size <= (off_t)256 << 20 &&
      (data = malloc((size_t)st.st_size))) {
    size_t got = 0;
    while (got < (size_t)st.st_size) {
      ssize_t r = read(fd, data + got, (size_t)st.st_size - got);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        break;
      got += (size_t)r;
    }
    if (got != (size_t)st.st_size) {
      free(data);
      data = NULL;
    }
    *n = got;
    *st_out = st;
  }
  if (fd >= 0)
    close(fd);
  return data;
}

/* LLVM's errors while it reads or links bitcode: without a handler, the
 * context prints them and exits the process */
typedef struct diag_sink {
  char msg[400];
} diag_sink;

static void on_diag(LLVMDiagnosticInfoRef di, void *p) {
  diag_sink *s = p;
  if (LLVMGetDiagInfoSeverity(di) != LLVMDSError || s->msg[0])
    return;
  char *d = LLVMGetDiagInfoDescription(di);
  snprintf(s->msg, sizeof s->msg, "%s", d ? d : "error");
  LLVMDisposeMessage(d);
}

LLVMModuleRef xpj_read_libdevice(LLVMContextRef ctx, const char *path,
                                 struct stat *copied, char *why,
                                 size_t whysize) {
  LLVMMemoryBufferRef buf = NULL;
  char *err = NULL;
  if (copied) { /* in memory of its own: a mapping sees later writes */
    size_t n = 0;
    char *data = read_whole(path, &n, copied);
    if (data)
      buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(data, n, path);
    free(data);
    if (!buf) {
      snprintf(why, whysize, "cannot read %s", path);
      return NULL;
    }
  } else if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buf, &err)) {
    snprintf(why, whysize, "cannot read %s: %s", path, err ? err : "");
    LLVMDisposeMessage(err);
    return NULL;
  }
  LLVMModuleRef lib;
  diag_sink sink = {""};
  LLVMContextSetDiagnosticHandler(ctx, on_diag, &sink);
  bool bad = LLVMGetBitcodeModuleInContext2(ctx, buf, &lib);
  LLVMContextSetDiagnosticHandler(ctx, NULL, NULL);
  if (bad) {
    snprintf(why, whysize, "%s is not valid bitcode: %s", path, sink.msg);
    LLVMDisposeMemoryBuffer(buf);
    return NULL;
  }
  return lib; /* it owns buf */
}

static void link_libdevice(cg *c);

/* Bytes of kernel parameters ptxas allows: 4352 before PTX ISA 8.1,
 * 32764 from it (the CUDA programming guide's limits; ptxas: "uses too
 * much parameter space") */
#define PTX_PARAMS_MAX 4352u
#define PTX81_PARAMS_MAX 32764u

static uint64_t param_bytes(cg *c, LLVMValueRef fn) {
  LLVMTargetDataRef td = LLVMGetModuleDataLayout(c->mod);
  uint64_t n = 0;
  for (unsigned i = 0; i < LLVMCountParams(fn); i++) {
    LLVMTypeRef t = LLVMTypeOf(LLVMGetParam(fn, i));
    uint64_t a = LLVMABIAlignmentOfType(td, t);
    n = (n + a - 1) / a * a + LLVMABISizeOfType(td, t);
  }
  return n;
}

static void ptx_finish(cg *c, LLVMValueRef fn) {
  /* refused here, not by ptxas when a process loads the PTX */
  uint64_t params = param_bytes(c, fn);
  unsigned isa = c->target->ptx_version;
  uint64_t max = isa >= 81 ? PTX81_PARAMS_MAX : PTX_PARAMS_MAX;
  if (params > max) {
    cg_fail(c, XPJ_ERR_UNSUPPORTED, "the kernel's parameters take %llu "
            "bytes (an array parameter is a pointer, an offset, and a shape "
            "and a stride per dimension); PTX ISA %u.%u allows %llu%s",
            (unsigned long long)params, isa / 10, isa % 10,
            (unsigned long long)max,
            isa >= 81 ? "" : " (ISA 8.1 and later, 32764: ptx:sm_XX:ptx81)");
    return;
  }
  uint32_t hw[3];
  bool reqd = cg_reqd_local_hw(c, hw);
  if (reqd && (hw[0] > 1024 || hw[1] > 1024 || hw[2] > 64 ||
               (uint64_t)hw[0] * hw[1] * hw[2] > 1024)) {
    /* CUDA's block limits, the same on every sm: ptxas only warns, and
     * every launch would fail */
    cg_fail(c, XPJ_ERR_UNSUPPORTED, "the kernel's local size is %u x %u x "
            "%u threads in CUDA's x, y, z (the kernel's last dimension is "
            "x); CUDA allows 1024 x 1024 x 64 and 1024 in all",
            hw[0], hw[1], hw[2]);
    return;
  }
  if (reqd) { /* .reqntid x, y, z */
    char v[48];
    int n = snprintf(v, sizeof v, "%u,%u,%u", hw[0], hw[1], hw[2]);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(c->ctx, "nvvm.reqntid", 12,
                                                      v, (unsigned)n));
  }
  if (!c->needs_libdevice)
    return;
  /* -O2 (the GPU pipeline) links it after the optimisation, then inlines
   * and cleans up (ptx_before_codegen): its functions, optimised already,
   * are not optimised again with the kernel (in process, from_polar
   * 11.3 -> 8.7 ms, math_table 15.6 -> 13.0; the same SASS or less;
   * docs/benchmarks.md, "libdevice linked late") */
  if (c->opts->opt_level == 2) {
    c->libdevice_late = true;
    return;
  }
  link_libdevice(c);
}

/* Links the libdevice functions the kernel calls. */
static void link_libdevice(cg *c) {
  const char *path = c->libdevice;
  if (!path || !*path) {
    cg_fail(c, XPJ_ERR_UNSUPPORTED, "this kernel calls math functions that "
            "need libdevice (nvvm/libdevice/libdevice.10.bc from the CUDA "
            "toolkit), which was not found: set XPJIT_LIBDEVICE or CUDA_HOME");
    return;
  }
  /* read ahead by the compile server (compile_llvm.c), else here */
  LLVMModuleRef lib = c->lib_ahead;
  c->lib_ahead = NULL;
  char why[512];
  if (!lib &&
      !(lib = xpj_read_libdevice(c->ctx, path, NULL, why, sizeof why))) {
    cg_fail(c, XPJ_ERR_COMPILE, "%s", why);
    return;
  }
  LLVMSetTarget(lib, LLVMGetTarget(c->mod));
  LLVMSetDataLayout(lib, LLVMGetDataLayoutStr(c->mod));
  /* linkonce_odr definitions: the linker reads only those referenced */
  for (LLVMValueRef f = LLVMGetFirstFunction(lib); f; f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f))
      LLVMSetLinkage(f, LLVMLinkOnceODRLinkage);
  /* (the functions it takes are read from the bitcode now) */
  diag_sink sink = {""};
  LLVMContextSetDiagnosticHandler(c->ctx, on_diag, &sink);
  bool bad = LLVMLinkModules2(c->mod, lib);
  LLVMContextSetDiagnosticHandler(c->ctx, NULL, NULL);
  if (bad || sink.msg[0]) {
    cg_fail(c, XPJ_ERR_COMPILE, "linking libdevice (%s) failed: %s", path,
            sink.msg[0] ? sink.msg : "no reason given");
    return;
  }
  for (LLVMValueRef f = LLVMGetFirstFunction(c->mod); f;
       f = LLVMGetNextFunction(f)) {
    size_t n;
    const char *name = LLVMGetValueName2(f, &n);
    if (LLVMIsDeclaration(f) && n > 5 && !memcmp(name, "__nv_", 5) &&
        LLVMGetFirstUse(f)) { /* ptxas would refuse the PTX */
      cg_fail(c, XPJ_ERR_COMPILE, "internal: libdevice (%s) has no %s", path,
              name);
      return;
    }
    if (f != c->fn && !LLVMIsDeclaration(f))
      LLVMSetLinkage(f, LLVMInternalLinkage);
  }
  for (LLVMValueRef g = LLVMGetFirstGlobal(c->mod); g; g = LLVMGetNextGlobal(g))
    if (!LLVMIsDeclaration(g))
      LLVMSetLinkage(g, LLVMInternalLinkage);
  fold_cuda_arch(c);
}

/* local array parameters: byte offsets into the dynamic shared memory,
 * whose size the launch gives (cuLaunchKernel's sharedMemBytes) */
static LLVMValueRef ptx_local_param_base(cg *c) {
  LLVMValueRef g = LLVMGetNamedGlobal(c->mod, "__xpj_dyn");
  if (!g) {
    LLVMTypeRef at = LLVMArrayType2(c->t_i8, 0);
    g = LLVMAddGlobalInAddressSpace(c->mod, at, "__xpj_dyn", 3);
    LLVMSetLinkage(g, LLVMExternalLinkage);
    LLVMSetAlignment(g, 16);
  }
  return g;
}

/* -O2: LLVM's default<O2> less what a kernel module of one entry point
 * (and the device functions it calls; libdevice's come after it,
 * ptx_late_pipeline) does not need, in the
 * same order: no coroutines, OpenMP, profiles, vectorisers (they are off
 * for GPUs: work-items are the parallelism), attribute inference,
 * interprocedural passes beyond inlining, and one round instead of two of
 * the passes that found nothing more on our kernels. ptxas optimises
 * what follows. Measured on the 95 example kernels (docs/benchmarks.md,
 * "the GPU pipeline"): 1.4x faster than default<O2> from IR to PTX, and
 * the same SASS (ptxas -O3, sm_90) within 1.5%: -1.6% instructions in
 * all; then without runtime unrolling (below), -6.4%. */
#define SIMPLIFYCFG(late)                                                     \
  "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;"                \
  "switch-range-to-icmp;no-switch-to-lookup;keep-loops;" late                 \
  "no-hoist-loads-stores-with-cond-faulting;speculate-blocks;"                \
  "simplify-cond-branch;no-speculate-unpredictables>"
#define PLAIN_CFG                                                             \
  SIMPLIFYCFG("no-switch-to-arithmetic;no-hoist-common-insts;"                \
              "no-sink-common-insts;")
#define INSTCOMBINE "instcombine<max-iterations=1;no-verify-fixpoint>"
/* (no clean-up after the rotation: ptx_o2_loops's InstCombine and
 * SimplifyCFG follow; one here as well changed none of the 95 example
 * kernels' PTX, and of about 1,100 others an adversarial review wrote or
 * took from the tests two, neither clearly for the better:
 * docs/benchmarks.md, issue 19, seventeenth session) */
#define LOOPS_ROTATED                                                         \
  "loop-mssa(licm<allowspeculation>,"                                         \
  "loop-rotate<header-duplication;no-prepare-for-lto>,"                       \
  "licm<allowspeculation>)"
static const char ptx_o2_pipeline[] =
    /* each function cleaned up before it is inlined */
    "function(sroa<modify-cfg>,early-cse<>," PLAIN_CFG "," INSTCOMBINE "),"
    "always-inline,cgscc(inline),globaldce,"
    "function("
    /* scalars out of memory, redundancy, the CFG */
    "sroa<modify-cfg>,early-cse<memssa>," PLAIN_CFG "," INSTCOMBINE ","
    /* loops: invariants out, rotated, canonical; constant trip counts
     * unrolled (private arrays become registers) */
    LOOPS_ROTATED ")";

/* The same for a kernel that calls no function of its own: one clean-up
 * where the pipeline above ran two (before and after inlining nothing),
 * with the CFG simplified again after its InstCombine (which the second
 * round did: without it reverse_rows' SASS was a third larger), and
 * unused globals removed as after inlining. The PTX
 * of the 95 example kernels is the same but for one reordered predicate
 * expression; 2.3% faster (docs/benchmarks.md, issue 19, sixteenth
 * session). */
static const char ptx_o2_leaf[] =
    "function(sroa<modify-cfg>,early-cse<memssa>," PLAIN_CFG "," INSTCOMBINE
    "," PLAIN_CFG "," LOOPS_ROTATED "),"
    /* local arrays the clean-up left unused: no .shared for them */
    "globaldce";

/* The rest of it, after ptx_before_loops has hidden the induction
 * variables' steps (opaque_steps) */
static const char ptx_o2_loops[] =
    "function("
    /* unrolled first, then canonical: induction-variable simplification
     * of a loop whose constant-trip inner loops are still rolled proved
     * facts about every index in them (scalar evolution over the guards
     * that dominate each), most of its time, to no effect on the code.
     * One loop pipeline does both: it visits inner loops before the loops
     * around them (the same PTX as two, one after the other). Not in the
     * loops the code generator made canonical (xpj-indvars,
     * llvm_emit.cpp): it changed nothing there. */
    "loop(loop-unroll-full,xpj-indvars,loop-deletion),"
    /* what the unrolling left: scalars out of memory (SROA that may
     * change the CFG: a private array indexed by a 0/1 the data choose
     * stays out of local memory), redundancy (GVN: a global element
     * stored then loaded across a branch, bounds checks an early return
     * already made), dead stores to private arrays (median3x3 f64: a
     * third more SASS without DSE). Each was a few per cent of a loop
     * kernel's compile and changed none of the 95 example kernels, but
     * kernels written to need them did (docs/benchmarks.md, issue 19,
     * seventeenth session: an adversarial review). DSE only where a
     * private array is still in memory (xpj-private-dse, llvm_emit.cpp):
     * elsewhere it was a kernel's stores to global memory checked
     * against each other for nothing, a third of a millisecond of
     * matmul_regblock's 16 guarded stores (twenty-second session). */
    "sroa<modify-cfg>,gvn<>," INSTCOMBINE ",xpj-private-dse,"
    /* x / n and x % n of one index share the division */
    "div-rem-pairs,"
    /* no partial or runtime unrolling: the stride loops that load global
     * memory run four trips at a time already (codegen.c,
     * lower_four_trips), other loops of unknown or large trip count stay
     * rolled, and ptxas unrolls what it finds worth it. Runtime unrolling of every
     * loop made the SASS of those loops 1.1-2x larger and was most of
     * their compile; partial unrolling of large constant trip counts
     * changed two of 95 kernels, one up and one down (docs/benchmarks.md,
     * seventh and eighth sessions of issue 19). -O3 keeps both. LICM
     * again: what the unrolling made invariant in the loop around (four
     * cos of a constant angle, divisions by a parameter) leaves it. */
    "loop-mssa(licm<allowspeculation>),"
    SIMPLIFYCFG("switch-to-arithmetic;hoist-common-insts;sink-common-insts;")
    ")";

/* After the -O2 pipeline: libdevice's functions the kernel still calls,
 * linked, their __nvvm_reflect branches folded (as the NVPTX target's
 * default<O2> does; __CUDA_ARCH already by fold_cuda_arch: the pass
 * would say 0), inlined (all of them are
 * alwaysinline: the always-inliner, without the call-graph inliner's
 * costs), and the result cleaned up once (redundancy such as the range
 * reduction sin and cos of one angle share, the CFG; SROA here changed
 * no kernel's PTX: libdevice's functions keep nothing in memory) */
static const char ptx_late_pipeline[] =
    "nvvm-reflect,always-inline,globaldce,"
    "function(early-cse<>," PLAIN_CFG "," INSTCOMBINE ")";

static bool calls_libdevice(cg *c) {
  for (LLVMValueRef f = LLVMGetFirstFunction(c->mod); f;
       f = LLVMGetNextFunction(f)) {
    size_t n;
    const char *name = LLVMGetValueName2(f, &n);
    if (n > 5 && !memcmp(name, "__nv_", 5) && LLVMGetFirstUse(f))
      return true;
  }
  return false;
}

/* k + s for an integer constant k of `bits` bits, in *out; false when the
 * sum leaves the type's range (unsigned, or signed). */
static bool add_const(LLVMValueRef k, LLVMValueRef s, unsigned bits,
                      bool is_signed, LLVMValueRef *out) {
  if (bits > 64)
    return false;
  if (is_signed) {
    int64_t a = LLVMConstIntGetSExtValue(k), b = LLVMConstIntGetSExtValue(s), r;
    int64_t lo = bits == 64 ? INT64_MIN : -((int64_t)1 << (bits - 1));
    int64_t hi = bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1;
    if (__builtin_add_overflow(a, b, &r) || r < lo || r > hi)
      return false;
    *out = LLVMConstInt(LLVMTypeOf(k), (unsigned long long)r, 1);
  } else {
    uint64_t a = LLVMConstIntGetZExtValue(k), b = LLVMConstIntGetZExtValue(s), r;
    uint64_t hi = bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
    if (__builtin_add_overflow(a, b, &r) || r > hi)
      return false;
    *out = LLVMConstInt(LLVMTypeOf(k), r, 0);
  }
  return true;
}

/* The exit test of a loop latch on the stepped induction variable.
 * InstCombine turns `i + s < k` (the add without wrap) into `i < k - s`:
 * the test then reads i before the step, both stay live, and ptxas no
 * longer counts the loop's trips, so it does not unroll it (NVVM keeps
 * the stepped form: transpose_tiled's tile loops, one load in flight per
 * iteration against NVRTC's four, docs/benchmarks.md "PTX quality").
 * Here `br (icmp P phi, k)` in a block that steps phi by a constant s back
 * to its header becomes `br (icmp P (phi + s), k + s)` where that is the
 * same test and phi + s cannot overflow in the trip that leaves the loop
 * (where the old test did not read it, so a wrap flag on the add would
 * make the new one read poison): for unsigned or signed order, the step
 * has no unsigned or signed wrap and k + 2s fits the type (phi is then
 * within s of k in the last trip: the loop tests the same bound, phi + s
 * against k + s, when it enters each trip); for equality, k + s fits in
 * the sense of each wrap flag the add has (phi is k in the last trip). */
static void stepped_exit_tests(cg *c, LLVMValueRef fn) {
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb;
       bb = LLVMGetNextBasicBlock(bb)) {
    LLVMValueRef br = LLVMGetBasicBlockTerminator(bb);
    if (!br || !LLVMIsABranchInst(br) || !LLVMIsConditional(br))
      continue;
    LLVMValueRef cmp = LLVMGetCondition(br);
    if (!LLVMIsAICmpInst(cmp))
      continue;
    LLVMValueRef phi = LLVMGetOperand(cmp, 0), k = LLVMGetOperand(cmp, 1);
    if (!LLVMIsAPHINode(phi) || !LLVMIsAConstantInt(k))
      continue;
    LLVMBasicBlockRef head = LLVMGetInstructionParent(phi);
    if (LLVMGetSuccessor(br, 0) != head && LLVMGetSuccessor(br, 1) != head)
      continue;
    LLVMValueRef next = NULL;
    for (unsigned i = 0; i < LLVMCountIncoming(phi); i++)
      if (LLVMGetIncomingBlock(phi, i) == bb)
        next = LLVMGetIncomingValue(phi, i);
    if (!next || !LLVMIsAInstruction(next) ||
        LLVMGetInstructionOpcode(next) != LLVMAdd)
      continue;
    LLVMValueRef s = LLVMGetOperand(next, 1);
    if (LLVMGetOperand(next, 0) != phi || !LLVMIsAConstantInt(s))
      continue;
    LLVMIntPredicate p = LLVMGetICmpPredicate(cmp);
    unsigned bits = LLVMGetIntTypeWidth(LLVMTypeOf(k));
    bool is_signed = p == LLVMIntSLT || p == LLVMIntSLE || p == LLVMIntSGT ||
                     p == LLVMIntSGE;
    bool ok;
    LLVMValueRef k2 = NULL, k3 = NULL;
    if (p == LLVMIntEQ || p == LLVMIntNE) /* a bijection of i */
      ok = (k2 = LLVMConstAdd(k, s)) != NULL &&
           (!LLVMGetNUW(next) || add_const(k, s, bits, false, &k3)) &&
           (!LLVMGetNSW(next) || add_const(k, s, bits, true, &k3));
    else
      ok = (is_signed ? LLVMGetNSW(next) : LLVMGetNUW(next)) &&
           add_const(k, s, bits, is_signed, &k2) &&
           add_const(k2, s, bits, is_signed, &k3);
    if (!ok)
      continue;
    LLVMPositionBuilderBefore(c->b, br);
    LLVMSetCondition(br, LLVMBuildICmp(c->b, p, next, k2, ""));
    if (!LLVMGetFirstUse(cmp))
      LLVMInstructionEraseFromParent(cmp);
  }
}

/* Whether v is phi moved by steps: phi, or an add of one such value and a
 * step, at most `depth` adds deep. The steps that are not constants go
 * to steps[*n] (at most 8). */
static bool steps_of(LLVMValueRef v, LLVMValueRef phi, unsigned depth,
                     LLVMValueRef *steps, unsigned *n) {
  if (v == phi)
    return true;
  if (!depth || !LLVMIsAInstruction(v) || LLVMGetInstructionOpcode(v) != LLVMAdd)
    return false;
  for (unsigned k = 0; k < 2; k++) {
    LLVMValueRef s = LLVMGetOperand(v, 1 - k);
    if (steps_of(LLVMGetOperand(v, k), phi, depth - 1, steps, n)) {
      if (!LLVMIsAConstant(s) && *n < 8)
        steps[(*n)++] = s;
      return true;
    }
  }
  return false;
}

/* Every use of v reads freeze(v) instead, placed where v is defined. */
static void freeze_uses(cg *c, LLVMValueRef fn, LLVMValueRef v) {
  LLVMValueRef at;
  if (LLVMIsAInstruction(v)) {
    at = LLVMGetNextInstruction(v);
    while (at && LLVMIsAPHINode(at))
      at = LLVMGetNextInstruction(at);
  } else {
    at = LLVMGetFirstInstruction(LLVMGetEntryBasicBlock(fn));
  }
  if (!at)
    return;
  LLVMPositionBuilderBefore(c->b, at);
  LLVMValueRef f = LLVMBuildFreeze(c->b, v, "");
  LLVMReplaceAllUsesWith(v, f);
  LLVMSetOperand(f, 0, v);
}

/* The steps of the induction variables that are not constants (a grid-
 * or block-stride loop's global_size(0) or local_size(0), a parameter)
 * frozen: freeze(s) is s (a step that is poison would have made the loop's
 * arithmetic poison already), but scalar evolution knows nothing of it,
 * where it knew s = nctaid * ntid with the ranges of both, and spent most
 * of what it cost on that knowledge: proving that each induction variable
 * and address does not wrap, and counting the loop's trips, through the
 * ranges of products of products, again in each pass that asks
 * (IndVarSimplify; loop and straight-line strength reduction, the load and
 * store vectoriser and N-ary reassociation, which the NVPTX target runs
 * before instruction selection). Nothing of the code needed it: the 95
 * example kernels' SASS is the same or smaller (ptxas -O3 sm_90), and
 * their compile up to 30% faster (block_sum, dot: docs/benchmarks.md,
 * issue 19, sixteenth session). Run before the loop passes and again
 * before code generation: InstCombine removes the freezes of values it
 * knows are not poison. */
static void opaque_steps(cg *c, LLVMValueRef fn) {
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb;
       bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef phi = LLVMGetFirstInstruction(bb); phi && LLVMIsAPHINode(phi);
         phi = LLVMGetNextInstruction(phi)) {
      if (LLVMGetTypeKind(LLVMTypeOf(phi)) != LLVMIntegerTypeKind)
        continue;
      for (unsigned i = 0; i < LLVMCountIncoming(phi); i++) {
        LLVMValueRef steps[8];
        unsigned n = 0;
        if (steps_of(LLVMGetIncomingValue(phi, i), phi, 8, steps, &n))
          for (unsigned k = 0; k < n; k++)
            if (!LLVMIsAInstruction(steps[k]) ||
                LLVMGetInstructionOpcode(steps[k]) != LLVMFreeze)
              freeze_uses(c, fn, steps[k]);
      }
    }
}

/* The code generator's own induction variables (codegen.c scaled_index,
 * scaled_pointer): each slot's next value, the add or GEP marked
 * xpjit.scaled, read through llvm.expect (which instruction selection
 * reads as its operand; a pointer through launder.invariant.group), so
 * that scalar evolution sees no recurrence and loop strength reduction
 * leaves them as they are: one add a trip already, where it searched
 * formulae for every address. Not through freeze: scalar evolution sees
 * through a freeze of what it proves is not poison, and an add of a
 * frozen step (opaque_steps) is that. After the -O2 pipeline (whose
 * passes would fold the hint away) and before code generation. */
static void opaque_scaled(cg *c, LLVMValueRef fn) {
  unsigned kind = LLVMGetMDKindIDInContext(c->ctx, "xpjit.scaled", 12);
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb;
       bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i;
         i = LLVMGetNextInstruction(i)) {
      if (!LLVMGetMetadata(i, kind))
        continue;
      bool ptr = LLVMGetTypeKind(LLVMTypeOf(i)) == LLVMPointerTypeKind;
      LLVMValueRef at = LLVMGetNextInstruction(i);
      LLVMPositionBuilderBefore(c->b, at);
      LLVMTypeRef t = LLVMTypeOf(i);
      LLVMValueRef args[2] = {i, LLVMConstInt(t, 0, 0)};
      /* (a pointer: launder.invariant.group, which CodeGenPrepare, after
       * loop strength reduction, replaces by its operand) */
      LLVMValueRef hid =
          ptr ? cg_intrinsic(c, "llvm.launder.invariant.group", &t, 1, args, 1)
              : cg_intrinsic(c, "llvm.expect", &t, 1, args, 2);
      LLVMReplaceAllUsesWith(i, hid);
      LLVMSetOperand(hid, 0, i);
      i = hid;
    }
}

static void ptx_before_loops(cg *c) {
  for (LLVMValueRef f = LLVMGetFirstFunction(c->mod); f; f = LLVMGetNextFunction(f))
    if (LLVMGetFirstBasicBlock(f))
      opaque_steps(c, f);
}

/* What ptxas takes of static .shared in a kernel (0xc000: more only as
 * dynamic shared memory, with an opt-in at launch). */
#define PTX_STATIC_SHARED_MAX 49152u

static void ptx_before_codegen(cg *c) {
  /* refused here, not by ptxas when a process loads the PTX (a bundle
   * built for CUDA would carry it) */
  uint64_t shared = cg_simt_local_bytes(c);
  if (shared > PTX_STATIC_SHARED_MAX) {
    cg_fail(c, XPJ_ERR_UNSUPPORTED, "the kernel's local arrays (and "
            "collectives) take %llu bytes; PTX allows %u (48 KiB) of them "
            "in a kernel", (unsigned long long)shared, PTX_STATIC_SHARED_MAX);
    return;
  }
  c->local_bytes = shared;
  if (c->libdevice_late && calls_libdevice(c)) {
    /* (calls optimised away) */
    link_libdevice(c);
    if (c->status == XPJ_OK)
      cg_run_pipeline(c, ptx_late_pipeline);
  }
  if (c->status == XPJ_OK && c->opts->opt_level > 0)
    for (LLVMValueRef f = LLVMGetFirstFunction(c->mod); f;
         f = LLVMGetNextFunction(f)) {
      stepped_exit_tests(c, f);
      if (LLVMGetFirstBasicBlock(f))
        opaque_scaled(c, f); /* (first: opaque_steps then passes them by) */
      if (c->opts->opt_level == 2 && LLVMGetFirstBasicBlock(f))
        opaque_steps(c, f);
    }
}

const cg_target_ops xpj_target_ptx_ops = {
    .name = "ptx",
    .simt = true,
    .as_global = 1,
    .as_local = 3,
    .rmw_order_by_fences = true,
    .ordered_rmw = ptx_ordered_rmw,
    .kernel_cc = LLVMPTXKernelCallConv,
    .machine = ptx_machine,
    .machine_reusable = true,
    .init_module = ptx_init,
    .wi = ptx_wi,
    .barrier = ptx_barrier,
    .group = ptx_group,
    .syncscope = ptx_scope,
    .math = ptx_math,
    .finish_kernel = ptx_finish,
    .local_param_base = ptx_local_param_base,
    .o2_pipeline = ptx_o2_pipeline,
    .o2_leaf = ptx_o2_leaf,
    .before_loops = ptx_before_loops,
    .o2_loops = ptx_o2_loops,
    .before_codegen = ptx_before_codegen,
    .unroll_load_loops = true,
    .scale_ivs = true,
};
