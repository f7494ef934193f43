/* spirv_check.h - SPIR-V validation and disassembly (SPIRV-Tools). */
#ifndef XPJ_SPIRV_CHECK_H
#define XPJ_SPIRV_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* 0 when valid; else -1 and the validator's message in err. */
int xpj_spirv_validate(const uint8_t *bin, size_t len, unsigned spirv_minor,
                       char *err, size_t errsize);
/* Disassembly as a malloc'd NUL-terminated string, or NULL and err. */
char *xpj_spirv_disassemble(const uint8_t *bin, size_t len,
                            unsigned spirv_minor, char *err, size_t errsize);

#endif
