// A receive queue in shared memory (a QP's or an SRQ's; layout:
// RecvQueueHeader + slots of RecvWqe and max_sge RecvSge). The owner posts;
// any process that delivers a message claims the oldest WQE.
#pragma once

#include <cstddef>
#include <cstdint>

#include "datapath/layout.h"

namespace softverbs::datapath {

// The bytes a receive-queue file needs for max_wr WQEs of max_sge entries
// (max_wr 0: a header only, for QPs without their own receive queue).
size_t RecvQueueFileSize(uint32_t max_wr, uint32_t max_sge);
void InitRecvQueueFile(void* base, uint32_t max_wr, uint32_t max_sge);

// A WQE copied out of the ring.
struct ClaimedRecv {
  uint64_t wr_id = 0;
  uint32_t num_sge = 0;
  RecvSge sge[32];
};

class RecvQueue {
 public:
  RecvQueue() = default;
  explicit RecvQueue(void* base) { Attach(base); }
  void Attach(void* base);
  bool valid() const { return header_ != nullptr && header_->capacity != 0; }
  RecvQueueHeader* header() const { return header_; }
  uint32_t capacity() const { return header_->capacity; }
  uint32_t max_sge() const { return header_->max_sge; }

  // Owner: appends a WQE. Returns false when the queue is full.
  bool Post(uint64_t wr_id, const RecvSge* sge, uint32_t num_sge);
  // Anyone: takes the oldest WQE. Returns false when the queue is empty.
  bool Claim(ClaimedRecv* out);
  // WQEs posted and not yet claimed.
  uint32_t Count() const;

 private:
  RecvWqe* Slot(uint64_t index) const {
    return reinterpret_cast<RecvWqe*>(slots_ + (index & mask_) * header_->wqe_stride);
  }
  RecvQueueHeader* header_ = nullptr;
  char* slots_ = nullptr;
  uint64_t mask_ = 0;
};

}  // namespace softverbs::datapath
