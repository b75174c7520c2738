#!/bin/bash
# rcopy (rdmacm-utils, rsockets) copies a 3 MB random file to its server,
# through run_cm_pair.sh or two_hosts_cm_pair.sh (@A@ is host A there).
# Passes when the pair passes and the copy is byte for byte the source.
#
# usage: rcopy_check.sh PAIR_SCRIPT SOFTVERBS_CLI SERVER_ADDRESS
set -u
pair=$1 cli=$2 addr=$3
dir=$(mktemp -d /tmp/softverbs-rcopy-XXXXXX)
trap 'rm -rf "$dir"' EXIT
head -c 3000000 /dev/urandom >"$dir/src"
SERVER_RUNS_ON=1 "$pair" "$cli" "closing\.\.\.done" -- rcopy -p 7482 -- \
  rcopy "$dir/src" "$addr:$dir/dst" -p 7482
rc=$?
[ $rc -eq 0 ] || exit $rc  # 77: no namespaces, skipped
cmp "$dir/src" "$dir/dst" || { echo "FAIL: the copy differs from the source"; exit 1; }
echo "rcopy: the copy is identical"
