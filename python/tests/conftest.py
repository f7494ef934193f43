"""Fixtures: the devices the tests run on (the CPU device, and the OpenCL
device when one is visible: make test points OCL_ICD_VENDORS at Intel's
OpenCL CPU runtime; the CUDA device on a machine with one), and moving
NumPy arrays to and from them."""
import os

import numpy as np
import pytest

import xpjit

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CONFORMANCE = os.path.join(ROOT, "tests", "conformance")
EXAMPLES = os.path.join(ROOT, "examples")


def _device_ids():
    ids = ["cpu"]
    for backend in ("opencl", "cuda"):  # cuda: tests/gpu.sh's GPU machine
        if xpjit.get_context().devices(backend):
            ids.append(backend)
    return ids


@pytest.fixture(params=_device_ids())
def device(request):
    return xpjit.Device(request.param)


def on(dev, a):
    """a where dev's kernels can use it: NumPy as it is on the CPU
    device (zero copies), a copy in the device's memory elsewhere."""
    if dev.backend == "cpu":
        return a
    return xpjit.asarray(a, device=dev)


def back(x):
    """A NumPy array of x (after the work queued on its device)."""
    if isinstance(x, xpjit.ndarray):
        return x.get()
    return x


_programs = {}


def conformance(name):
    """The program tests/conformance/NAME (parsed once)."""
    p = _programs.get(name)
    if p is None:
        p = _programs[name] = xpjit.Program.from_file(
            os.path.join(CONFORMANCE, name))
    return p


def example(name):
    p = _programs.get("ex:" + name)
    if p is None:
        p = _programs["ex:" + name] = xpjit.Program.from_file(
            os.path.join(EXAMPLES, name))
    return p


def rand(shape, dtype, lo=-100, hi=100, seed=1):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.uniform(lo, hi, shape).astype(dt)
    if dt.kind == "u":
        lo = max(lo, 0)
    return rng.integers(lo, hi, shape, endpoint=False).astype(dt)
