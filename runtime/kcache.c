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
#include "proto.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- warnings -------------------------------------------------------- */

static pthread_mutex_t warn_mu = PTHREAD_MUTEX_INITIALIZER;
static void (*warn_fn)(void *, const char *);
static void *warn_ud;

void xpj_set_warning_handler(void (*fn)(void *ud, const char *msg),
                             void *ud) {
  pthread_mutex_lock(&warn_mu);
  warn_fn = fn;
  warn_ud = ud;
  pthread_mutex_unlock(&warn_mu);
}

/* The handler is called without warn_mu held, so that it may itself set a
 * handler, warn, or use the library. */
void rt_warn(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&warn_mu);
  void (*fn)(void *, const char *) = warn_fn;
  void *ud = warn_ud;
  pthread_mutex_unlock(&warn_mu);
  if (fn)
    fn(ud, msg);
  else
    fprintf(stderr, "xpjit: warning: %s\n", msg);
}

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

size_t xpj_versions_str(char *buf, size_t size) {
  return (size_t)snprintf(buf, size, "xpjit=%s;llvm=%s;abi=%u",
                          XPJ_VERSION_STRING, xpj_llvm_version(),
                          xpj_abi_version());
}

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

/* The bytes of a compiled kernel, from wherever they came. */
typedef struct got {
  bool failed;
  const uint8_t *data;
  size_t len;
  const char *entry, *log;
  uint64_t local_bytes, scratch_bytes;
  double compile_ms;
  char *log_owned;
} got;

xpj_status rt_cc_key(rt_cc *cc, const xpj_module *sm, const char *kernel,
                     const char *dtypes, unsigned ndim, const char *tstr,
                     const char *ostr, char code[65], char digest[65],
                     xpj_cache_key *key) {
  uint8_t raw[32];
  xpj_status st = xpj_module_hash(sm, kernel, raw, code);
  if (st != XPJ_OK)
    return rt_err(st, "hashing %s: %s", kernel, xpj_status_name(st));
  *key = (xpj_cache_key){code, kernel, dtypes, ndim, tstr, ostr,
                         cc->versions};
  st = xpj_cache_key_digest(key, NULL, digest);
  if (st != XPJ_OK)
    return rt_err(st, "cache key of %s: %s", kernel, xpj_cache_last_error());
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
                                 const got *g, void **native) {
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
                                                   g->entry, native);
      xpj_cache_entry_clear(&ne);
      if (st == XPJ_OK) {
        count_native(cc, l2, true);
        return XPJ_OK;
      }
    }
  }
  uint64_t t0 = rt_now_ns();
  xpj_status st = ops->kernel_load(dev, g->data, g->len, g->entry, native);
  if (st != XPJ_OK || !nat)
    return st;
  uint8_t *b = NULL;
  size_t n = 0;
  if (ops->native_get(dev, *native, &b, &n) == XPJ_OK) {
    xpj_cache_value v = {0, b, n, g->entry, "", g->local_bytes,
                         g->scratch_bytes, (double)(rt_now_ns() - t0) / 1e6, 0};
    if (xpj_cache_put(l2, &nk, &v) == XPJ_OK)
      count_native(cc, l2, false);
    free(b);
  }
  return XPJ_OK;
}

xpj_status rt_cc_obtain(xpj_context *ctx, const rt_source *src,
                        const xpj_module *sm, const char *kernel,
                        const char *dtypes, unsigned ndim, xpj_device *dev,
                        const xpj_target *t, const char *target_str,
                        const xpj_compile_opts *o, const char *ostr,
                        rt_l1 **out, xpj_kernel_origin *from) {
  rt_cc *cc = &ctx->cc;
  *out = NULL;
  *from = XPJ_ORIGIN_MEMORY;
  char code[65], digest[65];
  xpj_cache_key key;
  xpj_status st = rt_cc_key(cc, sm, kernel, dtypes, ndim, target_str, ostr,
                            code, digest, &key);
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

  /* ---- outside the lock: find or compile the binary ---- */
  xpj_cache_entry ce = {0};
  xpj_result *res = NULL;
  got g = {0};
  bool cacheable = true;
  xpj_kernel_origin origin = XPJ_ORIGIN_COMPILED;
  bool have = l2 && xpj_cache_get(l2, &key, &ce) == XPJ_OK;
  if (have) {
    origin = XPJ_ORIGIN_CACHE;
  } else {
    for (rt_bundle *bn = atomic_load_explicit(&cc->bundles,
                                             memory_order_acquire);
         bn && !have;
         bn = atomic_load_explicit(&bn->next, memory_order_acquire))
      have = xpj_cache_get(bn->cache, &key, &ce) == XPJ_OK;
    if (have) {
      origin = XPJ_ORIGIN_BUNDLE;
      xpj_cache_counters d = {0};
      d.bundle_hits = 1;
      d.saved_ms = ce.compile_ms;
      if (l2)
        xpj_cache_note(l2, &d);
    }
  }
  /* then xpjitd, which compiles each key once for every process */
  xpd_kernel dk;
  uint8_t *dpay = NULL;
  bool same_cache = false, daemon = false, fell_back = false;
  if (!have && cc->dc.mode != RT_DC_OFF) {
    int r = rt_dc_get(&cc->dc, src, kernel, dtypes, ndim, target_str, o,
                      digest, l2 ? xpj_cache_path(l2) : NULL, &dk, &dpay,
                      &same_cache);
    daemon = r == 1;
    fell_back = r < 0;
    xpj_cache_counters d = {0};
    d.daemon_hits = daemon;
    d.daemon_fallbacks = fell_back;
    if (l2 && r)
      xpj_cache_note(l2, &d);
    if (daemon) {
      origin = XPJ_ORIGIN_DAEMON;
      g = (got){dk.failed != 0, dk.binary, dk.binary_len, dk.entry, "",
                dk.local_bytes, dk.scratch_bytes, dk.compile_us / 1000.0, NULL};
      if (dk.log_len) { /* not NUL-terminated on the wire */
        char *lg = malloc(dk.log_len + 1);
        if (lg) {
          memcpy(lg, dk.log, dk.log_len);
          lg[dk.log_len] = 0;
        }
        g.log = lg ? lg : "(out of memory)";
        g.log_owned = lg;
      }
      cacheable = !dk.transient;
      if (l2 && cacheable && !same_cache) {
        xpj_cache_value v = {g.failed, g.data, g.len, g.entry, g.log,
                             g.local_bytes, g.scratch_bytes, g.compile_ms, 0};
        xpj_cache_put(l2, &key, &v);
      }
    }
  }
  if (have) {
    g = (got){ce.failed != 0, ce.data, ce.size, ce.entry, ce.log,
              ce.local_bytes, ce.scratch_bytes, ce.compile_ms, NULL};
  } else if (daemon) {
    /* g is set */
  } else {
    st = xpj_compile(sm, kernel, t, o, XPJ_EMIT_BIN, &res);
    if (!res) {
      pthread_mutex_lock(&cc->mu);
      unlink_entry(cc, e);
      pthread_cond_broadcast(&cc->cv);
      pthread_mutex_unlock(&cc->mu);
      free(e);
      return rt_err(st, "compiling %s: %s", kernel, xpj_status_name(st));
    }
    g.failed = st != XPJ_OK;
    g.data = xpj_result_data(res, &g.len);
    g.entry = xpj_result_entry(res);
    g.log = xpj_result_log(res);
    g.local_bytes = xpj_result_local_bytes(res);
    g.scratch_bytes = xpj_result_scratch_bytes(res);
    g.compile_ms = xpj_result_millis(res);
    /* only compile errors are facts about the inputs */
    cacheable = st == XPJ_OK || (st == XPJ_ERR_COMPILE &&
                                 !xpj_result_transient(res));
    xpj_cache_counters d = {0};
    d.compiles = 1;
    d.compile_failures = st != XPJ_OK;
    d.compile_ms = g.compile_ms;
    if (l2)
      xpj_cache_note(l2, &d); /* written with the entry */
    if (l2 && cacheable) {
      xpj_cache_value v = {g.failed, g.data, g.len, g.entry, g.log,
                           g.local_bytes, g.scratch_bytes, g.compile_ms, 0};
      xpj_cache_put(l2, &key, &v);
    }
  }

  const char *where = dev ? dev->id : target_str;
  char *msg = NULL;
  if (g.failed) {
    st = res ? xpj_result_status(res)
             : daemon ? (xpj_status)dk.status : XPJ_ERR_COMPILE;
    rt_err(st, "compiling %s [%s%sndim=%u] for %s: %s%s", kernel, dtypes,
           *dtypes ? ", " : "", ndim, where, g.log,
           have ? " (a cached result of an earlier compile of the same "
                  "source, dtypes, target and options)"
                : "");
    msg = strdup(xpj_last_error());
  } else if (dev && g.local_bytes > dev->info.local_mem_size) {
    st = rt_err(XPJ_ERR_UNSUPPORTED,
                "%s needs %llu bytes of local memory; %s has %llu", kernel,
                (unsigned long long)g.local_bytes, dev->id,
                (unsigned long long)dev->info.local_mem_size);
    msg = strdup(xpj_last_error());
  } else if (dev) {
    st = load_on_device(cc, l2, &key, dev, &g, &e->native);
    cacheable = false; /* a load failure is the device's, maybe passing */
  } else {
    e->bin = malloc(g.len ? g.len : 1);
    st = e->bin ? XPJ_OK : rt_err(XPJ_ERR_NOMEM, "out of memory");
    if (e->bin && g.len)
      memcpy(e->bin, g.data, g.len);
    e->len = g.len;
  }
  e->local_bytes = g.local_bytes;
  e->scratch_bytes = g.scratch_bytes;
  e->compile_ms = g.compile_ms;
  e->origin = origin;
  *from = origin;
  xpj_result_destroy(res);

  pthread_mutex_lock(&cc->mu);
  if (origin == XPJ_ORIGIN_BUNDLE) {
    cc->counters.bundle_hits++;
    cc->counters.saved_ms += g.compile_ms;
  } else if (origin == XPJ_ORIGIN_CACHE) {
    cc->counters.l2_hits++;
    if (g.failed)
      cc->counters.failure_hits++;
    else
      cc->counters.saved_ms += g.compile_ms;
  } else if (origin == XPJ_ORIGIN_DAEMON) {
    cc->counters.l2_misses += l2 && xpj_cache_mode_of(l2) !=
                                        XPJ_CACHE_MODE_OFF;
    cc->counters.daemon_hits++;
  } else {
    cc->counters.daemon_fallbacks += fell_back;
    cc->counters.l2_misses += l2 && xpj_cache_mode_of(l2) !=
                                        XPJ_CACHE_MODE_OFF;
    cc->counters.compiles++;
    cc->counters.compile_failures += g.failed;
    cc->counters.compile_ms += g.compile_ms;
  }
  bool keep = st == XPJ_OK || (msg && cacheable);
  if (st == XPJ_OK) {
    e->state = RT_L1_READY;
  } else if (keep) {
    e->state = RT_L1_FAILED;
    e->status = st;
    e->msg = msg;
    msg = NULL;
  } else {
    unlink_entry(cc, e);
  }
  pthread_cond_broadcast(&cc->cv);
  pthread_mutex_unlock(&cc->mu);
  xpj_cache_entry_clear(&ce);
  free(dpay);
  free(g.log_owned);
  free(msg);
  if (!keep) {
    free(e->bin);
    free(e);
    return st;
  }
  if (st != XPJ_OK)
    return rt_err_str(st, e->msg);
  *out = e;
  return XPJ_OK;
}
