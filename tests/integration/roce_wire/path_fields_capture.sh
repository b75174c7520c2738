#!/usr/bin/env bash
# The IP header fields of an address vector on the wire: ib_send_bw between
# two hosts (tests/common/two_hosts.sh) with --tclass=184 (DSCP 46, EF), over
# a UD AH (IPv4 and IPv6 link-local) and an RC QP's path (IPv4). tshark
# captures the link on host B's side: every RoCE packet, both directions
# (RC: the requests and the responder's ACKs), must carry traffic class /
# TOS 184 and hop limit / TTL 255 - perftest's address vectors have hop limit
# 0xff (a UDP socket's own default would be 64 and TOS 0, which is what went
# before the device gave the kernel the path's fields with each send).
#
#   path_fields_capture.sh SOFTVERBS_CLI SOURCE_DIR WORK_DIR
#
# SKIP (77) without ip netns permission, tshark or perftest.
set -u
CLI=$1 SRC=$2 WORK=$3
# shellcheck source=../../common/two_hosts.sh
source "$SRC/../../common/two_hosts.sh"
command -v tshark >/dev/null || th_skip "tshark is not installed"
command -v ib_send_bw >/dev/null || th_skip "ib_send_bw is not installed (perftest)"
th_setup "$CLI"
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
source "$SRC/capture_on_b.sh"

# gid_index HOST REGEX: the index of HOST's RoCE v2 GID that REGEX matches.
gid_index() {
  th_run "$1" ibv_devinfo -v |
    sed -nE "s/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]*$2, RoCE v2$/\1/p" | head -1
}

failed=0
# run_case NAME CONNECTION GID_REGEX_A GID_REGEX_B
run_case() {
  local name=$1 conn=$2 ga gb port server
  ga=$(gid_index a "$3")
  gb=$(gid_index b "$4")
  if [ -z "$ga" ] || [ -z "$gb" ]; then
    echo "FAIL: $name: no RoCE v2 GID /$3/ on host a or /$4/ on host b"
    failed=1
    return
  fi
  mkdir -p "$WORK/$name"
  capture_start "$WORK/$name"
  port=$(th_free_port a)
  local args=(-d softverbs0 -c "$conn" --tclass=184 -s 64 -n 50 -p "$port")
  th_run a timeout 60 ib_send_bw "${args[@]}" -x "$ga" >"$WORK/$name/server.log" 2>&1 &
  server=$!
  th_wait_listen a "$port" || { echo "FAIL: $name: the server did not listen"; failed=1; return; }
  th_run b timeout 60 ib_send_bw "${args[@]}" -x "$gb" "$TH_ADDR_A" >"$WORK/$name/client.log" 2>&1
  local client_rc=$?
  wait $server
  capture_stop "$WORK/$name" || { failed=1; return; }
  if [ $client_rc -ne 0 ]; then
    echo "FAIL: $name: the client failed"; cat "$WORK/$name/client.log"; failed=1; return
  fi
  # Per packet: direction (to B or to A), traffic class, hop limit.
  tshark -r "$WORK/$name/capture.pcap" -T fields -E separator=, \
    -e ip.dst -e ipv6.dst -e ip.dsfield -e ipv6.tclass -e ip.ttl -e ipv6.hlim \
    >"$WORK/$name/fields.csv" 2>/dev/null
  /usr/bin/python3 - "$name" "$conn" "$WORK/$name/fields.csv" "$TH_ADDR_B" <<'PY' || failed=1
import sys
name, conn, path, addr_b = sys.argv[1:]
to_b = to_a = 0
bad = []
for line in open(path):
    dst4, dst6, tos, tclass, ttl, hlim = (line.rstrip("\n").split(",") + [""] * 6)[:6]
    field = int(tos or tclass, 0)
    hops = int(ttl or hlim, 0)
    if dst4 == addr_b or dst6.startswith("fe80::2"):
        to_b += 1
    else:
        to_a += 1
    if field != 184 or hops != 255:
        bad.append((dst4 or dst6, field, hops))
print(f"{name}: {to_a} packets B->A, {to_b} A->B; traffic class / TTL of each: "
      f"{'184 / 255' if not bad else bad[:5]}")
ok = not bad and to_a >= 50 and (conn == "UD" or to_b > 0)
if not ok:
    print(f"FAIL: {name}: packets with other fields, or not the traffic expected")
sys.exit(0 if ok else 1)
PY
}

run_case ud_ipv4 UD "::ffff:198\.51\.100\.1" "::ffff:198\.51\.100\.2"
run_case ud_ipv6 UD "fe80::1" "fe80::2"
run_case rc_ipv4 RC "::ffff:198\.51\.100\.1" "::ffff:198\.51\.100\.2"
[ $failed -eq 0 ] || exit 1
echo PASS
