#!/bin/sh
# xpjitd from the outside: started by hand (detached), used by the
# examples through XPJIT_DAEMON, inspected and stopped with
# `xpjit-cli daemon`, and started by systemd-style socket activation.
set -u
B=${BUILD:-build}
CLI=$B/bin/xpjit-cli
D=$B/bin/xpjitd
tmp=$(mktemp -d)
dpid=
cleanup() {
  [ -n "$dpid" ] && kill -9 "$dpid" 2>/dev/null
  for lock in "$tmp"/run/xpjitd.sock.lock "$tmp"/race/xpjitd.sock.lock "$tmp"/run/other.sock.lock \
    "$tmp"/run/other.lock "$tmp"/rel.sock.lock "$tmp"/nl.sock.lock; do
    [ -f "$lock" ] && kill -9 "$(cat "$lock")" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "daemon_cli: FAIL: $*"
  [ -f "$tmp/log" ] && { echo "--- daemon log"; tail -20 "$tmp/log"; }
  exit 1
}
mkdir -m 700 "$tmp/run"
S=$tmp/run/xpjitd.sock
export XPJIT_CACHE_DIR="$tmp/daemon-cache"
stat_of() { "$CLI" daemon stats --socket "$S" | awk -v k="$1" '$1 == k {print $2}'; }

# not running: status 1 with a reason, --json says so; stop 1; usage 2
"$CLI" daemon status --socket "$S" >/dev/null 2>&1 && fail "status with no daemon"
"$CLI" daemon status --socket "$S" --json | grep -q '"running": false' ||
  fail "status --json with no daemon"
"$CLI" daemon stop --socket "$S" 2>/dev/null && fail "stop with no daemon"
"$CLI" daemon frobnicate 2>/dev/null; [ $? -eq 2 ] || fail "unknown daemon command"
"$CLI" daemon status --bogus 2>/dev/null; [ $? -eq 2 ] || fail "unknown option"
# --timeout is stop's: another command's is a usage error (it was taken)
for args in "status --timeout 5" "--timeout 5 stats"; do
  "$CLI" daemon $args --socket "$S" >/dev/null 2>"$tmp/out"; rc=$?
  [ $rc -eq 2 ] && grep -q "\-\-timeout belongs to stop" "$tmp/out" ||
    fail "daemon $args: exit $rc (want 2): $(head -1 "$tmp/out")"
done
"$D" --workers 0 2>/dev/null; [ $? -eq 2 ] || fail "xpjitd --workers 0"
"$D" --no-such-option 2>/dev/null; [ $? -eq 2 ] || fail "xpjitd unknown option"
"$D" --socket relative.sock --foreground 2>/dev/null; [ $? -eq 2 ] ||
  fail "xpjitd with a relative socket path"
"$D" --socket 2>/dev/null; [ $? -eq 2 ] || fail "xpjitd --socket without a value"
# an empty path is no path (it served the default socket)
timeout 20 "$D" --socket "" --foreground 2>/dev/null; [ $? -eq 2 ] || fail "xpjitd --socket ''"
"$D" --client-memory 1M 2>/dev/null; [ $? -eq 2 ] || fail "xpjitd --client-memory 1M"
"$D" --client-compiles 0 2>/dev/null; [ $? -eq 2 ] || fail "xpjitd --client-compiles 0"
"$D" --failure-ttl soon 2>/dev/null; [ $? -eq 2 ] || fail "xpjitd --failure-ttl soon"

# started by hand: detaches once the socket serves
# a --log nobody can write to (a FIFO without a reader): refused at
# once, exit 1, never a daemon blocked in open()
mkfifo "$tmp/logfifo"
timeout 20 "$D" --foreground --socket "$tmp/fifo.sock" --log "$tmp/logfifo" 2>"$tmp/fifo.err"
rc=$?
[ $rc -eq 1 ] && grep -q "xpjitd: --log $tmp/logfifo is a FIFO, not a regular file" "$tmp/fifo.err" ||
  fail "--log FIFO: exit $rc (want 1 at once): $(cat "$tmp/fifo.err")"
# nor a FIFO someone holds open and filled (it wedged the daemon in its
# first log line while its socket stayed up), a link, a file others may
# write, another user's file: refused at once, exit 1, saying what it is
refused_log() { # LOG NEEDLE
  timeout -k 2 10 "$D" --foreground --socket "$tmp/badlog.sock" --log "$1" 2>"$tmp/badlog.err"
  rc=$?
  [ $rc -eq 1 ] && grep -q "xpjitd: --log $1 $2" "$tmp/badlog.err" && [ ! -s "$1" ] ||
    fail "--log $1: exit $rc (want 1 at once, '$2'): $(cat "$tmp/badlog.err")"
}
mkfifo "$tmp/heldfifo"
exec 7<>"$tmp/heldfifo"
timeout 2 cat /dev/zero >&7
refused_log "$tmp/heldfifo" "is a FIFO, not a regular file"
exec 7>&-
: > "$tmp/target"
ln -s "$tmp/target" "$tmp/loglink"
refused_log "$tmp/loglink" "is a symbolic link, which is not followed"
: > "$tmp/open.log"; chmod 622 "$tmp/open.log"
refused_log "$tmp/open.log" "is writable by others (mode 0622)"
if [ "$(id -u)" = 0 ]; then
  (umask 077; : > "$tmp/theirs.log"); chown 65534 "$tmp/theirs.log"
  refused_log "$tmp/theirs.log" "is owned by uid 65534"
fi
# a detached start whose --log cannot be opened: exit 1 with the reason,
# and no socket left (its parent said "serving", exit 0, and the daemon
# died where nobody heard it, leaving a stale socket)
"$D" --socket "$tmp/nolog.sock" --log "$tmp/no/such/dir/x.log" >"$tmp/nolog.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "xpjitd: --log $tmp/no/such/dir/x.log: No such file or directory" "$tmp/nolog.out" &&
  ! grep -q "serving" "$tmp/nolog.out" && [ ! -e "$tmp/nolog.sock" ] ||
  fail "a detached start with a --log it cannot open: exit $rc: $(cat "$tmp/nolog.out"; ls "$tmp")"
# a relative --log is from where the daemon was started (it was opened in
# / once the daemon had left its directory)
case $D in /*) Dabs=$D ;; *) Dabs=$(pwd)/$D ;; esac
(cd "$tmp" && "$Dabs" --socket "$tmp/rel.sock" --log rel.log >/dev/null) ||
  fail "xpjitd --log rel.log did not start"
grep -q "serving $tmp/rel.sock" "$tmp/rel.log" ||
  fail "a relative --log is not where the daemon was started"
"$CLI" daemon stop --socket "$tmp/rel.sock" >/dev/null || fail "stop (relative --log)"
"$D" --socket "$S" --log "$tmp/log" --log-level debug >/dev/null ||
  fail "xpjitd did not start"
"$CLI" daemon status --socket "$S" | grep -q "xpjitd is running" ||
  fail "status"
"$CLI" daemon status --socket "$S" --json | grep -q '"compatible": true' ||
  fail "status --json"
# a second one on the same socket refuses (exit 3) and the first serves on
"$D" --socket "$S" --foreground 2>"$tmp/second"; [ $? -eq 3 ] ||
  fail "a second daemon on a live socket"
grep -q "another xpjitd" "$tmp/second" || fail "second daemon's message"
# another socket in the same directory is another daemon's to serve (one
# lock per directory refused it, exit 3, "another xpjitd is running on"
# the socket nobody served)
"$D" --socket "$tmp/run/other.sock" --log "$tmp/other.log" >/dev/null 2>"$tmp/other.err" ||
  fail "a daemon on another socket of the same directory: $(cat "$tmp/other.err")"
"$CLI" daemon status --socket "$tmp/run/other.sock" | grep -q "xpjitd is running" ||
  fail "status (another socket of the same directory)"
# and the sockets X and X.sock are two (they shared the lock X.lock: the
# second was refused, "another xpjitd (pid N) is running on X")
"$D" --socket "$tmp/run/other" --log "$tmp/other2.log" >/dev/null 2>"$tmp/other.err" ||
  fail "a daemon on X while another serves X.sock: $(cat "$tmp/other.err")"
"$CLI" daemon status --socket "$tmp/run/other" | grep -q "xpjitd is running" ||
  fail "status (X beside X.sock)"
"$CLI" daemon stop --socket "$tmp/run/other" >/dev/null || fail "stop (X beside X.sock)"
"$CLI" daemon stop --socket "$tmp/run/other.sock" >/dev/null || fail "stop (another socket)"
"$CLI" daemon status --socket "$S" | grep -q "xpjitd is running" ||
  fail "the first daemon stopped with the other"
# two detached starts at once on a fresh socket: one serves, the other
# exits 3 naming it (it said "pid ?": the winner writes its pid after its
# fork, and the loser looked before)
mkdir -m 700 "$tmp/race"
"$D" --socket "$tmp/race/xpjitd.sock" --log "$tmp/race.log" >"$tmp/race1" 2>&1 &
r1=$!
"$D" --socket "$tmp/race/xpjitd.sock" --log "$tmp/race.log" >"$tmp/race2" 2>&1 &
r2=$!
wait $r1; c1=$?
wait $r2; c2=$?
won=$(sed -n 's/^xpjitd: serving .* (pid \([0-9]*\))$/\1/p' "$tmp/race1" "$tmp/race2")
[ "$c1$c2" = 03 ] || [ "$c1$c2" = 30 ] && [ -n "$won" ] ||
  fail "a start race: exits $c1 and $c2: $(cat "$tmp/race1" "$tmp/race2")"
grep -q "^xpjitd: another xpjitd (pid $won) is running on $tmp/race/xpjitd.sock$" "$tmp/race1" "$tmp/race2" ||
  fail "the loser of a start race does not name the winner ($won): $(cat "$tmp/race1" "$tmp/race2")"
"$CLI" daemon stop --socket "$tmp/race/xpjitd.sock" >/dev/null || fail "stop (start race)"

# the examples through the daemon: their own cache off, so every kernel
# comes from xpjitd; the second run of saxpy is a memory hit there
export XPJIT_DAEMON="$S"
for ex in saxpy reduction matmul; do
  XPJIT_CACHE=off "$B/examples/$ex" | grep -q correct || fail "$ex through the daemon"
done
XPJIT_CACHE=off "$B/examples/saxpy" | grep -q correct || fail "saxpy again"
[ "$(stat_of compiles)" = 3 ] || fail "compiles $(stat_of compiles), expected 3"
[ "$(stat_of hits_memory)" -ge 1 ] || fail "no memory hit"
# the daemon wrote its cache: a client on the same file hits it directly
"$CLI" cache stats --path "$XPJIT_CACHE_DIR/cache-v2.db" | grep -q "entries: *3" ||
  fail "daemon cache entries"
"$CLI" daemon stats --socket "$S" --json | grep -q '"compiles": 3' ||
  fail "stats --json"
# every --json is one valid document (numbers stay numbers); options may
# come before the command
if command -v python3 >/dev/null 2>&1; then
  "$CLI" daemon --json --socket="$S" stats | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["compiles"] == 3 and isinstance(d["requests"], int), d' || fail "stats --json: not valid"
  "$CLI" daemon status --socket "$S" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["running"] is True and d["compatible"] is True and d["pid"] > 0, d' ||
    fail "status --json: not valid"
fi
# every example was its own process; all gone, nothing held for them but
# the STATS connection asking
[ "$(stat_of clients)" = 1 ] || fail "clients $(stat_of clients), expected 1"
[ "$(stat_of queue)" = 0 ] || fail "queue $(stat_of queue)"
# a checked kernel is another compile (the checks travel in the request:
# the daemon's compile and digest match the client's), hit the second time
XPJIT_CACHE=off XPJIT_CHECK=bounds "$B/examples/saxpy" | grep -q correct ||
  fail "saxpy with XPJIT_CHECK=bounds through the daemon"
XPJIT_CACHE=off XPJIT_CHECK=bounds "$B/examples/saxpy" | grep -q correct ||
  fail "saxpy with XPJIT_CHECK=bounds again"
[ "$(stat_of compiles)" = 4 ] || fail "compiles $(stat_of compiles) with checks, expected 4"
grep -q "O2+bounds" "$tmp/log" || fail "the daemon's log does not show the checked compile"
# a bad XPJIT_DAEMON_TIMEOUT: a warning, the default, still correct
XPJIT_CACHE=off XPJIT_DAEMON_TIMEOUT=soon "$B/examples/saxpy" 2>"$tmp/warn" |
  grep -q correct || fail "saxpy with a bad XPJIT_DAEMON_TIMEOUT"
grep -q "XPJIT_DAEMON_TIMEOUT" "$tmp/warn" || fail "no warning for XPJIT_DAEMON_TIMEOUT=soon"

# stop: waits until it has exited; the socket is gone
"$CLI" daemon stop --socket "$S" --json | grep -q '^{"stopped": true, "pid": [0-9]*}$' || fail "stop"
[ -e "$S" ] && fail "socket left behind"
"$CLI" daemon status --socket "$S" >/dev/null 2>&1 && fail "status after stop"
# with the daemon gone the examples still run (compiling themselves)
XPJIT_CACHE=off "$B/examples/saxpy" | grep -q correct || fail "saxpy without daemon"

# a daemon whose workers crash: the application compiles for itself
XPJIT_CACHE_DIR="$tmp/crash-cache" XPJIT_WORKER_FAULT=crash "$D" --socket "$S" --log "$tmp/log" >/dev/null ||
  fail "xpjitd (crashing workers) did not start"
XPJIT_CACHE=off "$B/examples/saxpy" | grep -q correct ||
  fail "saxpy when the daemon's worker crashes"
[ "$(stat_of worker_crashes)" -ge 1 ] || fail "no worker crash counted"
"$CLI" daemon stop --socket "$S" | grep -q "^xpjitd (pid [0-9]*) stopped$" || fail "stop (crashing workers)"

# The daemon never maps libLLVM (a cache directory that knows the host
# CPU); its workers load the plugin the daemon opened at its start, even
# when an upgrade has replaced the file since; without one no worker
# starts (none looks for a plugin of its own) until one is installed.
mkdir -p "$tmp/inst/bin" "$tmp/inst/lib" "$tmp/up-cache"
chmod 700 "$tmp/up-cache"
cp "$D" "$tmp/inst/bin/xpjitd"
cp "$B/lib/libxpjit-llvm.so.0" "$tmp/inst/lib/"
cp "$XPJIT_CACHE_DIR"/host-cpu-* "$tmp/up-cache/" || fail "no host-cpu file to copy"
plugin=$tmp/inst/lib/libxpjit-llvm.so.0
plugin_real=$(realpath "$plugin") # as the daemon and the kernel name it
wait_log() { # wait_log PATTERN: the detached daemon's log has it
  i=0
  while ! grep -q "$1" "$tmp/log" && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  grep -q "$1" "$tmp/log"
}
# started with a descriptor it did not open (7): its workers do not get it
XPJIT_CACHE_DIR="$tmp/up-cache" "$tmp/inst/bin/xpjitd" --socket "$S" --log "$tmp/log" >/dev/null 7<"$tmp/inst/bin/xpjitd" ||
  fail "xpjitd (installed copy) did not start"
dp=$("$CLI" daemon status --socket "$S" --json | sed -n 's/.*"pid": \([0-9]*\).*/\1/p')
[ -n "$dp" ] || fail "no pid in status"
grep -q libLLVM "/proc/$dp/maps" && fail "xpjitd mapped libLLVM"
rm "$plugin"
echo "not the plugin" > "$plugin"
XPJIT_CACHE=off "$B/examples/saxpy" | grep -q correct || fail "saxpy after the plugin was replaced"
[ "$(stat_of compiles)" -ge 1 ] && [ "$(stat_of compile_failures)" = 0 ] ||
  fail "the worker did not compile with the plugin the daemon opened (compiles $(stat_of compiles), failed $(stat_of compile_failures))"
grep -q libLLVM "/proc/$dp/maps" && fail "xpjitd mapped libLLVM to serve"
wp=$(pgrep -P "$dp" | head -1)
[ -n "$wp" ] || fail "no worker running"
[ -e "/proc/$wp/fd/7" ] && fail "the worker has the daemon's inherited descriptor 7"
[ "$(readlink "/proc/$wp/fd/3")" = "$plugin_real (deleted)" ] ||
  fail "the worker's descriptor 3 is $(readlink "/proc/$wp/fd/3")"
grep -q "workers load the LLVM plugin $plugin_real" "$tmp/log" || fail "the log does not name the plugin"
"$CLI" daemon stop --socket "$S" >/dev/null || fail "stop (installed copy)"
# a file there that is not a plugin: the workers cannot compile, the
# daemon's log and the client's say why, naming the file
rm -rf "$tmp/up-cache"/cache-v2.db*
XPJIT_CACHE_DIR="$tmp/up-cache" "$tmp/inst/bin/xpjitd" --socket "$S" --log "$tmp/log" >/dev/null ||
  fail "xpjitd with a broken plugin did not start"
XPJIT_CACHE=off XPJIT_LOG=info "$B/examples/saxpy" 2>"$tmp/err" | grep -q correct ||
  fail "saxpy when the daemon's plugin is broken"
grep -q "could not serve: a transient failure (.*cannot load $plugin_real" "$tmp/err" ||
  fail "the client was not told why: $(cat "$tmp/err")"
"$CLI" daemon stop --socket "$S" >/dev/null || fail "stop (broken plugin)"
grep -q "could not compile saxpy (its clients compile themselves): no LLVM: cannot load $plugin_real" "$tmp/log" ||
  fail "the daemon's log does not say why its worker could not compile"
# none at all: logged at the start, no worker, the clients compile; then
# one installed is taken (the start is tried again after a back-off)
rm -rf "$tmp/up-cache"/cache-v2.db*
rm "$plugin"
: >"$tmp/log"
XPJIT_CACHE_DIR="$tmp/up-cache" "$tmp/inst/bin/xpjitd" --socket "$S" --log "$tmp/log" >/dev/null ||
  fail "xpjitd without its plugin did not start"
wait_log "serving" || fail "the daemon without a plugin does not serve"
grep -q "no LLVM: no .*libxpjit-llvm.so.0.*compiles fail" "$tmp/log" || fail "no error for a missing plugin"
XPJIT_CACHE=off "$B/examples/saxpy" | grep -q correct || fail "saxpy when the daemon has no plugin"
[ "$(stat_of worker_spawns)" = 0 ] && [ "$(stat_of spawn_failures)" -ge 1 ] ||
  fail "without a plugin: $(stat_of worker_spawns) workers started, $(stat_of spawn_failures) failures"
grep -q "cannot start a compiler worker (.*no LLVM" "$tmp/log" || fail "the log does not say why no worker starts"
cp "$B/lib/libxpjit-llvm.so.0" "$plugin"
sleep 1
XPJIT_CACHE=off "$B/examples/saxpy" | grep -q correct || fail "saxpy once the plugin is there"
[ "$(stat_of compiles)" -ge 1 ] && [ "$(stat_of compile_failures)" = 0 ] ||
  fail "the plugin installed since was not taken (compiles $(stat_of compiles), failed $(stat_of compile_failures))"
"$CLI" daemon stop --socket "$S" >/dev/null || fail "stop (no plugin)"
# a relative XPJIT_LLVM_PLUGIN: from the directory the daemon started in
rm -rf "$tmp/up-cache"/cache-v2.db*
(cd "$tmp/inst" && XPJIT_LLVM_PLUGIN=lib/libxpjit-llvm.so.0 XPJIT_CACHE_DIR="$tmp/up-cache" \
  "$tmp/inst/bin/xpjitd" --socket "$S" --log "$tmp/log" >/dev/null) ||
  fail "xpjitd with a relative XPJIT_LLVM_PLUGIN did not start"
XPJIT_CACHE=off "$B/examples/saxpy" | grep -q correct || fail "saxpy (relative XPJIT_LLVM_PLUGIN)"
[ "$(stat_of compiles)" -ge 1 ] && [ "$(stat_of compile_failures)" = 0 ] ||
  fail "a relative XPJIT_LLVM_PLUGIN: compiles $(stat_of compiles), failed $(stat_of compile_failures)"
"$CLI" daemon stop --socket "$S" >/dev/null || fail "stop (relative plugin)"

# socket activation, as the systemd user unit does it
if command -v systemd-socket-activate >/dev/null 2>&1; then
  systemd-socket-activate -l "$S" "$D" --foreground --idle-exit 2 \
    --log "$tmp/log" 2>"$tmp/act" &
  dpid=$!
  i=0
  while [ ! -S "$S" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  XPJIT_CACHE=off "$B/examples/saxpy" | grep -q correct ||
    fail "saxpy through a socket-activated daemon"
  [ "$(stat_of requests)" -ge 1 ] || fail "activated daemon served nothing"
  grep -q "serving $S" "$tmp/log" || fail "activated daemon's log"
  # --idle-exit: it goes away by itself when unused
  i=0
  while kill -0 "$dpid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  kill -0 "$dpid" 2>/dev/null && fail "--idle-exit did not stop the daemon"
  wait "$dpid" || fail "activated daemon exit status"
  dpid=
else
  echo "daemon_cli: systemd-socket-activate not found; activation not tested"
fi
# -- an adversarial review's findings (twenty-fifth session)
# an empty --socket is a usage error (as cache --path ''), never the default
for sub in status stats stop; do
  "$CLI" daemon $sub --socket '' >/dev/null 2>"$tmp/err"; rc=$?
  [ $rc -eq 2 ] && grep -q -- "--socket takes the daemon's socket, not ''" "$tmp/err" ||
    fail "daemon $sub --socket '': exit $rc: $(cat "$tmp/err")"
done
# --json without a daemon: stats and stop print the error as JSON
for sub in stats stop; do
  "$CLI" daemon $sub --socket "$S" --json >"$tmp/out" 2>/dev/null; rc=$?
  [ $rc -eq 1 ] && grep -q '^{"error": "xpjitd is not running: ' "$tmp/out" ||
    fail "daemon $sub --json without a daemon: exit $rc: '$(cat "$tmp/out")'"
done
# stop --timeout 0 asks and does not wait: it says so, exit 0 (it said
# "did not stop", exit 1, of a daemon that stopped)
"$D" --socket "$S" --log "$tmp/log" >/dev/null || fail "xpjitd (stop --timeout 0) did not start"
"$CLI" daemon stop --socket "$S" --timeout 0 >"$tmp/out" 2>&1 ||
  fail "stop --timeout 0: exit $?: $(cat "$tmp/out")"
grep -q "^xpjitd (pid [0-9]*) asked to stop$" "$tmp/out" || fail "stop --timeout 0: $(cat "$tmp/out")"
sp=$(sed -n 's/^xpjitd (pid \([0-9]*\)).*/\1/p' "$tmp/out")
i=0
while kill -0 "$sp" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
kill -0 "$sp" 2>/dev/null && fail "stop --timeout 0: the daemon did not stop"
"$D" --socket "$S" --log "$tmp/log" >/dev/null || fail "xpjitd (stop --timeout 0 --json) did not start"
"$CLI" daemon stop --socket "$S" --timeout 0 --json | grep -q '^{"sent": true, "pid": [0-9]*}$' ||
  fail "stop --timeout 0 --json"
"$CLI" daemon stop --socket "$S" --timeout 10 >/dev/null 2>&1

# a file size limit (ulimit -f) fails the cache's writes, which the daemon
# reports and serves on without storing; it no longer dies of SIGXFSZ
# (an adversarial probe: the daemon vanished, clients compiled alone).
# (20 KiB in sh's 512-byte blocks: the cache cannot even be made.)
mkdir -m 700 "$tmp/fsz"
( ulimit -f 40; XPJIT_CACHE_DIR="$tmp/fsz" "$D" --socket "$tmp/fsz.sock" --log "$tmp/fsz.log" >/dev/null ) ||
  fail "xpjitd under ulimit -f did not start"
for ex in matmul reduction; do
  XPJIT_DAEMON="$tmp/fsz.sock" XPJIT_CACHE=off "$B/examples/$ex" | grep -q correct || fail "$ex under ulimit -f"
done
grep -q "disk I/O error" "$tmp/fsz.log" || fail "ulimit -f: no failed cache write (the test tests nothing): $(tail -3 "$tmp/fsz.log")"
"$CLI" daemon stats --socket "$tmp/fsz.sock" --json | grep -q '"compiles": 2' ||
  fail "xpjitd under ulimit -f: not serving, or not compiling: $(tail -3 "$tmp/fsz.log")"
"$CLI" daemon stop --socket "$tmp/fsz.sock" --timeout 10 >/dev/null 2>&1
# a string in STATS is escaped ("\n", "\\", "\xHH"), so that a cache
# path with a newline in it invents no statistics ("che 7", "compiles
# 99", shown by both `daemon stats` and --json: an outside probe); --json
# gives the path itself
nl='
'
mkdir -m 700 "$tmp/nl"
XPJIT_CACHE_DIR="$tmp/nl/ca${nl}che 7${nl}compiles 99" "$D" --socket "$tmp/nl.sock" --log "$tmp/nl.log" >/dev/null ||
  fail "xpjitd with a newline in its cache path did not start"
"$CLI" daemon stats --socket "$tmp/nl.sock" >"$tmp/out" 2>&1 || fail "stats, a newline in the cache path: exit $?: $(cat "$tmp/out")"
grep -q "^cache $tmp/nl/ca\\\\nche 7\\\\ncompiles 99/cache-v2.db$" "$tmp/out" && ! grep -q "^che " "$tmp/out" &&
  [ "$(grep -c "^compiles " "$tmp/out")" = 1 ] && grep -q "^compiles 0$" "$tmp/out" ||
  fail "stats, a newline in the cache path: $(cat "$tmp/out")"
"$CLI" daemon stats --socket "$tmp/nl.sock" --json >"$tmp/out" 2>&1 || fail "stats --json, a newline in the cache path: exit $?"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["cache"] == sys.argv[2] + "/nl/ca\nche 7\ncompiles 99/cache-v2.db" and d["compiles"] == 0 and "che" not in d else 1)' "$tmp/out" "$tmp" ||
  fail "stats --json, a newline in the cache path: $(cat "$tmp/out")"
"$CLI" daemon stop --socket "$tmp/nl.sock" --timeout 10 >/dev/null 2>&1
echo "daemon_cli: ok"
