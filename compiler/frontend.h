/*
 * frontend.h - between the parser and the specialiser (not public).
 *
 * A kernel with const parameters is specialised by parsing its source
 * again with them bound (compiler/spec.c): xpj_parse_bound is xpj_parse
 * with the const parameters of one kernel given values, which then behave
 * like typed module constants there (array sizes, `local(...)`, folded
 * expressions). Only that kernel's body and the device functions are
 * parsed; other kernels keep empty bodies.
 */
#ifndef XPJ_FRONTEND_H
#define XPJ_FRONTEND_H

#include "xpjit_compiler.h"

#include <stdbool.h>

/* How many operators one expression nests, as the passes after parsing
 * see it: a chain a + b + c ... of N binary operators is N deep, though
 * the parser reads it in a loop, which its own recursion bound
 * (XPJ_MAX_NESTING) does not see (docs/language.md, "Limits of a source
 * file"). A pass that recurses on operands goes as deep: LLVM's
 * Loop::makeLoopInvariant overflowed a compile worker's stack on a chain
 * of 100,000 terms. */
#define XPJ_MAX_EXPR_DEPTH 1024

typedef struct xpj_binding {
  const char *kernel;           /* the kernel whose const parameters ... */
  unsigned n;                   /* ... are bound: names and values */
  const char *const *names;
  const int64_t *values;
  const char *text; /* "T=f32, TS=16": every error ends in " (with TEXT)" */
} xpj_binding;

xpj_status xpj_parse_bound(xpj_module *m, const char *filename,
                           const char *src, size_t len, xpj_diags *d,
                           const xpj_binding *b);

/* xpj_specialize without the body: the kernel's function with its
 * parameters and return type specialised and an empty body, no callees
 * and no source files (what a kernel's signature and arguments need when
 * its binary comes from a cache: runtime/program.c). Not verified, not to
 * be compiled or hashed. */
xpj_status xpj_specialize_signature(const xpj_module *m, const char *kernel,
                                    const xpj_spec *spec, xpj_module **out,
                                    xpj_diags *d);

/* The compiler's XPJIT_* settings that do not parse or cannot be used
 * (XPJIT_COMPILE_MEMORY_LIMIT, XPJIT_COMPILE_SERVER, XPJIT_LIBDEVICE,
 * XPJIT_FAULT_INJECT): report(name, message) for each; the runtime warns
 * once per process (runtime/context.c). */
void xpj_compiler_settings_check(void (*report)(const char *name,
                                                const char *msg));

/* Whether v is a value of scalar s (an integer type or bool): bool 0 or
 * 1, an integer in its type's range, any bit pattern for u64. */
bool xpj_const_fits(xpj_scalar s, int64_t v);

#endif
