// Reading and writing an owner's bytes through its /proc/<pid>/mem: the
// bytes of its MRs that no shared memory backs (partial first and last
// pages, on-demand MRs; memory.h).
//
// While the owner's registration converts a page (the copy into a memfd and
// the remap, abi/ibverbs/mr_backing.cc), its write hold (write_hold.h)
// makes the kernel's own accesses to that page fail: /proc/<pid>/mem
// answers EIO (or a short count at the page). The page may well be a
// partial page of another of the owner's MRs that a peer is using right
// then. On a NIC a registration never disturbs another MR's traffic, so an
// executor makes such an access again once the conversion is over - waiting
// kOwnerMemorySettleMs at most (memory the owner unmapped under a live MR
// fails the same way, for good). A return of 0 means the owner's address
// space is gone: no waiting.
//
// Only the library's executors wait (WaitForOwnerConversions: peers and the
// owner's own engine, in a thread of the posting process). The daemon's
// network transport does not - one owner must not stall the device for the
// others -: there such an access fails with EIO at once, and the transport
// makes it again later without holding up other QPs (wire_qp.h, "Owner
// waits").
#pragma once

#include <errno.h>

#include <cstdint>

namespace softverbs::datapath {

inline constexpr int kOwnerMemorySettleMs = 2000;

// Whether this process's accesses wait out an owner's conversion (the
// library says yes; the daemon leaves the default, no).
void WaitForOwnerConversions(bool wait);
bool WaitsForOwnerConversions();

// n bytes at the owner's va through its memory file fd. False: they could
// not be reached, and errno says why: EIO - not now (a conversion of the
// owner's, or bytes no longer mapped, which stays so); ESRCH - the owner's
// address space is gone; another value from the system call. A write
// stores its last bytes after the others (placement_order.h).
bool ReadOwnerMemory(int fd, void* buf, uint64_t n, uint64_t va);
bool WriteOwnerMemory(int fd, const void* buf, uint64_t n, uint64_t va);

// Whether an access that failed with `error` (its errno) may succeed when
// made again later: the owner may be converting the page (EIO), or another
// executor holds the word an atomic needs (EAGAIN, owner_word_lock.h).
inline bool OwnerAccessMayClear(int error) {
  return error == EIO || error == EAGAIN;
}

}  // namespace softverbs::datapath
