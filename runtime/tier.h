/* tier.h - the places a compiled kernel may come from before a compile,
 * walked in one order (docs/cache.md, "Tiers"): the second level on disk,
 * bundles, the compile daemon, the cluster's Redis.
 *
 * A tier is a file that defines `const rt_tier rt_tier_NAME` and a line
 * in RT_TIERS below; nothing else names it. libxpjit walks every tier
 * (kcache.c); xpjitd walks the local ones on its event loop and its
 * workers walk the remote ones, then compile (rt_cc_local, rt_cc_serve).
 * Each tier counts its own events in the counters of xpjit_cache.h. */
#ifndef XPJ_RT_TIER_H
#define XPJ_RT_TIER_H

#include "rt.h"

/* The tiers, in the order a request walks them. The daemon, which
 * compiles for the node, comes before the cluster's Redis: it asks Redis
 * itself, so that a node's processes make one request there, not one
 * each. */
#define RT_TIERS(X) X(disk) X(bundles) X(daemon) X(redis)

#define RT_TIER_INDEX(name) RT_TIER_##name,
enum { RT_TIERS(RT_TIER_INDEX) RT_NTIERS };
#undef RT_TIER_INDEX

/* A request on its way through the tiers: the request, keyed once. */
typedef struct rt_obtain {
  rt_cc *cc;
  xpj_cache *l2;
  const rt_request *rq;
  const xpj_cache_key *key;
  const char *digest; /* of key: the request's identity in every tier */
  /* digest NULL: the request is not keyed, and only a daemon is asked,
   * by its source (kcache.c daemon_by_source); its answer names the key's
   * digest here */
  char named[65];
  /* the longest a remote tier waits for another process's compile of
   * the same key before compiling itself (0: as long as a compile may
   * take); 1 after a daemon that could not serve */
  int64_t wait_ms;
  /* a tier's hold on this request (the Redis tier's cluster-wide compile
   * lock and its owner token), released by the tier's done */
  bool held;
  char token[40];
  /* a first look, before the cache file is opened for a miss in its hit
   * files (kcache.c, fetch): a tier answers only with what it has at
   * once, takes no lock, waits for nobody and starts no compile; but a
   * daemon that keeps this very cache file, which looks in its memory
   * and that file before it compiles or waits (dclient.c) */
  bool peek;
  /* what each tier said, for the log: 0 not asked, RT_ASKED_MISS,
   * RT_ASKED_FELL_BACK (a daemon that was there and could not serve),
   * RT_ASKED_ABSENT (no daemon listens, or it is being backed off from),
   * RT_ASKED_REFUSED (it had a value, refused: damaged, forged, unsigned
   * or another key's) */
  uint8_t asked[RT_NTIERS];
  /* this key's turn to compile among the processes of the cache file,
   * held from before the compile until its row is written (kcache.c,
   * take_turn) */
  bool in_flight;
  int flight_fd;
  /* the cache file's lookup after waiting for a turn: not counted again
   * (the lookup that missed was); and whether the disk tier stored the
   * compile (the turn's lock file then goes) */
  bool uncounted, stored;
} rt_obtain;
enum {
  RT_ASKED_MISS = 1,
  RT_ASKED_FELL_BACK = 2,
  RT_ASKED_ABSENT = 3,
  RT_ASKED_REFUSED = 4
};

/* A compiled kernel on its way to the first level, or to a daemon's
 * client: the record every tier reads and writes (v, as the store keeps
 * it: v.failed is 0, 1 or an xpd_failed_code), where it came from, and
 * the storage behind v's pointers (one of ce, res, dpay, own). */
typedef struct fetched {
  xpj_cache_value v;
  xpj_kernel_origin origin;
  unsigned tier;         /* index of the tier it came from; compiles:
                            RT_NTIERS */
  struct rt_bundle *bundle; /* origin BUNDLE: which one */
  xpj_status status;     /* its status when v.failed */
  bool cacheable;        /* a fact about the inputs: may be stored */
  bool same_cache;       /* the daemon stored it in our cache file */
  bool fell_back;        /* a daemon was there and could not serve */
  bool absent;           /* nothing to ask: no bundle loaded, no daemon
                            listening (for the log) */
  bool refused;          /* the tier had a value and refused it (for the
                            log: "Redis refused", not "miss") */
  bool loaded;           /* on the device (or copied, dev NULL) */
  char *msg;             /* the failure's message, for the first level */
  xpj_cache_entry ce;
  xpj_result *res;
  uint8_t *dpay;
  void *own;             /* a tier's buffer behind v's pointers */
} fetched;

typedef enum rt_tier_kind {
  RT_TIER_LOCAL,  /* files on this machine: answers at once */
  RT_TIER_REMOTE, /* across a socket: may wait (for another's compile) */
} rt_tier_kind;

/* A tier. open (NULL: no state) sets up its state from the context's
 * descriptor when the context is created; a tier that cannot start warns
 * and stays off (state NULL), it never fails the context. get fills f and
 * says true when it has the kernel (a hit, or a failure it remembers).
 * put (NULL: read-only) is offered what a later tier or a compile
 * produced (write-back), once the device took it; done (NULL: nothing)
 * ends the request, put or not (a lock taken by get is let go). */
typedef struct rt_tier {
  const char *name;
  rt_tier_kind kind;
  xpj_status (*open)(rt_cc *cc, const xpj_context_desc *desc, void **state);
  void (*close)(void *state);
  bool (*get)(void *state, rt_obtain *ob, fetched *f);
  void (*put)(void *state, rt_obtain *ob, const fetched *f);
  void (*done)(void *state, rt_obtain *ob);
} rt_tier;

#define RT_TIER_DECLARE(name) extern const rt_tier rt_tier_##name;
RT_TIERS(RT_TIER_DECLARE)
#undef RT_TIER_DECLARE

/* Whether the bundles tier (its state) has no bundle (tier_bundles.c). */
bool rt_bundles_none(const void *state);

/* Adds d to the context's counters and the second level's (kcache.c). */
void rt_cc_note(rt_obtain *ob, const xpj_cache_counters *d);
/* The wall clock, Unix epoch ms (expiries). */
int64_t rt_wall_ms(void);

/* ---- xpjitd's walk (kcache.c) ---- */

/* The longest an xpjitd worker waits for another process's compile of the
 * same key in a remote tier before compiling it itself; xpjitd gives its
 * workers this much more than the compile limit. */
#define RT_SERVE_WAIT_MS 4000

struct rt_keyed; /* daemon.h */

/* The request of a keyed kernel (no device, no source). */
void rt_keyed_request(const struct rt_keyed *k, rt_request *rq);
/* The local tiers, for xpjitd's event loop: true and f filled when one
 * has the kernel. A remembered failure answers only a request that allows
 * no more time or memory than the compile that ran out of them. */
bool rt_cc_local(xpj_context *ctx, const struct rt_keyed *k, fetched *f);
/* The remote tiers, then a compile in this process (an xpjitd worker is
 * the isolation), written back to the remote tiers: XPJ_OK when f holds
 * an answer, failed or not. */
xpj_status rt_cc_serve(xpj_context *ctx, const struct rt_keyed *k,
                       fetched *f);
void rt_fetched_clear(fetched *f);
/* f's record from f->ce, a second-level or bundle entry. */
void rt_fetched_from_entry(fetched *f, xpj_kernel_origin origin);

/* ---- the Redis tier's value format (tier_redis.c), for its tests ---- */

typedef struct rt_redis rt_redis;
xpj_status rt_redis_open(const char *url, rt_redis **out);
void rt_redis_close(rt_redis *r);
/* r's URL with its password masked, for messages. */
const char *rt_redis_shown(const rt_redis *r);
/* A value (docs/cache.md) for f stored under keytext: malloc'd, *len
 * bytes; NULL when out of memory. */
uint8_t *rt_redis_encode(const rt_redis *r, const char *keytext,
                         const fetched *f, size_t *len);
/* Fills f from value v (its storage in f->own) when it is a value for
 * keytext with a good checksum (an HMAC with r's secret); else returns
 * why not and leaves f alone. */
const char *rt_redis_decode(const rt_redis *r, const char *keytext,
                            const uint8_t *v, size_t n, fetched *f);

#endif
