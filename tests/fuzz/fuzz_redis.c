/*
 * fuzz_redis.c - libFuzzer target for the Redis tier's decoders
 * (runtime/tier_redis.c): the URL of XPJIT_REDIS, and the values read
 * back from a Redis anyone on the network may have written.
 *
 * The first byte picks the decoder; the rest is its input.
 *   0: a URL (NUL-terminated at the first NUL): parsed or refused with a
 *      message; never a connection (nothing is looked up).
 *   1, 2: a value, checked against a fixed key text, without and with a
 *      secret: refused with a reason, or decoded into fields that lie
 *      inside their own storage; a decoded value encodes back to the same
 *      bytes.
 *   3: the input as a binary, entry point and sizes of a valid value:
 *      encode, flip one byte chosen by the input, decode: the original
 *      decodes to the same fields, the flipped one is refused.
 */
#include "tier.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static rt_redis *plain, *signed_;
static const char keytext[] = "code=ab12\nkernel=k\ndtypes=T=f32\nndim=1\n"
                              "target=cpu\noptions=\nversions=v";

static void init(void) {
  if (plain)
    return;
  unsetenv("XPJIT_REDIS_TIMEOUT");
  unsetenv("XPJIT_REDIS_TTL");
  unsetenv("XPJIT_REDIS_SECRET_FILE");
  if (rt_redis_open("unix:/nonexistent/fuzz.sock", &plain) != XPJ_OK)
    abort();
  char path[] = "/tmp/xpjit-fuzz-secret-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0 || write(fd, "0123456789abcdef0123", 20) != 20)
    abort();
  close(fd);
  setenv("XPJIT_REDIS_SECRET_FILE", path, 1);
  if (rt_redis_open("redis://h:1/2", &signed_) != XPJ_OK)
    abort();
  unsetenv("XPJIT_REDIS_SECRET_FILE");
  unlink(path);
}

static void check_decoded(const rt_redis *r, const uint8_t *v, size_t n,
                          const fetched *f) {
  const uint8_t *own = f->own;
  if (!own || f->v.data != own || !f->v.entry || f->v.entry[strlen(f->v.entry)] ||
      f->origin != XPJ_ORIGIN_REDIS)
    abort();
  size_t m;
  uint8_t *again = rt_redis_encode(r, keytext, f, &m);
  if (!again)
    return;
  /* the checksum covers everything, so the same fields give the same
   * bytes, except a compile time that decoding replaced (not a number) */
  if ((m != n || memcmp(again, v, n)) && f->v.compile_ms != 0)
    abort();
  free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  init();
  uint8_t mode = data[0] % 4;
  const uint8_t *in = data + 1;
  size_t n = size - 1;
  if (mode == 0) {
    char *url = malloc(n + 1);
    if (!url)
      return 0;
    memcpy(url, in, n);
    url[n] = 0;
    rt_redis *r = NULL;
    xpj_status st = rt_redis_open(url, &r);
    if ((st == XPJ_OK) != (r != NULL) || (st != XPJ_OK && !xpj_last_error()[0]))
      abort();
    rt_redis_close(r);
    free(url);
  } else if (mode <= 2) {
    const rt_redis *r = mode == 1 ? plain : signed_;
    fetched f;
    memset(&f, 0, sizeof f);
    const char *why = rt_redis_decode(r, keytext, in, n, &f);
    if (why) {
      if (f.own || !*why)
        abort();
    } else {
      check_decoded(r, in, n, &f);
    }
    free(f.own);
  } else {
    if (n < 3)
      return 0;
    const rt_redis *r = in[0] & 1 ? signed_ : plain;
    size_t elen = in[1] % 40;
    if (elen > n - 2)
      elen = n - 2;
    char entry[48];
    for (size_t i = 0; i < elen; i++)
      entry[i] = (char)(in[2 + i] ? in[2 + i] : 'x');
    entry[elen] = 0;
    fetched f;
    memset(&f, 0, sizeof f);
    f.v.data = in + 2 + elen;
    f.v.size = n - 2 - elen;
    f.v.entry = entry;
    f.v.local_bytes = n;
    f.v.scratch_bytes = elen;
    f.v.compile_ms = (double)n / 8;
    size_t m;
    uint8_t *v = rt_redis_encode(r, keytext, &f, &m);
    if (!v)
      return 0;
    fetched g;
    memset(&g, 0, sizeof g);
    if (rt_redis_decode(r, keytext, v, m, &g) || g.v.size != f.v.size ||
        (f.v.size && memcmp(g.v.data, f.v.data, f.v.size)) || strcmp(g.v.entry, entry) ||
        g.v.local_bytes != f.v.local_bytes || g.v.scratch_bytes != f.v.scratch_bytes ||
        g.v.compile_ms != f.v.compile_ms)
      abort();
    free(g.own);
    memset(&g, 0, sizeof g);
    size_t at = ((size_t)in[1] * 257 + n) % m;
    v[at] ^= (uint8_t)(1u << (in[0] % 8));
    if (!rt_redis_decode(r, keytext, v, m, &g))
      abort(); /* a flipped bit anywhere is refused */
    if (g.own)
      abort();
    free(v);
  }
  return 0;
}
