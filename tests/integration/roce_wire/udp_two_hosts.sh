#!/usr/bin/env bash
# The UDP carrier between two hosts (network namespaces joined by a veth
# pair, tests/common/two_hosts.sh): host A sends every test frame (every
# opcode, IPv4 and IPv6 link-local) through src/roce's UdpCarrier to host B,
# whose carrier receives them and whose parser accepts each (ICRC included)
# with the bytes sent; tshark captures them on B's interface, and the
# capture - packets as the kernel put them on the wire - is checked by
# tshark's InfiniBand dissector and by scapy's ICRC (check_*.py --capture),
# and the GRH B's carrier would put in a UD receive buffer must be the
# captured IP header, byte for byte (check_grh.py).
#
#   udp_two_hosts.sh SOFTVERBS_CLI ROCE_UDP_PEER SOURCE_DIR WORK_DIR
#
# SKIP (77) without ip netns permission, tshark or scapy.
set -u
CLI=$1 PEER=$2 SRC=$3 WORK=$4
# shellcheck source=../../common/two_hosts.sh
source "$SRC/../../common/two_hosts.sh"
command -v tshark >/dev/null || th_skip "tshark is not installed"
/usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null || th_skip "python3-scapy is not installed"
th_setup "$CLI"
# The carriers under test bind UDP 4791 themselves: the devices, whose QP1
# holds that port from their daemon's start, step aside.
th_exec a "$CLI" daemon stop >/dev/null 2>&1
th_exec b "$CLI" daemon stop >/dev/null 2>&1
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
frames=$("$PEER" count) || exit 1

# Capture on B's side of the link, as pcap (raw Ethernet frames).
source "$SRC/capture_on_b.sh"
capture_start "$WORK"

th_exec b "$PEER" recv "$TH_ADDR_B" "$TH_LL_B" "$TH_IF_B" "$WORK/ready" 30 - "$WORK/grh.tsv" >"$WORK/recv.out" 2>&1 &
recv_pid=$!
for _ in $(seq 200); do
  [ -e "$WORK/ready" ] && break
  sleep 0.05
done
[ -e "$WORK/ready" ] || { echo "FAIL: the receiver did not bind"; cat "$WORK/recv.out"; exit 1; }

th_exec a "$PEER" send "$TH_ADDR_A" "$TH_LL_A" "$TH_IF_A" "$TH_ADDR_B" "$TH_LL_B" "$WORK/sent.tsv" ||
  { echo "FAIL: the sender failed"; exit 1; }
rc=0
wait "$recv_pid" || rc=1
cat "$WORK/recv.out"
capture_stop "$WORK" || rc=1
echo "capture: $(tshark -r "$WORK/capture.pcap" 2>/dev/null | wc -l) frames"
/usr/bin/python3 "$SRC/check_tshark.py" --capture "$WORK/capture.pcap" "$WORK/sent.tsv" || rc=1
/usr/bin/python3 "$SRC/check_icrc_scapy.py" --capture "$WORK/capture.pcap" "$WORK/sent.tsv" || rc=1
/usr/bin/python3 "$SRC/check_grh.py" "$WORK/capture.pcap" "$WORK/grh.tsv" || rc=1
[ $rc = 0 ] && echo "OK: $frames frames from host A to host B over UDP 4791, checked by our parser, tshark and scapy; GRHs are the real IP headers"
exit $rc
