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
# the kernels for checking PTX pipeline changes (docs/benchmarks.md) stay valid
expect 0 "$CLI" check bench/pipeline/*.xpk
expect 1 "$CLI" check examples/axpy.xpk tests/golden/errors.xpk
expect 1 "$CLI" check /nonexistent.xpk
expect 1 "$CLI" check /
# a file that cannot be read says why (it said "is it a directory?" for
# /proc/self/mem too: an outside probe)
grep -q "cannot read file: Is a directory" "$tmp/err" ||
  { echo "FAIL: check / said: $(cat "$tmp/err")"; fail=1; }
expect 1 "$CLI" check /proc/self/mem
grep -q "cannot read file: Input/output error" "$tmp/err" ||
  { echo "FAIL: check /proc/self/mem said: $(cat "$tmp/err")"; fail=1; }
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
# an empty item in a CPU feature list is a usage error, for emit as for
# bundle build (the library takes the list as it is, LLVM passes over the
# empty item: +avx2,, compiled as +avx2 under a key of its own); an empty
# list is the form of no feature (an outside probe)
for t in 'cpu:x86-64:+avx2,,' 'cpu:x86-64:+avx2,' 'cpu:x86-64:,+avx2' 'cpu:x86-64:+avx2,,-sse4a'; do
  expect 2 "$CLI" emit examples/saxpy.xpk --kernel saxpy --dtype T=f32 --target "$t" -o "$tmp/ft.o"
  grep -q "an empty item in the CPU feature list of '$t'" "$tmp/err" || { echo "FAIL: emit --target $t: $(cat "$tmp/err")"; fail=1; }
  [ ! -e "$tmp/ft.o" ] || { echo "FAIL: emit --target $t wrote its output"; fail=1; }
  case $t in *:,*) continue ;; esac # (bundle build: below)
  expect 2 "$CLI" bundle build examples/saxpy.xpk --dtype T=f32 --target "$t" -o "$tmp/x.xpb"
done
expect 0 "$CLI" emit examples/saxpy.xpk --kernel saxpy --dtype T=f32 --target cpu:x86-64: -o "$tmp/x"
# (bundle build's --target is a list: cpu:x86-64: is a target with no
# feature, and +avx2 after it starts its list, never with a comma first)
expect 0 "$CLI" bundle build examples/saxpy.xpk --dtype T=f32 --target cpu:x86-64:,+avx2 -o "$tmp/x.xpb"
"$CLI" bundle ls "$tmp/x.xpb" --json | grep -q '"targets": \["cpu:x86-64:+avx2"\]' ||
  { echo "FAIL: bundle build --target cpu:x86-64:,+avx2: $("$CLI" bundle ls "$tmp/x.xpb" --json | cut -c1-300)"; fail=1; }
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
# under 1 MiB is no limit a failure could be remembered with (it read as
# "0 MiB": every later request took the remembered failure): malformed
expect 0 env XPJIT_COMPILE_MEMORY_LIMIT=1K "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target cpu -o "$tmp/x"
grep -q "warning: XPJIT_COMPILE_MEMORY_LIMIT=1K is not a size of at least 1M" "$tmp/err" || { echo "FAIL: no warning for a memory limit under 1M"; fail=1; }
expect 0 env XPJIT_COMPILE_MEMORY_LIMIT=256M "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target spirv -o "$tmp/x"
# env: the table of XPJIT_* variables; docs/environment.md is its output,
# and every "XPJIT_..." name the sources quote is in it
expect 0 "$CLI" env
grep -q '^XPJIT_CACHE_DIR' "$tmp/out" || { echo "FAIL: env lists no XPJIT_CACHE_DIR"; fail=1; }
expect 0 env XPJIT_LOG=info "$CLI" env
grep -q '^XPJIT_LOG=info$' "$tmp/out" || { echo "FAIL: env does not show XPJIT_LOG=info"; fail=1; }
# a value with an escape sequence or a newline is printed with '?' for
# them: nothing reaches the terminal as a control sequence
expect 0 env "XPJIT_LOG=$(printf 'info\033]0;x\007\nY')" "$CLI" env
grep -q '^XPJIT_LOG=info?\]0;x??Y$' "$tmp/out" || { echo "FAIL: env prints XPJIT_LOG's control characters"; cat -v "$tmp/out" | grep XPJIT_LOG; fail=1; }
if LC_ALL=C grep -q "$(printf '\033')" "$tmp/out"; then echo "FAIL: env printed an ESC"; fail=1; fi
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
# a file that cannot be opened is named (an empty name too)
expect 1 "$CLI" check ""
grep -q "cannot open file '': " "$tmp/err" || { echo "FAIL: check '' does not say which file"; fail=1; }
expect 1 "$CLI" check /nonexistent/k.xpk
grep -q "cannot open file '/nonexistent/k.xpk': No such file" "$tmp/err" || { echo "FAIL: check of a missing file"; fail=1; }
# an output that did not arrive is a failure (stdout on a full device)
if [ -c /dev/full ]; then
  for c in "env" "--version" "help" "devices" "ir examples/saxpy.xpk"; do
    # shellcheck disable=SC2086
    "$CLI" $c > /dev/full 2>"$tmp/err"; rc=$?
    [ $rc -ne 0 ] && grep -q "cannot write standard output" "$tmp/err" ||
      { echo "FAIL: '$c > /dev/full' exited $rc"; fail=1; }
  done
fi
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
  # a log file that cannot be written to: a warning, never a hang (a FIFO
  # nobody reads blocked open() before O_NONBLOCK)
  mkfifo "$tmp/fifo"
  XPJIT_LOG=info XPJIT_LOG_FILE="$tmp/fifo" XPJIT_CACHE=off XPJIT_DAEMON=off timeout 60 "$EX" >/dev/null 2>"$tmp/err"
  rc=$?
  [ $rc -eq 0 ] && grep -q "XPJIT_LOG_FILE=$tmp/fifo is a FIFO, not a regular file" "$tmp/err" &&
    grep -q "info: kernel saxpy" "$tmp/err" ||
    { echo "FAIL: XPJIT_LOG_FILE=FIFO: exit $rc"; cat "$tmp/err"; fail=1; }
  XPJIT_LOG=info XPJIT_LOG_FILE="$tmp" XPJIT_CACHE=off XPJIT_DAEMON=off "$EX" >/dev/null 2>"$tmp/err"
  grep -q "XPJIT_LOG_FILE=$tmp is a directory" "$tmp/err" || { echo "FAIL: XPJIT_LOG_FILE=a directory"; cat "$tmp/err"; fail=1; }
  # only a file of the user's that nobody else may write (an outside
  # probe: a link someone planted made the user append their warnings,
  # with text of the planter's, to ~/.bashrc; a FIFO someone held open and
  # filled blocked the program for ever at its first line): each refused
  # with one warning that names it, the log on stderr, and nothing written
  logto() { # LOG_FILE: the program's stderr in $tmp/err, its status in rc
    XPJIT_LOG=info XPJIT_LOG_FILE="$1" XPJIT_CACHE=off XPJIT_DAEMON=off timeout 20 "$EX" >/dev/null 2>"$tmp/err"
    rc=$?
  }
  refused_log() { # WHAT NEEDLE
    [ $rc -eq 0 ] && [ "$(grep -c "XPJIT_LOG_FILE=" "$tmp/err")" -eq 1 ] &&
      grep -q "$2" "$tmp/err" && grep -q "^xpjit: info: kernel saxpy" "$tmp/err" ||
      { echo "FAIL: XPJIT_LOG_FILE=$1: exit $rc, not one warning with '$2'"; cat "$tmp/err"; fail=1; }
  }
  echo "alias ls='ls -F'" > "$tmp/bashrc"
  ln -s "$tmp/bashrc" "$tmp/link.log"
  logto "$tmp/link.log"
  refused_log "a link to one of the user's files" "$tmp/link.log is a symbolic link, which is not followed"
  [ "$(cat "$tmp/bashrc")" = "alias ls='ls -F'" ] || { echo "FAIL: XPJIT_LOG_FILE appended through a link"; fail=1; }
  mkfifo "$tmp/held.log"
  exec 7<>"$tmp/held.log" # a reader that never reads, and the FIFO full
  timeout 2 cat /dev/zero >&7
  logto "$tmp/held.log"
  refused_log "a FIFO held open and full" "$tmp/held.log is a FIFO, not a regular file"
  exec 7>&-
  : > "$tmp/open.log"; chmod 666 "$tmp/open.log"
  logto "$tmp/open.log"
  refused_log "a file others may write" "$tmp/open.log is writable by others (mode 0666)"
  [ ! -s "$tmp/open.log" ] || { echo "FAIL: XPJIT_LOG_FILE wrote to a file others may write"; fail=1; }
  (umask 077; : > "$tmp/one.log"); ln "$tmp/one.log" "$tmp/two.log"
  logto "$tmp/two.log"
  refused_log "a second name of a file" "$tmp/two.log has 2 names (hard links)"
  [ ! -s "$tmp/one.log" ] || { echo "FAIL: XPJIT_LOG_FILE wrote through a hard link"; fail=1; }
  if [ "$(id -u)" = 0 ]; then # another user's file (made here as root)
    (umask 077; : > "$tmp/theirs.log"); chown 65534 "$tmp/theirs.log"
    logto "$tmp/theirs.log"
    refused_log "another user's file" "$tmp/theirs.log is owned by uid 65534"
    [ ! -s "$tmp/theirs.log" ] || { echo "FAIL: XPJIT_LOG_FILE wrote to another user's file"; fail=1; }
  fi
  # the user's own file, shared by many processes (MPI ranks): created
  # 0600, appended by each
  logto "$tmp/ranks.log"; logto "$tmp/ranks.log"
  [ ! -s "$tmp/err" ] && [ "$(grep -c " xpjit\[[0-9]*\] info: kernel saxpy" "$tmp/ranks.log")" -eq 2 ] &&
    [ "$(stat -c %a "$tmp/ranks.log")" = 600 ] ||
    { echo "FAIL: XPJIT_LOG_FILE shared by two processes"; cat "$tmp/err" "$tmp/ranks.log"; fail=1; }
  XPJIT_LOG=error XPJIT_CACHE=off XPJIT_DAEMON=off XPJIT_CPU_THREADS=abc "$EX" >/dev/null 2>"$tmp/err"
  [ ! -s "$tmp/err" ] || { echo "FAIL: XPJIT_LOG=error printed:"; cat "$tmp/err"; fail=1; }
fi

# -- arguments as GNU tools read them (getopt_long): --key=value and
# --key value, bundled and attached short options, options anywhere,
# "--" ends them; unknown options and missing values are usage errors
# that say which and show the usage
h4=$("$CLI" ir examples/axpy.xpk --kernel=axpy --dtype=T=f32 --ndim=2 --hash)
h5=$("$CLI" ir --hash --ndim 2 --dtype T=f32 --kernel axpy examples/axpy.xpk)
[ "$h4" = "$h1" ] && [ "$h5" = "$h1" ] || { echo "FAIL: --key=value or options first: '$h4' '$h5' != '$h1'"; fail=1; }
expect 0 "$CLI" ir examples/axpy.xpk --kernel axpy --dtype T=f32 --ndim 2 -o"$tmp/ir2.txt"
cmp -s "$tmp/ir.txt" "$tmp/ir2.txt" || { echo "FAIL: -oFILE"; fail=1; }
expect 0 "$CLI" ir examples/axpy.xpk --kernel axpy --dtype T=f32 --ndim 2 --output="$tmp/ir3.txt"
cmp -s "$tmp/ir.txt" "$tmp/ir3.txt" || { echo "FAIL: --output=FILE"; fail=1; }
usage_error() { # what-stderr-says command...
  what=$1
  shift
  expect 2 "$@"
  grep -qF -- "$what" "$tmp/err" && grep -q '^usage: ' "$tmp/err" ||
    { echo "FAIL: '$*': no \"$what\" and usage"; head -3 "$tmp/err"; fail=1; }
}
usage_error "unknown option '--bogus'" "$CLI" ir examples/axpy.xpk --bogus
usage_error "unknown option '-x'" "$CLI" check -x examples/axpy.xpk
usage_error "option '--kernel' needs a value" "$CLI" ir examples/axpy.xpk --kernel
usage_error "option '-o' needs a value" "$CLI" ir examples/axpy.xpk --kernel axpy -o
usage_error "option '--hash' takes no value" "$CLI" ir examples/axpy.xpk --kernel axpy --hash=yes
usage_error "option '--co' is ambiguous" "$CLI" ir examples/axpy.xpk --co TS=1
usage_error "unknown option '--bogus'" "$CLI" --bogus check examples/axpy.xpk
usage_error "unknown option '--frob'" "$CLI" cache --frob stats
usage_error "unknown option '--repair'" "$CLI" cache ls --repair
usage_error "unknown option '-q'" "$CLI" devices -vq
usage_error "unknown option '--timeout'" "$CLI" bundle ls --timeout 3 x.xpb
usage_error "unknown option '--bogus'" "$CLI" daemon stats --bogus
usage_error "unknown option '--bogus'" "$CLI" env --bogus
# "--" ends the options: a file named -x.xpk
abs=$(cd "$(dirname "$CLI")" && pwd)/$(basename "$CLI")
cp examples/axpy.xpk "$tmp/-x.xpk"
(cd "$tmp" && "$abs" check -- -x.xpk) >"$tmp/out" 2>&1 || { echo "FAIL: check -- -x.xpk"; cat "$tmp/out"; fail=1; }
(cd "$tmp" && "$abs" check -x.xpk) >"$tmp/out" 2>&1; [ $? -eq 2 ] || { echo "FAIL: check -x.xpk is not an unknown option"; fail=1; }
h6=$(cd "$tmp" && "$abs" ir --kernel axpy --dtype T=f32 --ndim 2 --hash -- -x.xpk)
[ "$h6" = "$h1" ] || { echo "FAIL: ir -- -x.xpk: '$h6'"; fail=1; }
# short options with values: -O N and -ON, -j N and -jN (bundle build, in
# tests/cache_cli.sh)
"$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target cpu --emit asm -O1 >"$tmp/o1a"
"$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target cpu --emit asm -O 1 >"$tmp/o1b"
"$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target cpu --emit asm -O3 >"$tmp/o3"
cmp -s "$tmp/o1a" "$tmp/o1b" && ! cmp -s "$tmp/o1a" "$tmp/o3" || { echo "FAIL: -O1 / -O 1 / -O3"; fail=1; }
expect 0 "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target=ptx:sm_80 --check bounds -go "$tmp/g.ptx"
grep -q '\.loc' "$tmp/g.ptx" || { echo "FAIL: -go FILE (bundled -g -o) gave no line tables"; fail=1; }
# a bad value says what is wrong, without the usage
expect 2 "$CLI" emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target cpu --check=everything
grep -q "unknown check 'everything'" "$tmp/err" && ! grep -q '^usage: ' "$tmp/err" ||
  { echo "FAIL: --check=everything: $(cat "$tmp/err")"; fail=1; }
# help
expect 0 "$CLI" help ir
grep -q '^usage: xpjit-cli ir ' "$tmp/out" || { echo "FAIL: help ir"; fail=1; }
expect 2 "$CLI" help frobnicate
expect 0 "$CLI" emit --version

# -- one --dtype parser for ir, emit and bundle build (the library's rules,
# runtime/program.c rt_parse_dtypes): by name, by position, one value per
# parameter here (lists are bundle build's); never both names and positions
h7=$("$CLI" ir examples/axpy.xpk --kernel axpy --dtype f32 --ndim 2 --hash)
[ "$h7" = "$h1" ] || { echo "FAIL: --dtype f32 by position: '$h7'"; fail=1; }
c4=$("$CLI" ir examples/axpy.xpk --kernel convert --dtype f32,i64 --ndim 2 --hash)
c5=$("$CLI" ir examples/axpy.xpk --kernel convert --dtype T=f32 --dtype U=i64 --ndim 2 --hash)
c6=$("$CLI" ir examples/axpy.xpk --kernel convert --dtype T=f32,U=i64 --ndim 2 --hash)
c7=$("$CLI" ir examples/axpy.xpk --kernel convert --dtype f32 --dtype i64 --ndim 2 --hash)
{ [ ${#c4} -eq 64 ] && [ "$c4" = "$c5" ] && [ "$c4" = "$c6" ] && [ "$c4" = "$c7" ]; } ||
  { echo "FAIL: convert by position and by name: '$c4' '$c5' '$c6' '$c7'"; fail=1; }
c8=$("$CLI" ir $G --kernel stencil --dtype f32 --const TS=16 --hash)
[ "$c8" = "$c1" ] || { echo "FAIL: --dtype f32 --const TS=16: '$c8'"; fail=1; }
c9=$("$CLI" emit $G --kernel stencil --dtype f32 --const TS=16 --target cpu --emit llvm | sha256sum)
c10=$("$CLI" emit $G --kernel stencil --dtype T=f32 --const TS=16 --target cpu --emit llvm | sha256sum)
[ "$c9" = "$c10" ] || { echo "FAIL: emit --dtype f32 differs from T=f32"; fail=1; }
bad_dtype() { # what-stderr-says dtype-args...
  what=$1
  shift
  expect 2 "$CLI" ir examples/axpy.xpk --kernel convert --ndim 1 "$@"
  grep -qF -- "$what" "$tmp/err" || { echo "FAIL: $*: no \"$what\""; cat "$tmp/err"; fail=1; }
}
bad_dtype "gives T more than one value; ir takes one (bundle build takes lists)" --dtype T=f32,f64
bad_dtype "gives T more than one value" --dtype T=f32 --dtype f64
bad_dtype "by name (T=f32) or by position (f32), not both" --dtype f32 --dtype U=i64
bad_dtype "'T' is bound twice" --dtype T=f32 --dtype T=f64
bad_dtype "--dtype takes NAME=TYPE (e.g. T=f32), not 'T='" --dtype T=
bad_dtype "not 'f32,'" --dtype f32,
bad_dtype "not 'T=f32,,U=i64'" --dtype T=f32,,U=i64
bad_dtype "unknown type 'float'" --dtype float
bad_dtype "--const takes NAME=VALUE (e.g. TS=16), not '16'" --dtype T=f32 --const 16
expect 2 "$CLI" emit examples/axpy.xpk --kernel convert --dtype T=f32,f64 --target cpu
expect 1 "$CLI" ir examples/axpy.xpk --kernel axpy --dtype f32,f64 --ndim 1
grep -q "kernel 'axpy' takes 1 type parameter; --dtype gives more" "$tmp/err" ||
  { echo "FAIL: too many types by position: $(cat "$tmp/err")"; fail=1; }
expect 1 "$CLI" ir examples/axpy.xpk --kernel convert --dtype f32 --ndim 1
grep -q "needs a dtype for type parameter 'U'" "$tmp/err" || { echo "FAIL: one type by position for two"; fail=1; }

# -- colour (--color=auto|always|never, NO_COLOR, like clang and git):
# diagnostics on stderr, tables and headers on stdout
ESC=$(printf '\033')
colour() { grep -q "$ESC\[" "$@"; }
expect 1 "$CLI" check --color=always tests/golden/errors.xpk
grep -q "^${ESC}\[1mtests/golden/errors.xpk:11:5:${ESC}\[0m ${ESC}\[1;31merror:${ESC}\[0m ${ESC}\[1m" "$tmp/err" &&
  grep -q "^      ${ESC}\[1;32m^${ESC}\[0m$" "$tmp/err" ||
  { echo "FAIL: --color=always: no bold locus, red error, green caret"; head -3 "$tmp/err" | cat -v; fail=1; }
# the text is the plain one with the escapes taken out
sed "s/$ESC\[[0-9;]*m//g" "$tmp/err" >"$tmp/stripped"
"$CLI" check tests/golden/errors.xpk 2>"$tmp/plain"
cmp -s "$tmp/stripped" "$tmp/plain" || { echo "FAIL: coloured diagnostics differ from the plain ones"; fail=1; }
expect 1 "$CLI" --color=always check tests/golden/errors.xpk
colour "$tmp/err" || { echo "FAIL: --color=always before the command"; fail=1; }
expect 1 "$CLI" check --color=never tests/golden/errors.xpk
colour "$tmp/err" && { echo "FAIL: --color=never coloured"; fail=1; }
expect 1 "$CLI" check tests/golden/errors.xpk
colour "$tmp/err" && { echo "FAIL: auto coloured a file"; fail=1; }
expect 1 env NO_COLOR=1 "$CLI" check --color=always tests/golden/errors.xpk
colour "$tmp/err" || { echo "FAIL: --color=always lost to NO_COLOR"; fail=1; }
expect 1 "$CLI" ir examples/axpy.xpk --kernel convert --dtype T=f32 --ndim 1 --color=always
grep -q "^${ESC}\[1mexamples/axpy.xpk:${ESC}\[0m ${ESC}\[1;31merror:" "$tmp/err" || { echo "FAIL: ir: no colour"; fail=1; }
XPJIT_LIBDEVICE=/nonexistent expect 1 "$CLI" emit examples/math.xpk --kernel math_table --dtype T=f32 --target ptx:sm_90 -o "$tmp/x" --color=always
grep -q "${ESC}\[1;31merror:${ESC}\[0m ${ESC}\[1mnot supported" "$tmp/err" || { echo "FAIL: emit: no colour"; cat -v "$tmp/err"; fail=1; }
"$CLI" devices --color=always | grep -q "${ESC}\[1m\[cpu:0\]" || { echo "FAIL: devices: no colour"; fail=1; }
"$CLI" devices | colour && { echo "FAIL: devices coloured a pipe"; fail=1; }
# auto on a terminal: coloured, unless NO_COLOR is set and not empty or
# TERM is dumb (script(1) gives it a terminal)
if command -v script >/dev/null 2>&1; then
  on_tty() { script -qec "$*" /dev/null </dev/null >"$tmp/tty" 2>&1; }
  on_tty env NO_COLOR= TERM=xterm "$abs" check tests/golden/errors.xpk
  colour "$tmp/tty" || { echo "FAIL: auto: no colour on a terminal"; cat -v "$tmp/tty" | head -2; fail=1; }
  on_tty env NO_COLOR=1 TERM=xterm "$abs" check tests/golden/errors.xpk
  colour "$tmp/tty" && { echo "FAIL: auto: coloured with NO_COLOR=1"; fail=1; }
  on_tty env NO_COLOR= TERM=dumb "$abs" check tests/golden/errors.xpk
  colour "$tmp/tty" && { echo "FAIL: auto: coloured with TERM=dumb"; fail=1; }
  on_tty env NO_COLOR= TERM=xterm "$abs" check --color=never tests/golden/errors.xpk
  colour "$tmp/tty" && { echo "FAIL: --color=never coloured a terminal"; fail=1; }
else
  echo "cli: NOTE: no script(1): colour on a terminal not tested"
fi

# -- devices --json: one valid document, every device with its properties
if command -v python3 >/dev/null 2>&1; then
  "$CLI" devices --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
cpu = [x for x in d["devices"] if x["id"] == "cpu:0"]
assert cpu and cpu[0]["default"] is True and cpu[0]["type"] == "cpu", d
assert cpu[0]["compute_units"] >= 1 and len(cpu[0]["max_work_item_sizes"]) == 3, d
assert cpu[0]["target"].startswith("cpu:"), d
assert isinstance(d["unavailable"], dict), d
' || { echo "FAIL: devices --json"; fail=1; }
  "$CLI" devices 'cuda:7' --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["devices"] == [], d
' || { echo "FAIL: devices FILTER --json"; fail=1; }
else
  echo "cli: NOTE: no python3: JSON not validated"
fi
expect 2 "$CLI" devices 'cuda:x;;' --json

# -- the bash completion offers what the CLI takes: every option it lists
# for a command is one the command knows, and it offers the values of
# --color and --emit (--key value and --key=value)
if command -v bash >/dev/null 2>&1; then
  bash -c '
    . tools/completion/xpjit-cli.bash
    comp() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _xpjit_cli; echo "${COMPREPLY[*]}"; }
    for words in check ir emit devices env "cache stats" "cache ls" "cache show" \
      "cache verify" "cache prune" "cache clear" "cache export" "bundle build" \
      "bundle ls" "bundle verify" "bundle import" "daemon status" "daemon stats" "daemon stop"; do
      # shellcheck disable=SC2086
      echo "$words: $(comp xpjit-cli $words -)"
    done
    echo "color: $(comp xpjit-cli check --color "") / $(comp xpjit-cli check --color = al)"
    echo "emit: $(comp xpjit-cli emit --emit "")"
  ' >"$tmp/comp" 2>&1 || { echo "FAIL: the completion script"; cat "$tmp/comp"; fail=1; }
  grep -qx "color: auto always never / always" "$tmp/comp" || { echo "FAIL: completion of --color: $(grep color: "$tmp/comp")"; fail=1; }
  grep -qx "emit: bin asm llvm" "$tmp/comp" || { echo "FAIL: completion of --emit: $(grep emit: "$tmp/comp")"; fail=1; }
  grep -q "^devices: .*--json" "$tmp/comp" && grep -q "^cache stats: .*--zero" "$tmp/comp" &&
    grep -q "^bundle build: .*-j" "$tmp/comp" || { echo "FAIL: completion lacks devices --json, stats --zero or build -j"; fail=1; }
  sed -n 's/^\([a-z ]*\): \(-.*\)$/\1|\2/p' "$tmp/comp" >"$tmp/comp.opts"
  [ "$(wc -l <"$tmp/comp.opts")" -eq 19 ] || { echo "FAIL: completion: $(cat "$tmp/comp")"; fail=1; }
  while IFS='|' read -r words opts; do
    for o in $opts; do
      # shellcheck disable=SC2086
      XPJIT_CACHE_DIR="$tmp/comp-cache" XPJIT_DAEMON="$tmp/none.sock" "$CLI" $words "$o" </dev/null >/dev/null 2>"$tmp/err"
      grep -q "unknown option" "$tmp/err" && { echo "FAIL: the completion offers $o to '$words': $(head -1 "$tmp/err")"; fail=1; }
    done
  done <"$tmp/comp.opts"
else
  echo "cli: NOTE: no bash: the completion not tested"
fi
# -- an adversarial review's findings (twenty-fourth session)
# -o onto the input: refused, the source intact
cp examples/saxpy.xpk "$tmp/in.xpk"
expect 2 "$CLI" ir "$tmp/in.xpk" -o "$tmp/in.xpk"
expect 2 "$CLI" emit "$tmp/in.xpk" --kernel saxpy --dtype T=f32 --target cpu -o "$tmp/in.xpk"
expect 2 "$CLI" bundle build "$tmp/in.xpk" --dtype T=f32 --target cpu -o "$tmp/in.xpk"
cmp -s "$tmp/in.xpk" examples/saxpy.xpk || { echo "FAIL: -o onto the input changed it"; fail=1; }
# standard output closed: the output did not arrive, exit 1 (a compile
# server's socket took descriptor 1, and the write "succeeded")
"$CLI" emit examples/saxpy.xpk --kernel saxpy --dtype T=f32 --target cpu --emit asm >&- 2>/dev/null
[ $? -eq 1 ] || { echo "FAIL: emit with standard output closed"; fail=1; }
# a write that fails (file size limit) is exit 1, also for ir
( trap '' XFSZ; ulimit -f 4; "$CLI" ir examples/math.xpk -o "$tmp/big.ir" 2>/dev/null )
[ $? -eq 1 ] || { echo "FAIL: ir -o past the file size limit"; fail=1; }
# PTX targets with trailing text: not silently the base architecture
expect 2 "$CLI" emit examples/saxpy.xpk --kernel saxpy --dtype T=f32 --target ptx:sm_90a -o "$tmp/o.ptx"
# bundle build leaves nothing of its private cache behind
mkdir "$tmp/tmpdir"
TMPDIR="$tmp/tmpdir" "$CLI" bundle build examples/saxpy.xpk --dtype T=f32 --target cpu -o "$tmp/b.xpb" 2>/dev/null ||
  { echo "FAIL: bundle build"; fail=1; }
[ -z "$(ls -A "$tmp/tmpdir")" ] || { echo "FAIL: bundle build left $(ls -A "$tmp/tmpdir")"; fail=1; }
# a --path that is not an xpjit cache is left as it is (it was moved aside
# and replaced by a new cache, exit 0)
printf 'my notes\n' >"$tmp/notes.txt"
for c in ls stats prune clear; do
  expect 1 "$CLI" cache --path "$tmp/notes.txt" $c
done
expect 1 "$CLI" bundle import "$tmp/b.xpb" --path "$tmp/notes.txt"
[ "$(cat "$tmp/notes.txt")" = "my notes" ] && [ ! -e "$tmp/notes.txt.corrupt" ] ||
  { echo "FAIL: a --path to a text file was changed"; fail=1; }
# the cache exported onto its own file, or imported into itself: refused
mkdir -m 700 "$tmp/cc"
XPJIT_CACHE_DIR="$tmp/cc" "$CLI" bundle import "$tmp/b.xpb" >/dev/null 2>&1
expect 1 "$CLI" cache --path "$tmp/cc/cache-v2.db" export "$tmp/cc/cache-v2.db"
grep -q "is the cache's own file" "$tmp/err" || { echo "FAIL: export onto the cache: $(cat "$tmp/err")"; fail=1; }
expect 0 "$CLI" cache --path "$tmp/cc/cache-v2.db" verify
expect 1 "$CLI" bundle import "$tmp/cc/cache-v2.db" --path "$tmp/cc/cache-v2.db"
grep -q "is the cache's own file" "$tmp/err" || { echo "FAIL: self-import: $(cat "$tmp/err")"; fail=1; }

# -- an adversarial review's findings (twenty-fifth session)
# a malformed value is a message without the usage, --color's too (before
# the command and after it)
for c in "--color=bogus check" "check --color=sometimes"; do
  # shellcheck disable=SC2086
  expect 2 "$CLI" $c examples/axpy.xpk
  grep -q "^xpjit-cli.*: --color takes auto, always or never, not '" "$tmp/err" && ! grep -q '^usage: ' "$tmp/err" ||
    { echo "FAIL: $c: $(head -3 "$tmp/err")"; fail=1; }
done
# a target xpjit does not know is a malformed value (exit 2, as ptx:sm_61
# is); in the form with a feature list LLVM checks it at the compile (1)
for t in cpu:bogus cpu:i386; do
  expect 2 "$CLI" emit examples/saxpy.xpk --kernel saxpy --dtype T=f32 --target $t -o "$tmp/x"
  grep -q "unknown CPU in '$t'" "$tmp/err" || { echo "FAIL: --target $t: $(cat "$tmp/err")"; fail=1; }
done
expect 1 "$CLI" emit examples/saxpy.xpk --kernel saxpy --dtype T=f32 --target cpu:bogus:+avx2 -o "$tmp/x"
expect 1 "$CLI" emit examples/saxpy.xpk --kernel saxpy --dtype T=f32 --target cpu:i386: -o "$tmp/x"
# devices --json with a malformed filter: the error as JSON on stdout
expect 2 "$CLI" devices 'cuda:x;;' --json
grep -q '^{"error": "device filter .*unknown device' "$tmp/out" || { echo "FAIL: devices --json: '$(cat "$tmp/out")'"; fail=1; }
# env lists every unknown XPJIT_* name, however many (cut at 2048 bytes)
names=$(i=0; while [ $i -lt 120 ]; do echo "XPJIT_NOT_A_VARIABLE_NUMBER_$i=1"; i=$((i + 1)); done)
# shellcheck disable=SC2086
expect 1 env $names "$CLI" env
[ "$(grep '^not read by xpjit: ' "$tmp/out" | tr ',' '\n' | grep -c XPJIT_NOT_A_VARIABLE_NUMBER_)" = 120 ] ||
  { echo "FAIL: env: not every unknown name listed: $(wc -c <"$tmp/out") bytes"; fail=1; }
# --check= (a value left out) is a usage error, not "no checks"
for c in --check= "--check ''"; do
  eval "set -- $c"
  expect 2 "$CLI" emit examples/saxpy.xpk --kernel saxpy --dtype T=f32 --target cpu -o "$tmp/x" "$@"
  grep -q -- "--check takes bounds, all or none, not ''" "$tmp/err" || { echo "FAIL: emit $c: $(cat "$tmp/err")"; fail=1; }
done
# PTX kernel parameters beyond ptxas's 4352 bytes (before ISA 8.1) and SPIR-V
# functions of more than 255 parameters: a clear refusal at emit (ptxas
# rejected the PTX when a process loaded it; the SPIR-V failed validation)
params=""; i=0
while [ $i -lt 31 ]; do params="$params, a$i: global f32[,,,,,,,]"; i=$((i + 1)); done
echo "kernel p8(o: global f32[]$params) range { o[0] = 1.0; }" >"$tmp/p8.xpk"
expect 1 "$CLI" emit "$tmp/p8.xpk" --kernel p8 --target ptx:sm_90 -o "$tmp/p8.ptx"
grep -q "the kernel.s parameters take 4520 bytes.*PTX ISA 7.8 allows 4352" "$tmp/err" ||
  { echo "FAIL: emit of 4520 bytes of PTX parameters: $(cat "$tmp/err")"; fail=1; }
expect 0 "$CLI" emit "$tmp/p8.xpk" --kernel p8 --target ptx:sm_90:ptx81 -o "$tmp/p8.ptx"
params=""; i=0
while [ $i -lt 63 ]; do params="$params, a$i: global f32[]"; i=$((i + 1)); done
echo "kernel p64(o: global f32[]$params) range { o[0] = 1.0; }" >"$tmp/p64.xpk"
expect 1 "$CLI" emit "$tmp/p64.xpk" --kernel p64 --target spirv -o "$tmp/p64.spv"
grep -q "the kernel takes 259 parameters with its hidden ones.*SPIR-V allows 255" "$tmp/err" ||
  { echo "FAIL: emit of 259 SPIR-V parameters: $(cat "$tmp/err")"; fail=1; }
# bool collectives at -O0 on SPIR-V: the i32 -> i1 trunc failed validation
expect 0 "$CLI" emit tests/conformance/collectives.xpk --kernel anyall -O0 --target spirv -o "$tmp/aa.spv"
# f16 atomic add with debug info for sm_90: ptxas 13.0 crashed (SIGSEGV)
# on atom.add.noftz.f16 in a ".target sm_90, debug" module
echo "kernel f16add(p: global f16[], v: f16) range { atomic_add(&p[0], v); }" >"$tmp/f16.xpk"
expect 0 "$CLI" emit "$tmp/f16.xpk" --kernel f16add -g --target ptx:sm_90 --emit asm -o "$tmp/f16.ptx"
grep -q "atom.*add.*f16" "$tmp/f16.ptx" && { echo "FAIL: -g sm_90 PTX has a native f16 atomic add"; fail=1; }
PTXAS=${PTXAS:-/usr/local/cuda/bin/ptxas}
if [ -x "$PTXAS" ]; then
  "$PTXAS" -arch=sm_90 "$tmp/f16.ptx" -o /dev/null || { echo "FAIL: ptxas on -g f16 atomic add"; fail=1; }
fi
expect 0 "$CLI" emit "$tmp/f16.xpk" --kernel f16add --target ptx:sm_90 --emit asm -o "$tmp/f16.ptx"
grep -q "atom.*add.*f16" "$tmp/f16.ptx" || { echo "FAIL: sm_90 PTX without -g lost its native f16 atomic add"; fail=1; }
# a required local size CUDA cannot launch (z above 64, more than 1024
# threads): refused when the PTX is made (ptxas only warned)
for k in "f32[,,]) ndrange(3) local(128, 4, 2)" "f32[]) ndrange(1) local(4096)" \
  "f32[,,]) ndrange(3) local(16, 16, 16)"; do
  echo "kernel r(o: global $k { o[0] = 1.0; }" | sed 's/\[,,\]\(.*\)o\[0\]/[,,]\1o[0, 0, 0]/' >"$tmp/r.xpk"
  expect 1 "$CLI" emit "$tmp/r.xpk" --kernel r --target ptx:sm_90 -o "$tmp/r.ptx"
  grep -q "CUDA allows 1024 x 1024 x 64 and 1024 in all" "$tmp/err" || { echo "FAIL: $k for PTX: $(cat "$tmp/err")"; fail=1; }
done
echo "kernel r(o: global f32[,,]) ndrange(3) local(64, 4, 4) { o[0, 0, 0] = 1.0; }" >"$tmp/r.xpk"
expect 0 "$CLI" emit "$tmp/r.xpk" --kernel r --target ptx:sm_90 -o "$tmp/r.ptx"

# -- an adversarial review's findings (twenty-ninth session)
# -o never replaces a file of the user's cache (bundle build and cache
# show wrote over the database or its key, exit 0: every entry lost), nor
# a link or a FIFO (show followed the link, and waited on the FIFO)
mkdir -m 700 "$tmp/uc"
expect_uc() { # status command...: expect with the cache in $tmp/uc
  want_uc=$1
  shift
  expect "$want_uc" env XPJIT_CACHE_DIR="$tmp/uc" "$@"
}
XPJIT_CACHE_DIR="$tmp/uc" "$CLI" bundle import "$tmp/b.xpb" >/dev/null 2>&1
dig=$(XPJIT_CACHE_DIR="$tmp/uc" "$CLI" cache ls --json | grep -o '"digest": *"[0-9a-f]*"' | head -1 | grep -o '[0-9a-f]\{16,\}')
for f in cache-v2.db cache-v2.db.key; do
  cp "$tmp/uc/$f" "$tmp/uc.before"
  expect_uc 1 "$CLI" bundle build examples/saxpy.xpk --dtype T=f32 --target cpu -o "$tmp/uc/$f"
  grep -q "is a file of the cache: not replaced" "$tmp/err" || { echo "FAIL: bundle build -o $f: $(cat "$tmp/err")"; fail=1; }
  expect_uc 1 "$CLI" cache show "$dig" -o "$tmp/uc/$f"
  grep -q "is a file of the cache: not replaced" "$tmp/err" || { echo "FAIL: cache show -o $f: $(cat "$tmp/err")"; fail=1; }
  expect 1 "$CLI" cache --path "$tmp/uc/cache-v2.db" show "$dig" -o "$tmp/uc/$f"
  cmp -s "$tmp/uc/$f" "$tmp/uc.before" || { echo "FAIL: -o changed $f"; fail=1; }
done
expect_uc 0 "$CLI" cache verify
echo secret >"$tmp/otarget" && ln -s "$tmp/otarget" "$tmp/olink" && mkfifo "$tmp/ofifo"
for o in "$tmp/olink" "$tmp/ofifo"; do
  expect_uc 1 timeout 20 "$CLI" cache show "$dig" -o "$o"
  grep -q "is not a regular file" "$tmp/err" || { echo "FAIL: cache show -o $o: $(cat "$tmp/err")"; fail=1; }
  expect 1 timeout 20 "$CLI" emit examples/saxpy.xpk --kernel saxpy --dtype T=f32 --target cpu -o "$o"
done
[ "$(cat "$tmp/otarget")" = secret ] || { echo "FAIL: -o followed a link"; fail=1; }
expect_uc 0 "$CLI" cache show "$dig" -o "$tmp/bin.o"
[ -s "$tmp/bin.o" ] || { echo "FAIL: cache show -o wrote nothing"; fail=1; }
# a file size limit is exit 1 with no output left (SIGXFSZ killed the
# process, exit 153, and an ignored one left 1024 bytes of it)
for c in "emit examples/math.xpk --kernel math_table --dtype T=f32 --target cpu --emit asm" "ir examples/math.xpk"; do
  # shellcheck disable=SC2086
  ( ulimit -f 1; "$CLI" $c -o "$tmp/lim.out" 2>"$tmp/err" )
  st=$?
  [ $st -eq 1 ] && [ ! -e "$tmp/lim.out" ] && ! ls "$tmp" | grep -q '^lim.out.tmp' ||
    { echo "FAIL: ${c%% *} -o past ulimit -f: exit $st, $(ls "$tmp" | grep lim.out)"; fail=1; }
done
( ulimit -f 1; XPJIT_CACHE_DIR="$tmp/uc" "$CLI" cache export "$tmp/lim.xpb" 2>/dev/null )
[ $? -eq 1 ] && ! ls "$tmp" | grep -q '^lim.xpb' || { echo "FAIL: export past ulimit -f: $(ls "$tmp" | grep lim.xpb)"; fail=1; }
# a signal during bundle build leaves nothing behind: its private cache
# is removed by the next build (an export's temporaries at once: checked
# by hand, an export of this cache is too quick to interrupt here)
mkdir "$tmp/tmpd"
TMPDIR="$tmp/tmpd" "$CLI" bundle build examples/axpy.xpk examples/reduce.xpk --dtype T=f32,f64 --target cpu -o "$tmp/sig2.xpb" >/dev/null 2>&1 &
pid=$!
sleep 0.5
kill -TERM $pid
wait $pid 2>/dev/null
TMPDIR="$tmp/tmpd" "$CLI" bundle build examples/saxpy.xpk --dtype T=f32 --target cpu -o "$tmp/sig3.xpb" 2>/dev/null ||
  { echo "FAIL: bundle build after a killed one"; fail=1; }
[ -z "$(ls -A "$tmp/tmpd")" ] || { echo "FAIL: a killed bundle build left $(ls -A "$tmp/tmpd")"; fail=1; }
! ls "$tmp" | grep -q '^sig2.xpb' || { echo "FAIL: a killed bundle build left $(ls "$tmp" | grep sig2)"; fail=1; }

[ $fail -eq 0 ] && echo "cli: all checks passed"
exit $fail
