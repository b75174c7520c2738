#include "common/spin_lock.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

namespace softverbs {
namespace {

TEST(SpinLock, TryLockFailsWhileHeldAndSucceedsAfter) {
  SpinLock lock;
  ASSERT_TRUE(lock.try_lock());
  EXPECT_FALSE(lock.try_lock());
  lock.unlock();
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
}

// Threads that add to a plain counter under the lock lose no addition; the
// holder sometimes sleeps inside (as a WR's copy or a daemon round trip may
// take long), so takers go through every phase: spin, yield, sleep.
TEST(SpinLock, ExcludesEveryOtherTaker) {
  SpinLock lock;
  uint64_t counter = 0;
  constexpr int kThreads = 4;
  constexpr int kRounds = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        std::lock_guard guard(lock);
        const uint64_t seen = counter;
        if (t == 0 && i % 5000 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3));
        counter = seen + 1;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(counter, uint64_t{kThreads} * kRounds);
}

}  // namespace
}  // namespace softverbs
