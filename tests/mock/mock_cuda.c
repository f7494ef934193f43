/* mock_cuda.c - a stand-in libcuda for tests/test_cuda.c: exactly the
 * driver API subset runtime/cuda.c uses, with host memory behind every
 * allocation (copies and fills really happen and can be read back), a
 * "JIT" that checks the PTX and wraps it into a fake cubin, and a record
 * of every launch with its parameters (their sizes from the PTX .entry).
 *
 * Configured from the environment at cuInit:
 *   MOCK_CUDA_DEVICES  number of devices (default 1)
 *   MOCK_CUDA_CC       compute capability, e.g. 90; a comma-separated list
 *                      gives one per device (the last repeats)
 *   MOCK_CUDA_DRIVER   cuDriverGetVersion (default 13000)
 *   MOCK_CUDA_FAIL     comma-separated failures: init (cuInit says
 *                      CUDA_ERROR_NO_DEVICE), alloc, link (a ptxas-like
 *                      error log and CUDA_ERROR_INVALID_PTX), load,
 *                      launch, sync (the next cuStreamSynchronize after a
 *                      launch says CUDA_ERROR_ILLEGAL_ADDRESS, once),
 *                      optin (no shared memory opt-in: the device
 *                      attribute and cuFuncSetAttribute say
 *                      CUDA_ERROR_INVALID_VALUE), setattr (cuFuncSetAttribute
 *                      says CUDA_ERROR_INVALID_VALUE)
 * Shared memory as the driver counts it: a function's static .shared
 * bytes are those declared in its PTX entry; a launch's dynamic shared
 * memory may take what the default 48 KiB per block leaves beside them,
 * or what cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_
 * BYTES) allowed, which with the static bytes is at most the device's
 * opt-in limit (227 KiB on sm_90, as the hardware's).
 * Calls that need a context fail with CUDA_ERROR_INVALID_CONTEXT when the
 * calling thread has none current, and count it in no_context.
 *
 * For bench/gpu --dry-run, which loads modules and times launches itself:
 * cuModuleLoadData also takes PTX text (checked as the JIT checks it) and
 * an ELF cubin (NVRTC's; its functions found by name in the image, their
 * parameters unknown, so launches record none), and events exist
 * (cuEventElapsedTime gives the host time between the two records). */
#include "mock_cuda.h"

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

enum {
  OK = 0,
  E_INVALID_VALUE = 1,
  E_OUT_OF_MEMORY = 2,
  E_NOT_INITIALIZED = 3,
  E_NO_DEVICE = 100,
  E_INVALID_DEVICE = 101,
  E_INVALID_IMAGE = 200,
  E_INVALID_CONTEXT = 201,
  E_NO_BINARY_FOR_GPU = 209,
  E_INVALID_PTX = 218,
  E_UNSUPPORTED_PTX_VERSION = 222,
  E_INVALID_HANDLE = 400,
  E_NOT_FOUND = 500,
  E_ILLEGAL_ADDRESS = 700,
  E_LAUNCH_OUT_OF_RESOURCES = 701,
};

#define MAX_DEVICES 8

typedef struct CUctx_st {
  int dev;
  int refs;
} CUctx_st;

typedef struct CUstream_st {
  int pending_fail;
} CUstream_st;

typedef struct CUfunc_st {
  char name[64];
  unsigned nparams;
  unsigned char size[MOCK_CUDA_PARAMS];
  int dev;
  unsigned static_shared; /* .shared bytes declared in the entry */
  int max_dyn;            /* cuFuncSetAttribute's; -1: never set */
  struct CUfunc_st *next;
} CUfunc_st;

typedef struct CUmod_st {
  char *text; /* the fake cubin or the PTX */
  unsigned char *elf; /* or an ELF image (a copy) */
  size_t elf_len;
  CUfunc_st *funcs;
} CUmod_st;

typedef struct CUevent_st {
  double t; /* seconds, CLOCK_MONOTONIC, at the last record */
  int recorded;
} CUevent_st;

typedef struct CUlinkState_st {
  char *ptx, *cubin;
  size_t cubin_len;
  char *elog, *ilog;
  size_t elog_size, ilog_size;
} CUlinkState_st;

typedef struct alloc {
  void *p;
  int host;
  struct alloc *next;
} alloc;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static mock_cuda_state st;
static int inited, ndev, driver = 13000;
static int cc[MAX_DEVICES];
static char fail[256];
static CUctx_st ctxs[MAX_DEVICES];
static alloc *allocs;
static _Thread_local CUctx_st *cur;

const mock_cuda_state *mock_cuda_get(void) { return &st; }

/* Zeroes the counters and the launch record; what is alive stays. */
void mock_cuda_reset(void) {
  pthread_mutex_lock(&mu);
  mock_cuda_state keep = st;
  memset(&st, 0, sizeof st);
  st.live_allocs = keep.live_allocs;
  st.live_streams = keep.live_streams;
  st.live_modules = keep.live_modules;
  st.live_links = keep.live_links;
  st.retained_ctxs = keep.retained_ctxs;
  pthread_mutex_unlock(&mu);
}

static int failing(const char *what) {
  size_t n = strlen(what);
  for (const char *p = fail; (p = strstr(p, what)); p += n)
    if ((p == fail || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
      return 1;
  return 0;
}

static int env_int(const char *name, int def) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : def;
}

static CUresult need_ctx(void) {
  if (!inited)
    return E_NOT_INITIALIZED;
  if (cur && cur->refs > 0)
    return OK;
  pthread_mutex_lock(&mu);
  st.no_context++;
  pthread_mutex_unlock(&mu);
  return E_INVALID_CONTEXT;
}

static int bad_dev(CUdevice d) { return !inited || d < 0 || d >= ndev; }

/* ---- errors ---------------------------------------------------------- */

static const struct {
  CUresult r;
  const char *name, *str;
} errs[] = {
    {OK, "CUDA_SUCCESS", "no error"},
    {E_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {E_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {E_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {E_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {E_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {E_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {E_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {E_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "no kernel image is available for execution on the device"},
    {E_INVALID_PTX, "CUDA_ERROR_INVALID_PTX",
     "a PTX JIT compilation failed"},
    {E_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the provided PTX was compiled with an unsupported toolchain."},
    {E_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {E_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {E_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {E_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
};

CUresult cuGetErrorName(CUresult r, const char **s) {
  for (size_t i = 0; i < sizeof errs / sizeof *errs; i++)
    if (errs[i].r == r) {
      *s = errs[i].name;
      return OK;
    }
  *s = NULL;
  return E_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult r, const char **s) {
  for (size_t i = 0; i < sizeof errs / sizeof *errs; i++)
    if (errs[i].r == r) {
      *s = errs[i].str;
      return OK;
    }
  *s = NULL;
  return E_INVALID_VALUE;
}

/* ---- init and devices ------------------------------------------------ */

CUresult cuInit(unsigned flags) {
  if (flags)
    return E_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  st.inits++;
  const char *f = getenv("MOCK_CUDA_FAIL");
  snprintf(fail, sizeof fail, "%s", f ? f : "");
  driver = env_int("MOCK_CUDA_DRIVER", 13000);
  ndev = env_int("MOCK_CUDA_DEVICES", 1);
  if (ndev < 0 || ndev > MAX_DEVICES)
    ndev = MAX_DEVICES;
  const char *c = getenv("MOCK_CUDA_CC");
  int last = 90;
  for (int i = 0; i < MAX_DEVICES; i++) {
    if (c && *c) {
      last = atoi(c);
      c = strchr(c, ',');
      c = c ? c + 1 : NULL;
    }
    cc[i] = last;
    ctxs[i].dev = i;
  }
  int bad = failing("init");
  inited = !bad;
  pthread_mutex_unlock(&mu);
  return bad ? E_NO_DEVICE : OK;
}

CUresult cuDriverGetVersion(int *v) {
  if (!v)
    return E_INVALID_VALUE;
  *v = driver;
  return OK;
}

CUresult cuDeviceGetCount(int *n) {
  if (!inited)
    return E_NOT_INITIALIZED;
  *n = ndev;
  return OK;
}

CUresult cuDeviceGet(CUdevice *d, int i) {
  if (bad_dev(i))
    return inited ? E_INVALID_DEVICE : E_NOT_INITIALIZED;
  *d = i;
  return OK;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
  if (bad_dev(d) || len <= 0)
    return E_INVALID_VALUE;
  snprintf(name, (size_t)len, "Mock GPU %d (sm_%d)", d, cc[d]);
  return OK;
}

CUresult cuDeviceGetUuid_v2(unsigned char *uuid, CUdevice d) {
  if (bad_dev(d))
    return E_INVALID_VALUE;
  for (int i = 0; i < 16; i++)
    uuid[i] = (unsigned char)(i == 0 ? 0xa0 + d : i);
  return OK;
}

CUresult cuDeviceGetUuid(unsigned char *uuid, CUdevice d) {
  return cuDeviceGetUuid_v2(uuid, d);
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
  if (bad_dev(d))
    return E_INVALID_VALUE;
  *bytes = ((size_t)16 << 30) + (size_t)d;
  return OK;
}

/* Shared memory per block with a kernel's opt-in, as NVIDIA's tables give
 * it for each compute capability */
static int optin_bytes(CUdevice d) {
  int c = cc[d];
  return c >= 120 ? 101376 : c >= 90 ? 232448 : c == 80 || c == 87 ? 166912
         : c >= 86 ? 101376 : c >= 75 ? 65536 : c >= 70 ? 98304 : 49152;
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
  if (bad_dev(d))
    return E_INVALID_VALUE;
  switch (attr) {
  case 1: *v = 1024; break;              /* max threads per block */
  case 2: case 3: *v = 1024; break;      /* max block dim x, y */
  case 4: *v = 64; break;                /* z */
  case 5: *v = 2147483647; break;        /* max grid dim x */
  case 6: case 7: *v = 65535; break;     /* y, z */
  case 8: *v = 49152; break;             /* shared memory per block */
  case 97:                               /* the same with the opt-in */
    if (failing("optin"))
      return E_INVALID_VALUE;
    *v = optin_bytes(d);
    break;
  case 16: *v = cc[d] >= 90 ? 132 : 108; break; /* SMs */
  case 41: *v = 1; break;                /* unified addressing */
  case 75: *v = cc[d] / 10; break;
  case 76: *v = cc[d] % 10; break;
  case 83: *v = 1; break;                /* managed memory */
  default: return E_INVALID_VALUE;
  }
  return OK;
}

/* ---- contexts -------------------------------------------------------- */

CUresult cuDevicePrimaryCtxRetain(CUctx_st **c, CUdevice d) {
  if (bad_dev(d))
    return E_INVALID_DEVICE;
  pthread_mutex_lock(&mu);
  ctxs[d].refs++;
  st.retained_ctxs++;
  pthread_mutex_unlock(&mu);
  *c = &ctxs[d];
  return OK;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  if (bad_dev(d))
    return E_INVALID_DEVICE;
  pthread_mutex_lock(&mu);
  CUresult r = ctxs[d].refs > 0 ? OK : E_INVALID_CONTEXT;
  if (!r) {
    ctxs[d].refs--;
    st.retained_ctxs--;
  }
  pthread_mutex_unlock(&mu);
  return r;
}

CUresult cuCtxSetCurrent(CUctx_st *c) {
  if (!inited)
    return E_NOT_INITIALIZED;
  if (c && (c < ctxs || c >= ctxs + MAX_DEVICES || c->refs <= 0))
    return E_INVALID_CONTEXT;
  cur = c;
  pthread_mutex_lock(&mu);
  st.set_currents++;
  pthread_mutex_unlock(&mu);
  return OK;
}

/* ---- memory ---------------------------------------------------------- */

static CUresult mem_new(void **out, size_t bytes, size_t align, int host) {
  CUresult r = need_ctx();
  if (r)
    return r;
  if (!bytes)
    return E_INVALID_VALUE;
  if (failing("alloc"))
    return E_OUT_OF_MEMORY;
  alloc *a = malloc(sizeof *a);
  void *p = aligned_alloc(align, (bytes + align - 1) & ~(align - 1));
  if (!a || !p) {
    free(a);
    free(p);
    return E_OUT_OF_MEMORY;
  }
  memset(p, 0xa5, bytes); /* not zero: device memory is not cleared */
  a->p = p;
  a->host = host;
  pthread_mutex_lock(&mu);
  a->next = allocs;
  allocs = a;
  st.live_allocs++;
  pthread_mutex_unlock(&mu);
  *out = p;
  return OK;
}

static CUresult mem_del(void *p, int host) {
  CUresult r = need_ctx();
  if (r)
    return r;
  pthread_mutex_lock(&mu);
  r = E_INVALID_VALUE;
  for (alloc **pa = &allocs; *pa; pa = &(*pa)->next)
    if ((*pa)->p == p && (*pa)->host == host) {
      alloc *a = *pa;
      *pa = a->next;
      free(a->p);
      free(a);
      st.live_allocs--;
      r = OK;
      break;
    }
  pthread_mutex_unlock(&mu);
  return r;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dp, size_t bytes) {
  void *p = NULL;
  CUresult r = mem_new(&p, bytes, 256, 0);
  *dp = (CUdeviceptr)(uintptr_t)p;
  return r;
}

CUresult cuMemAllocManaged(CUdeviceptr *dp, size_t bytes, unsigned flags) {
  if (flags != 1 && flags != 2) /* CU_MEM_ATTACH_GLOBAL or _HOST */
    return E_INVALID_VALUE;
  void *p = NULL;
  CUresult r = mem_new(&p, bytes, 256, 0);
  *dp = (CUdeviceptr)(uintptr_t)p;
  return r;
}

CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
  if (flags & ~7u)
    return E_INVALID_VALUE;
  return mem_new(p, bytes, 4096, 1);
}

CUresult cuMemFree_v2(CUdeviceptr p) { return mem_del((void *)(uintptr_t)p, 0); }
CUresult cuMemFreeHost(void *p) { return mem_del(p, 1); }

static CUresult stream_op(CUstream_st *s, int *counter) {
  (void)s;
  CUresult r = need_ctx();
  if (!r) {
    pthread_mutex_lock(&mu);
    ++*counter;
    pthread_mutex_unlock(&mu);
  }
  return r;
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
                       CUstream_st *s) {
  CUresult r = stream_op(s, &st.memcpys);
  if (!r && n)
    memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  return r;
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n,
                         CUstream_st *s) {
  CUresult r = stream_op(s, &st.memsets);
  if (!r)
    memset((void *)(uintptr_t)dst, v, n);
  return r;
}

CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n,
                          CUstream_st *s) {
  CUresult r = stream_op(s, &st.memsets);
  if (!r && dst % 2)
    r = E_INVALID_VALUE;
  for (size_t i = 0; !r && i < n; i++)
    memcpy((char *)(uintptr_t)dst + 2 * i, &v, 2);
  return r;
}

CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n,
                          CUstream_st *s) {
  CUresult r = stream_op(s, &st.memsets);
  if (!r && dst % 4)
    r = E_INVALID_VALUE;
  for (size_t i = 0; !r && i < n; i++)
    memcpy((char *)(uintptr_t)dst + 4 * i, &v, 4);
  return r;
}

/* ---- streams --------------------------------------------------------- */

CUresult cuStreamCreate(CUstream_st **s, unsigned flags) {
  CUresult r = need_ctx();
  if (r)
    return r;
  if (flags > 1)
    return E_INVALID_VALUE;
  *s = calloc(1, sizeof **s);
  if (!*s)
    return E_OUT_OF_MEMORY;
  pthread_mutex_lock(&mu);
  st.live_streams++;
  pthread_mutex_unlock(&mu);
  return OK;
}

CUresult cuStreamDestroy_v2(CUstream_st *s) {
  CUresult r = need_ctx();
  if (r)
    return r;
  if (!s)
    return E_INVALID_HANDLE;
  free(s);
  pthread_mutex_lock(&mu);
  st.live_streams--;
  pthread_mutex_unlock(&mu);
  return OK;
}

/* CUDA's legacy and per-thread default streams: handles, not streams */
#define DEFAULT_STREAM(s) ((uintptr_t)(s) == 1 || (uintptr_t)(s) == 2)

CUresult cuStreamSynchronize(CUstream_st *s) {
  CUresult r = stream_op(s, &st.syncs);
  if (!r) {
    pthread_mutex_lock(&mu);
    st.last_synced = s;
    pthread_mutex_unlock(&mu);
  }
  if (!r && s && !DEFAULT_STREAM(s) && s->pending_fail) {
    s->pending_fail = 0;
    r = E_ILLEGAL_ADDRESS;
  }
  return r;
}

CUresult cuCtxSynchronize(void) {
  return stream_op(NULL, &st.ctx_syncs);
}

/* ---- the JIT --------------------------------------------------------- */

static void log_to(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void log_to(char *buf, size_t size, const char *fmt, ...) {
  if (!buf || !size)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, size, fmt, ap);
  va_end(ap);
}

CUresult cuLinkCreate_v2(unsigned n, int *opt, void **val,
                         CUlinkState_st **out) {
  CUresult r = need_ctx();
  if (r)
    return r;
  CUlinkState_st *ls = calloc(1, sizeof *ls);
  if (!ls)
    return E_OUT_OF_MEMORY;
  int have = 0;
  for (unsigned i = 0; i < n; i++)
    switch (opt[i]) {
    case 3: ls->ilog = val[i]; break;
    case 4: ls->ilog_size = (size_t)(uintptr_t)val[i]; break;
    case 5: ls->elog = val[i]; have |= 1; break;
    case 6: ls->elog_size = (size_t)(uintptr_t)val[i]; have |= 2; break;
    default: break;
    }
  pthread_mutex_lock(&mu);
  st.link_creates++;
  st.live_links++;
  st.link_options = n;
  st.had_error_log = have == 3;
  pthread_mutex_unlock(&mu);
  *out = ls;
  return OK;
}

/* The newest PTX ISA (x10) a driver takes: 11.x takes 7.x, 12.x 8.x. */
static int driver_ptx(void) {
  int major = driver / 1000, minor = driver % 1000 / 10;
  if (major >= 11)
    return (major - 4) * 10 + minor;
  return major == 10 ? 63 + minor : 60 + minor;
}

/* Checks the PTX as ptxas would at the top; 0 or an error with the log. */
static CUresult check_ptx(CUlinkState_st *ls, const char *ptx) {
  unsigned vmaj = 0, vmin = 0, sm = 0;
  const char *v = strstr(ptx, ".version ");
  const char *t = strstr(ptx, ".target sm_");
  if (!v || sscanf(v, ".version %u.%u", &vmaj, &vmin) != 2 || !t ||
      sscanf(t, ".target sm_%u", &sm) != 1 || !strstr(ptx, ".entry ")) {
    log_to(ls->elog, ls->elog_size, "ptxas application ptx input, line 1; "
           "fatal   : Parsing error: no .version, .target or .entry");
    return E_INVALID_PTX;
  }
  if ((int)(vmaj * 10 + vmin) > driver_ptx()) {
    log_to(ls->elog, ls->elog_size, "ptxas application ptx input; fatal   : "
           "Unsupported .version %u.%u; current version is '%d.%d'", vmaj,
           vmin, driver_ptx() / 10, driver_ptx() % 10);
    return E_UNSUPPORTED_PTX_VERSION;
  }
  if ((int)sm > cc[cur->dev]) {
    log_to(ls->elog, ls->elog_size, "ptxas fatal   : SM version specified "
           "by .target (sm_%u) is higher than the device's (sm_%d)", sm,
           cc[cur->dev]);
    return E_INVALID_PTX;
  }
  if (failing("link")) {
    log_to(ls->elog, ls->elog_size, "ptxas error   : mock: Entry function "
           "uses too much shared data (0x10000 bytes, 0xc000 max)");
    return E_INVALID_PTX;
  }
  return OK;
}

CUresult cuLinkAddData_v2(CUlinkState_st *ls, int type, void *data,
                          size_t size, const char *name, unsigned n,
                          int *opt, void **val) {
  (void)name, (void)n, (void)opt, (void)val;
  CUresult r = need_ctx();
  if (r)
    return r;
  if (!ls || type != 1 /* CU_JIT_INPUT_PTX */ || !data || ls->ptx)
    return E_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  st.link_adds++;
  pthread_mutex_unlock(&mu);
  if (!memchr(data, 0, size)) { /* PTX is a C string */
    log_to(ls->elog, ls->elog_size, "ptxas: the PTX is not NUL-terminated "
           "within its %zu bytes", size);
    return E_INVALID_PTX;
  }
  r = check_ptx(ls, data);
  if (!r && !(ls->ptx = strdup(data)))
    r = E_OUT_OF_MEMORY;
  return r;
}

CUresult cuLinkComplete(CUlinkState_st *ls, void **cubin, size_t *size) {
  CUresult r = need_ctx();
  if (r)
    return r;
  if (!ls || !ls->ptx)
    return E_INVALID_VALUE;
  static const char magic[] = "MOCKCUBIN\n";
  size_t n = strlen(magic) + strlen(ls->ptx) + 1;
  free(ls->cubin);
  if (!(ls->cubin = malloc(n)))
    return E_OUT_OF_MEMORY;
  snprintf(ls->cubin, n, "%s%s", magic, ls->ptx);
  ls->cubin_len = n;
  log_to(ls->ilog, ls->ilog_size, "info    : mock: linked %zu bytes of PTX",
         strlen(ls->ptx));
  pthread_mutex_lock(&mu);
  st.link_completes++;
  pthread_mutex_unlock(&mu);
  *cubin = ls->cubin; /* the link state owns it */
  *size = n;
  return OK;
}

CUresult cuLinkDestroy(CUlinkState_st *ls) {
  if (!ls)
    return E_INVALID_HANDLE;
  free(ls->ptx);
  free(ls->cubin);
  free(ls);
  pthread_mutex_lock(&mu);
  st.live_links--;
  pthread_mutex_unlock(&mu);
  return OK;
}

/* ---- modules --------------------------------------------------------- */

/* Bytes of a 64-bit little-endian ELF image of machine EM_CUDA (190), to
 * the end of its section or program header table, whichever is later; 0
 * for anything else. */
static size_t elf_size(const unsigned char *p) {
  if (memcmp(p, "\177ELF", 4) || p[4] != 2 || p[5] != 1)
    return 0;
  uint16_t machine, phentsize, phnum, shentsize, shnum;
  uint64_t phoff, shoff;
  memcpy(&machine, p + 18, 2);
  memcpy(&phoff, p + 32, 8);
  memcpy(&shoff, p + 40, 8);
  memcpy(&phentsize, p + 54, 2);
  memcpy(&phnum, p + 56, 2);
  memcpy(&shentsize, p + 58, 2);
  memcpy(&shnum, p + 60, 2);
  if (machine != 190)
    return 0;
  uint64_t a = shoff + (uint64_t)shentsize * shnum, b = phoff + (uint64_t)phentsize * phnum;
  return (size_t)(a > b ? a : b);
}

CUresult cuModuleLoadData(CUmod_st **m, const void *image) {
  CUresult r = need_ctx();
  if (r)
    return r;
  pthread_mutex_lock(&mu);
  st.module_loads++;
  pthread_mutex_unlock(&mu);
  if (!image)
    return E_INVALID_IMAGE;
  size_t elf_len = elf_size(image);
  int ptx = !elf_len && strncmp(image, "MOCKCUBIN\n", 10) && strstr(image, ".version ");
  if (!elf_len && !ptx && strncmp(image, "MOCKCUBIN\n", 10))
    return E_INVALID_IMAGE;
  if (ptx) { /* the driver JIT-compiles PTX given here */
    CUlinkState_st ls = {0};
    r = check_ptx(&ls, image);
    if (r)
      return r;
  }
  if (failing("load"))
    return E_NO_BINARY_FOR_GPU;
  CUmod_st *mod = calloc(1, sizeof *mod);
  if (mod && elf_len && (mod->elf = malloc(elf_len))) {
    memcpy(mod->elf, image, elf_len);
    mod->elf_len = elf_len;
  } else if (mod && !elf_len) {
    mod->text = strdup(image);
  }
  if (!mod || (!mod->elf && !mod->text)) {
    free(mod);
    return E_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&mu);
  st.live_modules++;
  st.ptx_module_loads += ptx;
  st.elf_module_loads += elf_len > 0;
  pthread_mutex_unlock(&mu);
  *m = mod;
  return OK;
}

/* Bytes of a PTX parameter type (".u8", ".f64", ...). */
static unsigned type_bytes(const char *t) {
  unsigned bits = 0;
  if (sscanf(t, ".%*1[usbf]%u", &bits) != 1)
    return 8;
  return bits / 8 ? bits / 8 : 1;
}

/* The bytes of the static .shared arrays declared in the entry whose
 * parameter list starts at p (".shared .align 16 .b8 local[512];"), laid
 * out as ptxas does: in order, each at its alignment */
static unsigned static_shared_bytes(const char *p) {
  const char *end = strstr(p, ".entry ");
  unsigned total = 0;
  while ((p = strstr(p, "\n\t.shared ")) && (!end || p < end)) {
    p += 9;
    const char *nl = strchr(p, '\n'), *br = strchr(p, '['),
               *type = strstr(p, " .b"); /* the element type, .b8 */
    const char *al = strstr(p, ".align ");
    unsigned count = 0, align = 1;
    if (!al || (nl && al > nl) || sscanf(al, ".align %u", &align) != 1 ||
        align == 0)
      align = 1;
    if (br && type && type < br && (!nl || br < nl) &&
        sscanf(br, "[%u]", &count) == 1) /* in order, each at its .align */
      total = (total + align - 1) / align * align + count * type_bytes(type + 1);
  }
  return total;
}

/* Reads the parameter list of ".entry NAME(" at p into f. */
static void parse_params(const char *p, CUfunc_st *f) {
  const char *end = strchr(p, ')');
  while ((p = strstr(p, ".param ")) && (!end || p < end) &&
         f->nparams < MOCK_CUDA_PARAMS) {
    p += 7;
    unsigned skip;
    while (sscanf(p, ".align %u", &skip) == 1) { /* ".align N .b8 x[16]" */
      p = strchr(p, ' ') + 1;
      p = strchr(p, ' ') + 1;
    }
    unsigned bytes = type_bytes(p), count = 1;
    const char *br = strchr(p, '[');
    const char *nl = strchr(p, '\n');
    if (br && (!nl || br < nl))
      sscanf(br, "[%u]", &count);
    f->size[f->nparams++] = (unsigned char)(bytes * count);
  }
}

CUresult cuModuleGetFunction(CUfunc_st **out, CUmod_st *m, const char *name) {
  if (!m || !name)
    return E_INVALID_HANDLE;
  char pat[300]; /* entry points have up to 255 bytes */
  const char *p = NULL;
  if (m->elf) { /* the name, NUL-terminated, in a string table */
    size_t n = strlen(name) + 1;
    for (size_t i = 1; !p && i + n <= m->elf_len; i++)
      if (!m->elf[i - 1] && !memcmp(m->elf + i, name, n))
        p = (const char *)m->elf + i;
  } else {
    snprintf(pat, sizeof pat, ".entry %s(", name);
    p = strstr(m->text, pat);
  }
  if (!p)
    return E_NOT_FOUND;
  CUfunc_st *f = calloc(1, sizeof *f);
  if (!f)
    return E_OUT_OF_MEMORY;
  snprintf(f->name, sizeof f->name, "%s", name);
  f->dev = cur ? cur->dev : 0;
  f->max_dyn = -1;
  if (!m->elf) {
    parse_params(p + strlen(pat), f);
    f->static_shared = static_shared_bytes(p + strlen(pat));
  }
  f->next = m->funcs;
  m->funcs = f;
  *out = f;
  return OK;
}

CUresult cuModuleUnload(CUmod_st *m) {
  CUresult r = need_ctx();
  if (r)
    return r;
  if (!m)
    return E_INVALID_HANDLE;
  while (m->funcs) {
    CUfunc_st *f = m->funcs;
    m->funcs = f->next;
    free(f);
  }
  free(m->text);
  free(m->elf);
  free(m);
  pthread_mutex_lock(&mu);
  st.module_unloads++;
  st.live_modules--;
  pthread_mutex_unlock(&mu);
  return OK;
}

CUresult cuFuncGetAttribute(int *v, int attr, CUfunc_st *f) {
  if (!f || !v)
    return E_INVALID_HANDLE;
  switch (attr) {
  case 1: *v = (int)f->static_shared; break; /* CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES */
  case 8: *v = f->max_dyn >= 0 ? f->max_dyn : 49152 - (int)f->static_shared; break;
  default: return E_INVALID_VALUE;
  }
  return OK;
}

/* Only CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (8) */
CUresult cuFuncSetAttribute(CUfunc_st *f, int attr, int v) {
  if (!f)
    return E_INVALID_HANDLE;
  if (attr != 8 || v < 0 || failing("optin") || failing("setattr") ||
      (long long)v + f->static_shared > optin_bytes(f->dev))
    return E_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  f->max_dyn = v;
  st.func_set_attributes++;
  st.last_max_dyn = v;
  pthread_mutex_unlock(&mu);
  return OK;
}

/* ---- launches -------------------------------------------------------- */

CUresult cuLaunchKernel(CUfunc_st *f, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream_st *s, void **params,
                        void **extra) {
  CUresult r = need_ctx();
  if (r)
    return r;
  if (!f)
    return E_INVALID_HANDLE;
  if (!gx || !gy || !gz || !bx || !by || !bz || bx > 1024 || by > 1024 ||
      bz > 64 || (unsigned long long)bx * by * bz > 1024 || gy > 65535 ||
      gz > 65535 || gx > 2147483647u || extra ||
      shared > (f->max_dyn >= 0 ? (unsigned)f->max_dyn
                                : 49152 - f->static_shared) ||
      (f->nparams && !params))
    return E_INVALID_VALUE;
  if (failing("launch"))
    return E_LAUNCH_OUT_OF_RESOURCES;
  pthread_mutex_lock(&mu);
  if (st.launches < MOCK_CUDA_LAUNCHES) {
    mock_cuda_launch *l = &st.launch[st.launches];
    snprintf(l->func, sizeof l->func, "%s", f->name);
    unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
    memcpy(l->grid, g, sizeof g);
    memcpy(l->block, b, sizeof b);
    l->shared = shared;
    l->stream = s;
    l->nparams = f->nparams;
    for (unsigned i = 0; i < f->nparams; i++) {
      l->size[i] = f->size[i];
      l->value[i] = 0;
      memcpy(&l->value[i], params[i], f->size[i] < 8 ? f->size[i] : 8);
    }
  }
  st.launches++;
  pthread_mutex_unlock(&mu);
  if (s && failing("sync"))
    s->pending_fail = 1;
  return OK;
}

/* ---- events (bench/gpu) ---------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

CUresult cuEventCreate(CUevent_st **e, unsigned flags) {
  CUresult r = need_ctx();
  if (r)
    return r;
  if (!e || flags > 15)
    return E_INVALID_VALUE;
  if (!(*e = calloc(1, sizeof **e)))
    return E_OUT_OF_MEMORY;
  pthread_mutex_lock(&mu);
  st.live_events++;
  pthread_mutex_unlock(&mu);
  return OK;
}

CUresult cuEventDestroy_v2(CUevent_st *e) {
  if (!e)
    return E_INVALID_HANDLE;
  free(e);
  pthread_mutex_lock(&mu);
  st.live_events--;
  pthread_mutex_unlock(&mu);
  return OK;
}

CUresult cuEventRecord(CUevent_st *e, CUstream_st *s) {
  (void)s;
  CUresult r = need_ctx();
  if (r)
    return r;
  if (!e)
    return E_INVALID_HANDLE;
  e->t = now_s();
  e->recorded = 1;
  pthread_mutex_lock(&mu);
  st.events_recorded++;
  pthread_mutex_unlock(&mu);
  return OK;
}

CUresult cuEventSynchronize(CUevent_st *e) {
  return e ? OK : E_INVALID_HANDLE;
}

CUresult cuEventElapsedTime(float *ms, CUevent_st *a, CUevent_st *b) {
  if (!ms || !a || !b)
    return E_INVALID_HANDLE;
  if (!a->recorded || !b->recorded)
    return E_INVALID_VALUE; /* CUDA_ERROR_INVALID_VALUE, as the driver */
  *ms = (float)((b->t - a->t) * 1e3);
  return OK;
}

CUresult cuEventElapsedTime_v2(float *ms, CUevent_st *a, CUevent_st *b) {
  return cuEventElapsedTime(ms, a, b);
}
