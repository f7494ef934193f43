/* xpjitd.h - what the daemon (xpjitd.c), its compile workers
 * (xpjitd_worker.c) and its parsed programs and parse threads
 * (xpjitd_progs.c), one binary, share. */
#ifndef XPJITD_H
#define XPJITD_H

#include "proto.h"
#include "xpjit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* `xpjitd --worker`: the compile worker's main loop. */
int xpjitd_worker_main(void);

/* 32 bytes as 64 lowercase hex digits and a NUL. */
void xpjitd_hex(const uint8_t d[32], char out[65]);

/* ---- parsed programs ---- */

/* Parsed programs by (source, file name), least recently used out. A
 * parsed program takes many times its source's size: max_bytes bounds the
 * sources of the programs kept (the newest is kept whatever its size).
 * Thread safety: any thread may call xpjitd_program; a source being
 * parsed by one thread is waited for by the others, not parsed again. */
#define XPJITD_PROGS 64
typedef struct xpjitd_progs {
  unsigned cap;     /* <= XPJITD_PROGS */
  size_t max_bytes; /* of sources kept (0: no bound) */
  size_t bytes;
  uint64_t clock;
  pthread_mutex_t mu; /* PTHREAD_MUTEX_INITIALIZER */
  pthread_cond_t cv;  /* PTHREAD_COND_INITIALIZER: a parse ended */
  struct {
    char key[65];
    xpj_program *p;
    size_t size;     /* its source's */
    uint64_t used;
    unsigned users;  /* callers holding p: it is not evicted */
    bool parsing;    /* key is being parsed (p NULL) */
  } slot[XPJITD_PROGS];
} xpjitd_progs;

/* The program of g's source in ctx, parsed now or earlier; NULL with
 * *status and the parser's message in err when it does not parse. The
 * caller holds the program until xpjitd_program_done. */
xpj_program *xpjitd_program(xpjitd_progs *pc, xpj_context *ctx,
                            const xpd_get *g, xpj_status *status, char *err,
                            size_t errsize);
void xpjitd_program_done(xpjitd_progs *pc, xpj_program *p);
/* Destroys every program (none may be held). */
void xpjitd_progs_free(xpjitd_progs *pc);

/* ---- the parse pool: work whose cost grows with a request, off the
 * event loop ---- */

/* A task, embedded at the start of the caller's record. The pool calls
 * its work function on one of its threads, then hands the task back
 * (xpjitd_pool_done); every task submitted comes back exactly once. */
typedef struct xpjitd_task {
  struct xpjitd_task *next;
  const void *owner; /* who asked: a thread takes a task of an owner with
                        none running before another of the same owner */
  bool big;          /* at most threads - 1 big tasks run at once (one
                        when the pool has one thread) */
  atomic_bool cancelled; /* set by the submitter: not run if not started */
  bool ran;          /* the work function was called */
} xpjitd_task;

typedef void xpjitd_work(xpjitd_task *t);
typedef struct xpjitd_pool xpjitd_pool;

/* Starts threads threads (1..64) running work; NULL with errno on failure. */
xpjitd_pool *xpjitd_pool_start(unsigned threads, xpjitd_work *work);
/* An eventfd that is readable while finished tasks wait to be taken. */
int xpjitd_pool_fd(const xpjitd_pool *p);
void xpjitd_pool_submit(xpjitd_pool *p, xpjitd_task *t);
/* The finished tasks, oldest first, linked by next; NULL when none. */
xpjitd_task *xpjitd_pool_done(xpjitd_pool *p);
/* Runs what is queued (cancelled tasks are not run), joins the threads
 * and frees the pool; the tasks not taken yet are returned as by
 * xpjitd_pool_done. NULL: nothing. */
xpjitd_task *xpjitd_pool_stop(xpjitd_pool *p);

#endif
