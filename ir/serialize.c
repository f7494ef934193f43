/*
 * serialize.c - the canonical serialization of a kernel and its callees,
 * and its SHA-256 content hash (the code component of cache keys).
 *
 * Canonical means: it depends only on what the program computes and on the
 * kernel's interface (name, parameter names and types), never on source
 * positions, comments, whitespace, local variable names, the order in
 * which functions were defined, or the order in which instructions were
 * created. Values are numbered in program order; functions in the order a
 * depth-first walk from the kernel first calls them; types are written out
 * structurally rather than by their interned ids. The format is documented
 * in docs/ir.md; its version is the first field.
 */
#include "buf.h"
#include "ir_impl.h"

#include <nettle/sha2.h>
#include <stdlib.h>
#include <string.h>

#define XPJ_SERIAL_VERSION 1u

typedef struct ser {
  xpj_buf *out;
  const xpj_module *m;
  uint32_t *fnum;  /* func index -> canonical index + 1 */
  uint32_t *order; /* canonical index -> func index */
  uint32_t nfn;
  bool failed;
} ser;

static void put_type(ser *s, xpj_type t) {
  const xpj_typeinfo *ti = xpj_typeinfo_of(s->m, t);
  xpj_buf_u8(s->out, t ? ti->kind : 0xff);
  switch (ti->kind) {
  case XPJ_TK_SCALAR:
    xpj_buf_u8(s->out, ti->scalar);
    break;
  case XPJ_TK_PARAM:
    xpj_buf_u32(s->out, ti->param);
    break;
  default:
    xpj_buf_u8(s->out, ti->space);
    xpj_buf_u8(s->out, ti->is_const);
    xpj_buf_u8(s->out, (uint8_t)ti->rank);
    if (ti->kind == XPJ_TK_STATIC)
      for (int i = 0; i < ti->rank; i++)
        xpj_buf_u64(s->out, (uint64_t)ti->dims[i]);
    put_type(s, ti->elem);
  }
}

/* Assigns canonical function numbers by a depth-first walk of calls. */
static void collect_calls(const xpj_func *f, xpj_val v, void *ud);

static void visit_func(ser *s, uint32_t fi) {
  if (s->fnum[fi])
    return;
  s->order[s->nfn] = fi;
  s->fnum[fi] = ++s->nfn;
  const xpj_func *f = s->m->funcs[fi];
  xpj_walk(f, 1, collect_calls, s);
}

static void collect_calls(const xpj_func *f, xpj_val v, void *ud) {
  const xpj_inst *in = &f->insts[v];
  if (in->op == XPJ_OP_CALL && in->imm.callee < f->mod->nfuncs)
    visit_func(ud, in->imm.callee);
}

typedef struct fser {
  ser *s;
  const xpj_func *f;
  uint32_t *num;
} fser;

static void put_ref(fser *fs, xpj_val v) {
  xpj_buf_u32(fs->s->out, v < fs->f->ninsts ? fs->num[v] : 0);
}

static void put_block(fser *fs, xpj_block b);

static void put_inst(fser *fs, xpj_val v) {
  const xpj_inst *in = &fs->f->insts[v];
  xpj_buf *o = fs->s->out;
  const uint32_t *a = xpj_inst_args(fs->f, in);
  xpj_buf_u8(o, in->op);
  xpj_buf_u8(o, in->aux);
  xpj_buf_u8(o, in->order);
  xpj_buf_u8(o, in->scope);
  put_type(fs->s, in->type);
  xpj_buf_u32(o, in->nargs);
  unsigned from = 0;
  if (in->op == XPJ_OP_CALL) {
    xpj_buf_u32(o, in->ntargs);
    xpj_buf_u32(o, in->imm.callee < fs->s->m->nfuncs
                       ? fs->s->fnum[in->imm.callee]
                       : 0);
    for (; from < in->ntargs; from++)
      put_type(fs->s, a[from]);
  }
  for (unsigned i = from; i < in->nargs; i++)
    put_ref(fs, a[i]);
  switch ((xpj_op)in->op) {
  case XPJ_OP_CONST:
  case XPJ_OP_WI: {
    uint64_t bits;
    memcpy(&bits, &in->imm, sizeof bits);
    xpj_buf_u64(o, bits);
    break;
  }
  case XPJ_OP_LOOP:
    put_ref(fs, (xpj_val)in->imm.i);
    break;
  default:
    break;
  }
  int nb = in->op == XPJ_OP_IF ? 2 : in->op == XPJ_OP_LOOP ? 3 : 0;
  for (int k = 0; k < nb; k++)
    put_block(fs, in->blk[k]);
}

static void put_block(fser *fs, xpj_block b) {
  const xpj_blockdata *bd = &fs->f->blocks[b];
  xpj_buf_u32(fs->s->out, bd->n);
  for (uint32_t i = 0; i < bd->n; i++)
    put_inst(fs, bd->ids[i]);
}

static void put_func(ser *s, const xpj_func *f, bool root) {
  xpj_buf *o = s->out;
  xpj_buf_u8(o, (uint8_t)f->kind);
  /* bit 7: a required local size follows (kernels without one keep the
   * encoding, and the hash, they always had) */
  xpj_buf_u8(o, (uint8_t)(f->dims | (f->reqd_local[0] ? 0x80 : 0)));
  for (unsigned d = 0; f->reqd_local[0] && d < f->dims; d++)
    xpj_buf_u64(o, f->reqd_local[d]);
  /* only the kernel's interface is observable: helpers are anonymous */
  xpj_buf_str(o, root ? f->name : "");
  /* bit 31: const parameters follow (generic kernels only; specialised
   * ones never have them, so their encoding is unchanged) */
  xpj_buf_u32(o, f->ntparams | (f->ncparams ? 0x80000000u : 0));
  if (f->ncparams) {
    xpj_buf_u32(o, f->ncparams);
    for (unsigned i = 0; i < f->ncparams; i++) {
      xpj_buf_str(o, root ? f->cparams[i] : "");
      xpj_buf_u8(o, f->cptype[i]);
      xpj_buf_u8(o, f->cppos[i]);
    }
  }
  xpj_buf_u32(o, f->nparams);
  for (unsigned i = 0; i < f->nparams; i++) {
    xpj_buf_str(o, root ? f->params[i].name : "");
    put_type(s, f->params[i].type);
  }
  put_type(s, f->ret);
  fser fs = {s, f, xpj_number_values(f)};
  if (!fs.num) {
    s->failed = true;
    return;
  }
  put_block(&fs, 1);
  xpj_free(fs.num);
}

xpj_status xpj_module_serialize(const xpj_module *m, const char *kernel,
                                uint8_t **out, size_t *len) {
  if (!m || !kernel || !out || !len)
    return XPJ_ERR_INVALID;
  *out = NULL;
  *len = 0;
  const xpj_func *k = xpj_module_find(m, kernel);
  if (!k)
    return XPJ_ERR_NOT_FOUND;
  xpj_buf b = {0};
  ser s = {&b, m, xpj_calloc(m->nfuncs, sizeof(uint32_t)),
           xpj_calloc(m->nfuncs, sizeof(uint32_t)), 0, false};
  if (!s.fnum || !s.order) {
    xpj_free(s.fnum);
    xpj_free(s.order);
    return XPJ_ERR_NOMEM;
  }
  xpj_buf_put(&b, "XPJIR", 6); /* with the NUL */
  xpj_buf_u32(&b, XPJ_SERIAL_VERSION);
  visit_func(&s, k->index);
  xpj_buf_u32(&b, s.nfn);
  for (uint32_t i = 0; i < s.nfn && !s.failed; i++)
    put_func(&s, m->funcs[s.order[i]], i == 0);
  xpj_free(s.fnum);
  xpj_free(s.order);
  size_t n;
  char *data = xpj_buf_take(&b, &n);
  if (!data || s.failed) {
    free(data);
    return XPJ_ERR_NOMEM;
  }
  *out = (uint8_t *)data;
  *len = n;
  return XPJ_OK;
}

xpj_status xpj_module_hash(const xpj_module *m, const char *kernel,
                           uint8_t digest[32], char hex[65]) {
  uint8_t *data;
  size_t len;
  xpj_status st = xpj_module_serialize(m, kernel, &data, &len);
  if (st != XPJ_OK)
    return st;
  uint8_t d[SHA256_DIGEST_SIZE];
  struct sha256_ctx h; /* nettle: no library start-up cost, unlike OpenSSL 3 */
  sha256_init(&h);
  sha256_update(&h, len, data);
  sha256_digest(&h, sizeof d, d);
  free(data);
  if (digest)
    memcpy(digest, d, 32);
  if (hex) {
    static const char xd[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
      hex[2 * i] = xd[d[i] >> 4];
      hex[2 * i + 1] = xd[d[i] & 15];
    }
    hex[64] = 0;
  }
  return XPJ_OK;
}
