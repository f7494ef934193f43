/*
 * verify.c - IR invariants that the builder cannot see one instruction at
 * a time: operands visible where they are used (structured dominance),
 * terminators last in their block, conditions computed where they belong,
 * and the call-graph rules (no recursion; work-group features only reach
 * ndrange kernels). The per-instruction typing rules are the builder's;
 * the verifier re-checks the ones later passes rely on.
 */
#include "buf.h"
#include "ir_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct vctx {
  const xpj_func *f;
  uint8_t *visible;
  char msg[512];
  bool failed;
} vctx;

static void vfail(vctx *c, const xpj_inst *in, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void vfail(vctx *c, const xpj_inst *in, const char *fmt, ...) {
  if (c->failed)
    return;
  c->failed = true;
  va_list ap;
  va_start(ap, fmt);
  char body[400];
  vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  snprintf(c->msg, sizeof c->msg, "in '%s' (line %u): %s", c->f->name,
           in ? in->loc.line : 0, body);
}

static bool is_terminator(uint8_t op) {
  return op == XPJ_OP_BREAK || op == XPJ_OP_CONTINUE || op == XPJ_OP_RETURN ||
         op == XPJ_OP_YIELD;
}

static int kind_of(const xpj_func *f, xpj_val v) {
  return xpj_typeinfo_of(f->mod, f->insts[v].type)->kind;
}

static void check_inst(vctx *c, xpj_val v) {
  const xpj_func *f = c->f;
  const xpj_module *m = f->mod;
  const xpj_inst *in = &f->insts[v];
  const uint32_t *a = xpj_inst_args(f, in);
  unsigned from = in->op == XPJ_OP_CALL ? in->ntargs : 0;
  if (in->op >= XPJ_OP_COUNT || in->op == XPJ_OP_NOP) {
    vfail(c, in, "invalid opcode %u", in->op);
    return;
  }
  if (in->type == 0 || in->type >= m->ntypes) {
    vfail(c, in, "%s has no valid type", xpj_op_names[in->op]);
    return;
  }
  for (unsigned i = from; i < in->nargs; i++) {
    if (a[i] == 0 || a[i] >= f->ninsts || !c->visible[a[i]]) {
      vfail(c, in, "%s uses a value that is not visible here",
            xpj_op_names[in->op]);
      return;
    }
  }
  switch ((xpj_op)in->op) {
  case XPJ_OP_BINOP:
    if (in->nargs != 2 || f->insts[a[0]].type != f->insts[a[1]].type)
      vfail(c, in, "binop operands differ in type");
    break;
  case XPJ_OP_LOAD:
  case XPJ_OP_ALOAD:
    if (in->nargs != 1 || kind_of(f, a[0]) != XPJ_TK_PTR ||
        xpj_typeinfo_of(m, f->insts[a[0]].type)->elem != in->type)
      vfail(c, in, "%s needs a pointer to its result type",
            xpj_op_names[in->op]);
    break;
  case XPJ_OP_STORE:
  case XPJ_OP_ASTORE:
    if (in->nargs != 2 || kind_of(f, a[0]) != XPJ_TK_PTR ||
        xpj_typeinfo_of(m, f->insts[a[0]].type)->elem != f->insts[a[1]].type ||
        xpj_typeinfo_of(m, f->insts[a[0]].type)->is_const)
      vfail(c, in, "%s needs a writable pointer to the value's type",
            xpj_op_names[in->op]);
    break;
  case XPJ_OP_INDEX:
    if (in->nargs < 2 ||
        (kind_of(f, a[0]) != XPJ_TK_VIEW && kind_of(f, a[0]) != XPJ_TK_STATIC))
      vfail(c, in, "index needs an array");
    break;
  case XPJ_OP_ATOMIC:
  case XPJ_OP_CMPXCHG:
    if (in->nargs < 2 || kind_of(f, a[0]) != XPJ_TK_PTR)
      vfail(c, in, "%s needs a pointer", xpj_op_names[in->op]);
    break;
  case XPJ_OP_IF:
    if (in->nargs != 1 ||
        xpj_type_scalar_of(m, f->insts[a[0]].type) != XPJ_BOOL ||
        !in->blk[0] || in->blk[0] >= f->nblocks || !in->blk[1] ||
        in->blk[1] >= f->nblocks) {
      vfail(c, in, "if needs a bool condition and two blocks");
      break;
    }
    for (int k = 0; k < 2; k++) {
      const xpj_blockdata *bd = &f->blocks[in->blk[k]];
      bool yields = bd->n && f->insts[bd->ids[bd->n - 1]].op == XPJ_OP_YIELD;
      bool is_value = xpj_type_scalar_of(m, in->type) != XPJ_VOID;
      if (yields != is_value ||
          (yields && f->insts[xpj_inst_args(f, &f->insts[bd->ids[bd->n - 1]])[0]]
                             .type != in->type))
        vfail(c, in, "both branches of a value-producing if must yield a "
                     "value of its type");
    }
    break;
  case XPJ_OP_YIELD:
    if (in->nargs != 1 ||
        f->insts[f->blocks[in->in_block].parent].op != XPJ_OP_IF)
      vfail(c, in, "yield outside of an if");
    break;
  case XPJ_OP_CALL:
    if (in->imm.callee >= m->nfuncs ||
        m->funcs[in->imm.callee]->kind != XPJ_FUNC_DEVICE ||
        in->nargs - in->ntargs != m->funcs[in->imm.callee]->nparams)
      vfail(c, in, "call to an invalid function");
    break;
  case XPJ_OP_RETURN:
    if (in->nargs == 0
            ? xpj_type_scalar_of(m, f->ret) != XPJ_VOID
            : f->insts[a[0]].type != f->ret)
      vfail(c, in, "return value does not match the return type");
    break;
  case XPJ_OP_ARRAY:
    if (xpj_typeinfo_of(m, in->type)->space == XPJ_SPACE_LOCAL &&
        (f->kind != XPJ_FUNC_NDRANGE || in->in_block != 1))
      vfail(c, in, "local array outside the top level of an ndrange kernel");
    else if (in->aux && !f->ncparams)
      vfail(c, in, "an array sized by const parameters outside a kernel "
            "with const parameters");
    break;
  case XPJ_OP_BARRIER:
    if (f->kind == XPJ_FUNC_RANGE)
      vfail(c, in, "barrier in a range kernel");
    break;
  case XPJ_OP_WI:
    if (xpj_wi_needs_ndrange((xpj_wi)in->aux) && f->kind == XPJ_FUNC_RANGE)
      vfail(c, in, "work-group query in a range kernel");
    break;
  case XPJ_OP_GROUP: {
    xpj_coll_desc d = {in->scope, (xpj_coll)in->aux, (xpj_group_op)in->order};
    if (f->kind == XPJ_FUNC_RANGE)
      vfail(c, in, "collective in a range kernel");
    else if (in->scope > 1 || in->aux >= XPJ_COLL_COUNT ||
             in->nargs != (xpj_coll_takes_id(&d) ? 2u : 1u) ||
             in->type != f->insts[a[0]].type)
      vfail(c, in, "malformed collective");
    break;
  }
  case XPJ_OP_CPARAM: {
    /* only generic kernels hold them: specialisation replaces them */
    int s = xpj_type_scalar_of(m, in->type);
    if (!f->ncparams || in->nargs || s < XPJ_BOOL || s > XPJ_U64 ||
        (in->aux >= f->ncparams && in->aux != XPJ_CPARAM_DERIVED) ||
        (in->aux < f->ncparams && s != f->cptype[in->aux]))
      vfail(c, in, "const_param outside a kernel with const parameters, or "
            "of the wrong type");
    break;
  }
  default:
    break;
  }
}

static void check_block(vctx *c, xpj_block b, xpj_val owner) {
  const xpj_func *f = c->f;
  if (b == 0 || b >= f->nblocks || f->blocks[b].parent != owner) {
    vfail(c, NULL, "malformed block structure");
    return;
  }
  const xpj_blockdata *bd = &f->blocks[b];
  for (uint32_t i = 0; i < bd->n && !c->failed; i++) {
    xpj_val v = bd->ids[i];
    if (v == 0 || v >= f->ninsts || f->insts[v].in_block != b ||
        c->visible[v]) {
      vfail(c, NULL, "malformed block %u", b);
      return;
    }
    const xpj_inst *in = &f->insts[v];
    check_inst(c, v);
    if (is_terminator(in->op) && i + 1 != bd->n)
      vfail(c, in, "'%s' is not the last instruction of its block",
            xpj_op_names[in->op]);
    if (in->op == XPJ_OP_PARAM && (b != 1 || i != in->aux))
      vfail(c, in, "parameters must open the body");
    if (in->op == XPJ_OP_IF) {
      check_block(c, in->blk[0], v);
      check_block(c, in->blk[1], v);
    } else if (in->op == XPJ_OP_LOOP) {
      check_block(c, in->blk[0], v);
      xpj_val cv = (xpj_val)in->imm.i;
      if (cv && (cv >= f->ninsts || f->insts[cv].in_block != in->blk[0] ||
                 xpj_type_scalar_of(f->mod, f->insts[cv].type) != XPJ_BOOL))
        vfail(c, in, "loop condition must be a bool of the condition block");
      check_block(c, in->blk[1], v);
      check_block(c, in->blk[2], v);
    }
    c->visible[v] = 1;
  }
  /* values defined in a block are not visible after it */
  for (uint32_t i = 0; i < bd->n; i++)
    if (bd->ids[i] < f->ninsts)
      c->visible[bd->ids[i]] = 0;
}

/* ---- call-graph rules ---------------------------------------------- */

typedef struct cg_ctx {
  const xpj_module *m;
  uint8_t *state;      /* 0 new, 1 on stack, 2 done */
  uint8_t *uses_group; /* transitively uses barrier / work-group queries */
  uint32_t *chain;     /* its blocks' depth + 1 + the deepest callee's */
  unsigned max_depth;  /* 0: not checked */
  uint64_t running;    /* max_depth: the depth of the chain being walked */
  bool deep_said;      /* a chain too deep was reported (once is enough) */
  xpj_call_report report;
  void *ud;
  unsigned errors;
} cg_ctx;

static void cg_func(cg_ctx *c, uint32_t fi);

typedef struct cg_walk {
  cg_ctx *c;
  uint32_t fi;
  uint32_t below; /* the deepest chain among its callees */
} cg_walk;

/* How deep f's blocks nest (its body: 1), without recursion; UINT32_MAX
 * when out of memory (0 was taken for a shallow function). A block not
 * reached, or reached twice, is the verifier's to report. */
static uint32_t block_depth(const xpj_func *f) {
  if (f->nblocks < 2)
    return 0;
  uint32_t *stack = xpj_malloc((size_t)f->nblocks * sizeof *stack);
  uint32_t *level = xpj_calloc(f->nblocks, sizeof *level);
  uint32_t sp = 0, deepest = 0;
  if (!stack || !level) {
    xpj_free(stack);
    xpj_free(level);
    return UINT32_MAX;
  }
  level[1] = 1;
  stack[sp++] = 1;
  while (sp) {
    uint32_t b = stack[--sp];
    deepest = level[b] > deepest ? level[b] : deepest;
    const xpj_blockdata *bd = &f->blocks[b];
    for (uint32_t i = 0; i < bd->n; i++) {
      if (bd->ids[i] >= f->ninsts)
        continue;
      const xpj_inst *in = &f->insts[bd->ids[i]];
      int nb = in->op == XPJ_OP_IF ? 2 : in->op == XPJ_OP_LOOP ? 3 : 0;
      for (int k = 0; k < nb; k++) {
        uint32_t cb = in->blk[k];
        if (cb && cb < f->nblocks && !level[cb] && sp < f->nblocks) {
          level[cb] = level[b] + 1;
          stack[sp++] = cb;
        }
      }
    }
  }
  xpj_free(stack);
  xpj_free(level);
  return deepest;
}

static void cg_visit(const xpj_func *f, xpj_val v, void *ud) {
  cg_walk *w = ud;
  cg_ctx *c = w->c;
  const xpj_inst *in = &f->insts[v];
  if (in->op == XPJ_OP_BARRIER || in->op == XPJ_OP_GROUP ||
      (in->op == XPJ_OP_WI && xpj_wi_needs_ndrange((xpj_wi)in->aux)))
    c->uses_group[w->fi] = 1;
  if (in->op != XPJ_OP_CALL || in->imm.callee >= c->m->nfuncs)
    return;
  uint32_t callee = in->imm.callee;
  if (c->state[callee] == 1) {
    c->errors++;
    if (c->report)
      c->report(c->ud, in->loc, "recursive call to '%s' (recursion is not "
                "supported on devices)", c->m->funcs[callee]->name);
    return;
  }
  cg_func(c, callee);
  if (c->chain[callee] > w->below)
    w->below = c->chain[callee];
  if (c->uses_group[callee]) {
    c->uses_group[w->fi] = 1;
    if (f->kind == XPJ_FUNC_RANGE) {
      c->errors++;
      if (c->report)
        c->report(c->ud, in->loc, "'%s' uses barrier() or work-group queries "
                  "and cannot be called from range kernel '%s'",
                  c->m->funcs[callee]->name, f->name);
    }
  }
}

/* Calls nest as deep as the chain of functions they go through: a chain
 * deeper than c->max_depth is reported once, at the function where it
 * first goes past (the callers above it are past it too). */
static void cg_func(cg_ctx *c, uint32_t fi) {
  if (c->state[fi])
    return;
  const xpj_func *f = c->m->funcs[fi];
  uint32_t depth = c->max_depth ? block_depth(f) : 0;
  if (depth == UINT32_MAX) { /* out of memory: not measured, not passed */
    c->state[fi] = 2;
    c->chain[fi] = UINT32_MAX;
    c->errors++; /* unreported: the caller's XPJ_ERR_NOMEM */
    return;
  }
  uint64_t own = c->max_depth ? (uint64_t)depth + 1 : 0;
  if (c->max_depth && c->running + own > c->max_depth) {
    /* the chain walked to here is too deep already: said here, and not
     * walked further (this walk recurses as deep as the chain) */
    c->state[fi] = 2;
    c->chain[fi] = UINT32_MAX; /* (its callers say nothing more) */
    c->errors++;
    if (c->deep_said)
      return; /* (the functions below, walked from elsewhere, go past too) */
    c->deep_said = true;
    if (c->report && !c->running)
      c->report(c->ud, f->loc, "'%s' nests %llu deep, counting its blocks "
                "(each arm of an 'else if' chain is one inside the one "
                "before) (at most %u): split a long 'else if' chain",
                f->name, (unsigned long long)own, c->max_depth);
    else if (c->report)
      c->report(c->ud, f->loc, "the chain of calls that reaches '%s' nests "
                "%llu deep, counting each function's blocks (each arm of an "
                "'else if' chain is one inside the one before) (at most %u): "
                "split a long 'else if' chain or a long chain of calls",
                f->name, (unsigned long long)(c->running + own),
                c->max_depth);
    return;
  }
  c->state[fi] = 1;
  c->running += own;
  cg_walk w = {c, fi, 0};
  xpj_walk(f, 1, cg_visit, &w);
  c->running -= own;
  uint64_t chain = c->max_depth ? own + w.below : 0;
  c->chain[fi] = chain > UINT32_MAX ? UINT32_MAX : (uint32_t)chain;
  if (c->max_depth && chain > c->max_depth && w.below <= c->max_depth) {
    c->errors++;
    if (c->report && !c->deep_said)
      c->report(c->ud, f->loc, "'%s' nests %llu deep, counting its blocks "
                "(each arm of an 'else if' chain is one inside the one "
                "before) and the functions it calls, each with its own "
                "(at most %u): split a long 'else if' chain or a long chain "
                "of calls", f->name, (unsigned long long)chain, c->max_depth);
  }
  c->state[fi] = 2;
}

unsigned xpj_check_calls(const xpj_module *m, unsigned max_depth,
                         xpj_call_report report, void *ud) {
  cg_ctx c = {m,      xpj_calloc(m->nfuncs, 1),
              xpj_calloc(m->nfuncs, 1), xpj_calloc(m->nfuncs, sizeof(uint32_t)),
              max_depth, 0, false, report, ud, 0};
  if (!c.state || !c.uses_group || !c.chain) {
    xpj_free(c.state);
    xpj_free(c.uses_group);
    xpj_free(c.chain);
    return 1;
  }
  for (uint32_t i = 0; i < m->nfuncs; i++)
    cg_func(&c, i);
  xpj_free(c.state);
  xpj_free(c.uses_group);
  xpj_free(c.chain);
  return c.errors;
}

static void first_report(void *ud, xpj_loc loc, const char *fmt, ...) {
  char *msg = ud;
  if (*msg)
    return;
  va_list ap;
  va_start(ap, fmt);
  int n = snprintf(msg, 512, "line %u: ", loc.line);
  vsnprintf(msg + n, (size_t)(512 - n), fmt, ap);
  va_end(ap);
}

xpj_status xpj_module_verify(xpj_module *m, const char **msg) {
  if (msg)
    *msg = "";
  if (!m)
    return XPJ_ERR_INVALID;
  if (m->oom) {
    if (msg)
      *msg = "out of memory while building the module";
    return XPJ_ERR_NOMEM;
  }
  xpj_free(m->scratch);
  m->scratch = xpj_calloc(1, 512);
  if (!m->scratch)
    return XPJ_ERR_NOMEM;
  for (uint32_t i = 0; i < m->nfuncs; i++) {
    const xpj_func *f = m->funcs[i];
    vctx c = {f, xpj_calloc(f->ninsts, 1), "", false};
    if (!c.visible)
      return XPJ_ERR_NOMEM;
    check_block(&c, 1, 0);
    xpj_free(c.visible);
    if (c.failed) {
      snprintf(m->scratch, 512, "%s", c.msg);
      if (msg)
        *msg = m->scratch;
      return XPJ_ERR_VERIFY;
    }
  }
  m->scratch[0] = 0;
  if (xpj_check_calls(m, 0, first_report, m->scratch)) {
    if (!m->scratch[0]) /* errors unreported: out of memory */
      return XPJ_ERR_NOMEM;
    if (msg)
      *msg = m->scratch;
    return XPJ_ERR_VERIFY;
  }
  return XPJ_OK;
}
