/*
 * bench/cpu_omp.c - the OpenMP peer of bench/cpu: the kernels of
 * bench/cpu.xpk as plain C loops with OpenMP pragmas, compiled on their own
 * with -O3 -march=native -fopenmp (see the Makefile), plus the parallel
 * initialisation of the benchmark data (first touch from the threads that
 * will use it).
 *
 * Each loop computes exactly what the xpjit and OpenCL kernels compute; the
 * float arithmetic is the same (ISO C mode: no contraction into fused
 * multiply-adds, as xpjit's IEEE default), only the summation order differs
 * in the reduction (OpenMP's simd reduction reassociates) and the scan (a
 * running sum per group instead of a tree). Where a kernel's work-items run
 * a loop of their own (matmul_naive, nbody) the work-item loop is an `omp
 * simd` loop around it, as a vectorising OpenCL compiler runs work-items in
 * SIMD lanes; each element still adds its terms in the kernel's order.
 */
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The interface used by bench/cpu.c (declared there too). */
void cpu_omp_setup(int threads);
int cpu_omp_threads(void);
const char *cpu_omp_compiler(void);
int cpu_omp_version(void);
void cpu_omp_fill_f32(float *p, size_t n, uint32_t seed, float lo, float hi);
void cpu_omp_fill_f64(double *p, size_t n, uint32_t seed, double lo, double hi);
void cpu_omp_fill_u8(uint8_t *p, size_t n, uint32_t seed);
void cpu_omp_fill_bytes(void *p, size_t bytes, int value);
void cpu_omp_triad_f32(float *a, const float *b, const float *c, float s, size_t n);
void cpu_omp_triad_f64(double *a, const double *b, const double *c, double s, size_t n);
float cpu_omp_sum_f32(const float *x, size_t n);
void cpu_omp_matmul_naive_f32(const float *a, const float *b, float *c, size_t n);
void cpu_omp_matmul_f32(const float *a, const float *b, float *c, size_t n);
void cpu_omp_jacobi5_f32(const float *u, float *out, size_t ny, size_t nx);
void cpu_omp_matvec_f32(const float *a, const float *x, float *y, size_t m, size_t k);
void cpu_omp_nbody_f32(const float *p, const float *v, float *vnew, float *acc, size_t n,
                       float dt, float eps2);
void cpu_omp_scan_group_f32(const float *x, float *y, size_t n, size_t group);
void cpu_omp_softmax_f32(const float *x, float *y, size_t rows, size_t n);
void cpu_omp_histogram_u8(const uint8_t *data, size_t n, uint32_t *hist);

void cpu_omp_setup(int threads) {
  if (threads > 0)
    omp_set_num_threads(threads);
  omp_set_dynamic(0);
}

int cpu_omp_threads(void) { return omp_get_max_threads(); }

const char *cpu_omp_compiler(void) {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "gcc " __VERSION__;
#else
  return "unknown compiler";
#endif
}

int cpu_omp_version(void) { return _OPENMP; }

/* ---- data: a counter-based hash, so every thread fills its own part ---- */

static inline uint32_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return (uint32_t)x;
}

void cpu_omp_fill_f32(float *p, size_t n, uint32_t seed, float lo, float hi) {
  const uint64_t s = (uint64_t)seed << 40;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++)
    p[i] = lo + (hi - lo) * (float)(mix(s + i) >> 8) * 0x1p-24f;
}

void cpu_omp_fill_f64(double *p, size_t n, uint32_t seed, double lo, double hi) {
  const uint64_t s = (uint64_t)seed << 40;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++)
    p[i] = lo + (hi - lo) * (double)(mix(s + i) >> 8) * 0x1p-24;
}

void cpu_omp_fill_u8(uint8_t *p, size_t n, uint32_t seed) {
  const uint64_t s = (uint64_t)seed << 40;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t)(mix(s + i) >> 24);
}

/* memset in parallel, in page-sized pieces (first touch) */
void cpu_omp_fill_bytes(void *p, size_t bytes, int value) {
  const size_t page = 4096, pages = (bytes + page - 1) / page;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < pages; i++) {
    size_t off = i * page, len = bytes - off < page ? bytes - off : page;
    memset((char *)p + off, value, len);
  }
}

/* ---- kernels ---------------------------------------------------------- */

void cpu_omp_triad_f32(float *restrict a, const float *restrict b, const float *restrict c,
                       float s, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++)
    a[i] = b[i] + s * c[i];
}

void cpu_omp_triad_f64(double *restrict a, const double *restrict b, const double *restrict c,
                       double s, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++)
    a[i] = b[i] + s * c[i];
}

float cpu_omp_sum_f32(const float *restrict x, size_t n) {
  float sum = 0.0f;
#pragma omp parallel for simd schedule(static) reduction(+ : sum)
  for (size_t i = 0; i < n; i++)
    sum += x[i];
  return sum;
}

/* c = a * b for n x n row-major matrices: i-k-j loops, blocked over k so
 * that a block of rows of b stays in the L2 cache while the rows of c are
 * updated; the j loop is the vectorised one. Every c[i][j] adds its
 * products in k order, like the tiled kernels. */
void cpu_omp_matmul_f32(const float *restrict a, const float *restrict b, float *restrict c,
                        size_t n) {
  enum { BI = 16, BK = 64 };
#pragma omp parallel for schedule(static)
  for (size_t i0 = 0; i0 < n; i0 += BI) {
    size_t i1 = i0 + BI < n ? i0 + BI : n;
    for (size_t i = i0; i < i1; i++)
      memset(c + i * n, 0, n * sizeof *c);
    for (size_t k0 = 0; k0 < n; k0 += BK) {
      size_t k1 = k0 + BK < n ? k0 + BK : n;
      for (size_t i = i0; i < i1; i++) {
        float *restrict ci = c + i * n;
        for (size_t k = k0; k < k1; k++) {
          const float aik = a[i * n + k];
          const float *restrict bk = b + k * n;
#pragma omp simd
          for (size_t j = 0; j < n; j++)
            ci[j] += aik * bk[j];
        }
      }
    }
  }
}

/* c = a * b for n x n row-major matrices, naively: one element at a time,
 * its k loop inside; the columns of a row in SIMD lanes. */
void cpu_omp_matmul_naive_f32(const float *restrict a, const float *restrict b,
                              float *restrict c, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
#pragma omp simd
    for (size_t j = 0; j < n; j++) {
      float acc = 0.0f;
      for (size_t k = 0; k < n; k++)
        acc += a[i * n + k] * b[k * n + j];
      c[i * n + j] = acc;
    }
  }
}

/* One Jacobi sweep: interior points = average of the 4 neighbours,
 * boundary points copied. */
void cpu_omp_jacobi5_f32(const float *restrict u, float *restrict out, size_t ny, size_t nx) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < ny; i++) {
    const float *restrict r = u + i * nx;
    float *restrict o = out + i * nx;
    if (i == 0 || i == ny - 1) {
      memcpy(o, r, nx * sizeof *o);
      continue;
    }
    const float *restrict up = r - nx, *restrict dn = r + nx;
    o[0] = r[0];
#pragma omp simd
    for (size_t j = 1; j < nx - 1; j++)
      o[j] = 0.25f * (up[j] + dn[j] + r[j - 1] + r[j + 1]);
    o[nx - 1] = r[nx - 1];
  }
}

/* y = a x for an m x k row-major matrix: per row, the dot product in 16
 * lanes, then the lanes pairwise (the kernel's order). */
void cpu_omp_matvec_f32(const float *restrict a, const float *restrict x, float *restrict y,
                        size_t m, size_t k) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < m; i++) {
    const float *restrict row = a + i * k;
    float acc[16] = {0};
    size_t j = 0;
    for (; j + 16 <= k; j += 16)
      for (int v = 0; v < 16; v++)
        acc[v] += row[j + v] * x[j + v];
    for (; j < k; j++)
      acc[0] += row[j] * x[j];
    for (int w = 8; w > 0; w /= 2)
      for (int v = 0; v < w; v++)
        acc[v] += acc[v + w];
    y[i] = acc[0];
  }
}

/* One all-pairs n-body step (the kernel's arithmetic, 1 / sqrtf for its
 * rsqrt); p: rows x, y, z, mass (4 x n); v, vnew, acc: rows x, y, z. The
 * bodies in SIMD lanes. */
void cpu_omp_nbody_f32(const float *restrict p, const float *restrict v, float *restrict vnew,
                       float *restrict acc, size_t n, float dt, float eps2) {
  const float *restrict px = p, *restrict py = p + n, *restrict pz = p + 2 * n,
                        *restrict pm = p + 3 * n;
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) {
    float xi = px[i], yi = py[i], zi = pz[i];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (size_t j = 0; j < n; j++) {
      float dx = px[j] - xi, dy = py[j] - yi, dz = pz[j] - zi;
      float inv = 1.0f / sqrtf(dx * dx + dy * dy + dz * dz + eps2);
      float s = pm[j] * inv * inv * inv;
      ax += s * dx;
      ay += s * dy;
      az += s * dz;
    }
    acc[i] = ax;
    acc[n + i] = ay;
    acc[2 * n + i] = az;
    vnew[i] = v[i] + dt * ax;
    vnew[n + i] = v[n + i] + dt * ay;
    vnew[2 * n + i] = v[2 * n + i] + dt * az;
  }
}

/* y = the inclusive prefix sums of x within each group of `group`
 * elements: a running sum per group. */
void cpu_omp_scan_group_f32(const float *restrict x, float *restrict y, size_t n, size_t group) {
#pragma omp parallel for schedule(static)
  for (size_t g = 0; g < n; g += group) {
    size_t end = g + group < n ? g + group : n;
    float s = 0.0f;
    for (size_t i = g; i < end; i++) {
      s += x[i];
      y[i] = s;
    }
  }
}

/* y = softmax of each row of x (rows x n): the maximum, then y = exp(x -
 * max) summed in 16 lanes, then y times 1 / sum (the kernel's order). */
void cpu_omp_softmax_f32(const float *restrict x, float *restrict y, size_t rows, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < rows; r++) {
    const float *restrict xr = x + r * n;
    float *restrict yr = y + r * n;
    float m = xr[0];
    for (size_t j = 1; j < n; j++)
      m = xr[j] > m ? xr[j] : m;
    float acc[16] = {0};
    size_t j = 0;
    for (; j + 16 <= n; j += 16)
      for (int v = 0; v < 16; v++) {
        float e = expf(xr[j + v] - m);
        yr[j + v] = e;
        acc[v] += e;
      }
    for (; j < n; j++) {
      float e = expf(xr[j] - m);
      yr[j] = e;
      acc[0] += e;
    }
    for (int w = 8; w > 0; w /= 2)
      for (int v = 0; v < w; v++)
        acc[v] += acc[v + w];
    float inv = 1.0f / acc[0];
    for (size_t k = 0; k < n; k++)
      yr[k] *= inv;
  }
}

/* 256-bin histogram: a private histogram per thread (array reduction),
 * merged at the end of the loop. */
void cpu_omp_histogram_u8(const uint8_t *restrict data, size_t n, uint32_t *restrict hist) {
  memset(hist, 0, 256 * sizeof *hist);
#pragma omp parallel for schedule(static) reduction(+ : hist[:256])
  for (size_t i = 0; i < n; i++)
    hist[data[i]]++;
}
