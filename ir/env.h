/*
 * env.h - the process's settings and its log: every XPJIT_* environment
 * variable in one table (name, default, values, effect, who reads it),
 * which docs/environment.md is checked against and `xpjit-cli env` prints;
 * parsers for their values that tell unset, valid and malformed apart; a
 * once-per-process flag per variable, so that a bad value is reported
 * once, not at every context; and XPJIT_LOG, the library's log
 * (error, warn, info, debug; stderr or XPJIT_LOG_FILE). Internal.
 *
 * The layers report a bad value in their own way (the runtime's
 * warnings, the cache's warning handler); this file only decides whether
 * it is the first time.
 */
#ifndef XPJ_ENV_H
#define XPJ_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct xpj_env_var {
  const char *name;   /* "XPJIT_CPU_THREADS" */
  const char *dflt;   /* the value when unset, in words */
  const char *values; /* what it takes */
  const char *effect; /* one sentence */
  const char *reader; /* "library", "xpjitd", "tests", ... */
} xpj_env_var;

extern const xpj_env_var xpj_env_vars[];
extern const size_t xpj_env_nvars;

/* The table's entry of name, or NULL. */
const xpj_env_var *xpj_env_find(const char *name);
/* getenv(name), NULL when unset or empty. */
const char *xpj_env(const char *name);
/* True the first time it is called for name in this process (a warning
 * about its value is due); false after, and for names not in the table. */
bool xpj_env_first_complaint(const char *name);

/* name's value: 0 when unset or empty; 1 with *out set when it is a
 * decimal integer in [lo, hi]; -1 when it is not (*out untouched). */
int xpj_env_uint(const char *name, uint64_t lo, uint64_t hi, uint64_t *out);
/* name's value among words (NULL-terminated; several spellings of one
 * choice map through the caller): its index; -1 when unset or empty; -2
 * when it is none of them. */
int xpj_env_word(const char *name, const char *const *words);
/* on/off switches: "1", "on", "yes", "true" and "0", "off", "no",
 * "false": 1 or 0; dflt when unset; -1 when it is none of them. */
int xpj_env_bool(const char *name, int dflt);

/* The XPJIT_* names of environ not in the table, ", "-separated, in buf
 * ("" when none); each with the known name it most resembles. Like
 * snprintf, returns the length of the whole list; a buffer too small
 * holds the names that fit whole. */
size_t xpj_env_unknown(char *buf, size_t size);

/* ---- the log ---------------------------------------------------------- */

typedef enum xpj_log_level {
  XPJ_LOG_OFF = 0,
  XPJ_LOG_ERROR = 1,
  XPJ_LOG_WARN = 2, /* the default */
  XPJ_LOG_INFO = 3,
  XPJ_LOG_DEBUG = 4
} xpj_log_level;

/* XPJIT_LOG's level (read once per process). */
xpj_log_level xpj_log_level_now(void);
static inline bool xpj_log_on(xpj_log_level l) {
  return l <= xpj_log_level_now();
}
/* One line "xpjit: LEVEL: MESSAGE" on stderr, or with the time and the
 * process id in XPJIT_LOG_FILE; nothing when l is above XPJIT_LOG, and
 * errors only when XPJIT_LOG is set (unset: warnings only). Each
 * line is one write(), so the lines of many processes sharing one file
 * do not mix. */
void xpj_log(xpj_log_level l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A warning without a handler: xpj_log(XPJ_LOG_WARN, "%s", msg), as
 * "xpjit: warning: MSG" on stderr. */
void xpj_log_warning(const char *msg);
/* Whether fd, opened from path with O_NOFOLLOW for a log (XPJIT_LOG_FILE,
 * xpjitd's --log), may take its lines: a regular file of the effective
 * user that nobody else may write, with one name. When it may not, or
 * when fd < 0 (the open failed, errno says why), why says what is at path
 * (a link, a FIFO, whose, its mode) and the fix, naming setting. */
bool xpj_log_file_fit(int fd, const char *path, const char *setting,
                      char *why, size_t size);
/* A malformed XPJIT_LOG or XPJIT_LOG_FILE, once: the runtime warns with
 * it at the first context ("" when none). */
const char *xpj_log_setting_problem(void);

#endif
