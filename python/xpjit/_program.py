"""Programs and kernels: kernel-language source parsed once, kernels
specialised on their first call from the arguments' dtypes and ndim (as
CuPy's RawKernel is compiled on first use, but generic), launched over a
range or an nd-range."""
import ctypes
import operator
import os
import threading

import numpy as np

from . import _lib
from ._array import (ndarray, from_cuda_array_interface, from_dlpack,
                     from_sycl_usm_array_interface, _has_suai, _Allocation,
                     _Foreign, _Import)
from ._dtypes import scalar_name, scalar_value
from ._errors import (InvalidArgumentError, NotFoundError,
                      SpecializationError, check, error)
from ._runtime import (Device, Event, Queue, current_queue, get_context,
                       get_device, _b, _Guard, _Owner, _path, _retire, _wait,
                       _wake_fd, _live_guarded, _relock)

from ._accel import _fast  # the C launch path, when it was built

if _fast is not None:
    _fast.init(_lib.address(_lib.launch), _lib.address(_lib.queue_wait),
               _lib.address(_lib.event_wait), _lib.address(_lib.queue_cancel),
               _lib.address(_lib.arg_scalar), ndarray, np.ndarray, np.generic,
               threading.main_thread().ident)

    def _raise_status(st):
        raise error(st)
    _fast.set_calls(current_queue, _raise_status, _wake_fd)
    _fast.set_scalar_types({
        np.dtype(d).type: _lib.SCALAR[n]
        for n, d in (("bool", np.bool_), ("i8", np.int8), ("i16", np.int16),
                     ("i32", np.int32), ("i64", np.int64), ("u8", np.uint8),
                     ("u16", np.uint16), ("u32", np.uint32),
                     ("u64", np.uint64), ("f16", np.float16),
                     ("f32", np.float32), ("f64", np.float64))})
    _KernelBase = _fast.KernelBase  # calls of known arguments, in C
else:
    _KernelBase = object


_NUMBER_OPTIONS = ("opt_level", "timeout_ms", "memory_limit_mb")


def _compile_opts(options):
    if not options:
        return None
    o = _lib.CompileOpts()
    _lib.compile_opts_default(ctypes.byref(o))
    known = {"opt_level", "fast_math", "debug_info", "isolation",
             "timeout_ms", "memory_limit_mb", "checks", "fp_contract"}
    for k, v in options.items():
        if k not in known:
            raise InvalidArgumentError("unknown compile option %r (known: %s)"
                                       % (k, ", ".join(sorted(known))))
        if k in _NUMBER_OPTIONS:
            try:
                n = -1 if isinstance(v, bool) else operator.index(v)
            except TypeError:
                n = -1
            if not 0 <= n < 1 << 32:
                raise InvalidArgumentError("compile option %s is an int of 0 "
                                           "to 2**32 - 1, not %r" % (k, v))
        elif isinstance(v, (bool, int, np.bool_, np.integer)):
            n = 1 if v else 0
        else:
            raise InvalidArgumentError("compile option %s is a bool, not %r"
                                       % (k, v))
        if k == "isolation":
            o.isolation = 0 if v else 1
        elif k == "checks":
            o.checks = 1 if v else 0
        else:
            setattr(o, k, int(n))
    return o


class Program(_Owner):
    """Kernel source, parsed once (xpj_program). Syntax and type errors
    raise KernelSyntaxError with the rendered diagnostics (file:line:col,
    the line, a caret) and .diagnostics."""

    def __init__(self, source, name="<string>", context=None, options=None):
        if isinstance(source, str):
            src = source.encode()
        elif isinstance(source, (bytes, bytearray, memoryview)):
            src = bytes(source)
        else:
            raise InvalidArgumentError("Program: the source is a str or "
                                       "bytes, not %s" % type(source).__name__)
        bname = _b(name, "Program: the name")
        self._make(name, context, options,
                   lambda ctx, d, h: _lib.program_create(
                       ctx, bname, src, len(src), d, h))

    @classmethod
    def from_file(cls, path, context=None, options=None):
        # (as Python's open() encodes it: path.encode() refused a name
        # that is not UTF-8, which os.fsdecode had made a str)
        bpath = _path(path, "Program.from_file: the path")
        self = cls.__new__(cls)
        self._make(os.fsdecode(bpath), context, options,
                   lambda ctx, d, h: _lib.program_create_file(
                       ctx, bpath, d, h))
        return self

    def _make(self, name, context, options, create):
        self._guard = None
        self.context = context or get_context()
        self.name = name
        if options is not None and not isinstance(options, dict):
            raise InvalidArgumentError("Program: options is a dict such as "
                                       "{'opt_level': 3}, not %s"
                                       % type(options).__name__)
        self.options = dict(options or {})
        self._opts = _compile_opts(self.options)
        self._kernels = {}
        self._lock = threading.Lock()
        d = ctypes.c_void_p()
        check(_lib.diags_create(ctypes.byref(d)))
        try:
            h = ctypes.c_void_p()
            st = create(self.context.handle, d, ctypes.byref(h))
            if st:
                raise error(st, diagnostics=_diagnostics(d))
            # the handle, and the calls using it (close() waits for them)
            self._guard = _Guard(h.value, InvalidArgumentError,
                                 "the program is closed")
            _live_guarded.add(self)  # (a fork's child closes it)
            _relock.add(self)
        finally:
            _lib.diags_destroy(d)

    @property
    def handle(self):
        h = self._guard.h
        if not h:
            raise InvalidArgumentError("the program is closed")
        return ctypes.c_void_p(h)

    @property
    def kernel_names(self):
        with self._guard as h:
            return [_lib.program_kernel_name(h, i).decode()
                    for i in range(_lib.program_kernel_count(h))]

    def kernel(self, name):
        """The kernel `name` (generic: specialised when called)."""
        if not isinstance(name, str):
            raise InvalidArgumentError("a kernel's name is a str, not %s"
                                       % type(name).__name__)
        _b(name, "a kernel's name")  # without NUL
        with self._lock:
            k = self._kernels.get(name)
            if k is None:
                k = self._kernels[name] = Kernel(self, name)
            return k

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.kernel(name)
        except NotFoundError:
            raise AttributeError("program %s has no kernel %r"
                                 % (self.name, name)) from None

    def get_binary(self, name, target, dtypes=None, ndim=0, consts=None):
        """The compiled binary of kernel `name` for a target ("ptx:sm_90",
        "spirv", "cpu"), through the same caches, without a device."""
        k = self.kernel(name)
        if not isinstance(target, str) or "\0" in target:
            raise InvalidArgumentError("get_binary: the target is a str "
                                       "(\"ptx:sm_90\", \"spirv\", \"cpu\"), "
                                       "not %r" % (target,))
        text = k._dtypes_text(_explicit(k, dtypes, consts))
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        with self._guard as h:
            check(_lib.program_get_binary(
                h, name.encode(), text.encode(), _count(ndim, "ndim", 0),
                target.encode(), self._opts_ptr(), ctypes.byref(data),
                ctypes.byref(size)))
        try:
            return ctypes.string_at(data, size.value)
        finally:
            _lib.libc_free(data)

    def _opts_ptr(self):
        return ctypes.byref(self._opts) if self._opts is not None else None

    def close(self):
        """Destroys the program and its kernels (queued launches of them
        must have finished: wait first); calling them afterwards raises
        InvalidArgumentError. Calls other threads are making with it (a
        launch, a compile) end first."""
        h = _retire(getattr(self, "_guard", None))
        if h:
            # nothing may reach the C kernels it frees: not the C launch
            # path's keys, not a kept specialisation
            for k in getattr(self, "_kernels", {}).values():
                with k._lock:
                    k._fast_memo.clear()
                    k._specs.clear()
            _lib.program_destroy(h)

    def __del__(self):
        self.close()

    def __repr__(self):
        try:
            names = ", ".join(self.kernel_names)
        except InvalidArgumentError:
            names = "(closed)"
        return "<xpjit.Program %s: %s>" % (self.name, names)


# xpj_diag_severity (include/xpjit_compiler.h), in its order
_SEVERITIES = ("error", "warning", "note")


def _diagnostics(d):
    out = []
    diag = _lib.Diag()
    for i in range(_lib.diags_count(d)):
        if _lib.diags_get(d, i, ctypes.byref(diag)) == 0:
            # the file as the path it is (os.fsdecode: a name that is not
            # UTF-8 raised UnicodeDecodeError), the message as text
            out.append((os.fsdecode(diag.file) if diag.file else "",
                        diag.line, diag.col, _SEVERITIES[diag.severity]
                        if 0 <= diag.severity < 3 else str(diag.severity),
                        diag.message.decode("utf-8", "replace")
                        if diag.message else ""))
    return out


_BIG = 1 << 63  # what a grid, local size or count may not reach


def _count(v, what, low=1):
    """v as an int of low .. 2**63 - 1, else InvalidArgumentError."""
    try:
        if isinstance(v, (bool, np.bool_)):
            raise TypeError  # True is no size
        n = operator.index(v)
    except TypeError:
        raise InvalidArgumentError("%s must be an int, not %s"
                                   % (what, type(v).__name__)) from None
    if not low <= n < _BIG:
        raise InvalidArgumentError("%s %d is out of range (%d to 2**63 - 1)"
                                   % (what, n, low))
    return n


class LocalMemory:
    """count elements of local memory per work-group for a local array
    parameter (`t: local T[]`); a plain int works too."""

    def __init__(self, count):
        self.count = _count(count, "a local memory count", 0)


class _Param:
    __slots__ = ("name", "kind", "scalar", "tparam", "rank", "const")


def _explicit(kernel, dtypes, consts):
    """{type parameter index: scalar name} and {const name: value} from
    dtypes ({"T": np.float32}, "T=f32,U=i64", [np.float32, "i64"]) and
    consts ({"N": 4})."""
    bound = {}
    if dtypes is not None:
        if isinstance(dtypes, str):
            # as the C API takes it: "T=f32,U=i64" or "f32,i64", no empty
            # item (a trailing comma is a typo, not nothing)
            items = []
            parts = dtypes.split(",") if dtypes.strip() else []
            for i, part in enumerate(parts):
                k, eq, v = part.partition("=")
                if not part.strip() or (eq and not (k.strip() and v.strip())):
                    raise SpecializationError(
                        "malformed dtypes %r: an empty item or binding"
                        % (dtypes,))
                items.append((k.strip(), v.strip()) if eq else (i, k.strip()))
        elif isinstance(dtypes, dict):
            items = list(dtypes.items())
        else:
            try:
                items = list(enumerate(dtypes))
            except TypeError:
                raise SpecializationError(
                    "kernel %s: dtypes is a dict ({'T': 'f32'}), a str "
                    "('T=f32') or a sequence of dtypes, not %r"
                    % (kernel.name, dtypes)) from None
        for k, v in items:
            if isinstance(k, str):
                if k not in kernel.tparams:
                    raise SpecializationError(
                        "kernel %s has no type parameter %s (it has: %s)"
                        % (kernel.name, k, ", ".join(kernel.tparams) or
                           "none"))
                k = kernel.tparams.index(k)
            if not 0 <= k < len(kernel.tparams):
                raise SpecializationError("kernel %s takes %d type "
                                          "parameters" % (kernel.name,
                                                          len(kernel.tparams)))
            if k in bound:
                raise SpecializationError(
                    "kernel %s: type parameter '%s' bound twice"
                    % (kernel.name, kernel.tparams[k]))
            try:
                bound[k] = scalar_name(v)
            except ValueError as e:
                raise SpecializationError(str(e)) from None
    cvals = {}
    if consts is not None and not isinstance(consts, dict):
        raise SpecializationError("kernel %s: consts is a dict such as "
                                  "{'N': 4}, not %s" % (
                                      kernel.name, type(consts).__name__))
    for k, v in (consts or {}).items():
        if k not in kernel.consts:
            raise SpecializationError("kernel %s has no const parameter %s"
                                      % (kernel.name, k))
        # integers and bools, as the language's const parameters (a float
        # has no exact text for the cache key; docs/language.md 5.3)
        if isinstance(v, (bool, np.bool_)):
            v = bool(v)
        else:
            try:
                v = operator.index(v)
            except TypeError:
                raise SpecializationError(
                    "kernel %s: const parameter %s takes an int or a bool, "
                    "not %r" % (kernel.name, k, v)) from None
        cvals[k] = v
    return bound, cvals


class _Spec(_Owner):
    """One specialisation compiled for one device: the C kernel and the
    argument buffers its launches fill (reused: under the kernel's lock)."""

    def __init__(self, kernel, handle, device, dtypes_text, ndim):
        self.kernel, self.h, self.device = kernel, handle, device
        self.dtypes, self.ndim = dtypes_text, ndim
        info = _lib.KernelInfo()
        check(_lib.kernel_get_info(handle, ctypes.byref(info)))
        self.info = info
        n = info.nargs
        self.args = (_lib.Arg * max(n, 1))()
        self.arrays = (_lib.Array * max(n, 1))()
        self.kinds, self.scalars = [], []
        ai = _lib.KernelArgInfo()
        for i in range(n):
            check(_lib.kernel_get_arg_info(handle, i, ctypes.byref(ai)))
            self.kinds.append(ai.kind)
            name = _lib.SCALARS[ai.dtype]
            self.scalars.append(name)
            self.args[i].kind = ai.kind
            self.args[i].dtype = ai.dtype if ai.kind == _lib.ARG_SCALAR else 0
            if ai.kind == _lib.ARG_ARRAY:
                self.args[i].array = ctypes.pointer(self.arrays[i])
        self.range = _lib.Range()
        self.lock = threading.Lock()
        # what _fast.c needs of it: per parameter its kind, its (element)
        # type and whether the kernel may write it
        self.fast = None
        if _fast is not None:
            outs = bytes(int(p.kind == _lib.ARG_ARRAY and not p.const)
                         for p in kernel.params)
            dts = []
            for i in range(n):
                dts.append(self.args[i].dtype if self.kinds[i] ==
                           _lib.ARG_SCALAR else _lib.SCALAR[self.scalars[i]])
            self.fast = _fast.spec(handle.value, bytes(self.kinds),
                                   bytes(dts), outs, kernel.program._guard)

    @property
    def signature(self):
        with self.kernel.program._guard:  # raises once it is closed
            return _lib.kernel_signature(self.h).decode()

    @property
    def origin(self):
        """Where the binary came from: "compiled", "memory", "cache",
        "bundle", "daemon" or "redis"."""
        return _lib.ORIGINS[self.info.origin]

    @property
    def compile_ms(self):
        return self.info.compile_millis


class Kernel(_Owner, _KernelBase):
    """A kernel of a program, generic until called. k(grid, *args) or
    k[grid, local](*args) launches it: grid is the global size (an int, or
    1 to 3 ints, the first dimension first), local the work-group size
    (nd-range kernels; None: the runtime chooses). Type parameters and the
    rank of [*] arrays are inferred from the arrays (a scalar of a type
    parameter no array binds: its NumPy type, else int -> i64, float ->
    f64); dtypes={"T": "f32"}, consts={"N": 4} and ndim= give them
    explicitly. The first call of each specialisation compiles it (through
    the caches); later ones reuse it."""

    def __init__(self, program, name):
        self.program, self.name = program, name
        with program._guard as h:
            self._read(program, _lib.program_module(h))
        self._specs = {}
        self._memo = {}
        self._fast_memo = {}  # _fast.c: call key -> specialisation
        self._lock = threading.Lock()

    def _read(self, program, m):
        """The kernel's parameters, from the program's module m."""
        name = self.name
        f = _lib.module_find(m, name.encode())
        kind = _lib.func_kind_of(f) if f else 0
        if kind not in (_lib.FUNC_RANGE, _lib.FUNC_NDRANGE):
            raise NotFoundError("program %s has no kernel %s (kernels: %s)"
                                % (program.name, name,
                                   ", ".join(program.kernel_names)), 3)
        self.ndrange = kind == _lib.FUNC_NDRANGE
        self.dims = _lib.func_dims(f)
        self.tparams = [_lib.func_tparam_name(f, i).decode()
                        for i in range(_lib.func_tparam_count(f))]
        self.consts = [_lib.func_const_name(f, i).decode()
                       for i in range(_lib.func_const_count(f))]
        self.params = []
        for i in range(_lib.func_param_count(f)):
            t = _lib.func_param_type(f, i)
            p = _Param()
            p.name = _lib.func_param_name(f, i).decode()
            tk = _lib.type_kind_of(m, t)
            if tk == _lib.TYPE_VIEW:
                p.kind = (_lib.ARG_LOCAL if _lib.type_space(m, t) ==
                          _lib.SPACE_LOCAL else _lib.ARG_ARRAY)
            else:
                p.kind = _lib.ARG_SCALAR
            p.tparam = _lib.type_param_index(m, t)
            p.scalar = (None if p.tparam >= 0 else
                        _lib.SCALARS[_lib.type_elem_scalar(m, t)])
            p.rank = _lib.type_rank(m, t)
            p.const = bool(_lib.type_is_const(m, t))
            self.params.append(p)

    def __repr__(self):
        return "<xpjit.Kernel %s of %s>" % (self.name, self.program.name)

    # -- specialisation
    def _dtypes_text(self, explicit):
        bound, cvals = explicit
        parts = ["%s=%s" % (self.tparams[i], bound[i])
                 for i in sorted(bound)]
        parts += ["%s=%s" % (k, int(v) if not isinstance(v, bool)
                             else str(v).lower()) for k, v in cvals.items()]
        return ",".join(parts)

    def specialize(self, dtypes=None, ndim=0, consts=None, device=None):
        """The kernel compiled for these dtypes and ndim on device (the
        current device), as an object with .info and .signature."""
        device = device if device is not None else get_device()
        text = self._dtypes_text(_explicit(self, dtypes, consts))
        # (int(ndim) took -1 as 4294967295 in the library's message)
        return self._spec(text, _count(ndim or 0, "ndim", 0), device)

    def _spec(self, text, ndim, device):
        key = (text, ndim, device._h.value)
        with self.program._guard as ph:  # raises once it is closed
            s = self._specs.get(key)
            if s is None:
                with self._lock:
                    s = self._specs.get(key)
                    if s is None:
                        h = ctypes.c_void_p()
                        check(_lib.program_get_kernel(
                            ph, self.name.encode(), text.encode(), ndim,
                            device.handle, self.program._opts_ptr(),
                            ctypes.byref(h)))
                        s = self._specs[key] = _Spec(self, h, device, text,
                                                     ndim)
        return s

    def _infer(self, args, dtypes, consts, ndim):
        """(dtypes text, ndim) for args."""
        bound, cvals = _explicit(self, dtypes, consts)
        explicit = set(bound)
        weak = {}
        rank = _count(ndim, "ndim", 0) if ndim else None
        for i, (p, a) in enumerate(zip(self.params, args)):
            if p.kind == _lib.ARG_ARRAY:
                dt, nd = _array_meta(a)
                if dt is None:
                    raise InvalidArgumentError(
                        "kernel %s: argument %d '%s' must be an array, not %s"
                        % (self.name, i, p.name, type(a).__name__))
                if p.rank == _lib.RANK_GENERIC:
                    if rank is None:
                        rank = nd
                    elif rank != nd and not ndim:
                        raise SpecializationError(
                            "kernel %s: argument %d '%s' has %d dimensions, "
                            "an earlier [*] array %d" % (self.name, i, p.name,
                                                         nd, rank))
                if p.tparam >= 0 and p.tparam not in explicit:
                    try:
                        name = scalar_name(dt)
                    except ValueError as e:
                        raise SpecializationError("kernel %s: argument %d "
                                                  "'%s': %s" % (
                                                      self.name, i, p.name,
                                                      e)) from None
                    had = bound.get(p.tparam)
                    if had is not None and had != name:
                        raise SpecializationError(
                            "kernel %s: %s is %s from an earlier argument but "
                            "argument %d '%s' is an array of %s" % (
                                self.name, self.tparams[p.tparam], had, i,
                                p.name, name))
                    bound[p.tparam] = name
            elif p.kind == _lib.ARG_SCALAR and p.tparam >= 0 and \
                    p.tparam not in bound:
                if isinstance(a, (np.generic, np.ndarray)):
                    try:
                        weak.setdefault(p.tparam, scalar_name(a.dtype))
                    except ValueError as e:
                        raise SpecializationError(
                            "kernel %s: argument %d '%s': %s" % (
                                self.name, i, p.name, e)) from None
                elif isinstance(a, bool):
                    weak.setdefault(p.tparam, "bool")
                elif isinstance(a, int):
                    weak.setdefault(p.tparam, "i64")
                elif isinstance(a, float):
                    weak.setdefault(p.tparam, "f64")
        for t, name in weak.items():
            bound.setdefault(t, name)
        missing = [self.tparams[i] for i in range(len(self.tparams))
                   if i not in bound]
        if missing:
            raise SpecializationError(
                "kernel %s: cannot infer %s from the arguments: give "
                "dtypes={%s}" % (self.name, ", ".join(missing),
                                 ", ".join("%r: ..." % m for m in missing)))
        return self._dtypes_text((bound, cvals)), rank or 0

    # -- launches
    def __getitem__(self, config):
        if not isinstance(config, tuple) or len(config) != 2:
            config = (config, None)
        return _Bound(self, config[0], config[1])

    # k(grid, *args, local=None, queue=None, dtypes=None, consts=None,
    # ndim=None, wait=None): with the C module, its KernelBase takes the
    # calls it knows and hands the others to _call_slow
    def _call_slow(self, *args, **kw):
        if not args:
            raise TypeError("kernel %s: the grid is missing: call it as "
                            "k(grid, %s) or k[grid, local](%s)" % (
                                self.name, ", ".join(p.name for p in
                                                     self.params),
                                ", ".join(p.name for p in self.params)))
        grid, args = args[0], args[1:]
        unknown = set(kw) - _CALL_KEYWORDS
        if unknown:
            raise TypeError("kernel %s: unknown keyword argument%s %s (it "
                            "takes %s)" % (
                                self.name, "s" if len(unknown) > 1 else "",
                                ", ".join(sorted(unknown)),
                                ", ".join(sorted(_CALL_KEYWORDS))))
        self._launch(grid, kw.get("local"), args, kw.get("queue"),
                     kw.get("dtypes"), kw.get("consts"), kw.get("ndim"),
                     kw.get("wait"), False)

    def launch(self, grid, *args, local=None, queue=None, dtypes=None,
               consts=None, ndim=None, wait=None):
        """As calling the kernel, and returns the launch's Event."""
        return self._launch(grid, local, args, queue, dtypes, consts, ndim,
                            wait, True)

    def _launch(self, grid, local, args, queue, dtypes, consts, ndim, wait,
                want_event):
        if len(args) != len(self.params):
            raise InvalidArgumentError(
                "kernel %s takes %d arguments (%s), given %d" % (
                    self.name, len(self.params),
                    ", ".join(p.name for p in self.params), len(args)))
        if queue is not None:
            _check_queue(queue, "kernel %s" % self.name)
        args = [_coerce_array(a, queue) for a in args]
        if queue is None:
            dev = next((a.device for a in args if isinstance(a, ndarray)),
                       None)
            if dev is None:
                # the current device, when it is of the program's context;
                # else that context's default device (NumPy arrays of a
                # program of a Context of its own: "the device is not of
                # the program's context" before)
                dev = get_device()
                ctx = self.program.context
                if dev.context is not ctx:
                    dev = ctx._default or ctx.default_device
            queue = dev.queue
        # arrays of another device (its host or shared memory): used as
        # NumPy's memory is, after the work queued on their device so far,
        # and the launch ends before the call returns (wait=False: they
        # are kept until it has). Nothing orders that device's queues with
        # this one's, and it would free them under the launch.
        others = _other_devices(self, args, queue)
        for d in others:
            d.synchronize()
        memo_key = (tuple(_meta_key(a) for a in args), dtypes if dtypes is
                    None or isinstance(dtypes, str) else repr(dtypes),
                    repr(consts) if consts else None, ndim)
        host = bool(others)
        foreign = None
        launched = False  # maybe: until the launch is waited for or held
        try:
            with self.program._guard:  # its kernels live until launched
                hit = self._memo.get(memo_key)
                if hit is None:
                    hit = self._infer(args, dtypes, consts, ndim)
                    if len(self._memo) < 4096:
                        self._memo[memo_key] = hit
                spec = self._specs.get((hit[0], hit[1], queue._dv)) or \
                    self._spec(hit[0], hit[1], queue.device)
                with spec.lock:
                    _fill_range(spec.range, self.name, grid, local)
                    for i, a in enumerate(args):
                        kind = spec.kinds[i]
                        if kind == _lib.ARG_ARRAY:
                            h = _fill_array(spec, i, a)
                            host = host or h
                            if isinstance(a, ndarray) and a._sync == 2:
                                foreign = foreign or []
                                foreign.append(a)
                        elif kind == _lib.ARG_SCALAR:
                            _fill_scalar(spec, i, a)
                        else:
                            _fill_local(spec, i, a)
                    need_hold = bool(foreign) or (host and wait is False)
                    ev = ctypes.c_void_p() if (want_event or need_hold) \
                        else None
                    with queue._guard as qh:
                        launched = True
                        st = _lib.launch(qh, spec.h, ctypes.byref(spec.range),
                                         len(args), spec.args,
                                         ctypes.byref(ev) if ev is not None
                                         else None)
            if st:
                launched = False
                raise error(st)
            if _fast is not None and dtypes is None and consts is None and \
                    ndim is None and spec.fast is not None:
                key = _fast.key(tuple(args), queue)
                if key is not None and len(self._fast_memo) < 4096:
                    self._fast_memo[key] = spec.fast
            event = Event(ev.value, queue) if ev is not None else None
            # memory NumPy or another library (CuPy, PyTorch) reads as it
            # likes: their streams have no order with xpjit's, so the launch
            # ends first
            if wait or ((host or foreign) and wait is None):
                launched = False  # (interrupted too, it waits for that)
                queue.wait()
            elif need_hold:
                # what the launch reads must outlive it: NumPy arrays given
                # with wait=False, memory of other libraries
                queue._hold(event, args)
                launched = False
        except BaseException:
            # (a KeyboardInterrupt between the launch and its wait) memory
            # another party frees as it likes must not be left under it
            if launched and (host or foreign):
                _finish(queue)
            raise
        return event if want_event else None


def _check_queue(queue, who):
    """queue= is None or an xpjit.Queue."""
    if queue is not None and not isinstance(queue, Queue):
        raise InvalidArgumentError(
            "%s: queue= takes an xpjit.Queue, not %s%s" % (
                who, type(queue).__name__,
                " (a device's default queue is device.queue)"
                if isinstance(queue, Device) else ""))


def _other_devices(kernel, args, queue):
    """The devices of array arguments that are not the queue's, whose
    memory must be the host's (kind host or shared): another device's
    device memory is refused."""
    out = []
    for i, a in enumerate(args):
        if not isinstance(a, ndarray) or a._dv == queue._dv:
            continue
        if isinstance(a._mem, (_Allocation, _Foreign, _Import)) and \
                a._mem.kind == _lib.MEM_DEVICE:
            # (the same id in two contexts read "memory of opencl:0, which
            # the queue's device opencl:0 cannot use")
            other = " of another context" if a.device.id == \
                queue.device.id else ""
            raise InvalidArgumentError(
                "kernel %s: argument %d '%s' is device memory of %s, which "
                "the queue's device %s%s cannot use (copy it with "
                "xpjit.asarray(x, device=...), or allocate it with "
                "kind='host' or 'shared')" % (
                    kernel.name, i, kernel.params[i].name, a.device.id,
                    queue.device.id, other))
        if a.device not in out:
            out.append(a.device)
    return out


def _finish(queue):
    """Waits for queue's commands, not to be interrupted, dropping their
    errors (an exception is leaving already)."""
    try:
        with queue._guard as h:
            _lib.queue_wait(h)
    except InvalidArgumentError:  # closed: its destroy waited for them
        pass


_CALL_KEYWORDS = frozenset(("local", "queue", "dtypes", "consts", "ndim",
                            "wait"))

if _fast is None:
    Kernel.__call__ = Kernel._call_slow


class _Bound:
    def __init__(self, kernel, grid, local):
        self.kernel, self.grid, self.local = kernel, grid, local

    def __call__(self, *args, **kw):
        return self.kernel(self.grid, *args, local=self.local, **kw)


def _meta_key(a):
    if isinstance(a, (np.ndarray, ndarray)):
        return (a.dtype, a.ndim)
    if isinstance(a, np.generic):
        return a.dtype
    return type(a)


def _array_meta(a):
    if isinstance(a, (np.ndarray, ndarray)):
        return a.dtype, a.ndim
    return None, None


def _coerce_array(a, queue=None):
    """Foreign arrays (dpctl's USM interface, DLPack, CUDA array
    interface) become xpjit views; dpctl's on the queue's device when a
    queue is given (its DLPack device, oneAPI, names no SYCL context: its
    USM interface goes first)."""
    if isinstance(a, (np.ndarray, ndarray, np.generic, int, float, bool,
                      LocalMemory)):
        return a
    if _has_suai(a):
        return from_sycl_usm_array_interface(
            a, device=getattr(queue, "device", None))
    if hasattr(a, "__dlpack__") and hasattr(a, "__dlpack_device__"):
        return from_dlpack(a)
    if hasattr(a, "__cuda_array_interface__"):
        # on the queue's device when a queue is given (the CPU device takes
        # memory the host reads), else cuda:0
        return from_cuda_array_interface(
            a, device=getattr(queue, "device", None))
    return a


def _dims(v):
    if isinstance(v, (list, tuple)):
        return tuple(v)
    return (v,)


def _fill_range(r, name, grid, local):
    g = _dims(grid)
    if not 1 <= len(g) <= 3:
        raise InvalidArgumentError("kernel %s: the grid has 1 to 3 "
                                   "dimensions, not %d" % (name, len(g)))
    g = tuple(_count(n, "kernel %s: grid size" % name) for n in g)
    loc = None if local is None else tuple(
        _count(n, "kernel %s: local size" % name, 0) for n in _dims(local))
    if loc is not None and len(loc) != len(g):
        raise InvalidArgumentError("kernel %s: local %r has %d dimensions, "
                                   "the grid %d" % (name, loc, len(loc),
                                                    len(g)))
    r.ndim = len(g)
    for d in range(3):
        r.glob[d] = int(g[d]) if d < len(g) else 1
        r.local[d] = (int(loc[d]) if loc is not None and d < len(loc) else
                      (1 if loc is not None else 0))


def _fill_array(spec, i, a):
    """Fills view i from a NumPy array or an xpjit.ndarray; True for host
    memory (a NumPy array)."""
    v = spec.arrays[i]
    it = a.dtype.itemsize
    if isinstance(a, np.ndarray):
        if not a.flags.writeable and not spec.kernel.params[i].const:
            raise InvalidArgumentError(
                "kernel %s: argument %d '%s' is written by the kernel, but "
                "the array is not writable" % (spec.kernel.name, i,
                                                spec.kernel.params[i].name))
        v.data = a.ctypes.data if a.size else (a.ctypes.data or it)
        host = True
    else:
        if a._readonly and not spec.kernel.params[i].const:
            raise InvalidArgumentError(
                "kernel %s: argument %d '%s' is written by the kernel, but "
                "the array is read-only" % (spec.kernel.name, i,
                                            spec.kernel.params[i].name))
        v.data = a._ptr
        host = a._host
    if a.ndim > _lib.MAX_RANK:
        raise InvalidArgumentError(
            "kernel %s: argument %d '%s' has %d dimensions (at most %d)" % (
                spec.kernel.name, i, spec.kernel.params[i].name, a.ndim,
                _lib.MAX_RANK))
    v.dtype = _lib.SCALAR.get(_dtype_name(a.dtype), 0)
    if spec.scalars[i] == "bf16" and a.dtype == np.uint16:
        v.dtype = _lib.SCALAR["bf16"]
    v.ndim = a.ndim
    v.offset = 0
    for d, (n, s) in enumerate(zip(a.shape, a.strides)):
        if s % it:
            raise InvalidArgumentError(
                "kernel %s: argument %d '%s': stride %d bytes is not a "
                "multiple of the %d-byte element" % (
                    spec.kernel.name, i, spec.kernel.params[i].name, s, it))
        v.shape[d] = n
        v.strides[d] = s // it
    return host


def _dtype_name(dt):
    try:
        return scalar_name(dt)
    except ValueError:
        return "void"


def _fill_scalar(spec, i, a):
    name = spec.scalars[i]
    v = scalar_value(name, a, "kernel %s: argument %d '%s'",
                     spec.kernel.name, i, spec.kernel.params[i].name)
    g = spec.args[i]
    if name in ("u8", "u16", "u32", "u64"):
        g.v.u = v
    elif isinstance(v, float):
        g.v.f = v
    else:
        g.v.i = v


def _fill_local(spec, i, a):
    n = a.count if isinstance(a, LocalMemory) else a
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise InvalidArgumentError(
            "kernel %s: argument %d '%s' is a local array: give its element "
            "count" % (spec.kernel.name, i, spec.kernel.params[i].name))
    spec.args[i].v.u = _count(n, "kernel %s: argument %d '%s' (local "
                              "elements)" % (spec.kernel.name, i,
                                             spec.kernel.params[i].name), 0)
