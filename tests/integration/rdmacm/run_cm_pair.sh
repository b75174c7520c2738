#!/bin/bash
# Runs one of Debian's unmodified rdma_cm programs as a server/client pair on
# softverbs, each under `softverbs run`, in a private runtime directory (so
# rdma_cm ports are private too). The client starts once the daemon shows the
# server listening (or joined to a multicast group). Passes when both exit 0
# and the client's output matches EXPECT_REGEX.
#
# usage: run_cm_pair.sh SOFTVERBS_CLI EXPECT_REGEX -- SERVER ARGS... -- CLIENT ARGS...
# @HOST@ in the commands stands for this machine's first global IPv4 address
# (programs that, as on the kernel's rdma_cm, find no device for loopback:
# docs/rdmacm.md, "Addresses"); without one the test is skipped (77).
# @PORT@ in the commands and in READY_TCP_PORT stands for a free TCP port
# below the ephemeral range (tests/common/free_port.sh), for programs whose
# default control port lies inside it (fi_pingpong's 47592).
# Optional environment:
#   READY_TCP_PORT=N  the server is ready when a TCP socket listens on N (qperf's
#                     control port) rather than when an rdma_cm id listens
#   SERVER_RUNS_ON=1  the server does not exit by itself (cmtime, qperf): it is
#                     stopped once the client is done, and only the client's
#                     exit status counts.
#   CM_RACE_RETRIES=N perftest -R: the pair is run again (at most N times) when
#                     the client's data connection was REJECTED/UNREACHABLE.
#                     perftest's server listens a second time for the data
#                     connection after the rdma_cm exchange of parameters, and
#                     a client that connects first is refused (as by a kernel's
#                     rdma_cm); Debian's perftest 4.5 then retries through a
#                     destroyed id and crashes (fixed upstream in perftest
#                     3d9d8d0). Each retry is printed.
set -u
# shellcheck source=../../common/tcp_state.sh
source "$(dirname "$0")/../../common/tcp_state.sh"
cli=$1 expect=$2
shift 2
[ "$1" = "--" ] && shift
host_addr=
if [[ "$*" == *@HOST@* ]]; then
  host_addr=$(ip -o -4 addr show scope global 2>/dev/null | awk '{ sub("/.*", "", $4); print $4; exit }')
  [ -n "$host_addr" ] || { echo "SKIP: this machine has no global IPv4 address for @HOST@"; exit 77; }
fi
tcp_port=
if [[ "$* ${READY_TCP_PORT:-}" == *@PORT@* ]]; then
  # shellcheck source=../../common/free_port.sh
  source "$(dirname "$0")/../../common/free_port.sh"
  tcp_port=$(free_port)
  [ -n "${READY_TCP_PORT:-}" ] && READY_TCP_PORT=${READY_TCP_PORT//@PORT@/$tcp_port}
fi
substitute() { local a=${1//@HOST@/$host_addr}; printf '%s' "${a//@PORT@/$tcp_port}"; }
server_cmd=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do server_cmd+=("$(substitute "$1")"); shift; done
shift
client_cmd=()
for arg in "$@"; do client_cmd+=("$(substitute "$arg")"); done

runtime=$(mktemp -d /tmp/softverbs-cm-XXXXXX)
trap 'kill $server 2>/dev/null; "$cli" daemon stop >/dev/null 2>&1; rm -rf "$runtime"' EXIT
export SOFTVERBS_RUNTIME_DIR=$runtime
export SOFTVERBS_IDLE_TIMEOUT=5

ready() {  # an id listens, or has joined a group
  if [ -n "${READY_TCP_PORT:-}" ]; then
    tcp_in_state "$READY_TCP_PORT" listen
    return
  fi
  "$cli" status --json 2>/dev/null | python3 -c '
import json, sys
ids = json.load(sys.stdin).get("cm_ids", [])
sys.exit(0 if any(i["state"] == "LISTEN" or i["groups"] > 0 for i in ids) else 1)'
}

run_pair() {
  timeout 60 "$cli" run -- "${server_cmd[@]}" >"$runtime/server.log" 2>&1 &
  server=$!
  for _ in $(seq 200); do
    ready && break
    sleep 0.05
  done
  timeout 60 "$cli" run -- "${client_cmd[@]}" >"$runtime/client.log" 2>&1
  client_rc=$?
}
retries=${CM_RACE_RETRIES:-0}
run_pair
while [ $client_rc -ne 0 ] && [ "$retries" -gt 0 ] &&
  grep -qE "RDMA_CM_EVENT_(REJECTED|UNREACHABLE)" "$runtime/client.log"; do
  echo "--- the client connected before the server listened again (perftest's race); run again:"
  cat "$runtime/client.log"
  kill $server 2>/dev/null
  wait $server 2>/dev/null
  for _ in $(seq 100); do  # the dead server's listener is released
    ready || break
    sleep 0.05
  done
  retries=$((retries - 1))
  run_pair
done
if [ "${SERVER_RUNS_ON:-0}" = 1 ]; then
  sleep 0.5
  kill $server 2>/dev/null
  wait $server
  server_rc=0
else
  wait $server
  server_rc=$?
fi
echo "--- server (rc=$server_rc): ${server_cmd[*]}"; cat "$runtime/server.log"
echo "--- client (rc=$client_rc): ${client_cmd[*]}"; cat "$runtime/client.log"
[ $server_rc -eq 0 ] && [ $client_rc -eq 0 ] && grep -qE "$expect" "$runtime/client.log"
