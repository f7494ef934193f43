/*
 * target_cpu.c - native code for the host CPU (x86-64).
 *
 * The entry point loops over work-items and work-groups itself
 * (codegen.c, docs/abi.md); this file only picks the target machine and
 * the atomic scopes: a work-group runs on one thread, so work-group-scope
 * atomics on local memory need no bus lock.
 */
#include "cg.h"

#include <stdio.h>
#include <string.h>

static LLVMTargetMachineRef cpu_machine(cg *c) {
  char *triple = LLVMGetDefaultTargetTriple(), *err = NULL;
  LLVMTargetRef t;
  if (LLVMGetTargetFromTriple(triple, &t, &err)) {
    cg_fail(c, XPJ_ERR_COMPILE, "host target unavailable: %s", err);
    LLVMDisposeMessage(err);
    LLVMDisposeMessage(triple);
    return NULL;
  }
  LLVMSetTarget(c->mod, triple);
  LLVMCodeGenOptLevel lvl = c->opts->opt_level == 0 ? LLVMCodeGenLevelNone
                            : c->opts->opt_level == 1 ? LLVMCodeGenLevelLess
                            : c->opts->opt_level >= 3 ? LLVMCodeGenLevelAggressive
                                                      : LLVMCodeGenLevelDefault;
  LLVMTargetMachineRef tm =
      LLVMCreateTargetMachine(t, triple, c->target->cpu, c->target->features,
                              lvl, LLVMRelocPIC, LLVMCodeModelDefault);
  LLVMDisposeMessage(triple);
  return tm;
}

static const char *cpu_scope(cg *c, xpj_scope s, xpj_space sp) {
  (void)c;
  if (s == XPJ_SCOPE_WORK_GROUP && sp == XPJ_SPACE_LOCAL)
    return "singlethread";
  return ""; /* system */
}

const cg_target_ops xpj_target_cpu_ops = {
    .name = "cpu",
    .simt = false,
    .as_global = 0,
    .as_local = 0,
    .kernel_cc = LLVMCCallConv,
    .machine = cpu_machine,
    .syncscope = cpu_scope,
};
