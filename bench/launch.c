/* bench/launch.c - the C side of bench/python_launch.py: the time of one
 * launch of a cached kernel on 1,000 elements and the wait for it, through
 * libxpjit's C API, on one device (xpjit's own launch path without Python).
 *
 *   launch FILTER N ROUNDS   ("cpu" or "opencl"; N launches per round)
 *
 * Prints one line per round: "round R us P50" (microseconds per launch and
 * wait, the median of the round's N). The kernel is the one
 * python_launch.py launches from Python: y = a * x + y on f32. */
#include "bench_util.h"
#include "xpjit.h"

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static const char src[] =
    "kernel axpy<T>(a: T, x: global const T[*], y: global T[*]) range {\n"
    "    let i = global_id(0);\n"
    "    if i < size(y) { y[i] += a * x[i]; }\n"
    "}\n";

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : "cpu";
  int n = argc > 2 ? atoi(argv[2]) : 2000, rounds = argc > 3 ? atoi(argv[3]) : 5;
  if (n < 1 || rounds < 1) {
    fprintf(stderr, "usage: launch FILTER N ROUNDS\n");
    return 2;
  }
  xpj_context *ctx;
  xpj_device *dev;
  xpj_queue *q;
  xpj_program *p;
  xpj_kernel *k;
  if (xpj_context_create(NULL, &ctx) || xpj_device_select(ctx, filter, &dev) ||
      xpj_queue_create(dev, NULL, &q) ||
      xpj_program_create(ctx, "axpy", src, sizeof src - 1, NULL, &p) ||
      xpj_program_get_kernel(p, "axpy", "T=f32", 1, dev, NULL, &k)) {
    fprintf(stderr, "launch: %s\n", xpj_last_error());
    return 1;
  }
  enum { E = 1000 };
  float *x, *y;
  if (xpj_mem_alloc(dev, XPJ_MEM_SHARED, E * sizeof *x, 0, (void **)&x) ||
      xpj_mem_alloc(dev, XPJ_MEM_SHARED, E * sizeof *y, 0, (void **)&y)) {
    fprintf(stderr, "launch: %s\n", xpj_last_error());
    return 1;
  }
  float zero = 0;
  xpj_enqueue_fill(q, x, &zero, sizeof zero, E * sizeof *x, NULL);
  xpj_enqueue_fill(q, y, &zero, sizeof zero, E * sizeof *y, NULL);
  xpj_array ax = xpj_array_1d(x, XPJ_F32, E), ay = xpj_array_1d(y, XPJ_F32, E);
  xpj_range r = xpj_range_1d(E, 0);
  double *t = malloc((size_t)n * sizeof *t);
  for (int round = 0; round <= rounds; round++) { /* round 0: warm-up */
    for (int i = 0; i < n; i++) {
      double t0 = now_us();
      /* as a binding does: the arguments made for each launch */
      xpj_arg args[3] = {xpj_arg_f32(2.0f), xpj_arg_array(&ax),
                         xpj_arg_array(&ay)};
      if (xpj_launch(q, k, &r, 3, args, NULL) || xpj_queue_wait(q)) {
        fprintf(stderr, "launch: %s\n", xpj_last_error());
        return 1;
      }
      t[i] = now_us() - t0;
    }
    if (round)
      printf("round %d us %.2f\n", round, median(t, n));
  }
  free(t);
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, y);
  xpj_program_destroy(p);
  xpj_queue_destroy(q);
  xpj_context_destroy(ctx);
  return 0;
}
