#!/bin/bash
# Open MPI's openib BTL on softverbs reaches MPI_Init without a crash
# (issue 9: ibv_get_sysfs_path had the wrong prototype and openib segfaulted
# in MPI_Init). Two ranks of a program that only calls MPI_Init/MPI_Finalize,
# with --mca btl openib,self. openib may find the device unusable and say so
# (then MPI_Init reports the ranks unreachable); what fails the test is a
# signal, or mpirun not exiting by itself.
#
# usage: openmpi_openib.sh SOFTVERBS_CLI MPI_INIT_PROBE
set -u
cli=$1 probe=$2
if ! command -v mpirun >/dev/null; then
  echo "SKIP: mpirun is not installed (Debian package openmpi-bin)"
  exit 77
fi
if [ ! -x "$probe" ]; then
  echo "SKIP: the MPI probe was not built (mpicc missing: Debian package libopenmpi-dev)"
  exit 77
fi
mkdir -p "$(dirname "$SOFTVERBS_RUNTIME_DIR")"
log=$(mktemp)
trap '"$cli" daemon stop >/dev/null 2>&1; rm -f "$log"' EXIT
timeout -k 5 120 "$cli" run -- mpirun --allow-run-as-root --oversubscribe -np 2 \
  --mca btl openib,self --mca orte_base_help_aggregate 0 "$probe" >"$log" 2>&1
rc=$?
cat "$log"
echo "--- mpirun exited with $rc"
if grep -qE "received signal|exited on signal|Segmentation fault" "$log"; then
  echo "FAIL: a rank crashed"; exit 1
fi
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
  echo "FAIL: mpirun did not exit within 120 s"; exit 1
fi
if [ $rc -eq 0 ] && [ "$(grep -c 'passed MPI_Init' "$log")" -eq 2 ]; then
  echo "both ranks passed MPI_Init over openib,self"; exit 0
fi
# The help text itself sometimes does not make it through ORTE's show_help
# ("ORTE_ERROR_LOG: Out of resource in show_help.c"); the MPI_Init error line
# of MPI_ERRORS_ARE_FATAL still says what happened.
if grep -qE "MPI_INIT has failed|unable to reach each other|An error occurred in MPI_Init" "$log"; then
  echo "openib reported itself unusable on softverbs; no rank crashed"; exit 0
fi
echo "FAIL: mpirun exited with $rc without the MPI_Init outcome"
exit 1
