/* args.c - the constructors of views, kernel arguments and launch ranges
 * (include/xpjit.h, "helpers"), exported so that bindings through an FFI
 * can call them, and the sizes of the public structures. */
#include "rt.h"

#include <string.h>

xpj_array xpj_array_view(void *data, xpj_scalar dtype, unsigned ndim,
                         const int64_t *shape, const int64_t *strides,
                         int64_t offset) {
  xpj_array a;
  memset(&a, 0, sizeof a);
  a.data = data;
  a.dtype = dtype;
  a.offset = offset;
  if (ndim > XPJ_MAX_RANK || (ndim && !shape))
    return a; /* ndim 0: refused by every launch of an array parameter */
  a.ndim = ndim;
  /* row-major strides where none are given, in wrapping arithmetic: the
   * shapes may multiply past 2^63 (a broadcast view with strides given;
   * otherwise the launch refuses the strides' extent) */
  uint64_t s = 1;
  for (unsigned d = ndim; d-- > 0;) {
    a.shape[d] = shape[d];
    a.strides[d] = strides ? strides[d] : (int64_t)s;
    s *= (uint64_t)shape[d];
  }
  return a;
}

xpj_array xpj_array_nd(void *data, xpj_scalar dtype, unsigned ndim,
                       const int64_t *shape) {
  return xpj_array_view(data, dtype, ndim, shape, NULL, 0);
}

xpj_array xpj_array_1d(void *data, xpj_scalar dtype, int64_t n) {
  return xpj_array_nd(data, dtype, 1, &n);
}

xpj_array xpj_array_2d(void *data, xpj_scalar dtype, int64_t rows,
                       int64_t cols) {
  int64_t s[2] = {rows, cols};
  return xpj_array_nd(data, dtype, 2, s);
}

static xpj_arg arg_of(xpj_arg_kind kind, xpj_scalar dtype) {
  xpj_arg g;
  memset(&g, 0, sizeof g);
  g.kind = kind;
  g.dtype = dtype;
  return g;
}

xpj_arg xpj_arg_local(uint64_t count) {
  xpj_arg g = arg_of(XPJ_ARG_LOCAL, XPJ_VOID);
  g.v.u = count;
  return g;
}

xpj_arg xpj_arg_array(const xpj_array *a) {
  xpj_arg g = arg_of(XPJ_ARG_ARRAY, XPJ_VOID);
  g.array = a;
  return g;
}

#define ARG_INT(fn, T, dt)                                                    \
  xpj_arg fn(T x) {                                                           \
    xpj_arg g = arg_of(XPJ_ARG_SCALAR, dt);                                   \
    g.v.i = (int64_t)x;                                                       \
    return g;                                                                 \
  }
#define ARG_UINT(fn, T, dt)                                                   \
  xpj_arg fn(T x) {                                                           \
    xpj_arg g = arg_of(XPJ_ARG_SCALAR, dt);                                   \
    g.v.u = (uint64_t)x;                                                      \
    return g;                                                                 \
  }
#define ARG_FLOAT(fn, T, dt)                                                  \
  xpj_arg fn(T x) {                                                           \
    xpj_arg g = arg_of(XPJ_ARG_SCALAR, dt);                                   \
    g.v.f = x;                                                                \
    return g;                                                                 \
  }
ARG_INT(xpj_arg_bool, int, XPJ_BOOL)
ARG_INT(xpj_arg_i8, int8_t, XPJ_I8)
ARG_INT(xpj_arg_i16, int16_t, XPJ_I16)
ARG_INT(xpj_arg_i32, int32_t, XPJ_I32)
ARG_INT(xpj_arg_i64, int64_t, XPJ_I64)
ARG_UINT(xpj_arg_u8, uint8_t, XPJ_U8)
ARG_UINT(xpj_arg_u16, uint16_t, XPJ_U16)
ARG_UINT(xpj_arg_u32, uint32_t, XPJ_U32)
ARG_UINT(xpj_arg_u64, uint64_t, XPJ_U64)
ARG_FLOAT(xpj_arg_f32, float, XPJ_F32)
ARG_FLOAT(xpj_arg_f64, double, XPJ_F64)
ARG_FLOAT(xpj_arg_f16, double, XPJ_F16)
ARG_FLOAT(xpj_arg_bf16, double, XPJ_BF16)

xpj_arg xpj_arg_scalar(xpj_scalar dtype, const void *value) {
  if (!value)
    return arg_of(XPJ_ARG_SCALAR, XPJ_VOID);
  union {
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    float f32;
    double f64;
  } v;
  unsigned bytes = dtype == XPJ_BOOL ? 1 : xpj_scalar_bits(dtype) / 8;
  if (dtype == XPJ_VOID || dtype >= XPJ_SCALAR_COUNT || bytes == 0 ||
      bytes > sizeof v)
    return arg_of(XPJ_ARG_SCALAR, XPJ_VOID);
  memcpy(&v, value, bytes);
  switch (dtype) {
  case XPJ_BOOL: return xpj_arg_bool(v.u8 != 0);
  case XPJ_I8: return xpj_arg_i8(v.i8);
  case XPJ_I16: return xpj_arg_i16(v.i16);
  case XPJ_I32: return xpj_arg_i32(v.i32);
  case XPJ_I64: return xpj_arg_i64(v.i64);
  case XPJ_U8: return xpj_arg_u8(v.u8);
  case XPJ_U16: return xpj_arg_u16(v.u16);
  case XPJ_U32: return xpj_arg_u32(v.u32);
  case XPJ_U64: return xpj_arg_u64(v.u64);
  case XPJ_F32: return xpj_arg_f32(v.f32);
  case XPJ_F64: return xpj_arg_f64(v.f64);
  case XPJ_F16: return xpj_arg_f16(xpj_f16_to_double(v.u16));
  case XPJ_BF16: return xpj_arg_bf16(xpj_bf16_to_double(v.u16));
  default: return arg_of(XPJ_ARG_SCALAR, XPJ_VOID);
  }
}

xpj_range xpj_range_1d(uint64_t n, uint64_t local) {
  uint64_t one = local ? 1u : 0u;
  xpj_range r = {1, {n, 1, 1}, {local, one, one}};
  return r;
}

xpj_range xpj_range_2d(uint64_t n0, uint64_t n1, uint64_t l0, uint64_t l1) {
  uint64_t one = (l0 || l1) ? 1u : 0u;
  xpj_range r = {2, {n0, n1, 1}, {l0, l1, one}};
  return r;
}

xpj_range xpj_range_3d(uint64_t n0, uint64_t n1, uint64_t n2, uint64_t l0,
                       uint64_t l1, uint64_t l2) {
  xpj_range r = {3, {n0, n1, n2}, {l0, l1, l2}};
  return r;
}

size_t xpj_struct_size(const char *name) {
#define S(T) {#T, sizeof(T)}
  static const struct {
    const char *name;
    size_t size;
  } sizes[] = {S(xpj_array),           S(xpj_arg),
               S(xpj_range),           S(xpj_device_info),
               S(xpj_kernel_info),     S(xpj_kernel_arg_info),
               S(xpj_context_desc),    S(xpj_queue_desc),
               S(xpj_compile_opts),    S(xpj_cache_counters),
               S(xpj_cache_stats)};
#undef S
  for (size_t i = 0; name && i < sizeof sizes / sizeof sizes[0]; i++)
    if (!strcmp(name, sizes[i].name))
      return sizes[i].size;
  return 0;
}
