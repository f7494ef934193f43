/*
 * bench/frontend.c - speed of the frontend.
 *
 * 1. In process, per example file: parse and check, specialise every
 *    kernel (T = f32 where it fits, else i32; ndim 2 for generic rank),
 *    and hash each specialisation. Median of repeated runs.
 * 2. Side by side with a peer, in the same run: xpjit-cli check on
 *    bench/peers/frontend_peer.xpk against clang's OpenCL C frontend
 *    (clang -x cl -cl-std=CL2.0 -fsyntax-only) on the same three kernels
 *    in bench/peers/frontend_peer.cl, both as whole processes (start-up
 *    included for both), median wall time, and the ratio.
 *
 * usage: frontend [-n RUNS] [--cli PATH] [--clang PATH] FILE.xpk...
 */
#include "xpjit_compiler.h"
#include "xpjit_ir.h"
#include "bench_util.h"

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}




/* One full pass over a file; returns the number of kernels specialised. */
static int one_pass(const char *path, const char *src, size_t len,
                    double *t_parse, double *t_spec) {
  xpj_module *m;
  xpj_module_create(&m);
  double t0 = now_us();
  xpj_status st = xpj_parse(m, path, src, len, NULL);
  double t1 = now_us();
  int nk = 0;
  if (st == XPJ_OK) {
    for (unsigned i = 0; i < xpj_module_func_count(m); i++) {
      xpj_func *f = xpj_module_func(m, i);
      if (xpj_func_kind_of(f) == XPJ_FUNC_DEVICE)
        continue;
      const char *names[XPJ_MAX_TPARAMS];
      xpj_scalar types[XPJ_MAX_TPARAMS];
      unsigned nt = xpj_func_tparam_count(f);
      static const xpj_scalar tries[] = {XPJ_F32, XPJ_I32};
      for (size_t k = 0; k < 2; k++) {
        for (unsigned j = 0; j < nt; j++) {
          names[j] = xpj_func_tparam_name(f, j);
          types[j] = tries[k];
        }
        xpj_spec sp = {nt, names, types,
                       xpj_func_has_generic_rank(f) ? 2u : 0u, 0, NULL, NULL};
        xpj_module *s = NULL;
        if (xpj_specialize(m, xpj_func_name(f), &sp, &s, NULL) == XPJ_OK) {
          char hex[65];
          xpj_module_hash(s, xpj_func_name(f), NULL, hex);
          xpj_module_destroy(s);
          nk++;
          break;
        }
      }
    }
  }
  double t2 = now_us();
  xpj_module_destroy(m);
  *t_parse = t1 - t0;
  *t_spec = t2 - t1;
  return st == XPJ_OK ? nk : -1;
}

/* Median wall time of running argv to completion, in microseconds. */
static double time_process(char *const argv[], int runs) {
  double *v = calloc((size_t)runs, sizeof *v);
  for (int r = 0; r < runs; r++) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", 1, 0);
    double t0 = now_us();
    pid_t pid;
    if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) != 0) {
      posix_spawn_file_actions_destroy(&fa);
      free(v);
      return -1;
    }
    int status;
    waitpid(pid, &status, 0);
    v[r] = now_us() - t0;
    posix_spawn_file_actions_destroy(&fa);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      free(v);
      return -1;
    }
  }
  double m = median(v, runs);
  free(v);
  return m;
}

int main(int argc, char **argv) {
  int runs = 50;
  const char *cli = "build/bin/xpjit-cli", *clang = "clang";
  int first = 1;
  for (; first < argc && argv[first][0] == '-'; first++) {
    if (strcmp(argv[first], "-n") == 0 && first + 1 < argc)
      runs = atoi(argv[++first]);
    else if (strcmp(argv[first], "--cli") == 0 && first + 1 < argc)
      cli = argv[++first];
    else if (strcmp(argv[first], "--clang") == 0 && first + 1 < argc)
      clang = argv[++first];
    else {
      fprintf(stderr, "usage: %s [-n RUNS] [--cli PATH] [--clang PATH] "
              "FILE.xpk...\n", argv[0]);
      return 2;
    }
  }
  if (runs < 1)
    runs = 1;
  printf("frontend, in process (median of %d runs)\n", runs);
  printf("%-28s %6s %8s %12s %14s %12s\n", "file", "lines", "kernels",
         "parse (us)", "spec+hash (us)", "us/kernel");
  double *tp = calloc((size_t)runs, sizeof *tp);
  double *ts = calloc((size_t)runs, sizeof *ts);
  for (int i = first; i < argc; i++) {
    size_t len;
    char *src = slurp(argv[i], &len);
    if (!src) {
      fprintf(stderr, "cannot read %s\n", argv[i]);
      return 1;
    }
    int lines = 0;
    for (size_t k = 0; k < len; k++)
      lines += src[k] == '\n';
    int nk = 0;
    for (int r = 0; r < runs; r++)
      nk = one_pass(argv[i], src, len, &tp[r], &ts[r]);
    double p = median(tp, runs), s = median(ts, runs);
    const char *base = strrchr(argv[i], '/');
    printf("%-28s %6d %8d %12.1f %14.1f %12.1f\n", base ? base + 1 : argv[i],
           lines, nk, p, s, nk > 0 ? (p + s) / nk : 0);
    free(src);
  }
  free(tp);
  free(ts);

  printf("\nfrontend vs peer, whole processes (median of %d runs)\n", runs);
  char *ours[] = {(char *)cli, "check", "bench/peers/frontend_peer.xpk", NULL};
  char *peer[] = {(char *)clang, "-x", "cl", "-cl-std=CL2.0", "-fsyntax-only",
                  "bench/peers/frontend_peer.cl", NULL};
  double a = time_process(ours, runs);
  double b = time_process(peer, runs);
  printf("%-52s %10s\n", "command", "ms");
  printf("%-52s %10.2f\n", "xpjit-cli check frontend_peer.xpk", a / 1e3);
  if (b < 0)
    printf("%-52s %10s\n", "clang -x cl -fsyntax-only frontend_peer.cl",
           "n/a (no clang)");
  else {
    printf("%-52s %10.2f\n", "clang -x cl -cl-std=CL2.0 -fsyntax-only (peer)",
           b / 1e3);
    printf("ratio (peer / xpjit): %.1fx\n", a > 0 ? b / a : 0);
  }
  return a < 0 ? 1 : 0;
}
