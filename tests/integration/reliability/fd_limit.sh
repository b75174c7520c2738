#!/bin/bash
# softverbsd and its descriptor limit (issue 10, point 7). Started with a
# soft limit of 64 and a hard limit of 160, it must raise the soft limit to
# 160. A client then creates QPs until ibv_create_qp fails with ENOMEM (the
# daemon is out of descriptors). A new client must then be refused promptly
# with an explained error (not hang in ibv_open_device), the daemon must not
# spin on a failing accept4, and once the first client is gone a new one
# opens the device again.
# usage: fd_limit.sh SOFTVERBSD FD_LIMIT_CLIENT
set -u
daemon=$1 client=$2
runtime=$(mktemp -d /tmp/softverbs-fd-XXXXXX)
dpid=
cleanup() {
  [ -n "$dpid" ] && kill "$dpid" 2>/dev/null
  [ -n "${fill:-}" ] && kill "$fill" 2>/dev/null
  rm -rf "$runtime"
}
trap cleanup EXIT
export SOFTVERBS_RUNTIME_DIR=$runtime SOFTVERBSD=$daemon
fail() {
  echo "FAIL: $*"
  echo "--- the daemon's log:"
  cat "$runtime/daemon.log"
  exit 1
}
ticks() { awk '{print $14 + $15}' "/proc/$dpid/stat"; }

prlimit --nofile=64:160 "$daemon" --runtime-dir "$runtime" --idle-timeout 60 \
  >"$runtime/daemon.log" 2>&1 &
dpid=$!
for _ in $(seq 100); do
  [ -S "$runtime/softverbsd.sock" ] && break
  sleep 0.05
done
[ -S "$runtime/softverbsd.sock" ] || fail "the daemon did not come up"
soft=$(awk '/Max open files/ {print $4}' "/proc/$dpid/limits")
echo "daemon soft limit: $soft (started with 64, hard 160)"
[ "$soft" = 160 ] || fail "the soft limit was not raised to the hard limit"

mkfifo "$runtime/hold"
exec 3<>"$runtime/hold"
"$client" fill <"$runtime/hold" >"$runtime/fill.out" 2>&1 3>&- &
fill=$!
for _ in $(seq 600); do
  grep -q qps "$runtime/fill.out" && break
  sleep 0.1
done
cat "$runtime/fill.out"
grep -q '"errno": 12' "$runtime/fill.out" || fail "create_qp at the limit must fail with ENOMEM"

# A new client is refused at once, with the reason on the log channel.
t0=$(ticks)
for i in 1 2 3; do
  out=$(SOFTVERBS_LOG=1 timeout 20 "$client" open 2>&1)
  rc=$?
  echo "$out"
  [ $rc -ne 124 ] || fail "ibv_open_device hung at the daemon's descriptor limit"
  echo "$out" | grep -q '"ok": 0' || fail "ibv_open_device succeeded with no descriptor left"
  echo "$out" | grep -q "no file descriptor left" || fail "the refusal was not explained"
done
# Connections nobody reads any more wait in the backlog: no spinning.
python3 - "$runtime/softverbsd.sock" <<'PY' &
import socket, sys, time
socks = []
for _ in range(5):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(sys.argv[1])
    socks.append(s)
time.sleep(3)
PY
sleep 2
t1=$(ticks)
cpu_ms=$(((t1 - t0) * 1000 / $(getconf CLK_TCK)))
echo "daemon CPU while refusing: ${cpu_ms} ms over ~2 s"
[ $cpu_ms -lt 800 ] || fail "the daemon spins at its descriptor limit (${cpu_ms} ms of CPU)"
kill -0 $dpid || fail "the daemon died"

# Once the first client is gone, new clients get in again.
exec 3>&-
timeout 20 tail --pid=$fill -f /dev/null || fail "the filling client did not exit"
fill=
out=$(timeout 20 "$client" open 2>&1)
echo "$out"
echo "$out" | grep -q '"ok": 1' || fail "the device did not recover after the client left"
echo PASS
