/*
 * parse.c - parser and semantic checker of the kernel language.
 *
 * There is no AST: the parser resolves names, types expressions and builds
 * IR through the builder (include/xpjit_ir.h) as it goes, in two passes
 * over the token array. Pass 1 reads every item's signature (so functions
 * can be called before they are defined) and skips bodies by brace
 * matching; pass 2 parses the bodies. Typing rules are the builder's: the
 * parser reports the builder's messages at the right token. Untyped
 * literals are the parser's own concept: they stay unmaterialised until an
 * operand, a declared type or a parameter gives them a type.
 *
 * Error handling: a syntax error enters panic mode, which silences further
 * messages until the parser resynchronises at a statement or item
 * boundary; semantic errors propagate as "poison" (value 0) without new
 * messages. Recursion depth, how deep an expression nests (a chain of
 * binary operators, read in a loop, included) and the number of errors
 * are bounded.
 *
 * Const parameters (`kernel k<const TS: i64>`): the generic parse reads
 * each use in a body as a `const_param` value of its type, so the body is
 * checked like any other; a constant context that can only be evaluated
 * once the values are known (an array size, `local(...)`, a work-item
 * dimension, shape() of such an array) is deferred without an error when
 * it would be constant after binding. xpj_parse_bound (frontend.h)
 * parses again with the values given, where they are typed constants and
 * every deferred check runs.
 */
#include "buf.h"
#include "diag.h"
#include "frontend.h"
#include "ir_impl.h"
#include "lex.h"
#include "xpjit_compiler.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum ekind {
  E_ERR,  /* poison: an error was already reported */
  E_VAL,  /* a value v of type t */
  E_PTR,  /* a location v (pointer) holding a t */
  E_ARR,  /* an array value v of array type t */
  E_LINT, /* untyped integer literal i */
  E_LFLT, /* untyped floating literal f */
  E_VOID, /* result of a call that returns nothing */
} ekind;

enum { MUT_OK, MUT_PARAM, MUT_CONST, MUT_RDONLY, MUT_ARRAY, MUT_TEMP };

typedef struct expr {
  ekind k;
  xpj_val v;
  xpj_type t;
  int64_t i;
  double f;
  int8_t fdir; /* E_LFLT: where the decimal literal f stands for lies
                  beside f: 1 above, -1 below, 0 at it (token.fdir); 0 for
                  a folded value */
  const token *tok; /* representative token */
  const token *name; /* the symbol it names, if any */
  uint8_t mut;       /* MUT_*: why it cannot be assigned */
  bool is_call;
  bool big;     /* E_LINT above INT64_MAX: only a u64 can hold it */
  uint8_t suffix; /* literal suffix type in a module constant (XPJ_VOID) */
  bool boolean; /* E_LINT that is true/false (module constants only) */
  bool gdep;    /* E_LINT whose value depends on unbound const parameters
                   (generic parse, outside a body: `local(TS)`) */
  bool deferred; /* E_ARR: a static array whose size depends on them */
  uint32_t depth; /* operators nested in it (deeper): 0 for a name or a
                     literal, a folded constant included */
} expr;

typedef enum skind { S_VAR, S_VAL, S_LIT, S_ARRAY } skind;

typedef struct sym {
  const token *name;
  skind k;
  ekind litk; /* S_LIT: E_LINT or E_LFLT */
  bool big, boolean;
  xpj_val v;
  xpj_type t;
  int64_t i;
  double f;
  int8_t fdir; /* S_LIT: expr.fdir */
  uint8_t mut;
  bool deferred; /* S_ARRAY: sized by unbound const parameters */
} sym;

/* A module constant's item, found before pass 1 so that a constant may
 * be used before its definition (language.md 3): parsed in place, or
 * where it is first used. */
typedef struct pconst {
  const token *name;
  uint32_t start, end; /* its tokens: `const` .. after the `;` */
  uint8_t state;       /* PC_* */
  bool queued;         /* on parse_deps_first's stack */
  uint32_t scan;       /* parse_deps_first: the next token to look at */
} pconst;
enum { PC_WAITING, PC_PARSING, PC_DONE };

typedef struct mconst {
  const token *name;
  ekind litk;     /* E_LINT / E_LFLT */
  bool big, boolean;
  int scalar;     /* declared type, XPJ_VOID if untyped */
  int64_t i;
  double f;
  int8_t fdir;    /* expr.fdir */
} mconst;

/* A const parameter of the function being parsed: unbound (a value
 * `const_param index`) or bound to value (xpj_parse_bound). */
typedef struct cparam {
  const token *name;
  uint8_t scalar;
  bool bound;
  unsigned index;
  int64_t value;
} cparam;

typedef struct fn_info {
  xpj_func *f;
  const token *name;
  const token *params[XPJ_MAX_PARAMS]; /* parameter name tokens */
  uint32_t body, body_end; /* token index of '{' and of its '}' */
  cparam cps[XPJ_MAX_CPARAMS];
  unsigned ncps;
} fn_info;

typedef struct parser {
  const char *src;
  uint32_t len;
  const char *fname;
  uint32_t file;
  token *toks;
  uint32_t ntok, pos;
  xpj_module *m;
  xpj_diags *d;
  unsigned errors;
  bool oom, too_many, panic;
  bool gave_up; /* nesting too deep: the rest of the item is not read,
                 * and nothing more of it reported */
  /* current function */
  xpj_func *f;
  xpj_block b;
  bool dead; /* the current block already ended in a jump */
  bool broke; /* a 'break' leaves the innermost loop being parsed */
  sym *syms;
  uint32_t nsyms, capsyms, scope_base;
  unsigned depth;
  unsigned elifs; /* `else if` arms being parsed (parse_if recursion) */
  fn_info *fns;
  uint32_t nfns, capfns;
  uint32_t lex_error_line; /* last line with a lexical error */
  mconst *consts;
  uint32_t nconsts, capconsts;
  pconst *pend; /* every module constant's item, in source order */
  uint32_t npend, cappend;
  uint32_t *pstack; /* parse_deps_first's stack of pend indices */
  uint32_t cappstack;
  /* const parameters in scope (the current function's) */
  const cparam *cps;
  unsigned ncps;
  const xpj_binding *bound; /* xpj_parse_bound: the kernel and values */
  /* gconst's memo (per value of the current function) and stack */
  uint8_t *gmemo;
  uint32_t capgmemo;
  uint32_t *gstack;
  uint32_t capgstack;
  /* the type the expression starting at hint_tok is converted to (a
   * declared variable's, an assignment's target, a return type): a
   * conditional of two literals there takes it (parse_hinted) */
  xpj_type hint;
  const token *hint_tok;
  /* one more than the deepest expression read since the operand being
   * read began (0: none yet), which holds them: a call's arguments, a
   * cast's or a subscript's operand (parse_unary, parse_primary) */
  uint32_t inner;
} parser;

/* ---- diagnostics ---------------------------------------------------- */

static const char *line_start(const parser *p, uint32_t off) {
  uint32_t s = off > p->len ? p->len : off;
  while (s > 0 && p->src[s - 1] != '\n')
    s--;
  if (s == 0)
    s = xpj_bom_len(p->src, p->len); /* (xpj_lex skips it) */
  return p->src + s;
}

static void report(parser *p, xpj_severity sev, uint32_t off, uint32_t line,
                   uint32_t col, const char *msg) {
  if (p->too_many)
    return;
  if (sev == XPJ_SEV_ERROR && ++p->errors > XPJ_MAX_ERRORS) {
    p->too_many = true;
    if (p->d)
      xpj_diags_add(p->d, XPJ_SEV_ERROR, p->fname, 0, 0, NULL,
                    "too many errors; stopping");
    if (p->ntok)
      p->pos = p->ntok - 1;
    return;
  }
  if (!p->d)
    return;
  char full[700];
  if (sev == XPJ_SEV_ERROR && p->bound && p->bound->text &&
      p->bound->text[0]) {
    snprintf(full, sizeof full, "%s (with %s)", msg, p->bound->text);
    msg = full;
  }
  /* the line from its start, as long as it is: the part quoted is
   * diag.c's to choose (around col on a long line) */
  const char *ls = line_start(p, off);
  if (xpj_diags_add_line(p->d, sev, p->fname, line, col, ls,
                         (size_t)(p->src + p->len - ls), msg) != XPJ_OK)
    p->oom = true;
}

static void verror(parser *p, const token *t, bool syntax, const char *fmt,
                   va_list ap) {
  if (p->panic || p->gave_up)
    return;
  if (syntax && t->line == p->lex_error_line) {
    p->panic = true; /* a cascade of the lexical error on this line */
    return;
  }
  if (syntax)
    p->panic = true;
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  report(p, XPJ_SEV_ERROR, t->off, t->line, t->col, msg);
}

/* A semantic error at t. */
static void error(parser *p, const token *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void error(parser *p, const token *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verror(p, t, false, fmt, ap);
  va_end(ap);
}

/* A syntax error at t: enters panic mode. */
static void syntax(parser *p, const token *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void syntax(parser *p, const token *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verror(p, t, true, fmt, ap);
  va_end(ap);
}

/* Reports the builder's last message at t (nothing for poison). */
static void berror(parser *p, const token *t) {
  if (p->m->oom) {
    p->oom = true;
    return;
  }
  if (p->m->errmsg[0])
    error(p, t, "%s", p->m->errmsg);
  p->m->errmsg[0] = 0;
}

static void lex_err(void *ud, uint32_t off, uint32_t line, uint32_t col,
                    const char *msg, bool damaged) {
  parser *p = ud;
  if (damaged)
    p->lex_error_line = line;
  report(p, XPJ_SEV_ERROR, off, line, col, msg);
}

/* ---- tokens --------------------------------------------------------- */

static const token *peek(const parser *p) { return &p->toks[p->pos]; }
static const token *peek_at(const parser *p, uint32_t k) {
  uint32_t i = p->pos + k;
  return &p->toks[i < p->ntok ? i : p->ntok - 1];
}
static const token *next(parser *p) {
  const token *t = &p->toks[p->pos];
  if (p->pos + 1 < p->ntok)
    p->pos++;
  return t;
}
static bool is_p(const parser *p, punct c) {
  const token *t = peek(p);
  return t->kind == TK_PUNCT && t->punct == c;
}
static bool is_k(const parser *p, tok_kind k) { return peek(p)->kind == k; }
static bool accept(parser *p, punct c) {
  if (!is_p(p, c))
    return false;
  next(p);
  return true;
}

/* Short printable text of a token for messages. */
static const char *tok_text(const parser *p, const token *t, char buf[48]) {
  if (t->kind == TK_EOF)
    return "end of file";
  uint32_t n = t->len > 40 ? 40 : t->len;
  size_t k = 0;
  buf[k++] = '\'';
  for (uint32_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)p->src[t->off + i];
    buf[k++] = (c >= 32 && c < 127) ? (char)c : '?';
  }
  buf[k++] = '\'';
  buf[k] = 0;
  return buf;
}

static bool expect(parser *p, punct c, const char *where) {
  if (accept(p, c))
    return true;
  char b[48];
  const token *t = peek(p);
  /* a missing ';' or ')' at the end of a line is reported where it belongs,
   * right after the previous token, as C compilers do */
  if (p->pos > 0 && p->toks[p->pos - 1].line < t->line) {
    token at = p->toks[p->pos - 1];
    at.off += at.len;
    at.col += at.len;
    at.len = 0;
    syntax(p, &at, "expected '%s' %s, found %s", xpj_punct_str(c), where,
           tok_text(p, t, b));
    return false;
  }
  syntax(p, t, "expected '%s' %s, found %s", xpj_punct_str(c), where,
         tok_text(p, t, b));
  return false;
}

static bool tok_is(const parser *p, const token *t, const char *s) {
  size_t n = strlen(s);
  return t->len == n && memcmp(p->src + t->off, s, n) == 0;
}

static bool same_name(const parser *p, const token *a, const token *b) {
  return a->len == b->len && memcmp(p->src + a->off, p->src + b->off, a->len) == 0;
}

/* Copies a token's text into buf (NUL-terminated, at most 255 chars). */
static const char *tok_str(const parser *p, const token *t, char buf[256]) {
  uint32_t n = t->len > 255 ? 255 : t->len;
  memcpy(buf, p->src + t->off, n);
  buf[n] = 0;
  return buf;
}

static xpj_loc loc(const parser *p, const token *t) {
  xpj_loc l = {p->file, t->line, t->col};
  return l;
}

/* Skips to the end of the current statement: past ';' or before '}' at the
 * current brace depth. */
static void sync_stmt(parser *p) {
  int depth = 0;
  while (!is_k(p, TK_EOF)) {
    if (is_p(p, P_LBRACE))
      depth++;
    else if (is_p(p, P_RBRACE)) {
      if (depth == 0)
        break;
      depth--;
      if (depth == 0) {
        next(p);
        break;
      }
    } else if (is_p(p, P_SEMI) && depth == 0) {
      next(p);
      break;
    }
    next(p);
  }
  p->panic = false;
}

/* ---- scopes --------------------------------------------------------- */

static sym *lookup(parser *p, const token *name) {
  for (uint32_t i = p->nsyms; i-- > 0;)
    if (same_name(p, p->syms[i].name, name))
      return &p->syms[i];
  return NULL;
}

static mconst *lookup_const(parser *p, const token *name) {
  for (uint32_t i = 0; i < p->nconsts; i++)
    if (same_name(p, p->consts[i].name, name))
      return &p->consts[i];
  return NULL;
}

static void parse_const_item(parser *p);
static void sync_item(parser *p);

/* After an item nested too deep (enter): the parser is left at the next
 * item after the one that starts at start, with nothing given up, so
 * that the items after it are checked */
static void skip_given_up(parser *p, uint32_t start) {
  p->pos = start;
  next(p); /* its keyword */
  sync_item(p);
  p->gave_up = false;
  p->depth = 0; /* (enter does not leave what it gave up) */
}

/* Parses module constant item k now (pass 1 comes to it, or a use comes
 * first), as at the top level: no function, locals or const parameters
 * in scope; the parser's place is kept. */
static void parse_pending(parser *p, pconst *k) {
  parser keep = *p;
  k->state = PC_PARSING;
  p->pos = k->start;
  p->f = NULL;
  p->nsyms = p->scope_base = 0;
  p->ncps = 0;
  p->panic = p->gave_up = false;
  p->depth = 0; /* as at the top level */
  parse_const_item(p);
  if (p->gave_up)
    skip_given_up(p, k->start);
  k->end = p->pos;
  k->state = PC_DONE;
  p->pos = keep.pos;
  p->f = keep.f;
  p->nsyms = keep.nsyms;
  p->scope_base = keep.scope_base;
  p->cps = keep.cps;
  p->ncps = keep.ncps;
  p->panic = keep.panic;
  p->gave_up = keep.gave_up;
  p->depth = keep.depth;
  p->inner = keep.inner; /* (the constant is not inside the operand) */
}

/* The module constant item token t names, if it is still waiting and not
 * on parse_deps_first's stack */
static pconst *waiting_const(parser *p, const token *t) {
  if (t->kind != TK_IDENT)
    return NULL;
  for (uint32_t i = 0; i < p->npend; i++) {
    pconst *k = &p->pend[i];
    if (k->state == PC_WAITING && !k->queued && same_name(p, k->name, t))
      return k;
  }
  return NULL;
}

/* The next waiting constant k's value names, from k->scan to the end of
 * its item (a `;`, or where another item begins) */
static pconst *next_dep(parser *p, pconst *k) {
  while (k->scan < p->ntok) {
    const token *t = &p->toks[k->scan++];
    if ((t->kind == TK_PUNCT && t->punct == P_SEMI) || t->kind == TK_EOF ||
        t->kind == TK_KW_KERNEL || t->kind == TK_KW_FN ||
        t->kind == TK_KW_CONST) {
      k->scan = p->ntok;
      break;
    }
    pconst *d = waiting_const(p, t);
    if (d)
      return d;
  }
  return NULL;
}

/* Parses waiting constant k after the waiting constants its value names,
 * deepest first, with a stack of its own: a long chain of forward
 * references costs no recursion in the parser (in a cycle, the member
 * parsed first finds the others parsing: parse_pending's recursion reports
 * it, bounded by the nesting limit) */
static void parse_deps_first(parser *p, pconst *k) {
  uint32_t n = 0;
  if (!xpj_grow((void **)&p->pstack, &p->cappstack, 1, sizeof *p->pstack)) {
    p->oom = true;
    return;
  }
  k->queued = true;
  k->scan = k->start + 2; /* after `const NAME` */
  p->pstack[n++] = (uint32_t)(k - p->pend);
  while (n > 0 && !p->oom) {
    pconst *top = &p->pend[p->pstack[n - 1]];
    pconst *dep = next_dep(p, top);
    if (!dep) {
      n--;
      if (top->state == PC_WAITING)
        parse_pending(p, top);
      continue;
    }
    if (!xpj_grow((void **)&p->pstack, &p->cappstack, n + 1,
                  sizeof *p->pstack)) {
      p->oom = true;
      return;
    }
    dep->queued = true;
    dep->scan = dep->start + 2;
    p->pstack[n++] = (uint32_t)(dep - p->pend);
  }
}

/* The module constant name, parsed now if its item comes later; NULL
 * when there is none, or (*reported) when its value needs itself or its
 * item had errors: reported there, not again at each use. */
static mconst *resolve_const(parser *p, const token *name, bool *reported) {
  mconst *c = lookup_const(p, name);
  *reported = false;
  if (c)
    return c;
  for (uint32_t i = 0; i < p->npend; i++) {
    pconst *k = &p->pend[i];
    if (!same_name(p, k->name, name))
      continue;
    if (k->state == PC_PARSING) {
      char nb[256];
      error(p, name, "constant '%s' is defined in terms of itself",
            tok_str(p, name, nb));
      *reported = true;
      return NULL;
    }
    if (k->state == PC_WAITING)
      parse_deps_first(p, k);
    c = lookup_const(p, name);
    *reported = !c;
    return c;
  }
  return NULL;
}

static const cparam *lookup_cparam(const parser *p, const token *name) {
  for (unsigned i = 0; i < p->ncps; i++)
    if (same_name(p, p->cps[i].name, name))
      return &p->cps[i];
  return NULL;
}

static fn_info *lookup_fn(parser *p, const token *name) {
  for (uint32_t i = 0; i < p->nfns; i++)
    if (same_name(p, p->fns[i].name, name))
      return &p->fns[i];
  return NULL;
}

static int tparam_index(parser *p, const token *name) {
  if (!p->f)
    return -1;
  for (unsigned i = 0; i < p->f->ntparams; i++) {
    const char *tp = p->f->tparams[i];
    if (strlen(tp) == name->len && memcmp(tp, p->src + name->off, name->len) == 0)
      return (int)i;
  }
  return -1;
}

static bool is_order_or_scope_name(const parser *p, const token *t);

static sym *declare(parser *p, const token *name, skind k) {
  char b[256];
  for (uint32_t i = p->scope_base; i < p->nsyms; i++)
    if (same_name(p, p->syms[i].name, name)) {
      error(p, name, "redefinition of '%s' in the same scope",
            tok_str(p, name, b));
      return NULL;
    }
  if (tparam_index(p, name) >= 0) {
    error(p, name, "'%s' is a type parameter and cannot name a variable",
          tok_str(p, name, b));
    return NULL;
  }
  if (lookup_cparam(p, name)) {
    error(p, name, "'%s' is a const parameter and cannot name a variable",
          tok_str(p, name, b));
    return NULL;
  }
  if (p->nsyms >= 8192) {
    error(p, name, "too many variables in one function (at most 8192)");
    return NULL;
  }
  if (!xpj_grow((void **)&p->syms, &p->capsyms, p->nsyms + 1,
                sizeof *p->syms)) {
    p->oom = true;
    return NULL;
  }
  sym *s = &p->syms[p->nsyms++];
  memset(s, 0, sizeof *s);
  s->name = name;
  s->k = k;
  return s;
}

/* ---- literals and conversions -------------------------------------- */

static expr err_expr(const token *t) {
  expr e = {0};
  e.k = E_ERR;
  e.tok = t;
  return e;
}

static expr val_expr(xpj_func *f, xpj_val v, const token *t) {
  expr e = {0};
  e.tok = t;
  if (!v) {
    e.k = E_ERR;
    return e;
  }
  e.k = E_VAL;
  e.v = v;
  e.t = xpj_val_type(f, v);
  e.mut = MUT_TEMP;
  return e;
}

static bool in_function(parser *p, const token *t) {
  if (p->f)
    return true;
  error(p, t, "not a constant expression (a module constant's value is made "
        "of literals, other module constants, operators and casts)");
  return false;
}

static xpj_type scalar_t(parser *p, xpj_scalar s) {
  return xpj_type_scalar(p->m, s);
}

/* Materialises an untyped literal as type want (0: the default type). */
/* An integer literal the default type i32 holds */
static bool fits_i32(const expr *e) {
  return !e->big && e->i >= INT32_MIN && e->i <= INT32_MAX;
}

/* Whether integer literal e, rounded once to float type s, is finite: one
 * beyond f16's range (65520 and up) would round to infinity, which a
 * literal may not become (4.4), as a float literal may not; reported at
 * `at` when not. */
/* A negative untyped constant where unsigned type s is wanted: `-1`, and
 * `~0`, whose exact value is -1 too (4.4) */
static void neg_unsigned(parser *p, const token *at, int64_t v, int s) {
  const char *sn = xpj_scalar_name((xpj_scalar)s);
  error(p, at, "constant %lld is negative and cannot have unsigned type %s "
        "(untyped literals keep their exact value; a suffixed one has the "
        "type's arithmetic: ~0%s is all ones)", (long long)v, sn, sn);
}

static bool int_lit_in_range(parser *p, const token *at, int s,
                             const expr *e) {
  if (isfinite(xpj_float_of_int(s, e->i, e->big)))
    return true;
  const char *sn = xpj_scalar_name((xpj_scalar)s);
  char nb[32];
  if (e->big)
    snprintf(nb, sizeof nb, "%llu", (unsigned long long)e->i);
  else
    snprintf(nb, sizeof nb, "%lld", (long long)e->i);
  error(p, at, "integer constant %s is out of range for %s (largest finite "
        "%g; infinity(%s) if that is meant)", nb, sn,
        s == XPJ_F16 ? 65504.0 : s == XPJ_BF16 ? 0x1.fep127
        : s == XPJ_F32 ? (double)FLT_MAX : DBL_MAX, sn);
  return false;
}

static xpj_val lit_value(parser *p, const expr *e, xpj_type want) {
  char tb[96];
  if (!in_function(p, e->tok))
    return 0;
  int ws = want ? xpj_type_scalar_of(p->m, want) : XPJ_SCALAR_COUNT;
  bool param = want && xpj_type_is_param(p->m, want);
  if (e->k == E_LINT && e->boolean) {
    if (want && ws != XPJ_BOOL) {
      xpj_type_str_in(p->f, want, tb, sizeof tb);
      error(p, e->tok, "bool constant used where %s is expected", tb);
      return 0;
    }
    xpj_val v = xpj_b_const_int(p->f, p->b, scalar_t(p, XPJ_BOOL), e->i != 0,
                                loc(p, e->tok));
    if (!v)
      berror(p, e->tok);
    return v;
  }
  if (e->k == E_LINT && xpj_scalar_float_valued(ws)) {
    /* rounded once (a big literal's bits read as u64) */
    if (!int_lit_in_range(p, e->tok, ws, e))
      return 0;
    xpj_val v = xpj_b_const_float(p->f, p->b, want,
                                  xpj_float_of_int(ws, e->i, e->big),
                                  loc(p, e->tok));
    if (!v)
      berror(p, e->tok);
    return v;
  }
  if (e->k == E_LINT && e->big && ws != XPJ_U64) {
    error(p, e->tok, "integer literal %llu does not fit in %s (only u64 can "
          "hold it)", (unsigned long long)e->i,
          want ? (xpj_type_str_in(p->f, want, tb, sizeof tb), tb) : "i64");
    return 0;
  }
  if (e->k == E_LINT) {
    if (!want) /* the default: i32, or i64 for a value beyond it */
      want = scalar_t(p, fits_i32(e) ? XPJ_I32 : XPJ_I64);
    else if (ws == XPJ_BOOL) {
      error(p, e->tok, "integer literal used where bool is expected");
      return 0;
    } else if (ws == XPJ_U64 || param) {
      /* any bit pattern */
    } else if (e->i < 0 && ws >= XPJ_U8 && ws <= XPJ_U32) {
      neg_unsigned(p, e->tok, e->i, ws);
      return 0;
    }
    xpj_val v = xpj_b_const_int(p->f, p->b, want, e->i, loc(p, e->tok));
    if (!v)
      berror(p, e->tok);
    return v;
  }
  /* E_LFLT */
  if (!want)
    want = scalar_t(p, XPJ_F64);
  ws = xpj_type_scalar_of(p->m, want);
  if (!param && !xpj_scalar_float_valued(ws)) {
    xpj_type_str(p->m, want, tb, sizeof tb);
    error(p, e->tok, "floating-point literal cannot be used as %s without a "
          "cast", tb);
    return 0;
  }
  xpj_val v = xpj_b_const_float_dir(p->f, p->b, want, e->f, e->fdir,
                                    loc(p, e->tok));
  if (!v)
    berror(p, e->tok);
  return v;
}

/* Turns e into a value of type want (0: any type), loading locations and
 * materialising literals. Returns 0 on error (reported). */
static xpj_val rvalue(parser *p, expr *e, xpj_type want) {
  char b1[96], b2[96], nb[256];
  switch (e->k) {
  case E_ERR:
    return 0;
  case E_LINT:
  case E_LFLT:
    return lit_value(p, e, want);
  case E_VOID:
    error(p, e->tok, "a call to a function that returns nothing has no value");
    return 0;
  case E_ARR:
    if (e->name)
      error(p, e->tok, "array '%s' used as a value (index it, e.g. %s[i])",
            tok_str(p, e->name, nb), nb);
    else
      error(p, e->tok, "array used as a value");
    return 0;
  case E_PTR: {
    xpj_val v = xpj_b_load(p->f, p->b, e->v, loc(p, e->tok));
    if (!v) {
      berror(p, e->tok);
      return 0;
    }
    e->k = E_VAL;
    e->v = v;
    break;
  }
  case E_VAL:
    break;
  }
  if (want && e->t != want) {
    xpj_type_str_in(p->f, e->t, b1, sizeof b1);
    xpj_type_str_in(p->f, want, b2, sizeof b2);
    error(p, e->tok, "expected a value of type %s, found %s (use a cast: "
          "%s(...))", b2, b1, b2);
    return 0;
  }
  return e->v;
}

static bool is_lit(const expr *e) { return e->k == E_LINT || e->k == E_LFLT; }

/* The type an expression has, or 0 for a literal / error. */
static xpj_type typed(const expr *e) {
  return (e->k == E_VAL || e->k == E_PTR) ? e->t : 0;
}

/* An integer literal's exact value: a big one's bits read as u64. */
static __int128 lit_exact(const expr *e) {
  return e->big ? (__int128)(uint64_t)e->i : (__int128)e->i;
}

/* r's exact value v, computed from untyped literals: above INT64_MAX it
 * is a big literal (only u64 holds it); below INT64_MIN or above
 * UINT64_MAX, nothing holds it (language.md 4.4: the value must be
 * representable). A suffixed literal's arithmetic is its type's, which
 * wraps. False, with the error reported, when v fits in no type. */
/* v wrapped to integer type s: its width, then its signedness (what the
 * type's arithmetic gives at run time, language.md 8.2) */
static int64_t wrap_to(xpj_scalar s, __int128 v) {
  unsigned bits = xpj_scalar_bits(s);
  uint64_t u = (uint64_t)v;
  if (bits < 64) {
    uint64_t mask = ((uint64_t)1 << bits) - 1;
    u &= mask;
    if (s <= XPJ_I64 && (u >> (bits - 1)) & 1)
      u |= ~mask; /* sign-extended */
  }
  return (int64_t)u;
}

static bool exact_lit(parser *p, expr *r, __int128 v, const token *optok) {
  if (r->suffix) {
    r->i = wrap_to((xpj_scalar)r->suffix, v);
    r->big = r->suffix == XPJ_U64 && (uint64_t)r->i > INT64_MAX;
    return true;
  }
  if (v < INT64_MIN || v > (__int128)UINT64_MAX) {
    error(p, optok, "integer constant expression overflows: its value "
          "needs more than 64 bits (use typed operands, which wrap)");
    return false;
  }
  r->big = v > INT64_MAX;
  r->i = (int64_t)(uint64_t)v;
  return true;
}

/* A literal's value as float scalar s (0: f64): an integer one rounded
 * once, as its conversion to s does */
static double lit_float(const expr *e, int s) {
  if (e->k == E_LFLT)
    return e->f;
  return xpj_float_of_int(s ? s : XPJ_F64, e->i, e->big);
}

/* Whether literal e (untyped, or of type s already) can become number
 * type s, reported at `at` when not: an integer one must fit (4.4; any
 * bits for u64, as in a function), a float one be within s's range. A
 * float value is rounded to s here, as it will be. */
static bool lit_fits(parser *p, const token *at, int s, expr *e) {
  const char *sn = xpj_scalar_name((xpj_scalar)s);
  if (xpj_scalar_float_valued(s)) {
    if (e->k == E_LINT && !int_lit_in_range(p, at, s, e))
      return false;
    double v = lit_float(e, s),
           r = xpj_float_round_dir(s, v, e->k == E_LFLT ? e->fdir : 0);
    if (isfinite(v) && !isfinite(r)) {
      /* the value itself, not %g's six digits (3.4028236e38, past f32's
       * largest, printed as 3.40282e+38) */
      char vb[32];
      for (int prec = 6; prec <= 17; prec++) {
        snprintf(vb, sizeof vb, "%.*g", prec, v);
        if (strtod(vb, NULL) == v)
          break;
      }
      error(p, at, "floating-point constant %s is out of range for %s "
            "(infinity(%s) if that is meant)", vb, sn, sn);
      return false;
    }
    e->k = E_LFLT;
    e->f = r;
    e->fdir = 0; /* a value of s now */
    return true;
  }
  if (e->suffix == s || s == XPJ_U64)
    return true;
  if (e->big) {
    error(p, at, "integer constant %llu does not fit in %s (only u64 can "
          "hold it)", (unsigned long long)e->i, sn);
    return false;
  }
  if (e->i < 0 && s >= XPJ_U8) {
    neg_unsigned(p, at, e->i, s);
    return false;
  }
  if (wrap_to((xpj_scalar)s, e->i) != e->i) {
    error(p, at, "integer constant %lld does not fit in %s", (long long)e->i,
          sn);
    return false;
  }
  return true;
}

/* A bool constant: the value of a comparison or a logical operator on
 * constants (also in a function, where it becomes a bool when used) */
static expr bool_lit(const token *t, bool v, bool gdep) {
  expr r = err_expr(t);
  r.k = E_LINT;
  r.i = v;
  r.boolean = true;
  r.gdep = gdep;
  r.mut = MUT_TEMP;
  return r;
}

/* `a op b` on two bool constants: ==, !=, &, |, ^ (10: `&`, `|`, `^`
 * take bool too) */
static expr fold_bools(parser *p, xpj_binop op, expr a, expr b,
                       const token *optok) {
  if (!a.boolean || !b.boolean) {
    error(p, optok, "mismatched types %s and %s for operator '%s'",
          a.boolean ? "bool" : "a number", b.boolean ? "bool" : "a number",
          xpj_binop_symbol(op));
    return err_expr(optok);
  }
  bool x = a.i != 0, y = b.i != 0, gdep = a.gdep || b.gdep;
  switch (op) {
  case XPJ_EQ: return bool_lit(a.tok, x == y, gdep);
  case XPJ_NE:
  case XPJ_XOR: return bool_lit(a.tok, x != y, gdep);
  case XPJ_AND: return bool_lit(a.tok, x && y, gdep);
  case XPJ_OR: return bool_lit(a.tok, x || y, gdep);
  default:
    error(p, optok, "operator '%s' cannot be applied to bool",
          xpj_binop_symbol(op));
    return err_expr(optok);
  }
}

/* bf16 only stores values (language.md 4.1): in a module constant's value
 * an operator on a bf16 constant is refused as in a function, with the
 * IR's words (ir.c, bf16_refused). True when refused. */
static bool bf16_operand(parser *p, const token *optok, int type,
                         const char *op) {
  if (type != XPJ_BF16)
    return false;
  error(p, optok, "operator '%s' cannot be applied to bf16: bf16 is a "
        "storage type; convert it first, e.g. f32(x)", op);
  return true;
}

/* Folds a binary operator on two literals (untyped, or suffixed ones in a
 * module constant's value). */
static expr fold_lits(parser *p, xpj_binop op, expr a, expr b,
                      const token *optok) {
  expr r = a;
  r.tok = a.tok;
  if (a.boolean || b.boolean)
    return fold_bools(p, op, a, b, optok);
  if (a.suffix && b.suffix && a.suffix != b.suffix) {
    error(p, optok, "mismatched types %s and %s for operator '%s'",
          xpj_scalar_name((xpj_scalar)a.suffix),
          xpj_scalar_name((xpj_scalar)b.suffix), xpj_binop_symbol(op));
    return err_expr(optok);
  }
  r.suffix = a.suffix ? a.suffix : b.suffix;
  if (bf16_operand(p, optok, r.suffix, xpj_binop_symbol(op)))
    return err_expr(optok);
  r.gdep = a.gdep || b.gdep;
  r.big = false;
  /* exact values: a big literal is its bits read as u64 */
  __int128 wa = lit_exact(&a), wb = lit_exact(&b);
  bool fl = a.k == E_LFLT || b.k == E_LFLT;
  if (fl && r.suffix && !xpj_scalar_float_valued(r.suffix)) {
    error(p, optok, "floating-point literal cannot be used as %s without a "
          "cast", xpj_scalar_name((xpj_scalar)r.suffix));
    return err_expr(optok);
  }
  double x = lit_float(&a, r.suffix), y = lit_float(&b, r.suffix);
  if (fl && r.suffix) { /* the type's arithmetic on its values */
    x = xpj_float_round_dir(r.suffix, x, a.k == E_LFLT ? a.fdir : 0);
    y = xpj_float_round_dir(r.suffix, y, b.k == E_LFLT ? b.fdir : 0);
  }
  if (op >= XPJ_EQ) {
    bool res = false;
    if (fl) {
      switch (op) {
      case XPJ_EQ: res = x == y; break;
      case XPJ_NE: res = x != y; break;
      case XPJ_LT: res = x < y; break;
      case XPJ_LE: res = x <= y; break;
      case XPJ_GT: res = x > y; break;
      default: res = x >= y; break;
      }
    } else {
      switch (op) {
      case XPJ_EQ: res = wa == wb; break;
      case XPJ_NE: res = wa != wb; break;
      case XPJ_LT: res = wa < wb; break;
      case XPJ_LE: res = wa <= wb; break;
      case XPJ_GT: res = wa > wb; break;
      default: res = wa >= wb; break;
      }
    }
    return bool_lit(a.tok, res, r.gdep);
  }
  if (fl) {
    r.k = E_LFLT;
    r.fdir = 0; /* computed: the nearest double of no decimal */
    switch (op) {
    case XPJ_ADD: r.f = x + y; break;
    case XPJ_SUB: r.f = x - y; break;
    case XPJ_MUL: r.f = x * y; break;
    case XPJ_DIV: r.f = x / y; break;
    default:
      error(p, optok, "operator '%s' needs integer operands",
            xpj_binop_symbol(op));
      return err_expr(optok);
    }
    if (r.suffix) { /* the type's arithmetic: rounded to it, may overflow */
      r.f = xpj_float_round(r.suffix, r.f);
    } else if (!isfinite(r.f) && isfinite(x) && isfinite(y)) {
      error(p, optok, "floating-point constant expression has no finite "
            "value (write infinity(T) or nan(T) for those)");
      return err_expr(optok);
    }
    return r;
  }
  r.k = E_LINT;
  __int128 v = 0;
  bool over = false;
  switch (op) {
  case XPJ_ADD: v = wa + wb; break;
  case XPJ_SUB: v = wa - wb; break;
  case XPJ_MUL: over = __builtin_mul_overflow(wa, wb, &v); break;
  case XPJ_DIV:
  case XPJ_REM:
    if (wb == 0 && r.gdep) { /* a placeholder: checked when bound */
      v = 0;
      break;
    }
    if (wb == 0) {
      error(p, optok, "division by zero in a constant expression");
      return err_expr(optok);
    }
    if (r.suffix && a.i == INT64_MIN && b.i == -1) /* the type's wrap */
      v = op == XPJ_DIV ? INT64_MIN : 0;
    else
      v = op == XPJ_DIV ? wa / wb : wa % wb;
    break;
  case XPJ_AND: v = wa & wb; break;
  case XPJ_OR: v = wa | wb; break;
  case XPJ_XOR: v = wa ^ wb; break;
  case XPJ_SHL:
  case XPJ_SHR:
    if (r.suffix) { /* the type's shift: the count modulo its width */
      unsigned bits = xpj_scalar_bits((xpj_scalar)r.suffix);
      int64_t av = wrap_to((xpj_scalar)r.suffix, wa);
      uint64_t ua = (uint64_t)av, n = (uint64_t)b.i & (bits - 1);
      if (r.suffix >= XPJ_U8 && bits < 64)
        ua &= ((uint64_t)1 << bits) - 1;
      v = op == XPJ_SHL            ? (__int128)(ua << n)
          : r.suffix >= XPJ_U8     ? (__int128)(ua >> n)
                                   : (__int128)(av >> n);
    } else if (wb < 0) {
      error(p, optok, "negative shift count in a constant expression");
      return err_expr(optok);
    } else if (op == XPJ_SHR) {
      v = wa >> (wb > 127 ? 127 : (int)wb);
    } else if (wa != 0) {
      over = wb >= 64 ||
             __builtin_mul_overflow(wa, (__int128)1 << (int)wb, &v);
    }
    break;
  default: break;
  }
  if (over && !r.suffix) {
    error(p, optok, "integer constant expression overflows: its value "
          "needs more than 64 bits (use typed operands, which wrap)");
    return err_expr(optok);
  }
  if (!exact_lit(p, &r, v, optok))
    return err_expr(optok);
  return r;
}

/* ---- types in source ------------------------------------------------ */

/* scalar type or type parameter; NULL-token safe */
static xpj_type parse_elem_type(parser *p) {
  const token *t = peek(p);
  char b[48];
  if (t->kind == TK_TYPE) {
    next(p);
    return scalar_t(p, (xpj_scalar)t->val.scalar);
  }
  if (t->kind == TK_IDENT) {
    int k = tparam_index(p, t);
    if (k >= 0) {
      next(p);
      return xpj_type_param(p->m, (unsigned)k);
    }
    char nb[256];
    if (lookup_cparam(p, t)) {
      syntax(p, t, "'%s' is a const parameter, not a type",
             tok_str(p, t, nb));
      next(p);
      return 0;
    }
    syntax(p, t, "unknown type '%s'%s", tok_str(p, t, nb),
           p->f && p->f->ntparams == 0
               ? " (declare type parameters like: kernel k<T>(...))"
               : "");
    next(p);
    return 0;
  }
  syntax(p, t, "expected a type, found %s", tok_text(p, t, b));
  return 0;
}

/* Parses a constant integer expression (array sizes, dimensions). */
static expr parse_expr(parser *p);

static bool const_int_of(parser *p, expr *e, int64_t *out) {
  if (e->k == E_LINT) {
    *out = e->i;
    return true;
  }
  if (e->k == E_VAL && p->f) {
    int s = xpj_type_scalar_of(p->m, e->t);
    if (s >= XPJ_I8 && s <= XPJ_U64 && xpj_val_const(p->f, e->v, out, NULL))
      return true;
  }
  return false;
}

/* v, the value const_int_of found in e, as the source wrote it: a u64 one
 * (a literal beyond i64, or typed u64) unsigned, not as its bits read
 * signed (18446744073709551615 is not -1) */
static const char *const_int_text(parser *p, const expr *e, int64_t v,
                                  char *buf, size_t size) {
  bool u = e->k == E_LINT ? e->big
           : e->k == E_VAL && xpj_type_scalar_of(p->m, e->t) == XPJ_U64;
  if (u)
    snprintf(buf, size, "%llu", (unsigned long long)v);
  else
    snprintf(buf, size, "%lld", (long long)v);
  return buf;
}

enum { G_UNKNOWN, G_NO, G_CONST, G_DEP };

/* Whether value root of the current function is a constant expression
 * (constants, operators and casts): G_NO when it is not, G_CONST when it
 * is one that did not fold (x / 0), G_DEP when it involves const
 * parameters and so is a constant only once they are bound. Iterative
 * and memoised: chains of constants can be long. */
static int gconst(parser *p, xpj_val root) {
  const xpj_func *f = p->f;
  if (!root || root >= f->ninsts)
    return G_NO;
  if (!xpj_grow((void **)&p->gmemo, &p->capgmemo, f->ninsts, 1)) {
    p->oom = true;
    return G_NO;
  }
  uint32_t sp = 0;
  if (!p->gmemo[root]) {
    if (!xpj_grow((void **)&p->gstack, &p->capgstack, 1, sizeof *p->gstack)) {
      p->oom = true;
      return G_NO;
    }
    p->gstack[sp++] = root;
  }
  while (sp) {
    xpj_val v = p->gstack[sp - 1];
    if (p->gmemo[v]) {
      sp--;
      continue;
    }
    const xpj_inst *in = &f->insts[v];
    int r = G_NO;
    if (in->op == XPJ_OP_CONST) {
      r = G_CONST;
    } else if (in->op == XPJ_OP_CPARAM) {
      r = G_DEP;
    } else if (in->op == XPJ_OP_BINOP || in->op == XPJ_OP_UNOP ||
               in->op == XPJ_OP_CAST) {
      const uint32_t *a = xpj_inst_args(f, in);
      bool pending = false;
      r = G_CONST;
      for (unsigned k = 0; k < in->nargs; k++) {
        uint8_t g = a[k] < v ? p->gmemo[a[k]] : G_NO;
        if (g == G_UNKNOWN) {
          if (!xpj_grow((void **)&p->gstack, &p->capgstack, sp + 1,
                        sizeof *p->gstack)) {
            p->oom = true;
            return G_NO;
          }
          p->gstack[sp++] = a[k];
          pending = true;
        } else if (g == G_NO) {
          r = G_NO;
        } else if (g == G_DEP && r != G_NO) {
          r = G_DEP;
        }
      }
      if (pending)
        continue; /* back to v once its operands are known */
    }
    p->gmemo[v] = (uint8_t)r;
    sp--;
  }
  return p->gmemo[root];
}

/* Whether e is an integer that is constant once the current kernel's
 * const parameters are bound, and depends on them (generic parse): the
 * constant context holding it is checked at specialisation. */
static bool generic_dep(parser *p, const expr *e) {
  if (e->k == E_LINT)
    return e->gdep && !e->boolean;
  if (e->k != E_VAL || !p->f || !p->f->ncparams)
    return false;
  int s = xpj_type_scalar_of(p->m, e->t);
  return s >= XPJ_I8 && s <= XPJ_U64 && gconst(p, e->v) == G_DEP;
}

/* Whether constant expression v computes with a float or a value of a
 * type parameter anywhere, which the parser does not fold (a cast of one
 * to an integer: i64(4.0), i64(T(4))); depth bounds the walk (expressions are
 * nested at most XPJ_MAX_NESTING deep anyway) */
static bool folded_only_later(const parser *p, xpj_val v, int depth) {
  const xpj_inst *in = &p->f->insts[v];
  if (xpj_scalar_float_valued(xpj_type_scalar_of(p->m, in->type)) ||
      xpj_type_is_param(p->m, in->type))
    return true;
  if (depth > 64 || (in->op != XPJ_OP_BINOP && in->op != XPJ_OP_UNOP &&
                     in->op != XPJ_OP_CAST))
    return false;
  const uint32_t *a = xpj_inst_args(p->f, in);
  for (unsigned k = 0; k < in->nargs; k++)
    if (a[k] < v && folded_only_later(p, a[k], depth + 1))
      return true;
  return false;
}

/* "[d0, d1, ...]" of a local or private array. A size that depends on
 * unbound const parameters is 1 here and sets bit d of *deferred (the
 * array instruction keeps the mask: its printed type shows '?'). */
static int parse_static_dims(parser *p, int64_t dims[XPJ_MAX_RANK],
                             uint8_t *deferred) {
  int n = 0;
  bool bad = false; /* reported; the rest is still read (no follow-ons) */
  *deferred = 0;
  if (!expect(p, P_LBRACKET, "before array dimensions"))
    return -1;
  do {
    const token *t = peek(p);
    expr e = parse_expr(p);
    int64_t v = 1;
    if (p->panic)
      return -1;
    if (e.k == E_ERR) {
      bad = true;
    } else if (generic_dep(p, &e)) {
      if (n < XPJ_MAX_RANK)
        *deferred |= (uint8_t)(1u << n);
    } else if (!const_int_of(p, &e, &v)) {
      if (e.k == E_VAL && p->f && gconst(p, e.v) == G_CONST)
        error(p, t, "%s", folded_only_later(p, e.v, 0)
                              ? "array dimension must be an integer constant "
                                "computed with integers only (a float or a "
                                "type parameter's value converted to an "
                                "integer, as in i64(4.0) or i64(T(4)), is "
                                "not computed before run time)"
                              : "array dimension has no value: it divides by "
                                "zero (or the smallest integer by -1)");
      else
        error(p, t, "array dimension must be an integer constant");
      bad = true;
    } else if (v <= 0) {
      char vb[32];
      const_int_text(p, &e, v, vb, sizeof vb);
      if (vb[0] == '-' || v == 0)
        error(p, t, "array dimension must be positive, not %s", vb);
      else /* a u64 beyond i64 */
        error(p, t, "array dimension %s is out of range (1 to 2^31)", vb);
      bad = true;
    }
    if (n == XPJ_MAX_RANK) {
      if (!bad)
        error(p, t, "too many array dimensions (at most %d)", XPJ_MAX_RANK);
      bad = true;
      continue;
    }
    dims[n++] = v;
  } while (accept(p, P_COMMA));
  if (!expect(p, P_RBRACKET, "after array dimensions"))
    return -1;
  if (is_p(p, P_LBRACKET)) {
    syntax(p, peek(p), "array dimensions are written in one pair of "
           "brackets: [n, m], not [n][m]");
    return -1;
  }
  return bad ? -1 : n;
}

/* ---- expressions ---------------------------------------------------- */

/* One level deeper (the parser's recursion, bounded to bound its stack):
 * a statement, block or `?:` arm takes one, a parenthesis, call or
 * subscript three (the operand parsers it goes through). */
static bool enter(parser *p, const token *t) {
  if (++p->depth > XPJ_MAX_NESTING) {
    if (!p->panic)
      syntax(p, t, "nesting is too deep: the limit is %d nested blocks or "
             "statements, or about %d nested parentheses, calls or "
             "subscripts", XPJ_MAX_NESTING, XPJ_MAX_NESTING / 3);
    p->pos = p->ntok - 1; /* give up on this input */
    p->gave_up = true;    /* and report nothing more of it */
    return false;
  }
  return true;
}
static void leave(parser *p) { p->depth--; }

/* Gives r, what an operator at t made of operands at most d - 1 deep,
 * its depth d. Deeper than XPJ_MAX_EXPR_DEPTH is an error there (once:
 * r becomes poison, and poison is 0 deep, as a constant folded from
 * literals is: the passes see one value). The parser loops over a chain
 * of binary operators, so enter does not bound this. */
static expr deeper(parser *p, expr r, uint32_t d, const token *t) {
  if (r.k == E_ERR || is_lit(&r)) {
    r.depth = 0;
    return r;
  }
  if (d > XPJ_MAX_EXPR_DEPTH) {
    error(p, t, "expression is too deep (%u operators nested, counting "
          "calls and subscripts; at most %d): split it into statements",
          d, XPJ_MAX_EXPR_DEPTH);
    return err_expr(t);
  }
  r.depth = d;
  return r;
}

static uint32_t max_u32(uint32_t a, uint32_t b) { return a > b ? a : b; }

/* An expression read inside the operand being read (parse_primary) */
static void note_inner(parser *p, const expr *e) {
  p->inner = max_u32(p->inner, e->depth + 1);
}

static expr parse_unary(parser *p);
static expr parse_binary(parser *p, int minprec);

/* The binary operators by punctuator, with their precedence (0: not
 * one; `&&` and `||` are logical's) */
static const struct {
  xpj_binop op;
  int prec;
} binops[P_COUNT] = {
    [P_PIPE] = {XPJ_OR, 3},   [P_CARET] = {XPJ_XOR, 4},
    [P_AMP] = {XPJ_AND, 5},   [P_EQ] = {XPJ_EQ, 6},
    [P_NE] = {XPJ_NE, 6},     [P_LT] = {XPJ_LT, 7},
    [P_LE] = {XPJ_LE, 7},     [P_GT] = {XPJ_GT, 7},
    [P_GE] = {XPJ_GE, 7},     [P_SHL] = {XPJ_SHL, 8},
    [P_SHR] = {XPJ_SHR, 8},   [P_PLUS] = {XPJ_ADD, 9},
    [P_MINUS] = {XPJ_SUB, 9}, [P_STAR] = {XPJ_MUL, 10},
    [P_SLASH] = {XPJ_DIV, 10}, [P_PERCENT] = {XPJ_REM, 10},
};

/* The integer type both of two concrete integer types convert to without
 * loss (i32 and i64: i64; u32 and i64: i64), or 0 when there is none
 * (i64 and u64; a type parameter; a float). */
static xpj_type widened(parser *p, xpj_type x, xpj_type y) {
  if (xpj_type_is_param(p->m, x) || xpj_type_is_param(p->m, y))
    return 0;
  int a = xpj_type_scalar_of(p->m, x), b = xpj_type_scalar_of(p->m, y);
  if (a < XPJ_I8 || a > XPJ_U64 || b < XPJ_I8 || b > XPJ_U64)
    return 0;
  bool sa = a <= XPJ_I64, sb = b <= XPJ_I64;
  unsigned wa = xpj_scalar_bits((xpj_scalar)a), wb = xpj_scalar_bits((xpj_scalar)b);
  if (wa < wb && (sa == sb || sb)) /* a fits in b */
    return y;
  if (wb < wa && (sa == sb || sa))
    return x;
  return 0;
}

/* Applies a binary operator, giving untyped literals the other side's
 * type. Integers of two types meet in the wider one where it holds every
 * value of both (`k < shape(x, 0)` with `let k = 0`: i32 widens to i64);
 * not for shifts, whose left side decides the type. */
static expr binop(parser *p, xpj_binop op, expr a, expr b, const token *optok) {
  if (a.k == E_ERR || b.k == E_ERR)
    return err_expr(optok);
  if (is_lit(&a) && is_lit(&b))
    return fold_lits(p, op, a, b, optok);
  if (!in_function(p, optok))
    return err_expr(optok);
  xpj_type t = typed(&a) ? typed(&a) : typed(&b);
  xpj_val l = rvalue(p, &a, is_lit(&a) ? t : 0);
  xpj_val r = rvalue(p, &b, is_lit(&b) ? t : 0);
  if (!l || !r)
    return err_expr(optok);
  xpj_type lt = xpj_val_type(p->f, l), rt = xpj_val_type(p->f, r);
  xpj_type w = op != XPJ_SHL && op != XPJ_SHR && lt != rt
                   ? widened(p, lt, rt) : 0;
  if (w && lt != w)
    l = xpj_b_cast(p->f, p->b, w, l, loc(p, optok));
  else if (w && rt != w)
    r = xpj_b_cast(p->f, p->b, w, r, loc(p, optok));
  if (!l || !r) {
    berror(p, optok);
    return err_expr(optok);
  }
  xpj_val v = xpj_b_binop(p->f, p->b, op, l, r, loc(p, optok));
  if (!v)
    berror(p, optok);
  return val_expr(p->f, v, a.tok);
}

/* a && b, a || b: short-circuit through a value-producing if. */
static expr logical(parser *p, bool is_and, expr a, const token *optok,
                    int rprec, uint32_t *bdepth) {
  if (!p->f) { /* a module constant's value: two bool constants */
    expr b = parse_binary(p, rprec);
    *bdepth = b.depth;
    if (a.k == E_ERR || b.k == E_ERR)
      return err_expr(optok);
    if (!is_lit(&a) || !is_lit(&b)) {
      in_function(p, optok); /* "not a constant expression" */
      return err_expr(optok);
    }
    if (!a.boolean || !b.boolean) {
      error(p, a.boolean ? b.tok : a.tok, "operands of '%s' must be bool",
            is_and ? "&&" : "||");
      return err_expr(optok);
    }
    return bool_lit(a.tok, is_and ? a.i && b.i : a.i || b.i,
                    a.gdep || b.gdep);
  }
  xpj_type bt = scalar_t(p, XPJ_BOOL);
  xpj_val c = a.k == E_ERR ? 0 : rvalue(p, &a, 0);
  char tb[96];
  if (c && xpj_val_type(p->f, c) != bt) {
    xpj_type_str_in(p->f, xpj_val_type(p->f, c), tb, sizeof tb);
    error(p, a.tok, "operands of '%s' must be bool, not %s",
          is_and ? "&&" : "||", tb);
    c = 0;
  }
  xpj_block tb_, eb_, saved = p->b;
  xpj_val ifv = c ? xpj_b_if(p->f, p->b, c, &tb_, &eb_, loc(p, optok)) : 0;
  if (c && !ifv)
    berror(p, optok);
  if (ifv)
    p->b = is_and ? tb_ : eb_;
  expr b = parse_binary(p, rprec);
  *bdepth = b.depth;
  if (!ifv) {
    p->b = saved;
    return err_expr(optok);
  }
  xpj_val rv = rvalue(p, &b, bt);
  xpj_val y1 = rv ? xpj_b_yield(p->f, p->b, rv, loc(p, b.tok)) : 0;
  p->b = is_and ? eb_ : tb_;
  xpj_val k = xpj_b_const_int(p->f, p->b, bt, is_and ? 0 : 1, loc(p, optok));
  xpj_val y2 = k ? xpj_b_yield(p->f, p->b, k, loc(p, optok)) : 0;
  p->b = saved;
  if (!y1 || !y2) {
    if (rv)
      berror(p, optok);
    return err_expr(optok);
  }
  if (a.boolean && b.boolean && is_lit(&a) && is_lit(&b)) /* still constant */
    return bool_lit(a.tok, is_and ? a.i && b.i : a.i || b.i, false);
  return val_expr(p->f, ifv, a.tok);
}

static expr parse_binary(parser *p, int minprec) {
  const token *start = peek(p);
  if (!enter(p, start))
    return err_expr(start);
  expr lhs = parse_unary(p);
  for (;;) {
    const token *t = peek(p);
    if (t->kind != TK_PUNCT)
      break;
    if (t->punct == P_OROR || t->punct == P_ANDAND) {
      int prec = t->punct == P_OROR ? 1 : 2;
      if (prec < minprec)
        break;
      next(p);
      uint32_t ld = lhs.depth, rd = 0;
      lhs = logical(p, t->punct == P_ANDAND, lhs, t, prec + 1, &rd);
      lhs = deeper(p, lhs, max_u32(ld, rd) + 1, t);
      continue;
    }
    int prec = t->punct < P_COUNT ? binops[t->punct].prec : 0;
    if (!prec || prec < minprec)
      break;
    next(p);
    expr rhs = parse_binary(p, prec + 1);
    uint32_t d = max_u32(lhs.depth, rhs.depth) + 1;
    lhs = deeper(p, binop(p, binops[t->punct].op, lhs, rhs, t), d, t);
  }
  leave(p);
  return lhs;
}

static expr parse_ternary(parser *p);

/* `c ? a : b` in a module constant's value (after the '?'): the arm the
 * constant c chooses; the two arms are a pair as in a function (4.4): of
 * one type, an integer literal beside a float one a float. */
static expr const_ternary(parser *p, expr c, const token *q) {
  expr a = parse_ternary(p);
  expect(p, P_COLON, "in conditional expression");
  expr b = parse_ternary(p);
  if (c.k == E_ERR || a.k == E_ERR || b.k == E_ERR)
    return err_expr(q);
  if (!is_lit(&c) || !is_lit(&a) || !is_lit(&b)) {
    in_function(p, q); /* "not a constant expression" */
    return err_expr(q);
  }
  if (!c.boolean) {
    error(p, c.tok, "condition of '?:' must be bool");
    return err_expr(q);
  }
  if (a.boolean != b.boolean ||
      (a.suffix && b.suffix && a.suffix != b.suffix)) {
    error(p, q, "the arms of '?:' have different types");
    return err_expr(q);
  }
  int s = a.suffix ? a.suffix : b.suffix;
  bool fl = a.k == E_LFLT || b.k == E_LFLT;
  if (fl && s && !xpj_scalar_float_valued(s)) {
    error(p, q, "floating-point literal cannot be used as %s without a cast",
          xpj_scalar_name((xpj_scalar)s));
    return err_expr(q);
  }
  expr r = c.i ? a : b;
  r.gdep = c.gdep || a.gdep || b.gdep;
  if (s && !r.boolean && !lit_fits(p, r.tok, s, &r)) /* rounds a float s */
    return err_expr(q);
  if (fl && r.k == E_LINT) { /* untyped: f64 */
    r.f = lit_float(&r, s);
    r.k = E_LFLT;
  }
  r.suffix = (uint8_t)s;
  return r;
}

static expr conditional(parser *p) {
  const token *start = peek(p);
  if (!enter(p, start))
    return err_expr(start);
  expr c = parse_binary(p, 1);
  if (!is_p(p, P_QUESTION)) {
    leave(p);
    return c;
  }
  const token *q = next(p);
  if (!p->f) {
    expr r = const_ternary(p, c, q);
    leave(p);
    return r;
  }
  xpj_val cv = c.k == E_ERR ? 0 : rvalue(p, &c, 0);
  char tb[96];
  if (cv && xpj_val_type(p->f, cv) != scalar_t(p, XPJ_BOOL)) {
    xpj_type_str_in(p->f, xpj_val_type(p->f, cv), tb, sizeof tb);
    error(p, c.tok, "condition of '?:' must be bool, not %s", tb);
    cv = 0;
  }
  xpj_block tb_ = 0, eb_ = 0, saved = p->b;
  xpj_val ifv = cv ? xpj_b_if(p->f, p->b, cv, &tb_, &eb_, loc(p, q)) : 0;
  if (cv && !ifv)
    berror(p, q);
  if (ifv)
    p->b = tb_;
  /* converted to a known type (parse_hinted): so are both arms */
  bool hinted = p->hint && p->hint_tok == start;
  if (hinted)
    p->hint_tok = peek(p);
  expr a = parse_ternary(p);
  xpj_block a_end = p->b;
  expect(p, P_COLON, "in conditional expression");
  if (ifv)
    p->b = eb_;
  if (hinted)
    p->hint_tok = peek(p);
  expr b = parse_ternary(p);
  if (hinted)
    p->hint_tok = start;
  xpj_block b_end = p->b;
  p->b = saved;
  leave(p);
  if (!ifv || a.k == E_ERR || b.k == E_ERR)
    return err_expr(q);
  xpj_type t = typed(&a) ? typed(&a) : typed(&b);
  if (!t && hinted) {
    t = p->hint; /* both literals, given the type they are converted to */
  } else if (is_lit(&a) && is_lit(&b)) {
    /* both literals: give both the default type of the pair: f64 beside
     * a float, else i32, or i64 when an arm needs it (as `let`'s) */
    if (a.k == E_LFLT || b.k == E_LFLT) {
      a.f = lit_float(&a, 0);
      b.f = lit_float(&b, 0);
      a.k = b.k = E_LFLT;
    } else if (!a.boolean && !b.boolean) {
      t = scalar_t(p, fits_i32(&a) && fits_i32(&b) ? XPJ_I32 : XPJ_I64);
    }
  }
  p->b = a_end;
  xpj_val av = rvalue(p, &a, is_lit(&a) ? t : 0);
  if (!t && av)
    t = xpj_val_type(p->f, av);
  xpj_val ya = av ? xpj_b_yield(p->f, p->b, av, loc(p, a.tok)) : 0;
  if (av && !ya)
    berror(p, a.tok);
  p->b = b_end;
  xpj_val bv = rvalue(p, &b, is_lit(&b) ? t : 0);
  xpj_val yb = bv ? xpj_b_yield(p->f, p->b, bv, loc(p, b.tok)) : 0;
  if (bv && !yb)
    berror(p, b.tok);
  p->b = saved;
  if (!ya || !yb)
    return err_expr(q);
  uint32_t d = max_u32(c.depth, max_u32(a.depth, b.depth)) + 1;
  return deeper(p, val_expr(p->f, ifv, c.tok), d, q);
}

/* Every expression, an argument's, a subscript's or a parenthesised one,
 * is read here: the operand that holds it is deeper (note_inner) */
static expr parse_ternary(parser *p) {
  expr r = conditional(p);
  note_inner(p, &r);
  return r;
}

static expr parse_expr(parser *p) { return parse_ternary(p); }

/* An expression whose value is converted to t (0: unknown): `let x: i64
 * = c ? -1 : 0;` gives both literals t, as `let x: i64 = -1;` does. */
static expr parse_hinted(parser *p, xpj_type t) {
  xpj_type saved = p->hint;
  const token *saved_tok = p->hint_tok;
  p->hint = t;
  p->hint_tok = peek(p);
  expr e = parse_expr(p);
  p->hint = saved;
  p->hint_tok = saved_tok;
  return e;
}

static expr parse_primary(parser *p);

static expr parse_unary(parser *p) {
  const token *t = peek(p);
  if (!enter(p, t))
    return err_expr(t);
  expr r;
  if (t->kind == TK_PUNCT &&
      (t->punct == P_MINUS || t->punct == P_BANG || t->punct == P_TILDE ||
       t->punct == P_PLUS)) {
    next(p);
    expr e = parse_unary(p);
    if (e.k == E_ERR) {
      r = e;
    } else if (t->punct == P_PLUS) {
      r = e;
    } else if (e.boolean && is_lit(&e) && t->punct == P_BANG) {
      r = bool_lit(t, e.i == 0, e.gdep);
    } else if (e.boolean && is_lit(&e)) {
      error(p, t, "operator '%s' cannot be applied to bool",
            xpj_punct_str((punct)t->punct));
      r = err_expr(t);
    } else if (is_lit(&e) &&
               bf16_operand(p, t, e.suffix, xpj_punct_str((punct)t->punct))) {
      r = err_expr(t);
    } else if ((t->punct == P_MINUS || t->punct == P_TILDE) &&
               e.k == E_LINT) {
      r = e;
      r.tok = t;
      r.big = false;
      __int128 w = lit_exact(&e);
      if (!exact_lit(p, &r, t->punct == P_MINUS ? -w : ~w, t))
        r = err_expr(t);
    } else if (t->punct == P_MINUS && e.k == E_LFLT) {
      r = e;
      r.f = -e.f;
      r.fdir = (int8_t)-e.fdir;
      r.tok = t;
    } else if (!in_function(p, t)) {
      r = err_expr(t);
    } else {
      xpj_val v = rvalue(p, &e, 0);
      xpj_unop op = t->punct == P_MINUS ? XPJ_NEG
                    : t->punct == P_BANG ? XPJ_LNOT
                                         : XPJ_NOT;
      xpj_val u = v ? xpj_b_unop(p->f, p->b, op, v, loc(p, t)) : 0;
      if (v && !u)
        berror(p, t);
      r = deeper(p, val_expr(p->f, u, t), e.depth + 1, t);
    }
  } else if (t->kind == TK_PUNCT && t->punct == P_AMP) {
    next(p);
    syntax(p, t, "'&' (address-of) is only allowed as the first argument of "
           "an atomic function");
    r = err_expr(t);
  } else if (t->kind == TK_PUNCT && (t->punct == P_INC || t->punct == P_DEC)) {
    syntax(p, t, "'%s' is only allowed as a statement (x%s;)",
           xpj_punct_str((punct)t->punct), xpj_punct_str((punct)t->punct));
    next(p);
    r = err_expr(t);
  } else {
    uint32_t outer = p->inner;
    p->inner = 0;
    r = parse_primary(p);
    p->inner = outer;
  }
  note_inner(p, &r); /* (parse_args reads an atomic's `&a[i]` here, not
                      * with parse_expr) */
  leave(p);
  return r;
}

/* Parses "[i, j, ...]" after an array expression. */
static expr parse_index(parser *p, expr arr) {
  const token *lb = next(p); /* '[' */
  xpj_val idx[XPJ_MAX_RANK];
  unsigned n = 0;
  bool ok = arr.k != E_ERR;
  char nb[256];
  if (ok && arr.k != E_ARR) {
    error(p, arr.tok, "only arrays can be indexed");
    ok = false;
  }
  xpj_type i64 = p->f ? scalar_t(p, XPJ_I64) : 0;
  do {
    const token *it = peek(p);
    expr e = parse_expr(p);
    if (n == XPJ_MAX_RANK) {
      error(p, it, "too many subscripts (at most %d)", XPJ_MAX_RANK);
      ok = false;
      continue;
    }
    xpj_val v = 0;
    if (ok && p->f)
      v = rvalue(p, &e, is_lit(&e) ? i64 : 0);
    if (!v)
      ok = false;
    idx[n++] = v;
  } while (accept(p, P_COMMA));
  expect(p, P_RBRACKET, "after subscripts");
  if (!ok || !in_function(p, lb))
    return err_expr(lb);
  xpj_val ptr = xpj_b_index(p->f, p->b, arr.v, n, idx, loc(p, lb));
  if (!ptr) {
    if (arr.name && p->m->errmsg[0] && !p->m->oom) {
      error(p, lb, "'%s': %s", tok_str(p, arr.name, nb), p->m->errmsg);
      p->m->errmsg[0] = 0;
    }
    berror(p, lb);
    return err_expr(lb);
  }
  expr r = {0};
  r.k = E_PTR;
  r.v = ptr;
  r.t = xpj_typeinfo_of(p->m, xpj_val_type(p->f, ptr))->elem;
  r.tok = arr.tok;
  r.name = arr.name;
  r.mut = arr.mut == MUT_RDONLY ? MUT_RDONLY : MUT_OK;
  return r;
}

/* Parses a parenthesised argument list into exprs (not materialised). */
static int parse_args(parser *p, expr *args, int max, const token *callee) {
  int n = 0;
  expect(p, P_LPAREN, "to begin arguments");
  if (accept(p, P_RPAREN))
    return 0;
  do {
    const token *t = peek(p);
    expr e;
    if (is_p(p, P_AMP)) {
      next(p);
      e = parse_unary(p);
      if (e.k != E_ERR && e.k != E_PTR) {
        error(p, t, "'&' needs an array element, e.g. &a[i]");
        e = err_expr(t);
      } else if (e.k == E_PTR) {
        e.k = E_VAL; /* the pointer itself */
        e.t = xpj_val_type(p->f, e.v);
        e.is_call = true; /* marks "address taken" */
        e.mut = MUT_TEMP;
      }
      e.tok = t;
    } else {
      e = parse_expr(p);
    }
    if (n < max)
      args[n] = e;
    n++;
  } while (accept(p, P_COMMA));
  expect(p, P_RPAREN, "after arguments");
  if (n > max) {
    char nb[256];
    error(p, callee, "too many arguments to '%s'", tok_str(p, callee, nb));
    return -1;
  }
  return n;
}

static const char *const order_names[] = {"relaxed", "acquire", "release",
                                          "acq_rel", "seq_cst"};
static const char *const scope_names[] = {"work_group", "device"};

static bool is_order_or_scope_name(const parser *p, const token *t) {
  if (t->kind != TK_IDENT)
    return false;
  for (int i = 0; i < 5; i++)
    if (tok_is(p, t, order_names[i]))
      return true;
  for (int i = 0; i < 2; i++)
    if (tok_is(p, t, scope_names[i]))
      return true;
  return false;
}

static bool addr_arg(const expr *e) { return e->k == E_VAL && e->is_call; }

/* atomic_*(&p, values..., [order], [scope]) */
static expr parse_atomic(parser *p, const token *name) {
  static const struct {
    const char *n;
    int op; /* xpj_atomic_op, or -1 cmpxchg, -2 load, -3 store */
    int nvals;
  } tbl[] = {{"atomic_add", XPJ_ATOMIC_ADD, 1},   {"atomic_sub", XPJ_ATOMIC_SUB, 1},
             {"atomic_min", XPJ_ATOMIC_MIN, 1},   {"atomic_max", XPJ_ATOMIC_MAX, 1},
             {"atomic_and", XPJ_ATOMIC_AND, 1},   {"atomic_or", XPJ_ATOMIC_OR, 1},
             {"atomic_xor", XPJ_ATOMIC_XOR, 1},   {"atomic_xchg", XPJ_ATOMIC_XCHG, 1},
             {"atomic_cmpxchg", -1, 2},           {"atomic_load", -2, 0},
             {"atomic_store", -3, 1}};
  int k = -1;
  for (int i = 0; i < (int)(sizeof tbl / sizeof *tbl); i++)
    if (tok_is(p, name, tbl[i].n))
      k = i;
  char nb[256];
  const char *fname = tok_str(p, name, nb);
  expect(p, P_LPAREN, "to begin arguments");
  expr args[3];
  int n = 0;
  xpj_order order = XPJ_ORDER_RELAXED;
  xpj_scope scope = XPJ_SCOPE_DEVICE;
  int nmem = 0;
  bool bad = false;
  if (!accept(p, P_RPAREN)) {
    do {
      const token *t = peek(p);
      /* after the values an order or a scope (a variable of that name
       * cannot be an argument there: 2.4); before, a variable wins */
      if (is_order_or_scope_name(p, t) &&
          (n >= 1 + tbl[k].nvals || !lookup(p, t)) &&
          (peek_at(p, 1)->kind == TK_PUNCT &&
           (peek_at(p, 1)->punct == P_COMMA || peek_at(p, 1)->punct == P_RPAREN))) {
        next(p);
        bool is_scope = tok_is(p, t, "work_group") || tok_is(p, t, "device");
        if (n != 1 + tbl[k].nvals) {
          error(p, t, "%s takes the address and %d value%s before the memory "
                "order", fname, tbl[k].nvals, tbl[k].nvals == 1 ? "" : "s");
          bad = true;
        } else if (is_scope) {
          if (nmem == 2) {
            error(p, t, "%s: memory scope given twice", fname);
            bad = true;
          }
          scope = tok_is(p, t, "device") ? XPJ_SCOPE_DEVICE
                                         : XPJ_SCOPE_WORK_GROUP;
          nmem = 2;
        } else {
          if (nmem) {
            error(p, t, "%s: the memory order comes before the scope", fname);
            bad = true;
          }
          for (int i = 0; i < 5; i++)
            if (tok_is(p, t, order_names[i]))
              order = (xpj_order)i;
          nmem = 1;
        }
        continue;
      }
      if (nmem) {
        syntax(p, t, "%s: expected a memory order (relaxed, acquire, release, "
               "acq_rel, seq_cst) or scope (work_group, device)", fname);
        bad = true;
      }
      expr e;
      if (n == 0) {
        if (!is_p(p, P_AMP)) {
          error(p, t, "the first argument of %s must be the address of an "
                "array element, e.g. &a[i]", fname);
          bad = true;
          e = parse_expr(p);
        } else {
          next(p);
          e = parse_unary(p);
          if (e.k == E_PTR) {
            e.k = E_VAL;
            e.t = xpj_val_type(p->f, e.v);
            e.is_call = true;
          } else if (e.k != E_ERR) {
            error(p, t, "'&' needs an array element, e.g. &a[i]");
            e = err_expr(t);
          }
          e.tok = t;
        }
      } else {
        e = parse_expr(p);
      }
      if (n < 3)
        args[n] = e;
      else if (!bad) {
        error(p, t, "too many arguments to %s", fname);
        bad = true;
      }
      n++;
    } while (accept(p, P_COMMA));
    expect(p, P_RPAREN, "after arguments");
  }
  if (bad || !in_function(p, name))
    return err_expr(name);
  if (n != 1 + tbl[k].nvals) {
    error(p, name, "%s takes %d argument%s (the address%s), plus an optional "
          "memory order and scope; got %d", fname, 1 + tbl[k].nvals,
          tbl[k].nvals ? "s" : "", tbl[k].nvals == 2 ? ", expected, desired"
          : tbl[k].nvals ? " and a value" : "", n);
    return err_expr(name);
  }
  for (int i = 0; i < n; i++)
    if (args[i].k == E_ERR)
      return err_expr(name);
  if (!addr_arg(&args[0]))
    return err_expr(name);
  xpj_val ptr = args[0].v;
  xpj_type et = xpj_typeinfo_of(p->m, xpj_val_type(p->f, ptr))->elem;
  if (args[0].mut == MUT_RDONLY && tbl[k].op != -2) {
    char ab[256];
    error(p, args[0].tok, "%s on an element of read-only array '%s'", fname,
          args[0].name ? tok_str(p, args[0].name, ab) : "?");
    return err_expr(name);
  }
  xpj_val vals[2] = {0, 0};
  for (int i = 1; i < n; i++) {
    vals[i - 1] = rvalue(p, &args[i], et);
    if (!vals[i - 1])
      return err_expr(name);
  }
  xpj_loc l = loc(p, name);
  xpj_val r;
  switch (tbl[k].op) {
  case -1:
    r = xpj_b_cmpxchg(p->f, p->b, ptr, vals[0], vals[1], order, scope, l);
    break;
  case -2:
    r = xpj_b_atomic_load(p->f, p->b, ptr, order, scope, l);
    break;
  case -3:
    r = xpj_b_atomic_store(p->f, p->b, ptr, vals[0], order, scope, l);
    break;
  default:
    r = xpj_b_atomic(p->f, p->b, (xpj_atomic_op)tbl[k].op, ptr, vals[0], order,
                     scope, l);
  }
  if (!r) {
    berror(p, name);
    return err_expr(name);
  }
  expr e = val_expr(p->f, r, name);
  e.is_call = true;
  if (tbl[k].op == -3)
    e.k = E_VOID;
  return e;
}

/* barrier(), barrier(local), barrier(global), barrier(local, global) */
static expr parse_barrier(parser *p, const token *name) {
  expect(p, P_LPAREN, "after 'barrier'");
  unsigned fences = 0;
  if (!is_p(p, P_RPAREN)) {
    do {
      const token *t = peek(p);
      unsigned fl = is_k(p, TK_KW_LOCAL) ? XPJ_FENCE_LOCAL
                    : is_k(p, TK_KW_GLOBAL) ? XPJ_FENCE_GLOBAL
                                            : 0;
      if (fl && (fences & fl)) {
        char b[48];
        syntax(p, t, "fence %s given twice", tok_text(p, t, b));
        return err_expr(name);
      }
      fences |= fl;
      if (!fl) {
        char b[48];
        syntax(p, t, "barrier takes 'local' and/or 'global' fences, found %s",
               tok_text(p, t, b));
        return err_expr(name);
      }
      next(p);
    } while (accept(p, P_COMMA));
  }
  expect(p, P_RPAREN, "after barrier fences");
  if (fences == 0)
    fences = XPJ_FENCE_LOCAL | XPJ_FENCE_GLOBAL;
  if (!in_function(p, name))
    return err_expr(name);
  xpj_val v = xpj_b_barrier(p->f, p->b, fences, loc(p, name));
  if (!v) {
    berror(p, name);
    return err_expr(name);
  }
  expr e = val_expr(p->f, v, name);
  e.k = E_VOID;
  e.is_call = true;
  return e;
}

static int wi_lookup(const parser *p, const token *t) {
  for (int i = 0; i < XPJ_WI_COUNT; i++)
    if (tok_is(p, t, xpj_wi_name((xpj_wi)i)))
      return i;
  return -1;
}

static expr parse_wi(parser *p, const token *name, xpj_wi w) {
  expr args[2];
  char nb[256];
  int n = parse_args(p, args, 2, name);
  if (n < 0)
    return err_expr(name);
  int want = xpj_wi_needs_dim(w) ? 1 : 0;
  if (n != want) {
    error(p, name, "%s() takes %s", tok_str(p, name, nb),
          want ? "one argument, the dimension (0, 1 or 2)" : "no arguments");
    return err_expr(name);
  }
  unsigned dim = 0;
  if (want) {
    int64_t d;
    if (args[0].k == E_ERR)
      return err_expr(name);
    if (generic_dep(p, &args[0])) {
      d = 0; /* checked when the const parameters are bound */
    } else if (!const_int_of(p, &args[0], &d)) {
      error(p, args[0].tok, "the dimension of %s() must be an integer "
            "constant (0, 1 or 2)", tok_str(p, name, nb));
      return err_expr(name);
    }
    if (d < 0 || d > 2) {
      char db[32];
      error(p, args[0].tok, "dimension %s is out of range (0, 1 or 2)",
            const_int_text(p, &args[0], d, db, sizeof db));
      return err_expr(name);
    }
    dim = (unsigned)d;
  }
  if (!in_function(p, name))
    return err_expr(name);
  xpj_val v = xpj_b_wi(p->f, p->b, w, dim, loc(p, name));
  if (!v)
    berror(p, name);
  return val_expr(p->f, v, name);
}

static expr parse_array_query(parser *p, const token *name) {
  expr args[2];
  char nb[256];
  const char *fn = tok_str(p, name, nb);
  bool two = tok_is(p, name, "shape") || tok_is(p, name, "stride");
  int n = parse_args(p, args, 2, name);
  if (n < 0)
    return err_expr(name);
  if (n != (two ? 2 : 1)) {
    error(p, name, "%s() takes %s", fn,
          two ? "an array and a dimension" : "one array");
    return err_expr(name);
  }
  if (args[0].k == E_ERR || (two && args[1].k == E_ERR))
    return err_expr(name);
  if (args[0].k != E_ARR) {
    error(p, args[0].tok, "%s() needs an array", fn);
    return err_expr(name);
  }
  if (!in_function(p, name))
    return err_expr(name);
  xpj_loc l = loc(p, name);
  xpj_val v;
  /* an extent of a static array that depends on unbound const
   * parameters: sized by them, or a dimension that is one */
  bool opaque = args[0].deferred && !tok_is(p, name, "ndim");
  if (two) {
    bool gdim = xpj_typeinfo_of(p->m, args[0].t)->kind == XPJ_TK_STATIC &&
                generic_dep(p, &args[1]);
    xpj_val d = rvalue(p, &args[1], is_lit(&args[1]) ? scalar_t(p, XPJ_I64) : 0);
    if (!d)
      return err_expr(name);
    if (gdim) {
      opaque = true;
      v = d;
    } else {
      v = tok_is(p, name, "shape") ? xpj_b_shape(p->f, p->b, args[0].v, d, l)
                                   : xpj_b_stride(p->f, p->b, args[0].v, d, l);
    }
  } else {
    v = tok_is(p, name, "size") ? xpj_b_size(p->f, p->b, args[0].v, l)
                                : xpj_b_ndim(p->f, p->b, args[0].v, l);
  }
  if (!v)
    berror(p, name);
  else if (opaque)
    v = xpj_ir_cparam(p->f, p->b, XPJ_CPARAM_DERIVED, scalar_t(p, XPJ_I64), l);
  return val_expr(p->f, v, name);
}

/* Materialises call arguments: the type of the first typed argument is
 * given to literal arguments (math builtins). */
static bool uniform_args(parser *p, expr *args, int n, xpj_val *out,
                         bool float_default) {
  xpj_type t = 0;
  for (int i = 0; i < n && !t; i++)
    t = typed(&args[i]);
  for (int i = 0; i < n; i++)
    if (args[i].k == E_ERR)
      return false;
  if (!t && float_default)
    t = scalar_t(p, XPJ_F64);
  for (int i = 0; i < n; i++) {
    out[i] = rvalue(p, &args[i], is_lit(&args[i]) ? t : 0);
    if (!out[i])
      return false;
    if (!t)
      t = xpj_val_type(p->f, out[i]);
  }
  return true;
}

static expr parse_math(parser *p, const token *name, xpj_math fn) {
  expr args[3];
  xpj_val vals[3];
  int n = parse_args(p, args, 3, name);
  if (n < 0 || !in_function(p, name))
    return err_expr(name);
  if ((unsigned)n != xpj_math_arity(fn)) {
    unsigned a = xpj_math_arity(fn);
    error(p, name, "%s() takes %u argument%s, got %d", xpj_math_name(fn), a,
          a == 1 ? "" : "s", n);
    return err_expr(name);
  }
  /* integer-only functions keep integer literals; others default to f64 */
  bool int_fn = fn == XPJ_MATH_MIN || fn == XPJ_MATH_MAX ||
                fn == XPJ_MATH_CLAMP || fn == XPJ_MATH_ABS ||
                fn >= XPJ_MATH_POPCOUNT;
  bool all_int_lits = true;
  for (int i = 0; i < n; i++)
    if (args[i].k != E_LINT)
      all_int_lits = false;
  if (!uniform_args(p, args, n, vals, !(int_fn && all_int_lits)))
    return err_expr(name);
  xpj_val v = xpj_b_math(p->f, p->b, fn, (unsigned)n, vals, loc(p, name));
  if (!v)
    berror(p, name);
  return val_expr(p->f, v, name);
}

/* group_reduce_add(x), sub_group_shuffle(x, lane), ... */
static expr parse_group(parser *p, const token *name, const xpj_coll_desc *d) {
  expr args[2];
  char nb[256];
  int n = parse_args(p, args, 2, name);
  if (n < 0 || !in_function(p, name))
    return err_expr(name);
  int want = xpj_coll_takes_id(d) ? 2 : 1;
  if (n != want) {
    error(p, name, "%s() takes %s", tok_str(p, name, nb),
          want == 2 ? (d->kind == XPJ_COLL_SHUFFLE_XOR
                           ? "a value and a lane mask"
                       : d->sub_group ? "a value and a lane"
                                      : "a value and a local linear id")
                    : "one value");
    return err_expr(name);
  }
  for (int i = 0; i < n; i++)
    if (args[i].k == E_ERR)
      return err_expr(name);
  /* an untyped literal value takes its default type; an id, i64 */
  xpj_val x = rvalue(p, &args[0], 0);
  xpj_val id = 0;
  if (x && want == 2)
    id = rvalue(p, &args[1], is_lit(&args[1]) ? scalar_t(p, XPJ_I64) : 0);
  if (!x || (want == 2 && !id))
    return err_expr(name);
  xpj_val v = xpj_b_group(p->f, p->b, d, x, id, loc(p, name));
  if (!v)
    berror(p, name);
  return val_expr(p->f, v, name);
}

/* max_value(T), epsilon(f32), ...: the argument is a type. */
static expr parse_limit(parser *p, const token *name, xpj_limit which) {
  if (!expect(p, P_LPAREN, "to begin arguments"))
    return err_expr(name);
  xpj_type t = parse_elem_type(p);
  if (!expect(p, P_RPAREN, "after the type") || !t ||
      !in_function(p, name))
    return err_expr(name);
  xpj_val v = xpj_b_limit(p->f, p->b, which, t, loc(p, name));
  if (!v)
    berror(p, name);
  return val_expr(p->f, v, name);
}

/* Binds callee type parameters by matching parameter type pt against
 * argument type at. */
static bool unify(parser *p, xpj_type pt, xpj_type at, xpj_type *bind) {
  const xpj_typeinfo *pi = xpj_typeinfo_of(p->m, pt);
  const xpj_typeinfo *ai = xpj_typeinfo_of(p->m, at);
  if (pi->kind == XPJ_TK_PARAM) {
    if (ai->kind != XPJ_TK_SCALAR && ai->kind != XPJ_TK_PARAM)
      return false;
    if (!bind[pi->param])
      bind[pi->param] = at;
    return bind[pi->param] == at;
  }
  if (pi->kind == XPJ_TK_VIEW && ai->kind == XPJ_TK_VIEW)
    return pi->rank == ai->rank && unify(p, pi->elem, ai->elem, bind);
  return true; /* checked exactly by the builder */
}

static expr parse_user_call(parser *p, const token *name, fn_info *fi) {
  expr args[XPJ_MAX_PARAMS];
  char nb[256], tb[96];
  int n = parse_args(p, args, XPJ_MAX_PARAMS, name);
  if (n < 0 || !in_function(p, name))
    return err_expr(name);
  xpj_func *callee = fi->f;
  const char *fn = tok_str(p, name, nb);
  if (!callee)
    return err_expr(name);
  if (callee->kind != XPJ_FUNC_DEVICE) {
    error(p, name, "'%s' is a kernel; kernels cannot be called", fn);
    return err_expr(name);
  }
  if ((unsigned)n != callee->nparams) {
    error(p, name, "'%s' takes %u argument%s, got %d", fn, callee->nparams,
          callee->nparams == 1 ? "" : "s", n);
    return err_expr(name);
  }
  for (int i = 0; i < n; i++)
    if (args[i].k == E_ERR)
      return err_expr(name);
  /* infer type arguments from typed arguments */
  xpj_type bind[XPJ_MAX_TPARAMS] = {0};
  for (int i = 0; i < n; i++) {
    xpj_type at = args[i].k == E_ARR ? args[i].t : typed(&args[i]);
    if (at && !unify(p, callee->params[i].type, at, bind)) {
      char want[96];
      xpj_type_str_in(callee, callee->params[i].type, want, sizeof want);
      xpj_type_str_in(p->f, at, tb, sizeof tb);
      error(p, args[i].tok, "argument %d of '%s' has type %s, which does not "
            "match %s", i + 1, fn, tb, want);
      return err_expr(name);
    }
  }
  /* type parameters only bound by literals take the literal's default */
  for (int i = 0; i < n; i++) {
    const xpj_typeinfo *pi = xpj_typeinfo_of(p->m, callee->params[i].type);
    if (pi->kind == XPJ_TK_PARAM && !bind[pi->param] && is_lit(&args[i]))
      bind[pi->param] = scalar_t(p, args[i].k == E_LFLT ? XPJ_F64 : XPJ_I32);
  }
  for (unsigned k = 0; k < callee->ntparams; k++)
    if (!bind[k]) {
      error(p, name, "cannot infer type parameter '%s' of '%s' from the "
            "arguments", callee->tparams[k], fn);
      return err_expr(name);
    }
  xpj_val vals[XPJ_MAX_PARAMS];
  for (int i = 0; i < n; i++) {
    if (args[i].k == E_ARR) {
      vals[i] = args[i].v;
      continue;
    }
    xpj_type want = xpj_type_subst(p->m, callee->params[i].type,
                                   callee->ntparams, bind);
    vals[i] = rvalue(p, &args[i], is_lit(&args[i]) ? want : 0);
    if (!vals[i])
      return err_expr(name);
  }
  xpj_val v = xpj_b_call(p->f, p->b, callee, callee->ntparams, bind,
                         (unsigned)n, vals, loc(p, name));
  if (!v) {
    berror(p, name);
    return err_expr(name);
  }
  expr e = val_expr(p->f, v, name);
  e.is_call = true;
  if (xpj_type_scalar_of(p->m, xpj_val_type(p->f, v)) == XPJ_VOID)
    e.k = E_VOID;
  return e;
}

/* f32(x), i64(C) in a module constant's value (3.3): x a literal, untyped
 * or suffixed, or a constant; the cast a function's would give, folded. An
 * untyped literal becomes the type as it does in a `let` (its value must
 * fit); a typed value is converted as at run time (integers wrap, floats
 * round once), except that a float beyond the integer type's range, whose
 * cast has no defined value (11.2), is an error here. */
static expr fold_cast(parser *p, const token *name, int ts, expr a) {
  const char *tn = xpj_scalar_name((xpj_scalar)ts);
  expr r = a;
  r.tok = name;
  r.depth = 0;
  if (ts == XPJ_BOOL) {
    bool v = a.k == E_LFLT ? a.f != 0 : a.i != 0;
    return bool_lit(name, v, a.gdep);
  }
  if (a.boolean) { /* bool(...) to a number: 0 or 1 */
    r.boolean = false;
    r.suffix = (uint8_t)ts;
    r.k = xpj_scalar_float_valued(ts) ? E_LFLT : E_LINT;
    r.f = (double)a.i;
    return r;
  }
  if (!a.suffix && (a.k == E_LINT || xpj_scalar_float_valued(ts))) {
    if (!lit_fits(p, name, ts, &r)) /* an untyped literal, as in a let */
      return err_expr(name);
    r.suffix = (uint8_t)ts;
    return r;
  }
  r.suffix = (uint8_t)ts;
  r.fdir = 0;
  if (a.k == E_LINT) { /* a typed integer */
    if (xpj_scalar_float_valued(ts)) {
      r.k = E_LFLT;
      r.f = xpj_float_of_int(ts, a.i, a.suffix == XPJ_U64);
    } else {
      r.i = wrap_to((xpj_scalar)ts, lit_exact(&a));
      r.big = ts == XPJ_U64 && (uint64_t)r.i > INT64_MAX;
    }
    return r;
  }
  if (xpj_scalar_float_valued(ts)) { /* a typed float, or f64 */
    r.f = xpj_float_round(ts, a.f);
    return r;
  }
  /* a float to an integer type: truncated, within the type's range */
  double t = trunc(a.f);
  bool is_u = ts >= XPJ_U8 && ts <= XPJ_U64;
  double lo = is_u ? 0 : -ldexp(1.0, (int)xpj_scalar_bits((xpj_scalar)ts) - 1),
         hi = ldexp(1.0, (int)xpj_scalar_bits((xpj_scalar)ts) - !is_u);
  if (!(t >= lo && t < hi)) {
    error(p, name, "floating-point constant %g is out of range for %s: its "
          "cast has no defined value", a.f, tn);
    return err_expr(name);
  }
  r.k = E_LINT;
  r.i = is_u ? (int64_t)(uint64_t)t : (int64_t)t;
  r.big = ts == XPJ_U64 && (uint64_t)r.i > INT64_MAX;
  return r;
}

/* T(x), f32(x): explicit conversion. */
static expr parse_cast(parser *p, const token *name, xpj_type to) {
  expr args[1];
  int n = parse_args(p, args, 1, name);
  if (n < 0)
    return err_expr(name);
  if (n != 1) {
    syntax(p, name, "a cast takes exactly one value");
    return err_expr(name);
  }
  if (args[0].k == E_ERR)
    return err_expr(name);
  if (!p->f && is_lit(&args[0]) && !xpj_type_is_param(p->m, to))
    return fold_cast(p, name, xpj_type_scalar_of(p->m, to), args[0]);
  if (!in_function(p, name))
    return err_expr(name);
  int ts = xpj_type_scalar_of(p->m, to);
  xpj_val v;
  if ((args[0].k == E_LINT && ts != XPJ_BOOL) ||
      (args[0].k == E_LFLT && (xpj_scalar_float_valued(ts) ||
                               xpj_type_is_param(p->m, to)))) {
    v = lit_value(p, &args[0], to);
    if (v && xpj_type_is_param(p->m, to) &&
        p->f->insts[v].op == XPJ_OP_CONST) /* converted when T is bound */
      p->f->insts[v].order = XPJ_CONST_CAST;
  } else {
    xpj_val x = rvalue(p, &args[0], 0);
    if (!x)
      return err_expr(name);
    v = xpj_b_cast(p->f, p->b, to, x, loc(p, name));
    if (!v)
      berror(p, name);
  }
  return val_expr(p->f, v, name);
}

static expr parse_call(parser *p, const token *name) {
  char nb[256];
  int tp = tparam_index(p, name);
  if (tp >= 0)
    return parse_cast(p, name, xpj_type_param(p->m, (unsigned)tp));
  if (lookup(p, name) || lookup_cparam(p, name)) {
    error(p, name, "'%s' is a %s, not a function", tok_str(p, name, nb),
          lookup(p, name) ? "variable" : "const parameter");
    expr dummy[XPJ_MAX_PARAMS];
    parse_args(p, dummy, XPJ_MAX_PARAMS, name);
    return err_expr(name);
  }
  int w = wi_lookup(p, name);
  if (w >= 0)
    return parse_wi(p, name, (xpj_wi)w);
  if (tok_is(p, name, "shape") || tok_is(p, name, "stride") ||
      tok_is(p, name, "size") || tok_is(p, name, "ndim"))
    return parse_array_query(p, name);
  if (name->len > 7 && memcmp(p->src + name->off, "atomic_", 7) == 0) {
    static const char *const ok[] = {"atomic_add", "atomic_sub", "atomic_min",
                                     "atomic_max", "atomic_and", "atomic_or",
                                     "atomic_xor", "atomic_xchg",
                                     "atomic_cmpxchg", "atomic_load",
                                     "atomic_store"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
      if (tok_is(p, name, ok[i]))
        return parse_atomic(p, name);
  }
  if (tok_is(p, name, "barrier"))
    return parse_barrier(p, name);
  xpj_math mf = xpj_math_lookup(tok_str(p, name, nb));
  if (mf != XPJ_MATH_COUNT)
    return parse_math(p, name, mf);
  xpj_limit lim = xpj_limit_lookup(nb);
  if (lim != XPJ_LIMIT_COUNT)
    return parse_limit(p, name, lim);
  xpj_coll_desc cd;
  if (xpj_coll_lookup(nb, &cd))
    return parse_group(p, name, &cd);
  fn_info *fi = lookup_fn(p, name);
  if (fi)
    return parse_user_call(p, name, fi);
  error(p, name, "unknown function '%s'", nb);
  expr dummy[XPJ_MAX_PARAMS];
  parse_args(p, dummy, XPJ_MAX_PARAMS, name);
  return err_expr(name);
}

static expr parse_name(parser *p, const token *name) {
  char nb[256];
  sym *s = lookup(p, name);
  expr e = {0};
  e.tok = name;
  e.name = name;
  if (s) {
    switch (s->k) {
    case S_VAR:
      e.k = E_PTR;
      e.v = s->v;
      e.t = s->t;
      e.mut = MUT_OK;
      return e;
    case S_VAL:
      if (!s->v) { /* its definition was in error (reported) */
        e.k = E_ERR;
        return e;
      }
      e.k = E_VAL;
      e.v = s->v;
      e.t = s->t;
      e.mut = s->mut;
      return e;
    case S_LIT:
      e.k = s->litk;
      e.i = s->i;
      e.f = s->f;
      e.fdir = s->fdir;
      e.big = s->big;
      e.boolean = s->boolean;
      e.mut = MUT_CONST;
      return e;
    case S_ARRAY:
      e.k = E_ARR;
      e.v = s->v;
      e.t = s->t;
      e.mut = s->mut;
      e.deferred = s->deferred;
      return e;
    }
  }
  const cparam *cp = lookup_cparam(p, name);
  if (cp) {
    e.mut = MUT_CONST;
    xpj_type t = scalar_t(p, (xpj_scalar)cp->scalar);
    if (!cp->bound) {
      if (!p->f) { /* `local(TS)`: a placeholder, checked when bound */
        e.k = E_LINT;
        e.i = 1;
        e.boolean = cp->scalar == XPJ_BOOL;
        e.gdep = true;
        return e;
      }
      e = val_expr(p->f, xpj_ir_cparam(p->f, p->b, cp->index, t,
                                       loc(p, name)), name);
    } else {
      /* bound: exactly a typed module constant of that value */
      e.k = E_LINT;
      e.i = cp->value;
      e.boolean = cp->scalar == XPJ_BOOL;
      e.big = cp->scalar == XPJ_U64 && (uint64_t)cp->value > INT64_MAX;
      if (!p->f)
        return e;
      expr lit = e;
      e = val_expr(p->f, lit_value(p, &lit, t), name);
    }
    e.name = name;
    e.mut = MUT_CONST;
    return e;
  }
  bool reported;
  mconst *c = resolve_const(p, name, &reported);
  if (reported)
    return err_expr(name);
  if (c) {
    e.mut = MUT_CONST;
    e.k = c->litk;
    e.i = c->i;
    e.f = c->f;
    e.fdir = c->fdir;
    e.big = c->big;
    e.boolean = c->boolean;
    if (!p->f && !c->boolean)
      e.suffix = (uint8_t)c->scalar; /* in another constant: its type's */
    if (c->scalar == XPJ_VOID || !p->f)
      return e;
    xpj_type t = scalar_t(p, (xpj_scalar)c->scalar);
    expr lit = e;
    xpj_val v = lit_value(p, &lit, t);
    e = val_expr(p->f, v, name);
    e.name = name;
    e.mut = MUT_CONST;
    return e;
  }
  if (lookup_fn(p, name))
    error(p, name, "'%s' is a function; call it with (...)",
          tok_str(p, name, nb));
  else if (tparam_index(p, name) >= 0)
    error(p, name, "type '%s' used as a value (a cast is written %s(x))",
          tok_str(p, name, nb), nb);
  else if (wi_lookup(p, name) >= 0 || xpj_math_lookup(tok_str(p, name, nb)) !=
                                          XPJ_MATH_COUNT)
    error(p, name, "builtin '%s' must be called", tok_str(p, name, nb));
  else
    error(p, name, "unknown name '%s'", tok_str(p, name, nb));
  return err_expr(name);
}

/* A token that closes what an expression is part of: not skipped over
 * when the expression is missing */
static bool ends_something(const token *t) {
  if (t->kind != TK_PUNCT)
    return false;
  switch (t->punct) {
  case P_SEMI: case P_RBRACE: case P_RPAREN: case P_RBRACKET: case P_COMMA:
    return true;
  default:
    return false;
  }
}

static expr parse_primary(parser *p) {
  const token *t = peek(p);
  char b[48];
  expr e;
  switch (t->kind) {
  case TK_INT:
  case TK_FLOAT:
    next(p);
    e = err_expr(t);
    if (t->bad) /* reported by the lexer */
      return e;
    if (t->suffix == XPJ_VOID) {
      e.k = t->kind == TK_INT ? E_LINT : E_LFLT;
      if (t->kind == TK_INT)
        e.i = (int64_t)t->val.u;
      else
        e.f = t->val.f, e.fdir = t->fdir;
      e.mut = MUT_TEMP;
      e.big = t->kind == TK_INT && t->val.u > (uint64_t)INT64_MAX;
      break;
    }
    if (t->kind == TK_FLOAT && !xpj_scalar_float_valued(t->suffix)) {
      error(p, t, "floating-point literal with integer suffix");
      break;
    }
    if (!p->f) { /* module constant: a literal that remembers its suffix */
      e.k = t->kind == TK_INT ? E_LINT : E_LFLT;
      e.i = (int64_t)t->val.u;
      e.f = t->kind == TK_INT ? (double)t->val.u : t->val.f;
      e.fdir = t->kind == TK_INT ? 0 : t->fdir;
      e.big = t->kind == TK_INT && t->val.u > (uint64_t)INT64_MAX;
      if (!lit_fits(p, t, t->suffix, &e)) /* as in a function */
        return err_expr(t);
      e.suffix = t->suffix;
      break;
    }
    {
      expr lit = e;
      lit.k = t->kind == TK_INT ? E_LINT : E_LFLT;
      lit.i = (int64_t)t->val.u;
      lit.f = t->val.f;
      lit.fdir = t->kind == TK_INT ? 0 : t->fdir;
      e = val_expr(p->f, lit_value(p, &lit, scalar_t(p, (xpj_scalar)t->suffix)),
                   t);
    }
    break;
  case TK_KW_TRUE:
  case TK_KW_FALSE:
    next(p);
    if (!p->f) { /* module constant */
      e = err_expr(t);
      e.k = E_LINT;
      e.boolean = true;
      e.i = t->kind == TK_KW_TRUE;
      break;
    }
    e = val_expr(p->f,
                 xpj_b_const_int(p->f, p->b, scalar_t(p, XPJ_BOOL),
                                 t->kind == TK_KW_TRUE, loc(p, t)),
                 t);
    break;
  case TK_PUNCT:
    if (t->punct == P_LPAREN) {
      next(p);
      e = parse_expr(p);
      expect(p, P_RPAREN, "to close '('");
      e.mut = e.k == E_PTR ? e.mut : MUT_TEMP;
      p->inner = 0; /* e is not inside this operand: it is this operand,
                     * parentheses add nothing */
      break;
    }
    syntax(p, t, "expected an expression, found %s", tok_text(p, t, b));
    if (!ends_something(t)) /* `let b = 1 +;` leaves the ';' to its statement */
      next(p);
    return err_expr(t);
  case TK_TYPE:
    next(p);
    if (!is_p(p, P_LPAREN)) {
      syntax(p, t, "type name %s used as a value (a cast is written %.*s(x))",
             tok_text(p, t, b), (int)t->len, p->src + t->off);
      return err_expr(t);
    }
    e = parse_cast(p, t, scalar_t(p, (xpj_scalar)t->val.scalar));
    break;
  case TK_IDENT:
    next(p);
    if (is_p(p, P_LPAREN))
      e = parse_call(p, t);
    else
      e = parse_name(p, t);
    break;
  default:
    syntax(p, t, "expected an expression, found %s", tok_text(p, t, b));
    if (t->kind != TK_EOF)
      next(p);
    return err_expr(t);
  }
  /* a call or a cast is one deeper than its deepest argument */
  e = deeper(p, e, max_u32(e.depth, p->inner), t);
  while (is_p(p, P_LBRACKET)) {
    const token *lb = peek(p);
    uint32_t d = e.depth + 1;
    p->inner = 0;
    e = parse_index(p, e);
    e = deeper(p, e, max_u32(d, p->inner), lb);
  }
  if (is_p(p, P_LPAREN) && e.k != E_ERR) {
    syntax(p, peek(p), "only functions can be called");
    return err_expr(t);
  }
  return e;
}

/* ---- statements ----------------------------------------------------- */

static bool parse_stmt(parser *p);

static void check_dead(parser *p, const token *t) {
  if (p->dead) {
    error(p, t, "unreachable code after 'return', 'break' or 'continue'");
    p->dead = false;
  }
}

static void open_scope(parser *p, uint32_t *saved_base, uint32_t *saved_n) {
  *saved_base = p->scope_base;
  *saved_n = p->nsyms;
  p->scope_base = p->nsyms;
}
static void close_scope(parser *p, uint32_t saved_base, uint32_t saved_n) {
  p->scope_base = saved_base;
  p->nsyms = saved_n;
}

/* '{' stmt* '}' into block b (a new scope); true when every path through
 * it ends in a return: one of its statements does (what follows that one
 * is unreachable, an error of its own). */
static bool parse_block_into(parser *p, xpj_block b) {
  uint32_t sb, sn;
  xpj_block saved = p->b;
  bool saved_dead = p->dead;
  bool returns = false;
  p->b = b;
  p->dead = false;
  open_scope(p, &sb, &sn);
  if (expect(p, P_LBRACE, "to begin a block")) {
    while (!is_p(p, P_RBRACE) && !is_k(p, TK_EOF))
      returns |= parse_stmt(p);
    expect(p, P_RBRACE, "to end a block");
  }
  close_scope(p, sb, sn);
  p->b = saved;
  p->dead = saved_dead;
  return returns;
}

/* A loop's body: a 'break' in it leaves this loop, not one around it.
 * True when one does. */
static bool parse_loop_body(parser *p, xpj_block b) {
  bool outer = p->broke;
  p->broke = false;
  parse_block_into(p, b);
  bool broke = p->broke;
  p->broke = outer;
  return broke;
}

static const char *mut_reason(parser *p, const expr *e, char nb[256],
                              char msg[400]) {
  const char *n = e->name ? tok_str(p, e->name, nb) : "?";
  switch (e->mut) {
  case MUT_PARAM:
    snprintf(msg, 400, "cannot assign to parameter '%s' (parameters "
             "are immutable; copy it into a 'let' variable)", n);
    break;
  case MUT_CONST:
    snprintf(msg, 400, "cannot assign to constant '%s'", n);
    break;
  case MUT_RDONLY:
    snprintf(msg, 400, "cannot assign to an element of read-only "
             "array '%s' (declared 'global const')", n);
    break;
  case MUT_ARRAY:
    snprintf(msg, 400, "cannot assign to array '%s' as a whole; "
             "assign its elements", n);
    break;
  default:
    snprintf(msg, 400, "expression is not assignable");
  }
  return msg;
}

/* Assignment, compound assignment, ++/--, or a call. */
static void parse_simple(parser *p) {
  const token *start = peek(p);
  expr lhs = parse_expr(p);
  const token *t = peek(p);
  char nb[256];
  static const struct {
    punct tok;
    int op; /* -1 plain */
  } assigns[] = {{P_ASSIGN, -1},          {P_ADD_ASSIGN, XPJ_ADD},
                 {P_SUB_ASSIGN, XPJ_SUB}, {P_MUL_ASSIGN, XPJ_MUL},
                 {P_DIV_ASSIGN, XPJ_DIV}, {P_MOD_ASSIGN, XPJ_REM},
                 {P_AND_ASSIGN, XPJ_AND}, {P_OR_ASSIGN, XPJ_OR},
                 {P_XOR_ASSIGN, XPJ_XOR}, {P_SHL_ASSIGN, XPJ_SHL},
                 {P_SHR_ASSIGN, XPJ_SHR}};
  int ai = -1;
  bool incdec = false;
  if (t->kind == TK_PUNCT) {
    for (size_t i = 0; i < sizeof assigns / sizeof *assigns; i++)
      if (assigns[i].tok == t->punct)
        ai = (int)i;
    incdec = t->punct == P_INC || t->punct == P_DEC;
  }
  if (ai < 0 && !incdec) {
    if (lhs.k != E_ERR && !lhs.is_call)
      error(p, start, "expression statement has no effect (expected an "
            "assignment or a call)");
    return;
  }
  next(p);
  expr rhs;
  if (incdec) {
    rhs = err_expr(t);
    rhs.k = E_LINT;
    rhs.i = 1;
  } else {
    rhs = parse_hinted(p, lhs.k == E_PTR ? lhs.t : 0);
  }
  if (lhs.k == E_ERR || rhs.k == E_ERR)
    return;
  if (lhs.k == E_ARR) {
    lhs.mut = MUT_ARRAY;
  }
  if (lhs.k != E_PTR || lhs.mut != MUT_OK) {
    char why[400];
    error(p, lhs.tok, "%s", mut_reason(p, &lhs, nb, why));
    return;
  }
  int op = incdec ? (t->punct == P_INC ? XPJ_ADD : XPJ_SUB) : assigns[ai].op;
  xpj_val v;
  if (op < 0) {
    v = rvalue(p, &rhs, lhs.t);
  } else {
    expr cur = lhs;
    cur.mut = MUT_TEMP;
    expr r = deeper(p, binop(p, (xpj_binop)op, cur, rhs, t),
                    max_u32(cur.depth, rhs.depth) + 1, t);
    v = r.k == E_ERR ? 0 : rvalue(p, &r, 0);
    if (v && xpj_val_type(p->f, v) != lhs.t)
      v = rvalue(p, &r, lhs.t);
  }
  if (!v)
    return;
  if (!xpj_b_store(p->f, p->b, lhs.v, v, loc(p, t)))
    berror(p, t);
}

static void finish_simple(parser *p) {
  if (!p->panic)
    expect(p, P_SEMI, "after statement");
  if (p->panic)
    sync_stmt(p);
}

/* A name whose declaration was in error (reported): declared all the
 * same, so that its uses say nothing more (parse_name: S_VAL without a
 * value is an error expression) */
static void declare_poisoned(parser *p, const token *name) {
  sym *s = declare(p, name, S_VAL);
  if (s)
    s->v = 0;
}

/* let x = e; let x: T = e; let a: T[n, m]; */
static void parse_let(parser *p) {
  next(p); /* let */
  const token *name = peek(p);
  char b[48];
  if (name->kind != TK_IDENT) {
    syntax(p, name, "expected a variable name after 'let', found %s",
           tok_text(p, name, b));
    return;
  }
  next(p);
  xpj_type t = 0;
  bool typed_decl = false;
  if (accept(p, P_COLON)) {
    typed_decl = true;
    t = parse_elem_type(p);
    if (is_p(p, P_LBRACKET)) {
      int64_t dims[XPJ_MAX_RANK];
      uint8_t deferred;
      int n = parse_static_dims(p, dims, &deferred);
      if (is_p(p, P_ASSIGN)) {
        syntax(p, peek(p), "private arrays cannot have an initializer (they "
               "start zeroed)");
        return;
      }
      if (n <= 0 || !t) {
        declare_poisoned(p, name);
        return;
      }
      char nb[256];
      xpj_type at = xpj_type_static(p->m, XPJ_SPACE_PRIVATE, t, (unsigned)n, dims);
      xpj_val a = at ? xpj_b_array(p->f, p->b, at, tok_str(p, name, nb),
                                   loc(p, name))
                     : 0;
      if (!a) {
        berror(p, name);
        declare_poisoned(p, name);
        return;
      }
      sym *s = declare(p, name, S_ARRAY);
      if (s) {
        s->v = a;
        s->t = at;
        s->mut = MUT_OK;
        s->deferred = deferred != 0;
      }
      p->f->insts[a].aux = deferred;
      return;
    }
  }
  if (!accept(p, P_ASSIGN)) {
    char nb[256];
    syntax(p, peek(p), "variable '%s' needs an initial value (let %s = ...;)",
           tok_str(p, name, nb), nb);
    return;
  }
  expr e = parse_hinted(p, t);
  if (typed_decl && !t) {
    declare_poisoned(p, name);
    return;
  }
  xpj_val v = rvalue(p, &e, t);
  if (!v) {
    /* declare anyway so later uses do not cascade into "unknown name" */
    declare_poisoned(p, name);
    return;
  }
  xpj_type vt = xpj_val_type(p->f, v);
  char nb[256];
  xpj_val var = xpj_b_var(p->f, p->b, vt, tok_str(p, name, nb), loc(p, name));
  if (!var || !xpj_b_store(p->f, p->b, var, v, loc(p, name))) {
    berror(p, name);
    return;
  }
  sym *s = declare(p, name, S_VAR);
  if (s) {
    s->v = var;
    s->t = vt;
  }
}

/* const k = e; (a local immutable binding) */
static void parse_local_const(parser *p) {
  next(p);
  const token *name = peek(p);
  char b[48];
  if (name->kind != TK_IDENT) {
    syntax(p, name, "expected a name after 'const', found %s",
           tok_text(p, name, b));
    return;
  }
  next(p);
  xpj_type t = 0;
  bool bad_type = false;
  if (accept(p, P_COLON)) {
    t = parse_elem_type(p);
    bad_type = !t;
  }
  if (!bad_type && !expect(p, P_ASSIGN, "in constant declaration"))
    return;
  expr e = bad_type ? err_expr(name) : parse_hinted(p, t);
  if (e.k == E_ERR) {
    declare_poisoned(p, name);
    return;
  }
  if (is_lit(&e) && !t) {
    sym *s = declare(p, name, S_LIT);
    if (s) {
      s->litk = e.k;
      s->i = e.i;
      s->f = e.f;
      s->fdir = e.fdir;
      s->big = e.big;
      s->boolean = e.boolean;
    }
    return;
  }
  if (e.k == E_ARR) {
    sym *s = declare(p, name, S_ARRAY);
    if (s) {
      s->v = e.v;
      s->t = e.t;
      s->mut = e.mut;
      s->deferred = e.deferred;
    }
    return;
  }
  xpj_val v = rvalue(p, &e, t);
  sym *s = declare(p, name, S_VAL);
  if (s) {
    s->v = v;
    s->t = v ? xpj_val_type(p->f, v) : 0;
    s->mut = MUT_CONST;
  }
}

/* local tile: T[256]; */
static void parse_local_array(parser *p) {
  const token *kw = next(p);
  const token *name = peek(p);
  char b[48], nb[256];
  if (name->kind != TK_IDENT) {
    syntax(p, name, "expected a name after 'local', found %s",
           tok_text(p, name, b));
    return;
  }
  next(p);
  if (!expect(p, P_COLON, "after the local array name"))
    return;
  xpj_type et = parse_elem_type(p);
  int64_t dims[XPJ_MAX_RANK];
  if (!is_p(p, P_LBRACKET)) {
    syntax(p, peek(p), "local memory holds arrays: write local %s: T[N];",
           tok_str(p, name, nb));
    return;
  }
  uint8_t deferred;
  int n = parse_static_dims(p, dims, &deferred);
  if (n <= 0 || !et) {
    declare_poisoned(p, name);
    return;
  }
  xpj_type at = xpj_type_static(p->m, XPJ_SPACE_LOCAL, et, (unsigned)n, dims);
  xpj_val a = at ? xpj_b_array(p->f, p->b, at, tok_str(p, name, nb),
                               loc(p, kw))
                 : 0;
  if (!a) {
    berror(p, kw);
    declare_poisoned(p, name);
    return;
  }
  sym *s = declare(p, name, S_ARRAY);
  if (s) {
    s->v = a;
    s->t = at;
    s->mut = MUT_OK;
    s->deferred = deferred != 0;
  }
  p->f->insts[a].aux = deferred;
}

static xpj_val parse_cond(parser *p, const char *what) {
  const token *t = peek(p);
  expr c = parse_expr(p);
  if (c.k == E_ERR)
    return 0;
  xpj_val v = rvalue(p, &c, 0);
  if (v && xpj_val_type(p->f, v) != scalar_t(p, XPJ_BOOL)) {
    char tb[96];
    xpj_type_str_in(p->f, xpj_val_type(p->f, v), tb, sizeof tb);
    error(p, t, "condition of '%s' must be bool, not %s (compare "
          "explicitly, e.g. %s)", what, tb,
          strcmp(tb, "bf16") ? "x != 0" : "f32(x) != 0");
    return 0;
  }
  return v;
}

/* A block parsed into a throwaway if, when the real one could not be made:
 * keeps checking the body after an error in the condition. */
static void parse_block_discard(parser *p) {
  xpj_block t, e;
  xpj_val c = xpj_b_const_int(p->f, p->b, scalar_t(p, XPJ_BOOL), 0,
                              loc(p, peek(p)));
  if (c && xpj_b_if(p->f, p->b, c, &t, &e, loc(p, peek(p))))
    parse_block_into(p, t);
  else
    sync_stmt(p);
}

/* True when every path through it returns: it has an 'else' and each arm
 * returns (3.2; the conditions are not evaluated). */
static bool parse_if(parser *p) {
  const token *kw = next(p);
  xpj_val c = parse_cond(p, "if");
  xpj_block tb, eb;
  xpj_val ifv = c ? xpj_b_if(p->f, p->b, c, &tb, &eb, loc(p, kw)) : 0;
  if (c && !ifv)
    berror(p, kw);
  if (!is_p(p, P_LBRACE)) {
    syntax(p, peek(p), "expected '{' after the condition of 'if' (braces are "
           "required)");
    return false;
  }
  bool then_returns = false;
  if (ifv)
    then_returns = parse_block_into(p, tb);
  else
    parse_block_discard(p);
  if (!is_k(p, TK_KW_ELSE))
    return false;
  next(p);
  if (is_k(p, TK_KW_IF)) {
    /* each arm is a block in the one before, and a frame of this
     * recursion: bounded (the passes after parsing recurse as deep) */
    if (p->elifs >= XPJ_MAX_DEPTH) {
      if (!p->panic)
        syntax(p, peek(p), "an 'else if' chain of more than %d arms (each "
               "arm nests inside the one before): split it, or index a "
               "table", XPJ_MAX_DEPTH);
      p->pos = p->ntok - 1; /* give up on this input, as enter does */
      p->gave_up = true;
      return false;
    }
    p->elifs++;
    bool rest_returns;
    if (!ifv) {
      rest_returns = parse_if(p);
    } else {
      xpj_block saved = p->b;
      bool sd = p->dead;
      p->b = eb;
      p->dead = false;
      rest_returns = parse_if(p);
      p->b = saved;
      p->dead = sd;
    }
    p->elifs--;
    return then_returns && rest_returns;
  }
  if (!is_p(p, P_LBRACE)) {
    syntax(p, peek(p), "expected '{' or 'if' after 'else'");
    return false;
  }
  if (!ifv) {
    parse_block_discard(p);
    return false;
  }
  bool else_returns = parse_block_into(p, eb);
  return then_returns && else_returns;
}

static void parse_while(parser *p) {
  const token *kw = next(p);
  xpj_block cb, bb, sb;
  xpj_val lp = xpj_b_loop(p->f, p->b, &cb, &bb, &sb, loc(p, kw));
  if (!lp) {
    berror(p, kw);
    sync_stmt(p);
    return;
  }
  xpj_block saved = p->b;
  p->b = cb;
  xpj_val c = parse_cond(p, "while");
  p->b = saved;
  if (c && xpj_b_loop_cond(p->f, lp, c) != XPJ_OK)
    berror(p, kw);
  if (!is_p(p, P_LBRACE)) {
    syntax(p, peek(p), "expected '{' after the condition of 'while' (braces "
           "are required)");
    return;
  }
  parse_loop_body(p, bb);
}

/* for (init; cond; step) { body }: true when every path through it
 * returns, as when it has no condition and no 'break' leaves it (3.2). */
static bool parse_for(parser *p) {
  const token *kw = next(p);
  uint32_t sbase, sn;
  open_scope(p, &sbase, &sn);
  if (!expect(p, P_LPAREN, "after 'for'")) {
    close_scope(p, sbase, sn);
    sync_stmt(p);
    return false;
  }
  if (is_k(p, TK_KW_LET))
    parse_let(p);
  else if (is_k(p, TK_KW_CONST))
    parse_local_const(p);
  else if (!is_p(p, P_SEMI))
    parse_simple(p);
  expect(p, P_SEMI, "after the initialisation of 'for'");
  xpj_block cb, bb, sb;
  xpj_val lp = xpj_b_loop(p->f, p->b, &cb, &bb, &sb, loc(p, kw));
  if (!lp) {
    berror(p, kw);
    close_scope(p, sbase, sn);
    sync_stmt(p);
    return false;
  }
  xpj_block saved = p->b;
  bool has_cond = !is_p(p, P_SEMI);
  if (has_cond) {
    p->b = cb;
    xpj_val c = parse_cond(p, "for");
    if (c && xpj_b_loop_cond(p->f, lp, c) != XPJ_OK)
      berror(p, kw);
  }
  expect(p, P_SEMI, "after the condition of 'for'");
  if (!is_p(p, P_RPAREN)) {
    p->b = sb;
    if (is_k(p, TK_KW_LET))
      syntax(p, peek(p), "the step of 'for' must be an assignment");
    else
      parse_simple(p);
  }
  p->b = saved;
  expect(p, P_RPAREN, "after the step of 'for'");
  if (p->panic) {
    close_scope(p, sbase, sn);
    sync_stmt(p);
    return false;
  }
  bool returns = false;
  if (!is_p(p, P_LBRACE))
    syntax(p, peek(p), "expected '{' after 'for (...)' (braces are required)");
  else
    returns = !parse_loop_body(p, bb) && !has_cond;
  close_scope(p, sbase, sn);
  return returns;
}

static void parse_return(parser *p) {
  const token *kw = next(p);
  xpj_val v = 0;
  if (!is_p(p, P_SEMI)) {
    xpj_type rt = p->f->ret;
    expr e = parse_hinted(
        p, xpj_type_scalar_of(p->m, rt) == XPJ_VOID ? 0 : rt);
    if (e.k == E_ERR)
      return;
    if (xpj_type_scalar_of(p->m, rt) == XPJ_VOID) {
      error(p, e.tok, p->f->kind == XPJ_FUNC_DEVICE
                          ? "'%s' returns nothing; remove the value or "
                            "declare a return type (-> T)"
                          : "kernel '%s' cannot return a value",
            p->f->name);
      return;
    }
    v = rvalue(p, &e, rt);
    if (!v)
      return;
  }
  if (!xpj_b_return(p->f, p->b, v, loc(p, kw)))
    berror(p, kw);
  p->dead = true;
}

/* True when every path through the statement ends in a return (3.2), for
 * parse_body's missing-return check. Decided here from the syntax: in the
 * IR a nested block is an always-true 'if', like `if true { ... }`, which
 * must not count (the check evaluates no condition). */
static bool parse_stmt(parser *p) {
  const token *t = peek(p);
  if (!enter(p, t))
    return false;
  check_dead(p, t);
  bool returns = false;
  switch (t->kind) {
  case TK_PUNCT:
    if (t->punct == P_LBRACE) {
      xpj_block tb, eb;
      /* a nested scope: emitted into an always-true if */
      xpj_val c = xpj_b_const_int(p->f, p->b, scalar_t(p, XPJ_BOOL), 1, loc(p, t));
      if (c && xpj_b_if(p->f, p->b, c, &tb, &eb, loc(p, t)))
        returns = parse_block_into(p, tb);
      else
        sync_stmt(p);
      break;
    }
    if (t->punct == P_SEMI) {
      next(p);
      break;
    }
    if (t->punct == P_RBRACE) { /* closes no block of this body */
      syntax(p, t, "expected a statement, found '}'");
      next(p);
      sync_stmt(p);
      break;
    }
    parse_simple(p);
    finish_simple(p);
    break;
  case TK_KW_LET:
    parse_let(p);
    finish_simple(p);
    break;
  case TK_KW_CONST:
    parse_local_const(p);
    finish_simple(p);
    break;
  case TK_KW_LOCAL:
    parse_local_array(p);
    finish_simple(p);
    break;
  case TK_KW_IF:
    returns = parse_if(p);
    if (p->panic)
      sync_stmt(p);
    break;
  case TK_KW_WHILE:
    parse_while(p);
    if (p->panic)
      sync_stmt(p);
    break;
  case TK_KW_FOR:
    returns = parse_for(p);
    if (p->panic)
      sync_stmt(p);
    break;
  case TK_KW_BREAK:
  case TK_KW_CONTINUE:
    next(p);
    if (!(t->kind == TK_KW_BREAK ? xpj_b_break : xpj_b_continue)(p->f, p->b,
                                                                 loc(p, t)))
      berror(p, t);
    p->dead = true;
    p->broke |= t->kind == TK_KW_BREAK;
    finish_simple(p);
    break;
  case TK_KW_RETURN:
    parse_return(p);
    finish_simple(p);
    returns = true;
    break;
  case TK_KW_KERNEL:
  case TK_KW_FN:
    syntax(p, t, "'%s' cannot be nested inside a function (missing '}'?)",
           t->kind == TK_KW_KERNEL ? "kernel" : "fn");
    sync_stmt(p);
    break;
  case TK_KW_ELSE:
    syntax(p, t, "'else' without a matching 'if'");
    next(p);
    sync_stmt(p);
    break;
  default:
    parse_simple(p);
    finish_simple(p);
  }
  leave(p);
  return returns;
}

/* ---- items ---------------------------------------------------------- */

static bool is_builtin_name(parser *p, const token *t) {
  char nb[256];
  tok_str(p, t, nb);
  if (wi_lookup(p, t) >= 0 || xpj_math_lookup(nb) != XPJ_MATH_COUNT ||
      xpj_limit_lookup(nb) != XPJ_LIMIT_COUNT)
    return true;
  xpj_coll_desc cd;
  if (xpj_coll_lookup(nb, &cd))
    return true;
  static const char *const other[] = {"shape", "stride", "size", "ndim",
                                      "barrier"};
  for (size_t i = 0; i < sizeof other / sizeof *other; i++)
    if (strcmp(nb, other[i]) == 0)
      return true;
  static const char *const atomics[] = {
      "atomic_add", "atomic_sub", "atomic_min", "atomic_max",
      "atomic_and", "atomic_or", "atomic_xor", "atomic_xchg",
      "atomic_cmpxchg", "atomic_load", "atomic_store"};
  for (size_t i = 0; i < sizeof atomics / sizeof *atomics; i++)
    if (strcmp(nb, atomics[i]) == 0)
      return true;
  return false;
}

/* Skips a balanced { ... } body; returns the index of its '}' or 0. */
static uint32_t skip_body(parser *p) {
  int depth = 0;
  while (!is_k(p, TK_EOF)) {
    if (is_p(p, P_LBRACE))
      depth++;
    else if (is_p(p, P_RBRACE) && --depth == 0) {
      uint32_t end = p->pos;
      next(p);
      return end;
    }
    next(p);
  }
  return 0;
}

/* Skips to the next item keyword at top level. */
static void sync_item(parser *p) {
  int depth = 0;
  while (!is_k(p, TK_EOF)) {
    const token *t = peek(p);
    if (depth == 0 && (t->kind == TK_KW_KERNEL || t->kind == TK_KW_FN ||
                       t->kind == TK_KW_CONST))
      break;
    if (is_p(p, P_LBRACE))
      depth++;
    else if (is_p(p, P_RBRACE) && depth > 0)
      depth--;
    next(p);
  }
  p->panic = false;
}

/* name: T | name: global [const] T[...] | name: local T[]; *name_out gets
 * the name token */
static bool parse_param(parser *p, xpj_func *f, const token **name_out) {
  const token *name = peek(p);
  char b[48], nb[256];
  if (name->kind != TK_IDENT) {
    syntax(p, name, "expected a parameter name, found %s",
           tok_text(p, name, b));
    return false;
  }
  next(p);
  if (!expect(p, P_COLON, "after the parameter name"))
    return false;
  xpj_type t = 0;
  if (is_k(p, TK_KW_LOCAL)) { /* local T[]: sized by the launch */
    next(p);
    if (is_k(p, TK_KW_CONST)) {
      syntax(p, peek(p), "local array parameters cannot be const (the "
             "work-group fills them)");
      return false;
    }
    xpj_type et = parse_elem_type(p);
    if (!et)
      return false;
    if (!is_p(p, P_LBRACKET) || peek_at(p, 1)->kind != TK_PUNCT ||
        peek_at(p, 1)->punct != P_RBRACKET) {
      syntax(p, peek(p), "local array parameters are 1-D and sized by the "
             "launch: write local T[] (a local array of static size is "
             "declared in the body: local t: T[64];)");
      return false;
    }
    next(p);
    next(p);
    t = xpj_type_local_view(p->m, et);
  } else if (is_k(p, TK_KW_GLOBAL)) {
    next(p);
    bool is_const = false;
    if (is_k(p, TK_KW_CONST)) {
      next(p);
      is_const = true;
    }
    xpj_type et = parse_elem_type(p);
    if (!et)
      return false;
    if (!is_p(p, P_LBRACKET)) {
      syntax(p, peek(p), "global parameters are arrays: write global T[] "
             "(1-D), T[,] (2-D) or T[*] (any rank)");
      return false;
    }
    next(p);
    int rank = 1;
    if (accept(p, P_STAR)) {
      rank = XPJ_RANK_GENERIC;
    } else {
      while (accept(p, P_COMMA))
        rank++;
      if (rank > XPJ_MAX_RANK) {
        error(p, name, "array rank %d is too large (at most %d)", rank,
              XPJ_MAX_RANK);
        return false;
      }
    }
    if (!is_p(p, P_RBRACKET)) {
      syntax(p, peek(p), "array parameters have no static size: write T[] "
             "(1-D), T[,] (2-D) or T[*] (any rank)");
      return false;
    }
    next(p);
    t = xpj_type_view(p->m, et, rank, is_const);
  } else {
    if (is_k(p, TK_KW_CONST)) {
      syntax(p, peek(p), "'const' applies to global arrays (global const "
             "T[]); scalar parameters are always immutable");
      return false;
    }
    t = parse_elem_type(p);
    if (!t)
      return false;
    if (is_p(p, P_LBRACKET)) {
      syntax(p, peek(p), "array parameter '%s' needs a memory space: global "
             "T[...]", tok_str(p, name, nb));
      return false;
    }
  }
  if (!t || !xpj_func_add_param(f, tok_str(p, name, nb), t, loc(p, name))) {
    berror(p, name);
    return false;
  }
  *name_out = name;
  return true;
}

static bool parse_reqd_local(parser *p, xpj_func *f);

static void parse_fn_item(parser *p) {
  const token *kw = next(p);
  bool is_kernel = kw->kind == TK_KW_KERNEL;
  const token *name = peek(p);
  char b[48], nb[256];
  if (name->kind != TK_IDENT) {
    syntax(p, name, "expected a %s name, found %s",
           is_kernel ? "kernel" : "function", tok_text(p, name, b));
    sync_item(p);
    return;
  }
  next(p);
  if (xpj_module_func_count(p->m) >= XPJ_MAX_FUNCS) {
    error(p, name, "too many functions in one module (at most %d)",
          XPJ_MAX_FUNCS);
    p->pos = p->ntok - 1; /* stop: the rest would only repeat this */
    return;
  }
  if (is_builtin_name(p, name)) {
    error(p, name, "'%s' is a builtin and cannot be redefined",
          tok_str(p, name, nb));
  } else if (lookup_fn(p, name) || lookup_const(p, name)) {
    error(p, name, "redefinition of '%s'", tok_str(p, name, nb));
  }
  /* generic parameters: type parameters and const parameters, mixed */
  const token *tps[XPJ_MAX_TPARAMS];
  unsigned ntp = 0;
  cparam cps[XPJ_MAX_CPARAMS];
  unsigned cppos[XPJ_MAX_CPARAMS];
  unsigned ncp = 0;
  bool bind = is_kernel && p->bound && tok_is(p, name, p->bound->kernel);
  if (accept(p, P_LT)) {
    do {
      const token *t = peek(p);
      const token *ct = NULL;
      int cscalar = XPJ_VOID;
      if (t->kind == TK_KW_CONST) { /* const NAME: TYPE */
        ct = next(p);
        t = peek(p);
        if (t->kind != TK_IDENT) {
          syntax(p, t, "expected a const parameter name, found %s",
                 tok_text(p, t, b));
          sync_item(p);
          return;
        }
        next(p);
        if (!expect(p, P_COLON, "after the const parameter name (const N: "
                    "i64)")) {
          sync_item(p);
          return;
        }
        const token *ty = peek(p);
        if (ty->kind != TK_TYPE && ty->kind != TK_IDENT) {
          syntax(p, ty, "expected the type of const parameter '%s', found %s",
                 tok_str(p, t, nb), tok_text(p, ty, b));
          sync_item(p);
          return;
        }
        next(p);
        cscalar = ty->kind == TK_TYPE ? ty->val.scalar : XPJ_VOID;
        if (cscalar < XPJ_BOOL || cscalar > XPJ_U64) {
          error(p, ty, "const parameter '%s' must have an integer type or "
                "bool, not %s%s", tok_str(p, t, nb), tok_text(p, ty, b),
                xpj_scalar_float_valued(cscalar)
                    ? " (pass floating-point values as kernel arguments)"
                    : "");
          cscalar = XPJ_I64; /* keep checking the rest */
        }
        if (!is_kernel)
          error(p, ct, "device functions cannot have const parameters (only "
                "kernels can); pass '%s' as an argument", tok_str(p, t, nb));
      } else if (t->kind != TK_IDENT) {
        syntax(p, t, "expected a type parameter name or 'const', found %s",
               tok_text(p, t, b));
        sync_item(p);
        return;
      } else {
        next(p);
      }
      bool dup = false, dup_const = false;
      for (unsigned i = 0; i < ntp && !dup; i++)
        dup = same_name(p, tps[i], t);
      for (unsigned i = 0; i < ncp && !dup; i++)
        dup = dup_const = same_name(p, cps[i].name, t);
      if (dup)
        error(p, t, "duplicate %s parameter '%s'",
              ct || dup_const ? "generic" : "type", tok_str(p, t, nb));
      if (ct) {
        if (ncp == XPJ_MAX_CPARAMS) {
          error(p, t, "too many const parameters (at most %d)",
                XPJ_MAX_CPARAMS);
          sync_item(p);
          return;
        }
        cparam *c = &cps[ncp];
        memset(c, 0, sizeof *c);
        c->name = t;
        c->scalar = (uint8_t)cscalar;
        c->index = ncp;
        cppos[ncp] = ntp + ncp;
        ncp++;
        continue;
      }
      if (ntp == XPJ_MAX_TPARAMS) {
        error(p, t, "too many type parameters (at most %d)", XPJ_MAX_TPARAMS);
        sync_item(p);
        return;
      }
      tps[ntp++] = t;
    } while (accept(p, P_COMMA));
    if (!expect(p, P_GT, "after the generic parameters")) {
      sync_item(p);
      return;
    }
  }
  char tnames[XPJ_MAX_TPARAMS][256];
  const char *tpn[XPJ_MAX_TPARAMS];
  for (unsigned i = 0; i < ntp; i++)
    tpn[i] = tok_str(p, tps[i], tnames[i]);
  /* the signature is parsed before the kind is known: create as device,
   * fix the kind after the range clause */
  xpj_func *f = xpj_func_create(p->m, tok_str(p, name, nb), XPJ_FUNC_DEVICE, 0,
                                ntp, tpn, loc(p, name));
  if (!f) {
    if (p->m->oom)
      p->oom = true;
    else if (!p->errors) /* duplicates were reported above */
      berror(p, name);
    p->m->errmsg[0] = 0;
    /* keep checking the rest under a private name */
    char alt[300];
    snprintf(alt, sizeof alt, "%s#%u", nb, name->off);
    f = xpj_func_create(p->m, alt, XPJ_FUNC_DEVICE, 0, ntp, tpn, loc(p, name));
    if (!f) {
      p->oom = p->oom || p->m->oom;
      sync_item(p);
      return;
    }
  }
  p->f = f;
  for (unsigned i = 0; i < ncp; i++) {
    const char *cn = tok_str(p, cps[i].name, nb);
    if (!bind) {
      if (!xpj_ir_add_cparam(f, cn, (xpj_scalar)cps[i].scalar, cppos[i]))
        berror(p, cps[i].name);
      continue;
    }
    unsigned j = 0;
    while (j < p->bound->n && strcmp(p->bound->names[j], cn))
      j++;
    if (j == p->bound->n) {
      error(p, cps[i].name, "no value for const parameter '%s'", cn);
    } else if (!xpj_const_fits((xpj_scalar)cps[i].scalar,
                               p->bound->values[j])) {
      error(p, cps[i].name, "value %lld does not fit const parameter '%s' "
            "of type %s", (long long)p->bound->values[j], cn,
            xpj_scalar_name((xpj_scalar)cps[i].scalar));
    } else {
      cps[i].bound = true;
      cps[i].value = p->bound->values[j];
    }
  }
  p->cps = cps;
  p->ncps = ncp;
  const token *ptoks[XPJ_MAX_PARAMS];
  bool ok = expect(p, P_LPAREN, "to begin the parameter list");
  if (ok && !accept(p, P_RPAREN)) {
    do {
      const token *pt = NULL;
      if (!parse_param(p, f, &pt)) {
        ok = false;
        break;
      }
      ptoks[xpj_func_param_count(f) - 1] = pt;
    } while (accept(p, P_COMMA));
    if (ok)
      ok = expect(p, P_RPAREN, "after the parameters");
  }
  if (ok && is_kernel) {
    const token *t = peek(p);
    unsigned dims = 0;
    if (is_k(p, TK_KW_RANGE) || is_k(p, TK_KW_NDRANGE)) {
      bool nd = is_k(p, TK_KW_NDRANGE);
      next(p);
      if (accept(p, P_LPAREN)) {
        const token *dt = peek(p);
        if (dt->kind != TK_INT || dt->val.u < 1 || dt->val.u > 3) {
          error(p, dt, "the number of dimensions must be 1, 2 or 3");
          ok = false;
        } else {
          dims = (unsigned)dt->val.u;
        }
        next(p);
        ok = expect(p, P_RPAREN, "after the number of dimensions") && ok;
      } else if (nd) {
        syntax(p, peek(p), "ndrange kernels need their dimensions: "
               "ndrange(1), ndrange(2) or ndrange(3)");
        ok = false;
      }
      f->kind = nd ? XPJ_FUNC_NDRANGE : XPJ_FUNC_RANGE;
      f->dims = dims;
      for (unsigned i = 0; ok && !nd && i < xpj_func_param_count(f); i++)
        if (xpj_typeinfo_of(p->m, f->params[i].type)->space ==
                XPJ_SPACE_LOCAL) {
          error(p, ptoks[i], "local array parameter '%s' needs an ndrange "
                "kernel (local memory belongs to a work-group)",
                tok_str(p, ptoks[i], nb));
          ok = false;
        }
      if (ok && is_k(p, TK_KW_LOCAL))
        ok = parse_reqd_local(p, f);
    } else {
      syntax(p, t, "expected 'range' or 'ndrange(N)' after the kernel "
             "parameters, found %s", tok_text(p, t, b));
      ok = false;
    }
  } else if (ok && accept(p, P_ARROW)) {
    xpj_type rt = parse_elem_type(p);
    if (!rt || xpj_func_set_return(f, rt) != XPJ_OK) {
      if (rt)
        berror(p, name);
      ok = false;
    }
  }
  if (ok && !is_p(p, P_LBRACE)) {
    syntax(p, peek(p), "expected '{' to begin the body of '%s', found %s",
           tok_str(p, name, nb), tok_text(p, peek(p), b));
    ok = false;
  }
  p->f = NULL;
  p->cps = NULL;
  p->ncps = 0;
  if (!ok) {
    sync_item(p);
    return;
  }
  uint32_t body = p->pos;
  uint32_t end = skip_body(p);
  if (!end) {
    syntax(p, &p->toks[body], "the body of '%s' is not closed (missing '}')",
           tok_str(p, name, nb));
    return;
  }
  if (!xpj_grow((void **)&p->fns, &p->capfns, p->nfns + 1, sizeof *p->fns)) {
    p->oom = true;
    return;
  }
  fn_info *fi = &p->fns[p->nfns++];
  fi->f = f;
  fi->name = name;
  memcpy(fi->params, ptoks, f->nparams * sizeof *ptoks);
  fi->body = body;
  fi->body_end = end;
  memcpy(fi->cps, cps, ncp * sizeof *cps);
  fi->ncps = ncp;
}

static void local_count_error(parser *p, const token *t, const xpj_func *f) {
  const char *s = f->dims > 1 ? "s" : "";
  error(p, t, "'%s' has %u dimension%s: give %u local size%s", f->name,
        f->dims, s, f->dims, s);
}

/* `local(S0, ...)` after `ndrange(N)`: the local size the kernel requires,
 * one constant expression of literals, module constants and const
 * parameters per dimension. One that depends on unbound const parameters
 * is checked when they are bound; the generic kernel records no size. */
static bool parse_reqd_local(parser *p, xpj_func *f) {
  const token *kw = peek(p);
  next(p);
  if (f->kind != XPJ_FUNC_NDRANGE) {
    error(p, kw, "only nd-range kernels have a local size: "
          "ndrange(N) local(...)");
    return false;
  }
  if (!expect(p, P_LPAREN, "after 'local'"))
    return false;
  uint64_t size[3];
  unsigned n = 0;
  xpj_func *saved = p->f;
  p->f = NULL; /* only literals and module constants fold */
  bool ok = true, deferred = false;
  do {
    const token *t = peek(p);
    expr e = parse_expr(p);
    if (e.k == E_ERR) {
      ok = false;
      break;
    }
    bool dep = generic_dep(p, &e);
    deferred = deferred || dep;
    if (!dep && (e.k != E_LINT || e.boolean || e.big || e.i < 1 ||
                 e.i > XPJ_MAX_REQD_LOCAL)) {
      error(p, t, "a local size must be an integer constant from 1 to %d",
            XPJ_MAX_REQD_LOCAL);
      ok = false;
      break;
    }
    if (n == f->dims) {
      local_count_error(p, t, f);
      ok = false;
      break;
    }
    size[n++] = (uint64_t)e.i;
  } while (accept(p, P_COMMA));
  p->f = saved;
  if (!ok)
    return false;
  if (!expect(p, P_RPAREN, "after the local size"))
    return false;
  if (n != f->dims) {
    local_count_error(p, kw, f);
    return false;
  }
  if (deferred)
    return true;
  if (xpj_func_set_reqd_local(f, n, size) != XPJ_OK) {
    error(p, kw, "the required local size has more than %d work-items",
          XPJ_MAX_REQD_LOCAL);
    return false;
  }
  return true;
}

/* const NAME (: type)? = constexpr ; */
static void parse_const_item(parser *p) {
  next(p);
  const token *name = peek(p);
  char b[48], nb[256];
  if (name->kind != TK_IDENT) {
    syntax(p, name, "expected a constant name, found %s", tok_text(p, name, b));
    sync_item(p);
    return;
  }
  next(p);
  int scalar = XPJ_VOID;
  if (accept(p, P_COLON)) {
    const token *t = peek(p);
    if (t->kind != TK_TYPE) {
      syntax(p, t, "module constants have a scalar type, found %s",
             tok_text(p, t, b));
      sync_item(p);
      return;
    }
    next(p);
    scalar = t->val.scalar;
  }
  if (!expect(p, P_ASSIGN, "in constant declaration")) {
    sync_item(p);
    return;
  }
  const token *et = peek(p);
  expr e = parse_expr(p); /* p->f is NULL: only literals fold */
  if (!p->panic)
    expect(p, P_SEMI, "after constant declaration");
  if (p->panic) {
    sync_item(p);
    return;
  }
  if (e.k == E_ERR)
    return;
  if (!is_lit(&e)) {
    error(p, et, "the value of module constant '%s' must be a constant "
          "expression of literals and other constants",
          tok_str(p, name, nb));
    return;
  }
  if (e.suffix) {
    if (scalar != XPJ_VOID && scalar != e.suffix) {
      error(p, et, "value of type %s for constant of type %s",
            xpj_scalar_name((xpj_scalar)e.suffix),
            xpj_scalar_name((xpj_scalar)scalar));
      return;
    }
    scalar = e.suffix;
  }
  if (is_builtin_name(p, name) || lookup_fn(p, name) || lookup_const(p, name)) {
    error(p, name, "redefinition of '%s'", tok_str(p, name, nb));
    return;
  }
  if (scalar != XPJ_VOID) {
    bool fl = xpj_scalar_float_valued(scalar);
    if (e.k == E_LFLT && !fl) {
      error(p, et, "floating-point value for constant of type %s",
            xpj_scalar_name((xpj_scalar)scalar));
      return;
    }
    if ((scalar == XPJ_BOOL) != e.boolean) {
      error(p, et, e.boolean ? "bool value for constant of type %s"
                             : "%s constant needs a value of its type",
            xpj_scalar_name((xpj_scalar)scalar));
      return;
    }
    if (!e.boolean && !lit_fits(p, et, scalar, &e))
      return;
  }
  if (p->nconsts >= 4096) {
    error(p, name, "too many module constants (at most 4096)");
    p->pos = p->ntok - 1;
    return;
  }
  if (!xpj_grow((void **)&p->consts, &p->capconsts, p->nconsts + 1,
                sizeof *p->consts)) {
    p->oom = true;
    return;
  }
  mconst *c = &p->consts[p->nconsts++];
  c->name = name;
  c->litk = e.k;
  c->scalar = scalar;
  c->i = e.i;
  c->f = e.f;
  c->fdir = e.fdir;
  c->big = e.big;
  c->boolean = e.boolean;
}

static void parse_body(parser *p, fn_info *fi) {
  p->f = fi->f;
  p->cps = fi->cps;
  p->ncps = fi->ncps;
  if (p->gmemo)
    memset(p->gmemo, 0, p->capgmemo); /* gconst's memo is per function */
  p->pos = fi->body;
  p->depth = 0;
  p->nsyms = 0;
  p->scope_base = 0;
  p->panic = p->gave_up = false;
  xpj_func *f = fi->f;
  for (unsigned i = 0; i < f->nparams; i++) {
    const token *pt = fi->params[i];
    const xpj_typeinfo *ti = xpj_typeinfo_of(p->m, f->params[i].type);
    sym *s = declare(p, pt, ti->kind == XPJ_TK_VIEW ? S_ARRAY : S_VAL);
    if (s) {
      s->v = f->params[i].val;
      s->t = f->params[i].type;
      s->mut = ti->kind == XPJ_TK_VIEW ? (ti->is_const ? MUT_RDONLY : MUT_OK)
                                       : MUT_PARAM;
    }
  }
  p->scope_base = p->nsyms;
  p->b = xpj_func_body(f);
  p->dead = false;
  p->broke = false;
  unsigned errors = p->errors;
  bool returns = false;
  next(p); /* '{' */
  while (p->pos < fi->body_end && !is_k(p, TK_EOF) && !p->too_many)
    returns |= parse_stmt(p);
  /* not after an error of this function's: a return it dropped is no
   * proof of a missing one; other functions' errors are no reason */
  if (xpj_type_scalar_of(p->m, f->ret) != XPJ_VOID && p->errors == errors &&
      !returns) {
    char tb[96];
    xpj_type_str_in(f, f->ret, tb, sizeof tb);
    error(p, &p->toks[fi->body_end], "'%s' may reach its end without "
          "returning a value of type %s", f->name, tb);
  }
  p->f = NULL;
  p->cps = NULL;
  p->ncps = 0;
}

static void call_report(void *ud, xpj_loc l, const char *fmt, ...) {
  parser *p = ud;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* find the offset of line l.line for the source quote */
  uint32_t off = 0, line = 1;
  while (off < p->len && line < l.line) {
    if (p->src[off] == '\n')
      line++;
    off++;
  }
  report(p, XPJ_SEV_ERROR, off + (l.col ? l.col - 1 : 0), l.line, l.col, msg);
}

static xpj_status parse(xpj_module *m, const char *filename, const char *src,
                        size_t len, xpj_diags *d, const xpj_binding *bound) {
  if (!m || (!src && len))
    return XPJ_ERR_INVALID;
  if (!filename)
    filename = "<input>";
  if (len > XPJ_MAX_SOURCE) {
    char msg[128];
    snprintf(msg, sizeof msg, "source is too large (at most %u bytes)",
             XPJ_MAX_SOURCE);
    if (d)
      xpj_diags_add(d, XPJ_SEV_ERROR, filename, 0, 0, NULL, msg);
    return XPJ_ERR_SYNTAX;
  }
  if (!src)
    src = "";
  parser p = {0};
  p.src = src;
  p.len = (uint32_t)len;
  p.fname = filename;
  p.m = m;
  p.d = d;
  p.bound = bound;
  p.file = xpj_module_add_file(m, filename, src, len);
  lexer_out lo = {0};
  if (!p.file || !xpj_lex(src, (uint32_t)len, &lo, lex_err, &p)) {
    xpj_free(lo.toks);
    return XPJ_ERR_NOMEM;
  }
  p.toks = lo.toks;
  p.ntok = lo.n;
  m->errmsg[0] = 0;
  /* pass 0: where the module constants are: `const NAME` where an item
   * starts (first, or after a `;` or `}` outside braces; not a const
   * parameter's `<const N: i64>`) */
  unsigned braces = 0;
  bool item_start = true;
  for (uint32_t i = 0; i + 1 < p.ntok && !p.oom; i++) {
    const token *t = &p.toks[i];
    bool is_p = t->kind == TK_PUNCT;
    if (!braces && item_start && t->kind == TK_KW_CONST &&
        p.toks[i + 1].kind == TK_IDENT) {
      if (!xpj_grow((void **)&p.pend, &p.cappend, p.npend + 1,
                    sizeof *p.pend))
        p.oom = true;
      else
        p.pend[p.npend++] = (pconst){&p.toks[i + 1], i, i, PC_WAITING, false, 0};
    }
    if (is_p && t->punct == P_LBRACE)
      braces++;
    else if (is_p && t->punct == P_RBRACE && braces)
      braces--;
    item_start = !braces && is_p &&
                 (t->punct == P_SEMI || t->punct == P_RBRACE);
  }
  /* pass 1: signatures */
  uint32_t next_const = 0;
  while (!is_k(&p, TK_EOF) && !p.oom && !p.too_many) {
    const token *t = peek(&p);
    char b[48];
    uint32_t start = p.pos;
    while (next_const < p.npend && p.pend[next_const].start < p.pos)
      next_const++;
    pconst *k = next_const < p.npend && p.pend[next_const].start == p.pos
                    ? &p.pend[next_const]
                    : NULL;
    if (k && k->state == PC_DONE) {
      p.pos = k->end; /* parsed where it was first used */
    } else if (k) {
      parse_deps_first(&p, k);
      p.pos = k->end;
    } else if (t->kind == TK_KW_KERNEL || t->kind == TK_KW_FN) {
      parse_fn_item(&p);
    } else if (t->kind == TK_KW_CONST) {
      parse_const_item(&p); /* `const` without a name: its error */
    } else {
      syntax(&p, t, "expected 'kernel', 'fn' or 'const' at top level, found %s",
             tok_text(&p, t, b));
      next(&p);
      sync_item(&p);
    }
    if (p.gave_up) /* a signature nested too deep */
      skip_given_up(&p, start);
  }
  /* pass 2: bodies */
  for (uint32_t i = 0; i < p.nfns && !p.oom && !p.too_many; i++) {
    /* bound: only the kernel asked for and the functions it may call */
    if (bound && p.fns[i].f->kind != XPJ_FUNC_DEVICE &&
        strcmp(p.fns[i].f->name, bound->kernel))
      continue;
    parse_body(&p, &p.fns[i]);
  }
  if (!p.oom && !p.too_many && p.errors == 0 &&
      xpj_check_calls(m, XPJ_MAX_DEPTH, call_report, &p) && p.errors == 0)
    p.oom = true; /* errors without a report: out of memory (they passed) */
  if (!p.oom && p.errors == 0) {
    const char *msg;
    xpj_status vs = xpj_module_verify(m, &msg);
    if (vs == XPJ_ERR_NOMEM)
      p.oom = true;
    else if (vs != XPJ_OK) {
      char full[600];
      snprintf(full, sizeof full, "internal error: IR verification failed: %s",
               msg);
      report(&p, XPJ_SEV_ERROR, 0, 0, 0, full);
    }
  }
  xpj_free(p.toks);
  xpj_free(p.syms);
  xpj_free(p.fns);
  xpj_free(p.consts);
  xpj_free(p.pend);
  xpj_free(p.pstack);
  xpj_free(p.gmemo);
  xpj_free(p.gstack);
  if (p.oom || m->oom)
    return XPJ_ERR_NOMEM;
  return p.errors ? XPJ_ERR_SYNTAX : XPJ_OK;
}

xpj_status xpj_parse(xpj_module *m, const char *filename, const char *src,
                     size_t len, xpj_diags *d) {
  return parse(m, filename, src, len, d, NULL);
}

xpj_status xpj_parse_bound(xpj_module *m, const char *filename,
                           const char *src, size_t len, xpj_diags *d,
                           const xpj_binding *b) {
  if (!b || !b->kernel || (b->n && (!b->names || !b->values)))
    return XPJ_ERR_INVALID;
  return parse(m, filename, src, len, d, b);
}

xpj_status xpj_parse_file(xpj_module *m, const char *path, xpj_diags *d) {
  if (!m || !path)
    return XPJ_ERR_INVALID;
  FILE *fp = fopen(path, "rb");
  char msg[512];
  if (!fp) {
    snprintf(msg, sizeof msg, "cannot open file '%.400s': %s", path,
             strerror(errno));
    if (d)
      xpj_diags_add(d, XPJ_SEV_ERROR, path, 0, 0, NULL, msg);
    return XPJ_ERR_IO;
  }
  xpj_buf b = {0};
  char chunk[65536];
  size_t n;
  while ((errno = 0, n = fread(chunk, 1, sizeof chunk, fp)) > 0) {
    xpj_buf_put(&b, chunk, n);
    if (b.len > XPJ_MAX_SOURCE)
      break;
  }
  int rerr = ferror(fp) ? (errno ? errno : EIO) : 0;
  fclose(fp);
  if (rerr) {
    xpj_buf_free(&b);
    /* the reason: a directory (EISDIR), /proc/self/mem (EIO), ... */
    snprintf(msg, sizeof msg, "cannot read file: %s", strerror(rerr));
    if (d)
      xpj_diags_add(d, XPJ_SEV_ERROR, path, 0, 0, NULL, msg);
    return XPJ_ERR_IO;
  }
  if (b.failed) {
    xpj_buf_free(&b);
    return XPJ_ERR_NOMEM;
  }
  xpj_status st = xpj_parse(m, path, b.data ? b.data : "", b.len, d);
  xpj_buf_free(&b);
  return st;
}
