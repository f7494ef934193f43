/*
 * xpjit_compiler.h - the frontend of xpjit: diagnostics, parsing kernel
 * source into IR (include/xpjit_ir.h), and specialising a generic kernel
 * for concrete element types and ndim.
 *
 * Ownership: the caller creates and destroys diagnostics lists and modules;
 * strings returned by xpj_diags_* are owned by the list and valid until it
 * is cleared or destroyed. xpj_diags_destroy(NULL) is a no-op.
 * Thread safety: distinct objects may be used from distinct threads.
 */
#ifndef XPJIT_COMPILER_H
#define XPJIT_COMPILER_H

#include "xpjit_ir.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XPJ_MAX_SOURCE (16u << 20) /* bytes of one source file */
#define XPJ_MAX_NESTING 200        /* nested blocks / expressions */
#define XPJ_MAX_ERRORS 50          /* errors reported before giving up */

typedef enum xpj_severity {
  XPJ_SEV_ERROR = 0,
  XPJ_SEV_WARNING = 1,
  XPJ_SEV_NOTE = 2,
} xpj_severity;

typedef struct xpj_diags xpj_diags;

typedef struct xpj_diag {
  xpj_severity severity;
  const char *file;    /* "" when not tied to a file */
  unsigned line, col;  /* 1-based; 0 when unknown */
  const char *message;
  const char *source;  /* the source line (printable ASCII), or "": a line
                          over 400 bytes is quoted in part, "..." where it
                          is cut (around col; docs/language.md 12) */
} xpj_diag;

xpj_status xpj_diags_create(xpj_diags **out);
void xpj_diags_destroy(xpj_diags *d);
void xpj_diags_clear(xpj_diags *d);
unsigned xpj_diags_count(const xpj_diags *d);
unsigned xpj_diags_errors(const xpj_diags *d);
/* Fills *out with diagnostic i (0-based). */
xpj_status xpj_diags_get(const xpj_diags *d, unsigned i, xpj_diag *out);
/* Renders every diagnostic like a C compiler:
 *   file:line:col: error: message
 *     source line
 *     ^
 * into a malloc'd string (*out; free with free()). */
xpj_status xpj_diags_render(const xpj_diags *d, char **out, size_t *len);
/* Adds a diagnostic (for tools that report their own errors). */
xpj_status xpj_diags_add(xpj_diags *d, xpj_severity sev, const char *file,
                         unsigned line, unsigned col, const char *source_line,
                         const char *message);

/* Parses and checks kernel source (len bytes; NUL bytes are errors, not
 * terminators) into module m. filename is used in diagnostics. Returns
 * XPJ_OK, or XPJ_ERR_SYNTAX with errors in d (which may be NULL), or
 * XPJ_ERR_NOMEM. On error the module may hold partial functions: discard
 * it. */
xpj_status xpj_parse(xpj_module *m, const char *filename, const char *src,
                     size_t len, xpj_diags *d);
/* Reads path (at most XPJ_MAX_SOURCE bytes) and parses it. An unreadable
 * file is XPJ_ERR_IO with a diagnostic. */
xpj_status xpj_parse_file(xpj_module *m, const char *path, xpj_diags *d);

/* Specialises kernel in m for spec: a new module (*out) holding the kernel,
 * with every type parameter replaced by its binding, every const parameter
 * by its value, and every generic-rank array given rank spec->ndim, and
 * the device functions it calls, instantiated. The kernel keeps its name;
 * instantiated functions are named like "f<f32>". The result is verified.
 * Errors (unknown kernel, missing or extra bindings, a dtype for a const
 * parameter or a value for a type parameter, a value out of its type's
 * range, ndim out of range or not wanted, operations that do not fit the
 * bound types or values) go to d with source positions and the binding
 * ("(with T=f32, TS=16, ndim=2)"); *out is NULL then. A kernel with const
 * parameters is parsed again from the source text m keeps
 * (xpj_module_file_text) with them bound (docs/language.md, 5.3). */
xpj_status xpj_specialize(const xpj_module *m, const char *kernel,
                          const xpj_spec *spec, xpj_module **out,
                          xpj_diags *d);

/* Reads the value of a const parameter of type type (an integer type or
 * bool) from text: decimal or 0x hexadecimal with an optional sign
 * ("16", "-3", "0x10"), or true / false for bool. The value must be in the
 * type's range; a u64 above INT64_MAX is stored as its bit pattern.
 * XPJ_ERR_SPECIALIZE with a message in err (size bytes, may be NULL when
 * size is 0) when it is malformed or out of range; XPJ_ERR_INVALID for a
 * type that is not an integer type or bool. */
xpj_status xpj_const_parse(const char *text, xpj_scalar type, int64_t *out,
                           char *err, size_t size);
/* The canonical text of value v of type type ("16", "-3", "true",
 * "18446744073709551615"), like snprintf: returns the length it needed. */
size_t xpj_const_str(xpj_scalar type, int64_t v, char *buf, size_t size);

/* "0.1.0" */
const char *xpj_version(void);

#ifdef __cplusplus
}
#endif
#endif
