"""A second outside probe's defects (each test failed before its fix):
objects owning a handle of the C library copied (a double destroy),
array attributes that launches trust made writable, CUDA-interface memory
imported twice, set() casting silently, ReductionKernel identities that
did not compile, unclear messages, a device's default queue closed for
good, and fork() with a launch in flight."""
import copy
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import xpjit

SRC = """
kernel fill1(y: global f32[]) range {
    let i = global_id(0);
    if i < size(y) { y[i] = 1.0; }
}
kernel add1<T>(y: global T[*]) range {
    let i = global_id(0);
    if i < size(y) { y[i] += T(1); }
}
kernel two(x: global const f32[], y: global f32[]) range {
    let i = global_id(0);
    if i < size(y) { y[i] = x[i] + 1.0; }
}
"""


def _child(code, timeout=120):
    """Runs code in a fresh interpreter (what it does would crash or hang
    this one without the fix): its exit status and output."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                       capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ))
    return r.returncode, r.stdout + r.stderr


# ---- 1. copies of objects that own a handle --------------------------------

def test_handle_owners_refuse_copy_deepcopy_and_pickle():
    """copy.copy(Context) destroyed the C context twice (a segfault at the
    second object's end), copy.copy(Event) released the event twice (a
    use after free: the next wait hung), copy.copy(Queue) and
    copy.copy(Program) shared one Guard, so the copy's end closed the
    original. Each such object now refuses copy.copy, copy.deepcopy and
    pickle with TypeError; a Device (owned by its context) copies as
    itself and refuses pickle; ndarray copies its memory as before."""
    rc, out = _child("""
        import copy, gc, pickle
        import numpy as np, xpjit
        SRC = %r
        ctx = xpjit.Context()
        p = xpjit.Program(SRC, context=ctx)
        q = xpjit.Queue(ctx.device("cpu"))
        d = xpjit.zeros(4, device=ctx.device("cpu"))
        ev = p.fill1.launch(4, d, queue=q)
        objs = [ctx, p, q, ev, p.fill1, p.fill1.specialize(ndim=0,
                device=ctx.device("cpu")), d._mem,
                xpjit.from_dlpack(np.zeros(3))._mem]
        for o in objs:
            for f in (copy.copy, copy.deepcopy, pickle.dumps):
                try:
                    f(o)
                except TypeError as e:
                    assert "cannot be copied or pickled" in str(e), e
                else:
                    raise SystemExit("%%s copied by %%s" %% (o, f))
        gc.collect()
        ev.wait()                    # the event, queue, program and
        y = np.zeros(4, np.float32)  # context still work
        p.fill1(4, y, queue=q)
        assert y.tolist() == [1.0] * 4 and d.get().tolist() == [1.0] * 4
        dev = ctx.device("cpu")
        assert copy.copy(dev) is dev and copy.deepcopy(dev) is dev
        try:
            pickle.dumps(dev)
        except TypeError as e:
            assert "cpu:0" in str(e)
        else:
            raise SystemExit("a Device pickled")
        c = copy.deepcopy({"a": d})["a"]   # ndarray: a copy of the memory
        assert c.ptr != d.ptr and c.get().tolist() == [1.0] * 4
        print("OK")
    """ % SRC)
    assert rc == 0 and "OK" in out, out


# ---- 2. what launches trust is read-only ------------------------------------

def test_array_attributes_launches_trust_are_read_only():
    """d.shape = (1 << 26,) on a 4-element array was taken as it was, and
    the next launch wrote 64 MiB past the array's end (a segfault); so
    were strides, dtype and device (memory read as what it is not), and a
    queue's device. They are read-only now (AttributeError), as .ptr was."""
    prog = xpjit.Program(SRC)
    host = np.zeros(4, np.float32)
    d = xpjit.from_dlpack(host)
    for name, value in (("shape", (1 << 26,)), ("strides", (0,)),
                        ("dtype", np.dtype(np.float64)),
                        ("device", xpjit.Device("cpu")), ("ptr", 0)):
        before = getattr(d, name)
        with pytest.raises(AttributeError):
            setattr(d, name, value)
        assert getattr(d, name) == before
    prog.add1(4, d)   # the fast path and the slow one
    prog.add1(4, d, wait=True)
    assert host.tolist() == [2.0] * 4
    q = xpjit.Queue()
    for name, value in (("device", xpjit.Device("cpu")), ("profiling", 1)):
        with pytest.raises(AttributeError):
            setattr(q, name, value)


# ---- 3. CUDA-interface memory imported once per range -----------------------

class _CAI:
    """A __cuda_array_interface__ over a NumPy array's memory (which the
    CPU device takes as memory the host reads)."""

    def __init__(self, a, shape=None, offset=0):
        self.a = a
        self.__cuda_array_interface__ = {
            "data": (a.ctypes.data + offset * a.itemsize, False),
            "shape": a.shape if shape is None else shape,
            "typestr": a.dtype.str, "version": 2, "strides": None}


def test_cuda_array_interface_imports_are_shared():
    """from_cuda_array_interface of one object twice (device=cpu) said the
    second import would "overlap the 32-byte allocation", as did one such
    object given twice as a kernel argument: each range is imported once
    per device now, counted, let go with the last array that uses it (as
    dpctl's USM was); a range inside one imported already shares it."""
    from xpjit import _array
    cpu = xpjit.Device("cpu")
    y = np.arange(8, dtype=np.float32)
    c = _CAI(y)
    a1 = xpjit.from_cuda_array_interface(c, device=cpu)
    a2 = xpjit.from_cuda_array_interface(c, device=cpu)
    inner = xpjit.from_cuda_array_interface(_CAI(y, (4,), 2), device=cpu)
    mine = [k for k in _array._imports if k[0] == cpu._h.value]
    assert len(mine) == 1 and _array._imports[mine[0]][1] == 3
    assert a1.get().tolist() == a2.get().tolist() == list(range(8))
    assert inner.get().tolist() == [2.0, 3.0, 4.0, 5.0]
    prog = xpjit.Program(SRC)
    # one object for both parameters, each argument an import of it
    prog.two(8, c, c, queue=cpu.queue)
    assert y.tolist() == [float(v + 1) for v in range(8)]
    del a1, a2
    assert _array._imports[mine[0]][1] == 1
    del inner
    assert mine[0] not in _array._imports  # let go with the last
    a3 = xpjit.from_cuda_array_interface(c, device=cpu)  # imported anew
    assert a3.get()[0] == 1.0


# ---- 4. set() converts nothing ----------------------------------------------

def test_set_refuses_another_dtype():
    """set() cast silently: [1.7, 300.0, -1e10, nan] into int8 became
    [1, 44, 0, 0], and strings were taken, while fill() range-checked. As
    CuPy's and PyOpenCL's set(), another dtype, or anything but a NumPy
    array, is a TypeError now, the array unchanged."""
    for dev in [xpjit.Device("cpu")] + xpjit.devices("opencl"):
        i = xpjit.asarray(np.array([5, 6, 7, 8], np.int8), device=dev)
        for bad in (np.array([1.7, 300.0, -1e10, np.nan]),
                    np.array([1, 2, 3, 4]), np.array(["1", "2", "3", "4"]),
                    np.array([object()] * 4), [1, 2, 3, 4], 7, "1234"):
            with pytest.raises(TypeError, match="set"):
                i.set(bad)
        assert i.get().tolist() == [5, 6, 7, 8]
        i.set(np.array([1, 2, 3, 4], np.int8))
        assert i.get().tolist() == [1, 2, 3, 4]
        z = xpjit.zeros((), np.float32, device=dev)
        z.set(np.float32(2.5))  # a NumPy scalar of the dtype: a 0-d array
        assert z.get()[()] == 2.5
        with pytest.raises(TypeError, match="float64"):
            z.set(np.float64(2.5))


# ---- 5. numeric identities --------------------------------------------------

def test_reduction_identities_of_any_number():
    """An identity of -np.inf, np.inf or nan made T(-inf), which does not
    compile (the language writes infinity(T) and nan(T)); 2**70 made an
    integer literal too large for 64 bits; np.float32(1.5) and
    np.int64(3) were refused as "not a str". Numbers are written for the
    reduce type of each call now; one that type cannot hold is an
    InvalidArgumentError, as a scalar argument's, and one no type holds
    is refused when the kernel is made."""
    m = np.arange(12.0, dtype=np.float32).reshape(3, 4) - 20

    def rk(ident, op="max(a, b)"):
        return xpjit.ReductionKernel("T x", "T y", "x", op, "y = a;", ident,
                                     "mx")

    for dev in [xpjit.Device("cpu")] + xpjit.devices("opencl"):
        with dev:
            for ident in (-np.inf, float("-inf"), np.float32(-np.inf),
                          -1e300, -(2 ** 70), np.int64(-1000)):
                r = rk(ident)(m, axis=1)
                np.testing.assert_array_equal(np.asarray(r.get() if isinstance(
                    r, xpjit.ndarray) else r), m.max(axis=1))
            r = rk(np.inf, "min(a, b)")(m, axis=0)
            np.testing.assert_array_equal(
                r.get() if isinstance(r, xpjit.ndarray) else r, m.min(axis=0))
            r = rk(np.nan, "a + b")(m, axis=1)
            assert np.isnan(r.get() if isinstance(r, xpjit.ndarray)
                            else r).all()
            r = rk(np.float32(1.5))(m)  # above every element
            assert float(r.get() if isinstance(r, xpjit.ndarray)
                         else r) == 1.5
            i = np.arange(4, dtype=np.int64)
            r = rk(np.int64(7))(i)
            assert int(r.get() if isinstance(r, xpjit.ndarray) else r) == 7
            for bad in (-np.inf, np.nan, 1.5, 2 ** 70):
                with pytest.raises(xpjit.InvalidArgumentError,
                                   match="identity"):
                    rk(bad)(i)
    with pytest.raises(xpjit.InvalidArgumentError, match="every type"):
        rk(2 ** 1100)
    with pytest.raises(xpjit.InvalidArgumentError, match="identity"):
        rk(None)


# ---- 6. messages -------------------------------------------------------------

def test_messages_say_what_is_wrong():
    """k() named an internal method ("Kernel._call_slow() missing 1
    required positional argument"); a __cuda_array_interface__ of shape
    (2**62,) or (2**64,) said "size is 0" (wrapped); d[2**63] was
    OverflowError; an out-of-range scalar printed all 309 digits of
    2**1024; "T T" and "T x,," were taken as parameters; axis=True was
    axis 1; __dlpack__(stream="x") was taken."""
    prog = xpjit.Program(SRC)
    with pytest.raises(TypeError, match="grid is missing.*k\\(grid, y\\)"):
        prog.fill1()
    cpu = xpjit.Device("cpu")
    y = np.zeros(4, np.float32)
    for shape in ((2 ** 62,), (2 ** 64,), (2 ** 40, 2 ** 40)):
        c = _CAI(y, shape)
        with pytest.raises(xpjit.InvalidArgumentError, match="too large"):
            xpjit.from_cuda_array_interface(c, device=cpu)
    with pytest.raises(xpjit.InvalidArgumentError, match="negative"):
        xpjit.from_cuda_array_interface(_CAI(y, (-1,)), device=cpu)
    d = xpjit.zeros(4, np.float32)
    for i in (2 ** 63, 2 ** 64, -2 ** 63 - 1, 4, -5):
        with pytest.raises(IndexError):
            d[i]
    k = xpjit.Program("kernel s(v: i32, y: global f32[]) range { }").s
    with pytest.raises(xpjit.InvalidArgumentError) as e:
        k(1, 2 ** 1024, d)
    assert "digits" in str(e.value) and len(str(e.value)) < 120
    for params in ("T T", "T x,,", ",T x", "T x,"):
        with pytest.raises(xpjit.InvalidArgumentError, match="parameter"):
            xpjit.ElementwiseKernel(params, "T z", "z = T(0);", "e")
    with pytest.raises(xpjit.InvalidArgumentError, match="placeholder"):
        xpjit.ElementwiseKernel("T x", "U T", "T = U(x);", "e")
    xpjit.ElementwiseKernel("", "T z", "z = T(1);", "e")  # no inputs: fine
    rk = xpjit.ReductionKernel("T x", "T y", "x", "a + b", "y = a;", "0",
                               "s")
    m = np.ones((2, 3), np.float32)
    for axis in (True, False, (0, True), np.bool_(True)):
        with pytest.raises(TypeError, match="axis"):
            rk(m, axis=axis)
    assert rk(m, axis=1).tolist() == [3.0, 3.0]
    for stream in ("x", 1.0, True):
        with pytest.raises(TypeError, match="stream"):
            d.__dlpack__(stream=stream)
    assert np.from_dlpack(d).shape == (4,)


# ---- 7. a device's default queue --------------------------------------------

def test_default_queue_cannot_be_closed():
    """Device("cpu").queue.close() broke the device for good: every later
    launch without queue= failed "the queue is closed". As CuPy's default
    stream and dpctl's default queue, it cannot be closed now (a clear
    InvalidArgumentError); queues made with xpjit.Queue still close."""
    rc, out = _child("""
        import numpy as np, xpjit
        p = xpjit.Program(%r)
        dev = xpjit.Device("cpu")
        try:
            dev.queue.close()
        except xpjit.InvalidArgumentError as e:
            assert "default queue of cpu:0 cannot be closed" in str(e), e
        else:
            raise SystemExit("closed")
        y = np.zeros(4, np.float32)
        p.fill1(4, y)
        d = xpjit.zeros(4, device=dev)
        p.fill1(4, d)
        assert y.tolist() == d.get().tolist() == [1.0] * 4
        q = xpjit.Queue(dev)
        q.close()
        print("OK")
    """ % SRC)
    assert rc == 0 and "OK" in out, out


# ---- 8. fork() with a launch in flight --------------------------------------

def test_fork_with_launches_in_flight():
    """A child forked while another thread's launch ran hung at its first
    launch (xpj_queue_wait on the parent's command, copied in the running
    state, which no thread of the child finishes). Now the child's
    default context, devices and queues are new, so its launches work;
    what the parent made (its Program, Queue, Context, their arrays) raises
    InvalidArgumentError saying fork(); the parent goes on."""
    rc, out = _child("""
        import os, signal, threading, time, traceback
        import numpy as np, xpjit
        SRC = %r
        SPIN = '''
        kernel spin(n: i64, y: global f32[]) range {
            let i = global_id(0);
            if i < size(y) {
                let v = y[i];
                for (let k: i64 = 0; k < n; k += 1) { v = v * 1.0001 + 1.0; }
                y[i] = v;
            }
        }'''
        prog = xpjit.Program(SPIN)
        mine = xpjit.Queue()
        ctx = xpjit.Context(visible="cpu")
        ew = xpjit.ElementwiseKernel("T x", "T y", "y = x + T(1);", "inc")
        kept = xpjit.zeros(16, np.float32)
        stop = False
        def bg():
            z = np.zeros(1 << 14, np.float32)
            d = xpjit.zeros(1 << 14, np.float32)
            while not stop:
                prog.spin(1 << 14, 300, z)
                prog.spin(1 << 14, 300, d)
                ew(z)
                d.get()
        t = threading.Thread(target=bg)
        t.start()
        time.sleep(0.3)
        statuses = []
        for k in range(6):
            pid = os.fork()
            if pid == 0:
                signal.alarm(20)  # a hang: killed, a failure
                try:
                    p = xpjit.Program(SRC)
                    y = np.zeros(64, np.float32)
                    p.fill1(64, y)
                    d = xpjit.zeros(64, np.float32)
                    p.fill1(64, d)
                    assert y.sum() == 64 and d.get().sum() == 64
                    assert ew(np.ones(3, np.float32)).tolist() == [2.0] * 3
                    xpjit.synchronize()
                    for f in (lambda: prog.spin(64, 1, y),
                              lambda: prog.spin(64, 1, y, queue=mine),
                              lambda: mine.wait(), lambda: kept.get(),
                              lambda: xpjit.Program(SRC, context=ctx),
                              lambda: ctx.devices()):
                        try:
                            f()
                        except xpjit.InvalidArgumentError as e:
                            assert "before fork()" in str(e), e
                        else:
                            os._exit(3)
                    os._exit(0)
                except BaseException:
                    traceback.print_exc()
                    os._exit(4)
            _, st = os.waitpid(pid, 0)
            statuses.append(st)
        stop = True
        t.join()
        y = np.zeros(64, np.float32)
        prog.spin(64, 1, y, queue=mine)
        assert y.sum() == 64 and kept.get().sum() == 0
        print("STATUSES", statuses)
    """ % SRC, timeout=240)
    assert rc == 0 and "STATUSES [0, 0, 0, 0, 0, 0]" in out, out
