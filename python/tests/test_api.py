"""The Python API itself: devices, queues and events, programs and
specialisation, device arrays, DLPack, and every kind of bad input giving
an exception with the library's message (never a crash)."""
import gc
import os
import subprocess
import sys

import numpy as np
import pytest

import xpjit
from conftest import EXAMPLES

SRC = """
kernel scale<T>(a: T, x: global T[*]) range {
    let i = global_id(0);
    if i < size(x) { x[i] *= a; }
}
kernel mixed<T, U>(x: global const T[], y: global U[], k: i32) range {
    let i = global_id(0);
    if i < shape(y, 0) { y[i] = U(x[i]) + U(k); }
}
kernel sized<T, const N: i64>(x: global T[]) range {
    let i = global_id(0);
    if i < shape(x, 0) { x[i] = T(N); }
}
kernel two<T>(a: global const T[], b: global T[]) range {
    let i = global_id(0);
    if i < shape(b, 0) { b[i] = a[i]; }
}
kernel unbound<T>(x: global f32[]) range {
    if global_id(0) == 0 { x[0] = f32(T(3)); }
}
kernel group_ids(out: global i64[], scratch: local i64[]) ndrange(1) {
    scratch[local_id(0)] = group_id(0);
    barrier(local);
    out[global_id(0)] = scratch[local_id(0)];
}
"""


@pytest.fixture(scope="module")
def prog():
    return xpjit.Program(SRC, name="api.xpk")


def test_devices_and_info():
    devs = xpjit.devices()
    assert devs and devs[0].backend == "cpu"
    cpu = xpjit.Device("cpu")
    assert cpu == devs[0] and cpu.id == "cpu:0"
    info = cpu.info
    assert info["compute_units"] >= 1 and info["target"].startswith("cpu:")
    with pytest.raises(xpjit.NotFoundError, match="cuda"):
        xpjit.Device("cuda:7")
    with pytest.raises(xpjit.InvalidArgumentError):
        xpjit.Device("cpu:[")
    with cpu as d:
        assert xpjit.get_device() is d


def test_infers_dtypes_and_ndim(prog):
    for dt in (np.float32, np.float64, np.int32, np.int16, np.uint8):
        x = np.arange(24, dtype=dt).reshape(2, 3, 4)
        prog.scale(x.size, dt(3), x)
        np.testing.assert_array_equal(x, np.arange(24, dtype=dt).reshape(
            2, 3, 4) * 3)
    y = np.zeros(5, np.float64)
    prog.mixed(5, np.arange(5, dtype=np.int16), y, 10)
    np.testing.assert_array_equal(y, np.arange(5) + 10.0)
    # a const parameter, given by name
    z = np.zeros(3, np.int64)
    prog.sized(3, z, consts={"N": 42})
    assert list(z) == [42, 42, 42]
    # explicit dtypes, several ways
    k = prog.kernel("scale")
    assert k.specialize({"T": "f32"}, ndim=1).signature.startswith("scale(")
    assert k.specialize("T=f64", ndim=2) is k.specialize([np.float64], ndim=2)


def test_python_scalars_are_weak(prog):
    x = np.ones(4, np.float32)
    prog.scale(4, 2, x)          # an int for T bound to f32 by x
    prog.scale(4, 0.5, x)
    np.testing.assert_array_equal(x, np.ones(4))


def test_bad_arguments_raise(prog):
    x = np.ones(8, np.float32)
    with pytest.raises(xpjit.InvalidArgumentError, match="takes 2 arguments"):
        prog.scale(8, 1.0)
    with pytest.raises(xpjit.SpecializationError, match="T is f32"):
        prog.two(8, x, np.zeros(8, np.float64))
    with pytest.raises(xpjit.InvalidArgumentError,
                       match="given an array of f64"):
        prog.mixed(8, x, np.zeros(8, np.float64), 1, dtypes={"U": "f32"})
    with pytest.raises(xpjit.SpecializationError, match="cannot infer T"):
        prog.unbound(1, np.zeros(1, np.float32))
    prog.unbound(1, x, dtypes={"T": "i8"})
    assert x[0] == 3
    with pytest.raises(xpjit.InvalidArgumentError, match="must be an array"):
        prog.scale(8, 1.0, [1.0, 2.0])
    ro = np.ones(8, np.float32)
    ro.flags.writeable = False
    with pytest.raises(xpjit.InvalidArgumentError, match="not writable"):
        prog.scale(8, 1.0, ro)
    with pytest.raises(xpjit.InvalidArgumentError, match="out of the range"):
        prog.mixed(8, x, np.zeros(8, np.float32), 2 ** 31)
    with pytest.raises(xpjit.InvalidArgumentError, match="is i32"):
        prog.mixed(8, x, np.zeros(8, np.float32), 1.5)
    # an int or a float for a float parameter is rounded to it as NumPy
    # converts it (beyond its range: an infinity); an int no double can
    # hold is out of range (docs/python.md)
    h = np.ones(2, np.float16)
    prog.scale(2, 65519, h)      # rounds to 65504
    assert h[0] == 65504
    h[:] = 1
    prog.scale(2, 100000, h)
    assert np.isinf(h[0]) and h[0] > 0
    h[:] = 1
    prog.scale(2, -1e6, h)
    assert np.isinf(h[0]) and h[0] < 0
    with pytest.raises(xpjit.InvalidArgumentError,
                       match="out of the range of f64"):
        prog.scale(8, 2 ** 1024, np.ones(8, np.float64))
    with pytest.raises(xpjit.InvalidArgumentError, match="grid"):
        prog.scale((1, 2, 3, 4), 1.0, x)
    with pytest.raises(xpjit.SpecializationError):
        prog.scale(8, 1.0, np.ones(8, np.complex64))
    with pytest.raises(xpjit.SpecializationError, match="no type parameter"):
        prog.scale(8, 1.0, x, dtypes={"Q": "f32"})
    with pytest.raises(xpjit.SpecializationError):
        prog.sized(3, np.zeros(3))  # N not given
    # the C launch checks: a strided view whose stride is not an element
    rec = np.zeros(8, dtype=[("a", np.float32), ("b", np.int8)])
    with pytest.raises((xpjit.InvalidArgumentError,
                        xpjit.SpecializationError)):
        prog.scale(8, 1.0, rec["a"])
    # an nd-range kernel with a local size that does not divide the grid
    with pytest.raises(xpjit.InvalidArgumentError, match="multiple"):
        prog.group_ids[10, 4](np.zeros(10, np.int64), 4)
    with pytest.raises(xpjit.NotFoundError):
        prog.kernel("nope")
    with pytest.raises(AttributeError):
        prog.nope


def test_local_memory_and_ndrange(prog):
    out = np.zeros(64, np.int64)
    prog.group_ids[64, 16](out, xpjit.LocalMemory(16))
    np.testing.assert_array_equal(out, np.arange(64) // 16)
    with pytest.raises(xpjit.InvalidArgumentError, match="local"):
        prog.group_ids[64, 16](out, 0)


def test_syntax_errors_carry_diagnostics():
    with pytest.raises(xpjit.KernelSyntaxError) as e:
        xpjit.Program("kernel k(x: global f32[]) range {\n  x[0] = ;\n}\n",
                      name="broken.xpk")
    assert "broken.xpk:2:" in str(e.value)
    assert e.value.diagnostics and e.value.diagnostics[0][1] == 2
    assert e.value.status_name == "SYNTAX"
    with pytest.raises(xpjit.XpjitError, match="nonexistent"):
        xpjit.Program.from_file("/nonexistent/k.xpk")
    with pytest.raises(xpjit.KernelSyntaxError):
        xpjit.Program(b"\xff\xfe garbage \x00")


def test_queues_events_profiling(prog):
    q = xpjit.Queue(profiling=True)
    x = xpjit.zeros(1000, np.float32)
    x.fill(1.0, queue=q)
    ev = prog.kernel("scale").launch(1000, np.float32(2), x, queue=q)
    ev.wait()
    assert ev.state == "complete"
    queued, start, end = ev.profile()
    assert queued <= start <= end and ev.elapsed_ns >= 0
    np.testing.assert_array_equal(x.get(q), np.full(1000, 2.0, np.float32))
    q.close()
    with pytest.raises(xpjit.InvalidArgumentError, match="closed"):
        prog.scale(1000, np.float32(2), x, queue=q)
    with pytest.raises(xpjit.InvalidArgumentError, match="closed"):
        q.wait()
    q.close()  # twice: fine


def test_cancel_and_async_errors(prog):
    q = xpjit.Queue()
    q.cancel()
    q.wait()  # nothing was queued: no error


def test_device_arrays():
    a = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    d = xpjit.asarray(a)
    assert d.shape == (3, 4, 5) and d.dtype == np.float64
    np.testing.assert_array_equal(d.get(), a)
    np.testing.assert_array_equal(d[1].get(), a[1])
    np.testing.assert_array_equal(d[:, ::-2, 1:4].get(), a[:, ::-2, 1:4])
    np.testing.assert_array_equal(d.T.get(), a.T)
    np.testing.assert_array_equal(d[..., None, 2].get(), a[..., None, 2])
    assert d[2, 3, 4].shape == ()
    with pytest.raises(xpjit.InvalidArgumentError):
        d[[0, 2]]
    z = xpjit.zeros((2, 3), np.int32)
    np.testing.assert_array_equal(z.get(), np.zeros((2, 3), np.int32))
    z.set(np.ones((2, 3), np.int32))
    np.testing.assert_array_equal(z.get(), np.ones((2, 3)))
    with pytest.raises(xpjit.InvalidArgumentError, match="shape"):
        z.set(np.ones(4, np.int32))
    with pytest.raises(ValueError):
        xpjit.empty(3, np.complex128)
    e = xpjit.empty(0, np.float32)
    assert e.get().shape == (0,)
    with pytest.raises(xpjit.InvalidArgumentError):
        xpjit.empty((-1, 2))


def test_dlpack_zero_copy():
    # NumPy -> xpjit: the same memory, strides kept
    a = np.arange(20, dtype=np.float32).reshape(4, 5)[::-1, 1::2]
    x = xpjit.from_dlpack(a)
    assert x.ptr == a.__array_interface__["data"][0]
    assert x.strides == a.strides and x.shape == a.shape
    np.testing.assert_array_equal(x.get(), a)
    # xpjit -> NumPy: the same memory
    d = xpjit.asarray(np.arange(12, dtype=np.int64).reshape(3, 4))
    n = np.from_dlpack(d)
    assert n.__array_interface__["data"][0] == d.ptr
    np.testing.assert_array_equal(n, np.arange(12).reshape(3, 4))
    v = np.from_dlpack(d[:, ::-1])
    assert v.__array_interface__["data"][0] == d.ptr + 3 * 8
    np.testing.assert_array_equal(v, np.arange(12).reshape(3, 4)[:, ::-1])
    # a kernel writes through the DLPack view into NumPy's memory
    prog = xpjit.Program(SRC)
    base = np.ones(6, np.float64)
    prog.scale(6, 4.0, xpjit.from_dlpack(base))
    np.testing.assert_array_equal(base, np.full(6, 4.0))
    # round trip, and nothing leaks
    import xpjit._array as A
    back = np.from_dlpack(xpjit.from_dlpack(np.arange(3.0)))
    np.testing.assert_array_equal(back, np.arange(3.0))
    del n, v, back, x
    gc.collect()
    assert not A._exported
    cap = d.__dlpack__()
    del cap
    gc.collect()
    assert not A._exported
    with pytest.raises(xpjit.InvalidArgumentError):
        xpjit.from_dlpack([1, 2, 3])


def test_program_from_file_and_binary():
    p = xpjit.Program.from_file(os.path.join(EXAMPLES, "axpy.xpk"))
    assert "axpy" in p.kernel_names
    ptx = p.get_binary("axpy", "ptx:sm_80", dtypes={"T": "f32"}, ndim=1)
    assert b".entry" in ptx
    with pytest.raises(xpjit.InvalidArgumentError):
        p.get_binary("axpy", "nonsense-target", dtypes={"T": "f32"}, ndim=1)


def test_cache_reachable(tmp_path):
    ctx = xpjit.Context(cache="rw", cache_path=str(tmp_path / "c.db"),
                        bundles=False)
    p = xpjit.Program("kernel k(x: global i32[]) range { x[0] = 7; }",
                      context=ctx)
    x = np.zeros(1, np.int32)
    p.k(1, x, queue=xpjit.Queue(ctx.device("cpu")))
    assert x[0] == 7
    c = ctx.cache_counters()
    assert c["compiles"] + c["l2_hits"] + c["daemon_hits"] >= 1
    s = ctx.cache_stats()
    assert "entries" in s and s["max_size"] > 0
    assert isinstance(xpjit.cache_stats()["entries"], int)
    with pytest.raises(xpjit.InvalidArgumentError):
        xpjit.Context(cache="sometimes")
    x[0] = 0  # the default device is of another context: the program's
    p.k(1, x)  # context's default device runs it
    assert x[0] == 7
    ctx2 = xpjit.Context(checks="bounds", cache="off")
    oob = xpjit.Program(
        "kernel oob(x: global i32[]) range { x[global_id(0) + 5] = 1; }",
        context=ctx2)
    with pytest.raises(xpjit.BoundsError, match="oob"):
        oob.oob(4, np.zeros(4, np.int32), queue=xpjit.Queue(
            ctx2.device("cpu")))


def test_hits_recorded_at_exit(tmp_path):
    """An interpreter ends without destroying its default context, and so
    without closing its cache: the uses of its hits were never written
    (stats counted no hits of Python processes, and prune --older-than or
    eviction removed kernels they used all the time). An atexit handler
    settles them."""
    code = """
import numpy as np, xpjit
p = xpjit.Program("kernel k(x: global i32[]) range { x[0] = 7; }")
x = np.zeros(1, np.int32)
p.k(1, x)
assert x[0] == 7
"""
    env = dict(os.environ, XPJIT_CACHE_DIR=str(tmp_path / "c"),
               XPJIT_DAEMON="off", XPJIT_DEVICE="cpu", XPJIT_CACHE="rw")
    for _ in range(3):  # a compile, then two hits
        r = subprocess.run([sys.executable, "-c", code], capture_output=True,
                           text=True, env=env)
        assert r.returncode == 0, r.stderr
    ctx = xpjit.Context(cache="rw", bundles=False,
                        cache_path=str(tmp_path / "c" / "cache-v2.db"))
    s = ctx.cache_stats()
    ctx.close()
    assert s["entries"] == 1 and s["l2_hits"] == 2, s


def test_versions():
    v = xpjit.versions()
    assert v["xpjit"] == xpjit.__version__ and "llvm" in v


def test_fast_path_checks_like_the_slow_one(prog):
    """Calls the C launch path knows (same dtypes, ranks and kinds) still
    get every check: what it would have to judge goes the slow way."""
    import xpjit._program as P
    if os.environ.get("XPJIT_PYTHON_PURE"):
        assert P._fast is None
        pytest.skip("pure Python (XPJIT_PYTHON_PURE)")
    assert P._fast is not None, "the C launch path was not built (make)"
    k = prog.kernel("mixed")
    x = np.arange(8, dtype=np.float32)
    y = np.zeros(8, np.float32)
    k(8, x, y, 1)
    k(8, x, y, 2)  # known now
    assert k._fast_memo
    np.testing.assert_array_equal(y, x + 2)
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    with pytest.raises(xpjit.InvalidArgumentError, match="not writable"):
        k(8, x, ro, 1)
    with pytest.raises(xpjit.InvalidArgumentError, match="out of the range"):
        k(8, x, y, 2 ** 40)
    ks = prog.kernel("scale")    # the same through a known call
    h = np.ones(2, np.float16)
    ks(2, 2, h)
    ks(2, 0.5, h)
    ks(2, 70000, h)
    assert np.isinf(h[0])
    with pytest.raises(xpjit.InvalidArgumentError, match="out of the range"):
        ks(2, 2 ** 1024, h)
    with pytest.raises(xpjit.InvalidArgumentError, match="is i32"):
        k(8, x, y, 1.5)
    k(8, x, y, np.int32(3))      # a NumPy scalar of the type
    k(8, x, y, np.int16(4))      # one that converts (the slow path)
    np.testing.assert_array_equal(y, x + 4)
    rec = np.zeros(8, dtype=[("a", np.float32), ("b", np.int8)])
    with pytest.raises(xpjit.XpjitError):
        k(8, x, rec["a"], 1)
    # a launch error from the library, through the fast path
    with pytest.raises(xpjit.InvalidArgumentError):
        k((8, 0), x, y, 1)
    q = xpjit.Queue()
    k(8, x, y, 5, queue=q)
    k(8, x, y, 6, queue=q)
    q.close()
    with pytest.raises(xpjit.InvalidArgumentError, match="closed"):
        k(8, x, y, 7, queue=q)
    np.testing.assert_array_equal(y, x + 6)
    # device arrays: asynchronous, the same results
    xd, yd = xpjit.asarray(x), xpjit.zeros(8, np.float32)
    for v in range(3):
        k(8, xd, yd, v)
    np.testing.assert_array_equal(yd.get(), x + 2)


# ---- regressions from an adversarial review (each crashed or was wrong) ----

def test_closed_program_raises(prog):
    p = xpjit.Program(SRC)
    k = p.kernel("scale")
    x = np.ones(4, np.float32)
    k(4, np.float32(2), x)
    k(4, np.float32(2), x)  # known to the C launch path
    spec = k.specialize({"T": "f32"}, ndim=1)
    p.close()
    for _ in range(2):
        with pytest.raises(xpjit.InvalidArgumentError, match="closed"):
            k(4, np.float32(2), x)
    with pytest.raises(xpjit.InvalidArgumentError, match="closed"):
        spec.signature


def test_context_closed_or_collected_with_live_arrays():
    ctx = xpjit.Context(cache="off")
    dev = ctx.device("cpu")
    a = xpjit.zeros(16, np.float32, device=dev)
    ctx.close()
    with pytest.raises(xpjit.InvalidArgumentError, match="closed"):
        xpjit.zeros(4, device=dev)
    del a  # frees its memory, then the context goes
    gc.collect()

    class Holder:
        pass
    h = Holder()
    h.ctx = xpjit.Context(cache="off")
    h.arrays = [xpjit.zeros(8, device=h.ctx.device("cpu")) for _ in range(3)]
    h.me = h  # a cycle: the collector finalises all of it in any order
    del h
    gc.collect()


def test_keep_alive_outlives_an_earlier_wait(prog):
    q = xpjit.Queue()
    y = np.zeros(1 << 16, np.float32)
    ev = prog.kernel("scale").launch(y.size, np.float32(2), y, queue=q,
                                     wait=False)
    # a wait that returned before this launch was queued (another
    # thread's) must not drop what the launch uses
    if ev.state in ("queued", "running"):
        q._release_keep()
        assert any(objs for e, objs in q._keep)
    q.wait()
    assert not q._keep
    q.close()


def test_zeros_is_ready_for_any_queue(prog):
    for _ in range(20):
        q = xpjit.Queue()
        x = xpjit.zeros(1 << 16, np.float32)   # filled on the default queue
        prog.scale(x.size, np.float32(3), x, queue=q)
        assert not x.get(q).any()
        q.close()


def test_sizes_and_values_out_of_range(prog):
    x = np.ones(8, np.float32)
    for grid in (2 ** 64 + 3, -1, 0, 3.0, (2, 2 ** 70)):
        with pytest.raises(xpjit.InvalidArgumentError):
            prog.scale(grid, np.float32(1), x)
    with pytest.raises(xpjit.InvalidArgumentError):
        prog.group_ids[8, 2 ** 64 + 2](np.zeros(8, np.int64), 4)
    with pytest.raises(xpjit.InvalidArgumentError):
        xpjit.LocalMemory(2 ** 64 + 4)
    with pytest.raises(xpjit.InvalidArgumentError):
        prog.group_ids[8, 4](np.zeros(8, np.int64), True)
    with pytest.raises(xpjit.InvalidArgumentError, match="range of f32"):
        prog.scale(8, 2 ** 1030, x)
    with pytest.raises(xpjit.InvalidArgumentError, match="dimensions"):
        prog.two(1, np.zeros((1,) * 9, np.float32), np.zeros(1, np.float32))
    with pytest.raises(xpjit.InvalidArgumentError, match="too large"):
        xpjit.empty((2 ** 62 + 1, 4), np.float32)
    with pytest.raises(xpjit.InvalidArgumentError):
        xpjit.empty(3, np.complex64)
    with pytest.raises(xpjit.InvalidArgumentError):
        xpjit.Queue(42)


def test_other_buffers_are_refused_on_both_paths(prog):
    import array
    import ctypes
    x = np.ones(4, np.float32)
    prog.scale(4, np.float32(2), x)
    prog.scale(4, np.float32(2), x)  # known to the C launch path
    for other in (array.array("f", [1, 2, 3, 4]),
                  memoryview(np.ones(4, np.float32)),
                  (ctypes.c_float * 4)(1, 2, 3, 4), bytearray(16)):
        with pytest.raises(xpjit.InvalidArgumentError, match="array"):
            prog.scale(4, np.float32(2), other)


def test_dlpack_refused_or_dropped_capsules_free_their_arrays():
    import xpjit._array as A
    from xpjit._accel import _fast
    if _fast is not None:
        # the capsule's destructor is C's: it runs with the consumer's
        # exception pending, keeps it, and frees the array (without the C
        # module, Python reports a SystemError there and the array stays)
        d = xpjit.asarray(np.array([True, False]))
        try:
            np.from_dlpack(d)  # NumPy 1.24 refuses bool; the capsule goes
        except (RuntimeError, BufferError, TypeError):
            pass
    cap = xpjit.zeros(3).__dlpack__()
    del cap
    gc.collect()
    assert not A._exported
    with pytest.raises(xpjit.InvalidArgumentError):
        class Fake:
            def __dlpack__(self):
                return 42

            def __dlpack_device__(self):
                return (1, 0)
        xpjit.from_dlpack(Fake())
    if xpjit.devices("opencl"):
        with pytest.raises(xpjit.InvalidArgumentError, match="CPU device"):
            xpjit.from_dlpack(np.ones(3), device=xpjit.Device("opencl"))


def test_current_device_decides_where_numpy_calls_go(prog):
    if not xpjit.devices("opencl"):
        pytest.skip("no OpenCL device")
    x = np.ones(8, np.float32)
    for _ in range(2):  # the second call known to the C launch path
        prog.scale(8, np.float32(2), x)
    with xpjit.Device("opencl"):
        # the OpenCL device's queue: NumPy's memory is not its memory
        with pytest.raises(xpjit.InvalidArgumentError, match="opencl"):
            prog.scale(8, np.float32(2), x)
    prog.scale(8, np.float32(2), x)  # the CPU's again
    np.testing.assert_array_equal(x, np.full(8, 8.0))


def test_call_keywords_and_contexts_on_both_paths(prog):
    """From a second review: keywords the call does not take are a
    TypeError also on the C path; a new default context moves the current
    queue; a scalar of a type xpjit has none for is a SpecializationError."""
    x = np.ones(4, np.float32)
    for _ in range(2):
        prog.scale(4, np.float32(1), x)
    for kw in ({"bogus": None}, {"Local": None}, {"grid": None}):
        with pytest.raises(TypeError):
            prog.scale(4, np.float32(1), x, **kw)
    prog.scale(4, np.float32(2), x, local=None, queue=None, dtypes=None,
               consts=None, ndim=None, wait=None)
    np.testing.assert_array_equal(x, np.full(4, 2.0))
    only_scalar = xpjit.Program(
        "kernel s<T>(v: T, out: global f32[]) range { out[0] = f32(v); }")
    for v in (np.longdouble(1), np.complex64(1), np.datetime64(1, "s")):
        with pytest.raises(xpjit.SpecializationError):
            only_scalar.s(1, v, np.zeros(1, np.float32))
    other = xpjit.Context(cache="off")
    old = xpjit.set_context(other)
    try:
        # the program is of the old context; the current queue is now the
        # new one's, which is not the program's: both paths run it on the
        # program's context's default device (both refused it before)
        for _ in range(2):
            prog.scale(4, np.float32(2), x)
        np.testing.assert_array_equal(x, np.full(4, 8.0))
    finally:
        xpjit.set_context(old)
    prog.scale(4, np.float32(0.5), x)
    np.testing.assert_array_equal(x, np.full(4, 4.0))


def test_foreign_memory_is_imported(prog):
    """Memory of another library comes in through xpj_mem_import, checked
    like xpjit's own and never freed by it: a __cuda_array_interface__
    object (here over NumPy's memory, given to the CPU device: the same
    path a CUDA array takes to cuda:N)."""
    base = np.ones(16, np.float32)

    class Foreign:
        __cuda_array_interface__ = {
            "data": (base.ctypes.data, False), "shape": (4, 4),
            "typestr": "<f4", "version": 3, "strides": None}
    cpu = xpjit.Device("cpu")
    a = xpjit.from_cuda_array_interface(Foreign(), device=cpu)
    assert a.ptr == base.ctypes.data and a.shape == (4, 4)
    prog.scale(16, np.float32(3), a)
    cpu.synchronize()
    np.testing.assert_array_equal(base, np.full(16, 3.0))
    # a view past the imported range is refused by the launch check
    with pytest.raises(xpjit.InvalidArgumentError, match="allocation"):
        prog.two(8, xpjit.ndarray((8,), np.float32, cpu, strides=(8,),
                                  _mem=a._mem, _ptr=a.ptr + 32), a[0])
    del a
    gc.collect()  # let go (xpj_mem_free of an import): NumPy's still
    base[0] = 5.0
    with pytest.raises(xpjit.InvalidArgumentError, match="malformed"):
        class Bad:
            __cuda_array_interface__ = {"shape": (2,)}
        xpjit.from_cuda_array_interface(Bad(), device=cpu)

    # read-only memory (the interface says so) is no output, on both
    # launch paths (the C one leaves it to Python), and no set()/fill()
    class ReadOnly:
        __cuda_array_interface__ = {
            "data": (base.ctypes.data, True), "shape": (16,),
            "typestr": "<f4", "version": 3, "strides": None}
    ro = xpjit.from_cuda_array_interface(ReadOnly(), device=cpu)
    assert not ro.flags["WRITEABLE"] and not ro[2:].flags["WRITEABLE"]
    for _ in range(3):
        with pytest.raises(xpjit.InvalidArgumentError, match="read-only"):
            prog.scale(16, np.float32(2), ro)
    with pytest.raises(xpjit.InvalidArgumentError, match="read-only"):
        ro.fill(1)
    np.testing.assert_array_equal(base[1:], np.full(15, 3.0))
    del ro
    gc.collect()
    # a malformed __sycl_usm_array_interface__ is refused before dpctl is
    # asked anything (tests/test_suai.py has the rest)
    class Usm:
        __sycl_usm_array_interface__ = {"data": (0, False), "shape": (1,)}
    with pytest.raises(xpjit.InvalidArgumentError, match="version None"):
        prog.scale(1, np.float32(1), Usm())


def test_suai_without_dpctl():
    """dpctl's __sycl_usm_array_interface__ without dpctl (the rest is
    tests/test_suai.py): no interface on OpenCL arrays (hasattr is False), a
    well-formed foreign interface refused with UnsupportedError."""
    code = r"""
import sys
sys.modules["dpctl"] = None  # import dpctl fails
import numpy as np, xpjit
class U:
    __sycl_usm_array_interface__ = {"data": (4096, False), "shape": (1,),
        "typestr": "<f4", "version": 1, "syclobj": "opencl:cpu"}
try:
    xpjit.asarray(U(), device=xpjit.Device("cpu"))
except xpjit.UnsupportedError as e:
    assert "dpctl" in str(e), e
    print("refused")
ds = xpjit.get_context().devices("opencl")
if ds:
    z = xpjit.zeros(2, np.float32, device=ds[0])
    assert not hasattr(z, "__sycl_usm_array_interface__")
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["refused", "ok"]


def test_daemon_per_context(tmp_path):
    """Context(daemon=...) asks the xpjitd it names, whatever XPJIT_DAEMON
    says; "off" never asks one (xpj_context_desc.daemon)."""
    bindir = os.path.join(os.path.dirname(os.path.dirname(
        xpjit._lib.path)), "bin")
    xpjitd = os.path.join(bindir, "xpjitd")
    if not os.path.exists(xpjitd):
        pytest.skip("no xpjitd next to %s" % xpjit._lib.path)
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    sock = str(run / "xpjitd.sock")
    env = dict(os.environ, XPJIT_CACHE_DIR=str(tmp_path / "dcache"))
    subprocess.run([xpjitd, "--socket", sock, "--log",
                    str(tmp_path / "dlog")], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    src = "kernel seven(x: global i32[]) range { x[global_id(0)] = 7; }"
    old = os.environ.get("XPJIT_DAEMON")
    os.environ["XPJIT_DAEMON"] = "off"  # read at context creation
    try:
        for daemon, origin in ((sock, "daemon"), ("off", "compiled")):
            ctx = xpjit.Context(cache="off", bundles=False, daemon=daemon)
            p = xpjit.Program(src, context=ctx)
            x = np.zeros(3, np.int32)
            k = p.kernel("seven")
            k(3, x, queue=xpjit.Queue(ctx.device("cpu")))
            assert list(x) == [7, 7, 7]
            assert k.specialize(device=ctx.device("cpu")).origin == origin
            c = ctx.cache_counters()
            assert c["daemon_hits"] == (daemon == sock)
            p.close()
            ctx.close()
    finally:
        if old is None:
            del os.environ["XPJIT_DAEMON"]
        else:
            os.environ["XPJIT_DAEMON"] = old
        subprocess.run([os.path.join(bindir, "xpjit-cli"), "daemon", "stop",
                        "--socket", sock], stdout=subprocess.DEVNULL)


def test_dlpack_from_another_producer():
    """DLPack from a producer that is not NumPy: Apache Arrow's C++
    exporter (pyarrow.Array.__dlpack__; .ci/run installs pyarrow into the
    tests' venv): the same memory, read and written by a kernel, kept alive
    by the xpjit array; and Arrow's refusal (nulls) reaches the caller."""
    if os.environ.get("XPJIT_REQUIRE_PYTHON"):  # CI: installed
        import pyarrow as pa
    else:
        pa = pytest.importorskip("pyarrow")
    src = np.arange(1000, dtype=np.float64)
    arr = pa.array(src.tolist(), type=pa.float64())  # Arrow's own memory
    addr = arr.buffers()[1].address
    x = xpjit.from_dlpack(arr)
    assert x.ptr == addr and x.shape == (1000,) and x.dtype == np.float64
    np.testing.assert_array_equal(x.get(), src)
    # Arrow arrays are immutable by contract, but the memory is the one a
    # kernel sees: the write shows through Arrow (zero copies)
    prog = xpjit.Program(SRC)
    prog.scale(1000, 3.0, x)
    np.testing.assert_array_equal(arr.to_numpy(), src * 3)
    del arr
    gc.collect()
    np.testing.assert_array_equal(x.get(), src * 3)  # the capsule holds it
    i32 = pa.array(np.arange(7, dtype=np.int32))
    y = xpjit.from_dlpack(i32)
    assert y.dtype == np.int32 and y.ptr == i32.buffers()[1].address
    with pytest.raises(Exception, match="null"):
        xpjit.from_dlpack(pa.array([1.0, None]))


def test_fp_contract_option():
    src = ("kernel muladd(a: global const f32[], b: global const f32[],\n"
           "              c: global f32[]) range {\n"
           "    let i = global_id(0);\n"
           "    if i < shape(c, 0) { c[i] = a[i] * b[i] + c[i]; }\n"
           "}\n")
    plain = xpjit.Program(src).get_binary("muladd", "ptx:sm_90")
    fused = xpjit.Program(src, options={"fp_contract": 1}).get_binary(
        "muladd", "ptx:sm_90")
    assert b"fma.rn.f32" not in plain and b"fma.rn.f32" in fused
    with pytest.raises(xpjit.InvalidArgumentError, match="fp_contract"):
        xpjit.Program(src, options={"fp_contrakt": 1})
    # on the CPU device: the same kernel, still within a rounding of the sum
    k = xpjit.Program(src, options={"fp_contract": 1}).kernel("muladd")
    a = np.linspace(0.1, 2.0, 1000, dtype=np.float32)
    b = np.linspace(3.0, 0.5, 1000, dtype=np.float32)
    c = np.ones(1000, dtype=np.float32)
    want = a * b + c
    k(1000, a, b, c)
    np.testing.assert_allclose(c, want, rtol=2e-7)


def test_unknown_call_keyword():
    """A keyword a launch does not take names the kernel and what it
    takes (it named a private method)."""
    p = xpjit.Program("kernel cp(x: global const f32[], y: global f32[]) "
                      "range { let i = global_id(0); y[i] = x[i]; }")
    x = np.ones(4, np.float32)
    y = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match="kernel cp: unknown keyword "
                       "argument foo"):
        p.kernel("cp")(4, x, y, foo=1)
    p.kernel("cp")(4, x, y)
    np.testing.assert_array_equal(y, x)


# ---- regressions from an outside probe (wrong answers and unclear errors;
# its crashes are test_threads_signals.py's) ----

def test_diagnostics_severity():
    """An error diagnostic says "error" (it said "note": the severities
    were read in the wrong order)."""
    with pytest.raises(xpjit.KernelSyntaxError) as e:
        xpjit.Program("kernel k(x: global f32[]) range { x[0] = 1 }",
                      name="s.xpk")
    assert ": error: " in str(e.value)
    assert [d[3] for d in e.value.diagnostics] == ["error"]


def test_fill_checks_like_a_scalar_argument(device):
    """fill() takes what a kernel's scalar argument of the element type
    takes (it wrapped 300 to 44 in u8, -1 to 255, and truncated 2.7)."""
    a = xpjit.zeros(3, np.uint8, device=device)
    for v in (300, -1, 2.7, "1", None):
        with pytest.raises(xpjit.InvalidArgumentError):
            a.fill(v)
    assert (a.get() == 0).all()
    a.fill(255)
    a.fill(np.uint8(7))
    assert list(a.get()) == [7] * 3
    f = xpjit.zeros(2, np.float32, device=device)
    f.fill(2)
    f.fill(np.float64(2.5))
    assert list(f.get()) == [2.5, 2.5]
    h = xpjit.zeros(2, np.float16, device=device)
    h.fill(1e6)  # as a scalar argument: beyond f16, inf
    assert np.isinf(h.get()).all()
    b = xpjit.zeros(2, np.bool_, device=device)
    b.fill(True)
    with pytest.raises(xpjit.InvalidArgumentError, match="range of bool"):
        b.fill(2)
    assert b.get().all()


def test_device_arrays_are_not_numpy_arrays():
    """A device array given to NumPy by mistake (a .get() forgotten) is a
    TypeError, as with CuPy (NumPy made an object array of it), and only
    one of one element has a truth value."""
    for dev in ["cpu"] + (["opencl"] if xpjit.devices("opencl") else []):
        d = xpjit.zeros(3, np.float32, device=xpjit.Device(dev))
        with pytest.raises(TypeError, match="get"):
            np.asarray(d)
        with pytest.raises(TypeError, match="get"):
            np.sum(d)
        with pytest.raises(TypeError, match="get"):
            np.zeros(3) + d
        with pytest.raises(ValueError, match="ambiguous"):
            bool(d)
        with pytest.raises(ValueError, match="ambiguous"):
            bool(xpjit.zeros(0, device=xpjit.Device(dev)))
        assert not xpjit.zeros(1, device=xpjit.Device(dev))
        assert xpjit.asarray(np.array([2.0]), device=xpjit.Device(dev))
        assert np.from_dlpack(xpjit.zeros(2)).shape == (2,)  # still zero-copy


def test_const_values_are_ints_or_bools(prog):
    """consts= values are not converted with int() (4.7 ran as 4, "5" as
    5, "abc" was a bare ValueError)."""
    for v in (4.7, "5", "abc", None, 2.0):
        with pytest.raises(xpjit.SpecializationError, match="int or a bool"):
            prog.sized(3, np.zeros(3, np.int64), consts={"N": v})
    with pytest.raises(xpjit.SpecializationError, match="dict"):
        prog.sized(3, np.zeros(3, np.int64), consts=[("N", 4)])
    z = np.zeros(3, np.int64)
    prog.sized(3, z, consts={"N": np.int16(6)})
    assert list(z) == [6] * 3
    with pytest.raises(xpjit.SpecializationError, match="int or a bool"):
        prog.get_binary("sized", "cpu", dtypes={"T": "f32"}, ndim=0,
                        consts={"N": 1.5})


def test_errors_say_what_is_wrong(prog):
    """Misuses raise an XpjitError that says what is wrong, on both launch
    paths (they were AttributeErrors, a source of zero bytes, an option
    wrapped to 4294967295, or accepted: a bool of 2, a grid of True, a
    timeout of -5), and a closed program has a repr."""
    x = np.ones(4, np.float32)
    for _ in range(2):  # the second call known to the C launch path
        prog.scale(4, np.float32(1), x)
        with pytest.raises(xpjit.InvalidArgumentError,
                           match="queue= takes an xpjit.Queue, not Device"):
            prog.scale(4, np.float32(1), x, queue=xpjit.Device("cpu"))
        for grid in (True, (4, False)):
            with pytest.raises(xpjit.InvalidArgumentError, match="grid"):
                prog.scale(grid, np.float32(1), x)
    with pytest.raises(xpjit.InvalidArgumentError, match="queue="):
        xpjit.ElementwiseKernel("T x", "T y", "y = x;", "cp")(
            x, queue=xpjit.Device("cpu"))
    flag = xpjit.Program("kernel f(b: bool, y: global i32[]) range "
                         "{ if b { y[0] = 1; } }")
    y = np.zeros(1, np.int32)
    for _ in range(2):
        flag.f(1, True, y)
        for v in (2, -1):
            with pytest.raises(xpjit.InvalidArgumentError,
                               match="range of bool"):
                flag.f(1, v, y)
    src = "kernel k(x: global f32[]) range { x[0] = 1.0; }"
    with pytest.raises(xpjit.InvalidArgumentError, match="str or bytes"):
        xpjit.Program(5)
    with pytest.raises(xpjit.InvalidArgumentError, match="name is a str"):
        xpjit.Program(src, name=5)
    with pytest.raises(xpjit.InvalidArgumentError, match="path"):
        xpjit.Program.from_file(5)
    with pytest.raises(xpjit.InvalidArgumentError, match="name is a str"):
        prog.kernel(None)
    for opts, what in (({"opt_level": -1}, "-1"),
                       ({"timeout_ms": -5}, "-5"),
                       ({"memory_limit_mb": 2 ** 32}, "4294967296"),
                       ({"opt_level": 2.5}, "2.5"),
                       ({"opt_level": True}, "True"),
                       ({"fast_math": "yes"}, "yes")):
        with pytest.raises(xpjit.InvalidArgumentError, match=what):
            xpjit.Program(src, options=opts)
    assert xpjit.Program(src, options={"opt_level": np.int64(2),
                                       "fast_math": 1}).k(1, x) is None
    for ms in (-5, 2 ** 64, 1.5, True):
        with pytest.raises(xpjit.InvalidArgumentError, match="timeout"):
            xpjit.Queue(launch_timeout_ms=ms)
    p = xpjit.Program(src, name="c.xpk")
    assert repr(p) == "<xpjit.Program c.xpk: k>"
    p.close()
    assert repr(p) == "<xpjit.Program c.xpk: (closed)>"
