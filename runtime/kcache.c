/* kcache.c - where compiled kernels come from: the context's first level
 * (loaded kernels in memory), the second level on disk (cache/), bundles,
 * and only then the compiler. Besides program.c, the one runtime file that
 * calls the compiler.
 *
 * The first level is keyed by the digest of the full cache key and the
 * device, and is also the single-flight table: the first thread to miss a
 * key builds it while others wait on the context's condition variable.
 * Deterministic compile failures are remembered like successes; failures
 * that say nothing about the inputs (a timed-out or killed worker, a
 * device that would not load a binary) are not, so a later call retries. */
#include "rt.h"
#include "tier.h"
#include "daemon.h"
#include "proto.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void cache_warn(void *ud, const char *msg) {
  (void)ud;
  rt_warn("%s", msg);
}

/* ---- bundles ---------------------------------------------------------- */

static bool has_line(const char *list, const char *s) {
  size_t n = strlen(s);
  for (const char *p = list; p && *p;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && !memcmp(p, s, n))
      return true;
    p = e ? e + 1 : p + len;
  }
  return false;
}

static xpj_status add_bundle(xpj_context *ctx, const char *path,
                             bool from_env) {
  rt_cc *cc = &ctx->cc;
  xpj_cache_config cfg = {.path = path, .bundle = 1, .warn = cache_warn};
  xpj_cache *b = NULL;
  xpj_status st = xpj_cache_open(&cfg, &b);
  if (st != XPJ_OK) {
    if (from_env) {
      rt_warn("XPJIT_BUNDLE_PATH: %s; not used", xpj_cache_last_error());
      return XPJ_OK;
    }
    return rt_err(st, "%s", xpj_cache_last_error());
  }
  char *versions = NULL, *targets = NULL, *tv = NULL;
  char why[1024] = "";
  if (xpj_cache_get_meta(b, "versions", &versions) != XPJ_OK)
    snprintf(why, sizeof why, "it does not say which xpjit built it");
  else if (strcmp(versions, cc->versions) != 0)
    snprintf(why, sizeof why, "it was built by %s; this is %s", versions,
             cc->versions);
  else if (xpj_cache_targets(b, &targets, &tv) != XPJ_OK)
    snprintf(why, sizeof why, "out of memory");
  else if (ctx->ndevs) {
    bool match = false;
    for (unsigned i = 0; i < ctx->ndevs && !match; i++)
      match = has_line(targets, ctx->devs[i]->info.target);
    if (!match) {
      size_t n = (size_t)snprintf(why, sizeof why,
                                  "it has no kernels for %s",
                                  ctx->devs[0]->id);
      for (unsigned i = 1; i < ctx->ndevs && n < sizeof why - 64; i++)
        n += (size_t)snprintf(why + n, sizeof why - n, ", %s",
                              ctx->devs[i]->id);
      snprintf(why + n, sizeof why - n, " (its targets: %.300s)",
               *targets ? targets : "none");
      for (char *p = why; *p; p++)
        if (*p == '\n')
          *p = ' ';
    }
  }
  free(versions);
  free(targets);
  free(tv);
  if (*why) {
    xpj_cache_close(b);
    if (from_env) {
      rt_warn("bundle %s is not used: %s", path, why);
      return XPJ_OK;
    }
    return rt_err(XPJ_ERR_UNSUPPORTED, "bundle %s is not used: %s", path,
                  why);
  }
  rt_bundle *node = calloc(1, sizeof *node);
  char *pcopy = strdup(path);
  if (!node || !pcopy) {
    free(node);
    free(pcopy);
    xpj_cache_close(b);
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  node->cache = b;
  node->path = pcopy;
  pthread_mutex_lock(&cc->mu);
  rt_bundle *_Atomic *tail = &cc->bundles;
  while (atomic_load_explicit(tail, memory_order_relaxed))
    tail = &atomic_load_explicit(tail, memory_order_relaxed)->next;
  atomic_store_explicit(tail, node, memory_order_release);
  pthread_mutex_unlock(&cc->mu);
  return XPJ_OK;
}

xpj_status xpj_context_add_bundle(xpj_context *ctx, const char *path) {
  if (!ctx || !path)
    return rt_err(XPJ_ERR_INVALID, "xpj_context_add_bundle: NULL argument");
  return add_bundle(ctx, path, false);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory in XPJIT_BUNDLE_PATH: its *.xpb files in name order. */
static void add_dir(xpj_context *ctx, const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    rt_warn("XPJIT_BUNDLE_PATH: cannot read %s", dir);
    return;
  }
  char **names = NULL;
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t L = strlen(de->d_name);
    if (L < 5 || strcmp(de->d_name + L - 4, ".xpb") != 0)
      continue;
    char **nn = realloc(names, (n + 1) * sizeof *nn);
    if (!nn)
      break;
    names = nn;
    if ((names[n] = malloc(strlen(dir) + L + 2)))
      sprintf(names[n++], "%s/%s", dir, de->d_name);
  }
  closedir(d);
  if (n)
    qsort(names, n, sizeof *names, cmp_str);
  for (size_t i = 0; i < n; i++) {
    add_bundle(ctx, names[i], true);
    free(names[i]);
  }
  free(names);
}

/* ---- set-up and tear-down ----------------------------------------------- */


xpj_status rt_cc_init(xpj_context *ctx, const xpj_context_desc *desc) {
  rt_cc *cc = &ctx->cc;
  pthread_mutex_init(&cc->mu, NULL);
  pthread_cond_init(&cc->cv, NULL);
  cc->mode = desc ? desc->cache_mode : XPJ_CACHE_MODE_DEFAULT;
  cc->max_size = desc ? desc->cache_max_size : 0;
  if (desc && desc->cache_path && !(cc->path = strdup(desc->cache_path)))
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  xpj_versions_str(cc->versions, sizeof cc->versions);
  rt_dc_init(&cc->dc);
  /* the Redis tier's settings are all read now (it connects on first
   * use); a bad one turns it off with a warning, the program goes on */
  const char *url = desc && desc->redis ? desc->redis : getenv("XPJIT_REDIS");
  if (url && *url && strcmp(url, "off") != 0 &&
      rt_redis_open(url, &cc->redis) != XPJ_OK)
    rt_warn("the Redis tier is off: %s", xpj_last_error());
  return XPJ_OK;
}

xpj_status rt_cc_env_bundles(xpj_context *ctx, const xpj_context_desc *desc) {
  const char *bp = getenv("XPJIT_BUNDLE_PATH");
  if (bp && *bp && !(desc && desc->no_env_bundles)) {
    char *copy = strdup(bp);
    if (!copy)
      return rt_err(XPJ_ERR_NOMEM, "out of memory");
    char *save = NULL;
    for (char *p = strtok_r(copy, ":", &save); p;
         p = strtok_r(NULL, ":", &save)) {
      struct stat sb;
      if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
        add_dir(ctx, p);
      else
        add_bundle(ctx, p, true);
    }
    free(copy);
  }
  return XPJ_OK;
}

void rt_cc_fini(xpj_context *ctx) {
  rt_cc *cc = &ctx->cc;
  for (unsigned i = 0; i < RT_L1_BUCKETS; i++)
    for (rt_l1 *e = cc->buckets[i], *n; e; e = n) {
      n = e->next;
      if (e->native && e->dev && e->dev->ops->kernel_unload)
        e->dev->ops->kernel_unload(e->dev, e->native);
      free(e->msg);
      free(e->bin);
      free(e);
    }
  if (cc->l2) {
    /* first-level hits are noted once, here, to keep them off the hot
     * path; everything else was noted as it happened */
    xpj_cache_counters d = {0};
    d.l1_hits = cc->counters.l1_hits;
    xpj_cache_note(cc->l2, &d);
    xpj_cache_close(cc->l2);
  }
  for (rt_bundle *b = atomic_load(&cc->bundles), *n; b; b = n) {
    n = atomic_load(&b->next);
    xpj_cache_close(b->cache);
    free(b->path);
    free(b);
  }
  free(cc->path);
  rt_redis_close(cc->redis);
  rt_dc_fini(&cc->dc);
  pthread_cond_destroy(&cc->cv);
  pthread_mutex_destroy(&cc->mu);
}

/* Call with cc->mu held. */
static xpj_cache *l2_locked(rt_cc *cc) {
  if (!cc->l2_tried) {
    cc->l2_tried = true;
    xpj_cache_config cfg = {.path = cc->path, .mode = cc->mode,
                            .max_size = cc->max_size, .warn = cache_warn};
    if (xpj_cache_open(&cfg, &cc->l2) != XPJ_OK)
      cc->l2 = NULL;
  }
  return cc->l2;
}

xpj_cache *xpj_context_cache(xpj_context *ctx) {
  if (!ctx)
    return NULL;
  pthread_mutex_lock(&ctx->cc.mu);
  xpj_cache *c = l2_locked(&ctx->cc);
  pthread_mutex_unlock(&ctx->cc.mu);
  return c;
}

xpj_status xpj_context_cache_counters(xpj_context *ctx,
                                      xpj_cache_counters *out) {
  if (!ctx || !out)
    return rt_err(XPJ_ERR_INVALID,
                  "xpj_context_cache_counters: NULL argument");
  pthread_mutex_lock(&ctx->cc.mu);
  *out = ctx->cc.counters;
  pthread_mutex_unlock(&ctx->cc.mu);
  return XPJ_OK;
}

/* ---- obtaining a kernel -------------------------------------------------- */

static rt_l1 **bucket(rt_cc *cc, const char *digest) {
  unsigned h = 0;
  for (int i = 0; i < 4; i++)
    h = h * 16 + (unsigned)(digest[i] <= '9' ? digest[i] - '0'
                                             : digest[i] - 'a' + 10);
  return &cc->buckets[h % RT_L1_BUCKETS];
}

static void unlink_entry(rt_cc *cc, rt_l1 *e) {
  for (rt_l1 **pp = bucket(cc, e->digest); *pp; pp = &(*pp)->next)
    if (*pp == e) {
      *pp = e->next;
      return;
    }
}

xpj_status rt_cc_key(rt_cc *cc, const rt_request *rq, char code[65],
                     char digest[65], xpj_cache_key *key) {
  uint8_t raw[32];
  xpj_status st = xpj_module_hash(rq->sm, rq->kernel, raw, code);
  if (st != XPJ_OK)
    return rt_err(st, "hashing %s: %s", rq->kernel, xpj_status_name(st));
  *key = (xpj_cache_key){code,           rq->kernel, rq->dtypes,  rq->ndim,
                         rq->target_str, rq->ostr,   cc->versions};
  st = xpj_cache_key_digest(key, NULL, digest);
  if (st != XPJ_OK)
    return rt_err(st, "cache key of %s: %s", rq->kernel,
                  xpj_cache_last_error());
  return XPJ_OK;
}

/* A device binary loaded (hit) or stored: in l2's counters and the
 * context's. */
static void count_native(rt_cc *cc, xpj_cache *l2, bool hit) {
  xpj_cache_counters d = {0};
  d.native_hits = hit;
  d.native_stores = !hit;
  xpj_cache_note(l2, &d);
  pthread_mutex_lock(&cc->mu);
  cc->counters.native_hits += hit;
  cc->counters.native_stores += !hit;
  pthread_mutex_unlock(&cc->mu);
}

/* Loads the binary g on dev. A device with a native form (a cubin, a
 * Level Zero native module, an OpenCL program binary) first tries the one
 * cached under the same key with "native:<dev->native_id>|<target>" as its
 * target, which skips the driver's own compiler; after loading the
 * portable binary it stores the device's native binary for next time. A
 * native binary the driver refuses (a newer driver) is replaced. */
static xpj_status load_on_device(rt_cc *cc, xpj_cache *l2,
                                 const xpj_cache_key *key, xpj_device *dev,
                                 const uint8_t *data, size_t len,
                                 const char *entry, uint64_t local_bytes,
                                 uint64_t scratch_bytes, void **native) {
  const rt_backend_ops *ops = dev->ops;
  const char *env = getenv("XPJIT_NATIVE_CACHE"); /* "off": portable only */
  bool nat = l2 && dev->native_id[0] && ops->native_get && ops->native_load &&
             xpj_cache_mode_of(l2) != XPJ_CACHE_MODE_OFF &&
             !(env && (!strcmp(env, "off") || !strcmp(env, "0")));
  char ntarget[2048];
  xpj_cache_key nk = *key;
  if (nat) {
    snprintf(ntarget, sizeof ntarget, "native:%s|%s", dev->native_id,
             key->target);
    for (char *p = ntarget; *p; p++)
      if (*p == '\n')
        *p = ' ';
    nk.target = ntarget;
    xpj_cache_entry ne = {0};
    if (xpj_cache_get_uncounted(l2, &nk, &ne) == XPJ_OK) {
      xpj_status st = ne.failed ? XPJ_ERR_DEVICE
                                : ops->native_load(dev, ne.data, ne.size,
                                                   entry, native);
      xpj_cache_entry_clear(&ne);
      if (st == XPJ_OK) {
        count_native(cc, l2, true);
        return XPJ_OK;
      }
    }
  }
  uint64_t t0 = rt_now_ns();
  xpj_status st = ops->kernel_load(dev, data, len, entry, native);
  if (st != XPJ_OK || !nat)
    return st;
  uint8_t *b = NULL;
  size_t n = 0;
  if (ops->native_get(dev, *native, &b, &n) == XPJ_OK) {
    xpj_cache_value v = {0, b, n, entry, "", local_bytes,
                         scratch_bytes, (double)(rt_now_ns() - t0) / 1e6, 0};
    if (xpj_cache_put(l2, &nk, &v) == XPJ_OK)
      count_native(cc, l2, false);
    free(b);
  }
  return XPJ_OK;
}

/* ---- obtaining a kernel: one request, its binary, its load ------------- */

static void fetched_clear(fetched *f) {
  xpj_cache_entry_clear(&f->ce);
  xpj_result_destroy(f->res);
  free(f->dpay);
  free(f->log_owned);
  free(f->own);
  free(f->msg);
  memset(f, 0, sizeof *f);
}

static void from_entry(fetched *f, xpj_kernel_origin origin) {
  xpj_cache_entry *c = &f->ce;
  f->origin = origin;
  f->failed = c->failed != 0;
  f->status = (c->failed & 15) == XPJ_FAILURE_MEMORY ? XPJ_ERR_NOMEM
                                                     : XPJ_ERR_COMPILE;
  f->data = c->data;
  f->len = c->size;
  f->entry = c->entry;
  f->log = c->log;
  f->local_bytes = c->local_bytes;
  f->scratch_bytes = c->scratch_bytes;
  f->compile_ms = c->compile_ms;
  f->expires_ms = c->expires_ms;
  f->cacheable = true;
}

/* The second level. A remembered failure answers only a request that
 * allows no more time or memory than the compile that ran out of them. */
static bool get_l2(rt_obtain *ob, fetched *f) {
  if (ob->l2 && xpj_cache_get(ob->l2, ob->key, &f->ce) == XPJ_OK) {
    uint64_t ms, mb;
    xpj_compile_limits(ob->rq->o, &ms, &mb);
    if (!f->ce.failed || !f->ce.expires_ms ||
        xpd_failure_answers(f->ce.failed, ms, mb)) {
      from_entry(f, XPJ_ORIGIN_CACHE);
      return true;
    }
    xpj_cache_entry_clear(&f->ce);
  }
  return false;
}

/* Bundles, in the order they were added. */
static bool get_bundles(rt_obtain *ob, fetched *f) {
  for (rt_bundle *b = atomic_load_explicit(&ob->cc->bundles,
                                           memory_order_acquire);
       b; b = atomic_load_explicit(&b->next, memory_order_acquire))
    if (xpj_cache_get(b->cache, ob->key, &f->ce) == XPJ_OK) {
      from_entry(f, XPJ_ORIGIN_BUNDLE);
      f->bundle = b;
      xpj_cache_counters d = {0};
      d.bundle_hits = 1;
      d.saved_ms = f->ce.compile_ms;
      if (ob->l2)
        xpj_cache_note(ob->l2, &d);
      return true;
    }
  return false;
}

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* xpjitd, which compiles each key once for every process. */
static bool get_daemon(rt_obtain *ob, fetched *f) {
  rt_cc *cc = ob->cc;
  if (cc->dc.mode == RT_DC_OFF)
    return false;
  xpd_kernel dk;
  int r = rt_dc_get(&cc->dc, ob->rq, ob->digest,
                    ob->l2 ? xpj_cache_path(ob->l2) : NULL, &dk, &f->dpay,
                    &f->same_cache);
  f->fell_back = r < 0;
  xpj_cache_counters d = {0};
  d.daemon_hits = r == 1;
  d.daemon_fallbacks = r < 0;
  if (ob->l2 && r)
    xpj_cache_note(ob->l2, &d);
  if (r != 1)
    return false;
  f->origin = XPJ_ORIGIN_DAEMON;
  f->failed = dk.failed != 0;
  f->status = (xpj_status)dk.status;
  f->data = dk.binary;
  f->len = dk.binary_len;
  f->local_bytes = dk.local_bytes;
  f->scratch_bytes = dk.scratch_bytes;
  f->compile_ms = dk.compile_us / 1000.0;
  f->cacheable = !dk.transient;
  if (dk.expires_ms) /* a failure the daemon forgets then: so do we */
    f->expires_ms = wall_ms() + (int64_t)dk.expires_ms;
  /* entry and log are not NUL-terminated on the wire */
  f->log_owned = malloc(sizeof dk.entry + dk.log_len + 2);
  if (!f->log_owned)
    return false;
  char *le = f->log_owned;
  memcpy(le, dk.entry, sizeof dk.entry);
  le[sizeof dk.entry - 1] = 0;
  f->entry = le;
  char *lg = le + sizeof dk.entry;
  if (dk.log_len)
    memcpy(lg, dk.log, dk.log_len);
  lg[dk.log_len] = 0;
  f->log = lg;
  return true;
}

/* How long a compile that ran out of time or memory is remembered, so
 * that every run does not pay for it again: XPJIT_FAILURE_TTL ("10m",
 * "90s", 0 to never remember), default 10 minutes. */
static int64_t failure_ttl_ms(void) {
  const char *e = getenv("XPJIT_FAILURE_TTL");
  int64_t ms = 10 * 60 * 1000;
  if (e && *e && xpj_cache_parse_duration(e, &ms) != XPJ_OK) {
    rt_warn("XPJIT_FAILURE_TTL=%s: %s; using 10m", e, xpj_cache_last_error());
    ms = 10 * 60 * 1000;
  }
  return ms;
}

/* Compiles in this process (in an isolated worker). XPJ_OK when there is
 * a result, failed or not; an error only when there is none at all. */
static xpj_status compile_here(rt_obtain *ob, fetched *f) {
  xpj_status st = xpj_compile(ob->rq->sm, ob->rq->kernel, ob->rq->t, ob->rq->o, XPJ_EMIT_BIN,
                              &f->res);
  if (!f->res)
    return rt_err(st, "compiling %s: %s", ob->rq->kernel, xpj_status_name(st));
  xpj_result *res = f->res;
  f->origin = XPJ_ORIGIN_COMPILED;
  f->failed = st != XPJ_OK;
  f->status = xpj_result_status(res);
  f->data = xpj_result_data(res, &f->len);
  f->entry = xpj_result_entry(res);
  f->log = xpj_result_log(res);
  f->local_bytes = xpj_result_local_bytes(res);
  f->scratch_bytes = xpj_result_scratch_bytes(res);
  f->compile_ms = xpj_result_millis(res);
  /* compile errors (and crashes of the compiler) are facts about the
   * inputs; a worker that ran out of time or memory is remembered for a
   * while; one that could not run or was killed from outside, not at all */
  xpj_failure_kind kind = xpj_result_failure_kind(res);
  f->cacheable = st == XPJ_OK || kind == XPJ_FAILURE_INPUT ||
                 kind == XPJ_FAILURE_CRASH;
  int64_t ttl = failure_ttl_ms();
  if ((kind == XPJ_FAILURE_TIMEOUT || kind == XPJ_FAILURE_MEMORY) && ttl > 0) {
    uint64_t ms, mb;
    xpj_compile_limits(ob->rq->o, &ms, &mb);
    f->cacheable = true;
    f->expires_ms = wall_ms() + ttl;
    f->failed_code =
        xpd_failed_code(kind, kind == XPJ_FAILURE_TIMEOUT ? ms : mb);
  }
  xpj_cache_counters d = {0};
  d.compiles = 1;
  d.compile_failures = f->failed;
  d.compile_ms = f->compile_ms;
  if (ob->l2)
    xpj_cache_note(ob->l2, &d); /* written with the entry */
  return XPJ_OK;
}

/* Stores what is worth keeping in the second level: compiles, the
 * daemon's replies (unless it wrote them to this very file) and the
 * cluster tier's, once the device took them, or failures that are facts
 * about the inputs. */
static void put_l2(rt_obtain *ob, const fetched *f) {
  bool fresh = f->origin == XPJ_ORIGIN_COMPILED ||
               f->origin == XPJ_ORIGIN_REDIS ||
               (f->origin == XPJ_ORIGIN_DAEMON && !f->same_cache);
  if (!ob->l2 || !fresh || !f->cacheable || (!f->failed && !f->loaded))
    return;
  int failed = !f->failed ? 0 : f->failed_code ? f->failed_code : 1;
  xpj_cache_value v = {failed,            f->data,          f->len,
                       f->entry,          f->log,           f->local_bytes,
                       f->scratch_bytes,  f->compile_ms,    f->expires_ms};
  xpj_cache_put(ob->l2, ob->key, &v);
}

/* The tiers, in the order a request walks them (docs/cache.md, "Tiers");
 * a compile comes after the last. The daemon, which compiles for the
 * node, comes after the cluster's Redis, so that what it compiles is
 * written back there. */
static const rt_tier tiers[] = {
    {"disk", get_l2, put_l2},
    {"bundles", get_bundles, NULL},
    {"redis", rt_redis_get, rt_redis_put},
    {"daemon", get_daemon, NULL},
};
enum { NTIERS = sizeof tiers / sizeof *tiers };

/* Finds the binary in the first tier that has it, else compiles. */
static xpj_status fetch(rt_obtain *ob, fetched *f) {
  for (unsigned i = 0; i < NTIERS; i++) {
    if (tiers[i].get(ob, f)) {
      f->tier = i;
      return XPJ_OK;
    }
    bool fell_back = f->fell_back; /* the daemon could not serve */
    fetched_clear(f);
    f->fell_back = fell_back;
  }
  f->tier = NTIERS;
  return compile_here(ob, f);
}

/* Offers what came from tier f->tier (or a compile) to the tiers before
 * it. */
static void write_back(rt_obtain *ob, const fetched *f) {
  for (unsigned i = 0; i < f->tier && i < NTIERS; i++)
    if (tiers[i].put)
      tiers[i].put(ob, f);
}

void rt_cc_note(rt_obtain *ob, const xpj_cache_counters *d) {
  if (ob->l2)
    xpj_cache_note(ob->l2, d);
  pthread_mutex_lock(&ob->cc->mu);
#define ADD(k, f, w) ob->cc->counters.f += d->f;
  XPJ_CACHE_COUNTERS(ADD)
#undef ADD
  pthread_mutex_unlock(&ob->cc->mu);
}

/* Puts f where the first level keeps it: loaded on the device, or copied
 * (dev NULL). A failed compile becomes its message. */
static xpj_status place(rt_obtain *ob, fetched *f, rt_l1 *e) {
  xpj_device *dev = ob->rq->dev;
  const char *where = dev ? dev->id : ob->rq->target_str;
  xpj_status st;
  if (f->failed) {
    char when[96] = "";
    if (f->expires_ms && f->origin != XPJ_ORIGIN_DAEMON)
      snprintf(when, sizeof when, "; not tried again for %lld s",
               (long long)((f->expires_ms - wall_ms() + 999) / 1000));
    st = rt_err(f->status ? f->status : XPJ_ERR_COMPILE,
                "compiling %s [%s%sndim=%u] for %s: %s%s%s%s%s", ob->rq->kernel,
                ob->rq->dtypes, *ob->rq->dtypes ? ", " : "", ob->rq->ndim, where, f->log,
                f->origin == XPJ_ORIGIN_CACHE || f->origin == XPJ_ORIGIN_BUNDLE
                    ? " (a cached result of an earlier compile of the same "
                      "source, dtypes, target and options"
                    : "",
                when,
                f->origin == XPJ_ORIGIN_CACHE || f->origin == XPJ_ORIGIN_BUNDLE
                    ? ")"
                    : "",
                f->expires_ms && f->origin == XPJ_ORIGIN_COMPILED
                    ? " (remembered: XPJIT_FAILURE_TTL)"
                    : "");
    f->msg = strdup(xpj_last_error());
    return st;
  }
  e->local_bytes = f->local_bytes;
  e->scratch_bytes = f->scratch_bytes;
  e->compile_ms = f->compile_ms;
  e->origin = f->origin;
  /* the entry point is this kernel's reserved name, never a name the
   * loader could find elsewhere (a row that says "memset") */
  char want[256];
  xpj_entry_name(ob->rq->kernel, want, sizeof want);
  if (strcmp(f->entry ? f->entry : "", want) != 0)
    return rt_err(XPJ_ERR_DEVICE, "its entry point is '%.300s', not %s",
                  f->entry ? f->entry : "", want);
  if (dev && f->local_bytes > dev->info.local_mem_size) {
    st = rt_err(XPJ_ERR_UNSUPPORTED,
                "%s needs %llu bytes of local memory; %s has %llu",
                ob->rq->kernel, (unsigned long long)f->local_bytes, dev->id,
                (unsigned long long)dev->info.local_mem_size);
    f->msg = strdup(xpj_last_error());
    return st;
  }
  if (dev) {
    st = load_on_device(ob->cc, ob->l2, ob->key, dev, f->data, f->len,
                        f->entry, f->local_bytes, f->scratch_bytes,
                        &e->native);
    f->loaded = st == XPJ_OK;
    return st;
  }
  e->bin = malloc(f->len ? f->len : 1);
  if (!e->bin)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  if (f->len)
    memcpy(e->bin, f->data, f->len);
  e->len = f->len;
  f->loaded = true;
  return XPJ_OK;
}

/* The device refused a binary from a cache, a bundle or the daemon:
 * remove it from the cache file (the daemon's, when it stored it in
 * ours), and say so. A bundle is read-only: the kernel compiled now goes
 * into the second level, which is looked in first from now on. */
static void drop_refused(rt_obtain *ob, fetched *f) {
  char why[1024];
  snprintf(why, sizeof why, "%s", xpj_last_error());
  char from[1200];
  if (f->origin == XPJ_ORIGIN_BUNDLE)
    snprintf(from, sizeof from, "bundle %s", f->bundle->path);
  else if (f->origin == XPJ_ORIGIN_CACHE && ob->l2)
    snprintf(from, sizeof from, "the cache %s", xpj_cache_path(ob->l2));
  else if (f->origin == XPJ_ORIGIN_REDIS)
    snprintf(from, sizeof from, "the Redis tier");
  else
    snprintf(from, sizeof from, "xpjitd");
  bool in_l2 = ob->l2 && (f->origin == XPJ_ORIGIN_CACHE ||
                          (f->origin == XPJ_ORIGIN_DAEMON && f->same_cache));
  bool dropped = in_l2 && xpj_cache_mode_of(ob->l2) == XPJ_CACHE_MODE_RW;
  if (dropped)
    xpj_cache_remove(ob->l2, ob->key);
  rt_warn("%s: %s refused the binary of %s [%s] (%s); %scompiling it here",
          from, ob->rq->dev ? ob->rq->dev->id : "the runtime", ob->rq->kernel, ob->rq->dtypes,
          why,
          dropped ? "dropped it; "
          : in_l2 ? "left it in place (the cache is read-only); "
                  : "");
  xpj_cache_counters d = {0};
  d.corrupt = 1;
  if (ob->l2)
    xpj_cache_note(ob->l2, &d);
}

/* This context's counters for what happened. */
static void count(rt_cc *cc, xpj_cache *l2, const fetched *f) {
  bool l2_on = l2 && xpj_cache_mode_of(l2) != XPJ_CACHE_MODE_OFF;
  pthread_mutex_lock(&cc->mu);
  xpj_cache_counters *c = &cc->counters;
  switch (f->origin) {
  case XPJ_ORIGIN_BUNDLE:
    c->bundle_hits++;
    c->saved_ms += f->compile_ms;
    break;
  case XPJ_ORIGIN_CACHE:
    c->l2_hits++;
    if (f->failed)
      c->failure_hits++;
    else
      c->saved_ms += f->compile_ms;
    break;
  case XPJ_ORIGIN_DAEMON:
    c->l2_misses += l2_on;
    c->daemon_hits++;
    break;
  case XPJ_ORIGIN_REDIS: /* the tier counts its own events */
    c->l2_misses += l2_on;
    break;
  default:
    c->daemon_fallbacks += f->fell_back;
    c->l2_misses += l2_on;
    c->compiles++;
    c->compile_failures += f->failed;
    c->compile_ms += f->compile_ms;
    break;
  }
  pthread_mutex_unlock(&cc->mu);
}

xpj_status rt_cc_obtain(xpj_context *ctx, const rt_request *rq, rt_l1 **out,
                        xpj_kernel_origin *from) {
  rt_cc *cc = &ctx->cc;
  xpj_device *dev = rq->dev;
  *out = NULL;
  *from = XPJ_ORIGIN_MEMORY;
  char code[65], digest[65];
  xpj_cache_key key;
  xpj_status st = rt_cc_key(cc, rq, code, digest, &key);
  if (st != XPJ_OK)
    return st;

  pthread_mutex_lock(&cc->mu);
  rt_l1 *e;
  for (;;) {
    for (e = *bucket(cc, digest); e; e = e->next)
      if (e->dev == dev && !strcmp(e->digest, digest))
        break;
    if (!e || e->state != RT_L1_BUILDING)
      break;
    pthread_cond_wait(&cc->cv, &cc->mu);
  }
  if (e) {
    cc->counters.l1_hits++;
    st = e->state == RT_L1_READY ? XPJ_OK : rt_err_str(e->status, e->msg);
    pthread_mutex_unlock(&cc->mu);
    if (st == XPJ_OK)
      *out = e;
    return st;
  }
  e = calloc(1, sizeof *e);
  if (!e) {
    pthread_mutex_unlock(&cc->mu);
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  memcpy(e->digest, digest, sizeof digest);
  e->dev = dev;
  e->state = RT_L1_BUILDING;
  rt_l1 **b = bucket(cc, digest);
  e->next = *b;
  *b = e;
  xpj_cache *l2 = l2_locked(cc);
  pthread_mutex_unlock(&cc->mu);

  /* ---- outside the lock: find or compile the binary, and load it ---- */
  rt_hold_warnings();
  rt_obtain ob = {.cc = cc, .l2 = l2, .rq = rq, .key = &key,
                  .digest = digest};
  fetched f = {0};
  st = fetch(&ob, &f);
  if (st == XPJ_OK) {
    st = place(&ob, &f, e);
    if (st != XPJ_OK && !f.failed && f.origin != XPJ_ORIGIN_COMPILED) {
      /* the device refused a binary a cache, bundle or daemon handed us:
       * drop it where it came from, and compile here instead */
      drop_refused(&ob, &f);
      fetched_clear(&f);
      st = compile_here(&ob, &f);
      f.tier = NTIERS;
      if (st == XPJ_OK)
        st = place(&ob, &f, e);
    }
  }
  write_back(&ob, &f);
  rt_redis_done(&ob);
  count(cc, l2, &f);

  pthread_mutex_lock(&cc->mu);
  /* failures that expire are looked up again (in the second level) */
  bool keep = f.loaded || (f.msg && f.cacheable && !f.expires_ms);
  if (f.loaded) {
    e->state = RT_L1_READY;
  } else if (keep) {
    e->state = RT_L1_FAILED;
    e->status = st;
    e->msg = f.msg;
    f.msg = NULL;
  } else {
    unlink_entry(cc, e);
  }
  pthread_cond_broadcast(&cc->cv);
  pthread_mutex_unlock(&cc->mu);
  /* the warnings' handler may use the library, and leave its own message */
  char *err = st != XPJ_OK && !keep ? strdup(xpj_last_error()) : NULL;
  rt_release_warnings();
  xpj_kernel_origin origin = f.origin;
  fetched_clear(&f);
  if (!keep) {
    free(e->bin);
    free(e);
    if (st != XPJ_OK)
      rt_err_str(st, err ? err : xpj_status_name(st));
    free(err);
    return st;
  }
  if (st != XPJ_OK)
    return rt_err_str(st, e->msg);
  *from = origin;
  *out = e;
  return XPJ_OK;
}
