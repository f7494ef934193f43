/* llvm_lock.h - for code elsewhere in libxpjit that uses LLVM in the
 * caller's process (the CPU runtime's ORC loader): LLVM's targets are
 * initialised once, and a compile worker is never forked while such code is
 * inside LLVM (the worker would inherit its locks mid-update). Internal. */
#ifndef XPJ_LLVM_LOCK_H
#define XPJ_LLVM_LOCK_H

/* Initialises LLVM's targets (once) and enters a section that excludes the
 * fork of a compiler worker; sections of several threads may overlap. */
void xpj_llvm_enter(void);
void xpj_llvm_leave(void);

#endif
