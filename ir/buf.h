/*
 * buf.h - a growable byte buffer used by the printer, the serializer and
 * the diagnostics renderer. A failed allocation makes the buffer sticky
 * failed; callers check once at the end.
 */
#ifndef XPJ_BUF_H
#define XPJ_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct xpj_buf {
  char *data;
  size_t len, cap;
  bool failed;
} xpj_buf;

void xpj_buf_put(xpj_buf *b, const void *p, size_t n);
void xpj_buf_puts(xpj_buf *b, const char *s);
void xpj_buf_printf(xpj_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void xpj_buf_u8(xpj_buf *b, uint8_t v);
void xpj_buf_u32(xpj_buf *b, uint32_t v);   /* little-endian */
void xpj_buf_u64(xpj_buf *b, uint64_t v);   /* little-endian */
void xpj_buf_str(xpj_buf *b, const char *s); /* u32 length + bytes */
/* NUL-terminates and hands the data to the caller (free with free()); the
 * buffer is left empty. Returns NULL if any append failed. */
char *xpj_buf_take(xpj_buf *b, size_t *len);
void xpj_buf_free(xpj_buf *b);

/* v in decimal at out, not NUL-terminated (at most 20 characters); the
 * number written. For texts built without printf (keys, aliases). */
size_t xpj_dec(char *out, uint64_t v);

#endif
