#!/bin/sh
# The compile server laid out by BOLT (Makefile, BOLT=on) makes the same
# bytes as the server as linked: every kernel of examples/ (which the
# profile was not made from) compiled by both, in process, for PTX and the
# host CPU, and for SPIR-V in a fork of each (xpjit-cc --train --digests),
# the outputs' SHA-256 compared. Skipped where the build has no BOLT; CI
# sets XPJIT_REQUIRE_TOOLS=1, and there a missing llvm-bolt is a failure.
set -u
B=${BUILD:-build}
cc="$B/libexec/xpjit/xpjit-cc"
plain="$B/obj/xpjit-cc.plain"
if ldd "$cc" 2>/dev/null | grep -q libLLVM; then
  echo "bolt: skipped: the compile server links libLLVM (CSERVER_LLVM=shared, a sanitizer build): BOLT lays out only a static server"
  exit 0
fi
if [ ! -x "$plain" ]; then
  echo "bolt: skipped: no BOLT in this build (llvm-bolt missing: sh tools/deps.sh installs Debian's bolt-22; or BOLT=off)"
  [ -z "${XPJIT_REQUIRE_TOOLS:-}" ] || exit 1
  exit 0
fi
fail() { echo "bolt: FAIL: $*"; exit 1; }

# the server is BOLT's output (it keeps the original code as .bolt.org.*)
readelf -S "$cc" | grep -q '\.bolt\.org\.text' || fail "$cc was not made by BOLT"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/xpjit-bolt-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for s in plain cc; do
  eval "bin=\$$s"
  "$bin" --train --digests examples/*.xpk > "$tmp/$s.txt" 2> "$tmp/$s.err" ||
    fail "$bin --train --digests: $(cat "$tmp/$s.err")"
done
n=$(wc -l < "$tmp/cc.txt")
for t in ptx:sm_90 cpu spirv; do
  c=$(grep -c " $t [1-9]" "$tmp/cc.txt")
  [ "$c" -ge 50 ] || fail "only $c outputs for $t (expected one per example kernel)"
done
# a failed compile (size 0) would compare equal to itself
if grep -q " 0 e3b0c44298fc1c149afbf4c8996fb924" "$tmp/cc.txt"; then
  echo "bolt: compiles without output (kept apart from the comparison):"
  grep " 0 e3b0c44298fc1c149afbf4c8996fb924" "$tmp/cc.txt" | head -5
fi
diff "$tmp/plain.txt" "$tmp/cc.txt" > "$tmp/diff" ||
  fail "the BOLT-optimised server's outputs differ: $(head -20 "$tmp/diff")"
echo "bolt: $n outputs (PTX, CPU, SPIR-V) the same from both servers"
