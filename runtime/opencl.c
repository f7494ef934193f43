/* opencl.c - placeholder until the OpenCL backend lands (issue 7). */
#include "rt.h"

static xpj_status ocl_discover(xpj_context *ctx) {
  rt_context_absent(ctx, XPJ_BACKEND_OPENCL, "not built in");
  return XPJ_OK;
}

const rt_backend_ops rt_ocl_backend = {.id = XPJ_BACKEND_OPENCL,
                                        .discover = ocl_discover};
