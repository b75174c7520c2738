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
ns="svloop$$"
ip netns add "$ns" 2>/dev/null || { echo "SKIP: cannot make a network namespace (not root?)"; exit 77; }
runtime=$(mktemp -d /tmp/softverbs-wire-loopback-XXXXXX)
in_ns() {
  ip netns exec "$ns" env SOFTVERBS_RUNTIME_DIR="$runtime" SOFTVERBS_ROCE_LOOPBACK=1 \
    SOFTVERBS_IDLE_TIMEOUT=5 "$@"
}
trap 'in_ns "$cli" daemon stop >/dev/null 2>&1; ip netns del "$ns"; rm -rf "$runtime"' EXIT
ip -n "$ns" link set lo up &&
  ip -n "$ns" link add sv0 type veth peer name sv1 &&
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.sv0.accept_dad=0 &&
  ip -n "$ns" addr add 198.51.100.1/24 dev sv0 &&
  ip -n "$ns" link set sv1 up && ip -n "$ns" link set sv0 up ||
  { echo "FAIL: cannot set up the namespace's interface"; exit 1; }
for _ in $(seq 50); do  # the link-local address, without DAD
  ip -n "$ns" -6 addr show dev sv0 scope link | grep -q "inet6 fe80" && break
  sleep 0.1
done
in_ns /usr/bin/python3 "$src/run_rdma_core_tests.py" --cli "$cli" \
  --excludes "$src/rdma_core_excludes_wire_loopback.txt" --timeout 60
rc=$?
sent=$(in_ns "$cli" status --json 2>/dev/null | /usr/bin/python3 -c \
  'import json,sys; print(json.load(sys.stdin)["roce"]["totals"]["packets_sent"])' 2>/dev/null)
echo "the device's network transport sent ${sent:-no} packets"
[ "${sent:-0}" -gt 1000 ] || { echo "FAIL: the suite's traffic did not go over the network transport"; exit 1; }
exit $rc
