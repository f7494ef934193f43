#!/bin/sh
# The whole test suite: unit tests (cmocka), golden CLI tests, every example
# kernel specialised, CLI behaviour, and the fuzz corpora replayed. Ends
# with one summary line "tests: N passed, M failed".
set -u
B=${BUILD:-build}
export CLI="$B/bin/xpjit-cli"
# A cache of our own: never the user's, and empty at the start of each run.
export XPJIT_CACHE_DIR="$PWD/$B/test-cache"
rm -rf "$XPJIT_CACHE_DIR"
export XPJIT_DAEMON=off
unset XPJIT_CACHE XPJIT_BUNDLE_PATH XPJIT_CACHE_MAX_SIZE
pass=0
fail=0
failed=""

step() { # name command...
  name=$1
  shift
  echo "=== $name"
  if "$@"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    failed="$failed $name"
    echo "=== FAILED: $name"
  fi
}

for t in "$B"/tests/test_*; do
  [ -x "$t" ] || continue
  step "$(basename "$t")" "$t"
done
step golden sh tests/run_golden.sh
step cli sh tests/cli.sh
step cache_cli sh tests/cache_cli.sh
step daemon_cli sh tests/daemon_cli.sh
step spec_examples sh tests/spec_examples.sh
step install sh tests/install.sh
for r in "$B"/fuzz/replay_*; do
  [ -x "$r" ] || continue
  n=${r##*/replay_}
  dirs="tests/fuzz/corpus/$n"
  [ -d tests/fuzz/crashes ] && dirs="$dirs tests/fuzz/crashes"
  # shellcheck disable=SC2086
  step "replay_$n" "$r" $dirs
done
echo
[ -n "$failed" ] && echo "failed:$failed"
echo "tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
