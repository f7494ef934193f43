/*
 * spec.c - specialisation: a generic kernel, its element types and ndim
 * bound, becomes a concrete module.
 *
 * The body is rebuilt instruction by instruction through the builder in a
 * fresh module, with types substituted, so every typing rule is checked
 * again with the bound types (T = bool in an arithmetic kernel, a float
 * literal given to T = i32, x[i, j] on a rank-3 view, ...), and the errors
 * carry the positions of the generic source. Called device functions are
 * instantiated once per distinct list of type arguments.
 */
#include "buf.h"
#include "ir_impl.h"
#include "xpjit_compiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct inst_key {
  uint32_t func;
  xpj_type targs[XPJ_MAX_TPARAMS]; /* types of the new module */
  xpj_func *out;
} inst_key;

typedef struct spec_ctx {
  const xpj_module *src;
  xpj_module *dst;
  xpj_diags *d;
  unsigned ndim;
  char binding[256]; /* "T=f32, ndim=2" for messages */
  inst_key *insts;
  uint32_t ninsts, capinsts;
  unsigned errors;
  bool oom;
} spec_ctx;

static void spec_error(spec_ctx *c, xpj_loc l, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void spec_error(spec_ctx *c, xpj_loc l, const char *fmt, ...) {
  char msg[700];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n < sizeof msg && c->binding[0])
    snprintf(msg + n, sizeof msg - (size_t)n, " (with %s)", c->binding);
  c->errors++;
  if (!c->d)
    return;
  const char *file = xpj_module_file_name(c->src, l.file);
  size_t len = 0;
  const char *text = xpj_module_file_text(c->src, l.file, &len);
  const char *line = NULL;
  if (text && l.line) {
    line = text;
    for (unsigned k = 1; k < l.line && line; k++) {
      line = memchr(line, '\n', len - (size_t)(line - text));
      if (line)
        line++;
    }
  }
  if (xpj_diags_add(c->d, XPJ_SEV_ERROR, file ? file : "", l.line, l.col,
                    line, msg) != XPJ_OK)
    c->oom = true;
}

/* Maps a type of the source module into the destination module, with
 * type parameters bound to targs and generic rank bound to ndim. */
static xpj_type map_type(spec_ctx *c, xpj_type t, const xpj_type *targs) {
  const xpj_typeinfo *ti = xpj_typeinfo_of(c->src, t);
  switch (ti->kind) {
  case XPJ_TK_SCALAR:
    return xpj_type_scalar(c->dst, (xpj_scalar)ti->scalar);
  case XPJ_TK_PARAM:
    return ti->param < XPJ_MAX_TPARAMS ? targs[ti->param] : 0;
  case XPJ_TK_VIEW: {
    xpj_type e = map_type(c, ti->elem, targs);
    return e ? xpj_type_view(c->dst, e,
                             ti->rank == XPJ_RANK_GENERIC ? (int)c->ndim
                                                          : ti->rank,
                             ti->is_const)
             : 0;
  }
  case XPJ_TK_STATIC: {
    xpj_type e = map_type(c, ti->elem, targs);
    return e ? xpj_type_static(c->dst, (xpj_space)ti->space, e,
                               (unsigned)ti->rank, ti->dims)
             : 0;
  }
  case XPJ_TK_PTR: {
    xpj_type e = map_type(c, ti->elem, targs);
    return e ? xpj_type_ptr(c->dst, (xpj_space)ti->space, e, ti->is_const) : 0;
  }
  }
  return 0;
}

typedef struct fctx {
  spec_ctx *c;
  const xpj_func *sf;
  xpj_func *df;
  const xpj_type *targs;
  xpj_val *map;      /* source value -> destination value */
} fctx;

static xpj_func *instantiate(spec_ctx *c, const xpj_func *sf,
                             const xpj_type *targs, bool root);

/* Reports the builder's message at the instruction's position. */
static void built(fctx *x, const xpj_inst *in, xpj_val v) {
  if (v)
    return;
  if (x->c->dst->oom) {
    x->c->oom = true;
    return;
  }
  if (x->c->dst->errmsg[0])
    spec_error(x->c, in->loc, "%s", x->c->dst->errmsg);
  x->c->dst->errmsg[0] = 0;
}

static void copy_block(fctx *x, xpj_block sb, xpj_block db);

static xpj_val copy_inst(fctx *x, xpj_val sv, xpj_block db) {
  const xpj_inst *in = &x->sf->insts[sv];
  const uint32_t *a = xpj_inst_args(x->sf, in);
  xpj_func *f = x->df;
  xpj_val ops[XPJ_MAX_TPARAMS + XPJ_MAX_PARAMS];
  unsigned from = in->op == XPJ_OP_CALL ? in->ntargs : 0;
  for (unsigned i = from; i < in->nargs && i < XPJ_MAX_TPARAMS + XPJ_MAX_PARAMS;
       i++) {
    ops[i] = x->map[a[i]];
    if (!ops[i])
      return 0; /* poison */
  }
  xpj_type t = map_type(x->c, in->type, x->targs);
  xpj_loc l = in->loc;
  switch ((xpj_op)in->op) {
  case XPJ_OP_PARAM:
    return xpj_func_param_val(f, in->aux);
  case XPJ_OP_CONST: {
    int s = xpj_type_scalar_of(x->c->dst, t);
    if (in->aux) {
      if (s != XPJ_F32 && s != XPJ_F64) {
        spec_error(x->c, l, "floating-point literal %g cannot have type %s; "
                   "use a cast", in->imm.f, xpj_scalar_name((xpj_scalar)s));
        return 0;
      }
      return xpj_b_const_float(f, db, t, in->imm.f, l);
    }
    if (s == XPJ_BOOL && xpj_type_is_param(x->c->src, in->type)) {
      spec_error(x->c, l, "integer literal cannot have type bool");
      return 0;
    }
    return xpj_b_const_int(f, db, t, in->imm.i, l);
  }
  case XPJ_OP_BINOP:
    return xpj_b_binop(f, db, (xpj_binop)in->aux, ops[0], ops[1], l);
  case XPJ_OP_UNOP:
    return xpj_b_unop(f, db, (xpj_unop)in->aux, ops[0], l);
  case XPJ_OP_CAST:
    return xpj_b_cast(f, db, t, ops[0], l);
  case XPJ_OP_VAR:
    return xpj_b_var(f, db, xpj_typeinfo_of(x->c->dst, t)->elem,
                     xpj_inst_name(x->sf, in), l);
  case XPJ_OP_ARRAY:
    return xpj_b_array(f, db, t, xpj_inst_name(x->sf, in), l);
  case XPJ_OP_INDEX:
    return xpj_b_index(f, db, ops[0], in->nargs - 1, ops + 1, l);
  case XPJ_OP_LOAD:
    return xpj_b_load(f, db, ops[0], l);
  case XPJ_OP_STORE:
    return xpj_b_store(f, db, ops[0], ops[1], l);
  case XPJ_OP_SHAPE:
    return xpj_b_shape(f, db, ops[0], ops[1], l);
  case XPJ_OP_STRIDE:
    return xpj_b_stride(f, db, ops[0], ops[1], l);
  case XPJ_OP_SIZE:
    return xpj_b_size(f, db, ops[0], l);
  case XPJ_OP_NDIM:
    return xpj_b_ndim(f, db, ops[0], l);
  case XPJ_OP_WI:
    return xpj_b_wi(f, db, (xpj_wi)in->aux, (unsigned)in->imm.i, l);
  case XPJ_OP_BARRIER:
    return xpj_b_barrier(f, db, in->aux, l);
  case XPJ_OP_ATOMIC:
    return xpj_b_atomic(f, db, (xpj_atomic_op)in->aux, ops[0], ops[1],
                        (xpj_order)in->order, (xpj_scope)in->scope, l);
  case XPJ_OP_CMPXCHG:
    return xpj_b_cmpxchg(f, db, ops[0], ops[1], ops[2], (xpj_order)in->order,
                         (xpj_scope)in->scope, l);
  case XPJ_OP_ALOAD:
    return xpj_b_atomic_load(f, db, ops[0], (xpj_order)in->order,
                             (xpj_scope)in->scope, l);
  case XPJ_OP_ASTORE:
    return xpj_b_atomic_store(f, db, ops[0], ops[1], (xpj_order)in->order,
                              (xpj_scope)in->scope, l);
  case XPJ_OP_MATH:
    return xpj_b_math(f, db, (xpj_math)in->aux, in->nargs, ops, l);
  case XPJ_OP_GROUP: {
    xpj_coll_desc d = {in->scope, (xpj_coll)in->aux, (xpj_group_op)in->order};
    return xpj_b_group(f, db, &d, ops[0], in->nargs > 1 ? ops[1] : 0, l);
  }
  case XPJ_OP_LIMIT:
    return xpj_b_limit(f, db, (xpj_limit)in->aux, t, l);
  case XPJ_OP_CALL: {
    xpj_type targs[XPJ_MAX_TPARAMS] = {0};
    for (unsigned i = 0; i < in->ntargs && i < XPJ_MAX_TPARAMS; i++) {
      targs[i] = map_type(x->c, a[i], x->targs);
      if (!targs[i])
        return 0;
    }
    const xpj_func *callee = x->c->src->funcs[in->imm.callee];
    xpj_func *dc = instantiate(x->c, callee, targs, false);
    if (!dc)
      return 0;
    return xpj_b_call(f, db, dc, 0, NULL, in->nargs - in->ntargs, ops + from,
                      l);
  }
  case XPJ_OP_IF: {
    xpj_block tb, eb;
    xpj_val v = xpj_b_if(f, db, ops[0], &tb, &eb, l);
    if (!v)
      return 0;
    x->map[sv] = v;
    copy_block(x, in->blk[0], tb);
    copy_block(x, in->blk[1], eb);
    return v;
  }
  case XPJ_OP_LOOP: {
    xpj_block cb, bb, sb;
    xpj_val v = xpj_b_loop(f, db, &cb, &bb, &sb, l);
    if (!v)
      return 0;
    x->map[sv] = v;
    copy_block(x, in->blk[0], cb);
    if (in->imm.i) {
      xpj_val cv = x->map[(xpj_val)in->imm.i];
      if (!cv || xpj_b_loop_cond(f, v, cv) != XPJ_OK)
        return cv ? 0 : v;
    }
    copy_block(x, in->blk[1], bb);
    copy_block(x, in->blk[2], sb);
    return v;
  }
  case XPJ_OP_YIELD:
    return xpj_b_yield(f, db, ops[0], l);
  case XPJ_OP_BREAK:
    return xpj_b_break(f, db, l);
  case XPJ_OP_CONTINUE:
    return xpj_b_continue(f, db, l);
  case XPJ_OP_RETURN:
    return xpj_b_return(f, db, in->nargs ? ops[0] : 0, l);
  default:
    spec_error(x->c, l, "internal error: cannot specialise '%s'",
               xpj_op_names[in->op % XPJ_OP_COUNT]);
    return 0;
  }
}

static void copy_block(fctx *x, xpj_block sb, xpj_block db) {
  const xpj_blockdata *bd = &x->sf->blocks[sb];
  for (uint32_t i = 0; i < bd->n && !x->c->oom; i++) {
    xpj_val sv = bd->ids[i];
    if (x->sf->insts[sv].op == XPJ_OP_PARAM)
      continue;
    /* an operand lost to an earlier error: this one is lost too, quietly */
    const xpj_inst *in = &x->sf->insts[sv];
    const uint32_t *a = xpj_inst_args(x->sf, in);
    bool poisoned = false;
    for (unsigned k = in->op == XPJ_OP_CALL ? in->ntargs : 0; k < in->nargs; k++)
      if (!x->map[a[k]])
        poisoned = true;
    if (poisoned) {
      x->map[sv] = 0;
      continue;
    }
    unsigned before = x->c->errors;
    xpj_val v = copy_inst(x, sv, db);
    built(x, &x->sf->insts[sv], v);
    if (!v && x->c->errors == before && !x->c->oom)
      spec_error(x->c, x->sf->insts[sv].loc,
                 "internal error: '%s' was lost in specialisation",
                 xpj_op_names[x->sf->insts[sv].op % XPJ_OP_COUNT]);
    x->map[sv] = v;
  }
}

static xpj_func *instantiate(spec_ctx *c, const xpj_func *sf,
                             const xpj_type *targs, bool root) {
  for (uint32_t i = 0; i < c->ninsts; i++)
    if (c->insts[i].func == sf->index &&
        memcmp(c->insts[i].targs, targs, sizeof c->insts[i].targs) == 0)
      return c->insts[i].out;
  /* name: the kernel keeps its own; helpers get their type arguments */
  xpj_buf name = {0};
  xpj_buf_puts(&name, sf->name);
  if (!root && sf->ntparams) {
    xpj_buf_puts(&name, "<");
    for (unsigned i = 0; i < sf->ntparams; i++) {
      char tb[96];
      xpj_type_str(c->dst, targs[i], tb, sizeof tb);
      xpj_buf_printf(&name, "%s%s", i ? "," : "", tb);
    }
    xpj_buf_puts(&name, ">");
  }
  char *nm = xpj_buf_take(&name, NULL);
  if (!nm) {
    c->oom = true;
    return NULL;
  }
  xpj_func *df = xpj_func_create(c->dst, nm, sf->kind, sf->dims, 0, NULL,
                                 sf->loc);
  free(nm);
  if (!df) {
    c->oom = c->oom || c->dst->oom;
    return NULL;
  }
  memcpy(df->reqd_local, sf->reqd_local, sizeof df->reqd_local);
  if (!xpj_grow((void **)&c->insts, &c->capinsts, c->ninsts + 1,
                sizeof *c->insts)) {
    c->oom = true;
    return NULL;
  }
  inst_key *k = &c->insts[c->ninsts++];
  memset(k, 0, sizeof *k);
  k->func = sf->index;
  memcpy(k->targs, targs, sizeof k->targs);
  k->out = df;
  for (unsigned i = 0; i < sf->nparams; i++) {
    xpj_type t = map_type(c, sf->params[i].type, targs);
    if (!t || !xpj_func_add_param(df, sf->params[i].name, t, sf->params[i].loc)) {
      if (c->dst->oom)
        c->oom = true;
      else
        spec_error(c, sf->params[i].loc, "parameter '%s': %s",
                   sf->params[i].name,
                   c->dst->errmsg[0] ? c->dst->errmsg : "invalid type");
      return NULL;
    }
  }
  xpj_type rt = map_type(c, sf->ret, targs);
  if (!rt || xpj_func_set_return(df, rt) != XPJ_OK) {
    spec_error(c, sf->loc, "invalid return type of '%s'", sf->name);
    return NULL;
  }
  fctx x = {c, sf, df, targs, xpj_calloc(sf->ninsts, sizeof(xpj_val))};
  if (!x.map) {
    c->oom = true;
    return NULL;
  }
  for (unsigned i = 0; i < sf->nparams; i++)
    x.map[sf->params[i].val] = xpj_func_param_val(df, i);
  copy_block(&x, 1, xpj_func_body(df));
  xpj_free(x.map);
  return df;
}

static void add_error(xpj_diags *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add_error(xpj_diags *d, const char *fmt, ...) {
  if (!d)
    return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  xpj_diags_add(d, XPJ_SEV_ERROR, "", 0, 0, NULL, msg);
}

xpj_status xpj_specialize(const xpj_module *m, const char *kernel,
                          const xpj_spec *spec, xpj_module **out,
                          xpj_diags *d) {
  if (out)
    *out = NULL;
  if (!m || !kernel || !spec || !out ||
      (spec->ntypes && (!spec->names || !spec->types)))
    return XPJ_ERR_INVALID;
  const xpj_func *k = xpj_module_find(m, kernel);
  if (!k) {
    add_error(d, "no kernel named '%s'", kernel);
    return XPJ_ERR_NOT_FOUND;
  }
  if (k->kind == XPJ_FUNC_DEVICE) {
    add_error(d, "'%s' is a device function, not a kernel", kernel);
    return XPJ_ERR_NOT_FOUND;
  }
  /* bind type parameters by name */
  xpj_scalar bound[XPJ_MAX_TPARAMS] = {0};
  char tplist[256] = "";
  for (unsigned i = 0; i < k->ntparams; i++) {
    size_t n = strlen(tplist);
    snprintf(tplist + n, sizeof tplist - n, "%s%s", i ? ", " : "",
             k->tparams[i]);
  }
  unsigned errors = 0;
  for (unsigned i = 0; i < spec->ntypes; i++) {
    const char *nm = spec->names[i] ? spec->names[i] : "";
    unsigned j;
    for (j = 0; j < k->ntparams; j++)
      if (strcmp(k->tparams[j], nm) == 0)
        break;
    if (j == k->ntparams) {
      if (k->ntparams)
        add_error(d, "kernel '%s' has no type parameter '%s' (it has: %s)",
                  kernel, nm, tplist);
      else
        add_error(d, "kernel '%s' is not generic: it takes no dtypes, but "
                  "'%s' was given", kernel, nm);
      errors++;
      continue;
    }
    if (spec->types[i] <= XPJ_VOID || spec->types[i] >= XPJ_SCALAR_COUNT) {
      add_error(d, "invalid dtype for '%s'", nm);
      errors++;
      continue;
    }
    if (bound[j]) {
      add_error(d, "type parameter '%s' is bound twice", nm);
      errors++;
      continue;
    }
    bound[j] = spec->types[i];
  }
  for (unsigned j = 0; j < k->ntparams; j++)
    if (!bound[j]) {
      add_error(d, "kernel '%s' needs a dtype for type parameter '%s' "
                "(e.g. --dtype %s=f32); it takes %u (%s)", kernel,
                k->tparams[j], k->tparams[j], k->ntparams, tplist);
      errors++;
    }
  bool generic = xpj_func_has_generic_rank(k);
  if (generic && (spec->ndim < 1 || spec->ndim > XPJ_MAX_RANK)) {
    if (spec->ndim == 0)
      add_error(d, "kernel '%s' has arrays of generic rank ([*]): give an "
                "ndim from 1 to %d", kernel, XPJ_MAX_RANK);
    else
      add_error(d, "ndim %u is out of range for kernel '%s' (1 to %d)",
                spec->ndim, kernel, XPJ_MAX_RANK);
    errors++;
  } else if (!generic && spec->ndim != 0) {
    add_error(d, "kernel '%s' has no arrays of generic rank ([*]); ndim "
              "must not be given", kernel);
    errors++;
  }
  if (errors)
    return XPJ_ERR_SPECIALIZE;

  spec_ctx c = {0};
  c.src = m;
  c.d = d;
  c.ndim = generic ? spec->ndim : 0;
  if (xpj_module_create(&c.dst) != XPJ_OK)
    return XPJ_ERR_NOMEM;
  size_t bl = 0;
  for (unsigned j = 0; j < k->ntparams; j++)
    bl += (size_t)snprintf(c.binding + bl, sizeof c.binding - bl, "%s%s=%s",
                           j ? ", " : "", k->tparams[j],
                           xpj_scalar_name(bound[j]));
  if (generic)
    snprintf(c.binding + bl, sizeof c.binding - bl, "%sndim=%u",
             bl ? ", " : "", c.ndim);
  /* keep the sources so later stages can quote them */
  for (uint32_t i = 1; i < m->nfiles; i++)
    if (xpj_module_add_file(c.dst, m->files[i].name, m->files[i].text,
                            m->files[i].len) != i)
      c.oom = true;
  xpj_type targs[XPJ_MAX_TPARAMS] = {0};
  for (unsigned j = 0; j < k->ntparams; j++)
    targs[j] = xpj_type_scalar(c.dst, bound[j]);
  if (!c.oom)
    instantiate(&c, k, targs, true);
  xpj_free(c.insts);
  if (c.oom || c.dst->oom) {
    xpj_module_destroy(c.dst);
    return XPJ_ERR_NOMEM;
  }
  if (c.errors) {
    xpj_module_destroy(c.dst);
    return XPJ_ERR_SPECIALIZE;
  }
  const char *msg;
  xpj_status vs = xpj_module_verify(c.dst, &msg);
  if (vs != XPJ_OK) {
    add_error(d, "internal error: specialised IR failed verification: %s",
              msg);
    xpj_module_destroy(c.dst);
    return vs;
  }
  *out = c.dst;
  return XPJ_OK;
}
