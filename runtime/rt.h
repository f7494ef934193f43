/*
 * rt.h - runtime internals: the objects behind the handles of xpjit.h and
 * the backend interface every device backend implements (cpu.c, cuda.c,
 * ze.c, opencl.c: one table, backends[] in context.c).
 *
 * Layering: the runtime core (context.c, memory.c, queue.c, launch.c)
 * knows devices, memory, queues and binaries; program.c parses and
 * specialises, kcache.c finds the kernel in the cache tiers or calls the
 * compiler (xpj_compile) and hands the binary to a backend. Backends
 * never see source or IR.
 */
#ifndef XPJ_RT_H
#define XPJ_RT_H

#include "env.h" /* XPJIT_* variables, XPJIT_LOG */
#include "xpjit.h"
#include "xpjit_codegen.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* ---- errors (error.c) ----------------------------------------------- */

/* Sets this thread's message (printf format) and returns st. */
xpj_status rt_err(xpj_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Copies msg as this thread's message and returns st. */
xpj_status rt_err_str(xpj_status st, const char *msg);
uint64_t rt_now_ns(void);
/* queue.c: the lowest address the main thread's stack may grow to, when
 * called on the main thread (glibc, a finite stack limit); else 0. */
uintptr_t rt_main_stack_low(void);
/* The stack of the runtime's threads that run kernels (a queue's, the CPU
 * device's pool; queue.c): the default, and at least RT_KERNEL_STACK, twice
 * the private arrays a kernel may have (compiler/cg.h,
 * CG_PRIVATE_MAX_BYTES), which it keeps in its frame. A thread that helps
 * in xpj_queue_wait runs commands only with this much stack left. */
#define RT_KERNEL_STACK ((size_t)8 << 20)
size_t rt_kernel_stack(void);

/* ---- the backend interface ------------------------------------------ */

/* One flattened ABI argument: its size in bytes, and whether it is a
 * global-memory pointer (an array's data) rather than a value. */
typedef struct rt_abi_arg {
  uint8_t size;
  uint8_t ptr;
  /* a local array parameter passed as a __local pointer (SPIR-V): the
   * bytes to reserve (OpenCL's clSetKernelArg(i, local, NULL)); args[i]
   * is NULL. 64 bits: what a device reports may pass 4 GiB, and a size
   * cut to 32 bits would reserve less than the kernel is told it has */
  uint64_t local;
} rt_abi_arg;

/* One launch, marshalled: args[i] points at flattened ABI argument i
 * (docs/abi.md), abi[i] says what it is; the storage lives in the command.
 * Hidden arguments follow the parameters, args[nabi .. nabi + nhidden):
 * for range kernels 3 int64, the logical global size (GPU targets; the
 * CPU backend ignores them); then, for kernels compiled with checks, the
 * pointer to the xpj_check_record (docs/abi.md, Checks). groups[] is the
 * grid: for range kernels global rounded
 * up to whole groups of local (the hint). */
typedef struct rt_launch {
  void *native; /* the backend's loaded kernel (kernel_load) */
  xpj_func_kind kind;
  unsigned ndim;
  int64_t global[3], local[3], groups[3]; /* unused dimensions are 1 */
  unsigned nabi, nhidden;
  void **args;
  const rt_abi_arg *abi;
  /* local memory per work-group: the kernel's own, and on the CPU also
   * its local array parameters' (which follow at 16-byte alignment) */
  uint64_t local_bytes;
  /* the local array parameters' bytes (CUDA's dynamic shared memory) */
  uint64_t dyn_local_bytes;
  uint64_t scratch_bytes; /* per work-item (CPU) */
  /* the allocations its arrays point into, held (rt_mem_hold) until the
   * command is done (rt_launch_free) */
  xpj_device *dev;
  unsigned nholds;
  uintptr_t *holds;
  /* Stopping it (xpj_queue_cancel, the queue's launch timeout): a backend
   * with a cancel hook checks stop before it starts and stops the kernel
   * when cancel is called; timeout_ms (0: none) is the queue's limit. */
  atomic_bool stop;
  uint64_t timeout_ms;
  /* Kernels compiled with checks: the xpj_check_record (host memory of
   * dev) their last hidden argument points at, and what explains it
   * (rt_launch_verdict; a reference). */
  xpj_check_record *check;
  struct rt_checked *checked;
} rt_launch;

/* What explains the violations a checked kernel records: the specialised
 * module and the kernel's names. Shared by the kernel and its launches in
 * flight, which may outlive it (a program destroyed with launches
 * queued); the last reference frees it. */
typedef struct rt_checked {
  atomic_uint refs;
  const xpj_module *sm; /* the context's first level keeps it */
  char *name, *signature;
  unsigned nargs;
  char **args; /* parameter names */
} rt_checked;
rt_checked *rt_checked_retain(rt_checked *c);
/* "name(a: T, ...)" of k, for messages: made on first use ("" when out of
 * memory), then k's until it goes. */
const char *rt_kernel_signature(const xpj_kernel *k);
void rt_checked_release(rt_checked *c); /* NULL: no-op */

typedef struct rt_backend_ops {
  xpj_backend id;
  /* Finds the backend's devices and adds each with rt_context_add_device.
   * A missing driver is not an error: it adds nothing. */
  xpj_status (*discover)(xpj_context *ctx);
  void (*device_destroy)(xpj_device *d);
  xpj_status (*mem_alloc)(xpj_device *d, xpj_mem_kind kind, size_t bytes,
                          size_t align, void **out);
  void (*mem_free)(xpj_device *d, xpj_mem_kind kind, void *p);
  /* Loads a compiled binary (the device's target) and finds entry. */
  xpj_status (*kernel_load)(xpj_device *d, const uint8_t *bin, size_t len,
                            const char *entry, void **native);
  void (*kernel_unload)(xpj_device *d, void *native);
  /* Per-queue backend state (a stream, a command list); may be NULL. */
  xpj_status (*queue_init)(xpj_device *d, void **bq);
  void (*queue_fini)(xpj_device *d, void *bq);
  /* Commands, called in order on the queue's thread. A backend with
   * asynchronous streams may return before the work is done and finish it
   * in sync, which the queue calls before it completes the command's
   * event. Errors: a status and rt_err's message. */
  xpj_status (*copy)(xpj_device *d, void *bq, void *dst, const void *src,
                     size_t bytes);
  xpj_status (*fill)(xpj_device *d, void *bq, void *dst, const void *pattern,
                     size_t pattern_size, size_t bytes);
  xpj_status (*launch)(xpj_device *d, void *bq, const rt_launch *l);
  xpj_status (*sync)(xpj_device *d, void *bq); /* NULL: synchronous */
  /* Optional: stops launch l, running or about to run on bq, from any
   * thread (l->stop is already set; l stays valid during the call; locks
   * of the queue are held, so it must not warn: it writes what to warn
   * about into warn instead). The launch then fails with
   * XPJ_ERR_CANCELLED. Without it a running kernel cannot be stopped and
   * queues of the device take no launch timeout. */
  void (*cancel)(xpj_device *d, void *bq, rt_launch *l, char *warn,
                 size_t size);
  /* Optional (NULL: the device has no native form worth caching). The
   * device's own binary of a loaded kernel (a cubin, a Level Zero native
   * binary, an OpenCL program binary), malloc'd into *bin; and loading
   * such a binary back. The runtime caches it next to the portable binary
   * under dev->native_id, so a warm process skips the driver's own JIT.
   * native_load failing is not fatal: the runtime loads the portable
   * binary instead and replaces the native one. */
  xpj_status (*native_get)(xpj_device *d, void *native, uint8_t **bin,
                           size_t *len);
  xpj_status (*native_load)(xpj_device *d, const uint8_t *bin, size_t len,
                            const char *entry, void **native);
  /* Optional (NULL: XPJ_ERR_UNSUPPORTED): waits for the work another
   * library queued on its own native queue of the device
   * (xpj_device_wait_native). */
  xpj_status (*wait_native)(xpj_device *d, uintptr_t queue);
  /* Optional (NULL: none, the CPU): the driver's handle of kind what
   * (xpj_device_native; what already checked), or XPJ_ERR_UNSUPPORTED
   * with rt_err's message for a kind the backend has not. */
  xpj_status (*native_handle)(const xpj_device *d, xpj_native_kind what,
                              void **out);
} rt_backend_ops;

extern const rt_backend_ops rt_cpu_backend;
extern const rt_backend_ops rt_cuda_backend;  /* cuda.c: libcuda, PTX */
extern const rt_backend_ops rt_ze_backend;    /* ze.c: Level Zero, SPIR-V */
extern const rt_backend_ops rt_ocl_backend;   /* opencl.c: ICD, SPIR-V */

/* The gate before a driver takes SPIR-V: the header (version at most
 * 1.<max_minor>, what the device takes), instruction word counts, then
 * full validation; false with why filled. */
bool rt_spirv_sane(const uint8_t *bin, size_t len, unsigned max_minor,
                   char *why, size_t size);

/* Opens a backend's driver library: the path in the environment variable
 * env if set, else each of names (NULL-terminated) in turn. NULL when none
 * loads; why (if not NULL) gets dlerror's message. */
void *rt_dlopen(const char *env, const char *const *names, char *why,
                size_t why_size);

/* ---- objects -------------------------------------------------------- */

typedef struct rt_alloc {
  uintptr_t base;
  size_t bytes;
  xpj_mem_kind kind;
  unsigned uses; /* queued or running commands that use it (rt_mem_hold) */
  bool imported; /* xpj_mem_import: someone else's, never freed here */
} rt_alloc;

struct xpj_device {
  xpj_context *ctx;
  const rt_backend_ops *ops;
  xpj_device_info info;
  xpj_target target; /* parsed info.target */
  char id[32];       /* "cpu:0" */
  /* The exact device and driver a native binary is valid for ("" when
   * the backend has no native_get): part of the native cache key. */
  char native_id[256];
  void *impl;        /* backend state */
  pthread_mutex_t mem_lock;
  rt_alloc *allocs; /* sorted by base */
  size_t nallocs, cap;
  /* Freed by the application while commands still used them: the memory
   * goes back when the last of those commands finishes (as OpenCL's
   * clReleaseMemObject), not under a running kernel. */
  rt_alloc *retired;
  size_t nretired, cap_retired;
};

/* ---- the first level of the compile cache (kcache.c) ----------------- */

/* One compiled kernel for one device (dev NULL: a binary only, kept in
 * bin), found by the digest of its full cache key. Entries live until the
 * context is destroyed; kernels of programs point at them. */
typedef struct rt_l1 {
  char digest[65];
  xpj_device *dev;
  int state; /* RT_L1_BUILDING, RT_L1_READY, RT_L1_FAILED */
  xpj_status status;
  char *msg;   /* failure message */
  void *native; /* the backend's loaded kernel */
  /* the kernel's record (tier.h's fetched.v): sizes, compile time; data
   * (owned) and size only when dev is NULL, entry and log NULL */
  xpj_cache_value v;
  xpj_kernel_origin origin;
  struct rt_l1 *next;
} rt_l1;
enum { RT_L1_BUILDING, RT_L1_READY, RT_L1_FAILED };
#define RT_L1_BUCKETS 256

/* The daemon client's state (dclient.c), one per context. */
#define RT_DC_IDLE 8
typedef struct rt_dc {
  pthread_mutex_t mu;
  int mode; /* RT_DC_OFF, RT_DC_AUTO (default path), RT_DC_PATH */
  char path[108];
  int idle[RT_DC_IDLE]; /* connections after their handshake */
  unsigned nidle;
  int idle_pid;         /* the process that opened them */
  uint64_t retry_ms;    /* no request before this (xpd_now_ms) */
  uint64_t backoff_ms;  /* the wait after the last failure */
  uint64_t wait_ms;     /* a GET's longest wait (XPJIT_DAEMON_TIMEOUT) */
  bool probing;         /* an answer came too late: GETs wait at most 1 s
                           until one comes in time */
  char daemon_cache[1024]; /* the daemon's cache file, from its greeting */
  bool daemon_id;          /* and which file it is (device, inode) */
  uint64_t daemon_dev, daemon_ino;
  bool no_first;           /* a first look went unanswered: none more */
  bool daemon_redis;       /* it asks a Redis tier (XPD_CAP_REDIS) */
  bool daemon_lookup;      /* it answers LOOKUP (XPD_CAP_LOOKUP) */
  bool warned_redis;       /* that it has none was said */
} rt_dc;
enum { RT_DC_OFF, RT_DC_AUTO, RT_DC_PATH };

typedef struct rt_bundle {
  xpj_cache *cache;
  char *path;
  struct rt_bundle *_Atomic next;
} rt_bundle;

#define RT_MAX_TIERS 8
typedef struct rt_cc {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  rt_l1 *buckets[RT_L1_BUCKETS];
  /* the first level's second index: a request as the caller gave it ->
   * the digest of its full key (rt_cc_quick) */
  struct rt_memo *memo[RT_L1_BUCKETS];
  xpj_cache *l2;     /* opened on first use */
  bool l2_tried;
  xpj_cache_mode mode;
  char *path;
  uint64_t max_size;
  xpj_cache_counters counters; /* this context's events */
  uint64_t l1_flushed;         /* l1_hits already noted in l2 */
  char versions[128];
  /* each tier's state (tier.h), set up with the context; NULL: none */
  void *tier_state[RT_MAX_TIERS];
  /* a device refused a binary of the daemon's: the daemon is asked after
   * the cache file again, not before it (kcache.c fetch) */
  bool daemon_refused;
} rt_cc;

struct xpj_context {
  xpj_device **all; /* every discovered device (owned) */
  unsigned nall;
  /* Per backend: why it found no devices ("" if it found some or said
   * nothing), for the error when a filter asks for that backend. */
  char absent[XPJ_BACKEND_COUNT][256];
  bool skipped[XPJ_BACKEND_COUNT]; /* excluded by the visible filter */
  xpj_device **devs; /* the visible ones, in order */
  unsigned ndevs;
  unsigned cpu_threads;
  unsigned checks; /* XPJ_CHECK_* every kernel gets (desc, XPJIT_CHECK) */
  rt_cc cc;
  /* The application's reference, plus one per queue and program: a
   * context destroyed while they live is torn down after the last of them
   * (as OpenCL's retain/release), never under a running command. */
  atomic_uint refs;
  unsigned fork_gen; /* rt_fork_gen() when it was made */
};

void rt_context_retain(xpj_context *ctx);
void rt_context_release(xpj_context *ctx);

/* fork(): the threads of a context (its queues', the CPU device's pool)
 * are the parent's, and its locks may have been held by one of them at
 * the fork, so a child may not use a context, or anything of one, made
 * before it. A pthread_atfork child handler (registered at the first
 * context) counts the forks; each object knows the count of its context's
 * process. rt_inherited: ctx is the parent's (a child's call must fail
 * fast, without taking its locks); rt_err_inherited sets the message and
 * returns XPJ_ERR_INVALID. (context.c) */
unsigned rt_fork_gen(void);
bool rt_inherited(const xpj_context *ctx);
/* The same handler's prepare and parent sides take and give back the
 * process-wide locks that any context's calls may take (the host CPU's,
 * the warnings', the CPU loader's), so that no child starts with one held
 * by a thread it does not have: a child's first compile, warning or load
 * waited for ever. Each module's hook for it, called with the phase, in
 * the order rt_fork_locks gives (outer locks first). */
enum { RT_FORK_PREPARE, RT_FORK_PARENT, RT_FORK_CHILD };
void rt_warn_atfork(int phase); /* error.c */
xpj_status rt_err_inherited(const char *fn, const char *what);

/* kcache.c: set up from the descriptor (and XPJIT_BUNDLE_PATH), and torn
 * down (loaded kernels unloaded, counters flushed) before devices go. */
xpj_status rt_cc_init(xpj_context *ctx, const xpj_context_desc *desc);
/* After discovery: the bundles of XPJIT_BUNDLE_PATH (unless desc says no). */
xpj_status rt_cc_env_bundles(xpj_context *ctx, const xpj_context_desc *desc);
void rt_cc_fini(xpj_context *ctx);
/* The context's cache as it is opened (its path and mode, as the
 * descriptor gave them): what else writes beside it asks its mode of
 * xpj_cache_config_mode (the host CPU's file: rt_target_parse). */
void rt_cc_config(const rt_cc *cc, xpj_cache_config *cfg);
/* xpj_target_parse in ctx: the host CPU ("cpu") is learnt beside ctx's
 * cache, and written there only when that cache is read-write. */
xpj_status rt_target_parse(xpj_context *ctx, const char *s, xpj_target *t,
                           char *err, size_t errsize);
/* error.c: warnings, to the handler or stderr. */
void rt_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Warnings raised by this thread between hold and release are
 * delivered at the release (kcache.c holds them while it builds a
 * first-level entry: a handler that asks for the same kernel would wait
 * for itself). */
void rt_hold_warnings(void);
void rt_release_warnings(void);

/* A program's source text, for the daemon (text NULL: none). */
typedef struct rt_source {
  const char *text;
  size_t len;
  const char *name;
} rt_source;

/* One kernel request, built once by program.c: what to compile, for
 * what, and where the result goes; every tier and the daemon client take
 * it whole (docs/cache.md, "Tiers"). */
typedef struct rt_request {
  rt_source src;             /* the program's source, for the daemon */
  const xpj_module *sm;      /* the specialised module */
  const char *kernel;
  const char *dtypes;        /* canonical */
  unsigned ndim;
  xpj_device *dev;           /* NULL: only the binary, for t */
  const xpj_target *t;
  const char *target_str;    /* t, canonical */
  const xpj_compile_opts *o;
  const char *ostr;          /* o, canonical, as in the key */
  /* the source's SHA-256 (hex): the request has an alias (kcache.c,
   * alias_text), made when it is obtained; with sm NULL it is asked for
   * by that alias alone. NULL: none */
  const char *src_digest;
  /* the caller's, for both of its asks (by alias, then the whole way):
   * set when the daemon, asked for the request by its source, was there
   * and could not serve it; the whole way then neither asks it again nor
   * waits in the tiers after it. NULL: none */
  bool *daemon_fell_back;
} rt_request;

/* The compiled kernel for request rq on rq->dev (or, dev NULL, the binary
 * for rq->t), through L1, the tiers (tier.h) and the compiler; single
 * flight within the context. On success *out is READY and *from says
 * where it came from this time (XPJ_ORIGIN_MEMORY for a first-level hit).
 * Errors carry rt_err's message. A request without its module (rq->sm
 * NULL, rq->src_digest given) is answered only by the first level or a
 * hit file through its alias (xpj_l2_get_alias): XPJ_ERR_NOT_FOUND
 * otherwise, when the caller specialises and asks again. */
xpj_status rt_cc_obtain(xpj_context *ctx, const rt_request *rq, rt_l1 **out,
                        xpj_kernel_origin *from);

/* A kernel request in canonical form: dtypes, ndim (0 when the kernel has
 * no generic rank), options (program.c resolve). */
typedef struct rt_asked {
  char canon[256];
  unsigned ndim;
  char ostr[64];
} rt_asked;

/* What the context knows of a kernel request as the caller gave it,
 * once a get_kernel built it (rt_cc_remember): its canonical form, the
 * specialised module (owned) and the kernel's description, whose names
 * point into that module. Kept until the context goes. */
typedef struct rt_known rt_known;

/* A loaded kernel found from the request as the caller gave it, without
 * parsing, specialising or hashing it again: qkey is the program's source
 * digest and parse name, the kernel, dtypes, ndim, options and the device
 * or target as given (program.c quick_key), which determine the full key
 * and the specialised module. The READY entry for dev (NULL: a binary)
 * that a request with qkey built before, or NULL; *known (when not NULL):
 * what the context keeps of qkey, NULL until a get_kernel remembered it.
 * Not counted: the caller notes a first-level hit (rt_cc_note_l1) when it
 * uses the entry. */
rt_l1 *rt_cc_quick(xpj_context *ctx, const char *qkey, const xpj_device *dev,
                   const rt_known **known);
void rt_cc_note_l1(xpj_context *ctx);
/* After rt_cc_obtain built or found e for a request with qkey: remembers
 * it, and with kn (NULL for a binary) what is known of it: kn->sm and
 * kn->desc.args are taken, or destroyed when the context knew qkey
 * already. Returns what the context keeps (kn's, or what it kept before),
 * which lives until the context goes; NULL when kn is NULL or out of
 * memory. */
const rt_known *rt_cc_remember(xpj_context *ctx, const char *qkey,
                               const rt_l1 *e, rt_known *kn);

/* The cache key (and its digest) of request rq; the key's strings point
 * into rq, code and cc->versions. */
xpj_status rt_cc_key(rt_cc *cc, const rt_request *rq, char code[65],
                     char digest[65], xpj_cache_key *key);

/* A backend's note on why it has no devices (libcuda not found, no Level
 * Zero driver): kept for the error when a filter asks for one, and shown by
 * xpjit-cli devices -v. Not an error. */
void rt_context_absent(xpj_context *ctx, xpj_backend b, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Adds a device a backend discovered (info and target filled, id set by
 * the context). Takes ownership of dev (freed with free() after
 * device_destroy). */
xpj_status rt_context_add_device(xpj_context *ctx, xpj_device *dev);

/* Device filters (filter.c). */
typedef struct rt_filter rt_filter;
xpj_status rt_filter_parse(const char *s, rt_filter **out);
bool rt_filter_match(const rt_filter *f, const xpj_device *d);
/* false when no device of backend b can match f: its discovery is skipped
 * (XPJIT_DEVICE=cpu never loads a GPU driver). */
bool rt_filter_may_use(const rt_filter *f, xpj_backend b);
void rt_filter_free(rt_filter *f);

/* The allocation of dev that contains [p, p + bytes); false if none. */
bool rt_mem_find(xpj_device *dev, const void *p, rt_alloc *out);
/* rt_mem_find that also holds the allocation for a command: an
 * xpj_mem_free meanwhile defers the free until rt_mem_release. */
bool rt_mem_hold(xpj_device *dev, const void *p, rt_alloc *out);
void rt_mem_release(xpj_device *dev, uintptr_t base);
/* The device of dev's context with an allocation (live, or freed while
 * commands use it) that begins inside (p, p + bytes): host memory at p
 * that runs into it. NULL when none. */
xpj_device *rt_mem_entered(xpj_device *dev, const void *p, size_t bytes);
/* At device teardown: every allocation, live or retired, goes back. */
void rt_mem_free_all(xpj_device *dev);
/* p lies in memory xpj_mem_free has let go of while commands still use
 * it: no new command may take it (the CPU device would otherwise take it
 * for plain host memory). Sets a message and returns XPJ_ERR_INVALID. */
xpj_status rt_mem_check_retired(xpj_device *dev, const void *p,
                                const char *what);
/* Another device of dev's context whose device memory (not host-visible)
 * contains p, or NULL: such a pointer is not plain host memory. */
xpj_device *rt_mem_other_device(xpj_device *dev, const void *p);

/* ---- events and queues ---------------------------------------------- */

struct xpj_event {
  atomic_int refs;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  xpj_event_state state;
  xpj_status status;
  char *msg;
  bool profiling;
  uint64_t t_queued, t_start, t_end;
  /* the queue and context of its command, compared, never followed (either
   * may be gone while the event lives) */
  uintptr_t queue_id, ctx_id;
  unsigned fork_gen; /* its context's (rt_inherited) */
};

/* ---- programs and kernels ------------------------------------------- */

typedef struct rt_karg {
  const char *name; /* the module's (kept by the context) */
  xpj_arg_kind kind;
  xpj_scalar dtype;
  unsigned rank;
  int is_const;
} rt_karg;

/* What a launch needs of a specialised kernel's signature and body: the
 * same for every kernel of one request (the context's memo keeps it with
 * the module its names point into: rt_cc_remember), so a second program
 * copies it instead of reading the module again. */
typedef struct rt_kdesc {
  xpj_func_kind kind;
  unsigned dims;
  unsigned id_rank; /* xpj_func_id_rank: dimension id_rank-1 is fastest */
  uint64_t reqd_local[3]; /* required local size, logical order; 0: none */
  unsigned nargs, nabi;
  bool local_params; /* some parameter is a local array (`local T[]`) */
  const rt_karg *args; /* nargs; the memo's once remembered */
} rt_kdesc;

struct rt_known {
  rt_asked asked;
  xpj_module *sm;
  rt_kdesc desc;
};

struct xpj_kernel {
  xpj_program *prog;
  xpj_device *dev;
  char *name;   /* these two in the kernel's allocation */
  char *dtypes; /* canonical "T=f32,U=i64" */
  unsigned ndim;
  char opts[64];
  rt_kdesc desc;
  /* The specialised module, kept where the runtime needs it after the
   * build: nd-range kernels without a required size, whose default local
   * size is checked against fit_f, the specialised kernel
   * (xpj_func_local_fit); checked kernels, whose violations it explains.
   * The context keeps it (rt_cc_remember) until the context goes. */
  const xpj_module *sm;
  const xpj_func *fit_f;
  unsigned checks;      /* XPJ_CHECK_* compiled in */
  rt_checked *checked;  /* when checks: for its launches' messages */
  /* the last sizes chosen for it (the analysis takes up to milliseconds;
   * a launch loop asks for the same global size again and again) */
  pthread_mutex_t fit_mu;
  struct {
    unsigned ndim;
    uint64_t global[3], local[3];
  } fit_memo[4];
  unsigned fit_next;
  uint64_t local_bytes, scratch_bytes;
  double compile_ms;
  _Atomic(char *) signature; /* made when first asked (rt_kernel_signature) */
  const char *target; /* the device's */
  void *native; /* owned by the context's first level */
  xpj_kernel_origin origin;
  struct xpj_kernel *next;
};

/* Parses a dtypes string ("T=f32,U=i64,N=16" or "f32,i64,16") against
 * f's type and const parameters into types[] and consts[] (each in
 * parameter order) and its canonical form (program.c).
 * XPJ_ERR_SPECIALIZE with a message when it does not fit. */
xpj_status rt_parse_dtypes(const xpj_func *f, const char *s,
                           xpj_scalar *types, int64_t *consts, char *canon,
                           size_t csize);

/* XPJ_ERR_UNSUPPORTED, naming both, when k requires a local size its
 * device cannot run (launch.c). */
xpj_status rt_check_reqd_local(const xpj_kernel *k);

/* Launch validation and marshalling (launch.c). */
xpj_status rt_launch_prepare(xpj_kernel *k, const xpj_range *r,
                             unsigned nargs, const xpj_arg *args,
                             rt_launch **out);
/* After a launch completed: XPJ_ERR_BOUNDS with the message when its
 * checks recorded a violation, else XPJ_OK. */
xpj_status rt_launch_verdict(const rt_launch *l);
/* Lets go of the memory a launch holds (rt_mem_release), once. */
void rt_launch_release_holds(rt_launch *l);
/* Releases what a prepared launch holds and frees it (NULL: no-op). */
void rt_launch_free(rt_launch *l);
/* Enqueues a prepared launch (queue.c); takes ownership of l. */
xpj_status rt_queue_launch(xpj_queue *q, rt_launch *l, xpj_event **ev);

#endif
