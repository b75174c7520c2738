#include "datapath/recv_queue.h"

#include <errno.h>
#include <string.h>

#include <atomic>
#include <vector>

#include "datapath/ring_word.h"

namespace softverbs::datapath {

namespace rw = ring_word;

namespace {
// The capacity in use; it changes only while head is closed.
std::atomic_ref<uint32_t> CapacityRef(RecvQueueHeader* h) {
  return std::atomic_ref<uint32_t>(h->capacity);
}

// Bytes per slot: the WQE and its SGEs, rounded up to whole cache lines.
size_t WqeStride(uint32_t max_sge) {
  return (sizeof(RecvWqe) + max_sge * sizeof(RecvSge) + 63) & ~size_t{63};
}
}  // namespace

size_t RecvQueueFileSize(uint32_t max_wr, uint32_t max_sge) {
  if (max_wr == 0) return sizeof(RecvQueueHeader);
  if (max_sge == 0) max_sge = 1;
  return sizeof(RecvQueueHeader) + size_t{kSlotsPerWqe} * RoundUpPow2(max_wr) * WqeStride(max_sge);
}

void InitRecvQueueFile(void* base, uint32_t max_wr, uint32_t max_sge) {
  auto* h = static_cast<RecvQueueHeader*>(base);
  if (max_sge == 0) max_sge = 1;
  h->magic = kRecvQueueMagic;
  h->layout_version = kLayoutVersion;
  h->capacity = max_wr ? kSlotsPerWqe * RoundUpPow2(max_wr) : 0;
  h->max_sge = max_sge;
  h->wqe_stride = static_cast<uint32_t>(WqeStride(max_sge));
}

void RecvQueue::Attach(void* base) {
  header_ = static_cast<RecvQueueHeader*>(base);
  slots_ = reinterpret_cast<char*>(header_ + 1);
}

uint64_t RecvQueue::Capacity() const {
  return CapacityRef(header_).load(std::memory_order_acquire);
}

bool RecvQueue::Post(uint64_t wr_id, const RecvSge* sge, uint32_t num_sge) {
  // The owner's post lock excludes a resize: the capacity is stable here.
  const uint64_t capacity = Capacity();
  const uint64_t max_wr = capacity / kSlotsPerWqe;
  uint64_t tail = header_->tail.load(std::memory_order_relaxed);
  // Acquire: a bound NoteConsumed stored comes after the claimer's copy of
  // the WQE whose slot this post may refill.
  std::atomic_ref<uint64_t> cached(cached_head_);
  uint64_t head = cached.load(std::memory_order_acquire);
  if (tail - head >= max_wr) {
    head = rw::Index(header_->head.load(std::memory_order_acquire));
    cached.store(head, std::memory_order_release);
    if (tail - head >= max_wr) return false;
  }
  RecvWqe* wqe = Slot(tail, capacity);
  wqe->wr_id = wr_id;
  wqe->num_sge = num_sge;
  memcpy(static_cast<void*>(wqe + 1), sge, num_sge * sizeof(RecvSge));
  // Release: a claimer that acquires seq == tail + 1 sees the whole WQE.
  wqe->seq.store(static_cast<uint32_t>(tail + 1), std::memory_order_release);
  // tail serves the owner, Count() and resize; claimers do not read it.
  header_->tail.store(tail + 1, std::memory_order_release);
  return true;
}

bool RecvQueue::Peek(ClaimedRecv* out, uint64_t* ticket) const {
  const uint64_t w = rw::WaitOpen(header_->head);
  if (w & rw::kClosed) return false;  // the resizing owner is gone
  const uint64_t head = rw::Index(w);
  // The slot's seq says whether WQE `head` is posted (acquire: pairs with
  // the owner's release store after writing it). A slot not yet refilled
  // holds head + 1 - capacity; one never used since a resize holds a
  // value that cannot match either (see Resize). Reading the capacity
  // after w (acquired) gives the capacity of w's epoch.
  const RecvWqe* wqe = Slot(head, Capacity());
  if (wqe->seq.load(std::memory_order_acquire) != static_cast<uint32_t>(head + 1)) return false;
  out->index = head;
  out->wr_id = wqe->wr_id;
  out->num_sge = wqe->num_sge;
  if (out->num_sge > header_->max_sge || out->num_sge > 32) out->num_sge = 0;
  // Entry by entry: a memcpy of a variable size became `rep movsq`, whose
  // start-up cost was a third of this function's time.
  const RecvSge* sge = reinterpret_cast<const RecvSge*>(wqe + 1);
  for (uint32_t i = 0; i < out->num_sge; ++i) out->sge[i] = sge[i];
  *ticket = w;
  return true;
}

bool RecvQueue::ClaimPeeked(uint64_t ticket) {
  // Copy first, then claim: the owner refills slot `head` only after head
  // moved past it, and moves slots only with head closed (a new epoch),
  // so a successful CAS proves the copy was not torn.
  return header_->head.compare_exchange_strong(ticket, ticket + 1, std::memory_order_acq_rel);
}

void RecvQueue::OwnNextSlot() {
  if (!valid()) return;
  const uint64_t tail = header_->tail.load(std::memory_order_relaxed);
  if (tail == owned_tail_) return;
  owned_tail_ = tail;
  std::atomic<uint32_t>& seq = Slot(tail, Capacity())->seq;
  uint32_t seen = seq.load(std::memory_order_relaxed);
  seq.compare_exchange_strong(seen, seen, std::memory_order_relaxed);
}

bool RecvQueue::Claim(ClaimedRecv* out) {
  uint64_t ticket = 0;
  while (Peek(out, &ticket)) {
    if (ClaimPeeked(ticket)) return true;
  }
  return false;
}

void RecvQueue::NoteConsumed(uint32_t recv_wqe) {
  if (recv_wqe == 0 || !header_) return;
  std::atomic_ref<uint64_t> cached(cached_head_);
  const uint64_t known = cached.load(std::memory_order_relaxed);
  // The full index past the WQE: the next value above `known` with these
  // low 32 bits. It is news only if it is above `known` and at most the
  // owner's tail (a claimed WQE was posted); a stale note is ignored.
  const uint64_t past = known + static_cast<uint32_t>(recv_wqe - static_cast<uint32_t>(known));
  if (past == known || past > header_->tail.load(std::memory_order_relaxed)) return;
  cached.store(past, std::memory_order_release);
}

uint32_t RecvQueue::Count() const {
  uint64_t tail = header_->tail.load(std::memory_order_acquire);
  uint64_t head = rw::Index(header_->head.load(std::memory_order_acquire));
  return tail > head ? static_cast<uint32_t>(tail - head) : 0;
}

int RecvQueue::Resize(uint32_t max_wr, size_t file_bytes,
                      const std::function<int(uint32_t)>& commit) {
  const uint64_t new_capacity = uint64_t{kSlotsPerWqe} * RoundUpPow2(max_wr);
  const size_t stride = header_->wqe_stride;
  if (sizeof(RecvQueueHeader) + new_capacity * stride > file_bytes) return EINVAL;
  const uint64_t old_capacity = Capacity();
  const uint64_t closed = header_->head.fetch_or(rw::kClosed, std::memory_order_acq_rel);
  const uint64_t head = rw::Index(closed);
  const uint64_t tail = header_->tail.load(std::memory_order_relaxed);
  if (int err = commit(static_cast<uint32_t>(tail - head))) {
    header_->head.store(closed, std::memory_order_release);
    return err;
  }
  if (new_capacity != old_capacity) {
    std::vector<char> posted((tail - head) * stride);
    for (uint64_t i = head; i < tail; ++i) {
      memcpy(&posted[(i - head) * stride], Slot(i, old_capacity), stride);
    }
    for (uint64_t i = head; i < tail; ++i) {
      RecvWqe* wqe = Slot(i, new_capacity);
      memcpy(static_cast<void*>(wqe), &posted[(i - head) * stride], stride);
      wqe->seq.store(static_cast<uint32_t>(i + 1), std::memory_order_relaxed);
    }
    // The slots the next posts fill may hold a seq from any earlier index
    // (or 0, never used); give each one that cannot match its next index
    // even after the 32-bit seq wraps. The reopening store below releases
    // these stores to claimers.
    for (uint64_t i = tail; i < head + new_capacity; ++i) {
      Slot(i, new_capacity)
          ->seq.store(static_cast<uint32_t>(i + 1 - new_capacity), std::memory_order_relaxed);
    }
    CapacityRef(header_).store(static_cast<uint32_t>(new_capacity), std::memory_order_release);
  }
  header_->head.store(rw::Reopened(closed), std::memory_order_release);
  return 0;
}

}  // namespace softverbs::datapath
