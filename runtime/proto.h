/* proto.h - the xpjitd wire protocol (docs/protocol.md): frames, fields,
 * and the decoder every peer uses (libxpjit's client, the daemon, its
 * compile workers, xpjit-cli). Internal to the project; no LLVM, no
 * sockets: bytes in, bytes out.
 *
 * A frame is a 16-byte header (magic "XPJD", protocol version, operation,
 * flags, request id, payload length; integers little-endian) and a payload
 * of fields (tag u16, length u32, value). Every length is checked against
 * a limit before anything is allocated. */
#ifndef XPJIT_PROTO_H
#define XPJIT_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xpjit_cache.h"

#define XPD_MAGIC "XPJD"
#define XPD_VERSION 4
#define XPD_HEADER 16
/* Limits: a request's payload (source included), a reply's payload (the
 * binary included), the source, a string field, the fields of a frame. */
#define XPD_MAX_REQUEST (16u << 20)
#define XPD_MAX_REPLY (256u << 20)
#define XPD_MAX_SOURCE (8u << 20)
/* A request's TIMEOUT, ms (an hour): more is malformed. */
#define XPD_MAX_TIMEOUT_MS 3600000u
#define XPD_MAX_STRING 4096u
#define XPD_MAX_FIELDS 64u

/* Capabilities a daemon announces in its greeting. */
#define XPD_CAP_GET 1u
#define XPD_CAP_STATS 2u
#define XPD_CAP_SHUTDOWN 4u
#define XPD_CAP_REDIS 8u /* it asks a Redis tier before compiling */
#define XPD_CAP_LOOKUP 16u /* it answers LOOKUP */

typedef enum xpd_op {
  XPD_HELLO = 1,     /* client: version, versions string, pid */
  XPD_WELCOME = 2,   /* daemon: version, caps, versions, pid, cache path */
  XPD_GET = 3,       /* client: source and what to compile */
  XPD_KERNEL = 4,    /* daemon: the compiled kernel or its failure */
  XPD_STATS = 5,     /* client: empty */
  XPD_STATS_REPLY = 6,
  XPD_PING = 7,
  XPD_PONG = 8,
  XPD_SHUTDOWN = 9,
  XPD_OK = 10,
  XPD_ERROR = 11,    /* status and message; sent once, then closed when
                        the frame was malformed */
  XPD_PENDING = 12,  /* daemon: a first look (XPD_F_FIRST) found no row in
                        the cache file and waits for a compile; its KERNEL
                        or ERROR follows with the same id */
  XPD_LOOKUP = 13,   /* client: a kernel by its cache key's digest, from
                        the daemon's memory; an ERROR XPJ_ERR_NOT_FOUND
                        (connection kept) asks for the GET */
  XPD_JOB = 20,      /* daemon to worker: a GET with the expected digest */
  XPD_RESULT = 21,   /* worker to daemon: a KERNEL */
  XPD_CJOB = 22,     /* caller to a compile server's worker: a module,
                        kernel, target and options (compiler/cserver.c) */
  XPD_CRESULT = 23,  /* the worker's reply: status, output, log, sizes */
  XPD_OP_MAX = 23
} xpd_op;

typedef enum xpd_tag {
  XPD_F_PROTO = 1,      /* u64: protocol version */
  XPD_F_CAPS = 2,       /* u64: XPD_CAP_* */
  XPD_F_VERSIONS = 3,   /* str: xpj_versions_str() */
  XPD_F_PID = 4,        /* u64 */
  XPD_F_CACHE_PATH = 5, /* str: the daemon's cache file ("" when off) */
  XPD_F_CACHE_DEV = 6,  /* u64: st_dev of that file (absent: unknown) */
  XPD_F_CACHE_INO = 7,  /* u64: its st_ino (with CACHE_DEV) */
  XPD_F_SOURCE = 10,    /* bytes: kernel source text */
  XPD_F_FILENAME = 11,  /* str: name for diagnostics */
  XPD_F_KERNEL = 12,    /* str */
  XPD_F_DTYPES = 13,    /* str: canonical "T=f32,U=i64" */
  XPD_F_NDIM = 14,      /* u64 */
  XPD_F_TARGET = 15,    /* str: canonical target ("ptx:sm_90:ptx78") */
  XPD_F_OPT_LEVEL = 16, /* u64 0..3 */
  XPD_F_FAST_MATH = 17, /* u64 0/1 */
  XPD_F_DEBUG = 18,     /* u64 0/1 */
  XPD_F_TIMEOUT = 19,   /* u64: ms, 0: the daemon's default */
  XPD_F_DIGEST = 20,    /* str: 64 hex chars, the cache key's digest */
  XPD_F_CHECKS = 21,    /* u64: XPJ_CHECK_* bits (absent: 0) */
  XPD_F_CONTRACT = 22,  /* u64 0/1: fp_contract (absent: 0) */
  XPD_F_STATUS = 30,    /* u64: xpj_status (as its absolute value) */
  XPD_F_FAILED = 31,    /* u64 0/1: a failed compile (log says why) */
  XPD_F_TRANSIENT = 32, /* u64 0/1: a failure not to be cached */
  XPD_F_BINARY = 33,    /* bytes */
  XPD_F_ENTRY = 34,     /* str */
  XPD_F_LOG = 35,       /* bytes: compiler log or error message */
  XPD_F_LOCAL = 36,     /* u64: local memory bytes */
  XPD_F_SCRATCH = 37,   /* u64: scratch bytes */
  XPD_F_COMPILE_US = 38,/* u64: compile time, microseconds */
  XPD_F_ORIGIN = 39,    /* u64: XPD_FROM_* */
  XPD_F_TEXT = 40,      /* bytes: statistics, "name value" lines */
  XPD_F_MESSAGE = 41,   /* str: ERROR's message */
  XPD_F_EXPIRES = 42,   /* u64: ms until a remembered failure is
                           forgotten (0 or absent: a lasting answer) */
  XPD_F_COUNTERS = 43,  /* str: RESULT: what the worker's tiers counted,
                           "name=value,..." (xpj_cache_counters names) */
  XPD_F_MODULE = 44,    /* bytes: CJOB: the module, transfer-encoded
                           (ir/transfer.h) */
  XPD_F_EMIT = 45,      /* u64: CJOB: xpj_emit_kind */
  XPD_F_FAULT = 46,     /* str: CJOB: XPJIT_FAULT_INJECT (a test hook) */
  XPD_F_MEMORY = 47,    /* u64: CJOB: the worker's memory limit, bytes */
  XPD_F_LIBDEVICE = 48, /* str: CJOB: libdevice's path as the caller found
                           it ("": none) */
  XPD_F_FIRST = 49,     /* u64 0/1: GET: a first look, before the client
                           opens its cache file (docs/protocol.md) */
  XPD_F_FIRST_WAIT = 50,/* u64: a first look's GET or LOOKUP: the ms its
                           client waits for PENDING or the answer (absent
                           or 0: PENDING at once) */
  XPD_TAG_MAX = 50
} xpd_tag;

/* Where the daemon found a kernel. */
enum { XPD_FROM_COMPILED = 0, XPD_FROM_MEMORY = 1, XPD_FROM_CACHE = 2,
       XPD_FROM_WAITED = 3, XPD_FROM_REDIS = 4 };

/* Decoding results. */
typedef enum xpd_err {
  XPD_E_OK = 0,
  XPD_E_SHORT = 1,    /* more bytes needed (not an error while reading) */
  XPD_E_MAGIC = 2,
  XPD_E_VERSION = 3,
  XPD_E_OP = 4,
  XPD_E_FLAGS = 5,
  XPD_E_TOO_BIG = 6,
  XPD_E_FIELD = 7,    /* a field runs past the payload or has a bad size */
  XPD_E_DUP = 8,      /* a tag twice */
  XPD_E_MANY = 9,     /* more than XPD_MAX_FIELDS */
  XPD_E_MISSING = 10, /* a required field is absent */
  XPD_E_VALUE = 11,   /* a value out of range (string too long, NUL) */
} xpd_err;
const char *xpd_err_str(xpd_err e);

typedef struct xpd_header {
  uint8_t version, op;
  uint16_t flags;
  uint32_t id;
  uint32_t len;
} xpd_header;

/* Decodes the 16 header bytes; checks magic, version, op, flags and the
 * length against max_payload (XPD_MAX_REQUEST or XPD_MAX_REPLY). */
xpd_err xpd_header_decode(const uint8_t *p, size_t n, uint32_t max_payload,
                          xpd_header *h);

/* A decoded payload: pointers into the caller's buffer. */
typedef struct xpd_field {
  uint16_t tag;
  uint32_t len;
  const uint8_t *val;
} xpd_field;
typedef struct xpd_msg {
  unsigned n;
  xpd_field f[XPD_MAX_FIELDS];
} xpd_msg;

xpd_err xpd_payload_decode(const uint8_t *p, size_t n, xpd_msg *m);
/* The field with tag, or NULL. */
const xpd_field *xpd_find(const xpd_msg *m, uint16_t tag);
/* Typed getters: XPD_E_MISSING when absent (and !optional), XPD_E_FIELD
 * for a wrong size, XPD_E_VALUE for a string with a NUL or longer than
 * max. Strings are copied NUL-terminated into buf (size > max). */
xpd_err xpd_get_u64(const xpd_msg *m, uint16_t tag, bool optional,
                    uint64_t *out);
xpd_err xpd_get_str(const xpd_msg *m, uint16_t tag, bool optional,
                    char *buf, size_t size);
xpd_err xpd_get_bytes(const xpd_msg *m, uint16_t tag, bool optional,
                      size_t max, const uint8_t **p, size_t *n);

/* A GET or JOB, decoded and range-checked. Strings point into buffers
 * of the struct; source into the frame. */
typedef struct xpd_get {
  const uint8_t *source;
  size_t source_len;
  char filename[256];
  char kernel[256];
  char dtypes[256];
  uint64_t ndim;
  char target[1200];
  uint64_t opt_level, fast_math, debug, timeout_ms, checks, contract;
  uint64_t first;  /* GET: a first look (XPD_F_FIRST); JOB: 0 */
  uint64_t first_wait_ms; /* with first: XPD_F_FIRST_WAIT (0: absent) */
  char digest[65]; /* JOB: required; GET: optional ("" when absent) */
} xpd_get;
xpd_err xpd_get_decode(const xpd_msg *m, bool job, xpd_get *g);

/* A LOOKUP, decoded and range-checked: the kernel whose cache key has
 * this digest, with the GET's TIMEOUT and FIRST. */
typedef struct xpd_lookup {
  char digest[65];
  uint64_t timeout_ms, first;
  uint64_t first_wait_ms; /* with first: XPD_F_FIRST_WAIT (0: absent) */
} xpd_lookup;
xpd_err xpd_lookup_decode(const xpd_msg *m, xpd_lookup *l);

/* A KERNEL or RESULT: the compiled-kernel record every tier uses
 * (xpj_cache_value: v.failed 0 or 1, compile time in ms; COMPILE_US on
 * the wire), with what the daemon adds. ENTRY and LOG travel with their
 * terminating NUL: decoded, v's pointers point into the payload (v.entry
 * and v.log "" when absent). v.expires_ms is not used on the wire: a
 * remembered failure says how long it stays (expires_ms). */
typedef struct xpd_kernel {
  uint64_t status, transient, origin;
  xpj_cache_value v;
  uint64_t expires_ms; /* a failure the daemon forgets in this many ms:
                          not to be stored for good (0: a lasting one) */
  const char *counters; /* RESULT: XPD_F_COUNTERS ("" when absent) */
  char digest[65];
} xpd_kernel;
/* Counters as XPD_F_COUNTERS text (the non-zero ones) into buf; and back,
 * added to *d: unknown names, and values that are not finite and
 * non-negative, are skipped. */
void xpd_counters_str(const xpj_cache_counters *c, char *buf, size_t size);
void xpd_counters_add(const char *text, xpj_cache_counters *d);
xpd_err xpd_kernel_decode(const xpd_msg *m, xpd_kernel *k);

/* ---- encoding: a growable buffer; on allocation failure it is marked
 * failed and later calls do nothing. ---- */
typedef struct xpd_buf {
  uint8_t *p;
  size_t len, cap;
  bool oom;
} xpd_buf;

/* Starts a frame (header with a zero length, patched by xpd_end). */
void xpd_begin(xpd_buf *b, xpd_op op, uint32_t id);
void xpd_put_u64(xpd_buf *b, uint16_t tag, uint64_t v);
void xpd_put_bytes(xpd_buf *b, uint16_t tag, const void *p, size_t n);
void xpd_put_str(xpd_buf *b, uint16_t tag, const char *s);
/* Patches the payload length of the frame begun at start; false on OOM or
 * a payload over 4 GiB. */
bool xpd_end(xpd_buf *b, size_t start);
void xpd_buf_free(xpd_buf *b);

/* Encoders for the structured messages. */
void xpd_put_get(xpd_buf *b, const xpd_get *g);
void xpd_put_lookup(xpd_buf *b, const xpd_lookup *l);
void xpd_put_kernel(xpd_buf *b, const xpd_kernel *k);

#endif
