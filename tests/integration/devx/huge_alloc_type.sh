#!/usr/bin/env bash
# libmlx5's MLX_{CQ,QP,SRQ}_ALLOC_TYPE=HUGE under the mlx5 personality
# (src/abi/ibverbs/mlx5_alloc_type.h): with no huge page to take, creating
# the CQ fails as on a ConnectX (Debian's ibv_rc_pingpong: "Couldn't create
# CQ", the reason on the log channel); ANON, and HUGE under the generic
# personality (whose provider reads no MLX_* variable), create it (the
# server then waits for a client: cut by timeout, exit 124).
#
#   huge_alloc_type.sh SOFTVERBS_CLI
#
# SKIP (77) when huge pages are reserved on this machine (then HUGE may
# succeed) or without ibv_rc_pingpong.
set -u
CLI=$1
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibv_rc_pingpong (ibverbs-utils) is not installed"; exit 77; }
if [ "$(cat /proc/sys/vm/nr_hugepages 2>/dev/null || echo 0)" != 0 ]; then
  echo "SKIP: huge pages are reserved on this machine: HUGE allocations may succeed"
  exit 77
fi
fail=0
run() {  # run PERSONALITY ALLOC_TYPE -> output in $out, status in $rc
  out=$(MLX_CQ_ALLOC_TYPE=$2 SOFTVERBS_LOG=stderr timeout 2 "$CLI" run --personality "$1" -- \
    ibv_rc_pingpong -d softverbs0 -g 1 -p 18999 2>&1)
  rc=$?
}
run mlx5 HUGE
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "Couldn't create CQ" <<<"$out" &&
  grep -q "MLX_CQ_ALLOC_TYPE=HUGE, but no huge page" <<<"$out"; then
  echo "OK: mlx5, HUGE without huge pages: the CQ is refused (rc $rc)"
else
  echo "FAIL: mlx5, HUGE without huge pages: rc $rc"; echo "$out"; fail=1
fi
for case in "mlx5 ANON" "generic HUGE"; do
  run $case
  if [ $rc -eq 124 ] && ! grep -q "Couldn't create CQ" <<<"$out"; then
    echo "OK: $case: the CQ is created (the server waits for a client)"
  else
    echo "FAIL: $case: rc $rc"; echo "$out"; fail=1
  fi
done
"$CLI" daemon stop >/dev/null 2>&1
exit $fail
