/*
 * codegen.c - the shared lowering of the typed IR to LLVM IR.
 *
 * One walk over the structured IR emits LLVM IR through the C API. Device
 * functions are inlined as they are called (a frame per call), so views
 * need no calling convention and the CPU can treat barrier code at
 * work-group level.
 *
 * GPU targets (simt): the kernel function is the work-item; returns end it.
 *
 * The CPU: the entry point runs a range of work-items (range kernels) or of
 * work-groups (nd-range kernels). An nd-range kernel body is cut at its
 * barriers into "runs", each executed as a loop over the work-items of the
 * group (the classic work-item loop transformation, done here on structured
 * IR, where barriers can only sit in uniform control flow). Values and
 * variables that live across runs are kept per work-item in the scratch
 * buffer the runtime passes; conditions of uniform branches are read from
 * the last work-item that computed them. See docs/abi.md.
 */
#include "cg.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INLINED 2000000u /* instructions lowered for one kernel */

/* Work-items per chunk of a range kernel run at work-group level: a
 * multiple of any vector width, few enough that the chunk's per-item
 * values stay in the L1 cache. */
#define RANGE_CHUNK 256

enum { NEED_SLOT = 1, NEED_USLOT = 2 };

typedef struct cg_view {
  LLVMValueRef ptr;
  LLVMValueRef shape[XPJ_MAX_RANK], stride[XPJ_MAX_RANK];
  int rank;
  /* GPUs, rank > 1: i1, the view is contiguous and row-major (a flat
   * index is then its offset: no division; lower_index) */
  LLVMValueRef contig;
} cg_view;

/* A view's offset by a loop's variable (var * stride: scaled_index), or
 * the address of its element (scaled_pointer), kept by the code
 * generator in slot */
typedef struct cg_scaled {
  LLVMValueRef stride, slot;
  /* a pointer slot: the element of view `base` (elements et) at indices
   * keyed other[] (other_index) but dim, the variable's */
  LLVMValueRef base;
  uint64_t other[XPJ_MAX_RANK];
  LLVMTypeRef et;
  unsigned dim;
  /* a four-trip loop's copies 1 to 3: k * step * stride further on */
  LLVMValueRef ahead[4];
} cg_scaled;

#define CG_MAX_SCALED 8

/* The slots of a counted loop (the copies of a four-trip loop share one) */
typedef struct cg_slots {
  unsigned n;
  cg_scaled s[CG_MAX_SCALED];
} cg_slots;

typedef struct cg_loopctx {
  LLVMBasicBlockRef brk, cont;
  bool wg;
  /* a counted loop whose variable's offsets into views the code generator
   * keeps itself (scaled_loop); NULL otherwise */
  const xpj_inst *counted;
  xpj_val var;
  LLVMValueRef entry; /* the branch into the loop: where the slots start */
  cg_slots *slots;
  /* copy k of a four-trip loop's body (lower_four_trips): its trips run
   * k * step (step: s) after the slots' */
  unsigned copy;
  LLVMValueRef step;
} cg_loopctx;

struct cg_frame {
  const xpj_func *f;
  cg_frame *parent;
  const xpj_inst *call; /* CALL instruction in parent, NULL for the kernel */
  LLVMValueRef *vals;
  /* CPU: per VAR set once where it is declared and never again (a let
   * binding), the value stored: its loads are that value, so ids are
   * recomputed and values kept in registers rather than reloaded */
  xpj_val *alias;
  cg_view *views;       /* kernel frame: one per parameter */
  /* CPU work-group mode */
  bool wg;
  uint8_t *wgstmt;  /* instruction runs at work-group level */
  uint32_t *run;    /* run of each instruction (0: work-group level) */
  uint8_t *need;    /* NEED_SLOT / NEED_USLOT */
  /* kernel frame: loops interchanged with the work-item loop, and values
   * computed once per group (uniform.c); NULL in device functions */
  const uint8_t *xloop, *uni;
  int64_t *slot;    /* per-work-item region (scratch_alloc), -1 */
  LLVMValueRef *uslot;
  uint32_t cur_run;
  /* returns of inlined device functions */
  LLVMBasicBlockRef ret_bb;
  LLVMValueRef ret_slot;
  int64_t ret_region; /* WG callee with a value: per-work-item result */
  cg_loopctx *loops;
  unsigned nloops, caploops;
};

/* ---- small helpers ------------------------------------------------- */

void cg_fail(cg *c, xpj_status st, const char *fmt, ...) {
  if (c->status != XPJ_OK)
    return;
  c->status = st;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err, sizeof c->err, fmt, ap);
  va_end(ap);
}

bool cg_scalar_is_float(xpj_scalar s) { return xpj_scalar_is_float(s); }
bool cg_scalar_is_signed(xpj_scalar s) {
  return s == XPJ_I8 || s == XPJ_I16 || s == XPJ_I32 || s == XPJ_I64;
}

LLVMTypeRef cg_scalar_type(cg *c, xpj_scalar s) {
  switch (s) {
  case XPJ_BOOL: return c->t_i1;
  case XPJ_I8: case XPJ_U8: return c->t_i8;
  case XPJ_I16: case XPJ_U16: return c->t_i16;
  case XPJ_I32: case XPJ_U32: return c->t_i32;
  case XPJ_I64: case XPJ_U64: return c->t_i64;
  case XPJ_F32: return c->t_f32;
  case XPJ_F64: return c->t_f64;
  case XPJ_F16: return LLVMHalfTypeInContext(c->ctx);
  case XPJ_BF16: return c->t_i16; /* its bits: converted by lower_cast */
  default: return c->t_void;
  }
}

/* In memory a bool is a byte. */
static LLVMTypeRef mem_type(cg *c, xpj_scalar s) {
  return s == XPJ_BOOL ? c->t_i8 : cg_scalar_type(c, s);
}

static unsigned scalar_bytes(xpj_scalar s) {
  unsigned b = xpj_scalar_bits(s);
  return b <= 8 ? 1 : b / 8;
}

LLVMValueRef cg_i64(cg *c, int64_t v) {
  return LLVMConstInt(c->t_i64, (unsigned long long)v, 1);
}
LLVMValueRef cg_i32(cg *c, int32_t v) {
  return LLVMConstInt(c->t_i32, (unsigned long long)(int64_t)v, 1);
}

LLVMValueRef cg_call(cg *c, const char *name, LLVMTypeRef ret,
                     LLVMValueRef *args, unsigned n, LLVMCallConv cc) {
  LLVMTypeRef ps[16];
  for (unsigned i = 0; i < n && i < 16; i++)
    ps[i] = LLVMTypeOf(args[i]);
  LLVMTypeRef ft = LLVMFunctionType(ret, ps, n, 0);
  LLVMValueRef fn = LLVMGetNamedFunction(c->mod, name);
  if (!fn) {
    fn = LLVMAddFunction(c->mod, name, ft);
    LLVMSetFunctionCallConv(fn, cc);
    unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(c->ctx, nounwind, 0));
  }
  LLVMValueRef r = LLVMBuildCall2(c->b, ft, fn, args, n, "");
  LLVMSetInstructionCallConv(r, cc);
  return r;
}

LLVMValueRef cg_intrinsic(cg *c, const char *name, LLVMTypeRef *over,
                          unsigned nover, LLVMValueRef *args, unsigned n) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  if (!id) {
    cg_fail(c, XPJ_ERR_COMPILE, "LLVM has no intrinsic %s", name);
    return LLVMGetUndef(n ? LLVMTypeOf(args[0]) : c->t_i32);
  }
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, over, nover);
  LLVMTypeRef ft = LLVMIntrinsicGetType(c->ctx, id, over, nover);
  return LLVMBuildCall2(c->b, ft, fn, args, n, "");
}

static LLVMValueRef entry_alloca(cg *c, LLVMTypeRef t, const char *name) {
  LLVMBuilderRef eb = LLVMCreateBuilderInContext(c->ctx);
  LLVMValueRef first = LLVMGetFirstInstruction(c->entry_bb);
  if (first)
    LLVMPositionBuilderBefore(eb, first);
  else
    LLVMPositionBuilderAtEnd(eb, c->entry_bb);
  LLVMValueRef a = LLVMBuildAlloca(eb, t, name);
  LLVMDisposeBuilder(eb);
  return a;
}

static LLVMBasicBlockRef new_bb(cg *c, const char *name) {
  return LLVMAppendBasicBlockInContext(c->ctx, c->fn, name);
}

static bool terminated(cg *c) {
  return LLVMGetBasicBlockTerminator(LLVMGetInsertBlock(c->b)) != NULL;
}

static void br(cg *c, LLVMBasicBlockRef to) {
  if (!terminated(c))
    LLVMBuildBr(c->b, to);
}

/* CPU: remembers a loop whose blocks run from first to the last block made
 * so far (cg.h, cg_loop); latch may be NULL when the loop never repeats. */
static void note_loop(cg *c, LLVMBasicBlockRef first, LLVMBasicBlockRef exit,
                      LLVMValueRef latch) {
  if (c->ops->simt || !latch)
    return;
  if (c->ncpu_loops == c->cap_cpu_loops) {
    unsigned cap = c->cap_cpu_loops ? 2 * c->cap_cpu_loops : 16;
    cg_loop *p = realloc(c->cpu_loops, cap * sizeof *p);
    if (!p) {
      cg_fail(c, XPJ_ERR_NOMEM, "out of memory");
      return;
    }
    c->cpu_loops = p;
    c->cap_cpu_loops = cap;
  }
  c->cpu_loops[c->ncpu_loops++] =
      (cg_loop){first, LLVMGetLastBasicBlock(c->fn), exit, latch, false,
                c->strided_copy};
}

/* Fast-math flags on a floating-point instruction: all of them under
 * fast_math; under fp_contract only "contract" (a * b + c may become a
 * fused multiply-add, nothing else changes). */
static void set_fmf(cg *c, LLVMValueRef v) {
  if (!(c->opts->fast_math || c->opts->fp_contract) || !LLVMIsAInstruction(v) ||
      !LLVMCanValueUseFastMathFlags(v))
    return;
  LLVMSetFastMathFlags(v, c->opts->fast_math ? LLVMFastMathAll
                                             : LLVMFastMathAllowContract);
}

static const xpj_typeinfo *tinfo(cg *c, xpj_type t) {
  return xpj_typeinfo_of(c->m, t);
}

static xpj_scalar scalar_of(cg *c, xpj_type t) {
  const xpj_typeinfo *ti = tinfo(c, t);
  if (ti->kind == XPJ_TK_SCALAR)
    return (xpj_scalar)ti->scalar;
  if (ti->kind == XPJ_TK_VIEW || ti->kind == XPJ_TK_STATIC ||
      ti->kind == XPJ_TK_PTR)
    return (xpj_scalar)tinfo(c, ti->elem)->scalar;
  return XPJ_VOID;
}

/* ---- frames -------------------------------------------------------- */

/* Variables stored once, by the statement right after their declaration,
 * and otherwise only loaded: alias[var] = the value stored. */
static void find_aliases(const xpj_func *f, xpj_val *alias) {
  uint32_t *stores = calloc(f->ninsts + 1, sizeof *stores);
  uint8_t *other = calloc(f->ninsts + 1, 1);
  if (!stores || !other) { /* no aliases: correct, only slower */
    free(stores);
    free(other);
    return;
  }
  for (xpj_val u = 1; u < f->ninsts; u++) {
    const xpj_inst *in = &f->insts[u];
    const uint32_t *a = &f->pool[in->args];
    for (uint32_t k = 0; k < in->nargs; k++) {
      if (!a[k] || a[k] >= f->ninsts || f->insts[a[k]].op != XPJ_OP_VAR)
        continue;
      if (k == 0 && in->op == XPJ_OP_STORE)
        stores[a[k]]++;
      else if (!(k == 0 && in->op == XPJ_OP_LOAD))
        other[a[k]] = 1;
    }
  }
  for (xpj_block b = 1; b < f->nblocks; b++) {
    const xpj_blockdata *bd = &f->blocks[b];
    for (uint32_t i = 0; i + 1 < bd->n; i++) {
      xpj_val v = bd->ids[i];
      const xpj_inst *st = &f->insts[bd->ids[i + 1]];
      if (f->insts[v].op == XPJ_OP_VAR && !other[v] && stores[v] == 1 &&
          st->op == XPJ_OP_STORE && f->pool[st->args] == v)
        alias[v] = f->pool[st->args + 1];
    }
  }
  free(stores);
  free(other);
}

/* The value v stands for: a load of an aliased variable is the value
 * stored in it. */
static xpj_val resolve(const cg_frame *fr, xpj_val v) {
  for (unsigned n = 0; n < 64 && v && v < fr->f->ninsts; n++) {
    const xpj_inst *in = &fr->f->insts[v];
    if (in->op != XPJ_OP_LOAD || !fr->alias[fr->f->pool[in->args]])
      break;
    v = fr->alias[fr->f->pool[in->args]];
  }
  return v;
}

/* Whether statement id is the declaration, the one store or a load of an
 * aliased variable: nothing to emit. */
static bool aliased(const cg_frame *fr, xpj_val id) {
  const xpj_inst *in = &fr->f->insts[id];
  switch (in->op) {
  case XPJ_OP_VAR:
    return fr->alias[id] != 0;
  case XPJ_OP_LOAD:
  case XPJ_OP_STORE:
    return fr->alias[fr->f->pool[in->args]] != 0;
  default:
    return false;
  }
}

/* Whether v is computed once per group, before the run it sits in
 * (uniform.c; kernel frames at work-group level only). */
static bool is_uni(const cg_frame *fr, xpj_val v) {
  return fr->uni && fr->uni[v];
}

static cg_frame *frame_new(cg *c, const xpj_func *f, cg_frame *parent,
                           const xpj_inst *call) {
  cg_frame *fr = calloc(1, sizeof *fr);
  if (!fr) {
    cg_fail(c, XPJ_ERR_NOMEM, "out of memory");
    return NULL;
  }
  fr->f = f;
  fr->parent = parent;
  fr->call = call;
  fr->ret_region = -1;
  fr->vals = calloc(f->ninsts + 1, sizeof *fr->vals);
  fr->alias = calloc(f->ninsts + 1, sizeof *fr->alias);
  if (!fr->vals || !fr->alias) {
    free(fr->vals);
    free(fr->alias);
    free(fr);
    cg_fail(c, XPJ_ERR_NOMEM, "out of memory");
    return NULL;
  }
  if (!c->ops->simt)
    find_aliases(f, fr->alias);
  return fr;
}

static void frame_free(cg_frame *fr) {
  if (!fr)
    return;
  free(fr->vals);
  free(fr->alias);
  free(fr->views);
  free(fr->wgstmt);
  free(fr->run);
  free(fr->need);
  free(fr->slot);
  free(fr->uslot);
  free(fr->loops);
  free(fr);
}

static bool push_loop(cg *c, cg_frame *fr, LLVMBasicBlockRef brk,
                      LLVMBasicBlockRef cont, bool wg) {
  if (fr->nloops == fr->caploops) {
    unsigned nc = fr->caploops ? fr->caploops * 2 : 8;
    cg_loopctx *nl = realloc(fr->loops, nc * sizeof *nl);
    if (!nl) {
      cg_fail(c, XPJ_ERR_NOMEM, "out of memory");
      return false;
    }
    fr->loops = nl;
    fr->caploops = nc;
  }
  fr->loops[fr->nloops++] = (cg_loopctx){.brk = brk, .cont = cont, .wg = wg};
  return true;
}

static const xpj_func *callee_of(cg *c, const xpj_inst *in) {
  return c->m->funcs[in->imm.callee];
}

static const uint32_t *args_of(const xpj_func *f, const xpj_inst *in) {
  return &f->pool[in->args];
}

/* Value operands of a CALL skip its type arguments. */
static xpj_val call_arg(const xpj_func *f, const xpj_inst *in, unsigned i) {
  return args_of(f, in)[in->ntargs + i];
}

/* ---- barrier analysis (CPU) ---------------------------------------- */

/* Whether a call holds a barrier (or a work-group collective) at any call
 * depth. A function counts as holding one when a chain of more than
 * BARRIER_CALL_DEPTH calls hangs below it, the bound the analysis has
 * always had (deep call chains are rare; be conservative; the verifier
 * forbids recursion). The answer is computed once per compile for every
 * function of the module (barrier_memo), not by walking the call graph
 * again at each question: a walk takes time exponential in the depth of a
 * chain whose functions call the next one twice, from a small source. */
#define BARRIER_CALL_DEPTH 64

/* Whether block b of f holds a barrier itself (nested blocks included,
 * calls not followed); with calls, appends the callee of each call it
 * holds to calls[0..*n) (growing it; false on out of memory). */
static bool barrier_scan(const xpj_func *f, xpj_block b, bool *direct,
                         uint32_t **calls, size_t *n, size_t *cap) {
  if (!b)
    return true;
  const xpj_blockdata *bd = &f->blocks[b];
  for (uint32_t i = 0; i < bd->n; i++) {
    const xpj_inst *in = &f->insts[bd->ids[i]];
    switch (in->op) {
    case XPJ_OP_BARRIER:
      *direct = true;
      break;
    case XPJ_OP_GROUP: /* a work-group collective synchronises the group */
      if (in->scope == 0)
        *direct = true;
      break;
    case XPJ_OP_CALL:
      if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        uint32_t *p = realloc(*calls, nc * sizeof *p);
        if (!p)
          return false;
        *calls = p;
        *cap = nc;
      }
      (*calls)[(*n)++] = in->imm.callee;
      break;
    case XPJ_OP_IF:
    case XPJ_OP_LOOP:
      for (int k = 0; k < (in->op == XPJ_OP_IF ? 2 : 3); k++)
        if (!barrier_scan(f, in->blk[k], direct, calls, n, cap))
          return false;
      break;
    default:
      break;
    }
  }
  return true;
}

/* c->fbarrier: per function of the module, whether a call to it holds a
 * barrier, as the recursive walk with its depth bound answered it: with
 * has(g, d) = d > BARRIER_CALL_DEPTH || g holds one itself || has(h, d + 1)
 * for a callee h of g, row by row from d = BARRIER_CALL_DEPTH + 1 (all
 * true) down to the callers' d = 0. Each row is contained in the one
 * above it, so two equal rows end it early. Time: the module's size
 * times at most BARRIER_CALL_DEPTH + 2. NULL with cg_fail on out of
 * memory. */
static const uint8_t *barrier_memo(cg *c) {
  if (c->fbarrier)
    return c->fbarrier;
  const xpj_module *m = c->m;
  uint32_t nf = m->nfuncs;
  uint8_t *direct = calloc(nf + 1, 1), *cur = calloc(nf + 1, 1),
          *above = malloc(nf + 1);
  uint32_t *first = calloc(nf + 1, sizeof *first); /* callees of g: */
  uint32_t *calls = NULL;          /* calls[first[g] .. first[g + 1]) */
  size_t ncalls = 0, cap = 0;
  bool ok = direct && cur && above && first;
  for (uint32_t g = 0; g < nf && ok; g++) {
    bool d = false;
    ok = barrier_scan(m->funcs[g], 1, &d, &calls, &ncalls, &cap) &&
         ncalls <= UINT32_MAX;
    direct[g] = d;
    first[g + 1] = (uint32_t)ncalls;
  }
  if (ok) {
    memset(above, 1, nf + 1);
    for (int d = BARRIER_CALL_DEPTH; d >= 0; d--) {
      for (uint32_t g = 0; g < nf; g++) {
        bool has = direct[g];
        for (uint32_t k = first[g]; k < first[g + 1] && !has; k++)
          has = calls[k] >= nf || above[calls[k]];
        cur[g] = has;
      }
      bool same = memcmp(cur, above, nf) == 0;
      uint8_t *t = above; /* above: the row of d */
      above = cur;
      cur = t;
      if (same)
        break;
    }
    c->fbarrier = above;
    above = NULL;
  } else {
    cg_fail(c, XPJ_ERR_NOMEM, "out of memory");
  }
  free(direct);
  free(cur);
  free(above);
  free(first);
  free(calls);
  return c->fbarrier;
}

/* Whether CALL instruction in holds a barrier (at any call depth). */
static bool call_has_barrier(cg *c, const xpj_inst *in) {
  const uint8_t *memo = barrier_memo(c);
  if (!memo || in->imm.callee >= c->m->nfuncs)
    return true; /* out of memory (the compile fails) */
  return memo[in->imm.callee];
}

static bool block_has_barrier(cg *c, const xpj_func *f, xpj_block b);

static bool inst_has_barrier(cg *c, const xpj_func *f, xpj_val id) {
  const xpj_inst *in = &f->insts[id];
  switch (in->op) {
  case XPJ_OP_BARRIER:
    return true;
  case XPJ_OP_GROUP: /* a work-group collective synchronises the group */
    return in->scope == 0;
  case XPJ_OP_CALL:
    return call_has_barrier(c, in);
  case XPJ_OP_IF:
    return block_has_barrier(c, f, in->blk[0]) ||
           block_has_barrier(c, f, in->blk[1]);
  case XPJ_OP_LOOP:
    return block_has_barrier(c, f, in->blk[0]) ||
           block_has_barrier(c, f, in->blk[1]) ||
           block_has_barrier(c, f, in->blk[2]);
  default:
    return false;
  }
}

bool cg_inst_has_barrier(cg *c, const xpj_func *f, xpj_val id) {
  return inst_has_barrier(c, f, id);
}

static bool block_has_barrier(cg *c, const xpj_func *f, xpj_block b) {
  if (!b)
    return false;
  const xpj_blockdata *bd = &f->blocks[b];
  for (uint32_t i = 0; i < bd->n; i++)
    if (inst_has_barrier(c, f, bd->ids[i]))
      return true;
  return false;
}

/* Does block b (outside nested loops) break or continue? */
bool cg_block_exits_loop(const xpj_func *f, xpj_block b) {
  if (!b)
    return false;
  const xpj_blockdata *bd = &f->blocks[b];
  for (uint32_t i = 0; i < bd->n; i++) {
    const xpj_inst *in = &f->insts[bd->ids[i]];
    if (in->op == XPJ_OP_BREAK || in->op == XPJ_OP_CONTINUE)
      return true;
    if (in->op == XPJ_OP_IF &&
        (cg_block_exits_loop(f, in->blk[0]) || cg_block_exits_loop(f, in->blk[1])))
      return true;
  }
  return false;
}

static void mark_wg_block(cg *c, cg_frame *fr, xpj_block b, bool in_wg_loop);

/* Marks the work-group-level statements of a WG-mode block. */
static void mark_wg_block(cg *c, cg_frame *fr, xpj_block b, bool in_wg_loop) {
  const xpj_func *f = fr->f;
  if (!b)
    return;
  const xpj_blockdata *bd = &f->blocks[b];
  for (uint32_t i = 0; i < bd->n; i++) {
    xpj_val id = bd->ids[i];
    const xpj_inst *in = &f->insts[id];
    bool wg = false;
    switch (in->op) {
    case XPJ_OP_BARRIER:
    case XPJ_OP_BREAK:
    case XPJ_OP_CONTINUE:
    case XPJ_OP_RETURN:
      /* terminators directly in a work-group-level block act on the group */
      wg = true;
      break;
    case XPJ_OP_GROUP: /* work-group collectives combine the runs' values */
      wg = in->scope == 0;
      break;
    case XPJ_OP_CALL:
      wg = call_has_barrier(c, in);
      break;
    case XPJ_OP_IF:
      wg = inst_has_barrier(c, f, id) ||
           (in_wg_loop && (cg_block_exits_loop(f, in->blk[0]) ||
                           cg_block_exits_loop(f, in->blk[1])));
      if (wg) {
        mark_wg_block(c, fr, in->blk[0], in_wg_loop);
        mark_wg_block(c, fr, in->blk[1], in_wg_loop);
      }
      break;
    case XPJ_OP_LOOP:
      wg = inst_has_barrier(c, f, id) || (fr->xloop && fr->xloop[id]);
      if (wg)
        for (int k = 0; k < 3; k++)
          mark_wg_block(c, fr, in->blk[k], true);
      break;
    case XPJ_OP_STORE: /* to a variable kept once per group */
      wg = is_uni(fr, id) && !aliased(fr, id);
      break;
    default:
      break;
    }
    fr->wgstmt[id] = wg;
  }
}

static void assign_run_nested(const xpj_func *f, xpj_block b, uint32_t *run,
                              uint32_t r) {
  if (!b)
    return;
  const xpj_blockdata *bd = &f->blocks[b];
  for (uint32_t i = 0; i < bd->n; i++) {
    xpj_val id = bd->ids[i];
    const xpj_inst *in = &f->insts[id];
    run[id] = r;
    for (int k = 0; k < 3; k++)
      if (in->blk[k] && (in->op == XPJ_OP_IF || in->op == XPJ_OP_LOOP))
        assign_run_nested(f, in->blk[k], run, r);
  }
}

static void assign_runs(cg_frame *fr, xpj_block b, uint32_t *next) {
  const xpj_func *f = fr->f;
  if (!b)
    return;
  const xpj_blockdata *bd = &f->blocks[b];
  bool in_run = false;
  for (uint32_t i = 0; i < bd->n; i++) {
    xpj_val id = bd->ids[i];
    const xpj_inst *in = &f->insts[id];
    if (fr->wgstmt[id]) {
      fr->run[id] = 0;
      in_run = false;
      if (in->op == XPJ_OP_IF || in->op == XPJ_OP_LOOP)
        for (int k = 0; k < 3; k++)
          if (in->blk[k])
            assign_runs(fr, in->blk[k], next);
    } else {
      if (!in_run) {
        (*next)++;
        in_run = true;
      }
      fr->run[id] = *next;
      for (int k = 0; k < 3; k++)
        if (in->blk[k] && (in->op == XPJ_OP_IF || in->op == XPJ_OP_LOOP))
          assign_run_nested(f, in->blk[k], fr->run, *next);
    }
  }
}

static bool rematerializable(const xpj_inst *in, const xpj_typeinfo *ti) {
  switch (in->op) {
  case XPJ_OP_CONST:
  case XPJ_OP_PARAM:
    return true;
  case XPJ_OP_ARRAY:
    return ti->space == XPJ_SPACE_LOCAL;
  case XPJ_OP_WI:
    return in->aux != XPJ_WI_GLOBAL_ID && in->aux != XPJ_WI_LOCAL_ID &&
           in->aux != XPJ_WI_GLOBAL_LINEAR_ID &&
           in->aux != XPJ_WI_LOCAL_LINEAR_ID &&
           in->aux != XPJ_WI_SUB_GROUP_ID;
  default:
    return false;
  }
}

static void mark_use(cg_frame *fr, xpj_val user, xpj_val used,
                     uint8_t extra) {
  if (!used || used >= fr->f->ninsts)
    return;
  used = resolve(fr, used);
  if (is_uni(fr, used))
    return; /* computed at work-group level before its users */
  uint32_t ru = fr->run[user], rd = fr->run[used];
  if (ru == 0)
    fr->need[used] |= NEED_USLOT;
  else if (ru != rd)
    fr->need[used] |= NEED_SLOT;
  fr->need[used] |= extra;
}

/* Prepares a frame to be lowered at work-group level (CPU nd-range). */
static bool frame_make_wg(cg *c, cg_frame *fr) {
  const xpj_func *f = fr->f;
  size_t n = f->ninsts + 1;
  fr->wg = true;
  fr->wgstmt = calloc(n, 1);
  fr->run = calloc(n, sizeof *fr->run);
  fr->need = calloc(n, 1);
  fr->slot = malloc(n * sizeof *fr->slot);
  fr->uslot = calloc(n, sizeof *fr->uslot);
  if (!fr->wgstmt || !fr->run || !fr->need || !fr->slot || !fr->uslot) {
    cg_fail(c, XPJ_ERR_NOMEM, "out of memory");
    return false;
  }
  for (size_t i = 0; i < n; i++)
    fr->slot[i] = -1;
  mark_wg_block(c, fr, 1, false);
  uint32_t next = 0;
  assign_runs(fr, 1, &next);
  for (xpj_val v = 1; v < f->ninsts; v++)
    if (is_uni(fr, v))
      fr->run[v] = 0; /* lowered before the run it sits in */
  for (xpj_val u = 1; u < f->ninsts; u++) {
    const xpj_inst *in = &f->insts[u];
    if (in->op == XPJ_OP_NOP)
      continue;
    const uint32_t *a = args_of(f, in);
    unsigned first = in->op == XPJ_OP_CALL ? in->ntargs : 0;
    bool wgcall = (in->op == XPJ_OP_CALL || in->op == XPJ_OP_GROUP) &&
                  fr->wgstmt[u];
    for (unsigned k = first; k < in->nargs; k++)
      mark_use(fr, u, a[k], wgcall ? NEED_SLOT | NEED_USLOT : 0);
    xpj_val cond = in->op == XPJ_OP_LOOP ? resolve(fr, (xpj_val)in->imm.i) : 0;
    if (cond && !is_uni(fr, cond))
      fr->need[cond] |= NEED_USLOT;
    if (in->op == XPJ_OP_RETURN && fr->wgstmt[u] && in->nargs)
      fr->need[resolve(fr, a[0])] |= NEED_SLOT;
  }
  for (xpj_val v = 1; v < f->ninsts; v++) {
    if (rematerializable(&f->insts[v], tinfo(c, f->insts[v].type)) ||
        is_uni(fr, v))
      fr->need[v] = 0;
    else if (f->insts[v].op == XPJ_OP_WI) /* ids: recomputed in each run */
      fr->need[v] &= NEED_USLOT;
  }
  /* ... but the value of a collective is read at work-group level, for
   * every work-item: from its slot */
  for (xpj_val u = 1; u < f->ninsts; u++) {
    const xpj_inst *in = &f->insts[u];
    if (in->op != XPJ_OP_GROUP || !fr->wgstmt[u])
      continue;
    xpj_val x = resolve(fr, args_of(f, in)[0]);
    if (f->insts[x].op == XPJ_OP_WI &&
        !rematerializable(&f->insts[x], tinfo(c, f->insts[x].type)))
      fr->need[x] |= NEED_SLOT;
  }
  return true;
}

/* True when some work-item of the kernel frame may return (at work-item
 * level) before a run that follows: then each work-item needs a
 * "returned" flag that later runs test. A return in the last run, outside
 * any loop that runs at work-group level, needs none. */
static bool returns_before_a_run(const cg_frame *fr) {
  const xpj_func *f = fr->f;
  uint32_t last = 0;
  for (xpj_val v = 1; v < f->ninsts; v++)
    if (fr->run[v] > last)
      last = fr->run[v];
  for (xpj_val v = 1; v < f->ninsts; v++) {
    const xpj_inst *in = &f->insts[v];
    if (in->op != XPJ_OP_RETURN || fr->wgstmt[v])
      continue;
    if (fr->run[v] != last)
      return true;
    for (uint32_t b = in->in_block; b > 1;) {
      uint32_t owner = f->blocks[b].parent;
      if (!owner)
        break;
      if (f->insts[owner].op == XPJ_OP_LOOP && fr->wgstmt[owner])
        return true;
      b = f->insts[owner].in_block;
    }
  }
  return false;
}

/* Allocates a per-work-item region of size bytes (CPU) and returns its
 * number. With a group size known when compiling (c->fixed_items), the
 * region is an array in the entry point's frame, while those fit
 * CG_STACK_REGION_BYTES: it aliases nothing, and the optimiser keeps
 * small ones in registers once the work-item loops are vectorised or
 * unrolled. Otherwise it lives in the runtime's scratch buffer. */
static int64_t scratch_alloc(cg *c, uint64_t size) {
  if (c->nregions == c->capregions) {
    unsigned cap = c->capregions ? 2 * c->capregions : 16;
    cg_region *p = realloc(c->regions, cap * sizeof *p);
    if (!p) {
      cg_fail(c, XPJ_ERR_NOMEM, "out of memory");
      return 0;
    }
    c->regions = p;
    c->capregions = cap;
  }
  cg_region *r = &c->regions[c->nregions];
  *r = (cg_region){-1, NULL};
  uint64_t bytes = (c->fixed_items * size + 63) & ~(uint64_t)63;
  if (c->fixed_items && size <= CG_STACK_REGION_BYTES &&
      bytes <= CG_STACK_REGION_BYTES - c->stack_bytes) {
    c->stack_bytes += bytes;
    LLVMTypeRef t = LLVMArrayType2(c->t_i8, bytes);
    r->stack = entry_alloca(c, t, "per.item");
    LLVMSetAlignment(r->stack, 64);
  } else {
    uint64_t off = (c->scratch_bytes + 15) & ~(uint64_t)15;
    c->scratch_bytes = off + size;
    r->off = (int64_t)off;
  }
  return (int64_t)c->nregions++;
}

/* Address of work-item wi's element of region id. A scratch region is an
 * array of XPJ_CPU_GROUP_MAX elements at a constant offset, so the
 * optimiser sees distinct arrays with unit stride (the extra 16 bytes per
 * offset byte keep the arrays from sharing cache sets). */
static LLVMValueRef scratch_addr(cg *c, int64_t id, uint64_t size,
                                 LLVMValueRef wi) {
  if (id < 0 || (uint64_t)id >= c->nregions) {
    cg_fail(c, XPJ_ERR_COMPILE, "internal: no per-work-item region %lld",
            (long long)id);
    return LLVMGetUndef(c->t_ptr);
  }
  const cg_region *r = &c->regions[id];
  LLVMValueRef at = LLVMBuildNUWMul(c->b, wi, cg_i64(c, (int64_t)size), "");
  if (r->stack)
    return LLVMBuildInBoundsGEP2(c->b, c->t_i8, r->stack, &at, 1, "");
  LLVMValueRef idx = LLVMBuildAdd(
      c->b, cg_i64(c, r->off * XPJ_CPU_SCRATCH_STRIDE), at, "");
  return LLVMBuildInBoundsGEP2(c->b, c->t_i8, c->cpu_scratch, &idx, 1, "");
}

/* The "returned" flag of work-item wi (CPU nd-range kernels with barriers
 * whose work-items may return before a later run). */
static LLVMValueRef flag_addr(cg *c, LLVMValueRef wi) {
  return scratch_addr(c, c->cpu_flags_off, 1, wi);
}

/* ---- values -------------------------------------------------------- */

static LLVMValueRef val(cg *c, cg_frame *fr, xpj_val v);
static cg_view *view_of(cg *c, cg_frame *fr, xpj_val v);
static LLVMValueRef lower_wi(cg *c, xpj_wi w, unsigned d);

static LLVMValueRef const_of(cg *c, const xpj_inst *in) {
  xpj_scalar s = scalar_of(c, in->type);
  LLVMTypeRef t = cg_scalar_type(c, s);
  if (cg_scalar_is_float(s))
    return LLVMConstReal(t, in->aux ? in->imm.f : (double)in->imm.i);
  if (s == XPJ_BF16)
    return LLVMConstInt(t, xpj_bf16_from_double(in->aux ? in->imm.f
                                                      : (double)in->imm.i), 0);
  if (s == XPJ_BOOL)
    return LLVMConstInt(t, in->imm.i != 0, 0);
  return LLVMConstInt(t, (unsigned long long)in->imm.i, 0);
}

static bool is_private_storage(cg *c, const xpj_inst *in) {
  return in->op == XPJ_OP_VAR ||
         (in->op == XPJ_OP_ARRAY &&
          tinfo(c, in->type)->space != XPJ_SPACE_LOCAL);
}

/* Bytes per work-item of a private variable or array: consecutive
 * work-items' copies of a scalar variable are adjacent (unit stride). */
static uint64_t private_bytes(cg *c, const xpj_inst *in) {
  const xpj_typeinfo *ti = tinfo(c, in->type);
  uint64_t n = 1;
  if (in->op == XPJ_OP_ARRAY)
    for (int k = 0; k < ti->rank; k++)
      n *= (uint64_t)ti->dims[k];
  return n * scalar_bytes(scalar_of(c, in->type));
}

static LLVMValueRef val(cg *c, cg_frame *fr, xpj_val v) {
  const xpj_func *f = fr->f;
  v = resolve(fr, v);
  const xpj_inst *in = &f->insts[v];
  if (in->op == XPJ_OP_CONST)
    return const_of(c, in);
  if (in->op == XPJ_OP_PARAM) {
    if (fr->call)
      return val(c, fr->parent, call_arg(fr->parent->f, fr->call, in->aux));
    return fr->vals[v];
  }
  if (in->op == XPJ_OP_WI && !c->ops->simt &&
      (rematerializable(in, tinfo(c, in->type)) ||
       (fr->wg && c->in_wi_run && fr->run[v] != fr->cur_run)))
    return lower_wi(c, (xpj_wi)in->aux, (unsigned)in->imm.i);
  if (fr->wg && fr->slot[v] >= 0 && is_private_storage(c, in)) {
    /* a private variable or array kept per work-item in scratch: its
     * address depends on the work-item being run */
    if (fr->run[v] == fr->cur_run && fr->vals[v])
      return fr->vals[v];
    return scratch_addr(c, fr->slot[v], private_bytes(c, in), c->cpu_wi);
  }
  if (fr->wg && fr->need[v] && fr->run[v] != fr->cur_run) {
    xpj_scalar s = scalar_of(c, in->type);
    bool isptr = tinfo(c, in->type)->kind != XPJ_TK_SCALAR;
    LLVMTypeRef mt = isptr ? c->t_ptr : mem_type(c, s);
    LLVMValueRef r;
    if (c->cur_loop == 0) {
      if (!fr->uslot[v]) {
        cg_fail(c, XPJ_ERR_COMPILE, "internal: no uniform slot for %%%u", v);
        return LLVMGetUndef(isptr ? c->t_ptr : cg_scalar_type(c, s));
      }
      r = LLVMBuildLoad2(c->b, mt, fr->uslot[v], "");
    } else {
      if (fr->slot[v] < 0) {
        cg_fail(c, XPJ_ERR_COMPILE, "internal: no slot for %%%u", v);
        return LLVMGetUndef(isptr ? c->t_ptr : cg_scalar_type(c, s));
      }
      uint64_t size = isptr ? 8 : scalar_bytes(s);
      r = LLVMBuildLoad2(c->b, mt,
                         scratch_addr(c, fr->slot[v], size, c->cpu_wi), "");
    }
    if (!isptr && s == XPJ_BOOL)
      r = LLVMBuildTrunc(c->b, r, c->t_i1, "");
    return r;
  }
  if (!fr->vals[v]) {
    cg_fail(c, XPJ_ERR_COMPILE, "internal: value %%%u of %s used before "
            "it was lowered", v, f->name);
    return LLVMGetUndef(c->t_i64);
  }
  return fr->vals[v];
}

/* Stores a freshly defined value where later runs will look for it. */
static void def(cg *c, cg_frame *fr, xpj_val v, LLVMValueRef x) {
  fr->vals[v] = x;
  if (!fr->wg || !fr->need[v] || !x)
    return;
  const xpj_inst *in = &fr->f->insts[v];
  xpj_scalar s = scalar_of(c, in->type);
  bool isptr = tinfo(c, in->type)->kind != XPJ_TK_SCALAR;
  LLVMValueRef st = x;
  if (!isptr && s == XPJ_BOOL)
    st = LLVMBuildZExt(c->b, x, c->t_i8, "");
  LLVMTypeRef mt = isptr ? c->t_ptr : mem_type(c, s);
  uint64_t size = isptr ? 8 : scalar_bytes(s);
  if (fr->need[v] & NEED_USLOT) {
    if (!fr->uslot[v])
      fr->uslot[v] = entry_alloca(c, mt, "uniform");
    LLVMBuildStore(c->b, st, fr->uslot[v]);
  }
  if ((fr->need[v] & NEED_SLOT) && c->cur_loop) {
    if (fr->slot[v] < 0)
      fr->slot[v] = scratch_alloc(c, size);
    LLVMBuildStore(c->b, st, scratch_addr(c, fr->slot[v], size, c->cpu_wi));
  }
}

static cg_view *view_of(cg *c, cg_frame *fr, xpj_val v) {
  const xpj_inst *in = &fr->f->insts[v];
  if (in->op != XPJ_OP_PARAM) {
    cg_fail(c, XPJ_ERR_COMPILE, "internal: view operand is not a parameter");
    return NULL;
  }
  if (fr->call)
    return view_of(c, fr->parent, call_arg(fr->parent->f, fr->call, in->aux));
  return &fr->views[in->aux];
}

static LLVMValueRef to_i64(cg *c, LLVMValueRef x, xpj_scalar s) {
  LLVMTypeRef t = LLVMTypeOf(x);
  if (t == c->t_i64)
    return x;
  if (s == XPJ_BOOL || !cg_scalar_is_signed(s))
    return LLVMBuildZExt(c->b, x, c->t_i64, "");
  return LLVMBuildSExt(c->b, x, c->t_i64, "");
}

/* ---- work-items ---------------------------------------------------- */

/* Work-item queries take a logical dimension d; targets and the CPU's
 * loops are in hardware order (c->hw_dim). Linear ids are row-major over
 * the logical dimensions (the last fastest), whatever the hardware order. */
static LLVMValueRef hw_wi(cg *c, xpj_wi w, unsigned h) {
  if (!c->ops->simt) {
    switch (w) {
    case XPJ_WI_GLOBAL_ID: return c->cpu_gid[h];
    case XPJ_WI_GLOBAL_SIZE: return c->cpu_launch[h];
    case XPJ_WI_LOCAL_ID: return c->cpu_lid[h];
    case XPJ_WI_LOCAL_SIZE: return c->cpu_launch[3 + h];
    case XPJ_WI_GROUP_ID: return c->cpu_grp[h];
    case XPJ_WI_NUM_GROUPS: return c->cpu_launch[6 + h];
    default: return cg_i64(c, 0);
    }
  }
  if (c->kernel->kind == XPJ_FUNC_RANGE && w == XPJ_WI_GLOBAL_SIZE)
    return c->range_size[h];
  return c->ops->wi(c, w, h);
}

/* True when hardware order is the reverse of logical order over every
 * dimension that can exceed 1, so a hardware-order linear id (0 fastest)
 * is the logical row-major one. Nd-range kernels and range kernels of a
 * declared rank always; other range kernels can be launched with more
 * dimensions than they read. */
static bool linear_is_hw(cg *c) { return c->kernel->dims != 0; }

static LLVMValueRef lower_wi(cg *c, xpj_wi w, unsigned d) {
  bool cpu = !c->ops->simt;
  if (cpu) { /* the CPU's sub-groups are single work-items */
    switch (w) {
    case XPJ_WI_SUB_GROUP_SIZE: return cg_i64(c, 1);
    case XPJ_WI_SUB_GROUP_LOCAL_ID: return cg_i64(c, 0);
    case XPJ_WI_SUB_GROUP_ID: return c->cpu_wi;
    case XPJ_WI_NUM_SUB_GROUPS: return c->cpu_wgs;
    default: break;
    }
  } else if (w >= XPJ_WI_SUB_GROUP_SIZE) {
    return c->ops->wi(c, w, 0);
  }
  if (w == XPJ_WI_GLOBAL_LINEAR_ID || w == XPJ_WI_LOCAL_LINEAR_ID ||
      w == XPJ_WI_GROUP_LINEAR_ID) {
    if (cpu && w == XPJ_WI_LOCAL_LINEAR_ID)
      return c->cpu_wi;
    if (cpu && w == XPJ_WI_GROUP_LINEAR_ID)
      return c->cpu_grp_linear;
    if (cpu && linear_is_hw(c))
      return c->cpu_glinear;
    xpj_wi idk = w == XPJ_WI_GLOBAL_LINEAR_ID  ? XPJ_WI_GLOBAL_ID
                 : w == XPJ_WI_LOCAL_LINEAR_ID ? XPJ_WI_LOCAL_ID
                                               : XPJ_WI_GROUP_ID;
    xpj_wi szk = w == XPJ_WI_GLOBAL_LINEAR_ID  ? XPJ_WI_GLOBAL_SIZE
                 : w == XPJ_WI_LOCAL_LINEAR_ID ? XPJ_WI_LOCAL_SIZE
                                               : XPJ_WI_NUM_GROUPS;
    LLVMValueRef r = hw_wi(c, idk, c->hw_dim[0]);
    for (unsigned k = 1; k < 3; k++)
      r = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, r, hw_wi(c, szk, c->hw_dim[k]), ""),
                       hw_wi(c, idk, c->hw_dim[k]), "");
    return r;
  }
  return hw_wi(c, w, c->hw_dim[d > 2 ? 0 : d]);
}

/* Hardware-order linear id (dimension 0 fastest) of the CPU's loops. */
static LLVMValueRef linear3(cg *c, LLVMValueRef id[3], LLVMValueRef sz[3]) {
  LLVMValueRef r = LLVMBuildMul(c->b, id[2], sz[1], "");
  r = LLVMBuildAdd(c->b, r, id[1], "");
  r = LLVMBuildMul(c->b, r, sz[0], "");
  return LLVMBuildAdd(c->b, r, id[0], "");
}

/* ---- arithmetic ---------------------------------------------------- */

static LLVMValueRef intr1(cg *c, const char *name, LLVMValueRef a);

static LLVMValueRef lower_binop(cg *c, xpj_binop op, xpj_scalar s,
                                LLVMValueRef a, LLVMValueRef b) {
  LLVMBuilderRef B = c->b;
  bool fl = cg_scalar_is_float(s), sg = cg_scalar_is_signed(s);
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef r = NULL;
  switch (op) {
  case XPJ_ADD: r = fl ? LLVMBuildFAdd(B, a, b, "") : LLVMBuildAdd(B, a, b, ""); break;
  case XPJ_SUB: r = fl ? LLVMBuildFSub(B, a, b, "") : LLVMBuildSub(B, a, b, ""); break;
  case XPJ_MUL: r = fl ? LLVMBuildFMul(B, a, b, "") : LLVMBuildMul(B, a, b, ""); break;
  case XPJ_DIV:
  case XPJ_REM:
    if (fl) {
      r = op == XPJ_DIV ? LLVMBuildFDiv(B, a, b, "") : LLVMBuildFRem(B, a, b, "");
      break;
    } else {
      /* never trap: divide by 1 instead of 0 and instead of MIN / -1 */
      LLVMValueRef zero = LLVMConstInt(t, 0, 0), one = LLVMConstInt(t, 1, 0);
      LLVMValueRef bad = LLVMBuildICmp(B, LLVMIntEQ, b, zero, "");
      if (sg) {
        unsigned bits = LLVMGetIntTypeWidth(t);
        LLVMValueRef minv = LLVMConstInt(t, 1ull << (bits - 1), 0);
        LLVMValueRef m1 = LLVMConstAllOnes(t);
        LLVMValueRef ov = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntEQ, a, minv, ""),
                                       LLVMBuildICmp(B, LLVMIntEQ, b, m1, ""), "");
        bad = LLVMBuildOr(B, bad, ov, "");
      }
      LLVMValueRef d = LLVMBuildSelect(B, bad, one, b, "");
      if (op == XPJ_DIV)
        r = sg ? LLVMBuildSDiv(B, a, d, "") : LLVMBuildUDiv(B, a, d, "");
      else
        r = sg ? LLVMBuildSRem(B, a, d, "") : LLVMBuildURem(B, a, d, "");
    }
    break;
  case XPJ_AND: r = LLVMBuildAnd(B, a, b, ""); break;
  case XPJ_OR: r = LLVMBuildOr(B, a, b, ""); break;
  case XPJ_XOR: r = LLVMBuildXor(B, a, b, ""); break;
  case XPJ_SHL:
  case XPJ_SHR: {
    unsigned bits = LLVMGetIntTypeWidth(t);
    LLVMValueRef n = LLVMBuildAnd(B, b, LLVMConstInt(t, bits - 1, 0), "");
    if (op == XPJ_SHL)
      r = LLVMBuildShl(B, a, n, "");
    else
      r = sg ? LLVMBuildAShr(B, a, n, "") : LLVMBuildLShr(B, a, n, "");
    break;
  }
  case XPJ_EQ: case XPJ_NE: case XPJ_LT: case XPJ_LE: case XPJ_GT: case XPJ_GE:
    if (fl) {
      static const LLVMRealPredicate fp[] = {LLVMRealOEQ, LLVMRealUNE,
                                             LLVMRealOLT, LLVMRealOLE,
                                             LLVMRealOGT, LLVMRealOGE};
      r = LLVMBuildFCmp(B, fp[op - XPJ_EQ], a, b, "");
    } else {
      static const LLVMIntPredicate sp[] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLT,
                                            LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
      static const LLVMIntPredicate up[] = {LLVMIntEQ, LLVMIntNE, LLVMIntULT,
                                            LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
      r = LLVMBuildICmp(B, (sg ? sp : up)[op - XPJ_EQ], a, b, "");
    }
    break;
  default:
    cg_fail(c, XPJ_ERR_COMPILE, "internal: bad binary operator %d", (int)op);
    return a;
  }
  set_fmf(c, r);
  return r;
}

/* bf16 is held as its bits (i16) on every target: LLVM's bfloat has no
 * libgcc helpers on Debian 12 and Intel's SPIR-V reader refuses it. */
static LLVMValueRef bf16_to_f32(cg *c, LLVMValueRef x) {
  LLVMValueRef w = LLVMBuildZExt(c->b, x, c->t_i32, "");
  w = LLVMBuildShl(c->b, w, cg_i32(c, 16), "");
  return LLVMBuildBitCast(c->b, w, c->t_f32, "");
}

/* f32 to bf16 rounded to nearest even; a NaN stays a (quiet) NaN */
static LLVMValueRef f32_to_bf16(cg *c, LLVMValueRef x) {
  LLVMBuilderRef B = c->b;
  LLVMValueRef w = LLVMBuildBitCast(B, x, c->t_i32, "");
  LLVMValueRef hi = LLVMBuildLShr(B, w, cg_i32(c, 16), "");
  LLVMValueRef lsb = LLVMBuildAnd(B, hi, cg_i32(c, 1), "");
  LLVMValueRef r = LLVMBuildAdd(B, w, LLVMBuildAdd(B, lsb, cg_i32(c, 0x7fff), ""), "");
  r = LLVMBuildLShr(B, r, cg_i32(c, 16), "");
  LLVMValueRef nan = LLVMBuildFCmp(B, LLVMRealUNO, x, x, "");
  r = LLVMBuildSelect(B, nan, LLVMBuildOr(B, hi, cg_i32(c, 0x40), ""), r, "");
  return LLVMBuildTrunc(B, r, c->t_i16, "");
}

/* f64 to bf16 rounded once: first to f32 rounded to odd (toward zero, the
 * lowest bit set when inexact), which keeps what the second rounding
 * needs; fptrunc rounds to nearest, stepped back by one ulp where it went
 * up in magnitude. */
static LLVMValueRef f64_to_bf16(cg *c, LLVMValueRef x) {
  LLVMBuilderRef B = c->b;
  LLVMValueRef t = LLVMBuildFPTrunc(B, x, c->t_f32, "");
  LLVMValueRef back = LLVMBuildFPExt(B, t, c->t_f64, "");
  LLVMValueRef up = LLVMBuildFCmp(B, LLVMRealOGT, intr1(c, "llvm.fabs", back),
                                  intr1(c, "llvm.fabs", x), "");
  LLVMValueRef inexact = LLVMBuildFCmp(B, LLVMRealONE, back, x, "");
  LLVMValueRef w = LLVMBuildBitCast(B, t, c->t_i32, "");
  w = LLVMBuildSelect(B, up, LLVMBuildSub(B, w, cg_i32(c, 1), ""), w, "");
  w = LLVMBuildSelect(B, inexact, LLVMBuildOr(B, w, cg_i32(c, 1), ""), w, "");
  return f32_to_bf16(c, LLVMBuildBitCast(B, w, c->t_f32, ""));
}

static LLVMValueRef lower_cast(cg *c, LLVMValueRef x, xpj_scalar from,
                               xpj_scalar to) {
  LLVMBuilderRef B = c->b;
  LLVMTypeRef tt = cg_scalar_type(c, to);
  if (from == to)
    return x;
  if (from == XPJ_BF16) /* exact in f32 */
    return lower_cast(c, bf16_to_f32(c, x), XPJ_F32, to);
  if (to == XPJ_BF16) {
    /* through f32 where that is exact, else through f64 (one rounding;
     * integers beyond 2^53 round twice) */
    bool wide = from == XPJ_F64 || (!cg_scalar_is_float(from) &&
                                    xpj_scalar_bits(from) >= 32);
    if (wide)
      return f64_to_bf16(c, lower_cast(c, x, from, XPJ_F64));
    return f32_to_bf16(c, lower_cast(c, x, from, XPJ_F32));
  }
  bool ff = cg_scalar_is_float(from), tf = cg_scalar_is_float(to);
  if (to == XPJ_BOOL) {
    if (ff)
      return LLVMBuildFCmp(B, LLVMRealUNE, x, LLVMConstReal(LLVMTypeOf(x), 0), "");
    return LLVMBuildICmp(B, LLVMIntNE, x, LLVMConstInt(LLVMTypeOf(x), 0, 0), "");
  }
  if (from == XPJ_BOOL)
    return tf ? LLVMBuildUIToFP(B, x, tt, "") : LLVMBuildZExt(B, x, tt, "");
  if (ff && tf)
    return xpj_scalar_bits(to) > xpj_scalar_bits(from)
               ? LLVMBuildFPExt(B, x, tt, "")
               : LLVMBuildFPTrunc(B, x, tt, "");
  if (ff) {
    /* out-of-range conversions are unspecified, never poison */
    LLVMValueRef r = cg_scalar_is_signed(to) ? LLVMBuildFPToSI(B, x, tt, "")
                                             : LLVMBuildFPToUI(B, x, tt, "");
    return LLVMBuildFreeze(B, r, "");
  }
  if (tf)
    return cg_scalar_is_signed(from) ? LLVMBuildSIToFP(B, x, tt, "")
                                     : LLVMBuildUIToFP(B, x, tt, "");
  unsigned fb = xpj_scalar_bits(from), tb = xpj_scalar_bits(to);
  if (tb < fb)
    return LLVMBuildTrunc(B, x, tt, "");
  if (tb > fb)
    return cg_scalar_is_signed(from) ? LLVMBuildSExt(B, x, tt, "")
                                     : LLVMBuildZExt(B, x, tt, "");
  return x;
}

/* ---- math ---------------------------------------------------------- */

static LLVMValueRef intr1(cg *c, const char *name, LLVMValueRef a) {
  LLVMTypeRef t = LLVMTypeOf(a);
  return cg_intrinsic(c, name, &t, 1, &a, 1);
}
static LLVMValueRef intr2(cg *c, const char *name, LLVMValueRef a,
                          LLVMValueRef b) {
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef args[2] = {a, b};
  return cg_intrinsic(c, name, &t, 1, args, 2);
}

/* Calls libm (CPU) for functions LLVM has no intrinsic for. */
static LLVMValueRef libm(cg *c, const char *name, xpj_scalar s,
                         LLVMValueRef *a, unsigned n) {
  char buf[32];
  snprintf(buf, sizeof buf, "%s%s", name, s == XPJ_F32 ? "f" : "");
  return cg_call(c, buf, cg_scalar_type(c, s), a, n, LLVMCCallConv);
}

static LLVMValueRef lower_math_generic(cg *c, xpj_math m, xpj_scalar s,
                                       LLVMValueRef *a, unsigned n) {
  LLVMBuilderRef B = c->b;
  LLVMTypeRef t = cg_scalar_type(c, s);
  bool fl = cg_scalar_is_float(s), sg = cg_scalar_is_signed(s);
  switch (m) {
  case XPJ_MATH_SQRT: return intr1(c, "llvm.sqrt", a[0]);
  case XPJ_MATH_RSQRT: {
    LLVMValueRef r = LLVMBuildFDiv(B, LLVMConstReal(t, 1.0),
                                   intr1(c, "llvm.sqrt", a[0]), "");
    return r;
  }
  case XPJ_MATH_EXP: return intr1(c, "llvm.exp", a[0]);
  case XPJ_MATH_EXP2: return intr1(c, "llvm.exp2", a[0]);
  case XPJ_MATH_LOG: return intr1(c, "llvm.log", a[0]);
  case XPJ_MATH_LOG2: return intr1(c, "llvm.log2", a[0]);
  case XPJ_MATH_LOG10: return intr1(c, "llvm.log10", a[0]);
  case XPJ_MATH_POW: return intr2(c, "llvm.pow", a[0], a[1]);
  case XPJ_MATH_SIN: return intr1(c, "llvm.sin", a[0]);
  case XPJ_MATH_COS: return intr1(c, "llvm.cos", a[0]);
  case XPJ_MATH_TAN: return intr1(c, "llvm.tan", a[0]);
  case XPJ_MATH_ASIN: return intr1(c, "llvm.asin", a[0]);
  case XPJ_MATH_ACOS: return intr1(c, "llvm.acos", a[0]);
  case XPJ_MATH_ATAN: return intr1(c, "llvm.atan", a[0]);
  case XPJ_MATH_ATAN2: return intr2(c, "llvm.atan2", a[0], a[1]);
  case XPJ_MATH_SINH: return intr1(c, "llvm.sinh", a[0]);
  case XPJ_MATH_COSH: return intr1(c, "llvm.cosh", a[0]);
  case XPJ_MATH_TANH: return intr1(c, "llvm.tanh", a[0]);
  case XPJ_MATH_CBRT: return libm(c, "cbrt", s, a, 1);
  case XPJ_MATH_ERF: return libm(c, "erf", s, a, 1);
  case XPJ_MATH_ERFC: return libm(c, "erfc", s, a, 1);
  case XPJ_MATH_TGAMMA: return libm(c, "tgamma", s, a, 1);
  case XPJ_MATH_LGAMMA: { /* lgamma_r: lgamma writes the global signgam */
    LLVMValueRef args[2] = {a[0], entry_alloca(c, c->t_i32, "signgam")};
    return cg_call(c, s == XPJ_F32 ? "lgammaf_r" : "lgamma_r", t, args, 2,
                   LLVMCCallConv);
  }
  case XPJ_MATH_EXPM1: return libm(c, "expm1", s, a, 1);
  case XPJ_MATH_LOG1P: return libm(c, "log1p", s, a, 1);
  case XPJ_MATH_HYPOT: return libm(c, "hypot", s, a, 2);
  case XPJ_MATH_FABS: return intr1(c, "llvm.fabs", a[0]);
  case XPJ_MATH_FLOOR: return intr1(c, "llvm.floor", a[0]);
  case XPJ_MATH_CEIL: return intr1(c, "llvm.ceil", a[0]);
  case XPJ_MATH_ROUND: return intr1(c, "llvm.round", a[0]);
  case XPJ_MATH_TRUNC: return intr1(c, "llvm.trunc", a[0]);
  case XPJ_MATH_FMA: {
    LLVMTypeRef tt = LLVMTypeOf(a[0]);
    return cg_intrinsic(c, "llvm.fma", &tt, 1, a, 3);
  }
  case XPJ_MATH_FMIN: return intr2(c, "llvm.minnum", a[0], a[1]);
  case XPJ_MATH_FMAX: return intr2(c, "llvm.maxnum", a[0], a[1]);
  case XPJ_MATH_COPYSIGN: return intr2(c, "llvm.copysign", a[0], a[1]);
  case XPJ_MATH_ISNAN: return LLVMBuildFCmp(B, LLVMRealUNO, a[0], a[0], "");
  case XPJ_MATH_ISINF:
    return LLVMBuildFCmp(B, LLVMRealOEQ, intr1(c, "llvm.fabs", a[0]),
                         LLVMConstReal(t, __builtin_inf()), "");
  case XPJ_MATH_ISFINITE:
    return LLVMBuildFCmp(B, LLVMRealOLT, intr1(c, "llvm.fabs", a[0]),
                         LLVMConstReal(t, __builtin_inf()), "");
  case XPJ_MATH_MIN:
    return fl ? intr2(c, "llvm.minnum", a[0], a[1])
              : intr2(c, sg ? "llvm.smin" : "llvm.umin", a[0], a[1]);
  case XPJ_MATH_MAX:
    return fl ? intr2(c, "llvm.maxnum", a[0], a[1])
              : intr2(c, sg ? "llvm.smax" : "llvm.umax", a[0], a[1]);
  case XPJ_MATH_CLAMP: {
    LLVMValueRef lo = fl ? intr2(c, "llvm.maxnum", a[0], a[1])
                         : intr2(c, sg ? "llvm.smax" : "llvm.umax", a[0], a[1]);
    return fl ? intr2(c, "llvm.minnum", lo, a[2])
              : intr2(c, sg ? "llvm.smin" : "llvm.umin", lo, a[2]);
  }
  case XPJ_MATH_ABS:
    if (fl)
      return intr1(c, "llvm.fabs", a[0]);
    if (!sg)
      return a[0];
    return intr2(c, "llvm.abs", a[0], LLVMConstInt(c->t_i1, 0, 0));
  case XPJ_MATH_POPCOUNT: return intr1(c, "llvm.ctpop", a[0]);
  case XPJ_MATH_CLZ:
    return intr2(c, "llvm.ctlz", a[0], LLVMConstInt(c->t_i1, 0, 0));
  case XPJ_MATH_CTZ:
    return intr2(c, "llvm.cttz", a[0], LLVMConstInt(c->t_i1, 0, 0));
  case XPJ_MATH_MUL_HI: {
    unsigned bits = LLVMGetIntTypeWidth(t);
    LLVMTypeRef wt = LLVMIntTypeInContext(c->ctx, bits * 2);
    LLVMValueRef x = sg ? LLVMBuildSExt(B, a[0], wt, "") : LLVMBuildZExt(B, a[0], wt, "");
    LLVMValueRef y = sg ? LLVMBuildSExt(B, a[1], wt, "") : LLVMBuildZExt(B, a[1], wt, "");
    LLVMValueRef p = LLVMBuildMul(B, x, y, "");
    p = LLVMBuildLShr(B, p, LLVMConstInt(wt, bits, 0), "");
    return LLVMBuildTrunc(B, p, t, "");
  }
  case XPJ_MATH_ROTL:
  case XPJ_MATH_ROTR: {
    LLVMValueRef args[3] = {a[0], a[0], a[1]};
    return cg_intrinsic(c, m == XPJ_MATH_ROTL ? "llvm.fshl" : "llvm.fshr", &t,
                        1, args, 3);
  }
  default:
    cg_fail(c, XPJ_ERR_COMPILE, "internal: bad math builtin %d", (int)m);
    return a[0];
  }
}

static LLVMValueRef lower_math(cg *c, xpj_math m, xpj_scalar s,
                               LLVMValueRef *a, unsigned n) {
  LLVMValueRef r = NULL;
  if (s == XPJ_F16 && m == XPJ_MATH_FMA) {
    /* rounded once: PTX's fma.rn.f16, OpenCL's fma(half); x86 LLVM does
     * it in f64, whose fma is exact enough for any f16 result */
    LLVMTypeRef t = cg_scalar_type(c, s);
    r = cg_intrinsic(c, "llvm.fma", &t, 1, a, 3);
    set_fmf(c, r);
    return r;
  }
  if (s == XPJ_F16) {
    /* evaluated in f32, rounded to f16 (CUDA's half functions do the
     * same; no target has all of them for half) */
    LLVMValueRef w[3];
    for (unsigned i = 0; i < n && i < 3; i++)
      w[i] = LLVMBuildFPExt(c->b, a[i], c->t_f32, "");
    r = lower_math(c, m, XPJ_F32, w, n);
    return LLVMTypeOf(r) == c->t_f32
               ? LLVMBuildFPTrunc(c->b, r, cg_scalar_type(c, s), "")
               : r;
  }
  if (c->ops->math)
    r = c->ops->math(c, m, s, a, n);
  if (!r)
    r = lower_math_generic(c, m, s, a, n);
  set_fmf(c, r);
  return r;
}

/* ---- collectives --------------------------------------------------- */

LLVMValueRef cg_group_identity(cg *c, xpj_group_op op, xpj_scalar s) {
  LLVMTypeRef t = cg_scalar_type(c, s);
  bool fl = cg_scalar_is_float(s), sg = cg_scalar_is_signed(s);
  unsigned bits = fl ? 0 : LLVMGetIntTypeWidth(t);
  switch (op) {
  case XPJ_GOP_MUL:
    return fl ? LLVMConstReal(t, 1.0) : LLVMConstInt(t, 1, 0);
  case XPJ_GOP_MIN: /* the largest value */
    if (fl)
      return LLVMConstReal(t, __builtin_inf());
    return sg ? LLVMConstInt(t, (UINT64_C(1) << (bits - 1)) - 1, 0)
              : LLVMConstAllOnes(t);
  case XPJ_GOP_MAX: /* the smallest */
    if (fl)
      return LLVMConstReal(t, -__builtin_inf());
    return sg ? LLVMConstInt(t, UINT64_C(1) << (bits - 1), 0)
              : LLVMConstNull(t);
  case XPJ_GOP_AND:
    return LLVMConstAllOnes(t);
  default: /* add, or, xor */
    return LLVMConstNull(t);
  }
}

LLVMValueRef cg_group_combine(cg *c, xpj_group_op op, xpj_scalar s,
                              LLVMValueRef a, LLVMValueRef b) {
  LLVMBuilderRef B = c->b;
  bool fl = cg_scalar_is_float(s);
  LLVMValueRef ab[2] = {a, b};
  switch (op) {
  case XPJ_GOP_ADD:
  case XPJ_GOP_MUL: {
    LLVMValueRef r = op == XPJ_GOP_ADD
                         ? (fl ? LLVMBuildFAdd(B, a, b, "") : LLVMBuildAdd(B, a, b, ""))
                         : (fl ? LLVMBuildFMul(B, a, b, "") : LLVMBuildMul(B, a, b, ""));
    set_fmf(c, r);
    return r;
  }
  case XPJ_GOP_MIN: return lower_math(c, XPJ_MATH_MIN, s, ab, 2);
  case XPJ_GOP_MAX: return lower_math(c, XPJ_MATH_MAX, s, ab, 2);
  case XPJ_GOP_AND: return LLVMBuildAnd(B, a, b, "");
  case XPJ_GOP_OR: return LLVMBuildOr(B, a, b, "");
  case XPJ_GOP_XOR: return LLVMBuildXor(B, a, b, "");
  default:
    cg_fail(c, XPJ_ERR_COMPILE, "internal: collective operation %d", (int)op);
    return a;
  }
}

/* A collective outside the CPU's work-group level: the target's (SIMT), or
 * a sub-group one on the CPU, whose sub-groups are single work-items. */
static LLVMValueRef lower_group(cg *c, cg_frame *fr, const xpj_inst *in) {
  const uint32_t *a = args_of(fr->f, in);
  xpj_scalar s = scalar_of(c, in->type);
  xpj_coll_desc d = {in->scope, (xpj_coll)in->aux, (xpj_group_op)in->order};
  LLVMValueRef x = val(c, fr, a[0]), id = NULL;
  if (in->nargs > 1)
    id = to_i64(c, val(c, fr, a[1]), scalar_of(c, fr->f->insts[a[1]].type));
  if (c->ops->simt) {
    if (c->ops->group && (s == XPJ_F16 || s == XPJ_BF16)) {
      /* 16-bit floats: f16 combined in f32 and rounded once; moved as
       * their bits */
      bool combine = s == XPJ_F16 && d.kind < XPJ_COLL_BROADCAST;
      LLVMTypeRef wt = combine ? c->t_f32 : c->t_i16;
      LLVMValueRef w = combine ? LLVMBuildFPExt(c->b, x, wt, "")
                               : LLVMBuildBitCast(c->b, x, wt, "");
      w = c->ops->group(c, &d, combine ? XPJ_F32 : XPJ_U16, w, id);
      return combine ? LLVMBuildFPTrunc(c->b, w, LLVMTypeOf(x), "")
                     : LLVMBuildBitCast(c->b, w, LLVMTypeOf(x), "");
    }
    if (c->ops->group)
      return c->ops->group(c, &d, s, x, id);
    char nm[64];
    xpj_coll_name(&d, nm, sizeof nm);
    cg_fail(c, XPJ_ERR_UNSUPPORTED, "%s() is not supported on target %s", nm,
            c->ops->name);
    return x;
  }
  if (!d.sub_group) {
    cg_fail(c, XPJ_ERR_COMPILE, "internal: work-group collective outside "
            "work-group level");
    return x;
  }
  return d.kind == XPJ_COLL_SCAN_EXCL ? cg_group_identity(c, d.op, s) : x;
}

/* ---- memory -------------------------------------------------------- */

/* comp[dim], or 0 for a dim outside 0 .. rank - 1 (as a constant one
 * folds to: comp[0] before, a silent answer of another dimension). */
static LLVMValueRef select_dim(cg *c, LLVMValueRef *comp, int rank,
                               LLVMValueRef dim) {
  LLVMValueRef r = cg_i64(c, 0);
  for (int k = 0; k < rank; k++)
    r = LLVMBuildSelect(c->b,
                        LLVMBuildICmp(c->b, LLVMIntEQ, dim, cg_i64(c, k), ""),
                        comp[k], r, "");
  return r;
}

/* The kernel parameter a view operand of a frame is (through the calls
 * that passed it). */
static unsigned view_param(cg_frame *fr, xpj_val v) {
  const xpj_inst *in = &fr->f->insts[v];
  if (fr->call && in->op == XPJ_OP_PARAM)
    return view_param(fr->parent, call_arg(fr->parent->f, fr->call, in->aux));
  return in->aux;
}

static LLVMValueRef rec_field(cg *c, unsigned off) {
  LLVMValueRef o = cg_i64(c, off);
  return LLVMBuildGEP2(c->b, c->t_i8, c->chk_rec, &o, 1, "");
}

/* A branch LLVM should lay out as taken (almost) never. */
static void cold_branch(cg *c, LLVMValueRef cond, LLVMBasicBlockRef cold,
                        LLVMBasicBlockRef hot) {
  LLVMValueRef br = LLVMBuildCondBr(c->b, cond, cold, hot);
  LLVMMetadataRef md[3] = {
      LLVMMDStringInContext2(c->ctx, "branch_weights", 14),
      LLVMValueAsMetadata(cg_i32(c, 1)),
      LLVMValueAsMetadata(cg_i32(c, 1 << 20))};
  LLVMSetMetadata(br, LLVMGetMDKindIDInContext(c->ctx, "prof", 4),
                  LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, md, 3)));
}

/* XPJ_CHECK_BOUNDS: p, or sink when an index is outside its extent
 * (idx[d] <u ext[d]: a negative index is out too). The first violation
 * of the launch claims the record (atomic or on hit) and fills it; the
 * access itself goes to sink, so that no control flow changes (barriers
 * stay uniform) and nothing outside the arrays is touched. */
static LLVMValueRef check_bounds(cg *c, const xpj_func *f, const xpj_inst *in,
                                 unsigned param1, LLVMValueRef *idx,
                                 LLVMValueRef *ext, unsigned n, bool flat,
                                 LLVMValueRef p, LLVMValueRef sink) {
  LLVMBuilderRef B = c->b;
  LLVMValueRef out[XPJ_MAX_RANK], bad = NULL;
  for (unsigned d = 0; d < n; d++) {
    out[d] = LLVMBuildICmp(B, LLVMIntUGE, idx[d], ext[d], "");
    bad = bad ? LLVMBuildOr(B, bad, out[d], "") : out[d];
  }
  LLVMBasicBlockRef cold = new_bb(c, "oob"), fill = new_bb(c, "oob.first"),
                    cont = new_bb(c, "inb");
  cold_branch(c, bad, cold, cont);
  LLVMPositionBuilderAtEnd(B, cold);
  const char *ssn = c->ops->syncscope(c, XPJ_SCOPE_DEVICE, XPJ_SPACE_GLOBAL);
  LLVMValueRef old = LLVMBuildAtomicRMWSyncScope(
      B, LLVMAtomicRMWBinOpOr, c->chk_rec, cg_i32(c, 1),
      LLVMAtomicOrderingMonotonic, LLVMGetSyncScopeID(c->ctx, ssn, strlen(ssn)));
  LLVMSetAlignment(old, 4);
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntEQ, old, cg_i32(c, 0), ""), fill,
                  cont);
  LLVMPositionBuilderAtEnd(B, fill);
  /* the last index, unless an earlier one is out: the first out wins */
  LLVMValueRef dim = cg_i32(c, flat ? -1 : (int32_t)n - 1),
               index = idx[n - 1], extent = ext[n - 1];
  for (int d = (int)n - 2; d >= 0; d--) {
    dim = LLVMBuildSelect(B, out[d], cg_i32(c, d), dim, "");
    index = LLVMBuildSelect(B, out[d], idx[d], index, "");
    extent = LLVMBuildSelect(B, out[d], ext[d], extent, "");
  }
  LLVMValueRef fields[6][2] = {
      {cg_i32(c, (int32_t)f->index), rec_field(c, offsetof(xpj_check_record, func))},
      {cg_i32(c, (int32_t)(in - f->insts)), rec_field(c, offsetof(xpj_check_record, inst))},
      {cg_i32(c, (int32_t)param1), rec_field(c, offsetof(xpj_check_record, param))},
      {dim, rec_field(c, offsetof(xpj_check_record, dim))},
      {index, rec_field(c, offsetof(xpj_check_record, index))},
      {extent, rec_field(c, offsetof(xpj_check_record, extent))}};
  for (unsigned k = 0; k < 6; k++) /* index and extent: 8-byte fields */
    LLVMSetAlignment(LLVMBuildStore(B, fields[k][0], fields[k][1]), k < 4 ? 4 : 8);
  br(c, cont);
  LLVMPositionBuilderAtEnd(B, cont);
  return LLVMBuildSelect(B, bad, sink, p, "");
}

/* Whether instruction `in` of f is inside block b (nested blocks too). */
static bool inside(const xpj_func *f, const xpj_inst *in, xpj_block b) {
  for (uint32_t k = in->in_block; k; ) {
    if (k == b)
      return true;
    uint32_t owner = f->blocks[k].parent;
    k = owner ? f->insts[owner].in_block : 0;
  }
  return false;
}

/* The counted loop around instruction idx of fr whose variable idx reads,
 * the innermost (a read of the variable inside the loop's body: one
 * before the loop is its value then); NULL when there is none. */
static cg_loopctx *counted_loop_of(cg_frame *fr, xpj_val idx) {
  const xpj_func *f = fr->f;
  const xpj_inst *ld = &f->insts[idx];
  if (ld->op != XPJ_OP_LOAD)
    return NULL;
  xpj_val var = xpj_inst_args(f, ld)[0];
  for (unsigned k = fr->nloops; k-- > 0;)
    if (fr->loops[k].counted && fr->loops[k].var == var)
      return fr->loops[k].entry && inside(f, ld, fr->loops[k].counted->blk[1])
                 ? &fr->loops[k]
                 : NULL;
  return NULL;
}

/* Whether instruction v of f is computed before loop (outside its blocks:
 * the structured IR's values dominate what follows them). */
static bool before_loop(const xpj_func *f, xpj_val v, const xpj_inst *loop) {
  const xpj_inst *in = &f->insts[v];
  for (int k = 0; k < 3; k++)
    if (loop->blk[k] && inside(f, in, loop->blk[k]))
      return false;
  return true;
}

static bool stores_to(const xpj_func *f, xpj_block b, xpj_val var);

/* An index of a pointer slot other than the loop's variable: a value
 * computed before loop L, or a read of a variable the loop does not store
 * to (read again before the loop); *key says which (the same key, the
 * same value: the variable's reads are one). False for anything else. */
static bool other_index(cg *c, cg_frame *fr, const cg_loopctx *L, xpj_val v,
                        uint64_t *key) {
  const xpj_func *f = fr->f;
  const xpj_inst *x = &f->insts[v];
  xpj_scalar xs = scalar_of(c, x->type);
  if (xs != XPJ_I64 && xs != XPJ_U64)
    return false;
  if (before_loop(f, v, L->counted)) {
    *key = v;
    return true;
  }
  if (x->op != XPJ_OP_LOAD)
    return false;
  xpj_val var = xpj_inst_args(f, x)[0];
  if (f->insts[var].op != XPJ_OP_VAR || !before_loop(f, var, L->counted))
    return false;
  for (int k = 0; k < 3; k++)
    if (stores_to(f, L->counted->blk[k], var))
      return false;
  *key = (uint64_t)1 << 32 | var;
  return true;
}

/* other_index's value for key, where loop L starts */
static LLVMValueRef other_value(cg *c, cg_frame *fr, uint64_t key) {
  xpj_val v = (xpj_val)key;
  if (key >> 32)
    return LLVMBuildLoad2(c->b, c->t_i64, val(c, fr, v), "");
  return val(c, fr, v);
}

/* Marks v for opaque_scaled (target_ptx.c): hidden from scalar evolution
 * before code generation. */
static void mark_scaled(cg *c, LLVMValueRef v) {
  LLVMSetMetadata(v, LLVMGetMDKindIDInContext(c->ctx, "xpjit.scaled", 12),
                  LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, NULL, 0)));
}

/* Slot sc of loop L, as copy L->copy of its body reads it: the slot, or
 * (copies 1 to 3 of a four-trip loop) k * step * stride further on, that
 * offset computed before the loop. sc's type: t. */
static LLVMValueRef read_slot(cg *c, const cg_loopctx *L, cg_scaled *sc,
                              LLVMTypeRef t) {
  LLVMValueRef v = LLVMBuildLoad2(c->b, t, sc->slot, "");
  unsigned k = L->copy;
  if (!k)
    return v;
  if (!sc->ahead[k]) {
    LLVMBasicBlockRef here = LLVMGetInsertBlock(c->b);
    LLVMPositionBuilderBefore(c->b, L->entry);
    LLVMValueRef ks = LLVMBuildMul(c->b, L->step, cg_i64(c, k), "");
    sc->ahead[k] = LLVMBuildMul(c->b, ks, sc->stride, "");
    if (sc->base) /* in bytes: no shift in the loop once hidden */
      sc->ahead[k] = LLVMBuildMul(c->b, sc->ahead[k], LLVMSizeOf(sc->et), "");
    LLVMPositionBuilderAtEnd(c->b, here);
  }
  return sc->base ? LLVMBuildGEP2(c->b, c->t_i8, v, &sc->ahead[k], 1, "")
                  : LLVMBuildAdd(c->b, v, sc->ahead[k], "");
}

/* A new slot of loop L of type t, or NULL when it has CG_MAX_SCALED;
 * *init is where its first value is computed (before the loop: the
 * builder is there until done_slot). */
static cg_scaled *new_slot(cg *c, cg_loopctx *L, LLVMTypeRef t,
                           LLVMBasicBlockRef *here) {
  if (L->slots->n == CG_MAX_SCALED)
    return NULL;
  cg_scaled *sc = &L->slots->s[L->slots->n++];
  memset(sc, 0, sizeof *sc);
  sc->slot = entry_alloca(c, t, "scaled");
  *here = LLVMGetInsertBlock(c->b);
  LLVMPositionBuilderBefore(c->b, L->entry);
  return sc;
}

/* The slot's first value stored; the builder back where it was. */
static void done_slot(cg *c, cg_scaled *sc, LLVMValueRef v,
                      LLVMBasicBlockRef here) {
  LLVMBuildStore(c->b, v, sc->slot);
  LLVMPositionBuilderAtEnd(c->b, here);
}

/* The loop's variable where loop L starts (before its entry branch). */
static LLVMValueRef var_at_entry(cg *c, cg_frame *fr, const cg_loopctx *L) {
  return LLVMBuildLoad2(c->b, c->t_i64, val(c, fr, L->var), "");
}

/* The element pointer of view index `in` (view vw, element type et) when
 * one of its indices reads the variable of a counted loop around it
 * (scaled_loop) with a stride that is not a constant, and every other
 * index is computed before that loop (other_index): a pointer of the
 * loop's own, set before it and moved on by step * stride where the
 * variable steps (step_scaled), as loop strength reduction would have
 * made it. NULL for any other index (scaled_index). LSR was the largest
 * pass of a loop kernel's PTX compile, a formula search per address; it
 * then has nothing to find (the step is hidden from scalar evolution
 * before code generation: target_ptx.c, opaque_scaled). */
static LLVMValueRef scaled_pointer(cg *c, cg_frame *fr, const xpj_inst *in,
                                   cg_view *vw, LLVMTypeRef et) {
  const xpj_func *f = fr->f;
  const uint32_t *a = args_of(f, in);
  unsigned nidx = in->nargs - 1, dim = 0;
  cg_loopctx *L = NULL;
  for (unsigned d = 0; d < nidx && !L; d++)
    if (!LLVMIsConstant(vw->stride[d]) && (L = counted_loop_of(fr, a[1 + d])))
      dim = d;
  if (!L)
    return NULL;
  uint64_t other[XPJ_MAX_RANK] = {0};
  for (unsigned d = 0; d < nidx; d++)
    if (d != dim && !other_index(c, fr, L, a[1 + d], &other[d]))
      return NULL;
  cg_scaled *sc = NULL;
  for (unsigned k = 0; k < L->slots->n && !sc; k++) {
    cg_scaled *q = &L->slots->s[k];
    if (q->base == vw->ptr && q->dim == dim && q->stride == vw->stride[dim] &&
        !memcmp(q->other, other, sizeof other))
      sc = q;
  }
  LLVMBasicBlockRef here;
  if (!sc) {
    if (!(sc = new_slot(c, L, LLVMTypeOf(vw->ptr), &here)))
      return NULL;
    sc->base = vw->ptr;
    sc->et = et;
    sc->dim = dim;
    sc->stride = vw->stride[dim];
    memcpy(sc->other, other, sizeof other);
    LLVMValueRef off = LLVMBuildMul(c->b, var_at_entry(c, fr, L), sc->stride, "");
    for (unsigned d = 0; d < nidx; d++)
      if (d != dim)
        off = LLVMBuildAdd(
            c->b, off,
            LLVMBuildMul(c->b, other_value(c, fr, other[d]), vw->stride[d], ""), "");
    done_slot(c, sc, LLVMBuildGEP2(c->b, et, vw->ptr, &off, 1, ""), here);
  }
  return read_slot(c, L, sc, LLVMTypeOf(vw->ptr));
}

/* idx * stride for a view's index idx that reads the variable of a counted
 * loop around it, where scaled_pointer cannot take the whole index (an
 * other index changes in the loop): a slot set to var * stride before the
 * loop and moved on by step * stride; NULL for any other index. */
static LLVMValueRef scaled_index(cg *c, cg_frame *fr, xpj_val idx,
                                 LLVMValueRef stride) {
  cg_loopctx *L = LLVMIsConstant(stride) ? NULL : counted_loop_of(fr, idx);
  if (!L)
    return NULL;
  cg_scaled *sc = NULL;
  for (unsigned k = 0; k < L->slots->n && !sc; k++)
    if (!L->slots->s[k].base && L->slots->s[k].stride == stride)
      sc = &L->slots->s[k];
  LLVMBasicBlockRef here;
  if (!sc) {
    if (!(sc = new_slot(c, L, c->t_i64, &here)))
      return NULL;
    sc->stride = stride;
    done_slot(c, sc, LLVMBuildMul(c->b, var_at_entry(c, fr, L), stride, ""), here);
  }
  return read_slot(c, L, sc, c->t_i64);
}

/* The end of a trip of a loop with slots (its variable stepped by step):
 * each slot moved on by step * stride (a pointer slot: elements of its
 * view), the add or GEP marked for opaque_scaled (target_ptx.c). */
static void step_scaled(cg *c, const cg_slots *slots, LLVMValueRef step) {
  for (unsigned k = 0; k < slots->n; k++) {
    const cg_scaled *sc = &slots->s[k];
    LLVMTypeRef t = sc->base ? LLVMTypeOf(sc->base) : c->t_i64;
    LLVMValueRef cur = LLVMBuildLoad2(c->b, t, sc->slot, ""),
                 by = LLVMBuildMul(c->b, step, sc->stride, ""), next;
    if (sc->base)
      next = LLVMBuildGEP2(c->b, sc->et, cur, &by, 1, "");
    else
      next = LLVMBuildAdd(c->b, cur, by, "");
    mark_scaled(c, next);
    LLVMBuildStore(c->b, next, sc->slot);
  }
}

static LLVMValueRef lower_index(cg *c, cg_frame *fr, const xpj_inst *in) {
  const xpj_func *f = fr->f;
  const uint32_t *a = args_of(f, in);
  xpj_val arr = a[0];
  const xpj_typeinfo *at = tinfo(c, f->insts[arr].type);
  xpj_scalar es = scalar_of(c, f->insts[arr].type);
  LLVMTypeRef et = mem_type(c, es);
  unsigned nidx = in->nargs - 1;
  LLVMValueRef idx[XPJ_MAX_RANK];
  for (unsigned k = 0; k < nidx; k++)
    idx[k] = to_i64(c, val(c, fr, a[1 + k]), scalar_of(c, f->insts[a[1 + k]].type));
  LLVMValueRef off = NULL, base, ext[XPJ_MAX_RANK], sink = NULL, p = NULL;
  bool check = c->chk_rec != NULL, flat;
  unsigned param1 = 0;
  if (at->kind == XPJ_TK_VIEW) {
    cg_view *vw = view_of(c, fr, arr);
    if (!vw)
      return LLVMGetUndef(c->t_ptr);
    base = vw->ptr;
    int rank = vw->rank;
    flat = nidx == 1 && rank > 1;
    if (check) {
      param1 = 1 + view_param(fr, arr);
      /* a local array parameter's sink is its first element (launches
       * give at least one), in its own address space */
      sink = at->space == XPJ_SPACE_LOCAL
                 ? base
                 : rec_field(c, offsetof(xpj_check_record, sink));
      for (unsigned d = 0; d < nidx; d++)
        ext[d] = vw->shape[d];
      /* the flat extent, saturated: a broadcast view (stride 0) may have
       * shapes whose product passes 2^64, and every index is in it */
      for (int d = 1; flat && d < rank; d++) {
        /* (not llvm.umul.with.overflow: LLVM 22's SPIR-V makes it an
         * __spirv_UMulExtended that Intel's OpenCL runtime lacks) */
        LLVMValueRef b = vw->shape[d], zero = cg_i64(c, 0);
        LLVMValueRef nz = LLVMBuildICmp(c->b, LLVMIntNE, b, zero, "");
        LLVMValueRef lim = LLVMBuildUDiv(c->b, cg_i64(c, INT64_MAX),
                                         LLVMBuildSelect(c->b, nz, b, cg_i64(c, 1), ""), "");
        LLVMValueRef over = LLVMBuildAnd(
            c->b, nz, LLVMBuildICmp(c->b, LLVMIntUGT, ext[0], lim, ""), "");
        ext[0] = LLVMBuildSelect(c->b, over, cg_i64(c, INT64_MAX),
                                 LLVMBuildMul(c->b, ext[0], b, ""), "");
      }
    }
    LLVMBasicBlockRef test_bb = NULL, join_bb = NULL;
    if (nidx == 1 && rank > 1 && vw->contig) {
      /* a contiguous row-major view (GPUs): the flat index is the offset;
       * only other views pay the unravelling's divisions below (axpy at
       * ndim 2: 100 SASS instructions an element, 18 at ndim 1) */
      test_bb = LLVMGetInsertBlock(c->b); /* contiguous: from here to the join */
      LLVMBasicBlockRef slow = new_bb(c, "flat.strided");
      join_bb = new_bb(c, "flat.done");
      LLVMBuildCondBr(c->b, vw->contig, join_bb, slow);
      LLVMPositionBuilderAtEnd(c->b, slow);
    }
    if (nidx == 1 && rank > 1) {
      /* flat row-major index, unravelled through the shape */
      LLVMValueRef rem = idx[0];
      for (int d = rank - 1; d >= 0; d--) {
        LLVMValueRef q = d ? LLVMBuildUDiv(c->b, rem, vw->shape[d], "") : rem;
        LLVMValueRef i = d ? LLVMBuildSub(c->b, rem,
                                          LLVMBuildMul(c->b, q, vw->shape[d], ""), "")
                           : rem;
        LLVMValueRef t = LLVMBuildMul(c->b, i, vw->stride[d], "");
        off = off ? LLVMBuildAdd(c->b, off, t, "") : t;
        rem = q;
      }
      if (join_bb) {
        LLVMBasicBlockRef slow_end = LLVMGetInsertBlock(c->b);
        LLVMBuildBr(c->b, join_bb);
        LLVMPositionBuilderAtEnd(c->b, join_bb);
        LLVMValueRef phi = LLVMBuildPhi(c->b, c->t_i64, "");
        LLVMValueRef vals[2] = {idx[0], off};
        LLVMBasicBlockRef from[2] = {test_bb, slow_end};
        LLVMAddIncoming(phi, vals, from, 2);
        off = phi;
      }
    } else if (!(p = scaled_pointer(c, fr, in, vw, et))) {
      for (unsigned d = 0; d < nidx; d++) {
        LLVMValueRef t = scaled_index(c, fr, a[1 + d], vw->stride[d]);
        if (!t)
          t = LLVMBuildMul(c->b, idx[d], vw->stride[d], "");
        off = off ? LLVMBuildAdd(c->b, off, t, "") : t;
      }
    }
  } else {
    base = val(c, fr, arr);
    flat = nidx == 1 && at->rank > 1;
    sink = base; /* its first element */
    for (unsigned d = 0; check && d < nidx; d++)
      ext[d] = cg_i64(c, (int64_t)at->dims[d]);
    if (check && flat) {
      int64_t total = 1;
      for (int d = 0; d < at->rank; d++)
        total *= (int64_t)at->dims[d];
      ext[0] = cg_i64(c, total);
    }
    if (nidx == 1) {
      off = idx[0];
    } else {
      int64_t stride = 1;
      for (int d = (int)nidx - 1; d >= 0; d--) {
        LLVMValueRef t = LLVMBuildMul(c->b, idx[d], cg_i64(c, stride), "");
        off = off ? LLVMBuildAdd(c->b, off, t, "") : t;
        stride *= at->dims[d];
      }
    }
  }
  if (!p)
    p = LLVMBuildGEP2(c->b, et, base, &off, 1, "");
  if (!check)
    return p;
  return check_bounds(c, fr->f, in, param1, idx, ext, nidx, flat, p, sink);
}

/* ---- alias scopes (CPU) -------------------------------------------- */

/* Each local array of the kernel is its own alias scope, so that LLVM
 * knows that two local arrays do not overlap (they share one buffer, and
 * the work-item loop's bounds do not bound the indices) and that views,
 * which are global memory, touch none of them (also in device functions).
 * Indices are in bounds by the language's rules, and local arrays exist
 * only in the kernel's body (docs/language.md: they cannot be passed to
 * functions), so this only says what the language already promises.
 * Saves the vectoriser's run-time overlap checks (and their compile time)
 * in loops that fill local tiles. */
static void alias_scopes(cg *c, const xpj_func *kf) {
  if (c->ops->simt)
    return;
  LLVMMetadataRef scope[CG_MAX_LSCOPES], dom = NULL;
  unsigned n = 0;
  for (xpj_val id = 1; id < kf->ninsts && n < CG_MAX_LSCOPES; id++) {
    const xpj_inst *in = &kf->insts[id];
    if (in->op != XPJ_OP_ARRAY || tinfo(c, in->type)->space != XPJ_SPACE_LOCAL)
      continue;
    char name[48];
    if (!dom) {
      LLVMMetadataRef s = LLVMMDStringInContext2(c->ctx, "xpj.local", 9);
      dom = LLVMMDNodeInContext2(c->ctx, &s, 1);
    }
    int len = snprintf(name, sizeof name, "xpj.local.%u", (unsigned)id);
    LLVMMetadataRef ops[2] = {LLVMMDStringInContext2(c->ctx, name, (size_t)len),
                              dom};
    c->lscope_id[n] = id;
    scope[n++] = LLVMMDNodeInContext2(c->ctx, ops, 2);
  }
  if (!n)
    return;
  /* the lists each access carries: local array k is in scope k and clear
   * of the others; views are clear of all */
  LLVMMetadataRef others[CG_MAX_LSCOPES];
  for (unsigned k = 0; k < n; k++) {
    unsigned m = 0;
    for (unsigned j = 0; j < n; j++)
      if (j != k)
        others[m++] = scope[j];
    c->lscope[k] = LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, &scope[k], 1));
    c->lscope_clear[k] =
        m ? LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, others, m)) : NULL;
  }
  c->lscope_all = LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, scope, n));
  c->nlscopes = n;
}

/* Tags load or store x, whose address is the value ptr of fr's function,
 * with the lists of alias_scopes. */
static void tag_access(cg *c, cg_frame *fr, xpj_val ptr, LLVMValueRef x) {
  const xpj_func *f = fr->f;
  if (!c->nlscopes || !x || !LLVMIsAInstruction(x))
    return;
  const xpj_inst *d = &f->insts[ptr];
  if (d->op != XPJ_OP_INDEX)
    return;
  xpj_val arr = args_of(f, d)[0];
  unsigned noalias = LLVMGetMDKindIDInContext(c->ctx, "noalias", 7);
  if (tinfo(c, f->insts[arr].type)->kind == XPJ_TK_VIEW) {
    LLVMSetMetadata(x, noalias, c->lscope_all);
    return;
  }
  if (f != c->kernel || f->insts[arr].op != XPJ_OP_ARRAY)
    return;
  for (unsigned k = 0; k < c->nlscopes; k++) {
    if (c->lscope_id[k] != arr)
      continue;
    LLVMSetMetadata(x, LLVMGetMDKindIDInContext(c->ctx, "alias.scope", 11),
                    c->lscope[k]);
    if (c->lscope_clear[k])
      LLVMSetMetadata(x, noalias, c->lscope_clear[k]);
    return;
  }
}

static LLVMValueRef load_elem(cg *c, LLVMValueRef p, xpj_scalar s) {
  LLVMValueRef r = LLVMBuildLoad2(c->b, mem_type(c, s), p, "");
  LLVMSetAlignment(r, scalar_bytes(s));
  if (s == XPJ_BOOL)
    r = LLVMBuildTrunc(c->b, r, c->t_i1, "");
  return r;
}

static LLVMValueRef store_elem(cg *c, LLVMValueRef p, LLVMValueRef v,
                               xpj_scalar s) {
  if (s == XPJ_BOOL)
    v = LLVMBuildZExt(c->b, v, c->t_i8, "");
  LLVMValueRef st = LLVMBuildStore(c->b, v, p);
  LLVMSetAlignment(st, scalar_bytes(s));
  return st;
}

static void zero_fill(cg *c, LLVMValueRef p, uint64_t bytes, unsigned align) {
  LLVMBuildMemSet(c->b, p, LLVMConstInt(c->t_i8, 0, 0),
                  cg_i64(c, (int64_t)bytes), align);
}

static LLVMAtomicOrdering ordering(xpj_order o) {
  switch (o) {
  case XPJ_ORDER_ACQUIRE: return LLVMAtomicOrderingAcquire;
  case XPJ_ORDER_RELEASE: return LLVMAtomicOrderingRelease;
  case XPJ_ORDER_ACQ_REL: return LLVMAtomicOrderingAcquireRelease;
  case XPJ_ORDER_SEQ_CST: return LLVMAtomicOrderingSequentiallyConsistent;
  default: return LLVMAtomicOrderingMonotonic;
  }
}

static unsigned sync_id(cg *c, const xpj_inst *in, xpj_space sp) {
  const char *name = c->ops->syncscope(c, (xpj_scope)in->scope, sp);
  return LLVMGetSyncScopeID(c->ctx, name, strlen(name));
}

static xpj_space ptr_space(cg *c, const xpj_func *f, xpj_val p) {
  return (xpj_space)tinfo(c, f->insts[p].type)->space;
}

/* Atomics on local memory on the CPU: a work-group runs on one thread,
 * its work-items one after the other, and its local memory is that
 * thread's alone, so an atomic there is an ordinary read-modify-write (a
 * `lock` prefix would only cost time: 4x on a local histogram). */
static LLVMValueRef lower_local_atomic_cpu(cg *c, cg_frame *fr,
                                           const xpj_inst *in) {
  const xpj_func *f = fr->f;
  const uint32_t *a = args_of(f, in);
  xpj_scalar s = scalar_of(c, in->type);
  bool fl = cg_scalar_is_float(s), sg = cg_scalar_is_signed(s);
  LLVMValueRef p = val(c, fr, a[0]);
  LLVMBuilderRef B = c->b;
  LLVMTypeRef t = cg_scalar_type(c, s);
  if (in->op == XPJ_OP_ASTORE) {
    LLVMValueRef v = val(c, fr, a[1]);
    LLVMValueRef st = LLVMBuildStore(B, v, p);
    LLVMSetAlignment(st, scalar_bytes(scalar_of(c, f->insts[a[1]].type)));
    tag_access(c, fr, a[0], st);
    return st;
  }
  LLVMValueRef old = LLVMBuildLoad2(B, t, p, "");
  LLVMSetAlignment(old, scalar_bytes(s));
  tag_access(c, fr, a[0], old);
  if (in->op == XPJ_OP_ALOAD)
    return old;
  LLVMValueRef nv;
  if (in->op == XPJ_OP_CMPXCHG) {
    LLVMValueRef e = val(c, fr, a[1]), d = val(c, fr, a[2]);
    LLVMValueRef eq;
    if (fl) { /* compares bit patterns, like the atomic instruction */
      LLVMTypeRef it = LLVMIntTypeInContext(c->ctx, xpj_scalar_bits(s));
      eq = LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildBitCast(B, old, it, ""),
                         LLVMBuildBitCast(B, e, it, ""), "");
    } else {
      eq = LLVMBuildICmp(B, LLVMIntEQ, old, e, "");
    }
    nv = LLVMBuildSelect(B, eq, d, old, "");
  } else {
    LLVMValueRef v = val(c, fr, a[1]);
    switch ((xpj_atomic_op)in->aux) {
    case XPJ_ATOMIC_ADD: nv = fl ? LLVMBuildFAdd(B, old, v, "") : LLVMBuildAdd(B, old, v, ""); break;
    case XPJ_ATOMIC_SUB: nv = fl ? LLVMBuildFSub(B, old, v, "") : LLVMBuildSub(B, old, v, ""); break;
    case XPJ_ATOMIC_MIN:
    case XPJ_ATOMIC_MAX: {
      bool mn = in->aux == XPJ_ATOMIC_MIN;
      LLVMValueRef lt = fl ? LLVMBuildFCmp(B, LLVMRealOLT, v, old, "")
                           : LLVMBuildICmp(B, sg ? LLVMIntSLT : LLVMIntULT, v, old, "");
      LLVMValueRef gt = fl ? LLVMBuildFCmp(B, LLVMRealOGT, v, old, "")
                           : LLVMBuildICmp(B, sg ? LLVMIntSGT : LLVMIntUGT, v, old, "");
      nv = LLVMBuildSelect(B, mn ? lt : gt, v, old, "");
      break;
    }
    case XPJ_ATOMIC_AND: nv = LLVMBuildAnd(B, old, v, ""); break;
    case XPJ_ATOMIC_OR: nv = LLVMBuildOr(B, old, v, ""); break;
    case XPJ_ATOMIC_XOR: nv = LLVMBuildXor(B, old, v, ""); break;
    default: nv = v; break;
    }
  }
  LLVMValueRef st = LLVMBuildStore(B, nv, p);
  LLVMSetAlignment(st, scalar_bytes(s));
  tag_access(c, fr, a[0], st);
  return old;
}

/* Compare-exchange of integers of type it at p (space sp): the old value.
 * Through the target's hook where LLVM's instruction is unusable. */
static LLVMValueRef cmpxchg_old(cg *c, const xpj_inst *in, LLVMValueRef p,
                                xpj_space sp, LLVMTypeRef it, LLVMValueRef e,
                                LLVMValueRef d) {
  if (c->ops->cmpxchg) {
    unsigned as = sp == XPJ_SPACE_LOCAL ? c->ops->as_local : c->ops->as_global;
    return c->ops->cmpxchg(c, p, as, it, e, d, (xpj_scope)in->scope,
                           (xpj_order)in->order);
  }
  LLVMAtomicOrdering ord = ordering((xpj_order)in->order);
  LLVMAtomicOrdering fail = ord == LLVMAtomicOrderingAcquireRelease
                                ? LLVMAtomicOrderingAcquire
                            : ord == LLVMAtomicOrderingRelease
                                ? LLVMAtomicOrderingMonotonic
                                : ord;
  LLVMValueRef x = LLVMBuildAtomicCmpXchgSyncScope(c->b, p, e, d, ord, fail,
                                                   sync_id(c, in, sp));
  LLVMSetAlignment(x, LLVMGetIntTypeWidth(it) / 8);
  return LLVMBuildExtractValue(c->b, x, 0, "");
}

/* A 16-bit atomic where the target has none (ops->atomic16_by_word): a
 * compare-exchange loop on the aligned 32-bit word that holds the value,
 * which leaves the other half of the word as it finds it. */
static LLVMValueRef lower_atomic16(cg *c, cg_frame *fr, const xpj_inst *in,
                                   LLVMValueRef p, xpj_space sp) {
  const uint32_t *a = args_of(fr->f, in);
  LLVMBuilderRef B = c->b;
  xpj_scalar s = scalar_of(c, in->op == XPJ_OP_ASTORE ? fr->f->insts[a[1]].type
                                                      : in->type);
  LLVMTypeRef t = cg_scalar_type(c, s);
  unsigned ss = sync_id(c, in, sp);
  LLVMValueRef off = LLVMBuildAnd(B, LLVMBuildPtrToInt(B, p, c->t_i64, ""),
                                  cg_i64(c, 2), "");
  LLVMValueRef back = LLVMBuildNeg(B, off, "");
  LLVMValueRef wp = LLVMBuildGEP2(B, c->t_i8, p, &back, 1, "");
  LLVMValueRef sh = LLVMBuildTrunc(B, LLVMBuildShl(B, off, cg_i64(c, 3), ""),
                                   c->t_i32, "");
  LLVMValueRef cur0 = LLVMBuildLoad2(B, c->t_i32, wp, "");
  LLVMSetAlignment(cur0, 4);
  LLVMSetAtomicSyncScopeID(cur0, ss);
  LLVMSetOrdering(cur0, in->op == XPJ_OP_ALOAD
                            ? ordering((xpj_order)in->order)
                            : LLVMAtomicOrderingMonotonic);
  if (in->op == XPJ_OP_ALOAD) {
    LLVMValueRef h = LLVMBuildTrunc(B, LLVMBuildLShr(B, cur0, sh, ""), c->t_i16, "");
    return LLVMBuildBitCast(B, h, t, "");
  }
  LLVMValueRef v = val(c, fr, a[1]);
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
  LLVMBasicBlockRef head = new_bb(c, "a16.loop"), done = new_bb(c, "a16.done");
  LLVMBuildBr(B, head);
  LLVMPositionBuilderAtEnd(B, head);
  LLVMValueRef cur = LLVMBuildPhi(B, c->t_i32, "");
  LLVMValueRef h16 = LLVMBuildTrunc(B, LLVMBuildLShr(B, cur, sh, ""), c->t_i16, "");
  LLVMValueRef h = LLVMBuildBitCast(B, h16, t, "");
  bool fl = cg_scalar_is_float(s);
  LLVMValueRef nv;
  if (in->op == XPJ_OP_CMPXCHG) {
    LLVMValueRef e = LLVMBuildBitCast(B, v, c->t_i16, "");
    nv = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, h16, e, ""),
                         val(c, fr, a[2]), h, "");
  } else if (in->op == XPJ_OP_ATOMIC && in->aux == XPJ_ATOMIC_ADD) {
    nv = fl ? LLVMBuildFAdd(B, h, v, "") : LLVMBuildAdd(B, h, v, "");
  } else if (in->op == XPJ_OP_ATOMIC && in->aux == XPJ_ATOMIC_SUB) {
    nv = fl ? LLVMBuildFSub(B, h, v, "") : LLVMBuildSub(B, h, v, "");
  } else if (in->op == XPJ_OP_ATOMIC && in->aux != XPJ_ATOMIC_XCHG) {
    cg_fail(c, XPJ_ERR_UNSUPPORTED, "16-bit atomic_%s is not supported on "
            "target %s", xpj_atomic_op_name((xpj_atomic_op)in->aux),
            c->ops->name);
    nv = v;
  } else { /* exchange, store */
    nv = v;
  }
  LLVMValueRef n32 = LLVMBuildShl(
      B, LLVMBuildZExt(B, LLVMBuildBitCast(B, nv, c->t_i16, ""), c->t_i32, ""),
      sh, "");
  LLVMValueRef keep = LLVMBuildNot(B, LLVMBuildShl(B, cg_i32(c, 0xffff), sh, ""), "");
  LLVMValueRef nw = LLVMBuildOr(B, LLVMBuildAnd(B, cur, keep, ""), n32, "");
  LLVMValueRef seen = cmpxchg_old(c, in, wp, sp, c->t_i32, cur, nw);
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntEQ, seen, cur, ""), done, head);
  LLVMValueRef inc[2] = {cur0, seen};
  LLVMBasicBlockRef from[2] = {pre, latch};
  LLVMAddIncoming(cur, inc, from, 2);
  LLVMPositionBuilderAtEnd(B, done);
  return h;
}

/* ptxas 13.0 crashes (SIGSEGV) on atom.add.noftz.f16 in a module with
 * debug info (".target sm_90, debug") for sm_90 and later (an adversarial
 * review: examples/atomics.xpk split_sum T=f16 -g); the CUDA driver
 * assembles in the calling process. There, the compare-exchange loop on
 * the 32-bit word instead. */
static bool ptxas_f16_add_crash(const cg *c, const xpj_inst *in,
                                xpj_scalar s) {
  return c->target->kind == XPJ_TARGET_PTX && c->opts->debug_info &&
         c->target->sm >= 90 && s == XPJ_F16 && in->op == XPJ_OP_ATOMIC &&
         (in->aux == XPJ_ATOMIC_ADD || in->aux == XPJ_ATOMIC_SUB);
}

static LLVMValueRef lower_atomic(cg *c, cg_frame *fr, const xpj_inst *in) {
  const xpj_func *f = fr->f;
  const uint32_t *a = args_of(f, in);
  xpj_scalar s = scalar_of(c, in->type);
  bool fl = cg_scalar_is_float(s), sg = cg_scalar_is_signed(s);
  xpj_space sp = ptr_space(c, f, a[0]);
  if (c->target->kind == XPJ_TARGET_CPU && sp == XPJ_SPACE_LOCAL)
    return lower_local_atomic_cpu(c, fr, in);
  LLVMValueRef p = val(c, fr, a[0]);
  if ((c->ops->atomic16_by_word &&
       xpj_scalar_bits(in->op == XPJ_OP_ASTORE
                           ? scalar_of(c, f->insts[a[1]].type)
                           : s) == 16) ||
      ptxas_f16_add_crash(c, in, s))
    return lower_atomic16(c, fr, in, p, sp);
  unsigned ss = sync_id(c, in, sp);
  LLVMAtomicOrdering ord = ordering((xpj_order)in->order);
  LLVMBuilderRef B = c->b;
  switch (in->op) {
  case XPJ_OP_ATOMIC: {
    LLVMAtomicRMWBinOp op;
    switch ((xpj_atomic_op)in->aux) {
    case XPJ_ATOMIC_ADD: op = fl ? LLVMAtomicRMWBinOpFAdd : LLVMAtomicRMWBinOpAdd; break;
    case XPJ_ATOMIC_SUB: op = fl ? LLVMAtomicRMWBinOpFSub : LLVMAtomicRMWBinOpSub; break;
    case XPJ_ATOMIC_MIN: op = sg ? LLVMAtomicRMWBinOpMin : LLVMAtomicRMWBinOpUMin; break;
    case XPJ_ATOMIC_MAX: op = sg ? LLVMAtomicRMWBinOpMax : LLVMAtomicRMWBinOpUMax; break;
    case XPJ_ATOMIC_AND: op = LLVMAtomicRMWBinOpAnd; break;
    case XPJ_ATOMIC_OR: op = LLVMAtomicRMWBinOpOr; break;
    case XPJ_ATOMIC_XOR: op = LLVMAtomicRMWBinOpXor; break;
    default: op = LLVMAtomicRMWBinOpXchg; break;
    }
    LLVMValueRef v = val(c, fr, a[1]);
    if (fl && op == LLVMAtomicRMWBinOpXchg && c->ops->xchg_float_as_int) {
      LLVMTypeRef it = LLVMIntTypeInContext(c->ctx, xpj_scalar_bits(s));
      LLVMValueRef r = LLVMBuildAtomicRMWSyncScope(
          B, op, p, LLVMBuildBitCast(B, v, it, ""), ord, ss);
      LLVMSetAlignment(r, scalar_bytes(s));
      return LLVMBuildBitCast(B, r, cg_scalar_type(c, s), "");
    }
    if (c->ops->rmw_order_by_fences && ord != LLVMAtomicOrderingMonotonic) {
      LLVMValueRef r = c->ops->ordered_rmw
                           ? c->ops->ordered_rmw(c, op, s, sp, (xpj_scope)in->scope,
                                                 p, v, ord)
                           : NULL;
      if (r)
        return r;
      /* release side before, acquire side after a relaxed RMW */
      if (ord != LLVMAtomicOrderingAcquire)
        LLVMBuildFenceSyncScope(B, ord == LLVMAtomicOrderingSequentiallyConsistent
                                       ? ord : LLVMAtomicOrderingRelease,
                                ss, "");
      r = LLVMBuildAtomicRMWSyncScope(B, op, p, v, LLVMAtomicOrderingMonotonic,
                                      ss);
      LLVMSetAlignment(r, scalar_bytes(s));
      if (ord != LLVMAtomicOrderingRelease)
        LLVMBuildFenceSyncScope(B, LLVMAtomicOrderingAcquire, ss, "");
      return r;
    }
    LLVMValueRef r = LLVMBuildAtomicRMWSyncScope(B, op, p, v, ord, ss);
    LLVMSetAlignment(r, scalar_bytes(s));
    return r;
  }
  case XPJ_OP_CMPXCHG: {
    LLVMValueRef e = val(c, fr, a[1]), d = val(c, fr, a[2]);
    LLVMTypeRef it = LLVMIntTypeInContext(c->ctx, xpj_scalar_bits(s));
    if (fl) {
      e = LLVMBuildBitCast(B, e, it, "");
      d = LLVMBuildBitCast(B, d, it, "");
    }
    LLVMValueRef old = cmpxchg_old(c, in, p, sp, it, e, d);
    return fl ? LLVMBuildBitCast(B, old, cg_scalar_type(c, s), "") : old;
  }
  case XPJ_OP_ALOAD: {
    LLVMValueRef r = LLVMBuildLoad2(B, cg_scalar_type(c, s), p, "");
    LLVMSetOrdering(r, ord);
    LLVMSetAtomicSyncScopeID(r, ss);
    LLVMSetAlignment(r, scalar_bytes(s));
    return r;
  }
  default: { /* ASTORE */
    LLVMValueRef st = LLVMBuildStore(B, val(c, fr, a[1]), p);
    LLVMSetOrdering(st, ord);
    LLVMSetAtomicSyncScopeID(st, ss);
    LLVMSetAlignment(st, scalar_bytes(scalar_of(c, f->insts[a[1]].type)));
    return st;
  }
  }
}

/* ---- statements ---------------------------------------------------- */

static void di_at(cg *c, xpj_loc loc);
static void lower_block(cg *c, cg_frame *fr, xpj_block b);
static void lower_wg_block(cg *c, cg_frame *fr, xpj_block b);
static void lower_inst(cg *c, cg_frame *fr, xpj_val id);

/* The storage of a private variable or array. Arrays in the frame count
 * towards CG_PRIVATE_MAX_BYTES: past it the kernel is refused here rather
 * than overflowing the stack of the thread that runs it. */
static LLVMValueRef private_storage(cg *c, cg_frame *fr, xpj_val id,
                                    LLVMTypeRef t) {
  const xpj_inst *in = &fr->f->insts[id];
  if (fr->wg && fr->need[id]) {
    /* lives across barriers: one copy per work-item in scratch */
    uint64_t bytes = private_bytes(c, in);
    if (fr->slot[id] < 0)
      fr->slot[id] = scratch_alloc(c, bytes);
    return scratch_addr(c, fr->slot[id], bytes, c->cpu_wi);
  }
  if (in->op == XPJ_OP_ARRAY) {
    c->private_bytes += private_bytes(c, in);
    if (c->private_bytes > CG_PRIVATE_MAX_BYTES) {
      const char *file = xpj_module_file_name(c->m, in->loc.file);
      cg_fail(c, XPJ_ERR_UNSUPPORTED, "%s%s%u:%u: private array '%s'%s%s "
              "brings the private arrays of kernel %s to %llu bytes per "
              "work-item, more than the %u MiB a work-item may have (a "
              "device function's arrays count at each call of it)",
              file ? file : "", file ? ":" : "line ", in->loc.line,
              in->loc.col, xpj_inst_name(fr->f, in),
              fr->call ? " of function " : "", fr->call ? fr->f->name : "",
              c->kernel->name, (unsigned long long)c->private_bytes,
              CG_PRIVATE_MAX_BYTES >> 20);
    }
  }
  return entry_alloca(c, t, "");
}

static void lower_call(cg *c, cg_frame *fr, xpj_val id, bool wg) {
  const xpj_inst *in = &fr->f->insts[id];
  const xpj_func *callee = callee_of(c, in);
  cg_frame *cf = frame_new(c, callee, fr, in);
  if (!cf)
    return;
  xpj_scalar rs = scalar_of(c, in->type);
  LLVMBasicBlockRef cont = new_bb(c, "call.cont");
  cf->ret_bb = cont;
  if (rs != XPJ_VOID && !wg)
    cf->ret_slot = entry_alloca(c, mem_type(c, rs), "ret");
  if (wg) {
    if (!frame_make_wg(c, cf)) {
      frame_free(cf);
      return;
    }
    if (rs != XPJ_VOID) {
      if (fr->slot[id] < 0)
        fr->slot[id] = scratch_alloc(c, scalar_bytes(rs));
      cf->ret_region = fr->slot[id];
    }
    lower_wg_block(c, cf, 1);
  } else {
    lower_block(c, cf, 1);
  }
  br(c, cont);
  LLVMPositionBuilderAtEnd(c->b, cont);
  if (rs != XPJ_VOID && !wg)
    def(c, fr, id, load_elem(c, cf->ret_slot, rs));
  if (rs != XPJ_VOID && wg && (fr->need[id] & NEED_USLOT)) {
    /* used at work-group level: take work-item 0's value */
    LLVMValueRef x = LLVMBuildLoad2(
        c->b, mem_type(c, rs),
        scratch_addr(c, fr->slot[id], scalar_bytes(rs), cg_i64(c, 0)), "");
    fr->uslot[id] = entry_alloca(c, mem_type(c, rs), "uniform");
    LLVMBuildStore(c->b, x, fr->uslot[id]);
  }
  frame_free(cf);
}

static void lower_if(cg *c, cg_frame *fr, xpj_val id) {
  const xpj_inst *in = &fr->f->insts[id];
  const uint32_t *a = args_of(fr->f, in);
  xpj_scalar rs = scalar_of(c, in->type);
  LLVMValueRef slot = NULL;
  if (rs != XPJ_VOID)
    slot = entry_alloca(c, mem_type(c, rs), "ifv");
  LLVMBasicBlockRef tb = new_bb(c, "then"), eb = new_bb(c, "else"),
                    mb = new_bb(c, "endif");
  LLVMBuildCondBr(c->b, val(c, fr, a[0]), tb, eb);
  fr->vals[id] = slot; /* YIELD finds the slot here */
  LLVMPositionBuilderAtEnd(c->b, tb);
  lower_block(c, fr, in->blk[0]);
  br(c, mb);
  LLVMPositionBuilderAtEnd(c->b, eb);
  lower_block(c, fr, in->blk[1]);
  br(c, mb);
  LLVMPositionBuilderAtEnd(c->b, mb);
  fr->vals[id] = NULL;
  if (slot)
    def(c, fr, id, load_elem(c, slot, rs));
}

/* ---- loops that load global memory (GPU) ---------------------------- */

/* The form `for (...; v CMP bound; v = v OP step)` of a loop: its
 * variable, the test's load of it, the test, the bound, the step block's
 * update of the variable and the update's other operand. */
typedef struct loop_form {
  xpj_val var, bound, step;
  const xpj_inst *load, *test, *update;
} loop_form;

/* Reads loop's form into *lf; false when it has another one. */
static bool loop_form_of(const xpj_func *f, const xpj_inst *loop, loop_form *lf) {
  if (!loop->imm.i || !loop->blk[2])
    return false;
  lf->test = &f->insts[(xpj_val)loop->imm.i];
  if (lf->test->op != XPJ_OP_BINOP || lf->test->aux < XPJ_EQ || lf->test->nargs != 2)
    return false;
  const uint32_t *a = xpj_inst_args(f, lf->test);
  lf->load = &f->insts[a[0]];
  if (lf->load->op != XPJ_OP_LOAD)
    return false;
  lf->var = xpj_inst_args(f, lf->load)[0];
  lf->bound = a[1];
  const xpj_blockdata *bd = &f->blocks[loop->blk[2]];
  for (uint32_t i = 0; i < bd->n; i++) {
    const xpj_inst *st = &f->insts[bd->ids[i]];
    if (st->op != XPJ_OP_STORE || xpj_inst_args(f, st)[0] != lf->var)
      continue;
    lf->update = &f->insts[xpj_inst_args(f, st)[1]];
    if (lf->update->op != XPJ_OP_BINOP || lf->update->nargs != 2)
      return false;
    /* var = var OP step, or var = step OP var: anything else (i = g + (i +
     * 10)) has no step of its own */
    const uint32_t *va = xpj_inst_args(f, lf->update);
    const xpj_inst *v0 = &f->insts[va[0]], *v1 = &f->insts[va[1]];
    if (v0->op == XPJ_OP_LOAD && xpj_inst_args(f, v0)[0] == lf->var)
      lf->step = va[1];
    else if (v1->op == XPJ_OP_LOAD && xpj_inst_args(f, v1)[0] == lf->var)
      lf->step = va[0];
    else
      return false;
    return true;
  }
  return false;
}

/* A loop LLVM unrolls completely: its test compares a variable with a
 * constant and its step changes the variable by a constant (a constant
 * trip count when, as in such loops, it starts from a constant). */
static bool const_trip_loop(const xpj_func *f, const xpj_inst *loop) {
  loop_form lf;
  return loop_form_of(f, loop, &lf) && f->insts[lf.bound].op == XPJ_OP_CONST &&
         f->insts[lf.step].op == XPJ_OP_CONST;
}

/* Whether pointer p (an instruction of f) is into global memory. */
static bool global_ptr(cg *c, const xpj_func *f, xpj_val p) {
  const xpj_inst *in = &f->insts[p];
  return in->op == XPJ_OP_INDEX && tinfo(c, in->type)->space == XPJ_SPACE_GLOBAL;
}

/* The global loads in block b (with the ifs and loops in it), counted;
 * *other: it holds what keeps the loop holding b from being unrolled
 * here (in it or in the functions it calls): a barrier or a collective,
 * a loop LLVM will not unroll completely (that loop is not innermost), an
 * atomic or a store to global memory (what the loads feed, which may be where
 * the next trip's loads read: unrolled, they would wait as much; NVRTC
 * leaves such loops rolled), or a way out (break, return: the trips
 * cannot be counted; a return in a called function, in_callee, only ends
 * the call). */
static unsigned global_loads(cg *c, const xpj_func *f, xpj_block b,
                             bool in_callee, bool *other) {
  unsigned n = 0;
  const xpj_blockdata *bd = &f->blocks[b];
  for (uint32_t i = 0; b && i < bd->n; i++) {
    const xpj_inst *in = &f->insts[bd->ids[i]];
    switch (in->op) {
    case XPJ_OP_ATOMIC: case XPJ_OP_CMPXCHG: case XPJ_OP_ALOAD:
    case XPJ_OP_ASTORE: case XPJ_OP_BREAK:
    case XPJ_OP_BARRIER: case XPJ_OP_GROUP:
      *other = true;
      break;
    case XPJ_OP_RETURN:
      *other |= !in_callee;
      break;
    case XPJ_OP_CALL: { /* inlined: what it does counts here */
      const xpj_func *callee = callee_of(c, in);
      if (callee && callee != f)
        n += global_loads(c, callee, 1, true, other);
      else
        *other = true;
      break;
    }
    case XPJ_OP_STORE:
      *other |= global_ptr(c, f, xpj_inst_args(f, in)[0]);
      break;
    case XPJ_OP_LOAD:
      n += global_ptr(c, f, xpj_inst_args(f, in)[0]);
      break;
    case XPJ_OP_LOOP: /* unrolled completely: its loads count four times */
      *other |= !const_trip_loop(f, in);
      for (int k = 0; k < 3; k++)
        n += 4 * global_loads(c, f, in->blk[k], in_callee, other);
      break;
    case XPJ_OP_IF:
      for (int k = 0; k < 3; k++)
        n += global_loads(c, f, in->blk[k], in_callee, other);
      break;
    default:
      break;
    }
  }
  return n;
}

/* Whether value v of f is of the kind GPU loops step by and towards, about
 * +-2^62 whatever the arguments: a constant, a shape (launches check them:
 * XPJ_MAX_EXTENT) or the size of a one-dimensional view, a work-item id or
 * size, a narrower integer widened, a minimum or maximum of two of them,
 * one of them moved by a constant (which widens the range: a heuristic,
 * not a proof), or a variable only ever set to one of them. It chooses
 * loops (stride_loop); nothing's correctness rests on it
 * (lower_four_trips checks its step at run time). */
static bool bounded(cg *c, const xpj_func *f, xpj_val v, int depth) {
  const xpj_inst *in = &f->insts[v];
  const uint32_t *a = xpj_inst_args(f, in);
  if (depth > 6)
    return false;
  switch (in->op) {
  case XPJ_OP_CONST:
    return in->imm.i > -((int64_t)1 << 62) && in->imm.i < ((int64_t)1 << 62);
  case XPJ_OP_SHAPE:
  case XPJ_OP_WI:
    return true;
  case XPJ_OP_SIZE:
    return tinfo(c, f->insts[a[0]].type)->rank == 1;
  case XPJ_OP_CAST: {
    const xpj_typeinfo *from = tinfo(c, f->insts[a[0]].type);
    return from->kind == XPJ_TK_SCALAR && xpj_scalar_bits(from->scalar) <= 32 &&
           !cg_scalar_is_float(from->scalar);
  }
  case XPJ_OP_MATH:
    if (in->aux == XPJ_MATH_MIN && in->nargs == 2)
      return bounded(c, f, a[0], depth + 1) && bounded(c, f, a[1], depth + 1);
    if (in->aux == XPJ_MATH_MAX && in->nargs == 2)
      return bounded(c, f, a[0], depth + 1) && bounded(c, f, a[1], depth + 1);
    return false;
  case XPJ_OP_BINOP:
    if (in->aux != XPJ_ADD && in->aux != XPJ_SUB)
      return false;
    return (f->insts[a[1]].op == XPJ_OP_CONST && bounded(c, f, a[0], depth + 1)) ||
           (f->insts[a[0]].op == XPJ_OP_CONST && bounded(c, f, a[1], depth + 1));
  case XPJ_OP_LOAD: {
    xpj_val var = a[0];
    if (f->insts[var].op != XPJ_OP_VAR)
      return false;
    bool any = false;
    for (xpj_val i = 1; i < f->ninsts; i++) {
      const xpj_inst *st = &f->insts[i];
      if (st->op != XPJ_OP_STORE || xpj_inst_args(f, st)[0] != var)
        continue;
      if (!bounded(c, f, xpj_inst_args(f, st)[1], depth + 1))
        return false;
      any = true;
    }
    return any;
  }
  default:
    return false;
  }
}

/* Whether block b (with the blocks in it) stores to variable var. */
static bool stores_to(const xpj_func *f, xpj_block b, xpj_val var) {
  const xpj_blockdata *bd = &f->blocks[b];
  for (uint32_t i = 0; b && i < bd->n; i++) {
    const xpj_inst *in = &f->insts[bd->ids[i]];
    if (in->op == XPJ_OP_STORE && xpj_inst_args(f, in)[0] == var)
      return true;
    if (in->op == XPJ_OP_IF || in->op == XPJ_OP_LOOP)
      for (int k = 0; k < 3; k++)
        if (stores_to(f, in->blk[k], var))
          return true;
  }
  return false;
}

/* Whether loop `in` is a stride loop counting up: its test is
 * `i < n` or `i <= n` for a 64-bit integer variable i (n bounded, for
 * <=), its step adds a bounded value that is not a constant to i
 * (global_size(0), local_size(0): the grid- and block-stride loops of GPU
 * code), and its body leaves i alone. Loops of a constant step keep their
 * form: ptxas unrolls them where it finds it worth it, and unrolling them
 * here cost up to twice their compile for nothing that the PTX quality
 * benchmark missed (docs/benchmarks.md, "PTX quality"). Its form in *lf. */
static bool stride_loop(cg *c, const xpj_func *f, const xpj_inst *loop,
                        loop_form *lf) {
  if (!loop_form_of(f, loop, lf) ||
      (lf->test->aux != XPJ_LT && lf->test->aux != XPJ_LE) ||
      lf->update->aux != XPJ_ADD)
    return false;
  const xpj_typeinfo *ty = tinfo(c, lf->load->type);
  return ty->kind == XPJ_TK_SCALAR && (ty->scalar == XPJ_I64 || ty->scalar == XPJ_U64) &&
         (lf->test->aux == XPJ_LT || bounded(c, f, lf->bound, 0)) &&
         !stores_to(f, loop->blk[1], lf->var) &&
         f->insts[lf->step].op != XPJ_OP_CONST && bounded(c, f, lf->step, 0);
}

/* ---- grid-stride loops unrolled four times (GPUs) --------------------- */

/* Whether v keeps one value through every trip of loop: constants,
 * parameters, work-item ids and sizes, variables the loop does not store
 * to, and what pure arithmetic makes of them. */
static bool trip_invariant(const xpj_func *f, const xpj_inst *loop, xpj_val v,
                           int depth) {
  const xpj_inst *in = &f->insts[v];
  const uint32_t *a = xpj_inst_args(f, in);
  if (depth > 8)
    return false;
  switch (in->op) {
  case XPJ_OP_CONST: case XPJ_OP_PARAM: case XPJ_OP_WI:
    return true;
  case XPJ_OP_LOAD:
    if (f->insts[a[0]].op != XPJ_OP_VAR)
      return false;
    for (int k = 0; k < 3; k++)
      if (stores_to(f, loop->blk[k], a[0]))
        return false;
    return true;
  case XPJ_OP_SHAPE: case XPJ_OP_SIZE: case XPJ_OP_STRIDE:
  case XPJ_OP_BINOP: case XPJ_OP_UNOP: case XPJ_OP_CAST: case XPJ_OP_MATH:
    for (uint32_t k = 0; k < in->nargs; k++)
      if (!trip_invariant(f, loop, a[k], depth + 1))
        return false;
    return true;
  default:
    return false;
  }
}

/* Whether block b only computes values (and, where var is not 0, stores
 * to var): evaluating it fewer times changes nothing else. */
static bool computes_only(const xpj_func *f, xpj_block b, xpj_val var) {
  const xpj_blockdata *bd = &f->blocks[b];
  for (uint32_t i = 0; b && i < bd->n; i++) {
    const xpj_inst *in = &f->insts[bd->ids[i]];
    switch (in->op) {
    case XPJ_OP_CONST: case XPJ_OP_PARAM: case XPJ_OP_WI: case XPJ_OP_SHAPE:
    case XPJ_OP_SIZE: case XPJ_OP_STRIDE: case XPJ_OP_BINOP: case XPJ_OP_UNOP:
    case XPJ_OP_CAST: case XPJ_OP_MATH:
      break;
    case XPJ_OP_LOAD:
      if (f->insts[xpj_inst_args(f, in)[0]].op != XPJ_OP_VAR)
        return false;
      break;
    case XPJ_OP_STORE:
      if (!var || xpj_inst_args(f, in)[0] != var)
        return false;
      break;
    default:
      return false;
    }
  }
  return true;
}

/* The stores to variable var in block b (not in the blocks in it). */
static unsigned stores_in(const xpj_func *f, xpj_block b, xpj_val var) {
  const xpj_blockdata *bd = &f->blocks[b];
  unsigned n = 0;
  for (uint32_t i = 0; b && i < bd->n; i++) {
    const xpj_inst *in = &f->insts[bd->ids[i]];
    n += in->op == XPJ_OP_STORE && xpj_inst_args(f, in)[0] == var;
  }
  return n;
}

/* Instructions block b lowers to, roughly (nested blocks and the device
 * functions it calls included), up to cap. */
static unsigned block_size(cg *c, const xpj_func *f, xpj_block b, unsigned cap,
                           int depth) {
  unsigned n = 0;
  const xpj_blockdata *bd = &f->blocks[b];
  for (uint32_t i = 0; b && i < bd->n && n < cap; i++) {
    const xpj_inst *in = &f->insts[bd->ids[i]];
    n++;
    if (in->op == XPJ_OP_CALL) {
      const xpj_func *callee = callee_of(c, in);
      n += callee && callee != f && depth < 8
               ? block_size(c, callee, 1, cap - n, depth + 1)
               : cap;
    } else if (in->op == XPJ_OP_IF || in->op == XPJ_OP_LOOP) {
      for (int k = 0; k < 3 && n < cap; k++)
        n += block_size(c, f, in->blk[k], cap - n, depth + 1);
    }
  }
  return n < cap ? n : cap;
}

/* Loops that load global memory run four trips at a time on GPUs
 * (c->ops->unroll_load_loops, -O2): four loads in flight per work-item
 * instead of one, as NVRTC's grid-stride and tile loops have
 * (docs/benchmarks.md, "PTX quality"). Only where that helps: loops whose
 * body loads global memory (fewer than four loads: more are in flight
 * already) with nothing that keeps them waiting (global_loads), which will
 * be innermost, and which are stride loops (stride_loop); built here
 * (lower_four_trips) when the test and the step only compute (the step
 * storing the variable once) and the bound and the step keep their
 * values. The loop's form in *lf. */
static bool four_trips_wanted(cg *c, const xpj_func *f, const xpj_inst *in,
                              loop_form *lf) {
  bool other = false;
  if (!(c->ops->unroll_load_loops || c->unroll_all) || c->opts->opt_level != 2 ||
      !stride_loop(c, f, in, lf))
    return false;
  unsigned loads = global_loads(c, f, in->blk[1], false, &other);
  return loads > 0 && loads < 4 && !other && computes_only(f, in->blk[0], 0) &&
         computes_only(f, in->blk[2], lf->var) &&
         stores_in(f, in->blk[2], lf->var) == 1 &&
         trip_invariant(f, in, lf->bound, 0) && trip_invariant(f, in, lf->step, 0) &&
         block_size(c, f, in->blk[1], 2000, 0) < 2000;
}

/* Marks the loop whose latch is the branch `latch` as one of the code
 * generator's own (a four-trip loop, or the loop of the trips left after
 * it): not to be unrolled (PTX says `.pragma "nounroll"`, and ptxas leaves
 * it as it is), and canonical already (xpjit.loop.canonical: one variable
 * stepped towards a bound, both computed before the loop), which the PTX
 * pipeline's induction-variable simplification leaves alone (xpj-indvars,
 * llvm_emit.cpp). */
static void mark_own_loop(cg *c, LLVMValueRef latch) {
  LLVMMetadataRef kv[2] = {
      LLVMMDStringInContext2(c->ctx, "llvm.loop.unroll.disable", 24),
      LLVMMDStringInContext2(c->ctx, "xpjit.loop.canonical", 20)};
  LLVMMetadataRef ops[3] = {LLVMTemporaryMDNode(c->ctx, NULL, 0),
                            LLVMMDNodeInContext2(c->ctx, &kv[0], 1),
                            LLVMMDNodeInContext2(c->ctx, &kv[1], 1)};
  LLVMMetadataRef id = LLVMMDNodeInContext2(c->ctx, ops, 3);
  LLVMMetadataReplaceAllUsesWith(ops[0], id); /* a distinct loop ID */
  LLVMSetMetadata(latch, LLVMGetMDKindIDInContext(c->ctx, "llvm.loop", 9),
                  LLVMMetadataAsValue(c->ctx, id));
}

/* The loop just pushed (fr's innermost) made counted loop `in` of
 * variable var, entered by branch entry, with slots: returned. */
static cg_loopctx *count_loop(cg_frame *fr, const xpj_inst *in, xpj_val var,
                              LLVMValueRef entry, cg_slots *slots) {
  cg_loopctx *L = &fr->loops[fr->nloops - 1];
  L->counted = in;
  L->var = var;
  L->entry = entry;
  L->slots = slots;
  return L;
}

/* A loop whose variable's offsets into views the code generator keeps
 * itself (scaled_pointer, scaled_index; c->ops->scale_ivs, optimised
 * code): a 64-bit variable stepped once, var = var + step, by a step
 * block that only computes, the step the same on every trip, the body
 * leaving the variable alone. Not a loop of constant trip count, which
 * LLVM unrolls (where it did not, the slots' cheaper trips tipped its
 * cost model: private.xpk nibble_histogram's 16 atomics unrolled, its
 * code 2.3x larger). Its form in *lf. */
static bool scaled_loop(cg *c, const xpj_func *f, const xpj_inst *loop,
                        loop_form *lf) {
  if (!(c->ops->scale_ivs || c->unroll_all) || c->opts->opt_level == 0 ||
      !loop_form_of(f, loop, lf) || lf->update->aux != XPJ_ADD ||
      const_trip_loop(f, loop))
    return false;
  xpj_scalar vs = scalar_of(c, lf->load->type);
  return (vs == XPJ_I64 || vs == XPJ_U64) && !stores_to(f, loop->blk[1], lf->var) &&
         computes_only(f, loop->blk[2], lf->var) &&
         stores_in(f, loop->blk[2], lf->var) == 1 &&
         trip_invariant(f, loop, lf->step, 0);
}

/* The trips of loop `in` four at a time, while four are left, then the
 * loop itself takes the rest (at most three trips, rolled):
 *
 *     lim = 0 < s <= MAX/3 ? n + (test is <=) - 3 * s : MIN;  // saturating
 *     while (i < lim) { body; step; body; step; body; step; body; step; }
 *
 * i < lim is i + 3s < n (or <=) without overflow: 3s does not wrap (the
 * test on s, at run time: a step is whatever the kernel computes), the
 * saturating subtraction (signed or unsigned, as i's type) stops at the
 * type's minimum, which no i is below, and n + 1 wraps only from the
 * type's maximum, to its minimum (then lim is the minimum too: the loop
 * below runs every trip). So the trips run are the loop's, in its
 * order, with the same values, and need no test between the copies: their
 * loads are all in flight at once. lim is computed once, before the loop,
 * and the loop's exit test is a plain count that scalar evolution reads.
 * The copies' steps set i to i0 + k * s (i0: i when the trip began), not
 * to i + s after i + s: the same values (the step block only computes and
 * stores i once, and wrapping adds agree), and no chain of adds through
 * the copies, which ptxas scheduled loads behind (one load in flight
 * instead of four where the step was hidden from scalar evolution:
 * target_ptx.c, opaque_steps). LLVM's run-time unroller (an unroll count
 * on the loop) did the same from the trip count, a division, at twice the
 * compile time of the rolled loop (docs/benchmarks.md, issue 19, twelfth
 * session). A `continue` in a copy
 * goes to that copy's step. Neither loop is unrolled further (as NVVM
 * marks its unrolled loops and their remainders): the unrolled one has
 * its loads in flight, the other runs at most three trips. */
static void lower_four_trips(cg *c, cg_frame *fr, const xpj_inst *in,
                             const loop_form *form, cg_slots *slots) {
  const xpj_func *f = fr->f;
  const loop_form lf = *form;
  /* n and s: the test and what the step computes (both only compute; the
   * step's store is left out) */
  lower_block(c, fr, in->blk[0]);
  const xpj_blockdata *sd = &f->blocks[in->blk[2]];
  for (uint32_t k = 0; k < sd->n && c->status == XPJ_OK; k++)
    if (f->insts[sd->ids[k]].op != XPJ_OP_STORE)
      lower_inst(c, fr, sd->ids[k]);
  if (c->status != XPJ_OK)
    return;
  bool is_signed = scalar_of(c, lf.load->type) == XPJ_I64;
  LLVMValueRef n = val(c, fr, lf.bound), s = val(c, fr, lf.step);
  LLVMTypeRef t = LLVMTypeOf(n);
  if (lf.test->aux == XPJ_LE)
    n = LLVMBuildAdd(c->b, n, LLVMConstInt(t, 1, 0), "");
  LLVMValueRef args[2] = {n, LLVMBuildMul(c->b, s, LLVMConstInt(t, 3, 0), "")};
  LLVMValueRef lim = cg_intrinsic(
      c, is_signed ? "llvm.ssub.sat" : "llvm.usub.sat", &t, 1, args, 2);
  LLVMValueRef least = LLVMConstInt(t, is_signed ? 1ull << 63 : 0, 0);
  /* 0 < s <= max / 3: 3s does not wrap */
  LLVMValueRef fits = LLVMBuildICmp(
      c->b, LLVMIntULE, LLVMBuildSub(c->b, s, LLVMConstInt(t, 1, 0), ""),
      LLVMConstInt(t, (is_signed ? INT64_MAX : UINT64_MAX) / 3 - 1, 0), "");
  lim = LLVMBuildSelect(c->b, fits, lim, least, "");
  LLVMBasicBlockRef head = new_bb(c, "four.cond"), body = new_bb(c, "four.body"),
                    done = new_bb(c, "four.end");
  /* the views' elements the body indexes by the variable (scaled_pointer,
   * scaled_index; slots NULL: none): slots the copies share, copy k
   * reading k * s * stride further on (the form loop strength reduction
   * made, whose offsets ptxas folds into the loads' addresses) */
  LLVMValueRef entry = slots && !terminated(c) ? LLVMBuildBr(c->b, head) : NULL;
  if (!entry)
    br(c, head);
  LLVMPositionBuilderAtEnd(c->b, head);
  xpj_val iv = (xpj_val)(lf.load - f->insts);
  lower_inst(c, fr, iv);
  if (c->status != XPJ_OK)
    return;
  LLVMBuildCondBr(c->b,
                  LLVMBuildICmp(c->b, is_signed ? LLVMIntSLT : LLVMIntULT,
                                val(c, fr, iv), lim, ""),
                  body, done);
  LLVMValueRef i0 = val(c, fr, iv), var = val(c, fr, lf.var);
  xpj_scalar is = scalar_of(c, lf.load->type);
  for (int k = 0; k < 4 && c->status == XPJ_OK; k++) {
    LLVMBasicBlockRef step = new_bb(c, "four.step");
    LLVMPositionBuilderAtEnd(c->b, body);
    if (!push_loop(c, fr, done, step, false))
      return;
    if (entry) {
      cg_loopctx *L = count_loop(fr, in, lf.var, entry, slots);
      L->copy = (unsigned)k;
      L->step = s;
    }
    lower_block(c, fr, in->blk[1]);
    fr->nloops--;
    br(c, step);
    LLVMPositionBuilderAtEnd(c->b, step);
    LLVMValueRef ks =
        k ? LLVMBuildMul(c->b, s, LLVMConstInt(t, (unsigned)k + 1, 0), "") : s;
    store_elem(c, var, LLVMBuildAdd(c->b, i0, ks, ""), is);
    if (k == 3) {
      if (!terminated(c)) {
        step_scaled(c, slots, ks);
        mark_own_loop(c, LLVMBuildBr(c->b, head));
      }
      break;
    }
    body = new_bb(c, "four.body");
    br(c, body);
  }
  LLVMPositionBuilderAtEnd(c->b, done);
}

static void lower_loop(cg *c, cg_frame *fr, xpj_val id, bool wg) {
  const xpj_inst *in = &fr->f->insts[id];
  LLVMBasicBlockRef cb = new_bb(c, "loop.cond"), bb = new_bb(c, "loop.body"),
                    sb = new_bb(c, "loop.step"), xb = new_bb(c, "loop.end");
  loop_form lf, sf;
  /* the slots of scaled_pointer and scaled_index, on the heap (a kernel's
   * loops nest deep, each level a frame of this function): the four-trip
   * loop's, where there is one, go on in the loop of the trips left (at
   * its end, each is what the variable's value there gives); none when
   * out of memory (the code is then LSR's to reduce) */
  cg_slots *slots = !wg && scaled_loop(c, fr->f, in, &sf)
                        ? calloc(1, sizeof *slots)
                        : NULL;
  bool four = !wg && four_trips_wanted(c, fr->f, in, &lf);
  if (four)
    lower_four_trips(c, fr, in, &lf, slots);
  /* (the branch into the loop: its variable's slots start before it) */
  LLVMValueRef entry = slots && !terminated(c) ? LLVMBuildBr(c->b, cb) : NULL;
  if (!entry)
    br(c, cb);
  LLVMPositionBuilderAtEnd(c->b, cb);
  if (wg)
    lower_wg_block(c, fr, in->blk[0]);
  else
    lower_block(c, fr, in->blk[0]);
  if (in->imm.i) {
    LLVMValueRef cond;
    if (wg) {
      fr->cur_run = 0;
      cond = val(c, fr, (xpj_val)in->imm.i);
      if (c->wg_multi && c->cpu_active) {
        /* every work-item returned: leave the group */
        LLVMValueRef act = LLVMBuildLoad2(c->b, c->t_i64, c->cpu_active, "");
        LLVMBasicBlockRef go = new_bb(c, "loop.live");
        LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, act, cg_i64(c, 0), ""),
                        c->group_exit, go);
        LLVMPositionBuilderAtEnd(c->b, go);
      }
    } else {
      cond = val(c, fr, (xpj_val)in->imm.i);
    }
    if (!terminated(c))
      LLVMBuildCondBr(c->b, cond, bb, xb);
  } else {
    br(c, bb);
  }
  if (!push_loop(c, fr, xb, sb, wg)) {
    free(slots);
    return;
  }
  if (entry)
    count_loop(fr, in, sf.var, entry, slots);
  LLVMPositionBuilderAtEnd(c->b, bb);
  if (wg)
    lower_wg_block(c, fr, in->blk[1]);
  else
    lower_block(c, fr, in->blk[1]);
  br(c, sb);
  LLVMPositionBuilderAtEnd(c->b, sb);
  if (wg)
    lower_wg_block(c, fr, in->blk[2]);
  else
    lower_block(c, fr, in->blk[2]);
  if (entry && !terminated(c) && c->status == XPJ_OK)
    step_scaled(c, slots,
                to_i64(c, val(c, fr, sf.step), scalar_of(c, fr->f->insts[sf.step].type)));
  if (!terminated(c)) {
    LLVMValueRef latch = LLVMBuildBr(c->b, cb);
    note_loop(c, cb, xb, latch);
    if (four)
      mark_own_loop(c, latch);
  }
  fr->nloops--;
  free(slots);
  LLVMPositionBuilderAtEnd(c->b, xb);
}

/* ---- unit-stride versions of loops (CPU) ----------------------------- */

/* Adds the views indexed in block b of fr's function (nested blocks
 * included) to out[0..n), without repeats, up to max, and returns the new
 * n. *size estimates the instructions the loop will have once LLVM has
 * unrolled it: each counts weight, those of nested loops 16 times as much
 * (short loops of constant trip count are unrolled completely), those of
 * called functions once more (they are inlined). */
static unsigned views_indexed(cg *c, cg_frame *fr, xpj_block b, cg_view **out,
                              unsigned n, unsigned max, uint64_t weight,
                              uint64_t *size) {
  const xpj_func *f = fr->f;
  if (!b)
    return n;
  const xpj_blockdata *bd = &f->blocks[b];
  for (uint32_t i = 0; i < bd->n; i++) {
    const xpj_inst *in = &f->insts[bd->ids[i]];
    *size += weight;
    if (in->op == XPJ_OP_CALL) {
      const xpj_func *callee = callee_of(c, in);
      *size += callee ? weight * callee->ninsts : 0;
    }
    if (in->op == XPJ_OP_IF || in->op == XPJ_OP_LOOP) {
      uint64_t w = in->op == XPJ_OP_LOOP && weight < (1u << 20) ? 16 * weight
                                                                : weight;
      for (int k = 0; k < 3; k++)
        n = views_indexed(c, fr, in->blk[k], out, n, max, w, size);
      continue;
    }
    if (in->op != XPJ_OP_INDEX)
      continue;
    xpj_val arr = args_of(f, in)[0];
    if (tinfo(c, f->insts[arr].type)->kind != XPJ_TK_VIEW ||
        f->insts[arr].op != XPJ_OP_PARAM)
      continue;
    cg_view *vw = view_of(c, fr, arr);
    bool seen = !vw || vw->rank < 1;
    for (unsigned k = 0; k < n && !seen; k++)
      seen = out[k] == vw;
    if (!seen && n < max)
      out[n++] = vw;
  }
  return n;
}

/* CPU: a loop of one work-item that indexes views runs in two versions:
 * one where the last stride of each of those views is 1 (a constant: the
 * address steps by the element size, `stride(x, d)` folds, and LLVM
 * vectorises with plain loads) and one for any strides. LLVM's vectoriser
 * versions the loops it vectorises on strides itself, but not the others
 * (a histogram's scatter, loops with early exits or that carry a
 * dependence), where every index would be multiplied by a stride loaded at
 * run time: 1.4x on the local histogram of bench/cpu. The strided
 * version is left scalar (target_cpu.c), so that the second version costs
 * little compile time; loops inside a versioned loop are not versioned
 * again, loops larger than VERSION_MAX_INSTS once unrolled not at all, and
 * a kernel's versions copy at most VERSION_BUDGET instructions in all. */
enum {
  VERSION_MAX_VIEWS = 8,
  VERSION_MAX_INSTS = 400,
  VERSION_BUDGET = 1600,
};

/* The views indexed in blocks b[0..nb) whose last stride is not a
 * constant (vw[0..*n)), and the condition that all those strides are 1;
 * NULL when there is none, or when the code would copy more than the
 * budget allows (*size: its estimate, see views_indexed). */
static LLVMValueRef unit_strides(cg *c, cg_frame *fr, const xpj_block *b,
                                 unsigned nb, cg_view **vw, unsigned *n,
                                 uint64_t *size) {
  *n = 0;
  *size = 0;
  for (unsigned k = 0; k < nb; k++)
    *n = views_indexed(c, fr, b[k], vw, *n, VERSION_MAX_VIEWS, 1, size);
  if (*size > VERSION_MAX_INSTS || c->versioned_insts + *size > VERSION_BUDGET)
    return NULL;
  LLVMValueRef cond = NULL, one = cg_i64(c, 1);
  for (unsigned k = 0; k < *n; k++) {
    LLVMValueRef st = vw[k]->stride[vw[k]->rank - 1];
    if (LLVMIsConstant(st))
      continue;
    LLVMValueRef eq = LLVMBuildICmp(c->b, LLVMIntEQ, st, one, "unit");
    cond = cond ? LLVMBuildAnd(c->b, cond, eq, "") : eq;
  }
  return c->status == XPJ_OK ? cond : NULL;
}

/* Lowers code twice under cond (unit_strides): once with the last stride
 * of views vw[0..n) the constant 1, once as they are, the second version
 * marked strided (not vectorised, target_cpu.c). */
typedef void (*versioned_fn)(cg *c, cg_frame *fr, xpj_val arg);

static void lower_versions(cg *c, cg_frame *fr, LLVMValueRef cond,
                           cg_view **vw, unsigned n, uint64_t size,
                           versioned_fn lower, xpj_val arg) {
  LLVMBasicBlockRef unit = new_bb(c, "unit"), any = new_bb(c, "strided"),
                    join = new_bb(c, "versions.end");
  LLVMBuildCondBr(c->b, cond, unit, any);
  c->versioned_insts += size;
  LLVMValueRef saved[VERSION_MAX_VIEWS], one = cg_i64(c, 1);
  c->versioned = true;
  LLVMPositionBuilderAtEnd(c->b, unit);
  for (unsigned k = 0; k < n; k++) {
    saved[k] = vw[k]->stride[vw[k]->rank - 1];
    vw[k]->stride[vw[k]->rank - 1] = one;
  }
  /* the second copy reuses the first one's local memory: both lower the
   * same arrays in the same order */
  uint64_t local_bytes = c->local_bytes;
  lower(c, fr, arg);
  br(c, join);
  for (unsigned k = 0; k < n; k++)
    vw[k]->stride[vw[k]->rank - 1] = saved[k];
  uint64_t local_end = c->local_bytes;
  c->local_bytes = local_bytes;
  LLVMPositionBuilderAtEnd(c->b, any);
  c->strided_copy = true;
  lower(c, fr, arg);
  br(c, join);
  if (c->local_bytes != local_end)
    cg_fail(c, XPJ_ERR_COMPILE, "internal: versions differ in local memory");
  c->strided_copy = c->versioned = false;
  LLVMPositionBuilderAtEnd(c->b, join);
}

static void lower_plain_loop(cg *c, cg_frame *fr, xpj_val id) {
  lower_loop(c, fr, id, false);
}

static void lower_loop_versions(cg *c, cg_frame *fr, xpj_val id) {
  const xpj_inst *in = &fr->f->insts[id];
  cg_view *vw[VERSION_MAX_VIEWS];
  unsigned n;
  uint64_t size;
  LLVMValueRef cond = unit_strides(c, fr, in->blk, 3, vw, &n, &size);
  if (!cond)
    lower_loop(c, fr, id, false);
  else
    lower_versions(c, fr, cond, vw, n, size, lower_plain_loop, id);
}

static void lower_return(cg *c, cg_frame *fr, const xpj_inst *in) {
  const uint32_t *a = args_of(fr->f, in);
  if (fr->call && fr->wg && c->cur_loop) {
    const char *file = xpj_module_file_name(c->m, in->loc.file);
    /* (each work-item would leave the function at its own point, and
     * the function's later runs and its final return know no per-call
     * flags to skip it) */
    cg_fail(c, XPJ_ERR_UNSUPPORTED, "%s%s%u:%u: a 'return' inside an if or "
            "a loop that reaches no barrier, in device function '%s', which "
            "reaches barriers or work-group collectives, is not supported on "
            "the CPU: keep the result in a variable and return it at the "
            "function's end",
            file ? file : "", file ? ":" : "line ", in->loc.line, in->loc.col,
            fr->f->name);
    return;
  }
  if (fr->call) { /* inlined device function */
    if (in->nargs && fr->ret_slot)
      store_elem(c, fr->ret_slot, val(c, fr, a[0]),
                 scalar_of(c, fr->f->insts[a[0]].type));
    LLVMBuildBr(c->b, fr->ret_bb);
    return;
  }
  if (c->ops->simt || !c->wg_multi) {
    LLVMBuildBr(c->b, c->wi_latch); /* SIMT: the latch is the ret block */
    return;
  }
  if (c->cpu_flags_off < 0) { /* nothing runs for it after this run */
    LLVMBuildBr(c->b, c->wi_latch);
    return;
  }
  /* CPU nd-range with barriers: this work-item is done for the group */
  LLVMBuildStore(c->b, LLVMConstInt(c->t_i8, 1, 0), flag_addr(c, c->cpu_wi));
  LLVMValueRef act = LLVMBuildLoad2(c->b, c->t_i64, c->cpu_active, "");
  LLVMBuildStore(c->b, LLVMBuildSub(c->b, act, cg_i64(c, 1), ""), c->cpu_active);
  LLVMBuildBr(c->b, c->wi_latch);
}

static void lower_inst(cg *c, cg_frame *fr, xpj_val id) {
  const xpj_func *f = fr->f;
  const xpj_inst *in = &f->insts[id];
  const uint32_t *a = args_of(f, in);
  LLVMBuilderRef B = c->b;
  if (c->status != XPJ_OK)
    return;
  if (++c->inlined > MAX_INLINED) {
    cg_fail(c, XPJ_ERR_UNSUPPORTED, "kernel is too large after inlining "
            "device functions (more than %u instructions)", MAX_INLINED);
    return;
  }
  if (terminated(c)) {
    /* code after a terminator in an enclosing block is unreachable */
    LLVMPositionBuilderAtEnd(B, new_bb(c, "dead"));
  }
  di_at(c, in->loc);
  if (aliased(fr, id))
    return;
  xpj_scalar s = scalar_of(c, in->type);
  switch ((xpj_op)in->op) {
  case XPJ_OP_NOP:
  case XPJ_OP_PARAM:
  case XPJ_OP_CONST:
    break;
  case XPJ_OP_BINOP: {
    xpj_scalar os = scalar_of(c, f->insts[a[0]].type);
    def(c, fr, id, lower_binop(c, (xpj_binop)in->aux, os, val(c, fr, a[0]),
                               val(c, fr, a[1])));
    break;
  }
  case XPJ_OP_UNOP: {
    LLVMValueRef x = val(c, fr, a[0]), r;
    switch ((xpj_unop)in->aux) {
    case XPJ_NEG:
      r = cg_scalar_is_float(s) ? LLVMBuildFNeg(B, x, "") : LLVMBuildNeg(B, x, "");
      break;
    case XPJ_NOT:
    case XPJ_LNOT:
    default:
      r = LLVMBuildNot(B, x, "");
      break;
    }
    def(c, fr, id, r);
    break;
  }
  case XPJ_OP_CAST:
    def(c, fr, id, lower_cast(c, val(c, fr, a[0]),
                              scalar_of(c, f->insts[a[0]].type), s));
    break;
  case XPJ_OP_VAR: {
    xpj_scalar es = scalar_of(c, in->type);
    fr->vals[id] = private_storage(c, fr, id, mem_type(c, es));
    break;
  }
  case XPJ_OP_ARRAY: {
    const xpj_typeinfo *ti = tinfo(c, in->type);
    xpj_scalar es = scalar_of(c, in->type);
    uint64_t n = 1;
    for (int k = 0; k < ti->rank; k++)
      n *= (uint64_t)ti->dims[k];
    uint64_t bytes = n * scalar_bytes(es);
    LLVMTypeRef at = LLVMArrayType2(mem_type(c, es), n);
    if (ti->space == XPJ_SPACE_LOCAL) {
      uint64_t off = (c->local_bytes + 15) & ~(uint64_t)15;
      c->local_bytes = off + bytes;
      if (c->ops->simt) {
        LLVMValueRef g = LLVMAddGlobalInAddressSpace(c->mod, at, "local",
                                                     c->ops->as_local);
        LLVMSetLinkage(g, LLVMInternalLinkage);
        LLVMSetInitializer(g, LLVMGetPoison(at));
        LLVMSetAlignment(g, 16);
        fr->vals[id] = g;
      } else {
        /* in the entry block, so that every run of the group sees it */
        LLVMBuilderRef eb = LLVMCreateBuilderInContext(c->ctx);
        LLVMPositionBuilderBefore(eb, LLVMGetFirstInstruction(c->entry_bb));
        LLVMValueRef o = cg_i64(c, (int64_t)off);
        fr->vals[id] = LLVMBuildGEP2(eb, c->t_i8, c->cpu_local_mem, &o, 1, "");
        LLVMDisposeBuilder(eb);
      }
    } else {
      LLVMValueRef p = private_storage(c, fr, id, at);
      zero_fill(c, p, bytes, scalar_bytes(es));
      fr->vals[id] = p;
    }
    break;
  }
  case XPJ_OP_INDEX:
    def(c, fr, id, lower_index(c, fr, in));
    break;
  case XPJ_OP_LOAD: {
    LLVMValueRef r = load_elem(c, val(c, fr, a[0]), s);
    tag_access(c, fr, a[0], s == XPJ_BOOL ? LLVMGetOperand(r, 0) : r);
    def(c, fr, id, r);
    break;
  }
  case XPJ_OP_STORE:
    tag_access(c, fr, a[0],
               store_elem(c, val(c, fr, a[0]), val(c, fr, a[1]),
                          scalar_of(c, f->insts[a[1]].type)));
    break;
  case XPJ_OP_SHAPE:
  case XPJ_OP_STRIDE:
  case XPJ_OP_SIZE:
  case XPJ_OP_NDIM: {
    const xpj_typeinfo *ti = tinfo(c, f->insts[a[0]].type);
    if (ti->kind != XPJ_TK_VIEW) {
      cg_fail(c, XPJ_ERR_COMPILE, "internal: unfolded query of a static array");
      break;
    }
    cg_view *vw = view_of(c, fr, a[0]);
    if (!vw)
      break;
    LLVMValueRef r;
    if (in->op == XPJ_OP_NDIM) {
      r = cg_i64(c, vw->rank);
    } else if (in->op == XPJ_OP_SIZE) {
      r = vw->shape[0];
      for (int k = 1; k < vw->rank; k++)
        r = LLVMBuildMul(B, r, vw->shape[k], "");
    } else {
      LLVMValueRef *comp = in->op == XPJ_OP_SHAPE ? vw->shape : vw->stride;
      int64_t d;
      if (xpj_val_const(f, a[1], &d, NULL))
        r = (d >= 0 && d < vw->rank) ? comp[d] : cg_i64(c, 0);
      else
        r = select_dim(c, comp, vw->rank, val(c, fr, a[1]));
    }
    def(c, fr, id, r);
    break;
  }
  case XPJ_OP_WI:
    def(c, fr, id, lower_wi(c, (xpj_wi)in->aux, (unsigned)in->imm.i));
    break;
  case XPJ_OP_BARRIER:
    if (c->ops->simt)
      c->ops->barrier(c, in->aux);
    /* CPU: a barrier only separates runs (lower_wg_block) */
    break;
  case XPJ_OP_ATOMIC:
  case XPJ_OP_CMPXCHG:
  case XPJ_OP_ALOAD:
  case XPJ_OP_ASTORE: {
    LLVMValueRef r = lower_atomic(c, fr, in);
    if (in->op != XPJ_OP_ASTORE)
      def(c, fr, id, r);
    break;
  }
  case XPJ_OP_MATH: {
    LLVMValueRef args[3];
    unsigned n = in->nargs > 3 ? 3 : in->nargs;
    for (unsigned k = 0; k < n; k++)
      args[k] = val(c, fr, a[k]);
    xpj_scalar as = scalar_of(c, f->insts[a[0]].type);
    def(c, fr, id, lower_math(c, (xpj_math)in->aux, as, args, n));
    break;
  }
  case XPJ_OP_GROUP:
    def(c, fr, id, lower_group(c, fr, in));
    break;
  case XPJ_OP_CALL:
    lower_call(c, fr, id, false);
    break;
  case XPJ_OP_IF:
    lower_if(c, fr, id);
    break;
  case XPJ_OP_YIELD: {
    xpj_val owner = f->blocks[in->in_block].parent;
    if (fr->wg && fr->wgstmt[owner]) {
      /* an arm of a value if run at work-group level (lower_wg_stmt): in
       * a run, each work-item's value goes where the if's users read it
       * (its slot, and the uniform slot when work-group code reads it) */
      def(c, fr, owner, val(c, fr, a[0]));
      break;
    }
    LLVMValueRef slot = fr->vals[owner];
    if (!slot) {
      cg_fail(c, XPJ_ERR_COMPILE, "internal: yield outside a value if");
      break;
    }
    store_elem(c, slot, val(c, fr, a[0]), scalar_of(c, f->insts[a[0]].type));
    break; /* the enclosing lower_if branches to the merge block */
  }
  case XPJ_OP_LOOP:
    if (!c->ops->simt && !c->versioned)
      lower_loop_versions(c, fr, id);
    else
      lower_loop(c, fr, id, false);
    break;
  case XPJ_OP_BREAK:
  case XPJ_OP_CONTINUE:
    if (!fr->nloops) {
      cg_fail(c, XPJ_ERR_COMPILE, "internal: break outside a loop");
      break;
    }
    LLVMBuildBr(B, in->op == XPJ_OP_BREAK ? fr->loops[fr->nloops - 1].brk
                                          : fr->loops[fr->nloops - 1].cont);
    break;
  case XPJ_OP_RETURN:
    lower_return(c, fr, in);
    break;
  default:
    cg_fail(c, XPJ_ERR_COMPILE, "internal: cannot lower op %u", in->op);
  }
}

static void lower_block(cg *c, cg_frame *fr, xpj_block b) {
  if (!b)
    return;
  const xpj_blockdata *bd = &fr->f->blocks[b];
  for (uint32_t i = 0; i < bd->n && c->status == XPJ_OK; i++)
    lower_inst(c, fr, bd->ids[i]);
}

/* ---- CPU work-item loops ------------------------------------------- */

typedef struct counted_loop {
  LLVMBasicBlockRef head, body, latch, exit;
  LLVMValueRef iv, next;
} counted_loop;

/* for (iv = start; iv < end; iv++) { ... } : positions the builder in the
 * body; close with loop_close. */
static void loop_open(cg *c, counted_loop *L, LLVMValueRef start,
                      LLVMValueRef end, const char *name) {
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b);
  L->head = new_bb(c, name);
  L->body = new_bb(c, "body");
  L->latch = new_bb(c, "latch");
  L->exit = new_bb(c, "exit");
  LLVMBuildBr(c->b, L->head);
  LLVMPositionBuilderAtEnd(c->b, L->head);
  L->iv = LLVMBuildPhi(c->b, c->t_i64, name);
  LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, L->iv, end, ""),
                  L->body, L->exit);
  LLVMAddIncoming(L->iv, &start, &pre, 1);
  LLVMPositionBuilderAtEnd(c->b, L->body);
}

/* Closes a loop of loop_open that steps by step. */
static void loop_close_step(cg *c, counted_loop *L, LLVMValueRef step) {
  br(c, L->latch);
  LLVMPositionBuilderAtEnd(c->b, L->latch);
  L->next = LLVMBuildAdd(c->b, L->iv, step, "");
  note_loop(c, L->head, L->exit, LLVMBuildBr(c->b, L->head));
  LLVMAddIncoming(L->iv, &L->next, &L->latch, 1);
  LLVMPositionBuilderAtEnd(c->b, L->exit);
}

static void loop_close(cg *c, counted_loop *L) {
  loop_close_step(c, L, cg_i64(c, 1));
}

/* Marks the loop just closed as a plain work-item loop, one that
 * target_cpu.c neither unrolls nor interleaves at -O1/-O2: a loop of an
 * nd-range kernel with barriers or interchanged loops, outside any
 * interchanged loop (inside one, and in range kernels, the work-item loop
 * is where the vector code comes from: it keeps every optimisation). */
static void mark_wi_loop(cg *c) {
  if (c->wg_multi && c->ncpu_loops && c->kernel->kind == XPJ_FUNC_NDRANGE && !c->xdepth)
    c->cpu_loops[c->ncpu_loops - 1].plain_wi = true;
}

/* Runs instructions [from, to) of block b once per work-item of the
 * group (nd-range on the CPU) or of the chunk (range). */
static void emit_wi_loop(cg *c, cg_frame *fr, xpj_block b, uint32_t from,
                         uint32_t to) {
  const xpj_blockdata *bd = &fr->f->blocks[b];
  /* one loop per dimension of the kernel, the fastest innermost; the
   * dimensions past its rank have local size 1 */
  unsigned nd = c->kernel->dims ? c->kernel->dims : 3;
  counted_loop L[3];
  LLVMValueRef *ls = &c->cpu_launch[3];
  c->cur_loop = ++c->loop_serial;
  if (c->kernel->kind == XPJ_FUNC_RANGE) {
    /* a chunk of a row of a range kernel (lower_cpu) */
    nd = 1;
    loop_open(c, &L[0], cg_i64(c, 0), c->cpu_wgs, "wi.x");
    c->cpu_wi = L[0].iv;
    c->cpu_gid[0] = LLVMBuildAdd(c->b, c->chunk_first, L[0].iv, "");
    c->cpu_glinear = LLVMBuildAdd(c->b, c->chunk_linear, L[0].iv, "");
  } else {
    for (unsigned d = 3; d-- > 0;) {
      if (d < nd) {
        static const char *const name[3] = {"wi.x", "wi.y", "wi.z"};
        loop_open(c, &L[d], cg_i64(c, 0), ls[d], name[d]);
        c->cpu_lid[d] = L[d].iv;
      } else {
        c->cpu_lid[d] = cg_i64(c, 0);
      }
    }
    LLVMValueRef wi = c->cpu_lid[nd - 1];
    for (unsigned d = nd - 1; d-- > 0;)
      wi = LLVMBuildAdd(c->b, LLVMBuildNUWMul(c->b, wi, ls[d], ""), c->cpu_lid[d], "");
    c->cpu_wi = wi;
    for (unsigned d = 0; d < 3; d++)
      c->cpu_gid[d] = d < nd ? LLVMBuildAdd(c->b, LLVMBuildMul(c->b, c->cpu_grp[d], ls[d], ""),
                                            c->cpu_lid[d], "")
                             : c->cpu_grp[d];
    c->cpu_glinear = linear3(c, c->cpu_gid, c->cpu_launch);
  }
  c->wi_latch = L[0].latch;
  c->in_wi_run = true;
  if (c->wg_multi && c->cpu_flags_off >= 0) {
    LLVMValueRef flag = LLVMBuildLoad2(c->b, c->t_i8, flag_addr(c, c->cpu_wi), "");
    LLVMBasicBlockRef live = new_bb(c, "wi.live");
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntNE, flag,
                                        LLVMConstInt(c->t_i8, 0, 0), ""),
                    L[0].latch, live);
    LLVMPositionBuilderAtEnd(c->b, live);
  }
  for (uint32_t i = from; i < to && c->status == XPJ_OK; i++) {
    if (is_uni(fr, bd->ids[i]))
      continue; /* lowered before the loop (lower_wg_block) */
    fr->cur_run = fr->wg ? fr->run[bd->ids[i]] : 0;
    lower_inst(c, fr, bd->ids[i]);
  }
  for (unsigned d = 0; d < nd; d++) {
    loop_close(c, &L[d]);
    mark_wi_loop(c);
  }
  c->cur_loop = 0;
  c->cpu_wi = NULL;
  c->in_wi_run = false;
  fr->cur_run = 0;
}

/* Copies a work-group-level return value into the call's result region. */
static void wg_return_value(cg *c, cg_frame *fr, xpj_val v) {
  counted_loop L;
  xpj_scalar s = scalar_of(c, fr->f->insts[v].type);
  LLVMValueRef wgs = c->cpu_wgs;
  c->cur_loop = ++c->loop_serial;
  loop_open(c, &L, cg_i64(c, 0), wgs, "ret.copy");
  c->cpu_wi = L.iv;
  fr->cur_run = UINT32_MAX; /* a run of its own: read from slots */
  LLVMValueRef x = val(c, fr, v);
  if (s == XPJ_BOOL)
    x = LLVMBuildZExt(c->b, x, c->t_i8, "");
  LLVMBuildStore(c->b, x, scratch_addr(c, fr->ret_region, scalar_bytes(s), L.iv));
  loop_close(c, &L);
  mark_wi_loop(c);
  c->cur_loop = 0;
  c->cpu_wi = NULL;
  fr->cur_run = 0;
}

/* Work-item wi of the group has returned (its flag is set). */
static LLVMValueRef wi_returned(cg *c, LLVMValueRef wi) {
  LLVMValueRef flag = LLVMBuildLoad2(c->b, c->t_i8, flag_addr(c, wi), "");
  return LLVMBuildICmp(c->b, LLVMIntNE, flag, LLVMConstInt(c->t_i8, 0, 0), "");
}

/* Gives every work-item of the group value x as the result of collective
 * id (its slot; the uniform slot too when work-group code reads it). */
static void wg_define_all(cg *c, cg_frame *fr, xpj_val id, LLVMValueRef x) {
  if (fr->need[id] & NEED_SLOT) {
    counted_loop L;
    c->cur_loop = ++c->loop_serial;
    loop_open(c, &L, cg_i64(c, 0), c->cpu_wgs, "coll.def");
    c->cpu_wi = L.iv;
    def(c, fr, id, x);
    loop_close(c, &L);
    mark_wi_loop(c);
    c->cur_loop = 0;
    c->cpu_wi = NULL;
  } else {
    def(c, fr, id, x);
  }
  fr->vals[id] = x;
}

/* A work-group collective on the CPU, at work-group level, between the
 * runs: the values of the work-items are in their slots (frame_make_wg),
 * and are combined in linear id order by one loop over the group, which
 * writes each work-item's result to the collective's slot. Work-items
 * that have returned take no part (and get nothing). */
static void lower_wg_group(cg *c, cg_frame *fr, xpj_val id) {
  const xpj_inst *in = &fr->f->insts[id];
  const uint32_t *a = args_of(fr->f, in);
  xpj_scalar s = scalar_of(c, in->type);
  xpj_group_op op = (xpj_group_op)in->order;
  fr->cur_run = UINT32_MAX; /* a run of its own: values come from slots */
  if (in->aux == XPJ_COLL_BROADCAST) {
    /* the id is uniform: read where work-group code reads values */
    fr->cur_run = 0;
    LLVMValueRef src = to_i64(c, val(c, fr, a[1]),
                              scalar_of(c, fr->f->insts[a[1]].type));
    /* an id outside the group reads work-item 0, not another's scratch */
    src = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntULT, src, c->cpu_wgs, ""),
                          src, cg_i64(c, 0), "");
    fr->cur_run = UINT32_MAX;
    c->cur_loop = ++c->loop_serial;
    c->cpu_wi = src;
    LLVMValueRef x = val(c, fr, a[0]);
    c->cur_loop = 0;
    c->cpu_wi = NULL;
    fr->cur_run = 0;
    wg_define_all(c, fr, id, x);
    return;
  }
  /* f16 sums and products accumulate in f32, rounded once (as on GPUs) */
  xpj_scalar as = s == XPJ_F16 && op <= XPJ_GOP_MUL ? XPJ_F32 : s;
  LLVMTypeRef at = cg_scalar_type(c, as);
  LLVMValueRef acc = entry_alloca(c, at, "coll.acc");
  LLVMBuildStore(c->b, cg_group_identity(c, op, as), acc);
  counted_loop L;
  c->cur_loop = ++c->loop_serial;
  loop_open(c, &L, cg_i64(c, 0), c->cpu_wgs, "coll");
  c->cpu_wi = L.iv;
  if (c->cpu_flags_off >= 0) {
    LLVMBasicBlockRef live = new_bb(c, "coll.live");
    LLVMBuildCondBr(c->b, wi_returned(c, L.iv), L.latch, live);
    LLVMPositionBuilderAtEnd(c->b, live);
  }
  LLVMValueRef x = val(c, fr, a[0]);
  if (as != s)
    x = LLVMBuildFPExt(c->b, x, at, "");
  LLVMValueRef old = LLVMBuildLoad2(c->b, at, acc, "");
  LLVMValueRef now = cg_group_combine(c, op, as, old, x);
  LLVMBuildStore(c->b, now, acc);
  if (in->aux != XPJ_COLL_REDUCE) {
    LLVMValueRef r = in->aux == XPJ_COLL_SCAN_INCL ? now : old;
    def(c, fr, id, as != s ? LLVMBuildFPTrunc(c->b, r, cg_scalar_type(c, s), "")
                           : r);
  }
  loop_close(c, &L);
  mark_wi_loop(c);
  c->cur_loop = 0;
  c->cpu_wi = NULL;
  fr->cur_run = 0;
  if (in->aux == XPJ_COLL_REDUCE) {
    LLVMValueRef r = LLVMBuildLoad2(c->b, at, acc, "");
    wg_define_all(c, fr, id, as != s ? LLVMBuildFPTrunc(c->b, r,
                                                        cg_scalar_type(c, s), "")
                                     : r);
    return;
  }
  /* work-group code reads a scan as the last work-item's value */
  fr->vals[id] = fr->uslot[id]
                     ? LLVMBuildLoad2(c->b, mem_type(c, s), fr->uslot[id], "")
                     : LLVMGetUndef(cg_scalar_type(c, s));
  if (fr->uslot[id] && s == XPJ_BOOL)
    fr->vals[id] = LLVMBuildTrunc(c->b, fr->vals[id], c->t_i1, "");
}

static void lower_wg_stmt(cg *c, cg_frame *fr, xpj_val id) {
  const xpj_inst *in = &fr->f->insts[id];
  const uint32_t *a = args_of(fr->f, in);
  fr->cur_run = 0;
  if (terminated(c))
    LLVMPositionBuilderAtEnd(c->b, new_bb(c, "dead"));
  switch (in->op) {
  case XPJ_OP_BARRIER:
    break;
  case XPJ_OP_GROUP:
    lower_wg_group(c, fr, id);
    break;
  case XPJ_OP_CALL:
    lower_call(c, fr, id, true);
    break;
  case XPJ_OP_IF: {
    /* a value if (`c ? a : b`, `a && b`, `a || b`) whose chosen arm
     * reaches a barrier or a collective runs like a statement if: its
     * condition is uniform, and each arm's yield, in a run, stores every
     * work-item's value in the if's slots (XPJ_OP_YIELD in lower_inst);
     * after the merge, work-group code reads the uniform slot */
    xpj_scalar rs = scalar_of(c, in->type);
    if (rs != XPJ_VOID && (fr->need[id] & NEED_USLOT) && !fr->uslot[id])
      fr->uslot[id] = entry_alloca(c, mem_type(c, rs), "uniform");
    LLVMValueRef cond = val(c, fr, a[0]);
    if (c->cpu_active) {
      LLVMValueRef act = LLVMBuildLoad2(c->b, c->t_i64, c->cpu_active, "");
      LLVMBasicBlockRef go = new_bb(c, "if.live");
      LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, act, cg_i64(c, 0), ""),
                      c->group_exit, go);
      LLVMPositionBuilderAtEnd(c->b, go);
    }
    LLVMBasicBlockRef tb = new_bb(c, "wg.then"), eb = new_bb(c, "wg.else"),
                      mb = new_bb(c, "wg.endif");
    LLVMBuildCondBr(c->b, cond, tb, eb);
    LLVMPositionBuilderAtEnd(c->b, tb);
    lower_wg_block(c, fr, in->blk[0]);
    br(c, mb);
    LLVMPositionBuilderAtEnd(c->b, eb);
    lower_wg_block(c, fr, in->blk[1]);
    br(c, mb);
    LLVMPositionBuilderAtEnd(c->b, mb);
    if (rs != XPJ_VOID) {
      /* (the yields left fr->vals[id] at a value inside a run) */
      fr->vals[id] = fr->uslot[id]
                         ? LLVMBuildLoad2(c->b, mem_type(c, rs), fr->uslot[id], "")
                         : LLVMGetUndef(cg_scalar_type(c, rs));
      if (fr->uslot[id] && rs == XPJ_BOOL)
        fr->vals[id] = LLVMBuildTrunc(c->b, fr->vals[id], c->t_i1, "");
    }
    break;
  }
  case XPJ_OP_LOOP: {
    unsigned x = fr->xloop && fr->xloop[id];
    c->xdepth += x;
    lower_loop(c, fr, id, true);
    c->xdepth -= x;
    break;
  }
  case XPJ_OP_BREAK:
  case XPJ_OP_CONTINUE:
    if (!fr->nloops) {
      cg_fail(c, XPJ_ERR_COMPILE, "internal: break outside a loop");
      return;
    }
    LLVMBuildBr(c->b, in->op == XPJ_OP_BREAK ? fr->loops[fr->nloops - 1].brk
                                             : fr->loops[fr->nloops - 1].cont);
    break;
  case XPJ_OP_RETURN:
    if (fr->call) {
      if (in->nargs && fr->ret_region >= 0)
        wg_return_value(c, fr, a[0]);
      LLVMBuildBr(c->b, fr->ret_bb);
    } else {
      LLVMBuildBr(c->b, c->group_exit);
    }
    break;
  default:
    if (is_uni(fr, id)) { /* a store to a per-group variable */
      lower_inst(c, fr, id);
      break;
    }
    cg_fail(c, XPJ_ERR_COMPILE, "internal: op %u at work-group level",
            in->op);
  }
}

static void lower_wg_block(cg *c, cg_frame *fr, xpj_block b) {
  if (!b)
    return;
  const xpj_blockdata *bd = &fr->f->blocks[b];
  uint32_t i = 0;
  while (i < bd->n && c->status == XPJ_OK) {
    xpj_val id = bd->ids[i];
    if (fr->wgstmt[id]) {
      lower_wg_stmt(c, fr, id);
      i++;
      continue;
    }
    uint32_t j = i;
    bool per_item = false;
    for (; j < bd->n && !fr->wgstmt[bd->ids[j]]; j++)
      per_item |= !is_uni(fr, bd->ids[j]);
    if (terminated(c))
      LLVMPositionBuilderAtEnd(c->b, new_bb(c, "dead"));
    /* the run's uniform values first, once (nothing in a run stores to
     * the variables they load) */
    for (uint32_t k = i; k < j && c->status == XPJ_OK; k++)
      if (is_uni(fr, bd->ids[k])) {
        fr->cur_run = 0;
        lower_inst(c, fr, bd->ids[k]);
      }
    if (per_item)
      emit_wi_loop(c, fr, b, i, j);
    i = j;
  }
}

/* ---- kernel entry points ------------------------------------------- */

static LLVMTypeRef param_abi_types(cg *c, LLVMTypeRef *out, unsigned *n) {
  const xpj_func *k = c->kernel;
  unsigned cnt = 0;
  for (unsigned i = 0; i < k->nparams; i++) {
    const xpj_typeinfo *ti = tinfo(c, k->params[i].type);
    if (ti->kind == XPJ_TK_VIEW && ti->space == XPJ_SPACE_LOCAL) {
      /* a local pointer or a byte offset, then the element count */
      out[cnt++] = c->ops->local_param_base
                       ? c->t_i64
                       : LLVMPointerTypeInContext(c->ctx, c->ops->as_local);
      out[cnt++] = c->t_i64;
    } else if (ti->kind == XPJ_TK_VIEW) {
      out[cnt++] = LLVMPointerTypeInContext(c->ctx, c->ops->simt ? c->ops->as_global : 0);
      out[cnt++] = c->t_i64; /* offset in elements */
      for (int d = 0; d < 2 * ti->rank; d++)
        out[cnt++] = c->t_i64;
    } else {
      xpj_scalar s = scalar_of(c, k->params[i].type);
      out[cnt++] = mem_type(c, s);
    }
  }
  if (k->kind == XPJ_FUNC_RANGE && c->ops->simt)
    for (int d = 0; d < 3; d++)
      out[cnt++] = c->t_i64;
  if (c->ops->simt && (c->opts->checks & XPJ_CHECK_BOUNDS))
    out[cnt++] = LLVMPointerTypeInContext(c->ctx, c->ops->as_global);
  *n = cnt;
  return c->t_void;
}

/* ABI parameter i (an i64 shape or range size) lies in [0, max]: what
 * launches check (runtime/launch.c); LLVM then counts the trips of loops
 * bounded by it (cg_target_ops.unroll_load_loops). */
static void extent_range(cg *c, unsigned i, uint64_t max) {
  if (!c->ops->unroll_load_loops || !c->fn)
    return;
  uint64_t lo = 0, hi = max + 1;
  unsigned kind = LLVMGetEnumAttributeKindForName("range", 5);
  LLVMAddAttributeAtIndex(c->fn, i + 1,
                          LLVMCreateConstantRangeAttribute(c->ctx, kind, 64,
                                                           &lo, &hi));
}

/* Builds views and scalar parameter values from ABI values. */
static void bind_params(cg *c, cg_frame *fr, LLVMValueRef *abi) {
  const xpj_func *k = c->kernel;
  unsigned p = 0;
  for (unsigned i = 0; i < k->nparams; i++) {
    const xpj_typeinfo *ti = tinfo(c, k->params[i].type);
    xpj_val pv = k->params[i].val;
    if (ti->kind == XPJ_TK_VIEW && ti->space == XPJ_SPACE_LOCAL) {
      cg_view *vw = &fr->views[i];
      if (k->kind != XPJ_FUNC_NDRANGE)
        cg_fail(c, XPJ_ERR_COMPILE, "local array parameter '%s' in range "
                "kernel '%s'", k->params[i].name, k->name);
      vw->rank = 1;
      vw->ptr = abi[p];
      if (c->ops->local_param_base)
        vw->ptr = LLVMBuildInBoundsGEP2(c->b, c->t_i8,
                                        c->ops->local_param_base(c), &vw->ptr,
                                        1, "");
      vw->shape[0] = abi[p + 1];
      vw->stride[0] = cg_i64(c, 1);
      p += 2;
    } else if (ti->kind == XPJ_TK_VIEW) {
      cg_view *vw = &fr->views[i];
      xpj_scalar es = scalar_of(c, k->params[i].type);
      vw->rank = ti->rank;
      LLVMValueRef off = abi[p + 1];
      vw->ptr = LLVMBuildGEP2(c->b, mem_type(c, es), abi[p], &off, 1, "");
      for (int d = 0; d < ti->rank; d++) {
        vw->shape[d] = abi[p + 2 + d];
        vw->stride[d] = abi[p + 2 + ti->rank + d];
        extent_range(c, p + 2 + (unsigned)d, XPJ_MAX_EXTENT - 1);
      }
      if (c->ops->simt && ti->rank > 1) { /* strides 1, shape[R-1], ... */
        LLVMValueRef want = cg_i64(c, 1), ok = NULL;
        for (int d = ti->rank - 1; d >= 0; d--) {
          LLVMValueRef eq = LLVMBuildICmp(c->b, LLVMIntEQ, vw->stride[d], want, "");
          ok = ok ? LLVMBuildAnd(c->b, ok, eq, "") : eq;
          want = LLVMBuildMul(c->b, want, vw->shape[d], "");
        }
        vw->contig = ok;
      }
      p += 2 + 2 * (unsigned)ti->rank;
    } else {
      xpj_scalar s = scalar_of(c, k->params[i].type);
      LLVMValueRef x = abi[p++];
      if (s == XPJ_BOOL)
        x = LLVMBuildICmp(c->b, LLVMIntNE, x, LLVMConstInt(c->t_i8, 0, 0), "");
      fr->vals[pv] = x;
    }
  }
  if (k->kind == XPJ_FUNC_RANGE && c->ops->simt)
    for (int d = 0; d < 3; d++) {
      extent_range(c, p, XPJ_MAX_EXTENT);
      c->range_size[d] = abi[p++];
    }
  if (c->ops->simt && (c->opts->checks & XPJ_CHECK_BOUNDS))
    c->chk_rec = abi[p++];
}

/* ---- debug info ---------------------------------------------------- */

/* Line tables for -g: a compile unit, a subprogram for the kernel, and the
 * source line of every lowered instruction. Not for SPIR-V, whose 22.1.8
 * backend does not emit debug information. */
static void di_begin(cg *c) {
  if (!c->opts->debug_info || c->target->kind == XPJ_TARGET_SPIRV)
    return;
  const char *path = xpj_module_file_name(c->m, c->kernel->loc.file);
  if (!path || !*path)
    path = "kernel.xpk";
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  size_t dirlen = slash ? (size_t)(slash - path) : 0;
  c->dib = LLVMCreateDIBuilder(c->mod);
  LLVMMetadataRef file =
      LLVMDIBuilderCreateFile(c->dib, base, strlen(base), path, dirlen);
  bool opt = c->opts->opt_level > 0;
  LLVMDIBuilderCreateCompileUnit(c->dib, LLVMDWARFSourceLanguageC11, file,
                                 "xpjit", 5, opt, "", 0, 0, "", 0,
                                 LLVMDWARFEmissionLineTablesOnly, 0, 0, 0, "",
                                 0, "", 0);
  LLVMMetadataRef ty = LLVMDIBuilderCreateSubroutineType(c->dib, file, NULL, 0,
                                                         LLVMDIFlagZero);
  const char *name = c->kernel->name;
  c->di_sp = LLVMDIBuilderCreateFunction(
      c->dib, file, name, strlen(name), c->entry, strlen(c->entry), file,
      c->kernel->loc.line, ty, 0, 1, c->kernel->loc.line, LLVMDIFlagZero, opt);
  LLVMSetSubprogram(c->fn, c->di_sp);
  LLVMAddModuleFlag(c->mod, LLVMModuleFlagBehaviorWarning, "Debug Info Version",
                    18, LLVMValueAsMetadata(LLVMConstInt(
                            c->t_i32, LLVMDebugMetadataVersion(), 0)));
  LLVMAddModuleFlag(c->mod, LLVMModuleFlagBehaviorWarning, "Dwarf Version", 13,
                    LLVMValueAsMetadata(LLVMConstInt(c->t_i32, 4, 0)));
  LLVMSetCurrentDebugLocation2(
      c->b, LLVMDIBuilderCreateDebugLocation(c->ctx, c->kernel->loc.line,
                                             c->kernel->loc.col, c->di_sp, NULL));
}

static void di_at(cg *c, xpj_loc loc) {
  if (c->dib && loc.line)
    LLVMSetCurrentDebugLocation2(
        c->b, LLVMDIBuilderCreateDebugLocation(c->ctx, loc.line, loc.col,
                                               c->di_sp, NULL));
}

static void di_end(cg *c) {
  if (!c->dib)
    return;
  LLVMDIBuilderFinalize(c->dib);
  LLVMDisposeDIBuilder(c->dib);
  c->dib = NULL;
}

static void lower_simt(cg *c, cg_frame *fr) {
  LLVMTypeRef pt[XPJ_MAX_PARAMS * (2 + 2 * XPJ_MAX_RANK) + 4];
  unsigned n;
  param_abi_types(c, pt, &n);
  LLVMTypeRef ft = LLVMFunctionType(c->t_void, pt, n, 0);
  c->fn = LLVMAddFunction(c->mod, c->entry, ft);
  LLVMSetFunctionCallConv(c->fn, c->ops->kernel_cc);
  c->entry_bb = new_bb(c, "entry");
  LLVMPositionBuilderAtEnd(c->b, c->entry_bb);
  di_begin(c);
  LLVMValueRef abi[XPJ_MAX_PARAMS * (2 + 2 * XPJ_MAX_RANK) + 4];
  for (unsigned i = 0; i < n; i++)
    abi[i] = LLVMGetParam(c->fn, i);
  bind_params(c, fr, abi);
  LLVMBasicBlockRef ret = new_bb(c, "ret");
  c->wi_latch = ret;
  if (c->kernel->kind == XPJ_FUNC_RANGE) {
    /* the launch is rounded up to whole groups: skip the extra work-items */
    LLVMValueRef out = NULL;
    for (unsigned d = 0; d < 3; d++) {
      LLVMValueRef o = LLVMBuildICmp(c->b, LLVMIntUGE,
                                     c->ops->wi(c, XPJ_WI_GLOBAL_ID, d),
                                     c->range_size[d], "");
      out = out ? LLVMBuildOr(c->b, out, o, "") : o;
    }
    LLVMBasicBlockRef body = new_bb(c, "body");
    LLVMBuildCondBr(c->b, out, ret, body);
    LLVMPositionBuilderAtEnd(c->b, body);
  }
  lower_block(c, fr, 1);
  br(c, ret);
  LLVMPositionBuilderAtEnd(c->b, ret);
  LLVMBuildRetVoid(c->b);
}

/* At the start of a group (or chunk) of a kernel whose work-items may
 * return before a later run: all of them live, none marked returned. */
static void start_group(cg *c) {
  if (!c->cpu_active)
    return;
  LLVMBuildStore(c->b, c->cpu_wgs, c->cpu_active);
  LLVMBuildMemSet(c->b, flag_addr(c, cg_i64(c, 0)), LLVMConstInt(c->t_i8, 0, 0),
                  c->cpu_wgs, 1);
}

/* Range kernels: flat = begin; while (flat < end) { decompose flat; run
 * the work-items up to the end of its row }. A kernel with interchanged
 * loops runs each row segment in chunks of RANGE_CHUNK work-items at work-
 * group level (lower_wg_block), the others in one work-item loop. */
static void lower_cpu_range(cg *c, cg_frame *fr, LLVMValueRef begin,
                            LLVMValueRef end, LLVMBasicBlockRef done) {
  LLVMValueRef *g = c->cpu_launch;
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b);
  LLVMBasicBlockRef head = new_bb(c, "seg"), segb = new_bb(c, "seg.body");
  LLVMBuildBr(c->b, head);
  LLVMPositionBuilderAtEnd(c->b, head);
  LLVMValueRef flat = LLVMBuildPhi(c->b, c->t_i64, "flat");
  LLVMAddIncoming(flat, &begin, &pre, 1);
  LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, flat, end, ""), segb, done);
  LLVMPositionBuilderAtEnd(c->b, segb);
  LLVMValueRef row = LLVMBuildUDiv(c->b, flat, g[0], "");
  LLVMValueRef i0 = LLVMBuildSub(c->b, flat, LLVMBuildMul(c->b, row, g[0], ""), "");
  LLVMValueRef i2 = LLVMBuildUDiv(c->b, row, g[1], "");
  LLVMValueRef i1 = LLVMBuildSub(c->b, row, LLVMBuildMul(c->b, i2, g[1], ""), "");
  LLVMValueRef lim = LLVMBuildSub(c->b, g[0], i0, "");
  LLVMValueRef left = LLVMBuildSub(c->b, end, flat, "");
  LLVMValueRef cnt = LLVMBuildSelect(
      c->b, LLVMBuildICmp(c->b, LLVMIntSLT, left, lim, ""), left, lim, "");
  LLVMValueRef stop = LLVMBuildAdd(c->b, i0, cnt, "");
  LLVMValueRef row_first = LLVMBuildMul(c->b, row, g[0], "");
  c->cpu_gid[1] = i1;
  c->cpu_gid[2] = i2;
  counted_loop L;
  if (c->wg_multi) {
    LLVMValueRef step = cg_i64(c, RANGE_CHUNK);
    loop_open(c, &L, i0, stop, "chunk");
    LLVMValueRef rest = LLVMBuildSub(c->b, stop, L.iv, "");
    c->cpu_wgs = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, rest, step, ""),
                                 rest, step, "chunk.size");
    c->chunk_first = L.iv;
    c->chunk_linear = LLVMBuildAdd(c->b, row_first, L.iv, "");
    c->group_exit = L.latch;
    start_group(c);
    lower_wg_block(c, fr, 1);
    loop_close_step(c, &L, step);
  } else {
    loop_open(c, &L, i0, stop, "wi");
    c->cpu_gid[0] = L.iv;
    c->cpu_glinear = LLVMBuildAdd(c->b, row_first, L.iv, "");
    c->wi_latch = L.latch;
    c->cur_loop = ++c->loop_serial;
    lower_block(c, fr, 1);
    loop_close(c, &L);
    c->cur_loop = 0;
  }
  LLVMValueRef nf = LLVMBuildAdd(c->b, flat, cnt, "");
  LLVMBasicBlockRef exitb = LLVMGetInsertBlock(c->b);
  LLVMBuildBr(c->b, head);
  LLVMAddIncoming(flat, &nf, &exitb, 1);
}

/* The code of one work-group of an nd-range kernel. */
static void lower_workgroup(cg *c, cg_frame *fr, xpj_val unused) {
  (void)unused;
  if (c->wg_multi)
    lower_wg_block(c, fr, 1);
  else
    emit_wi_loop(c, fr, 1, 0, fr->f->blocks[1].n);
}

/* A required local size whose fastest dimension has fewer work-items than
 * this: LLVM's vectoriser takes no loop of fewer than 16 iterations that
 * needs a run-time check, such as its own versions on a view's stride
 * being 1, so the 8-wide rows of local(8, 8) stayed scalar. Such kernels
 * run each group in two versions (unit strides, any strides) like the
 * loops of one work-item (lower_loop_versions). */
enum { SMALL_ROW = 16 };

/* Nd-range kernels: one iteration per work-group of [begin, end); a
 * kernel with barriers or interchanged loops runs at work-group level,
 * the others in one nest of work-item loops. */
static void lower_cpu_ndrange(cg *c, cg_frame *fr, LLVMValueRef begin,
                              LLVMValueRef end, LLVMBasicBlockRef done) {
  LLVMValueRef *ls = &c->cpu_launch[3], *ng = &c->cpu_launch[6];
  c->cpu_wgs = LLVMBuildMul(c->b, LLVMBuildMul(c->b, ls[0], ls[1], ""), ls[2], "wgs");
  counted_loop G;
  loop_open(c, &G, begin, end, "group");
  LLVMValueRef gr = LLVMBuildUDiv(c->b, G.iv, ng[0], "");
  c->cpu_grp[0] = LLVMBuildSub(c->b, G.iv, LLVMBuildMul(c->b, gr, ng[0], ""), "");
  c->cpu_grp[2] = LLVMBuildUDiv(c->b, gr, ng[1], "");
  c->cpu_grp[1] = LLVMBuildSub(c->b, gr, LLVMBuildMul(c->b, c->cpu_grp[2], ng[1], ""), "");
  c->cpu_grp_linear = G.iv;
  c->group_exit = G.latch;
  if (c->wg_multi)
    start_group(c);
  xpj_block body = 1;
  cg_view *vw[VERSION_MAX_VIEWS];
  unsigned n;
  uint64_t size;
  LLVMValueRef cond = NULL;
  uint32_t hw[3];
  if (cg_reqd_local_hw(c, hw) && hw[0] < SMALL_ROW)
    cond = unit_strides(c, fr, &body, 1, vw, &n, &size);
  if (cond)
    lower_versions(c, fr, cond, vw, n, size, lower_workgroup, 0);
  else
    lower_workgroup(c, fr, 0);
  loop_close(c, &G);
  br(c, done);
}

/* CPU entry point (docs/abi.md):
 *   void ENTRY(void *const *args, const int64_t launch[9], void *local_mem,
 *             void *scratch, int64_t begin, int64_t end)
 * range kernels run flat work-items [begin, end) (dimension 0 fastest);
 * nd-range kernels run flat work-groups [begin, end). */
static void lower_cpu(cg *c, cg_frame *fr) {
  LLVMTypeRef pt[6] = {c->t_ptr, c->t_ptr, c->t_ptr, c->t_ptr, c->t_i64, c->t_i64};
  LLVMTypeRef ft = LLVMFunctionType(c->t_void, pt, 6, 0);
  c->fn = LLVMAddFunction(c->mod, c->entry, ft);
  for (unsigned i = 0; i < 4; i++) {
    unsigned na = LLVMGetEnumAttributeKindForName("noalias", 7);
    if (i >= 2)
      LLVMAddAttributeAtIndex(c->fn, i + 1, LLVMCreateEnumAttribute(c->ctx, na, 0));
  }
  c->entry_bb = new_bb(c, "entry");
  LLVMPositionBuilderAtEnd(c->b, c->entry_bb);
  di_begin(c);
  LLVMValueRef args = LLVMGetParam(c->fn, 0), launch = LLVMGetParam(c->fn, 1);
  c->cpu_local_mem = LLVMGetParam(c->fn, 2);
  c->cpu_scratch = LLVMGetParam(c->fn, 3);
  LLVMValueRef begin = LLVMGetParam(c->fn, 4), end = LLVMGetParam(c->fn, 5);
  LLVMTypeRef abt[XPJ_MAX_PARAMS * (2 + 2 * XPJ_MAX_RANK) + 4];
  unsigned n;
  param_abi_types(c, abt, &n);
  LLVMValueRef abi[XPJ_MAX_PARAMS * (2 + 2 * XPJ_MAX_RANK) + 4];
  for (unsigned i = 0; i < n; i++) {
    LLVMValueRef ix = cg_i64(c, i);
    LLVMValueRef pp = LLVMBuildLoad2(
        c->b, c->t_ptr, LLVMBuildGEP2(c->b, c->t_ptr, args, &ix, 1, ""), "");
    abi[i] = LLVMBuildLoad2(c->b, abt[i], pp, "");
  }
  bind_params(c, fr, abi);
  if (c->opts->checks & XPJ_CHECK_BOUNDS) {
    /* after the 3 hidden sizes of a range kernel, which the CPU ignores */
    LLVMValueRef ix = cg_i64(c, n + (c->kernel->kind == XPJ_FUNC_RANGE ? 3 : 0));
    LLVMValueRef pp = LLVMBuildLoad2(
        c->b, c->t_ptr, LLVMBuildGEP2(c->b, c->t_ptr, args, &ix, 1, ""), "");
    c->chk_rec = LLVMBuildLoad2(c->b, c->t_ptr, pp, "");
  }
  for (int i = 0; i < 9; i++) {
    LLVMValueRef ix = cg_i64(c, i);
    LLVMValueRef l = LLVMBuildLoad2(
        c->b, c->t_i64, LLVMBuildGEP2(c->b, c->t_i64, launch, &ix, 1, ""), "");
    c->cpu_launch[i] = l;
  }
  /* a required local size: the work-item loops have constant trip counts
   * (the runtime launches nothing else, docs/language.md 3.1) */
  uint32_t hw[3];
  bool range = c->kernel->kind == XPJ_FUNC_RANGE;
  if (cg_reqd_local_hw(c, hw)) {
    for (int h = 0; h < 3; h++)
      c->cpu_launch[3 + h] = cg_i64(c, hw[h]);
    if (!range)
      c->fixed_items = (uint64_t)hw[0] * hw[1] * hw[2];
  }
  if (range)
    c->fixed_items = RANGE_CHUNK;
  LLVMBasicBlockRef done = new_bb(c, "done");
  cg_plan plan;
  if (!cg_plan_kernel(c, c->kernel, range, &plan))
    return;
  c->wg_multi = block_has_barrier(c, c->kernel, 1) || plan.nxloops;
  if (c->wg_multi) {
    fr->xloop = plan.xloop;
    fr->uni = plan.uni;
    if (!frame_make_wg(c, fr)) {
      cg_plan_free(&plan);
      return;
    }
    if (returns_before_a_run(fr)) {
      c->cpu_active = entry_alloca(c, c->t_i64, "active");
      c->cpu_flags_off = scratch_alloc(c, 1);
    }
  }
  if (range)
    lower_cpu_range(c, fr, begin, end, done);
  else
    lower_cpu_ndrange(c, fr, begin, end, done);
  fr->xloop = fr->uni = NULL;
  cg_plan_free(&plan);
  LLVMPositionBuilderAtEnd(c->b, done);
  LLVMBuildRetVoid(c->b);
}

uint64_t cg_simt_local_bytes(cg *c) {
  LLVMTargetDataRef td = LLVMGetModuleDataLayout(c->mod);
  uint64_t n = 0;
  for (LLVMValueRef g = LLVMGetFirstGlobal(c->mod); g;
       g = LLVMGetNextGlobal(g)) {
    if (LLVMGetPointerAddressSpace(LLVMTypeOf(g)) != c->ops->as_local ||
        LLVMIsDeclaration(g) || !LLVMGetInitializer(g))
      continue; /* (PTX's __xpj_dyn: the launch's dynamic shared memory) */
    uint64_t a = LLVMGetAlignment(g) ? LLVMGetAlignment(g) : 1;
    n = (n + a - 1) / a * a + LLVMABISizeOfType(td, LLVMGlobalGetValueType(g));
  }
  return n;
}

bool cg_reqd_local_hw(cg *c, uint32_t hw[3]) {
  uint64_t s[3];
  unsigned n = xpj_func_reqd_local(c->kernel, s);
  for (unsigned d = 0; d < 3; d++)
    hw[d] = 1;
  for (unsigned d = 0; d < n; d++)
    hw[c->hw_dim[d]] = (uint32_t)s[d];
  return n != 0;
}

void cg_lower_kernel(cg *c) {
  cg_frame *fr = frame_new(c, c->kernel, NULL, NULL);
  if (!fr)
    return;
  fr->views = calloc(c->kernel->nparams + 1, sizeof *fr->views);
  if (!fr->views) {
    cg_fail(c, XPJ_ERR_NOMEM, "out of memory");
    frame_free(fr);
    return;
  }
  c->cpu_flags_off = -1;
  alias_scopes(c, c->kernel);
  unsigned rank = xpj_func_id_rank(c->kernel);
  for (unsigned d = 0; d < 3; d++)
    c->hw_dim[d] = d < rank ? rank - 1 - d : d;
  if (c->ops->simt)
    lower_simt(c, fr);
  else
    lower_cpu(c, fr);
  di_end(c);
  if (c->status == XPJ_OK && c->ops->finish_kernel)
    c->ops->finish_kernel(c, c->fn);
  frame_free(fr);
  free(c->fbarrier);
  c->fbarrier = NULL;
}
