#!/bin/bash
# A peer killed while connected across hosts (tests/common/two_hosts.sh):
# rping runs between a server on host A and a client on host B; the client
# is killed (SIGKILL) mid-traffic. Its device destroys its ids as
# rdma_destroy_id would, so host A's CM must get the DREQ over the wire (one
# more CM MAD received than before the kill) and the server must end within
# 10 s with what hardware gives a partner: RDMA_CM_EVENT_DISCONNECTED
# ("DISCONNECT EVENT") or, if its in-flight RDMA ops fail first, an error
# completion (the DREQ moved its QP to ERR); afterwards neither device holds
# an rdma_cm id.
#
# usage: two_hosts_cm_kill.sh SOFTVERBS_CLI
set -u
source "$(dirname "$0")/../../common/two_hosts.sh"
cli=$1
th_setup "$cli"
th_run a timeout 60 rping -s -v -C 1000000 -a "$TH_ADDR_A" -p 7471 >"$TH_DIR/server.log" 2>&1 &
server=$!
for _ in $(seq 200); do
  th_exec a "$cli" status --json | grep -q '"LISTEN"' && break
  sleep 0.05
done
th_run b timeout 60 rping -c -v -C 1000000 -a "$TH_ADDR_A" -p 7471 >"$TH_DIR/client.log" 2>&1 &
client=$!
for _ in $(seq 200); do  # traffic flows
  [ "$(grep -c 'ping data' "$TH_DIR/client.log")" -gt 100 ] && break
  sleep 0.05
done
pings=$(grep -c 'ping data' "$TH_DIR/client.log")
[ "$pings" -gt 100 ] || { echo "FAIL: no traffic before the kill"; cat "$TH_DIR/client.log"; exit 1; }
mads_received() {
  th_exec a "$cli" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["roce"]["cm_mads_received"])'
}
before=$(mads_received)
start=$(date +%s%N)
victims=$(th_pgrep b "^rping -c -v -C 1000000 -a $TH_ADDR_A")
[ -n "$victims" ] || { echo "FAIL: no client to kill"; exit 1; }
kill -9 $victims
wait $client 2>/dev/null
for _ in $(seq 200); do
  kill -0 $server 2>/dev/null || break
  sleep 0.05
done
ms=$((($(date +%s%N) - start) / 1000000))
if kill -0 $server 2>/dev/null; then
  echo "FAIL: the server still runs 10 s after its peer was killed"
  kill $server
  exit 1
fi
wait $server
echo "--- server on host a (rc=$?, ended $ms ms after the kill; $pings pings before it)"
grep -v "ping data" "$TH_DIR/server.log"
for _ in $(seq 100); do  # the DREQ may trail the server's end
  after=$(mads_received)
  [ "$after" -gt "$before" ] && break
  sleep 0.05
done
echo "host a: CM MADs received $before before the kill, $after after"
[ "$after" -gt "$before" ] || { echo "FAIL: host A's CM got no DREQ from host B"; exit 1; }
grep -qE "DISCONNECT EVENT|completion failed|state 11" "$TH_DIR/server.log" ||
  { echo "FAIL: the server saw neither DISCONNECTED nor an error completion"; exit 1; }
for h in a b; do
  left=$(th_exec $h "$cli" status --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("cm_ids", [])))')
  [ "$left" -eq 0 ] || { echo "FAIL: host $h still holds $left rdma_cm id(s)"; exit 1; }
done
echo PASS
