"""dpctl's __sycl_usm_array_interface__ both ways (python/xpjit/_sycl.py,
docs/python.md): dpctl's arrays as kernel arguments and xpjit arrays
without copies, on the CPU and OpenCL devices; xpjit's OpenCL arrays to
dpctl; hostile interfaces refused with xpjit's errors, never an abort.

dpctl runs on Intel's OpenCL CPU runtime (opencl:cpu), the same device as
xpjit's opencl:0. Skipped without dpctl (or without that device);
XPJIT_REQUIRE_SUAI=1 (CI: tools/py-test-deps.sh installs dpctl) makes that a
failure."""
import gc
import os
import warnings
import weakref

import numpy as np
import pytest

import xpjit
from xpjit import _array, _sycl

REQUIRE = os.environ.get("XPJIT_REQUIRE_SUAI")

_why = None
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import dpctl
        import dpctl.memory as dpm
        import dpctl.tensor as dpt
        Q = dpctl.SyclQueue("opencl:cpu")
except Exception as e:  # ImportError, or no opencl:cpu for SYCL
    _why = "dpctl with an opencl:cpu device: %s: %s" % (type(e).__name__, e)
if _why and not REQUIRE:
    pytest.skip(_why, allow_module_level=True)


@pytest.fixture
def q():
    if _why:
        pytest.fail("XPJIT_REQUIRE_SUAI is set: " + _why)
    return Q


def _devices():
    ids = ["cpu"]
    if xpjit.get_context().devices("opencl"):
        ids.append("opencl")
    return ids


@pytest.fixture(params=_devices())
def dev(request, q):
    return xpjit.Device(request.param)


@pytest.fixture
def ocl(q):
    ds = xpjit.get_context().devices("opencl")
    if not ds:
        if REQUIRE:
            pytest.fail("XPJIT_REQUIRE_SUAI is set: no OpenCL device")
        pytest.skip("no OpenCL device")
    return ds[0]


SRC = """
kernel axpb<T>(a: T, b: T, y: global T[*]) range {
    let i = global_id(0);
    if i < size(y) { y[i] = y[i] * a + b; }
}
kernel axpb2<T>(a: T, b: T, y: global T[,]) range {
    let i = global_id(0);
    let j = global_id(1);
    if i < shape(y, 0) && j < shape(y, 1) { y[i, j] = y[i, j] * a + b; }
}
kernel copy<T>(x: global const T[], y: global T[]) range {
    let i = global_id(0);
    if i < shape(y, 0) { y[i] = x[i]; }
}
kernel slow_inc<T>(y: global T[], n: i64) range {
    let i = global_id(0);
    if i < shape(y, 0) {
        let acc = y[i];
        for (let k: i64 = 0; k < n; k++) { acc = acc + T(1); }
        y[i] = acc;
    }
}
kernel addto<T>(x: global const T[], y: global T[]) range {
    let i = global_id(0);
    if i < shape(y, 0) { y[i] += x[i]; }
}
"""


@pytest.fixture(scope="module")
def prog():
    return xpjit.Program(SRC, name="suai.xpk")


def _addr(x):
    """The address of element 0 of a dpctl array (data + offset)."""
    s = x.__sycl_usm_array_interface__
    return s["data"][0] + s.get("offset", 0) * np.dtype(s["typestr"]).itemsize


class Iface:
    """An object with a given __sycl_usm_array_interface__ (keep: what
    must outlive it)."""

    def __init__(self, d, keep=None):
        self.__sycl_usm_array_interface__ = d
        self.keep = keep


def _no_imports_left():
    gc.collect()
    return not _array._imports


# ---- dpctl -> xpjit ---------------------------------------------------------

@pytest.mark.parametrize("dtype", ["f4", "f8", "i4", "i8", "u1", "f2"])
def test_kernel_in_place(prog, dev, dtype, q):
    """A dpctl array as a kernel argument, written in place: no copy (the
    address is dpctl's), the result seen by dpctl when the call returns."""
    x = dpt.asarray(np.arange(40, dtype=dtype), device=q)
    want = np.arange(40, dtype=dtype) * 2 + 1
    prog.axpb(40, np.dtype(dtype).type(2), np.dtype(dtype).type(1), x,
              queue=dev.queue)
    np.testing.assert_array_equal(dpt.asnumpy(x), want)
    a = xpjit.from_sycl_usm_array_interface(x, device=dev)
    assert a.ptr == _addr(x) and a.device == dev and a.dtype == want.dtype
    np.testing.assert_array_equal(a.get(), want)
    del a
    assert _no_imports_left()


def test_views(prog, dev, q):
    """Strided and offset views (x[1:, ::2], reversed, transposed, a row):
    the kernel writes exactly the view's elements."""
    base = np.arange(48, dtype=np.float32).reshape(6, 8)
    for index in ((slice(1, None), slice(None, None, 2)),
                  (slice(None, None, -1), slice(None, None, -3)),
                  (slice(2, 5), slice(1, 7)), "T"):
        x = dpt.asarray(base, device=q)
        v = x.T if index == "T" else x[index]
        want = base.copy()
        (want.T if index == "T" else want[index])[...] *= 3
        (want.T if index == "T" else want[index])[...] += 1
        prog.axpb2(v.shape, np.float32(3), np.float32(1), v, queue=dev.queue)
        np.testing.assert_array_equal(dpt.asnumpy(x), want)
        a = xpjit.asarray(v, device=dev)
        assert a.ptr == _addr(v) and a.shape == v.shape
        assert a.strides == tuple(s * 4 for s in v.strides)
        np.testing.assert_array_equal(a.get(), dpt.asnumpy(v))
    x = dpt.asarray(base, device=q)
    row = x[3]  # an offset, no strides given as None
    assert row.__sycl_usm_array_interface__["offset"] == 24
    prog.axpb(8, np.float32(0), np.float32(7), row, queue=dev.queue)
    want = base.copy()
    want[3] = 7
    np.testing.assert_array_equal(dpt.asnumpy(x), want)


def test_one_allocation_many_arguments(prog, dev, q):
    """The same memory twice in one launch (x, x[::-1]) and through a kept
    xpjit array: one import of the allocation, let go with its last user."""
    x = dpt.asarray(np.arange(16, dtype=np.float32), device=q)
    kept = xpjit.asarray(x, device=dev)
    prog.addto(8, x[8:][::-1], x[:8], queue=dev.queue)
    prog.copy(16, x, x, queue=dev.queue)
    np.testing.assert_array_equal(dpt.asnumpy(x),
                                  [15] * 8 + list(range(8, 16)))
    prog.copy(16, kept, x[::-1], queue=dev.queue)
    mine = [k for k in _array._imports if k[0] == dev._h.value]
    assert len(mine) == 1 and _array._imports[mine[0]][1] == 1
    del kept
    assert _no_imports_left()


def test_syclobj_forms(prog, dev, q):
    """syclobj as a queue (waited for), a context or a filter string."""
    x = dpt.ones(8, dtype="f4", device=q)
    s = dict(x.__sycl_usm_array_interface__)
    for obj in (q, q.sycl_context, "opencl:cpu"):
        d = dict(s, syclobj=obj)
        y = Iface(d, keep=x)
        prog.axpb(8, np.float32(2), np.float32(0), y, queue=dev.queue)
    np.testing.assert_array_equal(dpt.asnumpy(x), np.full(8, 8.0))


def test_waits_for_dpctl(prog, dev, q):
    """dpctl's queued work on the memory is done before xpjit uses it."""
    n = 1 << 20
    x = dpt.zeros(n, dtype="f4", device=q)
    for _ in range(40):
        x += 1  # asynchronous in dpctl's queue
    prog.axpb(n, np.float32(2), np.float32(0), x, queue=dev.queue)
    np.testing.assert_array_equal(dpt.asnumpy(x), np.full(n, 80.0))
    # (Intel's OpenCL CPU runtime finishes dpctl's work as it is
    # submitted, so the outcome cannot show a missing wait: the queue of
    # the interface records that it was waited for, before the launch)
    seen = []

    class Recording(dpctl.SyclQueue):
        def wait(self):
            seen.append(dpt.asnumpy(x)[0])
            super().wait()
    rq = Recording(q.sycl_context, q.sycl_device)
    y = Iface(_good(x, syclobj=rq), keep=x)
    prog.axpb(n, np.float32(1), np.float32(1), y, queue=dev.queue)
    assert seen == [80.0]
    assert dpt.asnumpy(x)[0] == 81.0


def test_compute_follows_data(prog, q):
    """Without queue=, dpctl's memory goes to the OpenCL device it is of
    (when xpjit sees it), else the CPU device; asarray to the current
    device."""
    x = dpt.ones(4, dtype="f4", device=q)
    a = xpjit.from_sycl_usm_array_interface(x)
    want = "opencl" if xpjit.get_context().devices("opencl") else "cpu"
    assert a.device.backend == want
    assert xpjit.asarray(x).device == xpjit.get_device()
    prog.axpb(4, np.float32(3), np.float32(0), x)
    np.testing.assert_array_equal(dpt.asnumpy(x), np.full(4, 3.0))


def test_usm_kinds(prog, dev, q):
    """device, shared and host USM of dpctl's CPU device: all host memory
    here, taken by both devices."""
    for kind in ("device", "shared", "host"):
        x = dpt.asarray(np.arange(8, dtype=np.float32), device=q,
                        usm_type=kind)
        prog.axpb(8, np.float32(1), np.float32(1), x, queue=dev.queue)
        np.testing.assert_array_equal(dpt.asnumpy(x), np.arange(1, 9))
        a = xpjit.asarray(x, device=dev)
        assert a.ptr == _addr(x)


def test_dpctl_memory_objects(prog, dev, q):
    """dpctl.memory's USM objects: bytes (|u1), read-only by their
    interface (dpctl marks them so): inputs, refused as outputs."""
    m = dpm.MemoryUSMShared(32, queue=q)
    m.copy_from_host(np.arange(8, dtype=np.float32).view(np.uint8))
    a = xpjit.from_sycl_usm_array_interface(m, device=dev)
    assert a.dtype == np.uint8 and a.shape == (32,)
    assert not a.flags["WRITEABLE"]
    f = xpjit.asarray(np.zeros(32, np.uint8), device=dev)
    prog.copy(32, m, f, queue=dev.queue)
    np.testing.assert_array_equal(f.get().view(np.float32), np.arange(8))
    with pytest.raises(xpjit.InvalidArgumentError, match="read-only"):
        prog.axpb(32, np.uint8(1), np.uint8(1), m, queue=dev.queue)


def test_elementwise_and_reduction(dev, q):
    """ElementwiseKernel and ReductionKernel take dpctl's arrays as inputs
    and given outputs (written in place), like kernels."""
    k = xpjit.ElementwiseKernel("T x, T y", "T z", "z = x * y + T(1);",
                                "suai_ew")
    x = dpt.arange(8, dtype="f4", device=q)
    y = dpt.full(8, 2, dtype="f4", device=q)
    out = dpt.zeros(8, dtype="f4", device=q)
    k(x, y, out, queue=dev.queue)
    np.testing.assert_array_equal(dpt.asnumpy(out), np.arange(8) * 2 + 1)
    # as out= too (it was "output z must be an array, not usm_ndarray")
    out2 = dpt.zeros(8, dtype="f4", device=q)
    k(x, y, out=out2, queue=dev.queue)
    np.testing.assert_array_equal(dpt.asnumpy(out2), np.arange(8) * 2 + 1)
    r = k(x, y, queue=dev.queue)
    assert isinstance(r, xpjit.ndarray) and r.device == dev
    np.testing.assert_array_equal(r.get(), np.arange(8) * 2 + 1)
    red = xpjit.ReductionKernel("T x", "T y", "x", "a + b", "y = a;", "0",
                                "suai_sum")
    m = dpt.reshape(dpt.arange(12, dtype="f4", device=q), (3, 4))
    sums = dpt.zeros(4, dtype="f4", device=q)
    red(m, axis=0, out=sums, queue=dev.queue)
    np.testing.assert_array_equal(dpt.asnumpy(sums),
                                  np.arange(12).reshape(3, 4).sum(0))


def test_no_handle_leaks(prog, dev, q):
    """The native handles libsycl retains for xpjit are released: dpctl's
    cl_context keeps its reference count over many conversions."""
    import ctypes
    x = dpt.ones(4, dtype="f4", device=q)
    h = _sycl.native_context(q.sycl_context)

    def refs():
        v = ctypes.c_uint()
        _sycl._cl().clGetContextInfo(h.handle, 0x1080, 4, ctypes.byref(v),
                                     None)
        return v.value
    before = refs()
    for _ in range(20):
        prog.axpb(4, np.float32(1), np.float32(0), x, queue=dev.queue)
    gc.collect()
    assert refs() == before


# ---- xpjit -> dpctl ---------------------------------------------------------

def test_export_to_dpt(prog, ocl, q):
    """An OpenCL device array as dpctl's: the same memory (dpt.asarray and
    as_usm_memory take it without copies), a SyclQueue on xpjit's own
    cl_context; dpctl's in-place work seen by xpjit."""
    z = xpjit.asarray(np.arange(12, dtype=np.float32), device=ocl)
    s = z.__sycl_usm_array_interface__
    assert s["version"] == 1 and s["shape"] == (12,)
    assert s["data"] == (z.ptr, False) and s["typestr"] == "<f4"
    sq = s["syclobj"]
    assert isinstance(sq, dpctl.SyclQueue)
    assert _sycl.native_context(sq.sycl_context).handle == \
        ocl._native(xpjit._lib.NATIVE_CONTEXT)
    assert z.__sycl_usm_array_interface__["syclobj"] is sq  # one per device
    t = dpt.asarray(z)
    assert _addr(t) == z.ptr and t.sycl_queue == sq
    t *= 2
    t += 1
    sq.wait()  # dpctl's queue is not xpjit's: its work waited for first
    np.testing.assert_array_equal(z.get(), np.arange(12) * 2 + 1)
    m = dpm.as_usm_memory(z)
    assert m._pointer == z.ptr and m.nbytes == 48
    m.copy_from_host(np.full(12, 9, np.float32).view(np.uint8))
    np.testing.assert_array_equal(z.get(), np.full(12, 9.0))
    # xpjit's kernels on it (asynchronous: its own memory) are done
    # before the interface is given
    w = xpjit.zeros(4096, np.float32, device=ocl)
    prog.slow_inc(4096, w, 20000)
    np.testing.assert_array_equal(dpt.asnumpy(dpt.asarray(w)),
                                  np.full(4096, 20000.0))


def test_export_per_context(ocl, q):
    """Each xpjit context's OpenCL device has its own cl_context: its
    arrays' syclobj is a queue on that one."""
    other = xpjit.Context(cache="off")
    dev2 = other.device("opencl")
    z2 = xpjit.asarray(np.arange(3, dtype=np.float32), device=dev2)
    sq2 = z2.__sycl_usm_array_interface__["syclobj"]
    sq1 = xpjit.zeros(1, np.float32, device=ocl) \
        .__sycl_usm_array_interface__["syclobj"]
    n2 = _sycl.native_context(sq2.sycl_context).handle
    assert n2 == dev2._native(xpjit._lib.NATIVE_CONTEXT)
    assert n2 != _sycl.native_context(sq1.sycl_context).handle
    np.testing.assert_array_equal(dpt.asnumpy(dpt.asarray(z2)), np.arange(3))


def test_export_views(ocl, q):
    z = xpjit.asarray(np.arange(24, dtype=np.int32).reshape(4, 6), device=ocl)
    ref = np.arange(24).reshape(4, 6)
    for v, r in ((z[1:, ::2], ref[1:, ::2]), (z.T, ref.T), (z[2], ref[2]),
                 (z[1:3, 2:5], ref[1:3, 2:5])):
        t = dpt.asarray(v)
        np.testing.assert_array_equal(dpt.asnumpy(t), r)
        assert _addr(t) == v.ptr
    # negative strides: data at the lowest element, offset to element 0,
    # as dpctl's own arrays say it (dpt.asarray of 0.21.1 takes neither
    # its own nor ours: "can not accommodate"; its memory view does)
    v = z[::-1, ::-2]
    s = v.__sycl_usm_array_interface__
    assert s["strides"] == (-6, -2) and s["data"][0] == z.ptr + 4
    assert s["data"][0] + 4 * s["offset"] == v.ptr
    m = dpm.as_usm_memory(v)
    assert m._pointer == z.ptr + 4 and m.nbytes == 92


def test_export_keeps_owner(ocl, q):
    """dpctl's array keeps the xpjit array (and its memory) alive."""
    z = xpjit.asarray(np.arange(4, dtype=np.float32), device=ocl)
    w = weakref.ref(z)
    t = dpt.asarray(z)
    del z
    gc.collect()
    assert w() is not None
    for _ in range(3):
        xpjit.zeros(4, np.float32, device=ocl)  # memory that could reuse it
    np.testing.assert_array_equal(dpt.asnumpy(t), np.arange(4))
    del t
    gc.collect()
    assert w() is None


def test_round_trip(prog, ocl, q):
    """xpjit -> dpctl -> xpjit: the same memory, xpjit's own allocation
    (nothing imported); and dpctl -> xpjit -> dpctl with dpctl's syclobj."""
    z = xpjit.zeros(6, np.float32, device=ocl)
    t = dpt.asarray(z)
    back = xpjit.asarray(t, device=ocl)
    assert back.ptr == z.ptr and not _array._imports
    prog.axpb(6, np.float32(1), np.float32(4), back)
    t += 1
    # dpctl's in-place add is queued on its own queue: waited for before
    # xpjit reads the memory (the interface carries no event)
    t.sycl_queue.wait()
    np.testing.assert_array_equal(z.get(), np.full(6, 5.0))
    x = dpt.arange(6, dtype="f4", device=q)
    for d in ("cpu", ocl):
        a = xpjit.asarray(x, device=xpjit.Device(d) if d == "cpu" else d)
        s = a[1:].__sycl_usm_array_interface__
        assert s["syclobj"] == x.sycl_queue
        y = dpt.asarray(a[1:])
        np.testing.assert_array_equal(dpt.asnumpy(y), np.arange(1, 6))
        assert _addr(y) == _addr(x) + 4


def test_cpu_arrays_have_none(q):
    """The CPU device's memory is not USM: no interface (DLPack stays)."""
    a = xpjit.zeros(4, np.float32, device=xpjit.Device("cpu"))
    assert not hasattr(a, "__sycl_usm_array_interface__")
    with pytest.raises(AttributeError, match="not SYCL USM"):
        a.__sycl_usm_array_interface__
    assert np.from_dlpack(a).ctypes.data == a.ptr


def test_launch_paths_agree(prog, dev, q):
    """An xpjit array of dpctl's memory, launched again and again (the C
    path takes it after the first call): the same results, finished when
    each call returns."""
    x = dpt.zeros(64, dtype="f4", device=q)
    a = xpjit.asarray(x, device=dev)
    for i in range(5):
        prog.axpb(64, np.float32(1), np.float32(1), a)
        assert dpt.asnumpy(x)[0] == i + 1
    prog.axpb(64, np.float32(1), np.float32(1), a, wait=False)
    del a
    gc.collect()
    dev.synchronize()
    np.testing.assert_array_equal(dpt.asnumpy(x), np.full(64, 6.0))


# ---- refusals ---------------------------------------------------------------

def _good(x, **kw):
    d = dict(x.__sycl_usm_array_interface__)
    d.update(kw)
    return d


def test_hostile_interfaces(prog, dev, q):
    """Malformed or lying interfaces: xpjit errors, nothing reaches dpctl
    or the driver unchecked (dpctl aborts the process on some)."""
    x = dpt.arange(16, dtype="f4", device=q)
    host = np.zeros(16, np.float32)
    cases = [
        (_good(x, version=2), "version 2"),
        (_good(x, version=True), "version True"),
        ({k: v for k, v in _good(x).items() if k != "syclobj"}, "syclobj"),
        ({k: v for k, v in _good(x).items() if k != "data"}, "'data'"),
        (_good(x, data=None), "data must be"),
        (_good(x, data=("0x10", False)), "data must be"),
        (_good(x, typestr="<c8"), "typestr"),
        (_good(x, typestr="O"), "typestr"),
        (_good(x, typestr=">f4"), "typestr"),
        (_good(x, typestr="|V4"), "typestr"),
        (_good(x, typestr=4), "typestr"),
        (_good(x, shape=(-1,)), "negative"),
        (_good(x, shape=(1 << 40, 1 << 30)), "too large"),
        (_good(x, shape=(4, 4), strides=(4,)), "1 strides for 2"),
        (_good(x, shape=(4,), strides=(1.5,)), "strides"),
        (_good(x, shape=(4,), strides=(1 << 62,)), "outside the address"),
        (_good(x, shape=(32,)), "allocation"),
        (_good(x, shape=(4,), strides=(8,)), "allocation"),
        (_good(x, offset=-1), "allocation"),
        (_good(x, offset=13, shape=(4,)), "allocation"),
        (_good(x, offset="1"), "offset"),
        (_good(x, data=(0, False)), "outside the address"),
        (_good(x, data=(host.ctypes.data, False)), "not USM"),
        (_good(x, data=(host.ctypes.data, False),
               syclobj=q.sycl_context), "not USM"),
        (_good(x, data=(8, False)), "not USM"),
        (_good(x, syclobj=42), "syclobj must be"),
        (_good(x, syclobj="nosuchbackend:gpu"), "selects no SYCL"),
        ([1, 2], "not a dict"),
    ]
    for d, msg in cases:
        with pytest.raises(xpjit.InvalidArgumentError, match=msg):
            prog.axpb(16, np.float32(1), np.float32(1), Iface(d, keep=x),
                      queue=dev.queue)
        with pytest.raises(xpjit.InvalidArgumentError, match=msg):
            xpjit.from_sycl_usm_array_interface(Iface(d, keep=x), device=dev)

    class Raises:
        @property
        def __sycl_usm_array_interface__(self):
            raise RuntimeError("no")
    with pytest.raises(xpjit.InvalidArgumentError, match="RuntimeError"):
        xpjit.from_sycl_usm_array_interface(Raises(), device=dev)
    with pytest.raises(xpjit.InvalidArgumentError, match="RuntimeError"):
        prog.axpb(16, np.float32(1), np.float32(1), Raises(),
                  queue=dev.queue)
    with pytest.raises(xpjit.InvalidArgumentError, match="RuntimeError"):
        xpjit.asarray(Raises(), device=dev)
    np.testing.assert_array_equal(dpt.asnumpy(x), np.arange(16))
    # read-only: an input, never an output
    ro = Iface(_good(x, data=(_addr(x), True)), keep=x)
    out = xpjit.asarray(np.zeros(16, np.float32), device=dev)
    prog.copy(16, ro, out, queue=dev.queue)
    np.testing.assert_array_equal(out.get(), np.arange(16))
    for _ in range(3):  # both launch paths
        with pytest.raises(xpjit.InvalidArgumentError, match="read-only"):
            prog.axpb(16, np.float32(1), np.float32(1), ro, queue=dev.queue)
        a = xpjit.asarray(ro, device=dev)
        with pytest.raises(xpjit.InvalidArgumentError, match="read-only"):
            prog.axpb(16, np.float32(1), np.float32(1), a)
    with pytest.raises(xpjit.InvalidArgumentError, match="read-only"):
        a.set(np.zeros(16, np.float32))
    np.testing.assert_array_equal(dpt.asnumpy(x), np.arange(16))
    del a, ro, out
    assert _no_imports_left()


def test_opencl_refusals(ocl, q, monkeypatch):
    """What the OpenCL device refuses, made to happen on the one device
    there is: USM of another cl_device_id; USM of another context (dpctl's)
    on a device that is not a CPU (where it would not be valid); xpjit's
    own context stays valid whatever the device."""
    x = dpt.ones(4, dtype="f4", device=q)
    mine = xpjit.get_context().devices("opencl")[0]
    real = xpjit.Device._native

    def other_device(self, what):
        h = real(self, what)
        return h + 8 if what == xpjit._lib.NATIVE_DEVICE else h
    monkeypatch.setattr(xpjit.Device, "_native", other_device)
    with pytest.raises(xpjit.InvalidArgumentError,
                       match="another OpenCL device"):
        xpjit.from_sycl_usm_array_interface(x, device=mine)
    # without a device: the CPU device takes it (host memory)
    assert xpjit.from_sycl_usm_array_interface(x).device.backend == "cpu"
    monkeypatch.undo()
    z = xpjit.zeros(4, np.float32, device=ocl)
    t = dpt.asarray(z)
    monkeypatch.setattr(xpjit.Device, "device_type", property(
        lambda self: "gpu"))
    with pytest.raises(xpjit.InvalidArgumentError,
                       match="another OpenCL context"):
        xpjit.from_sycl_usm_array_interface(x, device=ocl)
    assert xpjit.from_sycl_usm_array_interface(t, device=ocl).ptr == z.ptr
    monkeypatch.undo()


def test_gpu_device_usm_is_not_host_memory(q, monkeypatch):
    """Device USM of a device that is not a CPU is no host memory: the CPU
    device refuses it; host and shared USM it takes (made to happen by
    calling dpctl's CPU device a GPU)."""
    monkeypatch.setattr(_sycl, "is_cpu_device", lambda d: False)
    cpu = xpjit.Device("cpu")
    x = dpt.ones(4, dtype="f4", device=q, usm_type="device")
    with pytest.raises(xpjit.InvalidArgumentError, match="host cannot"):
        xpjit.from_sycl_usm_array_interface(x, device=cpu)
    for kind in ("shared", "host"):
        y = dpt.ones(4, dtype="f4", device=q, usm_type=kind)
        assert xpjit.from_sycl_usm_array_interface(y, device=cpu).ptr == \
            _addr(y)


def test_empty(prog, dev, q):
    x = dpt.empty((0, 3), dtype="f4", device=q)
    a = xpjit.from_sycl_usm_array_interface(x, device=dev)
    assert a.shape == (0, 3) and a.size == 0


def test_other_backend_path(prog, ocl, q, monkeypatch):
    """Where dpctl's device is not OpenCL, the USM type comes from dpctl's
    C library (DPCTLUSM_GetPointerType), at both ends of the view: taken
    by the CPU device (host memory), refused by OpenCL (not its backend).
    Run here on opencl:cpu with the OpenCL route turned off."""
    monkeypatch.setattr(_sycl, "is_opencl", lambda d: False)
    x = dpt.arange(8, dtype="f4", device=q)
    cpu = xpjit.Device("cpu")
    prog.axpb(8, np.float32(2), np.float32(0), x, queue=cpu.queue)
    np.testing.assert_array_equal(dpt.asnumpy(x), np.arange(8) * 2)
    with pytest.raises(xpjit.InvalidArgumentError, match="another backend"):
        xpjit.from_sycl_usm_array_interface(x, device=ocl)
    host = np.zeros(4, np.float32)
    with pytest.raises(xpjit.InvalidArgumentError, match="not USM"):
        xpjit.from_sycl_usm_array_interface(
            Iface(_good(x, data=(host.ctypes.data, False), shape=(4,))),
            device=cpu)


def test_unverified_libsycl(ocl, q, monkeypatch):
    """A libsycl whose version xpjit has not checked, or that lacks a
    symbol: refused before any call (AttributeError for the property)."""
    z = xpjit.zeros(4, np.float32, device=ocl)
    for patch in (("_VERIFIED", ()),
                  ("_SYMBOLS", dict(_sycl._SYMBOLS,
                                    make_context="_ZN4sycl3_V1nosuch"))):
        monkeypatch.setattr(_sycl, patch[0], patch[1])
        monkeypatch.setattr(_sycl, "_sycl_calls", None)
        monkeypatch.setattr(_sycl, "_queues", {})
        with pytest.raises(AttributeError, match="libsycl"):
            z.__sycl_usm_array_interface__
        with pytest.raises(xpjit.UnsupportedError, match="libsycl"):
            xpjit.from_sycl_usm_array_interface(dpt.ones(2, device=q),
                                                device=ocl)
        monkeypatch.undo()
