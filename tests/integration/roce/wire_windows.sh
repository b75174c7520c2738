#!/bin/bash
# Memory windows across two hosts (wire_windows.cc): binds in the server's
# network send queue, WRITEs through both windows, SEND with invalidate and
# the responder's NAK for the invalidated key.
#
# usage: wire_windows.sh SOFTVERBS_CLI WIRE_WINDOWS
set -u
source "$(dirname "$0")/../../common/two_hosts.sh"
cli=$1 program=$2
th_setup "$cli"
port=$(th_free_port a)
th_run a timeout 60 "$program" server "$port" >"$TH_DIR/server.log" 2>&1 &
server=$!
th_wait_listen a "$port" || { echo "FAIL: server did not listen"; cat "$TH_DIR/server.log"; exit 1; }
th_run b timeout 60 "$program" client "$TH_ADDR_A" "$port" >"$TH_DIR/client.log" 2>&1
client_rc=$?
wait "$server"
server_rc=$?
echo "--- server on host a (rc=$server_rc)"; cat "$TH_DIR/server.log"
echo "--- client on host b (rc=$client_rc)"; cat "$TH_DIR/client.log"
[ $client_rc -eq 0 ] && [ $server_rc -eq 0 ] || { echo "FAIL: a side failed"; exit 1; }
grep -qx OK "$TH_DIR/client.log" || { echo "FAIL: the client did not say OK"; exit 1; }
echo PASS
