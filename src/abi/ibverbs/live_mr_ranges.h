// The address ranges of this process's live MRs and DEVX umems, as far as
// the write hold needs them (write_hold.h). Peers and the device's network
// transport reach an MR's pages that are not backed by shared memory - its
// partial first and last pages, an MR left unbacked, an on-demand MR -
// through the owner's /proc/<pid>/mem. A conversion that replaced such a
// page while a peer wrote it would lose the write; under the userfaultfd
// the peer's write fails instead and is made again once the range maps its
// memfd (docs/datapath.md, "Registered memory"). So a hold may go without
// the userfaultfd only where no live MR or umem covers the range.
#pragma once

#include <cstddef>
#include <cstdint>

namespace softverbs::provider {

// An MR of [addr, addr+length) went live / is gone (after its
// deregistration waited for the peers inside an access).
void NoteMrRange(uint64_t addr, uint64_t length);
void ForgetMrRange(uint64_t addr, uint64_t length);
// A DEVX umem was registered (+1) or deregistered (-1). Its range is not
// kept: while any umem lives, every range counts as covered.
void NoteUmems(int delta);

// Whether a live MR (or any umem) covers part of [begin, end).
bool AnyMrCovers(uint64_t begin, uint64_t end);

}  // namespace softverbs::provider
