/* llvm.h - the part of libxpjit that needs LLVM, behind one table.
 *
 * libxpjit itself does not link libLLVM: mapping and relocating it costs
 * every process about 13 ms of its start (docs/api.md, "Where LLVM is
 * loaded"), and a process whose kernels come from a cache, a bundle or the
 * daemon never needs it. What needs LLVM (code generation, the compile
 * itself, LLVM's error handlers, the ORC loader of CPU objects on hosts the
 * ELF loader does not know) is in libxpjit-llvm: linked into the programs
 * that always compile (xpjit-cc, xpjitd, the tests), a shared object that
 * the library loads on its first in-process compile everywhere else.
 *
 * The table passes the library's own structures (xpj_job, xpj_result, the
 * IR), so both sides must be the same build: xpj_llvm_api.build is the
 * digest of the headers both were compiled with (XPJ_BUILD_ID). Internal. */
#ifndef XPJ_LLVM_H
#define XPJ_LLVM_H

#include "worker.h"
#include "xpjit_cache.h" /* xpj_cache_config: xpj_host_cpu */

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef XPJ_BUILD_ID
#define XPJ_BUILD_ID "unknown"
#endif

/* The plugin's file name: beside libxpjit.so, or in the lib directory
 * beside a program's bin/, libexec/ or tests/ directory. */
#define XPJ_LLVM_PLUGIN "libxpjit-llvm.so.0"
/* The one symbol the plugin exports. */
#define XPJ_LLVM_PLUGIN_SYMBOL "xpj_llvm_plugin_api"

/* The first fields of every plugin's table. */
typedef struct xpj_plugin_head {
  size_t size;       /* sizeof (the table) where it was built */
  const char *build; /* XPJ_BUILD_ID where it was built */
} xpj_plugin_head;

/* A plugin of libxpjit (the LLVM plugin, the SPIR-V validator): looked
 * for where env names it, else beside libxpjit.so, in the lib directory
 * beside the program, or the prefix's; run only from a trusted file
 * (xpj_trusted_open: the descriptor checked is the one loaded) whose
 * table symbol is of size bytes and this very build. Loaded once, on
 * first use, never unloaded; a failure, and why, is remembered. */
typedef struct xpj_plugin {
  const char *env, *file, *symbol, *what; /* what: "no LLVM", ... */
  size_t size;
  pthread_mutex_t mu;
  _Atomic(const void *) api; /* set once, never cleared: read unlocked */
  char failed[400];
} xpj_plugin;
#define XPJ_PLUGIN(env, file, symbol, what, size)                              \
  {env, file, symbol, what, size, PTHREAD_MUTEX_INITIALIZER, NULL, ""}

/* The table: linked (the program's own, when it links the plugin's static
 * library; NULL when not), else the plugin's; NULL with why. */
const void *xpj_plugin_get(xpj_plugin *p, const void *linked, char *why,
                           size_t whysize);
/* Whether the table is in this process already. */
bool xpj_plugin_present(xpj_plugin *p, const void *linked);
/* p's file, found (its path into path) and opened and checked as
 * xpj_plugin_get loads it (xpj_trusted_open), not loaded: its descriptor
 * (O_CLOEXEC), or -1 with why. */
int xpj_plugin_open(const xpj_plugin *p, char path[PATH_MAX], char *why,
                    size_t whysize);
/* Loads the plugin open at fd (xpj_plugin_open's; path names it in
 * messages) from that descriptor (/proc/self/fd/N), never by its name,
 * so that the file loaded is the file checked whatever has been put at
 * path since: its table, or NULL with why. fd is taken: kept open for
 * the life of the process once loaded (the loader knows the object by
 * that name, which must not come to name another file), closed when
 * not. Not p's remembered table: xpj_plugin_get is (it calls both). */
const void *xpj_plugin_load(const xpj_plugin *p, int fd, const char *path,
                            char *why, size_t whysize);

typedef struct xpj_llvm_api {
  size_t size;       /* sizeof (xpj_llvm_api) where it was built */
  const char *build; /* XPJ_BUILD_ID where it was built */
  /* Registers LLVM's targets and options; once per process, any thread. */
  void (*init)(void);
  /* The LLVM in use, "22.1.8". */
  const char *(*version)(void);
  /* Runs the compile j here (after init); r is filled in. */
  void (*compile)(const xpj_job *j, xpj_result *r);
  /* A worker's or a compile-only process's handlers: LLVM's fatal errors
   * go to fatal (which must not return) and its allocation failures, both
   * report_bad_alloc_error's and a failed operator new's, to bad_alloc. */
  void (*catch_errors)(void (*fatal)(const char *reason),
                       void (*bad_alloc)(void *data, const char *reason,
                                         bool crash_diag));
  /* LLVM's command-line options, process-wide (a worker's SPIR-V ones). */
  void (*options)(int argc, const char *const *argv);
  /* LLVM's name and features of the host CPU (what "cpu" compiles for);
   * 0, or -1 when a buffer is too small. */
  int (*host_cpu)(char *name, size_t namesize, char *features,
                  size_t featsize);
  /* A CPU kernel's object linked by ORC (cpu_orc.c), binding outside
   * itself only to what linkable allows: *fn is its entry point, *handle
   * is for orc_unload. 0, or -1 with err. */
  int (*orc_load)(const uint8_t *bin, size_t len, const char *entry,
                  bool (*linkable)(const char *name), void **handle,
                  void **fn, char *err, size_t errsize);
  void (*orc_unload)(void *handle); /* NULL: a no-op */
  /* Reads libdevice at path (lazily, as a compile does) for the compiles
   * of workers forked from this process after it (the compile server's):
   * each that finds the same file there takes it instead of reading the
   * file. Failures are silent: the worker reads the file. */
  void (*read_ahead)(const char *libdevice);
  /* Builds the code generators and optimisation pipelines of the target
   * machines kept here (the ones the compiles so far made) for the
   * compiles of workers forked from this process after it, one compile
   * each; this process never uses them. */
  void (*emit_ahead)(void);
} xpj_llvm_api;

/* The table: the one linked into this program, else the plugin, loaded on
 * the first call (thread-safe). NULL when neither is there, with why. */
const xpj_llvm_api *xpj_llvm(char *why, size_t whysize);
/* The LLVM plugin's file, found and checked as xpj_llvm would load it
 * (its path into path), opened (O_CLOEXEC) but not loaded: xpjitd, which
 * does not load LLVM itself, hands it to its workers as /proc/self/fd/N,
 * so that a worker started after an upgrade replaced the file loads the
 * daemon's own build. -1 with why when there is none. */
int xpj_llvm_plugin_open(char path[PATH_MAX], char *why, size_t whysize);
/* Whether LLVM is in this process already (linked in, or the plugin
 * loaded); loads nothing. */
bool xpj_llvm_present(void);

/* libxpjit's own files (the compile server, this plugin): where env names
 * one (when set), else name in each of lib_rels relative to the
 * directory of the library (the program, when linked statically), else in
 * each of exe_rels relative to the program's directory, else in prefix
 * (NULL: none). True, with path, for the first that exists; false with
 * path the last place looked at. */
bool xpj_own_file(const char *env, const char *const *lib_rels,
                  const char *const *exe_rels, const char *prefix,
                  const char *name, char *path, size_t size);
/* A file whose code we may run (the compile server's executable, a
 * plugin), opened once (O_RDONLY, O_CLOEXEC; symbolic links followed, as
 * to a versioned shared object) and checked by that descriptor (fstat):
 * a regular file of root or of this process's effective user that nobody
 * else may write, and executable by its owner when exec. The descriptor
 * is what must then be run or loaded (through /proc/self/fd/N), never
 * path again: a name checked and then run by its name can be pointed
 * elsewhere in between. -1 (errno from open) when it cannot be opened,
 * -2 when it is not such a file. */
int xpj_trusted_open(const char *path, bool exec);

/* The host CPU as LLVM names it and lists its features (what the target
 * "cpu" compiles for), without loading LLVM where that can be avoided:
 * on x86-64, LLVM's answer is kept in the directory of cache (NULL: the
 * default cache as the environment sets it) under a digest of what CPUID
 * says (hostcpu.c), so only the first process on a machine (or after a
 * CPU or LLVM change) asks LLVM; the file is written only when cache's
 * mode (xpj_cache_config_mode) is read-write. Learnt once per process:
 * the first caller's cache is the one looked in. 0, or -1 with why. */
int xpj_host_cpu(const xpj_cache_config *cache, char *name,
                 size_t namesize, char *features, size_t featsize, char *why,
                 size_t whysize);

/* Around fork(): xpj_host_cpu's lock taken before (phase 0) and given
 * back after, in the parent (1) and the child (2) (runtime/rt.h's
 * RT_FORK_*: a child started with it held never learnt its CPU). */
void xpj_host_cpu_atfork(int phase);

/* xpj_target_parse for a context whose cache is cache: "cpu" (the host)
 * is learnt by xpj_host_cpu(cache, ...). xpj_target_parse passes NULL. */
xpj_status xpj_target_parse_for(const char *s, const xpj_cache_config *cache,
                                xpj_target *t, char *err, size_t errsize);

/* x86-64: the digest of what CPUID says (and the versions) that names the
 * host-CPU file; the leaves glibc keeps taken from it (glibc) or asked
 * again (the same digest: test_lazy_llvm). */
void xpj_host_cpu_fingerprint(char hex[33], bool glibc);

/* The host-CPU file's text, n bytes: "NAME\nFEATURES\n" with a name of
 * LLVM's alphabet (letters, digits, - _ .) under 64 bytes and a feature
 * list (the same and + ,) under 4096; 0, or -1 for anything else. */
int xpj_host_cpu_parse(const char *text, size_t n, char name[64],
                       char features[4096]);

/* cpu_orc.c: the table's orc_load and orc_unload. */
int xpj_orc_load(const uint8_t *bin, size_t len, const char *entry,
                 bool (*linkable)(const char *name), void **handle,
                 void **fn, char *err, size_t errsize);
void xpj_orc_unload(void *handle);

/* Defined by libxpjit-llvm: the table, under its exported name in the
 * shared object. A program that links libxpjit-llvm.a refers to it
 * (-Wl,-u,xpj_llvm_plugin_api), and the library then uses it directly. */
extern const xpj_llvm_api xpj_llvm_plugin_api;

#endif
