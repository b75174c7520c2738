#!/bin/bash
# libfabric's fi_info under `softverbs run` exits cleanly (issue 9): the verbs
# provider calls rdma_get_devices, whose count used to be left unset, so
# every libfabric program crashed and then hung in its exit path.
#
# usage: fi_info.sh SOFTVERBS_CLI PROVIDER
# Passes when fi_info exits by itself within the bound, without a signal,
# with 0 or with libfabric's "no provider matched" (61, -FI_ENODATA); for
# the verbs provider only with 0 and softverbs0 among its domains.
set -u
cli=$1 provider=$2
if ! command -v fi_info >/dev/null; then
  echo "SKIP: fi_info is not installed (Debian package libfabric-bin)"
  exit 77
fi
mkdir -p "$(dirname "$SOFTVERBS_RUNTIME_DIR")"
trap '"$cli" daemon stop >/dev/null 2>&1' EXIT
timeout -k 5 60 "$cli" run -- fi_info -p "$provider" >out.$$ 2>&1
rc=$?
cat out.$$
if grep -qE "Segmentation fault|backtrace|SIGSEGV" out.$$; then
  echo "FAIL: fi_info -p $provider crashed"; rm -f out.$$; exit 1
fi
if [ "$provider" = verbs ] && { [ $rc -ne 0 ] || ! grep -q "domain: softverbs0" out.$$; }; then
  echo "FAIL: fi_info -p verbs (rc $rc) does not list softverbs0"; rm -f out.$$; exit 1
fi
rm -f out.$$
case $rc in
  0 | 61) echo "fi_info -p $provider exited with $rc"; exit 0 ;;
  124 | 137) echo "FAIL: fi_info -p $provider did not exit within 60 s"; exit 1 ;;
  *) echo "FAIL: fi_info -p $provider exited with $rc"; exit 1 ;;
esac
