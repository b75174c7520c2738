// A completion queue ring in shared memory (layout: CqHeader + CqEntry[]).
// Producers are any process completing work for the CQ; the consumer is the
// CQ's owner. No syscall: a CAS to reserve, a release store to publish.
//
// Resizing in place (ibv_resize_cq): the file has room for the largest CQ
// (max_cqe), only the first `capacity` slots are in use and only their pages
// are ever touched. The `tail` word carries, besides the index (bits 0-47),
// an epoch (bits 48-62) and a closed bit (63). The owner, holding its
// consumer lock, closes the ring (producers wait), waits until every
// reserved slot is published, moves the outstanding completions to their
// slots under the new capacity and reopens with the next epoch. Producers
// read the capacity after their reservation (which a resize waits for), and
// a reservation attempt that started before a resize fails its CAS on the
// new epoch. Peers never remap: the file and its address stay the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "datapath/layout.h"

namespace softverbs::datapath {

// The bytes a CQ file needs for at least `cqe` entries (the daemon makes
// every CQ file for the device's max_cqe: the ring may grow up to that).
size_t CqFileSize(uint32_t cqe);
// Writes the header of a fresh CQ file, in use for `cqe` entries.
void InitCqFile(void* base, uint32_t cqe, uint32_t cqn);

// Whether a producer about to reserve slot `index` (the tail it read) finds
// the ring full, `head` being the consumer's head read after it (or a bound
// of it another thread cached): index is `capacity` or more slots past
// head. A head past index means index is stale - other producers reserved
// it and the consumer took it meanwhile -, not a full ring: the
// reservation's CAS fails and is tried again at a fresh tail. (index - head
// alone underflowed there, and a completion was dropped as an overrun.)
inline bool CqRingFullAt(uint64_t index, uint64_t head, uint64_t capacity) {
  return index >= head && index - head >= capacity;
}

class CqRing {
 public:
  CqRing() = default;
  explicit CqRing(void* base) { Attach(base); }
  void Attach(void* base);
  bool valid() const { return header_ != nullptr; }
  CqHeader* header() const { return header_; }

  // Appends one completion; recv_wqe as CqEntry::recv_wqe (0: not said).
  // Returns false when the ring is full (a CQ overrun, counted in
  // header->overruns). on_reserved (if any) runs once the slot is reserved,
  // before the completion is published: what must be true before anyone
  // can see it, and seen by a resize as soon as the slot counts
  // (WireQp::CompleteFront retires its work request there).
  struct OnReserved {
    void (*run)(void* arg);
    void* arg;
  };
  bool Push(const Completion& completion, uint32_t recv_wqe = 0,
            const OnReserved* on_reserved = nullptr);
  // Owner (ibv_req_notify_cq): arms the CQ for the next completion, or the
  // next solicited or error one. The owner polls after arming.
  void Arm(bool solicited_only);
  // Whether the completion just pushed must raise a completion event:
  // disarms the CQ if it was armed for this kind of completion (and, under
  // moderation, cq_count completions came or cq_period passed).
  // Arm-then-poll against Push-then-TakeArm is a Dekker hand-off: both sides
  // put a full fence between their write and their read, so at least one of
  // them sees the other (the owner the completion, or the producer the arm).
  bool TakeArm(bool solicited_or_error);
  // Owner (ibv_modify_cq): completion-event moderation, CqHeader::moderation.
  void SetModeration(uint16_t count, uint16_t period_us);
  // Whether moderation is on (both values non-zero); *period_us its period.
  bool Moderated(uint32_t* period_us) const;
  // The moderation timer, for the owner: nanoseconds until the armed CQ's
  // event is due (0: due now, fire it with Disarm), or -1 when the CQ is not
  // armed or not moderated. An armed CQ with no completion yet answers half
  // its period: a deferred completion may come at any time.
  int64_t ModerationDue(uint64_t now);
  // Disarms an armed CQ and counts the event; false if it was not armed.
  bool Disarm();
  // Copies out the oldest published completion (and, if asked, its
  // CqEntry::recv_wqe). Owner only.
  bool Peek(Completion* out, uint32_t* recv_wqe = nullptr) const;
  void Pop();
  // Published completions not yet consumed (approximate for producers).
  uint64_t Depth() const;

  // Owner, holding its consumer lock: gives the ring room for `cqe`
  // entries. `file_bytes` is the size of the mapped file. While the ring is
  // closed, `commit` is called with the number of outstanding completions
  // and may refuse with an errno (e.g. EINVAL: more outstanding than cqe),
  // leaving the ring as it was. Returns 0, commit's errno, EINVAL if the
  // file is too small, or EAGAIN if a producer never published its slot.
  int Resize(uint32_t cqe, size_t file_bytes, const std::function<int(uint64_t)>& commit);

  // Owner, holding its consumer lock: removes the outstanding completions
  // `drop` picks (a QP's, when it moves to RESET or is destroyed, as
  // libmlx5's mlx5_cq_clean), keeping the others in order. Producers go on
  // pushing meanwhile: the kept entries are packed towards the tail end of
  // [head, tail) and head moves forward over the freed slots, so tail never
  // goes back and no producer's slot is touched. Completions pushed after
  // the call started are not looked at. Returns how many were removed.
  uint64_t Clean(const std::function<bool(const Completion&)>& drop);

 private:
  uint64_t Capacity() const;
  CqHeader* header_ = nullptr;
  CqEntry* entries_ = nullptr;
  // A producer's last look at the consumer's head: a lower bound, so a
  // fullness check against it is conservative. It spares a cache-line
  // transfer from the consumer on every push (read with atomic_ref: several
  // threads of this process may push).
  mutable uint64_t cached_head_ = 0;
};

}  // namespace softverbs::datapath
