#!/usr/bin/env bash
# No drop-in library registers a destructor to run at exit (src/common/
# no_destructor.h): a program may call exit() in one thread while another
# is still inside the library - rping does on a REJECTED event - and a
# table destroyed by exit() is then read freed. A library with a static
# object whose destructor is not trivial imports __cxa_atexit (or atexit);
# rdma-core's C libraries import neither.
#
#   check_no_exit_destructors.sh LIB_DIR
set -u
dir=$1
status=0 checked=0
for lib in libibverbs.so.1 librdmacm.so.1 libmlx5.so.1 libefa.so.1 libsoftverbs-kernel-view.so; do
  path="$dir/$lib"
  [ -e "$path" ] || { echo "FAIL: $path is missing"; status=1; continue; }
  imports=$(nm -D --undefined-only "$path" | awk '{print $2}' | grep -E '^(__cxa_atexit|atexit)(@|$)')
  if [ -n "$imports" ]; then
    echo "FAIL: $lib registers destructors to run at exit ($imports):"
    objdump -d --no-show-raw-insn -C "$path" | grep -B15 -E '(call|jmp).*<__cxa_atexit' |
      grep -oE '<(_GLOBAL__sub_I_[^>]+|[^>]*::~[^>]+)>' | sort -u | sed 's/^/  /'
    status=1
  fi
  checked=$((checked + 1))
done
((status == 0)) && echo "PASS: $checked libraries, none registers an exit-time destructor"
exit $status
