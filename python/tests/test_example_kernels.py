"""The kernels of examples/*.xpk that the example programs and
tests/on_device.sh run (saxpy, reductions, matmul, f16), and more of the
examples, called from Python on every device here and checked against
NumPy."""
import numpy as np
import pytest

from conftest import back, example, on, rand


def test_saxpy(device):
    p = example("saxpy.xpk")
    x, y = rand(10007, np.float32, seed=1), rand(10007, np.float32, seed=2)
    yd = on(device, y.copy())
    p.saxpy(x.size, np.float32(2.5), on(device, x), yd)
    np.testing.assert_allclose(back(yd), np.float32(2.5) * x + y, rtol=1e-6)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_axpy_family(device, dt):
    p = example("axpy.xpk")
    x = rand((30, 40), dt, seed=3)
    y = rand((30, 40), dt, seed=4)
    yd = on(device, y.copy())
    p.axpy(x.size, dt(2), on(device, x), yd)
    np.testing.assert_allclose(back(yd), 2 * x + y, rtol=1e-6)
    yd = on(device, y.copy())
    p.axpby(x.size, dt(2), on(device, x), dt(-1), yd)
    np.testing.assert_allclose(back(yd), 2 * x - y, rtol=1e-6)
    z = on(device, np.zeros_like(x))
    p.copy(x.size, on(device, x), z)
    np.testing.assert_array_equal(back(z), x)
    p.fill(x.size, z, dt(7))
    np.testing.assert_array_equal(back(z), np.full_like(x, 7))
    out = on(device, np.zeros((30, 40), np.int32))
    p.convert(x.size, on(device, x), out)
    np.testing.assert_array_equal(back(out), x.astype(np.int32))


@pytest.mark.parametrize("dt", [np.float64, np.int32])
def test_reductions(device, dt):
    p = example("reduce.xpk")
    x = rand(100001, dt, -1000, 1000, seed=5)
    total = on(device, np.zeros(1, dt))
    p.block_sum[256 * 64, 256](on(device, x), total)
    np.testing.assert_allclose(back(total)[0], x.sum(dtype=np.float64),
                               rtol=1e-9)
    groups = 32
    part = on(device, np.zeros(groups, dt))
    p.block_max[groups * 128, 128](on(device, x), part)
    assert back(part).max() == x.max()
    if np.dtype(dt).kind == "f":  # dot uses fma: floats only
        r = on(device, np.zeros(1, dt))
        p.dot[256 * 16, 256](on(device, x), on(device, x), r)
        np.testing.assert_allclose(back(r)[0],
                                   (x.astype(np.float64) ** 2).sum(),
                                   rtol=1e-9)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_matmul(device, dt):
    p = example("matmul.xpk")
    a = rand((37, 53), dt, -1, 1, seed=6)
    b = rand((29, 37), dt, -1, 1, seed=7).T     # a transposed view
    want = a[:, 5:42].astype(np.float64) @ b
    for name, launch in (("matmul_naive", lambda k: k[(37, 29), None]),
                         ("matmul_tiled", lambda k: k[(48, 32), (16, 16)])):
        c = on(device, np.zeros((37, 29), dt))
        ad = on(device, a)[:, 5:42]
        bd = on(device, np.ascontiguousarray(b.T)).T  # a view there too
        launch(p.kernel(name))(ad, bd, c)
        np.testing.assert_allclose(back(c), want, rtol=1e-4, atol=1e-4,
                                   err_msg=name)
    y = on(device, np.zeros(37, dt))
    xv = rand(53, dt, seed=8)
    p.gemv(37, on(device, a), on(device, xv), y)
    np.testing.assert_allclose(back(y), a @ xv, rtol=1e-4, atol=1e-4)


def test_haxpy_f16(device):
    p = example("half.xpk")
    x = rand(1000, np.float16, -4, 4, seed=9)
    y = rand(1000, np.float16, -4, 4, seed=10)
    yd = on(device, y.copy())
    p.haxpy(x.size, np.float16(0.5), on(device, x), yd)
    want = (np.float16(0.5) * x + y).astype(np.float64)
    np.testing.assert_allclose(back(yd).astype(np.float64), want, rtol=2e-3,
                               atol=2e-3)


def test_scan_sort_stencil_transpose(device):
    rng = np.random.default_rng(11)
    sc = example("scan.xpk")
    x = rng.integers(0, 100, 3000).astype(np.int64)
    nb = (x.size + 511) // 512
    y = on(device, np.zeros_like(x))
    bs = on(device, np.zeros(nb, np.int64))
    sc.scan_block[nb * 256, 256](on(device, x), y, bs)
    off = np.concatenate([[0], np.cumsum(back(bs))[:-1]]).astype(np.int64)
    sc.add_block_offsets(x.size, y, on(device, off))
    np.testing.assert_array_equal(back(y),
                                  np.concatenate([[0], np.cumsum(x)[:-1]]))
    so = example("sort.xpk")
    v = rng.standard_normal(1024).astype(np.float32)
    w = on(device, v.copy())
    k = 2
    while k <= v.size:
        j = k // 2
        while j >= 1:
            so.bitonic_stage(v.size, w, np.int64(k), np.int64(j))
            j //= 2
        k *= 2
    np.testing.assert_array_equal(back(w), np.sort(v))
    st = example("stencil.xpk")
    u = rng.standard_normal((40, 50))
    want = u.copy()
    want[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] +
                               u[1:-1, 2:])
    o = on(device, np.zeros_like(u))
    st.jacobi5((40, 50), on(device, u), o)
    np.testing.assert_allclose(back(o), want, rtol=1e-12)
    tr = example("transpose.xpk")
    m = rng.standard_normal((33, 70)).astype(np.float32)
    mt = on(device, np.zeros((70, 33), np.float32))
    # local (ROWS, TDIM), global (ceil(R / TDIM) * ROWS, ceil(C / TDIM) *
    # TDIM), as the kernel's comment says
    tdim, rows = 32, 8
    tr.transpose_tiled[(-(-33 // tdim) * rows, -(-70 // tdim) * tdim),
                       (rows, tdim)](on(device, m), mt)
    np.testing.assert_array_equal(back(mt), m.T)
    # it declares that local size: left to the runtime (None), it is taken
    mt2 = on(device, np.zeros((70, 33), np.float32))
    tr.transpose_tiled[(-(-33 // tdim) * rows, -(-70 // tdim) * tdim),
                       None](on(device, m), mt2)
    np.testing.assert_array_equal(back(mt2), m.T)
