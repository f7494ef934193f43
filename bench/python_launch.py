#!/usr/bin/env python3
"""bench/python_launch.py - what a kernel launch costs from Python: the
same cached kernel (y = a * x + y on 1,000 f32 elements) launched and
waited for, from C (build/bench/launch), from the xpjit package, and from
PyOpenCL (the peer: a CuPy-style kernel call on the same OpenCL device),
in alternating rounds; medians in microseconds and their ratios.

    python3 bench/python_launch.py [--build build] [--n 2000] [--rounds 5]

Devices: the CPU device (NumPy arrays, zero copies), and the OpenCL device
when one is visible (OCL_ICD_VENDORS: Intel's OpenCL CPU runtime), where
PyOpenCL runs too. Run with a Python that has NumPy (and PyOpenCL for the
peer: tools/bench-deps.sh makes ~/.cache/xpjit/venv-bench)."""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SRC = """
kernel axpy<T>(a: T, x: global const T[*], y: global T[*]) range {
    let i = global_id(0);
    if i < size(y) { y[i] += a * x[i]; }
}
"""
OCL_SRC = """
__kernel void axpy(float a, __global const float *x, __global float *y) {
    size_t i = get_global_id(0);
    if (i < 1000) y[i] += a * x[i];
}
"""
E = 1000


def per_call(fn, n):
    t = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        t.append(time.perf_counter_ns() - t0)
    return statistics.median(t) / 1e3


def c_round(build, filt, n):
    out = subprocess.run([os.path.join(build, "bench", "launch"), filt,
                          str(n), "1"], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr.strip())
    return float(out.stdout.split()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    os.environ.setdefault("XPJIT_LIBRARY",
                          os.path.join(build, "lib", "libxpjit.so"))
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import numpy as np
    import xpjit
    try:
        import pyopencl as cl
    except ImportError:
        cl = None
    prog = xpjit.Program(SRC, name="axpy")
    k = prog.kernel("axpy")
    a32 = np.float32(2)
    rows = []
    devices = ["cpu"] + (["opencl"] if xpjit.devices("opencl") else [])
    for filt in devices:
        dev = xpjit.Device(filt)
        q = dev.queue
        if filt == "cpu":
            x = np.zeros(E, np.float32)
            y = np.zeros(E, np.float32)

            def py_call():
                k(E, a32, x, y)  # NumPy arrays: returns when done
        else:
            x = xpjit.zeros(E, np.float32, device=dev)
            y = xpjit.zeros(E, np.float32, device=dev)

            def py_call():
                k(E, a32, x, y, queue=q)
                q.wait()
        py_call()  # compiles or loads it
        peer = None
        if filt == "opencl" and cl is not None:
            plat = next(p for p in cl.get_platforms()
                        if "Intel" in p.name)
            cctx = cl.Context(plat.get_devices())
            cq = cl.CommandQueue(cctx)
            ck = cl.Program(cctx, OCL_SRC).build().axpy
            mf = cl.mem_flags
            bx = cl.Buffer(cctx, mf.READ_WRITE, 4 * E)
            by = cl.Buffer(cctx, mf.READ_WRITE, 4 * E)

            def peer():
                ck(cq, (E,), None, a32, bx, by)
                cq.finish()
            peer()
        res = {"c": [], "py": [], "peer": []}
        for _ in range(a.rounds):
            res["c"].append(c_round(build, filt, a.n))
            res["py"].append(per_call(py_call, a.n))
            if peer:
                res["peer"].append(per_call(peer, a.n))
        rows.append((filt, {k2: statistics.median(v) if v else None
                            for k2, v in res.items()}, res))
    print("launch + wait of a cached kernel on %d f32 elements, us per call "
          "(median of %d rounds of %d)" % (E, a.rounds, a.n))
    print("%-8s %10s %10s %10s %12s %14s" % ("device", "C", "Python",
                                              "PyOpenCL", "Python / C",
                                              "PyOpenCL / Py"))
    for filt, m, res in rows:
        print("%-8s %10.2f %10.2f %10s %11.2fx %14s" % (
            filt, m["c"], m["py"],
            "%.2f" % m["peer"] if m["peer"] else "n/a", m["py"] / m["c"],
            "%.2fx" % (m["peer"] / m["py"]) if m["peer"] else "n/a"))
        print("         rounds: C %s; Python %s%s" % (
            " ".join("%.2f" % v for v in res["c"]),
            " ".join("%.2f" % v for v in res["py"]),
            "; PyOpenCL " + " ".join("%.2f" % v for v in res["peer"])
            if res["peer"] else ""))


if __name__ == "__main__":
    main()
