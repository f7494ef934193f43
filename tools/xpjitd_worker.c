/* xpjitd_worker.c - a compile worker of xpjitd (`xpjitd --worker`): reads
 * JOB frames on fd 0, looks in the remote tiers (the cluster's Redis) or
 * compiles (rt_cc_serve), writes RESULT frames on fd 1, one at a time,
 * until its daemon closes the pipe. It resolves and keys each job
 * with the same code as the runtime and the daemon (rt_program_keyed) and
 * refuses a job whose key differs from the one the daemon sent. A crash
 * or a hang here costs the daemon one job and this process, nothing
 * more: the daemon sees the pipe close or the deadline pass.
 *
 * XPJIT_WORKER_FAULT=crash|hang|exit[:KERNEL] is a test hook
 * (docs/testing.md): the worker crashes, hangs or exits when it is given
 * a job (for KERNEL only, when named). Never set in production. */
#define _GNU_SOURCE
#include "daemon.h"
#include "proto.h"
#include "tier.h"
#include "worker.h"
#include "xpjit.h"
#include "xpjitd.h"

#include <nettle/sha2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>


static void fault_hook(const char *kernel) {
  const char *f = getenv("XPJIT_WORKER_FAULT");
  if (!f || !*f)
    return;
  const char *colon = strchr(f, ':');
  size_t mode_len = colon ? (size_t)(colon - f) : strlen(f);
  if (colon && strcmp(colon + 1, kernel))
    return;
  if (mode_len == 5 && !strncmp(f, "crash", 5))
    raise(SIGSEGV);
  else if (mode_len == 4 && !strncmp(f, "hang", 4))
    for (;;)
      pause();
  else if (mode_len == 4 && !strncmp(f, "exit", 4))
    _exit(3);
}

/* The programs of the last jobs, parsed: the kernels of one program
 * come in a row. At most WORKER_PROGS_BYTES of their sources (the last
 * program whatever its size): a parsed program takes about 27 times its
 * source, and what this process keeps counts against its memory limit.
 * Eight programs of any size (an outside probe: 8 x 3.3 MiB kept 810 MB
 * here for good, and under a 750 MB limit the next program's compile
 * failed 'out of memory', remembered for every process for 10 minutes,
 * where a fresh worker compiled it). */
#define WORKER_PROGS_BYTES (XPD_MAX_SOURCE / 2)
static xpjitd_progs progs = {.cap = 8, .max_bytes = WORKER_PROGS_BYTES,
                             .mu = PTHREAD_MUTEX_INITIALIZER,
                             .cv = PTHREAD_COND_INITIALIZER};

static bool reply(const xpd_kernel *k) {
  xpd_buf b = {0};
  xpd_begin(&b, XPD_RESULT, 0);
  xpd_put_kernel(&b, k);
  bool ok = xpd_end(&b, 0) &&
            xpd_write_all(1, b.p, b.len, xpd_now_ms() + 60000);
  xpd_buf_free(&b);
  return ok;
}

static bool fail(const char *digest, xpj_status s, const char *msg) {
  xpd_kernel k = {0};
  k.status = (uint64_t)s;
  k.v.failed = 1;
  k.transient = 1;
  k.v.log = msg;
  snprintf(k.digest, sizeof k.digest, "%s", digest);
  return reply(&k);
}

int xpjitd_worker_main(void) {
  /* started from /proc/self/exe, it would be "exe" in ps and top */
  prctl(PR_SET_NAME, "xpjitd-worker");
  /* it ends with the daemon, also in a compile that never ends (the
   * daemon, which would have killed it at its time limit, is gone): the
   * daemon spawns its workers from its only thread, whose end is the
   * process's. One that ended before this line was checked: the parent
   * is another process by now. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const char *parent = getenv("XPJITD_PARENT");
  if (!parent || getppid() != (pid_t)strtol(parent, NULL, 10))
    return 1;
  /* bounded like every compile worker (docs/abi.md, Isolation) */
  (void)xpj_compile_limit_memory();
  /* what a compile allocated stays with this process for the next one */
  xpj_worker_keep_heap();
  setenv("XPJIT_DAEMON", "off", 1);
  xpj_context_desc desc = {0};
  desc.cpu_threads = 1;
  desc.no_env_bundles = 1;
  desc.visible = "cpu"; /* it compiles; it opens no GPU driver */
  desc.cache_mode = XPJ_CACHE_MODE_OFF;
  /* the Redis tier: XPJIT_REDIS, which the daemon set from its own
   * settings (checked at its start) */
  xpj_context *ctx = NULL;
  if (xpj_context_create(&desc, &ctx) != XPJ_OK) {
    fprintf(stderr, "xpjitd worker: %s\n", xpj_last_error());
    return 1;
  }
  int rc = 0;
  for (;;) {
    xpd_header h;
    uint8_t *pl = NULL;
    char err[256];
    xpd_err e = xpd_read_frame(0, XPD_MAX_REQUEST, UINT64_MAX / 2, &h, &pl,
                               err, sizeof err);
    if (e == XPD_E_SHORT) /* the daemon closed the pipe */
      break;
    xpd_msg m;
    xpd_get g;
    if (e != XPD_E_OK || h.op != XPD_JOB ||
        xpd_payload_decode(pl, h.len, &m) != XPD_E_OK ||
        xpd_get_decode(&m, true, &g) != XPD_E_OK) {
      fprintf(stderr, "xpjitd worker: a malformed job\n");
      free(pl);
      rc = 1;
      break;
    }
    fault_hook(g.kernel);
    xpj_status ps = XPJ_OK;
    char perr[1024];
    xpj_program *p = xpjitd_program(&progs, ctx, &g, &ps, perr, sizeof perr);
    rt_keyed k;
    xpj_compile_opts o;
    xpj_compile_opts_default(&o);
    o.opt_level = (unsigned)g.opt_level;
    o.fast_math = (int)g.fast_math;
    o.debug_info = (int)g.debug;
    o.checks = (unsigned)g.checks;
    o.fp_contract = (int)g.contract;
    o.timeout_ms = (unsigned)g.timeout_ms;
    bool ok;
    if (p)
      ps = rt_program_keyed(p, g.kernel, g.dtypes, (unsigned)g.ndim,
                            g.target, &o, &k);
    if (ps != XPJ_OK) {
      ok = fail(g.digest, ps, p ? xpj_last_error() : perr);
    } else if (strcmp(k.digest, g.digest)) {
      ok = fail(g.digest, XPJ_ERR_INVALID,
                "the worker computed another cache key than its daemon");
      rt_keyed_free(&k);
    } else {
      /* this process is the isolation: compile here (SPIR-V still forks,
       * from this single-threaded process), after the remote tiers (the
       * cluster's Redis), and write back to them */
      k.o.isolation = XPJ_ISOLATE_NONE;
      xpj_cache_counters before, after, d;
      xpj_context_cache_counters(ctx, &before);
      fetched f;
      xpj_status served = rt_cc_serve(ctx, &k, &f);
      /* what the remote tiers counted (misses, stores, refused values,
       * errors...): for the daemon's cache file, which has them all */
      xpj_context_cache_counters(ctx, &after);
#define DELTA(kind, name, what) d.name = after.name - before.name;
      XPJ_CACHE_COUNTERS(DELTA)
#undef DELTA
      char counted[1024];
      xpd_counters_str(&d, counted, sizeof counted);
      if (served != XPJ_OK) {
        ok = fail(g.digest, XPJ_ERR_NOMEM, xpj_last_error());
      } else {
        xpd_kernel r = {0};
        r.status = (uint64_t)f.status;
        r.origin = f.origin == XPJ_ORIGIN_REDIS ? XPD_FROM_REDIS
                                                : XPD_FROM_COMPILED;
        /* a failure of the inputs (or a compiler crash on them) is an
         * answer; running out of time or memory, or no worker, is not */
        r.transient = f.v.failed && (!f.cacheable || f.v.expires_ms);
        r.v = f.v;
        r.v.expires_ms = 0; /* the daemon decides what it remembers */
        r.counters = counted;
        memcpy(r.digest, g.digest, 65);
        ok = reply(&r);
      }
      rt_fetched_clear(&f);
      rt_keyed_free(&k);
    }
    xpjitd_program_done(&progs, p);
    free(pl);
    if (!ok)
      break;
  }
  xpjitd_progs_free(&progs);
  xpj_context_destroy(ctx);
  return rc;
}
