/*
 * diag.h - diagnostics rendered with a style (not public): xpj_diags_render
 * with markup around each part of a diagnostic, which xpjit-cli uses to
 * colour them on a terminal the way clang and GCC do.
 */
#ifndef XPJ_DIAG_H
#define XPJ_DIAG_H

#include "xpjit_compiler.h"

/* Text put before each part of a diagnostic (a terminal's escape
 * sequences, say), and reset after it; a NULL member marks nothing up. */
typedef struct xpj_diag_style {
  const char *locus;       /* "file:line:col:" or "file:" */
  const char *severity[3]; /* "error:", "warning:", "note:" (xpj_severity) */
  const char *message;
  const char *caret;       /* the line with the caret */
  const char *reset;
} xpj_diag_style;

/* xpj_diags_render with style (NULL: none, the same text as
 * xpj_diags_render). The source line is never marked up: it is the
 * user's text. */
xpj_status xpj_diags_render_styled(const xpj_diags *d,
                                   const xpj_diag_style *style, char **out,
                                   size_t *len);
/* xpj_diags_add with the source line as text[0..len) from its start
 * (more may follow: it ends at the first '\n' or '\r'; NUL bytes are
 * quoted as '?'), which need not be a C string: the parser passes its
 * source, however long the line. A long line is quoted in part, around
 * col (diag.c quote_line). */
xpj_status xpj_diags_add_line(xpj_diags *d, xpj_severity sev,
                              const char *file, unsigned line, unsigned col,
                              const char *text, size_t len,
                              const char *message);

#endif
