/* spirv_check.h - SPIR-V validation and disassembly (SPIRV-Tools). */
#ifndef XPJ_SPIRV_CHECK_H
#define XPJ_SPIRV_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 0 when valid; else -1 and the validator's message in err. */
int xpj_spirv_validate(const uint8_t *bin, size_t len, unsigned spirv_minor,
                       char *err, size_t errsize);

/* SPIR-V capabilities the runtime and validation ask about */
#define XPJ_SPV_CAP_FLOAT16 9        /* f16 arithmetic: cl_khr_fp16 */
#define XPJ_SPV_CAP_INT64_ATOMICS 12 /* cl_khr_int64_base_atomics */

/* The module (any bytes: a truncated or malformed one is read no further
 * than it goes) declares capability cap among its leading OpCapability /
 * OpExtension instructions. */
bool xpj_spirv_has_capability(const uint8_t *bin, size_t len, uint32_t cap);
/* Disassembly as a malloc'd NUL-terminated string, or NULL and err. */
char *xpj_spirv_disassemble(const uint8_t *bin, size_t len,
                            unsigned spirv_minor, char *err, size_t errsize);

#endif
