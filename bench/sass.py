#!/usr/bin/env python3
"""bench/sass.py - what ptxas makes of xpjit's PTX and of NVRTC's.

usage: bench/sass.py DIR [--ptxas PATH] [--arch sm_90] [--against DIR2]

DIR is what `build/bench/compile --save-ptx DIR` wrote: DIR/xpjit/*.ptx
and DIR/nvrtc/*.ptx, one file per kernel. Each is assembled with
`ptxas -O3 -v -arch ARCH` (no GPU needed) and measured: registers per
thread, spill stores, and SASS instructions (the size of the kernel's
.text section over 16 bytes: one sm_70+ instruction, padding included).
A static measure of the code a GPU would run, not a substitute for
running it: fewer instructions or registers is usually, not always,
faster.

--against DIR2: compare DIR/xpjit with DIR2/xpjit instead (two builds or
pipelines of xpjit, e.g. before and after a change).

Prints one line per kernel and the totals; exit status 1 when ptxas
rejects a file.
"""
import argparse
import math
import os
import re
import struct
import subprocess
import sys
import tempfile


def measure(ptxas, arch, path, tmp):
    cubin = os.path.join(tmp, "k.cubin")
    r = subprocess.run([ptxas, "-O3", "-v", "-arch", arch, "-o", cubin, path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    regs = re.search(r"Used (\d+) registers", r.stderr)
    spill = re.search(r"(\d+) bytes spill stores", r.stderr)
    return {
        "regs": int(regs.group(1)) if regs else 0,
        "spill": int(spill.group(1)) if spill else 0,
        "instrs": text_bytes(cubin) // 16,
    }, ""


def text_bytes(cubin):
    """Sum of the sizes of the ELF sections named .text.* (64-bit ELF)."""
    with open(cubin, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return 0
    end = "<" if data[5] == 1 else ">"
    shoff = struct.unpack_from(end + "Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)
    def section(i):
        return struct.unpack_from(end + "IIQQQQIIQQ", data, shoff + i * shentsize)
    strtab = section(shstrndx)
    total = 0
    for i in range(shnum):
        name_off, _, _, _, _, size = section(i)[:6]
        start = strtab[4] + name_off
        name = data[start:data.index(b"\0", start)].decode("ascii", "replace")
        if name.startswith(".text."):
            total += size
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--ptxas", default=os.path.join(
        os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ptxas"))
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--against")
    a = ap.parse_args()
    left = os.path.join(a.dir, "xpjit")
    right = os.path.join(a.against, "xpjit") if a.against else os.path.join(a.dir, "nvrtc")
    names = ("xpjit", "xpjit'" if a.against else "nvrtc")
    if not os.path.isdir(left) or not os.path.isdir(right):
        sys.exit("%s: no %s or %s (run build/bench/compile --save-ptx %s)"
                 % (sys.argv[0], left, right, a.dir))
    if not os.access(a.ptxas, os.X_OK):
        sys.exit("%s: no ptxas at %s (--ptxas PATH)" % (sys.argv[0], a.ptxas))
    kernels = sorted(set(os.listdir(left)) & set(os.listdir(right)))
    print("%-44s %12s %12s   %s" % ("kernel (%s)" % a.arch,
          "%s i/r/s" % names[0], "%s i/r/s" % names[1], "instructions"))
    sums = [[0, 0, 0], [0, 0, 0]]
    bad = 0
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in kernels:
            if not k.endswith(".ptx"):
                continue
            got = []
            for d in (left, right):
                m, err = measure(a.ptxas, a.arch, os.path.join(d, k), tmp)
                if m is None:
                    print("%s/%s: ptxas failed: %s" % (d, k, err[:300]))
                    bad += 1
                got.append(m)
            if None in got:
                continue
            if not got[0]["instrs"] or not got[1]["instrs"]:
                print("%s: no .text section measured; left out" % k)
                bad += 1
                continue
            for i, m in enumerate(got):
                sums[i][0] += m["instrs"]
                sums[i][1] += m["regs"]
                sums[i][2] += m["spill"]
            ratios.append(got[0]["instrs"] / got[1]["instrs"])
            print("%-44s %12s %12s   %.2fx" % (
                k[:-4], "%d/%d/%d" % (got[0]["instrs"], got[0]["regs"], got[0]["spill"]),
                "%d/%d/%d" % (got[1]["instrs"], got[1]["regs"], got[1]["spill"]),
                ratios[-1]))
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print("%d kernels; instructions %d vs %d (%s / %s %.3f, geomean %.3f); "
              "registers %d vs %d; spill bytes %d vs %d"
              % (len(ratios), sums[0][0], sums[1][0], names[0], names[1],
                 sums[0][0] / max(sums[1][0], 1), geo, sums[0][1], sums[1][1],
                 sums[0][2], sums[1][2]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
