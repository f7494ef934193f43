/* xpjitd.h - what the daemon (xpjitd.c) and its compile workers
 * (xpjitd_worker.c), one binary, share. */
#ifndef XPJITD_H
#define XPJITD_H

#include "proto.h"
#include "xpjit.h"

#include <stdint.h>

/* `xpjitd --worker`: the compile worker's main loop. */
int xpjitd_worker_main(void);

/* 32 bytes as 64 lowercase hex digits and a NUL. */
void xpjitd_hex(const uint8_t d[32], char out[65]);

/* Parsed programs by (source, file name), least recently used out. A
 * parsed program takes many times its source's size: max_bytes bounds the
 * sources of the programs kept (the newest is kept whatever its size). */
#define XPJITD_PROGS 64
typedef struct xpjitd_progs {
  unsigned cap;     /* <= XPJITD_PROGS */
  size_t max_bytes; /* of sources kept (0: no bound) */
  size_t bytes;
  uint64_t clock;
  struct {
    char key[65];
    xpj_program *p;
    size_t size; /* its source's */
    uint64_t used;
  } slot[XPJITD_PROGS];
} xpjitd_progs;

/* The program of g's source in ctx, parsed now or earlier; NULL with
 * *status and the parser's message in err when it does not parse. The
 * program stays valid until the next call. */
xpj_program *xpjitd_program(xpjitd_progs *pc, xpj_context *ctx,
                            const xpd_get *g, xpj_status *status, char *err,
                            size_t errsize);
void xpjitd_progs_free(xpjitd_progs *pc);

#endif
