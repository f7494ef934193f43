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
static pthread_cond_t warn_cv = PTHREAD_COND_INITIALIZER;
static void (*warn_fn)(void *, const char *);
static void *warn_ud;
/* Handler calls in flight, under warn_mu: warn_gen counts the handlers set;
 * cur_calls are calls of the current one, old_calls those of any handler
 * replaced since (a call knows which by the generation it started with).
 * xpj_set_warning_handler waits (warn_cv) until old_calls is 0, so that
 * once it returns no thread is in the old handler or about to call it and
 * its ud may be freed. */
static uint64_t warn_gen;
static unsigned cur_calls, old_calls;
/* Handler calls this thread is inside (a handler may warn again) */
static _Thread_local unsigned in_handler;

void xpj_set_warning_handler(void (*fn)(void *ud, const char *msg),
                             void *ud) {
  pthread_mutex_lock(&warn_mu);
  warn_fn = fn;
  warn_ud = ud;
  warn_gen++;
  old_calls += cur_calls;
  cur_calls = 0;
  /* From inside a handler it does not wait: it would wait for itself, or
   * for a handler on another thread that waits for this one (the header
   * says the old ud must then outlive the calls in flight). */
  while (old_calls && !in_handler)
    pthread_cond_wait(&warn_cv, &warn_mu);
  pthread_mutex_unlock(&warn_mu);
}

/* Around fork() (the process-wide fork handlers): warn_mu held across it,
 * never waited for there. The child has only the forking thread: the calls
 * in flight are its own (old from now on, so that each one's return counts
 * itself off), and warn_cv, which other threads may have been waiting on,
 * is made anew. */
void rt_warn_atfork(int phase) {
  if (phase == RT_FORK_PREPARE) {
    pthread_mutex_lock(&warn_mu);
    return;
  }
  if (phase == RT_FORK_CHILD) {
    warn_gen++;
    cur_calls = 0;
    old_calls = in_handler;
    pthread_cond_init(&warn_cv, NULL);
  }
  pthread_mutex_unlock(&warn_mu);
}

/* The handler is called without warn_mu held, so that it may itself set a
 * handler, warn, or use the library; the call is counted in flight until it
 * returns (see warn_gen). */
static void deliver(const char *msg) {
  pthread_mutex_lock(&warn_mu);
  void (*fn)(void *, const char *) = warn_fn;
  void *ud = warn_ud;
  uint64_t gen = warn_gen;
  if (fn)
    cur_calls++;
  pthread_mutex_unlock(&warn_mu);
  if (!fn) {
    xpj_log_warning(msg);
    return;
  }
  in_handler++;
  fn(ud, msg);
  in_handler--;
  pthread_mutex_lock(&warn_mu);
  if (gen == warn_gen)
    cur_calls--;
  else if (--old_calls == 0)
    pthread_cond_broadcast(&warn_cv);
  pthread_mutex_unlock(&warn_mu);
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
  if (!buf) /* (as snprintf(NULL, 0): the length only) */
    size = 0;
  return (size_t)snprintf(buf, size, "xpjit=%s;llvm=%s;abi=%u;codegen=%u",
                          XPJ_VERSION_STRING, xpj_llvm_version(),
                          xpj_abi_version(), xpj_codegen_revision());
}
