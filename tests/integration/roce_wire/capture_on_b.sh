# Sourced by the capture tests (after tests/common/two_hosts.sh's th_setup):
# a tshark capture of host B's side of the link that is proven live before
# the traffic and complete after it. tshark's "Capturing on" comes before its
# capture sees packets (a loaded CI runner once sent all its frames in that
# gap and captured none), so a canary datagram (A -> B port 9) must be seen
# before anything is sent, and a second one after the last frame; then the
# capture stops and the canaries are filtered out.
#
#   capture_start WORK   tshark writes WORK/raw.pcap; returns once live
#   capture_stop WORK    closing canary, stop, WORK/capture.pcap (UDP 4791 only)

# capture_canaries WORK: canary datagrams tshark has printed so far (only
# those: tshark may still be printing RoCE packets from its backlog).
capture_canaries() {
  grep -c " → 9 Len=6" "$1/tshark.out"
}

# capture_canary_seen WORK N: sends canaries from A until tshark has printed
# more than N of them (10 s at most).
capture_canary_seen() {
  local i
  for i in $(seq 200); do
    th_exec a /usr/bin/python3 -c 'import socket,sys; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"canary", (sys.argv[1], 9))' "$TH_ADDR_B"
    sleep 0.05
    [ "$(capture_canaries "$1")" -gt "$2" ] && return 0
  done
  return 1
}

capture_start() {
  # The devices send runs of packets as one UDP GSO send (docs/roce.md); on
  # a veth the run would stay one frame to the capture. Limited to one
  # segment per frame, the link cuts runs as a NIC without segmentation
  # offload does: the capture sees every packet, with the IPv4 ID its
  # segment gets (0, 1, ...), which its ICRC must cover.
  ip -n "$TH_NS_A" link set dev "$TH_IF_A" gso_max_segs 1 &&
    ip -n "$TH_NS_B" link set dev "$TH_IF_B" gso_max_segs 1 ||
    { echo "FAIL: cannot set gso_max_segs on the test link"; exit 1; }
  ip netns exec "$TH_NS_B" tshark -l -P -i "$TH_IF_B" -f "udp dst port 4791 or udp dst port 9" \
    -a duration:300 -F pcap -w "$1/raw.pcap" >"$1/tshark.out" 2>"$1/tshark.err" &
  CAPTURE_PID=$!
  capture_canary_seen "$1" 0 ||
    { echo "FAIL: tshark's capture on host B saw no canary in 10 s"; cat "$1/tshark.err"; exit 1; }
}

# Fails (1) without the closing canary; the capture is stopped and filtered
# either way.
capture_stop() {
  local rc=0
  capture_canary_seen "$1" "$(capture_canaries "$1")" ||
    { echo "FAIL: tshark's capture saw no closing canary"; rc=1; }
  kill -INT "$CAPTURE_PID"
  wait "$CAPTURE_PID"
  tshark -r "$1/raw.pcap" -Y "udp.dstport == 4791" -F pcap -w "$1/capture.pcap" ||
    { echo "FAIL: cannot filter the capture"; exit 1; }
  return $rc
}
