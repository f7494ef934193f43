#!/bin/bash
# tests/gpu.sh DIR - everything xpjit can check on a machine with a CUDA
# driver and an NVIDIA GPU, unattended, in under 10 minutes: builds what it
# needs (make -j$(nproc)), then runs each step with its own timeout:
#   devices            xpjit-cli devices -v (what the CUDA backend found)
#   test_cuda          the backend's unit test (against the stand-in
#                      libcuda: it reads the stand-in's record of calls,
#                      so it cannot run against the real driver)
#   test_X@cuda        the conformance suite and the other device tests
#                      with XPJIT_TEST_DEVICE=cuda (run_tests.sh's list
#                      for OpenCL)
#   examples@cuda      the C examples with XPJIT_DEVICE=cuda (on_device.sh)
#   bench_gpu          build/bench/gpu (kernel times, first launches,
#                      launch overhead; xpjit against NVRTC)
#   python@cuda        python/tests (the package's suite: on each device
#                      it finds, cuda among them; CuPy and PyTorch
#                      interop), when python3 has numpy and pytest
# and leaves in DIR: summary.txt (one line per step: name, pass/fail/skip,
# seconds; then the total), logs/NAME.log (each step's output),
# logs.tar.gz (the same in one file) and env.txt (what the machine is:
# kernel, C library, driver, GPU, Python). Exit status 0 when every step
# passed, 1 otherwise, 77 without a CUDA driver or device (nothing run).
# No step runs past 9 minutes: one still running then is stopped, those
# left are skipped (and fail the run).
#
# tests/gpu.sh --kit KIT DIR: the same on a machine that cannot build
# (no LLVM 22, no Debian libraries: the lent GPU machines): KIT is a
# tarball made here by tools/gpu-kit.sh (build-kit/: the programs, LLVM
# and every library they need, found through $ORIGIN/../lib). It is
# unpacked in place of the build, which is skipped.
#
# tests/gpu.sh --check: for make test on machines without a GPU: the
# script's syntax, then every step's program must exist, then bench/gpu
# --dry-run against the stand-in libcuda (build/tests/mock).
# tests/gpu.sh --list: the steps, one per line. --targets: what make must
# build for them (tools/gpu-kit.sh).
#
# Environment: BUILD (default build; build-kit with --kit),
# XPJIT_CUDA_LIBRARY (another libcuda), GPU_SH_BENCH_ARGS (arguments of
# bench/gpu, default none).
set -u
cd "$(dirname "$0")/.." || exit 1
KIT=""
if [ "${1:-}" = --kit ]; then
  [ $# -eq 3 ] || { echo "usage: tests/gpu.sh --kit KIT DIR" >&2; exit 2; }
  KIT=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
  [ -f "$KIT" ] || { echo "gpu.sh: no kit $2" >&2; exit 2; }
  shift 2
  BUILD=build-kit
fi
B=${BUILD:-build}
MOCK="$PWD/$B/tests/mock/libmock_cuda.so"
DEADLINE=540
START=$(date +%s)

# the steps: NAME TIMEOUT COMMAND...
steps() {
  echo "devices 30 $B/bin/xpjit-cli devices -v"
  echo "test_cuda 120 $B/tests/test_cuda"
  for t in conformance_a conformance_b collectives dimorder interchange \
    launch_local bounds constgen half; do
    echo "test_$t@cuda 150 env XPJIT_TEST_DEVICE=cuda $B/tests/test_$t"
  done
  echo "examples@cuda 120 env BUILD=$B sh tests/on_device.sh cuda"
  # the figures before the Python suite: what the 9 minutes must not lose
  echo "bench_gpu 300 $B/bench/gpu ${GPU_SH_BENCH_ARGS:-}"
  # the Python package's suite: every test on each device it finds (cuda
  # among them), CuPy and PyTorch interop where they are installed
  # (without them the step is still listed, and fails saying why)
  if command -v python3 >/dev/null && python3 -c 'import numpy, pytest' 2>/dev/null; then
    echo "python@cuda 240 env PYTHONPATH=$PWD/python XPJIT_LIBRARY=$PWD/$B/lib/libxpjit.so python3 -m pytest -q -p no:cacheprovider python/tests"
  else
    echo "python@cuda 10 bash tests/gpu.sh --missing python3_with_NumPy_and_pytest"
  fi
}

# what each step needs built
build_targets() {
  echo all "$B/bench/gpu" "$B/tests/mock/libmock_cuda.so"
  for t in cuda conformance_a conformance_b collectives dimorder interchange \
    launch_local bounds constgen half; do
    echo "$B/tests/test_$t"
  done
}

# the program a step runs: the first word after env and its assignments
step_program() {
  shift 2
  [ "$1" = env ] && shift
  while [ $# -gt 0 ] && [[ "$1" == *=* ]]; do shift; done
  [ "$1" = sh ] || [ "$1" = bash ] && shift
  [ "$1" = python3 ] && { echo python/tests; return; }
  echo "$1"
}

if [ "${1:-}" = --list ]; then
  steps
  exit 0
fi
if [ "${1:-}" = --missing ]; then  # a step that cannot run here
  echo "gpu.sh: not run: no ${2:-something} on this machine"
  exit 1
fi
if [ "${1:-}" = --targets ]; then
  build_targets
  exit 0
fi

if [ "${1:-}" = --check ]; then
  bash -n "$0" || exit 1
  rc=0
  n=0
  while read -r line; do
    # shellcheck disable=SC2086
    prog=$(step_program $line)
    n=$((n + 1))
    if [ ! -e "$prog" ]; then
      echo "gpu.sh --check: step ${line%% *}: no $prog"
      rc=1
    fi
  done < <(steps)
  echo "gpu.sh --check: $n steps"
  [ -f "$MOCK" ] || { echo "gpu.sh --check: no $MOCK"; exit 1; }
  # the bench step, dry: compiled, loaded and launched on the stand-in;
  # and its private cache directory (in TMPDIR) removed with everything in
  # it (the hit files' directory stayed, and so the directory)
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/xpjit-gpu-check-XXXXXX") || exit 1
  TMPDIR=$tmp XPJIT_CUDA_LIBRARY=$MOCK timeout 120 "$B/bench/gpu" --dry-run || rc=1
  if [ -n "$(ls -A "$tmp")" ]; then
    echo "gpu.sh --check: bench/gpu left in TMPDIR: $(cd "$tmp" && find . | tr '\n' ' ')"
    rc=1
  fi
  rm -rf "$tmp"
  exit $rc
fi

if [ $# -ne 1 ] || [ "${1#-}" != "$1" ]; then
  echo "usage: tests/gpu.sh [--kit KIT] DIR | --check | --list | --targets" >&2
  exit 2
fi
OUT=$1
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
LOGS="$OUT/logs"
rm -rf "$LOGS"
mkdir -p "$LOGS" || exit 1
# the logs in one file too (a run's outputs may come back as few files)
pack_logs() { tar czf "$OUT/logs.tar.gz" -C "$OUT" logs 2>/dev/null; }
trap pack_logs EXIT

# what the machine is, before anything can fail
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "kernel: $(uname -srm)"
  echo "libc: $(ldd --version 2>&1 | head -n 1)"
  [ -r /etc/os-release ] && grep -E '^(PRETTY_NAME)=' /etc/os-release
  command -v nvidia-smi >/dev/null &&
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1
  echo "python3: $(python3 -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)' 2>&1 | tail -n 1)"
  echo "nproc: $(nproc)"
  echo "LD_LIBRARY_PATH: ${LD_LIBRARY_PATH:-}"
  echo "libcuda in the loader's cache: $(ldconfig -p 2>/dev/null | grep -c 'libcuda\.so')"
} > "$OUT/env.txt" 2>&1

# a driver first: nothing to do without one (where the loader finds it:
# the cache, or LD_LIBRARY_PATH, as in containers that mount the driver)
has_driver() {
  [ -n "${XPJIT_CUDA_LIBRARY:-}" ] && return 0
  ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' && return 0
  python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null
}
if ! has_driver; then
  echo "gpu.sh: no CUDA driver (libcuda.so.1 is not on the loader's path): nothing to run" |
    tee -a "$SUMMARY"
  exit 77
fi

elapsed() { echo $(($(date +%s) - START)); }

t0=$(date +%s)
if [ -n "$KIT" ]; then
  # the kit in place of a build: python3 unpacks it (xz may be missing)
  rm -rf "$B"
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(".")' "$KIT" \
    > "$LOGS/build.log" 2>&1
  st=$?
  # every program's libraries must resolve (through $ORIGIN/../lib)
  if [ $st -eq 0 ]; then
    for f in "$B"/bin/* "$B"/libexec/xpjit/* "$B"/lib/*.so.0 "$B"/tests/test_* \
             "$B"/examples/* "$B"/bench/*; do
      [ -f "$f" ] || continue
      miss=$(ldd "$f" 2>&1 | grep -E 'not found|version .* not found')
      [ -n "$miss" ] && { echo "$f: $miss"; st=1; }
    done >> "$LOGS/build.log" 2>&1
  fi
  # libdevice: the CUDA toolkit's, else the kit's copy
  if [ -z "${XPJIT_LIBDEVICE:-}" ] && [ -f "$B/lib/libdevice.10.bc" ] &&
     [ ! -f "${CUDA_HOME:-/usr/local/cuda}/nvvm/libdevice/libdevice.10.bc" ]; then
    export XPJIT_LIBDEVICE="$PWD/$B/lib/libdevice.10.bc"
  fi
  what=kit
else
  # shellcheck disable=SC2046
  timeout 300 make -j"$(nproc)" $(build_targets) > "$LOGS/build.log" 2>&1
  st=$?
  what=build
fi
printf '%-32s %-5s %4ds\n' $what "$([ $st -eq 0 ] && echo pass || echo FAIL)" \
  $(($(date +%s) - t0)) | tee -a "$SUMMARY"
if [ $st -ne 0 ]; then
  tail -n 30 "$LOGS/build.log"
  echo "total: build failed after $(elapsed)s" | tee -a "$SUMMARY"
  exit 1
fi

# a device: the CUDA backend must find one
if ! XPJIT_DEVICE=cuda "$B/bin/xpjit-cli" devices > "$LOGS/devices-probe.log" 2>&1 ||
   ! grep -q 'cuda:0' "$LOGS/devices-probe.log"; then
  echo "gpu.sh: no CUDA device for xpjit:" | tee -a "$SUMMARY"
  "$B/bin/xpjit-cli" devices -v 2>&1 | grep -i cuda | tee -a "$SUMMARY"
  exit 77
fi

# the tests' own cache, as in run_tests.sh
export XPJIT_CACHE_DIR="$OUT/cache"
rm -rf "$XPJIT_CACHE_DIR"
export XPJIT_DAEMON=off
unset XPJIT_CACHE XPJIT_BUNDLE_PATH XPJIT_CACHE_MAX_SIZE XPJIT_DEVICE XPJIT_TEST_DEVICE

pass=0
fail=0
while read -r name limit cmd; do
  if [ "$(elapsed)" -ge $DEADLINE ]; then
    printf '%-32s %-5s %4ds  (not run: %ds gone)\n' "$name" skip 0 "$(elapsed)" | tee -a "$SUMMARY"
    fail=$((fail + 1))
    continue
  fi
  # test_cuda: the stand-in libcuda, whatever the environment says
  extra=""
  [ "$name" = test_cuda ] && extra="env -u XPJIT_CUDA_LIBRARY"
  # no step runs past the deadline: the whole run fits the lent machine's
  # 10 minutes a command, with the logs packed after
  left=$((DEADLINE - $(elapsed)))
  [ "$limit" -gt "$left" ] && limit=$left
  t0=$(date +%s)
  # shellcheck disable=SC2086
  timeout -k 10 "$limit" $extra $cmd > "$LOGS/$name.log" 2>&1 < /dev/null
  st=$?
  secs=$(($(date +%s) - t0))
  if [ $st -eq 0 ]; then
    res=pass
    pass=$((pass + 1))
  else
    res=FAIL
    fail=$((fail + 1))
  fi
  note=""
  [ $st -eq 124 ] && note="  (timed out after ${limit}s)"
  [ $st -ne 0 ] && [ $st -ne 124 ] && note="  (exit $st)"
  printf '%-32s %-5s %4ds%s\n' "$name" "$res" "$secs" "$note" | tee -a "$SUMMARY"
done < <(steps)
echo "total: $pass passed, $fail failed, $(elapsed)s" | tee -a "$SUMMARY"
[ $fail -eq 0 ]
