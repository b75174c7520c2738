// The execution gate (src/abi/ibverbs/execution_gate.h): a wait returns only
// after the executions in progress when it began have left, not before and
// not because of executions that began later.
#include "abi/ibverbs/execution_gate.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace softverbs::provider {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kLongNs = 10'000'000'000;  // 10 s: never reached when the gate works

// A thread that enters an execution, says so, and leaves when told.
class Executor {
 public:
  Executor()
      : thread_([this] {
          ExecutionGate::Enter();
          entered_.store(true);
          while (!release_.load()) std::this_thread::sleep_for(1ms);
          left_.store(true);  // before it leaves: a waiter that returned must see it
          ExecutionGate::Leave();
        }) {
    while (!entered_.load()) std::this_thread::sleep_for(1ms);
  }
  ~Executor() {
    Release();
    thread_.join();
  }
  void Release() { release_.store(true); }
  bool left() const { return left_.load(); }

 private:
  std::atomic<bool> entered_{false}, release_{false}, left_{false};
  std::thread thread_;
};

TEST(ExecutionGate, ModeIsTheOneAskedFor) {
  const char* force = getenv("SOFTVERBS_TEST_SYMMETRIC_FENCES");
  ExecutionGate::Enter();  // the first execution decides
  ExecutionGate::Leave();
  if (force && *force == '1') {
    EXPECT_FALSE(ExecutionGate::Asymmetric());
  } else {
    // Linux has had membarrier's private expedited command since 4.14.
    EXPECT_TRUE(ExecutionGate::Asymmetric());
  }
}

TEST(ExecutionGate, WaitWithNobodyInsideReturnsAtOnce) {
  EXPECT_TRUE(ExecutionGate::WaitForExecutions(kLongNs));
  EXPECT_TRUE(ExecutionGate::AllLeft(ExecutionGate::InProgress()));
}

TEST(ExecutionGate, WaitReturnsOnlyAfterTheExecutionLeft) {
  Executor e;
  std::thread releaser([&] {
    std::this_thread::sleep_for(50ms);
    e.Release();
  });
  EXPECT_TRUE(ExecutionGate::WaitForExecutions(kLongNs));
  EXPECT_TRUE(e.left());
  releaser.join();
}

TEST(ExecutionGate, WaitIsBounded) {
  Executor e;
  EXPECT_FALSE(ExecutionGate::WaitForExecutions(20'000'000));
  EXPECT_FALSE(e.left());
}

TEST(ExecutionGate, LaterExecutionsAreNotWaitedFor) {
  auto first = std::make_unique<Executor>();
  const ExecutionGate::Snapshot s = ExecutionGate::InProgress();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_FALSE(ExecutionGate::AllLeft(s));
  Executor later;  // inside from here to the end
  first.reset();   // leaves
  EXPECT_TRUE(ExecutionGate::AllLeft(s));
  EXPECT_EQ(ExecutionGate::InProgress().size(), 1u);  // the later one, for a new snapshot
}

TEST(ExecutionGate, NestedExecutionsCountOnce) {
  ExecutionGate::Enter();
  ExecutionGate::Enter();
  ExecutionGate::Leave();
  EXPECT_TRUE(ExecutionGate::Inside());
  // A waiter in another thread sees this thread still inside.
  std::atomic<bool> done{false};
  std::thread waiter([&] { done.store(ExecutionGate::WaitForExecutions(kLongNs)); });
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(done.load());
  ExecutionGate::Leave();
  waiter.join();
  EXPECT_TRUE(done.load());
  EXPECT_FALSE(ExecutionGate::Inside());
}

TEST(ExecutionGate, ExitedThreadsRecordsAreReused) {
  // Many short-lived executing threads do not grow the snapshot: a thread
  // that exited is never inside.
  for (int i = 0; i < 50; ++i) {
    std::thread([] {
      ExecutionGate::Enter();
      ExecutionGate::Leave();
    }).join();
  }
  EXPECT_TRUE(ExecutionGate::InProgress().empty());
}

}  // namespace
}  // namespace softverbs::provider
