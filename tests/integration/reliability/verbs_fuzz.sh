#!/bin/bash
# Runs verbs_fuzz (verbs_fuzz.cc) for each seed on a private daemon, then
# requires the device to hold no object: every failed create created nothing
# and everything the fuzzer destroyed is gone.
#
# usage: verbs_fuzz.sh SOFTVERBS_CLI VERBS_FUZZ STEPS SEED...
# A long run: verbs_fuzz.sh build/bin/softverbs build/bin/verbs_fuzz 1000000 1 2 3
set -u
cli=$1 fuzz=$2 steps=$3
shift 3
runtime=$(mktemp -d /tmp/softverbs-fuzz-XXXXXX)
trap '"$cli" daemon stop >/dev/null 2>&1; rm -rf "$runtime"' EXIT
export SOFTVERBS_RUNTIME_DIR=$runtime SOFTVERBS_IDLE_TIMEOUT=30
# Paths to GIDs of no local address make the device send RoCE packets: the
# fuzzer makes them up only inside a network namespace of its own (loopback
# only; the daemon starts in it), so that nothing leaves the machine.
isolate=()
if [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null; then
  isolate=(unshare -n sh -c 'ip link set lo up && exec "$@"' sh)
  export VERBS_FUZZ_FOREIGN_GIDS=1
else
  echo "note: no network namespace here (not root): paths use this host's GIDs only"
fi
rc=0
for seed in "$@"; do
  "${isolate[@]}" "$cli" run -- "$fuzz" "$seed" "$steps" || { echo "FAIL: seed $seed (exit $?)"; rc=1; }
  # The device releases a process's objects when it sees the process's
  # connection close, as the kernel does at close: asynchronously, so a
  # loaded (sanitized) daemon is given up to 20 s to get there.
  /usr/bin/python3 - "$cli" "$seed" <<'PY' || rc=1
import json, subprocess, sys, time
cli, seed = sys.argv[1], sys.argv[2]
deadline = time.monotonic() + 20
while True:
    s = json.loads(subprocess.run([cli, "status", "--json"], check=True,
                                  capture_output=True, text=True).stdout)
    left = {k: v for k, v in s["objects"].items() if v}
    if not s["clients"] and not left:
        break
    if time.monotonic() > deadline:
        print("FAIL: after seed %s the device holds %s, clients %s" % (seed, left, s["clients"]))
        sys.exit(1)
    time.sleep(0.1)
PY
done
[ $rc = 0 ] && echo PASS
exit $rc
