"""dpctl's __sycl_usm_array_interface__ (SUAI): everything that reaches
into SYCL's and OpenCL's libraries for it, in one place.

dpctl has no public way to give the native OpenCL handles behind its
objects, nor to wrap a native cl_context in a SyclContext. libsycl (which
dpctl loads) exports them as C++ members, called here through ctypes by
their mangled names (one table, _SYMBOLS) with `this` the pointer dpctl's
addressof_ref() gives: an ABI that only the libsycl versions in _VERIFIED
were checked against; any other, or a missing symbol, is refused with
UnsupportedError instead of being called. The USM type of a pointer on a
backend other than OpenCL comes from dpctl's own C library
(DPCTLUSM_GetPointerType, a public C API). On OpenCL everything is asked of
the driver (clGetMemAllocInfoINTEL: type, base, size and device of the
allocation holding a pointer), so that no pointer reaches dpctl or SYCL
unverified: dpctl aborts the process on some pointers that are not USM of
the context it is given.
"""
import ctypes
import ctypes.util
import glob
import os
import re
import sys
import threading

import numpy as np

from . import _lib
from ._dtypes import scalar_name
from ._errors import InvalidArgumentError, UnsupportedError
from ._runtime import _Owner

# libsycl's members used here, by their Itanium-mangled names
_SYMBOLS = {
    # cl_context sycl::context::getNative() const (retained for the caller)
    "context_native": "_ZNK4sycl3_V17context9getNativeEv",
    # cl_device_id sycl::device::getNative() const (retained)
    "device_native": "_ZNK4sycl3_V16device9getNativeEv",
    # sycl::context sycl::detail::make_context(ur_native_handle_t,
    #   const async_handler &, backend, bool KeepOwnership,
    #   const std::vector<device> &)
    "make_context": "_ZN4sycl3_V16detail12make_contextEmRKSt8functionIFvNS0"
                    "_14exception_listEEENS0_7backendEbRKSt6vectorINS0_6dev"
                    "iceESaISA_EE",
}
# libsycl.so.N these calls were checked with: 8 (oneAPI 2025.3, dpctl
# 0.21.1), 9 (oneAPI 2026.2, dpctl 0.22.1)
_VERIFIED = (8, 9)
_SYCL_BACKEND_OPENCL = 1  # sycl::backend::opencl

# OpenCL (cl.h, cl_ext.h)
_CL_DEVICE_TYPE, _CL_DEVICE_TYPE_CPU = 0x1000, 2
_CL_DEVICE_PLATFORM = 0x1031
_CL_CONTEXT_DEVICES = 0x1081
_CL_MEM_ALLOC_TYPE, _CL_MEM_ALLOC_BASE_PTR = 0x419A, 0x419B
_CL_MEM_ALLOC_SIZE, _CL_MEM_ALLOC_DEVICE = 0x419C, 0x419D
_CL_USM_TYPES = {0x4197: "host", 0x4198: "device", 0x4199: "shared"}
_DPCTL_USM_TYPES = {1: "device", 2: "shared", 3: "host"}

_lock = threading.RLock()  # queue_of holds it while _sycl() takes it
_VP = ctypes.c_void_p


# ---- the interface itself -------------------------------------------------

class Suai:
    """A parsed, checked __sycl_usm_array_interface__: shape, byte
    strides, dtype, the address of element 0 (ptr), readonly, syclobj, and
    the byte range [first, last) the view reaches."""
    __slots__ = ("shape", "strides", "dtype", "ptr", "readonly", "syclobj",
                 "first", "last")


def _ints(v, what):
    if not isinstance(v, (tuple, list)):
        raise InvalidArgumentError("__sycl_usm_array_interface__: %s must be "
                                   "a tuple of ints, not %r" % (what, v))
    out = []
    for n in v:
        if isinstance(n, (bool, np.bool_)) or not isinstance(
                n, (int, np.integer)):
            raise InvalidArgumentError("__sycl_usm_array_interface__: %s "
                                       "must be ints, not %r" % (what, v))
        out.append(int(n))
    return tuple(out)


_TYPESTR = re.compile(r"^[<>|=][biuf][0-9]+$")


def parse(obj):
    """obj's __sycl_usm_array_interface__, checked (no native call)."""
    try:
        d = obj.__sycl_usm_array_interface__
    except Exception as e:  # a property that raises
        raise InvalidArgumentError("%s.__sycl_usm_array_interface__ raised "
                                   "%s: %s" % (type(obj).__name__,
                                               type(e).__name__, e)) from None
    if not isinstance(d, dict):
        raise InvalidArgumentError("__sycl_usm_array_interface__ of %s is a "
                                   "%s, not a dict" % (type(obj).__name__,
                                                       type(d).__name__))
    v = d.get("version")
    if v != 1 or isinstance(v, bool):
        raise InvalidArgumentError("__sycl_usm_array_interface__: version %r "
                                   "(xpjit reads version 1)" % (v,))
    for k in ("data", "shape", "typestr", "syclobj"):
        if k not in d:
            raise InvalidArgumentError("__sycl_usm_array_interface__ has no "
                                       "%r" % k)
    data = d["data"]
    if not isinstance(data, (tuple, list)) or len(data) != 2 or \
            isinstance(data[0], bool) or \
            not isinstance(data[0], (int, np.integer)):
        raise InvalidArgumentError("__sycl_usm_array_interface__: data must "
                                   "be (address, readonly), not %r" % (data,))
    base = int(data[0])
    s = Suai()
    s.readonly = bool(data[1])
    ts = d["typestr"]
    if not isinstance(ts, str) or not _TYPESTR.match(ts):
        raise InvalidArgumentError("__sycl_usm_array_interface__: typestr %r "
                                   "is no number type" % (ts,))
    try:
        dt = np.dtype(ts)
        scalar_name(dt)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError("__sycl_usm_array_interface__: typestr "
                                   "%r: %s" % (ts, e)) from None
    s.dtype = dt
    it = dt.itemsize
    shape = _ints(d["shape"], "shape")
    if len(shape) > _lib.MAX_RANK or any(n < 0 for n in shape):
        raise InvalidArgumentError("__sycl_usm_array_interface__: shape %r "
                                   "(at most %d dimensions, none negative)"
                                   % (shape, _lib.MAX_RANK))
    st = d.get("strides")
    if st is None:
        el, acc = [], 1
        for n in reversed(shape):
            el.append(acc)
            acc *= max(n, 1)
        el = tuple(reversed(el))
    else:
        el = _ints(st, "strides")
        if len(el) != len(shape):
            raise InvalidArgumentError("__sycl_usm_array_interface__: %d "
                                       "strides for %d dimensions"
                                       % (len(el), len(shape)))
    off = d.get("offset", 0)
    if off is None:
        off = 0
    if isinstance(off, bool) or not isinstance(off, (int, np.integer)):
        raise InvalidArgumentError("__sycl_usm_array_interface__: offset "
                                   "must be an int (elements), not %r"
                                   % (off,))
    # the elements reached, relative to data (Python ints: no overflow)
    size = 1
    for n in shape:
        size *= n
    if size * it >= 1 << 62:
        raise InvalidArgumentError("__sycl_usm_array_interface__: shape %r "
                                   "of %s is too large" % (shape, dt))
    lo = hi = int(off)
    if size:
        for n, e in zip(shape, el):
            if e < 0:
                lo += (n - 1) * e
            else:
                hi += (n - 1) * e
    s.first, s.last = base + lo * it, base + (hi + 1) * it
    if size and (base <= 0 or s.first <= 0 or s.last > 1 << 64 or
                 s.last - s.first >= 1 << 62):
        raise InvalidArgumentError(
            "__sycl_usm_array_interface__: data %#x, offset %d and strides "
            "%r reach bytes [%d, %d) of memory: outside the address space"
            % (base, off, el, s.first, s.last))
    s.shape = shape
    s.strides = tuple(e * it for e in el)
    s.ptr = base + int(off) * it
    s.syclobj = d["syclobj"]
    return s


# ---- dpctl and the libraries behind it --------------------------------------

def dpctl():
    """dpctl, imported on first use; UnsupportedError without it."""
    m = sys.modules.get("dpctl")
    if m is not None:
        return m
    try:
        import dpctl as m
    except Exception as e:
        raise UnsupportedError("__sycl_usm_array_interface__ needs dpctl "
                               "(pip install dpctl): %s" % e) from None
    return m


def syclobj(obj):
    """(queue or None, SyclContext, [SyclDevice]) of a SUAI's syclobj: a
    dpctl SyclQueue, a SyclContext or a filter string."""
    dp = dpctl()
    if isinstance(obj, dp.SyclQueue):
        return obj, obj.sycl_context, [obj.sycl_device]
    if isinstance(obj, dp.SyclContext):
        return None, obj, list(obj.get_devices())
    if isinstance(obj, str):
        try:
            q = dp.SyclQueue(obj)
        except Exception as e:
            raise InvalidArgumentError("__sycl_usm_array_interface__: "
                                       "syclobj %r selects no SYCL device: %s"
                                       % (obj, e)) from None
        return q, q.sycl_context, [q.sycl_device]
    raise InvalidArgumentError("__sycl_usm_array_interface__: syclobj must be "
                               "a dpctl.SyclQueue, SyclContext or filter "
                               "string, not %s" % type(obj).__name__)


def is_opencl(sycl_device):
    return sycl_device.backend == dpctl().backend_type.opencl


def _loaded_libsycl():
    """The path of the libsycl.so.N this process has loaded (dpctl's)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                m = re.search(r"(/\S*/libsycl\.so\.(\d+)[.\d]*)$", line)
                if m:
                    return m.group(1), int(m.group(2))
    except OSError:
        pass
    # no /proc: beside dpctl's package (a venv's lib/), or the loader's
    here = os.path.dirname(dpctl().__file__)
    for p in sorted(glob.glob(os.path.join(here, "..", "..", "..",
                                           "libsycl.so.[0-9]*"))):
        m = re.search(r"libsycl\.so\.(\d+)$", p)
        if m:
            return os.path.realpath(p), int(m.group(1))
    p = ctypes.util.find_library("sycl")
    m = re.search(r"libsycl\.so\.(\d+)", p or "")
    if m:
        return p, int(m.group(1))
    return None, None


_sycl_calls = None


def _sycl():
    """libsycl's calls (_SYMBOLS), checked once."""
    global _sycl_calls
    if _sycl_calls is not None:
        if isinstance(_sycl_calls, Exception):
            raise _sycl_calls
        return _sycl_calls
    with _lock:
        if _sycl_calls is None:
            try:
                _sycl_calls = _open_sycl()
            except UnsupportedError as e:
                _sycl_calls = e
    return _sycl()


def _open_sycl():
    dpctl()
    path, major = _loaded_libsycl()
    if path is None:
        raise UnsupportedError("__sycl_usm_array_interface__: dpctl's "
                               "libsycl is not loaded in this process")
    if major not in _VERIFIED:
        raise UnsupportedError(
            "__sycl_usm_array_interface__: %s is libsycl.so.%d; xpjit calls "
            "its C++ members only on the versions it was checked with "
            "(libsycl.so.%s)" % (path, major,
                                 ", .so.".join(map(str, _VERIFIED))))
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise UnsupportedError("__sycl_usm_array_interface__: %s" % e) \
            from None
    calls = {}
    for name, sym in _SYMBOLS.items():
        try:
            calls[name] = getattr(lib, sym)
        except AttributeError:
            raise UnsupportedError(
                "__sycl_usm_array_interface__: %s lacks %s (%s): not a "
                "libsycl xpjit knows" % (path, sym, name)) from None
    calls["context_native"].restype = _VP
    calls["context_native"].argtypes = [_VP]
    calls["device_native"].restype = _VP
    calls["device_native"].argtypes = [_VP]
    calls["make_context"].restype = None
    calls["make_context"].argtypes = [_VP, ctypes.c_uint64, _VP, ctypes.c_int,
                                      ctypes.c_bool, _VP]
    return calls


_cl_lib = None


def _cl():
    """The OpenCL ICD loader (xpjit's: XPJIT_OPENCL_LIBRARY, else
    libOpenCL.so.1), with the prototypes used here."""
    global _cl_lib
    if _cl_lib is None:
        name = os.environ.get("XPJIT_OPENCL_LIBRARY") or "libOpenCL.so.1"
        try:
            cl = ctypes.CDLL(name)
        except OSError as e:
            raise UnsupportedError("__sycl_usm_array_interface__: %s" % e) \
                from None
        for f, res, args in (
                ("clGetDeviceInfo", ctypes.c_int,
                 [_VP, ctypes.c_uint, ctypes.c_size_t, _VP, _VP]),
                ("clGetContextInfo", ctypes.c_int,
                 [_VP, ctypes.c_uint, ctypes.c_size_t, _VP, _VP]),
                ("clRetainContext", ctypes.c_int, [_VP]),
                ("clReleaseContext", ctypes.c_int, [_VP]),
                ("clReleaseDevice", ctypes.c_int, [_VP]),
                ("clGetExtensionFunctionAddressForPlatform", _VP,
                 [_VP, ctypes.c_char_p])):
            fn = getattr(cl, f)
            fn.restype, fn.argtypes = res, args
        _cl_lib = cl
    return _cl_lib


_ALLOC_INFO = ctypes.CFUNCTYPE(ctypes.c_int, _VP, _VP, ctypes.c_uint,
                               ctypes.c_size_t, _VP, _VP)
_alloc_info_fns = {}  # cl_platform_id -> clGetMemAllocInfoINTEL


def _device_info(dev, what, ctype):
    v = ctype()
    if _cl().clGetDeviceInfo(dev, what, ctypes.sizeof(v), ctypes.byref(v),
                             None):
        raise InvalidArgumentError("clGetDeviceInfo(%#x) failed on "
                                   "cl_device_id %#x" % (what, dev or 0))
    return v.value


def _alloc_info_fn(cl_dev):
    plat = _device_info(cl_dev, _CL_DEVICE_PLATFORM, _VP)
    fn = _alloc_info_fns.get(plat)
    if fn is None:
        addr = _cl().clGetExtensionFunctionAddressForPlatform(
            plat, b"clGetMemAllocInfoINTEL")
        if not addr:
            raise UnsupportedError("__sycl_usm_array_interface__: the OpenCL "
                                   "platform has no USM "
                                   "(cl_intel_unified_shared_memory)")
        fn = _alloc_info_fns[plat] = _ALLOC_INFO(addr)
    return fn


def context_devices(cl_ctx):
    cl = _cl()
    n = ctypes.c_size_t()
    if cl.clGetContextInfo(cl_ctx, _CL_CONTEXT_DEVICES, 0, None,
                           ctypes.byref(n)):
        return []
    arr = (_VP * (n.value // ctypes.sizeof(_VP)))()
    cl.clGetContextInfo(cl_ctx, _CL_CONTEXT_DEVICES, n.value, arr, None)
    return [a for a in arr]


def is_cpu_device(cl_dev):
    return bool(_device_info(cl_dev, _CL_DEVICE_TYPE, ctypes.c_uint64) &
                _CL_DEVICE_TYPE_CPU)


class Native(_Owner):
    """An OpenCL handle SYCL retained for us, released when dropped."""

    def __init__(self, handle, release):
        self.handle, self._release = handle, release

    def __del__(self):
        h, self.handle = getattr(self, "handle", None), None
        if h:
            try:
                self._release(h)
            except Exception:  # interpreter shutdown
                pass


def native_context(ctx):
    """The cl_context behind a dpctl SyclContext of the OpenCL backend."""
    h = _sycl()["context_native"](ctx.addressof_ref())
    return Native(h, _cl().clReleaseContext)


def native_device(dev):
    h = _sycl()["device_native"](dev.addressof_ref())
    return Native(h, _cl().clReleaseDevice)


class Usm:
    """What a pointer is in a SYCL context: kind ("device", "shared",
    "host"); for OpenCL also the allocation's base, size and cl_device_id
    (None for host memory), and the context's native handle."""
    __slots__ = ("kind", "base", "size", "cl_device", "cl_context",
                 "host_ok")


def usm_info(ctx, devices, first, last):
    """The USM allocation holding [first, last) in ctx, or
    InvalidArgumentError when the range is not USM of ctx (a foreign
    pointer) or runs out of its allocation."""
    u = Usm()
    u.base = u.size = u.cl_device = u.cl_context = None
    if devices and all(is_opencl(d) for d in devices):
        nctx = native_context(ctx)
        u.cl_context = nctx
        devs = context_devices(nctx.handle)
        if not devs:
            raise InvalidArgumentError("__sycl_usm_array_interface__: the "
                                       "SYCL context has no OpenCL devices")
        fn = _alloc_info_fn(devs[0])

        def info(p, what, ctype):
            v = ctype()
            e = fn(nctx.handle, p, what, ctypes.sizeof(v), ctypes.byref(v),
                   None)
            return v.value if e == 0 else None
        # the allocation at the view's first byte, else its last (a view
        # that starts before its allocation)
        kind = None
        for at in (first, last - 1):
            kind = _CL_USM_TYPES.get(info(at, _CL_MEM_ALLOC_TYPE,
                                          ctypes.c_uint))
            if kind is not None:
                break
        if kind is None:
            raise InvalidArgumentError(
                "__sycl_usm_array_interface__: [%#x, %#x) is not USM of the "
                "SYCL context of syclobj (clGetMemAllocInfoINTEL: unknown)"
                % (first, last))
        u.kind = kind
        u.base = info(at, _CL_MEM_ALLOC_BASE_PTR, _VP) or 0
        u.size = info(at, _CL_MEM_ALLOC_SIZE, ctypes.c_size_t) or 0
        u.cl_device = info(at, _CL_MEM_ALLOC_DEVICE, _VP) or None
        if first < u.base or last > u.base + u.size:
            raise InvalidArgumentError(
                "__sycl_usm_array_interface__: the view reaches bytes [%d, "
                "%d) of its %d-byte USM allocation" % (
                    first - u.base, last - u.base, u.size))
        # the host reads host and shared USM, and any of a CPU device
        u.host_ok = kind != "device" or (
            u.cl_device is not None and is_cpu_device(u.cl_device))
        return u
    # another backend: dpctl's own query, at both ends of the range
    kinds = {_pointer_type(first, ctx), _pointer_type(last - 1, ctx)}
    if None in kinds or len(kinds) != 1:
        raise InvalidArgumentError(
            "__sycl_usm_array_interface__: [%#x, %#x) is not USM of the SYCL "
            "context of syclobj" % (first, last))
    u.kind = kinds.pop()
    dp = dpctl()
    u.host_ok = u.kind != "device" or all(
        d.device_type == dp.device_type.cpu for d in devices)
    return u


_dpctl_capi = None


def _pointer_type(p, ctx):
    global _dpctl_capi
    if _dpctl_capi is None:
        here = os.path.dirname(dpctl().__file__)
        try:
            lib = ctypes.CDLL(os.path.join(here, "libDPCTLSyclInterface.so"))
            fn = lib.DPCTLUSM_GetPointerType
        except (OSError, AttributeError) as e:
            raise UnsupportedError("__sycl_usm_array_interface__: dpctl's C "
                                   "library: %s" % e) from None
        fn.restype, fn.argtypes = ctypes.c_int, [_VP, _VP]
        _dpctl_capi = fn
    return _DPCTL_USM_TYPES.get(_dpctl_capi(p, ctx.addressof_ref()))


# ---- xpjit's own context, wrapped for dpctl ---------------------------------

# xpjit's cl_context -> a dpctl.SyclQueue on it (SYCL's reference keeps
# each cl_context, so no other takes its address)
_queues = {}


def queue_of(device):
    """A dpctl SyclQueue on xpjit's own cl_context of an OpenCL device (one
    per device, made on first use): the syclobj of the USM xpjit exports.
    SYCL owns a reference to the cl_context (retained here), so the
    context outlives xpjit's own release of it while dpctl uses it."""
    key = device._native(_lib.NATIVE_CONTEXT)
    q = _queues.get(key)
    if q is not None:
        return q
    with _lock:
        q = _queues.get(key)
        if q is None:
            q = _queues[key] = _make_queue(device)
    return q


def _make_queue(device):
    dp = dpctl()
    calls = _sycl()
    cl = _cl()
    cl_ctx = device._native(_lib.NATIVE_CONTEXT)
    cl_dev = device._native(_lib.NATIVE_DEVICE)
    cl.clRetainContext(cl_ctx)  # SYCL's: KeepOwnership false below
    out = ctypes.create_string_buffer(16)  # a sycl::context (shared_ptr)
    handler = ctypes.create_string_buffer(32)  # an empty std::function
    devices = ctypes.create_string_buffer(24)  # an empty std::vector
    calls["make_context"](out, cl_ctx, handler, _SYCL_BACKEND_OPENCL, False,
                          devices)
    # dpctl copies the sycl::context; `out` keeps one reference of its
    # own, never dropped (no exported destructor): the cl_context then
    # lives until the process ends
    _keep.append(out)
    cap = _api_capsule(ctypes.addressof(out), b"SyclContextRef")
    ctx = dp.SyclContext(cap)
    back = native_context(ctx)
    if back.handle != cl_ctx:
        raise UnsupportedError("__sycl_usm_array_interface__: libsycl "
                               "wrapped cl_context %#x as %#x" % (
                                   cl_ctx, back.handle or 0))
    devs = ctx.get_devices()
    if len(devs) != 1 or native_device(devs[0]).handle != cl_dev:
        raise UnsupportedError("__sycl_usm_array_interface__: the SYCL "
                               "context of %s has other devices" % device.id)
    return dp.SyclQueue(ctx, devs[0])


_keep = []
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [_VP, ctypes.c_char_p, _VP]


def _api_capsule(addr, name):
    return _capsule_new(addr, name, None)


def exported_usm(device, first):
    """USM kind of xpjit's own memory at first on an OpenCL device, or
    None where the device's memory is not USM (SVM)."""
    cl_ctx = device._native(_lib.NATIVE_CONTEXT)
    cl_dev = device._native(_lib.NATIVE_DEVICE)
    try:
        fn = _alloc_info_fn(cl_dev)
    except UnsupportedError:
        return None
    v = ctypes.c_uint()
    if fn(cl_ctx, first, _CL_MEM_ALLOC_TYPE, 4, ctypes.byref(v), None):
        return None
    return _CL_USM_TYPES.get(v.value)
