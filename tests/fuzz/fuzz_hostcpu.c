/*
 * fuzz_hostcpu.c - libFuzzer target for the host-CPU file's decoder
 * (compiler/hostcpu.c, xpj_host_cpu_parse): the text of
 * <cache dir>/host-cpu-<digest>, which becomes the CPU device's target and
 * so every CPU kernel's compile target and cache key.
 *
 * It must not crash or read out of bounds; what it accepts must be a name
 * and a feature list of LLVM's alphabet that round-trip: the canonical
 * target "cpu:NAME:FEATURES" parses back (xpj_target_parse) to the same.
 */
#include "llvm.h"
#include "xpjit_codegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char name[64], feat[4096];
  if (xpj_host_cpu_parse((const char *)data, size, name, feat) != 0)
    return 0;
  size_t nl = strlen(name), fl = strlen(feat);
  if (!nl || nl >= sizeof name || !fl || fl >= sizeof feat ||
      nl + fl + 2 != size || memcmp(data, name, nl) || data[nl] != '\n' ||
      memcmp(data + nl + 1, feat, fl) || data[size - 1] != '\n')
    abort();
  for (const char *p = name; *p; p++)
    if (strchr("+,:", *p))
      abort();
  char s[4200];
  snprintf(s, sizeof s, "cpu:%s:%s", name, feat);
  xpj_target t;
  char err[256];
  if (xpj_target_parse(s, &t, err, sizeof err) == XPJ_OK &&
      (strcmp(t.cpu, name) || strcmp(t.features, feat)))
    abort();
  return 0;
}
