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
#   python:NAME@cuda   examples/python/*.py, when python3 has numpy
#   bench_gpu          build/bench/gpu (kernel times, first launches,
#                      launch overhead; xpjit against NVRTC)
# and leaves in DIR: summary.txt (one line per step: name, pass/fail/skip,
# seconds; then the total) and NAME.log (each step's output). Exit status
# 0 when every step passed, 1 otherwise, 77 without a CUDA driver or
# device (nothing run). Steps still to run when 9 minutes have gone are
# skipped (and fail the run).
#
# tests/gpu.sh --check: for make test on machines without a GPU: the
# script's syntax, then every step's program must exist, then bench/gpu
# --dry-run against the stand-in libcuda (build/tests/mock).
# tests/gpu.sh --list: the steps, one per line.
#
# Environment: BUILD (default build), XPJIT_CUDA_LIBRARY (another libcuda),
# GPU_SH_BENCH_ARGS (arguments of bench/gpu, default none).
set -u
cd "$(dirname "$0")/.." || exit 1
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
  if command -v python3 >/dev/null && python3 -c 'import numpy' 2>/dev/null; then
    for p in examples/python/*.py; do
      n=$(basename "$p" .py)
      echo "python:$n@cuda 60 env XPJIT_DEVICE=cuda PYTHONPATH=$PWD/python XPJIT_LIBRARY=$PWD/$B/lib/libxpjit.so python3 $p"
    done
  fi
  echo "bench_gpu 300 $B/bench/gpu ${GPU_SH_BENCH_ARGS:-}"
}

# what each step needs built
build_targets() {
  echo all "$B/bench/gpu" "$MOCK"
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
  [ "$1" = sh ] && shift
  [ "$1" = python3 ] && shift
  echo "$1"
}

if [ "${1:-}" = --list ]; then
  steps
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
  # the bench step, dry: compiled, loaded and launched on the stand-in
  XPJIT_CUDA_LIBRARY=$MOCK timeout 120 "$B/bench/gpu" --dry-run || rc=1
  exit $rc
fi

if [ $# -ne 1 ] || [ "${1#-}" != "$1" ]; then
  echo "usage: tests/gpu.sh DIR | --check | --list" >&2
  exit 2
fi
OUT=$1
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"

# a driver first: nothing to do without one
if [ -z "${XPJIT_CUDA_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
  echo "gpu.sh: no CUDA driver (libcuda.so.1 is not on the loader's path): nothing to run" |
    tee -a "$SUMMARY"
  exit 77
fi

elapsed() { echo $(($(date +%s) - START)); }

t0=$(date +%s)
# shellcheck disable=SC2046
timeout 300 make -j"$(nproc)" $(build_targets) > "$OUT/build.log" 2>&1
st=$?
printf '%-32s %-5s %4ds\n' build "$([ $st -eq 0 ] && echo pass || echo FAIL)" \
  $(($(date +%s) - t0)) | tee -a "$SUMMARY"
if [ $st -ne 0 ]; then
  tail -n 30 "$OUT/build.log"
  echo "total: build failed after $(elapsed)s" | tee -a "$SUMMARY"
  exit 1
fi

# a device: the CUDA backend must find one
if ! XPJIT_DEVICE=cuda "$B/bin/xpjit-cli" devices > "$OUT/devices-probe.log" 2>&1 ||
   ! grep -q 'cuda:0' "$OUT/devices-probe.log"; then
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
  t0=$(date +%s)
  # shellcheck disable=SC2086
  timeout -k 10 "$limit" $extra $cmd > "$OUT/$name.log" 2>&1 < /dev/null
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
