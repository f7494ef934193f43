#!/usr/bin/env python3
"""bench/ptx_quality.py - the machine code of xpjit's PTX against NVRTC's,
kernel by kernel, with no GPU (issue 22).

usage: bench/ptx_quality.py DIR [--ptxas PATH] [--nvdisasm PATH]
                            [--arch sm_90] [--kernel SUBSTRING]

DIR is what `build/bench/compile --save-ptx DIR` wrote: DIR/xpjit/*.ptx,
DIR/nvrtc/*.ptx (NVRTC with --fmad=false: no contraction, as xpjit) and
DIR/nvrtc-fmad/*.ptx (NVRTC's default, --fmad=true). Each file is
assembled with `ptxas -O3 -v -arch ARCH` and disassembled with nvdisasm
(NVIDIA's wheel nvidia-cuda-nvdisasm from PyPI; tools/bench-deps.sh
installs it into ~/.cache/xpjit/venv-bench). Per kernel and compiler:

  i    SASS instructions (the .text section over 16 bytes)
  r/s  registers per thread / spill-store bytes
  sm   static shared memory, bytes
  L    innermost loops (a backward branch whose range holds no other;
       not the branch to itself that ends every kernel)
  li   instructions in the innermost loops, summed
  ld   global loads (LDG) in flight per iteration: in each innermost loop
       with loads, how many are issued before the first instruction that
       reads a register one of them writes; the largest over the loops
       (an unrolled main loop's, not its remainder's)

The goal (issue 22): no kernel with more innermost-loop instructions than
NVRTC at matching contraction (--fmad=false), none with fewer loads in
flight. Kernels that miss it are marked and counted at the end. A static
measure of the code, not a run: fewer instructions is usually, not
always, faster.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sass import text_bytes  # noqa: E402

INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z0-9_.]+)"
                  r"\s*(.*?)\s*;")
LABEL = re.compile(r"^(\.L_x_\d+):")
TARGET = re.compile(r"`\((\.L_x_\d+)\)")
REG = re.compile(r"\bR(\d+)\b")


def find_nvdisasm():
    for c in ([os.environ.get("NVDISASM")] +
              glob.glob(os.path.expanduser(
                  "~/.cache/xpjit/venv-bench/lib/python3*/site-packages/"
                  "nvidia/*/bin/nvdisasm")) +
              [os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"),
                            "bin", "nvdisasm")]):
        if c and os.access(c, os.X_OK):
            return c
    return None


def parse_sass(text):
    """[(addr, opcode, operands)] in order and {label: addr}."""
    insns, labels, pending = [], {}, []
    for line in text.splitlines():
        m = LABEL.match(line.strip())
        if m:
            pending.append(m.group(1))
            continue
        m = INSN.search(line)
        if not m:
            continue
        addr = int(m.group(1), 16)
        for lab in pending:
            labels[lab] = addr
        pending = []
        insns.append((addr, m.group(3), m.group(4)))
    return insns, labels


def loops(insns, labels):
    """Innermost loops as (first, last) instruction indices; not the
    branch to itself that ends every kernel (the SASS trailer)."""
    index = {a: i for i, (a, _, _) in enumerate(insns)}
    found = []
    for i, (addr, op, ops) in enumerate(insns):
        if not op.startswith("BRA"):
            continue
        t = TARGET.search(ops)
        if t and t.group(1) in labels and labels[t.group(1)] < addr:
            found.append((index[labels[t.group(1)]], i))
    return [(s, e) for (s, e) in found
            if not any((s2, e2) != (s, e) and s <= s2 and e2 <= e
                       for (s2, e2) in found)]


def written(op, ops):
    """Registers an LDG writes (its first operand and the next ones for
    .64/.128)."""
    first = ops.split(",")[0]
    m = REG.search(first)
    if not m:
        return set()
    width = 4 if ".128" in op else 2 if ".64" in op else 1
    return {int(m.group(1)) + k for k in range(width)}


def in_flight(insns, s, e):
    """LDGs issued before the first read of a register one of them wrote;
    None when the loop has no LDG."""
    pending, n, any_ldg = set(), 0, False
    for addr, op, ops in insns[s:e + 1]:
        regs = {int(r) for r in REG.findall(ops)}
        if op.startswith("LDG"):
            any_ldg = True
            addr_regs = regs - written(op, ops)
            if addr_regs & pending:
                break
            pending |= written(op, ops)
            n += 1
        elif regs & pending:
            break
    return n if any_ldg else None


def measure(ptxas, nvdisasm, arch, path, tmp):
    cubin = os.path.join(tmp, "k.cubin")
    r = subprocess.run([ptxas, "-O3", "-v", "-arch", arch, "-o", cubin, path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    get = lambda pat: int(m.group(1)) if (m := re.search(pat, r.stderr)) else 0
    d = subprocess.run([nvdisasm, "-c", cubin], capture_output=True,
                       text=True)
    if d.returncode != 0:
        return None, "nvdisasm: " + d.stderr.strip()
    insns, labels = parse_sass(d.stdout)
    inner = loops(insns, labels)
    flights = [f for f in (in_flight(insns, s, e) for s, e in inner)
               if f is not None]
    return {
        "i": text_bytes(cubin) // 16,
        "r": get(r"Used (\d+) registers"),
        "s": get(r"(\d+) bytes spill stores"),
        "sm": get(r"(\d+) bytes smem"),
        "L": len(inner),
        "li": sum(e - s + 1 for s, e in inner),
        "ld": max(flights) if flights else None,
    }, ""


def cell(m):
    if m is None:
        return "-"
    ld = "-" if m["ld"] is None else str(m["ld"])
    return "%d %d/%d %d %d:%d %s" % (m["i"], m["r"], m["s"], m["sm"], m["L"],
                                      m["li"], ld)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--ptxas", default=os.path.join(
        os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ptxas"))
    ap.add_argument("--nvdisasm", default=None)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--kernel", default="")
    a = ap.parse_args()
    nvdisasm = a.nvdisasm or find_nvdisasm()
    if not nvdisasm:
        sys.exit("%s: no nvdisasm (sh tools/bench-deps.sh installs NVIDIA's "
                 "wheel; or --nvdisasm PATH)" % sys.argv[0])
    if not os.access(a.ptxas, os.X_OK):
        sys.exit("%s: no ptxas at %s (--ptxas PATH)" % (sys.argv[0], a.ptxas))
    who = ["xpjit", "nvrtc", "nvrtc-fmad"]
    dirs = [os.path.join(a.dir, w) for w in who]
    if not os.path.isdir(dirs[0]) or not os.path.isdir(dirs[1]):
        sys.exit("%s: no %s or %s (run build/bench/compile --save-ptx %s)"
                 % (sys.argv[0], dirs[0], dirs[1], a.dir))
    kernels = sorted(k for k in set(os.listdir(dirs[0])) &
                     set(os.listdir(dirs[1]))
                     if k.endswith(".ptx") and a.kernel in k)
    print("per compiler: i r/s sm L:li ld (see --help); ! marks a kernel "
          "that misses the goal against nvrtc (--fmad=false)")
    print("%-36s %-24s %-24s %-24s" % ("kernel (%s)" % a.arch, *who))
    more_li, fewer_ld, bad, n = [], [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for k in kernels:
            got = []
            for d in dirs:
                path = os.path.join(d, k)
                if not os.path.exists(path):
                    got.append(None)
                    continue
                m, err = measure(a.ptxas, nvdisasm, a.arch, path, tmp)
                if m is None:
                    print("%s: %s" % (path, err[:300]))
                    bad += 1
                got.append(m)
            x, v = got[0], got[1]
            if x is None or v is None:
                continue
            n += 1
            miss = ""
            if x["li"] > v["li"]:
                more_li.append(k[:-4])
                miss += "!li"
            if v["ld"] is not None and (x["ld"] or 0) < v["ld"]:
                fewer_ld.append(k[:-4])
                miss += "!ld"
            print("%-36s %-24s %-24s %-24s %s" % (k[:-4][:36], cell(x),
                                                  cell(v), cell(got[2]),
                                                  miss))
    print("%d kernels; more innermost-loop instructions than nvrtc: %d%s; "
          "fewer loads in flight: %d%s"
          % (n, len(more_li), (" (" + ", ".join(more_li) + ")") if more_li
             else "", len(fewer_ld),
             (" (" + ", ".join(fewer_ld) + ")") if fewer_ld else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
