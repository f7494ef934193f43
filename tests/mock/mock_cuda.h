/* mock_cuda.h - what the stand-in libcuda (mock_cuda.c) records, for
 * tests/test_cuda.c, which finds mock_cuda_get and mock_cuda_reset with
 * dlsym in the same library the runtime opened. */
#ifndef MOCK_CUDA_H
#define MOCK_CUDA_H

#include <stdint.h>

#define MOCK_CUDA_LAUNCHES 32
#define MOCK_CUDA_PARAMS 64

typedef struct mock_cuda_launch {
  char func[64];
  unsigned grid[3], block[3], shared;
  void *stream;
  unsigned nparams;                           /* from the PTX .entry */
  unsigned char size[MOCK_CUDA_PARAMS];       /* bytes of each */
  uint64_t value[MOCK_CUDA_PARAMS];           /* zero-extended */
} mock_cuda_launch;

typedef struct mock_cuda_state {
  /* calls */
  int inits, link_creates, link_adds, link_completes, module_loads,
      module_unloads, launches, syncs, memsets, memcpys, set_currents;
  /* what is alive now: leaks show here */
  int live_allocs, live_streams, live_modules, live_links, retained_ctxs;
  /* calls that found no current context (a backend bug) */
  int no_context;
  /* the JIT options of the last cuLinkCreate: their count and whether the
   * error log buffer and its size were among them */
  unsigned link_options;
  int had_error_log;
  mock_cuda_launch launch[MOCK_CUDA_LAUNCHES]; /* the first ones */
  /* bench/gpu's calls (appended: tests/test_cuda.c reads the fields above) */
  int events_recorded, live_events;
  int ptx_module_loads, elf_module_loads; /* cuModuleLoadData of raw PTX,
                                             of an ELF cubin (NVRTC's) */
  /* xpj_device_wait_native's: cuCtxSynchronize calls, and the stream of
   * the last cuStreamSynchronize (1 and 2: the default streams) */
  int ctx_syncs;
  void *last_synced;
  /* cuFuncSetAttribute calls, and the last one's bytes of dynamic shared
   * memory */
  int func_set_attributes, last_max_dyn;
} mock_cuda_state;

typedef const mock_cuda_state *(*mock_cuda_get_fn)(void);
typedef void (*mock_cuda_reset_fn)(void);

#endif
