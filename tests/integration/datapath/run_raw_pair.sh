#!/bin/bash
# Runs one of perftest's raw Ethernet programs (raw_ethernet_lat,
# raw_ethernet_bw) as a server/client pair on softverbs0, each under
# `softverbs run`, with a private runtime directory. The server's raw packet
# QPs receive through a flow rule on its MAC (ibv_create_flow), the client's
# send it Ethernet frames (docs/raw_packet.md). There is no TCP exchange:
# the client starts once the server has printed its result header (its flow
# attached, its receives posted). Passes when both exit 0 and both printed a
# result line with a non-zero iteration count.
#
# usage: run_raw_pair.sh SOFTVERBS_CLI -- PROGRAM ARGS...
#   RAW_SERVER_ONLY=1: the server side alone (raw_ethernet_fs_rate, which
#   makes and destroys rules and sends nothing), passing on its result line.
# Exits 77 (SKIP) without CAP_NET_RAW, which raw packet QPs need as on
# hardware.
set -u
cli=$1
shift
[ "$1" = "--" ] && shift

cap_eff=$(awk '/^CapEff:/ {print $2}' /proc/self/status)
if (( ((0x$cap_eff >> 13) & 1) == 0 )); then
  echo "SKIP: raw packet QPs need CAP_NET_RAW (CapEff $cap_eff)"
  exit 77
fi

runtime=$(mktemp -d /tmp/softverbs-raw-XXXXXX)
trap 'kill $server 2>/dev/null; "$cli" daemon stop >/dev/null 2>&1; rm -rf "$runtime"' EXIT
export SOFTVERBS_RUNTIME_DIR=$runtime
export SOFTVERBS_IDLE_TIMEOUT=5
server_mac=02:00:00:00:00:01
client_mac=02:00:00:00:00:02

timeout 60 stdbuf -oL "$cli" run -- "$@" --server -B $server_mac -E $client_mac \
  >"$runtime/server.log" 2>&1 &
server=$!
for _ in $(seq 200); do
  grep -q "#bytes" "$runtime/server.log" && break
  kill -0 $server 2>/dev/null || break
  sleep 0.05
done
if [ "${RAW_SERVER_ONLY:-0}" = 1 ]; then
  wait $server
  server_rc=$?
  echo "--- server (rc=$server_rc)"; cat "$runtime/server.log"
  [ $server_rc -eq 0 ] && grep -qE '^ *[1-9][0-9]*[[:space:]]+[0-9.]+[[:space:]]+[0-9.]+' "$runtime/server.log"
  exit
fi
timeout 60 "$cli" run -- "$@" --client -B $client_mac -E $server_mac >"$runtime/client.log" 2>&1
client_rc=$?
wait $server
server_rc=$?

# A result line: the message size, then the iteration count (> 0).
result='^ *[0-9]+ +[1-9][0-9]* +[0-9.]+'
ok=1
echo "--- server (rc=$server_rc)"; cat "$runtime/server.log"
echo "--- client (rc=$client_rc)"; cat "$runtime/client.log"
[ $server_rc -eq 0 ] && grep -qE "$result" "$runtime/server.log" || ok=0
[ $client_rc -eq 0 ] && grep -qE "$result" "$runtime/client.log" || ok=0
[ $ok -eq 1 ]
