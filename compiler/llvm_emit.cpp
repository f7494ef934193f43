/*
 * llvm_emit.cpp - a code generator prepared before its module exists.
 *
 * LLVMTargetMachineEmitToMemoryBuffer builds the legacy pass pipeline of
 * code generation (TargetMachine::addPassesToEmitFile: some 90 passes
 * scheduled, their analyses resolved) for every module it emits: 15% of a
 * small PTX compile (perf, docs/benchmarks.md). The pipeline depends on
 * the target machine alone, not on the module, so the compile server
 * builds it ahead, once per kept machine (compile_llvm.c, emit_ahead), and
 * each worker forked after it runs its copy once. The C API has no way to
 * build a pipeline without running it, hence this file, the project's only
 * C++ (as PostgreSQL's llvmjit_wrap.cpp is for its JIT): three functions
 * with C linkage, what LLVMTargetMachineEmit does split in two.
 */
#include "llvm_emit.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/CodeGen.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <new>

struct xpj_emitter {
  llvm::SmallString<0> out;
  llvm::raw_svector_ostream os{out};
  llvm::legacy::PassManager pm;
  LLVMTargetMachineRef tm;
  LLVMCodeGenFileType ft;
  bool ran = false;
};

unsigned xpj_emitted_ahead;

extern "C" xpj_emitter *xpj_emitter_create(LLVMTargetMachineRef tm,
                                           LLVMCodeGenFileType ft) {
  xpj_emitter *e = new (std::nothrow) xpj_emitter;
  if (!e)
    return nullptr;
  e->tm = tm;
  e->ft = ft;
  auto *TM = reinterpret_cast<llvm::TargetMachine *>(tm);
  llvm::CodeGenFileType t = ft == LLVMAssemblyFile
                                ? llvm::CodeGenFileType::AssemblyFile
                                : llvm::CodeGenFileType::ObjectFile;
  if (TM->addPassesToEmitFile(e->pm, e->os, nullptr, t)) {
    delete e;
    return nullptr;
  }
  return e;
}

extern "C" bool xpj_emitter_fits(const xpj_emitter *e, LLVMTargetMachineRef tm,
                                 LLVMCodeGenFileType ft) {
  return e && !e->ran && e->tm == tm && e->ft == ft;
}

extern "C" int xpj_emitter_run(xpj_emitter *e, LLVMModuleRef m,
                               const char **data, size_t *len) {
  if (e->ran)
    return -1;
  e->ran = true;
  llvm::Module *M = llvm::unwrap(m);
  M->setDataLayout(reinterpret_cast<llvm::TargetMachine *>(e->tm)
                       ->createDataLayout());
  e->pm.run(*M);
  *data = e->out.data();
  *len = e->out.size();
  xpj_emitted_ahead++;
  return 0;
}

extern "C" void xpj_emitter_destroy(xpj_emitter *e) { delete e; }
