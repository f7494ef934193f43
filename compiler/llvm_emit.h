/*
 * llvm_emit.h - code generation whose pass pipeline is built ahead of its
 * module (llvm_emit.cpp): in the LLVM plugin only.
 */
#ifndef XPJ_LLVM_EMIT_H
#define XPJ_LLVM_EMIT_H

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xpj_emitter xpj_emitter;

/* The code generator of tm for files of type ft, its pipeline built now;
 * NULL when tm cannot emit them or memory is short. tm must outlive it. */
xpj_emitter *xpj_emitter_create(LLVMTargetMachineRef tm,
                                LLVMCodeGenFileType ft);
/* Whether e is unused and was made for tm and ft. */
bool xpj_emitter_fits(const xpj_emitter *e, LLVMTargetMachineRef tm,
                      LLVMCodeGenFileType ft);
/* Emits m (its data layout set from the machine, as
 * LLVMTargetMachineEmitToMemoryBuffer does): *data and *len, owned by e,
 * valid until it is destroyed. An emitter runs once: -1 after. */
int xpj_emitter_run(xpj_emitter *e, LLVMModuleRef m, const char **data,
                    size_t *len);
/* How many modules this process emitted by code generators built ahead
 * (xpj_emitter_run's successes): what the tests look at. */
extern unsigned xpj_emitted_ahead;
/* Frees e; NULL is a no-op. */
void xpj_emitter_destroy(xpj_emitter *e);

#ifdef __cplusplus
}
#endif

#endif
