/* xpjitd_progs.c - parsed programs kept by source hash (xpjitd.h). */
#include "xpjitd.h"

#include <nettle/sha2.h>
#include <stdio.h>
#include <string.h>

void xpjitd_hex(const uint8_t d[32], char out[65]) {
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    out[2 * i] = hex[d[i] >> 4];
    out[2 * i + 1] = hex[d[i] & 15];
  }
  out[64] = 0;
}

static void drop(xpjitd_progs *pc, unsigned i) {
  xpj_program_destroy(pc->slot[i].p);
  pc->slot[i].p = NULL;
  pc->bytes -= pc->slot[i].size;
  pc->slot[i].size = 0;
  pc->slot[i].used = 0;
}

xpj_program *xpjitd_program(xpjitd_progs *pc, xpj_context *ctx,
                            const xpd_get *g, xpj_status *status, char *err,
                            size_t errsize) {
  struct sha256_ctx h;
  sha256_init(&h);
  sha256_update(&h, g->source_len, g->source);
  sha256_update(&h, strlen(g->filename) + 1, (const uint8_t *)g->filename);
  uint8_t d[32];
  sha256_digest(&h, sizeof d, d);
  char key[65];
  xpjitd_hex(d, key);
  unsigned cap = pc->cap && pc->cap <= XPJITD_PROGS ? pc->cap : XPJITD_PROGS;
  unsigned lru = 0;
  for (unsigned i = 0; i < cap; i++) {
    if (pc->slot[i].p && !strcmp(pc->slot[i].key, key)) {
      pc->slot[i].used = ++pc->clock;
      *status = XPJ_OK;
      return pc->slot[i].p;
    }
    if (pc->slot[i].used < pc->slot[lru].used)
      lru = i;
  }
  xpj_program *p = NULL;
  *status = xpj_program_create(ctx, g->filename[0] ? g->filename
                                                   : "<source>",
                               (const char *)g->source, g->source_len, NULL,
                               &p);
  if (*status != XPJ_OK) {
    snprintf(err, errsize, "%s", xpj_last_error());
    return NULL;
  }
  drop(pc, lru);
  memcpy(pc->slot[lru].key, key, sizeof key);
  pc->slot[lru].p = p;
  pc->slot[lru].size = g->source_len;
  pc->slot[lru].used = ++pc->clock;
  pc->bytes += g->source_len;
  /* then the oldest others, while the sources kept are over the bound */
  while (pc->max_bytes && pc->bytes > pc->max_bytes) {
    unsigned old = lru;
    for (unsigned i = 0; i < cap; i++)
      if (i != lru && pc->slot[i].p &&
          (old == lru || pc->slot[i].used < pc->slot[old].used))
        old = i;
    if (old == lru)
      break;
    drop(pc, old);
  }
  return p;
}

void xpjitd_progs_free(xpjitd_progs *pc) {
  for (unsigned i = 0; i < XPJITD_PROGS; i++)
    drop(pc, i);
}
