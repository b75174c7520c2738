#!/bin/sh
# Runs a test binary as an ordinary user: as itself when it is not root; as
# root, as `nobody` (setpriv) in a runtime directory of nobody's own, since
# root reaches what ordinary users cannot (/proc/<pid>/mem of a
# non-dumpable process) and the test is about what ordinary users get.
# Exit 77 (SKIP) when root has no setpriv or no `nobody` user.
# Usage: run_as_nobody.sh <test binary> [args]
set -eu
bin=$1
shift
if [ "$(id -u)" != 0 ]; then
  exec "$bin" "$@"
fi
if ! command -v setpriv >/dev/null 2>&1 || ! id nobody >/dev/null 2>&1; then
  echo "root without setpriv or a nobody user: cannot run as an ordinary user"
  exit 77
fi
rt=$(mktemp -d /tmp/sv-nobody-XXXXXX)
chown nobody "$rt"
chmod 700 "$rt"
trap 'rm -rf "$rt"' EXIT
status=0
SOFTVERBS_RUNTIME_DIR=$rt SOFTVERBS_IDLE_TIMEOUT=1 \
  setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups "$bin" "$@" || status=$?
sleep 2  # the daemon (nobody's) leaves after its idle timeout
exit $status
