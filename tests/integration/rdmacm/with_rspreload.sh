#!/bin/bash
# Runs a program with Debian's rsocket preload library (librdmacm1's
# librspreload) loaded first: its socket calls on AF_INET/AF_INET6 stream
# sockets become rsocket calls into softverbs' librdmacm (docs/rdmacm.md,
# "rsockets"). The rest of LD_PRELOAD (softverbs run's kernel view) stays.
#
# usage: with_rspreload.sh PROGRAM ARGS...
set -u
lib=
for candidate in /usr/lib/*/rsocket/librspreload.so.1 /usr/lib/rsocket/librspreload.so.1; do
  if [ -e "$candidate" ]; then lib=$candidate; break; fi
done
if [ -z "$lib" ]; then
  echo "with_rspreload.sh: Debian's librspreload (package librdmacm1) is not installed" >&2
  exit 2
fi
export LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}"
exec "$@"
