#!/bin/sh
# ctest entry `fuzz.devx_prm` (label fuzz): runs the DEVX PRM fuzzer for a
# bounded time in its own build directory. Exit 77 (ctest SKIP_RETURN_CODE)
# only when there is no clang to build it with; any crash fails the test.
# Usage: fuzz/ctest_devx_fuzz.sh <seconds> <build-dir>
set -eu
if ! command -v clang++ >/dev/null 2>&1 && ! command -v clang++-14 >/dev/null 2>&1; then
  echo "clang not found: DEVX fuzzing skipped"
  exit 77
fi
exec "$(dirname "$0")/run_devx_fuzz.sh" "$@"
