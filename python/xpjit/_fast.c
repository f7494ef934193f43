/* _fast.c - the launch path of the xpjit package in C: a kernel called
 * with arguments it has seen before (the same dtypes, ranks and kinds on
 * the same device) is launched without running Python code per argument.
 *
 * Everything else stays in Python (_program.py): a call this module does
 * not know, or whose arguments it would have to judge (a read-only array
 * as an output, a stride that is not a whole element, an integer out of
 * its type's range, memory of another library), returns MISS and takes
 * the slow path, which infers, specialises, checks and raises with the
 * library's message, then registers the call's key for next time.
 *
 * It does not link libxpjit: the package passes the addresses of the
 * functions it calls from the copy ctypes loaded (init), so one library
 * serves both. It reads NumPy arrays (and anything else with the buffer
 * protocol) through the buffer protocol, and xpjit.ndarray through its
 * attributes.
 *
 * It also holds what both paths share: the Guard of each queue and program
 * (its handle and the calls using it, so that close() never destroys it
 * under one), and the waits (wait_on), which the main thread makes
 * interruptible by Ctrl-C. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "xpjit.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

enum { MISS = -1 };

/* bytes per element (xpj_scalar_bits without calling the library) */
static unsigned xpj_scalar_bits_local(xpj_scalar t) {
  switch (t) {
  case XPJ_BOOL: case XPJ_I8: case XPJ_U8: return 8;
  case XPJ_I16: case XPJ_U16: case XPJ_F16: case XPJ_BF16: return 16;
  case XPJ_I32: case XPJ_U32: case XPJ_F32: return 32;
  case XPJ_I64: case XPJ_U64: case XPJ_F64: return 64;
  default: return 0;
  }
}

typedef xpj_status (*launch_fn)(xpj_queue *, xpj_kernel *, const xpj_range *,
                                unsigned, const xpj_arg *, xpj_event **);
typedef xpj_status (*wait_fn)(xpj_queue *);
typedef xpj_status (*event_wait_fn)(xpj_event *);
typedef xpj_arg (*scalar_fn)(xpj_scalar, const void *);
static launch_fn p_launch;
static wait_fn p_wait, p_cancel;
static event_wait_fn p_event_wait;
static scalar_fn p_arg_scalar;
static PyObject *ndarray_type; /* xpjit.ndarray */
/* numpy.ndarray and numpy.generic: the only buffers taken here, as the
 * slow path takes only them (other buffer exporters go its way, and are
 * refused there) */
static PyObject *np_array_type, *np_scalar_type;
/* NumPy's scalar types -> xpj_scalar (set_scalar_types): a NumPy scalar's
 * type says its dtype, and its value is read as a number, without the
 * buffer protocol */
static PyObject *np_scalar_codes;
static PyObject *s_guard, *s_dv, *s_ptr, *s_shape, *s_strides, *s_code,
    *s_sync;

enum { PYERR = -2 };

/* ---- handles in use -----------------------------------------------------
 * The handle of a Queue or a Program and how many calls are using it with
 * the GIL released (a wait, a compile): close() takes the handle away, so
 * that calls coming later find none and raise the guard's error, then
 * waits until users is 0 before destroying it (_runtime.py's _retire).
 * Changed only with the GIL held, so without a lock; _runtime.py has the
 * same in Python (_PyGuard) for when this module is not built. */

typedef struct {
  PyObject_HEAD
  void *h;          /* NULL once closed */
  Py_ssize_t users; /* `with guard` blocks and waits in progress */
  PyObject *exc, *msg; /* what a use after close raises */
} Guard;

static PyTypeObject *guard_type;

/* Guard(handle, exception type, message) */
static PyObject *guard_new(PyTypeObject *t, PyObject *args, PyObject *kw) {
  unsigned long long h;
  PyObject *exc, *msg;
  if (!PyArg_ParseTuple(args, "KOU", &h, &exc, &msg))
    return NULL;
  Guard *g = (Guard *)t->tp_alloc(t, 0);
  if (!g)
    return NULL;
  g->h = (void *)(uintptr_t)h;
  Py_INCREF(exc);
  g->exc = exc;
  Py_INCREF(msg);
  g->msg = msg;
  return (PyObject *)g;
}

static void guard_dealloc(PyObject *self) {
  PyTypeObject *t = Py_TYPE(self);
  Py_CLEAR(((Guard *)self)->exc);
  Py_CLEAR(((Guard *)self)->msg);
  t->tp_free(self);
  Py_DECREF(t);
}

static PyObject *guard_closed(Guard *g) {
  PyErr_SetObject(g->exc, g->msg);
  return NULL;
}

/* with guard as h: the handle, counted as used until the block ends */
static PyObject *guard_enter(PyObject *self, PyObject *unused) {
  Guard *g = (Guard *)self;
  if (!g->h)
    return guard_closed(g);
  g->users++;
  return PyLong_FromVoidPtr(g->h);
}

static PyObject *guard_exit(PyObject *self, PyObject *args) {
  ((Guard *)self)->users--;
  Py_RETURN_FALSE;
}

/* close(msg=None): takes the handle away and returns it (0 when it was);
 * msg, when given, is what later uses raise (after a fork: the parent's) */
static PyObject *guard_close(PyObject *self, PyObject *args) {
  Guard *g = (Guard *)self;
  PyObject *msg = NULL;
  if (!PyArg_ParseTuple(args, "|U", &msg))
    return NULL;
  if (msg) {
    Py_INCREF(msg);
    Py_SETREF(g->msg, msg);
  }
  void *h = g->h;
  g->h = NULL;
  return PyLong_FromVoidPtr(h);
}

static PyObject *guard_h(PyObject *self, void *unused) {
  return PyLong_FromVoidPtr(((Guard *)self)->h);
}

static PyMethodDef guard_methods[] = {
    {"__enter__", guard_enter, METH_NOARGS, "the handle, used until exit"},
    {"__exit__", guard_exit, METH_VARARGS, NULL},
    {"close", guard_close, METH_VARARGS,
     "close(msg=None): takes the handle away"},
    {NULL, NULL, 0, NULL}};

static PyMemberDef guard_members[] = {
    {"users", T_PYSSIZET, offsetof(Guard, users), READONLY,
     "calls using the handle"},
    {NULL, 0, 0, 0, NULL}};

static PyGetSetDef guard_getset[] = {
    {"h", guard_h, NULL, "the handle, 0 once closed", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot guard_slots[] = {
    {Py_tp_new, guard_new},         {Py_tp_dealloc, guard_dealloc},
    {Py_tp_methods, guard_methods}, {Py_tp_members, guard_members},
    {Py_tp_getset, guard_getset},
    {Py_tp_doc, "a handle and the calls using it"},
    {0, NULL}};

static PyType_Spec guard_spec = {"xpjit._fast.Guard", sizeof(Guard), 0,
                                 Py_TPFLAGS_DEFAULT, guard_slots};

/* ---- waits ----------------------------------------------------------------
 * A wait blocks in the library with the GIL released, where Python's
 * SIGINT handler only notes a Ctrl-C (and on the CPU device the waiting
 * thread may be running the kernel itself). So, once a wait on the main
 * thread has made the package's pipe and the thread that reads it
 * (_runtime.py's _watch), on_sigint is put in front of the C-level SIGINT
 * handler (Python's, or one that calls it): it writes the signal to the
 * pipe, and the thread, when Python's handler is the default one, calls
 * interrupt(), which cancels the queue the main thread waits for; the
 * wait returns, and KeyboardInterrupt is raised once the queue has let go
 * of the memory its commands used. A wait costs a few stores, and one
 * wait in 64 a look at the handler (a system call: signal.signal(), or a
 * handler that puts back what it found, may have dropped on_sigint). The
 * library has no wait with a timeout to poll with, and
 * PySignal_SetWakeupFd is not exported (3.11); without this module
 * _runtime.py points Python's wakeup fd at the pipe for each wait. */

static unsigned long main_ident;
static volatile int wake_fd = -1; /* the pipe's write end; -1 not asked, -2
                                     none */
static PyObject *wake_fn;         /* _runtime._wake_fd: pipe and thread */
static struct sigaction prev_sigint; /* the handler on_sigint calls */
/* the SIGINT handler when this module was loaded (Python's): one that
 * cannot call on_sigint, so that on_sigint may go in front of it again */
static void (*py_sigint)(int);
/* a SIGINT went through on_sigint: the handler it called may have put
 * back another (Intel's OpenCL runtime puts back the one it found), so
 * the next wait looks again */
static volatile sig_atomic_t hook_stale;
static unsigned arms; /* waits armed, to look at the handler now and then */
static Guard *main_waiting; /* the queue the main thread waits for */
static int interrupted;     /* interrupt() cancelled it */

static void on_sigint(int sig, siginfo_t *info, void *uc) {
  /* the handler first: Python notes the signal before the thread can
   * cancel the wait, which then raises KeyboardInterrupt */
  if (prev_sigint.sa_flags & SA_SIGINFO)
    prev_sigint.sa_sigaction(sig, info, uc);
  else
    prev_sigint.sa_handler(sig);
  int e = errno, fd = wake_fd;
  char c = (char)sig;
  if (fd >= 0 && write(fd, &c, 1) < 0) {
    /* full: the thread has enough to read */
  }
  hook_stale = 1;
  errno = e;
}

/* on_sigint in front of the SIGINT handler there is, at the first wait
 * (Python's, or one a library put in front of it and calls: Intel's
 * OpenCL runtime does); later only in front of Python's (any other may
 * be one that calls on_sigint, put in front of it after) */
static void hook(int first) {
  struct sigaction cur, mine;
  if (sigaction(SIGINT, NULL, &cur) != 0)
    return;
  if (cur.sa_flags & SA_SIGINFO) {
    if (cur.sa_sigaction == on_sigint || !first)
      return;
  } else if (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN ||
             (!first && cur.sa_handler != py_sigint)) {
    return; /* (no Python handler: Ctrl-C raises nothing to hurry) */
  }
  prev_sigint = cur;
  mine = cur;
  mine.sa_flags |= SA_SIGINFO;
  mine.sa_sigaction = on_sigint;
  sigaction(SIGINT, &mine, NULL);
}

static int arm(Guard *g) {
  if (PyThread_get_thread_ident() != main_ident)
    return 0;
  if (wake_fd == -1 && wake_fn) {
    PyObject *r = PyObject_CallNoArgs(wake_fn);
    long fd = r ? PyLong_AsLong(r) : -2;
    Py_XDECREF(r);
    if (PyErr_Occurred())
      PyErr_Clear();
    wake_fd = fd >= 0 && fd <= INT_MAX ? (int)fd : -2;
    if (wake_fd >= 0)
      hook(1);
  }
  if (wake_fd < 0)
    return 0;
  if (hook_stale || (++arms & 63) == 0) {
    hook_stale = 0;
    hook(0);
  }
  Py_INCREF(g);
  main_waiting = g;
  interrupted = 0;
  return 1;
}

/* Waits for g's queue (ev: for that event): the status, or PYERR with
 * KeyboardInterrupt (or what another signal handler raised) set. g's
 * handle may be NULL only with ev (a closed queue's events are done). */
static int wait_on(Guard *g, xpj_event *ev) {
  xpj_queue *q = g->h;
  if (q)
    g->users++; /* (before arm, which may run Python code) */
  int armed = q && arm(g), st;
  Py_BEGIN_ALLOW_THREADS
  st = ev ? (int)p_event_wait(ev) : (int)p_wait(q);
  Py_END_ALLOW_THREADS
  if (armed && interrupted && ev) {
    /* a cancelled command keeps its memory until its turn in the queue
     * has passed (xpj_queue_cancel): after the queue's wait */
    Py_BEGIN_ALLOW_THREADS
    p_wait(q);
    Py_END_ALLOW_THREADS
  }
  if (q)
    g->users--;
  if (armed) {
    Py_CLEAR(main_waiting);
    interrupted = 0;
    if (PyErr_CheckSignals() < 0)
      return PYERR;
  }
  return st;
}

/* wait(guard, event): xpj_queue_wait of the guard's queue (event not 0:
 * xpj_event_wait of it), its status */
static PyObject *f_wait(PyObject *self, PyObject *args) {
  PyObject *go;
  unsigned long long ev;
  if (!PyArg_ParseTuple(args, "O!K", guard_type, &go, &ev))
    return NULL;
  Guard *g = (Guard *)go;
  if (!g->h && !ev)
    return guard_closed(g);
  int st = wait_on(g, (xpj_event *)(uintptr_t)ev);
  return st == PYERR ? NULL : PyLong_FromLong(st);
}

/* interrupt(): cancels the queue the main thread waits for, if any (the
 * watching thread, on SIGINT). With the GIL held: that wait counts as a
 * user, so the queue is not destroyed meanwhile. */
static PyObject *f_interrupt(PyObject *self, PyObject *unused) {
  if (main_waiting && main_waiting->h) {
    interrupted = 1;
    p_cancel(main_waiting->h);
  }
  Py_RETURN_NONE;
}

/* set_wake(fd, main thread's ident): after a fork, in the child (-1: ask
 * again; on_sigint stays, inherited) */
static PyObject *f_set_wake(PyObject *self, PyObject *args) {
  int fd;
  unsigned long ident;
  if (!PyArg_ParseTuple(args, "ik", &fd, &ident))
    return NULL;
  wake_fd = fd;
  main_ident = ident;
  Py_RETURN_NONE;
}

/* ---- what the slow path resolved: one specialisation ------------------ */

typedef struct fspec {
  xpj_kernel *k;
  Guard *program; /* the kernel's program: closed, the kernel is gone */
  unsigned n;
  uint8_t kind[XPJ_MAX_PARAMS];  /* xpj_arg_kind */
  uint8_t dtype[XPJ_MAX_PARAMS]; /* scalars: theirs; arrays: the element's */
  uint8_t out[XPJ_MAX_PARAMS];   /* arrays the kernel may write */
} fspec;

static void spec_free(PyObject *cap) {
  fspec *s = PyCapsule_GetPointer(cap, "xpjit.fspec");
  if (s)
    Py_XDECREF(s->program);
  PyMem_Free(s);
}

/* spec(kernel, kinds, dtypes, outs, program's guard): kernel an address,
 * then bytes of one entry per parameter */
static PyObject *f_spec(PyObject *self, PyObject *args) {
  unsigned long long k;
  const char *kinds, *dtypes, *outs;
  Py_ssize_t nk, nd, no;
  PyObject *guard;
  if (!PyArg_ParseTuple(args, "Ky#y#y#O!", &k, &kinds, &nk, &dtypes, &nd,
                        &outs, &no, guard_type, &guard))
    return NULL;
  if (nk != nd || nk != no || nk > XPJ_MAX_PARAMS) {
    PyErr_SetString(PyExc_ValueError, "spec: lengths differ");
    return NULL;
  }
  fspec *s = PyMem_Calloc(1, sizeof *s);
  if (!s)
    return PyErr_NoMemory();
  s->k = (xpj_kernel *)(uintptr_t)k;
  Py_INCREF(guard);
  s->program = (Guard *)guard;
  s->n = (unsigned)nk;
  memcpy(s->kind, kinds, (size_t)nk);
  memcpy(s->dtype, dtypes, (size_t)nk);
  memcpy(s->out, outs, (size_t)nk);
  return PyCapsule_New(s, "xpjit.fspec", spec_free);
}

/* ---- arguments ---------------------------------------------------------- */

/* the xpj_scalar of a buffer's struct format, XPJ_VOID for others */
static xpj_scalar of_format(const char *f, Py_ssize_t itemsize) {
  if (!f)
    return itemsize == 1 ? XPJ_U8 : XPJ_VOID;
  if (*f == '<' || *f == '=' || *f == '@')
    f++;
  if (!f[0] || f[1])
    return XPJ_VOID;
  switch (*f) {
  case '?': return XPJ_BOOL;
  case 'b': return XPJ_I8;
  case 'B': return XPJ_U8;
  case 'h': return XPJ_I16;
  case 'H': return XPJ_U16;
  case 'i': return itemsize == 4 ? XPJ_I32 : XPJ_VOID;
  case 'I': return itemsize == 4 ? XPJ_U32 : XPJ_VOID;
  case 'l': case 'q': return itemsize == 8 ? XPJ_I64 : XPJ_VOID;
  case 'L': case 'Q': return itemsize == 8 ? XPJ_U64 : XPJ_VOID;
  case 'e': return XPJ_F16;
  case 'f': return XPJ_F32;
  case 'd': return XPJ_F64;
  default: return XPJ_VOID;
  }
}

/* What a call's key says of one argument: a number that differs for
 * arguments that would specialise differently or take another path. */
enum { K_ARRAY = 1 << 16, K_XARRAY = 2 << 16, K_FLOAT = 3 << 16,
       K_INT = 4 << 16, K_BOOL = 5 << 16, K_NPSCALAR = 6 << 16 };

static long attr_long(PyObject *o, PyObject *name, int *ok) {
  PyObject *v = PyObject_GetAttr(o, name);
  long r = v ? PyLong_AsLong(v) : -1;
  Py_XDECREF(v);
  if (!v || (r == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    *ok = 0;
  }
  return r;
}

/* The key part of argument a, 0 for one the fast path does not take. An
 * xpjit.ndarray of another device than dev is not taken either: the slow
 * path waits for its device first, and for the launch (_program.py). */
static uint64_t arg_key(PyObject *a, long dev, Py_buffer *keep,
                        int *held) {
  if (PyFloat_CheckExact(a))
    return K_FLOAT;
  if (PyBool_Check(a))
    return K_BOOL;
  if (PyLong_CheckExact(a))
    return K_INT;
  if (ndarray_type && PyObject_TypeCheck(a, (PyTypeObject *)ndarray_type)) {
    int ok = 1;
    long code = attr_long(a, s_code, &ok), dv = attr_long(a, s_dv, &ok);
    PyObject *shape = PyObject_GetAttr(a, s_shape);
    Py_ssize_t nd = shape && PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape)
                                                   : -1;
    Py_XDECREF(shape);
    if (!shape)
      PyErr_Clear();
    if (!ok || nd < 0 || dv != dev)
      return 0;
    return K_XARRAY | (uint64_t)code << 8 | (uint64_t)nd;
  }
  if (np_scalar_codes) {
    PyObject *c = PyDict_GetItemWithError(np_scalar_codes,
                                          (PyObject *)Py_TYPE(a));
    if (c)
      return (uint64_t)K_NPSCALAR | (uint64_t)PyLong_AsLong(c) << 8;
    if (PyErr_Occurred()) {
      PyErr_Clear();
      return 0;
    }
  }
  int np_array = np_array_type &&
                 PyObject_TypeCheck(a, (PyTypeObject *)np_array_type);
  int np_scalar = !np_array && np_scalar_type &&
                  PyObject_TypeCheck(a, (PyTypeObject *)np_scalar_type);
  if ((np_array || np_scalar) && PyObject_CheckBuffer(a)) {
    Py_buffer local, *b = keep ? keep : &local;
    if (PyObject_GetBuffer(a, b, PyBUF_RECORDS_RO) != 0) {
      PyErr_Clear();
      return 0;
    }
    xpj_scalar t = of_format(b->format, b->itemsize);
    uint64_t k = t == XPJ_VOID ? 0
                 : np_scalar ? (uint64_t)K_NPSCALAR | (uint64_t)t << 8
                             : (uint64_t)K_ARRAY | (uint64_t)t << 8 |
                                   (uint64_t)b->ndim;
    if (keep)
      *held = 1; /* the caller releases it */
    else
      PyBuffer_Release(b);
    return k;
  }
  return 0;
}

/* The call's key; with keep, the buffers read on the way stay held in
 * keep[i] (held[i] set) for the launch. */
static int key_of(PyObject *const *items, Py_ssize_t n, long dev,
                  uint64_t *out, Py_buffer *keep, int *held) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)dev;
  for (Py_ssize_t i = 0; i < n; i++) {
    uint64_t k = arg_key(items[i], dev, keep ? &keep[i] : NULL,
                         keep ? &held[i] : NULL);
    if (!k)
      return 0;
    h = (h ^ k) * 1099511628211ull;
  }
  *out = h ^ (uint64_t)n << 56;
  return 1;
}

/* key(args, queue): the call's key, or None for arguments the fast path
 * does not take */
static PyObject *f_key(PyObject *self, PyObject *args) {
  PyObject *a, *q;
  if (!PyArg_ParseTuple(args, "O!O", &PyTuple_Type, &a, &q))
    return NULL;
  int ok = 1;
  long dev = attr_long(q, s_dv, &ok);
  uint64_t k;
  if (!ok || !key_of(&PyTuple_GET_ITEM(a, 0), PyTuple_GET_SIZE(a), dev, &k,
                     NULL, NULL))
    Py_RETURN_NONE;
  return PyLong_FromUnsignedLongLong(k);
}

static int range_dims(PyObject *o, uint64_t v[3], unsigned *n, int zero_ok) {
  if (PyBool_Check(o))
    return 0; /* True is no size: the slow path says so */
  if (PyLong_Check(o)) {
    long long x = PyLong_AsLongLong(o);
    if (x < (zero_ok ? 0 : 1) || PyErr_Occurred()) {
      PyErr_Clear();
      return 0;
    }
    v[0] = (uint64_t)x;
    *n = 1;
    return 1;
  }
  if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) < 1 || PyTuple_GET_SIZE(o) > 3)
    return 0;
  *n = (unsigned)PyTuple_GET_SIZE(o);
  for (unsigned d = 0; d < *n; d++) {
    PyObject *e = PyTuple_GET_ITEM(o, d);
    long long x = PyLong_Check(e) && !PyBool_Check(e) ? PyLong_AsLongLong(e)
                                                      : -1;
    if (x < (zero_ok ? 0 : 1) || PyErr_Occurred()) {
      PyErr_Clear();
      return 0;
    }
    v[d] = (uint64_t)x;
  }
  return 1;
}

/* a Python or NumPy scalar as the scalar argument of dtype t */
static int scalar_arg(PyObject *a, xpj_scalar t, xpj_arg *g,
                      const Py_buffer *held) {
  memset(g, 0, sizeof *g);
  g->kind = XPJ_ARG_SCALAR;
  g->dtype = t;
  int is_float = t == XPJ_F32 || t == XPJ_F64 || t == XPJ_F16 ||
                 t == XPJ_BF16;
  if (PyFloat_CheckExact(a)) {
    if (!is_float)
      return 0;
    g->v.f = PyFloat_AS_DOUBLE(a);
    return 1;
  }
  if (PyBool_Check(a) || PyLong_CheckExact(a)) {
    int over = 0;
    if (t == XPJ_U64) {
      unsigned long long u = PyLong_AsUnsignedLongLong(a);
      if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
      }
      g->v.u = u;
      return 1;
    }
    long long x = PyLong_AsLongLongAndOverflow(a, &over);
    if (over || (x == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return 0;
    }
    if (is_float) {
      g->v.f = (double)x;
      return 1;
    }
    static const long long lo[XPJ_SCALAR_COUNT] = {
        [XPJ_BOOL] = 0, [XPJ_I8] = -128, [XPJ_I16] = -32768,
        [XPJ_I32] = -2147483648LL, [XPJ_I64] = LLONG_MIN, [XPJ_U8] = 0,
        [XPJ_U16] = 0, [XPJ_U32] = 0};
    static const long long hi[XPJ_SCALAR_COUNT] = {
        [XPJ_BOOL] = 1, [XPJ_I8] = 127, [XPJ_I16] = 32767,
        [XPJ_I32] = 2147483647LL, [XPJ_I64] = LLONG_MAX, [XPJ_U8] = 255,
        [XPJ_U16] = 65535, [XPJ_U32] = 4294967295LL};
    if (t == XPJ_BOOL && !PyBool_Check(a) && x != 0 && x != 1)
      return 0;
    if (t >= XPJ_SCALAR_COUNT || x < lo[t] || x > hi[t])
      return 0;
    if (t == XPJ_U8 || t == XPJ_U16 || t == XPJ_U32)
      g->v.u = (uint64_t)x;
    else
      g->v.i = x;
    return 1;
  }
  /* a NumPy scalar of exactly the parameter's type: by its type, as a
   * number; else its buffer, read while the call's key was made */
  PyObject *c = np_scalar_codes ? PyDict_GetItemWithError(
                                      np_scalar_codes, (PyObject *)Py_TYPE(a))
                                : NULL;
  if (c) {
    if (PyLong_AsLong(c) != (long)t)
      return 0;
    if (is_float) {
      double d = PyFloat_AsDouble(a);
      if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
      }
      g->v.f = d;
      return 1;
    }
    if (t == XPJ_BOOL) {
      int b = PyObject_IsTrue(a);
      if (b < 0) {
        PyErr_Clear();
        return 0;
      }
      g->v.i = b;
      return 1;
    }
    PyObject *iv = PyNumber_Index(a);
    if (!iv) {
      PyErr_Clear();
      return 0;
    }
    int ok = 1;
    if (t == XPJ_U64 || t == XPJ_U32 || t == XPJ_U16 || t == XPJ_U8)
      g->v.u = PyLong_AsUnsignedLongLong(iv);
    else
      g->v.i = PyLong_AsLongLong(iv);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      ok = 0;
    }
    Py_DECREF(iv);
    return ok;
  }
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  if (!held)
    return 0;
  if (held->ndim != 0 || of_format(held->format, held->itemsize) != t)
    return 0;
  *g = p_arg_scalar(t, held->buf);
  return 1;
}

/* The view of array argument a (element type t): 1 when filled, with
 * *host set for memory NumPy or another library reads as it likes (the
 * launch must end before the call returns), *b holding a buffer to
 * release after the launch. */
static int array_arg(PyObject *a, const fspec *sp, unsigned i, xpj_array *v,
                     int *host, Py_buffer *b, int *held) {
  xpj_scalar t = (xpj_scalar)sp->dtype[i];
  memset(v, 0, sizeof *v);
  v->dtype = t;
  if (ndarray_type && PyObject_TypeCheck(a, (PyTypeObject *)ndarray_type)) {
    int ok = 1;
    long sync = attr_long(a, s_sync, &ok);
    if (!ok || sync == 2) /* device memory of another library, or read-only
                            memory: the slow path judges */
      return 0;
    PyObject *ptr = PyObject_GetAttr(a, s_ptr);
    PyObject *shape = PyObject_GetAttr(a, s_shape);
    PyObject *strides = PyObject_GetAttr(a, s_strides);
    ok = ptr && shape && strides && PyTuple_Check(shape) &&
         PyTuple_Check(strides) &&
         PyTuple_GET_SIZE(shape) == PyTuple_GET_SIZE(strides) &&
         PyTuple_GET_SIZE(shape) <= XPJ_MAX_RANK;
    if (ok) {
      v->data = PyLong_AsVoidPtr(ptr);
      v->ndim = (unsigned)PyTuple_GET_SIZE(shape);
      unsigned es = t == XPJ_BOOL ? 1 : xpj_scalar_bits_local(t) / 8;
      for (unsigned d = 0; d < v->ndim && ok; d++) {
        long long n = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, d));
        long long st = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, d));
        ok = !PyErr_Occurred() && es && st % (long long)es == 0;
        v->shape[d] = n;
        v->strides[d] = es ? st / (long long)es : 0;
      }
    }
    Py_XDECREF(ptr);
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    if (!ok) {
      PyErr_Clear();
      return 0;
    }
    *host = *host || sync == 1;
    return 1;
  }
  if (!*held || (sp->out[i] && b->readonly))
    return 0; /* read-only as an output, or no buffer: the slow path */
  if (of_format(b->format, b->itemsize) != t && !(t == XPJ_BF16 &&
      of_format(b->format, b->itemsize) == XPJ_U16))
    return 0;
  if (b->ndim > XPJ_MAX_RANK || b->ndim < 1)
    return 0;
  if (!b->shape || !b->strides || b->itemsize <= 0)
    return 0;
  v->data = b->buf;
  v->ndim = (unsigned)b->ndim;
  for (int d = 0; d < b->ndim; d++) {
    if (b->strides[d] % b->itemsize)
      return 0;
    v->shape[d] = b->shape[d];
    v->strides[d] = b->strides[d] / b->itemsize;
  }
  if (!v->data && b->len == 0)
    v->data = (void *)(uintptr_t)b->itemsize; /* an empty array: not NULL */
  *host = 1;
  return 1;
}

/* The launch of a known call: 0 launched (and, with host memory,
 * finished), a positive xpj_status (its message in xpj_last_error), MISS
 * (not known here: the slow path), or PYERR with a Python exception set. */
static int launch_known(PyObject *memo, PyObject *q, PyObject *grid,
                        PyObject *local, PyObject *const *items,
                        Py_ssize_t n) {
  int ok = 1;
  long dev = attr_long(q, s_dv, &ok);
  PyObject *go = ok ? PyObject_GetAttr(q, s_guard) : NULL;
  if (!go || !Py_IS_TYPE(go, guard_type) || !((Guard *)go)->h ||
      n > XPJ_MAX_PARAMS || !memo || !PyDict_Check(memo)) {
    /* closed, or not a queue: the slow path says so */
    Py_XDECREF(go);
    PyErr_Clear();
    return MISS;
  }
  /* the queue and the program counted as used, as Python code may run
   * on the way (an attribute of an ndarray subclass) and let close() in */
  Guard *qg = (Guard *)go, *pg = NULL;
  xpj_queue *queue = qg->h;
  qg->users++;
  xpj_arg g[XPJ_MAX_PARAMS];
  xpj_array v[XPJ_MAX_PARAMS];
  Py_buffer b[XPJ_MAX_PARAMS];
  int held[XPJ_MAX_PARAMS] = {0};
  int host = 0, st = MISS;
  uint64_t key;
  PyObject *cap = NULL;
  if (key_of(items, n, dev, &key, b, held)) {
    PyObject *k = PyLong_FromUnsignedLongLong(key);
    cap = k ? PyDict_GetItemWithError(memo, k) : NULL;
    Py_XINCREF(cap); /* (close() clears the memo) */
    Py_XDECREF(k);
  }
  const fspec *sp = cap ? PyCapsule_GetPointer(cap, "xpjit.fspec") : NULL;
  /* (a closed program's kernel is gone: the slow path raises) */
  if (!sp || (unsigned)n != sp->n || !sp->program->h)
    goto out;
  pg = sp->program;
  pg->users++;
  xpj_range r;
  memset(&r, 0, sizeof r);
  unsigned gn, ln = 0;
  if (!range_dims(grid, r.global, &gn, 0))
    goto out;
  r.ndim = gn;
  for (unsigned d = gn; d < 3; d++)
    r.global[d] = 1;
  if (local && local != Py_None) {
    if (!range_dims(local, r.local, &ln, 1) || ln != gn)
      goto out;
    for (unsigned d = gn; d < 3; d++)
      r.local[d] = 1;
  }
  for (Py_ssize_t j = 0; j < n; j++) {
    PyObject *a = items[j];
    unsigned i = (unsigned)j;
    memset(&g[i], 0, sizeof g[i]);
    if (sp->kind[i] == XPJ_ARG_ARRAY) {
      if (!array_arg(a, sp, i, &v[i], &host, &b[i], &held[i]))
        goto out;
      g[i].kind = XPJ_ARG_ARRAY;
      g[i].array = &v[i];
    } else if (sp->kind[i] == XPJ_ARG_SCALAR) {
      if (!scalar_arg(a, (xpj_scalar)sp->dtype[i], &g[i],
                      held[i] ? &b[i] : NULL))
        goto out;
    } else {
      long long c = PyLong_CheckExact(a) ? PyLong_AsLongLong(a) : -1;
      if (c < 0 || PyErr_Occurred()) {
        PyErr_Clear();
        goto out;
      }
      g[i].kind = XPJ_ARG_LOCAL;
      g[i].v.u = (uint64_t)c;
    }
  }
  st = (int)p_launch(queue, sp->k, &r, (unsigned)n, g, NULL);
  pg->users--;
  pg = NULL;
  if (st == 0 && host)
    st = wait_on(qg, NULL);
out:
  for (Py_ssize_t i = 0; i < n; i++)
    if (held[i])
      PyBuffer_Release(&b[i]);
  if (pg)
    pg->users--;
  Py_XDECREF(cap);
  qg->users--;
  Py_DECREF(go);
  return PyErr_Occurred() ? PYERR : st;
}

/* ---- KernelBase: xpjit.Kernel's calls, in C ------------------------------
 * k(grid, *args) with at most local= and queue= as keywords goes to
 * launch_known with the current queue (xpjit's current_queue(), when no
 * queue= is given); anything else, a miss, goes to the Python method
 * _call_slow with the same arguments; an error of the launch raises what
 * _raise_status makes of it. */

static PyObject *current_queue_fn, *raise_fn;
/* current_queue()'s answer while no `with device:` is active on any
 * thread's stack here (set_default(None) forgets it: a new default
 * context), and how deep this thread is in `with device:` blocks */
static PyObject *default_queue;
static _Thread_local int overrides;
/* bumped by set_default: an answer of current_queue() that began before
 * (another thread's set_context meanwhile) is not kept */
static unsigned long default_gen;
static PyObject *s_call_slow, *s_local, *s_queue;

typedef struct {
  PyObject_HEAD
  PyObject *memo; /* _fast_memo: call key -> specialisation */
} KernelBase;

static PyObject *kb_slow(PyObject *self, PyObject *args, PyObject *kw) {
  PyObject *m = PyObject_GetAttr(self, s_call_slow);
  if (!m)
    return NULL;
  PyObject *r = PyObject_Call(m, args, kw);
  Py_DECREF(m);
  return r;
}

static PyObject *kb_call(PyObject *self, PyObject *args, PyObject *kw) {
  KernelBase *k = (KernelBase *)self;
  Py_ssize_t na = PyTuple_GET_SIZE(args);
  PyObject *local = NULL, *q = NULL;
  if (na < 1 || !k->memo || !current_queue_fn)
    return kb_slow(self, args, kw);
  if (kw && PyDict_GET_SIZE(kw)) {
    Py_ssize_t pos = 0;
    PyObject *key, *val;
    while (PyDict_Next(kw, &pos, &key, &val)) {
      int is_local = PyUnicode_Check(key) &&
                     PyUnicode_Compare(key, s_local) == 0;
      int is_queue = !is_local && PyUnicode_Check(key) &&
                     PyUnicode_Compare(key, s_queue) == 0;
      if (PyErr_Occurred())
        return NULL;
      if (is_local)
        local = val == Py_None ? NULL : val;
      else if (is_queue)
        q = val == Py_None ? NULL : val;
      else /* dtypes=, wait=, ... and names it does not take: its message */
        return kb_slow(self, args, kw);
    }
  }
  PyObject *owned = NULL;
  if (!q && !overrides && default_queue) {
    q = owned = default_queue;
    Py_INCREF(owned);
  } else if (!q) {
    unsigned long gen = default_gen;
    owned = PyObject_CallNoArgs(current_queue_fn);
    if (!owned)
      return NULL;
    q = owned;
    if (!overrides && gen == default_gen) {
      Py_INCREF(owned);
      Py_XSETREF(default_queue, owned);
    }
  }
  int st = launch_known(k->memo, q, PyTuple_GET_ITEM(args, 0), local,
                        &PyTuple_GET_ITEM(args, 0) + 1, na - 1);
  Py_XDECREF(owned);
  if (st == PYERR)
    return NULL;
  if (st == MISS)
    return kb_slow(self, args, kw);
  if (st > 0)
    return PyObject_CallFunction(raise_fn, "i", st);
  Py_RETURN_NONE;
}

static int kb_traverse(PyObject *self, visitproc visit, void *arg) {
  Py_VISIT(((KernelBase *)self)->memo);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

static int kb_clear(PyObject *self) {
  Py_CLEAR(((KernelBase *)self)->memo);
  return 0;
}

static void kb_dealloc(PyObject *self) {
  PyTypeObject *t = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  kb_clear(self);
  t->tp_free(self);
  Py_DECREF(t);
}

static PyMemberDef kb_members[] = {
    {"_fast_memo", T_OBJECT, offsetof(KernelBase, memo), 0,
     "call key -> specialisation (the C launch path's)"},
    {NULL, 0, 0, 0, NULL}};

static PyType_Slot kb_slots[] = {
    {Py_tp_call, kb_call},       {Py_tp_members, kb_members},
    {Py_tp_traverse, kb_traverse}, {Py_tp_clear, kb_clear},
    {Py_tp_dealloc, kb_dealloc}, {Py_tp_doc, "xpjit.Kernel's C base"},
    {0, NULL}};

static PyType_Spec kb_spec = {"xpjit._fast.KernelBase", sizeof(KernelBase), 0,
                              Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE |
                                  Py_TPFLAGS_HAVE_GC,
                              kb_slots};

/* set_default(None): forget the cached current queue (set_context) */
static PyObject *f_set_default(PyObject *self, PyObject *arg) {
  default_gen++;
  Py_CLEAR(default_queue);
  Py_RETURN_NONE;
}

/* enter(n): this thread enters (1) or leaves (-1) a `with device:` */
static PyObject *f_enter(PyObject *self, PyObject *arg) {
  long d = PyLong_AsLong(arg);
  if (d == -1 && PyErr_Occurred())
    return NULL;
  overrides += (int)d;
  Py_RETURN_NONE;
}

/* set_scalar_types({numpy scalar type: xpj_scalar}) */
static PyObject *f_set_scalar_types(PyObject *self, PyObject *arg) {
  if (!PyDict_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "set_scalar_types takes a dict");
    return NULL;
  }
  Py_INCREF(arg);
  Py_XSETREF(np_scalar_codes, arg);
  Py_RETURN_NONE;
}

/* set_calls(current_queue, raise_status, wake_fd) */
static PyObject *f_set_calls(PyObject *self, PyObject *args) {
  PyObject *cq, *rs, *wf;
  if (!PyArg_ParseTuple(args, "OOO", &cq, &rs, &wf))
    return NULL;
  Py_INCREF(wf);
  Py_XSETREF(wake_fn, wf);
  Py_INCREF(cq);
  Py_XSETREF(current_queue_fn, cq);
  Py_INCREF(rs);
  Py_XSETREF(raise_fn, rs);
  Py_RETURN_NONE;
}

/* init(launch, queue_wait, event_wait, queue_cancel, arg_scalar, ndarray,
 * numpy.ndarray, numpy.generic, main thread's ident): the library's
 * functions (as ctypes loaded them), the array classes and the thread
 * Python runs signal handlers on */
static PyObject *f_init(PyObject *self, PyObject *args) {
  unsigned long long l, w, ew, c, s;
  PyObject *nd, *na, *ns;
  unsigned long mi;
  if (!PyArg_ParseTuple(args, "KKKKKO!O!O!k", &l, &w, &ew, &c, &s,
                        &PyType_Type, &nd, &PyType_Type, &na, &PyType_Type,
                        &ns, &mi))
    return NULL;
  p_launch = (launch_fn)(uintptr_t)l;
  p_wait = (wait_fn)(uintptr_t)w;
  p_event_wait = (event_wait_fn)(uintptr_t)ew;
  p_cancel = (wait_fn)(uintptr_t)c;
  p_arg_scalar = (scalar_fn)(uintptr_t)s;
  main_ident = mi;
  PyObject **slot[3] = {&ndarray_type, &np_array_type, &np_scalar_type};
  PyObject *val[3] = {nd, na, ns};
  for (int i = 0; i < 3; i++) {
    Py_INCREF(val[i]);
    Py_XSETREF(*slot[i], val[i]);
  }
  Py_RETURN_NONE;
}

/* ---- DLPack capsules ------------------------------------------------------
 * A capsule's destructor runs when the capsule goes, also while the
 * exception of a consumer that refused it is pending: in C, so that the
 * exception is kept, and the tensor's deleter still runs. */

typedef struct dl_managed {
  char dl_tensor[48]; /* DLTensor: data, device, ndim, dtype, shape,
                         strides, byte_offset (only its size matters) */
  void *manager_ctx;
  void (*deleter)(struct dl_managed *self);
} dl_managed;

static void capsule_destructor(PyObject *cap) {
  if (!PyCapsule_IsValid(cap, "dltensor"))
    return; /* consumed ("used_dltensor"): the consumer deletes it */
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
  if (m && m->deleter)
    m->deleter(m);
  PyErr_Clear();
  PyErr_Restore(type, value, tb);
}

/* capsule(address): the DLPack capsule of a DLManagedTensor */
static PyObject *f_capsule(PyObject *self, PyObject *args) {
  unsigned long long p;
  if (!PyArg_ParseTuple(args, "K", &p))
    return NULL;
  return PyCapsule_New((void *)(uintptr_t)p, "dltensor", capsule_destructor);
}

static PyMethodDef methods[] = {
    {"init", f_init, METH_VARARGS,
     "init(launch, queue_wait, event_wait, queue_cancel, arg_scalar, "
     "ndarray, numpy.ndarray, numpy.generic, main_ident)"},
    {"spec", f_spec, METH_VARARGS,
     "spec(kernel, kinds, dtypes, outs, program_guard)"},
    {"wait", f_wait, METH_VARARGS, "wait(guard, event or 0) -> status"},
    {"interrupt", f_interrupt, METH_NOARGS,
     "interrupt(): cancels the queue the main thread waits for"},
    {"set_wake", f_set_wake, METH_VARARGS, "set_wake(fd, main_ident)"},
    {"capsule", f_capsule, METH_VARARGS, "capsule(dlmanagedtensor)"},
    {"set_calls", f_set_calls, METH_VARARGS,
     "set_calls(current_queue, raise_status, wake_fd)"},
    {"set_default", f_set_default, METH_O, "set_default(None)"},
    {"enter", f_enter, METH_O, "enter(1 or -1)"},
    {"set_scalar_types", f_set_scalar_types, METH_O,
     "set_scalar_types({numpy scalar type: xpj_scalar})"},
    {"key", f_key, METH_VARARGS, "key(args, queue)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fast(void) {
  s_guard = PyUnicode_InternFromString("_guard");
  struct sigaction sa;
  if (sigaction(SIGINT, NULL, &sa) == 0 && !(sa.sa_flags & SA_SIGINFO))
    py_sigint = sa.sa_handler;
  s_dv = PyUnicode_InternFromString("_dv");
  s_ptr = PyUnicode_InternFromString("_ptr"); /* ndarray.ptr's value */
  /* ndarray.shape's and .strides' values (read-only properties) */
  s_shape = PyUnicode_InternFromString("_shape");
  s_strides = PyUnicode_InternFromString("_strides");
  s_code = PyUnicode_InternFromString("_code");
  s_sync = PyUnicode_InternFromString("_sync");
  s_call_slow = PyUnicode_InternFromString("_call_slow");
  s_local = PyUnicode_InternFromString("local");
  s_queue = PyUnicode_InternFromString("queue");
  PyObject *m = PyModule_Create(&module);
  PyObject *kb = m ? PyType_FromSpec(&kb_spec) : NULL;
  if (!kb || PyModule_AddObject(m, "KernelBase", kb) != 0) {
    Py_XDECREF(kb);
    Py_XDECREF(m);
    return NULL;
  }
  PyObject *gt = PyType_FromSpec(&guard_spec);
  if (!gt || PyModule_AddObject(m, "Guard", gt) != 0) {
    Py_XDECREF(gt);
    Py_DECREF(m);
    return NULL;
  }
  Py_INCREF(gt); /* the module's reference, and this file's */
  guard_type = (PyTypeObject *)gt;
  return m;
}
