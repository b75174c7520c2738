#!/bin/bash
# A two-host test program (wire_rc_pair.h) as a pair: `PROGRAM server PORT`
# on host A, `PROGRAM client HOST_A_IPV4 PORT` on host B; both must exit 0
# and the client must print OK. With COUNTER, each host's transport must
# also have counted some of it (`softverbs status --json`, roce.totals):
# the situation the program makes did happen.
#
# With TH_DAEMON_ENV_A/_B setting SOFTVERBS_ROCE_FAULTS (two_hosts.sh), each
# host's carriers must have injected some of them.
#
# usage: wire_server_client.sh SOFTVERBS_CLI PROGRAM [COUNTER]
set -u
source "$(dirname "$0")/../../common/two_hosts.sh"
cli=$1 program=$2 counter=${3:-}
th_setup "$cli"
port=$(th_free_port a)
th_run a timeout 60 "$program" server "$port" >"$TH_DIR/server.log" 2>&1 &
server=$!
th_wait_listen a "$port" || { echo "FAIL: server did not listen"; cat "$TH_DIR/server.log"; exit 1; }
th_run b timeout 60 "$program" client "$TH_ADDR_A" "$port" >"$TH_DIR/client.log" 2>&1
client_rc=$?
wait "$server"
server_rc=$?
echo "--- server on host a (rc=$server_rc)"; cat "$TH_DIR/server.log"
echo "--- client on host b (rc=$client_rc)"; cat "$TH_DIR/client.log"
[ $client_rc -eq 0 ] && [ $server_rc -eq 0 ] || { echo "FAIL: a side failed"; exit 1; }
grep -qx OK "$TH_DIR/client.log" || { echo "FAIL: the client did not say OK"; exit 1; }
for h in a b; do
  case "$(eval echo "\${TH_DAEMON_ENV_${h^^}:-}")" in *SOFTVERBS_ROCE_FAULTS=*) ;; *) continue ;; esac
  injected=$(th_exec $h "$cli" status --json | /usr/bin/python3 -c "
import json, sys
r = json.load(sys.stdin)['roce']
f = {}
for c in r['carriers']:
    for k, v in c.get('faults', {}).items():
        f[k] = f.get(k, 0) + v
print(sum(f.values()), f, 'retransmitted', r['totals']['retransmitted'])")
  echo "host $h: injected $injected"
  [ "${injected%% *}" -gt 0 ] || { echo "FAIL: host $h injected no fault"; exit 1; }
done
if [ -n "$counter" ]; then
  for h in a b; do
    n=$(th_exec $h "$cli" status --json |
      /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['roce']['totals']['$counter'])")
    echo "host $h: $counter $n"
    [ "${n:-0}" -gt 0 ] || { echo "FAIL: host $h counted no $counter"; exit 1; }
  done
fi
echo PASS
