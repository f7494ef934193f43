/*
 * cli_out.c - how xpjit-cli writes: colour where the stream is a terminal
 * (--color, NO_COLOR, like clang and git), diagnostics styled like
 * clang's, text tables whose columns fit their contents, and JSON through
 * jansson, valid whatever bytes a path or a cache file holds.
 */
#include "cli.h"
#include "diag.h" /* xpj_diags_render_styled */

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- colour -------------------------------------------------------------- */

static enum { COLOR_AUTO, COLOR_ALWAYS, COLOR_NEVER } color_mode;

bool cli_color_set(const char *when) {
  if (!strcmp(when, "auto"))
    color_mode = COLOR_AUTO;
  else if (!strcmp(when, "always"))
    color_mode = COLOR_ALWAYS;
  else if (!strcmp(when, "never"))
    color_mode = COLOR_NEVER;
  else
    return false;
  return true;
}

bool cli_colors(FILE *f) {
  if (color_mode != COLOR_AUTO)
    return color_mode == COLOR_ALWAYS;
  const char *no = getenv("NO_COLOR"), *term = getenv("TERM");
  if ((no && *no) || (term && !strcmp(term, "dumb")))
    return false;
  return isatty(fileno(f)) != 0;
}

const char *cli_sgr(FILE *f, const char *seq) {
  return cli_colors(f) ? seq : "";
}

/* ---- failures --------------------------------------------------------------- */

/* fmt with ap (malloc'd; NULL when memory ran out). */
static char *vformat(const char *fmt, va_list ap) {
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (s)
    vsnprintf(s, (size_t)n + 1, fmt, again);
  va_end(again);
  return s;
}

/* With --json, a command that fails without printing its document prints
 * {"error": MESSAGE} instead: the last error it said (kept here). */
static bool json_wanted, json_printed;
static char *last_error;

static void keep_error(char *msg) {
  free(last_error);
  last_error = msg;
}

/* A message may quote a file (a bundle's versions, a library error that
 * names a row): shown through cli_clean, kept as it is for {"error"}
 * (JSON escapes what a terminal would act on). */
void cli_verror(const char *who, const char *fmt, va_list ap) {
  char *msg = vformat(fmt, ap);
  fprintf(stderr, "%s%s%s: ", cli_prog, who && *who ? " " : "",
          who ? who : "");
  cli_fputs_clean(stderr, msg ? msg : "out of memory", true);
  fputc('\n', stderr);
  keep_error(msg);
}

void cli_error(const char *who, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cli_verror(who, fmt, ap);
  va_end(ap);
}

void cli_json_wanted(void) { json_wanted = true; }

int cli_json_finish(int rc) {
  if (rc && json_wanted && !json_printed)
    cli_json_print(json_pack("{s:o}", "error",
                             cli_jstr(last_error ? last_error : "failed")));
  keep_error(NULL);
  return rc;
}

/* ---- diagnostics ---------------------------------------------------------- */

void cli_print_diags(const xpj_diags *d) {
  static const xpj_diag_style clang = {
      .locus = SGR_BOLD,
      .severity = {SGR_RED, SGR_MAGENTA, SGR_CYAN},
      .message = SGR_BOLD,
      .caret = SGR_GREEN,
      .reset = SGR_RESET,
  };
  char *text = NULL;
  if (xpj_diags_render_styled(d, cli_colors(stderr) ? &clang : NULL, &text,
                              NULL) != XPJ_OK) {
    fprintf(stderr, "%s: out of memory\n", cli_prog);
    return;
  }
  fputs(text, stderr);
  free(text);
}

void cli_diag(xpj_severity sev, const char *file, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = vformat(fmt, ap);
  va_end(ap);
  /* (a compile's message may quote what a cache or bundle held) */
  char *shown = msg ? cli_clean(msg, true) : NULL;
  xpj_diags *d = NULL;
  if (!shown || xpj_diags_create(&d) != XPJ_OK ||
      xpj_diags_add(d, sev, file, 0, 0, NULL, shown) != XPJ_OK)
    fprintf(stderr, "%s: out of memory\n", cli_prog);
  else
    cli_print_diags(d);
  free(shown);
  xpj_diags_destroy(d);
  if (sev == XPJ_SEV_ERROR)
    keep_error(msg);
  else
    free(msg);
}

/* ---- UTF-8 ------------------------------------------------------------------ */

/* The length of the well-formed UTF-8 sequence at s (Unicode table 3-7:
 * no overlong forms, no surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_seq(const unsigned char *s) {
  unsigned char c = s[0], lo = 0x80, hi = 0xBF;
  size_t n;
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 3;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4;
  else
    return 0;
  if (c == 0xE0)
    lo = 0xA0;
  else if (c == 0xED)
    hi = 0x9F;
  else if (c == 0xF0)
    lo = 0x90;
  else if (c == 0xF4)
    hi = 0x8F;
  if (s[1] < lo || s[1] > hi)
    return 0;
  for (size_t i = 2; i < n; i++)
    if (s[i] < 0x80 || s[i] > 0xBF)
      return 0;
  return n;
}

/* Whether the sequence of k bytes at p is a control character: C0, DEL
 * or C1 (U+0080..U+009F, which some terminals take as CSI, OSC, ...). */
static bool is_control(const unsigned char *p, size_t k) {
  return (k == 1 && (*p < 0x20 || *p == 0x7f)) ||
         (k == 2 && p[0] == 0xC2 && p[1] < 0xA0);
}

enum clean_mode {
  CLEAN_UTF8,     /* bytes outside a well-formed sequence only (JSON) */
  CLEAN_CONTROLS, /* and every control character */
  CLEAN_TEXT,     /* and every control character but '\n' and '\t' */
};

/* s with every byte outside a well-formed sequence replaced by bad, and
 * (mode) control characters too (malloc'd). */
static char *utf8_clean(const char *s, const char *bad, enum clean_mode mode) {
  size_t len = strlen(s), blen = strlen(bad), n = 0;
  char *out = malloc(len * blen + 1);
  if (!out)
    return NULL;
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    size_t k = utf8_seq(p);
    bool control = k && mode != CLEAN_UTF8 && is_control(p, k) &&
                   !(mode == CLEAN_TEXT && (*p == '\n' || *p == '\t'));
    if (!k || control) {
      memcpy(out + n, bad, blen);
      n += blen;
      p += k && control ? k : 1; /* a C1 control is one character */
    } else {
      memcpy(out + n, p, k);
      n += k;
      p += k;
    }
  }
  out[n] = 0;
  return out;
}

char *cli_clean(const char *s, bool lines) {
  return utf8_clean(s ? s : "", "?", lines ? CLEAN_TEXT : CLEAN_CONTROLS);
}

void cli_fputs_clean(FILE *f, const char *s, bool lines) {
  char *c = cli_clean(s, lines);
  fputs(c ? c : "?", f);
  free(c);
}

void cli_print_clean(const char *s) { cli_fputs_clean(stdout, s, false); }

/* ---- tables ----------------------------------------------------------------- */

void cli_table_init(cli_table *t, unsigned ncols, const char *const *head) {
  memset(t, 0, sizeof *t);
  t->ncols = ncols < CLI_TABLE_MAX_COLS ? ncols : CLI_TABLE_MAX_COLS;
  for (unsigned c = 0; c < t->ncols; c++)
    t->head[c] = head[c];
}

void cli_table_row(cli_table *t, const char *const *cells) {
  if (t->failed)
    return;
  if (t->nrows == t->cap) {
    unsigned cap = t->cap ? 2 * t->cap : 16;
    char **nc = realloc(t->cells, (size_t)cap * t->ncols * sizeof *nc);
    if (!nc) {
      t->failed = true;
      return;
    }
    t->cells = nc;
    t->cap = cap;
  }
  char **dst = t->cells + (size_t)t->nrows * t->ncols;
  for (unsigned c = 0; c < t->ncols; c++) {
    dst[c] = cli_clean(cells[c], false);
    t->failed = t->failed || !dst[c];
  }
  t->nrows++;
}

/* The characters of s (a cell, clean: every byte in a sequence). */
static size_t width(const char *s) {
  size_t w = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    size_t k = utf8_seq(p);
    p += k ? k : 1;
    w++;
  }
  return w;
}

/* One cell, padded to w characters (the last column is not). */
static void cell(const char *s, size_t w, bool right, bool last) {
  int pad = (int)(w - width(s));
  printf("%*s%s%*s", right ? pad : 0, "", s, right || last ? 0 : pad, "");
}

static void print_row(const cli_table *t, const char *const *cells,
                const size_t *w) {
  for (unsigned c = 0; c < t->ncols; c++) {
    printf("%s", c ? "  " : "");
    cell(cells[c], w[c], *t->head[c] == '>', c + 1 == t->ncols);
  }
}

int cli_table_print(cli_table *t) {
  int rc = 0;
  if (t->failed) {
    fprintf(stderr, "%s: out of memory\n", cli_prog);
    rc = EXIT_INPUT;
  } else {
    const char *head[CLI_TABLE_MAX_COLS];
    size_t w[CLI_TABLE_MAX_COLS];
    for (unsigned c = 0; c < t->ncols; c++) {
      head[c] = t->head[c] + (*t->head[c] == '>');
      w[c] = width(head[c]);
      for (unsigned r = 0; r < t->nrows; r++) {
        size_t cw = width(t->cells[(size_t)r * t->ncols + c]);
        w[c] = cw > w[c] ? cw : w[c];
      }
    }
    fputs(cli_sgr(stdout, SGR_BOLD), stdout);
    print_row(t, head, w);
    printf("%s\n", cli_sgr(stdout, SGR_RESET));
    for (unsigned r = 0; r < t->nrows; r++) {
      print_row(t, (const char *const *)t->cells + (size_t)r * t->ncols, w);
      printf("\n");
    }
  }
  for (size_t i = 0; t->cells && i < (size_t)t->nrows * t->ncols; i++)
    free(t->cells[i]);
  free(t->cells);
  memset(t, 0, sizeof *t);
  return rc;
}

/* ---- JSON ------------------------------------------------------------------- */

json_t *cli_jstr(const char *s) {
  if (!s)
    return json_null();
  char *clean = utf8_clean(s, "\xEF\xBF\xBD", CLEAN_UTF8); /* U+FFFD */
  json_t *j = clean ? json_string(clean) : NULL;
  free(clean);
  return j;
}

json_t *cli_jint(uint64_t v) {
  return v <= INT64_MAX ? json_integer((json_int_t)v) : json_real((double)v);
}

/* JSON has no infinity or NaN: a foreign or damaged file's time that is
 * not a finite number of microseconds (infinite, NaN, or so large that
 * ms * 1000 overflows) is null. json_real of one fails, and a NULL here
 * would be taken for running out of memory and lose the entry. */
json_t *cli_jms(double ms) {
  double us = round(ms * 1000);
  return isfinite(us) ? json_real(us / 1000) : json_null();
}

bool cli_jset(json_t *o, const char *key, json_t *v) {
  return o && v && json_object_set_new(o, key, v) == 0;
}

int cli_json_print(json_t *doc) {
  if (!doc) { /* (every value is one JSON can hold: cli_jms, cli_jstr) */
    cli_error(NULL, "out of memory making the JSON document");
    return EXIT_INPUT;
  }
  json_printed = true;
  int rc = json_dumpf(doc, stdout, JSON_REAL_PRECISION(15)) == 0 &&
                   fputc('\n', stdout) != EOF && fflush(stdout) == 0
               ? 0
               : EXIT_INPUT;
  json_decref(doc);
  if (rc)
    cli_error(NULL, "cannot write the JSON output");
  return rc;
}
