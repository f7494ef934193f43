"""xpjit.ndarray: an array in memory of an xpjit device, and the ways
arrays come in and go out: NumPy (copies; zero-copy views on the CPU
device), DLPack both ways (zero-copy), and foreign device memory
(xpj_mem_import)."""
import ctypes
import math
import operator
import os
import threading

import numpy as np

from . import _lib, _sycl
from ._accel import _fast
from ._dtypes import scalar_name, scalar_value, short
from ._errors import InvalidArgumentError, UnsupportedError, check
from ._runtime import Device, Queue, get_device, _Owner

# ---- memory ---------------------------------------------------------------


class _Allocation(_Owner):
    """Memory of a device from xpj_mem_alloc, freed with the last array
    that uses it (after the commands that use it: the library defers)."""

    def __init__(self, device, nbytes, kind):
        self.device = device
        p = ctypes.c_void_p()
        check(_lib.mem_alloc(device.handle, kind, max(int(nbytes), 1), 0,
                             ctypes.byref(p)))
        self.ptr = p.value
        self.nbytes = int(nbytes)
        self.kind = kind
        device._ctx._use()  # the context lives until this is freed

    def __del__(self):
        _let_go(self)


def _let_go(mem):
    """xpj_mem_free of an allocation or import, then the context's hold."""
    p, mem.ptr = getattr(mem, "ptr", None), None
    if not p or _lib is None or _lib.mem_free is None:
        return
    try:
        _lib.mem_free(mem.device._h, p)
        mem.device._ctx._unuse()
    except Exception:  # interpreter shutdown
        pass


class _Import(_Owner):
    """Memory another library owns, registered with the device for as
    long as an array uses it (xpj_mem_import; owner kept alive)."""

    def __init__(self, device, ptr, nbytes, kind, owner):
        self.device, self.ptr, self.owner = device, None, owner
        self.kind = kind
        check(_lib.mem_import(device.handle, ptr, max(int(nbytes), 1), kind))
        self.ptr = ptr
        device._ctx._use()

    def __del__(self):
        _let_go(self)


_KINDS = {"device": _lib.MEM_DEVICE, "host": _lib.MEM_HOST,
          "shared": _lib.MEM_SHARED}


# ---- imports of another library's memory, shared -------------------------
#
# Memory of another library is imported (xpj_mem_import) once per xpjit
# device and range, however many arrays, views and arguments use it (two
# imports of one range overlap, which the library refuses): counted here,
# let go with the last array that uses it. A USM allocation is imported
# whole (the base and size the driver reports); memory of a
# __cuda_array_interface__ or a CUDA DLPack tensor as the range the array
# reaches, which a later array inside it shares. The owners (the objects
# whose interface gave the memory) are kept by the arrays themselves, so
# that one of them lives while the import does.

_imports = {}  # (device handle, base) -> [_Import, arrays using it, end]
_imports_lock = threading.RLock()  # RLock: a release may run in an acquire


def _import_acquire(device, base, size, kind, first, last, what):
    """The key of the import of [base, base + size) on device, shared with
    the arrays using it already, for an array reaching [first, last); one
    imported before that holds [first, last) is shared too. None where
    xpjit has the range already (its own allocation, exported: the owner
    keeps it)."""
    dv = device._h.value
    with _imports_lock:
        key = (dv, base)
        e = _imports.get(key)
        if e is None or e[2] < last:
            e = None
            for k, v in _imports.items():
                if k[0] == dv and k[1] <= first and last <= v[2]:
                    key, e = k, v
                    break
        if e is not None:
            e[1] += 1
            # a collection between the get and the count may have let the
            # last other array go (its release runs here, the lock being
            # reentrant): then the entry is dead, import anew
            if _imports.get(key) is e:
                return key
            key = (dv, base)
        b, n = ctypes.c_void_p(), ctypes.c_size_t()
        if _lib.mem_query(device.handle, first, ctypes.byref(b),
                          ctypes.byref(n), None) == 0:
            if b.value <= first and last <= b.value + n.value:
                return None
            raise InvalidArgumentError(
                "%s: bytes [%#x, %#x) overlap memory %s has registered "
                "otherwise ([%#x, %#x))" % (
                    what, first, last, device.id, b.value,
                    b.value + n.value))
        _imports[key] = [_Import(device, base, size, kind, None), 1,
                         base + max(int(size), 1)]
        return key


def _imports_after_fork():
    """In a child: the parent's imports are not its own (the library
    refuses them there); a later import of the same range is made anew."""
    global _imports_lock
    _imports_lock = threading.RLock()
    _imports.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_imports_after_fork)


def _import_release(key):
    with _imports_lock:
        e = _imports.get(key)
        if e is None:
            return
        e[1] -= 1
        if e[1] == 0:
            del _imports[key]
            _let_go(e[0])  # under the lock: a new import of it waits


class _Imported(_Owner):
    """Memory under xpjit.ndarrays that holds a shared import (key, in
    _imports): let go with the last of them."""

    def __del__(self):
        key, self.key = getattr(self, "key", None), None
        if key is not None and _import_release is not None:
            try:
                _import_release(key)
            except Exception:  # interpreter shutdown
                pass


class _Foreign(_Imported):
    """Device memory of another library (a __cuda_array_interface__, a
    CUDA DLPack tensor) under xpjit.ndarrays: its owner kept alive, the
    import it needs (shared), and whether the interface says read-only."""

    host = False

    def __init__(self, owner, key, kind, readonly=False):
        self.owner, self.key, self.kind = owner, key, kind
        self.readonly = readonly


# ---- SYCL USM (dpctl's __sycl_usm_array_interface__) ----------------------
# A USM allocation is imported whole, shared as above.


class _UsmMemory(_Imported):
    """dpctl's memory under xpjit.ndarrays: its owner (the object whose
    __sycl_usm_array_interface__ gave it) kept alive, the import it needs
    (shared), and the interface's syclobj and read-only flag, which the
    arrays export again. Launches that use it end before they return, as
    with NumPy's memory: the protocol has no stream, dpctl may use the
    memory as soon as the call is done."""

    host = True

    def __init__(self, owner, key, syclobj, readonly):
        self.owner, self.key = owner, key
        self.syclobj, self.readonly = syclobj, readonly



def _check_extent(who, ptr, shape, strides, dtype):
    """InvalidArgumentError for a foreign array's shape that is negative,
    of more dimensions than xpjit's arrays have, or whose elements or
    bytes are too many (2**62 bytes, as ndarray's) or run past the end of
    the address space: what the import would otherwise have been given
    wrapped (a shape of 2**64 was "size is 0")."""
    if len(shape) > _lib.MAX_RANK or any(n < 0 for n in shape):
        raise InvalidArgumentError("%s: bad shape %r (at most %d dimensions, "
                                   "none negative)" % (who, shape,
                                                       _lib.MAX_RANK))
    if 0 in shape:
        return
    lo, hi = _span(shape, strides)
    big = 1 << 62
    if math.prod(shape) * dtype.itemsize >= big or hi - lo >= big:
        raise InvalidArgumentError(
            "%s: shape %r (strides %r) of %s is too large: it reaches 2**62 "
            "bytes or more" % (who, tuple(short(n) for n in shape),
                               tuple(short(v) for v in strides), dtype))
    if ptr + lo < 0 or ptr + hi + dtype.itemsize > 1 << 64:
        raise InvalidArgumentError(
            "%s: data %#x with shape %r and strides %r runs outside the "
            "address space" % (who, ptr, shape, strides))


def _device_arg(device, who):
    """device= as a Device: None stays None, a str is a device filter of
    the default context ("opencl:cpu", as Queue and dpctl take it; it was
    an AttributeError of str)."""
    if device is None or isinstance(device, Device):
        return device
    if isinstance(device, str):
        return Device(device)
    raise InvalidArgumentError("%s: device= takes an xpjit.Device or a "
                               "device filter such as \"opencl:cpu\", not %s"
                               % (who, type(device).__name__))


def _queue_arg(queue, who):
    if queue is not None and not isinstance(queue, Queue):
        raise InvalidArgumentError("%s: queue= takes an xpjit.Queue, not %s"
                                   % (who, type(queue).__name__))
    return queue


def _c_strides(shape, itemsize):
    st, s = [], itemsize
    for n in reversed(shape):
        st.append(s)
        s *= max(n, 1)
    return tuple(reversed(st))


def _span(shape, strides):
    """(lowest, highest) byte offsets of the elements from element 0."""
    lo = hi = 0
    for n, s in zip(shape, strides):
        if n == 0:
            return 0, -1
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi


def _contiguous(shape, strides, itemsize, fortran=False):
    """NumPy's rule: the elements lie one after another in C (or Fortran)
    order; the stride of an axis of extent 1 is never used, and an empty
    array is contiguous either way."""
    if 0 in shape:
        return True
    want = itemsize
    dims = zip(shape, strides) if fortran else zip(reversed(shape),
                                                   reversed(strides))
    for n, st in dims:
        if n != 1:
            if st != want:
                return False
            want *= n
    return True


class _Flags(dict):
    """ndarray.flags: NumPy's keys (flags["C_CONTIGUOUS"], "F_CONTIGUOUS",
    "WRITEABLE") and attributes (flags.c_contiguous, ...), read-only."""

    _SHORT = {"C": "C_CONTIGUOUS", "CONTIGUOUS": "C_CONTIGUOUS",
              "F": "F_CONTIGUOUS", "FORTRAN": "F_CONTIGUOUS",
              "W": "WRITEABLE"}

    def __getitem__(self, key):
        return dict.__getitem__(self, self._SHORT.get(key, key))

    def __getattr__(self, name):
        try:
            return dict.__getitem__(self, name.upper())
        except KeyError:
            raise AttributeError("flags have no %r" % name) from None


def _not_numpy(what):
    """The TypeError of NumPy's functions, ufuncs and operators given an
    xpjit.ndarray: nothing converts it implicitly (as with CuPy), so that
    nothing answers with a silently wrong value (np.array_equal caught the
    conversion's TypeError and said False)."""
    return TypeError(
        "%s: an xpjit.ndarray is memory of a device, not a NumPy array, and "
        "has no NumPy functions, ufuncs or operators; use .get() for a NumPy "
        "copy (or an ElementwiseKernel or ReductionKernel on the device)"
        % what)


_SYMBOLS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">",
            "ge": ">=", "neg": "unary -", "pos": "unary +", "abs": "abs()",
            "invert": "~", "add": "+", "sub": "-", "mul": "*", "matmul": "@",
            "truediv": "/", "floordiv": "//", "mod": "%", "divmod": "divmod()",
            "pow": "**", "lshift": "<<", "rshift": ">>", "and": "&",
            "or": "|", "xor": "^"}


def _operator(name, inplace=False):
    what = "operator %s%s" % (_SYMBOLS[name], "=" if inplace else "")

    def op(self, *other):
        raise _not_numpy(what)
    op.__name__ = "__%s__" % name
    return op


class ndarray:
    """An n-dimensional array in memory of an xpjit device: shape, dtype,
    strides in bytes (NumPy's convention, negative and zero allowed) and
    the address of element 0. Basic indexing (slices, integers, ...,
    None) gives views; .get() copies to NumPy."""

    @property
    def ptr(self):
        """The address of element 0 (read-only: launches trust it to lie in
        the array's memory)."""
        return self._ptr

    def __init__(self, shape, dtype=np.float32, device=None, kind=None,
                 strides=None, _mem=None, _ptr=None):
        try:
            self._dtype = np.dtype(dtype)
            scalar_name(self._dtype)  # refuses dtypes xpjit has no type for
        except (TypeError, ValueError) as e:
            raise InvalidArgumentError(str(e)) from None
        try:
            shape = (operator.index(shape),) if np.isscalar(shape) else \
                tuple(operator.index(n) for n in shape)
        except TypeError:
            raise InvalidArgumentError("a shape is ints, not %r"
                                       % (shape,)) from None
        if any(n < 0 for n in shape) or len(shape) > _lib.MAX_RANK:
            raise InvalidArgumentError("bad shape %r (at most %d dimensions,"
                                       " none negative)" % (shape,
                                                            _lib.MAX_RANK))
        if math.prod(shape) * self._dtype.itemsize >= 1 << 62:
            raise InvalidArgumentError("shape %r of %s is too large"
                                       % (shape, self._dtype))
        self._shape = shape
        device = _device_arg(device, "xpjit.ndarray")
        self._device = device if device is not None else get_device()
        if _mem is None:
            nbytes = math.prod(shape) * self.dtype.itemsize
            if kind is None:
                kind = "shared" if self.device.backend == "cpu" else "device"
            if kind not in _KINDS:
                raise InvalidArgumentError("kind must be device, host or "
                                           "shared, not %r" % (kind,))
            _mem = _Allocation(self.device, nbytes, _KINDS[kind])
            _ptr = _mem.ptr
            strides = None
        self._mem = _mem
        # read-only memory of another library (its interface says so):
        # kernels may not write it
        self._readonly = bool(getattr(_mem, "readonly", False))
        self._host = getattr(_mem, "host", False)
        self._ptr = _ptr  # element 0 (read-only: .ptr)
        # for the C launch path (_fast.c): the element type's code and the
        # device's handle
        self._code = _lib.SCALAR[scalar_name(self.dtype)]
        self._dv = self.device._h.value
        self._strides = (_c_strides(shape, self._dtype.itemsize)
                         if strides is None else tuple(int(s) for s in
                                                       strides))

    @property
    def _host(self):
        """Memory another library reads as it likes (NumPy's, through
        DLPack; dpctl's): launches that use it end before the call
        returns."""
        return self._hostmem

    @_host.setter
    def _host(self, host):
        self._hostmem = bool(host)
        # _sync, read by the C launch path as a plain attribute: 0 xpjit's
        # memory (launches may stay asynchronous); 1 memory another library
        # reads as it likes; 2 what the slow path must judge: device memory
        # of another library (it keeps the owner alive until the launch is
        # done), read-only memory (it refuses it as an output)
        self._sync = 2 if self._readonly else 1 if host else (
            0 if isinstance(self._mem, _Allocation) else 2)

    # -- NumPy-like attributes, read-only: launches trust them to describe
    # the memory (a shape set larger made a kernel write past its end;
    # another dtype or device, memory read as what it is not). reshape(),
    # views and .view-like copies give arrays of other shapes.
    shape = property(lambda s: s._shape, doc="the extents (a tuple)")
    strides = property(lambda s: s._strides,
                       doc="bytes between elements, per axis (a tuple)")
    dtype = property(lambda s: s._dtype, doc="the element type")
    device = property(lambda s: s._device,
                      doc="the xpjit.Device the memory is of")
    ndim = property(lambda s: len(s.shape))
    size = property(lambda s: math.prod(s.shape))
    itemsize = property(lambda s: s.dtype.itemsize)
    nbytes = property(lambda s: s.size * s.dtype.itemsize)

    @property
    def flags(self):
        """C_CONTIGUOUS, F_CONTIGUOUS (NumPy's rule: extent-1 axes' strides
        do not count) and WRITEABLE, as keys and as attributes."""
        it = self.itemsize
        return _Flags(C_CONTIGUOUS=_contiguous(self.shape, self.strides, it),
                      F_CONTIGUOUS=_contiguous(self.shape, self.strides, it,
                                               True),
                      WRITEABLE=not self._readonly)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):
        # (without it Python iterates by indexing until IndexError, and a
        # 0-d array, which NumPy's indexing refuses so, was empty)
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __contains__(self, value):
        raise _not_numpy("'in'")

    # -- NumPy's protocols: nothing of NumPy's converts it. np.shape,
    # np.ndim, np.size and np.result_type read its attributes; every other
    # function and ufunc raises TypeError (np.array_equal answered False,
    # having caught __array__'s error)
    __array_ufunc__ = None  # NumPy's operators defer to the ones below

    def __array_function__(self, func, types, args, kwargs):
        if func is np.shape and len(args) == 1 and not kwargs:
            return self.shape
        if func is np.ndim and len(args) == 1 and not kwargs:
            return self.ndim
        if func is np.size and args and args[0] is self:
            return np.size(np.broadcast_to(np.empty((), np.uint8),
                                           self.shape), *args[1:], **kwargs)
        if func is np.result_type:
            return np.result_type(*(a.dtype if isinstance(a, ndarray) else a
                                    for a in args), **kwargs)
        raise _not_numpy("NumPy's %s" % getattr(func, "__name__", func))

    for _sym in ("eq", "ne", "lt", "le", "gt", "ge", "neg", "pos", "abs",
                 "invert"):
        locals()["__%s__" % _sym] = _operator(_sym)
    for _sym in ("add", "sub", "mul", "matmul", "truediv", "floordiv",
                 "mod", "divmod", "pow", "lshift", "rshift", "and", "or",
                 "xor"):
        locals()["__%s__" % _sym] = locals()["__r%s__" % _sym] = \
            _operator(_sym)
        if _sym != "divmod":
            locals()["__i%s__" % _sym] = _operator(_sym, True)
    del _sym
    __hash__ = None  # as NumPy's and CuPy's arrays

    # -- one element, as NumPy and CuPy give it (a copy to the host)
    def _item(self, what):
        if self.size != 1:
            raise TypeError("only an array of one element converts to a "
                            "Python %s (this one has %d; .get() gives a "
                            "NumPy copy)" % (what, self.size))
        return self.get().reshape(())[()]

    def __float__(self):
        return float(self._item("float"))

    def __int__(self):
        return int(self._item("int"))

    def __complex__(self):
        return complex(self._item("complex"))

    def __index__(self):
        if self.ndim or self.dtype.kind not in "iu":
            raise TypeError("only a 0-d integer array is an index (this is "
                            "%d-d of %s)" % (self.ndim, self.dtype))
        return int(self._item("int"))

    def __format__(self, spec):
        if self.ndim == 0 and spec:
            return format(self.get()[()], spec)
        return object.__format__(self, spec)

    # -- copies, as NumPy's: copy.copy and copy.deepcopy copy the memory,
    # pickle the values (and the device's id, loaded onto that device of
    # the default context)
    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __reduce__(self):
        return _unpickle, (self.get(), self.device.id)

    def __repr__(self):
        return "xpjit.ndarray(shape=%r, dtype=%s, device=%s)" % (
            self.shape, self.dtype, self.device.id)

    # -- not NumPy: a device array handed to NumPy by mistake (a .get()
    # forgotten) is an error, as with CuPy, not an object array
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion of an xpjit.ndarray to a NumPy "
                        "array is not allowed: use .get() (a copy)")

    def __bool__(self):
        if self.size != 1:
            raise InvalidArgumentError(
                "the truth value of an array of %d elements is ambiguous "
                "(NumPy's rule: a.get().any() or a.get().all())" % self.size)
        return bool(self.get().reshape(()))

    # -- views
    def __getitem__(self, index):
        idx = index if isinstance(index, tuple) else (index,)
        ints = []
        for i in idx:
            if not (i is None or i is Ellipsis or isinstance(i, slice)):
                try:
                    if isinstance(i, (bool, np.bool_)):
                        raise TypeError
                    i = operator.index(i)  # NumPy's 0-d integer arrays too
                except TypeError:
                    raise InvalidArgumentError(
                        "only basic indexing (integers, slices, ..., None) "
                        "makes views of an xpjit.ndarray, not %s"
                        % type(i).__name__) from None
                if not -(1 << 63) <= i < 1 << 63:
                    # (NumPy's OverflowError of a C long, or its "only
                    # integers ..." for an int that is one)
                    raise IndexError("index %s is out of bounds for an "
                                     "array of shape %r" % (short(i),
                                                            self.shape))
            ints.append(i)
        idx = tuple(ints)
        if not any(i is Ellipsis for i in idx):
            idx = idx + (Ellipsis,)  # a view even where all are integers
        # NumPy computes the view (bounds checks included) over a fake
        # array of these strides, every element one byte of a buffer that
        # basic indexing never reads
        fake = np.lib.stride_tricks.as_strided(
            np.zeros(1, np.uint8), shape=self.shape,
            strides=tuple(s // self.itemsize for s in self.strides),
            writeable=False)
        v = fake[idx]
        off = (v.ctypes.data - fake.ctypes.data) * self.itemsize
        out = ndarray(v.shape, self.dtype, self.device,
                      strides=tuple(s * self.itemsize for s in v.strides),
                      _mem=self._mem, _ptr=self.ptr + off)
        out._host = self._host
        return out

    def reshape(self, *shape):
        """A view of another shape (contiguous arrays)."""
        shape = shape[0] if len(shape) == 1 and not np.isscalar(
            shape[0]) else shape
        try:
            # (int() took 2.5 for 2 and raised a bare ValueError for "a")
            shape = tuple(operator.index(n) for n in shape)
        except TypeError:
            raise InvalidArgumentError("reshape: a shape is ints, not %r"
                                       % (shape,)) from None
        if shape.count(-1) > 1 or any(n < -1 for n in shape):
            raise InvalidArgumentError("reshape: %r: one extent at most may "
                                       "be -1 (inferred), none other "
                                       "negative" % (shape,))
        if -1 in shape:
            known = math.prod(n for n in shape if n != -1)
            if known == 0 or self.size % known:
                raise InvalidArgumentError(
                    "cannot reshape an array of %d elements to %r"
                    % (self.size, shape))
            shape = tuple(self.size // known if n == -1 else n
                          for n in shape)
        if math.prod(shape) != self.size:
            raise InvalidArgumentError("cannot reshape %r to %r"
                                       % (self.shape, shape))
        if not self.flags["C_CONTIGUOUS"]:
            raise InvalidArgumentError("reshape needs a contiguous array")
        out = ndarray(shape, self.dtype, self.device, _mem=self._mem,
                      _ptr=self.ptr)
        out._host = self._host
        return out

    @property
    def T(self):
        return self.transpose()

    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and (
            axes[0] is None or not np.isscalar(axes[0])) else axes
        nd, given = self.ndim, axes
        try:
            axes = tuple(operator.index(a) for a in axes) if axes else \
                tuple(reversed(range(nd)))
        except TypeError:
            axes = None
        # negative axes count from the end, as NumPy's
        if axes is None or any(not -nd <= a < nd for a in axes) or \
                sorted(a % nd for a in axes) != list(range(nd)):
            raise InvalidArgumentError("axes %r do not permute %d dimensions"
                                       % (given, nd))
        axes = tuple(a % nd for a in axes)
        out = ndarray(tuple(self.shape[a] for a in axes), self.dtype,
                      self.device, strides=tuple(self.strides[a]
                                                 for a in axes),
                      _mem=self._mem, _ptr=self.ptr)
        out._host = self._host
        return out

    # -- copies
    def _writable(self, what):
        if self._readonly:
            raise InvalidArgumentError("%s: the array is read-only (its "
                                       "owner's interface says so)" % what)

    def _queue(self, queue):
        q = _queue_arg(queue, "xpjit.ndarray")
        q = q if q is not None else self.device.queue
        if q.device != self.device:
            raise InvalidArgumentError("the queue is of %s, the array of %s"
                                       % (q.device.id, self.device.id))
        return q

    def get(self, queue=None):
        """A NumPy copy, after the queue's work so far."""
        q = self._queue(queue)
        out = np.empty(self.shape, self.dtype)
        if self.size == 0:
            return out
        lo, hi = _span(self.shape, self.strides)
        host = np.empty(hi - lo + self.itemsize, np.uint8)
        with q._guard as h:
            check(_lib.enqueue_copy(h, host.ctypes.data, self.ptr + lo,
                                    host.nbytes, None))
        q.wait()
        out[...] = np.lib.stride_tricks.as_strided(
            host[-lo:].view(self.dtype) if lo else host.view(self.dtype),
            shape=self.shape, strides=self.strides)
        return out

    copy_to_host = get

    def set(self, arr, queue=None):
        """Copies a NumPy array of this shape and dtype into this contiguous
        array. As CuPy's and PyOpenCL's set(), nothing is converted: another
        dtype, or anything but a NumPy array or scalar, is a TypeError
        (convert it first: arr.astype(d.dtype)); it was cast silently,
        floats wrapping into integers."""
        q = self._queue(queue)
        self._writable("set()")
        if isinstance(arr, np.generic):
            arr = np.asarray(arr)
        if not isinstance(arr, np.ndarray):
            raise TypeError("set() takes a NumPy array of %s, not %s (make "
                            "one with np.asarray(x, np.%s), which converts "
                            "as NumPy does)" % (self.dtype,
                                                type(arr).__name__,
                                                self.dtype.name))
        if arr.dtype != self.dtype:
            raise TypeError("set(): an array of %s cannot be set to an array "
                            "of %s (convert it first: x.astype(np.%s))"
                            % (arr.dtype, self.dtype, self.dtype.name))
        # (np.ascontiguousarray would make a 0-d array 1-d)
        a = np.require(arr, requirements="C")
        if a.shape != self.shape:
            raise InvalidArgumentError("shape %r does not match the array's "
                                       "%r" % (a.shape, self.shape))
        if not self.flags["C_CONTIGUOUS"]:
            raise InvalidArgumentError("set() needs a contiguous array")
        if a.nbytes:
            with q._guard as h:
                check(_lib.enqueue_copy(h, self.ptr, a.ctypes.data, a.nbytes,
                                        None))
            q.wait()
        return self

    def fill(self, value, queue=None):
        """Sets every element of this contiguous array to value, which is
        converted as a kernel's scalar argument is (out of the element
        type's range: InvalidArgumentError)."""
        q = self._queue(queue)
        self._writable("fill()")
        if not self.flags["C_CONTIGUOUS"]:
            raise InvalidArgumentError("fill() needs a contiguous array")
        v = scalar_value(scalar_name(self.dtype), value,
                         "fill(): an element of this array")
        with np.errstate(over="ignore"):  # a float beyond f16: inf
            pat = np.array(v, self.dtype)
        if self.nbytes:
            with q._guard as h:
                check(_lib.enqueue_fill(h, self.ptr, pat.ctypes.data,
                                        pat.itemsize, self.nbytes, None))
        return self

    def copy(self, queue=None):
        return asarray(self.get(queue), device=self.device, queue=queue)

    # -- interchange
    def __dlpack_device__(self):
        return _dl_device(self.device)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None,
                   copy=None):
        if stream is not None and (isinstance(stream, bool) or
                                   not isinstance(stream, int)):
            # (the DLPack standard: an int or None)
            raise TypeError("__dlpack__: stream is an int or None, not %r"
                            % (stream,))
        if copy:
            raise BufferError("xpjit.ndarray.__dlpack__ does not copy")
        if dl_device is not None and tuple(dl_device) != _dl_device(
                self.device):
            raise BufferError("the array is on %s" % self.device.id)
        # what was queued so far must be done before another library reads
        self.device.synchronize()
        return _export(self)

    @property
    def __cuda_array_interface__(self):
        if self.device.backend != "cuda":
            raise AttributeError("__cuda_array_interface__: the array is on "
                                 "%s" % self.device.id)
        # "stream": None tells the consumer nothing is left to wait for:
        # xpjit's streams have no order with its own, so finish them first
        self.device.synchronize()
        return {"shape": self.shape, "typestr": self.dtype.str,
                "data": (self.ptr, False), "version": 3,
                "strides": None if self.flags["C_CONTIGUOUS"]
                else self.strides, "stream": None}

    @property
    def __sycl_usm_array_interface__(self):
        """dpctl's interface (version 1) of an array in SYCL USM: memory of
        an OpenCL device (syclobj: a dpctl.SyclQueue on xpjit's own
        cl_context) or memory that came from dpctl (its own syclobj
        again). AttributeError elsewhere (the CPU device's memory is not
        USM: use DLPack) and when dpctl cannot be imported."""
        try:
            return _suai_export(self)
        except (InvalidArgumentError, UnsupportedError) as e:
            # not USM, or no dpctl: no such attribute (hasattr says False);
            # an error of the work it waited for (DeviceError) is raised
            raise AttributeError("__sycl_usm_array_interface__: %s" % e) \
                from None


def _unpickle(values, device_id):
    from ._runtime import get_context
    return asarray(values, device=get_context().device(device_id))


def empty(shape, dtype=np.float32, device=None, kind=None):
    """An uninitialised array on device (the current device)."""
    return ndarray(shape, dtype, device, kind)


def zeros(shape, dtype=np.float32, device=None, kind=None, queue=None):
    """An array of zeros on device, ready when it returns (for any queue)."""
    a = ndarray(shape, dtype, device, kind)
    a.fill(0, queue)
    a._queue(queue).wait()
    return a


def asarray(obj, dtype=None, device=None, queue=None):
    """obj as an xpjit.ndarray on device (the current device, or the
    queue's): an ndarray of that device and dtype as it is, an object with
    __sycl_usm_array_interface__ (dpctl's) without a copy where device can
    use its memory (else InvalidArgumentError saying why), anything else
    copied from np.asarray(obj)."""
    device = _device_arg(device, "asarray")
    if _queue_arg(queue, "asarray") is not None:
        if device is not None and device != queue.device:
            # (the queue's device won, silently)
            raise InvalidArgumentError("asarray: device %s and the queue's "
                                       "device %s differ" % (
                                           device.id, queue.device.id))
        device = queue.device
    if device is None:
        device = obj.device if isinstance(obj, ndarray) else get_device()
    if _has_suai(obj):
        # dpctl's USM: the same memory where device can use it
        obj = from_sycl_usm_array_interface(obj, device=device)
    if isinstance(obj, ndarray) and obj.device == device and (
            dtype is None or np.dtype(dtype) == obj.dtype):
        return obj
    if isinstance(obj, ndarray):
        obj = obj.get()
    a = np.asarray(obj, dtype=dtype)
    out = ndarray(a.shape, a.dtype, device)
    return out.set(a, queue)


# ---- DLPack ------------------------------------------------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice),
                ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor),
                             ("manager_ctx", ctypes.c_void_p),
                             ("deleter", _DELETER)]

_DL_CPU, _DL_CUDA, _DL_ONEAPI = 1, 2, 14
_DL_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}


def _dl_device(dev):
    if dev.backend == "cpu":
        return (_DL_CPU, 0)
    if dev.backend == "cuda":
        return (_DL_CUDA, dev._info.index)
    return (_DL_ONEAPI, dev._info.index)


_exported = {}  # manager_ctx -> what the exported tensor keeps alive
_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                               ctypes.c_void_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
# the capsule destructor gets a bare pointer: these take one (new function
# objects: pythonapi's attributes are shared with everyone)
_cap_valid = ctypes.pythonapi["PyCapsule_IsValid"]
_cap_valid.restype = ctypes.c_int
_cap_valid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_cap_pointer = ctypes.pythonapi["PyCapsule_GetPointer"]
_cap_pointer.restype = ctypes.c_void_p
_cap_pointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


@_DELETER
def _deleter(mt):
    _exported.pop(mt.contents.manager_ctx, None)


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@_CAPSULE_DESTRUCTOR
def _capsule_destructor(cap):
    # a capsule never consumed ("dltensor" still its name) frees its tensor
    if _cap_valid(cap, b"dltensor"):
        mt = ctypes.cast(_cap_pointer(cap, b"dltensor"),
                         ctypes.POINTER(_DLManagedTensor))
        mt.contents.deleter(mt)


def _export(a):
    kind = a.dtype.kind
    code = _DL_CODES.get(kind)
    if code is None:
        raise BufferError("dtype %s has no DLPack type" % a.dtype)
    mt = _DLManagedTensor()
    shape = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
    strides = (ctypes.c_int64 * max(a.ndim, 1))(
        *(s // a.itemsize for s in a.strides))
    t = mt.dl_tensor
    t.data = a.ptr
    t.device = _DLDevice(*_dl_device(a.device))
    t.ndim = a.ndim
    t.dtype = _DLDataType(code, 8 * a.itemsize, 1)
    t.shape = shape
    t.strides = strides
    t.byte_offset = 0
    key = ctypes.addressof(mt)
    mt.manager_ctx = key
    mt.deleter = _deleter
    _exported[key] = (mt, shape, strides, a)
    if _fast is not None:  # a destructor that keeps a pending exception
        return _fast.capsule(key)
    return _api.PyCapsule_New(key, b"dltensor", ctypes.cast(
        _capsule_destructor, ctypes.c_void_p))


class _DLOwner(_Owner):
    """Holds a consumed DLPack tensor; calls its deleter when dropped."""

    def __init__(self, capsule, mt_ptr, source):
        self.capsule, self.mt, self.source = capsule, mt_ptr, source

    def __del__(self):
        mt, self.mt = getattr(self, "mt", None), None
        if mt and mt.contents.deleter:
            mt.contents.deleter(mt)


def from_dlpack(obj, device=None):
    """An xpjit.ndarray sharing the memory of obj (anything with
    __dlpack__: NumPy arrays, PyTorch tensors, another xpjit.ndarray), on
    the xpjit device of obj's DLPack device (CPU memory: the CPU device;
    CUDA device n: the device cuda:n, the memory imported)."""
    device = _device_arg(device, "from_dlpack")
    if _has_suai(obj):
        # dpctl's arrays: DLPack's oneAPI device says nothing of the SYCL
        # context; their USM interface does
        return from_sycl_usm_array_interface(obj, device=device)
    if not hasattr(obj, "__dlpack__"):
        raise InvalidArgumentError("%s has no __dlpack__" % type(obj).__name__)
    # the device first: CUDA memory is for its own CUDA device only. A CUDA
    # producer (CuPy, PyTorch) then orders its work before the legacy
    # default stream, which xpjit waits for: xpjit's own streams have no
    # order with the producer's (DLPack's stream argument)
    said = None
    try:
        said = tuple(int(v) for v in obj.__dlpack_device__())[:2]
    except Exception:  # no __dlpack_device__: the capsule says it below
        pass
    if said is not None:
        device = _dl_target(said, device)
    stream = 1 if said is not None and said[0] == _DL_CUDA else None
    try:
        cap = obj.__dlpack__() if stream is None else obj.__dlpack__(
            stream=stream)
        p = _api.PyCapsule_GetPointer(cap, b"dltensor")
    except (ValueError, TypeError, ctypes.ArgumentError, BufferError) as e:
        raise InvalidArgumentError("%s.__dlpack__ gave no DLPack tensor "
                                   "(a capsule named dltensor, not yet "
                                   "consumed): %s" % (type(obj).__name__,
                                                      e)) from None
    if not p:
        raise InvalidArgumentError("__dlpack__ gave no DLPack tensor")
    _api.PyCapsule_SetName(cap, b"used_dltensor")
    mt = ctypes.cast(p, ctypes.POINTER(_DLManagedTensor))
    owner = _DLOwner(cap, mt, obj)
    t = mt.contents.dl_tensor
    dt, lanes = t.dtype, t.dtype.lanes
    kind = {0: "i", 1: "u", 2: "f", 6: "b"}.get(dt.code)
    if kind is None or lanes != 1:
        raise InvalidArgumentError("DLPack dtype code %d bits %d lanes %d "
                                   "has no xpjit type" % (dt.code, dt.bits,
                                                          lanes))
    dtype = np.dtype("?" if kind == "b" else "%s%d" % (kind, dt.bits // 8))
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if t.strides:
        strides = tuple(t.strides[i] * dtype.itemsize for i in range(t.ndim))
    else:
        strides = _c_strides(shape, dtype.itemsize)
    ptr = (t.data or 0) + t.byte_offset
    dtype_dev = (t.device.device_type, t.device.device_id)
    if said is None:
        device = _dl_target(dtype_dev, device)
    elif dtype_dev != said:
        raise InvalidArgumentError(
            "from_dlpack: %s's tensor is on DLPack device %s, its "
            "__dlpack_device__ said %s" % (type(obj).__name__, dtype_dev,
                                           said))
    mem = owner
    if dtype_dev[0] not in (_DL_CPU, 3):
        if stream is not None:
            device.wait_native(stream)
        lo, hi = _span(shape, strides)
        if hi >= lo:
            first, last = ptr + lo, ptr + hi + dtype.itemsize
            mem = _Foreign(owner, _import_acquire(
                device, first, last - first, _lib.MEM_DEVICE, first, last,
                "DLPack"), _lib.MEM_DEVICE)
    out = ndarray(shape, dtype, device, strides=strides, _mem=mem, _ptr=ptr)
    # host memory another library reads as it likes (NumPy's): launches
    # that use it return when done, as with NumPy arrays themselves
    out._host = dtype_dev[0] in (_DL_CPU, 3)
    return out


def from_cuda_array_interface(obj, device=None):
    """An xpjit.ndarray sharing the memory of obj's
    __cuda_array_interface__ (version 2 or 3: Numba's and CuPy's device
    arrays), on device (default: the CUDA device cuda:0). The memory is
    imported (xpj_mem_import) for as long as the array lives, obj kept
    alive. A stream in the interface (version 3) is waited for first: its
    work, such as what wrote the array, has no order with xpjit's."""
    device = _device_arg(device, "from_cuda_array_interface")
    cai = getattr(obj, "__cuda_array_interface__", None)
    if not isinstance(cai, dict):
        raise InvalidArgumentError("%s has no __cuda_array_interface__"
                                   % type(obj).__name__)
    try:
        ptr, readonly = cai["data"]
        if isinstance(ptr, bool) or not isinstance(ptr, int) or \
                not 0 <= ptr < 1 << 64:
            raise TypeError("data[0] %r is no address" % (ptr,))
        shape = tuple(int(n) for n in cai["shape"])
        dtype = np.dtype(cai["typestr"])
        strides = cai.get("strides")
        strides = (_c_strides(shape, dtype.itemsize) if strides is None
                   else tuple(int(v) for v in strides))
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidArgumentError("a malformed __cuda_array_interface__: "
                                   "%s" % e) from None
    if len(strides) != len(shape):
        raise InvalidArgumentError("__cuda_array_interface__: %d strides "
                                   "for %d dimensions" % (len(strides),
                                                          len(shape)))
    _check_extent("__cuda_array_interface__", ptr, shape, strides, dtype)
    stream = cai.get("stream")
    if stream is not None and (isinstance(stream, bool) or
                               not isinstance(stream, int) or stream <= 0):
        # 0 is ambiguous by the interface's rules: refused, as CuPy does
        raise InvalidArgumentError("__cuda_array_interface__: stream %r is "
                                   "not a CUDA stream handle" % (stream,))
    if device is None:
        from ._runtime import get_context
        device = get_context().device("cuda:0")
    if device.backend == "cpu":
        # memory the host reads (managed or pinned): the caller's word;
        # a CUDA stream cannot be waited for without a CUDA device
        if stream is not None:
            raise InvalidArgumentError(
                "__cuda_array_interface__: the producer's stream %r cannot "
                "be waited for on %s (give the array to its CUDA device)"
                % (stream, device.id))
    elif device.backend != "cuda":
        raise InvalidArgumentError("__cuda_array_interface__: CUDA memory "
                                   "is not for %s" % device.id)
    elif stream is not None:
        device.wait_native(stream)
    lo, hi = _span(shape, strides)
    if hi < lo:  # empty: nothing to import
        return ndarray(shape, dtype, device)
    if not ptr:
        # (it was taken for an empty array: a new, uninitialised one came
        # back, not the object's memory)
        raise InvalidArgumentError("__cuda_array_interface__: data is NULL "
                                   "for %d elements" % math.prod(shape))
    first, last = ptr + lo, ptr + hi + dtype.itemsize
    mem = _Foreign(obj, _import_acquire(device, first, last - first,
                                        _lib.MEM_DEVICE, first, last,
                                        "__cuda_array_interface__"),
                   _lib.MEM_DEVICE, bool(readonly))
    return ndarray(shape, dtype, device, strides=strides, _mem=mem,
                   _ptr=ptr)


def from_sycl_usm_array_interface(obj, device=None):
    """An xpjit.ndarray sharing the memory of obj's
    __sycl_usm_array_interface__ (version 1: dpctl's arrays and USM
    memory), obj kept alive, without a copy. The interface's queue (its
    syclobj, when a SyclQueue) is waited for first: the protocol has no
    stream. device (default: the OpenCL device that is dpctl's, else the
    CPU device) must be able to use the memory: the CPU device takes
    host-accessible USM (host or shared, and any USM of a SYCL CPU
    device); an OpenCL device USM of its own cl_device_id, in xpjit's own
    cl_context or, on a CPU device (where USM is host memory), in another.
    Anything else is an InvalidArgumentError that says why; launches that
    use the array end before they return."""
    device = _device_arg(device, "from_sycl_usm_array_interface")
    s = _sycl.parse(obj)
    q, ctx, devs = _sycl.syclobj(s.syclobj)
    if q is not None:
        q.wait()
    if math.prod(s.shape) == 0:  # nothing to share
        from ._runtime import get_context
        out = ndarray(s.shape, s.dtype, device or get_context().device(
            "cpu"))
        out._readonly = s.readonly
        out._host = True
        return out
    u = _sycl.usm_info(ctx, devs, s.first, s.last)
    if device is None:
        device = _suai_device(u)
    else:
        why = _suai_refusal(device, u)
        if why:
            raise InvalidArgumentError("__sycl_usm_array_interface__: %s "
                                       "cannot use this memory: %s"
                                       % (device.id, why))
    key = None
    if u.base is not None:
        key = _import_acquire(device, u.base, u.size, _KINDS[u.kind],
                              s.first, s.last,
                              "__sycl_usm_array_interface__")
    mem = _UsmMemory(obj, key, s.syclobj, s.readonly)
    return ndarray(s.shape, s.dtype, device, strides=s.strides, _mem=mem,
                   _ptr=s.ptr)


def _has_suai(obj):
    """Whether obj (not an xpjit.ndarray) offers the interface; one whose
    property raises too, for from_sycl_usm_array_interface to say so."""
    if isinstance(obj, ndarray):
        return False
    try:
        return hasattr(obj, "__sycl_usm_array_interface__")
    except Exception:
        return True


def _suai_refusal(device, u):
    """Why device cannot use the USM u describes, or None."""
    b = device.backend
    if b == "cpu":
        if u.host_ok:
            return None
        return ("it is device USM of a SYCL GPU or accelerator, which the "
                "host cannot read")
    if b != "opencl":
        return "xpjit takes SYCL USM on its CPU and OpenCL devices only"
    if u.cl_context is None:
        return ("it is USM of a SYCL device of another backend than "
                "OpenCL")
    mine = device._native(_lib.NATIVE_DEVICE)
    if u.cl_device is not None and u.cl_device != mine:
        return ("it is USM of another OpenCL device (cl_device_id %#x, "
                "%s's is %#x)" % (u.cl_device, device.id, mine))
    if u.cl_device is None and mine not in _sycl.context_devices(
            u.cl_context.handle):
        return "it is host USM of an OpenCL context without %s" % device.id
    if u.cl_context.handle == device._native(_lib.NATIVE_CONTEXT):
        return None
    if device.device_type == "cpu":
        return None  # a CPU device's USM is host memory, in any context
    return ("it is USM of another OpenCL context than xpjit's (dpctl's), "
            "which is not valid in xpjit's on a %s" % device.device_type)


def _suai_device(u):
    """The first device of the default context that can use u: the
    OpenCL device u is of, else the CPU device."""
    from ._runtime import get_context
    ctx = get_context()
    cands = []
    if u.cl_context is not None:
        cands += ctx.devices("opencl")
    cands += ctx.devices("cpu")
    whys = []
    for d in cands:
        why = _suai_refusal(d, u)
        if why is None:
            return d
        whys.append("%s: %s" % (d.id, why))
    raise InvalidArgumentError("__sycl_usm_array_interface__: no device "
                               "of xpjit's context can use this memory (%s)"
                               % "; ".join(whys or ["no CPU or OpenCL "
                                                    "device is visible"]))


def _suai_export(a):
    mem = a._mem
    it = a.itemsize
    if a.size:
        lo, _ = _span(a.shape, a.strides)
    else:
        lo = 0
    first = a.ptr + lo
    if isinstance(mem, _UsmMemory):
        syclobj = mem.syclobj  # checked when it came in
    elif a.device.backend == "opencl" and isinstance(mem, _Allocation):
        if _sycl.exported_usm(a.device, first) is None:
            raise InvalidArgumentError("the memory of %s is not USM (SVM)"
                                       % a.device.id)
        syclobj = _sycl.queue_of(a.device)
    else:
        raise InvalidArgumentError(
            "the array is in memory of %s, not SYCL USM (DLPack gives it)"
            % a.device.id)
    # what was queued so far must be done before dpctl uses it
    a.device.synchronize()
    return {"data": (first, a._readonly), "shape": a.shape,
            "strides": tuple(st // it for st in a.strides),
            "offset": -lo // it, "typestr": a.dtype.str, "version": 1,
            "syclobj": syclobj}


def _dl_target(dl_dev, device):
    """The device DLPack memory of dl_dev (type, id) goes to: device when
    given and able to use it, else the one _device_for finds."""
    if device is None:
        return _device_for(dl_dev)
    kind, index = dl_dev
    if kind in (_DL_CPU, 3) and device.backend != "cpu":
        raise InvalidArgumentError(
            "from_dlpack: host memory is for the CPU device, not %s (copy "
            "it with xpjit.asarray)" % device.id)
    if kind == _DL_CUDA and (device.backend != "cuda" or
                             device._info.index != index):
        raise InvalidArgumentError(
            "from_dlpack: memory of CUDA device %d is not for %s (copy it "
            "through the host)" % (index, device.id))
    return device


def _device_for(dl_dev):
    from ._runtime import get_context
    kind, index = dl_dev
    ctx = get_context()
    if kind in (_DL_CPU, 3):
        return ctx.device("cpu")
    if kind == _DL_CUDA:
        return ctx.device("cuda:%d" % index)
    raise InvalidArgumentError("DLPack device type %d has no xpjit device "
                               "here (give device=)" % kind)
