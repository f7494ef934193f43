#!/bin/sh
# xpjit-cli cache and bundle: the acceptance path of the cache issue (a
# bundle built for the examples makes them run with zero compiles on a
# clean cache, whether imported or loaded through XPJIT_BUNDLE_PATH, as
# `cache stats` shows) and the tools' behaviour, JSON and exit statuses.
set -u
B=${BUILD:-build}
CLI="$B/bin/xpjit-cli"
T=$(mktemp -d /tmp/xpjit-cachecli-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# value of a numeric field in one-line JSON
jnum() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }
run_examples() {
  for e in "saxpy 100000" "reduction 100000" "matmul 64 48 32"; do
    set -- $e
    e=$1
    "$B/examples/$@" >"$T/out.$e" 2>&1 || { bad "$e failed"; cat "$T/out.$e"; }
    grep -q correct "$T/out.$e" || bad "$e: not correct"
  done
}

# -- build the bundle (the examples' kernels, two dtypes, three targets)
"$CLI" bundle build examples/saxpy.xpk examples/reduce.xpk examples/matmul.xpk \
  --dtype T=f32,f64 --target cpu --target spirv --target ptx:sm_80,sm_90 \
  -o "$T/ex.xpb" 2>"$T/build.err" || { bad "bundle build"; cat "$T/build.err"; }
grep -q "kernels (" "$T/build.err" || bad "bundle build: no summary"
"$CLI" bundle verify "$T/ex.xpb" >/dev/null || bad "bundle verify"
"$CLI" bundle ls "$T/ex.xpb" | grep -q "ptx:sm_90" || bad "bundle ls: no sm_90"
"$CLI" bundle ls "$T/ex.xpb" --json | grep -q '"usable": true' || bad "bundle ls --json"

# -- loaded through XPJIT_BUNDLE_PATH on a clean cache: zero compiles
export XPJIT_CACHE_DIR="$T/c1"
XPJIT_BUNDLE_PATH="$T/ex.xpb" run_examples
s=$("$CLI" cache stats --json)
[ "$(echo "$s" | jnum compiles)" = 0 ] || bad "bundle path: compiles: $s"
[ "$(echo "$s" | jnum bundle_hits)" = 3 ] || bad "bundle path: bundle hits: $s"

# -- imported into a clean cache: zero compiles, served from the cache
export XPJIT_CACHE_DIR="$T/c2"
"$CLI" bundle import "$T/ex.xpb" | grep -q "imported 72 entries" || bad "import count"
run_examples
s=$("$CLI" cache stats --json)
[ "$(echo "$s" | jnum compiles)" = 0 ] || bad "import: compiles: $s"
[ "$(echo "$s" | jnum l2_hits)" = 3 ] || bad "import: l2 hits: $s"
[ "$(echo "$s" | jnum entries)" = 72 ] || bad "import: entries: $s"

# -- without either: the examples compile, and a second run does not
export XPJIT_CACHE_DIR="$T/c3"
run_examples
[ "$("$CLI" cache stats --json | jnum compiles)" = 3 ] || bad "cold: 3 compiles"
run_examples
[ "$("$CLI" cache stats --json | jnum compiles)" = 3 ] || bad "warm: compiled again"
"$CLI" cache stats | grep -q "^compiles: *3" || bad "stats text"

# -- the tools
"$CLI" cache ls | grep -q saxpy || bad "cache ls"
n=$("$CLI" cache ls --json | grep -o '"digest"' | wc -l)
[ "$n" = 3 ] || bad "cache ls --json: $n entries"
d=$("$CLI" cache ls --json | sed -n 's/.*"digest": "\([0-9a-f]*\)".*/\1/p' | head -1)
"$CLI" cache show "$(echo "$d" | cut -c1-12)" | grep -q "^key:" || bad "cache show"
"$CLI" cache show "$d" -o "$T/bin.o" >/dev/null && [ -s "$T/bin.o" ] || bad "cache show -o"
"$CLI" cache show ffff0000 >/dev/null 2>&1; [ $? = 1 ] || bad "show missing: exit 1"
"$CLI" cache show xyz >/dev/null 2>&1; [ $? = 2 ] || bad "show bad digest: exit 2"
"$CLI" cache verify | grep -q "3 entries checked, 0 bad" || bad "cache verify"
"$CLI" cache export "$T/mine.xpb" | grep -q "exported 3" || bad "cache export"
"$CLI" bundle verify "$T/mine.xpb" >/dev/null || bad "exported bundle verify"
# damage one row: verify finds it (exit 1), --repair removes it
sqlite3 "$T/c3/cache-v2.db" "UPDATE entries SET data = zeroblob(64) WHERE digest = '$d'"
"$CLI" cache verify >/dev/null; [ $? = 1 ] || bad "verify: damage not found"
"$CLI" cache verify --repair --json | grep -q '"bad": 1' || bad "verify --repair"
"$CLI" cache verify >/dev/null || bad "verify after repair"
"$CLI" cache prune --max-size 1 --json | grep -q '"removed": 2' || bad "prune --max-size"
"$CLI" cache prune --older-than 1d | grep -q "removed 0" || bad "prune --older-than"
"$CLI" cache clear >/dev/null || bad "cache clear"
[ "$("$CLI" cache stats --json | jnum entries)" = 0 ] || bad "clear: entries"
[ "$("$CLI" cache stats --json | jnum compiles)" = 0 ] || bad "clear: counters"

# -- bad input: clear errors and statuses, never a crash
"$CLI" cache frobnicate >/dev/null 2>&1; [ $? = 2 ] || bad "unknown cache command"
"$CLI" cache prune --max-size 12Q >/dev/null 2>&1; [ $? = 2 ] || bad "bad size"
"$CLI" cache prune --older-than soon >/dev/null 2>&1; [ $? = 2 ] || bad "bad duration"
"$CLI" bundle build examples/saxpy.xpk --target cpu >/dev/null 2>&1; [ $? = 2 ] || bad "build without -o"
"$CLI" bundle build examples/saxpy.xpk --dtype T=f33 --target cpu -o "$T/x.xpb" >/dev/null 2>&1
[ $? = 2 ] || bad "bad dtype"
"$CLI" bundle build examples/saxpy.xpk --dtype T=f32 --target gpu -o "$T/x.xpb" >/dev/null 2>&1
[ $? = 2 ] || bad "bad target"
"$CLI" bundle build examples/saxpy.xpk --dtype U=f32 --target cpu -o "$T/x.xpb" >/dev/null 2>&1
[ $? = 1 ] || bad "nothing to compile"
head -c 5000 /dev/urandom >"$T/junk.xpb"
"$CLI" bundle ls "$T/junk.xpb" >/dev/null 2>&1; [ $? = 1 ] || bad "bundle ls junk"
"$CLI" bundle import "$T/junk.xpb" >/dev/null 2>&1; [ $? = 1 ] || bad "bundle import junk"
"$CLI" bundle verify "$T/nonexistent.xpb" >/dev/null 2>&1; [ $? = 1 ] || bad "verify missing"
# a bundle from another version is refused by verify and ignored by programs
cp "$T/mine.xpb" "$T/old.xpb"
sqlite3 "$T/old.xpb" "UPDATE meta SET value='xpjit=0.0.1;llvm=17.0.0;abi=1' WHERE name='versions'"
"$CLI" bundle verify "$T/old.xpb" >/dev/null 2>&1; [ $? = 1 ] || bad "verify old bundle"
export XPJIT_CACHE_DIR="$T/c4"
XPJIT_BUNDLE_PATH="$T/old.xpb" "$B/examples/saxpy" 1000 >"$T/o" 2>&1 || bad "saxpy with old bundle"
grep -q "is not used: it was built by xpjit=0.0.1" "$T/o" || bad "old bundle: no message"
# the cache directory cannot be made: a warning, and the program still works
XPJIT_CACHE_DIR=/proc/xpjit-nope "$B/examples/saxpy" 1000 >"$T/o" 2>&1 || bad "saxpy, no cache dir"
grep -q "without caching" "$T/o" || bad "no warning without a cache dir"
XPJIT_CACHE=off "$B/examples/saxpy" 1000 >/dev/null 2>&1 || bad "XPJIT_CACHE=off"
[ $fail = 0 ] && echo "cache_cli: all checks passed"
exit $fail
