/*
 * bench/groups.c - narrow work-groups on the CPU device: the same tile
 * reversal through local memory (bench/groups.xpk) with required local
 * sizes 8 and 16 (1-D, 2^24 f32) and 8x8 and 16x16 (2-D, 4096x4096 f32),
 * interleaved rounds, medians; every result checked. The narrow kernels
 * do the same work as the wide ones, so narrow / wide near 1 means narrow
 * groups are vectorised like wide ones (before the unit-stride versions of
 * codegen.c, the 8-wide ones ran scalar: about 2-3x slower).
 *
 *   build/bench/groups [--rounds N]      (from the repository root)
 */
#include "bench_util.h"

#include <xpjit.h>

#include <math.h>
#include <string.h>
#include <time.h>

#define N1 (1L << 24)
#define SIDE 4096L

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static const struct {
  const char *name;
  long local; /* per dimension */
  int rank;
} cases[] = {{"rev8", 8, 1}, {"rev16", 16, 1}, {"tile8", 8, 2}, {"tile16", 16, 2}};
enum { NC = sizeof cases / sizeof *cases };

/* Whether y is the reversal of x within each group (row-major element i
 * of a 2-D launch: row i / SIDE, column i % SIDE). */
static long wrong(const float *x, const float *y, long local, int rank) {
  long bad = 0, n = rank == 1 ? N1 : SIDE * SIDE;
  for (long i = 0; i < n; i++) {
    long j;
    if (rank == 1) {
      long g = i / local * local;
      j = g + local - 1 - (i - g);
    } else {
      long r = i / SIDE, c = i % SIDE, gr = r / local * local, gc = c / local * local;
      j = (gr + local - 1 - (r - gr)) * SIDE + (gc + local - 1 - (c - gc));
    }
    bad += y[i] != x[j] * (x[i] * 3.0f + 1.0f);
  }
  return bad;
}

int main(int argc, char **argv) {
  int rounds = 40;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--rounds") && i + 1 < argc && atoi(argv[i + 1]) > 0) {
      rounds = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s [--rounds N]\n", argv[0]);
      return 2;
    }
  }
  size_t len = 0;
  char *src = slurp("bench/groups.xpk", &len);
  if (!src) {
    fprintf(stderr, "groups: cannot read bench/groups.xpk (run from the repository root)\n");
    return 2;
  }
  xpj_context_desc desc = {0};
  desc.visible = "cpu";
  desc.cache_mode = XPJ_CACHE_MODE_OFF; /* this build's code, not a cached one */
  xpj_context *ctx;
  xpj_device *dev;
  xpj_queue *q;
  xpj_program *p;
  xpj_kernel *k[NC];
  float *x, *y;
  size_t bytes = (size_t)SIDE * SIDE * sizeof(float); /* = N1 floats */
  if (xpj_context_create(&desc, &ctx) != XPJ_OK || xpj_device_select(ctx, "cpu", &dev) != XPJ_OK ||
      xpj_queue_create(dev, NULL, &q) != XPJ_OK ||
      xpj_program_create(ctx, "bench/groups.xpk", src, len, NULL, &p) != XPJ_OK ||
      xpj_mem_alloc(dev, XPJ_MEM_SHARED, bytes, 0, (void **)&x) != XPJ_OK ||
      xpj_mem_alloc(dev, XPJ_MEM_SHARED, bytes, 0, (void **)&y) != XPJ_OK) {
    fprintf(stderr, "groups: %s\n", xpj_last_error());
    return 1;
  }
  for (int c = 0; c < NC; c++)
    if (xpj_program_get_kernel(p, cases[c].name, NULL, 0, dev, NULL, &k[c]) != XPJ_OK) {
      fprintf(stderr, "groups: %s: %s\n", cases[c].name, xpj_last_error());
      return 1;
    }
  for (long i = 0; i < N1; i++)
    x[i] = (float)(i % 1000);
  xpj_array a1x = xpj_array_1d(x, XPJ_F32, N1), a1y = xpj_array_1d(y, XPJ_F32, N1);
  xpj_array a2x = xpj_array_2d(x, XPJ_F32, SIDE, SIDE), a2y = xpj_array_2d(y, XPJ_F32, SIDE, SIDE);
  double *t[NC];
  for (int c = 0; c < NC; c++)
    if (!(t[c] = calloc((size_t)rounds, sizeof **t)))
      return 1;
  int failures = 0;
  for (int r = -1; r < rounds; r++) /* round -1: checked, not timed */
    for (int c = 0; c < NC; c++) {
      bool two = cases[c].rank == 2;
      xpj_arg args[] = {xpj_arg_array(two ? &a2x : &a1x), xpj_arg_array(two ? &a2y : &a1y)};
      xpj_range rg = two ? xpj_range_2d(SIDE, SIDE, cases[c].local, cases[c].local)
                         : xpj_range_1d(N1, cases[c].local);
      memset(y, 0, bytes);
      double t0 = now_ms();
      if (xpj_launch(q, k[c], &rg, 2, args, NULL) != XPJ_OK || xpj_queue_wait(q) != XPJ_OK) {
        fprintf(stderr, "groups: %s: %s\n", cases[c].name, xpj_last_error());
        return 1;
      }
      double ms = now_ms() - t0;
      if (r < 0) {
        long bad = wrong(x, y, cases[c].local, cases[c].rank);
        if (bad) {
          fprintf(stderr, "groups: %s: %ld wrong elements\n", cases[c].name, bad);
          failures++;
        }
      } else {
        t[c][r] = ms;
      }
    }
  printf("bench/groups: a tile reversal through local memory, narrow and wide required "
         "local sizes, CPU device, median of %d interleaved rounds\n", rounds);
  printf("| kernel | local size | data | median |\n|---|---|---|---:|\n");
  double m[NC];
  for (int c = 0; c < NC; c++) {
    m[c] = median(t[c], rounds);
    printf("| %s | %ld%s%.0ld | %s | %.2f ms |\n", cases[c].name, cases[c].local,
           cases[c].rank == 2 ? " x " : "", cases[c].rank == 2 ? cases[c].local : 0,
           cases[c].rank == 2 ? "4096x4096 f32" : "2^24 f32", m[c]);
  }
  printf("narrow / wide: 1-D %.2fx, 2-D %.2fx\n", m[0] / m[1], m[2] / m[3]);
  return failures ? 1 : 0;
}
