"""xpjit for Python: kernels in xpjit's kernel language, compiled on first
use and cached, run on NumPy arrays (zero copies on the CPU device) and on
device arrays of the CPU, CUDA, Level Zero and OpenCL devices.

    import numpy as np, xpjit
    prog = xpjit.Program('''
        kernel axpy<T>(a: T, x: global const T[*], y: global T[*]) range {
            let i = global_id(0);
            if i < size(y) { y[i] += a * x[i]; }
        }''')
    x = np.arange(1000, dtype=np.float32); y = np.ones_like(x)
    prog.axpy(x.size, 2.0, x, y)        # T=f32, ndim 1: inferred

docs/python.md has the tour and the mapping from CuPy and numba-dpex.
"""
from ._lib import versions as _versions
from ._errors import (XpjitError, InvalidArgumentError, OutOfMemoryError,
                      NotFoundError, KernelSyntaxError, SpecializationError,
                      VerifyError, CompileError, UnsupportedError, DeviceError,
                      CancelledError, BoundsError)
from ._runtime import (Context, Device, Queue, Event, get_context,
                       set_context, get_device, devices)
from ._array import (ndarray, empty, zeros, asarray, from_dlpack,
                     from_cuda_array_interface, from_sycl_usm_array_interface)
from ._program import Program, Kernel, LocalMemory
from ._elementwise import ElementwiseKernel, ReductionKernel

__version__ = _versions().split(";")[0].split("=")[1]


def versions():
    """The versions cache keys carry: {"xpjit": ..., "llvm": ..., "abi": ...}."""
    return dict(p.split("=", 1) for p in _versions().split(";"))


def cache_stats():
    """The default context's second-level cache: persistent counters (all
    processes), entries and bytes."""
    return get_context().cache_stats()


def cache_counters():
    """The default context's cache events since it was made."""
    return get_context().cache_counters()


def synchronize():
    """Waits for the current device's default queue."""
    get_device().synchronize()


__all__ = [
    "XpjitError", "InvalidArgumentError", "OutOfMemoryError", "NotFoundError",
    "KernelSyntaxError", "SpecializationError", "VerifyError", "CompileError",
    "UnsupportedError", "DeviceError", "CancelledError", "BoundsError",
    "Context", "Device", "Queue", "Event", "get_context", "set_context",
    "get_device", "devices", "ndarray", "empty", "zeros", "asarray",
    "from_dlpack", "from_cuda_array_interface",
    "from_sycl_usm_array_interface", "Program", "Kernel", "LocalMemory",
    "ElementwiseKernel",
    "ReductionKernel", "versions",
    "cache_stats", "cache_counters", "synchronize",
]
