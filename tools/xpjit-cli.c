/*
 * xpjit-cli - the command-line tool: check kernel sources, print the IR of
 * a specialised kernel and its content hash. Exit status: 0 success, 1
 * errors in the input, 2 usage errors.
 */
#include "cli.h"
#include "env.h" /* the table of XPJIT_* variables */
#include "xpjit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXIT_INPUT 1
#define EXIT_USAGE 2

static const char *prog = "xpjit-cli";
const char *cli_prog = "xpjit-cli";

static void usage_main(FILE *out) {
  fprintf(out,
          "usage: %s [--version] [--help] COMMAND [ARGS]\n"
          "\n"
          "commands:\n"
          "  check FILE...        check kernel sources; print diagnostics\n"
          "  ir FILE [--kernel NAME --dtype T=TYPE... --const N=VALUE... [--ndim N]]\n"
          "          [--hash]\n"
          "                       print the IR (specialised when --kernel is "
          "given)\n"
          "                       and its content hash\n"
          "  emit FILE --kernel NAME [--dtype T=TYPE]... [--const N=VALUE]...\n"
          "          [--ndim N] --target TGT\n"
          "                       compile a kernel to SPIR-V, PTX or a CPU "
          "object\n"
          "  devices [FILTER] [-v] list the devices of every backend\n"
          "  cache stats|ls|show|verify|prune|clear|export [--json]\n"
          "                       inspect and maintain the compile cache\n"
          "  bundle build|ls|verify|import\n"
          "                       precompiled kernel bundles\n"
          "  daemon status|stats|stop [--json]\n"
          "                       the compile daemon xpjitd\n"
          "  env [--all]          the XPJIT_* environment variables: set, "
          "default, effect\n"
          "\n"
          "Run '%s COMMAND --help' for the options of a command.\n"
          "Exit status: 0 success, 1 errors in the input, 2 usage errors.\n",
          prog, prog);
}

static void usage_check(FILE *out) {
  fprintf(out,
          "usage: %s check FILE...\n"
          "\n"
          "Parses and checks each kernel source file and prints diagnostics\n"
          "(file:line:col: error: message, the source line and a caret) on\n"
          "standard error. Generic kernels are checked for every possible\n"
          "binding; a specialisation can still fail (see 'ir').\n"
          "Exit status: 0 when every file is clean, 1 on errors, 2 on usage\n"
          "errors.\n",
          prog);
}

static void usage_ir(FILE *out) {
  fprintf(out,
          "usage: %s ir FILE [--kernel NAME] [--dtype T=TYPE]... [--const N=VALUE]...\n"
          "          [--ndim N] [--hash] [-o OUT]\n"
          "\n"
          "Without --kernel: prints the generic IR of every function in FILE.\n"
          "With --kernel: specialises the kernel (one --dtype per type\n"
          "parameter, e.g. --dtype T=f32 --dtype U=i64; one --const per const\n"
          "parameter, e.g. --const TS=16; --ndim for kernels with arrays of\n"
          "generic rank [*]), prints its IR and, on the last line, its\n"
          "canonical content hash:  ; sha256 HEX\n"
          "\n"
          "  --hash      print only the hash\n"
          "  -o OUT      write to OUT instead of standard output ('-': stdout)\n"
          "\n"
          "Types: bool i8 i16 i32 i64 u8 u16 u32 u64 f16 bf16 f32 f64.\n"
          "Const values: decimal or 0x hexadecimal with an optional sign, or\n"
          "true/false; they must fit the parameter's type.\n",
          prog);
}

static void usage_emit(FILE *out) {
  fprintf(out,
          "usage: %s emit FILE --kernel NAME [--dtype T=TYPE]... [--const N=VALUE]...\n"
          "          [--ndim N]\n"
          "          --target spirv[:1.N]|ptx:sm_XX[:ptxNN]|cpu[:CPU]\n"
          "          [-O0|-O1|-O2|-O3] [--fast-math] [-g] [--check=bounds]\n"
          "          [--emit llvm|asm|bin] [-o OUT] [--no-isolate] "
          "[--timeout MS]\n"
          "\n"
          "Specialises the kernel (--dtype, --const and --ndim as for 'ir') and\n"
          "compiles it through LLVM.\n"
          "  --target     spirv (SPIR-V 1.2, OpenCL/Level Zero), ptx:sm_90 (CUDA),\n"
          "               cpu (this machine), cpu:x86-64 (portable baseline)\n"
          "  --emit       bin: SPIR-V binary, PTX text or ELF object (default)\n"
          "               asm: SPIR-V disassembly, PTX, x86-64 assembly\n"
          "               llvm: the optimised LLVM IR\n"
          "  -O0..-O3     optimisation level (default -O2)\n"
          "  --fast-math  allow approximate math and reassociation\n"
          "  -g           line tables (CPU, PTX)\n"
          "  --check=bounds  check every array index (one more hidden argument,\n"
          "               docs/abi.md; the runtime reports the first violation)\n"
          "  -o OUT       output file ('-': standard output, the default)\n"
          "  --no-isolate compile in this process instead of a worker (PTX, CPU)\n"
          "  --timeout MS kill the compile worker after MS milliseconds (not\n"
          "               with --no-isolate)\n"
          "The worker's memory is limited by XPJIT_COMPILE_MEMORY_LIMIT (e.g.\n"
          "512M, 4G, off; default 4G or half the RAM).\n"
          "SPIR-V is validated (SPIRV-Tools) before it is written.\n"
          "Exit status: 0 success, 1 errors in the input or the compile, 2 usage\n"
          "errors.\n",
          prog);
}

static int print_diags(const xpj_diags *d) {
  char *text = NULL;
  if (xpj_diags_render(d, &text, NULL) != XPJ_OK) {
    fprintf(stderr, "%s: out of memory\n", prog);
    return EXIT_INPUT;
  }
  fputs(text, stderr);
  free(text);
  return 0;
}

static void usage_devices(FILE *out) {
  fprintf(out,
          "usage: %s devices [FILTER] [-v|--verbose]\n"
          "\n"
          "Lists the devices xpjit can use, one per line, as\n"
          "  [ID] TYPE NAME (VENDOR), compute units, memory\n"
          "with every property under -v. FILTER selects devices like\n"
          "XPJIT_DEVICE: cpu, cuda:0, level_zero:gpu, opencl:cpu, *:gpu, ...\n"
          "The device marked '*' is the default one.\n"
          "\n"
          "Exit status: 0 success (also when no device matches), 1 when the\n"
          "runtime cannot start, 2 on usage errors (a malformed filter).\n",
          prog);
}

static const char *type_name(xpj_device_type t) {
  return t == XPJ_DEVICE_GPU ? "gpu" : t == XPJ_DEVICE_CPU ? "cpu" : "acc";
}

static int cmd_devices(int argc, char **argv) {
  const char *filter = NULL;
  bool verbose = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage_devices(stdout);
      return 0;
    } else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose")) {
      verbose = true;
    } else if (argv[i][0] == '-' || filter) {
      usage_devices(stderr);
      return EXIT_USAGE;
    } else {
      filter = argv[i];
    }
  }
  xpj_context *ctx;
  if (xpj_context_create(NULL, &ctx) != XPJ_OK) {
    fprintf(stderr, "%s: %s\n", prog, xpj_last_error());
    return EXIT_INPUT;
  }
  unsigned n = 0;
  if (xpj_device_list(ctx, filter, NULL, 0, &n) != XPJ_OK) {
    fprintf(stderr, "%s: %s\n", prog, xpj_last_error());
    xpj_context_destroy(ctx);
    return EXIT_USAGE;
  }
  xpj_device **devs = calloc(n ? n : 1, sizeof *devs);
  xpj_device *def = NULL;
  xpj_device_select(ctx, NULL, &def);
  if (devs)
    xpj_device_list(ctx, filter, devs, n, &n);
  for (unsigned i = 0; devs && i < n; i++) {
    xpj_device_info in;
    xpj_device_get_info(devs[i], &in);
    /* the target without the CPU's feature list: "cpu:znver4", "spirv:1.2" */
    int tlen = (int)strcspn(in.target, ",");
    const char *c2 = strchr(in.target, ':');
    if (c2 && (c2 = strchr(c2 + 1, ':')))
      tlen = (int)(c2 - in.target);
    printf("%c[%s] %s %s (%s), %.*s, %u compute units, %.1f GiB, local %llu "
           "KiB, driver %s\n",
           devs[i] == def ? '*' : ' ', xpj_device_id(devs[i]),
           type_name(in.type), in.name, in.vendor, tlen, in.target,
           in.compute_units, in.global_mem_size / (1024.0 * 1024 * 1024),
           (unsigned long long)(in.local_mem_size / 1024), in.driver_version);
    if (verbose) {
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
  }
  if (n == 0)
    printf("no devices%s%s\n", filter ? " match " : "", filter ? filter : "");
  if (verbose || n == 0) { /* and why a backend has none */
    for (int b = 0; b < XPJ_BACKEND_COUNT; b++) {
      const char *note = xpj_context_backend_note(ctx, (xpj_backend)b);
      if (*note)
        printf("  %s: %s\n", xpj_backend_name((xpj_backend)b), note);
    }
  }
  free(devs);
  xpj_context_destroy(ctx);
  return 0;
}

static int cmd_check(int argc, char **argv) {
  int nfiles = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage_check(stdout);
      return 0;
    }
    if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "%s check: unknown option '%s'\n", prog, argv[i]);
      usage_check(stderr);
      return EXIT_USAGE;
    }
    nfiles++;
  }
  if (nfiles == 0) {
    fprintf(stderr, "%s check: no input files\n", prog);
    usage_check(stderr);
    return EXIT_USAGE;
  }
  int rc = 0;
  for (int i = 0; i < argc; i++) {
    xpj_module *m = NULL;
    xpj_diags *d = NULL;
    if (xpj_module_create(&m) != XPJ_OK || xpj_diags_create(&d) != XPJ_OK) {
      fprintf(stderr, "%s: out of memory\n", prog);
      xpj_module_destroy(m);
      return EXIT_INPUT;
    }
    xpj_status st = xpj_parse_file(m, argv[i], d);
    print_diags(d);
    if (st != XPJ_OK) {
      if (st == XPJ_ERR_NOMEM)
        fprintf(stderr, "%s: %s: out of memory\n", prog, argv[i]);
      rc = EXIT_INPUT;
    }
    xpj_diags_destroy(d);
    xpj_module_destroy(m);
  }
  return rc;
}

#define MAX_DTYPES 16

/* --const NAME=VALUE: kept as text until the kernel's parameter types are
 * known (bind_consts); only its form is checked here. */
typedef struct cli_consts {
  unsigned n;
  const char *names[MAX_DTYPES];
  char namebuf[MAX_DTYPES][64];
  const char *texts[MAX_DTYPES];
  int64_t values[MAX_DTYPES];
} cli_consts;

static int add_const(const char *cmd, const char *v, cli_consts *c) {
  const char *eq = strchr(v, '=');
  int64_t x;
  if (!eq || eq == v || (size_t)(eq - v) >= sizeof c->namebuf[0] ||
      !eq[1]) {
    fprintf(stderr, "%s %s: --const takes NAME=VALUE (e.g. TS=16), not "
            "'%s'\n", prog, cmd, v);
    return EXIT_USAGE;
  }
  if (xpj_const_parse(eq + 1, XPJ_I64, &x, NULL, 0) != XPJ_OK &&
      xpj_const_parse(eq + 1, XPJ_U64, &x, NULL, 0) != XPJ_OK &&
      xpj_const_parse(eq + 1, XPJ_BOOL, &x, NULL, 0) != XPJ_OK) {
    fprintf(stderr, "%s %s: --const %s: the value must be an integer "
            "(decimal or 0x hexadecimal, optional sign) or true/false\n",
            prog, cmd, v);
    return EXIT_USAGE;
  }
  if (c->n == MAX_DTYPES) {
    fprintf(stderr, "%s %s: too many --const options\n", prog, cmd);
    return EXIT_USAGE;
  }
  memcpy(c->namebuf[c->n], v, (size_t)(eq - v));
  c->namebuf[c->n][eq - v] = 0;
  c->names[c->n] = c->namebuf[c->n];
  c->texts[c->n++] = eq + 1;
  return 0;
}

/* Reads each --const value as its parameter's type. A name that is not a
 * const parameter of the kernel is left for xpj_specialize to report. */
static int bind_consts(const char *file, const xpj_module *m,
                       const char *kernel, cli_consts *c) {
  const xpj_func *f = xpj_module_find(m, kernel);
  for (unsigned i = 0; i < c->n; i++) {
    c->values[i] = 0;
    for (unsigned j = 0; f && j < xpj_func_const_count(f); j++) {
      if (strcmp(xpj_func_const_name(f, j), c->names[i]))
        continue;
      char err[160];
      if (xpj_const_parse(c->texts[i], xpj_func_const_type(f, j),
                          &c->values[i], err, sizeof err) != XPJ_OK) {
        fprintf(stderr, "%s: error: --const %s=%s: const parameter '%s' of "
                "'%s': %s\n", file, c->names[i], c->texts[i], c->names[i],
                kernel, err);
        return EXIT_INPUT;
      }
    }
  }
  return 0;
}

/* --dtype NAME=VALUE where VALUE is no type */
static void bad_dtype(const char *cmd, const char *v, const char *type) {
  fprintf(stderr, "%s %s: unknown type '%s' in --dtype %s (use bool, "
          "i8..i64, u8..u64, f16, bf16, f32 or f64; a const parameter takes --const "
          "NAME=VALUE)\n", prog, cmd, type, v);
}

static int cmd_ir(int argc, char **argv) {
  const char *file = NULL, *kernel = NULL, *outpath = NULL;
  const char *names[MAX_DTYPES];
  char namebuf[MAX_DTYPES][64];
  xpj_scalar types[MAX_DTYPES];
  unsigned ntypes = 0, ndim = 0;
  cli_consts consts;
  consts.n = 0;
  int hash_only = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage_ir(stdout);
      return 0;
    }
    if (strcmp(a, "--hash") == 0) {
      hash_only = 1;
      continue;
    }
    if (strcmp(a, "--kernel") == 0 || strcmp(a, "--dtype") == 0 ||
        strcmp(a, "--ndim") == 0 || strcmp(a, "-o") == 0 ||
        strcmp(a, "--const") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "%s ir: option '%s' needs a value\n", prog, a);
        return EXIT_USAGE;
      }
      const char *v = argv[++i];
      if (strcmp(a, "--const") == 0) {
        int rc = add_const("ir", v, &consts);
        if (rc)
          return rc;
      } else if (strcmp(a, "--kernel") == 0) {
        kernel = v;
      } else if (strcmp(a, "-o") == 0) {
        outpath = v;
      } else if (strcmp(a, "--ndim") == 0) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*v == 0 || *end || n < 1 || n > XPJ_MAX_RANK) {
          fprintf(stderr, "%s ir: --ndim must be an integer from 1 to %d, "
                  "not '%s'\n", prog, XPJ_MAX_RANK, v);
          return EXIT_USAGE;
        }
        ndim = (unsigned)n;
      } else {
        const char *eq = strchr(v, '=');
        if (!eq || eq == v || (size_t)(eq - v) >= sizeof namebuf[0]) {
          fprintf(stderr, "%s ir: --dtype takes NAME=TYPE (e.g. T=f32), not "
                  "'%s'\n", prog, v);
          return EXIT_USAGE;
        }
        if (ntypes == MAX_DTYPES) {
          fprintf(stderr, "%s ir: too many --dtype options\n", prog);
          return EXIT_USAGE;
        }
        xpj_scalar s = xpj_scalar_parse(eq + 1);
        if (s == XPJ_VOID) {
          bad_dtype("ir", v, eq + 1);
          return EXIT_USAGE;
        }
        memcpy(namebuf[ntypes], v, (size_t)(eq - v));
        namebuf[ntypes][eq - v] = 0;
        names[ntypes] = namebuf[ntypes];
        types[ntypes++] = s;
      }
      continue;
    }
    if (a[0] == '-' && a[1]) {
      fprintf(stderr, "%s ir: unknown option '%s'\n", prog, a);
      usage_ir(stderr);
      return EXIT_USAGE;
    }
    if (file) {
      fprintf(stderr, "%s ir: only one input file is allowed\n", prog);
      return EXIT_USAGE;
    }
    file = a;
  }
  if (!file) {
    fprintf(stderr, "%s ir: no input file\n", prog);
    usage_ir(stderr);
    return EXIT_USAGE;
  }
  if (!kernel && (ntypes || consts.n || ndim || hash_only)) {
    fprintf(stderr, "%s ir: --dtype, --const, --ndim and --hash need "
            "--kernel\n", prog);
    return EXIT_USAGE;
  }
  xpj_module *m = NULL, *spec = NULL;
  xpj_diags *d = NULL;
  int rc = 0;
  if (xpj_module_create(&m) != XPJ_OK || xpj_diags_create(&d) != XPJ_OK) {
    fprintf(stderr, "%s: out of memory\n", prog);
    xpj_module_destroy(m);
    return EXIT_INPUT;
  }
  xpj_status st = xpj_parse_file(m, file, d);
  const xpj_module *show = m;
  if (st == XPJ_OK && kernel && bind_consts(file, m, kernel, &consts)) {
    rc = EXIT_INPUT;
    goto done;
  }
  if (st == XPJ_OK && kernel) {
    xpj_spec sp = {ntypes, names, types, ndim, consts.n, consts.names,
                   consts.values};
    st = xpj_specialize(m, kernel, &sp, &spec, d);
    if (st != XPJ_OK && xpj_diags_count(d)) {
      /* tie spec-level errors to the file for the reader */
      xpj_diags *d2 = NULL;
      if (xpj_diags_create(&d2) == XPJ_OK) {
        for (unsigned i = 0; i < xpj_diags_count(d); i++) {
          xpj_diag g;
          xpj_diags_get(d, i, &g);
          xpj_diags_add(d2, g.severity, *g.file ? g.file : file, g.line, g.col,
                        g.source, g.message);
        }
        xpj_diags_destroy(d);
        d = d2;
      }
    }
    show = spec;
  }
  print_diags(d);
  if (st != XPJ_OK) {
    if (st == XPJ_ERR_NOMEM)
      fprintf(stderr, "%s: out of memory\n", prog);
    rc = EXIT_INPUT;
    goto done;
  }
  FILE *out = stdout;
  if (outpath && strcmp(outpath, "-") != 0) {
    out = fopen(outpath, "w");
    if (!out) {
      perror(outpath);
      rc = EXIT_INPUT;
      goto done;
    }
  }
  if (!hash_only) {
    char *text = NULL;
    if (xpj_module_print(show, &text, NULL) != XPJ_OK) {
      fprintf(stderr, "%s: out of memory\n", prog);
      rc = EXIT_INPUT;
    } else {
      fputs(text, out);
      free(text);
    }
  }
  if (kernel && rc == 0) {
    char hex[65];
    if (xpj_module_hash(show, kernel, NULL, hex) != XPJ_OK) {
      fprintf(stderr, "%s: cannot hash kernel\n", prog);
      rc = EXIT_INPUT;
    } else {
      fprintf(out, hash_only ? "%s\n" : "; sha256 %s\n", hex);
    }
  }
  if (out != stdout && fclose(out) != 0) {
    perror(outpath);
    rc = EXIT_INPUT;
  }
done:
  xpj_module_destroy(spec);
  xpj_module_destroy(m);
  xpj_diags_destroy(d);
  return rc;
}

static int parse_dtype(const char *cmd, const char *v, const char **names,
                       char (*namebuf)[64], xpj_scalar *types,
                       unsigned *ntypes) {
  const char *eq = strchr(v, '=');
  if (!eq || eq == v || (size_t)(eq - v) >= 64) {
    fprintf(stderr, "%s %s: --dtype takes NAME=TYPE (e.g. T=f32), not '%s'\n",
            prog, cmd, v);
    return EXIT_USAGE;
  }
  if (*ntypes == MAX_DTYPES) {
    fprintf(stderr, "%s %s: too many --dtype options\n", prog, cmd);
    return EXIT_USAGE;
  }
  xpj_scalar s = xpj_scalar_parse(eq + 1);
  if (s == XPJ_VOID) {
    bad_dtype(cmd, v, eq + 1);
    return EXIT_USAGE;
  }
  memcpy(namebuf[*ntypes], v, (size_t)(eq - v));
  namebuf[*ntypes][eq - v] = 0;
  names[*ntypes] = namebuf[*ntypes];
  types[(*ntypes)++] = s;
  return 0;
}

static int cmd_emit(int argc, char **argv) {
  const char *file = NULL, *kernel = NULL, *outpath = "-", *tstr = NULL;
  const char *names[MAX_DTYPES];
  char namebuf[MAX_DTYPES][64];
  xpj_scalar types[MAX_DTYPES];
  unsigned ntypes = 0, ndim = 0;
  cli_consts consts;
  consts.n = 0;
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  xpj_emit_kind emit = XPJ_EMIT_BIN;
  bool timeout_given = false;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage_emit(stdout);
      return 0;
    }
    if (strlen(a) == 3 && a[0] == '-' && a[1] == 'O' && a[2] >= '0' &&
        a[2] <= '3') {
      o.opt_level = (unsigned)(a[2] - '0');
      continue;
    }
    if (strcmp(a, "--fast-math") == 0) {
      o.fast_math = 1;
      continue;
    }
    if (strcmp(a, "-g") == 0) {
      o.debug_info = 1;
      continue;
    }
    if (strncmp(a, "--check=", 8) == 0) {
      char err[160];
      if (xpj_checks_parse(a + 8, &o.checks, err, sizeof err) != XPJ_OK) {
        fprintf(stderr, "%s emit: %s\n", prog, err);
        return EXIT_USAGE;
      }
      continue;
    }
    if (strcmp(a, "--no-isolate") == 0) {
      o.isolation = XPJ_ISOLATE_NONE;
      continue;
    }
    if (strcmp(a, "--kernel") == 0 || strcmp(a, "--dtype") == 0 ||
        strcmp(a, "--ndim") == 0 || strcmp(a, "-o") == 0 ||
        strcmp(a, "--target") == 0 || strcmp(a, "--emit") == 0 ||
        strcmp(a, "--timeout") == 0 || strcmp(a, "--const") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "%s emit: option '%s' needs a value\n", prog, a);
        return EXIT_USAGE;
      }
      const char *v = argv[++i];
      if (strcmp(a, "--const") == 0) {
        int rc = add_const("emit", v, &consts);
        if (rc)
          return rc;
      } else if (strcmp(a, "--kernel") == 0) {
        kernel = v;
      } else if (strcmp(a, "-o") == 0) {
        outpath = v;
      } else if (strcmp(a, "--target") == 0) {
        tstr = v;
      } else if (strcmp(a, "--emit") == 0) {
        if (strcmp(v, "bin") == 0)
          emit = XPJ_EMIT_BIN;
        else if (strcmp(v, "asm") == 0)
          emit = XPJ_EMIT_ASM;
        else if (strcmp(v, "llvm") == 0)
          emit = XPJ_EMIT_LLVM;
        else {
          fprintf(stderr, "%s emit: --emit takes llvm, asm or bin, not '%s'\n",
                  prog, v);
          return EXIT_USAGE;
        }
      } else if (strcmp(a, "--ndim") == 0 || strcmp(a, "--timeout") == 0) {
        char *end;
        long n = strtol(v, &end, 10);
        bool is_ndim = strcmp(a, "--ndim") == 0;
        if (*v == 0 || *end || n < 1 || n > (is_ndim ? XPJ_MAX_RANK : 86400000)) {
          fprintf(stderr, "%s emit: bad value '%s' for %s\n", prog, v, a);
          return EXIT_USAGE;
        }
        if (is_ndim) {
          ndim = (unsigned)n;
        } else {
          o.timeout_ms = (unsigned)n;
          timeout_given = true;
        }
      } else {
        int rc = parse_dtype("emit", v, names, namebuf, types, &ntypes);
        if (rc)
          return rc;
      }
      continue;
    }
    if (a[0] == '-' && a[1]) {
      fprintf(stderr, "%s emit: unknown option '%s'\n", prog, a);
      usage_emit(stderr);
      return EXIT_USAGE;
    }
    if (file) {
      fprintf(stderr, "%s emit: only one input file is allowed\n", prog);
      return EXIT_USAGE;
    }
    file = a;
  }
  if (!file || !kernel || !tstr) {
    fprintf(stderr, "%s emit: %s is required\n", prog,
            !file ? "an input file" : !kernel ? "--kernel" : "--target");
    usage_emit(stderr);
    return EXIT_USAGE;
  }
  if (timeout_given && o.isolation == XPJ_ISOLATE_NONE) {
    /* nothing can stop a compile in this process's own thread */
    fprintf(stderr, "%s emit: --timeout bounds the compile worker, and "
            "--no-isolate compiles without one: use one or the other\n",
            prog);
    return EXIT_USAGE;
  }
  xpj_target tgt;
  char terr[256];
  if (xpj_target_parse(tstr, &tgt, terr, sizeof terr) != XPJ_OK) {
    fprintf(stderr, "%s emit: %s\n", prog, terr);
    return EXIT_USAGE;
  }
  bool to_stdout = strcmp(outpath, "-") == 0;
  bool binary = emit == XPJ_EMIT_BIN && tgt.kind != XPJ_TARGET_PTX;
  if (to_stdout && binary && isatty(1)) {
    fprintf(stderr, "%s emit: not writing binary output to a terminal; use "
            "-o FILE or --emit asm\n", prog);
    return EXIT_USAGE;
  }
  xpj_module *m = NULL, *spec = NULL;
  xpj_diags *d = NULL;
  xpj_result *r = NULL;
  int rc = 0;
  if (xpj_module_create(&m) != XPJ_OK || xpj_diags_create(&d) != XPJ_OK) {
    fprintf(stderr, "%s: out of memory\n", prog);
    xpj_module_destroy(m);
    return EXIT_INPUT;
  }
  xpj_status st = xpj_parse_file(m, file, d);
  if (st == XPJ_OK && bind_consts(file, m, kernel, &consts)) {
    rc = EXIT_INPUT;
    goto done;
  }
  if (st == XPJ_OK) {
    xpj_spec sp = {ntypes, names, types, ndim, consts.n, consts.names,
                   consts.values};
    st = xpj_specialize(m, kernel, &sp, &spec, d);
  }
  print_diags(d);
  if (st != XPJ_OK) {
    rc = EXIT_INPUT;
    goto done;
  }
  st = xpj_compile(spec, kernel, &tgt, &o, emit, &r);
  if (st != XPJ_OK) {
    fprintf(stderr, "%s: error: %s: %s\n", file, xpj_status_name(st),
            xpj_result_log(r));
    rc = EXIT_INPUT;
    goto done;
  }
  if (*xpj_result_log(r))
    fprintf(stderr, "%s: warning: %s\n", file, xpj_result_log(r));
  size_t len;
  const uint8_t *data = xpj_result_data(r, &len);
  FILE *out = to_stdout ? stdout : fopen(outpath, "wb");
  if (!out) {
    perror(outpath);
    rc = EXIT_INPUT;
    goto done;
  }
  if (fwrite(data, 1, len, out) != len)
    rc = EXIT_INPUT;
  if (out != stdout) {
    if (fclose(out) != 0)
      rc = EXIT_INPUT;
  } else if (fflush(stdout) != 0) {
    rc = EXIT_INPUT;
  }
  if (rc)
    fprintf(stderr, "%s: cannot write %s\n", prog, outpath);
done:
  xpj_result_destroy(r);
  xpj_module_destroy(spec);
  xpj_module_destroy(m);
  xpj_diags_destroy(d);
  return rc;
}

static void usage_env(FILE *out) {
  fprintf(out,
          "usage: %s env [--all] [--markdown]\n"
          "\n"
          "Lists the environment variables the library and xpjitd read, each\n"
          "with its value here (or its default when unset) and its effect;\n"
          "--all adds those of the Python package, the examples, the tools\n"
          "and the tests. XPJIT_* names nothing reads (typos) are listed\n"
          "last and make the exit status 1. --markdown prints the table of\n"
          "docs/environment.md (every variable) instead.\n",
          prog);
}

static int cmd_env(int argc, char **argv) {
  bool all = false, md = false;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--all")) {
      all = true;
    } else if (!strcmp(argv[i], "--markdown")) {
      md = true;
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage_env(stdout);
      return 0;
    } else {
      fprintf(stderr, "%s: env: unknown option '%s'\n", prog, argv[i]);
      usage_env(stderr);
      return EXIT_USAGE;
    }
  }
  if (md) {
    printf("| variable | default | values | effect | read by |\n"
           "|---|---|---|---|---|\n");
    for (size_t i = 0; i < xpj_env_nvars; i++) {
      const xpj_env_var *v = &xpj_env_vars[i];
      printf("| `%s` | %s | %s | %s | %s |\n", v->name, v->dflt, v->values,
             v->effect, v->reader);
    }
    return 0;
  }
  for (size_t i = 0; i < xpj_env_nvars; i++) {
    const xpj_env_var *v = &xpj_env_vars[i];
    bool ours = !strcmp(v->reader, "library") || strstr(v->reader, "xpjitd");
    if (!ours && !all)
      continue;
    const char *val = getenv(v->name);
    if (val)
      printf("%s=%s\n", v->name, val);
    else
      printf("%s (unset: %s)\n", v->name, v->dflt);
    printf("    %s. Values: %s.%s%s\n", v->effect, v->values,
           ours ? "" : " Read by: ", ours ? "" : v->reader);
  }
  char unknown[2048];
  xpj_env_unknown(unknown, sizeof unknown);
  if (*unknown) {
    printf("not read by xpjit: %s\n", unknown);
    return EXIT_INPUT;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage_main(stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
      strcmp(cmd, "help") == 0) {
    usage_main(stdout);
    return 0;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("xpjit-cli %s\n", xpj_version());
    return 0;
  }
  for (int i = 2; i < argc; i++)
    if (strcmp(argv[i], "--version") == 0) {
      printf("xpjit-cli %s\n", xpj_version());
      return 0;
    }
  if (strcmp(cmd, "devices") == 0)
    return cmd_devices(argc - 1, argv + 1);
  if (strcmp(cmd, "check") == 0)
    return cmd_check(argc - 2, argv + 2);
  if (strcmp(cmd, "ir") == 0)
    return cmd_ir(argc - 2, argv + 2);
  if (strcmp(cmd, "emit") == 0)
    return cmd_emit(argc - 2, argv + 2);
  if (strcmp(cmd, "cache") == 0)
    return cli_cache(argc - 2, argv + 2);
  if (strcmp(cmd, "bundle") == 0)
    return cli_bundle(argc - 2, argv + 2);
  if (strcmp(cmd, "daemon") == 0)
    return cli_daemon(argc - 2, argv + 2);
  if (strcmp(cmd, "env") == 0)
    return cmd_env(argc - 2, argv + 2);
  fprintf(stderr, "%s: unknown command '%s'\n", prog, cmd);
  usage_main(stderr);
  return EXIT_USAGE;
}
