/* reduction.c - the sum of a large f64 array with a work-group reduction
 * in local memory (examples/reduce.xpk, block_sum), on the default device,
 * checked against a compensated sum in C.
 *
 *   build/examples/reduction [N]       (run from the repository root)
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
      fprintf(stderr, "reduction: %s: %s\n", #call, xpj_last_error());       \
      return 1;                                                               \
    }                                                                         \
  } while (0)

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 20 * 1000 * 1000 + 3;
  if (n <= 0) {
    fprintf(stderr, "usage: reduction [N > 0]\n");
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
  CHECK(xpj_program_create_file(ctx, "examples/reduce.xpk", NULL, &prog));
  double t0 = now_ms();
  CHECK(xpj_program_get_kernel(prog, "block_sum", "T=f64", 0, dev, NULL, &k));
  double t_compile = now_ms() - t0;

  double *x, *total;
  CHECK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, n * sizeof *x, 0, (void **)&x));
  CHECK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, sizeof *total, 0,
                      (void **)&total));
  double ref = 0, comp = 0; /* Kahan */
  for (long i = 0; i < n; i++) {
    x[i] = 1.0 / (double)(1 + i % 1013) - 0.25;
    double yk = x[i] - comp, t = ref + yk;
    comp = (t - ref) - yk;
    ref = t;
  }
  /* enough groups to fill the device; each work-item strides the array */
  xpj_device_info info;
  CHECK(xpj_device_get_info(dev, &info));
  uint64_t local = 256, groups = 64 * (uint64_t)info.compute_units;
  xpj_array ax = xpj_array_1d(x, XPJ_F64, n), at = xpj_array_1d(total, XPJ_F64, 1);
  xpj_arg args[] = {xpj_arg_array(&ax), xpj_arg_array(&at)};
  xpj_range r = xpj_range_1d(groups * local, local);
  double zero = 0;
  t0 = now_ms();
  CHECK(xpj_enqueue_fill(q, total, &zero, sizeof zero, sizeof zero, NULL));
  CHECK(xpj_launch(q, k, &r, 2, args, NULL));
  CHECK(xpj_queue_wait(q));
  double t_run = now_ms() - t0;

  double err = fabs(*total - ref) / fabs(ref);
  int ok = err < 1e-9;
  printf("reduction: sum of %ld f64 on %s = %.12g (C: %.12g, rel. error "
         "%.1e): %s; compile %.1f ms, run %.2f ms (%.1f GB/s)\n",
         n, xpj_device_id(dev), *total, ref, err, ok ? "correct" : "WRONG",
         t_compile, t_run, 8.0 * n / (t_run * 1e6));
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, total);
  xpj_program_destroy(prog);
  xpj_queue_destroy(q);
  xpj_context_destroy(ctx);
  return ok ? 0 : 1;
}
