// The locks a program's posting and polling thread takes on every post and
// poll (Qp::sq_lock, Qp::rq_lock, Cq::poll_lock): a SpinLock that one thread
// - the first to take it, in nearly every program the thread that posts or
// polls - takes and releases without a locked instruction. Neither is for
// a signal handler that takes the lock its thread may be taking or holding
// (a SpinLock hangs the handler; this one may let it in beside the thread).
//
// Why: ibv_post_send takes the send queue's lock first, and on x86 a
// locked instruction waits until every store before it is written. The
// store before it is the previous post's completion, into the cache line
// the receiver is polling: the post waited for that line to move to the
// sender before it could do anything else. Pinned `ib_send_bw -s 8`, Intel
// Xeon VM, five runs each alternating: 9.49-9.92 M/s with the SpinLock,
// 9.99-10.47 without any lock (docs/datapath.md, "Message rate of SEND").
//
// How: the owner marks itself inside with a plain store and then reads
// whether the bias is revoked; another thread that wants the lock takes
// the SpinLock underneath, marks the bias revoked, runs
// membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) (ExecutionGate::Barrier:
// every running thread of the process executes a full barrier) and waits
// until the owner is not inside. The barrier stands for the fence the owner
// does not execute between its store and its load (a Dekker protocol with
// the expensive half on the rare side, as the execution gate's): either
// the owner's load comes after the barrier and sees the revocation, or its
// store is visible to the revoker once the barrier returns. From then on
// the owner takes the SpinLock too, until it has taken it kRebiasHolds
// times in a row with no other thread in between: then it clears the
// revocation (holding the SpinLock) and goes back to its plain stores.
// Another thread's first take after that pays one barrier again - tens of
// microseconds in these VMs (an interrupt to each CPU running the process),
// at most once per kRebiasHolds holds of the owner.
//
// Where membarrier is not available (ExecutionGate::Asymmetric() false) no
// thread is ever the owner: a SpinLock and two loads.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/spin_lock.h"

namespace softverbs::provider {

class BiasedLock {
 public:
  BiasedLock() = default;
  BiasedLock(const BiasedLock&) = delete;
  BiasedLock& operator=(const BiasedLock&) = delete;

  void lock() noexcept {
    const void* me = Self();
    if (owner_.load(std::memory_order_relaxed) == me) [[likely]] {
      owner_inside_.store(true, std::memory_order_relaxed);
      // A compiler barrier only: the revoker's membarrier orders the CPU.
      std::atomic_signal_fence(std::memory_order_seq_cst);
      if (!revoked_.load(std::memory_order_relaxed)) [[likely]] {
        return;
      }
      owner_inside_.store(false, std::memory_order_release);
    }
    LockShared(me);
  }

  void unlock() noexcept {
    if (owner_inside_.load(std::memory_order_relaxed) &&
        owner_.load(std::memory_order_relaxed) == Self()) {
      owner_inside_.store(false, std::memory_order_release);
      return;
    }
    shared_.unlock();
  }

  // Holds of the owner in a row, with nobody else in between, after which
  // it takes the lock with plain stores again.
  static constexpr uint32_t kRebiasHolds = 1024;

  // For tests: whether the calling thread is the owner and the bias is not
  // revoked (its next lock takes no locked instruction).
  bool BiasedToCaller() const noexcept {
    return owner_.load(std::memory_order_relaxed) == Self() &&
           !revoked_.load(std::memory_order_relaxed);
  }

 private:
  // The calling thread's identity: the address of a thread-local byte
  // (unique among live threads).
  static const void* Self() noexcept;
  // Through the SpinLock (anyone but an owner whose bias holds): makes the
  // first taker the owner, revokes the bias for another, counts the
  // owner's holds toward the rebias.
  void LockShared(const void* me) noexcept;

  // The owner's line: the owner reads and writes it on every hold, others
  // write it only to revoke.
  std::atomic<const void*> owner_{nullptr};  // set once, by the first taker
  std::atomic<bool> owner_inside_{false};    // the owner holds it by plain stores
  std::atomic<bool> revoked_{false};         // the owner must take shared_
  // Under shared_: who took it last, and how many times in a row the owner has.
  const void* last_taker_ = nullptr;
  uint32_t owner_holds_in_a_row_ = 0;
  SpinLock shared_;
};

}  // namespace softverbs::provider
