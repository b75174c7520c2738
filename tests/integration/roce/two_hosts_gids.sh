#!/bin/bash
# Each of two network-namespace hosts sees its own addresses in its port's
# GID table (the daemon reads them with getifaddrs, which is per namespace):
# ibv_devinfo -v on host A lists 198.51.100.1's GID and not 198.51.100.2's,
# and the other way round; the interface the port is bound to is the veth.
# usage: two_hosts_gids.sh SOFTVERBS_CLI
set -u
source "$(dirname "$0")/../../common/two_hosts.sh"
th_setup "$1"
ok=1
for h in a b; do
  if [ $h = a ]; then mine=$TH_ADDR_A theirs=$TH_ADDR_B ifc=$TH_IF_A; else mine=$TH_ADDR_B theirs=$TH_ADDR_A ifc=$TH_IF_B; fi
  out=$(th_run $h ibv_devinfo -v -d softverbs0 2>&1)
  echo "--- host $h"
  echo "$out" | grep -E "GID\[|link_layer|state:" 
  mine_gid=$(th_gid_of_ipv4 "$mine") theirs_gid=$(th_gid_of_ipv4 "$theirs")
  echo "$out" | grep -q "$mine_gid" || { echo "FAIL: host $h lacks its own GID $mine_gid"; ok=0; }
  echo "$out" | grep -q "$theirs_gid" && { echo "FAIL: host $h lists the other host's GID $theirs_gid"; ok=0; }
  echo "$out" | grep -q "::ffff:$mine, RoCE v2" || { echo "FAIL: host $h lacks ::ffff:$mine as a RoCE v2 GID"; ok=0; }
  # The default GID: fe80::/64 + the EUI-64 of this namespace's veth MAC.
  mac=$(th_exec $h cat "/sys/class/net/$ifc/address")
  IFS=: read -r m0 m1 m2 m3 m4 m5 <<<"$mac"
  want=$(printf 'fe80:0000:0000:0000:%02x%s:%sff:fe%s:%s%s' $((0x$m0 ^ 2)) "$m1" "$m2" "$m3" "$m4" "$m5")
  echo "$out" | grep -q "GID\[  0\]:.*$want, RoCE v1" || { echo "FAIL: host $h: GID[0] is not $want (MAC $mac)"; ok=0; }
done
[ $ok -eq 1 ] && echo "PASS" 
[ $ok -eq 1 ]
