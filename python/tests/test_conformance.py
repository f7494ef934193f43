"""The kernels of the C conformance suite (tests/conformance/*.xpk),
called from Python on every device here and checked against NumPy."""
import numpy as np
import pytest

import xpjit
from conftest import back, conformance, on, rand

FLOATS = [np.float32, np.float64]
NUMS = [np.float32, np.float64, np.int32, np.int64]
SIZES = [1, 7, 256, 1000, 4099]


def tol(dt):
    return dict(rtol=1e-5, atol=1e-5) if np.dtype(dt) == np.float32 else \
        dict(rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dt", NUMS)
@pytest.mark.parametrize("n", SIZES)
def test_vadd(device, dt, n):
    p = conformance("elementwise.xpk")
    a, b = rand(n, dt, seed=1), rand(n, dt, seed=2)
    c = on(device, rand(n, dt, seed=3))
    p.vadd(n, on(device, a), on(device, b), c)
    np.testing.assert_array_equal(back(c), a + b)


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("grid", [1, 7, 256, 5000])
def test_saxpy_grid_stride(device, dt, grid):
    p = conformance("elementwise.xpk")
    n = 1000
    x, y = rand(n, dt, seed=4), rand(n, dt, seed=5)
    yd = on(device, y.copy())
    p.saxpy(grid, dt(1.5), on(device, x), yd)
    np.testing.assert_allclose(back(yd), dt(1.5) * x + y, **tol(dt))


def _views(dt):
    """(name, x, y, out) triples of non-contiguous NumPy views."""
    base = rand((6, 8, 5), dt, seed=6)
    other = rand((6, 8, 5), dt, seed=7)
    yield "transposed", base.transpose(2, 0, 1), other.transpose(2, 0, 1)
    yield "sliced", base[1:5, ::3, 1:], other[1:5, ::3, 1:]
    yield "reversed", base[::-1, :, ::-2], other[:, ::-1, ::-2]
    yield "broadcast", np.broadcast_to(base[:1, :1, :], (6, 8, 5)), other


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32])
def test_axpby_views(dt):
    # NumPy views straight into the kernel: the CPU device, zero copies
    p = conformance("elementwise.xpk")
    for name, x, y in _views(dt):
        out = np.zeros(x.shape, dt)[:, ::-1]  # a negative-stride output
        a, b = dt(2), dt(3)
        want = a * x + b * y
        p.axpby_nd(x.size, a, x, b, y, out)
        np.testing.assert_allclose(out, want, err_msg=name, **tol(dt))
        out3 = np.zeros(x.shape, dt)
        p.axpby_3d(x.shape, a, x, b, y, out3)
        np.testing.assert_allclose(out3, want, err_msg=name, **tol(dt))
        out2 = np.zeros(x.shape[1:], dt)
        p.axpby_2d(x.shape[1:], a, x[0], b, y[-1], out2)
        np.testing.assert_allclose(out2, a * x[0] + b * y[-1], err_msg=name,
                                   **tol(dt))


def test_axpby_device_views(device):
    # views of device arrays: slices, steps and transposes of xpjit.ndarray
    p = conformance("elementwise.xpk")
    x = rand((9, 7), np.float32, seed=8)
    y = rand((9, 7), np.float32, seed=9)
    xd, yd = xpjit.asarray(x, device=device), xpjit.asarray(y, device=device)
    out = xpjit.zeros((7, 9), np.float32, device=device)
    p.axpby_2d((7, 9), np.float32(1), xd.T, np.float32(-1), yd.T, out)
    np.testing.assert_allclose(out.get(), (x - y).T, rtol=1e-6)
    out2 = xpjit.zeros((3, 4), np.float32, device=device)
    p.axpby_nd(12, np.float32(2), xd[1::3, ::-2], np.float32(0),
               yd[:3, :4], out2)
    np.testing.assert_allclose(out2.get(), 2 * x[1::3, ::-2], rtol=1e-6)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.int64,
                                np.uint32])
def test_row_sums(device, dt):
    p = conformance("elementwise.xpk")
    x = rand((37, 29), dt, 0, 100, seed=10)
    out = on(device, np.zeros(37, dt))
    p.row_sums(37, on(device, x), out, np.uint32(1))
    np.testing.assert_allclose(back(out), x.sum(axis=1, dtype=dt), rtol=1e-5)


@pytest.mark.parametrize("dt", NUMS)
@pytest.mark.parametrize("local", [1, 16, 100, 256])
def test_reduce(device, dt, local):
    p = conformance("reduce.xpk")
    n = 4099
    x = rand(n, dt, -1, 1, seed=11) if np.dtype(dt).kind == "f" else \
        rand(n, dt, -30000, 30000, seed=11)
    groups = min((n + local - 1) // local, 40)
    part = on(device, np.zeros(groups, dt))
    xd = on(device, x)
    p.block_partials[groups * local, local](xd, part)
    # each group summed the grid-strided slice g*local.. of x
    idx = np.arange(n)
    want = np.array([x[(idx // local) % groups == g].sum(dtype=np.float64)
                     for g in range(groups)])
    tl = dict(rtol=1e-4, atol=1e-3) if np.dtype(dt) == np.float32 else \
        dict(rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(back(part), want, **tl)
    total = on(device, np.zeros(1, dt))
    p.block_sum[groups * local, local](xd, total)
    np.testing.assert_allclose(back(total)[0], x.sum(dtype=np.float64), **tl)


@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.int64, np.float32])
def test_histogram(device, dt):
    p = conformance("histogram.xpk")
    data = rand(10007, np.uint8, 0, 256, seed=12)
    want = np.bincount(data, minlength=256).astype(dt)
    for kernel, grid, local in (("hist_global", 1000, None),
                                ("hist_local", 512, 64)):
        hist = on(device, np.zeros(256, dt))
        getattr(p, kernel)(grid, on(device, data), hist, local=local)
        np.testing.assert_array_equal(back(hist), want, err_msg=kernel)


@pytest.mark.parametrize("dt", FLOATS + [np.int32])
@pytest.mark.parametrize("shape", [(1, 1, 1), (17, 33, 9), (64, 40, 70)])
def test_matmul_tiled(device, dt, shape):
    p = conformance("matmul.xpk")
    m, k, n = shape
    a, b = rand((m, k), dt, -4, 4, seed=13), rand((k, n), dt, -4, 4, seed=14)
    c = on(device, np.zeros((m, n), dt))
    L = 8
    p.matmul_tiled[((m + L - 1) // L * L, (n + L - 1) // L * L), (L, L)](
        on(device, a), on(device, b), c)
    np.testing.assert_allclose(back(c), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dt", [np.float32, np.int64, np.uint8])
def test_transpose_tiled(device, dt):
    p = conformance("transpose.xpk")
    src = rand((45, 70), dt, 0, 100, seed=15)
    dst = on(device, np.zeros((70, 45), dt))
    p.transpose_tiled[(48, 80), (16, 16)](on(device, src), dst)
    np.testing.assert_array_equal(back(dst), src.T)


@pytest.mark.parametrize("dt", [np.float64, np.int32])
def test_scan(device, dt):
    p = conformance("scan.xpk")
    n, local = 3000, 64
    nb = 2 * local
    x = rand(n, dt, -50, 50, seed=16)
    nblocks = (n + nb - 1) // nb
    y = on(device, np.zeros(n, dt))
    sums = on(device, np.zeros(nblocks, dt))
    p.scan_blocks[8 * local, local](on(device, x), y, sums)
    offsets = np.concatenate([[0], np.cumsum(back(sums))[:-1]]).astype(dt)
    p.add_offsets(n, y, on(device, offsets), np.int64(nb))
    want = np.concatenate([[0], np.cumsum(x)[:-1]]).astype(dt)  # exclusive
    np.testing.assert_allclose(back(y), want, rtol=1e-9)


@pytest.mark.parametrize("dt", FLOATS)
def test_stencil(device, dt):
    p = conformance("stencil.xpk")
    u = rand((33, 47), dt, 0, 1, seed=17)
    want = u.copy()  # the edge is copied, the interior averaged
    want[1:-1, 1:-1] = dt(0.25) * (u[:-2, 1:-1] + u[2:, 1:-1] +
                                   u[1:-1, :-2] + u[1:-1, 2:])
    out = on(device, np.zeros_like(u))
    p.jacobi5(u.shape, on(device, u), out)
    np.testing.assert_allclose(back(out), want, **tol(dt))
    out_t = on(device, np.zeros_like(u))
    p.jacobi5_tiled[(16, 16), (8, 8)](on(device, u), out_t)
    np.testing.assert_allclose(back(out_t), want, **tol(dt))


@pytest.mark.parametrize("dt", [np.float32, np.int32, np.uint64])
def test_bitonic_sort(device, dt):
    p = conformance("sort.xpk")
    n = 1 << 12
    x = rand(n, dt, 0, 1 << 20, seed=18)
    xd = on(device, x.copy())
    local = 256  # blocks of 2 * local, sorted in one launch
    p.bitonic_block[n // 2, local](xd)
    k = 4 * local
    while k <= n:
        j = k // 2
        while j > 0:
            p.bitonic_stage(n, xd, np.int64(k), np.int64(j))
            j //= 2
        k *= 2
    np.testing.assert_array_equal(back(xd), np.sort(x))


@pytest.mark.parametrize("dt", FLOATS + [np.int32])
def test_median3x3(device, dt):
    p = conformance("private.xpk")
    img = rand((21, 34), dt, 0, 1000, seed=19)
    out = on(device, np.zeros_like(img))
    p.median3x3(img.shape, on(device, img), out)
    pad = np.pad(img, 1, mode="edge")
    win = np.stack([pad[dy:dy + 21, dx:dx + 34] for dy in range(3)
                    for dx in range(3)])
    np.testing.assert_array_equal(back(out), np.median(win, axis=0).astype(dt))


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_polyval(device, nd):
    p = conformance("private.xpk")
    c = np.array([1.0, -2.0, 0.5, 0.25, 0, 0, 0, 0, 9, 9], np.float64)
    x = rand((4, 5, 6)[:nd], np.float64, -1, 1, seed=20)
    y = on(device, np.zeros_like(x))
    p.polyval(x.size, on(device, c), on(device, x), y)
    np.testing.assert_allclose(back(y), np.polyval(c[:8][::-1], x),
                               rtol=1e-12)


@pytest.mark.parametrize("dt", [np.float64, np.int64])
def test_private_matrix(device, dt):
    p = conformance("private.xpk")
    x = rand(50, dt, -5, 5, seed=21)
    out = on(device, np.zeros_like(x))
    p.private_matrix(50, on(device, x), out)
    r = np.arange(1, 4)[:, None]
    s = np.arange(3)[None, :]
    want = np.array([np.trace(np.linalg.matrix_power(v * r - s, 2))
                     for v in x]).astype(dt)
    np.testing.assert_allclose(back(out), want, rtol=1e-12)
