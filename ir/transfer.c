/*
 * transfer.c - the transfer encoding of a whole module (transfer.h; the
 * format is in docs/ir.md, "Transfer encoding").
 *
 * The encoder writes the module's arrays as they are, so ids, offsets and
 * positions come back unchanged. The decoder rebuilds what has structure
 * through the IR's own functions (types through interning, functions
 * through xpj_func_create, const parameters, the return type and the
 * required local size through their setters, files through
 * xpj_module_add_file), so those keep the builder's invariants, and checks
 * the rest before anything reads it, in this order:
 *
 *   1. reading: counts against the bytes left, before allocating;
 *   2. per function, structure: every index in range, each instruction in
 *      exactly one block, blocks a tree under the body, parameters and
 *      PARAM instructions agreeing;
 *   3. the call graph: callees exist, are device functions, no recursion,
 *      and the recursion that passes walking blocks and calls can reach is
 *      bounded (XPJ_TRANSFER_MAX_DEPTH);
 *   4. per instruction, the builder's typing rules (ir/ir.c): code
 *      generation relies on them, and the verifier re-checks only some;
 *   5. xpj_module_verify.
 *
 * Each step relies only on the ones before it.
 */
#include "transfer.h"

#include "buf.h"
#include "ir_impl.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "XPJTM" and its NUL */
static const char MAGIC[6] = "XPJTM";

/* Encoded sizes of records, to check a count against the bytes left
 * before allocating for it (a lower bound where a record varies). */
enum {
  LOC_BYTES = 12,
  TYPE_BYTES = 13,   /* without a static array's dims */
  FILE_BYTES = 12,   /* with empty name and text */
  FUNC_BYTES = 73,   /* with no parameters and an empty body */
  PARAM_BYTES = 12 + LOC_BYTES,
  INST_BYTES = 44 + LOC_BYTES,
  BLOCK_BYTES = 8,   /* empty */
};

_Static_assert(sizeof(((xpj_inst *)0)->imm) == 8, "imm is 8 bytes");

/* ---- encoding ------------------------------------------------------- */

static void put_loc(xpj_buf *b, xpj_loc l) {
  xpj_buf_u32(b, l.file);
  xpj_buf_u32(b, l.line);
  xpj_buf_u32(b, l.col);
}

static void put_typeinfo(xpj_buf *b, const xpj_typeinfo *ti) {
  xpj_buf_u8(b, ti->kind);
  xpj_buf_u8(b, ti->scalar);
  xpj_buf_u8(b, ti->space);
  xpj_buf_u8(b, ti->is_const);
  xpj_buf_u8(b, (uint8_t)ti->rank);
  xpj_buf_u32(b, ti->param);
  xpj_buf_u32(b, ti->elem);
  if (ti->kind == XPJ_TK_STATIC)
    for (int i = 0; i < ti->rank && i < XPJ_MAX_RANK; i++)
      xpj_buf_u64(b, (uint64_t)ti->dims[i]);
}

/* The immediate as the opcode reads it: a callee or a name offset is a
 * 32-bit member of the union, written zero-extended, so that the bytes do
 * not depend on the host's byte order. */
static uint64_t imm_bits(const xpj_inst *in) {
  if (in->op == XPJ_OP_CALL)
    return in->imm.callee;
  if (in->op == XPJ_OP_VAR || in->op == XPJ_OP_ARRAY)
    return in->imm.name;
  uint64_t bits;
  memcpy(&bits, &in->imm, sizeof bits);
  return bits;
}

static void put_inst(xpj_buf *b, const xpj_inst *in) {
  xpj_buf_u8(b, in->op);
  xpj_buf_u8(b, in->aux);
  xpj_buf_u8(b, in->order);
  xpj_buf_u8(b, in->scope);
  xpj_buf_u32(b, in->type);
  xpj_buf_u32(b, in->nargs);
  xpj_buf_u32(b, in->args);
  for (int k = 0; k < 3; k++)
    xpj_buf_u32(b, in->blk[k]);
  xpj_buf_u64(b, imm_bits(in));
  xpj_buf_u32(b, in->ntargs);
  xpj_buf_u32(b, in->in_block);
  put_loc(b, in->loc);
}

static void put_func(xpj_buf *b, const xpj_func *f) {
  xpj_buf_str(b, f->name);
  xpj_buf_u8(b, (uint8_t)f->kind);
  xpj_buf_u8(b, (uint8_t)f->dims);
  for (int d = 0; d < 3; d++)
    xpj_buf_u64(b, f->reqd_local[d]);
  put_loc(b, f->loc);
  xpj_buf_u8(b, (uint8_t)f->ntparams);
  for (unsigned i = 0; i < f->ntparams; i++)
    xpj_buf_str(b, f->tparams[i]);
  xpj_buf_u8(b, (uint8_t)f->ncparams);
  for (unsigned i = 0; i < f->ncparams; i++) {
    xpj_buf_str(b, f->cparams[i]);
    xpj_buf_u8(b, f->cptype[i]);
    xpj_buf_u8(b, f->cppos[i]);
  }
  xpj_buf_u8(b, (uint8_t)f->nparams);
  for (unsigned i = 0; i < f->nparams; i++) {
    xpj_buf_str(b, f->params[i].name);
    xpj_buf_u32(b, f->params[i].type);
    xpj_buf_u32(b, f->params[i].val);
    put_loc(b, f->params[i].loc);
  }
  xpj_buf_u32(b, f->ret);
  /* instruction 0 and block 0 are the reserved "none" entries: all zero */
  xpj_buf_u32(b, f->ninsts);
  for (uint32_t v = 1; v < f->ninsts; v++)
    put_inst(b, &f->insts[v]);
  xpj_buf_u32(b, f->npool);
  for (uint32_t i = 0; i < f->npool; i++)
    xpj_buf_u32(b, f->pool[i]);
  xpj_buf_u32(b, f->nblocks);
  for (uint32_t k = 1; k < f->nblocks; k++) {
    const xpj_blockdata *bd = &f->blocks[k];
    xpj_buf_u32(b, bd->parent);
    xpj_buf_u32(b, bd->n);
    for (uint32_t i = 0; i < bd->n; i++)
      xpj_buf_u32(b, bd->ids[i]);
  }
}

xpj_status xpj_module_encode(const xpj_module *m, uint8_t **out, size_t *len) {
  if (!m || !out || !len)
    return XPJ_ERR_INVALID;
  *out = NULL;
  *len = 0;
  if (m->oom)
    return XPJ_ERR_NOMEM; /* it may hold half-built functions */
  xpj_buf b = {0};
  xpj_buf_put(&b, MAGIC, sizeof MAGIC);
  xpj_buf_u32(&b, XPJ_TRANSFER_VERSION);
  xpj_buf_u32(&b, m->ntypes);
  for (xpj_type t = 1; t < m->ntypes; t++)
    put_typeinfo(&b, xpj_typeinfo_of(m, t));
  xpj_buf_u32(&b, m->nstrings);
  xpj_buf_put(&b, m->strings, m->nstrings);
  xpj_buf_u32(&b, m->nfiles);
  for (uint32_t i = 1; i < m->nfiles; i++) {
    xpj_buf_str(&b, m->files[i].name);
    xpj_buf_u64(&b, m->files[i].len);
    xpj_buf_put(&b, m->files[i].text, m->files[i].len);
  }
  xpj_buf_u32(&b, m->nfuncs);
  for (uint32_t i = 0; i < m->nfuncs; i++)
    put_func(&b, m->funcs[i]);
  size_t n;
  char *data = xpj_buf_take(&b, &n);
  if (!data)
    return XPJ_ERR_NOMEM;
  *out = (uint8_t *)data;
  *len = n;
  return XPJ_OK;
}

/* ---- decoding: reading ---------------------------------------------- */

typedef struct dec {
  const uint8_t *p;
  size_t n, off;
  xpj_module *m;
  uint32_t ntypes;  /* as encoded: creating functions must not add one */
  uint32_t *depth;  /* per function: how deep its blocks nest */
  xpj_status st;    /* the first failure */
  char *err;
  size_t errsize;
} dec;

#define OK(d) ((d)->st == XPJ_OK)

/* Records the first failure (printf-style); returns false. The message is
 * made one line of printable ASCII: it quotes names from the input. */
static bool fail(dec *d, xpj_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool fail(dec *d, xpj_status st, const char *fmt, ...) {
  if (!OK(d))
    return false;
  d->st = st;
  if (!d->errsize)
    return false;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->err, d->errsize, fmt, ap);
  va_end(ap);
  for (char *s = d->err; *s; s++)
    if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
      *s = '?';
  return false;
}

static bool nomem(dec *d) {
  return fail(d, XPJ_ERR_NOMEM, "out of memory");
}

/* A builder call refused what it was given: its message says why. */
static bool builder_failed(dec *d, const char *what, uint32_t index) {
  if (d->m->oom)
    return nomem(d);
  return fail(d, XPJ_ERR_INVALID, "%s %u: %s", what, index,
              d->m->errmsg[0] ? d->m->errmsg : "refused by the builder");
}

static size_t left(const dec *d) { return d->n - d->off; }

/* Whether k more bytes are there (a failure if not). */
static bool need(dec *d, uint64_t k) {
  if (!OK(d))
    return false;
  if (k > left(d))
    return fail(d, XPJ_ERR_INVALID, "truncated: %llu bytes needed at offset "
                "%zu, %zu left", (unsigned long long)k, d->off, left(d));
  return true;
}

/* Whether count records of at least each bytes can be there; checked
 * before allocating for them. */
static bool fits(dec *d, uint64_t count, size_t each, const char *what) {
  if (!OK(d))
    return false;
  if (count > left(d) / each)
    return fail(d, XPJ_ERR_INVALID, "%llu %s cannot fit in the %zu bytes "
                "left at offset %zu", (unsigned long long)count, what,
                left(d), d->off);
  return true;
}

/* Little-endian reads; 0 once the input has run out (d->st says so). */
static uint64_t get_le(dec *d, unsigned bytes) {
  if (!need(d, bytes))
    return 0;
  uint64_t v = 0;
  for (unsigned i = 0; i < bytes; i++)
    v |= (uint64_t)d->p[d->off + i] << (8 * i);
  d->off += bytes;
  return v;
}
static uint8_t get_u8(dec *d) { return (uint8_t)get_le(d, 1); }
static uint32_t get_u32(dec *d) { return (uint32_t)get_le(d, 4); }
static uint64_t get_u64(dec *d) { return get_le(d, 8); }

static xpj_loc get_loc(dec *d) {
  xpj_loc l;
  l.file = get_u32(d);
  l.line = get_u32(d);
  l.col = get_u32(d);
  return l;
}

/* A name: u32 length and that many bytes, none of them NUL; a malloc'd C
 * string, or NULL on failure. */
static char *get_str(dec *d, const char *what) {
  uint32_t len = get_u32(d);
  if (!need(d, len))
    return NULL;
  const uint8_t *s = d->p + d->off;
  if (memchr(s, 0, len)) {
    fail(d, XPJ_ERR_INVALID, "%s at offset %zu contains a NUL byte", what,
         d->off);
    return NULL;
  }
  char *c = xpj_malloc((size_t)len + 1);
  if (!c) {
    nomem(d);
    return NULL;
  }
  memcpy(c, s, len);
  c[len] = 0;
  d->off += len;
  return c;
}

/* Source positions name a file of the module or none (0). */
static bool check_loc(dec *d, xpj_loc l, const char *what, uint32_t index) {
  if (l.file >= d->m->nfiles)
    return fail(d, XPJ_ERR_INVALID, "%s %u: source position in file %u, but "
                "the module has %u", what, index, l.file, d->m->nfiles - 1);
  return true;
}

/* ---- decoding: header, types, strings, files ------------------------ */

static bool decode_header(dec *d) {
  if (!need(d, sizeof MAGIC))
    return false;
  if (memcmp(d->p, MAGIC, sizeof MAGIC) != 0)
    return fail(d, XPJ_ERR_INVALID, "not a transfer-encoded module (bad "
                "magic)");
  d->off = sizeof MAGIC;
  uint32_t version = get_u32(d);
  if (OK(d) && version != XPJ_TRANSFER_VERSION)
    return fail(d, XPJ_ERR_INVALID, "transfer encoding version %u, this "
                "library reads %u", version, XPJ_TRANSFER_VERSION);
  return OK(d);
}

static bool same_typeinfo(const xpj_typeinfo *a, const xpj_typeinfo *b) {
  if (a->kind != b->kind || a->scalar != b->scalar || a->space != b->space ||
      a->is_const != b->is_const || a->rank != b->rank ||
      a->param != b->param || a->elem != b->elem)
    return false;
  for (int i = 0; i < XPJ_MAX_RANK; i++)
    if (a->dims[i] != b->dims[i])
      return false;
  return true;
}

/* An element type: a scalar other than void, or a type parameter. */
static bool is_elem(const xpj_module *m, xpj_type t) {
  int s = xpj_type_scalar_of(m, t);
  return (s != XPJ_SCALAR_COUNT && s != XPJ_VOID) || xpj_type_is_param(m, t);
}

/* Interns want through the constructor the builder uses for its kind
 * (which checks it as the builder does); 0 when none makes it. Read-only
 * types are views and pointers only, as the builder makes them. */
static xpj_type construct(xpj_module *m, const xpj_typeinfo *w) {
  switch (w->kind) {
  case XPJ_TK_SCALAR:
    return w->scalar < XPJ_SCALAR_COUNT
               ? xpj_type_scalar(m, (xpj_scalar)w->scalar)
               : 0;
  case XPJ_TK_PARAM:
    return w->param < XPJ_MAX_TPARAMS ? xpj_type_param(m, w->param) : 0;
  case XPJ_TK_VIEW:
    if (w->space == XPJ_SPACE_GLOBAL)
      return xpj_type_view(m, w->elem, w->rank, w->is_const);
    /* a local array parameter: interns the rank-1 global view first */
    return w->space == XPJ_SPACE_LOCAL ? xpj_type_local_view(m, w->elem) : 0;
  case XPJ_TK_STATIC:
    if (w->rank < 1 || w->rank > XPJ_MAX_RANK)
      return 0;
    return xpj_type_static(m, (xpj_space)w->space, w->elem,
                           (unsigned)w->rank, w->dims);
  case XPJ_TK_PTR:
    if (!is_elem(m, w->elem) || w->space > XPJ_SPACE_LOCAL)
      return 0;
    return xpj_type_ptr(m, (xpj_space)w->space, w->elem, w->is_const);
  default:
    return 0;
  }
}

/* Type t: re-created through interning, which must give back id t and
 * exactly the fields encoded (a duplicate, or a type whose parts come
 * later, gives another id). */
static bool decode_type(dec *d, xpj_type t) {
  xpj_typeinfo w;
  memset(&w, 0, sizeof w); /* padding too: interning compares bytes */
  w.kind = get_u8(d);
  w.scalar = get_u8(d);
  w.space = get_u8(d);
  w.is_const = get_u8(d);
  w.rank = (int8_t)get_u8(d);
  w.param = get_u32(d);
  w.elem = get_u32(d);
  if (w.kind == XPJ_TK_STATIC)
    for (int i = 0; i < w.rank && i < XPJ_MAX_RANK; i++)
      w.dims[i] = (int64_t)get_u64(d);
  if (!OK(d))
    return false;
  if (w.elem >= t)
    return fail(d, XPJ_ERR_INVALID, "type %u: element type %u is not "
                "defined before it", t, w.elem);
  d->m->errmsg[0] = 0;
  xpj_type got = construct(d->m, &w);
  if (!got && (d->m->oom || d->m->errmsg[0]))
    return builder_failed(d, "type", t);
  if (got != t || !same_typeinfo(xpj_typeinfo_of(d->m, got), &w))
    return fail(d, XPJ_ERR_INVALID, "type %u (kind %u) is not a type the "
                "module's interning makes at that id", t, w.kind);
  return true;
}

static bool decode_types(dec *d) {
  d->ntypes = get_u32(d);
  if (!OK(d))
    return false;
  if (d->ntypes < 1 || d->ntypes > XPJ_MAX_TYPES + 1)
    return fail(d, XPJ_ERR_INVALID, "%u types (1 to %u with the reserved "
                "type 0)", d->ntypes, XPJ_MAX_TYPES + 1);
  if (!fits(d, d->ntypes - 1, TYPE_BYTES, "types"))
    return false;
  for (xpj_type t = 1; t < d->ntypes; t++)
    if (!decode_type(d, t))
      return false;
  return true;
}

static bool decode_strings(dec *d) {
  xpj_module *m = d->m;
  uint32_t n = get_u32(d);
  if (!need(d, n))
    return false;
  if (!xpj_grow((void **)&m->strings, &m->capstrings, n, 1))
    return nomem(d);
  if (n)
    memcpy(m->strings, d->p + d->off, n);
  m->nstrings = n;
  d->off += n;
  /* names are appended with their NUL: then every offset into the pool
   * starts a terminated string, and checking a name is one comparison */
  if (n && m->strings[n - 1] != 0)
    return fail(d, XPJ_ERR_INVALID, "the string pool does not end with a "
                "NUL");
  return true;
}

/* File 0 is "none"; the others are names and texts (any bytes: a text
 * has a length, and the frontend rejects NULs in source itself). */
static bool decode_files(dec *d) {
  uint32_t n = get_u32(d);
  if (!OK(d))
    return false;
  if (n < 1)
    return fail(d, XPJ_ERR_INVALID, "no file table (it starts with the "
                "reserved file 0)");
  if (!fits(d, n - 1, FILE_BYTES, "files"))
    return false;
  for (uint32_t i = 1; i < n; i++) {
    char *name = get_str(d, "a file name");
    uint64_t len = get_u64(d);
    if (!need(d, len)) {
      xpj_free(name);
      return false;
    }
    uint32_t idx = xpj_module_add_file(d->m, name,
                                       (const char *)d->p + d->off,
                                       (size_t)len);
    xpj_free(name);
    if (idx != i)
      return nomem(d); /* its only failure */
    d->off += (size_t)len;
  }
  return true;
}

/* ---- decoding: functions -------------------------------------------- */

/* Const parameters through xpj_ir_add_cparam (type and position ranges);
 * positions must also be distinct and within the generic list, which the
 * printer and xpj_func_generic_at index by. */
static bool decode_cparams(dec *d, xpj_func *f) {
  uint8_t n = get_u8(d);
  if (!OK(d))
    return false;
  if (n > XPJ_MAX_CPARAMS)
    return fail(d, XPJ_ERR_INVALID, "function %u: %u const parameters (at "
                "most %d)", f->index, n, XPJ_MAX_CPARAMS);
  for (unsigned i = 0; i < n; i++) {
    char *name = get_str(d, "a const parameter name");
    uint8_t s = get_u8(d), pos = get_u8(d);
    bool ok = OK(d) && xpj_ir_add_cparam(f, name, (xpj_scalar)s, pos);
    xpj_free(name);
    if (!OK(d))
      return false;
    if (!ok)
      return builder_failed(d, "function", f->index);
  }
  for (unsigned i = 0; i < f->ncparams; i++) {
    bool dup = false;
    for (unsigned j = 0; j < i; j++)
      dup = dup || f->cppos[j] == f->cppos[i];
    if (dup || f->cppos[i] >= f->ntparams + f->ncparams)
      return fail(d, XPJ_ERR_INVALID, "function %u: const parameter %u at "
                  "position %u of %u generic parameters, or twice",
                  f->index, i, f->cppos[i], f->ntparams + f->ncparams);
  }
  return true;
}

/* Parameters, as xpj_func_add_param takes them: a scalar, a type
 * parameter or a view, and distinct names. Their values are checked with
 * the instructions. */
static bool decode_params(dec *d, xpj_func *f) {
  xpj_module *m = d->m;
  uint8_t n = get_u8(d);
  if (!OK(d))
    return false;
  if (n > XPJ_MAX_PARAMS)
    return fail(d, XPJ_ERR_INVALID, "function %u: %u parameters (at most "
                "%d)", f->index, n, XPJ_MAX_PARAMS);
  if (!fits(d, n, PARAM_BYTES, "parameters"))
    return false;
  for (unsigned i = 0; i < n; i++) {
    xpj_paraminfo *pi = &f->params[i];
    pi->name = get_str(d, "a parameter name");
    f->nparams = i + 1; /* owns the name now */
    pi->type = get_u32(d);
    pi->val = get_u32(d);
    pi->loc = get_loc(d);
    if (!OK(d) || !check_loc(d, pi->loc, "function", f->index))
      return false;
    if (pi->type == 0 || pi->type >= m->ntypes ||
        !(is_elem(m, pi->type) ||
          xpj_typeinfo_of(m, pi->type)->kind == XPJ_TK_VIEW))
      return fail(d, XPJ_ERR_INVALID, "function %u: parameter %u has type "
                  "%u, not a scalar or a global array", f->index, i,
                  pi->type);
    for (unsigned j = 0; j < i; j++)
      if (strcmp(f->params[j].name, pi->name) == 0)
        return fail(d, XPJ_ERR_INVALID, "function %u: duplicate parameter "
                    "'%.64s'", f->index, pi->name);
  }
  return true;
}

/* The return type and the required local size, through their setters. */
static bool decode_ret(dec *d, xpj_func *f, const uint64_t reqd[3]) {
  xpj_type ret = get_u32(d);
  if (!OK(d))
    return false;
  if (ret == 0 || ret >= d->m->ntypes)
    return fail(d, XPJ_ERR_INVALID, "function %u: return type %u out of "
                "range", f->index, ret);
  if (xpj_func_set_return(f, ret) != XPJ_OK)
    return builder_failed(d, "function", f->index);
  bool has = reqd[0] != 0;
  for (unsigned k = has ? f->dims : 0; k < 3; k++)
    if (reqd[k] != 0)
      return fail(d, XPJ_ERR_INVALID, "function %u: required local size "
                  "past its dimensions", f->index);
  if (has && xpj_func_set_reqd_local(f, f->dims, reqd) != XPJ_OK)
    return builder_failed(d, "function", f->index);
  return true;
}

/* Instruction v as encoded; false when its immediate does not fit the
 * 32-bit member its opcode reads (a callee, a name). */
static bool get_inst(dec *d, xpj_func *f, xpj_val v) {
  xpj_inst *in = &f->insts[v];
  in->op = get_u8(d);
  in->aux = get_u8(d);
  in->order = get_u8(d);
  in->scope = get_u8(d);
  in->type = get_u32(d);
  in->nargs = get_u32(d);
  in->args = get_u32(d);
  for (int k = 0; k < 3; k++)
    in->blk[k] = get_u32(d);
  uint64_t imm = get_u64(d);
  in->ntargs = get_u32(d);
  in->in_block = get_u32(d);
  in->loc = get_loc(d);
  bool narrow = in->op == XPJ_OP_CALL || in->op == XPJ_OP_VAR ||
                in->op == XPJ_OP_ARRAY;
  memset(&in->imm, 0, sizeof in->imm);
  if (!narrow)
    memcpy(&in->imm, &imm, sizeof imm);
  else if (in->op == XPJ_OP_CALL)
    in->imm.callee = (uint32_t)imm;
  else
    in->imm.name = (uint32_t)imm;
  if (OK(d) && narrow && imm > UINT32_MAX)
    return fail(d, XPJ_ERR_INVALID, "function %u, instruction %u: immediate "
                "out of range", f->index, v);
  return OK(d);
}

/* The instruction table, the operand pool and the blocks, as encoded
 * (xpj_func_create made instruction 0 and blocks 0 and 1). */
static bool decode_body(dec *d, xpj_func *f) {
  uint32_t ninsts = get_u32(d);
  if (!OK(d))
    return false;
  if (ninsts < 1)
    return fail(d, XPJ_ERR_INVALID, "function %u: no instruction table",
                f->index);
  if (!fits(d, ninsts - 1, INST_BYTES, "instructions"))
    return false;
  if (!xpj_grow((void **)&f->insts, &f->capinsts, ninsts, sizeof *f->insts))
    return nomem(d);
  f->ninsts = ninsts;
  for (uint32_t v = 1; v < ninsts; v++)
    if (!get_inst(d, f, v))
      return false;

  uint32_t npool = get_u32(d);
  if (!OK(d))
    return false;
  if (npool < 1)
    return fail(d, XPJ_ERR_INVALID, "function %u: no operand pool",
                f->index);
  if (!fits(d, npool, 4, "operands"))
    return false;
  if (!xpj_grow((void **)&f->pool, &f->cappool, npool, sizeof *f->pool))
    return nomem(d);
  f->npool = npool;
  for (uint32_t i = 0; i < npool; i++)
    f->pool[i] = get_u32(d);

  uint32_t nblocks = get_u32(d);
  if (!OK(d))
    return false;
  if (nblocks < 2)
    return fail(d, XPJ_ERR_INVALID, "function %u: no body block", f->index);
  if (!fits(d, nblocks - 1, BLOCK_BYTES, "blocks"))
    return false;
  if (!xpj_grow((void **)&f->blocks, &f->capblocks, nblocks,
                sizeof *f->blocks))
    return nomem(d);
  f->nblocks = nblocks; /* the new ones are zeroed: freeing them is safe */
  for (uint32_t b = 1; b < nblocks; b++) {
    xpj_blockdata *bd = &f->blocks[b];
    bd->parent = get_u32(d);
    uint32_t n = get_u32(d);
    if (!fits(d, n, 4, "block entries"))
      return false;
    if (!xpj_grow((void **)&bd->ids, &bd->cap, n, sizeof *bd->ids))
      return nomem(d);
    bd->n = n;
    for (uint32_t i = 0; i < n; i++)
      bd->ids[i] = get_u32(d);
  }
  return OK(d);
}

/* ---- structure of one function -------------------------------------- */

static bool fail_at(dec *d, const xpj_func *f, xpj_val v, const char *why) {
  return fail(d, XPJ_ERR_INVALID, "function %u ('%.64s'), instruction %u "
              "(%s): %s", f->index, f->name, v,
              f->insts[v].op < XPJ_OP_COUNT ? xpj_op_names[f->insts[v].op]
                                            : "?",
              why);
}

static unsigned child_blocks(uint8_t op) {
  return op == XPJ_OP_IF ? 2 : op == XPJ_OP_LOOP ? 3 : 0;
}

/* The most operands an opcode takes. Operand ranges may overlap, so
 * without this bound many instructions could each claim the whole pool
 * and make every pass over operands quadratic in the input. */
static uint32_t max_args(uint8_t op) {
  return op == XPJ_OP_CALL    ? XPJ_MAX_TPARAMS + XPJ_MAX_PARAMS
         : op == XPJ_OP_INDEX ? 1 + XPJ_MAX_RANK
                              : 3;
}

/* Every index an instruction holds is in range: opcode, type, operands
 * (type arguments of a call are type ids), blocks (owned by it), file. */
static bool check_inst_indices(dec *d, const xpj_func *f, xpj_val v) {
  const xpj_inst *in = &f->insts[v];
  if (in->op >= XPJ_OP_COUNT || in->op == XPJ_OP_NOP)
    return fail(d, XPJ_ERR_INVALID, "function %u, instruction %u: invalid "
                "opcode %u", f->index, v, in->op);
  if (in->type == 0 || in->type >= d->m->ntypes)
    return fail_at(d, f, v, "type out of range");
  if (in->nargs > max_args(in->op))
    return fail_at(d, f, v, "too many operands");
  if (in->args > f->npool || in->nargs > f->npool - in->args)
    return fail_at(d, f, v, "operands outside the pool");
  if (in->op == XPJ_OP_CALL ? in->ntargs > in->nargs : in->ntargs != 0)
    return fail_at(d, f, v, "type arguments out of range");
  if (in->in_block == 0 || in->in_block >= f->nblocks)
    return fail_at(d, f, v, "block out of range");
  if (!check_loc(d, in->loc, "function", f->index))
    return false;
  const uint32_t *a = xpj_inst_args(f, in);
  for (uint32_t k = 0; k < in->nargs; k++) {
    uint32_t limit = k < in->ntargs ? d->m->ntypes : f->ninsts;
    if (a[k] == 0 || a[k] >= limit)
      return fail_at(d, f, v, "operand out of range");
  }
  unsigned nb = child_blocks(in->op);
  for (unsigned k = 0; k < 3; k++) {
    uint32_t b = in->blk[k];
    if (k >= nb ? b != 0
                : b < 2 || b >= f->nblocks || f->blocks[b].parent != v ||
                      (k > 0 && b == in->blk[0]) || (k > 1 && b == in->blk[1]))
      return fail_at(d, f, v, "child blocks malformed");
  }
  return true;
}

/* Each instruction is in exactly one block, the one it names. */
static bool check_blocks(dec *d, const xpj_func *f) {
  if (f->pool[0] != 0 || f->blocks[1].parent != 0)
    return fail(d, XPJ_ERR_INVALID, "function %u: reserved entries are not "
                "empty", f->index);
  uint8_t *seen = xpj_calloc(f->ninsts, 1);
  if (!seen)
    return nomem(d);
  bool ok = true;
  for (uint32_t b = 1; b < f->nblocks && ok; b++) {
    const xpj_blockdata *bd = &f->blocks[b];
    if (b >= 2 && (bd->parent == 0 || bd->parent >= f->ninsts))
      ok = fail(d, XPJ_ERR_INVALID, "function %u: block %u has no owner",
                f->index, b);
    for (uint32_t i = 0; i < bd->n && ok; i++) {
      xpj_val v = bd->ids[i];
      if (v == 0 || v >= f->ninsts || seen[v]++ || f->insts[v].in_block != b)
        ok = fail(d, XPJ_ERR_INVALID, "function %u: block %u lists "
                  "instruction %u, which is out of range, listed twice or "
                  "in another block", f->index, b, v);
    }
  }
  for (xpj_val v = 1; v < f->ninsts && ok; v++)
    if (!seen[v])
      ok = fail(d, XPJ_ERR_INVALID, "function %u: instruction %u is in no "
                "block", f->index, v);
  xpj_free(seen);
  return ok;
}

/* The blocks form one tree under the body (so every instruction is
 * reached, and walks terminate); notes its depth. Break and continue sit
 * in a loop's body or step, not (through ifs) in its condition, as
 * xpj_b_break requires. Iterative: the depth is not bounded yet. */
static bool check_tree(dec *d, const xpj_func *f) {
  uint32_t *stack = xpj_malloc((size_t)f->nblocks * sizeof *stack);
  uint32_t *level = xpj_calloc(f->nblocks, sizeof *level);
  uint8_t *in_loop = xpj_calloc(f->nblocks, 1);
  if (!stack || !level || !in_loop) {
    xpj_free(stack);
    xpj_free(level);
    xpj_free(in_loop);
    return nomem(d);
  }
  uint32_t sp = 0, reached = 0, deepest = 0;
  bool ok = true;
  level[1] = 1;
  stack[sp++] = 1;
  while (sp && ok) {
    uint32_t b = stack[--sp];
    reached++;
    deepest = level[b] > deepest ? level[b] : deepest;
    const xpj_blockdata *bd = &f->blocks[b];
    for (uint32_t i = 0; i < bd->n && ok; i++) {
      const xpj_inst *in = &f->insts[bd->ids[i]];
      if ((in->op == XPJ_OP_BREAK || in->op == XPJ_OP_CONTINUE) &&
          !in_loop[b])
        ok = fail_at(d, f, bd->ids[i], "outside of a loop");
      for (unsigned k = 0; k < child_blocks(in->op) && ok; k++) {
        uint32_t c = in->blk[k];
        if (level[c]) {
          ok = fail_at(d, f, bd->ids[i], "a child block is reached twice");
          break;
        }
        level[c] = level[b] + 1;
        in_loop[c] = in->op == XPJ_OP_LOOP ? k != 0 : in_loop[b];
        stack[sp++] = c;
      }
    }
  }
  if (ok && reached != f->nblocks - 1)
    ok = fail(d, XPJ_ERR_INVALID, "function %u: %u of its %u blocks are "
              "not reached from the body", f->index,
              f->nblocks - 1 - reached, f->nblocks - 1);
  d->depth[f->index] = deepest;
  xpj_free(stack);
  xpj_free(level);
  xpj_free(in_loop);
  return ok;
}

/* Parameter i is the value of PARAM instruction params[i].val, whose aux is
 * i and whose type is the parameter's; there are no other PARAMs. (The
 * verifier checks that they open the body in order.) */
static bool check_params(dec *d, const xpj_func *f) {
  for (unsigned i = 0; i < f->nparams; i++) {
    xpj_val v = f->params[i].val;
    if (v == 0 || v >= f->ninsts || f->insts[v].op != XPJ_OP_PARAM ||
        f->insts[v].aux != i || f->insts[v].type != f->params[i].type)
      return fail(d, XPJ_ERR_INVALID, "function %u: parameter %u is not the "
                  "value of its PARAM instruction", f->index, i);
  }
  for (xpj_val v = 1; v < f->ninsts; v++) {
    const xpj_inst *in = &f->insts[v];
    if (in->op == XPJ_OP_PARAM &&
        (in->aux >= f->nparams || f->params[in->aux].val != v))
      return fail_at(d, f, v, "no parameter of the function");
  }
  return true;
}

static bool check_structure(dec *d, const xpj_func *f) {
  for (xpj_val v = 1; v < f->ninsts; v++)
    if (!check_inst_indices(d, f, v))
      return false;
  return check_blocks(d, f) && check_tree(d, f) && check_params(d, f);
}

/* One function: its header through xpj_func_create and the setters, then
 * its body as encoded, then its structure. */
static bool decode_func(dec *d, uint32_t index) {
  xpj_module *m = d->m;
  char *name = get_str(d, "a function name");
  uint8_t kind = get_u8(d), dims = get_u8(d);
  uint64_t reqd[3];
  for (int k = 0; k < 3; k++)
    reqd[k] = get_u64(d);
  xpj_loc loc = get_loc(d);
  uint8_t ntp = get_u8(d);
  char *tp[XPJ_MAX_TPARAMS] = {0};
  if (OK(d) && ntp > XPJ_MAX_TPARAMS)
    fail(d, XPJ_ERR_INVALID, "function %u: %u type parameters (at most %d)",
         index, ntp, XPJ_MAX_TPARAMS);
  for (unsigned k = 0; k < ntp && OK(d); k++)
    tp[k] = get_str(d, "a type parameter name");
  xpj_func *f = NULL;
  if (OK(d) && kind > XPJ_FUNC_NDRANGE)
    fail(d, XPJ_ERR_INVALID, "function %u: invalid kind %u", index, kind);
  if (OK(d) && check_loc(d, loc, "function", index)) {
    m->errmsg[0] = 0;
    f = xpj_func_create(m, name, (xpj_func_kind)kind, dims, ntp,
                        (const char *const *)tp, loc);
  }
  xpj_free(name);
  for (unsigned k = 0; k < XPJ_MAX_TPARAMS; k++)
    xpj_free(tp[k]);
  if (!OK(d))
    return false;
  if (!f)
    return builder_failed(d, "function", index);
  if (m->ntypes != d->ntypes)
    return fail(d, XPJ_ERR_INVALID, "function %u: the type table has no "
                "void type, which every function has", index);
  return decode_cparams(d, f) && decode_params(d, f) &&
         decode_ret(d, f, reqd) && decode_body(d, f) &&
         check_structure(d, f);
}

static bool decode_funcs(dec *d) {
  uint32_t n = get_u32(d);
  if (!OK(d))
    return false;
  if (n > XPJ_MAX_FUNCS)
    return fail(d, XPJ_ERR_INVALID, "%u functions (at most %d)", n,
                XPJ_MAX_FUNCS);
  if (!fits(d, n, FUNC_BYTES, "functions"))
    return false;
  d->depth = xpj_calloc(n, sizeof *d->depth);
  if (!d->depth)
    return nomem(d);
  for (uint32_t i = 0; i < n; i++)
    if (!decode_func(d, i))
      return false;
  if (d->off != d->n)
    return fail(d, XPJ_ERR_INVALID, "%zu bytes after the module", left(d));
  return true;
}

/* ---- the call graph -------------------------------------------------- */

/* Callees exist and are device functions; calls do not recurse (the
 * verifier's own check walks calls recursively, so it must not meet a
 * cycle); and no chain of calls, with the blocks nested in each function,
 * is deeper than XPJ_TRANSFER_MAX_DEPTH. Kahn's order (callers first),
 * then the deepest chain below each function, callees first. */
static bool check_calls(dec *d) {
  const xpj_module *m = d->m;
  uint32_t nf = m->nfuncs;
  uint32_t *indeg = xpj_calloc(nf, sizeof *indeg);
  uint32_t *order = xpj_calloc(nf, sizeof *order);
  uint64_t *chain = xpj_calloc(nf, sizeof *chain);
  bool ok = indeg && order && chain ? true : nomem(d);
  for (uint32_t i = 0; i < nf && ok; i++) {
    const xpj_func *f = m->funcs[i];
    for (xpj_val v = 1; v < f->ninsts && ok; v++) {
      const xpj_inst *in = &f->insts[v];
      if (in->op != XPJ_OP_CALL)
        continue;
      if (in->imm.callee >= nf)
        ok = fail_at(d, f, v, "callee out of range");
      else if (m->funcs[in->imm.callee]->kind != XPJ_FUNC_DEVICE)
        ok = fail_at(d, f, v, "calls a kernel");
      else
        indeg[in->imm.callee]++;
    }
  }
  uint32_t n = 0;
  for (uint32_t i = 0; i < nf && ok; i++)
    if (!indeg[i])
      order[n++] = i;
  for (uint32_t h = 0; h < n && ok; h++) {
    const xpj_func *f = m->funcs[order[h]];
    for (xpj_val v = 1; v < f->ninsts; v++)
      if (f->insts[v].op == XPJ_OP_CALL && --indeg[f->insts[v].imm.callee] == 0)
        order[n++] = f->insts[v].imm.callee;
  }
  if (ok && n < nf)
    ok = fail(d, XPJ_ERR_INVALID, "recursive calls among %u functions "
              "(recursion is not supported on devices)", nf - n);
  for (uint32_t h = n; h-- > 0 && ok;) {
    const xpj_func *f = m->funcs[order[h]];
    uint64_t below = 0;
    for (xpj_val v = 1; v < f->ninsts; v++)
      if (f->insts[v].op == XPJ_OP_CALL &&
          chain[f->insts[v].imm.callee] > below)
        below = chain[f->insts[v].imm.callee];
    chain[order[h]] = d->depth[order[h]] + 1 + below;
    if (chain[order[h]] > XPJ_TRANSFER_MAX_DEPTH)
      ok = fail(d, XPJ_ERR_INVALID, "function %u: its blocks and calls nest "
                "%llu deep (at most %u)", order[h],
                (unsigned long long)chain[order[h]], XPJ_TRANSFER_MAX_DEPTH);
  }
  xpj_free(indeg);
  xpj_free(order);
  xpj_free(chain);
  return ok;
}

/* ---- the builder's typing rules --------------------------------------- */
/* What ir/ir.c checks as it builds each instruction, restated for one that
 * already exists: code generation takes these for granted. Each returns
 * why the instruction breaks them, or NULL. */

static bool is_intlike(const xpj_module *m, xpj_type t) {
  int s = xpj_type_scalar_of(m, t);
  return (s >= XPJ_I8 && s <= XPJ_U64) || xpj_type_is_param(m, t);
}
static bool is_floatlike(const xpj_module *m, xpj_type t) {
  return xpj_scalar_is_float(xpj_type_scalar_of(m, t)) ||
         xpj_type_is_param(m, t);
}
static bool is_numeric(const xpj_module *m, xpj_type t) {
  return is_intlike(m, t) || is_floatlike(m, t);
}
static bool is_scalar(const xpj_module *m, xpj_type t, xpj_scalar s) {
  return xpj_type_scalar_of(m, t) == (int)s;
}
static int kind_of(const xpj_module *m, xpj_type t) {
  return xpj_typeinfo_of(m, t)->kind;
}
static bool atomic_int(const xpj_module *m, xpj_type t) {
  int s = xpj_type_scalar_of(m, t);
  return s == XPJ_I32 || s == XPJ_I64 || s == XPJ_U32 || s == XPJ_U64 ||
         xpj_type_is_param(m, t);
}
static bool atomic_float(const xpj_module *m, xpj_type t) {
  return xpj_scalar_is_float(xpj_type_scalar_of(m, t));
}

/* An integer constant of scalar s holds a value of s. */
static bool int_fits(int s, int64_t v) {
  if (s == XPJ_BOOL)
    return v == 0 || v == 1;
  unsigned bits = xpj_scalar_bits((xpj_scalar)s);
  if (bits >= 64)
    return true;
  if (s >= XPJ_I8 && s <= XPJ_I64)
    return v >= -(INT64_C(1) << (bits - 1)) && v < (INT64_C(1) << (bits - 1));
  return v >= 0 && v < (INT64_C(1) << bits);
}

enum { MC_F, MC_I, MC_N, MC_B };
static const uint8_t math_class[XPJ_MATH_COUNT] = {
#define X(id, name, arity, cls) MC_##cls,
    XPJ_MATH_LIST(X)
#undef X
};

/* The fields an opcode does not use are zero, as emit leaves them. */
static const char *unused_fields(const xpj_inst *in) {
  bool aux = false, order = false, imm = false;
  switch ((xpj_op)in->op) {
  case XPJ_OP_PARAM: case XPJ_OP_BINOP: case XPJ_OP_UNOP: case XPJ_OP_BARRIER:
  case XPJ_OP_MATH: case XPJ_OP_LIMIT: case XPJ_OP_CPARAM:
    aux = true;
    break;
  case XPJ_OP_CONST: case XPJ_OP_WI: case XPJ_OP_ARRAY:
    aux = imm = true;
    break;
  case XPJ_OP_ATOMIC: case XPJ_OP_GROUP:
    aux = order = true;
    break;
  case XPJ_OP_CMPXCHG: case XPJ_OP_ALOAD: case XPJ_OP_ASTORE:
    order = true;
    break;
  case XPJ_OP_LOOP: case XPJ_OP_CALL: case XPJ_OP_VAR:
    imm = true;
    break;
  default:
    break;
  }
  if (in->op == XPJ_OP_CONST && in->order == XPJ_CONST_CAST && !in->scope)
    order = true; /* (a literal a cast typed: check_const) */
  if ((!aux && in->aux) || (!order && (in->order || in->scope)) ||
      (!imm && imm_bits(in) != 0))
    return "a field its opcode does not use is set";
  return NULL;
}

static const char *check_binop(const xpj_module *m, const xpj_func *f,
                               const xpj_inst *in, const uint32_t *a) {
  if (in->nargs != 2 || in->aux >= XPJ_BINOP_COUNT)
    return "malformed binary operator";
  xpj_type t = f->insts[a[0]].type;
  if (!is_elem(m, t) || f->insts[a[1]].type != t ||
      is_scalar(m, t, XPJ_BF16))
    return "operands are not two scalars of one arithmetic type";
  bool ok;
  switch ((xpj_binop)in->aux) {
  case XPJ_REM: case XPJ_SHL: case XPJ_SHR:
    ok = is_intlike(m, t);
    break;
  case XPJ_AND: case XPJ_OR: case XPJ_XOR:
    ok = is_intlike(m, t) || is_scalar(m, t, XPJ_BOOL);
    break;
  case XPJ_EQ: case XPJ_NE:
    ok = true;
    break;
  default:
    ok = is_numeric(m, t);
  }
  if (!ok)
    return "the operator does not apply to the operands' type";
  bool cmp = in->aux >= XPJ_EQ;
  if (cmp ? !is_scalar(m, in->type, XPJ_BOOL) : in->type != t)
    return "result type is not the operator's";
  return NULL;
}

static const char *check_unop(const xpj_module *m, const xpj_func *f,
                              const xpj_inst *in, const uint32_t *a) {
  if (in->nargs != 1 || in->aux >= XPJ_UNOP_COUNT)
    return "malformed unary operator";
  xpj_type t = f->insts[a[0]].type;
  bool ok = !is_scalar(m, t, XPJ_BF16) &&
            (in->aux == XPJ_NEG   ? is_numeric(m, t)
             : in->aux == XPJ_NOT ? is_intlike(m, t)
                                  : is_scalar(m, t, XPJ_BOOL));
  if (!ok || in->type != t)
    return "the operator does not apply to the operand's type";
  return NULL;
}

static const char *check_math(const xpj_module *m, const xpj_func *f,
                              const xpj_inst *in, const uint32_t *a) {
  if (in->aux >= XPJ_MATH_COUNT || in->nargs != xpj_math_arity(in->aux))
    return "malformed math builtin";
  xpj_type t = f->insts[a[0]].type;
  for (uint32_t k = 1; k < in->nargs; k++)
    if (f->insts[a[k]].type != t)
      return "arguments differ in type";
  unsigned cls = math_class[in->aux];
  bool ok = !is_scalar(m, t, XPJ_BF16) &&
            (cls == MC_I   ? is_intlike(m, t)
             : cls == MC_N ? is_numeric(m, t)
                           : is_floatlike(m, t));
  if (!ok)
    return "the builtin does not apply to its arguments' type";
  if (cls == MC_B ? !is_scalar(m, in->type, XPJ_BOOL) : in->type != t)
    return "result type is not the builtin's";
  return NULL;
}

static const char *check_const(const xpj_module *m, const xpj_inst *in) {
  int s = xpj_type_scalar_of(m, in->type);
  bool param = xpj_type_is_param(m, in->type);
  if (in->nargs)
    return "a constant has no operands";
  if (in->order == XPJ_CONST_CAST && !param)
    return "a constant a cast typed is of a type parameter's type";
  if (in->aux == XPJ_CONST_ABOVE || in->aux == XPJ_CONST_BELOW)
    return param ? NULL
                 : "a literal's side of its double kept where no type "
                   "parameter is";
  if (in->aux == XPJ_CONST_FLOAT)
    return xpj_scalar_float_valued(s) || param
               ? NULL
               : "floating-point constant of a type that is not";
  if (in->aux != 0 ||
      !(param || s == XPJ_BOOL || (s >= XPJ_I8 && s <= XPJ_U64)))
    return "integer constant of a type that is not";
  return param || int_fits(s, in->imm.i) ? NULL
                                         : "constant out of its type's range";
}

/* A name given to a variable or an array: none (0), or an offset + 1 into
 * the string pool (which ends with a NUL, decode_strings). */
static bool name_ok(const xpj_module *m, uint32_t name) {
  return name == 0 || name - 1 < m->nstrings;
}

static const char *check_storage(const xpj_module *m, const xpj_func *f,
                                 const xpj_inst *in) {
  const xpj_typeinfo *ti = xpj_typeinfo_of(m, in->type);
  if (in->nargs || !name_ok(m, in->imm.name))
    return "malformed variable or array";
  if (in->op == XPJ_OP_VAR)
    return ti->kind == XPJ_TK_PTR && ti->space == XPJ_SPACE_PRIVATE &&
                   !ti->is_const && is_elem(m, ti->elem)
               ? NULL
               : "a variable's type is not a private pointer to a scalar";
  if (ti->kind != XPJ_TK_STATIC)
    return "an array's type is not a static array";
  int64_t total = 1;
  for (int k = 0; k < ti->rank; k++) {
    if (ti->dims[k] > (INT64_C(1) << 31) / total)
      return "array is too large";
    total *= ti->dims[k];
  }
  if (ti->space == XPJ_SPACE_PRIVATE && total > 65536)
    return "private array is too large";
  /* aux: which dimensions const parameters size (generic kernels) */
  if (in->aux >> ti->rank)
    return "sized-by-const mask past the array's rank";
  return NULL;
}

static const char *check_index(const xpj_module *m, const xpj_func *f,
                               const xpj_inst *in, const uint32_t *a) {
  if (in->nargs < 2 || in->nargs > 1 + XPJ_MAX_RANK)
    return "an index needs 1 to 8 subscripts";
  const xpj_typeinfo *at = xpj_typeinfo_of(m, f->insts[a[0]].type);
  if (at->kind != XPJ_TK_VIEW && at->kind != XPJ_TK_STATIC)
    return "indexes something that is not an array";
  unsigned nidx = in->nargs - 1;
  if (at->rank != XPJ_RANK_GENERIC && nidx != 1 && (int)nidx != at->rank)
    return "number of subscripts does not match the rank";
  for (unsigned k = 1; k <= nidx; k++)
    if (!is_intlike(m, f->insts[a[k]].type))
      return "a subscript is not an integer";
  const xpj_typeinfo *pt = xpj_typeinfo_of(m, in->type);
  if (pt->kind != XPJ_TK_PTR || pt->space != at->space ||
      pt->elem != at->elem || pt->is_const != at->is_const)
    return "result is not a pointer to the array's element";
  return NULL;
}

/* shape, stride, size and ndim: of views only (the builder folds them on
 * static arrays), dimension an i64 within the rank when constant. */
static const char *check_query(const xpj_module *m, const xpj_func *f,
                               const xpj_inst *in, const uint32_t *a) {
  bool dim = in->op == XPJ_OP_SHAPE || in->op == XPJ_OP_STRIDE;
  if (in->nargs != (dim ? 2u : 1u) || !is_scalar(m, in->type, XPJ_I64))
    return "malformed array query";
  const xpj_typeinfo *at = xpj_typeinfo_of(m, f->insts[a[0]].type);
  if (at->kind != XPJ_TK_VIEW)
    return "queries something that is not a view";
  if (in->op == XPJ_OP_NDIM && at->rank != XPJ_RANK_GENERIC)
    return "ndim of a view of fixed rank";
  if (!dim)
    return NULL;
  const xpj_inst *di = &f->insts[a[1]];
  if (!is_scalar(m, di->type, XPJ_I64))
    return "dimension is not an i64";
  int rank = at->rank == XPJ_RANK_GENERIC ? XPJ_MAX_RANK : at->rank;
  if (di->op == XPJ_OP_CONST && !di->aux &&
      (di->imm.i < 0 || di->imm.i >= rank))
    return "constant dimension out of the rank";
  return NULL;
}

static const char *check_memory(const xpj_module *m, const xpj_func *f,
                                const xpj_inst *in, const uint32_t *a) {
  const xpj_typeinfo *pt =
      in->nargs ? xpj_typeinfo_of(m, f->insts[a[0]].type) : NULL;
  if (in->op == XPJ_OP_LOAD)
    return in->nargs == 1 && pt->kind == XPJ_TK_PTR && pt->elem == in->type
               ? NULL
               : "load from something that is not a pointer to its type";
  return in->nargs == 2 && pt->kind == XPJ_TK_PTR && !pt->is_const &&
                 pt->elem == f->insts[a[1]].type &&
                 is_scalar(m, in->type, XPJ_VOID)
             ? NULL
             : "store to something that is not a writable pointer to the "
               "value's type";
}

static const char *check_atomic(const xpj_module *m, const xpj_func *f,
                                const xpj_inst *in, const uint32_t *a) {
  static const unsigned arity[] = {[XPJ_OP_ATOMIC] = 2, [XPJ_OP_CMPXCHG] = 3,
                                   [XPJ_OP_ALOAD] = 1, [XPJ_OP_ASTORE] = 2};
  if (in->nargs != arity[in->op] || in->order > XPJ_ORDER_SEQ_CST ||
      in->scope > XPJ_SCOPE_DEVICE)
    return "malformed atomic";
  const xpj_typeinfo *pt = xpj_typeinfo_of(m, f->insts[a[0]].type);
  if (pt->kind != XPJ_TK_PTR || pt->space == XPJ_SPACE_PRIVATE ||
      (pt->is_const && in->op != XPJ_OP_ALOAD))
    return "atomic on something that is not writable global or local memory";
  xpj_type et = pt->elem;
  bool float_ok = in->op != XPJ_OP_ATOMIC || in->aux == XPJ_ATOMIC_ADD ||
                  in->aux == XPJ_ATOMIC_SUB || in->aux == XPJ_ATOMIC_XCHG;
  if (!(atomic_int(m, et) || (float_ok && atomic_float(m, et))))
    return "atomic on an element type it does not support";
  for (uint32_t k = 1; k < in->nargs; k++)
    if (f->insts[a[k]].type != et)
      return "a value differs from the element type";
  switch ((xpj_op)in->op) {
  case XPJ_OP_ATOMIC:
    if (in->aux >= XPJ_ATOMIC_OP_COUNT)
      return "invalid atomic operation";
    break;
  case XPJ_OP_ALOAD:
    if (in->order == XPJ_ORDER_RELEASE || in->order == XPJ_ORDER_ACQ_REL)
      return "atomic load with a release order";
    break;
  case XPJ_OP_ASTORE:
    if (in->order == XPJ_ORDER_ACQUIRE || in->order == XPJ_ORDER_ACQ_REL)
      return "atomic store with an acquire order";
    return is_scalar(m, in->type, XPJ_VOID) ? NULL
                                            : "an atomic store has a value";
  default:
    break;
  }
  return in->type == et ? NULL : "result type is not the element type";
}

static const char *check_group(const xpj_module *m, const xpj_func *f,
                               const xpj_inst *in, const uint32_t *a) {
  if (in->aux >= XPJ_COLL_COUNT || in->scope > 1)
    return "malformed collective";
  xpj_coll_desc cd = {in->scope, (xpj_coll)in->aux, (xpj_group_op)in->order};
  bool combines = cd.kind < XPJ_COLL_BROADCAST;
  if ((combines ? in->order >= XPJ_GOP_NONE : in->order != XPJ_GOP_NONE) ||
      (!cd.sub_group && cd.kind > XPJ_COLL_BROADCAST) ||
      in->nargs != (xpj_coll_takes_id(&cd) ? 2u : 1u))
    return "malformed collective";
  xpj_type t = f->insts[a[0]].type;
  bool ok = !combines ? is_numeric(m, t) || is_scalar(m, t, XPJ_BOOL) ||
                            is_scalar(m, t, XPJ_BF16)
            : in->order >= XPJ_GOP_AND ? is_intlike(m, t) ||
                                             is_scalar(m, t, XPJ_BOOL)
                                       : is_numeric(m, t);
  if (!ok || in->type != t)
    return "the collective does not apply to its value's type";
  if (in->nargs == 2 && !is_intlike(m, f->insts[a[1]].type))
    return "the id of a collective is not an integer";
  return NULL;
}

static const char *check_wi(const xpj_module *m, const xpj_func *f,
                            const xpj_inst *in) {
  if (in->nargs || in->aux >= XPJ_WI_COUNT || !is_scalar(m, in->type, XPJ_I64))
    return "malformed work-item query";
  int64_t dim = in->imm.i;
  if (!xpj_wi_needs_dim((xpj_wi)in->aux))
    return dim == 0 ? NULL : "a dimension for a query without one";
  if (dim < 0 || dim > 2 || (f->dims && dim >= f->dims))
    return "dimension out of the kernel's range";
  return NULL;
}

/* t equals s with type parameter k replaced by targs[k] (xpj_type_subst,
 * compared field by field so that nothing is interned); a writable view is
 * taken for a read-only one where relax is set. */
static bool subst_equals(const xpj_module *m, xpj_type s, const uint32_t *targs,
                         unsigned ntargs, xpj_type t, bool relax) {
  const xpj_typeinfo *w = xpj_typeinfo_of(m, s), *g = xpj_typeinfo_of(m, t);
  switch (w->kind) {
  case XPJ_TK_PARAM:
    return w->param < ntargs && t == targs[w->param];
  case XPJ_TK_VIEW:
  case XPJ_TK_STATIC:
  case XPJ_TK_PTR:
    if (g->kind != w->kind || g->space != w->space || g->rank != w->rank ||
        memcmp(g->dims, w->dims, sizeof g->dims) != 0)
      return false;
    if (g->is_const != w->is_const &&
        !(relax && w->kind == XPJ_TK_VIEW && w->is_const))
      return false;
    return subst_equals(m, w->elem, targs, ntargs, g->elem, false);
  default:
    return s == t;
  }
}

static const char *check_call(const xpj_module *m, const xpj_func *f,
                              const xpj_inst *in, const uint32_t *a) {
  const xpj_func *callee = m->funcs[in->imm.callee];
  if (in->ntargs != callee->ntparams ||
      in->nargs - in->ntargs != callee->nparams)
    return "arguments do not match the callee's parameters";
  for (unsigned k = 0; k < in->ntargs; k++)
    if (!is_elem(m, a[k]))
      return "a type argument is not a scalar type";
  for (unsigned i = 0; i < callee->nparams; i++)
    if (!subst_equals(m, callee->params[i].type, a, in->ntargs,
                      f->insts[a[in->ntargs + i]].type, true))
      return "an argument's type does not match its parameter";
  if (!subst_equals(m, callee->ret, a, in->ntargs, in->type, false))
    return "result type is not the callee's return type";
  return NULL;
}

static const char *check_control(const xpj_module *m, const xpj_func *f,
                                 const xpj_inst *in, const uint32_t *a) {
  bool stmt = is_scalar(m, in->type, XPJ_VOID);
  switch ((xpj_op)in->op) {
  case XPJ_OP_IF: /* the verifier checks yields against its type */
    return in->nargs == 1 && is_scalar(m, f->insts[a[0]].type, XPJ_BOOL) &&
                   (stmt || is_elem(m, in->type))
               ? NULL
               : "an if needs a bool condition and a scalar or no value";
  case XPJ_OP_YIELD:
    return in->nargs == 1 && is_elem(m, f->insts[a[0]].type) && stmt
               ? NULL
               : "a yield gives one scalar value";
  case XPJ_OP_LOOP: /* the verifier checks where its condition is */
    return in->nargs == 0 && stmt && in->imm.i >= 0 &&
                   in->imm.i < (int64_t)f->ninsts
               ? NULL
               : "malformed loop";
  case XPJ_OP_RETURN: /* the verifier checks the value's type */
    return in->nargs <= 1 && stmt ? NULL : "malformed return";
  case XPJ_OP_BARRIER:
    return in->nargs == 0 && stmt && in->aux >= 1 &&
                   in->aux <= (XPJ_FENCE_LOCAL | XPJ_FENCE_GLOBAL)
               ? NULL
               : "malformed barrier";
  default: /* break, continue: where they are is checked with the tree */
    return in->nargs == 0 && stmt ? NULL : "malformed jump";
  }
}

static const char *type_error(const xpj_module *m, const xpj_func *f,
                              const xpj_inst *in) {
  const uint32_t *a = xpj_inst_args(f, in);
  const char *why = unused_fields(in);
  if (why)
    return why;
  for (uint32_t k = in->op == XPJ_OP_CALL ? in->ntargs : 0; k < in->nargs; k++)
    if (is_scalar(m, f->insts[a[k]].type, XPJ_VOID))
      return "an operand is a statement, not a value";
  switch ((xpj_op)in->op) {
  case XPJ_OP_PARAM: /* checked with the parameters */
  case XPJ_OP_CPARAM: /* checked by the verifier */
    return in->nargs ? "malformed parameter" : NULL;
  case XPJ_OP_CONST:
    return check_const(m, in);
  case XPJ_OP_BINOP:
    return check_binop(m, f, in, a);
  case XPJ_OP_UNOP:
    return check_unop(m, f, in, a);
  case XPJ_OP_CAST:
    return in->nargs == 1 && is_elem(m, f->insts[a[0]].type) &&
                   is_elem(m, in->type)
               ? NULL
               : "a cast is between scalar types";
  case XPJ_OP_MATH:
    return check_math(m, f, in, a);
  case XPJ_OP_VAR:
  case XPJ_OP_ARRAY:
    return check_storage(m, f, in);
  case XPJ_OP_INDEX:
    return check_index(m, f, in, a);
  case XPJ_OP_LOAD:
  case XPJ_OP_STORE:
    return check_memory(m, f, in, a);
  case XPJ_OP_SHAPE:
  case XPJ_OP_STRIDE:
  case XPJ_OP_SIZE:
  case XPJ_OP_NDIM:
    return check_query(m, f, in, a);
  case XPJ_OP_WI:
    return check_wi(m, f, in);
  case XPJ_OP_ATOMIC:
  case XPJ_OP_CMPXCHG:
  case XPJ_OP_ALOAD:
  case XPJ_OP_ASTORE:
    return check_atomic(m, f, in, a);
  case XPJ_OP_GROUP:
    return check_group(m, f, in, a);
  case XPJ_OP_LIMIT: /* only of a type parameter: the builder folds others */
    return in->nargs == 0 && in->aux < XPJ_LIMIT_COUNT &&
                   kind_of(m, in->type) == XPJ_TK_PARAM
               ? NULL
               : "malformed limit";
  case XPJ_OP_CALL:
    return check_call(m, f, in, a);
  default:
    return check_control(m, f, in, a);
  }
}

static bool check_typing(dec *d) {
  for (uint32_t i = 0; i < d->m->nfuncs; i++) {
    const xpj_func *f = d->m->funcs[i];
    for (xpj_val v = 1; v < f->ninsts; v++) {
      const char *why = type_error(d->m, f, &f->insts[v]);
      if (why)
        return fail_at(d, f, v, why);
    }
  }
  return true;
}

static bool check_verify(dec *d) {
  const char *msg = "";
  xpj_status st = xpj_module_verify(d->m, &msg);
  if (st == XPJ_OK)
    return true;
  /* the call-graph check reports running out of memory as one error
   * without a message */
  if (st == XPJ_ERR_NOMEM || !msg[0])
    return nomem(d);
  return fail(d, XPJ_ERR_INVALID, "verification failed: %s", msg);
}

xpj_status xpj_module_decode(const uint8_t *p, size_t n, xpj_module **out,
                             char *err, size_t errsize) {
  dec d = {.p = p, .n = n, .err = err, .errsize = err ? errsize : 0};
  if (d.errsize)
    err[0] = 0;
  if (out)
    *out = NULL;
  if (!out || (!p && n)) {
    fail(&d, XPJ_ERR_INVALID, "xpj_module_decode: no output or no input");
    return d.st;
  }
  if (!decode_header(&d))
    return d.st;
  if (xpj_module_create(&d.m) != XPJ_OK) {
    nomem(&d);
    return d.st;
  }
  bool ok = decode_types(&d) && decode_strings(&d) && decode_files(&d) &&
            decode_funcs(&d) && check_calls(&d) && check_typing(&d) &&
            check_verify(&d);
  xpj_free(d.depth);
  if (!ok) {
    xpj_module_destroy(d.m);
    return d.st;
  }
  *out = d.m;
  return XPJ_OK;
}
