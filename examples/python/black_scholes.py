"""Black-Scholes option prices for a million options, one work-item each,
checked against NumPy.

    PYTHONPATH=python python3 examples/python/black_scholes.py [DEVICE]
"""
import math
import sys
import time

import numpy as np

import xpjit

prog = xpjit.Program("""
// the standard normal CDF through erf
fn cnd<T>(x: T) -> T {
    return T(0.5) * (T(1) + erf(x * T(0.7071067811865476)));
}

kernel black_scholes<T>(s: global const T[], k: global const T[],
                        t: global const T[], r: T, v: T,
                        call: global T[], put: global T[]) range {
    let i = global_id(0);
    if i >= shape(call, 0) { return; }
    let sqrt_t = sqrt(t[i]);
    let d1 = (log(s[i] / k[i]) + (r + T(0.5) * v * v) * t[i]) / (v * sqrt_t);
    let d2 = d1 - v * sqrt_t;
    let disc = k[i] * exp(-r * t[i]);
    call[i] = s[i] * cnd(d1) - disc * cnd(d2);
    put[i] = disc * cnd(-d2) - s[i] * cnd(-d1);
}
""", name="black_scholes.xpk")

dev = xpjit.Device(sys.argv[1] if len(sys.argv) > 1 else None)
n = 1_000_000
rng = np.random.default_rng(0)
s = rng.uniform(5, 30, n)
k = rng.uniform(1, 100, n)
t = rng.uniform(0.25, 10, n)
r, v = 0.02, 0.30

sd, kd, td = (xpjit.asarray(a, device=dev) for a in (s, k, t))
call = xpjit.empty(n, np.float64, device=dev)
put = xpjit.empty(n, np.float64, device=dev)
prog.black_scholes(n, sd, kd, td, r, v, call, put)   # compiles (or loads)
dev.synchronize()
t0 = time.perf_counter()
prog.black_scholes(n, sd, kd, td, r, v, call, put)
dev.synchronize()
t_x = time.perf_counter() - t0

# NumPy has no erf: math.erf over the array (slow; only the check)
erf = np.vectorize(math.erf)
sqrt_t = np.sqrt(t)
d1 = (np.log(s / k) + (r + 0.5 * v * v) * t) / (v * sqrt_t)
d2 = d1 - v * sqrt_t
cnd = lambda x: 0.5 * (1 + erf(x / math.sqrt(2)))  # noqa: E731
disc = k * np.exp(-r * t)
want_call = s * cnd(d1) - disc * cnd(d2)
want_put = disc * cnd(-d2) - s * cnd(-d1)

assert np.allclose(call.get(), want_call, rtol=1e-9, atol=1e-9)
assert np.allclose(put.get(), want_put, rtol=1e-9, atol=1e-9)
print("black-scholes ok on %s: %d options in %.1f ms" % (dev, n, t_x * 1e3))
