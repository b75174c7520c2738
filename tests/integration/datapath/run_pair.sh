#!/bin/bash
# Runs one of Debian's unmodified verbs programs as a server/client pair on
# softverbs, each under `softverbs run`, with a private runtime directory
# and a free TCP port. Passes when both sides exit 0 and the client printed
# its result line.
#
# usage: run_pair.sh SOFTVERBS_CLI PORT_FLAG EXPECT_REGEX -- PROGRAM ARGS...
#   PORT_FLAG: the program's port option (-p for both families)
#   EXPECT_REGEX: what the client's output must contain
# Optional environment:
#   PAIR_SERVER_ARGS: extra arguments for the server only (ibv_xsrq_pingpong -c N)
#   PAIR_CLIENTS: how many clients run at once (default 1); each must pass
set -u
cli=$1 port_flag=$2 expect=$3
shift 3
[ "$1" = "--" ] && shift

runtime=$(mktemp -d /tmp/softverbs-dp-XXXXXX)
trap 'kill $server 2>/dev/null; "$cli" daemon stop >/dev/null 2>&1; rm -rf "$runtime"' EXIT
export SOFTVERBS_RUNTIME_DIR=$runtime
export SOFTVERBS_IDLE_TIMEOUT=5

# A free port: bind port 0 and read back what the kernel chose.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

listening() {  # whether something listens on $port (without connecting to it)
  local hex
  hex=$(printf '%04X' "$port")
  grep -qE "^ *[0-9]+: [0-9A-F]+:$hex [0-9A-F]+:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# shellcheck disable=SC2086  # PAIR_SERVER_ARGS is a list of words
timeout 60 "$cli" run -- "$@" ${PAIR_SERVER_ARGS:-} "$port_flag" "$port" >"$runtime/server.log" 2>&1 &
server=$!
for _ in $(seq 200); do
  listening && break
  sleep 0.05
done
clients=()
for i in $(seq "${PAIR_CLIENTS:-1}"); do
  timeout 60 "$cli" run -- "$@" "$port_flag" "$port" 127.0.0.1 >"$runtime/client$i.log" 2>&1 &
  clients+=($!)
done
ok=1
for i in "${!clients[@]}"; do
  wait "${clients[$i]}"
  client_rc[$i]=$?
done
wait $server
server_rc=$?
echo "--- server (rc=$server_rc)"; cat "$runtime/server.log"
[ $server_rc -eq 0 ] || ok=0
for i in "${!clients[@]}"; do
  echo "--- client $((i + 1)) (rc=${client_rc[$i]})"; cat "$runtime/client$((i + 1)).log"
  [ "${client_rc[$i]}" -eq 0 ] && grep -qE "$expect" "$runtime/client$((i + 1)).log" || ok=0
done
[ $ok -eq 1 ]
