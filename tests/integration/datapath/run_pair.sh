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
# shellcheck source=../../common/free_port.sh
source "$(dirname "$0")/../../common/free_port.sh"
# shellcheck source=../../common/tcp_state.sh
source "$(dirname "$0")/../../common/tcp_state.sh"
cli=$1 port_flag=$2 expect=$3
shift 3
[ "$1" = "--" ] && shift

runtime=$(mktemp -d /tmp/softverbs-dp-XXXXXX)
trap 'kill $server 2>/dev/null; "$cli" daemon stop >/dev/null 2>&1; rm -rf "$runtime"' EXIT
export SOFTVERBS_RUNTIME_DIR=$runtime
export SOFTVERBS_IDLE_TIMEOUT=5


run_pair_once() {
  # A free port below the ephemeral range (tests/common/free_port.sh).
  port=$(free_port)
  # shellcheck disable=SC2086  # PAIR_SERVER_ARGS is a list of words
  timeout 60 "$cli" run -- "$@" ${PAIR_SERVER_ARGS:-} "$port_flag" "$port" >"$runtime/server.log" 2>&1 &
  server=$!
  for _ in $(seq 200); do
    tcp_in_state "$port" listen && break
    sleep 0.05
  done
  clients=()
  for i in $(seq "${PAIR_CLIENTS:-1}"); do
    timeout 60 "$cli" run -- "$@" "$port_flag" "$port" 127.0.0.1 >"$runtime/client$i.log" 2>&1 &
    clients+=($!)
  done
  for i in "${!clients[@]}"; do
    wait "${clients[$i]}"
    client_rc[$i]=$?
  done
  wait $server
  server_rc=$?
}

# The port is free when chosen, not reserved: another process's socket (with
# tests running in parallel) can take it before the server binds it, and the
# server then says "Couldn't listen to port". The pair then runs again on
# another port, at most three times in all, each printed.
for attempt in 1 2 3; do
  run_pair_once "$@"
  grep -q "Couldn't listen to port" "$runtime/server.log" || break
  echo "--- attempt $attempt: port $port was taken before the server bound it; server said:"
  cat "$runtime/server.log"
done
ok=1
echo "--- server (rc=$server_rc)"; cat "$runtime/server.log"
[ $server_rc -eq 0 ] || ok=0
for i in "${!clients[@]}"; do
  echo "--- client $((i + 1)) (rc=${client_rc[$i]})"; cat "$runtime/client$((i + 1)).log"
  [ "${client_rc[$i]}" -eq 0 ] && grep -qE "$expect" "$runtime/client$((i + 1)).log" || ok=0
done
[ $ok -eq 1 ]
