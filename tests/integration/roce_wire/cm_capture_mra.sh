#!/usr/bin/env bash
# The CM's answer to a slow accept, on the wire: host B connects to a server
# on host A that accepts after 2 s (tests/integration/rdmacm/cm_one_message.c),
# so B's CM sends its REQ again after 1.07 s and A's CM answers that
# duplicate with an MRA (docs/rdmacm.md, "Lost messages"). tshark captures
# B's side of the link; its InfiniBand dissector must see, in order, REQ,
# REQ, MRA (attribute 0x0011, MsgRcptAck), REP, RTU, then DREQ and DREP,
# with no malformed or erroneous frame.
#
#   cm_capture_mra.sh SOFTVERBS_CLI CM_ONE_MESSAGE SOURCE_DIR WORK_DIR
#
# SKIP (77) without ip netns permission or tshark.
set -u
CLI=$1 PROG=$2 SRC=$3 WORK=$4
# shellcheck source=../../common/two_hosts.sh
source "$SRC/../../common/two_hosts.sh"
command -v tshark >/dev/null || th_skip "tshark is not installed"
th_setup "$CLI"
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
source "$SRC/capture_on_b.sh"
capture_start "$WORK"
port=7475
th_run a timeout 30 "$PROG" -s "$TH_ADDR_A" -p $port -d 2 >"$WORK/server.log" 2>&1 &
server=$!
for _ in $(seq 200); do
  th_exec a "$CLI" status --json | grep -q '"LISTEN"' && break
  sleep 0.05
done
th_run b timeout 30 "$PROG" -c "$TH_ADDR_A" -p $port >"$WORK/client.log" 2>&1
client_rc=$?
wait "$server"
server_rc=$?
cat "$WORK/server.log" "$WORK/client.log"
[ $client_rc -eq 0 ] && [ $server_rc -eq 0 ] || { echo "FAIL: the pair failed"; exit 1; }
capture_stop "$WORK" || exit 1
tshark -r "$WORK/capture.pcap" >"$WORK/summary.txt" 2>/dev/null
cat "$WORK/summary.txt"
bad=$(tshark -r "$WORK/capture.pcap" -Y "_ws.malformed || _ws.expert.severity >= error" 2>/dev/null | wc -l)
[ "$bad" -eq 0 ] || { echo "FAIL: $bad malformed or erroneous frames"; exit 1; }
attrs=$(tshark -r "$WORK/capture.pcap" -Y "infiniband.mad.mgmtclass == 0x07" -T fields \
  -e infiniband.mad.attributeid 2>/dev/null | tr '\n' ' ')
echo "CM attributes in order: $attrs"
[ "$attrs" = "0x0010 0x0010 0x0011 0x0013 0x0014 0x0015 0x0016 " ] ||
  { echo "FAIL: expected REQ REQ MRA REP RTU DREQ DREP"; exit 1; }
grep -q "MsgRcptAck" "$WORK/summary.txt" ||
  { echo "FAIL: tshark did not name the MRA (MsgRcptAck)"; exit 1; }
echo PASS
