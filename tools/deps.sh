#!/bin/sh
# Installs the Debian 12 packages xpjit needs to build and test, or the
# packages named as arguments (tools/bench-deps.sh). Idempotent: installs
# only what is missing; needs root (or sudo) only then.
set -eu
# systemd: systemd-socket-activate and systemd-analyze, used by the daemon
# tests when present (socket activation, unit files); they skip without.
# cmake: tests/install.sh builds a consumer through find_package(xpjit);
# scdoc: the man pages (docs/man/*.scd); libjansson-dev: xpjit-cli's JSON;
# strace: tests/daemon_sandbox.sh; debhelper, lintian, fakeroot: the
# Debian packages (tests/deb.sh); zlib1g-dev, libzstd-dev: what LLVM's
# static archives need, which the compile server links (Makefile);
# bolt-22: the compile server laid out by a profile of its compiles
# (Makefile, BOLT).
PKGS="${*:-build-essential pkg-config cmake scdoc strace debhelper lintian fakeroot nettle-dev libcmocka-dev clang libclang-rt-14-dev llvm-22-dev bolt-22 zlib1g-dev libzstd-dev spirv-tools libsqlite3-dev sqlite3 libjansson-dev systemd libze-dev opencl-c-headers ocl-icd-libopencl1 clinfo python3-venv python3-dev python3-numpy python3-pytest libhiredis-dev redis-server openmpi-bin libopenmpi-dev}"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing="$missing $p"
done
if [ -z "$missing" ]; then
  echo "deps: all present ($PKGS)"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
