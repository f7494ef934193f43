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
make -s install PREFIX="$tmp" >/dev/null
export PKG_CONFIG_PATH="$tmp/lib/pkgconfig"
cc tests/install_consumer.c $(pkg-config --cflags --libs xpjit) -o "$tmp/consumer"
out=$(LD_LIBRARY_PATH="$tmp/lib" "$tmp/consumer") ||
  { echo "install: the consumer failed: $out"; exit 1; }
echo "consumer: $out"
case "$out" in "0 0.1.0 "[0-9a-f]*" 4.5 -2.25") ;; *) echo "install: unexpected output"; exit 1 ;; esac
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
"$tmp/bin/xpjitd" --version | grep -q "protocol 3" ||
  { echo "install: xpjitd --version"; exit 1; }
u="$tmp/lib/systemd/user"
[ -f "$u/xpjitd.socket" ] || { echo "install: no xpjitd.socket"; exit 1; }
grep -qx "ExecStart=$tmp/bin/xpjitd --foreground --idle-exit 600" \
  "$u/xpjitd.service" || { echo "install: xpjitd.service ExecStart"; exit 1; }
if command -v systemd-analyze >/dev/null 2>&1; then
  mkdir -m 700 "$tmp/run"
  XDG_RUNTIME_DIR="$tmp/run" systemd-analyze verify --user \
    "$u/xpjitd.socket" "$u/xpjitd.service" ||
    { echo "install: systemd-analyze verify failed"; exit 1; }
fi
echo "install: ok"
