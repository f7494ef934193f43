/* A program using the installed library through pkg-config (tests/install.sh). */
#include <xpjit_compiler.h>
#include <stdio.h>
#include <string.h>
int main(void) {
  xpj_module *m; xpj_module_create(&m);
  const char *s = "kernel k(x: global f32[]) range { x[global_id(0)] = 1.0; }";
  int st = xpj_parse(m, "u.xpk", s, strlen(s), NULL);
  char hex[65] = "";
  xpj_module *k; xpj_spec sp = {0, NULL, NULL, 0};
  if (!st && !xpj_specialize(m, "k", &sp, &k, NULL)) { xpj_module_hash(k, "k", NULL, hex); xpj_module_destroy(k); }
  printf("%d %s %s\n", st, xpj_version(), hex);
  xpj_module_destroy(m);
  return 0;
}
