/*
 * fuzz_daemon_frame.c - libFuzzer target for the xpjitd frame codec
 * (runtime/proto.h, docs/protocol.md): the input is what a peer sends, a
 * 16-byte header and then a payload.
 *
 *   - the header is decoded with the request and the reply limits, and
 *     every prefix of it too: a prefix never decodes as a whole header,
 *     and what passes the request limit passes the reply limit;
 *   - the bytes after the header are decoded as a payload; a payload that
 *     decodes covers its bytes exactly with distinct tags, and re-encoding
 *     its fields gives back the same bytes (the whole frame, when the
 *     header decoded and its length is the payload's);
 *   - the payload is decoded as a GET, a JOB and a KERNEL; whatever
 *     decodes is encoded again (xpd_put_get, xpd_put_kernel) and must
 *     decode to equal values.
 * A mismatch abort()s; nothing may crash or leak.
 */
#include "proto.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                           \
  do {                                                                     \
    if (!(c))                                                              \
      abort();                                                             \
  } while (0)

static void check_header(const uint8_t *data, size_t size) {
  xpd_header hq, hr;
  xpd_err eq = xpd_header_decode(data, size, XPD_MAX_REQUEST, &hq);
  xpd_err er = xpd_header_decode(data, size, XPD_MAX_REPLY, &hr);
  if (eq == XPD_E_OK) {
    CHECK(er == XPD_E_OK);
    CHECK(hq.len <= XPD_MAX_REQUEST);
    CHECK(!memcmp(&hq, &hr, sizeof hq));
  }
  if (er == XPD_E_OK) {
    CHECK(size >= XPD_HEADER);
    CHECK(hr.version == XPD_VERSION && hr.flags == 0);
    CHECK(hr.op >= XPD_HELLO && hr.op <= XPD_OP_MAX);
    CHECK(hr.op <= XPD_LOOKUP || hr.op >= XPD_JOB);
    CHECK(hr.len <= XPD_MAX_REPLY);
    CHECK(eq == XPD_E_OK || (eq == XPD_E_TOO_BIG && hr.len > XPD_MAX_REQUEST));
  } else {
    CHECK(eq == er);
  }
  /* a cut header is never whole; garbage shows in its first bytes */
  size_t n = size < XPD_HEADER ? size : XPD_HEADER - 1;
  for (size_t k = 0; k <= n; k++) {
    xpd_header h;
    xpd_err e = xpd_header_decode(data, k, XPD_MAX_REPLY, &h);
    CHECK(e == XPD_E_SHORT || e == XPD_E_MAGIC || e == XPD_E_VERSION);
    if (e != XPD_E_SHORT)
      CHECK(er == e);
  }
}

/* A payload decoded: its fields tile the bytes, and re-encoding them
 * gives the same bytes. With a header of the right length, the same for
 * the whole frame. */
static void check_payload(const uint8_t *frame, size_t size,
                          const uint8_t *p, size_t n, const xpd_msg *m) {
  CHECK(m->n <= XPD_MAX_FIELDS);
  size_t off = 0;
  for (unsigned i = 0; i < m->n; i++) {
    CHECK(m->f[i].val == p + off + 6);
    off += 6 + m->f[i].len;
    CHECK(off <= n);
    for (unsigned j = 0; j < i; j++)
      CHECK(m->f[j].tag != m->f[i].tag);
    CHECK(xpd_find(m, m->f[i].tag) == &m->f[i]);
  }
  CHECK(off == n);
  xpd_header h;
  bool whole = frame &&
               xpd_header_decode(frame, size, XPD_MAX_REPLY, &h) ==
                   XPD_E_OK &&
               h.len == n;
  xpd_buf b = {0};
  xpd_begin(&b, whole ? (xpd_op)h.op : XPD_PING, whole ? h.id : 0);
  for (unsigned i = 0; i < m->n; i++)
    xpd_put_bytes(&b, m->f[i].tag, m->f[i].val, m->f[i].len);
  if (xpd_end(&b, 0)) {
    CHECK(b.len == XPD_HEADER + n);
    CHECK(!memcmp(b.p + XPD_HEADER, p, n));
    if (whole)
      CHECK(!memcmp(b.p, frame, size));
  }
  xpd_buf_free(&b);
}

static bool same_bytes(const uint8_t *a, size_t an, const uint8_t *b,
                       size_t bn) {
  return an == bn && (!an || !memcmp(a, b, an));
}

/* Encodes what decoded and decodes it again: equal values. */
static void round_trip_get(const xpd_get *g, bool job) {
  xpd_buf b = {0};
  xpd_begin(&b, job ? XPD_JOB : XPD_GET, 1);
  xpd_put_get(&b, g);
  if (!xpd_end(&b, 0)) {
    xpd_buf_free(&b);
    return;
  }
  xpd_header h;
  CHECK(xpd_header_decode(b.p, b.len, XPD_MAX_REQUEST, &h) == XPD_E_OK);
  CHECK(h.len == b.len - XPD_HEADER);
  xpd_msg m;
  CHECK(xpd_payload_decode(b.p + XPD_HEADER, h.len, &m) == XPD_E_OK);
  xpd_get g2;
  CHECK(xpd_get_decode(&m, job, &g2) == XPD_E_OK);
  CHECK(same_bytes(g->source, g->source_len, g2.source, g2.source_len));
  CHECK(!strcmp(g->filename, g2.filename));
  CHECK(!strcmp(g->kernel, g2.kernel));
  CHECK(!strcmp(g->dtypes, g2.dtypes));
  CHECK(!strcmp(g->target, g2.target));
  CHECK(!strcmp(g->digest, g2.digest));
  CHECK(g->ndim == g2.ndim && g->opt_level == g2.opt_level &&
        g->fast_math == g2.fast_math && g->debug == g2.debug &&
        g->timeout_ms == g2.timeout_ms && g->checks == g2.checks &&
        g->contract == g2.contract && g->first == g2.first);
  xpd_buf_free(&b);
}

static void round_trip_lookup(const xpd_lookup *l) {
  xpd_buf b = {0};
  xpd_begin(&b, XPD_LOOKUP, 1);
  xpd_put_lookup(&b, l);
  if (!xpd_end(&b, 0)) {
    xpd_buf_free(&b);
    return;
  }
  xpd_msg m;
  CHECK(xpd_payload_decode(b.p + XPD_HEADER, b.len - XPD_HEADER, &m) ==
        XPD_E_OK);
  xpd_lookup l2;
  CHECK(xpd_lookup_decode(&m, &l2) == XPD_E_OK);
  CHECK(!strcmp(l->digest, l2.digest) && strlen(l2.digest) == 64);
  CHECK(l->timeout_ms == l2.timeout_ms && l->first == l2.first);
  xpd_buf_free(&b);
}

static void round_trip_kernel(const xpd_kernel *k) {
  xpd_buf b = {0};
  xpd_begin(&b, XPD_KERNEL, 2);
  xpd_put_kernel(&b, k);
  if (!xpd_end(&b, 0)) {
    xpd_buf_free(&b);
    return;
  }
  xpd_header h;
  CHECK(xpd_header_decode(b.p, b.len, XPD_MAX_REPLY, &h) == XPD_E_OK);
  xpd_msg m;
  CHECK(xpd_payload_decode(b.p + XPD_HEADER, h.len, &m) == XPD_E_OK);
  xpd_kernel k2;
  CHECK(xpd_kernel_decode(&m, &k2) == XPD_E_OK);
  CHECK(k->status == k2.status && k->v.failed == k2.v.failed &&
        k->transient == k2.transient && k->origin == k2.origin);
  CHECK(same_bytes(k->v.data, k->v.size, k2.v.data, k2.v.size));
  CHECK(!strcmp(k->v.log, k2.v.log));
  CHECK(!strcmp(k->v.entry, k2.v.entry));
  CHECK(!strcmp(k->counters, k2.counters));
  /* what a daemon does with a worker's counters */
  xpj_cache_counters d = {0};
  xpd_counters_add(k->counters, &d);
  CHECK(!strcmp(k->digest, k2.digest));
  CHECK(k->v.local_bytes == k2.v.local_bytes &&
        k->v.scratch_bytes == k2.v.scratch_bytes &&
        k->v.compile_ms == k2.v.compile_ms && k->expires_ms == k2.expires_ms);
  xpd_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  check_header(data, size);
  /* the payload: after a header, or the whole input when it is shorter */
  const uint8_t *p = size >= XPD_HEADER ? data + XPD_HEADER : data;
  size_t n = size >= XPD_HEADER ? size - XPD_HEADER : size;
  static xpd_msg m; /* 1 KiB: off the stack */
  if (xpd_payload_decode(p, n, &m) != XPD_E_OK)
    return 0;
  check_payload(size >= XPD_HEADER ? data : NULL, size, p, n, &m);
  for (int job = 0; job < 2; job++) {
    xpd_get g;
    if (xpd_get_decode(&m, job, &g) == XPD_E_OK)
      round_trip_get(&g, job);
  }
  xpd_lookup l;
  if (xpd_lookup_decode(&m, &l) == XPD_E_OK)
    round_trip_lookup(&l);
  xpd_kernel k;
  if (xpd_kernel_decode(&m, &k) == XPD_E_OK)
    round_trip_kernel(&k);
  /* the typed getters on every field, as every peer uses them */
  for (unsigned i = 0; i < m.n; i++) {
    uint64_t v;
    char s[XPD_MAX_STRING + 1];
    const uint8_t *bp;
    size_t bn;
    xpd_err e = xpd_get_u64(&m, m.f[i].tag, false, &v);
    CHECK((e == XPD_E_OK) == (m.f[i].len == 8));
    e = xpd_get_str(&m, m.f[i].tag, false, s, sizeof s);
    if (e == XPD_E_OK)
      CHECK(strlen(s) == m.f[i].len);
    CHECK(xpd_get_bytes(&m, m.f[i].tag, false, XPD_MAX_REPLY, &bp, &bn) ==
          XPD_E_OK);
    CHECK(bp == m.f[i].val && bn == m.f[i].len);
  }
  return 0;
}
