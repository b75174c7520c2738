#include "abi/ibverbs/biased_lock.h"

#include "abi/ibverbs/execution_gate.h"

namespace softverbs::provider {

namespace {

// Initial-exec: read on every post (see execution_gate.cc).
__attribute__((tls_model("initial-exec"))) thread_local char self_marker;

}  // namespace

const void* BiasedLock::Self() noexcept {
  return &self_marker;
}

void BiasedLock::LockShared(const void* me) noexcept {
  shared_.lock();
  const void* owner = owner_.load(std::memory_order_relaxed);
  if (owner == nullptr) {
    // The first taker owns it from its next hold on, if the barrier that
    // revocation needs is there.
    if (ExecutionGate::Asymmetric()) owner_.store(me, std::memory_order_relaxed);
  } else if (owner != me) {
    if (!revoked_.load(std::memory_order_relaxed)) {
      revoked_.store(true, std::memory_order_relaxed);
      ExecutionGate::Barrier();
    }
    // Pairs with the owner's release store when it leaves. It is inside a
    // post (microseconds), but may be preempted there.
    SpinBackoff backoff;
    while (owner_inside_.load(std::memory_order_acquire)) backoff.Pause();
  } else if (last_taker_ == me && ++owner_holds_in_a_row_ >= kRebiasHolds) {
    // Nobody else for a while: plain stores again from the next hold on
    // (another taker revokes under shared_, which this thread holds).
    revoked_.store(false, std::memory_order_relaxed);
    owner_holds_in_a_row_ = 0;
  } else if (last_taker_ != me) {
    owner_holds_in_a_row_ = 1;
  }
  last_taker_ = me;
}

}  // namespace softverbs::provider
