/* spirv_sane.c - the gate in front of every driver that takes SPIR-V:
 * the header, every instruction's word count, then the full SPIRV-Tools
 * validation the compiler applies to what it emits. Drivers are not
 * robust to malformed input (Intel's OpenCL runtime loops forever on a
 * zero word count and crashes on a module cut at an instruction
 * boundary), and a binary can come from a cache file or bundle written by
 * someone else. Cost: well under a millisecond for our kernels, against
 * the driver's own build of tens to hundreds. */
#include "rt.h"
#include "spirv_check.h"

#include <stdio.h>
#include <string.h>

bool rt_spirv_sane(const uint8_t *bin, size_t len, unsigned max_minor,
                   char *why, size_t size) {
  if (!bin || len < 20 || len % 4) {
    snprintf(why, size, "not a SPIR-V module (%zu bytes; a module is whole "
             "32-bit words, at least 5)", len);
    return false;
  }
  size_t n = len / 4;
  uint32_t w[5];
  memcpy(w, bin, sizeof w);
  if (w[0] != 0x07230203u) {
    snprintf(why, size, "not a SPIR-V module (magic 0x%08x)", w[0]);
    return false;
  }
  if ((w[1] & 0xff0000ffu) || w[1] < 0x00010000u || w[1] > 0x00010600u) {
    snprintf(why, size, "SPIR-V version word 0x%08x is not 1.0 to 1.6", w[1]);
    return false;
  }
  if (((w[1] >> 8) & 0xff) > max_minor) {
    snprintf(why, size, "SPIR-V 1.%u; the device takes up to 1.%u",
             (w[1] >> 8) & 0xff, max_minor);
    return false;
  }
  if (w[3] == 0 || w[4] != 0) {
    snprintf(why, size, "bad SPIR-V header (id bound %u, schema %u)", w[3],
             w[4]);
    return false;
  }
  for (size_t i = 5; i < n;) {
    uint32_t word;
    memcpy(&word, bin + 4 * i, 4);
    uint32_t wc = word >> 16;
    if (wc == 0 || wc > n - i) {
      snprintf(why, size, "SPIR-V instruction at word %zu has a word count "
               "of %u (%zu words left)", i, wc, n - i);
      return false;
    }
    i += wc;
  }
  char err[512];
  if (xpj_spirv_validate(bin, len, (w[1] >> 8) & 0xff, err, sizeof err)) {
    snprintf(why, size, "invalid SPIR-V: %s", err);
    return false;
  }
  return true;
}
