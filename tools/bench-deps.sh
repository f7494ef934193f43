#!/bin/sh
# Installs the peers the benchmarks compare against (make bench runs it):
# clang-22 (OpenCL C to SPIR-V, bench/compile's SPIR-V peer) and PoCL
# (bench/cache's and bench/cpu's OpenCL peer), from Debian 12's packages,
# valgrind (bench/instr.sh: a compile's instructions, counted), and PyPI's
# PyOpenCL (bench/python_launch.py's peer) and nvdisasm
# (bench/ptx_quality.py).
# NVRTC is the CUDA toolkit's (/usr/local/cuda): not a Debian package here,
# reported when missing. Idempotent: installs only what is missing; needs
# root (or sudo) only then. The benchmarks run without any of them and
# say which peer they left out.
set -eu
sh "$(dirname "$0")/deps.sh" clang-22 pocl-opencl-icd valgrind
echo "bench-deps: $(clang-22 --version | head -1)"
echo "bench-deps: PoCL $(dpkg-query -W -f='${Version}' pocl-opencl-icd)"
# PyOpenCL (bench/python_launch.py's Python peer), from PyPI, in a venv that
# sees Debian's NumPy
venv="$HOME/.cache/xpjit/venv-bench"
[ -x "$venv/bin/python" ] || python3 -m venv --system-site-packages "$venv" ||
  /usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -c "import pyopencl" 2>/dev/null ||
  "$venv/bin/pip" install -q pyopencl
echo "bench-deps: PyOpenCL $("$venv/bin/python" -c 'import pyopencl; print(pyopencl.VERSION_TEXT)')"
# nvdisasm (NVIDIA's wheel; the CUDA toolkit here has none): SASS for
# bench/ptx_quality.py
ls "$venv"/lib/python3*/site-packages/nvidia/*/bin/nvdisasm >/dev/null 2>&1 ||
  "$venv/bin/pip" install -q nvidia-cuda-nvdisasm
echo "bench-deps: nvdisasm $(ls "$venv"/lib/python3*/site-packages/nvidia/*/bin/nvdisasm | head -1)"
nvrtc=$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1 || true)
if [ -n "$nvrtc" ]; then
  echo "bench-deps: NVRTC $nvrtc"
else
  echo "bench-deps: no NVRTC (/usr/local/cuda): bench/compile leaves it out"
fi
