#!/usr/bin/env bash
# The IP header fields of an address vector on the wire: ib_send_bw between
# two hosts (tests/common/two_hosts.sh) with traffic class 184 (DSCP 46, EF),
# over a UD AH (IPv4 and IPv6 link-local) and an RC QP's path (IPv4) set by
# perftest (--tclass=184), and over an RC connection and a UD id (SIDR)
# rdma_cm made with RDMA_OPTION_ID_TOS 184 (-R --tos=184). tshark captures
# the link on host B's side: every RoCE packet, both directions (RC: the
# requests and the responder's ACKs; rdma_cm: its MADs too, sent over the
# path as ib_cm sends them), must carry traffic class / TOS 184 and the path's hop limit / TTL:
# 255 for perftest's own address vectors (hop limit 0xff), 64 for rdma_cm's
# paths. (A UDP socket's defaults, TOS 0 and TTL 64, are what every packet
# had before the device gave the kernel the path's fields with each send;
# rdma_set_option's TOS was taken and not used.)
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

# listening HOST PORT MODE: the server listens (TCP, or an rdma_cm id when
# MODE is cm), 10 s at most.
listening() {
  [ "$3" != cm ] && { th_wait_listen "$1" "$2"; return; }
  local i
  for i in $(seq 200); do
    th_exec "$1" "$TH_CLI" status --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
ids = json.load(sys.stdin).get("cm_ids", [])
sys.exit(0 if any(i["state"] == "LISTEN" for i in ids) else 1)' && return 0
    sleep 0.05
  done
  return 1
}

failed=0
# run_case NAME CONNECTION GID_REGEX_A GID_REGEX_B TTL ARGS...: GID_REGEX "cm":
# rdma_cm picks the GIDs.
run_case() {
  local name=$1 conn=$2 ttl=$5 ga="" gb="" port server
  local extra=("${@:6}")
  if [ "$3" != cm ]; then
    ga=$(gid_index a "$3")
    gb=$(gid_index b "$4")
    if [ -z "$ga" ] || [ -z "$gb" ]; then
      echo "FAIL: $name: no RoCE v2 GID /$3/ on host a or /$4/ on host b"
      failed=1
      return
    fi
    ga="-x $ga" gb="-x $gb"
  fi
  mkdir -p "$WORK/$name"
  capture_start "$WORK/$name"
  port=$(th_free_port a)
  local args=(-d softverbs0 -c "$conn" -s 64 -n 50 -p "$port" "${extra[@]}")
  # shellcheck disable=SC2086
  th_run a timeout 60 ib_send_bw "${args[@]}" $ga >"$WORK/$name/server.log" 2>&1 &
  server=$!
  listening a "$port" "$3" || { echo "FAIL: $name: the server did not listen"; failed=1; return; }
  # shellcheck disable=SC2086
  th_run b timeout 60 ib_send_bw "${args[@]}" $gb "$TH_ADDR_A" >"$WORK/$name/client.log" 2>&1
  local client_rc=$?
  wait $server
  capture_stop "$WORK/$name" || { failed=1; return; }
  if [ $client_rc -ne 0 ]; then
    echo "FAIL: $name: the client failed"; cat "$WORK/$name/client.log"; failed=1; return
  fi
  # Per packet: destination (address), traffic class, hop limit, BTH
  # destination QP.
  tshark -r "$WORK/$name/capture.pcap" -T fields -E separator=, \
    -e ip.dst -e ipv6.dst -e ip.dsfield -e ipv6.tclass -e ip.ttl -e ipv6.hlim \
    -e infiniband.bth.destqp >"$WORK/$name/fields.csv" 2>/dev/null
  local args_py=("$name" "$3" "$WORK/$name/fields.csv" "$TH_ADDR_A" "$ttl" "$conn")
  /usr/bin/python3 - "${args_py[@]}" <<'PY' || failed=1
import collections, sys
name, mode, path, addr_a, want_ttl, conn = sys.argv[1:]
want_ttl = int(want_ttl)
# (to A?, destination QP) -> traffic classes seen; every packet's TTL.
classes = collections.defaultdict(collections.Counter)
ttls = collections.Counter()
for line in open(path):
    dst4, dst6, tos, tclass, ttl, hlim, qp = (line.rstrip("\n").split(",") + [""] * 7)[:7]
    to_a = dst4 == addr_a or dst6.startswith("fe80::1")
    classes[(to_a, int(qp, 0))][int(tos or tclass, 0)] += 1
    ttls[int(ttl or hlim, 0)] += 1
def count(to_a, data, tc):
    return sum(c[tc] for (a, qp), c in classes.items() if a == to_a and (qp != 1) == data)
print(f"{name}: TTLs {dict(ttls)}; per (to A, QP): "
      f"{ {k: dict(v) for k, v in sorted(classes.items())} }")
ok = set(ttls) == {want_ttl}
if mode != "cm":
    # One connection, perftest's own address vectors: every packet 184.
    ok = ok and all(set(c) == {184} for c in classes.values())
    ok = ok and count(True, True, 184) >= 50
else:
    # perftest -R also makes a connection of its own to exchange its
    # parameters, without a TOS: each QP's packets share one traffic class,
    # 0 or 184; the test's 50 SENDs (and RC's ACKs) go with 184, and so do
    # the test id's MADs (QP 1) both ways: REQ and REP, or SIDR REQ and SIDR
    # REP (the passive side took the SIDR REQ packet's traffic class).
    ok = ok and all(len(c) == 1 and set(c) <= {0, 184}
                    for (a, qp), c in classes.items() if qp != 1)
    ok = ok and count(True, True, 184) >= 50
    ok = ok and (conn == "UD" or count(False, True, 184) >= 1)
    ok = ok and count(True, False, 184) >= 1 and count(False, False, 184) >= 1
if not ok:
    print(f"FAIL: {name}: not traffic class 184 and TTL {want_ttl} where expected")
sys.exit(0 if ok else 1)
PY
}

ipv4_a="::ffff:198\.51\.100\.1" ipv4_b="::ffff:198\.51\.100\.2"
run_case ud_ipv4 UD "$ipv4_a" "$ipv4_b" 255 --tclass=184
run_case ud_ipv6 UD "fe80::1" "fe80::2" 255 --tclass=184
run_case rc_ipv4 RC "$ipv4_a" "$ipv4_b" 255 --tclass=184
run_case rc_rdma_cm RC cm cm 64 -R --tos=184
run_case ud_rdma_cm UD cm cm 64 -R --tos=184
[ $failed -eq 0 ] || exit 1
echo PASS
