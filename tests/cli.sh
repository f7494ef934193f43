#!/bin/sh
# xpjit-cli behaviour: exit statuses (0 ok, 1 input errors, 2 usage),
# --help and --version everywhere, output files, stdin.
set -u
CLI=${CLI:-build/bin/xpjit-cli}
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

expect() { # status command...
  want=$1
  shift
  "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: '$*' exited $got, want $want"
    cat "$tmp/err" | head -5
    fail=1
  fi
}

expect 0 "$CLI" --help
expect 0 "$CLI" --version
grep -q '^xpjit-cli [0-9]' "$tmp/out" || { echo "FAIL: --version output"; fail=1; }
expect 0 "$CLI" check --help
expect 0 "$CLI" ir --help
expect 0 "$CLI" check --version
expect 0 "$CLI" ir --version
expect 2 "$CLI"
expect 2 "$CLI" frobnicate
expect 2 "$CLI" check
expect 2 "$CLI" check --bogus examples/axpy.xpk
expect 2 "$CLI" ir
expect 2 "$CLI" ir examples/axpy.xpk --kernel
expect 2 "$CLI" ir examples/axpy.xpk --kernel axpy --ndim 0
expect 2 "$CLI" ir examples/axpy.xpk --kernel axpy --ndim 2x
expect 2 "$CLI" ir examples/axpy.xpk --kernel axpy --dtype T
expect 2 "$CLI" ir examples/axpy.xpk --kernel axpy --dtype T=float
expect 2 "$CLI" ir examples/axpy.xpk --dtype T=f32
expect 2 "$CLI" ir examples/axpy.xpk examples/reduce.xpk
expect 0 "$CLI" check examples/*.xpk
expect 1 "$CLI" check examples/axpy.xpk tests/golden/errors.xpk
expect 1 "$CLI" check /nonexistent.xpk
expect 1 "$CLI" check /
expect 1 "$CLI" ir examples/axpy.xpk --kernel nope --dtype T=f32 --ndim 1
expect 1 "$CLI" ir examples/axpy.xpk --kernel axpy --dtype T=f32
# garbage input is an input error, never a crash
head -c 4096 /dev/urandom >"$tmp/garbage.xpk"
expect 1 "$CLI" check "$tmp/garbage.xpk"
# output to a file and to stdout with -o -, input from stdin
expect 0 "$CLI" ir examples/axpy.xpk --kernel axpy --dtype T=f32 --ndim 2 -o "$tmp/ir.txt"
tail -1 "$tmp/ir.txt" | grep -Eq '^; sha256 [0-9a-f]{64}$' || { echo "FAIL: -o output"; fail=1; }
h1=$("$CLI" ir examples/axpy.xpk --kernel axpy --dtype T=f32 --ndim 2 --hash -o -)
h2=$("$CLI" ir /dev/stdin --kernel axpy --dtype T=f32 --ndim 2 --hash <examples/axpy.xpk)
[ "$h1" = "$h2" ] && [ ${#h1} -eq 64 ] || { echo "FAIL: stdin hash '$h2' != '$h1'"; fail=1; }
# the hash is the same in every process
h3=$("$CLI" ir examples/axpy.xpk --kernel axpy --dtype T=f32 --ndim 2 --hash)
[ "$h1" = "$h3" ] || { echo "FAIL: hash differs between runs"; fail=1; }
expect 1 "$CLI" ir examples/axpy.xpk --kernel axpy --dtype T=f32 --ndim 2 -o /nonexistent/dir/x
[ $fail -eq 0 ] && echo "cli: all checks passed"
exit $fail
