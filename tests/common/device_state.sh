# wait_qps_connected CLI N: waits (20 s at most) until the device of this
# SOFTVERBS_RUNTIME_DIR holds N QPs in RTR or RTS (`softverbs status --json`).
# Tests use it to know a perftest pair's traffic has begun (perftest moves
# its QPs there right before its timed run; a passive side may stay in RTR)
# instead of a fixed sleep, or
# of its results header, which stdio keeps in its buffer when redirected.
# Source this file; needs python3.
wait_qps_connected() {
  for _ in $(seq 200); do
    "$1" status --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
up = sum(1 for c in s["clients"] for q in c["qp"] if q["state"] in ("RTR", "RTS"))
sys.exit(0 if up >= int(sys.argv[1]) else 1)' "$2" && return 0
    sleep 0.1
  done
  return 1
}
