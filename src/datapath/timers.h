// The IBTA timers that decide how long an initiator retries: the responder's
// RNR NAK timer (min_rnr_timer) and the requester's local ACK timeout.
#pragma once

#include <time.h>

#include <cstdint>

namespace softverbs::datapath {

inline uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The device's free-running clock, in nanoseconds (hca_core_clock 1 GHz):
// CLOCK_MONOTONIC, the same for every process of the host, so completions
// stamped by different producers compare. ibv_query_rt_values_ex reads it too.
inline uint64_t DeviceClockNs() {
  return NowNs();
}

// min_rnr_timer code (IBTA table 45) -> nanoseconds. Code 0 is 655.36 ms,
// codes 1..31 run from 0.01 ms to 491.52 ms.
inline uint64_t RnrTimerNs(uint32_t code) {
  static constexpr uint32_t kTensOfMicros[32] = {
      65536, 1,    2,    3,    4,    6,     8,     12,    16,    24,   32,
      48,    64,   96,   128,  192,  256,   384,   512,   768,   1024, 1536,
      2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
  return static_cast<uint64_t>(kTensOfMicros[code & 31]) * 10000ull;  // units of 10 us
}

// Local ACK timeout code -> nanoseconds: 4.096 us * 2^code; 0 means infinite.
inline uint64_t AckTimeoutNs(uint32_t code) {
  if (code == 0) return UINT64_MAX;
  if (code > 31) code = 31;
  return 4096ull << code;
}

}  // namespace softverbs::datapath
