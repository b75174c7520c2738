#!/bin/bash
# mlx5dv_modify_qp_udp_sport on the wire: DvQpTest.UdpSportIsSetOnAnRcQpInRts
# over the network transport (docs/roce.md, "Wire loopback"), every RoCE v2
# packet captured by tshark on the namespace's loopback and read by its
# InfiniBand dissector. QP A's requests (BTH destination QP B) must leave
# from the port derived from A's number (0xC000..0xFFFF, not 55555) before
# the call and from 55555 after it - 8 SENDs each; B's ACKs (destination QP
# A) never from 55555.
#
#   udp_sport_capture.sh SOFTVERBS_CLI DEVX_DV_QP WORK_DIR
#
# SKIP (77) without permission to make a network namespace, or without tshark.
set -u
cli=$1 program=$2 work=$3
command -v tshark >/dev/null || { echo "SKIP: tshark is not installed"; exit 77; }
# shellcheck source=../../common/wire_loopback.sh
source "$(dirname "$0")/../../common/wire_loopback.sh"
wl_setup "$cli"
rm -rf "$work" && mkdir -p "$work" || exit 1

# The capture is live once it has printed a canary datagram (UDP port 9).
canaries() { grep -c " → 9 Len=6" "$work/tshark.out"; }
canary_seen() {  # canary_seen N: more than N canaries printed (10 s at most)
  local _
  for _ in $(seq 200); do
    wl_exec /usr/bin/python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"canary", ("198.51.100.1", 9))'
    sleep 0.05
    [ "$(canaries)" -gt "$1" ] && return 0
  done
  return 1
}
ip netns exec "$WL_NS" tshark -l -P -i lo -f "udp dst port 4791 or udp dst port 9" \
  -a duration:100 -F pcap -w "$work/raw.pcap" >"$work/tshark.out" 2>"$work/tshark.err" &
capture=$!
canary_seen 0 || { echo "FAIL: the capture saw no canary in 10 s"; cat "$work/tshark.err"; exit 1; }
wl_exec timeout 60 "$cli" run -- "$program" --gtest_color=no \
  --gtest_filter=DvQpTest.UdpSportIsSetOnAnRcQpInRts >"$work/test.log" 2>&1
rc=$?
canary_seen "$(canaries)" || echo "FAIL: no closing canary"
kill -INT $capture
wait $capture
cat "$work/test.log"
[ $rc -eq 0 ] || { echo "FAIL: the test program failed"; exit 1; }
read -r a b < <(sed -nE 's/^udp_sport qpns: a=([0-9]+) b=([0-9]+)$/\1 \2/p' "$work/test.log")
[ -n "${a:-}" ] || { echo "FAIL: the program printed no QP numbers"; exit 1; }
tshark -r "$work/raw.pcap" -Y "udp.dstport == 4791" -T fields -E separator=, \
  -e frame.number -e udp.srcport -e infiniband.bth.destqp -e infiniband.bth.opcode \
  >"$work/fields.csv" 2>/dev/null
/usr/bin/python3 - "$work/fields.csv" "$a" "$b" <<'PY'
import sys
path, qp_a, qp_b = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
to_b, to_a = [], []  # (frame, source port, opcode), in capture order
for line in open(path):
    frame, sport, qp, opcode = (line.strip().split(",") + [""] * 4)[:4]
    if not qp:
        continue
    row = (int(frame), int(sport), int(opcode, 0))
    (to_b if int(qp, 0) == qp_b else to_a if int(qp, 0) == qp_a else []).append(row)
SEND_ONLY = 4
sends = [r for r in to_b if r[2] == SEND_ONLY]
ports = [r[1] for r in sends]
print(f"A -> B SENDs from ports {ports}; B -> A from {sorted(set(r[1] for r in to_a))}")
ok = len(sends) == 16
ok = ok and all(0xC000 <= p <= 0xFFFF and p != 55555 for p in ports[:8])
ok = ok and len(set(ports[:8])) == 1 and all(p == 55555 for p in ports[8:])
ok = ok and to_a and all(r[1] != 55555 for r in to_a)
print("PASS" if ok else "FAIL: not 8 SENDs from the derived port, then 8 from 55555, ACKs apart")
sys.exit(0 if ok else 1)
PY
