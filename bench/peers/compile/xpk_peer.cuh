/*
 * xpk_peer.cuh - the little runtime of the CUDA C peers of bench/compile.
 *
 * Every bench/peers/compile/NAME.cu holds, in CUDA C, the kernels of
 * examples/NAME.xpk with the same names and algorithms, so that NVRTC can be
 * timed compiling the same work as xpjit. This header gives them xpjit's
 * kernel ABI and builtins in CUDA terms:
 *   - arrays are views passed as separate scalars, like xpjit's ABI:
 *     pointer, element offset, shape[rank], strides[rank] (PV1..PV4; PVN for
 *     generic rank, whose rank is the macro NDIM, 1..4);
 *   - range kernels take the logical global size in three hidden i64
 *     arguments and skip the work-items past it (RANGE_PARAMS, RANGE_GUARD);
 *   - work-item builtins are 64-bit, as in xpjit (GLOBAL_ID(d), ...);
 *   - atomics take an order and a scope, like xpjit's (CUDA's __nv_atomic_*
 *     builtins); the address-space and type arguments of ATOMIC_* are for
 *     the OpenCL C peers and ignored here;
 *   - min/max/clamp/abs and the integer builtins are overloaded (xk_*).
 * Every kernel is a template, so that NVRTC instantiates only the one named
 * by nvrtcAddNameExpression ("axpy<float>"; "bit_stats<>" for a kernel
 * without type parameters).
 */
#ifndef XPK_PEER_CUH
#define XPK_PEER_CUH

typedef signed char i8;
typedef unsigned char u8;
typedef short i16;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;
typedef float f32;
typedef double f64;

#define XK_DEV static __device__ __forceinline__

/* ---- work-items ---------------------------------------------------- */

XK_DEV i64 xk_tid(int d) {
  return d == 0 ? threadIdx.x : d == 1 ? threadIdx.y : threadIdx.z;
}
XK_DEV i64 xk_ntid(int d) {
  return d == 0 ? blockDim.x : d == 1 ? blockDim.y : blockDim.z;
}
XK_DEV i64 xk_ctaid(int d) {
  return d == 0 ? blockIdx.x : d == 1 ? blockIdx.y : blockIdx.z;
}
XK_DEV i64 xk_nctaid(int d) {
  return d == 0 ? gridDim.x : d == 1 ? gridDim.y : gridDim.z;
}

#define GLOBAL_ID(d) (xk_ctaid(d) * xk_ntid(d) + xk_tid(d))
#define LOCAL_ID(d) xk_tid(d)
#define LOCAL_SIZE(d) xk_ntid(d)
#define GROUP_ID(d) xk_ctaid(d)
#define NUM_GROUPS(d) xk_nctaid(d)
#define XK_LINEAR3(i0, i1, i2, n0, n1) (((i2) * (n1) + (i1)) * (n0) + (i0))
#define LOCAL_LINEAR_ID()                                                                \
  XK_LINEAR3(LOCAL_ID(0), LOCAL_ID(1), LOCAL_ID(2), LOCAL_SIZE(0), LOCAL_SIZE(1))
#define GROUP_LINEAR_ID()                                                                \
  XK_LINEAR3(GROUP_ID(0), GROUP_ID(1), GROUP_ID(2), NUM_GROUPS(0), NUM_GROUPS(1))
/* nd-range kernels: the launch grid */
#define GLOBAL_SIZE(d) (xk_nctaid(d) * xk_ntid(d))
#define GLOBAL_LINEAR_ID()                                                               \
  XK_LINEAR3(GLOBAL_ID(0), GLOBAL_ID(1), GLOBAL_ID(2), GLOBAL_SIZE(0), GLOBAL_SIZE(1))
/* range kernels: the logical size, in hidden arguments */
#define RANGE_PARAMS i64 _gsz0, i64 _gsz1, i64 _gsz2
#define RANGE_GUARD                                                                      \
  if (GLOBAL_ID(0) >= _gsz0 || GLOBAL_ID(1) >= _gsz1 || GLOBAL_ID(2) >= _gsz2)           \
  return
#define RANGE_SIZE(d) _gsz##d
#define RANGE_LINEAR_ID()                                                                \
  XK_LINEAR3(GLOBAL_ID(0), GLOBAL_ID(1), GLOBAL_ID(2), _gsz0, _gsz1)

/* bar.sync orders shared and global memory for the block */
#define BARRIER_LOCAL() __syncthreads()
#define BARRIER_GLOBAL() __syncthreads()
#define BARRIER_ALL() __syncthreads()

/* ---- array views --------------------------------------------------- */

#define PV1(t, x) t *x, i64 x##_off, i64 x##_s0, i64 x##_t0
#define PV2(t, x) t *x, i64 x##_off, i64 x##_s0, i64 x##_s1, i64 x##_t0, i64 x##_t1
#define PV3(t, x)                                                                        \
  t *x, i64 x##_off, i64 x##_s0, i64 x##_s1, i64 x##_s2, i64 x##_t0, i64 x##_t1,         \
      i64 x##_t2
#define PV4(t, x)                                                                        \
  t *x, i64 x##_off, i64 x##_s0, i64 x##_s1, i64 x##_s2, i64 x##_s3, i64 x##_t0,         \
      i64 x##_t1, i64 x##_t2, i64 x##_t3
/* a view passed on to a device function */
#define VA1(x) x, x##_off, x##_s0, x##_t0
#define VA2(x) x, x##_off, x##_s0, x##_s1, x##_t0, x##_t1
/* one index per dimension */
#define A1(x, i) x[x##_off + (i64)(i)*x##_t0]
#define A2(x, i, j) x[x##_off + (i64)(i)*x##_t0 + (i64)(j)*x##_t1]
#define A3(x, i, j, k) x[x##_off + (i64)(i)*x##_t0 + (i64)(j)*x##_t1 + (i64)(k)*x##_t2]
#define A4(x, i, j, k, l)                                                                \
  x[x##_off + (i64)(i)*x##_t0 + (i64)(j)*x##_t1 + (i64)(k)*x##_t2 + (i64)(l)*x##_t3]

/* flat row-major index unravelled through the shape (dimension 0 needs no
 * division) */
XK_DEV i64 xk_flat2(u64 i, i64 s1, i64 t0, i64 t1) {
  u64 q = i / (u64)s1;
  return (i64)(i - q * (u64)s1) * t1 + (i64)q * t0;
}
XK_DEV i64 xk_flat3(u64 i, i64 s1, i64 s2, i64 t0, i64 t1, i64 t2) {
  u64 q2 = i / (u64)s2, q1 = q2 / (u64)s1;
  return (i64)(i - q2 * (u64)s2) * t2 + (i64)(q2 - q1 * (u64)s1) * t1 + (i64)q1 * t0;
}
XK_DEV i64 xk_flat4(u64 i, i64 s1, i64 s2, i64 s3, i64 t0, i64 t1, i64 t2, i64 t3) {
  u64 q3 = i / (u64)s3, q2 = q3 / (u64)s2, q1 = q2 / (u64)s1;
  return (i64)(i - q3 * (u64)s3) * t3 + (i64)(q3 - q2 * (u64)s2) * t2 +
         (i64)(q2 - q1 * (u64)s1) * t1 + (i64)q1 * t0;
}
XK_DEV i64 xk_sel(i64 d, i64 a0, i64 a1, i64 a2, i64 a3) {
  return d == 3 ? a3 : d == 2 ? a2 : d == 1 ? a1 : a0;
}

/* generic rank ([*]): NDIM dimensions; AN is the flat index */
#if NDIM == 1
#define PVN(t, x) PV1(t, x)
#define AN(x, i) A1(x, i)
#define SIZEN(x) (x##_s0)
#define SHAPEN(x, d) (x##_s0)
#define STRIDEN(x, d) (x##_t0)
#elif NDIM == 2
#define PVN(t, x) PV2(t, x)
#define AN(x, i) x[x##_off + xk_flat2((i), x##_s1, x##_t0, x##_t1)]
#define SIZEN(x) (x##_s0 * x##_s1)
#define SHAPEN(x, d) xk_sel((d), x##_s0, x##_s1, 0, 0)
#define STRIDEN(x, d) xk_sel((d), x##_t0, x##_t1, 0, 0)
#elif NDIM == 3
#define PVN(t, x) PV3(t, x)
#define AN(x, i) x[x##_off + xk_flat3((i), x##_s1, x##_s2, x##_t0, x##_t1, x##_t2)]
#define SIZEN(x) (x##_s0 * x##_s1 * x##_s2)
#define SHAPEN(x, d) xk_sel((d), x##_s0, x##_s1, x##_s2, 0)
#define STRIDEN(x, d) xk_sel((d), x##_t0, x##_t1, x##_t2, 0)
#elif NDIM == 4
#define PVN(t, x) PV4(t, x)
#define AN(x, i)                                                                         \
  x[x##_off + xk_flat4((i), x##_s1, x##_s2, x##_s3, x##_t0, x##_t1, x##_t2, x##_t3)]
#define SIZEN(x) (x##_s0 * x##_s1 * x##_s2 * x##_s3)
#define SHAPEN(x, d) xk_sel((d), x##_s0, x##_s1, x##_s2, x##_s3)
#define STRIDEN(x, d) xk_sel((d), x##_t0, x##_t1, x##_t2, x##_t3)
#elif defined(NDIM)
#error "NDIM must be 1..4"
#endif

/* ---- atomics: ATOMIC_OP(space, type, element, operands..., order, scope) */

#define XK_RELAXED __NV_ATOMIC_RELAXED
#define XK_ACQUIRE __NV_ATOMIC_ACQUIRE
#define XK_RELEASE __NV_ATOMIC_RELEASE
#define XK_ACQ_REL __NV_ATOMIC_ACQ_REL
#define XK_SEQ_CST __NV_ATOMIC_SEQ_CST
/* the order of a failed compare-exchange */
#define XK_FAIL_RELAXED __NV_ATOMIC_RELAXED
#define XK_FAIL_ACQUIRE __NV_ATOMIC_ACQUIRE
#define XK_FAIL_RELEASE __NV_ATOMIC_RELAXED
#define XK_FAIL_ACQ_REL __NV_ATOMIC_ACQUIRE
#define XK_FAIL_SEQ_CST __NV_ATOMIC_SEQ_CST
#define XK_DEVICE __NV_THREAD_SCOPE_DEVICE
#define XK_WORK_GROUP __NV_THREAD_SCOPE_BLOCK

/* signed 64-bit add/sub/and/or/xor go through u64 (same bits) */
template <typename T>
struct xk_bits {
  typedef T type;
};
template <>
struct xk_bits<i64> {
  typedef u64 type;
};

template <int O, int S, typename T>
XK_DEV T xk_atomic_add(T *p, T v) {
  typedef typename xk_bits<T>::type B;
  return (T)__nv_atomic_fetch_add((B *)p, (B)v, O, S);
}
template <int O, int S, typename T>
XK_DEV T xk_atomic_sub(T *p, T v) {
  typedef typename xk_bits<T>::type B;
  return (T)__nv_atomic_fetch_sub((B *)p, (B)v, O, S);
}
template <int O, int S, typename T>
XK_DEV T xk_atomic_and(T *p, T v) {
  typedef typename xk_bits<T>::type B;
  return (T)__nv_atomic_fetch_and((B *)p, (B)v, O, S);
}
template <int O, int S, typename T>
XK_DEV T xk_atomic_or(T *p, T v) {
  typedef typename xk_bits<T>::type B;
  return (T)__nv_atomic_fetch_or((B *)p, (B)v, O, S);
}
template <int O, int S, typename T>
XK_DEV T xk_atomic_xor(T *p, T v) {
  typedef typename xk_bits<T>::type B;
  return (T)__nv_atomic_fetch_xor((B *)p, (B)v, O, S);
}
template <int O, int S, typename T>
XK_DEV T xk_atomic_min(T *p, T v) {
  return __nv_atomic_fetch_min(p, v, O, S);
}
template <int O, int S, typename T>
XK_DEV T xk_atomic_max(T *p, T v) {
  return __nv_atomic_fetch_max(p, v, O, S);
}
template <int O, int S, typename T>
XK_DEV T xk_atomic_xchg(T *p, T v) {
  T old;
  __nv_atomic_exchange(p, &v, &old, O, S);
  return old;
}
/* returns the value found, like xpjit's atomic_cmpxchg */
template <int O, int F, int S, typename T>
XK_DEV T xk_atomic_cmpxchg(T *p, T e, T d) {
  __nv_atomic_compare_exchange(p, &e, &d, false, O, F, S);
  return e;
}
template <int O, int S, typename T>
XK_DEV T xk_atomic_load(T *p) {
  T v;
  __nv_atomic_load(p, &v, O, S);
  return v;
}
template <int O, int S, typename T>
XK_DEV void xk_atomic_store(T *p, T v) {
  __nv_atomic_store(p, &v, O, S);
}

#define ATOMIC_ADD(as, t, p, v, o, s) xk_atomic_add<XK_##o, XK_##s, t>(&(p), (t)(v))
#define ATOMIC_SUB(as, t, p, v, o, s) xk_atomic_sub<XK_##o, XK_##s, t>(&(p), (t)(v))
#define ATOMIC_AND(as, t, p, v, o, s) xk_atomic_and<XK_##o, XK_##s, t>(&(p), (t)(v))
#define ATOMIC_OR(as, t, p, v, o, s) xk_atomic_or<XK_##o, XK_##s, t>(&(p), (t)(v))
#define ATOMIC_XOR(as, t, p, v, o, s) xk_atomic_xor<XK_##o, XK_##s, t>(&(p), (t)(v))
#define ATOMIC_MIN(as, t, p, v, o, s) xk_atomic_min<XK_##o, XK_##s, t>(&(p), (t)(v))
#define ATOMIC_MAX(as, t, p, v, o, s) xk_atomic_max<XK_##o, XK_##s, t>(&(p), (t)(v))
#define ATOMIC_XCHG(as, t, p, v, o, s) xk_atomic_xchg<XK_##o, XK_##s, t>(&(p), (t)(v))
#define ATOMIC_CMPXCHG(as, t, p, e, d, o, s)                                             \
  xk_atomic_cmpxchg<XK_##o, XK_FAIL_##o, XK_##s, t>(&(p), (t)(e), (t)(d))
#define ATOMIC_LOAD(as, t, p, o, s) xk_atomic_load<XK_##o, XK_##s, t>(&(p))
#define ATOMIC_STORE(as, t, p, v, o, s) xk_atomic_store<XK_##o, XK_##s, t>(&(p), (t)(v))

/* ---- math ---------------------------------------------------------- */

/* min/max/clamp: minnum/maxnum for floats (fmin/fmax), as in xpjit */
template <typename T>
XK_DEV T xk_min(T a, T b) {
  return b < a ? b : a;
}
template <typename T>
XK_DEV T xk_max(T a, T b) {
  return a < b ? b : a;
}
XK_DEV f32 xk_min(f32 a, f32 b) { return fminf(a, b); }
XK_DEV f64 xk_min(f64 a, f64 b) { return fmin(a, b); }
XK_DEV f32 xk_max(f32 a, f32 b) { return fmaxf(a, b); }
XK_DEV f64 xk_max(f64 a, f64 b) { return fmax(a, b); }
template <typename T>
XK_DEV T xk_clamp(T x, T lo, T hi) {
  return xk_min(xk_max(x, lo), hi);
}
/* abs wraps for the most negative value */
template <typename T>
XK_DEV T xk_abs(T x) {
  return x < 0 ? (T)(0 - x) : x;
}
XK_DEV f32 xk_abs(f32 x) { return fabsf(x); }
XK_DEV f64 xk_abs(f64 x) { return fabs(x); }

XK_DEV u32 xk_popcount(u32 x) { return (u32)__popc(x); }
XK_DEV i32 xk_popcount(i32 x) { return __popc((u32)x); }
XK_DEV u64 xk_popcount(u64 x) { return (u64)__popcll(x); }
XK_DEV i64 xk_popcount(i64 x) { return __popcll((u64)x); }
XK_DEV u32 xk_clz(u32 x) { return (u32)__clz((i32)x); }
XK_DEV u64 xk_clz(u64 x) { return (u64)__clzll((i64)x); }
XK_DEV u32 xk_ctz(u32 x) { return (u32)__clz((i32)__brev(x)); }
XK_DEV u64 xk_ctz(u64 x) { return (u64)__clzll((i64)__brevll(x)); }
XK_DEV u32 xk_mul_hi(u32 a, u32 b) { return __umulhi(a, b); }
XK_DEV i32 xk_mul_hi(i32 a, i32 b) { return __mulhi(a, b); }
XK_DEV u64 xk_mul_hi(u64 a, u64 b) { return __umul64hi(a, b); }
XK_DEV i64 xk_mul_hi(i64 a, i64 b) { return __mul64hi(a, b); }
XK_DEV u32 xk_rotl(u32 x, u32 n) { return __funnelshift_l(x, x, n); }
XK_DEV u32 xk_rotr(u32 x, u32 n) { return __funnelshift_r(x, x, n); }

#endif
