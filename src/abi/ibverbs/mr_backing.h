// Shared backing of registered memory. At ibv_reg_mr the whole pages of the
// range are copied into a memfd which is then mapped over the same addresses
// (MAP_FIXED | MAP_SHARED): the application keeps its pointer and its bytes,
// and peers can map the same pages and read, write and run atomics on them
// directly. The partial first and last pages are left alone (they hold bytes
// that are not registered, which the application may write at any time);
// peers reach them through the owner's /proc/self/mem.
//
// Backings are process-wide (memory is): a range registered twice, by the
// same or another context, reuses the backing that covers it, and a backing
// outlives its last MR (bounded, checked against the process's mappings
// before reuse), so registering a range again costs no copy.
#pragma once

#include <cstddef>
#include <cstdint>

#include "abi/ibverbs/self_maps.h"

namespace softverbs::provider {

struct MrBacking {
  uint64_t id = 0;      // 0: no backing (no whole page, or overlaps another backing)
  int fd = -1;          // the memfd (owned by the registry; dup it to keep it)
  uint64_t begin = 0;   // first backed page
  uint64_t end = 0;     // past the last backed page
  uint64_t offset = 0;  // offset of `begin` in the memfd
};

// Backs the whole pages of [addr, addr+length). Failure to back is not an
// error: the MR is then reached through /proc/self/mem only. maps: the
// registration's view of the mappings (self_maps.h).
MrBacking AcquireMrBacking(SelfMaps& maps, void* addr, size_t length);
void ReleaseMrBacking(uint64_t id);

// Whether every byte of [addr, addr+length) is mapped readable (and writable
// if need_write), in maps.
bool MemoryIsAccessible(SelfMaps& maps, uintptr_t addr, size_t length, bool need_write);

}  // namespace softverbs::provider
