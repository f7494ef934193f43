/* xpjit-cc - the compile server of libxpjit (compiler/cserver.c): started
 * by the library at a process's first isolated compile, with its control
 * socket as descriptor 3; it forks a worker per compile. Not a command to
 * run by hand.
 *
 * `xpjit-cc --train [--digests] FILE.xpk...` is for the build (Makefile,
 * BOLT): every kernel of the files compiled for PTX and the host CPU in
 * this process, the way a worker compiles, then a normal exit, so that a
 * BOLT-instrumented copy writes the profile its optimised copy is laid
 * out by. With --digests each compile's status, size and SHA-256 are
 * printed (and SPIR-V is compiled too, each module in a fork of this
 * program: its backend keeps state between modules), so that
 * tests/bolt.sh can show the laid-out server makes the same bytes as the
 * plain one. */
#define _GNU_SOURCE
#include "worker.h"
#include "xpjit_compiler.h"
#include "xpjit_ir.h"

#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static void print_digest(const char *file, const char *kernel,
                         const char *bound, unsigned ndim, const char *target,
                         xpj_status st, const xpj_result *r) {
  size_t len = 0;
  const uint8_t *data = r ? xpj_result_data(r, &len) : NULL;
  uint8_t d[SHA256_DIGEST_SIZE];
  struct sha256_ctx h;
  sha256_init(&h);
  sha256_update(&h, len, data ? data : (const uint8_t *)"");
  sha256_digest(&h, sizeof d, d);
  char status[40]; /* one word: "ok", "code-generation-failed", ... */
  snprintf(status, sizeof status, "%s", xpj_status_name(st));
  for (char *c = status; *c; c++)
    if (*c == ' ')
      *c = '-';
  printf("%s %s %s ndim=%u %s %s %zu ", file, kernel, bound, ndim, target,
         status, len);
  for (size_t i = 0; i < sizeof d; i++)
    printf("%02x", d[i]);
  printf("\n");
}

/* Kernel fn of m specialised as bench/compile does: every type parameter
 * f32, else the first of i32 u32 i64 f64 it accepts; ndim 2 for generic
 * rank. NULL when none fits (const parameters, say). */
static xpj_module *specialise(const xpj_module *m, const xpj_func *fn,
                              char *bound, size_t size, unsigned *ndim) {
  static const xpj_scalar tries[] = {XPJ_F32, XPJ_I32, XPJ_U32, XPJ_I64,
                                     XPJ_F64};
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
      snprintf(bound, size, "%s", ntp ? xpj_scalar_name(tries[t]) : "-");
      return s;
    }
  }
  return NULL;
}

/* The file's diagnostics on stderr; false when it does not parse. */
static bool parse_file(xpj_module *m, const char *path) {
  xpj_diags *d = NULL;
  if (xpj_diags_create(&d) != XPJ_OK)
    return false;
  bool ok = xpj_parse_file(m, path, d) == XPJ_OK;
  char *txt = NULL;
  size_t len;
  if (!ok && xpj_diags_render(d, &txt, &len) == XPJ_OK)
    fprintf(stderr, "%s", txt);
  free(txt);
  xpj_diags_destroy(d);
  return ok;
}

/* Exit status: 1 when a file does not parse or no compile succeeded (a
 * profile of error paths only would lay the server out for nothing); 0
 * otherwise, failed compiles counted on stderr (and, with --digests,
 * each one's status printed: tests/bolt.sh judges them). */
static int train(int argc, char **argv) {
  bool digests = argc > 2 && !strcmp(argv[2], "--digests");
  /* SPIR-V (digests only): a worker forked from this program per module */
  if (digests && setenv("XPJIT_COMPILE_SERVER", "fork", 1) != 0)
    return 1;
  static const char *const names[] = {"ptx:sm_90", "cpu", "spirv"};
  xpj_target targets[3];
  size_t ntargets = digests ? 3 : 2;
  for (size_t t = 0; t < ntargets; t++)
    if (xpj_target_parse(names[t], &targets[t], NULL, 0) != XPJ_OK)
      return 1;
  unsigned ok = 0, failed = 0;
  for (int a = digests ? 3 : 2; a < argc; a++) {
    xpj_module *m = NULL;
    if (xpj_module_create(&m) != XPJ_OK || !parse_file(m, argv[a])) {
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
      if (xpj_func_kind_of(fn) == XPJ_FUNC_DEVICE)
        continue;
      if (!(s = specialise(m, fn, bound, sizeof bound, &ndim))) {
        fprintf(stderr, "xpjit-cc --train: %s: %s: no binding fits; "
                        "skipped\n", argv[a], xpj_func_name(fn));
        continue;
      }
      for (size_t t = 0; t < ntargets; t++) {
        xpj_compile_opts o;
        xpj_result *r = NULL;
        xpj_compile_opts_default(&o);
        o.isolation = XPJ_ISOLATE_NONE; /* SPIR-V: always isolated */
        xpj_status st = xpj_compile(s, xpj_func_name(fn), &targets[t], &o,
                                    XPJ_EMIT_BIN, &r);
        if (digests)
          print_digest(argv[a], xpj_func_name(fn), bound, ndim, names[t],
                       st, r);
        if (st == XPJ_OK)
          ok++;
        else
          failed++;
        xpj_result_destroy(r);
      }
      xpj_module_destroy(s);
    }
    xpj_module_destroy(m);
  }
  fprintf(stderr, "xpjit-cc --train: %u compiles, %u failed\n", ok + failed,
          failed);
  /* returned through exit(): an instrumented copy writes its profile */
  return ok ? 0 : 1;
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
  /* 4: this executable, which the library exec'd through /proc/self/fd/4
   * (xpj_cs_spawn: the file it checked, not a name); the rest were closed
   * by the spawn already */
  close_range(4, ~0u, 0);
  /* named "4" by that exec: ps, pkill and the tests know it as xpjit-cc */
  prctl(PR_SET_NAME, "xpjit-cc", 0, 0, 0);
  xpj_cs_main(3);
}
