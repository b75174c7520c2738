#!/usr/bin/env bash
# The connection manager against CM MADs anyone may send (QP 1 takes them
# from every host): a persistent rping server listens on host B; rping from
# host A connects once while tshark captures what reaches B (the REQ, RTU,
# DREQ...), whose communication IDs must not be bare handles; then scapy sends B COUNT mutants of those MADs from A
# (forge_cm_mads.py: bytes changed, attributes swapped, the communication IDs
# of live ids, random bodies) while the server still listens. Afterwards
# B's device must have taken them all (cm_mads_received), still answer
# `softverbs status`, and serve rping from A again: every ping of a new
# connection arrives.
#
#   forged_cm_mads.sh SOFTVERBS_CLI SOURCE_DIR WORK_DIR COUNT SEED
#
# SKIP (77) without ip netns permission, tshark or scapy.
set -u
CLI=$1 SRC=$2 WORK=$3 COUNT=$4 SEED=$5
# shellcheck source=../../common/two_hosts.sh
source "$SRC/../../common/two_hosts.sh"
command -v tshark >/dev/null || th_skip "tshark is not installed"
/usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null || th_skip "python3-scapy is not installed"
th_setup "$CLI"
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
source "$SRC/capture_on_b.sh"
port=7473
th_run b timeout 120 rping -s -P -a "$TH_ADDR_B" -p $port >"$WORK/server.log" 2>&1 &
server=$!
for _ in $(seq 200); do
  th_exec b "$CLI" status --json | grep -q '"LISTEN"' && break
  sleep 0.05
done
ping_b() {  # a new connection from A: every ping must come back
  th_run a timeout 30 rping -c -V -C 3 -a "$TH_ADDR_B" -p $port >"$WORK/client$1.log" 2>&1
}
capture_start "$WORK"
ping_b 1 || { echo "FAIL: rping before the forged MADs"; cat "$WORK"/*.log; exit 1; }
capture_stop "$WORK" || exit 1
# The communication IDs on the wire are not the daemons' handles (1, 2, 3...)
# but the handles XORed with a random number (top bit set), as ib_cm makes
# them: tshark reads them from every CM MAD of the capture.
ids=$(tshark -r "$WORK/capture.pcap" -Y "infiniband.mad.mgmtclass == 0x07" -T fields \
  -e infiniband.cm.rep.remotecommid -e infiniband.cm.rtu.localcommid \
  -e infiniband.cm.rtu.remotecommid -e infiniband.cm.dreq.localcommid \
  -e infiniband.cm.dreq.remotecommid -e infiniband.cm.drsp.localcommid \
  -e infiniband.cm.drsp.remotecommid 2>/dev/null | tr '\t,' '\n\n' | grep -v '^$')
echo "communication IDs on the wire: $(echo $ids)"
[ -n "$ids" ] || { echo "FAIL: tshark found no communication ID in the capture"; exit 1; }
for id in $ids; do
  [ $((id)) -ge $((0x80000000)) ] || { echo "FAIL: communication ID $id is a bare handle"; exit 1; }
done
mads() {
  th_exec b "$CLI" status --json | /usr/bin/python3 -c \
    'import json,sys; print(json.load(sys.stdin)["roce"]["cm_mads_received"])'
}
before=$(mads) || { echo "FAIL: no status from host B"; exit 1; }
th_exec a /usr/bin/python3 "$SRC/forge_cm_mads.py" "$WORK/capture.pcap" "$TH_ADDR_A" \
  "$TH_ADDR_B" "$COUNT" "$SEED" || { echo "FAIL: could not send the forged MADs"; exit 1; }
# The daemon reads its socket in its own time (bounded wait).
for _ in $(seq 100); do
  now=$(mads) || { echo "FAIL: host B's daemon stopped answering"; exit 1; }
  [ $((now - before)) -ge "$COUNT" ] && break
  sleep 0.1
done
echo "host B's device took $((now - before)) CM MADs (sent $COUNT)"
th_exec b "$CLI" status --json | /usr/bin/python3 -c '
import collections, json, sys
s = json.load(sys.stdin)
states = collections.Counter(i["state"] for i in s["cm_ids"])
print("host B now: cm ids by state", dict(states), "- CM counters", s["cm"])'
[ $((now - before)) -ge "$COUNT" ] || { echo "FAIL: not every forged MAD reached the CM"; exit 1; }
ping_b 2 || { echo "FAIL: rping after the forged MADs"; cat "$WORK/client2.log"; exit 1; }
th_exec b "$CLI" status --json >/dev/null || { echo "FAIL: host B's daemon is gone"; exit 1; }
kill "$server" 2>/dev/null
wait "$server" 2>/dev/null
echo PASS
