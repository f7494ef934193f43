/*
 * uniform.c - the CPU's plan for a kernel run at work-group level: which
 * values are the same for every work-item, which statements therefore run
 * once per group instead of once per work-item, and which loops inside
 * the work-item are interchanged with the work-item loop (codegen.c).
 *
 * A loop that every work-item runs the same number of times, say
 * `for k < shape(a, 1) { acc += a[row, k] * b[k, col]; }`, runs as
 * `for k { for each work-item { acc[wi] += ... } }`: the work-item loop
 * inside is what LLVM's vectoriser takes, with one lane per work-item, so
 * each work-item still adds its own products in its own order (results are
 * bit-identical) while a[row, k] is loaded once and b[k, col..col+7] is
 * one vector load. PoCL does the same for loops with barriers ("implicit
 * loop barriers"); Intel's CPU runtime gets it from vectorising the whole
 * kernel across work-items. ../shared/CPU-CODEGEN-NOTES.md has the design.
 *
 * A value's kind says how it varies across the work-items of a group (of
 * a chunk of a row, for range kernels):
 *   UNI   the same for all of them (a group id, a shape, a loop counter);
 *   ROW   the same along the fastest dimension, not across the group (a
 *         local id of a slower dimension of an nd-range group);
 *   LANE  the fastest id plus a ROW value (unit stride in memory);
 *   VARY  anything else.
 */
#include "cg.h"

#include <stdlib.h>
#include <string.h>

enum { UNI = 0, ROW = 1, LANE = 2, VARY = 3 };

typedef struct plan_ctx {
  cg *c;
  const xpj_func *f;
  bool chunked;     /* range kernel: a chunk is part of one row */
  uint8_t *kind;    /* per instruction */
  uint8_t *vkind;   /* per VAR: 1 + the kind of the values stored in it,
                       0 before any */
  uint8_t *bad_var; /* per VAR: used other than by a load or a store */
  uint8_t *wgblock; /* per block: its statements run at work-group level */
  uint8_t *xloop;   /* per LOOP: interchanged */
  uint8_t *uni;     /* per instruction: lowered at work-group level */
  uint8_t *wgvar;   /* per VAR: kept once per group */
  bool changed;
} plan_ctx;

static const uint32_t *args(const xpj_func *f, const xpj_inst *in) {
  return &f->pool[in->args];
}

static uint8_t kmax(uint8_t a, uint8_t b) { return a > b ? a : b; }

/* The kind of a value merged by control flow: ROW at most, or VARY. */
static uint8_t merged(uint8_t a, uint8_t b) {
  uint8_t m = kmax(a, b);
  return m <= ROW ? m : VARY;
}

/* The kind of a variable (1 + kind, 0 before any store) once value v is
 * stored in it under control ctl: a variable only ever holding the same
 * LANE value (let col = global_id(1)) stays LANE. */
static uint8_t stored(uint8_t var, uint8_t v, uint8_t ctl) {
  uint8_t k = v == LANE && ctl == UNI ? LANE : merged(v, ctl);
  if (var == 0)
    return (uint8_t)(k + 1);
  uint8_t old = (uint8_t)(var - 1);
  if (old == LANE || k == LANE)
    return (uint8_t)((old == k ? LANE : VARY) + 1);
  return (uint8_t)(merged(old, k) + 1);
}

static uint8_t var_kind(const plan_ctx *p, xpj_val var) {
  if (p->bad_var[var])
    return VARY;
  return p->vkind[var] ? (uint8_t)(p->vkind[var] - 1) : UNI;
}

static bool is_var(const xpj_func *f, xpj_val v) {
  return v && v < f->ninsts && f->insts[v].op == XPJ_OP_VAR;
}

static uint8_t wi_kind(plan_ctx *p, const xpj_inst *in) {
  unsigned d = (unsigned)in->imm.i;
  switch ((xpj_wi)in->aux) {
  case XPJ_WI_GLOBAL_ID:
  case XPJ_WI_LOCAL_ID:
    if (d < 3 && p->c->hw_dim[d] == 0)
      return LANE;
    return p->chunked ? UNI : ROW;
  case XPJ_WI_GLOBAL_LINEAR_ID:
  case XPJ_WI_LOCAL_LINEAR_ID:
  case XPJ_WI_SUB_GROUP_ID: /* the CPU's sub-groups are single work-items */
    return LANE;
  default: /* sizes, group ids, numbers of groups */
    return UNI;
  }
}

static uint8_t binop_kind(xpj_binop op, uint8_t a, uint8_t b) {
  if (a <= ROW && b <= ROW)
    return kmax(a, b);
  if (op == XPJ_ADD && ((a == LANE && b <= ROW) || (b == LANE && a <= ROW)))
    return LANE;
  if (op == XPJ_SUB && a == LANE && b <= ROW)
    return LANE;
  return VARY;
}

static uint8_t inst_kind(plan_ctx *p, xpj_val id) {
  const xpj_func *f = p->f;
  const xpj_inst *in = &f->insts[id];
  const uint32_t *a = args(f, in);
  switch ((xpj_op)in->op) {
  case XPJ_OP_CONST:
  case XPJ_OP_PARAM:
  case XPJ_OP_SIZE:
  case XPJ_OP_NDIM:
    return UNI;
  case XPJ_OP_SHAPE:
  case XPJ_OP_STRIDE: /* of a parameter; the dimension may vary */
    if (in->nargs < 2)
      return UNI;
    return p->kind[a[1]] <= ROW ? p->kind[a[1]] : VARY;
  case XPJ_OP_WI:
    return wi_kind(p, in);
  case XPJ_OP_BINOP:
    return binop_kind((xpj_binop)in->aux, p->kind[a[0]], p->kind[a[1]]);
  case XPJ_OP_UNOP:
    return p->kind[a[0]] <= ROW ? p->kind[a[0]] : VARY;
  case XPJ_OP_CAST: {
    uint8_t k = p->kind[a[0]];
    if (k == LANE) { /* an integer id widened or narrowed keeps its stride */
      xpj_scalar to = (xpj_scalar)xpj_typeinfo_of(p->c->m, in->type)->scalar;
      return cg_scalar_is_float(to) ? VARY : LANE;
    }
    return k;
  }
  case XPJ_OP_MATH: {
    uint8_t k = UNI;
    for (uint32_t i = 0; i < in->nargs; i++)
      k = kmax(k, p->kind[a[i]]);
    return k <= ROW ? k : VARY;
  }
  case XPJ_OP_VAR:
    return var_kind(p, id);
  case XPJ_OP_LOAD:
    return is_var(f, a[0]) ? var_kind(p, a[0]) : VARY;
  case XPJ_OP_ARRAY:
    return xpj_typeinfo_of(p->c->m, in->type)->space == XPJ_SPACE_LOCAL ? UNI
                                                                        : VARY;
  default:
    return VARY;
  }
}

/* Kinds of the values of block b, whose statements run under control of
 * kind ctl; records into variables the kinds stored in them. */
static void kinds_block(plan_ctx *p, xpj_block b, uint8_t ctl) {
  const xpj_func *f = p->f;
  if (!b)
    return;
  const xpj_blockdata *bd = &f->blocks[b];
  for (uint32_t i = 0; i < bd->n; i++) {
    xpj_val id = bd->ids[i];
    const xpj_inst *in = &f->insts[id];
    const uint32_t *a = args(f, in);
    uint8_t k = inst_kind(p, id);
    if (k > p->kind[id]) { /* kinds only rise: a fixed point exists */
      p->kind[id] = k;
      p->changed = true;
    }
    /* a variable whose address is used other than to load and store it */
    for (uint32_t j = 0; j < in->nargs; j++) {
      bool ok = (in->op == XPJ_OP_LOAD && j == 0) ||
                (in->op == XPJ_OP_STORE && j == 0);
      if (is_var(f, a[j]) && !ok && !p->bad_var[a[j]]) {
        p->bad_var[a[j]] = 1;
        p->changed = true;
      }
    }
    if (in->op == XPJ_OP_STORE && is_var(f, a[0])) {
      uint8_t v = stored(p->vkind[a[0]], p->kind[a[1]], ctl);
      if (v != p->vkind[a[0]]) {
        p->vkind[a[0]] = v;
        p->changed = true;
      }
    }
    if (in->op == XPJ_OP_IF) {
      uint8_t inner = merged(ctl, p->kind[a[0]]);
      kinds_block(p, in->blk[0], inner);
      kinds_block(p, in->blk[1], inner);
    } else if (in->op == XPJ_OP_LOOP) {
      uint8_t inner = merged(ctl, in->imm.i ? p->kind[in->imm.i] : UNI);
      if (cg_block_exits_loop(f, in->blk[1]) || cg_block_exits_loop(f, in->blk[2]))
        inner = VARY;
      kinds_block(p, in->blk[0], inner);
      kinds_block(p, in->blk[1], inner);
      kinds_block(p, in->blk[2], inner);
    }
  }
}

/* ---- which loops to interchange ----------------------------------- */

/* Whether v is computed only from constants and loads of variables that
 * themselves hold only such values: a loop tested on it has a trip count
 * known at compile time, which LLVM unrolls completely instead (then the
 * work-item loop around it is vectorised as it is). */
static bool constant_expr(const xpj_func *f, xpj_val v, xpj_val var,
                          unsigned depth);

static bool constant_var(const xpj_func *f, xpj_val var, unsigned depth) {
  for (xpj_val u = 1; u < f->ninsts; u++) {
    const xpj_inst *in = &f->insts[u];
    if (in->op == XPJ_OP_STORE && args(f, in)[0] == var &&
        !constant_expr(f, args(f, in)[1], var, depth + 1))
      return false;
  }
  return true;
}

static bool constant_expr(const xpj_func *f, xpj_val v, xpj_val var,
                          unsigned depth) {
  const xpj_inst *in = &f->insts[v];
  if (depth > 16)
    return false;
  switch (in->op) {
  case XPJ_OP_CONST:
    return true;
  case XPJ_OP_LOAD:
    if (!is_var(f, args(f, in)[0]))
      return false;
    return args(f, in)[0] == var || (var == 0 && constant_var(f, args(f, in)[0], depth));
  case XPJ_OP_BINOP:
    return constant_expr(f, args(f, in)[0], var, depth + 1) &&
           constant_expr(f, args(f, in)[1], var, depth + 1);
  case XPJ_OP_UNOP:
  case XPJ_OP_CAST:
    return constant_expr(f, args(f, in)[0], var, depth + 1);
  default:
    return false;
  }
}

typedef struct loop_scan {
  bool gather;  /* an access that is neither uniform nor unit-stride */
  bool varies;  /* some value differs between the lanes */
  bool unknown; /* a call or a return: not interchanged */
} loop_scan;

/* Whether instruction v lies inside loop (in one of its blocks, at any
 * depth). */
static bool inside(const xpj_func *f, xpj_val v, xpj_val loop) {
  for (uint32_t b = f->insts[v].in_block; b > 1;) {
    xpj_val owner = f->blocks[b].parent;
    if (!owner)
      return false;
    if (owner == loop)
      return true;
    b = f->insts[owner].in_block;
  }
  return false;
}

static void access_class(plan_ctx *p, const xpj_inst *in, xpj_val loop,
                         loop_scan *s) {
  const xpj_func *f = p->f;
  const uint32_t *a = args(f, in);
  const xpj_inst *arr = &f->insts[a[0]];
  const xpj_typeinfo *ti = xpj_typeinfo_of(p->c->m, arr->type);
  unsigned nidx = in->nargs - 1;
  if (ti->kind == XPJ_TK_STATIC && ti->space != XPJ_SPACE_LOCAL) {
    /* a private array: per work-item storage, interleaved across items
     * when it lives across the loop */
    if (!inside(f, a[0], loop))
      s->gather = true;
    return;
  }
  int rank = ti->rank;
  bool all_row = true;
  for (unsigned k = 0; k < nidx; k++)
    all_row = all_row && p->kind[a[1 + k]] <= ROW;
  if (all_row)
    return; /* the same element for every lane */
  bool last_lane = p->kind[a[nidx]] == LANE;
  bool rest_row = true;
  for (unsigned k = 0; k + 1 < nidx; k++)
    rest_row = rest_row && p->kind[a[1 + k]] <= ROW;
  bool flat = nidx == 1 && rank != 1; /* unravelled through the shape */
  if (!last_lane || !rest_row || flat)
    s->gather = true;
}

static void scan_block(plan_ctx *p, xpj_block b, xpj_val loop, loop_scan *s) {
  const xpj_func *f = p->f;
  if (!b)
    return;
  const xpj_blockdata *bd = &f->blocks[b];
  for (uint32_t i = 0; i < bd->n; i++) {
    xpj_val id = bd->ids[i];
    const xpj_inst *in = &f->insts[id];
    if (p->kind[id] >= LANE && in->op != XPJ_OP_INDEX)
      s->varies = true;
    switch (in->op) {
    case XPJ_OP_INDEX:
      access_class(p, in, loop, s);
      break;
    case XPJ_OP_CALL:
    case XPJ_OP_RETURN:
    case XPJ_OP_BARRIER:
      s->unknown = true;
      break;
    case XPJ_OP_ATOMIC:
    case XPJ_OP_CMPXCHG:
    case XPJ_OP_ALOAD:
    case XPJ_OP_ASTORE:
      s->varies = true;
      break;
    case XPJ_OP_IF:
    case XPJ_OP_LOOP:
      for (int k = 0; k < 3; k++)
        scan_block(p, in->blk[k], loop, s);
      break;
    default:
      break;
    }
  }
}

/* Whether loop id may run at work-group level with the work-item loop
 * inside, and gains from it. */
static bool interchangeable(plan_ctx *p, xpj_val id) {
  const xpj_func *f = p->f;
  const xpj_inst *in = &f->insts[id];
  if (!in->imm.i || p->kind[in->imm.i] != UNI)
    return false;
  if (cg_block_exits_loop(f, in->blk[1]) || cg_block_exits_loop(f, in->blk[2]))
    return false;
  if (constant_expr(f, (xpj_val)in->imm.i, 0, 0))
    return false;
  loop_scan s = {0};
  for (int k = 0; k < 3; k++)
    scan_block(p, in->blk[k], id, &s);
  return !s.gather && !s.unknown && s.varies;
}

/* Marks the work-group-level blocks under block b (itself one); owners
 * of such blocks: statements with barriers (codegen.c keeps them at
 * work-group level) and interchanged loops. */
static void mark_blocks(plan_ctx *p, xpj_block b) {
  const xpj_func *f = p->f;
  if (!b)
    return;
  p->wgblock[b] = 1;
  const xpj_blockdata *bd = &f->blocks[b];
  for (uint32_t i = 0; i < bd->n; i++) {
    xpj_val id = bd->ids[i];
    const xpj_inst *in = &f->insts[id];
    if (in->op != XPJ_OP_IF && in->op != XPJ_OP_LOOP)
      continue;
    bool wg = cg_inst_has_barrier(p->c, f, id) ||
              (in->op == XPJ_OP_LOOP && p->xloop[id]);
    if (wg)
      for (int k = 0; k < 3; k++)
        mark_blocks(p, in->blk[k]);
  }
}

/* Whether statement id, in a work-group-level block, may run there. */
static bool wg_lowerable(plan_ctx *p, xpj_val id) {
  const xpj_func *f = p->f;
  const xpj_inst *in = &f->insts[id];
  const uint32_t *a = args(f, in);
  if (p->kind[id] != UNI && in->op != XPJ_OP_STORE)
    return false;
  switch ((xpj_op)in->op) {
  case XPJ_OP_CONST:
  case XPJ_OP_PARAM:
  case XPJ_OP_SIZE:
  case XPJ_OP_NDIM:
  case XPJ_OP_WI:
    return true;
  case XPJ_OP_SHAPE: /* the view is a parameter; the dimension is checked */
  case XPJ_OP_STRIDE:
  case XPJ_OP_BINOP:
  case XPJ_OP_UNOP:
  case XPJ_OP_CAST:
  case XPJ_OP_MATH:
    for (uint32_t k = 0; k < in->nargs; k++)
      if (!p->uni[a[k]] && f->insts[a[k]].op != XPJ_OP_CONST &&
          f->insts[a[k]].op != XPJ_OP_PARAM)
        return false;
    return true;
  case XPJ_OP_VAR:
    return p->wgvar[id];
  case XPJ_OP_LOAD:
    return is_var(f, a[0]) && p->wgvar[a[0]];
  case XPJ_OP_STORE:
    return is_var(f, a[0]) && p->wgvar[a[0]] &&
           (p->uni[a[1]] || f->insts[a[1]].op == XPJ_OP_CONST ||
            f->insts[a[1]].op == XPJ_OP_PARAM);
  default:
    return false;
  }
}

/* One round: with the interchanged loops of p->xloop, which statements
 * and variables run at work-group level; demotes what cannot. Returns
 * true when something changed. */
static bool settle(plan_ctx *p) {
  const xpj_func *f = p->f;
  size_t n = f->ninsts + 1;
  memset(p->wgblock, 0, f->nblocks + 1);
  mark_blocks(p, 1);
  for (xpj_val v = 1; v < f->ninsts; v++)
    p->wgvar[v] = f->insts[v].op == XPJ_OP_VAR && p->kind[v] == UNI &&
                  p->wgblock[f->insts[v].in_block];
  bool again = true;
  while (again) {
    again = false;
    memset(p->uni, 0, n);
    for (xpj_val v = 1; v < f->ninsts; v++)
      p->uni[v] = p->wgblock[f->insts[v].in_block] && wg_lowerable(p, v);
    /* a variable stays per group only if every store to it does */
    for (xpj_val v = 1; v < f->ninsts; v++) {
      const xpj_inst *in = &f->insts[v];
      if (in->op == XPJ_OP_STORE && is_var(f, args(f, in)[0]) &&
          p->wgvar[args(f, in)[0]] && !p->uni[v]) {
        p->wgvar[args(f, in)[0]] = 0;
        again = true;
      }
    }
  }
  bool changed = false;
  for (xpj_val v = 1; v < f->ninsts; v++)
    if (p->xloop[v] && !p->uni[f->insts[v].imm.i]) {
      p->xloop[v] = 0;
      changed = true;
    }
  return changed;
}

bool cg_plan_kernel(cg *c, const xpj_func *f, bool chunked, cg_plan *out) {
  memset(out, 0, sizeof *out);
  size_t n = f->ninsts + 1;
  plan_ctx p = {.c = c, .f = f, .chunked = chunked};
  p.kind = calloc(n, 1);
  p.vkind = calloc(n, 1);
  p.bad_var = calloc(n, 1);
  p.wgblock = calloc(f->nblocks + 1, 1);
  p.xloop = calloc(n, 1);
  p.uni = calloc(n, 1);
  p.wgvar = calloc(n, 1);
  bool ok = p.kind && p.vkind && p.bad_var && p.wgblock && p.xloop && p.uni &&
            p.wgvar;
  if (ok) {
    unsigned rounds = 0;
    do {
      p.changed = false;
      kinds_block(&p, 1, UNI);
    } while (p.changed && ++rounds < 64);
    if (p.changed) /* no fixed point: nothing is uniform */
      memset(p.kind, VARY, n);
    /* candidates, then fewer until every one's test runs at work-group
     * level */
    for (xpj_val v = 1; v < f->ninsts; v++)
      p.xloop[v] = f->insts[v].op == XPJ_OP_LOOP &&
                   !cg_inst_has_barrier(c, f, v) && interchangeable(&p, v);
    while (settle(&p))
      ;
    for (xpj_val v = 1; v < f->ninsts; v++)
      out->nxloops += p.xloop[v] && p.wgblock[f->insts[v].in_block];
    for (xpj_val v = 1; v < f->ninsts; v++)
      if (!p.wgblock[f->insts[v].in_block])
        p.xloop[v] = 0;
  }
  free(p.kind);
  free(p.vkind);
  free(p.bad_var);
  free(p.wgblock);
  if (!ok) {
    free(p.xloop);
    free(p.uni);
    free(p.wgvar);
    cg_fail(c, XPJ_ERR_NOMEM, "out of memory");
    return false;
  }
  out->xloop = p.xloop;
  out->uni = p.uni;
  free(p.wgvar);
  return true;
}

void cg_plan_free(cg_plan *p) {
  free(p->xloop);
  free(p->uni);
  memset(p, 0, sizeof *p);
}
