/* test_lazy_llvm.c - a program linked with libxpjit alone (not
 * libxpjit-llvm: the Makefile links this test as an application would)
 * maps libLLVM only when it compiles in its own process (docs/api.md,
 * "Where LLVM is loaded").
 *
 * Each case runs in a forked child with its own cache directory, and
 * checks /proc/self/maps for libLLVM: a kernel compiled by the compile
 * server, then found in the cache by a fresh process, run on the CPU
 * device (the ELF loader), with the host CPU read from its file; an
 * in-process compile that loads the plugin; a plugin that is missing,
 * writable by others or not a plugin, refused with a clear error; a
 * damaged or foreign host-CPU file, ignored and rewritten; none written
 * beside a cache read-only or off (the descriptor's); SPIR-V checked
 * by the validator plugin (libxpjit-spirv.so.0, SPIRV-Tools and the C++
 * runtime), loaded only then, and refused when the plugin cannot be had.
 * SQLite likewise: mapped by a process that stores a kernel, not by one
 * whose kernel comes from a hit file. */
#define _GNU_SOURCE
#include "llvm.h" /* xpj_host_cpu_fingerprint */
#include "procutil.h" /* guarded_test */
#include "spirv_check.h" /* XPJ_SPIRV_PLUGIN */
#include "xpjit.h"
#include "xpjit_codegen.h"
#include "xpjit_ir.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256];

static bool mapped(const char *name) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[1024];
  bool found = false;
  while (f && fgets(line, sizeof line, f))
    if (strstr(line, name))
      found = true;
  if (f)
    fclose(f);
  return found;
}

static bool llvm_mapped(void) { return mapped("libLLVM"); }

/* The C++ runtime, unless a sanitizer's runtime brings it anyway. */
static bool cxx_mapped(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return false;
#else
  return mapped("libstdc++");
#endif
}

/* compiler/spirv_check.h (libxpjit's, not public) */
int xpj_spirv_validate(const uint8_t *bin, size_t len, unsigned spirv_minor,
                       char *err, size_t errsize);

/* The host-CPU file in directory in, or "" */
static void host_file_in(const char *in, char *path, size_t size) {
  path[0] = 0;
  DIR *d = opendir(in);
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (!strncmp(e->d_name, "host-cpu-", 9) && !strchr(e->d_name, '.'))
      snprintf(path, size, "%s/%s", in, e->d_name);
  if (d)
    closedir(d);
}

static void host_file(char *path, size_t size) { host_file_in(dir, path, size); }

/* Whether run_axpy_in's process must have mapped SQLite (-1: either): a
 * hit from a hit file opens no database (cache/sqlite_dl.h), a process
 * that stores a kernel does. Set before in_child forks. */
static int want_sqlite = -1;

/* A context of cd (on the CPU), axpy<f32> got and run on 1000 elements.
 * Exit status: 0 right, 1 a failure; 2 when want_llvm is not what the
 * maps show afterwards. */
static int run_axpy_in(const xpj_context_desc *cd, int want_llvm) {
  xpj_context *ctx = NULL;
  if (xpj_context_create(cd, &ctx) != XPJ_OK)
    return 1;
  xpj_device *dev = xpj_device_get(ctx, 0);
  xpj_program *p = NULL;
  xpj_kernel *k = NULL;
  xpj_queue *q = NULL;
  float *x = NULL, *y = NULL;
  enum { N = 1000 };
  int rc = 1;
  if (xpj_program_create_file(ctx, "examples/axpy.xpk", NULL, &p) == XPJ_OK &&
      xpj_program_get_kernel(p, "axpy", "T=f32", 1, dev, NULL, &k) == XPJ_OK &&
      xpj_queue_create(dev, NULL, &q) == XPJ_OK &&
      xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * 4, 0, (void **)&x) == XPJ_OK &&
      xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * 4, 0, (void **)&y) == XPJ_OK) {
    for (int i = 0; i < N; i++)
      x[i] = (float)i, y[i] = 1.0f;
    xpj_array ax = xpj_array_1d(x, XPJ_F32, N), ay = xpj_array_1d(y, XPJ_F32, N);
    xpj_arg a[] = {xpj_arg_f32(2.0f), xpj_arg_array(&ax), xpj_arg_array(&ay)};
    xpj_range r = xpj_range_1d(N, 0);
    if (xpj_launch(q, k, &r, 3, a, NULL) == XPJ_OK &&
        xpj_queue_wait(q) == XPJ_OK) {
      rc = 0;
      for (int i = 0; i < N; i++)
        if (y[i] != 2.0f * (float)i + 1.0f)
          rc = 1;
    }
  }
  if (rc)
    fprintf(stderr, "run_axpy: %s\n", xpj_last_error());
  xpj_queue_destroy(q);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  if (rc == 0 && want_llvm >= 0 && llvm_mapped() != (bool)want_llvm) {
    fprintf(stderr, "run_axpy: libLLVM %s mapped\n",
            want_llvm ? "is not" : "is");
    return 2;
  }
  /* nor C++ (SPIRV-Tools is in its own plugin, loaded for SPIR-V only) */
  if (rc == 0 && !want_llvm && (cxx_mapped() || mapped("libxpjit-spirv"))) {
    fprintf(stderr, "run_axpy: the C++ runtime is mapped\n");
    return 2;
  }
  if (rc == 0 && want_sqlite >= 0 && mapped("libsqlite3") != want_sqlite) {
    fprintf(stderr, "run_axpy: libsqlite3 %s mapped\n",
            want_sqlite ? "is not" : "is");
    return 2;
  }
  return rc;
}

/* run_axpy_in with the default cache, read-write */
static int run_axpy(int want_llvm) {
  xpj_context_desc cd = {0};
  cd.visible = "cpu";
  cd.cache_mode = XPJ_CACHE_MODE_RW;
  return run_axpy_in(&cd, want_llvm);
}

/* An in-process compile of scale<f32> to PTX: 0 when it worked (and
 * LLVM is mapped then), 1 when it failed with XPJ_ERR_UNSUPPORTED and a
 * log that contains expect. */
static int compile_here(const char *expect) {
  static const char src[] =
      "kernel scale(x: global f32[], a: f32) range {\n"
      "  let i = global_id(0);\n"
      "  if i < size(x) { x[i] = x[i] * a; }\n"
      "}\n";
  xpj_module *m = NULL;
  xpj_result *r = NULL;
  xpj_target t;
  if (xpj_module_create(&m) != XPJ_OK ||
      xpj_parse(m, "scale.xpk", src, sizeof src - 1, NULL) != XPJ_OK ||
      xpj_target_parse("ptx:sm_90", &t, NULL, 0) != XPJ_OK)
    return 3;
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.isolation = XPJ_ISOLATE_NONE;
  xpj_status st = xpj_compile(m, "scale", &t, &o, XPJ_EMIT_BIN, &r);
  int rc;
  if (st == XPJ_OK)
    rc = llvm_mapped() ? 0 : 4;
  else
    rc = st == XPJ_ERR_UNSUPPORTED && expect &&
                 strstr(xpj_result_log(r), expect)
             ? 1
             : 5;
  if (rc >= 4 || (rc == 1 && !expect) || (rc == 0 && expect))
    fprintf(stderr, "compile_here: status %d, log: %s\n", st,
            r ? xpj_result_log(r) : "");
  xpj_result_destroy(r);
  xpj_module_destroy(m);
  return rc;
}

static int in_child(int (*fn)(const void *), const void *arg) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0)
    _exit(fn(arg));
  int st;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

static int axpy_child(const void *arg) { return run_axpy(*(const int *)arg); }
/* the same, ended by SIGALRM (in_child: 114) if it blocks for 60 s */
static int axpy_child_alarm(const void *arg) {
  alarm(60);
  return run_axpy(*(const int *)arg);
}
static int compile_child(const void *arg) { return compile_here(arg); }

static int setup(void **state) {
  (void)state;
  const char *base = getenv("XPJIT_CACHE_DIR");
  snprintf(dir, sizeof dir, "%s/lazy-llvm.%d", base ? base : "/tmp",
           (int)getpid());
  mkdir(base ? base : "/tmp", 0700);
  if (mkdir(dir, 0700) != 0 && errno != EEXIST)
    return -1;
  setenv("XPJIT_CACHE_DIR", dir, 1);
  setenv("XPJIT_DAEMON", "off", 1);
  unsetenv("XPJIT_LLVM_PLUGIN");
  unsetenv("XPJIT_CPU_LOADER");
  return 0;
}

/* The first process compiles (in the compile server), stores its kernel
 * (SQLite mapped) and, with no
 * host-CPU file yet, asks LLVM for the host: LLVM is mapped. The second
 * finds both the kernel and the host in files: no LLVM, no SQLite. */
static void test_hit_without_llvm(void **state) {
  (void)state;
  int any = -1, none = 0;
  want_sqlite = 1;
  assert_int_equal(in_child(axpy_child, &any), 0);
  want_sqlite = 0;
  char hf[512];
  host_file(hf, sizeof hf);
  assert_true(hf[0] != 0);
  struct stat st;
  assert_int_equal(stat(hf, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_int_equal(in_child(axpy_child, &none), 0);
  assert_int_equal(in_child(axpy_child, &none), 0);
  want_sqlite = -1;
}

/* An in-process compile loads the plugin. */
static void test_inprocess_loads_plugin(void **state) {
  (void)state;
  assert_int_equal(in_child(compile_child, NULL), 0);
}

static int bad_plugin_child(const void *arg) {
  setenv("XPJIT_LLVM_PLUGIN", arg, 1);
  return compile_here("no LLVM");
}

/* A plugin (child sets its variable to arg) that is missing, writable by
 * others, not loadable, or a shared object that is none of ours: refused,
 * never run (child returns 1 when refused with its message). */
static void refuses_bad_plugins(int (*child)(const void *), const char *name) {
  char path[600];
  snprintf(path, sizeof path, "/nonexistent/%s", name);
  assert_int_equal(in_child(child, path), 1);
  snprintf(path, sizeof path, "%s/open-%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("not an ELF file\n", f);
  fclose(f);
  chmod(path, 0666);
  assert_int_equal(in_child(child, path), 1);
  chmod(path, 0644);
  assert_int_equal(in_child(child, path), 1); /* cannot load */
  assert_int_equal(in_child(child, "/lib/x86_64-linux-gnu/libz.so.1"), 1);
}

static void test_bad_plugins(void **state) {
  (void)state;
  refuses_bad_plugins(bad_plugin_child, "libxpjit-llvm.so.0");
}

/* A damaged host-CPU file is not believed: LLVM is asked (and mapped),
 * the file rewritten, and the next process is back to no LLVM. So is one
 * that others may write. */
static void test_host_file_checked(void **state) {
  (void)state;
  int any = -1, none = 0, yes = 1;
  char hf[512];
  host_file(hf, sizeof hf);
  if (!hf[0]) {
    assert_int_equal(in_child(axpy_child, &any), 0);
    host_file(hf, sizeof hf);
  }
  assert_true(hf[0] != 0);
  static const char *const garbage[] = {
      "znver4\n+avx;rm -rf /\n", "\n\n", "x", "znver4\n",
      "../../etc\n+avx\n"};
  for (size_t i = 0; i < sizeof garbage / sizeof *garbage; i++) {
    int fd = open(hf, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, garbage[i], strlen(garbage[i])),
                     (ssize_t)strlen(garbage[i]));
    close(fd);
    assert_int_equal(in_child(axpy_child, &yes), 0);
    assert_int_equal(in_child(axpy_child, &none), 0);
  }
  chmod(hf, 0666);
  assert_int_equal(in_child(axpy_child, &yes), 0);
  /* a FIFO in its place (no writer ever comes): refused, not waited on
   * (the open blocked every process on the CPU device, xpjitd too) */
  unlink(hf);
  assert_int_equal(mkfifo(hf, 0600), 0);
  assert_int_equal(in_child(axpy_child_alarm, &yes), 0);
  unlink(hf);
  /* written again (by a process that asks LLVM) for the tests after */
  assert_int_equal(in_child(axpy_child, &yes), 0);
  char again[512];
  host_file(again, sizeof again);
  assert_string_equal(again, hf);
}

static int no_plugin_child(const void *arg) {
  (void)arg;
  char sub[300];
  snprintf(sub, sizeof sub, "%s/no-plugin", dir);
  mkdir(sub, 0700);
  setenv("XPJIT_CACHE_DIR", sub, 1);
  setenv("XPJIT_LLVM_PLUGIN", "/nonexistent/libxpjit-llvm.so.0", 1);
  xpj_context *ctx = NULL;
  xpj_context_desc cd = {0};
  cd.visible = "cpu";
  if (xpj_context_create(&cd, &ctx) != XPJ_OK)
    return 10;
  xpj_device_info di;
  int rc = xpj_device_get_info(xpj_device_get(ctx, 0), &di) != XPJ_OK ? 11
           : strncmp(di.target, "cpu:x86-64", 10) != 0            ? 12
                                                                   : 0;
  if (rc)
    fprintf(stderr, "no plugin: target %s\n", di.target);
  xpj_context_destroy(ctx);
  if (rc == 0)
    rc = run_axpy(0); /* compiled by the compile server, run here */
  char hf[600];
  host_file_in(sub, hf, sizeof hf);
  if (rc == 0 && hf[0])
    rc = 13; /* the psABI level is not LLVM's answer: never kept */
  return rc;
}

/* Without the plugin and without a host-CPU file, the CPU device is
 * described by the x86-64 psABI level this CPU supports (a subset of what
 * LLVM would name), kernels compile in the compile server and run, and
 * nothing is written for later processes. */
static void test_host_without_llvm(void **state) {
  (void)state;
  assert_int_equal(in_child(no_plugin_child, NULL), 0);
}

/* A context's own cache (xpj_context_desc: cache_mode, cache_path in
 * dir), and how the host CPU is first asked for: by the CPU device, or by
 * xpj_program_get_binary(..., "cpu") in a context without one. */
typedef struct asked_cache {
  xpj_cache_mode mode;
  const char *dir;
  bool by_binary;
} asked_cache;

/* The default cache's directory (XPJIT_CACHE_DIR in mode_child): made by
 * nothing, since every context there names its own cache. */
static void default_cache_dir(char *path, size_t size) {
  snprintf(path, size, "%s/default-cache", dir);
}

static int mode_child(const void *arg) {
  const asked_cache *a = arg;
  char other[300], path[600];
  default_cache_dir(other, sizeof other);
  setenv("XPJIT_CACHE_DIR", other, 1);
  unsetenv("XPJIT_CACHE"); /* the descriptor alone says ro or off */
  snprintf(path, sizeof path, "%s/cache.db", a->dir);
  xpj_context_desc cd = {0};
  cd.cache_mode = a->mode;
  cd.cache_path = path;
  if (!a->by_binary) {
    cd.visible = "cpu";
    return run_axpy_in(&cd, -1);
  }
  cd.visible = "cuda"; /* no CPU device: the host is first asked below */
  xpj_context *ctx = NULL;
  xpj_program *p = NULL;
  void *bin = NULL;
  size_t n = 0;
  int rc = xpj_context_create(&cd, &ctx) == XPJ_OK &&
                   xpj_program_create_file(ctx, "examples/axpy.xpk", NULL,
                                           &p) == XPJ_OK &&
                   xpj_program_get_binary(p, "axpy", "T=f32", 1, "cpu", NULL,
                                          &bin, &n) == XPJ_OK
               ? 0
               : 1;
  if (rc)
    fprintf(stderr, "mode_child: %s\n", xpj_last_error());
  free(bin);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  return rc;
}

/* Entries of directory d, -1 when it cannot be opened (errno) */
static int entries(const char *d) {
  DIR *h = opendir(d);
  if (!h)
    return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(h)))
    n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(h);
  return n;
}

/* A context whose cache is read-only or off (xpj_context_desc.cache_mode,
 * XPJIT_CACHE unset) writes no host-CPU file, nor makes the directory for
 * it: neither its cache's (missing, or there and empty) nor the default
 * one. A read-write one writes the file beside its cache's. */
static void test_host_file_follows_cache_mode(void **state) {
  (void)state;
  static const xpj_cache_mode quiet[] = {XPJ_CACHE_MODE_RO,
                                         XPJ_CACHE_MODE_OFF};
  char other[300], sub[400], hf[600];
  default_cache_dir(other, sizeof other);
  for (size_t i = 0; i < sizeof quiet / sizeof *quiet; i++)
    for (int made = 0; made < 2; made++)
      for (int by_binary = 0; by_binary < 2; by_binary++) {
        snprintf(sub, sizeof sub, "%s/mode-%d-%d-%d", dir, (int)quiet[i],
                 made, by_binary);
        if (made)
          assert_int_equal(mkdir(sub, 0700), 0);
        asked_cache a = {quiet[i], sub, by_binary};
        assert_int_equal(in_child(mode_child, &a), 0);
        if (made)
          assert_int_equal(entries(sub), 0);
        else
          assert_int_equal(access(sub, F_OK), -1);
        assert_int_equal(access(other, F_OK), -1);
      }
  for (int by_binary = 0; by_binary < 2; by_binary++) {
    snprintf(sub, sizeof sub, "%s/mode-rw-%d", dir, by_binary);
    asked_cache a = {XPJ_CACHE_MODE_RW, sub, by_binary};
    assert_int_equal(in_child(mode_child, &a), 0);
    host_file_in(sub, hf, sizeof hf);
    assert_true(hf[0] != 0);
    assert_int_equal(access(other, F_OK), -1);
  }
}

/* A SPIR-V module of axpy<f32> (compiled by the compile server), checked
 * in this process: 0 when it passes and a damaged copy does not, the
 * validator plugin mapped and libLLVM not; 1 when validation failed with
 * a message containing expect (and nothing was loaded). */
static int validate_here(const char *expect) {
  xpj_context *ctx = NULL;
  xpj_context_desc cd = {0};
  cd.visible = "cpu";
  cd.cache_mode = XPJ_CACHE_MODE_RW;
  xpj_program *p = NULL;
  void *bin = NULL;
  size_t n = 0;
  if (xpj_context_create(&cd, &ctx) != XPJ_OK ||
      xpj_program_create_file(ctx, "examples/axpy.xpk", NULL, &p) != XPJ_OK ||
      xpj_program_get_binary(p, "axpy", "T=f32", 1, "spirv", NULL, &bin,
                             &n) != XPJ_OK) {
    fprintf(stderr, "validate_here: %s\n", xpj_last_error());
    return 3;
  }
  if (mapped("libxpjit-spirv") || cxx_mapped())
    return 4; /* getting a binary validates nothing here */
  char err[512] = "";
  int rc = xpj_spirv_validate(bin, n, 2, err, sizeof err);
  if (expect) {
    rc = rc != 0 && strstr(err, expect) && !mapped("libxpjit-spirv") ? 1 : 5;
  } else if (rc != 0 || !mapped("libxpjit-spirv") || llvm_mapped()) {
    fprintf(stderr, "validate_here: %d %s\n", rc, err);
    rc = 6;
  } else {
    /* OpCapability Addresses -> an unknown capability: invalid */
    uint32_t *w = bin;
    for (size_t i = 5; i + 1 < n / 4; i++)
      if (w[i] == (2u << 16 | 17u)) {
        w[i + 1] = 0xdead;
        break;
      }
    rc = xpj_spirv_validate(bin, n, 2, err, sizeof err) != 0 && err[0] ? 0 : 7;
  }
  if (rc)
    fprintf(stderr, "validate_here: rc %d, %s\n", rc, err);
  free(bin);
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  return rc;
}

static int validate_child(const void *arg) {
  if (arg)
    setenv("XPJIT_SPIRV_PLUGIN", arg, 1);
  return validate_here(arg ? "no SPIR-V validator" : NULL);
}

/* SPIR-V is checked by the plugin, loaded then; a validator that cannot
 * be had refuses every module, with the reason. */
/* The host-CPU file's name from glibc's copy of the CPUID leaves is the
 * one CPUID itself gives (hostcpu.c, glibc_leaf). */
static void test_host_fingerprint(void **state) {
  (void)state;
#if defined(__x86_64__)
  char a[33], b[33];
  xpj_host_cpu_fingerprint(a, true);
  xpj_host_cpu_fingerprint(b, false);
  assert_string_equal(a, b);
  assert_int_equal(strlen(a), 32);
#else
  skip();
#endif
}

/* A plugin is loaded from the descriptor its check was made on: a name
 * pointed at another file between the check and the load (a symbolic
 * link flipped by another user, as an outside probe did to the compile
 * server's) loads the file checked. And a descriptor number that named a
 * plugin loaded before (its descriptor closed behind the library's back)
 * is not taken for that plugin: the loader knows objects by name. */
static int swapped_plugin_child(const void *arg) {
  (void)arg;
  static xpj_plugin llvm_p =
      XPJ_PLUGIN("XPJIT_LLVM_PLUGIN", XPJ_LLVM_PLUGIN, XPJ_LLVM_PLUGIN_SYMBOL,
                 "no LLVM", sizeof(xpj_llvm_api));
  static xpj_plugin spirv_p =
      XPJ_PLUGIN("XPJIT_SPIRV_PLUGIN", XPJ_SPIRV_PLUGIN,
                 XPJ_SPIRV_PLUGIN_SYMBOL, "no SPIR-V validator",
                 sizeof(xpj_spirv_api));
  char real[PATH_MAX], path[PATH_MAX], link[600], tmp[620], why[400];
  int fd = xpj_plugin_open(&llvm_p, real, why, sizeof why); /* beside us */
  if (fd < 0) {
    fprintf(stderr, "swapped_plugin: %s\n", why);
    return 2;
  }
  close(fd);
  snprintf(link, sizeof link, "%s/swap-libxpjit-llvm.so.0", dir);
  snprintf(tmp, sizeof tmp, "%s.new", link);
  unlink(link);
  if (symlink(real, link) != 0)
    return 3;
  setenv("XPJIT_LLVM_PLUGIN", link, 1);
  fd = xpj_plugin_open(&llvm_p, path, why, sizeof why);
  if (fd < 0 || strcmp(path, link) != 0) {
    fprintf(stderr, "swapped_plugin: %s\n", why);
    return 4;
  }
  /* checked: now the name leads to a trusted file that is no plugin */
  if (symlink("/lib/x86_64-linux-gnu/libz.so.1", tmp) != 0 ||
      rename(tmp, link) != 0)
    return 5;
  const xpj_plugin_head *a = xpj_plugin_load(&llvm_p, fd, path, why,
                                              sizeof why);
  if (!a || strcmp(a->build, XPJ_BUILD_ID) != 0) {
    fprintf(stderr, "swapped_plugin: %s\n", a ? a->build : why);
    return 6;
  }
  unlink(link);
  /* the LLVM plugin's descriptor closed: the SPIR-V plugin, opened next,
   * gets its number */
  close(fd);
  int sfd = xpj_plugin_open(&spirv_p, path, why, sizeof why);
  if (sfd < 0) {
    fprintf(stderr, "swapped_plugin: %s\n", why);
    return 7;
  }
  if (sfd != fd) { /* (it is: the lowest free number) */
    if (dup3(sfd, fd, O_CLOEXEC) != fd)
      return 7;
    close(sfd);
    sfd = fd;
  }
  const xpj_plugin_head *b = xpj_plugin_load(&spirv_p, sfd, path, why,
                                              sizeof why);
  if (!b || b == a || strcmp(b->build, XPJ_BUILD_ID) != 0 ||
      b->size != sizeof(xpj_spirv_api)) {
    fprintf(stderr, "swapped_plugin: %s\n", b ? "the LLVM plugin" : why);
    return 8;
  }
  return 0;
}

static void test_plugin_loaded_from_checked_file(void **state) {
  (void)state;
  assert_int_equal(in_child(swapped_plugin_child, NULL), 0);
}

static void test_spirv_validator(void **state) {
  (void)state;
  assert_int_equal(in_child(validate_child, NULL), 0);
  refuses_bad_plugins(validate_child, "libxpjit-spirv.so.0");
}

int main(void) {
  test_owner_init();
  const struct CMUnitTest tests[] = {
      guarded_test(test_hit_without_llvm),
      guarded_test(test_inprocess_loads_plugin),
      guarded_test(test_bad_plugins),
      guarded_test(test_plugin_loaded_from_checked_file),
      guarded_test(test_host_file_checked),
      guarded_test(test_host_without_llvm),
      guarded_test(test_host_file_follows_cache_mode),
      guarded_test(test_host_fingerprint),
      guarded_test(test_spirv_validator),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
