#!/bin/bash
# A process that dies mid-transfer leaves its peer with error completions,
# not a hang: ib_write_bw's server is SIGKILLed while the client writes into
# its memory for 10 s; the client must fail (retry exceeded) within seconds.
# usage: peer_killed.sh SOFTVERBS_CLI
set -u
# shellcheck source=../../common/free_port.sh
source "$(dirname "$0")/../../common/free_port.sh"
# shellcheck source=../../common/tcp_state.sh
source "$(dirname "$0")/../../common/tcp_state.sh"
# shellcheck source=../../common/device_state.sh
source "$(dirname "$0")/../../common/device_state.sh"
cli=$1
runtime=$(mktemp -d /tmp/softverbs-dp-XXXXXX)
trap '"$cli" daemon stop >/dev/null 2>&1; rm -rf "$runtime"' EXIT
export SOFTVERBS_RUNTIME_DIR=$runtime SOFTVERBS_IDLE_TIMEOUT=5
port=$(free_port)
"$cli" run -- ib_write_bw -d softverbs0 -x 1 -F -D 10 -p "$port" >"$runtime/server.log" 2>&1 &
server=$!  # `softverbs run` execs the program: this is the server itself
wait_tcp "$port" listen
start=$(date +%s)
timeout 60 "$cli" run -- ib_write_bw -d softverbs0 -x 1 -F -D 10 -p "$port" 127.0.0.1 \
  >"$runtime/client.log" 2>&1 &
client=$!
# Mid-stream: both QPs are connected (the timed run begins), then a second.
wait_qps_connected "$cli" 2
sleep 1
kill -KILL $server
wait $client
crc=$?
elapsed=$(($(date +%s) - start))
cat "$runtime/client.log"
echo "client rc=$crc after ${elapsed}s"
# Not a hang (timeout's 124), not a success, and well before the 10 s run ends.
[ $crc -ne 0 ] && [ $crc -ne 124 ] && [ $elapsed -lt 10 ] &&
  grep -qiE "completion with error|status|error" "$runtime/client.log"
