"""saxpy on NumPy arrays: the kernel runs on the CPU device on NumPy's own
memory (no copies); dtypes and ndim come from the arrays.

    PYTHONPATH=python python3 examples/python/saxpy.py
"""
import numpy as np

import xpjit

prog = xpjit.Program("""
kernel saxpy<T>(a: T, x: global const T[*], y: global T[*]) range {
    let i = global_id(0);
    if i < size(y) {
        y[i] = a * x[i] + y[i];
    }
}
""", name="saxpy.xpk")

x = np.linspace(0, 1, 1_000_000, dtype=np.float32)
y = np.ones_like(x)
prog.saxpy(x.size, 2.0, x, y)                 # T=f32, ndim=1
assert np.allclose(y, 2 * x + 1)

# any rank and strides: a reversed 2-D view, f64 this time
m = np.arange(12.0).reshape(3, 4)
out = np.zeros((3, 4))[:, ::-1]
prog.saxpy(m.size, 0.5, m, out)               # T=f64, ndim=2
assert np.allclose(out, 0.5 * m)
print("saxpy ok on", xpjit.get_device())
