/*
 * fuzz_runtime_strings.c - libFuzzer target for the runtime's string
 * decoders: device filters (xpj_device_select, XPJIT_DEVICE) and dtypes
 * strings (xpj_program_get_kernel), for a kernel with type parameters and
 * one with type and const parameters. Both come from users and
 * environment variables.
 *
 * The first byte picks the decoder; the rest is its input (NUL-terminated
 * at the first NUL). Neither may crash or leak; a rejected input must
 * come with a message; a parsed filter is matched against every kind of
 * device; parsed dtypes must round-trip through their canonical form.
 */
#include "rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static xpj_module *mod;
static const xpj_func *kern, *kern_c;

static void init(void) {
  if (mod)
    return;
  const char *src = "kernel k<T, U, V>(a: global T[], b: U, c: V) range { }\n"
                    "kernel kc<const N: i8, T, const B: bool, const W: u64,"
                    " const S: i64>(a: global T[]) range { }";
  if (xpj_module_create(&mod) != XPJ_OK ||
      xpj_parse(mod, "f.xpk", src, strlen(src), NULL) != XPJ_OK)
    abort();
  kern = xpj_module_find(mod, "k");
  kern_c = xpj_module_find(mod, "kc");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  init();
  uint8_t mode = data[0] % 3;
  char *s = malloc(size);
  if (!s)
    return 0;
  memcpy(s, data + 1, size - 1);
  s[size - 1] = 0;
  if (mode == 0) {
    rt_filter *f = NULL;
    xpj_status st = rt_filter_parse(s, &f);
    if ((st == XPJ_OK) != (f != NULL))
      abort();
    if (f) {
      /* every kind of device, every index below 3 */
      for (int b = 0; b < XPJ_BACKEND_COUNT; b++)
        for (int t = 0; t < 3; t++)
          for (unsigned i = 0; i < 3; i++) {
            xpj_device d;
            memset(&d, 0, sizeof d);
            d.info.backend = (xpj_backend)b;
            d.info.type = (xpj_device_type)t;
            d.info.index = i;
            (void)rt_filter_match(f, &d);
          }
      rt_filter_free(f);
    } else if (!xpj_last_error()[0]) {
      abort(); /* an error always has a message */
    }
  } else {
    const xpj_func *f = mode == 1 ? kern : kern_c;
    xpj_scalar types[XPJ_MAX_TPARAMS];
    int64_t consts[XPJ_MAX_CPARAMS];
    char canon[256];
    if (rt_parse_dtypes(f, s, types, consts, canon, sizeof canon) == XPJ_OK) {
      xpj_scalar again[XPJ_MAX_TPARAMS];
      int64_t cagain[XPJ_MAX_CPARAMS];
      char canon2[256];
      unsigned nt = xpj_func_tparam_count(f), nc = xpj_func_const_count(f);
      if (rt_parse_dtypes(f, canon, again, cagain, canon2, sizeof canon2) !=
              XPJ_OK ||
          strcmp(canon, canon2) || memcmp(types, again, nt * sizeof *types) ||
          memcmp(consts, cagain, nc * sizeof *consts))
        abort();
    } else if (!xpj_last_error()[0]) {
      abort();
    }
  }
  free(s);
  return 0;
}
