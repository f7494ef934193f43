#!/bin/sh
# Golden tests: each tests/golden/NAME.cmd holds xpjit-cli arguments; the
# combined output and the exit status must equal NAME.out. UPDATE=1
# rewrites the .out files (review the diff before committing).
set -u
CLI=${CLI:-build/bin/xpjit-cli}
pass=0
fail=0
for cmd in tests/golden/*.cmd; do
  name=${cmd%.cmd}
  # shellcheck disable=SC2046
  out=$("$CLI" $(cat "$cmd") 2>&1; echo "exit $?")
  if [ "${UPDATE:-0}" = 1 ]; then
    printf '%s\n' "$out" >"$name.out"
  fi
  if [ -f "$name.out" ] && [ "$out" = "$(cat "$name.out")" ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL golden $name"
    printf '%s\n' "$out" | diff "$name.out" - | head -20
  fi
done
echo "golden: $pass passed, $fail failed"
[ $fail -eq 0 ]
