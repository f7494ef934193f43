/* xpjitd - the per-user compile daemon (docs/daemon.md, docs/protocol.md).
 *
 * One thread runs an epoll loop over the listening socket, the client
 * connections, the compile workers' pipes, a signalfd and the parse
 * pool's eventfd. The loop does socket I/O and lookups in memory only:
 * whatever grows with a request (hashing a large source, parsing,
 * specialising, keying, the cache file's lookup, the job's frame) runs on
 * a few parse threads (xpjitd_progs.c), and a request whose parse is
 * pending holds up nobody else. Identical requests are keyed once: those
 * that come while one is keyed wait for it. A GET is answered from the
 * daemon's memory, else from the cache file, else it becomes a job: the
 * first request for a key queues one compile, later ones wait on it
 * (single flight). Jobs run in a pool of worker processes
 * (this binary with --worker, started with posix_spawn), one job each at
 * a time; a worker that dies or overruns its deadline is killed, its job
 * fails with a transient error, and a new worker is started when needed.
 * The daemon itself never generates code: that happens only in workers.
 *
 * What one client can cost the others is bounded. Connections belong to
 * clients, the processes that made them (SO_PEERCRED): each client has its
 * own queue of jobs, the queues are served in turn, and a client has at
 * most --client-compiles compiles running. Every byte held for clients
 * (requests being received, replies not yet taken, waiting requests,
 * queued jobs) counts against --client-memory, and each client's part
 * against its share of it. When no worker can be started, queued jobs
 * fail at once (their clients compile themselves) and the start is tried
 * again later, less often each time. A compile that timed out or ran out
 * of memory is remembered for --failure-ttl, so that it is not tried
 * again at once by every client. */
#define _GNU_SOURCE
#include "../cache/hitfile.h"
#include "daemon.h"
#include "env.h" /* xpj_log_file_fit */
#include "llvm.h" /* xpj_llvm_plugin_open */
#include "proto.h"
#include "tier.h"
#include "xpjit.h"
#include "xpjit_cache.h"
#include "xpjitd.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <nettle/sha2.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <linux/sockios.h> /* SIOCOUTQ */
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;


/* ---- settings ---- */

static struct {
  char socket[108];
  const char *log_path;
  int log_level; /* 0 error, 1 warn, 2 info, 3 debug */
  unsigned workers;
  unsigned parse_threads; /* the parse pool's threads */
  unsigned max_conns;
  unsigned client_compiles; /* running compiles per client (0: default) */
  uint64_t io_timeout_ms;   /* a started frame, a stalled write */
  uint64_t idle_timeout_ms; /* a connection with nothing pending */
  uint64_t compile_timeout_ms; /* default and ceiling of a compile */
  uint64_t grace_ms;        /* SIGTERM: time for running compiles */
  uint64_t idle_exit_ms;    /* exit when unused this long (0: never) */
  uint64_t mem_limit;       /* bytes of binaries kept in memory */
  uint64_t client_memory;   /* bytes held for all clients */
  uint64_t failure_ttl_ms;  /* a timed-out compile is remembered this long */
  const char *redis;        /* --redis, else XPJIT_REDIS: the cluster tier
                               its workers ask before compiling */
  char redis_shown[512];    /* its URL, password masked ("" when none) */
  bool foreground;
} cfg = {.log_level = 2, .parse_threads = 2, .max_conns = 4096,
         .io_timeout_ms = 10000,
         .idle_timeout_ms = 600000, .compile_timeout_ms = 120000,
         .grace_ms = 10000, .mem_limit = 256u << 20,
         .client_memory = 1024u << 20, .failure_ttl_ms = 600000};

/* ---- logging ---- */

static FILE *logf_;
static const char *const level_names[] = {"error", "warn", "info", "debug"};

__attribute__((format(printf, 2, 3))) static void say(int level,
                                                      const char *fmt, ...) {
  if (level > cfg.log_level || !logf_)
    return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char when[32];
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(logf_, "%s.%03ldZ xpjitd[%d] %s: %s\n", when,
          ts.tv_nsec / 1000000, (int)getpid(), level_names[level], msg);
  fflush(logf_);
}
#define LOG_E(...) say(0, __VA_ARGS__)
#define LOG_W(...) say(1, __VA_ARGS__)
#define LOG_I(...) say(2, __VA_ARGS__)
#define LOG_D(...) say(3, __VA_ARGS__)

/* A message that can come many times a second (a worker that cannot
 * start, connections refused): one line per LOG_EVERY_MS at most, which
 * says how many were left out since the last. */
#define LOG_EVERY_MS 10000
typedef struct log_limit {
  uint64_t last_ms; /* when a line last went out (0: never) */
  unsigned left_out;
} log_limit;

__attribute__((format(printf, 3, 4))) static void say_limited(
    log_limit *l, int level, const char *fmt, ...) {
  uint64_t now = xpd_now_ms();
  if (l->last_ms && now - l->last_ms < LOG_EVERY_MS) {
    l->left_out++;
    return;
  }
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (l->left_out)
    say(level, "%s (and %u more like it in the last %.0f s)", msg,
        l->left_out, (double)(now - l->last_ms) / 1000.0);
  else
    say(level, "%s", msg);
  l->last_ms = now;
  l->left_out = 0;
}

/* ---- statistics ---- */

static struct {
  uint64_t started_ms;
  double compile_ms;
  uint64_t conns_total, conns_refused_uid, conns_refused_busy;
  uint64_t requests, hits_memory, hits_cache, hits_redis, hits_remembered,
      first_looks, first_waits, pendings_held, pendings_spared, lookups,
      lookups_missed, coalesced, keyed,
      keyed_shared,
      compiles, compile_failures, compile_transient,
      failures_remembered, jobs_dropped, worker_spawns, spawn_failures,
      worker_crashes, worker_timeouts, malformed, io_timeouts,
      request_errors, refused_memory, bytes_in, bytes_out, evictions;
} st;

/* A target for the log: the CPU's feature list left out. */
static const char *short_target(const char *t) {
  static char buf[128];
  const char *c = !strncmp(t, "cpu:", 4) ? strchr(t + 4, ':') : NULL;
  snprintf(buf, sizeof buf, "%.*s", c ? (int)(c - t) : 100, t);
  return buf;
}

/* ---- clients and their memory ---- */

/* A client is the process behind connections (SO_PEERCRED's pid): its
 * connections share its queue of jobs, its limit of running compiles and
 * of waiting requests, and its share of the memory budget. It lives while
 * it has connections, or jobs running. */
typedef struct job job;
typedef struct client client;
struct client {
  unsigned pid;
  unsigned conns;   /* its open connections */
  unsigned waiting; /* its GETs waiting on compiles, all connections */
  unsigned running; /* its jobs in workers */
  unsigned queued;  /* its jobs not started */
  uint64_t served;  /* when it last started a compile (clients.clock) */
  uint64_t held;    /* bytes held for it */
  job *qhead, *qtail;        /* its queue, oldest first */
  client *rr_prev, *rr_next; /* in clients.rr */
  client *hnext;             /* in clients.by_pid */
};

#define CLIENT_BUCKETS 1024
#define MAX_WAITING 256 /* GETs one client may have waiting */

static struct {
  client *by_pid[CLIENT_BUCKETS];
  unsigned n;
  client *rr;      /* the clients with queued jobs, in a ring, least
                      recently served first */
  uint64_t clock;  /* compiles started */
  unsigned queued; /* jobs not started, all clients */
  uint64_t held;   /* bytes held for all clients */
  uint64_t peak;   /* the most held since memory was last given back */
  bool big;        /* a source of 1 MiB or more parsed since then */
} clients;

/* The memory budget. Everything a client makes the daemon hold counts
 * against --client-memory and against the client's share of it: an
 * eighth, 32 MiB at least, so that one process cannot take it all. Frames
 * up to SMALL_FRAME are always taken (HELLO, PING, STATS and small GETs
 * get through when the budget is spent); a larger one is refused when its
 * announced length does not fit, and its buffer grows as its bytes come,
 * so that an announcement alone holds nothing. */
#define SMALL_FRAME (64u << 10)
#define SHARE_MIN (2 * (uint64_t)XPD_MAX_REQUEST)

static uint64_t share(void) {
  uint64_t s = cfg.client_memory / 8;
  if (s < SHARE_MIN)
    s = SHARE_MIN;
  return s < cfg.client_memory ? s : cfg.client_memory;
}

static bool fits(const client *cl, uint64_t n) {
  return clients.held + n <= cfg.client_memory && cl->held + n <= share();
}

static void hold(client *cl, uint64_t n) {
  cl->held += n;
  clients.held += n;
  if (clients.held > clients.peak)
    clients.peak = clients.held;
}

/* After a burst (clients held 64 MiB more than now) or a big source
 * (parsing one takes many times its size in small allocations), the
 * heap's free space goes back to the system: glibc keeps it otherwise,
 * and a daemon that once took 8 MiB sources from 300 connections stayed
 * at 950 MB. */
static void give_back_memory(void) {
  if (clients.peak < clients.held + (64u << 20) && !clients.big)
    return;
  malloc_trim(0);
  clients.peak = clients.held;
  clients.big = false;
}

static void release(client *cl, uint64_t n) {
  cl->held -= n;
  clients.held -= n;
}

static client *client_of(unsigned pid) {
  client *cl = clients.by_pid[pid % CLIENT_BUCKETS];
  while (cl && cl->pid != pid)
    cl = cl->hnext;
  if (cl)
    return cl;
  cl = calloc(1, sizeof *cl);
  if (!cl)
    return NULL;
  cl->pid = pid;
  cl->hnext = clients.by_pid[pid % CLIENT_BUCKETS];
  clients.by_pid[pid % CLIENT_BUCKETS] = cl;
  clients.n++;
  return cl;
}

/* Frees cl once nothing refers to it. */
static void client_put(client *cl) {
  if (cl->conns || cl->running || cl->queued || cl->waiting)
    return;
  if (cl->held)
    LOG_E("client %u left with %llu bytes counted (a bug)", cl->pid,
          (unsigned long long)cl->held);
  clients.held -= cl->held;
  for (client **pp = &clients.by_pid[cl->pid % CLIENT_BUCKETS]; *pp;
       pp = &(*pp)->hnext)
    if (*pp == cl) {
      *pp = cl->hnext;
      break;
    }
  clients.n--;
  free(cl);
}

/* ---- frame reading (connections and workers) ---- */

/* A frame being read, and the bytes read ahead of it. One recv takes what
 * the socket has (up to IN_CAP), so a small request costs one system call;
 * a large payload is read straight into its buffer. */
#define IN_CAP 16384

typedef struct reader {
  uint8_t hdr[XPD_HEADER];
  size_t hlen;
  xpd_header h;
  uint8_t *pl;
  size_t plen, pcap; /* bytes in pl, bytes allocated */
  uint64_t started;  /* when the frame's first byte came (0: none yet) */
  client *owner;     /* whose budget pl and in count against (NULL: a
                        worker's reader, the daemon's own) */
  bool over_budget;  /* RD_BAD because the budget was spent */
  uint8_t *in;       /* read ahead: in[in_off..in_len) not consumed yet */
  size_t in_len, in_off;
  unsigned reads;    /* recv calls left in this event (0: wait for epoll) */
} reader;

/* RD_EOF: the peer sends no more (it may still read); RD_GONE: the
 * socket failed */
enum { RD_MORE = 0, RD_FRAME = 1, RD_EOF = -1, RD_BAD = -2, RD_GONE = -3 };

static void reader_drop_payload(reader *r) {
  if (r->owner)
    release(r->owner, r->pcap);
  free(r->pl);
  r->pl = NULL;
  r->plen = r->pcap = 0;
}

/* Forgets the frame (read-ahead bytes stay for the next one). */
static void reader_reset(reader *r) {
  reader_drop_payload(r);
  r->hlen = 0;
  memset(&r->h, 0, sizeof r->h);
  r->over_budget = false;
  r->started = r->in_off < r->in_len ? xpd_now_ms() : 0;
}

/* The read-ahead buffer goes when it is empty: an idle connection holds
 * none. */
static void reader_free_in(reader *r) {
  if (r->in && r->owner)
    release(r->owner, IN_CAP);
  free(r->in);
  r->in = NULL;
  r->in_len = r->in_off = 0;
}

static void reader_free(reader *r) {
  reader_reset(r);
  reader_free_in(r);
  r->started = 0;
}

static bool reader_has_more(const reader *r) { return r->in_off < r->in_len; }

/* Room for at least one more payload byte: a client's large payload
 * grows as it arrives (its announcement was checked against the budget,
 * but holds nothing); a small one, or a worker's, is allocated at once. */
static int payload_room(reader *r, xpd_err *err) {
  if (r->plen < r->pcap)
    return RD_MORE;
  size_t cap = r->h.len;
  if (r->owner && r->h.len > SMALL_FRAME)
    cap = r->pcap ? 2 * r->pcap : 4 * SMALL_FRAME;
  if (cap > r->h.len)
    cap = r->h.len;
  size_t more = cap - r->pcap;
  if (r->owner && r->h.len > SMALL_FRAME && !fits(r->owner, more)) {
    r->over_budget = true;
    *err = XPD_E_TOO_BIG;
    return RD_BAD;
  }
  uint8_t *p = realloc(r->pl, cap);
  if (!p) {
    *err = XPD_E_TOO_BIG;
    return RD_BAD;
  }
  r->pl = p;
  r->pcap = cap;
  if (r->owner)
    hold(r->owner, more);
  return RD_MORE;
}

/* Moves read-ahead bytes into the frame. */
static int consume(reader *r, uint32_t max, xpd_err *err) {
  while (r->in_off < r->in_len) {
    size_t avail = r->in_len - r->in_off;
    if (r->hlen < XPD_HEADER) {
      size_t k = XPD_HEADER - r->hlen < avail ? XPD_HEADER - r->hlen : avail;
      if (!r->hlen)
        r->started = xpd_now_ms();
      memcpy(r->hdr + r->hlen, r->in + r->in_off, k);
      r->hlen += k;
      r->in_off += k;
      /* judged on its first bytes: garbage is refused at once */
      *err = xpd_header_decode(r->hdr, r->hlen, max, &r->h);
      if (*err == XPD_E_SHORT)
        continue;
      if (*err != XPD_E_OK)
        return RD_BAD;
      if (r->h.len == 0)
        return RD_FRAME;
      /* a large announcement that cannot fit is refused before a byte of
       * it is taken */
      if (r->owner && r->h.len > SMALL_FRAME && !fits(r->owner, r->h.len)) {
        r->over_budget = true;
        *err = XPD_E_TOO_BIG;
        return RD_BAD;
      }
      continue;
    }
    if (payload_room(r, err) != RD_MORE)
      return RD_BAD;
    size_t k = r->pcap - r->plen < avail ? r->pcap - r->plen : avail;
    memcpy(r->pl + r->plen, r->in + r->in_off, k);
    r->plen += k;
    r->in_off += k;
    if (r->plen == r->h.len)
      return RD_FRAME;
  }
  r->in_off = r->in_len = 0;
  return RD_MORE;
}

/* Reads what is there. RD_FRAME: r->h and r->pl hold a frame (the caller
 * resets). RD_BAD: *err says what was wrong. RD_MORE: nothing complete,
 * and nothing more to read now. */
static int reader_step(reader *r, int fd, uint32_t max, xpd_err *err) {
  for (;;) {
    int c = consume(r, max, err);
    if (c != RD_MORE)
      return c;
    if (!r->reads) {
      reader_free_in(r);
      return RD_MORE;
    }
    uint8_t *dst;
    size_t want;
    if (r->hlen == XPD_HEADER && r->h.len - r->plen >= IN_CAP) {
      if (payload_room(r, err) != RD_MORE) /* a large payload: straight in */
        return RD_BAD;
      dst = r->pl + r->plen;
      want = r->pcap - r->plen;
    } else {
      if (!r->in) {
        if (!(r->in = malloc(IN_CAP))) {
          *err = XPD_E_TOO_BIG;
          return RD_BAD;
        }
        if (r->owner)
          hold(r->owner, IN_CAP);
      }
      dst = r->in;
      want = IN_CAP;
    }
    ssize_t n = recv(fd, dst, want, MSG_DONTWAIT);
    if (n == 0)
      return RD_EOF;
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        r->reads = 0;
        reader_free_in(r);
        return RD_MORE;
      }
      return RD_GONE;
    }
    st.bytes_in += (uint64_t)n;
    /* a short read emptied the socket: epoll says when there is more */
    r->reads = (size_t)n < want ? 0 : r->reads - 1;
    if (dst == r->in) {
      r->in_len = (size_t)n;
      r->in_off = 0;
    } else {
      r->plen += (size_t)n;
      if (r->plen == r->h.len)
        return RD_FRAME;
    }
  }
}

/* ---- epoll items ---- */

enum { K_LISTEN, K_SIGNAL, K_CONN, K_WORKER, K_POOL };
typedef struct item {
  int kind;
} item;

static int ep = -1;

static void ep_add(int fd, void *it, uint32_t ev) {
  struct epoll_event e = {.events = ev, .data.ptr = it};
  epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
}
static void ep_mod(int fd, void *it, uint32_t ev) {
  struct epoll_event e = {.events = ev, .data.ptr = it};
  epoll_ctl(ep, EPOLL_CTL_MOD, fd, &e);
}

/* ---- connections ---- */

typedef struct waiter waiter;
typedef struct preq preq;
typedef struct conn {
  item it;
  int fd;
  unsigned slot;
  uint64_t serial;
  unsigned uid, pid;
  client *cl;   /* the process it belongs to */
  bool hello;
  bool closing; /* close once out is flushed */
  bool eof;     /* the client sends no more: its requests are answered,
                   then it is closed (close_answered) */
  uint32_t events; /* what epoll watches now */
  reader r;
  xpd_buf out;
  size_t out_off;
  size_t out_held; /* out's capacity, as counted against cl */
  uint64_t last_active, stalled_since;
  int stalled_queue; /* the socket's unread bytes then (SIOCOUTQ; -1) */
  waiter *waits;   /* its GETs waiting on a compile */
  preq *pending;   /* its GETs being hashed or keyed (parse threads) */
  /* a first look's PENDING held back (tell_pending): due at owe_due */
  bool owes;
  uint32_t owe_id;
  uint64_t owe_due;
  struct conn *oprev, *onext; /* on owing while owes */
  bool dead;       /* closed; freed after this round of events */
  struct conn *next_dead;
  struct conn *eprev, *enext; /* on half_closed while eof */
} conn;

static conn **slots;
static unsigned nslots, nconns;
static uint64_t next_serial = 1;

/* Closing never frees at once: an event for c may still be in the batch
 * epoll_wait returned, so c is freed after it (free_dead). */
static conn *dead_conns;

/* The connections whose client has sent its last request (eof) and are
 * not closed yet. */
static conn *half_closed;

/* Replies waiting to be read past this stop the reading of requests:
 * a client that does not read cannot make the daemon buffer without end. */
#define OUT_HIGH (1u << 20)
/* A reply buffer larger than this is given back once it has been sent. */
#define OUT_KEEP (64u << 10)

static size_t unsent(const conn *c) { return c->out.len - c->out_off; }

/* The reply buffer's size, counted against the client. */
static void out_account(conn *c) {
  if (c->out.cap > c->out_held)
    hold(c->cl, c->out.cap - c->out_held);
  else
    release(c->cl, c->out_held - c->out.cap);
  c->out_held = c->out.cap;
}

/* Reading stops at the end of the client's requests (a readable end of
 * file would wake the loop for ever) and while its replies pile up; a
 * hang-up is reported whatever is watched. */
static void conn_watch(conn *c) {
  uint32_t ev = (c->eof || unsent(c) > OUT_HIGH ? 0 : EPOLLIN) |
                (unsent(c) ? EPOLLOUT : 0);
  if (ev != c->events) {
    c->events = ev;
    ep_mod(c->fd, c, ev);
  }
}

static void conn_close(conn *c);

/* The bytes sent on fd that its client has not read yet (SIOCOUTQ); -1
 * when unknown. */
static int unread_bytes(int fd) {
  int q = -1;
  return ioctl(fd, SIOCOUTQ, &q) == 0 ? q : -1;
}

/* Sends what it can; false if the connection is gone (and closed). */
static bool conn_flush(conn *c) {
  while (c->out_off < c->out.len) {
    ssize_t n = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      st.bytes_out += (uint64_t)n;
      c->out_off += (size_t)n;
      c->stalled_since = 0;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!c->stalled_since) {
        c->stalled_since = xpd_now_ms();
        c->stalled_queue = unread_bytes(c->fd);
      }
      conn_watch(c);
      return true;
    }
    conn_close(c);
    return false;
  }
  c->out.len = c->out_off = 0;
  if (c->out.cap > OUT_KEEP) {
    xpd_buf_free(&c->out);
    out_account(c);
  }
  c->stalled_since = 0;
  conn_watch(c);
  if (c->closing) {
    conn_close(c);
    return false;
  }
  return true;
}

/* ---- a first look's PENDING, held back ----
 * A first look whose kernel the cache file has no row of is told PENDING,
 * then gets the compile's answer (docs/protocol.md, "First looks"). A
 * client that says how long it waits for either (FIRST_WAIT) is told
 * PENDING only when the answer has not come by half of that: a compile
 * that ends sooner is answered alone. In a start-up storm every process's
 * first look of each kernel waits for its compile, and each PENDING cost
 * the process a wake-up and the daemon a send. One is held per connection
 * (a client asks one request at a time on each); a second is told at
 * once. */
static conn *owing;       /* the connections that hold one */
static uint64_t owe_next; /* no held one is due before this (the loop
                             walks owing only then) */

static void owed_drop(conn *c) {
  if (!c->owes)
    return;
  c->owes = false;
  if (c->oprev)
    c->oprev->onext = c->onext;
  else
    owing = c->onext;
  if (c->onext)
    c->onext->oprev = c->oprev;
  c->oprev = c->onext = NULL;
}

/* The PENDING held for id, now, ahead of what follows it in c's output
 * (not sent here: the frame after it is). */
static void owed_pay(conn *c, uint32_t id) {
  if (!c->owes || c->owe_id != id)
    return;
  owed_drop(c);
  size_t at = c->out.len;
  xpd_begin(&c->out, XPD_PENDING, id);
  xpd_end(&c->out, at); /* (out of memory: the next frame_end says so) */
}

static bool frame_end(conn *c, size_t at);
static size_t frame_begin(conn *c, xpd_op op, uint32_t id);

/* PENDING for id, which came at since from a client that waits wait_ms
 * for it or the answer: held back to half of that, or told now (no wait
 * given, one held already on c, or half of it gone). False when c is gone
 * (closed telling it). */
static bool tell_pending(conn *c, uint32_t id, uint64_t since,
                         uint64_t wait_ms) {
  uint64_t due = since + wait_ms / 2;
  if (wait_ms && !c->owes && due > xpd_now_ms()) {
    st.pendings_held++;
    c->owes = true;
    c->owe_id = id;
    c->owe_due = due;
    if (!owing || due < owe_next)
      owe_next = due;
    c->oprev = NULL;
    c->onext = owing;
    if (owing)
      owing->oprev = c;
    owing = c;
    return true;
  }
  size_t at = frame_begin(c, XPD_PENDING, id);
  return frame_end(c, at);
}

/* Tells the held PENDINGs that are due; the ms until the next one is due
 * (at most max). */
static int owed_due(uint64_t now, int max) {
  if (now >= owe_next) { /* (a list as long as the connections: walked
                            only when one is due) */
    for (conn *c = owing, *n; c; c = n) {
      n = c->onext;
      if (c->owe_due <= now) {
        uint32_t id = c->owe_id;
        owed_drop(c);
        size_t at = frame_begin(c, XPD_PENDING, id);
        frame_end(c, at); /* (closed on failure: off the list already) */
      }
    }
    owe_next = UINT64_MAX; /* what is left, whatever the sends changed */
    for (conn *c = owing; c; c = c->onext)
      if (c->owe_due < owe_next)
        owe_next = c->owe_due;
  }
  if (!owing)
    return max;
  return owe_next <= now ? 0
         : owe_next - now < (uint64_t)max ? (int)(owe_next - now)
                                         : max;
}

/* Begins a reply frame in c->out; the caller fills it and calls
 * frame_end with what this returns. */
static size_t frame_begin(conn *c, xpd_op op, uint32_t id) {
  if (c->out_off) { /* drop what was sent; keep the rest at the front */
    memmove(c->out.p, c->out.p + c->out_off, unsent(c));
    c->out.len -= c->out_off;
    c->out_off = 0;
  }
  /* the answer to a first look whose PENDING is held: a kernel needs none
   * (a transient failure pays it first: fail_waiters); anything else
   * comes after it, as before */
  if (c->owes && c->owe_id == id && op != XPD_PENDING) {
    if (op == XPD_KERNEL) {
      owed_drop(c);
      st.pendings_spared++;
    } else {
      owed_pay(c, id);
    }
  }
  size_t at = c->out.len;
  xpd_begin(&c->out, op, id);
  return at;
}

static bool frame_end(conn *c, size_t at) {
  out_account(c);
  if (!xpd_end(&c->out, at)) {
    LOG_E("out of memory building a reply; closing connection %llu",
          (unsigned long long)c->serial);
    conn_close(c);
    return false;
  }
  /* a client that never reads does not get to pile up replies */
  if (unsent(c) > (512u << 20)) {
    static log_limit unread_log;
    say_limited(&unread_log, 1, "connection %llu (pid %u) does not read "
                "its replies; closed", (unsigned long long)c->serial,
                c->pid);
    conn_close(c);
    return false;
  }
  return conn_flush(c);
}

/* An ERROR reply; fatal: the frame was malformed, close after it. */
__attribute__((format(printf, 5, 6))) static bool send_error(
    conn *c, uint32_t id, xpj_status s, bool fatal, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t at = frame_begin(c, XPD_ERROR, id);
  xpd_put_u64(&c->out, XPD_F_STATUS, (uint64_t)s);
  xpd_put_str(&c->out, XPD_F_MESSAGE, msg);
  if (fatal) {
    c->closing = true;
    reader_free(&c->r);
  }
  return frame_end(c, at);
}

/* ---- the daemon's first level and single flight ---- */

typedef struct entry {
  char digest[65];
  bool ready;
  /* the result (ready): the record (tier.h), its data, entry and log
   * owned; log_len: strlen(v.log). v.expires_ms is not used: the
   * daemon's clock is monotonic (expires_ms below) */
  xpj_status status;
  xpj_cache_value v;
  size_t log_len;
  /* a remembered failure (a timeout, out of memory): forgotten at
   * expires_ms; a timeout answers requests that allow at most limit_ms */
  uint64_t expires_ms, limit_ms;
  /* a compile started after the cache file had no row: the file's
   * data_version before that lookup (-1: unknown); while it reads the
   * same, no other process has written to the file, and a first look
   * waits for the compile without a lookup of its own */
  int64_t dv;
  waiter *waiters; /* in arrival order: the first started the compile */
  job *job;
  struct entry *hnext;
  struct entry *prev, *next; /* LRU of ready entries, newest first */
} entry;

/* A GET waiting for a compile: on its entry's list and on its
 * connection's. */
struct waiter {
  conn *c;
  entry *e;
  uint32_t id;
  uint64_t want;         /* the compile time its request allows */
  waiter *next;          /* the entry's next */
  waiter *cprev, *cnext; /* the connection's */
};

#define NBUCKETS 4096
static entry *table[NBUCKETS];
static entry *lru_head, *lru_tail;
static uint64_t mem_bytes, n_entries;

static unsigned hash_hex(const char *d) {
  unsigned h = 0;
  for (int i = 0; i < 8; i++)
    h = h * 16 + (unsigned)(d[i] <= '9' ? d[i] - '0' : d[i] - 'a' + 10);
  return h % NBUCKETS;
}

static entry *find_entry(const char *digest) {
  for (entry *e = table[hash_hex(digest)]; e; e = e->hnext)
    if (!strcmp(e->digest, digest))
      return e;
  return NULL;
}

static void lru_unlink(entry *e) {
  if (e->prev)
    e->prev->next = e->next;
  else if (lru_head == e)
    lru_head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else if (lru_tail == e)
    lru_tail = e->prev;
  e->prev = e->next = NULL;
}

static void lru_front(entry *e) {
  lru_unlink(e);
  e->next = lru_head;
  if (lru_head)
    lru_head->prev = e;
  lru_head = e;
  if (!lru_tail)
    lru_tail = e;
}

static void remove_entry(entry *e) {
  for (entry **pp = &table[hash_hex(e->digest)]; *pp; pp = &(*pp)->hnext)
    if (*pp == e) {
      *pp = e->hnext;
      break;
    }
  if (e->ready) {
    lru_unlink(e);
    mem_bytes -= e->v.size + e->log_len;
  }
  n_entries--;
  free((void *)e->v.data);
  free((void *)e->v.entry);
  free((void *)e->v.log);
  free(e);
}

static entry *new_entry(const char *digest) {
  entry *e = calloc(1, sizeof *e);
  if (!e)
    return NULL;
  memcpy(e->digest, digest, 65);
  e->dv = -1;
  unsigned b = hash_hex(digest);
  e->hnext = table[b];
  table[b] = e;
  n_entries++;
  return e;
}

static void evict(void) {
  while (mem_bytes > cfg.mem_limit && lru_tail) {
    st.evictions++;
    remove_entry(lru_tail);
  }
}

/* A request's TIMEOUT as the compile time the client allows (want), and
 * what this daemon gives a compile at most (limit). */
static void compile_limits(uint64_t timeout_ms, uint64_t *want,
                           uint64_t *limit) {
  *want = timeout_ms ? timeout_ms : cfg.compile_timeout_ms;
  *limit = *want < cfg.compile_timeout_ms ? *want : cfg.compile_timeout_ms;
}

/* What a remembered timeout says to a request: the one rule for the
 * requests that waited for the compile that failed and for those that
 * come later (an outside probe found the two answered apart: a waiter
 * that allowed 60 s got a 300 ms daemon's failure, a later request the
 * ERROR). failed_ms: what the compile that failed was given (0: no limit
 * ran out, as out of memory: the failure answers everyone); want, limit:
 * the request's compile_limits.
 *   FAILURE_ANSWERS  it allows no longer than what failed: the failure
 *                    is its answer
 *   FAILURE_RETRIED  it allows longer, and this daemon would give it
 *                    longer: a later request is compiled again; a waiter,
 *                    whose compile is over and whose client has waited
 *                    for it, is told to compile it itself (an ERROR)
 *   FAILURE_BEYOND   it allows longer than this daemon ever gives (what
 *                    failed had that already): only its client can do
 *                    better, and is told to compile it itself (an ERROR) */
enum { FAILURE_ANSWERS, FAILURE_RETRIED, FAILURE_BEYOND };

static int failure_verdict(uint64_t failed_ms, uint64_t want,
                           uint64_t limit) {
  if (!failed_ms || want <= failed_ms)
    return FAILURE_ANSWERS;
  return limit > failed_ms ? FAILURE_RETRIED : FAILURE_BEYOND;
}

/* The ERROR of a request that a remembered timeout does not answer
 * (verdict: FAILURE_RETRIED or FAILURE_BEYOND): compile it here. */
static void send_compile_here(conn *c, uint32_t id, int verdict,
                              uint64_t failed_ms, uint64_t want) {
  if (verdict == FAILURE_BEYOND)
    send_error(c, id, XPJ_ERR_COMPILE, false,
               "compiling this kernel took more than %llu ms, and xpjitd "
               "gives a compile no longer; this request allows %llu ms: "
               "compile it here",
               (unsigned long long)failed_ms, (unsigned long long)want);
  else
    send_error(c, id, XPJ_ERR_COMPILE, false,
               "the compile this request waited for was stopped after "
               "%llu ms, sooner than this request allows (%llu ms): "
               "compile it here",
               (unsigned long long)failed_ms, (unsigned long long)want);
}

/* Whether a ready entry is the answer to a request (compile_limits: want,
 * limit) rather than forgotten and compiled again: a remembered failure
 * is forgotten when it expires, and a remembered timeout when this
 * daemon would give the request longer (failure_verdict; one that it
 * cannot give longer is answered with an ERROR by get_entry). */
static bool entry_answers(const entry *e, uint64_t want, uint64_t limit) {
  return !e->expires_ms ||
         (xpd_now_ms() < e->expires_ms &&
          failure_verdict(e->limit_ms, want, limit) != FAILURE_RETRIED);
}

static waiter *add_waiter(entry *e, conn *c, uint32_t id, uint64_t want) {
  waiter *w = malloc(sizeof *w);
  if (!w)
    return NULL;
  *w = (waiter){c, e, id, want, NULL, NULL, c->waits};
  waiter **tail = &e->waiters;
  while (*tail)
    tail = &(*tail)->next;
  *tail = w;
  if (c->waits)
    c->waits->cprev = w;
  c->waits = w;
  c->cl->waiting++;
  hold(c->cl, sizeof *w);
  return w;
}

static void waiter_off_conn(waiter *w) {
  conn *c = w->c;
  if (w->cprev)
    w->cprev->cnext = w->cnext;
  else
    c->waits = w->cnext;
  if (w->cnext)
    w->cnext->cprev = w->cprev;
  w->cprev = w->cnext = NULL;
  c->cl->waiting--;
  release(c->cl, sizeof *w);
}

/* Takes e's waiters off e and off their connections, for the caller to
 * answer (in arrival order) and free: a connection that closes while one
 * is answered no longer refers to the others. */
static waiter *take_waiters(entry *e) {
  waiter *list = e->waiters;
  e->waiters = NULL;
  for (waiter *w = list; w; w = w->next)
    waiter_off_conn(w);
  return list;
}

/* ---- request memo: what a GET's bytes resolved to ---- */

typedef struct memo {
  char req[65], digest[65];
  struct memo *next;
} memo;
#define MEMO_MAX 65536
static memo *memos[NBUCKETS];
static unsigned n_memos;

static const char *memo_find(const char *req) {
  for (memo *m = memos[hash_hex(req)]; m; m = m->next)
    if (!strcmp(m->req, req))
      return m->digest;
  return NULL;
}

static void memo_add(const char *req, const char *digest) {
  if (n_memos >= MEMO_MAX) { /* start over: it is only a shortcut */
    for (unsigned i = 0; i < NBUCKETS; i++)
      for (memo *m = memos[i], *n; m; m = n) {
        n = m->next;
        free(m);
      }
    memset(memos, 0, sizeof memos);
    n_memos = 0;
  }
  memo *m = malloc(sizeof *m);
  if (!m)
    return;
  memcpy(m->req, req, 65);
  memcpy(m->digest, digest, 65);
  unsigned b = hash_hex(req);
  m->next = memos[b];
  memos[b] = m;
  n_memos++;
}

static void sha_hex(struct sha256_ctx *h, char out[65]) {
  uint8_t d[32];
  sha256_digest(h, sizeof d, d);
  xpjitd_hex(d, out);
}

static void sha_str(struct sha256_ctx *h, const char *s) {
  sha256_update(h, strlen(s) + 1, (const uint8_t *)s);
}

/* Sources seen lately, with their SHA-256, for the event loop: hashing a
 * request's source is most of a hit's work (3 us of 12 for a 4 KB one).
 * A source is found by a cheap hash of its bytes and compared with the
 * copy kept here byte for byte, so a repeated source (every kernel of a
 * program, every process of a storm) is hashed once. Direct-mapped, each
 * source up to HASH_ON_LOOP bytes: 4 MiB at most, the daemon's own. */
#define SRC_SLOTS 64
static struct {
  uint64_t fh;
  size_t len;
  uint8_t *bytes; /* NULL: empty */
  uint8_t sha[32];
} srcs[SRC_SLOTS];

/* 64 bits of p[0..n), four lanes for speed; not for security: a match
 * is confirmed by memcmp. */
static uint64_t fast_hash(const uint8_t *p, size_t n) {
  const uint64_t k = 0x9e3779b97f4a7c15ull;
  uint64_t h[4] = {n, n ^ k, ~n, n * k};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int l = 0; l < 4; l++) {
      uint64_t w;
      memcpy(&w, p + i + 8 * l, 8);
      h[l] = (h[l] ^ w) * k;
      h[l] ^= h[l] >> 29;
    }
  uint64_t r = h[0] ^ (h[1] << 1) ^ (h[2] << 2) ^ (h[3] << 3);
  for (; i < n; i++)
    r = (r ^ p[i]) * k;
  return r ^ (r >> 31);
}

static void source_sha(const xpd_get *g, bool reuse, uint8_t out[32]) {
  unsigned slot = 0;
  uint64_t fh = 0;
  if (reuse) {
    fh = fast_hash(g->source, g->source_len);
    slot = (unsigned)(fh % SRC_SLOTS);
    if (srcs[slot].bytes && srcs[slot].fh == fh &&
        srcs[slot].len == g->source_len &&
        !memcmp(srcs[slot].bytes, g->source, g->source_len)) {
      memcpy(out, srcs[slot].sha, 32);
      return;
    }
  }
  struct sha256_ctx hs;
  sha256_init(&hs);
  sha256_update(&hs, g->source_len, g->source);
  sha256_digest(&hs, 32, out);
  if (!reuse || g->source_len > SMALL_FRAME)
    return;
  uint8_t *copy = malloc(g->source_len ? g->source_len : 1);
  if (!copy)
    return;
  memcpy(copy, g->source, g->source_len);
  free(srcs[slot].bytes);
  srcs[slot].bytes = copy;
  srcs[slot].fh = fh;
  srcs[slot].len = g->source_len;
  memcpy(srcs[slot].sha, out, 32);
}

/* The request's identity: everything in a GET that can change the
 * answer. reuse: on the event loop, where sources seen lately are not
 * hashed again (the parse threads hash large ones, each once). */
static void request_key(const xpd_get *g, bool reuse, char out[65]) {
  uint8_t src[32];
  source_sha(g, reuse, src);
  struct sha256_ctx h;
  sha256_init(&h);
  /* a first look is another request: it is answered otherwise */
  uint64_t n[8] = {g->source_len, g->ndim,     g->opt_level, g->fast_math,
                   g->debug,      g->checks,   g->contract,  g->first};
  sha256_update(&h, sizeof n, (const uint8_t *)n);
  sha256_update(&h, sizeof src, src);
  sha_str(&h, g->filename);
  sha_str(&h, g->kernel);
  sha_str(&h, g->dtypes);
  sha_str(&h, g->target);
  sha_hex(&h, out);
}

/* ---- parsed programs, by source ---- */

/* At most 64 programs, and at most 16 MiB of their sources: a parsed
 * program takes many times its source's size. */
static xpjitd_progs progs = {.cap = XPJITD_PROGS, .max_bytes = 16u << 20,
                             .mu = PTHREAD_MUTEX_INITIALIZER,
                             .cv = PTHREAD_COND_INITIALIZER};
static char versions[128]; /* xpj_versions_str(), filled at start */
static xpj_context *ctx;
static xpj_cache *l2;
/* Which file l2 is: the device and inode of the file its connection has
 * open (xpj_l2_db_identity), taken when the daemon opens it at its start
 * and again for each greeting, so that a file the daemon moved aside as
 * damaged and made anew is the one named; a client whose cache file is
 * this one takes a first look here before opening it (docs/cache.md,
 * "Tiers"). A path would name another file in another mount namespace,
 * or after someone else replaced the file. */
static struct {
  bool known;
  uint64_t dev, ino;
} cache_id;

/* cache_id, read again (never a wait: the event loop; a handle in use
 * leaves the last one known, which a new connection of the same handle
 * cannot have changed without a lookup). */
static void cache_identify_again(bool wait) {
  uint64_t dev, ino;
  if (l2 && xpj_l2_db_identity(l2, wait, &dev, &ino)) {
    cache_id.known = true;
    cache_id.dev = dev;
    cache_id.ino = ino;
  } else if (wait || xpj_cache_mode_of(l2) != XPJ_CACHE_MODE_RW) {
    cache_id.known = false;
  }
}

/* Opens the cache file now (it is otherwise opened at the first lookup)
 * and notes which file it is. */
static void cache_identify(void) {
  if (!l2 || xpj_cache_mode_of(l2) != XPJ_CACHE_MODE_RW)
    return;
  xpj_l2_ready(l2);
  cache_identify_again(true);
}
/* what a compile worker may take, MiB (0: no limit): xpj_compile_limits */
static uint64_t worker_memory_mb;

/* ---- jobs and workers ---- */

typedef struct worker worker;
struct job {
  entry *e;
  client *owner;    /* whose queue it is in, or whose compile runs */
  worker *w;        /* compiling it; NULL while queued */
  uint64_t held;    /* bytes counted against owner */
  uint64_t started; /* when it went to its worker */
  xpd_buf frame;    /* the JOB frame */
  uint64_t timeout_ms;
  /* the cache key, for the put */
  char code[65], kernel[256], dtypes[256], target[1200], options[64];
  unsigned ndim;
  job *prev, *next; /* in owner's queue */
};

struct worker {
  item it;
  pid_t pid;
  int fd;
  job *job;
  uint64_t deadline;
  size_t out_off; /* of job->frame */
  bool want_out;
  reader r;
  bool dead;
  struct worker *next_dead;
};
static worker *dead_workers;
static worker **workers; /* cfg.workers slots, NULL when not running */
static char self_exe[PATH_MAX]; /* for messages: workers start from
                                   /proc/self/exe, the image running */
/* The LLVM plugin, opened at the start (never loaded here): each worker
 * gets it as its descriptor WORKER_PLUGIN_FD and loads it from there, the
 * file this daemon started with even when an upgrade has replaced it. */
static int plugin_fd = -1;
#define WORKER_PLUGIN_FD 3
#define WORKER_PLUGIN_ENV "XPJIT_LLVM_PLUGIN=/proc/self/fd/3"
static char plugin_path[PATH_MAX], plugin_why[600];

/* Finds and opens the plugin into plugin_fd (above the descriptors a
 * worker is given: 0, 1, WORKER_PLUGIN_FD), its path into plugin_path;
 * false with plugin_why. At the start, before the daemon leaves its
 * directory, and again before a worker starts while there is none (one
 * installed since is taken). */
static bool plugin_open(void) {
  char why[512];
  int fd = xpj_llvm_plugin_open(plugin_path, why, sizeof why);
  if (fd < 0) {
    snprintf(plugin_why, sizeof plugin_why, "%s", why);
    return false;
  }
  plugin_fd = fcntl(fd, F_DUPFD_CLOEXEC, WORKER_PLUGIN_FD + 1);
  int err = errno;
  close(fd);
  char canon[PATH_MAX]; /* for the log: lib/x, not bin/../lib/x */
  if (realpath(plugin_path, canon))
    memcpy(plugin_path, canon, sizeof canon);
  if (plugin_fd < 0)
    snprintf(plugin_why, sizeof plugin_why, "no LLVM: cannot keep the "
             "plugin %.400s open: %s", plugin_path, strerror(err));
  return plugin_fd >= 0;
}

/* Starting workers: after a failure, not again before retry_ms, and
 * later each time (0.25 s, doubling, up to 10 s). */
static struct {
  uint64_t retry_ms, backoff_ms;
  char why[256]; /* the last failure */
  log_limit log;
} spawning;

static bool shutting_down;

static void free_dead(void) {
  while (dead_conns) {
    conn *c = dead_conns;
    dead_conns = c->next_dead;
    free(c);
  }
  while (dead_workers) {
    worker *w = dead_workers;
    dead_workers = w->next_dead;
    free(w);
  }
}

/* The clients with queued jobs, least recently served first: each takes
 * its turn, and one that has had none queued for a while goes before
 * those that have just been served. A client is put after the last one
 * served no later than it (a client just served goes last). */
static void ring_add(client *cl) {
  client *head = clients.rr;
  if (!head) {
    cl->rr_prev = cl->rr_next = cl;
    clients.rr = cl;
    return;
  }
  client *after = head->rr_prev; /* the last */
  while (after->served > cl->served && after != head)
    after = after->rr_prev;
  if (after->served > cl->served) { /* before all of them */
    after = head->rr_prev;
    clients.rr = cl;
  }
  cl->rr_prev = after;
  cl->rr_next = after->rr_next;
  after->rr_next->rr_prev = cl;
  after->rr_next = cl;
}

static void ring_remove(client *cl) {
  if (cl->rr_next == cl) {
    clients.rr = NULL;
  } else {
    if (clients.rr == cl)
      clients.rr = cl->rr_next;
    cl->rr_prev->rr_next = cl->rr_next;
    cl->rr_next->rr_prev = cl->rr_prev;
  }
  cl->rr_prev = cl->rr_next = NULL;
}

static void queue_push(client *cl, job *j) {
  j->owner = cl;
  j->prev = cl->qtail;
  j->next = NULL;
  if (cl->qtail)
    cl->qtail->next = j;
  else
    cl->qhead = j;
  cl->qtail = j;
  if (!cl->queued++)
    ring_add(cl);
  clients.queued++;
}

static void queue_remove(job *j) {
  client *cl = j->owner;
  if (j->prev)
    j->prev->next = j->next;
  else
    cl->qhead = j->next;
  if (j->next)
    j->next->prev = j->prev;
  else
    cl->qtail = j->prev;
  j->prev = j->next = NULL;
  if (!--cl->queued)
    ring_remove(cl);
  clients.queued--;
}

/* A queued job changes hands, with what it holds. */
static void job_move(job *j, client *to) {
  client *from = j->owner;
  queue_remove(j);
  release(from, j->held);
  hold(to, j->held);
  queue_push(to, j);
}

/* Frees j, its frame and what it held; its entry is the caller's (which
 * has set e->job to NULL, or freed e). */
static void job_free(job *j) {
  client *cl = j->owner;
  if (j->w)
    cl->running--;
  release(cl, j->held);
  xpd_buf_free(&j->frame);
  free(j);
  client_put(cl);
}

/* e ready with a copy of v: false when out of memory. */
static bool entry_fill(entry *e, xpj_status status, const xpj_cache_value *v) {
  size_t log_len = v->log ? strlen(v->log) : 0;
  uint8_t *data = malloc(v->size ? v->size : 1);
  char *log = malloc(log_len + 1);
  char *name = strndup(v->entry ? v->entry : "", 255);
  if (!data || !log || !name) {
    free(data);
    free(log);
    free(name);
    return false;
  }
  if (v->size)
    memcpy(data, v->data, v->size);
  if (log_len)
    memcpy(log, v->log, log_len);
  log[log_len] = 0;
  e->v = *v;
  e->v.failed = v->failed != 0;
  e->v.data = data;
  e->v.entry = name;
  e->v.log = log;
  e->v.expires_ms = 0;
  e->log_len = log_len;
  e->status = status;
  e->ready = true;
  mem_bytes += e->v.size + e->log_len;
  lru_front(e);
  return true;
}

static void reply_kernel(conn *c, uint32_t id, const entry *e, int origin) {
  if (unsent(c) > OUT_HIGH) {
    /* replies it has not read: at most OUT_HIGH and the last one (many
     * waiting GETs answered at once piled up every binary: 255 of 513 KB
     * held 134 MB for one connection, past its process's share, in an
     * outside probe) */
    st.refused_memory++;
    send_error(c, id, XPJ_ERR_NOMEM, false,
               "xpjitd: %llu bytes of replies on this connection are not "
               "read yet; ask again once they are",
               (unsigned long long)unsent(c));
    return;
  }
  xpd_kernel k = {0};
  k.status = (uint64_t)e->status;
  k.origin = (uint64_t)origin;
  k.v = e->v;
  if (e->expires_ms) {
    uint64_t now = xpd_now_ms();
    k.expires_ms = e->expires_ms > now ? e->expires_ms - now : 1;
  }
  memcpy(k.digest, e->digest, 65);
  size_t at = frame_begin(c, XPD_KERNEL, id);
  xpd_put_kernel(&c->out, &k);
  frame_end(c, at);
}

/* Answers every waiter of the ready entry e: the first started the
 * compile, the others waited on it. A remembered timeout (e->limit_ms)
 * answers each as it would answer the same request later
 * (failure_verdict): those that allow no longer get it, the others are
 * told to compile it themselves (found by an outside probe: a 500 ms
 * request's timeout answered, as final, another process's request that
 * allowed 120 s). */
static void answer_waiters(entry *e, int origin) {
  for (waiter *w = take_waiters(e), *n; w; w = n) {
    n = w->next;
    uint64_t want, limit;
    compile_limits(w->want, &want, &limit);
    int verdict = failure_verdict(e->limit_ms, want, limit);
    if (w->c->dead) {
    } else if (verdict != FAILURE_ANSWERS) {
      send_compile_here(w->c, w->id, verdict, e->limit_ms, want);
    } else {
      reply_kernel(w->c, w->id, e, origin);
    }
    origin = XPD_FROM_WAITED;
    free(w);
  }
}

/* Fails every waiter of e: transient (a KERNEL with failed and transient
 * set) or, for daemon trouble, an ERROR (the client compiles itself). */
static void fail_waiters(entry *e, bool as_error, xpj_status s,
                         const char *msg) {
  for (waiter *w = take_waiters(e), *n; w; w = n) {
    n = w->next;
    conn *c = w->c;
    if (c->dead) {
    } else if (as_error) {
      send_error(c, w->id, s, false, "%s", msg);
    } else {
      owed_pay(c, w->id); /* a transient failure comes after PENDING */
      size_t at = frame_begin(c, XPD_KERNEL, w->id);
      xpd_kernel k = {0};
      k.status = (uint64_t)s;
      k.v.failed = 1;
      k.transient = 1;
      k.v.log = msg;
      memcpy(k.digest, e->digest, 65);
      xpd_put_kernel(&c->out, &k);
      frame_end(c, at);
    }
    free(w);
  }
}

/* A job that will not run (its clients are gone, or none can run it):
 * out of its queue, its entry and itself freed. */
static void job_unqueue(job *j) {
  entry *e = j->e;
  queue_remove(j);
  e->job = NULL;
  job_free(j);
  remove_entry(e);
}

/* A queued job nobody waits for any more is not compiled. */
static void job_drop(job *j) {
  LOG_D("dropped the queued compile of %s [%s]: its clients are gone",
        j->kernel, j->dtypes);
  st.jobs_dropped++;
  job_unqueue(j);
}

/* Every queued job fails now: transient, or as an ERROR. */
static void fail_queued(bool as_error, xpj_status s, const char *msg) {
  while (clients.rr) {
    job *j = clients.rr->qhead;
    fail_waiters(j->e, as_error, s, msg);
    job_unqueue(j);
  }
}

/* A compile that timed out or ran out of memory says little about its
 * inputs, but another try now would likely cost as much for the same
 * end: the failure is kept for --failure-ttl and served as it is, not as
 * a transient one (so that clients do not compile it themselves), then
 * forgotten. A timeout answers requests that allow no longer a compile
 * (limit_ms); running out of memory answers all (limit_ms 0). */
static void remember_failure(job *j, xpj_status s, const char *what,
                             uint64_t limit_ms) {
  entry *e = j->e;
  uint64_t ttl_s = (cfg.failure_ttl_ms + 999) / 1000;
  time_t until = time(NULL) + (time_t)ttl_s;
  struct tm tm;
  gmtime_r(&until, &tm);
  char when[32];
  strftime(when, sizeof when, "%H:%M:%S UTC", &tm);
  char log[2048];
  snprintf(log, sizeof log, "%s; xpjitd remembers this failure "
                   "for %llu s (until %s) and answers it without compiling "
                   "again%s", what, (unsigned long long)ttl_s, when,
                   limit_ms ? "; a request that allows a longer compile "
                              "tries again"
                            : "");
  int failed = limit_ms ? xpd_failed_code(XPJ_FAILURE_TIMEOUT, limit_ms)
                        : xpd_failed_code(XPJ_FAILURE_MEMORY,
                                          worker_memory_mb);
  xpj_cache_value v = {failed, NULL, 0, "", log, 0, 0, 0,
                       rt_wall_ms() + (int64_t)cfg.failure_ttl_ms};
  if (!entry_fill(e, s, &v)) {
    fail_waiters(e, true, XPJ_ERR_NOMEM, "xpjitd: out of memory");
    remove_entry(e);
    return;
  }
  e->expires_ms = xpd_now_ms() + cfg.failure_ttl_ms;
  e->limit_ms = limit_ms;
  st.failures_remembered++;
  /* and in the cache file, expiring as well: a restarted daemon and the
   * clients that share the file know it too */
  if (l2) {
    xpj_cache_key key = {j->code, j->kernel, j->dtypes, j->ndim, j->target,
                         j->options, versions};
    if (xpj_cache_put(l2, &key, &v) != XPJ_OK)
      LOG_W("cache: %s", xpj_cache_last_error());
  }
  LOG_I("%s [%s] for %s: the failure is remembered for %llu s", j->kernel,
        j->dtypes, short_target(j->target), (unsigned long long)ttl_s);
  answer_waiters(e, XPD_FROM_COMPILED);
}

/* How a worker went. */
enum { W_EXITED, W_TIMED_OUT, W_STOPPED };

/* The worker is gone: reaped, and its job (if any) answered. why: the
 * daemon's reason (W_TIMED_OUT, W_STOPPED); W_EXITED: it died, or its
 * pipe broke, and its exit status says how. */
static void worker_gone(worker *w, int how, const char *why) {
  if (w->dead)
    return;
  w->dead = true;
  epoll_ctl(ep, EPOLL_CTL_DEL, w->fd, NULL);
  close(w->fd);
  int status = 0;
  bool killed_here = false;
  /* a worker that closed its pipe is exiting: give it up to 100 ms to be
   * reaped (on a loaded machine the pipe's end arrives first), so its exit
   * status, not our kill, says how it went */
  pid_t got = w->pid > 0 ? waitpid(w->pid, &status, WNOHANG) : 0;
  for (int i = 0; how == W_EXITED && w->pid > 0 && got == 0 && i < 50; i++) {
    nanosleep(&(struct timespec){0, 2000000}, NULL);
    got = waitpid(w->pid, &status, WNOHANG);
  }
  if (w->pid > 0 && got != w->pid) {
    kill(w->pid, SIGKILL);
    waitpid(w->pid, &status, 0);
    killed_here = true;
  }
  job *j = w->job;
  if (j) {
    j->e->job = NULL; /* over: whatever follows, the entry is done with it */
    char msg[512];
    /* SIGKILL from elsewhere: most likely the kernel's OOM killer; status
     * 75: the worker reached its memory limit (xpj_compile_limit_memory) */
    bool oom = how == W_EXITED && !killed_here &&
               ((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
                (WIFEXITED(status) && WEXITSTATUS(status) == 75));
    if (why)
      snprintf(msg, sizeof msg, "%s", why);
    else if (WIFSIGNALED(status))
      snprintf(msg, sizeof msg, "the compiler worker (pid %d) died of "
               "signal %d (%s%s) compiling %s", (int)w->pid,
               WTERMSIG(status), strsignal(WTERMSIG(status)),
               oom ? ", most likely out of memory" : "", j->kernel);
    else if (oom)
      snprintf(msg, sizeof msg, "compiling %s needs more than the %llu MiB "
               "of memory a compile worker may use (XPJIT_COMPILE_MEMORY_LIMIT "
               "in xpjitd's environment)", j->kernel,
               (unsigned long long)worker_memory_mb);
    else
      snprintf(msg, sizeof msg, "the compiler worker (pid %d) exited with "
               "status %d compiling %s", (int)w->pid,
               WIFEXITED(status) ? WEXITSTATUS(status) : -1, j->kernel);
    if (how == W_EXITED)
      st.worker_crashes++;
    st.compiles++;
    st.compile_failures++;
    static log_limit gone_log; /* workers that crash on every job */
    say_limited(&gone_log, 1, "%s", msg);
    if (cfg.failure_ttl_ms && (how == W_TIMED_OUT || oom)) {
      remember_failure(j, how == W_TIMED_OUT ? XPJ_ERR_COMPILE
                                             : XPJ_ERR_NOMEM,
                       msg, how == W_TIMED_OUT ? j->timeout_ms : 0);
    } else {
      st.compile_transient++;
      fail_waiters(j->e, false, XPJ_ERR_COMPILE, msg);
      remove_entry(j->e);
    }
    job_free(j);
  } else {
    LOG_D("worker %d stopped", (int)w->pid);
  }
  reader_free(&w->r);
  for (unsigned i = 0; i < cfg.workers; i++)
    if (workers[i] == w)
      workers[i] = NULL;
  w->job = NULL;
  w->next_dead = dead_workers;
  dead_workers = w;
}

static void spawn_failed_why(const char *why) {
  uint64_t now = xpd_now_ms();
  st.spawn_failures++;
  spawning.backoff_ms = spawning.backoff_ms ? 2 * spawning.backoff_ms : 250;
  if (spawning.backoff_ms > 10000)
    spawning.backoff_ms = 10000;
  spawning.retry_ms = now + spawning.backoff_ms;
  snprintf(spawning.why, sizeof spawning.why, "%s", why);
  say_limited(&spawning.log, 0, "cannot start a compiler worker (%s, %s); "
              "queued compiles fail at once until one starts", self_exe,
              spawning.why);
}

static void spawn_failed(const char *what, int err) {
  char why[256];
  snprintf(why, sizeof why, "%s: %s", what, strerror(err));
  spawn_failed_why(why);
}

/* A worker's environment: the daemon's, with XPJIT_LLVM_PLUGIN naming
 * the plugin it opened (its descriptor WORKER_PLUGIN_FD); malloc'd, its
 * strings not. */
static char **worker_env(void) {
  size_t n = 0;
  while (environ[n])
    n++;
  char **env = malloc((n + 3) * sizeof *env);
  if (!env)
    return NULL;
  /* the daemon's pid: the worker ends with it (xpjitd_worker_main) */
  static char parent[48];
  snprintf(parent, sizeof parent, "XPJITD_PARENT=%ld", (long)getpid());
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "XPJIT_LLVM_PLUGIN=", 18) &&
        strncmp(environ[i], "XPJITD_PARENT=", 14))
      env[k++] = environ[i];
  env[k++] = (char *)WORKER_PLUGIN_ENV;
  env[k++] = parent;
  env[k] = NULL;
  return env;
}

/* Starts a worker into workers[slot]; NULL (and a back-off) on failure:
 * also without an LLVM plugin, which a worker would otherwise look for
 * itself, somewhere the daemon did not. */
static worker *spawn_worker(unsigned slot) {
  if (plugin_fd < 0 && !plugin_open()) {
    spawn_failed_why(plugin_why);
    return NULL;
  }
  if (plugin_fd >= 0 && plugin_path[0]) {
    LOG_I("workers load the LLVM plugin %s", plugin_path);
    plugin_path[0] = 0; /* said once */
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    spawn_failed("socketpair", errno);
    return NULL;
  }
  worker *w = calloc(1, sizeof *w);
  if (!w) {
    close(sv[0]);
    close(sv[1]);
    spawn_failed("calloc", ENOMEM);
    return NULL;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
  /* the worker starts with default signals, not the daemon's blocked
   * SIGTERM and ignored SIGPIPE */
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t none, def;
  sigemptyset(&none);
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);
  sigaddset(&def, SIGTERM);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &def);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK |
                                    POSIX_SPAWN_SETSIGDEF);
  char *argv[] = {"xpjitd", "--worker", NULL};
  char **env = worker_env();
  posix_spawn_file_actions_adddup2(&fa, plugin_fd, WORKER_PLUGIN_FD);
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 34)
  /* nothing else the daemon was given without close-on-exec (another
   * program's descriptors, LISTEN_FDS beyond its socket) */
  posix_spawn_file_actions_addclosefrom_np(&fa, WORKER_PLUGIN_FD + 1);
#endif
  pid_t pid;
  /* the image this daemon runs, even when its file has been deleted or
   * replaced (a package upgrade): its workers are of its own version */
  int rc = env ? posix_spawn(&pid, "/proc/self/exe", &fa, &at, argv, env)
               : ENOMEM;
  free(env);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(sv[1]);
  if (rc != 0) {
    close(sv[0]);
    free(w);
    spawn_failed("posix_spawn", rc);
    return NULL;
  }
  fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
  w->it.kind = K_WORKER;
  w->pid = pid;
  w->fd = sv[0];
  ep_add(w->fd, w, EPOLLIN);
  workers[slot] = w;
  st.worker_spawns++;
  spawning.backoff_ms = 0;
  LOG_D("worker %d started", (int)pid);
  return w;
}

static void worker_write(worker *w) {
  job *j = w->job;
  while (j && w->out_off < j->frame.len) {
    ssize_t n = send(w->fd, j->frame.p + w->out_off,
                     j->frame.len - w->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      w->out_off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!w->want_out) {
        w->want_out = true;
        ep_mod(w->fd, w, EPOLLIN | EPOLLOUT);
      }
      return;
    }
    worker_gone(w, W_EXITED, NULL);
    return;
  }
  if (w->want_out) {
    w->want_out = false;
    ep_mod(w->fd, w, EPOLLIN);
  }
}

/* An idle worker, or a new one when a slot is free and starting one is
 * not backing off; NULL when none. */
static worker *free_worker(void) {
  for (unsigned i = 0; i < cfg.workers; i++)
    if (workers[i] && !workers[i]->job)
      return workers[i];
  if (xpd_now_ms() < spawning.retry_ms)
    return NULL;
  for (unsigned i = 0; i < cfg.workers; i++)
    if (!workers[i])
      return spawn_worker(i);
  return NULL;
}

static unsigned workers_running(void) {
  unsigned n = 0;
  for (unsigned i = 0; i < cfg.workers; i++)
    n += workers[i] != NULL;
  return n;
}

/* The client whose turn it is: the least recently served of those under
 * their limit of running compiles. */
static client *next_in_turn(void) {
  client *cl = clients.rr;
  if (cl)
    do {
      if (cl->running < cfg.client_compiles)
        return cl;
      cl = cl->rr_next;
    } while (cl != clients.rr);
  return NULL;
}

/* Gives queued jobs to workers: a job of each client in turn, while
 * workers are free and clients under their limit of running compiles.
 * With no worker running and none to be started, every queued job fails
 * at once, transiently: its clients compile themselves. */
static void dispatch(void) {
  while (clients.queued && !shutting_down) {
    client *cl = next_in_turn();
    if (!cl)
      break;
    worker *w = free_worker();
    if (!w)
      break;
    job *j = cl->qhead;
    queue_remove(j);
    cl->served = ++clients.clock;
    if (cl->queued) { /* its next turn: after all the others */
      ring_remove(cl);
      ring_add(cl);
    }
    cl->running++;
    j->w = w;
    j->started = xpd_now_ms();
    w->job = j;
    w->out_off = 0;
    /* and the time a worker may wait for another node's compile first */
    w->deadline = j->started + j->timeout_ms + 5000 +
                  (cfg.redis_shown[0] ? RT_SERVE_WAIT_MS : 0);
    LOG_D("compiling %s [%s] for %s in worker %d for pid %u", j->kernel,
          j->dtypes, short_target(j->target), (int)w->pid, cl->pid);
    worker_write(w);
  }
  if (clients.queued && !shutting_down && !workers_running() &&
      xpd_now_ms() < spawning.retry_ms) {
    char msg[512];
    snprintf(msg, sizeof msg, "xpjitd cannot start a compiler worker (%s); "
             "it tries again in %.1f s", spawning.why,
             (double)(spawning.retry_ms - xpd_now_ms()) / 1000.0);
    fail_queued(false, XPJ_ERR_COMPILE, msg);
  }
}

static void job_done(worker *w, const xpd_kernel *k) {
  job *j = w->job;
  w->job = NULL;
  entry *e = j->e;
  e->job = NULL;
  /* what the worker's tiers counted (Redis hits, misses, stores, refused
   * values, errors), whatever the result */
  if (l2 && *k->counters) {
    xpj_cache_counters tc = {0};
    xpd_counters_add(k->counters, &tc);
    xpj_cache_note(l2, &tc);
  }
  /* the worker found it in the cluster's Redis, or compiled it */
  bool from_redis = k->origin == XPD_FROM_REDIS && !k->v.failed;
  st.hits_redis += from_redis;
  st.compiles += !from_redis;
  st.compile_ms += from_redis ? 0 : k->v.compile_ms;
  if (k->v.failed)
    st.compile_failures++;
  if (k->transient) {
    char msg[2048];
    snprintf(msg, sizeof msg, "%.2000s", k->v.log);
    /* the worker's own limit (a SPIR-V compile is one more process), or
     * out of memory: remembered like a stopped worker */
    bool timed_out = xpd_now_ms() - j->started >= j->timeout_ms;
    if (cfg.failure_ttl_ms && (timed_out || k->status == XPJ_ERR_NOMEM)) {
      remember_failure(j, (xpj_status)k->status, msg,
                       timed_out ? j->timeout_ms : 0);
    } else {
      st.compile_transient++;
      /* the worker could not compile at all (no LLVM, a plugin of
       * another build): the operator's to mend, said where it is read */
      static log_limit transient_log;
      say_limited(&transient_log, 1, "the compiler worker could not "
                  "compile %s (its clients compile themselves): %.700s",
                  j->kernel, msg);
      fail_waiters(e, false, (xpj_status)k->status, msg);
      remove_entry(e);
    }
    job_free(j);
    return;
  }
  if (!entry_fill(e, (xpj_status)k->status, &k->v)) {
    fail_waiters(e, true, XPJ_ERR_NOMEM, "xpjitd: out of memory");
    remove_entry(e);
    job_free(j);
    return;
  }
  if (l2) {
    xpj_cache_key key = {j->code, j->kernel, j->dtypes, j->ndim, j->target,
                         j->options, NULL};
    key.versions = versions;
    xpj_cache_counters d = {0};
    d.compiles = !from_redis;
    d.compile_failures = k->v.failed != 0;
    d.compile_ms = from_redis ? 0 : k->v.compile_ms;
    xpj_cache_note(l2, &d);
    if (xpj_cache_put(l2, &key, &e->v) != XPJ_OK)
      LOG_W("cache: %s", xpj_cache_last_error());
  }
  if (from_redis)
    LOG_I("%s [%s] %s for %s: from the Redis tier", j->kernel, j->dtypes,
          j->options, short_target(j->target));
  else
    LOG_I("compiled %s [%s] %s for %s in %.1f ms%s", j->kernel, j->dtypes,
          j->options, short_target(j->target),
          k->v.compile_ms, k->v.failed ? " (failed)" : "");
  answer_waiters(e, from_redis ? XPD_FROM_REDIS : XPD_FROM_COMPILED);
  job_free(j);
  evict();
}

static void worker_event(worker *w, uint32_t ev) {
  if (w->dead)
    return;
  if (ev & EPOLLOUT) {
    worker_write(w);
    if (w->dead || !(ev & (EPOLLIN | EPOLLHUP | EPOLLERR)))
      return;
  }
  xpd_err err = XPD_E_OK;
  w->r.reads = 4;
  int r = reader_step(&w->r, w->fd, XPD_MAX_REPLY, &err);
  if (r == RD_MORE)
    return;
  if (r != RD_FRAME) {
    if (r == RD_BAD)
      LOG_E("worker %d sent a bad frame: %s", (int)w->pid, xpd_err_str(err));
    worker_gone(w, W_EXITED, NULL);
    return;
  }
  xpd_msg m;
  xpd_kernel k;
  if (!w->job || w->r.h.op != XPD_RESULT ||
      xpd_payload_decode(w->r.pl, w->r.h.len, &m) != XPD_E_OK ||
      xpd_kernel_decode(&m, &k) != XPD_E_OK ||
      strcmp(k.digest, w->job->e->digest)) {
    LOG_E("worker %d sent an unexpected reply", (int)w->pid);
    worker_gone(w, W_STOPPED, "the compiler worker sent an unexpected reply");
    return;
  }
  job_done(w, &k);
  reader_reset(&w->r);
  dispatch();
}

/* ---- requests ---- */

/* A queued job another client waits for moves to that client's queue
 * when it would start sooner there. */
static void maybe_promote(job *j, client *cl) {
  if (j->w || j->owner == cl)
    return;
  unsigned ahead = 0;
  for (job *q = j->owner->qhead; q != j; q = q->next)
    ahead++;
  if (cl->queued < ahead)
    job_move(j, cl);
}

/* A GET answered by e, the entry of its key in memory: ready (a hit, or a
 * remembered failure that this daemon cannot improve on: entry_answers)
 * or being compiled (it waits for the compile). */
static void get_entry(conn *c, uint32_t id, entry *e, uint64_t want,
                      uint64_t limit) {
  if (e->ready) {
    int verdict = failure_verdict(e->limit_ms, want, limit);
    if (verdict != FAILURE_ANSWERS) {
      send_compile_here(c, id, verdict, e->limit_ms, want);
      return;
    }
    st.hits_memory++;
    st.hits_remembered += e->expires_ms != 0;
    lru_front(e);
    reply_kernel(c, id, e, XPD_FROM_MEMORY);
    return;
  }
  if (!add_waiter(e, c, id, want)) {
    send_error(c, id, XPJ_ERR_NOMEM, false, "xpjitd: out of memory");
    return;
  }
  st.coalesced++;
  if (e->job)
    maybe_promote(e->job, c->cl);
}

/* ---- GETs on the parse threads ---- */

/* A source up to this size is hashed on the loop (40 us at most); a larger
 * one on a parse thread. */
#define HASH_ON_LOOP SMALL_FRAME
/* A source from this size is parsed as a big task: with more than one
 * parse thread, one is always left for the other requests. */
#define BIG_SOURCE (256u << 10)

/* A GET whose answer needs work that grows with it: its source hashed (a
 * large one), or parsed, specialised and keyed, the cache file asked and
 * the job's frame built, on a parse thread. It holds the request's
 * payload (g points into it), counted against its client like a frame
 * being read, and counts among the client's waiting GETs, until it is
 * answered or its connection goes. States:
 *   P_HASHING    on a parse thread: the request's identity (req) only
 *   P_KEYING     on a parse thread: keyed; in keying[] meanwhile, so that
 *                identical requests wait for it (its followers)
 *   P_FOLLOWING  waiting for an identical request's keying (leader)
 *   P_ROUTING    being answered by the loop right now (the code that
 *                handles it frees it; a close only forgets its conn) */
enum { P_HASHING, P_KEYING, P_FOLLOWING, P_ROUTING };
struct preq {
  xpjitd_task task; /* first: the pool's part */
  int state;
  conn *c;          /* NULL once its connection has gone */
  client *cl;       /* whose budget it counts against */
  uint32_t id;
  uint8_t *payload;
  uint64_t held;    /* counted against cl: this record and payload */
  xpd_get g;
  uint64_t want, limit; /* the compile time it allows; what it gets */
  uint64_t arrived_ms;  /* when its frame was read */
  bool past_failure;    /* a remembered failure did not answer it: the
                           cache file's row would not either */
  char req[65];         /* its identity (request_key) */
  preq *cprev, *cnext;  /* on its connection's list */
  preq *hnext;          /* P_KEYING: in keying[] */
  preq *followers, *ftail, *fnext; /* identical requests waiting */
  preq *leader;         /* P_FOLLOWING: the one they wait for */
  /* P_KEYING: the parse thread's answer */
  xpj_status status;
  char msg[2048];
  char digest[65], code[65], kernel[256], dtypes[256], target[1200],
      options[64];
  unsigned ndim;
  bool local_hit; /* f holds what the cache file had */
  int64_t dv;     /* the file's data_version before that lookup */
  fetched f;
  xpd_buf job;    /* the JOB frame, when the cache file had nothing */
  bool job_ok;
};

static xpjitd_pool *pool;
static unsigned pool_out;       /* tasks submitted and not taken back */
static preq *keying[NBUCKETS]; /* P_KEYING requests by req */

static preq *keying_find(const char *req) {
  for (preq *q = keying[hash_hex(req)]; q; q = q->hnext)
    if (!strcmp(q->req, req))
      return q;
  return NULL;
}

static void keying_remove(preq *q) {
  for (preq **pp = &keying[hash_hex(q->req)]; *pp; pp = &(*pp)->hnext)
    if (*pp == q) {
      *pp = q->hnext;
      break;
    }
  q->hnext = NULL;
}

/* The GET in c's reader, with its payload, as a pending request. */
static preq *preq_new(conn *c, uint32_t id, const xpd_get *g, uint64_t want,
                      uint64_t limit) {
  preq *q = calloc(1, sizeof *q);
  if (!q)
    return NULL;
  reader *r = &c->r;
  q->payload = r->pl; /* its bytes are counted already: now as q's */
  q->held = r->pcap + sizeof *q;
  r->pl = NULL;
  r->plen = r->pcap = 0;
  hold(c->cl, sizeof *q);
  q->g = *g; /* source points into payload */
  q->c = c;
  q->cl = c->cl;
  q->id = id;
  q->want = want;
  q->limit = limit;
  q->arrived_ms = xpd_now_ms();
  q->task.owner = c->cl;
  c->cl->waiting++;
  q->cnext = c->pending;
  if (c->pending)
    c->pending->cprev = q;
  c->pending = q;
  return q;
}

static void preq_unlink_conn(preq *q) {
  conn *c = q->c;
  if (!c)
    return;
  if (q->cprev)
    q->cprev->cnext = q->cnext;
  else
    c->pending = q->cnext;
  if (q->cnext)
    q->cnext->cprev = q->cprev;
  q->cprev = q->cnext = NULL;
  q->c = NULL;
}

/* Frees q, which is on no parse thread and in no list but its conn's. */
static void preq_free(preq *q) {
  preq_unlink_conn(q);
  client *cl = q->cl;
  if (q->local_hit)
    rt_fetched_clear(&q->f);
  xpd_buf_free(&q->job);
  free(q->payload);
  release(cl, q->held);
  cl->waiting--;
  free(q);
  client_put(cl);
}

static void preq_submit(preq *q, int state) {
  q->state = state;
  q->task.big = state == P_KEYING && q->g.source_len >= BIG_SOURCE;
  atomic_store(&q->task.cancelled, false);
  if (state == P_KEYING) {
    unsigned b = hash_hex(q->req);
    q->hnext = keying[b];
    keying[b] = q;
  }
  pool_out++;
  xpjitd_pool_submit(pool, &q->task);
}

/* q's connection has gone, or the daemon stops (stop): q will not be
 * answered. One that waits for another's keying goes now; one on a parse
 * thread is cancelled (a keying that others wait for runs on, unless the
 * daemon stops) and goes when it comes back; one being answered goes when
 * that ends. */
static void preq_detach(preq *q, bool stop) {
  preq_unlink_conn(q);
  switch (q->state) {
  case P_FOLLOWING: {
    preq *l = q->leader, *prev = NULL;
    for (preq *f = l->followers; f; prev = f, f = f->fnext)
      if (f == q) {
        if (prev)
          prev->fnext = q->fnext;
        else
          l->followers = q->fnext;
        if (l->ftail == q)
          l->ftail = prev;
        break;
      }
    preq_free(q);
    break;
  }
  case P_HASHING:
    atomic_store(&q->task.cancelled, true);
    break;
  case P_KEYING:
    if (stop || !q->followers) {
      keying_remove(q); /* identical requests from now on start afresh */
      atomic_store(&q->task.cancelled, true);
    }
    break;
  default: /* P_ROUTING */
    break;
  }
}

/* The largest source a first look is keyed for when the daemon does not
 * have the kernel in memory (docs/protocol.md, "First looks"): parsing
 * one this size takes about 12 ms here, well inside the 100 ms a process
 * gives a first look. */
#define FIRST_PARSE_MAX (256u << 10)

/* A first look of e, a kernel compiled after the cache file had no row:
 * when no other process has written to the file since, it has none now,
 * and the first look waits for the compile as the process's walk would
 * (PENDING, then the compile's answer). False when it is not answered so. */
static bool first_look_waits(conn *c, uint32_t id, entry *e, uint64_t want,
                             uint64_t limit, uint64_t since,
                             uint64_t wait_ms) {
  if (!e || e->ready || e->dv < 0 || xpj_l2_data_version(l2, false) != e->dv)
    return false;
  st.first_looks++;
  st.first_waits++;
  if (tell_pending(c, id, since, wait_ms) && !c->dead)
    get_entry(c, id, e, want, limit);
  return true;
}

/* Where a GET goes once its identity (req) is known: answered from
 * memory, to a compile's waiters, to the followers of an identical
 * request being keyed, or keyed on a parse thread. q: the GET as a pending
 * request (P_ROUTING); NULL while it is the frame in c's reader. */
static void get_route(conn *c, uint32_t id, const xpd_get *g,
                      const char *req, uint64_t want, uint64_t limit,
                      preq *q) {
  const char *known = memo_find(req);
  entry *e = known ? find_entry(known) : NULL;
  /* a remembered failure that does not answer this request: compile (its
   * row in the cache file says no more than the entry did) */
  bool past_failure = q && q->past_failure;
  if (g->first) { /* only a kernel answers a first look from memory; else
                     it is keyed and looked up in the cache file */
    if (first_look_waits(c, id, e, want, limit,
                         q ? q->arrived_ms : xpd_now_ms(),
                         g->first_wait_ms)) {
      if (q)
        preq_free(q);
      return;
    }
    if (e && !(e->ready && !e->v.failed))
      e = NULL;
    if (!e && g->source_len > FIRST_PARSE_MAX) {
      /* a large program, not answered from memory: keying it may mean
       * parsing it first (2 MB: about 100 ms, the first look's whole
       * budget), where the process's own file answers in a few: that
       * first, then a GET if the file has no row */
      st.first_looks++;
      send_error(c, id, XPJ_ERR_NOT_FOUND, false, "xpjitd: a program of "
                 "%llu bytes is looked for in the process's cache file "
                 "first", (unsigned long long)g->source_len);
      if (q)
        preq_free(q);
      return;
    }
  } else if (e && e->ready && !entry_answers(e, want, limit)) {
    remove_entry(e);
    e = NULL;
    past_failure = true;
  }
  if (e) {
    get_entry(c, id, e, want, limit);
    if (q)
      preq_free(q);
    return;
  }
  if (!q && !(q = preq_new(c, id, g, want, limit))) {
    send_error(c, id, XPJ_ERR_NOMEM, false, "xpjitd: out of memory");
    return;
  }
  memcpy(q->req, req, sizeof q->req);
  q->past_failure = past_failure;
  preq *l = keying_find(req);
  if (l) { /* keyed once for all */
    st.keyed_shared++;
    q->state = P_FOLLOWING;
    q->leader = l;
    q->fnext = NULL;
    if (l->ftail)
      l->ftail->fnext = q;
    else
      l->followers = q;
    l->ftail = q;
    return;
  }
  preq_submit(q, P_KEYING);
}

static void handle_get(conn *c, uint32_t id, const xpd_msg *m) {
  xpd_get g;
  xpd_err err = xpd_get_decode(m, false, &g);
  if (err != XPD_E_OK) {
    st.malformed++;
    send_error(c, id, XPJ_ERR_INVALID, true, "malformed GET: %s",
               xpd_err_str(err));
    return;
  }
  st.requests++;
  if (shutting_down) {
    send_error(c, id, XPJ_ERR_DEVICE, false, "xpjitd is shutting down");
    return;
  }
  uint64_t want, limit;
  compile_limits(g.timeout_ms, &want, &limit);
  if (g.source_len <= HASH_ON_LOOP) {
    char req[65];
    request_key(&g, true, req);
    get_route(c, id, &g, req, want, limit, NULL);
    return;
  }
  preq *q = preq_new(c, id, &g, want, limit);
  if (!q) {
    send_error(c, id, XPJ_ERR_NOMEM, false, "xpjitd: out of memory");
    return;
  }
  preq_submit(q, P_HASHING);
}

/* A LOOKUP: the kernel whose cache key has the digest given, answered
 * from memory as a GET of it would be (the client computed the key, as
 * for its own cache file, and sends neither source nor target); anything
 * that would need the GET's fields (no entry; a remembered failure that
 * does not answer it; for a first look, anything but a kernel or a
 * compile the file cannot have answered since) is an ERROR
 * XPJ_ERR_NOT_FOUND, the connection kept, and the client sends the GET
 * (docs/protocol.md, "Lookups"). */
static void handle_lookup(conn *c, uint32_t id, const xpd_msg *m) {
  xpd_lookup l;
  xpd_err err = xpd_lookup_decode(m, &l);
  if (err != XPD_E_OK) {
    st.malformed++;
    send_error(c, id, XPJ_ERR_INVALID, true, "malformed LOOKUP: %s",
               xpd_err_str(err));
    return;
  }
  st.lookups++;
  if (shutting_down) {
    st.requests++;
    send_error(c, id, XPJ_ERR_DEVICE, false, "xpjitd is shutting down");
    return;
  }
  uint64_t want, limit;
  compile_limits(l.timeout_ms, &want, &limit);
  entry *e = find_entry(l.digest);
  if (l.first) { /* as get_route answers a first look from memory */
    if (first_look_waits(c, id, e, want, limit, xpd_now_ms(),
                         l.first_wait_ms)) {
      st.requests++;
      return;
    }
    if (e && !(e->ready && !e->v.failed))
      e = NULL;
  } else if (e && e->ready && !entry_answers(e, want, limit)) {
    e = NULL; /* the GET forgets it and compiles */
  }
  if (!e) { /* not a request: the GET that follows is */
    st.lookups_missed++;
    send_error(c, id, XPJ_ERR_NOT_FOUND, false,
               "xpjitd: no kernel %.16s in memory: send the GET", l.digest);
    return;
  }
  st.requests++;
  get_entry(c, id, e, want, limit);
}

/* On a parse thread: q's identity (P_HASHING), or q parsed, resolved,
 * specialised and keyed, the cache file asked, and the job's frame built
 * when it has nothing (P_KEYING). Touches nothing of the loop's. */
static void key_work(xpjitd_task *t) {
  preq *q = (preq *)t;
  if (q->state == P_HASHING) {
    request_key(&q->g, false, q->req);
    return;
  }
  const xpd_get *g = &q->g;
  xpj_program *p = xpjitd_program(&progs, ctx, g, &q->status, q->msg,
                                  sizeof q->msg);
  if (!p)
    return;
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.opt_level = (unsigned)g->opt_level;
  o.fast_math = (int)g->fast_math;
  o.debug_info = (int)g->debug;
  o.checks = (unsigned)g->checks;
  o.fp_contract = (int)g->contract;
  o.timeout_ms = (unsigned)g->timeout_ms;
  rt_keyed k;
  q->status = rt_program_keyed(p, g->kernel, g->dtypes, (unsigned)g->ndim,
                               g->target, &o, &k);
  if (q->status != XPJ_OK) {
    snprintf(q->msg, sizeof q->msg, "%s", xpj_last_error());
    xpjitd_program_done(&progs, p);
    return;
  }
  memcpy(q->digest, k.digest, sizeof q->digest);
  snprintf(q->code, sizeof q->code, "%s", k.code);
  snprintf(q->kernel, sizeof q->kernel, "%s", k.key.kernel);
  snprintf(q->dtypes, sizeof q->dtypes, "%s", k.canon);
  snprintf(q->target, sizeof q->target, "%s", k.tstr);
  snprintf(q->options, sizeof q->options, "%s", k.ostr);
  q->ndim = k.ndim;
  /* the local tiers (the cache file); the remote ones are asked by the
   * worker that compiles. The request's time limit is the daemon's: a
   * remembered failure answers within it. */
  k.o.timeout_ms = (unsigned)q->limit;
  q->dv = q->past_failure ? -1 : xpj_l2_data_version(l2, true);
  q->local_hit = !q->past_failure && rt_cc_local(ctx, &k, &q->f);
  if (!q->local_hit) {
    xpd_get jg = *g;
    jg.first = jg.first_wait_ms = 0; /* a job is no first look */
    memcpy(jg.digest, k.digest, sizeof jg.digest);
    jg.timeout_ms = q->limit;
    xpd_begin(&q->job, XPD_JOB, 0);
    xpd_put_get(&q->job, &jg);
    q->job_ok = xpd_end(&q->job, 0);
  }
  rt_keyed_free(&k);
  xpjitd_program_done(&progs, p);
}

/* A kernel as the cache file had it (f), to c. */
static void reply_fetched(conn *c, uint32_t id, const char *digest,
                          const fetched *f, int origin) {
  xpd_kernel k = {0};
  k.status = (uint64_t)f->status;
  k.origin = (uint64_t)origin;
  k.v = f->v;
  k.v.failed = f->v.failed != 0;
  memcpy(k.digest, digest, 65);
  size_t at = frame_begin(c, XPD_KERNEL, id);
  xpd_put_kernel(&c->out, &k);
  frame_end(c, at);
}

static void get_keyed(preq *q, conn *c, uint32_t id, uint64_t want,
                      uint64_t limit);

/* The answer to a first look keyed as q, for the request r (q itself or
 * one that followed it) on c (docs/protocol.md, "First looks"): a kernel
 * in memory or in the cache file; an ERROR when the file holds a failure
 * (the client's own walk reads it); when the file has no row, PENDING,
 * then what any GET gets (a compile, or the wait for one under way). */
static void first_answer(preq *q, const preq *r, conn *c) {
  entry *e = find_entry(q->digest);
  st.first_looks++;
  if (e && e->ready && !e->v.failed) {
    st.hits_memory++;
    lru_front(e);
    reply_kernel(c, r->id, e, XPD_FROM_MEMORY);
    return;
  }
  const fetched *f = &q->f;
  if (q->local_hit && !f->v.failed) {
    st.hits_cache++;
    if (!e && (e = new_entry(q->digest))) { /* kept, as any hit of the file */
      if (entry_fill(e, f->status, &f->v)) {
        reply_kernel(c, r->id, e, XPD_FROM_CACHE);
        evict();
        return;
      }
      remove_entry(e);
    }
    reply_fetched(c, r->id, q->digest, f, XPD_FROM_CACHE);
    return;
  }
  if (q->local_hit) {
    send_error(c, r->id, XPJ_ERR_COMPILE, false,
               "a first look: the cache file holds a failure of this "
               "kernel; look there");
    return;
  }
  st.first_waits++;
  if (tell_pending(c, r->id, r->arrived_ms, r->g.first_wait_ms) && !c->dead)
    get_keyed(q, c, r->id, r->want, r->limit);
}

/* A GET keyed on a parse thread (the keying q), for the client c, id:
 * answered from memory, from the cache file, or compiled. */
static void get_keyed(preq *q, conn *c, uint32_t id, uint64_t want,
                      uint64_t limit) {
  if (q->g.digest[0] && strcmp(q->g.digest, q->digest))
    LOG_D("client key %s differs from %s (another version?)", q->g.digest,
          q->digest);
  bool past_failure = q->past_failure;
  entry *e = find_entry(q->digest);
  if (e && e->ready && !entry_answers(e, want, limit)) {
    remove_entry(e);
    e = NULL;
    past_failure = true;
  }
  if (e) {
    get_entry(c, id, e, want, limit);
    return;
  }
  e = new_entry(q->digest);
  if (!e) {
    send_error(c, id, XPJ_ERR_NOMEM, false, "xpjitd: out of memory");
    return;
  }
  bool hit = !past_failure && q->local_hit;
  const fetched *f = &q->f;
  uint64_t row_limit = hit && f->v.failed && f->v.expires_ms &&
                               (f->v.failed & 15) == XPJ_FAILURE_TIMEOUT
                           ? xpd_failed_limit(f->v.failed)
                           : 0;
  /* a remembered timeout in the file answers as one in memory (the row
   * was read within this daemon's limit: rt_cc_local) */
  int verdict = failure_verdict(row_limit, want, limit);
  if (verdict != FAILURE_ANSWERS) {
    send_compile_here(c, id, verdict, row_limit, want);
    remove_entry(e);
    return;
  }
  if (hit) {
    st.hits_cache++;
    bool ok = entry_fill(e, f->status, &f->v);
    e->limit_ms = row_limit;
    if (ok && f->v.expires_ms) { /* a remembered failure: forgotten when
                                    it says */
      int64_t left = f->v.expires_ms - rt_wall_ms();
      e->expires_ms = xpd_now_ms() + (uint64_t)(left > 1 ? left : 1);
    }
    if (!ok) {
      remove_entry(e);
      send_error(c, id, XPJ_ERR_NOMEM, false, "xpjitd: out of memory");
      return;
    }
    reply_kernel(c, id, e, XPD_FROM_CACHE);
    evict();
    return;
  }
  /* compile it, once */
  job *j = calloc(1, sizeof *j);
  if (!j) {
    remove_entry(e);
    send_error(c, id, XPJ_ERR_NOMEM, false, "xpjitd: out of memory");
    return;
  }
  j->e = e;
  j->timeout_ms = q->limit;
  memcpy(j->code, q->code, sizeof j->code);
  memcpy(j->kernel, q->kernel, sizeof j->kernel);
  memcpy(j->dtypes, q->dtypes, sizeof j->dtypes);
  memcpy(j->target, q->target, sizeof j->target);
  memcpy(j->options, q->options, sizeof j->options);
  j->ndim = q->ndim;
  if (!q->job.p) { /* the cache file had it, but memory said compile
                      (rare): the frame is built here */
    xpd_get jg = q->g;
    jg.first = jg.first_wait_ms = 0;
    memcpy(jg.digest, e->digest, sizeof jg.digest);
    jg.timeout_ms = q->limit;
    xpd_begin(&q->job, XPD_JOB, 0);
    xpd_put_get(&q->job, &jg);
    q->job_ok = xpd_end(&q->job, 0);
  }
  j->frame = q->job;
  memset(&q->job, 0, sizeof q->job);
  /* a queued job holds its source until it runs: counted like the rest */
  j->held = sizeof *j + j->frame.cap;
  if (!q->job_ok || !fits(c->cl, j->held)) {
    bool oom = !q->job_ok;
    xpd_buf_free(&j->frame);
    free(j);
    remove_entry(e);
    if (oom) {
      send_error(c, id, XPJ_ERR_NOMEM, false, "xpjitd: out of memory");
      return;
    }
    st.refused_memory++;
    send_error(c, id, XPJ_ERR_NOMEM, false,
               "xpjitd holds too much for its clients now (this process: "
               "%llu of its %llu bytes; all: %llu of %llu); compile it "
               "here", (unsigned long long)c->cl->held,
               (unsigned long long)share(),
               (unsigned long long)clients.held,
               (unsigned long long)cfg.client_memory);
    return;
  }
  e->job = j;
  e->dv = !past_failure && !q->local_hit ? q->dv : -1;
  j->owner = c->cl;
  hold(c->cl, j->held);
  if (!add_waiter(e, c, id, want)) {
    release(c->cl, j->held);
    e->job = NULL;
    xpd_buf_free(&j->frame);
    free(j);
    remove_entry(e);
    send_error(c, id, XPJ_ERR_NOMEM, false, "xpjitd: out of memory");
    return;
  }
  queue_push(c->cl, j);
  dispatch();
}

/* The followers of q, taken off it and made P_ROUTING (a close while
 * they are answered leaves them to the caller). */
static preq *take_followers(preq *q) {
  preq *fl = q->followers;
  q->followers = q->ftail = NULL;
  for (preq *f = fl; f; f = f->fnext) {
    f->state = P_ROUTING;
    f->leader = NULL;
  }
  return fl;
}

/* A task back from its parse thread. */
static void key_done(preq *q) {
  if (q->state == P_HASHING) {
    q->state = P_ROUTING;
    if (q->c && q->task.ran)
      get_route(q->c, q->id, &q->g, q->req, q->want, q->limit, q);
    else
      preq_free(q);
    return;
  }
  keying_remove(q);
  q->state = P_ROUTING;
  bool ran = q->task.ran, ok = ran && q->status == XPJ_OK;
  st.keyed += ran;
  /* parsing a large source leaves much free heap (give_back_memory) */
  clients.big |= ran && q->g.source_len >= (1u << 20);
  preq *fl = take_followers(q);
  if (ok && q->g.first) { /* identical first looks: one answer for all */
    memo_add(q->req, q->digest);
    if (q->c)
      first_answer(q, q, q->c);
    for (preq *f = fl, *n; f; f = n) {
      n = f->fnext;
      f->fnext = NULL;
      if (f->c)
        first_answer(q, f, f->c);
      preq_free(f);
    }
    preq_free(q);
    return;
  }
  if (ok) {
    memo_add(q->req, q->digest);
    /* the first still connected of q and its followers is answered with
     * q's keying, the others are routed as repeated requests */
    preq *first = q;
    while (!first->c && fl) {
      first = fl;
      fl = fl->fnext;
      if (!first->c) {
        preq_free(first);
        first = q;
      }
    }
    if (first->c)
      get_keyed(q, first->c, first->id, first->want, first->limit);
    if (first != q)
      preq_free(first);
  } else if (ran && q->c) {
    st.request_errors++;
    send_error(q->c, q->id, q->status, false, "%s", q->msg);
  }
  for (preq *f = fl, *n; f; f = n) {
    n = f->fnext;
    f->fnext = NULL;
    if (!f->c) {
      preq_free(f);
    } else if (ok || !ran) { /* its turn: memory now, or keyed afresh */
      get_route(f->c, f->id, &f->g, f->req, f->want, f->limit, f);
    } else { /* the same request: the same failure */
      st.request_errors++;
      conn *c = f->c;
      uint32_t id = f->id;
      preq_free(f);
      send_error(c, id, q->status, false, "%s", q->msg);
    }
  }
  preq_free(q);
}

/* Takes what the parse threads have finished. */
static void pool_event(void) {
  for (xpjitd_task *t = xpjitd_pool_done(pool), *n; t; t = n) {
    n = t->next;
    t->next = NULL;
    pool_out--;
    key_done((preq *)t);
  }
}

/* A string value of STATS (a path, the versions, the Redis address) on
 * its one line: a backslash as "\\", a newline as "\n", any other
 * control byte (and DEL) as "\xHH" (docs/protocol.md). A cache path with
 * a newline in it made the reply's lines invent statistics ("compiles
 * 99": an outside probe). Into out (size bytes, cut short there, whole
 * escapes only); no allocation: a client may ask for STATS in a loop. */
static const char *stat_escape(const char *s, char *out, size_t size) {
  size_t o = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char e[5];
    size_t n;
    if (*p == '\\' || *p == '\n')
      n = (size_t)snprintf(e, sizeof e, "\\%c", *p == '\n' ? 'n' : '\\');
    else if (*p < 0x20 || *p == 0x7f)
      n = (size_t)snprintf(e, sizeof e, "\\x%02x", *p);
    else
      e[0] = (char)*p, n = 1;
    if (o + n >= size)
      break;
    memcpy(out + o, e, n);
    o += n;
  }
  out[o] = 0;
  return out;
}

static void stats_text(xpd_buf *b) {
  char t[20480]; /* the escaped strings: a path of 4095 bytes, 4 each */
  enum { ESC = 4 * 4096 + 1 }; /* a path of 4096 bytes, 4 each */
  static char esc[4][ESC];       /* (the event loop's thread only) */
  const char *e_vers = stat_escape(versions, esc[0], ESC),
             *e_sock = stat_escape(cfg.socket, esc[1], ESC);
  /* a cache the daemon refused (0777 directory...) is not its cache */
  const char *e_cache =
      stat_escape(l2 && xpj_cache_mode_of(l2) != XPJ_CACHE_MODE_OFF
                      ? xpj_cache_path(l2)
                      : "off",
                  esc[2], ESC);
  const char *e_redis =
      stat_escape(cfg.redis_shown[0] ? cfg.redis_shown : "off", esc[3], ESC);
  unsigned busy = 0, running = 0;
  for (unsigned i = 0; i < cfg.workers; i++)
    if (workers[i]) {
      running++;
      busy += workers[i]->job != NULL;
    }
  int n = snprintf(
      t, sizeof t,
      "pid %d\nuptime_s %.1f\nversions %s\nsocket %s\ncache %s\n"
      "connections %u\nconnections_total %llu\nclients %u\n"
      "refused_uid %llu\nrefused_busy %llu\nrefused_memory %llu\n"
      "requests %llu\nhits_memory %llu\nhits_cache %llu\nhits_redis %llu\n"
      "redis %s\nhits_remembered %llu\nfirst_looks %llu\nfirst_waits %llu\n"
      "pendings_held %llu\npendings_spared %llu\nlookups %llu\n"
      "lookups_missed %llu\ncoalesced %llu\nparse_threads %u\n"
      "keying %u\nkeyed %llu\nkeyed_shared %llu\ncompiles %llu\n"
      "compile_failures %llu\ncompile_transient %llu\ncompile_ms %.1f\n"
      "failures_remembered %llu\nqueue %u\njobs_dropped %llu\nworkers %u\n"
      "workers_running %u\nworkers_busy %u\nworker_spawns %llu\n"
      "spawn_failures %llu\nworker_crashes %llu\nworker_timeouts %llu\n"
      "malformed_frames %llu\nio_timeouts %llu\nrequest_errors %llu\n"
      "entries %llu\nmemory_bytes %llu\nevictions %llu\nclient_bytes %llu\n"
      "bytes_in %llu\nbytes_out %llu\n",
      (int)getpid(), (double)(xpd_now_ms() - st.started_ms) / 1000.0,
      e_vers, e_sock, e_cache, nconns,
      (unsigned long long)st.conns_total, clients.n,
      (unsigned long long)st.conns_refused_uid,
      (unsigned long long)st.conns_refused_busy,
      (unsigned long long)st.refused_memory,
      (unsigned long long)st.requests, (unsigned long long)st.hits_memory,
      (unsigned long long)st.hits_cache, (unsigned long long)st.hits_redis,
      e_redis,
      (unsigned long long)st.hits_remembered,
      (unsigned long long)st.first_looks, (unsigned long long)st.first_waits,
      (unsigned long long)st.pendings_held,
      (unsigned long long)st.pendings_spared,
      (unsigned long long)st.lookups, (unsigned long long)st.lookups_missed,
      (unsigned long long)st.coalesced, cfg.parse_threads, pool_out,
      (unsigned long long)st.keyed, (unsigned long long)st.keyed_shared,
      (unsigned long long)st.compiles,
      (unsigned long long)st.compile_failures,
      (unsigned long long)st.compile_transient,
      st.compile_ms,
      (unsigned long long)st.failures_remembered, clients.queued,
      (unsigned long long)st.jobs_dropped, cfg.workers, running, busy,
      (unsigned long long)st.worker_spawns,
      (unsigned long long)st.spawn_failures,
      (unsigned long long)st.worker_crashes,
      (unsigned long long)st.worker_timeouts,
      (unsigned long long)st.malformed, (unsigned long long)st.io_timeouts,
      (unsigned long long)st.request_errors, (unsigned long long)n_entries,
      (unsigned long long)mem_bytes, (unsigned long long)st.evictions,
      (unsigned long long)clients.held,
      (unsigned long long)st.bytes_in, (unsigned long long)st.bytes_out);
  size_t len = n < 0 ? 0 : (size_t)n < sizeof t ? (size_t)n : sizeof t - 1;
  xpd_put_bytes(b, XPD_F_TEXT, t, len);
}

static void begin_shutdown(const char *why);

static void handle_frame(conn *c) {
  xpd_header h = c->r.h;
  xpd_msg m;
  xpd_err err = xpd_payload_decode(c->r.pl, h.len, &m);
  if (err != XPD_E_OK) {
    st.malformed++;
    send_error(c, h.id, XPJ_ERR_INVALID, true, "malformed frame: %s",
               xpd_err_str(err));
    return;
  }
  if (!c->hello && h.op != XPD_HELLO) {
    st.malformed++;
    send_error(c, h.id, XPJ_ERR_INVALID, true,
               "the first frame must be HELLO");
    return;
  }
  switch (h.op) {
  case XPD_HELLO: {
    uint64_t proto = 0;
    if (c->hello || xpd_get_u64(&m, XPD_F_PROTO, false, &proto) != XPD_E_OK) {
      st.malformed++;
      send_error(c, h.id, XPJ_ERR_INVALID, true,
                 c->hello ? "HELLO twice" : "HELLO without a version");
      return;
    }
    if (proto != XPD_VERSION) {
      send_error(c, h.id, XPJ_ERR_UNSUPPORTED, true,
                 "protocol version %llu is not spoken here (this daemon "
                 "speaks %d)", (unsigned long long)proto, XPD_VERSION);
      return;
    }
    /* VERSIONS and PID are required too (docs/protocol.md): a HELLO of
     * PROTO alone, or with an empty VERSIONS, was welcomed (an outside
     * probe) */
    char hv[1024];
    uint64_t hpid = 0;
    const char *bad = NULL;
    if (xpd_get_str(&m, XPD_F_VERSIONS, false, hv, sizeof hv) != XPD_E_OK ||
        !hv[0])
      bad = "HELLO without its VERSIONS";
    else if (xpd_get_u64(&m, XPD_F_PID, false, &hpid) != XPD_E_OK ||
             hpid == 0 || hpid > INT_MAX)
      bad = "HELLO without a PID (a process id)";
    if (bad) {
      st.malformed++;
      send_error(c, h.id, XPJ_ERR_INVALID, true, "%s", bad);
      return;
    }
    c->hello = true;
    size_t at = frame_begin(c, XPD_WELCOME, h.id);
    xpd_put_u64(&c->out, XPD_F_PROTO, XPD_VERSION);
    xpd_put_u64(&c->out, XPD_F_CAPS,
                XPD_CAP_GET | XPD_CAP_STATS | XPD_CAP_SHUTDOWN |
                    XPD_CAP_LOOKUP |
                    (cfg.redis_shown[0] ? XPD_CAP_REDIS : 0));
    xpd_put_str(&c->out, XPD_F_VERSIONS, versions);
    xpd_put_u64(&c->out, XPD_F_PID, (uint64_t)getpid());
    bool rw = l2 && xpj_cache_mode_of(l2) == XPJ_CACHE_MODE_RW;
    xpd_put_str(&c->out, XPD_F_CACHE_PATH, rw ? xpj_cache_path(l2) : "");
    if (rw)
      cache_identify_again(false);
    if (rw && cache_id.known) {
      xpd_put_u64(&c->out, XPD_F_CACHE_DEV, cache_id.dev);
      xpd_put_u64(&c->out, XPD_F_CACHE_INO, cache_id.ino);
    }
    frame_end(c, at);
    return;
  }
  case XPD_GET:
  case XPD_LOOKUP:
    /* per process, over all its connections */
    if (c->cl->waiting >= MAX_WAITING) {
      st.malformed++;
      send_error(c, h.id, XPJ_ERR_INVALID, true,
                 "more than %d requests outstanding for process %u",
                 MAX_WAITING, c->cl->pid);
      return;
    }
    if (h.op == XPD_GET)
      handle_get(c, h.id, &m);
    else
      handle_lookup(c, h.id, &m);
    return;
  case XPD_STATS: {
    size_t at = frame_begin(c, XPD_STATS_REPLY, h.id);
    stats_text(&c->out);
    frame_end(c, at);
    return;
  }
  case XPD_PING: {
    size_t at = frame_begin(c, XPD_PONG, h.id);
    frame_end(c, at);
    return;
  }
  case XPD_SHUTDOWN: {
    LOG_I("shutdown requested by pid %u", c->pid);
    size_t at = frame_begin(c, XPD_OK, h.id);
    frame_end(c, at);
    begin_shutdown("a shutdown request");
    return;
  }
  default:
    st.malformed++;
    send_error(c, h.id, XPJ_ERR_INVALID, true,
               "operation %u is not a request", h.op);
    return;
  }
}

/* The client sends no more. One that has gone (a hang-up: it closed, or
 * reads no more either) is closed at once, with what it waited for; one
 * that only shut down its writing side, as a client may once it has sent
 * its requests, is answered first (half-closed: a frame cut short by the
 * end is dropped, it cannot be complete), and close_answered closes it.
 * It was closed at once, and a GET sent before the end never answered
 * (found by an outside probe). */
static void conn_read_end(conn *c, uint32_t ev) {
  if (ev & (EPOLLHUP | EPOLLERR)) {
    conn_close(c);
    return;
  }
  reader_free(&c->r);
  c->eof = true;
  c->eprev = NULL;
  c->enext = half_closed;
  if (half_closed)
    half_closed->eprev = c;
  half_closed = c;
  conn_watch(c);
}

static void conn_event(conn *c, uint32_t ev) {
  if (c->dead)
    return;
  if (ev & EPOLLOUT) {
    if (!conn_flush(c))
      return;
  }
  if (c->eof) { /* nothing more to read: only its going is news */
    if (ev & (EPOLLHUP | EPOLLERR))
      conn_close(c);
    return;
  }
  bool readable = ev & (EPOLLIN | EPOLLHUP | EPOLLERR);
  if (!readable && !reader_has_more(&c->r))
    return;
  /* frames already read ahead are answered even when only EPOLLOUT came
   * (reading was paused for unread replies); at most 4 reads per event,
   * so one busy client cannot starve the others */
  c->r.reads = readable ? 4 : 0;
  for (;;) {
    if (!c->closing && unsent(c) > OUT_HIGH)
      return; /* read on once the client has taken its replies */
    if (c->closing) { /* after a fatal error: drain and ignore (the
                         error goes out first: conn_flush closes) */
      char sink[4096];
      ssize_t n = recv(c->fd, sink, sizeof sink, MSG_DONTWAIT);
      if (n == 0)
        conn_read_end(c, ev);
      else if (n < 0 && errno != EAGAIN && errno != EINTR)
        conn_close(c);
      return;
    }
    xpd_err err = XPD_E_OK;
    int r = reader_step(&c->r, c->fd, XPD_MAX_REQUEST, &err);
    if (r == RD_MORE)
      return;
    if (r == RD_EOF) {
      conn_read_end(c, ev);
      return;
    }
    if (r == RD_GONE) {
      conn_close(c);
      return;
    }
    c->last_active = xpd_now_ms();
    if (r == RD_BAD && c->r.over_budget) {
      st.refused_memory++;
      LOG_D("connection %llu: a frame of %u bytes refused: process %u "
            "holds %llu bytes", (unsigned long long)c->serial, c->r.h.len,
            c->cl->pid, (unsigned long long)c->cl->held);
      send_error(c, c->r.h.id, XPJ_ERR_NOMEM, true,
                 "a frame of %u bytes refused: xpjitd holds too much for "
                 "its clients now (this process: %llu of its %llu bytes; "
                 "all: %llu of %llu)", c->r.h.len,
                 (unsigned long long)c->cl->held,
                 (unsigned long long)share(),
                 (unsigned long long)clients.held,
                 (unsigned long long)cfg.client_memory);
      return;
    }
    if (r == RD_BAD) {
      st.malformed++;
      LOG_D("connection %llu: %s", (unsigned long long)c->serial,
            xpd_err_str(err));
      send_error(c, c->r.h.id, err == XPD_E_VERSION ? XPJ_ERR_UNSUPPORTED
                                                     : XPJ_ERR_INVALID,
                 true, "%s", xpd_err_str(err));
      return;
    }
    handle_frame(c);
    if (c->dead)
      return; /* closed while answering */
    if (c->closing)
      continue;
    reader_reset(&c->r);
  }
}

/* Closes c; what it waited for is no longer awaited by it, and a queued
 * job that nobody waits for goes. When its process has no connection
 * left, its queued jobs (all awaited by other processes) go to the queue
 * of the first of those. */
static void conn_close(conn *c) {
  if (c->dead)
    return;
  c->dead = true;
  owed_drop(c);
  if (c->eof) {
    if (c->eprev)
      c->eprev->enext = c->enext;
    else
      half_closed = c->enext;
    if (c->enext)
      c->enext->eprev = c->eprev;
  }
  epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  reader_free(&c->r);
  xpd_buf_free(&c->out);
  c->out_off = 0;
  out_account(c);
  while (c->waits) {
    waiter *w = c->waits;
    entry *e = w->e;
    for (waiter **pp = &e->waiters; *pp; pp = &(*pp)->next)
      if (*pp == w) {
        *pp = w->next;
        break;
      }
    waiter_off_conn(w);
    free(w);
    if (e->job && !e->job->w && !e->waiters)
      job_drop(e->job);
  }
  while (c->pending)
    preq_detach(c->pending, false);
  client *cl = c->cl;
  if (cl->conns == 1)
    while (cl->qhead) {
      job *j = cl->qhead;
      waiter *w = j->e->waiters;
      if (w && w->c->cl != cl)
        job_move(j, w->c->cl);
      else
        job_drop(j);
    }
  cl->conns--;
  release(cl, sizeof *c);
  client_put(cl);
  slots[c->slot] = NULL;
  nconns--;
  LOG_D("connection %llu closed", (unsigned long long)c->serial);
  c->next_dead = dead_conns;
  dead_conns = c;
}

/* Closes the half-closed connections (conn_read_end) whose requests are
 * all answered and whose answers are sent: after each round of events,
 * when a waiter's compile, a parse or a flush may have ended. One whose
 * answers are not read is closed by its --io-timeout. */
static void close_answered(void) {
  for (conn *c = half_closed, *n; c; c = n) {
    n = c->enext;
    if (!unsent(c) && (c->closing || (!c->waits && !c->pending)))
      conn_close(c);
  }
}

/* ---- accepting ---- */

static int listen_fd = -1, reserve_fd = -1;
static bool own_socket; /* bound by us: unlink at exit */
static item listen_item = {K_LISTEN};

/* Tells a connection we will not serve why (best effort), and closes it. */
static void refuse(int fd, xpj_status s, const char *why) {
  xpd_buf b = {0};
  xpd_begin(&b, XPD_ERROR, 0);
  xpd_put_u64(&b, XPD_F_STATUS, (uint64_t)s);
  xpd_put_str(&b, XPD_F_MESSAGE, why);
  if (xpd_end(&b, 0) && send(fd, b.p, b.len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
    LOG_D("could not tell the refused peer why");
  xpd_buf_free(&b);
  close(fd);
}

static void accept_all(void) {
  static log_limit busy_log, nofd_log, uid_log;
  for (;;) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if ((errno == EMFILE || errno == ENFILE) && reserve_fd >= 0) {
        /* out of descriptors: take the waiting connection with the reserve
         * one and close it, so the listener does not spin; accept4 fails
         * so also when nothing waits, so stop when accept finds nothing */
        close(reserve_fd);
        fd = accept(listen_fd, NULL, NULL);
        if (fd >= 0)
          close(fd);
        reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
          return;
        st.conns_refused_busy++;
        say_limited(&nofd_log, 1, "out of file descriptors: connections "
                    "refused (raise the limit or lower --max-connections)");
        continue;
      }
      return;
    }
    struct ucred cr;
    socklen_t crlen = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) != 0 ||
        cr.uid != geteuid()) {
      st.conns_refused_uid++;
      say_limited(&uid_log, 1, "refused a connection from uid %u (pid %d): "
                  "only uid %u may use this daemon", (unsigned)cr.uid,
                  (int)cr.pid, (unsigned)geteuid());
      refuse(fd, XPJ_ERR_INVALID,
             "permission denied: this xpjitd serves only its own user");
      continue;
    }
    unsigned slot = nslots;
    for (unsigned i = 0; i < nslots; i++)
      if (!slots[i]) {
        slot = i;
        break;
      }
    conn *c = slot < nslots && !shutting_down ? calloc(1, sizeof *c) : NULL;
    client *cl = c ? client_of((unsigned)cr.pid) : NULL;
    if (!cl) {
      free(c);
      st.conns_refused_busy++;
      if (!shutting_down)
        say_limited(&busy_log, 1, "too many connections: refused one from "
                    "pid %d (%u open, --max-connections %u)", (int)cr.pid,
                    nconns, nslots);
      refuse(fd, XPJ_ERR_DEVICE, shutting_down ? "xpjitd is shutting down"
                                               : "too many connections");
      continue;
    }
    c->it.kind = K_CONN;
    c->fd = fd;
    c->slot = slot;
    c->serial = next_serial++;
    c->uid = (unsigned)cr.uid;
    c->pid = (unsigned)cr.pid;
    c->cl = cl;
    c->r.owner = cl;
    cl->conns++;
    hold(cl, sizeof *c);
    c->last_active = xpd_now_ms();
    slots[slot] = c;
    nconns++;
    st.conns_total++;
    c->events = EPOLLIN;
    ep_add(fd, c, EPOLLIN);
    LOG_D("connection %llu from pid %u", (unsigned long long)c->serial,
          c->pid);
  }
}

/* ---- timeouts ---- */

static void check_timeouts(void) {
  uint64_t now = xpd_now_ms();
  for (unsigned i = 0; i < nslots; i++) {
    conn *c = slots[i];
    if (!c)
      continue;
    const char *why = NULL;
    if (c->r.started && (c->r.hlen || c->r.plen) &&
        now - c->r.started > cfg.io_timeout_ms)
      why = "a frame did not arrive in time";
    else if (c->stalled_since && now - c->stalled_since > cfg.io_timeout_ms) {
      /* a client that reads, however slowly, is not stalled: its socket
       * becomes writable only once most of what it holds is read, which
       * at 80 KB/s took longer than a 2 s --io-timeout */
      int q = unread_bytes(c->fd);
      if (q >= 0 && c->stalled_queue >= 0 && q < c->stalled_queue) {
        c->stalled_since = now;
        c->stalled_queue = q;
      } else {
        why = "it does not read its replies";
      }
    }
    else if (!c->waits && !c->pending && !c->r.hlen &&
             c->out_off == c->out.len &&
             now - c->last_active > cfg.idle_timeout_ms)
      why = "idle";
    if (why) {
      if (strcmp(why, "idle"))
        st.io_timeouts++;
      LOG_D("connection %llu closed: %s", (unsigned long long)c->serial,
            why);
      conn_close(c);
    }
  }
  for (unsigned i = 0; i < cfg.workers; i++) {
    worker *w = workers[i];
    if (w && w->job && now > w->deadline) {
      char msg[2048];
      snprintf(msg, sizeof msg, "compiling %s [%s] for %s took longer than "
               "%llu ms: the compiler worker was stopped", w->job->kernel,
               w->job->dtypes, short_target(w->job->target),
               (unsigned long long)w->job->timeout_ms);
      st.worker_timeouts++;
      worker_gone(w, W_TIMED_OUT, msg);
    }
  }
}

/* ---- shutdown ---- */

static uint64_t shutdown_at;

static void stop_listening(void) {
  if (listen_fd < 0)
    return;
  epoll_ctl(ep, EPOLL_CTL_DEL, listen_fd, NULL);
  close(listen_fd);
  listen_fd = -1;
  if (own_socket)
    unlink(cfg.socket);
}

/* Workers with a job now. */
static unsigned compiles_running(void) {
  unsigned n = 0;
  for (unsigned i = 0; i < cfg.workers; i++)
    n += workers[i] && workers[i]->job;
  return n;
}

/* ---- systemd's readiness protocol (sd_notify, without libsystemd) ----
 * NOTIFY_SOCKET names a datagram socket (a path, or "@name" in the
 * abstract namespace) that takes "READY=1" once the daemon listens and
 * serves, and "STOPPING=1" when it begins to stop (Type=notify in
 * xpjitd.service). Read once and removed from the environment, so that
 * workers cannot speak for the daemon. */
static struct sockaddr_un notify_addr;
static socklen_t notify_len;

static void notify_init(void) {
  const char *e = getenv("NOTIFY_SOCKET");
  size_t n = e ? strlen(e) : 0;
  if (n >= 2 && n < sizeof notify_addr.sun_path &&
      (e[0] == '/' || e[0] == '@')) {
    notify_addr.sun_family = AF_UNIX;
    memcpy(notify_addr.sun_path, e, n);
    if (e[0] == '@')
      notify_addr.sun_path[0] = 0;
    notify_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
                             (e[0] == '/'));
  } else if (e && *e) {
    LOG_W("NOTIFY_SOCKET=%.100s is not a socket path or @name: systemd is "
          "not told when the daemon is ready", e);
  }
  unsetenv("NOTIFY_SOCKET");
}

static void notify(const char *state) {
  if (!notify_len)
    return;
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0 ||
      sendto(fd, state, strlen(state), MSG_NOSIGNAL,
             (const struct sockaddr *)&notify_addr, notify_len) < 0)
    LOG_W("NOTIFY_SOCKET: cannot tell systemd '%s': %s", state,
          strerror(errno));
  if (fd >= 0)
    close(fd);
}

static void begin_shutdown(const char *why) {
  if (shutting_down)
    return;
  shutting_down = true;
  notify("STOPPING=1");
  shutdown_at = xpd_now_ms();
  LOG_I("shutting down (%s): %u compiles running, %u queued", why,
        compiles_running(), clients.queued);
  stop_listening();
  /* queued compiles will not start: their clients compile themselves */
  fail_queued(true, XPJ_ERR_DEVICE, "xpjitd is shutting down");
  /* nor will GETs waiting for a parse thread; one that runs finishes (a
   * parse cannot be stopped), and the exit waits for it */
  for (unsigned i = 0; i < nslots; i++)
    for (conn *c = slots[i]; c && !c->dead && c->pending;) {
      uint32_t id = c->pending->id;
      preq_detach(c->pending, true);
      send_error(c, id, XPJ_ERR_DEVICE, false, "xpjitd is shutting down");
    }
}


/* ---- start-up: the socket's directory and path ---- */

static int lock_fd = -1;

static int fail_start(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "xpjitd: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return -1;
}

/* The directory must be ours, a real directory, and not writable by
 * others; a missing last component is created 0700. */
static int check_dir(const char *dir) {
  struct stat sb;
  if (lstat(dir, &sb) != 0) {
    if (errno != ENOENT)
      return fail_start("%s: %s", dir, strerror(errno));
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
      return fail_start("cannot create %s: %s", dir, strerror(errno));
    if (lstat(dir, &sb) != 0)
      return fail_start("%s: %s", dir, strerror(errno));
  }
  /* the fix: someone else may hold this path (/tmp/xpjit-UID made
   * before the user's daemon), which the user cannot take back */
  static const char fix[] = "give --socket a path in a directory of your "
                            "own, or set XDG_RUNTIME_DIR";
  if (S_ISLNK(sb.st_mode))
    return fail_start("refusing %s: it is a symbolic link (never followed); "
                      "%s", dir, fix);
  if (!S_ISDIR(sb.st_mode))
    return fail_start("refusing %s: not a directory; %s", dir, fix);
  if (sb.st_uid != geteuid())
    return fail_start("refusing %s: owned by uid %u, not by this user (%u), "
                      "who could take the socket over; %s", dir,
                      (unsigned)sb.st_uid, (unsigned)geteuid(), fix);
  /* the whole mode: /tmp's 1777 said "777" */
  if (sb.st_mode & (S_IWGRP | S_IWOTH))
    return fail_start("refusing %s: writable by group or others (mode "
                      "%04o); it must be private (chmod 700)",
                      dir, (unsigned)(sb.st_mode & 07777));
  return 0;
}

/* The lock file holds the pid of the daemon that serves, on its first
 * line: written over the one before and then cut, so that a reader finds
 * either pid whole, never an empty file. */
static void write_lock_pid(pid_t pid) {
  char buf[32];
  int n = snprintf(buf, sizeof buf, "%d\n", (int)pid);
  if (pwrite(lock_fd, buf, (size_t)n, 0) != n || ftruncate(lock_fd, n) != 0)
    LOG_W("cannot write the pid to the lock file");
}

/* The pid in the lock file of the daemon that holds the lock; 0 when
 * none comes within a second. The winner of a start writes it once it
 * knows which process serves (when it detaches: after its fork), so a
 * loser of the race may look before it is there (it said "pid ?"). */
static long lock_holder(void) {
  for (int i = 0; i < 100; i++) {
    char buf[32];
    ssize_t n = pread(lock_fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = 0;
    char *end;
    long pid = strtol(buf, &end, 10);
    if (pid > 0 && *end == '\n')
      return pid;
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  return 0;
}

/* The lock file of the socket: beside it, the socket's name with ".lock"
 * added (xpjitd.sock: xpjitd.sock.lock), so that distinct sockets never
 * share one. One lock per directory refused a second daemon on another
 * socket there, saying that one ran on that socket; then ".sock" replaced
 * by ".lock" gave the sockets X and X.sock one lock, X.lock, and the same
 * refusal (both found by an outside probe). */
static void lock_path(char *lp, size_t size) {
  snprintf(lp, size, "%s.lock", cfg.socket);
}

static int take_lock(void) {
  char lp[PATH_MAX];
  lock_path(lp, sizeof lp);
  lock_fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock_fd < 0)
    return fail_start("cannot open %s: %s", lp, strerror(errno));
  struct stat sb;
  if (fstat(lock_fd, &sb) != 0 || sb.st_uid != geteuid() ||
      !S_ISREG(sb.st_mode))
    return fail_start("refusing %s: not a regular file of this user", lp);
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    long pid = lock_holder();
    if (pid)
      fprintf(stderr, "xpjitd: another xpjitd (pid %ld) is running on %s\n",
              pid, cfg.socket);
    else
      fprintf(stderr, "xpjitd: another xpjitd is already running on %s (it "
              "has not written its pid to %s)\n", cfg.socket, lp);
    return -2;
  }
  /* won: the pid of the process that will serve, as soon as it is known
   * (a detaching daemon's parent writes its child's); until then none,
   * never a predecessor's */
  if (cfg.foreground)
    write_lock_pid(getpid());
  else if (ftruncate(lock_fd, 0) != 0)
    LOG_W("cannot empty the lock file");
  return 0;
}

static int open_socket(void) {
  char dir[sizeof cfg.socket];
  snprintf(dir, sizeof dir, "%s", cfg.socket);
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir)
    return fail_start("socket path %s: give an absolute path in a private "
                      "directory", cfg.socket);
  *slash = 0;
  /* /tmp/xpjit-UID: the fallback, created private */
  if (check_dir(dir))
    return -1;
  int r = take_lock();
  if (r)
    return r;
  struct stat sb;
  if (lstat(cfg.socket, &sb) == 0) {
    if (!S_ISSOCK(sb.st_mode))
      return fail_start("refusing %s: it exists and is not a socket",
                        cfg.socket);
    if (sb.st_uid != geteuid())
      return fail_start("refusing %s: owned by uid %u", cfg.socket,
                        (unsigned)sb.st_uid);
    /* we hold the lock, so no xpjitd serves it; still, never replace a
     * live socket */
    int t = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strcpy(a.sun_path, cfg.socket);
    bool live = t >= 0 && connect(t, (struct sockaddr *)&a, sizeof a) == 0;
    if (t >= 0)
      close(t);
    if (live) {
      fprintf(stderr, "xpjitd: %s is served by another process\n",
              cfg.socket);
      return -2;
    }
    unlink(cfg.socket);
    fprintf(stderr, "xpjitd: replaced the stale socket %s\n", cfg.socket);
  }
  listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd < 0)
    return fail_start("socket: %s", strerror(errno));
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  strcpy(a.sun_path, cfg.socket);
  mode_t old = umask(0177);
  int b = bind(listen_fd, (struct sockaddr *)&a, sizeof a);
  umask(old);
  if (b != 0)
    return fail_start("cannot bind %s: %s", cfg.socket, strerror(errno));
  own_socket = true;
  if (listen(listen_fd, 1024) != 0)
    return fail_start("listen: %s", strerror(errno));
  return 0;
}

/* systemd socket activation: LISTEN_PID/LISTEN_FDS, the socket as fd 3 */
static int activated_socket(void) {
  const char *lp = getenv("LISTEN_PID"), *lf = getenv("LISTEN_FDS");
  if (!lp || !lf || atoi(lp) != (int)getpid() || atoi(lf) < 1)
    return 0;
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  unsetenv("LISTEN_FDNAMES");
  int fd = 3;
  struct sockaddr_un a;
  socklen_t al = sizeof a;
  int type = 0;
  socklen_t tl = sizeof type;
  if (getsockname(fd, (struct sockaddr *)&a, &al) != 0 ||
      a.sun_family != AF_UNIX ||
      getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 ||
      type != SOCK_STREAM)
    return fail_start("LISTEN_FDS: fd 3 is not a listening Unix stream "
                      "socket");
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  if (al > offsetof(struct sockaddr_un, sun_path) && a.sun_path[0])
    snprintf(cfg.socket, sizeof cfg.socket, "%s", a.sun_path);
  listen_fd = fd;
  /* the same single-daemon rule as for a socket we bind */
  char dir[sizeof cfg.socket];
  snprintf(dir, sizeof dir, "%s", cfg.socket);
  char *slash = strrchr(dir, '/');
  if (slash && slash != dir) {
    *slash = 0;
    if (check_dir(dir))
      return -1;
    int r = take_lock();
    if (r)
      return r;
  }
  return 1;
}

/* ---- main ---- */

/* A detached daemon's pipe to the process that started it: written
 * once it serves (-1: none, or said). */
static int ready_fd = -1;

/* The daemon is about to serve: a detached one's standard error (where
 * the starting process's was, without --log) goes to /dev/null. */
static void detach_stderr(void) {
  if (ready_fd >= 0 && logf_ == stderr)
    dup2(1, 2); /* /dev/null since the daemon detached */
}

/* The daemon serves (its log says so): a detached one tells the process
 * that started it. */
static void ready(void) {
  if (ready_fd < 0)
    return;
  if (write(ready_fd, "1", 1) != 1)
    LOG_W("cannot tell the starting process that the daemon serves");
  close(ready_fd);
  ready_fd = -1;
}

/* A start that failed once the socket was made: the socket goes with it
 * (it was left behind, stale). Exit status 1. */
static int start_failed(void) {
  if (own_socket && listen_fd >= 0) {
    close(listen_fd);
    listen_fd = -1;
    unlink(cfg.socket);
  }
  own_socket = false;
  return 1;
}

static void usage(FILE *f) {
  fprintf(f,
      "usage: xpjitd [options]\n"
      "  --foreground          stay attached; log to stderr (default: detach)\n"
      "  --socket PATH         listen here (default: $XDG_RUNTIME_DIR/xpjit/"
      "xpjitd.sock,\n"
      "                        or /tmp/xpjit-UID/xpjitd.sock)\n"
      "  --log FILE            log to FILE (appended)\n"
      "  --log-level LEVEL     error, warn, info (default) or debug\n"
      "  --workers N           compile workers (default: online CPUs)\n"
      "  --parse-threads N     threads that parse and key requests (default "
      "2)\n"
      "  --compile-timeout MS  limit of one compile (default 120000)\n"
      "  --io-timeout MS       a frame must arrive, a reply be read, in this "
      "long\n"
      "                        (default 10000)\n"
      "  --idle-timeout MS     close connections idle this long (default "
      "600000)\n"
      "  --idle-exit S         exit after S seconds without connections or "
      "work\n"
      "  --grace MS            on SIGTERM, time left to running compiles "
      "(default 10000)\n"
      "  --max-connections N   (default 4096)\n"
      "  --memory-limit BYTES  binaries kept in memory (default 256M)\n"
      "  --client-memory BYTES what clients may make it hold, in all "
      "(default 1G;\n"
      "                        one process: an eighth, 32M at least)\n"
      "  --client-compiles N   compiles one process may have running "
      "(default:\n"
      "                        the workers but one, at least 1)\n"
      "  --failure-ttl S       remember a compile that timed out or ran "
      "out of\n"
      "                        memory this long (default 600; 0: never)\n"
      "  --redis URL           the cluster's Redis tier, asked before a "
      "compile\n"
      "                        (redis://[user:pass@]host[:port][/db] or "
      "unix:PATH;\n"
      "                        default: XPJIT_REDIS; docs/cluster.md)\n"
      "  --version, --help\n"
      "Environment: XPJIT_CACHE, XPJIT_CACHE_DIR, XPJIT_CACHE_MAX_SIZE as "
      "for libxpjit.\n");
}

static bool in_range(uint64_t v, uint64_t lo, uint64_t hi) {
  return v >= lo && v <= hi;
}

static bool num_arg(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-')
    return false;
  *out = v;
  return true;
}

static void log_warning(void *ud, const char *msg) {
  (void)ud;
  LOG_W("%s", msg);
}

/* The signals the loop reads (signalfd): those that stop the daemon
 * cleanly, and those whose default action would end it (with its socket
 * left behind) but that it has no use for. */
static const struct {
  int sig;
  const char *name;
  bool stops;
} read_signals[] = {
    {SIGTERM, "SIGTERM", true},     {SIGINT, "SIGINT", true},
    {SIGHUP, "SIGHUP", true},       {SIGQUIT, "SIGQUIT", true},
    {SIGUSR1, "SIGUSR1", false},    {SIGUSR2, "SIGUSR2", false},
    {SIGALRM, "SIGALRM", false},    {SIGVTALRM, "SIGVTALRM", false},
    {SIGPROF, "SIGPROF", false},    {SIGIO, "SIGIO", false},
#ifdef SIGPWR
    {SIGPWR, "SIGPWR", false},
#endif
};

static void signal_read(int sig, uint32_t from) {
  for (size_t i = 0; i < sizeof read_signals / sizeof *read_signals; i++)
    if (read_signals[i].sig == sig) {
      if (read_signals[i].stops) {
        begin_shutdown(read_signals[i].name);
      } else {
        static log_limit ignored_log;
        say_limited(&ignored_log, 1, "%s (from pid %u): xpjitd has no use "
                    "for it; ignored", read_signals[i].name, (unsigned)from);
      }
      return;
    }
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--worker"))
    return xpjitd_worker_main();
  setenv("XPJIT_DAEMON", "off", 1); /* never ask ourselves */
  /* each request says which checks it wants; the daemon's own
   * environment must not add any (its workers inherit this) */
  unsetenv("XPJIT_CHECK");
  xpj_versions_str(versions, sizeof versions);
  xpj_compile_limits(NULL, NULL, &worker_memory_mb);
  logf_ = stderr;
  uint64_t v;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  cfg.workers = ncpu > 0 ? (unsigned)ncpu : 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VAL()                                                         \
  do {                                                                     \
    if (!val) {                                                            \
      fprintf(stderr, "xpjitd: %s needs a value\n", a);                    \
      return 2;                                                            \
    }                                                                      \
    i++;                                                                   \
  } while (0)
#define NUM(field, lo, hi)                                                 \
  do {                                                                     \
    NEED_VAL();                                                            \
    if (!num_arg(val, &v) || !in_range(v, lo, hi)) {                       \
      fprintf(stderr, "xpjitd: %s: bad value '%s'\n", a, val);             \
      return 2;                                                            \
    }                                                                      \
    field = v;                                                             \
  } while (0)
    if (!strcmp(a, "--foreground") || !strcmp(a, "-f")) {
      cfg.foreground = true;
    } else if (!strcmp(a, "--socket")) {
      NEED_VAL();
      if (!*val) {
        fprintf(stderr, "xpjitd: --socket needs a path\n");
        return 2;
      }
      if (strlen(val) >= sizeof cfg.socket) {
        fprintf(stderr, "xpjitd: socket path too long\n");
        return 2;
      }
      snprintf(cfg.socket, sizeof cfg.socket, "%s", val);
    } else if (!strcmp(a, "--log")) {
      NEED_VAL();
      cfg.log_path = val;
    } else if (!strcmp(a, "--log-level")) {
      NEED_VAL();
      int l = -1;
      for (int k = 0; k < 4; k++)
        if (!strcmp(val, level_names[k]))
          l = k;
      if (l < 0) {
        fprintf(stderr, "xpjitd: --log-level: error, warn, info or debug\n");
        return 2;
      }
      cfg.log_level = l;
    } else if (!strcmp(a, "--workers")) {
      NUM(cfg.workers, 1, 256);
    } else if (!strcmp(a, "--parse-threads")) {
      NUM(cfg.parse_threads, 1, 64);
    } else if (!strcmp(a, "--compile-timeout")) {
      NUM(cfg.compile_timeout_ms, 100, 3600000);
    } else if (!strcmp(a, "--io-timeout")) {
      NUM(cfg.io_timeout_ms, 10, 3600000);
    } else if (!strcmp(a, "--idle-timeout")) {
      NUM(cfg.idle_timeout_ms, 10, 86400000);
    } else if (!strcmp(a, "--idle-exit")) {
      NUM(cfg.idle_exit_ms, 1, 86400);
      cfg.idle_exit_ms *= 1000;
    } else if (!strcmp(a, "--grace")) {
      NUM(cfg.grace_ms, 0, 3600000);
    } else if (!strcmp(a, "--max-connections")) {
      NUM(cfg.max_conns, 1, 1000000);
    } else if (!strcmp(a, "--memory-limit")) {
      NEED_VAL();
      if (xpj_cache_parse_size(val, &cfg.mem_limit) != XPJ_OK) {
        fprintf(stderr, "xpjitd: --memory-limit: bad size '%s'\n", val);
        return 2;
      }
    } else if (!strcmp(a, "--client-memory")) {
      NEED_VAL();
      if (xpj_cache_parse_size(val, &cfg.client_memory) != XPJ_OK ||
          cfg.client_memory < SHARE_MIN) {
        fprintf(stderr, "xpjitd: --client-memory: bad size '%s' (32M at "
                "least)\n", val);
        return 2;
      }
    } else if (!strcmp(a, "--client-compiles")) {
      NUM(cfg.client_compiles, 1, 256);
    } else if (!strcmp(a, "--redis")) {
      NEED_VAL();
      cfg.redis = val;
    } else if (!strcmp(a, "--failure-ttl")) {
      NUM(cfg.failure_ttl_ms, 0, 86400);
      cfg.failure_ttl_ms *= 1000;
    } else if (!strcmp(a, "--version")) {
      xpj_versions_str(versions, sizeof versions);
      printf("xpjitd %s (protocol %d)\n", versions, XPD_VERSION);
      return 0;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "xpjitd: unknown option '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  ssize_t sl = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
  if (sl <= 0) {
    fprintf(stderr, "xpjitd: cannot find its own executable\n");
    return 1;
  }
  self_exe[sl] = 0;
  /* the Redis tier: its workers read it from their environment; a bad
   * URL stops the start (the password is never printed) */
  const char *url = cfg.redis ? cfg.redis : getenv("XPJIT_REDIS");
  if (url && *url && strcmp(url, "off") != 0) {
    rt_redis *r = NULL;
    if (rt_redis_open(url, &r) != XPJ_OK) {
      fprintf(stderr, "xpjitd: %s: %s\n",
              cfg.redis ? "--redis" : "XPJIT_REDIS", xpj_last_error());
      return 2;
    }
    snprintf(cfg.redis_shown, sizeof cfg.redis_shown, "%s",
             rt_redis_shown(r));
    rt_redis_close(r);
    setenv("XPJIT_REDIS", url, 1);
    /* the workers read the secret after the daemon left its directory */
    const char *sf = getenv("XPJIT_REDIS_SECRET_FILE");
    char abs[PATH_MAX];
    if (sf && *sf && sf[0] != '/' && realpath(sf, abs))
      setenv("XPJIT_REDIS_SECRET_FILE", abs, 1);
    if (cfg.redis && strchr(cfg.redis, '@'))
      fprintf(stderr, "xpjitd: warning: --redis: a password on the command "
              "line can be read by every user of this machine (ps); give "
              "the URL in XPJIT_REDIS instead\n");
  } else {
    setenv("XPJIT_REDIS", "off", 1);
  }
  if (!cfg.client_compiles)
    cfg.client_compiles = cfg.workers > 1 ? cfg.workers - 1 : 1;

  /* SIGTERM, SIGINT, SIGHUP and SIGQUIT (a clean stop) and the signals
   * whose default action ends a process but that mean nothing to the
   * daemon (logged, ignored: SIGUSR1 or SIGALRM killed it and left its
   * socket behind) are read from a signalfd by the loop; blocked before
   * the socket is made, a signal that comes while it starts waits for
   * the loop, where it killed a daemon whose socket was there already
   * (found by an outside probe: 19 of 40 signals right after the socket
   * appeared left it behind) */
  sigset_t ss;
  sigemptyset(&ss);
  for (size_t i = 0; i < sizeof read_signals / sizeof *read_signals; i++)
    sigaddset(&ss, read_signals[i].sig);
  sigprocmask(SIG_BLOCK, &ss, NULL);
  int act = activated_socket();
  if (act < 0)
    return act == -2 ? 3 : 1;
  if (!act) {
    if (!cfg.socket[0] && !xpd_default_path(cfg.socket, sizeof cfg.socket)) {
      fprintf(stderr, "xpjitd: the default socket path is too long\n");
      return 1;
    }
    if (cfg.socket[0] != '/') {
      fprintf(stderr, "xpjitd: --socket %s: give an absolute path\n",
              cfg.socket);
      return 2;
    }
    /* a missing socket directory ($XDG_RUNTIME_DIR/xpjit, /tmp/xpjit-UID)
     * is created 0700 by open_socket */
    int r = open_socket();
    if (r)
      return r == -2 ? 3 : 1;
  }

  /* the LLVM plugin, found from here (a relative XPJIT_LLVM_PLUGIN: from
   * this directory, which the daemon leaves), and looked for again there
   * if it is not there yet */
  const char *pe = getenv("XPJIT_LLVM_PLUGIN");
  char pabs[PATH_MAX];
  if (pe && *pe && pe[0] != '/' && realpath(pe, pabs))
    setenv("XPJIT_LLVM_PLUGIN", pabs, 1);
  plugin_open();

  /* the log, opened here, before the daemon detaches and leaves its
   * directory: a relative --log is from where it was started (it was
   * opened in / after the chdir), and a log it cannot open is the exit
   * status of the start (it was told by a detached daemon nobody heard,
   * after its parent had said it served) */
  if (cfg.log_path) {
    /* 0600 whatever the umask, never through a link someone planted,
     * and only a file of this user's that nobody else may write, as the
     * library's XPJIT_LOG_FILE (xpj_log_file_fit): a FIFO someone else
     * held open and filled wedged the daemon in its first log line while
     * its socket stayed up. O_NONBLOCK: a FIFO nobody reads is refused,
     * not a daemon blocked in open() before it serves */
    int lfd = open(cfg.log_path,
                   O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC |
                       O_NONBLOCK,
                   0600);
    char why[900];
    if (!xpj_log_file_fit(lfd, cfg.log_path, "--log", why, sizeof why)) {
      if (lfd >= 0)
        close(lfd);
      fprintf(stderr, "xpjitd: --log %s\n", why);
      return start_failed();
    }
    fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) & ~O_NONBLOCK);
    FILE *f = fdopen(lfd, "a");
    if (!f) {
      fprintf(stderr, "xpjitd: cannot open log %s: %s\n", cfg.log_path,
              strerror(errno));
      close(lfd);
      return start_failed();
    }
    logf_ = f;
  }

  /* detach, once the socket is there: `xpjitd && app` finds it. The
   * parent waits for the daemon's word that it serves (ready_fd), and
   * exits with its status when it stops before that: a start that
   * failed said "serving" and exit 0 */
  if (!cfg.foreground) {
    int rp[2];
    if (pipe2(rp, O_CLOEXEC) != 0) {
      fprintf(stderr, "xpjitd: pipe: %s\n", strerror(errno));
      return start_failed();
    }
    pid_t pid = fork();
    if (pid < 0) {
      fprintf(stderr, "xpjitd: fork: %s\n", strerror(errno));
      return start_failed();
    }
    if (pid > 0) {
      own_socket = false; /* the daemon's now */
      write_lock_pid(pid); /* the lock file names the one that serves */
      close(rp[1]);
      char c;
      ssize_t n;
      while ((n = read(rp[0], &c, 1)) < 0 && errno == EINTR)
        ;
      if (n != 1) {
        int ws = 0;
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
          ;
        int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 1;
        fprintf(stderr, "xpjitd: the daemon (pid %d) stopped before it "
                "served: %s %d\n", (int)pid,
                WIFEXITED(ws) ? "exit status" : "signal",
                WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
        return code ? code : 1;
      }
      /* a signal that came while it started is pending here, blocked,
       * and not the child's: passed on, it stops the daemon cleanly */
      sigset_t pend;
      if (sigpending(&pend) == 0)
        for (int i = 0; i < 3; i++) {
          int sig = i == 0 ? SIGTERM : i == 1 ? SIGINT : SIGHUP;
          if (sigismember(&pend, sig))
            kill(pid, sig);
        }
      printf("xpjitd: serving %s (pid %d)\n", cfg.socket, (int)pid);
      return 0;
    }
    close(rp[0]);
    ready_fd = rp[1];
    setsid();
    if (chdir("/") != 0)
      return start_failed();
    int dn = open("/dev/null", O_RDWR);
    if (dn >= 0) {
      dup2(dn, 0);
      dup2(dn, 1);
      if (dn > 2)
        close(dn);
    }
    /* the workers' messages to the log too; without one, what goes wrong
     * before the daemon serves is said where it was started (ready) */
    if (logf_ != stderr)
      dup2(fileno(logf_), 2);
  }

  /* descriptors for many clients */
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    /* room for the listener, workers, the cache, logs and the reserve */
    uint64_t room = rl.rlim_cur > 2 * cfg.workers + 64
                        ? rl.rlim_cur - 2 * cfg.workers - 64
                        : 1;
    if (cfg.max_conns > room) {
      LOG_W("--max-connections %u lowered to %llu (the descriptor limit "
            "is %llu)", cfg.max_conns, (unsigned long long)room,
            (unsigned long long)rl.rlim_cur);
      cfg.max_conns = (unsigned)room;
    }
  }
  reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  notify_init();
  signal(SIGPIPE, SIG_IGN);
  signal(SIGXFSZ, SIG_IGN); /* a cache write past ulimit -f fails, no more */
  int sfd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);

  xpj_set_warning_handler(log_warning, NULL); /* the cache's, into the log */
  xpj_context_desc desc = {0};
  desc.cpu_threads = 1;
  desc.no_env_bundles = 1;
  desc.visible = "cpu"; /* it compiles; it opens no GPU driver */
  desc.redis = "off"; /* its workers ask Redis, never the event loop */
  if (xpj_context_create(&desc, &ctx) != XPJ_OK) {
    LOG_E("cannot create a context: %s", xpj_last_error());
    return start_failed();
  }
  l2 = xpj_context_cache(ctx);
  cache_identify();
  if (plugin_fd < 0)
    LOG_E("%s: compiles fail (their clients compile themselves) until "
          "there is one", plugin_why);
  nslots = cfg.max_conns;
  slots = calloc(nslots, sizeof *slots);
  workers = calloc(cfg.workers, sizeof *workers);
  ep = epoll_create1(EPOLL_CLOEXEC);
  if (!slots || !workers || ep < 0 || sfd < 0) {
    LOG_E("cannot set up: %s", strerror(errno));
    return start_failed();
  }
  pool = xpjitd_pool_start(cfg.parse_threads, key_work);
  if (!pool) {
    LOG_E("cannot start the parse threads: %s", strerror(errno));
    return start_failed();
  }
  static item sig_item = {K_SIGNAL}, pool_item = {K_POOL};
  ep_add(sfd, &sig_item, EPOLLIN);
  ep_add(xpjitd_pool_fd(pool), &pool_item, EPOLLIN);
  ep_add(listen_fd, &listen_item, EPOLLIN);
  st.started_ms = xpd_now_ms();
  char problem[1024] = "";
  bool cache_on = l2 && xpj_cache_mode_of(l2) != XPJ_CACHE_MODE_OFF;
  if (!cache_on && l2 && xpj_cache_problem(l2, problem + 2,
                                            sizeof problem - 3)) {
    problem[0] = ':';
    problem[1] = ' ';
  }
  detach_stderr();
  LOG_I("serving %s (%s), %u workers (%u per client), %u parse threads, "
        "cache %s%s",
        cfg.socket, versions, cfg.workers, cfg.client_compiles,
        cfg.parse_threads,
        cache_on ? xpj_cache_path(l2) : "off", problem);
  notify("READY=1\nSTATUS=serving");
  ready();

  uint64_t last_check = 0, idle_since = xpd_now_ms(), flush_since = 0;
  int exit_code = 0;
  struct epoll_event evs[64];
  for (;;) {
    /* (at most 100 ms: the checks below; sooner when a held PENDING is
     * due) */
    int n = epoll_wait(ep, evs, 64, owing ? owed_due(xpd_now_ms(), 100)
                                          : 100);
    for (int i = 0; i < n; i++) {
      item *it = evs[i].data.ptr;
      switch (it->kind) {
      case K_LISTEN:
        if (listen_fd >= 0)
          accept_all();
        break;
      case K_SIGNAL: {
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof si) == sizeof si)
          signal_read((int)si.ssi_signo, si.ssi_pid);
        break;
      }
      case K_CONN:
        conn_event((conn *)it, evs[i].events);
        break;
      case K_WORKER:
        worker_event((worker *)it, evs[i].events);
        break;
      case K_POOL:
        pool_event();
        break;
      }
    }
    uint64_t now = xpd_now_ms();
    if (owing)
      owed_due(now, 100);
    free_dead(); /* nothing of this batch points at them any more */
    if (now - last_check >= 100) {
      last_check = now;
      check_timeouts();
      dispatch();
      give_back_memory();
    }
    close_answered();
    if (nconns || compiles_running() || clients.queued || pool_out)
      idle_since = now;
    else if (cfg.idle_exit_ms && now - idle_since > cfg.idle_exit_ms)
      begin_shutdown("idle");
    if (shutting_down) {
      bool late = now - shutdown_at > cfg.grace_ms;
      if (late && compiles_running()) {
        LOG_W("grace period over: stopping the running compiles");
        for (unsigned i = 0; i < cfg.workers; i++)
          if (workers[i] && workers[i]->job) {
            fail_waiters(workers[i]->job->e, true, XPJ_ERR_DEVICE,
                         "xpjitd is shutting down");
            worker_gone(workers[i], W_STOPPED, "xpjitd is shutting down");
          }
      }
      if (!compiles_running() && !pool_out) {
        /* replies out, then go: readers get a second from when the last
         * compile ended (not from the end of the grace period: a client
         * that reads nothing held a daemon with nothing to do for all
         * of it) */
        if (!flush_since)
          flush_since = now;
        bool pending_out = false;
        for (unsigned i = 0; i < nslots; i++)
          if (slots[i] && slots[i]->out_off < slots[i]->out.len)
            pending_out = true;
        if (!pending_out || now - flush_since > 1000)
          break;
      }
    }
  }
  LOG_I("stopped: %llu requests, %llu compiles, %llu served from memory, "
        "%llu from the cache file",
        (unsigned long long)st.requests, (unsigned long long)st.compiles,
        (unsigned long long)st.hits_memory,
        (unsigned long long)st.hits_cache);
  for (unsigned i = 0; i < cfg.workers; i++)
    if (workers[i])
      worker_gone(workers[i], W_STOPPED, NULL);
  for (xpjitd_task *t = xpjitd_pool_stop(pool), *n; t; t = n) {
    n = t->next; /* none runs now: every one was answered or detached */
    pool_out--;
    key_done((preq *)t);
  }
  for (unsigned i = 0; i < nslots; i++)
    if (slots[i])
      conn_close(slots[i]);
  free_dead();
  stop_listening();
  xpjitd_progs_free(&progs);
  for (unsigned i = 0; i < SRC_SLOTS; i++)
    free(srcs[i].bytes);
  for (unsigned i = 0; i < NBUCKETS; i++) {
    while (table[i])
      remove_entry(table[i]);
    for (memo *m = memos[i], *nx; m; m = nx) {
      nx = m->next;
      free(m);
    }
  }
  xpj_context_destroy(ctx);
  free(slots);
  free(workers);
  close(ep);
  close(sfd);
  if (reserve_fd >= 0)
    close(reserve_fd);
  if (lock_fd >= 0)
    close(lock_fd);
  if (logf_ && logf_ != stderr)
    fclose(logf_);
  return exit_code;
}
