#!/bin/sh
# The Python tests' venv: Debian's python3 with its NumPy and pytest
# (tools/deps.sh) seen through --system-site-packages, plus from PyPI
# pyarrow, a second DLPack producer next to NumPy (python/tests/test_api.py,
# test_dlpack_from_another_producer), and dpctl, whose USM arrays xpjit
# takes and gives through __sycl_usm_array_interface__
# (python/tests/test_suai.py; it runs them on Intel's OpenCL CPU runtime,
# tools/intel-ocl.sh). tests/run_tests.sh uses this venv's python when it
# exists.
#
#   sh tools/py-test-deps.sh [DIR]   DIR: $HOME/.cache/xpjit/venv-test
# Idempotent: does nothing when DIR already has pyarrow and dpctl.
set -eu
DIR=${1:-$HOME/.cache/xpjit/venv-test}
# pyarrow 19 and later need NumPy 2; Debian 12 has 1.24
PYARROW=${PYARROW_VERSION:-18.1.0}
# dpctl 0.21.1: the newest with dpctl.tensor, which takes NumPy 1.24 (it
# brings Intel's SYCL runtime 2025.3: libsycl.so.8, about 220 MB to
# download, 820 MiB installed; the script takes 7.5 s here, 3.6 s without)
DPCTL=${DPCTL_VERSION:-0.21.1}
CHECK="import numpy, pytest, pyarrow, dpctl.tensor"
if [ -x "$DIR/bin/python" ] && "$DIR/bin/python" -c "$CHECK" 2>/dev/null; then
  echo "py-test-deps: present in $DIR"
  exit 0
fi
/usr/bin/python3 -m venv --system-site-packages "$DIR"
"$DIR/bin/pip" install -q --disable-pip-version-check "pyarrow==$PYARROW" \
  "dpctl==$DPCTL"
"$DIR/bin/python" -W ignore -c "$CHECK" ||
  { echo "py-test-deps: $DIR lacks numpy, pytest, pyarrow or dpctl" >&2
    exit 1; }
echo "py-test-deps: pyarrow $PYARROW, dpctl $DPCTL in $DIR"
