/* half.c - f16 and bf16 on the default device (XPJIT_DEVICE, else the CPU):
 * an f16 axpy checked bit for bit against the same arithmetic done on the
 * host (each operation rounded to f16), a dot product of f16 vectors
 * accumulated in f32 against a double reference, and bf16 weights scaled
 * in f32 (examples/half.xpk).
 *
 *   build/examples/half [N]
 */
#include <xpjit.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                           \
  do {                                                                        \
    xpj_status st_ = (call);                                                  \
    if (st_ != XPJ_OK) {                                                      \
      fprintf(stderr, "half: %s: %s\n", #call, xpj_last_error());            \
      return 1;                                                               \
    }                                                                         \
  } while (0)

static double h2d(uint16_t h) { return xpj_f16_to_double(h); }
static uint16_t d2h(double x) { return xpj_f16_from_double(x); }

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1 << 20;
  if (n <= 0) {
    fprintf(stderr, "usage: half [N > 0]\n");
    return 2;
  }
  xpj_context *ctx;
  xpj_device *dev;
  xpj_queue *q;
  xpj_program *prog;
  xpj_kernel *kaxpy, *kdot, *kscale;
  CHECK(xpj_context_create(NULL, &ctx));
  CHECK(xpj_device_select(ctx, NULL, &dev));
  CHECK(xpj_queue_create(dev, NULL, &q));
  if (xpj_program_create_file(ctx, "examples/half.xpk", NULL, &prog) != XPJ_OK) {
    fprintf(stderr, "half: %s (run from the repository root)\n", xpj_last_error());
    return 1;
  }
  CHECK(xpj_program_get_kernel(prog, "haxpy", "T=f16", 0, dev, NULL, &kaxpy));
  CHECK(xpj_program_get_kernel(prog, "hdot", NULL, 0, dev, NULL, &kdot));
  CHECK(xpj_program_get_kernel(prog, "bf16_scale", NULL, 0, dev, NULL,
                               &kscale));

  /* 1. y = a * x + y in f16 */
  uint16_t *x, *y, *ref = malloc((size_t)n * sizeof *ref);
  CHECK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, (size_t)n * 2, 0, (void **)&x));
  CHECK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, (size_t)n * 2, 0, (void **)&y));
  if (!ref)
    return 1;
  const double a = 0.3; /* rounded to f16 by xpj_arg_f16: 0.2999... */
  for (long i = 0; i < n; i++) {
    x[i] = d2h((double)(i % 1000) / 64.0 - 7.0);
    y[i] = d2h((double)(i % 77) * 0.125);
    /* a * x rounded to f16, then + y rounded to f16 (no fused multiply-add:
     * products of f16 are exact in f32, so the host's doubles round the
     * same way) */
    ref[i] = d2h(h2d(d2h(h2d(d2h(a)) * h2d(x[i]))) + h2d(y[i]));
  }
  xpj_array ax = xpj_array_1d(x, XPJ_F16, n), ay = xpj_array_1d(y, XPJ_F16, n);
  xpj_arg args[] = {xpj_arg_f16(a), xpj_arg_array(&ax), xpj_arg_array(&ay)};
  xpj_range r = xpj_range_1d((uint64_t)n, 0);
  CHECK(xpj_launch(q, kaxpy, &r, 3, args, NULL));
  CHECK(xpj_queue_wait(q));
  long bad = 0;
  for (long i = 0; i < n; i++)
    bad += y[i] != ref[i];
  printf("haxpy (f16): %ld elements on %s: %s\n", n, xpj_device_id(dev),
         bad ? "WRONG" : "bit-exact");

  /* 2. dot(x, y) from f16 data, accumulated in f32 */
  enum { GROUPS = 64, LOCAL = 64 };
  float *partial;
  CHECK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, GROUPS * sizeof *partial, 0,
                      (void **)&partial));
  xpj_array ap = xpj_array_1d(partial, XPJ_F32, GROUPS);
  xpj_arg dargs[] = {xpj_arg_array(&ax), xpj_arg_array(&ay),
                     xpj_arg_array(&ap)};
  r = xpj_range_1d(GROUPS * LOCAL, LOCAL);
  CHECK(xpj_launch(q, kdot, &r, 3, dargs, NULL));
  CHECK(xpj_queue_wait(q));
  double dot = 0, want = 0, mag = 0;
  for (int g = 0; g < GROUPS; g++)
    dot += partial[g];
  for (long i = 0; i < n; i++) {
    want += h2d(x[i]) * h2d(y[i]);
    mag += fabs(h2d(x[i]) * h2d(y[i]));
  }
  /* f32 accumulation: a relative error of about n / (GROUPS * LOCAL) f32
   * rounding steps on the sum of magnitudes */
  double tol = mag * 1e-6 * (1.0 + (double)n / (GROUPS * LOCAL));
  int dot_ok = fabs(dot - want) <= tol;
  bad += !dot_ok;
  printf("hdot (f16 data, f32 sums): %.6g, double reference %.6g: %s\n", dot,
         want, dot_ok ? "within bounds" : "WRONG");

  /* 3. bf16 weights scaled in f32 */
  uint16_t *w;
  float *peak;
  CHECK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, GROUPS * LOCAL * 2, 0, (void **)&w));
  CHECK(xpj_mem_alloc(dev, XPJ_MEM_SHARED, GROUPS * sizeof *peak, 0,
                      (void **)&peak));
  for (int i = 0; i < GROUPS * LOCAL; i++)
    w[i] = xpj_bf16_from_double(sin(i * 0.01) * 3.0);
  uint16_t *wref = malloc(GROUPS * LOCAL * 2);
  if (!wref)
    return 1;
  long wbad = 0;
  for (int i = 0; i < GROUPS * LOCAL; i++)
    wref[i] = xpj_bf16_from_double((double)((float)xpj_bf16_to_double(w[i]) *
                                            1.7f));
  xpj_array aw = xpj_array_1d(w, XPJ_BF16, GROUPS * LOCAL);
  xpj_array apk = xpj_array_1d(peak, XPJ_F32, GROUPS);
  xpj_arg sargs[] = {xpj_arg_array(&aw), xpj_arg_f32(1.7f),
                     xpj_arg_array(&apk)};
  CHECK(xpj_launch(q, kscale, &r, 3, sargs, NULL));
  CHECK(xpj_queue_wait(q));
  for (int i = 0; i < GROUPS * LOCAL; i++)
    wbad += w[i] != wref[i];
  bad += wbad;
  printf("bf16_scale: %d weights: %s\n", GROUPS * LOCAL,
         wbad ? "WRONG" : "bit-exact");

  free(wref);
  free(ref);
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, y);
  xpj_mem_free(dev, partial);
  xpj_mem_free(dev, w);
  xpj_mem_free(dev, peak);
  xpj_program_destroy(prog);
  xpj_queue_destroy(q);
  xpj_context_destroy(ctx);
  return bad ? 1 : 0;
}
