#!/usr/bin/env bash
# The integration pairs under AddressSanitizer + UndefinedBehaviorSanitizer
# (issue 10, point 4): builds the whole project with SOFTVERBS_SANITIZE=ON in
# its own build directory and runs there the tests of our own programs - unit
# tests, the gtest integration binaries, the data-path case programs, the
# reliability, XRC and DEVX tests, with Debian's pingpong/perftest pairs
# among them (they load our sanitized libraries). Any ASan report or UBSan
# finding aborts the process that hit it, so its test fails.
#
# The rdma_cm label runs too (rping, ucmatose, udaddy, mckey, cmtime, qperf,
# rsockets' rstream/riostream/rcopy and bad flows, the CM's lost-message and
# multicast tests, on one host and across two namespace hosts).
#
# Not run under it: third-party stacks whose own start-up does not survive a
# sanitized libibverbs loaded into an unsanitized program (libfabric's
# fi_info and fi_pingpong, UCX, Open MPI: thirdparty.*, kernel_view.*,
# rdmacm.*fi_pingpong*), perftest's rdma_cm pairs (rdmacm.*ib_*: its client
# retries through a destroyed id when the slowed server is late), rstream
# and iperf3 under Debian's librspreload (rdmacm.*_preload: an unsanitized
# preload that links our sanitized librdmacm, so libasan loads after it;
# both sides died at start-up calling a null function pointer, pc 0) and
# the Python conformance suites.
#
#   run_sanitized.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSOFTVERBS_SANITIZE=ON \
  "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)"
# Leak checking is off: the daemon and clients end by signal in most tests.
# verify_asan_link_order=0: Debian's programs load libasan after themselves.
export ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Debian's programs load libasan after themselves, so its interceptors are
# not theirs: ASan knows none of their threads (T-1 in a report) and does
# not clear a new thread's stack. rping cancels its CQ thread, blocked in
# our ibv_get_cq_event, when an accept fails (rping -P under forged CM
# MADs); the canceled frames' red zones stay poisoned, and the next thread
# glibc starts on that cached stack was reported for writing its own locals
# (a false stack-buffer-underflow in ibv_reg_mr, seen in CI; reproduced
# with a small program, gone with the runtime preloaded). So rping runs
# with the runtime loaded first, as ASan wants for programs not built with
# it. (Preloading it into every program of the tests breaks tshark, Python
# and the fork-heavy reliability tests.)
asan_runtime=$("${CXX:-c++}" -print-file-name=libasan.so)
if [[ -e $asan_runtime ]] && real_rping=$(command -v rping); then
  mkdir -p "$build/asan-first"
  # Its command line stays "rping ..." (th_pgrep matches it).
  printf '#!/bin/bash\nLD_PRELOAD=%s${LD_PRELOAD:+:$LD_PRELOAD} exec -a rping %s "$@"\n' \
    "$asan_runtime" "$real_rping" >"$build/asan-first/rping"
  chmod +x "$build/asan-first/rping"
  export PATH="$build/asan-first:$PATH"
fi
cd "$build"
status=0
ctest --output-on-failure -j"$(nproc)" --timeout 300 \
  -L "unit|integration|devx|datapath|reliability|xrc|rdmacm" \
  -E "^(thirdparty|kernel_view)\.|^rdmacm\.(hosts_)?(fi_pingpong|ib_|[a-z0-9]+_preload)" ||
  status=$?
if ((status != 0)); then "$src/scripts/failed_test_output.sh" "$build" 60; fi
exit "$status"
