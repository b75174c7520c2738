#include "datapath/cq_ring.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <utility>
#include <vector>

#include "datapath/ring_word.h"
#include "datapath/timers.h"

namespace softverbs::datapath {

namespace rw = ring_word;

namespace {
// Room for a full CQ plus the receive completions that peers may add while
// the owner is busy: twice the asked size, at least 64.
uint32_t CapacityFor(uint32_t cqe) {
  return RoundUpPow2(cqe * 2 + 2 < 64 ? 64 : cqe * 2 + 2);
}

// The capacity in use; it changes only while the ring is closed.
std::atomic_ref<uint32_t> CapacityRef(CqHeader* h) {
  return std::atomic_ref<uint32_t>(h->capacity);
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
}

uint64_t CqRing::Capacity() const {
  return CapacityRef(header_).load(std::memory_order_acquire);
}

bool CqRing::Push(const Completion& completion, uint32_t recv_wqe, const OnReserved* on_reserved) {
  uint64_t w = rw::WaitOpen(header_->tail);
  uint64_t index = 0;
  for (;;) {
    if (w & rw::kClosed) {  // the resizing owner is gone
      header_->overruns.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    index = rw::Index(w);
    std::atomic_ref<uint64_t> cached(cached_head_);
    uint64_t head = cached.load(std::memory_order_relaxed);
    if (CqRingFullAt(index, head, Capacity())) {
      head = header_->head.load(std::memory_order_acquire);
      cached.store(head, std::memory_order_relaxed);
      if (CqRingFullAt(index, head, Capacity())) {
        header_->overruns.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
    }
    if (header_->tail.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel)) break;
    if (w & rw::kClosed) w = rw::WaitOpen(header_->tail);
  }
  if (on_reserved) on_reserved->run(on_reserved->arg);
  // A resize waits for this slot to be published, so the capacity read now
  // is the one the reservation was made under.
  CqEntry& slot = entries_[index & (Capacity() - 1)];
  // The completion, then seq with release: the consumer sees a whole entry.
  slot.recv_wqe = recv_wqe;
  slot.completion = completion;
  if (header_->flags.load(std::memory_order_relaxed) & kCqStampCompletions) {
    slot.completion.timestamp = DeviceClockNs();
  }
  slot.seq.store(static_cast<uint32_t>(index + 1), std::memory_order_release);
  return true;
}

// The arm and the completions form a Dekker hand-off (cq_ring.h): the
// owner writes armed then reads the ring, a producer writes its slot then
// reads armed. A release store followed by a load of another word may be
// reordered (x86's store buffer does it), so each side fences between its
// write and its read; otherwise both can miss the other, and the completion
// sits in an armed CQ that never raises its event.
void CqRing::Arm(bool solicited_only) {
  header_->since_arm.store(0, std::memory_order_relaxed);
  header_->first_since_arm_ns.store(0, std::memory_order_relaxed);
  header_->armed.store(solicited_only ? 2 : 1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void CqRing::SetModeration(uint16_t count, uint16_t period_us) {
  header_->moderation.store(count | (static_cast<uint32_t>(period_us) << 16),
                            std::memory_order_release);
}

bool CqRing::Moderated(uint32_t* period_us) const {
  const uint32_t m = header_->moderation.load(std::memory_order_acquire);
  *period_us = m >> 16;
  return (m & 0xffff) != 0 && (m >> 16) != 0;
}

bool CqRing::Disarm() {
  uint32_t armed = header_->armed.load(std::memory_order_seq_cst);
  while (armed != 0) {
    if (header_->armed.compare_exchange_weak(armed, 0, std::memory_order_seq_cst)) {
      header_->events_raised.fetch_add(1, std::memory_order_seq_cst);
      return true;
    }
  }
  return false;
}

bool CqRing::TakeArm(bool solicited_or_error) {
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the slot published by Push first
  uint32_t armed = header_->armed.load(std::memory_order_seq_cst);
  if (!(armed == 1 || (armed == 2 && solicited_or_error))) return false;
  uint32_t period_us = 0;
  if (Moderated(&period_us)) {
    // Counted only while armed: the event waits for cq_count of them, or
    // for cq_period after the first (ModerationDue, the owner's timer).
    const uint32_t count = header_->moderation.load(std::memory_order_relaxed) & 0xffff;
    const uint32_t n = header_->since_arm.fetch_add(1, std::memory_order_acq_rel) + 1;
    const uint64_t now = DeviceClockNs();
    uint64_t first = 0;  // becomes the first completion's time, whoever wrote it
    if (header_->first_since_arm_ns.compare_exchange_strong(first, now,
                                                            std::memory_order_acq_rel)) {
      first = now;
    }
    if (n < count && now - first < period_us * 1000ull) return false;
  }
  while (armed == 1 || (armed == 2 && solicited_or_error)) {
    if (header_->armed.compare_exchange_weak(armed, 0, std::memory_order_seq_cst)) {
      header_->events_raised.fetch_add(1, std::memory_order_seq_cst);
      return true;
    }
  }
  return false;
}

int64_t CqRing::ModerationDue(uint64_t now) {
  uint32_t period_us = 0;
  if (!Moderated(&period_us) || header_->armed.load(std::memory_order_acquire) == 0) return -1;
  const uint64_t period_ns = period_us * 1000ull;
  const uint64_t first = header_->first_since_arm_ns.load(std::memory_order_acquire);
  if (first == 0) return static_cast<int64_t>(period_ns / 2);  // none yet: look again
  if (now - first >= period_ns) return 0;
  return static_cast<int64_t>(first + period_ns - now);
}

bool CqRing::Peek(Completion* out, uint32_t* recv_wqe) const {
  uint64_t head = header_->head.load(std::memory_order_relaxed);
  const CqEntry& slot = entries_[head & (Capacity() - 1)];
  if (slot.seq.load(std::memory_order_acquire) != static_cast<uint32_t>(head + 1)) return false;
  *out = slot.completion;
  if (recv_wqe) *recv_wqe = slot.recv_wqe;
  return true;
}

void CqRing::Pop() {
  // Only the owner moves head, under its consumer lock: no RMW needed.
  header_->head.store(header_->head.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

uint64_t CqRing::Depth() const {
  return rw::Index(header_->tail.load(std::memory_order_acquire)) -
         header_->head.load(std::memory_order_acquire);
}

int CqRing::Resize(uint32_t cqe, size_t file_bytes, const std::function<int(uint64_t)>& commit) {
  const uint64_t new_capacity = CapacityFor(cqe);
  if (sizeof(CqHeader) + new_capacity * sizeof(CqEntry) > file_bytes) return EINVAL;
  const uint64_t old_capacity = Capacity();
  const uint64_t closed = header_->tail.fetch_or(rw::kClosed, std::memory_order_acq_rel);
  auto reopen = [&](uint64_t w) { header_->tail.store(w, std::memory_order_release); };
  const uint64_t head = header_->head.load(std::memory_order_relaxed);
  const uint64_t end = rw::Index(closed);
  // Producers that reserved before the close publish their slots.
  const uint64_t deadline = rw::NowNs() + 1000000000ull;
  for (uint64_t i = head; i < end; ++i) {
    const CqEntry& slot = entries_[i & (old_capacity - 1)];
    while (slot.seq.load(std::memory_order_acquire) != static_cast<uint32_t>(i + 1)) {
      if (rw::NowNs() > deadline) {
        reopen(closed);
        return EAGAIN;
      }
      sched_yield();
    }
  }
  if (int err = commit(end - head)) {
    reopen(closed);
    return err;
  }
  if (new_capacity != old_capacity) {
    std::vector<std::pair<uint32_t, Completion>> outstanding;  // recv_wqe, completion
    outstanding.reserve(end - head);
    for (uint64_t i = head; i < end; ++i) {
      const CqEntry& slot = entries_[i & (old_capacity - 1)];
      outstanding.emplace_back(slot.recv_wqe, slot.completion);
    }
    // Same indexes, new slots: a stale seq in a slot belongs to an index
    // below `end` and never matches a later one.
    for (uint64_t i = head; i < end; ++i) {
      CqEntry& slot = entries_[i & (new_capacity - 1)];
      slot.recv_wqe = outstanding[i - head].first;
      slot.completion = outstanding[i - head].second;
      slot.seq.store(static_cast<uint32_t>(i + 1), std::memory_order_relaxed);
    }
    CapacityRef(header_).store(static_cast<uint32_t>(new_capacity), std::memory_order_release);
    if (new_capacity < old_capacity) {
      // Give the pages above the new capacity back (shmem: MADV_REMOVE frees them).
      const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
      uintptr_t from = reinterpret_cast<uintptr_t>(entries_ + new_capacity);
      uintptr_t to = reinterpret_cast<uintptr_t>(entries_ + old_capacity);
      from = (from + page - 1) & ~(page - 1);
      to &= ~(page - 1);
      if (to > from) madvise(reinterpret_cast<void*>(from), to - from, MADV_REMOVE);
    }
  }
  reopen(rw::Reopened(closed));
  return 0;
}

uint64_t CqRing::Clean(const std::function<bool(const Completion&)>& drop) {
  // No resize can run (it needs the consumer lock we hold), so the capacity
  // is stable and tail is open.
  const uint64_t capacity = Capacity();
  const uint64_t head = header_->head.load(std::memory_order_relaxed);
  uint64_t end = rw::Index(header_->tail.load(std::memory_order_acquire));
  // Every slot reserved before `end` must be published before it is read.
  // A producer that never publishes (it died inside Push) would stall the
  // consumer there anyway: clean only the part before it.
  const uint64_t deadline = rw::NowNs() + 1000000000ull;
  for (uint64_t i = head; i < end; ++i) {
    const CqEntry& slot = entries_[i & (capacity - 1)];
    while (slot.seq.load(std::memory_order_acquire) != static_cast<uint32_t>(i + 1)) {
      if (rw::NowNs() > deadline) {
        end = i;
        break;
      }
      sched_yield();
    }
  }
  // Pack the kept entries into [new_head, end), last first so nothing is
  // overwritten before it is read. Producers only write indexes >= end
  // within one capacity of the old head: never these slots. Every slot in
  // [head, end) already holds seq == index + 1, so moving a completion
  // needs no new seq; the owner alone reads completions.
  uint64_t dst = end;
  for (uint64_t i = end; i-- > head;) {
    const CqEntry& slot = entries_[i & (capacity - 1)];
    if (drop(slot.completion)) continue;
    --dst;
    if (dst != i) {
      CqEntry& to = entries_[dst & (capacity - 1)];
      to.recv_wqe = slot.recv_wqe;
      to.completion = slot.completion;
    }
  }
  if (dst != head) {
    // Release: our reads of the slots below dst happen before a producer,
    // acquiring the new head, reuses them. The stale seq left there
    // belongs to an index below the new head and never matches a later one.
    header_->head.store(dst, std::memory_order_release);
  }
  return dst - head;
}

}  // namespace softverbs::datapath
