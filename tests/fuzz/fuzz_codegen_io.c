/*
 * fuzz_codegen_io.c - libFuzzer target for the code generator's own
 * decoders: target strings (xpj_target_parse, from command lines, bundle
 * manifests and daemon requests), the reply a compiler worker sends back
 * (xpj_worker_decode, an XPD_CRESULT frame read by the caller from its
 * job socket) and the job a worker reads (xpj_cs_job_decode, an XPD_CJOB
 * payload: a transfer-encoded module, kernel, target and options).
 *
 * The first byte picks the decoder; the rest is its input. Neither may
 * crash, leak or accept something inconsistent: a parsed target must print
 * to a canonical string that parses back to the same target, and a decoded
 * reply must be self-consistent (status OK exactly when there is output);
 * a decoded job names a specialised kernel of its module with options in
 * range.
 */
#include "worker.h"
#include "xpjit_codegen.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  uint8_t mode = data[0] % 3;
  data++;
  size--;
  if (mode == 0) {
    char *s = malloc(size + 1);
    if (!s)
      return 0;
    memcpy(s, data, size);
    s[size] = 0;
    xpj_target t, t2;
    char err[256], canon[1200], canon2[1200];
    if (xpj_target_parse(s, &t, err, sizeof err) == XPJ_OK) {
      xpj_target_str(&t, canon, sizeof canon);
      /* the canonical form of a named CPU keeps its (empty) features */
      if (t.kind != XPJ_TARGET_CPU) {
        if (xpj_target_parse(canon, &t2, err, sizeof err) != XPJ_OK)
          abort();
        xpj_target_str(&t2, canon2, sizeof canon2);
        if (strcmp(canon, canon2) != 0)
          abort();
      }
    } else if (!err[0]) {
      abort(); /* every rejection explains itself */
    }
    free(s);
    return 0;
  }
  if (mode == 2) {
    xpj_job j;
    xpj_module *m;
    xpj_target t;
    char why[300] = "";
    if (xpj_cs_job_decode(data, size, &j, &m, &t, why, sizeof why) == 0) {
      if (!m || j.m != m || !j.kernel || j.target != &t ||
          j.opts.opt_level > 3 || (unsigned)j.emit > XPJ_EMIT_LLVM ||
          xpj_module_find(m, xpj_func_name(j.kernel)) != j.kernel)
        abort();
      xpj_module_destroy(m);
    } else if (!why[0] || m) {
      abort();
    }
    return 0;
  }
  xpj_result *r = xpj_result_new_internal();
  if (!r)
    return 0;
  if (xpj_worker_decode(data, size, r) == 0) {
    size_t len = 0;
    const uint8_t *d = xpj_result_data(r, &len);
    if ((xpj_result_status(r) == XPJ_OK) != (d != NULL && len > 0))
      abort();
    if (!xpj_result_log(r))
      abort();
  }
  xpj_result_destroy(r);
  return 0;
}
