/*
 * compile.c - targets, options, and running a compile: in this process
 * through LLVM's table (llvm.h: the compile itself is compile_llvm.c, in
 * libxpjit-llvm) or, by default, in a worker of the compile server
 * (cserver.c), so that LLVM's fatal errors and the SPIR-V backend's
 * process-global state cannot hurt the caller.
 */
#define _GNU_SOURCE
#include "env.h"
#include "frontend.h"
#include "ir_impl.h"
#include "llvm.h"
#include "worker.h"
#include "llvm_lock.h"
#include "daemon.h" /* xpd_now_ms */
#include "proto.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <llvm/Config/llvm-config.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#define XPJ_ABI_VERSION 6
/* The code generator's revision: one more whenever the code generated for
 * an unchanged kernel, target and options changes (faster code, a
 * miscompile fixed), so that binaries of an earlier code generator in a
 * cache or bundle are misses instead of being run (docs/cache.md, "The
 * key"). 1: PTX loops that load global memory unrolled four times at run
 * time, loop exit tests on the stepped induction variable, collectives
 * combining the warps' slots in a loop. 2: PTX ordered atomics as one
 * instruction (atom.acq_rel.gpu) instead of a relaxed one between fences.
 * 3: GPUs: a flat index into a contiguous row-major view of rank 2 or more
 * is its offset (no division). 4: bounds checks of flat indices with a
 * saturated extent; stride loops calling functions with atomics or
 * barriers rolled; stepped exit tests only where the step cannot wrap in
 * the last trip. 5: SPIR-V integer clamp as max then min (OpenCL's clamp
 * is undefined for lo > hi, which language.md 9.4 defines); PTX with debug
 * info for sm_90 and later: f16 atomic add and sub as a compare-exchange
 * loop (ptxas crashed on atom.add.noftz.f16 there); SPIR-V bool
 * collectives' result as != 0 (-O0 failed validation). 6: GPUs: a
 * kernel's local_bytes is what the optimised module declares (a row of
 * revision 5 counts local arrays the optimiser removed: refused at load,
 * or local array parameters held short). 7: PTX: views' addresses by a
 * counted loop's variable kept as the code generator's own induction
 * variables (codegen.c scaled_pointer), hidden from loop strength
 * reduction. 8: SPIR-V: an atomic's pointer at a constant offset as an
 * instruction (local atomics at a constant index above 0 touched another
 * element); atomic loads and stores as OpAtomicLoad / OpAtomicStore (they
 * were plain); bool exclusive or-scans' first work-item false; i64 mul_hi
 * without s_mul_hi, and 128-bit products the optimiser formed made of
 * 64-bit ones (target_spirv.c). 9: shape(x, d) and stride(x, d) with a
 * d computed at run time outside 0 .. ndim(x) - 1 are 0 (dimension 0's
 * before; codegen.c select_dim). 10: a decimal float literal rounded once
 * to f32, f16 or bf16, not through f64 (language.md 4.4); the key of a
 * specialised kernel changes only where that changes a constant, but a
 * first-level alias (made from the source, not the IR) would still lead
 * to code made with the old constant. 11: on the CPU, &&, || and ?: whose
 * right operand or arm reaches a barrier or a collective are lowered at
 * work-group level (refused before; codegen.c). 12: SPIR-V: the wide
 * integers LLVM's closed forms of summing loops make (i65 and up) narrowed
 * to 64-bit arithmetic or the loop left to run (target_spirv.c; refused
 * before). */
#define XPJ_CODEGEN_REVISION 12

/* ---- targets and options ------------------------------------------- */

static const struct {
  unsigned sm, ptx;
} ptx_table[] = {
    /* the oldest PTX ISA that knows each architecture (LLVM's minimum;
     * LLVM 22.1.8's NVPTX, measured with llc -mcpu=sm_XX) */
    {70, 60},  {72, 61},  {75, 63},  {80, 70},  {86, 71},  {87, 74},
    {88, 90},  {89, 78},  {90, 78},  {100, 86}, {101, 86}, {103, 88},
    {110, 90}, {120, 87}, {121, 88},
};
#define PTX_MAX_VERSION 90 /* the newest PTX ISA LLVM 22 writes */

static const char *const cpu_names[] = {
    "x86-64",        "x86-64-v2",      "x86-64-v3",     "x86-64-v4",
    "nehalem",       "westmere",       "sandybridge",   "ivybridge",
    "haswell",       "broadwell",      "skylake",       "skylake-avx512",
    "cascadelake",   "cooperlake",     "cannonlake",    "icelake-client",
    "icelake-server", "tigerlake",     "sapphirerapids", "alderlake",
    "raptorlake",    "meteorlake",     "graniterapids", "emeraldrapids",
    "znver1",        "znver2",         "znver3",        "znver4",
    "znver5",        "btver2",         "bdver4",        "goldmont",
    "tremont",       "sierraforest",   "grandridge",    "arrowlake",
    "lunarlake",     "pantherlake",    "diamondrapids", "clearwaterforest",
};

static void set_err(char *err, size_t n, const char *fmt, const char *arg) {
  if (err && n)
    snprintf(err, n, fmt, arg);
}

/* ASCII, whatever the locale (<ctype.h>'s isalnum follows it): target
 * names are ASCII. */
static bool ascii_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

xpj_status xpj_target_parse(const char *s, xpj_target *t, char *err,
                            size_t errsize) {
  return xpj_target_parse_for(s, NULL, t, err, errsize);
}

xpj_status xpj_target_parse_for(const char *s, const xpj_cache_config *cache,
                                xpj_target *t, char *err, size_t errsize) {
  if (!s || !t) {
    set_err(err, errsize, "%s", "no target given");
    return XPJ_ERR_INVALID;
  }
  memset(t, 0, sizeof *t);
  if (strcmp(s, "spirv") == 0 || strncmp(s, "spirv:", 6) == 0) {
    t->kind = XPJ_TARGET_SPIRV;
    t->spirv_minor = 2;
    if (s[5] == ':') {
      unsigned minor;
      char tail;
      if (sscanf(s + 6, "1.%u%c", &minor, &tail) != 1 || minor > 4) {
        set_err(err, errsize, "bad SPIR-V version in '%s' (use spirv:1.0 "
                "to spirv:1.4)", s);
        return XPJ_ERR_INVALID;
      }
      t->spirv_minor = minor;
    }
    return XPJ_OK;
  }
  if (strncmp(s, "ptx:", 4) == 0 || strcmp(s, "ptx") == 0) {
    t->kind = XPJ_TARGET_PTX;
    unsigned sm = 0, pv = 0;
    int n = 0, at = 0, at2 = 0;
    /* ptx:sm_NN or ptx:sm_NN:ptxNN and nothing more: sm_90a, an
     * architecture variant LLVM 22 does not have, is not sm_90 */
    if (s[3] && !strncmp(s + 4, "sm_", 3) && (s[7] >= '0' && s[7] <= '9') &&
        sscanf(s + 4, "sm_%u%n", &sm, &at) == 1) {
      const char *rest = s + 4 + at;
      if (!*rest)
        n = 1;
      else if (*rest == ':' && !strncmp(rest + 1, "ptx", 3) &&
               (rest[4] >= '0' && rest[4] <= '9') &&
               sscanf(rest + 1, "ptx%u%n", &pv, &at2) == 1 && !rest[1 + at2])
        n = 2;
    }
    if (n < 1) {
      set_err(err, errsize, "bad PTX target '%s' (use ptx:sm_XX, e.g. "
              "ptx:sm_90, optionally :ptxNN; not the a/f variants)", s);
      return XPJ_ERR_INVALID;
    }
    unsigned minpv = 0;
    for (size_t i = 0; i < sizeof ptx_table / sizeof *ptx_table; i++)
      if (ptx_table[i].sm == sm)
        minpv = ptx_table[i].ptx;
    if (!minpv) {
      set_err(err, errsize, "unsupported CUDA architecture in '%s' (sm_70, "
              "sm_72, sm_75, sm_80, sm_86, sm_87, sm_88, sm_89, sm_90, sm_100, "
              "sm_101, sm_103, sm_110, sm_120, sm_121)", s);
      return XPJ_ERR_INVALID;
    }
    if (n == 2 && (pv < minpv || pv > PTX_MAX_VERSION)) {
      set_err(err, errsize, "PTX ISA version in '%s' does not fit the "
              "architecture", s);
      return XPJ_ERR_INVALID;
    }
    t->sm = sm;
    t->ptx_version = n == 2 ? pv : minpv;
    return XPJ_OK;
  }
  if (strcmp(s, "cpu") == 0 || strcmp(s, "cpu:host") == 0 ||
      strcmp(s, "cpu:native") == 0) {
    t->kind = XPJ_TARGET_CPU;
    char why[400];
    if (xpj_host_cpu(cache, t->cpu, sizeof t->cpu, t->features,
                     sizeof t->features, why, sizeof why) != 0) {
      set_err(err, errsize, "%s", why);
      return XPJ_ERR_UNSUPPORTED;
    }
    return XPJ_OK;
  }
  const char *feat = strncmp(s, "cpu:", 4) == 0 ? strchr(s + 4, ':') : NULL;
  if (feat) { /* the canonical form: "cpu:NAME:FEATURES" (xpj_target_str) */
    size_t nl = (size_t)(feat - (s + 4));
    bool ok = nl > 0 && nl < sizeof t->cpu &&
              strlen(feat + 1) < sizeof t->features;
    for (const char *p = s + 4; ok && p < feat; p++)
      ok = ascii_alnum(*p) || *p == '-' || *p == '_' || *p == '.';
    for (const char *p = feat + 1; ok && *p; p++)
      ok = ascii_alnum(*p) || strchr("+-_.,", *p);
    if (!ok) {
      set_err(err, errsize, "bad CPU target '%s' (cpu:NAME:+feature,...)",
              s);
      return XPJ_ERR_INVALID;
    }
    t->kind = XPJ_TARGET_CPU;
    memcpy(t->cpu, s + 4, nl);
    t->cpu[nl] = 0;
    /* empty items dropped ("+avx2,,+fma," is "+avx2,+fma"): one key for
     * one list, whatever commas it was written with */
    size_t w = 0;
    for (const char *p = feat + 1; *p; p++)
      if (*p != ',' || (w && t->features[w - 1] != ','))
        t->features[w++] = *p;
    if (w && t->features[w - 1] == ',')
      w--;
    t->features[w] = 0;
    return XPJ_OK;
  }
  if (strncmp(s, "cpu:", 4) == 0) {
    t->kind = XPJ_TARGET_CPU;
    for (size_t i = 0; i < sizeof cpu_names / sizeof *cpu_names; i++)
      if (strcmp(s + 4, cpu_names[i]) == 0) {
        snprintf(t->cpu, sizeof t->cpu, "%s", cpu_names[i]);
        return XPJ_OK;
      }
    set_err(err, errsize, "unknown CPU in '%s' (cpu, cpu:x86-64, "
            "cpu:x86-64-v3, cpu:skylake, cpu:znver3, ...)", s);
    return XPJ_ERR_INVALID;
  }
  set_err(err, errsize, "unknown target '%s' (spirv, ptx:sm_XX, cpu[:CPU])",
          s);
  return XPJ_ERR_INVALID;
}

size_t xpj_target_str(const xpj_target *t, char *buf, size_t size) {
  if (!buf) /* (as snprintf(NULL, 0): the length only) */
    size = 0;
  if (!t)
    return (size_t)snprintf(buf, size, "?");
  switch (t->kind) {
  case XPJ_TARGET_SPIRV:
    return (size_t)snprintf(buf, size, "spirv:1.%u", t->spirv_minor);
  case XPJ_TARGET_PTX:
    return (size_t)snprintf(buf, size, "ptx:sm_%u:ptx%u", t->sm,
                            t->ptx_version);
  default:
    return (size_t)snprintf(buf, size, "cpu:%s:%s", t->cpu, t->features);
  }
}

void xpj_compile_opts_default(xpj_compile_opts *o) {
  if (!o)
    return;
  memset(o, 0, sizeof *o);
  o->opt_level = 2;
}

xpj_status xpj_checks_parse(const char *s, unsigned *checks, char *err,
                            size_t errsize) {
  if (checks)
    *checks = 0;
  if (!s || !checks) {
    if (err && errsize)
      snprintf(err, errsize, "xpj_checks_parse: NULL argument");
    return XPJ_ERR_INVALID;
  }
  unsigned bits = 0;
  while (*s) {
    size_t n = strcspn(s, ",");
    if (n == 6 && !strncmp(s, "bounds", n))
      bits |= XPJ_CHECK_BOUNDS;
    else if (n == 3 && !strncmp(s, "all", n))
      bits |= XPJ_CHECK_ALL;
    else if (!(n == 4 && !strncmp(s, "none", n)) && n) {
      if (err && errsize)
        snprintf(err, errsize, "unknown check '%.*s' (checks: bounds, all, "
                 "none)", (int)(n > 64 ? 64 : n), s);
      return XPJ_ERR_INVALID;
    }
    s += n + (s[n] == ',');
  }
  *checks = bits;
  return XPJ_OK;
}

size_t xpj_compile_opts_str(const xpj_compile_opts *o, char *buf,
                            size_t size) {
  xpj_compile_opts d;
  if (!buf) /* (as snprintf(NULL, 0): the length only) */
    size = 0;
  if (!o) {
    xpj_compile_opts_default(&d);
    o = &d;
  }
  return (size_t)snprintf(buf, size, "O%u%s%s%s%s", o->opt_level,
                          o->fast_math ? "+fast-math" : "",
                          o->fp_contract && !o->fast_math ? "+contract" : "",
                          o->debug_info ? "+g" : "",
                          o->checks & XPJ_CHECK_BOUNDS ? "+bounds" : "");
}

/* The LLVM xpjit was built with: part of every cache key (docs/cache.md),
 * known without loading LLVM (docs/api.md). */
const char *xpj_llvm_version(void) { return LLVM_VERSION_STRING; }

unsigned xpj_abi_version(void) { return XPJ_ABI_VERSION; }
unsigned xpj_codegen_revision(void) { return XPJ_CODEGEN_REVISION; }

/* ---- results ------------------------------------------------------- */

static xpj_result *result_new(void) {
  xpj_result *r = calloc(1, sizeof *r);
  return r;
}

void xpj_result_destroy(xpj_result *r) {
  if (!r)
    return;
  free(r->data);
  free(r->log);
  free(r->entry);
  free(r);
}

xpj_status xpj_result_status(const xpj_result *r) {
  return r ? r->status : XPJ_ERR_INVALID;
}
const uint8_t *xpj_result_data(const xpj_result *r, size_t *len) {
  if (len)
    *len = r ? r->len : 0;
  return r ? r->data : NULL;
}
const char *xpj_result_log(const xpj_result *r) {
  return r && r->log ? r->log : "";
}
const char *xpj_result_entry(const xpj_result *r) {
  return r && r->entry ? r->entry : "";
}
uint64_t xpj_result_local_bytes(const xpj_result *r) {
  return r ? r->local_bytes : 0;
}
uint64_t xpj_result_scratch_bytes(const xpj_result *r) {
  return r ? r->scratch_bytes : 0;
}
double xpj_result_millis(const xpj_result *r) { return r ? r->millis : 0; }

xpj_failure_kind xpj_result_failure_kind(const xpj_result *r) {
  return r ? r->failure : XPJ_FAILURE_NONE;
}

const char *xpj_failure_kind_name(xpj_failure_kind k) {
  switch (k) {
  case XPJ_FAILURE_NONE: return "none";
  case XPJ_FAILURE_INPUT: return "input";
  case XPJ_FAILURE_CRASH: return "crash";
  case XPJ_FAILURE_TIMEOUT: return "timeout";
  case XPJ_FAILURE_MEMORY: return "out of memory";
  case XPJ_FAILURE_SYSTEM: return "system";
  }
  return "?";
}

int xpj_result_transient(const xpj_result *r) {
  xpj_failure_kind k = xpj_result_failure_kind(r);
  return k == XPJ_FAILURE_TIMEOUT || k == XPJ_FAILURE_MEMORY ||
         k == XPJ_FAILURE_SYSTEM;
}

/* ---- the memory limit of workers ----------------------------------- */

/* The default budget: 4 GiB, or half the physical memory when that is
 * less. A real kernel's compile takes 2-8 MiB, the heaviest measured
 * 32-256 MiB (docs/abi.md): the budget only stops a runaway compile
 * before it takes the machine. */
static uint64_t default_memory_limit(void) {
  uint64_t lim = (uint64_t)4 << 30;
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  if (pages > 0 && psz > 0 && (uint64_t)pages * (uint64_t)psz / 2 < lim)
    lim = (uint64_t)pages * (uint64_t)psz / 2;
  return lim;
}

/* "off", or a number of bytes with an optional K, M, G or T (binary
 * units, like XPJIT_CACHE_MAX_SIZE), at least 1M: 0 for off. -1 when
 * malformed. */
static int parse_limit(const char *s, uint64_t *out) {
  if (strcmp(s, "off") == 0) {
    *out = 0;
    return 0;
  }
  uint64_t v = 0;
  const char *p = s;
  if (*p < '0' || *p > '9')
    return -1;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (v > (UINT64_MAX - 9) / 10)
      return -1;
    v = v * 10 + (uint64_t)(*p - '0');
  }
  const char *units = "KMGT";
  const char *u = *p ? strchr(units, toupper((unsigned char)*p)) : NULL;
  unsigned shift = u ? 10 * (unsigned)(u - units + 1) : 0;
  if (u)
    p++;
  if (u && (strcmp(p, "B") == 0 || strcmp(p, "iB") == 0))
    p += strlen(p);
  if (*p || (shift && v > (UINT64_MAX >> shift)))
    return -1;
  /* a limit is counted in MiB wherever it is remembered (a failure's
   * code, docs/cache.md): under 1 MiB, "0" included, would be "0 MiB",
   * which reads as no limit there and made every later request take the
   * remembered failure; no compile fits in it anyway */
  if ((v << shift) < ((uint64_t)1 << 20))
    return -1;
  *out = v << shift;
  return 0;
}

/* Bytes of memory a worker may take beyond what it inherits: the
 * option, else XPJIT_COMPILE_MEMORY_LIMIT, else the default; 0: no limit.
 * A malformed variable leaves a warning in note (else note is ""). */
static uint64_t memory_limit(const xpj_compile_opts *o, char *note,
                             size_t size) {
  note[0] = 0;
  if (o->memory_limit_mb)
    return (uint64_t)o->memory_limit_mb << 20;
  const char *env = getenv("XPJIT_COMPILE_MEMORY_LIMIT");
  uint64_t v;
  if (env && *env && parse_limit(env, &v) == 0)
    return v;
  uint64_t d = default_memory_limit();
  if (env && *env)
    snprintf(note, size, "XPJIT_COMPILE_MEMORY_LIMIT=%.64s is not a size "
             "of at least 1M (512M, 4G) or off: the default of %llu MiB "
             "applies", env,
             (unsigned long long)(d >> 20));
  return d;
}

void xpj_compile_limits(const xpj_compile_opts *o, uint64_t *timeout_ms,
                        uint64_t *memory_mb) {
  xpj_compile_opts d;
  if (!o) {
    xpj_compile_opts_default(&d);
    o = &d;
  }
  char note[200];
  if (timeout_ms)
    *timeout_ms = o->timeout_ms ? o->timeout_ms : XPJ_COMPILE_TIMEOUT_MS;
  if (memory_mb)
    *memory_mb = memory_limit(o, note, sizeof note) >> 20;
}

/* This process's data mappings now (VmData: heap, private writable
 * mappings), in bytes; 0 when unknown. */
static uint64_t data_mapped(void) {
  char buf[4096];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0)
    close(fd);
  if (n <= 0)
    return 0;
  buf[n] = 0;
  const char *p = strstr(buf, "\nVmData:");
  unsigned long long kb;
  return p && sscanf(p + 8, "%llu", &kb) == 1 ? (uint64_t)kb << 10 : 0;
}

/* Bounds the data this process may map (RLIMIT_DATA) to what it maps now
 * plus budget bytes, less the free heap it already holds, which malloc
 * reuses without mapping more. A worker is a fork of its caller and
 * inherits its mappings (a sanitizer's terabytes, a CUDA context's
 * reservations) and its free heap, so only the growth can be bounded.
 * RLIMIT_AS would not do: malloc grows the arenas of other threads, which
 * the worker inherits and falls back to, by mprotect inside address space
 * reserved before the fork; turning memory writable counts as data. */
static int limit_data(uint64_t budget) {
  if (!budget)
    return 0;
  uint64_t now = data_mapped();
  if (!now)
    return -1;
  struct mallinfo2 mi = mallinfo2();
  budget = budget > mi.fordblks ? budget - mi.fordblks : 0;
  struct rlimit rl;
  if (getrlimit(RLIMIT_DATA, &rl) != 0)
    return -1;
  uint64_t want = budget > UINT64_MAX - now ? UINT64_MAX : now + budget;
  if (rl.rlim_max != RLIM_INFINITY && want > rl.rlim_max)
    want = rl.rlim_max;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want)
    return 0; /* a tighter limit is already in place */
  rl.rlim_cur = want;
  return setrlimit(RLIMIT_DATA, &rl);
}

void xpj_compiler_settings_check(void (*report)(const char *name,
                                                const char *msg)) {
  char msg[600];
  uint64_t v;
  const char *e = xpj_env("XPJIT_COMPILE_MEMORY_LIMIT");
  if (e && parse_limit(e, &v) != 0) {
    snprintf(msg, sizeof msg, "XPJIT_COMPILE_MEMORY_LIMIT=%.64s is not a "
             "size of at least 1M (512M, 4G) or off: the default of %llu MiB "
             "applies", e,
             (unsigned long long)(default_memory_limit() >> 20));
    report("XPJIT_COMPILE_MEMORY_LIMIT", msg);
  }
  char path[4096];
  e = xpj_env("XPJIT_COMPILE_SERVER");
  if (e && strcmp(e, "fork") && !xpj_cs_find_exe(path, sizeof path)) {
    snprintf(msg, sizeof msg, "XPJIT_COMPILE_SERVER=%.256s is not an "
             "executable file of root or of this user that nobody else may "
             "write: each compile forks this process instead", e);
    report("XPJIT_COMPILE_SERVER", msg);
  }
  e = xpj_env("XPJIT_LIBDEVICE");
  if (e && access(e, R_OK) != 0) {
    snprintf(msg, sizeof msg, "XPJIT_LIBDEVICE=%.256s: %s; PTX that calls "
             "math functions cannot be compiled", e, strerror(errno));
    report("XPJIT_LIBDEVICE", msg);
  }
  static const char *const faults[] = {"crash", "hang", "llvm-fatal",
                                       "linger", "unroll-loads",
                                       "wide-pairs-off", "wide-left", NULL};
  if (xpj_env_word("XPJIT_FAULT_INJECT", faults) == -2) {
    snprintf(msg, sizeof msg, "XPJIT_FAULT_INJECT=%.64s is not crash, hang, "
             "llvm-fatal, linger, unroll-loads, wide-pairs-off or wide-left "
             "(a test hook); ignored",
             xpj_env("XPJIT_FAULT_INJECT"));
    report("XPJIT_FAULT_INJECT", msg);
  }
}

/* libdevice for PTX: XPJIT_LIBDEVICE, else the CUDA toolkit's (CUDA_HOME,
 * /usr/local/cuda); NULL when there is none. */
const char *xpj_libdevice_path(void) {
  static __thread char buf[4096];
  const char *env = getenv("XPJIT_LIBDEVICE");
  if (env && *env)
    return access(env, R_OK) == 0 ? env : NULL;
  const char *homes[2] = {getenv("CUDA_HOME"), "/usr/local/cuda"};
  for (int i = 0; i < 2; i++) {
    if (!homes[i] || !*homes[i])
      continue;
    snprintf(buf, sizeof buf, "%s/nvvm/libdevice/libdevice.10.bc", homes[i]);
    if (access(buf, R_OK) == 0)
      return buf;
  }
  return NULL;
}

/* ---- the compile itself -------------------------------------------- */

/* readers: in-process compiles; writer: a fork of a worker */
static pthread_rwlock_t inprocess_lock = PTHREAD_RWLOCK_INITIALIZER;

/* LLVM's table, its targets registered; NULL (r failed) when there is no
 * LLVM to be had. */
static const xpj_llvm_api *llvm_for(xpj_result *r) {
  char why[400];
  const xpj_llvm_api *api = xpj_llvm(why, sizeof why);
  if (api)
    api->init();
  else if (r)
    result_fail(r, XPJ_ERR_UNSUPPORTED, XPJ_FAILURE_SYSTEM, why);
  return api;
}

/* ---- the worker process -------------------------------------------- */

static void write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      _exit(3);
    c += w;
    n -= (size_t)w;
  }
}

/* The exit status of a worker that met an LLVM fatal error. */
#define WORKER_LLVM_FATAL 70

static void worker_fatal(const char *reason) {
  static const char pre[] = "LLVM ERROR: ";
  ssize_t w = write(2, pre, sizeof pre - 1);
  w = write(2, reason, strlen(reason));
  w = write(2, "\n", 1);
  (void)w;
  _exit(WORKER_LLVM_FATAL);
}

/* The reply frame: status, output, log, local and scratch bytes. */
static void put_reply(xpd_buf *b, xpj_status st, const uint8_t *data,
                      size_t len, const char *log, size_t loglen,
                      uint64_t local, uint64_t scratch) {
  xpd_begin(b, XPD_CRESULT, 0);
  xpd_put_u64(b, XPD_F_STATUS, (uint64_t)st);
  if (len)
    xpd_put_bytes(b, XPD_F_BINARY, data, len);
  xpd_put_bytes(b, XPD_F_LOG, log, loglen);
  xpd_put_u64(b, XPD_F_LOCAL, local);
  xpd_put_u64(b, XPD_F_SCRATCH, scratch);
  xpd_end(b, 0);
}

/* Allocation failures inside LLVM (compile_llvm.c catch_errors), and our
 * own once a compile's memory limit is reached. */
static struct {
  int fd; /* the reply socket of a worker; -1: a compile-only process */
  char msg[300];
  uint8_t frame[1024]; /* the reply is built here: nothing is allocated */
} bad_alloc = {-1, "", {0}};

/* Answers the caller as a compile that ran out of memory (a worker), or
 * says so on stderr and exits with EX_TEMPFAIL (a compile-only process).
 * Allocates nothing. */
static void on_bad_alloc(void *data, const char *reason, bool crash_diag) {
  (void)data;
  (void)crash_diag;
  if (bad_alloc.fd < 0) {
    write_all(2, "xpjit: out of memory: ", 22);
    write_all(2, bad_alloc.msg, strlen(bad_alloc.msg));
    if (reason) {
      write_all(2, ": ", 2);
      write_all(2, reason, strlen(reason));
    }
    write_all(2, "\n", 1);
    _exit(EX_TEMPFAIL);
  }
  char log[512];
  size_t ml = strlen(bad_alloc.msg), rl = reason ? strlen(reason) : 0;
  if (rl > sizeof log - ml - 3)
    rl = sizeof log - ml - 3;
  memcpy(log, bad_alloc.msg, ml);
  if (rl) {
    memcpy(log + ml, ": ", 2);
    memcpy(log + ml + 2, reason, rl);
    ml += 2 + rl;
  }
  /* the frame (16 + 5 fields, under 600 bytes) fits the static buffer, so
   * xpd_buf never reallocates it */
  xpd_buf b = {bad_alloc.frame, 0, sizeof bad_alloc.frame, false};
  put_reply(&b, XPJ_ERR_NOMEM, NULL, 0, log, ml, 0, 0);
  if (!b.oom)
    write_all(bad_alloc.fd, b.p, b.len);
  _exit(0);
}

static void catch_bad_alloc(int fd, uint64_t limit) {
  bad_alloc.fd = fd;
  if (limit)
    snprintf(bad_alloc.msg, sizeof bad_alloc.msg,
             "the compile needs more than the %llu MiB of memory a compile "
             "worker may use (memory_limit_mb, XPJIT_COMPILE_MEMORY_LIMIT)",
             (unsigned long long)(limit >> 20));
  else
    snprintf(bad_alloc.msg, sizeof bad_alloc.msg,
             "the compile ran out of memory (no limit set)");
}

void xpj_worker_keep_heap(void) {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

xpj_status xpj_compile_limit_memory(void) {
  const xpj_llvm_api *api = llvm_for(NULL);
  if (!api)
    return XPJ_ERR_UNSUPPORTED;
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  char note[200];
  uint64_t limit = memory_limit(&o, note, sizeof note);
  catch_bad_alloc(-1, limit);
  api->catch_errors(NULL, on_bad_alloc);
  if (limit_data(limit) != 0)
    return XPJ_ERR_UNSUPPORTED;
  return note[0] ? XPJ_ERR_INVALID : XPJ_OK;
}

void xpj_worker_run(int fd, const xpj_job *job) {
  xpj_job wj = *job;
  const xpj_job *j = &wj;
  wj.worker = true;
  xpj_result r;
  memset(&r, 0, sizeof r);
  const xpj_llvm_api *api = llvm_for(&r);
  if (!api)
    xpj_worker_fail(fd, r.status, r.log ? r.log : "no LLVM");
  catch_bad_alloc(fd, j->memory_limit);
  api->catch_errors(worker_fatal, on_bad_alloc);
  limit_data(j->memory_limit);
  if (j->target->kind == XPJ_TARGET_SPIRV &&
      strcmp(j->fault, "llvm-fatal") != 0) {
    const char *argv[] = {"xpjit-worker",
                          "--spirv-ext=+SPV_EXT_shader_atomic_float_add,"
                          "+SPV_INTEL_subgroups,"
                          "+SPV_KHR_uniform_group_instructions"};
    api->options(2, argv);
  }
  api->compile(j, &r);
  if (r.status == XPJ_ERR_NOMEM && j->memory_limit) {
    /* our own allocations met the limit, not LLVM's: the same message */
    free(r.log);
    r.log = bad_alloc.msg;
  }
  xpd_buf b = {0};
  put_reply(&b, r.status, r.data, r.len, r.log ? r.log : "",
            r.log ? strlen(r.log) : 0, r.local_bytes, r.scratch_bytes);
  if (b.oom)
    on_bad_alloc(NULL, "the reply", false);
  write_all(fd, b.p, b.len);
  /* The caller, woken by the reply, often waits for this CPU: without a
   * yield it ran only once this process's teardown was done, 1.2-1.9 ms
   * later, in a third of the compiles (the kernel here does not preempt
   * an exiting task for it; docs/benchmarks.md). */
  sched_yield();
  /* test hook: a worker that does not end after its reply */
  if (strcmp(j->fault, "linger") == 0)
    for (;;)
      pause();
  /* the caller sees end-of-file now, not after this process's memory is
   * torn down */
  close(fd);
  close(2);
  /* the status says to the compile server whether a binary was made (a
   * target it may warm up for); the caller has the reply */
  _exit(r.status == XPJ_OK && j->emit == XPJ_EMIT_BIN ? XPJ_WORKER_COMPILED
                                                      : XPJ_WORKER_ANSWERED);
}

void xpj_worker_fail(int fd, xpj_status st, const char *msg) {
  xpd_buf b = {0};
  put_reply(&b, st, NULL, 0, msg, strlen(msg), 0, 0);
  if (!b.oom)
    write_all(fd, b.p, b.len);
  _exit(XPJ_WORKER_ANSWERED);
}

typedef struct sink {
  char *p;
  size_t n, cap, limit;
} sink;

static int sink_add(sink *s, const char *p, size_t n) {
  if (s->n + n > s->limit)
    n = s->limit > s->n ? s->limit - s->n : 0;
  if (s->n + n + 1 > s->cap) {
    size_t nc = s->cap ? s->cap : 4096;
    while (nc < s->n + n + 1)
      nc *= 2;
    char *np = realloc(s->p, nc);
    if (!np)
      return -1;
    s->p = np;
    s->cap = nc;
  }
  memcpy(s->p + s->n, p, n);
  s->n += n;
  s->p[s->n] = 0;
  return 0;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Why a worker that sent no reply ended. */
static xpj_failure_kind exit_kind(int st) {
  if (WIFSIGNALED(st))
    /* SIGKILL comes from outside: the OOM killer, a user */
    return WTERMSIG(st) == SIGKILL ? XPJ_FAILURE_SYSTEM : XPJ_FAILURE_CRASH;
  if (WIFEXITED(st) && WEXITSTATUS(st) == WORKER_LLVM_FATAL)
    return XPJ_FAILURE_INPUT;
  if (WIFEXITED(st) && WEXITSTATUS(st) == XPJ_WORKER_NO_FDS)
    return XPJ_FAILURE_SYSTEM;
  return XPJ_FAILURE_CRASH;
}

static void describe_exit(int st, char *buf, size_t n) {
  if (WIFSIGNALED(st))
    snprintf(buf, n, "the compiler worker was killed by signal %d (%s)",
             WTERMSIG(st), strsignal(WTERMSIG(st)));
  else if (WIFEXITED(st) && WEXITSTATUS(st) == XPJ_WORKER_NO_FDS)
    snprintf(buf, n, "the compiler worker could not arrange its file "
             "descriptors (RLIMIT_NOFILE?)");
  else if (WIFEXITED(st))
    snprintf(buf, n, "the compiler worker exited with status %d",
             WEXITSTATUS(st));
  else
    snprintf(buf, n, "the compiler worker failed");
}

int xpj_worker_decode(const uint8_t *buf, size_t n, xpj_result *r) {
  xpd_header h;
  xpd_msg m;
  if (!buf || !r || xpd_header_decode(buf, n, UINT32_MAX, &h) != XPD_E_OK ||
      h.op != XPD_CRESULT || n != XPD_HEADER + (size_t)h.len ||
      xpd_payload_decode(buf + XPD_HEADER, h.len, &m) != XPD_E_OK)
    return -1;
  uint64_t st, local, scratch;
  const uint8_t *bin = NULL, *logp;
  size_t len = 0, loglen;
  if (xpd_get_u64(&m, XPD_F_STATUS, false, &st) != XPD_E_OK ||
      xpd_get_bytes(&m, XPD_F_BINARY, true, SIZE_MAX, &bin, &len) !=
          XPD_E_OK ||
      xpd_get_bytes(&m, XPD_F_LOG, false, SIZE_MAX, &logp, &loglen) !=
          XPD_E_OK ||
      xpd_get_u64(&m, XPD_F_LOCAL, false, &local) != XPD_E_OK ||
      xpd_get_u64(&m, XPD_F_SCRATCH, false, &scratch) != XPD_E_OK)
    return -1;
  if (st > XPJ_ERR_UNSUPPORTED || (st == 0) != (len > 0))
    return -1;
  uint8_t *data = NULL;
  char *log = NULL;
  if (len) {
    data = malloc(len + 1);
    if (!data)
      return -1;
    memcpy(data, bin, len);
    data[len] = 0;
  }
  log = malloc(loglen + 1);
  if (!log) {
    free(data);
    return -1;
  }
  memcpy(log, logp, loglen);
  log[loglen] = 0;
  free(r->data);
  free(r->log);
  r->data = data;
  r->len = len;
  r->log = log;
  r->status = (xpj_status)st;
  r->failure = failure_of(r->status);
  r->local_bytes = local;
  r->scratch_bytes = scratch;
  return 0;
}

xpj_result *xpj_result_new_internal(void) { return result_new(); }

/* A job's time limit: its own, else the default (xpj_compile_opts). */
static unsigned job_timeout_ms(const xpj_job *j) {
  return j->opts.timeout_ms ? j->opts.timeout_ms : XPJ_COMPILE_TIMEOUT_MS;
}

/* Reads a worker's reply (sock) and stderr with the server's footer (err)
 * until the reply is complete or both end, or deadline (xpd_now_ms) has
 * passed. Whether the compile server gave an answer ("ended"): else it
 * died or stopped answering (it is then ended), and the caller gives the
 * job to another. */
static bool read_worker(const xpj_job *j, int sock, int err_fd,
                        unsigned gen, uint64_t deadline, xpj_result *r) {
  unsigned timeout = job_timeout_ms(j);
  sink out = {NULL, 0, 0, (size_t)1 << 31}, err = {NULL, 0, 0, 64 << 10};
  bool out_open = true, err_open = true, hung = false, oom = false;
  bool have_reply = false;
  while (!have_reply && (out_open || err_open)) {
    struct pollfd pf[2];
    int n = 0;
    if (out_open)
      pf[n++] = (struct pollfd){sock, POLLIN, 0};
    if (err_open)
      pf[n++] = (struct pollfd){err_fd, POLLIN, 0};
    uint64_t now = xpd_now_ms();
    if (now >= deadline) {
      hung = true;
      break;
    }
    uint64_t left = deadline - now;
    int pr = poll(pf, (nfds_t)n, (int)(left > 1000 ? 1000 : left + 1));
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr < 0)
      break;
    for (int i = 0; i < n; i++) {
      if (!pf[i].revents)
        continue;
      char buf[65536];
      ssize_t got = read(pf[i].fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR)
        continue;
      bool is_out = pf[i].fd == sock;
      if (got <= 0) {
        if (is_out)
          out_open = false;
        else
          err_open = false;
        continue;
      }
      if (sink_add(is_out ? &out : &err, buf, (size_t)got) != 0)
        oom = true;
    }
    /* a complete reply needs nothing more: neither the error stream nor
     * the job socket's end of file, which came 1.3-1.6 ms after the reply
     * (docs/benchmarks.md) */
    if (!oom && out.n &&
        xpj_worker_decode((const uint8_t *)out.p, out.n, r) == 0)
      have_reply = true;
  }
  xpj_cs_end end = {0, 0};
  bool ended = have_reply || oom ||
               (!err_open && xpj_cs_footer(err.p, &err.n, &end) == 0);
  if (hung) {
    /* the server kills a worker at the job's deadline and says so in the
     * footer: none 5 s later is the server's fault, not the job's */
    xpj_cs_abandon(gen, XPJ_CS_HUNG);
    ended = false;
  } else if (oom) {
    result_fail(r, XPJ_ERR_NOMEM, XPJ_FAILURE_MEMORY,
                "out of memory reading the worker's output");
  } else if (!ended || have_reply) {
    /* nothing to say: a reply, or a server to replace */
  } else if (end.flags & XPJ_CS_TIMED_OUT) {
    char msg[128];
    snprintf(msg, sizeof msg, "the compile timed out after %u ms; the "
             "worker was killed", timeout);
    result_fail(r, XPJ_ERR_COMPILE, XPJ_FAILURE_TIMEOUT, msg);
  } else if (end.flags & XPJ_CS_NO_WORKER) {
    result_fail(r, XPJ_ERR_COMPILE, XPJ_FAILURE_SYSTEM,
                "the compile server could not start a worker");
  } else if (end.flags & XPJ_CS_REFUSED) {
    xpj_cs_abandon(gen, XPJ_CS_BAD_EXE);
    ended = false; /* the next attempt goes to a fork of this process */
  } else {
    char why[160];
    describe_exit(end.wait_status, why, sizeof why);
    size_t need = strlen(why) + err.n + 8;
    char *msg = malloc(need);
    if (msg) {
      /* the worker's stderr carries LLVM's own message */
      snprintf(msg, need, "%s%s%.*s", why, err.n ? ": " : "", (int)err.n,
               err.n ? err.p : "");
      size_t L = strlen(msg);
      while (L && (msg[L - 1] == '\n' || msg[L - 1] == ' '))
        msg[--L] = 0;
    }
    result_fail(r, XPJ_ERR_COMPILE, exit_kind(end.wait_status),
                msg ? msg : why);
    free(msg);
  }
  free(out.p);
  free(err.p);
  return ended;
}

/* A compile in a worker of the compile server. A server that dies or
 * stops answering mid-job is replaced and the job given to the new one;
 * when that one fails too, to a server forked from this process, which
 * needs no executable (docs/abi.md, Isolation). */
static void compile_isolated(const xpj_job *j, xpj_result *r) {
  char why[256] = "";
  unsigned timeout = job_timeout_ms(j);
  for (int attempt = 0; attempt < 3; attempt++) {
    int sock, err;
    unsigned gen;
    /* the server kills a worker at its deadline; this one, 5 s later, is
     * for a server that stopped answering (the job's frame written too) */
    uint64_t deadline = xpd_now_ms() + timeout + 5000;
    if (xpj_cs_submit(j, deadline, &sock, &err, &gen, why, sizeof why) != 0)
      break;
    bool ended = read_worker(j, sock, err, gen, deadline, r);
    close(sock);
    close(err);
    if (ended)
      return;
    if (attempt == 1)
      xpj_cs_abandon(gen, XPJ_CS_BAD_EXE);
    snprintf(why, sizeof why, "the compile server ended or stopped "
             "answering during the job");
  }
  char msg[320];
  snprintf(msg, sizeof msg, "cannot run a compiler worker: %s", why);
  result_fail(r, XPJ_ERR_COMPILE, XPJ_FAILURE_SYSTEM, msg);
}

/* ---- the public entry point ---------------------------------------- */

/* The entry point's symbol: the kernel's name behind a prefix reserved for
 * entry points, so that no kernel can take the name of a function the
 * generated code calls or the process defines (libm's expf, memset, an
 * OpenCL builtin, libdevice's __nv_*). Cut to XPJ_ENTRY_MAX bytes, which
 * the loaders and the daemon's protocol carry; a module holds one kernel,
 * so a cut name collides with nothing. */
size_t xpj_entry_name(const char *kernel, char *buf, size_t size) {
  char name[XPJ_ENTRY_MAX + 1];
  int n = snprintf(name, sizeof name, "%s%s", XPJ_ENTRY_PREFIX,
                   kernel ? kernel : "");
  if (n < 0)
    n = 0;
  if ((size_t)n > XPJ_ENTRY_MAX)
    n = XPJ_ENTRY_MAX;
  if (buf && size)
    snprintf(buf, size, "%.*s", n, name);
  return (size_t)n;
}

static bool is_generic(const xpj_func *f) {
  return f->ntparams || f->ncparams || xpj_func_has_generic_rank(f);
}

const xpj_func *xpj_generic_reachable(const xpj_module *m,
                                      const xpj_func *k) {
  if (is_generic(k))
    return k;
  uint32_t *stack = calloc(m->nfuncs, sizeof *stack);
  bool *seen = calloc(m->nfuncs, sizeof *seen);
  const xpj_func *found = NULL;
  if (!stack || !seen) {
    free(stack);
    free(seen);
    return NULL; /* out of memory: the compile fails on its own */
  }
  uint32_t n = 0;
  stack[n++] = k->index;
  seen[k->index] = true;
  while (n && !found) {
    const xpj_func *f = m->funcs[stack[--n]];
    for (uint32_t v = 1; v < f->ninsts && !found; v++) {
      const xpj_inst *in = &f->insts[v];
      if (in->op != XPJ_OP_CALL || in->imm.callee >= m->nfuncs)
        continue;
      const xpj_func *callee = m->funcs[in->imm.callee];
      if (in->ntargs || is_generic(callee))
        found = callee;
      else if (!seen[callee->index]) {
        seen[callee->index] = true;
        stack[n++] = callee->index;
      }
    }
  }
  free(stack);
  free(seen);
  return found;
}

xpj_status xpj_compile(const xpj_module *m, const char *kernel,
                       const xpj_target *t, const xpj_compile_opts *opts,
                       xpj_emit_kind emit, xpj_result **out) {
  if (!out)
    return XPJ_ERR_INVALID;
  *out = NULL;
  xpj_result *r = result_new();
  if (!r)
    return XPJ_ERR_NOMEM;
  *out = r;
  double t0 = now_ms();
  xpj_compile_opts o;
  if (opts)
    o = *opts;
  else
    xpj_compile_opts_default(&o);
  if (!m || !kernel || !t) {
    result_fail(r, XPJ_ERR_INVALID, XPJ_FAILURE_INPUT,
                "xpj_compile: module, kernel and target are required");
    return r->status;
  }
  if (o.opt_level > 3 || (unsigned)emit > XPJ_EMIT_LLVM ||
      (unsigned)t->kind > XPJ_TARGET_CPU || (o.checks & ~XPJ_CHECK_ALL) ||
      (unsigned)o.isolation > XPJ_ISOLATE_NONE) {
    result_fail(r, XPJ_ERR_INVALID, XPJ_FAILURE_INPUT,
                "xpj_compile: bad optimisation level, checks, isolation, "
                "output kind or target");
    return r->status;
  }
  const xpj_func *k = xpj_module_find(m, kernel);
  if (!k || k->kind == XPJ_FUNC_DEVICE) {
    char msg[300];
    snprintf(msg, sizeof msg, "no kernel named '%s'", kernel);
    result_fail(r, XPJ_ERR_NOT_FOUND, XPJ_FAILURE_INPUT, msg);
    return r->status;
  }
  const xpj_func *g = xpj_generic_reachable(m, k);
  if (g) {
    char msg[300];
    if (g == k)
      snprintf(msg, sizeof msg, "kernel '%s' is generic: specialise it "
               "first (xpj_specialize)", kernel);
    else
      snprintf(msg, sizeof msg, "kernel '%s' calls the generic function "
               "'%s': specialise the kernel first (xpj_specialize)", kernel,
               g->name);
    result_fail(r, XPJ_ERR_INVALID, XPJ_FAILURE_INPUT, msg);
    return r->status;
  }
  char note[200];
  xpj_job j = {m, k, t, o, emit, "", memory_limit(&o, note, sizeof note),
               "", "", false};
  xpj_entry_name(kernel, j.entry, sizeof j.entry);
  const char *libdevice = t->kind == XPJ_TARGET_PTX ? xpj_libdevice_path()
                                                    : NULL;
  snprintf(j.libdevice, sizeof j.libdevice, "%s", libdevice ? libdevice : "");
  r->entry = strdup(j.entry);
  if (!r->entry) {
    result_fail(r, XPJ_ERR_NOMEM, XPJ_FAILURE_MEMORY, "out of memory");
    return r->status;
  }
  /* SPIR-V always runs in a fresh process: the 22.1.8 backend keeps state
   * between modules (../shared/LLVM22-NOTES.md) */
  if (o.isolation == XPJ_ISOLATE_NONE && t->kind != XPJ_TARGET_SPIRV) {
    const xpj_llvm_api *api = llvm_for(r);
    if (api) {
      pthread_rwlock_rdlock(&inprocess_lock);
      api->compile(&j, r);
      pthread_rwlock_unlock(&inprocess_lock);
    }
  } else {
    /* Test hook for the isolation tests (docs/testing.md): the worker
     * crashes, hangs or hits an LLVM fatal error on purpose. Never set in
     * production. */
    const char *f = getenv("XPJIT_FAULT_INJECT");
    snprintf(j.fault, sizeof j.fault, "%s", f ? f : "");
    compile_isolated(&j, r);
  }
  if (r->status == XPJ_OK && note[0]) {
    free(r->log);
    r->log = strdup(note); /* a warning; NULL (none) if memory is short */
  }
  r->millis = now_ms() - t0;
  return r->status;
}

void xpj_llvm_enter(void) {
  llvm_for(NULL);
  pthread_rwlock_rdlock(&inprocess_lock);
}

void xpj_llvm_leave(void) { pthread_rwlock_unlock(&inprocess_lock); }

int xpj_llvm_fork_begin(char *why, size_t whysize) {
  const xpj_llvm_api *api = xpj_llvm(why, whysize);
  if (!api)
    return -1;
  api->init();
  pthread_rwlock_wrlock(&inprocess_lock);
  return 0;
}

void xpj_llvm_fork_end(bool child) {
  /* the child is another thread, which cannot unlock the parent's lock: a
   * fresh lock (the child has one thread) */
  if (child)
    pthread_rwlock_init(&inprocess_lock, NULL);
  else
    pthread_rwlock_unlock(&inprocess_lock);
}
