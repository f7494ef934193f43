"""The 16-bit float types from Python (tests/conformance/half.xpk, as
tests/test_half.c runs them): f16 as numpy.float16, bf16 as uint16 bit
patterns (dtypes={"T": "bf16"}, or a bf16 parameter); casts, arithmetic
rounded after each operation, literals, scalar parameters rounded from
Python floats, limits, math builtins on every f16, atomics in global and
local memory, collectives, broadcasts and shuffles, bf16 computed in f32,
local tiles, and the compile errors of arithmetic on bf16; bit-exact
references (NumPy's float16 conversions round once, bf16 through
round-to-odd to f32), on every device here."""
import math

import numpy as np
import pytest

import xpjit
from conftest import back, conformance, on

F16, U16 = np.float16, np.uint16

# ---- references ------------------------------------------------------------


def h16(x):
    """x (doubles) rounded once to f16, as bits (NumPy converts doubles to
    float16 with one rounding, ties to even)."""
    with np.errstate(all="ignore"):
        return np.asarray(x, np.float64).astype(F16).view(U16)


def r16(x):
    """x rounded once to f16, as doubles."""
    return h_dec(h16(x))


def h_dec(h):
    return np.asarray(h, U16).view(F16).astype(np.float64)


def h_nan(h):
    h = np.asarray(h, U16)
    return ((h & 0x7c00) == 0x7c00) & ((h & 0x3ff) != 0)


def b_nan(b):
    b = np.asarray(b, U16)
    return ((b & 0x7f80) == 0x7f80) & ((b & 0x7f) != 0)


def b_dec(b):
    b = np.asarray(b, U16)
    u = b.reshape(-1).astype(np.uint32) << np.uint32(16)
    with np.errstate(invalid="ignore"):  # signalling NaNs
        return u.view(np.float32).astype(np.float64).reshape(b.shape)


def _to_odd(x):
    """x (doubles) rounded to odd to f32: a later rounding to bf16 is the
    one rounding of x (test_half.c's to_odd)."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        t = x.astype(np.float32)
        inexact = ~np.isnan(x) & (t.astype(np.float64) != x)
        over = inexact & (np.abs(t.astype(np.float64)) > np.abs(x))
        t = np.where(over, np.nextafter(t, np.float32(0)), t)
        u = t.view(np.uint32) | np.where(inexact, np.uint32(1),
                                         np.uint32(0))
    return u.view(np.float32)


def _bf16_bits_of(f):
    """The bf16 of f32 values, to nearest even on the top half; NaN
    quiet."""
    u = np.asarray(f, np.float32).view(np.uint32).astype(np.uint64)
    k16, one = np.uint64(16), np.uint64(1)
    r = ((u + np.uint64(0x7fff) + ((u >> k16) & one)) >> k16).astype(U16)
    return np.where(np.isnan(f), ((u >> k16) | np.uint64(0x40)).astype(U16),
                    r)


def b16(x):
    """x (doubles) rounded once to bf16, as bits."""
    return _bf16_bits_of(_to_odd(x))


def rbf(x):
    return b_dec(b16(x))


def h_same(got, want):
    got, want = np.asarray(got, U16), np.asarray(want, U16)
    return (got == want) | (h_nan(got) & h_nan(want))


def b_same(got, want):
    got, want = np.asarray(got, U16), np.asarray(want, U16)
    return (got == want) | (b_nan(got) & b_nan(want))


def h_ulps(got, want):
    """f16 units in the last place between got and want (+-0 the same; a
    NaN against a number: huge)."""
    def ordinal(h):
        h = np.asarray(h, U16).astype(np.int64)
        return np.where(h & 0x8000, -(h & 0x7fff), h)
    e = np.abs(ordinal(got) - ordinal(want))
    nan_g, nan_w = h_nan(got), h_nan(want)
    return np.where(nan_g | nan_w, np.where(nan_g & nan_w, 0, 1 << 20), e)


def rnd_h(lo, hi, n, rng):
    """random f16 bits: exponent field in [lo, hi], any sign and
    mantissa."""
    b = rng.integers(0, 1 << 16, n).astype(U16)
    e = rng.integers(lo, hi + 1, n).astype(U16)
    return (b & 0x83ff) | (e << 10)


def rnd_hmix(n, rng):
    """mostly moderate (2^-7 .. 2^8), some of every binade, some any
    bits."""
    q = rng.integers(0, 8, n)
    return np.where(q < 5, rnd_h(8, 22, n, rng),
                    np.where(q < 7, rnd_h(0, 30, n, rng),
                             rng.integers(0, 1 << 16, n).astype(U16)))


def rnd_b(lo, hi, n, rng):
    b = rng.integers(0, 1 << 16, n).astype(U16)
    e = rng.integers(lo, hi + 1, n).astype(U16)
    return (b & 0x807f) | (e << 7)


def _bad(what, ok, lines):
    """Fails with the first few of lines(i) for the indices where ok is
    false."""
    ok = np.asarray(ok)
    if ok.all():
        return
    idx = np.flatnonzero(~ok.reshape(-1))
    pytest.fail("%s: %d wrong; %s" % (what, idx.size, "; ".join(
        lines(i) for i in idx[:4])))


def test_references():
    """The references round once (the double-rounding examples of
    test_half.c), and NumPy's f16 conversion agrees with a rounding
    written out (test_half.c's round_fmt) on the edges and at random."""
    assert h16(1 + 2 ** -11 + 2 ** -40) == 0x3c01
    assert h16(np.float32(1 + 2 ** -11 + 2 ** -40)) == 0x3c00
    assert b16(1 + 2 ** -8 + 2 ** -40) == 0x3f81
    assert b16(float(np.float32(1 + 2 ** -8 + 2 ** -40))) == 0x3f80
    assert b16(0.1) == 0x3dcd and b16(1e39) == 0x7f80 and b16(-0.0) == 0x8000
    assert b16(2 ** -133) == 0x0001 and b16(2 ** -134) == 0x0000

    def round_fmt(x, p, emin, maxv):
        if x == 0 or not math.isfinite(x):
            return x
        e = math.frexp(x)[1]
        q = max(e - 1, emin)
        r = math.ldexp(round(math.ldexp(x, p - 1 - q)), q - (p - 1))
        return math.copysign(math.inf, x) if abs(r) > maxv else r

    rng = np.random.default_rng(70)
    xs = np.concatenate([
        [65504, 65519, 65520, 65519.99, 2 ** -24, 2 ** -25, 1.5 * 2 ** -24,
         2 ** -25 * (1 + 2 ** -40), 2049, 2051, 1 + 2 ** -11, 1e-8],
        np.ldexp(rng.uniform(0.5, 1, 3000), rng.integers(-30, 18, 3000)),
        np.ldexp(rng.uniform(0.5, 1, 2000), rng.integers(-140, 129, 2000)),
        h_dec(rng.integers(0, 0x7bff, 2000)) * (1 + 2.0 ** -11),
        b_dec(rng.integers(0, 0x7f7f, 2000)) * (1 + 2.0 ** -8)])
    xs = np.concatenate([xs, -xs])
    for x in xs:
        w = round_fmt(float(x), 11, -14, 65504.0)
        assert h_dec(h16(x)) == w, "f16 of %r: %r, want %r" % (
            x, h_dec(h16(x)), w)
        w = round_fmt(float(x), 8, -126, float.fromhex("0x1.fep127"))
        assert rbf(x) == w, "bf16 of %r: %r, want %r" % (x, rbf(x), w)


# ---- cast, axpy ------------------------------------------------------------------

CASTS = [("f64", "f16"), ("f32", "f16"), ("f64", "bf16"), ("f32", "bf16"),
         ("i32", "f16"), ("u16", "bf16"), ("f16", "f32"), ("f16", "i16"),
         ("bf16", "f64"), ("bf16", "u8"), ("f16", "bf16"), ("bf16", "f16"),
         ("f16", "bool"), ("bool", "bf16"), ("f16", "f16")]
_NP = {"f64": np.float64, "f32": np.float32, "i32": np.int32,
       "u16": np.uint16, "i16": np.int16, "u8": np.uint8, "f16": F16,
       "bf16": U16, "bool": np.bool_}


def _cast_src(s, d, rng):
    if s in ("f16", "bf16"):
        return np.arange(1 << 16).astype(U16)  # every pattern
    if s == "bool":
        return np.arange(64) % 3 == 1
    if s in ("i32", "u16"):
        edges = [0, 1, 2, 3, 7, 100, 127, 255, 256, 257, 259, 385, 1023, 2047,
                 2048, 2049, 2050, 2051, 4095, 4097, 32767, 65504, 65519,
                 65520, 65535]
        info = np.iinfo(_NP[s])
        x = rng.integers(-(1 << 24) + 1, 1 << 24, 4000)
        x = np.concatenate([edges, x, -np.array(edges)])
        return x[(x >= info.min) & (x <= info.max)].astype(_NP[s])
    # floats: ties and near-ties of the destination, the edges, random
    tof16 = d == "f16"
    if tof16:
        lo = h_dec(rng.integers(0, 0x7bff, 3000))
        ulp = h_dec(h16(lo).astype(np.uint32) + 1) - lo
    else:
        bb = rng.integers(0, 0x7f7f, 3000).astype(U16)
        lo = b_dec(bb)
        ulp = b_dec(bb + 1) - lo
    tie = lo + ulp / 2
    sign = rng.choice([-1, 1], tie.size)
    # near-ties: by 2^-30 ulp (invisible through f32), and by an f32 ulp
    near = tie + ulp * 2.0 ** -30 * sign
    near32 = np.nextafter(tie.astype(np.float32),
                          np.float32(np.inf) * sign).astype(np.float64)
    wide = np.ldexp(rng.uniform(0.5, 1, 3000),
                    rng.integers(-28, 18, 3000) if tof16 else
                    rng.integers(-150, 130, 3000))
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65519, 65520,
                1e10, 1e39, 3e38, 2 ** -24, 2 ** -25, 2 ** -133, 2 ** -134,
                1 + 2 ** -11 + 2 ** -40, 1 + 2 ** -8 + 2 ** -40]
    x = np.concatenate([specials, tie, near, near32, wide])
    x = np.concatenate([x, -x])
    with np.errstate(all="ignore"):
        return x.astype(_NP[s])


def _as_double(x, t):
    if t == "f16":
        return h_dec(x)
    if t == "bf16":
        return b_dec(x)
    return x.astype(np.float64)


@pytest.mark.parametrize("s,d", CASTS, ids=["%s-%s" % c for c in CASTS])
def test_cast(device, s, d):
    """D(x) for pairs with f16 or bf16 on one side: one rounding from the
    source's exact value (double rounding through f32 would show on the
    near-ties), integers truncated toward zero, NaN to NaN."""
    p = conformance("half.xpk")
    rng = np.random.default_rng(71)
    x = _cast_src(s, d, rng)
    y = on(device, np.zeros(x.size, _NP[d]))
    p.cast(x.size, on(device, x.view(F16) if s == "f16" else x), y,
           dtypes={"S": s, "D": d})
    got = back(y)
    if d == "f16":
        got = got.view(U16)
    v = _as_double(x, s)
    if d in ("f16", "bf16"):
        want = h16(v) if d == "f16" else b16(v)
        ok = h_same(got, want) if d == "f16" else b_same(got, want)
    elif d in ("f32", "f64"):
        with np.errstate(invalid="ignore"):
            want = v.astype(_NP[d])
        ok = (got.view("u%d" % got.itemsize) == want.view(
            "u%d" % want.itemsize)) | (np.isnan(got) & np.isnan(want))
    elif d == "bool":
        want = v != 0
        ok = got == want
    else:
        info = np.iinfo(_NP[d])
        with np.errstate(invalid="ignore"):
            t = np.trunc(v)
            inrange = (t >= info.min) & (t <= info.max)  # else unspecified
            want = np.where(inrange, t, 0).astype(_NP[d])
        ok = ~inrange | (got == want)
    _bad("cast %s -> %s" % (s, d), ok, lambda i: "x = %r (%s): got %r, want "
         "%r" % (v[i], x[i], got[i], want[i]))


def test_axpy_f16(device):
    """y = a * x + y in f16 with an f16 parameter rounded from a Python
    float, on whole arrays and on views from element 1; parameters of the
    wrong types refused."""
    p = conformance("half.xpk")
    rng = np.random.default_rng(72)
    n = 4099
    k = p.axpy.specialize(dtypes={"T": "f16"}, device=device)
    assert k.signature.startswith("axpy(a: f16, x: global const f16[]"), \
        k.signature
    for av in (0.1, 1 + 2 ** -11 + 2 ** -40, -3.7, 65519):
        for off in (0, 1):
            x = rnd_h(8, 20, n, rng).view(F16)
            y0 = rnd_h(8, 22, n, rng).view(F16)
            xd, yd = on(device, x), on(device, y0.copy())
            p.axpy(n - off, av, xd[off:], yd[off:])
            a = r16(av)
            want = h16(r16(a * h_dec(x.view(U16))) + h_dec(y0.view(U16)))
            want[:off] = y0.view(U16)[:off]
            got = back(yd).view(U16)
            _bad("axpy<f16> a = %r offset %d" % (av, off), h_same(got, want),
                 lambda i: "x %r y %r: got %r, want %r" % (
                     x[i], y0[i], got.view(F16)[i], want.view(F16)[i]))
    # arrays of other types: the inferred T disagrees, or the runtime
    # refuses (f32 where f16, bf16 where f16)
    x = on(device, np.zeros(8, F16))
    with pytest.raises(xpjit.SpecializationError, match="f16|f32"):
        p.axpy(8, 0.5, x, on(device, np.zeros(8, np.float32)))
    with pytest.raises(xpjit.InvalidArgumentError, match="'y'"):
        p.axpy(8, 0.5, x, on(device, np.zeros(8, U16)), dtypes={"T": "f16"})


# ---- arith, lits, params, hlimits ------------------------------------------------

ARITH_PAIRS = [
    (np.inf, -np.inf), (np.inf, np.inf), (0, 0), (1, 0), (-1, 0), (1, -0.0),
    (65504, 65504), (65504, 16), (65504, 15), (2048, 1), (2048, 3),
    (2 ** -24, 0.5), (1.5 * 2 ** -23, 0.5), (1, 2 ** -11), (1, 1.5 * 2 ** -10),
    (0.0, -0.0), (-0.0, -0.0), (1, 1), (np.nan, 1), (1, np.nan), (1, 3),
    (-7, 3), (2 ** -14, 2 ** -10), (3, 2 ** -14), (1000, 2 ** -5), (2, 2),
    (-2, 2), (0.1, 0.1)]


def test_arith(device):
    """f16 arithmetic rounded after each operation, literals adapting to
    T, compound assignments, no contraction; comparisons (NaN, +-0)."""
    p = conformance("half.xpk")
    rng = np.random.default_rng(73)
    m = 1 << 14
    pa = np.array(ARITH_PAIRS)
    xr = rnd_hmix(m, rng)
    yr = np.where(np.arange(m) % 4 == 0,  # close magnitudes: cancellation
                  (xr & 0x7c00) | (rng.integers(0, 1 << 16, m).astype(U16) &
                                   0x83ff), rnd_hmix(m, rng)).astype(U16)
    x = np.concatenate([h16(pa[:, 0]), xr]).astype(U16)
    y = np.concatenate([h16(pa[:, 1]), yr]).astype(U16)
    n = x.size
    o = on(device, np.zeros((n, 8), F16))
    c = on(device, np.zeros(n, np.int32))
    p.arith(n, on(device, x.view(F16)), on(device, y.view(F16)), o, c)
    got = back(o).view(U16)
    a, b = h_dec(x), h_dec(y)
    with np.errstate(all="ignore"):
        want = np.stack([h16(a + b), h16(a - b), h16(a * b), h16(a / b),
                         np.where(h_nan(x), U16(0x7e00), x ^ U16(0x8000)),
                         h16(r16(a * r16(0.1)) + 1), h16(r16(a + b) * b),
                         h16(r16(a * b) + a)], axis=1).astype(U16)
        cw = ((a < b) * 1 | (a <= b) * 2 | (a == b) * 4 | (a != b) * 8 |
              (a > b) * 16 | (a >= b) * 32)
    names = ["a + b", "a - b", "a * b", "a / b", "-a", "a * 0.1 + 1",
             "(a + b) * b", "a * b + a"]
    ok = h_same(got, want)
    _bad("f16 arithmetic", ok, lambda i: "%s, a = %r, b = %r: got %r, want "
         "%r" % (names[i % 8], a[i // 8], b[i // 8], got.view(F16).flat[i],
                 want.view(F16).flat[i]))
    gc = back(c)
    _bad("f16 comparisons (1 <, 2 <=, 4 ==, 8 !=, 16 >, 32 >=)", gc == cw,
         lambda i: "a = %r, b = %r: 0x%x, want 0x%x" % (a[i], b[i], gc[i],
                                                        cw[i]))


def test_literals(device):
    """Literals and variables of f16 and bf16, each rounded once (1 +
    2^-11 + 2^-40 to 1 + 2^-10, 1 + 2^-8 + 2^-40 to 1 + 2^-7), a private
    f16 array zero-initialised."""
    p = conformance("half.xpk")
    rng = np.random.default_rng(74)
    n = 1000
    x = np.concatenate([h16([1.0, -0.0, 1.5, 2049]),
                        rnd_h(8, 24, n - 4, rng)]).astype(U16)
    o = on(device, np.zeros((n, 5), F16))
    b = on(device, np.zeros((n, 5), U16))
    p.lits(n, on(device, x.view(F16)), o, b)
    v = h_dec(x)
    h = r16(0.1)
    with np.errstate(all="ignore"):
        wo = np.stack([h16(r16(v * 0.5) + 1.5), np.full(n, h16(0.1)),
                       h16(0.0 + r16(v * h)), np.full(n, U16(0x3c01)),
                       h16(np.where(v > 1.0, v, -v))], axis=1).astype(U16)
    wb = np.stack([np.full(n, U16(0x3fc0)), np.full(n, U16(0x3e80)),
                   np.full(n, U16(0x3f81)), b16(v), np.full(n, b16(0.1))],
                  axis=1).astype(U16)
    go, gb = back(o).view(U16), back(b)
    on_ = ["v * 0.5 + 1.5f16", "let h: f16 = 0.1", "0 + v * h (private "
           "array)", "1.000488281250909", "v > 1.0 ? v : -v"]
    bn = ["let z: bf16 = 1.5", "0.25", "1.0039062500009095", "bf16(v)", "0.1"]
    _bad("f16 literals", h_same(go, wo), lambda i: "%s, v = %r: got 0x%04x, "
         "want 0x%04x" % (on_[i % 5], v[i // 5], go.flat[i], wo.flat[i]))
    _bad("bf16 literals", b_same(gb, wb), lambda i: "%s, v = %r: got "
         "0x%04x, want 0x%04x" % (bn[i % 5], v[i // 5], gb.flat[i],
                                  wb.flat[i]))


PARAMS = [(0.1, 0.3), (1 + 2 ** -11 + 2 ** -40, 1 + 2 ** -8 + 2 ** -40),
          (65519, float.fromhex("0x1.fefffffffffffp127")), (65520, 1e39),
          (-0.0, -0.0), (1.5 * 2 ** -23, 2 ** -133), (1e-8, 2 ** -134),
          (np.nan, np.nan), (-np.inf, np.inf), (2049, 257), (-2051, 385),
          (np.float16(0.1), 0.3), (3, -7)]


@pytest.mark.parametrize("av,bv", PARAMS, ids=[str(i) for i in
                                                range(len(PARAMS))])
def test_params(device, av, bv):
    """f16 and bf16 scalar parameters from Python floats, ints and NumPy
    scalars, rounded once by the runtime."""
    p = conformance("half.xpk")
    o, ob = on(device, np.full(2, 7, F16)), on(device, np.full(2, 7, U16))
    p.params(1, av, bv, o, ob)
    a, b = r16(float(av)), rbf(float(bv))
    with np.errstate(all="ignore"):
        want = [h16(a), h16(a + a), b16(b),
                b16(float(np.float32(b) * np.float32(2)))]
    got = list(back(o).view(U16)) + list(back(ob))
    names = ["o[0] = a", "o[1] = a + a", "ob[0] = b", "ob[1] = bf16(f32(b) "
             "* 2)"]
    for j in range(4):
        same = h_same if j < 2 else b_same
        assert same(got[j], want[j]), "params(a = %r, b = %r): %s = 0x%04x, "\
            "want 0x%04x" % (av, bv, names[j], got[j], want[j])


@pytest.mark.parametrize("scalar", [np.float32, np.float64, np.float16])
def test_params_numpy_scalar_bf16(device, scalar):
    p = conformance("half.xpk")
    o, ob = on(device, np.full(2, 7, F16)), on(device, np.full(2, 7, U16))
    p.params(1, 0.5, scalar(0.3), o, ob)
    assert back(ob)[0] == b16(float(scalar(0.3)))


def test_hlimits(device):
    """max, min, min_positive, epsilon, infinity, nan, -infinity of f16
    bit for bit, and the relations of f16 arithmetic at its limits (ties
    to even at the overflow and in the subnormals)."""
    p = conformance("half.xpk")
    out = on(device, np.full(8, 7, F16))
    f = on(device, np.full(11, 0x5a5a, np.int32))
    p.hlimits(1, out, f)
    got = back(out).view(U16)
    want = [0x7bff, 0xfbff, 0x0400, 0x1400, 0x7c00, 0x7e00, 0xfc00, 0x7bff]
    names = ["max_value", "min_value", "min_positive", "epsilon", "infinity",
             "nan", "-infinity", "max_value(f16)"]
    bad = ["%s(f16) = 0x%04x, want 0x%04x" % (names[i], got[i], want[i])
           for i in range(8) if not h_same(got[i], want[i])]
    rel = ["1 + eps > 1", "1 + eps / 2 == 1", "max * 2 == inf",
           "max + 16 == inf", "max + 15 == max", "min_positive / 1024 > 0",
           "min_positive / 2048 == 0", "min_positive / 1024 * 1.5 == "
           "min_positive / 512", "isnan(nan)", "nan != nan",
           "-inf < min_value"]
    fl = back(f)
    bad += ["%s is false (%d)" % (rel[i], fl[i]) for i in range(11)
            if fl[i] != 1]
    assert not bad, "f16 limits: " + "; ".join(bad)


# ---- hmath1, hmath2 ---------------------------------------------------------------


def _vec(fn):
    return np.vectorize(fn, otypes=[np.float64])


def _tgamma(x):
    if x == 0:
        return math.copysign(math.inf, x)
    try:
        return math.gamma(x)
    except OverflowError:
        return math.inf
    except ValueError:  # negative integers, -inf
        return math.nan


def _lgamma(x):
    try:
        return math.lgamma(x)
    except (ValueError, OverflowError):  # the poles
        return math.inf


# hmath1's columns: (name, reference on long doubles, exact)
_LD = np.longdouble
HMATH1 = [
    ("sqrt", np.sqrt, True), ("rsqrt", lambda v: 1 / np.sqrt(v), False),
    ("cbrt", np.cbrt, False), ("exp", np.exp, False),
    ("exp2", np.exp2, False), ("expm1", np.expm1, False),
    ("log", np.log, False), ("log2", np.log2, False),
    ("log10", np.log10, False), ("log1p", np.log1p, False),
    ("sin", np.sin, False), ("cos", np.cos, False), ("tan", np.tan, False),
    ("asin", np.arcsin, False), ("acos", np.arccos, False),
    ("atan", np.arctan, False), ("sinh", np.sinh, False),
    ("cosh", np.cosh, False), ("tanh", np.tanh, False),
    ("fabs", np.fabs, True), ("floor", np.floor, True),
    ("ceil", np.ceil, True),
    ("round", lambda v: np.copysign(np.where(
        v >= 0, np.floor(v + _LD(0.5)), np.ceil(v - _LD(0.5))), v), True),
    ("trunc", np.trunc, True),
    ("erf", lambda v: _vec(math.erf)(v.astype(np.float64)), False),
    ("erfc", lambda v: _vec(math.erfc)(v.astype(np.float64)), False),
    ("lgamma", lambda v: _vec(_lgamma)(v.astype(np.float64)), False),
    ("tgamma", lambda v: _vec(_tgamma)(v.astype(np.float64)), False)]
_HMATH1_WANT = {}


def _math_bound(device, exact):
    """f16 ulps from the correctly rounded value: 0 for the exact ones, 1
    on the CPU device (it evaluates in f32 and rounds), 2 elsewhere (the
    device's own f32 functions within their bounds)."""
    return 0 if exact else 1 if device.backend == "cpu" else 2


def test_hmath1(device):
    """Every one-argument math builtin on all 65536 f16 inputs, and
    isnan / isinf / isfinite."""
    p = conformance("half.xpk")
    x = np.arange(1 << 16).astype(U16)
    nf = len(HMATH1)
    o = on(device, np.zeros((x.size, nf), F16))
    c = on(device, np.zeros(x.size, np.int32))
    p.hmath1(x.size, on(device, x.view(F16)), o, c)
    got = back(o).view(U16)
    v = h_dec(x)
    if not _HMATH1_WANT:
        with np.errstate(all="ignore"):
            for name, fn, exact in HMATH1:
                _HMATH1_WANT[name] = h16(fn(v.astype(_LD)).astype(np.float64))
    bad = []
    for f, (name, fn, exact) in enumerate(HMATH1):
        bound = _math_bound(device, exact)
        w = _HMATH1_WANT[name]
        g = got[:, f]
        e = np.where(h_same(g, w), 0, 1 << 20) if exact else h_ulps(g, w)
        if name == "lgamma" and device.backend != "cpu":
            # no accuracy bound in OpenCL: positive arguments away from
            # its zeros at 1 and 2 (as test_half.c)
            with np.errstate(invalid="ignore"):
                skip = ~np.isnan(v) & ((v <= 0) | (np.abs(v - 1) < 0.01) |
                                       (np.abs(v - 2) < 0.01))
            e = np.where(skip, 0, e)
        if (e > bound).any():
            i = int(np.argmax(e))
            bad.append("%s: %d beyond %d ulp, worst %s(%r [0x%04x]) = %r, "
                       "want %r (%d ulp)" % (
                           name, int((e > bound).sum()), bound, name, v[i],
                           x[i], h_dec(g[i]), h_dec(w[i]), e[i]))
    cw = np.isnan(v) * 1 + np.isinf(v) * 2 + np.isfinite(v) * 4
    gc = back(c)
    if (gc != cw).any():
        i = int(np.flatnonzero(gc != cw)[0])
        bad.append("classify 0x%04x: %d, want %d" % (x[i], gc[i], cw[i]))
    assert not bad, "f16 math1 on %s: %s" % (device.backend, "; ".join(bad))


def _hmath2_inputs(n, rng):
    x, y, z = rnd_hmix(n, rng), rnd_hmix(n, rng), rnd_hmix(n, rng)
    q = np.arange(n) % 4
    # pow's interesting range: x in [0.25, 4), |y| < 16
    i0 = q == 0
    x[i0] = rnd_h(13, 16, i0.sum(), rng) & 0x7fff
    y[i0] = rnd_h(0, 18, i0.sum(), rng)
    # fma: z cancels the rounded product
    i1 = q == 1
    x[i1] = rnd_h(8, 20, i1.sum(), rng)
    y[i1] = rnd_h(8, 20, i1.sum(), rng)
    z[i1] = h16(-r16(h_dec(x[i1]) * h_dec(y[i1])))
    i2 = q == 2
    y[i2] = rng.integers(0, 1 << 16, i2.sum()).astype(U16)
    # fma: products exactly halfway between two f16 values, at least 2,
    # z = +-2^-24 decides the rounding (an f32 fma would lose it); drawn
    # from many candidate pairs at once (about 1 in 2048 is halfway)
    ca = rnd_h(14, 17, 1 << 20, rng) & 0x7fff
    cb = rnd_h(14, 17, 1 << 20, rng) & 0x7fff
    prod = h_dec(ca) * h_dec(cb)
    u = np.ldexp(1.0, np.frexp(prod)[1] - 11)  # the f16 ulp at prod
    half = np.flatnonzero((prod >= 2) & (prod < 32768) &
                          (np.fmod(prod, u) == u / 2))
    idx = np.flatnonzero(q == 3)[:half.size]
    x[idx], y[idx] = ca[half[:idx.size]], cb[half[:idx.size]]
    z[idx] = np.where(idx % 8 == 3, 0x0001, 0x8001)
    return x, y, z


def _fma_f16(a, b, c):
    """fma of f16 values rounded once to f16 (the product is exact in a
    double; the sum of it and c, exact as a rational, rounded to double
    first only where that cannot change the f16 result: a double has
    more than 2 * 11 + 2 bits)."""
    import fractions
    out = np.empty(a.size)
    with np.errstate(all="ignore"):
        for i, (x, y, w) in enumerate(zip(a.tolist(), b.tolist(),
                                          c.tolist())):
            if math.isfinite(x) and math.isfinite(y) and math.isfinite(w) \
                    and x * y + w != 0:
                out[i] = float(fractions.Fraction(x) * fractions.Fraction(y)
                               + fractions.Fraction(w))
            else:
                out[i] = x * y + w
    return h16(out)


def test_hmath2(device):
    """pow, atan2, hypot within 1 ulp (2 off the CPU) of the correctly
    rounded value; copysign, fma (rounded once) and abs bit for bit; fmin,
    fmax, min, max, clamp by value (+-0 either; NaN for min, max, clamp
    unspecified)."""
    p = conformance("half.xpk")
    rng = np.random.default_rng(75)
    n = 12000
    x, y, z = _hmath2_inputs(n, rng)
    nf = 11
    o = on(device, np.zeros((n, nf), F16))
    p.hmath2(n, *(on(device, t.view(F16)) for t in (x, y, z)), o)
    got = back(o).view(U16)
    a, b, c = h_dec(x), h_dec(y), h_dec(z)
    with np.errstate(all="ignore"):
        A, B = a.astype(_LD), b.astype(_LD)
        want = [h16(np.power(A, B).astype(np.float64)),
                h16(np.arctan2(A, B).astype(np.float64)),
                h16(np.hypot(A, B).astype(np.float64)),
                h16(np.fmin(a, b)), h16(np.fmax(a, b)), h16(np.copysign(a, b)),
                _fma_f16(a, b, c), h16(np.where(b < a, b, a)),
                h16(np.where(b > a, b, a)),
                h16(np.fmin(np.fmax(a, -np.abs(b)), np.abs(b))),
                h16(np.abs(a))]
    names = ["pow", "atan2", "hypot", "fmin", "fmax", "copysign", "fma",
             "min", "max", "clamp", "abs"]
    kind = [0, 0, 0, 2, 2, 1, 1, 2, 2, 2, 1]  # 0 ulps, 1 bits, 2 value
    nan = np.isnan(a) | np.isnan(b)
    bad = []
    for f in range(nf):
        g, w = got[:, f], want[f]
        if kind[f] == 1:
            e = np.where(h_same(g, w), 0, 1 << 20)
        elif kind[f] == 2:
            e = np.where(h_ulps(g, w) == 0, 0, 1 << 20)
        else:
            e = h_ulps(g, w)
        if f in (7, 8, 9):
            e = np.where(nan, 0, e)
        bound = _math_bound(device, kind[f] != 0)
        if (e > bound).any():
            i = int(np.argmax(e))
            bad.append("%s: %d beyond %d ulp, worst (%r, %r%s) = %r, want %r"
                       % (names[f], int((e > bound).sum()), bound, a[i], b[i],
                          ", %r" % c[i] if f == 6 else "", h_dec(g[i]),
                          h_dec(w[i])))
    assert not bad, "f16 math2 on %s: %s" % (device.backend, "; ".join(bad))


# ---- hatomics, hatomics_local -----------------------------------------------------


def _is_run(vals, first):
    """vals (f16 bits) are exactly first, first + 1, ... in some order."""
    v = np.sort(h_dec(vals))
    return np.array_equal(v, first + np.arange(v.size))


@pytest.mark.parametrize("n", [1500, 7, 2046])
def test_hatomics(device, n):
    """f16 atomics in global memory, neighbours sharing 32-bit words: add
    (old values 0 .. m-1), sub, add by compare-exchange, exchange chains,
    store, load."""
    p = conformance("half.xpk")
    c = on(device, h16([0, 0, 0, 0, 7.5, -1, -3.75, 1234]).view(F16))
    olds = on(device, np.zeros(n, F16))
    tok = on(device, np.arange(n).astype(F16))
    st, ld = on(device, np.zeros(n, F16)), on(device, np.zeros(n, F16))
    p.hatomics(n, c, olds, tok, st, ld)
    n0, n1, n2 = (n + 2) // 3, (n + 1) // 3, n // 3
    gc = back(c).view(U16)
    want = h16([n0, -0.5 * n1, 0.25 * n, n2, 7.5, 0, -3.75, 1234])
    bad = ["c[%d] = %r, want %r" % (j, h_dec(gc[j]), h_dec(want[j]))
           for j in range(8) if j != 5 and not h_same(gc[j], want[j])]
    go = back(olds).view(U16)
    i = np.arange(n)
    if not (go[i % 3 != 0] == h16(-1)).all():
        bad.append("olds of the work-items that did not add are not -1")
    if not _is_run(go[i % 3 == 0], 0):
        bad.append("atomic_add's old values are not 0 .. %d" % (n0 - 1))
    if not (back(st).view(U16) == h16(i * 0.5)).all():
        bad.append("atomic_store: st != i / 2")
    if not (back(ld).view(U16) == h16(-3.75)).all():
        bad.append("atomic_load: ld != -3.75")
    if not _is_run(np.append(back(tok).view(U16), gc[5]), -1):
        bad.append("the exchanged tokens and the slot are not -1 .. %d"
                   % (n - 1))
    assert not bad, "f16 atomics in global memory (n %d): %s" % (
        n, "; ".join(bad))


@pytest.mark.parametrize("L", [1, 7, 64, 256, 1000])
def test_hatomics_local(device, L):
    """f16 atomics in local memory at work-group scope: add (old values
    0 .. m-1 per element), sub, add by compare-exchange, an element left
    alone."""
    p = conformance("half.xpk")
    G = 3
    out = on(device, np.zeros((G, 8), F16))
    olds = on(device, np.zeros(L * G, F16))
    p.hatomics_local[L * G, L](out, olds)
    lid = np.arange(L)
    cnt = [int((lid % 4 == j).sum()) for j in range(4)] + \
        [int((lid % 2 == j).sum()) for j in range(2)]
    want = h16(cnt[:4] + [0.0 - 0.5 * cnt[4], 0.0 - 0.5 * cnt[5], L, -3.75])
    go, gl = back(out).view(U16), back(olds).view(U16).reshape(G, L)
    bad = []
    for g in range(G):
        bad += ["group %d: l[%d] = %r, want %r" % (g, j, h_dec(go[g, j]),
                                                   h_dec(want[j]))
                for j in range(8) if not h_same(go[g, j], want[j])]
        bad += ["group %d: the old values of l[%d] are not 0 .. %d" % (
            g, j, cnt[j] - 1) for j in range(4)
            if not _is_run(gl[g, j::4], 0)]
    assert not bad, "f16 atomics in local memory (L %d): %s" % (
        L, "; ".join(bad))


# ---- hcoll, hmul, moves -------------------------------------------------------------

COLL_L = [1, 7, 64, 100, 256]


def _check_sums(what, x, red, inc, exc, exact):
    """Sums of f16 accumulated in f32 and rounded once: got lies between
    the roundings of S - d and S + d (S exact, d the f32 error bound of
    any order; 0 where every partial sum is exact). x, red, inc, exc: the
    members in order (any of the last three None)."""
    v = h_dec(x)
    S = np.cumsum(v)
    A = np.cumsum(np.abs(v))
    j = np.arange(v.size)
    S_exc = S - v
    d_inc = 0 if exact else 1.01 * (j + 1) * 2.0 ** -24 * A
    d_exc = 0 if exact else 1.01 * j * 2.0 ** -24 * (A - np.abs(v))
    d_red = 0 if exact else 1.01 * v.size * 2.0 ** -24 * A[-1]

    def ok(got, s, d):
        g = h_dec(got)
        return ~np.isnan(g) & (r16(s - d) <= g) & (g <= r16(s + d))
    bad = []
    for name, got, s, d in (("inclusive", inc, S, d_inc),
                            ("exclusive", exc, S_exc, d_exc),
                            ("sum", red, S[-1], d_red)):
        if got is None:
            continue
        good = ok(got, s, d)
        if not good.all():
            i = int(np.flatnonzero(~good)[0])
            bad.append("%s %s [%d]: %r, want %r" % (
                what, name, i, h_dec(got[i]),
                float(np.broadcast_to(s, v.shape)[i])))
    return bad


def _sub_groups(info, g, L):
    """The sub-groups of group g (info: size, id, lane per work-item), as
    index arrays in lane order; checks they partition the group."""
    rows = info[g * L:(g + 1) * L]
    out, covered, sg = [], 0, 0
    while covered < L:
        idx = np.flatnonzero(rows[:, 1] == sg)
        assert idx.size, "group %d (L %d): no sub-group %d" % (g, L, sg)
        size = rows[idx[0], 0]
        lanes = rows[idx, 2]
        assert size == idx.size and (rows[idx, 0] == size).all() and \
            sorted(lanes) == list(range(size)), \
            "group %d (L %d): sub-group %d: sizes %s lanes %s" % (
                g, L, sg, rows[idx, 0], lanes)
        out.append(g * L + idx[np.argsort(lanes)])
        covered += idx.size
        sg += 1
    return out


@pytest.mark.parametrize("exact", [True, False], ids=["exact", "bound"])
@pytest.mark.parametrize("L", COLL_L)
def test_hcoll(device, L, exact):
    """f16 work-group sum (reduce, scans), minimum, inclusive maximum, and
    sub-group sums (reduce, exclusive scan)."""
    p = conformance("half.xpk")
    rng = np.random.default_rng(76 + L)
    G = 3
    n = L * G
    x = (h16(rng.integers(-256, 1025, n) / 16) if exact  # multiples of 1/16
         else rnd_h(1, 24, n, rng))
    outs = [on(device, np.zeros(n, F16)) for _ in range(7)]
    info = on(device, np.full((n, 3), -1, np.int64))
    p.hcoll[n, L](on(device, x.view(F16)), *outs, info)
    red, inc, exc, mn, mx, sred, sexc = (back(o).view(U16) for o in outs)
    inf = back(info)
    what = "hcoll L %d (%s)" % (L, "exact" if exact else "bound")
    bad = []
    for g in range(G):
        m = slice(g * L, (g + 1) * L)
        bad += _check_sums(what, x[m], red[m], inc[m], exc[m], exact)
        v = h_dec(x[m])
        if not (h_dec(mn[m]) == v.min()).all():
            bad.append("%s min of group %d" % (what, g))
        if not (h_dec(mx[m]) == np.maximum.accumulate(v)).all():
            bad.append("%s inclusive max of group %d" % (what, g))
        for mem in _sub_groups(inf, g, L):
            bad += _check_sums(what + " sub-group", x[mem], sred[mem], None,
                               sexc[mem], exact)
    assert not bad, "; ".join(bad[:6])


@pytest.mark.parametrize("L", COLL_L)
def test_hmul(device, L):
    """f16 work-group products of +-1, +-2, +-0.5 and at most 8 of +-1.5
    (every partial product exact in f32: the result is the exact product
    rounded)."""
    p = conformance("half.xpk")
    rng = np.random.default_rng(77 + L)
    G = 3
    f = np.array([1, -1, 1, -1, 1, 1, 2, -2, 0.5, -0.5, 1.5, -1.5])
    v = f[rng.integers(0, 12, (G, L))]
    for g in range(G):  # at most 8 of +-1.5 per group
        thirds = np.flatnonzero(np.abs(v[g]) == 1.5)
        v[g, thirds[8:]] = 1
    x = h16(v.reshape(-1))
    red, inc, exc = (on(device, np.zeros(L * G, F16)) for _ in range(3))
    p.hmul[L * G, L](on(device, x.view(F16)), red, inc, exc)
    P = np.cumprod(v, axis=1)
    Pexc = np.concatenate([np.ones((G, 1)), P[:, :-1]], axis=1)
    for name, got, want in (("exclusive", exc, h16(Pexc)),
                            ("inclusive", inc, h16(P)),
                            ("product", red, h16(np.repeat(P[:, -1:], L, 1)))):
        g = back(got).view(U16).reshape(G, L)
        ok = h_same(g, want)
        _bad("hmul L %d %s" % (L, name), ok, lambda i: "[%d]: %r, want %r" % (
            i, h_dec(g.flat[i]), h_dec(want.flat[i])))


@pytest.mark.parametrize("L", COLL_L)
@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_moves(device, t, L):
    """Broadcasts and shuffles move f16 and bf16 bits (every non-NaN
    pattern: -0, subnormals, infinities)."""
    p = conformance("half.xpk")
    rng = np.random.default_rng(78 + L)
    G = 3
    n = L * G
    x = rng.integers(0, 1 << 16, 4 * n).astype(U16)
    x = x[~(b_nan(x) if t == "bf16" else h_nan(x))][:n]
    x[3::16] = 0x8000 | rng.integers(0, 4, x[3::16].size)
    src = int(rng.integers(0, L))
    dt = F16 if t == "f16" else U16
    bc, sb, sh = (on(device, np.zeros(n, dt)) for _ in range(3))
    info = on(device, np.full((n, 3), -1, np.int64))
    p.moves[n, L](on(device, x.view(dt)), bc, sb, sh, info, np.int64(src),
                  dtypes={"T": t})
    gbc, gsb, gsh = (back(a).view(U16) for a in (bc, sb, sh))
    want = np.repeat(x.reshape(G, L)[:, src], L)
    _bad("moves<%s> L %d group_broadcast from %d" % (t, L, src), gbc == want,
         lambda i: "[%d]: 0x%04x, want 0x%04x" % (i, gbc[i], want[i]))
    inf = back(info)
    for g in range(G):
        for mem in _sub_groups(inf, g, L):
            np.testing.assert_array_equal(
                gsb[mem], np.full(mem.size, x[mem[0]]),
                err_msg="moves<%s> L %d sub_group_broadcast" % (t, L))
            np.testing.assert_array_equal(
                gsh[mem], x[mem[::-1]],
                err_msg="moves<%s> L %d sub_group_shuffle" % (t, L))


# ---- baxpy, tiles, bf16 errors -------------------------------------------------------


@pytest.mark.parametrize("av", [0.3, 1 + 2 ** -8 + 2 ** -40, -1e30, 2 ** -130])
def test_baxpy(device, av):
    """bf16 loaded, computed in f32 (no fma), stored rounded; the bf16
    parameter rounded once from the Python float."""
    p = conformance("half.xpk")
    rng = np.random.default_rng(79)
    n = 4099
    q = np.arange(n) % 8
    x = np.where(q < 5, rnd_b(110, 140, n, rng),
                 np.where(q < 7, rnd_b(0, 254, n, rng),
                          rng.integers(0, 1 << 16, n).astype(U16))).astype(U16)
    y0 = np.where(q < 5, rnd_b(110, 140, n, rng),
                  rnd_b(0, 254, n, rng)).astype(U16)
    yd = on(device, y0.copy())
    p.baxpy(n, av, on(device, x), yd)
    a = np.float32(rbf(av))
    with np.errstate(all="ignore"):
        s = a * b_dec(x).astype(np.float32) + b_dec(y0).astype(np.float32)
    want = _bf16_bits_of(s)
    got = back(yd)
    _bad("bf16 axpy (a = %r)" % av, b_same(got, want), lambda i: "x = %r, "
         "y = %r: got %r, want %r" % (b_dec(x[i]), b_dec(y0[i]),
                                      b_dec(got[i]), b_dec(want[i])))


@pytest.mark.parametrize("L", [1, 7, 64, 100, 256])
def test_tiles(device, L):
    """f16 and bf16 local arrays: each work-item reads its mirror's
    element after the barrier."""
    p = conformance("half.xpk")
    rng = np.random.default_rng(80 + L)
    G = 4
    n = L * G
    x = rnd_hmix(n, rng)
    xb = rng.integers(0, 1 << 16, n).astype(U16)
    y, yb = on(device, np.zeros(n, F16)), on(device, np.zeros(n, U16))
    p.tiles[n, L](on(device, x.view(F16)), y, on(device, xb), yb)
    i = np.arange(n)
    m = i // L * L + (L - 1 - i % L)
    with np.errstate(all="ignore"):
        want = h16(h_dec(x[m]) + h_dec(x))
    gy, gb = back(y).view(U16), back(yb)
    _bad("tiles L %d f16" % L, h_same(gy, want), lambda k: "[%d]: %r + %r = "
         "%r, want %r" % (k, h_dec(x[m[k]]), h_dec(x[k]), h_dec(gy[k]),
                          h_dec(want[k])))
    _bad("tiles L %d bf16" % L, b_same(gb, xb[m]), lambda k: "[%d]: 0x%04x, "
         "want 0x%04x" % (k, gb[k], xb[m[k]]))


BF16_BODIES = [
    "x[i] = x[i] + x[0];",
    "let t = x[i]; t *= x[0]; x[i] = t;",
    "x[i] = -x[i];",
    "x[i] = x[i] * 2.0;",
    "if x[i] < x[0] { x[i] = x[0]; }",
    "x[i] = sqrt(x[i]);",
    "x[i] = min(x[i], x[0]);",
    "if isnan(x[i]) { x[i] = x[0]; }",
    "atomic_add(&x[0], x[i]);",
    "x[i] = atomic_load(&x[0]);",
    "x[i] = group_reduce_add(x[i]);",
    "x[i] = sub_group_scan_exclusive_min(x[i]);",
]


def _compile_body(device, ty, body):
    src = "kernel k(x: global %s[]) %s {\n    let i = global_id(0);\n" \
          "    %s\n}\n" % (ty, "ndrange(1)" if "group_" in body else "range",
                           body)
    prog = xpjit.Program(src, name="t.xpk")  # may raise already
    try:
        return prog.kernel("k").specialize(device=device)
    finally:
        prog.close()


@pytest.mark.parametrize("body", BF16_BODIES)
def test_bf16_errors(device, body):
    """bf16 is a storage type: arithmetic, comparisons, math, atomics and
    collectives on it fail to compile with a message naming bf16; the f16
    version compiles."""
    with pytest.raises(xpjit.XpjitError, match="bf16"):
        _compile_body(device, "bf16", body)
    _compile_body(device, "f16", body)


@pytest.mark.parametrize("name", ["arith", "axpy", "hlimits"])
def test_bf16_generic_refused(device, name):
    p = conformance("half.xpk")
    with pytest.raises(xpjit.SpecializationError, match="bf16"):
        p.kernel(name).specialize(dtypes={"T": "bf16"}, device=device)
