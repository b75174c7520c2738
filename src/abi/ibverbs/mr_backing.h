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
//
// A range inside a SysV shared memory segment the application attached
// needs no memfd: the segment is shared memory already, and one that cannot
// shrink (no peer can fault on a page past its end), so peers attach it
// (shmat, with their own credentials) and the range stays where it is.
#pragma once

#include <cstddef>
#include <cstdint>

#include "abi/ibverbs/self_maps.h"
#include "datapath/shm.h"
#include "protocol/messages.h"

namespace softverbs::provider {

struct MrBacking {
  uint64_t id = 0;      // a memfd's registry id; 0: no memfd
  int fd = -1;          // the memfd (owned by the registry; dup it to keep it)
  uint64_t begin = 0;   // first backed page
  uint64_t end = 0;     // past the last backed page (== begin: no backing)
  uint64_t offset = 0;  // offset of `begin` in the memfd or the segment
  int shmid = -1;       // a SysV segment backs the range instead of a memfd
  bool backed() const { return id != 0 || shmid >= 0; }
};

// What a registration tells the device of its backing (the memfd itself
// goes along as the request's fd when b.id != 0).
inline void DescribeBacking(const MrBacking& b, protocol::RegMrBackedRequest* req) {
  req->backed_begin = b.begin;
  req->backed_end = b.end;
  req->backed_offset = b.offset;
  req->backing_kind = b.shmid >= 0 ? protocol::kBackingSysvShm : protocol::kBackingNone;
  req->shmid = b.shmid >= 0 ? static_cast<uint32_t>(b.shmid) : 0;
  req->ipc_ns = b.shmid >= 0 ? datapath::IpcNamespaceId() : 0;
}

// Backs the whole pages of [addr, addr+length). Failure to back is not an
// error: the MR is then reached through /proc/self/mem only. maps: the
// registration's view of the mappings (self_maps.h).
MrBacking AcquireMrBacking(SelfMaps& maps, void* addr, size_t length);
void ReleaseMrBacking(uint64_t id);

// Whether every byte of [addr, addr+length) is mapped readable (and writable
// if need_write), in maps.
bool MemoryIsAccessible(SelfMaps& maps, uintptr_t addr, size_t length, bool need_write);

}  // namespace softverbs::provider
