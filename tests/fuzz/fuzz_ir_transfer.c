/*
 * fuzz_ir_transfer.c - libFuzzer target for the transfer decoder of whole
 * modules (ir/transfer.h), what the compile server runs on every job it
 * receives.
 *
 * Any input either is refused (XPJ_ERR_INVALID, or XPJ_ERR_NOMEM, with a
 * one-line printable reason and no module), or gives a module that encodes
 * back to exactly the input (the encoding is canonical), whose encoding
 * decodes again to the same bytes, and that the printer and the canonical
 * hash, which walk every function, take without trouble.
 */
#include "transfer.h"
#include "xpjit_ir.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_refusal(xpj_status st, const xpj_module *m,
                          const char *err) {
  if ((st != XPJ_ERR_INVALID && st != XPJ_ERR_NOMEM) || m || !err[0])
    abort();
  for (const char *s = err; *s; s++)
    if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
      abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  xpj_module *m = NULL, *m2 = NULL;
  char err[512];
  xpj_status st = xpj_module_decode(data, size, &m, err, sizeof err);
  if (st != XPJ_OK) {
    check_refusal(st, m, err);
    return 0;
  }
  uint8_t *e1 = NULL, *e2 = NULL;
  size_t n1 = 0, n2 = 0;
  if (xpj_module_encode(m, &e1, &n1) != XPJ_OK)
    abort();
  if (n1 != size || memcmp(e1, data, size) != 0)
    abort();
  if (xpj_module_decode(e1, n1, &m2, err, sizeof err) != XPJ_OK)
    abort();
  if (xpj_module_encode(m2, &e2, &n2) != XPJ_OK || n2 != n1 ||
      memcmp(e1, e2, n1) != 0)
    abort();
  char *text = NULL;
  if (xpj_module_print(m2, &text, NULL) != XPJ_OK)
    abort();
  free(text);
  for (unsigned i = 0; i < xpj_module_func_count(m2); i++) {
    char hex[65];
    if (xpj_module_hash(m2, xpj_func_name(xpj_module_func(m2, i)), NULL,
                        hex) != XPJ_OK)
      abort();
  }
  free(e1);
  free(e2);
  xpj_module_destroy(m);
  xpj_module_destroy(m2);
  return 0;
}
