#!/bin/bash
# Loss recovery across two hosts (docs/roce.md): wire_transfer moves MIB MiB
# by SEND, WRITE and READ and runs 2,500 atomics over one RC QP from host B
# to host A, checking every byte and every atomic result, while both devices'
# carriers inject the faults in FAULTS (SOFTVERBS_ROCE_FAULTS). Then both
# devices' `softverbs status --json` must show the faults injected and the
# transport's recovery from them (retransmissions; duplicates seen when
# packets were duplicated).
#
# usage: wire_transfer.sh SOFTVERBS_CLI WIRE_TRANSFER MIB FAULTS
set -u
source "$(dirname "$0")/../../common/two_hosts.sh"
cli=$1 program=$2 mib=$3 faults=$4
export TH_DAEMON_ENV_A="SOFTVERBS_ROCE_FAULTS=$faults,seed=11"
export TH_DAEMON_ENV_B="SOFTVERBS_ROCE_FAULTS=$faults,seed=12"
th_setup "$cli"
port=$(th_free_port a)
th_run a timeout 600 "$program" server "$port" >"$TH_DIR/server.log" 2>&1 &
server=$!
th_wait_listen a "$port" || { echo "FAIL: server did not listen"; cat "$TH_DIR/server.log"; exit 1; }
start=$(date +%s%N)
th_run b timeout 600 "$program" client "$TH_ADDR_A" "$port" "$mib" >"$TH_DIR/client.log" 2>&1
client_rc=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
# A client that failed leaves the server waiting for it (up to its timeout):
# stop it, by name among host A's processes.
if [ $client_rc -ne 0 ]; then
  kill -TERM $(th_pgrep a "$program server $port") 2>/dev/null
fi
wait "$server"
server_rc=$?
echo "--- server on host a (rc=$server_rc)"; cat "$TH_DIR/server.log"
echo "--- client on host b (rc=$client_rc, ${elapsed_ms} ms)"; cat "$TH_DIR/client.log"
th_exec a "$cli" status --json >"$TH_DIR/status_a.json"
th_exec b "$cli" status --json >"$TH_DIR/status_b.json"
if [ $client_rc -ne 0 ] || [ $server_rc -ne 0 ]; then
  # What each transport saw (per QP: packets, retransmissions, NAKs,
  # duplicates, state), to tell a stall from a loss pattern.
  for h in a b; do echo "--- status of host $h"; cat "$TH_DIR/status_$h.json"; done
  echo "FAIL: a side failed"
  exit 1
fi
grep -qx OK "$TH_DIR/client.log" || { echo "FAIL: the client did not say OK"; exit 1; }
python3 - "$TH_DIR/status_a.json" "$TH_DIR/status_b.json" "$faults" <<'PY' || exit 1
import json, sys
faults = dict(kv.split("=") for kv in sys.argv[3].split(","))
ok = True
sum_retransmitted = 0
for host, path in zip("ab", sys.argv[1:3]):
    roce = json.load(open(path))["roce"]
    t = roce["totals"]
    injected = {}
    for c in roce["carriers"]:
        for k, v in c.get("faults", {}).items():
            injected[k] = injected.get(k, 0) + v
    icrc = sum(c["icrc_errors"] for c in roce["carriers"])
    print(f"host {host}: injected {injected}; transport {t}; ICRC errors refused {icrc}")
    sum_retransmitted += t["retransmitted"]
    for key, name in (("drop", "dropped"), ("dup", "duplicated"), ("reorder", "reordered"),
                      ("corrupt", "corrupted")):
        if float(faults.get(key, 0)) > 0 and injected.get(name, 0) == 0:
            print(f"FAIL: host {host} injected no '{name}' fault"); ok = False
if float(faults.get("drop", 0)) > 0 and sum_retransmitted == 0:
    print("FAIL: packets were dropped but nothing was sent again"); ok = False
sys.exit(0 if ok else 1)
PY
echo PASS
