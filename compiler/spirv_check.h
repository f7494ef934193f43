/* spirv_check.h - SPIR-V validation and disassembly. SPIRV-Tools is C++:
 * it lives in the plugin libxpjit-spirv.so.0 (compiler/spirv_tools.c),
 * loaded on the first validation, so that a process that loads no SPIR-V
 * onto a driver maps neither it nor the C++ runtime (docs/api.md, "Where
 * LLVM is loaded"); libxpjit-llvm carries its own copy for the compiler. */
#ifndef XPJ_SPIRV_CHECK_H
#define XPJ_SPIRV_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* 0 when valid; else -1 and the validator's message in err (also when the
 * validator cannot be loaded: nothing unchecked reaches a driver). */
int xpj_spirv_validate(const uint8_t *bin, size_t len, unsigned spirv_minor,
                       char *err, size_t errsize);
/* Disassembly as a malloc'd NUL-terminated string, or NULL and err. */
char *xpj_spirv_disassemble(const uint8_t *bin, size_t len,
                            unsigned spirv_minor, char *err, size_t errsize);

/* SPIR-V capabilities the runtime and validation ask about */
#define XPJ_SPV_CAP_FLOAT16 9        /* f16 arithmetic: cl_khr_fp16 */
#define XPJ_SPV_CAP_INT64_ATOMICS 12 /* cl_khr_int64_base_atomics */

/* The module (any bytes: a truncated or malformed one is read no further
 * than it goes) declares capability cap among its leading OpCapability /
 * OpExtension instructions (OpCapability is opcode 17, one operand;
 * capabilities come first after the 5-word header). */
static inline bool xpj_spirv_has_capability(const uint8_t *bin, size_t len,
                                            uint32_t cap) {
  size_t n = bin ? len / 4 : 0;
  for (size_t i = 5; i < n;) {
    uint32_t w, arg = 0;
    memcpy(&w, bin + 4 * i, 4);
    if (i + 1 < n)
      memcpy(&arg, bin + 4 * (i + 1), 4);
    uint32_t op = w & 0xffff, wc = w >> 16;
    if (wc == 0)
      return false;
    if (op == 17 && wc == 2 && i + 1 < n && arg == cap)
      return true;
    if (op != 17 && op != 10 /* OpExtension */)
      return false;
    i += wc;
  }
  return false;
}

/* The plugin's file name (found as libxpjit-llvm.so.0 is) and its one
 * exported symbol, a table whose first two fields are those of every
 * plugin of libxpjit (xpj_plugin_head, llvm.h). */
#define XPJ_SPIRV_PLUGIN "libxpjit-spirv.so.0"
#define XPJ_SPIRV_PLUGIN_SYMBOL "xpj_spirv_plugin_api"

typedef struct xpj_spirv_api {
  size_t size;       /* sizeof (xpj_spirv_api) where it was built */
  const char *build; /* XPJ_BUILD_ID where it was built */
  int (*validate)(const uint8_t *bin, size_t len, unsigned spirv_minor,
                  char *err, size_t errsize);
  char *(*disassemble)(const uint8_t *bin, size_t len, unsigned spirv_minor,
                       char *err, size_t errsize);
} xpj_spirv_api;

/* Defined by spirv_tools.c (the plugin, and libxpjit-llvm). */
extern const xpj_spirv_api xpj_spirv_plugin_api;

#endif
