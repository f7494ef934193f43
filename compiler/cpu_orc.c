/*
 * cpu_orc.c - CPU kernels' objects loaded by LLVM's ORC (LLJIT), for hosts
 * whose objects runtime/elfload.c does not link (it knows x86-64), and as
 * the reference it is tested against (XPJIT_CPU_LOADER=orc). Part of
 * libxpjit-llvm (llvm.h): runtime/cpu.c reaches it through the table.
 *
 * One LLJIT for the process, made at the first load; each kernel is linked
 * into its own JITDylib, so two kernels may have the same entry name. What
 * an object may bind to outside itself is the caller's policy (cpu.c), the
 * same for both loaders.
 */
#include "llvm.h"

#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static LLVMOrcLLJITRef jit; /* NULL until made (made again if that failed) */
static unsigned long njd;
/* what ORC reported while linking (symbols not found), under mu; it would
 * print it to stderr otherwise */
static char report[512];

typedef struct orc_kernel {
  LLVMOrcJITDylibRef jd;
} orc_kernel;

static void fail(LLVMErrorRef e, const char *what, char *err, size_t errsize) {
  char *msg = LLVMGetErrorMessage(e);
  snprintf(err, errsize, "%s: %s", what, msg);
  LLVMDisposeErrorMessage(msg);
}

static void on_report(void *ctx, LLVMErrorRef e) {
  (void)ctx;
  char *msg = LLVMGetErrorMessage(e);
  size_t n = strlen(report);
  snprintf(report + n, sizeof report - n, "%s%s", n ? "; " : "", msg);
  LLVMDisposeErrorMessage(msg);
}

typedef struct lookup_wait {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  LLVMErrorRef err;
  LLVMOrcExecutorAddress addr;
} lookup_wait;

static void lookup_done(LLVMErrorRef err, LLVMOrcCSymbolMapPairs result,
                        size_t n, void *ctx) {
  lookup_wait *w = ctx;
  pthread_mutex_lock(&w->mu);
  w->err = err;
  if (!err && n >= 1)
    w->addr = result[0].Sym.Address;
  w->done = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static int filter(void *ctx, LLVMOrcSymbolStringPoolEntryRef sym) {
  bool (*linkable)(const char *) = (bool (*)(const char *))(uintptr_t)ctx;
  return linkable(LLVMOrcSymbolStringPoolEntryStr(sym)) ? 1 : 0;
}

int xpj_orc_load(const uint8_t *bin, size_t len, const char *entry,
                 bool (*linkable)(const char *name), void **handle,
                 void **fn, char *err, size_t errsize) {
  orc_kernel *k = calloc(1, sizeof *k);
  if (!k) {
    snprintf(err, errsize, "out of memory");
    return -1;
  }
  pthread_mutex_lock(&mu);
  int rc = 0;
  report[0] = 0;
  if (!jit) {
    LLVMErrorRef e = LLVMOrcCreateLLJIT(&jit, NULL);
    if (e) {
      jit = NULL;
      fail(e, "creating the JIT", err, errsize);
      rc = -1;
    } else {
      LLVMOrcExecutionSessionSetErrorReporter(
          LLVMOrcLLJITGetExecutionSession(jit), on_report, NULL);
    }
  }
  LLVMOrcExecutionSessionRef es =
      rc == 0 ? LLVMOrcLLJITGetExecutionSession(jit) : NULL;
  if (rc == 0) {
    char name[48];
    snprintf(name, sizeof name, "kernel.%lu", ++njd);
    LLVMErrorRef e = LLVMOrcExecutionSessionCreateJITDylib(es, &k->jd, name);
    if (e) {
      fail(e, "creating a JITDylib", err, errsize);
      rc = -1;
    }
  }
  if (rc == 0) {
    LLVMOrcDefinitionGeneratorRef gen = NULL;
    LLVMErrorRef e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
        &gen, LLVMOrcLLJITGetGlobalPrefix(jit), filter,
        (void *)(uintptr_t)linkable);
    if (e) {
      fail(e, "process symbols", err, errsize);
      rc = -1;
    } else {
      LLVMOrcJITDylibAddGenerator(k->jd, gen);
    }
  }
  if (rc == 0) {
    LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(
        (const char *)bin, len, entry);
    LLVMErrorRef e = LLVMOrcLLJITAddObjectFile(jit, k->jd, buf);
    if (e) {
      fail(e, "adding the object", err, errsize);
      rc = -1;
    }
  }
  if (rc == 0) {
    lookup_wait w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                     false, NULL, 0};
    LLVMOrcCJITDylibSearchOrderElement order = {
        k->jd, LLVMOrcJITDylibLookupFlagsMatchAllSymbols};
    LLVMOrcCLookupSetElement sym = {LLVMOrcLLJITMangleAndIntern(jit, entry),
                                    LLVMOrcSymbolLookupFlagsRequiredSymbol};
    LLVMOrcExecutionSessionLookup(es, LLVMOrcLookupKindStatic, &order, 1,
                                  &sym, 1, lookup_done, &w);
    pthread_mutex_lock(&w.mu);
    while (!w.done)
      pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    if (w.err) {
      char what[600];
      snprintf(what, sizeof what, "linking%s%s%s", report[0] ? " (" : "",
               report, report[0] ? ")" : "");
      fail(w.err, what, err, errsize);
      rc = -1;
    } else if (!w.addr) {
      snprintf(err, errsize, "linking: %s has no address", entry);
      rc = -1;
    }
    *fn = (void *)(uintptr_t)w.addr;
  }
  if (rc != 0 && k->jd) {
    LLVMErrorRef e = LLVMOrcJITDylibClear(k->jd);
    if (e)
      LLVMConsumeError(e);
  }
  pthread_mutex_unlock(&mu);
  if (rc != 0) {
    free(k);
    return -1;
  }
  *handle = k;
  return 0;
}

/* Frees the kernel's code; its (empty) JITDylib stays in the session for
 * the process's life, as ORC's C API cannot remove one. */
void xpj_orc_unload(void *handle) {
  orc_kernel *k = handle;
  if (!k)
    return;
  pthread_mutex_lock(&mu);
  LLVMErrorRef e = LLVMOrcJITDylibClear(k->jd);
  if (e)
    LLVMConsumeError(e);
  pthread_mutex_unlock(&mu);
  free(k);
}
