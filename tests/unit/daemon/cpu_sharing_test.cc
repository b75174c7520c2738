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

// Eight calls in a row from the daemon's own CPU: it moves to another of
// the CPUs it may use, and may use all of them again after.
TEST(CpuSharing, EightCallsFromItsOwnCpuMoveTheThreadToAnother) {
  const cpu_set_t all = Affinity();
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "one CPU: nowhere to move to";
  OnThreadAllowed(all, [&] {
    CpuSharing sharing;
    const int before = sched_getcpu();
    for (int i = 0; i < 7; ++i) sharing.NoteCaller(static_cast<uint32_t>(sched_getcpu()));
    sharing.MoveOffIfShared();
    EXPECT_EQ(sharing.moves(), 0u) << "seven calls are not enough";
    sharing.NoteCaller(static_cast<uint32_t>(sched_getcpu()));
    const int own = sched_getcpu();
    sharing.MoveOffIfShared();
    EXPECT_EQ(sharing.moves(), 1u);
    EXPECT_NE(sched_getcpu(), own) << "started on " << before;
    const cpu_set_t after = Affinity();
    EXPECT_TRUE(CPU_EQUAL(&after, &all)) << "the affinity is not as it was";
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
CpuSharing::Clock::time_point g_test_now{};
CpuSharing::Clock::time_point TestNow() {
  return g_test_now;
}

TEST(CpuSharing, MovesAtMostEveryTwoMilliseconds) {
  const cpu_set_t all = Affinity();
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "one CPU: nowhere to move to";
  OnThreadAllowed(all, [&] {
    g_test_now = CpuSharing::Clock::time_point{} + std::chrono::seconds(1);
    CpuSharing sharing(TestNow);
    auto round = [&] {
      for (int i = 0; i < 8; ++i) sharing.NoteCaller(static_cast<uint32_t>(sched_getcpu()));
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
