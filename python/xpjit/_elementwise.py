"""CuPy-style ElementwiseKernel and ReductionKernel: parameters declared as
"T x, float32 y, raw T z", the operation written in xpjit's kernel
language, kernel-language source generated for each pattern of scalar and
array arguments, then compiled, specialised and cached like any kernel.

The generated source of a call is kernel.source(*args) (for reading what
runs, and for error messages)."""
import math
import operator
import re
import threading

import numpy as np

from ._array import (ndarray, asarray, empty,
                     from_sycl_usm_array_interface, _has_suai)
from ._dtypes import numpy_dtype, scalar_name, scalar_value, short
from ._errors import InvalidArgumentError, SpecializationError
from ._program import Program, _check_queue
from ._runtime import get_device, _relock

# CuPy's type names and NumPy's, to xpjit's
_TYPE_NAMES = {
    "bool": "bool", "int8": "i8", "int16": "i16", "int32": "i32",
    "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
    "uint64": "u64", "float16": "f16", "float32": "f32", "float64": "f64",
    "float": "f32", "double": "f64", "int": "i32", "long": "i64",
    "half": "f16",
}
_TYPE_NAMES.update({v: v for v in list(_TYPE_NAMES.values())})
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# the kernel language's keywords and type names: no parameter or kernel
# may be called so
_RESERVED = {"kernel", "fn", "const", "let", "local", "global", "range",
             "ndrange", "if", "else", "for", "while", "break", "continue",
             "return", "true", "false", "bool", "i8", "i16", "i32", "i64",
             "u8", "u16", "u32", "u64", "f16", "f32", "f64", "bf16"}


class _P:
    """One declared parameter: name, type (an xpjit scalar or a
    placeholder), raw (indexed by the operation, not elementwise)."""
    __slots__ = ("name", "type", "placeholder", "raw", "out")

    def __repr__(self):
        return "%s%s %s" % ("raw " if self.raw else "", self.type, self.name)


def _parse_params(text, out, reserved=("i",)):
    if not isinstance(text, str):
        raise InvalidArgumentError("parameters are a string such as "
                                   "'T x, float32 y', not %r" % (text,))
    ps = []
    parts = [p.strip() for p in text.split(",")] if text.strip() else []
    for part in parts:
        if not part:
            raise InvalidArgumentError(
                "parameters %r: an empty item (two commas, or one at an "
                "end); write '[raw] TYPE NAME, ...'" % (text,))
        words = part.split()
        raw = words[0] == "raw"
        if raw:
            words = words[1:]
        if len(words) != 2 or not _IDENT.match(words[1]):
            raise InvalidArgumentError(
                "parameter %r: expected '[raw] TYPE NAME'" % part)
        if words[1] in _RESERVED or words[1] in reserved or \
                words[1].startswith("_"):
            raise InvalidArgumentError(
                "parameter %r: %s is reserved (the generated kernel uses %s "
                "and names starting with _; the language's keywords and "
                "type names)" % (part, words[1], ", ".join(reserved)))
        p = _P()
        p.name, p.raw, p.out = words[1], raw, out
        t = words[0]
        if t in _TYPE_NAMES:
            p.type, p.placeholder = _TYPE_NAMES[t], False
        elif _IDENT.match(t) and len(t) <= 8 and t[0].isupper():
            p.type, p.placeholder = t, True
        else:
            raise InvalidArgumentError("parameter %r: unknown type %r"
                                       % (part, t))
        ps.append(p)
    names = [p.name for p in ps]
    if len(set(names)) != len(names):
        raise InvalidArgumentError("parameters %r repeat a name" % text)
    return ps


def _no_type_names(name, params):
    """A parameter named as a type placeholder of the kernel ("T T"): the
    generated kernel would declare both."""
    holders = {p.type for p in params if p.placeholder}
    for p in params:
        if p.name in holders:
            raise InvalidArgumentError(
                "%s: parameter %s has the name of the type placeholder %s "
                "(name it otherwise)" % (name, p, p.name))


def _statements(code):
    """code, stripped, with the ';' CuPy's operations leave out after
    their last statement ("z = x + y"): CuPy's template writes one."""
    code = code.strip()
    return code if not code or code.endswith((";", "}")) else code + ";"


def _text(name, what, v, numbers=False):
    """A piece of kernel-language source given as an argument: a str (an
    int or a float too where numbers: an identity); InvalidArgumentError
    otherwise (None, bytes: an AttributeError or a TypeError of str's
    methods came out of the call, or "None" landed in the source)."""
    if isinstance(v, str) or (numbers and isinstance(v, (int, float)) and
                              not isinstance(v, bool)):
        return v
    raise InvalidArgumentError("%s: %s is a str of kernel-language source, "
                               "not %r" % (name, what, v))


def _identity(name, v):
    """A reduction's identity: kernel-language source (a str), or a number
    (a Python or NumPy bool, int or float), kept as a Python number and
    written for the reduce type at each call (_identity_expr).
    InvalidArgumentError for anything else and for an int no type holds."""
    if isinstance(v, str):
        return v
    if isinstance(v, (np.bool_, np.integer, np.floating)):
        v = v.item()
    if not isinstance(v, (bool, int, float)):
        raise InvalidArgumentError("%s: identity is a str of kernel-language "
                                   "source or a number, not %r" % (name, v))
    if isinstance(v, int) and not isinstance(v, bool) and \
            not -(1 << 63) <= v < 1 << 64:
        try:
            float(v)
        except OverflowError:
            raise InvalidArgumentError(
                "%s: identity %s is beyond the range of every type (i64, "
                "u64, f64)" % (name, short(v))) from None
    return v


_FLOAT_ROUND = {"f16": np.float16, "f32": np.float32, "bf16": np.float32,
                "f64": np.float64}


def _identity_expr(name, v, rtype, ct):
    """The source of identity v as a value of the reduce type rtype (a
    placeholder or a type name), which is ct (a type name) in this call:
    a str as `rtype(v)`; a number checked against ct, as a scalar argument
    of ct is (InvalidArgumentError out of its range), a float's infinities
    and NaN as infinity(T) and nan(T), a finite float rounded to ct first
    (beyond its range: an infinity, as NumPy converts it)."""
    if isinstance(v, str):
        return "%s(%s)" % (rtype, v)
    x = scalar_value(ct, v, "%s: identity (of reduce type %s)", name, ct)
    if ct == "bool":
        return "true" if x else "false"
    if not isinstance(x, float):
        return "%s(%d)" % (rtype, x)
    with np.errstate(over="ignore"):
        x = float(_FLOAT_ROUND[ct](x))
    if math.isnan(x):
        return "nan(%s)" % rtype
    if math.isinf(x):
        return "%sinfinity(%s)" % ("-" if x < 0 else "", rtype)
    return "%s(%r)" % (rtype, x)


def _usm(a, queue):
    """dpctl's arrays (__sycl_usm_array_interface__) as xpjit views of
    their memory, on the queue's device or the one their memory is of."""
    if isinstance(a, (tuple, list)):
        return type(a)(_usm(x, queue) for x in a)
    if isinstance(a, (np.ndarray, np.generic, int, float, bool)) or \
            a is None or not _has_suai(a):
        return a
    return from_sycl_usm_array_interface(
        a, device=queue.device if queue is not None else None)


def _is_scalar(a):
    return isinstance(a, (int, float, bool, np.generic)) or (
        isinstance(a, np.ndarray) and a.ndim == 0)


def _zero_d(a):
    """A 0-d array: an input's value is passed as a scalar, but it makes
    the call's shape () when no argument has more dimensions (NumPy's and
    CuPy's rules)."""
    return isinstance(a, (np.ndarray, ndarray)) and a.ndim == 0


def _dtype_of(a):
    if isinstance(a, (np.ndarray, ndarray, np.generic)):
        try:
            return scalar_name(a.dtype)
        except ValueError as e:
            raise SpecializationError(str(e)) from None
    return None


def _weak(a):
    if isinstance(a, bool):
        return "bool"
    if isinstance(a, int):
        return "i64"
    if isinstance(a, float):
        return "f64"
    return None


class _Base:
    RESERVED = ("i",)

    def __init__(self, in_params, out_params, name, preamble, options):
        self.ins = _parse_params(in_params, False, self.RESERVED)
        self.outs = _parse_params(out_params, True, self.RESERVED)
        if not self.outs:
            raise InvalidArgumentError("%s: no output parameter" % name)
        if not isinstance(name, str) or not _IDENT.match(name) or \
                name in _RESERVED or name.startswith("_"):
            raise InvalidArgumentError(
                "kernel name %r is not an identifier of its own (not a "
                "keyword or type name, not starting with _)" % (name,))
        self.name = name
        self.preamble = _text(name, "preamble", preamble)
        self.options = options
        _no_type_names(name, self.ins + self.outs)
        seen = {}
        for p in self.ins + self.outs:
            if p.name in seen:
                raise InvalidArgumentError("parameter %s is both an input "
                                           "and an output" % p.name)
            seen[p.name] = p
        self.placeholders = sorted({p.type for p in self.ins + self.outs
                                    if p.placeholder})
        self._programs = {}
        self._lock = threading.Lock()
        _relock.add(self)  # (a fork's child makes it anew)

    def _bind(self, params, args):
        """{placeholder: xpjit scalar} from the arrays, then the scalars."""
        bound, weak = {}, {}
        for p, a in zip(params, args):
            if a is None or not p.placeholder:
                continue
            dt = _dtype_of(a)
            if dt is not None and not _is_scalar(a):
                had = bound.get(p.type)
                if had is not None and had != dt:
                    raise SpecializationError(
                        "%s: %s is %s from an earlier argument but %s is an "
                        "array of %s" % (self.name, p.type, had, p.name, dt))
                bound[p.type] = dt
        for p, a in zip(params, args):
            if a is None or not p.placeholder or p.type in bound:
                continue
            dt = _dtype_of(a) or _weak(a)
            if dt is not None:
                weak.setdefault(p.type, dt)
        for k, v in weak.items():
            bound.setdefault(k, v)
        missing = [t for t in self.placeholders if t not in bound]
        if missing:
            raise SpecializationError(
                "%s: cannot infer %s from the arguments (give the outputs, "
                "or arrays of that type)" % (self.name, ", ".join(missing)))
        return bound

    def _generics(self):
        return "<%s>" % ", ".join(self.placeholders) if self.placeholders \
            else ""

    def _program(self, source, device):
        """The program of source in the context of device (a Context of
        one's own: the default context's program was refused there, "the
        device is not of the program's context")."""
        ctx = device.context
        with self._lock:
            p = self._programs.get((source, ctx))
            if p is None:
                p = self._programs[(source, ctx)] = Program(
                    source, name="<%s>" % self.name, options=self.options,
                    context=ctx)
            return p

    def _device(self, args, queue=None):
        # the queue's device where one is given: NumPy inputs go to it and
        # outputs are made there (they stayed on the host, and the launch
        # said "data 0x... is not memory of opencl:0")
        if queue is not None:
            return queue.device
        for a in args:
            if isinstance(a, ndarray):
                return a.device
        return get_device()


def _outs(name, out):
    """out= as a list: None (none given), one array, or a tuple or list of
    them (as NumPy's ufuncs take it; `out or ()` asked a NumPy array for
    its truth value, and one device array of a zero was taken for none)."""
    if out is None:
        return []
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]


def _place(a, dtype, device, numpy_ok):
    """a as an array of dtype that device's kernels can use: NumPy as it
    is when numpy_ok (the CPU device), else an xpjit.ndarray."""
    dt = numpy_dtype(dtype)
    if isinstance(a, ndarray):
        if a.dtype != dt:
            raise InvalidArgumentError("an xpjit.ndarray of %s where %s is "
                                       "wanted (convert it first)"
                                       % (a.dtype, dt))
        return a
    if not isinstance(a, np.ndarray):
        # what np.asarray makes of it must be numbers: None became NaN and
        # "1" the number 1, silently
        kind = np.asarray(a).dtype.kind if not isinstance(
            a, (str, bytes)) else "U"
        if kind not in "biuf":
            raise InvalidArgumentError("an input is an array or a number, "
                                       "not %r" % (a,))
    if numpy_ok:
        return np.asarray(a, dtype=dt)
    return asarray(np.asarray(a, dtype=dt), device=device)


def _place_out(name, p, a, dtype, device, numpy_ok):
    """A given output as it is: an array of exactly its type that the
    device's kernels can use (a converted copy would take the results)."""
    dt = numpy_dtype(dtype)
    if not isinstance(a, (np.ndarray, ndarray)):
        raise InvalidArgumentError("%s: output %s must be an array, not %s"
                                   % (name, p.name, type(a).__name__))
    if a.dtype != dt:
        raise InvalidArgumentError("%s: output %s is an array of %s, the "
                                   "kernel writes %s" % (name, p.name,
                                                         a.dtype, dt))
    if isinstance(a, np.ndarray) and device.backend != "cpu":
        raise InvalidArgumentError("%s: output %s is a NumPy array, the "
                                   "device %s takes xpjit.ndarray" % (
                                       name, p.name, device.id))
    if isinstance(a, np.ndarray) and not a.flags.writeable:
        raise InvalidArgumentError("%s: output %s is not writable"
                                   % (name, p.name))
    return a


def _broadcast(a, shape):
    if isinstance(a, np.ndarray):
        return np.broadcast_to(a, shape)
    if a.shape == shape:
        return a
    # an xpjit.ndarray: NumPy's rules, stride 0 where a dimension is new or
    # of extent 1
    nd = len(shape)
    if a.ndim > nd:
        raise InvalidArgumentError("cannot broadcast %r to %r"
                                   % (a.shape, shape))
    pad = nd - a.ndim
    strides = []
    for d in range(nd):
        if d < pad:
            strides.append(0)
            continue
        n, s = a.shape[d - pad], a.strides[d - pad]
        if n == shape[d]:
            strides.append(s)
        elif n == 1:
            strides.append(0)
        else:
            raise InvalidArgumentError("cannot broadcast %r to %r"
                                       % (a.shape, shape))
    out = ndarray(shape, a.dtype, a.device, strides=strides, _mem=a._mem,
                  _ptr=a.ptr)
    out._host = a._host
    return out


class ElementwiseKernel(_Base):
    """ElementwiseKernel(in_params, out_params, operation,
    name="elementwise_kernel"),
    as CuPy's: in_params "T x, T y" (type placeholders are capitalised
    names; "raw T t" passes a whole array the operation indexes itself),
    out_params "T z"; operation is xpjit kernel-language statements that
    read the inputs' elements and assign the outputs', with `i` the flat
    index of the element (0 .. size-1). Inputs broadcast against each
    other as in NumPy; outputs not given are made (NumPy arrays when every
    array is NumPy and the device is the CPU, else xpjit.ndarray).

        add = xpjit.ElementwiseKernel("T x, T y", "T z", "z = x + y;")
        z = add(np.arange(4.0), 1.0)
    """

    def __init__(self, in_params, out_params, operation,
                 name="elementwise_kernel", preamble="", options=None):
        super().__init__(in_params, out_params, name, preamble, options)
        self.operation = _text(name, "the operation", operation)

    def source(self, *args, **kw):
        return self._prepare(args, kw)[0]

    def _prepare(self, args, kw, queue=None):
        nin, nout = len(self.ins), len(self.outs)
        outs = _outs(self.name, kw.pop("out", None))
        size = kw.pop("size", None)
        if kw:
            raise InvalidArgumentError("%s: unknown keyword %s"
                                       % (self.name, ", ".join(kw)))
        if len(args) == nin + nout:
            if outs:
                raise InvalidArgumentError("%s: outputs given twice (as "
                                           "arguments and out=)" % self.name)
            args, outs = list(args[:nin]), list(args[nin:])
        elif len(args) == nin:
            args = list(args)
            outs = outs or [None] * nout
        else:
            raise InvalidArgumentError(
                "%s takes %d inputs (%s) and optionally %d outputs, given %d "
                "arguments" % (self.name, nin, ", ".join(
                    p.name for p in self.ins), nout, len(args)))
        if len(outs) != nout:
            raise InvalidArgumentError("%s has %d outputs, given %d"
                                       % (self.name, nout, len(outs)))
        params = self.ins + self.outs
        allargs = args + outs
        bound = self._bind(params, allargs)
        device = self._device(allargs, queue)
        numpy_ok = device.backend == "cpu" and not any(
            isinstance(a, ndarray) for a in allargs)
        # the shape: inputs and given outputs broadcast together
        shapes = [np.shape(a) for p, a in zip(params, allargs)
                  if a is not None and not p.raw and
                  (not _is_scalar(a) or (p.out and _zero_d(a)))]
        if not shapes and size is None and any(
                _zero_d(a) for p, a in zip(params, allargs) if not p.raw):
            shapes = [()]
        try:
            shape = np.broadcast_shapes(*shapes) if shapes else ()
        except ValueError:
            raise InvalidArgumentError("%s: shapes %s do not broadcast"
                                       % (self.name, shapes)) from None
        if size is not None and not shapes:
            try:
                shape = (operator.index(size),)
            except TypeError:
                raise InvalidArgumentError("%s: size must be an int"
                                           % self.name) from None
            if shape[0] < 0:
                raise InvalidArgumentError("%s: size %d is negative"
                                           % (self.name, shape[0]))
        elif not shapes:
            raise InvalidArgumentError("%s: no array argument: give size="
                                       % self.name)
        kargs, decl, loads, stores = [], [], [], []
        for p, a in zip(params, allargs):
            t = p.type  # the placeholder itself: the kernel is generic
            ct = bound[p.type] if p.placeholder else p.type
            if p.out and a is None:
                a = (np.empty(shape, numpy_dtype(ct)) if numpy_ok else
                     empty(shape, numpy_dtype(ct), device))
                outs[self.outs.index(p)] = a
            if p.raw:
                a = (_place_out(self.name, p, a, ct, device, numpy_ok)
                     if p.out else _place(a, ct, device, numpy_ok))
                decl.append("%s: global %s%s[*]" % (p.name, "" if p.out else
                                                   "const ", t))
                kargs.append(("raw", a))
            elif _is_scalar(a) and not p.out:
                decl.append("%s: %s" % (p.name, t))
                kargs.append(("scalar", a))
            else:
                if p.out:
                    a = _place_out(self.name, p, a, ct, device, numpy_ok)
                    if tuple(a.shape) != tuple(shape):
                        raise InvalidArgumentError(
                            "%s: output %s has shape %r, the inputs "
                            "broadcast to %r" % (self.name, p.name, a.shape,
                                                 shape))
                else:
                    a = _broadcast(_place(a, ct, device, numpy_ok), shape)
                if a.ndim == 0:  # the call's shape is (): one element
                    a = a.reshape(1)
                arr = "_%s_arr" % p.name
                decl.append("%s: global %s%s[*]" % (arr, "" if p.out else
                                                    "const ", t))
                loads.append("        let %s = %s[i];" % (p.name, arr))
                if p.out:
                    stores.append("        %s[i] = %s;" % (arr, p.name))
                kargs.append(("array", a))
        ranks = {a.ndim for k, a in kargs if k in ("array",)}
        raws = {a.ndim for k, a in kargs if k == "raw"}
        if len(ranks | raws) > 1:
            raise InvalidArgumentError(
                "%s: raw arrays must have the broadcast shape's %d "
                "dimensions (one rank for every [*] array of a kernel)"
                % (self.name, len(shape)))
        decl.append("_n: i64")
        src = "%s\nkernel %s%s(%s) range {\n    let i = global_id(0);\n" \
              "    if i < _n {\n%s\n%s\n%s\n    }\n}\n" % (
                  self.preamble, self.name, self._generics(), ", ".join(decl),
                  "\n".join(loads), "        " + _statements(self.operation),
                  "\n".join(stores))
        return src, kargs, outs, shape, device, bound

    def __call__(self, *args, **kw):
        queue = kw.pop("queue", None)
        _check_queue(queue, self.name)
        args = _usm(args, queue)
        if kw.get("out") is not None:  # dpctl's arrays as outputs too
            kw["out"] = _usm(kw["out"], queue)
        src, kargs, outs, shape, device, bound = self._prepare(args, kw,
                                                               queue)
        prog = self._program(src, (queue or device.queue).device)
        n = int(np.prod(shape, dtype=np.int64))
        if n:
            prog.kernel(self.name)(n, *[a for _, a in kargs], np.int64(n),
                                   queue=queue or device.queue,
                                   dtypes=bound or None)
        return outs[0] if len(outs) == 1 else tuple(outs)


class ReductionKernel(_Base):
    """ReductionKernel(in_params, out_params, map_expr, reduce_expr,
    post_map_expr, identity, name="reduce_kernel", reduce_type=None), as
    CuPy's: map_expr maps the inputs' elements (and `i`, the flat index of
    the element in the reduced axes' order) to a value, reduce_expr
    combines two of them, `a` and `b`, post_map_expr assigns the outputs
    from the result `a`; identity is the starting value. reduce_type: the
    type of a and b (default: the first output's). Called as
    k(*inputs, axis=None, keepdims=False, out=None).

        l2 = xpjit.ReductionKernel("T x", "T y", "x * x", "a + b",
                                   "y = sqrt(a);", "0", "l2norm")
    """

    RESERVED = ("i", "a", "b")  # the accumulator and its operands

    def __init__(self, in_params, out_params, map_expr, reduce_expr,
                 post_map_expr, identity, name="reduce_kernel",
                 reduce_type=None, preamble="", options=None):
        super().__init__(in_params, out_params, name, preamble, options)
        if any(p.raw for p in self.ins + self.outs):
            raise InvalidArgumentError("%s: raw parameters are not taken by "
                                       "reductions" % name)
        self.map_expr = _text(name, "map_expr", map_expr)
        self.reduce_expr = _text(name, "reduce_expr", reduce_expr)
        self.post_map_expr = _text(name, "post_map_expr", post_map_expr)
        self.identity = _identity(name, identity)
        try:
            self.reduce_type = (None if reduce_type is None else
                                _TYPE_NAMES.get(str(reduce_type)) or
                                scalar_name(reduce_type))
        except ValueError as e:  # (a bare ValueError came out)
            raise InvalidArgumentError("%s: reduce_type: %s"
                                       % (name, e)) from None

    def source(self, *args, **kw):
        return self._prepare(args, kw)[0]

    def _prepare(self, args, kw, queue=None):
        axis = kw.pop("axis", None)
        keepdims = kw.pop("keepdims", False)
        out = kw.pop("out", None)
        if kw:
            raise InvalidArgumentError("%s: unknown keyword %s"
                                       % (self.name, ", ".join(kw)))
        if len(args) != len(self.ins):
            raise InvalidArgumentError("%s takes %d inputs (%s), given %d" % (
                self.name, len(self.ins), ", ".join(p.name for p in self.ins),
                len(args)))
        outs = _outs(self.name, out)
        if len(outs) > len(self.outs):
            raise InvalidArgumentError("%s has %d outputs, given %d"
                                       % (self.name, len(self.outs),
                                          len(outs)))
        outs += [None] * (len(self.outs) - len(outs))
        params = self.ins + self.outs
        allargs = list(args) + outs
        bound = self._bind(params, allargs)
        device = self._device(allargs, queue)
        numpy_ok = device.backend == "cpu" and not any(
            isinstance(a, ndarray) for a in allargs)
        shapes = [np.shape(a) for p, a in zip(self.ins, args)
                  if not _is_scalar(a)]
        if not shapes and any(_zero_d(a) for a in args):
            shapes = [()]  # 0-d inputs: their one element reduced
        if not shapes:
            raise InvalidArgumentError("%s: no array input" % self.name)
        try:
            shape = np.broadcast_shapes(*shapes)
        except ValueError:
            raise InvalidArgumentError("%s: shapes %s do not broadcast"
                                       % (self.name, shapes)) from None
        nd = len(shape)
        if axis is None:
            axes = tuple(range(nd))
        elif isinstance(axis, (bool, np.bool_)) or (
                isinstance(axis, (tuple, list)) and
                any(isinstance(a, (bool, np.bool_)) for a in axis)):
            # (True was axis 1; NumPy's TypeError)
            raise TypeError("%s: axis %r is not an int or a tuple of ints"
                            % (self.name, axis))
        else:
            try:
                axes = tuple(operator.index(a) for a in (
                    (axis,) if np.isscalar(axis) else tuple(axis)))
            except TypeError:
                raise InvalidArgumentError("%s: axis %r is not an int or a "
                                           "tuple of ints" % (self.name,
                                                              axis)) from None
            if any(not -nd <= int(a) < nd for a in axes):
                raise InvalidArgumentError("%s: axis %r out of range for %d "
                                           "dimensions" % (self.name, axis,
                                                           nd))
            norm = [int(a) % nd for a in axes]
            if len(set(norm)) != len(norm):
                raise InvalidArgumentError("%s: duplicate value in axis %r"
                                           % (self.name, axis))
            axes = tuple(sorted(norm))
        kept = tuple(d for d in range(nd) if d not in axes)
        order = kept + axes
        out_shape = tuple(shape[d] for d in kept)
        kd_shape = tuple(1 if d in axes else shape[d] for d in range(nd))
        final_shape = kd_shape if keepdims else out_shape
        nout = int(np.prod(out_shape, dtype=np.int64))
        nred = int(np.prod([shape[d] for d in axes], dtype=np.int64))
        rtype = self.reduce_type or self.outs[0].type
        kargs, decl, maps = [], [], []
        for p, a in zip(self.ins, args):
            t = p.type
            ct = bound[p.type] if p.placeholder else p.type
            if _is_scalar(a):
                decl.append("%s: %s" % (p.name, t))
                kargs.append(a)
                continue
            a = _place(a, ct, device, numpy_ok)
            a = _broadcast(a, shape)
            # the kept axes first, the reduced ones last: element (o, r) is
            # flat index o * nred + r of this view
            a = a.transpose(order)
            arr = "_%s_arr" % p.name
            decl.append("%s: global const %s[*]" % (arr, t))
            maps.append("let %s = %s[_o * _nred + _r];" % (p.name, arr))
            kargs.append(a)
        stores = []
        for p, o in zip(self.outs, outs):
            t = p.type
            ct = bound[p.type] if p.placeholder else p.type
            if o is None:
                o = (np.empty(out_shape, numpy_dtype(ct)) if numpy_ok else
                     empty(out_shape, numpy_dtype(ct), device))
                outs[self.outs.index(p)] = o
            else:
                o = _place_out(self.name, p, o, ct, device, numpy_ok)
                if tuple(o.shape) not in (out_shape, kd_shape):
                    raise InvalidArgumentError(
                        "%s: output %s has shape %r, not %r" % (
                            self.name, p.name, o.shape, final_shape))
            view = o
            if view.ndim != len(out_shape):  # keepdims-shaped out
                view = view[tuple(0 if d in axes else slice(None)
                                  for d in range(nd))]
            arr = "_%s_arr" % p.name
            decl.append("%s: global %s[*]" % (arr, t))
            stores.append("let %s: %s = %s(0);" % (p.name, t, t))
            kargs.append(view)
        post = ["            %s" % _cupy_sizes(_statements(self.post_map_expr))]
        post += ["            _%s_arr[_o] = %s;" % (p.name, p.name)
                 for p in self.outs]
        nout_rank = len(out_shape)
        in_rank = len(shape)
        if nout_rank != in_rank and nout_rank:
            # outputs and inputs share the [*] rank of one kernel: give the
            # outputs the inputs' rank with extent-1 axes at the end
            kargs = [_expand(a, in_rank) if i >= len(self.ins) else a
                     for i, a in enumerate(kargs)]
        elif nout_rank == 0:
            # (every input 0-d: its xpjit.ndarrays, not passed as values,
            # are made 1-d with the outputs)
            kargs = [_expand(a, max(in_rank, 1))
                     if i >= len(self.ins) or (in_rank == 0 and isinstance(
                         a, ndarray)) else a
                     for i, a in enumerate(kargs)]
        cap = min(256, device.max_work_group_size or 1)
        local = 1
        while local < nred and local * 2 <= cap:
            local *= 2
        src = """%s
fn _xpj_reduce<_R>(a: _R, b: _R) -> _R {
    return _R(%s);
}
kernel %s%s(%s, _nred: i64) ndrange(1) {
    local _acc: %s[256];
    let _o = group_id(0);
    let _lid = local_id(0);
    let _ls = local_size(0);
    let _in_size = _nred;
    let _out_size = num_groups(0);
    let a: %s = %s;
    for (let _r = _lid; _r < _nred; _r += _ls) {
        let i = _o * _nred + _r;
        %s
        let b: %s = %s(%s);
        a = _xpj_reduce(a, b);
    }
    _acc[_lid] = a;
    barrier(local);
    for (let _s = _ls / 2; _s > 0; _s >>= 1) {
        if _lid < _s {
            _acc[_lid] = _xpj_reduce(_acc[_lid], _acc[_lid + _s]);
        }
        barrier(local);
    }
    if _lid == 0 {
        a = _acc[0];
        %s
%s
    }
}
""" % (self.preamble, self.reduce_expr.strip(), self.name,
            self._generics(), ", ".join(decl), rtype,
            rtype, _identity_expr(self.name, self.identity, rtype,
                                  bound.get(rtype, rtype)),
            "\n        ".join(maps), rtype,
            rtype, _cupy_sizes(self.map_expr.strip()),
            "\n        ".join(stores),
            "\n".join(post))
        return (src, kargs, outs, (nout, nred, local, final_shape), device,
                bound)

    def __call__(self, *args, **kw):
        queue = kw.pop("queue", None)
        _check_queue(queue, self.name)
        args = _usm(args, queue)
        if kw.get("out") is not None:
            kw["out"] = _usm(kw["out"], queue)
        src, kargs, outs, (nout, nred, local, final_shape), device, bound = \
            self._prepare(args, kw, queue)
        prog = self._program(src, (queue or device.queue).device)
        if nout:
            prog.kernel(self.name)[nout * local, local](
                *kargs, np.int64(nred), queue=queue or device.queue,
                dtypes=bound or None)
        res = [o.reshape(final_shape) if tuple(o.shape) != final_shape
               else o for o in outs]
        return res[0] if len(res) == 1 else tuple(res)


def _cupy_sizes(expr):
    """CuPy's _in_ind.size() and _out_ind.size(): the elements reduced
    into each output, and the outputs (i64)."""
    return expr.replace("_in_ind.size()", "_in_size").replace(
        "_out_ind.size()", "_out_size")


def _expand(a, rank):
    """a with extent-1 axes appended up to rank (a view)."""
    extra = rank - a.ndim
    if extra <= 0:
        return a
    if isinstance(a, np.ndarray):
        return a.reshape(a.shape + (1,) * extra) if a.flags.c_contiguous \
            else a[(Ellipsis,) + (None,) * extra]
    return a[(Ellipsis,) + (None,) * extra]
