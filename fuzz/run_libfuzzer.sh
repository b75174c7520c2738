#!/bin/sh
# Builds one libFuzzer target with clang in its own build directory and runs
# it for a bounded time. Exits non-zero when the fuzzer finds a crash; 77
# (ctest SKIP_RETURN_CODE) when there is no clang.
# Usage: fuzz/run_libfuzzer.sh <target> <seconds> [build-dir] [max_len]
set -eu
target=${1:?usage: $0 <target> <seconds> [build-dir] [max_len]}
seconds=${2:?usage: $0 <target> <seconds> [build-dir] [max_len]}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${3:-"$root/build-fuzz"}
max_len=${4:-4096}
cc=$(command -v clang || command -v clang-14 || true)
cxx=$(command -v clang++ || command -v clang++-14 || true)
if [ -z "$cc" ] || [ -z "$cxx" ]; then
  echo "clang not found: $target skipped"
  exit 77
fi
cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSOFTVERBS_FUZZ=ON -DSOFTVERBS_TESTS=OFF >/dev/null
cmake --build "$build" --target "$target"
corpus="$build/${target}_corpus"
mkdir -p "$corpus"
cd "$build"
exec "$build/bin/$target" -max_total_time="$seconds" -max_len="$max_len" -print_final_stats=1 "$corpus"
