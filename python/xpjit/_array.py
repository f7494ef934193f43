"""xpjit.ndarray: an array in memory of an xpjit device, and the ways
arrays come in and go out: NumPy (copies; zero-copy views on the CPU
device), DLPack both ways (zero-copy), and foreign device memory
(xpj_mem_import)."""
import ctypes
import math
import operator

import numpy as np

from . import _lib
from ._accel import _fast
from ._dtypes import scalar_name
from ._errors import InvalidArgumentError, check
from ._runtime import get_device

# ---- memory ---------------------------------------------------------------


class _Allocation:
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


class _Import:
    """Memory another library owns, registered with the device for as
    long as an array uses it (xpj_mem_import; owner kept alive)."""

    def __init__(self, device, ptr, nbytes, kind, owner):
        self.device, self.ptr, self.owner = device, None, owner
        check(_lib.mem_import(device.handle, ptr, max(int(nbytes), 1), kind))
        self.ptr = ptr
        device._ctx._use()

    def __del__(self):
        _let_go(self)


_KINDS = {"device": _lib.MEM_DEVICE, "host": _lib.MEM_HOST,
          "shared": _lib.MEM_SHARED}


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
            self.dtype = np.dtype(dtype)
            scalar_name(self.dtype)  # refuses dtypes xpjit has no type for
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
        if math.prod(shape) * self.dtype.itemsize >= 1 << 62:
            raise InvalidArgumentError("shape %r of %s is too large"
                                       % (shape, self.dtype))
        self.shape = shape
        self.device = device if device is not None else get_device()
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
        self._host = getattr(_mem, "host", False)
        self._ptr = _ptr  # element 0 (read-only: .ptr)
        # for the C launch path (_fast.c): the element type's code and the
        # device's handle
        self._code = _lib.SCALAR[scalar_name(self.dtype)]
        self._dv = self.device._h.value
        self.strides = (_c_strides(shape, self.dtype.itemsize)
                        if strides is None else tuple(int(s) for s in strides))

    @property
    def _host(self):
        """Host memory another library reads as it likes (NumPy's, through
        DLPack): launches that use it end before the call returns."""
        return self._sync == 1

    @_host.setter
    def _host(self, host):
        # _sync, read by the C launch path as a plain attribute: 0 xpjit's
        # memory (launches may stay asynchronous); 1 host memory another
        # library reads; 2 device memory of another library (the slow path
        # keeps its owner alive until the launch is done)
        self._sync = 1 if host else (
            0 if isinstance(self._mem, _Allocation) else 2)

    # -- NumPy-like attributes
    ndim = property(lambda s: len(s.shape))
    size = property(lambda s: math.prod(s.shape))
    itemsize = property(lambda s: s.dtype.itemsize)
    nbytes = property(lambda s: s.size * s.dtype.itemsize)

    @property
    def flags(self):
        c = self.strides == _c_strides(self.shape, self.itemsize)
        return {"C_CONTIGUOUS": c or self.size <= 1, "WRITEABLE": True}

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self):
        return "xpjit.ndarray(shape=%r, dtype=%s, device=%s)" % (
            self.shape, self.dtype, self.device.id)

    # -- views
    def __getitem__(self, index):
        idx = index if isinstance(index, tuple) else (index,)
        for i in idx:
            if not (i is None or i is Ellipsis or isinstance(i, slice) or
                    (isinstance(i, (int, np.integer)) and
                     not isinstance(i, (bool, np.bool_)))):
                raise InvalidArgumentError(
                    "only basic indexing (integers, slices, ..., None) makes "
                    "views of an xpjit.ndarray, not %s" % type(i).__name__)
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
        shape = tuple(int(n) for n in shape)
        if -1 in shape:
            known = math.prod(n for n in shape if n != -1)
            shape = tuple(self.size // max(known, 1) if n == -1 else n
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
        axes = axes[0] if len(axes) == 1 and not np.isscalar(axes[0]) else axes
        axes = tuple(axes) if axes else tuple(reversed(range(self.ndim)))
        if sorted(axes) != list(range(self.ndim)):
            raise InvalidArgumentError("axes %r do not permute %d dimensions"
                                       % (axes, self.ndim))
        out = ndarray(tuple(self.shape[a] for a in axes), self.dtype,
                      self.device, strides=tuple(self.strides[a]
                                                 for a in axes),
                      _mem=self._mem, _ptr=self.ptr)
        out._host = self._host
        return out

    # -- copies
    def _queue(self, queue):
        q = queue if queue is not None else self.device.queue
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
        check(_lib.enqueue_copy(q.handle, host.ctypes.data, self.ptr + lo,
                                host.nbytes, None))
        q.wait()
        out[...] = np.lib.stride_tricks.as_strided(
            host[-lo:].view(self.dtype) if lo else host.view(self.dtype),
            shape=self.shape, strides=self.strides)
        return out

    copy_to_host = get

    def set(self, arr, queue=None):
        """Copies a NumPy array (or anything np.asarray takes) of this
        shape into this contiguous array."""
        q = self._queue(queue)
        # (np.ascontiguousarray would make a 0-d array 1-d)
        a = np.require(np.asarray(arr, dtype=self.dtype), requirements="C")
        if a.shape != self.shape:
            raise InvalidArgumentError("shape %r does not match the array's "
                                       "%r" % (a.shape, self.shape))
        if not self.flags["C_CONTIGUOUS"]:
            raise InvalidArgumentError("set() needs a contiguous array")
        if a.nbytes:
            check(_lib.enqueue_copy(q.handle, self.ptr, a.ctypes.data,
                                    a.nbytes, None))
            q.wait()
        return self

    def fill(self, value, queue=None):
        """Sets every element of this contiguous array to value."""
        q = self._queue(queue)
        if not self.flags["C_CONTIGUOUS"]:
            raise InvalidArgumentError("fill() needs a contiguous array")
        pat = np.array(value, self.dtype)
        if self.nbytes:
            check(_lib.enqueue_fill(q.handle, self.ptr, pat.ctypes.data,
                                    pat.itemsize, self.nbytes, None))
        return self

    def copy(self, queue=None):
        return asarray(self.get(queue), device=self.device, queue=queue)

    # -- interchange
    def __dlpack_device__(self):
        return _dl_device(self.device)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None,
                   copy=None):
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
    queue's): an ndarray of that device and dtype as it is, anything with
    __dlpack__ of the same device without a copy, else copied from
    np.asarray(obj)."""
    if queue is not None:
        device = queue.device
    if device is None:
        device = obj.device if isinstance(obj, ndarray) else get_device()
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


class _DLOwner:
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
    if not hasattr(obj, "__dlpack__"):
        raise InvalidArgumentError("%s has no __dlpack__" % type(obj).__name__)
    # a CUDA producer (CuPy, PyTorch) orders its work before the legacy
    # default stream, which xpjit then waits for: xpjit's own streams have
    # no order with the producer's (DLPack's stream argument)
    stream = None
    try:
        if tuple(obj.__dlpack_device__())[0] == _DL_CUDA:
            stream = 1
    except Exception:  # no __dlpack_device__: no stream to give
        pass
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
    if device is None:
        device = _device_for(dtype_dev)
    elif dtype_dev[0] in (_DL_CPU, 3) and device.backend != "cpu":
        raise InvalidArgumentError(
            "from_dlpack: host memory is for the CPU device, not %s (copy "
            "it with xpjit.asarray)" % device.id)
    mem = owner
    if dtype_dev[0] not in (_DL_CPU, 3):
        if stream is not None:
            device.wait_native(stream)
        lo, hi = _span(shape, strides)
        mem = _Import(device, ptr + lo, hi - lo + dtype.itemsize,
                      _lib.MEM_DEVICE, owner)
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
    cai = getattr(obj, "__cuda_array_interface__", None)
    if not isinstance(cai, dict):
        raise InvalidArgumentError("%s has no __cuda_array_interface__"
                                   % type(obj).__name__)
    try:
        ptr, readonly = cai["data"]
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
    stream = cai.get("stream")
    if stream is not None and (isinstance(stream, bool) or
                               not isinstance(stream, int) or stream <= 0):
        # 0 is ambiguous by the interface's rules: refused, as CuPy does
        raise InvalidArgumentError("__cuda_array_interface__: stream %r is "
                                   "not a CUDA stream handle" % (stream,))
    if device is None:
        from ._runtime import get_context
        device = get_context().device("cuda:0")
    if stream is not None:
        device.wait_native(stream)
    lo, hi = _span(shape, strides)
    if hi < lo or not ptr:  # empty: nothing to import
        return ndarray(shape, dtype, device)
    mem = _Import(device, ptr + lo, hi - lo + dtype.itemsize,
                  _lib.MEM_DEVICE, obj)
    return ndarray(shape, dtype, device, strides=strides, _mem=mem,
                   _ptr=ptr)


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
