// A receive queue in shared memory (a QP's or an SRQ's; layout:
// RecvQueueHeader + slots of RecvWqe and max_sge RecvSge). The owner posts;
// any process that delivers a message claims the oldest WQE.
//
// Resizing in place (ibv_modify_srq with IBV_SRQ_MAX_WR): an SRQ's file has
// room for the device's max_srq_wr; only the first `capacity` slots are in
// use. The `head` word carries an epoch and a closed bit (ring_word.h). The
// owner, holding its post lock, closes head (claimers wait; a claim whose
// copy was made before fails its CAS), moves the posted WQEs to their slots
// under the new capacity and reopens with the next epoch. Peers never remap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "datapath/layout.h"

namespace softverbs::datapath {

// The bytes a receive-queue file needs for max_wr WQEs of max_sge entries
// (max_wr 0: a header only, for QPs without their own receive queue).
size_t RecvQueueFileSize(uint32_t max_wr, uint32_t max_sge);
void InitRecvQueueFile(void* base, uint32_t max_wr, uint32_t max_sge);

// A WQE copied out of the ring.
struct ClaimedRecv {
  uint64_t index = 0;  // its place in the queue's sequence of WQEs (Peek, Claim)
  uint64_t wr_id = 0;
  uint32_t num_sge = 0;
  RecvSge sge[32];
};

// Ring slots per WQE that may be posted (RecvQueueHeader::capacity).
inline constexpr uint32_t kSlotsPerWqe = 2;

class RecvQueue {
 public:
  RecvQueue() = default;
  explicit RecvQueue(void* base) { Attach(base); }
  void Attach(void* base);
  bool valid() const { return header_ != nullptr && header_->capacity != 0; }
  RecvQueueHeader* header() const { return header_; }
  // WQEs that may be posted at once (the ring has twice as many slots).
  uint32_t max_wr() const { return header_->capacity / kSlotsPerWqe; }
  uint32_t max_sge() const { return header_->max_sge; }

  // Owner: appends a WQE. Returns false when the queue is full.
  bool Post(uint64_t wr_id, const RecvSge* sge, uint32_t num_sge);
  // Anyone: takes the oldest WQE. Returns false when the queue is empty.
  bool Claim(ClaimedRecv* out);
  // Claim in two steps, for a claimer that decides on the WQE before it
  // takes it: Peek copies the oldest WQE into out and gives a ticket
  // (false: empty); ClaimPeeked takes that WQE if it is still the oldest
  // (false: another claimer took it, or the owner is resizing - nothing
  // was taken). The copy is only known whole once ClaimPeeked succeeded.
  bool Peek(ClaimedRecv* out, uint64_t* ticket) const;
  bool ClaimPeeked(uint64_t ticket);
  // WQEs posted and not yet claimed.
  uint32_t Count() const;
  // Owner (the poll of its CQ, any thread): a completion said that WQE
  // index + 1 == recv_wqe (low 32 bits, CqEntry::recv_wqe) was claimed, so
  // the claimers' head is past it and Post may refill its slot without
  // reading head. Anything that is not news is ignored.
  void NoteConsumed(uint32_t recv_wqe);
  // Owner, while it waits for messages (an empty poll of its CQ): takes the
  // cache line of the slot its next post fills for writing. Claimers read
  // that slot max_wr WQEs ago and may still hold copies of its line; the
  // post would otherwise wait for them to be invalidated - a transfer
  // between cores on the path from a received message to the reply
  // (docs/datapath.md, "Rings"). Changes no byte: a compare-and-swap that
  // writes back the value it found (and fails, changing nothing, if a post
  // filled the slot meanwhile). Once per tail; queues that resize (SRQs)
  // are not passed here.
  void OwnNextSlot();

  // Owner, holding its post lock: gives the queue room for max_wr WQEs.
  // `file_bytes` is the size of the mapped file. While the queue is closed,
  // `commit` is called with the number of posted WQEs and may refuse with
  // an errno, leaving the queue as it was. Returns 0, commit's errno, or
  // EINVAL if the file is too small.
  int Resize(uint32_t max_wr, size_t file_bytes, const std::function<int(uint32_t)>& commit);

 private:
  uint64_t Capacity() const;
  RecvWqe* Slot(uint64_t index, uint64_t capacity) const {
    return reinterpret_cast<RecvWqe*>(slots_ + (index & (capacity - 1)) * header_->wqe_stride);
  }
  RecvQueueHeader* header_ = nullptr;
  char* slots_ = nullptr;
  // A lower bound of the claimers' head index - the owner's last look at
  // head, or what a polled completion said (NoteConsumed) - so the fullness
  // check against it is conservative; spares a cache-line transfer from
  // the claimers on every post. Written by the owner's post (under its
  // lock) and its CQ's poll; read with atomic_ref. Either may store an
  // older bound than the other just did: still a bound.
  mutable uint64_t cached_head_ = 0;
  // The tail whose slot OwnNextSlot last took (its caller's: the CQ's poll).
  uint64_t owned_tail_ = ~uint64_t{0};
};

}  // namespace softverbs::datapath
