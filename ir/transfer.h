/*
 * transfer.h - the transfer encoding of a whole module: how a module crosses
 * a socket to the compile server (compiler/cserver.c), a process exec'd
 * apart from the caller, so nothing of the caller's memory comes with it.
 *
 * Unlike the canonical serialization (xpj_module_serialize, for hashing),
 * it keeps everything that parsing, specialisation, verification and code
 * generation can read: every function (with its name, parameters, locals'
 * names, source positions), the type table in id order, the string pool and
 * the source files. The format is in docs/ir.md, "Transfer encoding".
 *
 * The decoder treats its input as hostile: whatever the bytes, it returns
 * either a module that passes xpj_module_verify and the builder's typing
 * rules, with every index in range (code generation trusts the module), or
 * an error with a one-line reason. It never reads past the input, and never
 * allocates more than the input's length justifies.
 *
 * Encoding is canonical: a byte string the decoder accepts encodes back to
 * itself, so decode(encode(m)) encodes to the same bytes as m.
 */
#ifndef XPJ_TRANSFER_H
#define XPJ_TRANSFER_H

#include "xpjit_ir.h"

#include <stddef.h>
#include <stdint.h>

/* The version written after the magic; a change to the format bumps it
 * (the compile server's stamp includes it). */
#define XPJ_TRANSFER_VERSION 1u

/* The deepest recursion a decoded module can cause in passes that walk
 * blocks and calls recursively (the verifier, the printer, code
 * generation): along any chain of calls, the nesting depth of each
 * function's blocks plus one per function, summed. Modules the frontend
 * makes stay far below it (it refuses more than XPJ_MAX_DEPTH, counted
 * the same way: xpj_check_calls). */
#define XPJ_TRANSFER_MAX_DEPTH 4096u

/* Every field of m that parsing, specialisation, verification or code
 * generation can read: all functions (name, kind, dims, reqd_local, type
 * params, const params, params with names, types, vals and locs, ret, loc,
 * insts with every field incl. loc and imm, pool, blocks with parents), the
 * type table in id order, the string pool, the files (names and texts).
 * *out is malloc'd (free with free()). XPJ_ERR_INVALID for a NULL argument;
 * XPJ_ERR_NOMEM when memory is short or m ran out of memory while being
 * built. m is not checked: a module that does not verify encodes, and its
 * encoding does not decode. */
xpj_status xpj_module_encode(const xpj_module *m, uint8_t **out, size_t *len);

/* Decodes n bytes at p into a new module (*out, destroy with
 * xpj_module_destroy). For any byte string: XPJ_OK with a module that
 * passes xpj_module_verify and on which every index is in range, or
 * XPJ_ERR_INVALID (XPJ_ERR_NOMEM when memory is short) with *out NULL and a
 * one-line reason (printable ASCII) in err (errsize bytes; err may be NULL
 * when errsize is 0). */
xpj_status xpj_module_decode(const uint8_t *p, size_t n, xpj_module **out,
                             char *err, size_t errsize);

#endif
