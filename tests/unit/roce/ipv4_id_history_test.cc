// Ipv4IdHistory: when a packet's ICRC made for another host's IPv4 ID is
// believed (src/roce/ipv4_id_history.h).
#include "roce/ipv4_id_history.h"

#include <gtest/gtest.h>

namespace softverbs::roce {
namespace {

constexpr uint32_t kA = 0x016433c6;  // 198.51.100.1, network order
constexpr uint32_t kB = 0x026433c6;

TEST(RoceIpv4IdHistory, ASourcesFirstPacketIsRefusedUnlessItIsForQp1) {
  Ipv4IdHistory h;
  EXPECT_FALSE(h.Accept(kA, 1000, false));
  EXPECT_TRUE(h.Accept(kA, 1001, false));  // follows the one remembered
  EXPECT_TRUE(h.Accept(kB, 7000, true));   // a CM MAD
  EXPECT_TRUE(h.Accept(kB, 7001, false));
}

TEST(RoceIpv4IdHistory, IdsMustMoveForwardWithinTheWindow) {
  Ipv4IdHistory h;
  EXPECT_TRUE(h.Accept(kA, 65530, true));
  EXPECT_TRUE(h.Accept(kA, 65535, false));
  EXPECT_TRUE(h.Accept(kA, 4, false));   // wraps: 5 on
  EXPECT_FALSE(h.Accept(kA, 4, false));  // the same ID again
  EXPECT_FALSE(h.Accept(kA, 3, false));  // backwards
  EXPECT_TRUE(h.Accept(kA, 3 + Ipv4IdHistory::kWindow, false));
  // A jump past the window costs one packet: the next one follows it.
  EXPECT_FALSE(h.Accept(kA, 30000, false));
  EXPECT_TRUE(h.Accept(kA, 30001, false));
}

TEST(RoceIpv4IdHistory, TheLeastRecentlySeenSourceMakesRoom) {
  Ipv4IdHistory h;
  for (uint32_t s = 0; s < Ipv4IdHistory::kSources; ++s) EXPECT_TRUE(h.Accept(s, 100, true));
  EXPECT_TRUE(h.Accept(0, 101, false));  // source 0 seen again: now source 1 is the oldest
  EXPECT_TRUE(h.Accept(Ipv4IdHistory::kSources, 500, true));  // takes source 1's place
  EXPECT_TRUE(h.Accept(0, 102, false));                       // source 0 kept
  EXPECT_FALSE(h.Accept(1, 101, false));  // source 1 forgotten: a first packet again
  EXPECT_TRUE(h.Accept(3, 101, false));   // (which took source 2's place, not source 3's)
  EXPECT_FALSE(h.Accept(2, 101, false));
}

}  // namespace
}  // namespace softverbs::roce
