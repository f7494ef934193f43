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
# const parameters (--const NAME=VALUE): a value is part of the kernel,
# written in any form; errors in the value are input errors once the
# kernel's parameter types are known, malformed options usage errors
G=tests/golden/constgen.xpk
c1=$("$CLI" ir $G --kernel stencil --dtype T=f32 --const TS=16 --hash)
c2=$("$CLI" ir $G --kernel stencil --dtype T=f32 --const TS=0x10 --hash)
c3=$("$CLI" ir $G --kernel stencil --dtype T=f32 --const TS=8 --hash)
{ [ ${#c1} -eq 64 ] && [ "$c1" = "$c2" ] && [ "$c1" != "$c3" ]; } ||
  { echo "FAIL: const hashes '$c1' '$c2' '$c3'"; fail=1; }
"$CLI" ir $G --kernel stencil --dtype T=f64 --const TS=4 | grep -q 'local f64\[6, 6\]' ||
  { echo "FAIL: ir --const: no 6 x 6 tile"; fail=1; }
expect 0 "$CLI" check $G
expect 2 "$CLI" ir $G --const TS=16
expect 2 "$CLI" ir $G --kernel stencil --dtype T=f32 --const TS
expect 2 "$CLI" ir $G --kernel stencil --dtype T=f32 --const TS=
expect 2 "$CLI" ir $G --kernel stencil --dtype T=f32 --const =16
expect 2 "$CLI" ir $G --kernel stencil --dtype T=f32 --const TS=sixteen
expect 2 "$CLI" ir $G --kernel stencil --dtype T=f32 --dtype TS=16
expect 1 "$CLI" ir $G --kernel stencil --dtype T=f32
expect 1 "$CLI" ir $G --kernel stencil --dtype T=f32 --const TS=16 --const X=1
expect 1 "$CLI" ir $G --kernel stencil --dtype T=f32 --const TS=true
expect 1 "$CLI" ir $G --kernel stencil --dtype T=f32 --const TS=65
grep -q "more than 4096 work-items (with T=f32, TS=65)" "$tmp/err" ||
  { echo "FAIL: --const TS=65: $(cat "$tmp/err")"; fail=1; }
expect 1 "$CLI" ir $G --kernel stencil --const T=16 --const TS=16
grep -q "'T' is a type parameter of kernel 'stencil'" "$tmp/err" ||
  { echo "FAIL: --const T=16: $(cat "$tmp/err")"; fail=1; }
expect 0 "$CLI" emit $G --kernel stencil --dtype T=f32 --const TS=16 --target cpu --emit asm
expect 0 "$CLI" emit $G --kernel stencil --dtype T=f32 --const TS=16 --target spirv -o "$tmp/s.spv"
expect 1 "$CLI" emit $G --kernel stencil --dtype T=f32 --const TS=0 --target cpu
expect 2 "$CLI" emit $G --kernel stencil --dtype T=f32 --const TS=x --target cpu
# emit: usage errors (2), input and compile errors (1)
expect 0 "$CLI" emit --help
expect 2 "$CLI" emit
expect 2 "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32
expect 2 "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target gpu
expect 2 "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target ptx:sm_61
expect 2 "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target cpu --emit exe
expect 2 "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target cpu -O7
expect 2 "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target cpu --timeout 0
expect 1 "$CLI" emit examples/reduce.xpk --kernel nope --dtype T=f32 --target cpu -o "$tmp/x"
expect 1 "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=bool --target cpu -o "$tmp/x"
expect 1 "$CLI" emit "$tmp/garbage.xpk" --kernel k --target spirv -o "$tmp/x"
expect 1 "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target spirv -o /nonexistent/dir/x
XPJIT_LIBDEVICE=/nonexistent expect 1 "$CLI" emit examples/math.xpk --kernel math_table --dtype T=f32 --target ptx:sm_90 -o "$tmp/x"
grep -q "libdevice" "$tmp/err" || { echo "FAIL: no libdevice message"; fail=1; }
# every output kind, to a file and to stdout
for t in spirv ptx:sm_90 cpu cpu:x86-64; do
  for e in bin asm llvm; do
    expect 0 "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target $t --emit $e -o "$tmp/o.$e"
    [ -s "$tmp/o.$e" ] || { echo "FAIL: empty $t $e output"; fail=1; }
  done
  # the same bytes from another process (determinism), also through stdout
  "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target $t --emit bin -o - >"$tmp/o2.bin"
  cmp -s "$tmp/o.bin" "$tmp/o2.bin" || { echo "FAIL: $t output differs between processes"; fail=1; }
done
"$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target spirv --emit bin -o "$tmp/b.spv"
od -An -tx4 -N4 "$tmp/b.spv" | grep -q 07230203 || { echo "FAIL: SPIR-V magic"; fail=1; }
"$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target cpu -o "$tmp/b.o"
od -An -c -N4 "$tmp/b.o" | grep -q 'E   L   F' || { echo "FAIL: ELF magic"; fail=1; }
"$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target ptx:sm_80 -o - | grep -q '^.target sm_80' || { echo "FAIL: PTX target"; fail=1; }
"$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target spirv --emit asm -o - | grep -q 'OpControlBarrier' || { echo "FAIL: SPIR-V asm"; fail=1; }
expect 0 "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target ptx:sm_90 --no-isolate -O3 --fast-math -g -o "$tmp/x"
# --timeout bounds the worker: with --no-isolate there is none, a usage error
expect 2 "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target cpu --no-isolate --timeout 100 -o "$tmp/x"
grep -q -- "--no-isolate compiles without one" "$tmp/err" || { echo "FAIL: no message for --timeout with --no-isolate"; fail=1; }
# the worker's memory limit: running out is a compile error that says so;
# a malformed limit is a warning, and the default applies
# (not under AddressSanitizer, whose allocator dies of a failed mmap first)
if ldd "$CLI" 2>/dev/null | grep -q libasan; then
  echo "cli: NOTE: the out-of-memory check is skipped under AddressSanitizer"
else
  expect 1 env XPJIT_COMPILE_MEMORY_LIMIT=1M "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target cpu -o "$tmp/x"
  grep -q "error: out of memory: the compile needs more than the 1 MiB of memory a compile worker may use" "$tmp/err" || { echo "FAIL: no out-of-memory message"; fail=1; }
fi
expect 0 env XPJIT_COMPILE_MEMORY_LIMIT=lots "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target cpu -o "$tmp/x"
grep -q "warning: XPJIT_COMPILE_MEMORY_LIMIT=lots is not a size" "$tmp/err" || { echo "FAIL: no warning for a malformed memory limit"; fail=1; }
expect 0 env XPJIT_COMPILE_MEMORY_LIMIT=256M "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target spirv -o "$tmp/x"
# env: the table of XPJIT_* variables; docs/environment.md is its output,
# and every "XPJIT_..." name the sources quote is in it
expect 0 "$CLI" env
grep -q '^XPJIT_CACHE_DIR' "$tmp/out" || { echo "FAIL: env lists no XPJIT_CACHE_DIR"; fail=1; }
expect 0 env XPJIT_LOG=info "$CLI" env
grep -q '^XPJIT_LOG=info$' "$tmp/out" || { echo "FAIL: env does not show XPJIT_LOG=info"; fail=1; }
expect 1 env XPJIT_CACHEDIR=/x "$CLI" env
grep -q 'XPJIT_CACHEDIR (did you mean XPJIT_CACHE_DIR?)' "$tmp/out" || { echo "FAIL: env does not name the typo"; fail=1; }
expect 2 "$CLI" env --frob
"$CLI" env --markdown --all > "$tmp/env.md"
sed -n '/^<!-- generated: xpjit-cli env/,/^<!-- end of generated table/p' docs/environment.md |
  sed '1d;$d' > "$tmp/env.doc"
cmp -s "$tmp/env.md" "$tmp/env.doc" || {
  echo "FAIL: docs/environment.md's table is not 'xpjit-cli env --markdown --all' (regenerate it)"
  diff "$tmp/env.doc" "$tmp/env.md" | head -10; fail=1; }
grep -rhoE --exclude=test_env.c '"XPJIT_[A-Z0-9_]+"' ir compiler runtime cache tools tests examples python bench |
  tr -d '"' | sort -u | grep -vx XPJIT_0 > "$tmp/used"
for v in $(cat "$tmp/used"); do
  grep -q "^| \`$v\` " "$tmp/env.md" || { echo "FAIL: $v is read but not in ir/env.c's table"; fail=1; }
done
# XPJIT_LOG from a program: nothing but warnings by default, a line per
# kernel at info, not even warnings at error
EX=${CLI%/bin/xpjit-cli}/examples/saxpy
if [ -x "$EX" ]; then
  XPJIT_CACHE=off XPJIT_DAEMON=off XPJIT_CPU_THREADS=abc "$EX" >/dev/null 2>"$tmp/err"
  grep -q "warning: XPJIT_CPU_THREADS=abc is not a number" "$tmp/err" || { echo "FAIL: no warning for XPJIT_CPU_THREADS=abc"; fail=1; }
  ! grep -q "info:" "$tmp/err" || { echo "FAIL: info lines without XPJIT_LOG"; fail=1; }
  XPJIT_LOG=info XPJIT_CACHE=off XPJIT_DAEMON=off "$EX" >/dev/null 2>"$tmp/err"
  grep -q "^xpjit: info: kernel saxpy (T=f32) for cpu:0: compiled in .* \[key [0-9a-f]\{16\}; disk none, bundles none, daemon none, Redis none\]$" "$tmp/err" ||
    { echo "FAIL: XPJIT_LOG=info: no line for saxpy's compile"; cat "$tmp/err"; fail=1; }
  XPJIT_LOG=error XPJIT_CACHE=off XPJIT_DAEMON=off XPJIT_CPU_THREADS=abc "$EX" >/dev/null 2>"$tmp/err"
  [ ! -s "$tmp/err" ] || { echo "FAIL: XPJIT_LOG=error printed:"; cat "$tmp/err"; fail=1; }
fi
[ $fail -eq 0 ] && echo "cli: all checks passed"
exit $fail
