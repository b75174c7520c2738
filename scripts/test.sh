#!/usr/bin/env bash
# The whole test suite from a clean checkout: install dependencies, build, run
# every test (in parallel). This is what .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 600
