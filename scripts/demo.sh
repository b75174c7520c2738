#!/usr/bin/env bash
# The demo: install what is missing, build, then let two processes talk over
# the softverbs device - Debian's unmodified ibv_rc_pingpong as server and
# client - and summarise what happened.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh

SV=build/bin/softverbs
export SOFTVERBS_RUNTIME_DIR
SOFTVERBS_RUNTIME_DIR=$(mktemp -d /tmp/softverbs-demo.XXXXXX)
trap '"$SV" daemon stop >/dev/null 2>&1 || true; rm -rf "$SOFTVERBS_RUNTIME_DIR"' EXIT

# The first RoCE v2 GID, as a user would pick it from ibv_devinfo -v.
gid_index=$("$SV" run -- ibv_devinfo -v | awk '/GID\[/ && /RoCE v2/ {gsub(/[^0-9]/, "", $1); print $1; exit}')
port=$((20000 + RANDOM % 20000))
iters=1000
size=4096

echo "== softverbs demo: device"
"$SV" run -- ibv_devices
echo
echo "== two processes: ibv_rc_pingpong server and client ($iters round trips of $size bytes, RC)"
server_log=$SOFTVERBS_RUNTIME_DIR/server.log
client_log=$SOFTVERBS_RUNTIME_DIR/client.log
"$SV" run -- ibv_rc_pingpong -d softverbs0 -g "$gid_index" -p "$port" -n "$iters" -s "$size" \
  >"$server_log" 2>&1 &
server=$!
sleep 0.5
echo "-- the server waits for its peer; softverbs status shows its objects:"
"$SV" status | sed -n '/client context/,$p' | sed 's/^/   /' || true
"$SV" run -- ibv_rc_pingpong -d softverbs0 -g "$gid_index" -p "$port" -n "$iters" -s "$size" \
  127.0.0.1 >"$client_log" 2>&1 &
client=$!
status=0
wait "$server" || status=$?
wait "$client" || status=$?
echo
echo "-- server output:"; sed 's/^/   /' "$server_log"
echo "-- client output:"; sed 's/^/   /' "$client_log"
echo
if [ "$status" -ne 0 ]; then
  echo "== demo FAILED (exit status $status)"
  exit "$status"
fi
rate=$(awk '/bytes in/ {print $0}' "$client_log" | tail -1)
lat=$(awk '/iters in/ {print $0}' "$client_log" | tail -1)
echo "== summary"
echo "   two processes exchanged $iters messages each way over softverbs0 (RC, ${size} B):"
echo "   $rate"
echo "   $lat"
echo "   after both exited, the daemon holds no objects of theirs:"
"$SV" status | sed -n '/client context/p'
