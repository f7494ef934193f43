/* mock_ze.c - a stand-in Level Zero loader for tests on machines without a
 * driver: exactly the ze* calls runtime/ze.c makes, on host memory.
 * Allocations are aligned malloc; copies and fills happen at once, so a
 * test reads results back; kernels do not run, but every launch is
 * recorded (group size and count, each argument's size and bytes) and the
 * arguments are checked against the entry point's OpFunctionParameters in
 * the SPIR-V, as a driver would. Behaviour comes from the environment at
 * zeInit (mock_ze.h). One lock around everything: the runtime calls in
 * from its queue threads. */
#define _GNU_SOURCE
#include "mock_ze.h"

#include <level_zero/ze_api.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 8
#define SPIRV_MAGIC 0x07230203u

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static struct {
  bool init;
  unsigned ndev;
  uint32_t spirv;
  size_t fill_max;
  char fail[32];
} cfg;

static mock_ze_stats stats;
static mock_ze_launch *launches;
static unsigned nlaunches, cap_launches;

/* ---- handles ----------------------------------------------------------- */

enum { T_DRIVER = 0x5a01, T_DEVICE, T_CONTEXT, T_LIST, T_POOL, T_EVENT,
       T_MODULE, T_KERNEL, T_LOG };

typedef struct obj { unsigned tag; } obj;
typedef struct mdevice { obj o; unsigned index; } mdevice;
typedef struct mlist { obj o; } mlist;
typedef struct mevent { obj o; bool signalled; } mevent;
typedef struct mlog { obj o; char *text; } mlog;
typedef struct mmodule {
  obj o;
  uint32_t *spirv; /* copy of the SPIR-V */
  size_t words;
} mmodule;
typedef struct mkernel {
  obj o;
  char name[64];
  unsigned nparams;
  uint32_t psize[MOCK_ZE_MAX_ARGS]; /* bytes of each parameter */
  uint32_t group[3];
  mock_ze_arg args[MOCK_ZE_MAX_ARGS];
} mkernel;

static obj driver = {T_DRIVER};
static mdevice devices[MAX_DEVICES];

static bool is(const void *h, unsigned tag) {
  return h && ((const obj *)h)->tag == tag;
}

static void *make(size_t size, unsigned tag, int *live) {
  obj *o = calloc(1, size);
  if (o) {
    o->tag = tag;
    ++*live;
  }
  return o;
}

static void unmake(void *h, int *live) {
  ((obj *)h)->tag = 0;
  free(h);
  --*live;
}

/* ---- memory ------------------------------------------------------------- */

typedef struct alloc {
  uint8_t *p;
  size_t size;
  struct alloc *next;
} alloc;
static alloc *allocs;

/* true when [p, p + n) lies inside one allocation */
static bool inside(const void *p, size_t n) {
  for (alloc *a = allocs; a; a = a->next)
    if ((const uint8_t *)p >= a->p && (const uint8_t *)p + n <= a->p + a->size)
      return true;
  return false;
}

static ze_result_t mem_alloc(size_t size, size_t align, void **out) {
  if (!out)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (size == 0)
    return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
  if (align & (align - 1))
    return ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT;
  if (align < 64)
    align = 64;
  alloc *a = malloc(sizeof *a);
  void *p = aligned_alloc(align, (size + align - 1) & ~(align - 1));
  if (!a || !p) {
    free(a);
    free(p);
    return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  }
  *a = (alloc){p, size, allocs};
  allocs = a;
  stats.live_allocs++;
  *out = p;
  return ZE_RESULT_SUCCESS;
}

/* ---- configuration ------------------------------------------------------ */

static unsigned long env_num(const char *name, unsigned long dflt) {
  const char *s = getenv(name);
  return s && *s ? strtoul(s, NULL, 0) : dflt;
}

static bool failing(const char *what) { return !strcmp(cfg.fail, what); }

ze_result_t zeInit(ze_init_flags_t flags) {
  pthread_mutex_lock(&mu);
  const char *f = getenv("MOCK_ZE_FAIL");
  snprintf(cfg.fail, sizeof cfg.fail, "%s", f ? f : "");
  cfg.ndev = (unsigned)env_num("MOCK_ZE_DEVICES", 1);
  if (cfg.ndev > MAX_DEVICES)
    cfg.ndev = MAX_DEVICES;
  cfg.spirv = (uint32_t)env_num("MOCK_ZE_SPIRV", 0x00010004);
  cfg.fill_max = env_num("MOCK_ZE_FILL_MAX", 16);
  for (unsigned i = 0; i < MAX_DEVICES; i++)
    devices[i] = (mdevice){{T_DEVICE}, i};
  stats.inits++;
  cfg.init = !failing("init");
  ze_result_t r = cfg.init ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_UNINITIALIZED;
  pthread_mutex_unlock(&mu);
  return r;
}

/* ---- drivers and devices -------------------------------------------------- */

ze_result_t zeDriverGet(uint32_t *count, ze_driver_handle_t *drivers) {
  if (!cfg.init)
    return ZE_RESULT_ERROR_UNINITIALIZED;
  if (!count)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (drivers && *count >= 1)
    drivers[0] = (ze_driver_handle_t)&driver;
  *count = 1;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeDriverGetProperties(ze_driver_handle_t h,
                                  ze_driver_properties_t *p) {
  if (!is(h, T_DRIVER))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!p || p->stype != ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  memset(p->uuid.id, 0xd0, sizeof p->uuid.id);
  p->driverVersion = (1u << 24) | (3u << 16) | 26918u;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGet(ze_driver_handle_t h, uint32_t *count,
                        ze_device_handle_t *out) {
  if (!is(h, T_DRIVER))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!count)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (out)
    for (unsigned i = 0; i < cfg.ndev && i < *count; i++)
      out[i] = (ze_device_handle_t)&devices[i];
  if (!out || *count > cfg.ndev)
    *count = cfg.ndev;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGetProperties(ze_device_handle_t h,
                                  ze_device_properties_t *p) {
  if (!is(h, T_DEVICE))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!p || p->stype != ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  unsigned i = ((mdevice *)h)->index;
  p->type = ZE_DEVICE_TYPE_GPU;
  p->vendorId = 0x8086;
  p->deviceId = 0x56a0 + i;
  p->numSlices = 2;
  p->numSubslicesPerSlice = 4;
  p->numEUsPerSubslice = 8;
  for (unsigned j = 0; j < ZE_MAX_DEVICE_UUID_SIZE; j++)
    p->uuid.id[j] = (uint8_t)(0x10 * i + j);
  snprintf(p->name, sizeof p->name, "Mock Level Zero GPU %u", i);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGetComputeProperties(ze_device_handle_t h,
                                         ze_device_compute_properties_t *p) {
  if (!is(h, T_DEVICE))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!p || p->stype != ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  p->maxTotalGroupSize = 1024;
  p->maxGroupSizeX = 1024;
  p->maxGroupSizeY = 1024;
  p->maxGroupSizeZ = 64;
  p->maxGroupCountX = 0x7fffffff;
  p->maxGroupCountY = 65535;
  p->maxGroupCountZ = 65535;
  p->maxSharedLocalMemory = 65536;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGetMemoryProperties(ze_device_handle_t h, uint32_t *count,
                                        ze_device_memory_properties_t *p) {
  if (!is(h, T_DEVICE))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!count)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  static const uint64_t sizes[2] = {(uint64_t)4 << 30, (uint64_t)1 << 30};
  for (uint32_t i = 0; p && i < *count && i < 2; i++) {
    if (p[i].stype != ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES)
      return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    p[i].totalSize = sizes[i];
  }
  if (!p || *count > 2)
    *count = 2;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGetModuleProperties(ze_device_handle_t h,
                                        ze_device_module_properties_t *p) {
  if (!is(h, T_DEVICE))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!p || p->stype != ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  p->spirvVersionSupported = cfg.spirv;
  return ZE_RESULT_SUCCESS;
}

/* Group 0 copies only; group 1 computes (the ordinal queues must use). */
ze_result_t zeDeviceGetCommandQueueGroupProperties(
    ze_device_handle_t h, uint32_t *count,
    ze_command_queue_group_properties_t *p) {
  if (!is(h, T_DEVICE))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!count)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  for (uint32_t i = 0; p && i < *count && i < 2; i++) {
    if (p[i].stype != ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES)
      return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    p[i].flags = i == 0 ? ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY
                        : ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE |
                              ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY;
    p[i].maxMemoryFillPatternSize = i == 0 ? 4 : cfg.fill_max;
    p[i].numQueues = 1;
  }
  if (!p || *count > 2)
    *count = 2;
  return ZE_RESULT_SUCCESS;
}

/* ---- contexts, command lists, events ----------------------------------- */

ze_result_t zeContextCreate(ze_driver_handle_t h, const ze_context_desc_t *d,
                            ze_context_handle_t *out) {
  if (!is(h, T_DRIVER))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!d || !out || d->stype != ZE_STRUCTURE_TYPE_CONTEXT_DESC)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  *out = make(sizeof(obj), T_CONTEXT, &stats.live_contexts);
  pthread_mutex_unlock(&mu);
  return *out ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
}

ze_result_t zeContextDestroy(ze_context_handle_t h) {
  if (!is(h, T_CONTEXT))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  pthread_mutex_lock(&mu);
  unmake(h, &stats.live_contexts);
  pthread_mutex_unlock(&mu);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeCommandListCreateImmediate(ze_context_handle_t c,
                                         ze_device_handle_t dev,
                                         const ze_command_queue_desc_t *d,
                                         ze_command_list_handle_t *out) {
  if (!is(c, T_CONTEXT) || !is(dev, T_DEVICE))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!d || !out || d->stype != ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC ||
      d->ordinal != 1)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  *out = make(sizeof(mlist), T_LIST, &stats.live_lists);
  pthread_mutex_unlock(&mu);
  return *out ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
}

ze_result_t zeCommandListDestroy(ze_command_list_handle_t h) {
  if (!is(h, T_LIST))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  pthread_mutex_lock(&mu);
  unmake(h, &stats.live_lists);
  pthread_mutex_unlock(&mu);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeEventPoolCreate(ze_context_handle_t c,
                              const ze_event_pool_desc_t *d, uint32_t ndev,
                              ze_device_handle_t *devs,
                              ze_event_pool_handle_t *out) {
  if (!is(c, T_CONTEXT))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!d || !out || d->stype != ZE_STRUCTURE_TYPE_EVENT_POOL_DESC ||
      d->count == 0 || !(d->flags & ZE_EVENT_POOL_FLAG_HOST_VISIBLE))
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  for (uint32_t i = 0; i < ndev; i++)
    if (!is(devs[i], T_DEVICE))
      return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  pthread_mutex_lock(&mu);
  *out = make(sizeof(obj), T_POOL, &stats.live_pools);
  pthread_mutex_unlock(&mu);
  return *out ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
}

ze_result_t zeEventPoolDestroy(ze_event_pool_handle_t h) {
  if (!is(h, T_POOL))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  pthread_mutex_lock(&mu);
  unmake(h, &stats.live_pools);
  pthread_mutex_unlock(&mu);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeEventCreate(ze_event_pool_handle_t p, const ze_event_desc_t *d,
                          ze_event_handle_t *out) {
  if (!is(p, T_POOL))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!d || !out || d->stype != ZE_STRUCTURE_TYPE_EVENT_DESC)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  *out = make(sizeof(mevent), T_EVENT, &stats.live_events);
  pthread_mutex_unlock(&mu);
  return *out ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
}

ze_result_t zeEventDestroy(ze_event_handle_t h) {
  if (!is(h, T_EVENT))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  pthread_mutex_lock(&mu);
  unmake(h, &stats.live_events);
  pthread_mutex_unlock(&mu);
  return ZE_RESULT_SUCCESS;
}

/* A signalled event is complete (the work was done at append); waiting
 * for one nobody signalled would hang a real driver: NOT_READY here. */
ze_result_t zeEventHostSynchronize(ze_event_handle_t h, uint64_t timeout) {
  if (!is(h, T_EVENT))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  pthread_mutex_lock(&mu);
  stats.event_syncs++;
  ze_result_t r = failing("sync")                   ? ZE_RESULT_ERROR_DEVICE_LOST
                  : ((mevent *)h)->signalled ? ZE_RESULT_SUCCESS
                                                    : ZE_RESULT_NOT_READY;
  pthread_mutex_unlock(&mu);
  return r;
}

ze_result_t zeEventHostReset(ze_event_handle_t h) {
  if (!is(h, T_EVENT))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  pthread_mutex_lock(&mu);
  ((mevent *)h)->signalled = false;
  pthread_mutex_unlock(&mu);
  return ZE_RESULT_SUCCESS;
}

/* Call with mu held. */
static ze_result_t check_append(ze_command_list_handle_t l,
                                ze_event_handle_t sig, uint32_t nwait,
                                ze_event_handle_t *waits) {
  if (!is(l, T_LIST) || (sig && !is(sig, T_EVENT)))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (sig && ((mevent *)sig)->signalled)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT; /* signalled twice, no reset */
  if (nwait && !waits)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  return ZE_RESULT_SUCCESS;
}

static void mark_signalled(ze_event_handle_t sig) {
  if (sig)
    ((mevent *)sig)->signalled = true;
}

ze_result_t zeCommandListAppendBarrier(ze_command_list_handle_t l,
                                       ze_event_handle_t sig, uint32_t nwait,
                                       ze_event_handle_t *waits) {
  pthread_mutex_lock(&mu);
  ze_result_t r = check_append(l, sig, nwait, waits);
  if (r == ZE_RESULT_SUCCESS) {
    stats.barriers++;
    mark_signalled(sig);
  }
  pthread_mutex_unlock(&mu);
  return r;
}

ze_result_t zeCommandListAppendMemoryCopy(ze_command_list_handle_t l,
                                          void *dst, const void *src,
                                          size_t n, ze_event_handle_t sig,
                                          uint32_t nwait,
                                          ze_event_handle_t *waits) {
  pthread_mutex_lock(&mu);
  ze_result_t r = check_append(l, sig, nwait, waits);
  if (r == ZE_RESULT_SUCCESS && (!dst || !src))
    r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  else if (r == ZE_RESULT_SUCCESS && (!inside(dst, n) || !inside(src, n)))
    r = ZE_RESULT_ERROR_INVALID_ARGUMENT; /* not USM of this mock */
  if (r == ZE_RESULT_SUCCESS) {
    memmove(dst, src, n);
    stats.copies++;
    mark_signalled(sig);
  }
  pthread_mutex_unlock(&mu);
  return r;
}

ze_result_t zeCommandListAppendMemoryFill(ze_command_list_handle_t l,
                                          void *dst, const void *pattern,
                                          size_t psize, size_t n,
                                          ze_event_handle_t sig,
                                          uint32_t nwait,
                                          ze_event_handle_t *waits) {
  pthread_mutex_lock(&mu);
  ze_result_t r = check_append(l, sig, nwait, waits);
  if (r == ZE_RESULT_SUCCESS && (!dst || !pattern))
    r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  else if (r == ZE_RESULT_SUCCESS &&
           (psize == 0 || (psize & (psize - 1)) || psize > cfg.fill_max ||
            n % psize))
    r = ZE_RESULT_ERROR_INVALID_SIZE;
  else if (r == ZE_RESULT_SUCCESS && !inside(dst, n))
    r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
  if (r == ZE_RESULT_SUCCESS) {
    for (size_t i = 0; i < n; i += psize)
      memcpy((uint8_t *)dst + i, pattern, psize);
    stats.fills++;
    mark_signalled(sig);
  }
  pthread_mutex_unlock(&mu);
  return r;
}

/* ---- memory ------------------------------------------------------------- */

ze_result_t zeMemAllocDevice(ze_context_handle_t c,
                             const ze_device_mem_alloc_desc_t *d, size_t size,
                             size_t align, ze_device_handle_t dev,
                             void **out) {
  if (!is(c, T_CONTEXT) || !is(dev, T_DEVICE))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!d || d->stype != ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  ze_result_t r = mem_alloc(size, align, out);
  stats.allocs_device += r == ZE_RESULT_SUCCESS;
  pthread_mutex_unlock(&mu);
  return r;
}

ze_result_t zeMemAllocHost(ze_context_handle_t c,
                           const ze_host_mem_alloc_desc_t *d, size_t size,
                           size_t align, void **out) {
  if (!is(c, T_CONTEXT))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!d || d->stype != ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  ze_result_t r = mem_alloc(size, align, out);
  stats.allocs_host += r == ZE_RESULT_SUCCESS;
  pthread_mutex_unlock(&mu);
  return r;
}

ze_result_t zeMemAllocShared(ze_context_handle_t c,
                             const ze_device_mem_alloc_desc_t *dd,
                             const ze_host_mem_alloc_desc_t *hd, size_t size,
                             size_t align, ze_device_handle_t dev,
                             void **out) {
  if (!is(c, T_CONTEXT) || (dev && !is(dev, T_DEVICE)))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!dd || dd->stype != ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC || !hd ||
      hd->stype != ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  ze_result_t r = mem_alloc(size, align, out);
  stats.allocs_shared += r == ZE_RESULT_SUCCESS;
  pthread_mutex_unlock(&mu);
  return r;
}

ze_result_t zeMemFree(ze_context_handle_t c, void *p) {
  if (!is(c, T_CONTEXT))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  pthread_mutex_lock(&mu);
  ze_result_t r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
  for (alloc **pp = &allocs; *pp; pp = &(*pp)->next)
    if ((*pp)->p == p) {
      alloc *a = *pp;
      *pp = a->next;
      free(a->p);
      free(a);
      stats.live_allocs--;
      r = ZE_RESULT_SUCCESS;
      break;
    }
  pthread_mutex_unlock(&mu);
  return r;
}

/* ---- modules and kernels ------------------------------------------------ */

static bool is_spirv(const uint8_t *p, size_t n) {
  uint32_t magic;
  if (!p || n < 20 || n % 4)
    return false;
  memcpy(&magic, p, 4);
  return magic == SPIRV_MAGIC;
}

/* Call with mu held. */
static ze_result_t new_log(ze_module_build_log_handle_t *out,
                           const char *text) {
  if (!out)
    return ZE_RESULT_SUCCESS;
  mlog *g = make(sizeof *g, T_LOG, &stats.live_logs);
  if (g && !(g->text = strdup(text))) {
    unmake(g, &stats.live_logs);
    g = NULL;
  }
  *out = (ze_module_build_log_handle_t)g;
  return g ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
}

static ze_result_t module_create(const ze_module_desc_t *d,
                                 ze_module_handle_t *out,
                                 ze_module_build_log_handle_t *log) {
  size_t skip = d->format == ZE_MODULE_FORMAT_NATIVE
                    ? strlen(MOCK_ZE_NATIVE_MAGIC)
                    : 0;
  if (d->format == ZE_MODULE_FORMAT_NATIVE &&
      (d->inputSize < skip ||
       memcmp(d->pInputModule, MOCK_ZE_NATIVE_MAGIC, skip) ||
       !is_spirv(d->pInputModule + skip, d->inputSize - skip)))
    return ZE_RESULT_ERROR_INVALID_NATIVE_BINARY;
  if (d->format == ZE_MODULE_FORMAT_IL_SPIRV &&
      !is_spirv(d->pInputModule, d->inputSize)) {
    new_log(log, "mock-ze: the input is not SPIR-V");
    return ZE_RESULT_ERROR_MODULE_BUILD_FAILURE;
  }
  if (failing("module")) { /* either format */
    new_log(log, MOCK_ZE_BUILD_LOG);
    return ZE_RESULT_ERROR_MODULE_BUILD_FAILURE;
  }
  mmodule *m = make(sizeof *m, T_MODULE, &stats.live_modules);
  size_t n = d->inputSize - skip;
  if (m && !(m->spirv = malloc(n))) {
    unmake(m, &stats.live_modules);
    m = NULL;
  }
  if (!m)
    return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  memcpy(m->spirv, d->pInputModule + skip, n);
  m->words = n / 4;
  if (d->format == ZE_MODULE_FORMAT_NATIVE)
    stats.modules_native++;
  else
    stats.modules_il++;
  *out = (ze_module_handle_t)m;
  return new_log(log, "");
}

ze_result_t zeModuleCreate(ze_context_handle_t c, ze_device_handle_t dev,
                           const ze_module_desc_t *d, ze_module_handle_t *out,
                           ze_module_build_log_handle_t *log) {
  if (log)
    *log = NULL;
  if (!is(c, T_CONTEXT) || !is(dev, T_DEVICE))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!d || !out || d->stype != ZE_STRUCTURE_TYPE_MODULE_DESC ||
      !d->pInputModule)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  if (d->format != ZE_MODULE_FORMAT_IL_SPIRV &&
      d->format != ZE_MODULE_FORMAT_NATIVE)
    return ZE_RESULT_ERROR_INVALID_ENUMERATION;
  pthread_mutex_lock(&mu);
  ze_result_t r = module_create(d, out, log);
  pthread_mutex_unlock(&mu);
  return r;
}

ze_result_t zeModuleDestroy(ze_module_handle_t h) {
  if (!is(h, T_MODULE))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  pthread_mutex_lock(&mu);
  free(((mmodule *)h)->spirv);
  unmake(h, &stats.live_modules);
  pthread_mutex_unlock(&mu);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeModuleBuildLogGetString(ze_module_build_log_handle_t h,
                                      size_t *size, char *buf) {
  if (!is(h, T_LOG))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!size)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  const char *t = ((mlog *)h)->text;
  size_t need = strlen(t) + 1;
  if (buf) {
    if (*size < need)
      return ZE_RESULT_ERROR_INVALID_SIZE;
    memcpy(buf, t, need);
  }
  *size = need;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeModuleBuildLogDestroy(ze_module_build_log_handle_t h) {
  if (!is(h, T_LOG))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  pthread_mutex_lock(&mu);
  free(((mlog *)h)->text);
  unmake(h, &stats.live_logs);
  pthread_mutex_unlock(&mu);
  return ZE_RESULT_SUCCESS;
}

/* "MOCKZENATIVE" followed by the module's SPIR-V. */
ze_result_t zeModuleGetNativeBinary(ze_module_handle_t h, size_t *size,
                                    uint8_t *buf) {
  if (!is(h, T_MODULE))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!size)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  const mmodule *m = (const mmodule *)h;
  size_t magic = strlen(MOCK_ZE_NATIVE_MAGIC), need = magic + m->words * 4;
  if (buf) {
    if (*size < need)
      return ZE_RESULT_ERROR_INVALID_SIZE;
    memcpy(buf, MOCK_ZE_NATIVE_MAGIC, magic);
    memcpy(buf + magic, m->spirv, m->words * 4);
    pthread_mutex_lock(&mu);
    stats.native_gets++;
    pthread_mutex_unlock(&mu);
  }
  *size = need;
  return ZE_RESULT_SUCCESS;
}

/* The entry point `name` and the byte size of each of its parameters, from
 * the SPIR-V (OpEntryPoint, OpTypeInt/Float/Bool/Pointer, OpFunction,
 * OpFunctionParameter). false when there is no such entry point. */
static bool entry_params(const mmodule *m, const char *name, mkernel *k) {
  enum { OpEntryPoint = 15, OpTypeBool = 20, OpTypeInt = 21,
         OpTypeFloat = 22, OpTypePointer = 32, OpFunction = 54,
         OpFunctionParameter = 55 };
  const uint32_t *w = m->spirv;
  size_t n = m->words, bound = w[3];
  uint32_t entry = 0;
  uint32_t *size = calloc(bound ? bound : 1, sizeof *size);
  if (!size)
    return false;
  bool in_entry = false, found = false;
  for (size_t i = 5; i < n;) {
    uint32_t op = w[i] & 0xffff, wc = w[i] >> 16;
    if (wc == 0 || i + wc > n)
      break;
    if (op == OpEntryPoint && wc > 3 &&
        strnlen((const char *)&w[i + 3], 4 * (wc - 3)) < 4 * (wc - 3) &&
        !strcmp((const char *)&w[i + 3], name)) {
      entry = w[i + 2];
      found = true;
    } else if ((op == OpTypeInt || op == OpTypeFloat) && w[i + 1] < bound) {
      size[w[i + 1]] = w[i + 2] / 8;
    } else if (op == OpTypeBool && w[i + 1] < bound) {
      size[w[i + 1]] = 1;
    } else if (op == OpTypePointer && w[i + 1] < bound) {
      /* a Workgroup (local) pointer parameter takes a size and no value */
      size[w[i + 1]] = wc > 2 && w[i + 2] == 4 ? MOCK_ZE_LOCAL_ARG : 8;
    } else if (op == OpFunction) {
      in_entry = found && w[i + 2] == entry;
    } else if (op == OpFunctionParameter && in_entry &&
               k->nparams < MOCK_ZE_MAX_ARGS) {
      k->psize[k->nparams++] = w[i + 1] < bound ? size[w[i + 1]] : 0;
    }
    i += wc;
  }
  free(size);
  return found;
}

ze_result_t zeKernelCreate(ze_module_handle_t h, const ze_kernel_desc_t *d,
                           ze_kernel_handle_t *out) {
  if (!is(h, T_MODULE))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!d || !out || d->stype != ZE_STRUCTURE_TYPE_KERNEL_DESC ||
      !d->pKernelName)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  ze_result_t r = ZE_RESULT_SUCCESS;
  mkernel *k = NULL;
  if (failing("kernel"))
    r = ZE_RESULT_ERROR_INVALID_KERNEL_NAME;
  else if (!(k = make(sizeof *k, T_KERNEL, &stats.live_kernels)))
    r = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  if (k) {
    snprintf(k->name, sizeof k->name, "%s", d->pKernelName);
    if (!entry_params((const mmodule *)h, d->pKernelName, k)) {
      unmake(k, &stats.live_kernels);
      r = ZE_RESULT_ERROR_INVALID_KERNEL_NAME;
    }
  }
  *out = r == ZE_RESULT_SUCCESS ? (ze_kernel_handle_t)k : NULL;
  pthread_mutex_unlock(&mu);
  return r;
}

ze_result_t zeKernelDestroy(ze_kernel_handle_t h) {
  if (!is(h, T_KERNEL))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  pthread_mutex_lock(&mu);
  unmake(h, &stats.live_kernels);
  pthread_mutex_unlock(&mu);
  return ZE_RESULT_SUCCESS;
}

static uint32_t pow2_upto(uint32_t n, uint32_t cap) {
  uint32_t p = 1;
  while (p * 2 <= n && p * 2 <= cap)
    p *= 2;
  return p;
}

/* Powers of two up to 32 x 4 x 1, not necessarily dividing the size: the
 * runtime must round the grid up. */
ze_result_t zeKernelSuggestGroupSize(ze_kernel_handle_t h, uint32_t gx,
                                     uint32_t gy, uint32_t gz, uint32_t *x,
                                     uint32_t *y, uint32_t *z) {
  if (!is(h, T_KERNEL))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!x || !y || !z)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (!gx || !gy || !gz)
    return ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION;
  *x = gx >= 32 ? 32 : pow2_upto(gx, 32);
  *y = pow2_upto(gy, 4);
  *z = 1;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeKernelSetGroupSize(ze_kernel_handle_t h, uint32_t x, uint32_t y,
                                 uint32_t z) {
  if (!is(h, T_KERNEL))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!x || !y || !z || x > 1024 || y > 1024 || z > 64 ||
      (uint64_t)x * y * z > 1024)
    return ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION;
  pthread_mutex_lock(&mu);
  mkernel *k = (mkernel *)h;
  k->group[0] = x;
  k->group[1] = y;
  k->group[2] = z;
  pthread_mutex_unlock(&mu);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeKernelSetArgumentValue(ze_kernel_handle_t h, uint32_t index,
                                     size_t size, const void *value) {
  if (!is(h, T_KERNEL))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  pthread_mutex_lock(&mu);
  mkernel *k = (mkernel *)h;
  ze_result_t r = ZE_RESULT_SUCCESS;
  if (index >= k->nparams)
    r = ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX;
  else if (k->psize[index] == MOCK_ZE_LOCAL_ARG ? size == 0 || value != NULL
           : size != k->psize[index] || size > sizeof k->args[0].bytes)
    r = ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE;
  if (r == ZE_RESULT_SUCCESS) {
    mock_ze_arg *a = &k->args[index];
    memset(a, 0, sizeof *a);
    a->size = (uint32_t)size;
    if (value)
      memcpy(a->bytes, value, size);
    a->set = 1;
  }
  pthread_mutex_unlock(&mu);
  return r;
}

/* Call with mu held. */
static ze_result_t record_launch(const mkernel *k, const ze_group_count_t *g) {
  if (nlaunches == cap_launches) {
    unsigned cap = cap_launches ? cap_launches * 2 : 16;
    mock_ze_launch *a = realloc(launches, cap * sizeof *a);
    if (!a)
      return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    launches = a;
    cap_launches = cap;
  }
  mock_ze_launch *l = &launches[nlaunches++];
  memset(l, 0, sizeof *l);
  snprintf(l->kernel, sizeof l->kernel, "%s", k->name);
  memcpy(l->group, k->group, sizeof l->group);
  l->count[0] = g->groupCountX;
  l->count[1] = g->groupCountY;
  l->count[2] = g->groupCountZ;
  l->nparams = k->nparams;
  memcpy(l->args, k->args, sizeof l->args);
  stats.launches++;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeCommandListAppendLaunchKernel(ze_command_list_handle_t l,
                                            ze_kernel_handle_t h,
                                            const ze_group_count_t *g,
                                            ze_event_handle_t sig,
                                            uint32_t nwait,
                                            ze_event_handle_t *waits) {
  if (!is(h, T_KERNEL))
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!g)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  pthread_mutex_lock(&mu);
  const mkernel *k = (const mkernel *)h;
  ze_result_t r = check_append(l, sig, nwait, waits);
  for (unsigned i = 0; r == ZE_RESULT_SUCCESS && i < k->nparams; i++)
    if (!k->args[i].set)
      r = ZE_RESULT_ERROR_INVALID_ARGUMENT; /* an argument never set */
  if (r == ZE_RESULT_SUCCESS && (!k->group[0] || !g->groupCountX ||
                                 !g->groupCountY || !g->groupCountZ ||
                                 g->groupCountY > 65535 ||
                                 g->groupCountZ > 65535))
    r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
  if (r == ZE_RESULT_SUCCESS && failing("launch"))
    r = ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
  if (r == ZE_RESULT_SUCCESS)
    r = record_launch(k, g);
  if (r == ZE_RESULT_SUCCESS)
    mark_signalled(sig);
  pthread_mutex_unlock(&mu);
  return r;
}

/* ---- for the tests ------------------------------------------------------ */

void mock_ze_get_stats(mock_ze_stats *out) {
  pthread_mutex_lock(&mu);
  *out = stats;
  pthread_mutex_unlock(&mu);
}

int mock_ze_get_launch(unsigned i, mock_ze_launch *out) {
  pthread_mutex_lock(&mu);
  int r = i < nlaunches ? 0 : -1;
  if (r == 0)
    *out = launches[i];
  pthread_mutex_unlock(&mu);
  return r;
}

void mock_ze_reset(void) {
  pthread_mutex_lock(&mu);
  mock_ze_stats live = stats;
  memset(&stats, 0, sizeof stats);
  stats.live_contexts = live.live_contexts;
  stats.live_lists = live.live_lists;
  stats.live_pools = live.live_pools;
  stats.live_events = live.live_events;
  stats.live_allocs = live.live_allocs;
  stats.live_modules = live.live_modules;
  stats.live_kernels = live.live_kernels;
  stats.live_logs = live.live_logs;
  free(launches);
  launches = NULL;
  nlaunches = cap_launches = 0;
  pthread_mutex_unlock(&mu);
}
