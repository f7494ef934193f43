"""Other libraries' memory and work on a device: their streams waited for
(xpj_device_wait_native), __cuda_array_interface__ and DLPack with CuPy
and PyTorch on a CUDA device. The CUDA tests run where there is one
(tests/gpu.sh on the GPU machine, which has both libraries); the checks
of bad input run everywhere."""
import numpy as np
import pytest

import xpjit

SRC = """
kernel axpy<T>(a: T, x: global const T[*], y: global T[*]) range {
    let i = global_id(0);
    if i < size(y) {
        y[i] = a * x[i] + y[i];
    }
}
"""


@pytest.fixture(scope="module")
def prog():
    return xpjit.Program(SRC, name="interop.xpk")


def _cuda():
    return xpjit.get_context().devices("cuda")


needs_cuda = pytest.mark.skipif(not _cuda(), reason="no CUDA device")


def test_wait_native_cpu_and_bad_handles():
    cpu = xpjit.Device("cpu")
    cpu.wait_native()       # the CPU device: nothing queued elsewhere
    cpu.wait_native(12345)
    for bad in (-1, 1 << 64, 1.5, "1", True, None):
        with pytest.raises(xpjit.InvalidArgumentError, match="native handle"):
            cpu.wait_native(bad)


def test_wait_native_opencl_needs_a_queue():
    if not xpjit.get_context().devices("opencl"):
        pytest.skip("no OpenCL device")
    with pytest.raises(xpjit.InvalidArgumentError, match="cl_command_queue"):
        xpjit.Device("opencl").wait_native(0)


class _CAI:
    def __init__(self, base, stream):
        self.__cuda_array_interface__ = {
            "data": (base.ctypes.data, False), "shape": base.shape,
            "typestr": base.dtype.str, "version": 3, "strides": None,
            "stream": stream}


def test_cai_stream_checked(prog):
    """The interface's stream: 0, bool, negative or not an int is refused
    before anything is imported; a handle can only be waited for on a CUDA
    device: refused on the CPU device (which takes memory the host reads,
    as given, only without one) and CUDA memory refused on OpenCL, where
    the handle must never reach clFinish (it crashed there: review)."""
    cpu = xpjit.Device("cpu")
    base = np.ones(8, np.float32)
    for bad in (0, -3, "s", True, 1.0):
        with pytest.raises(xpjit.InvalidArgumentError, match="stream"):
            xpjit.from_cuda_array_interface(_CAI(base, bad), device=cpu)
    for handle in (1, 2, 0x7f00deadbeef):
        with pytest.raises(xpjit.InvalidArgumentError,
                           match="cannot be waited for on cpu"):
            xpjit.from_cuda_array_interface(_CAI(base, handle), device=cpu)
    a = xpjit.from_cuda_array_interface(_CAI(base, None), device=cpu)
    assert a.ptr == base.ctypes.data
    del a
    if xpjit.get_context().devices("opencl"):
        ocl = xpjit.Device("opencl")
        for stream in (None, 1, 0x20989680c0):
            with pytest.raises(xpjit.InvalidArgumentError,
                               match="CUDA memory is not for opencl"):
                xpjit.from_cuda_array_interface(_CAI(base, stream),
                                                device=ocl)


class _FakeCudaDLPack:
    """Says it is on CUDA device 0 (DLPack type 2): no producer here has
    CUDA memory, and nothing may be asked of it for another device."""
    asked = 0

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None, **kw):
        _FakeCudaDLPack.asked += 1
        raise BufferError("not here")


def test_dlpack_cuda_memory_only_for_its_device():
    devices = [xpjit.Device("cpu")]
    if xpjit.get_context().devices("opencl"):
        devices.append(xpjit.Device("opencl"))
    for dev in devices:
        with pytest.raises(xpjit.InvalidArgumentError,
                           match="memory of CUDA device 0 is not for"):
            xpjit.from_dlpack(_FakeCudaDLPack(), device=dev)
    assert _FakeCudaDLPack.asked == 0  # refused before __dlpack__


def test_synchronize_waits_for_every_queue(prog):
    """Device.synchronize (which exports wait for before another library
    reads) covers queues made with xpjit.Queue, not only the default."""
    dev = xpjit.Device("cpu")
    q = xpjit.Queue(dev)
    x = xpjit.asarray(np.ones(1 << 22, np.float32), device=dev)
    y = xpjit.zeros(1 << 22, np.float32, device=dev)
    evs = [prog.kernel("axpy").launch(x.size, np.float32(1), x, y, queue=q)
           for _ in range(20)]
    dev.synchronize()
    assert all(e.state == "complete" for e in evs)
    np.testing.assert_array_equal(np.from_dlpack(y), np.full(1 << 22, 20.0))


# ---- CUDA: CuPy and PyTorch (on the GPU machine) -------------------------

@needs_cuda
def test_cupy_arrays_in_and_out(prog):
    """CuPy's arrays as kernel arguments (DLPack, zero copy), written by
    CuPy's kernels just before on its stream and read by CuPy just after:
    the orders hold without any synchronize by the caller."""
    cp = pytest.importorskip("cupy")
    n = 1 << 22
    for dt in (cp.float32, cp.float64, cp.int32):
        x = cp.arange(n, dtype=dt)          # CuPy kernels, CuPy's stream
        y = cp.full(n, 3, dtype=dt)
        y *= 2                              # still queued, likely
        prog.axpy(n, dt(2), x, y)
        got = cp.asnumpy(y)                 # CuPy reads after xpjit
        want = 2 * np.arange(n, dtype=dt) + 6
        np.testing.assert_array_equal(got, want)
    # a strided view of CuPy's memory: the same addresses, no copy
    x = cp.arange(2 * n, dtype=cp.float32)
    y = cp.zeros(2 * n, dtype=cp.float32)
    prog.axpy(n, np.float32(1), x[::2], y[1::2])
    h = cp.asnumpy(y)
    np.testing.assert_array_equal(h[1::2], np.arange(0, 2 * n, 2,
                                                     dtype=np.float32))
    assert not h[::2].any()


@needs_cuda
def test_cupy_cai_both_ways():
    cp = pytest.importorskip("cupy")
    dev = xpjit.Device("cuda:0")
    a = xpjit.asarray(np.arange(1000, dtype=np.float32), device=dev)
    c = cp.asarray(a)                     # xpjit's __cuda_array_interface__
    assert c.data.ptr == a.ptr            # the same memory
    np.testing.assert_array_equal(cp.asnumpy(c * 2),
                                  2 * np.arange(1000, dtype=np.float32))
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        z = cp.arange(1 << 20, dtype=cp.float32) * 3
        v = xpjit.from_cuda_array_interface(z, device=dev)  # stream waited
    assert v.ptr == z.data.ptr
    np.testing.assert_array_equal(
        v.get(), 3 * np.arange(1 << 20, dtype=np.float32))


@needs_cuda
def test_torch_dlpack_both_ways(prog):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no GPU")
    n = 1 << 20
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):              # a stream of PyTorch's own
        x = torch.arange(n, dtype=torch.float32, device="cuda")
        y = torch.ones(n, dtype=torch.float32, device="cuda") * 5
        prog.axpy(n, np.float32(0.5), x, y)  # DLPack, zero copy
        want = 0.5 * torch.arange(n, dtype=torch.float32, device="cuda") + 5
        assert torch.equal(y, want)
    a = xpjit.asarray(np.arange(n, dtype=np.float32),
                      device=xpjit.Device("cuda:0"))
    t = torch.from_dlpack(a)
    assert t.data_ptr() == a.ptr and t.device.type == "cuda"
    assert torch.equal(t, torch.arange(n, dtype=torch.float32, device="cuda"))
