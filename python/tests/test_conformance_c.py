"""The rest of the C conformance suite from Python: the atomics and device
functions of part A (tests/test_conformance_a.c: token_swap, append_odd,
funcs, reverse_chunks) and part B (tests/test_conformance_b.c: math2 in
ULPs, ragged ranges, barriers in loops, launch validation, small scalar
types, limits), with the C tests' kernels, inputs and checks (fewer sizes),
against NumPy and Python references, on every device here. Launch
validation: every refused call raises an xpjit.XpjitError whose message
carries the runtime's (the C test's fragments) or, where Python refuses it
first, Python's own."""
import ctypes
import fractions

import numpy as np
import pytest

import xpjit
from conftest import back, conformance, on

# The C suite's sizes are 1, 7, 255, 1000, 4099, 65537 (conf_sizes) and its
# 1-D local sizes 0 (the runtime chooses), 1, 16, 64, 256 (locals_1d)
SIZES = [1, 7, 255, 1000, 4099]
LOCALS = [None, 1, 16, 64, 256]


def rnd_fill(n, dt, lo, hi, rng):
    """n values of dt uniform in [lo, hi), never 0 (common.h's rnd_fill:
    integers truncated toward zero, a zero made 1)."""
    v = rng.uniform(lo, hi, n)
    v[v == 0] = 1
    dt = np.dtype(dt)
    if dt.kind == "f":
        out = v.astype(dt)
    else:
        out = np.trunc(v).astype(dt)
    out[out == 0] = 1
    return out


def _ctx(what, dt, n, local):
    return "%s [%s] n=%s local=%s" % (what, np.dtype(dt).name, n, local)


# ---- atomics.xpk: token_swap, append_odd ------------------------------------


@pytest.mark.parametrize("dt", [np.int32, np.uint64, np.float32, np.float64])
def test_token_swap(device, dt):
    """Every work-item swaps its token into slot[0]: afterwards the tokens
    and the slot are a permutation of the originals."""
    p = conformance("atomics.xpk")
    rng = np.random.default_rng(21)
    for si, n in enumerate(SIZES + [65537]):
        tok = rnd_fill(n, dt, 1, 1e9, rng)
        slot = (rnd_fill(1, dt, 2e9, 4e9, rng) if dt == np.uint64 else
                rnd_fill(1, dt, -1e9, -1, rng))  # negative when signed
        local = LOCALS[si % len(LOCALS)]
        td, sd = on(device, tok.copy()), on(device, slot.copy())
        p.token_swap(n, td, sd, local=local)
        got = np.sort(np.concatenate([back(td), back(sd)]))
        want = np.sort(np.concatenate([tok, slot]))
        np.testing.assert_array_equal(
            got, want, err_msg=_ctx("token_swap (sorted tokens + slot)", dt,
                                    n, local))


@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.int64])
def test_append_odd(device, dt):
    """Slot allocation with an atomic counter: every odd value once, in
    some order; the count is their number."""
    p = conformance("atomics.xpk")
    rng = np.random.default_rng(22)
    for si, n in enumerate(SIZES + [65537]):
        x = rnd_fill(n, dt, 1 if dt == np.uint32 else -1e6, 1e6, rng)
        odd = np.sort(x[(x & dt(1)) == 1])
        out = on(device, np.ones(n, dt))
        count = on(device, np.zeros(1, np.uint32))
        local = LOCALS[(si + 2) % len(LOCALS)]
        p.append_odd(n, on(device, x), out, count, local=local)
        c = int(back(count)[0])
        assert c == odd.size, "%s: count %d, want %d" % (
            _ctx("append_odd", dt, n, local), c, odd.size)
        np.testing.assert_array_equal(
            np.sort(back(out)[:c]), odd,
            err_msg=_ctx("append_odd (sorted out)", dt, n, local))


# ---- functions.xpk: funcs, reverse_chunks -----------------------------------


def _funcs_ref(m, dt):
    """funcs' out[r, 0..7) computed in dt, in the kernel's order."""
    R, C = m.shape
    a, b = m[:, 0], m[:, 1]
    o = np.empty((R, 7), dt)
    with np.errstate(over="ignore"):
        o[:, 0] = a * a
        bb = b * b
        o[:, 1] = bb * b
        o[:, 2] = a + dt(3) * (b - a)
        acc = np.zeros(R, dt)
        for c in range(C):  # sum_row: left to right
            acc = acc + m[:, c]
        o[:, 3] = acc
        o[:, 4] = np.where(a > 0, dt(1), np.where(a < 0, dt(-1), dt(0)))
        o[:, 5] = bb + bb
        o[:, 6] = np.clip(np.arange(R) - 5, 0, 10).astype(dt)
    return o


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.int64])
def test_funcs(device, dt):
    """Generic device functions calling each other, array parameters, a
    function without a result; exact (the same operations in the same
    order as the reference)."""
    p = conformance("functions.xpk")
    rng = np.random.default_rng(23)
    fl = np.dtype(dt).kind == "f"
    for di, (R, C) in enumerate([(1, 2), (7, 3), (255, 17), (1000, 2),
                                 (4099, 5)]):
        m = rnd_fill(R * C, dt, -10 if fl else -1000, 10 if fl else 1000,
                     rng).reshape(R, C)
        if R > 3:
            m[3, 0] = 0  # sign() of an exact zero
        out = on(device, rnd_fill(R * 7, dt, 100, 200, rng).reshape(R, 7))
        local = LOCALS[di % len(LOCALS)]
        p.funcs(R, on(device, m), out, local=local)
        np.testing.assert_array_equal(
            back(out), _funcs_ref(m, dt),
            err_msg=_ctx("funcs %dx%d" % (R, C), dt, R, local))


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32])
def test_reverse_chunks(device, dt):
    """Group g reverses chunk g (512 elements) through scratch, with a
    device function that copies cooperatively and waits at a barrier;
    num_groups = ceil(n / 512), every local size the kernel allows."""
    p = conformance("functions.xpk")
    rng = np.random.default_rng(24)
    CHUNK = 512
    kmax = p.reverse_chunks.specialize(
        dtypes={"T": dt}, device=device).info.max_work_group_size
    for n in SIZES + [65537]:
        ng = (n + CHUNK - 1) // CHUNK
        src = rnd_fill(n, dt, -1e6, 1e6, rng)
        want = np.concatenate([src[b:b + CHUNK][::-1]
                               for b in range(0, n, CHUNK)])
        sd = on(device, src)
        scratch = on(device, np.zeros(ng * CHUNK, dt))
        for local in (1, 16, 64, 256, 512):
            if local > kmax:
                continue
            dst = on(device, np.ones(n, dt))
            p.reverse_chunks[ng * local, local](sd, scratch, dst)
            np.testing.assert_array_equal(
                back(dst), want, err_msg=_ctx("reverse_chunks", dt, n, local))


# ---- math.xpk: math2 ----------------------------------------------------------

# math2's functions in the order of its fid, with their ULP bounds (< 0:
# exact, any NaN for a NaN)
MATH2 = [("pow", 4), ("atan2", 4), ("hypot", 4), ("fmin", -1), ("fmax", -1),
         ("copysign", -1), ("fma", -1), ("min", -1), ("max", -1),
         ("clamp", -1), ("abs", -1)]
PAIR_SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.0,
                 3.0, 2.5]


def _rnd_real(rng, lo, hi, n):
    v = rng.uniform(lo, hi, n)
    v[v == 0] = (lo + hi) / 2 or 1
    return v


def _rnd_binade(rng, lo, hi, neg, n):
    """+-2^u, u uniform in [lo, hi) (test_conformance_b.c's rnd_binade)."""
    v = np.exp2(rng.uniform(lo, hi, n))
    if neg:
        v = np.where(rng.integers(0, 2, n) == 1, -v, v)
    return v


def _math2_gen(f, is64, rng, n):
    """(a, b, c) as math2_gen draws them, as doubles."""
    q = rng.integers(0, 4, n)
    c = np.zeros(n)
    if f == 0:  # pow
        a = np.where(q < 2, _rnd_binade(rng, -60 if is64 else -10,
                                        60 if is64 else 10, False, n),
                     np.where(q == 2, _rnd_real(rng, -10, 10, n),
                              _rnd_real(rng, 0.5, 2, n)))
        b = np.where(q < 2, _rnd_real(rng, -15, 15, n) if is64 else
                     _rnd_real(rng, -8, 8, n),
                     np.where(q == 2, rng.integers(-20, 21, n).astype(float),
                              _rnd_real(rng, -100, 100, n)))
    elif f == 1:  # atan2
        e = 1000 if is64 else 120
        a = np.where(q < 2, _rnd_real(rng, -100, 100, n),
                     _rnd_binade(rng, -e, e, True, n))
        b = np.where(q < 2, _rnd_real(rng, -100, 100, n),
                     _rnd_binade(rng, -e, e, True, n))
    elif f == 2:  # hypot: no undue overflow or underflow
        e = 1000 if is64 else 120
        a = _rnd_binade(rng, -e, e, True, n)
        b = np.where(q < 2, _rnd_binade(rng, -e, e, True, n),
                     a * _rnd_real(rng, -4, 4, n))
    elif f == 6:  # fma: c cancels the rounded product
        a = _rnd_real(rng, -1000, 1000, n)
        b = _rnd_real(rng, -1000, 1000, n)
        if is64:
            prod = a * b
        else:
            prod = (a.astype(np.float32) * b.astype(np.float32)).astype(
                np.float64)
        c = np.where(q < 2, -prod, _rnd_real(rng, -1e6, 1e6, n))
    elif f == 9:  # clamp(a, -b, b), b > 0
        a = _rnd_real(rng, -100, 100, n)
        b = _rnd_real(rng, 0, 100, n)
    else:
        a = _rnd_binade(rng, -20, 20, True, n)
        b = _rnd_binade(rng, -20, 20, True, n)
    return a, b, c


def _round_odd(q):
    """The double nearest to the rational q, rounded to odd when inexact
    (so that a later rounding to f32 is the one rounding of q)."""
    r = float(q)
    fr = fractions.Fraction(r)
    if fr != q and int(np.float64(r).view(np.uint64)) & 1 == 0:
        r = float(np.nextafter(r, np.inf if q > fr else -np.inf))
    return r


def _fma_ref(a, b, c, dt):
    """fma(a, b, c) rounded once to dt (elementwise, exact: rationals)."""
    out = np.empty(a.size, np.float64)
    with np.errstate(all="ignore"):
        for i, (x, y, z) in enumerate(zip(a.tolist(), b.tolist(),
                                          c.tolist())):
            if not (np.isfinite(x) and np.isfinite(y) and np.isfinite(z)):
                out[i] = x * y + z  # the specials: exact in double
                continue
            q = (fractions.Fraction(x) * fractions.Fraction(y) +
                 fractions.Fraction(z))
            if q == 0:  # the sign of an exact zero sum (IEEE 754 6.3)
                p = x * y
                out[i] = p + z if p != 0 or z != 0 else (
                    -0.0 if np.signbit(p) and np.signbit(z) else 0.0)
                continue
            out[i] = _round_odd(q) if dt == np.float32 else float(q)
    return out.astype(dt)


def _math2_ref(f, a, b, c, dt):
    """math2_ref: f64 in long double, f32 in double; the exact ones in
    dt."""
    wide = np.longdouble if dt == np.float64 else np.float64
    A, B = a.astype(wide), b.astype(wide)
    with np.errstate(all="ignore"):
        if f == 0:
            return np.power(A, B)
        if f == 1:
            return np.arctan2(A, B)
        if f == 2:
            return np.hypot(A, B)
        if f == 3:
            return np.fmin(a, b)
        if f == 4:
            return np.fmax(a, b)
        if f == 5:
            return np.copysign(a, b)
        if f == 6:
            return _fma_ref(a.astype(np.float64), b.astype(np.float64),
                            c.astype(np.float64), dt)
        if f == 7:
            return np.where(a < b, a, b)
        if f == 8:
            return np.where(a > b, a, b)
        if f == 9:
            m = np.where(a > -b, a, -b)
            return np.where(m < b, m, b)
        return np.fabs(a)


def ulps(got, want, dt):
    """ulps_f32 / ulps_f64 of common.h, elementwise: |got - want| in units
    of the last place of want rounded to dt (want beyond dt's range is its
    overflow, inf); both NaN 0, infinities 0 when equal."""
    with np.errstate(all="ignore"):
        w = want.astype(dt)
        aw = np.abs(w)
        ulp = (np.nextafter(aw, dt(np.inf)) - aw).astype(want.dtype)
        ulp[(ulp == 0) | ~np.isfinite(ulp)] = np.nextafter(dt(0), dt(1))
        e = np.abs(got.astype(want.dtype) - want) / ulp
        inf = np.isinf(w) | np.isinf(got)
        e = np.where(inf, np.where(got == w, 0.0, np.inf), e).astype(
            np.float64)
    e[np.isnan(got) & np.isnan(w)] = 0
    e[np.isnan(e)] = np.inf
    return e


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_math2(device, dt):
    """pow, atan2, hypot within 4 ulp of the wider reference; fmin, fmax,
    copysign, fma (one rounding), min, max, clamp, abs bit for bit; random
    inputs of each function's domain and the grid of special pairs."""
    p = conformance("math.xpk")
    rng = np.random.default_rng(25)
    NR = 4099
    sp = np.array(PAIR_SPECIALS)
    grid_a, grid_b = np.repeat(sp, sp.size), np.tile(sp, sp.size)
    bad = []
    for f, (name, bound) in enumerate(MATH2):
        a, b, c = _math2_gen(f, dt == np.float64, rng, NR)
        if f <= 6:  # min, max, clamp: no NaN, no zeros (their sign is free)
            a = np.concatenate([a, grid_a])
            b = np.concatenate([b, grid_b])
            c = np.concatenate([c, np.ones(grid_a.size)])
        a, b, c = a.astype(dt), b.astype(dt), c.astype(dt)
        y = on(device, np.zeros_like(a))
        p.math2(a.size, np.int32(f), on(device, a), on(device, b),
                on(device, c), y)
        got = back(y)
        want = _math2_ref(f, a, b, c, dt)
        if bound < 0:
            w = want.astype(dt)
            e = np.where((got.view(np.dtype("u%d" % got.itemsize)) ==
                          w.view(np.dtype("u%d" % w.itemsize))) |
                         (np.isnan(got) & np.isnan(w)), 0.0, np.inf)
            if f in (3, 4):  # fmin, fmax of zeros of both signs: either
                e[(a == 0) & (b == 0) & (got == 0)] = 0
            lim = 0
        else:
            e = ulps(got, want, dt)
            lim = bound
        if not (e <= lim).all():
            i = int(np.argmax(e))
            bad.append("%s: %d of %d beyond %s ulp, worst %.3g at (%r, %r%s)"
                       " = %r, want %r" % (
                           name, int((~(e <= lim)).sum()), a.size, lim,
                           e[i], a[i], b[i], ", %r" % c[i] if f == 6 else "",
                           got[i], want[i]))
    assert not bad, "math2 %s: %s" % (np.dtype(dt).name, "; ".join(bad))


# ---- ids.xpk: count_hits --------------------------------------------------------


@pytest.mark.parametrize("grid,hint", [
    (65537, 64), (65537, None), (100003, 1024), ((1000, 37), (16, 16)),
    ((1, 4099), None), ((17, 33, 65), (4, 4, 4)), ((65, 1, 33), None),
    ((2, 3, 4099), (1, 1, 256))])
def test_ids_count_hits(device, grid, hint):
    """Every work-item of a ragged range (with and without a local-size
    hint) runs exactly once: hits[global_linear_id()] += 1."""
    p = conformance("ids.xpk")
    total = int(np.prod(grid))
    hits = on(device, np.zeros(total + 16, np.uint32))
    p.count_hits(grid, hits, local=hint)
    got = back(hits)
    want = np.concatenate([np.ones(total, np.uint32),
                           np.zeros(16, np.uint32)])
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, "count_hits %r hint %r: hits[%d] = %d (%d wrong)" % (
        grid, hint, bad[0], got[bad[0]], bad.size)


# ---- control.xpk: rotate_group --------------------------------------------------


def _suggest_local(spec, n):
    """The work-group size the runtime picks for a 1-D nd-range of n
    (xpj_kernel_suggest_local: what a launch without a local size uses)."""
    from xpjit import _lib
    g = (ctypes.c_uint64 * 3)(n, 1, 1)
    loc = (ctypes.c_uint64 * 3)(0, 0, 0)
    assert _lib.kernel_suggest_local(spec.h, 1, g, loc) == 0
    return loc[0]


def _rotate_ref(x, G, loc, iters, back_, flip):
    """rotate_group's reference, one group at a time (integers)."""
    n = x.size
    xs = np.zeros(G, np.int64)
    xs[:n] = x.astype(np.int64)
    t = xs.reshape(G // loc, loc)
    for _ in range(iters):
        t = np.roll(t, -1, axis=1) + 1  # t[l] = t[(l + 1) % L] + 1
    for _ in range(back_):
        t = np.roll(t, 1, axis=1)       # t[l] = t[(l + L - 1) % L]
    if flip:
        t = t[:, ::-1]
    t = t.copy()
    t[1::2] = np.roll(t[1::2], -2, axis=1) * 2  # odd groups
    return t.reshape(-1)[:n]


@pytest.mark.parametrize("isf,n,L,iters,back_,flip", [
    (0, 1000, 64, 3, 2, 1), (0, 1000, 64, 0, 0, 0), (1, 1000, 64, 5, 1, 0),
    (0, 4099, 256, 1, 7, 1), (1, 4099, 1024, 2, 3, 1),
    (0, 4099, None, 2, 2, 0),  # the runtime chooses the local size
    (1, 65537, None, 1, 1, 1), (0, 255, 1, 4, 4, 1),  # one work-item a group
    (1, 7, 7, 6, 9, 0), (0, 1, 3, 2, 1, 1), (1, 1000, 100, 10, 0, 1),
    (0, 3000, 1000, 1, 1, 0)])
def test_control_barriers(device, isf, n, L, iters, back_, flip):
    """Barriers in loops with a uniform trip count, in a while with break,
    under uniform ifs, and work-items past the end returning after the
    last one."""
    p = conformance("control.xpk")
    dt = np.float32 if isf else np.int32
    rng = np.random.default_rng(26)
    x = rng.integers(-1000, 1001, n).astype(dt)  # exact in f32 throughout
    if L is None:
        spec = p.rotate_group.specialize(dtypes={"T": dt}, device=device)
        G, loc = n, _suggest_local(spec, n)
    else:
        G, loc = (n + L - 1) // L * L, L
    assert loc <= 1024 and G % loc == 0
    want = _rotate_ref(x, G, loc, iters, back_, flip)
    y = on(device, np.full(n, 0x7f7f7f7f if not isf else 1e30, dt))
    p.rotate_group[G, L](on(device, x), y, np.int32(iters), np.int32(back_),
                         bool(flip))
    got = back(y)
    bad = np.flatnonzero(got != want.astype(dt))
    assert bad.size == 0, (
        "rotate_group %s n %d local %d iters %d back %d flip %d: y[%d] = %r, "
        "want %r (%d wrong)" % (np.dtype(dt).name, n, loc, iters, back_, flip,
                                bad[0], got[bad[0]], want[bad[0]], bad.size))


# ---- errors.xpk: specialisation and launch validation ---------------------------

SE, IE, NE = (xpjit.SpecializationError, xpjit.InvalidArgumentError,
              xpjit.NotFoundError)


def _expect(exc, frags, fn, what):
    """fn() raises exc (never crashes, never succeeds) with every fragment
    of frags in its message."""
    with pytest.raises(exc) as ei:
        fn()
    msg = str(ei.value)
    missing = [f for f in frags if f not in msg]
    assert not missing, "%s: message %r lacks %r" % (what, msg, missing)
    if issubclass(exc, xpjit.XpjitError):
        assert ei.value.status == exc.status, (what, ei.value.status_name)
    return ei.value


# (what, dtypes, ndim, exception, fragments): xpj_program_get_kernel's cases
GET_KERNEL = [
    ("unknown dtype", "T=f128", 1, SE, ["f128"]),
    ("unknown type parameter", "U=f32", 1, SE, ["parameter U", "errgen"]),
    ("unknown type parameter (dict)", {"U": "f32"}, 1, SE,
     ["parameter U", "errgen"]),
    ("too many dtypes", "f32,i32", 1, SE, ["errgen", "1 type parameter"]),
    ("too many dtypes (list)", ["f32", "i32"], 1, SE,
     ["errgen", "1 type parameter"]),
    ("no dtypes", "", 1, SE, ["'T'"]),
    ("None dtypes", None, 1, SE, ["'T'"]),
    ("empty type", "T=", 1, SE, []),
    ("a type that is not a dtype", {"T": "complex64"}, 1, SE,
     ["complex64"]),
    ("missing ndim", "T=f32", 0, SE, ["ndim"]),
    ("ndim 9", "T=f32", 9, SE, ["ndim"]),
    ("bound twice", "T=f32,T=i32", 1, SE, ["'T'", "twice"]),
    ("bound twice (mixed)", "f32,T=i32", 1, SE, ["'T'", "twice"]),
    ("malformed dtypes", "T=f32,", 1, SE, ["T=f32,"]),
    ("an empty item", "T=f32,,", 1, SE, ["malformed"]),
    ("an empty name", "=f32", 1, SE, ["malformed"]),
]


@pytest.mark.parametrize("what,dtypes,ndim,exc,frags", [
    c if hasattr(c, "marks") else pytest.param(*c, id=c[0])
    for c in GET_KERNEL])
def test_errors_get_kernel(device, what, dtypes, ndim, exc, frags):
    p = conformance("errors.xpk")
    _expect(exc, frags, lambda: p.errgen.specialize(
        dtypes=dtypes, ndim=ndim, device=device), what)


def test_errors_get_kernel_names(device):
    p = conformance("errors.xpk")
    _expect(NE, ["no_such_kernel"], lambda: p.kernel("no_such_kernel"),
            "unknown kernel")
    _expect(NE, ["ErrK", "errk"], lambda: p.kernel("ErrK"),
            "unknown kernel (case)")
    _expect(AttributeError, ["no_such_kernel"], lambda: p.no_such_kernel,
            "unknown kernel as an attribute")
    _expect(SE, ["errk"], lambda: p.errk.specialize(dtypes="T=f32",
                                                    device=device),
            "dtypes for a kernel without type parameters")
    # inference from the arguments
    _expect(SE, ["errgen", "complex"], lambda: p.errgen(
        3, np.zeros(3, np.complex64)), "an array of a type xpjit lacks")
    _expect(IE, ["errgen", "'vec'", "must be an array"],
            lambda: p.errgen(3, [1.0, 2.0, 3.0]), "a list for an array")
    v32 = on(device, np.zeros(3, np.float32))
    _expect(SE, ["token_swap", "T is f32", "'slot'", "f64"],
            lambda: conformance("atomics.xpk").token_swap(
                3, v32, on(device, np.zeros(1, np.float64))),
            "two arrays binding T differently")
    _expect(SE, ["errgen", "ndim"], lambda: p.errgen(1, np.zeros(
        (1,) * 9, np.float32)), "an array of 9 dimensions for [*]")
    _expect(SE, ["errgen", "N"], lambda: p.errgen(3, v32, consts={"N": 1}),
            "an unknown const parameter")
    _expect(IE, ["'vec'", "rank 1", "rank 2"], lambda: p.errgen(
        3, on(device, np.zeros((3, 1), np.float32)), ndim=1),
        "ndim= against the array's")
    _expect(IE, ["'vec'", "f64", "given an array of f32"],
            lambda: p.errgen(3, v32, dtypes={"T": "f64"}),
            "dtypes= against the array's")
    # and the good ones still come: one kernel for "T=f32" and "f32"
    k1 = p.errgen.specialize(dtypes="T=f32", ndim=2, device=device)
    k2 = p.errgen.specialize(dtypes="f32", ndim=2, device=device)
    k3 = p.errgen.specialize(dtypes={"T": np.float32}, ndim=2, device=device)
    assert k1 is k2 is k3
    assert k1.signature == "errgen(vec: global f32[,])", k1.signature
    v = on(device, np.zeros((3, 4), np.float32))
    p.errgen(12, v)
    np.testing.assert_array_equal(back(v), np.ones((3, 4), np.float32))


N_ERR = 1000


class _Env:
    """The arrays of the launch-validation tests on one device: src, dst
    (-1), a 2-D grid, ids_nd2's out, views of them with their attributes
    changed (a view outside its allocation)."""

    def __init__(self, device):
        self.dev = device
        self.p = conformance("errors.xpk")
        self.ids = conformance("ids.xpk")
        rng = np.random.default_rng(27)
        self.src_np = rng.uniform(-10, 10, N_ERR).astype(np.float32)
        self.dst_np = np.full(N_ERR, -1, np.float32)
        # xpjit arrays on every device: views of them can be bent
        self.S = xpjit.asarray(self.src_np, device=device)
        self.D = xpjit.asarray(self.dst_np, device=device)
        self.G = xpjit.zeros((10, 100), np.float32, device=device)
        self.I = xpjit.zeros((1, 21), np.int64, device=device)
        self.mx = device.max_work_group_size
        l0 = 1
        while l0 * 2 <= self.mx and l0 * 2 <= \
                device.info["max_work_item_sizes"][0]:
            l0 *= 2
        self.l0, self.l1 = l0, self.mx // l0 + 1

    def errk(self, *a, **kw):
        return self.p.errk(*a, **kw)

    def good(self, grid=N_ERR):
        return self.errk(grid, 2.0, self.S, self.D)

    @staticmethod
    def bent(a, **attrs):
        """A view of a with its attributes set (ptr, shape, strides, which
        are read-only, through their private fields: what a broken binding
        could hand the library, whose checks these cases are about)."""
        v = a[...]
        for k, val in attrs.items():
            setattr(v, "_" + k, val)
        return v


def _e(what, fn, exc, frags, only=None):
    return pytest.param(what, fn, exc, frags, only, id=what)


N = N_ERR
LAUNCH_ERRORS = [
    # argument count (Python counts them first)
    _e("2 args", lambda e: e.errk(N, 2.0, e.S), IE,
       ["errk", "takes 3 arguments", "given 2"]),
    _e("4 args", lambda e: e.errk(N, 2.0, e.S, e.D, 1.0), IE,
       ["takes 3 arguments", "given 4"]),
    _e("0 args", lambda e: e.errk(N), IE, ["takes 3 arguments", "given 0"]),
    # kind
    _e("scalar for an array", lambda e: e.errk(N, 2.0, 1.0, e.D), IE,
       ["'src'", "must be an array"]),
    _e("array for a scalar", lambda e: e.errk(N, e.S, e.S, e.D), IE,
       ["'alpha'", "is f32, given"]),
    _e("local memory for an array",
       lambda e: e.errk(N, 2.0, e.S, xpjit.LocalMemory(4)), IE,
       ["'dst'", "must be an array"]),
    # scalar types Python does not convert to f32
    _e("bool for f32", lambda e: e.errk(N, True, e.S, e.D), IE,
       ["'alpha'", "is f32, given"]),
    _e("numpy bool for f32", lambda e: e.errk(N, np.bool_(1), e.S, e.D), IE,
       ["'alpha'", "is f32"]),
    _e("complex for f32", lambda e: e.errk(N, np.complex64(1), e.S, e.D), IE,
       ["'alpha'", "is f32, given", "complex64"]),
    _e("str for f32", lambda e: e.errk(N, "2", e.S, e.D), IE,
       ["'alpha'", "is f32, given"]),
    _e("None for f32", lambda e: e.errk(N, None, e.S, e.D), IE,
       ["'alpha'", "is f32, given"]),
    _e("int beyond f32", lambda e: e.errk(N, 2 ** 1024, e.S, e.D), IE,
       ["'alpha'", "out of the range"]),
    # array dtype and rank (the runtime's messages)
    _e("array dtype f64",
       lambda e: e.errk(N, 2.0, on(e.dev, e.src_np.astype(np.float64)), e.D),
       IE, ["'src'", "given an array of f64"]),
    _e("array dtype i32",
       lambda e: e.errk(N, 2.0, on(e.dev, e.src_np.astype(np.int32)), e.D),
       IE, ["'src'", "i32"]),
    _e("rank 2 for rank 1",
       lambda e: e.errk(N, 2.0, e.S.reshape(10, 100), e.D), IE,
       ["'src'", "rank"]),
    _e("rank 0", lambda e: e.errk(N, 2.0, xpjit.zeros((), np.float32,
                                                      device=e.dev), e.D),
       IE, ["'src'", "rank"]),
    _e("rank 1 for rank 2", lambda e: e.p.err2d((10, 10), e.D), IE,
       ["'grid'", "rank"]),
    # a view outside its allocation
    _e("shape too big", lambda e: e.errk(N, 2.0, e.S, e.bent(
        e.D, shape=(N + 1,))), IE, ["'dst'", "allocation"]),
    _e("stride too big", lambda e: e.errk(N, 2.0, e.S, e.bent(
        e.D, strides=(8,))), IE, ["'dst'", "allocation"]),
    _e("negative stride before the start", lambda e: e.errk(
        N, 2.0, e.S, e.bent(e.D, strides=(-4,))), IE, ["'dst'", "allocation"]),
    _e("negative stride, one short", lambda e: e.errk(N, 2.0, e.S, e.bent(
        e.D, strides=(-4,), ptr=e.D.ptr + 4 * (N - 2))), IE,
       ["'dst'", "allocation"]),
    _e("2-D view outside", lambda e: e.p.err2d((10, 100), e.bent(
        e.G, strides=(400, 40))), IE, ["'grid'", "allocation"]),
    _e("negative shape", lambda e: e.errk(N, 2.0, e.bent(
        e.S[:10], shape=(-5,)), e.D), IE, ["'src'"]),
    _e("huge shape", lambda e: e.errk(N, 2.0, e.bent(
        e.S[:10], shape=(2 ** 63 - 1,)), e.D), IE, ["'src'"]),
    _e("huge stride", lambda e: e.errk(N, 2.0, e.bent(
        e.S[:3], strides=(4 * (2 ** 63 - 1),)), e.D), IE, ["'src'"]),
    _e("stride not a whole element", lambda e: e.errk(N, 2.0, e.bent(
        e.S[:10], strides=(6,)), e.D), IE, ["'src'", "multiple"]),
    # misaligned data
    _e("misaligned data", lambda e: e.errk(N, 2.0, e.S, e.bent(
        e.D, shape=(N - 1,), ptr=e.D.ptr + 1)), IE, ["'dst'", "aligned"]),
    _e("misaligned data by 2", lambda e: e.errk(N, 2.0, e.bent(
        e.S, shape=(N - 1,), ptr=e.S.ptr + 2), e.D), IE,
       ["'src'", "aligned"]),
    _e("misaligned NumPy array", lambda e: e.errk(N - 1, 2.0, e.S[:N - 1], (
        np.zeros(4 * N, np.uint8)[1:1 + 4 * (N - 1)].view(np.float32))), IE,
       ["'dst'", "aligned"], "cpu"),
    # memory the kernel may not touch
    _e("read-only NumPy output", lambda e: e.errk(N, 2.0, e.src_np, (
        np.lib.stride_tricks.as_strided(e.dst_np, writeable=False))), IE,
       ["'dst'", "not writable"], "cpu"),
    _e("NumPy array on another device", lambda e: e.errk(
        N, 2.0, e.src_np, e.D), IE, ["'src'", "not memory of"], "opencl"),
    _e("bent view outside device memory", lambda e: e.errk(1, 2.0, e.bent(
        e.S, shape=(1,), ptr=e.S.ptr - 4), e.D), IE, ["'src'", "not memory"],
       "opencl"),
    _e("closed queue", lambda e: e.errk(N, 2.0, e.S, e.D, queue=(
        lambda q: (q.close(), q)[1])(xpjit.Queue(e.dev))), IE, ["closed"]),
    # geometry (size 0 and the grid's rank: Python checks first)
    _e("global size 0", lambda e: e.errk(0, 2.0, e.S, e.D), IE,
       ["grid size 0"]),
    _e("global size 0 in dim 1", lambda e: e.errk((10, 0), 2.0, e.S, e.D),
       IE, ["grid size 0"]),
    _e("global size 0 in dim 2", lambda e: e.errk((10, 10, 0), 2.0, e.S,
                                                  e.D), IE, ["grid size 0"]),
    _e("global size 2^64 - 1", lambda e: e.errk(2 ** 64 - 1, 2.0, e.S, e.D),
       IE, ["grid size", "out of range"]),
    _e("global size 2^62 + 1", lambda e: e.errk(2 ** 62 + 1, 2.0, e.S, e.D),
       IE, ["global size"]),
    _e("global product 2^63", lambda e: e.errk((2 ** 21,) * 3, 2.0, e.S,
                                               e.D), IE, ["global size"]),
    _e("global product 2^64 (wraps to 0)", lambda e: e.errk(
        (2 ** 32, 2 ** 32), 2.0, e.S, e.D), IE, ["global size"]),
    _e("negative global size", lambda e: e.errk(-3, 2.0, e.S, e.D), IE,
       ["grid size -3"]),
    _e("float global size", lambda e: e.errk(3.0, 2.0, e.S, e.D), IE,
       ["grid size", "int"]),
    _e("negative local size", lambda e: e.p.errnd[64, -1](e.D), IE,
       ["local size -1"]),
    _e("ndim 0", lambda e: e.errk((), 2.0, e.S, e.D), IE,
       ["1 to 3 dimensions"]),
    _e("ndim 4", lambda e: e.errk((10,) * 4, 2.0, e.S, e.D), IE,
       ["1 to 3 dimensions"]),
    _e("local of another rank", lambda e: e.errk(N, 2.0, e.S, e.D,
                                                 local=(10, 10)), IE,
       ["local", "dimensions"]),
    # dimensions against the kernel's declaration
    _e("1-D range for range(2)", lambda e: e.p.err2d(10, e.G), IE,
       ["1-dimensional", "2 dimensions"]),
    _e("3-D range for range(2)", lambda e: e.p.err2d((10, 10, 1), e.G), IE,
       ["3-dimensional", "2 dimensions"]),
    _e("2-D range for ndrange(1)", lambda e: e.p.errnd[(64, 2), (64, 1)](
        e.D), IE, ["2-dimensional", "1 dimension"]),
    # nd-range local sizes
    _e("local does not divide global", lambda e: e.p.errnd[100, 64](e.D),
       IE, ["not a multiple", "64"]),
    _e("local above global", lambda e: e.p.errnd[32, 64](e.D), IE,
       ["not a multiple"]),
    _e("global product 2^63 nd-range", lambda e: e.ids.ids_nd2[
        (2 ** 31, 2 ** 32), (1, 1)](e.I), IE, ["global size"]),
    _e("2-D local does not divide", lambda e: e.ids.ids_nd2[(64, 30), (8, 8)](
        e.I), IE, ["not a multiple", "dimension 1"]),
    _e("local given in dimension 0 only", lambda e: e.ids.ids_nd2[
        (64, 64), (8, 0)](e.I), IE, ["local size is 0"]),
    _e("local given in dimension 1 only", lambda e: e.ids.ids_nd2[
        (64, 64), (0, 8)](e.I), IE, ["local size is 0"]),
    _e("local 0 in dimension 2 of a 3-D range", lambda e: e.errk(
        (8, 8, 8), 2.0, e.S, e.D, local=(2, 2, 0)), IE, ["local size is 0"]),
    _e("local size above the maximum", lambda e: e.p.errnd[
        4 * e.mx, 2 * e.mx](e.D), IE, ["local size"]),
    _e("work-group above the maximum", lambda e: e.ids.ids_nd2[
        (e.l0, e.l1), (e.l0, e.l1)](e.I), IE, ["work-group size"]),
]

# the fragments that depend on the device's limits
_LIMIT_FRAGS = {
    "local size above the maximum": lambda e: [str(2 * e.mx)],
    "work-group above the maximum": lambda e: [str(e.l0 * e.l1)],
}


@pytest.mark.parametrize("what,fn,exc,frags,only", LAUNCH_ERRORS)
def test_errors_launch(device, what, fn, exc, frags, only):
    if only and device.backend != only:
        pytest.skip("a %s device's case" % only)
    e = _Env(device)
    frags = frags + _LIMIT_FRAGS.get(what, lambda e: [])(e)
    _expect(exc, frags, lambda: fn(e), what)
    # nothing ran, no error is pending, the queue still works
    device.queue.wait()
    np.testing.assert_array_equal(e.D.get(), e.dst_np,
                                  err_msg="dst changed by a refused launch")
    e.good()
    np.testing.assert_array_equal(e.D.get(), np.float32(2) * e.src_np)


def test_errors_then_good_launches(device):
    """After every refused launch: nothing ran, and launches with views
    inside their allocation still work (dst reversed, the last element
    alone, the nd-range kernel)."""
    e = _Env(device)
    for case in LAUNCH_ERRORS:
        what, fn, exc, frags, only = case.values
        if only and device.backend != only:
            continue
        with pytest.raises(exc):
            fn(e)
    device.queue.wait()
    np.testing.assert_array_equal(e.D.get(), e.dst_np)
    e.good()
    np.testing.assert_array_equal(e.D.get(), np.float32(2) * e.src_np)
    e.errk(N + 3, np.float32(-0.5), e.S, e.D[::-1])
    want = (np.float32(-0.5) * e.src_np)[::-1]
    np.testing.assert_array_equal(e.D.get(), want)
    e.errk(1, 3.0, e.S, e.D[N - 1:])
    assert e.D.get()[N - 1] == np.float32(3) * e.src_np[0]
    e.p.errnd[1024, 64](e.D)
    np.testing.assert_array_equal(e.D.get(), np.ones(N, np.float32))
    # scalars Python converts: NumPy ints and floats of other widths
    for a in (np.float64(2), np.int32(2), np.uint64(2), 2):
        e.D.set(e.dst_np)
        e.errk(N, a, e.S, e.D)
        np.testing.assert_array_equal(e.D.get(), np.float32(2) * e.src_np)


def test_view_address_is_read_only(device):
    """A view's address cannot be set: on the CPU device any host address
    is taken for memory of the application (NumPy's), so a view moved
    outside its allocation would be launched unchecked."""
    e = _Env(device)
    v = e.S[...]
    with pytest.raises(AttributeError):
        v.ptr = e.S.ptr - 4
    assert v.ptr == e.S.ptr


def test_asarray_0d(device):
    a = xpjit.asarray(np.array(2.5, np.float32), device=device)
    assert a.shape == () and a.get()[()] == np.float32(2.5)
    a.set(np.array(-1.0, np.float32))
    assert a.get()[()] == np.float32(-1.0)


# ---- scalars.xpk: small_types, int_limits, float_limits --------------------------


@pytest.mark.parametrize("n", [1, 7, 255, 4099])
def test_scalars_small_types(device, n):
    """bool, u8 and i16 arrays and scalars, wrapping arithmetic in the
    small types."""
    p = conformance("scalars.xpk")
    rng = np.random.default_rng(28 + n)
    v = rng.integers(0, 2 ** 63, n, dtype=np.uint64)
    mask = (v & np.uint64(1)).astype(bool)
    a = (v >> np.uint64(8)).astype(np.uint8)
    b = (v >> np.uint64(16)).astype(np.uint16).view(np.int16)
    if n > 4:  # edges
        a[0], a[1], b[2], b[3] = 0, 255, -32768, 32767
    md, ad, bd = on(device, mask), on(device, a), on(device, b)
    for flag in (False, True):
        k = np.uint8(rng.integers(0, 256))
        s = np.int16(rng.integers(-32768, 32768))
        if n == 1:
            k, s = np.uint8(255), np.int16(-32768)
        ou8 = on(device, np.full(n, 0x5a, np.uint8))
        oi16 = on(device, np.full(n, 0x5a5a, np.int16))
        ob = on(device, np.zeros(n, bool))
        p.small_types(n + 5, md, ad, bd, flag, k, s, ou8, oi16, ob)
        w8 = np.where(mask, a + k, a - k).astype(np.uint8)
        with np.errstate(over="ignore"):
            w16 = (b * s if flag else b + s).astype(np.int16)
        wb = (mask != flag) ^ (a > k)
        for name, got, want in (("ou8", ou8, w8), ("oi16", oi16, w16),
                                ("ob", ob, wb)):
            np.testing.assert_array_equal(
                back(got), want, err_msg="small_types n %d flag %d k %d s %d:"
                " %s" % (n, flag, k, s, name))


@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int32, np.int64,
                                np.uint8, np.uint16, np.uint32, np.uint64])
def test_limits_int(device, dt):
    """max_value and min_value of every integer type, and a running
    minimum and maximum started from them (in a generic device
    function)."""
    p = conformance("scalars.xpk")
    rng = np.random.default_rng(29)
    x = rng.integers(0, 256, 64 * np.dtype(dt).itemsize).astype(
        np.uint8).view(dt)
    out = on(device, np.frombuffer(b"\x5a" * (8 * np.dtype(dt).itemsize),
                                   dt).copy())
    p.int_limits(1, on(device, x), out)
    got = back(out)
    info = np.iinfo(dt)
    want = {0: info.max, 1: info.min, 6: x.min(), 7: x.max()}
    for i, w in want.items():
        assert int(got[i]) == int(w), "%s limits: out[%d] = %d, want %d " \
            "(0 max, 1 min, 6 running min, 7 running max)" % (
                np.dtype(dt).name, i, int(got[i]), int(w))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_limits_float(device, dt):
    """The six limits of f32 and f64 bit for bit, a running minimum from
    max_value, and their relations in the kernel's arithmetic."""
    p = conformance("scalars.xpk")
    rng = np.random.default_rng(30)
    x = rng.uniform(-1e6, 1e6, 16).astype(np.float32).astype(dt)
    out = on(device, np.full(8, 1234.5, dt))
    p.float_limits(1, on(device, x), out)
    got = back(out)
    fi = np.finfo(dt)
    want = np.array([fi.max, -fi.max, fi.tiny, fi.eps, np.inf], dt)
    names = ["max_value", "min_value", "min_positive", "epsilon", "infinity"]
    u = np.dtype("u%d" % np.dtype(dt).itemsize)
    for i in range(5):
        assert got[i:i + 1].view(u) == want[i:i + 1].view(u), \
            "%s(%s) = %r, want %r" % (names[i], np.dtype(dt).name, got[i],
                                      want[i])
    assert np.isnan(got[5]), "nan(%s) = %r" % (np.dtype(dt).name, got[5])
    assert got[6] == x.min(), "running min from max_value: %r, want %r" % (
        got[6], x.min())
    assert got[7] == 1, "limit relations in the kernel: %r" % got[7]
