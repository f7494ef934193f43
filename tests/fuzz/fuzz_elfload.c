/*
 * fuzz_elfload.c - libFuzzer target for the CPU device's object loader
 * (runtime/elfload.h): the bytes of a kernel's object as a cache file could
 * hand them over.
 *
 * Any input either is refused (XPJ_ERR_INVALID, XPJ_ERR_NOT_FOUND or
 * XPJ_ERR_NOMEM, with a one-line printable reason, no image and no entry
 * point), or loads into an image that holds its entry point and is then
 * unloaded. The loaded code is never run. The binder gives addresses only
 * to memcpy, memset and a few pure libm and libgcc functions (never
 * anything that could reach the outside world), and the entry point is
 * always "__xpj_k_k": the seeds (tests/fuzz/corpus/fuzz_elfload/seed_*)
 * are real kernels named k, compiled for the CPU, and a few broken ones.
 */
#define _GNU_SOURCE
#include "elfload.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void *resolve(void *ctx, const char *name) {
  (void)ctx;
  static const struct {
    const char *name;
    void *fn;
  } fns[] = {{"memcpy", (void *)memcpy}, {"memset", (void *)memset},
             {"sinf", (void *)sinf},     {"cosf", (void *)cosf},
             {"expf", (void *)expf},     {"logf", (void *)logf},
             {"powf", (void *)powf},     {"tanf", (void *)tanf},
             {"cbrtf", (void *)cbrtf},   {"exp2f", (void *)exp2f},
             {"expm1f", (void *)expm1f}, {"log2f", (void *)log2f},
             {"log10f", (void *)log10f}, {"asinf", (void *)asinf},
             {"acosf", (void *)acosf},   {"atanf", (void *)atanf},
             {"sinhf", (void *)sinhf},   {"coshf", (void *)coshf},
             {"sin", (void *)sin},       {"exp", (void *)exp}};
  for (size_t i = 0; i < sizeof fns / sizeof *fns; i++)
    if (!strcmp(name, fns[i].name))
      return fns[i].fn;
  /* libgcc's f16 conversions (the baseline x86-64 has no F16C) */
  if (!strcmp(name, "__extendhfsf2") || !strcmp(name, "__truncsfhf2") ||
      !strcmp(name, "__truncdfhf2"))
    return dlsym(RTLD_DEFAULT, name);
  return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  xpj_elf_image *img = (xpj_elf_image *)1;
  void *entry = (void *)1;
  char err[512];
  xpj_status st = xpj_elf_load(data, size, "__xpj_k_k", resolve, NULL, &img,
                               &entry, err, sizeof err);
  if (st != XPJ_OK) {
    if ((st != XPJ_ERR_INVALID && st != XPJ_ERR_NOT_FOUND &&
         st != XPJ_ERR_NOMEM) ||
        img || entry || !err[0])
      abort();
    for (const char *s = err; *s; s++)
      if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
        abort();
    return 0;
  }
  void *base;
  size_t len;
  xpj_elf_image_range(img, &base, &len);
  if (!img || !base || (uint8_t *)entry < (uint8_t *)base ||
      (uint8_t *)entry >= (uint8_t *)base + len)
    abort();
  xpj_elf_unload(img);
  return 0;
}
