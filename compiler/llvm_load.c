/*
 * llvm_load.c - where libxpjit finds LLVM (llvm.h): the table linked into
 * the program, else the plugin libxpjit-llvm.so.0, loaded on first use;
 * and how it loads any plugin of its own (xpj_plugin_load: also the
 * SPIR-V validator, spirv_check.c).
 *
 * The plugin is code that runs as the user, so it is looked for only
 * where the library itself is installed, or where XPJIT_LLVM_PLUGIN names
 * it, and loaded only from a regular file of root or of this user that
 * nobody else may write (the rule of the compile server's executable):
 * opened once, the descriptor checked, and loaded from that descriptor
 * (xpj_trusted_open).
 */
#define _GNU_SOURCE
#include "llvm.h"

#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Defined when the program links libxpjit-llvm.a (llvm.h). */
extern const xpj_llvm_api xpj_llvm_plugin_api __attribute__((weak));


/* Opened once, checked by fstat, and that descriptor is what the caller
 * runs or loads: stat(path) and then exec or dlopen of path ran whatever
 * another user pointed the name at in between (a symbolic link flipped
 * between the real file and theirs). Links are followed (a versioned .so,
 * xpjitd's /proc/self/fd/3): the file they lead to is the one checked and
 * the one used. No directory above is checked: the default places are
 * beside libxpjit.so and the program, which the loader and exec trusted
 * already, and through a name in another user's directory no file but
 * root's or this user's own can be reached (docs/security.md).
 * O_NONBLOCK: a FIFO put there must not block the open (fstat refuses
 * it). */
int xpj_trusted_open(const char *path, bool exec) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return -1;
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      !(st.st_mode & (S_IWGRP | S_IWOTH)) &&
      (st.st_uid == 0 || st.st_uid == geteuid()) &&
      (!exec || (st.st_mode & S_IXUSR)))
    return fd;
  close(fd);
  return -2;
}

/* dir(object) + rel + "/" + name into path, when object is an absolute
 * path and the result fits. */
static bool beside(const char *object, const char *rel, const char *name,
                   char *path, size_t size) {
  const char *slash = object ? strrchr(object, '/') : NULL;
  if (!slash || object[0] != '/')
    return false;
  int n = snprintf(path, size, "%.*s%s/%s", (int)(slash - object), object,
                   rel, name);
  return n > 0 && (size_t)n < size;
}

/* The absolute path of the shared object mapped at addr (/proc/self/maps)
 * into path; false when there is none, or it is the program itself (a
 * static libxpjit: the program's directory is looked at as before, by
 * /proc/self/exe). dladdr names an object as the loader found it:
 * relative when LD_LIBRARY_PATH was (LD_LIBRARY_PATH=build/lib), and so
 * relative to a working directory that may have changed since; the
 * kernel names the file it mapped. Whole lines only (getline: a path
 * longer than a buffer must not leave a tail that reads as a mapping);
 * a name with a backslash (the kernel's escape of a newline, "\012") is
 * not taken. */
static bool mapped_file(uintptr_t addr, char *path, size_t size) {
  FILE *f = fopen("/proc/self/maps", "re");
  if (!f)
    return false;
  char *line = NULL;
  size_t cap = 0;
  bool found = false;
  while (getline(&line, &cap, f) > 0) {
    unsigned long lo = 0, hi = 0;
    int at = 0;
    if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &at) < 2 ||
        addr < lo || addr >= hi)
      continue;
    char *name = line + at;
    name[strcspn(name, "\n")] = 0;
    found = at > 0 && name[0] == '/' && strlen(name) < size &&
            !strchr(name, '\\') && !strstr(name, " (deleted)");
    if (found)
      memcpy(path, name, strlen(name) + 1);
    break;
  }
  free(line);
  fclose(f);
  char exe[PATH_MAX];
  ssize_t n = found ? readlink("/proc/self/exe", exe, sizeof exe - 1) : -1;
  if (n > 0) {
    exe[n] = 0;
    found = strcmp(exe, path) != 0;
  }
  return found;
}

bool xpj_own_file(const char *env, const char *const *lib_rels,
                  const char *const *exe_rels, const char *prefix,
                  const char *name, char *path, size_t size) {
  if (env && *env) {
    snprintf(path, size, "%s", env);
    return access(path, F_OK) == 0;
  }
  Dl_info info;
  const char *lib = dladdr((void *)xpj_own_file, &info) ? info.dli_fname
                                                        : NULL;
  char mapped[PATH_MAX];
  if (lib && lib[0] != '/' &&
      mapped_file((uintptr_t)xpj_own_file, mapped, sizeof mapped))
    lib = mapped;
  for (; lib && *lib_rels; lib_rels++)
    if (beside(lib, *lib_rels, name, path, size) && access(path, F_OK) == 0)
      return true;
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0)
    self[n] = 0;
  for (; n > 0 && *exe_rels; exe_rels++)
    if (beside(self, *exe_rels, name, path, size) && access(path, F_OK) == 0)
      return true;
  snprintf(path, size, "%s/%s", prefix ? prefix : ".", name);
  return prefix && access(path, F_OK) == 0;
}

#ifndef XPJ_LIBDIR
#define XPJ_LIBDIR NULL
#endif

/* The name a message gives path: for a descriptor passed down
 * (/proc/self/fd/N: xpjitd's workers) the file it is, which the reader
 * can find (or "... (deleted)"), not a number that is another file in
 * the process that reads the message. */
static const char *shown(const char *path, char *buf, size_t size) {
  if (strncmp(path, "/proc/self/fd/", 14) != 0)
    return path;
  ssize_t n = readlink(path, buf, size - 1);
  if (n <= 0)
    return path;
  buf[n] = 0;
  return buf;
}

/* Where p is (path, PATH_MAX bytes): where p->env names it, beside
 * libxpjit.so, in the lib directory beside the program's (bin/,
 * libexec/xpjit/, tests/), or the prefix's; opened there if it is a
 * trusted file (xpj_trusted_open). */
int xpj_plugin_open(const xpj_plugin *p, char path[PATH_MAX], char *why,
                    size_t whysize) {
  static const char *const lib_rels[] = {"", NULL};
  static const char *const exe_rels[] = {"/../lib", "/../../lib", NULL};
  if (!xpj_own_file(getenv(p->env), lib_rels, exe_rels, XPJ_LIBDIR, p->file,
                    path, PATH_MAX)) {
    snprintf(why, whysize, "%s: no %.250s (the plugin is looked for "
             "beside libxpjit.so and the program, then there; %s names it)",
             p->what, path, p->env);
    return -1;
  }
  int fd = xpj_trusted_open(path, false);
  int err = errno;
  char b[PATH_MAX];
  if (fd == -2)
    snprintf(why, whysize, "%s: %.250s is not a regular file of root or "
             "of this user that only its owner may write", p->what,
             shown(path, b, sizeof b));
  else if (fd < 0)
    snprintf(why, whysize, "%s: cannot open %.250s: %s", p->what,
             shown(path, b, sizeof b), strerror(err));
  return fd < 0 ? -1 : fd;
}

/* dl_iterate_phdr: whether a loaded object is called name. */
static int named(struct dl_phdr_info *info, size_t size, void *name) {
  (void)size;
  return info->dlpi_name && !strcmp(info->dlpi_name, name);
}

const void *xpj_plugin_load(const xpj_plugin *p, int fd, const char *path,
                            char *why, size_t whysize) {
  char b[PATH_MAX], name[40];
  /* The loader takes an object of the same name for the one asked for:
   * a number whose descriptor was closed behind this library's back (a
   * program that closes all of them) may still name a plugin loaded
   * through it. Not that number, then. */
  for (int tries = 0;; tries++) {
    snprintf(name, sizeof name, "/proc/self/fd/%d", fd);
    if (!dl_iterate_phdr(named, name))
      break;
    int up = tries < 16 ? fcntl(fd, F_DUPFD_CLOEXEC, fd + 1) : -1;
    close(fd);
    if (up < 0) {
      snprintf(why, whysize, "%s: cannot load %.250s: no descriptor of a "
               "name the loader has not seen", p->what,
               shown(path, b, sizeof b));
      return NULL;
    }
    fd = up;
  }
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    size_t n = strlen(name); /* "/proc/self/fd/N: why": the file's name */
    if (e && !strncmp(e, name, n) && !strncmp(e + n, ": ", 2))
      e += n + 2;
    snprintf(why, whysize, "%s: cannot load %.250s: %.100s", p->what,
             shown(path, b, sizeof b), e ? e : "dlopen failed");
    close(fd);
    return NULL;
  }
  const xpj_plugin_head *a = dlsym(h, p->symbol);
  if (!a || a->size != p->size || !a->build ||
      strcmp(a->build, XPJ_BUILD_ID) != 0) {
    snprintf(why, whysize, "%s: %.250s is of another build of xpjit "
             "(%s, this library is %s)", p->what, shown(path, b, sizeof b),
             a && a->build ? a->build : "?", XPJ_BUILD_ID);
    dlclose(h);
    close(fd);
    return NULL;
  }
  /* never unloaded (LLVM keeps process-wide state), nor fd closed */
  return a;
}

static const void *load_plugin(const xpj_plugin *p, char *why,
                               size_t whysize) {
  char path[PATH_MAX];
  int fd = xpj_plugin_open(p, path, why, whysize);
  return fd < 0 ? NULL : xpj_plugin_load(p, fd, path, why, whysize);
}

const void *xpj_plugin_get(xpj_plugin *p, const void *linked, char *why,
                           size_t whysize) {
  if (linked)
    return linked;
  const void *a = atomic_load(&p->api);
  if (a)
    return a;
  pthread_mutex_lock(&p->mu);
  a = atomic_load(&p->api);
  if (!a && !p->failed[0]) {
    a = load_plugin(p, p->failed, sizeof p->failed);
    atomic_store(&p->api, a);
  }
  pthread_mutex_unlock(&p->mu);
  if (!a && why && whysize)
    snprintf(why, whysize, "%s", p->failed);
  return a;
}

bool xpj_plugin_present(xpj_plugin *p, const void *linked) {
  return linked || atomic_load(&p->api) != NULL;
}

static xpj_plugin llvm_plugin =
    XPJ_PLUGIN("XPJIT_LLVM_PLUGIN", XPJ_LLVM_PLUGIN, XPJ_LLVM_PLUGIN_SYMBOL,
               "no LLVM", sizeof(xpj_llvm_api));

const xpj_llvm_api *xpj_llvm(char *why, size_t whysize) {
  return xpj_plugin_get(&llvm_plugin,
                        &xpj_llvm_plugin_api ? &xpj_llvm_plugin_api : NULL,
                        why, whysize);
}

bool xpj_llvm_present(void) {
  return xpj_plugin_present(&llvm_plugin, &xpj_llvm_plugin_api
                                              ? &xpj_llvm_plugin_api
                                              : NULL);
}

int xpj_llvm_plugin_open(char path[PATH_MAX], char *why, size_t whysize) {
  return xpj_plugin_open(&llvm_plugin, path, why, whysize);
}
