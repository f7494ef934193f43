"""A 2-D five-point stencil on a device array, iterated: the data stays on
the device between launches (asynchronous), .get() copies the result.

    PYTHONPATH=python python3 examples/python/stencil2d.py [DEVICE]
"""
import sys

import numpy as np

import xpjit

prog = xpjit.Program("""
kernel jacobi<T>(u: global const T[,], out: global T[,]) range(2) {
    let i = global_id(0);
    let j = global_id(1);
    let ny = shape(u, 0);
    let nx = shape(u, 1);
    if i >= ny || j >= nx { return; }
    if i == 0 || j == 0 || i == ny - 1 || j == nx - 1 {
        out[i, j] = u[i, j];
        return;
    }
    out[i, j] = T(0.25) * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]);
}
""", name="jacobi.xpk")

dev = xpjit.Device(sys.argv[1] if len(sys.argv) > 1 else None)
n = 256
u0 = np.zeros((n, n), np.float32)
u0[0, :] = 1.0                                # a hot edge
a = xpjit.asarray(u0, device=dev)
b = xpjit.zeros((n, n), np.float32, device=dev)
for _ in range(100):
    prog.jacobi((n, n), a, b)
    a, b = b, a
result = a.get()                              # waits for the launches

ref = u0.copy()
for _ in range(100):
    nxt = ref.copy()
    nxt[1:-1, 1:-1] = 0.25 * (ref[:-2, 1:-1] + ref[2:, 1:-1] +
                              ref[1:-1, :-2] + ref[1:-1, 2:])
    ref = nxt
assert np.allclose(result, ref, atol=1e-6)
print("stencil ok on", dev, "- heat 10 cells in:", result[10, n // 2])
