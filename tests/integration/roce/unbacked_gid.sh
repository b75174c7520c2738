#!/bin/bash
# A send from a source GID no interface address backs: the port's default
# GID (fe80::/64 + EUI-64 of the MAC, as rxe lists it) on a link that does
# not have that link-local address (the test namespaces turn address
# generation off). A NIC would send from it anyway; the device cannot (its
# packets leave through a socket bound to an interface address), so they are
# lost - and the daemon must say so on its log, once, with what to do, and
# count them (status: roce.send_failures), not lose them in silence.
#
# usage: unbacked_gid.sh SOFTVERBS_CLI
set -u
cli=$1
command -v ib_send_bw >/dev/null || { echo "SKIP: ib_send_bw is not installed (perftest)"; exit 77; }
source "$(dirname "$0")/../../common/two_hosts.sh"
th_setup "$cli"
# The default GID's RoCE v2 index on host B, and host A's IPv4 one.
index_of() {  # HOST REGEX
  th_run "$1" ibv_devinfo -v |
    sed -nE "s/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]*$2, RoCE v2$/\1/p" | head -1
}
mac=$(ip -n "$TH_NS_B" link show "$TH_IF_B" | awk '/link\/ether/ {print $2}')
ga=$(index_of a "fe80::[0-9a-f:]+")  # A's default GID, also unbacked: only B sends
gb=$(index_of b "fe80::[0-9a-f]+:[0-9a-f]+ff:fe[0-9a-f]+:[0-9a-f]+")
[ -n "$gb" ] && [ -n "$ga" ] || { echo "FAIL: no default RoCE v2 GID (MAC $mac)"; th_run b ibv_devinfo -v; exit 1; }
port=$(th_free_port a)
th_run a timeout 10 ib_send_bw -d softverbs0 -c UD -x "$ga" -n 20 -s 64 -p "$port" >"$TH_DIR/server.log" 2>&1 &
server=$!
th_wait_listen a "$port" || { echo "FAIL: the server did not listen"; exit 1; }
th_run b timeout 10 ib_send_bw -d softverbs0 -c UD -x "$gb" -n 20 -s 64 -p "$port" "$TH_ADDR_A" \
  >"$TH_DIR/client.log" 2>&1
# The server waits for SENDs that never come, and the client for the
# server at the end: both end by their timeouts (the lost packets are
# counted by then).
kill $server 2>/dev/null
wait $server 2>/dev/null
failures=$(th_exec b "$cli" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["roce"]["send_failures"])')
said=$(grep -c "no network carrier for source GID fe80:" "$TH_DIR/b/softverbsd.log")
echo "host B: $failures packets without a carrier; said $said time(s):"
grep "no network carrier" "$TH_DIR/b/softverbsd.log"
[ "$failures" -ge 20 ] || { echo "FAIL: the 20 SENDs were not counted as lost"; exit 1; }
[ "$said" -eq 1 ] || { echo "FAIL: the daemon's log said it $said times, not once"; cat "$TH_DIR/b/softverbsd.log"; exit 1; }
echo PASS
