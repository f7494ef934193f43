/* queue.c - in-order queues and events. Each queue has one thread that
 * runs its commands in order through the device's backend; events carry a
 * command's state, status, message and timestamps. The first error since
 * the last xpj_queue_wait is kept on the queue and returned by it. */
#define _GNU_SOURCE /* pthread_getattr_np */
#include "rt.h"

#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef enum cmd_type {
  CMD_COPY,
  CMD_FILL,
  CMD_LAUNCH,
  CMD_WAIT,
  CMD_HOST,
} cmd_type;

typedef struct cmd {
  cmd_type type;
  xpj_event *ev;
  struct cmd *next;
  /* by xpj_queue_cancel (under the queue's mu) before it was taken: its
   * event has failed; it completes, in its turn, without running */
  bool cancelled;
  /* copies and fills: the allocations they touch, held until done (0:
   * none, e.g. plain host memory) */
  xpj_device *dev;
  uintptr_t holds[2];
  union {
    struct {
      void *dst;
      const void *src;
      size_t bytes;
    } copy;
    struct {
      void *dst;
      uint8_t pattern[128];
      size_t psize, bytes;
    } fill;
    rt_launch *launch;
    struct {
      unsigned n;
      xpj_event **evs;
    } wait;
    struct {
      int (*fn)(void *);
      void *user;
    } host;
  } u;
} cmd;

struct xpj_queue {
  xpj_device *dev;
  void *bq;
  unsigned flags;
  uint64_t launch_timeout_ms;
  cmd *running; /* taken off the list, not finished (synchronous devices) */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t work, done;
  cmd *head, *tail;
  uint64_t submitted, completed;
  bool started, stop;
  xpj_status err;
  char *errmsg;
};

/* ---- events --------------------------------------------------------- */

/* Commands this thread is running (a host task that waits runs inside
 * one): no thread helps from inside a command (help_ok). */
static _Thread_local unsigned in_command;
/* The queue whose command this thread runs (NULL: none): waiting for that
 * queue from inside its own command would wait for itself. */
static _Thread_local const xpj_queue *command_queue;

static xpj_event *event_new(const xpj_queue *q) {
  xpj_event *e = calloc(1, sizeof *e);
  if (!e)
    return NULL;
  atomic_init(&e->refs, 1);
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  e->state = XPJ_EVENT_QUEUED;
  e->profiling = (q->flags & XPJ_QUEUE_PROFILING) != 0;
  e->t_queued = rt_now_ns();
  e->queue_id = (uintptr_t)q;
  e->ctx_id = (uintptr_t)q->dev->ctx;
  e->fork_gen = q->dev->ctx->fork_gen;
  return e;
}

/* An event made before a fork, in the parent: a child leaves it alone (a
 * parent's thread may have held its lock at the fork). */
static bool event_inherited(const xpj_event *e) {
  return e->fork_gen != rt_fork_gen();
}

void xpj_event_release(xpj_event *e) {
  if (!e || event_inherited(e) || atomic_fetch_sub(&e->refs, 1) != 1)
    return;
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->cv);
  free(e->msg);
  free(e);
}

#define CANCELLED_MSG "cancelled by xpj_queue_cancel before it started"

static void event_finish(xpj_event *e, xpj_status st, const char *msg) {
  pthread_mutex_lock(&e->mu);
  if (e->state == XPJ_EVENT_COMPLETE || e->state == XPJ_EVENT_FAILED) {
    pthread_mutex_unlock(&e->mu); /* failed by xpj_queue_cancel already */
    return;
  }
  if (e->state == XPJ_EVENT_QUEUED)
    e->t_start = rt_now_ns(); /* it never ran */
  e->t_end = rt_now_ns();
  e->status = st;
  if (st != XPJ_OK)
    e->msg = strdup(msg);
  e->state = st == XPJ_OK ? XPJ_EVENT_COMPLETE : XPJ_EVENT_FAILED;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
}

xpj_status xpj_event_wait(xpj_event *e) {
  if (!e)
    return rt_err(XPJ_ERR_INVALID, "xpj_event_wait: event is NULL");
  if (event_inherited(e))
    return rt_err_inherited("xpj_event_wait", "event");
  pthread_mutex_lock(&e->mu);
  if (command_queue && e->queue_id == (uintptr_t)command_queue &&
      e->state != XPJ_EVENT_COMPLETE && e->state != XPJ_EVENT_FAILED) {
    /* this command's own event, or a later one of its in-order queue */
    pthread_mutex_unlock(&e->mu);
    return rt_err(XPJ_ERR_INVALID, "xpj_event_wait: called from a command "
                  "of the queue that runs the event's command after it (or "
                  "is running it): it would wait for itself");
  }
  while (e->state != XPJ_EVENT_COMPLETE && e->state != XPJ_EVENT_FAILED)
    pthread_cond_wait(&e->cv, &e->mu);
  xpj_status st = e->status;
  if (st != XPJ_OK)
    rt_err_str(st, e->msg ? e->msg : xpj_status_name(st));
  pthread_mutex_unlock(&e->mu);
  return st;
}

xpj_event_state xpj_event_query(const xpj_event *e) {
  if (!e || event_inherited(e))
    return XPJ_EVENT_FAILED;
  xpj_event *m = (xpj_event *)e;
  pthread_mutex_lock(&m->mu);
  xpj_event_state s = m->state;
  pthread_mutex_unlock(&m->mu);
  return s;
}

xpj_status xpj_event_profile(const xpj_event *e, uint64_t *queued,
                             uint64_t *start, uint64_t *end) {
  if (!e)
    return rt_err(XPJ_ERR_INVALID, "xpj_event_profile: event is NULL");
  if (event_inherited(e))
    return rt_err_inherited("xpj_event_profile", "event");
  xpj_event *m = (xpj_event *)e;
  pthread_mutex_lock(&m->mu);
  bool done = m->state == XPJ_EVENT_COMPLETE || m->state == XPJ_EVENT_FAILED;
  uint64_t q = m->t_queued, s = m->t_start, t = m->t_end;
  pthread_mutex_unlock(&m->mu);
  if (!m->profiling)
    return rt_err(XPJ_ERR_INVALID,
                  "xpj_event_profile: the queue was created without "
                  "XPJ_QUEUE_PROFILING");
  if (!done)
    return rt_err(XPJ_ERR_INVALID,
                  "xpj_event_profile: the command has not finished");
  if (queued)
    *queued = q;
  if (start)
    *start = s;
  if (end)
    *end = t;
  return XPJ_OK;
}

/* ---- the queue thread ----------------------------------------------- */


static void cmd_free(cmd *c) {
  if (c->type == CMD_LAUNCH)
    rt_launch_free(c->u.launch);
  for (int i = 0; i < 2; i++)
    if (c->holds[i])
      rt_mem_release(c->dev, c->holds[i]);
  if (c->type == CMD_WAIT) {
    for (unsigned i = 0; i < c->u.wait.n; i++)
      xpj_event_release(c->u.wait.evs[i]);
    free(c->u.wait.evs);
  }
  xpj_event_release(c->ev);
  free(c);
}

static xpj_status run(xpj_queue *q, cmd *c) {
  xpj_device *d = q->dev;
  switch (c->type) {
  case CMD_COPY:
    return d->ops->copy(d, q->bq, c->u.copy.dst, c->u.copy.src,
                        c->u.copy.bytes);
  case CMD_FILL:
    return d->ops->fill(d, q->bq, c->u.fill.dst, c->u.fill.pattern,
                        c->u.fill.psize, c->u.fill.bytes);
  case CMD_LAUNCH:
    return d->ops->launch(d, q->bq, c->u.launch);
  case CMD_WAIT:
    for (unsigned i = 0; i < c->u.wait.n; i++) {
      xpj_status st = xpj_event_wait(c->u.wait.evs[i]);
      if (st != XPJ_OK)
        return rt_err(st, "a command this queue waited for failed: %s",
                      xpj_last_error());
    }
    return XPJ_OK;
  case CMD_HOST: {
    int r = c->u.host.fn(c->u.host.user);
    return r ? rt_err(XPJ_ERR_DEVICE, "host task failed with %d", r) : XPJ_OK;
  }
  }
  return XPJ_OK;
}

/* Commands a backend with asynchronous streams has taken but not yet
 * finished: their events complete, and they are freed (launch arguments
 * and fill patterns stay valid), when the queue next synchronises. */
#define MAX_INFLIGHT 64

static void finish(xpj_queue *q, cmd *c, xpj_status st, const char *msg) {
  if (st == XPJ_OK && c->type == CMD_LAUNCH &&
      (st = rt_launch_verdict(c->u.launch)) != XPJ_OK)
    msg = xpj_last_error();
  /* the memory it used is let go before anyone can learn that it is done:
   * after xpj_queue_wait or xpj_event_wait, xpj_mem_free frees at once,
   * and the range of an import let go may be imported again */
  if (c->type == CMD_LAUNCH)
    rt_launch_release_holds(c->u.launch);
  for (int i = 0; i < 2; i++)
    if (c->holds[i]) {
      rt_mem_release(c->dev, c->holds[i]);
      c->holds[i] = 0;
    }
  event_finish(c->ev, st, msg);
  pthread_mutex_lock(&q->mu);
  if (q->running == c)
    q->running = NULL;
  if (st != XPJ_OK && q->err == XPJ_OK) {
    q->err = st;
    free(q->errmsg);
    q->errmsg = strdup(msg);
  }
  q->completed++;
  pthread_cond_broadcast(&q->done);
  if (q->head || q->stop) /* a waiting thread may have run c: the queue's
                            thread goes on */
    pthread_cond_signal(&q->work);
  pthread_mutex_unlock(&q->mu);
  cmd_free(c);
}

/* Takes the first command off the list as the one running (q->mu held). */
static cmd *take(xpj_queue *q) {
  cmd *c = q->head;
  q->head = c->next;
  if (!q->head)
    q->tail = NULL;
  q->running = c;
  return c;
}

/* Runs c, taken off the list, on this thread (the queue's or a waiting
 * one): its event says so first. */
static xpj_status run_taken(xpj_queue *q, cmd *c) {
  if (c->cancelled)
    return rt_err(XPJ_ERR_CANCELLED, CANCELLED_MSG);
  pthread_mutex_lock(&c->ev->mu);
  c->ev->state = XPJ_EVENT_RUNNING;
  c->ev->t_start = rt_now_ns();
  pthread_mutex_unlock(&c->ev->mu);
  const xpj_queue *outer = command_queue;
  in_command++;
  command_queue = q;
  xpj_status st = run(q, c);
  command_queue = outer;
  in_command--;
  return st;
}

/* Waits for the backend, then completes every in-flight command with its
 * outcome (an asynchronous error belongs to all of them). */
static void drain(xpj_queue *q, cmd **fl, unsigned *n) {
  if (!*n)
    return;
  xpj_status st = q->dev->ops->sync(q->dev, q->bq);
  char *msg = st != XPJ_OK ? strdup(xpj_last_error()) : NULL;
  for (unsigned i = 0; i < *n; i++)
    finish(q, fl[i], st, msg ? msg : xpj_status_name(st));
  free(msg);
  *n = 0;
}

static void *queue_main(void *arg) {
  xpj_queue *q = arg;
  cmd *fl[MAX_INFLIGHT];
  unsigned nfl = 0;
  /* profiling queues finish each command before the next: exact times */
  bool batch = q->dev->ops->sync && !(q->flags & XPJ_QUEUE_PROFILING);
  pthread_mutex_lock(&q->mu);
  q->started = true;
  pthread_cond_broadcast(&q->done);
  for (;;) {
    /* q->running with no command of ours in flight: a thread waiting in
     * xpj_queue_wait runs it (help_ok), and finish wakes us after it */
    while ((!q->head || q->running) && !q->stop && !nfl)
      pthread_cond_wait(&q->work, &q->mu);
    if (q->running && !nfl) { /* stopping while a waiting thread runs one */
      pthread_cond_wait(&q->work, &q->mu);
      continue;
    }
    cmd *c = q->head;
    if (!c || nfl == MAX_INFLIGHT ||
        (nfl && (c->type == CMD_WAIT || c->type == CMD_HOST || c->cancelled))) {
      /* idle, full, or a command that must see the earlier ones done (a
       * cancelled one too: commands complete in order, which is what
       * xpj_queue_wait counts on) */
      pthread_mutex_unlock(&q->mu);
      drain(q, fl, &nfl);
      pthread_mutex_lock(&q->mu);
      if (!c && q->stop)
        break;
      continue;
    }
    take(q);
    pthread_mutex_unlock(&q->mu);

    xpj_status st = run_taken(q, c);
    bool async = c->type != CMD_WAIT && c->type != CMD_HOST;
    if (st == XPJ_OK && async && batch) {
      fl[nfl++] = c;
    } else if (st != XPJ_OK) {
      /* refused (or cancelled): after the commands in flight before it,
       * which complete first, in order */
      char *msg = strdup(xpj_last_error());
      drain(q, fl, &nfl);
      finish(q, c, st, msg ? msg : xpj_status_name(st));
      free(msg);
    } else {
      if (async && q->dev->ops->sync)
        st = q->dev->ops->sync(q->dev, q->bq);
      finish(q, c, st, xpj_last_error());
    }
    pthread_mutex_lock(&q->mu);
  }
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

xpj_status xpj_queue_create(xpj_device *dev, const xpj_queue_desc *desc,
                            xpj_queue **out) {
  if (!out)
    return rt_err(XPJ_ERR_INVALID, "xpj_queue_create: out is NULL");
  *out = NULL;
  if (!dev)
    return rt_err(XPJ_ERR_INVALID, "xpj_queue_create: device is NULL");
  if (rt_inherited(dev->ctx))
    return rt_err_inherited("xpj_queue_create", "device");
  if (desc && (desc->flags & ~XPJ_QUEUE_PROFILING))
    return rt_err(XPJ_ERR_INVALID, "xpj_queue_create: unknown flags 0x%x",
                  desc->flags);
  if (desc && desc->launch_timeout_ms && !dev->ops->cancel)
    return rt_err(XPJ_ERR_UNSUPPORTED,
                  "xpj_queue_create: %s cannot stop a running kernel, so its "
                  "queues take no launch timeout",
                  dev->id);
  xpj_queue *q = calloc(1, sizeof *q);
  if (!q)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  q->dev = dev;
  q->flags = desc ? desc->flags : 0;
  q->launch_timeout_ms = desc ? desc->launch_timeout_ms : 0;
  if (dev->ops->queue_init) {
    xpj_status st = dev->ops->queue_init(dev, &q->bq);
    if (st != XPJ_OK) {
      free(q);
      return st;
    }
  }
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->work, NULL);
  pthread_cond_init(&q->done, NULL);
  pthread_attr_t ta;
  int started = pthread_attr_init(&ta);
  if (started == 0) {
    pthread_attr_setstacksize(&ta, rt_kernel_stack());
    started = pthread_create(&q->thread, &ta, queue_main, q);
    pthread_attr_destroy(&ta);
  }
  if (started != 0) {
    if (dev->ops->queue_fini)
      dev->ops->queue_fini(dev, q->bq);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->work);
    pthread_cond_destroy(&q->done);
    free(q);
    return rt_err(XPJ_ERR_NOMEM, "cannot start the queue's thread");
  }
  /* return once the thread is parked: a thread still starting up holds
   * allocator and libc locks, which a compiler worker forked at that
   * moment would inherit (and some allocators, e.g. GCC 12's ASan, do not
   * reset in the child) */
  pthread_mutex_lock(&q->mu);
  while (!q->started)
    pthread_cond_wait(&q->done, &q->mu);
  pthread_mutex_unlock(&q->mu);
  rt_context_retain(dev->ctx);
  *out = q;
  return XPJ_OK;
}

void xpj_queue_destroy(xpj_queue *q) {
  /* a parent's, in a child: left as it is (no thread of its own to join
   * there, its lock maybe held at the fork) */
  if (!q || rt_inherited(q->dev->ctx))
    return;
  if (q == command_queue) { /* it would wait for the command that asks */
    /* a warning: seen at the default XPJIT_LOG, or by the handler (an
     * error line was shown only with XPJIT_LOG set, and the call returns
     * nothing else) */
    rt_warn("xpj_queue_destroy: called from a command of the same queue "
            "(it would wait for itself); the queue is left as it is");
    return;
  }
  pthread_mutex_lock(&q->mu);
  q->stop = true;
  pthread_cond_signal(&q->work);
  pthread_mutex_unlock(&q->mu);
  pthread_join(q->thread, NULL);
  if (q->dev->ops->queue_fini)
    q->dev->ops->queue_fini(q->dev, q->bq);
  pthread_mutex_destroy(&q->mu);
  pthread_cond_destroy(&q->work);
  pthread_cond_destroy(&q->done);
  free(q->errmsg);
  xpj_context *ctx = q->dev->ctx;
  free(q);
  rt_context_release(ctx);
}

/* Whether the thread in xpj_queue_wait may run the queue's commands
 * itself instead of sleeping until the queue's thread has run them: two
 * thread wake-ups saved per command, most of what a small launch costs on
 * the CPU device (docs/api.md, "Who runs a command"). Only on devices
 * that finish a command before it returns (no asynchronous streams to
 * batch), on queues without a launch timeout (its stop signal is then
 * never aimed at the caller's thread by a watchdog), never from inside a
 * command (a host task that waits), and only with as much stack left, at
 * this depth, as the queue's own thread has (kernels keep their private
 * arrays there, and nothing bounds their number). The signal mask and the
 * floating-point environment the kernel sees are the runtime's, not the
 * caller's (cpu.c, pool_run). XPJIT_QUEUE_HELP=0 turns it off. */
static _Thread_local uintptr_t stack_low; /* the lowest address of this
                                              thread's stack, or 1: unknown */
static size_t queue_stack; /* what the queues' threads get */

/* The default follows RLIMIT_STACK, and is 2 MiB where that is unlimited
 * (as on many clusters) or set low: too little for the frame a kernel may
 * have (RT_KERNEL_STACK) */
static void read_queue_stack(void) {
  pthread_attr_t a;
  size_t size = 0;
  if (pthread_attr_init(&a) == 0) {
    pthread_attr_getstacksize(&a, &size);
    pthread_attr_destroy(&a);
  }
  queue_stack = size > RT_KERNEL_STACK ? size : RT_KERNEL_STACK;
}

size_t rt_kernel_stack(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, read_queue_stack);
  return queue_stack;
}

#ifdef __GLIBC__
extern void *__libc_stack_end;

/* The stack limit when the library was loaded: the kernel kept at least
 * that much free below the stack at exec (the mmap base), and a limit
 * raised since does not move what lies there */
static rlim_t start_limit;
__attribute__((constructor)) static void read_start_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_STACK, &rl) == 0)
    start_limit = rl.rlim_cur;
}
#endif

uintptr_t rt_main_stack_low(void) {
#ifdef __GLIBC__
  /* the program's name is the string the kernel put highest on the stack,
   * just under the end of its mapping (fs/exec.c); the stack may grow down
   * to that end less the limit (what pthread_getattr_np computes, from
   * /proc/self/maps: 30-120 us of a process's first wait). Only where this
   * frame is on that stack: a process forked from another thread runs on
   * that thread's. */
  struct rlimit rl;
  const char *fn = (const char *)getauxval(AT_EXECFN);
  long page = sysconf(_SC_PAGESIZE);
  if (getpid() != (pid_t)syscall(SYS_gettid) || !fn || page <= 0 ||
      (uintptr_t)fn < (uintptr_t)__libc_stack_end ||
      getrlimit(RLIMIT_STACK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
      !start_limit || start_limit == RLIM_INFINITY)
    return 0;
  rlim_t limit = rl.rlim_cur < start_limit ? rl.rlim_cur : start_limit;
  uintptr_t pg = (uintptr_t)page;
  uintptr_t top = ((uintptr_t)fn + strlen(fn) + 1 + pg - 1) & ~(pg - 1);
  uintptr_t size = (uintptr_t)limit & ~(pg - 1);
  char here;
  if (size >= top || (uintptr_t)&here >= top ||
      (uintptr_t)&here <= top - size)
    return 0;
  return top - size;
#else
  return 0;
#endif
}

static bool stack_left_enough(void) {
  size_t need = rt_kernel_stack();
  if (!stack_low) {
    stack_low = rt_main_stack_low();
    pthread_attr_t a;
    void *base;
    size_t size;
    /* (another thread's: from its descriptor; else from the mappings) */
    if (!stack_low && pthread_getattr_np(pthread_self(), &a) == 0) {
      if (pthread_attr_getstack(&a, &base, &size) == 0 && base)
        stack_low = (uintptr_t)base;
      pthread_attr_destroy(&a);
    }
    if (!stack_low)
      stack_low = 1;
  }
  char here;
  /* the queue's thread uses a few KiB of its own before the kernel runs */
  return stack_low > 1 && (uintptr_t)&here > stack_low &&
         (uintptr_t)&here - stack_low + (64u << 10) >= need;
}

static bool help_off;
static void read_help_env(void) {
  help_off = xpj_env_bool("XPJIT_QUEUE_HELP", 1) == 0;
}

static bool help_ok(const xpj_queue *q) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, read_help_env);
  return !help_off && !q->launch_timeout_ms && !in_command &&
         !pthread_equal(pthread_self(), q->thread) &&
         (q->dev->ops->sync || stack_left_enough());
}

/* A waiting thread's turn on a device with asynchronous streams (q->mu
 * held, the queue's thread idle, q->head set): what the queue's thread
 * would do, without its two wake-ups. Up to MAX_INFLIGHT launches, copies
 * and fills before the wait's target are submitted and synchronised once
 * (one at a time on a profiling queue: exact times); a host task, an
 * event wait or a cancelled command goes alone, as on the queue's thread.
 * Each is taken off the list only when its turn to be submitted comes, so
 * that xpj_queue_cancel still finds the others there. A command the
 * backend refuses completes after those before it, with its error.
 * Returns with q->mu held. */
static void help_streams(xpj_queue *q, uint64_t target) {
  cmd *fl[MAX_INFLIGHT];
  unsigned n = 0, done = 0; /* fl[0..done) finished, fl[done..n) submitted */
  for (;;) {
    if (n && n == done && q->running)
      break; /* ours all finished, and another thread has taken the next */
    cmd *c = q->head;
    bool alone = c && (c->type == CMD_WAIT || c->type == CMD_HOST ||
                       c->cancelled);
    if (!c || (n && (alone || (q->flags & XPJ_QUEUE_PROFILING) ||
                     n == MAX_INFLIGHT || q->completed + (n - done) >= target)))
      break;
    fl[n++] = take(q);
    pthread_mutex_unlock(&q->mu);
    xpj_status st = run_taken(q, c);
    if (st == XPJ_OK && !alone) {
      pthread_mutex_lock(&q->mu);
      continue; /* submitted: synchronised below */
    }
    char *msg = st == XPJ_OK ? NULL : strdup(xpj_last_error());
    unsigned k = n - 1 - done;
    drain(q, fl + done, &k); /* those before it first */
    finish(q, c, st, msg ? msg : xpj_status_name(st));
    free(msg);
    done = n;
    pthread_mutex_lock(&q->mu);
    if (alone)
      break;
  }
  pthread_mutex_unlock(&q->mu);
  unsigned k = n - done;
  drain(q, fl + done, &k);
  pthread_mutex_lock(&q->mu);
}

xpj_status xpj_queue_wait(xpj_queue *q) {
  if (!q)
    return rt_err(XPJ_ERR_INVALID, "xpj_queue_wait: queue is NULL");
  if (rt_inherited(q->dev->ctx)) /* (its commands' thread is the parent's) */
    return rt_err_inherited("xpj_queue_wait", "queue");
  if (q == command_queue)
    return rt_err(XPJ_ERR_INVALID, "xpj_queue_wait: called from a command "
                  "of the same queue, which would wait for itself");
  bool help = help_ok(q);
  pthread_mutex_lock(&q->mu);
  uint64_t target = q->submitted;
  while (q->completed < target) {
    if (help && q->head && !q->running && q->dev->ops->sync) {
      help_streams(q, target);
      continue;
    }
    if (help && q->head && !q->running) {
      cmd *c = take(q);
      pthread_mutex_unlock(&q->mu);
      xpj_status st = run_taken(q, c);
      finish(q, c, st, xpj_last_error());
      pthread_mutex_lock(&q->mu);
      continue;
    }
    pthread_cond_wait(&q->done, &q->mu);
  }
  xpj_status st = q->err;
  if (st != XPJ_OK)
    rt_err_str(st, q->errmsg ? q->errmsg : xpj_status_name(st));
  q->err = XPJ_OK;
  free(q->errmsg);
  q->errmsg = NULL;
  pthread_mutex_unlock(&q->mu);
  return st;
}

xpj_device *xpj_queue_device(const xpj_queue *q) { return q ? q->dev : NULL; }

/* Commands not started stay on the list, marked: each completes in its
 * turn without running (run_taken), so commands complete in the order
 * they were enqueued and a wait's count of them holds (finishing them
 * here, out of order, let xpj_queue_wait return before earlier commands
 * had finished); their events fail here at once. */
xpj_status xpj_queue_cancel(xpj_queue *q) {
  if (!q)
    return rt_err(XPJ_ERR_INVALID, "xpj_queue_cancel: queue is NULL");
  if (rt_inherited(q->dev->ctx))
    return rt_err_inherited("xpj_queue_cancel", "queue");
  pthread_mutex_lock(&q->mu);
  size_t n = 0;
  for (cmd *c = q->head; c; c = c->next)
    n += !c->cancelled;
  /* (without memory, the events fail when their commands' turn comes) */
  xpj_event **evs = n ? malloc(n * sizeof *evs) : NULL;
  size_t k = 0;
  for (cmd *c = q->head; c; c = c->next)
    if (!c->cancelled) {
      c->cancelled = true;
      if (evs) {
        atomic_fetch_add(&c->ev->refs, 1);
        evs[k++] = c->ev;
      }
    }
  cmd *r = q->running;
  char warn[512] = "";
  if (r && r->type == CMD_LAUNCH) {
    atomic_store(&r->u.launch->stop, true);
    if (q->dev->ops->cancel) /* under mu: r is not freed meanwhile */
      q->dev->ops->cancel(q->dev, q->bq, r->u.launch, warn, sizeof warn);
  }
  pthread_mutex_unlock(&q->mu);
  if (*warn)
    rt_warn("%s", warn);
  for (size_t i = 0; i < k; i++) {
    event_finish(evs[i], XPJ_ERR_CANCELLED, CANCELLED_MSG);
    xpj_event_release(evs[i]);
  }
  free(evs);
  return XPJ_OK;
}

/* Appends c (its event created here) and hands out a reference. */
static xpj_status submit(xpj_queue *q, cmd *c, xpj_event **ev) {
  c->ev = event_new(q);
  if (!c->ev) {
    cmd_free(c);
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  if (ev) {
    atomic_fetch_add(&c->ev->refs, 1);
    *ev = c->ev;
  }
  pthread_mutex_lock(&q->mu);
  if (q->tail)
    q->tail->next = c;
  else
    q->head = c;
  q->tail = c;
  q->submitted++;
  pthread_mutex_unlock(&q->mu);
  /* after the unlock: the queue's thread, woken, does not find the lock
   * still held (two more switches when it runs at once, as it does on a
   * busy machine); a submit races only a destroy, which the caller
   * orders after it */
  pthread_cond_signal(&q->work);
  return XPJ_OK;
}

static cmd *cmd_new(cmd_type t) {
  cmd *c = calloc(1, sizeof *c);
  if (c)
    c->type = t;
  return c;
}

/* Copies and fills must stay inside the allocation they start in, when
 * they start in one; that allocation is held in *hold (released by the
 * caller on failure, by cmd_free after the command). host_ok: plain host
 * memory is fine here (the host side of a copy); *plain says it is that. */
static xpj_status check_range(xpj_device *d, const char *what, const void *p,
                              size_t bytes, bool host_ok, bool *plain,
                              uintptr_t *hold) {
  rt_alloc a;
  if (plain)
    *plain = false;
  if (!p)
    return rt_err(XPJ_ERR_INVALID, "%s: pointer is NULL", what);
  if (rt_mem_hold(d, p, &a)) {
    *hold = a.base;
  } else {
    xpj_status st = rt_mem_check_retired(d, p, what);
    if (st != XPJ_OK)
      return st;
    xpj_device *o = rt_mem_other_device(d, p);
    if (o)
      return rt_err(XPJ_ERR_INVALID, "%s: %p is device memory of %s, not of "
                    "%s", what, p, o->id, d->id);
    if ((uintptr_t)p + bytes < (uintptr_t)p)
      return rt_err(XPJ_ERR_INVALID, "%s: %zu bytes at %p run past the end "
                    "of the address space", what, bytes, p);
    if ((o = rt_mem_entered(d, p, bytes)))
      return rt_err(XPJ_ERR_INVALID, "%s: %zu bytes at %p run into memory "
                    "allocated on %s that begins after %p", what, bytes, p,
                    o->id, p);
    if (plain)
      *plain = true;
    return d->info.backend == XPJ_BACKEND_CPU || host_ok
               ? XPJ_OK /* plain host memory: the CPU device takes it */
               : rt_err(XPJ_ERR_INVALID, "%s: %p is not memory of %s", what,
                        p, d->id);
  }
  if (bytes > a.bytes - ((uintptr_t)p - a.base))
    return rt_err(XPJ_ERR_INVALID,
                  "%s: %zu bytes at offset %zu run past the end of a "
                  "%zu-byte allocation",
                  what, bytes, (size_t)((uintptr_t)p - a.base), a.bytes);
  return XPJ_OK;
}

/* A new command of type t that owns holds, when the checks went well (st);
 * otherwise (or out of memory) the holds are let go and st returned. */
static xpj_status cmd_holding(xpj_queue *q, cmd_type t, xpj_status st,
                              const uintptr_t holds[2], cmd **out) {
  cmd *c = st == XPJ_OK ? cmd_new(t) : NULL;
  if (st == XPJ_OK && !c)
    st = rt_err(XPJ_ERR_NOMEM, "out of memory");
  if (st != XPJ_OK) {
    for (int i = 0; i < 2; i++)
      if (holds[i])
        rt_mem_release(q->dev, holds[i]);
    return st;
  }
  c->dev = q->dev;
  memcpy(c->holds, holds, sizeof c->holds);
  *out = c;
  return XPJ_OK;
}

xpj_status xpj_enqueue_copy(xpj_queue *q, void *dst, const void *src,
                            size_t bytes, xpj_event **ev) {
  if (ev)
    *ev = NULL;
  if (!q)
    return rt_err(XPJ_ERR_INVALID, "xpj_enqueue_copy: queue is NULL");
  if (rt_inherited(q->dev->ctx))
    return rt_err_inherited("xpj_enqueue_copy", "queue");
  xpj_status st;
  bool dplain, splain = false;
  uintptr_t holds[2] = {0, 0};
  if ((st = check_range(q->dev, "xpj_enqueue_copy: destination", dst, bytes,
                        true, &dplain, &holds[0])) == XPJ_OK)
    st = check_range(q->dev, "xpj_enqueue_copy: source", src, bytes, true,
                     &splain, &holds[1]);
  if (st == XPJ_OK && dplain && splain &&
      q->dev->info.backend != XPJ_BACKEND_CPU)
    st = rt_err(XPJ_ERR_INVALID,
                "xpj_enqueue_copy: neither %p nor %p is memory of %s (one "
                "side of a copy may be plain host memory, not both)",
                dst, src, q->dev->id);
  if (st == XPJ_OK && bytes && (uintptr_t)dst < (uintptr_t)src + bytes &&
      (uintptr_t)src < (uintptr_t)dst + bytes)
    st = rt_err(XPJ_ERR_INVALID, "xpj_enqueue_copy: the ranges overlap");
  cmd *c = NULL;
  if ((st = cmd_holding(q, CMD_COPY, st, holds, &c)) != XPJ_OK)
    return st;
  c->u.copy.dst = dst;
  c->u.copy.src = src;
  c->u.copy.bytes = bytes;
  return submit(q, c, ev);
}

xpj_status xpj_enqueue_fill(xpj_queue *q, void *dst, const void *pattern,
                            size_t pattern_size, size_t bytes,
                            xpj_event **ev) {
  if (ev)
    *ev = NULL;
  if (!q || !pattern)
    return rt_err(XPJ_ERR_INVALID, "xpj_enqueue_fill: NULL argument");
  if (rt_inherited(q->dev->ctx))
    return rt_err_inherited("xpj_enqueue_fill", "queue");
  if (pattern_size == 0 || pattern_size > 128 ||
      (pattern_size & (pattern_size - 1)))
    return rt_err(XPJ_ERR_INVALID,
                  "xpj_enqueue_fill: pattern size %zu is not a power of two "
                  "from 1 to 128",
                  pattern_size);
  if (bytes % pattern_size)
    return rt_err(XPJ_ERR_INVALID,
                  "xpj_enqueue_fill: %zu bytes is not a multiple of the "
                  "pattern size %zu",
                  bytes, pattern_size);
  if ((uintptr_t)dst % pattern_size)
    return rt_err(XPJ_ERR_INVALID,
                  "xpj_enqueue_fill: destination is not aligned to the "
                  "pattern size %zu",
                  pattern_size);
  uintptr_t holds[2] = {0, 0};
  xpj_status st = check_range(q->dev, "xpj_enqueue_fill", dst, bytes, false,
                              NULL, &holds[0]);
  cmd *c = NULL;
  if ((st = cmd_holding(q, CMD_FILL, st, holds, &c)) != XPJ_OK)
    return st;
  c->u.fill.dst = dst;
  memcpy(c->u.fill.pattern, pattern, pattern_size);
  c->u.fill.psize = pattern_size;
  c->u.fill.bytes = bytes;
  return submit(q, c, ev);
}

xpj_status xpj_enqueue_wait_events(xpj_queue *q, unsigned n,
                                   xpj_event *const *events, xpj_event **ev) {
  if (ev)
    *ev = NULL;
  if (!q || (n && !events))
    return rt_err(XPJ_ERR_INVALID, "xpj_enqueue_wait_events: NULL argument");
  if (rt_inherited(q->dev->ctx))
    return rt_err_inherited("xpj_enqueue_wait_events", "queue");
  for (unsigned i = 0; i < n; i++) {
    if (!events[i])
      return rt_err(XPJ_ERR_INVALID,
                    "xpj_enqueue_wait_events: event %u is NULL", i);
    if (event_inherited(events[i]))
      return rt_err_inherited("xpj_enqueue_wait_events", "event");
    if (events[i]->ctx_id != (uintptr_t)q->dev->ctx)
      return rt_err(XPJ_ERR_INVALID, "xpj_enqueue_wait_events: event %u is "
                    "of another context", i);
  }
  cmd *c = cmd_new(CMD_WAIT);
  xpj_event **evs = n ? malloc(n * sizeof *evs) : NULL;
  if (!c || (n && !evs)) {
    free(c);
    free(evs);
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  for (unsigned i = 0; i < n; i++) {
    atomic_fetch_add(&events[i]->refs, 1);
    evs[i] = events[i];
  }
  c->u.wait.n = n;
  c->u.wait.evs = evs;
  return submit(q, c, ev);
}

xpj_status xpj_enqueue_host_task(xpj_queue *q, int (*fn)(void *user),
                                 void *user, xpj_event **ev) {
  if (ev)
    *ev = NULL;
  if (!q || !fn)
    return rt_err(XPJ_ERR_INVALID, "xpj_enqueue_host_task: NULL argument");
  if (rt_inherited(q->dev->ctx))
    return rt_err_inherited("xpj_enqueue_host_task", "queue");
  cmd *c = cmd_new(CMD_HOST);
  if (!c)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  c->u.host.fn = fn;
  c->u.host.user = user;
  return submit(q, c, ev);
}

xpj_status rt_queue_launch(xpj_queue *q, rt_launch *l, xpj_event **ev) {
  cmd *c = cmd_new(CMD_LAUNCH);
  if (!c) {
    rt_launch_free(l);
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  l->timeout_ms = q->launch_timeout_ms;
  c->u.launch = l;
  return submit(q, c, ev);
}
