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
 * attributes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "xpjit.h"

#include <limits.h>
#include <string.h>

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
typedef xpj_arg (*scalar_fn)(xpj_scalar, const void *);
static launch_fn p_launch;
static wait_fn p_wait;
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
static PyObject *s_hv, *s_dv, *s_ptr, *s_shape, *s_strides, *s_code,
    *s_sync;

/* ---- what the slow path resolved: one specialisation ------------------ */

typedef struct fspec {
  xpj_kernel *k;
  unsigned n;
  uint8_t kind[XPJ_MAX_PARAMS];  /* xpj_arg_kind */
  uint8_t dtype[XPJ_MAX_PARAMS]; /* scalars: theirs; arrays: the element's */
  uint8_t out[XPJ_MAX_PARAMS];   /* arrays the kernel may write */
} fspec;

static void spec_free(PyObject *cap) {
  PyMem_Free(PyCapsule_GetPointer(cap, "xpjit.fspec"));
}

/* spec(kernel, kinds, dtypes, outs): kernel an address, the rest bytes of
 * one entry per parameter */
static PyObject *f_spec(PyObject *self, PyObject *args) {
  unsigned long long k;
  const char *kinds, *dtypes, *outs;
  Py_ssize_t nk, nd, no;
  if (!PyArg_ParseTuple(args, "Ky#y#y#", &k, &kinds, &nk, &dtypes, &nd, &outs,
                        &no))
    return NULL;
  if (nk != nd || nk != no || nk > XPJ_MAX_PARAMS) {
    PyErr_SetString(PyExc_ValueError, "spec: lengths differ");
    return NULL;
  }
  fspec *s = PyMem_Calloc(1, sizeof *s);
  if (!s)
    return PyErr_NoMemory();
  s->k = (xpj_kernel *)(uintptr_t)k;
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
 * xpjit.ndarray of another device than dev is not taken either. */
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
    long long x = PyLong_Check(e) ? PyLong_AsLongLong(e) : -1;
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

enum { PYERR = -2 };

/* The launch of a known call: 0 launched (and, with host memory,
 * finished), a positive xpj_status (its message in xpj_last_error), MISS
 * (not known here: the slow path), or PYERR with a Python exception set. */
static int launch_known(PyObject *memo, PyObject *q, PyObject *grid,
                        PyObject *local, PyObject *const *items,
                        Py_ssize_t n) {
  int ok = 1;
  long dev = attr_long(q, s_dv, &ok);
  PyObject *hv = ok ? PyObject_GetAttr(q, s_hv) : NULL;
  xpj_queue *queue = hv ? PyLong_AsVoidPtr(hv) : NULL;
  Py_XDECREF(hv);
  if (!queue) { /* closed: the slow path says so */
    PyErr_Clear();
    return MISS;
  }
  if (n > XPJ_MAX_PARAMS || !memo || !PyDict_Check(memo))
    return MISS;
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
    Py_XDECREF(k);
  }
  const fspec *sp = cap ? PyCapsule_GetPointer(cap, "xpjit.fspec") : NULL;
  if (!sp || (unsigned)n != sp->n)
    goto out;
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
  if (st == 0 && host) {
    Py_BEGIN_ALLOW_THREADS
    st = (int)p_wait(queue);
    Py_END_ALLOW_THREADS
  }
out:
  for (Py_ssize_t i = 0; i < n; i++)
    if (held[i])
      PyBuffer_Release(&b[i]);
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

/* set_calls(current_queue, raise_status) */
static PyObject *f_set_calls(PyObject *self, PyObject *args) {
  PyObject *cq, *rs;
  if (!PyArg_ParseTuple(args, "OO", &cq, &rs))
    return NULL;
  Py_INCREF(cq);
  Py_XSETREF(current_queue_fn, cq);
  Py_INCREF(rs);
  Py_XSETREF(raise_fn, rs);
  Py_RETURN_NONE;
}

/* init(launch, wait, arg_scalar, ndarray, numpy.ndarray, numpy.generic):
 * the library's functions (as ctypes loaded them) and the array classes */
static PyObject *f_init(PyObject *self, PyObject *args) {
  unsigned long long l, w, s;
  PyObject *nd, *na, *ns;
  if (!PyArg_ParseTuple(args, "KKKO!O!O!", &l, &w, &s, &PyType_Type, &nd,
                        &PyType_Type, &na, &PyType_Type, &ns))
    return NULL;
  p_launch = (launch_fn)(uintptr_t)l;
  p_wait = (wait_fn)(uintptr_t)w;
  p_arg_scalar = (scalar_fn)(uintptr_t)s;
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
    {"init", f_init, METH_VARARGS, "init(launch, wait, arg_scalar, ndarray)"},
    {"spec", f_spec, METH_VARARGS, "spec(kernel, kinds, dtypes, outs)"},
    {"capsule", f_capsule, METH_VARARGS, "capsule(dlmanagedtensor)"},
    {"set_calls", f_set_calls, METH_VARARGS,
     "set_calls(current_queue, raise_status)"},
    {"set_default", f_set_default, METH_O, "set_default(None)"},
    {"enter", f_enter, METH_O, "enter(1 or -1)"},
    {"set_scalar_types", f_set_scalar_types, METH_O,
     "set_scalar_types({numpy scalar type: xpj_scalar})"},
    {"key", f_key, METH_VARARGS, "key(args, queue)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fast(void) {
  s_hv = PyUnicode_InternFromString("_hv");
  s_dv = PyUnicode_InternFromString("_dv");
  s_ptr = PyUnicode_InternFromString("_ptr"); /* ndarray.ptr's value */
  s_shape = PyUnicode_InternFromString("shape");
  s_strides = PyUnicode_InternFromString("strides");
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
  return m;
}
