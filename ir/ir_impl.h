/*
 * ir_impl.h - the layout of the IR, shared by ir/ and by the code that
 * lowers it (compiler/). Users go through include/xpjit_ir.h only.
 *
 * Layout (after QBE): per function one flat array of instructions, indexed
 * by xpj_val, whose operands live in one flat pool; blocks are lists of
 * instruction ids. Index 0 of each array is a reserved "none" entry.
 */
#ifndef XPJ_IR_IMPL_H
#define XPJ_IR_IMPL_H

#include "xpjit_ir.h"

#include <stdarg.h>
#include <stdbool.h>

/* Opcodes: id, printed name. */
#define XPJ_OP_LIST(X)                                                        \
  X(NOP, "nop")                                                               \
  X(PARAM, "param")       /* aux: param index */                           \
  X(CONST, "const")       /* imm.i or imm.f */                             \
  X(BINOP, "binop")       /* aux: xpj_binop; a0 a1 */                      \
  X(UNOP, "unop")         /* aux: xpj_unop; a0 */                          \
  X(CAST, "cast")         /* a0 */                                         \
  X(VAR, "var")           /* private scalar slot; type: ptr */             \
  X(ARRAY, "array")       /* static local/private array; aux (generic    \
                             kernels): dims sized by const parameters */ \
  X(INDEX, "index")       /* a0 array, a1.. indices; type: ptr */          \
  X(LOAD, "load")         /* a0 ptr */                                     \
  X(STORE, "store")       /* a0 ptr, a1 value */                           \
  X(SHAPE, "shape")       /* a0 array, a1 dim */                           \
  X(STRIDE, "stride")     /* a0 array, a1 dim */                           \
  X(SIZE, "size")         /* a0 array */                                   \
  X(NDIM, "ndim")         /* a0 array (generic rank only) */               \
  X(WI, "wi")             /* aux: xpj_wi; imm.i: dim */                    \
  X(BARRIER, "barrier")   /* aux: fences */                                \
  X(ATOMIC, "atomic")     /* aux: op; a0 ptr, a1 v; order, scope */        \
  X(CMPXCHG, "cmpxchg")   /* a0 ptr, a1 expected, a2 desired */            \
  X(ALOAD, "atomic_load") /* a0 ptr */                                     \
  X(ASTORE, "atomic_store") /* a0 ptr, a1 v */                             \
  X(MATH, "math")         /* aux: xpj_math; args */                        \
  X(CALL, "call")         /* imm.callee; ntargs types then values */       \
  X(IF, "if")             /* a0 cond; blk[0] then, blk[1] else; a value  \
                             when both blocks end in YIELD */              \
  X(YIELD, "yield")       /* a0: the value of the enclosing IF */          \
  X(LOOP, "loop")         /* blk: cond, body, step; imm.i: cond value */   \
  X(BREAK, "break")                                                           \
  X(CONTINUE, "continue")                                                     \
  X(RETURN, "return")     /* a0 value or none */                           \
  X(LIMIT, "limit")       /* aux: xpj_limit of a type parameter */         \
  X(GROUP, "group")       /* aux: xpj_coll, order: xpj_group_op, scope:  \
                             1 sub-group; a0 value, a1 id/lane */         \
  X(CPARAM, "const_param") /* generic kernels only: the value of const    \
                              parameter aux, or (aux XPJ_CPARAM_DERIVED) \
                              an i64 that only specialisation fixes */

typedef enum xpj_op {
#define X(id, name) XPJ_OP_##id,
  XPJ_OP_LIST(X)
#undef X
  XPJ_OP_COUNT
} xpj_op;

extern const char *const xpj_op_names[XPJ_OP_COUNT];

typedef enum xpj_tkind {
  XPJ_TK_SCALAR, /* scalar (or void) */
  XPJ_TK_PARAM,  /* type parameter */
  XPJ_TK_VIEW,   /* global array view with shape and strides */
  XPJ_TK_STATIC, /* static local/private array */
  XPJ_TK_PTR,    /* pointer to an element */
} xpj_tkind;

#define XPJ_TYPE_CHUNK 64

typedef struct xpj_typeinfo {
  uint8_t kind;    /* xpj_tkind */
  uint8_t scalar;  /* XPJ_TK_SCALAR */
  uint8_t space;   /* VIEW/STATIC/PTR */
  uint8_t is_const;
  int8_t rank;     /* VIEW: 1..8 or XPJ_RANK_GENERIC; STATIC: 1..8 */
  uint32_t param;  /* PARAM: index */
  xpj_type elem;   /* VIEW/STATIC/PTR: element type (scalar or param) */
  int64_t dims[XPJ_MAX_RANK]; /* STATIC */
} xpj_typeinfo;

/* A literal of a type parameter's type that a cast wrote (T(1)): when T
 * is bound to bool, or the literal is a float and T an integer type,
 * specialisation converts it as the cast does (docs/language.md 4.3)
 * where another literal of that type would be an error (let x: T = 1
 * with T = bool) */
#define XPJ_CONST_CAST 1

typedef struct xpj_inst {
  uint8_t op;   /* xpj_op */
  uint8_t aux;
  /* atomics; CONST: order is XPJ_CONST_CAST for a literal an explicit
   * cast to a type parameter typed (T(1), T(0.5)) */
  uint8_t order, scope;
  xpj_type type;        /* result type; void for statements */
  uint32_t nargs;
  uint32_t args;        /* offset into func->pool */
  uint32_t blk[3];      /* child blocks of IF and LOOP */
  union {
    int64_t i;
    double f;
    uint32_t callee; /* CALL: function index in module */
    uint32_t name;   /* VAR/ARRAY: string offset in module strings + 1 */
  } imm;
  uint32_t ntargs;   /* CALL */
  uint32_t in_block; /* block that holds this instruction */
  xpj_loc loc;
} xpj_inst;

typedef struct xpj_blockdata {
  uint32_t *ids;
  uint32_t n, cap;
  uint32_t parent; /* instruction owning this block, 0 for the body */
} xpj_blockdata;

typedef struct xpj_paraminfo {
  char *name;
  xpj_type type;
  xpj_val val;
  xpj_loc loc;
} xpj_paraminfo;

struct xpj_func {
  xpj_module *mod;
  uint32_t index;
  char *name;
  xpj_func_kind kind;
  unsigned dims;
  /* nd-range kernels: the local size the kernel requires, per logical
   * dimension ([0, dims)); all 0: none */
  uint64_t reqd_local[3];
  unsigned ntparams;
  char *tparams[XPJ_MAX_TPARAMS];
  /* const parameters (generic kernels parsed from source): name, scalar
   * type and position among all generic parameters (type and const) */
  unsigned ncparams;
  char *cparams[XPJ_MAX_CPARAMS];
  uint8_t cptype[XPJ_MAX_CPARAMS];
  uint8_t cppos[XPJ_MAX_CPARAMS];
  xpj_paraminfo params[XPJ_MAX_PARAMS];
  unsigned nparams;
  xpj_type ret;
  xpj_loc loc;

  xpj_inst *insts;
  uint32_t ninsts, capinsts;
  uint32_t *pool;
  uint32_t npool, cappool;
  xpj_blockdata *blocks;
  uint32_t nblocks, capblocks;
};

typedef struct xpj_file {
  char *name;
  char *text;
  size_t len;
} xpj_file;

struct xpj_module {
  xpj_func **funcs;
  uint32_t nfuncs, capfuncs;
  /* types live in fixed-size chunks that never move, so a typeinfo
   * pointer stays valid while more types are interned */
  xpj_typeinfo *type_chunks[(XPJ_MAX_TYPES + 1) / XPJ_TYPE_CHUNK + 1];
  uint32_t ntypes;
  /* the type last interned under each hash of its typeinfo (0: none); a
   * hit is compared in full, so whatever else adds types (decoding) needs
   * not know of it */
  uint32_t type_cache[64];
  char *strings;
  uint32_t nstrings, capstrings;
  xpj_file *files;
  uint32_t nfiles, capfiles;
  bool oom;
  char errmsg[512];
  char *scratch; /* verify message */
};

/* Allocation goes through these so tests can fail the N-th allocation. */
void *xpj_malloc(size_t n);
void *xpj_calloc(size_t n, size_t size);
void *xpj_realloc(void *p, size_t n);
void xpj_free(void *p);
char *xpj_strdup(const char *s);
/* Test hook: the n-th allocation from now fails (0: never). */
void xpj_alloc_fail_after(unsigned long n);
/* The allocations left before the one xpj_alloc_fail_after makes fail (0:
 * it failed, or none was asked): whether a run met its failure. */
unsigned long xpj_alloc_fail_pending(void);

/* Grows *arr (of element size esize) to hold at least need elements. */
bool xpj_grow(void **arr, uint32_t *cap, uint32_t need, size_t esize);

const xpj_typeinfo *xpj_typeinfo_of(const xpj_module *m, xpj_type t);
xpj_type xpj_type_ptr(xpj_module *m, xpj_space space, xpj_type elem,
                      int is_const);
xpj_type xpj_type_void(xpj_module *m);
/* t with type parameter k replaced by targs[k]. */
xpj_type xpj_type_subst(xpj_module *m, xpj_type t, unsigned ntargs,
                        const xpj_type *targs);
/* The same view or pointer type but read-only. */
xpj_type xpj_type_with_const(xpj_module *m, xpj_type t);
/* Scalar of t, or XPJ_SCALAR_COUNT when t is not a scalar. */
int xpj_type_scalar_of(const xpj_module *m, xpj_type t);
bool xpj_type_is_param(const xpj_module *m, xpj_type t);

/* Float scalars: those with arithmetic (f16, f32, f64), and those with
 * a float's values and literals (also bf16, a storage type). */
static inline bool xpj_scalar_is_float(int s) {
  return s == XPJ_F32 || s == XPJ_F64 || s == XPJ_F16;
}
static inline bool xpj_scalar_float_valued(int s) {
  return xpj_scalar_is_float(s) || s == XPJ_BF16;
}

/* v rounded to nearest even to float scalar s (f64: v itself), whatever
 * the caller's rounding mode; beyond s's range: infinity */
double xpj_float_round(int s, double v);
/* A decimal literal rounded once to float scalar s, given v, the double
 * nearest it, and dir, where the decimal lies beside v: above (> 0), below
 * (< 0) or at it (0). Where v is halfway between two values of s the
 * decimal is not: it goes to the one on its side (language.md 4.4). */
double xpj_float_round_dir(int s, double v, int dir);

/* A CONST's aux: 0 an integer (imm.i), else a float (imm.f); a float of a
 * type parameter's type made from a decimal literal keeps where the decimal
 * lies beside imm.f, rounded to the bound type once (spec.c) */
enum {
  XPJ_CONST_FLOAT = 1, /* imm.f is the value */
  XPJ_CONST_ABOVE = 2, /* the decimal is above imm.f, its nearest double */
  XPJ_CONST_BELOW = 3, /* ... below it */
};
/* The dir of xpj_float_round_dir a float CONST's aux says */
static inline int xpj_const_dir(const xpj_inst *in) {
  return in->aux == XPJ_CONST_ABOVE ? 1 : in->aux == XPJ_CONST_BELOW ? -1 : 0;
}
/* xpj_b_const_float for a decimal literal: v its nearest double, dir as
 * xpj_float_round_dir's (kept in aux where t is a type parameter) */
xpj_val xpj_b_const_float_dir(xpj_func *f, xpj_block b, xpj_type t, double v,
                              int dir, xpj_loc loc);
/* integer v (its bits read as u64 when is_u64) converted to float scalar s
 * as a cast does at run time: rounded once (bf16: through f64, 4.3) */
double xpj_float_of_int(int s, int64_t v, bool is_u64);

static inline const xpj_inst *xpj_inst_of(const xpj_func *f, xpj_val v) {
  return &f->insts[v];
}
static inline const uint32_t *xpj_inst_args(const xpj_func *f,
                                            const xpj_inst *in) {
  return &f->pool[in->args];
}
/* Type name with f's type parameters shown by name. */
size_t xpj_type_str_in(const xpj_func *f, xpj_type t, char *buf, size_t size);
/* Canonical value numbering (inst id -> number + 1, 0: unreached). */
uint32_t *xpj_number_values(const xpj_func *f);
const char *xpj_inst_name(const xpj_func *f, const xpj_inst *in);

/* Const parameters of generic kernels (docs/language.md, 5.3). Only the
 * frontend declares them: a kernel with const parameters is specialised
 * by parsing its source again with them bound (compiler/spec.c), so they
 * are not part of the builder API. */
#define XPJ_CPARAM_DERIVED 255
/* Declares const parameter name of type s (an integer type or bool) at
 * position pos of the generic parameter list; false with a message. */
bool xpj_ir_add_cparam(xpj_func *f, const char *name, xpj_scalar s,
                       unsigned pos);
/* A CPARAM instruction: const parameter index's value (of type t), or
 * with index XPJ_CPARAM_DERIVED an opaque value of type t that depends on
 * const parameters (the size of an array sized by one). */
xpj_val xpj_ir_cparam(xpj_func *f, xpj_block b, unsigned index, xpj_type t,
                      xpj_loc loc);

/* Reports a call-graph error at loc (printf-style message). */
typedef void (*xpj_call_report)(void *ud, xpj_loc loc, const char *fmt, ...);
/* Checks recursion and work-group use through calls from range kernels,
 * and (max_depth > 0) that no function's blocks with those of the chains
 * of calls below it nest deeper than max_depth (the frontend's
 * XPJ_MAX_DEPTH; the verifier asks for none: a module built through the
 * API may nest as deep as XPJ_TRANSFER_MAX_DEPTH); returns the number of
 * errors, each passed to report (may be NULL) but those of running out of
 * memory, which are not reported: the caller's XPJ_ERR_NOMEM. */
unsigned xpj_check_calls(const xpj_module *m, unsigned max_depth,
                         xpj_call_report report, void *ud);

void xpj_set_error(xpj_module *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Calls visit(f, id, ud) for every instruction in block b and its nested
 * blocks, in program order (pre-order). */
void xpj_walk(const xpj_func *f, xpj_block b,
              void (*visit)(const xpj_func *, xpj_val, void *), void *ud);

#endif
