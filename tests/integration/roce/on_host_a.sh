#!/bin/bash
# Runs one program on host A of tests/common/two_hosts.sh (a network
# namespace with its own daemon): a test whose packets must not leave the
# machine (its veth leads only to host B). SKIP (77) without ip netns.
# usage: on_host_a.sh SOFTVERBS_CLI PROGRAM ARGS...
set -u
source "$(dirname "$0")/../../common/two_hosts.sh"
th_setup "$1"
shift
th_run a timeout 100 "$@"
