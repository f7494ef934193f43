#!/bin/sh
# Installs Intel's OpenCL runtime for CPUs from PyPI (intel-opencl-rt, with
# its dependencies intel-cmplr-lib-rt and tbb) into a virtual environment,
# and writes an ICD file for it. OpenCL's ICD loader then finds it with
#   export OCL_ICD_VENDORS=DIR/icd
# It is a SPIR-V consumer that runs here: the test suite runs the whole
# conformance suite through it (XPJIT_TEST_DEVICE=opencl), so the SPIR-V we
# generate for Level Zero and OpenCL is executed on every run.
#
#   sh tools/intel-ocl.sh [DIR]     DIR: $XPJIT_INTEL_OCL, else
#                                   $HOME/.cache/xpjit/intel-opencl
# Idempotent: does nothing when DIR already holds a working install.
set -eu
DIR=${1:-${XPJIT_INTEL_OCL:-$HOME/.cache/xpjit/intel-opencl}}
VERSION=${INTEL_OCL_VERSION:-2026.2.0}
LIB="$DIR/venv/lib/libintelocl.so"
if [ -f "$LIB" ] && [ -f "$DIR/icd/intel-cpu.icd" ]; then
  echo "intel-ocl: present in $DIR"
  exit 0
fi
PY=${PYTHON:-python3}
mkdir -p "$DIR"
echo "intel-ocl: installing intel-opencl-rt==$VERSION into $DIR/venv"
"$PY" -m venv "$DIR/venv"
"$DIR/venv/bin/pip" install -q --disable-pip-version-check \
  "intel-opencl-rt==$VERSION" "intel-cmplr-lib-rt==$VERSION"
if [ ! -f "$LIB" ]; then
  echo "intel-ocl: $LIB is missing after the install" >&2
  exit 1
fi
# The library finds its own dependencies (TBB, SVML, libimf) through its
# RUNPATH ($ORIGIN): the ICD file needs only its absolute path.
mkdir -p "$DIR/icd"
echo "$LIB" > "$DIR/icd/intel-cpu.icd"
echo "intel-ocl: ready; use it with OCL_ICD_VENDORS=$DIR/icd"
