#include "datapath/recv_queue.h"

#include <string.h>

namespace softverbs::datapath {

size_t RecvQueueFileSize(uint32_t max_wr, uint32_t max_sge) {
  if (max_wr == 0) return sizeof(RecvQueueHeader);
  if (max_sge == 0) max_sge = 1;
  return sizeof(RecvQueueHeader) +
         static_cast<size_t>(RoundUpPow2(max_wr)) * (sizeof(RecvWqe) + max_sge * sizeof(RecvSge));
}

void InitRecvQueueFile(void* base, uint32_t max_wr, uint32_t max_sge) {
  auto* h = static_cast<RecvQueueHeader*>(base);
  if (max_sge == 0) max_sge = 1;
  h->magic = kRecvQueueMagic;
  h->layout_version = kLayoutVersion;
  h->capacity = max_wr ? RoundUpPow2(max_wr) : 0;
  h->max_sge = max_sge;
  h->wqe_stride = sizeof(RecvWqe) + max_sge * sizeof(RecvSge);
}

void RecvQueue::Attach(void* base) {
  header_ = static_cast<RecvQueueHeader*>(base);
  slots_ = reinterpret_cast<char*>(header_ + 1);
  mask_ = header_->capacity ? header_->capacity - 1 : 0;
}

bool RecvQueue::Post(uint64_t wr_id, const RecvSge* sge, uint32_t num_sge) {
  uint64_t tail = header_->tail.load(std::memory_order_relaxed);
  uint64_t head = header_->head.load(std::memory_order_acquire);
  if (tail - head >= header_->capacity) return false;
  RecvWqe* wqe = Slot(tail);
  wqe->wr_id = wr_id;
  wqe->num_sge = num_sge;
  memcpy(wqe + 1, sge, num_sge * sizeof(RecvSge));
  header_->tail.store(tail + 1, std::memory_order_release);
  return true;
}

bool RecvQueue::Claim(ClaimedRecv* out) {
  uint64_t head = header_->head.load(std::memory_order_acquire);
  for (;;) {
    uint64_t tail = header_->tail.load(std::memory_order_acquire);
    if (head >= tail) return false;
    // Copy first, then claim: the owner refills slot `head` only after head
    // moved past it, so a successful CAS proves the copy was not torn.
    const RecvWqe* wqe = Slot(head);
    out->wr_id = wqe->wr_id;
    out->num_sge = wqe->num_sge;
    if (out->num_sge > header_->max_sge || out->num_sge > 32) out->num_sge = 0;
    memcpy(out->sge, wqe + 1, out->num_sge * sizeof(RecvSge));
    if (header_->head.compare_exchange_weak(head, head + 1, std::memory_order_acq_rel)) {
      return true;
    }
  }
}

uint32_t RecvQueue::Count() const {
  uint64_t tail = header_->tail.load(std::memory_order_acquire);
  uint64_t head = header_->head.load(std::memory_order_acquire);
  return tail > head ? static_cast<uint32_t>(tail - head) : 0;
}

}  // namespace softverbs::datapath
