/* tier_bundles.c - the bundles tier: precompiled kernels in read-only
 * cache files (xpjit-cli bundle build), added by xpj_context_add_bundle
 * and XPJIT_BUNDLE_PATH and looked in, in the order added, after the
 * second level (docs/cache.md, "Bundles"). A bundle built by another
 * xpjit, or with no kernels for the context's devices, is not used. */
#include "tier.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The tier's state: the bundles loaded, in the order added, an
 * append-only list that lookups walk without a lock (appended under the
 * context's mu with a release store; nodes live until the context goes). */
typedef struct bundles {
  rt_bundle *_Atomic head;
} bundles;

static void cache_warn(void *ud, const char *msg) {
  (void)ud;
  rt_warn("%s", msg);
}

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
  char *targets = NULL, *tv = NULL;
  char why[1024] = "";
  /* of this build when some of its entries are (their versions column,
   * which their keys cover), as `xpjit-cli bundle verify` and `import`
   * say: meta.versions, which nothing checks, decides nothing (a bundle
   * of several builds, this one among them, was not used) */
  if (xpj_cache_targets(b, &targets, &tv) != XPJ_OK) {
    snprintf(why, sizeof why, "%s", xpj_cache_last_error());
  } else if (!*tv) {
    snprintf(why, sizeof why, "it has no entries");
  } else if (!has_line(tv, cc->versions)) {
    for (char *p = tv; *p; p++)
      if (*p == '\n')
        *p = ' ';
    snprintf(why, sizeof why, "it was built by %.400s; this is %s", tv,
             cc->versions);
  } else if (ctx->ndevs) {
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
  bundles *list = cc->tier_state[RT_TIER_bundles];
  if (!list) { /* the tier could not start (out of memory) */
    xpj_cache_close(b);
    free(node);
    free(pcopy);
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  pthread_mutex_lock(&cc->mu);
  rt_bundle *_Atomic *tail = &list->head;
  while (atomic_load_explicit(tail, memory_order_relaxed))
    tail = &atomic_load_explicit(tail, memory_order_relaxed)->next;
  atomic_store_explicit(tail, node, memory_order_release);
  pthread_mutex_unlock(&cc->mu);
  return XPJ_OK;
}

xpj_status xpj_context_add_bundle(xpj_context *ctx, const char *path) {
  if (!ctx || !path)
    return rt_err(XPJ_ERR_INVALID, "xpj_context_add_bundle: NULL argument");
  if (rt_inherited(ctx))
    return rt_err_inherited("xpj_context_add_bundle", "context");
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


static xpj_status open_tier(rt_cc *cc, const xpj_context_desc *desc,
                            void **state) {
  (void)cc;
  (void)desc;
  bundles *list = calloc(1, sizeof *list);
  if (!list)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  *state = list;
  return XPJ_OK;
}

static void close_tier(void *state) {
  bundles *list = state;
  if (!list)
    return;
  for (rt_bundle *b = atomic_load(&list->head), *n; b; b = n) {
    n = atomic_load(&b->next);
    xpj_cache_close(b->cache);
    free(b->path);
    free(b);
  }
  free(list);
}

bool rt_bundles_none(const void *state) {
  const bundles *list = state;
  return !list || !atomic_load_explicit(&list->head, memory_order_acquire);
}

/* Bundles, in the order they were added. */
static bool get(void *state, rt_obtain *ob, fetched *f) {
  bundles *list = state;
  if (!list)
    return false;
  f->absent = !atomic_load_explicit(&list->head, memory_order_acquire);
  for (rt_bundle *b = atomic_load_explicit(&list->head, memory_order_acquire);
       b; b = atomic_load_explicit(&b->next, memory_order_acquire))
    if (xpj_cache_get(b->cache, ob->key, &f->ce) == XPJ_OK) {
      rt_fetched_from_entry(f, XPJ_ORIGIN_BUNDLE);
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

const rt_tier rt_tier_bundles = {"bundles",  RT_TIER_LOCAL, open_tier,
                                 close_tier, get,           NULL,
                                 NULL};
