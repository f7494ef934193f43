/* ze.c - placeholder until the Level Zero backend lands (issue 7). */
#include "rt.h"

static xpj_status ze_discover(xpj_context *ctx) {
  rt_context_absent(ctx, XPJ_BACKEND_LEVEL_ZERO, "not built in");
  return XPJ_OK;
}

const rt_backend_ops rt_ze_backend = {.id = XPJ_BACKEND_LEVEL_ZERO,
                                        .discover = ze_discover};
