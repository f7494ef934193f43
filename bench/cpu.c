/*
 * bench/cpu.c - CPU kernel throughput: the same xpjit kernels on xpjit's CPU
 * device and, as xpjit's SPIR-V, on Intel's OpenCL CPU runtime through
 * xpjit's OpenCL device; against the kernels in C with OpenMP, and in
 * OpenCL C on PoCL where PoCL is installed. The implementations take turns
 * in one run.
 *
 * Columns:
 *   xpjit-cpu  bench/cpu.xpk on xpjit's CPU device (native code)
 *   xpjit-ocl  the same kernels compiled by xpjit to SPIR-V and run by an
 *              OpenCL CPU runtime through xpjit's OpenCL device (a second
 *              context, visible "opencl"); by default the first OpenCL CPU
 *              device of Intel's runtime (sh tools/intel-ocl.sh installs it,
 *              export OCL_ICD_VENDORS=~/.cache/xpjit/intel-opencl/icd finds
 *              it). The anchor: the same kernels through the same front end,
 *              another vendor's CPU compiler and runtime.
 *   PoCL       OpenCL C twins of the kernels (bench/peers/cpu/NAME.cl, the
 *              same structure) built and run by PoCL; empty without it
 *   OpenMP     the kernels as C loops with OpenMP pragmas (bench/cpu_omp.c,
 *              compiled -O3 -march=native -fopenmp)
 * and the ratios xpjit-cpu/xpjit-ocl, xpjit-cpu/OpenMP and xpjit-cpu/PoCL
 * per kernel (> 1: the CPU device is faster), then the geometric means of
 * xpjit-cpu/xpjit-ocl, xpjit-cpu/OpenMP (and xpjit-cpu/PoCL when PoCL ran)
 * over the kernels that both ran, the two xpjit-only variants left out.
 *
 * Kernels (sizes at --scale 1; the OpenMP loops are the kernels' loops,
 * the work-items' loop `omp parallel for`, unless said otherwise):
 *   triad           a = b + s * c, 2^25 f32 (and triad_f64), a range kernel
 *   triad_nd        xpjit only: the same body as an nd-range kernel, local
 *                   size 256 (the CPU device splits range kernels
 *                   statically, nd-range kernels in dynamic chunks of
 *                   work-groups)
 *   reduction       sum of 2^25 f32: per work-group a partial sum (work-
 *                   items sum contiguous runs in 16 lanes, then a tree in
 *                   local memory), the partials added on the host; OpenMP
 *                   `parallel for simd reduction(+:)`
 *   reduction_views xpjit only: the same kernel without its fast path for
 *                   contiguous views (the peers are those of reduction)
 *   matmul_naive    1024 x 1024 f32, a 2-D range kernel: one element of c
 *                   per work-item, the k loop inside it (OpenMP: the
 *                   columns of a row in `omp simd` lanes)
 *   matmul_tiled16  the textbook tiled kernel: one element per work-item,
 *                   16 x 16 local-memory tiles (OpenMP: matmul's loop)
 *   matmul          register-blocked (4 x 16 per work-item) through 64 x 64
 *                   local-memory tiles; OpenMP a blocked i-k-j loop
 *   stencil         one Jacobi sweep of the 5-point stencil, 4096 x 4096
 *                   f32: a 2-D range kernel over the interior and a 1-D
 *                   one that copies the edges (two launches per run)
 *   matvec          y = A x, 8192 x 4096 f32: one row per work-item, the dot
 *                   product in 16 lanes (a 1-D range kernel)
 *   nbody           one all-pairs step of 16384 bodies, f32, softened: one
 *                   body per work-item, a loop over all bodies; writes the
 *                   accelerations and the new velocities (OpenMP: the
 *                   bodies in `parallel for simd` lanes)
 *   scan            inclusive prefix sums of 2^25 f32 within each work-
 *                   group of 256 (Hillis-Steele in local memory, barriers);
 *                   OpenMP a running sum per group
 *   softmax         softmax of each row of 16384 x 1024 f32: one row per
 *                   work-item (maximum, exp and its sum in 16 lanes, scale)
 *   histogram       256 bins of 2^27 random bytes, local atomics per group
 *                   and a global merge; OpenMP private histograms per
 *                   thread (an array reduction)
 * Dimension order: in a 2-D launch dimension 1 is the fast one (SYCL's
 * order: OpenCL's dimension 0, the CPU device's innermost work-item loop);
 * the 2-D kernels index row-major arrays the natural way, global_id(0) the
 * row and global_id(1) the column, and are launched as (rows, cols). The
 * OpenCL C twins use OpenCL's order (get_global_id(0) the column) and are
 * launched as (cols, rows): the same work-items in the same order.
 *
 * Every implementation uses the same data: allocations of xpjit's OpenCL
 * device (Intel's unified shared memory, host memory on a CPU device; the
 * CPU device's own when there is no OpenCL device), initialised in
 * parallel by OpenMP threads (first touch), used directly by the CPU
 * device and the OpenMP loops and wrapped with CL_MEM_USE_HOST_PTR for
 * PoCL. Before timing, each implementation's output is checked against a
 * reference computed here (the outputs are poisoned first; floats within a
 * tolerance fitting the kernel's arithmetic); a wrong result prints FAIL
 * and the exit status is 1.
 *
 * Timing: one checked run and one warm-up run per implementation, then the
 * implementations take turns in 10 rounds (a noisy machine's load falls on
 * all of them); each turn starts with 20 ms of untimed runs (the previous
 * runtime's threads stop spinning, this one's wake up), then runs
 * until each implementation has made at least --runs runs and spent
 * --min-time seconds (one run per round for kernels slower than 0.2 s);
 * the median wall time of a run is reported: xpj_launch + xpj_queue_wait
 * (both xpjit columns), clEnqueueNDRangeKernel + clFinish, the OpenMP
 * function call (the reduction includes adding the per-group partials on
 * the host, the histogram includes zeroing it).
 * Compiles are timed separately and excluded: xpj_program_get_kernel
 * (through xpjit's caches, so usually a hit; for xpjit-ocl SPIR-V and the
 * driver's build of it, or the driver's binary from the cache;
 * compile_millis is the compile's own time, also when cached), and PoCL's
 * clBuildProgram (with its kernel cache off, POCL_KERNEL_CACHE=0, unless
 * set in the environment; PoCL compiles the work-group function at the
 * first launch, which is reported as "first run").
 *
 * Throughput: GB/s = bytes an OpenMP loop reads and writes once (triad 3
 * arrays, reduction 1, stencil, scan and softmax 2, matvec the matrix and
 * both vectors, histogram the bytes), GFLOP/s = 2 N^3 / t for the matmuls
 * and 20 flops per interaction (n^2 of them) for nbody.
 *
 * Threads: the CPU device gets --threads (default: one per online core),
 * OpenMP the same number, PoCL the same through POCL_CPU_MAX_CU_COUNT /
 * POCL_MAX_PTHREAD_COUNT (unless set); Intel's runtime chooses its own
 * (TBB's, one per core by default; the header shows its
 * CL_CONFIG_CPU_TBB_NUM_WORKERS where that is set).
 *
 * usage: cpu [--quick] [--scale F] [--kernel NAME[,NAME...]] [--threads N]
 *            [--runs N] [--min-time SEC] [--xpk FILE] [--peers DIR]
 *            [--ocl FILTER] [--no-ocl] [--opencl-lib PATH]
 *            [--pocl-platform NAME] [--no-pocl] [--no-omp] [--list]
 *            [--checks bounds]
 * --checks: both xpjit columns compiled with those checks (the context
 * option, as XPJIT_CHECK): their cost is the ratio to OpenMP here against
 * that of a run without (docs/benchmarks.md).
 * --ocl: the xpjit device filter of the xpjit-ocl column (default
 * "opencl:cpu", Intel's device first). --pocl-platform: the OpenCL
 * platform (a part of its name) that runs the OpenCL C twins, default
 * "Portable Computing Language"; another one ("Intel") checks the twins
 * where PoCL is missing, in a column then named OCL-C.
 *
 * PoCL is reached through the OpenCL ICD loader (libOpenCL.so.1, opened
 * with dlopen at run time); without it, or without a PoCL platform, the
 * PoCL column is empty ("PoCL: not available") and the rest runs; so does
 * an empty xpjit-ocl column ("xpjit-ocl: not available").
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
void cpu_omp_matmul_naive_f32(const float *a, const float *b, float *c, size_t n);
void cpu_omp_matmul_f32(const float *a, const float *b, float *c, size_t n);
void cpu_omp_jacobi5_f32(const float *u, float *out, size_t ny, size_t nx);
void cpu_omp_matvec_f32(const float *a, const float *x, float *y, size_t m, size_t k);
void cpu_omp_nbody_f32(const float *p, const float *v, float *vnew, float *acc, size_t n,
                       float dt, float eps2);
void cpu_omp_scan_group_f32(const float *x, float *y, size_t n, size_t group);
void cpu_omp_softmax_f32(const float *x, float *y, size_t rows, size_t n);
void cpu_omp_histogram_u8(const uint8_t *data, size_t n, uint32_t *hist);

/* ---- implementations, kernels and options --------------------------------- */

enum { I_CPU, I_OCL, I_POCL, I_OMP, NIMPL };
static const char *impl_name[NIMPL] = {"xpjit-cpu", "xpjit-ocl", "PoCL", "OpenMP"};

/* the rows of the report, in order */
enum {
  K_TRIAD,
  K_TRIAD_ND,
  K_TRIAD64,
  K_REDUCE,
  K_REDUCE_VIEWS,
  K_MM_NAIVE,
  K_MM_TILED16,
  K_MATMUL,
  K_STENCIL,
  K_MATVEC,
  K_NBODY,
  K_SCAN,
  K_SOFTMAX,
  K_HIST,
  NKERN
};

static double opt_scale = 1.0;
static int opt_runs = 10;
static double opt_min_time = 0.5;
static int opt_threads = 0;
static const char *opt_xpk = "bench/cpu.xpk";
static const char *opt_peers = "bench/peers/cpu";
static const char *opt_opencl = "libOpenCL.so.1";
static const char *opt_ocl = "opencl:cpu";
static const char *opt_pocl_platform = "Portable Computing Language";
static bool opt_ocl_on = true, opt_pocl = true, opt_omp = true;
static unsigned opt_checks; /* --checks: XPJ_CHECK_* of both xpjit columns */
static bool want[NKERN];
static int failures;

/* work-group geometry of the nd-range kernels */
enum { RED_LOCAL = 256, RED_CHUNK = 262144, HIST_LOCAL = 256, HIST_CHUNK = 262144, TILE = 16,
       MM_BLOCK = 64, MM_RV = 16, MM_ROWS = 4, SCAN_LOCAL = 256, LANES = 16 };

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t round_to(double v, size_t m) {
  size_t r = (size_t)(v / (double)m + 0.5) * m;
  return r < m ? m : r;
}

static const char *fmt_bytes(char *buf, size_t size, double b) {
  if (b >= 1024.0 * 1024 * 1024)
    snprintf(buf, size, "%.1f GiB", b / (1024.0 * 1024 * 1024));
  else
    snprintf(buf, size, "%.0f MiB", b / (1024.0 * 1024));
  return buf;
}

static const char *fmt_count(char *buf, size_t size, size_t n) {
  if (n && (n & (n - 1)) == 0) {
    int e = 0;
    while ((1ull << e) < n)
      e++;
    snprintf(buf, size, "2^%d", e);
  } else {
    snprintf(buf, size, "%zu", n);
  }
  return buf;
}

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "cpu: out of memory (%zu bytes)\n", bytes);
    exit(1);
  }
  return p;
}

/* ---- xpjit: the CPU device and the OpenCL device ------------------------- */

typedef struct xdev {
  bool ok;
  char why[512];
  xpj_context *ctx;
  xpj_device *dev;
  xpj_queue *q;
  xpj_program *prog;
  xpj_device_info info;
} xdev;

static xdev X[2]; /* X[I_CPU], X[I_OCL] */

static void xdev_fail(xdev *x, xpj_status st) {
  snprintf(x->why, sizeof x->why, "%s: %s", xpj_status_name(st), xpj_last_error());
  oneline(x->why);
}

/* The device of the xpjit-ocl column: of the devices that match --ocl, the
 * first of Intel's runtime, else the first. */
static xpj_status select_ocl(xdev *x) {
  xpj_device *devs[16];
  unsigned n = 0;
  xpj_status st = xpj_device_list(x->ctx, opt_ocl, devs, 16, &n);
  if (st != XPJ_OK)
    return st;
  if (n == 0) {
    xpj_device *d;
    return xpj_device_select(x->ctx, opt_ocl, &d); /* the message says why */
  }
  x->dev = devs[0];
  for (unsigned i = 0; i < n && i < 16; i++) {
    xpj_device_info info;
    if (xpj_device_get_info(devs[i], &info) == XPJ_OK && strstr(info.vendor, "Intel")) {
      x->dev = devs[i];
      break;
    }
  }
  return XPJ_OK;
}

static void xdev_fini(xdev *x) {
  xpj_program_destroy(x->prog);
  xpj_queue_destroy(x->q);
  xpj_context_destroy(x->ctx);
}

static void xdev_init(int impl) {
  xdev *x = &X[impl];
  if (impl == I_OCL && !opt_ocl_on) {
    snprintf(x->why, sizeof x->why, "disabled (--no-ocl)");
    return;
  }
  xpj_context_desc cd = {.visible = impl == I_CPU ? "cpu" : "opencl",
                         .cpu_threads = (unsigned)opt_threads,
                         .checks = opt_checks};
  xpj_status st = xpj_context_create(&cd, &x->ctx);
  if (st == XPJ_OK)
    st = impl == I_CPU ? xpj_device_select(x->ctx, "cpu", &x->dev) : select_ocl(x);
  if (st == XPJ_OK)
    st = xpj_device_get_info(x->dev, &x->info);
  if (st == XPJ_OK)
    st = xpj_queue_create(x->dev, NULL, &x->q);
  if (st == XPJ_OK)
    st = xpj_program_create_file(x->ctx, opt_xpk, NULL, &x->prog);
  if (st != XPJ_OK) {
    xdev_fail(x, st);
    xdev_fini(x);
    return;
  }
  x->ok = true;
}

/* Memory for every implementation: shared allocations of the OpenCL device
 * (it takes only its own), else of the CPU device, else the C heap;
 * page-aligned (PoCL uses it in place). */
static xpj_device *mem_dev;

static void *bench_alloc(size_t bytes) {
  void *p = NULL;
  if (mem_dev) {
    if (xpj_mem_alloc(mem_dev, XPJ_MEM_SHARED, bytes, 4096, &p) != XPJ_OK) {
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
  if (mem_dev)
    xpj_mem_free(mem_dev, p);
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

/* PoCL's settings, before the ICD loader starts it (xpjit's OpenCL device
 * loads it too): the thread count, and no kernel cache (so that builds are
 * real compiles); the environment wins */
static void pocl_env(void) {
  char nt[16];
  snprintf(nt, sizeof nt, "%d", opt_threads);
  setenv("POCL_CPU_MAX_CU_COUNT", nt, 0);
  setenv("POCL_MAX_PTHREAD_COUNT", nt, 0);
  setenv("POCL_KERNEL_CACHE", "0", 0);
}

static void pocl_init(void) {
  if (!opt_pocl) {
    snprintf(P.why, sizeof P.why, "disabled (--no-pocl)");
    return;
  }
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
    if (strstr(name, opt_pocl_platform) &&
        cl.GetDeviceIDs(plats[i], CL_DEVICE_TYPE_CPU, 1, &d, &nd) == CL_SUCCESS && nd > 0) {
      P.plat = plats[i];
      P.dev = d;
    }
  }
  if (!P.plat) {
    snprintf(P.why, sizeof P.why, "no %s platform with a CPU device", opt_pocl_platform);
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

/* Builds bench/peers/cpu/FILE with opts (-DT=TYPE). */
static cl_program pocl_build(const char *file, const char *opts, double *ms, char *msg,
                             size_t msgsize) {
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
  return prog;
}

/* ---- one benchmark -------------------------------------------------------- */

typedef struct result {
  int state; /* ST_* */
  char msg[512];
  double med, min, max; /* seconds per run */
  int runs;
  double first;         /* seconds: the checked run */
  double compile_ms;    /* xpjit: get_kernel; PoCL: clBuildProgram */
  double compile_info;  /* xpjit: compile_millis from the kernel info */
} result;

enum { ST_NONE, ST_OK, ST_FAIL, ST_NA };

enum { MAXBUF = 4, MAXARG = 8, MAXSTEP = 2 };

/* An array of the benchmark's data, shared by the implementations. */
typedef struct databuf {
  void *p;
  size_t bytes;
  bool out;       /* an output: poisoned before each checked run */
  xpj_array view; /* as the xpjit kernels see it */
  cl_mem cm;      /* PoCL: the same memory */
} databuf;

/* A kernel argument: buffer `buf`, or (buf < 0) the scalar `s`. */
typedef struct karg {
  int buf;
  xpj_arg s;
} karg;

/* One launch of a run: kernel `kern` of the row (0 or 1) over `range`, in
 * xpjit's order (the OpenCL C twin's is the reverse), with the arguments of
 * the xpjit kernel and those of its OpenCL C twin. */
typedef struct step {
  int kern;
  xpj_range range;
  unsigned nx, nc;
  karg xa[MAXARG], ca[MAXARG];
} step;

typedef struct bench {
  int id; /* K_* */
  char size[96];
  const char *unit;
  double work; /* bytes or flops per run */
  size_t n, rows, cols, groups;
  databuf buf[MAXBUF];
  int nbuf;
  step steps[MAXSTEP];
  int nsteps;
  int zero_buf; /* >= 0: zeroed before the launches (in the time) */
  int sum_buf;  /* >= 0: f32 partials the host adds after the launches */
  double scal[2];
  /* references */
  void *ref;
  double ref_sum;
  /* xpjit: kernels per device; PoCL */
  xpj_kernel *xk[2][MAXSTEP];
  cl_program cp;
  cl_kernel ck[MAXSTEP];
  float *cpart; /* PoCL: host copy of the partials */
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

/* The row's size column, unit and work per run. */
static void describe(bench *b, const char *unit, double work, const char *fmt, ...) {
  b->unit = unit;
  b->work = work;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->size, sizeof b->size, fmt, ap);
  va_end(ap);
}

static size_t scalar_bytes(xpj_scalar t) {
  return t == XPJ_F64 || t == XPJ_I64 || t == XPJ_U64 ? 8 : t == XPJ_U8 ? 1 : 4;
}

/* Adds buffer b->nbuf: rows elements of t, or rows x cols (cols > 0). An
 * output is first touched by the OpenMP threads here; inputs are touched
 * when the caller fills them. */
static void *add_buf(bench *b, xpj_scalar t, size_t rows, size_t cols, bool out) {
  databuf *f = &b->buf[b->nbuf++];
  f->bytes = rows * (cols ? cols : 1) * scalar_bytes(t);
  f->p = bench_alloc(f->bytes);
  f->out = out;
  f->view = cols ? xpj_array_2d(f->p, t, (int64_t)rows, (int64_t)cols)
                 : xpj_array_1d(f->p, t, (int64_t)rows);
  if (out)
    cpu_omp_fill_bytes(f->p, f->bytes, 0);
  return f->p;
}

static karg BUF(int i) { return (karg){.buf = i}; }
static karg SCAL(xpj_arg s) { return (karg){.buf = -1, .s = s}; }
#define ARGS(...) (unsigned)(sizeof((karg[]){__VA_ARGS__}) / sizeof(karg)), (karg[]){__VA_ARGS__}

static void add_step(bench *b, int kern, xpj_range range, unsigned nx, const karg *xa,
                     unsigned nc, const karg *ca) {
  step *s = &b->steps[b->nsteps++];
  s->kern = kern;
  s->range = range;
  s->nx = nx;
  s->nc = nc;
  memcpy(s->xa, xa, nx * sizeof *xa);
  memcpy(s->ca, ca, nc * sizeof *ca);
}

/* ---- the kernels: sizes, data, references, launches; checks; OpenMP ------ */

/* triad, triad_nd, triad_f64: a = b + s * c */
static void triad_setup(bench *b) {
  bool f64 = b->id == K_TRIAD64;
  xpj_scalar t = f64 ? XPJ_F64 : XPJ_F32;
  size_t n = b->n = round_to(33554432.0 * opt_scale, 4096), es = scalar_bytes(t);
  char cnt[24], mem[24];
  describe(b, "GB/s", 3.0 * (double)(n * es), "%s %s (%s)", fmt_count(cnt, sizeof cnt, n),
           f64 ? "f64" : "f32", fmt_bytes(mem, sizeof mem, 3.0 * (double)(n * es)));
  add_buf(b, t, n, 0, true);
  void *x = add_buf(b, t, n, 0, false), *y = add_buf(b, t, n, 0, false);
  if (f64) {
    cpu_omp_fill_f64(x, n, 3, 0.0, 1.0);
    cpu_omp_fill_f64(y, n, 4, 0.0, 1.0);
  } else {
    cpu_omp_fill_f32(x, n, 1, 0.0f, 1.0f);
    cpu_omp_fill_f32(y, n, 2, 0.0f, 1.0f);
  }
  b->scal[0] = 3.0; /* the reference is computed while checking */
  karg s = SCAL(f64 ? xpj_arg_f64(3.0) : xpj_arg_f32(3.0f));
  add_step(b, 0, xpj_range_1d(n, b->id == K_TRIAD_ND ? 256 : 0),
           ARGS(BUF(0), BUF(1), BUF(2), s), ARGS(BUF(0), BUF(1), BUF(2), s));
}

static int triad_check(const bench *b, const void *const *v, double sum, result *r) {
  (void)sum;
  if (b->id == K_TRIAD64) {
    const double *a = v[0], *x = v[1], *y = v[2], s = b->scal[0];
    for (size_t i = 0; i < b->n; i++) {
      double want_v = x[i] + s * y[i];
      if (!(fabs(a[i] - want_v) <= 1e-15 * fabs(want_v))) {
        result_msg(r, ST_FAIL, "a[%zu] = %.17g, expected %.17g", i, a[i], want_v);
        return -1;
      }
    }
    return 0;
  }
  const float *a = v[0], *x = v[1], *y = v[2], s = (float)b->scal[0];
  for (size_t i = 0; i < b->n; i++) {
    float want_v = x[i] + s * y[i];
    if (!(fabsf(a[i] - want_v) <= 1e-6f * fabsf(want_v))) {
      result_msg(r, ST_FAIL, "a[%zu] = %.9g, expected %.9g", i, (double)a[i], (double)want_v);
      return -1;
    }
  }
  return 0;
}

static double triad_omp(bench *b) {
  if (b->id == K_TRIAD64)
    cpu_omp_triad_f64(b->buf[0].p, b->buf[1].p, b->buf[2].p, b->scal[0], b->n);
  else
    cpu_omp_triad_f32(b->buf[0].p, b->buf[1].p, b->buf[2].p, (float)b->scal[0], b->n);
  return NAN;
}

/* reduction, reduction_views: per-group partial sums, added on the host */
static void reduce_setup(bench *b) {
  size_t n = b->n = round_to(33554432.0 * opt_scale, RED_CHUNK);
  b->groups = n / RED_CHUNK;
  char cnt[24], mem[24];
  describe(b, "GB/s", (double)(n * 4), "%s f32 (%s)", fmt_count(cnt, sizeof cnt, n),
           fmt_bytes(mem, sizeof mem, (double)(n * 4)));
  float *x = add_buf(b, XPJ_F32, n, 0, false);
  add_buf(b, XPJ_F32, b->groups, 0, true);
  cpu_omp_fill_f32(x, n, 5, 0.0f, 1.0f);
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += x[i];
  b->ref_sum = s;
  b->sum_buf = 1;
  add_step(b, 0, xpj_range_1d(b->groups * RED_LOCAL, RED_LOCAL), ARGS(BUF(0), BUF(1)),
           ARGS(BUF(0), SCAL(xpj_arg_i64((int64_t)n)), BUF(1)));
}

static int reduce_check(const bench *b, const void *const *v, double sum, result *r) {
  (void)v;
  if (!(fabs(sum - b->ref_sum) <= 1e-5 * fabs(b->ref_sum))) {
    result_msg(r, ST_FAIL, "sum = %.9g, expected %.9g (relative error %.2g)", sum, b->ref_sum,
               fabs(sum - b->ref_sum) / fabs(b->ref_sum));
    return -1;
  }
  return 0;
}

static double reduce_omp(bench *b) { return cpu_omp_sum_f32(b->buf[0].p, b->n); }

/* matmul_naive, matmul_tiled16, matmul: c = a * b, n x n */
static void matmul_setup(bench *b) {
  size_t n = b->n = round_to(1024.0 * cbrt(opt_scale), MM_BLOCK);
  describe(b, "GFLOP/s", 2.0 * (double)n * (double)n * (double)n, "%zux%zu f32", n, n);
  float *a = add_buf(b, XPJ_F32, n, n, false), *bb = add_buf(b, XPJ_F32, n, n, false);
  add_buf(b, XPJ_F32, n, n, true);
  cpu_omp_fill_f32(a, n * n, 6, -1.0f, 1.0f);
  cpu_omp_fill_f32(bb, n * n, 7, -1.0f, 1.0f);
  xpj_range r = b->id == K_MM_NAIVE     ? xpj_range_2d(n, n, 0, 0)
                : b->id == K_MM_TILED16 ? xpj_range_2d(n, n, TILE, TILE)
                                        : xpj_range_2d(n / MM_ROWS, n / MM_RV,
                                                       MM_BLOCK / MM_ROWS, MM_BLOCK / MM_RV);
  karg len = SCAL(xpj_arg_i64((int64_t)n));
  add_step(b, 0, r, ARGS(BUF(0), BUF(1), BUF(2)), ARGS(BUF(0), BUF(1), BUF(2), len, len, len));
}

/* every row at 8 columns (both edges, 6 spread out), in double; the
 * tolerance scales with sum |a_ik * b_kj| */
static int matmul_check(const bench *b, const void *const *v, double sum, result *r) {
  (void)sum;
  const float *a = v[0], *bb = v[1], *c = v[2];
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
        result_msg(r, ST_FAIL, "c[%zu][%zu] = %.9g, expected %.9g", i, j, (double)c[i * n + j],
                   s);
        return -1;
      }
    }
  return 0;
}

static double matmul_omp(bench *b) {
  if (b->id == K_MM_NAIVE)
    cpu_omp_matmul_naive_f32(b->buf[0].p, b->buf[1].p, b->buf[2].p, b->n);
  else
    cpu_omp_matmul_f32(b->buf[0].p, b->buf[1].p, b->buf[2].p, b->n);
  return NAN;
}

/* stencil: one Jacobi sweep, ny x nx; the edges, then the interior */
static void stencil_setup(bench *b) {
  size_t ny = b->rows = round_to(4096.0 * sqrt(opt_scale), 16), nx = b->cols = ny;
  char mem[24];
  describe(b, "GB/s", 8.0 * (double)(ny * nx), "%zux%zu f32 (%s)", ny, nx,
           fmt_bytes(mem, sizeof mem, 8.0 * (double)(ny * nx)));
  float *u = add_buf(b, XPJ_F32, ny, nx, false);
  add_buf(b, XPJ_F32, ny, nx, true);
  cpu_omp_fill_f32(u, ny * nx, 8, 0.0f, 1.0f);
  float *ref = b->ref = xmalloc(ny * nx * 4);
  for (size_t i = 0; i < ny; i++)
    for (size_t j = 0; j < nx; j++) {
      size_t k = i * nx + j;
      if (i == 0 || j == 0 || i == ny - 1 || j == nx - 1)
        ref[k] = u[k];
      else
        ref[k] = 0.25f * (u[k - nx] + u[k + nx] + u[k - 1] + u[k + 1]);
    }
  karg sy = SCAL(xpj_arg_i64((int64_t)ny)), sx = SCAL(xpj_arg_i64((int64_t)nx));
  add_step(b, 1, xpj_range_1d(2 * nx + 2 * (ny - 2), 0), ARGS(BUF(0), BUF(1)),
           ARGS(BUF(0), BUF(1), sy, sx));
  add_step(b, 0, xpj_range_2d(ny - 2, nx - 2, 0, 0), ARGS(BUF(0), BUF(1)),
           ARGS(BUF(0), BUF(1), sy, sx));
}

static int stencil_check(const bench *b, const void *const *v, double sum, result *r) {
  (void)sum;
  const float *o = v[1], *ref = b->ref;
  for (size_t i = 0; i < b->rows * b->cols; i++)
    if (!(fabsf(o[i] - ref[i]) <= 1e-6f * fabsf(ref[i]))) {
      result_msg(r, ST_FAIL, "out[%zu][%zu] = %.9g, expected %.9g", i / b->cols, i % b->cols,
                 (double)o[i], (double)ref[i]);
      return -1;
    }
  return 0;
}

static double stencil_omp(bench *b) {
  cpu_omp_jacobi5_f32(b->buf[0].p, b->buf[1].p, b->rows, b->cols);
  return NAN;
}

/* matvec: y = a x, a rows x cols */
static void matvec_setup(bench *b) {
  size_t m = b->rows = round_to(8192.0 * sqrt(opt_scale), 64);
  size_t k = b->cols = round_to(4096.0 * sqrt(opt_scale), 64);
  double bytes = 4.0 * (double)(m * k + m + k);
  char mem[24];
  describe(b, "GB/s", bytes, "%zux%zu f32 (%s)", m, k, fmt_bytes(mem, sizeof mem, bytes));
  float *a = add_buf(b, XPJ_F32, m, k, false), *x = add_buf(b, XPJ_F32, k, 0, false);
  add_buf(b, XPJ_F32, m, 0, true);
  cpu_omp_fill_f32(a, m * k, 10, -1.0f, 1.0f);
  cpu_omp_fill_f32(x, k, 11, -1.0f, 1.0f);
  double *ref = b->ref = xmalloc(2 * m * sizeof(double)); /* y, sum |a x| per row */
  for (size_t i = 0; i < m; i++) {
    double s = 0, mag = 0;
    for (size_t j = 0; j < k; j++) {
      double p = (double)a[i * k + j] * (double)x[j];
      s += p;
      mag += fabs(p);
    }
    ref[2 * i] = s;
    ref[2 * i + 1] = mag;
  }
  add_step(b, 0, xpj_range_1d(m, 0), ARGS(BUF(0), BUF(1), BUF(2)),
           ARGS(BUF(0), BUF(1), BUF(2), SCAL(xpj_arg_i64((int64_t)k))));
}

/* each of the LANES partial sums adds cols / LANES products in order, then
 * the lanes pairwise: at most cols / LANES + log2(LANES) roundings */
static int matvec_check(const bench *b, const void *const *v, double sum, result *r) {
  (void)sum;
  const float *y = v[2];
  const double *ref = b->ref;
  double tol = (double)(b->cols / LANES + 8) * 1.2e-7;
  for (size_t i = 0; i < b->rows; i++)
    if (!(fabs((double)y[i] - ref[2 * i]) <= tol * ref[2 * i + 1] + 1e-30)) {
      result_msg(r, ST_FAIL, "y[%zu] = %.9g, expected %.9g", i, (double)y[i], ref[2 * i]);
      return -1;
    }
  return 0;
}

static double matvec_omp(bench *b) {
  cpu_omp_matvec_f32(b->buf[0].p, b->buf[1].p, b->buf[2].p, b->rows, b->cols);
  return NAN;
}

/* nbody: one step of n bodies; p (4 x n: x, y, z, mass) and v (3 x n) in,
 * vnew and acc (3 x n) out */
enum { NB_SAMPLE = 8 };

/* The bodies the reference has: every NB_SAMPLE-th and the last. */
static size_t nb_next(size_t i, size_t n) {
  return i + 1 == n ? n : i + NB_SAMPLE < n ? i + NB_SAMPLE : n - 1;
}

static void nbody_setup(bench *b) {
  size_t n = b->n = round_to(16384.0 * sqrt(opt_scale), 256);
  describe(b, "GFLOP/s", 20.0 * (double)n * (double)n, "%zu bodies f32", n);
  float *p = add_buf(b, XPJ_F32, 4, n, false), *v = add_buf(b, XPJ_F32, 3, n, false);
  add_buf(b, XPJ_F32, 3, n, true);
  add_buf(b, XPJ_F32, 3, n, true);
  cpu_omp_fill_f32(p, 3 * n, 12, -1.0f, 1.0f);
  cpu_omp_fill_f32(p + 3 * n, n, 13, 0.5f, 1.0f);
  cpu_omp_fill_f32(v, 3 * n, 14, -1.0f, 1.0f);
  b->scal[0] = 0.01;  /* dt */
  b->scal[1] = 0.01;  /* eps2 */
  /* per sampled body: acc x, y, z and sum |term| x, y, z, in double */
  double *ref = b->ref = xmalloc(6 * (n / NB_SAMPLE + 1) * sizeof(double));
  for (size_t i = 0, s = 0; i < n; i = nb_next(i, n), s++) {
    double a[3] = {0}, mag[3] = {0};
    for (size_t j = 0; j < n; j++) {
      double d[3], r2 = (float)b->scal[1]; /* the kernels' eps2 */
      for (int c = 0; c < 3; c++) {
        d[c] = (double)p[c * n + j] - (double)p[c * n + i];
        r2 += d[c] * d[c];
      }
      double w = (double)p[3 * n + j] / (r2 * sqrt(r2));
      for (int c = 0; c < 3; c++) {
        a[c] += w * d[c];
        mag[c] += fabs(w * d[c]);
      }
    }
    memcpy(ref + 6 * s, a, sizeof a);
    memcpy(ref + 6 * s + 3, mag, sizeof mag);
  }
  karg dt = SCAL(xpj_arg_f32((float)b->scal[0])), eps2 = SCAL(xpj_arg_f32((float)b->scal[1]));
  add_step(b, 0, xpj_range_1d(n, 0), ARGS(BUF(0), BUF(1), BUF(2), BUF(3), dt, eps2),
           ARGS(BUF(0), BUF(1), BUF(2), BUF(3), SCAL(xpj_arg_i64((int64_t)n)), dt, eps2));
}

/* the sampled accelerations against the reference, within 1e-4 of the sum
 * of the terms' magnitudes (n float additions in order, rsqrt within a few
 * ulp); every body's vnew = v + dt * acc */
static int nbody_check(const bench *b, const void *const *v, double sum, result *r) {
  (void)sum;
  const float *vel = v[1], *vnew = v[2], *acc = v[3];
  const double *ref = b->ref;
  size_t n = b->n;
  float dt = (float)b->scal[0];
  for (size_t i = 0, s = 0; i < n; i = nb_next(i, n), s++) {
    for (int c = 0; c < 3; c++) {
      double got = acc[c * n + i], want_v = ref[6 * s + c], mag = ref[6 * s + 3 + c];
      if (!(fabs(got - want_v) <= 1e-4 * mag + 1e-30)) {
        result_msg(r, ST_FAIL, "acc[%d][%zu] = %.9g, expected %.9g", c, i, got, want_v);
        return -1;
      }
    }
  }
  for (size_t i = 0; i < 3 * n; i++) {
    float want_v = vel[i] + dt * acc[i];
    if (!(fabsf(vnew[i] - want_v) <= 1e-6f * (fabsf(vel[i]) + fabsf(dt * acc[i])))) {
      result_msg(r, ST_FAIL, "vnew[%zu][%zu] = %.9g, expected %.9g (v + dt acc)", i / n, i % n,
                 (double)vnew[i], (double)want_v);
      return -1;
    }
  }
  return 0;
}

static double nbody_omp(bench *b) {
  cpu_omp_nbody_f32(b->buf[0].p, b->buf[1].p, b->buf[2].p, b->buf[3].p, b->n,
                    (float)b->scal[0], (float)b->scal[1]);
  return NAN;
}

/* scan: inclusive prefix sums within each group of SCAN_LOCAL */
static void scan_setup(bench *b) {
  size_t n = b->n = round_to(33554432.0 * opt_scale, SCAN_LOCAL);
  char cnt[24], mem[24];
  describe(b, "GB/s", 8.0 * (double)n, "%s f32 (%s)", fmt_count(cnt, sizeof cnt, n),
           fmt_bytes(mem, sizeof mem, 8.0 * (double)n));
  float *x = add_buf(b, XPJ_F32, n, 0, false);
  add_buf(b, XPJ_F32, n, 0, true);
  cpu_omp_fill_f32(x, n, 15, 0.0f, 1.0f);
  double *ref = b->ref = xmalloc(n * sizeof(double));
  for (size_t g = 0; g < n; g += SCAN_LOCAL) {
    double s = 0;
    for (size_t i = g; i < g + SCAN_LOCAL; i++)
      ref[i] = s += x[i];
  }
  add_step(b, 0, xpj_range_1d(n, SCAN_LOCAL), ARGS(BUF(0), BUF(1)), ARGS(BUF(0), BUF(1)));
}

/* positive terms: a sum of k of them in any order is within (k - 1) ulp */
static int scan_check(const bench *b, const void *const *v, double sum, result *r) {
  (void)sum;
  const float *y = v[1];
  const double *ref = b->ref;
  for (size_t i = 0; i < b->n; i++) {
    double tol = (double)(i % SCAN_LOCAL + 1) * 1.2e-7 * ref[i];
    if (!(fabs((double)y[i] - ref[i]) <= tol + 1e-30)) {
      result_msg(r, ST_FAIL, "y[%zu] = %.9g, expected %.9g (group %zu, item %zu)", i,
                 (double)y[i], ref[i], i / SCAN_LOCAL, i % SCAN_LOCAL);
      return -1;
    }
  }
  return 0;
}

static double scan_omp(bench *b) {
  cpu_omp_scan_group_f32(b->buf[0].p, b->buf[1].p, b->n, SCAN_LOCAL);
  return NAN;
}

/* softmax: of each row of rows x cols */
static void softmax_setup(bench *b) {
  size_t nr = b->rows = round_to(16384.0 * opt_scale, 64), nc = b->cols = 1024;
  char mem[24];
  describe(b, "GB/s", 8.0 * (double)(nr * nc), "%zux%zu f32 (%s)", nr, nc,
           fmt_bytes(mem, sizeof mem, 8.0 * (double)(nr * nc)));
  float *x = add_buf(b, XPJ_F32, nr, nc, false);
  add_buf(b, XPJ_F32, nr, nc, true);
  cpu_omp_fill_f32(x, nr * nc, 16, -8.0f, 8.0f);
  double *ref = b->ref = xmalloc(nr * nc * sizeof(double));
  for (size_t i = 0; i < nr; i++) {
    const float *xr = x + i * nc;
    double m = xr[0], s = 0;
    for (size_t j = 1; j < nc; j++)
      m = fmax(m, xr[j]);
    for (size_t j = 0; j < nc; j++)
      s += ref[i * nc + j] = exp((double)xr[j] - m);
    for (size_t j = 0; j < nc; j++)
      ref[i * nc + j] /= s;
  }
  add_step(b, 0, xpj_range_1d(nr, 0), ARGS(BUF(0), BUF(1)),
           ARGS(BUF(0), BUF(1), SCAL(xpj_arg_i64((int64_t)nc))));
}

/* exp within a few ulp, a sum of positive terms in 16 lanes, a reciprocal:
 * relative 1e-5 */
static int softmax_check(const bench *b, const void *const *v, double sum, result *r) {
  (void)sum;
  const float *y = v[1];
  const double *ref = b->ref;
  for (size_t i = 0; i < b->rows * b->cols; i++)
    if (!(fabs((double)y[i] - ref[i]) <= 1e-5 * ref[i] + 1e-37)) {
      result_msg(r, ST_FAIL, "y[%zu][%zu] = %.9g, expected %.9g", i / b->cols, i % b->cols,
                 (double)y[i], ref[i]);
      return -1;
    }
  return 0;
}

static double softmax_omp(bench *b) {
  cpu_omp_softmax_f32(b->buf[0].p, b->buf[1].p, b->rows, b->cols);
  return NAN;
}

/* histogram: 256 bins of n bytes; the bins are zeroed first */
static void hist_setup(bench *b) {
  size_t n = b->n = round_to(134217728.0 * opt_scale, HIST_CHUNK);
  b->groups = n / HIST_CHUNK;
  char cnt[24], mem[24];
  describe(b, "GB/s", (double)n, "%s u8 (%s)", fmt_count(cnt, sizeof cnt, n),
           fmt_bytes(mem, sizeof mem, (double)n));
  uint8_t *d = add_buf(b, XPJ_U8, n, 0, false);
  add_buf(b, XPJ_U32, 256, 0, true);
  cpu_omp_fill_u8(d, n, 9);
  uint32_t *ref = b->ref = xmalloc(256 * sizeof *ref);
  memset(ref, 0, 256 * sizeof *ref);
  for (size_t i = 0; i < n; i++)
    ref[d[i]]++;
  b->zero_buf = 1;
  add_step(b, 0, xpj_range_1d(b->groups * HIST_LOCAL, HIST_LOCAL), ARGS(BUF(0), BUF(1)),
           ARGS(BUF(0), SCAL(xpj_arg_i64((int64_t)n)), BUF(1)));
}

static int hist_check(const bench *b, const void *const *v, double sum, result *r) {
  (void)sum;
  const uint32_t *h = v[1], *ref = b->ref;
  for (int i = 0; i < 256; i++)
    if (h[i] != ref[i]) {
      result_msg(r, ST_FAIL, "hist[%d] = %u, expected %u", i, h[i], ref[i]);
      return -1;
    }
  return 0;
}

static double hist_omp(bench *b) {
  cpu_omp_histogram_u8(b->buf[0].p, b->n, b->buf[1].p);
  return NAN;
}

/* One row of the report. The xpjit kernels (and their OpenCL C twins, same
 * names) are kern[0] and, for the stencil, kern[1]. An xpjit-only variant
 * (base != its own row) has its peers in the base row. */
typedef struct row {
  const char *name;
  int base;
  const char *kern[MAXSTEP];
  const char *dtypes;          /* xpjit */
  const char *cl_file, *cl_opts; /* the OpenCL C twin */
  void (*setup)(bench *);
  int (*check)(const bench *, const void *const *views, double sum, result *);
  double (*omp)(bench *); /* returns the reduction's sum, else NAN */
  uint8_t goal;           /* GOAL_STREAM, GOAL_GEMM: against OpenMP */
} row;

/* Goals against OpenMP C (issue 16): streaming kernels (memory-bound:
 * triad, reduction, stencil, matvec, scan) >= 0.95x, gemm >= 0.5x. Every kernel: >= 1.0x xpjit's SPIR-V on the OpenCL CPU runtime
 * (geomean >= 1.5x) and >= 1.0x PoCL. */
enum { GOAL_NONE, GOAL_STREAM, GOAL_GEMM };
static const double goal_omp[] = {0, 0.95, 0.5};

/* the functions of kernel k: k_setup, k_check, k_omp */
#define FNS(k) k##_setup, k##_check, k##_omp

static const row rows[NKERN] = {
    /* name, base row, xpjit kernels, dtypes, OpenCL C twin and its options, functions,
     * goal against OpenMP */
    [K_TRIAD] = {"triad", K_TRIAD, {"triad"}, "T=f32", "triad.cl", "-DT=float", FNS(triad),
                 GOAL_STREAM},
    [K_TRIAD_ND] = {"triad_nd", K_TRIAD, {"triad_nd"}, "T=f32", NULL, NULL, FNS(triad), GOAL_NONE},
    [K_TRIAD64] = {"triad_f64", K_TRIAD64, {"triad"}, "T=f64", "triad.cl",
                   "-DT=double -DUSE_FP64", FNS(triad), GOAL_STREAM},
    [K_REDUCE] = {"reduction", K_REDUCE, {"reduce_sum"}, "T=f32", "reduce_sum.cl", "-DT=float",
                  FNS(reduce), GOAL_STREAM},
    [K_REDUCE_VIEWS] = {"reduction_views", K_REDUCE, {"reduce_sum_views"}, "T=f32", NULL, NULL,
                        FNS(reduce), GOAL_NONE},
    [K_MM_NAIVE] = {"matmul_naive", K_MM_NAIVE, {"matmul_naive"}, "T=f32", "matmul_naive.cl",
                    "-DT=float", FNS(matmul), GOAL_GEMM},
    [K_MM_TILED16] = {"matmul_tiled16", K_MM_TILED16, {"matmul_tiled16"}, "T=f32",
                      "matmul_tiled16.cl", "-DT=float", FNS(matmul), GOAL_GEMM},
    [K_MATMUL] = {"matmul", K_MATMUL, {"matmul"}, "T=f32", "matmul.cl", "-DT=float",
                  FNS(matmul), GOAL_GEMM},
    [K_STENCIL] = {"stencil", K_STENCIL, {"jacobi5_interior", "jacobi5_edges"}, "T=f32",
                   "jacobi5.cl", "-DT=float", FNS(stencil), GOAL_STREAM},
    [K_MATVEC] = {"matvec", K_MATVEC, {"matvec"}, "T=f32", "matvec.cl", "-DT=float",
                  FNS(matvec), GOAL_STREAM},
    [K_NBODY] = {"nbody", K_NBODY, {"nbody"}, "T=f32", "nbody.cl", "-DT=float", FNS(nbody),
                 GOAL_NONE},
    [K_SCAN] = {"scan", K_SCAN, {"scan_group"}, "T=f32", "scan_group.cl", "-DT=float",
                FNS(scan), GOAL_STREAM},
    [K_SOFTMAX] = {"softmax", K_SOFTMAX, {"softmax"}, "T=f32", "softmax.cl", "-DT=float",
                   FNS(softmax), GOAL_NONE},
    [K_HIST] = {"histogram", K_HIST, {"histogram"}, NULL, "histogram.cl", "", FNS(hist), GOAL_NONE},
};

static bool xpjit_only(int k) { return rows[k].base != k; }

static void bench_setup(bench *b, int k) {
  memset(b, 0, sizeof *b);
  b->id = k;
  b->zero_buf = b->sum_buf = -1;
  rows[k].setup(b);
}

static void bench_teardown(bench *b) {
  for (int s = 0; s < MAXSTEP; s++)
    if (b->ck[s])
      cl.ReleaseKernel(b->ck[s]);
  if (b->cp)
    cl.ReleaseProgram(b->cp);
  for (int i = 0; i < b->nbuf; i++) {
    if (b->buf[i].cm)
      cl.ReleaseMemObject(b->buf[i].cm);
    bench_free(b->buf[i].p);
  }
  free(b->cpart);
  free(b->ref);
}

/* ---- the implementations -------------------------------------------------- */

/* xpjit (both devices): the kernels, compiled apart from the timing */
static int xpjit_prepare(bench *b, int impl, result *r) {
  const row *w = &rows[b->id];
  for (int s = 0; s < MAXSTEP && w->kern[s]; s++) {
    double t0 = now_s();
    xpj_status st = xpj_program_get_kernel(X[impl].prog, w->kern[s], w->dtypes, 0, X[impl].dev,
                                           NULL, &b->xk[impl][s]);
    r->compile_ms += (now_s() - t0) * 1e3;
    if (st != XPJ_OK) {
      result_msg(r, ST_FAIL, "xpj_program_get_kernel(%s): %s: %s", w->kern[s],
                 xpj_status_name(st), xpj_last_error());
      return -1;
    }
    xpj_kernel_info ki;
    if (xpj_kernel_get_info(b->xk[impl][s], &ki) == XPJ_OK)
      r->compile_info += ki.compile_millis;
  }
  return 0;
}

/* The sum of n f32 partials, added on the host in order. */
static double host_sum(const float *part, size_t n) {
  float s = 0.0f;
  for (size_t g = 0; g < n; g++)
    s += part[g];
  return s;
}

/* One xpjit run: launches, wait (and the host's part). */
static int xpjit_run(bench *b, int impl, double *sum) {
  result *r = &b->r[impl];
  xdev *x = &X[impl];
  xpj_status st = XPJ_OK;
  if (b->zero_buf >= 0) {
    uint32_t zero = 0;
    st = xpj_enqueue_fill(x->q, b->buf[b->zero_buf].p, &zero, sizeof zero,
                          b->buf[b->zero_buf].bytes, NULL);
  }
  for (int s = 0; s < b->nsteps && st == XPJ_OK; s++) {
    const step *p = &b->steps[s];
    xpj_arg args[MAXARG];
    for (unsigned i = 0; i < p->nx; i++)
      args[i] = p->xa[i].buf >= 0 ? xpj_arg_array(&b->buf[p->xa[i].buf].view) : p->xa[i].s;
    st = xpj_launch(x->q, b->xk[impl][p->kern], &p->range, p->nx, args, NULL);
  }
  if (st != XPJ_OK) {
    result_msg(r, ST_FAIL, "launch: %s: %s", xpj_status_name(st), xpj_last_error());
    xpj_queue_wait(x->q);
    return -1;
  }
  st = xpj_queue_wait(x->q);
  if (st != XPJ_OK) {
    result_msg(r, ST_FAIL, "xpj_queue_wait: %s: %s", xpj_status_name(st), xpj_last_error());
    return -1;
  }
  if (b->sum_buf >= 0)
    *sum = host_sum(b->buf[b->sum_buf].p, b->buf[b->sum_buf].bytes / 4);
  return 0;
}

/* PoCL: the twins built (timed apart), the buffers wrapped, the arguments
 * set once */
static int pocl_prepare(bench *b, result *r) {
  const row *w = &rows[b->id];
  char msg[512];
  if (!(b->cp = pocl_build(w->cl_file, w->cl_opts, &r->compile_ms, msg, sizeof msg))) {
    result_msg(r, ST_FAIL, "%s", msg);
    return -1;
  }
  cl_int e = 0;
  for (int s = 0; s < MAXSTEP && w->kern[s]; s++)
    if (!(b->ck[s] = cl.CreateKernel(b->cp, w->kern[s], &e))) {
      result_msg(r, ST_FAIL, "clCreateKernel %s: error %d", w->kern[s], e);
      return -1;
    }
  for (int i = 0; i < b->nbuf; i++) {
    databuf *f = &b->buf[i];
    f->cm = cl.CreateBuffer(P.ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, f->bytes, f->p, &e);
    if (!f->cm) {
      result_msg(r, ST_FAIL, "clCreateBuffer(%zu, USE_HOST_PTR): error %d", f->bytes, e);
      return -1;
    }
  }
  if (b->sum_buf >= 0)
    b->cpart = xmalloc(b->buf[b->sum_buf].bytes);
  for (int s = 0; s < b->nsteps; s++) {
    const step *p = &b->steps[s];
    cl_kernel k = b->ck[p->kern];
    for (unsigned i = 0; i < p->nc; i++) {
      const karg *a = &p->ca[i];
      cl_long l = a->s.v.i;
      float f = (float)a->s.v.f;
      double d = a->s.v.f;
      if (a->buf >= 0)
        e |= cl.SetKernelArg(k, i, sizeof(cl_mem), &b->buf[a->buf].cm);
      else if (a->s.dtype == XPJ_F32)
        e |= cl.SetKernelArg(k, i, sizeof f, &f);
      else if (a->s.dtype == XPJ_F64)
        e |= cl.SetKernelArg(k, i, sizeof d, &d);
      else
        e |= cl.SetKernelArg(k, i, sizeof l, &l);
    }
  }
  if (e != CL_SUCCESS) {
    result_msg(r, ST_FAIL, "clSetKernelArg failed");
    return -1;
  }
  return 0;
}

static int pocl_run(bench *b, double *sum) {
  cl_int e = CL_SUCCESS;
  if (b->zero_buf >= 0) {
    cl_uint zero = 0;
    e = cl.EnqueueFillBuffer(P.q, b->buf[b->zero_buf].cm, &zero, sizeof zero, 0,
                             b->buf[b->zero_buf].bytes, 0, NULL, NULL);
  }
  for (int s = 0; s < b->nsteps && e == CL_SUCCESS; s++) {
    const step *p = &b->steps[s];
    unsigned dims = p->range.ndim;
    size_t gws[3], lws[3];
    for (unsigned d = 0; d < dims; d++) { /* OpenCL's order: the fast dimension first */
      gws[d] = p->range.global[dims - 1 - d];
      lws[d] = p->range.local[dims - 1 - d];
    }
    e = cl.EnqueueNDRangeKernel(P.q, b->ck[p->kern], dims, NULL, gws,
                                p->range.local[0] ? lws : NULL, 0, NULL, NULL);
  }
  if (e == CL_SUCCESS && b->sum_buf >= 0)
    e = cl.EnqueueReadBuffer(P.q, b->buf[b->sum_buf].cm, CL_TRUE, 0, b->buf[b->sum_buf].bytes,
                             b->cpart, 0, NULL, NULL);
  if (e == CL_SUCCESS)
    e = cl.Finish(P.q);
  if (e != CL_SUCCESS) {
    result_msg(&b->r[I_POCL], ST_FAIL, "OpenCL error %d", e);
    return -1;
  }
  if (b->sum_buf >= 0)
    *sum = host_sum(b->cpart, b->buf[b->sum_buf].bytes / 4);
  return 0;
}

static int run_impl(bench *b, int impl, double *sum) {
  switch (impl) {
  case I_CPU:
  case I_OCL:
    return xpjit_run(b, impl, sum);
  case I_POCL:
    return pocl_run(b, sum);
  default:
    *sum = rows[b->id].omp(b);
    return 0;
  }
}

/* Buffer i as the host may read or write it: for PoCL mapped (unmap with
 * host_unview). */
static void *host_view(bench *b, int impl, int i, cl_map_flags flags, void **mapped) {
  databuf *f = &b->buf[i];
  *mapped = NULL;
  if (impl != I_POCL)
    return f->p;
  cl_int e = 0;
  void *p = cl.EnqueueMapBuffer(P.q, f->cm, CL_TRUE, flags, 0, f->bytes, 0, NULL, NULL, &e);
  *mapped = p;
  return p;
}

static void host_unview(bench *b, int i, void *mapped) {
  if (mapped) {
    cl.EnqueueUnmapMemObject(P.q, b->buf[i].cm, mapped, 0, NULL, NULL);
    cl.Finish(P.q);
  }
}

/* Why impl cannot run b; NULL when it can. */
static const char *unavailable(const bench *b, int impl, char *buf, size_t size) {
  if ((impl == I_CPU || impl == I_OCL) && !X[impl].ok)
    snprintf(buf, size, "not available: %s", X[impl].why);
  else if ((impl == I_POCL || impl == I_OMP) && xpjit_only(b->id))
    snprintf(buf, size, "xpjit-only variant: the peers are in row %s",
             rows[rows[b->id].base].name);
  else if (impl == I_POCL && !P.ok)
    snprintf(buf, size, "not available: %s", P.why);
  else if (impl == I_OMP && !opt_omp)
    snprintf(buf, size, "disabled (--no-omp)");
  else
    return NULL;
  return buf;
}

/* Prepares impl (compile, buffers) and makes the checked run on poisoned
 * outputs. Returns 0 when impl is ready to be timed. */
static int check_impl(bench *b, int impl) {
  result *r = &b->r[impl];
  char why[600];
  if (unavailable(b, impl, why, sizeof why)) {
    result_msg(r, ST_NA, "%s", why);
    return -1;
  }
  if ((impl == I_CPU || impl == I_OCL) && xpjit_prepare(b, impl, r) != 0)
    return -1;
  if (impl == I_POCL && pocl_prepare(b, r) != 0)
    return -1;

  /* poison: NaN, and 0xffffffff counts */
  void *mapped;
  for (int i = 0; i < b->nbuf; i++) {
    if (!b->buf[i].out)
      continue;
    void *o = host_view(b, impl, i, CL_MAP_WRITE, &mapped);
    if (!o) {
      result_msg(r, ST_FAIL, "cannot map buffer %d", i);
      return -1;
    }
    memset(o, 0xff, b->buf[i].bytes);
    host_unview(b, i, mapped);
  }
  double sum = NAN;
  double t0 = now_s();
  if (run_impl(b, impl, &sum) != 0)
    return -1;
  r->first = now_s() - t0;
  const void *views[MAXBUF] = {NULL};
  void *maps[MAXBUF] = {NULL};
  int bad = 0;
  for (int i = 0; i < b->nbuf && !bad; i++) {
    views[i] = b->buf[i].out ? host_view(b, impl, i, CL_MAP_READ, &maps[i]) : b->buf[i].p;
    if (!views[i]) {
      result_msg(r, ST_FAIL, "cannot map buffer %d", i);
      bad = -1;
    }
  }
  if (!bad)
    bad = rows[b->id].check(b, views, sum, r);
  for (int i = 0; i < b->nbuf; i++)
    host_unview(b, i, maps[i]);
  return bad ? -1 : 0;
}

/* ---- timing --------------------------------------------------------------- */

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
    t[impl] = xmalloc(MAX_RUNS * sizeof(double));
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

/* The row whose result of impl row k is compared with: its own, or for
 * an xpjit-only variant's PoCL and OpenMP its base row. */
static const bench *peer_row(const bench *benches, int k, int impl) {
  return impl == I_CPU || impl == I_OCL ? &benches[k] : &benches[rows[k].base];
}

static double ratio(const bench *benches, int k, int peer) {
  double x = rate(&benches[k], I_CPU), p = rate(peer_row(benches, k, peer), peer);
  return x > 0 && p > 0 ? x / p : 0;
}

static void cell_ratio(char *buf, size_t size, const bench *benches, int k, int peer) {
  double q = ratio(benches, k, peer);
  if (q > 0)
    snprintf(buf, size, "%.2fx", q);
  else
    snprintf(buf, size, "-");
}

/* The geometric mean of xpjit-cpu / peer over the kernels that have both
 * (not the xpjit-only variants): *n of them, of *of run; 0 when none. */
static double geomean(const bench *benches, int peer, int *n, int *of) {
  double logs = 0;
  *n = *of = 0;
  for (int k = 0; k < NKERN; k++) {
    if (!want[k] || xpjit_only(k))
      continue;
    ++*of;
    double q = ratio(benches, k, peer);
    if (q > 0) {
      logs += log(q);
      ++*n;
    }
  }
  return *n ? exp(logs / *n) : 0;
}

static void print_geomean(const bench *benches, int peer) {
  int n, of;
  double g = geomean(benches, peer, &n, &of);
  char lab[32];
  snprintf(lab, sizeof lab, "xpjit-cpu/%s:", impl_name[peer]);
  if (n)
    printf("geomean %-20s %.2fx over %d of %d kernels\n", lab, g, n, of);
  else
    printf("geomean %-20s -\n", lab);
}

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--quick] [--scale F] [--kernel NAME[,NAME...]] [--threads N]\n"
          "          [--runs N] [--min-time SEC] [--xpk FILE] [--peers DIR]\n"
          "          [--ocl FILTER] [--no-ocl] [--opencl-lib PATH]\n"
          "          [--pocl-platform NAME] [--no-pocl] [--no-omp] [--list]\n"
          "          [--checks bounds]\n"
          "kernels:",
          argv0);
  for (int k = 0; k < NKERN; k++)
    fprintf(stderr, "%s %s", k && k % 7 == 0 ? "\n        " : "", rows[k].name);
  fprintf(stderr, " (default: all)\n");
  exit(2);
}

static void select_kernels(const char *list, const char *argv0) {
  char *copy = strdup(list), *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int k = 0;
    while (k < NKERN && strcmp(tok, rows[k].name) != 0)
      k++;
    if (k == NKERN) {
      fprintf(stderr, "%s: unknown kernel '%s'\n", argv0, tok);
      usage(argv0);
    }
    want[k] = true;
  }
  free(copy);
}

static void parse_args(int argc, char **argv) {
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
    } else if (strcmp(a, "--ocl") == 0 && has) {
      opt_ocl = argv[++i];
    } else if (strcmp(a, "--no-ocl") == 0) {
      opt_ocl_on = false;
    } else if (strcmp(a, "--opencl-lib") == 0 && has) {
      opt_opencl = argv[++i];
    } else if (strcmp(a, "--pocl-platform") == 0 && has) {
      opt_pocl_platform = argv[++i];
    } else if (strcmp(a, "--no-pocl") == 0) {
      opt_pocl = false;
    } else if (strcmp(a, "--no-omp") == 0) {
      opt_omp = false;
    } else if (strcmp(a, "--checks") == 0 && has) {
      char err[160];
      if (xpj_checks_parse(argv[++i], &opt_checks, err, sizeof err) != XPJ_OK) {
        fprintf(stderr, "%s: --checks: %s\n", argv[0], err);
        usage(argv[0]);
      }
    } else if (strcmp(a, "--list") == 0) {
      for (int k = 0; k < NKERN; k++)
        printf("%s\n", rows[k].name);
      exit(0);
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
  if (strstr("Portable Computing Language", opt_pocl_platform) == NULL)
    impl_name[I_POCL] = "OCL-C";
}

static void print_header(int argc, char **argv) {
  char model[256];
  cpu_model(model, sizeof model);
  printf("bench/cpu: CPU kernels, xpjit's CPU device vs xpjit's SPIR-V on an OpenCL CPU "
         "runtime vs OpenCL C on PoCL vs OpenMP C\n");
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
  printf("machine:   %s, %ld online cores; threads: xpjit-cpu %u, OpenMP %d, %s %s, "
         "xpjit-ocl the runtime's\n",
         model, sysconf(_SC_NPROCESSORS_ONLN), X[I_CPU].ok ? X[I_CPU].info.compute_units : 0,
         cpu_omp_threads(), impl_name[I_POCL], pt);
  const xdev *c = &X[I_CPU], *o = &X[I_OCL];
  if (opt_checks)
    printf("checks:    both xpjit columns compiled with XPJIT_CHECK=bounds "
           "(--checks)\n");
  if (c->ok)
    printf("xpjit-cpu: LLVM %s, device %s (%s, %u compute units), target %.60s%s\n",
           xpj_llvm_version(), xpj_device_id(c->dev), c->info.name, c->info.compute_units,
           c->info.target, strlen(c->info.target) > 60 ? "..." : "");
  else {
    /* the product under test: its absence is a failure, unlike a peer's */
    failures++;
    printf("xpjit-cpu: not available: %s (LLVM %s)\nFAIL xpjit-cpu: %s\n", c->why,
           xpj_llvm_version(), c->why);
    fprintf(stderr, "FAIL xpjit-cpu: %s\n", c->why);
  }
  if (o->ok)
    printf("xpjit-ocl: device %s (%s, %s, driver %s, %u compute units), %s\n",
           xpj_device_id(o->dev), o->info.name, o->info.vendor, o->info.driver_version,
           o->info.compute_units, o->info.target);
  else
    printf("xpjit-ocl: not available (%s)\n", o->why);
  if (P.ok)
    printf("%-10s %s, device %s\n", strcmp(impl_name[I_POCL], "PoCL") ? "OCL-C:" : "PoCL:",
           P.version, P.device);
  else
    printf("PoCL:      not available (%s)\n", P.why);
  printf("OpenMP:    %s, -O3 -march=native -fopenmp, OpenMP %d\n", cpu_omp_compiler(),
         cpu_omp_version());
  if (mem_dev)
    printf("data:      shared allocations of %s\n", xpj_device_id(mem_dev));
  printf("timing:    median of >= %d runs and >= %.2g s per kernel and implementation, in %d "
         "interleaved rounds, after a checked run and a warm-up\n",
         opt_runs, opt_min_time, ROUNDS);
  static const char *const envs[] = {"OMP_WAIT_POLICY",        "GOMP_SPINCOUNT",
                                     "OMP_PROC_BIND",          "XPJIT_CPU_THREADS",
                                     "OCL_ICD_VENDORS",        "CL_CONFIG_CPU_TBB_NUM_WORKERS",
                                     "POCL_CPU_MAX_CU_COUNT",  "POCL_MAX_PTHREAD_COUNT",
                                     "POCL_KERNEL_CACHE"};
  printf("env:      ");
  for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++) {
    const char *v = getenv(envs[i]);
    if (v)
      printf(" %s=%s", envs[i], v);
  }
  printf("\n");
  char load[128];
  loadavg(load, sizeof load);
  printf("load:      load average %s (before)\n", load);
  fflush(stdout);
}

static void report_fail(const bench *b, int impl) {
  failures++;
  printf("FAIL %s %s: %s\n", impl_name[impl], rows[b->id].name, b->r[impl].msg);
  fprintf(stderr, "FAIL %s %s: %s\n", impl_name[impl], rows[b->id].name, b->r[impl].msg);
  fflush(stdout);
}

/* Row k: data, each implementation checked, then timed in turns. */
static void run_bench(bench *b, int k) {
  bench_setup(b, k);
  bool ready[NIMPL];
  for (int impl = 0; impl < NIMPL; impl++) {
    ready[impl] = check_impl(b, impl) == 0;
    if (b->r[impl].state == ST_FAIL)
      report_fail(b, impl);
  }
  time_impls(b, ready);
  for (int impl = 0; impl < NIMPL; impl++)
    if (ready[impl] && b->r[impl].state == ST_FAIL) /* failed while timed */
      report_fail(b, impl);
  bench_teardown(b);
}

static void print_rates(const bench *benches) {
  printf("\n%-15s %-24s %-8s %9s %9s %9s %9s %9s %9s %9s\n", "kernel", "size", "unit",
         impl_name[I_CPU], impl_name[I_OCL], impl_name[I_POCL], impl_name[I_OMP], "cpu/ocl",
         "cpu/omp", impl_name[I_POCL][0] == 'P' ? "cpu/pocl" : "cpu/oclc");
  for (int k = 0; k < NKERN; k++) {
    if (!want[k])
      continue;
    const bench *b = &benches[k];
    char c[NIMPL][32], q[3][32];
    for (int impl = 0; impl < NIMPL; impl++)
      cell_rate(c[impl], sizeof c[impl], b, impl);
    cell_ratio(q[0], sizeof q[0], benches, k, I_OCL);
    cell_ratio(q[1], sizeof q[1], benches, k, I_OMP);
    cell_ratio(q[2], sizeof q[2], benches, k, I_POCL);
    printf("%-15s %-24s %-8s %9s %9s %9s %9s %9s %9s %9s\n", rows[k].name, b->size, b->unit,
           c[I_CPU], c[I_OCL], c[I_POCL], c[I_OMP], q[0], q[1], q[2]);
  }
  printf("\n");
  print_geomean(benches, I_OCL);
  print_geomean(benches, I_OMP);
  if (P.ok)
    print_geomean(benches, I_POCL);
}

static void print_times(const bench *benches) {
  printf("\nmedian ms per run [min, max] (runs)\n");
  for (int k = 0; k < NKERN; k++) {
    if (!want[k])
      continue;
    printf("%-15s", rows[k].name);
    for (int impl = 0; impl < NIMPL; impl++) {
      const result *r = &benches[k].r[impl];
      char cell[64];
      if (r->state == ST_OK)
        snprintf(cell, sizeof cell, "%.3f [%.3f, %.3f] (%d)", r->med * 1e3, r->min * 1e3,
                 r->max * 1e3, r->runs);
      else
        snprintf(cell, sizeof cell, "%s", r->state == ST_FAIL ? "FAIL" : "-");
      printf("  %s %-30s", impl_name[impl], cell);
    }
    printf("\n");
  }
}

static void print_compiles(const bench *benches) {
  printf("\ncompile and first run (ms): xpjit get_kernel (compile_millis), first run; "
         "%s clBuildProgram, first run (includes its work-group compile); OpenMP first run\n",
         impl_name[I_POCL]);
  for (int k = 0; k < NKERN; k++) {
    if (!want[k])
      continue;
    printf("%-15s", rows[k].name);
    for (int impl = 0; impl < NIMPL; impl++) {
      const result *r = &benches[k].r[impl];
      char cell[64] = "-";
      if (r->state == ST_OK && (impl == I_CPU || impl == I_OCL))
        snprintf(cell, sizeof cell, "%.1f (%.1f), %.1f", r->compile_ms, r->compile_info,
                 r->first * 1e3);
      else if (r->state == ST_OK && impl == I_POCL)
        snprintf(cell, sizeof cell, "%.1f, %.1f", r->compile_ms, r->first * 1e3);
      else if (r->state == ST_OK)
        snprintf(cell, sizeof cell, "%.1f", r->first * 1e3);
      printf("  %s %-22s", impl_name[impl], cell);
    }
    printf("\n");
  }
}

static void print_goals(const bench *benches) {
  printf("\ngoals: every kernel >= 1.0x %s (geomean >= 1.5x) and >= 1.0x %s; streaming "
         "kernels >= 0.95x %s, gemm >= 0.5x\n",
         impl_name[I_OCL], impl_name[I_POCL], impl_name[I_OMP]);
  for (int k = 0; k < NKERN; k++) {
    if (!want[k] || xpjit_only(k))
      continue;
    char cell[3][64] = {"", "", ""};
    const int peer[3] = {I_OCL, I_POCL, I_OMP};
    for (int i = 0; i < 3; i++) {
      double q = ratio(benches, k, peer[i]);
      double want_q = i < 2 ? 1.0 : goal_omp[rows[k].goal];
      if (q > 0 && want_q > 0)
        snprintf(cell[i], sizeof cell[i], "vs %s %.2fx: %s", impl_name[peer[i]], q,
                 q >= want_q ? "met" : "MISSED");
    }
    printf("  %-15s %-26s %-22s %s\n", rows[k].name, cell[0], cell[1], cell[2]);
  }
  int n, of;
  double g = geomean(benches, I_OCL, &n, &of);
  if (n)
    printf("  geomean vs %s %.2fx: %s\n", impl_name[I_OCL], g, g >= 1.5 ? "met" : "MISSED");
}

/* why cells are empty (each reason once) and what failed */
static void print_reasons(const bench *benches) {
  for (int impl = 0; impl < NIMPL; impl++) {
    const char *last = NULL;
    for (int k = 0; k < NKERN; k++) {
      const result *r = &benches[k].r[impl];
      if (!want[k] || r->state != ST_NA || xpjit_only(k) || (last && !strcmp(last, r->msg)))
        continue;
      printf("%s: %s\n", impl_name[impl], r->msg);
      last = r->msg;
    }
  }
  for (int k = 0; k < NKERN; k++)
    for (int impl = 0; impl < NIMPL; impl++)
      if (want[k] && benches[k].r[impl].state == ST_FAIL)
        printf("FAIL %s %s: %s\n", impl_name[impl], rows[k].name, benches[k].r[impl].msg);
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  cpu_omp_setup(opt_threads);
  pocl_env(); /* before xpjit's OpenCL device loads the ICDs, PoCL's too */
  xdev_init(I_CPU);
  xdev_init(I_OCL);
  mem_dev = X[I_OCL].ok ? X[I_OCL].dev : X[I_CPU].ok ? X[I_CPU].dev : NULL;
  pocl_init();
  print_header(argc, argv);

  static bench benches[NKERN];
  for (int k = 0; k < NKERN; k++)
    if (want[k])
      run_bench(&benches[k], k);

  print_rates(benches);
  print_times(benches);
  print_compiles(benches);
  print_goals(benches);
  print_reasons(benches);
  char load[128];
  loadavg(load, sizeof load);
  printf("load:      load average %s (after)\n", load);
  if (failures)
    printf("\n%d FAILURE%s\n", failures, failures > 1 ? "S" : "");

  for (int impl = I_CPU; impl <= I_OCL; impl++)
    if (X[impl].ok)
      xdev_fini(&X[impl]);
  pocl_fini();
  return failures ? 1 : 0;
}
