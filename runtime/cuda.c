/* cuda.c - the CUDA backend: NVIDIA GPUs through the CUDA driver API.
 *
 * libcuda is opened at run time (XPJIT_CUDA_LIBRARY, else libcuda.so.1,
 * libcuda.so): xpjit has no build-time CUDA dependency, so the few driver
 * types, constants and entry points used here are declared below with the
 * values of cuda.h. Without libcuda, or without a usable GPU, the backend
 * adds no device and notes why (rt_context_absent).
 *
 * Each device uses its primary context, made current at every entry point
 * (queues call in on their own threads). Queues are non-blocking streams;
 * kernels are PTX linked to a cubin by the driver's JIT (cuLink*), whose
 * copy the native cache can keep (native_get / native_load). See
 * docs/backend-cuda.md. */
#define _GNU_SOURCE
#include "rt.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the driver API subset (values from cuda.h) ---------------------- */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUlinkState_st *CUlinkState;
typedef int CUjit_option;
typedef struct cu_uuid {
  unsigned char bytes[16];
} cu_uuid;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2, /* Y 3, Z 4 */
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,  /* Y 6, Z 7 */
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_JIT_INPUT_PTX = 1,
  CU_MEMHOSTALLOC_PORTABLE = 0x01,
  CU_MEMHOSTALLOC_DEVICEMAP = 0x02,
  CU_MEM_ATTACH_GLOBAL = 0x1,
  CU_STREAM_NON_BLOCKING = 0x1,
};

/* The entry points, by the names libcuda exports (cuda.h maps the plain
 * names of some to _v2 symbols). */
typedef struct cu_api {
  unsigned refs; /* devices using it */
  int driver;    /* cuDriverGetVersion: 13000 for 13.0 */
  CUresult (*Init)(unsigned);
  CUresult (*DriverGetVersion)(int *);
  CUresult (*GetErrorName)(CUresult, const char **);
  CUresult (*GetErrorString)(CUresult, const char **);
  CUresult (*DeviceGetCount)(int *);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DeviceGetName)(char *, int, CUdevice);
  CUresult (*DeviceGetUuid)(cu_uuid *, CUdevice);
  CUresult (*DeviceTotalMem)(size_t *, CUdevice);
  CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*PrimaryCtxRelease)(CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*MemAlloc)(CUdeviceptr *, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemHostAlloc)(void **, size_t, unsigned);
  CUresult (*MemFreeHost)(void *);
  CUresult (*MemAllocManaged)(CUdeviceptr *, size_t, unsigned);
  CUresult (*MemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*MemsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
  CUresult (*MemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
  CUresult (*StreamCreate)(CUstream *, unsigned);
  CUresult (*StreamDestroy)(CUstream);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*CtxSynchronize)(void);
  CUresult (*LinkCreate)(unsigned, CUjit_option *, void **, CUlinkState *);
  CUresult (*LinkAddData)(CUlinkState, int, void *, size_t, const char *,
                          unsigned, CUjit_option *, void **);
  CUresult (*LinkComplete)(CUlinkState, void **, size_t *);
  CUresult (*LinkDestroy)(CUlinkState);
  CUresult (*ModuleLoadData)(CUmodule *, const void *);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*ModuleUnload)(CUmodule);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned,
                           unsigned, unsigned, unsigned, unsigned, CUstream,
                           void **, void **);
  /* optional (NULL where the driver has none): without them a kernel's
   * shared memory stays within the default per-block limit */
  CUresult (*FuncGetAttribute)(int *, int, CUfunction);
  CUresult (*FuncSetAttribute)(CUfunction, int, int);
} cu_api;

static const struct {
  const char *name, *alt; /* alt: an older name of the same function */
  size_t off;
  bool optional;
} cu_syms[] = {
#define SYM(f, n) {n, NULL, offsetof(cu_api, f), false}
    SYM(Init, "cuInit"),
    SYM(DriverGetVersion, "cuDriverGetVersion"),
    SYM(GetErrorName, "cuGetErrorName"),
    SYM(GetErrorString, "cuGetErrorString"),
    SYM(DeviceGetCount, "cuDeviceGetCount"),
    SYM(DeviceGet, "cuDeviceGet"),
    SYM(DeviceGetName, "cuDeviceGetName"),
    {"cuDeviceGetUuid_v2", "cuDeviceGetUuid", offsetof(cu_api, DeviceGetUuid),
     false},
    SYM(DeviceTotalMem, "cuDeviceTotalMem_v2"),
    SYM(DeviceGetAttribute, "cuDeviceGetAttribute"),
    SYM(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    SYM(PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
    SYM(CtxSetCurrent, "cuCtxSetCurrent"),
    SYM(MemAlloc, "cuMemAlloc_v2"),
    SYM(MemFree, "cuMemFree_v2"),
    SYM(MemHostAlloc, "cuMemHostAlloc"),
    SYM(MemFreeHost, "cuMemFreeHost"),
    SYM(MemAllocManaged, "cuMemAllocManaged"),
    SYM(MemcpyAsync, "cuMemcpyAsync"),
    SYM(MemsetD8Async, "cuMemsetD8Async"),
    SYM(MemsetD16Async, "cuMemsetD16Async"),
    SYM(MemsetD32Async, "cuMemsetD32Async"),
    SYM(StreamCreate, "cuStreamCreate"),
    SYM(StreamDestroy, "cuStreamDestroy_v2"),
    SYM(StreamSynchronize, "cuStreamSynchronize"),
    SYM(CtxSynchronize, "cuCtxSynchronize"),
    SYM(LinkCreate, "cuLinkCreate_v2"),
    SYM(LinkAddData, "cuLinkAddData_v2"),
    SYM(LinkComplete, "cuLinkComplete"),
    SYM(LinkDestroy, "cuLinkDestroy"),
    SYM(ModuleLoadData, "cuModuleLoadData"),
    SYM(ModuleGetFunction, "cuModuleGetFunction"),
    SYM(ModuleUnload, "cuModuleUnload"),
    SYM(LaunchKernel, "cuLaunchKernel"),
    {"cuFuncGetAttribute", NULL, offsetof(cu_api, FuncGetAttribute), true},
    {"cuFuncSetAttribute", NULL, offsetof(cu_api, FuncSetAttribute), true},
#undef SYM
};

/* Fills api from lib; false (and why) when a symbol is missing. */
static bool api_load(cu_api *api, void *lib, char *why, size_t n) {
  for (size_t i = 0; i < sizeof cu_syms / sizeof *cu_syms; i++) {
    void *f = dlsym(lib, cu_syms[i].name);
    if (!f && cu_syms[i].alt)
      f = dlsym(lib, cu_syms[i].alt);
    if (!f && cu_syms[i].optional)
      continue;
    if (!f) {
      snprintf(why, n, "the CUDA driver library lacks %s", cu_syms[i].name);
      return false;
    }
    memcpy((char *)api + cu_syms[i].off, &f, sizeof f);
  }
  return true;
}

/* "CUDA_ERROR_X (what the driver says)" for r. */
static void cu_describe(const cu_api *api, CUresult r, char *buf, size_t n) {
  const char *name = NULL, *str = NULL;
  if (api->GetErrorName(r, &name) != CUDA_SUCCESS || !name)
    name = NULL;
  if (api->GetErrorString(r, &str) != CUDA_SUCCESS || !str)
    str = NULL;
  if (name)
    snprintf(buf, n, "%s (%s)", name, str ? str : "no description");
  else
    snprintf(buf, n, "CUDA error %d", r);
}

/* Sets the message "<what>: CUDA_ERROR_X (...)" and returns st (NOMEM for
 * the driver's out-of-memory). */
static xpj_status cu_fail(const cu_api *api, CUresult r, xpj_status st,
                          const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static xpj_status cu_fail(const cu_api *api, CUresult r, xpj_status st,
                          const char *fmt, ...) {
  char what[512], err[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  cu_describe(api, r, err, sizeof err);
  return rt_err(r == CUDA_ERROR_OUT_OF_MEMORY ? XPJ_ERR_NOMEM : st, "%s: %s",
                what, err);
}

/* ---- devices --------------------------------------------------------- */

/* An allocation over-aligned beyond what the driver guarantees: the
 * pointer handed out and the driver's own. */
typedef struct big_alloc {
  void *user, *base;
  struct big_alloc *next;
} big_alloc;

typedef struct cuda_dev {
  cu_api *api;
  CUdevice dev;
  CUcontext ctx; /* the primary context, retained */
  unsigned cc;   /* compute capability, 90 for 9.0 */
  unsigned grid_max[3];
  /* shared memory per block: without (smem) and with (smem_optin) a
   * kernel's opt-in, its own static shared memory included */
  unsigned smem, smem_optin;
  pthread_mutex_t mu; /* big; a kernel's dyn_allowed raised */
  big_alloc *big;
} cuda_dev;

static xpj_status make_current(cuda_dev *cd, const char *what) {
  CUresult r = cd->api->CtxSetCurrent(cd->ctx);
  return r ? cu_fail(cd->api, r, XPJ_ERR_DEVICE, "%s: cuCtxSetCurrent", what)
           : XPJ_OK;
}


/* The oldest driver (cuDriverGetVersion) that takes PTX ISA pv (80 = 8.0):
 * 6.0-6.2 came with CUDA 9.0-9.2, 6.3-6.5 with 10.0-10.2, 7.x with 11.x,
 * 8.x with 12.x, 9.x with 13.x. */
static int ptx_min_driver(unsigned pv) {
  unsigned major = pv / 10, minor = pv % 10;
  if (major == 6)
    return minor < 3 ? 9000 + (int)minor * 10 : 10000 + (int)(minor - 3) * 10;
  return (int)(major + 4) * 1000 + (int)minor * 10;
}

/* The device's target: the newest architecture the compiler knows
 * (xpj_target_parse takes it) at or below the device's (PTX JITs forward),
 * with its derived PTX ISA, and not newer than the driver takes. False
 * with why when there is none. */
static bool pick_target(unsigned cc, int driver, xpj_target *t, char *why,
                        size_t n) {
  if (cc < 70) {
    snprintf(why, n, "compute capability %u.%u is below 7.0, the oldest "
             "xpjit compiles for", cc / 10, cc % 10);
    return false;
  }
  unsigned need = 0, sm = 0;
  for (unsigned arch = cc; arch >= 70; arch--) {
    char s[32], err[256];
    snprintf(s, sizeof s, "ptx:sm_%u", arch);
    if (xpj_target_parse(s, t, err, sizeof err) != XPJ_OK)
      continue;
    if (!sm) {
      sm = t->sm;
      need = t->ptx_version;
    }
    if (ptx_min_driver(t->ptx_version) <= driver)
      return true;
  }
  snprintf(why, n, "CUDA driver %d.%d is too old for PTX %u.%u (sm_%u; "
           "needs driver %d.%d)", driver / 1000, driver % 1000 / 10,
           need / 10, need % 10, sm, ptx_min_driver(need) / 1000,
           ptx_min_driver(need) % 1000 / 10);
  return false;
}

static bool attr(cu_api *api, CUdevice dev, int a, int *v) {
  *v = 0;
  return api->DeviceGetAttribute(v, a, dev) == CUDA_SUCCESS;
}

/* Reads the device's properties into d->info and cd; false with why. */
static bool query(cu_api *api, cuda_dev *cd, xpj_device *d, char *why,
                  size_t n) {
  xpj_device_info *in = &d->info;
  int major, minor, tpb, smem, sms, uva, bdim[3], gdim[3];
  size_t mem = 0;
  cu_uuid u;
  memset(&u, 0, sizeof u);
  CUresult r = api->DeviceGetName(in->name, (int)sizeof in->name, cd->dev);
  if (!r)
    r = api->DeviceTotalMem(&mem, cd->dev);
  if (!r)
    r = api->DeviceGetUuid(&u, cd->dev);
  bool ok = !r && attr(api, cd->dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                       &major) &&
            attr(api, cd->dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                 &minor) &&
            attr(api, cd->dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &tpb) &&
            attr(api, cd->dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
                 &smem) &&
            attr(api, cd->dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &sms) &&
            attr(api, cd->dev, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, &uva);
  for (int i = 0; ok && i < 3; i++)
    ok = attr(api, cd->dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X + i, &bdim[i]) &&
         attr(api, cd->dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X + i, &gdim[i]);
  if (!ok) {
    char e[256] = "an attribute query failed";
    if (r)
      cu_describe(api, r, e, sizeof e);
    snprintf(why, n, "cannot query the device: %.200s", e);
    return false;
  }
  if (!uva) { /* pointers from the driver are used as host-visible addresses */
    snprintf(why, n, "%.100s has no unified addressing", in->name);
    return false;
  }
  cd->cc = (unsigned)(major * 10 + minor);
  snprintf(in->vendor, sizeof in->vendor, "NVIDIA Corporation");
  snprintf(in->driver_version, sizeof in->driver_version, "%d.%d",
           api->driver / 1000, api->driver % 1000 / 10);
  in->backend = XPJ_BACKEND_CUDA;
  in->type = XPJ_DEVICE_GPU;
  in->compute_units = (unsigned)sms;
  in->max_work_group_size = (uint64_t)tpb;
  for (int i = 0; i < 3; i++) {
    cd->grid_max[i] = (unsigned)gdim[i];
    in->max_work_item_sizes[i] = (uint64_t)bdim[i];
    in->max_global_size[i] = (uint64_t)gdim[i] * (uint64_t)bdim[i];
  }
  /* beyond the default limit with the kernel's opt-in (cuda_launch), where
   * the driver has one: up to 227 KiB a block on sm_90 */
  int optin = smem;
  if (api->FuncGetAttribute && api->FuncSetAttribute &&
      (!attr(api, cd->dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
             &optin) ||
       optin < smem))
    optin = smem;
  cd->smem = (unsigned)smem;
  cd->smem_optin = (unsigned)optin;
  in->local_mem_size = (uint64_t)optin;
  in->global_mem_size = mem;
  in->mem_base_align = 256;
  char hex[33];
  for (int i = 0; i < 16; i++)
    snprintf(hex + 2 * i, 3, "%02x", u.bytes[i]);
  snprintf(d->native_id, sizeof d->native_id, "cuda:%.160s:%s:sm_%u:drv%d",
           in->name, hex, cd->cc, api->driver);
  return true;
}

static void dev_free(cuda_dev *cd) {
  pthread_mutex_destroy(&cd->mu);
  free(cd);
}

/* Adds CUDA device i. A device that cannot be used is skipped, with why
 * (prefixed by its index) appended to note; only running out of memory is
 * an error. */
static xpj_status add_device(xpj_context *ctx, cu_api *api, int i,
                             char *note, size_t nsize) {
  char why[256] = "";
  xpj_device *d = calloc(1, sizeof *d);
  cuda_dev *cd = calloc(1, sizeof *cd);
  if (!d || !cd) {
    free(d);
    free(cd);
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  pthread_mutex_init(&cd->mu, NULL);
  cd->api = api;
  CUresult r = api->DeviceGet(&cd->dev, i);
  if (r) {
    char e[256];
    cu_describe(api, r, e, sizeof e);
    snprintf(why, sizeof why, "cuDeviceGet: %.200s", e);
  } else if (query(api, cd, d, why, sizeof why) &&
             pick_target(cd->cc, api->driver, &d->target, why, sizeof why)) {
    r = api->PrimaryCtxRetain(&cd->ctx, cd->dev);
    if (r) {
      char e[256];
      cu_describe(api, r, e, sizeof e);
      snprintf(why, sizeof why, "cuDevicePrimaryCtxRetain: %.200s", e);
    }
  }
  if (why[0]) {
    size_t used = strlen(note);
    int w = snprintf(note + used, nsize - used, "%sdevice %d%s%.60s%s "
                     "skipped: %s", used ? "; " : "", i,
                     d->info.name[0] ? " (" : "", d->info.name,
                     d->info.name[0] ? ")" : "", why);
    if (w >= (int)(nsize - used) && nsize > 4) /* cut: say so */
      memcpy(note + nsize - 4, "...", 4);
    dev_free(cd);
    free(d);
    return XPJ_OK;
  }
  xpj_target_str(&d->target, d->info.target, sizeof d->info.target);
  d->ops = &rt_cuda_backend;
  d->impl = cd;
  xpj_status st = rt_context_add_device(ctx, d);
  if (st != XPJ_OK) {
    api->PrimaryCtxRelease(cd->dev);
    dev_free(cd);
    free(d);
    return st;
  }
  api->refs++;
  return XPJ_OK;
}

/* Opens libcuda and initialises it; NULL with the reason in why. The
 * library stays loaded once cuInit has run (unloading a driver whose
 * threads may be running is not safe). */
static cu_api *api_open(char *why, size_t n) {
  static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
  void *lib = rt_dlopen("XPJIT_CUDA_LIBRARY", names, why, n);
  if (!lib)
    return NULL;
  cu_api *api = calloc(1, sizeof *api);
  if (!api || !api_load(api, lib, why, n)) {
    if (!api)
      snprintf(why, n, "out of memory");
    free(api);
    dlclose(lib);
    return NULL;
  }
  CUresult r = api->Init(0);
  if (!r)
    r = api->DriverGetVersion(&api->driver);
  if (r) {
    char e[256];
    cu_describe(api, r, e, sizeof e);
    snprintf(why, n, "cuInit: %.200s", e);
    free(api);
    return NULL;
  }
  return api;
}

static xpj_status cuda_discover(xpj_context *ctx) {
  char why[256];
  cu_api *api = api_open(why, sizeof why);
  if (!api) {
    rt_context_absent(ctx, XPJ_BACKEND_CUDA, "%s", why);
    return XPJ_OK;
  }
  int count = 0;
  CUresult r = api->DeviceGetCount(&count);
  char note[256] = "";
  if (r) {
    char e[200];
    cu_describe(api, r, e, sizeof e);
    snprintf(note, sizeof note, "cuDeviceGetCount: %s", e);
  } else if (count == 0) {
    snprintf(note, sizeof note, "the CUDA driver reports no devices");
  }
  xpj_status st = XPJ_OK;
  for (int i = 0; i < count && st == XPJ_OK; i++)
    st = add_device(ctx, api, i, note, sizeof note);
  if (api->refs == 0) {
    rt_context_absent(ctx, XPJ_BACKEND_CUDA, "%s", note);
    free(api);
  }
  return st;
}

static void cuda_mem_free(xpj_device *d, xpj_mem_kind kind, void *p);

static xpj_status cuda_native_handle(const xpj_device *d,
                                     xpj_native_kind what, void **out) {
  const cuda_dev *cd = d->impl;
  if (what == XPJ_NATIVE_PLATFORM)
    return rt_err(XPJ_ERR_UNSUPPORTED,
                  "xpj_device_native: CUDA has no platform handle (%s)",
                  d->id);
  *out = what == XPJ_NATIVE_DEVICE ? (void *)(intptr_t)cd->dev
                                   : (void *)cd->ctx;
  return XPJ_OK;
}

static void cuda_device_destroy(xpj_device *d) {
  cuda_dev *cd = d->impl;
  if (!cd)
    return;
  /* memory the application never freed goes now, while the context is
   * alive (the runtime would free it after device_destroy) */
  for (size_t i = 0; i < d->nallocs; i++)
    cuda_mem_free(d, d->allocs[i].kind, (void *)d->allocs[i].base);
  d->nallocs = 0;
  cu_api *api = cd->api;
  api->PrimaryCtxRelease(cd->dev);
  while (cd->big) {
    big_alloc *b = cd->big;
    cd->big = b->next;
    free(b);
  }
  dev_free(cd);
  d->impl = NULL;
  if (--api->refs == 0)
    free(api);
}

/* ---- memory ---------------------------------------------------------- */

/* What the driver guarantees: cuMemHostAlloc gives pages; device and
 * managed memory are aligned to at least 256 bytes. */
static size_t kind_align(xpj_mem_kind kind) {
  return kind == XPJ_MEM_HOST ? 4096 : 256;
}

static CUresult raw_alloc(cuda_dev *cd, xpj_mem_kind kind, size_t bytes,
                          void **out) {
  CUdeviceptr p = 0;
  CUresult r;
  if (kind == XPJ_MEM_HOST)
    return cd->api->MemHostAlloc(
        out, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  if (kind == XPJ_MEM_SHARED)
    r = cd->api->MemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL);
  else
    r = cd->api->MemAlloc(&p, bytes);
  *out = (void *)(uintptr_t)p;
  return r;
}

static void raw_free(cuda_dev *cd, xpj_mem_kind kind, void *p) {
  if (kind == XPJ_MEM_HOST)
    cd->api->MemFreeHost(p);
  else
    cd->api->MemFree((CUdeviceptr)(uintptr_t)p);
}

static xpj_status cuda_mem_alloc(xpj_device *d, xpj_mem_kind kind,
                                 size_t bytes, size_t align, void **out) {
  cuda_dev *cd = d->impl;
  xpj_status st = make_current(cd, "xpj_mem_alloc");
  if (st != XPJ_OK)
    return st;
  size_t extra = align > kind_align(kind) ? align : 0;
  big_alloc *b = extra ? malloc(sizeof *b) : NULL;
  if (bytes + extra < bytes || (extra && !b)) {
    free(b);
    return rt_err(XPJ_ERR_NOMEM, "xpj_mem_alloc: out of memory");
  }
  void *p = NULL;
  CUresult r = raw_alloc(cd, kind, bytes + extra, &p);
  if (r) {
    free(b);
    return cu_fail(cd->api, r, XPJ_ERR_DEVICE,
                   "xpj_mem_alloc: %zu bytes of %s memory on %s", bytes,
                   kind == XPJ_MEM_HOST     ? "host"
                   : kind == XPJ_MEM_SHARED ? "shared"
                                            : "device",
                   d->id);
  }
  if (b) {
    b->base = p;
    b->user = (void *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
    pthread_mutex_lock(&cd->mu);
    b->next = cd->big;
    cd->big = b;
    pthread_mutex_unlock(&cd->mu);
    p = b->user;
  }
  *out = p;
  return XPJ_OK;
}

static void cuda_mem_free(xpj_device *d, xpj_mem_kind kind, void *p) {
  cuda_dev *cd = d->impl;
  if (!cd)
    return;
  pthread_mutex_lock(&cd->mu);
  for (big_alloc **pb = &cd->big; *pb; pb = &(*pb)->next)
    if ((*pb)->user == p) {
      big_alloc *b = *pb;
      *pb = b->next;
      p = b->base;
      free(b);
      break;
    }
  pthread_mutex_unlock(&cd->mu);
  if (make_current(cd, "xpj_mem_free") == XPJ_OK)
    raw_free(cd, kind, p);
}

/* ---- kernels --------------------------------------------------------- */

typedef struct cuda_kernel {
  CUmodule mod;
  CUfunction fn;
  char *entry;
  uint8_t *cubin; /* for native_get */
  size_t len;
  unsigned static_smem;         /* its own .shared bytes (the driver's) */
  _Atomic unsigned dyn_allowed; /* dynamic shared bytes it may launch with */
} cuda_kernel;

static void kernel_free(cuda_kernel *k) {
  free(k->entry);
  free(k->cubin);
  free(k);
}

/* The driver's JIT: PTX to a cubin (malloc'd into *cubin). */
static xpj_status jit_link(xpj_device *d, const uint8_t *ptx, size_t len,
                           const char *entry, uint8_t **cubin,
                           size_t *clen) {
  cuda_dev *cd = d->impl;
  cu_api *api = cd->api;
  char elog[8192] = "", ilog[2048] = "";
  CUjit_option opt[4] = {CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                         CU_JIT_INFO_LOG_BUFFER,
                         CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void *val[4] = {elog, (void *)(uintptr_t)sizeof elog, ilog,
                  (void *)(uintptr_t)sizeof ilog};
  /* the PTX as a NUL-terminated string, as the JIT reads it */
  char *text = malloc(len + 1);
  if (!text)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  memcpy(text, ptx, len);
  text[len] = 0;
  CUlinkState ls = NULL;
  const char *step = "cuLinkCreate";
  CUresult r = api->LinkCreate(4, opt, val, &ls);
  void *out = NULL;
  size_t olen = 0;
  if (!r) {
    step = "cuLinkAddData";
    r = api->LinkAddData(ls, CU_JIT_INPUT_PTX, text, len + 1, entry, 0, NULL,
                         NULL);
  }
  if (!r) {
    step = "cuLinkComplete";
    r = api->LinkComplete(ls, &out, &olen);
  }
  free(text);
  xpj_status st = XPJ_OK;
  if (r) {
    char e[256];
    cu_describe(api, r, e, sizeof e);
    elog[sizeof elog - 1] = 0;
    st = rt_err(r == CUDA_ERROR_OUT_OF_MEMORY ? XPJ_ERR_NOMEM : XPJ_ERR_COMPILE,
                "loading %s on %s: the CUDA JIT rejects the PTX: %s: %s%s%s",
                entry, d->id, step, e, elog[0] ? "\n" : "", elog);
  } else if (!(*cubin = malloc(olen ? olen : 1))) {
    st = rt_err(XPJ_ERR_NOMEM, "out of memory");
  } else {
    memcpy(*cubin, out, olen);
    *clen = olen;
  }
  if (ls)
    api->LinkDestroy(ls); /* owns out */
  return st;
}

/* Loads a cubin (k->cubin) and finds its entry. */
static xpj_status module_load(xpj_device *d, cuda_kernel *k) {
  cuda_dev *cd = d->impl;
  CUresult r = cd->api->ModuleLoadData(&k->mod, k->cubin);
  if (r) {
    k->mod = NULL;
    return cu_fail(cd->api, r, XPJ_ERR_DEVICE,
                   "loading %s on %s: cuModuleLoadData", k->entry, d->id);
  }
  r = cd->api->ModuleGetFunction(&k->fn, k->mod, k->entry);
  if (r) {
    cd->api->ModuleUnload(k->mod);
    k->mod = NULL;
    return cu_fail(cd->api, r, XPJ_ERR_DEVICE,
                   "loading %s on %s: cuModuleGetFunction", k->entry, d->id);
  }
  /* without the opt-in, static and dynamic shared memory share the
   * default limit */
  int own = 0;
  if (cd->smem_optin > cd->smem &&
      (cd->api->FuncGetAttribute(&own, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                                 k->fn) ||
       own < 0))
    own = 0;
  k->static_smem = (unsigned)own;
  k->dyn_allowed = k->static_smem < cd->smem ? cd->smem - k->static_smem : 0;
  return XPJ_OK;
}

/* A kernel from PTX (link) or from a cubin (native). */
static xpj_status load(xpj_device *d, const uint8_t *bin, size_t len,
                       const char *entry, bool native, void **out) {
  xpj_status st = make_current(d->impl, "loading a kernel");
  if (st != XPJ_OK)
    return st;
  cuda_kernel *k = calloc(1, sizeof *k);
  if (!k || !(k->entry = strdup(entry))) {
    free(k);
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  if (native) {
    k->cubin = malloc(len ? len : 1);
    st = k->cubin ? XPJ_OK : rt_err(XPJ_ERR_NOMEM, "out of memory");
    if (k->cubin && len)
      memcpy(k->cubin, bin, len);
    k->len = len;
  } else {
    st = jit_link(d, bin, len, entry, &k->cubin, &k->len);
  }
  if (st == XPJ_OK)
    st = module_load(d, k);
  if (st != XPJ_OK) {
    kernel_free(k);
    return st;
  }
  *out = k;
  return XPJ_OK;
}

static xpj_status cuda_kernel_load(xpj_device *d, const uint8_t *bin,
                                   size_t len, const char *entry,
                                   void **native) {
  return load(d, bin, len, entry, false, native);
}

static xpj_status cuda_native_load(xpj_device *d, const uint8_t *bin,
                                   size_t len, const char *entry,
                                   void **native) {
  return load(d, bin, len, entry, true, native);
}

static xpj_status cuda_native_get(xpj_device *d, void *native, uint8_t **bin,
                                  size_t *len) {
  const cuda_kernel *k = native;
  *bin = malloc(k->len ? k->len : 1);
  if (!*bin)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  memcpy(*bin, k->cubin, k->len);
  *len = k->len;
  return XPJ_OK;
}

static void cuda_kernel_unload(xpj_device *d, void *native) {
  cuda_kernel *k = native;
  if (!k)
    return;
  cuda_dev *cd = d->impl;
  if (make_current(cd, "unloading a kernel") == XPJ_OK)
    cd->api->ModuleUnload(k->mod);
  kernel_free(k);
}

/* ---- queues and commands --------------------------------------------- */

static xpj_status cuda_queue_init(xpj_device *d, void **bq) {
  cuda_dev *cd = d->impl;
  xpj_status st = make_current(cd, "xpj_queue_create");
  if (st != XPJ_OK)
    return st;
  CUstream s = NULL;
  CUresult r = cd->api->StreamCreate(&s, CU_STREAM_NON_BLOCKING);
  if (r)
    return cu_fail(cd->api, r, XPJ_ERR_DEVICE,
                   "xpj_queue_create on %s: cuStreamCreate", d->id);
  *bq = s;
  return XPJ_OK;
}

static void cuda_queue_fini(xpj_device *d, void *bq) {
  cuda_dev *cd = d->impl;
  if (make_current(cd, "xpj_queue_destroy") == XPJ_OK)
    cd->api->StreamDestroy(bq);
}

static xpj_status cuda_copy(xpj_device *d, void *bq, void *dst,
                            const void *src, size_t bytes) {
  cuda_dev *cd = d->impl;
  xpj_status st = make_current(cd, "copy");
  if (st != XPJ_OK || bytes == 0)
    return st;
  CUresult r = cd->api->MemcpyAsync((CUdeviceptr)(uintptr_t)dst,
                                    (CUdeviceptr)(uintptr_t)src, bytes, bq);
  return r ? cu_fail(cd->api, r, XPJ_ERR_DEVICE,
                     "copy of %zu bytes on %s: cuMemcpyAsync", bytes, d->id)
           : XPJ_OK;
}

/* The shortest period (1, 2 or 4 bytes) the pattern repeats with; 0 when
 * none of them. */
static size_t pattern_period(const uint8_t *p, size_t psize) {
  for (size_t per = 1; per <= 4 && per <= psize; per *= 2) {
    size_t i = per;
    while (i < psize && p[i] == p[i - per])
      i++;
    if (i == psize)
      return per;
  }
  return 0;
}

/* Patterns wider than 4 bytes: copies from a host buffer holding the
 * pattern repeated, then waits for them (the buffer goes afterwards). */
static xpj_status fill_staged(xpj_device *d, CUstream s, uint8_t *dst,
                              const uint8_t *pat, size_t psize,
                              size_t bytes) {
  cuda_dev *cd = d->impl;
  size_t chunk = bytes < ((size_t)1 << 20) ? bytes : ((size_t)1 << 20);
  chunk -= chunk % psize;
  uint8_t *buf = malloc(chunk);
  if (!buf)
    return rt_err(XPJ_ERR_NOMEM, "fill: out of memory");
  for (size_t i = 0; i < chunk; i += psize)
    memcpy(buf + i, pat, psize);
  CUresult r = CUDA_SUCCESS;
  for (size_t off = 0; off < bytes && !r; off += chunk) {
    size_t n = bytes - off < chunk ? bytes - off : chunk;
    r = cd->api->MemcpyAsync((CUdeviceptr)(uintptr_t)(dst + off),
                             (CUdeviceptr)(uintptr_t)buf, n, s);
  }
  CUresult w = cd->api->StreamSynchronize(s);
  free(buf);
  if (r || w)
    return cu_fail(cd->api, r ? r : w, XPJ_ERR_DEVICE,
                   "fill of %zu bytes on %s: %s", bytes, d->id,
                   r ? "cuMemcpyAsync" : "cuStreamSynchronize");
  return XPJ_OK;
}

static xpj_status cuda_fill(xpj_device *d, void *bq, void *dst,
                            const void *pattern, size_t psize,
                            size_t bytes) {
  cuda_dev *cd = d->impl;
  xpj_status st = make_current(cd, "fill");
  if (st != XPJ_OK || bytes == 0)
    return st;
  const uint8_t *p = pattern;
  CUdeviceptr dp = (CUdeviceptr)(uintptr_t)dst;
  CUresult r;
  const char *fn;
  /* the queue checked that dst is aligned to psize, and bytes a multiple */
  switch (pattern_period(p, psize)) {
  case 1:
    fn = "cuMemsetD8Async";
    r = cd->api->MemsetD8Async(dp, p[0], bytes, bq);
    break;
  case 2: {
    uint16_t v;
    memcpy(&v, p, 2);
    fn = "cuMemsetD16Async";
    r = cd->api->MemsetD16Async(dp, v, bytes / 2, bq);
    break;
  }
  case 4: {
    uint32_t v;
    memcpy(&v, p, 4);
    fn = "cuMemsetD32Async";
    r = cd->api->MemsetD32Async(dp, v, bytes / 4, bq);
    break;
  }
  default:
    return fill_staged(d, bq, dst, p, psize, bytes);
  }
  return r ? cu_fail(cd->api, r, XPJ_ERR_DEVICE, "fill of %zu bytes on %s: %s",
                     bytes, d->id, fn)
           : XPJ_OK;
}

/* Range kernels have no work-groups: without a hint (a local size of 1)
 * the grid uses blocks of up to 256 threads, spread over the dimensions
 * in order. */
static void range_block(const xpj_device *d, const rt_launch *l,
                        unsigned block[3]) {
  uint64_t budget = d->info.max_work_group_size < 256
                        ? d->info.max_work_group_size
                        : 256;
  for (unsigned i = 0; i < 3; i++) {
    uint64_t b = 1;
    while (i < l->ndim && b * 2 <= budget && b < (uint64_t)l->global[i] &&
           b * 2 <= d->info.max_work_item_sizes[i])
      b *= 2;
    block[i] = (unsigned)b;
    budget /= b;
  }
}

static xpj_status launch_shape(const xpj_device *d, const rt_launch *l,
                               unsigned grid[3], unsigned block[3]) {
  const cuda_dev *cd = d->impl;
  for (int i = 0; i < 3; i++)
    block[i] = (unsigned)l->local[i];
  if (l->kind == XPJ_FUNC_RANGE && block[0] * block[1] * block[2] == 1)
    range_block(d, l, block);
  for (int i = 0; i < 3; i++) {
    int64_t g = l->kind == XPJ_FUNC_RANGE
                    ? (l->global[i] + block[i] - 1) / block[i]
                    : l->groups[i];
    if (g > (int64_t)cd->grid_max[i])
      return rt_err(XPJ_ERR_INVALID,
                    "launch on %s: %lld work-groups in grid dimension %c is more "
                    "than the device's %u (use a larger local size)",
                    d->id, (long long)g, "xyz"[i], cd->grid_max[i]);
    grid[i] = (unsigned)g;
  }
  return XPJ_OK;
}

/* A launch with more dynamic shared memory (local array parameters) than
 * the default per-block limit leaves beside the kernel's static shared
 * memory: the kernel's opt-in (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_
 * BYTES), up to the device's opt-in limit. Raised, never lowered, under
 * the device's lock, so that a launch of the same kernel on another queue
 * keeps what it was allowed. */
static xpj_status allow_dyn_shared(xpj_device *d, cuda_kernel *k,
                                   uint64_t dyn) {
  cuda_dev *cd = d->impl;
  if (dyn + k->static_smem > cd->smem_optin)
    return rt_err(XPJ_ERR_INVALID,
                  "launch of %s on %s: %llu bytes of local array parameters "
                  "beside the kernel's own %u bytes of shared memory are more "
                  "than the device's %u per work-group",
                  k->entry, d->id, (unsigned long long)dyn, k->static_smem,
                  cd->smem_optin);
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&cd->mu);
  if (dyn > k->dyn_allowed) {
    r = cd->api->FuncSetAttribute(k->fn,
                                  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                  (int)dyn);
    if (r == CUDA_SUCCESS)
      k->dyn_allowed = (unsigned)dyn;
  }
  pthread_mutex_unlock(&cd->mu);
  return r ? cu_fail(cd->api, r, XPJ_ERR_DEVICE,
                     "launch of %s on %s with %llu bytes of dynamic shared "
                     "memory: cuFuncSetAttribute",
                     k->entry, d->id, (unsigned long long)dyn)
           : XPJ_OK;
}

static xpj_status cuda_launch(xpj_device *d, void *bq, const rt_launch *l) {
  cuda_dev *cd = d->impl;
  cuda_kernel *k = l->native;
  unsigned grid[3], block[3];
  xpj_status st = make_current(cd, "launch");
  if (st == XPJ_OK)
    st = launch_shape(d, l, grid, block);
  if (st == XPJ_OK && l->dyn_local_bytes > k->dyn_allowed)
    st = allow_dyn_shared(d, k, l->dyn_local_bytes);
  if (st != XPJ_OK)
    return st;
  /* the kernel's local arrays are static .shared in the PTX; its local
   * array parameters are the dynamic shared memory */
  CUresult r = cd->api->LaunchKernel(k->fn, grid[0], grid[1], grid[2],
                                     block[0], block[1], block[2],
                                     (unsigned)l->dyn_local_bytes, bq,
                                     l->args, NULL);
  return r ? cu_fail(cd->api, r, XPJ_ERR_DEVICE,
                     "launch of %s on %s (grid %ux%ux%u, block %ux%ux%u): "
                     "cuLaunchKernel",
                     k->entry, d->id, grid[0], grid[1], grid[2], block[0],
                     block[1], block[2])
           : XPJ_OK;
}

/* Errors of work already running (a kernel's illegal address) surface
 * here. */
static xpj_status cuda_sync(xpj_device *d, void *bq) {
  cuda_dev *cd = d->impl;
  xpj_status st = make_current(cd, "sync");
  if (st != XPJ_OK)
    return st;
  CUresult r = cd->api->StreamSynchronize(bq);
  return r ? cu_fail(cd->api, r, XPJ_ERR_DEVICE,
                     "a command on %s failed: cuStreamSynchronize", d->id)
           : XPJ_OK;
}

/* Another library's work on the device (xpj_device_wait_native): one of
 * its streams, or with 0 all of the primary context's. */
static xpj_status cuda_wait_native(xpj_device *d, uintptr_t queue) {
  cuda_dev *cd = d->impl;
  xpj_status st = make_current(cd, "xpj_device_wait_native");
  if (st != XPJ_OK)
    return st;
  CUresult r = queue ? cd->api->StreamSynchronize((CUstream)queue)
                     : cd->api->CtxSynchronize();
  return r ? cu_fail(cd->api, r, XPJ_ERR_DEVICE,
                     "xpj_device_wait_native on %s: %s", d->id,
                     queue ? "cuStreamSynchronize" : "cuCtxSynchronize")
           : XPJ_OK;
}

const rt_backend_ops rt_cuda_backend = {
    .id = XPJ_BACKEND_CUDA,
    .discover = cuda_discover,
    .device_destroy = cuda_device_destroy,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .kernel_load = cuda_kernel_load,
    .kernel_unload = cuda_kernel_unload,
    .queue_init = cuda_queue_init,
    .queue_fini = cuda_queue_fini,
    .copy = cuda_copy,
    .fill = cuda_fill,
    .launch = cuda_launch,
    .sync = cuda_sync,
    .native_get = cuda_native_get,
    .native_load = cuda_native_load,
    .wait_native = cuda_wait_native,
    .native_handle = cuda_native_handle,
};
