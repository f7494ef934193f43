/*
 * spirv_tools.c - SPIR-V validation and disassembly through the
 * SPIRV-Tools C API (libspirv.h), behind the table xpj_spirv_plugin_api:
 * the plugin libxpjit-spirv.so.0 (what libxpjit loads to check SPIR-V
 * before a driver gets it) and a part of libxpjit-llvm (every SPIR-V
 * module is validated here before it leaves the compiler).
 */
#ifndef XPJ_BUILD_ID
#define XPJ_BUILD_ID "unknown"
#endif
#include "spirv_check.h"

#include <spirv-tools/libspirv.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static spv_target_env env_for(unsigned spirv_minor) {
  /* OpenCL 2.2 accepts SPIR-V 1.0-1.2; newer versions validate under the
   * universal environment of their version */
  switch (spirv_minor) {
  case 0: case 1: case 2: return SPV_ENV_OPENCL_2_2;
  case 3: return SPV_ENV_UNIVERSAL_1_3;
  default: return SPV_ENV_UNIVERSAL_1_4;
  }
}

static int validate(const uint8_t *bin, size_t len, unsigned spirv_minor,
                    char *err, size_t errsize) {
  if (len % 4 != 0 || len < 20) {
    snprintf(err, errsize, "SPIR-V module of %zu bytes is truncated", len);
    return -1;
  }
  spv_target_env env = env_for(spirv_minor);
  /* 64-bit atomics need Int64Atomics (cl_khr_int64_base_atomics) and f16
   * arithmetic Float16 (cl_khr_fp16), which the OpenCL 2.2 environment of
   * SPIRV-Tools rejects outright: such modules are validated under the
   * universal environment instead */
  if (env == SPV_ENV_OPENCL_2_2 &&
      (xpj_spirv_has_capability(bin, len, XPJ_SPV_CAP_INT64_ATOMICS) ||
       xpj_spirv_has_capability(bin, len, XPJ_SPV_CAP_FLOAT16)))
    env = SPV_ENV_UNIVERSAL_1_2;
  spv_context ctx = spvContextCreate(env);
  if (!ctx) {
    snprintf(err, errsize, "SPIRV-Tools: cannot create a context");
    return -1;
  }
  uint32_t *words = malloc(len);
  if (!words) {
    spvContextDestroy(ctx);
    snprintf(err, errsize, "out of memory");
    return -1;
  }
  memcpy(words, bin, len);
  spv_diagnostic diag = NULL;
  spv_result_t r = spvValidateBinary(ctx, words, len / 4, &diag);
  int rc = 0;
  if (r != SPV_SUCCESS) {
    snprintf(err, errsize, "SPIR-V validation failed: %s",
             diag && diag->error ? diag->error : "(no message)");
    rc = -1;
  }
  spvDiagnosticDestroy(diag);
  free(words);
  spvContextDestroy(ctx);
  return rc;
}

static char *disassemble(const uint8_t *bin, size_t len, unsigned spirv_minor,
                         char *err, size_t errsize) {
  if (len % 4 != 0) {
    snprintf(err, errsize, "SPIR-V module of %zu bytes is truncated", len);
    return NULL;
  }
  spv_context ctx = spvContextCreate(env_for(spirv_minor));
  if (!ctx) {
    snprintf(err, errsize, "SPIRV-Tools: cannot create a context");
    return NULL;
  }
  uint32_t *words = malloc(len ? len : 4);
  if (!words) {
    spvContextDestroy(ctx);
    snprintf(err, errsize, "out of memory");
    return NULL;
  }
  memcpy(words, bin, len);
  spv_text text = NULL;
  spv_diagnostic diag = NULL;
  char *out = NULL;
  if (spvBinaryToText(ctx, words, len / 4,
                      SPV_BINARY_TO_TEXT_OPTION_INDENT |
                          SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES,
                      &text, &diag) == SPV_SUCCESS) {
    out = malloc(text->length + 1);
    if (out) {
      memcpy(out, text->str, text->length);
      out[text->length] = 0;
    } else {
      snprintf(err, errsize, "out of memory");
    }
  } else {
    snprintf(err, errsize, "SPIR-V disassembly failed: %s",
             diag && diag->error ? diag->error : "(no message)");
  }
  spvTextDestroy(text);
  spvDiagnosticDestroy(diag);
  free(words);
  spvContextDestroy(ctx);
  return out;
}

const xpj_spirv_api xpj_spirv_plugin_api = {sizeof(xpj_spirv_api),
                                            XPJ_BUILD_ID, validate,
                                            disassemble};
