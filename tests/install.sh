#!/bin/sh
# make install into a temporary prefix, then build and run a consumer of the
# shared library found through pkg-config; check the exported symbols.
set -eu
B=${BUILD:-build}
if [ "$B" != build ]; then
  echo "install: skipped in the $B build (the consumer is built without sanitizers)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
V=$(sed -n 's/^#define XPJ_VERSION_STRING "\(.*\)"/\1/p' include/xpjit_ir.h)
# run WHAT PROGRAM [VAR=VALUE...]: the consumer prints what it should
run() {
  what=$1 prog=$2
  shift 2
  out=$(env "$@" "$prog") || { echo "install: $what failed: $out"; exit 1; }
  case "$out" in
  "0 $V "[0-9a-f]*" 4.5 -2.25") echo "install: $what: $out" ;;
  *) echo "install: $what: unexpected output: $out"; exit 1 ;;
  esac
}
# needs PROGRAM: it loads libxpjit.so.0
needs() { readelf -d "$1" | grep -q 'NEEDED.*libxpjit\.so\.0'; }

# 1. the build tree: PKG_CONFIG_PATH=build/lib finds xpjit-uninstalled.pc,
# whose rpath lets the program run as it is
cc tests/install_consumer.c \
  $(PKG_CONFIG_PATH="$B/lib" pkg-config --cflags --libs xpjit) \
  -o "$tmp/consumer-tree"
needs "$tmp/consumer-tree" ||
  { echo "install: the build-tree consumer does not load libxpjit.so.0"; exit 1; }
run "build tree, pkg-config (xpjit-uninstalled.pc)" "$tmp/consumer-tree" \
  LD_LIBRARY_PATH=

make -s install PREFIX="$tmp" >/dev/null
[ "$(readlink "$tmp/lib/libxpjit.so.0")" = "libxpjit.so.$V" ] &&
  [ "$(readlink "$tmp/lib/libxpjit.so")" = libxpjit.so.0 ] &&
  [ -f "$tmp/lib/libxpjit.so.$V" ] || {
  echo "install: want libxpjit.so -> libxpjit.so.0 -> libxpjit.so.$V"
  ls -l "$tmp/lib"; exit 1; }
export PKG_CONFIG_PATH="$tmp/lib/pkgconfig"
# 2. installed, shared, through pkg-config
cc tests/install_consumer.c $(pkg-config --cflags --libs xpjit) -o "$tmp/consumer"
run "installed, shared, pkg-config" "$tmp/consumer" LD_LIBRARY_PATH="$tmp/lib"
# 2b. the same found through a relative LD_LIBRARY_PATH, compiling (no
# cache, no daemon): the LLVM plugin beside libxpjit.so is found (dladdr
# names the library relative to the working directory)
out=$(cd "$tmp" && env -u XPJIT_LLVM_PLUGIN LD_LIBRARY_PATH=lib XPJIT_CACHE=off XPJIT_DAEMON=off \
  ./consumer) || { echo "install: a relative LD_LIBRARY_PATH: $out"; exit 1; }
case "$out" in
"0 $V "[0-9a-f]*" 4.5 -2.25") echo "install: relative LD_LIBRARY_PATH: $out" ;;
*) echo "install: a relative LD_LIBRARY_PATH: unexpected output: $out"; exit 1 ;;
esac
# 3. installed, static, through pkg-config --static, whose libraries are
# all it takes (-l:libxpjit.a picks the archive over the shared library)
cc tests/install_consumer.c $(pkg-config --cflags xpjit) \
  $(pkg-config --static --libs xpjit | sed 's/-lxpjit\b/-l:libxpjit.a/') \
  -o "$tmp/consumer-static"
if needs "$tmp/consumer-static"; then
  echo "install: the static consumer loads libxpjit.so.0"; exit 1
fi
run "installed, static, pkg-config --static" "$tmp/consumer-static" \
  LD_LIBRARY_PATH=
# 4. installed, through CMake's find_package: xpjit::xpjit and
# xpjit::xpjit_static (CMake puts the library's directory in the rpath)
if command -v cmake >/dev/null 2>&1; then
  cm="$tmp/cmake"
  mkdir "$cm"
  cp tests/install_consumer.c "$cm/consumer.c"
  sed "s/@V@/$V/" > "$cm/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.13)
project(consumer C)
find_package(xpjit @V@ REQUIRED)
if(NOT xpjit_VERSION STREQUAL "@V@")
  message(FATAL_ERROR "xpjit_VERSION is ${xpjit_VERSION}")
endif()
add_executable(consumer_shared consumer.c)
target_link_libraries(consumer_shared PRIVATE xpjit::xpjit)
add_executable(consumer_static consumer.c)
target_link_libraries(consumer_static PRIVATE xpjit::xpjit_static)
EOF
  { cmake -S "$cm" -B "$cm/b" -DCMAKE_PREFIX_PATH="$tmp" &&
    cmake --build "$cm/b"; } >"$cm/log" 2>&1 ||
    { cat "$cm/log"; echo "install: the CMake consumer did not build"; exit 1; }
  run "installed, CMake xpjit::xpjit" "$cm/b/consumer_shared" LD_LIBRARY_PATH=
  needs "$cm/b/consumer_shared" ||
    { echo "install: xpjit::xpjit is not the shared library"; exit 1; }
  run "installed, CMake xpjit::xpjit_static" "$cm/b/consumer_static" \
    LD_LIBRARY_PATH=
  if needs "$cm/b/consumer_static"; then
    echo "install: xpjit::xpjit_static loads libxpjit.so.0"; exit 1
  fi
  # versions it is not are refused: a later one, and another 0.x minor
  for want in 9.9 0.99; do
    sed -i "s/^find_package(xpjit .* REQUIRED)/find_package(xpjit $want REQUIRED)/" \
      "$cm/CMakeLists.txt"
    rm -rf "$cm/b2"
    if cmake -S "$cm" -B "$cm/b2" -DCMAKE_PREFIX_PATH="$tmp" >"$cm/log2" 2>&1; then
      echo "install: find_package(xpjit $want) accepted version $V"; exit 1
    fi
  done
elif [ -n "${XPJIT_REQUIRE_TOOLS:-}" ]; then
  echo "install: no cmake (tools/deps.sh installs it)"; exit 1
else
  echo "install: skipped the CMake consumer (no cmake; tools/deps.sh installs it)"
fi
# every exported symbol is of version XPJIT_0 and declared in a public
# header; the static library defines the same names and no other
nm -D --defined-only "$tmp/lib/libxpjit.so.0" |
  awk '$3 != "XPJIT_0" {print $3}' > "$tmp/dyn"
unversioned=$(grep -v '@@XPJIT_0$' "$tmp/dyn" || true)
[ -z "$unversioned" ] ||
  { echo "install: exported without version XPJIT_0: $unversioned"; exit 1; }
sed 's/@@XPJIT_0$//' "$tmp/dyn" | sort > "$tmp/dyn.names"
for s in $(cat "$tmp/dyn.names"); do
  grep -qw "$s" include/*.h ||
    { echo "install: $s is exported but declared in no public header"; exit 1; }
done
# and the other way: every function a public header declares is exported
# (xpj_checks_parse, xpj_limit_* and xpj_coll_* were not, and a program
# calling them did not link; found probing the C API)
for s in $(grep -ho '^[a-z][a-z0-9_ *]*[ *]xpj_[a-z0-9_]*(' include/*.h |
           grep -o 'xpj_[a-z0-9_]*($' | sed 's/($//' | sort -u); do
  grep -qx "$s" "$tmp/dyn.names" ||
    { echo "install: $s is declared in a public header but not exported"; exit 1; }
done
nm -g --defined-only "$tmp/lib/libxpjit.a" | awk 'NF == 3 {print $3}' |
  sort > "$tmp/static.names"
cmp -s "$tmp/dyn.names" "$tmp/static.names" || {
  echo "install: libxpjit.a's globals are not libxpjit.so's:"
  diff "$tmp/dyn.names" "$tmp/static.names" | head -20; exit 1; }
# only the public API is exported
leaked=$(nm -D --defined-only "$tmp/lib/libxpjit.so.0" | awk '{print $3}' |
  grep -E '^(rt_|xpd_|xpj_llvm_enter|xpj_llvm_fork|xpj_llvm_init|xpj_worker|xpj_cs_|xpj_job|xpj_generic|xpj_module_(en|de)code|xpj_(malloc|calloc|realloc|free|strdup|grow|walk|check_calls|set_error|typeinfo_of|buf_|lex|number_values))' || true)
[ -z "$leaked" ] || { echo "install: internal symbols exported: $leaked"; exit 1; }
# libxpjit does not link LLVM; its plugin, beside it, exports its table only
# (docs/api.md, "Where LLVM is loaded")
# nor the C++ runtime: SPIRV-Tools is in the validator plugin
if readelf -d "$tmp/lib/libxpjit.so.0" | grep -q 'NEEDED.*\(libLLVM\|libstdc++\)'; then
  echo "install: libxpjit.so.0 links libLLVM or libstdc++"; exit 1
fi
for p in llvm spirv; do
  plug=$(nm -D --defined-only "$tmp/lib/libxpjit-$p.so.0" | awk '{print $3}' |
    grep -v "^xpj_${p}_plugin_api\$" || true)
  [ -z "$plug" ] || { echo "install: libxpjit-$p.so.0 exports more than its table: $plug"; exit 1; }
  nm -D --defined-only "$tmp/lib/libxpjit-$p.so.0" | grep -q " xpj_${p}_plugin_api\$" ||
    { echo "install: libxpjit-$p.so.0 has no table"; exit 1; }
done
# the daemon and its systemd user units, with the prefix filled in
[ -x "$tmp/bin/xpjitd" ] || { echo "install: no xpjitd"; exit 1; }
proto=$(sed -n 's/^#define XPD_VERSION \([0-9]*\)$/\1/p' runtime/proto.h)
"$tmp/bin/xpjitd" --version | grep -q "(protocol $proto)" ||
  { echo "install: xpjitd --version"; exit 1; }
# the daemon does not link LLVM; its workers compile with the plugin
# installed beside it (docs/api.md, "Where LLVM is loaded")
if readelf -d "$tmp/bin/xpjitd" | grep -q 'NEEDED.*\(libLLVM\|libstdc++\)'; then
  echo "install: xpjitd links libLLVM or libstdc++"; exit 1
fi
mkdir -m 700 "$tmp/dcache"
XPJIT_CACHE_DIR="$tmp/dcache" "$tmp/bin/xpjitd" --socket "$tmp/d.sock" --idle-exit 30 >/dev/null ||
  { echo "install: the installed xpjitd did not start"; exit 1; }
XPJIT_DAEMON="$tmp/d.sock" XPJIT_CACHE=off build/examples/saxpy | grep -q correct ||
  { echo "install: saxpy through the installed xpjitd"; exit 1; }
dstats=$("$tmp/bin/xpjit-cli" daemon stats --socket "$tmp/d.sock")
"$tmp/bin/xpjit-cli" daemon stop --socket "$tmp/d.sock" >/dev/null
echo "$dstats" | grep -qx "compiles 1" && echo "$dstats" | grep -qx "compile_failures 0" ||
  { echo "install: the installed xpjitd's worker did not compile:"; echo "$dstats" | grep compile; exit 1; }
u="$tmp/lib/systemd/user"
[ -f "$u/xpjitd.socket" ] || { echo "install: no xpjitd.socket"; exit 1; }
grep -qx "ExecStart=$tmp/bin/xpjitd --foreground --idle-exit 600" \
  "$u/xpjitd.service" || { echo "install: xpjitd.service ExecStart"; exit 1; }
grep -qx "Type=notify" "$u/xpjitd.service" ||
  { echo "install: xpjitd.service is not Type=notify"; exit 1; }
# man pages and bash completion
man_ok=no
if [ -f "$tmp/share/man/man1/xpjit-cli.1" ] && [ -f "$tmp/share/man/man8/xpjitd.8" ] &&
  [ -f "$tmp/share/man/man7/xpjit.7" ]; then
  man_ok=yes
  grep -q 'XPJIT_CACHE_DIR' "$tmp/share/man/man7/xpjit.7" ||
    { echo "install: xpjit(7) lists no XPJIT_CACHE_DIR"; exit 1; }
elif [ -n "${XPJIT_REQUIRE_TOOLS:-}" ] || command -v scdoc >/dev/null 2>&1; then
  echo "install: man pages missing in $tmp/share/man"; ls -R "$tmp/share" 2>/dev/null | head; exit 1
else
  echo "install: skipped the man pages (no scdoc; tools/deps.sh installs it)"
fi
[ -f "$tmp/share/bash-completion/completions/xpjit-cli" ] ||
  { echo "install: no bash completion"; exit 1; }
if command -v systemd-analyze >/dev/null 2>&1; then
  mkdir -m 700 "$tmp/run"
  # Documentation=man:... is checked against the pages just installed
  # where man(1) is there to look them up
  man_arg=--man=no
  [ $man_ok = yes ] && command -v man >/dev/null 2>&1 && man_arg=--man=yes
  MANPATH="$tmp/share/man" XDG_RUNTIME_DIR="$tmp/run" systemd-analyze verify \
    $man_arg --user "$u/xpjitd.socket" "$u/xpjitd.service" ||
    { echo "install: systemd-analyze verify failed"; exit 1; }
  # the sandbox: 9.8 UNSAFE before it; at most 2.0 ("OK"; 1.6 measured)
  score=$(XDG_RUNTIME_DIR="$tmp/run" systemd-analyze security --offline=true \
    --user "$u/xpjitd.service" 2>/dev/null |
    sed -n 's/.*Overall exposure level for xpjitd.service: \([0-9.]*\).*/\1/p')
  if [ -n "$score" ]; then
    awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' ||
      { echo "install: systemd-analyze security rates xpjitd.service $score"; exit 1; }
    echo "install: systemd-analyze security: xpjitd.service $score"
  fi
fi
echo "install: ok"
