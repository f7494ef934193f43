"""The C library (libxpjit) through ctypes: where it is found, the
structures of include/xpjit.h laid out in ctypes (checked against the
library's own sizes at import), the functions' prototypes, and errors.

Why ctypes (docs/python.md, "Design"): no compiler or Python headers are
needed to install the package, one wheel-less source tree works with every
CPython 3.8+ (and PyPy) and every libxpjit of the same ABI, and the C API
was made for it (exported constructors, xpj_struct_size). The price is the
per-call cost of ctypes, which the launch path keeps small by reusing its
argument buffers (docs/benchmarks.md, "Python").
"""
import ctypes
import ctypes.util
import os

# ---- finding the library --------------------------------------------------


def _candidates():
    env = os.environ.get("XPJIT_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    # the source tree: python/xpjit/ -> build/lib/ (make test, no install)
    yield os.path.join(here, "..", "..", "build", "lib", "libxpjit.so")
    # the source tree the installed package was built from (setup.py)
    try:
        from ._where import LIBRARY
        if LIBRARY:
            yield LIBRARY
    except ImportError:
        pass
    # the system's loader: make install, ldconfig, LD_LIBRARY_PATH
    yield "libxpjit.so.0"
    found = ctypes.util.find_library("xpjit")
    if found:
        yield found
    for prefix in ("/usr/local/lib", "/usr/lib"):
        yield os.path.join(prefix, "libxpjit.so.0")


def _load():
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError(
        "xpjit: libxpjit not found (set XPJIT_LIBRARY to the path of "
        "libxpjit.so, or install it with 'make install')"
        + ("; tried: " + "; ".join(errors) if errors else ""))


lib, path = _load()

# ---- enums ----------------------------------------------------------------

OK = 0
STATUS_NAMES = {
    0: "OK", 1: "INVALID", 2: "NOMEM", 3: "NOT_FOUND", 4: "SYNTAX",
    5: "SPECIALIZE", 6: "IO", 7: "VERIFY", 8: "COMPILE", 9: "UNSUPPORTED",
    10: "DEVICE", 11: "CANCELLED", 12: "BOUNDS",
}

# xpj_scalar, in the order of include/xpjit_ir.h
SCALARS = ["void", "bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32",
           "u64", "f32", "f64", "f16", "bf16"]
SCALAR = {n: i for i, n in enumerate(SCALARS)}

ARG_SCALAR, ARG_ARRAY, ARG_LOCAL = 0, 1, 2
MEM_DEVICE, MEM_HOST, MEM_SHARED = 0, 1, 2
NATIVE_DEVICE, NATIVE_CONTEXT, NATIVE_PLATFORM = 0, 1, 2
BACKENDS = ["cpu", "cuda", "level_zero", "opencl"]
DEVICE_TYPES = ["cpu", "gpu", "accelerator"]
ORIGINS = ["compiled", "memory", "cache", "bundle", "daemon", "redis"]
FUNC_RANGE, FUNC_NDRANGE = 1, 2
TYPE_SCALAR, TYPE_PARAM, TYPE_VIEW, TYPE_STATIC, TYPE_PTR = range(5)
SPACE_LOCAL = 2
RANK_GENERIC = -1
MAX_RANK = 8
CACHE_MODES = {"default": 0, "off": 1, "ro": 2, "rw": 3}

# ---- structures -------------------------------------------------------------

c_int64_8 = ctypes.c_int64 * MAX_RANK


class Array(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("ndim", ctypes.c_uint), ("offset", ctypes.c_int64),
                ("shape", c_int64_8), ("strides", c_int64_8)]


class _ArgValue(ctypes.Union):
    _fields_ = [("i", ctypes.c_int64), ("u", ctypes.c_uint64),
                ("f", ctypes.c_double)]


class Arg(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("dtype", ctypes.c_int),
                ("v", _ArgValue), ("array", ctypes.POINTER(Array))]


class Range(ctypes.Structure):
    _fields_ = [("ndim", ctypes.c_uint), ("glob", ctypes.c_uint64 * 3),
                ("local", ctypes.c_uint64 * 3)]


class DeviceInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 256), ("vendor", ctypes.c_char * 128),
                ("driver_version", ctypes.c_char * 64),
                ("backend", ctypes.c_int), ("type", ctypes.c_int),
                ("index", ctypes.c_uint), ("compute_units", ctypes.c_uint),
                ("max_work_group_size", ctypes.c_uint64),
                ("max_work_item_sizes", ctypes.c_uint64 * 3),
                ("max_global_size", ctypes.c_uint64 * 3),
                ("local_mem_size", ctypes.c_uint64),
                ("global_mem_size", ctypes.c_uint64),
                ("mem_base_align", ctypes.c_uint64),
                ("target", ctypes.c_char * 1200)]


class KernelInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_int),
                ("dims", ctypes.c_uint), ("reqd_local", ctypes.c_uint64 * 3),
                ("nargs", ctypes.c_uint), ("local_mem_bytes", ctypes.c_uint64),
                ("max_work_group_size", ctypes.c_uint64),
                ("compile_millis", ctypes.c_double),
                ("target", ctypes.c_char_p), ("origin", ctypes.c_int)]


class KernelArgInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_int),
                ("dtype", ctypes.c_int), ("rank", ctypes.c_uint),
                ("is_const", ctypes.c_int)]


class ContextDesc(ctypes.Structure):
    _fields_ = [("visible", ctypes.c_char_p), ("cpu_threads", ctypes.c_uint),
                ("cache_mode", ctypes.c_int), ("cache_path", ctypes.c_char_p),
                ("cache_max_size", ctypes.c_uint64),
                ("no_env_bundles", ctypes.c_int), ("checks", ctypes.c_uint),
                ("redis", ctypes.c_char_p), ("daemon", ctypes.c_char_p)]


class QueueDesc(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint), ("launch_timeout_ms", ctypes.c_uint64)]


class CompileOpts(ctypes.Structure):
    _fields_ = [("opt_level", ctypes.c_uint), ("fast_math", ctypes.c_int),
                ("debug_info", ctypes.c_int), ("isolation", ctypes.c_int),
                ("timeout_ms", ctypes.c_uint), ("memory_limit_mb", ctypes.c_uint),
                ("checks", ctypes.c_uint), ("fp_contract", ctypes.c_int)]


# xpj_cache_counters: the counters known here, in their order; the library
# may have more (new ones are appended), so buffers take its size
CACHE_COUNTERS = [
    ("l1_hits", "u"), ("l2_hits", "u"), ("l2_misses", "u"),
    ("bundle_hits", "u"), ("compiles", "u"), ("compile_failures", "u"),
    ("failure_hits", "u"), ("corrupt", "u"), ("evictions", "u"),
    ("compile_ms", "d"), ("saved_ms", "d"), ("daemon_hits", "u"),
    ("daemon_fallbacks", "u"), ("native_hits", "u"), ("native_stores", "u"),
    ("redis_hits", "u"), ("redis_misses", "u"), ("redis_stores", "u"),
    ("redis_refused", "u"), ("redis_errors", "u"), ("redis_skipped", "u"),
    ("redis_waits", "u"),
]


class Diag(ctypes.Structure):
    _fields_ = [("severity", ctypes.c_int), ("file", ctypes.c_char_p),
                ("line", ctypes.c_uint), ("col", ctypes.c_uint),
                ("message", ctypes.c_char_p), ("source", ctypes.c_char_p)]


# ---- prototypes -----------------------------------------------------------

P = ctypes.c_void_p
S = ctypes.c_int  # xpj_status
_u, _u64, _sz, _cp = ctypes.c_uint, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_char_p


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


last_error = _fn("xpj_last_error", _cp)
status_name = _fn("xpj_status_name", _cp, S)
struct_size = _fn("xpj_struct_size", _sz, _cp)
versions_str = _fn("xpj_versions_str", _sz, ctypes.c_char_p, _sz)

context_create = _fn("xpj_context_create", S, ctypes.POINTER(ContextDesc),
                     ctypes.POINTER(P))
context_destroy = _fn("xpj_context_destroy", None, P)
context_add_bundle = _fn("xpj_context_add_bundle", S, P, _cp)
context_cache_counters = _fn("xpj_context_cache_counters", S, P, P)
context_cache = _fn("xpj_context_cache", P, P)
cache_settle = _fn("xpj_cache_settle", None, P)
context_backend_note = _fn("xpj_context_backend_note", _cp, P, ctypes.c_int)
cache_get_stats = _fn("xpj_cache_get_stats", S, P, P)

device_select = _fn("xpj_device_select", S, P, _cp, ctypes.POINTER(P))
device_count = _fn("xpj_device_count", _u, P)
device_get = _fn("xpj_device_get", P, P, _u)
device_list = _fn("xpj_device_list", S, P, _cp, ctypes.POINTER(P), _u,
                  ctypes.POINTER(_u))
device_get_info = _fn("xpj_device_get_info", S, P, ctypes.POINTER(DeviceInfo))
device_id = _fn("xpj_device_id", _cp, P)
device_wait_native = _fn("xpj_device_wait_native", S, P, ctypes.c_size_t)
# (a library older than the package may lack it: None then)
device_native = (_fn("xpj_device_native", S, P, ctypes.c_int,
                     ctypes.POINTER(P))
                 if hasattr(lib, "xpj_device_native") else None)

mem_alloc = _fn("xpj_mem_alloc", S, P, ctypes.c_int, _sz, _sz,
                ctypes.POINTER(P))
mem_free = _fn("xpj_mem_free", S, P, P)
mem_import = _fn("xpj_mem_import", S, P, P, _sz, ctypes.c_int)
mem_query = _fn("xpj_mem_query", S, P, P, ctypes.POINTER(P),
                ctypes.POINTER(_sz), ctypes.POINTER(ctypes.c_int))

queue_create = _fn("xpj_queue_create", S, P, ctypes.POINTER(QueueDesc),
                   ctypes.POINTER(P))
queue_destroy = _fn("xpj_queue_destroy", None, P)
queue_cancel = _fn("xpj_queue_cancel", S, P)
queue_wait = _fn("xpj_queue_wait", S, P)
event_release = _fn("xpj_event_release", None, P)
event_wait = _fn("xpj_event_wait", S, P)
event_query = _fn("xpj_event_query", ctypes.c_int, P)
event_profile = _fn("xpj_event_profile", S, P, ctypes.POINTER(_u64),
                    ctypes.POINTER(_u64), ctypes.POINTER(_u64))
enqueue_copy = _fn("xpj_enqueue_copy", S, P, P, P, _sz, ctypes.POINTER(P))
enqueue_fill = _fn("xpj_enqueue_fill", S, P, P, P, _sz, _sz, ctypes.POINTER(P))
enqueue_wait_events = _fn("xpj_enqueue_wait_events", S, P, _u,
                          ctypes.POINTER(P), ctypes.POINTER(P))

diags_create = _fn("xpj_diags_create", S, ctypes.POINTER(P))
diags_destroy = _fn("xpj_diags_destroy", None, P)
diags_count = _fn("xpj_diags_count", _u, P)
diags_get = _fn("xpj_diags_get", S, P, _u, ctypes.POINTER(Diag))

program_create = _fn("xpj_program_create", S, P, _cp, _cp, _sz, P,
                     ctypes.POINTER(P))
program_create_file = _fn("xpj_program_create_file", S, P, _cp, P,
                          ctypes.POINTER(P))
program_destroy = _fn("xpj_program_destroy", None, P)
program_module = _fn("xpj_program_module", P, P)
program_kernel_count = _fn("xpj_program_kernel_count", _u, P)
program_kernel_name = _fn("xpj_program_kernel_name", _cp, P, _u)
program_get_kernel = _fn("xpj_program_get_kernel", S, P, _cp, _cp, _u, P,
                         ctypes.POINTER(CompileOpts), ctypes.POINTER(P))
program_get_binary = _fn("xpj_program_get_binary", S, P, _cp, _cp, _u, _cp,
                         ctypes.POINTER(CompileOpts), ctypes.POINTER(P),
                         ctypes.POINTER(_sz))
compile_opts_default = _fn("xpj_compile_opts_default", None,
                           ctypes.POINTER(CompileOpts))
kernel_get_info = _fn("xpj_kernel_get_info", S, P, ctypes.POINTER(KernelInfo))
kernel_get_arg_info = _fn("xpj_kernel_get_arg_info", S, P, _u,
                          ctypes.POINTER(KernelArgInfo))
kernel_signature = _fn("xpj_kernel_signature", _cp, P)
kernel_suggest_local = _fn("xpj_kernel_suggest_local", S, P, _u,
                           ctypes.POINTER(_u64), ctypes.POINTER(_u64))
launch = _fn("xpj_launch", S, P, P, ctypes.POINTER(Range), _u,
             ctypes.POINTER(Arg), ctypes.POINTER(P))
arg_scalar = _fn("xpj_arg_scalar", Arg, ctypes.c_int, P)


def address(f):
    """The address of a library function (for the _fast module)."""
    return ctypes.cast(f, ctypes.c_void_p).value

module_find = _fn("xpj_module_find", P, P, _cp)
func_kind_of = _fn("xpj_func_kind_of", ctypes.c_int, P)
func_dims = _fn("xpj_func_dims", _u, P)
func_param_count = _fn("xpj_func_param_count", _u, P)
func_param_name = _fn("xpj_func_param_name", _cp, P, _u)
func_param_type = _fn("xpj_func_param_type", ctypes.c_uint32, P, _u)
func_tparam_count = _fn("xpj_func_tparam_count", _u, P)
func_tparam_name = _fn("xpj_func_tparam_name", _cp, P, _u)
func_const_count = _fn("xpj_func_const_count", _u, P)
func_const_name = _fn("xpj_func_const_name", _cp, P, _u)
func_has_generic_rank = _fn("xpj_func_has_generic_rank", ctypes.c_int, P)
type_kind_of = _fn("xpj_type_kind_of", ctypes.c_int, P, ctypes.c_uint32)
type_elem_scalar = _fn("xpj_type_elem_scalar", ctypes.c_int, P, ctypes.c_uint32)
type_param_index = _fn("xpj_type_param_index", ctypes.c_int, P, ctypes.c_uint32)
type_rank = _fn("xpj_type_rank", ctypes.c_int, P, ctypes.c_uint32)
type_is_const = _fn("xpj_type_is_const", ctypes.c_int, P, ctypes.c_uint32)
type_space = _fn("xpj_type_space", ctypes.c_int, P, ctypes.c_uint32)
f16_from_double = _fn("xpj_f16_from_double", ctypes.c_uint16, ctypes.c_double)
bf16_from_double = _fn("xpj_bf16_from_double", ctypes.c_uint16, ctypes.c_double)
libc_free = ctypes.CDLL(None).free
libc_free.argtypes = [P]
libc_free.restype = None

# ---- the layout check ---------------------------------------------------------

_LAYOUTS = {"xpj_array": Array, "xpj_arg": Arg, "xpj_range": Range,
            "xpj_device_info": DeviceInfo, "xpj_kernel_info": KernelInfo,
            "xpj_kernel_arg_info": KernelArgInfo,
            "xpj_context_desc": ContextDesc, "xpj_queue_desc": QueueDesc,
            "xpj_compile_opts": CompileOpts}
for _name, _t in _LAYOUTS.items():
    _n = struct_size(_name.encode())
    if _n != ctypes.sizeof(_t):
        raise ImportError(
            "xpjit: %s is %d bytes in %s, %d in this package: the package "
            "and the library are not of the same version"
            % (_name, _n, path, ctypes.sizeof(_t)))
COUNTERS_SIZE = struct_size(b"xpj_cache_counters")
STATS_SIZE = struct_size(b"xpj_cache_stats")
if COUNTERS_SIZE < 8 * len(CACHE_COUNTERS) or STATS_SIZE < COUNTERS_SIZE + 40:
    raise ImportError("xpjit: %s has fewer cache counters than this package "
                      "knows: the package is newer than the library" % path)


def versions():
    buf = ctypes.create_string_buffer(256)
    versions_str(buf, len(buf))
    return buf.value.decode()
