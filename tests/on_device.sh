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
exit $rc
