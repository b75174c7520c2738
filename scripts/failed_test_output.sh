#!/usr/bin/env bash
# Prints again, at the end of a run, what each failed test printed (its last
# lines), from ctest's own log: with --output-on-failure that output sits in
# the middle of a long run's log, where a log excerpt (CI keeps the head and
# the tail) loses it.
#
#   failed_test_output.sh BUILD_DIR [LINES]
set -euo pipefail
build=$1
lines=${2:-40}
log=$build/Testing/Temporary/LastTest.log
failed=$build/Testing/Temporary/LastTestsFailed.log
[[ -f $log && -f $failed ]] || exit 0
# LastTestsFailed.log: one "NUMBER:NAME" per failed test.
while IFS=: read -r _ name; do
  [[ -n $name ]] || continue
  echo "==== output of failed test $name (last $lines lines) ===="
  # LastTest.log: each test's output sits between "Output:" (after the test's
  # "NAME" start time line) and "<end of output>".
  awk -v name="$name" '
    index($0, "\"" name "\" start time:") == 1 { in_test = 1; next }
    in_test && $0 == "Output:" { getline; in_output = 1; next }
    in_output && $0 == "<end of output>" { in_output = 0; in_test = 0; next }
    in_output { print }
  ' "$log" | tail -n "$lines"
done <"$failed"
