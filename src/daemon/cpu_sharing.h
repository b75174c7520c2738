// Keeping the daemon off its callers' CPUs.
//
// A call through the call page is quickest when the daemon and the caller
// run on different CPUs, each looking at the page: the daemon spins for
// 50 us after a request, the caller for its reply. On one CPU the two only
// take turns - each look of one waits for the other to yield or be
// preempted. And the scheduler puts them together by itself: a message on a
// Unix socket (a doorbell, a request carrying descriptors) wakes the daemon
// as a synchronous wake-up, on the waker's CPU, since the waker is expected
// to sleep next; the pair then stays there while both keep busy. Measured on
// the 2-CPU VMs: after a few calls that woke the daemon, every call of a
// loop took 7-12 us, or 60 us, instead of 0.5-2 us, for whole benchmark
// phases.
//
// So each page request says which CPU its caller ran on (CallPage::
// client_cpu), and when kSharedCallsBeforeMove of them in a row, without a
// sleep of the daemon in between, came from the daemon's own CPU, the
// daemon moves to another of the CPUs it may use - its affinity without
// this CPU, then its affinity as it was (a taskset of the daemon is kept) -
// at most once every kMinInterval, and only if it may use more than one.
// Not at the first such call: a call after the program was idle is served
// sooner on its own CPU (no other CPU to wake), and the move itself held
// up the call right after it (9-10 -> 17-26 us, the call after 1 ms idle
// 14-26 -> 27-32 us, when every one moved).
#pragma once

#include <sched.h>

#include <chrono>
#include <cstdint>

namespace softverbs::daemon {

class CpuSharing {
 public:
  using Clock = std::chrono::steady_clock;
  // now: the clock kMinInterval is measured on (a test's own).
  explicit CpuSharing(Clock::time_point (*now)() = Clock::now) : now_(now) {}
  // A page request whose caller ran on `cpu` (UINT32_MAX: unknown).
  void NoteCaller(uint32_t cpu);
  // Whether the last page request's caller ran on the CPU the daemon runs
  // on now (then a spin of the daemon's keeps that caller from running).
  bool LastCallerHere() const {
    const int own = sched_getcpu();
    return own >= 0 && last_caller_cpu_ == static_cast<uint32_t>(own);
  }
  // Moves the calling thread (the daemon's loop) to another of its CPUs if
  // the last kSharedCallsBeforeMove page requests came from its CPU.
  void MoveOffIfShared();
  // The daemon goes to sleep: calls that come apart are no loop to make
  // room for.
  void NoteSleep() { shared_calls_ = 0; }
  uint64_t moves() const { return moves_; }

 private:
  static constexpr std::chrono::milliseconds kMinInterval{2};
  static constexpr uint32_t kSharedCallsBeforeMove = 8;
  Clock::time_point (*now_)();
  uint32_t shared_calls_ = 0;  // page requests in a row from the daemon's CPU
  uint32_t last_caller_cpu_ = UINT32_MAX;
  Clock::time_point last_try_{};  // of a move
  uint64_t moves_ = 0;
};

}  // namespace softverbs::daemon
