#!/bin/sh
# The compile server laid out by BOLT (Makefile, BOLT=on) makes the same
# bytes as the server as linked: every kernel of examples/ (which the
# profile was not made from) compiled by both, in process, for PTX and the
# host CPU, and for SPIR-V in a fork of each (xpjit-cc --train --digests:
# each compile's status, size and SHA-256), and the lists compared. Every
# compile must succeed but PTX ones refused for want of libdevice (a
# machine without the CUDA toolkit), which are named. Skipped in sanitizer
# builds (their server links libLLVM: nothing for BOLT to lay out) and
# where the build has no BOLT, except under XPJIT_REQUIRE_TOOLS=1 (CI):
# there a server on libLLVM outside a sanitizer build, or no BOLT, fails.
set -u
B=${BUILD:-build}
cc="$B/libexec/xpjit/xpjit-cc"
plain="$B/obj/xpjit-cc.plain"
fail() { echo "bolt: FAIL: $*"; exit 1; }
skip() {
  echo "bolt: skipped: $*"
  [ -z "${XPJIT_REQUIRE_TOOLS:-}" ] || exit 1
  exit 0
}
if ldd "$cc" 2>/dev/null | grep -q libasan; then
  echo "bolt: skipped: a sanitizer build (its server links libLLVM)"
  exit 0
fi
if ldd "$cc" 2>/dev/null | grep -q libLLVM; then
  skip "the compile server links libLLVM (no LLVM static archives, or CSERVER_LLVM=shared): BOLT lays out only a static server"
fi
[ -x "$plain" ] ||
  skip "no BOLT in this build (llvm-bolt missing: sh tools/deps.sh installs Debian's bolt-22; or BOLT=off)"

# the pair: BOLT's output (it keeps the original code as .bolt.org.*) of
# this plain server (BOLT flips the last bit of the build ID)
readelf -S "$cc" | grep -q '\.bolt\.org\.text' || fail "$cc was not made by BOLT"
build_id() { readelf -n "$1" | sed -n 's/.*Build ID: *//p'; }
a=$(build_id "$plain")
b=$(build_id "$cc")
[ -n "$a" ] && [ "${#a}" = "${#b}" ] || fail "no build IDs to pair ($a, $b)"
last() { printf '%d' "0x$(printf '%s' "$1" | tail -c 1)"; }
[ "${a%?}" = "${b%?}" ] && [ $(($(last "$a") ^ $(last "$b"))) -eq 1 ] ||
  fail "$cc ($b) is not BOLT's rewrite of $plain ($a): a stale plain server? (make again)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/xpjit-bolt-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for s in plain cc; do
  eval "bin=\$$s"
  "$bin" --train --digests examples/*.xpk > "$tmp/$s.txt" 2> "$tmp/$s.err" ||
    fail "$bin --train --digests: $(cat "$tmp/$s.err")"
done
# lines: FILE KERNEL BINDING ndim=N TARGET STATUS SIZE SHA256
kernels=$(grep -h '^kernel ' examples/*.xpk | wc -l)
for t in ptx:sm_90 cpu spirv; do
  c=$(awk -v t="$t" '$5 == t' "$tmp/cc.txt" | wc -l)
  [ "$c" -eq "$kernels" ] ||
    fail "$c compiles for $t, $kernels example kernels: $(cat "$tmp/cc.err")"
done
bad=$(awk '$6 != "ok" && !($5 ~ /^ptx/ && $6 == "not-supported-by-the-target")' "$tmp/cc.txt")
[ -z "$bad" ] || fail "compiles failed: $bad"
noted=$(awk '$6 != "ok"' "$tmp/cc.txt" | wc -l)
[ "$noted" -eq 0 ] ||
  echo "bolt: $noted PTX compiles refused (no libdevice?), compared as refused"
diff "$tmp/plain.txt" "$tmp/cc.txt" > "$tmp/diff" ||
  fail "the BOLT-optimised server's outputs differ: $(head -20 "$tmp/diff")"
echo "bolt: $(wc -l < "$tmp/cc.txt") compiles (PTX, CPU, SPIR-V) the same from both servers"
