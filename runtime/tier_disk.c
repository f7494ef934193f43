/* tier_disk.c - the second level: the user's SQLite cache file (cache/),
 * opened by the context on first use (kcache.c) and shared by every
 * process of the user and by xpjitd. It takes every answer worth keeping
 * from the tiers after it and from compiles. */
#include "tier.h"
#include "daemon.h"

/* A remembered failure answers only a request that allows no more time or
 * memory than the compile that ran out of them. */
static bool get(void *state, rt_obtain *ob, fetched *f) {
  (void)state;
  if (ob->l2 && (ob->uncounted
                     ? xpj_cache_get_uncounted(ob->l2, ob->key, &f->ce)
                     : xpj_cache_get(ob->l2, ob->key, &f->ce)) == XPJ_OK) {
    uint64_t ms = 0, mb = 0;
    if (f->ce.failed && f->ce.expires_ms) /* the limits cost a sysconf */
      xpj_compile_limits(ob->rq->o, &ms, &mb);
    if (!f->ce.failed || !f->ce.expires_ms ||
        xpd_failure_answers(f->ce.failed, ms, mb)) {
      rt_fetched_from_entry(f, XPJ_ORIGIN_CACHE);
      return true;
    }
    xpj_cache_entry_clear(&f->ce);
  }
  return false;
}

/* Compiles, the daemon's replies (unless it wrote them to this very
 * file) and the cluster tier's, once the device took them, or failures
 * that are facts about the inputs. A Redis hit is written later (with the
 * cache's next write, or at close): a hit should not pay for a write. */
static void put(void *state, rt_obtain *ob, const fetched *f) {
  (void)state;
  bool fresh = f->origin == XPJ_ORIGIN_COMPILED ||
               f->origin == XPJ_ORIGIN_REDIS ||
               (f->origin == XPJ_ORIGIN_DAEMON && !f->same_cache);
  if (!ob->l2 || !fresh || !f->cacheable || (!f->v.failed && !f->loaded))
    return;
  if (f->origin == XPJ_ORIGIN_REDIS)
    xpj_cache_put_later(ob->l2, ob->key, &f->v);
  else
    ob->stored = xpj_cache_put(ob->l2, ob->key, &f->v) == XPJ_OK;
}

const rt_tier rt_tier_disk = {"disk", RT_TIER_LOCAL, NULL, NULL, get, put,
                              NULL};
