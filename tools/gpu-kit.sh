#!/bin/sh
# tools/gpu-kit.sh [KIT] - what tests/gpu.sh needs on a GPU machine that
# cannot build xpjit (the lent H200s: CUDA and Python there, but no LLVM
# 22, no Debian libraries, nothing to download), in one tarball KIT
# (default .gpukit/kit.tar.xz, under 64 MiB):
#   build-kit/         the programs of tests/gpu.sh's steps (make
#                      BUILD=build-kit), linked with an rpath of
#                      $ORIGIN/../lib and $ORIGIN/../../lib (DT_RPATH, so
#                      that it also serves the libraries' own libraries)
#   build-kit/lib/     beside libxpjit and its plugins, every library
#                      they need beyond the C and C++
#                      runtimes: libLLVM and its dependencies,
#                      SPIRV-Tools, SQLite, Nettle, hiredis, jansson,
#                      cmocka; and libdevice, for a machine without it
#   python/xpjit/_fast.cpython-312-*.so  the Python package's C launch
#                      path for the GPU machine's Python 3.12, when a
#                      python3.12-config is here (pyenv's will do)
# Run there: bash tests/gpu.sh --kit KIT OUT (docs/testing.md, "On a GPU").
# Here, the kit is checked by tests/gpu.sh --kit against the stand-in
# libcuda with the system's copies of those libraries hidden
# (tools/gpu-kit.sh --dry-run: a private mount namespace, where root may
# make one).
set -eu
cd "$(dirname "$0")/.."
KB=build-kit
DRY=0
[ "${1:-}" = --dry-run ] && { DRY=1; shift; }
KIT=${1:-.gpukit/kit.tar.xz}

if [ $DRY -eq 0 ]; then
  # \$$ORIGIN: make turns $$ into $, the backslash keeps it from the shell
  RP='-Wl,--disable-new-dtags -Wl,-rpath,\$$ORIGIN/../lib:\$$ORIGIN/../../lib'
  # (the compile server with the kit's libLLVM, CSERVER_LLVM=shared: a
  # static copy of LLVM beside it would take the kit over its size)
  # shellcheck disable=SC2046
  make -j"$(nproc)" BUILD=$KB LLVM_RPATH= LDLIBS="$RP" CSERVER_LLVM=shared \
    $(BUILD=$KB bash tests/gpu.sh --targets)

  # (the libraries of an earlier kit out of lib/ first)
  ls $KB/lib | grep -v '^libxpjit' | sed "s|^|$KB/lib/|" | xargs rm -f
  # the programs
  files=$(find $KB/bin $KB/libexec $KB/examples $KB/bench $KB/tests/mock \
            -maxdepth 2 -type f -perm -u+x 2>/dev/null)
  files="$files $(ls $KB/lib/libxpjit*.so.0 $KB/lib/libxpjit.so.0.1.0)"
  for t in $(BUILD=$KB bash tests/gpu.sh --targets | tr ' ' '\n' | grep "^$KB/tests/test_"); do
    files="$files $t"
  done

  # their libraries, but the C and C++ runtimes (the GPU machine's are newer)
  # (in lib/ beside libxpjit: Debian's libLLVM finds its own through its
  # runpath, $ORIGIN/../lib, not through ours)
  for f in $files; do
    ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
  done | sort -u | while read -r name path; do
    case $name in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|\
      libstdc++.so.*|libgcc_s.so.*|libxpjit*) continue ;;
    esac
    cp -L "$path" "$KB/lib/$name"
  done
  ld=${XPJIT_LIBDEVICE:-${CUDA_HOME:-/usr/local/cuda}/nvvm/libdevice/libdevice.10.bc}
  [ -f "$ld" ] && cp "$ld" $KB/lib/libdevice.10.bc

  # the Python package's C launch path for the GPU machine's Python (3.12
  # there; GPU_KIT_PYTHON_CONFIG names another python3.X-config)
  pyc=${GPU_KIT_PYTHON_CONFIG:-}
  if [ -z "$pyc" ]; then
    for c in /usr/bin/python3.12-config "$HOME"/.pyenv/versions/3.12*/bin/python3.12-config; do
      [ -x "$c" ] && pyc=$c
    done
  fi
  if [ -n "$pyc" ] && "$pyc" --extension-suffix > /dev/null 2>&1; then
    fast=python/xpjit/_fast$("$pyc" --extension-suffix)
    make PYTHON_CONFIG="$pyc" "$fast"
    files="$files $fast"
  else
    echo "gpu-kit: no python3.12-config: the kit's Python runs without its C launch path"
  fi

  # no debug information: the kit must stay under the 64 MiB a run carries
  # shellcheck disable=SC2086
  strip --strip-debug $files
  mkdir -p "$(dirname "$KIT")"
  # shellcheck disable=SC2086
  tar cf - $files $KB/lib/libxpjit.so $(ls $KB/lib/* | grep -v '^'$KB'/lib/libxpjit') |
    xz -T0 -6 > "$KIT.tmp"
  mv "$KIT.tmp" "$KIT"
  echo "gpu-kit: $KIT, $(du -h "$KIT" | cut -f1): $(echo $files | wc -w) programs, $(ls $KB/lib | grep -vc '^libxpjit') libraries"
  # a run carries 64 MiB with the working tree (about 2 MiB)
  size=$(wc -c < "$KIT")
  if [ "$size" -gt $((60 * 1024 * 1024)) ]; then
    echo "gpu-kit: $KIT is $size bytes: over the 60 MiB a run can carry beside the tree" >&2
    exit 1
  fi
  exit 0
fi

# --dry-run: a clean copy of the tree, the kit unpacked there, the
# system's copies of the kit's libraries hidden, tests/gpu.sh --kit run on
# the stand-in libcuda. Its steps fail (the stand-in runs no kernel);
# what must hold: the kit unpacks, every library resolves, every program
# starts and compiles through the kit's LLVM.
[ -f "$KIT" ] || { echo "gpu-kit: no $KIT (run tools/gpu-kit.sh first)" >&2; exit 2; }
D=$(mktemp -d /tmp/gpu-kit-dry.XXXXXX)
# the working tree as a run carries it: tracked and not ignored files
mkdir "$D/repo"
git ls-files -z -co --exclude-standard | tar cf - --null -T - | tar xf - -C "$D/repo"
cp -r $KB/tests/mock "$D/mock"
KITABS=$(cd "$(dirname "$KIT")" && pwd)/$(basename "$KIT")
# the libraries the kit carries that a bare machine lacks, hidden where
# the system has them (not those the shell and Python need here)
hide=""
for n in $(tar tJf "$KIT" | sed -n 's|^build-kit/lib/||p'); do
  case $n in
    libLLVM*|libz3*|libicu*|libxml2*|libedit*|libsqlite3*|libnettle*|\
    libhiredis*|libjansson*|libcmocka*|libSPIRV*) ;;
    *) continue ;;
  esac
  for d in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib/llvm-22/lib; do
    [ -e "$d/$n" ] && hide="$hide $d/$n"
  done
done
# without a private mount namespace (a container may refuse one), nothing
# is hidden: the rpath is still checked by ldd in tests/gpu.sh --kit
ns="unshare -m"
if ! unshare -m true 2>/dev/null; then
  echo "gpu-kit --dry-run: no private mount namespace here: the system's libraries stay visible"
  ns=""
  hide=""
fi
$ns sh -c '
  for f in '"$hide"'; do mount --bind /dev/null "$(readlink -f "$f")" || exit 1; done
  [ -n "'"$ns"'" ] && mount --bind /dev/null /usr/lib/llvm-22/lib/libLLVM-22.so 2>/dev/null
  cd "$1" && XPJIT_CUDA_LIBRARY="$2" MOCK_CUDA_CC=90 GPU_SH_BENCH_ARGS=--dry-run \
    bash tests/gpu.sh --kit "$3" "$4"
' sh "$D/repo" "$D/mock/libmock_cuda.so" "$KITABS" "$D/out" || true
echo "gpu-kit --dry-run: $D/out"
cat "$D/out/summary.txt"
# what must hold on the stand-in: the kit, the devices, the steps that
# need no kernel to run, and no program short of a library or of LLVM
rc=0
for s in kit devices test_cuda bench_gpu; do
  grep -q "^$s  *pass" "$D/out/summary.txt" || { echo "gpu-kit --dry-run: step $s did not pass"; rc=1; }
done
if grep -l -E "error while loading shared libraries|no LLVM|cannot load" "$D"/out/logs/*.log; then
  echo "gpu-kit --dry-run: a program could not load what it needs (the logs above)"
  rc=1
fi
[ $rc -eq 0 ] && echo "gpu-kit --dry-run: ok" && rm -rf "$D"
exit $rc
