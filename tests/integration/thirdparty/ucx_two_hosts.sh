#!/bin/bash
# UCX between two hosts (the network namespaces of tests/common/two_hosts.sh,
# each with its own daemon): ucx_perftest pairs, server on host A, client on
# host B, over RoCE v2 on the veth pair. Each case must finish (exit 0, a
# "Final:" line) and its packets must have crossed the wire (host B's
# device counters).
#   - ud_verbs am_lat (UCT): UCX's UD transport drops every packet whose
#     destination address it does not find in the GRH, where it looks as the
#     completion's sl says (ud_receive.h); with sl 0 it looked for an IPv6
#     address in an IPv4 packet's header and the pair died of "UD endpoint
#     ... unhandled timeout error".
#   - rc_verbs am_lat (UCT).
#   - tag_lat (UCP, UCX_TLS=ud_verbs,self): UCP's wire-up over UD, as an MPI
#     job's first messages.
#
# usage: ucx_two_hosts.sh SOFTVERBS_CLI
set -u
cli=$1
if ! command -v ucx_perftest >/dev/null; then
  echo "SKIP: ucx_perftest is not installed (Debian package ucx-utils)"
  exit 77
fi
source "$(dirname "$0")/../../common/two_hosts.sh"
th_setup "$cli"

wire_packets() {  # packets host B's device has sent and received, as "sent received"
  th_exec b "$cli" status --json | python3 -c '
import json, sys
t = json.load(sys.stdin)["roce"]["totals"]
print(t["packets_sent"], t["packets_received"])'
}

failed=0
run_case() {  # run_case NAME ENV -- PERFTEST ARGS...
  local name=$1 env=$2
  shift 3
  local port before after
  port=$(th_free_port a)
  read -r -a before <<<"$(wire_packets)"
  th_run a env $env timeout -k 5 60 ucx_perftest -p "$port" "$@" >"$TH_DIR/$name.server.log" 2>&1 &
  local server=$!
  if ! th_wait_listen a "$port"; then
    echo "FAIL: $name: the server never listened"
    cat "$TH_DIR/$name.server.log"
    failed=1
    kill $server 2>/dev/null
    wait $server 2>/dev/null
    return
  fi
  th_run b env $env timeout -k 5 60 ucx_perftest "$TH_ADDR_A" -p "$port" "$@" \
    >"$TH_DIR/$name.client.log" 2>&1
  local client_rc=$?
  wait $server
  local server_rc=$?
  read -r -a after <<<"$(wire_packets)"
  local sent=$((after[0] - before[0])) received=$((after[1] - before[1]))
  if [ $client_rc -ne 0 ] || [ $server_rc -ne 0 ] || ! grep -q "^Final:" "$TH_DIR/$name.client.log"; then
    echo "FAIL: $name: client exit $client_rc, server exit $server_rc"
    echo "--- client"; cat "$TH_DIR/$name.client.log"
    echo "--- server"; cat "$TH_DIR/$name.server.log"
    failed=1
    return
  fi
  if [ $sent -le 0 ] || [ $received -le 0 ]; then
    echo "FAIL: $name: host B's device sent $sent and received $received packets: not over the wire"
    failed=1
    return
  fi
  echo "$name: $(grep '^Final:' "$TH_DIR/$name.client.log"); host B sent $sent, received $received packets"
}

uct=(-d softverbs0:1 -n 1000 -s 8)
run_case ud_verbs_am_lat "UCX_NET_DEVICES=softverbs0:1" -- -x ud_verbs -t am_lat "${uct[@]}"
run_case rc_verbs_am_lat "UCX_NET_DEVICES=softverbs0:1" -- -x rc_verbs -t am_lat "${uct[@]}"
run_case ucp_tag_lat_ud "UCX_NET_DEVICES=softverbs0:1 UCX_TLS=ud_verbs,self" -- -t tag_lat -n 1000 -s 8
[ $failed -eq 0 ] || exit 1
echo PASS
