#!/bin/bash
# Runs one client program under `softverbs run` with a private runtime dir.
# usage: run_private.sh SOFTVERBS_CLI PROGRAM ARGS...
set -u
cli=$1
shift
runtime=$(mktemp -d /tmp/softverbs-dp-XXXXXX)
trap '"$cli" daemon stop >/dev/null 2>&1; rm -rf "$runtime"' EXIT
export SOFTVERBS_RUNTIME_DIR=$runtime SOFTVERBS_IDLE_TIMEOUT=5
timeout 100 "$cli" run -- "$@"
