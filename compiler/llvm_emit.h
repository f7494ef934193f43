/*
 * llvm_emit.h - code generation and optimisation pipelines built ahead of
 * their module (llvm_emit.cpp): in the LLVM plugin only.
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
 * (xpj_emitter_run's successes), and ran through pipelines built ahead
 * (counted by cg_run_pipeline, which also runs pipelines built on the
 * spot): what the tests look at. */
extern unsigned xpj_emitted_ahead, xpj_passes_ahead;
/* Frees e; NULL is a no-op. */
void xpj_emitter_destroy(xpj_emitter *e);

/* An optimisation pipeline (the new pass manager's text, as for
 * LLVMRunPasses, which may also name the compiler's own passes:
 * llvm_emit.cpp) for tm, built now: its PassBuilder (loop and SLP
 * vectorisation off when simt, as cg_run_pipeline asks), its analyses
 * registered, its text parsed. NULL when the text does not parse (why:
 * LLVM's reason, never empty) or memory is short (why: empty); why may
 * be NULL when why_size is 0. tm must outlive it. */
typedef struct xpj_passes xpj_passes;
xpj_passes *xpj_passes_create(LLVMTargetMachineRef tm, const char *text,
                              bool simt, char *why, size_t why_size);
/* Whether p is unused and was built for tm and this text (simt follows
 * from tm's target). */
bool xpj_passes_fits(const xpj_passes *p, LLVMTargetMachineRef tm,
                     const char *text);
/* Runs p on m (LLVMRunPasses's instrumentation registered for m's
 * context first). A pipeline runs once: -1 after. */
int xpj_passes_run(xpj_passes *p, LLVMModuleRef m);
/* Frees p; NULL is a no-op. */
void xpj_passes_destroy(xpj_passes *p);

/* Whether LLVM's target t (for triple) knows cpu, every entry of
 * features (comma-separated, each "+name" or "-name"; empty entries
 * allowed) and whether that CPU with those features runs 64-bit code, as
 * the CPU device's triple needs; false with the reason in why (never
 * empty) otherwise. Nothing is printed: LLVM's own check, when a target
 * machine is made, warns on stderr and ignores a name it does not know,
 * and a CPU without 64-bit mode is a fatal error that ends the process. */
bool xpj_cpu_target_check(LLVMTargetRef t, const char *triple,
                          const char *cpu, const char *features, char *why,
                          size_t why_size);

#ifdef __cplusplus
}
#endif

#endif
