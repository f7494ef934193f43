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
 * C++ (as PostgreSQL's llvmjit_wrap.cpp is for its JIT): what
 * LLVMTargetMachineEmit does, split in two.
 *
 * The same for the optimisation pipelines (xpj_passes): LLVMRunPasses
 * makes a PassBuilder, registers every analysis and parses the pipeline's
 * text each time (2.5% of a small PTX compile, two or three times a
 * compile); a pipeline built ahead needs only the module's context for
 * its instrumentation (StandardInstrumentations, as LLVMRunPasses
 * registers it) when it runs. Every pipeline the compiler runs is built
 * here (cg_run_pipeline builds one on the spot when none was built
 * ahead), so that the pipelines' texts may name this file's own pass:
 *
 *   xpj-private-dse   dead store elimination in a function that still
 *                     keeps something in memory of its own (an alloca)
 *                     after SROA: a private array indexed by data. DSE's
 *                     time goes into alias queries between a kernel's
 *                     stores to global memory, where it found nothing
 *                     in the example kernels, while the private arrays
 *                     it exists for (median3x3 f64) are the allocas.
 *   xpj-indvars       induction-variable simplification (a loop pass),
 *                     except in the loops the code generator made
 *                     canonical itself (loop metadata
 *                     xpjit.loop.canonical, codegen.c mark_own_loop: the
 *                     four-trip loops and the loops that finish their
 *                     trips), where it built scalar evolution for every
 *                     compare and address to change nothing (their steps
 *                     reach it frozen, target_ptx.c opaque_steps: little
 *                     about their variables can be proven): the same
 *                     PTX for all 281 kernels of the examples, the tests'
 *                     conformance files and the benchmarks, 3-4% off the
 *                     compile of those loops' kernels (docs/benchmarks.md,
 *                     issue 19, twenty-seventh session).
 */
#include "llvm_emit.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Passes/StandardInstrumentations.h>
#include <llvm/Support/CodeGen.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Transforms/Scalar/DeadStoreElimination.h>
#include <llvm/Transforms/Scalar/IndVarSimplify.h>
#include <llvm/Analysis/LoopInfo.h>
#include <llvm/Transforms/Scalar/LoopPassManager.h>

#include <cstdio>
#include <memory>
#include <new>
#include <string>
#include <optional>
#include <string>

struct xpj_emitter {
  llvm::SmallString<0> out;
  llvm::raw_svector_ostream os{out};
  llvm::legacy::PassManager pm;
  LLVMTargetMachineRef tm;
  LLVMCodeGenFileType ft;
  bool ran = false;
};

unsigned xpj_emitted_ahead, xpj_passes_ahead;

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
  M->setDataLayout(
      reinterpret_cast<llvm::TargetMachine *>(e->tm)->createDataLayout());
  e->pm.run(*M);
  *data = e->out.data();
  *len = e->out.size();
  xpj_emitted_ahead++;
  return 0;
}

extern "C" void xpj_emitter_destroy(xpj_emitter *e) { delete e; }

namespace {
/* xpj-private-dse (above) */
struct PrivateDSE : llvm::PassInfoMixin<PrivateDSE> {
  llvm::PreservedAnalyses run(llvm::Function &f,
                              llvm::FunctionAnalysisManager &fam) {
    for (llvm::Instruction &i : llvm::instructions(f))
      if (llvm::isa<llvm::AllocaInst>(i))
        return llvm::DSEPass().run(f, fam);
    return llvm::PreservedAnalyses::all();
  }
};

/* xpj-indvars (above) */
struct OwnLoopsIndVars : llvm::PassInfoMixin<OwnLoopsIndVars> {
  llvm::PreservedAnalyses run(llvm::Loop &l, llvm::LoopAnalysisManager &lam,
                              llvm::LoopStandardAnalysisResults &ar,
                              llvm::LPMUpdater &u) {
    if (llvm::findOptionMDForLoop(&l, "xpjit.loop.canonical"))
      return llvm::PreservedAnalyses::all();
    return llvm::IndVarSimplifyPass().run(l, lam, ar, u);
  }
};

bool parse_own_loop_pass(llvm::StringRef name, llvm::LoopPassManager &lpm,
                         llvm::ArrayRef<llvm::PassBuilder::PipelineElement>) {
  if (name != "xpj-indvars")
    return false;
  lpm.addPass(OwnLoopsIndVars());
  return true;
}

bool parse_own_pass(llvm::StringRef name, llvm::FunctionPassManager &fpm,
                    llvm::ArrayRef<llvm::PassBuilder::PipelineElement>) {
  if (name != "xpj-private-dse")
    return false;
  fpm.addPass(PrivateDSE());
  return true;
}
} // namespace

struct xpj_passes {
  LLVMTargetMachineRef tm;
  std::string text;
  bool ran = false;
  llvm::PassInstrumentationCallbacks pic;
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  std::unique_ptr<llvm::PassBuilder> pb;
  llvm::ModulePassManager mpm;
  std::optional<llvm::StandardInstrumentations> si;
};

extern "C" xpj_passes *xpj_passes_create(LLVMTargetMachineRef tm,
                                         const char *text, bool simt,
                                         char *why, size_t why_size) {
  if (why_size)
    why[0] = '\0';
  xpj_passes *p = new (std::nothrow) xpj_passes;
  if (!p)
    return nullptr;
  p->tm = tm;
  p->text = text;
  /* what cg_run_pipeline asks of LLVMRunPasses */
  llvm::PipelineTuningOptions pto;
  if (simt) {
    pto.LoopVectorization = false;
    pto.SLPVectorization = false;
  }
  p->pb = std::make_unique<llvm::PassBuilder>(
      reinterpret_cast<llvm::TargetMachine *>(tm), pto, std::nullopt, &p->pic);
  p->pb->registerLoopAnalyses(p->lam);
  p->pb->registerFunctionAnalyses(p->fam);
  p->pb->registerCGSCCAnalyses(p->cgam);
  p->pb->registerModuleAnalyses(p->mam);
  p->pb->crossRegisterProxies(p->lam, p->fam, p->cgam, p->mam);
  p->pb->registerPipelineParsingCallback(parse_own_pass);
  p->pb->registerPipelineParsingCallback(parse_own_loop_pass);
  if (llvm::Error e = p->pb->parsePassPipeline(p->mpm, text)) {
    std::string msg = llvm::toString(std::move(e));
    if (why_size)
      snprintf(why, why_size, "%s", msg.empty() ? "no reason given" : msg.c_str());
    delete p;
    return nullptr;
  }
  return p;
}

extern "C" bool xpj_passes_fits(const xpj_passes *p, LLVMTargetMachineRef tm,
                                const char *text) {
  return p && !p->ran && p->tm == tm && p->text == text;
}

extern "C" int xpj_passes_run(xpj_passes *p, LLVMModuleRef m) {
  if (p->ran)
    return -1;
  p->ran = true;
  llvm::Module *M = llvm::unwrap(m);
  p->si.emplace(M->getContext(), false, false);
  p->si->registerCallbacks(p->pic, &p->mam);
  p->mpm.run(*M, p->mam);
  return 0;
}

extern "C" void xpj_passes_destroy(xpj_passes *p) { delete p; }

/* ---- CPU names and features (xpj_cpu_target_check) ------------------ */

extern "C" bool xpj_cpu_target_check(LLVMTargetRef t, const char *triple,
                                     const char *cpu, const char *features,
                                     char *why, size_t why_size) {
  const llvm::Target *target = reinterpret_cast<const llvm::Target *>(t);
  std::unique_ptr<llvm::MCSubtargetInfo> plain(
      target->createMCSubtargetInfo(llvm::Triple(triple), "", ""));
  if (!plain) {
    snprintf(why, why_size, "no subtarget information for %s", triple);
    return false;
  }
  if (*cpu && !plain->isCPUStringValid(cpu)) {
    snprintf(why, why_size, "'%s' is not a CPU LLVM knows for %s", cpu,
             triple);
    return false;
  }
  llvm::ArrayRef<llvm::SubtargetFeatureKV> known =
      plain->getAllProcessorFeatures();
  llvm::StringRef rest(features);
  while (!rest.empty()) {
    auto [item, tail] = rest.split(',');
    rest = tail;
    if (item.empty())
      continue;
    llvm::StringRef name = item.drop_front();
    bool found = false;
    for (const llvm::SubtargetFeatureKV &kv : known)
      if (name == kv.Key) {
        found = true;
        break;
      }
    if ((item[0] != '+' && item[0] != '-') || !found) {
      snprintf(why, why_size,
               (item[0] != '+' && item[0] != '-')
                   ? "CPU feature '%.*s' needs a sign: +name to enable it, "
                     "-name to disable it"
                   : "'%.*s' is not a CPU feature LLVM knows for %s",
               (int)item.size(), item.data(), triple);
      return false;
    }
  }
  /* 64bit: the CPU has x86-64's instructions; 64bit-mode: the code is
   * made for that mode (from the triple, unless -64bit-mode turns it off:
   * then LLVM ends the process at the first 64-bit value it lowers) */
  bool mode = false;
  for (const llvm::SubtargetFeatureKV &kv : known)
    mode |= llvm::StringRef(kv.Key) == "64bit-mode";
  std::unique_ptr<llvm::MCSubtargetInfo> full(
      target->createMCSubtargetInfo(llvm::Triple(triple), cpu, features));
  if (!full || !full->checkFeatures(mode ? "+64bit,+64bit-mode" : "+64bit")) {
    snprintf(why, why_size, "CPU '%s'%s%s cannot run 64-bit code", cpu,
             *features ? " with " : "", features);
    return false;
  }
  return true;
}
