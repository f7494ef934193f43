/* tier.h - the places a compiled kernel may come from before a compile,
 * walked in one order by kcache.c (docs/cache.md, "Tiers"): the second
 * level on disk, bundles, the compile daemon, the cluster's Redis. Adding
 * a tier is a file with its get/put and a line in kcache.c's table. */
#ifndef XPJ_RT_TIER_H
#define XPJ_RT_TIER_H

#include "rt.h"

/* A request on its way through the tiers: the request, keyed once. */
typedef struct rt_obtain {
  rt_cc *cc;
  xpj_cache *l2;
  const rt_request *rq;
  const xpj_cache_key *key;
  const char *digest; /* of key: the request's identity in every tier */
  /* the Redis tier's cluster-wide compile lock, while this request holds
   * it (tier_redis.c) */
  bool redis_locked;
  char redis_token[40];
} rt_obtain;

/* A compiled kernel on its way to the first level: where it came from,
 * what it says, and the storage behind its fields (one of ce, res, dpay,
 * own). */
typedef struct fetched {
  xpj_kernel_origin origin;
  unsigned tier;         /* index of the tier it came from; compiles: the
                            number of tiers */
  struct rt_bundle *bundle; /* origin BUNDLE: which one */
  bool failed;           /* a compile failure (log says why) */
  xpj_status status;     /* its status when failed */
  const uint8_t *data;
  size_t len;
  const char *entry, *log;
  uint64_t local_bytes, scratch_bytes;
  double compile_ms;
  bool cacheable;        /* a fact about the inputs: may be stored */
  int64_t expires_ms;    /* a remembered resource failure: until then, */
  int failed_code;       /* as xpd_failed_code says (0: a plain one) */
  bool same_cache;       /* the daemon stored it in our cache file */
  bool fell_back;        /* a daemon was there and could not serve */
  bool loaded;           /* on the device (or copied, dev NULL) */
  char *msg;             /* the failure's message, for the first level */
  xpj_cache_entry ce;
  xpj_result *res;
  uint8_t *dpay;
  char *log_owned;
  void *own;             /* a tier's buffer behind data/entry/log */
} fetched;

/* A tier: get fills f and returns true when it has the kernel (a hit, or
 * a failure it remembers); put, when not NULL, is offered what a later
 * tier or a compile produced (write-back), once the device took it. */
typedef struct rt_tier {
  const char *name;
  bool (*get)(rt_obtain *ob, fetched *f);
  void (*put)(rt_obtain *ob, const fetched *f);
} rt_tier;

/* Adds d to the context's counters and the second level's (kcache.c). */
void rt_cc_note(rt_obtain *ob, const xpj_cache_counters *d);

/* tier_redis.c: the cluster tier (XPJIT_REDIS, xpj_context_desc.redis). */
typedef struct rt_redis rt_redis;
xpj_status rt_redis_open(const char *url, rt_redis **out);
void rt_redis_close(rt_redis *r);
bool rt_redis_get(rt_obtain *ob, fetched *f);
void rt_redis_put(rt_obtain *ob, const fetched *f);
/* A value (docs/cache.md) for f stored under keytext: malloc'd, *len
 * bytes; NULL when out of memory. */
uint8_t *rt_redis_encode(const rt_redis *r, const char *keytext,
                         const fetched *f, size_t *len);
/* Fills f from value v (its storage in f->own) when it is a value for
 * keytext with a good checksum (an HMAC with r's secret); else returns
 * why not and leaves f alone. */
const char *rt_redis_decode(const rt_redis *r, const char *keytext,
                            const uint8_t *v, size_t n, fetched *f);
/* After a miss that took the cluster-wide compile lock: releases it when
 * nothing was put (a failed compile), so that waiters stop waiting. */
void rt_redis_done(rt_obtain *ob);

#endif
