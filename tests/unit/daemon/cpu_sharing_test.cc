#include "daemon/cpu_sharing.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <chrono>
#include <thread>

namespace softverbs::daemon {
namespace {

// Runs body on a thread of its own (CpuSharing moves the calling thread),
// allowed `allowed`.
template <typename Body>
void OnThreadAllowed(const cpu_set_t& allowed, Body body) {
  std::thread t([&] {
    ASSERT_EQ(sched_setaffinity(0, sizeof(allowed), &allowed), 0);
    body();
  });
  t.join();
}

cpu_set_t Affinity() {
  cpu_set_t s;
  CPU_ZERO(&s);
  sched_getaffinity(0, sizeof(s), &s);
  return s;
}

// The clock the tests turn themselves: a thread preempted for milliseconds
// (a loaded CI machine) must not make two rounds 2 ms apart.
CpuSharing::Clock::time_point g_test_now{};
CpuSharing::Clock::time_point TestNow() {
  return g_test_now;
}

// Pins this thread to the CPU it runs on and returns that CPU. Calls noted
// from a test must all come from the CPU the thread is on: a loaded machine
// migrates a thread between one sched_getcpu() and the next, and a call from
// elsewhere starts the count again.
int PinHere() {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  EXPECT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  return sched_getcpu();
}

void Allow(const cpu_set_t& all) {
  EXPECT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
}

void NoteCalls(CpuSharing& sharing, int calls, int cpu) {
  for (int i = 0; i < calls; ++i) sharing.NoteCaller(static_cast<uint32_t>(cpu));
}

// Eight calls in a row from the daemon's own CPU: it moves to another of
// the CPUs it may use, and may use all of them again after. Where the thread
// is a moment after the move is the scheduler's to say (it may bring the
// thread back at once on a loaded machine), so that part is asked of ten
// rounds, and one of them must show it.
TEST(CpuSharing, EightCallsFromItsOwnCpuMoveTheThreadToAnother) {
  const cpu_set_t all = Affinity();
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "one CPU: nowhere to move to";
  OnThreadAllowed(all, [&] {
    g_test_now = CpuSharing::Clock::time_point{} + std::chrono::seconds(1);
    CpuSharing sharing(TestNow);
    int left_its_cpu = 0;
    for (uint64_t round = 0; round < 10; ++round) {
      g_test_now += std::chrono::seconds(1);
      const int cpu = PinHere();
      NoteCalls(sharing, 7, cpu);
      sharing.MoveOffIfShared();
      EXPECT_EQ(sharing.moves(), round) << "seven calls are not enough";
      NoteCalls(sharing, 1, cpu);
      Allow(all);
      const int own = sched_getcpu();
      sharing.MoveOffIfShared();
      EXPECT_EQ(sharing.moves(), round + 1);
      if (sched_getcpu() != own) ++left_its_cpu;
      const cpu_set_t after = Affinity();
      EXPECT_TRUE(CPU_EQUAL(&after, &all)) << "the affinity is not as it was";
    }
    EXPECT_GT(left_its_cpu, 0) << "no move left the CPU it was on";
  });
}

// The daemon's spin yields its CPU only when the last caller ran there: a
// caller on another CPU has its own, and a yield would hand the daemon's to
// any task until that one's slice ends.
TEST(CpuSharing, TellsWhetherTheLastCallerRanOnThisCpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  OnThreadAllowed(one, [&] {
    CpuSharing sharing;
    EXPECT_FALSE(sharing.LastCallerHere()) << "no caller yet";
    sharing.NoteCaller(static_cast<uint32_t>(sched_getcpu()));
    EXPECT_TRUE(sharing.LastCallerHere());
    sharing.NoteCaller(static_cast<uint32_t>(sched_getcpu()) + 1);
    EXPECT_FALSE(sharing.LastCallerHere());
    sharing.NoteCaller(UINT32_MAX);
    EXPECT_FALSE(sharing.LastCallerHere()) << "unknown is not here";
  });
}

// A call from another CPU, or a sleep of the daemon, breaks the row.
TEST(CpuSharing, ACallFromElsewhereOrASleepStartsTheCountAgain) {
  const cpu_set_t all = Affinity();
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "one CPU: nowhere to move to";
  OnThreadAllowed(all, [&] {
    CpuSharing sharing;
    for (int i = 0; i < 7; ++i) sharing.NoteCaller(static_cast<uint32_t>(sched_getcpu()));
    sharing.NoteCaller(UINT32_MAX);  // unknown: not this CPU
    for (int i = 0; i < 7; ++i) sharing.NoteCaller(static_cast<uint32_t>(sched_getcpu()));
    sharing.NoteSleep();
    sharing.NoteCaller(static_cast<uint32_t>(sched_getcpu()));
    sharing.MoveOffIfShared();
    EXPECT_EQ(sharing.moves(), 0u);
  });
}

// A daemon allowed one CPU (taskset) stays there.
TEST(CpuSharing, ADaemonAllowedOneCpuStaysOnIt) {
  const cpu_set_t all = Affinity();
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c) {
    if (CPU_ISSET(c, &all)) first = c;
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  OnThreadAllowed(one, [&] {
    CpuSharing sharing;
    for (int i = 0; i < 20; ++i) sharing.NoteCaller(static_cast<uint32_t>(sched_getcpu()));
    sharing.MoveOffIfShared();
    EXPECT_EQ(sharing.moves(), 0u);
    EXPECT_EQ(sched_getcpu(), first);
    const cpu_set_t after = Affinity();
    EXPECT_TRUE(CPU_EQUAL(&after, &one));
  });
}

// At most one move every 2 ms, however many calls share the CPU. The test
// turns the clock itself: a thread preempted for milliseconds (a loaded CI
// machine) must not make two rounds 2 ms apart.

TEST(CpuSharing, MovesAtMostEveryTwoMilliseconds) {
  const cpu_set_t all = Affinity();
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "one CPU: nowhere to move to";
  OnThreadAllowed(all, [&] {
    g_test_now = CpuSharing::Clock::time_point{} + std::chrono::seconds(1);
    CpuSharing sharing(TestNow);
    auto round = [&] {
      NoteCalls(sharing, 8, PinHere());
      Allow(all);
      sharing.MoveOffIfShared();
    };
    round();
    EXPECT_EQ(sharing.moves(), 1u);
    g_test_now += std::chrono::microseconds(1999);
    round();
    EXPECT_EQ(sharing.moves(), 1u) << "moved again within 2 ms";
    g_test_now += std::chrono::microseconds(1);
    round();
    EXPECT_EQ(sharing.moves(), 2u) << "did not move 2 ms after the last move";
  });
}

}  // namespace
}  // namespace softverbs::daemon
