/*
 * lex.c - the lexer. It accepts any bytes: each byte that cannot start a
 * token is one error (runs of them are one error), and lexing continues,
 * so that binary garbage gives a bounded number of clear messages.
 */
#include "lex.h"
#include "ir_impl.h"

#include <errno.h>
#include <fenv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each punctuator's text, for messages */
static const char *const punct_text[P_COUNT] = {
    [P_SHL_ASSIGN] = "<<=", [P_SHR_ASSIGN] = ">>=", [P_ARROW] = "->",
    [P_INC] = "++",         [P_DEC] = "--",         [P_EQ] = "==",
    [P_NE] = "!=",          [P_LE] = "<=",          [P_GE] = ">=",
    [P_ANDAND] = "&&",      [P_OROR] = "||",        [P_SHL] = "<<",
    [P_SHR] = ">>",         [P_ADD_ASSIGN] = "+=",  [P_SUB_ASSIGN] = "-=",
    [P_MUL_ASSIGN] = "*=",  [P_DIV_ASSIGN] = "/=",  [P_MOD_ASSIGN] = "%=",
    [P_AND_ASSIGN] = "&=",  [P_OR_ASSIGN] = "|=",   [P_XOR_ASSIGN] = "^=",
    [P_LPAREN] = "(",       [P_RPAREN] = ")",       [P_LBRACE] = "{",
    [P_RBRACE] = "}",       [P_LBRACKET] = "[",     [P_RBRACKET] = "]",
    [P_LT] = "<",           [P_GT] = ">",           [P_COMMA] = ",",
    [P_SEMI] = ";",         [P_COLON] = ":",        [P_QUESTION] = "?",
    [P_ASSIGN] = "=",       [P_PLUS] = "+",         [P_MINUS] = "-",
    [P_STAR] = "*",         [P_SLASH] = "/",        [P_PERCENT] = "%",
    [P_AMP] = "&",          [P_PIPE] = "|",         [P_CARET] = "^",
    [P_TILDE] = "~",        [P_BANG] = "!",         [P_DOT] = ".",
};

const char *xpj_punct_str(punct p) {
  return p > P_NONE && p < P_COUNT && punct_text[p] ? punct_text[p] : "?";
}

/* The one-byte punctuators by their byte (P_NONE: not one); every longer
 * punctuator starts with one of them */
static const uint8_t punct1[256] = {
    ['('] = P_LPAREN,   [')'] = P_RPAREN, ['{'] = P_LBRACE, ['}'] = P_RBRACE,
    ['['] = P_LBRACKET, [']'] = P_RBRACKET, ['<'] = P_LT,   ['>'] = P_GT,
    [','] = P_COMMA,    [';'] = P_SEMI,   [':'] = P_COLON,  ['?'] = P_QUESTION,
    ['='] = P_ASSIGN,   ['+'] = P_PLUS,   ['-'] = P_MINUS,  ['*'] = P_STAR,
    ['/'] = P_SLASH,    ['%'] = P_PERCENT, ['&'] = P_AMP,   ['|'] = P_PIPE,
    ['^'] = P_CARET,    ['~'] = P_TILDE,  ['!'] = P_BANG,   ['.'] = P_DOT,
};

/* The punctuator s[0..n) starts with (n >= 1), the longest that does
 * (`a<<=b` is a, <<=, b; `x--y` is x, --, y), and its length in *len;
 * P_NONE when none does. A switch on the first byte: a scan of every
 * punctuator for each token was 13% of the instructions of a parse. */
static punct punct_at(const unsigned char *s, uint32_t n, uint32_t *len) {
  unsigned char d = n > 1 ? s[1] : 0, e = n > 2 ? s[2] : 0;
  punct two = P_NONE;
  switch (s[0]) {
  case '<':
    if (d == '<' && e == '=') {
      *len = 3;
      return P_SHL_ASSIGN;
    }
    two = d == '<' ? P_SHL : d == '=' ? P_LE : P_NONE;
    break;
  case '>':
    if (d == '>' && e == '=') {
      *len = 3;
      return P_SHR_ASSIGN;
    }
    two = d == '>' ? P_SHR : d == '=' ? P_GE : P_NONE;
    break;
  case '-':
    two = d == '>' ? P_ARROW : d == '-' ? P_DEC : d == '=' ? P_SUB_ASSIGN
                                                           : P_NONE;
    break;
  case '+': two = d == '+' ? P_INC : d == '=' ? P_ADD_ASSIGN : P_NONE; break;
  case '&':
    two = d == '&' ? P_ANDAND : d == '=' ? P_AND_ASSIGN : P_NONE;
    break;
  case '|': two = d == '|' ? P_OROR : d == '=' ? P_OR_ASSIGN : P_NONE; break;
  case '=': two = d == '=' ? P_EQ : P_NONE; break;
  case '!': two = d == '=' ? P_NE : P_NONE; break;
  case '*': two = d == '=' ? P_MUL_ASSIGN : P_NONE; break;
  case '/': two = d == '=' ? P_DIV_ASSIGN : P_NONE; break;
  case '%': two = d == '=' ? P_MOD_ASSIGN : P_NONE; break;
  case '^': two = d == '=' ? P_XOR_ASSIGN : P_NONE; break;
  default: break;
  }
  *len = two != P_NONE ? 2 : 1;
  return two != P_NONE ? two : (punct)punct1[s[0]];
}

static const char *const keywords[] = {
#define X(id, s) s,
    XPJ_KEYWORDS(X)
#undef X
};

/* The keyword the identifier s[0..n) is, or TK_IDENT: the keywords of its
 * first letter (XPJ_KEYWORDS, each here; test_frontend's test_lex_words
 * lexes every one). A scan of all of them for each identifier was 4% of
 * a parse. */
static tok_kind keyword_at(const char *s, uint32_t n) {
#define IS(id, kw)                                                            \
  if (n == sizeof kw - 1 && memcmp(s, kw, sizeof kw - 1) == 0)                \
  return TK_KW_##id
  switch (s[0]) {
  case 'b': IS(BREAK, "break"); break;
  case 'c': IS(CONST, "const"); IS(CONTINUE, "continue"); break;
  case 'e': IS(ELSE, "else"); break;
  case 'f': IS(FN, "fn"); IS(FOR, "for"); IS(FALSE, "false"); break;
  case 'g': IS(GLOBAL, "global"); break;
  case 'i': IS(IF, "if"); break;
  case 'k': IS(KERNEL, "kernel"); break;
  case 'l': IS(LET, "let"); IS(LOCAL, "local"); break;
  case 'n': IS(NDRANGE, "ndrange"); break;
  case 'r': IS(RANGE, "range"); IS(RETURN, "return"); break;
  case 't': IS(TRUE, "true"); break;
  case 'w': IS(WHILE, "while"); break;
  default: break;
  }
#undef IS
  return TK_IDENT;
}

const char *xpj_tok_kind_str(tok_kind k) {
  switch (k) {
  case TK_EOF: return "end of file";
  case TK_IDENT: return "identifier";
  case TK_TYPE: return "type name";
  case TK_INT: return "integer literal";
  case TK_FLOAT: return "floating-point literal";
  case TK_PUNCT: return "punctuator";
  default:
    if (k >= TK_KW_KERNEL && k - TK_KW_KERNEL < (int)(sizeof keywords /
                                                      sizeof *keywords))
      return keywords[k - TK_KW_KERNEL];
    return "token";
  }
}

typedef struct lx {
  const char *s;
  uint32_t len, pos, line, linestart;
  lexer_out *out;
  lex_error_fn err;
  void *ud;
  bool oom;
} lx;

static void report_at(lx *l, uint32_t off, bool damaged, const char *fmt,
                      va_list ap) {
  char msg[256];
  vsnprintf(msg, sizeof msg, fmt, ap);
  /* the line of off: off is always on the current line or the token start */
  uint32_t line = l->line, ls = l->linestart;
  if (off < ls) { /* token started on an earlier line (block comment) */
    line = 1;
    ls = 0;
    for (uint32_t i = 0; i < off; i++)
      if (l->s[i] == '\n') {
        line++;
        ls = i + 1;
      }
  }
  l->err(l->ud, off, line, off - ls + 1, msg, damaged);
}

/* A token at off is bad */
static void error_at(lx *l, uint32_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void error_at(lx *l, uint32_t off, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report_at(l, off, true, fmt, ap);
  va_end(ap);
}

/* A comment's bytes at off are bad: the tokens around it are whole */
static void comment_error_at(lx *l, uint32_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void comment_error_at(lx *l, uint32_t off, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report_at(l, off, false, fmt, ap);
  va_end(ap);
}

static token *push(lx *l, tok_kind k, uint32_t off, uint32_t n) {
  lexer_out *o = l->out;
  if (o->n == o->cap &&
      !xpj_grow((void **)&o->toks, &o->cap, o->n + 1, sizeof *o->toks)) {
    l->oom = true;
    return NULL;
  }
  token *t = &o->toks[o->n++];
  memset(t, 0, sizeof *t);
  t->kind = (uint8_t)k;
  t->off = off;
  t->len = n;
  t->line = l->line;
  t->col = off - l->linestart + 1;
  return t;
}

/* ASCII only, whatever the locale: <ctype.h>'s classes follow
 * setlocale, and a program (or a Python interpreter) that set a Latin-1
 * locale would otherwise read bytes 0xC0-0xFF as letters, a source that
 * fails elsewhere would parse here. */
static bool is_alpha(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_xdigit(int c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static bool is_space(int c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
         c == '\r';
}
static bool is_ident_start(int c) { return is_alpha(c) || c == '_'; }
static bool is_ident(int c) { return is_alpha(c) || is_digit(c) || c == '_'; }

/* Reads a literal suffix (i8 ... f64) at l->pos, if any. */
static int suffix(lx *l, uint32_t *end) {
  static const char *const names[] = {"i8",  "i16", "i32", "i64",
                                      "u8",  "u16", "u32", "u64",
                                      "f32", "f64", "f16", "bf16"};
  static const int scal[] = {XPJ_I8,  XPJ_I16, XPJ_I32, XPJ_I64,
                             XPJ_U8,  XPJ_U16, XPJ_U32, XPJ_U64,
                             XPJ_F32, XPJ_F64, XPJ_F16, XPJ_BF16};
  uint32_t p = *end, q = p;
  while (q < l->len && is_ident((unsigned char)l->s[q]))
    q++;
  if (q == p)
    return XPJ_VOID;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (strlen(names[i]) == q - p && memcmp(l->s + p, names[i], q - p) == 0) {
      *end = q;
      return scal[i];
    }
  *end = q;
  return -1; /* invalid suffix */
}

static bool is_digit_of(int base, char c) {
  return base == 16 ? is_xdigit((unsigned char)c)
         : base == 2 ? (c == '0' || c == '1')
                     : is_digit((unsigned char)c);
}

/* The double nearest the decimal digits (ties to even), whatever the
 * caller's rounding mode (a constant must not depend on it: it is cached),
 * and where the decimal lies beside it (token.fdir): what rounding it once
 * to f32, f16 or bf16 needs (xpj_float_round_dir). A C library whose
 * strtod ignored the rounding mode would give 0: rounded through f64. */
static double decimal_nearest(const char *digits, int8_t *dir) {
  int mode = fegetround();
  fesetround(FE_DOWNWARD);
  volatile double lo = strtod(digits, NULL);
  fesetround(FE_UPWARD);
  volatile double hi = strtod(digits, NULL);
  fesetround(FE_TONEAREST);
  volatile double d = strtod(digits, NULL);
  fesetround(mode);
  *dir = lo == hi || (d != lo && d != hi) ? 0 : d == lo ? 1 : -1;
  return d;
}

/* A numeric literal's characters (its '_'s left out), NUL-terminated: in
 * small until they outgrow it, then on the heap (a literal has no length
 * limit but the source's) */
typedef struct numbuf {
  char *p, *small;
  size_t n, cap;
} numbuf;

static bool num_put(lx *l, numbuf *d, char c) {
  if (d->n + 2 > d->cap) {
    size_t cap = d->cap * 2;
    char *p = xpj_realloc(d->p == d->small ? NULL : d->p, cap);
    if (!p) {
      l->oom = true;
      return false;
    }
    if (d->p == d->small)
      memcpy(p, d->small, d->n);
    d->p = p;
    d->cap = cap;
  }
  d->p[d->n++] = c;
  d->p[d->n] = 0;
  return true;
}

static void lex_number_in(lx *l, numbuf *d);

static void lex_number(lx *l) {
  char small[128];
  numbuf d = {small, small, 0, sizeof small};
  small[0] = 0;
  lex_number_in(l, &d);
  if (d.p != small)
    xpj_free(d.p);
}

static void lex_number_in(lx *l, numbuf *d) {
  const char *s = l->s;
  uint32_t start = l->pos, p = start;
  int base = 10;
  bool is_float = false;
  if (s[p] == '0' && p + 1 < l->len && (s[p + 1] == 'x' || s[p + 1] == 'X')) {
    base = 16;
    p += 2;
  } else if (s[p] == '0' && p + 1 < l->len &&
             (s[p + 1] == 'b' || s[p + 1] == 'B')) {
    base = 2;
    p += 2;
  }
  uint32_t dstart = p;
  bool stray_sep = false; /* an '_' not between two digits */
  for (; p < l->len; p++) {
    char c = s[p];
    if (c == '_') {
      stray_sep |= p == dstart || !is_digit_of(base, s[p - 1]) ||
                   p + 1 >= l->len || !is_digit_of(base, s[p + 1]);
      continue;
    }
    bool ok = is_digit_of(base, c);
    if (base == 10 && !ok) {
      if (c == '.' && !is_float && p + 1 < l->len &&
          is_digit((unsigned char)s[p + 1])) {
        is_float = true;
        ok = true;
      } else if (c == '.' && !is_float &&
                 !(p + 1 < l->len && (s[p + 1] == '.' ||
                                      is_ident_start((unsigned char)s[p + 1])))) {
        is_float = true; /* "1." */
        ok = true;
      } else if ((c == 'e' || c == 'E') && p + 1 < l->len &&
                 (is_digit((unsigned char)s[p + 1]) ||
                  ((s[p + 1] == '+' || s[p + 1] == '-') && p + 2 < l->len &&
                   is_digit((unsigned char)s[p + 2])))) {
        is_float = true;
        if (!num_put(l, d, c))
          return;
        p++;
        c = s[p];
        ok = true;
      }
    }
    if (!ok)
      break;
    if (!num_put(l, d, c))
      return;
  }
  const char *digits = d->p;
  size_t nd = d->n;
  uint32_t end = p;
  int suf = suffix(l, &end);
  token *t = push(l, TK_INT, start, end - start);
  if (!t)
    return;
  l->pos = end;
  t->bad = 1; /* until it is read */
  if (suf < 0) {
    error_at(l, start, "invalid suffix on numeric literal '%.*s'",
             (int)(end - start > 40 ? 40 : end - start), s + start);
    return;
  }
  if (nd == 0 || p == dstart) {
    error_at(l, start, "numeric literal has no digits");
    return;
  }
  if (stray_sep) {
    error_at(l, start, "'_' in a numeric literal must stand between two "
             "digits");
    return;
  }
  t->suffix = (uint8_t)suf;
  if (is_float || xpj_scalar_float_valued(suf)) {
    if (base != 10) {
      error_at(l, start, "hexadecimal and binary literals must be integers");
      return;
    }
    t->kind = TK_FLOAT;
    errno = 0;
    t->val.f = decimal_nearest(digits, &t->fdir);
    if (!isfinite(t->val.f)) {
      error_at(l, start, "floating-point literal is out of range");
      return;
    }
    t->bad = 0;
    return;
  }
  errno = 0;
  t->val.u = strtoull(digits, NULL, base);
  if (errno == ERANGE) {
    error_at(l, start, "integer literal is too large for 64 bits");
    return;
  }
  t->bad = 0;
}

/* The length of the UTF-8 sequence at s[0..n) (1 to 4), 0 when it is not
 * one: a stray continuation byte, a sequence cut short, an overlong form,
 * a surrogate or a code point past U+10FFFF (RFC 3629) */
static uint32_t utf8_len(const unsigned char *s, uint32_t n) {
  unsigned char c = s[0];
  uint32_t k = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2
               : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (k == 0 || k > n)
    return 0;
  for (uint32_t i = 1; i < k; i++)
    if ((s[i] & 0xc0) != 0x80)
      return 0;
  if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) ||
      (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))
    return 0;
  return k;
}

/* Skips the comment text of one byte or UTF-8 sequence at l->pos (not a
 * newline); a NUL or bytes that are not UTF-8 are an error, once a
 * comment (*bad): docs/language.md 2.1 */
static void comment_char(lx *l, bool *bad) {
  const unsigned char *u = (const unsigned char *)l->s + l->pos;
  uint32_t k = u[0] ? utf8_len(u, l->len - l->pos) : 0;
  if (k == 0 && !*bad) {
    if (u[0])
      comment_error_at(l, l->pos, "invalid UTF-8 (byte 0x%02x) in a comment: "
                       "source files are UTF-8", u[0]);
    else
      comment_error_at(l, l->pos, "NUL byte in a comment");
    *bad = true;
  }
  l->pos += k ? k : 1;
}

/* Whether c is a whole UTF-8 sequence that comment_char takes without a
 * word: ASCII but NUL, nearly every byte of a comment (called for each,
 * comment_char was 4% of a parse) */
static bool plain_comment_byte(unsigned char c) { return c && c < 0x80; }

/* Lexes one token (or skips whitespace/comments); false at end. */
static bool lex_one(lx *l) {
  const char *s = l->s;
  while (l->pos < l->len) {
    unsigned char c = (unsigned char)s[l->pos];
    if (c == '\n') {
      l->pos++;
      l->line++;
      l->linestart = l->pos;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      l->pos++;
    } else if (c == '/' && l->pos + 1 < l->len && s[l->pos + 1] == '/') {
      bool bad = false;
      while (l->pos < l->len && s[l->pos] != '\n') {
        if (plain_comment_byte((unsigned char)s[l->pos]))
          l->pos++;
        else
          comment_char(l, &bad);
      }
    } else if (c == '/' && l->pos + 1 < l->len && s[l->pos + 1] == '*') {
      uint32_t start = l->pos;
      uint32_t sline = l->line, sls = l->linestart;
      l->pos += 2;
      bool closed = false, bad = false;
      while (l->pos < l->len) {
        if (s[l->pos] == '*' && l->pos + 1 < l->len && s[l->pos + 1] == '/') {
          l->pos += 2;
          closed = true;
          break;
        }
        if (s[l->pos] == '\n') {
          l->line++;
          l->linestart = l->pos + 1;
          l->pos++;
        } else if (plain_comment_byte((unsigned char)s[l->pos])) {
          l->pos++;
        } else {
          comment_char(l, &bad);
        }
      }
      if (!closed) {
        char msg[] = "unterminated comment";
        l->err(l->ud, start, sline, start - sls + 1, msg, true);
      }
    } else {
      break;
    }
  }
  if (l->pos >= l->len)
    return false;
  uint32_t start = l->pos;
  unsigned char c = (unsigned char)s[start];
  if (is_ident_start(c)) {
    uint32_t p = start;
    while (p < l->len && is_ident((unsigned char)s[p]))
      p++;
    uint32_t n = p - start;
    token *t = push(l, TK_IDENT, start, n);
    if (!t)
      return false;
    l->pos = p;
    if (n > 255) {
      error_at(l, start, "identifier is too long (at most 255 characters)");
      return true;
    }
    t->kind = (uint8_t)keyword_at(s + start, n);
    if (t->kind != TK_IDENT)
      return true;
    /* the scalar type names: bool, i8.., u8.., f16.., bf16, 2 to 4
     * characters (test_lex_words lexes every one) */
    char name[8];
    if (n >= 2 && n <= 4 && (c == 'b' || c == 'i' || c == 'u' || c == 'f')) {
      memcpy(name, s + start, n);
      name[n] = 0;
      xpj_scalar sc = xpj_scalar_parse(name);
      if (sc != XPJ_VOID) {
        t->kind = TK_TYPE;
        t->val.scalar = sc;
      }
    }
    return true;
  }
  if (is_digit(c) || (c == '.' && start + 1 < l->len &&
                     is_digit((unsigned char)s[start + 1]))) {
    lex_number(l);
    return !l->oom;
  }
  uint32_t n;
  punct pc = punct_at((const unsigned char *)s + start, l->len - start, &n);
  if (pc != P_NONE) {
    token *t = push(l, TK_PUNCT, start, n);
    if (!t)
      return false;
    t->punct = (uint8_t)pc;
    l->pos += n;
    return true;
  }
  /* a run of bytes that cannot start a token: one error */
  uint32_t p = start;
  while (p < l->len) {
    unsigned char d = (unsigned char)s[p];
    if (is_space(d) || is_ident(d) || punct1[d] != P_NONE)
      break;
    if (d == 0 && p > start && s[p - 1] != 0)
      break;
    p++;
  }
  if (p == start)
    p++;
  if (c >= 32 && c < 127)
    error_at(l, start, "invalid character '%c'", c);
  else
    error_at(l, start, "invalid byte 0x%02x in source", c);
  l->pos = p;
  return true;
}

bool xpj_lex(const char *src, uint32_t len, lexer_out *out, lex_error_fn err,
             void *ud) {
  lx l = {src, len, 0, 1, 0, out, err, ud, false};
  l.pos = l.linestart = xpj_bom_len(src, len); /* as editors write one */
  while (lex_one(&l))
    if (l.oom)
      return false;
  if (l.oom)
    return false;
  token *t = push(&l, TK_EOF, len, 0);
  return t != NULL;
}
