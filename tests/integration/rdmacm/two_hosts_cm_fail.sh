#!/bin/bash
# rdma_cm's failures across two hosts (tests/common/two_hosts.sh): rping on
# host B connects to host A where
#   reject:      nobody listens on the port - A's CM answers the REQ with a
#                REJ (invalid service id, 8): RDMA_CM_EVENT_REJECTED;
#   unreachable: no device answers (A's daemon is stopped, so its QP1 is
#                gone) - the REQ is sent again each CM response timeout and
#                then RDMA_CM_EVENT_UNREACHABLE with -ETIMEDOUT (-110).
# The client must fail with that event within LIMIT seconds (a hang check:
# the REJ comes after the CM's 1 s listen grace, UNREACHABLE after 4 x 1.07 s).
#
# usage: two_hosts_cm_fail.sh SOFTVERBS_CLI reject|unreachable
set -u
source "$(dirname "$0")/../../common/two_hosts.sh"
cli=$1 mode=$2
th_setup "$cli"
case $mode in
  reject) expect="RDMA_CM_EVENT_REJECTED, error 8" limit=5 ;;
  unreachable) expect="RDMA_CM_EVENT_UNREACHABLE, error -110" limit=15
    th_exec a "$cli" daemon stop >/dev/null 2>&1 ;;
  *) echo "usage: $0 CLI reject|unreachable"; exit 2 ;;
esac
start=$(date +%s%N)
th_run b timeout 60 rping -c -v -C 1 -a "$TH_ADDR_A" -p 7999 >"$TH_DIR/client.log" 2>&1
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
echo "--- client on host b (rc=$rc, $ms ms)"; cat "$TH_DIR/client.log"
[ $rc -ne 0 ] || { echo "FAIL: the connect succeeded"; exit 1; }
grep -q "$expect" "$TH_DIR/client.log" || { echo "FAIL: no '$expect'"; exit 1; }
[ $ms -lt $((limit * 1000)) ] || { echo "FAIL: took $ms ms (more than $limit s)"; exit 1; }
echo PASS
