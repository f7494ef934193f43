/*
 * localfit.c - does a work-group shape keep an nd-range kernel's static
 * arrays in bounds? An interval analysis of the kernel's integer values for
 * one launch geometry (docs/abi.md, "Default local size").
 *
 * Every integer value gets an interval [lo, hi] and a bit saying whether it
 * depends on the shape of the work-groups (a local id or size, a group id
 * or count, or anything computed from them). Variables hold the hull of
 * every value stored in them (iterated to a fixed point, widened to 0 or
 * infinity after a few rounds), sharpened where the code has just stored
 * one or where a condition guards the block: `if lid < s { t[lid + s] }`,
 * a loop's body under its condition, the rest of a block after
 * `if i >= n { return; }`. Each index into a static array that depends on
 * the shape is then judged against the array's extent.
 *
 * It is sound for the indices it judges, up to what intervals lose (it may
 * call a safe index unsafe, never the reverse): the runtime may then pick
 * a smaller group or refuse to choose one, never overrun an array.
 */
#include "ir_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INF ((int64_t)1 << 62)
#define LID_KEY 0x80000000u /* | d: the local id of dimension d */
#define ENV_MAX 48
#define WIDEN_AFTER 3
#define MAX_ROUNDS 24

typedef struct iv {
  int64_t lo, hi; /* lo > hi: no value (unreachable) */
  bool dep;       /* depends on the work-group shape */
} iv;

/* What the code at a point knows beyond the flow-insensitive intervals:
 * keys are variables (their VAR id), values (their id) and local ids. */
typedef struct known {
  uint32_t key;
  iv v;
} known;

/* a - b lies in [lo, hi]: what `if lid >= off` tells `lid - off` */
typedef struct fact {
  uint32_t a, b;
  int64_t lo, hi;
} fact;
#define FACT_MAX 8

typedef struct env {
  bool dead; /* the point is unreachable */
  bool ctl;  /* whether the point is reached depends on the group's shape */
  unsigned n, nf;
  known e[ENV_MAX];
  fact f[FACT_MAX];
} env;

/* What a function (or one it calls) does, computed once per analysis:
 * 0 not yet, 1 no, 2 yes. */
typedef struct fnfacts {
  uint8_t *wi;      /* asks a work-item query */
  uint8_t *arrays;  /* indexes a static array */
  unsigned budget;  /* called functions still to analyse */
} fnfacts;

/* What the analysis keeps per instruction of the function. */
typedef struct slot {
  iv val;  /* its value */
  iv var;  /* a VAR: the hull of the values stored in it */
  iv acc;  /* a VAR while narrowing: the hull of this walk's stores */
  iv best; /* a VAR while narrowing: the last hull known to be closed */
  uint32_t ver;  /* a VAR: stores so far in this walk */
  uint32_t lver; /* a LOAD of a VAR: its variable's ver when loaded */
  bool var_set, acc_set; /* something was stored in var / acc */
} slot;

typedef struct fctx {
  const xpj_func *f;
  const xpj_module *m;
  int64_t L[3], G[3];
  slot *s;          /* per instruction */
  const iv *params; /* a called function's arguments; NULL: a kernel's */
  iv ret;           /* the hull of what a called function returns */
  unsigned depth;   /* of calls */
  bool narrow; /* loads read var, stores go to acc */
  bool jump_ctl;     /* a jump was taken under shape-dependent control */
  struct fnfacts *fn; /* per function of the module, shared with calls */
  bool changed, judge, want_judge, nomem;
  unsigned round;
  xpj_fit *out;
  env *envs; /* a stack of environments (blocks nest 200 deep: not on the
                C stack) */
  unsigned top, nenvs;
} fctx;

static env *push(fctx *c, const env *from) {
  env *e = &c->envs[c->top++]; /* sized for the deepest nesting */
  *e = *from;
  return e;
}

static const xpj_inst *inst(const fctx *c, xpj_val v) { return &c->f->insts[v]; }
static const uint32_t *args(const fctx *c, const xpj_inst *in) {
  return xpj_inst_args(c->f, in);
}

static int64_t sat(__int128 x) {
  return x > INF ? INF : x < -INF ? -INF : (int64_t)x;
}
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static bool inf(int64_t x) { return x >= INF || x <= -INF; }

/* a + b of two bounds of one side: an infinite bound stays infinite (INF
 * stands for "any value beyond 2^62", never for a number) */
static int64_t add_b(int64_t a, int64_t b) {
  if (inf(a))
    return a;
  if (inf(b))
    return b;
  return sat((__int128)a + b);
}
static int64_t neg_b(int64_t a) { return a >= INF ? -INF : a <= -INF ? INF : -a; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t abs_b(int64_t a) { return a < 0 ? neg_b(a) : a; }

static iv mk(int64_t lo, int64_t hi, bool dep) { return (iv){lo, hi, dep}; }
static bool empty(iv a) { return a.lo > a.hi; }

static iv hull(iv a, iv b) {
  if (empty(a))
    return b;
  if (empty(b))
    return a;
  return mk(min64(a.lo, b.lo), max64(a.hi, b.hi), a.dep || b.dep);
}

static iv meet(iv a, iv b) {
  return mk(max64(a.lo, b.lo), min64(a.hi, b.hi), a.dep || b.dep);
}

/* The values a scalar of type t can hold. */
static iv type_range(const fctx *c, xpj_type t, bool dep) {
  switch (xpj_type_scalar_of(c->m, t)) {
  case XPJ_BOOL: return mk(0, 1, dep);
  case XPJ_I8: return mk(INT8_MIN, INT8_MAX, dep);
  case XPJ_I16: return mk(INT16_MIN, INT16_MAX, dep);
  case XPJ_I32: return mk(INT32_MIN, INT32_MAX, dep);
  case XPJ_U8: return mk(0, UINT8_MAX, dep);
  case XPJ_U16: return mk(0, UINT16_MAX, dep);
  case XPJ_U32: return mk(0, UINT32_MAX, dep);
  case XPJ_U64: return mk(0, INF, dep);
  default: return mk(-INF, INF, dep); /* i64, floats, pointers */
  }
}

static bool is_int(const fctx *c, xpj_type t) {
  int s = xpj_type_scalar_of(c->m, t);
  return s >= XPJ_BOOL && s <= XPJ_U64;
}

/* a as a value of type t: a itself when it fits, else all of t (the
 * arithmetic wrapped). */
static iv fit_type(const fctx *c, iv a, xpj_type t) {
  iv r = type_range(c, t, a.dep);
  if (empty(a) || (a.lo >= r.lo && a.hi <= r.hi))
    return a;
  return r;
}

/* ---- the environment ------------------------------------------------- */

static int env_find(const env *e, uint32_t key) {
  for (unsigned i = 0; i < e->n; i++)
    if (e->e[i].key == key)
      return (int)i;
  return -1;
}

/* Forgets key (a variable stored again) and the facts that name it. */
static void env_drop(env *e, uint32_t key) {
  int i = env_find(e, key);
  if (i >= 0)
    e->e[i] = e->e[--e->n];
  for (unsigned j = 0; j < e->nf;)
    if (e->f[j].a == key || e->f[j].b == key)
      e->f[j] = e->f[--e->nf];
    else
      j++;
}

static int fact_find(const env *e, uint32_t a, uint32_t b) {
  for (unsigned j = 0; j < e->nf; j++)
    if (e->f[j].a == a && e->f[j].b == b)
      return (int)j;
  return -1;
}

/* What e knows of a - b, or false. */
static bool fact_get(const env *e, uint32_t a, uint32_t b, int64_t *lo,
                     int64_t *hi) {
  int j = fact_find(e, a, b);
  if (j >= 0) {
    *lo = e->f[j].lo;
    *hi = e->f[j].hi;
    return true;
  }
  if ((j = fact_find(e, b, a)) >= 0) {
    *lo = neg_b(e->f[j].hi);
    *hi = neg_b(e->f[j].lo);
    return true;
  }
  return false;
}

static void fact_add(env *e, uint32_t a, uint32_t b, int64_t lo, int64_t hi) {
  if (a == b)
    return;
  if (a > b) { /* one order per pair */
    uint32_t t = a;
    a = b;
    b = t;
    int64_t l = lo;
    lo = neg_b(hi);
    hi = neg_b(l);
  }
  int j = fact_find(e, a, b);
  if (j < 0) {
    if (e->nf == FACT_MAX)
      return;
    j = (int)e->nf++;
    e->f[j] = (fact){a, b, -INF, INF};
  }
  e->f[j].lo = max64(e->f[j].lo, lo);
  e->f[j].hi = min64(e->f[j].hi, hi);
  if (e->f[j].lo > e->f[j].hi)
    e->dead = true;
}

/* Sets what is known of key (a full environment forgets: that is sound). */
static void env_set(env *e, uint32_t key, iv v) {
  int i = env_find(e, key);
  if (i >= 0)
    e->e[i].v = v;
  else if (e->n < ENV_MAX)
    e->e[e->n++] = (known){key, v};
  if (empty(v))
    e->dead = true;
}

/* Keeps what both know, as the hull of the two. */
static void env_join(env *a, const env *b) {
  if (b->dead)
    return;
  if (a->dead) {
    *a = *b;
    return;
  }
  for (unsigned i = 0; i < a->n;) {
    int j = env_find(b, a->e[i].key);
    if (j < 0) {
      a->e[i] = a->e[--a->n];
      continue;
    }
    a->e[i].v = hull(a->e[i].v, b->e[j].v);
    i++;
  }
  for (unsigned i = 0; i < a->nf;) {
    int j = fact_find(b, a->f[i].a, a->f[i].b);
    if (j < 0) {
      a->f[i] = a->f[--a->nf];
      continue;
    }
    a->f[i].lo = min64(a->f[i].lo, b->f[j].lo);
    a->f[i].hi = max64(a->f[i].hi, b->f[j].hi);
    i++;
  }
}

/* The key under which a value itself is known. */
static uint32_t own_key(const fctx *c, xpj_val v) {
  const xpj_inst *in = inst(c, v);
  if (in->op == XPJ_OP_WI && in->aux == XPJ_WI_LOCAL_ID && in->imm.i < 3)
    return LID_KEY | (uint32_t)in->imm.i;
  return v;
}

/* The variable load v read, when nothing was stored in it since (0
 * otherwise): `const ok = i < 8; i += 4; if ok {...}` says nothing of i. */
static xpj_val fresh_var(const fctx *c, xpj_val v) {
  const xpj_inst *in = inst(c, v);
  if (in->op != XPJ_OP_LOAD)
    return 0;
  xpj_val var = xpj_inst_args(c->f, in)[0];
  return inst(c, var)->op == XPJ_OP_VAR && c->s[v].lver == c->s[var].ver ? var : 0;
}

/* The key that names what v holds for facts: the variable a load read. */
static uint32_t base_key(const fctx *c, xpj_val v) {
  xpj_val var = fresh_var(c, v);
  return var ? var : own_key(c, v);
}

/* An operand as known at this point. */
static iv opnd(const fctx *c, const env *e, xpj_val v) {
  int i = env_find(e, own_key(c, v));
  return i >= 0 ? e->e[i].v : c->s[v].val;
}

/* ---- values ---------------------------------------------------------- */

/* Sizes (1 .. INF): a product and a quotient rounded up, saturating. */
static int64_t mul3(int64_t a, int64_t b, int64_t c) {
  return sat((__int128)sat((__int128)a * b) * c);
}
static int64_t cdiv(int64_t a, int64_t b) { return a / b + (a % b != 0); }

static iv wi_range(const fctx *c, const env *e, const xpj_inst *in) {
  unsigned d = in->imm.i >= 0 && in->imm.i < 3 ? (unsigned)in->imm.i : 3;
  int64_t L = d < 3 ? c->L[d] : 1, G = d < 3 ? c->G[d] : 1;
  int64_t groups = cdiv(G, L);
  int64_t lsize = mul3(c->L[0], c->L[1], c->L[2]);
  int64_t gsize = mul3(c->G[0], c->G[1], c->G[2]);
  int64_t ngroups = mul3(cdiv(c->G[0], c->L[0]), cdiv(c->G[1], c->L[1]),
                         cdiv(c->G[2], c->L[2]));
  switch ((xpj_wi)in->aux) {
  case XPJ_WI_LOCAL_ID: {
    int i = env_find(e, LID_KEY | d);
    return i >= 0 && d < 3 ? e->e[i].v : mk(0, L - 1, true);
  }
  case XPJ_WI_LOCAL_SIZE: return mk(L, L, true);
  case XPJ_WI_GROUP_ID: return mk(0, groups - 1, true);
  case XPJ_WI_NUM_GROUPS: return mk(groups, groups, true);
  case XPJ_WI_LOCAL_LINEAR_ID: return mk(0, lsize - 1, true);
  case XPJ_WI_GROUP_LINEAR_ID: return mk(0, ngroups - 1, true);
  case XPJ_WI_GLOBAL_ID: return mk(0, G - 1, false);
  case XPJ_WI_GLOBAL_SIZE: return mk(G, G, false);
  case XPJ_WI_GLOBAL_LINEAR_ID: return mk(0, gsize - 1, false);
  /* sub-groups divide the group: sound on every target */
  case XPJ_WI_SUB_GROUP_SIZE: return mk(1, lsize, true);
  case XPJ_WI_SUB_GROUP_LOCAL_ID: return mk(0, lsize - 1, true);
  case XPJ_WI_SUB_GROUP_ID: return mk(0, lsize - 1, true);
  case XPJ_WI_NUM_SUB_GROUPS: return mk(1, lsize, true);
  default: return mk(-INF, INF, true);
  }
}

static int bitlen(int64_t x) {
  int n = 0;
  while (x > 0 && n < 63) {
    n++;
    x >>= 1;
  }
  return n;
}

/* The four corners of a op b for monotone ops (op: '*', '/', '<', '>'). */
static iv corners(iv a, iv b, char op) {
  int64_t xs[2] = {a.lo, a.hi}, ys[2] = {b.lo, b.hi};
  int64_t lo = INF, hi = -INF;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      int64_t x = xs[i], y = ys[j], r;
      if (op == '*' && (inf(x) || inf(y)))
        r = x == 0 || y == 0 ? 0 : (x < 0) != (y < 0) ? -INF : INF;
      else if (inf(x)) /* an unbounded value divided or shifted stays so */
        r = op == '/' && y < 0 ? neg_b(x) : x;
      else
        r = sat(op == '*'   ? (__int128)x * y
                : op == '/' ? (__int128)x / y
                : op == '<' ? (__int128)x * ((__int128)1 << y)
                            : (__int128)(x >> y));
      lo = min64(lo, r);
      hi = max64(hi, r);
    }
  return mk(lo, hi, a.dep || b.dep);
}

static iv binop(const fctx *c, const xpj_inst *in, iv a, iv b) {
  bool dep = a.dep || b.dep;
  iv unknown = type_range(c, in->type, dep);
  int bits = (int)xpj_scalar_bits((xpj_scalar)xpj_type_scalar_of(c->m, in->type));
  if (empty(a) || empty(b))
    return mk(1, 0, dep);
  switch ((xpj_binop)in->aux) {
  case XPJ_ADD: return mk(add_b(a.lo, b.lo), add_b(a.hi, b.hi), dep);
  case XPJ_SUB: return mk(add_b(a.lo, neg_b(b.hi)), add_b(a.hi, neg_b(b.lo)), dep);
  case XPJ_MUL: return corners(a, b, '*');
  case XPJ_DIV:
    return b.lo > 0 || b.hi < 0 ? corners(a, b, '/') : unknown;
  case XPJ_REM: {
    if (b.lo <= 0 && b.hi >= 0)
      return unknown;
    int64_t m = add_b(max64(abs_b(b.lo), abs_b(b.hi)), -1);
    if (a.lo >= 0)
      return mk(0, min64(a.hi, m), dep);
    if (a.hi <= 0)
      return mk(max64(a.lo, -m), 0, dep);
    return mk(-m, m, dep);
  }
  case XPJ_SHL: /* counts of the type's width or more are masked */
    return b.lo >= 0 && b.hi < bits && b.hi <= 62 ? corners(a, b, '<') : unknown;
  case XPJ_SHR:
    return b.lo >= 0 && b.hi < bits ? corners(a, b, '>') : unknown;
  case XPJ_AND:
    if (a.lo >= 0 && b.lo >= 0)
      return mk(0, min64(a.hi, b.hi), dep);
    if (a.lo >= 0 || b.lo >= 0)
      return mk(0, a.lo >= 0 ? a.hi : b.hi, dep);
    return unknown;
  case XPJ_OR:
  case XPJ_XOR:
    if (a.lo >= 0 && b.lo >= 0) {
      int n = bitlen(max64(a.hi, b.hi));
      return mk(0, n >= 62 ? INF : ((int64_t)1 << n) - 1, dep);
    }
    return unknown;
  default: /* comparisons */
    return mk(0, 1, dep);
  }
}

static iv unop(const fctx *c, const xpj_inst *in, iv a) {
  if (empty(a))
    return a;
  switch ((xpj_unop)in->aux) {
  case XPJ_NEG: return mk(neg_b(a.hi), neg_b(a.lo), a.dep);
  case XPJ_NOT:
    if (xpj_type_scalar_of(c->m, in->type) == XPJ_BOOL)
      return mk(0, 1, a.dep);
    return mk(add_b(neg_b(a.hi), -1), add_b(neg_b(a.lo), -1), a.dep);
  default: return mk(0, 1, a.dep);
  }
}

static iv math(const fctx *c, const env *e, const xpj_inst *in) {
  const uint32_t *a = args(c, in);
  iv x[3];
  bool dep = false;
  for (unsigned i = 0; i < in->nargs && i < 3; i++) {
    x[i] = opnd(c, e, a[i]);
    dep |= x[i].dep;
  }
  iv unknown = type_range(c, in->type, dep);
  if (!is_int(c, in->type))
    return unknown;
  unsigned bits = xpj_scalar_bits((xpj_scalar)xpj_type_scalar_of(c->m, in->type));
  switch ((xpj_math)in->aux) {
  case XPJ_MATH_MIN:
    return mk(min64(x[0].lo, x[1].lo), min64(x[0].hi, x[1].hi), dep);
  case XPJ_MATH_MAX:
    return mk(max64(x[0].lo, x[1].lo), max64(x[0].hi, x[1].hi), dep);
  case XPJ_MATH_CLAMP: {
    iv lo = mk(max64(x[0].lo, x[1].lo), max64(x[0].hi, x[1].hi), dep);
    return mk(min64(lo.lo, x[2].lo), min64(lo.hi, x[2].hi), dep);
  }
  case XPJ_MATH_ABS:
    if (x[0].lo >= 0)
      return x[0];
    if (x[0].hi <= 0)
      return mk(neg_b(x[0].hi), neg_b(x[0].lo), dep);
    return mk(0, max64(abs_b(x[0].lo), x[0].hi), dep);
  case XPJ_MATH_POPCOUNT:
  case XPJ_MATH_CLZ:
  case XPJ_MATH_CTZ: return mk(0, bits, dep);
  default: return unknown;
  }
}

/* A work-group or sub-group collective (XPJ_OP_GROUP): combines the values
 * x of up to n work-items of the group (a sub-group is at most the group),
 * or hands one on: which and how many depend on the group's shape, so the
 * result does, whatever x depends on. */
static iv group_range(const fctx *c, const env *e, const xpj_inst *in) {
  iv x = opnd(c, e, args(c, in)[0]);
  x.dep = true;
  iv unknown = type_range(c, in->type, true);
  if (!is_int(c, in->type) || empty(x))
    return unknown;
  int64_t n = mul3(c->L[0], c->L[1], c->L[2]);
  xpj_coll kind = (xpj_coll)in->aux;
  /* another work-item's value, but x as this point knows it (guards
   * sharpen it) is not that one's, and an id or lane past the group (or a
   * short sub-group) reads what a target leaves there (PTX: a stale
   * slot): not trusted */
  if (kind == XPJ_COLL_BROADCAST || kind == XPJ_COLL_SHUFFLE ||
      kind == XPJ_COLL_SHUFFLE_XOR)
    return unknown;
  /* a scan or a reduction of 1 .. n values (0 .. n - 1 for an exclusive
   * scan, whose first work-item gets the operation's identity) */
  bool excl = kind == XPJ_COLL_SCAN_EXCL;
  int64_t most = excl ? n - 1 : n, least = excl ? 0 : 1;
  switch ((xpj_group_op)in->order) {
  case XPJ_GOP_ADD: {
    iv lo_n = corners(mk(x.lo, x.lo, true), mk(least, most, true), '*');
    iv hi_n = corners(mk(x.hi, x.hi, true), mk(least, most, true), '*');
    return mk(lo_n.lo, hi_n.hi, true);
  }
  case XPJ_GOP_MIN: return excl ? mk(x.lo, unknown.hi, true) : x;
  case XPJ_GOP_MAX: return excl ? mk(unknown.lo, x.hi, true) : x;
  case XPJ_GOP_AND:
    return x.lo >= 0 && !excl ? mk(0, x.hi, true) : unknown;
  case XPJ_GOP_OR:
  case XPJ_GOP_XOR:
    if (x.lo >= 0) {
      int b = bitlen(x.hi);
      return mk(0, b >= 62 ? INF : ((int64_t)1 << b) - 1, true);
    }
    return unknown;
  default: return unknown; /* products */
  }
}

/* Whether fn or a function it calls has an instruction `op` (WI: a
 * work-item query; INDEX: an index into a static array), memoised in
 * memo (the language has no recursion; a cycle counts as yes). */
static bool calls_have(const xpj_module *m, uint32_t fi, uint8_t *memo, int op) {
  if (fi >= m->nfuncs)
    return true;
  if (memo[fi])
    return memo[fi] != 1;
  memo[fi] = 3; /* in progress */
  const xpj_func *fn = m->funcs[fi];
  bool yes = false;
  for (uint32_t v = 1; v < fn->ninsts && !yes; v++) {
    const xpj_inst *in = &fn->insts[v];
    if (in->op == op && op == XPJ_OP_WI)
      yes = true;
    else if (in->op == op && op == XPJ_OP_INDEX)
      yes = fn->insts[xpj_inst_args(fn, in)[0]].op == XPJ_OP_ARRAY;
    else if (in->op == XPJ_OP_CALL)
      yes = calls_have(m, in->imm.callee, memo, op);
  }
  memo[fi] = yes ? 2 : 1;
  return yes;
}

/* Whether a pointer points into a global view (its values do not depend
 * on the work-group shape); anything else (a static array: a local tile
 * may hold local ids) is taken to depend on it. */
static bool points_to_view(const fctx *c, xpj_val ptr) {
  const xpj_inst *in = inst(c, ptr);
  return in->op == XPJ_OP_INDEX &&
         xpj_typeinfo_of(c->m, inst(c, args(c, in)[0])->type)->kind ==
             XPJ_TK_VIEW;
}

/* ---- judging an index ----------------------------------------------- */

static void judge(fctx *c, const env *e, const xpj_inst *in) {
  const uint32_t *a = args(c, in);
  const xpj_inst *arr = inst(c, a[0]);
  if (arr->op != XPJ_OP_ARRAY)
    return;
  const xpj_typeinfo *ti = xpj_typeinfo_of(c->m, arr->type);
  unsigned nidx = in->nargs - 1;
  for (unsigned j = 0; j < nidx; j++) {
    iv x = opnd(c, e, a[1 + j]);
    if (!x.dep && !e->ctl)
      continue;
    int64_t extent = 1;
    if (nidx == (unsigned)ti->rank)
      extent = ti->dims[j];
    else
      for (int d = 0; d < ti->rank; d++)
        extent = sat((__int128)extent * ti->dims[d]);
    c->out->shape_indices++; /* counted where unreachable too */
    if (e->dead || !c->out->fits || (x.lo >= 0 && x.hi < extent))
      continue;
    xpj_fit *o = c->out;
    o->fits = 0;
    const char *name = xpj_inst_name(c->f, arr);
    snprintf(o->array, sizeof o->array, "%s", name ? name : "?");
    o->index = j;
    o->lo = x.lo;
    o->hi = x.hi;
    o->extent = extent;
    o->loc = in->loc;
  }
}

/* ---- the walk ------------------------------------------------------- */

static void walk(fctx *c, uint32_t b, env *e);

static void store(fctx *c, env *e, xpj_val var, iv v) {
  slot *sv = &c->s[var];
  v.dep |= e->ctl; /* `if lid >= 4 { slot = 100; }` */
  sv->ver++;
  if (c->narrow) {
    sv->acc = sv->acc_set ? hull(sv->acc, v) : v;
    sv->acc_set = true;
  } else if (!sv->var_set) {
    sv->var_set = true;
    sv->var = v;
    c->changed = true;
  } else {
    iv h = hull(sv->var, v);
    if (h.lo != sv->var.lo || h.hi != sv->var.hi || h.dep != sv->var.dep) {
      if (c->round >= WIDEN_AFTER) { /* widen: to 0, then to infinity */
        if (h.lo < sv->var.lo)
          h.lo = sv->var.lo >= 0 && h.lo >= 0 ? 0 : -INF;
        if (h.hi > sv->var.hi)
          h.hi = INF;
      }
      sv->var = h;
      c->changed = true;
    }
  }
  env_drop(e, var);
  env_set(e, var, v);
}

/* A cast from integer type a to b that keeps every value (same
 * signedness, at least as wide; bool to anything). */
static bool widens(const fctx *c, xpj_type a, xpj_type b) {
  int sa = xpj_type_scalar_of(c->m, a), sb = xpj_type_scalar_of(c->m, b);
  bool ua = sa == XPJ_BOOL || (sa >= XPJ_U8 && sa <= XPJ_U64);
  bool ub = sb >= XPJ_U8 && sb <= XPJ_U64;
  return sa == XPJ_BOOL ||
         (ua == ub && xpj_scalar_bits((xpj_scalar)sb) >=
                          xpj_scalar_bits((xpj_scalar)sa));
}

static iv load(fctx *c, const env *e, const xpj_inst *in) {
  xpj_val p = args(c, in)[0];
  if (inst(c, p)->op == XPJ_OP_VAR) {
    int i = env_find(e, p);
    if (i >= 0)
      return e->e[i].v;
    return c->s[p].var_set ? c->s[p].var : type_range(c, in->type, false);
  }
  return type_range(c, in->type, !points_to_view(c, p));
}

static xpj_status analyse(fctx *c);

/* What a call returns: the callee analysed with its arguments' intervals
 * (a few calls deep; the language has no recursion). */
static iv call(fctx *c, const env *e, const xpj_inst *in) {
  const uint32_t *a = args(c, in);
  iv pv[XPJ_MAX_PARAMS];
  bool dep = e->ctl;
  for (unsigned i = in->ntargs; i < in->nargs && i - in->ntargs < XPJ_MAX_PARAMS; i++)
    dep |= (pv[i - in->ntargs] = opnd(c, e, a[i])).dep;
  uint32_t fi = in->imm.callee;
  iv r = type_range(c, in->type,
                    dep || calls_have(c->m, fi, c->fn->wi, XPJ_OP_WI));
  if (fi < c->m->nfuncs && c->depth < 4 && c->fn->budget) {
    c->fn->budget--;
    fctx sub = {.f = c->m->funcs[fi], .m = c->m, .params = pv,
                .depth = c->depth + 1, .want_judge = c->judge, .out = c->out,
                .fn = c->fn};
    memcpy(sub.L, c->L, sizeof sub.L);
    memcpy(sub.G, c->G, sizeof sub.G);
    xpj_status st = analyse(&sub);
    c->nomem |= st == XPJ_ERR_NOMEM;
    if (st == XPJ_OK && !sub.changed) {
      iv ret = fit_type(c, sub.ret, in->type);
      if (!empty(ret))
        r = ret;
      r.dep |= dep;
      return r;
    }
  }
  /* not analysed (too deep, too many calls, no fixed point): its static
   * arrays cannot be judged, so the geometry is not proved safe */
  if (c->judge && calls_have(c->m, fi, c->fn->arrays, XPJ_OP_INDEX)) {
    c->out->shape_indices++;
    if (c->out->fits && !e->dead) {
      c->out->fits = 0;
      snprintf(c->out->array, sizeof c->out->array, "?");
      c->out->loc = in->loc;
    }
  }
  return r;
}

static void eval(fctx *c, env *e, xpj_val v) {
  const xpj_inst *in = inst(c, v);
  const uint32_t *a = args(c, in);
  iv r = type_range(c, in->type, false);
  switch ((xpj_op)in->op) {
  case XPJ_OP_CONST:
    if (is_int(c, in->type) && !inf(in->imm.i))
      r = mk(in->imm.i, in->imm.i, false); /* else: unknown, as 64-bit */
    break;
  case XPJ_OP_BINOP:
    if (is_int(c, inst(c, a[0])->type)) {
      r = binop(c, in, opnd(c, e, a[0]), opnd(c, e, a[1]));
      int64_t lo, hi;
      if (in->aux == XPJ_SUB &&
          fact_get(e, base_key(c, a[0]), base_key(c, a[1]), &lo, &hi))
        r = meet(r, mk(lo, hi, false));
    } else
      r = type_range(c, in->type, opnd(c, e, a[0]).dep || opnd(c, e, a[1]).dep);
    break;
  case XPJ_OP_UNOP:
    r = is_int(c, in->type) ? unop(c, in, opnd(c, e, a[0]))
                            : type_range(c, in->type, opnd(c, e, a[0]).dep);
    break;
  case XPJ_OP_CAST: {
    iv x = opnd(c, e, a[0]);
    if (xpj_type_scalar_of(c->m, in->type) == XPJ_BOOL)
      r = mk(0, 1, x.dep);
    else if (is_int(c, in->type) && is_int(c, inst(c, a[0])->type) &&
             ((!inf(x.lo) && !inf(x.hi)) ||
              widens(c, inst(c, a[0])->type, in->type)))
      r = x; /* fit_type below: the whole type when it does not fit */
    else /* floats; u64 -> i64 of [0, inf) wraps */
      r = type_range(c, in->type, x.dep);
    break;
  }
  case XPJ_OP_LOAD:
    r = load(c, e, in);
    if (inst(c, a[0])->op == XPJ_OP_VAR)
      c->s[v].lver = c->s[a[0]].ver;
    break;
  case XPJ_OP_ATOMIC:
  case XPJ_OP_CMPXCHG:
  case XPJ_OP_ALOAD: r = type_range(c, in->type, !points_to_view(c, a[0])); break;
  case XPJ_OP_STORE:
    if (inst(c, a[0])->op == XPJ_OP_VAR)
      store(c, e, a[0], fit_type(c, opnd(c, e, a[1]), inst(c, a[1])->type));
    break;
  case XPJ_OP_INDEX:
    if (c->judge)
      judge(c, e, in);
    break;
  case XPJ_OP_SHAPE:
  case XPJ_OP_SIZE:
  case XPJ_OP_NDIM: r = mk(0, INF, false); break;
  case XPJ_OP_WI: r = wi_range(c, e, in); break;
  case XPJ_OP_MATH: r = math(c, e, in); break;
  case XPJ_OP_GROUP: r = group_range(c, e, in); break;
  case XPJ_OP_CALL: r = call(c, e, in); break;
  case XPJ_OP_PARAM:
    if (c->params && in->aux < XPJ_MAX_PARAMS)
      r = c->params[in->aux];
    break;
  default: break;
  }
  c->s[v].val = fit_type(c, r, in->type);
}

/* What cond having the value pol tells about the values it compares. */
static void refine(fctx *c, env *e, xpj_val cond, bool pol, unsigned depth);

/* The operand a bound on x passes to, and the bound it gets, when x is a
 * cast that did not wrap or y + k, y - k, k - y, y * k, y << k (k > 0) that
 * did not overflow; false otherwise. */
static bool through(fctx *c, env *e, const xpj_inst *in, iv now, xpj_val *y,
                    iv *yb) {
  const uint32_t *a = args(c, in);
  if (in->op == XPJ_OP_CAST) {
    if (!is_int(c, inst(c, a[0])->type) ||
        xpj_type_scalar_of(c->m, in->type) == XPJ_BOOL)
      return false;
    iv src = opnd(c, e, a[0]), t = type_range(c, in->type, false);
    *y = a[0];
    *yb = now;
    return widens(c, inst(c, a[0])->type, in->type) ||
           (!inf(src.lo) && !inf(src.hi) && src.lo >= t.lo && src.hi <= t.hi);
  }
  if (in->op != XPJ_OP_BINOP || !is_int(c, in->type))
    return false;
  iv l = opnd(c, e, a[0]), r = opnd(c, e, a[1]);
  bool kl = l.lo == l.hi, kr = r.lo == r.hi;
  if (kl == kr || empty(l) || empty(r))
    return false;
  iv fwd = binop(c, in, l, r), t = type_range(c, in->type, false);
  if (fwd.lo < t.lo || fwd.hi > t.hi)
    return false; /* it may have wrapped (64-bit values are taken not to:
                     their intervals saturate at +-2^62) */
  int64_t k = kr ? r.lo : l.lo;
  if (inf(k))
    return false;
  *y = kr ? a[0] : a[1];
  *yb = mk(-INF, INF, now.dep);
  switch ((xpj_binop)in->aux) {
  case XPJ_ADD:
    yb->lo = add_b(now.lo, neg_b(k));
    yb->hi = add_b(now.hi, neg_b(k));
    break;
  case XPJ_SUB:
    yb->lo = kr ? add_b(now.lo, k) : add_b(k, neg_b(now.hi));
    yb->hi = kr ? add_b(now.hi, k) : add_b(k, neg_b(now.lo));
    break;
  case XPJ_SHL:
    if (!kr || k < 0 || k > 62)
      return false;
    k = (int64_t)1 << k;
    /* fall through */
  case XPJ_MUL:
    if (k <= 0)
      return false;
    /* y * k in [lo, hi]  =>  y in [ceil(lo / k), floor(hi / k)] */
    yb->lo = now.lo <= -INF ? -INF : now.lo / k + (now.lo % k > 0);
    yb->hi = now.hi >= INF ? INF : now.hi / k - (now.hi % k < 0);
    break;
  default: return false;
  }
  return true;
}

static void refine_key(fctx *c, env *e, xpj_val x, iv bound) {
  /* the value, the values it was computed from by a cast or a constant
   * offset or factor, and the variables they were loaded from all learn
   * the bound: `p * 2 <= n` bounds p */
  for (unsigned n = 0; x && n < 8; n++) {
    const xpj_inst *in = inst(c, x);
    iv now = meet(opnd(c, e, x), bound);
    env_set(e, own_key(c, x), now);
    xpj_val var = fresh_var(c, x);
    if (var) {
      int i = env_find(e, var);
      iv vcur = i >= 0 ? e->e[i].v : c->s[var].var_set ? c->s[var].var : now;
      env_set(e, var, meet(vcur, bound));
      return;
    }
    if (!through(c, e, in, now, &x, &bound))
      return;
  }
}

static void refine_cmp(fctx *c, env *e, const xpj_inst *in, bool pol) {
  const uint32_t *a = args(c, in);
  if (!is_int(c, inst(c, a[0])->type))
    return;
  xpj_binop op = (xpj_binop)in->aux;
  if (!pol) {
    static const xpj_binop neg[] = {
        [XPJ_EQ] = XPJ_NE, [XPJ_NE] = XPJ_EQ, [XPJ_LT] = XPJ_GE,
        [XPJ_LE] = XPJ_GT, [XPJ_GT] = XPJ_LE, [XPJ_GE] = XPJ_LT};
    op = neg[op];
  }
  iv x = opnd(c, e, a[0]), y = opnd(c, e, a[1]);
  if (empty(x) || empty(y))
    return;
  int s = xpj_type_scalar_of(c->m, inst(c, a[0])->type);
  if (s >= XPJ_U8 && s <= XPJ_U64 && (x.lo < 0 || y.lo < 0))
    return; /* unsigned order differs from the intervals' */
  bool dep = x.dep || y.dep;
  if (x.lo != x.hi && y.lo != y.hi) { /* x - y, for `lid - off` */
    int64_t lo = -INF, hi = INF;
    if (op == XPJ_LT || op == XPJ_LE || op == XPJ_EQ)
      hi = op == XPJ_LT ? -1 : 0;
    if (op == XPJ_GT || op == XPJ_GE || op == XPJ_EQ)
      lo = op == XPJ_GT ? 1 : 0;
    if (op != XPJ_NE)
      fact_add(e, base_key(c, a[0]), base_key(c, a[1]), lo, hi);
  }
  for (int side = 0; side < 2; side++) {
    iv o = side ? x : y; /* the other operand */
    xpj_binop sop = op;
    if (side) { /* y op x  ==  x op' y */
      static const xpj_binop swap[] = {
          [XPJ_EQ] = XPJ_EQ, [XPJ_NE] = XPJ_NE, [XPJ_LT] = XPJ_GT,
          [XPJ_LE] = XPJ_GE, [XPJ_GT] = XPJ_LT, [XPJ_GE] = XPJ_LE};
      sop = swap[op];
    }
    iv self = side ? y : x, bound = mk(-INF, INF, dep);
    switch (sop) {
    case XPJ_LT: bound.hi = add_b(o.hi, -1); break;
    case XPJ_LE: bound.hi = o.hi; break;
    case XPJ_GT: bound.lo = add_b(o.lo, 1); break;
    case XPJ_GE: bound.lo = o.lo; break;
    case XPJ_EQ: bound = mk(o.lo, o.hi, dep); break;
    case XPJ_NE:
      if (o.lo == o.hi && self.lo == o.lo)
        bound.lo = add_b(self.lo, 1);
      else if (o.lo == o.hi && self.hi == o.lo)
        bound.hi = add_b(self.hi, -1);
      else
        continue;
      break;
    default: return;
    }
    refine_key(c, e, a[side], bound);
  }
}

/* The value a branch of an if yields (0 when it does not end in a yield). */
static xpj_val yielded(const fctx *c, uint32_t b) {
  const xpj_blockdata *bd = &c->f->blocks[b];
  if (!bd->n)
    return 0;
  const xpj_inst *last = inst(c, bd->ids[bd->n - 1]);
  return last->op == XPJ_OP_YIELD ? args(c, last)[0] : 0;
}

static bool is_const(const fctx *c, xpj_val v, int64_t k) {
  const xpj_inst *in = inst(c, v);
  return in->op == XPJ_OP_CONST && in->imm.i == k;
}

static void refine(fctx *c, env *e, xpj_val cond, bool pol, unsigned depth) {
  const xpj_inst *in = inst(c, cond);
  if (depth > 32)
    return;
  if (in->op == XPJ_OP_UNOP && in->aux == XPJ_LNOT) {
    refine(c, e, args(c, in)[0], !pol, depth + 1);
  } else if (in->op == XPJ_OP_BINOP && in->aux >= XPJ_EQ &&
             in->aux <= XPJ_GE) {
    refine_cmp(c, e, in, pol);
  } else if (in->op == XPJ_OP_IF) { /* a && b, a || b */
    xpj_val t = yielded(c, in->blk[0]), f = yielded(c, in->blk[1]);
    if (!t || !f)
      return;
    if (pol && is_const(c, f, 0)) { /* a && b true: both are */
      refine(c, e, args(c, in)[0], true, depth + 1);
      refine(c, e, t, true, depth + 1);
    } else if (!pol && is_const(c, t, 1)) { /* a || b false: neither is */
      refine(c, e, args(c, in)[0], false, depth + 1);
      refine(c, e, f, false, depth + 1);
    }
  } else if (in->op == XPJ_OP_CONST && (in->imm.i != 0) != pol) {
    e->dead = true;
  }
}

/* Forgets what e knows of the variables stored in block b (and below). */
static void forget_stores(const fctx *c, env *e, uint32_t b) {
  const xpj_blockdata *bd = &c->f->blocks[b];
  for (uint32_t i = 0; i < bd->n; i++) {
    const xpj_inst *in = inst(c, bd->ids[i]);
    if (in->op == XPJ_OP_STORE)
      env_drop(e, args(c, in)[0]);
    for (int k = 0; k < 3; k++)
      if ((in->op == XPJ_OP_IF && k < 2) || in->op == XPJ_OP_LOOP)
        if (in->blk[k])
          forget_stores(c, e, in->blk[k]);
  }
}

static void walk_if(fctx *c, env *e, xpj_val v) {
  const xpj_inst *in = inst(c, v);
  xpj_val cond = args(c, in)[0];
  bool before = e->ctl;
  env *t = push(c, e), *f = push(c, e);
  t->ctl = f->ctl = before || opnd(c, e, cond).dep;
  refine(c, t, cond, true, 0);
  refine(c, f, cond, false, 0);
  c->s[v].val = mk(1, 0, false); /* the hull of what the branches yield */
  walk(c, in->blk[0], t);
  walk(c, in->blk[1], f);
  if (empty(c->s[v].val))
    c->s[v].val = type_range(c, in->type, t->ctl);
  c->s[v].val = fit_type(c, c->s[v].val, in->type);
  /* a branch that ends in a jump (return, break, continue) leaves the
   * rest of the block to the other: `if i >= n { return; }`, and the
   * rest is reached only where the condition says */
  bool both = !t->dead && !f->dead;
  *e = *t;
  env_join(e, f);
  if (both)
    e->ctl = before;
  c->top -= 2;
}

static void walk_loop(fctx *c, env *e, xpj_val v) {
  const xpj_inst *in = inst(c, v);
  for (int k = 0; k < 3; k++)
    forget_stores(c, e, in->blk[k]);
  env *cond = push(c, e);
  walk(c, in->blk[0], cond);
  /* a condition that depends on the group's shape makes what the body
   * and the step store depend on it (the trip count does) */
  bool ctl = cond->ctl || (in->imm.i && opnd(c, cond, (xpj_val)in->imm.i).dep);
  env *body = push(c, cond);
  body->ctl = ctl;
  if (in->imm.i)
    refine(c, body, (xpj_val)in->imm.i, true, 0);
  bool jumped = c->jump_ctl;
  c->jump_ctl = false;
  walk(c, in->blk[1], body);
  /* the step runs after the body or a continue: the condition held, and
   * a break or return under such a condition decided whether it runs */
  bool jc = c->jump_ctl;
  c->jump_ctl = jumped || jc;
  *body = *cond;
  body->ctl = ctl || jc;
  if (in->imm.i)
    refine(c, body, (xpj_val)in->imm.i, true, 0);
  forget_stores(c, body, in->blk[1]);
  walk(c, in->blk[2], body);
  c->top -= 2;
  /* after the loop, e: what no iteration changes; reached only where no
   * return under such a condition was taken */
  e->ctl |= jc;
}

static void walk(fctx *c, uint32_t b, env *e) {
  const xpj_blockdata *bd = &c->f->blocks[b];
  for (uint32_t i = 0; i < bd->n; i++) {
    xpj_val v = bd->ids[i];
    const xpj_inst *in = inst(c, v);
    switch ((xpj_op)in->op) {
    case XPJ_OP_IF: walk_if(c, e, v); break;
    case XPJ_OP_LOOP: walk_loop(c, e, v); break;
    case XPJ_OP_YIELD: {
      xpj_val owner = c->f->blocks[b].parent;
      iv y = opnd(c, e, args(c, in)[0]);
      y.dep |= e->ctl; /* `lid < 4 ? 0 : 100` */
      if (!e->dead)
        c->s[owner].val = hull(c->s[owner].val, y);
      break; /* the if's value: the block after it runs on */
    }
    case XPJ_OP_RETURN:
      if (in->nargs && !e->dead) {
        iv r = opnd(c, e, args(c, in)[0]);
        r.dep |= e->ctl;
        c->ret = hull(c->ret, r);
      }
      /* fall through */
    case XPJ_OP_BREAK:
    case XPJ_OP_CONTINUE:
      c->jump_ctl |= e->ctl && !e->dead;
      e->dead = true;
      break;
    default: eval(c, e, v); break;
    }
  }
}

/* One walk of the function's body. */
static void run(fctx *c) {
  for (uint32_t v = 1; v < c->f->ninsts; v++) {
    c->s[v].ver = 0;
    c->s[v].acc_set = false;
  }
  c->jump_ctl = false;
  c->ret = mk(1, 0, false);
  c->top = 1;
  c->envs[0] = (env){0};
  walk(c, 1, &c->envs[0]);
}

/* Widening overshoots (a counter doubled while p * 2 <= n gets [1, inf]);
 * a few walks that read the hulls and collect what the stores give back
 * shrink them (to [1, n]) while each result stays closed: the hulls S are
 * kept only where what the walk stores from them lies within S. */
static void narrow(fctx *c) {
  uint32_t n = c->f->ninsts;
  for (uint32_t v = 1; v < n; v++)
    c->s[v].best = c->s[v].var;
  for (int k = 0; k < 3; k++) {
    run(c);
    bool closed = true, same = true;
    for (uint32_t v = 1; v < n; v++) {
      const slot *sl = &c->s[v];
      if (!sl->acc_set)
        continue; /* no store reached: keep the hull */
      iv a = sl->acc, h = sl->var;
      if (!sl->var_set || a.lo < h.lo || a.hi > h.hi || (a.dep && !h.dep))
        closed = false;
      if (a.lo != h.lo || a.hi != h.hi || a.dep != h.dep)
        same = false;
    }
    if (!closed)
      break;
    for (uint32_t v = 1; v < n; v++) /* var is closed */
      c->s[v].best = c->s[v].var;
    if (same)
      break;
    for (uint32_t v = 1; v < n; v++)
      if (c->s[v].acc_set)
        c->s[v].var = c->s[v].acc;
  }
  for (uint32_t v = 1; v < n; v++)
    c->s[v].var = c->s[v].best;
}

/* Runs the analysis of c->f: the variables' hulls to a fixed point, then
 * (want_judge) one walk that judges. c->changed is left set when there was
 * no fixed point. */
static xpj_status analyse(fctx *c) {
  const xpj_func *f = c->f;
  /* each level of blocks holds two environments at most */
  unsigned depth = 0;
  for (uint32_t b = 1; b < f->nblocks; b++) {
    unsigned n = 0;
    for (uint32_t p = f->blocks[b].parent; p && n <= f->nblocks; n++)
      p = f->blocks[f->insts[p].in_block].parent;
    depth = n > depth ? n : depth;
  }
  c->nenvs = 2 * depth + 3;
  c->s = calloc(f->ninsts, sizeof *c->s);
  c->envs = calloc(c->nenvs, sizeof *c->envs);
  xpj_status st = XPJ_ERR_NOMEM;
  if (c->s && c->envs) {
    bool converged = false;
    for (c->round = 0; !converged && c->round < MAX_ROUNDS; c->round++) {
      c->changed = false;
      run(c);
      converged = !c->changed;
    }
    c->narrow = true; /* var is final from here on */
    if (converged)
      narrow(c);
    if (converged && c->want_judge)
      c->judge = true;
    run(c); /* judges, and finds what a function returns */
    c->changed = !converged;
    st = c->nomem ? XPJ_ERR_NOMEM : XPJ_OK;
  }
  free(c->s);
  free(c->envs);
  return st;
}

xpj_status xpj_func_local_fit(const xpj_func *f, unsigned ndim,
                              const uint64_t *global, const uint64_t *local,
                              xpj_fit *out) {
  if (!f || !out || !global || !local || ndim > 3)
    return XPJ_ERR_INVALID;
  memset(out, 0, sizeof *out);
  out->fits = 1;
  /* calls: 256 analyses at most in all, four deep (exponential call
   * trees stay bounded); past that a callee's arrays are not judged and
   * the geometry is not proved safe */
  fnfacts fn = {calloc(f->mod->nfuncs + 1, 1), calloc(f->mod->nfuncs + 1, 1),
                256};
  if (!fn.wi || !fn.arrays) {
    free(fn.wi);
    free(fn.arrays);
    return XPJ_ERR_NOMEM;
  }
  fctx c = {.f = f, .m = f->mod, .out = out, .want_judge = true, .fn = &fn};
  for (unsigned d = 0; d < 3; d++) {
    uint64_t g = d < ndim ? global[d] : 1, l = d < ndim ? local[d] : 1;
    c.G[d] = g == 0 ? 1 : g > (uint64_t)INF ? INF : (int64_t)g;
    c.L[d] = l == 0 ? 1 : l > (uint64_t)INF ? INF : (int64_t)l;
  }
  xpj_status st = analyse(&c);
  if (st == XPJ_OK && c.changed) { /* cannot tell: judge it unfit */
    out->fits = 0;
    out->shape_indices++;
    snprintf(out->array, sizeof out->array, "?");
  }
  free(fn.wi);
  free(fn.arrays);
  return st;
}
