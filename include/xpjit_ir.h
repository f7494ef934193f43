/*
 * xpjit_ir.h - the typed, target-independent kernel IR of xpjit.
 *
 * A module holds kernels and device functions. A function is a tree of
 * blocks (structured control flow: if, loop, break, continue, return) whose
 * instructions are values numbered per function. Types are interned per
 * module and named by small integer ids. The frontend builds IR only through
 * this API; so can any program that wants to build kernels without text.
 *
 * Ownership: a module owns every function, type, block and string in it.
 * xpj_module_destroy(NULL) is a no-op. Strings passed in are copied.
 * Thread safety: a module may be read from several threads at once; it must
 * not be modified concurrently.
 *
 * Errors: builder calls that produce a value return 0 on error (a type error
 * in their operands, or out of memory) and leave a message readable with
 * xpj_module_errmsg(). A 0 operand is "poison": a builder call given one
 * returns 0 without a new message, so one error does not cascade. Running
 * out of memory is sticky: xpj_module_status() then reports XPJ_ERR_NOMEM.
 */
#ifndef XPJIT_IR_H
#define XPJIT_IR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XPJ_VERSION_MAJOR 0
#define XPJ_VERSION_MINOR 1
#define XPJ_VERSION_PATCH 0
#define XPJ_VERSION_STRING "0.1.0"

#define XPJ_MAX_RANK 8    /* largest array rank, fixed or bound as ndim */
#define XPJ_RANK_GENERIC (-1)
#define XPJ_MAX_PARAMS 64 /* parameters of one function */
#define XPJ_MAX_TPARAMS 8 /* type parameters of one function */
#define XPJ_MAX_CPARAMS 8 /* const parameters of one kernel */
#define XPJ_MAX_FUNCS 4096 /* functions in one module */
/* How deep one function's blocks nest, an `else if` chain's arms each a
 * level (an arm is a block inside the one before), plus one per call and
 * the depth of the function called, along any chain of calls: the
 * recursion the passes after parsing take (docs/language.md, "Limits") */
#define XPJ_MAX_DEPTH 1024
#define XPJ_MAX_TYPES 4096 /* distinct types in one module */

typedef enum xpj_status {
  XPJ_OK = 0,
  XPJ_ERR_INVALID = 1,  /* invalid argument or ill-typed IR */
  XPJ_ERR_NOMEM = 2,    /* out of memory */
  XPJ_ERR_NOT_FOUND = 3,/* no such kernel / function */
  XPJ_ERR_SYNTAX = 4,   /* source has errors (see diagnostics) */
  XPJ_ERR_SPECIALIZE = 5,/* specialisation does not fit the kernel */
  XPJ_ERR_IO = 6,       /* file could not be read */
  XPJ_ERR_VERIFY = 7,   /* IR failed verification */
  XPJ_ERR_COMPILE = 8,  /* code generation failed (see the message) */
  XPJ_ERR_UNSUPPORTED = 9,/* the target cannot express the kernel */
  XPJ_ERR_DEVICE = 10,  /* a device, driver or asynchronous command failed */
  XPJ_ERR_CANCELLED = 11,/* a command was cancelled or ran past its time */
  XPJ_ERR_BOUNDS = 12,  /* a checked kernel indexed outside an array
                           (XPJ_CHECK_BOUNDS; the message names it) */
} xpj_status;

const char *xpj_status_name(xpj_status s);

/* Scalar element types. The order is part of the canonical serialization. */
typedef enum xpj_scalar {
  XPJ_VOID = 0,
  XPJ_BOOL,
  XPJ_I8, XPJ_I16, XPJ_I32, XPJ_I64,
  XPJ_U8, XPJ_U16, XPJ_U32, XPJ_U64,
  XPJ_F32, XPJ_F64,
  /* IEEE 754 binary16 (an arithmetic type), and bfloat16 (the top half of
   * an f32: a storage type, converted for arithmetic; docs/language.md
   * 4.1). Both are 2 bytes in memory, their bit patterns. */
  XPJ_F16, XPJ_BF16,
  XPJ_SCALAR_COUNT
} xpj_scalar;

const char *xpj_scalar_name(xpj_scalar s);
/* Parses "f32", "i64", ...; returns XPJ_VOID for an unknown name. */
xpj_scalar xpj_scalar_parse(const char *name);
unsigned xpj_scalar_bits(xpj_scalar s); /* bool: 1 */

/* f16 and bf16 bit patterns from and to double: rounded to nearest even
 * (once, not through f32), overflow to infinity, NaN kept NaN (quiet),
 * subnormals kept; the way back is exact. For filling and reading arrays
 * of these types from the host. */
uint16_t xpj_f16_from_double(double x);
double xpj_f16_to_double(uint16_t h);
uint16_t xpj_bf16_from_double(double x);
double xpj_bf16_to_double(uint16_t h);

/* Memory spaces of arrays and pointers. */
typedef enum xpj_space {
  XPJ_SPACE_PRIVATE = 0,
  XPJ_SPACE_GLOBAL = 1,
  XPJ_SPACE_LOCAL = 2,
} xpj_space;

typedef enum xpj_func_kind {
  XPJ_FUNC_DEVICE = 0,  /* callable device function */
  XPJ_FUNC_RANGE = 1,   /* kernel over a range: no work-groups */
  XPJ_FUNC_NDRANGE = 2, /* kernel over an nd-range: work-groups, local memory */
} xpj_func_kind;

/* Work-item queries. */
#define XPJ_WI_LIST(X)                                                        \
  X(GLOBAL_ID, "global_id", 1, 0)                                             \
  X(GLOBAL_SIZE, "global_size", 1, 0)                                         \
  X(GLOBAL_LINEAR_ID, "global_linear_id", 0, 0)                               \
  X(LOCAL_ID, "local_id", 1, 1)                                               \
  X(LOCAL_SIZE, "local_size", 1, 1)                                           \
  X(GROUP_ID, "group_id", 1, 1)                                               \
  X(NUM_GROUPS, "num_groups", 1, 1)                                           \
  X(LOCAL_LINEAR_ID, "local_linear_id", 0, 1)                                 \
  X(GROUP_LINEAR_ID, "group_linear_id", 0, 1)                                 \
  X(SUB_GROUP_SIZE, "sub_group_size", 0, 1)                                   \
  X(SUB_GROUP_LOCAL_ID, "sub_group_local_id", 0, 1)                           \
  X(SUB_GROUP_ID, "sub_group_id", 0, 1)                                       \
  X(NUM_SUB_GROUPS, "num_sub_groups", 0, 1)

typedef enum xpj_wi {
#define X(id, name, has_dim, needs_group) XPJ_WI_##id,
  XPJ_WI_LIST(X)
#undef X
  XPJ_WI_COUNT
} xpj_wi;

const char *xpj_wi_name(xpj_wi w);
int xpj_wi_needs_dim(xpj_wi w);
int xpj_wi_needs_ndrange(xpj_wi w);

/* Math builtins: name, arity, class. Classes: F float only, I integer only,
 * N any numeric (integer or float), B float in, bool out. */
#define XPJ_MATH_LIST(X)                                                      \
  X(SQRT, "sqrt", 1, F) X(RSQRT, "rsqrt", 1, F) X(CBRT, "cbrt", 1, F)         \
  X(EXP, "exp", 1, F) X(EXP2, "exp2", 1, F) X(EXPM1, "expm1", 1, F)           \
  X(LOG, "log", 1, F) X(LOG2, "log2", 1, F) X(LOG10, "log10", 1, F)           \
  X(LOG1P, "log1p", 1, F) X(POW, "pow", 2, F) X(SIN, "sin", 1, F)             \
  X(COS, "cos", 1, F) X(TAN, "tan", 1, F) X(ASIN, "asin", 1, F)               \
  X(ACOS, "acos", 1, F) X(ATAN, "atan", 1, F) X(ATAN2, "atan2", 2, F)         \
  X(SINH, "sinh", 1, F) X(COSH, "cosh", 1, F) X(TANH, "tanh", 1, F)           \
  X(FABS, "fabs", 1, F) X(FLOOR, "floor", 1, F) X(CEIL, "ceil", 1, F)         \
  X(ROUND, "round", 1, F) X(TRUNC, "trunc", 1, F) X(FMA, "fma", 3, F)         \
  X(FMIN, "fmin", 2, F) X(FMAX, "fmax", 2, F) X(COPYSIGN, "copysign", 2, F)   \
  X(HYPOT, "hypot", 2, F) X(ISNAN, "isnan", 1, B) X(ISINF, "isinf", 1, B)     \
  X(ISFINITE, "isfinite", 1, B) X(MIN, "min", 2, N) X(MAX, "max", 2, N)       \
  X(CLAMP, "clamp", 3, N) X(ABS, "abs", 1, N) X(POPCOUNT, "popcount", 1, I)   \
  X(CLZ, "clz", 1, I) X(CTZ, "ctz", 1, I) X(MUL_HI, "mul_hi", 2, I)           \
  X(ROTL, "rotl", 2, I) X(ROTR, "rotr", 2, I) X(ERF, "erf", 1, F)           \
  X(ERFC, "erfc", 1, F) X(LGAMMA, "lgamma", 1, F) X(TGAMMA, "tgamma", 1, F)

typedef enum xpj_math {
#define X(id, name, arity, cls) XPJ_MATH_##id,
  XPJ_MATH_LIST(X)
#undef X
  XPJ_MATH_COUNT
} xpj_math;

const char *xpj_math_name(xpj_math m);
unsigned xpj_math_arity(xpj_math m);
/* Looks a builtin up by name; returns XPJ_MATH_COUNT when there is none. */
xpj_math xpj_math_lookup(const char *name);

/* Limits of a numeric type, written `max_value(T)`: name, float only.
 * MAX and MIN are the largest and the smallest (most negative) finite
 * values; MIN_POSITIVE the smallest positive normal float; EPSILON the gap
 * between 1 and the next float; INF +infinity; QNAN a quiet NaN. */
#define XPJ_LIMIT_LIST(X)                                                     \
  X(MAX, "max_value", 0) X(MIN, "min_value", 0)                               \
  X(MIN_POSITIVE, "min_positive", 1) X(EPSILON, "epsilon", 1)                 \
  X(INF, "infinity", 1) X(QNAN, "nan", 1)

typedef enum xpj_limit {
#define X(id, name, float_only) XPJ_LIMIT_##id,
  XPJ_LIMIT_LIST(X)
#undef X
  XPJ_LIMIT_COUNT
} xpj_limit;

const char *xpj_limit_name(xpj_limit l);
/* Returns XPJ_LIMIT_COUNT when name is not a limit. */
xpj_limit xpj_limit_lookup(const char *name);

typedef enum xpj_atomic_op {
  XPJ_ATOMIC_ADD, XPJ_ATOMIC_SUB, XPJ_ATOMIC_MIN, XPJ_ATOMIC_MAX,
  XPJ_ATOMIC_AND, XPJ_ATOMIC_OR, XPJ_ATOMIC_XOR, XPJ_ATOMIC_XCHG,
  XPJ_ATOMIC_OP_COUNT
} xpj_atomic_op;

typedef enum xpj_order {
  XPJ_ORDER_RELAXED, XPJ_ORDER_ACQUIRE, XPJ_ORDER_RELEASE, XPJ_ORDER_ACQ_REL,
  XPJ_ORDER_SEQ_CST
} xpj_order;

typedef enum xpj_scope { XPJ_SCOPE_WORK_GROUP, XPJ_SCOPE_DEVICE } xpj_scope;

/* Barrier fence flags. */
#define XPJ_FENCE_LOCAL 1u
#define XPJ_FENCE_GLOBAL 2u

const char *xpj_atomic_op_name(xpj_atomic_op op);
const char *xpj_order_name(xpj_order o);
const char *xpj_scope_name(xpj_scope s);

/* Collectives over the work-group or the sub-group (docs/language.md,
 * "Work-group and sub-group collectives"). REDUCE and the scans combine
 * the values of the work-items in linear id order with an xpj_group_op;
 * BROADCAST gives every work-item the value of one (a linear id in the
 * group, a lane of the sub-group); SHUFFLE (sub-groups) the value of lane
 * id, SHUFFLE_XOR the value of lane (own lane ^ id). */
typedef enum xpj_coll {
  XPJ_COLL_REDUCE, XPJ_COLL_SCAN_INCL, XPJ_COLL_SCAN_EXCL,
  XPJ_COLL_BROADCAST, XPJ_COLL_SHUFFLE, XPJ_COLL_SHUFFLE_XOR,
  XPJ_COLL_COUNT
} xpj_coll;

typedef enum xpj_group_op {
  XPJ_GOP_ADD, XPJ_GOP_MUL, XPJ_GOP_MIN, XPJ_GOP_MAX,
  XPJ_GOP_AND, XPJ_GOP_OR, XPJ_GOP_XOR,
  XPJ_GOP_NONE /* broadcasts and shuffles */
} xpj_group_op;

typedef struct xpj_coll_desc {
  int sub_group;      /* 0: the work-group, 1: the sub-group */
  xpj_coll kind;
  xpj_group_op op;    /* XPJ_GOP_NONE unless a reduction or a scan */
} xpj_coll_desc;

/* Parses a builtin name ("group_reduce_add", "sub_group_shuffle", ...):
 * 1 with *out filled, or 0. */
int xpj_coll_lookup(const char *name, xpj_coll_desc *out);
/* Writes the builtin name of d (snprintf-like). */
size_t xpj_coll_name(const xpj_coll_desc *d, char *buf, size_t size);
/* Whether d takes a second argument (a linear id, a lane, a lane mask). */
int xpj_coll_takes_id(const xpj_coll_desc *d);

/* Binary and unary operators. */
typedef enum xpj_binop {
  XPJ_ADD, XPJ_SUB, XPJ_MUL, XPJ_DIV, XPJ_REM, XPJ_AND, XPJ_OR, XPJ_XOR,
  XPJ_SHL, XPJ_SHR, XPJ_EQ, XPJ_NE, XPJ_LT, XPJ_LE, XPJ_GT, XPJ_GE,
  XPJ_BINOP_COUNT
} xpj_binop;

typedef enum xpj_unop { XPJ_NEG, XPJ_NOT, XPJ_LNOT, XPJ_UNOP_COUNT } xpj_unop;

const char *xpj_binop_symbol(xpj_binop op);

/* Handles. Types, values and blocks are small ids; 0 is "none" or error. */
typedef struct xpj_module xpj_module;
typedef struct xpj_func xpj_func;
typedef uint32_t xpj_type;
typedef uint32_t xpj_val;
typedef uint32_t xpj_block;

/* A source position, carried by every instruction for diagnostics. It is not
 * part of the canonical serialization. file is an index from
 * xpj_module_add_file (0: no file). line and col are 1-based; 0 unknown. */
typedef struct xpj_loc {
  uint32_t file, line, col;
} xpj_loc;

/* ---- modules -------------------------------------------------------- */

/* Creates an empty module. On failure *out is NULL. */
xpj_status xpj_module_create(xpj_module **out);
void xpj_module_destroy(xpj_module *m);
/* Sticky status: XPJ_ERR_NOMEM after an allocation failed, else XPJ_OK. */
xpj_status xpj_module_status(const xpj_module *m);
/* Message of the last failed builder call; "" if none. Owned by m. */
const char *xpj_module_errmsg(const xpj_module *m);

/* Registers a source file (name and text are copied) so that diagnostics
 * raised later (verification, specialisation) can quote source lines.
 * Returns its index (>= 1), or 0 when out of memory. */
uint32_t xpj_module_add_file(xpj_module *m, const char *name, const char *text,
                             size_t len);
/* Name and text of file index i; NULL for an unknown index. */
const char *xpj_module_file_name(const xpj_module *m, uint32_t i);
const char *xpj_module_file_text(const xpj_module *m, uint32_t i, size_t *len);

unsigned xpj_module_func_count(const xpj_module *m);
xpj_func *xpj_module_func(const xpj_module *m, unsigned i);
/* Finds a function by name; NULL if none. */
xpj_func *xpj_module_find(const xpj_module *m, const char *name);

/* ---- types ---------------------------------------------------------- */

xpj_type xpj_type_scalar(xpj_module *m, xpj_scalar s);
/* Type parameter number index (0-based) of the function being built. */
xpj_type xpj_type_param(xpj_module *m, unsigned index);
/* An array parameter in global memory: a view with shape and strides.
 * rank is 1..XPJ_MAX_RANK or XPJ_RANK_GENERIC (bound to ndim). */
xpj_type xpj_type_view(xpj_module *m, xpj_type elem, int rank, int is_const);
/* A 1-D local array parameter (`t: local T[]`): local memory of a size the
 * launch gives (xpj_arg_local), a view of rank 1 in XPJ_SPACE_LOCAL. */
xpj_type xpj_type_local_view(xpj_module *m, xpj_type elem);
/* A statically sized, contiguous array in local or private memory. */
xpj_type xpj_type_static(xpj_module *m, xpj_space space, xpj_type elem,
                         unsigned rank, const int64_t *dims);

/* Type introspection, for tools and the runtime. */
typedef enum xpj_type_kind {
  XPJ_TYPE_SCALAR = 0, /* a scalar, or void */
  XPJ_TYPE_PARAM = 1,  /* a type parameter (unspecialised) */
  XPJ_TYPE_VIEW = 2,   /* a global array view */
  XPJ_TYPE_STATIC = 3, /* a static local or private array */
  XPJ_TYPE_PTR = 4,    /* a pointer to an element */
} xpj_type_kind;
/* Kind of t; XPJ_TYPE_SCALAR with scalar XPJ_VOID for an invalid id. */
xpj_type_kind xpj_type_kind_of(const xpj_module *m, xpj_type t);
/* The scalar of a scalar type, or the element scalar of an array or
 * pointer; XPJ_VOID when it is a type parameter or t is invalid. */
xpj_scalar xpj_type_elem_scalar(const xpj_module *m, xpj_type t);
/* The index of the type parameter t is, or that the elements of array or
 * pointer t are (`T` of `global T[*]`: for a binding that infers dtypes
 * from its arguments); -1 when t is not generic or invalid. */
int xpj_type_param_index(const xpj_module *m, xpj_type t);
/* Rank of a view or static array (XPJ_RANK_GENERIC for [*]); 0 otherwise. */
int xpj_type_rank(const xpj_module *m, xpj_type t);
/* True for a read-only view. */
int xpj_type_is_const(const xpj_module *m, xpj_type t);
/* The memory space of a view, static array or pointer (XPJ_SPACE_LOCAL
 * for a local array parameter); XPJ_SPACE_PRIVATE for anything else. */
xpj_space xpj_type_space(const xpj_module *m, xpj_type t);

/* Writes a readable name for t ("f32", "global const T[*]", ...). Returns
 * the length it needed, like snprintf. */
size_t xpj_type_str(const xpj_module *m, xpj_type t, char *buf, size_t size);

/* ---- functions ------------------------------------------------------ */

/* Creates a function. dims: for range kernels 0 (1..3 chosen at launch) or
 * 1..3; for ndrange kernels 1..3; for device functions 0. tparams names the
 * type parameters (may be NULL when ntparams is 0). Returns NULL on error
 * (duplicate name, bad dims, out of memory). */
xpj_func *xpj_func_create(xpj_module *m, const char *name, xpj_func_kind kind,
                          unsigned dims, unsigned ntparams,
                          const char *const *tparams, xpj_loc loc);
/* Adds a parameter (before any instruction is built). Scalars and views
 * only. Returns the value that names it in the body, or 0. */
xpj_val xpj_func_add_param(xpj_func *f, const char *name, xpj_type type,
                           xpj_loc loc);
/* Sets the return type (device functions; void by default). */
xpj_status xpj_func_set_return(xpj_func *f, xpj_type type);

const char *xpj_func_name(const xpj_func *f);
xpj_func_kind xpj_func_kind_of(const xpj_func *f);
unsigned xpj_func_dims(const xpj_func *f);
/* The work-group size an nd-range kernel requires (`ndrange(2) local(16,
 * 16)`, docs/language.md): one size per declared dimension, in the
 * kernel's (logical) order, each >= 1, their product at most
 * XPJ_MAX_REQD_LOCAL. XPJ_ERR_INVALID for other functions or sizes. */
#define XPJ_MAX_REQD_LOCAL 4096
xpj_status xpj_func_set_reqd_local(xpj_func *f, unsigned n,
                                   const uint64_t *size);
/* Writes the required size to out[0..dims) and returns dims, or returns 0
 * (and leaves out alone) when the kernel requires none. */
unsigned xpj_func_reqd_local(const xpj_func *f, uint64_t out[3]);
/* The rank the kernel's ids are laid out for (docs/abi.md, "Dimension
 * order"): its declared dimensions, else 1 + the highest dimension it (or a
 * function it calls) reads with global_id, global_size, ... (1 if none).
 * Dimension id_rank - 1 varies fastest. */
unsigned xpj_func_id_rank(const xpj_func *f);
unsigned xpj_func_param_count(const xpj_func *f);
const char *xpj_func_param_name(const xpj_func *f, unsigned i);
xpj_type xpj_func_param_type(const xpj_func *f, unsigned i);
xpj_val xpj_func_param_val(const xpj_func *f, unsigned i);
xpj_type xpj_func_return(const xpj_func *f);
unsigned xpj_func_tparam_count(const xpj_func *f);
const char *xpj_func_tparam_name(const xpj_func *f, unsigned i);
/* Const parameters (`kernel k<T, const N: i64>`, docs/language.md 5.3):
 * their number, and the name and type (an integer type or bool) of const
 * parameter i. Only kernels parsed from source have them (the builder
 * cannot declare them); xpj_specialize binds them to values. */
unsigned xpj_func_const_count(const xpj_func *f);
const char *xpj_func_const_name(const xpj_func *f, unsigned i);
xpj_scalar xpj_func_const_type(const xpj_func *f, unsigned i);
/* Type and const parameters together, in the order they are declared:
 * their number, and the one at position pos (0-based): its index among the
 * type parameters (*is_const = 0) or among the const parameters
 * (*is_const = 1); -1 when pos is out of range. is_const may be NULL. */
unsigned xpj_func_generic_count(const xpj_func *f);
int xpj_func_generic_at(const xpj_func *f, unsigned pos, int *is_const);
/* True when some parameter has generic rank (the kernel needs an ndim). */
int xpj_func_has_generic_rank(const xpj_func *f);
xpj_block xpj_func_body(const xpj_func *f);
xpj_module *xpj_func_module(const xpj_func *f);
xpj_type xpj_val_type(const xpj_func *f, xpj_val v);
/* True when v is a constant; its value is stored through *i or *d (either
 * may be NULL) according to its type. */
int xpj_val_const(const xpj_func *f, xpj_val v, int64_t *i, double *d);

/* ---- instructions --------------------------------------------------- */
/* Every builder call appends to block b of f and returns the new value (or
 * 0). Statements (store, barrier, ...) return a nonzero id on success too. */

xpj_val xpj_b_const_int(xpj_func *f, xpj_block b, xpj_type t, int64_t v,
                        xpj_loc loc);
xpj_val xpj_b_const_float(xpj_func *f, xpj_block b, xpj_type t, double v,
                          xpj_loc loc);
xpj_val xpj_b_binop(xpj_func *f, xpj_block b, xpj_binop op, xpj_val l,
                    xpj_val r, xpj_loc loc);
xpj_val xpj_b_unop(xpj_func *f, xpj_block b, xpj_unop op, xpj_val v,
                   xpj_loc loc);
xpj_val xpj_b_cast(xpj_func *f, xpj_block b, xpj_type to, xpj_val v,
                   xpj_loc loc);

/* A mutable private scalar variable; returns a pointer to it. name may be
 * NULL (it is kept for printing only). */
xpj_val xpj_b_var(xpj_func *f, xpj_block b, xpj_type t, const char *name,
                  xpj_loc loc);
/* A static local or private array (type from xpj_type_static); returns the
 * array. Local arrays belong to the body block of an ndrange kernel. */
xpj_val xpj_b_array(xpj_func *f, xpj_block b, xpj_type t, const char *name,
                    xpj_loc loc);
/* Pointer to an element: nidx indices, either one per dimension or one flat
 * row-major index. */
xpj_val xpj_b_index(xpj_func *f, xpj_block b, xpj_val array, unsigned nidx,
                    const xpj_val *idx, xpj_loc loc);
xpj_val xpj_b_load(xpj_func *f, xpj_block b, xpj_val ptr, xpj_loc loc);
xpj_val xpj_b_store(xpj_func *f, xpj_block b, xpj_val ptr, xpj_val v,
                    xpj_loc loc);
/* shape and stride of dimension dim (a constant or i64 value) as i64. */
xpj_val xpj_b_shape(xpj_func *f, xpj_block b, xpj_val array, xpj_val dim,
                    xpj_loc loc);
xpj_val xpj_b_stride(xpj_func *f, xpj_block b, xpj_val array, xpj_val dim,
                     xpj_loc loc);
xpj_val xpj_b_size(xpj_func *f, xpj_block b, xpj_val array, xpj_loc loc);
xpj_val xpj_b_ndim(xpj_func *f, xpj_block b, xpj_val array, xpj_loc loc);

xpj_val xpj_b_wi(xpj_func *f, xpj_block b, xpj_wi w, unsigned dim,
                 xpj_loc loc);
xpj_val xpj_b_barrier(xpj_func *f, xpj_block b, unsigned fences, xpj_loc loc);
xpj_val xpj_b_atomic(xpj_func *f, xpj_block b, xpj_atomic_op op, xpj_val ptr,
                     xpj_val v, xpj_order order, xpj_scope scope, xpj_loc loc);
xpj_val xpj_b_cmpxchg(xpj_func *f, xpj_block b, xpj_val ptr, xpj_val expected,
                      xpj_val desired, xpj_order order, xpj_scope scope,
                      xpj_loc loc);
xpj_val xpj_b_atomic_load(xpj_func *f, xpj_block b, xpj_val ptr,
                          xpj_order order, xpj_scope scope, xpj_loc loc);
xpj_val xpj_b_atomic_store(xpj_func *f, xpj_block b, xpj_val ptr, xpj_val v,
                           xpj_order order, xpj_scope scope, xpj_loc loc);
xpj_val xpj_b_math(xpj_func *f, xpj_block b, xpj_math fn, unsigned nargs,
                   const xpj_val *args, xpj_loc loc);
/* A collective d of value x (id: the second argument where d takes one,
 * an integer; else 0). Work-group and sub-group collectives need an
 * nd-range kernel (or a function called from one) and must be reached by
 * every work-item of the group (sub-group). The result has x's type. */
xpj_val xpj_b_group(xpj_func *f, xpj_block b, const xpj_coll_desc *d,
                    xpj_val x, xpj_val id, xpj_loc loc);
/* The limit `which` of numeric type t: a constant when t is a scalar type,
 * an instruction bound at specialisation when t is a type parameter. */
xpj_val xpj_b_limit(xpj_func *f, xpj_block b, xpj_limit which, xpj_type t,
                    xpj_loc loc);
/* Calls device function callee with explicit type arguments (one per
 * callee type parameter) and value arguments. */
xpj_val xpj_b_call(xpj_func *f, xpj_block b, xpj_func *callee,
                   unsigned ntargs, const xpj_type *targs, unsigned nargs,
                   const xpj_val *args, xpj_loc loc);

/* if cond { *then_b } else { *else_b } */
xpj_val xpj_b_if(xpj_func *f, xpj_block b, xpj_val cond, xpj_block *then_b,
                 xpj_block *else_b, xpj_loc loc);
/* Ends a branch of an if with the value the if produces (a conditional
 * expression): the if gets the value's type, and both of its branches must
 * end in a yield of that type. */
xpj_val xpj_b_yield(xpj_func *f, xpj_block b, xpj_val v, xpj_loc loc);
/* A loop: each iteration runs *cond_b, which computes the condition set
 * with xpj_b_loop_cond (none: loop forever), then *body_b, then *step_b.
 * continue jumps to *step_b. */
xpj_val xpj_b_loop(xpj_func *f, xpj_block b, xpj_block *cond_b,
                   xpj_block *body_b, xpj_block *step_b, xpj_loc loc);
xpj_status xpj_b_loop_cond(xpj_func *f, xpj_val loop, xpj_val cond);
xpj_val xpj_b_break(xpj_func *f, xpj_block b, xpj_loc loc);
xpj_val xpj_b_continue(xpj_func *f, xpj_block b, xpj_loc loc);
/* v is 0 for a void return. */
xpj_val xpj_b_return(xpj_func *f, xpj_block b, xpj_val v, xpj_loc loc);

/* ---- whole-module operations --------------------------------------- */

/* Checks structural and type invariants of every function (or of kernel
 * and its callees when kernel is not NULL). On failure returns
 * XPJ_ERR_VERIFY and a message (owned by m, valid until the next call). */
xpj_status xpj_module_verify(xpj_module *m, const char **msg);

/* Writes the readable form of the module to a malloc'd string (*out; free
 * with free()). */
xpj_status xpj_module_print(const xpj_module *m, char **out, size_t *len);

/* Canonical serialization of a specialised kernel and the functions it
 * calls: independent of source positions, comments, whitespace, local
 * names and the order functions were defined in. *out is malloc'd. */
xpj_status xpj_module_serialize(const xpj_module *m, const char *kernel,
                                uint8_t **out, size_t *len);
/* SHA-256 of the canonical serialization. hex gets 64 chars and a NUL. */
xpj_status xpj_module_hash(const xpj_module *m, const char *kernel,
                           uint8_t digest[32], char hex[65]);

/* Whether an nd-range kernel launched over global[0..ndim) in work-groups
 * of local[0..ndim) (logical order) keeps every index into its static
 * (local and private) arrays that depends on the shape of its work-groups
 * (local ids and sizes, group ids and counts) within the array, as far as
 * an interval analysis of its integer values can tell (ir/localfit.c;
 * docs/abi.md, "Default local size"). Indices that do not depend on that
 * shape are not judged: no choice of local size moves them. The runtime
 * uses it to choose a local size that cannot overrun a local array. */
typedef struct xpj_fit {
  unsigned shape_indices; /* indices that depend on the work-group shape */
  int fits;               /* 1 when each of them stays in its array */
  /* when it does not fit, the first index that may leave its array: */
  char array[64];         /* the array's name */
  unsigned index;         /* which of its indices (0-based) */
  int64_t lo, hi;         /* the values it may take */
  int64_t extent;         /* the array's extent there */
  xpj_loc loc;            /* where the index is */
} xpj_fit;
/* XPJ_ERR_INVALID for a bad argument, XPJ_ERR_NOMEM; else XPJ_OK with *out
 * filled (local sizes of 0 count as 1). */
xpj_status xpj_func_local_fit(const xpj_func *f, unsigned ndim,
                              const uint64_t *global, const uint64_t *local,
                              xpj_fit *out);

/* An index instruction of f, as a checked kernel's record names it
 * (xpj_check_record: function and instruction): where it is, what it
 * indexes and how the result is used. */
typedef struct xpj_index_info {
  xpj_loc loc;
  int param;          /* the function's parameter indexed; -1: a static array */
  const char *array;  /* the static array's name ("?" when it has none) or
                         the parameter's; owned by f's module */
  xpj_space space;    /* the array's memory space */
  const char *access; /* "load from", "store to", "atomic on" or
                         "access to" */
  uint32_t unsigned_dims; /* bit d: index d is of an unsigned type (the
                             record's int64 index is then its bits) */
} xpj_index_info;
/* XPJ_ERR_INVALID when inst is not an index instruction of f. */
xpj_status xpj_func_index_info(const xpj_func *f, uint32_t inst,
                               xpj_index_info *out);

/* A specialisation: one scalar type per type parameter of the kernel, the
 * ndim of its generic-rank arrays (0 when it has none), and one value per
 * const parameter. Fields are only appended: an initialiser of the first
 * four binds no const parameters (designated initialisers also keep
 * -Wmissing-field-initializers quiet).
 * Ownership: every array and string belongs to the caller and need only
 * live for the xpj_specialize call; nothing of it is kept. */
typedef struct xpj_spec {
  unsigned ntypes;
  const char *const *names; /* type parameter names, e.g. "T" */
  const xpj_scalar *types;  /* their bindings */
  unsigned ndim;
  unsigned nconsts;
  const char *const *const_names; /* const parameter names, e.g. "TS" */
  /* their values: the integer itself, bool 0 or 1, a u64 as its bit
   * pattern (xpj_const_parse reads them from text) */
  const int64_t *const_values;
} xpj_spec;

#ifdef __cplusplus
}
#endif
#endif
