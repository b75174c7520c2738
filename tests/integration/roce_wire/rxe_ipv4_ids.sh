#!/usr/bin/env bash
# A device receives what rxe sends over IPv4 (docs/roce.md, "IPv4
# identification"): host A sends, with scapy on a raw socket, RoCE packets
# whose ICRC was made for the IPv4 ID of a counter, as rxe's are; host B's
# device must accept those that follow their source's last ID (and the
# first, a packet to QP 1), and refuse the one with a changed byte and the
# first after a jump, counting each in `softverbs status`.
#
#   rxe_ipv4_ids.sh SOFTVERBS_CLI SOURCE_DIR
#
# SKIP (77) without ip netns permission or scapy.
set -u
CLI=$1 SRC=$2
# shellcheck source=../../common/two_hosts.sh
source "$SRC/../../common/two_hosts.sh"
/usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null || th_skip "python3-scapy is not installed"
th_setup "$CLI"
th_exec b "$CLI" status --json >"$TH_DIR/before.json" || exit 1
th_exec a /usr/bin/python3 "$SRC/send_rxe_like.py" "$TH_ADDR_A" "$TH_ADDR_B" || exit 1
# The daemon reads its socket in its own time: wait until it counted them.
for _ in $(seq 100); do
  th_exec b "$CLI" status --json >"$TH_DIR/after.json" || exit 1
  /usr/bin/python3 - "$TH_DIR/before.json" "$TH_DIR/after.json" <<'PY' && break
import json, sys
b, a = (json.load(open(p))["roce"] for p in sys.argv[1:])
def total(r, k): return sum(c[k] for c in r["carriers"])
sys.exit(0 if total(a, "received") + total(a, "icrc_errors") -
         total(b, "received") - total(b, "icrc_errors") >= 9 else 1)
PY
  sleep 0.1
done
/usr/bin/python3 - "$TH_DIR/before.json" "$TH_DIR/after.json" <<'PY'
import json, sys
b, a = (json.load(open(p))["roce"] for p in sys.argv[1:])
def total(r, k): return sum(c[k] for c in r["carriers"])
got = {k: total(a, k) - total(b, k) for k in ("received", "other_ipv4_ids", "icrc_errors")}
got["unroutable"] = a["unroutable"] - b["unroutable"]
want = {"received": 7, "other_ipv4_ids": 7, "icrc_errors": 2, "unroutable": 6}
print(f"host B counted {got}; expected {want}")
if got != want:
    print("FAIL")
    sys.exit(1)
print("PASS")
PY
