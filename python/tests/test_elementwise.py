"""ElementwiseKernel and ReductionKernel against NumPy: every dtype,
broadcasting, strided and negative-stride inputs, given and made outputs,
device arrays, and bad declarations and calls."""
import numpy as np
import pytest

import xpjit
from conftest import back, on, rand

ALL = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
       np.uint64, np.float32, np.float64]

axpb = xpjit.ElementwiseKernel("T x, T y, T a", "T z", "z = a * x + y;",
                               "axpb")
sumsq = xpjit.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a;", "0",
                              "sumsq")


@pytest.mark.parametrize("dt", ALL)
def test_elementwise_every_dtype(dt):
    x = rand((5, 7), dt, 0, 10, seed=1)
    y = rand((5, 7), dt, 0, 10, seed=2)
    z = axpb(x, y, dt(3))
    assert z.dtype == np.dtype(dt)
    np.testing.assert_array_equal(z, (dt(3) * x + y).astype(dt))


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32])
def test_elementwise_broadcast_and_views(dt):
    base = rand((6, 8), dt, 0, 10, seed=3)
    row = rand(8, dt, 0, 10, seed=4)
    cases = [
        (base, row),                        # (6, 8) with (8,)
        (base[:, :1], row),                 # (6, 1) with (8,)
        (base[::-1, ::2], row[::-2]),       # negative strides
        (base.T[2:5], base[:, 0]),          # transposed, (3, 6) with (6,)
        (np.broadcast_to(row, (4, 8)), base[1:5]),
    ]
    for x, y in cases:
        want = (dt(2) * x + y).astype(dt)
        np.testing.assert_array_equal(axpb(x, y, 2), want)
        out = np.zeros(want.shape, dt)[..., ::-1][..., ::-1]
        r = axpb(x, y, dt(2), out)
        assert r is out
        np.testing.assert_array_equal(out, want)


def test_elementwise_types_and_raw():
    k = xpjit.ElementwiseKernel("float32 x, raw T table", "T y",
                                "y = table[i % size(table)] + T(x);", "look")
    table = np.array([10, 20, 30], np.int64)
    y = k(np.arange(5, dtype=np.float32), table,
          np.zeros(5, np.int64))
    np.testing.assert_array_equal(y, [10, 21, 32, 13, 24])
    two = xpjit.ElementwiseKernel("T x", "T lo, T hi",
                                  "lo = min(x, T(0)); hi = max(x, T(0));",
                                  "split")
    lo, hi = two(np.array([-2.0, 3.0, -1.0]))
    np.testing.assert_array_equal(lo, [-2, 0, -1])
    np.testing.assert_array_equal(hi, [0, 3, 0])
    cast = xpjit.ElementwiseKernel("T x", "U y", "y = U(x) * U(2);", "cast")
    np.testing.assert_array_equal(
        cast(np.arange(3, dtype=np.int16), np.zeros(3, np.float64)), [0, 2, 4])
    with pytest.raises(xpjit.SpecializationError, match="cannot infer U"):
        cast(np.arange(3, dtype=np.int16))
    fill = xpjit.ElementwiseKernel("T v", "T y", "y = v;", "fill")
    np.testing.assert_array_equal(fill(7, size=4) if False else
                                  fill(np.int32(7), np.zeros(4, np.int32)),
                                  [7, 7, 7, 7])


def test_elementwise_on_devices(device):
    x = rand(1000, np.float32, seed=5)
    y = rand(1000, np.float32, seed=6)
    z = axpb(on(device, x), on(device, y), np.float32(0.5))
    assert isinstance(z, xpjit.ndarray) or device.backend == "cpu"
    np.testing.assert_allclose(back(z), 0.5 * x + y, rtol=1e-6)
    d = xpjit.asarray(x.reshape(10, 100), device=device)
    z2 = axpb(d[::-1, ::3], on(device, y[:34]), np.float32(2))
    np.testing.assert_allclose(back(z2), 2 * x.reshape(10, 100)[::-1, ::3] +
                               y[:34], rtol=1e-6)


def test_elementwise_errors():
    with pytest.raises(xpjit.InvalidArgumentError, match="unknown type"):
        xpjit.ElementwiseKernel("complex64 x", "T y", "y = x;")
    with pytest.raises(xpjit.InvalidArgumentError):
        xpjit.ElementwiseKernel("T x", "", "x;")
    with pytest.raises(xpjit.InvalidArgumentError, match="both"):
        xpjit.ElementwiseKernel("T x", "T x", "x = x;")
    with pytest.raises(xpjit.InvalidArgumentError, match="identifier"):
        xpjit.ElementwiseKernel("T x", "T y", "y = x;", "no such")
    with pytest.raises(xpjit.InvalidArgumentError, match="broadcast"):
        axpb(np.ones(3), np.ones(4), 1.0)
    with pytest.raises(xpjit.InvalidArgumentError, match="takes 3 inputs"):
        axpb(np.ones(3))
    with pytest.raises(xpjit.InvalidArgumentError, match="shape"):
        axpb(np.ones(3), np.ones(3), 1.0, np.ones(4))
    ro = np.zeros(3)
    ro.flags.writeable = False
    with pytest.raises(xpjit.InvalidArgumentError, match="writable"):
        axpb(np.ones(3), np.ones(3), 1.0, ro)
    bad = xpjit.ElementwiseKernel("T x", "T y", "y = x +;", "bad")
    with pytest.raises(xpjit.KernelSyntaxError, match=r"<bad>:\d+:\d+"):
        bad(np.ones(3))
    with pytest.raises(xpjit.SpecializationError):
        axpb(np.ones(3, np.complex64), np.ones(3, np.complex64), 1.0)


@pytest.mark.parametrize("dt", ALL)
def test_reduction_every_dtype(dt):
    x = rand((4, 33), dt, 0, 5, seed=7)
    # integers wrap as NumPy's do (modular sums are order-independent)
    want_all = (x * x).sum(dtype=dt)
    np.testing.assert_allclose(sumsq(x), want_all, rtol=1e-5)
    got = sumsq(x, axis=1)
    assert got.dtype == np.dtype(dt) and got.shape == (4,)
    np.testing.assert_allclose(got.astype(np.float64),
                               (x * x).sum(axis=1, dtype=dt), rtol=1e-5)


@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False),
                                           (1, True), ((0, 2), False),
                                           (-1, False), ((0, 1, 2), True)])
def test_reduction_axes_and_views(axis, keepdims):
    base = rand((5, 6, 7), np.float64, -1, 1, seed=8)
    for x in (base, base[::-1, ::2], base.transpose(2, 0, 1),
              np.broadcast_to(base[:, :1], (5, 6, 7))):
        got = sumsq(x, axis=axis, keepdims=keepdims)
        np.testing.assert_allclose(got, (x * x).sum(axis=axis,
                                                    keepdims=keepdims),
                                   rtol=1e-12)


def test_reduction_cupy_examples(device):
    l2 = xpjit.ReductionKernel("T x", "T y", "x * x", "a + b",
                               "y = sqrt(a);", "0", "l2norm")
    x = rand((3, 1000), np.float32, -1, 1, seed=9)
    np.testing.assert_allclose(back(l2(on(device, x), axis=1)),
                               np.sqrt((x * x).sum(axis=1)), rtol=1e-5)
    mx = xpjit.ReductionKernel("T x", "T y", "x", "max(a, b)", "y = a;",
                               "-1e30", "mymax")
    np.testing.assert_array_equal(back(mx(on(device, x), axis=0)),
                                  x.max(axis=0))
    mean = xpjit.ReductionKernel("T x", "T y", "x", "a + b",
                                 "y = a / T(_in_ind.size());", "0", "mean")
    np.testing.assert_allclose(back(mean(on(device, x), axis=1)),
                               x.mean(axis=1), rtol=1e-5)
    dot = xpjit.ReductionKernel("T x, T y", "T z", "x * y", "a + b",
                                "z = a;", "0", "dot")
    np.testing.assert_allclose(back(dot(on(device, x[0]), on(device, x[1]))),
                               x[0] @ x[1], rtol=1e-4)
    cnt = xpjit.ReductionKernel("T x", "int64 n", "x > T(0) ? 1 : 0",
                                "a + b", "n = a;", "0", "count_pos",
                                reduce_type="int64")
    assert int(back(cnt(on(device, x)))) == int((x > 0).sum())


def test_reduction_errors():
    with pytest.raises(xpjit.InvalidArgumentError, match="axis"):
        sumsq(np.ones((2, 3)), axis=2)
    with pytest.raises(xpjit.InvalidArgumentError, match="takes 1 inputs"):
        sumsq(np.ones(3), np.ones(3))
    with pytest.raises(xpjit.InvalidArgumentError, match="raw"):
        xpjit.ReductionKernel("raw T x", "T y", "x[0]", "a + b", "y = a;",
                              "0")
    with pytest.raises(xpjit.InvalidArgumentError, match="shape"):
        sumsq(np.ones((2, 3)), axis=1, out=np.zeros(5))


def test_reserved_names_and_outputs():
    # a parameter named like the flat index or the accumulator would
    # change what the generated kernel does: refused
    with pytest.raises(xpjit.InvalidArgumentError, match="reserved"):
        xpjit.ElementwiseKernel("int64 i", "int64 z", "z = i + 1;", "k")
    with pytest.raises(xpjit.InvalidArgumentError, match="reserved"):
        xpjit.ElementwiseKernel("T x", "T _x_arr", "_x_arr = x;", "k")
    with pytest.raises(xpjit.InvalidArgumentError, match="reserved"):
        xpjit.ReductionKernel("T a", "T y", "a", "a + b", "y = a;", "0")
    with pytest.raises(xpjit.InvalidArgumentError, match="reserved"):
        xpjit.ElementwiseKernel("T let", "T y", "y = let;", "k")
    with pytest.raises(xpjit.InvalidArgumentError, match="identifier"):
        xpjit.ElementwiseKernel("T x", "T y", "y = x;", "kernel")
    # the default names work
    dbl = xpjit.ElementwiseKernel("T x", "T y", "y = x + x;")
    np.testing.assert_array_equal(dbl(np.arange(3.0)), [0, 2, 4])
    s = xpjit.ReductionKernel("T x", "T y", "x", "a + b", "y = a;", "0")
    assert float(s(np.arange(10.0))) == 45
    # an output of another type, or not an array, would be a converted
    # copy that takes the results: refused
    with pytest.raises(xpjit.InvalidArgumentError, match="float64"):
        xpjit.ElementwiseKernel("float32 x", "float32 y", "y = x;", "c")(
            np.ones(4, np.float32), np.zeros(4))
    with pytest.raises(xpjit.InvalidArgumentError, match="must be an array"):
        dbl(np.ones(4), [0.0] * 4)
    with pytest.raises(xpjit.InvalidArgumentError, match="float64"):
        s(np.arange(10.0, dtype=np.float32), out=np.zeros(()))
    # only raw parameters: the size says how many
    fill = xpjit.ElementwiseKernel("T v", "raw T y", "y[i] = v;", "fillraw")
    y = np.zeros(5, np.int32)
    fill(np.int32(7), y, size=5)
    np.testing.assert_array_equal(y, [7] * 5)


def test_zero_d_arrays():
    """0-d arrays: NumPy's shape (), for inputs and given outputs, and a
    reduction of a 0-d input (they were 'no array argument: give size=',
    and a 0-d output could not be written: an adversarial review)."""
    z = axpb(np.array(3.0), np.array(1.0), 2.0)
    assert isinstance(z, np.ndarray) and z.shape == () and z == 7.0
    out = np.zeros(())
    assert axpb(np.array(2.0), np.array(1.0), np.array(4.0), out) is out
    assert out == 9.0
    # a 0-d input beside arrays is broadcast as a scalar
    np.testing.assert_array_equal(axpb(np.arange(3.0), np.array(1.0), 2.0),
                                  2.0 * np.arange(3.0) + 1.0)
    assert sumsq(np.array(5.0)) == 25.0
    with pytest.raises(xpjit.InvalidArgumentError, match="out of range"):
        sumsq(np.array(5.0), axis=0)


@pytest.mark.parametrize("axis", [(0, 0), (2, -1), (1, -3, 0)])
def test_reduction_duplicate_axes(axis):
    """NumPy refuses an axis named twice; it was reduced once."""
    with pytest.raises(xpjit.InvalidArgumentError, match="duplicate"):
        sumsq(np.ones((2, 3, 4)), axis=axis)


def test_reduction_of_a_zero_d_device_array(device):
    """A 0-d xpjit.ndarray reduces to its one element, as a 0-d NumPy
    array does (it was 'has 1 dimensions, an earlier [*] array 0': an
    outside probe)."""
    x = xpjit.asarray(np.array(5.0), device=device)
    assert back(sumsq(x)) == 25.0
    y = xpjit.asarray(np.array(3, np.int32), device=device)
    assert back(sumsq(y)) == 9
    assert back(axpb(x, x, 2.0)) == 15.0
    with pytest.raises(xpjit.InvalidArgumentError, match="out of range"):
        sumsq(x, axis=0)


def test_cupy_operations_without_last_semicolon():
    """CuPy's template writes the ';' after an operation and a
    post_map_expr, so its documented examples leave it out ("z = (x - y) *
    (x - y)"): they compile here too; one that ends in ';' or a block is
    kept as it is."""
    x = np.arange(6, dtype=np.float32)
    sq = xpjit.ElementwiseKernel("float32 x, float32 y", "float32 z",
                                 "z = (x - y) * (x - y)", "squared_diff")
    np.testing.assert_array_equal(sq(x, np.float32(2)), (x - 2) ** 2)
    blk = xpjit.ElementwiseKernel("T x", "T z",
                                  "if x > T(1) { z = x; } else { z = T(0); }",
                                  "keep_big")
    np.testing.assert_array_equal(blk(x), np.where(x > 1, x, 0))
    two = xpjit.ElementwiseKernel("T x", "T z", "let t = x + x; z = t",
                                  "twice")
    np.testing.assert_array_equal(two(x), x + x)
    l2 = xpjit.ReductionKernel("T x", "T y", "x * x", "a + b",
                               "y = sqrt(a)", "0", "l2norm")
    np.testing.assert_allclose(l2(x), np.sqrt((x * x).sum()), rtol=1e-6)
    # the source shows the ';' written, once
    assert "z = (x - y) * (x - y);\n" in sq.source(x, np.float32(2))
