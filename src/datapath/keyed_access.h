// Keyed access to registered memory, shared by the engine's requester and
// responder on either carrier (shared memory or the network): the in-flight
// counts an access holds on the MRs it touches (MrGuards), the resolution of
// a list of (addr, length, key) into pieces after the key checks
// (AddKeyedPieces) and the slice of a scatter/gather list one packet covers
// (SliceSges).
#pragma once

#include <atomic>
#include <cstdint>

#include "datapath/engine.h"
#include "datapath/memory.h"

namespace softverbs::datapath {

// Holds in-flight counts on every MR an execution touches (the Dekker
// protocol of InflightGuard, memory.h: the increment is seq_cst and comes
// before the key check; the decrement is a release, ordering our accesses
// before the owner's wait sees zero). A count taken in an MR's shared counter
// is also noted in the host's access record (Host::AccessRecord), which the
// daemon reads if this process dies holding it: noted after the increment,
// un-noted before the decrement, so a death in between can leave a count
// behind but never make the device take one back twice. Such a leftover
// count is one no live record holds, which the owner's dereg asks the
// daemon about (mr_peers_inside) instead of waiting it out.
class MrGuards {
 public:
  MrGuards() = default;
  MrGuards(const MrGuards&) = delete;
  MrGuards& operator=(const MrGuards&) = delete;
  ~MrGuards() {
    for (int i = 0; i < count_; ++i) {
      if (records_[i]) records_[i]->fetch_sub(1, std::memory_order_relaxed);
      held_[i]->fetch_sub(1, std::memory_order_release);
    }
  }
  // Takes a count in counter and notes it in record (if any).
  void Enter(std::atomic<uint32_t>* counter, std::atomic<uint32_t>* record);

 private:
  static constexpr int kMax = 2 * kMaxSendSge + 2;
  std::atomic<uint32_t>* held_[kMax];
  std::atomic<uint32_t>* records_[kMax];
  int count_ = 0;
};

// Resolves a list of (addr, length, lkey) of the local QP or of a target QP
// into pieces. Returns kVendorNone or why it failed. `owner` is the client
// the keys must belong to: when that is this host and its own accesses are
// fenced (Host::OwnAccessesFenced), the access takes no count (the check
// below refuses an MR of anyone else, so an access that goes ahead is one
// the owner's dereg waits for as an execution of its own process).
// An rkey may name a memory window: its rights and bounds are checked
// (responder_qpn: the QP the request arrived on, for type 2 windows) and the
// bytes reached through the MR it is bound to.
VendorError AddKeyedPieces(Host& host, MrGuards& guards, const RecvSge* sge, uint32_t num_sge,
                           bool remote, uint32_t pdn, uint32_t owner, uint32_t need, PieceList* out,
                           uint32_t responder_qpn = 0);

// Claims the next receive WQE of a receive side (own RQ or SRQ); an SRQ
// that drops below its armed limit raises IBV_EVENT_SRQ_LIMIT_REACHED once.
bool ClaimReceive(Host& host, PeerQp& peer, ClaimedRecv* r);
// What follows every claim of a receive WQE (ClaimReceive, or a claim in
// two steps, RecvQueue::ClaimPeeked): the SRQ limit event.
void NoteReceiveClaimed(Host& host, PeerQp& peer);

// The part [offset, offset + length) of a scatter/gather list, written to
// out (room for kMaxSendSge entries). Returns the entries written; 0 when
// the range is empty or lies past the list's end.
uint32_t SliceSges(const RecvSge* sge, uint32_t num_sge, uint64_t offset, uint64_t length,
                   RecvSge* out);

}  // namespace softverbs::datapath
