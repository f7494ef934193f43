/* A program using the installed library through pkg-config (tests/install.sh):
 * the frontend (hash of a kernel) and the runtime (the kernel run on the
 * CPU device; and an f64-to-f16 kernel, whose code calls libgcc's
 * __truncdfhf2: a C program that links nothing of C++ has no libgcc_s in
 * its global scope, and such kernels once failed to load there). */
#include <xpjit.h>
#include <stdio.h>
#include <string.h>

/* Names the library uses inside (runtime/, compiler/, runtime/daemon.h):
 * an application may have its own. Linked with libxpjit.a they must not
 * collide (tests/install.sh links this program statically too). */
int rt_err(int code) { return code + 1; }
int cg_call = 3;
int xpd_connect(void) { return cg_call; }

int main(void) {
  if (rt_err(1) != 2 || xpd_connect() != 3) {
    printf("the application's own rt_err/xpd_connect were replaced\n");
    return 1;
  }
  xpj_module *m; xpj_module_create(&m);
  const char *s = "kernel k(x: global f32[]) range { x[global_id(0)] = 1.5 * f32(global_id(0)); }";
  int st = xpj_parse(m, "u.xpk", s, strlen(s), NULL);
  char hex[65] = "";
  xpj_module *k; xpj_spec sp = {0, NULL, NULL, 0};
  if (!st && !xpj_specialize(m, "k", &sp, &k, NULL)) { xpj_module_hash(k, "k", NULL, hex); xpj_module_destroy(k); }
  xpj_module_destroy(m);
  xpj_context *ctx; xpj_device *dev; xpj_queue *q; xpj_program *p; xpj_kernel *kk;
  float *x = NULL;
  if (xpj_context_create(NULL, &ctx) || xpj_device_select(ctx, "cpu", &dev) ||
      xpj_queue_create(dev, NULL, &q) ||
      xpj_program_create(ctx, "u.xpk", s, strlen(s), NULL, &p) ||
      xpj_program_get_kernel(p, "k", NULL, 0, dev, NULL, &kk) ||
      xpj_mem_alloc(dev, XPJ_MEM_SHARED, 4 * sizeof *x, 0, (void **)&x)) {
    printf("runtime error: %s\n", xpj_last_error());
    return 1;
  }
  xpj_array a = xpj_array_1d(x, XPJ_F32, 4);
  xpj_arg arg = xpj_arg_array(&a);
  xpj_range r = xpj_range_1d(4, 0);
  if (xpj_launch(q, kk, &r, 1, &arg, NULL) || xpj_queue_wait(q)) {
    printf("launch error: %s\n", xpj_last_error());
    return 1;
  }
  const char *hs = "kernel h(x: global const f64[], y: global f16[]) range {"
                   " y[global_id(0)] = f16(x[global_id(0)]); }";
  xpj_program *hp;
  xpj_kernel *hk;
  double hx[2] = {1.5, -2.25};
  uint16_t hy[2] = {0, 0};
  xpj_array ha = xpj_array_1d(hx, XPJ_F64, 2), hb = xpj_array_1d(hy, XPJ_F16, 2);
  xpj_arg hargs[2] = {xpj_arg_array(&ha), xpj_arg_array(&hb)};
  xpj_range hr = xpj_range_1d(2, 0);
  if (xpj_program_create(ctx, "h.xpk", hs, strlen(hs), NULL, &hp) ||
      xpj_program_get_kernel(hp, "h", NULL, 0, dev, NULL, &hk) ||
      xpj_launch(q, hk, &hr, 2, hargs, NULL) || xpj_queue_wait(q)) {
    printf("f16 error: %s\n", xpj_last_error());
    return 1;
  }
  printf("%d %s %s %g %g\n", st, xpj_version(), hex, (double)x[3],
         xpj_f16_to_double(hy[1]));
  xpj_program_destroy(hp);
  xpj_mem_free(dev, x);
  xpj_program_destroy(p);
  xpj_queue_destroy(q);
  xpj_context_destroy(ctx);
  return 0;
}
