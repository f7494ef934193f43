/* daemon.h - what xpjitd, its workers and xpjit-cli share with libxpjit:
 * the socket path, connecting with the peer check and handshake, reading
 * and writing whole frames with deadlines, and computing a kernel's cache
 * key exactly as the runtime does. Internal (not installed). */
#ifndef XPJIT_DAEMON_H
#define XPJIT_DAEMON_H

#include "proto.h"
#include "xpjit.h"
#include "xpjit_cache.h"
#include "xpjit_codegen.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The default socket: $XDG_RUNTIME_DIR/xpjit/xpjitd.sock, or
 * /tmp/xpjit-UID/xpjitd.sock without XDG_RUNTIME_DIR. False if too long
 * for a socket address. */
bool xpd_default_path(char *buf, size_t size);
/* The socket a setting names into buf: "" for off ("off", "0", "no"), else
 * a path (NULL, "" and "auto": the default). False if too long. */
bool xpd_setting_path(const char *setting, char *buf, size_t size);
/* The same for XPJIT_DAEMON. */
bool xpd_env_path(char *buf, size_t size);

/* A remembered failure (a compile that ran out of time or memory) is kept
 * in a cache row, with an expiry, as failed = kind + 16 x the limit it ran
 * out of (ms for XPJ_FAILURE_TIMEOUT, MiB for XPJ_FAILURE_MEMORY), so that
 * whoever reads it knows whether it answers a request: one that allows
 * more time or memory compiles again. A plain compile failure is 1. */
static inline int xpd_failed_code(xpj_failure_kind kind, uint64_t limit) {
  if (limit > (uint64_t)(INT32_MAX >> 4))
    limit = (uint64_t)(INT32_MAX >> 4);
  return (int)((unsigned)kind | (unsigned)(limit << 4));
}
static inline bool xpd_failure_answers(int failed, uint64_t timeout_ms,
                                       uint64_t memory_mb) {
  unsigned kind = (unsigned)failed & 15u;
  uint64_t limit = (uint64_t)(unsigned)failed >> 4;
  if (!limit)
    return true;
  if (kind == XPJ_FAILURE_TIMEOUT)
    return timeout_ms && timeout_ms <= limit;
  if (kind == XPJ_FAILURE_MEMORY)
    return memory_mb && memory_mb <= limit;
  return true;
}
static inline uint64_t xpd_failed_limit(int failed) {
  return (uint64_t)(unsigned)failed >> 4;
}
/* A compile that failed for a reason in its inputs is kept as
 * XPJ_FAILURE_INPUT + 16 x its status, so that a row answers with the
 * status the compile gave (XPJ_ERR_UNSUPPORTED: a limit of the target);
 * 1 alone, as rows written before, is XPJ_ERR_COMPILE. The protocol sends
 * the status apart (STATUS) and FAILED as 0 or 1. */
static inline int xpd_failed_input(xpj_status st) {
  return st <= XPJ_OK || st == XPJ_ERR_COMPILE || st > XPJ_ERR_BOUNDS
             ? 1
             : (int)((unsigned)XPJ_FAILURE_INPUT | ((unsigned)st << 4));
}
/* The status a row's failed answers with (failed not 0). */
static inline xpj_status xpd_failed_status(int failed) {
  unsigned kind = (unsigned)failed & 15u, st = (unsigned)failed >> 4;
  if (kind == XPJ_FAILURE_MEMORY)
    return XPJ_ERR_NOMEM;
  if (kind == XPJ_FAILURE_INPUT && st > XPJ_OK && st <= XPJ_ERR_BOUNDS)
    return (xpj_status)st;
  return XPJ_ERR_COMPILE;
}

/* Milliseconds on CLOCK_MONOTONIC. */
uint64_t xpd_now_ms(void);

/* Connects to path, checks that the peer runs as this process's
 * effective uid, and exchanges HELLO/WELCOME within timeout_ms. Returns
 * the fd, or -1 with a message in err (-2: the peer is another user,
 * who holds the path). welcome (may be NULL) gets the
 * greeting's payload (free it). The socket is non-blocking: every read
 * on it waits in poll (a recv blocked on a Unix socket also wakes when
 * the peer reads what was sent). */
int xpd_connect(const char *path, int timeout_ms, char *err, size_t errsize,
                uint8_t **welcome, size_t *welcome_len);
/* Writes all of b (MSG_NOSIGNAL) by deadline_ms (xpd_now_ms clock). */
bool xpd_write_all(int fd, const void *p, size_t n, uint64_t deadline_ms);
/* Reads one frame from any socket, without blocking in a read (poll
 * waits): header into h, payload into *payload (malloc'd, NULL when
 * empty). max: the payload limit. Returns XPD_E_OK, XPD_E_SHORT for
 * EOF/timeout/IO error (err says which), or the decoder's error. */
xpd_err xpd_read_frame(int fd, uint32_t max, uint64_t deadline_ms,
                       xpd_header *h, uint8_t **payload, char *err,
                       size_t errsize);
/* The one frame that answers a request nothing may follow (not a first
 * look, which may be told PENDING first): as xpd_read_frame, but header
 * and payload with one recv when they fit in 8 KiB; bytes past the frame
 * read with it are the daemon's error (XPD_E_OP). */
xpd_err xpd_read_reply(int fd, uint32_t max, uint64_t deadline_ms,
                       xpd_header *h, uint8_t **payload, char *err,
                       size_t errsize);
/* One request, one reply on a connection of xpd_connect's (or any
 * non-blocking socket): sends the frame in b and reads the reply's first
 * frame within timeout_ms. */
xpd_err xpd_call(int fd, const xpd_buf *b, uint32_t max, int timeout_ms,
                 xpd_header *h, uint8_t **payload, char *err, size_t errsize);
/* The same for a request answered with exactly one frame (not a first
 * look), read with xpd_read_reply: one recv fewer for a small reply. */
xpd_err xpd_call_one(int fd, const xpd_buf *b, uint32_t max, int timeout_ms,
                     xpd_header *h, uint8_t **payload, char *err,
                     size_t errsize);

/* A kernel of a program resolved and keyed as xpj_program_get_binary and
 * xpj_program_get_kernel do: the specialised module, canonical dtypes,
 * target and options, and the cache key with its digest. */
typedef struct rt_keyed {
  xpj_module *sm; /* owned */
  xpj_target t;
  char tstr[1200];
  char canon[256];
  unsigned ndim;
  xpj_compile_opts o;
  char ostr[64];
  char code[65];
  char digest[65];
  xpj_cache_key key; /* strings point into this struct and the program */
} rt_keyed;
xpj_status rt_program_keyed(xpj_program *p, const char *name,
                            const char *dtypes, unsigned ndim,
                            const char *target, const xpj_compile_opts *opts,
                            rt_keyed *out);
void rt_keyed_free(rt_keyed *k);

#endif
