#!/usr/bin/env bash
# The connection manager against CM MADs anyone may send (QP 1 takes them
# from every host): a persistent rping server listens on host B; rping from
# host A connects once while tshark captures what reaches B (the REQ, RTU,
# DREQ...), whose communication IDs must not be bare handles; then scapy
# sends B COUNT mutants of those MADs from A (forge_cm_mads.py: bytes
# changed, attributes swapped, the communication IDs of live ids, random
# bodies) while the server listens. Afterwards B's device must have taken
# them all (cm_mads_received), still answer `softverbs status`, and serve
# rping from A again: every ping of a new connection arrives.
#
# A mutant REQ is a connection request the server accepts; its REP is never
# answered (or a forged REJ follows), so the CM reports UNREACHABLE
# (-ETIMEDOUT) or REJECTED for it - and rping exits on any such event, also
# on hardware (its cm_thread calls exit()). The test accepts the server's end
# only so: exit status 255 after rping's "cma event ..." line for one of
# those events; then B's device must have destroyed every id of the dead
# process, and a new server, started after the listen grace, takes the last
# connection.
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
servers=0
cm_ids() {  # host B's cm ids, one state a line
  th_exec b "$CLI" status --json | /usr/bin/python3 -c '
import json, sys
for i in json.load(sys.stdin)["cm_ids"]: print(i["state"])'
}
start_server() {
  servers=$((servers + 1))
  th_run b timeout 120 rping -s -P -a "$TH_ADDR_B" -p $port >"$WORK/server$servers.log" 2>&1 &
  server=$!
  for _ in $(seq 200); do
    cm_ids | grep -qx LISTEN && return 0
    sleep 0.05
  done
  echo "FAIL: rping server $servers does not listen"; cat "$WORK/server$servers.log"; exit 1
}
# server_ended: true if the server has exited, for one of the events that
# make rping exit (FAIL for any other end); false while it runs.
server_ended() {
  kill -0 "$server" 2>/dev/null && return 1
  local rc=0 log="$WORK/server$servers.log"
  wait "$server" || rc=$?
  echo "rping server $servers exited ($rc):"; sed 's/^/  /' "$log"
  # exit(-1) in rping's cm_thread; not its other exits (rdma_get_cm_event
  # failing, the listener's unexpected event, a signal).
  if ((rc != 255)) ||
    ! grep -Eq 'cma event RDMA_CM_EVENT_(UNREACHABLE|REJECTED|CONNECT_ERROR), error' "$log" ||
    grep -Eq '^(rdma_get_cm_event|poll failed|wait for CONNECT_REQUEST)' "$log"; then
    echo "FAIL: the rping server ended otherwise than on a connection's failure"; exit 1
  fi
  local gone=
  for _ in $(seq 100); do  # the device destroys a dead process's ids
    [ -z "$(cm_ids)" ] && gone=1 && break
    sleep 0.05
  done
  [ -n "$gone" ] ||
    { echo "FAIL: ids of the dead rping server are left on host B: $(cm_ids | sort | uniq -c)"; exit 1; }
  # REQs that came while nobody listened wait 1 s for a listener before
  # they are rejected (the listen grace, docs/rdmacm.md): forged ones would
  # reach the next server, whose persistent mode does not survive a burst of
  # requests that never complete (it clones one child id twice and crashes).
  sleep 1.5
}
start_server
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
# The last connection; a server that ended on a forged connection (see above)
# is started again, at most 3 times.
if server_ended; then start_server; fi
for attempt in 1 2 3; do
  ping_b "2.$attempt" && break
  if ((attempt == 3)) || ! server_ended; then
    echo "FAIL: rping after the forged MADs"; cat "$WORK/client2.$attempt.log"; exit 1
  fi
  echo "rping $attempt after the forged MADs failed as the server ended; again"
  start_server
done
th_exec b "$CLI" status --json >/dev/null || { echo "FAIL: host B's daemon is gone"; exit 1; }
kill "$server" 2>/dev/null
wait "$server" 2>/dev/null
echo PASS
