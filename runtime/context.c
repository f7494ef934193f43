/* context.c - contexts and devices: discovery through every backend built
 * in, the visible set (XPJIT_DEVICE), and selection by filter. */
#include "frontend.h" /* xpj_compiler_settings_check */
#include "elfload.h"
#include "llvm.h" /* xpj_host_cpu_atfork */
#include "rt.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const rt_backend_ops *const backends[] = {
    &rt_cpu_backend, &rt_cuda_backend, &rt_ze_backend, &rt_ocl_backend};

void *rt_dlopen(const char *env, const char *const *names, char *why,
                size_t why_size) {
  const char *e = env ? getenv(env) : NULL;
  const char *one[2] = {e, NULL};
  if (e && *e)
    names = one;
  if (why && why_size)
    *why = 0;
  for (; *names; names++) {
    void *h = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
    if (h)
      return h;
    const char *m = dlerror();
    if (why && why_size && !*why)
      snprintf(why, why_size, "%s", m ? m : *names);
    /* no warning: a backend without its driver has no devices and a note
     * (xpj_context_backend_note, xpjit-cli devices -v); the log says it */
    if (names == one)
      xpj_log(XPJ_LOG_INFO, "%s=%.256s: %s; that backend has no devices",
              env, e, m ? m : "cannot be opened");
  }
  return NULL;
}

void rt_context_absent(xpj_context *ctx, xpj_backend b, const char *fmt,
                       ...) {
  if ((unsigned)b >= XPJ_BACKEND_COUNT)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->absent[b], sizeof ctx->absent[b], fmt, ap);
  va_end(ap);
}

const char *xpj_context_backend_note(const xpj_context *ctx, xpj_backend b) {
  if (!ctx || (unsigned)b >= XPJ_BACKEND_COUNT)
    return "";
  return ctx->absent[b];
}

const char *xpj_backend_name(xpj_backend b) {
  switch (b) {
  case XPJ_BACKEND_CPU: return "cpu";
  case XPJ_BACKEND_CUDA: return "cuda";
  case XPJ_BACKEND_LEVEL_ZERO: return "level_zero";
  case XPJ_BACKEND_OPENCL: return "opencl";
  default: return "?";
  }
}

xpj_status rt_context_add_device(xpj_context *ctx, xpj_device *dev) {
  xpj_device **a = realloc(ctx->all, (ctx->nall + 1) * sizeof *a);
  if (!a)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  ctx->all = a;
  dev->ctx = ctx;
  unsigned idx = 0;
  for (unsigned i = 0; i < ctx->nall; i++)
    idx += ctx->all[i]->info.backend == dev->info.backend;
  dev->info.index = idx;
  snprintf(dev->id, sizeof dev->id, "%s:%u",
           xpj_backend_name(dev->info.backend), idx);
  pthread_mutex_init(&dev->mem_lock, NULL);
  ctx->all[ctx->nall++] = dev;
  return XPJ_OK;
}

static void device_free(xpj_device *d) {
  /* memory the application never freed goes with its device, before the
   * backend tears down the device (and the driver context it needs) */
  rt_mem_free_all(d);
  if (d->ops && d->ops->device_destroy)
    d->ops->device_destroy(d);
  pthread_mutex_destroy(&d->mem_lock);
  free(d);
}

static void compiler_setting(const char *name, const char *msg) {
  if (xpj_env_first_complaint(name))
    rt_warn("%s", msg);
}

/* Once per process, at the first context: the settings read where no
 * warning can be given (the log's own, switches of the cache layer) or
 * read too often to warn each time, and XPJIT_* names xpjit does not read
 * (a typo: XPJIT_CACHEDIR) - each a warning, never an error. */
static void settings_check(void) {
  const char *p = xpj_log_setting_problem();
  if (*p)
    rt_warn("%s", p);
  static const char *const switches[] = {"XPJIT_CACHE_HIT_FILES",
                                         "XPJIT_CACHE_SINGLE_FLIGHT",
                                         "XPJIT_NATIVE_CACHE",
                                         "XPJIT_QUEUE_HELP"};
  for (size_t i = 0; i < sizeof switches / sizeof *switches; i++)
    if (xpj_env_bool(switches[i], 1) < 0 &&
        xpj_env_first_complaint(switches[i]))
      rt_warn("%s=%.64s is not 1 (on) or 0 (off); 1 applies", switches[i],
              xpj_env(switches[i]));
  static const char *const journals[] = {"rollback", "wal", NULL};
  if (xpj_env_word("XPJIT_CACHE_JOURNAL", journals) == -2 &&
      xpj_env_first_complaint("XPJIT_CACHE_JOURNAL"))
    rt_warn("XPJIT_CACHE_JOURNAL=%.64s is not wal or rollback; the "
            "default applies (rollback on a network file system, else wal)",
            xpj_env("XPJIT_CACHE_JOURNAL"));
  xpj_compiler_settings_check(compiler_setting);
  char unknown[1024];
  xpj_env_unknown(unknown, sizeof unknown);
  if (*unknown)
    rt_warn("not a variable xpjit reads: %s (docs/environment.md; "
            "xpjit-cli env)", unknown);
}

/* ---- fork ---------------------------------------------------------------- */

static atomic_uint fork_gen; /* forks of this process's ancestors since the
                                library was loaded */
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* A context's creation and its teardown (device discovery: drivers and
 * their loaders dlopen'ed, a backend's own lock held while a driver sets
 * up; the cache opened and closed) are a "setup": a fork() waits until no
 * other thread is in one, and none starts until the fork is done. A child
 * forked in the middle of another thread's setup inherited the backend's
 * lock held (it waited for ever in its own first context: OpenCL's
 * discovery) or a driver half loaded (it crashed in dlopen): an outside
 * probe, 4 of 100 children, 13 with Intel's OpenCL runtime. setup_mu is
 * held from the prepare handler to the parent's or child's, so no thread
 * enters meanwhile. A fork from inside a setup of its own thread (a
 * driver that forks, a warning handler) does not wait for itself. */
static pthread_mutex_t setup_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t setup_cv = PTHREAD_COND_INITIALIZER;
static unsigned setups_running, forks_waiting;
static _Thread_local unsigned setup_depth; /* this thread's, nested */
static _Thread_local bool fork_gated;       /* this thread's fork waited */

static void setup_enter(void) {
  if (setup_depth++)
    return;
  pthread_mutex_lock(&setup_mu);
  while (forks_waiting)
    pthread_cond_wait(&setup_cv, &setup_mu);
  setups_running++;
  pthread_mutex_unlock(&setup_mu);
}

static void setup_leave(void) {
  if (--setup_depth)
    return;
  pthread_mutex_lock(&setup_mu);
  if (--setups_running == 0)
    pthread_cond_broadcast(&setup_cv);
  pthread_mutex_unlock(&setup_mu);
}

static void setup_atfork(int phase) {
  if (phase == RT_FORK_PREPARE) {
    fork_gated = setup_depth == 0;
    if (!fork_gated)
      return;
    pthread_mutex_lock(&setup_mu);
    forks_waiting++;
    while (setups_running)
      pthread_cond_wait(&setup_cv, &setup_mu);
  } else if (!fork_gated) {
    return;
  } else if (phase == RT_FORK_PARENT) {
    forks_waiting--;
    pthread_cond_broadcast(&setup_cv);
    pthread_mutex_unlock(&setup_mu);
  } else { /* the child's one thread: nobody waits, nothing runs */
    setups_running = forks_waiting = 0;
    pthread_mutex_init(&setup_mu, NULL);
    pthread_cond_init(&setup_cv, NULL);
  }
}

/* The process-wide locks, outer first (a setup may learn the host CPU,
 * which is held while it warns; the other two are taken alone) */
static void fork_locks(int phase) {
  if (phase == RT_FORK_PREPARE) {
    setup_atfork(phase);
    xpj_host_cpu_atfork(phase);
    rt_warn_atfork(phase);
    xpj_elf_atfork(phase);
  } else {
    xpj_elf_atfork(phase);
    rt_warn_atfork(phase);
    xpj_host_cpu_atfork(phase);
    setup_atfork(phase);
  }
}

static void fork_prepare(void) { fork_locks(RT_FORK_PREPARE); }
static void fork_parent(void) { fork_locks(RT_FORK_PARENT); }

static void fork_child(void) {
  fork_locks(RT_FORK_CHILD);
  atomic_fetch_add(&fork_gen, 1);
}

static void fork_register(void) {
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

unsigned rt_fork_gen(void) {
  return atomic_load_explicit(&fork_gen, memory_order_relaxed);
}

bool rt_inherited(const xpj_context *ctx) {
  return ctx && ctx->fork_gen != rt_fork_gen();
}

xpj_status rt_err_inherited(const char *fn, const char *what) {
  return rt_err(XPJ_ERR_INVALID,
                "%s: the %s was made before fork(), in the parent process; "
                "a child cannot use it (its threads are the parent's): make "
                "a new context in the child", fn, what);
}

static xpj_status context_create(const xpj_context_desc *desc,
                                 xpj_context **out);

xpj_status xpj_context_create(const xpj_context_desc *desc,
                              xpj_context **out) {
  if (!out)
    return rt_err(XPJ_ERR_INVALID, "xpj_context_create: out is NULL");
  *out = NULL;
  static pthread_once_t settings_once = PTHREAD_ONCE_INIT;
  pthread_once(&settings_once, settings_check);
  pthread_once(&fork_once, fork_register);
  setup_enter();
  xpj_status st = context_create(desc, out);
  setup_leave();
  return st;
}

static xpj_status context_create(const xpj_context_desc *desc,
                                 xpj_context **out) {
  xpj_context *ctx = calloc(1, sizeof *ctx);
  if (!ctx)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  atomic_init(&ctx->refs, 1);
  ctx->fork_gen = rt_fork_gen();
  ctx->cpu_threads = desc ? desc->cpu_threads : 0;
  /* checks: the descriptor's and XPJIT_CHECK's together */
  const char *chk = getenv("XPJIT_CHECK");
  char cerr[160];
  if (desc && (desc->checks & ~XPJ_CHECK_ALL)) {
    free(ctx);
    return rt_err(XPJ_ERR_INVALID, "xpj_context_create: unknown checks "
                  "0x%x", desc->checks & ~XPJ_CHECK_ALL);
  }
  if (desc && (unsigned)desc->cache_mode > XPJ_CACHE_MODE_RW) {
    free(ctx);
    return rt_err(XPJ_ERR_INVALID, "xpj_context_create: unknown cache_mode "
                  "%u", (unsigned)desc->cache_mode);
  }
  if (chk && xpj_checks_parse(chk, &ctx->checks, cerr, sizeof cerr) != XPJ_OK) {
    free(ctx);
    return rt_err(XPJ_ERR_INVALID, "XPJIT_CHECK=%.64s: %s", chk, cerr);
  }
  ctx->checks |= desc ? desc->checks : 0;
  xpj_status cst = rt_cc_init(ctx, desc);
  const char *vis = desc && desc->visible ? desc->visible : getenv("XPJIT_DEVICE");
  rt_filter *f = NULL;
  xpj_status st = XPJ_OK;
  if (vis && *vis) {
    st = rt_filter_parse(vis, &f);
    if (st != XPJ_OK) {
      if (!(desc && desc->visible))
        rt_err(st, "XPJIT_DEVICE: %s", xpj_last_error());
      rt_cc_fini(ctx);
      free(ctx);
      return st;
    }
  }
  if (cst != XPJ_OK) {
    rt_filter_free(f);
    xpj_context_destroy(ctx);
    return cst;
  }
  for (size_t i = 0; i < sizeof backends / sizeof *backends && st == XPJ_OK;
       i++)
    if (!f || rt_filter_may_use(f, backends[i]->id)) {
      st = backends[i]->discover(ctx);
    } else {
      ctx->skipped[backends[i]->id] = true;
      rt_context_absent(ctx, backends[i]->id,
                        "not looked for: the device filter \"%s\" excludes "
                        "it", vis);
    }
  if (st == XPJ_OK && ctx->nall) {
    ctx->devs = calloc(ctx->nall, sizeof *ctx->devs);
    if (!ctx->devs)
      st = rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  for (unsigned i = 0; st == XPJ_OK && i < ctx->nall; i++)
    if (!f || rt_filter_match(f, ctx->all[i]))
      ctx->devs[ctx->ndevs++] = ctx->all[i];
  rt_filter_free(f);
  if (st == XPJ_OK)
    st = rt_cc_env_bundles(ctx, desc);
  if (st != XPJ_OK) {
    xpj_context_destroy(ctx);
    return st;
  }
  *out = ctx;
  return XPJ_OK;
}

void rt_context_retain(xpj_context *ctx) { atomic_fetch_add(&ctx->refs, 1); }

void xpj_context_destroy(xpj_context *ctx) {
  /* a parent's, in a child: left as it is (its teardown would join the
   * parent's threads) */
  if (ctx && !rt_inherited(ctx))
    rt_context_release(ctx);
}

void rt_context_release(xpj_context *ctx) {
  if (atomic_fetch_sub(&ctx->refs, 1) != 1)
    return;
  setup_enter();
  rt_cc_fini(ctx); /* unloads kernels: before their devices go */
  for (unsigned i = 0; i < ctx->nall; i++)
    device_free(ctx->all[i]);
  free(ctx->all);
  free(ctx->devs);
  free(ctx);
  setup_leave();
}

unsigned xpj_device_count(const xpj_context *ctx) {
  return ctx ? ctx->ndevs : 0;
}

xpj_device *xpj_device_get(const xpj_context *ctx, unsigned i) {
  return ctx && i < ctx->ndevs ? ctx->devs[i] : NULL;
}

/* No device matches filter (NULL: the default device). The message lists
 * the visible devices and why backends have none: those the filter could
 * name, or for the default device those the visible filter let in. */
static xpj_status none_found(const xpj_context *ctx, const char *filter) {
  char list[1024] = "", notes[1024] = "";
  size_t n = 0, m = 0;
  rt_filter *f = NULL;
  if (filter && rt_filter_parse(filter, &f) != XPJ_OK)
    f = NULL; /* parsed once already: cannot fail here */
  for (unsigned i = 0; i < ctx->ndevs && n < sizeof list - 64; i++)
    n += (size_t)snprintf(list + n, sizeof list - n, "%s%s (%s)",
                          i ? ", " : "", ctx->devs[i]->id,
                          ctx->devs[i]->info.name);
  /* and why backends without devices have none */
  for (unsigned b = 0; b < XPJ_BACKEND_COUNT && m < sizeof notes - 64; b++)
    if (ctx->absent[b][0] &&
        (f ? rt_filter_may_use(f, (xpj_backend)b) : !ctx->skipped[b]))
      m += (size_t)snprintf(notes + m, sizeof notes - m, "; %s: %s",
                            xpj_backend_name((xpj_backend)b), ctx->absent[b]);
  rt_filter_free(f);
  return rt_err(XPJ_ERR_NOT_FOUND,
                "no device matches \"%s\"; visible devices: %s%s",
                filter ? filter : "(default)", ctx->ndevs ? list : "none",
                notes);
}

xpj_status xpj_device_list(xpj_context *ctx, const char *filter,
                           xpj_device **out, unsigned max, unsigned *n) {
  if (!ctx || !n || (max && !out))
    return rt_err(XPJ_ERR_INVALID, "xpj_device_list: NULL argument");
  *n = 0;
  if (rt_inherited(ctx))
    return rt_err_inherited("xpj_device_list", "context");
  rt_filter *f = NULL;
  if (filter && *filter) {
    xpj_status st = rt_filter_parse(filter, &f);
    if (st != XPJ_OK)
      return st;
  }
  for (unsigned i = 0; i < ctx->ndevs; i++)
    if (!f || rt_filter_match(f, ctx->devs[i])) {
      if (*n < max)
        out[*n] = ctx->devs[i];
      ++*n;
    }
  rt_filter_free(f);
  return XPJ_OK;
}

xpj_status xpj_device_select(xpj_context *ctx, const char *filter,
                             xpj_device **out) {
  if (!ctx || !out)
    return rt_err(XPJ_ERR_INVALID, "xpj_device_select: NULL argument");
  *out = NULL;
  if (rt_inherited(ctx))
    return rt_err_inherited("xpj_device_select", "context");
  xpj_device *d = NULL;
  unsigned n = 0;
  xpj_status st = xpj_device_list(ctx, filter, &d, 1, &n);
  if (st != XPJ_OK)
    return st;
  if (n == 0)
    return none_found(ctx, filter && *filter ? filter : NULL);
  *out = d;
  return XPJ_OK;
}

xpj_status xpj_device_get_info(const xpj_device *dev, xpj_device_info *out) {
  if (!dev || !out)
    return rt_err(XPJ_ERR_INVALID, "xpj_device_get_info: NULL argument");
  *out = dev->info;
  return XPJ_OK;
}

const char *xpj_device_id(const xpj_device *dev) { return dev ? dev->id : ""; }

xpj_status xpj_device_native(const xpj_device *dev, xpj_native_kind what,
                             void **out) {
  if (out)
    *out = NULL;
  if (!dev || !out)
    return rt_err(XPJ_ERR_INVALID, "xpj_device_native: NULL argument");
  if (rt_inherited(dev->ctx))
    return rt_err_inherited("xpj_device_native", "device");
  if (what != XPJ_NATIVE_DEVICE && what != XPJ_NATIVE_CONTEXT &&
      what != XPJ_NATIVE_PLATFORM)
    return rt_err(XPJ_ERR_INVALID, "xpj_device_native: unknown kind %d",
                  (int)what);
  if (!dev->ops->native_handle)
    return rt_err(XPJ_ERR_UNSUPPORTED,
                  "xpj_device_native: %s has no driver handles (%s)", dev->id,
                  xpj_backend_name(dev->info.backend));
  return dev->ops->native_handle(dev, what, out);
}
