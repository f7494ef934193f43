"""More of the conformance suite from Python (tests/conformance/*.xpk, as
test_conformance_b.c and the atomics of part A run them): math builtins in
ULPs against NumPy and Python's math, scalars of every type, work-item ids
in 1-3 dimensions, integer and float atomics; on every device here."""
import math

import numpy as np
import pytest

from conftest import back, conformance, on

# math1's functions in the order of its fid: (name, domain, ULP bound,
# reference); bound < 0: exact
_EXP_LIM = {np.float32: 80.0, np.float64: 700.0}
MATH1 = [
    ("sqrt", "pos", -1, np.sqrt), ("rsqrt", "pos", 4,
                                   lambda x: 1 / np.sqrt(x)),
    ("cbrt", "all", 4, np.cbrt), ("exp", "exp", 4, np.exp),
    ("exp2", "exp", 4, np.exp2), ("expm1", "exp", 4, np.expm1),
    ("log", "pos", 4, np.log), ("log2", "pos", 4, np.log2),
    ("log10", "pos", 4, np.log10), ("log1p", "log1p", 4, np.log1p),
    ("sin", "trig", 4, np.sin), ("cos", "trig", 4, np.cos),
    ("tan", "trig", 4, np.tan), ("asin", "unit", 4, np.arcsin),
    ("acos", "unit", 4, np.arccos), ("atan", "all", 4, np.arctan),
    ("sinh", "hyp", 4, np.sinh), ("cosh", "hyp", 4, np.cosh),
    ("tanh", "all", 4, np.tanh), ("fabs", "all", -1, np.fabs),
    ("floor", "all", -1, np.floor), ("ceil", "all", -1, np.ceil),
    ("round", "all", -1, lambda x: np.where(x >= 0, np.floor(x + 0.5),
                                             np.ceil(x - 0.5))),
    ("trunc", "all", -1, np.trunc),
    ("erf", "all", 16, np.vectorize(math.erf, otypes=[np.float64])),
    ("erfc", "erfc", 16, np.vectorize(math.erfc, otypes=[np.float64])),
]


def _inputs(dom, dt, n, rng):
    if dom == "pos":
        x = np.exp(rng.uniform(-20, 20, n))
    elif dom == "exp":
        lim = _EXP_LIM[dt]
        x = rng.uniform(-lim, lim, n)
    elif dom == "log1p":
        x = np.expm1(rng.uniform(-5, 10, n))
    elif dom == "trig":
        x = rng.uniform(-100, 100, n)
    elif dom == "unit":
        x = rng.uniform(-1, 1, n)
    elif dom == "hyp":
        x = rng.uniform(-80, 80, n)
    elif dom == "erfc":
        x = rng.uniform(-5, 25, n)
    else:
        x = rng.uniform(-1e4, 1e4, n) * np.exp(rng.uniform(-10, 0, n))
    specials = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 1.5, -2.5,
                         3.5, np.inf, -np.inf, np.nan])
    return np.concatenate([x, specials]).astype(dt)


def _ulps(got, want, dt):
    """|got - want| in units of the last place of want in dt (NaN and
    infinities: 0 when they agree, inf when not)."""
    got = got.astype(np.float64)
    with np.errstate(all="ignore"):
        w = want.astype(dt).astype(np.float64)  # overflow to inf as dt does
        out = np.abs(got - want) / np.spacing(np.abs(w).astype(dt)).astype(
            np.float64)
    same = (np.isnan(got) & np.isnan(w)) | (np.isinf(w) & (got == w))
    out[same] = 0
    out[np.isnan(out)] = np.inf
    return out


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_math1(device, dt):
    p = conformance("math.xpk")
    rng = np.random.default_rng(7)
    bad = []
    for fid, (name, dom, bound, ref) in enumerate(MATH1):
        x = _inputs(dom, dt, 2000, rng)
        y = on(device, np.zeros_like(x))
        with np.errstate(all="ignore"):
            p.math1(x.size, np.int32(fid), on(device, x), y)
            got = back(y)
            want = ref(x.astype(np.float64))
        if bound < 0:
            ok = np.array_equal(got, want.astype(dt), equal_nan=True)
            worst = 0 if ok else np.inf
        else:
            e = _ulps(got, want, dt)
            worst = float(e.max())
            ok = worst <= bound
        if not ok:
            bad.append("%s: worst %.3g ulp (bound %s)" % (name, worst, bound))
    assert not bad, "; ".join(bad)


def test_all_scalars(device):
    p = conformance("scalars.xpk")
    ints = on(device, np.zeros(10, np.int64))
    uints = on(device, np.zeros(8, np.uint64))
    floats = on(device, np.zeros(4, np.float64))
    p.all_scalars(1, True, np.int8(-5), np.int16(-300), np.int32(-70000),
                  np.int64(-(2 ** 40)), np.uint8(50), np.uint16(9000),
                  np.uint32(5), np.uint64(2 ** 63 + 1), np.float32(0.25),
                  -3.5, ints, uints, floats)
    assert list(back(ints)) == [1, -5, -300, -70000, -(2 ** 40), 95, -900,
                                -70007, -5 * 2 ** 40, 1]
    assert list(back(uints)) == [50, 9000, 5, 2 ** 63 + 1, 250, 63000,
                                 0xfffffff5, 2 ** 63 + 18]
    np.testing.assert_array_equal(back(floats), [0.25, -3.5, 0.75, -3.5 / 3])
    # Python ints and bools for every type, range-checked
    p.all_scalars(1, False, -128, 32767, -(2 ** 31), 2 ** 63 - 1, 255,
                  65535, 2 ** 32 - 1, 2 ** 64 - 1, 1.5, 2, ints, uints,
                  floats)
    assert list(back(ints))[:5] == [0, -128, 32767, -(2 ** 31), 2 ** 63 - 1]
    assert list(back(uints))[:4] == [255, 65535, 2 ** 32 - 1, 2 ** 64 - 1]


def _ids_check(out, grid, local, cols):
    g = np.array(grid)
    for r, row in enumerate(out):
        gid = np.unravel_index(r, grid)  # the last dimension fastest
        for d in range(len(grid)):
            assert row[cols["gid"] + d] == gid[d]
            assert row[15 + d] == grid[d]
            if local:
                assert row[3 + d] == gid[d] % local[d]
                assert row[6 + d] == gid[d] // local[d]
                assert row[9 + d] == g[d] // local[d]
                assert row[12 + d] == local[d]
        assert row[18] == r
        if local:
            lid = [gid[d] % local[d] for d in range(len(grid))]
            grp = [gid[d] // local[d] for d in range(len(grid))]
            assert row[19] == np.ravel_multi_index(lid, local)
            assert row[20] == np.ravel_multi_index(
                grp, tuple(g // np.array(local)))


@pytest.mark.parametrize("grid,local", [((12,), (4,)), ((8, 12), (2, 4)),
                                        ((4, 6, 8), (2, 3, 2))])
def test_ids(device, grid, local):
    p = conformance("ids.xpk")
    n = int(np.prod(grid))
    out = on(device, np.full((n, 21), -1, np.int64))
    getattr(p, "ids_nd%d" % len(grid))[grid, local](out)
    _ids_check(back(out), grid, local, {"gid": 0})
    out2 = on(device, np.full((n, 21), -1, np.int64))
    p.ids_range(grid, out2)
    _ids_check(back(out2), grid, None, {"gid": 0})


@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.int64, np.uint64])
def test_atomic_int(device, dt):
    p = conformance("atomics.xpk")
    rng = np.random.default_rng(3)
    lo = 0 if np.dtype(dt).kind == "u" else -1000
    x = rng.integers(lo, 1000, 5000).astype(dt)
    info = np.iinfo(dt)
    acc = np.array([0, 0, info.max, info.min, info.max if lo == 0 else -1,
                    0, 0, 1, 0], dt)
    accd = on(device, acc)
    p.atomic_int(x.size, on(device, x), accd)
    got = back(accd)
    with np.errstate(over="ignore"):
        want = [x.sum(dtype=dt), (dt(0) - x.sum(dtype=dt)), x.min(), x.max(),
                np.bitwise_and.reduce(x), np.bitwise_or.reduce(x),
                np.bitwise_xor.reduce(x),
                np.multiply.reduce(x | dt(1), dtype=dt), x.size]
    assert list(got) == [dt(v) for v in want]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_float_atomics(device, dt):
    p = conformance("atomics.xpk")
    x = np.random.default_rng(4).uniform(-10, 10, 3001).astype(dt)
    res = on(device, np.array([-np.inf, np.inf, 0, 0], dt))
    p.float_atomics(x.size, on(device, x), res)
    got = back(res)
    assert got[0] == x.max() and got[1] == x.min()
    tol = 1e-3 if dt == np.float32 else 1e-9
    np.testing.assert_allclose(got[2], x.sum(dtype=np.float64), rtol=tol,
                               atol=tol)
    np.testing.assert_allclose(got[3], -x.sum(dtype=np.float64), rtol=tol,
                               atol=tol)


def _wrap(v, dt):
    """Python int v as dt's two's-complement value."""
    bits = np.dtype(dt).itemsize * 8
    v &= (1 << bits) - 1
    if np.dtype(dt).kind == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


@pytest.mark.parametrize("dt", [np.int8, np.int32, np.int64, np.uint32])
def test_int_ops(device, dt):
    p = conformance("intops.xpk")
    info = np.iinfo(dt)
    rng = np.random.default_rng(5)
    a = rng.integers(info.min, info.max, 600, endpoint=True).astype(dt)
    b = rng.integers(info.min, info.max, 600, endpoint=True).astype(dt)
    # the edges: division by zero and MIN / -1 must not trap
    a[:4] = [info.min, info.min, 7, info.max]
    b[:4] = [dt(-1) if info.min < 0 else dt(1), 0, 0, 3]
    out = on(device, np.zeros((a.size, 24), dt))
    p.int_ops(a.size, on(device, a), on(device, b), dt(info.min), out)
    got = back(out)
    bits = np.dtype(dt).itemsize * 8
    for i in range(a.size):
        x, y = int(a[i]), int(b[i])
        c = y & 127
        want = {0: x + y, 1: x - y, 2: x * y, 3: -x, 4: ~x,
                5: x << (c % bits), 17: min(x, y), 18: max(x, y)}
        sx = x if info.min < 0 else x  # values are already signed or not
        want[6] = sx >> (c % bits)
        ok = y != 0 and not (x == info.min and y == _wrap(-1, dt))
        if ok:
            q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
            want[9], want[10] = q, x - q * y
        else:
            want[9] = want[10] = 0
        want[12] = bin(x & ((1 << bits) - 1)).count("1")
        want[23] = min(max(x, y), c)  # clamp(x, y, c), also for y > c
        for col, v in want.items():
            assert int(got[i, col]) == _wrap(v, dt), \
                "int_ops %s x=%d y=%d column %d: %d, want %d" % (
                    np.dtype(dt), x, y, col, int(got[i, col]), _wrap(v, dt))


@pytest.mark.parametrize("dt", [np.float32, np.int64])
def test_early_exit(device, dt):
    p = conformance("control.xpk")
    x = np.arange(1, 301).astype(dt)
    y = on(device, np.zeros_like(x))
    p.early_exit(x.size, on(device, x), y)
    want = []
    for i, v in enumerate(x):
        if i % 3 == 0:
            want.append(-v)
            continue
        acc = 0
        for k in range(100):
            if k == i % 7:
                continue
            if k > i % 5 + 3:
                break
            acc += v
        want.append(acc)
    np.testing.assert_array_equal(back(y), np.array(want, dt))


CONVERT_PAIRS = [(np.int64, np.int8), (np.int8, np.int64), (np.uint8, np.int32),
                 (np.int32, np.uint16), (np.int32, np.float32),
                 (np.uint64, np.float64), (np.float64, np.int32),
                 (np.float32, np.float64), (np.float64, np.float16),
                 (np.float32, np.uint8), (np.bool_, np.float32)]


@pytest.mark.parametrize("src,dst", CONVERT_PAIRS)
def test_convert(device, src, dst):
    """Casts as the language defines them (docs/language.md 4.2; f64 to
    f16 calls libgcc's __truncdfhf2 on the CPU: it failed to load in a
    process without libgcc_s in its global scope, as Python's): narrower
    integers keep the low bits, widening extends by the source's sign,
    floats to integers truncate toward zero (in range: out of it the
    result is unspecified), to floats round to nearest even once."""
    p = conformance("intops.xpk")
    rng = np.random.default_rng(9)
    if np.dtype(src).kind == "f":
        lo, hi = (0, 255) if np.dtype(dst) == np.uint8 else (-1e5, 1e5)
        x = rng.uniform(lo, hi, 999).astype(src)
        if np.dtype(dst).kind == "f":
            x = np.concatenate([x, np.array([np.inf, -np.inf, np.nan, -0.0,
                                             7e4, 1e-8], src)])
    elif np.dtype(src) == np.bool_:
        x = rng.integers(0, 2, 999).astype(bool)
    else:
        info = np.iinfo(src)
        x = rng.integers(info.min, info.max, 999, endpoint=True, dtype=src)
    y = on(device, np.zeros(x.size, dst))
    p.convert(x.size, on(device, x), y)
    with np.errstate(all="ignore"):
        if np.dtype(src).kind == "f" and np.dtype(dst).kind in "iu":
            want = np.trunc(x).astype(dst)
        else:
            want = x.astype(dst)
    np.testing.assert_array_equal(back(y), want)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_classify(device, dt):
    p = conformance("math.xpk")
    x = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e-40,
                  np.finfo(dt).max, np.finfo(dt).tiny / 4], dt)
    out = on(device, np.zeros(x.size, np.int32))
    p.classify(x.size, on(device, x), out)
    with np.errstate(invalid="ignore"):
        want = (np.isnan(x) * 1 | np.isinf(x) * 2 | np.isfinite(x) * 4 |
                (x == x) * 8 | (x < 0) * 16 | (x > 0) * 32)
    np.testing.assert_array_equal(back(out), want.astype(np.int32))
