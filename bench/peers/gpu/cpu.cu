// cpu.cu -- bench/cpu.xpk's kernels in CUDA C: the peers of bench/gpu.
// Same names, algorithms and parameters (xpjit's ABI: views as pointer,
// offset, shape, strides; range kernels' hidden sizes), xpjit's dimension
// order (gpu_peer.cuh).
#include "gpu_peer.cuh"

#define RL ((i64)256)
#define RV ((i64)16)

template <typename T>
__global__ void triad(PV1(T, a), PV1(const T, b), PV1(const T, c), T s, RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  A1(a, i) = A1(b, i) + s * A1(c, i);
}

template <typename T>
__global__ void reduce_sum(PV1(const T, x), PV1(T, partial)) {
  __shared__ T tile[RL];
  i64 lid = LOCAL_ID(0);
  i64 lsz = LOCAL_SIZE(0);
  i64 n = x_s0;
  i64 chunk = (n + NUM_GROUPS(0) - 1) / NUM_GROUPS(0);
  i64 per = (chunk + lsz - 1) / lsz;
  i64 begin = GROUP_ID(0) * chunk + lid * per;
  i64 end = xk_min(xk_min(begin + per, GROUP_ID(0) * chunk + chunk), n);
  T acc[RV] = {};
  i64 i = begin;
  if (x_t0 == 1) {
    for (; i + RV <= end; i += RV)
      for (i64 v = 0; v < RV; v++)
        acc[v] += A1(x, i + v);
  } else {
    for (; i + RV <= end; i += RV)
      for (i64 v = 0; v < RV; v++)
        acc[v] += A1(x, i + v);
  }
  for (; i < end; i++)
    acc[0] += A1(x, i);
  for (i64 w = RV / 2; w > 0; w /= 2)
    for (i64 v = 0; v < w; v++)
      acc[v] += acc[v + w];
  tile[lid] = acc[0];
  BARRIER_LOCAL();
  for (i64 s = lsz / 2; s > 0; s >>= 1) {
    if (lid < s)
      tile[lid] += tile[lid + s];
    BARRIER_LOCAL();
  }
  if (lid == 0)
    A1(partial, GROUP_ID(0)) = tile[0];
}

template <typename T>
__global__ void matmul_naive(PV2(const T, a), PV2(const T, b), PV2(T, c), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 row = G2(0);
  i64 col = G2(1);
  T acc = (T)0;
  for (i64 k = 0; k < a_s1; k++)
    acc += A2(a, row, k) * A2(b, k, col);
  A2(c, row, col) = acc;
}

#define TILE ((i64)16)

template <typename T>
__global__ void __launch_bounds__(256) matmul_tiled16(PV2(const T, a), PV2(const T, b), PV2(T, c)) {
  __shared__ T ta[TILE][TILE];
  __shared__ T tb[TILE][TILE];
  i64 ty = L2(0);
  i64 tx = L2(1);
  i64 row = G2(0);
  i64 col = G2(1);
  i64 m = c_s0, n = c_s1, kdim = a_s1;
  T acc = (T)0;
  for (i64 t = 0; t < kdim; t += TILE) {
    ta[ty][tx] = row < m && t + tx < kdim ? A2(a, row, t + tx) : (T)0;
    tb[ty][tx] = t + ty < kdim && col < n ? A2(b, t + ty, col) : (T)0;
    BARRIER_LOCAL();
    for (i64 k = 0; k < TILE; k++)
      acc += ta[ty][k] * tb[k][tx];
    BARRIER_LOCAL();
  }
  if (row < m && col < n)
    A2(c, row, col) = acc;
}

#define BM ((i64)64)
#define BN ((i64)64)
#define BK ((i64)64)

template <typename T>
__global__ void matmul(PV2(const T, a), PV2(const T, b), PV2(T, c)) {
  __shared__ T ta[BM][BK];
  __shared__ T tb[BK][BN];
  i64 kdim = a_s1;
  i64 row0 = GR2(0) * BM;
  i64 col0 = GR2(1) * BN;
  i64 wg = LS2(0) * LS2(1);
  T acc[4 * RV] = {};
  for (i64 t = 0; t < kdim; t += BK) {
    for (i64 e = LOCAL_LINEAR_ID2(); e < BM * BK / RV; e += wg) {
      i64 r = e / (BK / RV);
      i64 k0 = e % (BK / RV) * RV;
      for (i64 v = 0; v < RV; v++)
        ta[r][k0 + v] = A2(a, row0 + r, t + k0 + v);
    }
    for (i64 e = LOCAL_LINEAR_ID2(); e < BK * BN / RV; e += wg) {
      i64 r = e / (BN / RV);
      i64 j0 = e % (BN / RV) * RV;
      for (i64 v = 0; v < RV; v++)
        tb[r][j0 + v] = A2(b, t + r, col0 + j0 + v);
    }
    BARRIER_LOCAL();
    i64 r0 = 4 * L2(0);
    i64 j0 = L2(1) * RV;
    for (i64 k = 0; k < BK; k++) {
      T a0 = ta[r0][k], a1 = ta[r0 + 1][k], a2 = ta[r0 + 2][k], a3 = ta[r0 + 3][k];
      for (i64 v = 0; v < RV; v++) {
        T bv = tb[k][j0 + v];
        acc[v] += a0 * bv;
        acc[RV + v] += a1 * bv;
        acc[2 * RV + v] += a2 * bv;
        acc[3 * RV + v] += a3 * bv;
      }
    }
    BARRIER_LOCAL();
  }
  i64 r0 = row0 + 4 * L2(0);
  i64 j0 = col0 + L2(1) * RV;
  for (i64 v = 0; v < RV; v++) {
    A2(c, r0, j0 + v) = acc[v];
    A2(c, r0 + 1, j0 + v) = acc[RV + v];
    A2(c, r0 + 2, j0 + v) = acc[2 * RV + v];
    A2(c, r0 + 3, j0 + v) = acc[3 * RV + v];
  }
}

template <typename T>
__global__ void jacobi5_interior(PV2(const T, u), PV2(T, out), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = G2(0) + 1;
  i64 j = G2(1) + 1;
  A2(out, i, j) = (T)0.25 * (A2(u, i - 1, j) + A2(u, i + 1, j) + A2(u, i, j - 1) + A2(u, i, j + 1));
}

template <typename T>
__global__ void jacobi5_edges(PV2(const T, u), PV2(T, out), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 k = GLOBAL_ID(0);
  i64 ny = u_s0, nx = u_s1;
  i64 i = 0, j = 0;
  if (k < nx) {
    j = k;
  } else if (k < 2 * nx) {
    i = ny - 1;
    j = k - nx;
  } else if (k < 2 * nx + ny - 2) {
    i = k - 2 * nx + 1;
  } else {
    i = k - 2 * nx - (ny - 2) + 1;
    j = nx - 1;
  }
  A2(out, i, j) = A2(u, i, j);
}

template <typename T>
__global__ void matvec(PV2(const T, a), PV1(const T, x), PV1(T, y), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  i64 kdim = a_s1;
  T acc[RV] = {};
  i64 k = 0;
  for (; k + RV <= kdim; k += RV)
    for (i64 v = 0; v < RV; v++)
      acc[v] += A2(a, i, k + v) * A1(x, k + v);
  for (; k < kdim; k++)
    acc[0] += A2(a, i, k) * A1(x, k);
  for (i64 w = RV / 2; w > 0; w /= 2)
    for (i64 v = 0; v < w; v++)
      acc[v] += acc[v + w];
  A1(y, i) = acc[0];
}

XK_DEV f32 xk_rsqrt(f32 x) { return rsqrtf(x); }
XK_DEV f64 xk_rsqrt(f64 x) { return rsqrt(x); }

template <typename T>
__global__ void nbody(PV2(const T, p), PV2(const T, v), PV2(T, vnew), PV2(T, acc), T dt, T eps2,
                      RANGE_PARAMS) {
  RANGE_GUARD;
  i64 i = GLOBAL_ID(0);
  i64 n = p_s1;
  T xi = A2(p, 0, i), yi = A2(p, 1, i), zi = A2(p, 2, i);
  T ax = 0, ay = 0, az = 0;
  for (i64 j = 0; j < n; j++) {
    T dx = A2(p, 0, j) - xi;
    T dy = A2(p, 1, j) - yi;
    T dz = A2(p, 2, j) - zi;
    T inv = xk_rsqrt(dx * dx + dy * dy + dz * dz + eps2);
    T s = A2(p, 3, j) * inv * inv * inv;
    ax += s * dx;
    ay += s * dy;
    az += s * dz;
  }
  A2(acc, 0, i) = ax;
  A2(acc, 1, i) = ay;
  A2(acc, 2, i) = az;
  A2(vnew, 0, i) = A2(v, 0, i) + dt * ax;
  A2(vnew, 1, i) = A2(v, 1, i) + dt * ay;
  A2(vnew, 2, i) = A2(v, 2, i) + dt * az;
}

#define SL ((i64)256)

template <typename T>
__global__ void scan_group(PV1(const T, x), PV1(T, y)) {
  __shared__ T buf[2][SL];
  i64 lid = LOCAL_ID(0);
  i64 gid = GLOBAL_ID(0);
  buf[0][lid] = A1(x, gid);
  BARRIER_LOCAL();
  i64 src = 0;
  for (i64 off = 1; off < LOCAL_SIZE(0); off *= 2) {
    T s = buf[src][lid];
    if (lid >= off)
      s += buf[src][lid - off];
    buf[1 - src][lid] = s;
    BARRIER_LOCAL();
    src = 1 - src;
  }
  A1(y, gid) = buf[src][lid];
}

XK_DEV f32 xk_exp(f32 x) { return expf(x); }
XK_DEV f64 xk_exp(f64 x) { return exp(x); }

template <typename T>
__global__ void softmax(PV2(const T, x), PV2(T, y), RANGE_PARAMS) {
  RANGE_GUARD;
  i64 r = GLOBAL_ID(0);
  i64 n = x_s1;
  T m = A2(x, r, 0);
  for (i64 j = 1; j < n; j++)
    m = xk_max(m, A2(x, r, j));
  T acc[RV] = {};
  i64 j = 0;
  for (; j + RV <= n; j += RV)
    for (i64 v = 0; v < RV; v++) {
      T e = xk_exp(A2(x, r, j + v) - m);
      A2(y, r, j + v) = e;
      acc[v] += e;
    }
  for (; j < n; j++) {
    T e = xk_exp(A2(x, r, j) - m);
    A2(y, r, j) = e;
    acc[0] += e;
  }
  for (i64 w = RV / 2; w > 0; w /= 2)
    for (i64 v = 0; v < w; v++)
      acc[v] += acc[v + w];
  T inv = (T)1 / acc[0];
  for (i64 k = 0; k < n; k++)
    A2(y, r, k) *= inv;
}

#define NBINS ((i64)256)

template <typename T = void>
__global__ void histogram(PV1(const u8, data), PV1(u32, hist)) {
  __shared__ u32 bins[NBINS];
  i64 lid = LOCAL_ID(0);
  i64 lsz = LOCAL_SIZE(0);
  for (i64 b = lid; b < NBINS; b += lsz)
    bins[b] = 0;
  BARRIER_LOCAL();
  i64 n = data_s0;
  i64 chunk = (n + NUM_GROUPS(0) - 1) / NUM_GROUPS(0);
  i64 per = (chunk + lsz - 1) / lsz;
  i64 begin = GROUP_ID(0) * chunk + lid * per;
  i64 end = xk_min(xk_min(begin + per, GROUP_ID(0) * chunk + chunk), n);
  for (i64 i = begin; i < end; i++)
    ATOMIC_ADD(local, u32, bins[A1(data, i)], 1u, RELAXED, WORK_GROUP);
  BARRIER_LOCAL();
  for (i64 b = lid; b < NBINS; b += lsz) {
    u32 count = bins[b];
    if (count != 0)
      ATOMIC_ADD(global, u32, A1(hist, b), count, RELAXED, DEVICE);
  }
}
