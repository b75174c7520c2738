# Two test "hosts" on one machine: two network namespaces joined by a veth
# pair, each with its own softverbs daemon and runtime directory. Sourced by
# tests (bash); no traffic leaves the machine.
#
#   host A: namespace $TH_NS_A, interface $TH_IF_A, 198.51.100.1/24, fe80::1/64
#   host B: namespace $TH_NS_B, interface $TH_IF_B, 198.51.100.2/24, fe80::2/64
#
# Usage:
#   source tests/common/two_hosts.sh
#   th_setup /path/to/softverbs-cli       # exits 77 (ctest SKIP) if namespaces are not permitted
#   th_run a ibv_devinfo -v               # a command on host A, under `softverbs run`
#   th_exec b ip addr                     # a command in host B's namespace, as is
#   (cleanup runs from an EXIT trap: daemons stopped, the processes the test
#    started there killed by pid, namespaces deleted)
#
# Unprivileged users get the same with `unshare --user --map-root-user --net`
# per host plus a veth pair made from the parent user namespace; the tests use
# `ip netns` (CI runs as root) and skip otherwise. See docs/roce.md.

TH_ADDR_A=198.51.100.1
TH_ADDR_B=198.51.100.2
TH_LL_A=fe80::1
TH_LL_B=fe80::2

# The softverbs GID of an IPv4 address (IPv4-mapped IPv6, as ibv_devinfo -v
# prints it).
th_gid_of_ipv4() {
  local IFS=.
  # shellcheck disable=SC2086
  set -- $1
  printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$1" "$2" "$3" "$4"
}

th_skip() {
  echo "SKIP: $*"
  exit 77
}

th_cleanup() {
  local h ns pids
  for h in a b; do
    ns=$(th_ns "$h")
    [ -n "$ns" ] || continue
    if ip netns list 2>/dev/null | grep -qw "$ns"; then
      th_exec "$h" "$TH_CLI" daemon stop >/dev/null 2>&1
      # Whatever the test started in the namespace and left running.
      pids=$(ip netns pids "$ns" 2>/dev/null)
      # shellcheck disable=SC2086
      [ -n "$pids" ] && kill $pids 2>/dev/null
      ip netns del "$ns" 2>/dev/null
    fi
  done
  [ -n "${TH_DIR:-}" ] && rm -rf "$TH_DIR"
}

th_ns() {
  case $1 in
    a) echo "${TH_NS_A:-}" ;;
    b) echo "${TH_NS_B:-}" ;;
    *) echo "two_hosts: unknown host '$1'" >&2; return 1 ;;
  esac
}

# th_exec HOST CMD...: CMD in HOST's namespace with HOST's runtime directory.
th_exec() {
  local h=$1
  shift
  ip netns exec "$(th_ns "$h")" env SOFTVERBS_RUNTIME_DIR="$TH_DIR/$h" \
    SOFTVERBS_IDLE_TIMEOUT="${SOFTVERBS_IDLE_TIMEOUT:-30}" "$@"
}

# th_pgrep HOST REGEX: the processes in HOST's namespace whose command line
# (arguments joined by spaces) matches REGEX, one PID a line. Only that
# namespace: another test may run the same program with the same arguments
# in namespaces of its own.
th_pgrep() {
  local pid cmd
  for pid in $(ip netns pids "$(th_ns "$1")" 2>/dev/null); do
    cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || continue
    [[ "$cmd" =~ $2 ]] && echo "$pid"
  done
  return 0
}

# th_run HOST PROGRAM ARGS...: PROGRAM on HOST's softverbs device.
th_run() {
  local h=$1
  shift
  th_exec "$h" "$TH_CLI" run -- "$@"
}

# th_setup CLI: makes both hosts and starts their daemons.
th_setup() {
  TH_CLI=$1
  [ -x "$TH_CLI" ] || { echo "two_hosts: no softverbs CLI at '$TH_CLI'" >&2; exit 1; }
  command -v ip >/dev/null || th_skip "no ip(8) (iproute2)"
  local tag="sv$$"
  TH_NS_A="${tag}a" TH_NS_B="${tag}b"
  TH_IF_A="${tag}a" TH_IF_B="${tag}b"
  trap th_cleanup EXIT
  ip netns add "$TH_NS_A" 2>/dev/null || th_skip "ip netns add is not permitted here (needs root or CAP_SYS_ADMIN)"
  ip netns add "$TH_NS_B" || th_skip "ip netns add failed"
  TH_DIR=$(mktemp -d /tmp/softverbs-2h-XXXXXX)
  mkdir -m 0700 "$TH_DIR/a" "$TH_DIR/b"
  ip link add "$TH_IF_A" netns "$TH_NS_A" type veth peer name "$TH_IF_B" netns "$TH_NS_B" ||
    th_skip "cannot create a veth pair"
  local h ifc addr ll
  for h in a b; do
    if [ $h = a ]; then ifc=$TH_IF_A addr=$TH_ADDR_A ll=$TH_LL_A; else ifc=$TH_IF_B addr=$TH_ADDR_B ll=$TH_LL_B; fi
    # No duplicate address detection: the link-local address is usable at once.
    th_exec $h sysctl -qw "net.ipv6.conf.$ifc.accept_dad=0" "net.ipv6.conf.$ifc.addr_gen_mode=1" || true
    th_exec $h ip link set lo up
    th_exec $h ip addr add "$addr/24" dev "$ifc"
    th_exec $h ip addr add "$ll/64" dev "$ifc" nodad
    # TH_MTU: the veth pair's MTU (default the kernel's 1500).
    [ -n "${TH_MTU:-}" ] && th_exec $h ip link set "$ifc" mtu "$TH_MTU"
    th_exec $h ip link set "$ifc" up
  done
  # Both links up (carrier on both ends) before any daemon reads its interfaces.
  local i
  for i in $(seq 100); do
    ip -n "$TH_NS_A" link show "$TH_IF_A" | grep -q LOWER_UP &&
      ip -n "$TH_NS_B" link show "$TH_IF_B" | grep -q LOWER_UP && break
    sleep 0.1
  done
  ip -n "$TH_NS_A" link show "$TH_IF_A" | grep -q LOWER_UP || { echo "two_hosts: veth link is not up" >&2; exit 1; }
  # TH_DAEMON_ENV_A / _B: extra VAR=value words for that host's daemon
  # (e.g. SOFTVERBS_ROCE_FAULTS, docs/roce.md).
  local extra
  for h in a b; do
    if [ $h = a ]; then extra=${TH_DAEMON_ENV_A:-}; else extra=${TH_DAEMON_ENV_B:-}; fi
    # shellcheck disable=SC2086
    # Multicast groups span the two hosts (the veth pair is theirs alone).
    th_exec $h env SOFTVERBS_ROCE_MCAST=link $extra "$TH_CLI" daemon start >/dev/null ||
      { echo "two_hosts: daemon of host $h did not start" >&2; exit 1; }
  done
}

# th_free_port HOST: a free TCP port on HOST.
th_free_port() {
  th_exec "$1" /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("0.0.0.0",0)); print(s.getsockname()[1])'
}

# th_wait_listen HOST PORT: waits (up to 10 s) until something listens on PORT in HOST.
th_wait_listen() {
  local hex i
  hex=$(printf '%04X' "$2")
  for i in $(seq 200); do
    th_exec "$1" grep -qE "^ *[0-9]+: [0-9A-F]+:$hex [0-9A-F]+:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}
