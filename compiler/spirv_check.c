/*
 * spirv_check.c - SPIR-V validation and disassembly for libxpjit: the
 * table of spirv_tools.c, linked into the program (with libxpjit-llvm.a)
 * or else loaded from the plugin libxpjit-spirv.so.0 on first use
 * (XPJIT_SPIRV_PLUGIN names it; the rules of llvm_load.c).
 */
#define _GNU_SOURCE
#include "spirv_check.h"
#include "llvm.h"

#include <stddef.h>

/* Defined when the program links libxpjit-llvm.a. */
extern const xpj_spirv_api xpj_spirv_plugin_api __attribute__((weak));

static xpj_plugin spirv_plugin =
    XPJ_PLUGIN("XPJIT_SPIRV_PLUGIN", XPJ_SPIRV_PLUGIN, XPJ_SPIRV_PLUGIN_SYMBOL,
               "no SPIR-V validator", sizeof(xpj_spirv_api));

static const xpj_spirv_api *tools(char *err, size_t errsize) {
  return xpj_plugin_get(&spirv_plugin,
                        &xpj_spirv_plugin_api ? &xpj_spirv_plugin_api : NULL,
                        err, errsize);
}

int xpj_spirv_validate(const uint8_t *bin, size_t len, unsigned spirv_minor,
                       char *err, size_t errsize) {
  const xpj_spirv_api *t = tools(err, errsize);
  return t ? t->validate(bin, len, spirv_minor, err, errsize) : -1;
}

char *xpj_spirv_disassemble(const uint8_t *bin, size_t len,
                            unsigned spirv_minor, char *err, size_t errsize) {
  const xpj_spirv_api *t = tools(err, errsize);
  return t ? t->disassemble(bin, len, spirv_minor, err, errsize) : NULL;
}
