/* test_threads.c - the public API from many threads at once, checked for
 * results and, under `make tsan`, for data races: bundles added while other
 * threads look kernels up in them, a warning handler that re-enters the
 * library, and a mixed stress (queues, memory, launches, programs, cache
 * counters, warnings) on the CPU device with every result verified.
 *
 * Kernels are compiled once, single-threaded, in the set-up and exported as
 * bundles, so the threaded phases never fork a compiler worker (forking a
 * multi-threaded process is what sanitizers handle worst). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "xpjit.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NKERNELS 16
static const char *const dtypes[] = {"T=f32", "T=f64", "T=i32"};
#define NDTYPES 3
#define N 1000

static char dir[256];
static char *source;        /* NKERNELS kernels k0..k15 */
static char hit_bundle[300];  /* every kI for every dtype */
static char miss_bundle[300]; /* one other kernel: accepted, never a hit */

static char *path_in(const char *name) {
  static char p[4][300];
  static int i;
  char *r = p[i++ % 4];
  snprintf(r, 300, "%s/%s", dir, name);
  return r;
}

/* kI<T>(a, x): x[i] = x[i] * a + I */
static char *make_source(void) {
  size_t cap = 256 * NKERNELS, n = 0;
  char *s = malloc(cap);
  assert_non_null(s);
  for (int k = 0; k < NKERNELS; k++)
    n += (size_t)snprintf(s + n, cap - n,
                          "kernel k%d<T>(a: T, x: global T[]) range {\n"
                          "    let i = global_id(0);\n"
                          "    x[i] = x[i] * a + T(%d);\n"
                          "}\n",
                          k, k);
  return s;
}

/* A context with its own cache file at path, no bundles from the
 * environment, and no daemon. */
static xpj_context *context_at(const char *path, xpj_cache_mode mode) {
  xpj_context_desc d = {.visible = "cpu", .cache_mode = mode,
                        .cache_path = path, .no_env_bundles = 1};
  xpj_context *c = NULL;
  assert_int_equal(xpj_context_create(&d, &c), XPJ_OK);
  return c;
}

/* Compiles every (kernel, dtype) of src into a fresh cache and exports it
 * as a bundle at out. */
static void build_bundle(const char *src, const char *cache, const char *out,
                         int nkernels) {
  xpj_context *c = context_at(cache, XPJ_CACHE_MODE_RW);
  xpj_device *dev = NULL;
  assert_int_equal(xpj_device_select(c, "cpu", &dev), XPJ_OK);
  xpj_program *p = NULL;
  assert_int_equal(xpj_program_create(c, "t.xpk", src, strlen(src), NULL, &p),
                   XPJ_OK);
  for (int k = 0; k < nkernels; k++)
    for (int t = 0; t < NDTYPES; t++) {
      char name[16];
      snprintf(name, sizeof name, "k%d", k);
      xpj_kernel *kr = NULL;
      assert_int_equal(xpj_program_get_kernel(p, name, dtypes[t], 0, dev,
                                              NULL, &kr),
                       XPJ_OK);
    }
  xpj_program_destroy(p);
  uint64_t n = 0;
  assert_int_equal(xpj_cache_export(xpj_context_cache(c), out, &n), XPJ_OK);
  assert_int_equal(n, (uint64_t)nkernels * NDTYPES);
  xpj_context_destroy(c);
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/xpjit-threads-XXXXXX");
  if (!mkdtemp(dir))
    return -1;
  setenv("XPJIT_DAEMON", "off", 1);
  source = make_source();
  snprintf(hit_bundle, sizeof hit_bundle, "%s/hit.xpb", dir);
  snprintf(miss_bundle, sizeof miss_bundle, "%s/miss.xpb", dir);
  build_bundle(source, path_in("hit.db"), hit_bundle, NKERNELS);
  static const char other[] =
      "kernel k0<T>(a: T, x: global T[]) range {\n"
      "    let i = global_id(0);\n"
      "    x[i] = x[i] - a;\n"
      "}\n";
  build_bundle(other, path_in("miss.db"), miss_bundle, 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  free(source);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Runs kernel kK with dtype t on q over a fresh allocation and checks
 * every element; false (with a message) on any difference. */
static bool run_and_check(xpj_device *dev, xpj_queue *q, xpj_kernel *kr,
                          int k, int t) {
  size_t es = t == 1 ? 8 : 4;
  void *x = NULL;
  if (xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * es, 0, &x) != XPJ_OK)
    return false;
  for (int i = 0; i < N; i++) {
    if (t == 0)
      ((float *)x)[i] = (float)i;
    else if (t == 1)
      ((double *)x)[i] = i;
    else
      ((int32_t *)x)[i] = i;
  }
  xpj_scalar s = t == 0 ? XPJ_F32 : t == 1 ? XPJ_F64 : XPJ_I32;
  xpj_array a = xpj_array_1d(x, s, N);
  xpj_arg args[2] = {t == 0   ? xpj_arg_f32(2.0f)
                     : t == 1 ? xpj_arg_f64(2.0)
                              : xpj_arg_i32(2),
                     xpj_arg_array(&a)};
  xpj_range r = xpj_range_1d(N, 0);
  bool ok = xpj_launch(q, kr, &r, 2, args, NULL) == XPJ_OK &&
            xpj_queue_wait(q) == XPJ_OK;
  for (int i = 0; ok && i < N; i++) {
    double want = 2.0 * i + k;
    double got = t == 0 ? ((float *)x)[i]
                 : t == 1 ? ((double *)x)[i]
                          : ((int32_t *)x)[i];
    if (got != want) {
      fprintf(stderr, "k%d %s: x[%d] = %g, expected %g\n", k, dtypes[t], i,
              got, want);
      ok = false;
    }
  }
  xpj_mem_free(dev, x);
  return ok;
}

/* ---- bundles added while others look kernels up ---- */

typedef struct shared {
  xpj_context *ctx;
  xpj_device *dev;
  atomic_int failures;
  atomic_bool stop;
  int next_key; /* under mu */
  pthread_mutex_t mu;
} shared;

static void *add_bundles(void *arg) {
  shared *sh = arg;
  for (int i = 0; i < 200 && !atomic_load(&sh->stop); i++)
    if (xpj_context_add_bundle(sh->ctx, miss_bundle) != XPJ_OK) {
      fprintf(stderr, "add_bundle: %s\n", xpj_last_error());
      atomic_fetch_add(&sh->failures, 1);
    }
  return NULL;
}

static void *get_kernels(void *arg) {
  shared *sh = arg;
  xpj_queue *q = NULL;
  if (xpj_queue_create(sh->dev, NULL, &q) != XPJ_OK) {
    atomic_fetch_add(&sh->failures, 1);
    return NULL;
  }
  xpj_program *p = NULL;
  if (xpj_program_create(sh->ctx, "t.xpk", source, strlen(source), NULL,
                         &p) != XPJ_OK) {
    atomic_fetch_add(&sh->failures, 1);
    xpj_queue_destroy(q);
    return NULL;
  }
  for (;;) {
    pthread_mutex_lock(&sh->mu);
    int key = sh->next_key++;
    pthread_mutex_unlock(&sh->mu);
    if (key >= NKERNELS * NDTYPES)
      break;
    int k = key / NDTYPES, t = key % NDTYPES;
    char name[16];
    snprintf(name, sizeof name, "k%d", k);
    xpj_kernel *kr = NULL;
    xpj_kernel_info info;
    if (xpj_program_get_kernel(p, name, dtypes[t], 0, sh->dev, NULL, &kr) !=
            XPJ_OK ||
        xpj_kernel_get_info(kr, &info) != XPJ_OK ||
        info.origin != XPJ_ORIGIN_BUNDLE || !run_and_check(sh->dev, q, kr, k, t)) {
      fprintf(stderr, "k%d %s: %s\n", k, dtypes[t], xpj_last_error());
      atomic_fetch_add(&sh->failures, 1);
    }
  }
  xpj_program_destroy(p);
  xpj_queue_destroy(q);
  return NULL;
}

/* issue 15: xpj_context_add_bundle realloc'd the bundle array while
 * lookups read it without the lock. The hit bundle sits behind 40 that
 * miss, so every lookup walks the list while it grows. */
static void test_add_bundle_during_lookups(void **state) {
  (void)state;
  shared sh = {.mu = PTHREAD_MUTEX_INITIALIZER};
  sh.ctx = context_at(path_in("off.db"), XPJ_CACHE_MODE_OFF);
  assert_int_equal(xpj_device_select(sh.ctx, "cpu", &sh.dev), XPJ_OK);
  for (int i = 0; i < 40; i++)
    assert_int_equal(xpj_context_add_bundle(sh.ctx, miss_bundle), XPJ_OK);
  assert_int_equal(xpj_context_add_bundle(sh.ctx, hit_bundle), XPJ_OK);
  pthread_t adder, getters[4];
  assert_int_equal(pthread_create(&adder, NULL, add_bundles, &sh), 0);
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&getters[i], NULL, get_kernels, &sh), 0);
  for (int i = 0; i < 4; i++)
    pthread_join(getters[i], NULL);
  atomic_store(&sh.stop, true);
  pthread_join(adder, NULL);
  assert_int_equal(atomic_load(&sh.failures), 0);
  xpj_cache_counters cnt;
  assert_int_equal(xpj_context_cache_counters(sh.ctx, &cnt), XPJ_OK);
  assert_int_equal(cnt.bundle_hits, (uint64_t)NKERNELS * NDTYPES);
  assert_int_equal(cnt.compiles, 0);
  xpj_context_destroy(sh.ctx);
}

/* ---- a warning handler that re-enters the library ---- */

static atomic_int reentered;
static void quiet(void *ud, const char *msg) {
  (void)ud;
  (void)msg;
}
static void reentrant(void *ud, const char *msg) {
  (void)msg;
  /* replacing the handler from inside it, and warning again, must not
   * deadlock (the handler was called with the library's lock held) */
  xpj_set_warning_handler(quiet, ud);
  xpj_context *c = NULL;
  xpj_context_desc d = {.visible = "cpu", .cache_mode = XPJ_CACHE_MODE_OFF,
                        .no_env_bundles = 1};
  if (xpj_context_create(&d, &c) == XPJ_OK)
    xpj_context_destroy(c);
  atomic_fetch_add(&reentered, 1);
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "test_threads: deadlocked (no progress in 60 s)\n";
  ssize_t r = write(2, msg, sizeof msg - 1);
  (void)r;
  _exit(1);
}

static void test_warning_handler_reenters(void **state) {
  (void)state;
  signal(SIGALRM, on_alarm);
  alarm(60);
  atomic_store(&reentered, 0);
  xpj_set_warning_handler(reentrant, NULL);
  /* a bundle from the environment that does not exist: one warning */
  setenv("XPJIT_BUNDLE_PATH", path_in("missing.xpb"), 1);
  xpj_context_desc d = {.visible = "cpu", .cache_mode = XPJ_CACHE_MODE_OFF};
  xpj_context *c = NULL;
  assert_int_equal(xpj_context_create(&d, &c), XPJ_OK);
  unsetenv("XPJIT_BUNDLE_PATH");
  xpj_context_destroy(c);
  alarm(0);
  assert_int_equal(atomic_load(&reentered), 1);
  xpj_set_warning_handler(NULL, NULL);
}

/* ---- replacing a handler waits for its calls in flight ---- */

/* The handler's ud: the handler, on the thread that warns, says it is in
 * and waits at a gate the test opens; the thread that replaces the handler
 * records whether the handler had returned when the replacement did. */
typedef struct {
  atomic_int entered, open, returned;
  atomic_int replaced;       /* xpj_set_warning_handler(NULL) returned */
  atomic_int returned_first; /* ... and the handler had returned by then */
} gate;

static void gated(void *ud, const char *msg) {
  (void)msg;
  gate *g = ud;
  atomic_store(&g->entered, 1);
  while (!atomic_load(&g->open))
    usleep(1000);
  atomic_store(&g->returned, 1);
}

static void *warn_once(void *arg) {
  (void)arg;
  xpj_context_desc d = {.visible = "cpu",
                        .cache_path = "/proc/xpjit-no/such/cache.db",
                        .no_env_bundles = 1};
  xpj_context *c = NULL;
  if (xpj_context_create(&d, &c) == XPJ_OK) {
    (void)xpj_context_cache(c); /* cannot be made: a warning */
    xpj_context_destroy(c);
  }
  return NULL;
}

static void *replace_handler(void *arg) {
  gate *g = arg;
  xpj_set_warning_handler(NULL, NULL);
  atomic_store(&g->returned_first, atomic_load(&g->returned));
  atomic_store(&g->replaced, 1);
  return NULL;
}

static void test_replace_waits_for_handler(void **state) {
  (void)state;
  signal(SIGALRM, on_alarm);
  alarm(60);
  gate *g = calloc(1, sizeof *g);
  assert_non_null(g);
  xpj_set_warning_handler(gated, g);
  pthread_t warner, replacer;
  assert_int_equal(pthread_create(&warner, NULL, warn_once, NULL), 0);
  while (!atomic_load(&g->entered))
    usleep(1000);
  assert_int_equal(pthread_create(&replacer, NULL, replace_handler, g), 0);
  /* the handler is held at its gate: the replacement must not return */
  usleep(300 * 1000);
  assert_int_equal(atomic_load(&g->replaced), 0);
  atomic_store(&g->open, 1);
  pthread_join(replacer, NULL);
  assert_int_equal(atomic_load(&g->returned_first), 1);
  pthread_join(warner, NULL);
  alarm(0);
  free(g); /* what the guarantee is for (ASan would see a late call) */
}

/* ---- mixed stress ---- */

static atomic_int warned;
static void count_warning(void *ud, const char *msg) {
  (void)ud;
  (void)msg;
  atomic_fetch_add(&warned, 1);
}

static void *stress_launches(void *arg) {
  shared *sh = arg;
  for (int it = 0; it < 12 && !atomic_load(&sh->stop); it++) {
    xpj_queue *q = NULL;
    xpj_program *p = NULL;
    if (xpj_queue_create(sh->dev, NULL, &q) != XPJ_OK ||
        xpj_program_create(sh->ctx, "t.xpk", source, strlen(source), NULL,
                           &p) != XPJ_OK) {
      atomic_fetch_add(&sh->failures, 1);
      xpj_queue_destroy(q);
      break;
    }
    for (int j = 0; j < 6; j++) {
      int k = (it * 7 + j * 3) % NKERNELS, t = (it + j) % NDTYPES;
      char name[16];
      snprintf(name, sizeof name, "k%d", k);
      xpj_kernel *kr = NULL;
      if (xpj_program_get_kernel(p, name, dtypes[t], 0, sh->dev, NULL,
                                 &kr) != XPJ_OK ||
          !run_and_check(sh->dev, q, kr, k, t)) {
        fprintf(stderr, "stress k%d %s: %s\n", k, dtypes[t],
                xpj_last_error());
        atomic_fetch_add(&sh->failures, 1);
      }
    }
    xpj_program_destroy(p);
    xpj_queue_destroy(q);
  }
  return NULL;
}

/* contexts whose cache cannot be created: each warns once */
static void *stress_warnings(void *arg) {
  shared *sh = arg;
  for (int it = 0; it < 20 && !atomic_load(&sh->stop); it++) {
    xpj_set_warning_handler(it % 2 ? count_warning : NULL, NULL);
    xpj_set_warning_handler(count_warning, NULL);
    xpj_context_desc d = {.visible = "cpu",
                          .cache_path = "/proc/xpjit-no/such/cache.db",
                          .no_env_bundles = 1};
    xpj_context *c = NULL;
    if (xpj_context_create(&d, &c) != XPJ_OK) {
      atomic_fetch_add(&sh->failures, 1);
      break;
    }
    (void)xpj_context_cache(c);
    xpj_context_destroy(c);
  }
  return NULL;
}

static void *stress_counters(void *arg) {
  shared *sh = arg;
  while (!atomic_load(&sh->stop)) {
    xpj_cache_counters cnt;
    if (xpj_context_cache_counters(sh->ctx, &cnt) != XPJ_OK)
      atomic_fetch_add(&sh->failures, 1);
    usleep(1000);
  }
  return NULL;
}

static void test_mixed_stress(void **state) {
  (void)state;
  atomic_store(&warned, 0);
  xpj_set_warning_handler(count_warning, NULL);
  shared sh = {.mu = PTHREAD_MUTEX_INITIALIZER};
  sh.ctx = context_at(path_in("stress.db"), XPJ_CACHE_MODE_RW);
  assert_int_equal(xpj_device_select(sh.ctx, "cpu", &sh.dev), XPJ_OK);
  assert_int_equal(xpj_context_add_bundle(sh.ctx, hit_bundle), XPJ_OK);
  enum { NL = 6 };
  pthread_t launches[NL], warner, counter, adder;
  for (int i = 0; i < NL; i++)
    assert_int_equal(pthread_create(&launches[i], NULL, stress_launches, &sh),
                     0);
  assert_int_equal(pthread_create(&warner, NULL, stress_warnings, &sh), 0);
  assert_int_equal(pthread_create(&counter, NULL, stress_counters, &sh), 0);
  assert_int_equal(pthread_create(&adder, NULL, add_bundles, &sh), 0);
  for (int i = 0; i < NL; i++)
    pthread_join(launches[i], NULL);
  pthread_join(warner, NULL);
  atomic_store(&sh.stop, true);
  pthread_join(counter, NULL);
  pthread_join(adder, NULL);
  xpj_set_warning_handler(NULL, NULL);
  assert_int_equal(atomic_load(&sh.failures), 0);
  assert_true(atomic_load(&warned) >= 20);
  xpj_cache_counters cnt;
  assert_int_equal(xpj_context_cache_counters(sh.ctx, &cnt), XPJ_OK);
  assert_int_equal(cnt.compiles, 0);
  xpj_context_destroy(sh.ctx);
}

/* One queue, several threads that submit to it and wait on it (queue.c,
 * help_ok: a waiting thread runs the queue's commands itself). Every
 * command must still run once, in submission order, and never on two
 * threads at once; kernels launched among them must give their results;
 * some command must have run on a waiting thread (after 4 x 300 waits,
 * anything else means helping never happens); and a thread with a small
 * stack never runs one. */
typedef struct order {
  xpj_device *dev;
  xpj_queue *q;
  xpj_kernel *kr;
  pthread_mutex_t mu;      /* submission order = seq */
  long seq;                /* next number handed out */
  atomic_long ran;         /* host tasks run so far */
  atomic_int inside;       /* host tasks running now */
  atomic_int failures, on_waiter, on_small;
} order;

static _Thread_local bool small_stack; /* set by the small-stack thread */

typedef struct step {
  order *o;
  long seq;
  pthread_t waiter; /* the thread that will wait for it */
} step;

static int ordered_task(void *user) {
  step *s = user;
  order *o = s->o;
  if (atomic_fetch_add(&o->inside, 1) != 0)
    atomic_fetch_add(&o->failures, 1); /* two commands at once */
  if (atomic_fetch_add(&o->ran, 1) != s->seq)
    atomic_fetch_add(&o->failures, 1); /* out of order */
  if (pthread_equal(pthread_self(), s->waiter))
    atomic_fetch_add(&o->on_waiter, 1);
  if (small_stack)
    atomic_fetch_add(&o->on_small, 1);
  atomic_fetch_sub(&o->inside, 1);
  free(s);
  return 0;
}

static void *submit_and_wait(void *arg) {
  order *o = arg;
  for (int i = 0; i < 300; i++) {
    step *s = malloc(sizeof *s);
    if (!s) {
      atomic_fetch_add(&o->failures, 1);
      return NULL;
    }
    *s = (step){o, 0, pthread_self()};
    pthread_mutex_lock(&o->mu);
    s->seq = o->seq++;
    xpj_status st = xpj_enqueue_host_task(o->q, ordered_task, s, NULL);
    pthread_mutex_unlock(&o->mu);
    if (st != XPJ_OK) {
      free(s);
      atomic_fetch_add(&o->failures, 1);
      return NULL;
    }
    if (i % 10 == 0 && !run_and_check(o->dev, o->q, o->kr, 3, 0))
      atomic_fetch_add(&o->failures, 1);
    else if (xpj_queue_wait(o->q) != XPJ_OK)
      atomic_fetch_add(&o->failures, 1);
  }
  return NULL;
}

static void *submit_and_wait_small(void *arg) {
  small_stack = true;
  return submit_and_wait(arg);
}

static void test_waiters_run_commands(void **state) {
  (void)state;
  order o = {.mu = PTHREAD_MUTEX_INITIALIZER};
  xpj_context *ctx = context_at(path_in("order.db"), XPJ_CACHE_MODE_RW);
  assert_int_equal(xpj_device_select(ctx, "cpu", &o.dev), XPJ_OK);
  assert_int_equal(xpj_context_add_bundle(ctx, hit_bundle), XPJ_OK);
  xpj_program *p = NULL;
  assert_int_equal(
      xpj_program_create(ctx, "t.xpk", source, strlen(source), NULL, &p),
      XPJ_OK);
  assert_int_equal(
      xpj_program_get_kernel(p, "k3", dtypes[0], 0, o.dev, NULL, &o.kr),
      XPJ_OK);
  assert_int_equal(xpj_queue_create(o.dev, NULL, &o.q), XPJ_OK);
  enum { NW = 4 };
  pthread_t w[NW];
  for (int i = 0; i < NW; i++)
    assert_int_equal(pthread_create(&w[i], NULL, submit_and_wait, &o), 0);
  /* and one with a 512 KiB stack: too small to run kernels on */
  pthread_attr_t a;
  pthread_t small;
  pthread_attr_init(&a);
  assert_int_equal(pthread_attr_setstacksize(&a, 512 << 10), 0);
  assert_int_equal(pthread_create(&small, &a, submit_and_wait_small, &o), 0);
  pthread_attr_destroy(&a);
  for (int i = 0; i < NW; i++)
    pthread_join(w[i], NULL);
  pthread_join(small, NULL);
  assert_int_equal(xpj_queue_wait(o.q), XPJ_OK);
  assert_int_equal(atomic_load(&o.failures), 0);
  assert_int_equal(atomic_load(&o.ran), (NW + 1) * 300);
  assert_true(atomic_load(&o.on_waiter) > 0);
  assert_int_equal(atomic_load(&o.on_small), 0);
  xpj_queue_destroy(o.q);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
}

/* ---- cancels while other threads wait (queue.c) ------------------------
 *
 * Threads enqueue host tasks on one queue and wait for it while another
 * cancels it again and again: after each wait, every command the thread
 * enqueued before it has finished (complete, or failed as cancelled), and
 * a task ran exactly when its event says complete. Cancelled commands once
 * completed out of order, and a wait could return before earlier commands
 * had finished (found by a stress program; 8 threads x 5000 waits failed
 * in most runs). */
typedef struct cancel_run {
  xpj_queue *q;
  atomic_bool done;
  atomic_int bad;
} cancel_run;

static int count_task(void *u) {
  atomic_fetch_add((atomic_int *)u, 1);
  return 0;
}

static void *cancel_waiter(void *arg) {
  cancel_run *cr = arg;
  for (int i = 0; i < 2500 && !atomic_load(&cr->bad); i++) {
    atomic_int ran = 0;
    xpj_event *ev[4];
    for (int k = 0; k < 4; k++)
      if (xpj_enqueue_host_task(cr->q, count_task, &ran, &ev[k]) != XPJ_OK) {
        atomic_store(&cr->bad, 1);
        return NULL;
      }
    xpj_status st = xpj_queue_wait(cr->q);
    int complete = 0;
    for (int k = 0; k < 4; k++) {
      xpj_event_state s = xpj_event_query(ev[k]);
      if (s != XPJ_EVENT_COMPLETE && s != XPJ_EVENT_FAILED)
        atomic_store(&cr->bad, 2); /* the wait returned before it finished */
      complete += s == XPJ_EVENT_COMPLETE;
      xpj_event_release(ev[k]);
    }
    /* a cancelled task never runs; the others run once */
    if (complete != atomic_load(&ran) ||
        (st != XPJ_OK && st != XPJ_ERR_CANCELLED))
      atomic_store(&cr->bad, 3);
  }
  return NULL;
}

static void *cancel_often(void *arg) {
  cancel_run *cr = arg;
  while (!atomic_load(&cr->done)) {
    xpj_queue_cancel(cr->q);
    usleep((useconds_t)(rand() % 50));
  }
  return NULL;
}

static void test_cancel_while_waiting(void **state) {
  (void)state;
  xpj_context *ctx = context_at(path_in("cancel.db"), XPJ_CACHE_MODE_OFF);
  xpj_device *dev = NULL;
  assert_int_equal(xpj_device_select(ctx, "cpu", &dev), XPJ_OK);
  cancel_run cr = {.bad = 0};
  atomic_init(&cr.done, false);
  assert_int_equal(xpj_queue_create(dev, NULL, &cr.q), XPJ_OK);
  enum { NW = 6 };
  pthread_t w[NW], c;
  for (int i = 0; i < NW; i++)
    assert_int_equal(pthread_create(&w[i], NULL, cancel_waiter, &cr), 0);
  assert_int_equal(pthread_create(&c, NULL, cancel_often, &cr), 0);
  for (int i = 0; i < NW; i++)
    pthread_join(w[i], NULL);
  atomic_store(&cr.done, true);
  pthread_join(c, NULL);
  xpj_queue_wait(cr.q);
  xpj_queue_destroy(cr.q);
  xpj_context_destroy(ctx);
  assert_int_equal(atomic_load(&cr.bad), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_add_bundle_during_lookups),
      cmocka_unit_test(test_warning_handler_reenters),
      cmocka_unit_test(test_replace_waits_for_handler),
      cmocka_unit_test(test_mixed_stress),
      cmocka_unit_test(test_waiters_run_commands),
      cmocka_unit_test(test_cancel_while_waiting),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
