/* worker.h - isolated compiles (docs/abi.md, Isolation). compile.c runs a
 * compile (xpj_job) and, in a worker process, answers it; cserver.c keeps
 * the compile server that forks those workers and carries jobs and replies
 * between the caller and a worker. Both directions are frames of the
 * daemon's protocol (runtime/proto.h): XPD_CJOB and XPD_CRESULT. Internal. */
#ifndef XPJ_WORKER_H
#define XPJ_WORKER_H

#include "xpjit_codegen.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* Entry points are named XPJ_ENTRY_PREFIX + the kernel's name (docs/abi.md),
 * at most XPJ_ENTRY_MAX bytes. */
#define XPJ_ENTRY_PREFIX "__xpj_k_"
#define XPJ_ENTRY_MAX 255

/* One compile, as xpj_compile resolved it: what a worker is given. */
typedef struct xpj_job {
  const xpj_module *m;
  const xpj_func *kernel;
  const xpj_target *target;
  xpj_compile_opts opts;
  xpj_emit_kind emit;
  char entry[XPJ_ENTRY_MAX + 1];
  uint64_t memory_limit; /* bytes beyond what the worker starts with; 0: none */
  char fault[16];        /* XPJIT_FAULT_INJECT of the caller (a test hook) */
  /* PTX: libdevice as the caller finds it (xpj_libdevice_path: its
   * XPJIT_LIBDEVICE and CUDA_HOME); "": none */
  char libdevice[4096];
  /* set by xpj_worker_run: this process ends after the compile (LLVM's
   * objects are left to the exit, and libdevice read ahead is used) */
  bool worker;
} xpj_job;

/* What a compile produced: xpjit_codegen.h's xpj_result. */
struct xpj_result {
  xpj_status status;
  uint8_t *data;
  size_t len;
  char *log;
  char *entry;
  uint64_t local_bytes, scratch_bytes;
  double millis;
  xpj_failure_kind failure;
};

/* r failed with st for reason kind; msg is copied. */
static inline void result_fail(xpj_result *r, xpj_status st,
                               xpj_failure_kind kind, const char *msg) {
  r->status = st;
  r->failure = kind;
  free(r->log);
  r->log = strdup(msg ? msg : "");
  free(r->data);
  r->data = NULL;
  r->len = 0;
}

/* Takes ownership of data (len bytes; text gets a NUL after it). */
static inline void result_set(xpj_result *r, uint8_t *data, size_t len) {
  free(r->data);
  r->data = data;
  r->len = len;
  r->status = XPJ_OK;
  r->failure = XPJ_FAILURE_NONE;
}

/* The kind of a failure with status st that a compile reported itself. */
static inline xpj_failure_kind failure_of(xpj_status st) {
  return st == XPJ_OK          ? XPJ_FAILURE_NONE
         : st == XPJ_ERR_NOMEM ? XPJ_FAILURE_MEMORY
                               : XPJ_FAILURE_INPUT;
}

/* ---- compile.c ---- */

/* Around a fork() of this process that goes on to compile (a compile
 * server forked from the caller): no thread is inside LLVM meanwhile. */
int xpj_llvm_fork_begin(char *why, size_t whysize); /* -1: no LLVM */
void xpj_llvm_fork_end(bool child);
/* k, or a function k calls (directly or not), that is generic or called
 * with type arguments: code generation lowers only what specialisation has
 * made concrete (a generic callee's T would have no scalar type). NULL
 * when there is none (or memory is short). */
const xpj_func *xpj_generic_reachable(const xpj_module *m, const xpj_func *k);
/* A worker's exit status after its reply (the caller reads the reply;
 * the compile server reads this): a binary was made, or not (a failed
 * compile, IR or assembly asked for). */
enum { XPJ_WORKER_COMPILED = 0, XPJ_WORKER_ANSWERED = 1 };
/* A compile server's worker that could not arrange its descriptors (a
 * descriptor limit): the caller reports a system failure, not a crash. */
enum { XPJ_WORKER_NO_FDS = 71 };
/* A process that compiles one job after another, or one and ends (a
 * compile server's spare, an xpjitd worker): glibc keeps what a compile
 * frees (M_TRIM_THRESHOLD) and takes large blocks from the heap
 * (M_MMAP_THRESHOLD), rather than give the top of the heap back and map
 * large blocks apart, each page then faulted in again (80-160 faults in
 * every in-process compile of a loop kernel; docs/benchmarks.md, issue
 * 19, nineteenth session). Never in a caller's process: a library does not
 * set its malloc. */
void xpj_worker_keep_heap(void);
/* A worker: bounds its memory, compiles j, writes the XPD_CRESULT frame
 * to fd, and ends the process (XPJ_WORKER_*). */
_Noreturn void xpj_worker_run(int fd, const xpj_job *j);
/* A worker that cannot compile its job: replies st and msg, and ends
 * (XPJ_WORKER_ANSWERED). */
_Noreturn void xpj_worker_fail(int fd, xpj_status st, const char *msg);
/* Decodes a complete XPD_CRESULT frame into r; -1 when it is malformed or
 * truncated (r is then unchanged). */
int xpj_worker_decode(const uint8_t *buf, size_t n, xpj_result *r);
xpj_result *xpj_result_new_internal(void);

/* ---- cserver.c ---- */

/* What the compile server says of a worker once it has ended: a footer
 * after the worker's stderr on the error stream. */
#define XPJ_CS_FOOTER 12
enum {
  XPJ_CS_TIMED_OUT = 1, /* the server killed it at the job's deadline */
  XPJ_CS_REFUSED = 2,   /* another build of the server: job not run */
  XPJ_CS_NO_WORKER = 4, /* the server could not start a worker */
};
typedef struct xpj_cs_end {
  int wait_status; /* waitpid's */
  unsigned flags;  /* XPJ_CS_* */
} xpj_cs_end;
/* Reads the footer at the end of n bytes of error stream; 0 when there is
 * one (*n is then cut before it). */
int xpj_cs_footer(const char *buf, size_t *n, xpj_cs_end *e);

/* Hands j to a fresh worker of this process's compile server (started, or
 * restarted, as needed), writing the job by deadline (xpd_now_ms).
 * *sock: the job's socket, which carries the reply frame; *err: the
 * worker's stderr, then the footer. 0, or -1 with why. */
int xpj_cs_submit(const xpj_job *j, uint64_t deadline, int *sock, int *err,
                  unsigned *gen, char *why, size_t whysize);
/* The compile server's executable into path: XPJIT_COMPILE_SERVER, else
 * libexec/xpjit/xpjit-cc beside the library or program or in the prefix;
 * false when there is none to run (or XPJIT_COMPILE_SERVER=fork). */
bool xpj_cs_find_exe(char *path, size_t size);
/* The same executable opened and checked (xpj_trusted_open, executable):
 * its descriptor (O_CLOEXEC), the file xpj_cs_spawn runs; -1 when there
 * is none to run. */
int xpj_cs_open_exe(char *path, size_t size);
/* Starts the executable open at exe (xpj_cs_open_exe's) as a compile
 * server ("xpjit-cc --serve"), ctl (not 0-3) its descriptor 3, stdin and
 * stdout /dev/null, nothing else of this process's open there, its
 * signals default and unblocked. What is exec'd is exe's file, through
 * /proc/self/fd, never a name: what was checked is what runs. The pid,
 * or -1; exe and ctl stay open here. */
pid_t xpj_cs_spawn(int exe, int ctl);
/* Server gen (xpj_cs_submit's) did not answer by the job's deadline and a
 * grace period (XPJ_CS_HUNG), or refused the job (XPJ_CS_REFUSED: another
 * build): ends it, and with it its workers; the next job starts another,
 * a fork of this process when gen refused or never said hello (an
 * executable that is no server). A no-op when gen was replaced already. */
enum xpj_cs_why { XPJ_CS_HUNG, XPJ_CS_BAD_EXE };
void xpj_cs_abandon(unsigned gen, enum xpj_cs_why why);
/* A worker's side of the job socket: decodes the XPD_CJOB frame's payload
 * into j (whose module *m and target *t it fills; the module is the
 * caller's to destroy). 0, or -1 with why. */
int xpj_cs_job_decode(const uint8_t *buf, size_t n, xpj_job *j,
                      xpj_module **m, xpj_target *t, char *why,
                      size_t whysize);
/* The compile server's main loop on its control socket ctl
 * (the xpjit-cc executable, or a fork of the caller). Never returns. */
_Noreturn void xpj_cs_main(int ctl);

#endif
