/*
 * target_cpu.c - native code for the host CPU (x86-64).
 *
 * The entry point loops over work-items and work-groups itself
 * (codegen.c, docs/abi.md); this file picks the target machine and the
 * atomic scopes (a work-group runs on one thread, so work-group-scope
 * atomics on local memory need no bus lock), keeps LLVM's loop vectoriser
 * away from the loops it would spend minutes on, and keeps the unroller
 * and interleaving off the plain work-item loops of kernels with barriers.
 */
#include "cg.h"
#include "llvm_emit.h"

#include <llvm-c/Transforms/PassBuilder.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static LLVMTargetMachineRef cpu_machine(cg *c) {
  char *triple = LLVMGetDefaultTargetTriple(), *err = NULL;
  LLVMTargetRef t;
  if (LLVMGetTargetFromTriple(triple, &t, &err)) {
    cg_fail(c, XPJ_ERR_COMPILE, "host target unavailable: %s", err);
    LLVMDisposeMessage(err);
    LLVMDisposeMessage(triple);
    return NULL;
  }
  /* a CPU or feature LLVM does not know: refused, not ignored with a
   * warning on stderr (nor, for a CPU without 64-bit mode, a fatal error
   * that would end the process) */
  char why[300];
  if (!xpj_cpu_target_check(t, triple, c->target->cpu, c->target->features,
                            why, sizeof why)) {
    cg_fail(c, XPJ_ERR_INVALID, "target 'cpu:%s:%s': %s", c->target->cpu,
            c->target->features, why);
    LLVMDisposeMessage(triple);
    return NULL;
  }
  LLVMSetTarget(c->mod, triple);
  LLVMCodeGenOptLevel lvl = c->opts->opt_level == 0 ? LLVMCodeGenLevelNone
                            : c->opts->opt_level == 1 ? LLVMCodeGenLevelLess
                            : c->opts->opt_level >= 3 ? LLVMCodeGenLevelAggressive
                                                      : LLVMCodeGenLevelDefault;
  LLVMTargetMachineRef tm =
      LLVMCreateTargetMachine(t, triple, c->target->cpu, c->target->features,
                              lvl, LLVMRelocPIC, LLVMCodeModelDefault);
  LLVMDisposeMessage(triple);
  return tm;
}

static const char *cpu_scope(cg *c, xpj_scope s, xpj_space sp) {
  (void)c;
  if (s == XPJ_SCOPE_WORK_GROUP && sp == XPJ_SPACE_LOCAL)
    return "singlethread";
  return ""; /* system */
}

/* ---- the vectorisation guard ---------------------------------------- *
 *
 * LLVM 22's loop vectoriser asks, for every recipe of a loop's plan and in
 * several transforms (cse among them), whether the value is the same in
 * every lane (vputils::isSingleScalar), and answers by walking the
 * value's operands recursively without remembering answers. The walk
 * runs down arithmetic (binary operators, casts, compares, selects, GEPs,
 * blends of if-converted phis) until a value that is not uniform: a
 * straight-line chain of N dependent operations costs N^2 in all (a kernel
 * of 8000 `a = a * k + c` took 40-55 s, 98% in LoopVectorize), and uniform
 * values computed inside the loop from each other, which the walk must
 * follow down every operand, cost 2^N (24 statements `u = u * u + c`:
 * 46 s). Its memory-dependence analysis also grows with the square of the
 * number of loads and stores. No loop of a real kernel comes near the
 * budget below; one that exceeds it is not vectorised
 * (llvm.loop.vectorize.enable = false) and compiles in linear time.
 * ../shared/CPU-CODEGEN-NOTES.md has the measurements. */

/* The vectoriser's estimated work on one loop, in walk steps: about 0.3 s
 * of LoopVectorize at the worst rate measured (1.5-2e-7 s a step). The
 * loops of every example, benchmark and conformance kernel cost at most
 * 34,000. A pair of memory accesses counts 2 steps (3.5e-7 s measured). */
#define VECTORIZE_BUDGET 2000000u
#define STEPS_MAX (UINT64_MAX / 4)

/* A map from LLVM objects (blocks, instructions) to numbers: open
 * addressing over a power-of-two table of at least twice as many slots as
 * the keys it will hold, freed at once. */
typedef struct ptrmap {
  const void **keys;
  uint64_t *vals;
  size_t mask;
} ptrmap;

static bool map_init(ptrmap *m, size_t n) {
  size_t cap = 64;
  while (cap < 2 * n)
    cap *= 2;
  m->keys = calloc(cap, sizeof *m->keys);
  m->vals = calloc(cap, sizeof *m->vals);
  m->mask = cap - 1;
  return m->keys && m->vals;
}

static void map_free(ptrmap *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

static size_t map_index(const ptrmap *m, const void *k) {
  size_t i = (size_t)(((uintptr_t)k >> 4) * 0x9e3779b97f4a7c15ull) & m->mask;
  while (m->keys[i] && m->keys[i] != k)
    i = (i + 1) & m->mask;
  return i;
}

/* The value of key k, or NULL when it has none. */
static uint64_t *map_find(const ptrmap *m, const void *k) {
  size_t i = map_index(m, k);
  return m->keys[i] ? &m->vals[i] : NULL;
}

static void map_put(ptrmap *m, const void *k, uint64_t v) {
  size_t i = map_index(m, k);
  m->keys[i] = k;
  m->vals[i] = v;
}

/* A loop's blocks by position in the function: lo..hi, less exit. */
typedef struct span {
  uint64_t lo, hi, exit;
  LLVMBasicBlockRef header;
} span;

typedef struct loop_scan {
  ptrmap blocks; /* block -> position in the function, 1-based */
  ptrmap steps;  /* instruction -> walk steps below it (0: being walked) */
  ptrmap vary;   /* instruction -> 2 varies with the work-item, else 1 */
  span loop;     /* the loop being costed */
} loop_scan;

static span span_of(const loop_scan *s, const cg_loop *L) {
  return (span){*map_find(&s->blocks, L->first),
                *map_find(&s->blocks, L->last),
                *map_find(&s->blocks, L->exit), L->first};
}

/* Instructions in L's blocks. */
static size_t loop_size(const cg_loop *L) {
  size_t n = 0;
  for (LLVMBasicBlockRef bb = L->first; bb; bb = LLVMGetNextBasicBlock(bb)) {
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in;
         in = LLVMGetNextInstruction(in))
      n++;
    if (bb == L->last)
      break;
  }
  return n;
}

static bool in_span(const loop_scan *s, const span *sp, LLVMValueRef v) {
  if (!v || !LLVMIsAInstruction(v))
    return false;
  const uint64_t *pos = map_find(&s->blocks, LLVMGetInstructionParent(v));
  return pos && *pos >= sp->lo && *pos <= sp->hi && *pos != sp->exit;
}

/* Operations the walk looks through (LLVM 22, VPlanUtils.cpp
 * preservesUniformity, and blends: phis other than the loop header's). */
static bool walked(const span *sp, LLVMValueRef v) {
  switch (LLVMGetInstructionOpcode(v)) {
  case LLVMAdd: case LLVMFAdd: case LLVMSub: case LLVMFSub: case LLVMMul:
  case LLVMFMul: case LLVMUDiv: case LLVMSDiv: case LLVMFDiv: case LLVMURem:
  case LLVMSRem: case LLVMFRem: case LLVMShl: case LLVMLShr: case LLVMAShr:
  case LLVMAnd: case LLVMOr: case LLVMXor: case LLVMTrunc: case LLVMZExt:
  case LLVMSExt: case LLVMFPToUI: case LLVMFPToSI: case LLVMUIToFP:
  case LLVMSIToFP: case LLVMFPTrunc: case LLVMFPExt: case LLVMPtrToInt:
  case LLVMIntToPtr: case LLVMBitCast: case LLVMGetElementPtr: case LLVMICmp:
  case LLVMFCmp: case LLVMSelect: case LLVMFreeze:
    return true;
  case LLVMPHI:
    return LLVMGetInstructionParent(v) != sp->header;
  default:
    return false;
  }
}

/* Steps of a walk from v when no answer stops it early: 1 for v, plus
 * those of every operand the walk follows. A cycle goes through the phis
 * of an inner loop, which the vectoriser never walks (this loop is not
 * innermost then): it counts 1. depth bounds the recursion: operands
 * mostly come before their users in the block order, so it stays
 * shallow; a walk too deep to follow counts as over any budget. */
static uint64_t walk_steps(loop_scan *s, LLVMValueRef v, unsigned depth) {
  const uint64_t *memo = map_find(&s->steps, v);
  if (memo)
    return *memo ? *memo : 1;
  map_put(&s->steps, v, 0);
  uint64_t n = 1;
  for (int i = 0, k = LLVMGetNumOperands(v); i < k && n < STEPS_MAX; i++) {
    LLVMValueRef op = LLVMGetOperand(v, (unsigned)i);
    if (!in_span(s, &s->loop, op) || !walked(&s->loop, op))
      n += 1;
    else if (depth >= 1000)
      n = STEPS_MAX;
    else
      n += walk_steps(s, op, depth + 1);
  }
  n = n < STEPS_MAX ? n : STEPS_MAX;
  map_put(&s->steps, v, n);
  return n;
}

/* Whether v differs between work-items of the loop being costed: it
 * depends on a phi of its header (the work-item index among them). */
static bool varies(loop_scan *s, LLVMValueRef v, unsigned depth) {
  if (!in_span(s, &s->loop, v))
    return false;
  if (LLVMGetInstructionParent(v) == s->loop.header &&
      LLVMGetInstructionOpcode(v) == LLVMPHI)
    return true;
  const uint64_t *memo = map_find(&s->vary, v);
  if (memo)
    return *memo == 2;
  map_put(&s->vary, v, 1);
  bool r = depth >= 1000;
  for (int i = 0, k = LLVMGetNumOperands(v); i < k && !r; i++)
    r = varies(s, LLVMGetOperand(v, (unsigned)i), depth + 1);
  map_put(&s->vary, v, r ? 2 : 1);
  return r;
}

/* Walk paths from v down to phi p inside the inner loop sp, counted up to
 * 2 (memo: paths + 1). */
static unsigned paths_to(loop_scan *s, ptrmap *memo, const span *sp,
                         LLVMValueRef v, LLVMValueRef p, unsigned depth) {
  if (v == p)
    return 1;
  if (!in_span(s, sp, v) || !walked(sp, v) || depth >= 1000)
    return 0;
  const uint64_t *m = map_find(memo, v);
  if (m)
    return m[0] ? (unsigned)m[0] - 1 : 0;
  map_put(memo, v, 0);
  unsigned n = 0;
  for (int i = 0, k = LLVMGetNumOperands(v); i < k && n < 2; i++)
    n += paths_to(s, memo, sp, LLVMGetOperand(v, (unsigned)i), p, depth + 1);
  n = n < 2 ? n : 2;
  map_put(memo, v, n + 1);
  return n;
}

/* Whether inner loop I of the loop being costed carries a value from one
 * iteration to the next along two walk paths or more (u = u * u + c)
 * without depending on the work-item. Once the optimiser unrolls I, the
 * walk on that uniform chain doubles with every iteration: 20 iterations
 * cost 3.5 s, 24 cost 46 s. The trip count is not known here, so such a
 * loop counts as over budget. */
static bool doubling_recurrence(loop_scan *s, const cg_loop *I) {
  span sp = span_of(s, I);
  LLVMBasicBlockRef back = LLVMGetInstructionParent(I->latch);
  bool found = false;
  for (LLVMValueRef p = LLVMGetFirstInstruction(sp.header);
       p && LLVMGetInstructionOpcode(p) == LLVMPHI && !found;
       p = LLVMGetNextInstruction(p)) {
    for (unsigned k = 0; k < LLVMCountIncoming(p) && !found; k++) {
      if (LLVMGetIncomingBlock(p, k) != back)
        continue;
      ptrmap memo;
      if (!map_init(&memo, loop_size(I))) {
        map_free(&memo);
        return true;
      }
      found = paths_to(s, &memo, &sp, LLVMGetIncomingValue(p, k), p, 0) >= 2
              && !varies(s, p, 0);
      map_free(&memo);
    }
  }
  return found;
}

/* Whether loop I = loops[index] may be unrolled completely before the
 * vectoriser runs: no loop nested in it, and a test that compares a
 * counter starting at a constant with a constant (i < 24). */
static bool unrollable(loop_scan *s, const cg_loop *loops, unsigned index) {
  const cg_loop *I = &loops[index];
  span sp = span_of(s, I);
  for (unsigned j = 0; j < index; j++) {
    uint64_t pos = *map_find(&s->blocks, loops[j].first);
    if (pos >= sp.lo && pos <= sp.hi)
      return false;
  }
  LLVMValueRef br = LLVMGetBasicBlockTerminator(I->first);
  if (!br || !LLVMIsABranchInst(br) || !LLVMIsConditional(br))
    return false;
  LLVMValueRef cmp = LLVMGetCondition(br);
  if (!LLVMIsAICmpInst(cmp))
    return false;
  LLVMValueRef a = LLVMGetOperand(cmp, 0), b = LLVMGetOperand(cmp, 1);
  if (LLVMIsAConstantInt(a)) {
    LLVMValueRef t = a;
    a = b;
    b = t;
  }
  if (!LLVMIsAConstantInt(b) || !LLVMIsAPHINode(a) ||
      LLVMGetInstructionParent(a) != I->first)
    return false;
  for (unsigned k = 0; k < LLVMCountIncoming(a); k++)
    if (!in_span(s, &sp, LLVMGetIncomingValue(a, k)) &&
        !LLVMIsAConstantInt(LLVMGetIncomingValue(a, k)))
      return false;
  return true;
}

/* The work the vectoriser would do on loop L (loops[0..index) are the
 * loops closed before it, among them those nested in it): walk steps
 * from every walked value, plus the pairs of memory accesses it checks. */
static uint64_t loop_cost(loop_scan *s, const cg_loop *loops, unsigned index) {
  const cg_loop *L = &loops[index];
  uint64_t cost = 0, mem = 0;
  for (unsigned i = 0; i < index; i++) {
    uint64_t pos = *map_find(&s->blocks, loops[i].first);
    if (pos >= s->loop.lo && pos <= s->loop.hi && unrollable(s, loops, i) &&
        doubling_recurrence(s, &loops[i]))
      return STEPS_MAX;
  }
  for (LLVMBasicBlockRef bb = L->first; bb; bb = LLVMGetNextBasicBlock(bb)) {
    if (bb != L->exit)
      for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in;
           in = LLVMGetNextInstruction(in)) {
        if (LLVMIsALoadInst(in) || LLVMIsAStoreInst(in))
          mem++;
        else if (walked(&s->loop, in))
          cost += walk_steps(s, in, 0);
        if (cost >= STEPS_MAX)
          return STEPS_MAX;
      }
    if (bb == L->last)
      break;
  }
  return cost + (mem < (1u << 24) ? 2 * mem * mem : STEPS_MAX);
}

/* ---- work-item loops of kernels with barriers --------------------- *
 *
 * An nd-range kernel with barriers runs each stretch of code between two
 * barriers in its own nest of loops over the work-items of the group, one
 * loop per dimension (codegen.c). -O2 treats every one of these loops as a
 * hot loop: the unroller unrolls the innermost at run time (by 8 on
 * znver4), the vectoriser interleaves its vector loop, and instruction
 * selection and register allocation then pay for that code several times
 * over. At -O1 and -O2 these loops are vectorised but neither unrolled nor
 * interleaved (one vector per iteration); -O3 keeps the full treatment.
 * The work-item loops inside interchanged loops (uniform.c) and those of
 * range kernels keep every optimisation: they are where the vector code
 * of those kernels comes from.
 * Measured (LLVM 22.1.8, -O2, this 2-core znver4, xpjit-cli emit
 * --no-isolate, 10 runs, process start included): bench/cpu.xpk's
 * matmul_tiled16 84 ms with the vectoriser off, 62 ms with this; triad
 * (a range kernel) 32 ms. Run time against vectoriser off: matmul_tiled16
 * 8.9 -> 36.8 GFLOP/s, scan_group 2.5 -> 21.5 GB/s
 * (../shared/CPU-CODEGEN-NOTES.md, "Issue 16, second session").
 */

enum { HINT_NO_VECTORIZE = 1, HINT_NO_UNROLL = 2, HINT_NO_INTERLEAVE = 4 };

static LLVMMetadataRef loop_flag(cg *c, const char *name, LLVMValueRef v) {
  LLVMMetadataRef op[2] = {LLVMMDStringInContext2(c->ctx, name, strlen(name)),
                           v ? LLVMValueAsMetadata(v) : NULL};
  return LLVMMDNodeInContext2(c->ctx, op, v ? 2 : 1);
}

/* Gives the loop whose back edge is latch a distinct loop ID with hints. */
static void set_loop_hints(cg *c, LLVMValueRef latch, unsigned hints) {
  LLVMMetadataRef ops[4];
  unsigned n = 1;
  ops[0] = LLVMTemporaryMDNode(c->ctx, NULL, 0);
  if (hints & HINT_NO_VECTORIZE)
    ops[n++] = loop_flag(c, "llvm.loop.vectorize.enable",
                         LLVMConstInt(c->t_i1, 0, 0));
  if (hints & HINT_NO_UNROLL)
    ops[n++] = loop_flag(c, "llvm.loop.unroll.disable", NULL);
  if (hints & HINT_NO_INTERLEAVE)
    ops[n++] = loop_flag(c, "llvm.loop.interleave.count",
                         LLVMConstInt(c->t_i32, 1, 0));
  LLVMMetadataRef id = LLVMMDNodeInContext2(c->ctx, ops, n);
  LLVMMetadataReplaceAllUsesWith(ops[0], id); /* a distinct loop ID */
  LLVMSetMetadata(latch, LLVMGetMDKindIDInContext(c->ctx, "llvm.loop", 9),
                  LLVMMetadataAsValue(c->ctx, id));
}

/* The loops of c->fn as loops of fn, a copy of it: the same blocks in the
 * same order (mem2reg leaves the control flow alone). NULL: no memory. */
static cg_loop *loops_in_copy(cg *c, LLVMValueRef fn) {
  size_t nb = LLVMCountBasicBlocks(c->fn);
  LLVMBasicBlockRef *own = malloc(nb * sizeof *own);
  LLVMBasicBlockRef *copy = malloc(nb * sizeof *copy);
  cg_loop *out = malloc(c->ncpu_loops * sizeof *out);
  ptrmap pos = {0};
  bool ok = own && copy && out && map_init(&pos, nb) &&
            LLVMCountBasicBlocks(fn) == nb;
  if (ok) {
    LLVMGetBasicBlocks(c->fn, own);
    LLVMGetBasicBlocks(fn, copy);
    for (size_t i = 0; i < nb; i++)
      map_put(&pos, own[i], i);
    for (unsigned i = 0; i < c->ncpu_loops; i++) {
      const cg_loop *L = &c->cpu_loops[i];
      LLVMBasicBlockRef back =
          copy[*map_find(&pos, LLVMGetInstructionParent(L->latch))];
      out[i] = (cg_loop){copy[*map_find(&pos, L->first)],
                         copy[*map_find(&pos, L->last)],
                         copy[*map_find(&pos, L->exit)],
                         LLVMGetBasicBlockTerminator(back), L->plain_wi,
                         L->strided};
    }
  }
  map_free(&pos);
  free(own);
  free(copy);
  if (!ok) {
    free(out);
    return NULL;
  }
  return out;
}

/* Marks the work-item loops of a kernel with barriers (above), then costs
 * every other loop on a copy of the module whose variables are promoted
 * to registers (the optimiser's first step too), so that the walks follow
 * values, not loads and stores of stack slots; marks the loops over
 * budget. The module itself changes only by those marks. */
static void cpu_before_optimise(cg *c) {
  if (!c->ncpu_loops || c->opts->opt_level == 0)
    return;
  uint8_t *hints = calloc(c->ncpu_loops, 1);
  if (!hints) {
    cg_fail(c, XPJ_ERR_NOMEM, "out of memory");
    return;
  }
  for (unsigned i = 0; i < c->ncpu_loops; i++) {
    if (c->opts->opt_level <= 2 && c->cpu_loops[i].plain_wi)
      hints[i] = HINT_NO_UNROLL | HINT_NO_INTERLEAVE;
    if (c->cpu_loops[i].strided)
      hints[i] |= HINT_NO_VECTORIZE;
  }
  LLVMModuleRef copy = LLVMCloneModule(c->mod);
  LLVMPassBuilderOptionsRef pbo = LLVMCreatePassBuilderOptions();
  LLVMErrorRef e = LLVMRunPasses(copy, "function(mem2reg)", NULL, pbo);
  LLVMDisposePassBuilderOptions(pbo);
  if (e) {
    char *em = LLVMGetErrorMessage(e);
    cg_fail(c, XPJ_ERR_COMPILE, "internal: mem2reg: %s", em);
    LLVMDisposeErrorMessage(em);
    LLVMDisposeModule(copy);
    free(hints);
    return;
  }
  LLVMValueRef fn = LLVMGetNamedFunction(copy, c->entry);
  cg_loop *loops = loops_in_copy(c, fn);
  size_t ninsts = 0;
  loop_scan s;
  memset(&s, 0, sizeof s);
  bool ok = loops && map_init(&s.blocks, LLVMCountBasicBlocks(fn));
  uint64_t pos = 0;
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb && ok;
       bb = LLVMGetNextBasicBlock(bb)) {
    map_put(&s.blocks, bb, ++pos);
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in;
         in = LLVMGetNextInstruction(in))
      ninsts++;
  }
  for (unsigned i = 0; ok && i < c->ncpu_loops; i++) {
    if (hints[i] & HINT_NO_VECTORIZE)
      continue;
    s.loop = span_of(&s, &loops[i]);
    ok = map_init(&s.steps, ninsts) && map_init(&s.vary, ninsts);
    uint64_t cost = ok ? loop_cost(&s, loops, i) : 0;
    if (cost > VECTORIZE_BUDGET)
      hints[i] |= HINT_NO_VECTORIZE;
    map_free(&s.steps);
    map_free(&s.vary);
  }
  map_free(&s.blocks);
  free(loops);
  LLVMDisposeModule(copy);
  for (unsigned i = 0; ok && i < c->ncpu_loops; i++)
    if (hints[i])
      set_loop_hints(c, c->cpu_loops[i].latch, hints[i]);
  free(hints);
  if (!ok)
    cg_fail(c, XPJ_ERR_NOMEM, "out of memory");
}

/* local array parameters: after the kernel's own local arrays in the
 * work-group's local memory (the runtime gives their byte offsets) */
static LLVMValueRef cpu_local_param_base(cg *c) { return c->cpu_local_mem; }

const cg_target_ops xpj_target_cpu_ops = {
    .name = "cpu",
    .simt = false,
    .as_global = 0,
    .as_local = 0,
    .kernel_cc = LLVMCCallConv,
    .machine = cpu_machine,
    .machine_reusable = true,
    .before_optimise = cpu_before_optimise,
    .syncscope = cpu_scope,
    .local_param_base = cpu_local_param_base,
};
