#!/bin/bash
# kill -9 mid-traffic, over and over (issue 10): each cycle runs one of
# perftest's four bandwidth programs (ib_write_bw, ib_send_bw, ib_read_bw,
# ib_atomic_bw, in turn) as a server/client pair on one daemon, SIGKILLs the
# server or the client (alternately) at a random moment of its traffic, and
# then requires
#   - the survivor to end by itself (error completions or its run's end)
#     within 30 s: otherwise a hang;
#   - the device to hold no client and no object at all once both are gone
#     (`softverbs status --json`: "clients" empty, every "objects" count 0)
#     within 10 s: otherwise a leak;
#   - no ibv_dereg_mr of the survivor to have waited out its 2 s bound for a
#     peer (its log channel would say "stayed inside an access").
# The daemon's descriptor count is compared between the first and the last
# cycle. Prints one JSON line of figures.
#
# usage: kill_loop.sh SOFTVERBS_CLI CYCLES [SEED]
set -u
# shellcheck source=../../common/free_port.sh
source "$(dirname "$0")/../../common/free_port.sh"
# shellcheck source=../../common/tcp_state.sh
source "$(dirname "$0")/../../common/tcp_state.sh"
cli=$1 cycles=$2 seed=${3:-1}
RANDOM=$seed
runtime=$(mktemp -d /tmp/softverbs-kill-XXXXXX)
trap 'kill $server $client 2>/dev/null; "$cli" daemon stop >/dev/null 2>&1; rm -rf "$runtime"' EXIT
export SOFTVERBS_RUNTIME_DIR=$runtime SOFTVERBS_IDLE_TIMEOUT=30
fail() { echo "FAIL: $*"; exit 1; }
"$cli" daemon start >/dev/null || fail "daemon start"
daemon_pid=$(pgrep -f -n "softverbsd --runtime-dir $runtime") || fail "no daemon process for $runtime"
daemon_fds() { ls "/proc/$daemon_pid/fd" 2>/dev/null | wc -l; }

# The device is empty: no client, no object.
device_empty() {
  "$cli" status --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
sys.exit(0 if not s["clients"] and not any(s["objects"].values()) else 1)'
}

programs=(ib_write_bw ib_send_bw ib_read_bw ib_atomic_bw)
hangs=0 leaks=0 give_ups=0 killed_server=0 killed_client=0 fds_first=0 server=0 client=0
for ((i = 0; i < cycles; ++i)); do
  prog=${programs[i % 4]}
  port=$(free_port)
  common=(-d softverbs0 -x 1 -F -D 3 -p "$port")
  SOFTVERBS_LOG="$runtime/server.log" "$cli" run -- "$prog" "${common[@]}" >/dev/null 2>&1 &
  server=$!
  wait_tcp "$port" listen  # the server listens (perftest's TCP exchange)
  SOFTVERBS_LOG="$runtime/client.log" "$cli" run -- "$prog" "${common[@]}" 127.0.0.1 >/dev/null 2>&1 &
  client=$!
  # A client killed before it connects would leave the server in accept()
  # for ever (perftest has no timeout there): the kill comes only once the
  # exchange's connection stands, at a random moment of the 3 s run.
  wait_tcp "$port" established
  sleep "$(printf "0.%03d" $((RANDOM % 700)))"
  if ((i % 2 == 0)); then
    victim=$server survivor=$client
    ((++killed_server))
  else
    victim=$client survivor=$server
    ((++killed_client))
  fi
  kill -KILL "$victim" 2>/dev/null
  wait "$victim" 2>/dev/null
  ended=0
  for _ in $(seq 300); do
    kill -0 "$survivor" 2>/dev/null || { ended=1; break; }
    sleep 0.1
  done
  if [ $ended = 0 ]; then
    ((++hangs))
    echo "cycle $i ($prog): the survivor (pid $survivor) did not end within 30 s"
    kill -KILL "$survivor" 2>/dev/null
  fi
  wait "$survivor" 2>/dev/null
  empty=0
  for _ in $(seq 100); do
    device_empty && { empty=1; break; }
    sleep 0.1
  done
  if [ $empty = 0 ]; then
    ((++leaks))
    echo "cycle $i ($prog): the device still holds objects:"
    "$cli" status --json | head -40
  fi
  if grep -qs "stayed inside an access" "$runtime/server.log" "$runtime/client.log"; then
    ((++give_ups))
    echo "cycle $i ($prog): a dereg waited out its bound"
  fi
  rm -f "$runtime/server.log" "$runtime/client.log"
  ((i == 0)) && fds_first=$(daemon_fds)
done
fds_last=$(daemon_fds)
echo "{\"cycles\": $cycles, \"killed_server\": $killed_server, \"killed_client\": $killed_client," \
  "\"hangs\": $hangs, \"leaks\": $leaks, \"dereg_give_ups\": $give_ups," \
  "\"daemon_fds\": [$fds_first, $fds_last]}"
[ $hangs = 0 ] && [ $leaks = 0 ] && [ $give_ups = 0 ] && [ "$fds_last" -le $((fds_first + 2)) ] ||
  fail "see above"
echo PASS
