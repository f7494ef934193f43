#!/bin/sh
# The whole test suite: unit tests (cmocka), golden CLI tests, every example
# kernel specialised, CLI behaviour, and the fuzz corpora replayed. Ends
# with one summary line "tests: N passed, M failed".
set -u
B=${BUILD:-build}
export CLI="$B/bin/xpjit-cli"
# A cache of our own: never the user's, and empty at the start of each run.
export XPJIT_CACHE_DIR="$PWD/$B/test-cache"
rm -rf "$XPJIT_CACHE_DIR"
export XPJIT_DAEMON=off
unset XPJIT_CACHE XPJIT_BUNDLE_PATH XPJIT_CACHE_MAX_SIZE XPJIT_DEVICE
# Leaks inside vendor OpenCL runtimes are theirs (sanitizer builds only).
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
pass=0
fail=0
failed=""

step() { # name command...
  name=$1
  shift
  echo "=== $name"
  t0=$(date +%s)
  if "$@"; then
    pass=$((pass + 1))
    echo "=== passed: $name ($(($(date +%s) - t0)) s)"
  else
    fail=$((fail + 1))
    failed="$failed $name"
    echo "=== FAILED: $name ($(($(date +%s) - t0)) s)"
  fi
}

# Under ASan, test_opencl without ASan's alternate signal stack: LLVM's
# signal handling (Intel's OpenCL runtime has an LLVM in it) replaces a
# thread's alternate stack smaller than its own with a malloc'd one, which
# ASan then unmaps as its own when the thread ends: "AddressSanitizer:
# CHECK failed ... unable to unmap" (test_contexts_from_threads, on a host
# whose signal stack size makes ASan's the smaller; seen on an AMD EPYC
# VM, with the thirty-ninth session's tree too)
ocl_env=""
ldd "$B/tests/test_opencl" 2>/dev/null | grep -q libasan &&
  ocl_env="ASAN_OPTIONS=use_sigaltstack=0:${ASAN_OPTIONS:-}"
for t in "$B"/tests/test_*; do
  [ -x "$t" ] || continue
  case ${t##*/} in
  test_opencl) step test_opencl env $ocl_env "$t" ;;
  *) step "$(basename "$t")" "$t" ;;
  esac
done
# Queues with every command on the queue's thread (runtime/queue.c)
step test_runtime@queue-thread env XPJIT_QUEUE_HELP=0 "$B/tests/test_runtime"
step test_opencl@queue-thread env XPJIT_QUEUE_HELP=0 $ocl_env "$B/tests/test_opencl"
# The conformance suite and the examples again on a SPIR-V consumer:
# Intel's OpenCL runtime for CPUs (tools/intel-ocl.sh installs it), so the
# SPIR-V for OpenCL and Level Zero is executed, not only validated. CI sets
# XPJIT_REQUIRE_SPIRV=1: there, a missing consumer is a failure.
IOCL=${XPJIT_INTEL_OCL:-$HOME/.cache/xpjit/intel-opencl}
if [ -f "$IOCL/icd/intel-cpu.icd" ]; then
  for t in conformance_a conformance_b collectives dimorder interchange \
    launch_local bounds constgen half; do
    step "test_$t@opencl" env OCL_ICD_VENDORS="$IOCL/icd" \
      XPJIT_TEST_DEVICE=opencl "$B/tests/test_$t"
  done
  step examples@opencl env OCL_ICD_VENDORS="$IOCL/icd" \
    sh tests/on_device.sh opencl
elif [ -n "${XPJIT_REQUIRE_SPIRV:-}" ]; then
  step spirv_consumer sh -c "echo 'no SPIR-V consumer in $IOCL (run sh tools/intel-ocl.sh)'; false"
else
  echo "=== skipped: the conformance suite on OpenCL/SPIR-V (no $IOCL; sh tools/intel-ocl.sh installs Intel's OpenCL CPU runtime)"
fi
# The Python package (python/) on this build's library, without installing
# it: pytest on the CPU device and, with Intel's OpenCL runtime, on OpenCL.
# CI sets XPJIT_REQUIRE_PYTHON=1: there, a Python without NumPy and pytest
# (tools/deps.sh installs Debian's) is a failure; and XPJIT_REQUIRE_SUAI=1:
# python/tests/test_suai.py fails instead of skipping without dpctl.
PY=""
# (tools/py-test-deps.sh's venv first: it adds pyarrow and dpctl)
for p in ${PYTHON:-} "$HOME/.cache/xpjit/venv-test/bin/python" python3 \
  /usr/bin/python3; do
  if "$p" -c "import numpy, pytest" >/dev/null 2>&1; then PY=$p; break; fi
done
if [ -n "$PY" ]; then
  pyenv="XPJIT_LIBRARY=$PWD/$B/lib/libxpjit.so PYTHONPATH=$PWD/python"
  # a sanitizer build's library needs its runtime loaded first; Python's
  # own allocations are not ours to leak-check. libstdc++ with it: ASan
  # finds __cxa_throw when it starts, and C++ libraries loaded later
  # (dpctl's libsycl, test_suai.py) throw and catch exceptions
  asan=$(ldd "$B/lib/libxpjit.so" 2>/dev/null | awk '/libasan/ {print $3}')
  cxx=$(ldd "$B/lib/libxpjit-llvm.so.0" 2>/dev/null |
    awk '/libstdc\+\+/ {print $3}')
  [ -n "$asan" ] && pyenv="$pyenv LD_PRELOAD=$asan${cxx:+:$cxx} ASAN_OPTIONS=detect_leaks=0:${ASAN_OPTIONS:-}"
  [ -f "$IOCL/icd/intel-cpu.icd" ] && pyenv="$pyenv OCL_ICD_VENDORS=$IOCL/icd"
  # shellcheck disable=SC2086
  step python env $pyenv "$PY" -m pytest -q -p no:cacheprovider python/tests
  # and without the C launch path (python/xpjit/_fast.c), as where it
  # could not be built
  # shellcheck disable=SC2086
  step python@pure env $pyenv XPJIT_PYTHON_PURE=1 "$PY" -m pytest -q \
    -p no:cacheprovider python/tests
elif [ -n "${XPJIT_REQUIRE_PYTHON:-}" ]; then
  step python sh -c "echo 'no python3 with numpy and pytest (sh tools/deps.sh installs them)'; false"
else
  echo "=== skipped: the Python package's tests (no python3 with numpy and pytest; sh tools/deps.sh installs them)"
fi
step golden sh tests/run_golden.sh
step docs_check sh tests/docs_check.sh
step cli sh tests/cli.sh
step cache_cli sh tests/cache_cli.sh
step mpi_redis sh tests/mpi_redis.sh
step daemon_cli sh tests/daemon_cli.sh
step daemon_redis sh tests/daemon_redis.sh
step daemon_sandbox sh tests/daemon_sandbox.sh
step spec_examples sh tests/spec_examples.sh
step install sh tests/install.sh
step bolt sh tests/bolt.sh
step cxx_headers sh tests/cxx.sh
# The GPU run (tests/gpu.sh) without a GPU: its syntax and steps, and
# bench/gpu compiled, loaded and launched on the stand-in libcuda (--dry-run)
step gpu_sh_check env BUILD="$B" bash tests/gpu.sh --check
# The replays in a TMPDIR of their own, which they must leave empty
# (replay_fuzz_cache_file left its directory, with the cache's .hits in it)
rtmp=$(mktemp -d "${TMPDIR:-/tmp}/xpjit-replays-XXXXXX")
for r in "$B"/fuzz/replay_*; do
  [ -x "$r" ] || continue
  n=${r##*/replay_}
  dirs="tests/fuzz/corpus/$n"
  [ -d tests/fuzz/crashes ] && dirs="$dirs tests/fuzz/crashes"
  # shellcheck disable=SC2086
  step "replay_$n" env TMPDIR="$rtmp" "$r" $dirs
done
step replays_leave_no_files sh -c 'left=$(cd "$1" && find . -mindepth 1)
  [ -z "$left" ] || { echo "left in TMPDIR by the replays:" $left; false; }' sh "$rtmp"
rm -rf "$rtmp"
echo
[ -n "$failed" ] && echo "failed:$failed"
echo "tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
