// The word a ring's many parties CAS on (a CQ's tail, a receive queue's
// head) when the ring can be resized in place: bits 0-47 the index, bits
// 48-62 an epoch bumped by every resize, bit 63 set while a resize runs.
// A CAS prepared before a resize fails on the new epoch.
#pragma once

#include <sched.h>
#include <time.h>

#include <atomic>
#include <cstdint>

namespace softverbs::datapath::ring_word {

inline constexpr uint64_t kIndexMask = (uint64_t{1} << 48) - 1;
inline constexpr uint64_t kEpochOne = uint64_t{1} << 48;
inline constexpr uint64_t kEpochMask = ~kIndexMask & ~(uint64_t{1} << 63);
inline constexpr uint64_t kClosed = uint64_t{1} << 63;

inline uint64_t Index(uint64_t word) {
  return word & kIndexMask;
}

// The reopened word after a resize: same index, next epoch.
inline uint64_t Reopened(uint64_t closed_word) {
  return (((closed_word & kEpochMask) + kEpochOne) & kEpochMask) | Index(closed_word);
}

inline uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

// Waits while a resize holds the word closed; returns the open word, or a
// closed one after about a second (the resizing owner died: give up).
inline uint64_t WaitOpen(const std::atomic<uint64_t>& word) {
  uint64_t w = word.load(std::memory_order_acquire);
  uint64_t deadline = 0;
  for (int spins = 0; w & kClosed; ++spins) {
    if (spins > 64) {
      if (!deadline) deadline = NowNs() + 1000000000ull;
      if (NowNs() > deadline) return w;
      sched_yield();
    }
    w = word.load(std::memory_order_acquire);
  }
  return w;
}

}  // namespace softverbs::datapath::ring_word
