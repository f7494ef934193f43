/*
 * cli.h - what the files of xpjit-cli share: the option parser that every
 * command goes through (getopt_long), the one parser of --dtype and
 * --const (cli_args.c), colour, diagnostics, tables and JSON output
 * (cli_out.c), and the command groups in files of their own (cli_cache.c,
 * cli_daemon.c).
 */
#ifndef XPJ_CLI_H
#define XPJ_CLI_H
#include "xpjit.h"

#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define EXIT_INPUT 1 /* errors in the input, problems found */
#define EXIT_USAGE 2

extern const char *cli_prog; /* "xpjit-cli" */

/* ---- options (cli_args.c) ------------------------------------------- */

/* An option of a command: its long name (NULL: none), its letter or, for
 * an option with a long name only, a code from CLI_LONG up, and whether it
 * takes a value. A table ends with {0}. Every command also takes -h,
 * --help, --version and --color=WHEN, which the parser handles itself. */
typedef struct cli_opt {
  const char *name;
  int key;
  bool value;
} cli_opt;

enum {
  CLI_LONG = 256,  /* the first code of an option with a long name only */
  CLI_OPERAND = 0, /* an operand, in arg */
  CLI_DONE = -1,   /* no more arguments */
  CLI_EXIT = -2,   /* --help, --version or a usage error, handled and
                      printed: exit with status */
};

#define CLI_MAX_OPTS 32

/* One parse of a command's arguments: argv[0] is the command's word,
 * options may come anywhere among the operands, "--" ends them. */
typedef struct cli_args {
  const char *cmd; /* "ir", "cache stats": names the command in messages */
  void (*usage)(FILE *out);
  int argc;
  char **argv;
  const char *arg; /* the value of the option returned, or the operand */
  bool exited;     /* CLI_EXIT was returned: exit with status */
  int status;
  int rest;        /* after "--": the index of the next operand, else 0 */
  struct option longs[CLI_MAX_OPTS + 4];
  char shorts[3 * CLI_MAX_OPTS + 8];
} cli_args;

void cli_args_init(cli_args *a, const char *cmd, void (*usage)(FILE *out),
                   const cli_opt *opts, int argc, char **argv);
/* The next option's key, CLI_OPERAND, CLI_DONE or CLI_EXIT: a command
 * reads its arguments with while ((k = cli_next(&a)) >= 0) and exits
 * with a.status when a.exited. */
int cli_next(cli_args *a);
/* After the operand just returned (a command group's subcommand): the
 * arguments from that operand on, for the subcommand's own parse. */
char **cli_rest(const cli_args *a, int *argc);
/* "xpjit-cli CMD: MESSAGE" on stderr, then the usage; EXIT_USAGE. */
int cli_usage_error(const cli_args *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "xpjit-cli CMD: MESSAGE" on stderr; EXIT_USAGE. */
int cli_bad_value(const cli_args *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* s as an integer from min to max (decimal, the whole string). */
bool cli_number(const char *s, long min, long max, long *out);
/* Whether out (an -o path; "-" is standard output) is the file in
 * (both exist, the same device and inode): writing it would destroy the
 * input before, or while, it is read. */
bool cli_same_file(const char *in, const char *out);

/* Whether path is one of the files of the user's cache (the default one,
 * XPJIT_CACHE_DIR's, and also cache_path when not NULL), as
 * xpj_cache_owns_file counts them. No -o may replace one (a bundle or a
 * binary written over the database or its key loses every entry). */
bool cli_is_cache_file(const char *path, const char *cache_path);

/* Whether path may be an -o of who: nothing there, or a regular file that
 * is no file of the user's cache (cli_is_cache_file; cache_path as
 * there). Never a link, a FIFO (a write would wait for a reader), a
 * device or a directory, nor "-" or "" (the outputs that ask are SQLite
 * files: cli_write_output takes "-" as standard output first). Says why
 * not (exit status 1). */
bool cli_output_ok(const char *who, const char *path, const char *cache_path);

/* Files a command is writing and must not leave behind if SIGINT, SIGTERM
 * or SIGHUP ends it: removed by the signal's handler (unlink and rmdir,
 * which it may call), which then ends the process as the signal would.
 * cli_temp_add registers path (a file, or with dir an empty directory
 * removed after the files), cli_temp_drop forgets it once it is renamed
 * into place or removed. At most 16 at a time; the names are copied. */
void cli_temp_add(const char *path, bool dir);
void cli_temp_drop(const char *path);

/* Writes data to path ("-": standard output) as every -o does: checked
 * by cli_output_ok, into PATH.tmp.PID renamed over path when it is whole,
 * so that a full disk, a file size limit or a signal never leaves a
 * half-written output (the temporary is removed). 0 or EXIT_INPUT, with
 * the message said. */
int cli_write_output(const char *who, const char *path, const void *data,
                     size_t len, const char *cache_path);

/* ---- --target and --check (cli_args.c) ------------------------------- */

/* One target of emit and bundle build: xpj_target_parse's, and in the
 * form with a CPU feature list (cpu:NAME:+f,-g) no empty item, which
 * the library would take as it is (a key of its own for the same code).
 * false with the reason in err. */
bool cli_target_ok(const char *t, xpj_target *out, char *err, size_t size);
/* --check=bounds|all|none (emit, bundle build) into *checks: 0, or
 * EXIT_USAGE with a message (an unknown name, an empty value). */
int cli_checks_value(const cli_args *a, unsigned *checks);

/* ---- --dtype and --const (cli_args.c) -------------------------------- */

/* One parser for ir, emit and bundle build, with the library's rules
 * (rt_parse_dtypes, runtime/program.c): NAME=VALUE binds a parameter by
 * name; values alone bind the type parameters in declaration order
 * (--dtype f32,i64; never mixed with names); after NAME=VALUE, more
 * values separated by commas make a list (T=f32,f64: bundle build's one
 * binary per value; ir and emit take one). An option may repeat; the
 * values of all add up as if joined with commas. --dtype takes types,
 * --const integers or true/false. */
#define CLI_MAX_BINDINGS 16
#define CLI_MAX_VALUES 64

typedef struct cli_binding {
  const char *name; /* "" for a type given by position */
  bool is_const;
  unsigned n;
  const char *values[CLI_MAX_VALUES];
} cli_binding;

typedef struct cli_bindings {
  const cli_args *args; /* for messages */
  bool lists;           /* a list of values per parameter (bundle build) */
  bool positional;      /* --dtype gives its types by position */
  unsigned n;
  cli_binding b[CLI_MAX_BINDINGS];
  cli_binding *last[2]; /* the binding a bare value adds to (type, const) */
  char *text[2 * CLI_MAX_BINDINGS]; /* copies of the options' values */
  unsigned ntext;
} cli_bindings;

void cli_bindings_init(cli_bindings *bs, const cli_args *a, bool lists);
/* Adds the value of a --dtype or --const option; 0, or EXIT_USAGE with a
 * message. */
int cli_bindings_add(cli_bindings *bs, bool is_const, const char *value);
void cli_bindings_free(cli_bindings *bs);
/* The binding of f's generic parameter i (xpj_func_generic_at's order), or
 * NULL when none is given. */
const cli_binding *cli_bindings_for(const cli_bindings *bs, const xpj_func *f,
                                    unsigned i);

/* The value text of --const NAME=TEXT as the type of f's const
 * parameter NAME (0 when f has none: xpj_specialize reports the name);
 * EXIT_INPUT, with a diagnostic naming file, when it does not fit. */
int cli_const_value(const char *name, const char *text, const xpj_func *f,
                    const char *kernel, const char *file, int64_t *out);

/* The bindings as xpj_specialize takes them (ir, emit). */
typedef struct cli_spec {
  xpj_spec spec;
  const char *names[CLI_MAX_BINDINGS];
  xpj_scalar types[CLI_MAX_BINDINGS];
  const char *const_names[CLI_MAX_BINDINGS];
  int64_t const_values[CLI_MAX_BINDINGS];
} cli_spec;

/* Fills out for kernel in m: types by position get their parameters'
 * names, const values are read as their parameters' types; a name the
 * kernel does not have is left for xpj_specialize to report. 0, or
 * EXIT_INPUT with a diagnostic naming file. */
int cli_bindings_spec(const cli_bindings *bs, const xpj_module *m,
                      const char *kernel, const char *file, unsigned ndim,
                      cli_spec *out);

/* ---- colour, diagnostics, tables (cli_out.c) ------------------------- */

/* --color=auto|always|never; false for another value. auto (the default)
 * colours a stream that is a terminal, unless NO_COLOR is set and not
 * empty or TERM is dumb. */
bool cli_color_set(const char *when);
bool cli_colors(FILE *f);
/* seq when f gets colour, else "". */
const char *cli_sgr(FILE *f, const char *seq);
#define SGR_BOLD "\033[1m"
#define SGR_RED "\033[1;31m"
#define SGR_GREEN "\033[1;32m"
#define SGR_YELLOW "\033[1;33m"
#define SGR_MAGENTA "\033[1;35m"
#define SGR_CYAN "\033[1;36m"
#define SGR_RESET "\033[0m"

/* Diagnostics on stderr like clang's, coloured when stderr is: bold
 * file:line:col, red "error:", magenta "warning:", a green caret. */
void cli_print_diags(const xpj_diags *d);
/* One diagnostic of the tool's own, "FILE: error: MESSAGE" (FILE may be
 * NULL), rendered the same way, MESSAGE through cli_clean (lines kept);
 * an error is kept as cli_error keeps it. */
void cli_diag(xpj_severity sev, const char *file, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A text table on stdout: columns as wide as their widest cell (the last
 * one unpadded), right-aligned where the header starts with '>', the
 * header bold on a terminal. Cells are shown through cli_clean (no line
 * breaks either), so that every row stays aligned. */
#define CLI_TABLE_MAX_COLS 12
typedef struct cli_table {
  unsigned ncols, nrows, cap;
  const char *head[CLI_TABLE_MAX_COLS];
  char **cells; /* nrows * ncols, malloc'd */
  bool failed;  /* out of memory */
} cli_table;

void cli_table_init(cli_table *t, unsigned ncols, const char *const *head);
/* One row of ncols cells (copied). */
void cli_table_row(cli_table *t, const char *const *cells);
/* Prints and frees the table; EXIT_INPUT when memory ran out. */
int cli_table_print(cli_table *t);

/* ---- text of a file (cli_out.c) ---------------------------------------- */

/* Text that a file (a bundle, a cache, a Redis value) may hold, or a
 * library message that quotes one, fit to print: control characters (C0,
 * DEL, C1; with lines not '\n' and '\t') and bytes that are not part of
 * a well-formed UTF-8 sequence become '?', so that no escape sequence of
 * a foreign file reaches a terminal. malloc'd (s NULL: ""); NULL when
 * memory ran out. The one helper for it: tables, cli_print_clean,
 * cli_error, cli_diag and the library's warnings go through it. */
char *cli_clean(const char *s, bool lines);
/* cli_clean(s, lines) on f. */
void cli_fputs_clean(FILE *f, const char *s, bool lines);
/* cli_clean(s, false) on stdout. */
void cli_print_clean(const char *s);

/* ---- JSON (cli_out.c) -------------------------------------------------- */

/* s as a JSON string (NULL: null): bytes that are not part of a
 * well-formed UTF-8 sequence become U+FFFD, so the document is always
 * valid JSON. */
json_t *cli_jstr(const char *s);
/* v as a JSON integer (above INT64_MAX, which JSON integers of jansson
 * cannot hold, a number with a fraction part). */
json_t *cli_jint(uint64_t v);
/* Milliseconds, to the microsecond (a time, not 17 digits of noise);
 * null when that is not a finite number (infinite, NaN, or beyond about
 * 1.8e305 ms: a damaged or foreign file), never NULL but for memory. */
json_t *cli_jms(double ms);
/* Sets o[key] to v (stolen); false when either is NULL or memory ran out
 * (o is then released by the caller). */
bool cli_jset(json_t *o, const char *key, json_t *v);
/* Prints doc (stolen) on one line on stdout; 0, or EXIT_INPUT when doc is
 * NULL (memory ran out making it) or stdout cannot be written. */
int cli_json_print(json_t *doc);

/* ---- failures (cli_out.c) ----------------------------------------------- */

/* "xpjit-cli WHO: MESSAGE" (WHO NULL: "xpjit-cli: MESSAGE") on stderr,
 * MESSAGE through cli_clean (lines kept), the message kept as it is for
 * cli_json_finish. Every error of a command that takes
 * --json goes through here (usage errors through cli_bad_value and
 * cli_usage_error, which call it). */
void cli_error(const char *who, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cli_verror(const char *who, const char *fmt, va_list ap);
/* --json was given: a failure must print a JSON document. */
void cli_json_wanted(void);
/* A command's exit status rc, at its end: with --json, a failure that
 * printed no document prints {"error": the last error} on stdout. */
int cli_json_finish(int rc);

/* ---- the command groups ------------------------------------------------ */

/* xpjit-cli cache ..., bundle ... (cli_cache.c), daemon ... (cli_daemon.c):
 * argv[0] is the group's word. */
int cli_cache(int argc, char **argv);
int cli_bundle(int argc, char **argv);
int cli_daemon(int argc, char **argv);
#endif
