#!/bin/sh
# Builds the DEVX PRM fuzzer with clang in its own build directory and runs
# it for a bounded time. Exits non-zero when the fuzzer finds a crash.
# Usage: fuzz/run_devx_fuzz.sh <seconds> [build-dir]
set -eu
seconds=${1:?usage: $0 <seconds> [build-dir]}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-"$root/build-fuzz"}
cc=$(command -v clang || command -v clang-14)
cxx=$(command -v clang++ || command -v clang++-14)

cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSOFTVERBS_FUZZ=ON -DSOFTVERBS_TESTS=OFF >/dev/null
cmake --build "$build" --target devx_prm_fuzz

corpus="$build/devx_prm_corpus"
mkdir -p "$corpus"
cd "$build"
# -max_total_time bounds the run; libFuzzer exits non-zero on a crash, leak
# or sanitizer report, leaving the reproducer (crash-*) in $build.
exec "$build/bin/devx_prm_fuzz" -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 "$corpus"
