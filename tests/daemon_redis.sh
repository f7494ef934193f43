#!/bin/sh
# xpjitd with the Redis tier (docs/cluster.md): each "node" is a cache
# directory and an xpjitd with its own runtime directory, all sharing one
# redis-server started here on a private unix socket.
#  - node a compiles and writes to Redis; node b's daemon finds it there
#    (hits_redis 1, compiles 0), and its process never asks Redis itself
#    (its own XPJIT_REDIS names a dead server: asking it would warn);
#  - a damaged value is refused by the daemon's worker and compiled again;
#  - a compile lock whose holder died is waited for at most a few seconds,
#    then the worker compiles: no timeout, nothing remembered; a process
#    that gave up on its daemon does not wait behind the lock again;
#  - a process with Redis served by a daemon without it warns once;
#  - a bad --redis URL stops xpjitd (status 2), its password never printed.
set -u
B=${BUILD:-build}
bin=$(cd "$B" && pwd) || exit 1 # absolute: one case starts xpjitd elsewhere
D=$bin/bin/xpjitd
CLI=$bin/bin/xpjit-cli
APP=$bin/examples/saxpy
command -v redis-server >/dev/null 2>&1 ||
  { echo "daemon_redis: redis-server not installed (sh tools/deps.sh)"; exit 1; }
dir=$(mktemp -d /tmp/xpjit-dredis-XXXXXX) || exit 1
RS=$dir/redis.sock
redis-server --port 0 --unixsocket "$RS" --save '' --appendonly no \
  --logfile "$dir/redis.log" &
rpid=$!
stop_all() {
  for n in a b c d e g h i; do
    [ -d "$dir/run-$n" ] && XDG_RUNTIME_DIR="$dir/run-$n" XPJIT_DAEMON= \
      "$CLI" daemon stop >/dev/null 2>&1
  done
  kill $rpid 2>/dev/null
  wait $rpid 2>/dev/null
  rm -rf "$dir"
}
trap stop_all EXIT
i=0
until [ -S "$RS" ] || [ $i -ge 50 ]; do sleep 0.1; i=$((i + 1)); done
[ -S "$RS" ] || { echo "daemon_redis: redis-server did not start"; exit 1; }
rcli() { redis-cli -s "$RS" "$@"; }
fail=0
bad() { echo "daemon_redis: FAIL: $*"; fail=1; }

# node NAME [xpjitd options]: a daemon with its own cache and socket
node() {
  n=$1
  shift
  mkdir -p "$dir/run-$n" "$dir/cache-$n"
  XDG_RUNTIME_DIR="$dir/run-$n" XPJIT_CACHE_DIR="$dir/cache-$n" \
    XPJIT_DAEMON= "$D" --log "$dir/xpjitd-$n.log" --log-level debug \
    --workers 2 "$@" >/dev/null || bad "xpjitd of node $n did not start"
}
# run NAME [env...]: the application on node NAME; its stderr in err-NAME
run() {
  n=$1
  shift
  env XDG_RUNTIME_DIR="$dir/run-$n" XPJIT_CACHE_DIR="$dir/cache-$n" \
    XPJIT_DAEMON=auto "$@" "$APP" >"$dir/out-$n" 2>"$dir/err-$n"
  grep -q correct "$dir/out-$n" || { bad "node $n: wrong result"; cat "$dir/out-$n" "$dir/err-$n"; }
}
stat() { # node key
  XDG_RUNTIME_DIR="$dir/run-$1" XPJIT_DAEMON= "$CLI" daemon stats 2>/dev/null |
    awk -v k="$2" '$1 == k { print $2 }'
}
redis_line() { # node: the "redis tier:" line of its cache file's stats
  XPJIT_CACHE_DIR="$dir/cache-$1" "$CLI" cache stats 2>/dev/null | grep "^redis tier:"
}
expect() { # node key value
  got=$(stat "$1" "$2")
  [ "$got" = "$3" ] || bad "node $1: $2 is '$got', expected $3"
}

# 1. a compile on node a is found by node b's daemon
node a --redis "unix:$RS"
run a XPJIT_REDIS="unix:$dir/nobody.sock"
expect a compiles 1
expect a hits_redis 0
expect a redis "unix:$RS"
key=$(rcli --scan --pattern 'xpjit:k:*' | head -1)
[ -n "$key" ] || bad "node a wrote nothing to Redis"
# the worker's own Redis events reach the node's cache file
redis_line a | grep -q "1 misses, 1 stored" ||
  bad "node a's cache stats: '$(redis_line a)', expected 1 miss and 1 store"
node b --redis "unix:$RS"
run b XPJIT_REDIS="unix:$dir/nobody.sock"
expect b compiles 0
expect b hits_redis 1
grep -qi redis "$dir/err-a" "$dir/err-b" &&
  { bad "a process served by its daemon asked Redis itself:"; cat "$dir/err-a" "$dir/err-b"; }

# 2. a damaged value is refused by the worker, compiled and replaced
[ -n "$key" ] && rcli setrange "$key" 200 "XYZ" >/dev/null
node c --redis "unix:$RS"
run c
expect c compiles 1
expect c hits_redis 0
grep -q "refused the value" "$dir/xpjitd-c.log" ||
  bad "node c's log does not say the damaged value was refused"
redis_line c | grep -q "1 refused" ||
  bad "node c's cache stats: '$(redis_line c)', expected 1 refused value"

# 3. a lock held by a process that died: waited for, then compiled
if [ -n "$key" ]; then
  rcli del "$key" >/dev/null
  lock=$(echo "$key" | sed 's/^xpjit:k:/xpjit:lock:/')
  rcli set "$lock" dead-holder px 120000 >/dev/null
fi
node d --redis "unix:$RS"
t0=$(date +%s)
run d
t1=$(date +%s)
expect d compiles 1
expect d worker_timeouts 0
expect d failures_remembered 0
[ $((t1 - t0)) -le 15 ] || bad "node d took $((t1 - t0)) s behind a dead lock"

# 3b. the same lock, and a process that gives up on its daemon (which waits
# behind the lock): the process does not wait behind it again in Redis
if [ -n "$key" ]; then
  rcli del "$key" >/dev/null
  rcli set "$lock" dead-holder px 120000 >/dev/null
fi
node g --redis "unix:$RS"
t0=$(date +%s%N)
run g XPJIT_REDIS="unix:$RS" XPJIT_DAEMON_TIMEOUT=300
t1=$(date +%s%N)
ms=$(( (t1 - t0) / 1000000 ))
[ $ms -le 3000 ] || bad "node g: the process waited $ms ms after its daemon could not serve"

# 3c. a secret file named relative to where xpjitd was started: its
# workers (which start after it left that directory) sign with it too;
# private, as a secret must be (else the tier is off: docs/cache.md)
(umask 077 && head -c 32 /dev/urandom >"$dir/secret")
rcli flushall >/dev/null
(cd "$dir" && export XPJIT_REDIS_SECRET_FILE=secret &&
  node h --redis "unix:$RS")
run h
expect h compiles 1
(export XPJIT_REDIS_SECRET_FILE="$dir/secret" && node i --redis "unix:$RS")
run i
expect i hits_redis 1
expect i compiles 0

# 4. a daemon without Redis, a process with it: one warning
node e
run e XPJIT_REDIS="unix:$RS"
expect e redis off
grep -q "has no Redis tier" "$dir/err-e" ||
  bad "no warning that node e's daemon has no Redis tier"

# 5. bad URLs stop the daemon; the password is never printed
for url in "redis://user:sekrit9@" "bogus://x" "unix:"; do
  out=$(XDG_RUNTIME_DIR="$dir/run-x" "$D" --foreground --redis "$url" 2>&1)
  rc=$?
  [ $rc -eq 2 ] || bad "--redis '$url': status $rc, expected 2"
  echo "$out" | grep -q sekrit9 && bad "--redis printed the password: $out"
  [ -n "$out" ] || bad "--redis '$url': no message"
done
out=$(XDG_RUNTIME_DIR="$dir/run-x" XPJIT_REDIS="redis://u:sekrit9@" "$D" --foreground 2>&1)
rc=$?
[ $rc -eq 2 ] || bad "XPJIT_REDIS bad: status $rc, expected 2"
echo "$out" | grep -q sekrit9 && bad "XPJIT_REDIS printed the password: $out"

[ $fail -eq 0 ] && echo "daemon_redis: all checks passed"
exit $fail
