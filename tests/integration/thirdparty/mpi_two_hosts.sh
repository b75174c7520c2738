#!/bin/bash
# Open MPI between two hosts (the network namespaces of
# tests/common/two_hosts.sh, each with its own daemon): mpirun on host A
# starts rank 0 there and rank 1 on host B through an rsh agent that runs
# the command in host B's namespace with host B's device (as ssh would on
# another machine), pml ucx over rc_verbs/ud_verbs on softverbs0. The
# ping-pong must check every payload and report, UCX must have chosen
# rc_verbs on softverbs0 for the peer, and host B's device must have carried
# the traffic (its RoCE counters).
#
# usage: mpi_two_hosts.sh SOFTVERBS_CLI MPI_PINGPONG
set -u
cli=$1 pingpong=$2
if ! command -v mpirun >/dev/null || [ ! -x "$pingpong" ]; then
  echo "SKIP: mpirun (openmpi-bin) or the ping-pong program (libopenmpi-dev) is missing"
  exit 77
fi
source "$(dirname "$0")/../../common/two_hosts.sh"
th_setup "$cli"

wire_packets() {  # packets host B's device has sent and received, as "sent received"
  th_exec b "$cli" status --json | python3 -c '
import json, sys
t = json.load(sys.stdin)["roce"]["totals"]
print(t["packets_sent"], t["packets_received"])'
}

# The rsh agent: `agent HOST COMMAND...` runs COMMAND in HOST's namespace
# with that host's device (softverbs env) and leaves a mark per host.
agent=$TH_DIR/netns_rsh
cat >"$agent" <<AGENT
#!/bin/bash
host=\$1
shift
case \$host in
  $TH_ADDR_A) h=a ns=$TH_NS_A ;;
  $TH_ADDR_B) h=b ns=$TH_NS_B ;;
  *) echo "netns_rsh: unknown host \$host" >&2; exit 1 ;;
esac
touch "$TH_DIR/agent_used_\$h"
exec ip netns exec "\$ns" env SOFTVERBS_RUNTIME_DIR="$TH_DIR/\$h" \\
  SOFTVERBS_IDLE_TIMEOUT="\${SOFTVERBS_IDLE_TIMEOUT:-30}" \\
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \\
  bash -c 'eval "\$("$cli" env)"; eval "\$*"' netns_rsh "\$@"
AGENT
chmod +x "$agent"

read -r -a before <<<"$(wire_packets)"
th_run a env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  timeout -k 5 180 mpirun --allow-run-as-root -np 2 --host "$TH_ADDR_A:1,$TH_ADDR_B:1" \
  --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1 \
  --mca oob_tcp_if_include 198.51.100.0/24 \
  --mca pml ucx --mca btl '^openib,uct' \
  -x UCX_NET_DEVICES=softverbs0:1 -x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_LOG_LEVEL=info \
  "$pingpong" 200 20 >"$TH_DIR/mpirun.log" 2>&1
rc=$?
read -r -a after <<<"$(wire_packets)"
sent=$((after[0] - before[0])) received=$((after[1] - before[1]))
cat "$TH_DIR/mpirun.log"
fail() { echo "FAIL: $*"; exit 1; }
[ $rc -eq 0 ] || fail "mpirun exited $rc"
[ -e "$TH_DIR/agent_used_b" ] || fail "rank 1 was not started on host B"
grep -Eq 'mpi_pingpong: latency [0-9.]+ us' "$TH_DIR/mpirun.log" || fail "no latency line"
grep -Eq 'mpi_pingpong: bandwidth [0-9.]+ MiB/s' "$TH_DIR/mpirun.log" || fail "no bandwidth line"
grep -Eq 'ep_cfg\[[0-9]+\]: tag\([^)]*rc_verbs/softverbs0:1' "$TH_DIR/mpirun.log" ||
  fail "UCX did not choose rc_verbs on softverbs0"
# 200 8-byte and 20 1 MiB round trips: thousands of packets at least.
[ $sent -gt 1000 ] && [ $received -gt 1000 ] ||
  fail "host B's device sent $sent and received $received packets: not over the wire"
echo "host B sent $sent, received $received packets"
echo PASS
