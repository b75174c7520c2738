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
#include <vector>

#include "abi/ibverbs/self_maps.h"
#include "datapath/shm.h"
#include "protocol/messages.h"

namespace softverbs::provider {

struct MrBacking {
  uint64_t id = 0;               // a memfd's registry id; 0: no memfd
  int fd = -1;                   // the memfd (owned by the registry; dup it to keep it)
  uint64_t begin = 0;            // first backed page
  uint64_t end = 0;              // past the last backed page (== begin: no backing)
  uint64_t offset = 0;           // offset of `begin` in the memfd or the segment
  int shmid = -1;                // a SysV segment backs the range instead of a memfd
  protocol::BackingName name{};  // the memfd's (st_dev, st_ino)
  // The device keeps the memfd for the registering context (it passed it
  // before): the request names it instead of passing it.
  bool device_keeps = false;
  bool backed() const { return id != 0 || shmid >= 0; }
  // Whether the memfd goes along as the request's fd.
  bool passes_fd() const { return id != 0 && !device_keeps; }
};

// What a registration tells the device of its backing (the memfd itself
// goes along as the request's fd when b.passes_fd()).
inline void DescribeBacking(const MrBacking& b, protocol::RegMrBackedRequest* req) {
  req->backed_begin = b.begin;
  req->backed_end = b.end;
  req->backed_offset = b.offset;
  req->backing_kind = b.shmid >= 0     ? protocol::kBackingSysvShm
                      : b.device_keeps ? protocol::kBackingMemfdKept
                                       : protocol::kBackingNone;
  req->shmid = b.shmid >= 0 ? static_cast<uint32_t>(b.shmid) : 0;
  req->ipc_ns = b.shmid >= 0 ? datapath::IpcNamespaceId() : 0;
  req->kept = b.device_keeps ? b.name : protocol::BackingName{};
}

// Sends a new memfd to the registering context's device ahead of the
// registration (DaemonChannel::OfferBacking): true if it went. The offer
// also wakes a device asleep, which is then awake for the registration's
// call. Sent once the range is copied, inside the write hold's window: it
// must not allocate, take a lock or log (write_hold.h). A registration that
// takes a ready memfd (ready_backings.h) offers none: it calls wake_device
// instead (DaemonChannel::WakeAhead), and wake_maker when the context's
// stock runs low (null: no stock).
struct BackingOffer {
  bool (*send)(void* context, int memfd);
  void* context;
  void (*wake_maker)(void* context) = nullptr;
  void (*wake_device)(void* context) = nullptr;
};

// Backs the whole pages of [addr, addr+length). Failure to back is not an
// error: the MR is then reached through /proc/self/mem only. maps: the
// registration's view of the mappings (self_maps.h). keeper: the
// registering context's Context::keeper (0: a registration the device does
// not keep memfds for, a DM MR). offer (with a keeper): a new memfd goes to
// the device as soon as the range is copied into it, while the range is
// remapped, and the registration names it (device_keeps) instead of
// carrying it - a request through the call page instead of one with a
// descriptor over the socket.
MrBacking AcquireMrBacking(SelfMaps& maps, void* addr, size_t length, uint64_t keeper = 0,
                           const BackingOffer* offer = nullptr);
void ReleaseMrBacking(uint64_t id);

// Whether the device keeps backing `id`'s memfd for context `keeper` from
// now on (the reply's kRegMrBackingKept), or no longer (it answered ESTALE
// to a registration that named it).
void NoteBackingKept(uint64_t id, uint64_t keeper, bool kept);

// The memfds the device kept for context `keeper` and the registry has
// dropped since (its cache of converted ranges let them go), for the
// context to tell its device (forget_backings) so that the device lets go
// of them too: once 16 of them, or 16 MiB, wait (else none).
// What waits is bounded so, and by the cache's own bounds (it held them).
std::vector<protocol::BackingName> ForgottenBackings(uint64_t keeper);
// The context told its device: these wait for it no more. (The library
// closed its descriptor of each when it dropped it; the devices' last close
// frees the pages, in the daemon's release thread.)
void NoteBackingsForgotten(uint64_t keeper, const std::vector<protocol::BackingName>& names);
// Context `keeper` closed: its device forgot everything it kept for it.
// No entry names it any more.
void ForgetKeeper(uint64_t keeper);

// Whether every byte of [addr, addr+length) is mapped readable (and writable
// if need_write), in maps.
bool MemoryIsAccessible(SelfMaps& maps, uintptr_t addr, size_t length, bool need_write);

}  // namespace softverbs::provider
