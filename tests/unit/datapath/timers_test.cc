// The IBTA timer encodings: the RNR NAK timer (IBTA table 45) and the local
// ACK timeout (4.096 us * 2^code).
#include "datapath/timers.h"

#include <gtest/gtest.h>

namespace softverbs::datapath {
namespace {

constexpr uint64_t kUs = 1000;

TEST(RnrTimerNs, IbtaTable45) {
  // Spot values of the table, in microseconds: code 0 is the longest.
  EXPECT_EQ(RnrTimerNs(0), 655360 * kUs);
  EXPECT_EQ(RnrTimerNs(1), 10 * kUs);
  EXPECT_EQ(RnrTimerNs(5), 60 * kUs);
  EXPECT_EQ(RnrTimerNs(12), 640 * kUs);
  EXPECT_EQ(RnrTimerNs(14), 1280 * kUs);  // perftest's and pingpong's usual choice (12..14)
  EXPECT_EQ(RnrTimerNs(24), 40960 * kUs);
  EXPECT_EQ(RnrTimerNs(31), 491520 * kUs);
  // Codes 1..31 grow strictly and stay below code 0.
  for (uint32_t code = 2; code < 32; ++code) {
    EXPECT_GT(RnrTimerNs(code), RnrTimerNs(code - 1)) << code;
    EXPECT_LT(RnrTimerNs(code), RnrTimerNs(0)) << code;
  }
}

TEST(AckTimeoutNs, PowersOfTwoTimes4096Ns) {
  EXPECT_EQ(AckTimeoutNs(0), UINT64_MAX);  // infinite
  EXPECT_EQ(AckTimeoutNs(1), 8192u);
  EXPECT_EQ(AckTimeoutNs(14), 4096ull << 14);  // ~67 ms
  EXPECT_EQ(AckTimeoutNs(31), 4096ull << 31);
}

}  // namespace
}  // namespace softverbs::datapath
