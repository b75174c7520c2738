#include "datapath/cq_ring.h"

namespace softverbs::datapath {

namespace {
// Room for a full CQ plus the receive completions that peers may add while
// the owner is busy: twice the asked size, at least 64.
uint32_t CapacityFor(uint32_t cqe) {
  return RoundUpPow2(cqe * 2 + 2 < 64 ? 64 : cqe * 2 + 2);
}
}  // namespace

size_t CqFileSize(uint32_t cqe) {
  return sizeof(CqHeader) + static_cast<size_t>(CapacityFor(cqe)) * sizeof(CqEntry);
}

void InitCqFile(void* base, uint32_t cqe, uint32_t cqn) {
  auto* h = static_cast<CqHeader*>(base);
  h->magic = kCqMagic;
  h->layout_version = kLayoutVersion;
  h->capacity = CapacityFor(cqe);
  h->entry_size = sizeof(CqEntry);
  h->cqn = cqn;
}

void CqRing::Attach(void* base) {
  header_ = static_cast<CqHeader*>(base);
  entries_ = reinterpret_cast<CqEntry*>(header_ + 1);
  mask_ = header_->capacity - 1;
}

bool CqRing::Push(const Completion& completion) {
  uint64_t tail = header_->tail.load(std::memory_order_relaxed);
  for (;;) {
    uint64_t head = header_->head.load(std::memory_order_acquire);
    if (tail - head > mask_) {
      header_->overruns.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (header_->tail.compare_exchange_weak(tail, tail + 1, std::memory_order_acq_rel)) break;
  }
  CqEntry& slot = entries_[tail & mask_];
  // The completion, then seq with release: the consumer sees a whole entry.
  slot.completion = completion;
  slot.seq.store(static_cast<uint32_t>(tail + 1), std::memory_order_release);
  return true;
}

bool CqRing::TakeArm(bool solicited_or_error) {
  uint32_t armed = header_->armed.load(std::memory_order_seq_cst);
  while (armed == 1 || (armed == 2 && solicited_or_error)) {
    if (header_->armed.compare_exchange_weak(armed, 0, std::memory_order_seq_cst)) {
      header_->events_raised.fetch_add(1, std::memory_order_seq_cst);
      return true;
    }
  }
  return false;
}

bool CqRing::Peek(Completion* out) const {
  uint64_t head = header_->head.load(std::memory_order_relaxed);
  const CqEntry& slot = entries_[head & mask_];
  if (slot.seq.load(std::memory_order_acquire) != static_cast<uint32_t>(head + 1)) return false;
  *out = slot.completion;
  return true;
}

void CqRing::Pop() {
  header_->head.fetch_add(1, std::memory_order_release);
}

uint64_t CqRing::Depth() const {
  return header_->tail.load(std::memory_order_acquire) -
         header_->head.load(std::memory_order_acquire);
}

}  // namespace softverbs::datapath
