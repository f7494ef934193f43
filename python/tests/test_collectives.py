"""Work-group and sub-group collectives from Python (tests/conformance/
collectives.xpk, as tests/test_collectives.c runs them): reductions,
inclusive and exclusive scans (add, mul, min, max; and, or, xor on
integers), broadcasts, in 1-D and 2-D groups of several sizes, any / all of
bools, and sub-groups checked against the partition the device reports;
every dtype, on every device here, against NumPy references."""
import numpy as np
import pytest

from conftest import back, conformance, on

DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
          np.uint32, np.uint64, np.float32, np.float64]
INTS = [d for d in DTYPES if np.dtype(d).kind in "iu"]
SIZES_1D = [1, 7, 64, 100, 256]  # work-group sizes, 3 groups each
GROUPS = 3
OPS = {"add": 0, "mul": 1, "min": 2, "max": 3, "and": 4, "or": 5, "xor": 6}
UFUNC = {"add": np.add, "mul": np.multiply, "min": np.minimum,
         "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or,
         "xor": np.bitwise_xor}


def _isfloat(dt):
    return np.dtype(dt).kind == "f"


def gen(dt, op, n, rng):
    """Random inputs for op (test_collectives.c's gen): integers of any
    bits, floats in [-100, 100) ([0.9, 1.1) for products: they stay
    finite), exact in dt."""
    if not _isfloat(dt):
        return rng.integers(0, 2 ** 64, n, dtype=np.uint64).astype(dt)
    return rng.uniform(0.9, 1.1, n).astype(dt) if op == "mul" else \
        rng.uniform(-100, 100, n).astype(dt)


def identity(dt, op):
    if op == "mul":
        return dt(1)
    if op == "min":
        return dt(np.inf) if _isfloat(dt) else np.iinfo(dt).max
    if op == "max":
        return dt(-np.inf) if _isfloat(dt) else np.iinfo(dt).min
    if op == "and":
        return ~dt(0)
    return dt(0)


def check_group(dt, op, x, red, inc, exc, what):
    """x, red, inc, exc: (groups, members) in the groups' linear order;
    the scans and the reduction against sequential ones in dt, floats for
    add and mul within the rounding of any order of n terms: |got - want|
    <= 2 n eps mag (mag: the sum of |x|, or |product|)."""
    with np.errstate(over="ignore"):
        incw = UFUNC[op].accumulate(x, axis=1, dtype=dt)
    excw = np.concatenate([np.full((x.shape[0], 1), identity(dt, op), dt),
                           incw[:, :-1]], axis=1)
    redw = np.repeat(incw[:, -1:], x.shape[1], axis=1)
    j = np.arange(x.shape[1])[None, :]
    if _isfloat(dt) and op in ("add", "mul"):
        eps = np.finfo(dt).eps
        if op == "add":
            run = np.cumsum(np.abs(x.astype(np.float64)), axis=1)
            mag_inc, mag_exc = run, run - np.abs(x.astype(np.float64))
            mag_red = np.repeat(run[:, -1:], x.shape[1], axis=1)
        else:
            mag_inc, mag_exc = np.abs(incw), np.abs(excw)
            mag_red = np.abs(redw)
        cases = [("scan_exclusive", exc, excw, 2.0 * j * eps * mag_exc),
                 ("scan_inclusive", inc, incw, 2.0 * (j + 1) * eps * mag_inc),
                 ("reduce", red, redw, 2.0 * x.shape[1] * eps * mag_red)]
    else:
        cases = [("scan_exclusive", exc, excw, None),
                 ("scan_inclusive", inc, incw, None),
                 ("reduce", red, redw, None)]
    for name, got, want, tol in cases:
        if got is None:
            continue
        if tol is None:
            ok = got == want
        else:
            ok = (got == want) | (np.abs(got.astype(np.float64) -
                                         want.astype(np.float64)) <= tol)
        if not ok.all():
            g, m = np.argwhere(~ok)[0]
            pytest.fail("%s %s %s_%s: group %d member %d: got %r, want %r "
                        "(%d wrong)" % (np.dtype(dt).name, what, name, op, g,
                                        m, got[g, m], want[g, m],
                                        (~ok).sum()))


def _ops(dt):
    ops = ["add", "min", "max", "mul"]
    return ops + (["and", "or", "xor"] if not _isfloat(dt) else [])


@pytest.mark.parametrize("dt,op", [(d, o) for d in DTYPES for o in _ops(d)],
                         ids=lambda v: v if isinstance(v, str)
                         else np.dtype(v).name)
def test_group_1d(device, dt, op):
    """coll (add, min, max, and broadcast), collmul, collbits (from a
    device function) over 1-D groups of 1, 7, 64, 100, 256."""
    p = conformance("collectives.xpk")
    rng = np.random.default_rng(40 + OPS[op])
    for L in SIZES_1D:
        n = L * GROUPS
        x = gen(dt, op, n, rng)
        outs = [on(device, np.zeros(n, dt)) for _ in range(4)]
        xd = on(device, x)
        src = int(rng.integers(0, L))
        if op in ("add", "min", "max"):
            p.coll[n, L](xd, *outs, np.int32(OPS[op]), np.int64(src))
        elif op == "mul":
            p.collmul[n, L](xd, *outs[:3], np.int32(OPS[op]))
        else:
            p.collbits[n, L](xd, *outs[:3], np.int32(OPS[op]))
        red, inc, exc, bc = (back(o).reshape(GROUPS, L) for o in outs)
        xg = x.reshape(GROUPS, L)
        check_group(dt, op, xg, red, inc, exc, "L %d" % L)
        if op in ("add", "min", "max"):
            np.testing.assert_array_equal(
                bc, np.repeat(xg[:, src:src + 1], L, axis=1),
                err_msg="%s L %d group_broadcast from %d" % (
                    np.dtype(dt).name, L, src))


def test_group_any_all(device):
    """group_reduce_or / _and of bools: none, one, all but one, all."""
    p = conformance("collectives.xpk")
    L, G = 64, 4
    j = np.arange(L)
    x = np.concatenate([np.zeros(L, bool), j == 5, j != 9, np.ones(L, bool)])
    any_, all_ = on(device, np.zeros(L * G, bool)), on(device,
                                                       np.zeros(L * G, bool))
    p.anyall[L * G, L](on(device, x), any_, all_)
    g = np.arange(L * G) // L
    np.testing.assert_array_equal(back(any_), g > 0, err_msg="any")
    np.testing.assert_array_equal(back(all_), g == 3, err_msg="all")


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_group_2d(device, dt):
    """2-D groups in row-major local linear order; collectives feeding a
    loop's trip count (ids = (L - 1) * 1000 + L * local_linear_id)."""
    p = conformance("collectives.xpk")
    rng = np.random.default_rng(50)
    gr, gc = 2, 3
    for lr, lc in [(4, 8), (3, 5), (16, 16), (1, 9)]:
        R, C, L = lr * gr, lc * gc, lr * lc
        x = gen(dt, "add", R * C, rng).reshape(R, C)
        src = int(rng.integers(0, L))
        red, inc, bc = (on(device, np.zeros((R, C), dt)) for _ in range(3))
        ids = on(device, np.zeros((R, C), np.int64))
        p.coll2d[(R, C), (lr, lc)](on(device, x), red, inc, bc, ids,
                                   np.int64(src))

        def groups(a):  # (groups, members) in row-major member order
            return a.reshape(gr, lr, gc, lc).transpose(0, 2, 1, 3).reshape(
                gr * gc, L)
        xg = groups(x)
        what = "coll2d %dx%d" % (lr, lc)
        check_group(dt, "add", xg, groups(back(red)), groups(back(inc)),
                    None, what)
        np.testing.assert_array_equal(
            groups(back(bc)), np.repeat(xg[:, src:src + 1], L, axis=1),
            err_msg="%s %s broadcast from %d" % (np.dtype(dt).name, what,
                                                 src))
        want = np.broadcast_to((L - 1) * 1000 + L * np.arange(L),
                               (gr * gc, L))
        np.testing.assert_array_equal(groups(back(ids)), want,
                                      err_msg="%s %s ids" % (
                                          np.dtype(dt).name, what))


def sub_groups(info, g, L):
    """The sub-groups of group g as info (n, 4: size, id, lane, count)
    reports them, each a list of indices in lane order; checks that they
    are a partition of the group."""
    rows = info[g * L:(g + 1) * L]
    num = int(rows[0, 3])
    assert 1 <= num <= L, "L %d: num_sub_groups %d" % (L, num)
    assert (rows[:, 3] == num).all(), "L %d: num_sub_groups differ: %s" % (
        L, np.unique(rows[:, 3]))
    out, covered = [], 0
    for sg in range(num):
        idx = np.flatnonzero(rows[:, 1] == sg)
        assert idx.size, "L %d: sub-group %d is empty" % (L, sg)
        size = rows[idx[0], 0]
        lanes = rows[idx, 2]
        assert (rows[idx, 0] == size).all() and size == idx.size, \
            "L %d: sub-group %d has %d work-items, reports sizes %s" % (
                L, sg, idx.size, np.unique(rows[idx, 0]))
        assert sorted(lanes) == list(range(size)), \
            "L %d: sub-group %d lanes %s" % (L, sg, sorted(lanes))
        out.append(g * L + idx[np.argsort(lanes)])
        covered += idx.size
    assert covered == L, "L %d: the sub-groups hold %d of %d work-items" % (
        L, covered, L)
    return out


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_sub_groups(device, dt):
    """Sub-group size, ids, reduction, scans, shuffles and broadcast,
    against the partition the device reports."""
    p = conformance("collectives.xpk")
    rng = np.random.default_rng(60)
    for L in [1, 7, 64, 100]:
        G = 2
        n = L * G
        x = gen(dt, "add", n, rng)
        info = on(device, np.full((n, 4), -1, np.int64))
        outs = [on(device, np.zeros(n, dt)) for _ in range(6)]
        p.subgroups[n, L](on(device, x), info, *outs)
        red, inc, exc, shf, shx, bc = (back(o) for o in outs)
        inf = back(info)
        for g in range(G):
            for sg, mem in enumerate(sub_groups(inf, g, L)):
                what = "L %d group %d sub-group %d" % (L, g, sg)
                xs = x[mem][None, :]
                check_group(dt, "add", xs, red[mem][None, :], None,
                            exc[mem][None, :], what + " (sum)")
                check_group(dt, "max", xs, None, inc[mem][None, :], None,
                            what + " (max)")
                np.testing.assert_array_equal(
                    shf[mem], x[mem][::-1], err_msg=what + " shuffle")
                np.testing.assert_array_equal(
                    bc[mem], np.full(mem.size, x[mem[0]], dt),
                    err_msg=what + " broadcast")
                m = mem.size - mem.size % 2  # lanes whose lane ^ 1 exists
                np.testing.assert_array_equal(
                    shx[mem[:m]], x[mem[:m].reshape(-1, 2)[:, ::-1]
                                    .reshape(-1)],
                    err_msg=what + " shuffle_xor")
