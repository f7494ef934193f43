/* saxpy.c - y = a * x + y on the default device (XPJIT_DEVICE, else the
 * CPU), checked against a plain C loop.
 *
 *   build/examples/saxpy [N]
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
      fprintf(stderr, "saxpy: %s: %s\n", #call, xpj_last_error());           \
      return 1;                                                               \
    }                                                                         \
  } while (0)

static const char source[] =
    "kernel saxpy<T>(a: T, x: global const T[], y: global T[]) range {\n"
    "    let i = global_id(0);\n"
    "    y[i] = a * x[i] + y[i];\n"
    "}\n";

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 10 * 1000 * 1000;
  if (n <= 0) {
    fprintf(stderr, "usage: saxpy [N > 0]\n");
    return 2;
  }
  xpj_context *ctx;
  xpj_device *dev;
  xpj_queue *q;
  xpj_program *prog;
  xpj_kernel *k;
  CHECK(xpj_context_create(NULL, &ctx));
  CHECK(xpj_device_select(ctx, NULL, &dev));
  xpj_device_info info;
  CHECK(xpj_device_get_info(dev, &info));
  CHECK(xpj_queue_create(dev, NULL, &q));
  CHECK(xpj_program_create(ctx, "saxpy.xpk", source, sizeof source - 1, NULL,
                           &prog));
  double t0 = now_ms();
  CHECK(xpj_program_get_kernel(prog, "saxpy", "T=f32", 0, dev, NULL, &k));
  double t_compile = now_ms() - t0;

  float *x, *y, *ref = malloc(n * sizeof *ref);
  CHECK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, n * sizeof *x, 0, (void **)&x));
  CHECK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, n * sizeof *y, 0, (void **)&y));
  if (!ref)
    return 1;
  for (long i = 0; i < n; i++) {
    x[i] = (float)(i % 1000) * 0.5f + 1.0f;
    y[i] = (float)(i % 77) - 30.5f;
    ref[i] = 2.5f * x[i] + y[i];
  }
  xpj_array ax = xpj_array_1d(x, XPJ_F32, n), ay = xpj_array_1d(y, XPJ_F32, n);
  xpj_arg args[] = {xpj_arg_f32(2.5f), xpj_arg_array(&ax),
                    xpj_arg_array(&ay)};
  xpj_range r = xpj_range_1d((uint64_t)n, 0);
  t0 = now_ms();
  CHECK(xpj_launch(q, k, &r, 3, args, NULL));
  CHECK(xpj_queue_wait(q));
  double t_run = now_ms() - t0;

  long bad = 0;
  for (long i = 0; i < n; i++)
    bad += y[i] != ref[i];
  printf("saxpy: %ld elements on %s (%s): %s; compile %.1f ms, run %.2f ms "
         "(%.1f GB/s)\n",
         n, xpj_device_id(dev), info.name, bad ? "WRONG" : "correct",
         t_compile, t_run, 12.0 * n / (t_run * 1e6));
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, y);
  free(ref);
  xpj_program_destroy(prog);
  xpj_queue_destroy(q);
  xpj_context_destroy(ctx);
  return bad ? 1 : 0;
}
