# Sourced by tests that run one host's programs over the network transport
# (docs/roce.md, "Wire loopback"): a network namespace of their own whose one
# interface is one end of a veth pair (both ends in it) with 198.51.100.1/24
# (TEST-NET-2) and its link-local address; the device runs there with
# SOFTVERBS_ROCE_LOOPBACK=1, so that QPs between the host's own GIDs
# exchange RoCE v2 packets through the kernel's UDP stack, to the
# namespace's own addresses: nothing leaves it. One namespace per test, so
# that no two daemons bind UDP 4791 on the same addresses.
#
#   wl_setup CLI          makes the namespace (SKIP, 77, without permission);
#                         cleaned up at exit
#   wl_exec CMD...        runs CMD in it, with the device's environment
#   wl_packets_sent       how many RoCE packets the device has sent

wl_exec() {
  ip netns exec "$WL_NS" env SOFTVERBS_RUNTIME_DIR="$WL_RUNTIME" SOFTVERBS_ROCE_LOOPBACK=1 \
    SOFTVERBS_IDLE_TIMEOUT=5 "$@"
}

wl_setup() {
  WL_CLI=$1
  WL_NS="svloop$$"
  ip netns add "$WL_NS" 2>/dev/null ||
    { echo "SKIP: cannot make a network namespace (not root?)"; exit 77; }
  WL_RUNTIME=$(mktemp -d /tmp/softverbs-wire-loopback-XXXXXX)
  trap 'wl_exec "$WL_CLI" daemon stop >/dev/null 2>&1; ip netns del "$WL_NS"; rm -rf "$WL_RUNTIME"' EXIT
  ip -n "$WL_NS" link set lo up &&
    ip -n "$WL_NS" link add sv0 type veth peer name sv1 &&
    ip netns exec "$WL_NS" sysctl -qw net.ipv6.conf.sv0.accept_dad=0 &&
    ip -n "$WL_NS" addr add 198.51.100.1/24 dev sv0 &&
    ip -n "$WL_NS" link set sv1 up && ip -n "$WL_NS" link set sv0 up ||
    { echo "FAIL: cannot set up the namespace's interface"; exit 1; }
  local _
  for _ in $(seq 50); do  # the link-local address, without DAD
    ip -n "$WL_NS" -6 addr show dev sv0 scope link | grep -q "inet6 fe80" && return 0
    sleep 0.1
  done
  echo "FAIL: no link-local address on the namespace's interface"
  exit 1
}

wl_packets_sent() {
  wl_exec "$WL_CLI" status --json 2>/dev/null | /usr/bin/python3 -c \
    'import json,sys; print(json.load(sys.stdin)["roce"]["totals"]["packets_sent"])' 2>/dev/null
}
