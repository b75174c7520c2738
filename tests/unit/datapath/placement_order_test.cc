// PlaceInOrder (datapath/placement_order.h): the bytes of every length, and
// the order a reader polling a message's last byte relies on.
#include "datapath/placement_order.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

namespace softverbs::datapath {
namespace {

TEST(PlaceInOrder, MovesExactlyTheBytesOfEveryLength) {
  for (size_t n = 0; n <= 3 * kOrderedTail; ++n) {
    uint8_t src[4 * kOrderedTail], dst[4 * kOrderedTail];
    for (size_t i = 0; i < sizeof(src); ++i) src[i] = static_cast<uint8_t>(i + 1);
    memset(dst, 0xee, sizeof(dst));
    PlaceInOrder(dst + 4, src + 3, n);
    for (size_t i = 0; i < sizeof(dst); ++i) {
      const bool copied = i >= 4 && i < 4 + n;
      ASSERT_EQ(dst[i], copied ? src[i - 1] : 0xee) << "n " << n << ", byte " << i;
    }
  }
}

// qperf's rc_rdma_write_poll_lat between two threads: each side has one
// page-aligned buffer that it receives into and sends from. A round's
// message carries the sender's mark (side | round) in its first and last
// byte - in every byte with `whole`; the receiver waits until both ends carry
// it (and checks every byte with `whole`), then writes its own next mark
// into its buffer and places the buffer into the other's. With libc's memcpy
// a copy may store the first byte (or, at 8 bytes, the only word) again
// after the receiver saw the last one, undoing the receiver's new mark: the
// message it sends then starts with the other side's old mark and the
// ping-pong stalls, as qperf's did at every size of a page or more. Returns
// the round that stalled (2 s without it) or arrived torn, or -1.
struct PingPongResult {
  int stalled_at = -1;
  int torn_at = -1;
};

PingPongResult RunWritePollPingPong(size_t size, bool whole, int rounds) {
  const size_t pages = (size + 4095) / 4096 * 4096;
  std::unique_ptr<uint8_t, decltype(&free)> a(static_cast<uint8_t*>(aligned_alloc(4096, pages)),
                                              free);
  std::unique_ptr<uint8_t, decltype(&free)> b(static_cast<uint8_t*>(aligned_alloc(4096, pages)),
                                              free);
  memset(a.get(), 0, size);
  memset(b.get(), 0, size);
  std::atomic<bool> failed{false};
  PingPongResult result;
  auto side = [&](bool first, uint8_t* mine, uint8_t* theirs) {
    const uint8_t self = first ? 0x80 : 0, peer = first ? 0 : 0x80;
    volatile uint8_t* in = mine;
    auto send = [&](int round) {
      const uint8_t mark = self | (round & 0x7f);
      if (whole) {
        memset(mine, mark, size);
      } else {
        in[0] = mark;
        in[size - 1] = mark;
      }
      PlaceInOrder(theirs, mine, size);
    };
    if (first) send(0);
    for (int round = 0; round < rounds; ++round) {
      const uint8_t want = peer | (round & 0x7f);
      const auto since = std::chrono::steady_clock::now();
      while (!(in[0] == want && in[size - 1] == want)) {
        if (failed) return;
        if (std::chrono::steady_clock::now() - since > std::chrono::seconds(2)) {
          result.stalled_at = round;
          failed = true;
          return;
        }
      }
      for (size_t i = 0; whole && i < size; ++i) {
        if (in[i] != want) {
          result.torn_at = round;
          failed = true;
          return;
        }
      }
      if (!first) {
        send(round);
      } else if (round + 1 < rounds) {
        send(round + 1);
      }
    }
  };
  std::thread t(side, false, b.get(), a.get());
  side(true, a.get(), b.get());
  t.join();
  return result;
}

class WritePollPingPong : public ::testing::TestWithParam<size_t> {};

TEST_P(WritePollPingPong, MarksAtBothEndsAreNeverUndone) {
  const PingPongResult r = RunWritePollPingPong(GetParam(), false, 3000);
  EXPECT_EQ(r.stalled_at, -1) << "a late store undid the receiver's mark";
}

TEST_P(WritePollPingPong, AMessageWhoseLastByteArrivedHasArrivedWhole) {
  const PingPongResult r = RunWritePollPingPong(GetParam(), true, 3000);
  EXPECT_EQ(r.stalled_at, -1) << "a round never arrived whole";
  EXPECT_EQ(r.torn_at, -1) << "the last byte arrived before the others";
}

INSTANTIATE_TEST_SUITE_P(Sizes, WritePollPingPong,
                         ::testing::Values(size_t{8}, size_t{100}, size_t{4096}, size_t{8192},
                                           size_t{65536}));

}  // namespace
}  // namespace softverbs::datapath
