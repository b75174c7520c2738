#!/usr/bin/env bash
# libmlx5's MLX_{CQ,QP,SRQ}_ALLOC_TYPE=HUGE under the mlx5 personality
# (src/abi/ibverbs/mlx5_alloc_type.h): with no huge page to take, creating
# the CQ fails as on a ConnectX (Debian's ibv_rc_pingpong: "Couldn't create
# CQ", the reason on the log channel); ANON, and HUGE under the generic
# personality (whose provider reads no MLX_* variable), create it (the
# server then listens for a client, and is stopped).
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
here=$(dirname "$0")
# shellcheck source=../../common/free_port.sh
source "$here/../../common/free_port.sh"
# shellcheck source=../../common/tcp_state.sh
source "$here/../../common/tcp_state.sh"
fail=0
port=$(free_port)
"$CLI" daemon start >/dev/null || { echo "FAIL: daemon start"; exit 1; }
out_file=$(mktemp)
trap 'kill $pid 2>/dev/null; rm -f "$out_file"; "$CLI" daemon stop >/dev/null 2>&1' EXIT
pid=
start() {  # start PERSONALITY ALLOC_TYPE: ibv_rc_pingpong's server, in the background
  MLX_CQ_ALLOC_TYPE=$2 SOFTVERBS_LOG=stderr timeout 30 "$CLI" run --personality "$1" -- \
    ibv_rc_pingpong -d softverbs0 -g 1 -p "$port" >"$out_file" 2>&1 &
  pid=$!
}
start mlx5 HUGE
wait $pid
rc=$?
out=$(cat "$out_file")
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "Couldn't create CQ" <<<"$out" &&
  grep -q "MLX_CQ_ALLOC_TYPE=HUGE, but no huge page" <<<"$out"; then
  echo "OK: mlx5, HUGE without huge pages: the CQ is refused (rc $rc)"
else
  echo "FAIL: mlx5, HUGE without huge pages: rc $rc"; echo "$out"; fail=1
fi
# The server listens for its client only after creating its CQ and QP.
for case in "mlx5 ANON" "generic HUGE"; do
  start $case
  if wait_tcp "$port" listen && kill -0 $pid 2>/dev/null; then
    echo "OK: $case: the CQ is created (the server listens for a client)"
  else
    echo "FAIL: $case: the server never listened"; cat "$out_file"; fail=1
  fi
  kill $pid 2>/dev/null
  wait $pid 2>/dev/null
done
exit $fail
