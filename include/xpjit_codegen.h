/*
 * xpjit_codegen.h - code generation: a specialised kernel (xpj_specialize)
 * lowered through LLVM to SPIR-V, PTX or a native object for the host CPU.
 *
 * A compile runs, by default, in a forked worker process, so that a fatal
 * error inside LLVM (or a crash) becomes an XPJ_ERR_COMPILE status with the
 * worker's message instead of ending the caller. SPIR-V is validated with
 * SPIRV-Tools before it is returned; a module that fails validation is an
 * error, never an output. The kernel ABI of the generated code (argument
 * order, views, hidden arguments, the CPU entry point) is in docs/abi.md.
 *
 * Ownership: xpj_compile returns a result object the caller destroys with
 * xpj_result_destroy (NULL is a no-op); data and strings returned by the
 * xpj_result_* accessors are owned by it.
 * Thread safety: xpj_compile may be called from several threads at once
 * (each compile is its own process, or, when isolation is off, serialised
 * for the targets that need it).
 */
#ifndef XPJIT_CODEGEN_H
#define XPJIT_CODEGEN_H

#include "xpjit_ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum xpj_target_kind {
  XPJ_TARGET_SPIRV = 0, /* SPIR-V for OpenCL 2.x/3.0 and Level Zero */
  XPJ_TARGET_PTX = 1,   /* PTX for CUDA */
  XPJ_TARGET_CPU = 2,   /* native object for an x86-64 CPU */
} xpj_target_kind;

/* A target. Fill it with xpj_target_parse; the string form from
 * xpj_target_str is canonical and is what identifies the target in cache
 * keys (it names the exact architecture and features). */
typedef struct xpj_target {
  xpj_target_kind kind;
  unsigned sm;           /* PTX: compute capability, e.g. 90 for sm_90 */
  unsigned ptx_version;  /* PTX: ISA version * 10 (80 = 8.0); 0: derived */
  unsigned spirv_minor;  /* SPIR-V: 1.<minor> (0..4; default 2) */
  char cpu[64];          /* CPU: LLVM CPU name ("x86-64", "znver3", ...) */
  char features[1024];   /* CPU: LLVM feature string ("+avx2,...") */
} xpj_target;

/* Parses "spirv", "spirv:1.2", "ptx:sm_90", "ptx:sm_80:ptx78", "cpu"
 * (this machine's CPU and features), "cpu:x86-64" (portable baseline) or
 * "cpu:NAME" (features of NAME), or the canonical "cpu:NAME:FEATURES"
 * that xpj_target_str writes. On error writes a message to err. */
xpj_status xpj_target_parse(const char *s, xpj_target *t, char *err,
                            size_t errsize);
/* Canonical string: "spirv:1.2", "ptx:sm_90:ptx80",
 * "cpu:znver3:+avx2,+fma,...". Returns the length needed (like snprintf). */
size_t xpj_target_str(const xpj_target *t, char *buf, size_t size);

typedef enum xpj_emit_kind {
  XPJ_EMIT_BIN = 0,  /* SPIR-V binary, PTX text, ELF relocatable object */
  XPJ_EMIT_ASM = 1,  /* SPIR-V disassembly, PTX text, x86-64 assembly */
  XPJ_EMIT_LLVM = 2, /* optimised LLVM IR text, before code generation */
} xpj_emit_kind;

/* Any other value is refused with XPJ_ERR_INVALID, as an opt_level over 3
 * or unknown checks bits are. */
typedef enum xpj_isolation {
  XPJ_ISOLATE_DEFAULT = 0, /* a worker process per compile */
  XPJ_ISOLATE_NONE = 1,    /* in this process (PTX and CPU only; SPIR-V
                              always uses a worker, see docs/abi.md).
                              timeout_ms and memory_limit_mb do not apply:
                              nothing stops a compile in the caller's
                              thread */
} xpj_isolation;

/* A compile's wall-clock limit when xpj_compile_opts.timeout_ms is 0. */
#define XPJ_COMPILE_TIMEOUT_MS 60000u

typedef struct xpj_compile_opts {
  unsigned opt_level;  /* 0..3 */
  int fast_math;       /* allow reassociation, approximate division, sqrt
                          and math functions, no NaN/inf guarantees */
  int debug_info;      /* line tables (CPU and PTX) */
  xpj_isolation isolation;
  unsigned timeout_ms; /* worker wall-clock limit; 0: XPJ_COMPILE_TIMEOUT_MS */
  /* Memory the worker may take beyond what it inherits, in MiB;
   * 0: XPJIT_COMPILE_MEMORY_LIMIT ("512M", "4G", "off"), else the smaller
   * of 4 GiB and half the physical memory (docs/abi.md, Isolation). */
  unsigned memory_limit_mb;
  /* XPJ_CHECK_* bits: run-time checks compiled into the kernel (part of
   * what identifies a compile; docs/abi.md, Checks). */
  unsigned checks;
  /* Contract a * b + c into a fused multiply-add (one rounding) where the
   * target has one, and nothing else of fast_math (which implies it):
   * faster, but results then differ in the last bits from the unfused
   * evaluation, so between devices and from a reference computed on the
   * host. 0 (the default): nothing contracts, every device rounds each
   * operation (docs/language.md 11.2). */
  int fp_contract;
} xpj_compile_opts;

/* Every array access is checked against its view or its static extent; the
 * first violation of a launch is recorded (the kernel takes one more hidden
 * argument, docs/abi.md) and the access goes to a harmless place instead.
 * The runtime fails the launch with XPJ_ERR_BOUNDS naming it. */
#define XPJ_CHECK_BOUNDS 1u
#define XPJ_CHECK_ALL XPJ_CHECK_BOUNDS

/* What a kernel compiled with XPJ_CHECK_BOUNDS writes at the first
 * violation of a launch, into the record its last hidden argument points
 * at (zeroed before the launch; docs/abi.md, Checks). */
typedef struct xpj_check_record {
  uint32_t hit;    /* non-zero once a violation is recorded */
  uint32_t func;   /* the function of the access: its index in the
                      specialised module (xpj_module_func) */
  uint32_t inst;   /* the access: its index instruction in that function */
  uint32_t param;  /* 1 + the kernel parameter indexed (through any device
                      function); 0: a static (local or private) array */
  uint32_t dim;    /* which index was out of range (0 first);
                      UINT32_MAX: a flat index into a multi-rank array */
  uint32_t reserved;
  int64_t index;   /* its value */
  int64_t extent;  /* the extent it was checked against */
  uint8_t sink[32]; /* where out-of-range accesses to views go instead */
} xpj_check_record;

/* Parses checks as XPJIT_CHECK and `xpjit-cli emit --check` take them:
 * names separated by ',' ("bounds", "all"; "none" or "" for none) into
 * XPJ_CHECK_* bits. XPJ_ERR_INVALID with a message naming the unknown
 * word. */
xpj_status xpj_checks_parse(const char *s, unsigned *checks, char *err,
                            size_t errsize);

/* O2, IEEE math, no debug info, no checks, isolated, 60 s, the default
 * memory limit. */
void xpj_compile_opts_default(xpj_compile_opts *o);
/* Canonical string of the options that change the output ("O2",
 * "O3+fast-math+g+bounds", "O2+contract"): part of what identifies a
 * compile. */
size_t xpj_compile_opts_str(const xpj_compile_opts *o, char *buf,
                            size_t size);

typedef struct xpj_result xpj_result;

/* Compiles kernel (by name) of the specialised module m for target t.
 * *out is set whenever memory allows, also on failure, and carries the
 * message (xpj_result_log) and why it failed (xpj_result_failure_kind).
 * Returns XPJ_OK; XPJ_ERR_INVALID for bad arguments or an unspecialised
 * kernel; XPJ_ERR_NOT_FOUND; XPJ_ERR_COMPILE (LLVM failed or crashed,
 * SPIR-V validation failed, the worker timed out or could not start);
 * XPJ_ERR_NOMEM (out of memory, the worker's limit included);
 * XPJ_ERR_UNSUPPORTED (e.g. a math function on PTX without libdevice). */
xpj_status xpj_compile(const xpj_module *m, const char *kernel,
                       const xpj_target *t, const xpj_compile_opts *opts,
                       xpj_emit_kind emit, xpj_result **out);

void xpj_result_destroy(xpj_result *r);
xpj_status xpj_result_status(const xpj_result *r);
/* The output bytes (NULL, 0 on failure). Text outputs are NUL-terminated
 * (the NUL is not counted in *len). */
const uint8_t *xpj_result_data(const xpj_result *r, size_t *len);
/* The error message, or warnings; "" when none. */
const char *xpj_result_log(const xpj_result *r);
/* Name of the entry point in the output: "__xpj_k_" + the kernel's name
 * (at most 255 bytes), never a name a kernel can collide with
 * (docs/abi.md). "" when the compile did not get that far. */
const char *xpj_result_entry(const xpj_result *r);
/* The entry point's name for kernel into buf (NUL-terminated when size >
 * 0): what to give a driver (clCreateKernel, cuModuleGetFunction) for a
 * binary from xpj_program_get_binary or a bundle. Returns its length (at
 * most 255), like snprintf. */
size_t xpj_entry_name(const char *kernel, char *buf, size_t size);
/* CPU: bytes of local memory per work-group and of scratch per work-item
 * that the entry point needs (docs/abi.md). GPU targets: static local
 * memory in bytes; scratch 0. */
uint64_t xpj_result_local_bytes(const xpj_result *r);
uint64_t xpj_result_scratch_bytes(const xpj_result *r);
/* CPU nd-range kernels: at most XPJ_CPU_GROUP_MAX work-items per group;
 * the scratch buffer holds xpj_result_scratch_bytes() *
 * XPJ_CPU_SCRATCH_STRIDE bytes whatever the group size, so that each value
 * kept per work-item is an array at a constant offset (docs/abi.md). */
#define XPJ_CPU_GROUP_MAX 4096
#define XPJ_CPU_SCRATCH_STRIDE 4112
/* Milliseconds the compile took (including the worker). */
double xpj_result_millis(const xpj_result *r);

/* Why a compile failed, so that a caller can tell a kernel that does not
 * compile from a compile that did not finish, and cache each for as long
 * as it deserves. */
typedef enum xpj_failure_kind {
  XPJ_FAILURE_NONE = 0,    /* it did not fail (or r is NULL) */
  XPJ_FAILURE_INPUT = 1,   /* the inputs do not compile: bad arguments, no
                              such kernel, an error of the code generator
                              or of LLVM (a fatal error included), SPIR-V
                              validation, unsupported; the same inputs fail
                              the same way */
  XPJ_FAILURE_CRASH = 2,   /* the worker died of a signal it raised itself
                              (a bug in LLVM or xpjit): the same inputs
                              will most likely crash again */
  XPJ_FAILURE_TIMEOUT = 3, /* the worker ran past timeout_ms and was
                              killed (status XPJ_ERR_COMPILE) */
  XPJ_FAILURE_MEMORY = 4,  /* out of memory: the worker reached its limit
                              (memory_limit_mb), or this process ran out
                              (status XPJ_ERR_NOMEM) */
  XPJ_FAILURE_SYSTEM = 5,  /* no worker could run (fork, pipe), or it was
                              killed from outside (SIGKILL: the kernel's
                              OOM killer, a user) */
} xpj_failure_kind;

xpj_failure_kind xpj_result_failure_kind(const xpj_result *r);
/* "none", "input", "crash", "timeout", "out of memory", "system". */
const char *xpj_failure_kind_name(xpj_failure_kind k);
/* Non-zero when a failure says nothing about the inputs: kinds TIMEOUT,
 * MEMORY and SYSTEM. Such a result must not be cached as the kernel's
 * outcome (a negative entry that expires is fine). */
int xpj_result_transient(const xpj_result *r);

/* For a process whose only work is compiling in-process (xpjitd's
 * workers): bounds its memory as every compile worker's is (RLIMIT_DATA:
 * what it maps now plus XPJIT_COMPILE_MEMORY_LIMIT or the default), and
 * makes an allocation failure inside LLVM end the process with "xpjit:
 * out of memory ..." on stderr and exit status 75 (EX_TEMPFAIL) instead
 * of an abort. Call it once, first. Returns XPJ_OK; XPJ_ERR_INVALID when
 * XPJIT_COMPILE_MEMORY_LIMIT is malformed (the default applies);
 * XPJ_ERR_UNSUPPORTED when the limit could not be set. */
xpj_status xpj_compile_limit_memory(void);
/* The limits a compile with o (NULL: defaults) runs under in a worker:
 * its time in ms (timeout_ms, else 60000) and its memory in MiB
 * (memory_limit_mb, else XPJIT_COMPILE_MEMORY_LIMIT, else the default; 0:
 * none). Either pointer may be NULL. */
void xpj_compile_limits(const xpj_compile_opts *o, uint64_t *timeout_ms,
                        uint64_t *memory_mb);

/* Versions of the LLVM linked in ("22.1.8"), of this code generator's ABI
 * (docs/abi.md) and of the code it generates (one more whenever the code
 * for an unchanged kernel changes), all part of cache keys. */
const char *xpj_llvm_version(void);
unsigned xpj_abi_version(void);
unsigned xpj_codegen_revision(void);

/* The limit of every shape of an array argument and of a launch's total
 * global size (launches refuse more): 2^62. Compiled GPU code counts on it
 * (docs/abi.md). */
#define XPJ_MAX_EXTENT ((uint64_t)1 << 62)
/* Path of the libdevice bitcode used for PTX math, or NULL when none was
 * found (XPJIT_LIBDEVICE, then $CUDA_HOME, /usr/local/cuda). */
const char *xpj_libdevice_path(void);

#ifdef __cplusplus
}
#endif
#endif
