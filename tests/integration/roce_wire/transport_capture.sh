#!/usr/bin/env bash
# The network transport's real traffic on the wire: wire_transfer moves 4 MiB
# by SEND, WRITE and READ and runs 2,500 atomics from host B to host A
# (tests/common/two_hosts.sh); tshark captures the link on B's side, and
# check_transport_capture.py has tshark's InfiniBand dissector decode every
# frame (no malformed packet, the expected opcodes) and scapy recompute every
# IPv4 ICRC.
#
#   transport_capture.sh SOFTVERBS_CLI WIRE_TRANSFER SOURCE_DIR WORK_DIR
#
# SKIP (77) without ip netns permission, tshark or scapy.
set -u
CLI=$1 PROGRAM=$2 SRC=$3 WORK=$4
# shellcheck source=../../common/two_hosts.sh
source "$SRC/../../common/two_hosts.sh"
command -v tshark >/dev/null || th_skip "tshark is not installed"
/usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null || th_skip "python3-scapy is not installed"
th_setup "$CLI"
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
source "$SRC/capture_on_b.sh"
capture_start "$WORK"
port=$(th_free_port a)
th_run a timeout 120 "$PROGRAM" server "$port" >"$WORK/server.log" 2>&1 &
server=$!
th_wait_listen a "$port" || { echo "FAIL: server did not listen"; cat "$WORK/server.log"; exit 1; }
th_run b timeout 120 "$PROGRAM" client "$TH_ADDR_A" "$port" 4 >"$WORK/client.log" 2>&1
client_rc=$?
wait "$server"
server_rc=$?
cat "$WORK/server.log" "$WORK/client.log"
[ $client_rc -eq 0 ] && [ $server_rc -eq 0 ] || { echo "FAIL: the transfer failed"; exit 1; }
capture_stop "$WORK" || exit 1
# RC: SEND FIRST/MIDDLE/LAST_WITH_IMM and ONLY_WITH_IMM, WRITE FIRST/MIDDLE/
# LAST, READ REQUEST and RESPONSE FIRST/MIDDLE/LAST, ACK, ATOMIC ACK,
# COMPARE_SWAP, FETCH_ADD.
/usr/bin/python3 "$SRC/check_transport_capture.py" "$WORK/capture.pcap" \
  0,1,3,5,6,7,8,12,13,14,15,17,18,19,20 gso
