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

// Counts this host inside an access of each MR of another process that an
// execution touches, in the host's access record (Host::AccessRecord,
// datapath/layout.h): the increment is seq_cst and comes before the key
// check, so either the deregistering device sees the count (it clears the
// keys, then sums the slot over the live records; the owner's dereg waits
// for 0) or this host sees the cleared key; the decrement is a release,
// ordering the access before the owner's wait sees zero. The record is the
// host's own (no other process writes its lines), and a process that dies
// inside an access takes its record, and so its counts, with it.
class MrGuards {
 public:
  MrGuards() = default;
  MrGuards(const MrGuards&) = delete;
  MrGuards& operator=(const MrGuards&) = delete;
  ~MrGuards() { Leave(); }
  // The accesses are over: uncounts them now rather than at the end of the
  // scope (a write that follows, e.g. a completion, is then not waited for
  // by the decrement's locked instruction).
  void Leave() {
    for (int i = 0; i < count_; ++i) held_[i]->fetch_sub(1, std::memory_order_release);
    count_ = 0;
  }
  // Counts an access in record (the host's count for the MR's slot), once
  // per record: an MR met again (an indirect key's layout names one MR many
  // times) is counted already. False when the list is full: the access must
  // not go ahead uncounted.
  bool Enter(std::atomic<uint32_t>* record) {
    for (int i = 0; i < count_; ++i) {
      if (held_[i] == record) return true;
    }
    if (count_ == kMax) return false;
    record->fetch_add(1, std::memory_order_seq_cst);
    held_[count_++] = record;
    return true;
  }

 private:
  // Two MRs per SGE and a few more: the most distinct MRs one execution
  // touches without indirect keys is kMaxSendSge + 1.
  static constexpr int kMax = 2 * kMaxSendSge + 2;
  std::atomic<uint32_t>* held_[kMax];
  int count_ = 0;
};

// The same count for one MR at most (a routed WRITE or READ: plain_route.h),
// without MrGuards' list.
class MrGuard {
 public:
  // Counts an access in record, if any (nullptr: an access that is not
  // counted, MrGuards' caller would not have entered it either).
  explicit MrGuard(std::atomic<uint32_t>* record) : record_(record) {
    if (record_) record_->fetch_add(1, std::memory_order_seq_cst);
  }
  MrGuard(const MrGuard&) = delete;
  MrGuard& operator=(const MrGuard&) = delete;
  ~MrGuard() {
    if (record_) record_->fetch_sub(1, std::memory_order_release);
  }

 private:
  std::atomic<uint32_t>* const record_;
};

// Resolves a list of (addr, length, lkey) of the local QP or of a target QP
// into pieces. Returns kVendorNone or why it failed. `owner` is the client
// the keys must belong to: when that is this host and its own accesses are
// fenced (Host::OwnAccessesFenced), the access takes no count (the check
// below refuses an MR of anyone else, so an access that goes ahead is one
// the owner's dereg waits for as an execution of its own process).
// An rkey may name a memory window: its rights and bounds are checked
// (responder_qpn: the QP the request arrived on, for type 2 windows) and the
// bytes reached through the MR it is bound to. A key may be an indirect
// memory key (mlx5dv_create_mkey): its own rights and bounds are checked,
// then each part of the range is reached through the MR its layout names
// there, checked as a local access of the key's owner and PD (local write
// if the access writes), and an error there is the access's own (a remote
// one is the rkey's).
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
