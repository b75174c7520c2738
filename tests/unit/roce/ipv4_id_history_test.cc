// Ipv4IdHistory: when a packet's ICRC made for another host's IPv4 ID is
// believed (src/roce/ipv4_id_history.h).
#include "roce/ipv4_id_history.h"

#include <gtest/gtest.h>

namespace softverbs::roce {
namespace {

constexpr uint32_t kA = 0x016433c6;  // 198.51.100.1, network order
constexpr uint32_t kB = 0x026433c6;
constexpr uint16_t kPort1 = 0xc001, kPort2 = 0xc002;

TEST(RoceIpv4IdHistory, AHostsFirstPacketIsRefusedUnlessItIsForQp1) {
  Ipv4IdHistory h;
  EXPECT_FALSE(h.Accept(kA, kPort1, 1000, false));
  EXPECT_TRUE(h.Accept(kA, kPort1, 1001, false));  // follows the one remembered
  EXPECT_TRUE(h.Accept(kB, kPort1, 7000, true));   // a CM MAD
  EXPECT_TRUE(h.Accept(kB, kPort2, 7001, false));  // another flow of that host
}

TEST(RoceIpv4IdHistory, IdsMustMoveForwardWithinTheWindow) {
  Ipv4IdHistory h;
  EXPECT_TRUE(h.Accept(kA, kPort1, 65530, true));
  EXPECT_TRUE(h.Accept(kA, kPort1, 65535, false));
  EXPECT_TRUE(h.Accept(kA, kPort1, 4, false));   // wraps: 5 on
  EXPECT_FALSE(h.Accept(kA, kPort1, 4, false));  // the same ID again
  EXPECT_FALSE(h.Accept(kA, kPort1, 3, false));  // backwards
  EXPECT_TRUE(h.Accept(kA, kPort1, 3 + Ipv4IdHistory::kWindow, false));
  // A jump past the window costs one packet: the next one follows it.
  EXPECT_FALSE(h.Accept(kA, kPort1, 30000, false));
  EXPECT_TRUE(h.Accept(kA, kPort1, 30001, false));
}

// rxe: one counter for all of a host's flows to us. A NIC: perhaps one a
// flow. Either way each packet follows something remembered.
TEST(RoceIpv4IdHistory, OneCounterPerHostOrOnePerFlow) {
  Ipv4IdHistory per_host;
  EXPECT_TRUE(per_host.Accept(kA, kPort1, 100, true));
  for (uint16_t id = 101; id < 101 + 10000; ++id) {  // two flows, interleaved, one counter
    ASSERT_TRUE(per_host.Accept(kA, id % 3 ? kPort1 : kPort2, id, false)) << id;
  }
  Ipv4IdHistory per_flow;
  EXPECT_FALSE(per_flow.Accept(kA, kPort1, 100, false));
  EXPECT_FALSE(per_flow.Accept(kA, kPort2, 40000, false));
  EXPECT_TRUE(per_flow.Accept(kA, kPort1, 101, false));  // the host's last was 40000
  EXPECT_TRUE(per_flow.Accept(kA, kPort2, 40001, false));
  EXPECT_TRUE(per_flow.Accept(kA, kPort1, 102, false));
}

TEST(RoceIpv4IdHistory, TheLeastRecentlySeenMakesRoom) {
  Ipv4IdHistory h;
  // Each accept of a new host takes two entries: its flow and itself.
  const uint32_t hosts = Ipv4IdHistory::kSources / 2;
  for (uint32_t s = 0; s < hosts; ++s) EXPECT_TRUE(h.Accept(s, kPort1, 100, true));
  EXPECT_TRUE(h.Accept(0, kPort1, 101, false));     // host 0 seen again: host 1 is the oldest
  EXPECT_TRUE(h.Accept(hosts, kPort1, 500, true));  // takes host 1's places
  EXPECT_TRUE(h.Accept(0, kPort1, 102, false));     // host 0 kept
  EXPECT_FALSE(h.Accept(1, kPort1, 101, false));    // host 1 forgotten: a first packet again
  EXPECT_TRUE(h.Accept(3, kPort1, 101, false));     // (it took host 2's places, not host 3's)
  EXPECT_FALSE(h.Accept(2, kPort1, 101, false));
}

}  // namespace
}  // namespace softverbs::roce
