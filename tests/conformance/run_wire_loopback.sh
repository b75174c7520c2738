#!/bin/bash
# rdma-core's suite with every path over the network transport (docs/roce.md,
# "Wire loopback"): in a network namespace of its own whose one interface is
# one end of a veth pair (both ends in it) with 198.51.100.1/24 (TEST-NET-2)
# and its link-local address, the device runs with SOFTVERBS_ROCE_LOOPBACK=1,
# so that QPs between the host's own GIDs exchange RoCE v2 packets through
# the kernel's UDP stack (to the namespace's own addresses: nothing leaves
# it). The gate is the usual one, with the exclude list for this mode; and
# the device's network transport must have carried the suite's traffic.
#
#   run_wire_loopback.sh SOFTVERBS_CLI SOURCE_DIR
#
# SKIP (77) without permission to make a network namespace.
set -u
cli=$1 src=$2
# shellcheck source=../common/wire_loopback.sh
source "$src/../common/wire_loopback.sh"
wl_setup "$cli"
wl_exec /usr/bin/python3 "$src/run_rdma_core_tests.py" --cli "$cli" \
  --excludes "$src/rdma_core_excludes_wire_loopback.txt" --timeout 60
rc=$?
sent=$(wl_packets_sent)
echo "the device's network transport sent ${sent:-no} packets"
[ "${sent:-0}" -gt 1000 ] || { echo "FAIL: the suite's traffic did not go over the network transport"; exit 1; }
exit $rc
