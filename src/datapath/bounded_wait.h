// Waiting a bounded time for something another process does in microseconds
// - the holder of an owner's word lock inside its read-modify-write
// (owner_word_lock.h), an owner's registration converting pages
// (owner_memory.h) - without the waiter hanging if it never happens (a
// stopped process): the first pauses yield the CPU, later ones sleep,
// doubling up to 1 ms, until the limit.
#pragma once

#include <sched.h>
#include <time.h>

#include <cstdint>

namespace softverbs::datapath {

class BoundedWait {
 public:
  explicit BoundedWait(int limit_ms) : deadline_ns_(NowNs() + limit_ms * 1000000ull) {}

  // Waits a little. False once the limit has passed: give up.
  bool Pause() {
    if (NowNs() > deadline_ns_) return false;
    if (pauses_++ < 64) {
      sched_yield();
      return true;
    }
    const timespec pause{0, static_cast<long>(sleep_ns_)};
    nanosleep(&pause, nullptr);
    if (sleep_ns_ < 1000000) sleep_ns_ *= 2;
    return true;
  }

 private:
  static uint64_t NowNs() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
  }

  uint64_t deadline_ns_;
  int pauses_ = 0;
  uint64_t sleep_ns_ = 1000;
};

}  // namespace softverbs::datapath
