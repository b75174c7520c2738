#!/bin/bash
# An rdma_cm program pair across two hosts (the network namespaces of
# tests/common/two_hosts.sh, each with its own daemon): the server on host A,
# the client on host B, connecting through CM MADs over RoCE v2 (docs/rdmacm.md,
# "Across hosts"). @A@ and @B@ in the commands stand for the hosts' addresses
# (the client starts once an id of host A listens or has joined a group). Passes
# when both exit 0, the client's output matches EXPECT_REGEX and both
# devices sent and received CM MADs (the connection went over the wire).
#
# usage: two_hosts_cm_pair.sh SOFTVERBS_CLI EXPECT_REGEX -- SERVER ARGS... -- CLIENT ARGS...
# CM_RACE_RETRIES=N: as in run_cm_pair.sh (perftest -R's second listen).
# SERVER_RUNS_ON=1: as in run_cm_pair.sh (the server is stopped after the client).
# READY_TCP_PORT=N: as in run_cm_pair.sh (the server's TCP control port).
# TH_DAEMON_ENV_A / _B: the daemons' environment (tests/common/two_hosts.sh),
#   e.g. SOFTVERBS_ROCE_FAULTS=cm_drop=rep to lose a CM message.
# MULTICAST=1: the pair talks through a multicast group, not a connection:
#   host A's device must have received packets to the group (instead of the
#   CM MADs both devices must otherwise have sent and received).
# CHECK_CM="a.resent b.mras_received ...": each of these counters of that
#   host's connection manager (softverbs status: "cm") must be above 0.
set -u
source "$(dirname "$0")/../../common/two_hosts.sh"
cli=$1 expect=$2
shift 2
[ "$1" = "--" ] && shift
server_cmd=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  arg=${1//@A@/$TH_ADDR_A}
  server_cmd+=("${arg//@B@/$TH_ADDR_B}")
  shift
done
shift
client_cmd=()
for arg in "$@"; do
  arg=${arg//@A@/$TH_ADDR_A}
  client_cmd+=("${arg//@B@/$TH_ADDR_B}")
done
th_setup "$cli"

listening() {
  if [ -n "${READY_TCP_PORT:-}" ]; then  # as in run_cm_pair.sh, inside host A
    th_exec a cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
      grep -qE "^ *[0-9]+: [0-9A-F]+:$(printf '%04X' "$READY_TCP_PORT") [0-9A-F]+:0000 0A"
    return
  fi
  th_exec a "$cli" status --json 2>/dev/null | python3 -c '
import json, sys
ids = json.load(sys.stdin).get("cm_ids", [])
sys.exit(0 if any(i["state"] == "LISTEN" or i["groups"] > 0 for i in ids) else 1)'
}

run_pair() {
  th_run a timeout 60 "${server_cmd[@]}" >"$TH_DIR/server.log" 2>&1 &
  server=$!
  for _ in $(seq 200); do
    listening && break
    sleep 0.05
  done
  th_run b timeout 60 "${client_cmd[@]}" >"$TH_DIR/client.log" 2>&1
  client_rc=$?
}
# Stops the server: $server is the shell that started it, and the program
# itself runs inside host A's namespace under it (ip netns exec, softverbs
# run, timeout), so it is found there by name. Host A's daemon is another
# name and stays.
stop_server() {
  kill $server 2>/dev/null
  local name pid
  name=$(basename "${server_cmd[0]}")
  for pid in $(ip netns pids "$TH_NS_A" 2>/dev/null); do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "${name:0:15}" ] && kill "$pid" 2>/dev/null
  done
  wait $server 2>/dev/null
}
retries=${CM_RACE_RETRIES:-0}
run_pair
while [ $client_rc -ne 0 ] && [ "$retries" -gt 0 ] &&
  grep -qE "RDMA_CM_EVENT_(REJECTED|UNREACHABLE)" "$TH_DIR/client.log"; do
  echo "--- the client connected before the server listened again (perftest's race); run again:"
  cat "$TH_DIR/client.log"
  stop_server
  for _ in $(seq 100); do
    listening || break
    sleep 0.05
  done
  retries=$((retries - 1))
  run_pair
done
if [ -n "${SERVER_RUNS_ON:-}" ]; then
  # A server that does not exit by itself (cmtime): stopped once the client
  # is done; only the client's status counts.
  stop_server
  server_rc=0
else
  wait $server
  server_rc=$?
fi
echo "--- server on host a (rc=$server_rc): ${server_cmd[*]}"; cat "$TH_DIR/server.log"
echo "--- client on host b (rc=$client_rc): ${client_cmd[*]}"; cat "$TH_DIR/client.log"
if [ -n "${MULTICAST:-}" ]; then
  th_exec a "$cli" status --json | python3 -c '
import json, sys
m = json.load(sys.stdin)["roce"]["multicast"]
print("host a: multicast packets received %d" % m["received"])
sys.exit(0 if m["received"] > 0 else 1)' || { echo "FAIL: host a received nothing through its group socket"; exit 1; }
fi
for h in a b; do
  [ -n "${MULTICAST:-}" ] && break
  th_exec $h "$cli" status --json | python3 -c '
import json, sys
r = json.load(sys.stdin)["roce"]
print("host %s: CM MADs sent %d, received %d" % (sys.argv[1], r["cm_mads_sent"], r["cm_mads_received"]))
sys.exit(0 if r["cm_mads_sent"] > 0 and r["cm_mads_received"] > 0 else 1)' $h ||
    { echo "FAIL: host $h did not both send and receive CM MADs"; exit 1; }
done
for check in ${CHECK_CM:-}; do
  th_exec "${check%%.*}" "$cli" status --json | python3 -c '
import json, sys
host, name = sys.argv[1].split(".")
value = json.load(sys.stdin)["cm"][name]
print("host %s: cm.%s = %d" % (host, name, value))
sys.exit(0 if value > 0 else 1)' "$check" || { echo "FAIL: host ${check%%.*}'s CM did not count ${check#*.}"; exit 1; }
done
[ $server_rc -eq 0 ] && [ $client_rc -eq 0 ] || { echo "FAIL: a side failed"; exit 1; }
grep -qE "$expect" "$TH_DIR/client.log" || { echo "FAIL: client output lacks /$expect/"; exit 1; }
echo PASS
