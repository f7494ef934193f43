#!/bin/sh
# bench/instr.sh - the instructions one compile of a kernel executes, counted
# by valgrind's callgrind: the same number on every run, so that a change of a
# few per cent to the compile path can be told apart from this VM's phases
# (a compile's wall time moves by 30-45% between minutes; docs/benchmarks.md,
# issue 19, twenty-eighth and thirty-first sessions). A count, not a time:
# confirm what it finds with bench/compile, alternated runs.
#
# usage: bench/instr.sh [--cli PATH] [--keep FILE] FILE.xpk KERNEL [EMIT-OPTION...]
#   bench/instr.sh examples/private.xpk matmul_regblock --dtype T=f32
#   bench/instr.sh --keep /tmp/mrb.cg examples/atomics.xpk sum_last_group
#
# Runs `xpjit-cli emit FILE --kernel KERNEL --no-isolate` (default target
# ptx:sm_90; EMIT-OPTION... go to emit, e.g. --target cpu, -O3) under
# callgrind, counting only inside xpj_compile: the code generator, LLVM's
# passes, code generation. One compile in a fresh process, so LLVM's set-up
# for the target is in every count of that target alike.
# Prints the count; --keep FILE keeps callgrind's profile for
# callgrind_annotate --inclusive=yes (libLLVM's exported functions only: a
# pass in an anonymous namespace, SLSR's among them, shows as its callees).
# Needs valgrind (tools/bench-deps.sh installs it).
set -eu
cli=build/bin/xpjit-cli
keep=
while [ $# -gt 0 ]; do
  case "$1" in
  --cli) cli=$2; shift 2 ;;
  --keep) keep=$2; shift 2 ;;
  -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "usage: bench/instr.sh [--cli PATH] [--keep FILE] FILE.xpk KERNEL [EMIT-OPTION...]" >&2
  exit 2
fi
command -v valgrind >/dev/null || { echo "bench/instr.sh: no valgrind (sh tools/bench-deps.sh)" >&2; exit 2; }
file=$1 kernel=$2
shift 2
case " $* " in *" --target "* | *" --target="*) tgt= ;; *) tgt="--target ptx:sm_90" ;; esac
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT INT TERM
# (XPJIT_DAEMON=off: the compile is this process's, not a daemon's)
if ! XPJIT_DAEMON=off valgrind --tool=callgrind --callgrind-out-file="$out/cg" \
    --collect-atstart=no --toggle-collect=xpj_compile \
    "$cli" emit "$file" --kernel "$kernel" $tgt --no-isolate -o "$out/bin" "$@" \
    >"$out/log" 2>&1; then
  grep -v '^==' "$out/log" >&2 || true
  echo "bench/instr.sh: the compile failed" >&2
  exit 1
fi
total=$(sed -n 's/^summary: //p' "$out/cg")
echo "$kernel: $total instructions in xpj_compile"
[ -z "$keep" ] || cp "$out/cg" "$keep"
