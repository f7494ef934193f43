"""CuPy-style ElementwiseKernel and ReductionKernel: the operation written in
xpjit's kernel language, parameters with type placeholders, broadcasting,
reductions over any axes.

    PYTHONPATH=python python3 examples/python/elementwise_reduction.py
"""
import numpy as np

import xpjit

# z = (x - y)^2, T inferred from the arrays; y broadcasts against x
squared_diff = xpjit.ElementwiseKernel(
    "T x, T y", "T z", "z = (x - y) * (x - y);", "squared_diff")
x = np.arange(12, dtype=np.float32).reshape(3, 4)
y = np.array([1, 2, 3, 4], np.float32)
assert np.array_equal(squared_diff(x, y), (x - y) ** 2)

# the L2 norm of each row, as in CuPy's documentation
l2norm = xpjit.ReductionKernel(
    "T x",            # inputs
    "T y",            # output
    "x * x",          # map
    "a + b",          # reduce
    "y = sqrt(a);",   # post-reduction map
    "0",              # identity
    "l2norm")
assert np.allclose(l2norm(x, axis=1), np.sqrt((x * x).sum(axis=1)))
assert np.allclose(l2norm(x), np.sqrt((x * x).sum()))

# a count with a concrete output type
count_pos = xpjit.ReductionKernel(
    "T x", "int64 n", "x > T(5) ? 1 : 0", "a + b", "n = a;", "0",
    "count_pos", reduce_type="int64")
assert int(count_pos(x)) == int((x > 5).sum())
print(squared_diff.source(x, y))
print("elementwise and reduction ok")
