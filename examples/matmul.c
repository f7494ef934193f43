/* matmul.c - C = A * B with 16x16 tiles in local memory
 * (examples/matmul.xpk, matmul_tiled) on the default device, for sizes that
 * are not multiples of the tile, checked against a plain C triple loop.
 *
 *   build/examples/matmul [M N K]      (run from the repository root)
 */
#include <xpjit.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#define CHECK(call)                                                           \
  do {                                                                        \
    xpj_status st_ = (call);                                                  \
    if (st_ != XPJ_OK) {                                                      \
      fprintf(stderr, "matmul: %s: %s\n", #call, xpj_last_error());          \
      return 1;                                                               \
    }                                                                         \
  } while (0)

#define TILE 16

int main(int argc, char **argv) {
  long m = 500, n = 700, kd = 300;
  if (argc == 4) {
    m = atol(argv[1]);
    n = atol(argv[2]);
    kd = atol(argv[3]);
  }
  if (m <= 0 || n <= 0 || kd <= 0 || (argc != 1 && argc != 4)) {
    fprintf(stderr, "usage: matmul [M N K]\n");
    return 2;
  }
  xpj_context *ctx;
  xpj_device *dev;
  xpj_queue *q;
  xpj_program *prog;
  xpj_kernel *k;
  CHECK(xpj_context_create(NULL, &ctx));
  CHECK(xpj_device_select(ctx, NULL, &dev));
  CHECK(xpj_queue_create(dev, NULL, &q));
  CHECK(xpj_program_create_file(ctx, "examples/matmul.xpk", NULL, &prog));
  double t0 = now_ms();
  CHECK(xpj_program_get_kernel(prog, "matmul_tiled", "T=f32", 0, dev, NULL,
                               &k));
  double t_compile = now_ms() - t0;

  float *a, *b, *c;
  CHECK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, m * kd * sizeof *a, 0, (void **)&a));
  CHECK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, kd * n * sizeof *b, 0, (void **)&b));
  CHECK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, m * n * sizeof *c, 0, (void **)&c));
  for (long i = 0; i < m * kd; i++)
    a[i] = (float)((i * 7) % 13) / 13.0f - 0.4f;
  for (long i = 0; i < kd * n; i++)
    b[i] = (float)((i * 5) % 11) / 11.0f - 0.6f;

  xpj_array A = xpj_array_2d(a, XPJ_F32, m, kd), B = xpj_array_2d(b, XPJ_F32, kd, n),
            C = xpj_array_2d(c, XPJ_F32, m, n);
  xpj_arg args[] = {xpj_arg_array(&A), xpj_arg_array(&B), xpj_arg_array(&C)};
  /* dimension 0 runs over rows, 1 over columns; whole tiles */
  uint64_t gm = (m + TILE - 1) / TILE * TILE, gn = (n + TILE - 1) / TILE * TILE;
  xpj_range r = xpj_range_2d(gm, gn, TILE, TILE);
  t0 = now_ms();
  CHECK(xpj_launch(q, k, &r, 3, args, NULL));
  CHECK(xpj_queue_wait(q));
  double t_run = now_ms() - t0;

  double worst = 0;
  for (long i = 0; i < m; i++)
    for (long j = 0; j < n; j++) {
      float acc = 0; /* same order as the kernel: k ascending */
      for (long p = 0; p < kd; p++)
        acc += a[i * kd + p] * b[p * n + j];
      double e = fabs((double)c[i * n + j] - acc) / (fabs(acc) + 1.0);
      if (e > worst)
        worst = e;
    }
  int ok = worst < 1e-5;
  printf("matmul: %ldx%ld * %ldx%ld f32 on %s: %s (worst rel. error %.1e); "
         "compile %.1f ms, run %.2f ms (%.2f GFLOP/s)\n",
         m, kd, kd, n, xpj_device_id(dev), ok ? "correct" : "WRONG", worst,
         t_compile, t_run, 2.0 * m * n * kd / (t_run * 1e6));
  xpj_mem_free(dev, a);
  xpj_mem_free(dev, b);
  xpj_mem_free(dev, c);
  xpj_program_destroy(prog);
  xpj_queue_destroy(q);
  xpj_context_destroy(ctx);
  return ok ? 0 : 1;
}
