/*
 * bench/cpu.c - CPU kernel throughput: xpjit's CPU device against the same
 * kernels written in OpenCL C and run by PoCL, and written in C with OpenMP.
 *
 * Kernels (bench/cpu.xpk; OpenCL C twins in bench/peers/cpu/NAME.cl with
 * the same structure; OpenMP loops in bench/cpu_omp.c, compiled -O3
 * -march=native). The xpjit and OpenCL kernels are written for a CPU
 * device: dimension 0 walks contiguous memory, and each work-item of the
 * nd-range kernels handles a contiguous run of data.
 *   triad           a = b + s * c, 2^25 f32 (and triad_f64), a range kernel
 *   triad_nd        xpjit only: the same body as an nd-range kernel, local
 *                   size 256 (the runtime splits range kernels statically,
 *                   nd-range kernels in dynamic chunks of work-groups)
 *   reduction       sum of 2^25 f32: per work-group a partial sum (work-
 *                   items sum contiguous runs in 16 lanes, then a tree in
 *                   local memory), the partials added on the host; OpenMP
 *                   `parallel for simd reduction(+:)`
 *   reduction_views xpjit only: the same kernel without its fast path for
 *                   contiguous views (the peers are those of reduction)
 *   matmul          1024 x 1024 f32, register-blocked (4 x 16 per work-
 *                   item) through 64 x 64 local-memory tiles; OpenMP a
 *                   blocked i-k-j loop
 *   matmul_tiled16  the textbook tiled kernel: one element per work-item,
 *                   16 x 16 local-memory tiles (OpenMP: the same loop)
 *   stencil         one Jacobi sweep of the 5-point stencil, 4096 x 4096
 *                   f32: a 2-D range kernel over the interior and a 1-D
 *                   one that copies the edges (two launches per run)
 *   histogram       256 bins of 2^27 random bytes, local atomics per group
 *                   and a global merge; OpenMP private histograms per
 *                   thread (an array reduction)
 *
 * Every implementation uses the same data: buffers from xpj_mem_alloc
 * (XPJ_MEM_SHARED), initialised in parallel by OpenMP threads (first
 * touch), used directly by the OpenMP loops and wrapped with
 * CL_MEM_USE_HOST_PTR for PoCL. Before timing, each implementation's
 * output is checked against a reference computed here (the output is
 * poisoned first); a wrong result prints FAIL and the exit status is 1.
 *
 * Timing: one checked run and one warm-up run per implementation, then the
 * implementations take turns in 10 rounds (a noisy machine's load falls on
 * all of them); each turn starts with 20 ms of untimed runs (the previous
 * runtime's threads stop spinning, this one's wake up), then runs
 * until each implementation has made at least --runs runs and spent
 * --min-time seconds (one run per round for kernels slower than 0.2 s);
 * the median wall time of a run is reported: xpj_launch + xpj_queue_wait,
 * clEnqueueNDRangeKernel + clFinish, the OpenMP function call (the
 * reduction includes adding the per-group partials on the host, the
 * histogram includes zeroing it).
 * Compiles are timed separately and excluded: xpj_program_get_kernel, and
 * PoCL's clBuildProgram (with its kernel cache off, POCL_KERNEL_CACHE=0,
 * unless set in the environment; PoCL compiles the work-group function at
 * the first launch, which is reported as "first run").
 *
 * Throughput: GB/s = bytes an OpenMP loop reads and writes once (triad 3
 * arrays, reduction 1, stencil 2 grids, histogram the bytes), GFLOP/s =
 * 2 N^3 / t for matmul. Ratios xpjit/peer > 1 mean xpjit is faster.
 *
 * Threads: xpjit's CPU device gets --threads (default: one per online
 * core), OpenMP the same number, PoCL the same through
 * POCL_CPU_MAX_CU_COUNT / POCL_MAX_PTHREAD_COUNT (unless set).
 *
 * usage: cpu [--quick] [--scale F] [--kernel NAME[,NAME...]] [--threads N]
 *            [--runs N] [--min-time SEC] [--xpk FILE] [--peers DIR]
 *            [--opencl-lib PATH] [--no-pocl] [--no-omp] [--list]
 *
 * PoCL is reached through the OpenCL ICD loader (libOpenCL.so.1, opened
 * with dlopen at run time); without it, or without a PoCL platform, the
 * PoCL column is empty ("PoCL: not available") and the rest runs.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include "xpjit.h"

#define BENCH_WANT_OPENCL 1
#include "bench_util.h"

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


/* ---- the OpenMP peer (bench/cpu_omp.c) --------------------------------- */

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
void cpu_omp_matmul_f32(const float *a, const float *b, float *c, size_t n);
void cpu_omp_jacobi5_f32(const float *u, float *out, size_t ny, size_t nx);
void cpu_omp_histogram_u8(const uint8_t *data, size_t n, uint32_t *hist);

/* ---- options and small helpers ----------------------------------------- */

enum { I_XPJIT, I_POCL, I_OMP, NIMPL };
static const char *const impl_name[NIMPL] = {"xpjit", "PoCL", "OpenMP"};

enum {
  K_TRIAD,
  K_TRIAD_ND,
  K_TRIAD64,
  K_REDUCE,
  K_REDUCE_VIEWS,
  K_MATMUL,
  K_MATMUL16,
  K_STENCIL,
  K_HIST,
  NKERN
};
static const char *const kern_name[NKERN] = {
    "triad",  "triad_nd",       "triad_f64", "reduction", "reduction_views",
    "matmul", "matmul_tiled16", "stencil",   "histogram"};
/* the kernel a variant computes (its data, check and OpenMP loop) */
static const int kern_base[NKERN] = {K_TRIAD,  K_TRIAD,  K_TRIAD64, K_REDUCE, K_REDUCE,
                                     K_MATMUL, K_MATMUL, K_STENCIL, K_HIST};
/* xpjit-only variants: their peers are those of the base kernel's row */
static const bool xpjit_only[NKERN] = {[K_TRIAD_ND] = true, [K_REDUCE_VIEWS] = true};

static double opt_scale = 1.0;
static int opt_runs = 10;
static double opt_min_time = 0.5;
static int opt_threads = 0;
static const char *opt_xpk = "bench/cpu.xpk";
static const char *opt_peers = "bench/peers/cpu";
static const char *opt_opencl = "libOpenCL.so.1";
static bool opt_pocl = true, opt_omp = true;
static bool want[NKERN];
static int failures;

/* work-group geometry of the nd-range kernels */
enum { RED_LOCAL = 256, RED_CHUNK = 262144, HIST_LOCAL = 256, HIST_CHUNK = 262144, TILE = 16,
       MM_BLOCK = 64, MM_RV = 16, MM_ROWS = 4 };

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}




/* ---- xpjit ---------------------------------------------------------------- */

static struct {
  bool ok;
  char why[512];
  xpj_context *ctx;
  xpj_device *dev;
  xpj_queue *q;
  xpj_program *prog;
  xpj_device_info info;
} X;

static void xpjit_init(void) {
  xpj_context_desc cd = {.cpu_threads = (unsigned)opt_threads};
  xpj_status st = xpj_context_create(&cd, &X.ctx);
  if (st == XPJ_OK)
    st = xpj_device_select(X.ctx, "cpu", &X.dev);
  if (st == XPJ_OK)
    st = xpj_device_get_info(X.dev, &X.info);
  if (st == XPJ_OK)
    st = xpj_queue_create(X.dev, NULL, &X.q);
  if (st == XPJ_OK)
    st = xpj_program_create_file(X.ctx, opt_xpk, NULL, &X.prog);
  if (st != XPJ_OK) {
    snprintf(X.why, sizeof X.why, "%s: %s", xpj_status_name(st), xpj_last_error());
    oneline(X.why);
    return;
  }
  X.ok = true;
}

static void xpjit_fini(void) {
  xpj_program_destroy(X.prog);
  xpj_queue_destroy(X.q);
  xpj_context_destroy(X.ctx);
}

/* Memory for every implementation: xpjit's shared allocations when the
 * device is there, else the C heap; page-aligned (PoCL uses it in place). */
static void *bench_alloc(size_t bytes) {
  void *p = NULL;
  if (X.ok) {
    if (xpj_mem_alloc(X.dev, XPJ_MEM_SHARED, bytes, 4096, &p) != XPJ_OK) {
      fprintf(stderr, "cpu: xpj_mem_alloc(%zu): %s\n", bytes, xpj_last_error());
      exit(1);
    }
    return p;
  }
  p = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (!p) {
    fprintf(stderr, "cpu: out of memory (%zu bytes)\n", bytes);
    exit(1);
  }
  return p;
}

static void bench_free(void *p) {
  if (!p)
    return;
  if (X.ok)
    xpj_mem_free(X.dev, p);
  else
    free(p);
}

/* ---- PoCL through libOpenCL.so.1 ------------------------------------------ */

static bench_cl_api cl;

static struct {
  bool ok;
  char why[512];
  void *lib;
  cl_platform_id plat;
  cl_device_id dev;
  cl_context ctx;
  cl_command_queue q;
  char version[256], device[256];
  cl_uint units;
} P;

static bool pocl_load(void) {
  P.lib = dlopen(opt_opencl, RTLD_NOW | RTLD_LOCAL);
  if (!P.lib) {
    snprintf(P.why, sizeof P.why, "%s", dlerror());
    return false;
  }
  return bench_cl_load(P.lib, opt_opencl, &cl, P.why, sizeof P.why);
}

static void pocl_init(void) {
  if (!opt_pocl) {
    snprintf(P.why, sizeof P.why, "disabled (--no-pocl)");
    return;
  }
  /* before the ICD loader starts PoCL: the thread count, and no kernel
   * cache (so that builds are real compiles); the environment wins */
  char nt[16];
  snprintf(nt, sizeof nt, "%d", opt_threads);
  setenv("POCL_CPU_MAX_CU_COUNT", nt, 0);
  setenv("POCL_MAX_PTHREAD_COUNT", nt, 0);
  setenv("POCL_KERNEL_CACHE", "0", 0);
  if (!pocl_load())
    return;
  cl_platform_id plats[16];
  cl_uint np = 0;
  if (cl.GetPlatformIDs(16, plats, &np) != CL_SUCCESS || np == 0) {
    snprintf(P.why, sizeof P.why, "no OpenCL platform");
    return;
  }
  if (np > 16)
    np = 16;
  for (cl_uint i = 0; i < np && !P.plat; i++) {
    char name[256] = "";
    cl.GetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
    cl_device_id d;
    cl_uint nd = 0;
    if (strstr(name, "Portable Computing Language") &&
        cl.GetDeviceIDs(plats[i], CL_DEVICE_TYPE_CPU, 1, &d, &nd) == CL_SUCCESS && nd > 0) {
      P.plat = plats[i];
      P.dev = d;
    }
  }
  if (!P.plat) {
    snprintf(P.why, sizeof P.why, "no Portable Computing Language platform with a CPU device");
    return;
  }
  cl.GetPlatformInfo(P.plat, CL_PLATFORM_VERSION, sizeof P.version - 1, P.version, NULL);
  cl.GetDeviceInfo(P.dev, CL_DEVICE_NAME, sizeof P.device - 1, P.device, NULL);
  cl.GetDeviceInfo(P.dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof P.units, &P.units, NULL);
  cl_int err = 0;
  P.ctx = cl.CreateContext(NULL, 1, &P.dev, NULL, NULL, &err);
  if (P.ctx)
    P.q = cl.CreateCommandQueue(P.ctx, P.dev, 0, &err);
  if (!P.ctx || !P.q) {
    snprintf(P.why, sizeof P.why, "cannot create a context and queue (error %d)", err);
    return;
  }
  P.ok = true;
}

static void pocl_fini(void) {
  if (P.q)
    cl.ReleaseCommandQueue(P.q);
  if (P.ctx)
    cl.ReleaseContext(P.ctx);
  /* the library stays loaded: PoCL's threads may outlive the context */
}

/* Builds bench/peers/cpu/FILE with -DT=TYPE and gets kernel NAME. */
static cl_kernel pocl_build(const char *file, const char *opts, const char *name,
                            cl_program *prog_out, double *ms, char *msg, size_t msgsize) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", opt_peers, file);
  size_t len = 0;
  char *src = slurp(path, &len);
  if (!src) {
    snprintf(msg, msgsize, "cannot read %.400s", path);
    return NULL;
  }
  cl_int err = 0;
  const char *srcs[1] = {src};
  cl_program prog = cl.CreateProgramWithSource(P.ctx, 1, srcs, &len, &err);
  free(src);
  if (!prog) {
    snprintf(msg, msgsize, "clCreateProgramWithSource: error %d", err);
    return NULL;
  }
  double t0 = now_s();
  err = cl.BuildProgram(prog, 1, &P.dev, opts, NULL, NULL);
  *ms = (now_s() - t0) * 1e3;
  if (err != CL_SUCCESS) {
    char log[2048] = "";
    cl.GetProgramBuildInfo(prog, P.dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    snprintf(msg, msgsize, "clBuildProgram %.200s: error %d: %.280s", path, err, log);
    oneline(msg);
    cl.ReleaseProgram(prog);
    return NULL;
  }
  cl_kernel k = cl.CreateKernel(prog, name, &err);
  if (!k) {
    snprintf(msg, msgsize, "clCreateKernel %s: error %d", name, err);
    cl.ReleaseProgram(prog);
    return NULL;
  }
  *prog_out = prog;
  return k;
}

static cl_mem pocl_wrap(void *host, size_t bytes, char *msg, size_t msgsize) {
  cl_int err = 0;
  cl_mem m = cl.CreateBuffer(P.ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, host, &err);
  if (!m)
    snprintf(msg, msgsize, "clCreateBuffer(%zu, USE_HOST_PTR): error %d", bytes, err);
  return m;
}

/* ---- one benchmark -------------------------------------------------------- */

typedef struct result {
  int state; /* 0 not run, 1 ok, 2 failed, 3 not available */
  char msg[512];
  double med, min, max; /* seconds per run */
  int runs;
  double first;         /* seconds: the checked run */
  double compile_ms;    /* xpjit: get_kernel; PoCL: clBuildProgram */
  double compile_info;  /* xpjit: compile_millis from the kernel info */
} result;

enum { ST_NONE, ST_OK, ST_FAIL, ST_NA };

typedef struct bench {
  int id;   /* K_* */
  int kind; /* kern_base[id] */
  char size[96];
  const char *unit;
  double work; /* bytes or flops per run */
  /* sizes */
  size_t n, ny, nx;
  /* data (shared by the implementations) */
  void *in[2], *out, *aux; /* aux: reduction partials */
  size_t in_bytes[2], out_bytes, aux_bytes;
  float scal;
  /* references */
  void *ref;
  double ref_sum;
  uint32_t ref_hist[256];
  size_t groups;
  /* xpjit */
  xpj_kernel *xk, *xk2; /* xk2: the stencil's edges */
  xpj_array xa[3];
  /* PoCL */
  cl_program cp;
  cl_kernel ck, ck2;
  cl_mem cm[4];
  float *cpart; /* host copy of the partials */
  result r[NIMPL];
} bench;

static void result_msg(result *r, int state, const char *fmt, ...) {
  r->state = state;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->msg, sizeof r->msg, fmt, ap);
  va_end(ap);
  oneline(r->msg);
}

static size_t round_to(double v, size_t m) {
  size_t r = (size_t)(v / (double)m + 0.5) * m;
  return r < m ? m : r;
}

static void fmt_bytes(char *buf, size_t size, double b) {
  if (b >= 1024.0 * 1024 * 1024)
    snprintf(buf, size, "%.1f GiB", b / (1024.0 * 1024 * 1024));
  else
    snprintf(buf, size, "%.0f MiB", b / (1024.0 * 1024));
}

static void fmt_count(char *buf, size_t size, size_t n) {
  if (n && (n & (n - 1)) == 0) {
    int e = 0;
    while ((1ull << e) < n)
      e++;
    snprintf(buf, size, "2^%d", e);
  } else {
    snprintf(buf, size, "%zu", n);
  }
}

/* Sizes, data and references. */
static void bench_setup(bench *b) {
  char cnt[24], mem[24];
  switch (b->kind) {
  case K_TRIAD:
  case K_TRIAD64: {
    size_t es = b->kind == K_TRIAD ? 4 : 8;
    b->n = round_to(33554432.0 * opt_scale, 4096);
    b->in_bytes[0] = b->in_bytes[1] = b->out_bytes = b->n * es;
    b->unit = "GB/s";
    b->work = 3.0 * (double)(b->n * es);
    fmt_count(cnt, sizeof cnt, b->n);
    fmt_bytes(mem, sizeof mem, 3.0 * (double)(b->n * es));
    snprintf(b->size, sizeof b->size, "%s %s (%s)", cnt, es == 4 ? "f32" : "f64", mem);
    break;
  }
  case K_REDUCE:
    b->n = round_to(33554432.0 * opt_scale, RED_CHUNK);
    b->in_bytes[0] = b->n * 4;
    b->groups = b->n / RED_CHUNK;
    b->aux_bytes = b->groups * 4;
    b->unit = "GB/s";
    b->work = (double)b->in_bytes[0];
    fmt_count(cnt, sizeof cnt, b->n);
    fmt_bytes(mem, sizeof mem, (double)b->in_bytes[0]);
    snprintf(b->size, sizeof b->size, "%s f32 (%s)", cnt, mem);
    break;
  case K_MATMUL:
    b->n = round_to(1024.0 * cbrt(opt_scale), MM_BLOCK);
    b->in_bytes[0] = b->in_bytes[1] = b->out_bytes = b->n * b->n * 4;
    b->unit = "GFLOP/s";
    b->work = 2.0 * (double)b->n * (double)b->n * (double)b->n;
    snprintf(b->size, sizeof b->size, "%zux%zu f32", b->n, b->n);
    break;
  case K_STENCIL:
    b->ny = b->nx = round_to(4096.0 * sqrt(opt_scale), 16);
    b->n = b->ny * b->nx;
    b->in_bytes[0] = b->out_bytes = b->n * 4;
    b->unit = "GB/s";
    b->work = 2.0 * (double)b->in_bytes[0];
    fmt_bytes(mem, sizeof mem, 2.0 * (double)b->in_bytes[0]);
    snprintf(b->size, sizeof b->size, "%zux%zu f32 (%s)", b->ny, b->nx, mem);
    break;
  case K_HIST:
    b->n = round_to(134217728.0 * opt_scale, HIST_CHUNK);
    b->in_bytes[0] = b->n;
    b->out_bytes = 256 * 4;
    b->groups = b->n / HIST_CHUNK;
    b->unit = "GB/s";
    b->work = (double)b->n;
    fmt_count(cnt, sizeof cnt, b->n);
    fmt_bytes(mem, sizeof mem, (double)b->n);
    snprintf(b->size, sizeof b->size, "%s u8 (%s)", cnt, mem);
    break;
  }
  for (int i = 0; i < 2; i++)
    if (b->in_bytes[i])
      b->in[i] = bench_alloc(b->in_bytes[i]);
  if (b->out_bytes)
    b->out = bench_alloc(b->out_bytes);
  if (b->aux_bytes) {
    b->aux = bench_alloc(b->aux_bytes);
    b->cpart = malloc(b->aux_bytes);
  }

  /* first touch in parallel, then the reference */
  if (b->out_bytes)
    cpu_omp_fill_bytes(b->out, b->out_bytes, 0);
  switch (b->kind) {
  case K_TRIAD: {
    float *x = b->in[0], *y = b->in[1];
    cpu_omp_fill_f32(x, b->n, 1, 0.0f, 1.0f);
    cpu_omp_fill_f32(y, b->n, 2, 0.0f, 1.0f);
    b->scal = 3.0f;
    break; /* the reference is computed while checking */
  }
  case K_TRIAD64:
    cpu_omp_fill_f64(b->in[0], b->n, 3, 0.0, 1.0);
    cpu_omp_fill_f64(b->in[1], b->n, 4, 0.0, 1.0);
    b->scal = 3.0f;
    break;
  case K_REDUCE: {
    const float *x = b->in[0];
    cpu_omp_fill_f32(b->in[0], b->n, 5, 0.0f, 1.0f);
    cpu_omp_fill_bytes(b->aux, b->aux_bytes, 0);
    double s = 0;
    for (size_t i = 0; i < b->n; i++)
      s += x[i];
    b->ref_sum = s;
    break;
  }
  case K_MATMUL:
    cpu_omp_fill_f32(b->in[0], b->n * b->n, 6, -1.0f, 1.0f);
    cpu_omp_fill_f32(b->in[1], b->n * b->n, 7, -1.0f, 1.0f);
    break; /* sampled reference while checking */
  case K_STENCIL: {
    cpu_omp_fill_f32(b->in[0], b->n, 8, 0.0f, 1.0f);
    const float *u = b->in[0];
    float *ref = malloc(b->n * 4);
    if (!ref) {
      fprintf(stderr, "cpu: out of memory\n");
      exit(1);
    }
    size_t ny = b->ny, nx = b->nx;
    for (size_t i = 0; i < ny; i++)
      for (size_t j = 0; j < nx; j++) {
        size_t k = i * nx + j;
        if (i == 0 || j == 0 || i == ny - 1 || j == nx - 1)
          ref[k] = u[k];
        else
          ref[k] = 0.25f * (u[k - nx] + u[k + nx] + u[k - 1] + u[k + 1]);
      }
    b->ref = ref;
    break;
  }
  case K_HIST: {
    cpu_omp_fill_u8(b->in[0], b->n, 9);
    const uint8_t *d = b->in[0];
    memset(b->ref_hist, 0, sizeof b->ref_hist);
    for (size_t i = 0; i < b->n; i++)
      b->ref_hist[d[i]]++;
    break;
  }
  }
}

static void bench_teardown(bench *b) {
  if (b->ck)
    cl.ReleaseKernel(b->ck);
  if (b->ck2)
    cl.ReleaseKernel(b->ck2);
  if (b->cp)
    cl.ReleaseProgram(b->cp);
  for (int i = 0; i < 4; i++)
    if (b->cm[i])
      cl.ReleaseMemObject(b->cm[i]);
  bench_free(b->in[0]);
  bench_free(b->in[1]);
  bench_free(b->out);
  bench_free(b->aux);
  free(b->cpart);
  free(b->ref);
}

/* ---- checking ------------------------------------------------------------- */

/* Checks out (the output as the host sees it) or sum; 0 when right, else a
 * message in r. */
static int bench_check(bench *b, const void *out, double sum, result *r) {
  switch (b->kind) {
  case K_TRIAD: {
    const float *a = out, *x = b->in[0], *y = b->in[1];
    float s = b->scal;
    for (size_t i = 0; i < b->n; i++) {
      float want_v = x[i] + s * y[i];
      if (!(fabsf(a[i] - want_v) <= 1e-6f * fabsf(want_v))) {
        result_msg(r, ST_FAIL, "a[%zu] = %.9g, expected %.9g", i, (double)a[i], (double)want_v);
        return -1;
      }
    }
    return 0;
  }
  case K_TRIAD64: {
    const double *a = out, *x = b->in[0], *y = b->in[1];
    double s = b->scal;
    for (size_t i = 0; i < b->n; i++) {
      double want_v = x[i] + s * y[i];
      if (!(fabs(a[i] - want_v) <= 1e-15 * fabs(want_v))) {
        result_msg(r, ST_FAIL, "a[%zu] = %.17g, expected %.17g", i, a[i], want_v);
        return -1;
      }
    }
    return 0;
  }
  case K_REDUCE:
    if (!(fabs(sum - b->ref_sum) <= 1e-5 * fabs(b->ref_sum))) {
      result_msg(r, ST_FAIL, "sum = %.9g, expected %.9g (relative error %.2g)", sum, b->ref_sum,
                 fabs(sum - b->ref_sum) / fabs(b->ref_sum));
      return -1;
    }
    return 0;
  case K_MATMUL: {
    /* every row at 8 columns (both edges, 6 spread out), in double; the
     * tolerance scales with sum |a_ik * b_kj| */
    const float *c = out, *a = b->in[0], *bb = b->in[1];
    size_t n = b->n;
    for (size_t i = 0; i < n * n; i++)
      if (!isfinite(c[i])) {
        result_msg(r, ST_FAIL, "c[%zu][%zu] = %g", i / n, i % n, (double)c[i]);
        return -1;
      }
    for (size_t i = 0; i < n; i++)
      for (size_t t = 0; t < 8; t++) {
        size_t j = t == 0 ? 0 : t == 7 ? n - 1 : (i * 37 + t * n / 7) % n;
        double s = 0, mag = 0;
        for (size_t k = 0; k < n; k++) {
          double p = (double)a[i * n + k] * (double)bb[k * n + j];
          s += p;
          mag += fabs(p);
        }
        if (!(fabs((double)c[i * n + j] - s) <= 1e-5 * mag + 1e-30)) {
          result_msg(r, ST_FAIL, "c[%zu][%zu] = %.9g, expected %.9g", i, j,
                     (double)c[i * n + j], s);
          return -1;
        }
      }
    return 0;
  }
  case K_STENCIL: {
    const float *o = out, *ref = b->ref;
    for (size_t i = 0; i < b->n; i++)
      if (!(fabsf(o[i] - ref[i]) <= 1e-6f * fabsf(ref[i]))) {
        result_msg(r, ST_FAIL, "out[%zu][%zu] = %.9g, expected %.9g", i / b->nx, i % b->nx,
                   (double)o[i], (double)ref[i]);
        return -1;
      }
    return 0;
  }
  case K_HIST: {
    const uint32_t *h = out;
    for (int i = 0; i < 256; i++)
      if (h[i] != b->ref_hist[i]) {
        result_msg(r, ST_FAIL, "hist[%d] = %u, expected %u", i, h[i], b->ref_hist[i]);
        return -1;
      }
    return 0;
  }
  }
  return -1;
}

/* ---- the three implementations -------------------------------------------- */

/* xpjit: compile (timed apart) and the array views */
static int xpjit_prepare(bench *b, result *r) {
  static const char *const kname[NKERN] = {
      "triad",  "triad_nd",       "triad",            "reduce_sum", "reduce_sum_views",
      "matmul", "matmul_tiled16", "jacobi5_interior", "histogram"};
  static const char *const dtype[NKERN] = {"T=f32", "T=f32", "T=f64", "T=f32", "T=f32",
                                           "T=f32", "T=f32", "T=f32", NULL};
  double t0 = now_s();
  xpj_status st = xpj_program_get_kernel(X.prog, kname[b->id], dtype[b->id], 0, X.dev, NULL,
                                         &b->xk);
  r->compile_ms = (now_s() - t0) * 1e3;
  if (st != XPJ_OK) {
    result_msg(r, ST_FAIL, "xpj_program_get_kernel(%s): %s: %s", kname[b->id],
               xpj_status_name(st), xpj_last_error());
    return -1;
  }
  xpj_kernel_info ki;
  if (xpj_kernel_get_info(b->xk, &ki) == XPJ_OK)
    r->compile_info = ki.compile_millis;
  if (b->kind == K_STENCIL) {
    t0 = now_s();
    st = xpj_program_get_kernel(X.prog, "jacobi5_edges", "T=f32", 0, X.dev, NULL, &b->xk2);
    r->compile_ms += (now_s() - t0) * 1e3;
    if (st != XPJ_OK) {
      result_msg(r, ST_FAIL, "xpj_program_get_kernel(jacobi5_edges): %s: %s",
                 xpj_status_name(st), xpj_last_error());
      return -1;
    }
    if (xpj_kernel_get_info(b->xk2, &ki) == XPJ_OK)
      r->compile_info += ki.compile_millis;
  }
  switch (b->kind) {
  case K_TRIAD:
  case K_TRIAD64: {
    xpj_scalar t = b->kind == K_TRIAD ? XPJ_F32 : XPJ_F64;
    b->xa[0] = xpj_array_1d(b->out, t, (int64_t)b->n);
    b->xa[1] = xpj_array_1d(b->in[0], t, (int64_t)b->n);
    b->xa[2] = xpj_array_1d(b->in[1], t, (int64_t)b->n);
    break;
  }
  case K_REDUCE:
    b->xa[0] = xpj_array_1d(b->in[0], XPJ_F32, (int64_t)b->n);
    b->xa[1] = xpj_array_1d(b->aux, XPJ_F32, (int64_t)b->groups);
    break;
  case K_MATMUL:
    b->xa[0] = xpj_array_2d(b->in[0], XPJ_F32, (int64_t)b->n, (int64_t)b->n);
    b->xa[1] = xpj_array_2d(b->in[1], XPJ_F32, (int64_t)b->n, (int64_t)b->n);
    b->xa[2] = xpj_array_2d(b->out, XPJ_F32, (int64_t)b->n, (int64_t)b->n);
    break;
  case K_STENCIL:
    b->xa[0] = xpj_array_2d(b->in[0], XPJ_F32, (int64_t)b->ny, (int64_t)b->nx);
    b->xa[1] = xpj_array_2d(b->out, XPJ_F32, (int64_t)b->ny, (int64_t)b->nx);
    break;
  case K_HIST:
    b->xa[0] = xpj_array_1d(b->in[0], XPJ_U8, (int64_t)b->n);
    b->xa[1] = xpj_array_1d(b->out, XPJ_U32, 256);
    break;
  }
  return 0;
}

/* One xpjit run: launch, wait (and finish on the host). */
static int xpjit_run(bench *b, result *r, double *sum) {
  xpj_arg args[4];
  xpj_range rg;
  unsigned na = 0;
  xpj_status st = XPJ_OK;
  switch (b->kind) {
  case K_TRIAD:
  case K_TRIAD64:
    args[0] = xpj_arg_array(&b->xa[0]);
    args[1] = xpj_arg_array(&b->xa[1]);
    args[2] = xpj_arg_array(&b->xa[2]);
    args[3] = b->kind == K_TRIAD ? xpj_arg_f32(b->scal) : xpj_arg_f64(b->scal);
    na = 4;
    rg = xpj_range_1d(b->n, b->id == K_TRIAD_ND ? 256 : 0);
    break;
  case K_REDUCE:
    args[0] = xpj_arg_array(&b->xa[0]);
    args[1] = xpj_arg_array(&b->xa[1]);
    na = 2;
    rg = xpj_range_1d(b->groups * RED_LOCAL, RED_LOCAL);
    break;
  case K_MATMUL:
    args[0] = xpj_arg_array(&b->xa[0]);
    args[1] = xpj_arg_array(&b->xa[1]);
    args[2] = xpj_arg_array(&b->xa[2]);
    na = 3;
    if (b->id == K_MATMUL)
      rg = xpj_range_2d(b->n / MM_RV, b->n / MM_ROWS, MM_BLOCK / MM_RV, MM_BLOCK / MM_ROWS);
    else
      rg = xpj_range_2d(b->n, b->n, TILE, TILE);
    break;
  case K_STENCIL: {
    args[0] = xpj_arg_array(&b->xa[0]);
    args[1] = xpj_arg_array(&b->xa[1]);
    na = 2;
    xpj_range edges = xpj_range_1d(2 * b->nx + 2 * (b->ny - 2), 0);
    st = xpj_launch(X.q, b->xk2, &edges, na, args, NULL);
    rg = xpj_range_2d(b->nx - 2, b->ny - 2, 0, 0);
    break;
  }
  case K_HIST: {
    uint32_t zero = 0;
    st = xpj_enqueue_fill(X.q, b->out, &zero, sizeof zero, 256 * sizeof zero, NULL);
    args[0] = xpj_arg_array(&b->xa[0]);
    args[1] = xpj_arg_array(&b->xa[1]);
    na = 2;
    rg = xpj_range_1d(b->groups * HIST_LOCAL, HIST_LOCAL);
    break;
  }
  default:
    return -1;
  }
  if (st == XPJ_OK)
    st = xpj_launch(X.q, b->xk, &rg, na, args, NULL);
  if (st != XPJ_OK) {
    result_msg(r, ST_FAIL, "launch: %s: %s", xpj_status_name(st), xpj_last_error());
    xpj_queue_wait(X.q);
    return -1;
  }
  st = xpj_queue_wait(X.q);
  if (st != XPJ_OK) {
    result_msg(r, ST_FAIL, "xpj_queue_wait: %s: %s", xpj_status_name(st), xpj_last_error());
    return -1;
  }
  if (b->kind == K_REDUCE) {
    const float *part = b->aux;
    float s = 0.0f;
    for (size_t g = 0; g < b->groups; g++)
      s += part[g];
    *sum = s;
  }
  return 0;
}

static int pocl_prepare(bench *b, result *r) {
  static const char *const file[NKERN] = {
      "triad.cl",  NULL, "triad.cl",    "reduce_sum.cl", NULL,
      "matmul.cl", "matmul_tiled16.cl", "jacobi5.cl",    "histogram.cl"};
  static const char *const kname[NKERN] = {
      "triad",  NULL, "triad",          "reduce_sum", NULL,
      "matmul", "matmul_tiled16", "jacobi5_interior", "histogram"};
  static const char *const opts[NKERN] = {"-DT=float", NULL, "-DT=double -DUSE_FP64",
                                          "-DT=float", NULL,
                                          "-DT=float", "-DT=float",
                                          "-DT=float", ""};
  char msg[512];
  b->ck = pocl_build(file[b->id], opts[b->id], kname[b->id], &b->cp, &r->compile_ms, msg,
                     sizeof msg);
  if (!b->ck) {
    result_msg(r, ST_FAIL, "%s", msg);
    return -1;
  }
  cl_int e = 0;
  if (b->kind == K_STENCIL && !(b->ck2 = cl.CreateKernel(b->cp, "jacobi5_edges", &e))) {
    result_msg(r, ST_FAIL, "clCreateKernel jacobi5_edges: error %d", e);
    return -1;
  }
  /* buffers over the shared data: in[0], in[1], out, aux */
  void *host[4] = {b->in[0], b->in[1], b->out, b->aux};
  size_t bytes[4] = {b->in_bytes[0], b->in_bytes[1], b->out_bytes, b->aux_bytes};
  for (int i = 0; i < 4; i++)
    if (host[i] && !(b->cm[i] = pocl_wrap(host[i], bytes[i], msg, sizeof msg))) {
      result_msg(r, ST_FAIL, "%s", msg);
      return -1;
    }
  cl_long n = (cl_long)b->n, ny = (cl_long)b->ny, nx = (cl_long)b->nx;
  cl_kernel k = b->ck;
  switch (b->kind) {
  case K_TRIAD:
  case K_TRIAD64: {
    float s32 = b->scal;
    double s64 = b->scal;
    e |= cl.SetKernelArg(k, 0, sizeof(cl_mem), &b->cm[2]);
    e |= cl.SetKernelArg(k, 1, sizeof(cl_mem), &b->cm[0]);
    e |= cl.SetKernelArg(k, 2, sizeof(cl_mem), &b->cm[1]);
    if (b->kind == K_TRIAD)
      e |= cl.SetKernelArg(k, 3, sizeof s32, &s32);
    else
      e |= cl.SetKernelArg(k, 3, sizeof s64, &s64);
    break;
  }
  case K_REDUCE:
    e |= cl.SetKernelArg(k, 0, sizeof(cl_mem), &b->cm[0]);
    e |= cl.SetKernelArg(k, 1, sizeof n, &n);
    e |= cl.SetKernelArg(k, 2, sizeof(cl_mem), &b->cm[3]);
    break;
  case K_MATMUL:
    e |= cl.SetKernelArg(k, 0, sizeof(cl_mem), &b->cm[0]);
    e |= cl.SetKernelArg(k, 1, sizeof(cl_mem), &b->cm[1]);
    e |= cl.SetKernelArg(k, 2, sizeof(cl_mem), &b->cm[2]);
    e |= cl.SetKernelArg(k, 3, sizeof n, &n);
    e |= cl.SetKernelArg(k, 4, sizeof n, &n);
    e |= cl.SetKernelArg(k, 5, sizeof n, &n);
    break;
  case K_STENCIL:
    for (int i = 0; i < 2; i++) {
      k = i ? b->ck2 : b->ck;
      e |= cl.SetKernelArg(k, 0, sizeof(cl_mem), &b->cm[0]);
      e |= cl.SetKernelArg(k, 1, sizeof(cl_mem), &b->cm[2]);
      e |= cl.SetKernelArg(k, 2, sizeof ny, &ny);
      e |= cl.SetKernelArg(k, 3, sizeof nx, &nx);
    }
    break;
  case K_HIST:
    e |= cl.SetKernelArg(k, 0, sizeof(cl_mem), &b->cm[0]);
    e |= cl.SetKernelArg(k, 1, sizeof n, &n);
    e |= cl.SetKernelArg(k, 2, sizeof(cl_mem), &b->cm[2]);
    break;
  }
  if (e != CL_SUCCESS) {
    result_msg(r, ST_FAIL, "clSetKernelArg failed");
    return -1;
  }
  return 0;
}

static int pocl_run(bench *b, result *r, double *sum) {
  size_t gws[2], lws[2];
  const size_t *lp = NULL;
  cl_uint dims = 1;
  cl_int e = CL_SUCCESS;
  switch (b->kind) {
  case K_TRIAD:
  case K_TRIAD64:
    gws[0] = b->n;
    break;
  case K_REDUCE:
    gws[0] = b->groups * RED_LOCAL;
    lws[0] = RED_LOCAL;
    lp = lws;
    break;
  case K_MATMUL:
    if (b->id == K_MATMUL) {
      gws[0] = b->n / MM_RV;
      gws[1] = b->n / MM_ROWS;
      lws[0] = MM_BLOCK / MM_RV;
      lws[1] = MM_BLOCK / MM_ROWS;
    } else {
      gws[0] = gws[1] = b->n;
      lws[0] = lws[1] = TILE;
    }
    lp = lws;
    dims = 2;
    break;
  case K_STENCIL: {
    size_t edges = 2 * b->nx + 2 * (b->ny - 2);
    e = cl.EnqueueNDRangeKernel(P.q, b->ck2, 1, NULL, &edges, NULL, 0, NULL, NULL);
    gws[0] = b->nx - 2;
    gws[1] = b->ny - 2;
    dims = 2;
    break;
  }
  case K_HIST: {
    cl_uint zero = 0;
    e = cl.EnqueueFillBuffer(P.q, b->cm[2], &zero, sizeof zero, 0, 256 * sizeof zero, 0, NULL,
                             NULL);
    gws[0] = b->groups * HIST_LOCAL;
    lws[0] = HIST_LOCAL;
    lp = lws;
    break;
  }
  }
  if (e == CL_SUCCESS)
    e = cl.EnqueueNDRangeKernel(P.q, b->ck, dims, NULL, gws, lp, 0, NULL, NULL);
  if (e == CL_SUCCESS && b->kind == K_REDUCE)
    e = cl.EnqueueReadBuffer(P.q, b->cm[3], CL_TRUE, 0, b->aux_bytes, b->cpart, 0, NULL, NULL);
  if (e == CL_SUCCESS)
    e = cl.Finish(P.q);
  if (e != CL_SUCCESS) {
    result_msg(r, ST_FAIL, "OpenCL error %d", e);
    return -1;
  }
  if (b->kind == K_REDUCE) {
    float s = 0.0f;
    for (size_t g = 0; g < b->groups; g++)
      s += b->cpart[g];
    *sum = s;
  }
  return 0;
}

static int omp_run(bench *b, result *r, double *sum) {
  (void)r;
  switch (b->kind) {
  case K_TRIAD:
    cpu_omp_triad_f32(b->out, b->in[0], b->in[1], b->scal, b->n);
    break;
  case K_TRIAD64:
    cpu_omp_triad_f64(b->out, b->in[0], b->in[1], b->scal, b->n);
    break;
  case K_REDUCE:
    *sum = cpu_omp_sum_f32(b->in[0], b->n);
    break;
  case K_MATMUL:
    cpu_omp_matmul_f32(b->in[0], b->in[1], b->out, b->n);
    break;
  case K_STENCIL:
    cpu_omp_jacobi5_f32(b->in[0], b->out, b->ny, b->nx);
    break;
  case K_HIST:
    cpu_omp_histogram_u8(b->in[0], b->n, b->out);
    break;
  }
  return 0;
}

static int run_impl(bench *b, int impl, double *sum) {
  switch (impl) {
  case I_XPJIT:
    return xpjit_run(b, &b->r[impl], sum);
  case I_POCL:
    return pocl_run(b, &b->r[impl], sum);
  default:
    return omp_run(b, &b->r[impl], sum);
  }
}

/* Buffer i (0, 1: inputs, 2: output, 3: partials) as the host may read or
 * write it: for PoCL mapped (unmap with host_unview). */
static void *host_view(bench *b, int impl, int i, cl_map_flags flags, void **mapped) {
  void *host[4] = {b->in[0], b->in[1], b->out, b->aux};
  size_t bytes[4] = {b->in_bytes[0], b->in_bytes[1], b->out_bytes, b->aux_bytes};
  *mapped = NULL;
  if (impl != I_POCL || !host[i])
    return host[i];
  cl_int e = 0;
  void *p = cl.EnqueueMapBuffer(P.q, b->cm[i], CL_TRUE, flags, 0, bytes[i], 0, NULL, NULL, &e);
  *mapped = p;
  return p;
}

static void host_unview(bench *b, int i, void *mapped) {
  if (mapped) {
    cl.EnqueueUnmapMemObject(P.q, b->cm[i], mapped, 0, NULL, NULL);
    cl.Finish(P.q);
  }
}

/* Prepares impl (compile, buffers) and makes the checked run on a
 * poisoned output. Returns 0 when impl is ready to be timed. */
static int check_impl(bench *b, int impl) {
  result *r = &b->r[impl];
  if (impl == I_XPJIT && !X.ok) {
    result_msg(r, ST_NA, "not available: %s", X.why);
    return -1;
  }
  if (impl == I_POCL && !P.ok) {
    result_msg(r, ST_NA, "not available: %s", P.why);
    return -1;
  }
  if (impl == I_OMP && !opt_omp) {
    result_msg(r, ST_NA, "disabled (--no-omp)");
    return -1;
  }
  if (impl != I_XPJIT && xpjit_only[b->id]) {
    result_msg(r, ST_NA, "xpjit-only variant: the peers are in row %s", kern_name[b->kind]);
    return -1;
  }
  if (impl == I_XPJIT && xpjit_prepare(b, r) != 0)
    return -1;
  if (impl == I_POCL && pocl_prepare(b, r) != 0)
    return -1;

  /* poison: NaN, and 0xffffffff counts */
  void *mapped;
  for (int i = 2; i < 4; i++) {
    size_t bytes = i == 2 ? b->out_bytes : b->aux_bytes;
    if (!bytes)
      continue;
    void *o = host_view(b, impl, i, CL_MAP_WRITE, &mapped);
    if (!o) {
      result_msg(r, ST_FAIL, "cannot map buffer %d", i);
      return -1;
    }
    memset(o, 0xff, bytes);
    host_unview(b, i, mapped);
  }
  double sum = NAN;
  double t0 = now_s();
  if (run_impl(b, impl, &sum) != 0)
    return -1;
  r->first = now_s() - t0;
  const void *o = b->out ? host_view(b, impl, 2, CL_MAP_READ, &mapped) : NULL;
  if (b->out && !o) {
    result_msg(r, ST_FAIL, "cannot map the output buffer");
    return -1;
  }
  int bad = bench_check(b, o, sum, r);
  if (b->out)
    host_unview(b, 2, mapped);
  return bad ? -1 : 0;
}

/* Times the ready implementations in ROUNDS interleaved blocks (so that
 * the load of a noisy machine spreads over all of them): in each round
 * each implementation makes 20 ms of untimed runs, then runs at least
 * runs/ROUNDS times and min-time/ROUNDS seconds. The median of all timed
 * runs is reported. */
enum { ROUNDS = 10, MAX_RUNS = 4000 };

static void time_impls(bench *b, const bool ready[NIMPL]) {
  double *t[NIMPL] = {NULL}, warm[NIMPL] = {0};
  int n[NIMPL] = {0};
  for (int impl = 0; impl < NIMPL; impl++) {
    if (!ready[impl])
      continue;
    t[impl] = malloc(MAX_RUNS * sizeof(double));
    double sum, s0 = now_s();
    /* warm-up */
    if (run_impl(b, impl, &sum) != 0) {
      free(t[impl]);
      t[impl] = NULL;
    }
    warm[impl] = now_s() - s0;
  }
  const double block_warm = 0.02;
  int block_runs = (opt_runs + ROUNDS - 1) / ROUNDS;
  double block_time = opt_min_time / ROUNDS;
  /* a kernel that takes more than 0.2 s a run: one run per round */
  for (int impl = 0; impl < NIMPL; impl++)
    if (t[impl] && warm[impl] > 0.2)
      block_runs = 1;
  for (int round = 0; round < ROUNDS; round++) {
    for (int impl = 0; impl < NIMPL; impl++) {
      if (!t[impl])
        continue;
      double total = 0, sum;
      /* untimed runs first (not for kernels slower than 0.2 s), for 20 ms
       * and at least one: the previous implementation's threads stop
       * spinning (libgomp spins for a few ms after a parallel region) and
       * this one's threads wake up */
      for (double w0 = now_s(); t[impl] && warm[impl] < 0.2 && now_s() - w0 < block_warm;)
        if (run_impl(b, impl, &sum) != 0) {
          free(t[impl]);
          t[impl] = NULL;
        }
      if (!t[impl])
        continue;
      for (int k = 0; (k < block_runs || total < block_time) && n[impl] < MAX_RUNS; k++) {
        double s0 = now_s();
        if (run_impl(b, impl, &sum) != 0) {
          free(t[impl]);
          t[impl] = NULL;
          break;
        }
        double dt = now_s() - s0;
        t[impl][n[impl]++] = dt;
        total += dt;
      }
    }
  }
  for (int impl = 0; impl < NIMPL; impl++) {
    if (!t[impl])
      continue;
    result *r = &b->r[impl];
    int m = n[impl];
    qsort(t[impl], (size_t)m, sizeof(double), cmp_double);
    r->med = m % 2 ? t[impl][m / 2] : (t[impl][m / 2 - 1] + t[impl][m / 2]) / 2;
    r->min = t[impl][0];
    r->max = t[impl][m - 1];
    r->runs = m;
    r->state = ST_OK;
    free(t[impl]);
  }
}

/* ---- report --------------------------------------------------------------- */

static void cpu_model(char *buf, size_t size) {
  snprintf(buf, size, "unknown CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f)
    return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) == 0) {
      char *c = strchr(line, ':');
      if (c) {
        c++;
        while (*c == ' ')
          c++;
        c[strcspn(c, "\n")] = 0;
        snprintf(buf, size, "%s", c);
      }
      break;
    }
  }
  fclose(f);
}

/* /proc/loadavg: the 1, 5 and 15 minute load averages */
static void loadavg(char *buf, size_t size) {
  snprintf(buf, size, "unknown");
  FILE *f = fopen("/proc/loadavg", "r");
  if (!f)
    return;
  double a = 0, b = 0, c = 0;
  if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
    snprintf(buf, size, "load average %.2f %.2f %.2f", a, b, c);
  fclose(f);
}

static double rate(const bench *b, int impl) {
  const result *r = &b->r[impl];
  if (r->state != ST_OK || r->med <= 0)
    return 0;
  return b->work / r->med / 1e9;
}

static void cell_rate(char *buf, size_t size, const bench *b, int impl) {
  const result *r = &b->r[impl];
  if (r->state == ST_OK)
    snprintf(buf, size, "%.2f", rate(b, impl));
  else if (r->state == ST_FAIL)
    snprintf(buf, size, "FAIL");
  else
    snprintf(buf, size, "-");
}

/* pb: the row whose peers b is compared with (b itself, or the base row
 * of an xpjit-only variant) */
static void cell_ratio(char *buf, size_t size, const bench *b, const bench *pb, int peer) {
  double x = rate(b, I_XPJIT), p = rate(pb, peer);
  if (x > 0 && p > 0)
    snprintf(buf, size, "%.2fx", x / p);
  else
    snprintf(buf, size, "-");
}

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--quick] [--scale F] [--kernel NAME[,NAME...]] [--threads N]\n"
          "          [--runs N] [--min-time SEC] [--xpk FILE] [--peers DIR]\n"
          "          [--opencl-lib PATH] [--no-pocl] [--no-omp] [--list]\n"
          "kernels: triad triad_nd triad_f64 reduction reduction_views matmul matmul_tiled16\n"
          "         stencil histogram (default: all)\n",
          argv0);
  exit(2);
}

static void select_kernels(const char *list, const char *argv0) {
  char *copy = strdup(list), *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int k = 0;
    while (k < NKERN && strcmp(tok, kern_name[k]) != 0)
      k++;
    if (k == NKERN) {
      fprintf(stderr, "%s: unknown kernel '%s'\n", argv0, tok);
      usage(argv0);
    }
    want[k] = true;
  }
  free(copy);
}

int main(int argc, char **argv) {
  bool any = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has = i + 1 < argc;
    if (strcmp(a, "--quick") == 0) {
      opt_scale = 1.0 / 16;
      opt_runs = 5;
      opt_min_time = 0.1;
    } else if (strcmp(a, "--scale") == 0 && has) {
      opt_scale = atof(argv[++i]);
    } else if (strcmp(a, "--kernel") == 0 && has) {
      select_kernels(argv[++i], argv[0]);
      any = true;
    } else if (strcmp(a, "--threads") == 0 && has) {
      opt_threads = atoi(argv[++i]);
    } else if (strcmp(a, "--runs") == 0 && has) {
      opt_runs = atoi(argv[++i]);
    } else if (strcmp(a, "--min-time") == 0 && has) {
      opt_min_time = atof(argv[++i]);
    } else if (strcmp(a, "--xpk") == 0 && has) {
      opt_xpk = argv[++i];
    } else if (strcmp(a, "--peers") == 0 && has) {
      opt_peers = argv[++i];
    } else if (strcmp(a, "--opencl-lib") == 0 && has) {
      opt_opencl = argv[++i];
    } else if (strcmp(a, "--no-pocl") == 0) {
      opt_pocl = false;
    } else if (strcmp(a, "--no-omp") == 0) {
      opt_omp = false;
    } else if (strcmp(a, "--list") == 0) {
      for (int k = 0; k < NKERN; k++)
        printf("%s\n", kern_name[k]);
      return 0;
    } else {
      usage(argv[0]);
    }
  }
  if (!(opt_scale > 0) || opt_runs < 1 || opt_threads < 0)
    usage(argv[0]);
  if (!any)
    for (int k = 0; k < NKERN; k++)
      want[k] = true;
  if (opt_threads == 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    opt_threads = c > 0 ? (int)c : 1;
  }

  cpu_omp_setup(opt_threads);
  xpjit_init();
  pocl_init();

  /* header */
  char model[256];
  cpu_model(model, sizeof model);
  printf("bench/cpu: CPU kernels, xpjit vs OpenCL C on PoCL vs OpenMP C\n");
  printf("command:  ");
  for (int i = 0; i < argc; i++)
    printf(" %s", argv[i]);
  printf("\n");
  time_t now = time(NULL);
  char date[64];
  strftime(date, sizeof date, "%Y-%m-%d %H:%M", localtime(&now));
  printf("date:      %s\n", date);
  char pt[32] = "-";
  if (P.ok)
    snprintf(pt, sizeof pt, "%u (compute units)", P.units);
  printf("machine:   %s, %ld online cores; threads: xpjit %u, OpenMP %d, PoCL %s\n", model,
         sysconf(_SC_NPROCESSORS_ONLN), X.ok ? X.info.compute_units : 0, cpu_omp_threads(),
         pt);
  if (X.ok)
    printf("xpjit:     LLVM %s, device %s (%s, %u compute units), target %.60s%s\n",
           xpj_llvm_version(), xpj_device_id(X.dev), X.info.name, X.info.compute_units,
           X.info.target, strlen(X.info.target) > 60 ? "..." : "");
  else {
    /* the product under test: its absence is a failure, unlike a peer's */
    failures++;
    printf("xpjit:     not available: %s (LLVM %s)\nFAIL xpjit: %s\n", X.why,
           xpj_llvm_version(), X.why);
    fprintf(stderr, "FAIL xpjit: %s\n", X.why);
  }
  if (P.ok)
    printf("PoCL:      %s, device %s\n", P.version, P.device);
  else
    printf("PoCL:      not available (%s)\n", P.why);
  printf("OpenMP:    %s, -O3 -march=native -fopenmp, OpenMP %d\n", cpu_omp_compiler(),
         cpu_omp_version());
  printf("timing:    median of >= %d runs and >= %.2g s per kernel and implementation, in %d "
         "interleaved rounds, after a checked run and a warm-up\n",
         opt_runs, opt_min_time, ROUNDS);
  static const char *const envs[] = {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_PROC_BIND",
                                     "XPJIT_CPU_THREADS", "POCL_CPU_MAX_CU_COUNT",
                                     "POCL_MAX_PTHREAD_COUNT", "POCL_KERNEL_CACHE"};
  printf("env:      ");
  for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++) {
    const char *v = getenv(envs[i]);
    if (v)
      printf(" %s=%s", envs[i], v);
  }
  printf("\n");
  char load[128];
  loadavg(load, sizeof load);
  printf("load:      %s (before)\n", load);
  fflush(stdout);

  bench benches[NKERN];
  memset(benches, 0, sizeof benches);
  for (int k = 0; k < NKERN; k++) {
    if (!want[k])
      continue;
    bench *b = &benches[k];
    b->id = k;
    b->kind = kern_base[k];
    bench_setup(b);
    bool ready[NIMPL];
    for (int impl = 0; impl < NIMPL; impl++) {
      ready[impl] = check_impl(b, impl) == 0;
      result *r = &b->r[impl];
      if (r->state == ST_FAIL) {
        failures++;
        printf("FAIL %s %s: %s\n", impl_name[impl], kern_name[k], r->msg);
        fprintf(stderr, "FAIL %s %s: %s\n", impl_name[impl], kern_name[k], r->msg);
      }
      fflush(stdout);
    }
    time_impls(b, ready);
    for (int impl = 0; impl < NIMPL; impl++)
      if (b->r[impl].state == ST_FAIL && ready[impl]) {
        failures++;
        printf("FAIL %s %s: %s\n", impl_name[impl], kern_name[k], b->r[impl].msg);
      }
    bench_teardown(b);
  }

  /* throughput table */
  printf("\n%-15s %-24s %-8s %9s %9s %9s %13s %11s\n", "kernel", "size", "unit", "xpjit",
         "PoCL", "OpenMP", "xpjit/OpenMP", "xpjit/PoCL");
  for (int k = 0; k < NKERN; k++) {
    if (!want[k])
      continue;
    const bench *b = &benches[k];
    char c[NIMPL][32], ro[32], rp[32];
    for (int impl = 0; impl < NIMPL; impl++)
      cell_rate(c[impl], sizeof c[impl], b, impl);
    const bench *pb = xpjit_only[k] ? &benches[kern_base[k]] : b;
    cell_ratio(ro, sizeof ro, b, pb, I_OMP);
    cell_ratio(rp, sizeof rp, b, pb, I_POCL);
    printf("%-15s %-24s %-8s %9s %9s %9s %13s %11s\n", kern_name[k], b->size, b->unit, c[0],
           c[1], c[2], ro, rp);
  }

  /* times */
  printf("\nmedian ms per run [min, max] (runs)\n");
  for (int k = 0; k < NKERN; k++) {
    if (!want[k])
      continue;
    const bench *b = &benches[k];
    printf("%-15s", kern_name[k]);
    for (int impl = 0; impl < NIMPL; impl++) {
      const result *r = &b->r[impl];
      char cellbuf[64];
      if (r->state == ST_OK)
        snprintf(cellbuf, sizeof cellbuf, "%.3f [%.3f, %.3f] (%d)", r->med * 1e3, r->min * 1e3,
                 r->max * 1e3, r->runs);
      else
        snprintf(cellbuf, sizeof cellbuf, "%s", r->state == ST_FAIL ? "FAIL" : "-");
      printf("  %s %-32s", impl_name[impl], cellbuf);
    }
    printf("\n");
  }

  /* compiles and first runs */
  printf("\ncompile and first run (ms): xpjit get_kernel (compile_millis), first run; "
         "PoCL clBuildProgram, first run (includes its work-group compile); OpenMP first run\n");
  for (int k = 0; k < NKERN; k++) {
    if (!want[k])
      continue;
    const bench *b = &benches[k];
    const result *x = &b->r[I_XPJIT], *p = &b->r[I_POCL], *o = &b->r[I_OMP];
    char xs[64] = "-", ps[64] = "-", os[32] = "-";
    if (x->state == ST_OK)
      snprintf(xs, sizeof xs, "%.1f (%.1f), %.1f", x->compile_ms, x->compile_info,
               x->first * 1e3);
    if (p->state == ST_OK)
      snprintf(ps, sizeof ps, "%.1f, %.1f", p->compile_ms, p->first * 1e3);
    if (o->state == ST_OK)
      snprintf(os, sizeof os, "%.1f", o->first * 1e3);
    printf("%-15s  xpjit %-26s  PoCL %-18s  OpenMP %s\n", kern_name[k], xs, ps, os);
  }

  /* goals */
  printf("\ngoals: streaming kernels (triad, triad_f64, reduction) >= 0.9x OpenMP; every "
         "kernel >= 1.0x PoCL\n");
  for (int k = 0; k < NKERN; k++) {
    if (!want[k] || xpjit_only[k])
      continue;
    const bench *b = &benches[k];
    double x = rate(b, I_XPJIT), o = rate(b, I_OMP), p = rate(b, I_POCL);
    bool streaming = k == K_TRIAD || k == K_TRIAD64 || k == K_REDUCE;
    char go[64] = "", gp[64] = "";
    if (streaming && x > 0 && o > 0)
      snprintf(go, sizeof go, "vs OpenMP %.2fx: %s", x / o, x / o >= 0.9 ? "met" : "MISSED");
    if (x > 0 && p > 0)
      snprintf(gp, sizeof gp, "vs PoCL %.2fx: %s", x / p, x / p >= 1.0 ? "met" : "MISSED");
    printf("  %-15s %-26s %s\n", kern_name[k], go, gp);
  }
  /* why cells are empty: each reason once */
  for (int impl = 0; impl < NIMPL; impl++) {
    const char *last = NULL;
    for (int k = 0; k < NKERN; k++) {
      const result *r = &benches[k].r[impl];
      if (!want[k] || r->state != ST_NA || xpjit_only[k] || (last && !strcmp(last, r->msg)))
        continue;
      printf("%s: %s\n", impl_name[impl], r->msg);
      last = r->msg;
    }
  }
  for (int k = 0; k < NKERN; k++)
    for (int impl = 0; impl < NIMPL; impl++)
      if (want[k] && benches[k].r[impl].state == ST_FAIL)
        printf("FAIL %s %s: %s\n", impl_name[impl], kern_name[k], benches[k].r[impl].msg);
  loadavg(load, sizeof load);
  printf("load:      %s (after)\n", load);
  if (failures)
    printf("\n%d FAILURE%s\n", failures, failures > 1 ? "S" : "");

  if (X.ok)
    xpjit_fini();
  pocl_fini();
  return failures ? 1 : 0;
}
