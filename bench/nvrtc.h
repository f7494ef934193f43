/* nvrtc.h - NVRTC (libnvrtc.so, opened with dlopen at run time) for the
 * benchmarks that compare xpjit's PTX with NVIDIA's compiler: bench/compile
 * (CUDA C to PTX, timed) and bench/gpu (CUDA C to a cubin, run). No CUDA
 * header is needed to build them. Header-only; static functions. */
#ifndef XPJ_BENCH_NVRTC_H
#define XPJ_BENCH_NVRTC_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct nvrtc_prog *nvrtc_prog;

/* The entry points the benchmarks call (nvrtc.h of CUDA 12 and 13). */
typedef struct nvrtc_api {
  int (*create)(nvrtc_prog *, const char *, const char *, int, const char *const *,
                const char *const *);
  int (*destroy)(nvrtc_prog *);
  int (*compile)(nvrtc_prog, int, const char *const *);
  int (*add_name)(nvrtc_prog, const char *);
  int (*lowered)(nvrtc_prog, const char *, const char **);
  int (*ptx_size)(nvrtc_prog, size_t *);
  int (*ptx)(nvrtc_prog, char *);
  int (*cubin_size)(nvrtc_prog, size_t *);
  int (*cubin)(nvrtc_prog, char *);
  int (*log_size)(nvrtc_prog, size_t *);
  int (*log)(nvrtc_prog, char *);
  int (*version)(int *, int *);
} nvrtc_api;

/* Opens libnvrtc into *nv: path, or (NULL) libnvrtc.so, .so.13 or .so.12
 * in $CUDA_HOME/lib64, then /usr/local/cuda/lib64. The file opened goes to
 * opened[0..osize); false with the reason in why[0..wsize). */
static inline bool nvrtc_open(const char *path, nvrtc_api *nv, char *opened,
                              size_t osize, char *why, size_t wsize) {
  static const char *const names[] = {"lib64/libnvrtc.so", "lib64/libnvrtc.so.13",
                                      "lib64/libnvrtc.so.12"};
  char p[500];
  void *h = NULL;
  if (path) {
    snprintf(p, sizeof p, "%s", path);
    h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
  }
  for (int pass = 0; !path && pass < 2 && !h; pass++) {
    const char *dir = pass == 0 ? getenv("CUDA_HOME") : "/usr/local/cuda";
    for (size_t i = 0; dir && *dir && i < sizeof names / sizeof *names && !h; i++) {
      snprintf(p, sizeof p, "%s/%s", dir, names[i]);
      h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
    }
  }
  if (!h) {
    if (path)
      snprintf(why, wsize, "%s", dlerror());
    else
      snprintf(why, wsize, "no libnvrtc in $CUDA_HOME/lib64 or /usr/local/cuda/lib64");
    return false;
  }
  if (opened)
    snprintf(opened, osize, "%s", p);
  struct {
    void *slot;
    const char *name;
  } syms[] = {
      {&nv->create, "nvrtcCreateProgram"},   {&nv->destroy, "nvrtcDestroyProgram"},
      {&nv->compile, "nvrtcCompileProgram"}, {&nv->add_name, "nvrtcAddNameExpression"},
      {&nv->lowered, "nvrtcGetLoweredName"}, {&nv->ptx_size, "nvrtcGetPTXSize"},
      {&nv->ptx, "nvrtcGetPTX"},             {&nv->cubin_size, "nvrtcGetCUBINSize"},
      {&nv->cubin, "nvrtcGetCUBIN"},         {&nv->log_size, "nvrtcGetProgramLogSize"},
      {&nv->log, "nvrtcGetProgramLog"},      {&nv->version, "nvrtcVersion"},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    void *f = dlsym(h, syms[i].name);
    if (!f) {
      snprintf(why, wsize, "%.200s has no %s", p, syms[i].name);
      return false;
    }
    memcpy(syms[i].slot, &f, sizeof f);
  }
  return true;
}

#endif
