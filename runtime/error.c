/* error.c - the per-thread message of the last failed call. A fixed
 * buffer per thread: nothing to free when a thread ends, and setting a
 * message never fails. */
#include "rt.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MSG_MAX 8192

static _Thread_local char last_msg[MSG_MAX];

const char *xpj_last_error(void) { return last_msg; }

xpj_status rt_err(xpj_status st, const char *fmt, ...) {
  char tmp[MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n >= (int)sizeof tmp)
    memcpy(tmp + sizeof tmp - 4, "...", 4);
  memcpy(last_msg, tmp, sizeof tmp);
  return st;
}

xpj_status rt_err_str(xpj_status st, const char *msg) {
  size_t n = strlen(msg ? msg : "");
  if (n >= MSG_MAX) {
    memcpy(last_msg, msg, MSG_MAX - 4);
    memcpy(last_msg + MSG_MAX - 4, "...", 4);
  } else {
    memcpy(last_msg, msg ? msg : "", n + 1);
  }
  return st;
}

uint64_t rt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
