/* cuda.c - placeholder until the CUDA backend lands (issue 7). */
#include "rt.h"

static xpj_status cuda_discover(xpj_context *ctx) {
  rt_context_absent(ctx, XPJ_BACKEND_CUDA, "not built in");
  return XPJ_OK;
}

const rt_backend_ops rt_cuda_backend = {.id = XPJ_BACKEND_CUDA,
                                        .discover = cuda_discover};
