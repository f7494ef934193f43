/*
 * cg.h - the shared IR-to-LLVM lowering (codegen.c) and the small interface
 * each target implements (target_spirv.c, target_ptx.c, target_cpu.c).
 *
 * The lowering walks the structured IR once and emits LLVM IR through the
 * C API. Device functions are inlined during lowering (recursion is
 * forbidden by the verifier), so no target needs a device-function ABI and
 * the CPU target can run barrier code at work-group level. What differs per
 * target sits behind cg_target_ops.
 */
#ifndef XPJ_CG_H
#define XPJ_CG_H

#include "ir_impl.h"
#include "llvm_emit.h"
#include "xpjit_codegen.h"

#include <llvm-c/Core.h>
#include <llvm-c/DebugInfo.h>
#include <llvm-c/TargetMachine.h>
#include <stdbool.h>

typedef struct cg cg;

/* What the compile server built ahead for a machine it keeps
 * (compile_llvm.c, emit_ahead), for its workers: the code generator and
 * the optimisation pipelines; NULL where not built. */
enum { CG_AHEAD_PASSES = 4 };
typedef struct cg_ahead {
  xpj_emitter *emit;
  xpj_passes *passes[CG_AHEAD_PASSES];
} cg_ahead;
typedef struct cg_frame cg_frame;

/* local arrays of a kernel given their own alias scope (CPU) */
#define CG_MAX_LSCOPES 32

/* CPU: a loop of the generated code (a work-item loop or a loop of the
 * kernel), for target_cpu.c's vectorisation guard. Blocks are only ever
 * appended, so the loop's blocks are first..last in the function's order,
 * less exit (made with the header, entered once the loop is left); latch is
 * the branch back to the header. */
typedef struct cg_loop {
  LLVMBasicBlockRef first, last, exit;
  LLVMValueRef latch;
  /* a work-item loop of an nd-range kernel with barriers, outside any
   * interchanged loop (codegen.c mark_wi_loop) */
  bool plain_wi;
  /* in the strided version of a loop built in two (codegen.c
   * lower_loop_versions): not vectorised */
  bool strided;
} cg_loop;

/* The per-target part of code generation. */
typedef struct cg_target_ops {
  const char *name;
  /* true: one hardware thread per work-item (SPIR-V, PTX); false: the CPU,
   * where the entry point loops over work-items and work-groups. */
  bool simt;
  unsigned as_global, as_local; /* LLVM address spaces */
  /* The backend ignores the ordering of atomicrmw (LLVM 22 NVPTX): emit it
   * relaxed between scoped fences instead, unless ordered_rmw (optional)
   * gives the ordered instruction itself. */
  bool rmw_order_by_fences;
  /* An atomic read-modify-write op of scalar type s at p (space sp) with
   * ordering ord (acquire, release, acq_rel or seq_cst) and scope: the old
   * value, or NULL where the target has no such instruction. */
  LLVMValueRef (*ordered_rmw)(cg *c, LLVMAtomicRMWBinOp op, xpj_scalar s,
                              xpj_space sp, xpj_scope scope, LLVMValueRef p,
                              LLVMValueRef v, LLVMAtomicOrdering ord);
  LLVMCallConv kernel_cc;
  /* Creates the target machine for c->target (NULL + cg_fail on error)
   * and sets the module's triple. */
  LLVMTargetMachineRef (*machine)(cg *c);
  /* true: a machine keeps nothing of one module that changes the code of
   * the next, so one may serve the next compile (compile_llvm.c, "kept
   * machines"); SPIR-V's does (LLVM 22.1.8). */
  bool machine_reusable;
  /* Module-level setup after triple and data layout are set. */
  void (*init_module)(cg *c);
  /* Called once the module is complete and verified, before the
   * optimisation pipeline (CPU: the vectorisation guard). */
  void (*before_optimise)(cg *c);
  /* SIMT only: global_id, local_id, local_size, group_id, num_groups and
   * (nd-range) global_size in dimension dim, as i64. */
  LLVMValueRef (*wi)(cg *c, xpj_wi w, unsigned dim);
  /* SIMT only: a work-group barrier with the given XPJ_FENCE_* flags. */
  void (*barrier)(cg *c, unsigned fences);
  /* SIMT only: collective d of x (scalar type s; id: the i64 id, lane or
   * mask where d takes one). NULL: collectives are not supported. */
  LLVMValueRef (*group)(cg *c, const xpj_coll_desc *d, xpj_scalar s,
                        LLVMValueRef x, LLVMValueRef id);
  /* The LLVM sync scope name for an atomic of scope s on space sp. */
  const char *(*syncscope)(cg *c, xpj_scope s, xpj_space sp);
  /* A math builtin for scalar type s, or NULL to use the shared lowering
   * (LLVM intrinsics). May cg_fail with XPJ_ERR_UNSUPPORTED. */
  LLVMValueRef (*math)(cg *c, xpj_math m, xpj_scalar s, LLVMValueRef *a,
                       unsigned n);
  /* Optional: a compare-exchange of integers of type it at p (address
   * space as), returning the old value, for a backend whose cmpxchg
   * instruction is unusable (LLVM 22 SPIR-V: its {T, i1} result breaks
   * in phis). NULL: LLVM's cmpxchg. */
  LLVMValueRef (*cmpxchg)(cg *c, LLVMValueRef p, unsigned as, LLVMTypeRef it,
                          LLVMValueRef expected, LLVMValueRef desired,
                          xpj_scope scope, xpj_order order);
  /* true: exchange floats as integers of the same width (OpenCL has no
   * atomic_xchg on double, and Intel's SPIR-V reader asks for one). */
  bool xchg_float_as_int;
  /* true: no 16-bit atomics (OpenCL): they are compare-exchange loops on
   * the 32-bit word that holds them */
  bool atomic16_by_word;
  /* The base of the local memory that local array parameters (`local
   * T[]`) live in, which they get as a byte offset (CPU: the work-group's
   * local memory; PTX: the dynamic shared memory). NULL: they are passed
   * as local pointers (SPIR-V: OpenCL's __local kernel arguments). */
  LLVMValueRef (*local_param_base)(cg *c);
  /* Called once the kernel function is complete. */
  void (*finish_kernel)(cg *c, LLVMValueRef fn);
  /* Called after optimisation, before code generation (PTX: the rest of
   * its -O2 pipeline, libdevice, the loops' exit tests). */
  void (*before_codegen)(cg *c);
  /* true (PTX): shapes and range sizes carry their range (0 to 2^62, as
   * launches check), and at -O2 the stride loops that load global memory
   * run four trips at a time (codegen.c, lower_four_trips). */
  bool unroll_load_loops;
  /* views' offsets by a counted loop's variable kept as induction
   * variables of the code generator's own (codegen.c scaled_index),
   * hidden from loop strength reduction before code generation */
  bool scale_ivs;
  /* The optimisation pipeline at -O2 (LLVM's pass pipeline syntax); NULL:
   * LLVM's default<O2>. Other levels run LLVM's default<ON>. */
  const char *o2_pipeline;
  /* Optional: o2_pipeline for a module whose only function is the kernel
   * (nothing to inline, so no clean-up before inlining: it ran twice) */
  const char *o2_leaf;
  /* Optional, with o2_pipeline: the rest of the -O2 pipeline, run after
   * before_loops (PTX: the loop passes, with the induction variables'
   * steps hidden from scalar evolution) */
  void (*before_loops)(cg *c);
  const char *o2_loops;
  /* true (SPIR-V): when before_codegen leaves an integer wider than 64
   * bits (c->wide_left) that it could not make of 64-bit ones, the
   * module is optimised again, once, from its copy taken before the
   * optimisation, with IndVarSimplify's rewrite of loops' exit values
   * off (the closed forms of sums, in i65-i67, are where such integers
   * come from; compile_llvm.c) */
  bool exit_values_again;
} cg_target_ops;


extern const cg_target_ops xpj_target_spirv_ops;
extern const cg_target_ops xpj_target_ptx_ops;
extern const cg_target_ops xpj_target_cpu_ops;

/* A per-work-item region: one element per work-item of the group. */
typedef struct cg_region {
  int64_t off;        /* byte offset (per work-item) into the scratch */
  LLVMValueRef stack; /* or an alloca of fixed_items elements */
} cg_region;
#define CG_STACK_REGION_BYTES (64u * 1024u)
/* Private arrays in a kernel's frame, per work-item, in all: each call of
 * a device function lowers its arrays again, so nothing else bounds them,
 * and the CPU device runs kernels on threads of RT_KERNEL_STACK (twice
 * this; runtime/rt.h), where more would overflow the stack
 * (docs/language.md 10, "Limits"). */
#define CG_PRIVATE_MAX_BYTES (4u << 20)

struct cg {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMTargetMachineRef tm; /* the compile's machine (may be NULL early) */
  /* a compile server's worker (one compile, then the exit), and what its
   * server built ahead for tm (used only then) */
  bool worker;
  cg_ahead ahead;
  LLVMBuilderRef b;
  const cg_target_ops *ops;
  const xpj_target *target;
  const xpj_compile_opts *opts;
  const xpj_module *m;
  const xpj_func *kernel;
  /* dimension order (docs/abi.md): the hardware dimension (0 fastest: the
   * CPU's innermost work-item loop, CUDA x, OpenCL 0) of each logical one */
  unsigned hw_dim[3];
  const char *entry;     /* the entry point's symbol (compile.c) */
  LLVMValueRef fn;       /* the function being built */
  LLVMBasicBlockRef entry_bb; /* allocas go here */
  LLVMTypeRef t_void, t_i1, t_i8, t_i16, t_i32, t_i64, t_f32, t_f64, t_ptr;

  /* XPJ_CHECK_BOUNDS: the xpj_check_record (the last hidden argument) */
  LLVMValueRef chk_rec;

  /* SIMT range kernels: the launch's logical global size (hidden args). */
  LLVMValueRef range_size[3];

  /* CPU entry state */
  LLVMValueRef cpu_launch[9];   /* global[3], local[3], groups[3] */
  LLVMValueRef cpu_local_mem, cpu_scratch;
  LLVMValueRef cpu_gid[3], cpu_lid[3], cpu_grp[3];
  LLVMValueRef cpu_glinear, cpu_wi, cpu_wgs, cpu_grp_linear;
  bool in_wi_run; /* inside emit_wi_loop: the ids are this loop's */
  unsigned xdepth; /* interchanged loops around the code being built */
  /* range kernels run in chunks: the global id (dimension 0) of the
   * chunk's first work-item and its row-major linear id; cpu_wgs is the
   * chunk's size */
  LLVMValueRef chunk_first, chunk_linear;
  LLVMValueRef cpu_active;      /* i64 alloca: live work-items of a group */
  int64_t cpu_flags_off;        /* region of the returned flags, -1 */
  /* CPU per-work-item regions (codegen.c scratch_alloc): an offset into
   * the runtime's scratch buffer, or, when every group has at most
   * fixed_items work-items (a required local size; a range kernel's
   * chunk), an array in the entry point's frame while they fit
   * CG_STACK_REGION_BYTES, which the optimiser may keep in registers */
  cg_region *regions;
  unsigned nregions, capregions;
  uint64_t fixed_items;         /* 0: group size known only at launch */
  uint64_t stack_bytes;         /* bytes of regions in the frame */
  unsigned cur_loop;            /* serial of the work-item loop being built,
                                   0 at work-group level */
  unsigned loop_serial;
  /* the test hook XPJIT_FAULT_INJECT=unroll-loads: lower_four_trips on
   * every SIMT target (SPIR-V too), so that the code it makes runs on a
   * device of this machine (docs/testing.md) */
  bool unroll_all;
  bool versioned;               /* inside a loop built in two versions */
  bool strided_copy;            /* ... in its version for any strides */
  uint64_t versioned_insts;     /* estimated size of those loops so far */
  LLVMBasicBlockRef wi_latch;   /* next work-item */
  LLVMBasicBlockRef group_exit; /* end of the work-group (CPU nd-range) */
  bool wg_multi;                /* CPU nd-range kernel with barriers */
  cg_loop *cpu_loops;           /* every loop built, innermost first */
  unsigned ncpu_loops, cap_cpu_loops;

  /* CPU: alias scopes of the kernel's local arrays (codegen.c
   * alias_scopes): lscope_id[k] is the ARRAY instruction of scope k, whose
   * accesses carry !alias.scope lscope[k] and !noalias lscope_clear[k];
   * views carry !noalias lscope_all */
  LLVMValueRef lscope[CG_MAX_LSCOPES], lscope_clear[CG_MAX_LSCOPES];
  LLVMValueRef lscope_all;
  xpj_val lscope_id[CG_MAX_LSCOPES];
  unsigned nlscopes;

  uint64_t local_bytes;   /* static local memory */
  uint64_t scratch_bytes; /* CPU: per work-item scratch */
  uint64_t private_bytes; /* private arrays in the frame (stack) */
  uint64_t inlined;       /* instructions lowered, to bound inlining */
  /* CPU: per function of m, whether a call to it holds a barrier
   * (codegen.c barrier_memo): computed at the first question, freed by
   * cg_lower_kernel */
  uint8_t *fbarrier;
  bool needs_libdevice;
  bool libdevice_late;   /* PTX -O2: linked after the optimisation */
  const char *libdevice; /* PTX: its path as the caller found it; "": none */
  /* PTX in a worker: that libdevice, read by the compile server before
   * the fork (compile_llvm.c, read_ahead) into c->ctx; NULL: none */
  LLVMModuleRef lib_ahead;

  /* debug info (-g; CPU and PTX) */
  LLVMDIBuilderRef dib;
  LLVMMetadataRef di_sp;

  /* ops->exit_values_again: set by compile_here while the module may be
   * optimised again (before_codegen then records in wide_left, instead of
   * failing, the width of the widest integer it could not narrow) */
  bool exit_values_again;
  unsigned wide_left;
  bool no_wide_pairs; /* test hooks wide-pairs-off, wide-left */

  xpj_status status;
  char err[2048];
};

/* Records the first error (printf-style); later errors are ignored. */
void cg_fail(cg *c, xpj_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

LLVMTypeRef cg_scalar_type(cg *c, xpj_scalar s);
/* Declares (once) and calls function name with the given calling
 * convention. */
LLVMValueRef cg_call(cg *c, const char *name, LLVMTypeRef ret,
                     LLVMValueRef *args, unsigned n, LLVMCallConv cc);
/* Calls an LLVM intrinsic by name, overloaded on the given types. */
LLVMValueRef cg_intrinsic(cg *c, const char *name, LLVMTypeRef *over,
                          unsigned nover, LLVMValueRef *args, unsigned n);
LLVMValueRef cg_i64(cg *c, int64_t v);
LLVMValueRef cg_i32(cg *c, int32_t v);
bool cg_scalar_is_float(xpj_scalar s);
bool cg_scalar_is_signed(xpj_scalar s);

/* GPU targets: the bytes of local memory (work-group variables) the
 * module still declares, laid out in order, each at its alignment, as
 * ptxas lays out static .shared. Called on the optimised module, it is
 * what the result reports (xpj_result_local_bytes) and what a launch
 * counts beside its local array parameters: not the arrays the optimiser
 * removed (a tile a kernel uses for some values of a const parameter
 * only). */
uint64_t cg_simt_local_bytes(cg *c);

/* The local size the kernel requires (`local(...)`), in hardware order
 * (x fastest: c->hw_dim), 1 past its dimensions; false when none. */
bool cg_reqd_local_hw(cg *c, uint32_t hw[3]);

/* The identity of collective operation op on s (x op identity == x), and
 * a op b, as every target computes them. */
LLVMValueRef cg_group_identity(cg *c, xpj_group_op op, xpj_scalar s);
LLVMValueRef cg_group_combine(cg *c, xpj_group_op op, xpj_scalar s,
                              LLVMValueRef a, LLVMValueRef b);

/* Lowers kernel of c->m into c->mod (codegen.c). */
void cg_lower_kernel(cg *c);
/* Whether block b of f (not counting nested loops) breaks or continues. */
bool cg_block_exits_loop(const xpj_func *f, xpj_block b);
/* Whether instruction id of f is or holds a barrier (at any call depth). */
bool cg_inst_has_barrier(cg *c, const xpj_func *f, xpj_val id);

/* The CPU's plan for a kernel run at work-group level (uniform.c): per
 * instruction of the kernel, whether it is a loop interchanged with the
 * work-item loop (xloop) and whether it runs once per group because its
 * value is the same for every work-item (uni). chunked: a range kernel,
 * run in chunks of one row. */
typedef struct cg_plan {
  uint8_t *xloop, *uni;
  unsigned nxloops;
} cg_plan;
bool cg_plan_kernel(cg *c, const xpj_func *f, bool chunked, cg_plan *out);
void cg_plan_free(cg_plan *p);

/* compile_llvm.c: runs the pass pipeline (text) on c->mod for c->tm;
 * cg_fail on an error. */
void cg_run_pipeline(cg *c, const char *pipeline);

/* target_ptx.c: libdevice's bitcode at path, read lazily into ctx (the
 * functions a link takes are parsed then): from a mapping of the file, or
 * from a copy in memory of a regular file (copied: what fstat said of the
 * file read); NULL with why. */
struct stat;
LLVMModuleRef xpj_read_libdevice(LLVMContextRef ctx, const char *path,
                                 struct stat *copied, char *why,
                                 size_t whysize);

#endif
