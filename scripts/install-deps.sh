#!/usr/bin/env bash
# Installs everything softverbs needs to build, test, benchmark and demo on
# Debian 12, from Debian's own packages.
set -euo pipefail
packages=(
  # build
  build-essential cmake ninja-build pkg-config binutils clang libclang-rt-14-dev
  libibverbs-dev librdmacm-dev libcli11-dev nlohmann-json3-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev libseccomp-dev
  # the daemon's ICRC: ISA-L's CRC-32 (carry-less multiply; zlib's is 8-18x slower)
  libisal-dev
  # real clients the tests and the demo run
  ibverbs-utils perftest rdmacm-utils qperf python3 python3-pyverbs
  # benchmark baseline and plots; UCX and Open MPI on softverbs0 (kernel_view tests)
  ucx-utils python3-matplotlib openmpi-bin libopenmpi-dev
  # rdma-core's rdma_cm tests read the port's netdev addresses with `ip -j`
  iproute2
  # tests run a client as an unprivileged user
  util-linux procps
  # third-party programs the tests run on softverbs (issue 9): libfabric's
  # fi_info, Open MPI's openib BTL (mpirun, mpicc for the MPI_Init probe),
  # UCX's ucx_perftest / ucx_info (ucx-utils, above)
  libfabric-bin openmpi-bin libopenmpi-dev
  # librpma (a remote write and flush over rdma_cm: tests/integration/rdmacm)
  librpma-dev
  # RoCE v2 tests: two hosts as network namespaces (ip netns, veth), captures
  # decoded by an independent dissector and ICRC checker
  iproute2 tshark python3-scapy
  # the two-host benchmark's link reference (bench/two_hosts.sh); iperf3 is
  # also a test's socket program over rsockets (rdmacm.iperf3_preload)
  iperf3 sockperf
)
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "Installing: ${missing[*]}"
  # tshark asks whether non-root users may capture: answer no, without asking.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
