#!/bin/bash
# softverbsd SIGKILLed under an ib_send_bw pair (two processes) mid-stream:
# both sides must end with error completions (the device is gone: QPs in
# error, work flushed) within seconds, not hang and not finish their 10 s.
# usage: daemon_killed_pair.sh SOFTVERBS_CLI
set -u
# shellcheck source=../../common/free_port.sh
source "$(dirname "$0")/../../common/free_port.sh"
# shellcheck source=../../common/tcp_state.sh
source "$(dirname "$0")/../../common/tcp_state.sh"
# shellcheck source=../../common/device_state.sh
source "$(dirname "$0")/../../common/device_state.sh"
cli=$1
runtime=$(mktemp -d /tmp/softverbs-dk-XXXXXX)
trap 'kill $server $client 2>/dev/null; "$cli" daemon stop >/dev/null 2>&1; rm -rf "$runtime"' EXIT
export SOFTVERBS_RUNTIME_DIR=$runtime SOFTVERBS_IDLE_TIMEOUT=5
port=$(free_port)
timeout 60 "$cli" run -- ib_send_bw -d softverbs0 -x 1 -F -D 10 -p "$port" >"$runtime/server.log" 2>&1 &
server=$!
wait_tcp "$port" listen
timeout 60 "$cli" run -- ib_send_bw -d softverbs0 -x 1 -F -D 10 -p "$port" 127.0.0.1 \
  >"$runtime/client.log" 2>&1 &
client=$!
# Mid-stream: both QPs are connected (the timed run begins), then a second.
wait_qps_connected "$cli" 2
sleep 1
daemon=$(pgrep -f "softverbsd --runtime-dir $runtime")
[ -n "$daemon" ] || { echo "FAIL: no daemon for $runtime"; exit 1; }
start=$(date +%s)
kill -KILL "$daemon"
wait $server
src=$?
wait $client
crc=$?
elapsed=$(($(date +%s) - start))
echo "--- server (rc=$src)"; cat "$runtime/server.log"
echo "--- client (rc=$crc)"; cat "$runtime/client.log"
echo "both ended ${elapsed} s after the daemon was killed"
for rc in $src $crc; do
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "FAIL: a side did not fail (rc=$rc)"; exit 1; }
done
[ $elapsed -lt 6 ] || { echo "FAIL: took ${elapsed} s"; exit 1; }
grep -q "Completion with error" "$runtime/server.log" &&
  grep -q "Completion with error" "$runtime/client.log" || { echo "FAIL: no error completion"; exit 1; }
echo PASS
