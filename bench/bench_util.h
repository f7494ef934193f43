/* bench_util.h - what every benchmark here needs: sorting samples, reading
 * a file, one-line messages, the CPU's name and the load average, a
 * private redis-server, and the few OpenCL 1.2 declarations (the ABI
 * of libOpenCL.so.1, loaded with dlopen) for machines without the
 * opencl-c-headers package. Header-only; static functions. */
#ifndef XPJ_BENCH_UTIL_H
#define XPJ_BENCH_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static inline int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The CPU's model name from /proc/cpuinfo, for a report's header */
static inline void cpu_model(char *buf, size_t size) {
  snprintf(buf, size, "unknown CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f)
    return;
  char line[512];
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "model name", 10)) {
      char *c = strchr(line, ':');
      if (c) {
        c++;
        while (*c == ' ')
          c++;
        c[strcspn(c, "\n")] = 0;
        snprintf(buf, size, "%s", c);
      }
      break;
    }
  fclose(f);
}

/* /proc/loadavg's 1, 5 and 15 minute load averages ("?" if unreadable) */
static inline void loadavg(char *buf, size_t size) {
  snprintf(buf, size, "?");
  FILE *f = fopen("/proc/loadavg", "r");
  if (!f)
    return;
  double a, b, c;
  if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
    snprintf(buf, size, "%.2f %.2f %.2f", a, b, c);
  fclose(f);
}

/* The median of v[0..n) (sorts v). */
static inline double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The whole file, NUL-terminated, malloc'd; NULL when unreadable. */
static inline char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *s = NULL;
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
      fseek(f, 0, SEEK_SET) == 0)
    s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
    free(s);
    s = NULL;
  }
  fclose(f);
  if (!s)
    return NULL;
  s[n] = 0;
  if (len)
    *len = (size_t)n;
  return s;
}

/* Removes dir and everything below it (a bench's own directory: its
 * cache with the .hits/.stats/.flight directories beside the file).
 * Plain static, not inline: GCC's -Wformat-truncation would take an
 * inlined recursive call's dir for one of PATH_MAX bytes. */
__attribute__((unused)) static void rm_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *de;
    while ((de = readdir(d))) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
        continue;
      char p[PATH_MAX + 256];
      snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
      struct stat sb;
      if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
        rm_tree(p);
      else
        unlink(p);
    }
    closedir(d);
  }
  rmdir(dir);
}

/* one line, for table cells and messages */
static inline void oneline(char *s) {
  for (; *s; s++)
    if (*s == '\n' || *s == '\r' || *s == '\t')
      *s = ' ';
}

#if defined(BENCH_WANT_OPENCL)
#if __has_include(<CL/cl.h>) && !defined(BENCH_NO_CL_H)
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#else
typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef int64_t cl_long;
typedef cl_uint cl_bool;
typedef cl_ulong cl_bitfield;
typedef cl_bitfield cl_device_type;
typedef cl_bitfield cl_mem_flags;
typedef cl_bitfield cl_map_flags;
typedef cl_bitfield cl_command_queue_properties;
typedef cl_uint cl_platform_info;
typedef cl_uint cl_device_info;
typedef cl_uint cl_program_build_info;
typedef intptr_t cl_context_properties;
typedef struct _cl_platform_id *cl_platform_id;
typedef struct _cl_device_id *cl_device_id;
typedef struct _cl_context *cl_context;
typedef struct _cl_command_queue *cl_command_queue;
typedef struct _cl_mem *cl_mem;
typedef struct _cl_program *cl_program;
typedef struct _cl_kernel *cl_kernel;
typedef struct _cl_event *cl_event;
#define CL_SUCCESS 0
#define CL_TRUE 1
#define CL_PLATFORM_VERSION 0x0901
#define CL_PLATFORM_NAME 0x0902
#define CL_DEVICE_TYPE_CPU (1 << 1)
#define CL_DEVICE_MAX_COMPUTE_UNITS 0x1002
#define CL_DEVICE_NAME 0x102B
#define CL_PROGRAM_BUILD_LOG 0x1183
#define CL_MEM_READ_WRITE (1 << 0)
#define CL_MEM_USE_HOST_PTR (1 << 3)
#define CL_MEM_COPY_HOST_PTR (1 << 5)
#define CL_MAP_READ (1 << 0)
#define CL_MAP_WRITE (1 << 1)
#endif

#include <dlfcn.h>
#include <string.h>

/* The OpenCL entry points the benchmarks use, found in an opened
 * libOpenCL (bench_cl_load). CreateProgramWithIL (OpenCL 2.1) may be NULL. */
typedef struct bench_cl_api {
  cl_int (*GetPlatformIDs)(cl_uint, cl_platform_id *, cl_uint *);
  cl_int (*GetPlatformInfo)(cl_platform_id, cl_platform_info, size_t, void *, size_t *);
  cl_int (*GetDeviceIDs)(cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *);
  cl_int (*GetDeviceInfo)(cl_device_id, cl_device_info, size_t, void *, size_t *);
  cl_context (*CreateContext)(const cl_context_properties *, cl_uint, const cl_device_id *,
                              void (*)(const char *, const void *, size_t, void *), void *,
                              cl_int *);
  cl_command_queue (*CreateCommandQueue)(cl_context, cl_device_id, cl_command_queue_properties,
                                         cl_int *);
  cl_program (*CreateProgramWithSource)(cl_context, cl_uint, const char **, const size_t *,
                                        cl_int *);
  cl_program (*CreateProgramWithIL)(cl_context, const void *, size_t, cl_int *);
  cl_int (*BuildProgram)(cl_program, cl_uint, const cl_device_id *, const char *,
                         void (*)(cl_program, void *), void *);
  cl_int (*GetProgramBuildInfo)(cl_program, cl_device_id, cl_program_build_info, size_t, void *,
                                size_t *);
  cl_kernel (*CreateKernel)(cl_program, const char *, cl_int *);
  cl_int (*SetKernelArg)(cl_kernel, cl_uint, size_t, const void *);
  cl_mem (*CreateBuffer)(cl_context, cl_mem_flags, size_t, void *, cl_int *);
  cl_int (*EnqueueNDRangeKernel)(cl_command_queue, cl_kernel, cl_uint, const size_t *,
                                 const size_t *, const size_t *, cl_uint, const cl_event *,
                                 cl_event *);
  cl_int (*EnqueueFillBuffer)(cl_command_queue, cl_mem, const void *, size_t, size_t, size_t,
                              cl_uint, const cl_event *, cl_event *);
  cl_int (*EnqueueReadBuffer)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, cl_uint,
                              const cl_event *, cl_event *);
  void *(*EnqueueMapBuffer)(cl_command_queue, cl_mem, cl_bool, cl_map_flags, size_t, size_t,
                            cl_uint, const cl_event *, cl_event *, cl_int *);
  cl_int (*EnqueueUnmapMemObject)(cl_command_queue, cl_mem, void *, cl_uint, const cl_event *,
                                  cl_event *);
  cl_int (*Finish)(cl_command_queue);
  cl_int (*ReleaseMemObject)(cl_mem);
  cl_int (*ReleaseKernel)(cl_kernel);
  cl_int (*ReleaseProgram)(cl_program);
  cl_int (*ReleaseCommandQueue)(cl_command_queue);
  cl_int (*ReleaseContext)(cl_context);
} bench_cl_api;

/* Fills *cl from the opened library lib (named libname in messages);
 * false with why filled when an entry point other than
 * CreateProgramWithIL is missing. */
static inline bool bench_cl_load(void *lib, const char *libname,
                                 bench_cl_api *cl, char *why, size_t whysize) {
  struct {
    void *slot;
    const char *name;
    bool optional;
  } syms[] = {
      {&cl->GetPlatformIDs, "clGetPlatformIDs", 0},
      {&cl->GetPlatformInfo, "clGetPlatformInfo", 0},
      {&cl->GetDeviceIDs, "clGetDeviceIDs", 0},
      {&cl->GetDeviceInfo, "clGetDeviceInfo", 0},
      {&cl->CreateContext, "clCreateContext", 0},
      {&cl->CreateCommandQueue, "clCreateCommandQueue", 0},
      {&cl->CreateProgramWithSource, "clCreateProgramWithSource", 0},
      {&cl->CreateProgramWithIL, "clCreateProgramWithIL", 1},
      {&cl->BuildProgram, "clBuildProgram", 0},
      {&cl->GetProgramBuildInfo, "clGetProgramBuildInfo", 0},
      {&cl->CreateKernel, "clCreateKernel", 0},
      {&cl->SetKernelArg, "clSetKernelArg", 0},
      {&cl->CreateBuffer, "clCreateBuffer", 0},
      {&cl->EnqueueNDRangeKernel, "clEnqueueNDRangeKernel", 0},
      {&cl->EnqueueFillBuffer, "clEnqueueFillBuffer", 0},
      {&cl->EnqueueReadBuffer, "clEnqueueReadBuffer", 0},
      {&cl->EnqueueMapBuffer, "clEnqueueMapBuffer", 0},
      {&cl->EnqueueUnmapMemObject, "clEnqueueUnmapMemObject", 0},
      {&cl->Finish, "clFinish", 0},
      {&cl->ReleaseMemObject, "clReleaseMemObject", 0},
      {&cl->ReleaseKernel, "clReleaseKernel", 0},
      {&cl->ReleaseProgram, "clReleaseProgram", 0},
      {&cl->ReleaseCommandQueue, "clReleaseCommandQueue", 0},
      {&cl->ReleaseContext, "clReleaseContext", 0},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    void *p = dlsym(lib, syms[i].name);
    if (!p && !syms[i].optional) {
      snprintf(why, whysize, "%.300s has no %s", libname, syms[i].name);
      return false;
    }
    memcpy(syms[i].slot, &p, sizeof p);
  }
  return true;
}
#endif

/* A redis-server of a benchmark on a unix socket, DIR/redis.sock (written
 * to sock), logging to DIR/redis.log: its pid once the socket exists, or
 * -1 with the reason in why (none installed, or no socket within 2 s; a
 * server that started is stopped again). */
static inline pid_t bench_redis_start(const char *dir, char *sock, size_t size, char *why,
                                      size_t wsize) {
  char log[4200];
  snprintf(sock, size, "%s/redis.sock", dir);
  snprintf(log, sizeof log, "%s/redis.log", dir);
  char *argv[] = {"redis-server", "--port", "0", "--unixsocket", sock, "--save", "",
                  "--appendonly", "no", "--logfile", log, NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int rc = posix_spawnp(&pid, "redis-server", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    snprintf(why, wsize, "cannot start redis-server: %s", strerror(rc));
    return -1;
  }
  for (int i = 0; i < 400; i++) {
    struct stat sb;
    if (stat(sock, &sb) == 0)
      return pid;
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
  kill(pid, SIGKILL);
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
  }
  snprintf(why, wsize, "redis-server did not start; see %.3900s", log);
  return -1;
}

static inline void bench_redis_stop(pid_t pid) {
  if (pid <= 0)
    return;
  kill(pid, SIGTERM);
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
  }
}

#endif
