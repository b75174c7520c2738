#!/usr/bin/env bash
# A device receives what rxe sends (docs/roce.md): host A sends RoCE packets
# built by scapy as rxe builds them, on a raw socket; host B's device must
# take or refuse each as expected, counted in `softverbs status`.
#   v4: ICRCs made for the IPv4 ID of a counter, as rxe's: taken when the ID
#       follows its source's last one (and the first, a packet to QP 1);
#       the one with a changed byte and the first after a jump refused.
#   v6: a zero UDP checksum, as rxe sends over IPv6: taken (the kernel
#       drops such datagrams unless the socket says it takes them).
#
#   rxe_like_peer.sh SOFTVERBS_CLI SOURCE_DIR v4|v6
#
# SKIP (77) without ip netns permission or scapy.
set -u
CLI=$1 SRC=$2 MODE=$3
# shellcheck source=../../common/two_hosts.sh
source "$SRC/../../common/two_hosts.sh"
/usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null || th_skip "python3-scapy is not installed"
th_setup "$CLI"
case $MODE in
  v4) args=(v4 "$TH_ADDR_A" "$TH_ADDR_B")
      want='{"received": 7, "other_ipv4_ids": 7, "icrc_errors": 2, "unroutable": 6}'
      sent=9 ;;
  v6) args=(v6 "$TH_LL_A" "$TH_LL_B" "$TH_IF_A" "$(th_exec b cat "/sys/class/net/$TH_IF_B/address")")
      want='{"received": 3, "other_ipv4_ids": 0, "icrc_errors": 0, "unroutable": 3}'
      sent=3 ;;
  *) echo "usage: $0 CLI SOURCE_DIR v4|v6"; exit 2 ;;
esac
th_exec b "$CLI" status --json >"$TH_DIR/before.json" || exit 1
th_exec a /usr/bin/python3 "$SRC/send_as_rxe.py" "${args[@]}" || exit 1
# The daemon reads its socket in its own time: wait until it counted them
# (bounded; a datagram the kernel dropped is never counted).
for _ in $(seq 50); do
  th_exec b "$CLI" status --json >"$TH_DIR/after.json" || exit 1
  /usr/bin/python3 - "$TH_DIR/before.json" "$TH_DIR/after.json" "$sent" <<'PY' && break
import json, sys
b, a = (json.load(open(p))["roce"] for p in sys.argv[1:3])
def total(r, k): return sum(c[k] for c in r["carriers"])
seen = sum(total(a, k) - total(b, k) for k in ("received", "icrc_errors"))
sys.exit(0 if seen >= int(sys.argv[3]) else 1)
PY
  sleep 0.1
done
got=$(/usr/bin/python3 - "$TH_DIR/before.json" "$TH_DIR/after.json" <<'PY'
import json, sys
b, a = (json.load(open(p))["roce"] for p in sys.argv[1:3])
def total(r, k): return sum(c[k] for c in r["carriers"])
got = {k: total(a, k) - total(b, k) for k in ("received", "other_ipv4_ids", "icrc_errors")}
got["unroutable"] = a["unroutable"] - b["unroutable"]
print(json.dumps(got))
PY
)
echo "host B counted $got; expected $want"
[ "$got" = "$want" ] || { echo FAIL; exit 1; }
echo PASS
