/* proto.c - encoding and decoding of xpjitd frames (proto.h). Pure byte
 * work: nothing here reads a socket or allocates while decoding. */
#include "proto.h"

#include "daemon.h"         /* xpd_failed_input */
#include "xpjit_codegen.h" /* XPJ_CHECK_ALL */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

const char *xpd_err_str(xpd_err e) {
  switch (e) {
  case XPD_E_OK: return "ok";
  case XPD_E_SHORT: return "truncated frame";
  case XPD_E_MAGIC: return "bad magic (not an xpjitd frame)";
  case XPD_E_VERSION: return "unsupported protocol version";
  case XPD_E_OP: return "unknown operation";
  case XPD_E_FLAGS: return "reserved flags set";
  case XPD_E_TOO_BIG: return "payload over the limit";
  case XPD_E_FIELD: return "malformed field";
  case XPD_E_DUP: return "duplicate field";
  case XPD_E_MANY: return "too many fields";
  case XPD_E_MISSING: return "required field missing";
  case XPD_E_VALUE: return "field value out of range";
  }
  return "unknown error";
}

static uint16_t rd16(const uint8_t *p) {
  return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) {
  return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

xpd_err xpd_header_decode(const uint8_t *p, size_t n, uint32_t max_payload,
                          xpd_header *h) {
  memset(h, 0, sizeof *h);
  /* judge what is there as soon as it is there: garbage is refused on its
   * first bytes, not after a timeout */
  size_t m = n < 4 ? n : 4;
  if (memcmp(p, XPD_MAGIC, m))
    return XPD_E_MAGIC;
  if (n < 5)
    return XPD_E_SHORT;
  if (p[4] != XPD_VERSION)
    return XPD_E_VERSION;
  if (n < XPD_HEADER)
    return XPD_E_SHORT;
  h->version = p[4];
  h->op = p[5];
  h->flags = rd16(p + 6);
  h->id = rd32(p + 8);
  h->len = rd32(p + 12);
  if (h->op == 0 || h->op > XPD_OP_MAX ||
      (h->op > XPD_LOOKUP && h->op < XPD_JOB))
    return XPD_E_OP;
  if (h->flags)
    return XPD_E_FLAGS;
  if (h->len > max_payload)
    return XPD_E_TOO_BIG;
  return XPD_E_OK;
}

xpd_err xpd_payload_decode(const uint8_t *p, size_t n, xpd_msg *m) {
  m->n = 0;
  size_t off = 0;
  while (off < n) {
    if (n - off < 6)
      return XPD_E_FIELD;
    uint16_t tag = rd16(p + off);
    uint32_t len = rd32(p + off + 2);
    off += 6;
    if (len > n - off)
      return XPD_E_FIELD;
    if (m->n == XPD_MAX_FIELDS)
      return XPD_E_MANY;
    for (unsigned i = 0; i < m->n; i++)
      if (m->f[i].tag == tag)
        return XPD_E_DUP;
    m->f[m->n++] = (xpd_field){tag, len, p + off};
    off += len;
  }
  return XPD_E_OK;
}

const xpd_field *xpd_find(const xpd_msg *m, uint16_t tag) {
  for (unsigned i = 0; i < m->n; i++)
    if (m->f[i].tag == tag)
      return &m->f[i];
  return NULL;
}

xpd_err xpd_get_u64(const xpd_msg *m, uint16_t tag, bool optional,
                    uint64_t *out) {
  const xpd_field *f = xpd_find(m, tag);
  if (!f) {
    *out = 0;
    return optional ? XPD_E_OK : XPD_E_MISSING;
  }
  if (f->len != 8)
    return XPD_E_FIELD;
  *out = rd64(f->val);
  return XPD_E_OK;
}

xpd_err xpd_get_str(const xpd_msg *m, uint16_t tag, bool optional,
                    char *buf, size_t size) {
  buf[0] = 0;
  const xpd_field *f = xpd_find(m, tag);
  if (!f)
    return optional ? XPD_E_OK : XPD_E_MISSING;
  if (f->len >= size || memchr(f->val, 0, f->len))
    return XPD_E_VALUE;
  memcpy(buf, f->val, f->len);
  buf[f->len] = 0;
  return XPD_E_OK;
}

xpd_err xpd_get_bytes(const xpd_msg *m, uint16_t tag, bool optional,
                      size_t max, const uint8_t **p, size_t *n) {
  *p = NULL;
  *n = 0;
  const xpd_field *f = xpd_find(m, tag);
  if (!f)
    return optional ? XPD_E_OK : XPD_E_MISSING;
  if (f->len > max)
    return XPD_E_VALUE;
  *p = f->val;
  *n = f->len;
  return XPD_E_OK;
}

static bool is_digest(const char *s) {
  if (strlen(s) != 64)
    return false;
  for (; *s; s++)
    if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
      return false;
  return true;
}

#define TRY(x)                                                             \
  do {                                                                     \
    xpd_err e_ = (x);                                                      \
    if (e_ != XPD_E_OK)                                                    \
      return e_;                                                           \
  } while (0)

xpd_err xpd_get_decode(const xpd_msg *m, bool job, xpd_get *g) {
  memset(g, 0, sizeof *g);
  TRY(xpd_get_bytes(m, XPD_F_SOURCE, false, XPD_MAX_SOURCE, &g->source,
                    &g->source_len));
  TRY(xpd_get_str(m, XPD_F_FILENAME, true, g->filename, sizeof g->filename));
  TRY(xpd_get_str(m, XPD_F_KERNEL, false, g->kernel, sizeof g->kernel));
  TRY(xpd_get_str(m, XPD_F_DTYPES, true, g->dtypes, sizeof g->dtypes));
  TRY(xpd_get_u64(m, XPD_F_NDIM, true, &g->ndim));
  TRY(xpd_get_str(m, XPD_F_TARGET, false, g->target, sizeof g->target));
  TRY(xpd_get_u64(m, XPD_F_OPT_LEVEL, true, &g->opt_level));
  if (!xpd_find(m, XPD_F_OPT_LEVEL))
    g->opt_level = 2; /* the library's default, O2 */
  TRY(xpd_get_u64(m, XPD_F_FAST_MATH, true, &g->fast_math));
  TRY(xpd_get_u64(m, XPD_F_DEBUG, true, &g->debug));
  TRY(xpd_get_u64(m, XPD_F_CHECKS, true, &g->checks));
  TRY(xpd_get_u64(m, XPD_F_CONTRACT, true, &g->contract));
  TRY(xpd_get_u64(m, XPD_F_TIMEOUT, true, &g->timeout_ms));
  TRY(xpd_get_u64(m, XPD_F_FIRST, true, &g->first));
  TRY(xpd_get_u64(m, XPD_F_FIRST_WAIT, true, &g->first_wait_ms));
  TRY(xpd_get_str(m, XPD_F_DIGEST, !job, g->digest, sizeof g->digest));
  if (!g->kernel[0] || !g->target[0] || g->ndim > 16 || g->opt_level > 3 ||
      g->fast_math > 1 || g->debug > 1 || g->contract > 1 ||
      g->first > (uint64_t)!job ||
      (g->first_wait_ms && !g->first) ||
      g->first_wait_ms > XPD_MAX_TIMEOUT_MS ||
      g->timeout_ms > XPD_MAX_TIMEOUT_MS ||
      (g->checks & ~(uint64_t)XPJ_CHECK_ALL) ||
      ((job || g->digest[0]) && !is_digest(g->digest)))
    return XPD_E_VALUE;
  return XPD_E_OK;
}

xpd_err xpd_lookup_decode(const xpd_msg *m, xpd_lookup *l) {
  memset(l, 0, sizeof *l);
  TRY(xpd_get_str(m, XPD_F_DIGEST, false, l->digest, sizeof l->digest));
  TRY(xpd_get_u64(m, XPD_F_TIMEOUT, true, &l->timeout_ms));
  TRY(xpd_get_u64(m, XPD_F_FIRST, true, &l->first));
  TRY(xpd_get_u64(m, XPD_F_FIRST_WAIT, true, &l->first_wait_ms));
  if (!is_digest(l->digest) || l->timeout_ms > XPD_MAX_TIMEOUT_MS ||
      l->first > 1 || (l->first_wait_ms && !l->first) ||
      l->first_wait_ms > XPD_MAX_TIMEOUT_MS)
    return XPD_E_VALUE;
  return XPD_E_OK;
}

/* A string sent with its NUL (at most max bytes with it): *out points
 * into the payload; "" when absent. */
static xpd_err get_cstr(const xpd_msg *m, uint16_t tag, size_t max,
                        const char **out) {
  const uint8_t *p;
  size_t n;
  *out = "";
  xpd_err e = xpd_get_bytes(m, tag, true, max, &p, &n);
  if (e != XPD_E_OK || !p)
    return e;
  if (n == 0 || p[n - 1] != 0 || memchr(p, 0, n - 1))
    return XPD_E_VALUE;
  *out = (const char *)p;
  return XPD_E_OK;
}

/* COMPILE_US beyond this (about 12 days) is not a compile time. */
#define MAX_COMPILE_US (1ull << 40)

xpd_err xpd_kernel_decode(const xpd_msg *m, xpd_kernel *k) {
  memset(k, 0, sizeof *k);
  uint64_t failed = 0, local = 0, scratch = 0, us = 0;
  TRY(xpd_get_u64(m, XPD_F_STATUS, false, &k->status));
  TRY(xpd_get_u64(m, XPD_F_FAILED, true, &failed));
  TRY(xpd_get_u64(m, XPD_F_TRANSIENT, true, &k->transient));
  TRY(xpd_get_u64(m, XPD_F_ORIGIN, true, &k->origin));
  TRY(xpd_get_bytes(m, XPD_F_BINARY, true, XPD_MAX_REPLY, &k->v.data,
                    &k->v.size));
  TRY(get_cstr(m, XPD_F_ENTRY, 256, &k->v.entry));
  TRY(get_cstr(m, XPD_F_LOG, (1u << 20) + 1, &k->v.log));
  TRY(xpd_get_u64(m, XPD_F_LOCAL, true, &local));
  TRY(xpd_get_u64(m, XPD_F_SCRATCH, true, &scratch));
  TRY(xpd_get_u64(m, XPD_F_COMPILE_US, true, &us));
  TRY(xpd_get_u64(m, XPD_F_EXPIRES, true, &k->expires_ms));
  TRY(xpd_get_str(m, XPD_F_DIGEST, true, k->digest, sizeof k->digest));
  TRY(get_cstr(m, XPD_F_COUNTERS, 4096, &k->counters));
  /* only a failure that is not transient can be remembered */
  if (k->status > 64 || failed > 1 || k->transient > 1 ||
      k->origin > XPD_FROM_REDIS || (k->digest[0] && !is_digest(k->digest)) ||
      (k->expires_ms && (!failed || k->transient)) || us > MAX_COMPILE_US)
    return XPD_E_VALUE;
  /* kept as a row keeps it (xpd_failed_input) */
  k->v.failed = failed ? xpd_failed_input((xpj_status)k->status) : 0;
  k->v.local_bytes = local;
  k->v.scratch_bytes = scratch;
  k->v.compile_ms = (double)us / 1000.0;
  return XPD_E_OK;
}

/* ---- encoding ---- */

static void reserve(xpd_buf *b, size_t more) {
  if (b->oom)
    return;
  if (more > SIZE_MAX / 2 - b->len) {
    b->oom = true;
    return;
  }
  if (b->len + more <= b->cap)
    return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + more)
    cap *= 2;
  uint8_t *p = realloc(b->p, cap);
  if (!p) {
    b->oom = true;
    return;
  }
  b->p = p;
  b->cap = cap;
}

static void wr16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static void wr32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

void xpd_begin(xpd_buf *b, xpd_op op, uint32_t id) {
  reserve(b, XPD_HEADER);
  if (b->oom)
    return;
  uint8_t *p = b->p + b->len;
  memcpy(p, XPD_MAGIC, 4);
  p[4] = XPD_VERSION;
  p[5] = (uint8_t)op;
  wr16(p + 6, 0);
  wr32(p + 8, id);
  wr32(p + 12, 0);
  b->len += XPD_HEADER;
}

void xpd_put_bytes(xpd_buf *b, uint16_t tag, const void *v, size_t n) {
  if (n > UINT32_MAX) {
    b->oom = true;
    return;
  }
  reserve(b, 6 + n);
  if (b->oom)
    return;
  uint8_t *p = b->p + b->len;
  wr16(p, tag);
  wr32(p + 2, (uint32_t)n);
  if (n)
    memcpy(p + 6, v, n);
  b->len += 6 + n;
}

void xpd_put_u64(xpd_buf *b, uint16_t tag, uint64_t v) {
  uint8_t x[8];
  for (int i = 0; i < 8; i++)
    x[i] = (uint8_t)(v >> (8 * i));
  xpd_put_bytes(b, tag, x, 8);
}

void xpd_put_str(xpd_buf *b, uint16_t tag, const char *s) {
  xpd_put_bytes(b, tag, s ? s : "", s ? strlen(s) : 0);
}

bool xpd_end(xpd_buf *b, size_t start) {
  if (b->oom || b->len - start - XPD_HEADER > UINT32_MAX)
    return false;
  wr32(b->p + start + 12, (uint32_t)(b->len - start - XPD_HEADER));
  return true;
}

void xpd_buf_free(xpd_buf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

void xpd_put_get(xpd_buf *b, const xpd_get *g) {
  xpd_put_bytes(b, XPD_F_SOURCE, g->source, g->source_len);
  xpd_put_str(b, XPD_F_FILENAME, g->filename);
  xpd_put_str(b, XPD_F_KERNEL, g->kernel);
  xpd_put_str(b, XPD_F_DTYPES, g->dtypes);
  xpd_put_u64(b, XPD_F_NDIM, g->ndim);
  xpd_put_str(b, XPD_F_TARGET, g->target);
  xpd_put_u64(b, XPD_F_OPT_LEVEL, g->opt_level);
  xpd_put_u64(b, XPD_F_FAST_MATH, g->fast_math);
  xpd_put_u64(b, XPD_F_DEBUG, g->debug);
  if (g->checks)
    xpd_put_u64(b, XPD_F_CHECKS, g->checks);
  if (g->contract)
    xpd_put_u64(b, XPD_F_CONTRACT, g->contract);
  xpd_put_u64(b, XPD_F_TIMEOUT, g->timeout_ms);
  if (g->first)
    xpd_put_u64(b, XPD_F_FIRST, g->first);
  if (g->first_wait_ms)
    xpd_put_u64(b, XPD_F_FIRST_WAIT, g->first_wait_ms);
  if (g->digest[0])
    xpd_put_str(b, XPD_F_DIGEST, g->digest);
}

void xpd_put_lookup(xpd_buf *b, const xpd_lookup *l) {
  xpd_put_str(b, XPD_F_DIGEST, l->digest);
  xpd_put_u64(b, XPD_F_TIMEOUT, l->timeout_ms);
  if (l->first)
    xpd_put_u64(b, XPD_F_FIRST, l->first);
  if (l->first_wait_ms)
    xpd_put_u64(b, XPD_F_FIRST_WAIT, l->first_wait_ms);
}

void xpd_put_kernel(xpd_buf *b, const xpd_kernel *k) {
  const xpj_cache_value *v = &k->v;
  xpd_put_u64(b, XPD_F_STATUS, k->status);
  xpd_put_u64(b, XPD_F_FAILED, v->failed != 0);
  xpd_put_u64(b, XPD_F_TRANSIENT, k->transient);
  xpd_put_u64(b, XPD_F_ORIGIN, k->origin);
  if (v->size)
    xpd_put_bytes(b, XPD_F_BINARY, v->data, v->size);
  if (v->entry && *v->entry) /* with its NUL */
    xpd_put_bytes(b, XPD_F_ENTRY, v->entry, strlen(v->entry) + 1);
  if (v->log && *v->log)
    xpd_put_bytes(b, XPD_F_LOG, v->log, strlen(v->log) + 1);
  xpd_put_u64(b, XPD_F_LOCAL, v->local_bytes);
  xpd_put_u64(b, XPD_F_SCRATCH, v->scratch_bytes);
  double us = v->compile_ms * 1000.0;
  xpd_put_u64(b, XPD_F_COMPILE_US,
              us > 0 && us <= (double)MAX_COMPILE_US ? (uint64_t)llround(us)
                                                     : 0);
  if (k->expires_ms)
    xpd_put_u64(b, XPD_F_EXPIRES, k->expires_ms);
  if (k->digest[0])
    xpd_put_str(b, XPD_F_DIGEST, k->digest);
  if (k->counters && *k->counters)
    xpd_put_bytes(b, XPD_F_COUNTERS, k->counters, strlen(k->counters) + 1);
}

void xpd_counters_str(const xpj_cache_counters *c, char *buf, size_t size) {
  size_t n = 0;
  buf[0] = 0;
#define PUT(kind, name, what)                                                \
  if (c->name != 0 && n < size) {                                           \
    int w = snprintf(buf + n, size - n, "%s%s=%.17g", n ? "," : "", #name,  \
                     (double)c->name);                                       \
    n += w > 0 ? (size_t)w : 0;                                              \
  }
  XPJ_CACHE_COUNTERS(PUT)
#undef PUT
  if (n >= size) /* cut: leave nothing half written */
    buf[0] = 0;
}

void xpd_counters_add(const char *text, xpj_cache_counters *d) {
  for (const char *p = text; p && *p;) {
    const char *eq = strchr(p, '='), *end = strchr(p, ',');
    if (!end)
      end = p + strlen(p);
    if (eq && eq < end) {
      char *stop;
      double v = strtod(eq + 1, &stop);
      size_t len = (size_t)(eq - p);
      bool ok = stop == end && v >= 0 && v < 1e15;
#define ADD(kind, name, what)                                                \
  if (ok && len == sizeof #name - 1 && !memcmp(p, #name, len))               \
    d->name += (XPJ_CACHE_COUNTER_##kind)v;
      XPJ_CACHE_COUNTERS(ADD)
#undef ADD
    }
    p = *end ? end + 1 : end;
  }
}
