#!/bin/sh
# The Python tests' venv: Debian's python3 with its NumPy and pytest
# (tools/deps.sh) seen through --system-site-packages, plus PyPI's pyarrow,
# a second DLPack producer next to NumPy (python/tests/test_api.py,
# test_dlpack_from_another_producer). tests/run_tests.sh uses this venv's
# python when it exists.
#
#   sh tools/py-test-deps.sh [DIR]   DIR: $HOME/.cache/xpjit/venv-test
# Idempotent: does nothing when DIR already has pyarrow.
set -eu
DIR=${1:-$HOME/.cache/xpjit/venv-test}
# pyarrow 19 and later need NumPy 2; Debian 12 has 1.24
PYARROW=${PYARROW_VERSION:-18.1.0}
if [ -x "$DIR/bin/python" ] &&
  "$DIR/bin/python" -c "import numpy, pytest, pyarrow" 2>/dev/null; then
  echo "py-test-deps: present in $DIR"
  exit 0
fi
/usr/bin/python3 -m venv --system-site-packages "$DIR"
"$DIR/bin/pip" install -q --disable-pip-version-check "pyarrow==$PYARROW"
"$DIR/bin/python" -c "import numpy, pytest, pyarrow" ||
  { echo "py-test-deps: $DIR lacks numpy, pytest or pyarrow" >&2; exit 1; }
echo "py-test-deps: pyarrow $PYARROW in $DIR"
