/*
 * fuzz_frontend.c - libFuzzer target for the xpjit frontend.
 *
 * Parses the input as kernel source. Whatever the input, the frontend must
 * not crash, leak, hit undefined behaviour or hang; diagnostics are always
 * rendered. When the parse succeeds, the generic module is printed and
 * re-verified, and every kernel is specialised with all its type parameters
 * bound to f32 and then to i32 (ndim 2 for generic-rank kernels, else 0)
 * and its const parameters to 4 (bool: true), then to 1 (false).
 * Each successful specialisation is printed, hashed and verified, and
 * nd-range kernels go through the work-group fit analysis at a few
 * geometries (ir/localfit.c).
 *
 * Besides sanitizer reports, these are treated as bugs (abort()):
 *   - xpj_module_verify failing on a module the frontend produced;
 *   - an "internal error" diagnostic (the frontend's own self-checks) that
 *     is not preceded by an ordinary error;
 *   - xpj_specialize returning XPJ_ERR_VERIFY or XPJ_ERR_INVALID;
 *   - print/hash failing with anything but XPJ_ERR_NOMEM.
 *
 * Built with -fsanitize=fuzzer (build-fuzz/fuzz_frontend) or with
 * tests/fuzz/replay_main.c (build/fuzz/replay_fuzz_frontend).
 */
#include "xpjit_compiler.h"
#include "xpjit_ir.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void bug(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_frontend: BUG: %s: %s\n", what,
          detail ? detail : "(no message)");
  abort();
}

/* Renders the diagnostics (exercising the renderer) and aborts on an
 * internal error: those are the frontend's own consistency checks. */
static void check_diags(xpj_diags *d) {
  char *text = NULL;
  size_t len = 0;
  xpj_status st = xpj_diags_render(d, &text, &len);
  if (st == XPJ_OK) {
    if (text && strlen(text) != len)
      bug("xpj_diags_render length mismatch", text);
    free(text);
  } else if (st != XPJ_ERR_NOMEM) {
    bug("xpj_diags_render failed", xpj_status_name(st));
  }
  unsigned n = xpj_diags_count(d);
  int real_error = 0;
  for (unsigned i = 0; i < n; i++) {
    xpj_diag dg;
    if (xpj_diags_get(d, i, &dg) != XPJ_OK)
      bug("xpj_diags_get failed", NULL);
    int internal = dg.message && strstr(dg.message, "internal error") != NULL;
    /* An internal error after an ordinary error may be a cascade from the
     * poisoned IR of that error (a diagnostics-quality issue, see
     * tests/fuzz/crashes/spec_poison_cascade_internal_error.xpk); one with
     * no ordinary error before it is a frontend bug. */
    if (internal && !real_error)
      bug("internal error diagnostic", dg.message);
    if (!internal && dg.severity == XPJ_SEV_ERROR)
      real_error = 1;
  }
}

static void print_module(const xpj_module *m) {
  char *text = NULL;
  size_t len = 0;
  xpj_status st = xpj_module_print(m, &text, &len);
  if (st == XPJ_OK)
    free(text);
  else if (st != XPJ_ERR_NOMEM)
    bug("xpj_module_print failed", xpj_status_name(st));
}

static void try_spec(const xpj_module *m, const xpj_func *k, xpj_scalar ty,
                     int64_t cval) {
  const char *kname = xpj_func_name(k);
  unsigned nt = xpj_func_tparam_count(k), nc = xpj_func_const_count(k);
  const char *names[XPJ_MAX_TPARAMS], *cnames[XPJ_MAX_CPARAMS];
  xpj_scalar types[XPJ_MAX_TPARAMS];
  int64_t values[XPJ_MAX_CPARAMS];
  if (nt > XPJ_MAX_TPARAMS || nc > XPJ_MAX_CPARAMS)
    bug("too many type or const parameters", kname);
  for (unsigned i = 0; i < nt; i++) {
    names[i] = xpj_func_tparam_name(k, i);
    types[i] = ty;
  }
  for (unsigned i = 0; i < nc; i++) {
    cnames[i] = xpj_func_const_name(k, i);
    values[i] = xpj_func_const_type(k, i) == XPJ_BOOL ? cval == 4 : cval;
  }
  xpj_spec spec;
  spec.ntypes = nt;
  spec.names = names;
  spec.types = types;
  spec.ndim = xpj_func_has_generic_rank(k) ? 2u : 0u;
  spec.nconsts = nc;
  spec.const_names = cnames;
  spec.const_values = values;

  xpj_diags *d = NULL;
  if (xpj_diags_create(&d) != XPJ_OK)
    return;
  xpj_module *out = NULL;
  xpj_status st = xpj_specialize(m, kname, &spec, &out, d);
  check_diags(d);
  if (st == XPJ_OK) {
    if (!out)
      bug("xpj_specialize returned OK without a module", kname);
    print_module(out);
    uint8_t digest[32];
    char hex[65];
    xpj_status hs = xpj_module_hash(out, kname, digest, hex);
    if (hs != XPJ_OK && hs != XPJ_ERR_NOMEM)
      bug("xpj_module_hash failed on a specialised kernel",
          xpj_status_name(hs));
    const char *msg = NULL;
    xpj_status vs = xpj_module_verify(out, &msg);
    if (vs != XPJ_OK && vs != XPJ_ERR_NOMEM)
      bug("xpj_module_verify failed on a specialised module", msg);
    const xpj_func *sk = xpj_module_find(out, kname);
    if (sk && xpj_func_kind_of(sk) == XPJ_FUNC_NDRANGE) {
      static const uint64_t g[3] = {1024, 96, 7}, l[][3] = {
          {1, 1, 1}, {16, 16, 1}, {256, 3, 7}, {1024, 96, 7}};
      for (unsigned i = 0; i < sizeof l / sizeof *l; i++) {
        xpj_fit fit;
        xpj_status fs = xpj_func_local_fit(sk, xpj_func_dims(sk), g, l[i], &fit);
        if (fs != XPJ_OK && fs != XPJ_ERR_NOMEM)
          bug("xpj_func_local_fit", xpj_status_name(fs));
        if (fs == XPJ_OK && !fit.fits && fit.lo >= 0 && fit.hi < fit.extent &&
            strcmp(fit.array, "?"))
          bug("xpj_func_local_fit: an unfit index within its array", kname);
      }
    }
    xpj_module_destroy(out);
  } else {
    if (out)
      bug("xpj_specialize failed but returned a module", kname);
    if (st == XPJ_ERR_VERIFY || st == XPJ_ERR_INVALID)
      bug("xpj_specialize", xpj_status_name(st));
  }
  xpj_diags_destroy(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  xpj_module *m = NULL;
  xpj_diags *d = NULL;
  if (xpj_module_create(&m) != XPJ_OK)
    return 0;
  if (xpj_diags_create(&d) != XPJ_OK) {
    xpj_module_destroy(m);
    return 0;
  }
  /* data may be NULL when size is 0 */
  const char *src = size ? (const char *)data : "";
  xpj_status st = xpj_parse(m, "fuzz.xpk", src, size, d);
  check_diags(d);
  if (st == XPJ_OK) {
    if (xpj_diags_errors(d) != 0)
      bug("xpj_parse returned OK with errors", NULL);
    print_module(m);
    const char *msg = NULL;
    xpj_status vs = xpj_module_verify(m, &msg);
    if (vs != XPJ_OK && vs != XPJ_ERR_NOMEM)
      bug("xpj_module_verify failed on a parsed module", msg);
    unsigned nf = xpj_module_func_count(m);
    for (unsigned i = 0; i < nf; i++) {
      const xpj_func *f = xpj_module_func(m, i);
      if (!f)
        bug("xpj_module_func returned NULL", NULL);
      if (xpj_func_kind_of(f) == XPJ_FUNC_DEVICE)
        continue;
      try_spec(m, f, XPJ_F32, 4);
      if (xpj_func_tparam_count(f) > 0)
        try_spec(m, f, XPJ_I32, 4);
      if (xpj_func_const_count(f) > 0)
        try_spec(m, f, XPJ_I32, 1);
    }
  } else if (st == XPJ_ERR_SYNTAX) {
    if (xpj_diags_errors(d) == 0)
      bug("xpj_parse returned XPJ_ERR_SYNTAX without an error", NULL);
  } else if (st != XPJ_ERR_NOMEM) {
    bug("xpj_parse returned an unexpected status", xpj_status_name(st));
  }
  xpj_diags_destroy(d);
  xpj_module_destroy(m);
  return 0;
}
