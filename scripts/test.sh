#!/usr/bin/env bash
# The whole test suite from a clean checkout: install dependencies, build, run
# every test (in parallel). This is what .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
cd build
# Multicast groups stay on this host, except between the test's own network
# namespaces (tests/common/two_hosts.sh asks for link): a one-host test whose
# address is this machine's interface must not send to that interface's
# network (docs/roce.md, "Multicast").
export SOFTVERBS_ROCE_MCAST=host
status=0
ctest --output-on-failure -j"$(nproc)" --timeout 600 || status=$?
if ((status != 0)); then ../scripts/failed_test_output.sh . 80; fi
exit "$status"
