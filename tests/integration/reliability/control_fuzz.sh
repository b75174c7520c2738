#!/bin/bash
# reliability.control_fuzz: control_fuzz.cc sends the user's daemon REQUESTS
# random requests; the daemon must be the same process afterwards, answer
# `softverbs status`, and run an ibv_rc_pingpong pair (Debian's) as before.
# usage: control_fuzz.sh SOFTVERBS_CLI CONTROL_FUZZ REQUESTS SEED
set -u
cli=$1 fuzz=$2 requests=$3 seed=$4
runtime=$(mktemp -d /tmp/softverbs-fuzz-XXXXXX)
trap '"$cli" daemon stop >/dev/null 2>&1; rm -rf "$runtime"' EXIT
export SOFTVERBS_RUNTIME_DIR=$runtime SOFTVERBS_IDLE_TIMEOUT=30
fail() {
  echo "FAIL: $*"
  echo "--- the daemon's log (last 30 lines):"
  tail -30 "$runtime/softverbsd.log" 2>/dev/null
  exit 1
}
"$cli" daemon start >/dev/null || fail "the daemon did not start"
dpid=$(pgrep -f "softverbsd --runtime-dir $runtime")
[ -n "$dpid" ] || fail "no daemon pid"
timeout 300 "$fuzz" "$requests" "$seed" || fail "control_fuzz failed (above)"
kill -0 "$dpid" 2>/dev/null || fail "the daemon (pid $dpid) is gone"
"$cli" status --json >/dev/null || fail "softverbs status failed"
port=$(( 20000 + RANDOM % 20000 ))
timeout 60 "$cli" run -- ibv_rc_pingpong -d softverbs0 -g 1 -n 100 -p $port >"$runtime/server.log" 2>&1 &
server=$!
for _ in $(seq 200); do
  grep -q ":$(printf %04X $port) 00000000:0000 0A" /proc/net/tcp && break
  sleep 0.02
done
timeout 60 "$cli" run -- ibv_rc_pingpong -d softverbs0 -g 1 -n 100 -p $port 127.0.0.1 \
  >"$runtime/client.log" 2>&1
crc=$?
wait $server
src=$?
cat "$runtime/client.log"
[ $src -eq 0 ] && [ $crc -eq 0 ] || { cat "$runtime/server.log"; fail "ibv_rc_pingpong after the fuzz"; }
[ "$(pgrep -f "softverbsd --runtime-dir $runtime")" = "$dpid" ] || fail "the daemon was restarted"
echo PASS
