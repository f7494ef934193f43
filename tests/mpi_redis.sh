#!/bin/sh
# The cluster recipe on one machine (docs/cluster.md): an MPI job of 8
# ranks, each with its own cache directory as if on its own node, shares
# its kernels through one Redis started here on a private unix socket.
# With the Redis tier the 20 kernels are compiled 20 times in the whole
# job; without it, 160. Every rank checks its results.
set -u
B=${BUILD:-build}
for tool in mpicc mpirun redis-server; do
  if ! command -v $tool >/dev/null 2>&1; then
    echo "mpi_redis: $tool not installed (sh tools/deps.sh installs it)"
    exit 1
  fi
done
make -s mpi-example BUILD="$B" >/dev/null || exit 1
dir=$(mktemp -d /tmp/xpjit-mpi-XXXXXX) || exit 1
redis-server --port 0 --unixsocket "$dir/redis.sock" --save '' \
  --appendonly no --logfile "$dir/redis.log" &
rpid=$!
trap 'kill $rpid 2>/dev/null; wait $rpid 2>/dev/null; rm -rf "$dir"' EXIT
i=0
until [ -S "$dir/redis.sock" ] || [ $i -ge 50 ]; do sleep 0.1; i=$((i + 1)); done
[ -S "$dir/redis.sock" ] || { echo "mpi_redis: redis-server did not start"; exit 1; }
MPIRUN="mpirun --oversubscribe -n 8"
[ "$(id -u)" -eq 0 ] && MPIRUN="mpirun --allow-run-as-root --oversubscribe -n 8"
fail=0
run() { # label expected-compiles [env...]
  label=$1 want=$2
  shift 2
  rm -rf "$dir/ranks"
  mkdir -p "$dir/ranks"
  # Open MPI's own allocations outlive MPI_Finalize (sanitizer builds)
  out=$(env TMPDIR="$dir/ranks" XPJIT_RANK_CACHE=1 XPJIT_DAEMON=off \
    ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" "$@" \
    $MPIRUN "$B/examples/mpi/ranks" 2>&1)
  echo "$out" | sed "s/^/mpi_redis: $label: /"
  echo "$out" | grep -q "^results: correct" || { echo "mpi_redis: $label: wrong results"; fail=1; }
  echo "$out" | grep -q "^kernels compiled: $want," ||
    { echo "mpi_redis: $label: expected $want compiles"; fail=1; }
}
run "with redis" 20 XPJIT_REDIS="unix:$dir/redis.sock"
run "without" 160 XPJIT_REDIS=off
[ $fail -eq 0 ] && echo "mpi_redis: all checks passed"
exit $fail
