/* buf.c - growable byte buffer (see buf.h). */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *xpj_realloc(void *p, size_t n);
void xpj_free(void *p);

static bool reserve(xpj_buf *b, size_t extra) {
  if (b->failed)
    return false;
  if (b->len + extra + 1 <= b->cap)
    return true;
  size_t ncap = b->cap ? b->cap : 256;
  while (ncap < b->len + extra + 1) {
    if (ncap > SIZE_MAX / 2) {
      b->failed = true;
      return false;
    }
    ncap *= 2;
  }
  char *p = xpj_realloc(b->data, ncap);
  if (!p) {
    b->failed = true;
    return false;
  }
  b->data = p;
  b->cap = ncap;
  return true;
}

void xpj_buf_put(xpj_buf *b, const void *p, size_t n) {
  if (n == 0 || !reserve(b, n))
    return;
  memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = 0;
}

void xpj_buf_puts(xpj_buf *b, const char *s) { xpj_buf_put(b, s, strlen(s)); }

void xpj_buf_printf(xpj_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char small[256];
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->failed = true;
    return;
  }
  if ((size_t)n < sizeof small) {
    xpj_buf_put(b, small, (size_t)n);
    return;
  }
  if (!reserve(b, (size_t)n))
    return;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void xpj_buf_u8(xpj_buf *b, uint8_t v) { xpj_buf_put(b, &v, 1); }

void xpj_buf_u32(xpj_buf *b, uint32_t v) {
  uint8_t p[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                  (uint8_t)(v >> 24)};
  xpj_buf_put(b, p, 4);
}

void xpj_buf_u64(xpj_buf *b, uint64_t v) {
  xpj_buf_u32(b, (uint32_t)v);
  xpj_buf_u32(b, (uint32_t)(v >> 32));
}

void xpj_buf_str(xpj_buf *b, const char *s) {
  size_t n = strlen(s);
  xpj_buf_u32(b, (uint32_t)n);
  xpj_buf_put(b, s, n);
}

char *xpj_buf_take(xpj_buf *b, size_t *len) {
  if (!b->failed && !b->data)
    reserve(b, 0);
  if (b->failed) {
    xpj_buf_free(b);
    return NULL;
  }
  b->data[b->len] = 0;
  char *d = b->data;
  if (len)
    *len = b->len;
  b->data = NULL;
  b->len = b->cap = 0;
  return d;
}

void xpj_buf_free(xpj_buf *b) {
  xpj_free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
  b->failed = false;
}

size_t xpj_dec(char *out, uint64_t v) {
  /* (most are one or two digits: lengths, flags, ndim) */
  if (v < 10) {
    out[0] = (char)('0' + v);
    return 1;
  }
  if (v < 100) {
    out[0] = (char)('0' + v / 10);
    out[1] = (char)('0' + v % 10);
    return 2;
  }
  char t[24];
  size_t n = 0;
  do
    t[n++] = (char)('0' + v % 10);
  while ((v /= 10));
  for (size_t i = 0; i < n; i++)
    out[i] = t[n - 1 - i];
  return n;
}
