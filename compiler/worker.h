/* worker.h - the reply a compiler worker process sends its parent
 * (compile.c): a fixed header (magic "XPJW", status, lengths of the output
 * and the log, local and scratch bytes) and the bytes. Internal. */
#ifndef XPJ_WORKER_H
#define XPJ_WORKER_H

#include "xpjit_codegen.h"

#include <stddef.h>
#include <stdint.h>

/* Decodes a complete reply into r; -1 when it is malformed or truncated
 * (r is then unchanged). */
int xpj_worker_decode(const uint8_t *buf, size_t n, xpj_result *r);
xpj_result *xpj_result_new_internal(void);

#endif
