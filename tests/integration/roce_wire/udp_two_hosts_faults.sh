#!/usr/bin/env bash
# The fault injector in front of the UDP carrier, between two hosts (network
# namespaces, tests/common/two_hosts.sh): host A sends every test frame with
# SOFTVERBS_ROCE_FAULTS set; host B knows from the same setting which frames
# must be missing (dropped), arrive twice (duplicated) or be refused by the
# ICRC check (corrupted), since fates follow the seed and the packet number
# only, and checks exactly that; reordered and delayed frames arrive once.
#
#   udp_two_hosts_faults.sh SOFTVERBS_CLI ROCE_UDP_PEER WORK_DIR FAULTS
#
# SKIP (77) without ip netns permission.
set -u
CLI=$1 PEER=$2 WORK=$3 FAULTS=$4
# shellcheck source=../../common/two_hosts.sh
source "$(dirname "$0")/../../common/two_hosts.sh"
th_setup "$CLI"
# The carriers under test bind UDP 4791 themselves: the devices, whose QP1
# holds that port from their daemon's start, step aside.
th_exec a "$CLI" daemon stop >/dev/null 2>&1
th_exec b "$CLI" daemon stop >/dev/null 2>&1
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1

th_exec b "$PEER" recv "$TH_ADDR_B" "$TH_LL_B" "$TH_IF_B" "$WORK/ready" 30 "$FAULTS" >"$WORK/recv.out" 2>&1 &
recv_pid=$!
for _ in $(seq 200); do
  [ -e "$WORK/ready" ] && break
  sleep 0.05
done
[ -e "$WORK/ready" ] || { echo "FAIL: the receiver did not bind"; cat "$WORK/recv.out"; exit 1; }

SOFTVERBS_ROCE_FAULTS=$FAULTS th_exec a "$PEER" send "$TH_ADDR_A" "$TH_LL_A" "$TH_IF_A" \
  "$TH_ADDR_B" "$TH_LL_B" "$WORK/sent.tsv" || { echo "FAIL: the sender failed"; exit 1; }
rc=0
wait "$recv_pid" || rc=1
cat "$WORK/recv.out"
# A bad setting is refused with its reason, and nothing is sent.
out=$(SOFTVERBS_ROCE_FAULTS="drop=2" th_exec a "$PEER" send "$TH_ADDR_A" "$TH_LL_A" "$TH_IF_A" \
  "$TH_ADDR_B" "$TH_LL_B" "$WORK/bad.tsv" 2>&1) && { echo "FAIL: drop=2 was accepted"; rc=1; }
echo "$out" | grep -q "SOFTVERBS_ROCE_FAULTS: drop=2: not a fraction between 0 and 1" ||
  { echo "FAIL: drop=2 refused without its reason: $out"; rc=1; }
[ $rc = 0 ] && echo "OK: every fault of '$FAULTS' seen at host B exactly as the seed says"
exit $rc
