#!/bin/bash
# Checks that the drop-in libraries in a directory export every versioned
# symbol Debian's verbs clients import.
#
#   usage: check_required_symbols.sh LIBDIR [LISTDIR]
#
# LISTDIR (default: required-symbols/ next to this script) holds one file per
# library, named after it (libibverbs.so.1.txt, ...), with lines
# "symbol@VERSION<TAB>importer". A symbol counts as present when
# `objdump -T LIBDIR/<library>` shows it defined (not *UND*) in exactly that
# version node, default or not. Debian links its clients with BIND_NOW, so
# any miss here is a program that fails to start.
#
# Prints every miss, then "N of M required symbols present, K missing";
# exits 0 only when nothing is missing.
set -u

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 LIBDIR [LISTDIR]" >&2
  exit 2
fi
lib_dir=$1
list_dir=${2:-$(dirname "$0")/required-symbols}
if ! command -v objdump >/dev/null; then
  echo "objdump not found (binutils)" >&2
  exit 2
fi

total=0
missing=0
for list in "$list_dir"/*.txt; do
  lib=$(basename "$list" .txt)
  # "symbol@VERSION" for every defined dynamic symbol; objdump prints a
  # non-default version in parentheses, which we strip.
  exported=$(objdump -T "$lib_dir/$lib" 2>/dev/null |
    awk '/^[0-9a-f]+ / && !/\*UND\*/ { v = $(NF-1); gsub(/[()]/, "", v); print $NF "@" v }')
  [ -e "$lib_dir/$lib" ] || echo "MISSING library $lib_dir/$lib"
  while IFS=$'\t' read -r symver importer; do
    [ -n "$symver" ] || continue
    total=$((total + 1))
    if ! grep -qxF -- "$symver" <<<"$exported"; then
      echo "MISSING $lib $symver (imported by $importer)"
      missing=$((missing + 1))
    fi
  done <"$list"
done

echo "$((total - missing)) of $total required symbols present, $missing missing"
[ "$missing" -eq 0 ]
