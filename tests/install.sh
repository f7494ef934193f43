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
out=$(LD_LIBRARY_PATH="$tmp/lib" "$tmp/consumer")
echo "consumer: $out"
case "$out" in "0 0.1.0 "[0-9a-f]*" 4.5") ;; *) echo "install: unexpected output"; exit 1 ;; esac
# only the public API is exported
leaked=$(nm -D --defined-only "$tmp/lib/libxpjit.so.0" | awk '{print $3}' |
  grep -E '^(rt_|xpj_llvm_enter|xpj_worker|xpj_(malloc|calloc|realloc|free|strdup|grow|walk|check_calls|set_error|typeinfo_of|buf_|lex|number_values))' || true)
[ -z "$leaked" ] || { echo "install: internal symbols exported: $leaked"; exit 1; }
echo "install: ok"
