/*
 * lex.h - tokens of the kernel language. The lexer turns a whole source
 * buffer into a token array (ending in TK_EOF) before parsing starts.
 */
#ifndef XPJ_LEX_H
#define XPJ_LEX_H

#include "xpjit_compiler.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define XPJ_KEYWORDS(X)                                                       \
  X(KERNEL, "kernel") X(FN, "fn") X(CONST, "const") X(LET, "let")             \
  X(LOCAL, "local") X(GLOBAL, "global") X(RANGE, "range")                     \
  X(NDRANGE, "ndrange") X(IF, "if") X(ELSE, "else") X(FOR, "for")             \
  X(WHILE, "while") X(BREAK, "break") X(CONTINUE, "continue")                 \
  X(RETURN, "return") X(TRUE, "true") X(FALSE, "false")

typedef enum tok_kind {
  TK_EOF,
  TK_IDENT,
  TK_TYPE,  /* scalar type name: bool, i8, ..., f64 (val.scalar) */
  TK_INT,   /* integer literal (val.u, suffix) */
  TK_FLOAT, /* floating literal (val.f, suffix) */
  TK_PUNCT, /* punctuator (punct) */
#define X(id, s) TK_KW_##id,
  XPJ_KEYWORDS(X)
#undef X
} tok_kind;

/* Punctuators (the lexer takes the longest that matches). */
typedef enum punct {
  P_NONE,
  P_SHL_ASSIGN, P_SHR_ASSIGN,
  P_ARROW, P_INC, P_DEC, P_EQ, P_NE, P_LE, P_GE, P_ANDAND, P_OROR, P_SHL,
  P_SHR, P_ADD_ASSIGN, P_SUB_ASSIGN, P_MUL_ASSIGN, P_DIV_ASSIGN,
  P_MOD_ASSIGN, P_AND_ASSIGN, P_OR_ASSIGN, P_XOR_ASSIGN,
  P_LPAREN, P_RPAREN, P_LBRACE, P_RBRACE, P_LBRACKET, P_RBRACKET, P_LT,
  P_GT, P_COMMA, P_SEMI, P_COLON, P_QUESTION, P_ASSIGN, P_PLUS, P_MINUS,
  P_STAR, P_SLASH, P_PERCENT, P_AMP, P_PIPE, P_CARET, P_TILDE, P_BANG,
  P_DOT,
  P_COUNT
} punct;

typedef struct token {
  uint8_t kind;      /* tok_kind */
  uint8_t punct;     /* TK_PUNCT */
  uint8_t suffix;    /* literal suffix scalar, XPJ_VOID if none */
  uint8_t bad;       /* a literal with a lexical error (reported): poison */
  int8_t fdir;       /* TK_FLOAT: where the decimal lies beside val.f, its
                        nearest double: 1 above, -1 below, 0 at it */
  uint32_t off, len; /* bytes in the source */
  uint32_t line, col;
  union {
    uint64_t u;
    double f;
    int scalar;
  } val;
} token;

typedef struct lexer_out {
  token *toks;
  uint32_t n, cap;
} lexer_out;

/* Error callback: position and message; damaged when a token was lost or
 * cut short there (a syntax error later on its line is likely to follow
 * from it), not for bytes inside a comment. */
typedef void (*lex_error_fn)(void *ud, uint32_t off, uint32_t line,
                             uint32_t col, const char *msg, bool damaged);

/* The bytes of a UTF-8 byte order mark at the start of src (3), or 0:
 * the lexer skips them, and whoever quotes line 1 starts after them */
static inline uint32_t xpj_bom_len(const char *src, size_t len) {
  return len >= 3 && !memcmp(src, "\xef\xbb\xbf", 3) ? 3 : 0;
}

/* Lexes src; returns false only when out of memory. Lexical errors are
 * reported through err and lexing goes on. */
bool xpj_lex(const char *src, uint32_t len, lexer_out *out, lex_error_fn err,
             void *ud);
const char *xpj_punct_str(punct p);
const char *xpj_tok_kind_str(tok_kind k);

#endif
