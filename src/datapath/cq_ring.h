// A completion queue ring in shared memory (layout: CqHeader + CqEntry[]).
// Producers are any process completing work for the CQ; the consumer is the
// CQ's owner. No syscall: a CAS to reserve, a release store to publish.
#pragma once

#include <cstddef>
#include <cstdint>

#include "datapath/layout.h"

namespace softverbs::datapath {

// The bytes a CQ file needs for at least `cqe` entries.
size_t CqFileSize(uint32_t cqe);
// Writes the header of a fresh CQ file.
void InitCqFile(void* base, uint32_t cqe, uint32_t cqn);

class CqRing {
 public:
  CqRing() = default;
  explicit CqRing(void* base) { Attach(base); }
  void Attach(void* base);
  bool valid() const { return header_ != nullptr; }
  CqHeader* header() const { return header_; }

  // Appends one completion. Returns false when the
  // ring is full (a CQ overrun, counted in header->overruns).
  bool Push(const Completion& completion);
  // Whether the completion just pushed must raise a completion event:
  // disarms the CQ if it was armed for this kind of completion.
  bool TakeArm(bool solicited_or_error);
  // Copies out the oldest published completion. Owner only.
  bool Peek(Completion* out) const;
  void Pop();
  // Published completions not yet consumed (approximate for producers).
  uint64_t Depth() const;

 private:
  CqHeader* header_ = nullptr;
  CqEntry* entries_ = nullptr;
  uint64_t mask_ = 0;
};

}  // namespace softverbs::datapath
