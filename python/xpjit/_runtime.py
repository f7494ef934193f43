"""Contexts, devices, queues and events: xpjit.h's runtime objects.

A process has a default context, made at first use with the library's
defaults (XPJIT_DEVICE, XPJIT_CACHE, XPJIT_BUNDLE_PATH, XPJIT_DAEMON, ...),
and a current device per thread (the context's default device unless a
`with device:` block says otherwise), with a default queue each, as CuPy
has a current device and stream and dpctl a default queue.

A queue's or a program's handle is held by a guard (_fast.c's Guard, or
_PyGuard here) that counts the calls using it: close() takes the handle
away, waits for those calls, then destroys it. Waits on the main thread
are interruptible by Ctrl-C (_fast.c, "waits")."""
import _thread
import atexit
import ctypes
import operator
import os
import signal
import threading
import time
import weakref

from . import _accel, _lib
from ._errors import InvalidArgumentError, UnsupportedError, check, error

_lock = threading.Lock()
_default_context = None
_local = threading.local()
_live = weakref.WeakSet()  # contexts not closed: settled at exit


@atexit.register
def _settle_caches():
    """At interpreter exit the contexts are not destroyed (arrays and
    queues may still hold them), so their caches are not closed: what
    a cache handle defers (the uses of its hits, its counters) is written
    here, or the hits would not count and the rows would age as unused."""
    for ctx in list(_live):
        h = getattr(ctx, "_h", None)
        if h:
            _lib.cache_settle(_lib.context_cache(h))


def _b(s, what="a device filter"):
    """A string for the C library (None stays NULL): a str, UTF-8
    encoded. InvalidArgumentError for anything else and for a NUL, which
    C would have taken for the end ("cpu\\0opencl" was "cpu")."""
    if s is None:
        return None
    if not isinstance(s, str):
        raise InvalidArgumentError("%s is a str, not %s"
                                   % (what, type(s).__name__))
    try:
        b = s.encode()
    except UnicodeEncodeError as e:
        raise InvalidArgumentError("%s %r is not UTF-8: %s"
                                   % (what, s, e)) from None
    return _no_nul(b, what, s)


def _no_nul(b, what, s):
    if b"\0" in b:
        raise InvalidArgumentError("%s %r has a NUL character" % (what, s))
    return b


def _uint(v, what, bits):
    """v as an int of 0 to 2**bits - 1 (ctypes wrapped -1 to the largest,
    2**32 + 1 to 1, silently; int() took "4")."""
    try:
        n = -1 if isinstance(v, bool) else operator.index(v)
    except TypeError:
        n = -1
    if not 0 <= n < 1 << bits:
        raise InvalidArgumentError("%s is an int of 0 to 2**%d - 1, not %r"
                                   % (what, bits, v))
    return n


def _path(p, what="a path"):
    """A file system path for the C library: a str, bytes or os.PathLike
    (a str as Python's own functions encode it, so that a name that is not
    UTF-8 works); InvalidArgumentError for anything else or a NUL."""
    try:
        b = os.fsencode(p)
    except TypeError:
        raise InvalidArgumentError("%s is a str, bytes or os.PathLike, not "
                                   "%s" % (what, type(p).__name__)) from None
    return _no_nul(b, what, p)


# ---- objects that own a handle ---------------------------------------------

class _Owner:
    """A base of the classes whose objects own a handle of the C library
    (a context, queue, event, program, kernel, memory): one object, one
    handle, released once by its close() or __del__. A copy would share
    the handle and release it a second time (copy.copy of a Context
    destroyed the C context twice, of an Event released it twice, of a
    Queue closed the original with the copy): copy.copy, copy.deepcopy
    and pickle raise TypeError, as they do for CuPy's streams and
    PyOpenCL's contexts. Share the object itself."""

    __slots__ = ()

    def _no_copy(self, *args):
        raise TypeError("%s owns a handle of the xpjit library and cannot "
                        "be copied or pickled (share the object itself)"
                        % _kind(self))

    __copy__ = __deepcopy__ = __reduce__ = __reduce_ex__ = _no_copy


def _kind(obj):
    t = type(obj)
    return "xpjit.%s" % t.__name__ if not t.__name__.startswith("_") \
        else "an xpjit %s object" % t.__name__.lstrip("_")


# ---- handles in use --------------------------------------------------------

class _PyGuard:
    """_fast.c's Guard in Python (the module not built): a handle and the
    calls using it; `with guard as h` raises exc(msg) once closed. A use
    is an item of a list (append and pop are atomic), counted before the
    handle is read: close() takes the handle first, then waits for the
    count, so that a use it did not see finds no handle."""

    __slots__ = ("h", "_in", "_exc", "_msg", "_lock")

    def __init__(self, h, exc, msg):
        self.h, self._in, self._exc, self._msg = h, [], exc, msg
        self._lock = threading.Lock()

    users = property(lambda self: len(self._in))

    def __enter__(self):
        self._in.append(None)
        h = self.h
        if not h:
            self._in.pop()
            raise self._exc(self._msg)
        return h

    def __exit__(self, *exc):
        self._in.pop()
        return False

    def close(self, msg=None):
        with self._lock:  # (two closes: one gets the handle)
            if msg is not None:
                self._msg = msg
            h, self.h = self.h, 0
            return h


_Guard = _accel._fast.Guard if _accel._fast is not None else _PyGuard


def _retire(guard):
    """Takes guard's handle away (later calls raise its error) and returns
    it once no call uses it any more; 0 when it was closed before."""
    h = guard.close() if guard is not None else 0
    while h and guard.users:
        time.sleep(0.001)  # calls in the library: a launch, a wait, a compile
    return h


# ---- waits -----------------------------------------------------------------
# A SIGINT during a wait on the main thread reaches a pipe that _watch
# reads (through _fast.c's handler, or here Python's signal wakeup fd,
# pointed at the pipe for the wait); with Python's default handler it
# cancels the queue waited for, so that KeyboardInterrupt comes at once
# (_fast.c, "waits").

_wake = None  # (read end, write end) of the pipe, made at the first wait
_waiting = None  # the guard of the queue the main thread waits for (here)
_interrupted = False
_main = threading.main_thread().ident


def _wake_fd():
    """The pipe's write end, with the thread that reads it; -2 where
    they cannot be made."""
    global _wake
    if _wake is None:
        try:
            r, w = os.pipe()
            os.set_blocking(w, False)
            threading.Thread(target=_watch, args=(r,), daemon=True,
                             name="xpjit-sigint").start()
            _wake = (r, w)
        except (OSError, RuntimeError):
            _wake = (-1, -2)
    return _wake[1]


def _watch(r):
    sigint = int(signal.SIGINT)
    while True:
        try:
            data = os.read(r, 256)
        except OSError:
            return
        if not data:
            return
        if sigint in data and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            _interrupt()


# ---- fork ------------------------------------------------------------------
# A child process has none of the parent's threads (its queues', the CPU
# device's pool), and the library refuses everything made before the fork
# there (docs/api.md, "fork()"). The child's package starts over: a new
# default context (and with it default devices and queues) at first use;
# the contexts, queues and programs made before raise InvalidArgumentError
# saying so; locks another thread of the parent may have held are new.

_live_guarded = weakref.WeakSet()  # programs (their _guard and _lock)
_relock = weakref.WeakSet()  # objects whose _lock the child makes anew


def _forked_msg(what):
    return ("the %s was made before fork(), in the parent process, and "
            "cannot be used in the child (xpjit's default context, devices "
            "and queues are new there: make the child's own objects)" % what)


def _after_fork():
    """In a child: the parent's pipe and thread are not its own, nor are
    its contexts, queues and programs."""
    global _wake, _waiting, _main, _lock, _queues_lock, _default_context
    _lock = threading.Lock()
    _queues_lock = threading.Lock()
    _default_context = None
    for ctx in list(_live):
        ctx._h, ctx._closing = None, None
        ctx._gone = _forked_msg("context")
        ctx._dlock = threading.Lock()
    for qs in list(_queues.values()):
        for q in list(qs):
            q._guard.close(_forked_msg("queue"))
            q._klock = threading.Lock()
    _queues.clear()
    for p in list(_live_guarded):
        if p._guard is not None:
            p._guard.close(_forked_msg("program"))
    for o in list(_relock):
        o._lock = threading.Lock()
    _main = threading.main_thread().ident
    if _wake is not None and _wake[0] >= 0:
        for fd in _wake:
            try:
                os.close(fd)
            except OSError:
                pass
    _wake, _waiting = None, None
    if _accel._fast is not None:
        _accel._fast.set_wake(-1, _main)
        _accel._fast.set_default(None)  # the parent's default queue


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _py_interrupt():
    global _interrupted
    g = _waiting
    if g is None:
        return
    try:
        with g as h:
            _interrupted = True
            _lib.queue_cancel(h)
    except InvalidArgumentError:  # closed meanwhile: the wait is over
        pass


def _arm(guard):
    global _waiting, _interrupted
    if _thread.get_ident() != _main:
        return False
    fd = _wake[1] if _wake is not None else _wake_fd()
    if fd < 0:
        return False
    try:
        old = signal.set_wakeup_fd(fd)
    except ValueError:
        return False
    if old != -1:  # another library's (an event loop's): left to it
        signal.set_wakeup_fd(old, warn_on_full_buffer=False)
        return False
    _interrupted = False
    _waiting = guard
    return True


def _py_wait(guard, event=0):
    """xpj_queue_wait of guard's queue (event: xpj_event_wait of it), the
    status; as _fast.c's wait."""
    global _waiting
    if event and not guard.h:
        return _lib.event_wait(event)  # a closed queue's events are done
    with guard as h:
        armed = _arm(guard)
        try:
            if not event:
                return _lib.queue_wait(h)
            try:
                return _lib.event_wait(event)
            finally:
                if armed and _interrupted:
                    # the cancelled command keeps its memory until its
                    # turn in the queue has passed (xpj_queue_cancel)
                    _lib.queue_wait(h)
        finally:
            if armed:
                _waiting = None
                signal.set_wakeup_fd(-1)


if _accel._fast is not None:
    _wait, _interrupt = _accel._fast.wait, _accel._fast.interrupt
else:
    _wait, _interrupt = _py_wait, _py_interrupt


class Context(_Owner):
    """Devices, the compile cache and loaded kernels (xpj_context).

    visible: a device filter limiting what the context sees (XPJIT_DEVICE's
    syntax: "cpu", "opencl:cpu", "cuda:0", "*:gpu;!cuda:1"); cache: "rw",
    "ro" or "off" (None: XPJIT_CACHE, else rw); cache_path, cache_max_size:
    the second-level cache's file and size limit; bundles: load the bundles
    of XPJIT_BUNDLE_PATH; checks: "bounds" compiles bounds checks into
    every kernel; redis: the cluster tier's URL ("off": none); daemon: the
    compile daemon xpjitd, "auto" (its default socket), a socket path or
    "off" (None: XPJIT_DAEMON, else auto)."""

    def __init__(self, visible=None, cpu_threads=0, cache=None,
                 cache_path=None, cache_max_size=0, bundles=True,
                 checks=None, redis=None, daemon=None):
        if cache is not None and cache not in _lib.CACHE_MODES:
            raise InvalidArgumentError(
                "cache must be one of %s, not %r"
                % (", ".join(sorted(_lib.CACHE_MODES)), cache))
        if checks not in (None, "", "bounds", "all"):
            raise InvalidArgumentError("checks must be 'bounds', not %r"
                                       % (checks,))
        self._strings = [_b(visible, "visible"),
                         None if cache_path is None else _path(cache_path,
                                                               "cache_path"),
                         _b(redis, "redis"),
                         None if daemon is None else _path(daemon, "daemon")]
        d = _lib.ContextDesc(self._strings[0],
                             _uint(cpu_threads, "cpu_threads", 32),
                             _lib.CACHE_MODES[cache or "default"],
                             self._strings[1],
                             _uint(cache_max_size, "cache_max_size", 64),
                             0 if bundles else 1, 1 if checks else 0,
                             self._strings[2], self._strings[3])
        h = ctypes.c_void_p()
        check(_lib.context_create(ctypes.byref(d), ctypes.byref(h)))
        self._h = h
        self._devices = {}
        self._default = None
        self._dlock = threading.Lock()
        # memory of the context's devices still held by arrays: the C
        # context (and with it the devices) outlives close() until the
        # last is freed (the library defers its teardown for queues and
        # programs, not for memory the package frees after)
        self._users = 0
        self._closing = None
        _live.add(self)

    def close(self):
        """Releases the context: torn down once its last queue, program
        and array are gone (xpj_context_destroy); using it afterwards
        raises InvalidArgumentError."""
        h, self._h = getattr(self, "_h", None), None
        if not h:
            return
        with _lock:
            if self._users:
                self._closing = h  # the last array's free destroys it
                return
        _lib.context_destroy(h)

    def _use(self):
        with _lock:
            self._users += 1

    def _unuse(self):
        with _lock:
            self._users -= 1
            h = self._closing if self._users == 0 else None
            if h:
                self._closing = None
        if h:
            _lib.context_destroy(h)

    def __del__(self):
        self.close()

    _gone = "the context is closed"  # what using it raises once it is

    @property
    def handle(self):
        if not self._h:
            raise InvalidArgumentError(self._gone)
        return self._h

    def _device(self, ptr):
        with self._dlock:
            d = self._devices.get(ptr)
            if d is None:
                d = Device._wrap(self, ptr)
                self._devices[ptr] = d
            return d

    def devices(self, filter=None):
        """The devices matching filter (all visible ones when None)."""
        n = ctypes.c_uint()
        check(_lib.device_list(self.handle, _b(filter), None, 0,
                               ctypes.byref(n)))
        arr = (ctypes.c_void_p * max(n.value, 1))()
        check(_lib.device_list(self.handle, _b(filter), arr, n.value,
                               ctypes.byref(n)))
        return [self._device(arr[i]) for i in range(n.value)]

    def device(self, filter=None):
        """The first device matching filter (None: XPJIT_DEVICE, else the
        first visible device, the CPU)."""
        h = ctypes.c_void_p()
        check(_lib.device_select(self.handle, _b(filter), ctypes.byref(h)))
        return self._device(h.value)

    @property
    def default_device(self):
        if self._default is None:
            d = self.device(None)
            with self._dlock:
                if self._default is None:
                    self._default = d
        return self._default

    def add_bundle(self, path):
        """Loads a bundle of precompiled kernels (xpjit-cli bundle build)."""
        # (str(path) made b"x.xpkb" the file "b'x.xpkb'")
        check(_lib.context_add_bundle(self.handle, _path(path, "a bundle")))

    def backend_note(self, backend):
        """Why a backend ("cuda", "opencl", ...) found no devices, or ""."""
        if backend not in _lib.BACKENDS:
            raise InvalidArgumentError("backend_note: %r is no backend (%s)"
                                       % (backend, ", ".join(_lib.BACKENDS)))
        return _lib.context_backend_note(
            self.handle, _lib.BACKENDS.index(backend)).decode()

    def cache_counters(self):
        """This context's cache events since it was made: hits of each
        level, misses, compiles and their time (a dict)."""
        buf = ctypes.create_string_buffer(_lib.COUNTERS_SIZE)
        check(_lib.context_cache_counters(self.handle, buf))
        return _counters(buf, 0)

    def cache_stats(self):
        """The second-level cache's persistent totals (every process):
        counters, entries, bytes, file size and size limit (a dict)."""
        c = _lib.context_cache(self.handle)
        if not c:
            raise error(2, "out of memory")
        buf = ctypes.create_string_buffer(_lib.STATS_SIZE)
        check(_lib.cache_get_stats(c, buf))
        out = _counters(buf, 0)
        rest = (ctypes.c_uint64 * 5).from_buffer(buf, _lib.COUNTERS_SIZE)
        for i, k in enumerate(("entries", "failed_entries", "bytes",
                               "file_bytes", "max_size")):
            out[k] = rest[i]
        return out


def _counters(buf, at):
    out = {}
    for i, (name, kind) in enumerate(_lib.CACHE_COUNTERS):
        t = ctypes.c_uint64 if kind == "u" else ctypes.c_double
        out[name] = t.from_buffer(buf, at + 8 * i).value
    return out


def get_context():
    """The process's default context (made at first use)."""
    global _default_context
    ctx = _default_context
    if ctx is not None:
        return ctx
    with _lock:
        if _default_context is None:
            _default_context = Context()
        return _default_context


def set_context(ctx):
    """Makes ctx the default context (for new default devices and
    programs); returns the previous one."""
    global _default_context
    if not isinstance(ctx, Context):
        raise InvalidArgumentError("set_context takes a Context")
    with _lock:
        old, _default_context = _default_context, ctx
    if _accel._fast is not None:
        _accel._fast.set_default(None)  # the current queue changes
    return old


class Device:
    """One device of a context. Device(filter) selects the first device
    matching filter in the default context ("cpu", "opencl:cpu:0",
    "cuda:1", "gpu"; XPJIT_DEVICE's syntax); `with device:` makes it the
    current device of the thread."""

    def __new__(cls, filter=None, context=None):
        ctx = context or get_context()
        return ctx.device(filter)

    @classmethod
    def _wrap(cls, ctx, ptr):
        self = object.__new__(cls)
        self._ctx = ctx
        self._h = ctypes.c_void_p(ptr)
        info = _lib.DeviceInfo()
        check(_lib.device_get_info(self._h, ctypes.byref(info)))
        self._info = info
        self.id = _lib.device_id(self._h).decode()
        self._queue = None
        return self

    @property
    def context(self):
        return self._ctx

    @property
    def handle(self):
        self._ctx.handle  # raises when the context is closed
        return self._h

    name = property(lambda s: s._info.name.decode("utf-8", "replace"))
    vendor = property(lambda s: s._info.vendor.decode("utf-8", "replace"))
    backend = property(lambda s: _lib.BACKENDS[s._info.backend])
    device_type = property(lambda s: _lib.DEVICE_TYPES[s._info.type])
    target = property(lambda s: s._info.target.decode())
    compute_units = property(lambda s: s._info.compute_units)
    max_work_group_size = property(lambda s: s._info.max_work_group_size)
    local_mem_size = property(lambda s: s._info.local_mem_size)
    global_mem_size = property(lambda s: s._info.global_mem_size)

    @property
    def info(self):
        """Everything xpj_device_get_info says, as a dict."""
        i = self._info
        return {
            "id": self.id, "name": self.name, "vendor": self.vendor,
            "driver_version": i.driver_version.decode("utf-8", "replace"),
            "backend": self.backend, "type": self.device_type,
            "index": i.index, "compute_units": i.compute_units,
            "max_work_group_size": i.max_work_group_size,
            "max_work_item_sizes": tuple(i.max_work_item_sizes),
            "max_global_size": tuple(i.max_global_size),
            "local_mem_size": i.local_mem_size,
            "global_mem_size": i.global_mem_size,
            "mem_base_align": i.mem_base_align, "target": self.target,
        }

    def _native(self, what):
        """The driver's handle behind the device (xpj_device_native:
        _lib.NATIVE_DEVICE, _CONTEXT, _PLATFORM), an int; not retained."""
        if _lib.device_native is None:
            raise UnsupportedError("libxpjit at %s predates xpj_device_native"
                                   % _lib.path)
        h = ctypes.c_void_p()
        check(_lib.device_native(self.handle, what, ctypes.byref(h)))
        return h.value

    @property
    def queue(self):
        """The device's default queue (made at first use)."""
        if self._queue is None:
            with _lock:
                if self._queue is None:
                    q = Queue(self)
                    q._default = True
                    self._queue = q
        return self._queue

    def synchronize(self):
        """Waits for the work of every queue of the device (the default
        one and those made with xpjit.Queue), raising the first error."""
        with _queues_lock:  # the default queue is one of them
            queues = list(_queues.get(self._h.value, ()))
        for q in queues:
            if q._guard.h:
                q.wait()

    def wait_native(self, stream=0):
        """Waits for work another library queued on this device, before
        xpjit reads what it wrote (xpj_device_wait_native): stream is its
        native queue as an int (CUDA: a CUstream, 1 and 2 the legacy and
        per-thread default streams, 0 all of the device's work; OpenCL: a
        cl_command_queue). Nothing to wait for on the CPU device."""
        if isinstance(stream, bool) or not isinstance(stream, int) or \
                not 0 <= stream < 1 << 64:
            raise InvalidArgumentError(
                "wait_native: the stream is a native handle as an int, "
                "not %r" % (stream,))
        check(_lib.device_wait_native(self.handle, stream))

    def __enter__(self):
        stack = getattr(_local, "devices", None)
        if stack is None:
            stack = _local.devices = []
        stack.append(self)
        if _accel._fast is not None:
            _accel._fast.enter(1)
        return self

    def __exit__(self, *exc):
        _local.devices.pop()
        if _accel._fast is not None:
            _accel._fast.enter(-1)



    # a Device owns nothing (its context does): a copy is the device
    # itself, as the context gives one object per device; a pickle would
    # carry an address, refused
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce_ex__(self, protocol):
        raise TypeError("xpjit.Device is a device of a live context and "
                        "cannot be pickled (pickle its id, %r, and select it "
                        "again with xpjit.Device)" % self.id)

    __reduce__ = __reduce_ex__

    def __repr__(self):
        return "<xpjit.Device %s: %s>" % (self.id, self.name)

    def __eq__(self, other):
        return isinstance(other, Device) and other._h.value == self._h.value

    def __hash__(self):
        return hash(self._h.value)


def get_device():
    """The current device: the innermost `with device:` of this thread,
    else the default context's default device."""
    stack = getattr(_local, "devices", None)
    if stack:
        return stack[-1]
    ctx = _default_context or get_context()
    return ctx._default or ctx.default_device


def current_queue():
    """The current device's default queue (what a launch without queue=
    uses when no argument is a device array)."""
    stack = getattr(_local, "devices", None)
    if stack:
        return stack[-1].queue
    ctx = _default_context or get_context()
    dev = ctx._default or ctx.default_device
    q = dev._queue
    return q if q is not None else dev.queue


def devices(filter=None):
    """The devices of the default context matching filter."""
    return get_context().devices(filter)


# every live Queue of each device (by its handle), for Device.synchronize
_queues = {}
_queues_lock = threading.Lock()


class Queue(_Owner):
    """An in-order queue of a device (xpj_queue): launches and copies run
    on it asynchronously, in order. profiling: events record timestamps;
    launch_timeout_ms: stops a launch that runs longer (the CPU only)."""

    def __init__(self, device=None, profiling=False, launch_timeout_ms=0):
        if isinstance(device, str):
            device = Device(device)
        elif device is not None and not isinstance(device, Device):
            raise InvalidArgumentError("Queue takes a Device or a device "
                                       "filter, not %s"
                                       % type(device).__name__)
        try:
            ms = -1 if isinstance(launch_timeout_ms, bool) else \
                operator.index(launch_timeout_ms)
        except TypeError:
            ms = -1
        if not 0 <= ms < 1 << 64:
            raise InvalidArgumentError(
                "launch_timeout_ms is an int of 0 (none) to 2**64 - 1, not "
                "%r" % (launch_timeout_ms,))
        self._device = device if device is not None else get_device()
        d = _lib.QueueDesc(1 if profiling else 0, ms)
        h = ctypes.c_void_p()
        check(_lib.queue_create(self._device.handle, ctypes.byref(d),
                                ctypes.byref(h)))
        # the handle, for the C launch path (_fast.c) too, and the device's
        self._guard = _Guard(h.value, InvalidArgumentError,
                             "the queue is closed")
        self._dv = self._device._h.value
        self._profiling = bool(profiling)
        # objects kept alive until the work using them is done: (event,
        # objects) pairs, dropped once the event has completed
        self._keep = []
        self._klock = threading.Lock()
        with _queues_lock:
            _queues.setdefault(self._dv, weakref.WeakSet()).add(self)

    # read-only: launches take the queue's device from it
    device = property(lambda s: s._device, doc="the queue's xpjit.Device")
    profiling = property(lambda s: s._profiling,
                         doc="whether events record timestamps")

    @property
    def handle(self):
        h = self._guard.h
        if not h:
            raise InvalidArgumentError("the queue is closed")
        return ctypes.c_void_p(h)

    def wait(self):
        """Waits for every command so far; raises the first asynchronous
        error since the last wait. On the main thread Ctrl-C cancels the
        queue's commands and raises KeyboardInterrupt (docs/python.md)."""
        st = _wait(self._guard, 0)
        self._release_keep()
        check(st)

    synchronize = wait

    def cancel(self):
        """Cancels the unfinished commands (they fail with CancelledError
        at the next wait)."""
        with self._guard as h:
            check(_lib.queue_cancel(h))

    _default = False  # a device's default queue (Device.queue)

    def close(self):
        """Waits for the commands, then destroys the queue; using it
        afterwards raises InvalidArgumentError. Calls other threads are
        making with it (a launch, a wait) end first. A device's default
        queue (device.queue) cannot be closed, as CuPy's default stream
        and dpctl's default queue cannot: InvalidArgumentError (wait for
        it with wait())."""
        if self._default:
            raise InvalidArgumentError(
                "the default queue of %s cannot be closed: launches without "
                "queue= use it as long as the process runs (wait for it with "
                "wait(); close queues made with xpjit.Queue)"
                % self.device.id)
        self._close()

    def _close(self):
        h = _retire(getattr(self, "_guard", None))
        if h:
            _lib.queue_destroy(h)
            self._release_keep()

    def __del__(self):
        self._close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _hold(self, event, objs):
        """Keeps objs alive until event (an Event of this queue) is done."""
        with self._klock:
            self._prune()
            self._keep.append((event, objs))

    def _prune(self):
        keep = self._keep
        while keep and _lib.event_query(keep[0][0]._h) >= 2:
            keep.pop(0)

    def _release_keep(self):
        """After a wait: only what completed goes (commands queued while
        the wait ran, by other threads, still need theirs)."""
        with self._klock:
            self._prune()

    def __repr__(self):
        return "<xpjit.Queue on %s%s>" % (
            self.device.id, "" if self._guard.h else " (closed)")


class Event(_Owner):
    """A command's completion (xpj_event)."""

    _STATES = ["queued", "running", "complete", "failed"]

    def __init__(self, handle, queue):
        self._h = handle
        self.queue = queue

    def wait(self):
        """Blocks until the command finished; raises its error (on the
        main thread Ctrl-C cancels its queue, as Queue.wait)."""
        check(_wait(self.queue._guard, self._h))

    @property
    def state(self):
        return self._STATES[_lib.event_query(self._h)]

    def profile(self):
        """(queued, start, end) in nanoseconds of a monotonic clock; the
        queue must have profiling on and the command have finished."""
        q, s, e = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
        check(_lib.event_profile(self._h, ctypes.byref(q), ctypes.byref(s),
                                 ctypes.byref(e)))
        return q.value, s.value, e.value

    @property
    def elapsed_ns(self):
        """end - start of the command (profiling queues)."""
        _, s, e = self.profile()
        return e - s

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h:
            _lib.event_release(h)
