/*
 * env.c - the XPJIT_* environment variables (one table) and the log
 * (XPJIT_LOG). See env.h. docs/environment.md is this table in prose;
 * tests/cli.sh checks that the two name the same variables.
 */
#include "env.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define LIB "library"
const xpj_env_var xpj_env_vars[] = {
    /* devices and the CPU device */
    {"XPJIT_DEVICE", "every device", "a device filter: cpu, opencl:cpu, cuda:0, *:gpu;!cuda:1",
     "limits the devices a context sees (xpj_context_desc.visible wins); backends no term can match are not loaded", LIB},
    {"XPJIT_CPU_THREADS", "one per online core", "1 to 1024",
     "threads of the CPU device's pool (xpj_context_desc.cpu_threads wins)", LIB},
    {"XPJIT_CPU_LOADER", "elf", "elf, orc",
     "the CPU device's loader of kernel objects: xpjit's ELF loader, or LLVM's ORC (A/B tests; always ORC off x86-64)", LIB},
    {"XPJIT_CPU_STOP_SIGNAL", "the first free real-time signal from SIGRTMIN+2", "a real-time signal number",
     "the signal that stops a CPU kernel past its queue's launch timeout", LIB},
    {"XPJIT_QUEUE_HELP", "1", "0, 1",
     "0: every command runs on its queue's thread (a waiting thread no longer submits or runs them)", LIB},
    {"XPJIT_CUDA_LIBRARY", "libcuda.so.1, then libcuda.so", "a path or soname",
     "the CUDA driver library opened at run time", LIB},
    {"XPJIT_ZE_LIBRARY", "libze_loader.so.1, then libze_loader.so", "a path or soname",
     "the Level Zero loader opened at run time", LIB},
    {"XPJIT_OPENCL_LIBRARY", "libOpenCL.so.1, then libOpenCL.so", "a path or soname",
     "the OpenCL ICD loader opened at run time", LIB},
    /* compiling */
    {"XPJIT_CHECK", "none", "bounds (or all), comma-separated",
     "checks compiled into every kernel of a context (with xpj_context_desc.checks); a checked launch that indexes outside an array fails", LIB},
    {"XPJIT_COMPILE_MEMORY_LIMIT", "the smaller of 4G and half the RAM", "a size of at least 1M (512M, 4G) or off",
     "the address space a compile's worker may use (memory_limit_mb wins)", LIB},
    {"XPJIT_COMPILE_SERVER", "libexec/xpjit/xpjit-cc beside the library or program, or in the prefix",
     "a path, or fork", "the compile server's executable; fork: a fork of the calling process per compile", LIB},
    {"XPJIT_LLVM_PLUGIN", "libxpjit-llvm.so.0 beside the library, or in the prefix", "a path",
     "the code generator (libxpjit-llvm.so.0), loaded on a process's first in-process compile", LIB},
    {"XPJIT_SPIRV_PLUGIN", "libxpjit-spirv.so.0 beside the library, or in the prefix", "a path",
     "the SPIR-V validator, loaded before a driver takes SPIR-V", LIB},
    {"XPJIT_LIBDEVICE", "$CUDA_HOME, else /usr/local/cuda: nvvm/libdevice/libdevice.10.bc", "a path",
     "NVIDIA's libdevice, linked into PTX that calls math functions", LIB},
    {"XPJIT_FAILURE_TTL", "10m", "a duration (90s, 10m, 2h) or 0",
     "how long a compile that ran out of time or memory is remembered (0: never)", LIB},
    {"XPJIT_FAULT_INJECT", "none", "crash, hang, llvm-fatal, linger, unroll-loads, wide-pairs-off, wide-left",
     "test hook: the compile's worker misbehaves so", LIB},
    /* caches */
    {"XPJIT_CACHE", "rw", "rw (on, 1), ro, off (0)",
     "the second-level cache's mode (xpj_context_desc.cache_mode wins)", LIB},
    {"XPJIT_CACHE_DIR", "$XDG_CACHE_HOME/xpjit, else ~/.cache/xpjit", "a directory",
     "where the cache file cache-v2.db is (xpj_context_desc.cache_path wins)", LIB},
    {"XPJIT_CACHE_MAX_SIZE", "1G", "a size (100M, 1G)",
     "the cache file's size limit; the least recently used entries go first", LIB},
    {"XPJIT_CACHE_JOURNAL", "wal, or rollback on a network file system", "wal, rollback",
     "SQLite's journal mode for the cache file", LIB},
    {"XPJIT_CACHE_HIT_FILES", "1", "0, 1",
     "0: no hit files read or written (an A/B switch for benchmarks)", LIB},
    {"XPJIT_CACHE_SINGLE_FLIGHT", "1", "0, 1",
     "0: processes of one cache file compile a kernel they all miss each, instead of one at a time (an A/B switch)", LIB},
    {"XPJIT_NATIVE_CACHE", "on", "on (1), off (0)",
     "off: the driver's own binaries (OpenCL, Level Zero, CUDA cubins) are not cached beside the portable one", LIB},
    {"XPJIT_BUNDLE_PATH", "none", "files or directories of *.xpb, colon-separated",
     "bundles of precompiled kernels loaded by every context (no_env_bundles: not)", LIB},
    {"XPJIT_TRUSTED_OWNERS", "none", "user names or uids, comma-separated",
     "owners besides you and root whose bundles are accepted, and whose "
     "Redis secret file, links to it and directories above it are", LIB},
    /* the daemon and the cluster */
    {"XPJIT_DAEMON", "auto", "auto, off (0, no), an absolute socket path",
     "the compile daemon xpjitd asked before compiling (xpj_context_desc.daemon wins)", LIB},
    {"XPJIT_DAEMON_TIMEOUT", "10000", "milliseconds, 1 to 3600000",
     "the longest wait for the daemon's answer to one kernel", LIB},
    {"XPJIT_REDIS", "none", "redis://[user:password@]host[:port][/db], unix:/path, off",
     "the cluster's Redis tier (xpj_context_desc.redis wins; xpjitd --redis)", LIB " and xpjitd"},
    {"XPJIT_REDIS_SECRET_FILE", "none", "a private file of at least 16 bytes (yours, root's or a trusted owner's, "
     "mode 0600, 0400 or 0640, one name), reached through links and "
     "directories only you, root or a trusted owner can change "
     "(docs/cache.md, \"Trust\")",
     "values in Redis carry an HMAC with this secret instead of a plain SHA-256", LIB " and xpjitd"},
    {"XPJIT_REDIS_TIMEOUT", "50ms", "a duration from 1ms to 60s",
     "the limit for connecting to Redis and for each command, however the "
     "server paces its reads and writes", LIB},
    {"XPJIT_REDIS_TTL", "7d", "a duration of at least 1s",
     "the expiry of values written to Redis", LIB},
    {"XPJIT_WORKER_FAULT", "none", "crash, hang, exit, each optionally :KERNEL",
     "test hook: xpjitd's compile workers misbehave so", "xpjitd"},
    /* the log */
    {"XPJIT_LOG", "warn", "off, error, warn, info, debug",
     "what the library logs: errors; warnings; every kernel obtained with its tier, key, time and why it was compiled; each tier asked", LIB},
    {"XPJIT_LOG_FILE", "stderr", "a file (appended)",
     "where XPJIT_LOG's lines go, each with the time and process id", LIB},
    /* not the library's */
    {"XPJIT_LIBRARY", "build/lib/libxpjit.so, then the system's", "a path",
     "the library the Python package loads", "python"},
    {"XPJIT_PYTHON_PURE", "0", "1",
     "the Python package without its C launch path", "python"},
    {"XPJIT_RANK_CACHE", "unset", "1",
     "examples/mpi/ranks: each rank its own cache directory, as on its own node", "examples"},
    {"XPJIT_INTEL_OCL", "~/.cache/xpjit/intel-opencl", "a directory",
     "where tools/intel-ocl.sh installs Intel's OpenCL CPU runtime", "tools"},
    {"XPJIT_TEST_DEVICE", "cpu", "a device filter", "the device the test programs run on", "tests"},
    {"XPJIT_TEST_NO_REDIS", "unset", "1", "the tests that need redis-server skip", "tests"},
    {"XPJIT_TEST_REDIS_SERVER", "redis-server", "a path", "the redis-server the tests start", "tests"},
    {"XPJIT_TEST_ZE_NATIVE", "unset", "1", "test_ze's native-binary cases", "tests"},
    {"XPJIT_REQUIRE_SPIRV", "unset", "1", "make test fails where the OpenCL runtime is missing (CI)", "tests"},
    {"XPJIT_REQUIRE_PYTHON", "unset", "1", "make test fails where Python, NumPy, pytest or pyarrow is missing (CI)", "tests"},
    {"XPJIT_REQUIRE_TOOLS", "unset", "1", "tests/install.sh fails where cmake or scdoc is missing (CI)", "tests"},
    {"XPJIT_REQUIRE_SUAI", "unset", "1", "python/tests/test_suai.py fails where dpctl or its opencl:cpu device is missing (CI)", "tests"},
};
const size_t xpj_env_nvars = sizeof xpj_env_vars / sizeof *xpj_env_vars;
_Static_assert(sizeof xpj_env_vars / sizeof *xpj_env_vars <= 64,
               "one bit of 'complained' per variable");

/* one flag per table entry (the table has fewer than 64) */
static _Atomic uint64_t complained;

const xpj_env_var *xpj_env_find(const char *name) {
  for (size_t i = 0; i < xpj_env_nvars; i++)
    if (!strcmp(xpj_env_vars[i].name, name))
      return &xpj_env_vars[i];
  return NULL;
}

const char *xpj_env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

bool xpj_env_first_complaint(const char *name) {
  const xpj_env_var *v = xpj_env_find(name);
  if (!v)
    return false;
  uint64_t bit = 1ull << (v - xpj_env_vars);
  return !(atomic_fetch_or(&complained, bit) & bit);
}

int xpj_env_uint(const char *name, uint64_t lo, uint64_t hi, uint64_t *out) {
  const char *v = xpj_env(name);
  if (!v)
    return 0;
  if (v[0] < '0' || v[0] > '9')
    return -1;
  char *end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (errno || *end || n < lo || n > hi)
    return -1;
  *out = n;
  return 1;
}

int xpj_env_word(const char *name, const char *const *words) {
  const char *v = xpj_env(name);
  if (!v)
    return -1;
  for (int i = 0; words[i]; i++)
    if (!strcmp(v, words[i]))
      return i;
  return -2;
}

int xpj_env_bool(const char *name, int dflt) {
  static const char *const words[] = {"0", "off", "no", "false",
                                      "1", "on",  "yes", "true", NULL};
  int i = xpj_env_word(name, words);
  return i == -1 ? dflt : i == -2 ? -1 : i >= 4;
}

/* the edit distance of a and b, at most 99 */
static unsigned distance(const char *a, const char *b) {
  size_t n = strlen(b);
  if (n > 63 || strlen(a) > 63)
    return 99;
  unsigned row[64];
  for (size_t j = 0; j <= n; j++)
    row[j] = (unsigned)j;
  for (size_t i = 1; a[i - 1]; i++) {
    unsigned diag = row[0];
    row[0] = (unsigned)i;
    for (size_t j = 1; j <= n; j++) {
      unsigned up = row[j];
      unsigned best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best)
        best = up + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[n];
}

size_t xpj_env_unknown(char *buf, size_t size) {
  size_t len = 0; /* of the whole list */
  bool cut = false;
  if (size)
    buf[0] = 0;
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "XPJIT_", 6))
      continue;
    const char *eq = strchr(*e, '=');
    char name[64];
    size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
    if (n >= sizeof name)
      n = sizeof name - 1;
    memcpy(name, *e, n);
    name[n] = 0;
    if (xpj_env_find(name))
      continue;
    const char *near = NULL;
    unsigned best = 4; /* a typo, not another word */
    for (size_t i = 0; i < xpj_env_nvars; i++) {
      unsigned d = distance(name, xpj_env_vars[i].name);
      if (d < best)
        best = d, near = xpj_env_vars[i].name;
    }
    /* written while whole names fit; counted to the end */
    char *to = cut || !buf ? NULL : buf + len;
    size_t room = cut ? 0 : size - len;
    int w = near ? snprintf(to, room, "%s%s (did you mean %s?)",
                            len ? ", " : "", name, near)
                 : snprintf(to, room, "%s%s", len ? ", " : "", name);
    if (w < 0)
      break;
    if (!cut && (size_t)w >= room) {
      cut = true;
      if (room)
        *to = 0;
    }
    len += (size_t)w;
  }
  return len;
}

/* ---- the log ---------------------------------------------------------- */

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static xpj_log_level log_level = XPJ_LOG_WARN;
/* XPJIT_LOG unset: warnings only. Errors are the caller's to report (each
 * failing call returns one); a log of them is asked for. */
static bool log_errors;
static int log_fd = -1; /* XPJIT_LOG_FILE, or -1: stderr */
static char log_problem[1024];

/* "uid 1002 (mallory)", or "uid 1002" when it names no user. */
static void uid_words(uid_t uid, char *buf, size_t size) {
  struct passwd pw, *r = NULL;
  char tmp[2048];
  if (getpwuid_r(uid, &pw, tmp, sizeof tmp, &r) == 0 && r)
    snprintf(buf, size, "uid %u (%s)", (unsigned)uid, r->pw_name);
  else
    snprintf(buf, size, "uid %u", (unsigned)uid);
}

/* The file is what is checked, through the descriptor that is then
 * written: whoever may rename things in the directory above (a /tmp
 * without its sticky bit, a team's directory) can put another file at
 * the path after this check, but not under this descriptor, so the
 * directories need no check of their own. O_NOFOLLOW in the open refuses
 * a link at the path itself; a hard link is refused here (another name of
 * one of the user's files, planted where protected_hardlinks is 0). */
bool xpj_log_file_fit(int fd, const char *path, const char *setting,
                      char *why, size_t size) {
  int err = errno;
  struct stat sb;
  if (fd >= 0 ? fstat(fd, &sb) != 0 : lstat(path, &sb) != 0 ||
                                          S_ISREG(sb.st_mode)) {
    snprintf(why, size, "%s: %s", path, strerror(fd >= 0 ? errno : err));
    return false;
  }
  const char *kind = S_ISLNK(sb.st_mode)    ? "a symbolic link"
                     : S_ISFIFO(sb.st_mode) ? "a FIFO"
                     : S_ISDIR(sb.st_mode)  ? "a directory"
                     : S_ISSOCK(sb.st_mode) ? "a socket"
                     : S_ISREG(sb.st_mode)  ? NULL
                                            : "a device";
  if (kind && S_ISLNK(sb.st_mode))
    snprintf(why, size, "%s is a symbolic link, which is not followed "
             "(whoever made it would choose the file the log appends to). "
             "Remove it, or choose another path with %s", path, setting);
  else if (kind)
    snprintf(why, size, "%s is %s, not a regular file%s. Choose a file of "
             "your own with %s", path, kind,
             S_ISFIFO(sb.st_mode) ? " (whoever holds it open could block "
                                    "each write of the log for ever)"
                                  : "",
             setting);
  else if (sb.st_uid != geteuid()) {
    char owner[320], me[320];
    uid_words(sb.st_uid, owner, sizeof owner);
    uid_words(geteuid(), me, sizeof me);
    snprintf(why, size, "%s is owned by %s, not by you (%s): its owner "
             "would read the log and could make it block. Choose a file of "
             "your own with %s", path, owner, me, setting);
  } else if (sb.st_mode & (S_IWGRP | S_IWOTH))
    snprintf(why, size, "%s is writable by others (mode %04o): they could "
             "put lines of their own in the log. 'chmod go-w %s', or choose "
             "another file with %s", path, (unsigned)(sb.st_mode & 07777),
             path, setting);
  else if (sb.st_nlink != 1)
    snprintf(why, size, "%s has %lu names (hard links): another of them "
             "may be a file the log must not change. Remove it, or choose "
             "another file with %s", path, (unsigned long)sb.st_nlink,
             setting);
  else
    return true;
  return false;
}

static void log_init(void) {
  static const char *const names[] = {"off", "error", "warn", "info", "debug",
                                      "warning", "0", NULL};
  int i = xpj_env_word("XPJIT_LOG", names);
  log_errors = i >= 1 && i != 6;
  if (i >= 0 && i <= 4)
    log_level = (xpj_log_level)i;
  else if (i == 5)
    log_level = XPJ_LOG_WARN;
  else if (i == 6)
    log_level = XPJ_LOG_OFF;
  else if (i == -2)
    snprintf(log_problem, sizeof log_problem,
             "XPJIT_LOG=%.64s is not off, error, warn, info or debug; warn "
             "applies", xpj_env("XPJIT_LOG"));
  const char *file = xpj_env("XPJIT_LOG_FILE");
  if (file) {
    /* a file of the user's that only the user may write (MPI ranks of
     * one user share it): never through a link someone planted (it made
     * the user append to their ~/.bashrc), never another's file or a
     * FIFO (a reader that never reads blocked the program at its first
     * line). O_NONBLOCK: a FIFO nobody reads fails (ENXIO) instead of
     * blocking the program in open() */
    int fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY |
                  O_NONBLOCK | O_NOFOLLOW, 0600);
    char why[900];
    if (xpj_log_file_fit(fd, file, "XPJIT_LOG_FILE", why, sizeof why)) {
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      log_fd = fd;
    } else {
      if (fd >= 0)
        close(fd);
      if (!log_problem[0])
        snprintf(log_problem, sizeof log_problem,
                 "XPJIT_LOG_FILE=%s; the log goes to stderr", why);
    }
  }
}

xpj_log_level xpj_log_level_now(void) {
  pthread_once(&log_once, log_init);
  return log_level;
}

const char *xpj_log_setting_problem(void) {
  pthread_once(&log_once, log_init);
  return log_problem;
}

static void log_line(xpj_log_level l, const char *msg) {
  static const char *const word[] = {"", "error", "warning", "info", "debug"};
  char line[2048];
  int n;
  if (log_fd >= 0) {
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = snprintf(line, sizeof line,
                 "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ xpjit[%ld] %s: %s\n",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, (long)getpid(),
                 word[l], msg);
  } else {
    n = snprintf(line, sizeof line, "xpjit: %s: %s\n", word[l], msg);
  }
  if (n < 0)
    return;
  size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
  if ((size_t)n >= sizeof line)
    line[len - 1] = '\n'; /* cut, but still one line */
  int fd = log_fd >= 0 ? log_fd : STDERR_FILENO;
  for (size_t off = 0; off < len;) {
    ssize_t w = write(fd, line + off, len - off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return;
    off += (size_t)w;
  }
}

void xpj_log(xpj_log_level l, const char *fmt, ...) {
  if (l == XPJ_LOG_OFF || !xpj_log_on(l) || (l == XPJ_LOG_ERROR && !log_errors))
    return;
  char msg[1800];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  log_line(l, msg);
}

void xpj_log_warning(const char *msg) {
  if (xpj_log_on(XPJ_LOG_WARN))
    log_line(XPJ_LOG_WARN, msg);
}
