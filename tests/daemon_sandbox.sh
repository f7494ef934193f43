#!/bin/sh
# xpjitd.service's sandbox lets the daemon do everything it does: xpjitd
# runs under strace (workers included) while programs have it compile
# kernels for the CPU, SPIR-V and PTX, answer from memory, report stats
# and stop; every system call it made must pass the unit's
# SystemCallFilter= (expanded by systemd-analyze), and no mapping may be
# writable and executable at once (MemoryDenyWriteExecute=yes). Without
# strace or systemd-analyze: skipped with a note.
set -u
B=${BUILD:-build}
unit=tools/systemd/xpjitd.service.in
if ! command -v strace >/dev/null 2>&1 || ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "daemon_sandbox: skipped (needs strace and systemd-analyze; tools/deps.sh installs them)"
  [ -z "${XPJIT_REQUIRE_TOOLS:-}" ] || exit 1
  exit 0
fi
if ldd "$B/bin/xpjitd" 2>/dev/null | grep -q 'libasan\|libtsan'; then
  echo "daemon_sandbox: skipped in a sanitizer build (its runtime's own system calls)"
  exit 0
fi
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "daemon_sandbox: FAIL: $*"; exit 1; }

# the unit's filter: allowed groups minus denied ones, as system calls
expand() {
  case $1 in @*) ;; *) echo "$1"; return ;; esac
  systemd-analyze syscall-filter "$1" 2>/dev/null |
    awk 'NR > 1 && !/^ *#/ && NF { print $1 }' |
    while read -r s; do
      case $s in @*) expand "$s" ;; *) echo "$s" ;; esac
    done
}
: > "$tmp/allow"
: > "$tmp/deny"
grep '^SystemCallFilter=' "$unit" | sed 's/^SystemCallFilter=//' |
  while read -r line; do
    case $line in
    "~"*) for g in ${line#\~}; do expand "$g"; done >> "$tmp/deny" ;;
    *) for g in $line; do expand "$g"; done >> "$tmp/allow" ;;
    esac
  done
sort -u "$tmp/allow" -o "$tmp/allow"
sort -u "$tmp/deny" -o "$tmp/deny"
[ -s "$tmp/allow" ] || fail "no SystemCallFilter= in $unit"
comm -23 "$tmp/allow" "$tmp/deny" > "$tmp/permitted"

mkdir -m 700 "$tmp/run"
sock="$tmp/run/xpjitd.sock"
XPJIT_CACHE_DIR="$tmp/cache" strace -f -qq -o "$tmp/trace" \
  "$B/bin/xpjitd" --foreground --socket "$sock" --log "$tmp/log" --workers 2 &
pid=$!
i=0
while [ ! -S "$sock" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
[ -S "$sock" ] || fail "xpjitd did not start"
export XPJIT_DAEMON="$sock" XPJIT_CACHE=off XPJIT_LOG=info
for e in saxpy reduction matmul half; do
  "$B/examples/$e" > "$tmp/out" 2> "$tmp/err" || fail "$e failed: $(cat "$tmp/err")"
  grep -q "from the daemon" "$tmp/err" || fail "$e was not served by the daemon: $(cat "$tmp/err")"
done
"$B/examples/saxpy" > /dev/null 2>&1 # from its memory
# SPIR-V and PTX, compiled by the daemon's workers for a program
cat > "$tmp/t.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xpjit.h>
int main(void) {
  const char *s = "kernel k(x: global f32[]) range { x[global_id(0)] = sin(x[global_id(0)]); }";
  xpj_context *ctx;
  xpj_program *p;
  if (xpj_context_create(NULL, &ctx) ||
      xpj_program_create(ctx, "t.xpk", s, strlen(s), NULL, &p))
    return 1;
  const char *targets[] = {"spirv", "ptx:sm_90"};
  for (int i = 0; i < 2; i++) {
    void *bin;
    size_t n;
    if (xpj_program_get_binary(p, "k", NULL, 0, targets[i], NULL, &bin, &n)) {
      fprintf(stderr, "%s: %s\n", targets[i], xpj_last_error());
      return 1;
    }
    free(bin);
  }
  xpj_program_destroy(p);
  xpj_context_destroy(ctx);
  return 0;
}
EOF
if cc "$tmp/t.c" $(PKG_CONFIG_PATH="$B/lib" pkg-config --cflags --libs xpjit) -o "$tmp/t" 2> "$tmp/cc"; then
  "$tmp/t" 2> "$tmp/err" || fail "the SPIR-V/PTX program failed: $(cat "$tmp/err")"
else
  fail "cannot build the SPIR-V/PTX program: $(cat "$tmp/cc")"
fi
"$B/bin/xpjit-cli" daemon stats --socket "$sock" > /dev/null || fail "daemon stats"
"$B/bin/xpjit-cli" daemon stop --socket "$sock" > /dev/null || fail "daemon stop"
wait "$pid"
pid=""

awk '{ sub(/^[0-9]+ +/, ""); if (match($0, /^[a-z_0-9]+\(/)) print substr($0, 1, RLENGTH - 1) }' \
  "$tmp/trace" | sort -u > "$tmp/used"
[ "$(wc -l < "$tmp/used")" -gt 20 ] || fail "strace saw almost nothing: $(cat "$tmp/used")"
# as root (CI), SQLite gives its journal files their database's owner
# (fchown, of @chown in @privileged): a user's daemon never does, and
# SQLite goes on when it fails (EPERM under the filter)
[ "$(id -u)" -eq 0 ] && echo fchown >> "$tmp/permitted" && sort -u "$tmp/permitted" -o "$tmp/permitted"
bad=$(comm -23 "$tmp/used" "$tmp/permitted" | tr '\n' ' ')
[ -z "$bad" ] || fail "system calls the unit's filter refuses: $bad"
wx=$(grep -cE 'PROT_WRITE\|PROT_EXEC|PROT_EXEC\|PROT_WRITE|PROT_READ\|PROT_WRITE\|PROT_EXEC' "$tmp/trace")
[ "$wx" -eq 0 ] || fail "$wx writable and executable mappings (MemoryDenyWriteExecute=yes)"
echo "daemon_sandbox: ok ($(wc -l < "$tmp/used") distinct system calls, all within the unit's filter; no W+X memory)"
