/*
 * ir.c - modules, interned types, functions and the builder.
 *
 * The builder is where the typing rules of the IR live: every call checks
 * its operands and explains a mismatch in the module's error message. The
 * frontend reports those messages at the source position, and the verifier
 * and the specialiser re-run the same rules, so there is one definition of
 * what is well typed. A type parameter stands for "some scalar" and passes
 * every check that some scalar could pass; specialisation checks again with
 * the bound type.
 */
#include "ir_impl.h"

#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const char *const xpj_op_names[XPJ_OP_COUNT] = {
#define X(id, name) name,
    XPJ_OP_LIST(X)
#undef X
};

/* ---- names of enums ------------------------------------------------- */

static const char *const scalar_names[XPJ_SCALAR_COUNT] = {
    "void", "bool", "i8", "i16", "i32", "i64",
    "u8",   "u16",  "u32", "u64", "f32", "f64", "f16", "bf16"};

const char *xpj_scalar_name(xpj_scalar s) {
  return (unsigned)s < XPJ_SCALAR_COUNT ? scalar_names[s] : "?";
}

xpj_scalar xpj_scalar_parse(const char *name) {
  for (int i = XPJ_BOOL; name && i < XPJ_SCALAR_COUNT; i++)
    if (strcmp(name, scalar_names[i]) == 0)
      return (xpj_scalar)i;
  return XPJ_VOID;
}

unsigned xpj_scalar_bits(xpj_scalar s) {
  static const unsigned bits[XPJ_SCALAR_COUNT] = {
      0, 1, 8, 16, 32, 64, 8, 16, 32, 64, 32, 64, 16, 16};
  return (unsigned)s < XPJ_SCALAR_COUNT ? bits[s] : 0;
}

/* ---- 16-bit floats -------------------------------------------------- */

/* v rounded to f32 to nearest even, also when the application has set
 * another rounding mode (constants must not depend on it: they are cached) */
static double f32_nearest(double v) {
  int mode = fegetround();
  if (mode == FE_TONEAREST)
    return (double)(float)v;
  volatile double in = v; /* volatile: read, converted and stored */
  fesetround(FE_TONEAREST); /* between the mode changes */
  volatile float r = (float)in;
  fesetround(mode);
  return (double)r;
}

/* A binary format with p fraction bits and an exponent field of ebits. */
typedef struct half_fmt {
  int p, ebits;
} half_fmt;
static const half_fmt F16_FMT = {10, 5}, BF16_FMT = {7, 8};

/* x rounded to nearest even in format f, as its bit pattern, whatever the
 * caller's rounding mode (fesetround): the scaling by a power of two is
 * exact, and the rounding is done on the integer part and the remainder. */
static uint16_t half_from_double(half_fmt f, double x) {
  int bias = (1 << (f.ebits - 1)) - 1, emin = 1 - bias;
  unsigned emax_field = (1u << f.ebits) - 1;
  uint16_t sign = signbit(x) ? (uint16_t)(1u << 15) : 0;
  uint16_t inf = (uint16_t)(sign | (emax_field << f.p));
  if (isnan(x))
    return (uint16_t)(inf | (1u << (f.p - 1)));
  double a = fabs(x);
  if (isinf(a))
    return inf;
  int e;
  frexp(a, &e); /* a = m 2^e, m in [0.5, 1): its exponent is e - 1 */
  int E = a >= ldexp(1.0, emin) ? e - 1 : emin;
  double r = ldexp(a, f.p - E);       /* 0 .. 2^(p+1), exact */
  double n = (double)(uint32_t)r;      /* truncation: no rounding mode */
  double rem = r - n;                  /* exact */
  if (rem > 0.5 || (rem == 0.5 && fmod(n, 2.0) != 0.0))
    n += 1.0;
  if (n >= ldexp(1.0, f.p + 1)) {      /* rounded up to the next binade */
    n = ldexp(1.0, f.p);
    E++;
  }
  if (n < ldexp(1.0, f.p)) /* subnormal (or zero): the exponent field is 0 */
    return (uint16_t)(sign | (uint16_t)n);
  if (E + bias >= (int)emax_field)
    return inf;
  return (uint16_t)(sign | ((unsigned)(E + bias) << f.p) |
                    ((unsigned)n - (1u << f.p)));
}

static double half_to_double(half_fmt f, uint16_t h) {
  int bias = (1 << (f.ebits - 1)) - 1;
  unsigned ef = (h >> f.p) & ((1u << f.ebits) - 1), m = h & ((1u << f.p) - 1);
  double v = ef == (1u << f.ebits) - 1 ? (m ? NAN : HUGE_VAL)
             : ef == 0 ? ldexp(m, 1 - bias - f.p)
                       : ldexp(m + (1u << f.p), (int)ef - bias - f.p);
  return (h >> 15) ? -v : v;
}

uint16_t xpj_f16_from_double(double x) { return half_from_double(F16_FMT, x); }
double xpj_f16_to_double(uint16_t h) { return half_to_double(F16_FMT, h); }
uint16_t xpj_bf16_from_double(double x) {
  return half_from_double(BF16_FMT, x);
}
double xpj_bf16_to_double(uint16_t h) { return half_to_double(BF16_FMT, h); }

double xpj_float_round(int s, double v) {
  if (s == XPJ_F32)
    return f32_nearest(v);
  if (s == XPJ_F16)
    return xpj_f16_to_double(xpj_f16_from_double(v));
  if (s == XPJ_BF16)
    return xpj_bf16_to_double(xpj_bf16_from_double(v));
  return v;
}

/* The values of float scalar s (f32, f16, bf16) next to a > 0, which is
 * none of them: *lo < a < *hi. Past the largest finite value, *hi is the
 * value one step beyond it, where rounding goes to infinity. */
static void float_neighbours(int s, double a, double *lo, double *hi) {
  double r = xpj_float_round(s, a);
  if (s == XPJ_F32) {
    float fr = (float)r; /* exact */
    if (isinf(fr)) {
      *lo = FLT_MAX;
      *hi = ldexp(1.0, FLT_MAX_EXP);
    } else if (r > a) {
      *hi = r;
      *lo = nextafterf(fr, 0.0f);
    } else {
      *lo = r;
      *hi = fr == FLT_MAX ? ldexp(1.0, FLT_MAX_EXP)
                          : nextafterf(fr, INFINITY);
    }
    return;
  }
  half_fmt f = s == XPJ_F16 ? F16_FMT : BF16_FMT;
  uint16_t h = half_from_double(f, r); /* r >= 0: no sign bit */
  uint16_t inf = (uint16_t)(((1u << f.ebits) - 1) << f.p);
  /* the step past the largest: as far from it as it is from the one before */
  double max = half_to_double(f, (uint16_t)(inf - 1)),
         past = max + (max - half_to_double(f, (uint16_t)(inf - 2)));
  if (h == inf) {
    *lo = max;
    *hi = past;
  } else if (r > a) {
    *hi = r;
    *lo = half_to_double(f, (uint16_t)(h - 1));
  } else {
    *lo = r;
    *hi = h + 1 == inf ? past : half_to_double(f, (uint16_t)(h + 1));
  }
}

double xpj_float_round_dir(int s, double v, int dir) {
  double r = xpj_float_round(s, v);
  if (!dir || r == v || !isfinite(v) ||
      (s != XPJ_F32 && s != XPJ_F16 && s != XPJ_BF16))
    return r; /* v itself, or of s's values, or f64 */
  double a = fabs(v), lo, hi;
  float_neighbours(s, a, &lo, &hi);
  if (a - lo != hi - a) /* exact: a, lo and hi are within a binade or two */
    return r;           /* not halfway: the decimal is on v's side */
  bool up = (v < 0) == (dir < 0); /* the decimal's magnitude is above a */
  /* (hi past the largest finite value rounds to infinity) */
  return copysign(up ? xpj_float_round(s, hi) : lo, v);
}

/* |v| (v's bits read as u64 when is_u64) rounded to nearest even to p
 * significant bits in integer arithmetic, whatever the rounding mode:
 * the result is exact in a double. */
static double int_to_bits(int64_t v, bool is_u64, unsigned p) {
  bool neg = !is_u64 && v < 0;
  uint64_t mag = neg ? 0 - (uint64_t)v : (uint64_t)v;
  if (mag == 0)
    return 0.0;
  unsigned width = 64u - (unsigned)__builtin_clzll(mag), drop = 0;
  if (width > p) {
    drop = width - p;
    uint64_t rest = mag & ((UINT64_C(1) << drop) - 1);
    uint64_t half = UINT64_C(1) << (drop - 1);
    mag >>= drop;
    if (rest > half || (rest == half && (mag & 1)))
      mag++; /* at most 2^p: still exact */
  }
  double r = ldexp((double)mag, (int)drop);
  return neg ? -r : r;
}

double xpj_float_of_int(int s, int64_t v, bool is_u64) {
  switch (s) {
  case XPJ_F32:
    return int_to_bits(v, is_u64, 24); /* below f32's largest: 2^64 */
  case XPJ_F16:
    /* beyond 2^53 it is far beyond f16's range: infinity either way */
    return xpj_float_round(s, int_to_bits(v, is_u64, 53));
  case XPJ_BF16: /* through f64, as the code generators do (4.3) */
    return xpj_float_round(s, int_to_bits(v, is_u64, 53));
  default:
    return int_to_bits(v, is_u64, 53);
  }
}

const char *xpj_status_name(xpj_status s) {
  switch (s) {
  case XPJ_OK: return "ok";
  case XPJ_ERR_INVALID: return "invalid argument";
  case XPJ_ERR_NOMEM: return "out of memory";
  case XPJ_ERR_NOT_FOUND: return "not found";
  case XPJ_ERR_SYNTAX: return "source has errors";
  case XPJ_ERR_SPECIALIZE: return "specialisation does not fit";
  case XPJ_ERR_IO: return "i/o error";
  case XPJ_ERR_VERIFY: return "IR verification failed";
  case XPJ_ERR_COMPILE: return "code generation failed";
  case XPJ_ERR_UNSUPPORTED: return "not supported by the target";
  case XPJ_ERR_DEVICE: return "device error";
  case XPJ_ERR_CANCELLED: return "cancelled";
  case XPJ_ERR_BOUNDS: return "index out of bounds";
  }
  return "unknown status";
}

static const struct {
  const char *name;
  unsigned has_dim, needs_group;
} wi_table[XPJ_WI_COUNT] = {
#define X(id, name, has_dim, needs_group) {name, has_dim, needs_group},
    XPJ_WI_LIST(X)
#undef X
};

const char *xpj_wi_name(xpj_wi w) {
  return (unsigned)w < XPJ_WI_COUNT ? wi_table[w].name : "?";
}
int xpj_wi_needs_dim(xpj_wi w) {
  return (unsigned)w < XPJ_WI_COUNT && wi_table[w].has_dim;
}
int xpj_wi_needs_ndrange(xpj_wi w) {
  return (unsigned)w < XPJ_WI_COUNT && wi_table[w].needs_group;
}

enum { CLS_F, CLS_I, CLS_N, CLS_B };
static const struct {
  const char *name;
  unsigned arity, cls;
} math_table[XPJ_MATH_COUNT] = {
#define X(id, name, arity, cls) {name, arity, CLS_##cls},
    XPJ_MATH_LIST(X)
#undef X
};

const char *xpj_math_name(xpj_math m) {
  return (unsigned)m < XPJ_MATH_COUNT ? math_table[m].name : "?";
}
unsigned xpj_math_arity(xpj_math m) {
  return (unsigned)m < XPJ_MATH_COUNT ? math_table[m].arity : 0;
}
xpj_math xpj_math_lookup(const char *name) {
  for (int i = 0; name && i < XPJ_MATH_COUNT; i++)
    if (strcmp(name, math_table[i].name) == 0)
      return (xpj_math)i;
  return XPJ_MATH_COUNT;
}

static const struct {
  const char *name;
  bool float_only;
} limit_table[XPJ_LIMIT_COUNT] = {
#define X(id, name, float_only) {name, float_only},
    XPJ_LIMIT_LIST(X)
#undef X
};

const char *xpj_limit_name(xpj_limit l) {
  return (unsigned)l < XPJ_LIMIT_COUNT ? limit_table[l].name : "?";
}
xpj_limit xpj_limit_lookup(const char *name) {
  for (int i = 0; name && i < XPJ_LIMIT_COUNT; i++)
    if (strcmp(name, limit_table[i].name) == 0)
      return (xpj_limit)i;
  return XPJ_LIMIT_COUNT;
}

static const char *const coll_kind_names[XPJ_COLL_COUNT] = {
    "reduce_", "scan_inclusive_", "scan_exclusive_", "broadcast", "shuffle",
    "shuffle_xor"};
static const char *const gop_names[XPJ_GOP_NONE] = {"add", "mul", "min",
                                                    "max", "and", "or",
                                                    "xor"};

int xpj_coll_lookup(const char *name, xpj_coll_desc *out) {
  if (!name || !out)
    return 0;
  xpj_coll_desc d = {0, XPJ_COLL_REDUCE, XPJ_GOP_NONE};
  if (strncmp(name, "sub_group_", 10) == 0) {
    d.sub_group = 1;
    name += 10;
  } else if (strncmp(name, "group_", 6) == 0) {
    name += 6;
  } else {
    return 0;
  }
  for (int k = 0; k < XPJ_COLL_COUNT; k++) {
    const char *kn = coll_kind_names[k];
    size_t n = strlen(kn);
    if (k >= XPJ_COLL_BROADCAST) { /* whole names */
      if (strcmp(name, kn) != 0)
        continue;
      if (k != XPJ_COLL_BROADCAST && !d.sub_group)
        return 0; /* shuffles are sub-group operations */
      d.kind = (xpj_coll)k;
      *out = d;
      return 1;
    }
    if (strncmp(name, kn, n) != 0)
      continue;
    for (int o = 0; o < XPJ_GOP_NONE; o++)
      if (strcmp(name + n, gop_names[o]) == 0) {
        d.kind = (xpj_coll)k;
        d.op = (xpj_group_op)o;
        *out = d;
        return 1;
      }
  }
  return 0;
}

size_t xpj_coll_name(const xpj_coll_desc *d, char *buf, size_t size) {
  if (!buf) /* (as snprintf(NULL, 0): the length only) */
    size = 0;
  if (!d || (unsigned)d->kind >= XPJ_COLL_COUNT)
    return (size_t)snprintf(buf, size, "?");
  bool combines = d->kind < XPJ_COLL_BROADCAST;
  return (size_t)snprintf(buf, size, "%sgroup_%s%s",
                          d->sub_group ? "sub_" : "",
                          coll_kind_names[d->kind],
                          combines && (unsigned)d->op < XPJ_GOP_NONE
                              ? gop_names[d->op]
                              : "");
}

int xpj_coll_takes_id(const xpj_coll_desc *d) {
  return d && d->kind >= XPJ_COLL_BROADCAST && d->kind < XPJ_COLL_COUNT;
}

const char *xpj_atomic_op_name(xpj_atomic_op op) {
  static const char *const n[] = {"add", "sub", "min", "max",
                                  "and", "or",  "xor", "xchg"};
  return (unsigned)op < XPJ_ATOMIC_OP_COUNT ? n[op] : "?";
}
const char *xpj_order_name(xpj_order o) {
  static const char *const n[] = {"relaxed", "acquire", "release", "acq_rel",
                                  "seq_cst"};
  return (unsigned)o <= XPJ_ORDER_SEQ_CST ? n[o] : "?";
}
const char *xpj_scope_name(xpj_scope s) {
  return s == XPJ_SCOPE_WORK_GROUP ? "work_group"
         : s == XPJ_SCOPE_DEVICE   ? "device"
                                   : "?";
}
const char *xpj_binop_symbol(xpj_binop op) {
  static const char *const n[] = {"+",  "-",  "*", "/",  "%", "&",
                                  "|",  "^",  "<<", ">>", "==", "!=",
                                  "<",  "<=", ">", ">="};
  return (unsigned)op < XPJ_BINOP_COUNT ? n[op] : "?";
}

/* ---- modules -------------------------------------------------------- */

void xpj_set_error(xpj_module *m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->errmsg, sizeof m->errmsg, fmt, ap);
  va_end(ap);
}

static void oom(xpj_module *m) {
  m->oom = true;
  xpj_set_error(m, "out of memory");
}

xpj_status xpj_module_create(xpj_module **out) {
  if (!out)
    return XPJ_ERR_INVALID;
  *out = NULL;
  xpj_module *m = xpj_calloc(1, sizeof *m);
  if (!m)
    return XPJ_ERR_NOMEM;
  /* type 0 is "none"; keep it so ids start at 1 */
  if (!xpj_grow((void **)&m->files, &m->capfiles, 1, sizeof *m->files)) {
    xpj_module_destroy(m);
    return XPJ_ERR_NOMEM;
  }
  m->ntypes = 1;
  m->nfiles = 1;
  *out = m;
  return XPJ_OK;
}

static void func_free(xpj_func *f) {
  if (!f)
    return;
  xpj_free(f->name);
  for (unsigned i = 0; i < f->ntparams; i++)
    xpj_free(f->tparams[i]);
  for (unsigned i = 0; i < f->ncparams; i++)
    xpj_free(f->cparams[i]);
  for (unsigned i = 0; i < f->nparams; i++)
    xpj_free(f->params[i].name);
  for (uint32_t i = 0; i < f->nblocks; i++)
    xpj_free(f->blocks[i].ids);
  xpj_free(f->blocks);
  xpj_free(f->insts);
  xpj_free(f->pool);
  xpj_free(f);
}

void xpj_module_destroy(xpj_module *m) {
  if (!m)
    return;
  for (uint32_t i = 0; i < m->nfuncs; i++)
    func_free(m->funcs[i]);
  xpj_free(m->funcs);
  for (size_t i = 0; i < sizeof m->type_chunks / sizeof *m->type_chunks; i++)
    xpj_free(m->type_chunks[i]);
  xpj_free(m->strings);
  for (uint32_t i = 1; i < m->nfiles; i++) {
    xpj_free(m->files[i].name);
    xpj_free(m->files[i].text);
  }
  xpj_free(m->files);
  xpj_free(m->scratch);
  xpj_free(m);
}

xpj_status xpj_module_status(const xpj_module *m) {
  return !m ? XPJ_ERR_INVALID : m->oom ? XPJ_ERR_NOMEM : XPJ_OK;
}

const char *xpj_module_errmsg(const xpj_module *m) {
  return m ? m->errmsg : "no module";
}

uint32_t xpj_module_add_file(xpj_module *m, const char *name, const char *text,
                             size_t len) {
  if (!m || !name || (!text && len))
    return 0;
  if (!xpj_grow((void **)&m->files, &m->capfiles, m->nfiles + 1,
                sizeof *m->files)) {
    oom(m);
    return 0;
  }
  xpj_file *fl = &m->files[m->nfiles];
  fl->name = xpj_strdup(name);
  fl->text = xpj_malloc(len + 1);
  if (!fl->name || !fl->text) {
    xpj_free(fl->name);
    xpj_free(fl->text);
    memset(fl, 0, sizeof *fl);
    oom(m);
    return 0;
  }
  if (len)
    memcpy(fl->text, text, len);
  fl->text[len] = 0;
  fl->len = len;
  return m->nfiles++;
}

const char *xpj_module_file_name(const xpj_module *m, uint32_t i) {
  return m && i > 0 && i < m->nfiles ? m->files[i].name : NULL;
}

const char *xpj_module_file_text(const xpj_module *m, uint32_t i, size_t *len) {
  if (!m || i == 0 || i >= m->nfiles)
    return NULL;
  if (len)
    *len = m->files[i].len;
  return m->files[i].text;
}

unsigned xpj_module_func_count(const xpj_module *m) { return m ? m->nfuncs : 0; }

xpj_func *xpj_module_func(const xpj_module *m, unsigned i) {
  return m && i < m->nfuncs ? m->funcs[i] : NULL;
}

xpj_func *xpj_module_find(const xpj_module *m, const char *name) {
  if (!m || !name)
    return NULL;
  for (uint32_t i = 0; i < m->nfuncs; i++)
    if (strcmp(m->funcs[i]->name, name) == 0)
      return m->funcs[i];
  return NULL;
}

/* ---- types ---------------------------------------------------------- */

const xpj_typeinfo *xpj_typeinfo_of(const xpj_module *m, xpj_type t) {
  static const xpj_typeinfo none;
  return t > 0 && t < m->ntypes
             ? &m->type_chunks[t / XPJ_TYPE_CHUNK][t % XPJ_TYPE_CHUNK]
             : &none;
}

static unsigned typeinfo_hash(const xpj_typeinfo *ti) {
  uint64_t h = 0, w;
  const unsigned char *p = (const unsigned char *)ti;
  for (size_t i = 0; i + sizeof w <= sizeof *ti; i += sizeof w) {
    memcpy(&w, p + i, sizeof w);
    h = (h ^ w) * 0x9e3779b97f4a7c15u;
  }
  return (unsigned)(h >> 58); /* 0..63 */
}

static xpj_type intern(xpj_module *m, const xpj_typeinfo *ti) {
  if (m->oom)
    return 0;
  unsigned h = typeinfo_hash(ti);
  uint32_t hit = m->type_cache[h];
  if (hit && hit < m->ntypes &&
      memcmp(xpj_typeinfo_of(m, hit), ti, sizeof *ti) == 0)
    return hit;
  for (uint32_t i = 1; i < m->ntypes; i++)
    if (memcmp(xpj_typeinfo_of(m, i), ti, sizeof *ti) == 0) {
      m->type_cache[h] = i;
      return i;
    }
  if (m->ntypes > XPJ_MAX_TYPES) {
    xpj_set_error(m, "too many distinct types in one module (at most %d)",
                  XPJ_MAX_TYPES);
    return 0;
  }
  uint32_t t = m->ntypes, c = t / XPJ_TYPE_CHUNK;
  if (!m->type_chunks[c]) {
    m->type_chunks[c] = xpj_calloc(XPJ_TYPE_CHUNK, sizeof(xpj_typeinfo));
    if (!m->type_chunks[c]) {
      oom(m);
      return 0;
    }
  }
  m->type_chunks[c][t % XPJ_TYPE_CHUNK] = *ti;
  m->ntypes++;
  m->type_cache[h] = t;
  return t;
}

xpj_type xpj_type_scalar(xpj_module *m, xpj_scalar s) {
  if (!m || (unsigned)s >= XPJ_SCALAR_COUNT)
    return 0;
  xpj_typeinfo ti = {0};
  ti.kind = XPJ_TK_SCALAR;
  ti.scalar = (uint8_t)s;
  return intern(m, &ti);
}

xpj_type xpj_type_void(xpj_module *m) { return xpj_type_scalar(m, XPJ_VOID); }

xpj_type xpj_type_param(xpj_module *m, unsigned index) {
  if (!m || index >= XPJ_MAX_TPARAMS)
    return 0;
  xpj_typeinfo ti = {0};
  ti.kind = XPJ_TK_PARAM;
  ti.param = index;
  return intern(m, &ti);
}

static bool is_elem_type(const xpj_module *m, xpj_type t) {
  const xpj_typeinfo *ti = xpj_typeinfo_of(m, t);
  return (ti->kind == XPJ_TK_SCALAR && ti->scalar != XPJ_VOID && t != 0) ||
         (ti->kind == XPJ_TK_PARAM && t != 0);
}

xpj_type xpj_type_view(xpj_module *m, xpj_type elem, int rank, int is_const) {
  if (!m)
    return 0;
  if (!is_elem_type(m, elem) ||
      !(rank == XPJ_RANK_GENERIC || (rank >= 1 && rank <= XPJ_MAX_RANK))) {
    xpj_set_error(m, "invalid array view type");
    return 0;
  }
  xpj_typeinfo ti = {0};
  ti.kind = XPJ_TK_VIEW;
  ti.space = XPJ_SPACE_GLOBAL;
  ti.elem = elem;
  ti.rank = (int8_t)rank;
  ti.is_const = is_const != 0;
  return intern(m, &ti);
}

xpj_type xpj_type_local_view(xpj_module *m, xpj_type elem) {
  xpj_type t = xpj_type_view(m, elem, 1, 0);
  if (!t)
    return 0;
  xpj_typeinfo ti = *xpj_typeinfo_of(m, t);
  ti.space = XPJ_SPACE_LOCAL;
  return intern(m, &ti);
}

xpj_type xpj_type_static(xpj_module *m, xpj_space space, xpj_type elem,
                         unsigned rank, const int64_t *dims) {
  if (!m)
    return 0;
  if (!is_elem_type(m, elem) || rank < 1 || rank > XPJ_MAX_RANK || !dims ||
      (space != XPJ_SPACE_LOCAL && space != XPJ_SPACE_PRIVATE)) {
    xpj_set_error(m, "invalid static array type");
    return 0;
  }
  xpj_typeinfo ti = {0};
  ti.kind = XPJ_TK_STATIC;
  ti.space = (uint8_t)space;
  ti.elem = elem;
  ti.rank = (int8_t)rank;
  for (unsigned i = 0; i < rank; i++) {
    if (dims[i] <= 0 || dims[i] > (INT64_C(1) << 31)) {
      xpj_set_error(m, "array dimension %lld is out of range (1 to 2^31)",
                    (long long)dims[i]);
      return 0;
    }
    ti.dims[i] = dims[i];
  }
  return intern(m, &ti);
}

xpj_type xpj_type_ptr(xpj_module *m, xpj_space space, xpj_type elem,
                      int is_const) {
  xpj_typeinfo ti = {0};
  ti.kind = XPJ_TK_PTR;
  ti.space = (uint8_t)space;
  ti.elem = elem;
  ti.is_const = is_const != 0;
  return intern(m, &ti);
}

int xpj_type_scalar_of(const xpj_module *m, xpj_type t) {
  const xpj_typeinfo *ti = xpj_typeinfo_of(m, t);
  return t && ti->kind == XPJ_TK_SCALAR ? ti->scalar : XPJ_SCALAR_COUNT;
}

bool xpj_type_is_param(const xpj_module *m, xpj_type t) {
  return t && xpj_typeinfo_of(m, t)->kind == XPJ_TK_PARAM;
}

xpj_type xpj_type_subst(xpj_module *m, xpj_type t, unsigned ntargs,
                        const xpj_type *targs) {
  xpj_typeinfo ti = *xpj_typeinfo_of(m, t);
  switch (ti.kind) {
  case XPJ_TK_PARAM:
    return ti.param < ntargs ? targs[ti.param] : 0;
  case XPJ_TK_VIEW:
  case XPJ_TK_STATIC:
  case XPJ_TK_PTR:
    ti.elem = xpj_type_subst(m, ti.elem, ntargs, targs);
    return ti.elem ? intern(m, &ti) : 0;
  default:
    return t;
  }
}

xpj_type xpj_type_with_const(xpj_module *m, xpj_type t) {
  xpj_typeinfo ti = *xpj_typeinfo_of(m, t);
  ti.is_const = 1;
  return intern(m, &ti);
}

static size_t type_str(const xpj_module *m, xpj_type t, char *buf,
                       size_t size, const xpj_func *f) {
  const xpj_typeinfo *ti = xpj_typeinfo_of(m, t);
  char elem[64];
  if (t == 0)
    return (size_t)snprintf(buf, size, "<error>");
  switch (ti->kind) {
  case XPJ_TK_SCALAR:
    return (size_t)snprintf(buf, size, "%s", xpj_scalar_name(ti->scalar));
  case XPJ_TK_PARAM:
    if (f && ti->param < f->ntparams)
      return (size_t)snprintf(buf, size, "%s", f->tparams[ti->param]);
    return (size_t)snprintf(buf, size, "$%u", ti->param);
  case XPJ_TK_VIEW: {
    type_str(m, ti->elem, elem, sizeof elem, f);
    char r[16] = "";
    if (ti->rank == XPJ_RANK_GENERIC)
      snprintf(r, sizeof r, "*");
    else
      for (int i = 1; i < ti->rank; i++)
        strcat(r, ",");
    return (size_t)snprintf(buf, size, "%s %s%s[%s]",
                            ti->space == XPJ_SPACE_LOCAL ? "local" : "global",
                            ti->is_const ? "const " : "", elem, r);
  }
  case XPJ_TK_STATIC: {
    type_str(m, ti->elem, elem, sizeof elem, f);
    char d[160] = "";
    size_t n = 0;
    for (int i = 0; i < ti->rank; i++)
      n += (size_t)snprintf(d + n, sizeof d - n, "%s%lld", i ? ", " : "",
                            (long long)ti->dims[i]);
    return (size_t)snprintf(buf, size, "%s %s[%s]",
                            ti->space == XPJ_SPACE_LOCAL ? "local" : "private",
                            elem, d);
  }
  case XPJ_TK_PTR: {
    type_str(m, ti->elem, elem, sizeof elem, f);
    static const char *const sp[] = {"private", "global", "local"};
    return (size_t)snprintf(buf, size, "ptr %s %s%s", sp[ti->space % 3],
                            ti->is_const ? "const " : "", elem);
  }
  }
  return (size_t)snprintf(buf, size, "?");
}

size_t xpj_type_str(const xpj_module *m, xpj_type t, char *buf, size_t size) {
  if (!buf) /* (as snprintf(NULL, 0): the length only) */
    size = 0;
  if (!m)
    return 0;
  return type_str(m, t, buf, size, NULL);
}

size_t xpj_type_str_in(const xpj_func *f, xpj_type t, char *buf,
                       size_t size) {
  return type_str(f->mod, t, buf, size, f);
}

/* Type name in the context of f (type parameters by their names). */
static const char *tname(const xpj_func *f, xpj_type t, char buf[96]) {
  type_str(f->mod, t, buf, 96, f);
  return buf;
}

/* ---- functions ------------------------------------------------------ */

static uint32_t new_block(xpj_func *f, uint32_t parent) {
  if (!xpj_grow((void **)&f->blocks, &f->capblocks, f->nblocks + 1,
                sizeof *f->blocks)) {
    oom(f->mod);
    return 0;
  }
  f->blocks[f->nblocks].parent = parent;
  return f->nblocks++;
}

xpj_func *xpj_func_create(xpj_module *m, const char *name, xpj_func_kind kind,
                          unsigned dims, unsigned ntparams,
                          const char *const *tparams, xpj_loc loc) {
  if (!m || m->oom || !name || !*name)
    return NULL;
  if (xpj_module_find(m, name)) {
    xpj_set_error(m, "redefinition of '%s'", name);
    return NULL;
  }
  if (m->nfuncs >= XPJ_MAX_FUNCS) {
    xpj_set_error(m, "too many functions in one module (at most %d)",
                  XPJ_MAX_FUNCS);
    return NULL;
  }
  if ((kind == XPJ_FUNC_DEVICE && dims != 0) ||
      (kind == XPJ_FUNC_RANGE && dims > 3) ||
      (kind == XPJ_FUNC_NDRANGE && (dims < 1 || dims > 3)) ||
      (unsigned)kind > XPJ_FUNC_NDRANGE) {
    xpj_set_error(m, "invalid number of dimensions %u for '%s'", dims, name);
    return NULL;
  }
  if (ntparams > XPJ_MAX_TPARAMS || (ntparams && !tparams)) {
    xpj_set_error(m, "too many type parameters (at most %d)", XPJ_MAX_TPARAMS);
    return NULL;
  }
  if (!xpj_grow((void **)&m->funcs, &m->capfuncs, m->nfuncs + 1,
                sizeof *m->funcs)) {
    oom(m);
    return NULL;
  }
  xpj_func *f = xpj_calloc(1, sizeof *f);
  if (!f) {
    oom(m);
    return NULL;
  }
  f->mod = m;
  f->kind = kind;
  f->dims = dims;
  f->loc = loc;
  f->name = xpj_strdup(name);
  bool ok = f->name != NULL;
  for (unsigned i = 0; ok && i < ntparams; i++) {
    f->tparams[i] = xpj_strdup(tparams[i] ? tparams[i] : "?");
    ok = f->tparams[i] != NULL;
    f->ntparams = i + 1;
  }
  /* instruction 0 and block 0 are reserved; block 1 is the body */
  ok = ok && xpj_grow((void **)&f->insts, &f->capinsts, 16, sizeof *f->insts) &&
       xpj_grow((void **)&f->pool, &f->cappool, 16, sizeof *f->pool);
  f->ninsts = 1;
  f->npool = 1;
  ok = ok && new_block(f, 0) == 0 && new_block(f, 0) == 1;
  f->ret = ok ? xpj_type_void(m) : 0;
  if (!ok || !f->ret) {
    func_free(f);
    oom(m);
    return NULL;
  }
  f->index = m->nfuncs;
  m->funcs[m->nfuncs++] = f;
  return f;
}

const char *xpj_func_name(const xpj_func *f) { return f ? f->name : NULL; }
xpj_func_kind xpj_func_kind_of(const xpj_func *f) {
  return f ? f->kind : XPJ_FUNC_DEVICE;
}
unsigned xpj_func_dims(const xpj_func *f) { return f ? f->dims : 0; }

xpj_status xpj_func_set_reqd_local(xpj_func *f, unsigned n,
                                   const uint64_t *size) {
  if (!f || !size)
    return XPJ_ERR_INVALID;
  if (f->kind != XPJ_FUNC_NDRANGE || n != f->dims) {
    xpj_set_error(f->mod, "'%s': a required local size needs an nd-range "
                  "kernel and one size per dimension", f->name);
    return XPJ_ERR_INVALID;
  }
  uint64_t total = 1;
  for (unsigned d = 0; d < n; d++) {
    if (size[d] < 1 || size[d] > XPJ_MAX_REQD_LOCAL ||
        (total *= size[d]) > XPJ_MAX_REQD_LOCAL) {
      xpj_set_error(f->mod, "'%s': the required local size must be at least "
                    "1 in each dimension and at most %u work-items in all",
                    f->name, XPJ_MAX_REQD_LOCAL);
      return XPJ_ERR_INVALID;
    }
  }
  for (unsigned d = 0; d < 3; d++)
    f->reqd_local[d] = d < n ? size[d] : 0;
  return XPJ_OK;
}

unsigned xpj_func_reqd_local(const xpj_func *f, uint64_t out[3]) {
  if (!f || !f->reqd_local[0])
    return 0;
  for (unsigned d = 0; d < f->dims; d++)
    out[d] = f->reqd_local[d];
  return f->dims;
}

/* Calls deeper than this below a kernel are not looked into (the language
 * allows no recursion, so this only bounds the walk). */
#define DIMS_CALL_DEPTH 64

/* The highest dimension d (plus one) that f itself reads through a
 * work-item query. */
static unsigned dims_own(const xpj_func *f) {
  unsigned r = 0;
  for (uint32_t i = 1; i < f->ninsts; i++) {
    const xpj_inst *in = &f->insts[i];
    if (in->op == XPJ_OP_WI && xpj_wi_needs_dim((xpj_wi)in->aux)) {
      unsigned n = in->imm.i >= 0 && in->imm.i < 3 ? (unsigned)in->imm.i + 1 : 1;
      if (n > r)
        r = n;
    }
  }
  return r;
}

/* The same for f and the functions it calls, to DIMS_CALL_DEPTH calls
 * deep, by walking every chain of calls: time exponential in the depth of
 * a chain whose functions call the next one twice. Only when dims_read
 * has no memory. */
static unsigned dims_read_walk(const xpj_func *f, unsigned depth) {
  if (!f || depth > DIMS_CALL_DEPTH)
    return 0;
  unsigned r = dims_own(f);
  for (uint32_t i = 1; i < f->ninsts; i++) {
    const xpj_inst *in = &f->insts[i];
    if (in->op == XPJ_OP_CALL && in->imm.callee < f->mod->nfuncs) {
      unsigned n = dims_read_walk(f->mod->funcs[in->imm.callee], depth + 1);
      if (n > r)
        r = n;
    }
  }
  return r;
}

/* dims_own(g), and when queue, the functions g calls not yet seen appended
 * to queue[*tail...] (marked seen). */
static unsigned dims_visit(const xpj_func *root, const xpj_func *g,
                           uint32_t *queue, uint32_t *tail, uint8_t *seen) {
  const xpj_module *m = root->mod;
  for (uint32_t i = 1; queue && i < g->ninsts; i++) {
    const xpj_inst *in = &g->insts[i];
    if (in->op != XPJ_OP_CALL)
      continue;
    uint32_t fi = in->imm.callee;
    if (fi < m->nfuncs && !seen[fi] && m->funcs[fi] && m->funcs[fi] != root) {
      seen[fi] = 1;
      queue[(*tail)++] = fi;
    }
  }
  return dims_own(g);
}

/* The highest dimension d (plus one) that f or a function it calls reads
 * through a work-item query, counting the functions within DIMS_CALL_DEPTH
 * calls of f as the walk above does - found breadth first, each function
 * once, at its least depth: time linear in the module's size. */
static unsigned dims_read(const xpj_func *f) {
  const xpj_module *m = f->mod;
  uint32_t *queue = xpj_malloc((m->nfuncs + 1) * sizeof *queue);
  uint8_t *seen = xpj_calloc(m->nfuncs + 1, 1);
  if (!queue || !seen) {
    xpj_free(queue);
    xpj_free(seen);
    return dims_read_walk(f, 0);
  }
  uint32_t head = 0, tail = 0;
  unsigned r = dims_visit(f, f, queue, &tail, seen);
  for (unsigned depth = 1; depth <= DIMS_CALL_DEPTH && head < tail && r < 3;
       depth++) {
    uint32_t end = tail; /* the functions depth calls below f */
    for (; head < end; head++) {
      unsigned n = dims_visit(f, m->funcs[queue[head]],
                              depth < DIMS_CALL_DEPTH ? queue : NULL, &tail,
                              seen);
      if (n > r)
        r = n;
    }
  }
  xpj_free(queue);
  xpj_free(seen);
  return r;
}

unsigned xpj_func_id_rank(const xpj_func *f) {
  if (!f)
    return 0;
  if (f->dims)
    return f->dims;
  unsigned r = dims_read(f);
  return r ? r : 1;
}
unsigned xpj_func_param_count(const xpj_func *f) { return f ? f->nparams : 0; }
const char *xpj_func_param_name(const xpj_func *f, unsigned i) {
  return f && i < f->nparams ? f->params[i].name : NULL;
}
xpj_type xpj_func_param_type(const xpj_func *f, unsigned i) {
  return f && i < f->nparams ? f->params[i].type : 0;
}
xpj_val xpj_func_param_val(const xpj_func *f, unsigned i) {
  return f && i < f->nparams ? f->params[i].val : 0;
}
xpj_type xpj_func_return(const xpj_func *f) { return f ? f->ret : 0; }
unsigned xpj_func_tparam_count(const xpj_func *f) { return f ? f->ntparams : 0; }
const char *xpj_func_tparam_name(const xpj_func *f, unsigned i) {
  return f && i < f->ntparams ? f->tparams[i] : NULL;
}
unsigned xpj_func_const_count(const xpj_func *f) {
  return f ? f->ncparams : 0;
}
const char *xpj_func_const_name(const xpj_func *f, unsigned i) {
  return f && i < f->ncparams ? f->cparams[i] : NULL;
}
xpj_scalar xpj_func_const_type(const xpj_func *f, unsigned i) {
  return f && i < f->ncparams ? (xpj_scalar)f->cptype[i] : XPJ_VOID;
}
unsigned xpj_func_generic_count(const xpj_func *f) {
  return f ? f->ntparams + f->ncparams : 0;
}
int xpj_func_generic_at(const xpj_func *f, unsigned pos, int *is_const) {
  if (!f || pos >= f->ntparams + f->ncparams)
    return -1;
  unsigned before = 0; /* const parameters declared before pos */
  for (unsigned i = 0; i < f->ncparams; i++) {
    if (f->cppos[i] == pos) {
      if (is_const)
        *is_const = 1;
      return (int)i;
    }
    before += f->cppos[i] < pos;
  }
  if (is_const)
    *is_const = 0;
  return (int)(pos - before);
}

bool xpj_ir_add_cparam(xpj_func *f, const char *name, xpj_scalar s,
                       unsigned pos) {
  xpj_module *m = f->mod;
  if (f->ncparams >= XPJ_MAX_CPARAMS) {
    xpj_set_error(m, "too many const parameters (at most %d)",
                  XPJ_MAX_CPARAMS);
    return false;
  }
  if (s < XPJ_BOOL || s > XPJ_U64 ||
      pos >= XPJ_MAX_TPARAMS + XPJ_MAX_CPARAMS) {
    xpj_set_error(m, "invalid const parameter '%s'", name);
    return false;
  }
  char *nm = xpj_strdup(name);
  if (!nm) {
    oom(m);
    return false;
  }
  f->cparams[f->ncparams] = nm;
  f->cptype[f->ncparams] = (uint8_t)s;
  f->cppos[f->ncparams++] = (uint8_t)pos;
  return true;
}

xpj_block xpj_func_body(const xpj_func *f) { return f ? 1 : 0; }
xpj_module *xpj_func_module(const xpj_func *f) { return f ? f->mod : NULL; }

int xpj_func_has_generic_rank(const xpj_func *f) {
  if (!f)
    return 0;
  for (unsigned i = 0; i < f->nparams; i++) {
    const xpj_typeinfo *ti = xpj_typeinfo_of(f->mod, f->params[i].type);
    if (ti->kind == XPJ_TK_VIEW && ti->rank == XPJ_RANK_GENERIC)
      return 1;
  }
  return 0;
}

xpj_type xpj_val_type(const xpj_func *f, xpj_val v) {
  return f && v > 0 && v < f->ninsts ? f->insts[v].type : 0;
}

int xpj_val_const(const xpj_func *f, xpj_val v, int64_t *i, double *d) {
  if (!f || v == 0 || v >= f->ninsts || f->insts[v].op != XPJ_OP_CONST)
    return 0;
  const xpj_inst *in = &f->insts[v];
  if (in->aux) { /* stored as float */
    if (d)
      *d = in->imm.f;
    if (i)
      *i = (int64_t)in->imm.f;
  } else {
    if (i)
      *i = in->imm.i;
    if (d)
      *d = (double)in->imm.i;
  }
  return 1;
}

const char *xpj_inst_name(const xpj_func *f, const xpj_inst *in) {
  if ((in->op != XPJ_OP_VAR && in->op != XPJ_OP_ARRAY) || in->imm.name == 0)
    return NULL;
  return f->mod->strings + in->imm.name - 1;
}

xpj_status xpj_func_index_info(const xpj_func *f, uint32_t inst,
                               xpj_index_info *out) {
  if (!f || !out || inst >= f->ninsts || f->insts[inst].op != XPJ_OP_INDEX ||
      !f->insts[inst].nargs)
    return XPJ_ERR_INVALID;
  const xpj_inst *in = &f->insts[inst];
  const xpj_inst *arr = &f->insts[f->pool[in->args]];
  const xpj_typeinfo *ti = xpj_typeinfo_of(f->mod, arr->type);
  out->loc = in->loc;
  out->space = ti ? (xpj_space)ti->space : XPJ_SPACE_GLOBAL;
  if (arr->op == XPJ_OP_PARAM && arr->aux < f->nparams) {
    out->param = (int)arr->aux;
    out->array = f->params[arr->aux].name;
  } else {
    const char *n = xpj_inst_name(f, arr);
    out->param = -1;
    out->array = n ? n : "?";
  }
  out->access = "access to";
  out->unsigned_dims = 0;
  for (uint32_t d = 0; d + 1 < in->nargs && d < 32; d++) {
    const xpj_inst *ix = &f->insts[f->pool[in->args + 1 + d]];
    xpj_scalar t = xpj_type_elem_scalar(f->mod, ix->type);
    if (t == XPJ_U8 || t == XPJ_U16 || t == XPJ_U32 || t == XPJ_U64)
      out->unsigned_dims |= 1u << d;
  }
  for (uint32_t i = 0; i < f->ninsts; i++) {
    const xpj_inst *u = &f->insts[i];
    if (!u->nargs || f->pool[u->args] != inst)
      continue;
    switch (u->op) {
    case XPJ_OP_LOAD: out->access = "load from"; break;
    case XPJ_OP_STORE: out->access = "store to"; break;
    case XPJ_OP_ATOMIC: case XPJ_OP_CMPXCHG: case XPJ_OP_ALOAD:
    case XPJ_OP_ASTORE: out->access = "atomic on"; break;
    default: continue;
    }
    break;
  }
  return XPJ_OK;
}

/* ---- building ------------------------------------------------------- */

static bool valid_block(const xpj_func *f, xpj_block b) {
  return b >= 1 && b < f->nblocks;
}

/* A value usable as an operand: exists and produces something. */
static bool valid_val(const xpj_func *f, xpj_val v) {
  return v > 0 && v < f->ninsts &&
         xpj_type_scalar_of(f->mod, f->insts[v].type) != XPJ_VOID;
}

static xpj_val emit(xpj_func *f, xpj_block b, xpj_op op, xpj_type type,
                    unsigned nargs, const xpj_val *args, xpj_loc loc) {
  xpj_module *m = f->mod;
  if (m->oom)
    return 0;
  if (!valid_block(f, b)) {
    xpj_set_error(m, "invalid block %u", b);
    return 0;
  }
  xpj_blockdata *bd = &f->blocks[b];
  if (!xpj_grow((void **)&f->insts, &f->capinsts, f->ninsts + 1,
                sizeof *f->insts) ||
      !xpj_grow((void **)&f->pool, &f->cappool, f->npool + nargs,
                sizeof *f->pool) ||
      !xpj_grow((void **)&bd->ids, &bd->cap, bd->n + 1, sizeof *bd->ids)) {
    oom(m);
    return 0;
  }
  xpj_val v = f->ninsts++;
  xpj_inst *in = &f->insts[v];
  memset(in, 0, sizeof *in);
  in->op = (uint8_t)op;
  in->type = type;
  in->nargs = nargs;
  in->args = f->npool;
  in->in_block = b;
  in->loc = loc;
  for (unsigned i = 0; i < nargs; i++)
    f->pool[f->npool++] = args[i];
  bd->ids[bd->n++] = v;
  return v;
}

/* Checks each operand; a 0 operand is poison (silently propagates). */
static bool operands_ok(xpj_func *f, unsigned n, const xpj_val *v) {
  for (unsigned i = 0; i < n; i++) {
    if (v[i] == 0)
      return false;
    if (!valid_val(f, v[i])) {
      xpj_set_error(f->mod, "invalid operand %%%u", v[i]);
      return false;
    }
  }
  return true;
}

xpj_val xpj_func_add_param(xpj_func *f, const char *name, xpj_type type,
                           xpj_loc loc) {
  if (!f || !name)
    return 0;
  xpj_module *m = f->mod;
  if (f->nparams >= XPJ_MAX_PARAMS) {
    xpj_set_error(m, "too many parameters (at most %d)", XPJ_MAX_PARAMS);
    return 0;
  }
  for (unsigned i = 0; i < f->nparams; i++)
    if (strcmp(f->params[i].name, name) == 0) {
      xpj_set_error(m, "duplicate parameter '%s'", name);
      return 0;
    }
  const xpj_typeinfo *ti = xpj_typeinfo_of(m, type);
  if (!(is_elem_type(m, type) || (type && ti->kind == XPJ_TK_VIEW))) {
    xpj_set_error(m, "parameter '%s' must be a scalar or a global array",
                  name);
    return 0;
  }
  if (f->ninsts != 1 + f->nparams) {
    xpj_set_error(m, "parameters must be added before the body");
    return 0;
  }
  char *nm = xpj_strdup(name);
  if (!nm) {
    oom(m);
    return 0;
  }
  xpj_val v = emit(f, 1, XPJ_OP_PARAM, type, 0, NULL, loc);
  if (!v) {
    xpj_free(nm);
    return 0;
  }
  f->insts[v].aux = (uint8_t)f->nparams;
  f->params[f->nparams].name = nm;
  f->params[f->nparams].type = type;
  f->params[f->nparams].val = v;
  f->params[f->nparams].loc = loc;
  f->nparams++;
  return v;
}

xpj_status xpj_func_set_return(xpj_func *f, xpj_type type) {
  if (!f)
    return XPJ_ERR_INVALID;
  if (f->kind != XPJ_FUNC_DEVICE && xpj_type_scalar_of(f->mod, type) != XPJ_VOID) {
    xpj_set_error(f->mod, "kernels cannot return a value");
    return XPJ_ERR_INVALID;
  }
  if (!is_elem_type(f->mod, type) &&
      xpj_type_scalar_of(f->mod, type) != XPJ_VOID) {
    xpj_set_error(f->mod, "functions return a scalar or nothing");
    return XPJ_ERR_INVALID;
  }
  f->ret = type;
  return XPJ_OK;
}

/* type classes; a type parameter passes every class except bool */
static bool is_intlike(const xpj_module *m, xpj_type t) {
  int s = xpj_type_scalar_of(m, t);
  return (s >= XPJ_I8 && s <= XPJ_U64) || xpj_type_is_param(m, t);
}
static bool is_floatlike(const xpj_module *m, xpj_type t) {
  int s = xpj_type_scalar_of(m, t);
  return xpj_scalar_is_float(s) || xpj_type_is_param(m, t);
}
static bool is_numeric(const xpj_module *m, xpj_type t) {
  return is_intlike(m, t) || is_floatlike(m, t);
}
static bool is_bool(const xpj_module *m, xpj_type t) {
  return xpj_type_scalar_of(m, t) == XPJ_BOOL;
}
static bool is_signed_scalar(int s) { return s >= XPJ_I8 && s <= XPJ_I64; }

/* bf16 only stores values: true (and the error set) when t is bf16 */
static bool bf16_refused(xpj_func *f, xpj_type t, const char *what,
                         const char *name) {
  if (xpj_type_scalar_of(f->mod, t) != XPJ_BF16)
    return false;
  xpj_set_error(f->mod, "%s '%s' cannot be applied to bf16: bf16 is a "
                "storage type; convert it first, e.g. f32(x)", what, name);
  return true;
}

/* Wraps v to the width of integer scalar s (two's complement). */
static int64_t wrap_int(int s, int64_t v) {
  unsigned bits = xpj_scalar_bits((xpj_scalar)s);
  if (s == XPJ_BOOL)
    return v != 0;
  if (bits >= 64)
    return v;
  uint64_t mask = (UINT64_C(1) << bits) - 1, u = (uint64_t)v & mask;
  if (is_signed_scalar(s) && (u >> (bits - 1)))
    u |= ~mask;
  return (int64_t)u;
}

static bool int_fits(int s, int64_t v) {
  if (s == XPJ_U64 || s == XPJ_I64)
    return true;
  if (s == XPJ_BOOL)
    return v == 0 || v == 1;
  return wrap_int(s, v) == v;
}

static double float_limit(int s, xpj_limit l);

xpj_val xpj_b_const_int(xpj_func *f, xpj_block b, xpj_type t, int64_t v,
                        xpj_loc loc) {
  if (!f)
    return 0;
  xpj_module *m = f->mod;
  int s = xpj_type_scalar_of(m, t);
  char tb[96];
  if (xpj_scalar_float_valued(s)) {
    /* rounded once; beyond f16's range it rounds to infinity, which a
     * constant may not become (docs/language.md 4.4), as a float one's
     * value may not in xpj_b_const_float */
    double d = xpj_float_of_int(s, v, false);
    if (!isfinite(d)) {
      xpj_set_error(m, "integer constant %lld is out of range for %s "
                    "(largest finite %g; infinity(%s) if that is meant)",
                    (long long)v, xpj_scalar_name((xpj_scalar)s),
                    float_limit(s, XPJ_LIMIT_MAX),
                    xpj_scalar_name((xpj_scalar)s));
      return 0;
    }
    return xpj_b_const_float(f, b, t, d, loc);
  }
  if (!is_intlike(m, t) && !is_bool(m, t)) {
    xpj_set_error(m, "integer constant cannot have type %s", tname(f, t, tb));
    return 0;
  }
  if (s != XPJ_SCALAR_COUNT && !int_fits(s, v)) {
    xpj_set_error(m, "integer constant %lld does not fit in %s", (long long)v,
                  xpj_scalar_name((xpj_scalar)s));
    return 0;
  }
  xpj_val r = emit(f, b, XPJ_OP_CONST, t, 0, NULL, loc);
  if (r)
    f->insts[r].imm.i = v;
  return r;
}

xpj_val xpj_b_const_float(xpj_func *f, xpj_block b, xpj_type t, double v,
                          xpj_loc loc) {
  return xpj_b_const_float_dir(f, b, t, v, 0, loc);
}

xpj_val xpj_b_const_float_dir(xpj_func *f, xpj_block b, xpj_type t, double v,
                              int dir, xpj_loc loc) {
  if (!f)
    return 0;
  xpj_module *m = f->mod;
  int s = xpj_type_scalar_of(m, t);
  char tb[96];
  if (!(xpj_scalar_float_valued(s) || xpj_type_is_param(m, t))) {
    xpj_set_error(m, "floating-point constant cannot have type %s",
                  tname(f, t, tb));
    return 0;
  }
  double exact = v;
  bool param = xpj_type_is_param(m, t); /* rounded when T is bound */
  v = xpj_float_round_dir(s, v, dir);
  if (isfinite(exact) && !isfinite(v)) { /* docs/language.md 4.4 */
    /* with the digits that tell the two apart: 3.4028236e38 is past
     * f32's 3.4028235e38, which %g printed as the same 3.40282e+38 */
    double max = float_limit(s, XPJ_LIMIT_MAX);
    char eb[32], mb[32];
    for (int prec = 6; prec <= 17; prec++) {
      snprintf(eb, sizeof eb, "%.*g", prec, fabs(exact));
      snprintf(mb, sizeof mb, "%.*g", prec, max);
      if (strcmp(eb, mb))
        break;
    }
    xpj_set_error(m, "floating-point constant %s%s is out of range for %s "
                  "(largest finite %s; infinity(%s) if that is meant)",
                  exact < 0 ? "-" : "", eb, xpj_scalar_name((xpj_scalar)s),
                  mb, xpj_scalar_name((xpj_scalar)s));
    return 0;
  }
  xpj_val r = emit(f, b, XPJ_OP_CONST, t, 0, NULL, loc);
  if (r) {
    f->insts[r].aux = !param || !dir ? XPJ_CONST_FLOAT
                      : dir > 0      ? XPJ_CONST_ABOVE
                                     : XPJ_CONST_BELOW;
    f->insts[r].imm.f = v;
  }
  return r;
}

static bool is_int_const(const xpj_func *f, xpj_val v, int64_t *out) {
  const xpj_inst *in = &f->insts[v];
  int s = xpj_type_scalar_of(f->mod, in->type);
  if (in->op != XPJ_OP_CONST || in->aux || s < XPJ_BOOL || s > XPJ_U64)
    return false;
  *out = in->imm.i;
  return true;
}

/* Folds an integer binop on constants; false when it must not be folded. */
static bool fold_int(xpj_binop op, int s, int64_t a, int64_t b, int64_t *r) {
  unsigned bits = xpj_scalar_bits((xpj_scalar)s);
  bool sg = is_signed_scalar(s);
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  if (bits < 64 && !sg) {
    ua &= (UINT64_C(1) << bits) - 1;
    ub &= (UINT64_C(1) << bits) - 1;
  }
  switch (op) {
  case XPJ_ADD: *r = (int64_t)(ua + ub); break;
  case XPJ_SUB: *r = (int64_t)(ua - ub); break;
  case XPJ_MUL: *r = (int64_t)(ua * ub); break;
  case XPJ_DIV:
  case XPJ_REM:
    if (b == 0 || (sg && b == -1))
      return false; /* leave the runtime semantics to the backend */
    if (sg)
      *r = op == XPJ_DIV ? a / b : a % b;
    else
      *r = (int64_t)(op == XPJ_DIV ? ua / ub : ua % ub);
    break;
  case XPJ_AND: *r = (int64_t)(ua & ub); break;
  case XPJ_OR: *r = (int64_t)(ua | ub); break;
  case XPJ_XOR: *r = (int64_t)(ua ^ ub); break;
  case XPJ_SHL: *r = (int64_t)(ua << (ub % bits)); break;
  case XPJ_SHR:
    *r = sg ? (a >> (ub % bits)) : (int64_t)(ua >> (ub % bits));
    break;
  case XPJ_EQ: *r = ua == ub; return true;
  case XPJ_NE: *r = ua != ub; return true;
  case XPJ_LT: *r = sg ? a < b : ua < ub; return true;
  case XPJ_LE: *r = sg ? a <= b : ua <= ub; return true;
  case XPJ_GT: *r = sg ? a > b : ua > ub; return true;
  case XPJ_GE: *r = sg ? a >= b : ua >= ub; return true;
  default: return false;
  }
  *r = wrap_int(s, *r);
  return true;
}

xpj_val xpj_b_binop(xpj_func *f, xpj_block b, xpj_binop op, xpj_val l,
                    xpj_val r, xpj_loc loc) {
  if (!f)
    return 0;
  xpj_val ops[2] = {l, r};
  if (!operands_ok(f, 2, ops))
    return 0;
  xpj_module *m = f->mod;
  xpj_type lt = f->insts[l].type, rt = f->insts[r].type;
  char b1[96], b2[96];
  if ((unsigned)op >= XPJ_BINOP_COUNT) {
    xpj_set_error(m, "invalid binary operator");
    return 0;
  }
  if (!is_elem_type(m, lt) || !is_elem_type(m, rt)) {
    xpj_set_error(m, "operator '%s' needs scalar operands, got %s and %s",
                  xpj_binop_symbol(op), tname(f, lt, b1), tname(f, rt, b2));
    return 0;
  }
  if (lt != rt) {
    xpj_set_error(m, "mismatched types %s and %s for operator '%s' (use a cast)",
                  tname(f, lt, b1), tname(f, rt, b2), xpj_binop_symbol(op));
    return 0;
  }
  if (bf16_refused(f, lt, "operator", xpj_binop_symbol(op)))
    return 0;
  bool ok;
  const char *need;
  switch (op) {
  case XPJ_ADD: case XPJ_SUB: case XPJ_MUL: case XPJ_DIV:
  case XPJ_LT: case XPJ_LE: case XPJ_GT: case XPJ_GE:
    ok = is_numeric(m, lt);
    need = "numeric";
    break;
  case XPJ_REM: case XPJ_SHL: case XPJ_SHR:
    ok = is_intlike(m, lt);
    need = "integer";
    break;
  case XPJ_AND: case XPJ_OR: case XPJ_XOR:
    ok = is_intlike(m, lt) || is_bool(m, lt);
    need = "integer or bool";
    break;
  default:
    ok = true;
    need = "";
  }
  if (!ok) {
    xpj_set_error(m, "operator '%s' needs %s operands, got %s",
                  xpj_binop_symbol(op), need, tname(f, lt, b1));
    return 0;
  }
  bool cmp = op >= XPJ_EQ;
  xpj_type res = cmp ? xpj_type_scalar(m, XPJ_BOOL) : lt;
  int64_t a, c, v;
  int s = xpj_type_scalar_of(m, lt);
  if (is_int_const(f, l, &a) && is_int_const(f, r, &c) &&
      fold_int(op, s, a, c, &v))
    return xpj_b_const_int(f, b, res, v, loc);
  xpj_val out = emit(f, b, XPJ_OP_BINOP, res, 2, ops, loc);
  if (out)
    f->insts[out].aux = (uint8_t)op;
  return out;
}

xpj_val xpj_b_unop(xpj_func *f, xpj_block b, xpj_unop op, xpj_val v,
                   xpj_loc loc) {
  if (!f || !operands_ok(f, 1, &v))
    return 0;
  xpj_module *m = f->mod;
  xpj_type t = f->insts[v].type;
  char tb[96];
  static const char *const sym[] = {"-", "~", "!"};
  if (bf16_refused(f, t, "operator", (unsigned)op < 3 ? sym[op] : "?"))
    return 0;
  bool ok = op == XPJ_NEG   ? is_numeric(m, t)
            : op == XPJ_NOT ? is_intlike(m, t)
            : op == XPJ_LNOT ? is_bool(m, t)
                             : false;
  if (!ok) {
    xpj_set_error(m, "operator '%s' cannot be applied to %s",
                  (unsigned)op < 3 ? sym[op] : "?", tname(f, t, tb));
    return 0;
  }
  int64_t a;
  int s = xpj_type_scalar_of(m, t);
  if (is_int_const(f, v, &a))
    return xpj_b_const_int(
        f, b, t,
        wrap_int(s, op == XPJ_NEG ? (int64_t)(0 - (uint64_t)a)
                    : op == XPJ_NOT ? ~a
                                    : !a),
        loc);
  if (op == XPJ_NEG && f->insts[v].op == XPJ_OP_CONST && f->insts[v].aux &&
      xpj_scalar_is_float(s))
    return xpj_b_const_float_dir(f, b, t, -f->insts[v].imm.f,
                                 -xpj_const_dir(&f->insts[v]), loc);
  xpj_val out = emit(f, b, XPJ_OP_UNOP, t, 1, &v, loc);
  if (out)
    f->insts[out].aux = (uint8_t)op;
  return out;
}

xpj_val xpj_b_cast(xpj_func *f, xpj_block b, xpj_type to, xpj_val v,
                   xpj_loc loc) {
  if (!f || !operands_ok(f, 1, &v))
    return 0;
  xpj_module *m = f->mod;
  xpj_type from = f->insts[v].type;
  char b1[96], b2[96];
  if (!is_elem_type(m, from) || !is_elem_type(m, to)) {
    xpj_set_error(m, "cannot cast %s to %s", tname(f, from, b1),
                  tname(f, to, b2));
    return 0;
  }
  if (from == to)
    return v;
  int fs = xpj_type_scalar_of(m, from), ts = xpj_type_scalar_of(m, to);
  int64_t a;
  if (is_int_const(f, v, &a) && ts != XPJ_SCALAR_COUNT) {
    if (xpj_scalar_float_valued(ts)) {
      /* rounded once, as at run time; beyond f16's range the cast gives
       * infinity (4.3), which as a constant is no error */
      double d = xpj_float_of_int(ts, a, fs == XPJ_U64);
      return xpj_b_const_float(f, b, to, d, loc);
    }
    return xpj_b_const_int(f, b, to, ts == XPJ_BOOL ? a != 0 : wrap_int(ts, a),
                           loc);
  }
  xpj_val out = emit(f, b, XPJ_OP_CAST, to, 1, &v, loc);
  return out;
}

xpj_val xpj_b_var(xpj_func *f, xpj_block b, xpj_type t, const char *name,
                  xpj_loc loc) {
  if (!f)
    return 0;
  xpj_module *m = f->mod;
  char tb[96];
  if (!is_elem_type(m, t)) {
    xpj_set_error(m, "a variable must have a scalar type, not %s",
                  tname(f, t, tb));
    return 0;
  }
  uint32_t off = 0;
  if (name) {
    size_t n = strlen(name) + 1;
    if (n > UINT32_MAX / 2 ||
        !xpj_grow((void **)&m->strings, &m->capstrings,
                  m->nstrings + (uint32_t)n, 1)) {
      oom(m);
      return 0;
    }
    memcpy(m->strings + m->nstrings, name, n);
    off = m->nstrings + 1;
    m->nstrings += (uint32_t)n;
  }
  xpj_type pt = xpj_type_ptr(m, XPJ_SPACE_PRIVATE, t, 0);
  xpj_val v = pt ? emit(f, b, XPJ_OP_VAR, pt, 0, NULL, loc) : 0;
  if (v)
    f->insts[v].imm.name = off;
  return v;
}

/* True when b is the body block (top level) of f. */
static bool is_body(xpj_block b) { return b == 1; }

xpj_val xpj_b_array(xpj_func *f, xpj_block b, xpj_type t, const char *name,
                    xpj_loc loc) {
  if (!f)
    return 0;
  xpj_module *m = f->mod;
  const xpj_typeinfo *ti = xpj_typeinfo_of(m, t);
  if (!t || ti->kind != XPJ_TK_STATIC) {
    xpj_set_error(m, "not a static array type");
    return 0;
  }
  int64_t total = 1;
  for (int i = 0; i < ti->rank; i++) {
    if (ti->dims[i] > (INT64_C(1) << 31) / total) {
      xpj_set_error(m, "array is too large (more than 2^31 elements)");
      return 0;
    }
    total *= ti->dims[i];
  }
  if (ti->space == XPJ_SPACE_LOCAL) {
    if (f->kind == XPJ_FUNC_DEVICE) {
      xpj_set_error(m, "local arrays cannot be declared in device functions");
      return 0;
    }
    if (f->kind != XPJ_FUNC_NDRANGE) {
      xpj_set_error(m, "local arrays are only allowed in ndrange kernels");
      return 0;
    }
    if (!is_body(b)) {
      xpj_set_error(m, "local arrays must be declared at the top level of "
                       "the kernel body");
      return 0;
    }
  } else if (total > 65536) {
    xpj_set_error(m, "private array is too large (%lld elements, at most "
                     "65536)", (long long)total);
    return 0;
  }
  xpj_val v = xpj_b_var(f, b, ti->elem, name, loc); /* reuse name storage */
  if (!v)
    return 0;
  f->insts[v].op = XPJ_OP_ARRAY;
  f->insts[v].type = t;
  return v;
}

static bool is_array(const xpj_module *m, xpj_type t) {
  const xpj_typeinfo *ti = xpj_typeinfo_of(m, t);
  return t && (ti->kind == XPJ_TK_VIEW || ti->kind == XPJ_TK_STATIC);
}

xpj_val xpj_b_index(xpj_func *f, xpj_block b, xpj_val array, unsigned nidx,
                    const xpj_val *idx, xpj_loc loc) {
  if (!f || !operands_ok(f, 1, &array))
    return 0;
  xpj_module *m = f->mod;
  xpj_type at = f->insts[array].type;
  char tb[96];
  if (!is_array(m, at)) {
    xpj_set_error(m, "cannot index a value of type %s", tname(f, at, tb));
    return 0;
  }
  if (nidx == 0 || nidx > XPJ_MAX_RANK || !idx) {
    xpj_set_error(m, "an index needs 1 to %d subscripts", XPJ_MAX_RANK);
    return 0;
  }
  if (!operands_ok(f, nidx, idx))
    return 0;
  const xpj_typeinfo *ti = xpj_typeinfo_of(m, at);
  int rank = ti->rank;
  if (rank != XPJ_RANK_GENERIC && nidx != 1 && (int)nidx != rank) {
    xpj_set_error(m, "array of rank %d indexed with %u subscripts (use %d, "
                     "or 1 flat index)", rank, nidx, rank);
    return 0;
  }
  for (unsigned i = 0; i < nidx; i++) {
    xpj_type it = f->insts[idx[i]].type;
    if (!is_intlike(m, it)) {
      xpj_set_error(m, "array subscript must be an integer, not %s",
                    tname(f, it, tb));
      return 0;
    }
  }
  xpj_type pt = xpj_type_ptr(m, ti->space, ti->elem, ti->is_const);
  xpj_val args[1 + XPJ_MAX_RANK];
  args[0] = array;
  memcpy(args + 1, idx, nidx * sizeof *idx);
  return pt ? emit(f, b, XPJ_OP_INDEX, pt, nidx + 1, args, loc) : 0;
}

static bool is_ptr(const xpj_module *m, xpj_type t) {
  return t && xpj_typeinfo_of(m, t)->kind == XPJ_TK_PTR;
}

xpj_val xpj_b_load(xpj_func *f, xpj_block b, xpj_val ptr, xpj_loc loc) {
  if (!f || !operands_ok(f, 1, &ptr))
    return 0;
  xpj_module *m = f->mod;
  if (!is_ptr(m, f->insts[ptr].type)) {
    xpj_set_error(m, "load from a value that is not a location");
    return 0;
  }
  return emit(f, b, XPJ_OP_LOAD, xpj_typeinfo_of(m, f->insts[ptr].type)->elem,
              1, &ptr, loc);
}

xpj_val xpj_b_store(xpj_func *f, xpj_block b, xpj_val ptr, xpj_val v,
                    xpj_loc loc) {
  xpj_val ops[2] = {ptr, v};
  if (!f || !operands_ok(f, 2, ops))
    return 0;
  xpj_module *m = f->mod;
  xpj_type pt = f->insts[ptr].type;
  char b1[96], b2[96];
  if (!is_ptr(m, pt)) {
    xpj_set_error(m, "store to a value that is not a location");
    return 0;
  }
  const xpj_typeinfo *ti = xpj_typeinfo_of(m, pt);
  if (ti->is_const) {
    xpj_set_error(m, "cannot assign to an element of a read-only array");
    return 0;
  }
  if (ti->elem != f->insts[v].type) {
    xpj_set_error(m, "cannot assign a value of type %s to a location of "
                     "type %s", tname(f, f->insts[v].type, b1),
                  tname(f, ti->elem, b2));
    return 0;
  }
  return emit(f, b, XPJ_OP_STORE, xpj_type_void(m), 2, ops, loc);
}

static xpj_val shape_like(xpj_func *f, xpj_block b, xpj_op op, xpj_val array,
                          xpj_val dim, xpj_loc loc) {
  xpj_val ops[2] = {array, dim};
  if (!f || !operands_ok(f, dim ? 2 : 1, ops))
    return 0;
  xpj_module *m = f->mod;
  xpj_type at = f->insts[array].type;
  char tb[96];
  if (!is_array(m, at)) {
    xpj_set_error(m, "%s() needs an array, not %s", xpj_op_names[op],
                  tname(f, at, tb));
    return 0;
  }
  const xpj_typeinfo *ti = xpj_typeinfo_of(m, at);
  xpj_type i64 = xpj_type_scalar(m, XPJ_I64);
  if (op == XPJ_OP_NDIM) {
    if (ti->rank != XPJ_RANK_GENERIC)
      return xpj_b_const_int(f, b, i64, ti->rank, loc);
    return emit(f, b, op, i64, 1, ops, loc);
  }
  if (op == XPJ_OP_SIZE) {
    if (ti->kind == XPJ_TK_STATIC) {
      int64_t n = 1;
      for (int i = 0; i < ti->rank; i++)
        n *= ti->dims[i];
      return xpj_b_const_int(f, b, i64, n, loc);
    }
    return emit(f, b, op, i64, 1, ops, loc);
  }
  xpj_type dt = f->insts[dim].type;
  if (!is_intlike(m, dt)) {
    xpj_set_error(m, "dimension must be an integer, not %s", tname(f, dt, tb));
    return 0;
  }
  int64_t d;
  bool konst = is_int_const(f, dim, &d);
  if (konst && (d < 0 || d >= (ti->rank == XPJ_RANK_GENERIC ? XPJ_MAX_RANK
                                                            : ti->rank))) {
    char db[32]; /* a u64 one as written, not as its bits read signed */
    snprintf(db, sizeof db, xpj_type_scalar_of(m, dt) == XPJ_U64 ? "%llu"
             : "%lld", (long long)d);
    if (ti->rank == XPJ_RANK_GENERIC)
      xpj_set_error(m, "dimension %s is out of range for an array of any "
                    "rank (0 to %d)", db, XPJ_MAX_RANK - 1);
    else
      xpj_set_error(m, "dimension %s is out of range for an array of rank "
                    "%d", db, ti->rank);
    return 0;
  }
  if (ti->kind == XPJ_TK_STATIC) {
    if (!konst) {
      xpj_set_error(m, "%s() of a static array needs a constant dimension",
                    xpj_op_names[op]);
      return 0;
    }
    int64_t v = 1;
    if (op == XPJ_OP_SHAPE)
      v = ti->dims[d];
    else
      for (int i = (int)d + 1; i < ti->rank; i++)
        v *= ti->dims[i];
    return xpj_b_const_int(f, b, i64, v, loc);
  }
  if (dt != i64) {
    ops[1] = xpj_b_cast(f, b, i64, dim, loc);
    if (!ops[1])
      return 0;
  }
  return emit(f, b, op, i64, 2, ops, loc);
}

xpj_val xpj_b_shape(xpj_func *f, xpj_block b, xpj_val array, xpj_val dim,
                    xpj_loc loc) {
  return shape_like(f, b, XPJ_OP_SHAPE, array, dim, loc);
}
xpj_val xpj_b_stride(xpj_func *f, xpj_block b, xpj_val array, xpj_val dim,
                     xpj_loc loc) {
  return shape_like(f, b, XPJ_OP_STRIDE, array, dim, loc);
}
xpj_val xpj_b_size(xpj_func *f, xpj_block b, xpj_val array, xpj_loc loc) {
  return shape_like(f, b, XPJ_OP_SIZE, array, 0, loc);
}
xpj_val xpj_b_ndim(xpj_func *f, xpj_block b, xpj_val array, xpj_loc loc) {
  return shape_like(f, b, XPJ_OP_NDIM, array, 0, loc);
}

xpj_val xpj_b_wi(xpj_func *f, xpj_block b, xpj_wi w, unsigned dim,
                 xpj_loc loc) {
  if (!f)
    return 0;
  xpj_module *m = f->mod;
  if ((unsigned)w >= XPJ_WI_COUNT) {
    xpj_set_error(m, "invalid work-item query");
    return 0;
  }
  if (xpj_wi_needs_ndrange(w) && f->kind == XPJ_FUNC_RANGE) {
    xpj_set_error(m, "%s() needs an ndrange kernel; '%s' is a range kernel",
                  xpj_wi_name(w), f->name);
    return 0;
  }
  if (!xpj_wi_needs_dim(w))
    dim = 0;
  else if (dim > 2 || (f->dims && dim >= f->dims)) {
    xpj_set_error(m, "dimension %u is out of range for a %u-dimensional "
                     "kernel", dim, f->dims ? f->dims : 3);
    return 0;
  }
  xpj_val v = emit(f, b, XPJ_OP_WI, xpj_type_scalar(m, XPJ_I64), 0, NULL, loc);
  if (v) {
    f->insts[v].aux = (uint8_t)w;
    f->insts[v].imm.i = dim;
  }
  return v;
}

xpj_val xpj_ir_cparam(xpj_func *f, xpj_block b, unsigned index, xpj_type t,
                      xpj_loc loc) {
  if (!f)
    return 0;
  int s = xpj_type_scalar_of(f->mod, t);
  if (s < XPJ_BOOL || s > XPJ_U64 ||
      (index >= f->ncparams && index != XPJ_CPARAM_DERIVED)) {
    xpj_set_error(f->mod, "invalid const parameter %u", index);
    return 0;
  }
  xpj_val v = emit(f, b, XPJ_OP_CPARAM, t, 0, NULL, loc);
  if (v)
    f->insts[v].aux = (uint8_t)index;
  return v;
}

xpj_val xpj_b_barrier(xpj_func *f, xpj_block b, unsigned fences, xpj_loc loc) {
  if (!f)
    return 0;
  xpj_module *m = f->mod;
  if (f->kind == XPJ_FUNC_RANGE) {
    xpj_set_error(m, "barrier() needs an ndrange kernel; '%s' is a range "
                     "kernel", f->name);
    return 0;
  }
  if (fences == 0 || fences > (XPJ_FENCE_LOCAL | XPJ_FENCE_GLOBAL)) {
    xpj_set_error(m, "invalid barrier fence flags");
    return 0;
  }
  xpj_val v = emit(f, b, XPJ_OP_BARRIER, xpj_type_void(m), 0, NULL, loc);
  if (v)
    f->insts[v].aux = (uint8_t)fences;
  return v;
}

/* Checks an atomic's pointer; returns its element type or 0. */
static xpj_type atomic_ptr(xpj_func *f, xpj_val ptr, const char *what,
                           bool store) {
  xpj_module *m = f->mod;
  xpj_type pt = f->insts[ptr].type;
  if (!is_ptr(m, pt)) {
    xpj_set_error(m, "%s needs the address of an array element (&a[i])",
                  what);
    return 0;
  }
  const xpj_typeinfo *ti = xpj_typeinfo_of(m, pt);
  if (ti->space == XPJ_SPACE_PRIVATE) {
    xpj_set_error(m, "%s needs global or local memory, not private memory",
                  what);
    return 0;
  }
  if (ti->is_const && store) {
    xpj_set_error(m, "%s on a read-only array", what);
    return 0;
  }
  return ti->elem;
}

static bool order_scope_ok(xpj_module *m, xpj_order o, xpj_scope s) {
  if ((unsigned)o > XPJ_ORDER_SEQ_CST || (unsigned)s > XPJ_SCOPE_DEVICE) {
    xpj_set_error(m, "invalid memory order or scope");
    return false;
  }
  return true;
}

static bool atomic_int_type(const xpj_module *m, xpj_type t) {
  int s = xpj_type_scalar_of(m, t);
  return s == XPJ_I32 || s == XPJ_I64 || s == XPJ_U32 || s == XPJ_U64 ||
         xpj_type_is_param(m, t);
}
static bool atomic_float_type(const xpj_module *m, xpj_type t) {
  return xpj_scalar_is_float(xpj_type_scalar_of(m, t));
}

xpj_val xpj_b_atomic(xpj_func *f, xpj_block b, xpj_atomic_op op, xpj_val ptr,
                     xpj_val v, xpj_order order, xpj_scope scope, xpj_loc loc) {
  xpj_val ops[2] = {ptr, v};
  if (!f || !operands_ok(f, 2, ops))
    return 0;
  xpj_module *m = f->mod;
  char what[32], b1[96], b2[96];
  snprintf(what, sizeof what, "atomic_%s", xpj_atomic_op_name(op));
  if ((unsigned)op >= XPJ_ATOMIC_OP_COUNT || !order_scope_ok(m, order, scope))
    return 0;
  xpj_type et = atomic_ptr(f, ptr, what, true);
  if (!et)
    return 0;
  bool float_ok = op == XPJ_ATOMIC_ADD || op == XPJ_ATOMIC_SUB ||
                  op == XPJ_ATOMIC_XCHG;
  if (!(atomic_int_type(m, et) || (float_ok && atomic_float_type(m, et)))) {
    xpj_set_error(m, "%s is not supported on %s (supported: i32, i64, u32, "
                     "u64%s)", what, tname(f, et, b1),
                  float_ok ? ", f16, f32, f64" : "");
    return 0;
  }
  if (f->insts[v].type != et) {
    xpj_set_error(m, "%s: value of type %s for a location of type %s", what,
                  tname(f, f->insts[v].type, b1), tname(f, et, b2));
    return 0;
  }
  xpj_val r = emit(f, b, XPJ_OP_ATOMIC, et, 2, ops, loc);
  if (r) {
    f->insts[r].aux = (uint8_t)op;
    f->insts[r].order = (uint8_t)order;
    f->insts[r].scope = (uint8_t)scope;
  }
  return r;
}

xpj_val xpj_b_cmpxchg(xpj_func *f, xpj_block b, xpj_val ptr, xpj_val expected,
                      xpj_val desired, xpj_order order, xpj_scope scope,
                      xpj_loc loc) {
  xpj_val ops[3] = {ptr, expected, desired};
  if (!f || !operands_ok(f, 3, ops))
    return 0;
  xpj_module *m = f->mod;
  char b1[96];
  if (!order_scope_ok(m, order, scope))
    return 0;
  xpj_type et = atomic_ptr(f, ptr, "atomic_cmpxchg", true);
  if (!et)
    return 0;
  if (!atomic_int_type(m, et) && !atomic_float_type(m, et)) {
    xpj_set_error(m, "atomic_cmpxchg is not supported on %s (supported: "
                     "i32, i64, u32, u64, f16, f32, f64)", tname(f, et, b1));
    return 0;
  }
  if (f->insts[expected].type != et || f->insts[desired].type != et) {
    xpj_set_error(m, "atomic_cmpxchg: expected and desired values must have "
                     "the element type %s", tname(f, et, b1));
    return 0;
  }
  xpj_val r = emit(f, b, XPJ_OP_CMPXCHG, et, 3, ops, loc);
  if (r) {
    f->insts[r].order = (uint8_t)order;
    f->insts[r].scope = (uint8_t)scope;
  }
  return r;
}

xpj_val xpj_b_atomic_load(xpj_func *f, xpj_block b, xpj_val ptr,
                          xpj_order order, xpj_scope scope, xpj_loc loc) {
  if (!f || !operands_ok(f, 1, &ptr))
    return 0;
  xpj_module *m = f->mod;
  char b1[96];
  if (!order_scope_ok(m, order, scope))
    return 0;
  if (order == XPJ_ORDER_RELEASE || order == XPJ_ORDER_ACQ_REL) {
    xpj_set_error(m, "atomic_load cannot have %s order (use relaxed, acquire "
                     "or seq_cst)", xpj_order_name(order));
    return 0;
  }
  xpj_type et = atomic_ptr(f, ptr, "atomic_load", false);
  if (!et)
    return 0;
  if (!atomic_int_type(m, et) && !atomic_float_type(m, et)) {
    xpj_set_error(m, "atomic_load is not supported on %s", tname(f, et, b1));
    return 0;
  }
  xpj_val r = emit(f, b, XPJ_OP_ALOAD, et, 1, &ptr, loc);
  if (r) {
    f->insts[r].order = (uint8_t)order;
    f->insts[r].scope = (uint8_t)scope;
  }
  return r;
}

xpj_val xpj_b_atomic_store(xpj_func *f, xpj_block b, xpj_val ptr, xpj_val v,
                           xpj_order order, xpj_scope scope, xpj_loc loc) {
  xpj_val ops[2] = {ptr, v};
  if (!f || !operands_ok(f, 2, ops))
    return 0;
  xpj_module *m = f->mod;
  char b1[96], b2[96];
  if (!order_scope_ok(m, order, scope))
    return 0;
  if (order == XPJ_ORDER_ACQUIRE || order == XPJ_ORDER_ACQ_REL) {
    xpj_set_error(m, "atomic_store cannot have %s order (use relaxed, release "
                     "or seq_cst)", xpj_order_name(order));
    return 0;
  }
  xpj_type et = atomic_ptr(f, ptr, "atomic_store", true);
  if (!et)
    return 0;
  if (!atomic_int_type(m, et) && !atomic_float_type(m, et)) {
    xpj_set_error(m, "atomic_store is not supported on %s", tname(f, et, b1));
    return 0;
  }
  if (f->insts[v].type != et) {
    xpj_set_error(m, "atomic_store: value of type %s for a location of type "
                     "%s", tname(f, f->insts[v].type, b1), tname(f, et, b2));
    return 0;
  }
  xpj_val r = emit(f, b, XPJ_OP_ASTORE, xpj_type_void(m), 2, ops, loc);
  if (r) {
    f->insts[r].order = (uint8_t)order;
    f->insts[r].scope = (uint8_t)scope;
  }
  return r;
}

xpj_val xpj_b_math(xpj_func *f, xpj_block b, xpj_math fn, unsigned nargs,
                   const xpj_val *args, xpj_loc loc) {
  if (!f)
    return 0;
  xpj_module *m = f->mod;
  if ((unsigned)fn >= XPJ_MATH_COUNT) {
    xpj_set_error(m, "invalid math function");
    return 0;
  }
  const char *name = math_table[fn].name;
  if (nargs != math_table[fn].arity) {
    xpj_set_error(m, "%s() takes %u argument%s, got %u", name,
                  math_table[fn].arity, math_table[fn].arity == 1 ? "" : "s",
                  nargs);
    return 0;
  }
  if (!operands_ok(f, nargs, args))
    return 0;
  xpj_type t = f->insts[args[0]].type;
  char b1[96], b2[96];
  for (unsigned i = 1; i < nargs; i++)
    if (f->insts[args[i]].type != t) {
      xpj_set_error(m, "%s(): mismatched argument types %s and %s", name,
                    tname(f, t, b1), tname(f, f->insts[args[i]].type, b2));
      return 0;
    }
  if (bf16_refused(f, t, "builtin", name))
    return 0;
  unsigned cls = math_table[fn].cls;
  bool ok = cls == CLS_I   ? is_intlike(m, t)
            : cls == CLS_N ? is_numeric(m, t)
                           : is_floatlike(m, t);
  if (!ok) {
    xpj_set_error(m, "%s() needs %s arguments, got %s", name,
                  cls == CLS_I   ? "integer"
                  : cls == CLS_N ? "numeric"
                                 : "floating-point",
                  tname(f, t, b1));
    return 0;
  }
  xpj_type res = cls == CLS_B ? xpj_type_scalar(m, XPJ_BOOL) : t;
  xpj_val r = emit(f, b, XPJ_OP_MATH, res, nargs, args, loc);
  if (r)
    f->insts[r].aux = (uint8_t)fn;
  return r;
}

xpj_val xpj_b_group(xpj_func *f, xpj_block b, const xpj_coll_desc *d,
                    xpj_val x, xpj_val id, xpj_loc loc) {
  if (!f || !d)
    return 0;
  xpj_module *m = f->mod;
  char name[64], b1[96];
  xpj_coll_name(d, name, sizeof name);
  bool combines = d->kind < XPJ_COLL_BROADCAST;
  if ((unsigned)d->kind >= XPJ_COLL_COUNT ||
      (combines && (unsigned)d->op >= XPJ_GOP_NONE) ||
      (!combines && d->op != XPJ_GOP_NONE) ||
      (!d->sub_group && d->kind > XPJ_COLL_BROADCAST)) {
    xpj_set_error(m, "invalid collective");
    return 0;
  }
  bool two = xpj_coll_takes_id(d);
  xpj_val ops[2] = {x, id};
  if ((two && !id) || (!two && id)) {
    xpj_set_error(m, "%s() takes %s", name,
                  two ? "a value and an id" : "one value");
    return 0;
  }
  if (!operands_ok(f, two ? 2 : 1, ops))
    return 0;
  if (f->kind == XPJ_FUNC_RANGE) {
    xpj_set_error(m, "%s() needs an ndrange kernel; '%s' is a range kernel",
                  name, f->name);
    return 0;
  }
  xpj_type t = f->insts[x].type;
  bool ok = !combines ? is_numeric(m, t) || is_bool(m, t) ||
                            xpj_type_scalar_of(m, t) == XPJ_BF16
            : d->op >= XPJ_GOP_AND ? is_intlike(m, t) || is_bool(m, t)
                                   : is_numeric(m, t);
  if (!ok) {
    xpj_set_error(m, "%s() needs %s value, got %s", name,
                  !combines ? "a scalar"
                  : d->op >= XPJ_GOP_AND ? "an integer or bool"
                                         : "a numeric",
                  tname(f, t, b1));
    return 0;
  }
  if (two && !is_intlike(m, f->insts[id].type)) {
    xpj_set_error(m, "%s(): the %s must be an integer, got %s", name,
                  d->kind == XPJ_COLL_SHUFFLE_XOR ? "lane mask"
                  : d->sub_group                  ? "lane"
                                                  : "linear id",
                  tname(f, f->insts[id].type, b1));
    return 0;
  }
  xpj_val r = emit(f, b, XPJ_OP_GROUP, t, two ? 2 : 1, ops, loc);
  if (r) {
    f->insts[r].aux = (uint8_t)d->kind;
    f->insts[r].order = (uint8_t)d->op;
    f->insts[r].scope = (uint8_t)(d->sub_group != 0);
  }
  return r;
}

/* The value of limit l of float scalar s. */
static double float_limit(int s, xpj_limit l) {
  /* largest, smallest normal, epsilon: f32, f64, f16, bf16 */
  double max = s == XPJ_F32 ? FLT_MAX : s == XPJ_F64 ? DBL_MAX
               : s == XPJ_F16 ? 65504.0 : xpj_bf16_to_double(0x7f7f);
  double tiny = s == XPJ_F32 ? FLT_MIN : s == XPJ_F64 ? DBL_MIN
                : s == XPJ_F16 ? 0x1p-14 : 0x1p-126;
  double eps = s == XPJ_F32 ? FLT_EPSILON : s == XPJ_F64 ? DBL_EPSILON
               : s == XPJ_F16 ? 0x1p-10 : 0x1p-7;
  switch (l) {
  case XPJ_LIMIT_MAX: return max;
  case XPJ_LIMIT_MIN: return -max;
  case XPJ_LIMIT_MIN_POSITIVE: return tiny;
  case XPJ_LIMIT_EPSILON: return eps;
  case XPJ_LIMIT_INF: return HUGE_VAL;
  default: return NAN;
  }
}

/* The value of limit MAX or MIN of integer scalar s (two's complement
 * bits of the value, as constants hold them). */
static int64_t int_limit(int s, xpj_limit l) {
  unsigned bits = xpj_scalar_bits((xpj_scalar)s);
  if (is_signed_scalar(s)) {
    uint64_t max = (UINT64_C(1) << (bits - 1)) - 1;
    return l == XPJ_LIMIT_MAX ? (int64_t)max : -(int64_t)max - 1;
  }
  if (l == XPJ_LIMIT_MIN)
    return 0;
  return bits == 64 ? -1 : (int64_t)((UINT64_C(1) << bits) - 1);
}

xpj_val xpj_b_limit(xpj_func *f, xpj_block b, xpj_limit which, xpj_type t,
                    xpj_loc loc) {
  if (!f)
    return 0;
  xpj_module *m = f->mod;
  char tb[96];
  if ((unsigned)which >= XPJ_LIMIT_COUNT) {
    xpj_set_error(m, "invalid limit");
    return 0;
  }
  const char *name = limit_table[which].name;
  bool fl = limit_table[which].float_only;
  int s = t ? xpj_type_scalar_of(m, t) : XPJ_VOID;
  if (!t || !(s == XPJ_BF16 || (fl ? is_floatlike(m, t) : is_numeric(m, t)))) {
    xpj_set_error(m, "%s() needs a %s type, got %s", name,
                  fl ? "floating-point" : "numeric", tname(f, t, tb));
    return 0;
  }
  if (xpj_scalar_float_valued(s))
    return xpj_b_const_float(f, b, t, float_limit(s, which), loc);
  if (s >= XPJ_I8 && s <= XPJ_U64)
    return xpj_b_const_int(f, b, t, int_limit(s, which), loc);
  xpj_val r = emit(f, b, XPJ_OP_LIMIT, t, 0, NULL, loc); /* a parameter */
  if (r)
    f->insts[r].aux = (uint8_t)which;
  return r;
}

xpj_val xpj_b_call(xpj_func *f, xpj_block b, xpj_func *callee,
                   unsigned ntargs, const xpj_type *targs, unsigned nargs,
                   const xpj_val *args, xpj_loc loc) {
  if (!f || !callee)
    return 0;
  xpj_module *m = f->mod;
  char b1[96], b2[96];
  if (callee->mod != m) {
    xpj_set_error(m, "callee belongs to another module");
    return 0;
  }
  if (callee->kind != XPJ_FUNC_DEVICE) {
    xpj_set_error(m, "'%s' is a kernel; kernels cannot be called",
                  callee->name);
    return 0;
  }
  if (ntargs != callee->ntparams || (ntargs && !targs)) {
    xpj_set_error(m, "'%s' takes %u type argument%s, got %u", callee->name,
                  callee->ntparams, callee->ntparams == 1 ? "" : "s", ntargs);
    return 0;
  }
  for (unsigned i = 0; i < ntargs; i++)
    if (!is_elem_type(m, targs[i])) {
      xpj_set_error(m, "type argument %u of '%s' is not a scalar type", i + 1,
                    callee->name);
      return 0;
    }
  if (nargs != callee->nparams) {
    xpj_set_error(m, "'%s' takes %u argument%s, got %u", callee->name,
                  callee->nparams, callee->nparams == 1 ? "" : "s", nargs);
    return 0;
  }
  if (nargs && !operands_ok(f, nargs, args))
    return 0;
  xpj_val ops[XPJ_MAX_TPARAMS + XPJ_MAX_PARAMS];
  for (unsigned i = 0; i < nargs; i++) {
    xpj_type want = xpj_type_subst(m, callee->params[i].type, ntargs, targs);
    xpj_type got = f->insts[args[i]].type;
    const xpj_typeinfo *wi = xpj_typeinfo_of(m, want);
    /* a writable view may be passed where a read-only one is expected */
    if (got != want && !(wi->kind == XPJ_TK_VIEW && wi->is_const &&
                         xpj_type_with_const(m, got) == want)) {
      xpj_set_error(m, "argument %u of '%s' ('%s') has type %s, expected %s",
                    i + 1, callee->name, callee->params[i].name,
                    tname(f, got, b1), tname(callee, callee->params[i].type, b2));
      return 0;
    }
    ops[ntargs + i] = args[i];
  }
  for (unsigned i = 0; i < ntargs; i++)
    ops[i] = targs[i];
  xpj_type ret = xpj_type_subst(m, callee->ret, ntargs, targs);
  if (!ret)
    return 0;
  xpj_val r = emit(f, b, XPJ_OP_CALL, ret, ntargs + nargs, ops, loc);
  if (r) {
    f->insts[r].imm.callee = callee->index;
    f->insts[r].ntargs = ntargs;
  }
  return r;
}

xpj_val xpj_b_if(xpj_func *f, xpj_block b, xpj_val cond, xpj_block *then_b,
                 xpj_block *else_b, xpj_loc loc) {
  if (!f || !then_b || !else_b || !operands_ok(f, 1, &cond))
    return 0;
  xpj_module *m = f->mod;
  char tb[96];
  if (!is_bool(m, f->insts[cond].type)) {
    xpj_set_error(m, "condition must be bool, not %s (compare explicitly, "
                     "e.g. x != 0)", tname(f, f->insts[cond].type, tb));
    return 0;
  }
  xpj_val v = emit(f, b, XPJ_OP_IF, xpj_type_void(m), 1, &cond, loc);
  if (!v)
    return 0;
  uint32_t t = new_block(f, v), e = new_block(f, v);
  if (!t || !e)
    return 0;
  f->insts[v].blk[0] = t;
  f->insts[v].blk[1] = e;
  *then_b = t;
  *else_b = e;
  return v;
}

xpj_val xpj_b_loop(xpj_func *f, xpj_block b, xpj_block *cond_b,
                   xpj_block *body_b, xpj_block *step_b, xpj_loc loc) {
  if (!f || !cond_b || !body_b || !step_b)
    return 0;
  xpj_val v = emit(f, b, XPJ_OP_LOOP, xpj_type_void(f->mod), 0, NULL, loc);
  if (!v)
    return 0;
  for (int i = 0; i < 3; i++) {
    uint32_t nb = new_block(f, v);
    if (!nb)
      return 0;
    f->insts[v].blk[i] = nb;
  }
  *cond_b = f->insts[v].blk[0];
  *body_b = f->insts[v].blk[1];
  *step_b = f->insts[v].blk[2];
  return v;
}

xpj_status xpj_b_loop_cond(xpj_func *f, xpj_val loop, xpj_val cond) {
  if (!f || loop == 0 || loop >= f->ninsts || f->insts[loop].op != XPJ_OP_LOOP)
    return XPJ_ERR_INVALID;
  if (cond == 0)
    return XPJ_ERR_INVALID;
  xpj_module *m = f->mod;
  char tb[96];
  if (!valid_val(f, cond) || f->insts[cond].in_block != f->insts[loop].blk[0]) {
    xpj_set_error(m, "loop condition must be computed in the condition block");
    return XPJ_ERR_INVALID;
  }
  if (!is_bool(m, f->insts[cond].type)) {
    xpj_set_error(m, "condition must be bool, not %s (compare explicitly, "
                     "e.g. x != 0)", tname(f, f->insts[cond].type, tb));
    return XPJ_ERR_INVALID;
  }
  f->insts[loop].imm.i = cond;
  return XPJ_OK;
}

xpj_val xpj_b_yield(xpj_func *f, xpj_block b, xpj_val v, xpj_loc loc) {
  if (!f || !operands_ok(f, 1, &v))
    return 0;
  xpj_module *m = f->mod;
  char b1[96], b2[96];
  if (!valid_block(f, b) || b == 1) {
    xpj_set_error(m, "yield outside of an if");
    return 0;
  }
  xpj_val owner = f->blocks[b].parent;
  xpj_inst *in = &f->insts[owner];
  if (in->op != XPJ_OP_IF) {
    xpj_set_error(m, "yield outside of an if");
    return 0;
  }
  xpj_type t = f->insts[v].type;
  if (!is_elem_type(m, t)) {
    xpj_set_error(m, "a conditional expression must produce a scalar");
    return 0;
  }
  if (xpj_type_scalar_of(m, in->type) == XPJ_VOID) {
    in->type = t;
  } else if (in->type != t) {
    xpj_set_error(m, "the branches of a conditional expression have "
                     "different types %s and %s", tname(f, in->type, b1),
                  tname(f, t, b2));
    return 0;
  }
  return emit(f, b, XPJ_OP_YIELD, xpj_type_void(m), 1, &v, loc);
}

/* The innermost loop whose body or step contains block b, or 0. */
static xpj_val enclosing_loop(const xpj_func *f, xpj_block b) {
  while (b > 1) {
    xpj_val owner = f->blocks[b].parent;
    const xpj_inst *in = &f->insts[owner];
    if (in->op == XPJ_OP_LOOP && (in->blk[1] == b || in->blk[2] == b))
      return owner;
    if (in->op == XPJ_OP_LOOP && in->blk[0] == b)
      return 0; /* break/continue cannot leave a condition */
    b = in->in_block;
  }
  return 0;
}

static xpj_val jump(xpj_func *f, xpj_block b, xpj_op op, xpj_loc loc) {
  if (!f)
    return 0;
  if (!valid_block(f, b) || !enclosing_loop(f, b)) {
    xpj_set_error(f->mod, "'%s' outside of a loop", xpj_op_names[op]);
    return 0;
  }
  return emit(f, b, op, xpj_type_void(f->mod), 0, NULL, loc);
}

xpj_val xpj_b_break(xpj_func *f, xpj_block b, xpj_loc loc) {
  return jump(f, b, XPJ_OP_BREAK, loc);
}
xpj_val xpj_b_continue(xpj_func *f, xpj_block b, xpj_loc loc) {
  return jump(f, b, XPJ_OP_CONTINUE, loc);
}

xpj_val xpj_b_return(xpj_func *f, xpj_block b, xpj_val v, xpj_loc loc) {
  if (!f)
    return 0;
  xpj_module *m = f->mod;
  char b1[96], b2[96];
  bool is_void = xpj_type_scalar_of(m, f->ret) == XPJ_VOID;
  if (v == 0) {
    if (!is_void) {
      xpj_set_error(m, "'%s' must return a value of type %s", f->name,
                    tname(f, f->ret, b1));
      return 0;
    }
    return emit(f, b, XPJ_OP_RETURN, xpj_type_void(m), 0, NULL, loc);
  }
  if (!operands_ok(f, 1, &v))
    return 0;
  if (is_void) {
    xpj_set_error(m, "'%s' returns nothing, but a value is returned",
                  f->name);
    return 0;
  }
  if (f->insts[v].type != f->ret) {
    xpj_set_error(m, "'%s' returns %s, but the value has type %s", f->name,
                  tname(f, f->ret, b1), tname(f, f->insts[v].type, b2));
    return 0;
  }
  return emit(f, b, XPJ_OP_RETURN, xpj_type_void(m), 1, &v, loc);
}

void xpj_walk(const xpj_func *f, xpj_block b,
              void (*visit)(const xpj_func *, xpj_val, void *), void *ud) {
  const xpj_blockdata *bd = &f->blocks[b];
  for (uint32_t i = 0; i < bd->n; i++) {
    xpj_val v = bd->ids[i];
    visit(f, v, ud);
    const xpj_inst *in = &f->insts[v];
    int nb = in->op == XPJ_OP_IF ? 2 : in->op == XPJ_OP_LOOP ? 3 : 0;
    for (int k = 0; k < nb; k++)
      xpj_walk(f, in->blk[k], visit, ud);
  }
}

/* ---- type introspection --------------------------------------------- */

xpj_space xpj_type_space(const xpj_module *m, xpj_type t) {
  if (!m || !t || t >= m->ntypes)
    return XPJ_SPACE_PRIVATE;
  const xpj_typeinfo *ti = xpj_typeinfo_of(m, t);
  return ti->kind == XPJ_TK_VIEW || ti->kind == XPJ_TK_STATIC ||
                 ti->kind == XPJ_TK_PTR
             ? (xpj_space)ti->space
             : XPJ_SPACE_PRIVATE;
}

xpj_type_kind xpj_type_kind_of(const xpj_module *m, xpj_type t) {
  const xpj_typeinfo *ti = m ? xpj_typeinfo_of(m, t) : NULL;
  return ti ? (xpj_type_kind)ti->kind : XPJ_TYPE_SCALAR;
}

xpj_scalar xpj_type_elem_scalar(const xpj_module *m, xpj_type t) {
  const xpj_typeinfo *ti = m ? xpj_typeinfo_of(m, t) : NULL;
  if (ti && ti->kind != XPJ_TK_SCALAR && ti->kind != XPJ_TK_PARAM)
    ti = xpj_typeinfo_of(m, ti->elem);
  return ti && ti->kind == XPJ_TK_SCALAR ? (xpj_scalar)ti->scalar : XPJ_VOID;
}

int xpj_type_param_index(const xpj_module *m, xpj_type t) {
  const xpj_typeinfo *ti = m ? xpj_typeinfo_of(m, t) : NULL;
  if (ti && ti->kind != XPJ_TK_SCALAR && ti->kind != XPJ_TK_PARAM)
    ti = xpj_typeinfo_of(m, ti->elem);
  return ti && ti->kind == XPJ_TK_PARAM ? (int)ti->param : -1;
}

int xpj_type_rank(const xpj_module *m, xpj_type t) {
  const xpj_typeinfo *ti = m ? xpj_typeinfo_of(m, t) : NULL;
  return ti && (ti->kind == XPJ_TK_VIEW || ti->kind == XPJ_TK_STATIC)
             ? ti->rank
             : 0;
}

int xpj_type_is_const(const xpj_module *m, xpj_type t) {
  const xpj_typeinfo *ti = m ? xpj_typeinfo_of(m, t) : NULL;
  return ti ? ti->is_const : 0;
}
