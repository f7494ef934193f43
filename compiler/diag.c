/*
 * diag.c - compiler diagnostics: a list of positioned messages rendered as
 * a C compiler would, with the source line and a caret. Source lines are
 * copied with non-printable bytes replaced, so binary input never reaches
 * a terminal raw, and a long one in part, around the caret.
 */
#include "buf.h"
#include "diag.h"
#include "ir_impl.h"
#include "xpjit_compiler.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct diag_item {
  xpj_severity sev;
  char *file, *msg, *src;
  unsigned line, col;
  unsigned caret; /* the caret's column in src (1-based); 0: none */
} diag_item;

struct xpj_diags {
  diag_item *items;
  uint32_t n, cap;
  unsigned errors;
};

xpj_status xpj_diags_create(xpj_diags **out) {
  if (!out)
    return XPJ_ERR_INVALID;
  *out = xpj_calloc(1, sizeof **out);
  return *out ? XPJ_OK : XPJ_ERR_NOMEM;
}

void xpj_diags_clear(xpj_diags *d) {
  if (!d)
    return;
  for (uint32_t i = 0; i < d->n; i++) {
    xpj_free(d->items[i].file);
    xpj_free(d->items[i].msg);
    xpj_free(d->items[i].src);
  }
  d->n = 0;
  d->errors = 0;
}

void xpj_diags_destroy(xpj_diags *d) {
  if (!d)
    return;
  xpj_diags_clear(d);
  xpj_free(d->items);
  xpj_free(d);
}

unsigned xpj_diags_count(const xpj_diags *d) { return d ? d->n : 0; }
unsigned xpj_diags_errors(const xpj_diags *d) { return d ? d->errors : 0; }

xpj_status xpj_diags_get(const xpj_diags *d, unsigned i, xpj_diag *out) {
  if (!d || !out || i >= d->n)
    return XPJ_ERR_INVALID;
  const diag_item *it = &d->items[i];
  out->severity = it->sev;
  out->file = it->file;
  out->line = it->line;
  out->col = it->col;
  out->message = it->msg;
  out->source = it->src;
  return XPJ_OK;
}

/* How much of a source line is quoted: a pathological line is cut, not
 * dumped. A line of at most QUOTE bytes is quoted whole; a longer one by
 * its first QUOTE bytes when the column is among the first QUOTE -
 * QUOTE_AHEAD, else by a window of the WIN_BEFORE bytes before the column
 * and WIN_AFTER from it, so that the caret stays under its character;
 * "..." marks where the line is cut. A window starts where the column
 * alone says and is shorter than the column (3 + 320 + 3 < 360): one
 * given back to xpj_diags_add with its column (xpjit-cli copies
 * diagnostics from one list to another) is told from a line and kept. */
enum { QUOTE = 400, QUOTE_AHEAD = 40, WIN_BEFORE = 160, WIN_AFTER = 160 };
#define CUT "..."

/* Whether s[0..n) is a window quote_line made for the column c0 (0-based):
 * a source line holding that column is at least c0 bytes long */
static bool is_window(const char *s, size_t n, size_t c0) {
  return c0 >= QUOTE - QUOTE_AHEAD && n < c0 && n > 3 &&
         memcmp(s, CUT, 3) == 0;
}

/* The quoted part of source line s[0..n) (cut at its first '\n' or
 * '\r'), bytes that are not printable ASCII replaced by '?' (NULs
 * included; tabs are kept so that the caret line can mirror them), and in
 * *caret where col is in it (col 0: no caret). */
static char *quote_line(const char *s, size_t n, unsigned col,
                        unsigned *caret) {
  for (size_t i = 0; i < n; i++)
    if (s[i] == '\n' || s[i] == '\r')
      n = i;
  size_t c0 = col ? col - 1 : 0, from = 0, to = n;
  bool pre = false, post = false;
  if (is_window(s, n, c0)) {
    c0 = 3 + WIN_BEFORE; /* (its text is as it was made) */
  } else if (n > QUOTE && c0 < QUOTE - QUOTE_AHEAD) {
    to = QUOTE;
    post = true;
  } else if (n > QUOTE) {
    c0 = c0 < n ? c0 : n; /* (a column past the end: the end) */
    from = c0 - WIN_BEFORE;
    to = c0 + WIN_AFTER < n ? c0 + WIN_AFTER : n;
    pre = true;
    post = to < n;
  }
  size_t k = 0, len = (pre ? 3 : 0) + (to - from) + (post ? 3 : 0);
  char *d = xpj_malloc(len + 1);
  if (!d)
    return NULL;
  if (pre) {
    memcpy(d, CUT, 3);
    k = 3;
  }
  for (size_t i = from; i < to; i++) {
    unsigned char c = (unsigned char)s[i];
    d[k++] = (c == '\t' || (c >= 32 && c < 127)) ? (char)c : '?';
  }
  if (post) {
    memcpy(d + k, CUT, 3);
    k += 3;
  }
  d[k] = 0;
  *caret = col ? (unsigned)((pre ? 3 : 0) + (c0 - from) + 1) : 0;
  return d;
}

xpj_status xpj_diags_add(xpj_diags *d, xpj_severity sev, const char *file,
                         unsigned line, unsigned col, const char *source_line,
                         const char *message) {
  const char *src = source_line ? source_line : "";
  return xpj_diags_add_line(d, sev, file, line, col, src,
                            strcspn(src, "\n\r"), message);
}

xpj_status xpj_diags_add_line(xpj_diags *d, xpj_severity sev,
                              const char *file, unsigned line, unsigned col,
                              const char *text, size_t len,
                              const char *message) {
  if (!d || !message || (!text && len))
    return XPJ_ERR_INVALID;
  if (!xpj_grow((void **)&d->items, &d->cap, d->n + 1, sizeof *d->items))
    return XPJ_ERR_NOMEM;
  diag_item *it = &d->items[d->n];
  it->sev = sev;
  it->line = line;
  it->col = col;
  it->file = xpj_strdup(file ? file : "");
  it->msg = xpj_strdup(message);
  it->src = quote_line(text ? text : "", len, col, &it->caret);
  if (!it->file || !it->msg || !it->src) {
    xpj_free(it->file);
    xpj_free(it->msg);
    xpj_free(it->src);
    return XPJ_ERR_NOMEM;
  }
  d->n++;
  if (sev == XPJ_SEV_ERROR)
    d->errors++;
  return XPJ_OK;
}

/* Starts the markup seq (none when it is NULL or empty); returns whether
 * it did, for markup_end. */
static bool markup(xpj_buf *b, const char *seq) {
  if (!seq || !*seq)
    return false;
  xpj_buf_puts(b, seq);
  return true;
}

static void markup_end(xpj_buf *b, const xpj_diag_style *st, bool on) {
  if (on && st->reset)
    xpj_buf_puts(b, st->reset);
}

xpj_status xpj_diags_render_styled(const xpj_diags *d,
                                   const xpj_diag_style *st, char **out,
                                   size_t *len) {
  if (!d || !out)
    return XPJ_ERR_INVALID;
  static const char *const sev[] = {"error", "warning", "note"};
  static const xpj_diag_style plain = {0};
  if (!st)
    st = &plain;
  xpj_buf b = {0};
  for (uint32_t i = 0; i < d->n; i++) {
    const diag_item *it = &d->items[i];
    unsigned s = (unsigned)it->sev % 3;
    bool on;
    if (*it->file) {
      on = markup(&b, st->locus);
      if (it->line)
        xpj_buf_printf(&b, "%s:%u:%u:", it->file, it->line, it->col);
      else
        xpj_buf_printf(&b, "%s:", it->file);
      markup_end(&b, st, on);
      xpj_buf_puts(&b, " ");
    }
    on = markup(&b, st->severity[s]);
    xpj_buf_printf(&b, "%s:", sev[s]);
    markup_end(&b, st, on);
    xpj_buf_puts(&b, " ");
    on = markup(&b, st->message);
    xpj_buf_puts(&b, it->msg);
    markup_end(&b, st, on);
    xpj_buf_puts(&b, "\n");
    if (*it->src && it->caret) {
      xpj_buf_printf(&b, "  %s\n  ", it->src);
      size_t n = strlen(it->src);
      for (unsigned c = 1; c < it->caret && c - 1 < n; c++)
        xpj_buf_puts(&b, it->src[c - 1] == '\t' ? "\t" : " ");
      on = markup(&b, st->caret);
      xpj_buf_puts(&b, "^");
      markup_end(&b, st, on);
      xpj_buf_puts(&b, "\n");
    }
  }
  *out = xpj_buf_take(&b, len);
  return *out ? XPJ_OK : XPJ_ERR_NOMEM;
}

xpj_status xpj_diags_render(const xpj_diags *d, char **out, size_t *len) {
  return xpj_diags_render_styled(d, NULL, out, len);
}

const char *xpj_version(void) { return XPJ_VERSION_STRING; }
