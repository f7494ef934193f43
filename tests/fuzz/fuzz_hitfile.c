/*
 * fuzz_hitfile.c - libFuzzer target for the hit file decoder
 * (cache/hitfile.c, xpj_hitfile_parse): a file of the user's cache
 * directory, PATH.hits/DIGEST, read by every process that looks a kernel
 * up before the database is opened.
 *
 * It must not crash or read past the bytes; what it accepts must be
 * exactly what the encoder writes for the fields it returned (one
 * encoding per file: nothing after the data, lengths consistent).
 */
#include "../../cache/hitfile.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  xpj_hit h;
  if (xpj_hitfile_parse(data, size, &h) != 0)
    return 0;
  if (!h.key_len || memchr(h.key, 0, h.key_len) ||
      memchr(h.entry, 0, h.entry_len) || memchr(h.log, 0, h.log_len) ||
      strlen(h.checksum) != 64)
    abort();
  size_t n = 0;
  uint8_t *again = xpj_hitfile_encode(&h, &n);
  if (!again || n != size || memcmp(again, data, size))
    abort();
  free(again);
  return 0;
}
