#!/bin/bash
# ibv_rc_pingpong (with a partial-page buffer, so /proc/self/mem is used too)
# and ib_write_bw as pairs under a seccomp filter denying
# process_vm_readv/writev and ptrace, as uid nobody with a runtime directory
# it owns. Needs root to switch user; skips (77) otherwise.
# usage: seccomp_pair.sh SOFTVERBS_CLI LAUNCHER
set -u
# shellcheck source=../../common/free_port.sh
source "$(dirname "$0")/../../common/free_port.sh"
# shellcheck source=../../common/tcp_state.sh
source "$(dirname "$0")/../../common/tcp_state.sh"
cli=$1 launcher=$2
[ "$(id -u)" = 0 ] || { echo "not root: cannot switch to nobody"; exit 77; }
command -v setpriv >/dev/null || exit 77
here=$(dirname "$0")
runtime=$(mktemp -d /tmp/softverbs-dp-seccomp-XXXXXX)
chmod 755 "$runtime"
work=$runtime/nobody
mkdir -m 700 "$work" && chown nobody "$work"
# nobody must be able to reach the build tree.
if ! setpriv --reuid=nobody --regid=nogroup --clear-groups test -x "$cli"; then
  echo "the build tree is not accessible to nobody"; rm -rf "$runtime"; exit 77
fi
as_nobody() {
  setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME=/ \
    SOFTVERBS_RUNTIME_DIR="$work/rt" SOFTVERBS_IDLE_TIMEOUT=5 "$launcher" "$@"
}
export -f as_nobody 2>/dev/null
rc=0
for prog in "ibv_rc_pingpong -d softverbs0 -g 1 -n 100 -s 5000 -c" \
            "ib_write_bw -d softverbs0 -x 1 -F -n 200"; do
  port=$(free_port)
  as_nobody timeout 60 "$cli" run -- $prog -p "$port" >"$runtime/server.log" 2>&1 &
  server=$!
  wait_tcp "$port" listen
  as_nobody timeout 60 "$cli" run -- $prog -p "$port" 127.0.0.1 >"$runtime/client.log" 2>&1
  crc=$?
  wait $server
  src=$?
  echo "--- $prog: server rc=$src client rc=$crc"
  cat "$runtime/server.log" "$runtime/client.log"
  [ $src -eq 0 ] && [ $crc -eq 0 ] || rc=1
done
# The filter really was there: the launcher denies process_vm_readv.
as_nobody python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r = libc.process_vm_readv(os.getpid(), None, 0, None, 0, 0)
raise SystemExit(0 if r == -1 and ctypes.get_errno() == 1 else 1)' || { echo "filter not active"; rc=1; }
as_nobody "$cli" daemon stop >/dev/null 2>&1
rm -rf "$runtime"
exit $rc
