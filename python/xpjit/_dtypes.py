"""NumPy dtypes and xpjit's scalar types, both ways."""
import numpy as np

from . import _lib
from ._errors import InvalidArgumentError

# xpjit scalar name -> numpy dtype (bf16 has none in NumPy: its arrays are
# uint16 bit patterns, given with dtypes={"T": "bf16"})
TO_NUMPY = {
    "bool": np.dtype(np.bool_), "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16), "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64), "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16), "u32": np.dtype(np.uint32),
    "u64": np.dtype(np.uint64), "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64), "f16": np.dtype(np.float16),
    "bf16": np.dtype(np.uint16),
}
FROM_NUMPY = {v: k for k, v in TO_NUMPY.items() if k != "bf16"}
# plain "int", "float" resolved as NumPy does on this platform
FROM_NUMPY.setdefault(np.dtype(np.int_), "i64")


def scalar_name(dt):
    """The xpjit scalar name of a NumPy dtype, a type name ("f32",
    "float32", np.float32) or an xpjit name; ValueError for anything else."""
    if isinstance(dt, str) and dt in TO_NUMPY:
        return dt
    try:
        d = np.dtype(dt)
    except TypeError:
        raise ValueError("%r is not a dtype" % (dt,)) from None
    name = FROM_NUMPY.get(d.newbyteorder("=") if d.byteorder == ">" else d)
    if name is None or not d.isnative:
        raise ValueError("xpjit has no element type for dtype %s%s"
                         % (d, " (non-native byte order)"
                            if not d.isnative else ""))
    return name


def scalar_code(name):
    return _lib.SCALAR[name]


def numpy_dtype(name):
    return TO_NUMPY[name]


INT_RANGE = {n: (int(np.iinfo(TO_NUMPY[n]).min),
                 int(np.iinfo(TO_NUMPY[n]).max))
             for n in ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")}


def scalar_value(name, a, what, *what_args):
    """a (a Python or NumPy scalar, or a 0-d NumPy array) as a value of the
    xpjit scalar type name: an int (bool: 0 or 1) or a float, as kernels'
    scalar arguments take it (docs/python.md); InvalidArgumentError, its
    message starting with what % what_args (made only then), where the
    type cannot take it."""
    if isinstance(a, np.ndarray) and a.ndim == 0:
        a = a[()]
    if isinstance(a, np.generic):
        src = a.dtype
        # bf16's NumPy stand-in is its bit pattern (uint16): as a value it
        # is a float, which takes NumPy's floats and integers
        tgt = np.dtype(np.float32) if name == "bf16" else numpy_dtype(name)
        if not np.can_cast(src, tgt, "same_kind") and not (
                src.kind in "iub" and name != "bool"):
            raise _refused(what, what_args, " is %s, given a %s", name, src)
        a = a.item()
    if name == "bool":
        if not isinstance(a, int):  # (bool is an int)
            raise _refused(what, what_args, " is bool, given %r", a)
        if a not in (0, 1):
            raise _refused(what, what_args, ": %s is out of the range of "
                           "bool", a)
        return int(a)
    if name in INT_RANGE:
        if isinstance(a, float) or not isinstance(a, int):
            raise _refused(what, what_args, " is %s, given %r", name, a)
        lo, hi = INT_RANGE[name]
        if not lo <= a <= hi:
            raise _refused(what, what_args, ": %s is out of the range of %s",
                           a, name)
        return int(a)
    if isinstance(a, bool) or not isinstance(a, (int, float)):
        raise _refused(what, what_args, " is %s, given %r", name, a)
    try:
        return float(a)
    except OverflowError:
        raise _refused(what, what_args, ": %s is out of the range of %s", a,
                       name) from None


def _refused(what, what_args, why, *why_args):
    return InvalidArgumentError(what % what_args + why % tuple(
        short(a) if isinstance(a, int) and not isinstance(a, bool) else a
        for a in why_args))


def short(v):
    """An int for a message: its digits, or for a long one (2**1024 has
    309) its first and last ones and how many there are."""
    t = str(v)
    return t if len(t) <= 40 else "%s...%s (%d digits)" % (
        t[:12], t[-6:], len(t.lstrip("-")))
