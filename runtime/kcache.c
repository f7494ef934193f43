/* kcache.c - where compiled kernels come from: the context's first level
 * (loaded kernels in memory), then the tiers of tier.h in their order,
 * and only then the compiler; and xpjitd's walk of the same tiers.
 * The one runtime file that calls the compiler (xpj_compile); program.c
 * parses and specialises.
 *
 * The first level is keyed by the digest of the full cache key and the
 * device, and is also the single-flight table: the first thread to miss a
 * key builds it while others wait on the context's condition variable.
 * Deterministic compile failures are remembered like successes; failures
 * that say nothing about the inputs (a timed-out or killed worker, a
 * device that would not load a binary) are not, so a later call retries. */
#define _GNU_SOURCE
#include "../cache/hitfile.h"
#include "buf.h" /* xpj_dec */
#include "rt.h"
#include "tier.h"
#include "daemon.h"
#include "llvm.h" /* xpj_target_parse_for */
#include "proto.h"

#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void cache_warn(void *ud, const char *msg) {
  (void)ud;
  rt_warn("%s", msg);
}

/* ---- the tiers ---------------------------------------------------------- */

#define RT_TIER_ADDRESS(name) &rt_tier_##name,
static const rt_tier *const tiers[RT_NTIERS] = {RT_TIERS(RT_TIER_ADDRESS)};
#undef RT_TIER_ADDRESS
_Static_assert(RT_NTIERS <= RT_MAX_TIERS, "rt_cc.tier_state is too small");

/* A request as the caller gave it -> the digest of its full key, and what
 * is known of it (rt_known: for a get_kernel's request, set when one
 * built it). Kept, like the first level, until the context goes. */
typedef struct rt_memo {
  uint64_t h;
  char digest[65];
  bool has_known;
  rt_known known;
  struct rt_memo *next;
  char qkey[]; /* NUL-terminated */
} rt_memo;

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
  /* every tier's settings are read now; one that cannot start is off,
   * with a warning, and the program goes on */
  for (unsigned i = 0; i < RT_NTIERS; i++)
    if (tiers[i]->open && tiers[i]->open(cc, desc, &cc->tier_state[i]) !=
                              XPJ_OK) {
      cc->tier_state[i] = NULL;
      rt_warn("the %s tier is off: %s", tiers[i]->name, xpj_last_error());
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
      free((void *)e->v.data);
      free(e);
    }
  for (unsigned i = 0; i < RT_L1_BUCKETS; i++)
    for (rt_memo *m = cc->memo[i], *n; m; m = n) {
      n = m->next;
      xpj_module_destroy(m->known.sm);
      free((void *)m->known.desc.args);
      free(m);
    }
  if (cc->l2) {
    /* first-level hits are noted once, here, to keep them off the hot
     * path; everything else was noted as it happened */
    xpj_cache_counters d = {0};
    d.l1_hits = cc->counters.l1_hits;
    xpj_cache_note(cc->l2, &d);
    xpj_cache_close(cc->l2);
  }
  free(cc->path);
  for (unsigned i = 0; i < RT_NTIERS; i++)
    if (tiers[i]->close)
      tiers[i]->close(cc->tier_state[i]);
  pthread_cond_destroy(&cc->cv);
  pthread_mutex_destroy(&cc->mu);
}

void rt_cc_config(const rt_cc *cc, xpj_cache_config *cfg) {
  *cfg = (xpj_cache_config){.path = cc->path, .mode = cc->mode,
                            .max_size = cc->max_size, .warn = cache_warn};
}

xpj_status rt_target_parse(xpj_context *ctx, const char *s, xpj_target *t,
                           char *err, size_t errsize) {
  xpj_cache_config cfg;
  rt_cc_config(&ctx->cc, &cfg);
  return xpj_target_parse_for(s, &cfg, t, err, errsize);
}

/* Call with cc->mu held. */
static xpj_cache *l2_locked(rt_cc *cc) {
  if (!cc->l2_tried) {
    cc->l2_tried = true;
    xpj_cache_config cfg;
    rt_cc_config(cc, &cfg);
    /* lazy: a process whose kernels are all in hit files never opens the
     * database (cache/hitfile.h) */
    if (xpj_l2_open(&cfg, &cc->l2) != XPJ_OK)
      cc->l2 = NULL;
  }
  return cc->l2;
}

xpj_cache *xpj_context_cache(xpj_context *ctx) {
  if (!ctx)
    return NULL;
  if (rt_inherited(ctx)) {
    rt_err_inherited("xpj_context_cache", "context");
    return NULL;
  }
  pthread_mutex_lock(&ctx->cc.mu);
  xpj_cache *c = l2_locked(&ctx->cc);
  pthread_mutex_unlock(&ctx->cc.mu);
  xpj_l2_ready(c); /* the caller's handle: the database opened */
  return c;
}

xpj_status xpj_context_cache_counters(xpj_context *ctx,
                                      xpj_cache_counters *out) {
  if (!ctx || !out)
    return rt_err(XPJ_ERR_INVALID,
                  "xpj_context_cache_counters: NULL argument");
  if (rt_inherited(ctx))
    return rt_err_inherited("xpj_context_cache_counters", "context");
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

/* ---- the first level from the request as given ---- */

/* A request key's hash for the context's table (in memory only): eight
 * bytes at a time, a multiply and a shift each (a second program's first
 * get hashes its key once; byte by byte it was a fifth of that get). */
static uint64_t key_hash(const char *s) {
  size_t n = strlen(s);
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n, w;
  for (; n >= 8; n -= 8, s += 8) {
    memcpy(&w, s, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  w = 0;
  memcpy(&w, s, n);
  h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 29);
}

/* Call with cc->mu held. */
static rt_memo *memo_find(rt_cc *cc, const char *qkey, uint64_t h) {
  for (rt_memo *m = cc->memo[h % RT_L1_BUCKETS]; m; m = m->next)
    if (m->h == h && !strcmp(m->qkey, qkey))
      return m;
  return NULL;
}

rt_l1 *rt_cc_quick(xpj_context *ctx, const char *qkey, const xpj_device *dev,
                   const rt_known **known) {
  rt_cc *cc = &ctx->cc;
  uint64_t h = key_hash(qkey);
  pthread_mutex_lock(&cc->mu);
  rt_memo *m = memo_find(cc, qkey, h);
  rt_l1 *e = m ? *bucket(cc, m->digest) : NULL;
  for (; e; e = e->next)
    if (e->dev == dev && e->state == RT_L1_READY &&
        !strcmp(e->digest, m->digest))
      break;
  if (known)
    *known = e && m->has_known ? &m->known : NULL;
  pthread_mutex_unlock(&cc->mu);
  return e;
}

void rt_cc_note_l1(xpj_context *ctx) {
  pthread_mutex_lock(&ctx->cc.mu);
  ctx->cc.counters.l1_hits++;
  pthread_mutex_unlock(&ctx->cc.mu);
}

const rt_known *rt_cc_remember(xpj_context *ctx, const char *qkey,
                               const rt_l1 *e, rt_known *kn) {
  rt_cc *cc = &ctx->cc;
  uint64_t h = key_hash(qkey);
  size_t n = strlen(qkey);
  pthread_mutex_lock(&cc->mu);
  rt_memo *m = memo_find(cc, qkey, h);
  if (!m && (m = calloc(1, sizeof *m + n + 1))) {
    m->h = h;
    memcpy(m->digest, e->digest, sizeof m->digest);
    memcpy(m->qkey, qkey, n + 1);
    m->next = cc->memo[h % RT_L1_BUCKETS];
    cc->memo[h % RT_L1_BUCKETS] = m;
  }
  bool taken = m && kn && !m->has_known;
  if (taken) {
    m->known = *kn;
    m->has_known = true;
  }
  const rt_known *kept = m && m->has_known ? &m->known : NULL;
  pthread_mutex_unlock(&cc->mu);
  if (kn && !taken) {
    xpj_module_destroy(kn->sm);
    free((void *)kn->desc.args);
  }
  return kn ? kept : NULL;
}

/* ---- aliases ------------------------------------------------------------ */

/* The GNU build ID of the ELF object this code is in (libxpjit.so, or the
 * program it is linked into), hex; "" when it has none. A request's
 * alias names the code that specialises and hashes its kernel by it: a
 * library built from other sources (even with the same headers, version
 * and build directory) never follows another's aliases. */
static char build_id[2 * 64 + 1];
static pthread_once_t build_id_once = PTHREAD_ONCE_INIT;

static int find_build_id(struct dl_phdr_info *info, size_t size, void *ud) {
  (void)size;
  uintptr_t here = (uintptr_t)ud;
  bool ours = false;
  for (int i = 0; i < info->dlpi_phnum && !ours; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t at = info->dlpi_addr + ph->p_vaddr;
    ours = ph->p_type == PT_LOAD && here >= at && here - at < ph->p_memsz;
  }
  if (!ours)
    return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE)
      continue;
    const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
    size_t left = ph->p_filesz;
    while (left >= sizeof(ElfW(Nhdr))) {
      const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)(const void *)p;
      size_t name = (n->n_namesz + 3) & ~(size_t)3,
             desc = (n->n_descsz + 3) & ~(size_t)3,
             all = sizeof *n + name + desc;
      if (all > left)
        break;
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
          !memcmp(p + sizeof *n, "GNU", 4) && n->n_descsz >= 8 &&
          n->n_descsz <= 64) {
        const uint8_t *d = p + sizeof *n + name;
        for (unsigned j = 0; j < n->n_descsz; j++)
          snprintf(build_id + 2 * j, 3, "%02x", d[j]);
        return 1;
      }
      p += all;
      left -= all;
    }
  }
  return 1; /* ours, without one */
}

static void read_build_id(void) {
  dl_iterate_phdr(find_build_id, (void *)(uintptr_t)&read_build_id);
}

/* The alias of rq (cache/hitfile.h, xpj_l2_alias_digest): everything its
 * key's code depends on (this code, the source, the name it was parsed
 * under, the kernel, its dtypes and ndim) and the rest of the key, each
 * part length-prefixed; malloc'd, NULL when rq has none or out of
 * memory. */
static char *alias_text(const rt_cc *cc, const rt_request *rq) {
  pthread_once(&build_id_once, read_build_id);
  if (!rq->src_digest || !*build_id)
    return NULL;
  char nd[24];
  nd[xpj_dec(nd, rq->ndim)] = 0;
  const char *parts[] = {"xpjit alias 1", build_id,        rq->src_digest,
                         rq->src.name ? rq->src.name : "", rq->kernel,
                         rq->dtypes,    nd,              rq->target_str,
                         rq->ostr,      cc->versions};
  enum { NPARTS = sizeof parts / sizeof *parts };
  size_t n = NPARTS, total = 1, len[NPARTS];
  for (size_t i = 0; i < n; i++)
    total += (len[i] = strlen(parts[i])) + 24;
  char *t = malloc(total), *w = t;
  /* "%zu:%s" each, without printf (the CPU's target is a kilobyte) */
  for (size_t i = 0; t && i < n; i++) {
    w += xpj_dec(w, len[i]);
    *w++ = ':';
    memcpy(w, parts[i], len[i] + 1);
    w += len[i];
  }
  return t;
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

/* Loads the binary v on the request's device. A device with a native form (a cubin, a
 * Level Zero native module, an OpenCL program binary) first tries the one
 * cached under the same key with "native:<dev->native_id>|<target>" as its
 * target, which skips the driver's own compiler; after loading the
 * portable binary it stores the device's native binary for next time. A
 * native binary the driver refuses (a newer driver) is replaced. */
static xpj_status load_on_device(rt_obtain *ob, const xpj_cache_value *v,
                                 void **native) {
  rt_cc *cc = ob->cc;
  xpj_cache *l2 = ob->l2;
  const xpj_cache_key *key = ob->key;
  xpj_device *dev = ob->rq->dev;
  const char *entry = v->entry;
  const rt_backend_ops *ops = dev->ops;
  bool nat = l2 && dev->native_id[0] && ops->native_get && ops->native_load &&
             xpj_cache_mode_of(l2) != XPJ_CACHE_MODE_OFF &&
             xpj_env_bool("XPJIT_NATIVE_CACHE", 1) != 0; /* off: portable */
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
  xpj_status st = ops->kernel_load(dev, v->data, v->size, entry, native);
  if (st != XPJ_OK || !nat)
    return st;
  uint8_t *b = NULL;
  size_t n = 0;
  if (ops->native_get(dev, *native, &b, &n) == XPJ_OK) {
    xpj_cache_value nv = {0, b, n, entry, "", v->local_bytes,
                          v->scratch_bytes, (double)(rt_now_ns() - t0) / 1e6,
                          0};
    if (xpj_cache_put(l2, &nk, &nv) == XPJ_OK)
      count_native(cc, l2, false);
    free(b);
  }
  return XPJ_OK;
}

/* ---- obtaining a kernel: one request, its binary, its load ------------- */

void rt_fetched_clear(fetched *f) {
  xpj_cache_entry_clear(&f->ce);
  xpj_result_destroy(f->res);
  free(f->dpay);
  free(f->own);
  free(f->msg);
  memset(f, 0, sizeof *f);
}

void rt_fetched_from_entry(fetched *f, xpj_kernel_origin origin) {
  xpj_cache_entry *c = &f->ce;
  f->origin = origin;
  f->status = c->failed ? xpd_failed_status(c->failed) : XPJ_OK;
  f->v = (xpj_cache_value){c->failed,      c->data,        c->size,
                           c->entry,       c->log,         c->local_bytes,
                           c->scratch_bytes, c->compile_ms, c->expires_ms};
  f->cacheable = true;
}

int64_t rt_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* How long a compile that ran out of time or memory is remembered, so
 * that every run does not pay for it again: XPJIT_FAILURE_TTL ("10m",
 * "90s", 0 to never remember), default 10 minutes. */
static int64_t failure_ttl_ms(void) {
  const char *e = getenv("XPJIT_FAILURE_TTL");
  int64_t ms = 10 * 60 * 1000;
  if (e && *e && xpj_cache_parse_duration(e, &ms) != XPJ_OK) {
    if (xpj_env_first_complaint("XPJIT_FAILURE_TTL"))
      rt_warn("XPJIT_FAILURE_TTL=%.64s: %s; using 10m", e,
              xpj_cache_last_error());
    ms = 10 * 60 * 1000;
  }
  return ms;
}

/* Compiles in this process (in an isolated worker, unless the request's
 * options say this process is one). XPJ_OK when there is a result,
 * failed or not; an error only when there is none at all. */
static xpj_status compile_here(rt_obtain *ob, fetched *f) {
  const rt_request *rq = ob->rq;
  xpj_status st = xpj_compile(rq->sm, rq->kernel, rq->t, rq->o, XPJ_EMIT_BIN,
                              &f->res);
  if (!f->res)
    return rt_err(st, "compiling %s: %s", rq->kernel, xpj_status_name(st));
  xpj_result *res = f->res;
  f->origin = XPJ_ORIGIN_COMPILED;
  f->tier = RT_NTIERS;
  f->status = xpj_result_status(res);
  f->v.failed = st != XPJ_OK ? xpd_failed_input(f->status) : 0;
  f->v.data = xpj_result_data(res, &f->v.size);
  f->v.entry = xpj_result_entry(res);
  f->v.log = xpj_result_log(res);
  f->v.local_bytes = xpj_result_local_bytes(res);
  f->v.scratch_bytes = xpj_result_scratch_bytes(res);
  f->v.compile_ms = xpj_result_millis(res);
  /* compile errors (and crashes of the compiler) are facts about the
   * inputs; a worker that ran out of time or memory is remembered for a
   * while; one that could not run or was killed from outside, not at all */
  xpj_failure_kind kind = xpj_result_failure_kind(res);
  f->cacheable = st == XPJ_OK || kind == XPJ_FAILURE_INPUT ||
                 kind == XPJ_FAILURE_CRASH;
  int64_t ttl = failure_ttl_ms();
  if ((kind == XPJ_FAILURE_TIMEOUT || kind == XPJ_FAILURE_MEMORY) && ttl > 0) {
    uint64_t ms, mb;
    xpj_compile_limits(rq->o, &ms, &mb);
    f->cacheable = true;
    f->v.expires_ms = rt_wall_ms() + ttl;
    f->v.failed =
        xpd_failed_code(kind, kind == XPJ_FAILURE_TIMEOUT ? ms : mb);
  }
  xpj_cache_counters d = {0};
  d.compiles = 1;
  d.compile_failures = f->v.failed != 0;
  d.compile_ms = f->v.compile_ms;
  if (ob->l2)
    xpj_cache_note(ob->l2, &d); /* written with the entry */
  return XPJ_OK;
}

/* ---- the log (XPJIT_LOG=info) ---- */

static const char *const origin_words[] = {
    "compiled", "memory", "the cache file", "a bundle", "the daemon",
    "Redis"};

/* What each tier said about a request: "disk miss, bundles none, ...". */
static void tiers_said(const rt_obtain *ob, char *buf, size_t size) {
  size_t len = 0;
  buf[0] = 0;
  for (unsigned i = 0; i < RT_NTIERS && len < size; i++) {
    bool on = i == RT_TIER_disk ? ob->l2 && xpj_cache_mode_of(ob->l2) !=
                                               XPJ_CACHE_MODE_OFF
                                : ob->cc->tier_state[i] != NULL;
    const char *what = !on                                 ? "none"
                       : ob->asked[i] == RT_ASKED_FELL_BACK ? "could not serve"
                       : ob->asked[i] == RT_ASKED_ABSENT
                           ? (i == RT_TIER_daemon ? "not running" : "none")
                       : ob->asked[i] == RT_ASKED_REFUSED   ? "refused"
                       : ob->asked[i] == RT_ASKED_MISS      ? "miss"
                                                            : "not asked";
    int w = snprintf(buf + len, size - len, "%s%s %s", len ? ", " : "",
                     tiers[i]->name, what);
    if (w < 0)
      break;
    len += (size_t)w;
  }
}

/* "kernel NAME (DTYPES) ndim N for DEVICE", as the log names a request. */
static void log_what(const rt_request *rq, char *what, size_t size) {
  char nd[24] = "";
  if (rq->ndim)
    snprintf(nd, sizeof nd, " ndim %u", rq->ndim);
  snprintf(what, size, "kernel %s%s%s%s%s for %s", rq->kernel,
           rq->dtypes && *rq->dtypes ? " (" : "", rq->dtypes ? rq->dtypes : "",
           rq->dtypes && *rq->dtypes ? ")" : "", nd,
           rq->dev ? rq->dev->id : rq->target_str);
}

/* One line per kernel a context obtained other than from its first
 * level: what, for which device, from where, how long, its key; and for
 * a compile, why (each tier's answer). */
static void log_obtained(const rt_obtain *ob, const fetched *f,
                         xpj_status st, uint64_t t0_ns) {
  xpj_log_level l = st != XPJ_OK ? XPJ_LOG_ERROR : XPJ_LOG_INFO;
  if (!xpj_log_on(l))
    return;
  double ms = (double)(rt_now_ns() - t0_ns) / 1e6;
  char what[512];
  log_what(ob->rq, what, sizeof what);
  char said[256];
  tiers_said(ob, said, sizeof said);
  const char *from = (unsigned)f->origin < sizeof origin_words /
                                               sizeof *origin_words
                         ? origin_words[f->origin]
                         : "?";
  if (st != XPJ_OK)
    xpj_log(l, "%s: failed after %.2f ms (%s): %s [key %.16s; %s]", what, ms,
            f->origin == XPJ_ORIGIN_COMPILED ? "compiled here" : from,
            xpj_last_error(), ob->digest, said);
  else if (f->origin == XPJ_ORIGIN_COMPILED)
    xpj_log(l, "%s: compiled in %.2f ms (compile %.2f ms) [key %.16s; %s]",
            what, ms, f->v.compile_ms, ob->digest, said);
  else
    xpj_log(l, "%s: from %s in %.2f ms [key %.16s]", what, from, ms,
            ob->digest);
}

/* A request by its alias alone that was not answered (why): a miss, not a
 * failure. The caller asks again the whole way, and that request's line
 * says what came of it. */
static void log_alias_miss(const rt_request *rq, const char *digest,
                           const char *why) {
  if (!xpj_log_on(XPJ_LOG_DEBUG))
    return;
  char what[512];
  log_what(rq, what, sizeof what);
  xpj_log(XPJ_LOG_DEBUG, "%s: a miss by its alias (%s); looking it up the "
          "whole way [key %.16s]", what, why, digest);
}

/* Finds the binary in the first tier in [from, to) of the given kinds
 * that has it: true and f->tier set. */
static bool walk(rt_obtain *ob, unsigned from, unsigned to, unsigned kinds,
                 fetched *f) {
  for (unsigned i = from; i < to; i++) {
    /* a tier that could not serve this request is not asked again */
    if (!(kinds & (1u << tiers[i]->kind)) ||
        ob->asked[i] == RT_ASKED_FELL_BACK)
      continue;
    if (tiers[i]->get(ob->cc->tier_state[i], ob, f)) {
      f->tier = i;
      return true;
    }
    bool fell_back = f->fell_back; /* the daemon could not serve */
    ob->asked[i] = fell_back    ? RT_ASKED_FELL_BACK
                   : f->absent  ? RT_ASKED_ABSENT
                   : f->refused ? RT_ASKED_REFUSED
                                : RT_ASKED_MISS;
    rt_fetched_clear(f);
    f->fell_back = fell_back;
    /* its worker may have died holding the request's cluster-wide lock,
     * or still be compiling: the tiers after it do not wait for others */
    if (fell_back)
      ob->wait_ms = 1;
  }
  return false;
}

/* Whether this context has a daemon that may be there (its socket is):
 * then its daemon asks Redis for the node (docs/cache.md, "Tiers"), and a
 * first look does not. */
static bool daemon_there(const rt_cc *cc) {
  const rt_dc *dc = cc->tier_state[RT_TIER_daemon];
  struct stat sb;
  return dc && dc->mode != RT_DC_OFF && stat(dc->path, &sb) == 0;
}

/* Whether a first look may ask the daemon before the cache file: a
 * daemon that keeps this very cache file reads it for us (it looks in its
 * own memory and in that file before it compiles; the tier says whether
 * it keeps ours, from its greeting), at a fraction of what opening SQLite
 * costs a fresh process. Not past a bundle (it must not come before the
 * cache file, below), nor once the device refused a binary of the
 * daemon's (compiled here, the kernel is in the cache file, which must
 * come first from then on). */
static bool daemon_first(const rt_obtain *ob) {
  rt_cc *cc = ob->cc;
  pthread_mutex_lock(&cc->mu);
  bool refused = cc->daemon_refused;
  pthread_mutex_unlock(&cc->mu);
  return !refused && rt_bundles_none(cc->tier_state[RT_TIER_bundles]);
}

/* Before compiling here: this key's turn among the processes of the cache
 * file (cache.c, single flight), waiting while another one compiles it,
 * at most as long as its compile may take; then the file again, which
 * now has the row of the one before (true: f is it). Without the turn
 * (no cache file of ours, read-only, a network file system, not had in
 * time), or after one that ended without its row: compiled here all the
 * same, and without holding up the others. */
static bool take_turn(rt_obtain *ob, fetched *f) {
  uint64_t limit_ms = 0;
  int64_t waited = 0;
  bool after_one = false;
  if (!ob->l2)
    return false;
  xpj_compile_limits(ob->rq->o, &limit_ms, NULL);
  int fd = xpj_l2_flight_begin(ob->l2, ob->digest, (int64_t)limit_ms + 5000,
                               &waited, &after_one);
  if (fd < 0) {
    if (waited && xpj_log_on(XPJ_LOG_INFO))
      xpj_log(XPJ_LOG_INFO, "kernel %s: its turn to compile was held for "
              "%lld ms, longer than this compile may take; compiling here",
              ob->rq->kernel, (long long)waited);
    return false;
  }
  ob->in_flight = true;
  ob->flight_fd = fd;
  ob->uncounted = true;
  bool hit = walk(ob, RT_TIER_disk, RT_TIER_disk + 1, ~0u, f);
  ob->uncounted = false;
  if (!hit && after_one)
    xpj_l2_flight_yield(fd); /* the turn before ended without a row */
  if (xpj_log_on(XPJ_LOG_DEBUG) && (hit || waited))
    xpj_log(XPJ_LOG_DEBUG, "kernel %s: %s (waited %lld ms for its turn) "
            "[key %.16s]", ob->rq->kernel,
            hit ? "compiled by another process or thread of the cache file"
                : after_one ? "the turn before ended without a row; "
                              "compiling here alongside the others"
                            : "compiling here in its turn",
            (long long)waited, ob->digest);
  return hit;
}

/* Gives back the request's turn (take_turn): its lock file goes when the
 * row is in the cache file now. */
static void end_turn(rt_obtain *ob, const fetched *f) {
  if (!ob->in_flight)
    return;
  bool settled =
      (f->tier == RT_TIER_disk && f->origin == XPJ_ORIGIN_CACHE) || ob->stored;
  xpj_l2_flight_end(ob->l2, ob->digest, ob->flight_fd, settled);
  ob->in_flight = false;
}

/* Finds the binary in the first tier that has it, else compiles. A cache
 * file not opened yet answers from its hit files first; when they do not
 * have it, what the tiers after it have at once comes before opening the
 * database (a Redis hit should not pay for SQLite's opening: about 60% of
 * one; a start-up storm through the daemon, about a tenth of its CPU),
 * each asked once more in full after it (ob->peek) unless it could not
 * serve: with no daemon there, Redis; with one, only a daemon that keeps
 * this cache file (daemon_first), which asks Redis for every process of
 * the node. */
static xpj_status fetch(rt_obtain *ob, fetched *f) {
  if (ob->l2 && xpj_l2_get_file(ob->l2, ob->key, &f->ce) == XPJ_OK) {
    rt_fetched_from_entry(f, XPJ_ORIGIN_CACHE);
    f->tier = RT_TIER_disk;
    return XPJ_OK;
  }
  if (ob->l2 && xpj_l2_unopened(ob->l2)) {
    /* the remote tiers only: a bundle is an SQLite file too, and must
     * not come before the cache file (a binary the device refused from a
     * bundle is compiled into it, which is looked in first from then) */
    bool daemon = daemon_there(ob->cc), hit = false;
    ob->peek = true;
    if (!daemon)
      hit = walk(ob, RT_TIER_daemon + 1, RT_NTIERS, 1u << RT_TIER_REMOTE, f);
    else if (daemon_first(ob))
      hit = walk(ob, RT_TIER_daemon, RT_TIER_daemon + 1, ~0u, f);
    ob->peek = false;
    if (hit) { /* the cache file's miss, as the walk would have counted */
      xpj_cache_note(ob->l2, &(xpj_cache_counters){.l2_misses = 1});
      return XPJ_OK;
    }
  }
  if (walk(ob, 0, RT_NTIERS, ~0u, f) || take_turn(ob, f))
    return XPJ_OK;
  return compile_here(ob, f);
}

/* Offers what came from tier f->tier (or a compile) to the tiers before
 * it, then ends the request in every tier. */
static void write_back(rt_obtain *ob, const fetched *f) {
  for (unsigned i = 0; i < f->tier && i < RT_NTIERS; i++)
    if (tiers[i]->put)
      tiers[i]->put(ob->cc->tier_state[i], ob, f);
  for (unsigned i = 0; i < RT_NTIERS; i++)
    if (tiers[i]->done)
      tiers[i]->done(ob->cc->tier_state[i], ob);
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

/* ---- xpjitd's walk ------------------------------------------------------ */


void rt_keyed_request(const rt_keyed *k, rt_request *rq) {
  *rq = (rt_request){{NULL, 0, NULL}, k->sm,   k->key.kernel, k->canon,
                     k->ndim,         NULL,    &k->t,         k->tstr,
                     &k->o,           k->ostr,     NULL,
                     NULL};
}

static rt_obtain keyed_obtain(xpj_context *ctx, const rt_keyed *k,
                              const rt_request *rq) {
  rt_cc *cc = &ctx->cc;
  pthread_mutex_lock(&cc->mu);
  xpj_cache *l2 = l2_locked(cc);
  pthread_mutex_unlock(&cc->mu);
  return (rt_obtain){.cc = cc, .l2 = l2, .rq = rq, .key = &k->key,
                     .digest = k->digest};
}

bool rt_cc_local(xpj_context *ctx, const rt_keyed *k, fetched *f) {
  rt_request rq;
  rt_keyed_request(k, &rq);
  rt_obtain ob = keyed_obtain(ctx, k, &rq);
  memset(f, 0, sizeof *f);
  return walk(&ob, 0, RT_NTIERS, 1u << RT_TIER_LOCAL, f);
}

xpj_status rt_cc_serve(xpj_context *ctx, const rt_keyed *k, fetched *f) {
  rt_request rq;
  rt_keyed_request(k, &rq);
  rt_obtain ob = keyed_obtain(ctx, k, &rq);
  /* xpjitd stops a worker at its compile limit: waiting that long for a
   * lock whose holder died would look like a compile that timed out */
  ob.wait_ms = RT_SERVE_WAIT_MS;
  memset(f, 0, sizeof *f);
  xpj_status st = XPJ_OK;
  if (!walk(&ob, 0, RT_NTIERS, 1u << RT_TIER_REMOTE, f)) {
    st = compile_here(&ob, f);
    /* no device here: what compiled is offered to the remote tiers as
     * it is (docs/cache.md: a daemon's worker writes before any device
     * loaded it) */
    f->loaded = st == XPJ_OK && !f->v.failed;
  }
  write_back(&ob, f);
  return st;
}

/* Puts f where the first level keeps it: loaded on the device, or copied
 * (dev NULL). A failed compile becomes its message. */
static xpj_status place(rt_obtain *ob, fetched *f, rt_l1 *e) {
  xpj_device *dev = ob->rq->dev;
  const char *where = dev ? dev->id : ob->rq->target_str;
  xpj_status st;
  if (f->v.failed) {
    char when[96] = "";
    if (f->v.expires_ms && f->origin != XPJ_ORIGIN_DAEMON)
      snprintf(when, sizeof when, "; not tried again for %lld s",
               (long long)((f->v.expires_ms - rt_wall_ms() + 999) / 1000));
    st = rt_err(f->status ? f->status : XPJ_ERR_COMPILE,
                "compiling %s [%s%sndim=%u] for %s: %s%s%s%s%s", ob->rq->kernel,
                ob->rq->dtypes, *ob->rq->dtypes ? ", " : "", ob->rq->ndim, where, f->v.log,
                f->origin == XPJ_ORIGIN_CACHE || f->origin == XPJ_ORIGIN_BUNDLE
                    ? " (a cached result of an earlier compile of the same "
                      "source, dtypes, target and options"
                    : "",
                when,
                f->origin == XPJ_ORIGIN_CACHE || f->origin == XPJ_ORIGIN_BUNDLE
                    ? ")"
                    : "",
                f->v.expires_ms && f->origin == XPJ_ORIGIN_COMPILED
                    ? " (remembered: XPJIT_FAILURE_TTL)"
                    : "");
    f->msg = strdup(xpj_last_error());
    return st;
  }
  /* the record, less what points into f (dev NULL: the binary, copied
   * below) */
  e->v = f->v;
  e->v.data = NULL;
  e->v.size = 0;
  e->v.entry = e->v.log = NULL;
  e->origin = f->origin;
  /* the entry point is this kernel's reserved name, never a name the
   * loader could find elsewhere (a row that says "memset") */
  char want[256];
  xpj_entry_name(ob->rq->kernel, want, sizeof want);
  if (strcmp(f->v.entry ? f->v.entry : "", want) != 0)
    return rt_err(XPJ_ERR_DEVICE, "its entry point is '%.300s', not %s",
                  f->v.entry ? f->v.entry : "", want);
  if (dev && f->v.local_bytes > dev->info.local_mem_size) {
    st = rt_err(XPJ_ERR_UNSUPPORTED,
                "%s needs %llu bytes of local memory; %s has %llu",
                ob->rq->kernel, (unsigned long long)f->v.local_bytes, dev->id,
                (unsigned long long)dev->info.local_mem_size);
    f->msg = strdup(xpj_last_error());
    return st;
  }
  /* scratch every launch would refuse (cpu.c: its size for a group of
   * XPJ_CPU_SCRATCH_STRIDE is more than the address space): refused here,
   * like too much local memory, and compiled instead */
  if (dev && dev->info.backend == XPJ_BACKEND_CPU &&
      f->v.scratch_bytes > SIZE_MAX / XPJ_CPU_SCRATCH_STRIDE) {
    st = rt_err(XPJ_ERR_UNSUPPORTED,
                "%s needs %llu bytes of scratch per work-item; %s allows "
                "%llu",
                ob->rq->kernel, (unsigned long long)f->v.scratch_bytes,
                dev->id,
                (unsigned long long)(SIZE_MAX / XPJ_CPU_SCRATCH_STRIDE));
    f->msg = strdup(xpj_last_error());
    return st;
  }
  if (dev) {
    st = load_on_device(ob, &f->v, &e->native);
    f->loaded = st == XPJ_OK;
    return st;
  }
  uint8_t *bin = malloc(f->v.size ? f->v.size : 1);
  if (!bin)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  if (f->v.size)
    memcpy(bin, f->v.data, f->v.size);
  e->v.data = bin;
  e->v.size = f->v.size;
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
  if (f->origin == XPJ_ORIGIN_DAEMON) {
    pthread_mutex_lock(&ob->cc->mu);
    ob->cc->daemon_refused = true;
    pthread_mutex_unlock(&ob->cc->mu);
  }
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
    c->saved_ms += f->v.compile_ms;
    break;
  case XPJ_ORIGIN_CACHE:
    c->l2_hits++;
    if (f->v.failed)
      c->failure_hits++;
    else
      c->saved_ms += f->v.compile_ms;
    break;
  case XPJ_ORIGIN_DAEMON:
    c->l2_misses += l2_on;
    c->daemon_hits++;
    break;
  case XPJ_ORIGIN_REDIS: /* the tier counts its own events */
    c->daemon_fallbacks += f->fell_back;
    c->l2_misses += l2_on;
    break;
  default:
    c->daemon_fallbacks += f->fell_back;
    c->l2_misses += l2_on;
    c->compiles++;
    c->compile_failures += f->v.failed != 0;
    c->compile_ms += f->v.compile_ms;
    break;
  }
  pthread_mutex_unlock(&cc->mu);
}

/* A request asked for by its alias alone, which has none in the hit files
 * (or no cache file): a daemon may have it, or compile it, without this
 * process specialising and hashing the kernel's body for its key. Asked
 * by its source (a GET without DIGEST: the daemon keys it, once for every
 * process that asks the same, docs/protocol.md "Lookups"), where the
 * whole way would ask the daemon before anything else: as the first look
 * of fetch (a cache file not opened yet: only a daemon that keeps it), or
 * with the cache off; not once the cache file is open (the whole way looks
 * in it first). True: f holds the kernel, digest its key's. */
static bool daemon_by_source(rt_cc *cc, xpj_cache *l2, const rt_request *rq,
                             const xpj_cache_key *key, char digest[65],
                             fetched *f) {
  if (rq->daemon_fell_back && *rq->daemon_fell_back)
    return false;
  if (!cc->tier_state[RT_TIER_daemon] || !daemon_there(cc))
    return false;
  if (xpj_l2_off(l2))
    l2 = NULL;
  else if (!xpj_l2_unopened(l2))
    return false;
  rt_obtain ob = {.cc = cc, .l2 = l2, .rq = rq, .key = key,
                  .peek = l2 != NULL};
  if (l2 && !daemon_first(&ob))
    return false;
  if (!tiers[RT_TIER_daemon]->get(cc->tier_state[RT_TIER_daemon], &ob, f)) {
    if (f->fell_back) { /* counted once, here; not asked again */
      pthread_mutex_lock(&cc->mu);
      cc->counters.daemon_fallbacks++;
      pthread_mutex_unlock(&cc->mu);
      if (l2)
        xpj_cache_note(l2, &(xpj_cache_counters){.daemon_fallbacks = 1});
      if (rq->daemon_fell_back)
        *rq->daemon_fell_back = true;
    }
    rt_fetched_clear(f);
    return false;
  }
  memcpy(digest, ob.named, 65);
  f->tier = RT_TIER_daemon;
  if (l2) /* the cache file's miss, as fetch counts a first look's hit */
    xpj_cache_note(l2, &(xpj_cache_counters){.l2_misses = 1});
  return true;
}

xpj_status rt_cc_obtain(xpj_context *ctx, const rt_request *rq, rt_l1 **out,
                        xpj_kernel_origin *from) {
  rt_cc *cc = &ctx->cc;
  xpj_device *dev = rq->dev;
  uint64_t t0 = rt_now_ns();
  *out = NULL;
  *from = XPJ_ORIGIN_MEMORY;
  char code[65], digest[65];
  xpj_cache_key key;
  xpj_status st;
  /* asked by its alias alone: the digest it names, then (when the first
   * level does not have it) the hit file is the answer */
  fetched f = {0};
  char *alias = alias_text(cc, rq);
  bool by_alias = !rq->sm, from_daemon = false;
  if (by_alias) {
    pthread_mutex_lock(&cc->mu);
    xpj_cache *l2 = l2_locked(cc);
    pthread_mutex_unlock(&cc->mu);
    key = (xpj_cache_key){NULL,           rq->kernel, rq->dtypes,  rq->ndim,
                          rq->target_str, rq->ostr,   cc->versions};
    bool named = alias && l2 && xpj_l2_alias_digest(l2, alias, digest);
    if (!named && alias)
      named = from_daemon = daemon_by_source(cc, l2, rq, &key, digest, &f);
    if (!named) {
      free(alias);
      return rt_err(XPJ_ERR_NOT_FOUND, "%s: no alias", rq->kernel);
    }
  } else if ((st = rt_cc_key(cc, rq, code, digest, &key)) != XPJ_OK) {
    free(alias);
    return st;
  }

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
    if (xpj_log_on(XPJ_LOG_DEBUG))
      xpj_log(XPJ_LOG_DEBUG, "kernel %s (ndim %u) for %s: from memory (%s) "
              "[key %.16s]", rq->kernel, rq->ndim,
              dev ? dev->id : rq->target_str,
              st == XPJ_OK ? "loaded" : "a remembered failure", digest);
    if (st == XPJ_OK)
      *out = e;
    free(alias);
    rt_fetched_clear(&f); /* (a daemon's answer by the alias: not needed) */
    return st;
  }
  e = calloc(1, sizeof *e);
  if (!e) {
    pthread_mutex_unlock(&cc->mu);
    free(alias);
    rt_fetched_clear(&f);
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
  if (!by_alias && rq->daemon_fell_back && *rq->daemon_fell_back) {
    ob.asked[RT_TIER_daemon] = RT_ASKED_FELL_BACK; /* (by its source) */
    ob.wait_ms = 1;
  }
  const char *alias_miss = NULL; /* why a request by alias was not answered */
  if (from_daemon) {
    st = XPJ_OK; /* (f: the daemon's answer) */
  } else if (by_alias) {
    alias_miss = "the hit file it names is gone, changed or out of date";
    st = xpj_l2_get_aliased(l2, alias, digest, &key, &f.ce) == XPJ_OK
             ? XPJ_OK
             : rt_err(XPJ_ERR_NOT_FOUND, "%s: %s", rq->kernel, alias_miss);
    free(alias);
    alias = NULL;
    if (st == XPJ_OK) {
      memcpy(code, f.ce.code, sizeof code);
      key.code = code;
      rt_fetched_from_entry(&f, XPJ_ORIGIN_CACHE);
      f.tier = RT_TIER_disk;
    }
  } else {
    st = fetch(&ob, &f);
  }
  if (st == XPJ_OK) {
    st = place(&ob, &f, e);
    if (st != XPJ_OK && by_alias) {
      /* refused: the caller asks again the whole way, which drops it */
      free(f.msg);
      f.msg = NULL;
      alias_miss = "the device refused the binary it led to";
      st = rt_err(XPJ_ERR_NOT_FOUND, "%s: %s", rq->kernel, alias_miss);
    } else if (st != XPJ_OK && !f.v.failed &&
               f.origin != XPJ_ORIGIN_COMPILED) {
      /* the device refused a binary a cache, bundle or daemon handed us:
       * drop it where it came from, and compile here instead */
      xpj_log(XPJ_LOG_INFO, "kernel %s for %s: the device refused the "
              "binary from %s (%s); compiling here", rq->kernel,
              dev ? dev->id : rq->target_str,
              origin_words[f.origin < 6 ? f.origin : 0], xpj_last_error());
      drop_refused(&ob, &f);
      rt_fetched_clear(&f);
      st = compile_here(&ob, &f);
      if (st == XPJ_OK)
        st = place(&ob, &f, e);
    }
  }
  if (!by_alias)
    write_back(&ob, &f);
  end_turn(&ob, &f);
  if (by_alias && st != XPJ_OK)
    log_alias_miss(rq, digest, alias_miss);
  else
    log_obtained(&ob, &f, st, t0);
  if (!by_alias || st == XPJ_OK) /* (else the whole way counts it) */
    count(cc, l2, &f);
  /* the way here from what the caller gave, for the next process */
  if (alias && l2 && f.loaded && !f.v.failed)
    xpj_l2_set_alias_digest(l2, alias, digest);
  free(alias);

  pthread_mutex_lock(&cc->mu);
  /* failures that expire are looked up again (in the second level) */
  bool keep = f.loaded || (f.msg && f.cacheable && !f.v.expires_ms);
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
  rt_fetched_clear(&f);
  if (!keep) {
    free((void *)e->v.data);
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
