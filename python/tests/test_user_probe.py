"""What an outside user coming from CuPy, dpctl/dpnp or PyOpenCL tried on
the package and got a silently wrong answer, a crash or an unclear error
from (each test failed before its fix): device arrays given to NumPy's
functions and operators, iterated, converted, copied and pickled; views
and their arguments; strings and numbers the C library takes; the
ElementwiseKernel's out= and its inputs; foreign interfaces."""
import copy
import operator
import os
import pickle
import sys

import numpy as np
import pytest

import xpjit

from conftest import on, back

HAS_OPENCL = bool(xpjit.devices("opencl"))


def _devices():
    return [xpjit.Device("cpu")] + xpjit.devices("opencl")


# ---- device arrays and NumPy -------------------------------------------------

def test_numpy_functions_and_operators_raise_never_answer():
    """np.array_equal(d, x) was False for a device array d holding x's
    values (NumPy caught the TypeError of its conversion and answered
    False), d == x False and d != x True (NumPy's failed elementwise
    comparison), `3.0 in d` False, d == d True (identity): every NumPy
    function, ufunc and operator is now the TypeError saying to use .get(),
    as np.asarray(d) was; np.shape, np.ndim, np.size and np.result_type
    read the attributes."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for dev in _devices():
        d = xpjit.asarray(x, device=dev)
        for f in (lambda: np.array_equal(d, x), lambda: np.array_equal(x, d),
                  lambda: np.array_equiv(d, x), lambda: np.allclose(d, x),
                  lambda: np.concatenate([x, d]), lambda: d == x,
                  lambda: x == d, lambda: d != x, lambda: x != d,
                  lambda: d == d, lambda: d < x, lambda: x >= d,
                  lambda: d + 1, lambda: 1 + d, lambda: x + d,
                  lambda: x * d, lambda: -d, lambda: abs(d),
                  lambda: np.float32(1) == d, lambda: x[0] < d,
                  lambda: 3.0 in d, lambda: np.sum(d)):
            with pytest.raises(TypeError, match="get"):
                f()
        for f in (lambda: np.add(x, d), lambda: np.sqrt(d),
                  lambda: np.equal(d, x)):
            with pytest.raises(TypeError, match="ufuncs"):  # NumPy's words
                f()
        y = x.copy()
        with pytest.raises(TypeError, match="ufuncs"):
            y += d
        assert np.array_equal(y, x)
        dd = d
        with pytest.raises(TypeError, match="get"):
            dd += 1
        with pytest.raises(TypeError, match="unhashable"):
            hash(d)
        assert np.shape(d) == (2, 3) and np.ndim(d) == 2
        assert np.size(d) == 6 and np.size(d, 1) == 3
        assert np.result_type(d, np.float64) == np.float64
        assert np.array_equal(d.get(), x)  # the way that works


def test_iteration_and_zero_d_arrays():
    """list() of a 0-d device array was [] (Python iterated by indexing
    until IndexError, which NumPy's indexing of a 0-d array raises); it is
    NumPy's TypeError now. A 2-d array iterates over its rows (views)."""
    for dev in _devices():
        d = xpjit.asarray(np.arange(6.0).reshape(2, 3), device=dev)
        rows = list(d)
        assert len(rows) == 2
        assert np.array_equal(rows[1].get(), [3.0, 4.0, 5.0])
        with pytest.raises(TypeError, match="0-d"):
            list(d[0, 0])
        with pytest.raises(TypeError, match="0-d"):
            iter(d[0, 0])


def test_one_element_conversions():
    """float(), int(), complex(), operator.index and format specs of a
    one-element device array, as bool() already was (and as NumPy and
    CuPy do): they were TypeErrors of Python's ("float() argument must be
    a string or a real number, not 'ndarray'", "unsupported format
    string")."""
    for dev in _devices():
        f = xpjit.asarray(np.array([2.5], np.float32), device=dev)
        i = xpjit.asarray(np.array(7, np.int64), device=dev)
        assert float(f) == 2.5 and int(f) == 2 and complex(f) == 2.5
        assert operator.index(i) == 7 and [0, 1, 2, 3, 4, 5, 6, 7][i] == 7
        assert "%.2f" % f[0] == "2.50" and f"{f[0]:.3f}" == "2.500"
        assert format(i, "04d") == "0007"
        with pytest.raises(TypeError, match="one element"):
            float(xpjit.zeros(3, device=dev))
        with pytest.raises(TypeError, match="0-d integer"):
            operator.index(f)
        assert "shape=(1,)" in "{}".format(f)  # an empty spec: repr's text


def test_copies_are_copies_and_pickles_carry_values():
    """copy.copy(d) was an object over the same memory (a write to it
    changed d; NumPy's and CuPy's copy); copy.deepcopy and pickle raised
    ctypes' "ctypes objects containing pointers cannot be pickled". Both
    copies are new memory now; a pickle carries the values and the
    device's id (loaded onto that device of the default context)."""
    for dev in _devices():
        x = np.arange(5, dtype=np.int16)
        d = xpjit.asarray(x, device=dev)
        for c in (copy.copy(d), copy.deepcopy(d),
                  pickle.loads(pickle.dumps(d)),
                  pickle.loads(pickle.dumps(d[::-2]))):
            assert isinstance(c, xpjit.ndarray) and c.ptr != d.ptr
            assert c.device == dev and c.dtype == d.dtype
            c.fill(9)
        assert np.array_equal(d.get(), x)
        back2 = pickle.loads(pickle.dumps(d[::-2]))
        assert np.array_equal(back2.get(), x[::-2])


def test_contiguity_is_numpys():
    """An axis of extent 1 (a[None], a[:, None], a (1, n) array's .T) made
    a contiguous array non-contiguous (its stride was compared too), so
    reshape, set and fill refused it; flags were a dict without NumPy's
    attributes (flags.c_contiguous was an AttributeError)."""
    for dev in _devices():
        a = xpjit.asarray(np.arange(3, dtype=np.float32), device=dev)
        assert np.array_equal(a[None].reshape(3).get(), [0, 1, 2])
        a[:, None].fill(4)
        a[None].set(np.ones((1, 3), np.float32))
        assert np.array_equal(a.get(), [1, 1, 1])
        t = xpjit.zeros((1, 3), device=dev).T
        assert t.flags.c_contiguous and t.flags["C_CONTIGUOUS"]
        assert t.reshape(3).shape == (3,)
        m = xpjit.zeros((2, 3), device=dev)
        assert m.flags.c_contiguous and not m.flags.f_contiguous
        assert m.T.flags.f_contiguous and not m.T.flags["C"]
        assert m.flags.writeable
        assert not m[:, ::2].flags.c_contiguous
        with pytest.raises(xpjit.InvalidArgumentError, match="contiguous"):
            m[:, ::2].fill(1)


def test_view_arguments():
    """reshape(2.5, 2) was reshape(2, 2) (int() truncated), reshape("a")
    a bare ValueError, reshape(-1, -1) "cannot reshape (2, 3) to (6, 6)",
    an empty array's reshape(-1, 0) gave (0, 0); transpose(-1, 0) was
    refused (NumPy counts negative axes from the end); a NumPy 0-d
    integer array was no index."""
    m = xpjit.asarray(np.arange(6.0).reshape(2, 3))
    for shape in ((2.5, 2), ("a",), (-1, -1), (-2, -3)):
        with pytest.raises(xpjit.InvalidArgumentError):
            m.reshape(*shape)
    with pytest.raises(xpjit.InvalidArgumentError, match="6 elements"):
        m.reshape(4, -1)
    with pytest.raises(xpjit.InvalidArgumentError, match="0 elements"):
        xpjit.zeros((0, 3)).reshape(-1, 0)
    assert m.reshape(np.int64(3), -1).shape == (3, 2)
    assert m.transpose(-1, 0).shape == (3, 2)
    assert m.transpose((1, -2)).shape == (3, 2)
    assert m.transpose(None).shape == (3, 2)
    for axes in ((0, 0), (0, 2), ("a",), (0.0, 1)):
        with pytest.raises(xpjit.InvalidArgumentError, match="permute"):
            m.transpose(*axes)
    assert np.array_equal(m[np.array(1)].get(), [3.0, 4.0, 5.0])
    with pytest.raises(xpjit.InvalidArgumentError, match="basic"):
        m[np.array(True)]


# ---- strings and numbers for the C library -----------------------------------

def test_strings_with_nul_or_of_other_types():
    """A NUL ended C's string early: devices("cpu\\0opencl") listed the CPU
    device, get_binary("k", "cpu\\0...") built for the CPU, kernel("k\\0x")
    found k; bytes or an int as a filter was an AttributeError of
    .encode(); backend_note("gpu") a bare ValueError of list.index;
    add_bundle(b"/x") opened the file "b'/x'"."""
    p = xpjit.Program("kernel k(x: global f32[]) range {}")
    ctx = xpjit.get_context()
    for f in (lambda: xpjit.devices("cpu\0opencl"),
              lambda: xpjit.Device("cpu\0x"), lambda: xpjit.Device(b"cpu"),
              lambda: xpjit.devices(3), lambda: xpjit.Queue("cpu\0"),
              lambda: xpjit.Context(visible="cpu\0x", cache="off"),
              lambda: xpjit.Context(visible=b"cpu", cache="off"),
              lambda: xpjit.Context(redis="\0", cache="off"),
              lambda: xpjit.Context(cache_path="/tmp/a\0b", cache="off"),
              lambda: xpjit.Context(daemon=3, cache="off"),
              lambda: xpjit.Program("", name="a\0b"),
              lambda: xpjit.Program("", name=b"a"),
              lambda: xpjit.Program.from_file("/tmp/x\0.xpk"),
              lambda: xpjit.Program.from_file(3),
              lambda: p.kernel("k\0x"), lambda: p.kernel(None),
              lambda: p.get_binary("k", "cpu\0spirv"),
              lambda: ctx.backend_note("gpu"),
              lambda: ctx.add_bundle("/tmp/b\0"),
              lambda: ctx.add_bundle(3)):
        with pytest.raises(xpjit.InvalidArgumentError):
            f()
    with pytest.raises(OSError) as e:
        ctx.add_bundle(b"/nonexistent/bundle.xpkb")
    assert "/nonexistent/bundle.xpkb" in str(e.value)
    assert "b'" not in str(e.value)
    assert ctx.backend_note("cpu") == ""


@pytest.mark.skipif(sys.platform != "linux" or sys.getfilesystemencoding()
                    != "utf-8", reason="file names are bytes on Linux")
def test_from_file_of_a_name_that_is_not_utf8(tmp_path):
    """Program.from_file of a file named b"k\\xff.xpk" (as os.listdir gives
    it, a str with a surrogate, or as bytes) was a UnicodeEncodeError:
    the path is encoded as Python's open() encodes it now, and the
    diagnostics' file names decoded so too (a UnicodeDecodeError)."""
    d = os.fsencode(str(tmp_path))
    good, bad = d + b"/k\xff.xpk", d + b"/bad\xfe.xpk"
    with open(good, "wb") as f:
        f.write(b"kernel k(x: global f32[]) range { x[global_id(0)] = 2.0; }")
    with open(bad, "wb") as f:
        f.write(b"kernel k(x: global f32[]) range { nonsense }")
    for path in (good, os.fsdecode(good)):
        p = xpjit.Program.from_file(path)
        x = np.zeros(3, np.float32)
        p.k(3, x)
        assert (x == 2).all() and p.name == os.fsdecode(good)
    with pytest.raises(xpjit.KernelSyntaxError) as e:
        xpjit.Program.from_file(os.fsdecode(bad))
    assert e.value.diagnostics[0][0] == os.fsdecode(bad)


def test_numbers_of_the_context_and_kernels():
    """cpu_threads=-1 became 4294967295 threads (then 1024) and 2**32 + 1
    one thread, cache_max_size=-1 no limit, "4" and "1G" went through
    int(); specialize(ndim=-1) said "given 4294967295", ndim="x" was a
    bare ValueError; dtypes=3 a TypeError of list(); options=3 too."""
    for kw in ({"cpu_threads": -1}, {"cpu_threads": 2 ** 32 + 1},
               {"cpu_threads": "4"}, {"cpu_threads": 1.0},
               {"cache_max_size": -1}, {"cache_max_size": "1G"}):
        with pytest.raises(xpjit.InvalidArgumentError):
            xpjit.Context(cache="off", **kw)
    assert xpjit.Context(cache="off", cpu_threads=2, cache_max_size=1 << 40)
    p = xpjit.Program("kernel k<T>(x: global T[*]) range {}")
    with pytest.raises(xpjit.InvalidArgumentError, match="-1"):
        p.k.specialize("f32", -1)
    with pytest.raises(xpjit.InvalidArgumentError, match="ndim"):
        p.k.specialize("f32", "x")
    with pytest.raises(xpjit.InvalidArgumentError, match="ndim -1"):
        p.k(1, np.zeros(1, np.float32), ndim=-1)
    with pytest.raises(xpjit.SpecializationError, match="dtypes"):
        p.k(1, np.zeros(1, np.float32), dtypes=3)
    with pytest.raises(xpjit.InvalidArgumentError, match="options"):
        xpjit.Program("kernel k(x: global f32[]) range {}", options=3)


def test_device_and_queue_given_as_other_things():
    """device="cpu" (a filter, as Queue and dpctl take it) was an
    AttributeError of str in empty, zeros and asarray; queue="x" in get()
    an AttributeError; asarray(x, device=A, queue=<queue of B>) put it on
    B silently."""
    e = xpjit.empty(3, device="cpu")
    assert e.device == xpjit.Device("cpu")
    assert xpjit.zeros(2, device="cpu").get().tolist() == [0.0, 0.0]
    assert xpjit.asarray([1.0], device="cpu").device.backend == "cpu"
    with pytest.raises(xpjit.InvalidArgumentError, match="device="):
        xpjit.empty(3, device=3)
    with pytest.raises(xpjit.InvalidArgumentError, match="queue="):
        e.get(queue="cpu")
    if HAS_OPENCL:
        ocl = xpjit.Device("opencl")
        assert xpjit.asarray([1.0], device="opencl").device == ocl
        with pytest.raises(xpjit.InvalidArgumentError, match="differ"):
            xpjit.asarray([1.0], device="cpu", queue=ocl.queue)


# ---- ElementwiseKernel, ReductionKernel ---------------------------------------

def test_elementwise_out_keyword(device):
    """add(a, b, out=z) with one array was NumPy's "truth value of an
    array ... is ambiguous" (`out or ()`), and a one-element device array
    holding 0 was taken for no output at all: the results went to a new
    array, z was left as it was."""
    add = xpjit.ElementwiseKernel("T x, T y", "T z", "z = x + y;", "add_o")
    a = on(device, np.arange(6, dtype=np.float32))
    z = on(device, np.zeros(6, np.float32))
    assert add(a, a, out=z) is z
    assert np.array_equal(back(z), 2 * np.arange(6))
    one = xpjit.zeros(1, np.float32, device=device)
    assert add(on(device, np.ones(1, np.float32)), 2.0, out=one) is one
    assert back(one).tolist() == [3.0]
    assert add(a, a, out=(z,)) is z and add(a, a, out=[z]) is z
    with pytest.raises(xpjit.InvalidArgumentError, match="twice"):
        add(a, a, z, out=z)
    s = xpjit.ReductionKernel("T x", "T y", "x", "a + b", "y = a;", "0",
                              "sum_o")
    r = xpjit.zeros((), np.float32, device=device)
    assert s(a, out=r) is r and float(back(r)) == 15.0
    with pytest.raises(xpjit.InvalidArgumentError, match="outputs"):
        s(a, out=(r, r))


def test_elementwise_inputs_are_numbers():
    """add(a, None) was NaN everywhere and add(a, "1") a + 1 (np.asarray
    made them numbers), silently: an input is an array or a number."""
    add = xpjit.ElementwiseKernel("T x, T y", "T z", "z = x + y;", "add_n")
    cast = xpjit.ElementwiseKernel("float32 x", "float32 z", "z = x;", "c_n")
    s = xpjit.ReductionKernel("float32 x", "float32 y", "x", "a + b",
                              "y = a;", "0", "sum_n")
    a = np.arange(3, dtype=np.float32)
    for f in (lambda: add(a, None), lambda: add(a, "1"),
              lambda: add(a, b"1"), lambda: add(a, [None, 1, 2]),
              lambda: cast("2"), lambda: cast([{}]), lambda: s("123"),
              lambda: s(None)):
        with pytest.raises(xpjit.InvalidArgumentError, match="number"):
            f()
    with pytest.raises(xpjit.InvalidArgumentError, match="no array"):
        cast(None)  # None is no argument (as a missing output)
    assert np.array_equal(cast([1, 2]), [1, 2])  # lists of numbers still
    assert float(s([1.5, 2.5])) == 4.0


def test_kernel_source_pieces_are_strings():
    """None or bytes as an operation, preamble or expression was an
    AttributeError or a TypeError of str's methods at the call, or None
    landed in the source as the name None; reduce_type="garbage" was a
    bare ValueError."""
    for f in (lambda: xpjit.ElementwiseKernel("T x", "T z", None),
              lambda: xpjit.ElementwiseKernel("T x", "T z", b"z = x;"),
              lambda: xpjit.ElementwiseKernel("T x", "T z", "z = x;", "k",
                                              preamble=None),
              lambda: xpjit.ReductionKernel("T x", "T y", None, "a + b",
                                            "y = a;", "0"),
              lambda: xpjit.ReductionKernel("T x", "T y", "x", 3, "y = a;",
                                            "0"),
              lambda: xpjit.ReductionKernel("T x", "T y", "x", "a + b",
                                            "y = a;", None),
              lambda: xpjit.ReductionKernel("T x", "T y", "x", "a + b",
                                            "y = a;", "0",
                                            reduce_type="garbage")):
        with pytest.raises(xpjit.InvalidArgumentError):
            f()
    s = xpjit.ReductionKernel("T x", "T y", "x", "a + b", "y = a;", 0, "s0")
    assert float(s(np.ones(4))) == 4.0  # an identity may be a number


def test_reductions_over_empty_axes_of_temporary_arrays(device):
    """A launch taking an empty view of device memory freed right after
    (a temporary) crashed Intel's OpenCL runtime in clEnqueueNDRangeKernel
    within a few hundred calls: the library held no allocation for an
    empty view (runtime/launch.c; test_lifetime
    test_free_during_launch_empty_view is the deterministic test)."""
    s = xpjit.ReductionKernel("T x", "T y", "x", "a + b", "y = a;", "0",
                              "sum_e")
    for _ in range(300):
        r = s(xpjit.empty((0, 3), np.float32, device=device), axis=0)
        assert back(r).tolist() == [0.0, 0.0, 0.0]
    assert back(s(xpjit.empty(0, np.float32, device=device))) == 0


# ---- foreign interfaces -----------------------------------------------------

def test_cuda_array_interface_null_or_malformed_data():
    """A __cuda_array_interface__ of 3 elements at address 0 gave a new,
    uninitialised array (taken for an empty one); a str address a
    TypeError of str's +."""
    cpu = xpjit.Device("cpu")

    class CAI:
        def __init__(self, data, shape=(3,)):
            self.__cuda_array_interface__ = {
                "data": (data, False), "shape": shape, "typestr": "<f4",
                "version": 3}
    with pytest.raises(xpjit.InvalidArgumentError, match="NULL"):
        xpjit.from_cuda_array_interface(CAI(0), device=cpu)
    for bad in ("x", None, -8, 1.5, True):
        with pytest.raises(xpjit.InvalidArgumentError, match="malformed"):
            xpjit.from_cuda_array_interface(CAI(bad), device=cpu)
    e = xpjit.from_cuda_array_interface(CAI(0, (0, 3)), device=cpu)
    assert e.shape == (0, 3)  # an empty one may have no memory
    x = np.arange(3, dtype=np.float32)
    v = xpjit.from_cuda_array_interface(CAI(x.ctypes.data), device=cpu)
    assert v.ptr == x.ctypes.data and np.array_equal(v.get(), x)


def test_elementwise_and_reduction_in_a_context_of_ones_own():
    """ElementwiseKernel and ReductionKernel compiled their programs in the
    default context, so arrays of a Context made by the user were refused
    ("xpj_program_get_kernel: the device is not of the program's
    context"); and such an array on the default context's queue of the
    same device id read "device memory of opencl:0, which the queue's
    device opencl:0 cannot use"."""
    ctx = xpjit.Context(cache="off")
    add = xpjit.ElementwiseKernel("T x, T y", "T z", "z = x + y;", "add_c")
    s = xpjit.ReductionKernel("T x", "T y", "x", "a + b", "y = a;", "0",
                              "sum_c")
    for name in ["cpu"] + (["opencl"] if HAS_OPENCL else []):
        dev = ctx.device(name)
        a = xpjit.asarray(np.arange(4, dtype=np.float32), device=dev)
        z = add(a, a)
        assert z.device == dev and np.array_equal(z.get(), [0, 2, 4, 6])
        assert float(s(a).get()) == 6.0
        z = add(np.ones(2, np.float32), 1.0, queue=dev.queue)
        assert np.array_equal(back(z), [2, 2])
        assert np.array_equal(add(np.ones(2), 1.0), [2, 2])  # the default
    if HAS_OPENCL:
        a = xpjit.asarray(np.ones(2, np.float32), device=ctx.device("opencl"))
        p = xpjit.Program("kernel k(x: global f32[]) range {}")
        with pytest.raises(xpjit.InvalidArgumentError,
                           match="another context"):
            p.k(2, a, queue=xpjit.Device("opencl").queue)


def test_elementwise_numpy_inputs_with_a_queue_of_another_device(device):
    """add(np_a, 1.0, queue=<an OpenCL queue>) and a reduction so left the
    NumPy inputs on the host and made the outputs there (the device was
    the current one, not the queue's): the launch said "data 0x... is not
    memory of opencl:0". The inputs are copied to the queue's device now
    and the outputs made there; a NumPy output is refused by name."""
    add = xpjit.ElementwiseKernel("T x, T y", "T z", "z = x + y;", "add_q")
    s = xpjit.ReductionKernel("T x", "T y", "x", "a + b", "y = a;", "0",
                              "sum_q")
    x = np.arange(4, dtype=np.float32)
    z = add(x, 1.0, queue=device.queue)
    assert np.array_equal(back(z), x + 1)
    assert float(back(s(x, queue=device.queue))) == 6.0
    if device.backend != "cpu":
        assert isinstance(z, xpjit.ndarray) and z.device == device
        with pytest.raises(xpjit.InvalidArgumentError, match="NumPy array"):
            add(x, 1.0, np.zeros(4, np.float32), queue=device.queue)


def test_program_of_its_own_context_on_numpy_arrays():
    """A Program of a Context of its own launched on NumPy arrays without
    queue= went to the default context's device: "xpj_program_get_kernel:
    the device is not of the program's context". It runs on its context's
    default device now (the current device when that is of its context)."""
    ctx = xpjit.Context("cpu", cache="off")
    prog = xpjit.Program(
        "kernel axpy<T>(a: T, x: global const T[], y: global T[]) range {\n"
        "    let i = global_id(0);\n"
        "    y[i] = a * x[i] + y[i];\n"
        "}\n", context=ctx)
    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, dtype=np.float32)
    prog.axpy(8, np.float32(2), x, y)
    assert np.array_equal(y, 2 * x + 1)
    prog.axpy[8, None](np.float32(1), x, y)  # and again, the C fast path
    assert np.array_equal(y, 3 * x + 1)
