#!/usr/bin/env bash
# rdma_cm's connection exchange on the wire: rping connects from host B to
# host A (tests/common/two_hosts.sh), sends 3 pings and disconnects; tshark
# captures the link on B's side, and its InfiniBand dissector must decode the
# CM MADs as the kernel's rdma_cm sends them - ConnectRequest, ConnectReply,
# ReadyToUse, DisconnectRequest, DisconnectReply on QP1 - with no malformed
# or erroneous frame, the REQ's IP CM service id (port) and private data
# (rdma_cm's IP header: both addresses) as rping asked, and the REQ's and
# REP's QPNs those of the data QPs that then carry the pings.
#
#   cm_capture.sh SOFTVERBS_CLI SOURCE_DIR WORK_DIR
#
# SKIP (77) without ip netns permission or tshark.
set -u
CLI=$1 SRC=$2 WORK=$3
# shellcheck source=../../common/two_hosts.sh
source "$SRC/../../common/two_hosts.sh"
command -v tshark >/dev/null || th_skip "tshark is not installed"
th_setup "$CLI"
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
source "$SRC/capture_on_b.sh"
capture_start "$WORK"
port=7471
th_run a timeout 30 rping -s -v -C 3 -a "$TH_ADDR_A" -p $port >"$WORK/server.log" 2>&1 &
server=$!
for _ in $(seq 200); do
  th_exec a "$CLI" status --json | grep -q '"LISTEN"' && break
  sleep 0.05
done
th_run b timeout 30 rping -c -v -C 3 -a "$TH_ADDR_A" -p $port >"$WORK/client.log" 2>&1
client_rc=$?
wait "$server"
server_rc=$?
cat "$WORK/server.log" "$WORK/client.log"
[ $client_rc -eq 0 ] && [ $server_rc -eq 0 ] || { echo "FAIL: rping failed"; exit 1; }
capture_stop "$WORK" || exit 1
tshark -r "$WORK/capture.pcap" >"$WORK/summary.txt" 2>/dev/null
cat "$WORK/summary.txt"
bad=$(tshark -r "$WORK/capture.pcap" -Y "_ws.malformed || _ws.expert.severity >= error" 2>/dev/null | wc -l)
[ "$bad" -eq 0 ] || { echo "FAIL: $bad malformed or erroneous frames"; exit 1; }
fields() {
  tshark -r "$WORK/capture.pcap" -Y "$1" -T fields "${@:2}" 2>/dev/null
}
attrs=$(fields "infiniband.mad.mgmtclass == 0x07" -e infiniband.mad.attributeid | tr '\n' ' ')
echo "CM attributes in order: $attrs"
[ "$attrs" = "0x0010 0x0013 0x0014 0x0015 0x0016 " ] ||
  { echo "FAIL: expected REQ REP RTU DREQ DREP (0x0010 0x0013 0x0014 0x0015 0x0016)"; exit 1; }
read -r dport sip dip req_qpn <<<"$(fields "infiniband.mad.attributeid == 0x0010" \
  -e infiniband.cm.req.serviceid.dport -e infiniband.cm.req.ip_cm.sip4 \
  -e infiniband.cm.req.ip_cm.dip4 -e infiniband.cm.req.localqpn)"
rep_qpn=$(fields "infiniband.mad.attributeid == 0x0013" -e infiniband.cm.rep.localqpn)
echo "REQ: port $dport, $sip -> $dip, QPN $req_qpn; REP: QPN $rep_qpn"
[ "$((dport))" -eq $port ] || { echo "FAIL: the REQ's service id is not port $port"; exit 1; }
[ "$sip" = "$TH_ADDR_B" ] && [ "$dip" = "$TH_ADDR_A" ] ||
  { echo "FAIL: the REQ's IP header is not $TH_ADDR_B -> $TH_ADDR_A"; exit 1; }
# The data QPs: B's requests go to the REP's QPN, A's to the REQ's.
to_a=$(fields "ip.dst == $TH_ADDR_A && !infiniband.mad" -e infiniband.bth.destqp | sort -u | tr '\n' ' ')
to_b=$(fields "ip.dst == $TH_ADDR_B && !infiniband.mad" -e infiniband.bth.destqp | sort -u | tr '\n' ' ')
echo "data packets to A's QP(s): $to_a; to B's: $to_b"
[ "$to_a" = "$((rep_qpn)) " ] || [ "$to_a" = "$rep_qpn " ] ||
  { echo "FAIL: B's data packets do not go to the REP's QPN"; exit 1; }
[ "$to_b" = "$((req_qpn)) " ] || [ "$to_b" = "$req_qpn " ] ||
  { echo "FAIL: A's data packets do not go to the REQ's QPN"; exit 1; }
echo PASS
