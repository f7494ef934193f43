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
# a cache that cannot be written, said once by the command (exit 1), in
# $T/o and $T/e: stats as its problem (stdout), the others as their one
# error (stderr); ls, which writes nothing, may not find out (exit 0,
# silent) or says it once
said_once() { # WHAT SUB RC
  n=$(grep -c "cannot be written\|readonly database\|Read-only file system\|Permission denied\|not writable" "$T/o" "$T/e" | awk -F: '{s += $NF} END {print s}')
  case $2 in
  stats*) ok=$([ "$3" = 1 ] && [ "$n" = 1 ] && [ ! -s "$T/e" ] && grep -q "^problem: *cache .* cannot be written" "$T/o" && echo y) ;;
  ls) ok=$({ [ "$3" = 1 ] && [ "$n" = 1 ] && [ "$(wc -l <"$T/e")" = 1 ]; } || { [ "$3" = 0 ] && [ "$n" = 0 ]; } && echo y) ;;
  *) ok=$([ "$3" = 1 ] && [ "$n" = 1 ] && [ "$(wc -l <"$T/e")" = 1 ] && grep -q "cache .* cannot be written" "$T/e" && echo y) ;;
  esac
  [ "$ok" = y ] || bad "$1: $2: exit $3, not said once: $(cat "$T/e"; grep -v '^[0-9a-f]\{16\} ' "$T/o" | head -3)"
}
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
"$CLI" bundle import "$T/ex.xpb" | grep -q "imported 80 entries" || bad "import count"
run_examples
s=$("$CLI" cache stats --json)
[ "$(echo "$s" | jnum compiles)" = 0 ] || bad "import: compiles: $s"
[ "$(echo "$s" | jnum l2_hits)" = 3 ] || bad "import: l2 hits: $s"
[ "$(echo "$s" | jnum entries)" = 80 ] || bad "import: entries: $s"

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
"$CLI" cache show "$d" -o "$T/bin.o" >/dev/null 2>&1 && [ -s "$T/bin.o" ] || bad "cache show -o"
"$CLI" cache show ffff0000 >/dev/null 2>&1; [ $? = 1 ] || bad "show missing: exit 1"
"$CLI" cache show xyz >/dev/null 2>&1; [ $? = 2 ] || bad "show bad digest: exit 2"
"$CLI" cache verify | grep -q "3 entries checked, 0 bad" || bad "cache verify"
"$CLI" cache export "$T/mine.xpb" | grep -q "exported 3" || bad "cache export"
# a --path that names nothing is a typo: exit 1, nothing created; an
# empty one is a usage error
"$CLI" cache --path "$T/typo/cache.db" stats >/dev/null 2>&1; rc=$?
[ $rc -eq 1 ] && [ ! -e "$T/typo" ] || bad "cache --path TYPO stats: exit $rc, or it created files"
"$CLI" cache --path "$T/mine.typo" ls >/dev/null 2>&1; rc=$?
[ $rc -eq 1 ] && [ ! -e "$T/mine.typo" ] || bad "cache --path TYPO ls: exit $rc, or it created the file"
"$CLI" cache --path= stats >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || bad "cache --path= stats: exit $rc, want 2"
# a time in a damaged or foreign file that is not a finite number of
# microseconds: null in JSON, every entry still listed (json_real refuses
# infinity, taken for out of memory: 1e307 ms, finite, overflowed to
# infinity when made microseconds, and its entry was dropped from a
# document printed anyway, exit 1: an outside probe)
if command -v sqlite3 >/dev/null 2>&1; then
  for ms in 1e999 1e307; do
    cp "$XPJIT_CACHE_DIR/cache-v2.db" "$T/inf.db"
    sqlite3 "$T/inf.db" "UPDATE entries SET compile_ms = $ms; UPDATE stats SET value = $ms WHERE name = 'compile_ms'" 2>/dev/null
    for sub in ls stats; do
      "$CLI" cache --path "$T/inf.db" --json $sub > "$T/inf.json" 2>"$T/inf.err" ||
        bad "cache --json $sub with a time of $ms ms: exit $?: $(cat "$T/inf.err")"
      python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/inf.json" ||
        bad "cache --json $sub with a time of $ms ms: invalid JSON"
    done
    python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get("compile_ms", 0) is None else 1)' "$T/inf.json" ||
      bad "cache stats --json with a time of $ms ms: not null: $(cat "$T/inf.json")"
    "$CLI" cache --path "$T/inf.db" --json ls > "$T/inf.json"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); e=d if isinstance(d,list) else d.get("entries",[]); sys.exit(0 if len(e) == 3 and all(x.get("compile_ms", 0) is None for x in e) else 1)' "$T/inf.json" ||
      bad "cache ls --json with times of $ms ms: entries missing or not null"
    cp "$XPJIT_CACHE_DIR/cache-v2.db.key" "$T/inf.db.key" # (rows signed with it)
    "$CLI" cache --path "$T/inf.db" export "$T/inf.xpb" >/dev/null
    "$CLI" bundle ls "$T/inf.xpb" --json > "$T/inf.json" 2>"$T/inf.err" ||
      bad "bundle ls --json with times of $ms ms: exit $?: $(cat "$T/inf.err")"
    python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["entries"]; sys.exit(0 if len(e) == 3 and all(x["compile_ms"] is None for x in e) else 1)' "$T/inf.json" ||
      bad "bundle ls --json with times of $ms ms: entries missing or not null: $(cat "$T/inf.json")"
    rm -f "$T/inf.xpb" "$T/inf.db.key"
  done
  # (and one a hair below the bound is a number, to the microsecond)
  cp "$XPJIT_CACHE_DIR/cache-v2.db" "$T/inf.db"
  sqlite3 "$T/inf.db" "UPDATE entries SET compile_ms = 1e300"
  "$CLI" cache --path "$T/inf.db" --json ls | grep -q '"compile_ms": 1e300,' ||
    bad "cache ls --json of 1e300 ms: $("$CLI" cache --path "$T/inf.db" --json ls | cut -c1-400)"
fi
# a foreign bundle's meta never reaches the terminal raw (an escape
# sequence planted in "versions": printed as ?), neither in a table nor
# in a message (import's "built by another xpjit (VERSIONS...)" printed
# it raw: an outside probe); a C1 control (U+009B, CSI) neither
if command -v sqlite3 >/dev/null 2>&1; then
  cp "$T/ex.xpb" "$T/esc.xpb"
  sqlite3 "$T/esc.xpb" "UPDATE meta SET value = value || char(27) || ']0;pwned' || char(7) || char(155) || '2J' WHERE name = 'versions'"
  for sub in ls verify import; do
    XPJIT_CACHE_DIR="$T/esc-c0" "$CLI" bundle $sub "$T/esc.xpb" > "$T/esc.out" 2>&1
    if LC_ALL=C grep -q "$(printf '\033\|\302\233\|\007')" "$T/esc.out"; then bad "bundle $sub printed a foreign escape sequence: $(cat -v "$T/esc.out" | grep pwned)"; fi
    grep -q "pwned??2J" "$T/esc.out" || bad "bundle $sub: the versions line is missing: $(cat -v "$T/esc.out")"
  done
  # nor in the library's warnings, which quote a damaged row's digest
  cp "$T/ex.xpb" "$T/esc.xpb"
  sqlite3 "$T/esc.xpb" "UPDATE entries SET digest = char(27) || ']0;pwned' || char(7) || digest WHERE rowid = (SELECT min(rowid) FROM entries)"
  XPJIT_CACHE_DIR="$T/esc-c" "$CLI" bundle import "$T/esc.xpb" > "$T/esc.out" 2>&1
  if LC_ALL=C grep -q "$(printf '\033\|\007')" "$T/esc.out"; then bad "bundle import printed a warning's escape sequence: $(cat -v "$T/esc.out")"; fi
  grep -q "warning: .*entry ?\]0;pwned?" "$T/esc.out" || bad "bundle import of a damaged row: $(cat -v "$T/esc.out")"
fi
# usable or not by its entries, never by meta.versions, which nothing
# checks, and verify and import agree (a NULL or blob meta: verify said
# "not usable", import imported; a meta naming this build over entries of
# another: called usable and imported; the reverse refused: an outside
# probe). A meta that is not the entries' is noted.
if command -v sqlite3 >/dev/null 2>&1; then
  for how in "NULL" "x'00ff'" "'xpjit=0.0.1;llvm=1;abi=1;codegen=1'"; do
    cp "$T/ex.xpb" "$T/mv.xpb"
    sqlite3 "$T/mv.xpb" "UPDATE meta SET value = $how WHERE name = 'versions'"
    "$CLI" bundle verify "$T/mv.xpb" >"$T/o" 2>&1 && grep -q "note: its meta names the build" "$T/o" ||
      bad "bundle verify, meta versions $how: exit $?: $(cat "$T/o")"
    "$CLI" bundle ls "$T/mv.xpb" --json 2>/dev/null | grep -q '"usable": true' ||
      bad "bundle ls --json, meta versions $how: not usable"
    XPJIT_CACHE_DIR="$T/mv-c" "$CLI" bundle import "$T/mv.xpb" >"$T/o" 2>&1 &&
      grep -q "imported 80 entries" "$T/o" || bad "bundle import, meta versions $how: $(cat "$T/o")"
    rm -rf "$T/mv-c"
  done
  cp "$T/ex.xpb" "$T/mv.xpb"
  sqlite3 "$T/mv.xpb" "UPDATE entries SET versions = 'xpjit=0.0.1;llvm=1;abi=1;codegen=1'"
  "$CLI" bundle verify "$T/mv.xpb" >"$T/o" 2>&1; rc=$?
  [ $rc = 1 ] && grep -q "not usable by this xpjit" "$T/o" ||
    bad "bundle verify, entries of another build under this one's meta: exit $rc: $(cat "$T/o" | tail -3)"
  "$CLI" bundle ls "$T/mv.xpb" --json 2>/dev/null | grep -q '"usable": false' ||
    bad "bundle ls --json, entries of another build: usable"
  XPJIT_CACHE_DIR="$T/mv-c" "$CLI" bundle import "$T/mv.xpb" >"$T/o" 2>&1; rc=$?
  [ $rc = 1 ] && grep -q "built by another xpjit (xpjit=0.0.1;llvm=1;abi=1;codegen=1; this is" "$T/o" &&
    grep -q "nothing imported" "$T/o" ||
    bad "bundle import, entries of another build under this one's meta: exit $rc: $(cat "$T/o")"
  rm -rf "$T/mv-c" "$T/mv.xpb"
fi
# never renamed over something that is not a regular file (as root, -o
# /dev/null once replaced the device node): a FIFO and a link stay
mkfifo "$T/fifo.xpb"
ln -s "$T/mine.xpb" "$T/link.xpb"
for out in "$T/fifo.xpb" "$T/link.xpb"; do
  if "$CLI" cache export "$out" >/dev/null 2>"$T/exp.err"; then
    bad "cache export over $out succeeded"
  fi
  grep -q "is not a regular file" "$T/exp.err" || bad "cache export over $out: no reason"
done
[ -p "$T/fifo.xpb" ] && [ -L "$T/link.xpb" ] || bad "cache export replaced a FIFO or a link"
"$CLI" bundle build examples/saxpy.xpk --dtype T=f32 --target cpu -o "$T/fifo.xpb" \
  >/dev/null 2>&1 && bad "bundle build -o FIFO succeeded"
[ -p "$T/fifo.xpb" ] || bad "bundle build replaced a FIFO"
"$CLI" bundle verify "$T/mine.xpb" >/dev/null || bad "exported bundle verify"
# an empty cache's export names no build: imported as nothing, not refused
XPJIT_CACHE_DIR="$T/empty-c" "$CLI" cache export "$T/empty.xpb" >/dev/null || bad "export of an empty cache"
XPJIT_CACHE_DIR="$T/empty-d" "$CLI" bundle import "$T/empty.xpb" >"$T/o" 2>&1 &&
  grep -q "imported 0 entries" "$T/o" || bad "import of an empty bundle: $(cat "$T/o")"
# damage one row: verify finds it (exit 1), --repair removes it
sqlite3 "$T/c3/cache-v2.db" "UPDATE entries SET data = zeroblob(64) WHERE digest = '$d'"
"$CLI" cache verify >/dev/null; [ $? = 1 ] || bad "verify: damage not found"
"$CLI" cache verify --repair --json | grep -q '"bad": 1' || bad "verify --repair"
"$CLI" cache verify >/dev/null || bad "verify after repair"
# a cache that cannot be used (its lock a FIFO) is not repaired, and
# verify --repair does not say it was
mv "$T/c3/cache-v2.db.lock" "$T/c3/lock.kept" && mkfifo -m 600 "$T/c3/cache-v2.db.lock"
"$CLI" cache verify --repair >"$T/o" 2>&1; [ $? = 1 ] || bad "verify --repair of a refused cache: exit"
grep -q "nothing repaired" "$T/o" && ! grep -q "(removed)" "$T/o" ||
  bad "verify --repair of a refused cache: $(cat "$T/o")"
"$CLI" cache verify --repair --json 2>/dev/null | grep -q '"repaired": false' ||
  bad "verify --repair --json of a refused cache says repaired"
[ -p "$T/c3/cache-v2.db.lock" ] || bad "verify --repair replaced the FIFO"
rm "$T/c3/cache-v2.db.lock" && mv "$T/c3/lock.kept" "$T/c3/cache-v2.db.lock"
# a file that is not a database: --repair moves it aside and says so once,
# as its finding (the open's warning said it again on stderr)
mkdir -m 700 "$T/c9"
printf 'not a database at all, though long enough to be read as one' >"$T/c9/cache-v2.db"
XPJIT_CACHE_DIR="$T/c9" "$CLI" cache verify --repair >"$T/o" 2>"$T/e"; [ $? = 1 ] || bad "verify --repair of a damaged file: exit"
grep -q "bad: file: .*moved to .*cache-v2.db.corrupt, a new one was started" "$T/o" || bad "verify --repair of a damaged file: $(cat "$T/o")"
if grep -q "moved it to" "$T/e"; then bad "verify --repair said twice that it moved the file: $(cat "$T/e")"; fi
printf 'not a database at all, though long enough to be read as one' >"$T/c9/cache-v2.db"
XPJIT_CACHE_DIR="$T/c9" "$CLI" cache verify --repair --json >"$T/o" 2>"$T/e"
grep -q '"problems": \[".*moved to .*cache-v2.db.corrupt.1, a new one was started"\]' "$T/o" && [ ! -s "$T/e" ] ||
  bad "verify --repair --json of a damaged file: $(cat "$T/o" "$T/e")"
# a directory named like an alias in .hits/: --repair removes it (when
# empty; it said "(removed)" and left it, reported at every run), and
# says so when it cannot
al="$T/c3/cache-v2.db.hits/a$(printf '%064d' 0)"
mkdir "$al"
"$CLI" cache verify --repair >"$T/o" 2>&1
grep -q "hit file alias a0000000000000000: not made for this cache (removed)" "$T/o" && [ ! -e "$al" ] ||
  bad "verify --repair of a directory named like an alias: $(cat "$T/o"); $(ls -d "$al" 2>&1)"
mkdir -p "$al/x"
"$CLI" cache verify --repair >"$T/o" 2>&1
grep -q "alias a0000000000000000: not made for this cache (not removed: Directory not empty; remove it by hand)" "$T/o" ||
  bad "verify --repair of a directory named like an alias, not empty: $(cat "$T/o")"
rm -rf "$al"
"$CLI" cache prune --max-size 1 --json >"$T/pr" 2>&1; grep -q '"removed": 2' "$T/pr" || bad "prune --max-size: $(cat "$T/pr")"
"$CLI" cache prune --older-than 1d | grep -q "removed 0" || bad "prune --older-than"
"$CLI" cache clear >/dev/null || bad "cache clear"
[ "$("$CLI" cache stats --json | jnum entries)" = 0 ] || bad "clear: entries"
[ "$("$CLI" cache stats --json | jnum compiles)" = 0 ] || bad "clear: counters"

# -- stats --zero: the statistics, then the counters reset; entries stay
export XPJIT_CACHE_DIR="$T/c9"
run_examples
"$CLI" cache stats --zero --json >"$T/z.json" || bad "stats --zero"
[ "$(jnum compiles <"$T/z.json")" = 3 ] || bad "stats --zero: not the counters before: $(cat "$T/z.json")"
grep -q '"zeroed": true' "$T/z.json" || bad "stats --zero --json: no zeroed"
s=$("$CLI" cache stats --json)
[ "$(echo "$s" | jnum compiles)" = 0 ] || bad "stats --zero: compiles not reset: $s"
[ "$(echo "$s" | jnum l2_misses)" = 0 ] || bad "stats --zero: l2_misses not reset: $s"
[ "$(echo "$s" | jnum entries)" = 3 ] || bad "stats --zero: entries: $s"
echo "$s" | grep -q '"zeroed"' && bad "stats without --zero says zeroed"
run_examples
s=$("$CLI" cache stats --json)
[ "$(echo "$s" | jnum l2_hits)" = 3 ] && [ "$(echo "$s" | jnum compiles)" = 0 ] ||
  bad "after --zero the examples are not served from the cache: $s"
"$CLI" cache stats --zero >"$T/o" 2>"$T/e" || bad "stats --zero (text)"
grep -q "^disk hits: *3 of 3" "$T/o" && grep -q "reset to zero" "$T/e" || bad "stats --zero (text): $(cat "$T/o" "$T/e")"
[ "$("$CLI" cache stats --json | jnum l2_hits)" = 0 ] || bad "stats --zero (text): not reset"
"$CLI" cache ls | grep -c saxpy | grep -qx 1 || bad "stats --zero removed entries"

# -- show -o: the binary and nothing else on stdout (one line on stderr)
d=$("$CLI" cache ls --json | sed -n 's/.*"digest": "\([0-9a-f]*\)".*/\1/p' | head -1)
"$CLI" cache show "$d" -o "$T/b1.bin" >"$T/o" 2>"$T/e" || bad "show -o"
[ -s "$T/o" ] && bad "show -o printed on stdout: $(head -2 "$T/o")"
[ "$(wc -l <"$T/e")" = 1 ] && grep -q "wrote the [0-9]* bytes of ${d%${d#????????????????}} to $T/b1.bin" "$T/e" ||
  bad "show -o: stderr: $(cat "$T/e")"
"$CLI" cache show "$d" -o - >"$T/b2.bin" 2>"$T/e" || bad "show -o -"
[ -s "$T/e" ] && bad "show -o - wrote on stderr"
"$CLI" cache show "$d" --output="$T/b3.bin" --json >"$T/o" 2>/dev/null || bad "show --output --json"
grep -q "\"digest\": \"$d\"" "$T/o" || bad "show --json -o: no entry"
cmp -s "$T/b1.bin" "$T/b2.bin" && cmp -s "$T/b1.bin" "$T/b3.bin" || bad "show -o: the binaries differ"
"$CLI" cache show "$d" | grep -q "^key:" || bad "show without -o"
"$CLI" cache show "$d" --json -o - >/dev/null 2>&1; [ $? = 2 ] || bad "show --json -o -"
"$CLI" cache show >/dev/null 2>&1; [ $? = 2 ] || bad "show without a digest"
"$CLI" cache show "$d" "$d" >/dev/null 2>&1; [ $? = 2 ] || bad "show with two digests"
"$CLI" cache show "$d" -o /nonexistent/dir/x >/dev/null 2>&1; [ $? = 1 ] || bad "show -o to nowhere"
# the temporaries of -o and of export are made new under names nobody can
# guess (mkstemp, mkdtemp beside OUT), never opened as found: what is at
# the name they had before, OUT.tmp.PID (a stale file, a directory with a
# journal in it, one others may enter, another user's), neither stops the
# command (each did: planted in /tmp, a denial of service) nor is touched,
# and nothing of it becomes the output. `exec` keeps the shell's id: the
# CLI's PID is $$.
sh -c 'echo stale > "$1.tmp.$$"; exec "$2" cache show "$3" -o "$1"' sh \
  "$T/own.bin" "$CLI" "$d" >/dev/null 2>&1 &&
  cmp -s "$T/own.bin" "$T/b1.bin" || bad "show -o beside a file at the old temporary's name"
grep -qx stale "$T"/own.bin.tmp.* || bad "show -o touched the file at the old temporary's name"
rm -f "$T"/own.bin.tmp.*
sh -c 'mkdir -m 700 "$1.tmp.$$" && echo junk > "$1.tmp.$$/bundle-journal" &&
  exec "$2" cache export "$1"' sh "$T/own.xpb" "$CLI" >/dev/null 2>&1 &&
  "$CLI" bundle verify "$T/own.xpb" >/dev/null || bad "export beside a directory at the old temporary's name"
grep -qx junk "$T"/own.xpb.tmp.*/bundle-journal || bad "export touched the directory at the old temporary's name"
rm -rf "$T"/own.xpb.tmp.*
sh -c 'mkdir -m 755 "$1.tmp.$$"; exec "$2" cache export "$1"' sh "$T/open.xpb" \
  "$CLI" >/dev/null 2>"$T/e" && "$CLI" bundle verify "$T/open.xpb" >/dev/null ||
  bad "export beside an open directory at the old temporary's name: $(cat "$T/e")"
rm -rf "$T"/open.xpb.tmp.*
ls -A "$T" | grep -q '^[.]xpjit-' && bad "temporaries left: $(ls -A "$T" | grep '^[.]xpjit-')"
# a long output name (OUT.tmp.PID was longer than a name may be)
long=$(printf '%0245d' 0 | tr 0 x)
"$CLI" cache show "$d" -o "$T/$long.bin" >/dev/null 2>"$T/e" && cmp -s "$T/$long.bin" "$T/b1.bin" ||
  bad "show -o to a name of 249 bytes: $(cat "$T/e")"
"$CLI" cache export "$T/$long.xpb" >/dev/null 2>"$T/e" || bad "export to a name of 249 bytes: $(cat "$T/e")"
rm -f "$T/$long.bin" "$T/$long.xpb"
if [ "$(id -u)" = 0 ]; then
  mkdir -p -m 1777 "$T/pub"
  sh -c 'echo theirs > "$1.tmp.$$"; chown nobody "$1.tmp.$$";
    exec "$2" cache show "$3" -o "$1"' sh "$T/pub/b.bin" "$CLI" "$d" \
    >/dev/null 2>"$T/e" || bad "show -o beside another user's file: $(cat "$T/e")"
  cmp -s "$T/pub/b.bin" "$T/b1.bin" && [ "$(stat -c %u "$T/pub/b.bin")" = 0 ] ||
    bad "show -o beside another user's file: the output is not ours"
  grep -qx theirs "$T"/pub/b.bin.tmp.* || bad "show -o touched another user's file"
  sh -c 'mkdir -m 700 "$1.tmp.$$"; chown nobody "$1.tmp.$$";
    exec "$2" cache export "$1"' sh "$T/pub/x.xpb" "$CLI" >/dev/null 2>&1 &&
    "$CLI" bundle verify "$T/pub/x.xpb" >/dev/null || bad "export beside another user's directory"
  [ "$(stat -c %U "$T"/pub/x.xpb.tmp.*)" = nobody ] || bad "export touched another user's directory"
fi

# -- ls: columns as wide as their contents, the table aligned with a long
# native target (the CPU feature list left out) and a long kernel name
"$CLI" bundle build examples/saxpy.xpk examples/reduce.xpk --kernel saxpy --kernel block_partials \
  --dtype T=f32 --target cpu:x86-64-v3,sapphirerapids -j2 -o "$T/long.xpb" 2>"$T/e" || bad "bundle build -j2: $(cat "$T/e")"
"$CLI" bundle import "$T/long.xpb" >/dev/null || bad "import long.xpb"
"$CLI" cache ls >"$T/ls"
aligned() { # every row's cells start under their headers (NUMBERS end there)
  awk 'NR == 1 { k = index($0, "KERNEL"); t = index($0, "TARGET"); o = index($0, "OPTS")
                 h = index($0, "HITS") + 3; l = index($0, "LAST USED"); next }
       { if (substr($0, k - 2, 3) !~ /^  [^ ]$/ || substr($0, t - 2, 3) !~ /^  [^ ]$/ ||
             substr($0, o, 2) != "O2" || substr($0, h, 2) !~ /^[0-9] $/ ||
             substr($0, l - 2, 3) !~ /^  [0-9]$/) { print "misaligned: " $0; bad = 1 } }
       END { exit bad }' "$1"
}
aligned "$T/ls" || { bad "cache ls: columns not aligned"; cat "$T/ls"; }
grep -q "  cpu:sapphirerapids  O2 " "$T/ls" && grep -q " block_partials " "$T/ls" || bad "cache ls: target or kernel cut: $(cat "$T/ls")"
grep -q "+avx" "$T/ls" && bad "cache ls: the CPU features are in the table"
[ "$(wc -l <"$T/ls")" = 8 ] || bad "cache ls: $(wc -l <"$T/ls") lines, want 8"
"$CLI" bundle ls "$T/long.xpb" | sed -n '/^DIGEST/,$p' >"$T/bls"
aligned "$T/bls" || { bad "bundle ls: columns not aligned"; cat "$T/bls"; }
"$CLI" cache ls --color=always | head -1 | grep -q "$(printf '\033')\[1mDIGEST" || bad "cache ls: no bold header"
"$CLI" cache ls | grep -q "$(printf '\033')" && bad "cache ls coloured a pipe"

# -- bundle build: -j N / -jN / --jobs=N, types by position, --json
for j in "-j 2" -j2 --jobs=2; do
  # shellcheck disable=SC2086
  "$CLI" bundle build examples/saxpy.xpk --dtype T=f32,f64 --target cpu $j -o "$T/j.xpb" 2>"$T/e" ||
    bad "bundle build $j: $(cat "$T/e")"
done
"$CLI" bundle build examples/saxpy.xpk --dtype f32 --dtype f64 --target cpu -o "$T/p.xpb" 2>"$T/e"
[ $? = 1 ] && grep -q "skipping kernel saxpy: it takes 1 type parameters, --dtype gives 2" "$T/e" ||
  bad "bundle build: two types by position for one: $(cat "$T/e")"
# every combination skipped: no empty bundle, exit 1 (it wrote one, exit 0)
rm -f "$T/none.xpb"
"$CLI" bundle build examples/saxpy.xpk --dtype T=bool --target cpu -o "$T/none.xpb" 2>"$T/e"
[ $? = 1 ] && [ ! -e "$T/none.xpb" ] && grep -q "nothing was compiled" "$T/e" ||
  bad "bundle build of nothing: $(cat "$T/e")"
# a binding longer than the job's old 256-byte buffer (8 type parameters
# of 50-character names) reaches the library whole, which says it is too
# long (the buffer cut it: another binding than asked)
P=""; A=""; D=""
for i in 1 2 3 4 5 6 7 8; do
  n=$(printf 'T%049d' "$i")
  P="$P${P:+, }$n"; A="$A, x$i: global $n[]"; D="$D --dtype $n=f32"
done
printf 'kernel k<%s>(y: global f32[]%s) range { y[0] = 1.0; }\n' "$P" "$A" >"$T/long.xpk"
# shellcheck disable=SC2086
"$CLI" bundle build "$T/long.xpk" $D --target cpu -o "$T/lb.xpb" 2>"$T/e"
[ $? = 1 ] && grep -q "$(printf 'T%049d' 8)=f32\] ndim=0: kernel k: the dtypes are too long (439 bytes" "$T/e" ||
  bad "bundle build of a long binding: $(cat "$T/e")"
"$CLI" bundle build examples/saxpy.xpk --dtype T=f32,f64 --target cpu -j0 -o "$T/x.xpb" >/dev/null 2>&1
[ $? = 2 ] || bad "bundle build -j0"
"$CLI" bundle build examples/saxpy.xpk --dtype f32 --target cpu -o "$T/p.xpb" --json >"$T/o" 2>"$T/e" ||
  bad "bundle build --dtype f32 --json: $(cat "$T/e")"
grep -q '^{"bundle": ".*p.xpb", "kernels": 1, "compiled": 1, "failed": 0, "skipped": 0, "duplicates": 0, "left_out": 0, "options": "O2"}$' "$T/o" ||
  bad "bundle build --json: $(cat "$T/o")"
"$CLI" bundle ls "$T/p.xpb" | grep -q "saxpy .* T=f32 " || bad "bundle ls after --dtype f32"
# -- (an outside probe) a kernel without type or const parameters: its
# job's binding was never written, so garbage from the stack reached the
# library ("kernel fill takes 0 type parameters, dtypes "\001" gives
# more") and such kernels were skipped, or failed
printf 'kernel fill(y: global i64[], v: i64) range { y[global_id(0)] = v; }\n' >"$T/plain.xpk"
"$CLI" bundle build "$T/plain.xpk" --target cpu -o "$T/plain.xpb" 2>"$T/e" ||
  bad "bundle build of a kernel without type parameters: $(cat "$T/e")"
grep -q 'plain.xpb: 1 kernels (1 compiled, 0 failed, 0 skipped)' "$T/e" ||
  bad "bundle build of a kernel without type parameters: $(cat "$T/e")"
# a kernel left out for want of a --dtype is counted in the summary (it
# said "0 skipped", the note above it the only trace)
printf 'kernel gen<T>(y: global T[]) range { y[global_id(0)] = T(1); }\n' >>"$T/plain.xpk"
"$CLI" bundle build "$T/plain.xpk" --target cpu -o "$T/plain.xpb" 2>"$T/e" ||
  bad "bundle build with a kernel left out: $(cat "$T/e")"
grep -q "skipping kernel gen: no --dtype for its type parameter T" "$T/e" &&
  grep -q 'plain.xpb: 1 kernels (1 compiled, 0 failed, 0 skipped; 1 kernel of the files left out)' "$T/e" ||
  bad "bundle build with a kernel left out: $(cat "$T/e")"
"$CLI" bundle build "$T/plain.xpk" --target cpu -o "$T/plain.xpb" --json 2>/dev/null | grep -q '"left_out": 1,' ||
  bad "bundle build --json with a kernel left out"
"$CLI" bundle ls "$T/plain.xpb" | grep -q "fill " || bad "bundle ls: no fill"
# -- (an outside probe) bundle build takes its options from its command
# line only: XPJIT_CHECK, which the library adds to every kernel of a
# context, is not read (its entries came out O2+bounds, which no run
# without it asks for: the bundle served nothing), as emit does not read
# it; --check=bounds asks for the checks; the summary names the options
XPJIT_CHECK=bounds "$CLI" bundle build examples/saxpy.xpk --dtype T=f32 --target cpu \
  -o "$T/chk.xpb" 2>"$T/e" || bad "bundle build under XPJIT_CHECK=bounds: $(cat "$T/e")"
grep -q 'chk.xpb: 1 kernels (1 compiled, 0 failed, 0 skipped), options O2$' "$T/e" ||
  bad "bundle build under XPJIT_CHECK=bounds: summary $(cat "$T/e")"
"$CLI" bundle ls "$T/chk.xpb" --json | grep -q '"options": "O2",' ||
  bad "bundle build followed XPJIT_CHECK: $("$CLI" bundle ls "$T/chk.xpb" --json)"
XPJIT_CHECK=bogus "$CLI" bundle build examples/saxpy.xpk --dtype T=f32 --target cpu \
  --check=bounds -O3 -o "$T/chk.xpb" --json >"$T/o" 2>"$T/e" || bad "bundle build --check=bounds: $(cat "$T/e")"
grep -q '"options": "O3+bounds"}$' "$T/o" || bad "bundle build --check=bounds --json: $(cat "$T/o")"
"$CLI" bundle ls "$T/chk.xpb" --json | grep -q '"options": "O3+bounds",' ||
  bad "bundle build --check=bounds: $("$CLI" bundle ls "$T/chk.xpb" --json)"
for c in '' everything; do
  "$CLI" bundle build examples/saxpy.xpk --dtype T=f32 --target cpu --check="$c" \
    -o "$T/chk2.xpb" >/dev/null 2>&1
  [ $? = 2 ] && [ ! -e "$T/chk2.xpb" ] || bad "bundle build --check='$c': not a usage error"
done
# (emit neither: the same object with XPJIT_CHECK=bounds as without)
"$CLI" emit examples/saxpy.xpk --kernel saxpy --dtype T=f32 --target cpu:x86-64 --emit llvm -o "$T/e1.ll" &&
  XPJIT_CHECK=bounds "$CLI" emit examples/saxpy.xpk --kernel saxpy --dtype T=f32 --target cpu:x86-64 \
    --emit llvm -o "$T/e2.ll" && cmp -s "$T/e1.ll" "$T/e2.ll" || bad "emit followed XPJIT_CHECK"
# -- (an outside probe) bundle build compiles every entry itself: a
# bundle is trusted as its builder's own work (security.md), and a value
# anyone who may write a Redis had planted there ended up in one, summed
# up as "1 compiled"; nothing comes from a daemon either. Not one command
# reaches Redis (XPJIT_REDIS) or the daemon (XPJIT_DAEMON) during a build.
RSV=${XPJIT_TEST_REDIS_SERVER:-redis-server}
if [ -z "${XPJIT_TEST_NO_REDIS:-}" ] && command -v "$RSV" >/dev/null 2>&1 &&
  command -v redis-cli >/dev/null 2>&1; then
  "$RSV" --port 0 --unixsocket "$T/r.sock" --save '' --appendonly no \
    --logfile "$T/redis.log" &
  rpid=$!
  i=0
  until [ -S "$T/r.sock" ] || [ $i -ge 50 ]; do sleep 0.1; i=$((i + 1)); done
  XPJIT_REDIS="unix:$T/r.sock" "$CLI" bundle build examples/saxpy.xpk --dtype T=f32,f64 \
    --target cpu -o "$T/rb.xpb" 2>"$T/e" || bad "bundle build with XPJIT_REDIS: $(cat "$T/e")"
  grep -q 'rb.xpb: 2 kernels (2 compiled,' "$T/e" || bad "bundle build with XPJIT_REDIS: $(cat "$T/e")"
  redis-cli -s "$T/r.sock" info commandstats | tr -d '\r' | grep '^cmdstat_' |
    grep -v '^cmdstat_info:' >"$T/rstats"
  [ -S "$T/r.sock" ] && [ ! -s "$T/rstats" ] && [ "$(redis-cli -s "$T/r.sock" dbsize)" = 0 ] ||
    bad "bundle build asked Redis: $(cat "$T/rstats")"
  kill $rpid
  wait $rpid 2>/dev/null
else
  echo "cache_cli: NOTE: no redis-server or redis-cli: bundle build not checked against Redis"
fi
if command -v python3 >/dev/null 2>&1; then
  mkdir -m 700 "$T/dmn"
  python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(16)
while True:
    c, _ = s.accept()
    with open(sys.argv[2], "a") as f:
        f.write("a connection\n")
    c.close()
' "$T/dmn/xpjitd.sock" "$T/dmn/log" &
  dpid=$!
  i=0
  until [ -S "$T/dmn/xpjitd.sock" ] || [ $i -ge 50 ]; do sleep 0.1; i=$((i + 1)); done
  XPJIT_DAEMON="$T/dmn/xpjitd.sock" "$CLI" bundle build examples/saxpy.xpk --dtype T=f32 \
    --target cpu -o "$T/db.xpb" 2>"$T/e" || bad "bundle build with XPJIT_DAEMON: $(cat "$T/e")"
  [ -S "$T/dmn/xpjitd.sock" ] && [ ! -s "$T/dmn/log" ] || bad "bundle build asked the daemon"
  kill $dpid
  wait $dpid 2>/dev/null
fi
# -- every combination is counted once: the same kernel in two files is
# one entry of the bundle, compiled once, and the other a duplicate (the
# summary said "1 kernels (2 compiled, ...)")
cp examples/saxpy.xpk "$T/dup1.xpk" && cp examples/saxpy.xpk "$T/dup2.xpk"
"$CLI" bundle build "$T/dup1.xpk" "$T/dup2.xpk" --dtype T=f32 --target cpu -o "$T/dup.xpb" 2>"$T/e" ||
  bad "bundle build of one kernel in two files: $(cat "$T/e")"
grep -q 'dup.xpb: 1 kernels (1 compiled, 0 failed, 0 skipped, 1 duplicate), options O2$' "$T/e" ||
  bad "bundle build of one kernel in two files: summary $(cat "$T/e")"
"$CLI" bundle build "$T/dup1.xpk" "$T/dup2.xpk" --dtype T=f32,f64 --target cpu -o "$T/dup.xpb" --json >"$T/o" 2>"$T/e"
grep -q '"kernels": 2, "compiled": 2, "failed": 0, "skipped": 0, "duplicates": 2,' "$T/o" ||
  bad "bundle build --json of one kernel in two files: $(cat "$T/o")"

# -- bundle import --json
export XPJIT_CACHE_DIR="$T/c10"
"$CLI" bundle import "$T/ex.xpb" "$T/long.xpb" --json >"$T/o" || bad "bundle import --json"
grep -q '"bundles": \[{"bundle": ".*ex.xpb", "imported": 80, "skipped": 0, "damaged": 0, "evicted": 0}, {"bundle": ".*long.xpb", "imported": 4, "skipped": 0, "damaged": 0, "evicted": 0}\]' "$T/o" ||
  bad "bundle import --json: $(cat "$T/o")"
"$CLI" bundle import "$T/ex.xpb" "$T/nonexistent.xpb" --json >"$T/o" 2>/dev/null; [ $? = 1 ] || bad "bundle import --json of a missing bundle: exit"
grep -q '"imported": 0, "skipped": 80, "damaged": 0, "evicted": 0}, {"bundle": ".*nonexistent.xpb", "error": ' "$T/o" || bad "bundle import --json of a missing bundle: $(cat "$T/o")"
# a damaged entry is not imported, named in a warning, counted apart from
# those already there, and makes the exit status 1 (it was 0)
cp "$T/long.xpb" "$T/flip.xpb"
sqlite3 "$T/flip.xpb" "UPDATE entries SET data = zeroblob(64) WHERE rowid = (SELECT min(rowid) FROM entries)"
export XPJIT_CACHE_DIR="$T/c10b"
"$CLI" bundle import "$T/flip.xpb" >"$T/o" 2>"$T/e"; [ $? = 1 ] || bad "bundle import of a damaged entry: exit"
grep -q "imported 3 entries into .* (0 already there, 1 damaged)" "$T/o" || bad "bundle import of a damaged entry: $(cat "$T/o")"
grep -q "is damaged; not imported" "$T/e" || bad "bundle import of a damaged entry: no warning: $(cat "$T/e")"
# entries the size limit evicted meanwhile are said ("imported 80" of
# which a few stayed was said nowhere)
export XPJIT_CACHE_DIR="$T/c10c"
XPJIT_CACHE_MAX_SIZE=100K "$CLI" bundle import "$T/ex.xpb" --json >"$T/o" 2>"$T/e" || bad "bundle import under a size limit: exit"
grep -q '"imported": 80, "skipped": 0, "damaged": 0, "evicted": [1-9]' "$T/o" || bad "bundle import under a size limit: $(cat "$T/o")"
grep -q "entries were evicted to keep .* within its size limit" "$T/e" || bad "bundle import under a size limit: no warning: $(cat "$T/e")"

# -- JSON is valid whatever bytes a path or a cache file holds: a cache
# directory whose name is not UTF-8 (bytes shown as U+FFFD) and a kernel
# name with bytes that are not UTF-8 and an escape, from a foreign file;
# every command's --json is checked
if command -v python3 >/dev/null 2>&1; then
  U=$(printf '%s/c\377\376x' "$T")
  export XPJIT_CACHE_DIR="$U"
  "$B/examples/saxpy" 1000 >/dev/null 2>&1 || bad "saxpy in a cache directory not in UTF-8"
  # the cache's one row again under a kernel name with bytes that are not
  # UTF-8 and an escape, written through the library (a column changed by
  # hand is not its key's: show, export and import refuse such a row)
  foreign_name() {
    # (a sanitizer build's library needs its runtime loaded first)
    asan=$(ldd "$B/lib/libxpjit.so" 2>/dev/null | awk '/libasan/ {print $3}')
    env ${asan:+LD_PRELOAD=$asan ASAN_OPTIONS=detect_leaks=0} \
      python3 - "$B/lib/libxpjit.so" "$U/cache-v2.db" <<'PY'
import ctypes as C, os, sqlite3, sys
lib = C.CDLL(sys.argv[1])
S = C.c_char_p
class Cfg(C.Structure):
    _fields_ = [("path", S), ("mode", C.c_int), ("max_size", C.c_uint64),
                ("bundle", C.c_int), ("warn", C.c_void_p), ("warn_ud", C.c_void_p)]
class Key(C.Structure):
    _fields_ = [("code", S), ("kernel", S), ("dtypes", S), ("ndim", C.c_uint),
                ("target", S), ("options", S), ("versions", S)]
class Val(C.Structure):
    _fields_ = [("failed", C.c_int), ("data", S), ("size", C.c_size_t),
                ("entry", S), ("log", S), ("local", C.c_uint64),
                ("scratch", C.c_uint64), ("ms", C.c_double), ("expires", C.c_int64)]
db = sqlite3.connect(sys.argv[2])
db.text_factory = bytes
r = db.execute("SELECT digest, code, dtypes, ndim, target, options, versions, "
               "entry, data, log, local_bytes, scratch_bytes, compile_ms FROM entries").fetchall()
assert len(r) == 1, r
(dg, code, dt, nd, tg, op, vs, en, data, log, lo, sc, ms) = r[0]
db.execute("DELETE FROM entries")
db.commit()
db.close()
c = C.c_void_p()
assert lib.xpj_cache_open(C.byref(Cfg(os.fsencode(sys.argv[2]), 3, 0, 0, None, None)), C.byref(c)) == 0
k = Key(code, b"K\xff\x1b[31m", dt, nd, tg, op, vs)
v = Val(0, data, len(data), en, (log or b"") + b"w\x1b]0;pwned\x07\nline 2", lo, sc, ms, 0)
assert lib.xpj_cache_put(c, C.byref(k), C.byref(v)) == 0
lib.xpj_cache_close(c)
PY
  }
  foreign_name || bad "rewriting the row under a kernel name not in UTF-8"
  ud=$("$CLI" cache ls --json | sed -n 's/.*"digest": "\([0-9a-f]*\)".*/\1/p' | head -1)
  valid() { # python-condition command...
    cond=$1
    shift
    "$@" >"$T/j" 2>/dev/null
    python3 -c "import json, sys; d = json.load(open(sys.argv[1], encoding='utf-8')); assert $cond, d" "$T/j" 2>"$T/pe" ||
      { bad "not valid JSON, or not '$cond': $* -> $(cat "$T/j") $(tail -1 "$T/pe")"; }
  }
  F='"\ufffd\ufffdx" in d["path"]'
  valid "$F and d['entries'] == 1" "$CLI" cache stats --json
  valid "d[0]['kernel'] == 'K\ufffd\x1b[31m'" "$CLI" cache ls --json
  valid "d[0]['digest'] == '$ud'" "$CLI" cache show "${ud%????????????????????????????????????????????????}" --json
  valid "$F and d['checked'] == 1" "$CLI" cache verify --json
  valid "d['exported'] == 1" "$CLI" cache export "$U/u.xpb" --json
  valid "'\ufffd' in d['path'] and d['usable'] and d['entries'][0]['kernel'].startswith('K\ufffd')" "$CLI" bundle ls "$U/u.xpb" --json
  valid "d['bad'] == 0 and d['problems'] == []" "$CLI" bundle verify "$U/u.xpb" --json
  valid "'\ufffd' in d['cache'] and d['bundles'][0]['skipped'] == 1" "$CLI" bundle import "$U/u.xpb" --json
  valid "'\ufffd' in d['bundle'] and d['kernels'] == 1" "$CLI" bundle build examples/saxpy.xpk --dtype T=f32 --target cpu -o "$U/v.xpb" --json
  valid "d['zeroed'] and d['compiles'] == 1" "$CLI" cache stats --zero --json
  valid "d['removed'] == 1" "$CLI" cache prune --max-size 1 --json
  valid "d['cleared'] and $F" "$CLI" cache clear --json
  valid "d['running'] is False" "$CLI" daemon status --socket "$U/none.sock" --json
  # the text table shows the foreign name safely (no escape reaches the
  # terminal) and aligned
  "$B/examples/saxpy" 1000 >/dev/null 2>&1
  foreign_name || bad "rewriting the row under a kernel name not in UTF-8"
  "$CLI" cache ls >"$T/ls"
  grep -q "$(printf '\033')" "$T/ls" && bad "cache ls printed an escape from the cache file"
  aligned "$T/ls" || { bad "cache ls with a foreign kernel name: not aligned"; cat -v "$T/ls"; }
  # show neither, the kernel name nor the log (which it printed raw: an
  # outside probe); the key's and the log's lines stay lines
  "$CLI" cache show "$ud" >"$T/show" 2>&1 || bad "cache show of the foreign row: $(cat -v "$T/show")"
  grep -q "$(printf '\033\|\007')" "$T/show" && bad "cache show printed an escape from the cache file: $(cat -v "$T/show")"
  grep -q '^kernel: *K??\[31m$' "$T/show" && grep -q '^w?\]0;pwned?$' "$T/show" && grep -q '^line 2$' "$T/show" &&
    grep -q '^kernel K??\[31m$' "$T/show" || bad "cache show of the foreign row: $(cat -v "$T/show")"
else
  echo "cache_cli: NOTE: no python3: the JSON was not validated"
fi

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
# const parameters: one entry per value, named by its binding
"$CLI" bundle build tests/golden/constgen.xpk --dtype T=f32 --const TS=8,0x10 \
  --target cpu -o "$T/cg.xpb" 2>"$T/cg.err" || { bad "bundle build --const"; cat "$T/cg.err"; }
grep -q "2 kernels (2 compiled" "$T/cg.err" || bad "bundle build --const: $(cat "$T/cg.err")"
"$CLI" bundle ls "$T/cg.xpb" | grep -q "T=f32,TS=8 " || bad "bundle ls: no TS=8"
"$CLI" bundle ls "$T/cg.xpb" | grep -q "T=f32,TS=16 " || bad "bundle ls: no TS=16"
"$CLI" bundle build tests/golden/constgen.xpk --dtype T=f32 --target cpu \
  -o "$T/x.xpb" 2>"$T/cg.err"
[ $? = 1 ] && grep -q "no --const for its const parameter TS" "$T/cg.err" ||
  bad "bundle build without --const: $(cat "$T/cg.err")"
# an empty --kernel is a usage error (it was taken, and matched nothing)
"$CLI" bundle build examples/saxpy.xpk --dtype T=f32 --target cpu --kernel '' \
  -o "$T/x.xpb" >/dev/null 2>"$T/e"; rc=$?
[ $rc = 2 ] && grep -q "\-\-kernel takes a kernel's name" "$T/e" && [ ! -e "$T/x.xpb" ] ||
  bad "bundle build --kernel '': exit $rc: $(head -1 "$T/e")"
"$CLI" bundle build tests/golden/constgen.xpk --dtype T=f32 --const TS=x \
  --target cpu -o "$T/x.xpb" >/dev/null 2>&1
[ $? = 2 ] || bad "bundle build --const TS=x"
head -c 5000 /dev/urandom >"$T/junk.xpb"
"$CLI" bundle ls "$T/junk.xpb" >/dev/null 2>&1; [ $? = 1 ] || bad "bundle ls junk"
"$CLI" bundle import "$T/junk.xpb" >/dev/null 2>&1; [ $? = 1 ] || bad "bundle import junk"
"$CLI" bundle verify "$T/nonexistent.xpb" >/dev/null 2>&1; [ $? = 1 ] || bad "verify missing"
# a bundle from another version (its entries': meta.versions alone
# decides nothing) is refused by verify and ignored by programs
cp "$T/mine.xpb" "$T/old.xpb"
sqlite3 "$T/old.xpb" "UPDATE entries SET versions='xpjit=0.0.1;llvm=17.0.0;abi=1'; UPDATE meta SET value='xpjit=0.0.1;llvm=17.0.0;abi=1' WHERE name='versions'"
"$CLI" bundle verify "$T/old.xpb" >/dev/null 2>&1; [ $? = 1 ] || bad "verify old bundle"
export XPJIT_CACHE_DIR="$T/c4"
XPJIT_BUNDLE_PATH="$T/old.xpb" "$B/examples/saxpy" 1000 >"$T/o" 2>&1 || bad "saxpy with old bundle"
grep -q "is not used: it was built by xpjit=0.0.1" "$T/o" || bad "old bundle: no message"
# the cache directory cannot be made: a warning, and the program still works
XPJIT_CACHE_DIR=/proc/xpjit-nope "$B/examples/saxpy" 1000 >"$T/o" 2>&1 || bad "saxpy, no cache dir"
grep -q "without caching" "$T/o" || bad "no warning without a cache dir"
XPJIT_CACHE=off "$B/examples/saxpy" 1000 >/dev/null 2>&1 || bad "XPJIT_CACHE=off"

# -- one flipped bit in the schema (a column renamed; quick_check says ok):
# the tools tell the truth, --repair and clear repair it, programs cache
flip() { # DB: compile_ms -> compile_ls in the stored CREATE TABLE
  off=$(grep -obUa "compile_ms REAL" "$1" | head -1 | cut -d: -f1)
  [ -n "$off" ] || { bad "flip: no schema text in $1"; return; }
  printf 'l' | dd of="$1" bs=1 seek=$((off + 8)) conv=notrunc 2>/dev/null
  [ "$(sqlite3 "$1" 'PRAGMA quick_check')" = ok ] || bad "flip: quick_check"
}
stat_of() { "$CLI" cache stats --json | jnum "$1"; }
export XPJIT_CACHE_DIR="$T/c5"
db="$T/c5/cache-v2.db"
"$B/examples/saxpy" 1000 >/dev/null 2>&1 || bad "c5: saxpy"
cp "$db" "$T/good.db"
flip "$db"
"$CLI" cache verify >"$T/o" 2>&1; [ $? = 1 ] || bad "flip: verify exit"
grep -q "schema" "$T/o" || { bad "flip: verify does not say why"; cat "$T/o"; }
"$CLI" cache verify --repair >"$T/o" 2>&1; [ $? = 1 ] || bad "flip: verify --repair exit"
"$CLI" cache verify >"$T/o" 2>&1 || { bad "flip: not repaired"; cat "$T/o"; }
"$B/examples/saxpy" 1000 >"$T/o" 2>&1 || bad "flip: saxpy after repair"
"$B/examples/saxpy" 1000 >>"$T/o" 2>&1 || bad "flip: saxpy after repair"
[ "$(stat_of l2_hits)" = 1 ] || { bad "flip: no caching after repair"; cat "$T/o"; }
cp "$T/good.db" "$db"; rm -f "$db-wal" "$db-shm"
flip "$db"
"$CLI" cache clear >"$T/o" 2>&1 || { bad "flip: clear"; cat "$T/o"; }
"$B/examples/saxpy" 1000 >"$T/o" 2>&1 && "$B/examples/saxpy" 1000 >>"$T/o" 2>&1 || bad "flip: saxpy after clear"
grep -q "without caching" "$T/o" && bad "flip: programs still cannot cache after clear"
[ "$(stat_of l2_hits)" = 1 ] || { bad "flip: clear did not make a working cache"; cat "$T/o"; }
# read-only, the damage cannot be repaired: stats says the cache is off, exit 1
cp "$T/good.db" "$db"; rm -f "$db-wal" "$db-shm"
flip "$db"
XPJIT_CACHE=ro "$CLI" cache stats >"$T/o" 2>&1; [ $? = 1 ] || { bad "flip ro: stats exit"; cat "$T/o"; }
grep -q "(off)" "$T/o" || bad "flip ro: stats mode"
# a directory where the database should be: unusable, and every tool says so
mkdir -p "$T/dirdb"
"$CLI" cache stats --path "$T/dirdb" >"$T/o" 2>&1; [ $? = 1 ] || { bad "dir: stats exit"; cat "$T/o"; }
grep -q "(off)" "$T/o" || bad "dir: stats mode"
"$CLI" cache stats --json --path "$T/dirdb" 2>/dev/null | grep -q '"mode": "off"' || bad "dir: stats --json mode"
"$CLI" cache verify --path "$T/dirdb" >/dev/null 2>&1; [ $? = 1 ] || bad "dir: verify exit"
"$CLI" cache verify --repair --path "$T/dirdb" >/dev/null 2>&1; [ $? = 1 ] || bad "dir: verify --repair exit"
"$CLI" cache clear --path "$T/dirdb" >/dev/null 2>&1; [ $? = 1 ] || bad "dir: clear exit"
"$CLI" cache stats --zero --path "$T/dirdb" >/dev/null 2>&1; [ $? = 1 ] || bad "dir: stats --zero exit"
"$CLI" cache ls --path "$T/dirdb" >/dev/null 2>&1; [ $? = 1 ] || bad "dir: ls exit"
[ -d "$T/dirdb" ] || bad "dir: the directory was touched"

# -- trust: a cache directory others can write is refused with the reason
# (programs still work, compiling); another user's bundle is not used
# unless its owner is trusted (XPJIT_TRUSTED_OWNERS)
export XPJIT_CACHE_DIR="$T/c6"
mkdir -p "$T/c6" && chmod 1777 "$T/c6"
"$B/examples/saxpy" 1000 >"$T/o" 2>&1 || bad "trust: saxpy"
grep -q "refusing the cache $T/c6/cache-v2.db: the cache directory $T/c6 is writable by other users" "$T/o" ||
  { bad "trust: no warning"; cat "$T/o"; }
[ -e "$T/c6/cache-v2.db" ] && bad "trust: a cache was made in a shared directory"
"$CLI" cache stats >"$T/o" 2>&1; [ $? = 1 ] || bad "trust: stats exit"
grep -q "(off)" "$T/o" || bad "trust: stats mode"
"$CLI" cache verify >"$T/o" 2>&1; [ $? = 1 ] || bad "trust: verify exit"
grep -q "bad: .*writable by other users" "$T/o" || { bad "trust: verify does not say why"; cat "$T/o"; }
"$CLI" cache clear >/dev/null 2>&1; [ $? = 1 ] || bad "trust: clear exit"
chmod 700 "$T/c6"
"$B/examples/saxpy" 1000 >"$T/o" 2>&1 || bad "trust: saxpy after chmod"
"$CLI" cache verify >/dev/null 2>&1 || bad "trust: verify after chmod"
[ "$(stat -c %a "$T/c6/cache-v2.db")" = 600 ] || bad "trust: database not 0600"
# a database file its owner cannot write (chmod 400): stats says read-only,
# exit 1 (it said rw, exit 0: only a program's store found out); as nobody,
# since root writes anything
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  U=$(mktemp -d /tmp/xpjit-cachecli-ro-XXXXXX) && chown nobody "$U" && chmod 700 "$U"
  as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
  cp "$T/p.xpb" "$U/p.xpb" && chown nobody "$U/p.xpb"
  as_nobody env XPJIT_CACHE_DIR="$U/c" XPJIT_DAEMON=off "$CLI" bundle import "$U/p.xpb" >"$T/o" 2>&1 ||
    { bad "read-only file: import as nobody"; cat "$T/o"; }
  chmod 400 "$U/c/cache-v2.db"
  as_nobody env XPJIT_CACHE_DIR="$U/c" "$CLI" cache stats >"$T/o" 2>&1
  [ $? = 1 ] && grep -q "(ro)" "$T/o" && grep -q "cannot be written (Permission denied)" "$T/o" ||
    { bad "read-only file: stats"; cat "$T/o"; }
  # and said once by every command (stats said it as the library's
  # warning, then as its problem; ls twice; clear inside its own error:
  # "not writable (read-only: cache ... cannot be written (...))")
  for sub in stats ls clear "prune --max-size 1" "stats --zero"; do
    as_nobody env XPJIT_CACHE_DIR="$U/c" "$CLI" cache $sub >"$T/o" 2>"$T/e"; rc=$?
    said_once "read-only file" "$sub" $rc
  done
  rm -rf "$U"
fi
# the same on a read-only mount (a bind mount remounted read-only): the
# cache as programs leave it (an empty -wal and the -shm beside it: found
# read-only at the first write), and the file alone (found at the open)
if [ "$(id -u)" = 0 ] && mkdir -m 700 "$T/romnt" "$T/roc" &&
  cp "$T/c2/cache-v2.db" "$T/c2/cache-v2.db.key" "$T/roc/"; then
  for d in c2 roc; do
    mount --bind "$T/$d" "$T/romnt" 2>/dev/null || break
    if mount -o remount,ro,bind "$T/romnt" 2>/dev/null; then
      for sub in stats ls clear "prune --max-size 1" "stats --zero" import; do
        case $sub in
        import) XPJIT_CACHE_DIR="$T/romnt" "$CLI" bundle import "$T/ex.xpb" >"$T/o" 2>"$T/e" ;;
        *) XPJIT_CACHE_DIR="$T/romnt" "$CLI" cache $sub >"$T/o" 2>"$T/e" ;;
        esac
        said_once "read-only mount ($d)" "$sub" $?
      done
    fi
    umount "$T/romnt"
  done
fi
if [ "$(id -u)" = 0 ]; then
  cp "$T/ex.xpb" "$T/theirs.xpb" && chown nobody "$T/theirs.xpb"
  export XPJIT_CACHE_DIR="$T/c7"
  XPJIT_BUNDLE_PATH="$T/theirs.xpb" "$B/examples/saxpy" 1000 >"$T/o" 2>&1 || bad "trust: saxpy, their bundle"
  grep -q "XPJIT_BUNDLE_PATH: bundle $T/theirs.xpb is refused: $T/theirs.xpb belongs to nobody" "$T/o" ||
    { bad "trust: their bundle: no message"; cat "$T/o"; }
  [ "$(stat_of bundle_hits)" = 0 ] || bad "trust: their bundle was used"
  export XPJIT_CACHE_DIR="$T/c8"
  XPJIT_TRUSTED_OWNERS=nobody XPJIT_BUNDLE_PATH="$T/theirs.xpb" "$B/examples/saxpy" 1000 >"$T/o" 2>&1 ||
    bad "trust: saxpy, trusted bundle"
  [ "$(stat_of bundle_hits)" = 1 ] || { bad "trust: trusted bundle not used"; cat "$T/o"; }
  "$CLI" bundle verify "$T/theirs.xpb" >"$T/o" 2>&1; [ $? = 1 ] || bad "trust: bundle verify exit"
  grep -q "XPJIT_TRUSTED_OWNERS" "$T/o" || bad "trust: bundle verify does not say why"
  XPJIT_TRUSTED_OWNERS=nobody "$CLI" bundle verify "$T/theirs.xpb" >/dev/null 2>&1 || bad "trust: bundle verify, trusted"
  "$CLI" bundle import "$T/theirs.xpb" >/dev/null 2>&1; [ $? = 1 ] || bad "trust: bundle import exit"
  chown root "$T/theirs.xpb" && chmod 666 "$T/theirs.xpb"
  XPJIT_TRUSTED_OWNERS=nobody "$CLI" bundle verify "$T/theirs.xpb" >/dev/null 2>&1
  [ $? = 1 ] || bad "trust: a bundle writable by others was accepted"
else
  echo "cache_cli: skipped the checks of another user's bundle (they need root, to chown it)"
fi
# a uid of 4294967295, (uid_t)-1, no one's, is a bad value with the
# warning the others get (it was taken silently)
for v in 4294967295 no-such-user-xpjit; do
  XPJIT_TRUSTED_OWNERS=$v "$CLI" bundle verify "$T/ex.xpb" >/dev/null 2>"$T/e"
  grep -q "XPJIT_TRUSTED_OWNERS: '$v' names no user; ignored" "$T/e" ||
    bad "XPJIT_TRUSTED_OWNERS=$v: no warning: $(cat "$T/e")"
done
# -- an adversarial review's findings (twenty-fifth session)
# --target lists: after a CPU target with a feature list, +f and -f go on
# with the list; a version list names its kind once (spirv:1.0,1.4); the
# full target devices shows is taken whole, never cut; an empty item is
# refused
"$CLI" bundle build examples/saxpy.xpk --dtype T=f32 --target cpu:x86-64:+avx2,-sse4a \
  --target cpu,spirv:1.0,1.4 -o "$T/tl.xpb" 2>"$T/e" || bad "bundle build --target lists: $(cat "$T/e")"
"$CLI" bundle ls "$T/tl.xpb" --json >"$T/o"
for t in '"cpu:x86-64:+avx2,-sse4a"' '"spirv:1.0"' '"spirv:1.4"'; do
  grep -qF "$t" "$T/o" || bad "bundle build --target lists: no $t in $(cat "$T/o")"
done
host=$("$CLI" devices cpu --json | sed -n 's/.*"target": "\([^"]*\)".*/\1/p')
"$CLI" bundle build examples/saxpy.xpk --dtype T=f32 --target "$host" -o "$T/tl.xpb" 2>"$T/e" ||
  bad "bundle build --target (the host's full target, ${#host} bytes): $(cat "$T/e")"
"$CLI" bundle build examples/saxpy.xpk --dtype T=f32 --target cpu,,spirv -o "$T/tl.xpb" >/dev/null 2>&1
[ $? = 2 ] || bad "bundle build --target cpu,,spirv: not a usage error"
# --json: a command that fails prints one JSON object with the error on
# standard output, not nothing (the message stays on stderr too)
json_error() { # status command...
  want=$1
  shift
  "$@" >"$T/j" 2>"$T/e"
  rc=$?
  [ $rc = "$want" ] && grep -q '^{"error": ".\{1,\}"}$' "$T/j" && [ "$(wc -l <"$T/j")" = 1 ] &&
    [ -s "$T/e" ] || bad "$* (exit $rc, want $want): stdout '$(cat "$T/j")'"
}
json_error 2 "$CLI" cache show xyz --json
json_error 1 "$CLI" cache --path "$T/nonexistent.db" --json stats
json_error 2 "$CLI" cache --json ls --repair
mkdir -m 1777 "$T/shared"
XPJIT_CACHE_DIR="$T/shared" json_error 1 "$CLI" cache ls --json
json_error 1 "$CLI" bundle ls "$T/nonexistent.xpb" --json
json_error 1 "$CLI" bundle verify "$T/junk.xpb" --json
json_error 1 "$CLI" bundle build examples/saxpy.xpk --dtype U=f32 --target cpu -o "$T/x.xpb" --json
json_error 2 "$CLI" bundle build examples/saxpy.xpk --dtype T=f32 --target gpu -o "$T/x.xpb" --json
XPJIT_LIBDEVICE=/nonexistent json_error 1 "$CLI" bundle build examples/math.xpk --kernel math_table \
  --dtype T=f32 --target ptx:sm_90 -o "$T/x.xpb" --json
grep -q "compiles failed" "$T/j" || bad "bundle build --json of a failed compile: $(cat "$T/j")"
# verify's bad: lines name a foreign kernel without its control bytes
# (an escape sequence and a newline reached the terminal raw)
"$CLI" bundle build examples/saxpy.xpk --dtype T=f32 --target cpu -o "$T/v.xpb" 2>/dev/null
sqlite3 "$T/v.xpb" "UPDATE entries SET kernel = 'K' || char(27) || ']0;pwned' || char(7) || char(10) || 'x', data = zeroblob(64)"
"$CLI" bundle verify "$T/v.xpb" >"$T/o" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "^bad: entry [0-9a-f]* (K?\]0;pwned??x T=f32): " "$T/o" &&
  ! LC_ALL=C grep -q "$(printf '\033')" "$T/o" || { bad "bundle verify: a foreign kernel name (exit $rc)"; cat -v "$T/o"; }
# --ndim repeated adds up, as --dtype does (it kept only the last); an
# empty item or a rank given twice is a usage error
"$CLI" bundle build examples/axpy.xpk --kernel axpy --dtype T=f32 --ndim 1 --ndim 3 --target cpu \
  -o "$T/n.xpb" 2>"$T/e" || bad "bundle build --ndim 1 --ndim 3: $(cat "$T/e")"
grep -q "2 kernels (2 compiled" "$T/e" || bad "bundle build --ndim 1 --ndim 3: $(cat "$T/e")"
for n in 1,,2 1, 2,2 "1 --ndim 1"; do
  # shellcheck disable=SC2086
  "$CLI" bundle build examples/axpy.xpk --kernel axpy --dtype T=f32 --ndim $n --target cpu -o "$T/n.xpb" >/dev/null 2>&1
  [ $? = 2 ] || bad "bundle build --ndim $n: not a usage error"
done
# a file given twice, by one name or two, is a usage error (its kernels
# were compiled and counted twice)
for twice in "examples/saxpy.xpk examples/saxpy.xpk" "examples/saxpy.xpk ./examples/../examples/saxpy.xpk"; do
  # shellcheck disable=SC2086
  "$CLI" bundle build $twice --dtype T=f32 --target cpu -o "$T/d.xpb" >/dev/null 2>"$T/e"
  [ $? = 2 ] && grep -q "are the same file" "$T/e" || bad "bundle build $twice: $(cat "$T/e")"
done
# a --const value out of its parameter's range is an input error, as for
# ir (it was a note, and exit 0)
printf 'kernel addn<const N: u8>(x: global i32[]) range {\n  let i = global_id(0);\n  if i < size(x) { x[i] = x[i] + i32(N); }\n}\n' >"$T/u8.xpk"
"$CLI" bundle build "$T/u8.xpk" --const N=3,300 --target cpu -o "$T/u8.xpb" --json >"$T/o" 2>"$T/e"; rc=$?
[ $rc = 1 ] && grep -q "error: --const N=300: const parameter 'N' of 'addn': 300 is out of range for u8" "$T/e" &&
  grep -q '^{"error": "--const N=300: ' "$T/o" && [ ! -e "$T/u8.xpb" ] ||
  bad "bundle build --const N=300 of a u8: exit $rc: $(cat "$T/o" "$T/e")"
# a refused cache: every command working on it says so once, as the
# cache's state, not as a program's ("compiling without caching"), exit 1
mkdir -m 1777 "$T/refused"
for c in ls stats "stats --zero" verify clear prune "show abcd" "export $T/r.xpb" "import $T/tl.xpb"; do
  case $c in import*) g=bundle ;; *) g=cache ;; esac
  # shellcheck disable=SC2086
  XPJIT_CACHE_DIR="$T/refused" "$CLI" $g $c >"$T/o" 2>&1; rc=$?
  [ $rc = 1 ] && [ "$(grep -c "refusing the cache $T/refused/cache-v2.db" "$T/o")" = 1 ] &&
    ! grep -q "compiling without caching" "$T/o" || { bad "$g $c of a refused cache: exit $rc:"; cat "$T/o"; }
done
# XPJIT_CACHE=off: ls, show and export say the cache is off, exit 1 (ls
# said "(no entries)", exit 0); read-only with no file yet, ls has no entries
for c in ls "show abcd" "export $T/off.xpb"; do
  # shellcheck disable=SC2086
  XPJIT_CACHE_DIR="$T/c10" XPJIT_CACHE=off "$CLI" cache $c >"$T/o" 2>&1; rc=$?
  [ $rc = 1 ] && grep -q "the cache $T/c10/cache-v2.db is off (XPJIT_CACHE=off)" "$T/o" ||
    bad "XPJIT_CACHE=off cache $c: exit $rc: $(cat "$T/o")"
done
mkdir -m 700 "$T/none"
XPJIT_CACHE_DIR="$T/none" XPJIT_CACHE=ro "$CLI" cache ls >"$T/o" 2>&1 && grep -qx "(no entries)" "$T/o" ||
  bad "XPJIT_CACHE=ro cache ls with no file: $(cat "$T/o")"
# XPJIT_CACHE=ro writes nothing: with no cache directory, a program runs
# uncached and neither it nor a tool makes the directory (a program made
# it, for the host CPU's file; clear, prune, stats --zero, verify --repair
# and bundle import made a whole cache); the tools that read say there is
# nothing, those that write refuse, exit 1
ro="$T/ro-none"
XPJIT_CACHE_DIR="$ro" XPJIT_CACHE=ro "$B/examples/saxpy" 1000 >"$T/o" 2>&1 && grep -q correct "$T/o" ||
  bad "XPJIT_CACHE=ro saxpy with no cache directory: $(cat "$T/o")"
XPJIT_CACHE_DIR="$ro" XPJIT_CACHE=ro "$CLI" devices >/dev/null 2>&1 || bad "XPJIT_CACHE=ro devices"
[ -e "$ro" ] && bad "XPJIT_CACHE=ro: a program created $(find "$ro")"
rm -rf "$ro"
for c in stats ls verify "show abcd" "export $T/ro.xpb" "stats --zero" "verify --repair" prune clear "import $T/ex.xpb"; do
  case $c in import*) g=bundle ;; *) g=cache ;; esac
  case $c in stats | ls | verify) want=0 ;; *) want=1 ;; esac
  # shellcheck disable=SC2086
  XPJIT_CACHE_DIR="$ro" XPJIT_CACHE=ro "$CLI" $g $c >"$T/o" 2>&1; rc=$?
  [ $rc = $want ] && [ ! -e "$ro" ] && [ ! -e "$T/ro.xpb" ] ||
    bad "XPJIT_CACHE=ro $g $c with no cache directory: exit $rc (want $want), $(find "$ro" 2>/dev/null): $(cat "$T/o")"
  case $c in "stats --zero" | "verify --repair" | prune | clear | import*)
    grep -q "the cache $ro/cache-v2.db is read-only (XPJIT_CACHE=ro): nothing written" "$T/o" ||
      bad "XPJIT_CACHE=ro $g $c does not say why: $(cat "$T/o")" ;;
  export*)
    grep -q "no cache at $ro/cache-v2.db (XPJIT_CACHE=ro creates none): nothing to export" "$T/o" ||
      bad "XPJIT_CACHE=ro cache export does not say why: $(cat "$T/o")" ;;
  esac
  rm -rf "$ro" "$T/ro.xpb" # each command on its own
done
# with the directory there, nothing is added to it (the host CPU's file
# was); and a cache that is there is not cleared under XPJIT_CACHE=ro
mkdir -m 700 "$ro"
XPJIT_CACHE_DIR="$ro" XPJIT_CACHE=ro "$B/examples/saxpy" 1000 >/dev/null 2>&1 || bad "XPJIT_CACHE=ro saxpy, empty directory"
[ -z "$(ls -A "$ro")" ] || bad "XPJIT_CACHE=ro: a program wrote $(ls -A "$ro")"
XPJIT_CACHE_DIR="$ro" "$B/examples/saxpy" 1000 >/dev/null 2>&1 || bad "saxpy, rw"
XPJIT_CACHE_DIR="$ro" XPJIT_CACHE=ro "$CLI" cache clear >/dev/null 2>&1 && bad "XPJIT_CACHE=ro cache clear of a cache: exit 0"
XPJIT_CACHE_DIR="$ro" "$CLI" cache ls | grep -q saxpy || bad "XPJIT_CACHE=ro cache clear cleared the cache"
XPJIT_CACHE_DIR="$ro" XPJIT_CACHE=off "$CLI" cache clear >"$T/o" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "the cache $ro/cache-v2.db is off (XPJIT_CACHE=off): nothing written" "$T/o" &&
  XPJIT_CACHE_DIR="$ro" "$CLI" cache ls | grep -q saxpy || bad "XPJIT_CACHE=off cache clear of a cache: exit $rc: $(cat "$T/o")"
# a bundle of another build (its entries' "versions" another xpjit's) is
# refused by import as verify says it is unusable (it imported every
# entry, exit 0: rows no key of this xpjit could ever find); one of
# several builds, this one among them, is taken
if command -v sqlite3 >/dev/null 2>&1; then
  for v in "1" "rowid % 2 = 0"; do
    cp "$T/ex.xpb" "$T/other.xpb"
    sqlite3 "$T/other.xpb" "UPDATE entries SET versions = 'xpjit=0.0.1;llvm=1.0;abi=1;codegen=1' WHERE $v"
    rm -rf "$T/vb" && mkdir -m 700 "$T/vb"
    XPJIT_CACHE_DIR="$T/vb" "$CLI" bundle import "$T/other.xpb" >"$T/o" 2>&1; rc=$?
    case $v in
    rowid*) [ $rc = 1 ] && grep -q "imported 40 entries" "$T/o" &&
      grep -q "40 damaged" "$T/o" && XPJIT_CACHE_DIR="$T/vb" "$CLI" cache ls | grep -q saxpy ||
      bad "bundle import of a bundle of two builds, this one among them: exit $rc: $(cat "$T/o")" ;;
    *) [ $rc = 1 ] && grep -q "was built by another xpjit (xpjit=0.0.1.*nothing imported" "$T/o" &&
      ! XPJIT_CACHE_DIR="$T/vb" "$CLI" cache ls 2>/dev/null | grep -q saxpy ||
      bad "bundle import of another build's bundle: exit $rc: $(cat "$T/o")" ;;
    esac
  done
fi
# bundle import counts every damaged entry (it counted its warnings,
# which stop at 8 and "N more warnings": 30 damaged read as 9, and the
# rest as "already there" in an empty cache)
if command -v sqlite3 >/dev/null 2>&1; then
  cp "$T/ex.xpb" "$T/garb.xpb"
  sqlite3 "$T/garb.xpb" "UPDATE entries SET data = randomblob(length(data) + 1) WHERE rowid % 2 = 0"
  nbad=$("$CLI" bundle verify "$T/garb.xpb" 2>/dev/null | sed -n 's/.* \([0-9]*\) bad$/\1/p')
  [ "${nbad:-0}" -gt 9 ] || bad "bundle verify of a bundle with damaged entries: '$nbad' bad (the test needs more than 9)"
  mkdir -m 700 "$T/gb"
  XPJIT_CACHE_DIR="$T/gb" "$CLI" bundle import "$T/garb.xpb" >"$T/o" 2>/dev/null; rc=$?
  [ $rc = 1 ] && grep -q "(0 already there, $nbad damaged)" "$T/o" ||
    bad "bundle import of $nbad damaged entries into an empty cache: exit $rc: $(cat "$T/o")"
fi
# options before a bundle command, as cache takes them (bundle --json ls:
# a usage error)
"$CLI" bundle --json ls "$T/ex.xpb" 2>"$T/e" | grep -q '"usable": true' ||
  bad "bundle --json ls: $(cat "$T/e")"
"$CLI" bundle --json verify "$T/ex.xpb" 2>/dev/null | grep -q '"bad": 0' || bad "bundle --json verify"
"$CLI" bundle --path "$T/c1/cache-v2.db" --json import "$T/ex.xpb" 2>"$T/e" |
  grep -q "\"cache\": \"$T/c1/cache-v2.db\"" || bad "bundle --path DB --json import: $(cat "$T/e")"
"$CLI" bundle --path "$T/c1/cache-v2.db" ls "$T/ex.xpb" >/dev/null 2>&1; [ $? = 2 ] ||
  bad "bundle --path ls: ls takes no --path (a usage error)"
"$CLI" bundle --bogus ls "$T/ex.xpb" >/dev/null 2>&1; [ $? = 2 ] || bad "bundle --bogus ls"
# a bundle is an SQLite file: "-" is no standard output for it (it wrote a
# file named '-'), "" no name
case $CLI in /*) ACLI=$CLI ;; *) ACLI=$PWD/$CLI ;; esac
(cd "$T" && "$ACLI" cache export - >/dev/null 2>"$T/e"; rc=$?
 [ $rc = 1 ] && grep -q "standard output" "$T/e" && [ ! -e ./- ]) || bad "cache export -: $(cat "$T/e")"
(cd "$T" && "$ACLI" bundle build "$OLDPWD/examples/saxpy.xpk" --dtype T=f32 --target cpu -o - >/dev/null 2>&1
 [ $? = 1 ] && [ ! -e ./- ]) || bad "bundle build -o -"
"$CLI" cache export "" >/dev/null 2>&1; [ $? = 1 ] || bad "cache export ''"
# a --path naming another program's SQLite database: refused, and nothing
# made beside it (it made .key and .lock)
if command -v sqlite3 >/dev/null 2>&1; then
  mkdir "$T/other"
  sqlite3 "$T/other/app.sqlite" "CREATE TABLE t(x); INSERT INTO t VALUES(7)"
  "$CLI" cache --path "$T/other/app.sqlite" ls >/dev/null 2>"$T/e"; rc=$?
  [ $rc = 1 ] && grep -q "another program" "$T/e" &&
    [ "$(ls "$T/other")" = app.sqlite ] &&
    [ "$(sqlite3 "$T/other/app.sqlite" 'SELECT x FROM t')" = 7 ] ||
    bad "cache --path another program's database: exit $rc, $(ls "$T/other" | tr '\n' ' ')"
fi
# a --path naming another xpjit's cache (xpjit's application id, another
# schema version: cache-v1.db) is refused and left as it is, by every
# command and bundle import (cache ls moved it aside as damage and made a
# cache of this version under its name)
if command -v sqlite3 >/dev/null 2>&1; then
  mkdir -m 700 "$T/v1"
  cp "$T/c1/cache-v2.db" "$T/v1/cache-v1.db"
  sqlite3 "$T/v1/cache-v1.db" "PRAGMA user_version = 1"
  for c in ls stats verify "verify --repair" clear "export $T/v1.xpb" "import $T/ex.xpb"; do
    case $c in import*) g="bundle" ;; *) g="cache" ;; esac
    # shellcheck disable=SC2086
    "$CLI" $g --path "$T/v1/cache-v1.db" $c >"$T/o" 2>&1; rc=$?
    [ $rc = 1 ] && grep -q "schema version is 1" "$T/o" &&
      [ "$(ls "$T/v1")" = cache-v1.db ] &&
      [ "$(sqlite3 "$T/v1/cache-v1.db" 'PRAGMA user_version')" = 1 ] ||
      bad "$g --path another version's cache $c: exit $rc, $(ls "$T/v1" | tr '\n' ' '): $(cat "$T/o")"
  done
fi
# under a file size limit (ulimit -f) a program runs, uncached, with the
# reason: no write of the cache's directory (the host CPU's file, the
# key, SQLite's) ends it with SIGXFSZ (at -f 0 the host CPU's file did,
# leaving its temporaries; at -f 20 SQLite's -shm did), and nothing is
# left there. Its output goes through a pipe: the limit is the shell's.
mkdir -m 700 "$T/fsz"
(ulimit -f 0 && XPJIT_CACHE_DIR="$T/fsz" "$B/examples/saxpy" 1000 2>&1; echo "exit $?") | cat >"$T/o"
grep -q "exit 0" "$T/o" && grep -q correct "$T/o" &&
  grep -q "one cannot be made (File too large)" "$T/o" && [ -z "$(ls -A "$T/fsz")" ] ||
  bad "saxpy under ulimit -f 0: $(cat "$T/o"); left $(ls -A "$T/fsz")"
(ulimit -f 20 && XPJIT_CACHE_DIR="$T/fsz" "$B/examples/saxpy" 1000 2>&1; echo "exit $?") | cat >"$T/o"
grep -q "exit 0" "$T/o" && grep -q correct "$T/o" ||
  bad "saxpy under ulimit -f 20: $(cat "$T/o")"
# SQLite is loaded at the first open (cache/sqlite_dl.h): a libsqlite3.so.0
# without the functions the cache calls turns the cache off with the
# reason, no crash (a stand-in built here, found first by LD_LIBRARY_PATH)
if command -v cc >/dev/null 2>&1; then
  mkdir "$T/fakesq" "$T/fq"
  echo 'int sqlite3_open_v2(void) { return 1; }' > "$T/fakesq/f.c"
  if cc -shared -fPIC -o "$T/fakesq/libsqlite3.so.0" "$T/fakesq/f.c" 2>/dev/null; then
    LD_LIBRARY_PATH="$T/fakesq${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      XPJIT_CACHE_DIR="$T/fq" "$CLI" cache ls >/dev/null 2>"$T/e"; rc=$?
    [ $rc = 1 ] && grep -q "SQLite cannot be loaded: libsqlite3.so.0 has no sqlite3_" "$T/e" ||
      bad "cache ls with a libsqlite3 lacking its functions: exit $rc, $(cat "$T/e")"
  fi
fi
# a hard link to the cache file given as --path has no key beside it: no
# key is made there and nothing is signed again (bundle import made
# LINK.key and re-signed all the rows, which the cache by its own name
# then found bad: an outside probe)
ln "$T/c2/cache-v2.db" "$T/hl.db"
"$CLI" bundle import "$T/ex.xpb" --path "$T/hl.db" >"$T/o" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "2 names (hard links)" "$T/o" && [ ! -e "$T/hl.db.key" ] ||
  bad "bundle import --path HARDLINK: exit $rc, $(cat "$T/o"), $(ls "$T" | grep hl.db)"
XPJIT_CACHE_DIR="$T/c2" "$CLI" cache verify >"$T/o" 2>&1 ||
  bad "the cache after an import through a hard link of it: $(cat "$T/o")"
rm -f "$T/hl.db"*
[ $fail = 0 ] && echo "cache_cli: all checks passed"
exit $fail
