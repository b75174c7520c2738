// The send queue's lock (src/abi/ibverbs/biased_lock.h): whoever takes it -
// the owner by its plain stores, another thread through the spin lock after
// revoking the bias - holds it alone; the bias goes to the first taker, is
// revoked by another taker and comes back after the owner's holds alone.
// Run twice (CMakeLists.txt): with membarrier, and with
// SOFTVERBS_TEST_SYMMETRIC_FENCES=1, where nobody is ever the owner.
#include "abi/ibverbs/biased_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "abi/ibverbs/execution_gate.h"

namespace softverbs::provider {
namespace {

TEST(BiasedLock, TheFirstTakerOwnsItFromItsNextHoldWhereMembarrierIsThere) {
  BiasedLock lock;
  EXPECT_FALSE(lock.BiasedToCaller());
  lock.lock();
  lock.unlock();
  EXPECT_EQ(lock.BiasedToCaller(), ExecutionGate::Asymmetric());
  std::thread([&] {
    EXPECT_FALSE(lock.BiasedToCaller());  // another thread is not the owner
  }).join();
}

TEST(BiasedLock, AnotherTakerRevokesTheBiasAndTheOwnersHoldsAloneBringItBack) {
  if (!ExecutionGate::Asymmetric()) GTEST_SKIP() << "no owner without membarrier (the other run)";
  BiasedLock lock;
  lock.lock();
  lock.unlock();
  ASSERT_TRUE(lock.BiasedToCaller());
  std::thread([&] { std::lock_guard guard(lock); }).join();
  EXPECT_FALSE(lock.BiasedToCaller());
  // The first of the owner's holds after the other's starts the count;
  // the bias is back once it has held it kRebiasHolds times in a row.
  for (uint32_t i = 0; i + 1 < BiasedLock::kRebiasHolds; ++i) {
    lock.lock();
    lock.unlock();
  }
  EXPECT_FALSE(lock.BiasedToCaller());
  lock.lock();
  lock.unlock();
  EXPECT_TRUE(lock.BiasedToCaller());
}

// The owner adds to a plain counter on its fast path while other threads
// take the lock now and then (each revoking the bias, the owner then
// winning it back); no addition is lost. The owner sometimes stays inside
// for milliseconds (a large WR's copy), so revokers wait for it to leave.
TEST(BiasedLock, ExcludesTheOwnerAndEveryOtherTaker) {
  BiasedLock lock;
  uint64_t counter = 0;
  lock.lock();  // this thread owns it
  lock.unlock();
  constexpr int kOthers = 3;
  constexpr int kOtherRounds = 300;
  std::atomic<int> others_done{0};
  std::vector<std::thread> others;
  for (int t = 0; t < kOthers; ++t) {
    others.emplace_back([&] {
      for (int i = 0; i < kOtherRounds; ++i) {
        {
          std::lock_guard guard(lock);
          const uint64_t seen = counter;
          std::this_thread::yield();
          counter = seen + 1;
        }
        // Apart, so that the owner wins the bias back in between.
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      others_done.fetch_add(1);
    });
  }
  uint64_t owner_rounds = 0;
  uint64_t rebiased = 0;  // holds that found the bias back after a revocation
  bool was_biased = true;
  while (others_done.load() < kOthers) {  // bounded by the others' rounds
    std::lock_guard guard(lock);
    const uint64_t seen = counter;
    if (owner_rounds % 200000 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    counter = seen + 1;
    ++owner_rounds;
    const bool biased = lock.BiasedToCaller();
    if (biased && !was_biased) ++rebiased;
    was_biased = biased;
  }
  for (auto& th : others) th.join();
  EXPECT_EQ(counter, owner_rounds + uint64_t{kOthers} * kOtherRounds);
  // Both ways were taken many times (else the test shows nothing of the
  // revocation): where membarrier is there.
  if (ExecutionGate::Asymmetric()) {
    EXPECT_GT(rebiased, 10u);
  }
}

}  // namespace
}  // namespace softverbs::provider
