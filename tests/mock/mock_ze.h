/* mock_ze.h - what the stand-in Level Zero loader (libmock_ze.so, built
 * from mock_ze.c) records, and the functions a test looks up with
 * dlopen(same path) + dlsym to read it. */
#ifndef MOCK_ZE_H
#define MOCK_ZE_H

#include <stdint.h>

#define MOCK_ZE_MAX_ARGS 64

/* One zeKernelSetArgumentValue as the launch saw it. */
/* what a local (Workgroup pointer) parameter's size reads as in the
 * module's parameter list: zeKernelSetArgumentValue must give it a size and
 * a NULL value */
#define MOCK_ZE_LOCAL_ARG 0xffffffffu

typedef struct mock_ze_arg {
  uint32_t size;     /* as given */
  uint8_t bytes[16]; /* the value (first 16 bytes); zero for NULL */
  int set;
} mock_ze_arg;

/* One zeCommandListAppendLaunchKernel. */
typedef struct mock_ze_launch {
  char kernel[64];
  uint32_t group[3]; /* zeKernelSetGroupSize */
  uint32_t count[3]; /* ze_group_count_t */
  unsigned nparams;  /* OpFunctionParameters of the entry point */
  mock_ze_arg args[MOCK_ZE_MAX_ARGS];
} mock_ze_launch;

typedef struct mock_ze_stats {
  /* counted since the last mock_ze_reset */
  unsigned inits, launches, modules_il, modules_native, copies, fills,
      barriers, event_syncs, native_gets;
  unsigned allocs_device, allocs_host, allocs_shared;
  /* objects alive now (never reset) */
  int live_contexts, live_lists, live_pools, live_events, live_allocs,
      live_modules, live_kernels, live_logs;
} mock_ze_stats;

/* Environment read at every zeInit:
 *   MOCK_ZE_DEVICES   devices of the one driver (default 1, at most 8)
 *   MOCK_ZE_SPIRV     spirvVersionSupported (default 0x00010004)
 *   MOCK_ZE_FILL_MAX  maxMemoryFillPatternSize of the compute group (16)
 *   MOCK_ZE_FAIL      init | module | kernel | launch | sync: that call
 *                     fails (zeInit: UNINITIALIZED; zeModuleCreate:
 *                     MODULE_BUILD_FAILURE with a build log; zeKernelCreate:
 *                     INVALID_KERNEL_NAME; zeCommandListAppendLaunchKernel:
 *                     OUT_OF_DEVICE_MEMORY; zeEventHostSynchronize:
 *                     DEVICE_LOST) */
#define MOCK_ZE_BUILD_LOG "mock-ze: error: kernel uses an unsupported feature"
#define MOCK_ZE_NATIVE_MAGIC "MOCKZENATIVE"

typedef void (*mock_ze_stats_fn)(mock_ze_stats *out);
typedef int (*mock_ze_launch_fn)(unsigned i, mock_ze_launch *out);
typedef void (*mock_ze_reset_fn)(void);

void mock_ze_get_stats(mock_ze_stats *out);
/* Launch i since the last reset: 0, or -1 past the end. */
int mock_ze_get_launch(unsigned i, mock_ze_launch *out);
void mock_ze_reset(void);

#endif
