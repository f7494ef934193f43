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
 *
 * A kernel with const parameters is first parsed again from its source
 * with their values bound (xpj_parse_bound, frontend.h): there they are
 * typed constants, so array sizes, `local(...)` and every expression fold
 * as with module constants, and every check deferred by the generic parse
 * runs with the values in the message. The types are then bound as
 * above, from that module.
 */
#include "buf.h"
#include "frontend.h"
#include "ir_impl.h"
#include "lex.h"
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
  bool no_body; /* the kernel's signature only (xpj_specialize_signature) */
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
    line += xpj_bom_len(text, len); /* line 1 as the lexer reads it */
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
    if (ti->space == XPJ_SPACE_LOCAL)
      return e ? xpj_type_local_view(c->dst, e) : 0;
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
    if (in->order == XPJ_CONST_CAST &&
        (s == XPJ_BOOL || (in->aux && !xpj_scalar_float_valued(s)))) {
      /* T(1) with T = bool, T(2.5) with T = i32: as bool(1) and i32(2.5),
       * the cast of the literal's value (docs/language.md 4.3) */
      if (!in->aux) /* to bool: x != 0 */
        return xpj_b_const_int(f, db, t, in->imm.i != 0, l);
      xpj_val v = xpj_b_const_float(f, db, xpj_type_scalar(x->c->dst, XPJ_F64),
                                    in->imm.f, l);
      return v ? xpj_b_cast(f, db, t, v, l) : 0;
    }
    if (in->aux) {
      if (!xpj_scalar_float_valued(s)) {
        spec_error(x->c, l, "floating-point literal %g cannot have type %s; "
                   "use a cast", in->imm.f, xpj_scalar_name((xpj_scalar)s));
        return 0;
      }
      return xpj_b_const_float_dir(f, db, t, in->imm.f, xpj_const_dir(in), l);
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
  if (!c->no_body)
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

/* ---- const parameters ----------------------------------------------- */

bool xpj_const_fits(xpj_scalar s, int64_t v) {
  if (s == XPJ_BOOL)
    return v == 0 || v == 1;
  if (s < XPJ_I8 || s > XPJ_U64)
    return false;
  unsigned bits = xpj_scalar_bits(s);
  if (bits == 64)
    return true;
  if (s <= XPJ_I64)
    return v >= -(INT64_C(1) << (bits - 1)) && v < (INT64_C(1) << (bits - 1));
  return v >= 0 && v < (INT64_C(1) << bits);
}

/* "(-128 to 127)" */
static const char *range_str(xpj_scalar s, char *buf, size_t size) {
  unsigned bits = xpj_scalar_bits(s);
  if (s == XPJ_U64)
    snprintf(buf, size, "0 to 18446744073709551615");
  else if (s >= XPJ_U8)
    snprintf(buf, size, "0 to %lld", (long long)((INT64_C(1) << bits) - 1));
  else if (s == XPJ_I64)
    snprintf(buf, size, "-9223372036854775808 to 9223372036854775807");
  else
    snprintf(buf, size, "%lld to %lld", (long long)-(INT64_C(1) << (bits - 1)),
             (long long)((INT64_C(1) << (bits - 1)) - 1));
  return buf;
}

static xpj_status const_err(char *err, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static xpj_status const_err(char *err, size_t size, const char *fmt, ...) {
  if (err && size) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
  }
  return XPJ_ERR_SPECIALIZE;
}

xpj_status xpj_const_parse(const char *text, xpj_scalar type, int64_t *out,
                           char *err, size_t size) {
  if (err && size)
    err[0] = 0;
  if (!text || !out || type < XPJ_BOOL || type > XPJ_U64) {
    const_err(err, size, "invalid argument");
    return XPJ_ERR_INVALID;
  }
  if (type == XPJ_BOOL) {
    if (strcmp(text, "true") && strcmp(text, "false"))
      return const_err(err, size, "'%.64s' is not a bool (true or false)",
                       text);
    *out = strcmp(text, "true") == 0;
    return XPJ_OK;
  }
  const char *s = text;
  bool neg = *s == '-';
  if (*s == '-' || *s == '+')
    s++;
  unsigned base = 10;
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s += 2;
  }
  if (!*s)
    return const_err(err, size, "'%.64s' is not an integer (decimal, or "
                     "hexadecimal with 0x)", text);
  uint64_t mag = 0;
  bool over = false;
  for (; *s; s++) {
    unsigned d;
    if (*s >= '0' && *s <= '9')
      d = (unsigned)(*s - '0');
    else if (base == 16 && *s >= 'a' && *s <= 'f')
      d = (unsigned)(*s - 'a' + 10);
    else if (base == 16 && *s >= 'A' && *s <= 'F')
      d = (unsigned)(*s - 'A' + 10);
    else
      return const_err(err, size, "'%.64s' is not an integer (decimal, or "
                       "hexadecimal with 0x)", text);
    if (mag > (UINT64_MAX - d) / base)
      over = true;
    else
      mag = mag * base + d;
  }
  char rb[64];
  unsigned bits = xpj_scalar_bits(type);
  bool sgn = type <= XPJ_I64;
  uint64_t lim = sgn ? (UINT64_C(1) << (bits - 1)) - (neg ? 0 : 1)
                 : neg ? 0
                 : bits == 64 ? UINT64_MAX
                              : (UINT64_C(1) << bits) - 1;
  if (over || mag > lim)
    return const_err(err, size, "%.64s is out of range for %s (%s)", text,
                     xpj_scalar_name(type), range_str(type, rb, sizeof rb));
  *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
  return XPJ_OK;
}

size_t xpj_const_str(xpj_scalar type, int64_t v, char *buf, size_t size) {
  int n;
  if (!buf) /* (as snprintf(NULL, 0): the length only) */
    size = 0;
  if (type == XPJ_BOOL)
    n = snprintf(buf, size, "%s", v ? "true" : "false");
  else if (type == XPJ_U64)
    n = snprintf(buf, size, "%llu", (unsigned long long)v);
  else
    n = snprintf(buf, size, "%lld", (long long)v);
  return n < 0 ? 0 : (size_t)n;
}

/* ---- entry ---------------------------------------------------------- */

static int find_name(char *const *list, unsigned n, const char *name) {
  for (unsigned i = 0; i < n; i++)
    if (strcmp(list[i], name) == 0)
      return (int)i;
  return -1;
}

/* k's source parsed again with its const parameters bound to values
 * (frontend.h): *out, or an error (with the binding) in d. */
static xpj_status rebind(const xpj_module *m, const xpj_func *k,
                         const int64_t *values, const char *binding,
                         xpj_diags *d, xpj_module **out) {
  *out = NULL;
  size_t len = 0;
  const char *text = xpj_module_file_text(m, k->loc.file, &len);
  const char *fname = xpj_module_file_name(m, k->loc.file);
  if (!text) {
    add_error(d, "kernel '%s' has const parameters, and its source is not "
              "in the module: it cannot be specialised", k->name);
    return XPJ_ERR_SPECIALIZE;
  }
  const char *names[XPJ_MAX_CPARAMS];
  for (unsigned i = 0; i < k->ncparams; i++)
    names[i] = k->cparams[i];
  xpj_binding b = {k->name, k->ncparams, names, values, binding};
  xpj_module *bm = NULL;
  if (xpj_module_create(&bm) != XPJ_OK)
    return XPJ_ERR_NOMEM;
  xpj_status st = xpj_parse_bound(bm, fname ? fname : "", text, len, d, &b);
  const xpj_func *bk = st == XPJ_OK ? xpj_module_find(bm, k->name) : NULL;
  if (st == XPJ_OK && (!bk || bk->kind != k->kind)) {
    add_error(d, "internal error: kernel '%s' is not in its source",
              k->name);
    st = XPJ_ERR_SPECIALIZE;
  }
  if (st != XPJ_OK) {
    xpj_module_destroy(bm);
    return st == XPJ_ERR_NOMEM ? st : XPJ_ERR_SPECIALIZE;
  }
  *out = bm;
  return XPJ_OK;
}

static xpj_status specialize(const xpj_module *m, const char *kernel,
                             const xpj_spec *spec, xpj_module **out,
                             xpj_diags *d, bool body);

xpj_status xpj_specialize(const xpj_module *m, const char *kernel,
                          const xpj_spec *spec, xpj_module **out,
                          xpj_diags *d) {
  return specialize(m, kernel, spec, out, d, true);
}

xpj_status xpj_specialize_signature(const xpj_module *m, const char *kernel,
                                    const xpj_spec *spec, xpj_module **out,
                                    xpj_diags *d) {
  return specialize(m, kernel, spec, out, d, false);
}

static xpj_status specialize(const xpj_module *m, const char *kernel,
                             const xpj_spec *spec, xpj_module **out,
                             xpj_diags *d, bool body) {
  if (out)
    *out = NULL;
  if (!m || !kernel || !spec || !out ||
      (spec->ntypes && (!spec->names || !spec->types)) ||
      (spec->nconsts && (!spec->const_names || !spec->const_values)))
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
  char tplist[256] = "", cplist[512] = "";
  for (unsigned i = 0; i < k->ntparams; i++) {
    size_t n = strlen(tplist);
    snprintf(tplist + n, sizeof tplist - n, "%s%s", i ? ", " : "",
             k->tparams[i]);
  }
  for (unsigned i = 0; i < k->ncparams; i++) {
    size_t n = strlen(cplist);
    snprintf(cplist + n, sizeof cplist - n, "%s%s: %s", i ? ", " : "",
             k->cparams[i], xpj_scalar_name((xpj_scalar)k->cptype[i]));
  }
  unsigned errors = 0;
  for (unsigned i = 0; i < spec->ntypes; i++) {
    const char *nm = spec->names[i] ? spec->names[i] : "";
    int c = find_name(k->cparams, k->ncparams, nm);
    if (c >= 0) {
      add_error(d, "'%s' is a const parameter of kernel '%s' (%s: %s): give "
                "it a value (%s=%s), not a dtype", nm, kernel, nm,
                xpj_scalar_name((xpj_scalar)k->cptype[c]), nm,
                k->cptype[c] == XPJ_BOOL ? "true" : "16");
      errors++;
      continue;
    }
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
  /* bind const parameters by name */
  int64_t values[XPJ_MAX_CPARAMS] = {0};
  bool given[XPJ_MAX_CPARAMS] = {0};
  for (unsigned i = 0; i < spec->nconsts; i++) {
    const char *nm = spec->const_names[i] ? spec->const_names[i] : "";
    int64_t v = spec->const_values[i];
    int j = find_name(k->cparams, k->ncparams, nm);
    if (j < 0) {
      if (find_name(k->tparams, k->ntparams, nm) >= 0)
        add_error(d, "'%s' is a type parameter of kernel '%s': give it a "
                  "dtype (%s=f32), not a value", nm, kernel, nm);
      else if (k->ncparams)
        add_error(d, "kernel '%s' has no const parameter '%s' (it has: %s)",
                  kernel, nm, cplist);
      else
        add_error(d, "kernel '%s' has no const parameters, but a value was "
                  "given for '%s'", kernel, nm);
      errors++;
      continue;
    }
    xpj_scalar ty = (xpj_scalar)k->cptype[j];
    if (given[j]) {
      add_error(d, "const parameter '%s' is bound twice", nm);
      errors++;
      continue;
    }
    if (!xpj_const_fits(ty, v)) {
      char rb[64];
      if (ty == XPJ_BOOL)
        add_error(d, "value %lld for const parameter '%s: bool' of kernel "
                  "'%s' is not a bool (true or false)", (long long)v, nm,
                  kernel);
      else
        add_error(d, "value %lld is out of range for const parameter '%s: "
                  "%s' of kernel '%s' (%s)", (long long)v, nm,
                  xpj_scalar_name(ty), kernel, range_str(ty, rb, sizeof rb));
      errors++;
      continue;
    }
    given[j] = true;
    values[j] = v;
  }
  for (unsigned j = 0; j < k->ncparams; j++)
    if (!given[j]) {
      add_error(d, "kernel '%s' needs a value for const parameter '%s: %s' "
                "(e.g. %s=%s); it takes %u (%s)", kernel, k->cparams[j],
                xpj_scalar_name((xpj_scalar)k->cptype[j]), k->cparams[j],
                k->cptype[j] == XPJ_BOOL ? "true" : "16", k->ncparams,
                cplist);
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
  c.d = d;
  c.no_body = !body;
  c.ndim = generic ? spec->ndim : 0;
  /* the binding, in the order the parameters are declared */
  size_t bl = 0;
  for (unsigned i = 0, ng = xpj_func_generic_count(k); i < ng; i++) {
    int is_const = 0, j = xpj_func_generic_at(k, i, &is_const);
    char vb[32];
    if (is_const)
      xpj_const_str((xpj_scalar)k->cptype[j], values[j], vb, sizeof vb);
    bl += (size_t)snprintf(c.binding + bl, bl < sizeof c.binding
                                               ? sizeof c.binding - bl
                                               : 0,
                           "%s%s=%s", i ? ", " : "",
                           is_const ? k->cparams[j] : k->tparams[j],
                           is_const ? vb : xpj_scalar_name(bound[j]));
  }
  if (generic && bl < sizeof c.binding)
    snprintf(c.binding + bl, sizeof c.binding - bl, "%sndim=%u",
             bl ? ", " : "", c.ndim);
  /* const parameters: the source parsed again with their values */
  xpj_module *rebound = NULL;
  if (k->ncparams) {
    xpj_status st = rebind(m, k, values, c.binding, d, &rebound);
    if (st != XPJ_OK)
      return st;
    m = rebound;
    k = xpj_module_find(m, kernel);
  }
  c.src = m;
  if (xpj_module_create(&c.dst) != XPJ_OK) {
    xpj_module_destroy(rebound);
    return XPJ_ERR_NOMEM;
  }
  /* keep the sources so later stages can quote them */
  for (uint32_t i = 1; body && i < m->nfiles; i++)
    if (xpj_module_add_file(c.dst, m->files[i].name, m->files[i].text,
                            m->files[i].len) != i)
      c.oom = true;
  xpj_type targs[XPJ_MAX_TPARAMS] = {0};
  for (unsigned j = 0; j < k->ntparams; j++)
    targs[j] = xpj_type_scalar(c.dst, bound[j]);
  if (!c.oom)
    instantiate(&c, k, targs, true);
  xpj_free(c.insts);
  xpj_module_destroy(rebound);
  if (c.oom || c.dst->oom) {
    xpj_module_destroy(c.dst);
    return XPJ_ERR_NOMEM;
  }
  if (c.errors) {
    xpj_module_destroy(c.dst);
    return XPJ_ERR_SPECIALIZE;
  }
  const char *msg;
  xpj_status vs = body ? xpj_module_verify(c.dst, &msg) : XPJ_OK;
  if (vs != XPJ_OK) {
    add_error(d, "internal error: specialised IR failed verification: %s",
              msg);
    xpj_module_destroy(c.dst);
    return vs;
  }
  *out = c.dst;
  return XPJ_OK;
}
