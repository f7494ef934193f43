/*
 * bench/gpu.c - GPU kernels: xpjit's PTX against the same kernels in CUDA C
 * compiled by NVRTC, on one CUDA device, the same buffers.
 *
 * Paths (columns):
 *   xpjit   the kernel through xpjit's public API on the device "cuda"
 *           (--device): xpj_program_get_kernel, xpj_launch, xpj_queue_wait
 *           (the CUDA backend: PTX linked by the driver, runtime/cuda.c)
 *   xptx    the same PTX (xpj_program_get_binary, the bytes the backend
 *           loads) loaded here with cuModuleLoadData and launched with
 *           cuLaunchKernel on this program's stream, between CUDA events:
 *           the backend queue's stream is not reachable from outside, so
 *           this is how xpjit's code gets a device-side time
 *   nvrtc   the CUDA C twin (bench/peers/gpu/FILE.cu, with xpjit's
 *           parameters and dimension order: gpu_peer.cuh) compiled at run
 *           time by NVRTC (libnvrtc from $CUDA_HOME or /usr/local/cuda,
 *           -arch=sm_XX of the device, NVRTC's defaults otherwise, e.g.
 *           --fmad=true; --nvrtc-opt adds options) to a cubin, loaded with
 *           cuModuleLoadData, launched with cuLaunchKernel between events
 * All three launch with the same parameter bytes (docs/abi.md) and the same
 * grid and block (range kernels get their local size as a hint, which the
 * backend uses as the block), on device memory from xpj_mem_alloc
 * (unified addressing: the pointers are CUdeviceptrs of the primary
 * context, which the backend and this program share).
 *
 * Per kernel: each path's result checked once against a reference computed
 * here on the CPU (outputs poisoned first; sampled rows for the O(n^3) and
 * O(n^2) kernels): a wrong result is FAIL and the exit status 1. Then the
 * kernel time, median of --runs runs: CUDA events for xptx and nvrtc;
 * wall time of launch + wait for xpjit (and launch + cuStreamSynchronize
 * for nvrtc, "nvrtc wall"), which include a launch's overhead. The ratios
 * are xptx/nvrtc (code) and xpjit/nvrtc-wall (what an application sees).
 * Then the first launch: "cold" is a fresh context with an empty cache
 * (xpjit: compile, driver JIT, load, launch, wait; nvrtc: compile, load,
 * launch, sync) and "warm" a fresh context with the cache filled (xpjit:
 * the driver's cubin from its cache, docs/backends.md "The native cache";
 * nvrtc: cuModuleLoadData of the cubin kept in memory), context creation
 * excluded. Launch overhead: 1,000 launches of an empty kernel then one
 * wait, and 1,000 launch + wait, through xpjit and bare cuLaunchKernel.
 *
 * --dry-run: against a libcuda that executes nothing (the stand-in
 * tests/mock/mock_cuda.c, XPJIT_CUDA_LIBRARY=build/tests/mock/
 * libmock_cuda.so): everything is compiled, loaded and launched through
 * every path with tiny sizes, checks and timings are skipped and the table
 * says "dry". make test runs it so this program cannot rot.
 *
 * usage: gpu [--runs N] [--quick] [--dry-run] [--kernel NAME[,NAME...]]
 *            [--device FILTER] [--nvrtc-opt OPT]... [--no-peer] [--list]
 * libcuda: XPJIT_CUDA_LIBRARY if set, else libcuda.so.1 (as the backend).
 * Without a CUDA device it says so and exits 77. Without NVRTC the nvrtc
 * columns are empty and the rest runs.
 */
#include "xpjit.h"

#include "bench_util.h"
#include "nvrtc.h"

#include <dlfcn.h>
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the driver API (libcuda opened at run time) ------------------------ */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

static struct {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGetCount)(int *);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DeviceGetName)(char *, int, CUdevice);
  CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*DriverGetVersion)(int *);
  CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*PrimaryCtxRelease)(CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*StreamCreate)(CUstream *, unsigned);
  CUresult (*StreamDestroy)(CUstream);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*ModuleLoadData)(CUmodule *, const void *);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*ModuleUnload)(CUmodule);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, CUstream, void **, void **);
  CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*EventCreate)(CUevent *, unsigned);
  CUresult (*EventRecord)(CUevent, CUstream);
  CUresult (*EventSynchronize)(CUevent);
  CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*EventDestroy)(CUevent);
  CUresult (*GetErrorName)(CUresult, const char **);
} cu;

static CUdevice cu_dev;
static CUcontext cu_ctx;
static CUstream cu_stream;
static CUevent ev0, ev1;
static int cc_major, cc_minor, driver_version;
static char cu_lib_name[600];

static const char *cu_err(CUresult r) {
  const char *s = NULL;
  if (cu.GetErrorName)
    cu.GetErrorName(r, &s);
  return s ? s : "CUDA error";
}

/* Opens libcuda and finds the entry points; false with why. */
static bool cu_load(char *why, size_t size) {
  const char *lib = getenv("XPJIT_CUDA_LIBRARY");
  if (!lib || !*lib)
    lib = "libcuda.so.1";
  snprintf(cu_lib_name, sizeof cu_lib_name, "%s", lib);
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(why, size, "%s", dlerror());
    return false;
  }
  struct {
    void *slot;
    const char *name, *alt;
  } syms[] = {
      {&cu.Init, "cuInit", NULL},
      {&cu.DeviceGetCount, "cuDeviceGetCount", NULL},
      {&cu.DeviceGet, "cuDeviceGet", NULL},
      {&cu.DeviceGetName, "cuDeviceGetName", NULL},
      {&cu.DeviceGetAttribute, "cuDeviceGetAttribute", NULL},
      {&cu.DriverGetVersion, "cuDriverGetVersion", NULL},
      {&cu.PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL},
      {&cu.PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"},
      {&cu.CtxSetCurrent, "cuCtxSetCurrent", NULL},
      {&cu.StreamCreate, "cuStreamCreate", NULL},
      {&cu.StreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy"},
      {&cu.StreamSynchronize, "cuStreamSynchronize", NULL},
      {&cu.ModuleLoadData, "cuModuleLoadData", NULL},
      {&cu.ModuleGetFunction, "cuModuleGetFunction", NULL},
      {&cu.ModuleUnload, "cuModuleUnload", NULL},
      {&cu.LaunchKernel, "cuLaunchKernel", NULL},
      {&cu.MemsetD8Async, "cuMemsetD8Async", NULL},
      {&cu.EventCreate, "cuEventCreate", NULL},
      {&cu.EventRecord, "cuEventRecord", NULL},
      {&cu.EventSynchronize, "cuEventSynchronize", NULL},
      {&cu.EventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"},
      {&cu.EventDestroy, "cuEventDestroy_v2", "cuEventDestroy"},
      {&cu.GetErrorName, "cuGetErrorName", NULL},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    void *p = dlsym(h, syms[i].name);
    if (!p && syms[i].alt)
      p = dlsym(h, syms[i].alt);
    if (!p) {
      snprintf(why, size, "%s has no %s", lib, syms[i].name);
      return false;
    }
    memcpy(syms[i].slot, &p, sizeof p);
  }
  return true;
}

/* The CUdevice named like xpjit's device (first of that name), its primary
 * context current, a stream and two events. */
static bool cu_setup(const char *name, char *why, size_t size) {
  CUresult r = cu.Init(0);
  int n = 0;
  if (!r)
    r = cu.DeviceGetCount(&n);
  if (r) {
    snprintf(why, size, "cuInit: %s", cu_err(r));
    return false;
  }
  int pick = -1;
  for (int i = 0; i < n && pick < 0; i++) {
    char nm[256] = "";
    CUdevice d;
    if (!cu.DeviceGet(&d, i) && !cu.DeviceGetName(nm, sizeof nm, d) && !strcmp(nm, name))
      pick = i;
  }
  if (pick < 0) {
    snprintf(why, size, "no CUDA device named %s", name);
    return false;
  }
  cu.DeviceGet(&cu_dev, pick);
  cu.DeviceGetAttribute(&cc_major, 75, cu_dev);
  cu.DeviceGetAttribute(&cc_minor, 76, cu_dev);
  cu.DriverGetVersion(&driver_version);
  if ((r = cu.PrimaryCtxRetain(&cu_ctx, cu_dev)) || (r = cu.CtxSetCurrent(cu_ctx)) ||
      (r = cu.StreamCreate(&cu_stream, 1)) || (r = cu.EventCreate(&ev0, 0)) ||
      (r = cu.EventCreate(&ev1, 0))) {
    snprintf(why, size, "context, stream or events: %s", cu_err(r));
    return false;
  }
  return true;
}

/* ---- NVRTC (libnvrtc opened at run time) -------------------------------- */

static nvrtc_api nv;
static bool nv_ok;
static char nv_why[700], nv_path[500];
static int nv_major, nv_minor;

static bool nvrtc_load(void) {
  if (!nvrtc_open(NULL, &nv, nv_path, sizeof nv_path, nv_why, sizeof nv_why))
    return false;
  nv.version(&nv_major, &nv_minor);
  return true;
}

/* ---- options, kernels, results ------------------------------------------ */

static int opt_runs = 20;
static bool opt_quick, opt_dry, opt_peer = true;
static const char *opt_device = "cuda";
static const char *opt_kernels;
static const char *nvrtc_extra[8];
static int n_nvrtc_extra;
static int failures;

static const char *xpk_files[] = {"bench/cpu.xpk", "examples/matmul.xpk", "bench/gpu.xpk"};
enum { F_CPU, F_MATMUL, F_GPU, NFILES };
static const char *cu_files[] = {"bench/peers/gpu/cpu.cu", "bench/peers/gpu/matmul.cu",
                                 "bench/peers/gpu/gpu.cu"};
static char *cu_src[NFILES];
static char *cuh_text[2]; /* xpk_peer.cuh, gpu_peer.cuh */
static const char *cuh_names[2] = {"xpk_peer.cuh", "gpu_peer.cuh"};

static xpj_context *xctx;
static xpj_device *xdev;
static xpj_queue *xq;
static xpj_program *xprog[NFILES];
static xpj_device_info xinfo;
static char cache_dir[256], cache_db[300];

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum { MAXBUF = 6, MAXARG = 8, MAXSTEP = 2, MAXPARAM = 40 };

typedef struct buf {
  size_t bytes, rows, cols; /* cols 0: 1-D */
  xpj_scalar t;
  void *d;      /* device memory (xpj_mem_alloc) */
  void *h;      /* host data: the input, or the output read back */
  bool out;
  xpj_array view;
} buf;

typedef struct karg {
  int buf; /* < 0: the scalar s */
  xpj_arg s;
} karg;

/* One launch of a run. */
typedef struct step {
  int file;           /* F_* */
  const char *kernel; /* xpjit's name */
  const char *dtypes; /* NULL: none */
  const char *expr;   /* NVRTC name expression: "triad<float>" */
  xpj_range range;    /* logical order, local always given */
  unsigned nargs;
  karg a[MAXARG];
  /* per path */
  xpj_kernel *xk;
  CUmodule xmod, pmod;
  CUfunction xf, pf;
  char *cubin; /* NVRTC's, kept: the peer's "native cache" */
  size_t cubin_len;
  char lowered[256];
  bool range_kernel; /* three hidden sizes after the parameters */
  /* parameters in xpjit's ABI */
  uint64_t pv[MAXPARAM];
  void *pp[MAXPARAM];
  unsigned grid[3], block[3];
} step;

enum { P_X, P_XPTX, P_NV, NPATH };
static const char *path_name[NPATH] = {"xpjit", "xptx", "nvrtc"};

typedef struct bench bench;
typedef int (*check_fn)(bench *b, char *msg, size_t size);

struct bench {
  const char *name;
  void (*setup)(bench *b);
  check_fn check;
  char size[80];
  buf b[MAXBUF];
  int nbuf;
  step s[MAXSTEP];
  int nsteps;
  int zero_buf;       /* >= 0: zeroed before each run (in the time) */
  double p[4];        /* parameters of the reference */
  size_t n, m, k;
  bool ok[NPATH];     /* built and loaded */
  int state[NPATH];   /* ST_* */
  char msg[NPATH][400];
  double t[NPATH];    /* ms: events (xptx, nvrtc) / wall (xpjit) */
  double nv_wall;     /* ms: nvrtc launch + sync */
  double cold[2], warm[2]; /* ms: [0] xpjit, [1] nvrtc */
};

enum { ST_NONE, ST_OK, ST_FAIL, ST_NA };

static void set_msg(bench *b, int path, int state, const char *fmt, ...) {
  if (b->state[path] == ST_FAIL)
    return; /* the first failure stays */
  b->state[path] = state;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->msg[path], sizeof b->msg[path], fmt, ap);
  va_end(ap);
  oneline(b->msg[path]);
}

static size_t scalar_bytes(xpj_scalar t) {
  return t == XPJ_F64 || t == XPJ_I64 || t == XPJ_U64 ? 8 : t == XPJ_U8 ? 1 : 4;
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "gpu: out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

/* sizes: full, --quick, --dry-run */
static size_t pick(size_t full, size_t quick, size_t dry) {
  return opt_dry ? dry : opt_quick ? quick : full;
}

/* A buffer of rows (x cols) elements of t; inputs get host data here. */
static void *add_buf(bench *b, xpj_scalar t, size_t rows, size_t cols, bool out) {
  buf *f = &b->b[b->nbuf++];
  f->t = t;
  f->rows = rows;
  f->cols = cols;
  f->out = out;
  f->bytes = rows * (cols ? cols : 1) * scalar_bytes(t);
  f->h = xmalloc(f->bytes);
  memset(f->h, 0, f->bytes);
  return f->h;
}

static uint32_t rng_state;
static float frand(float lo, float hi) {
  rng_state = rng_state * 1664525u + 1013904223u;
  return lo + (hi - lo) * (float)(rng_state >> 8) * (1.0f / 16777216.0f);
}
static void fill_f32(float *p, size_t n, uint32_t seed, float lo, float hi) {
  rng_state = seed;
  for (size_t i = 0; i < n; i++)
    p[i] = frand(lo, hi);
}

static karg BUF(int i) { return (karg){.buf = i}; }
static karg SCAL(xpj_arg s) { return (karg){.buf = -1, .s = s}; }
#define ARGS(...) (unsigned)(sizeof((karg[]){__VA_ARGS__}) / sizeof(karg)), (karg[]){__VA_ARGS__}

static void add_step(bench *b, int file, const char *kernel, const char *dtypes, const char *expr,
                     xpj_range r, unsigned nargs, const karg *a) {
  step *s = &b->s[b->nsteps++];
  s->file = file;
  s->kernel = kernel;
  s->dtypes = dtypes;
  s->expr = expr;
  s->range = r;
  s->nargs = nargs;
  memcpy(s->a, a, nargs * sizeof *a);
}

/* ---- the kernels: sizes, data, launches, references --------------------- */

static int rel_check(const char *what, size_t i, double got, double want, double tol, char *msg,
                     size_t size) {
  if (fabs(got - want) <= tol)
    return 0;
  snprintf(msg, size, "%s[%zu] = %.9g, expected %.9g (tolerance %.3g)", what, i, got, want, tol);
  return -1;
}

/* triad and triad_f64: a = b + s * c */
static void triad_setup(bench *b) {
  bool f64 = !strcmp(b->name, "triad_f64");
  size_t n = b->n = pick((size_t)1 << 25, (size_t)1 << 22, 4096);
  xpj_scalar t = f64 ? XPJ_F64 : XPJ_F32;
  snprintf(b->size, sizeof b->size, "%zu %s", n, f64 ? "f64" : "f32");
  add_buf(b, t, n, 0, true);
  void *x = add_buf(b, t, n, 0, false), *y = add_buf(b, t, n, 0, false);
  rng_state = 1;
  for (size_t i = 0; i < n; i++) {
    float u = frand(0, 1), v = frand(0, 1);
    if (f64) {
      ((double *)x)[i] = u;
      ((double *)y)[i] = v;
    } else {
      ((float *)x)[i] = u;
      ((float *)y)[i] = v;
    }
  }
  karg s = SCAL(f64 ? xpj_arg_f64(3.0) : xpj_arg_f32(3.0f));
  add_step(b, F_CPU, "triad", f64 ? "T=f64" : "T=f32", f64 ? "triad<double>" : "triad<float>",
           xpj_range_1d(n, 256), ARGS(BUF(0), BUF(1), BUF(2), s));
}

static int triad_check(bench *b, char *msg, size_t size) {
  bool f64 = b->b[0].t == XPJ_F64;
  for (size_t i = 0; i < b->n; i++) {
    double got, want;
    if (f64) {
      const double *a = b->b[0].h, *x = b->b[1].h, *y = b->b[2].h;
      got = a[i], want = x[i] + 3.0 * y[i];
    } else {
      const float *a = b->b[0].h, *x = b->b[1].h, *y = b->b[2].h;
      got = a[i], want = (double)x[i] + 3.0 * (double)y[i];
    }
    if (rel_check("a", i, got, want, 1e-6 * fabs(want) + 1e-7, msg, size))
      return -1;
  }
  return 0;
}

/* reduction: per-group partial sums (cpu.xpk reduce_sum), added here */
static void reduce_setup(bench *b) {
  size_t n = b->n = pick((size_t)1 << 25, (size_t)1 << 22, (size_t)1 << 16);
  size_t groups = b->m = pick(1024, 256, 8);
  snprintf(b->size, sizeof b->size, "%zu f32, %zu groups", n, groups);
  float *x = add_buf(b, XPJ_F32, n, 0, false);
  add_buf(b, XPJ_F32, groups, 0, true);
  fill_f32(x, n, 5, 0, 1);
  add_step(b, F_CPU, "reduce_sum", "T=f32", "reduce_sum<float>", xpj_range_1d(groups * 256, 256),
           ARGS(BUF(0), BUF(1)));
}

static int reduce_check(bench *b, char *msg, size_t size) {
  const float *x = b->b[0].h, *part = b->b[1].h;
  double want = 0, got = 0;
  for (size_t i = 0; i < b->n; i++)
    want += x[i];
  for (size_t g = 0; g < b->m; g++)
    got += part[g];
  return rel_check("sum", 0, got, want, 1e-5 * want, msg, size);
}

/* c = a * b, n x n: matmul_naive, matmul_tiled16, matmul (cpu.xpk) and
 * gemm_tiled (examples/matmul.xpk matmul_tiled) */
static void matmul_setup(bench *b) {
  size_t n = b->n = pick(2048, 1024, 128);
  snprintf(b->size, sizeof b->size, "%zux%zu f32", n, n);
  float *a = add_buf(b, XPJ_F32, n, n, false), *bb = add_buf(b, XPJ_F32, n, n, false);
  add_buf(b, XPJ_F32, n, n, true);
  fill_f32(a, n * n, 6, -1, 1);
  fill_f32(bb, n * n, 7, -1, 1);
  karg abc[3] = {BUF(0), BUF(1), BUF(2)};
  if (!strcmp(b->name, "matmul_naive"))
    add_step(b, F_CPU, "matmul_naive", "T=f32", "matmul_naive<float>",
             xpj_range_2d(n, n, 16, 16), 3, abc);
  else if (!strcmp(b->name, "matmul_tiled16"))
    add_step(b, F_CPU, "matmul_tiled16", "T=f32", "matmul_tiled16<float>",
             xpj_range_2d(n, n, 16, 16), 3, abc);
  else if (!strcmp(b->name, "matmul"))
    add_step(b, F_CPU, "matmul", "T=f32", "matmul<float>", xpj_range_2d(n / 4, n / 16, 16, 4), 3,
             abc);
  else
    add_step(b, F_MATMUL, "matmul_tiled", "T=f32", "matmul_tiled<float>",
             xpj_range_2d(n, n, 16, 16), 3, abc);
}

/* 16 rows spread over c, every column, in double; the tolerances here
 * and below are far above f32 rounding of these sums (a wrong index is
 * off by O(1)) */
static int matmul_check(bench *b, char *msg, size_t size) {
  size_t n = b->n;
  const float *a = b->b[0].h, *bb = b->b[1].h, *c = b->b[2].h;
  for (size_t ri = 0; ri < 16; ri++) {
    size_t i = ri * (n - 1) / 15;
    for (size_t j = 0; j < n; j++) {
      double s = 0, mag = 0;
      for (size_t k = 0; k < n; k++) {
        double p = (double)a[i * n + k] * bb[k * n + j];
        s += p;
        mag += fabs(p);
      }
      if (rel_check("c", i * n + j, c[i * n + j], s, 1e-4 * mag + 1e-6, msg, size))
        return -1;
    }
  }
  return 0;
}

/* one Jacobi sweep, ny x nx: interior, then edges (two launches) */
static void stencil_setup(bench *b) {
  size_t n = b->n = pick(8192, 2048, 64);
  snprintf(b->size, sizeof b->size, "%zux%zu f32", n, n);
  float *u = add_buf(b, XPJ_F32, n, n, false);
  add_buf(b, XPJ_F32, n, n, true);
  fill_f32(u, n * n, 8, 0, 1);
  add_step(b, F_CPU, "jacobi5_interior", "T=f32", "jacobi5_interior<float>",
           xpj_range_2d(n - 2, n - 2, 16, 16), ARGS(BUF(0), BUF(1)));
  add_step(b, F_CPU, "jacobi5_edges", "T=f32", "jacobi5_edges<float>",
           xpj_range_1d(4 * n - 4, 256), ARGS(BUF(0), BUF(1)));
}

static int stencil_check(bench *b, char *msg, size_t size) {
  size_t n = b->n;
  const float *u = b->b[0].h, *o = b->b[1].h;
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < n; j++) {
      double want = i == 0 || j == 0 || i == n - 1 || j == n - 1
                        ? u[i * n + j]
                        : 0.25 * ((double)u[(i - 1) * n + j] + u[(i + 1) * n + j] +
                                  u[i * n + j - 1] + u[i * n + j + 1]);
      if (rel_check("out", i * n + j, o[i * n + j], want, 1e-6, msg, size))
        return -1;
    }
  return 0;
}

/* y = a x, m x k */
static void matvec_setup(bench *b) {
  size_t m = b->m = pick(16384, 4096, 256), k = b->k = pick(8192, 4096, 64);
  snprintf(b->size, sizeof b->size, "%zux%zu f32", m, k);
  float *a = add_buf(b, XPJ_F32, m, k, false), *x = add_buf(b, XPJ_F32, k, 0, false);
  add_buf(b, XPJ_F32, m, 0, true);
  fill_f32(a, m * k, 9, -1, 1);
  fill_f32(x, k, 10, -1, 1);
  add_step(b, F_CPU, "matvec", "T=f32", "matvec<float>", xpj_range_1d(m, 256),
           ARGS(BUF(0), BUF(1), BUF(2)));
}

static int matvec_check(bench *b, char *msg, size_t size) {
  const float *a = b->b[0].h, *x = b->b[1].h, *y = b->b[2].h;
  for (size_t i = 0; i < b->m; i++) {
    double s = 0, mag = 0;
    for (size_t k = 0; k < b->k; k++) {
      s += (double)a[i * b->k + k] * x[k];
      mag += fabs((double)a[i * b->k + k] * x[k]);
    }
    if (rel_check("y", i, y[i], s, 5e-5 * mag + 1e-6, msg, size))
      return -1;
  }
  return 0;
}

/* one all-pairs n-body step */
static void nbody_setup(bench *b) {
  size_t n = b->n = pick(65536, 16384, 512);
  snprintf(b->size, sizeof b->size, "%zu bodies f32", n);
  float *p = add_buf(b, XPJ_F32, 4, n, false), *v = add_buf(b, XPJ_F32, 3, n, false);
  add_buf(b, XPJ_F32, 3, n, true);
  add_buf(b, XPJ_F32, 3, n, true);
  fill_f32(p, 3 * n, 11, -1, 1);
  fill_f32(p + 3 * n, n, 12, 0.5f, 1);
  fill_f32(v, 3 * n, 13, -0.1f, 0.1f);
  b->p[0] = 0.01, b->p[1] = 0.01;
  add_step(b, F_CPU, "nbody", "T=f32", "nbody<float>", xpj_range_1d(n, 256),
           ARGS(BUF(0), BUF(1), BUF(2), BUF(3), SCAL(xpj_arg_f32(0.01f)),
                SCAL(xpj_arg_f32(0.01f))));
}

/* 64 bodies spread over the set */
static int nbody_check(bench *b, char *msg, size_t size) {
  size_t n = b->n;
  const float *p = b->b[0].h, *v = b->b[1].h, *vn = b->b[2].h, *acc = b->b[3].h;
  for (size_t s = 0; s < 64; s++) {
    size_t i = s * (n - 1) / 63;
    double a[3] = {0, 0, 0}, mag = 0;
    for (size_t j = 0; j < n; j++) {
      double d[3], r2 = b->p[1];
      for (int c = 0; c < 3; c++) {
        d[c] = (double)p[c * n + j] - p[c * n + i];
        r2 += d[c] * d[c];
      }
      double f = p[3 * n + j] / (r2 * sqrt(r2));
      for (int c = 0; c < 3; c++)
        a[c] += f * d[c];
      mag += f * sqrt(r2 - b->p[1]);
    }
    for (int c = 0; c < 3; c++) {
      if (rel_check("acc", c * n + i, acc[c * n + i], a[c], 5e-4 * mag + 1e-5, msg, size) ||
          rel_check("vnew", c * n + i, vn[c * n + i], v[c * n + i] + b->p[0] * a[c],
                    1e-5 * mag + 1e-5, msg, size))
        return -1;
    }
  }
  return 0;
}

/* inclusive scan within each group of 256 */
static void scan_setup(bench *b) {
  size_t n = b->n = pick((size_t)1 << 25, (size_t)1 << 22, 4096);
  snprintf(b->size, sizeof b->size, "%zu f32", n);
  float *x = add_buf(b, XPJ_F32, n, 0, false);
  add_buf(b, XPJ_F32, n, 0, true);
  fill_f32(x, n, 14, 0, 1);
  add_step(b, F_CPU, "scan_group", "T=f32", "scan_group<float>", xpj_range_1d(n, 256),
           ARGS(BUF(0), BUF(1)));
}

static int scan_check(bench *b, char *msg, size_t size) {
  const float *x = b->b[0].h, *y = b->b[1].h;
  double s = 0;
  for (size_t i = 0; i < b->n; i++) {
    s = i % 256 ? s + x[i] : x[i];
    if (rel_check("y", i, y[i], s, 1e-5 * s + 1e-6, msg, size))
      return -1;
  }
  return 0;
}

/* softmax of each row, one row per work-item */
static void softmax_setup(bench *b) {
  size_t rows = b->m = pick(65536, 16384, 256), n = b->n = 1024;
  snprintf(b->size, sizeof b->size, "%zux%zu f32", rows, n);
  float *x = add_buf(b, XPJ_F32, rows, n, false);
  add_buf(b, XPJ_F32, rows, n, true);
  fill_f32(x, rows * n, 15, -4, 4);
  add_step(b, F_CPU, "softmax", "T=f32", "softmax<float>", xpj_range_1d(rows, 256),
           ARGS(BUF(0), BUF(1)));
}

static int softmax_check(bench *b, char *msg, size_t size) {
  const float *x = b->b[0].h, *y = b->b[1].h;
  size_t n = b->n;
  for (size_t s = 0; s < 64; s++) {
    size_t r = s * (b->m - 1) / 63;
    double m = x[r * n], sum = 0;
    for (size_t j = 1; j < n; j++)
      m = fmax(m, x[r * n + j]);
    for (size_t j = 0; j < n; j++)
      sum += exp(x[r * n + j] - m);
    for (size_t j = 0; j < n; j++) {
      double want = exp(x[r * n + j] - m) / sum;
      if (rel_check("y", r * n + j, y[r * n + j], want, 1e-5 * want + 1e-8, msg, size))
        return -1;
    }
  }
  return 0;
}

/* 256 bins of n random bytes; hist zeroed in each run */
static void hist_setup(bench *b) {
  size_t n = b->n = pick((size_t)1 << 28, (size_t)1 << 24, (size_t)1 << 16);
  size_t groups = b->m = pick(1056, 264, 8);
  snprintf(b->size, sizeof b->size, "%zu bytes, %zu groups", n, groups);
  uint8_t *d = add_buf(b, XPJ_U8, n, 0, false);
  add_buf(b, XPJ_U32, 256, 0, true);
  rng_state = 16;
  for (size_t i = 0; i < n; i++) {
    rng_state = rng_state * 1664525u + 1013904223u;
    d[i] = (uint8_t)(rng_state >> 24);
  }
  b->zero_buf = 1;
  add_step(b, F_CPU, "histogram", NULL, "histogram<>", xpj_range_1d(groups * 256, 256),
           ARGS(BUF(0), BUF(1)));
}

static int hist_check(bench *b, char *msg, size_t size) {
  const uint8_t *d = b->b[0].h;
  const uint32_t *h = b->b[1].h;
  uint32_t want[256] = {0};
  for (size_t i = 0; i < b->n; i++)
    want[d[i]]++;
  for (size_t v = 0; v < 256; v++)
    if (rel_check("hist", v, h[v], want[v], 0, msg, size))
      return -1;
  return 0;
}

/* Black-Scholes call and put prices */
static void bs_setup(bench *b) {
  size_t n = b->n = pick((size_t)1 << 24, (size_t)1 << 22, 4096);
  snprintf(b->size, sizeof b->size, "%zu options f32", n);
  add_buf(b, XPJ_F32, n, 0, true);
  add_buf(b, XPJ_F32, n, 0, true);
  float *s = add_buf(b, XPJ_F32, n, 0, false), *x = add_buf(b, XPJ_F32, n, 0, false),
        *t = add_buf(b, XPJ_F32, n, 0, false);
  fill_f32(s, n, 17, 5, 30);
  fill_f32(x, n, 18, 1, 100);
  fill_f32(t, n, 19, 0.25f, 10);
  b->p[0] = 0.02, b->p[1] = 0.30;
  add_step(b, F_GPU, "blackscholes", "T=f32", "blackscholes<float>", xpj_range_1d(n, 256),
           ARGS(BUF(0), BUF(1), BUF(2), BUF(3), BUF(4), SCAL(xpj_arg_f32(0.02f)),
                SCAL(xpj_arg_f32(0.30f))));
}

static int bs_check(bench *b, char *msg, size_t size) {
  const float *call = b->b[0].h, *put = b->b[1].h, *s = b->b[2].h, *x = b->b[3].h,
              *t = b->b[4].h;
  double r = (float)b->p[0], v = (float)b->p[1];
  for (size_t i = 0; i < b->n; i++) {
    double st = sqrt(t[i]);
    double d1 = (log((double)s[i] / x[i]) + (r + 0.5 * v * v) * t[i]) / (v * st);
    double d2 = d1 - v * st;
    double c1 = 0.5 * erfc(-d1 / sqrt(2.0)), c2 = 0.5 * erfc(-d2 / sqrt(2.0));
    double ert = exp(-r * t[i]);
    double wc = s[i] * c1 - x[i] * ert * c2, wp = x[i] * ert * (1 - c2) - s[i] * (1 - c1);
    double tol = 2e-5 * (s[i] + x[i]);
    if (rel_check("call", i, call[i], wc, tol, msg, size) ||
        rel_check("put", i, put[i], wp, tol, msg, size))
      return -1;
  }
  return 0;
}

static bench benches[] = {
    {.name = "triad", .setup = triad_setup, .check = triad_check},
    {.name = "triad_f64", .setup = triad_setup, .check = triad_check},
    {.name = "reduction", .setup = reduce_setup, .check = reduce_check},
    {.name = "matmul_naive", .setup = matmul_setup, .check = matmul_check},
    {.name = "matmul_tiled16", .setup = matmul_setup, .check = matmul_check},
    {.name = "matmul", .setup = matmul_setup, .check = matmul_check},
    {.name = "gemm_tiled", .setup = matmul_setup, .check = matmul_check},
    {.name = "stencil", .setup = stencil_setup, .check = stencil_check},
    {.name = "matvec", .setup = matvec_setup, .check = matvec_check},
    {.name = "nbody", .setup = nbody_setup, .check = nbody_check},
    {.name = "scan", .setup = scan_setup, .check = scan_check},
    {.name = "softmax", .setup = softmax_setup, .check = softmax_check},
    {.name = "histogram", .setup = hist_setup, .check = hist_check},
    {.name = "blackscholes", .setup = bs_setup, .check = bs_check},
};
enum { NBENCH = sizeof benches / sizeof benches[0] };

/* ---- building and loading ------------------------------------------------ */

/* The parameters of s in xpjit's ABI, and its grid and block (hardware
 * order: logical dimension d of a rank-R launch is hardware R - 1 - d). */
static void marshal(bench *b, step *s) {
  bool range_kernel = s->range_kernel;
  unsigned np = 0, R = s->range.ndim;
  for (unsigned i = 0; i < s->nargs; i++) {
    const karg *a = &s->a[i];
    if (a->buf >= 0) {
      const xpj_array *v = &b->b[a->buf].view;
      s->pv[np++] = (uint64_t)(uintptr_t)v->data;
      s->pv[np++] = (uint64_t)v->offset;
      for (unsigned d = 0; d < v->ndim; d++)
        s->pv[np++] = (uint64_t)v->shape[d];
      for (unsigned d = 0; d < v->ndim; d++)
        s->pv[np++] = (uint64_t)v->strides[d];
    } else {
      uint64_t bits = 0;
      if (a->s.dtype == XPJ_F32) {
        float f = (float)a->s.v.f;
        memcpy(&bits, &f, 4);
      } else if (a->s.dtype == XPJ_F64) {
        memcpy(&bits, &a->s.v.f, 8);
      } else {
        bits = (uint64_t)a->s.v.i;
      }
      s->pv[np++] = bits;
    }
  }
  for (unsigned h = 0; h < 3; h++) {
    unsigned d = R - 1 - h;
    uint64_t g = h < R ? s->range.global[d] : 1, l = h < R ? s->range.local[d] : 1;
    s->block[h] = (unsigned)l;
    s->grid[h] = (unsigned)((g + l - 1) / l);
    if (range_kernel)
      s->pv[np + h] = g;
  }
  if (range_kernel)
    np += 3;
  for (unsigned i = 0; i < np; i++)
    s->pp[i] = &s->pv[i];
}

static CUresult raw_launch(step *s, CUfunction f) {
  return cu.LaunchKernel(f, s->grid[0], s->grid[1], s->grid[2], s->block[0], s->block[1],
                         s->block[2], 0, cu_stream, s->pp, NULL);
}

/* NVRTC: the twin of s to a cubin (malloc'd into s->cubin), its lowered
 * name into s->lowered; 0 or -1 with msg. */
static int nvrtc_build(step *s, char *msg, size_t size) {
  char arch[32];
  snprintf(arch, sizeof arch, "-arch=sm_%d%d", cc_major, cc_minor);
  const char *opts[12] = {arch, "-w"};
  int nopt = 2;
  for (int i = 0; i < n_nvrtc_extra; i++)
    opts[nopt++] = nvrtc_extra[i];
  nvrtc_prog p = NULL;
  int rc = nv.create(&p, cu_src[s->file], cu_files[s->file], 2, (const char *const *)cuh_text,
                     cuh_names);
  if (!rc)
    rc = nv.add_name(p, s->expr);
  int crc = rc ? rc : nv.compile(p, nopt, opts);
  const char *low = NULL;
  if (!crc && !nv.lowered(p, s->expr, &low) && low &&
      !nv.cubin_size(p, &s->cubin_len) && s->cubin_len) {
    s->cubin = xmalloc(s->cubin_len);
    if (nv.cubin(p, s->cubin)) {
      free(s->cubin);
      s->cubin = NULL;
    }
    snprintf(s->lowered, sizeof s->lowered, "%s", low);
  }
  if (!s->cubin) {
    size_t ln = 0;
    char *log = NULL;
    if (p && !nv.log_size(p, &ln) && (log = malloc(ln + 1)) && !nv.log(p, log))
      log[ln] = 0;
    snprintf(msg, size, "NVRTC %s: error %d: %.300s", s->expr, crc, log ? log : "");
    free(log);
  }
  if (p)
    nv.destroy(&p);
  return s->cubin ? 0 : -1;
}

static int load_fn(const void *image, const char *entry, CUmodule *m, CUfunction *f, char *msg,
                   size_t size) {
  CUresult r = cu.ModuleLoadData(m, image);
  if (!r && (r = cu.ModuleGetFunction(f, *m, entry))) {
    cu.ModuleUnload(*m);
    *m = NULL;
  }
  if (r)
    snprintf(msg, size, "cuModuleLoadData/GetFunction %s: %s", entry, cu_err(r));
  return r ? -1 : 0;
}

static xpj_status xlaunch(bench *b, step *s) {
  xpj_arg args[MAXARG];
  for (unsigned i = 0; i < s->nargs; i++)
    args[i] = s->a[i].buf >= 0 ? xpj_arg_array(&b->b[s->a[i].buf].view) : s->a[i].s;
  return xpj_launch(xq, s->xk, &s->range, s->nargs, args, NULL);
}

/* One run of path on b; 0 or -1 with b's message. Waits for it. */
static int run_once(bench *b, int path) {
  if (b->zero_buf >= 0) {
    buf *z = &b->b[b->zero_buf];
    if (path == P_X) {
      uint8_t zero = 0;
      xpj_enqueue_fill(xq, z->d, &zero, 1, z->bytes, NULL);
    } else {
      cu.MemsetD8Async((CUdeviceptr)(uintptr_t)z->d, 0, z->bytes, cu_stream);
    }
  }
  for (int i = 0; i < b->nsteps; i++) {
    step *s = &b->s[i];
    if (path == P_X) {
      if (xlaunch(b, s) != XPJ_OK) {
        set_msg(b, path, ST_FAIL, "xpj_launch %s: %s", s->kernel, xpj_last_error());
        return -1;
      }
    } else {
      CUresult r = raw_launch(s, path == P_XPTX ? s->xf : s->pf);
      if (r) {
        set_msg(b, path, ST_FAIL, "cuLaunchKernel %s: %s", s->kernel, cu_err(r));
        return -1;
      }
    }
  }
  if (path == P_X) {
    if (xpj_queue_wait(xq) != XPJ_OK) {
      set_msg(b, path, ST_FAIL, "xpj_queue_wait: %s", xpj_last_error());
      return -1;
    }
  } else {
    CUresult r = cu.StreamSynchronize(cu_stream);
    if (r) {
      set_msg(b, path, ST_FAIL, "cuStreamSynchronize: %s", cu_err(r));
      return -1;
    }
  }
  return 0;
}

/* ---- first launch: cold and warm ----------------------------------------- */

static xpj_context *fresh_context(void) {
  xpj_context_desc cd = {.visible = "cuda", .cache_path = cache_db, .daemon = "off",
                         .redis = "off", .no_env_bundles = 1};
  xpj_context *c = NULL;
  if (xpj_context_create(&cd, &c) != XPJ_OK)
    return NULL;
  return c;
}

/* ms of: program, kernels, one run and its wait, in a fresh context;
 * origin of the first kernel into *origin; < 0 on failure (message in b) */
static double xpjit_first(bench *b, xpj_kernel_origin *origin) {
  xpj_context *c = fresh_context();
  xpj_device *d = NULL;
  xpj_queue *q = NULL;
  xpj_program *progs[NFILES] = {NULL};
  double ms = -1;
  if (!c || xpj_device_select(c, opt_device, &d) != XPJ_OK ||
      xpj_queue_create(d, NULL, &q) != XPJ_OK) {
    set_msg(b, P_X, ST_FAIL, "context for the first launch: %s", xpj_last_error());
    goto out;
  }
  /* the bench's buffers, allocated in the main context (the same primary
   * context of the driver), known to this one too */
  for (int i = 0; i < b->nbuf; i++)
    if (xpj_mem_import(d, b->b[i].d, b->b[i].bytes, XPJ_MEM_DEVICE) != XPJ_OK) {
      set_msg(b, P_X, ST_FAIL, "xpj_mem_import: %s", xpj_last_error());
      goto out;
    }
  double t0 = now_s();
  for (int i = 0; i < b->nsteps; i++) {
    step *s = &b->s[i];
    xpj_kernel *k = NULL;
    if ((!progs[s->file] &&
         xpj_program_create_file(c, xpk_files[s->file], NULL, &progs[s->file]) != XPJ_OK) ||
        xpj_program_get_kernel(progs[s->file], s->kernel, s->dtypes, 0, d, NULL, &k) !=
            XPJ_OK) {
      set_msg(b, P_X, ST_FAIL, "first launch %s: %s", s->kernel, xpj_last_error());
      goto out;
    }
    xpj_kernel_info info;
    if (xpj_kernel_get_info(k, &info) == XPJ_OK) {
      if (i == 0)
        *origin = info.origin;
      s->range_kernel = info.kind == XPJ_FUNC_RANGE;
    }
    xpj_arg args[MAXARG];
    for (unsigned j = 0; j < s->nargs; j++)
      args[j] = s->a[j].buf >= 0 ? xpj_arg_array(&b->b[s->a[j].buf].view) : s->a[j].s;
    if (xpj_launch(q, k, &s->range, s->nargs, args, NULL) != XPJ_OK) {
      set_msg(b, P_X, ST_FAIL, "first launch %s: %s", s->kernel, xpj_last_error());
      goto out;
    }
  }
  if (xpj_queue_wait(q) != XPJ_OK) {
    set_msg(b, P_X, ST_FAIL, "first launch: %s", xpj_last_error());
    goto out;
  }
  ms = (now_s() - t0) * 1e3;
out:
  xpj_queue_destroy(q);
  for (int i = 0; i < NFILES; i++)
    xpj_program_destroy(progs[i]);
  xpj_context_destroy(c);
  return ms;
}

/* NVRTC cold (compile, load, launch, sync) or warm (the kept cubins
 * loaded, launch, sync); the modules stay loaded for the timed runs */
static double nvrtc_first(bench *b, bool warm) {
  double t0 = now_s();
  for (int i = 0; i < b->nsteps; i++) {
    step *s = &b->s[i];
    char msg[400];
    if (s->pmod) {
      cu.ModuleUnload(s->pmod);
      s->pmod = NULL;
    }
    if ((!warm && nvrtc_build(s, msg, sizeof msg)) ||
        load_fn(s->cubin, s->lowered, &s->pmod, &s->pf, msg, sizeof msg)) {
      set_msg(b, P_NV, ST_FAIL, "%s", msg);
      return -1;
    }
    CUresult r = raw_launch(s, s->pf);
    if (r) {
      set_msg(b, P_NV, ST_FAIL, "cuLaunchKernel %s: %s", s->kernel, cu_err(r));
      return -1;
    }
  }
  CUresult r = cu.StreamSynchronize(cu_stream);
  if (r) {
    set_msg(b, P_NV, ST_FAIL, "cuStreamSynchronize: %s", cu_err(r));
    return -1;
  }
  return (now_s() - t0) * 1e3;
}

/* ---- one benchmark --------------------------------------------------------- */

static bool copy_wait(void *dst, const void *src, size_t bytes) {
  return xpj_enqueue_copy(xq, dst, src, bytes, NULL) == XPJ_OK && xpj_queue_wait(xq) == XPJ_OK;
}

/* poisons the outputs, runs path once, reads them back and checks */
static void check_path(bench *b, int path) {
  for (int i = 0; i < b->nbuf; i++) {
    buf *f = &b->b[i];
    uint8_t ff = 0xff;
    if (f->out && (xpj_enqueue_fill(xq, f->d, &ff, 1, f->bytes, NULL) != XPJ_OK ||
                   xpj_queue_wait(xq) != XPJ_OK)) {
      set_msg(b, path, ST_FAIL, "poisoning the outputs: %s", xpj_last_error());
      return;
    }
  }
  if (run_once(b, path))
    return;
  if (opt_dry) {
    set_msg(b, path, ST_OK, "dry");
    return;
  }
  for (int i = 0; i < b->nbuf; i++) {
    buf *f = &b->b[i];
    if (f->out && !copy_wait(f->h, f->d, f->bytes)) {
      set_msg(b, path, ST_FAIL, "reading the outputs back: %s", xpj_last_error());
      return;
    }
  }
  char msg[400] = "";
  if (b->check(b, msg, sizeof msg))
    set_msg(b, path, ST_FAIL, "%s: %s", path_name[path], msg);
  else
    set_msg(b, path, ST_OK, "");
}

static double time_path(bench *b, int path, double *wall) {
  int n = opt_runs;
  double *t = xmalloc(sizeof(double) * (size_t)n), *w = xmalloc(sizeof(double) * (size_t)n);
  for (int i = 0; i < n; i++) {
    double t0 = now_s();
    if (path != P_X)
      cu.EventRecord(ev0, cu_stream);
    if (path != P_X && b->zero_buf >= 0) {
      buf *z = &b->b[b->zero_buf];
      cu.MemsetD8Async((CUdeviceptr)(uintptr_t)z->d, 0, z->bytes, cu_stream);
    }
    if (path == P_X) {
      if (run_once(b, path))
        break;
    } else {
      for (int j = 0; j < b->nsteps; j++)
        raw_launch(&b->s[j], path == P_XPTX ? b->s[j].xf : b->s[j].pf);
      cu.EventRecord(ev1, cu_stream);
      cu.EventSynchronize(ev1);
    }
    w[i] = (now_s() - t0) * 1e3;
    float ms = 0;
    if (path != P_X)
      cu.EventElapsedTime(&ms, ev0, ev1);
    t[i] = path == P_X ? w[i] : ms;
  }
  double m = median(t, n);
  if (wall)
    *wall = median(w, n);
  free(t);
  free(w);
  return m;
}

static void run_bench(bench *b) {
  b->zero_buf = -1;
  b->setup(b);
  for (int i = 0; i < b->nbuf; i++) {
    buf *f = &b->b[i];
    if (xpj_mem_alloc(xdev, XPJ_MEM_DEVICE, f->bytes, 0, &f->d) != XPJ_OK) {
      for (int p = 0; p < NPATH; p++)
        set_msg(b, p, ST_FAIL, "xpj_mem_alloc(%zu): %s", f->bytes, xpj_last_error());
      return;
    }
    f->view = f->cols ? xpj_array_2d(f->d, f->t, (int64_t)f->rows, (int64_t)f->cols)
                      : xpj_array_1d(f->d, f->t, (int64_t)f->rows);
    if (!f->out && !copy_wait(f->d, f->h, f->bytes)) {
      for (int p = 0; p < NPATH; p++)
        set_msg(b, p, ST_FAIL, "upload: %s", xpj_last_error());
      return;
    }
  }
  /* first launches (they compile what the timed runs use) */
  xpj_kernel_origin o1 = XPJ_ORIGIN_COMPILED, o2 = XPJ_ORIGIN_COMPILED;
  b->cold[0] = xpjit_first(b, &o1);
  if (b->cold[0] >= 0)
    b->warm[0] = xpjit_first(b, &o2);
  if (b->cold[0] >= 0 && b->warm[0] >= 0 && (o1 != XPJ_ORIGIN_COMPILED || o2 != XPJ_ORIGIN_CACHE))
    set_msg(b, P_X, ST_FAIL, "first launches: kernels from %d and %d, not compiled and cache",
            (int)o1, (int)o2);
  for (int i = 0; i < b->nsteps; i++)
    marshal(b, &b->s[i]);
  b->cold[1] = b->warm[1] = -1;
  if (nv_ok && b->cold[0] < 0) {
    set_msg(b, P_NV, ST_NA, "not run: the kernel's kind comes from xpjit, which failed");
  } else if (nv_ok) {
    b->cold[1] = nvrtc_first(b, false);
    if (b->cold[1] >= 0)
      b->warm[1] = nvrtc_first(b, true);
    b->ok[P_NV] = b->warm[1] >= 0;
  } else {
    set_msg(b, P_NV, ST_NA, "%s", opt_peer ? nv_why : "--no-peer");
  }
  /* xpjit's kernels in the main context, and its PTX for xptx */
  b->ok[P_X] = b->ok[P_XPTX] = b->state[P_X] != ST_FAIL;
  for (int i = 0; i < b->nsteps && b->ok[P_X]; i++) {
    step *s = &b->s[i];
    xpj_kernel_info info;
    void *ptx = NULL;
    size_t len = 0;
    char msg[400], entry[300];
    if (xpj_program_get_kernel(xprog[s->file], s->kernel, s->dtypes, 0, xdev, NULL, &s->xk) !=
            XPJ_OK ||
        xpj_kernel_get_info(s->xk, &info) != XPJ_OK) {
      set_msg(b, P_X, ST_FAIL, "%s: %s", s->kernel, xpj_last_error());
      b->ok[P_X] = b->ok[P_XPTX] = false;
      break;
    }
    if (xpj_program_get_binary(xprog[s->file], s->kernel, s->dtypes, 0, info.target, NULL, &ptx,
                               &len) != XPJ_OK) {
      set_msg(b, P_XPTX, ST_FAIL, "xpj_program_get_binary %s: %s", s->kernel, xpj_last_error());
      b->ok[P_XPTX] = false;
      continue;
    }
    char *text = xmalloc(len + 1); /* PTX is text; the driver wants it NUL-terminated */
    memcpy(text, ptx, len);
    text[len] = 0;
    free(ptx);
    snprintf(entry, sizeof entry, "__xpj_k_%s", s->kernel);
    if (load_fn(text, entry, &s->xmod, &s->xf, msg, sizeof msg)) {
      set_msg(b, P_XPTX, ST_FAIL, "%s", msg);
      b->ok[P_XPTX] = false;
    }
    free(text);
  }
  for (int p = 0; p < NPATH; p++)
    if (b->ok[p])
      check_path(b, p);
  if (opt_dry)
    return;
  for (int p = 0; p < NPATH; p++)
    if (b->ok[p] && b->state[p] == ST_OK) {
      run_once(b, p); /* warm-up */
      b->t[p] = time_path(b, p, p == P_NV ? &b->nv_wall : NULL);
    }
}

static void free_bench(bench *b) {
  for (int i = 0; i < b->nsteps; i++) {
    step *s = &b->s[i];
    if (s->xmod)
      cu.ModuleUnload(s->xmod);
    if (s->pmod)
      cu.ModuleUnload(s->pmod);
    free(s->cubin);
  }
  for (int i = 0; i < b->nbuf; i++) {
    if (b->b[i].d)
      xpj_mem_free(xdev, b->b[i].d);
    free(b->b[i].h);
  }
}

/* ---- launch overhead ------------------------------------------------------- */

typedef struct overhead {
  int state;
  char msg[400];
  double us[2][2]; /* [xpjit, bare][one wait, wait each] */
} overhead;

static void launch_overhead(overhead *o) {
  enum { N = 1000 };
  bench b = {.name = "empty", .zero_buf = -1};
  step *s = &b.s[0];
  b.nsteps = 1;
  s->file = F_GPU;
  s->kernel = "empty";
  s->expr = "empty<>";
  s->range = xpj_range_1d(1, 1);
  if (xpj_program_get_kernel(xprog[F_GPU], "empty", NULL, 0, xdev, NULL, &s->xk) != XPJ_OK) {
    o->state = ST_FAIL;
    snprintf(o->msg, sizeof o->msg, "empty: %s", xpj_last_error());
    return;
  }
  s->range_kernel = true;
  marshal(&b, s);
  bool peer = false;
  if (nv_ok) {
    if (nvrtc_build(s, o->msg, sizeof o->msg) ||
        load_fn(s->cubin, s->lowered, &s->pmod, &s->pf, o->msg, sizeof o->msg)) {
      o->state = ST_FAIL;
      free(s->cubin);
      return;
    }
    peer = true;
  }
  o->state = ST_OK;
  for (int round = 0; round < 2; round++) { /* the first is a warm-up */
    for (int each = 0; each < 2; each++) {
      double t0 = now_s();
      for (int i = 0; i < N; i++) {
        if (xpj_launch(xq, s->xk, &s->range, 0, NULL, NULL) != XPJ_OK ||
            (each && xpj_queue_wait(xq) != XPJ_OK)) {
          o->state = ST_FAIL;
          snprintf(o->msg, sizeof o->msg, "empty launch: %s", xpj_last_error());
          goto out;
        }
      }
      xpj_queue_wait(xq);
      o->us[0][each] = (now_s() - t0) * 1e6 / N;
      if (!peer)
        continue;
      t0 = now_s();
      for (int i = 0; i < N; i++) {
        CUresult r = raw_launch(s, s->pf);
        if (!r && each)
          r = cu.StreamSynchronize(cu_stream);
        if (r) {
          o->state = ST_FAIL;
          snprintf(o->msg, sizeof o->msg, "empty cuLaunchKernel: %s", cu_err(r));
          goto out;
        }
      }
      cu.StreamSynchronize(cu_stream);
      o->us[1][each] = (now_s() - t0) * 1e6 / N;
    }
  }
out:
  if (s->pmod)
    cu.ModuleUnload(s->pmod);
  free(s->cubin);
}

/* ---- the report ------------------------------------------------------------ */

static const char *cell(char *out, size_t size, const bench *b, int path, double v) {
  if (opt_dry && b->state[path] == ST_OK)
    snprintf(out, size, "dry");
  else if (b->state[path] == ST_FAIL)
    snprintf(out, size, "FAIL");
  else if (b->state[path] != ST_OK || v <= 0)
    snprintf(out, size, "-");
  else
    snprintf(out, size, "%.3f", v);
  return out;
}

static const char *ratio(char *out, size_t size, double a, double b) {
  if (opt_dry)
    snprintf(out, size, "dry");
  else if (a > 0 && b > 0)
    snprintf(out, size, "%.2fx", a / b);
  else
    snprintf(out, size, "-");
  return out;
}

static const char *ms_cell(char *out, size_t size, double v) {
  if (opt_dry && v >= 0)
    snprintf(out, size, "dry");
  else if (v < 0)
    snprintf(out, size, "-");
  else
    snprintf(out, size, "%.1f", v);
  return out;
}

static void report(const overhead *o) {
  printf("\nkernel time, ms (median of %d; xptx and nvrtc: CUDA events; xpjit and nvrtc-wall: "
         "launch + wait)\n",
         opt_runs);
  printf("%-15s %-26s %9s %9s %9s %8s %9s %9s %8s\n", "kernel", "size", "xptx", "nvrtc",
         "xptx/nv", "", "xpjit", "nv-wall", "xpj/nvw");
  double lg = 0, lgw = 0;
  int ng = 0, ngw = 0;
  for (int i = 0; i < NBENCH; i++) {
    bench *b = &benches[i];
    if (!b->setup || !b->nsteps)
      continue;
    char c[6][32];
    printf("%-15s %-26s %9s %9s %9s %8s %9s %9s %8s\n", b->name, b->size,
           cell(c[0], 32, b, P_XPTX, b->t[P_XPTX]), cell(c[1], 32, b, P_NV, b->t[P_NV]),
           ratio(c[2], 32, b->t[P_XPTX], b->t[P_NV]), "",
           cell(c[3], 32, b, P_X, b->t[P_X]), cell(c[4], 32, b, P_NV, b->nv_wall),
           ratio(c[5], 32, b->t[P_X], b->nv_wall));
    if (b->t[P_XPTX] > 0 && b->t[P_NV] > 0) {
      lg += log(b->t[P_XPTX] / b->t[P_NV]);
      ng++;
    }
    if (b->t[P_X] > 0 && b->nv_wall > 0) {
      lgw += log(b->t[P_X] / b->nv_wall);
      ngw++;
    }
  }
  if (ng)
    printf("geomean xptx/nvrtc %.3fx over %d kernels\n", exp(lg / ng), ng);
  if (ngw)
    printf("geomean xpjit/nvrtc-wall %.3fx over %d kernels\n", exp(lgw / ngw), ngw);

  printf("\nfirst launch, ms (a fresh context: cold = empty cache; warm = xpjit's cache with "
         "the driver's cubin / NVRTC's cubin kept)\n");
  printf("%-15s %10s %10s %8s %10s %10s %8s %9s\n", "kernel", "xpjit cold", "xpjit warm",
         "cold/w", "nvrtc cold", "nvrtc warm", "cold/w", "xcold/nv");
  for (int i = 0; i < NBENCH; i++) {
    bench *b = &benches[i];
    if (!b->setup || !b->nsteps)
      continue;
    char c[7][32];
    printf("%-15s %10s %10s %8s %10s %10s %8s %9s\n", b->name, ms_cell(c[0], 32, b->cold[0]),
           ms_cell(c[1], 32, b->warm[0]), ratio(c[2], 32, b->cold[0], b->warm[0]),
           ms_cell(c[3], 32, b->cold[1]), ms_cell(c[4], 32, b->warm[1]),
           ratio(c[5], 32, b->cold[1], b->warm[1]), ratio(c[6], 32, b->cold[0], b->cold[1]));
  }

  printf("\nlaunch overhead, us per launch (1,000 launches of an empty kernel)\n");
  if (o->state == ST_FAIL) {
    printf("FAIL: %s\n", o->msg);
  } else {
    char c[3][32];
    for (int each = 0; each < 2; each++)
      printf("%-28s xpjit %8s  bare cuLaunchKernel %8s  xpjit/bare %8s\n",
             each ? "launch + wait, each" : "launches, then one wait",
             opt_dry ? "dry" : (snprintf(c[0], 32, "%.2f", o->us[0][each]), c[0]),
             opt_dry ? "dry" : nv_ok ? (snprintf(c[1], 32, "%.2f", o->us[1][each]), c[1]) : "-",
             nv_ok ? ratio(c[2], 32, o->us[0][each], o->us[1][each]) : "-");
  }

  bool any = false;
  for (int i = 0; i < NBENCH; i++) {
    bench *b = &benches[i];
    for (int p = 0; p < NPATH; p++)
      if (b->setup && b->nsteps && (b->state[p] == ST_FAIL || b->state[p] == ST_NA) &&
          b->msg[p][0]) {
        if (!any)
          printf("\nnotes:\n");
        any = true;
        printf("  %s %s: %s%s\n", b->name, path_name[p], b->state[p] == ST_FAIL ? "FAIL: " : "",
               b->msg[p]);
        if (b->state[p] == ST_FAIL)
          failures++;
      }
  }
  if (o->state == ST_FAIL)
    failures++;
}

/* ---- main -------------------------------------------------------------------- */

/* The private cache directory goes at every exit after mkdtemp: main's
 * return (after the context is destroyed, which writes the cache's
 * deferred work) and the early exits (xmalloc's out of memory). */
static void remove_cache_dir(void) {
  if (cache_dir[0])
    rm_tree(cache_dir);
}

static void usage(void) {
  fprintf(stderr, "usage: gpu [--runs N] [--quick] [--dry-run] [--kernel NAME[,NAME...]] "
                  "[--device FILTER] [--nvrtc-opt OPT]... [--no-peer] [--list]\n");
  exit(2);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--runs") && i + 1 < argc)
      opt_runs = atoi(argv[++i]);
    else if (!strcmp(a, "--quick"))
      opt_quick = true;
    else if (!strcmp(a, "--dry-run"))
      opt_dry = true;
    else if (!strcmp(a, "--kernel") && i + 1 < argc)
      opt_kernels = argv[++i];
    else if (!strcmp(a, "--device") && i + 1 < argc)
      opt_device = argv[++i];
    else if (!strcmp(a, "--nvrtc-opt") && i + 1 < argc && n_nvrtc_extra < 8)
      nvrtc_extra[n_nvrtc_extra++] = argv[++i];
    else if (!strcmp(a, "--no-peer"))
      opt_peer = false;
    else if (!strcmp(a, "--list")) {
      for (int k = 0; k < NBENCH; k++)
        printf("%s\n", benches[k].name);
      return 0;
    } else
      usage();
  }
  if (opt_runs < 1)
    usage();
  if (opt_quick && opt_runs == 20)
    opt_runs = 5;
  if (opt_dry)
    opt_runs = 1;
  setvbuf(stdout, NULL, _IOLBF, 0);

  char why[700];
  xpj_context_desc cd = {.visible = "cuda", .daemon = "off", .redis = "off",
                         .no_env_bundles = 1};
  const char *tmp = getenv("TMPDIR");
  snprintf(cache_dir, sizeof cache_dir, "%s/xpjit-bench-gpu-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(cache_dir)) {
    perror("gpu: mkdtemp");
    return 1;
  }
  if (atexit(remove_cache_dir) != 0) {
    rm_tree(cache_dir);
    fprintf(stderr, "gpu: atexit failed\n");
    return 1;
  }
  snprintf(cache_db, sizeof cache_db, "%s/cache.db", cache_dir);
  cd.cache_path = cache_db;
  int rc = 0;
  if (xpj_context_create(&cd, &xctx) != XPJ_OK ||
      xpj_device_select(xctx, opt_device, &xdev) != XPJ_OK) {
    printf("gpu: no CUDA device (%s): %s\n", opt_device, xpj_last_error());
    rc = 77;
    goto out;
  }
  xpj_device_get_info(xdev, &xinfo);
  if (!cu_load(why, sizeof why) || !cu_setup(xinfo.name, why, sizeof why)) {
    printf("gpu: %s: %s\n", cu_lib_name, why);
    rc = 77;
    goto out;
  }
  if (xpj_queue_create(xdev, NULL, &xq) != XPJ_OK) {
    printf("gpu: xpj_queue_create: %s\n", xpj_last_error());
    rc = 1;
    goto out;
  }
  for (int f = 0; f < NFILES; f++)
    if (xpj_program_create_file(xctx, xpk_files[f], NULL, &xprog[f]) != XPJ_OK) {
      printf("gpu: %s: %s\n", xpk_files[f], xpj_last_error());
      rc = 1;
      goto out;
    }
  if (opt_peer && (nv_ok = nvrtc_load())) {
    for (int f = 0; f < NFILES && nv_ok; f++)
      if (!(cu_src[f] = slurp(cu_files[f], NULL))) {
        snprintf(nv_why, sizeof nv_why, "cannot read %s", cu_files[f]);
        nv_ok = false;
      }
    if (nv_ok && (!(cuh_text[0] = slurp("bench/peers/compile/xpk_peer.cuh", NULL)) ||
                  !(cuh_text[1] = slurp("bench/peers/gpu/gpu_peer.cuh", NULL)))) {
      snprintf(nv_why, sizeof nv_why, "cannot read the peers' headers");
      nv_ok = false;
    }
  }
  printf("gpu: %s (%s), sm_%d%d, driver %d.%d (%s), xpjit target %s\n", xinfo.name,
         xpj_device_id(xdev), cc_major, cc_minor, driver_version / 1000,
         driver_version % 1000 / 10, cu_lib_name, xinfo.target);
  if (nv_ok)
    printf("peer: NVRTC %d.%d (%s), -arch=sm_%d%d%s%s\n", nv_major, nv_minor, nv_path, cc_major,
           cc_minor, n_nvrtc_extra ? " and" : "", n_nvrtc_extra ? "" : " (NVRTC's defaults)");
  else
    printf("peer: not available: %s\n", opt_peer ? nv_why : "--no-peer");
  for (int i = 0; i < n_nvrtc_extra; i++)
    printf("  %s\n", nvrtc_extra[i]);
  if (opt_dry)
    printf("dry run: compiled, loaded and launched; no result checks, no timings\n");

  for (int i = 0; i < NBENCH; i++) {
    bench *b = &benches[i];
    if (opt_kernels) {
      size_t n = strlen(b->name);
      const char *p = opt_kernels;
      bool hit = false;
      for (; (p = strstr(p, b->name)); p += n)
        if ((p == opt_kernels || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
          hit = true;
      if (!hit)
        continue;
    }
    double t0 = now_s();
    run_bench(b);
    fprintf(stderr, "gpu: %s done in %.1f s\n", b->name, now_s() - t0);
    free_bench(b);
  }
  overhead o = {0};
  launch_overhead(&o);
  report(&o);
  rc = failures ? 1 : 0;
  printf("\n%s: %d failure%s\n", failures ? "FAIL" : "ok", failures, failures == 1 ? "" : "s");
out:
  xpj_queue_destroy(xq);
  for (int f = 0; f < NFILES; f++) {
    xpj_program_destroy(xprog[f]);
    free(cu_src[f]);
  }
  free(cuh_text[0]);
  free(cuh_text[1]);
  xpj_context_destroy(xctx); /* then remove_cache_dir, at exit */
  return rc;
}
