/* ze.c - the Level Zero backend: Intel GPUs (and any other Level Zero
 * device) running the compiler's SPIR-V. The loader is opened with dlopen
 * (XPJIT_ZE_LIBRARY, else libze_loader.so.1) and every entry point is
 * looked up once per library into a table; ze_api.h is used for its types
 * only, so libxpjit has no link-time dependency on Level Zero and a
 * machine without a driver simply has no level_zero devices.
 *
 * One ze context per driver, shared by its devices (reference counted by
 * the devices). One immediate command list per xpj queue; the queue thread
 * appends a command and then calls sync, which waits for it (an event the
 * command signals, or zeCommandListHostSynchronize where the loader has
 * it). Kernels are a module and a kernel object; a kernel's arguments are
 * state of the kernel object, so setting them and appending the launch
 * happen under the kernel's mutex. See docs/backend-level-zero.md. */
#define _GNU_SOURCE
#include "rt.h"

#include <level_zero/ze_api.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Headers from API 1.7 on have in-order command lists (and say their
 * version in a macro); older ones (Debian's 1.8.12 loader is API 1.4) get
 * barriers between commands. */
#if defined(ZE_API_VERSION_CURRENT_M) &&                                       \
    ZE_API_VERSION_CURRENT_M >= ZE_MAKE_VERSION(1, 7)
#define ZE_HAVE_IN_ORDER 1
#else
#define ZE_HAVE_IN_ORDER 0
#endif

#define ZE_MAX_BUILD_LOG 6000   /* bytes of a build log kept in a message */
#define ZE_STAGING (64u << 10)  /* host staging of a fill's fallback */

/* ---- the loader's entry points --------------------------------------- */

#define ZE_FUNCS(X)                                                            \
  X(zeInit)                                                                    \
  X(zeDriverGet)                                                               \
  X(zeDriverGetProperties)                                                     \
  X(zeDeviceGet)                                                               \
  X(zeDeviceGetProperties)                                                     \
  X(zeDeviceGetComputeProperties)                                              \
  X(zeDeviceGetMemoryProperties)                                               \
  X(zeDeviceGetModuleProperties)                                               \
  X(zeDeviceGetCommandQueueGroupProperties)                                    \
  X(zeContextCreate)                                                           \
  X(zeContextDestroy)                                                          \
  X(zeCommandListCreateImmediate)                                              \
  X(zeCommandListDestroy)                                                      \
  X(zeCommandListAppendBarrier)                                                \
  X(zeCommandListAppendMemoryCopy)                                             \
  X(zeCommandListAppendMemoryFill)                                             \
  X(zeCommandListAppendLaunchKernel)                                           \
  X(zeEventPoolCreate)                                                         \
  X(zeEventPoolDestroy)                                                        \
  X(zeEventCreate)                                                             \
  X(zeEventDestroy)                                                            \
  X(zeEventHostSynchronize)                                                    \
  X(zeEventHostReset)                                                          \
  X(zeMemAllocDevice)                                                          \
  X(zeMemAllocHost)                                                            \
  X(zeMemAllocShared)                                                          \
  X(zeMemFree)                                                                 \
  X(zeModuleCreate)                                                            \
  X(zeModuleDestroy)                                                           \
  X(zeModuleBuildLogGetString)                                                 \
  X(zeModuleBuildLogDestroy)                                                   \
  X(zeModuleGetNativeBinary)                                                   \
  X(zeKernelCreate)                                                            \
  X(zeKernelDestroy)                                                           \
  X(zeKernelSuggestGroupSize)                                                  \
  X(zeKernelSetGroupSize)                                                      \
  X(zeKernelSetArgumentValue)

/* API 1.6; not declared by older headers, not exported by older loaders */
typedef ze_result_t (*ze_list_host_sync_fn)(ze_command_list_handle_t list,
                                            uint64_t timeout);

typedef struct ze_lib {
  void *handle;
#define ZE_MEMBER(f) __typeof__(f) *f;
  ZE_FUNCS(ZE_MEMBER)
#undef ZE_MEMBER
  ze_list_host_sync_fn list_host_sync; /* NULL: sync through an event */
  struct ze_lib *next;
} ze_lib;

/* Tables of the libraries loaded so far (normally one; tests load a mock
 * as well). Kept for the life of the process: a loader is never closed. */
static pthread_mutex_t libs_mu = PTHREAD_MUTEX_INITIALIZER;
static ze_lib *libs;

static bool lib_resolve(ze_lib *L, char *why, size_t why_size) {
  void *p;
#define ZE_RESOLVE(f)                                                          \
  if (!(p = dlsym(L->handle, #f))) {                                           \
    snprintf(why, why_size, "the Level Zero loader lacks %s", #f);             \
    return false;                                                              \
  }                                                                            \
  memcpy(&L->f, &p, sizeof p);
  ZE_FUNCS(ZE_RESOLVE)
#undef ZE_RESOLVE
  if ((p = dlsym(L->handle, "zeCommandListHostSynchronize")))
    memcpy(&L->list_host_sync, &p, sizeof p);
  return true;
}

/* The table of the loader XPJIT_ZE_LIBRARY or the default names select;
 * NULL (why set) when none loads or one lacks an entry point. */
static const ze_lib *lib_get(char *why, size_t why_size) {
  static const char *const names[] = {"libze_loader.so.1", "libze_loader.so",
                                      NULL};
  void *h = rt_dlopen("XPJIT_ZE_LIBRARY", names, why, why_size);
  if (!h)
    return NULL;
  pthread_mutex_lock(&libs_mu);
  ze_lib *L = libs;
  while (L && L->handle != h)
    L = L->next;
  if (L) { /* the table keeps its own reference */
    pthread_mutex_unlock(&libs_mu);
    dlclose(h);
    return L;
  }
  L = calloc(1, sizeof *L);
  if (!L) {
    pthread_mutex_unlock(&libs_mu);
    dlclose(h);
    snprintf(why, why_size, "out of memory");
    return NULL;
  }
  L->handle = h;
  if (!lib_resolve(L, why, why_size)) {
    pthread_mutex_unlock(&libs_mu);
    dlclose(h);
    free(L);
    return NULL;
  }
  L->next = libs;
  libs = L;
  pthread_mutex_unlock(&libs_mu);
  return L;
}

/* ---- results ---------------------------------------------------------- */

static const char *ze_result_name(ze_result_t r) {
  switch (r) {
#define N(x) case x: return #x;
    N(ZE_RESULT_SUCCESS)
    N(ZE_RESULT_NOT_READY)
    N(ZE_RESULT_ERROR_DEVICE_LOST)
    N(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)
    N(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)
    N(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE)
    N(ZE_RESULT_ERROR_MODULE_LINK_FAILURE)
    N(ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET)
    N(ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE)
    N(ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS)
    N(ZE_RESULT_ERROR_NOT_AVAILABLE)
    N(ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE)
    N(ZE_RESULT_WARNING_DROPPED_DATA)
    N(ZE_RESULT_ERROR_UNINITIALIZED)
    N(ZE_RESULT_ERROR_UNSUPPORTED_VERSION)
    N(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE)
    N(ZE_RESULT_ERROR_INVALID_ARGUMENT)
    N(ZE_RESULT_ERROR_INVALID_NULL_HANDLE)
    N(ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE)
    N(ZE_RESULT_ERROR_INVALID_NULL_POINTER)
    N(ZE_RESULT_ERROR_INVALID_SIZE)
    N(ZE_RESULT_ERROR_UNSUPPORTED_SIZE)
    N(ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT)
    N(ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT)
    N(ZE_RESULT_ERROR_INVALID_ENUMERATION)
    N(ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION)
    N(ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT)
    N(ZE_RESULT_ERROR_INVALID_NATIVE_BINARY)
    N(ZE_RESULT_ERROR_INVALID_GLOBAL_NAME)
    N(ZE_RESULT_ERROR_INVALID_KERNEL_NAME)
    N(ZE_RESULT_ERROR_INVALID_FUNCTION_NAME)
    N(ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION)
    N(ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION)
    N(ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX)
    N(ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE)
    N(ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE)
    N(ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED)
    N(ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE)
    N(ZE_RESULT_ERROR_OVERLAPPING_REGIONS)
    N(ZE_RESULT_WARNING_ACTION_REQUIRED)
    N(ZE_RESULT_ERROR_UNKNOWN)
#undef N
  default: return "ZE_RESULT_(unknown)";
  }
}

/* The xpjit status for a failed ze call. */
static xpj_status ze_status(ze_result_t r) {
  switch (r) {
  case ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY:
  case ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY:
    return XPJ_ERR_NOMEM;
  case ZE_RESULT_ERROR_MODULE_BUILD_FAILURE:
  case ZE_RESULT_ERROR_MODULE_LINK_FAILURE:
    return XPJ_ERR_COMPILE;
  default:
    return XPJ_ERR_DEVICE;
  }
}

/* "what: zeFunction: ZE_RESULT_..." */
static xpj_status ze_fail(ze_result_t r, const char *what, const char *fn) {
  return rt_err(ze_status(r), "%s: %s: %s", what, fn, ze_result_name(r));
}

/* ---- drivers and devices --------------------------------------------- */

typedef struct ze_drv { /* one per driver, shared by its devices */
  const ze_lib *L;
  ze_driver_handle_t h;
  ze_context_handle_t zctx;
  uint32_t version;
  atomic_uint refs; /* devices that use it */
} ze_drv;

typedef struct ze_dev {
  ze_drv *drv;
  ze_device_handle_t h;
  uint32_t ordinal;     /* the compute command queue group */
  size_t max_fill;      /* its largest fill pattern */
  uint32_t max_count[3]; /* groups per dimension */
} ze_dev;

static void drv_release(ze_drv *drv) {
  if (atomic_fetch_sub(&drv->refs, 1) != 1)
    return;
  drv->L->zeContextDestroy(drv->zctx);
  free(drv);
}

static void uuid_hex(const uint8_t *u, size_t n, char *out) {
  for (size_t i = 0; i < n; i++)
    sprintf(out + 2 * i, "%02x", u[i]);
}

/* The compute queue group's ordinal and fill limit. */
static ze_result_t compute_group(const ze_lib *L, ze_device_handle_t h,
                                 uint32_t *ordinal, size_t *max_fill) {
  uint32_t n = 0;
  ze_result_t r = L->zeDeviceGetCommandQueueGroupProperties(h, &n, NULL);
  if (r != ZE_RESULT_SUCCESS)
    return r;
  ze_command_queue_group_properties_t *g = calloc(n ? n : 1, sizeof *g);
  if (!g)
    return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  for (uint32_t i = 0; i < n; i++)
    g[i].stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES;
  r = L->zeDeviceGetCommandQueueGroupProperties(h, &n, g);
  uint32_t i = 0;
  while (r == ZE_RESULT_SUCCESS && i < n &&
         !(g[i].flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE))
    i++;
  if (r == ZE_RESULT_SUCCESS && i == n)
    r = ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
  if (r == ZE_RESULT_SUCCESS) {
    *ordinal = i;
    *max_fill = g[i].maxMemoryFillPatternSize;
  }
  free(g);
  return r;
}

static uint64_t global_mem(const ze_lib *L, ze_device_handle_t h) {
  uint32_t n = 0;
  if (L->zeDeviceGetMemoryProperties(h, &n, NULL) != ZE_RESULT_SUCCESS || !n)
    return 0;
  ze_device_memory_properties_t *m = calloc(n, sizeof *m);
  if (!m)
    return 0;
  for (uint32_t i = 0; i < n; i++)
    m[i].stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES;
  uint64_t total = 0;
  if (L->zeDeviceGetMemoryProperties(h, &n, m) == ZE_RESULT_SUCCESS)
    for (uint32_t i = 0; i < n; i++)
      total += m[i].totalSize;
  free(m);
  return total;
}

/* The SPIR-V 1.x minor version to compile for: 2 where the device takes
 * 1.2 or newer, else the newest it takes (0, 1); -1 when it takes no 1.x. */
static int spirv_minor(uint32_t supported) {
  uint32_t major = ZE_MAJOR_VERSION(supported);
  uint32_t minor = ZE_MINOR_VERSION(supported);
  if (major < 1)
    return -1;
  return major > 1 || minor >= 2 ? 2 : (int)minor;
}

typedef struct dev_props {
  ze_device_properties_t dp;
  ze_device_compute_properties_t cp;
  ze_device_module_properties_t mp;
} dev_props;

static ze_result_t query(const ze_lib *L, ze_device_handle_t h,
                         dev_props *p, const char **fn) {
  memset(p, 0, sizeof *p);
  p->dp.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
  p->cp.stype = ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES;
  p->mp.stype = ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES;
  ze_result_t r;
  if ((r = L->zeDeviceGetProperties(h, &p->dp)) != ZE_RESULT_SUCCESS)
    *fn = "zeDeviceGetProperties";
  else if ((r = L->zeDeviceGetComputeProperties(h, &p->cp)) !=
           ZE_RESULT_SUCCESS)
    *fn = "zeDeviceGetComputeProperties";
  else if ((r = L->zeDeviceGetModuleProperties(h, &p->mp)) !=
           ZE_RESULT_SUCCESS)
    *fn = "zeDeviceGetModuleProperties";
  return r;
}

static void fill_info(xpj_device *d, const dev_props *p, const ze_drv *drv,
                      uint64_t mem) {
  xpj_device_info *in = &d->info;
  const ze_device_properties_t *dp = &p->dp;
  const ze_device_compute_properties_t *cp = &p->cp;
  snprintf(in->name, sizeof in->name, "%.*s", (int)sizeof dp->name,
           dp->name);
  if (dp->vendorId == 0x8086)
    snprintf(in->vendor, sizeof in->vendor, "Intel");
  else
    snprintf(in->vendor, sizeof in->vendor, "vendor 0x%04x", dp->vendorId);
  snprintf(in->driver_version, sizeof in->driver_version, "%u.%u.%u",
           drv->version >> 24, (drv->version >> 16) & 0xff,
           drv->version & 0xffff);
  in->backend = XPJ_BACKEND_LEVEL_ZERO;
  in->type = dp->type == ZE_DEVICE_TYPE_GPU   ? XPJ_DEVICE_GPU
             : dp->type == ZE_DEVICE_TYPE_CPU ? XPJ_DEVICE_CPU
                                              : XPJ_DEVICE_ACCELERATOR;
  unsigned cu = dp->numSlices * dp->numSubslicesPerSlice *
                dp->numEUsPerSubslice;
  in->compute_units = cu ? cu : 1;
  in->max_work_group_size = cp->maxTotalGroupSize;
  const uint32_t size[3] = {cp->maxGroupSizeX, cp->maxGroupSizeY,
                            cp->maxGroupSizeZ};
  const uint32_t count[3] = {cp->maxGroupCountX, cp->maxGroupCountY,
                             cp->maxGroupCountZ};
  for (int i = 0; i < 3; i++) {
    in->max_work_item_sizes[i] = size[i];
    in->max_global_size[i] = (uint64_t)count[i] * size[i];
  }
  in->local_mem_size = cp->maxSharedLocalMemory;
  in->global_mem_size = mem;
  in->mem_base_align = 64;
  char uuid[2 * ZE_MAX_DEVICE_UUID_SIZE + 1];
  uuid_hex(dp->uuid.id, ZE_MAX_DEVICE_UUID_SIZE, uuid);
  snprintf(d->native_id, sizeof d->native_id, "level_zero:%.160s:%s:drv%u",
           in->name, uuid, drv->version);
}

/* Adds device h of drv. A device the driver will not describe is skipped
 * with a note; only running out of memory is an error. */
static xpj_status device_add(xpj_context *ctx, ze_drv *drv,
                             ze_device_handle_t h, char *note,
                             size_t note_size) {
  const ze_lib *L = drv->L;
  dev_props p;
  const char *fn = "zeDeviceGetCommandQueueGroupProperties";
  uint32_t ordinal = 0;
  size_t max_fill = 0;
  ze_result_t r = query(L, h, &p, &fn);
  if (r == ZE_RESULT_SUCCESS)
    r = compute_group(L, h, &ordinal, &max_fill);
  if (r != ZE_RESULT_SUCCESS) {
    snprintf(note, note_size, "a device was skipped (%s: %s)", fn,
             ze_result_name(r));
    return XPJ_OK;
  }
  int minor = spirv_minor(p.mp.spirvVersionSupported);
  char tstr[16], err[200];
  xpj_target t;
  snprintf(tstr, sizeof tstr, "spirv:1.%d", minor);
  if (minor < 0 || xpj_target_parse(tstr, &t, err, sizeof err) != XPJ_OK) {
    snprintf(note, note_size, "%.*s was skipped: it takes no SPIR-V 1.x (0x%x)",
             (int)strnlen(p.dp.name, 128), p.dp.name,
             p.mp.spirvVersionSupported);
    return XPJ_OK;
  }
  xpj_device *d = calloc(1, sizeof *d);
  ze_dev *zd = calloc(1, sizeof *zd);
  if (!d || !zd) {
    free(d);
    free(zd);
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  d->target = t;
  zd->drv = drv;
  zd->h = h;
  zd->ordinal = ordinal;
  zd->max_fill = max_fill;
  zd->max_count[0] = p.cp.maxGroupCountX;
  zd->max_count[1] = p.cp.maxGroupCountY;
  zd->max_count[2] = p.cp.maxGroupCountZ;
  fill_info(d, &p, drv, global_mem(L, h));
  xpj_target_str(&d->target, d->info.target, sizeof d->info.target);
  d->ops = &rt_ze_backend;
  d->impl = zd;
  atomic_fetch_add(&drv->refs, 1);
  xpj_status st = rt_context_add_device(ctx, d);
  if (st != XPJ_OK) {
    atomic_fetch_sub(&drv->refs, 1);
    free(zd);
    free(d);
  }
  return st;
}

/* The devices of driver h, sharing one new ze context. */
static xpj_status driver_add(xpj_context *ctx, const ze_lib *L,
                             ze_driver_handle_t h, char *note,
                             size_t note_size) {
  ze_driver_properties_t dp = {.stype = ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES};
  ze_result_t r = L->zeDriverGetProperties(h, &dp);
  const char *fn = "zeDriverGetProperties";
  uint32_t n = 0;
  if (r == ZE_RESULT_SUCCESS) {
    fn = "zeDeviceGet";
    r = L->zeDeviceGet(h, &n, NULL);
  }
  if (r != ZE_RESULT_SUCCESS) {
    snprintf(note, note_size, "a driver was skipped (%s: %s)", fn,
             ze_result_name(r));
    return XPJ_OK;
  }
  if (n == 0) {
    snprintf(note, note_size, "the Level Zero driver has no devices");
    return XPJ_OK;
  }
  ze_drv *drv = calloc(1, sizeof *drv);
  ze_device_handle_t *devs = calloc(n, sizeof *devs);
  if (!drv || !devs) {
    free(drv);
    free(devs);
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  drv->L = L;
  drv->h = h;
  drv->version = dp.driverVersion;
  atomic_init(&drv->refs, 1); /* ours, until the devices are added */
  ze_context_desc_t cd = {.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC};
  if ((r = L->zeContextCreate(h, &cd, &drv->zctx)) != ZE_RESULT_SUCCESS) {
    snprintf(note, note_size, "a driver was skipped (zeContextCreate: %s)",
             ze_result_name(r));
    free(drv);
    free(devs);
    return XPJ_OK;
  }
  xpj_status st = XPJ_OK;
  if ((r = L->zeDeviceGet(h, &n, devs)) != ZE_RESULT_SUCCESS)
    snprintf(note, note_size, "a driver was skipped (zeDeviceGet: %s)",
             ze_result_name(r));
  for (uint32_t i = 0; r == ZE_RESULT_SUCCESS && st == XPJ_OK && i < n; i++)
    st = device_add(ctx, drv, devs[i], note, note_size);
  free(devs);
  drv_release(drv);
  return st;
}

static unsigned count_devices(const xpj_context *ctx) {
  unsigned n = 0;
  for (unsigned i = 0; i < ctx->nall; i++)
    n += ctx->all[i]->info.backend == XPJ_BACKEND_LEVEL_ZERO;
  return n;
}

static xpj_status ze_discover(xpj_context *ctx) {
  char why[200];
  const ze_lib *L = lib_get(why, sizeof why);
  if (!L) {
    rt_context_absent(ctx, XPJ_BACKEND_LEVEL_ZERO, "%s", why);
    return XPJ_OK;
  }
  ze_result_t r = L->zeInit(0);
  uint32_t n = 0;
  const char *fn = "zeInit";
  if (r == ZE_RESULT_SUCCESS) {
    fn = "zeDriverGet";
    r = L->zeDriverGet(&n, NULL);
  }
  if (r != ZE_RESULT_SUCCESS || n == 0) {
    rt_context_absent(ctx, XPJ_BACKEND_LEVEL_ZERO,
                      "no Level Zero driver (%s: %s)", fn,
                      r != ZE_RESULT_SUCCESS ? ze_result_name(r)
                                             : "no drivers");
    return XPJ_OK;
  }
  ze_driver_handle_t *drivers = calloc(n, sizeof *drivers);
  if (!drivers)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  char note[256] = "";
  xpj_status st = XPJ_OK;
  if ((r = L->zeDriverGet(&n, drivers)) != ZE_RESULT_SUCCESS)
    snprintf(note, sizeof note, "no Level Zero driver (zeDriverGet: %s)",
             ze_result_name(r));
  unsigned before = count_devices(ctx);
  for (uint32_t i = 0; r == ZE_RESULT_SUCCESS && st == XPJ_OK && i < n; i++)
    st = driver_add(ctx, L, drivers[i], note, sizeof note);
  free(drivers);
  if (st == XPJ_OK && count_devices(ctx) == before)
    rt_context_absent(ctx, XPJ_BACKEND_LEVEL_ZERO, "%s",
                      note[0] ? note : "no Level Zero devices");
  return st;
}

/* ---- memory ---------------------------------------------------------- */

static void ze_mem_free(xpj_device *d, xpj_mem_kind kind, void *p) {
  ze_dev *zd = d->impl;
  if (zd) /* NULL after device_destroy, which freed everything */
    zd->drv->L->zeMemFree(zd->drv->zctx, p);
}

/* The runtime frees memory the application left after device_destroy;
 * the ze context goes with the last device, so free it here first. */
static void free_leftovers(xpj_device *d) {
  pthread_mutex_lock(&d->mem_lock);
  for (size_t i = 0; i < d->nallocs; i++)
    ze_mem_free(d, d->allocs[i].kind, (void *)d->allocs[i].base);
  d->nallocs = 0;
  pthread_mutex_unlock(&d->mem_lock);
}

static void ze_device_destroy(xpj_device *d) {
  ze_dev *zd = d->impl;
  if (!zd)
    return;
  free_leftovers(d);
  drv_release(zd->drv);
  free(zd);
  d->impl = NULL;
}

static xpj_status ze_native_handle(const xpj_device *d, xpj_native_kind what,
                                   void **out) {
  const ze_dev *zd = d->impl;
  *out = what == XPJ_NATIVE_DEVICE    ? (void *)zd->h
         : what == XPJ_NATIVE_CONTEXT ? (void *)zd->drv->zctx
                                      : (void *)zd->drv->h;
  return XPJ_OK;
}

static xpj_status ze_mem_alloc(xpj_device *d, xpj_mem_kind kind,
                               size_t bytes, size_t align, void **out) {
  ze_dev *zd = d->impl;
  const ze_lib *L = zd->drv->L;
  ze_device_mem_alloc_desc_t dd = {
      .stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC};
  ze_host_mem_alloc_desc_t hd = {.stype = ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC};
  ze_context_handle_t c = zd->drv->zctx;
  ze_result_t r;
  const char *fn;
  switch (kind) {
  case XPJ_MEM_DEVICE:
    fn = "zeMemAllocDevice";
    r = L->zeMemAllocDevice(c, &dd, bytes, align, zd->h, out);
    break;
  case XPJ_MEM_HOST:
    fn = "zeMemAllocHost";
    r = L->zeMemAllocHost(c, &hd, bytes, align, out);
    break;
  default:
    fn = "zeMemAllocShared";
    r = L->zeMemAllocShared(c, &dd, &hd, bytes, align, zd->h, out);
    break;
  }
  if (r != ZE_RESULT_SUCCESS) {
    *out = NULL;
    return rt_err(ze_status(r), "xpj_mem_alloc: %s (%zu bytes on %s): %s", fn,
                  bytes, d->id, ze_result_name(r));
  }
  return XPJ_OK;
}

/* ---- queues ----------------------------------------------------------- */

typedef struct ze_queue {
  ze_command_list_handle_t list; /* immediate, asynchronous */
  bool in_order;                 /* else a barrier between commands */
  ze_event_pool_handle_t pool;   /* event mode: one event ... */
  ze_event_handle_t event;       /* ... that the last command signals */
  bool pending;                  /* appended since the last sync */
  void *staging;                 /* host memory for fill's fallback */
  size_t staging_size;
} ze_queue;

static void ze_queue_fini(xpj_device *d, void *bq) {
  ze_dev *zd = d->impl;
  const ze_lib *L = zd->drv->L;
  ze_queue *q = bq;
  if (!q)
    return;
  if (q->event)
    L->zeEventDestroy(q->event);
  if (q->pool)
    L->zeEventPoolDestroy(q->pool);
  if (q->staging)
    L->zeMemFree(zd->drv->zctx, q->staging);
  if (q->list)
    L->zeCommandListDestroy(q->list);
  free(q);
}

static ze_result_t make_list(ze_dev *zd, ze_queue *q) {
  const ze_lib *L = zd->drv->L;
  ze_command_queue_desc_t qd = {.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC,
                                .ordinal = zd->ordinal,
                                .mode = ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
                                .priority = ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
#if ZE_HAVE_IN_ORDER
  qd.flags = ZE_COMMAND_QUEUE_FLAG_IN_ORDER;
  if (L->zeCommandListCreateImmediate(zd->drv->zctx, zd->h, &qd, &q->list) ==
      ZE_RESULT_SUCCESS) {
    q->in_order = true;
    return ZE_RESULT_SUCCESS;
  }
  q->list = NULL;
  qd.flags = 0; /* a driver older than the header: barriers */
#endif
  return L->zeCommandListCreateImmediate(zd->drv->zctx, zd->h, &qd, &q->list);
}

static ze_result_t make_event(ze_dev *zd, ze_queue *q) {
  const ze_lib *L = zd->drv->L;
  ze_event_pool_desc_t pd = {.stype = ZE_STRUCTURE_TYPE_EVENT_POOL_DESC,
                             .flags = ZE_EVENT_POOL_FLAG_HOST_VISIBLE,
                             .count = 1};
  ze_result_t r = L->zeEventPoolCreate(zd->drv->zctx, &pd, 1, &zd->h,
                                       &q->pool);
  if (r != ZE_RESULT_SUCCESS)
    return r;
  ze_event_desc_t ed = {.stype = ZE_STRUCTURE_TYPE_EVENT_DESC,
                        .index = 0,
                        .signal = ZE_EVENT_SCOPE_FLAG_HOST,
                        .wait = ZE_EVENT_SCOPE_FLAG_HOST};
  return L->zeEventCreate(q->pool, &ed, &q->event);
}

static xpj_status ze_queue_init(xpj_device *d, void **bq) {
  ze_dev *zd = d->impl;
  ze_queue *q = calloc(1, sizeof *q);
  if (!q)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  ze_result_t r = make_list(zd, q);
  const char *fn = "zeCommandListCreateImmediate";
  if (r == ZE_RESULT_SUCCESS && !zd->drv->L->list_host_sync) {
    fn = "zeEventPoolCreate/zeEventCreate";
    r = make_event(zd, q);
  }
  if (r != ZE_RESULT_SUCCESS) {
    ze_queue_fini(d, q);
    return rt_err(ze_status(r), "xpj_queue_create on %s: %s: %s", d->id, fn,
                  ze_result_name(r));
  }
  *bq = q;
  return XPJ_OK;
}

/* Waits for what was appended since the last sync. */
static xpj_status ze_sync(xpj_device *d, void *bq) {
  ze_dev *zd = d->impl;
  const ze_lib *L = zd->drv->L;
  ze_queue *q = bq;
  if (!q->pending)
    return XPJ_OK;
  q->pending = false;
  ze_result_t r;
  if (L->list_host_sync) {
    r = L->list_host_sync(q->list, UINT64_MAX);
    return r == ZE_RESULT_SUCCESS
               ? XPJ_OK
               : ze_fail(r, "waiting for the device", "zeCommandListHostSynchronize");
  }
  r = L->zeEventHostSynchronize(q->event, UINT64_MAX);
  ze_result_t rr = L->zeEventHostReset(q->event);
  if (r != ZE_RESULT_SUCCESS)
    return ze_fail(r, "waiting for the device", "zeEventHostSynchronize");
  if (rr != ZE_RESULT_SUCCESS)
    return ze_fail(rr, "waiting for the device", "zeEventHostReset");
  return XPJ_OK;
}

/* Before a command: in-order semantics with what is still pending (the
 * queue syncs after every command, so normally there is nothing). Returns
 * the event the command signals (NULL where sync needs none). */
static xpj_status before(xpj_device *d, ze_queue *q, ze_event_handle_t *sig) {
  ze_dev *zd = d->impl;
  *sig = q->event;
  if (!q->pending)
    return XPJ_OK;
  if (q->event) /* one signal per reset: wait for the previous one */
    return ze_sync(d, q);
  if (q->in_order)
    return XPJ_OK;
  ze_result_t r = zd->drv->L->zeCommandListAppendBarrier(q->list, NULL, 0,
                                                          NULL);
  return r == ZE_RESULT_SUCCESS
             ? XPJ_OK
             : ze_fail(r, "ordering commands", "zeCommandListAppendBarrier");
}

/* ---- copies and fills ------------------------------------------------- */

static xpj_status ze_copy(xpj_device *d, void *bq, void *dst,
                          const void *src, size_t bytes) {
  ze_dev *zd = d->impl;
  ze_queue *q = bq;
  ze_event_handle_t sig;
  xpj_status st = before(d, q, &sig);
  if (st != XPJ_OK || bytes == 0)
    return st;
  ze_result_t r = zd->drv->L->zeCommandListAppendMemoryCopy(
      q->list, dst, src, bytes, sig, 0, NULL);
  if (r != ZE_RESULT_SUCCESS)
    return ze_fail(r, "copy", "zeCommandListAppendMemoryCopy");
  q->pending = true;
  return XPJ_OK;
}

/* A pattern the device cannot fill with (larger than its maximum): the
 * pattern repeated in host staging memory, copied over dst in pieces, then
 * a barrier that signals the end. */
static xpj_status fill_by_copies(xpj_device *d, ze_queue *q,
                                 ze_event_handle_t sig, void *dst,
                                 const void *pattern, size_t psize,
                                 size_t bytes) {
  ze_dev *zd = d->impl;
  const ze_lib *L = zd->drv->L;
  size_t chunk = bytes < ZE_STAGING ? bytes : ZE_STAGING; /* psize | both */
  if (q->staging_size < chunk) {
    if (q->staging)
      L->zeMemFree(zd->drv->zctx, q->staging);
    q->staging = NULL;
    q->staging_size = 0;
    ze_host_mem_alloc_desc_t hd = {
        .stype = ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC};
    ze_result_t r = L->zeMemAllocHost(zd->drv->zctx, &hd, ZE_STAGING, 64,
                                      &q->staging);
    if (r != ZE_RESULT_SUCCESS) {
      q->staging = NULL;
      return ze_fail(r, "fill", "zeMemAllocHost (staging)");
    }
    q->staging_size = ZE_STAGING;
  }
  for (size_t i = 0; i < chunk; i += psize)
    memcpy((uint8_t *)q->staging + i, pattern, psize);
  xpj_status st = XPJ_OK;
  for (size_t done = 0; done < bytes && st == XPJ_OK; done += chunk) {
    size_t n = bytes - done < chunk ? bytes - done : chunk;
    ze_result_t r = L->zeCommandListAppendMemoryCopy(
        q->list, (uint8_t *)dst + done, q->staging, n, NULL, 0, NULL);
    if (r != ZE_RESULT_SUCCESS)
      st = ze_fail(r, "fill", "zeCommandListAppendMemoryCopy");
  }
  /* also after a failure: the next command then waits for the copies
   * already appended, which still read the staging memory */
  ze_result_t r = L->zeCommandListAppendBarrier(q->list, sig, 0, NULL);
  if (r == ZE_RESULT_SUCCESS)
    q->pending = true;
  else if (st == XPJ_OK)
    st = ze_fail(r, "fill", "zeCommandListAppendBarrier");
  return st;
}

static xpj_status ze_fill(xpj_device *d, void *bq, void *dst,
                          const void *pattern, size_t psize, size_t bytes) {
  ze_dev *zd = d->impl;
  ze_queue *q = bq;
  ze_event_handle_t sig;
  xpj_status st = before(d, q, &sig);
  if (st != XPJ_OK || bytes == 0)
    return st;
  /* queue.c admits powers of two up to 128 */
  if (psize > zd->max_fill)
    return fill_by_copies(d, q, sig, dst, pattern, psize, bytes);
  ze_result_t r = zd->drv->L->zeCommandListAppendMemoryFill(
      q->list, dst, pattern, psize, bytes, sig, 0, NULL);
  if (r != ZE_RESULT_SUCCESS)
    return ze_fail(r, "fill", "zeCommandListAppendMemoryFill");
  q->pending = true;
  return XPJ_OK;
}

/* ---- kernels ---------------------------------------------------------- */

typedef struct ze_kern {
  ze_module_handle_t mod;
  ze_kernel_handle_t k;
  pthread_mutex_t mu; /* the kernel object's arguments are shared state */
  char name[128];
} ze_kern;

/* The driver's build log, trimmed; "" when there is none. */
static char *build_log(const ze_lib *L, ze_module_build_log_handle_t log) {
  size_t n = 0;
  if (!log || L->zeModuleBuildLogGetString(log, &n, NULL) != ZE_RESULT_SUCCESS ||
      n == 0)
    return NULL;
  char *s = malloc(n + 1);
  if (!s)
    return NULL;
  if (L->zeModuleBuildLogGetString(log, &n, s) != ZE_RESULT_SUCCESS) {
    free(s);
    return NULL;
  }
  s[n] = 0;
  size_t len = strlen(s);
  while (len && (s[len - 1] == '\n' || s[len - 1] == ' '))
    s[--len] = 0;
  if (len > ZE_MAX_BUILD_LOG)
    memcpy(s + ZE_MAX_BUILD_LOG - 4, "...", 4);
  return s;
}

static xpj_status module_fail(xpj_device *d, ze_result_t r,
                              ze_module_build_log_handle_t log,
                              const char *entry, ze_module_format_t format) {
  ze_dev *zd = d->impl;
  char *text = build_log(zd->drv->L, log);
  xpj_status st = rt_err(ze_status(r),
                         "%s could not build %s from %s (zeModuleCreate: %s)%s%s",
                         d->id, entry,
                         format == ZE_MODULE_FORMAT_NATIVE ? "its native binary"
                                                           : "SPIR-V",
                         ze_result_name(r), text && *text ? ": " : "",
                         text ? text : "");
  free(text);
  return st;
}

static xpj_status module_load(xpj_device *d, ze_module_format_t format,
                              const uint8_t *bin, size_t len,
                              const char *entry, void **native) {
  ze_dev *zd = d->impl;
  const ze_lib *L = zd->drv->L;
  ze_kern *k = calloc(1, sizeof *k);
  if (!k)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  snprintf(k->name, sizeof k->name, "%s", entry);
  ze_module_desc_t md = {.stype = ZE_STRUCTURE_TYPE_MODULE_DESC,
                         .format = format,
                         .inputSize = len,
                         .pInputModule = bin,
                         .pBuildFlags = ""};
  ze_module_build_log_handle_t log = NULL;
  ze_result_t r = L->zeModuleCreate(zd->drv->zctx, zd->h, &md, &k->mod, &log);
  xpj_status st = r == ZE_RESULT_SUCCESS
                      ? XPJ_OK
                      : module_fail(d, r, log, entry, format);
  if (log)
    L->zeModuleBuildLogDestroy(log);
  if (st == XPJ_OK) {
    ze_kernel_desc_t kd = {.stype = ZE_STRUCTURE_TYPE_KERNEL_DESC,
                           .pKernelName = entry};
    r = L->zeKernelCreate(k->mod, &kd, &k->k);
    if (r != ZE_RESULT_SUCCESS) {
      st = rt_err(ze_status(r), "%s: kernel %s (zeKernelCreate): %s", d->id,
                  entry, ze_result_name(r));
      L->zeModuleDestroy(k->mod);
    }
  }
  if (st != XPJ_OK) {
    free(k);
    return st;
  }
  pthread_mutex_init(&k->mu, NULL);
  *native = k;
  return XPJ_OK;
}

static xpj_status ze_kernel_load(xpj_device *d, const uint8_t *bin,
                                 size_t len, const char *entry,
                                 void **native) {
  char why[160];
  if (!rt_spirv_sane(bin, len, d->target.spirv_minor, why, sizeof why))
    return rt_err(XPJ_ERR_COMPILE, "loading %s on %s: %s", entry, d->id, why);
  return module_load(d, ZE_MODULE_FORMAT_IL_SPIRV, bin, len, entry, native);
}

static xpj_status ze_native_load(xpj_device *d, const uint8_t *bin,
                                 size_t len, const char *entry,
                                 void **native) {
  return module_load(d, ZE_MODULE_FORMAT_NATIVE, bin, len, entry, native);
}

static void ze_kernel_unload(xpj_device *d, void *native) {
  ze_dev *zd = d->impl;
  ze_kern *k = native;
  if (!k)
    return;
  zd->drv->L->zeKernelDestroy(k->k);
  zd->drv->L->zeModuleDestroy(k->mod);
  pthread_mutex_destroy(&k->mu);
  free(k);
}

static xpj_status ze_native_get(xpj_device *d, void *native, uint8_t **bin,
                                size_t *len) {
  ze_dev *zd = d->impl;
  const ze_lib *L = zd->drv->L;
  ze_kern *k = native;
  size_t n = 0;
  *bin = NULL;
  *len = 0;
  ze_result_t r = L->zeModuleGetNativeBinary(k->mod, &n, NULL);
  if (r != ZE_RESULT_SUCCESS)
    return ze_fail(r, k->name, "zeModuleGetNativeBinary");
  uint8_t *b = malloc(n ? n : 1);
  if (!b)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  if ((r = L->zeModuleGetNativeBinary(k->mod, &n, b)) != ZE_RESULT_SUCCESS) {
    free(b);
    return ze_fail(r, k->name, "zeModuleGetNativeBinary");
  }
  *bin = b;
  *len = n;
  return XPJ_OK;
}

/* ---- launches --------------------------------------------------------- */

/* Group size: the nd-range's local size; for range kernels the driver's
 * suggestion for the global size (the hidden arguments make the extra
 * work-items of the rounded-up grid return at once). */
static ze_result_t group_size(const ze_lib *L, const ze_kern *k,
                              const rt_launch *l, uint32_t gs[3]) {
  if (l->kind == XPJ_FUNC_NDRANGE) {
    for (int i = 0; i < 3; i++)
      gs[i] = (uint32_t)l->local[i];
    return ZE_RESULT_SUCCESS;
  }
  uint32_t g[3];
  for (int i = 0; i < 3; i++)
    g[i] = l->global[i] > UINT32_MAX ? UINT32_MAX : (uint32_t)l->global[i];
  return L->zeKernelSuggestGroupSize(k->k, g[0], g[1], g[2], &gs[0], &gs[1],
                                     &gs[2]);
}

static xpj_status group_count(xpj_device *d, const ze_kern *k,
                              const rt_launch *l, const uint32_t gs[3],
                              ze_group_count_t *gc) {
  ze_dev *zd = d->impl;
  uint32_t *c[3] = {&gc->groupCountX, &gc->groupCountY, &gc->groupCountZ};
  for (int i = 0; i < 3; i++) {
    if (gs[i] == 0)
      return rt_err(XPJ_ERR_DEVICE, "launch of %s: group size 0 in dimension %d",
                    k->name, i);
    uint64_t n = ((uint64_t)l->global[i] + gs[i] - 1) / gs[i];
    if (n > zd->max_count[i])
      return rt_err(XPJ_ERR_INVALID,
                    "launch of %s: %llu groups of %u in grid dimension %c is more "
                    "than %s takes (%u)",
                    k->name, (unsigned long long)n, gs[i], "xyz"[i], d->id,
                    zd->max_count[i]);
    *c[i] = (uint32_t)n;
  }
  return XPJ_OK;
}

/* Sets the arguments and appends the launch; call with k->mu held. */
static xpj_status append_launch(const ze_lib *L, ze_queue *q, ze_kern *k,
                                const rt_launch *l, const uint32_t gs[3],
                                const ze_group_count_t *gc,
                                ze_event_handle_t sig) {
  ze_result_t r = L->zeKernelSetGroupSize(k->k, gs[0], gs[1], gs[2]);
  if (r != ZE_RESULT_SUCCESS)
    return ze_fail(r, k->name, "zeKernelSetGroupSize");
  for (unsigned i = 0; i < l->nabi + l->nhidden; i++) {
    /* a local array parameter: its bytes and no value */
    r = L->zeKernelSetArgumentValue(
        k->k, i, l->abi[i].local ? l->abi[i].local : l->abi[i].size,
        l->abi[i].local ? NULL : l->args[i]);
    if (r != ZE_RESULT_SUCCESS)
      return rt_err(ze_status(r), "launch of %s: argument %u (%u bytes): "
                    "zeKernelSetArgumentValue: %s",
                    k->name, i, l->abi[i].size, ze_result_name(r));
  }
  r = L->zeCommandListAppendLaunchKernel(q->list, k->k, gc, sig, 0, NULL);
  if (r != ZE_RESULT_SUCCESS)
    return ze_fail(r, k->name, "zeCommandListAppendLaunchKernel");
  q->pending = true;
  return XPJ_OK;
}

static xpj_status ze_launch(xpj_device *d, void *bq, const rt_launch *l) {
  ze_dev *zd = d->impl;
  const ze_lib *L = zd->drv->L;
  ze_queue *q = bq;
  ze_kern *k = l->native;
  ze_event_handle_t sig;
  xpj_status st = before(d, q, &sig);
  if (st != XPJ_OK)
    return st;
  pthread_mutex_lock(&k->mu);
  uint32_t gs[3];
  ze_group_count_t gc;
  ze_result_t r = group_size(L, k, l, gs);
  if (r != ZE_RESULT_SUCCESS)
    st = ze_fail(r, k->name, "zeKernelSuggestGroupSize");
  if (st == XPJ_OK)
    st = group_count(d, k, l, gs, &gc);
  if (st == XPJ_OK)
    st = append_launch(L, q, k, l, gs, &gc, sig);
  pthread_mutex_unlock(&k->mu);
  return st;
}

const rt_backend_ops rt_ze_backend = {
    .id = XPJ_BACKEND_LEVEL_ZERO,
    .discover = ze_discover,
    .device_destroy = ze_device_destroy,
    .mem_alloc = ze_mem_alloc,
    .mem_free = ze_mem_free,
    .kernel_load = ze_kernel_load,
    .kernel_unload = ze_kernel_unload,
    .queue_init = ze_queue_init,
    .queue_fini = ze_queue_fini,
    .copy = ze_copy,
    .fill = ze_fill,
    .launch = ze_launch,
    .sync = ze_sync,
    .native_get = ze_native_get,
    .native_load = ze_native_load,
    .native_handle = ze_native_handle,
};
