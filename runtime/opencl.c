/*
 * opencl.c - OpenCL devices that take SPIR-V, through the ICD loader.
 *
 * libOpenCL is opened at run time (XPJIT_OPENCL_LIBRARY, else
 * libOpenCL.so.1): no loader, no platform, or no device that reports an IL
 * version means no OpenCL devices, and a note says why. Programs are our
 * SPIR-V through clCreateProgramWithIL (or clCreateProgramWithILKHR);
 * memory is Intel's unified shared memory where the device has it
 * (cl_intel_unified_shared_memory) and SVM otherwise, so kernels take the
 * plain pointers of the ABI (docs/abi.md). Each device has its own
 * cl_context; each queue an in-order command queue. The device's program
 * binary is the native form cached beside the SPIR-V.
 */
#define CL_TARGET_OPENCL_VERSION 300
#include "rt.h"
#include "spirv_check.h"

#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the loader's entry points ----------------------------------------- */

#define CL_FUNCS(X)                                                        \
  X(clGetPlatformIDs, cl_int, (cl_uint, cl_platform_id *, cl_uint *))      \
  X(clGetPlatformInfo, cl_int,                                             \
    (cl_platform_id, cl_platform_info, size_t, void *, size_t *))          \
  X(clGetDeviceIDs, cl_int,                                                \
    (cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *))  \
  X(clGetDeviceInfo, cl_int,                                               \
    (cl_device_id, cl_device_info, size_t, void *, size_t *))              \
  X(clCreateContext, cl_context,                                           \
    (const cl_context_properties *, cl_uint, const cl_device_id *,         \
     void(CL_CALLBACK *)(const char *, const void *, size_t, void *),      \
     void *, cl_int *))                                                    \
  X(clReleaseContext, cl_int, (cl_context))                                \
  X(clCreateCommandQueue, cl_command_queue,                                \
    (cl_context, cl_device_id, cl_command_queue_properties, cl_int *))     \
  X(clReleaseCommandQueue, cl_int, (cl_command_queue))                     \
  X(clCreateProgramWithBinary, cl_program,                                 \
    (cl_context, cl_uint, const cl_device_id *, const size_t *,            \
     const unsigned char **, cl_int *, cl_int *))                          \
  X(clBuildProgram, cl_int,                                                \
    (cl_program, cl_uint, const cl_device_id *, const char *,              \
     void(CL_CALLBACK *)(cl_program, void *), void *))                     \
  X(clGetProgramBuildInfo, cl_int,                                         \
    (cl_program, cl_device_id, cl_program_build_info, size_t, void *,      \
     size_t *))                                                            \
  X(clGetProgramInfo, cl_int,                                              \
    (cl_program, cl_program_info, size_t, void *, size_t *))               \
  X(clReleaseProgram, cl_int, (cl_program))                                \
  X(clCreateKernel, cl_kernel, (cl_program, const char *, cl_int *))       \
  X(clReleaseKernel, cl_int, (cl_kernel))                                  \
  X(clSetKernelArg, cl_int, (cl_kernel, cl_uint, size_t, const void *))    \
  X(clEnqueueNDRangeKernel, cl_int,                                        \
    (cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *, \
     const size_t *, cl_uint, const cl_event *, cl_event *))               \
  X(clFinish, cl_int, (cl_command_queue))                                  \
  X(clGetExtensionFunctionAddressForPlatform, void *,                      \
    (cl_platform_id, const char *))

/* OpenCL 2.x entry points: an ICD loader for 1.2 may lack them. */
#define CL_FUNCS_OPT(X)                                                    \
  X(clCreateProgramWithIL, cl_program,                                     \
    (cl_context, const void *, size_t, cl_int *))                          \
  X(clSVMAlloc, void *, (cl_context, cl_svm_mem_flags, size_t, cl_uint))   \
  X(clSVMFree, void, (cl_context, void *))                                 \
  X(clSetKernelArgSVMPointer, cl_int, (cl_kernel, cl_uint, const void *))  \
  X(clEnqueueSVMMemcpy, cl_int,                                            \
    (cl_command_queue, cl_bool, void *, const void *, size_t, cl_uint,     \
     const cl_event *, cl_event *))                                        \
  X(clEnqueueSVMMemFill, cl_int,                                           \
    (cl_command_queue, void *, const void *, size_t, size_t, cl_uint,      \
     const cl_event *, cl_event *))

typedef struct cl_api {
#define X(name, ret, args) ret(CL_API_CALL *name) args;
  CL_FUNCS(X)
  CL_FUNCS_OPT(X)
#undef X
} cl_api;

static cl_api cl;
static void *cl_lib;
static pthread_mutex_t cl_load_mu = PTHREAD_MUTEX_INITIALIZER;
/* Discovery (platforms, devices, their cl_context) and the release of a
 * device's cl_context, one thread at a time in the process: the spec makes
 * them thread-safe, but PoCL 3.1 (Debian 12) crashes when two threads
 * create contexts at once (an adversarial review: 4 threads creating
 * xpjit contexts, 5 crashes in 5 runs). Rare calls: no cost that counts. */
static pthread_mutex_t cl_setup_mu = PTHREAD_MUTEX_INITIALIZER;

/* Opens the loader once per process (kept open: drivers do not unload
 * cleanly). False with why filled when it cannot. */
static bool cl_load(char *why, size_t size) {
  static const char *const names[] = {"libOpenCL.so.1", "libOpenCL.so", NULL};
  pthread_mutex_lock(&cl_load_mu);
  bool ok = cl_lib != NULL;
  if (!ok) {
    void *h = rt_dlopen("XPJIT_OPENCL_LIBRARY", names, why, size);
    cl_api a;
    memset(&a, 0, sizeof a);
    ok = h != NULL;
#define X(name, ret, args)                                                 \
  if (ok && !(*(void **)&a.name = dlsym(h, #name))) {                      \
    snprintf(why, size, "the OpenCL library has no %s", #name);            \
    ok = false;                                                            \
  }
    CL_FUNCS(X)
#undef X
#define X(name, ret, args) if (ok) *(void **)&a.name = dlsym(h, #name);
    CL_FUNCS_OPT(X)
#undef X
    if (ok) {
      cl = a;
      cl_lib = h;
    } else if (h) {
      dlclose(h);
    }
  }
  pthread_mutex_unlock(&cl_load_mu);
  return ok;
}

static const char *cl_err_name(cl_int e) {
  switch (e) {
#define N(c) case c: return #c;
    N(CL_SUCCESS) N(CL_DEVICE_NOT_FOUND) N(CL_DEVICE_NOT_AVAILABLE)
    N(CL_COMPILER_NOT_AVAILABLE) N(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    N(CL_OUT_OF_RESOURCES) N(CL_OUT_OF_HOST_MEMORY)
    N(CL_BUILD_PROGRAM_FAILURE) N(CL_INVALID_VALUE)
    N(CL_INVALID_DEVICE_TYPE) N(CL_INVALID_PLATFORM) N(CL_INVALID_DEVICE)
    N(CL_INVALID_CONTEXT) N(CL_INVALID_QUEUE_PROPERTIES)
    N(CL_INVALID_COMMAND_QUEUE) N(CL_INVALID_HOST_PTR)
    N(CL_INVALID_MEM_OBJECT) N(CL_INVALID_BINARY)
    N(CL_INVALID_BUILD_OPTIONS) N(CL_INVALID_PROGRAM)
    N(CL_INVALID_PROGRAM_EXECUTABLE) N(CL_INVALID_KERNEL_NAME)
    N(CL_INVALID_KERNEL_DEFINITION) N(CL_INVALID_KERNEL)
    N(CL_INVALID_ARG_INDEX) N(CL_INVALID_ARG_VALUE) N(CL_INVALID_ARG_SIZE)
    N(CL_INVALID_KERNEL_ARGS) N(CL_INVALID_WORK_DIMENSION)
    N(CL_INVALID_WORK_GROUP_SIZE) N(CL_INVALID_WORK_ITEM_SIZE)
    N(CL_INVALID_GLOBAL_OFFSET) N(CL_INVALID_EVENT_WAIT_LIST)
    N(CL_INVALID_OPERATION) N(CL_INVALID_BUFFER_SIZE)
    N(CL_INVALID_GLOBAL_WORK_SIZE) N(CL_INVALID_PROPERTY)
    N(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    N(CL_MISALIGNED_SUB_BUFFER_OFFSET) N(CL_LINK_PROGRAM_FAILURE)
#undef N
  case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
  default: return "an unknown OpenCL error";
  }
}

static xpj_status cl_fail(xpj_status st, cl_int e, const char *what,
                          const xpj_device *d) {
  if (e == CL_OUT_OF_HOST_MEMORY || e == CL_OUT_OF_RESOURCES ||
      e == CL_MEM_OBJECT_ALLOCATION_FAILURE)
    st = XPJ_ERR_NOMEM;
  return rt_err(st, "%s on %s (%s): %s (%d)", what, d->id, d->info.name,
                cl_err_name(e), (int)e);
}

/* ---- devices ------------------------------------------------------------ */

typedef void *(CL_API_CALL *usm_alloc_fn)(cl_context, cl_device_id,
                                          const cl_mem_properties_intel *,
                                          size_t, cl_uint, cl_int *);
typedef void *(CL_API_CALL *usm_host_alloc_fn)(
    cl_context, const cl_mem_properties_intel *, size_t, cl_uint, cl_int *);

typedef struct cl_dev {
  cl_platform_id platform;
  cl_device_id id;
  cl_context ctx;
  bool usm;      /* Intel unified shared memory */
  bool svm_fine; /* fine-grained SVM buffers: host-visible SVM */
  bool fp16;     /* cl_khr_fp16: f16 arithmetic */
  /* cl_intel_unified_shared_memory */
  usm_host_alloc_fn host_alloc;
  usm_alloc_fn device_alloc, shared_alloc;
  cl_int(CL_API_CALL *mem_free)(cl_context, void *);
  cl_int(CL_API_CALL *set_arg_ptr)(cl_kernel, cl_uint, const void *);
  cl_int(CL_API_CALL *memcpy_)(cl_command_queue, cl_bool, void *,
                               const void *, size_t, cl_uint, const cl_event *,
                               cl_event *);
  cl_int(CL_API_CALL *memfill)(cl_command_queue, void *, const void *, size_t,
                               size_t, cl_uint, const cl_event *, cl_event *);
  /* cl_khr_il_program on a 1.2 device */
  cl_program(CL_API_CALL *il_khr)(cl_context, const void *, size_t,
                                  cl_int *);
} cl_dev;

static cl_dev *cd_of(const xpj_device *d) { return d->impl; }

static bool dev_str(cl_device_id id, cl_device_info what, char *buf,
                    size_t size) {
  buf[0] = 0;
  size_t n = 0;
  if (cl.clGetDeviceInfo(id, what, size, buf, &n) != CL_SUCCESS) {
    buf[0] = 0;
    return false;
  }
  buf[size - 1] = 0;
  return true;
}

static uint64_t dev_u64(cl_device_id id, cl_device_info what, size_t width) {
  uint64_t v = 0;
  if (width == 4) {
    cl_uint u = 0;
    cl.clGetDeviceInfo(id, what, sizeof u, &u, NULL);
    v = u;
  } else if (width == sizeof(size_t)) {
    size_t s = 0;
    cl.clGetDeviceInfo(id, what, sizeof s, &s, NULL);
    v = s;
  } else {
    cl_ulong u = 0;
    cl.clGetDeviceInfo(id, what, sizeof u, &u, NULL);
    v = u;
  }
  return v;
}

static bool has_word(const char *list, const char *w) {
  size_t n = strlen(w);
  for (const char *p = strstr(list, w); p; p = strstr(p + 1, w))
    if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0))
      return true;
  return false;
}

/* The highest SPIR-V 1.x the device reports in CL_DEVICE_IL_VERSION
 * ("SPIR-V_1.0 SPIR-V_1.1 ..."); -1 if none. */
static int spirv_minor_of(const char *ils) {
  int best = -1;
  for (const char *p = strstr(ils, "SPIR-V_1."); p;
       p = strstr(p + 1, "SPIR-V_1.")) {
    int m = p[9] >= '0' && p[9] <= '9' ? p[9] - '0' : -1;
    if (m > best)
      best = m;
  }
  return best;
}

static void *ext_fn(cl_platform_id p, const char *name) {
  return cl.clGetExtensionFunctionAddressForPlatform(p, name);
}

/* Memory the kernels can take as plain pointers: USM, or SVM. */
static bool setup_memory(cl_dev *c, const char *exts) {
  if (has_word(exts, "cl_intel_unified_shared_memory")) {
    c->host_alloc = (usm_host_alloc_fn)ext_fn(c->platform, "clHostMemAllocINTEL");
    c->device_alloc = (usm_alloc_fn)ext_fn(c->platform, "clDeviceMemAllocINTEL");
    c->shared_alloc = (usm_alloc_fn)ext_fn(c->platform, "clSharedMemAllocINTEL");
    *(void **)&c->mem_free = ext_fn(c->platform, "clMemBlockingFreeINTEL");
    *(void **)&c->set_arg_ptr =
        ext_fn(c->platform, "clSetKernelArgMemPointerINTEL");
    *(void **)&c->memcpy_ = ext_fn(c->platform, "clEnqueueMemcpyINTEL");
    *(void **)&c->memfill = ext_fn(c->platform, "clEnqueueMemFillINTEL");
    c->usm = c->host_alloc && c->device_alloc && c->shared_alloc &&
             c->mem_free && c->set_arg_ptr && c->memcpy_ && c->memfill;
    if (c->usm)
      return true;
  }
  cl_device_svm_capabilities svm = 0;
  if (!cl.clSVMAlloc || !cl.clSVMFree || !cl.clSetKernelArgSVMPointer ||
      !cl.clEnqueueSVMMemcpy || !cl.clEnqueueSVMMemFill ||
      cl.clGetDeviceInfo(c->id, CL_DEVICE_SVM_CAPABILITIES, sizeof svm, &svm,
                         NULL) != CL_SUCCESS ||
      !(svm & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER))
    return false;
  c->svm_fine = (svm & CL_DEVICE_SVM_FINE_GRAIN_BUFFER) != 0;
  return true;
}

/* Appends "name: why" to the backend's note (kept only if no device is
 * added in the end: see ocl_discover). */
static void note_skip(xpj_context *ctx, const char *name, const char *why) {
  char *note = ctx->absent[XPJ_BACKEND_OPENCL];
  size_t size = sizeof ctx->absent[XPJ_BACKEND_OPENCL], n = strlen(note);
  if (n + 8 < size)
    snprintf(note + n, size - n, "%s%s: %s", n ? "; " : "", name, why);
}

/* A device's string property of any length, malloc'd ("" on failure). */
static char *dev_str_alloc(cl_device_id id, cl_device_info what) {
  size_t n = 0;
  char *s = NULL;
  if (cl.clGetDeviceInfo(id, what, 0, NULL, &n) == CL_SUCCESS && n &&
      (s = malloc(n + 1)) &&
      cl.clGetDeviceInfo(id, what, n, s, NULL) == CL_SUCCESS) {
    s[n] = 0;
    return s;
  }
  free(s);
  return calloc(1, 1);
}

/* OpenCL major * 10 + minor from "OpenCL 3.0 ..." (0 if unreadable). */
static int cl_version_of(const char *ver) {
  int maj = 0, min = 0;
  if (sscanf(ver, "OpenCL %d.%d", &maj, &min) != 2)
    return 0;
  return maj * 10 + min;
}

static xpj_status add_device_with(xpj_context *ctx, cl_platform_id p,
                                  const char *pname, cl_device_id id,
                                  const char *exts) {
  char name[256], ils[512] = "", ver[128];
  dev_str(id, CL_DEVICE_NAME, name, sizeof name);
  dev_str(id, CL_DEVICE_VERSION, ver, sizeof ver);
  if (!dev_str(id, CL_DEVICE_IL_VERSION, ils, sizeof ils) &&
      has_word(exts, "cl_khr_il_program"))
    dev_str(id, CL_DEVICE_IL_VERSION_KHR, ils, sizeof ils);
  int minor = spirv_minor_of(ils);
  if (minor < 0) {
    note_skip(ctx, name, "takes no SPIR-V (no IL version)");
    return XPJ_OK;
  }
  if (minor > 2)
    minor = 2; /* 1.2: what the compiler validates best (docs/abi.md) */
  xpj_device *d = calloc(1, sizeof *d);
  cl_dev *c = calloc(1, sizeof *c);
  if (!d || !c) {
    free(d);
    free(c);
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  c->platform = p;
  c->id = id;
  c->fp16 = has_word(exts, "cl_khr_fp16");
  bool core_il = cl_version_of(ver) >= 21; /* clCreateProgramWithIL: 2.1 */
  if (!(core_il && cl.clCreateProgramWithIL) &&
      !(c->il_khr = ext_fn(p, "clCreateProgramWithILKHR"))) {
    note_skip(ctx, name, "has no clCreateProgramWithIL");
    free(d);
    free(c);
    return XPJ_OK;
  }
  if (!setup_memory(c, exts)) {
    note_skip(ctx, name, "has neither unified shared memory nor SVM");
    free(d);
    free(c);
    return XPJ_OK;
  }
  cl_int e = CL_SUCCESS;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                   (cl_context_properties)p, 0};
  c->ctx = cl.clCreateContext(props, 1, &id, NULL, NULL, &e);
  if (!c->ctx) {
    char why[128];
    snprintf(why, sizeof why, "clCreateContext: %s", cl_err_name(e));
    note_skip(ctx, name, why);
    free(d);
    free(c);
    return XPJ_OK;
  }
  char err[256];
  char tstr[16];
  snprintf(tstr, sizeof tstr, "spirv:1.%d", minor);
  xpj_target_parse(tstr, &d->target, err, sizeof err);
  xpj_device_info *in = &d->info;
  snprintf(in->name, sizeof in->name, "%s", name);
  dev_str(id, CL_DEVICE_VENDOR, in->vendor, sizeof in->vendor);
  dev_str(id, CL_DRIVER_VERSION, in->driver_version,
          sizeof in->driver_version);
  in->backend = XPJ_BACKEND_OPENCL;
  cl_device_type ty = 0;
  cl.clGetDeviceInfo(id, CL_DEVICE_TYPE, sizeof ty, &ty, NULL);
  in->type = ty & CL_DEVICE_TYPE_GPU   ? XPJ_DEVICE_GPU
             : ty & CL_DEVICE_TYPE_CPU ? XPJ_DEVICE_CPU
                                       : XPJ_DEVICE_ACCELERATOR;
  in->compute_units = (unsigned)dev_u64(id, CL_DEVICE_MAX_COMPUTE_UNITS, 4);
  in->max_work_group_size =
      dev_u64(id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(size_t));
  size_t wis[64] = {1, 1, 1};
  cl_uint dims = (cl_uint)dev_u64(id, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, 4);
  if (dims < 3 || dims > 64)
    dims = dims > 64 ? 64 : 3;
  if (cl.clGetDeviceInfo(id, CL_DEVICE_MAX_WORK_ITEM_SIZES,
                         dims * sizeof *wis, wis, NULL) != CL_SUCCESS)
    wis[0] = wis[1] = wis[2] = 1;
  for (int i = 0; i < 3; i++) {
    in->max_work_item_sizes[i] = wis[i];
    in->max_global_size[i] = (uint64_t)1 << 62;
  }
  in->local_mem_size = dev_u64(id, CL_DEVICE_LOCAL_MEM_SIZE, 8);
  in->global_mem_size = dev_u64(id, CL_DEVICE_GLOBAL_MEM_SIZE, 8);
  uint64_t align_bits = dev_u64(id, CL_DEVICE_MEM_BASE_ADDR_ALIGN, 4);
  in->mem_base_align = align_bits >= 8 * 64 ? align_bits / 8 : 64;
  if (!c->usm && in->mem_base_align > 128)
    in->mem_base_align = 128; /* clSVMAlloc's limit: the largest type */
  xpj_target_str(&d->target, in->target, sizeof in->target);
  snprintf(d->native_id, sizeof d->native_id, "opencl:%.60s:%.80s:%.50s:%.50s", pname,
           name, ver, in->driver_version);
  d->ops = &rt_ocl_backend;
  d->impl = c;
  xpj_status st = rt_context_add_device(ctx, d);
  if (st != XPJ_OK) {
    cl.clReleaseContext(c->ctx);
    free(c);
    free(d);
  }
  return st;
}

static xpj_status add_device(xpj_context *ctx, cl_platform_id p,
                             const char *pname, cl_device_id id) {
  char *exts = dev_str_alloc(id, CL_DEVICE_EXTENSIONS);
  if (!exts)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  xpj_status st = add_device_with(ctx, p, pname, id, exts);
  free(exts);
  return st;
}

static xpj_status discover_locked(xpj_context *ctx);

static xpj_status ocl_discover(xpj_context *ctx) {
  char why[512];
  if (!cl_load(why, sizeof why)) {
    rt_context_absent(ctx, XPJ_BACKEND_OPENCL, "%s", why);
    return XPJ_OK;
  }
  pthread_mutex_lock(&cl_setup_mu);
  xpj_status st = discover_locked(ctx);
  pthread_mutex_unlock(&cl_setup_mu);
  return st;
}

static xpj_status discover_locked(xpj_context *ctx) {
  cl_uint np = 0;
  cl_int e = cl.clGetPlatformIDs(0, NULL, &np);
  if (e != CL_SUCCESS || np == 0) {
    rt_context_absent(ctx, XPJ_BACKEND_OPENCL, "no OpenCL platform (%s)",
                      e == CL_SUCCESS ? "none installed" : cl_err_name(e));
    return XPJ_OK;
  }
  cl_platform_id ps[16];
  if (np > 16)
    np = 16;
  if ((e = cl.clGetPlatformIDs(np, ps, &np)) != CL_SUCCESS) {
    rt_context_absent(ctx, XPJ_BACKEND_OPENCL, "clGetPlatformIDs: %s",
                      cl_err_name(e));
    return XPJ_OK;
  }
  if (np > 16)
    np = 16;
  unsigned before = ctx->nall;
  xpj_status st = XPJ_OK;
  for (cl_uint i = 0; i < np && st == XPJ_OK; i++) {
    char pname[128] = "";
    cl.clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof pname, pname, NULL);
    pname[sizeof pname - 1] = 0;
    cl_uint nd = 0;
    if (cl.clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) !=
            CL_SUCCESS ||
        nd == 0)
      continue;
    cl_device_id ds[64];
    if (nd > 64)
      nd = 64;
    if (cl.clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, nd, ds, &nd) !=
        CL_SUCCESS)
      continue;
    if (nd > 64)
      nd = 64;
    for (cl_uint j = 0; j < nd && st == XPJ_OK; j++)
      st = add_device(ctx, ps[i], pname, ds[j]);
  }
  if (ctx->nall > before) /* devices found: nothing to explain */
    ctx->absent[XPJ_BACKEND_OPENCL][0] = 0;
  else if (!ctx->absent[XPJ_BACKEND_OPENCL][0])
    rt_context_absent(ctx, XPJ_BACKEND_OPENCL,
                      "no OpenCL devices on %u platform%s", np,
                      np == 1 ? "" : "s");
  return st;
}

static void ocl_device_destroy(xpj_device *d) {
  cl_dev *c = cd_of(d);
  if (!c)
    return;
  pthread_mutex_lock(&cl_setup_mu);
  cl.clReleaseContext(c->ctx);
  pthread_mutex_unlock(&cl_setup_mu);
  free(c);
  d->impl = NULL;
}

static xpj_status ocl_native_handle(const xpj_device *d, xpj_native_kind what,
                                    void **out) {
  const cl_dev *c = cd_of(d);
  *out = what == XPJ_NATIVE_DEVICE    ? (void *)c->id
         : what == XPJ_NATIVE_CONTEXT ? (void *)c->ctx
                                      : (void *)c->platform;
  return XPJ_OK;
}

/* ---- memory -------------------------------------------------------------- */

static xpj_status ocl_mem_alloc(xpj_device *d, xpj_mem_kind kind,
                                size_t bytes, size_t align, void **out) {
  cl_dev *c = cd_of(d);
  cl_int e = CL_SUCCESS;
  void *p = NULL;
  if (c->usm) {
    cl_uint a = (cl_uint)align;
    p = kind == XPJ_MEM_DEVICE ? c->device_alloc(c->ctx, c->id, NULL, bytes,
                                                 a, &e)
        : kind == XPJ_MEM_HOST ? c->host_alloc(c->ctx, NULL, bytes, a, &e)
                               : c->shared_alloc(c->ctx, c->id, NULL, bytes,
                                                 a, &e);
  } else {
    if (kind != XPJ_MEM_DEVICE && !c->svm_fine)
      return rt_err(XPJ_ERR_UNSUPPORTED,
                    "%s (%s) has only coarse-grained SVM: host and shared "
                    "memory are not available; use device memory and copies",
                    d->id, d->info.name);
    if (align > 128)
      return rt_err(XPJ_ERR_UNSUPPORTED,
                    "%s (%s): SVM allocations align to at most 128 bytes, "
                    "%zu asked", d->id, d->info.name, align);
    cl_svm_mem_flags f = CL_MEM_READ_WRITE;
    if (kind != XPJ_MEM_DEVICE)
      f |= CL_MEM_SVM_FINE_GRAIN_BUFFER;
    p = cl.clSVMAlloc(c->ctx, f, bytes, (cl_uint)align);
    if (!p)
      return rt_err(XPJ_ERR_NOMEM, "clSVMAlloc of %zu bytes on %s (%s) "
                    "failed", bytes, d->id, d->info.name);
  }
  if (!p) {
    char what[96];
    snprintf(what, sizeof what, "allocating %zu bytes", bytes);
    return cl_fail(XPJ_ERR_NOMEM, e, what, d);
  }
  *out = p;
  return XPJ_OK;
}

static void ocl_mem_free(xpj_device *d, xpj_mem_kind kind, void *p) {
  (void)kind;
  cl_dev *c = cd_of(d);
  if (c->usm)
    c->mem_free(c->ctx, p);
  else
    cl.clSVMFree(c->ctx, p);
}

/* ---- programs -------------------------------------------------------------- */

typedef struct cl_kern {
  cl_program prog;
  cl_kernel k;
  pthread_mutex_t mu; /* arguments are the kernel object's state */
} cl_kern;

static xpj_status build(xpj_device *d, cl_program prog, const char *what) {
  cl_dev *c = cd_of(d);
  cl_int e = cl.clBuildProgram(prog, 1, &c->id, "", NULL, NULL);
  if (e == CL_SUCCESS)
    return XPJ_OK;
  size_t n = 0;
  char *log = NULL;
  if (cl.clGetProgramBuildInfo(prog, c->id, CL_PROGRAM_BUILD_LOG, 0, NULL,
                               &n) == CL_SUCCESS &&
      n && (log = malloc(n + 1))) {
    if (cl.clGetProgramBuildInfo(prog, c->id, CL_PROGRAM_BUILD_LOG, n, log,
                                 NULL) != CL_SUCCESS)
      n = 0;
    log[n] = 0;
    while (n && (log[n - 1] == '\n' || log[n - 1] == 0 || log[n - 1] == ' '))
      log[--n] = 0;
  }
  xpj_status st = rt_err(XPJ_ERR_COMPILE,
                         "%s on %s (%s): clBuildProgram: %s (%d)%s%s", what,
                         d->id, d->info.name, cl_err_name(e), (int)e,
                         log && *log ? "; build log:\n" : " (no build log)",
                         log ? log : "");
  free(log);
  return st;
}

static xpj_status make_kernel(xpj_device *d, cl_program prog,
                              const char *entry, void **native) {
  cl_int e = CL_SUCCESS;
  cl_kernel k = cl.clCreateKernel(prog, entry, &e);
  if (!k) {
    xpj_status st = rt_err(XPJ_ERR_COMPILE,
                           "clCreateKernel(%s) on %s: %s (%d)", entry, d->id,
                           cl_err_name(e), (int)e);
    cl.clReleaseProgram(prog);
    return st;
  }
  cl_kern *ck = calloc(1, sizeof *ck);
  if (!ck) {
    cl.clReleaseKernel(k);
    cl.clReleaseProgram(prog);
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  ck->prog = prog;
  ck->k = k;
  pthread_mutex_init(&ck->mu, NULL);
  *native = ck;
  return XPJ_OK;
}

static xpj_status ocl_kernel_load(xpj_device *d, const uint8_t *bin,
                                  size_t len, const char *entry,
                                  void **native) {
  cl_dev *c = cd_of(d);
  char why[160];
  if (!rt_spirv_sane(bin, len, d->target.spirv_minor, why, sizeof why))
    return rt_err(XPJ_ERR_COMPILE, "loading %s on %s: %s", entry, d->id, why);
  if (!c->fp16 && xpj_spirv_has_capability(bin, len, XPJ_SPV_CAP_FLOAT16))
    return rt_err(XPJ_ERR_UNSUPPORTED, "loading %s on %s (%s): the kernel "
                  "uses f16 (SPIR-V Float16) and the device lacks "
                  "cl_khr_fp16", entry, d->id, d->info.name);
  cl_int e = CL_SUCCESS;
  cl_program prog = c->il_khr ? c->il_khr(c->ctx, bin, len, &e)
                              : cl.clCreateProgramWithIL(c->ctx, bin, len, &e);
  if (!prog)
    return cl_fail(XPJ_ERR_COMPILE, e, "clCreateProgramWithIL", d);
  xpj_status st = build(d, prog, "building SPIR-V");
  if (st != XPJ_OK) {
    cl.clReleaseProgram(prog);
    return st;
  }
  return make_kernel(d, prog, entry, native);
}

static xpj_status ocl_native_load(xpj_device *d, const uint8_t *bin,
                                  size_t len, const char *entry,
                                  void **native) {
  cl_dev *c = cd_of(d);
  cl_int e = CL_SUCCESS, be = CL_SUCCESS;
  cl_program prog = cl.clCreateProgramWithBinary(c->ctx, 1, &c->id, &len,
                                                 &bin, &be, &e);
  if (!prog)
    return cl_fail(XPJ_ERR_DEVICE, e, "clCreateProgramWithBinary", d);
  xpj_status st = build(d, prog, "loading a cached program binary");
  if (st != XPJ_OK) {
    cl.clReleaseProgram(prog);
    return st;
  }
  return make_kernel(d, prog, entry, native);
}

static xpj_status ocl_native_get(xpj_device *d, void *native, uint8_t **bin,
                                 size_t *len) {
  cl_kern *ck = native;
  size_t n = 0;
  cl_int e = cl.clGetProgramInfo(ck->prog, CL_PROGRAM_BINARY_SIZES, sizeof n,
                                 &n, NULL);
  if (e != CL_SUCCESS)
    return cl_fail(XPJ_ERR_UNSUPPORTED, e, "clGetProgramInfo(BINARY_SIZES)",
                   d);
  if (n == 0)
    return rt_err(XPJ_ERR_UNSUPPORTED, "%s (%s) gives no program binary",
                  d->id, d->info.name);
  uint8_t *b = malloc(n);
  if (!b)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  e = cl.clGetProgramInfo(ck->prog, CL_PROGRAM_BINARIES, sizeof b, &b, NULL);
  if (e != CL_SUCCESS) {
    free(b);
    return cl_fail(XPJ_ERR_UNSUPPORTED, e, "clGetProgramInfo(BINARIES)", d);
  }
  *bin = b;
  *len = n;
  return XPJ_OK;
}

static void ocl_kernel_unload(xpj_device *d, void *native) {
  (void)d;
  cl_kern *ck = native;
  if (!ck)
    return;
  cl.clReleaseKernel(ck->k);
  cl.clReleaseProgram(ck->prog);
  pthread_mutex_destroy(&ck->mu);
  free(ck);
}

/* ---- queues and commands ----------------------------------------------------- */

static xpj_status ocl_queue_init(xpj_device *d, void **bq) {
  cl_dev *c = cd_of(d);
  cl_int e = CL_SUCCESS;
  cl_command_queue q = cl.clCreateCommandQueue(c->ctx, c->id, 0, &e);
  if (!q)
    return cl_fail(XPJ_ERR_DEVICE, e, "clCreateCommandQueue", d);
  *bq = q;
  return XPJ_OK;
}

static void ocl_queue_fini(xpj_device *d, void *bq) {
  (void)d;
  if (bq) {
    cl.clFinish(bq);
    cl.clReleaseCommandQueue(bq);
  }
}

static xpj_status ocl_copy(xpj_device *d, void *bq, void *dst,
                           const void *src, size_t bytes) {
  cl_dev *c = cd_of(d);
  cl_int e = c->usm ? c->memcpy_(bq, CL_FALSE, dst, src, bytes, 0, NULL, NULL)
                    : cl.clEnqueueSVMMemcpy(bq, CL_FALSE, dst, src, bytes, 0,
                                            NULL, NULL);
  return e == CL_SUCCESS ? XPJ_OK : cl_fail(XPJ_ERR_DEVICE, e, "copy", d);
}

/* xpj_enqueue_fill has checked: a power-of-two pattern of at most 128
 * bytes, bytes a multiple of it, dst aligned to it (OpenCL's rules too). */
static xpj_status ocl_fill(xpj_device *d, void *bq, void *dst,
                           const void *pattern, size_t psize, size_t bytes) {
  cl_dev *c = cd_of(d);
  cl_int e = c->usm ? c->memfill(bq, dst, pattern, psize, bytes, 0, NULL, NULL)
                    : cl.clEnqueueSVMMemFill(bq, dst, pattern, psize, bytes, 0,
                                             NULL, NULL);
  return e == CL_SUCCESS ? XPJ_OK : cl_fail(XPJ_ERR_DEVICE, e, "fill", d);
}

static xpj_status ocl_launch(xpj_device *d, void *bq, const rt_launch *l) {
  cl_dev *c = cd_of(d);
  cl_kern *ck = l->native;
  cl_int e = CL_SUCCESS;
  unsigned n = l->nabi + l->nhidden, bad = 0;
  pthread_mutex_lock(&ck->mu);
  for (unsigned i = 0; i < n && e == CL_SUCCESS; i++) {
    bad = i;
    if (l->abi[i].local) {
      e = cl.clSetKernelArg(ck->k, i, l->abi[i].local, NULL);
    } else if (l->abi[i].ptr) {
      void *p;
      memcpy(&p, l->args[i], sizeof p);
      e = c->usm ? c->set_arg_ptr(ck->k, i, p)
                 : cl.clSetKernelArgSVMPointer(ck->k, i, p);
    } else {
      e = cl.clSetKernelArg(ck->k, i, l->abi[i].size, l->args[i]);
    }
  }
  if (e != CL_SUCCESS) {
    pthread_mutex_unlock(&ck->mu);
    char what[64];
    snprintf(what, sizeof what, "setting kernel argument %u", bad);
    return cl_fail(XPJ_ERR_DEVICE, e, what, d);
  }
  size_t global[3], local[3];
  for (unsigned i = 0; i < l->ndim; i++) {
    /* range kernels: the logical size, the driver picks the group (the
     * hidden sizes make any rounding safe); nd-range: whole groups */
    global[i] = l->kind == XPJ_FUNC_NDRANGE
                    ? (size_t)(l->groups[i] * l->local[i])
                    : (size_t)l->global[i];
    local[i] = (size_t)l->local[i];
  }
  e = cl.clEnqueueNDRangeKernel(bq, ck->k, l->ndim, NULL, global,
                                l->kind == XPJ_FUNC_NDRANGE ? local : NULL, 0,
                                NULL, NULL);
  pthread_mutex_unlock(&ck->mu);
  return e == CL_SUCCESS ? XPJ_OK
                         : cl_fail(XPJ_ERR_DEVICE, e, "clEnqueueNDRangeKernel",
                                   d);
}

static xpj_status ocl_sync(xpj_device *d, void *bq) {
  cl_int e = cl.clFinish(bq);
  return e == CL_SUCCESS ? XPJ_OK : cl_fail(XPJ_ERR_DEVICE, e, "clFinish", d);
}

/* Another library's cl_command_queue (xpj_device_wait_native). */
static xpj_status ocl_wait_native(xpj_device *d, uintptr_t queue) {
  if (!queue)
    return rt_err(XPJ_ERR_INVALID,
                  "xpj_device_wait_native on %s: OpenCL needs the "
                  "cl_command_queue to wait for (0 given)", d->id);
  cl_int e = cl.clFinish((cl_command_queue)queue);
  return e == CL_SUCCESS ? XPJ_OK
                         : cl_fail(XPJ_ERR_DEVICE, e,
                                   "xpj_device_wait_native: clFinish", d);
}

const rt_backend_ops rt_ocl_backend = {
    .id = XPJ_BACKEND_OPENCL,
    .discover = ocl_discover,
    .device_destroy = ocl_device_destroy,
    .mem_alloc = ocl_mem_alloc,
    .mem_free = ocl_mem_free,
    .kernel_load = ocl_kernel_load,
    .kernel_unload = ocl_kernel_unload,
    .queue_init = ocl_queue_init,
    .queue_fini = ocl_queue_fini,
    .copy = ocl_copy,
    .fill = ocl_fill,
    .launch = ocl_launch,
    .sync = ocl_sync,
    .native_get = ocl_native_get,
    .native_load = ocl_native_load,
    .wait_native = ocl_wait_native,
    .native_handle = ocl_native_handle,
};
