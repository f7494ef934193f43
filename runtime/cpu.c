/* cpu.c - the CPU backend: the host CPU as one device. Kernels are native
 * objects from the compiler's CPU target, linked into this process by
 * runtime/elfload.c (no LLVM: a process whose kernels come from a cache
 * never maps it), or by ORC in the LLVM plugin on hosts that loader does
 * not support (or with XPJIT_CPU_LOADER=orc); either way each kernel is an
 * image of its own, so that kernels of the same name never clash and
 * unloading frees everything. Launches run on a pool of threads, one per
 * core: range kernels in chunks of flat work-items, nd-range kernels in
 * chunks of work-groups, each thread with its own local memory and scratch
 * (docs/abi.md, "The CPU entry point").
 *
 * A running launch can be stopped (xpj_queue_cancel, a queue's launch
 * timeout): the pool stops handing out chunks, and every thread inside the
 * kernel gets a signal whose handler jumps back out of the generated code
 * (siglongjmp). That is safe because generated code holds no locks and
 * calls nothing but libm and memset/memcpy (the loader resolves nothing
 * else); what the kernel had written stays written. */
#define _GNU_SOURCE
#include "rt.h"

#include "elfload.h"
#include "llvm.h"
#include "llvm_lock.h"
#include "xpjit_codegen.h"

#include <dlfcn.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <fenv.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef void (*cpu_entry)(void *const *args, const int64_t *launch,
                          void *local_mem, void *scratch, int64_t begin,
                          int64_t end);

#define CPU_LOCAL_MEM (1u << 20)
#define CPU_MAX_WG XPJ_CPU_GROUP_MAX
#define MAX_REGIONS 64

/* ---- the thread pool ------------------------------------------------- */


typedef struct slot { /* per participating thread, reused across launches */
  struct pool *pool; /* its worker's (worker_main's argument) */
  unsigned index;
  void *local;
  size_t local_cap;
  void *scratch;
  size_t scratch_cap;
} slot;

typedef struct job {
  cpu_entry fn;
  void *const *args;
  int64_t launch[9];
  int64_t total, chunk;
  atomic_llong next;
  size_t local_bytes, scratch_bytes; /* per group */
  /* > 0: the range is split into parts contiguous regions, one per
   * thread, each handed out in chunks from its own cursor: thread i starts
   * on region i (the same data launch after launch, which its cache
   * keeps) and then takes chunks from the others' regions (balance); 0:
   * one shared cursor */
  int64_t parts;
  atomic_llong cursor[MAX_REGIONS];
  atomic_bool failed;
  /* stopping: stop ends the hand-out of chunks (and, with a signal, the
   * kernel); why says what stopped it; deadline_ns (0: none) is when the
   * watchdog does */
  const rt_launch *l;
  atomic_bool stop;
  int why;
  uint64_t deadline_ns;
  pthread_t caller; /* thread 0 */
} job;
/* STOP_UNSTARTED: cancelled before it began (nothing of it ran) */
enum { STOP_CANCEL = 1, STOP_DEADLINE = 2, STOP_UNSTARTED = 3 };

typedef struct pool {
  unsigned nthreads; /* including the submitting thread */
  pthread_t *threads;
  pthread_mutex_t mu;
  pthread_cond_t wake, done;
  uint64_t generation;
  unsigned active;
  unsigned parked; /* workers that reached their loop */
  bool stop;
  job *cur;
  /* one launch at a time on the device: busy under mu; a launch waiting
   * for its turn sleeps on idle, and gives up its turn when it is
   * cancelled meanwhile (cpu_cancel wakes it) */
  bool busy;
  pthread_cond_t idle;
  slot *slots;
  job *running;          /* under mu: the launch in pool_run */
  pthread_cond_t watch;  /* the watchdog's (CLOCK_MONOTONIC) */
  pthread_t watchdog;    /* started by the first launch with a deadline */
  bool watchdog_started;
} pool;

typedef struct cpu_dev {
  pool pool;
  bool orc; /* kernels are loaded by ORC, not by elfload.c */
} cpu_dev;

static bool use_orc(void);

/* A work-group's local memory or its work-items' scratch, at least need
 * bytes (the local memory all of CPU_LOCAL_MEM, what the device says it
 * has): pages of their own, followed by one that may not be touched, so
 * that a kernel indexing past them faults where it does it instead of
 * writing the program's heap (a local array of 16 indexed by local_id in
 * a group of 1024). */
static size_t page_size(void) {
  long ps = sysconf(_SC_PAGESIZE);
  return ps > 0 ? (size_t)ps : 4096;
}

static void unmap_guarded(void *p, size_t cap) {
  if (p)
    munmap(p, cap + page_size());
}

static bool ensure(void **p, size_t *cap, size_t need) {
  if (need <= *cap)
    return true;
  size_t ps = page_size();
  if (need > SIZE_MAX - 2 * ps)
    return false;
  size_t n = (need + ps - 1) & ~(ps - 1);
  void *q = mmap(NULL, n + ps, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (q == MAP_FAILED)
    return false;
  if (mprotect((char *)q + n, ps, PROT_NONE) != 0) {
    munmap(q, n + ps);
    return false;
  }
  unmap_guarded(*p, *cap);
  *p = q;
  *cap = n;
  return true;
}

/* ---- stopping a running kernel ---- */

/* 0: none could be had (stops at chunk boundaries); written once, read by
 * pool threads of any device */
static atomic_int stop_sig;
static pthread_once_t stop_once = PTHREAD_ONCE_INIT;
/* Set by a thread only for itself: where to jump, and the job it runs. */
static _Thread_local sigjmp_buf *stop_jmp;
static _Thread_local job *stop_job_of;
static _Thread_local bool stop_unblocked;

static void on_stop_signal(int sig) {
  (void)sig;
  sigjmp_buf *jb = stop_jmp;
  job *j = stop_job_of;
  if (jb && j && atomic_load_explicit(&j->stop, memory_order_relaxed)) {
    stop_jmp = NULL;
    siglongjmp(*jb, 1);
  }
}

/* A real-time signal nobody in the process handles (XPJIT_CPU_STOP_SIGNAL
 * names one), installed once, the first time a stop is possible. */
static void stop_install(void) {
  int lo = SIGRTMIN + 2, hi = SIGRTMAX;
  uint64_t sig;
  int got = xpj_env_uint("XPJIT_CPU_STOP_SIGNAL", (uint64_t)SIGRTMIN,
                         (uint64_t)SIGRTMAX, &sig);
  if (got == 1)
    lo = hi = (int)sig;
  else if (got < 0 && xpj_env_first_complaint("XPJIT_CPU_STOP_SIGNAL"))
    rt_warn("XPJIT_CPU_STOP_SIGNAL=%.64s is not a real-time signal (%d to "
            "%d); the first free one from %d applies",
            xpj_env("XPJIT_CPU_STOP_SIGNAL"), SIGRTMIN, SIGRTMAX, lo);
  for (int s = lo; s >= 1 && s <= hi && s <= SIGRTMAX; s++) {
    struct sigaction old;
    if (sigaction(s, NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
        (old.sa_flags & SA_SIGINFO))
      continue;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_NODEFER | SA_RESTART; /* siglongjmp leaves no mask */
    sigemptyset(&sa.sa_mask);
    if (sigaction(s, &sa, NULL) == 0) {
      atomic_store(&stop_sig, s);
      return;
    }
  }
}

/* Threads inherit their creator's mask: make sure ours can be stopped. */
static void stop_prepare_thread(void) {
  stop_job_of = NULL; /* touches the TLS before any signal can come */
  int sig = atomic_load(&stop_sig);
  if (stop_unblocked || !sig)
    return;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  pthread_sigmask(SIG_UNBLOCK, &set, NULL);
  stop_unblocked = true;
}

/* Call with p->mu held, j == p->running. Returns what the caller should
 * warn about once it holds no lock ("" when nothing). */
static const char *stop_job(pool *p, job *j, int why) {
  if (atomic_load(&j->stop))
    return "";
  j->why = why;
  atomic_store(&j->stop, true);
  int sig = atomic_load(&stop_sig);
  if (!sig)
    return "";
  /* something else in the process may have taken the signal since: then
   * only the chunk boundaries stop the kernel, and the user should know */
  struct sigaction now;
  if (sigaction(sig, NULL, &now) != 0 || now.sa_handler != on_stop_signal)
    return "the CPU device's stop signal has been taken over by another "
           "handler in this process; a running kernel stops only between "
           "chunks of work (XPJIT_CPU_STOP_SIGNAL names another signal)";
  for (unsigned i = 0; i + 1 < p->nthreads; i++)
    pthread_kill(p->threads[i], sig);
  pthread_kill(j->caller, sig);
  return "";
}

static void *watchdog_main(void *arg) {
  pool *p = arg;
  pthread_mutex_lock(&p->mu);
  while (!p->stop) {
    job *j = p->running;
    if (!j || !j->deadline_ns || atomic_load(&j->stop)) {
      pthread_cond_wait(&p->watch, &p->mu);
      continue;
    }
    if (rt_now_ns() >= j->deadline_ns) {
      const char *w = stop_job(p, j, STOP_DEADLINE);
      if (*w) {
        pthread_mutex_unlock(&p->mu);
        rt_warn("%s", w);
        pthread_mutex_lock(&p->mu);
      }
      continue;
    }
    struct timespec ts = {(time_t)(j->deadline_ns / 1000000000u),
                          (long)(j->deadline_ns % 1000000000u)};
    pthread_cond_timedwait(&p->watch, &p->mu, &ts);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static void chunks(job *j, slot *s, unsigned index);

static void run_chunks(job *j, slot *s, unsigned index) {
  if (j->local_bytes &&
      !ensure(&s->local, &s->local_cap,
              j->local_bytes > CPU_LOCAL_MEM ? j->local_bytes : CPU_LOCAL_MEM)) {
    atomic_store(&j->failed, true);
    return;
  }
  if (j->scratch_bytes &&
      !ensure(&s->scratch, &s->scratch_cap, j->scratch_bytes)) {
    atomic_store(&j->failed, true);
    return;
  }
  stop_prepare_thread();
  /* kernels run in the default floating-point environment, whatever the
   * thread (the application's, when it helps in xpj_queue_wait, or one
   * that inherited its creator's rounding mode and trapped exceptions) */
  fenv_t fe;
  fegetenv(&fe);
  fesetenv(FE_DFL_ENV);
  sigjmp_buf jb;
  if (sigsetjmp(jb, 0)) { /* stopped inside the kernel */
    stop_job_of = NULL;
    fesetenv(&fe);
    return;
  }
  stop_job_of = j;
  atomic_signal_fence(memory_order_seq_cst);
  stop_jmp = &jb;
  chunks(j, s, index);
  stop_jmp = NULL;
  atomic_signal_fence(memory_order_seq_cst);
  stop_job_of = NULL;
  fesetenv(&fe);
}

static bool stopped(job *j) {
  return atomic_load_explicit(&j->stop, memory_order_relaxed);
}

static void chunks(job *j, slot *s, unsigned index) {
  if (j->parts) {
    int64_t per = (j->total + j->parts - 1) / j->parts;
    per = (per + 63) & ~(int64_t)63;
    for (int64_t k = 0; k < j->parts; k++) {
      int64_t r = ((int64_t)index + k) % j->parts;
      int64_t end = (r + 1) * per < j->total ? (r + 1) * per : j->total;
      for (;;) {
        long long b = atomic_fetch_add(&j->cursor[r], j->chunk);
        if (b >= end || stopped(j))
          break;
        long long e = b + j->chunk < end ? b + j->chunk : end;
        j->fn(j->args, j->launch, s->local, s->scratch, b, e);
      }
    }
    return;
  }
  for (;;) {
    long long b = atomic_fetch_add(&j->next, j->chunk);
    if (b >= j->total || stopped(j))
      break;
    long long e = b + j->chunk < j->total ? b + j->chunk : j->total;
    j->fn(j->args, j->launch, s->local, s->scratch, b, e);
  }
}

/* arg: the worker's slot. A worker never calls malloc or free: glibc
 * would give the thread an arena of its own (a 128 MiB mapping, trimmed,
 * its pages touched: about a third of what starting the thread costs a
 * process that only runs cached kernels). */
static void *worker_main(void *arg) {
  slot *s = arg;
  pool *p = s->pool;
  unsigned index = s->index;
  uint64_t seen = 0;
  stop_prepare_thread();
  pthread_mutex_lock(&p->mu);
  p->parked++;
  pthread_cond_broadcast(&p->done);
  for (;;) {
    while (p->generation == seen && !p->stop)
      pthread_cond_wait(&p->wake, &p->mu);
    if (p->stop)
      break;
    seen = p->generation;
    job *j = p->cur;
    pthread_mutex_unlock(&p->mu);
    run_chunks(j, s, index);
    pthread_mutex_lock(&p->mu);
    if (--p->active == 0)
      pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static void pool_stop(pool *p, unsigned started) {
  pthread_mutex_lock(&p->mu);
  p->stop = true;
  pthread_cond_broadcast(&p->wake);
  pthread_cond_broadcast(&p->watch);
  pthread_mutex_unlock(&p->mu);
  for (unsigned i = 0; i < started; i++)
    pthread_join(p->threads[i], NULL);
  if (p->watchdog_started)
    pthread_join(p->watchdog, NULL);
  pthread_cond_destroy(&p->watch);
  for (unsigned i = 0; i < p->nthreads; i++) {
    unmap_guarded(p->slots[i].local, p->slots[i].local_cap);
    unmap_guarded(p->slots[i].scratch, p->slots[i].scratch_cap);
  }
  free(p->slots);
  free(p->threads);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->idle);
}

static xpj_status pool_start(pool *p, unsigned n) {
  memset(p, 0, sizeof *p);
  p->nthreads = n;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->watch, &ca);
  pthread_condattr_destroy(&ca);
  pthread_cond_init(&p->idle, NULL);
  p->slots = calloc(n, sizeof *p->slots);
  p->threads = calloc(n, sizeof *p->threads);
  if (!p->slots || !p->threads) {
    pool_stop(p, 0);
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  for (unsigned i = 0; i < n; i++)
    p->slots[i] = (slot){.pool = p, .index = i};
  /* kernels keep their private arrays on the stack (rt_kernel_stack) */
  pthread_attr_t ta;
  if (pthread_attr_init(&ta) != 0) {
    pool_stop(p, 0);
    return rt_err(XPJ_ERR_NOMEM, "cannot start the CPU device's threads");
  }
  pthread_attr_setstacksize(&ta, rt_kernel_stack());
  for (unsigned i = 1; i < n; i++) {
    if (pthread_create(&p->threads[i - 1], &ta, worker_main,
                       &p->slots[i]) != 0) {
      pthread_attr_destroy(&ta);
      pool_stop(p, i - 1);
      return rt_err(XPJ_ERR_NOMEM, "cannot start the CPU device's threads");
    }
  }
  pthread_attr_destroy(&ta);
  /* return once every worker is parked (see xpj_queue_create: no thread
   * may be starting up when a compiler worker is forked) */
  pthread_mutex_lock(&p->mu);
  while (p->parked < n - 1)
    pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
  return XPJ_OK;
}

/* The launching thread, which may be the application's (one that helps
 * in xpj_queue_wait): the stop signal unblocked for the launch (*saved:
 * its mask before), then its mask as it was, with no stop signal left
 * pending for it (one sent as the launch ended would otherwise interrupt
 * a later call of the application's). */
static bool caller_enter(sigset_t *saved) {
  stop_job_of = NULL; /* touches the TLS before any signal can come */
  int sig = atomic_load(&stop_sig);
  sigset_t un;
  sigemptyset(&un);
  if (sig)
    sigaddset(&un, sig);
  return sig && pthread_sigmask(SIG_UNBLOCK, &un, saved) == 0;
}

static void caller_leave(const sigset_t *saved, bool entered) {
  int sig = atomic_load(&stop_sig);
  if (!entered)
    return;
  pthread_sigmask(SIG_SETMASK, saved, NULL);
  sigset_t pend;
  if (sigismember(saved, sig) && sigpending(&pend) == 0 &&
      sigismember(&pend, sig)) {
    sigset_t w;
    sigemptyset(&w);
    sigaddset(&w, sig);
    struct timespec zero = {0, 0};
    sigtimedwait(&w, NULL, &zero);
  }
}

/* Runs j on every thread of the pool (the caller is thread 0), unless it
 * is stopped first. */
static void pool_run(pool *p, job *j) {
  pthread_mutex_lock(&p->mu);
  /* another queue's launch may hold the device for long (a kernel that
   * never ends): a cancel of this one while it waits for its turn ends
   * the wait, so xpj_queue_cancel and xpj_queue_wait do not depend on
   * the other queue (l->stop is set before cpu_cancel wakes us) */
  while (p->busy && !atomic_load(&j->l->stop))
    pthread_cond_wait(&p->idle, &p->mu);
  if (p->busy) {
    pthread_mutex_unlock(&p->mu);
    j->why = STOP_UNSTARTED;
    atomic_store(&j->stop, true);
    return;
  }
  p->busy = true;
  pthread_mutex_unlock(&p->mu);
  pthread_once(&stop_once, stop_install);
  sigset_t saved;
  bool entered = caller_enter(&saved);
  j->caller = pthread_self();
  pthread_mutex_lock(&p->mu);
  p->running = j;
  /* a cancel that came before this launch was running (nothing to
   * signal: it has not started) */
  if (atomic_load(&j->l->stop)) {
    j->why = STOP_UNSTARTED;
    atomic_store(&j->stop, true);
  }
  if (j->l->timeout_ms) {
    uint64_t now = rt_now_ns(), ms = j->l->timeout_ms;
    /* saturated: a timeout of UINT64_MAX ms is no deadline, not a past one */
    j->deadline_ns = ms > (UINT64_MAX - now) / 1000000u ? UINT64_MAX
                                                         : now + ms * 1000000u;
    if (!p->watchdog_started)
      p->watchdog_started =
          pthread_create(&p->watchdog, NULL, watchdog_main, p) == 0;
    pthread_cond_signal(&p->watch);
  }
  pthread_mutex_unlock(&p->mu);
  unsigned helpers = p->nthreads - 1;
  int64_t chunks = j->parts ? j->parts : (j->total + j->chunk - 1) / j->chunk;
  if ((int64_t)helpers > chunks - 1)
    helpers = (unsigned)(chunks - 1);
  if (helpers > 0) {
    pthread_mutex_lock(&p->mu);
    p->cur = j;
    /* every worker wakes; the ones beyond the chunks find no work */
    p->active = p->nthreads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
  }
  if (!stopped(j))
    run_chunks(j, &p->slots[0], 0);
  pthread_mutex_lock(&p->mu);
  while (helpers > 0 && p->active > 0)
    pthread_cond_wait(&p->done, &p->mu);
  p->running = NULL;
  pthread_mutex_unlock(&p->mu);
  caller_leave(&saved, entered);
  pthread_mutex_lock(&p->mu);
  p->busy = false;
  pthread_cond_broadcast(&p->idle);
  pthread_mutex_unlock(&p->mu);
}

/* ---- discovery ------------------------------------------------------- */

/* The CPU's model name and vendor as /proc/cpuinfo has them ("model
 * name", "vendor_id"), read in one pass that stops at the first
 * processor's. */
static void cpuinfo_fields(char *name, size_t nsize, char *vendor,
                           size_t vsize) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[512];
  while (f && (!name[0] || !vendor[0]) && fgets(line, sizeof line, f)) {
    const char *colon = strchr(line, ':');
    char *out = !colon                                  ? NULL
                : !strncmp(line, "model name", 10)      ? name
                : !strncmp(line, "vendor_id", 9)        ? vendor
                                                        : NULL;
    if (!out || out[0])
      continue;
    const char *v = colon + 1;
    while (*v == ' ' || *v == '\t')
      v++;
    snprintf(out, out == name ? nsize : vsize, "%s", v);
    out[strcspn(out, "\n")] = 0;
  }
  if (f)
    fclose(f);
}

/* The same from CPUID where there is one (what the kernel prints comes
 * from it: the vendor of leaf 0, the brand string of leaves
 * 0x80000002-4, its spaces trimmed): /proc/cpuinfo costs a process 60-90
 * us to generate and read on this project's VMs, three CPUID traps 4-8. */
static bool cpuid_fields(char *name, size_t nsize, char *vendor,
                         size_t vsize) {
#if defined(__x86_64__)
  unsigned r[12];
  if (!__get_cpuid(0, &r[0], &r[1], &r[2], &r[3]))
    return false;
  char v[13];
  memcpy(v, &r[1], 4);
  memcpy(v + 4, &r[3], 4);
  memcpy(v + 8, &r[2], 4);
  v[12] = 0;
  if ((unsigned)__get_cpuid_max(0x80000000, NULL) < 0x80000004u)
    return false;
  for (unsigned i = 0; i < 3; i++)
    __cpuid(0x80000002 + i, r[4 * i], r[4 * i + 1], r[4 * i + 2],
            r[4 * i + 3]);
  char b[49];
  memcpy(b, r, 48);
  b[48] = 0;
  const char *start = b;
  while (*start == ' ')
    start++;
  size_t n = strlen(start);
  while (n && start[n - 1] == ' ')
    n--;
  if (!n || !v[0])
    return false;
  snprintf(name, nsize, "%.*s", (int)n, start);
  snprintf(vendor, vsize, "%s", v);
  return true;
#else
  (void)name;
  (void)nsize;
  (void)vendor;
  (void)vsize;
  return false;
#endif
}

static unsigned online_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return (unsigned)CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned)n : 1;
}

static xpj_status cpu_discover(xpj_context *ctx) {
  xpj_device *d = calloc(1, sizeof *d);
  cpu_dev *cd = calloc(1, sizeof *cd);
  if (!d || !cd) {
    free(d);
    free(cd);
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  char err[256];
  if (rt_target_parse(ctx, "cpu", &d->target, err, sizeof err) != XPJ_OK) {
    free(d);
    free(cd);
    return rt_err(XPJ_ERR_DEVICE, "the host CPU: %s", err);
  }
  unsigned n = ctx->cpu_threads;
  uint64_t en;
  int got = xpj_env_uint("XPJIT_CPU_THREADS", 1, 1024, &en);
  if (!n && got == 1)
    n = (unsigned)en;
  if (!n && got < 0 && xpj_env_first_complaint("XPJIT_CPU_THREADS"))
    rt_warn("XPJIT_CPU_THREADS=%.64s is not a number of threads from 1 to "
            "1024; one per online core applies",
            xpj_env("XPJIT_CPU_THREADS"));
  if (!n)
    n = online_cpus();
  if (n > 1024)
    n = 1024;
  xpj_status st = pool_start(&cd->pool, n);
  if (st != XPJ_OK) {
    free(d);
    free(cd);
    return st;
  }
  cd->orc = use_orc();
  xpj_device_info *in = &d->info;
  char vendor[64] = "";
  if (!cpuid_fields(in->name, sizeof in->name, vendor, sizeof vendor))
    cpuinfo_fields(in->name, sizeof in->name, vendor, sizeof vendor);
  if (!in->name[0])
    snprintf(in->name, sizeof in->name, "%s", d->target.cpu);
  snprintf(in->vendor, sizeof in->vendor, "%s",
           !strcmp(vendor, "AuthenticAMD")   ? "AMD"
           : !strcmp(vendor, "GenuineIntel") ? "Intel"
           : vendor[0]                       ? vendor
                                             : "unknown");
  snprintf(in->driver_version, sizeof in->driver_version, "xpjit %s, LLVM %s",
           xpj_version(), xpj_llvm_version());
  in->backend = XPJ_BACKEND_CPU;
  in->type = XPJ_DEVICE_CPU;
  in->compute_units = n;
  in->max_work_group_size = CPU_MAX_WG;
  for (int i = 0; i < 3; i++) {
    in->max_work_item_sizes[i] = CPU_MAX_WG;
    in->max_global_size[i] = (uint64_t)1 << 62;
  }
  in->local_mem_size = CPU_LOCAL_MEM;
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  in->global_mem_size =
      pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : (uint64_t)1 << 32;
  in->mem_base_align = 64;
  xpj_target_str(&d->target, in->target, sizeof in->target);
  d->ops = &rt_cpu_backend;
  d->impl = cd;
  st = rt_context_add_device(ctx, d);
  if (st != XPJ_OK) {
    pool_stop(&cd->pool, n - 1);
    free(cd);
    free(d);
  }
  return st;
}

static void cpu_device_destroy(xpj_device *d) {
  cpu_dev *cd = d->impl;
  if (!cd)
    return;
  pool_stop(&cd->pool, cd->pool.nthreads - 1);
  free(cd);
  d->impl = NULL;
}

/* ---- memory ---------------------------------------------------------- */

static xpj_status cpu_mem_alloc(xpj_device *d, xpj_mem_kind kind,
                                size_t bytes, size_t align, void **out) {
  /* aligned_alloc's size is a multiple of the alignment it is given (C11;
   * AddressSanitizer aborts otherwise), which is at least a pointer's */
  if (align < sizeof(void *))
    align = sizeof(void *);
  size_t rounded = (bytes + align - 1) & ~(align - 1);
  if (rounded < bytes)
    return rt_err(XPJ_ERR_INVALID, "xpj_mem_alloc: size overflows");
  void *p = aligned_alloc(align, rounded);
  if (!p)
    return rt_err(XPJ_ERR_NOMEM, "xpj_mem_alloc: out of memory (%zu bytes)",
                  bytes);
  *out = p;
  return XPJ_OK;
}

static void cpu_mem_free(xpj_device *d, xpj_mem_kind kind, void *p) {
  free(p);
}

/* ---- kernels --------------------------------------------------------- */

/* A loaded kernel: its entry point, and the loader's handle of it. */
typedef struct cpu_kernel {
  xpj_elf_image *img; /* elfload.c's; NULL when ORC loaded it */
  void *orc;          /* the ORC loader's (compiler/cpu_orc.c) */
  cpu_entry fn;
} cpu_kernel;

/* What a kernel's object may link to in this process: libm's functions
 * (whatever implements them here: libm, or a sanitizer's interceptor),
 * libgcc's arithmetic helpers, and memset/memcpy/memmove/memcmp. Nothing
 * else, so an object that reached the loader cannot call system(), open
 * files or call back into the application, and no kernel can bind to a
 * function of the process by its name. */
static void *libm_handle, *libgcc_handle;
static pthread_once_t libs_once = PTHREAD_ONCE_INIT;

static void open_libs(void) {
  /* libm: the one this process has (libxpjit links it); libgcc_s is loaded
   * if nothing has loaded it yet: f16 conversions without F16C, and f64 to
   * f16 always, are its __extendhfsf2 / __truncdfhf2 (GCC 12 and later) */
  libm_handle = dlopen("libm.so.6", RTLD_LAZY | RTLD_NOLOAD);
  /* global: the loaders look kernels' symbols up in the process's global
   * scope (resolve's dlsym(RTLD_DEFAULT), ORC's process search), where a
   * C program that links nothing of C++ has no libgcc_s (loaded for
   * pthread_cancel or by a library, it is local); f64-to-f16 kernels then
   * failed to load in such programs and in Python */
  libgcc_handle = dlopen("libgcc_s.so.1", RTLD_LAZY | RTLD_GLOBAL);
}

/* name is defined by the library lib itself (dlsym on a handle also
 * searches its dependencies: libm's finds libc's system) */
static bool defined_in(void *handle, const char *name, const char *lib) {
  void *p = handle ? dlsym(handle, name) : NULL;
  Dl_info di;
  if (!p || !dladdr(p, &di) || !di.dli_fname)
    return false;
  const char *base = strrchr(di.dli_fname, '/');
  base = base ? base + 1 : di.dli_fname;
  return !strncmp(base, lib, strlen(lib));
}

/* libgcc's arithmetic helpers (integer division and shifts of wide
 * types, float conversions and comparisons, bit counts): not its frame
 * registration, cache flushing or stack setup */
static bool arithmetic_helper(const char *n) {
  static const char *const families[] = {
      "__div",   "__udiv",  "__mod",     "__umod",   "__mul",   "__pow",
      "__neg",   "__ashl",  "__ashr",    "__lshr",   "__fix",   "__float",
      "__extend", "__trunc", "__cmp",    "__ucmp",   "__clz",   "__ctz",
      "__popcount", "__parity", "__bswap", "__ffs",  "__add",   "__sub",
      "__eq",    "__ne",    "__ge",      "__gt",     "__le",    "__lt",
      "__unord", "__abs"};
  for (size_t i = 0; i < sizeof families / sizeof *families; i++)
    if (!strncmp(n, families[i], strlen(families[i])))
      return true;
  return false;
}

static bool linkable(const char *n) {
  static const char *const mem[] = {"memset", "memcpy", "memmove", "memcmp"};
  for (size_t i = 0; i < sizeof mem / sizeof *mem; i++)
    if (!strcmp(n, mem[i]))
      return true;
  /* libm's floating-point environment (feenableexcept, fesetround, ...)
   * would change the whole process's arithmetic: not for kernels */
  if (!strncmp(n, "fe", 2))
    return false;
  pthread_once(&libs_once, open_libs);
  return defined_in(libm_handle, n, "libm.so.") ||
         (arithmetic_helper(n) && defined_in(libgcc_handle, n, "libgcc_s.so."));
}

/* elfload.c's binder: what linkable allows, as the process has it (the
 * same address ORC's process search finds). */
static void *resolve(void *ctx, const char *name) {
  (void)ctx;
  return linkable(name) ? dlsym(RTLD_DEFAULT, name) : NULL;
}

/* ---- the ORC path: in the LLVM plugin, for hosts elfload.c does not
 * support and for XPJIT_CPU_LOADER=orc ---- */

static xpj_status orc_kernel_load(const uint8_t *bin, size_t len,
                                  const char *entry, void **native) {
  char why[600];
  const xpj_llvm_api *api = xpj_llvm(why, sizeof why);
  if (!api)
    return rt_err(XPJ_ERR_DEVICE, "loading the kernel's object: %s", why);
  api->init();
  cpu_kernel *k = calloc(1, sizeof *k);
  if (!k)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  void *fn = NULL;
  xpj_llvm_enter();
  int rc = api->orc_load(bin, len, entry, linkable, &k->orc, &fn, why,
                         sizeof why);
  xpj_llvm_leave();
  if (rc != 0) {
    free(k);
    return rt_err(XPJ_ERR_DEVICE, "loading the kernel's object: %s", why);
  }
  k->fn = (cpu_entry)(uintptr_t)fn;
  *native = k;
  return XPJ_OK;
}

static void orc_kernel_unload(cpu_kernel *k) {
  xpj_llvm_enter();
  xpj_llvm(NULL, 0)->orc_unload(k->orc);
  xpj_llvm_leave();
  free(k);
}

/* ---- loading: elfload.c where it runs, else ORC ---- */

/* XPJIT_CPU_LOADER=orc makes ORC load kernels where elfload.c would (A/B
 * tests); "elf" or nothing: elfload.c wherever it runs. */
static bool use_orc(void) {
  static const char *const loaders[] = {"elf", "orc", NULL};
  int i = xpj_env_word("XPJIT_CPU_LOADER", loaders);
  if (i == -2 && xpj_env_first_complaint("XPJIT_CPU_LOADER"))
    rt_warn("XPJIT_CPU_LOADER=%.64s: not \"elf\" or \"orc\"; using %s",
            xpj_env("XPJIT_CPU_LOADER"), xpj_elf_supported() ? "elf" : "orc");
  return !xpj_elf_supported() || i == 1;
}

static xpj_status cpu_kernel_load(xpj_device *d, const uint8_t *bin,
                                  size_t len, const char *entry,
                                  void **native) {
  if (((cpu_dev *)d->impl)->orc)
    return orc_kernel_load(bin, len, entry, native);
  cpu_kernel *k = calloc(1, sizeof *k);
  if (!k)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  char why[600];
  void *fn = NULL;
  xpj_status st = xpj_elf_load(bin, len, entry, resolve, NULL, &k->img, &fn,
                               why, sizeof why);
  if (st != XPJ_OK) {
    free(k);
    return rt_err(st == XPJ_ERR_NOMEM ? XPJ_ERR_NOMEM : XPJ_ERR_DEVICE,
                  "loading the kernel's object: %s", why);
  }
  k->fn = (cpu_entry)(uintptr_t)fn;
  *native = k;
  return XPJ_OK;
}

static void cpu_kernel_unload(xpj_device *d, void *native) {
  (void)d;
  cpu_kernel *k = native;
  if (!k)
    return;
  if (!k->img) {
    orc_kernel_unload(k);
    return;
  }
  xpj_elf_unload(k->img);
  free(k);
}

/* ---- commands -------------------------------------------------------- */

static xpj_status cpu_copy(xpj_device *d, void *bq, void *dst,
                           const void *src, size_t bytes) {
  memcpy(dst, src, bytes);
  return XPJ_OK;
}

static xpj_status cpu_fill(xpj_device *d, void *bq, void *dst,
                           const void *pattern, size_t psize, size_t bytes) {
  uint8_t *p = dst;
  if (bytes == 0)
    return XPJ_OK;
  memcpy(p, pattern, psize);
  /* doubling copies: O(log n) memcpy calls */
  size_t done = psize;
  while (done < bytes) {
    size_t n = done < bytes - done ? done : bytes - done;
    memcpy(p + done, p, n);
    done += n;
  }
  return XPJ_OK;
}

static xpj_status cpu_launch(xpj_device *d, void *bq, const rt_launch *l) {
  cpu_dev *cd = d->impl;
  const cpu_kernel *k = l->native;
  job j;
  memset(&j, 0, sizeof j);
  j.fn = k->fn;
  j.args = l->args;
  for (int i = 0; i < 3; i++) {
    j.launch[i] = l->global[i];
    j.launch[3 + i] = l->kind == XPJ_FUNC_NDRANGE ? l->local[i] : 1;
    j.launch[6 + i] = l->kind == XPJ_FUNC_NDRANGE ? l->groups[i] : l->global[i];
  }
  int64_t threads = cd->pool.nthreads;
  if (l->kind == XPJ_FUNC_NDRANGE) {
    j.total = l->groups[0] * l->groups[1] * l->groups[2];
    /* about 8 chunks per thread for balance; at least one group */
    j.chunk = j.total / (threads * 8);
    if (j.chunk < 1)
      j.chunk = 1;
    j.local_bytes = l->local_bytes;
  } else {
    j.total = l->global[0] * l->global[1] * l->global[2];
    /* chunks of whole cache lines of work-items, >= 4096 so that a chunk
     * outweighs the cost of handing it out */
    /* one contiguous part per thread, of at least 4096 work-items so that
     * a part outweighs waking a thread */
    int64_t parts = (j.total + 4095) / 4096;
    j.parts = parts < threads ? parts : threads;
    if (j.parts > MAX_REGIONS)
      j.parts = MAX_REGIONS;
    int64_t per = ((j.total + j.parts - 1) / j.parts + 63) & ~(int64_t)63;
    /* 8 chunks per region, >= 4096 work-items, whole cache lines */
    j.chunk = ((per / 8 + 63) & ~(int64_t)63);
    if (j.chunk < 4096)
      j.chunk = 4096;
    for (int64_t r = 0; r < j.parts; r++)
      atomic_init(&j.cursor[r], r * per);
  }
  /* per work-item arrays at constant offsets (docs/abi.md): nd-range
   * kernels with barriers or interchanged loops, range kernels with
   * interchanged loops (a chunk of a row stands for a group) */
  if (l->scratch_bytes > SIZE_MAX / XPJ_CPU_SCRATCH_STRIDE)
    return rt_err(XPJ_ERR_INVALID,
                  "launch: %llu bytes of scratch per work-item for %u "
                  "work-items is more than the address space",
                  (unsigned long long)l->scratch_bytes, XPJ_CPU_GROUP_MAX);
  j.scratch_bytes = (size_t)l->scratch_bytes * XPJ_CPU_SCRATCH_STRIDE;
  atomic_init(&j.next, 0);
  atomic_init(&j.failed, false);
  atomic_init(&j.stop, false);
  j.l = l;
  pool_run(&cd->pool, &j);
  if (atomic_load(&j.stop))
    return j.why == STOP_DEADLINE
               ? rt_err(XPJ_ERR_CANCELLED,
                        "launch stopped: it ran past the queue's launch "
                        "timeout of %llu ms (its output is partly written)",
                        (unsigned long long)l->timeout_ms)
           : j.why == STOP_UNSTARTED
               ? rt_err(XPJ_ERR_CANCELLED,
                        "launch cancelled by xpj_queue_cancel before it "
                        "started on the device (nothing of it ran)")
               : rt_err(XPJ_ERR_CANCELLED,
                        "launch stopped by xpj_queue_cancel (its output is "
                        "partly written)");
  if (atomic_load(&j.failed))
    return rt_err(XPJ_ERR_NOMEM,
                  "launch: cannot allocate %zu bytes of local memory and %zu "
                  "of scratch per thread",
                  j.local_bytes, j.scratch_bytes);
  return XPJ_OK;
}

static void cpu_cancel(xpj_device *d, void *bq, rt_launch *l, char *warn,
                       size_t size) {
  pool *p = &((cpu_dev *)d->impl)->pool;
  pthread_mutex_lock(&p->mu);
  if (p->running && p->running->l == l)
    snprintf(warn, size, "%s", stop_job(p, p->running, STOP_CANCEL));
  else /* waiting for its turn behind another queue's launch (pool_run) */
    pthread_cond_broadcast(&p->idle);
  pthread_mutex_unlock(&p->mu);
}

/* Another library's work for the CPU: its own threads' (nothing queued
 * here to wait for). */
static xpj_status cpu_wait_native(xpj_device *d, uintptr_t queue) {
  return XPJ_OK;
}

const rt_backend_ops rt_cpu_backend = {
    .id = XPJ_BACKEND_CPU,
    .discover = cpu_discover,
    .device_destroy = cpu_device_destroy,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .kernel_load = cpu_kernel_load,
    .kernel_unload = cpu_kernel_unload,
    .copy = cpu_copy,
    .fill = cpu_fill,
    .launch = cpu_launch,
    .cancel = cpu_cancel,
    .wait_native = cpu_wait_native,
};
