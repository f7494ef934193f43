/* error.c - what the library says: the per-thread message of the last
 * failed call (a fixed buffer per thread: nothing to free when a thread
 * ends, and setting a message never fails), warnings, and the versions
 * string that names this build. */
#include "rt.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MSG_MAX 8192

static _Thread_local char last_msg[MSG_MAX];

const char *xpj_last_error(void) { return last_msg; }

/* msg into out (size bytes), control characters but newline and tab
 * written \xNN: a message quotes what callers and files gave (dtypes,
 * names, paths), which must not reach a terminal as escape sequences nor
 * vanish from what is printed; cut with "..." when it does not fit. */
static void clean_into(char *out, size_t size, const char *msg) {
  static const char hex[] = "0123456789abcdef";
  size_t w = 0;
  for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
    bool ctl = (*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f;
    if (w + (ctl ? 4 : 1) + 4 > size) {
      memcpy(out + w, "...", 4);
      return;
    }
    if (ctl) {
      out[w++] = '\\';
      out[w++] = 'x';
      out[w++] = hex[*p >> 4];
      out[w++] = hex[*p & 15];
    } else {
      out[w++] = (char)*p;
    }
  }
  out[w] = 0;
}

xpj_status rt_err(xpj_status st, const char *fmt, ...) {
  char tmp[MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  clean_into(last_msg, sizeof last_msg, tmp);
  return st;
}

xpj_status rt_err_str(xpj_status st, const char *msg) {
  char tmp[MSG_MAX];
  if (msg == last_msg) { /* (cleaned already; written from a copy) */
    memcpy(tmp, last_msg, sizeof tmp);
    msg = tmp;
  }
  clean_into(last_msg, sizeof last_msg, msg ? msg : "");
  return st;
}

uint64_t rt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- warnings -------------------------------------------------------- */

static pthread_mutex_t warn_mu = PTHREAD_MUTEX_INITIALIZER;
static void (*warn_fn)(void *, const char *);
static void *warn_ud;

void xpj_set_warning_handler(void (*fn)(void *ud, const char *msg),
                             void *ud) {
  pthread_mutex_lock(&warn_mu);
  warn_fn = fn;
  warn_ud = ud;
  pthread_mutex_unlock(&warn_mu);
}

void rt_warn_atfork(int phase) {
  if (phase == RT_FORK_PREPARE)
    pthread_mutex_lock(&warn_mu);
  else
    pthread_mutex_unlock(&warn_mu);
}

/* The handler is called without warn_mu held, so that it may itself set a
 * handler, warn, or use the library. */
static void deliver(const char *msg) {
  pthread_mutex_lock(&warn_mu);
  void (*fn)(void *, const char *) = warn_fn;
  void *ud = warn_ud;
  pthread_mutex_unlock(&warn_mu);
  if (fn)
    fn(ud, msg);
  else
    xpj_log_warning(msg);
}

/* Warnings raised while this thread builds a first-level entry are held
 * until the entry is settled: a handler that asks for the same kernel
 * would otherwise wait for itself. */
static _Thread_local int warn_hold;
static _Thread_local char *held[8];
static _Thread_local unsigned nheld, nlost;

void rt_warn(const char *fmt, ...) {
  char raw[1024], msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  clean_into(msg, sizeof msg, raw);
  if (!warn_hold) {
    deliver(msg);
    return;
  }
  char *copy = nheld < 8 ? strdup(msg) : NULL;
  if (copy)
    held[nheld++] = copy;
  else
    nlost++;
}

void rt_hold_warnings(void) { warn_hold++; }

void rt_release_warnings(void) {
  if (--warn_hold > 0)
    return;
  char *list[8];
  unsigned n = nheld, lost = nlost;
  memcpy(list, held, n * sizeof *list);
  nheld = nlost = 0;
  for (unsigned i = 0; i < n; i++) {
    deliver(list[i]);
    free(list[i]);
  }
  if (lost) {
    char msg[96];
    snprintf(msg, sizeof msg, "(%u more warnings)", lost);
    deliver(msg);
  }
}

/* ---- versions ---------------------------------------------------------- */

size_t xpj_versions_str(char *buf, size_t size) {
  return (size_t)snprintf(buf, size, "xpjit=%s;llvm=%s;abi=%u;codegen=%u",
                          XPJ_VERSION_STRING, xpj_llvm_version(),
                          xpj_abi_version(), xpj_codegen_revision());
}
