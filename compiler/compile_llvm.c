/*
 * compile_llvm.c - the compile itself: lowering (codegen.c), LLVM's
 * optimisation pipeline, code generation and, for SPIR-V, validation; and
 * what else of LLVM a compile needs (its targets and options, its error
 * handlers). The rest of libxpjit reaches it through xpj_llvm_api
 * (llvm.h): linked into programs that always compile, a plugin loaded on
 * the first in-process compile everywhere else (docs/api.md).
 */
#define _GNU_SOURCE
#include "cg.h"
#include "llvm.h"
#include "llvm_emit.h"
#include "spirv_check.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/ErrorHandling.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_once_t llvm_once = PTHREAD_ONCE_INIT;

static void llvm_init(void) {
  LLVMInitializeX86TargetInfo();
  LLVMInitializeX86Target();
  LLVMInitializeX86TargetMC();
  LLVMInitializeX86AsmPrinter();
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
  LLVMInitializeSPIRVTargetInfo();
  LLVMInitializeSPIRVTarget();
  LLVMInitializeSPIRVTargetMC();
  LLVMInitializeSPIRVAsmPrinter();
  /* Epilogue vectorisation adds a second vector loop after each
   * vectorised one; work-item loops run a multiple of the vector width in
   * the common case, and it costs 15-20% of a CPU compile (docs/abi.md,
   * "LLVM options"). Process-wide, once, before any compile here or in a
   * worker forked from here. */
  const char *argv[] = {"xpjit", "--enable-epilogue-vectorization=false"};
  LLVMParseCommandLineOptions(2, argv, NULL);
}

static void init(void) { pthread_once(&llvm_once, llvm_init); }

static char llvm_ver[32];
static pthread_once_t ver_once = PTHREAD_ONCE_INIT;
static void fill_version(void) {
  unsigned a, b, c;
  LLVMGetVersion(&a, &b, &c);
  snprintf(llvm_ver, sizeof llvm_ver, "%u.%u.%u", a, b, c);
}

static const char *version(void) {
  pthread_once(&ver_once, fill_version);
  return llvm_ver;
}

static const cg_target_ops *ops_for(xpj_target_kind k) {
  switch (k) {
  case XPJ_TARGET_SPIRV: return &xpj_target_spirv_ops;
  case XPJ_TARGET_PTX: return &xpj_target_ptx_ops;
  default: return &xpj_target_cpu_ops;
  }
}

static uint8_t *copy_text(const char *s, size_t n, size_t *len) {
  uint8_t *p = malloc(n + 1);
  if (!p)
    return NULL;
  memcpy(p, s, n);
  p[n] = 0;
  *len = n;
  return p;
}

/* ---- kept machines ---------------------------------------------------- *
 *
 * Creating a target machine was 95-140 us of an in-process PTX compile
 * and 130-210 us of a compile server's worker (docs/benchmarks.md). The
 * machine of a target that keeps no state between modules
 * (ops->machine_reusable: PTX, the CPU) is kept after its compile and
 * taken by the next compile of the same target and optimisation level;
 * one compile at a time uses a machine (a second at once creates its
 * own). At most KEPT_MAX are kept, each for KEPT_USES compiles (NVPTX's
 * keeps a string pool that grows with every module); with as many kept,
 * the one given back longest ago makes room. The compile
 * server's warm-up leaves its machines here, so every worker forked from
 * it finds them. */
enum { KEPT_MAX = 8, KEPT_USES = 256 };

typedef struct kept_machine {
  char key[1200];
  LLVMTargetMachineRef tm;
  unsigned uses;
  xpj_target_kind kind; /* of its target */
  unsigned level;       /* its optimisation level */
  cg_ahead ahead;       /* emit_ahead's */
  unsigned long stamp;  /* when it was given back: the oldest goes first */
} kept_machine;

static kept_machine kept[KEPT_MAX];
static unsigned nkept;
static unsigned long kept_clock;
static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t kept_once = PTHREAD_ONCE_INIT;

/* A child forked while another thread held the lock would find it held
 * forever: it gets a fresh one (the machines kept are its copies; one
 * taken at the fork is not among them). */
static void kept_child(void) { pthread_mutex_init(&kept_mu, NULL); }
static void kept_atfork(void) { pthread_atfork(NULL, NULL, kept_child); }

/* What a machine is made of (the longest, a CPU target's features, fits
 * in a key: 1024 + 64 bytes and the numbers) */
static void machine_key(const xpj_job *j, char *key, size_t size) {
  const xpj_target *t = j->target;
  snprintf(key, size, "%d %u %u %u %s %s O%u", (int)t->kind, t->sm,
           t->ptx_version, t->spirv_minor, t->cpu, t->features,
           j->opts.opt_level);
}

/* A kept machine for key (its uses so far in *uses, what was built ahead
 * for it in *ah), or NULL. */
static LLVMTargetMachineRef machine_take(const char *key, unsigned *uses,
                                         cg_ahead *ah) {
  LLVMTargetMachineRef tm = NULL;
  pthread_once(&kept_once, kept_atfork);
  pthread_mutex_lock(&kept_mu);
  for (unsigned i = 0; i < nkept && !tm; i++)
    if (!strcmp(kept[i].key, key)) {
      tm = kept[i].tm;
      *uses = kept[i].uses;
      *ah = kept[i].ahead;
      kept[i] = kept[--nkept];
    }
  pthread_mutex_unlock(&kept_mu);
  return tm;
}

/* Frees what was built ahead for a machine (none of it used). */
static void ahead_free(cg_ahead *ah) {
  xpj_emitter_destroy(ah->emit);
  for (unsigned i = 0; i < CG_AHEAD_PASSES; i++)
    xpj_passes_destroy(ah->passes[i]);
  memset(ah, 0, sizeof *ah);
}

/* Keeps tm (and ah, what was built ahead for it, unused) for the next
 * compile of key (j's target and level), or disposes of them. */
static void machine_give(const char *key, const xpj_job *j,
                         LLVMTargetMachineRef tm, unsigned uses, cg_ahead *ah) {
  LLVMTargetMachineRef old_tm = NULL;
  cg_ahead old_ah = {0};
  pthread_mutex_lock(&kept_mu);
  if (uses < KEPT_USES) {
    kept_machine *k = &kept[0];
    if (nkept < KEPT_MAX) {
      k = &kept[nkept++];
    } else { /* full: the one given back longest ago goes */
      for (unsigned i = 1; i < KEPT_MAX; i++)
        if (kept[i].stamp < k->stamp)
          k = &kept[i];
      old_tm = k->tm;
      old_ah = k->ahead;
    }
    snprintf(k->key, sizeof k->key, "%s", key);
    k->tm = tm;
    k->uses = uses;
    k->kind = j->target->kind;
    k->level = j->opts.opt_level;
    k->ahead = *ah;
    k->stamp = ++kept_clock;
    tm = NULL;
  }
  pthread_mutex_unlock(&kept_mu);
  if (tm) {
    ahead_free(ah);
    LLVMDisposeTargetMachine(tm);
  }
  if (old_tm) {
    ahead_free(&old_ah);
    LLVMDisposeTargetMachine(old_tm);
  }
}

/* What a binary of a target kind is: PTX is text, the rest objects */
static LLVMCodeGenFileType bin_file_type(xpj_target_kind kind) {
  return kind == XPJ_TARGET_PTX ? LLVMAssemblyFile : LLVMObjectFile;
}

/* Builds, for each kept machine, its code generator (xpj_emitter: the
 * pass pipeline of code generation, 0.2-0.4 ms a compile) and its
 * optimisation pipelines (xpj_passes: those compile_here runs at the
 * machine's level), in llvm_emit.cpp, for the compiles of workers forked
 * from this process after it: a worker whose job fits runs them instead
 * of building its own. The process itself never uses them (each runs
 * once): the compile server. */
static void emit_ahead(void) {
  pthread_once(&kept_once, kept_atfork);
  pthread_mutex_lock(&kept_mu);
  for (unsigned i = 0; i < nkept; i++) {
    kept_machine *k = &kept[i];
    const cg_target_ops *ops = ops_for(k->kind);
    if (!k->ahead.emit)
      k->ahead.emit = xpj_emitter_create(k->tm, bin_file_type(k->kind));
    char dflt[32];
    snprintf(dflt, sizeof dflt, "default<O%u>", k->level);
    const char *texts[CG_AHEAD_PASSES] = {0};
    if (k->level == 2 && ops->o2_pipeline) {
      texts[0] = ops->o2_pipeline;
      texts[1] = ops->o2_leaf;
      texts[2] = ops->o2_loops;
    } else {
      texts[0] = dflt;
    }
    for (unsigned t = 0; t < CG_AHEAD_PASSES; t++)
      if (texts[t] && !k->ahead.passes[t])
        k->ahead.passes[t] = xpj_passes_create(k->tm, texts[t], ops->simt,
                                               NULL, 0);
  }
  pthread_mutex_unlock(&kept_mu);
}

/* The target machine for c's compile of j: a kept one (the module's
 * triple set from it), else a new one (ops->machine). */
static LLVMTargetMachineRef machine_for(cg *c, const xpj_job *j, char *key,
                                        size_t keysize, unsigned *uses) {
  *uses = 0;
  memset(&c->ahead, 0, sizeof c->ahead);
  key[0] = 0;
  if (!c->ops->machine_reusable)
    return c->ops->machine(c);
  machine_key(j, key, keysize);
  LLVMTargetMachineRef tm = machine_take(key, uses, &c->ahead);
  if (!tm)
    return c->ops->machine(c);
  char *triple = LLVMGetTargetMachineTriple(tm);
  LLVMSetTarget(c->mod, triple);
  LLVMDisposeMessage(triple);
  return tm;
}

/* ---- libdevice read ahead ------------------------------------------------
 *
 * A PTX compile that calls libdevice reads its bitcode (half a megabyte)
 * and the module's index of functions: 0.8-1.0 ms of a worker's compile
 * (docs/benchmarks.md). The compile server reads it once, into a context
 * of its own (read_ahead, after its PTX warm-up); each worker forked after
 * that, one compile each, takes context and module (take_ahead) when its
 * job names the same file, unchanged since: same device, inode, size,
 * modification and change times. The server itself never takes it. */
static struct {
  LLVMContextRef ctx;
  LLVMModuleRef lib;
  char path[4096];
  struct stat st;
} ahead;

/* The same file, not written since (a write that restores the
 * modification time still moves the change time) */
static bool same_file(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
         a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
         a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
         a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
         a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static void read_ahead(const char *path) {
  struct stat st;
  if (!path || !*path || strlen(path) >= sizeof ahead.path ||
      stat(path, &st) != 0)
    return;
  if (ahead.lib && !strcmp(ahead.path, path) && same_file(&ahead.st, &st))
    return;
  init();
  if (ahead.ctx)
    LLVMContextDispose(ahead.ctx); /* and the module in it */
  memset(&ahead, 0, sizeof ahead);
  LLVMContextRef ctx = LLVMContextCreate();
  char why[512];
  /* (st: what the descriptor read says, not the path before it) */
  LLVMModuleRef lib = xpj_read_libdevice(ctx, path, &st, why, sizeof why);
  if (!lib) {
    LLVMContextDispose(ctx);
    return;
  }
  ahead.ctx = ctx;
  ahead.lib = lib;
  ahead.st = st;
  memcpy(ahead.path, path, strlen(path) + 1);
}

/* For a worker's PTX compile of j: the context with libdevice read ahead
 * (*lib), or NULL. */
static LLVMContextRef take_ahead(const xpj_job *j, LLVMModuleRef *lib) {
  struct stat st;
  *lib = NULL;
  if (!j->worker || !ahead.lib || j->target->kind != XPJ_TARGET_PTX ||
      strcmp(ahead.path, j->libdevice) != 0 || stat(j->libdevice, &st) != 0 ||
      !same_file(&ahead.st, &st))
    return NULL;
  LLVMContextRef ctx = ahead.ctx;
  *lib = ahead.lib;
  ahead.ctx = NULL; /* one compile takes it */
  ahead.lib = NULL;
  return ctx;
}

/* Runs the pipeline (the new pass manager's text) on c's module: the one
 * built ahead for this machine when it fits (a worker of the compile
 * server), else one built now. Both are xpj_passes (llvm_emit.cpp), which
 * do what LLVMRunPasses does and know the compiler's own passes. */
void cg_run_pipeline(cg *c, const char *pipeline) {
  for (unsigned i = 0; c->worker && i < CG_AHEAD_PASSES; i++)
    if (xpj_passes_fits(c->ahead.passes[i], c->tm, pipeline) &&
        xpj_passes_run(c->ahead.passes[i], c->mod) == 0) {
      xpj_passes_ahead++;
      return;
    }
  /* GPUs get their parallelism from work-items, not from vectors (simt) */
  char why[256];
  xpj_passes *p = xpj_passes_create(c->tm, pipeline, c->ops->simt, why,
                                    sizeof why);
  if (!p && !why[0])
    cg_fail(c, XPJ_ERR_NOMEM, "optimisation failed: out of memory");
  else if (!p)
    cg_fail(c, XPJ_ERR_COMPILE, "optimisation failed: the pipeline %.200s: %s",
            pipeline, why);
  else if (xpj_passes_run(p, c->mod) != 0) /* (a new one runs) */
    cg_fail(c, XPJ_ERR_COMPILE, "internal: a pipeline ran twice");
  xpj_passes_destroy(p);
}

static unsigned defined_functions(LLVMModuleRef m) {
  unsigned n = 0;
  for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f))
    n += LLVMGetFirstBasicBlock(f) != NULL;
  return n;
}

/* c's module as a file of type ft into r (SPIR-V validated first, or
 * disassembled for XPJ_EMIT_ASM): by the machine's code generator
 * built ahead, in a worker whose job it fits, else by the C API's. */
static void emit_binary(cg *c, const xpj_job *j, LLVMCodeGenFileType ft,
                        xpj_result *r) {
  const xpj_target *t = j->target;
  LLVMMemoryBufferRef buf = NULL;
  const char *p;
  size_t n;
  if (!(c->worker && xpj_emitter_fits(c->ahead.emit, c->tm, ft) &&
        xpj_emitter_run(c->ahead.emit, c->mod, &p, &n) == 0)) {
    char *em = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(c->tm, c->mod, ft, &em, &buf)) {
      cg_fail(c, XPJ_ERR_COMPILE, "code generation failed: %s", em ? em : "");
      LLVMDisposeMessage(em);
      return;
    }
    p = LLVMGetBufferStart(buf);
    n = LLVMGetBufferSize(buf);
  }
  char verr[2048];
  if (t->kind == XPJ_TARGET_SPIRV &&
      xpj_spirv_plugin_api.validate((const uint8_t *)p, n, t->spirv_minor,
                                    verr, sizeof verr) != 0) {
    cg_fail(c, XPJ_ERR_COMPILE, "%s", verr);
  } else if (t->kind == XPJ_TARGET_SPIRV && j->emit == XPJ_EMIT_ASM) {
    char *txt = xpj_spirv_plugin_api.disassemble(
        (const uint8_t *)p, n, t->spirv_minor, verr, sizeof verr);
    if (!txt)
      cg_fail(c, XPJ_ERR_COMPILE, "%s", verr);
    else
      result_set(r, (uint8_t *)txt, strlen(txt));
  } else {
    size_t len;
    uint8_t *d = copy_text(p, n, &len);
    if (d)
      result_set(r, d, len);
    else
      cg_fail(c, XPJ_ERR_NOMEM, "out of memory");
  }
  if (buf)
    LLVMDisposeMemoryBuffer(buf);
}

/* LLVM's diagnostics of c's context. An error (the code generator's "SSE2
 * register return with SSE2 disabled", for a CPU named without SSE2) fails
 * the compile with LLVM's message: without a handler LLVM prints it and
 * calls exit(1), which ended the caller of an in-process compile and made
 * a worker's reply a bare exit status. Warnings and remarks are dropped
 * (LLVM printed them on stderr), as they are in a worker. */
static void on_diagnostic(LLVMDiagnosticInfoRef d, void *ud) {
  if (LLVMGetDiagInfoSeverity(d) != LLVMDSError)
    return;
  char *m = LLVMGetDiagInfoDescription(d);
  size_t n = m ? strlen(m) : 0;
  while (n && (m[n - 1] == '\n' || m[n - 1] == ' '))
    n--;
  cg_fail(ud, XPJ_ERR_COMPILE, "LLVM: %.*s", (int)n, m ? m : "");
  LLVMDisposeMessage(m);
}

/* c's module optimised at c's level: the target's own -O2 pipeline, or
 * LLVM's default<ON> */
static void optimise(cg *c) {
  unsigned level = c->opts->opt_level;
  if (c->status == XPJ_OK && level == 2 && c->ops->o2_pipeline) {
    cg_run_pipeline(c, c->ops->o2_leaf && defined_functions(c->mod) == 1
                           ? c->ops->o2_leaf
                           : c->ops->o2_pipeline);
    if (c->status == XPJ_OK && c->ops->before_loops)
      c->ops->before_loops(c);
    if (c->status == XPJ_OK && c->ops->o2_loops)
      cg_run_pipeline(c, c->ops->o2_loops);
  } else if (c->status == XPJ_OK) {
    char pipeline[32];
    snprintf(pipeline, sizeof pipeline, "default<O%u>", level);
    cg_run_pipeline(c, pipeline);
  }
}

/* j->fault: the test hook's mode in a worker, "" in the caller's process */
static void compile_here(const xpj_job *j, xpj_result *r) {
  const char *fault = j->fault;
  const xpj_target *t = j->target;
  const xpj_compile_opts *o = &j->opts;
  xpj_emit_kind emit = j->emit;
  init();
  cg c;
  memset(&c, 0, sizeof c);
  c.ops = ops_for(t->kind);
  c.target = t;
  c.opts = o;
  c.m = j->m;
  c.kernel = j->kernel;
  c.entry = j->entry;
  c.unroll_all = c.ops->simt && strcmp(fault, "unroll-loads") == 0;
  /* test hooks: before_codegen makes no pairs of wide integers (SPIR-V),
   * so that the second optimisation runs (wide-pairs-off), or so that
   * the refusal does (wide-left) */
  c.no_wide_pairs = strcmp(fault, "wide-pairs-off") == 0 ||
                    strcmp(fault, "wide-left") == 0;
  c.libdevice = j->libdevice;
  c.ctx = take_ahead(j, &c.lib_ahead);
  if (!c.ctx)
    c.ctx = LLVMContextCreate();
  LLVMContextSetDiagnosticHandler(c.ctx, on_diagnostic, &c);
  c.mod = LLVMModuleCreateWithNameInContext(j->kernel->name, c.ctx);
  c.b = LLVMCreateBuilderInContext(c.ctx);
  c.t_void = LLVMVoidTypeInContext(c.ctx);
  c.t_i1 = LLVMInt1TypeInContext(c.ctx);
  c.t_i8 = LLVMInt8TypeInContext(c.ctx);
  c.t_i16 = LLVMInt16TypeInContext(c.ctx);
  c.t_i32 = LLVMInt32TypeInContext(c.ctx);
  c.t_i64 = LLVMInt64TypeInContext(c.ctx);
  c.t_f32 = LLVMFloatTypeInContext(c.ctx);
  c.t_f64 = LLVMDoubleTypeInContext(c.ctx);
  c.t_ptr = LLVMPointerTypeInContext(c.ctx, 0);
  char tm_key[1200];
  unsigned tm_uses;
  c.worker = j->worker;
  LLVMTargetMachineRef tm = machine_for(&c, j, tm_key, sizeof tm_key, &tm_uses);
  LLVMTargetDataRef td = NULL;
  char *msg = NULL;
  c.tm = tm;
  if (tm) {
    td = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(c.mod, td);
    if (c.ops->init_module)
      c.ops->init_module(&c);
    cg_lower_kernel(&c);
  } else if (c.status == XPJ_OK) {
    cg_fail(&c, XPJ_ERR_COMPILE, "cannot create the target machine");
  }
  if (c.status == XPJ_OK && LLVMVerifyModule(c.mod, LLVMReturnStatusAction, &msg))
    cg_fail(&c, XPJ_ERR_COMPILE, "internal: invalid LLVM IR: %s", msg);
  LLVMDisposeMessage(msg);
  msg = NULL;
  if (c.status == XPJ_OK && strcmp(fault, "crash") == 0)
    raise(SIGSEGV);
  if (c.status == XPJ_OK && strcmp(fault, "hang") == 0)
    for (;;)
      pause();
  if (c.status == XPJ_OK && c.ops->before_optimise)
    c.ops->before_optimise(&c);
  /* the module as it was, for a second optimisation (exit_values_again):
   * only in a worker, which alone may set LLVM's options (its process
   * compiles this job and ends) */
  LLVMModuleRef again = NULL;
  if (c.status == XPJ_OK && c.ops->exit_values_again && o->opt_level > 0 &&
      c.worker && strcmp(fault, "wide-left") != 0) {
    again = LLVMCloneModule(c.mod);
    c.exit_values_again = again != NULL;
  }
  optimise(&c);
  if (c.status == XPJ_OK && c.ops->before_codegen)
    c.ops->before_codegen(&c);
  if (c.status == XPJ_OK && c.wide_left) {
    /* the closed form of a loop's exit value (a sum: i65-i67 products,
     * scalar evolution's) in a shape before_codegen could not make of
     * 64-bit operations: the loop kept instead, as IndVarSimplify leaves
     * it with -replexitval=never (an option of LLVM's process, read as
     * the pass runs; the pipelines built ahead read it then too) */
    const char *argv[] = {"xpjit-worker", "-replexitval=never"};
    LLVMParseCommandLineOptions(2, argv, NULL);
    LLVMDisposeModule(c.mod);
    c.mod = again;
    again = NULL;
    c.exit_values_again = false;
    c.wide_left = 0;
    optimise(&c);
    if (c.status == XPJ_OK)
      c.ops->before_codegen(&c);
  }
  if (c.status == XPJ_OK) {
    if (emit == XPJ_EMIT_LLVM) {
      char *s = LLVMPrintModuleToString(c.mod);
      size_t len;
      uint8_t *d = copy_text(s, strlen(s), &len);
      LLVMDisposeMessage(s);
      if (d)
        result_set(r, d, len);
      else
        cg_fail(&c, XPJ_ERR_NOMEM, "out of memory");
    } else {
      LLVMCodeGenFileType ft =
          emit == XPJ_EMIT_BIN ? bin_file_type(t->kind)
          : t->kind == XPJ_TARGET_SPIRV ? LLVMObjectFile
                                        : LLVMAssemblyFile;
      emit_binary(&c, j, ft, r);
    }
  }
  if (c.status != XPJ_OK) {
    result_fail(r, c.status, failure_of(c.status), c.err);
  } else {
    r->local_bytes = c.local_bytes;
    r->scratch_bytes = c.scratch_bytes;
  }
  free(c.cpu_loops);
  free(c.regions);
  /* a worker ends with its reply: tearing LLVM's objects down (0.1 ms and
   * more) would delay it */
  if (j->worker)
    return;
  if (again)
    LLVMDisposeModule(again);
  LLVMDisposeBuilder(c.b);
  LLVMDisposeModule(c.mod);
  if (td)
    LLVMDisposeTargetData(td);
  if (tm && tm_key[0])
    machine_give(tm_key, j, tm, tm_uses + 1, &c.ahead);
  else if (tm)
    LLVMDisposeTargetMachine(tm);
  LLVMContextDispose(c.ctx);
}

/* ---- LLVM's error handlers ------------------------------------------ */

/* The C API has no hook for allocation failures: LLVM calls
 * report_bad_alloc_error, which without a handler writes "LLVM ERROR: out
 * of memory" and aborts, and a failed operator new throws into code built
 * without exceptions and ends in std::terminate; either looks like a
 * crash. These two C++ functions of llvm/Support/ErrorHandling.h route
 * both to one handler; they are called by their exported (mangled) names,
 * which libLLVM-22.so versions (LLVM_22.1), so an LLVM that renames them
 * fails to link rather than silently. */
void _ZN4llvm31install_bad_alloc_error_handlerEPFvPvPKcbES0_(
    void (*handler)(void *data, const char *reason, bool crash_diag),
    void *data);
void _ZN4llvm33install_out_of_memory_new_handlerEv(void);

static void catch_errors(void (*fatal)(const char *reason),
                         void (*bad_alloc)(void *data, const char *reason,
                                           bool crash_diag)) {
  if (fatal)
    LLVMInstallFatalErrorHandler(fatal);
  _ZN4llvm31install_bad_alloc_error_handlerEPFvPvPKcbES0_(bad_alloc, NULL);
  _ZN4llvm33install_out_of_memory_new_handlerEv();
}

static void options(int argc, const char *const *argv) {
  LLVMParseCommandLineOptions(argc, argv, NULL);
}

static int host_cpu(char *name, size_t namesize, char *features,
                    size_t featsize) {
  char *n = LLVMGetHostCPUName(), *f = LLVMGetHostCPUFeatures();
  int rc = strlen(n) < namesize && strlen(f) < featsize ? 0 : -1;
  if (rc == 0) {
    memcpy(name, n, strlen(n) + 1);
    memcpy(features, f, strlen(f) + 1);
  }
  LLVMDisposeMessage(n);
  LLVMDisposeMessage(f);
  return rc;
}

__attribute__((visibility("default"))) const xpj_llvm_api
    xpj_llvm_plugin_api = {sizeof(xpj_llvm_api), XPJ_BUILD_ID, init, version,
                           compile_here, catch_errors, options,
                           host_cpu, xpj_orc_load, xpj_orc_unload,
                           read_ahead, emit_ahead};
