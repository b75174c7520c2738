#!/bin/bash
# UCX's rc_verbs transport on softverbs, run after run (issue 9): UCX's async
# thread segfaulted at teardown in about 1 run of 5 (an
# IBV_EVENT_QP_LAST_WQE_REACHED read while ibv_destroy_qp ran carried
# element.qp = NULL). Each run is an ucx_perftest am_lat server/client pair,
# each under `softverbs run`:
#   ucx_perftest -d softverbs0:1 -x rc_verbs -t am_lat -D short -s 8 -n 100000
# Passes when every run's two sides exit 0, the client printed its "Final:"
# line and neither side reports a signal. Bounded: UCX_LOOP_RUNS runs
# (default 50), each side under a timeout.
#
# usage: ucx_am_lat_loop.sh SOFTVERBS_CLI
# Optional environment: UCX_LOOP_RUNS (runs), UCX_LOOP_ITERS (-n, default 100000).
set -u
# shellcheck source=../../common/free_port.sh
source "$(dirname "$0")/../../common/free_port.sh"
# shellcheck source=../../common/tcp_state.sh
source "$(dirname "$0")/../../common/tcp_state.sh"
cli=$1
runs=${UCX_LOOP_RUNS:-50}
iters=${UCX_LOOP_ITERS:-100000}
for tool in ucx_perftest ucx_info; do
  if ! command -v $tool >/dev/null; then
    echo "SKIP: $tool is not installed (Debian package ucx-utils)"
    exit 77
  fi
done
mkdir -p "$(dirname "$SOFTVERBS_RUNTIME_DIR")"
work=$(mktemp -d /tmp/softverbs-ucx-XXXXXX)
server=
trap '[ -n "$server" ] && kill $server 2>/dev/null; "$cli" daemon stop >/dev/null 2>&1; rm -rf "$work"' EXIT

# UCX must see the device: it looks for /dev/infiniband/uverbs0 and
# /sys/class/infiniband, which `softverbs run` shows it (the kernel view).
timeout -k 5 60 "$cli" run -- ucx_info -d >"$work/info.txt" 2>&1
if ! grep -qE "Device: softverbs0:1" "$work/info.txt" || ! grep -qE "Transport: rc_verbs" "$work/info.txt"; then
  echo "SKIP: ucx_info -d under softverbs run does not list softverbs0:1 with rc_verbs" \
       "(UCX does not see the device: no kernel view of /dev/infiniband, /sys/class/infiniband)"
  exit 77
fi

crashed() {  # whether a log shows a signal (UCX: "Caught signal 11 (Segmentation fault...")
  grep -qE "Caught signal|Segmentation fault|received signal|core dumped" "$1"
}

args=(-d softverbs0:1 -x rc_verbs -t am_lat -D short -s 8 -n "$iters")
start=$(date +%s)
for run in $(seq "$runs"); do
  port=$(free_port)
  timeout -k 5 300 "$cli" run -- ucx_perftest -p "$port" "${args[@]}" >"$work/server.log" 2>&1 &
  server=$!
  for _ in $(seq 400); do
    tcp_in_state "$port" listen && break
    sleep 0.05
  done
  timeout -k 5 300 "$cli" run -- ucx_perftest 127.0.0.1 -p "$port" "${args[@]}" >"$work/client.log" 2>&1
  client_rc=$?
  wait $server
  server_rc=$?
  server=
  if [ $client_rc -ne 0 ] || [ $server_rc -ne 0 ] || ! grep -q "^Final:" "$work/client.log" ||
     crashed "$work/client.log" || crashed "$work/server.log"; then
    echo "--- server (rc=$server_rc)"; cat "$work/server.log"
    echo "--- client (rc=$client_rc)"; cat "$work/client.log"
    echo "FAIL: run $run of $runs (client rc $client_rc, server rc $server_rc)"
    exit 1
  fi
  echo "run $run/$runs ok: $(grep '^Final:' "$work/client.log" | tr -s ' ') ($(($(date +%s) - start)) s so far)"
done
echo "$runs of $runs ucx_perftest rc_verbs am_lat runs clean"
