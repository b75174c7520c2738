#!/usr/bin/env bash
# Runs a command with N more 2 MiB huge pages reserved, then gives them back:
#
#   with_huge_pages.sh N COMMAND [ARGS...]
#
# Reserving needs root (/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages);
# CI runs as root. SKIP (exit 77) where they cannot be had: not root, no 2 MiB
# huge pages in this kernel, or fewer than N free after asking. Its ctest
# entries take the RESOURCE_LOCK vm_nr_hugepages, as every test that changes
# or depends on the reservation does.
set -u
n=$1
shift
knob=/sys/kernel/mm/hugepages/hugepages-2048kB
[ -w "$knob/nr_hugepages" ] || { echo "SKIP: cannot reserve 2 MiB huge pages here (root and hugetlb needed)"; exit 77; }
before=$(cat "$knob/nr_hugepages")
echo $((before + n)) > "$knob/nr_hugepages"
trap 'echo "$before" > "$knob/nr_hugepages"' EXIT
free=$(cat "$knob/free_hugepages")
if [ "$free" -lt "$n" ]; then
  echo "SKIP: asked for $n more 2 MiB huge pages, $free free"
  exit 77
fi
"$@"
