#!/bin/sh
# Specialises every kernel of every example: each generic kernel must
# specialise for at least two dtypes, and each kernel with generic-rank
# arrays for ndim 1 and 2 with each of those dtypes. Dtypes that a kernel
# cannot take (an integer-only kernel with f32) must fail cleanly (exit 1,
# a diagnostic), never crash.
set -u
CLI=${CLI:-build/bin/xpjit-cli}
pass=0
fail=0
TYPES="f32 f64 i32 i64 u32 u64"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

run() { # file kernel ndim dtype-args...
  f=$1 k=$2 nd=$3
  shift 3
  if [ "$nd" -gt 0 ]; then set -- "$@" --ndim "$nd"; fi
  "$CLI" ir "$f" --kernel "$k" "$@" --hash >"$tmp" 2>&1
  rc=$?
  if [ $rc -gt 1 ]; then
    echo "CRASH/USAGE ($rc): $CLI ir $f --kernel $k $*"
    cat "$tmp"
    return 2
  fi
  return $rc
}

for f in examples/*.xpk; do
  "$CLI" ir "$f" | grep '^kernel @' | while IFS= read -r line; do
    k=$(printf '%s\n' "$line" | sed -E 's/^kernel @([A-Za-z0-9_]+).*/\1/')
    tps=$(printf '%s\n' "$line" | sed -nE 's/^kernel @[A-Za-z0-9_]+<([^>]*)>.*/\1/p' | tr -d ' ')
    case "$line" in *'[*]'*) ranks="1 2" ;; *) ranks="0" ;; esac
    ok_types=0
    if [ -z "$tps" ]; then
      for nd in $ranks; do
        run "$f" "$k" "$nd" || { echo "FAIL: $f $k ndim=$nd"; cat "$tmp"; echo x >>"$tmp.fail"; }
      done
      echo "$f $k: ok (not generic, ranks: $ranks)"
      continue
    fi
    for t in $TYPES; do
      args=""
      for p in $(echo "$tps" | tr ',' ' '); do args="$args --dtype $p=$t"; done
      good=1
      for nd in $ranks; do
        # shellcheck disable=SC2086
        run "$f" "$k" "$nd" $args
        rc=$?
        [ $rc -eq 2 ] && { echo x >>"$tmp.fail"; good=0; }
        [ $rc -ne 0 ] && good=0
      done
      [ $good -eq 1 ] && ok_types=$((ok_types + 1))
    done
    if [ $ok_types -lt 2 ]; then
      echo "FAIL: $f $k<$tps> specialises for only $ok_types dtypes (ranks: $ranks)"
      echo x >>"$tmp.fail"
    else
      echo "$f $k<$tps>: ok for $ok_types dtypes (ranks: $ranks)"
    fi
  done
done
if [ -s "$tmp.fail" ]; then
  n=$(wc -l <"$tmp.fail")
  rm -f "$tmp.fail"
  echo "spec_examples: $n failures"
  exit 1
fi
rm -f "$tmp.fail"
echo "spec_examples: every example kernel specialises"
