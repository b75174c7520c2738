#!/bin/bash
# A process that dies loses its QPs as on real hardware, and its peer on the
# other host sees what hardware would give: wire_transfer runs from host B to
# host A (RC, timeout 10, retry_cnt 7); the server on host A is SIGKILLed in
# the middle of the traffic. The client must fail with
# IBV_WC_RETRY_EXC_ERR ("transport retry counter exceeded") within seconds,
# and afterwards neither device may still serve a network QP.
#
# usage: wire_kill.sh SOFTVERBS_CLI WIRE_TRANSFER
set -u
source "$(dirname "$0")/../../common/two_hosts.sh"
cli=$1 program=$2
th_setup "$cli"
port=$(th_free_port a)
th_run a timeout 120 "$program" server "$port" >"$TH_DIR/server.log" 2>&1 &
th_wait_listen a "$port" || { echo "FAIL: server did not listen"; cat "$TH_DIR/server.log"; exit 1; }
th_run b timeout 120 "$program" client "$TH_ADDR_A" "$port" 4000 >"$TH_DIR/client.log" 2>&1 &
client=$!
# Mid-traffic: once host A's device serves the server's QP and has seen packets.
for _ in $(seq 100); do
  th_exec a "$cli" status --json 2>/dev/null | python3 -c '
import json, sys
q = json.load(sys.stdin)["roce"]["qps"]
sys.exit(0 if q and q[0]["packets_received"] > 1000 else 1)' && break
  sleep 0.1
done
victim=$(th_pgrep a "^$program server $port" | head -1)
[ -n "$victim" ] || { echo "FAIL: no server process to kill"; exit 1; }
start=$(date +%s%N)
kill -9 "$victim"
wait "$client"
client_rc=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
echo "--- client on host b (rc=$client_rc, ${elapsed_ms} ms after the kill)"; cat "$TH_DIR/client.log"
rc=0
[ $client_rc -ne 0 ] || { echo "FAIL: the client did not fail"; rc=1; }
grep -q "transport retry counter exceeded" "$TH_DIR/client.log" ||
  { echo "FAIL: the client's error is not IBV_WC_RETRY_EXC_ERR"; rc=1; }
[ $elapsed_ms -lt 20000 ] || { echo "FAIL: the client took ${elapsed_ms} ms to fail"; rc=1; }
for h in a b; do
  left=$(th_exec $h "$cli" status --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["roce"]["qps"]))')
  echo "host $h: network QPs left: $left"
  [ "$left" = 0 ] || { echo "FAIL: host $h still serves $left network QP(s)"; rc=1; }
done
[ $rc = 0 ] && echo PASS
exit $rc
