/*
 * spirv_check.c - SPIR-V validation and disassembly for libxpjit: the
 * table of spirv_tools.c, linked into the program (with libxpjit-llvm.a)
 * or else loaded from the plugin libxpjit-spirv.so.0 on first use
 * (XPJIT_SPIRV_PLUGIN names it; the rules of llvm_load.c).
 */
#define _GNU_SOURCE
#include "spirv_check.h"
#include "llvm.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

/* Defined when the program links libxpjit-llvm.a. */
extern const xpj_spirv_api xpj_spirv_plugin_api __attribute__((weak));

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(const xpj_spirv_api *) api; /* set once */
static char failed[400];                   /* why it could not be loaded */

static const xpj_spirv_api *tools(char *err, size_t errsize) {
  if (&xpj_spirv_plugin_api)
    return &xpj_spirv_plugin_api;
  const xpj_spirv_api *a = atomic_load(&api);
  if (a)
    return a;
  pthread_mutex_lock(&mu);
  a = atomic_load(&api);
  if (!a && !failed[0]) {
    a = xpj_plugin_load("XPJIT_SPIRV_PLUGIN", XPJ_SPIRV_PLUGIN,
                        XPJ_SPIRV_PLUGIN_SYMBOL, sizeof *a,
                        "no SPIR-V validator", failed, sizeof failed);
    atomic_store(&api, a);
  }
  pthread_mutex_unlock(&mu);
  if (!a && err && errsize)
    snprintf(err, errsize, "%s", failed);
  return a;
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
