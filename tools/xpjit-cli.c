/*
 * xpjit-cli - the command-line tool: check kernel sources, print the IR of
 * a specialised kernel and its content hash, compile it, list devices, and
 * (cli_cache.c, cli_daemon.c) maintain the cache, bundles and the daemon.
 * The commands are one table; each reads its arguments with getopt_long
 * (cli_args.c). Exit status: 0 success, 1 errors in the input, 2 usage
 * errors.
 */
#include "cli.h"
#include "env.h" /* the table of XPJIT_* variables */
#include "xpjit.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *cli_prog = "xpjit-cli";

/* options with a long name only, of the commands in this file */
enum {
  OPT_KERNEL = CLI_LONG,
  OPT_DTYPE,
  OPT_CONST,
  OPT_NDIM,
  OPT_HASH,
  OPT_TARGET,
  OPT_EMIT,
  OPT_FAST_MATH,
  OPT_FP_CONTRACT,
  OPT_CHECK,
  OPT_NO_ISOLATE,
  OPT_TIMEOUT,
  OPT_JSON,
  OPT_ALL,
  OPT_MARKDOWN,
};

/* The options every command takes, for the usages (at column 20). */
#define COMMON_HELP                                                           \
  "  --color=WHEN      auto (colour on a terminal, unless NO_COLOR is set),\n" \
  "                    always or never\n"                                     \
  "  -h, --help        this text; --version: the version\n"

/* ---- check ----------------------------------------------------------------- */

static void usage_check(FILE *out) {
  fprintf(out,
          "usage: %s check [OPTIONS] FILE...\n"
          "\n"
          "Parses and checks each kernel source file and prints diagnostics\n"
          "(file:line:col: error: message, the source line and a caret) on\n"
          "standard error. Generic kernels are checked for every possible\n"
          "binding; a specialisation can still fail (see 'ir').\n"
          "\n" COMMON_HELP
          "\n"
          "Exit status: 0 when every file is clean, 1 on errors, 2 on usage\n"
          "errors.\n",
          cli_prog);
}

static int check_file(const char *file) {
  xpj_module *m = NULL;
  xpj_diags *d = NULL;
  if (xpj_module_create(&m) != XPJ_OK || xpj_diags_create(&d) != XPJ_OK) {
    fprintf(stderr, "%s: out of memory\n", cli_prog);
    xpj_module_destroy(m);
    return EXIT_INPUT;
  }
  xpj_status st = xpj_parse_file(m, file, d);
  cli_print_diags(d);
  if (st == XPJ_ERR_NOMEM)
    fprintf(stderr, "%s: %s: out of memory\n", cli_prog, file);
  xpj_diags_destroy(d);
  xpj_module_destroy(m);
  return st == XPJ_OK ? 0 : EXIT_INPUT;
}

static int cmd_check(int argc, char **argv) {
  cli_args a;
  cli_args_init(&a, "check", usage_check, NULL, argc, argv);
  const char **files = calloc((size_t)argc, sizeof *files);
  if (!files) {
    fprintf(stderr, "%s: out of memory\n", cli_prog);
    return EXIT_INPUT;
  }
  unsigned nfiles = 0;
  while (cli_next(&a) == CLI_OPERAND) /* check has no options of its own */
    files[nfiles++] = a.arg;
  int rc = a.exited ? a.status : 0;
  if (!a.exited && !nfiles)
    rc = cli_usage_error(&a, "no input files");
  for (unsigned i = 0; i < nfiles && !a.exited; i++)
    if (check_file(files[i]))
      rc = EXIT_INPUT;
  free(files);
  return rc;
}

/* ---- ir and emit: a kernel specialised ------------------------------------ */

/* Kernel of file, parsed and specialised with the bindings (kernel NULL:
 * parsed only); diagnostics printed, specialisation errors tied to the
 * file. *m and *spec are the caller's to destroy. 0 or EXIT_INPUT. */
static int specialise(const char *file, const char *kernel,
                      const cli_bindings *bs, unsigned ndim, xpj_module **m,
                      xpj_module **spec) {
  xpj_diags *d = NULL;
  *spec = NULL;
  if (xpj_module_create(m) != XPJ_OK || xpj_diags_create(&d) != XPJ_OK) {
    fprintf(stderr, "%s: out of memory\n", cli_prog);
    return EXIT_INPUT;
  }
  xpj_status st = xpj_parse_file(*m, file, d);
  cli_spec cs;
  if (st == XPJ_OK && kernel &&
      cli_bindings_spec(bs, *m, kernel, file, ndim, &cs) != 0) {
    xpj_diags_destroy(d);
    return EXIT_INPUT;
  }
  if (st == XPJ_OK && kernel)
    st = xpj_specialize(*m, kernel, &cs.spec, spec, d);
  /* errors of the binding, not of a line, name the file */
  xpj_diags *shown = NULL;
  if (xpj_diags_create(&shown) == XPJ_OK) {
    for (unsigned i = 0; i < xpj_diags_count(d); i++) {
      xpj_diag g;
      xpj_diags_get(d, i, &g);
      xpj_diags_add(shown, g.severity, *g.file ? g.file : file, g.line,
                    g.col, g.source, g.message);
    }
  }
  cli_print_diags(shown ? shown : d);
  xpj_diags_destroy(shown);
  xpj_diags_destroy(d);
  if (st == XPJ_ERR_NOMEM)
    fprintf(stderr, "%s: out of memory\n", cli_prog);
  return st == XPJ_OK ? 0 : EXIT_INPUT;
}

static int ndim_value(const cli_args *a, unsigned *ndim) {
  long n;
  if (!cli_number(a->arg, 1, XPJ_MAX_RANK, &n))
    return cli_bad_value(a, "--ndim takes 1 to %d, not '%s'", XPJ_MAX_RANK,
                         a->arg);
  *ndim = (unsigned)n;
  return 0;
}

/* ---- ir ---------------------------------------------------------------------- */

static void usage_ir(FILE *out) {
  fprintf(out,
          "usage: %s ir FILE [--kernel NAME] [--dtype T=TYPE]... "
          "[--const N=VALUE]...\n"
          "          [--ndim N] [--hash] [-o OUT]\n"
          "\n"
          "Without --kernel: prints the generic IR of every function in FILE.\n"
          "With --kernel: specialises the kernel (one --dtype per type\n"
          "parameter, e.g. --dtype T=f32 --dtype U=i64, or by position:\n"
          "--dtype f32,i64; one --const per const parameter, e.g. --const\n"
          "TS=16; --ndim for kernels with arrays of generic rank [*]), prints\n"
          "its IR and, on the last line, its canonical content hash:\n"
          "; sha256 HEX\n"
          "\n"
          "  --kernel NAME     the kernel to specialise\n"
          "  --dtype T=TYPE    a type parameter's type\n"
          "  --const N=VALUE   a const parameter's value\n"
          "  --ndim N          the rank of [*] arrays, 1 to %d\n"
          "  --hash            print only the hash\n"
          "  -o, --output OUT  write to OUT ('-': standard output)\n" COMMON_HELP
          "\n"
          "Types: bool i8 i16 i32 i64 u8 u16 u32 u64 f16 bf16 f32 f64.\n"
          "Const values: decimal or 0x hexadecimal with an optional sign, or\n"
          "true/false; they must fit the parameter's type.\n"
          "Exit status: 0 success, 1 errors in the input, 2 usage errors.\n",
          cli_prog, XPJ_MAX_RANK);
}

/* The IR of show (and the hash of kernel in it) to outpath (NULL or "-":
 * standard output; a file is written whole or not at all). */
static int write_ir(const xpj_module *show, const char *kernel,
                    const char *outpath, bool hash_only) {
  char *text = NULL, hex[65];
  if (!hash_only && xpj_module_print(show, &text, NULL) != XPJ_OK) {
    fprintf(stderr, "%s: out of memory\n", cli_prog);
    return EXIT_INPUT;
  }
  if (kernel && xpj_module_hash(show, kernel, NULL, hex) != XPJ_OK) {
    fprintf(stderr, "%s: cannot hash kernel\n", cli_prog);
    free(text);
    return EXIT_INPUT;
  }
  size_t n = text ? strlen(text) : 0;
  char *all = malloc(n + 80);
  if (!all) {
    fprintf(stderr, "%s: out of memory\n", cli_prog);
    free(text);
    return EXIT_INPUT;
  }
  memcpy(all, text ? text : "", n);
  if (kernel)
    n += (size_t)sprintf(all + n, hash_only ? "%s\n" : "; sha256 %s\n", hex);
  free(text);
  int rc = cli_write_output("ir", outpath ? outpath : "-", all, n, NULL);
  free(all);
  return rc;
}

static int cmd_ir(int argc, char **argv) {
  static const cli_opt opts[] = {
      {"kernel", OPT_KERNEL, true}, {"dtype", OPT_DTYPE, true},
      {"const", OPT_CONST, true},   {"ndim", OPT_NDIM, true},
      {"hash", OPT_HASH, false},    {"output", 'o', true},
      {0},
  };
  cli_args a;
  cli_args_init(&a, "ir", usage_ir, opts, argc, argv);
  cli_bindings bs;
  cli_bindings_init(&bs, &a, false);
  const char *file = NULL, *kernel = NULL, *outpath = NULL;
  unsigned ndim = 0;
  bool hash_only = false;
  int rc = 0, k;
  while (!rc && (k = cli_next(&a)) >= 0) {
    switch (k) {
    case OPT_KERNEL: kernel = a.arg; break;
    case OPT_DTYPE: rc = cli_bindings_add(&bs, false, a.arg); break;
    case OPT_CONST: rc = cli_bindings_add(&bs, true, a.arg); break;
    case OPT_NDIM: rc = ndim_value(&a, &ndim); break;
    case OPT_HASH: hash_only = true; break;
    case 'o': outpath = a.arg; break;
    case CLI_OPERAND:
      if (file)
        rc = cli_bad_value(&a, "only one input file is allowed");
      file = a.arg;
      break;
    }
  }
  if (!rc && !a.exited && !file)
    rc = cli_usage_error(&a, "no input file");
  if (!rc && !a.exited && cli_same_file(file, outpath))
    rc = cli_bad_value(&a, "-o %s is the input file", outpath);
  if (!rc && !a.exited && !kernel && (bs.n || ndim || hash_only))
    rc = cli_bad_value(&a, "--dtype, --const, --ndim and --hash need "
                           "--kernel");
  xpj_module *m = NULL, *spec = NULL;
  if (!rc && !a.exited)
    rc = specialise(file, kernel, &bs, ndim, &m, &spec);
  if (!rc && !a.exited)
    rc = write_ir(kernel ? spec : m, kernel, outpath, hash_only);
  xpj_module_destroy(spec);
  xpj_module_destroy(m);
  cli_bindings_free(&bs);
  return a.exited ? a.status : rc;
}

/* ---- emit ---------------------------------------------------------------------- */

static void usage_emit(FILE *out) {
  fprintf(out,
          "usage: %s emit FILE --kernel NAME [--dtype T=TYPE]... "
          "[--const N=VALUE]...\n"
          "          [--ndim N]\n"
          "          --target spirv[:1.N]|ptx:sm_XX[:ptxNN]|cpu[:CPU]\n"
          "          [-O0|-O1|-O2|-O3] [--fast-math] [--fp-contract] [-g]\n"
          "          [--check=bounds]\n"
          "          [--emit llvm|asm|bin] [-o OUT] [--no-isolate] "
          "[--timeout MS]\n"
          "\n"
          "Specialises the kernel (--dtype, --const and --ndim as for 'ir') and\n"
          "compiles it through LLVM.\n"
          "  --target TGT      spirv (SPIR-V 1.2, OpenCL/Level Zero), ptx:sm_90\n"
          "                    (CUDA), cpu (this machine), cpu:x86-64 (portable)\n"
          "  --emit KIND       bin: SPIR-V binary, PTX text or ELF object "
          "(default)\n"
          "                    asm: SPIR-V disassembly, PTX, x86-64 assembly\n"
          "                    llvm: the optimised LLVM IR\n"
          "  -O N              optimisation level 0 to 3 (default -O2)\n"
          "  --fast-math       allow approximate math and reassociation\n"
          "  --fp-contract     fuse a * b + c into fma (one rounding), nothing\n"
          "                    else of --fast-math\n"
          "  -g                line tables (CPU, PTX)\n"
          "  --check=bounds    check every array index (one more hidden\n"
          "                    argument, docs/abi.md; the runtime reports the\n"
          "                    first violation); XPJIT_CHECK is not read\n"
          "  -o, --output OUT  output file ('-': standard output, the "
          "default)\n"
          "  --no-isolate      compile in this process instead of a worker\n"
          "                    (PTX, CPU)\n"
          "  --timeout MS      kill the compile worker after MS milliseconds\n"
          "                    (not with --no-isolate)\n" COMMON_HELP
          "\n"
          "The worker's memory is limited by XPJIT_COMPILE_MEMORY_LIMIT (e.g.\n"
          "512M, 4G, off; default 4G or half the RAM).\n"
          "SPIR-V is validated (SPIRV-Tools) before it is written.\n"
          "Exit status: 0 success, 1 errors in the input or the compile, 2 usage\n"
          "errors.\n",
          cli_prog);
}

static int emit_kind(const cli_args *a, xpj_emit_kind *out) {
  static const struct {
    const char *name;
    xpj_emit_kind kind;
  } kinds[] = {{"bin", XPJ_EMIT_BIN}, {"asm", XPJ_EMIT_ASM},
               {"llvm", XPJ_EMIT_LLVM}};
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
    if (!strcmp(a->arg, kinds[i].name)) {
      *out = kinds[i].kind;
      return 0;
    }
  return cli_bad_value(a, "--emit takes llvm, asm or bin, not '%s'", a->arg);
}

/* The compiled kernel's bytes to outpath ("-": standard output; a file
 * is written whole or not at all). */
static int write_binary(const xpj_result *r, const char *outpath) {
  size_t len;
  const uint8_t *data = xpj_result_data(r, &len);
  return cli_write_output("emit", outpath, data, len, NULL);
}

static int cmd_emit(int argc, char **argv) {
  static const cli_opt opts[] = {
      {"kernel", OPT_KERNEL, true},   {"dtype", OPT_DTYPE, true},
      {"const", OPT_CONST, true},     {"ndim", OPT_NDIM, true},
      {"target", OPT_TARGET, true},   {"emit", OPT_EMIT, true},
      {"output", 'o', true},          {NULL, 'O', true},
      {"fast-math", OPT_FAST_MATH, false}, {NULL, 'g', false},
      {"fp-contract", OPT_FP_CONTRACT, false},
      {"check", OPT_CHECK, true},     {"no-isolate", OPT_NO_ISOLATE, false},
      {"timeout", OPT_TIMEOUT, true}, {0},
  };
  cli_args a;
  cli_args_init(&a, "emit", usage_emit, opts, argc, argv);
  cli_bindings bs;
  cli_bindings_init(&bs, &a, false);
  const char *file = NULL, *kernel = NULL, *outpath = "-", *tstr = NULL;
  unsigned ndim = 0;
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  xpj_emit_kind emit = XPJ_EMIT_BIN;
  bool timeout_given = false;
  char err[256];
  long n;
  int rc = 0, k;
  while (!rc && (k = cli_next(&a)) >= 0) {
    switch (k) {
    case OPT_KERNEL: kernel = a.arg; break;
    case OPT_DTYPE: rc = cli_bindings_add(&bs, false, a.arg); break;
    case OPT_CONST: rc = cli_bindings_add(&bs, true, a.arg); break;
    case OPT_NDIM: rc = ndim_value(&a, &ndim); break;
    case OPT_TARGET: tstr = a.arg; break;
    case OPT_EMIT: rc = emit_kind(&a, &emit); break;
    case 'o': outpath = a.arg; break;
    case 'O':
      if (cli_number(a.arg, 0, 3, &n))
        o.opt_level = (unsigned)n;
      else
        rc = cli_bad_value(&a, "-O takes 0, 1, 2 or 3, not '%s'", a.arg);
      break;
    case OPT_FAST_MATH: o.fast_math = 1; break;
    case OPT_FP_CONTRACT: o.fp_contract = 1; break;
    case 'g': o.debug_info = 1; break;
    case OPT_CHECK: rc = cli_checks_value(&a, &o.checks); break;
    case OPT_NO_ISOLATE: o.isolation = XPJ_ISOLATE_NONE; break;
    case OPT_TIMEOUT:
      if (cli_number(a.arg, 1, 86400000, &n))
        o.timeout_ms = (unsigned)n;
      else
        rc = cli_bad_value(&a, "--timeout takes milliseconds from 1 to "
                               "86400000, not '%s'", a.arg);
      timeout_given = true;
      break;
    case CLI_OPERAND:
      if (file)
        rc = cli_bad_value(&a, "only one input file is allowed");
      file = a.arg;
      break;
    }
  }
  if (rc || a.exited) {
    cli_bindings_free(&bs);
    return a.exited ? a.status : rc;
  }
  xpj_target tgt;
  if (!file || !kernel || !tstr)
    rc = cli_usage_error(&a, "%s is required", !file     ? "an input file"
                                                : !kernel ? "--kernel"
                                                          : "--target");
  else if (timeout_given && o.isolation == XPJ_ISOLATE_NONE)
    /* nothing can stop a compile in this process's own thread */
    rc = cli_bad_value(&a, "--timeout bounds the compile worker, and "
                           "--no-isolate compiles without one: use one or "
                           "the other");
  else if (!cli_target_ok(tstr, &tgt, err, sizeof err))
    rc = cli_bad_value(&a, "%s", err);
  else if (cli_same_file(file, outpath))
    rc = cli_bad_value(&a, "-o %s is the input file", outpath);
  else if (!strcmp(outpath, "-") && emit == XPJ_EMIT_BIN &&
           tgt.kind != XPJ_TARGET_PTX && isatty(1))
    rc = cli_bad_value(&a, "not writing binary output to a terminal; use "
                           "-o FILE or --emit asm");
  xpj_module *m = NULL, *spec = NULL;
  xpj_result *r = NULL;
  if (!rc)
    rc = specialise(file, kernel, &bs, ndim, &m, &spec);
  xpj_status st = rc ? XPJ_OK : xpj_compile(spec, kernel, &tgt, &o, emit, &r);
  if (st != XPJ_OK) {
    cli_diag(XPJ_SEV_ERROR, file, "%s: %s", xpj_status_name(st),
             xpj_result_log(r));
    rc = EXIT_INPUT;
  } else if (!rc && *xpj_result_log(r)) {
    cli_diag(XPJ_SEV_WARNING, file, "%s", xpj_result_log(r));
  }
  if (!rc)
    rc = write_binary(r, outpath);
  xpj_result_destroy(r);
  xpj_module_destroy(spec);
  xpj_module_destroy(m);
  cli_bindings_free(&bs);
  return rc;
}

/* ---- devices ------------------------------------------------------------------ */

static void usage_devices(FILE *out) {
  fprintf(out,
          "usage: %s devices [FILTER] [-v|--verbose] [--json]\n"
          "\n"
          "Lists the devices xpjit can use, one per line, as\n"
          "  [ID] TYPE NAME (VENDOR), target, compute units, memory, driver\n"
          "with every property under -v. FILTER selects devices like\n"
          "XPJIT_DEVICE: cpu, cuda:0, level_zero:gpu, opencl:cpu, *:gpu, ...\n"
          "The device marked '*' is the default one.\n"
          "\n"
          "  -v, --verbose     every property, and why a backend has no device\n"
          "  --json            one JSON object: the devices with every\n"
          "                    property, and why each backend without devices\n"
          "                    has none\n" COMMON_HELP
          "\n"
          "Exit status: 0 success (also when no device matches), 1 when the\n"
          "runtime cannot start, 2 on usage errors (a malformed filter).\n",
          cli_prog);
}

static const char *type_name(xpj_device_type t) {
  return t == XPJ_DEVICE_GPU ? "gpu" : t == XPJ_DEVICE_CPU ? "cpu" : "acc";
}

static json_t *jint3(const uint64_t v[3]) {
  return json_pack("[ooo]", cli_jint(v[0]), cli_jint(v[1]), cli_jint(v[2]));
}

static json_t *device_json(xpj_device *dev, bool is_default) {
  xpj_device_info in;
  xpj_device_get_info(dev, &in);
  return json_pack(
      "{s:o, s:b, s:s, s:s, s:o, s:o, s:o, s:o, s:I, s:o, s:o, s:o, s:o, "
      "s:o, s:o}",
      "id", cli_jstr(xpj_device_id(dev)), "default", is_default, "backend",
      xpj_backend_name(in.backend), "type", type_name(in.type), "name",
      cli_jstr(in.name), "vendor", cli_jstr(in.vendor), "driver",
      cli_jstr(in.driver_version), "target", cli_jstr(in.target),
      "compute_units", (json_int_t)in.compute_units, "global_mem_size",
      cli_jint(in.global_mem_size), "local_mem_size",
      cli_jint(in.local_mem_size), "max_work_group_size",
      cli_jint(in.max_work_group_size), "max_work_item_sizes",
      jint3(in.max_work_item_sizes), "max_global_size",
      jint3(in.max_global_size), "mem_base_align",
      cli_jint(in.mem_base_align));
}

static int devices_json(xpj_context *ctx, xpj_device **devs, unsigned n,
                        const xpj_device *def) {
  json_t *list = json_array(), *why = json_object();
  bool ok = list && why;
  for (unsigned i = 0; ok && i < n; i++)
    ok = json_array_append_new(list, device_json(devs[i], devs[i] == def)) ==
         0;
  for (int b = 0; ok && b < XPJ_BACKEND_COUNT; b++) {
    const char *note = xpj_context_backend_note(ctx, (xpj_backend)b);
    if (*note)
      ok = cli_jset(why, xpj_backend_name((xpj_backend)b), cli_jstr(note));
  }
  if (!ok) {
    json_decref(list);
    json_decref(why);
    return cli_json_print(NULL);
  }
  return cli_json_print(json_pack("{s:o, s:o}", "devices", list,
                                  "unavailable", why));
}

static void device_text(xpj_device *dev, bool is_default, bool verbose) {
  xpj_device_info in;
  xpj_device_get_info(dev, &in);
  /* the target without the CPU's feature list: "cpu:znver4", "spirv:1.2" */
  int tlen = (int)strcspn(in.target, ",");
  const char *c2 = strchr(in.target, ':');
  if (c2 && (c2 = strchr(c2 + 1, ':')))
    tlen = (int)(c2 - in.target);
  printf("%s%c%s%s[%s]%s %s %s (%s), %.*s, %u compute units, %.1f GiB, "
         "local %llu KiB, driver %s\n",
         cli_sgr(stdout, SGR_GREEN), is_default ? '*' : ' ',
         cli_sgr(stdout, SGR_RESET), cli_sgr(stdout, SGR_BOLD),
         xpj_device_id(dev), cli_sgr(stdout, SGR_RESET), type_name(in.type),
         in.name, in.vendor, tlen, in.target, in.compute_units,
         in.global_mem_size / (1024.0 * 1024 * 1024),
         (unsigned long long)(in.local_mem_size / 1024), in.driver_version);
  if (!verbose)
    return;
  printf("    backend             %s\n", xpj_backend_name(in.backend));
  printf("    driver              %s\n", in.driver_version);
  printf("    max work-group size %llu\n",
         (unsigned long long)in.max_work_group_size);
  printf("    max work-item sizes %llu %llu %llu\n",
         (unsigned long long)in.max_work_item_sizes[0],
         (unsigned long long)in.max_work_item_sizes[1],
         (unsigned long long)in.max_work_item_sizes[2]);
  printf("    global memory       %llu bytes\n",
         (unsigned long long)in.global_mem_size);
  printf("    local memory        %llu bytes\n",
         (unsigned long long)in.local_mem_size);
  printf("    target              %s\n", in.target);
}

static int cmd_devices(int argc, char **argv) {
  static const cli_opt opts[] = {
      {"verbose", 'v', false},
      {"json", OPT_JSON, false},
      {0},
  };
  cli_args a;
  cli_args_init(&a, "devices", usage_devices, opts, argc, argv);
  const char *filter = NULL;
  bool verbose = false, json = false;
  int rc = 0, k;
  while (!rc && (k = cli_next(&a)) >= 0) {
    switch (k) {
    case 'v': verbose = true; break;
    case OPT_JSON: json = true; break;
    case CLI_OPERAND:
      if (filter)
        rc = cli_usage_error(&a, "one FILTER at most");
      filter = a.arg;
      break;
    }
  }
  if (rc || a.exited)
    return a.exited ? a.status : rc;
  xpj_context *ctx;
  if (xpj_context_create(NULL, &ctx) != XPJ_OK) {
    cli_error(NULL, "%s", xpj_last_error());
    return EXIT_INPUT;
  }
  unsigned n = 0;
  if (xpj_device_list(ctx, filter, NULL, 0, &n) != XPJ_OK) {
    cli_error(NULL, "%s", xpj_last_error());
    xpj_context_destroy(ctx);
    return EXIT_USAGE;
  }
  xpj_device **devs = calloc(n ? n : 1, sizeof *devs);
  xpj_device *def = NULL;
  xpj_device_select(ctx, NULL, &def);
  if (!devs || xpj_device_list(ctx, filter, devs, n, &n) != XPJ_OK) {
    cli_error(NULL, "out of memory");
    rc = EXIT_INPUT;
  } else if (json) {
    rc = devices_json(ctx, devs, n, def);
  } else {
    for (unsigned i = 0; i < n; i++)
      device_text(devs[i], devs[i] == def, verbose);
    if (n == 0)
      printf("no devices%s%s\n", filter ? " match " : "",
             filter ? filter : "");
    for (int b = 0; (verbose || n == 0) && b < XPJ_BACKEND_COUNT; b++) {
      const char *note = xpj_context_backend_note(ctx, (xpj_backend)b);
      if (*note) /* why a backend has none */
        printf("  %s: %s\n", xpj_backend_name((xpj_backend)b), note);
    }
  }
  free(devs);
  xpj_context_destroy(ctx);
  return rc;
}

/* ---- env -------------------------------------------------------------------- */

static void usage_env(FILE *out) {
  fprintf(out,
          "usage: %s env [--all] [--markdown]\n"
          "\n"
          "Lists the environment variables the library and xpjitd read, each\n"
          "with its value here (or its default when unset) and its effect;\n"
          "--all adds those of the Python package, the examples, the tools\n"
          "and the tests. XPJIT_* names nothing reads (typos) are listed\n"
          "last and make the exit status 1. --markdown prints the table of\n"
          "docs/environment.md (every variable) instead.\n"
          "\n"
          "  --all             every variable, not only the library's and\n"
          "                    xpjitd's\n"
          "  --markdown        the table of docs/environment.md\n" COMMON_HELP,
          cli_prog);
}

static void env_markdown(void) {
  printf("| variable | default | values | effect | read by |\n"
         "|---|---|---|---|---|\n");
  for (size_t i = 0; i < xpj_env_nvars; i++) {
    const xpj_env_var *v = &xpj_env_vars[i];
    printf("| `%s` | %s | %s | %s | %s |\n", v->name, v->dflt, v->values,
           v->effect, v->reader);
  }
}

static int env_list(bool all) {
  for (size_t i = 0; i < xpj_env_nvars; i++) {
    const xpj_env_var *v = &xpj_env_vars[i];
    bool ours = !strcmp(v->reader, "library") || strstr(v->reader, "xpjitd");
    if (!ours && !all)
      continue;
    const char *val = getenv(v->name);
    if (val) { /* the user's bytes: no escape sequence reaches a terminal */
      printf("%s=", v->name);
      cli_print_clean(val);
      putchar('\n');
    } else
      printf("%s (unset: %s)\n", v->name, v->dflt);
    printf("    %s. Values: %s.%s%s\n", v->effect, v->values,
           ours ? "" : " Read by: ", ours ? "" : v->reader);
  }
  size_t n = xpj_env_unknown(NULL, 0);
  if (!n)
    return 0;
  char *unknown = malloc(n + 1);
  if (!unknown) {
    cli_error(NULL, "out of memory");
    return EXIT_INPUT;
  }
  xpj_env_unknown(unknown, n + 1);
  fputs("not read by xpjit: ", stdout);
  cli_print_clean(unknown);
  putchar('\n');
  free(unknown);
  return EXIT_INPUT;
}

static int cmd_env(int argc, char **argv) {
  static const cli_opt opts[] = {
      {"all", OPT_ALL, false},
      {"markdown", OPT_MARKDOWN, false},
      {0},
  };
  cli_args a;
  cli_args_init(&a, "env", usage_env, opts, argc, argv);
  bool all = false, md = false;
  int rc = 0, k;
  while (!rc && (k = cli_next(&a)) >= 0) {
    switch (k) {
    case OPT_ALL: all = true; break;
    case OPT_MARKDOWN: md = true; break;
    case CLI_OPERAND: rc = cli_usage_error(&a, "no operands"); break;
    }
  }
  if (rc || a.exited)
    return a.exited ? a.status : rc;
  if (md) {
    env_markdown();
    return 0;
  }
  return env_list(all);
}

/* ---- the commands ------------------------------------------------------------- */

static int cmd_help(int argc, char **argv);

static const struct command {
  const char *name;
  int (*run)(int argc, char **argv); /* argv[0] is the command's word */
  const char *summary;
} commands[] = {
    {"check", cmd_check, "check kernel sources; print diagnostics"},
    {"ir", cmd_ir, "print a kernel's IR, specialised, and its content hash"},
    {"emit", cmd_emit, "compile a kernel to SPIR-V, PTX or a CPU object"},
    {"devices", cmd_devices, "list the devices of every backend"},
    {"cache", cli_cache, "inspect and maintain the compile cache"},
    {"bundle", cli_bundle, "build, list, verify, import kernel bundles"},
    {"daemon", cli_daemon, "the compile daemon xpjitd: status, stats, stop"},
    {"env", cmd_env, "the XPJIT_* environment variables and their effects"},
    {"help", cmd_help, "this text, or a command's (help COMMAND)"},
};
#define NCOMMANDS (sizeof commands / sizeof *commands)

static void usage_main(FILE *out) {
  fprintf(out, "usage: %s [--color=WHEN] [--version] [--help] COMMAND "
          "[ARGS]\n\ncommands:\n", cli_prog);
  for (size_t i = 0; i < NCOMMANDS; i++)
    fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
  fprintf(out,
          "\n"
          "Every command takes --help, --version and --color=auto|always|"
          "never;\n"
          "the cache, bundle, daemon and devices commands take --json.\n"
          "Run '%s COMMAND --help' for the options of a command.\n"
          "Exit status: 0 success, 1 errors in the input, 2 usage errors.\n",
          cli_prog);
}

static const struct command *find_command(const char *name) {
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (!strcmp(commands[i].name, name))
      return &commands[i];
  return NULL;
}

static int cmd_help(int argc, char **argv) {
  cli_args a;
  cli_args_init(&a, "help", usage_main, NULL, argc, argv);
  const char *name = NULL;
  int rc = 0, k;
  while (!rc && (k = cli_next(&a)) >= 0)
    if (name)
      rc = cli_usage_error(&a, "one COMMAND at most");
    else
      name = a.arg;
  if (rc || a.exited)
    return a.exited ? a.status : rc;
  const struct command *c = name ? find_command(name) : NULL;
  if (!name || c == find_command("help")) {
    usage_main(stdout);
    return 0;
  }
  if (!c)
    return cli_usage_error(&a, "unknown command '%s'", name);
  char *args[] = {(char *)name, "--help", NULL};
  return c->run(2, args);
}

/* Standard output flushed and checked at the end, whatever the command
 * printed (a full disk, a closed pipe's reader, /dev/full): an output
 * that did not arrive is a failure, never exit 0. */
static int finish_stdout(int rc) {
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "%s: cannot write standard output: %s\n", cli_prog,
            strerror(errno));
    return rc ? rc : EXIT_INPUT;
  }
  return rc;
}

/* Descriptors 0-2 that the caller closed: taken by /dev/null, opened
 * for reading (so that a write to standard output fails, EBADF), never by a socket or file this process opens later
 * (a compile server's socket got descriptor 1, and the output went to it,
 * "written", exit 0). */
static void hold_std_fds(void) {
  for (int fd = 0; fd <= 2; fd++)
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      int n = open("/dev/null", O_RDONLY);
      if (n >= 0 && n != fd) {
        dup2(n, fd);
        close(n);
      }
    }
}

int main(int argc, char **argv) {
  hold_std_fds();
  /* a file size limit (ulimit -f) fails the write that passes it, which
   * each command reports (exit 1), instead of killing the process with
   * half an output written */
  signal(SIGXFSZ, SIG_IGN);
  cli_args a;
  cli_args_init(&a, "", usage_main, NULL, argc, argv);
  int k = cli_next(&a); /* the command, after --color, --help, --version */
  if (a.exited)
    return finish_stdout(a.status);
  if (k == CLI_DONE) {
    usage_main(stderr);
    return EXIT_USAGE;
  }
  const struct command *c = find_command(a.arg);
  if (!c) {
    fprintf(stderr, "%s: unknown command '%s'\n", cli_prog, a.arg);
    usage_main(stderr);
    return EXIT_USAGE;
  }
  int n;
  char **rest = cli_rest(&a, &n);
  return finish_stdout(cli_json_finish(c->run(n, rest)));
}
