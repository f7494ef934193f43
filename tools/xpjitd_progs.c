/* xpjitd_progs.c - parsed programs kept by source hash, and the threads
 * that parse them off the daemon's event loop (xpjitd.h).
 *
 * Parsing an 8 MiB source takes seconds; the event loop must answer other
 * clients meanwhile. So the daemon hands work whose cost grows with a
 * request (hashing a large source, parsing, specialising, keying) to a
 * small pool of threads and takes the results back through an eventfd.
 * The pool knows nothing of requests: a task, a work function, and two
 * rules that bound what one client, or one large source, can cost the
 * others (see xpjitd_task). */
#define _GNU_SOURCE
#include "xpjitd.h"

#include <errno.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

void xpjitd_hex(const uint8_t d[32], char out[65]) {
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    out[2 * i] = hex[d[i] >> 4];
    out[2 * i + 1] = hex[d[i] & 15];
  }
  out[64] = 0;
}

/* ---- parsed programs ---- */

/* Empties slot i (pc->mu held); its program, for the caller to destroy
 * outside the lock. */
static xpj_program *take(xpjitd_progs *pc, unsigned i) {
  xpj_program *p = pc->slot[i].p;
  pc->slot[i].p = NULL;
  pc->slot[i].key[0] = 0;
  pc->bytes -= pc->slot[i].size;
  pc->slot[i].size = 0;
  pc->slot[i].used = 0;
  pc->slot[i].users = 0;
  pc->slot[i].parsing = false;
  return p;
}

static bool idle_slot(const xpjitd_progs *pc, unsigned i) {
  return !pc->slot[i].users && !pc->slot[i].parsing;
}

xpj_program *xpjitd_program(xpjitd_progs *pc, xpj_context *ctx,
                            const xpd_get *g, xpj_status *status, char *err,
                            size_t errsize) {
  struct sha256_ctx h;
  sha256_init(&h);
  sha256_update(&h, g->source_len, g->source);
  sha256_update(&h, strlen(g->filename) + 1, (const uint8_t *)g->filename);
  uint8_t d[32];
  sha256_digest(&h, sizeof d, d);
  char key[65];
  xpjitd_hex(d, key);
  unsigned cap = pc->cap && pc->cap <= XPJITD_PROGS ? pc->cap : XPJITD_PROGS;
  pthread_mutex_lock(&pc->mu);
  int mine = -1; /* the slot this call parses into */
  for (;;) {
    bool waited = false;
    for (unsigned i = 0; i < cap && !waited; i++) {
      if (strcmp(pc->slot[i].key, key))
        continue;
      if (pc->slot[i].parsing) { /* another thread parses it: wait */
        pthread_cond_wait(&pc->cv, &pc->mu);
        waited = true;
      } else if (pc->slot[i].p) {
        pc->slot[i].used = ++pc->clock;
        pc->slot[i].users++;
        xpj_program *p = pc->slot[i].p;
        pthread_mutex_unlock(&pc->mu);
        *status = XPJ_OK;
        return p;
      }
    }
    if (!waited)
      break;
  }
  /* the least recently used slot nobody holds or parses into */
  for (unsigned i = 0; i < cap; i++)
    if (idle_slot(pc, i) &&
        (mine < 0 || pc->slot[i].used < pc->slot[mine].used))
      mine = (int)i;
  xpj_program *old = NULL;
  if (mine >= 0) {
    old = take(pc, (unsigned)mine);
    memcpy(pc->slot[mine].key, key, sizeof key);
    pc->slot[mine].parsing = true;
  }
  pthread_mutex_unlock(&pc->mu);
  xpj_program_destroy(old);
  xpj_program *p = NULL;
  *status = xpj_program_create(ctx, g->filename[0] ? g->filename
                                                   : "<source>",
                               (const char *)g->source, g->source_len, NULL,
                               &p);
  if (*status != XPJ_OK)
    snprintf(err, errsize, "%s", xpj_last_error());
  if (mine < 0) /* every slot held: this one is the caller's alone */
    return p;
  xpj_program *gone[XPJITD_PROGS];
  unsigned ngone = 0;
  pthread_mutex_lock(&pc->mu);
  if (!p) {
    take(pc, (unsigned)mine);
  } else {
    pc->slot[mine].parsing = false;
    pc->slot[mine].p = p;
    pc->slot[mine].size = g->source_len;
    pc->slot[mine].used = ++pc->clock;
    pc->slot[mine].users = 1;
    pc->bytes += g->source_len;
    /* then the oldest others, while the sources kept are over the bound */
    while (pc->max_bytes && pc->bytes > pc->max_bytes) {
      int o = -1;
      for (unsigned i = 0; i < cap; i++)
        if ((int)i != mine && pc->slot[i].p && idle_slot(pc, i) &&
            (o < 0 || pc->slot[i].used < pc->slot[o].used))
          o = (int)i;
      if (o < 0)
        break;
      gone[ngone++] = take(pc, (unsigned)o);
    }
  }
  pthread_cond_broadcast(&pc->cv);
  pthread_mutex_unlock(&pc->mu);
  for (unsigned i = 0; i < ngone; i++)
    xpj_program_destroy(gone[i]);
  return p;
}

void xpjitd_program_done(xpjitd_progs *pc, xpj_program *p) {
  if (!p)
    return;
  pthread_mutex_lock(&pc->mu);
  for (unsigned i = 0; i < XPJITD_PROGS; i++)
    if (pc->slot[i].p == p) {
      pc->slot[i].users--;
      pthread_mutex_unlock(&pc->mu);
      return;
    }
  pthread_mutex_unlock(&pc->mu);
  xpj_program_destroy(p); /* not kept: parsed when every slot was held */
}

void xpjitd_progs_free(xpjitd_progs *pc) {
  for (unsigned i = 0; i < XPJITD_PROGS; i++)
    xpj_program_destroy(take(pc, i));
}

/* ---- the parse pool ---- */

#define POOL_MAX 64
/* A thread looks this far into the queue for a task of an owner with none
 * running: the search stays cheap however long the queue. */
#define PICK_WINDOW 64

struct xpjitd_pool {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  xpjitd_task *qhead, *qtail; /* queued, oldest first */
  xpjitd_task *dhead, *dtail; /* finished, not taken yet */
  const void *running[POOL_MAX]; /* each thread's task's owner */
  unsigned threads, started, big_running;
  bool stop;
  int efd;
  xpjitd_work *work;
  pthread_t th[POOL_MAX];
};

/* The next task for a thread (p->mu held), out of the queue: the oldest
 * of an owner with no task running, else the oldest; a big task only
 * while another thread is left for the small ones. Cancelled tasks go at
 * once: they cost nothing. */
static xpjitd_task *pick(xpjitd_pool *p) {
  unsigned big_max = p->threads > 1 ? p->threads - 1 : 1;
  xpjitd_task *first = NULL, *first_prev = NULL, *prev = NULL;
  unsigned seen = 0;
  for (xpjitd_task *t = p->qhead; t && seen < PICK_WINDOW;
       prev = t, t = t->next, seen++) {
    bool cancelled = atomic_load(&t->cancelled);
    if (!cancelled && t->big && p->big_running >= big_max)
      continue;
    bool busy = false;
    for (unsigned i = 0; i < p->threads && !busy && !cancelled; i++)
      busy = t->owner && p->running[i] == t->owner;
    if (!busy) {
      first = t, first_prev = prev;
      break;
    }
    if (!first)
      first = t, first_prev = prev;
  }
  if (!first)
    return NULL;
  if (first_prev)
    first_prev->next = first->next;
  else
    p->qhead = first->next;
  if (p->qtail == first)
    p->qtail = first_prev;
  first->next = NULL;
  return first;
}

static void *pool_thread(void *arg) {
  xpjitd_pool *p = arg;
  pthread_mutex_lock(&p->mu);
  unsigned me = p->started++;
  for (;;) {
    xpjitd_task *t = pick(p);
    if (!t) {
      if (p->stop && !p->qhead)
        break;
      pthread_cond_wait(&p->cv, &p->mu);
      continue;
    }
    bool run = !atomic_load(&t->cancelled);
    p->running[me] = run ? t->owner : NULL;
    bool big = run && t->big;
    p->big_running += big;
    pthread_mutex_unlock(&p->mu);
    if (run) {
      p->work(t);
      t->ran = true;
    }
    pthread_mutex_lock(&p->mu);
    p->running[me] = NULL;
    p->big_running -= big;
    bool was_empty = !p->dhead;
    if (p->dtail)
      p->dtail->next = t;
    else
      p->dhead = t;
    p->dtail = t;
    if (was_empty) {
      uint64_t one = 1;
      if (write(p->efd, &one, sizeof one) < 0) {
        /* the counter cannot overflow here: it is read each round */
      }
    }
    if (big || p->qhead) /* a big slot, or an owner, is free again */
      pthread_cond_broadcast(&p->cv);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

xpjitd_pool *xpjitd_pool_start(unsigned threads, xpjitd_work *work) {
  if (!threads || threads > POOL_MAX || !work) {
    errno = EINVAL;
    return NULL;
  }
  xpjitd_pool *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->threads = threads;
  p->work = work;
  p->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (p->efd < 0 || pthread_mutex_init(&p->mu, NULL) ||
      pthread_cond_init(&p->cv, NULL)) {
    int e = errno;
    if (p->efd >= 0)
      close(p->efd);
    free(p);
    errno = e;
    return NULL;
  }
  for (unsigned i = 0; i < threads; i++) {
    int rc = pthread_create(&p->th[i], NULL, pool_thread, p);
    if (rc) {
      pthread_mutex_lock(&p->mu);
      p->stop = true;
      pthread_cond_broadcast(&p->cv);
      pthread_mutex_unlock(&p->mu);
      for (unsigned k = 0; k < i; k++)
        pthread_join(p->th[k], NULL);
      close(p->efd);
      pthread_cond_destroy(&p->cv);
      pthread_mutex_destroy(&p->mu);
      free(p);
      errno = rc;
      return NULL;
    }
  }
  return p;
}

int xpjitd_pool_fd(const xpjitd_pool *p) { return p->efd; }

void xpjitd_pool_submit(xpjitd_pool *p, xpjitd_task *t) {
  t->next = NULL;
  t->ran = false;
  pthread_mutex_lock(&p->mu);
  if (p->qtail)
    p->qtail->next = t;
  else
    p->qhead = t;
  p->qtail = t;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

xpjitd_task *xpjitd_pool_done(xpjitd_pool *p) {
  uint64_t n;
  if (read(p->efd, &n, sizeof n) < 0) {
    /* EAGAIN: nothing signalled; the list may still hold tasks */
  }
  pthread_mutex_lock(&p->mu);
  xpjitd_task *t = p->dhead;
  p->dhead = p->dtail = NULL;
  pthread_mutex_unlock(&p->mu);
  return t;
}

xpjitd_task *xpjitd_pool_stop(xpjitd_pool *p) {
  if (!p)
    return NULL;
  pthread_mutex_lock(&p->mu);
  p->stop = true;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  for (unsigned i = 0; i < p->threads; i++)
    pthread_join(p->th[i], NULL);
  xpjitd_task *t = p->dhead;
  close(p->efd);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
  return t;
}
