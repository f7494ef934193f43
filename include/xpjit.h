/*
 * xpjit.h - the libxpjit runtime: devices, queues, events, memory, programs,
 * kernels and launches.
 *
 *   xpj_context *ctx;  xpj_context_create(NULL, &ctx);
 *   xpj_device  *dev;  xpj_device_select(ctx, NULL, &dev);   // XPJIT_DEVICE or cpu
 *   xpj_queue   *q;    xpj_queue_create(dev, NULL, &q);
 *   xpj_program *p;    xpj_program_create_file(ctx, "axpy.xpk", NULL, &p);
 *   xpj_kernel  *k;    xpj_program_get_kernel(p, "axpy", "T=f32", 1, dev, NULL, &k);
 *   float *x, *y;      xpj_mem_alloc(dev, XPJ_MEM_SHARED, n * 4, 0, (void **)&x); ...
 *   xpj_array ax = xpj_array_1d(x, XPJ_F32, n), ay = xpj_array_1d(y, XPJ_F32, n);
 *   xpj_arg args[] = {xpj_arg_f32(2.0f), xpj_arg_array(&ax), xpj_arg_array(&ay)};
 *   xpj_range r = xpj_range_1d(n, 0);
 *   xpj_launch(q, k, &r, 3, args, NULL);
 *   xpj_queue_wait(q);
 *
 * Errors: every fallible call returns an xpj_status; xpj_last_error() gives
 * the message of the last failed call on the calling thread ("" after
 * success is not guaranteed: read it only after a failure). Errors that
 * happen inside asynchronous work (a launch, a copy, a host task) are
 * recorded on the command's event and on the queue, and are returned, with
 * their message, by the next xpj_queue_wait on that queue (or xpj_event_wait
 * on that event).
 *
 * Ownership: the creator destroys. xpj_*_destroy(NULL) and
 * xpj_event_release(NULL) are no-ops. Devices belong to their context;
 * kernels belong to their program (valid until it is destroyed). Memory from
 * xpj_mem_alloc is freed with xpj_mem_free. Nothing is freed under work in
 * flight: memory freed while queued or running commands use it goes back
 * when the last of them finishes, and a context destroyed while its queues
 * or programs live is torn down after the last of them is destroyed (its
 * devices stay usable until then). Strings passed in are copied.
 *
 * Thread safety: every call may be made from any thread. A context, a
 * device, a program and a kernel may be used from several threads at once;
 * several threads may enqueue to one queue (each call is one atomic
 * enqueue; the order between threads is the order the calls happen).
 *
 * Caching: a kernel is compiled at most once. Lookups go through the
 * program's own kernels, the context's first level (loaded kernels, in
 * memory), the user's second-level cache on disk (xpjit_cache.h), then
 * any loaded bundles, and only then the compiler; what is compiled is
 * stored in the second level. See docs/cache.md.
 *
 * Nothing in the library exits or prints to stdout. Warnings (a degraded
 * cache, an ignored bundle) go to stderr as "xpjit: warning: ...", or to
 * the handler set with xpj_set_warning_handler.
 */
#ifndef XPJIT_H
#define XPJIT_H

#include "xpjit_cache.h"
#include "xpjit_codegen.h"
#include "xpjit_compiler.h"
#include "xpjit_ir.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Message of the last failed call on this thread; never NULL. Valid until
 * the next xpjit call on this thread. Control characters but newline and
 * tab are written \xNN. */
const char *xpj_last_error(void);

/* Where warnings go (process-wide); fn NULL restores stderr. The handler
 * is called on the thread that warns, without the library's locks held (it
 * may warn, use the library or set a handler), possibly on several threads
 * at once. This call returns once no thread is inside the old handler or
 * about to call it, so the old ud may then be freed; it waits for calls in
 * flight on other threads. Called from inside a handler it does not wait
 * (it would wait for itself): the old ud must then stay valid until the
 * handler calls in flight return, e.g. until a later
 * xpj_set_warning_handler made outside any handler returns. */
void xpj_set_warning_handler(void (*fn)(void *ud, const char *msg),
                             void *ud);

/* ---- contexts -------------------------------------------------------- */

typedef struct xpj_context xpj_context;
typedef struct xpj_device xpj_device;
typedef struct xpj_queue xpj_queue;
typedef struct xpj_event xpj_event;
typedef struct xpj_program xpj_program;
typedef struct xpj_kernel xpj_kernel;

/* Context creation options; a zeroed struct (or NULL) means defaults. */
typedef struct xpj_context_desc {
  /* Device filter that limits what the context sees, in the syntax of
   * xpj_device_select. NULL: the XPJIT_DEVICE environment variable if set,
   * else every device. Backends no term can match are not even loaded
   * ("cpu": no GPU driver is opened). */
  const char *visible;
  /* Threads of the CPU device's pool, at most 1024 (more is taken as
   * 1024); 0: XPJIT_CPU_THREADS if set, else one per online core. */
  unsigned cpu_threads;
  /* The second-level cache: mode (DEFAULT: XPJIT_CACHE, else rw), the
   * database file (NULL: XPJIT_CACHE_DIR or the default location) and the
   * size limit (0: XPJIT_CACHE_MAX_SIZE, else 1 GiB). */
  xpj_cache_mode cache_mode;
  const char *cache_path;
  uint64_t cache_max_size;
  /* Non-zero: do not load the bundles named by XPJIT_BUNDLE_PATH. */
  int no_env_bundles;
  /* Kernels missing from every cache are asked of the compile daemon
   * xpjitd when XPJIT_DAEMON (auto, the default; off; or a socket path)
   * allows and one runs; any failure of it means a compile here instead
   * (docs/daemon.md). */
  /* XPJ_CHECK_* compiled into every kernel of the context, with those
   * XPJIT_CHECK names ("bounds"): a checked launch that indexes outside
   * an array fails with XPJ_ERR_BOUNDS, naming the kernel, the array, the
   * index, its extent and the source line (docs/api.md, Checks). Checked
   * kernels are cached apart from unchecked ones. */
  unsigned checks;
  /* The cluster tier: compiled kernels shared through one Redis by every
   * node of a cluster, looked up after the local tiers and before a
   * compile: "redis://[user:password@]host[:port][/db]" or "unix:/path"
   * (docs/cache.md, "The Redis tier"). NULL: XPJIT_REDIS if set; "off" or
   * "": none. */
  const char *redis;
  /* The compile daemon xpjitd: "auto" (its default socket, used when a
   * daemon listens there), a socket path, or "off" / "" (none). NULL:
   * XPJIT_DAEMON if set, else auto (docs/daemon.md). Fields are only
   * appended; bindings check the layout with
   * xpj_struct_size("xpj_context_desc"). */
  const char *daemon;
} xpj_context_desc;

/* Discovers the devices of every backend built in (a backend whose driver
 * is missing contributes no devices and no error). XPJ_ERR_INVALID for a
 * malformed filter. */
xpj_status xpj_context_create(const xpj_context_desc *desc, xpj_context **out);
/* Releases the application's hold on the context: it is torn down now, or
 * after its last queue and program are destroyed. Memory still allocated
 * then is freed with its device. */
void xpj_context_destroy(xpj_context *ctx);

/* Loads a bundle of precompiled kernels (xpjit-cli bundle build), read-only;
 * lookups try it after the second-level cache and before compiling. A
 * bundle built by another xpjit, LLVM or ABI version, or with no kernels
 * for any device of the context, is not used: XPJ_ERR_UNSUPPORTED with a
 * message that says why; so is a path the trust check refuses (a
 * directory, a device, a symbolic link, another user's file, one others
 * may write: docs/security.md). XPJ_ERR_IO / XPJ_ERR_INVALID for a file
 * that is missing or not a bundle. XPJIT_BUNDLE_PATH (files or directories of
 * *.xpb, ':'-separated) is loaded at context creation the same way, with
 * warnings instead of errors. */
xpj_status xpj_context_add_bundle(xpj_context *ctx, const char *path);
/* The versions that cache keys and bundles carry:
 * "xpjit=0.1.0;llvm=22.1.8;abi=6;codegen=5". Returns the length like
 * snprintf; buf NULL: only the length, whatever size is. */
size_t xpj_versions_str(char *buf, size_t size);
/* This context's cache events since it was created: first-level, second-
 * level and bundle hits, misses, compiles and their time. The second
 * level's persistent totals (all processes) are read with
 * xpj_cache_get_stats on xpj_context_cache. */
xpj_status xpj_context_cache_counters(xpj_context *ctx,
                                      xpj_cache_counters *out);
/* The context's second-level cache (opened on first use; owned by the
 * context; NULL only when out of memory). */
xpj_cache *xpj_context_cache(xpj_context *ctx);

/* ---- devices --------------------------------------------------------- */

typedef enum xpj_backend {
  XPJ_BACKEND_CPU = 0,        /* this host's CPU, native code (ORC) */
  XPJ_BACKEND_CUDA = 1,       /* NVIDIA GPUs through libcuda (PTX) */
  XPJ_BACKEND_LEVEL_ZERO = 2, /* oneAPI Level Zero devices (SPIR-V) */
  XPJ_BACKEND_OPENCL = 3,     /* OpenCL devices that take SPIR-V */
  XPJ_BACKEND_COUNT
} xpj_backend;

typedef enum xpj_device_type {
  XPJ_DEVICE_CPU = 0,
  XPJ_DEVICE_GPU = 1,
  XPJ_DEVICE_ACCELERATOR = 2,
} xpj_device_type;

/* "cpu", "cuda", "level_zero", "opencl" */
const char *xpj_backend_name(xpj_backend b);

typedef struct xpj_device_info {
  char name[256];
  char vendor[128];
  char driver_version[64];
  xpj_backend backend;
  xpj_device_type type;
  unsigned index;              /* among the devices of its backend */
  unsigned compute_units;      /* cores / SMs / EUs */
  uint64_t max_work_group_size;
  uint64_t max_work_item_sizes[3];
  uint64_t max_global_size[3]; /* per dimension */
  uint64_t local_mem_size;     /* bytes of local memory per work-group */
  uint64_t global_mem_size;    /* bytes */
  uint64_t mem_base_align;     /* alignment of xpj_mem_alloc by default */
  /* The canonical compile target of this device (xpj_target_str): exact
   * architecture and features. Part of every cache key. */
  char target[1200];
} xpj_device_info;

/* Device filters, after ONEAPI_DEVICE_SELECTOR: one or more terms separated
 * by ';', each BACKEND[:DEVICES] where BACKEND is cpu (alias native_cpu),
 * cuda, level_zero, opencl or *, and DEVICES a ','-separated list of
 * indices (within the backend), device types (cpu, gpu, fpga/acc) or *.
 * A term starting with '!' removes matching devices. A lone device type
 * ("gpu") means *:gpu. Examples: "cpu", "cuda:0", "level_zero:gpu",
 * "opencl:cpu", "*:gpu;!cuda:1".
 *
 * Selects the first matching device of the context, in the order
 * xpj_device_get lists them (the CPU device first). filter NULL or "":
 * the first visible device. XPJ_ERR_NOT_FOUND when none matches (the
 * message lists the devices there are); XPJ_ERR_INVALID for a malformed
 * filter. */
xpj_status xpj_device_select(xpj_context *ctx, const char *filter,
                             xpj_device **out);
/* Devices visible in the context, and device i of them (NULL past the
 * end). */
unsigned xpj_device_count(const xpj_context *ctx);
xpj_device *xpj_device_get(const xpj_context *ctx, unsigned i);
/* Every device matching filter, in order: fills out[0..max) and sets *n to
 * the number of matches (pass max 0 to learn it). */
xpj_status xpj_device_list(xpj_context *ctx, const char *filter,
                           xpj_device **out, unsigned max, unsigned *n);
xpj_status xpj_device_get_info(const xpj_device *dev, xpj_device_info *out);
/* "cpu:0", "cuda:1", ...: the string that selects exactly this device. */
const char *xpj_device_id(const xpj_device *dev);
/* Why backend b found no devices in ctx ("libcuda.so.1: cannot open shared
 * object file", "no Level Zero driver"), or "" when it found some or has
 * nothing to say. Owned by ctx. A missing driver is never an error: it
 * only shows here and in the message of a filter that matches nothing. */
const char *xpj_context_backend_note(const xpj_context *ctx, xpj_backend b);

/* The driver's own handles behind a device, for working with other
 * libraries on the same device (dpctl, PyOpenCL, CuPy): which device a
 * pointer of theirs belongs to, whether it is of this context.
 *   XPJ_NATIVE_DEVICE    OpenCL cl_device_id; CUDA CUdevice (the ordinal,
 *                        an int, in the pointer's bits); Level Zero
 *                        ze_device_handle_t
 *   XPJ_NATIVE_CONTEXT   OpenCL cl_context (the device's own: every
 *                        allocation of the device is in it); CUDA the
 *                        device's primary CUcontext; Level Zero the
 *                        driver's ze_context_handle_t
 *   XPJ_NATIVE_PLATFORM  OpenCL cl_platform_id; Level Zero
 *                        ze_driver_handle_t (CUDA has none)
 * The handle is the device's, not retained for the caller: valid while
 * the device's context lives; retain it (clRetainContext, ...) to keep it
 * longer, never release it otherwise. XPJ_ERR_UNSUPPORTED for the CPU
 * device (no driver) and a kind the backend has not; XPJ_ERR_INVALID for
 * NULL arguments or an unknown kind. */
typedef enum xpj_native_kind {
  XPJ_NATIVE_DEVICE = 0,
  XPJ_NATIVE_CONTEXT = 1,
  XPJ_NATIVE_PLATFORM = 2,
} xpj_native_kind;
xpj_status xpj_device_native(const xpj_device *dev, xpj_native_kind what,
                             void **out);

/* ---- memory ---------------------------------------------------------- */

typedef enum xpj_mem_kind {
  XPJ_MEM_DEVICE = 0, /* device memory: only kernels and copies touch it */
  XPJ_MEM_HOST = 1,   /* host memory the device can read and write */
  XPJ_MEM_SHARED = 2, /* migrates between host and device on demand */
} xpj_mem_kind;

/* Allocates bytes (> 0) aligned to align (a power of two; 0: the device's
 * mem_base_align, at least 64). XPJ_ERR_INVALID for a zero size, a size
 * over the device's memory or a bad alignment; XPJ_ERR_NOMEM when the
 * device is out of memory. The memory is uninitialised. */
xpj_status xpj_mem_alloc(xpj_device *dev, xpj_mem_kind kind, size_t bytes,
                         size_t align, void **out);
/* Frees memory from xpj_mem_alloc on dev (memory from xpj_mem_import is
 * let go, not freed). Commands still using it keep it until they finish.
 * NULL is a no-op; a pointer that is not the start of an allocation of dev
 * is XPJ_ERR_INVALID and nothing is freed. */
xpj_status xpj_mem_free(xpj_device *dev, void *ptr);
/* Registers memory something else allocated (another library's device,
 * host or USM memory: CuPy, dpctl, a driver call; or plain host memory)
 * as an allocation of dev: bytes at ptr, of kind. Launches, copies and
 * fills then take it with the same checks as xpjit's own allocations (a
 * view must lie inside it). No ownership is taken: xpj_mem_free(dev, ptr)
 * lets it go again (after the commands that use it) and never frees it;
 * the owner keeps the memory alive until then. Nothing checks that the
 * memory is dev's: memory of another device or context is the caller's
 * error, as with a pointer given to the driver itself.
 * XPJ_ERR_INVALID for a NULL pointer, a zero size, an unknown kind, a
 * range past the end of the address space, or one that overlaps an
 * allocation of dev (imported or not). */
xpj_status xpj_mem_import(xpj_device *dev, void *ptr, size_t bytes,
                          xpj_mem_kind kind);
/* Waits, on the calling thread, until the work another library queued on
 * dev is done: call it before xpjit's commands read memory that library
 * wrote (xpj_mem_import), as the producer's stream has no order with
 * xpjit's queues. queue is that library's native queue:
 *   CUDA    a CUstream of dev's primary context (1 and 2: the legacy and
 *           the per-thread default stream, as __cuda_array_interface__
 *           writes them); 0: all the work of the primary context
 *   OpenCL  a cl_command_queue of dev's device (clFinish); 0 is refused
 *   CPU     nothing to wait for: XPJ_OK at once
 * Level Zero: XPJ_ERR_UNSUPPORTED. The handle must be a live one: a
 * driver cannot tell a stale or made-up handle, any more than when the
 * other library uses it. XPJ_ERR_DEVICE when the driver reports an error
 * of that work (an illegal address). */
xpj_status xpj_device_wait_native(xpj_device *dev, uintptr_t queue);
/* Looks up the allocation containing ptr: its start, size and kind.
 * XPJ_ERR_NOT_FOUND when ptr is in none of dev's allocations. */
xpj_status xpj_mem_query(xpj_device *dev, const void *ptr, void **base,
                         size_t *bytes, xpj_mem_kind *kind);

/* ---- queues and events ----------------------------------------------- */

#define XPJ_QUEUE_PROFILING 1u /* record timestamps on every event */

typedef struct xpj_queue_desc {
  unsigned flags; /* XPJ_QUEUE_* */
  /* A launch that runs longer than this is stopped and fails with
   * XPJ_ERR_CANCELLED (0: no limit), so that a kernel that never ends
   * cannot hang the queue or xpj_queue_destroy. Only devices that can stop
   * a running kernel take it (the CPU); others refuse a non-zero value
   * with XPJ_ERR_UNSUPPORTED. */
  uint64_t launch_timeout_ms;
} xpj_queue_desc;

/* An in-order queue: commands run one after the other, asynchronously to
 * the caller. desc NULL: defaults. */
xpj_status xpj_queue_create(xpj_device *dev, const xpj_queue_desc *desc,
                            xpj_queue **out);
/* Waits for every command, then destroys the queue (errors not yet
 * returned by a wait are dropped). Memory, programs and the context may be
 * released before the commands that use them finish: each is let go when
 * the last command using it is done. Called from a command of q (a host
 * task), it would wait for itself: it warns (xpj_set_warning_handler, else
 * stderr) and does nothing. */
void xpj_queue_destroy(xpj_queue *q);
/* Cancels the queue's unfinished commands, from any thread, and returns
 * at once: commands not yet started fail with XPJ_ERR_CANCELLED; a
 * running launch is stopped where the device can (the CPU: its output is
 * then partly written) and left to finish elsewhere; a running copy, fill
 * or host task finishes. xpj_queue_wait reports the cancellation. Commands
 * enqueued afterwards run normally. The events of cancelled commands fail
 * at once, but each command keeps the memory it would have used until its
 * turn in the queue has passed: after xpj_queue_wait (not after its
 * event's wait) xpj_mem_free frees at once. */
xpj_status xpj_queue_cancel(xpj_queue *q);
/* Waits until every command enqueued so far has finished. Returns the first
 * asynchronous error since the last wait (its message in xpj_last_error),
 * and clears it; XPJ_OK when there was none. From a command of q itself
 * (a host task): XPJ_ERR_INVALID, as it would wait for itself. */
xpj_status xpj_queue_wait(xpj_queue *q);
xpj_device *xpj_queue_device(const xpj_queue *q);

typedef enum xpj_event_state {
  XPJ_EVENT_QUEUED = 0,
  XPJ_EVENT_RUNNING = 1,
  XPJ_EVENT_COMPLETE = 2,
  XPJ_EVENT_FAILED = 3,
} xpj_event_state;

/* Every enqueue call takes an optional xpj_event **ev: when not NULL it
 * receives a new event for the command, which the caller releases. */
void xpj_event_release(xpj_event *e);
/* Blocks until the command has finished; returns its status (message in
 * xpj_last_error). From a command of the same queue that comes before e's
 * (or is e's), XPJ_ERR_INVALID: it would wait for itself. */
xpj_status xpj_event_wait(xpj_event *e);
xpj_event_state xpj_event_query(const xpj_event *e);
/* Nanoseconds on a monotonic clock at which the command was enqueued,
 * started and ended. XPJ_ERR_INVALID unless the queue has
 * XPJ_QUEUE_PROFILING and the command has finished. */
xpj_status xpj_event_profile(const xpj_event *e, uint64_t *queued,
                             uint64_t *start, uint64_t *end);

/* Copies bytes from src to dst; either may be device, host, shared or
 * (CPU device, or host side of a copy) plain host memory. The ranges must
 * not overlap; a range must lie within one allocation, or (plain host
 * memory) enter none: XPJ_ERR_INVALID otherwise. */
xpj_status xpj_enqueue_copy(xpj_queue *q, void *dst, const void *src,
                            size_t bytes, xpj_event **ev);
/* Fills bytes at dst with a repeated pattern of pattern_size bytes (1, 2,
 * 4, 8, 16, 32, 64 or 128; bytes a multiple of it; dst aligned to it). */
xpj_status xpj_enqueue_fill(xpj_queue *q, void *dst, const void *pattern,
                            size_t pattern_size, size_t bytes,
                            xpj_event **ev);
/* Makes the queue's later commands wait for n events (of any queue of the
 * same context). A failed event fails this command. */
xpj_status xpj_enqueue_wait_events(xpj_queue *q, unsigned n,
                                   xpj_event *const *events, xpj_event **ev);
/* Runs fn(user) in queue order on the queue's thread or, on the CPU
 * device, on a thread blocked in xpj_queue_wait (docs/api.md, "Who runs a
 * command"). A non-zero return is an asynchronous error of the queue
 * ("host task failed with N"). */
xpj_status xpj_enqueue_host_task(xpj_queue *q, int (*fn)(void *user),
                                 void *user, xpj_event **ev);

/* ---- programs and kernels -------------------------------------------- */

/* A program: kernel source, parsed once. name is used in diagnostics.
 * Syntax errors are XPJ_ERR_SYNTAX; the rendered diagnostics are in
 * xpj_last_error, and in d when given. */
xpj_status xpj_program_create(xpj_context *ctx, const char *name,
                              const char *src, size_t len, xpj_diags *d,
                              xpj_program **out);
/* Reads and parses a file (XPJ_ERR_IO when unreadable). */
xpj_status xpj_program_create_file(xpj_context *ctx, const char *path,
                                   xpj_diags *d, xpj_program **out);
/* Destroys the program and its kernels (NULL: nothing). Launches of them
 * queued or running are not disturbed: the loaded code belongs to the
 * context, and they finish (docs/api.md). */
void xpj_program_destroy(xpj_program *p);
/* The program's parsed module (owned by the program), for reading its
 * kernels' type parameters and signatures. */
const xpj_module *xpj_program_module(const xpj_program *p);
/* Names of the kernels in the program: count and name i. */
unsigned xpj_program_kernel_count(const xpj_program *p);
const char *xpj_program_kernel_name(const xpj_program *p, unsigned i);

/* The kernel `name` specialised for dtypes and ndim and compiled for dev.
 * dtypes binds the type parameters: "T=f32,U=i64", or positionally
 * "f32,i64"; NULL or "" for none. ndim is the rank of generic-rank ([*])
 * arrays, 0 when the kernel has none. opts NULL: xpj_compile_opts_default.
 * The first call compiles (through the cache, when there is one); later
 * calls with the same arguments return the same kernel. Errors:
 * XPJ_ERR_NOT_FOUND (no such kernel), XPJ_ERR_SPECIALIZE (bad dtypes or
 * ndim, with diagnostics), XPJ_ERR_COMPILE, XPJ_ERR_UNSUPPORTED,
 * XPJ_ERR_DEVICE (the device would not load the binary). */
xpj_status xpj_program_get_kernel(xpj_program *p, const char *name,
                                  const char *dtypes, unsigned ndim,
                                  xpj_device *dev,
                                  const xpj_compile_opts *opts,
                                  xpj_kernel **out);

/* The binary of kernel `name` (dtypes, ndim and opts as for
 * xpj_program_get_kernel) for any target ("spirv", "ptx:sm_90", "cpu",
 * see xpj_target_parse), without a device: through the same caches and
 * compiler. *data (malloc'd; free with free()) and *size may be NULL to
 * only make sure the binary is compiled and cached; data NULL with size
 * given: only its size. */
xpj_status xpj_program_get_binary(xpj_program *p, const char *name,
                                  const char *dtypes, unsigned ndim,
                                  const char *target,
                                  const xpj_compile_opts *opts, void **data,
                                  size_t *size);

typedef enum xpj_arg_kind {
  XPJ_ARG_SCALAR = 0,
  XPJ_ARG_ARRAY = 1,
  XPJ_ARG_LOCAL = 2, /* a local array parameter (`t: local T[]`): its size */
} xpj_arg_kind;

typedef enum xpj_kernel_origin {
  XPJ_ORIGIN_COMPILED = 0, /* compiled by this process */
  XPJ_ORIGIN_MEMORY = 1,   /* loaded earlier in this context */
  XPJ_ORIGIN_CACHE = 2,    /* the second-level cache on disk */
  XPJ_ORIGIN_BUNDLE = 3,   /* a bundle */
  XPJ_ORIGIN_DAEMON = 4,   /* xpjitd (it compiled it or had it) */
  XPJ_ORIGIN_REDIS = 5,    /* the cluster's Redis tier (docs/cache.md) */
} xpj_kernel_origin;

typedef struct xpj_kernel_info {
  const char *name;    /* owned by the kernel */
  xpj_func_kind kind;  /* XPJ_FUNC_RANGE or XPJ_FUNC_NDRANGE */
  unsigned dims;       /* launch dimensions required; 0: any of 1..3 */
  /* the local size the kernel requires (`ndrange(2) local(16, 16)`), in
   * its dimension order; all 0 when it requires none */
  uint64_t reqd_local[3];
  unsigned nargs;
  uint64_t local_mem_bytes;  /* static local memory per work-group */
  uint64_t max_work_group_size; /* for this kernel on its device */
  double compile_millis;     /* the compile's time, also when cached */
  const char *target;        /* canonical target string, owned */
  xpj_kernel_origin origin;  /* where its binary came from */
} xpj_kernel_info;

typedef struct xpj_kernel_arg_info {
  const char *name;   /* owned by the kernel */
  xpj_arg_kind kind;
  xpj_scalar dtype;   /* scalar type, or array element type */
  unsigned rank;      /* arrays: the rank (after ndim binding) */
  int is_const;       /* arrays: read-only */
} xpj_kernel_arg_info;

xpj_status xpj_kernel_get_info(const xpj_kernel *k, xpj_kernel_info *out);
xpj_status xpj_kernel_get_arg_info(const xpj_kernel *k, unsigned i,
                                   xpj_kernel_arg_info *out);
/* Signature as written: "axpy(a: f32, x: global const f32[1], ...)". */
const char *xpj_kernel_signature(const xpj_kernel *k);

/* ---- arguments and launches ------------------------------------------ */

/* An array view: data points at element 0 of the allocation (or of any
 * base); element [i0,...] is at data + offset + sum(i_d * strides[d]),
 * counted in elements. Strides may be zero or negative. */
typedef struct xpj_array {
  void *data;
  xpj_scalar dtype;
  unsigned ndim;
  int64_t offset;
  int64_t shape[XPJ_MAX_RANK];
  int64_t strides[XPJ_MAX_RANK];
} xpj_array;

/* A kernel argument: a scalar of dtype (value in the union member for its
 * type class) or an array view (by pointer; it must stay valid until the
 * launch call returns: the launch copies it). */
typedef struct xpj_arg {
  xpj_arg_kind kind;
  xpj_scalar dtype; /* scalars */
  union {
    int64_t i;  /* bool and signed integers */
    uint64_t u; /* unsigned integers */
    double f;   /* f16, bf16, f32 and f64 */
  } v;
  const xpj_array *array;
} xpj_arg;

/* Launch geometry: ndim 1..3; global[d] work-items in dimension d; local
 * all zero: the runtime chooses the work-group size. */
typedef struct xpj_range {
  unsigned ndim;
  uint64_t global[3];
  uint64_t local[3];
} xpj_range;

/* Launches k on q over range r with nargs arguments, checked against the
 * kernel's signature: count, kind, scalar dtype, element dtype and rank of
 * arrays, non-NULL array data, the view inside its allocation (when the
 * pointer is an xpjit allocation of the device) and aligned for its dtype.
 * Range kernels: any global size >= 1 per dimension; local is a hint.
 * Nd-range kernels: global a multiple of local in each dimension, local
 * within the device's and kernel's limits. The dimensions must match the
 * kernel's (1..3 for range kernels declared without a count). All of
 * these are XPJ_ERR_INVALID with a message naming the argument or
 * dimension. */
xpj_status xpj_launch(xpj_queue *q, xpj_kernel *k, const xpj_range *r,
                      unsigned nargs, const xpj_arg *args, xpj_event **ev);

/* The work-group size the runtime would use for an nd-range launch of k
 * over global (local zero): fills local[0..ndim), the fastest dimension
 * (the kernel's last) first. XPJ_ERR_INVALID for a global size that
 * xpj_launch refuses too: an ndim other than the kernel's, a size of 0 or
 * past the device's, more than 2^62 work-items, one that the kernel's
 * required local size does not divide. */
xpj_status xpj_kernel_suggest_local(const xpj_kernel *k, unsigned ndim,
                                    const uint64_t *global, uint64_t *local);

/* ---- helpers --------------------------------------------------------- */

/* Constructors of views, arguments and ranges: exported functions (no
 * longer static inline), so that a binding through an FFI (Python's
 * ctypes, Julia's ccall) need not build the structures itself. */

/* A C-order (row-major, contiguous) view of ndim dimensions. */
xpj_array xpj_array_nd(void *data, xpj_scalar dtype, unsigned ndim,
                       const int64_t *shape);
xpj_array xpj_array_1d(void *data, xpj_scalar dtype, int64_t n);
xpj_array xpj_array_2d(void *data, xpj_scalar dtype, int64_t rows,
                       int64_t cols);
/* Any view: shape and strides (in elements, NULL: C order) of ndim
 * dimensions, element 0 at offset elements from data. ndim over
 * XPJ_MAX_RANK gives a view of ndim 0 that every launch refuses. */
xpj_array xpj_array_view(void *data, xpj_scalar dtype, unsigned ndim,
                         const int64_t *shape, const int64_t *strides,
                         int64_t offset);
/* A local array parameter (`t: local T[]`, docs/language.md 6.6) of count
 * elements per work-group: local memory the launch reserves after the
 * kernel's own local arrays (OpenCL's clSetKernelArg(i, bytes, NULL),
 * CUDA's dynamic shared memory). */
xpj_arg xpj_arg_local(uint64_t count);
/* An array argument: a points at the view, which must stay valid until
 * the launch call returns (the launch copies it). */
xpj_arg xpj_arg_array(const xpj_array *a);
/* A scalar of dtype read from value, which points at one value in the C
 * representation of dtype (bool: one byte, 0 or not; f16 and bf16: the
 * 16-bit pattern). An unknown dtype or NULL value gives a scalar of
 * XPJ_VOID, which every launch refuses. */
xpj_arg xpj_arg_scalar(xpj_scalar dtype, const void *value);
xpj_arg xpj_arg_bool(int x);
xpj_arg xpj_arg_i8(int8_t x);
xpj_arg xpj_arg_i16(int16_t x);
xpj_arg xpj_arg_i32(int32_t x);
xpj_arg xpj_arg_i64(int64_t x);
xpj_arg xpj_arg_u8(uint8_t x);
xpj_arg xpj_arg_u16(uint16_t x);
xpj_arg xpj_arg_u32(uint32_t x);
xpj_arg xpj_arg_u64(uint64_t x);
xpj_arg xpj_arg_f32(float x);
xpj_arg xpj_arg_f64(double x);
/* f16 and bf16: the launch rounds x to the type (xpj_f16_from_double) */
xpj_arg xpj_arg_f16(double x);
xpj_arg xpj_arg_bf16(double x);
/* Launch geometries; local 0 (all of them): the runtime chooses. */
xpj_range xpj_range_1d(uint64_t n, uint64_t local);
xpj_range xpj_range_2d(uint64_t n0, uint64_t n1, uint64_t l0, uint64_t l1);
xpj_range xpj_range_3d(uint64_t n0, uint64_t n1, uint64_t n2, uint64_t l0,
                       uint64_t l1, uint64_t l2);

/* sizeof of the public structure named ("xpj_array", "xpj_arg",
 * "xpj_range", "xpj_device_info", "xpj_kernel_info",
 * "xpj_kernel_arg_info", "xpj_context_desc", "xpj_queue_desc",
 * "xpj_compile_opts", "xpj_cache_counters", "xpj_cache_stats"); 0 for any
 * other name. A binding that lays the structures out itself checks its
 * layout against the library it loaded. */
size_t xpj_struct_size(const char *name);

#ifdef __cplusplus
}
#endif
#endif
