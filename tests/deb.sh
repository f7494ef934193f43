#!/bin/sh
# The Debian packages (debian/): built from a copy of this tree with
# dpkg-buildpackage -b -us -uc, checked by lintian (no errors), installed
# with dpkg, then a consumer built against them through pkg-config and
# CMake and run, then removed. Needs root (dpkg -i) and debhelper,
# lintian, fakeroot; run by .ci/run after make test (a full build:
# several minutes), not by make test.
#
#   sh tests/deb.sh [OUTDIR]   the .deb files and lintian's output are
#                              left in OUTDIR (default: a temporary one)
set -eu
out=${1:-}
tmp=$(mktemp -d)
pkgs="libxpjit0 libxpjit-dev xpjit-tools xpjitd"
installed=no
cleanup() {
  [ $installed = yes ] && dpkg --purge $pkgs >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "deb: FAIL: $*"; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root (dpkg -i)"
for t in dpkg-buildpackage dh lintian fakeroot cmake pkg-config; do
  command -v $t >/dev/null 2>&1 || fail "no $t (apt-get install debhelper lintian fakeroot cmake pkg-config)"
done
# (a package removed but not purged, "rc", is not in the way)
for p in $pkgs; do
  ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    fail "$p is installed already; remove it first"
done

# the tree as git sees it (tracked and new files, nothing ignored)
mkdir "$tmp/src"
git ls-files -co --exclude-standard | tar -cf - -T - | tar -xf - -C "$tmp/src"
(cd "$tmp/src" && dpkg-buildpackage -b -us -uc -j"$(nproc)") > "$tmp/build.log" 2>&1 ||
  { tail -40 "$tmp/build.log"; fail "dpkg-buildpackage failed"; }
changes=$(ls "$tmp"/xpjit_*.changes)
lintian --tag-display-limit 0 "$changes" > "$tmp/lintian.txt" 2>&1 || true
echo "deb: lintian: $(grep -c '^E:' "$tmp/lintian.txt") errors, $(grep -c '^W:' "$tmp/lintian.txt") warnings"
if grep -q '^E:' "$tmp/lintian.txt"; then
  grep '^E:' "$tmp/lintian.txt"
  fail "lintian errors"
fi
if [ -n "$out" ]; then
  mkdir -p "$out"
  cp "$tmp"/*.deb "$tmp/lintian.txt" "$out/"
fi

installed=yes
dpkg -i "$tmp"/libxpjit0_*.deb "$tmp"/libxpjit-dev_*.deb "$tmp"/xpjit-tools_*.deb \
  "$tmp"/xpjitd_*.deb > "$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i"; }

# the consumer, against the installed packages only
cc tests/install_consumer.c $(pkg-config --cflags --libs xpjit) -o "$tmp/consumer"
readelf -d "$tmp/consumer" | grep -q 'NEEDED.*libxpjit\.so\.0' || fail "the consumer does not load libxpjit.so.0"
res=$(cd "$tmp" && env -u LD_LIBRARY_PATH XPJIT_CACHE_DIR="$tmp/cache" ./consumer) ||
  fail "the consumer failed: $res"
case "$res" in "0 0.1.0 "*" 4.5 -2.25") ;; *) fail "the consumer printed: $res" ;; esac
echo "deb: consumer (pkg-config, shared): $res"
mkdir "$tmp/cm"
cp tests/install_consumer.c "$tmp/cm/consumer.c"
cat > "$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.13)
project(consumer C)
find_package(xpjit 0.1 REQUIRED)
add_executable(consumer consumer.c)
target_link_libraries(consumer PRIVATE xpjit::xpjit_static)
CM
{ cmake -S "$tmp/cm" -B "$tmp/cm/b" && cmake --build "$tmp/cm/b"; } > "$tmp/cm.log" 2>&1 ||
  { cat "$tmp/cm.log"; fail "the CMake consumer did not build"; }
res=$(XPJIT_CACHE_DIR="$tmp/cache2" "$tmp/cm/b/consumer") || fail "the CMake consumer failed: $res"
echo "deb: consumer (CMake, static): $res"
# the tools and the daemon
xpjit-cli --version | grep -q "^xpjit-cli 0.1.0" || fail "xpjit-cli --version"
xpjit-cli check examples/saxpy.xpk || fail "xpjit-cli check"
xpjitd --version | grep -q "protocol" || fail "xpjitd --version"
# the packaged daemon compiles for the consumer with the packaged plugin
# (it links no LLVM itself)
readelf -d /usr/bin/xpjitd | grep -q 'NEEDED.*libLLVM' && fail "xpjitd links libLLVM"
mkdir -m 700 "$tmp/dcache"
XPJIT_CACHE_DIR="$tmp/dcache" xpjitd --socket "$tmp/d.sock" --idle-exit 30 >/dev/null ||
  fail "xpjitd did not start"
res=$(cd "$tmp" && XPJIT_DAEMON="$tmp/d.sock" XPJIT_CACHE=off ./consumer) ||
  fail "the consumer through xpjitd failed: $res"
dstats=$(xpjit-cli daemon stats --socket "$tmp/d.sock")
xpjit-cli daemon stop --socket "$tmp/d.sock" >/dev/null
echo "$dstats" | grep -q "^compiles [1-9]" && echo "$dstats" | grep -qx "compile_failures 0" ||
  fail "the packaged xpjitd did not compile: $(echo "$dstats" | grep compile)"
man -w xpjit-cli >/dev/null 2>&1 || ! command -v man >/dev/null || fail "no man page for xpjit-cli"
[ -f /usr/lib/systemd/user/xpjitd.socket ] || fail "no xpjitd.socket"
echo "deb: ok ($(ls "$tmp"/*.deb | wc -l) packages)"
