/* xpjit-cc - the compile server of libxpjit (compiler/cserver.c): started
 * by the library at a process's first isolated compile, with its control
 * socket as descriptor 3; it forks a worker per compile. Not a command to
 * run by hand.
 *
 * `xpjit-cc --train [--digests] FILE.xpk...` is for the build (Makefile,
 * BOLT): every kernel of the files compiled for PTX and the host CPU in
 * this process, the way a worker compiles, then a normal exit, so that a
 * BOLT-instrumented copy writes the profile its optimised copy is laid
 * out by. With --digests each output's SHA-256 is printed (and SPIR-V is
 * compiled too, each module in a fork of this program: its backend keeps
 * state between modules), so that tests/bolt.sh can show the laid-out
 * server makes the same bytes as the plain one. */
#define _GNU_SOURCE
#include "worker.h"
#include "xpjit_compiler.h"
#include "xpjit_ir.h"

#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void print_digest(const char *file, const char *kernel,
                         const char *bound, unsigned ndim, const char *target,
                         const xpj_result *r) {
  size_t len = 0;
  const uint8_t *data = xpj_result_data(r, &len);
  uint8_t d[SHA256_DIGEST_SIZE];
  struct sha256_ctx h;
  sha256_init(&h);
  sha256_update(&h, len, data ? data : (const uint8_t *)"");
  sha256_digest(&h, sizeof d, d);
  printf("%s %s %s ndim=%u %s %zu ", file, kernel, bound, ndim, target, len);
  for (size_t i = 0; i < sizeof d; i++)
    printf("%02x", d[i]);
  printf("\n");
}

/* Kernel i of m specialised as bench/compile does: every type parameter
 * f32, else the first of i32 u32 i64 f64 it accepts; ndim 2 for generic
 * rank. NULL when none fits (const parameters, say). */
static xpj_module *specialise(const xpj_module *m, const xpj_func *fn,
                              char *bound, size_t size, unsigned *ndim) {
  static const xpj_scalar tries[] = {XPJ_F32, XPJ_I32, XPJ_U32, XPJ_I64,
                                     XPJ_F64};
  static const char *const names[] = {"f32", "i32", "u32", "i64", "f64"};
  unsigned ntp = xpj_func_tparam_count(fn);
  if (ntp > XPJ_MAX_TPARAMS)
    return NULL;
  const char *tpn[XPJ_MAX_TPARAMS];
  for (unsigned j = 0; j < ntp; j++)
    tpn[j] = xpj_func_tparam_name(fn, j);
  *ndim = xpj_func_has_generic_rank(fn) ? 2u : 0u;
  size_t ntries = ntp ? sizeof tries / sizeof tries[0] : 1;
  for (size_t t = 0; t < ntries; t++) {
    xpj_scalar types[XPJ_MAX_TPARAMS];
    for (unsigned j = 0; j < ntp; j++)
      types[j] = tries[t];
    xpj_spec sp = {ntp, tpn, types, *ndim, 0, NULL, NULL};
    xpj_module *s = NULL;
    if (xpj_specialize(m, xpj_func_name(fn), &sp, &s, NULL) == XPJ_OK) {
      snprintf(bound, size, "%s", ntp ? names[t] : "-");
      return s;
    }
  }
  return NULL;
}

static int train(int argc, char **argv) {
  bool digests = argc > 2 && !strcmp(argv[2], "--digests");
  /* SPIR-V (digests only): a worker forked from this program per module */
  if (digests && setenv("XPJIT_COMPILE_SERVER", "fork", 1) != 0)
    return 1;
  static const char *const targets[] = {"ptx:sm_90", "cpu", "spirv"};
  size_t ntargets = digests ? 3 : 2;
  int failed = 0;
  for (int a = digests ? 3 : 2; a < argc; a++) {
    xpj_module *m = NULL;
    if (xpj_module_create(&m) != XPJ_OK ||
        xpj_parse_file(m, argv[a], NULL) != XPJ_OK) {
      fprintf(stderr, "xpjit-cc --train: %s: cannot read or parse\n",
              argv[a]);
      xpj_module_destroy(m);
      return 1;
    }
    for (unsigned i = 0; i < xpj_module_func_count(m); i++) {
      const xpj_func *fn = xpj_module_func(m, i);
      char bound[8];
      unsigned ndim;
      xpj_module *s;
      if (xpj_func_kind_of(fn) == XPJ_FUNC_DEVICE ||
          !(s = specialise(m, fn, bound, sizeof bound, &ndim)))
        continue;
      for (size_t t = 0; t < ntargets; t++) {
        xpj_target tg;
        xpj_compile_opts o;
        xpj_result *r = NULL;
        xpj_compile_opts_default(&o);
        o.isolation = XPJ_ISOLATE_NONE; /* SPIR-V: always isolated */
        if (xpj_target_parse(targets[t], &tg, NULL, 0) != XPJ_OK)
          return 1;
        xpj_status st =
            xpj_compile(s, xpj_func_name(fn), &tg, &o, XPJ_EMIT_BIN, &r);
        if (digests)
          print_digest(argv[a], xpj_func_name(fn), bound, ndim, targets[t],
                       r);
        /* a kernel PTX cannot take (libdevice missing, say) is no reason
         * to stop: count it */
        failed += st != XPJ_OK;
        xpj_result_destroy(r);
      }
      xpj_module_destroy(s);
    }
    xpj_module_destroy(m);
  }
  fprintf(stderr, "xpjit-cc --train: %d compiles failed\n", failed);
  return 0; /* through exit(): an instrumented copy writes its profile */
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--train"))
    return train(argc, argv);
  int type = 0;
  socklen_t len = sizeof type;
  if (argc != 2 || strcmp(argv[1], "--serve") != 0 ||
      getsockopt(3, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
      type != SOCK_SEQPACKET) {
    fprintf(stderr, "xpjit-cc: the compile server of libxpjit; the library "
                    "starts it (docs/abi.md, Isolation)\n");
    return 2;
  }
  close_range(4, ~0u, 0); /* (the library's spawn closed them already) */
  xpj_cs_main(3);
}
