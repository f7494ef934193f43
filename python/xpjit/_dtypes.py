"""NumPy dtypes and xpjit's scalar types, both ways."""
import numpy as np

from . import _lib

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
