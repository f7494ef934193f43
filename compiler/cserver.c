/*
 * cserver.c - the compile server: one process per caller process, started
 * at its first isolated compile, with LLVM loaded and initialised once,
 * that forks a worker per compile from its own small image
 * (docs/abi.md, Isolation).
 *
 * The server is the executable xpjit-cc (libexec/xpjit/ next to the
 * library or the program, or XPJIT_COMPILE_SERVER), exec'd so that its
 * image holds nothing of the caller (exec'd from the descriptor its check
 * was made on: xpj_cs_spawn); where there is none it is a fork of the
 * caller. It keeps two spare workers, forked when a worker has ended
 * (not when a job comes: that made the job wait), which map the code and
 * data the server's warm-up touched while they wait for their jobs
 * (populate()): a job waits for no fork, and takes the page faults of
 * what its spare had not mapped yet when it came.
 *
 * A job, from the caller's side:
 *   1. a datagram on the server's control socket (SOCK_SEQPACKET): the
 *      job's time limit, the caller's build stamp, and two descriptors,
 *      the job socket and the error socket (SCM_RIGHTS);
 *   2. the server passes both to its spare, which becomes the job's
 *      worker, and forks the next spare;
 *   3. the caller writes the XPD_CJOB frame on the job socket; the worker
 *      reads it, compiles, writes the XPD_CRESULT frame there and exits;
 *      its stderr is the error socket;
 *   4. when the worker has ended, the server writes a footer (wait status,
 *      timed out, refused) after the worker's stderr and closes its copy.
 * The caller needs the footer only when the reply is incomplete; a job
 * whose server ended before the footer is run again by a new server.
 *
 * The server kills a worker at its job's deadline; it ends when the
 * caller's process has ended (a pidfd of it) or closed the control socket
 * (it kills its workers then); a worker ends with its server
 * (PR_SET_PDEATHSIG). Nothing here writes to the caller's stdout.
 */
#define _GNU_SOURCE
#include "llvm.h"
#include "worker.h"

#include "daemon.h" /* xpd_write_all, xpd_read_frame */
#include "ir_impl.h"
#include "proto.h"
#include "transfer.h"
#include "xpjit_compiler.h"
#include "xpjit_ir.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define CS_MAGIC 0x53504a58u /* "XPJS" */
#define CS_HELLO "XPJH" /* the server's first datagram, with its pidfd */
/* What must match between a caller and its server: this protocol, the
 * transfer encoding of modules and the ABI of what is compiled. */
#define CS_PROTO 2
#define CS_STAMP_LEN 32
#define FOOTER_MAGIC "XPJX"

typedef struct cs_submit {
  uint32_t magic;
  uint32_t timeout_ms;
  char stamp[CS_STAMP_LEN];
  /* the job's target (canonical, NUL-terminated): a server warms up for
   * the targets its jobs use (warm_up) */
  char target[1200];
} cs_submit;

static void make_stamp(char stamp[CS_STAMP_LEN]) {
  memset(stamp, 0, CS_STAMP_LEN);
  snprintf(stamp, CS_STAMP_LEN, "cs%u ir%u abi%u", CS_PROTO,
           XPJ_TRANSFER_VERSION, xpj_abi_version());
}

/* ---- the footer ------------------------------------------------------ */

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

/* Never blocks: a caller that stopped reading has its reply already. */
static void send_footer(int fd, int wait_status, unsigned flags) {
  uint8_t f[XPJ_CS_FOOTER];
  memcpy(f, FOOTER_MAGIC, 4);
  put32(f + 4, (uint32_t)wait_status);
  put32(f + 8, flags);
  ssize_t w = send(fd, f, sizeof f, MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)w;
}

int xpj_cs_footer(const char *buf, size_t *n, xpj_cs_end *e) {
  if (!buf || *n < XPJ_CS_FOOTER)
    return -1;
  const uint8_t *f = (const uint8_t *)buf + *n - XPJ_CS_FOOTER;
  if (memcmp(f, FOOTER_MAGIC, 4))
    return -1;
  e->wait_status = (int)get32(f + 4);
  e->flags = get32(f + 8);
  *n -= XPJ_CS_FOOTER;
  return 0;
}

/* ---- descriptors over a socket --------------------------------------- */

static int send_fds(int sock, const void *data, size_t len, const int *fds,
                    int nfds, int flags) {
  char ctl[CMSG_SPACE(2 * sizeof(int))];
  memset(ctl, 0, sizeof ctl);
  struct iovec io = {(void *)data, len};
  struct msghdr mh = {0};
  mh.msg_iov = &io;
  mh.msg_iovlen = 1;
  if (nfds > 0) {
    mh.msg_control = ctl;
    mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
    memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
  }
  ssize_t w;
  do
    w = sendmsg(sock, &mh, MSG_NOSIGNAL | flags);
  while (w < 0 && errno == EINTR);
  return w == (ssize_t)len ? 0 : -1;
}

/* Receives a datagram and exactly two descriptors (close-on-exec); any
 * other number is closed and counts as none. Bytes read, 0 at end of
 * stream, -1 on error. */
static ssize_t recv_fds(int sock, void *data, size_t len, int fds[2]) {
  char ctl[CMSG_SPACE(8 * sizeof(int))];
  struct iovec io = {data, len};
  struct msghdr mh = {0};
  mh.msg_iov = &io;
  mh.msg_iovlen = 1;
  mh.msg_control = ctl;
  mh.msg_controllen = sizeof ctl;
  fds[0] = fds[1] = -1;
  ssize_t n;
  do
    n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  int got[8], ngot = 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
      continue;
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k && ngot < 8; i++)
      memcpy(&got[ngot++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
  }
  if (ngot == 2 && !(mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC))) {
    fds[0] = got[0];
    fds[1] = got[1];
  } else {
    for (int i = 0; i < ngot; i++)
      close(got[i]);
  }
  return n;
}

/* Closes every descriptor from 3 up but fd (moved to 3 or above first
 * when it is below): what a forked child keeps of its parent's
 * descriptors. It needs no descriptor beyond those it has: a caller's
 * RLIMIT_NOFILE of 10 leaves room. */
static int keep_only(int fd) {
  int keep = fd >= 3 ? fd : fcntl(fd, F_DUPFD, 3);
  if (keep < 0)
    _exit(XPJ_WORKER_NO_FDS);
  if (keep > 3)
    close_range(3, (unsigned)keep - 1, 0);
  close_range((unsigned)keep + 1, ~0u, 0);
  return keep;
}

static void default_signals(void) {
  for (int sig = 1; sig < NSIG; sig++)
    if (sig != SIGKILL && sig != SIGSTOP)
      signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
}

/* ---- the worker's side ----------------------------------------------- */

int xpj_cs_job_decode(const uint8_t *payload, size_t n, xpj_job *j,
                      xpj_module **mp, xpj_target *t, char *why,
                      size_t whysize) {
  memset(j, 0, sizeof *j);
  *mp = NULL;
  xpd_msg m;
  xpd_err e = xpd_payload_decode(payload, n, &m);
  const uint8_t *mod = NULL;
  size_t modlen = 0;
  char kernel[XPD_MAX_STRING], target[1200], err[256];
  uint64_t opt, fast, debug, checks, timeout, emit, mem, contract = 0;
  if (e == XPD_E_OK &&
      ((e = xpd_get_bytes(&m, XPD_F_MODULE, false, SIZE_MAX, &mod,
                          &modlen)) ||
       (e = xpd_get_str(&m, XPD_F_KERNEL, false, kernel, sizeof kernel)) ||
       (e = xpd_get_str(&m, XPD_F_TARGET, false, target, sizeof target)) ||
       (e = xpd_get_u64(&m, XPD_F_OPT_LEVEL, false, &opt)) ||
       (e = xpd_get_u64(&m, XPD_F_FAST_MATH, false, &fast)) ||
       (e = xpd_get_u64(&m, XPD_F_DEBUG, false, &debug)) ||
       (e = xpd_get_u64(&m, XPD_F_CHECKS, false, &checks)) ||
       (e = xpd_get_u64(&m, XPD_F_CONTRACT, true, &contract)) ||
       (e = xpd_get_u64(&m, XPD_F_TIMEOUT, false, &timeout)) ||
       (e = xpd_get_u64(&m, XPD_F_EMIT, false, &emit)) ||
       (e = xpd_get_u64(&m, XPD_F_MEMORY, false, &mem)) ||
       (e = xpd_get_str(&m, XPD_F_FAULT, false, j->fault, sizeof j->fault)) ||
       (e = xpd_get_str(&m, XPD_F_LIBDEVICE, false, j->libdevice,
                        sizeof j->libdevice)))) {
    /* e says what was wrong */
  }
  if (e != XPD_E_OK) {
    snprintf(why, whysize, "a malformed job: %s", xpd_err_str(e));
    return -1;
  }
  if (opt > 3 || fast > 1 || debug > 1 || (checks & ~(uint64_t)XPJ_CHECK_ALL) ||
      timeout > UINT32_MAX || emit > XPJ_EMIT_LLVM) {
    snprintf(why, whysize, "a job with options out of range");
    return -1;
  }
  if (xpj_target_parse(target, t, err, sizeof err) != XPJ_OK) {
    snprintf(why, whysize, "the job's target: %s", err);
    return -1;
  }
  if (xpj_module_decode(mod, modlen, mp, err, sizeof err) != XPJ_OK) {
    snprintf(why, whysize, "the job's module: %s", err);
    return -1;
  }
  const xpj_func *k = xpj_module_find(*mp, kernel);
  if (!k || k->kind == XPJ_FUNC_DEVICE || xpj_generic_reachable(*mp, k)) {
    snprintf(why, whysize, "the job's kernel '%.200s' is not a specialised "
             "kernel of its module", kernel);
    xpj_module_destroy(*mp);
    *mp = NULL;
    return -1;
  }
  j->m = *mp;
  j->kernel = k;
  j->target = t;
  xpj_compile_opts_default(&j->opts);
  j->opts.opt_level = (unsigned)opt;
  j->opts.fast_math = (int)fast;
  j->opts.debug_info = (int)debug;
  j->opts.checks = (unsigned)checks;
  j->opts.fp_contract = contract != 0;
  j->opts.timeout_ms = (unsigned)timeout;
  j->emit = (xpj_emit_kind)emit;
  j->memory_limit = mem;
  xpj_entry_name(kernel, j->entry, sizeof j->entry);
  return 0;
}

/* What a worker would otherwise fault in page by page while it compiles,
 * set up by its spare before the job arrives (populate), as far as it
 * gets before the job comes.
 *
 * A fork does not copy the page-table entries of file mappings that have
 * no private pages (LLVM's code and read-only data): the child faults in
 * again every page it touches. The server records which pages of those
 * mappings its own start and warm-up touched (present in its page
 * tables, /proc/self/pagemap), and a spare maps just those (one page
 * in each window the kernel's fault-around maps at once). A worker's first
 * write to a page of the heap or of the libraries' data copies the
 * server's (copy on write): a spare makes those copies first, of the
 * pages present in the server (MADV_POPULATE_WRITE, Linux 5.14); they
 * are 2-3 MiB.
 *
 * (Making fork copy the code's page-table entries instead, by giving the
 * mappings a private page through /proc/self/mem, cost the server's fork
 * 0.7 ms more and made compiles 0.5 ms slower: the copies are marked
 * not accessed, and the first access to each page sets that bit;
 * docs/benchmarks.md.) */
typedef struct cs_range {
  uintptr_t lo, hi;
} cs_range;

typedef struct cs_ranges {
  cs_range *r;
  size_t n, cap;
} cs_ranges;

/* recorded by the server once (record_touched), mapped by every spare */
static cs_ranges touched, data;
#define PAGES_SLICE (256u << 10) /* between two looks for a job */

static void range_add(cs_ranges *l, uintptr_t lo, uintptr_t hi) {
  if (l->n && l->r[l->n - 1].hi == lo) {
    l->r[l->n - 1].hi = hi;
    return;
  }
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 256;
    cs_range *r = realloc(l->r, cap * sizeof *r);
    if (!r)
      return;
    l->r = r;
    l->cap = cap;
  }
  l->r[l->n++] = (cs_range){lo, hi};
}

/* The present pages of [lo, hi) in this process, page by page from
 * pagemap (pm), into l. */
static void add_present(cs_ranges *l, int pm, unsigned long lo,
                        unsigned long hi, unsigned long psz) {
  uint64_t ent[512];
  for (unsigned long a = lo; a < hi;) {
    size_t n = (hi - a) / psz;
    if (n > 512)
      n = 512;
    ssize_t got = pread(pm, ent, n * sizeof *ent, (off_t)(a / psz * sizeof *ent));
    if (got <= 0)
      return;
    n = (size_t)got / sizeof *ent;
    for (size_t i = 0; i < n; i++, a += psz)
      if (ent[i] >> 63) /* present */
        range_add(l, a, a + psz);
  }
}

/* After the warm-up: which pages of the read-only file mappings are
 * present (touched), and which of the heap and the libraries' data (a
 * private writable mapping of a file: a path, not a bracketed name or
 * none), pages a worker would copy on its first write to each (data). */
static void record_touched(void) {
  touched.n = data.n = 0; /* again after each warm-up: what it added */
  FILE *f = fopen("/proc/self/maps", "re");
  int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  long psz = sysconf(_SC_PAGESIZE);
  char line[600];
  while (f && pm >= 0 && psz > 0 && fgets(line, sizeof line, f)) {
    unsigned long lo, hi, off, inode;
    char perm[5], dev[16];
    if (sscanf(line, "%lx-%lx %4s %lx %15s %lu", &lo, &hi, perm, &off, dev,
               &inode) != 6)
      continue;
    if (!strcmp(perm, "rw-p") && (strstr(line, "[heap]") || strchr(line, '/')) &&
        hi - lo <= (64ul << 20))
      add_present(&data, pm, lo, hi, (unsigned long)psz);
    else if (perm[0] == 'r' && perm[1] != 'w' && inode)
      add_present(&touched, pm, lo, hi, (unsigned long)psz);
  }
  if (f)
    fclose(f);
  if (pm >= 0)
    close(pm);
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Copies the pages of [lo, hi) a slice at a time (MADV_POPULATE_WRITE);
 * false once a job has come (sock readable). */
static bool populate_write(uintptr_t lo, uintptr_t hi, int sock) {
  struct pollfd pf = {sock, POLLIN, 0};
  for (uintptr_t a = lo; a < hi; a += PAGES_SLICE) {
    if (poll(&pf, 1, 0) != 0)
      return false;
    madvise((void *)a, hi - a < PAGES_SLICE ? hi - a : PAGES_SLICE,
            MADV_POPULATE_WRITE);
  }
  return true;
}

/* The recorded data pages copied; false once a job has come. */
static bool populate_data(int sock) {
  for (size_t i = 0; i < data.n; i++)
    if (!populate_write(data.r[i].lo, data.r[i].hi, sock))
      return false;
  return true;
}

/* Maps the recorded pages of code and read-only data: one page in each
 * FAULT_AROUND window that has one, the kernel's fault-around maps the
 * window's other pages with it (MADV_POPULATE_READ over every page took
 * each on its own: 4-5 ms for 40 MiB, where this takes about a quarter).
 * With madvise rather than a read: a mapping gone or a file truncated
 * since it was recorded is an error, not a signal. False once a job has
 * come. */
#define FAULT_AROUND (64u << 10)
static bool populate_code(int sock) {
  struct pollfd pf = {sock, POLLIN, 0};
  uintptr_t done = 0, polled = 0; /* the end of the last window mapped */
  for (size_t i = 0; i < touched.n; i++)
    for (uintptr_t a = touched.r[i].lo > done ? touched.r[i].lo : done;
         a < touched.r[i].hi; a = done) {
      if (a - polled >= PAGES_SLICE) {
        if (poll(&pf, 1, 0) != 0)
          return false;
        polled = a;
      }
      madvise((void *)a, 1, MADV_POPULATE_READ);
      done = (a | (FAULT_AROUND - 1)) + 1;
    }
  return true;
}

/* The data first: a page a worker writes costs it a fault and a copy. A
 * job that comes meanwhile is served at once, its worker faults in the
 * rest: done at once, the populate (5-8 ms of CPU) held up the second of
 * two jobs sent back to back, whose spare was still at it. */
static bool populate(int sock) {
  return populate_data(sock) && populate_code(sock);
}

/* What a worker allocates itself: the heap it grows beyond the server's
 * and the blocks malloc maps apart are pages it would fault in one at a
 * time while it compiles (280-390 for a loop kernel: 260-610 KiB of heap
 * growth and a few large blocks; about 1 us each here). Every spare keeps
 * what its worker frees and takes large blocks from the heap
 * (xpj_worker_keep_heap). Once it has waited PAD_AFTER_MS for its job, it
 * also grows its heap by HEAP_PAD and maps it (pad_heap), a slice at a
 * time, stopping when the job comes: idle-time work. Made at once, the pad
 * ran beside the worker before it on a machine of two CPUs and made
 * back-to-back compiles 20% slower (8 MiB: 2.8 ms of CPU; an adversarial
 * review, docs/benchmarks.md). Not in a server forked from its caller,
 * whose heap is the caller's. A job whose memory limit is not well above
 * the pad gets it back first (spare_main: the limit counts free heap as
 * used). The pad costs each spare HEAP_PAD of memory while it waits. */
#define HEAP_PAD (2u << 20)
#define PAD_AFTER_MS 10

static bool cs_forked; /* this server is a fork of its caller */

/* Whether the heap was grown (and mapped, up to the job's arrival) */
static bool pad_heap(int sock) {
  char *lo = sbrk(0);
  char *volatile p = malloc(HEAP_PAD);
  if (!p)
    return false;
  p[HEAP_PAD - 1] = 0; /* (the pair is not optimised away) */
  free(p);
  char *hi = sbrk(0); /* (== lo where malloc does not use the heap) */
  populate_write((uintptr_t)lo, (uintptr_t)hi, sock);
  return true;
}

/* A spare: waits for its job on sock, then is its worker. */
static _Noreturn void spare_main(int sock, pid_t server) {
  default_signals();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != server)
    _exit(0);
  /* a job that comes while the spare prepares is served at once */
  struct pollfd pf = {sock, POLLIN, 0};
  bool padded = false;
  xpj_worker_keep_heap();
  if (populate(sock) && !cs_forked && poll(&pf, 1, PAD_AFTER_MS) == 0)
    padded = pad_heap(sock);
  cs_submit s;
  int fds[2];
  ssize_t n = recv_fds(sock, &s, sizeof s, fds);
  if (n != (ssize_t)sizeof s || fds[0] < 0)
    _exit(0);
  /* the job socket as fd 3, the error socket as stderr (both first
   * where neither dup2 can close the other) */
  int job = fcntl(fds[0], F_DUPFD, 4), err = fcntl(fds[1], F_DUPFD, 4);
  if (job < 0 || err < 0 || dup2(err, 2) < 0 || dup2(job, 3) < 0)
    _exit(XPJ_WORKER_NO_FDS);
  close_range(4, ~0u, 0);
  uint32_t timeout = s.timeout_ms ? s.timeout_ms : XPJ_COMPILE_TIMEOUT_MS;
  xpd_header h;
  uint8_t *payload = NULL;
  char why[300];
  xpd_err e = xpd_read_frame(3, XPD_MAX_REPLY, xpd_now_ms() + timeout, &h,
                             &payload, why, sizeof why);
  if (e != XPD_E_OK || h.op != XPD_CJOB)
    _exit(0); /* the caller is gone, or sent nothing of ours */
  xpj_job j;
  xpj_module *m;
  xpj_target t;
  if (xpj_cs_job_decode(payload, h.len, &j, &m, &t, why, sizeof why) != 0)
    xpj_worker_fail(3, XPJ_ERR_INVALID, why);
  free(payload);
  if (padded && j.memory_limit && j.memory_limit < 4 * (uint64_t)HEAP_PAD)
    malloc_trim(0);
  xpj_worker_run(3, &j);
}

/* ---- the server ------------------------------------------------------ */

typedef struct cs_worker {
  pid_t pid;
  int err;         /* where its footer goes */
  uint64_t deadline; /* xpd_now_ms */
  bool timed_out;
  char target[sizeof ((cs_submit *)0)->target]; /* its job's */
} cs_worker;

enum { NSPARE = 2, NWARM = 8 };

typedef struct cs_server {
  int ctl, sigfd;
  pid_t self;
  pid_t spare[NSPARE]; /* the first nspare, oldest first */
  int spare_sock[NSPARE];
  unsigned nspare;
  cs_worker *w;
  size_t n, cap;
  char stamp[CS_STAMP_LEN];
  /* the targets warmed up for (warm_up), and one a worker made a binary
   * for that is not yet (wanted, "" if none) */
  char warmed[NWARM][sizeof ((cs_submit *)0)->target];
  unsigned nwarmed;
  char wanted[sizeof ((cs_submit *)0)->target];
  uint64_t last_busy; /* xpd_now_ms when a job came or a worker ended */
} cs_server;

/* One more spare, when there is room for it. */
static void fork_spare(cs_server *S) {
  int sv[2];
  if (S->nspare == NSPARE ||
      socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return;
  pid_t pid = fork();
  if (pid == 0)
    spare_main(keep_only(sv[1]), S->self);
  close(sv[1]);
  if (pid < 0) {
    close(sv[0]);
    return;
  }
  S->spare[S->nspare] = pid;
  S->spare_sock[S->nspare++] = sv[0];
}

/* Forgets spare i (its process is the caller's business). */
static void drop_spare(cs_server *S, unsigned i) {
  close(S->spare_sock[i]);
  for (unsigned j = i; j + 1 < S->nspare; j++) {
    S->spare[j] = S->spare[j + 1];
    S->spare_sock[j] = S->spare_sock[j + 1];
  }
  S->nspare--;
}

static void kill_spares(cs_server *S) {
  while (S->nspare) {
    kill(S->spare[0], SIGKILL);
    drop_spare(S, 0);
  }
}

/* A job from the control socket; -1 when the caller has gone. */
static int take_job(cs_server *S) {
  cs_submit s;
  int fds[2];
  ssize_t n = recv_fds(S->ctl, &s, sizeof s, fds);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
    return -1;
  if (fds[0] < 0)
    return 0; /* not a job */
  if (n != (ssize_t)sizeof s || s.magic != CS_MAGIC ||
      memcmp(s.stamp, S->stamp, CS_STAMP_LEN) != 0) {
    send_footer(fds[1], 0, XPJ_CS_REFUSED);
    close(fds[0]);
    close(fds[1]);
    return 0;
  }
  bool sent = false;
  for (int attempt = 0; attempt < NSPARE + 1 && !sent; attempt++) {
    if (!S->nspare)
      fork_spare(S);
    if (!S->nspare)
      break;
    sent = send_fds(S->spare_sock[0], &s, sizeof s, fds, 2, 0) == 0;
    if (!sent) { /* it died before its job: the next one */
      kill(S->spare[0], SIGKILL);
      drop_spare(S, 0);
    }
  }
  close(fds[0]);
  if (sent && S->n == S->cap) {
    size_t cap = S->cap ? 2 * S->cap : 8;
    cs_worker *w = realloc(S->w, cap * sizeof *w);
    if (w) {
      S->w = w;
      S->cap = cap;
    }
  }
  if (!sent || S->n == S->cap) {
    if (sent) { /* no room to watch it: it must not run unwatched */
      kill(S->spare[0], SIGKILL);
      drop_spare(S, 0);
    }
    send_footer(fds[1], 0, XPJ_CS_NO_WORKER);
    close(fds[1]);
    return 0;
  }
  uint32_t timeout = s.timeout_ms ? s.timeout_ms : XPJ_COMPILE_TIMEOUT_MS;
  S->last_busy = xpd_now_ms();
  cs_worker *w = &S->w[S->n++];
  *w = (cs_worker){S->spare[0], fds[1], xpd_now_ms() + timeout, false, ""};
  s.target[sizeof s.target - 1] = 0;
  snprintf(w->target, sizeof w->target, "%s", s.target);
  /* the spares are made again when a worker has ended: made while one
   * compiles, a spare took 1.5-2 ms from the compile (page tables and
   * caches shared on 2 cores; docs/benchmarks.md) */
  drop_spare(S, 0);
  return 0;
}

/* A target a worker compiled a binary for (it exits 0 only then:
 * xpj_worker_run), to warm up for when the server is idle: never SPIR-V,
 * whose backend keeps state between modules. */
static void want_warm(cs_server *S, const char *target) {
  xpj_target t;
  if (!target[0] || xpj_target_parse(target, &t, NULL, 0) != XPJ_OK ||
      t.kind == XPJ_TARGET_SPIRV || S->nwarmed == NWARM)
    return;
  for (unsigned i = 0; i < S->nwarmed; i++)
    if (!strcmp(S->warmed[i], target))
      return;
  snprintf(S->wanted, sizeof S->wanted, "%s", target);
}

static void reap(cs_server *S) {
  struct signalfd_siginfo si;
  while (read(S->sigfd, &si, sizeof si) > 0)
    ;
  int st;
  pid_t pid;
  while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
    bool spare = false;
    for (unsigned i = 0; i < S->nspare && !spare; i++)
      if (pid == S->spare[i]) {
        drop_spare(S, i);
        spare = true;
      }
    if (spare)
      continue;
    for (size_t i = 0; i < S->n; i++) {
      if (S->w[i].pid != pid)
        continue;
      send_footer(S->w[i].err, st, S->w[i].timed_out ? XPJ_CS_TIMED_OUT : 0);
      close(S->w[i].err);
      if (WIFEXITED(st) && WEXITSTATUS(st) == XPJ_WORKER_COMPILED)
        want_warm(S, S->w[i].target);
      S->w[i] = S->w[--S->n];
      S->last_busy = xpd_now_ms();
      while (S->nspare < NSPARE) {
        unsigned had = S->nspare;
        fork_spare(S);
        if (S->nspare == had)
          break;
      }
      break;
    }
  }
}

/* Kills workers past their deadline; the poll timeout to the next one. */
static int enforce_deadlines(cs_server *S) {
  uint64_t now = xpd_now_ms();
  int64_t next = -1;
  for (size_t i = 0; i < S->n; i++) {
    cs_worker *w = &S->w[i];
    if (w->timed_out)
      continue;
    if (w->deadline <= now) {
      kill(w->pid, SIGKILL);
      w->timed_out = true;
    } else if (next < 0 || (int64_t)(w->deadline - now) < next) {
      next = (int64_t)(w->deadline - now);
    }
  }
  return next < 0 ? -1 : (int)next + 1;
}

static _Noreturn void shut_down(cs_server *S) {
  for (size_t i = 0; i < S->n; i++)
    kill(S->w[i].pid, SIGKILL);
  kill_spares(S);
  _exit(0);
}

/* One small compile for target in this process, so that what LLVM sets
 * up at its first use of a target (option tables, target registries, pass
 * pipelines, the target machine itself: compile_llvm.c keeps it) is done
 * once here, not in every worker. Not SPIR-V: its backend keeps state
 * between modules (docs/abi.md), which workers must not inherit. Whether
 * the server is warm for target, now or before. */
static bool warm_up(cs_server *S, const char *target) {
  static const char src[] =
      "kernel xpj_warm_up(x: global f32[], a: f32) range {\n"
      "    let i = global_id(0);\n"
      "    if i < size(x) { x[i] = x[i] * a + 1.0; }\n"
      "}\n";
  xpj_target t;
  if (S->nwarmed == NWARM ||
      xpj_target_parse(target, &t, NULL, 0) != XPJ_OK ||
      t.kind == XPJ_TARGET_SPIRV)
    return false;
  char canon[sizeof S->warmed[0]];
  xpj_target_str(&t, canon, sizeof canon);
  for (unsigned i = 0; i < S->nwarmed; i++)
    if (!strcmp(S->warmed[i], canon))
      return true;
  memcpy(S->warmed[S->nwarmed++], canon, sizeof canon);
  xpj_module *m = NULL;
  if (xpj_module_create(&m) == XPJ_OK &&
      xpj_parse(m, "warm-up", src, sizeof src - 1, NULL) == XPJ_OK) {
    xpj_compile_opts o;
    xpj_compile_opts_default(&o);
    o.isolation = XPJ_ISOLATE_NONE;
    xpj_result *r = NULL;
    xpj_compile(m, "xpj_warm_up", &t, &o, XPJ_EMIT_BIN, &r);
    xpj_result_destroy(r);
  }
  xpj_module_destroy(m);
  /* and libdevice, for the workers of PTX jobs that call it */
  const xpj_llvm_api *api = xpj_llvm(NULL, 0);
  if (t.kind == XPJ_TARGET_PTX && api)
    api->read_ahead(xpj_libdevice_path());
  return true;
}

/* What a cold server warms up for beside a running worker: a target a
 * worker has made a binary for (want_warm), else the default of the
 * running worker's kind; never a target no worker has compiled for: a
 * target LLVM fails on with a fatal error (cpu:i386:, a CPU without the
 * 64-bit mode of x86-64 code) would end the server, not a worker. NULL:
 * none (SPIR-V). */
static const char *busy_target(const cs_server *S) {
  xpj_target t;
  if (S->wanted[0])
    return S->wanted;
  if (xpj_target_parse(S->w[0].target, &t, NULL, 0) != XPJ_OK)
    return NULL;
  return t.kind == XPJ_TARGET_PTX   ? "ptx:sm_90"
         : t.kind == XPJ_TARGET_CPU ? "cpu:x86-64"
                                    : NULL;
}

/* How far the server has warmed up (warm_when_idle) */
typedef enum { CS_COLD, CS_WARM_FIRST, CS_WARM } cs_warmth;

/* No job and no worker for this long: idle. A pause of a fraction of a
 * millisecond between two jobs of a stream (the caller preparing the
 * next) started a warm-up of 15-20 ms that the next job waited for. */
#define IDLE_MS 10

/* Warms up while no job waits. Idle (IDLE_MS without a job or a
 * worker): for the usual targets first, then for each target a job has
 * used since (want_warm). Cold with a worker running: for one target
 * only (busy_target), beside it (the next job may wait for it, once; the
 * server enforces no deadline meanwhile, 10-20 ms): a stream
 * of jobs that never left the server idle kept it cold, and every worker
 * set up LLVM's target and pipelines again (a small PTX kernel compiled
 * back to back: 3.9 ms a compile, 1.7 ms from a warm server;
 * docs/benchmarks.md). The spares are made again to inherit it. Returns
 * in how many ms to look again (the server is not idle yet), or -1. */
static int warm_when_idle(cs_server *S, cs_warmth *warm, struct pollfd *ctl) {
  bool busy = S->n != 0;
  if (busy ? *warm != CS_COLD : *warm == CS_WARM && !S->wanted[0])
    return -1;
  uint64_t quiet = xpd_now_ms() - S->last_busy;
  if (!busy && quiet < IDLE_MS)
    return (int)(IDLE_MS - quiet);
  if (poll(ctl, 1, 0) != 0)
    return -1; /* the job first; then here again */
  /* nobody waits for this server's exit: a warm-up that never ends must
   * not leave it running */
  alarm(60);
  if (busy) {
    const char *t = busy_target(S);
    if (!t || !warm_up(S, t))
      return -1; /* (a target it does not warm up for) */
    if (t == S->wanted)
      S->wanted[0] = 0;
  } else {
    if (*warm != CS_WARM) {
      warm_up(S, "ptx:sm_90");
      warm_up(S, "cpu:x86-64");
    }
    if (S->wanted[0]) /* the first job's target too */
      warm_up(S, S->wanted);
    S->wanted[0] = 0;
  }
  /* the code generators and pipelines of the machines the warm-ups
   * made, for workers */
  const xpj_llvm_api *api = xpj_llvm(NULL, 0);
  if (api)
    api->emit_ahead();
  record_touched();
  alarm(0);
  *warm = busy ? CS_WARM_FIRST : CS_WARM;
  /* warm spares, not cold; beside a worker too: the next job's spare
   * has the rest of this one's compile to map what it will use */
  kill_spares(S);
  fork_spare(S);
  fork_spare(S);
  return -1;
}

/* The server is not the caller's child for the caller's life: a program
 * that waits for all of its children (wait(NULL) until ECHILD) would wait
 * for it. The process the caller started forks the server and ends at
 * once (the caller reaps it); the server says hello on the control socket
 * with a pidfd of itself, which the caller can kill without the risk of
 * hitting a process that has taken its pid. It ends with the caller all
 * the same: at the end of file of the control socket. */
static void detach(int ctl) {
  pid_t p = fork();
  if (p != 0)
    _exit(p < 0 ? 3 : 0);
  int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
  static const char hello[4] = CS_HELLO;
  send_fds(ctl, hello, sizeof hello, &pidfd, pidfd >= 0 ? 1 : 0, 0);
  if (pidfd >= 0)
    close(pidfd);
}

void xpj_cs_main(int ctl) {
  /* the caller's process (this one's parent until detach): the server
   * ends when it does, even while a child it forked holds a copy of the
   * control socket (-1 without pidfds: then at the socket's end) */
  int owner = (int)syscall(SYS_pidfd_open, getppid(), 0);
  detach(ctl);
  signal(SIGPIPE, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  cs_server S = {.ctl = ctl,
                 .sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK),
                 .self = getpid()};
  if (S.sigfd < 0)
    _exit(3);
  make_stamp(S.stamp);
  const xpj_llvm_api *api = xpj_llvm(NULL, 0);
  if (!api)
    _exit(3); /* the caller falls back to a fork of itself */
  api->init();
  /* The first spare is cold. A job waiting already (a process's first
   * compile: it sent the job right after starting the server) is given to
   * it at once; the warm-up, a compile per target, waits until no job
   * does (warm_when_idle). Run first, it made that job wait for it: a
   * fresh process's first PTX compile took 35-37 ms, 26-30 ms so; run
   * alongside the job, it may make the next job wait, once. */
  fork_spare(&S);
  cs_warmth warm = CS_COLD;
  for (;;) {
    struct pollfd pf[3] = {
        {S.ctl, POLLIN, 0}, {S.sigfd, POLLIN, 0}, {owner, POLLIN, 0}};
    int idle_in = warm_when_idle(&S, &warm, pf);
    int timeout = enforce_deadlines(&S);
    if (idle_in >= 0 && (timeout < 0 || idle_in < timeout))
      timeout = idle_in;
    int pr = poll(pf, owner >= 0 ? 3 : 2, timeout);
    if (pr < 0 && errno != EINTR)
      shut_down(&S);
    if (pr <= 0)
      continue;
    if (owner >= 0 && pf[2].revents)
      shut_down(&S); /* the caller's process has ended */
    if (pf[1].revents)
      reap(&S);
    if ((pf[0].revents & (POLLIN | POLLHUP | POLLERR)) && take_job(&S) != 0)
      shut_down(&S);
  }
}

/* ---- the caller's side ----------------------------------------------- */

static pthread_mutex_t cs_mu = PTHREAD_MUTEX_INITIALIZER;
/* held while a job's socket pairs exist with their far ends here
 * (send_job_locked); taken by a fork's prepare handler; after cs_mu */
static pthread_mutex_t pair_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t cs_atfork_once = PTHREAD_ONCE_INIT;
static struct {
  int ctl;        /* -1: no server */
  dev_t dev;      /* what ctl is (fstat): a program that closes every */
  ino_t ino;      /* descriptor may have reused its number since */
  pid_t pid;      /* the process that started the server: this process's
                     child until reaped (the server itself is not) */
  pid_t owner;    /* the process that started it */
  unsigned gen;   /* which server: abandoning an old one is a no-op */
  bool exe_bad;   /* the executable refused our jobs: fork instead */
} cs = {-1, 0, 0, 0, 0, 0, false};

/* The server's pidfd from its hello, waiting on ctl: -1 when the hello
 * came without one, -2 when no hello came. */
static int take_pidfd(int ctl) {
  char buf[8], cm[CMSG_SPACE(sizeof(int))];
  struct iovec io = {buf, sizeof buf};
  struct msghdr mh = {0};
  mh.msg_iov = &io;
  mh.msg_iovlen = 1;
  mh.msg_control = cm;
  mh.msg_controllen = sizeof cm;
  ssize_t n = recvmsg(ctl, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  bool hello = n == 4 && memcmp(buf, CS_HELLO, 4) == 0;
  int fd = -1;
  struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
  if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
      c->cmsg_len == CMSG_LEN(sizeof(int)))
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
  if (fd >= 0 && !hello) { /* not ours to keep */
    close(fd);
    fd = -1;
  }
  return hello ? fd : -2;
}

/* Ends the server: killed through its pidfd when its hello (on ctl, when
 * ctl >= 0) has come, else left to end at its control socket's end of
 * file; and reaps the process that started it (unless it is no longer
 * this process's child: a program that reaps every child may have reaped
 * it, and its pid may be another process's now). Whether a hello came. */
static bool end_server(int ctl) {
  int pidfd = ctl >= 0 ? take_pidfd(ctl) : -2;
  if (pidfd >= 0) {
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    close(pidfd);
  }
  if (cs.pid > 0 && waitpid(cs.pid, NULL, WNOHANG) == 0) {
    kill(cs.pid, SIGKILL);
    waitpid(cs.pid, NULL, 0);
  }
  cs.pid = 0;
  return pidfd != -2;
}

/* Whether cs.ctl is still the socket this library made: else it is
 * forgotten (never closed: the number is someone else's now). */
static bool ctl_ours(void) {
  struct stat st;
  if (cs.ctl < 0)
    return false;
  if (fstat(cs.ctl, &st) == 0 && st.st_dev == cs.dev && st.st_ino == cs.ino)
    return true;
  cs.ctl = -1;
  if (cs.owner == getpid())
    end_server(-1);
  return false;
}

/* A fork waits while a job's socket pairs are made and sent
 * (send_job_locked). A child forked while another thread held cs_mu would
 * find it held forever: it gets fresh ones (it has one thread; its server
 * is its own, xpj_cs_submit sees to that). */
static void cs_prepare(void) { pthread_mutex_lock(&pair_mu); }
static void cs_parent(void) { pthread_mutex_unlock(&pair_mu); }
static void cs_child(void) {
  pthread_mutex_init(&cs_mu, NULL);
  pthread_mutex_init(&pair_mu, NULL);
}
static void cs_atfork(void) { pthread_atfork(cs_prepare, cs_parent, cs_child); }

#ifndef XPJ_LIBEXECDIR
#define XPJ_LIBEXECDIR NULL
#endif

/* XPJIT_COMPILE_SERVER ("fork": none), else libexec/xpjit/xpjit-cc beside
 * the library's directory, beside the program's, in the install prefix;
 * only an executable regular file of root or of this user, which nobody
 * else may write: opened, and checked by that descriptor, which is then
 * what xpj_cs_spawn runs (xpj_trusted_open). */
int xpj_cs_open_exe(char *path, size_t size) {
  static const char *const rels[] = {"/../libexec/xpjit", NULL};
  const char *env = getenv("XPJIT_COMPILE_SERVER");
  if (env && !strcmp(env, "fork"))
    return -1;
  if (!xpj_own_file(env, rels, rels, XPJ_LIBEXECDIR, "xpjit-cc", path, size))
    return -1;
  int fd = xpj_trusted_open(path, true);
  return fd < 0 ? -1 : fd;
}

bool xpj_cs_find_exe(char *path, size_t size) {
  int fd = xpj_cs_open_exe(path, size);
  if (fd >= 0)
    close(fd);
  return fd >= 0;
}

/* posix_spawn (no fork of this process's memory, no atfork handlers) of
 * the file open at exe: as its descriptor 4 in the child (not close on
 * exec there: a script's interpreter opens it by that name too), exec'd
 * as /proc/self/fd/4, which is that file whatever is at its path now. The
 * server closes 4 at once (tools/xpjit-cc.c) and names itself xpjit-cc
 * (exec names a process after the file name it was given, "4"). Without
 * /proc the spawn fails, and a fork of this process serves. */
pid_t xpj_cs_spawn(int exe, int ctl) {
  /* exe moves to 4 after ctl to 3: neither may sit where the other goes */
  int e = exe >= 5 ? exe : fcntl(exe, F_DUPFD_CLOEXEC, 5);
  if (e < 0 || ctl < 4 || ctl == e) {
    if (e >= 0 && e != exe)
      close(e);
    errno = e < 0 ? errno : EINVAL;
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  posix_spawn_file_actions_adddup2(&fa, ctl, 3);
  posix_spawn_file_actions_adddup2(&fa, e, 4);
  /* nothing else of the caller's: a pipe's write end kept open in the
   * server would keep its reader from ever seeing its end */
  posix_spawn_file_actions_addclosefrom_np(&fa, 5);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &all);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  char *argv[] = {"xpjit-cc", "--serve", NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, "/proc/self/fd/4", &fa, &at, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  if (e != exe)
    close(e);
  if (rc != 0)
    errno = rc;
  return rc == 0 ? pid : -1;
}

static pid_t fork_server(int fd, char *why, size_t whysize) {
  /* LLVM (the plugin) is loaded here, before the fork: not in a child of
   * a process whose other threads may hold the loader's locks */
  if (xpj_llvm_fork_begin(why, whysize) != 0)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    xpj_llvm_fork_end(true);
    cs_forked = true;
    default_signals();
    int keep = keep_only(fd);
    if (keep != 3 && (dup2(keep, 3) < 0 || close(keep) != 0))
      _exit(3);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
    }
    xpj_cs_main(3);
  }
  xpj_llvm_fork_end(false);
  return pid;
}

/* Ends this process's server; false when it never said hello. */
static bool stop_locked(void) {
  bool hello = true;
  if (!ctl_ours())
    return hello;
  if (cs.owner == getpid()) {
    hello = end_server(cs.ctl);
    close(cs.ctl);
  } else {
    close(cs.ctl); /* a forked child's copy: the parent's server */
  }
  cs.ctl = -1;
  cs.pid = 0;
  return hello;
}

static int start_locked(char *why, size_t whysize) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    snprintf(why, whysize, "socketpair: %s", strerror(errno));
    return -1;
  }
  /* descriptor 3 in the server: its end must not sit there already */
  int far = fcntl(sv[1], F_DUPFD_CLOEXEC, 4);
  close(sv[1]);
  char path[PATH_MAX];
  pid_t pid = -1;
  int exe = far >= 0 && !cs.exe_bad ? xpj_cs_open_exe(path, sizeof path) : -1;
  if (exe >= 0) {
    pid = xpj_cs_spawn(exe, far);
    close(exe);
  }
  char no_llvm[300] = "";
  if (far >= 0 && pid < 0)
    pid = fork_server(far, no_llvm, sizeof no_llvm);
  if (far >= 0)
    close(far);
  if (pid < 0) {
    close(sv[0]);
    snprintf(why, whysize, "cannot start the compile server: %s",
             no_llvm[0] ? no_llvm : strerror(errno));
    return -1;
  }
  struct stat st;
  fstat(sv[0], &st);
  cs.ctl = sv[0];
  cs.dev = st.st_dev;
  cs.ino = st.st_ino;
  cs.pid = pid;
  cs.owner = getpid();
  cs.gen++;
  return 0;
}

static uint8_t *job_frame(const xpj_job *j, size_t *len) {
  uint8_t *mod;
  size_t modlen;
  if (xpj_module_encode(j->m, &mod, &modlen) != XPJ_OK)
    return NULL;
  char target[1200];
  xpj_target_str(j->target, target, sizeof target);
  xpd_buf b = {0};
  xpd_begin(&b, XPD_CJOB, 0);
  xpd_put_bytes(&b, XPD_F_MODULE, mod, modlen);
  free(mod);
  xpd_put_str(&b, XPD_F_KERNEL, j->kernel->name);
  xpd_put_str(&b, XPD_F_TARGET, target);
  xpd_put_u64(&b, XPD_F_OPT_LEVEL, j->opts.opt_level);
  xpd_put_u64(&b, XPD_F_FAST_MATH, j->opts.fast_math ? 1 : 0);
  xpd_put_u64(&b, XPD_F_DEBUG, j->opts.debug_info ? 1 : 0);
  xpd_put_u64(&b, XPD_F_CHECKS, j->opts.checks);
  xpd_put_u64(&b, XPD_F_CONTRACT, j->opts.fp_contract ? 1 : 0);
  xpd_put_u64(&b, XPD_F_TIMEOUT, j->opts.timeout_ms);
  xpd_put_u64(&b, XPD_F_EMIT, (uint64_t)j->emit);
  xpd_put_u64(&b, XPD_F_MEMORY, j->memory_limit);
  xpd_put_str(&b, XPD_F_FAULT, j->fault);
  xpd_put_str(&b, XPD_F_LIBDEVICE, j->libdevice);
  if (!xpd_end(&b, 0)) {
    xpd_buf_free(&b);
    return NULL;
  }
  *len = b.len;
  return b.p;
}

/* The job's two socket pairs, made and their far ends sent to the server
 * (then closed here) while no other thread of this process can fork
 * (pair_mu, taken by cs_atfork's prepare): a child forked meanwhile would
 * hold the far ends, and the caller would see no end of the worker's
 * streams while that child lives (docs/abi.md, Isolation). The control
 * socket holds a few datagrams (net.unix.max_dgram_qlen, 10 by default):
 * room is waited for before, not inside, that window, for up to 5 s (a
 * busy server warming up takes its jobs well within that) and no later
 * than deadline (xpd_now_ms); a server with no room by then takes no
 * jobs, and is replaced. 0, or -1 with why. */
static int send_job_locked(const cs_submit *s, uint64_t deadline, int *sock,
                           int *err, char *why, size_t whysize) {
  int js[2] = {-1, -1}, es[2] = {-1, -1}, rc = -1;
  uint64_t room_by = xpd_now_ms() + 5000;
  if (room_by < deadline)
    deadline = room_by;
  for (;;) {
    struct pollfd pf = {cs.ctl, POLLOUT, 0};
    uint64_t now = xpd_now_ms();
    /* (a new server past the deadline: room at once, or none) */
    int wait = now >= deadline ? 0
               : deadline - now > 1000 ? 1000 : (int)(deadline - now);
    int pr = poll(&pf, 1, wait);
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr == 0 && xpd_now_ms() < deadline)
      continue;
    if (pr <= 0) {
      snprintf(why, whysize, "the compile server takes no jobs");
      return -1;
    }
    pthread_mutex_lock(&pair_mu);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, js) != 0) {
      snprintf(why, whysize, "socketpair: %s", strerror(errno));
    } else if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, es) != 0) {
      snprintf(why, whysize, "socketpair: %s", strerror(errno));
      close(js[0]);
      close(js[1]);
    } else {
      int far[2] = {js[1], es[1]};
      rc = send_fds(cs.ctl, s, sizeof *s, far, 2, MSG_DONTWAIT);
      int e = errno;
      close(js[1]);
      close(es[1]);
      if (rc != 0) {
        close(js[0]);
        close(es[0]);
        snprintf(why, whysize, "the compile server is gone: %s", strerror(e));
      }
      pthread_mutex_unlock(&pair_mu);
      if (rc != 0 && e == EAGAIN)
        continue; /* filled since the poll: wait again */
      *sock = js[0];
      *err = es[0];
      return rc;
    }
    pthread_mutex_unlock(&pair_mu);
    return -1;
  }
}

int xpj_cs_submit(const xpj_job *j, uint64_t deadline, int *sock, int *err,
                  unsigned *gen, char *why, size_t whysize) {
  pthread_once(&cs_atfork_once, cs_atfork);
  size_t len;
  uint8_t *frame = job_frame(j, &len);
  if (!frame) {
    snprintf(why, whysize, "out of memory encoding the job");
    return -1;
  }
  cs_submit s = {CS_MAGIC, j->opts.timeout_ms, "", ""};
  make_stamp(s.stamp);
  xpj_target_str(j->target, s.target, sizeof s.target);
  int rc = -1, js = -1, es = -1;
  unsigned g = 0;
  pthread_mutex_lock(&cs_mu);
  if (ctl_ours() && cs.owner != getpid())
    stop_locked(); /* a forked child: its own server */
  if (cs.pid > 0 && cs.owner == getpid() &&
      waitpid(cs.pid, NULL, WNOHANG) != 0)
    cs.pid = 0; /* the server's starter has ended (or was reaped) */
  /* a server that has ended (killed, crashed) is replaced; when a new one
   * ends at once too, the executable is no server: a fork of this process
   * serves instead */
  for (int attempt = 0; attempt < 3 && rc != 0; attempt++) {
    if (!ctl_ours() && start_locked(why, whysize) != 0)
      break;
    rc = send_job_locked(&s, deadline, &js, &es, why, whysize);
    if (rc != 0) {
      stop_locked();
      if (attempt == 1)
        cs.exe_bad = true;
    }
  }
  g = cs.gen;
  pthread_mutex_unlock(&cs_mu);
  if (rc == 0) {
    /* a worker that ended before reading it leaves its footer to say why */
    (void)xpd_write_all(js, frame, len, deadline);
    shutdown(js, SHUT_WR);
    *sock = js;
    *err = es;
    *gen = g;
  }
  free(frame);
  return rc;
}

void xpj_cs_abandon(unsigned gen, enum xpj_cs_why why) {
  pthread_mutex_lock(&cs_mu);
  if (gen == cs.gen && (!stop_locked() || why == XPJ_CS_BAD_EXE))
    cs.exe_bad = true; /* refused the job, or never said hello */
  pthread_mutex_unlock(&cs_mu);
}
