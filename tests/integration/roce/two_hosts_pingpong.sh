#!/bin/bash
# A pingpong pair on the two network-namespace hosts of tests/common/two_hosts.sh.
#
#   same:  server and client both on host A, the client given A's own
#          address, so every GID is this host's: the pair must finish.
#   wire:  server on host A, client on host B: the pair talks RoCE v2 over
#          the veth pair through both devices' network transport and must
#          finish.
#   cross: server on host A, client on host B, and host A's device drops
#          every packet it sends (TH_DAEMON_ENV_A=SOFTVERBS_ROCE_FAULTS=drop=1,
#          set by the caller): a path to another host's GID must never reach
#          a local QP (before the fix the client "succeeded" talking to the
#          QP of the same number on its own host). The client must not print
#          its result line, must fail, and its output must match EXPECT (an
#          RC client: "transport retry counter exceeded",
#          IBV_WC_RETRY_EXC_ERR after timeout x retry_cnt).
#
# usage: two_hosts_pingpong.sh SOFTVERBS_CLI same|wire|cross EXPECT PROGRAM ARGS...
# PAIR_TIMEOUT: seconds each side may run (default 30).
# PAIR_FORBID: a regex the client's output must not match (e.g. a UD client's
#   "Failed status": its sends to the unreachable host complete successfully).
set -u
source "$(dirname "$0")/../../common/two_hosts.sh"
th_setup "$1"
mode=$2 expect=$3
shift 3
limit=${PAIR_TIMEOUT:-30}
client_host=b
[ "$mode" = same ] && client_host=a
[ "$mode" = cross ] && [ -z "${TH_DAEMON_ENV_A:-}" ] && { echo "FAIL: cross needs TH_DAEMON_ENV_A"; exit 1; }
port=$(th_free_port a)
th_run a timeout "$limit" stdbuf -oL "$@" -p "$port" >"$TH_DIR/server.log" 2>&1 &
server=$!
th_wait_listen a "$port" || { echo "FAIL: server did not listen"; cat "$TH_DIR/server.log"; exit 1; }
start=$(date +%s%N)
th_run $client_host timeout "$limit" stdbuf -oL "$@" -p "$port" "$TH_ADDR_A" >"$TH_DIR/client.log" 2>&1
client_rc=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
[ "$mode" = cross ] && kill "$server" 2>/dev/null
wait "$server"
server_rc=$?
echo "--- server on host a (rc=$server_rc)"; cat "$TH_DIR/server.log"
echo "--- client on host $client_host (rc=$client_rc, ${elapsed_ms} ms)"; cat "$TH_DIR/client.log"
grep -qE "$expect" "$TH_DIR/client.log" || { echo "FAIL: client output lacks /$expect/"; exit 1; }
if [ "$mode" != cross ]; then
  [ $client_rc -eq 0 ] && [ $server_rc -eq 0 ] || { echo "FAIL: a side failed"; exit 1; }
else
  if grep -q "iters in" "$TH_DIR/client.log"; then
    echo "FAIL: the client finished its iterations: it talked to a QP on its own host"
    exit 1
  fi
  [ $client_rc -ne 0 ] || { echo "FAIL: the client exited 0"; exit 1; }
fi
if [ -n "${PAIR_FORBID:-}" ] && grep -qE "$PAIR_FORBID" "$TH_DIR/client.log"; then
  echo "FAIL: client output matches /$PAIR_FORBID/"
  exit 1
fi
echo PASS
