#!/bin/bash
# Runs one case program over the network transport (docs/roce.md, "Wire
# loopback"): in a network namespace of its own with the device in
# SOFTVERBS_ROCE_LOOPBACK=1 mode, so that its QPs, connected through the
# host's own RoCE v2 GID, exchange RoCE v2 packets through the kernel's UDP
# stack. The program must pass, and the device must have sent at least
# MIN_PACKETS packets (its traffic did go over the transport).
#
#   run_wire_loopback.sh SOFTVERBS_CLI MIN_PACKETS PROGRAM ARGS...
#
# SKIP (77) without permission to make a network namespace.
set -u
cli=$1 min=$2
shift 2
# shellcheck source=../../common/wire_loopback.sh
source "$(dirname "$0")/../../common/wire_loopback.sh"
wl_setup "$cli"
wl_exec timeout 100 "$cli" run -- "$@"
rc=$?
sent=$(wl_packets_sent)
echo "the device's network transport sent ${sent:-no} packets"
[ "${sent:-0}" -ge "$min" ] ||
  { echo "FAIL: the program's traffic did not go over the network transport (< $min packets)"; exit 1; }
exit $rc
