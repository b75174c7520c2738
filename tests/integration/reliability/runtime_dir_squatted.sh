#!/bin/bash
# Without XDG_RUNTIME_DIR, the default runtime directory /tmp/softverbs-<uid>
# can be created first by another user (issue 10, point 7). The user must be
# told so (not "no daemon is running") and get the device in the private
# fallback, <home>/.cache/softverbs/run-<hostname>, where every process of
# the user finds it. Run as root: the victim is an otherwise unused uid, the
# squatter root; the victim's directory is also tried with a wrong mode.
# usage: runtime_dir_squatted.sh SOFTVERBS_CLI
set -u
cli=$1
if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
  echo "SKIP: needs root and setpriv to act as two users"
  exit 77
fi
uid=54321
squat=/tmp/softverbs-$uid
home=$(mktemp -d /tmp/softverbs-home-XXXXXX)
as_user() {
  env -u XDG_RUNTIME_DIR -u SOFTVERBS_RUNTIME_DIR HOME="$home" SOFTVERBS_IDLE_TIMEOUT=5 \
    setpriv --reuid=$uid --regid=$uid --clear-groups "$@"
}
cleanup() {
  as_user "$cli" daemon stop >/dev/null 2>&1
  rm -rf "$squat" "$home"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
chown $uid:$uid "$home"
chmod 0700 "$home"
fallback="$home/.cache/softverbs/run-$(hostname)"

check_fallback() {  # $1: what the warning must say about $squat
  local out
  # The CLI says what is wrong and where the device is instead.
  out=$(as_user "$cli" status 2>&1)
  echo "$out"
  echo "$out" | grep -q "$1" || fail "status did not explain: $1"
  echo "$out" | grep -q "using $fallback" || fail "status did not name the fallback"
  # A program under `softverbs run` uses the device there ...
  out=$(as_user "$cli" run -- ibv_devinfo 2>&1)
  echo "$out" | grep -q PORT_ACTIVE || fail "ibv_devinfo did not run: $out"
  [ -S "$fallback/softverbsd.sock" ] || fail "no daemon socket in $fallback"
  [ "$(stat -c %a:%u "$fallback")" = "700:$uid" ] || fail "$fallback is not the user's 0700"
  # ... and another process of the user, started on its own, finds it.
  out=$(as_user "$cli" status --json 2>/dev/null)
  echo "$out" | grep -q '"device"' || fail "a second process did not find the daemon"
  echo "$out" | grep -q '"device": null' && fail "a second process did not find the daemon"
  # Nothing was created in the squatted directory.
  [ -z "$(ls -A "$squat")" ] || fail "files appeared in $squat"
  as_user "$cli" daemon stop
}

# Owned by another user (root).
rm -rf "$squat"
mkdir -m 0755 "$squat"
check_fallback "$squat belongs to uid 0, not to this user"

# The user's own, but open to others.
chown $uid:$uid "$squat"
chmod 0777 "$squat"
check_fallback "$squat has mode 777"

# A directory the user named (SOFTVERBS_RUNTIME_DIR) has no fallback: the
# daemon is not started there, and the CLI says why.
named=$home/named
mkdir -m 0755 "$named" && chown $uid:$uid "$named"
for cmd in "daemon start" "run -- true"; do
  out=$(as_user env SOFTVERBS_RUNTIME_DIR="$named" "$cli" $cmd 2>&1) &&
    fail "softverbs $cmd succeeded in a runtime directory of mode 755"
  echo "$out"
  echo "$out" | grep -q "$named is accessible by group or others (mode must be 0700)" ||
    fail "softverbs $cmd did not say why: $out"
done
[ -S "$named/softverbsd.sock" ] && fail "a daemon started in $named"
echo PASS
