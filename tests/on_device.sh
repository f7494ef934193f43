#!/bin/sh
# The example programs, unchanged, on the device named by $1 (a device
# filter such as opencl): each must print "correct" and exit 0.
set -u
B=${BUILD:-build}
dev=$1
rc=0
for e in saxpy reduction matmul; do
  out=$(XPJIT_DEVICE="$dev" "$B/examples/$e" 2>&1)
  st=$?
  echo "$out" | tail -n 1
  if [ $st -ne 0 ] || ! echo "$out" | grep -q "on $dev.*correct"; then
    echo "on_device: $e on $dev failed (exit $st)"
    rc=1
  fi
done
# f16 and bf16 (examples/half.c): three checks, each "bit-exact" or "within
# bounds"
out=$(XPJIT_DEVICE="$dev" "$B/examples/half" 2>&1)
st=$?
echo "$out" | tail -n 3
if [ $st -ne 0 ] || ! echo "$out" | grep -q "on $dev" ||
   echo "$out" | grep -q WRONG; then
  echo "on_device: half on $dev failed (exit $st)"
  rc=1
fi
exit $rc
