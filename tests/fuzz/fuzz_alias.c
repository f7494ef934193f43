/*
 * fuzz_alias.c - libFuzzer target for the two decoders of the hit files'
 * aliases (cache/hitfile.c): the text of an alias's link
 * (xpj_hitfile_alias_parse, "DIGEST:TAG"), read from the user's cache
 * directory before its tag is checked, and the code line of a key text
 * (xpj_hitfile_key_code), read from a hit file before its checksum is.
 * The first byte says which gets the rest.
 *
 * Neither may crash or read past the bytes; what each accepts must be
 * exactly the form it documents, its output copied from the input.
 */
#include "../../cache/hitfile.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool hex64(const char *s) {
  for (int i = 0; i < 64; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return s[64] == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  const char *t = (const char *)data + 1;
  size_t n = size - 1;
  /* an exact copy, so that reading past n is caught */
  char *copy = malloc(n ? n : 1);
  if (!copy)
    return 0;
  memcpy(copy, t, n);
  if (data[0] & 1) {
    char digest[65], tag[65];
    if (xpj_hitfile_alias_parse(copy, n, digest, tag) &&
        (n != 129 || copy[64] != ':' || !hex64(digest) || !hex64(tag) ||
         memcmp(digest, copy, 64) || memcmp(tag, copy + 65, 64)))
      abort();
  } else {
    char code[65];
    if (xpj_hitfile_key_code(copy, n, code)) {
      const char *at = NULL;
      for (size_t i = 0; i + 71 <= n && !at; i++)
        if (!memcmp(copy + i, "\ncode ", 6))
          at = copy + i + 6;
      if (!at || !hex64(code) || memcmp(at, code, 64) || at[64] != '\n')
        abort();
    }
  }
  free(copy);
  return 0;
}
