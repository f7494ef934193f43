/*
 * print.c - the readable form of the IR. Values are numbered in program
 * order (parameters first), the same numbering the canonical serialization
 * uses, so dumps are stable golden files: they do not depend on the order
 * in which the builder happened to create instructions.
 */
#include "buf.h"
#include "ir_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct numbering {
  uint32_t *num; /* inst id -> canonical number + 1 */
  uint32_t next;
} numbering;

static void number_visit(const xpj_func *f, xpj_val v, void *ud) {
  numbering *n = ud;
  /* only values get numbers: statements are never operands */
  if (xpj_type_scalar_of(f->mod, f->insts[v].type) != XPJ_VOID)
    n->num[v] = ++n->next;
}

/* Canonical numbering of f's values; NULL when out of memory. */
uint32_t *xpj_number_values(const xpj_func *f) {
  numbering n = {xpj_calloc(f->ninsts, sizeof(uint32_t)), 0};
  if (!n.num)
    return NULL;
  xpj_walk(f, 1, number_visit, &n);
  return n.num;
}

typedef struct printer {
  xpj_buf *out;
  const xpj_func *f;
  uint32_t *num;
} printer;

static void put_type(printer *p, xpj_type t) {
  char tmp[256];
  xpj_type_str_in(p->f, t, tmp, sizeof tmp);
  xpj_buf_puts(p->out, tmp);
}

static void put_val(printer *p, xpj_val v) {
  if (v && v < p->f->ninsts && p->num[v])
    xpj_buf_printf(p->out, "%%%u", p->num[v] - 1);
  else
    xpj_buf_puts(p->out, "%?");
}

static void put_args(printer *p, const xpj_inst *in, unsigned from) {
  const uint32_t *a = xpj_inst_args(p->f, in);
  for (unsigned i = from; i < in->nargs; i++) {
    if (i > from)
      xpj_buf_puts(p->out, ", ");
    put_val(p, a[i]);
  }
}

static void indent(printer *p, int depth) {
  for (int i = 0; i < depth; i++)
    xpj_buf_puts(p->out, "  ");
}

static void put_block(printer *p, xpj_block b, int depth);

static const char *const binop_names[XPJ_BINOP_COUNT] = {
    "add", "sub", "mul", "div", "rem", "and", "or", "xor",
    "shl", "shr", "eq",  "ne",  "lt",  "le",  "gt", "ge"};
static const char *const unop_names[XPJ_UNOP_COUNT] = {"neg", "not", "lnot"};

static void put_const(printer *p, const xpj_inst *in) {
  if (in->aux) {
    int s = xpj_type_scalar_of(p->f->mod, in->type);
    char tmp[64];
    snprintf(tmp, sizeof tmp, s == XPJ_F32 ? "%.9g" : "%.17g", in->imm.f);
    xpj_buf_puts(p->out, tmp);
    if (!strpbrk(tmp, ".eEn"))
      xpj_buf_puts(p->out, ".0");
    if (xpj_const_dir(in)) /* the literal's decimal beside it (ir_impl.h) */
      xpj_buf_puts(p->out, xpj_const_dir(in) > 0 ? " (literal above)"
                                                 : " (literal below)");
  } else if (xpj_type_scalar_of(p->f->mod, in->type) == XPJ_U64) {
    xpj_buf_printf(p->out, "%llu", (unsigned long long)in->imm.i);
  } else {
    xpj_buf_printf(p->out, "%lld", (long long)in->imm.i);
  }
}

static void put_inst(printer *p, xpj_val v, int depth) {
  const xpj_inst *in = &p->f->insts[v];
  xpj_buf *o = p->out;
  const xpj_module *m = p->f->mod;
  const uint32_t *a = xpj_inst_args(p->f, in);
  if (in->op == XPJ_OP_PARAM)
    return; /* shown in the signature */
  indent(p, depth);
  bool has_val = xpj_type_scalar_of(m, in->type) != XPJ_VOID;
  if (has_val) {
    put_val(p, v);
    xpj_buf_puts(o, " = ");
  }
  switch ((xpj_op)in->op) {
  case XPJ_OP_CONST:
    xpj_buf_puts(o, in->order == XPJ_CONST_CAST ? "const cast " : "const ");
    put_const(p, in);
    break;
  case XPJ_OP_BINOP:
    xpj_buf_printf(o, "%s ", binop_names[in->aux % XPJ_BINOP_COUNT]);
    put_args(p, in, 0);
    break;
  case XPJ_OP_UNOP:
    xpj_buf_printf(o, "%s ", unop_names[in->aux % XPJ_UNOP_COUNT]);
    put_args(p, in, 0);
    break;
  case XPJ_OP_VAR:
  case XPJ_OP_ARRAY: {
    const char *nm = xpj_inst_name(p->f, in);
    xpj_buf_printf(o, "%s", xpj_op_names[in->op]);
    if (nm)
      xpj_buf_printf(o, " \"%s\"", nm);
    break;
  }
  case XPJ_OP_CPARAM:
    xpj_buf_printf(o, "const_param %s", in->aux < p->f->ncparams
                                            ? p->f->cparams[in->aux]
                                            : "?");
    break;
  case XPJ_OP_WI:
    xpj_buf_printf(o, "wi %s", xpj_wi_name((xpj_wi)in->aux));
    if (xpj_wi_needs_dim((xpj_wi)in->aux))
      xpj_buf_printf(o, " %lld", (long long)in->imm.i);
    break;
  case XPJ_OP_BARRIER:
    xpj_buf_printf(o, "barrier %s",
                   in->aux == 3   ? "local|global"
                   : in->aux == 1 ? "local"
                                  : "global");
    break;
  case XPJ_OP_ATOMIC:
    xpj_buf_printf(o, "atomic %s ", xpj_atomic_op_name((xpj_atomic_op)in->aux));
    put_args(p, in, 0);
    xpj_buf_printf(o, " %s %s", xpj_order_name((xpj_order)in->order),
                   xpj_scope_name((xpj_scope)in->scope));
    break;
  case XPJ_OP_CMPXCHG:
  case XPJ_OP_ALOAD:
  case XPJ_OP_ASTORE:
    xpj_buf_printf(o, "%s ", xpj_op_names[in->op]);
    put_args(p, in, 0);
    xpj_buf_printf(o, " %s %s", xpj_order_name((xpj_order)in->order),
                   xpj_scope_name((xpj_scope)in->scope));
    break;
  case XPJ_OP_MATH:
    xpj_buf_printf(o, "math %s ", xpj_math_name((xpj_math)in->aux));
    put_args(p, in, 0);
    break;
  case XPJ_OP_GROUP: {
    xpj_coll_desc d = {in->scope, (xpj_coll)in->aux, (xpj_group_op)in->order};
    char nm[64];
    xpj_coll_name(&d, nm, sizeof nm);
    xpj_buf_printf(o, "%s ", nm);
    put_args(p, in, 0);
    break;
  }
  case XPJ_OP_LIMIT:
    xpj_buf_printf(o, "limit %s", xpj_limit_name((xpj_limit)in->aux));
    break;
  case XPJ_OP_CALL: {
    const xpj_func *callee = in->imm.callee < m->nfuncs
                                 ? m->funcs[in->imm.callee]
                                 : NULL;
    xpj_buf_printf(o, "call @%s", callee ? callee->name : "?");
    if (in->ntargs) {
      xpj_buf_puts(o, "<");
      for (unsigned i = 0; i < in->ntargs; i++) {
        if (i)
          xpj_buf_puts(o, ", ");
        put_type(p, a[i]);
      }
      xpj_buf_puts(o, ">");
    }
    xpj_buf_puts(o, "(");
    put_args(p, in, in->ntargs);
    xpj_buf_puts(o, ")");
    break;
  }
  case XPJ_OP_IF:
    xpj_buf_puts(o, "if ");
    put_val(p, a[0]);
    xpj_buf_puts(o, " {\n");
    put_block(p, in->blk[0], depth + 1);
    if (p->f->blocks[in->blk[1]].n) {
      indent(p, depth);
      xpj_buf_puts(o, "} else {\n");
      put_block(p, in->blk[1], depth + 1);
    }
    indent(p, depth);
    xpj_buf_puts(o, "}");
    if (has_val) {
      xpj_buf_puts(o, " : ");
      put_type(p, in->type);
    }
    xpj_buf_puts(o, "\n");
    return;
  case XPJ_OP_LOOP:
    xpj_buf_puts(o, "loop {\n");
    put_block(p, in->blk[0], depth + 1);
    indent(p, depth);
    if (in->imm.i) {
      xpj_buf_puts(o, "} while ");
      put_val(p, (xpj_val)in->imm.i);
      xpj_buf_puts(o, " do {\n");
    } else {
      xpj_buf_puts(o, "} do {\n");
    }
    put_block(p, in->blk[1], depth + 1);
    if (p->f->blocks[in->blk[2]].n) {
      indent(p, depth);
      xpj_buf_puts(o, "} step {\n");
      put_block(p, in->blk[2], depth + 1);
    }
    indent(p, depth);
    xpj_buf_puts(o, "}\n");
    return;
  default:
    xpj_buf_printf(o, "%s", xpj_op_names[in->op % XPJ_OP_COUNT]);
    if (in->nargs) {
      xpj_buf_puts(o, " ");
      put_args(p, in, 0);
    }
    break;
  }
  if (has_val && in->op == XPJ_OP_ARRAY && in->aux) {
    /* generic: the sizes that const parameters set are not known yet */
    const xpj_typeinfo *ti = xpj_typeinfo_of(m, in->type);
    xpj_buf_printf(o, " : %s ",
                   ti->space == XPJ_SPACE_LOCAL ? "local" : "private");
    put_type(p, ti->elem);
    for (int d = 0; d < ti->rank; d++) {
      xpj_buf_puts(o, d ? ", " : "[");
      if (in->aux & (1u << d))
        xpj_buf_puts(o, "?");
      else
        xpj_buf_printf(o, "%lld", (long long)ti->dims[d]);
    }
    xpj_buf_puts(o, "]\n");
    return;
  }
  if (has_val) {
    xpj_buf_puts(o, " : ");
    put_type(p, in->type);
  }
  xpj_buf_puts(o, "\n");
}

static void put_block(printer *p, xpj_block b, int depth) {
  const xpj_blockdata *bd = &p->f->blocks[b];
  for (uint32_t i = 0; i < bd->n; i++)
    put_inst(p, bd->ids[i], depth);
}

void xpj_print_func(xpj_buf *out, const xpj_func *f) {
  printer p = {out, f, xpj_number_values(f)};
  if (!p.num) {
    out->failed = true;
    return;
  }
  static const char *const kinds[] = {"fn", "kernel", "kernel"};
  xpj_buf_printf(out, "%s @%s", kinds[f->kind % 3], f->name);
  unsigned ng = xpj_func_generic_count(f);
  if (ng) {
    xpj_buf_puts(out, "<");
    for (unsigned i = 0; i < ng; i++) {
      int is_const = 0, k = xpj_func_generic_at(f, i, &is_const);
      if (is_const)
        xpj_buf_printf(out, "%sconst %s: %s", i ? ", " : "", f->cparams[k],
                       xpj_scalar_name((xpj_scalar)f->cptype[k]));
      else
        xpj_buf_printf(out, "%s%s", i ? ", " : "", f->tparams[k]);
    }
    xpj_buf_puts(out, ">");
  }
  xpj_buf_puts(out, "(");
  for (unsigned i = 0; i < f->nparams; i++) {
    if (i)
      xpj_buf_puts(out, ", ");
    put_val(&p, f->params[i].val);
    xpj_buf_printf(out, " %s: ", f->params[i].name);
    put_type(&p, f->params[i].type);
  }
  xpj_buf_puts(out, ")");
  if (f->kind == XPJ_FUNC_RANGE) {
    if (f->dims)
      xpj_buf_printf(out, " range(%u)", f->dims);
    else
      xpj_buf_puts(out, " range");
  } else if (f->kind == XPJ_FUNC_NDRANGE) {
    xpj_buf_printf(out, " ndrange(%u)", f->dims);
    for (unsigned d = 0; f->reqd_local[0] && d < f->dims; d++)
      xpj_buf_printf(out, "%s%llu%s", d ? ", " : " local(",
                     (unsigned long long)f->reqd_local[d],
                     d + 1 == f->dims ? ")" : "");
  } else if (xpj_type_scalar_of(f->mod, f->ret) != XPJ_VOID) {
    xpj_buf_puts(out, " -> ");
    put_type(&p, f->ret);
  }
  xpj_buf_puts(out, " {\n");
  put_block(&p, 1, 1);
  xpj_buf_puts(out, "}\n");
  xpj_free(p.num);
}

xpj_status xpj_module_print(const xpj_module *m, char **out, size_t *len) {
  if (!m || !out)
    return XPJ_ERR_INVALID;
  *out = NULL;
  xpj_buf b = {0};
  for (uint32_t i = 0; i < m->nfuncs; i++) {
    if (i)
      xpj_buf_puts(&b, "\n");
    xpj_print_func(&b, m->funcs[i]);
  }
  *out = xpj_buf_take(&b, len);
  return *out ? XPJ_OK : XPJ_ERR_NOMEM;
}
