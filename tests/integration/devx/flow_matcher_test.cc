// mlx5dv_create_flow_matcher(3) / mlx5dv_create_flow(3): mlx5's steering by
// PRM match parameters, run as softverbs' verbs rules (docs/raw_packet.md):
// a source-MAC matcher and an IPv4/UDP one steer frames to a raw packet QP,
// a matcher is busy while its flows live, and what softverbs does not match
// or do is refused with the errno libmlx5 and the kernel give.
#include <cstring>

#include "devx_env.h"
#include "raw_frames.h"

namespace devx_it {
namespace {

using namespace softverbs::test;

constexpr size_t kOuterBytes = 64;

// A match parameter of up to 0x180 bytes (the outer headers first).
struct MatchParam {
  alignas(8) uint8_t storage[sizeof(mlx5dv_flow_match_parameters) + 0x180] = {};
  mlx5dv_flow_match_parameters* head() {
    return reinterpret_cast<mlx5dv_flow_match_parameters*>(storage);
  }
};

MatchParam Param(size_t n) {
  MatchParam p;
  p.head()->match_sz = n;
  return p;
}
uint8_t* Bytes(MatchParam& p) {
  return reinterpret_cast<uint8_t*>(p.head()->match_buf);
}

class FlowMatcherTest : public DevxTest {
 protected:
  void SetUp() override {
    if (!HasNetRaw()) GTEST_SKIP() << "raw packet QPs need CAP_NET_RAW, as on hardware";
    DevxTest::SetUp();
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
    ASSERT_TRUE(MakeRawQp(ctx_, pd_, &a_)) << strerror(errno);
    ASSERT_TRUE(MakeRawQp(ctx_, pd_, &b_)) << strerror(errno);
  }
  void TearDown() override {
    if (flow_) {
      EXPECT_EQ(ibv_destroy_flow(flow_), 0);
    }
    if (matcher_) {
      EXPECT_EQ(mlx5dv_destroy_flow_matcher(matcher_), 0);
    }
    FreeRawQp(&a_);
    FreeRawQp(&b_);
    if (pd_) ibv_dealloc_pd(pd_);
    DevxTest::TearDown();
  }
  mlx5dv_flow_matcher* Matcher(MatchParam& mask, uint8_t criteria = 1) {
    mlx5dv_flow_matcher_attr attr{};
    attr.type = IBV_FLOW_ATTR_NORMAL;
    attr.match_criteria_enable = criteria;
    attr.match_mask = mask.head();
    attr.comp_mask = MLX5DV_FLOW_MATCHER_MASK_FT_TYPE;
    attr.ft_type = MLX5DV_FLOW_TABLE_TYPE_NIC_RX;
    return mlx5dv_create_flow_matcher(ctx_, &attr);
  }
  ibv_flow* Flow(mlx5dv_flow_matcher* m, MatchParam& value) {
    mlx5dv_flow_action_attr action{};
    action.type = MLX5DV_FLOW_ACTION_DEST_IBV_QP;
    action.qp = b_.qp;
    return mlx5dv_create_flow(m, value.head(), 1, &action);
  }
  // Sends frame from a_; whether b_ received it.
  bool Reaches(const std::vector<uint8_t>& frame) {
    EXPECT_EQ(PostReceive(b_, 1), 0);
    EXPECT_EQ(SendFrame(a_, frame), IBV_WC_SUCCESS);
    ibv_wc wc{};
    return Received(b_, &wc);
  }

  ibv_pd* pd_ = nullptr;
  RawQp a_, b_;
  mlx5dv_flow_matcher* matcher_ = nullptr;
  ibv_flow* flow_ = nullptr;
};

TEST_F(FlowMatcherTest, ASourceMacMatcherSteersThatSendersFramesToTheQp) {
  MatchParam mask = Param(6);
  memset(Bytes(mask), 0xff, 6);  // smac
  matcher_ = Matcher(mask);
  ASSERT_NE(matcher_, nullptr) << strerror(errno);
  MatchParam value = Param(6);
  memcpy(Bytes(value), kMacA, 6);
  flow_ = Flow(matcher_, value);
  ASSERT_NE(flow_, nullptr) << strerror(errno);
  EXPECT_TRUE(Reaches(Frame(kMacB, 5000, 80, 1)));
  std::vector<uint8_t> other = Frame(kMacB, 5000, 80, 2);
  other[11] = 0x77;  // another source MAC
  EXPECT_FALSE(Reaches(other));
}

TEST_F(FlowMatcherTest, IpVersionAndUdpPortBecomeIpv4AndUdpSpecs) {
  MatchParam mask = Param(kOuterBytes);
  Bytes(mask)[0x12] = 0x1e;                      // ip_version
  Bytes(mask)[0x1e] = Bytes(mask)[0x1f] = 0xff;  // udp_dport
  matcher_ = Matcher(mask);
  ASSERT_NE(matcher_, nullptr) << strerror(errno);
  MatchParam value = Param(kOuterBytes);
  Bytes(value)[0x12] = 4 << 1;
  Bytes(value)[0x1e] = 5000 >> 8;
  Bytes(value)[0x1f] = 5000 & 0xff;
  flow_ = Flow(matcher_, value);
  ASSERT_NE(flow_, nullptr) << strerror(errno);
  EXPECT_TRUE(Reaches(Frame(kMacB, 5000, 80, 3)));
  EXPECT_FALSE(Reaches(Frame(kMacB, 5001, 80, 4)));
}

TEST_F(FlowMatcherTest, AnEmptyMatcherTakesEveryFrame) {
  MatchParam mask = Param(0x180);
  matcher_ = Matcher(mask, 0);
  ASSERT_NE(matcher_, nullptr) << strerror(errno);
  MatchParam value = Param(0);
  flow_ = Flow(matcher_, value);
  ASSERT_NE(flow_, nullptr) << strerror(errno);
  EXPECT_TRUE(Reaches(Frame(kMulticastMac, 1, 64, 5)));
}

TEST_F(FlowMatcherTest, AMatcherIsBusyWhileItsFlowsLive) {
  MatchParam mask = Param(6);
  memset(Bytes(mask), 0xff, 6);
  matcher_ = Matcher(mask);
  ASSERT_NE(matcher_, nullptr);
  MatchParam value = Param(6);
  memcpy(Bytes(value), kMacA, 6);
  flow_ = Flow(matcher_, value);
  ASSERT_NE(flow_, nullptr);
  EXPECT_EQ(mlx5dv_destroy_flow_matcher(matcher_), EBUSY);
  ASSERT_EQ(ibv_destroy_flow(flow_), 0);
  flow_ = nullptr;
  EXPECT_FALSE(Reaches(Frame(kMacB, 5000, 80, 6))) << "the flow is gone";
  EXPECT_EQ(mlx5dv_destroy_flow_matcher(matcher_), 0);
  matcher_ = nullptr;
}

TEST_F(FlowMatcherTest, WhatSoftverbsDoesNotMatchOrDoIsRefused) {
  MatchParam misc = Param(0x80);
  Bytes(misc)[0x40] = 0xff;  // a misc parameter
  errno = 0;
  EXPECT_EQ(Matcher(misc, 1 | 2), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  MatchParam flags = Param(kOuterBytes);
  Bytes(flags)[0x13] = 0xff;  // tcp_flags
  errno = 0;
  EXPECT_EQ(Matcher(flags), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  MatchParam outer = Param(6);
  memset(Bytes(outer), 0xff, 6);
  errno = 0;
  EXPECT_EQ(Matcher(outer, 0), nullptr) << "outer bits without the outer criteria";
  EXPECT_EQ(errno, EINVAL);
  mlx5dv_flow_matcher_attr tx{};
  tx.type = IBV_FLOW_ATTR_NORMAL;
  tx.match_criteria_enable = 1;
  tx.match_mask = outer.head();
  tx.comp_mask = MLX5DV_FLOW_MATCHER_MASK_FT_TYPE;
  tx.ft_type = MLX5DV_FLOW_TABLE_TYPE_NIC_TX;
  errno = 0;
  EXPECT_EQ(mlx5dv_create_flow_matcher(ctx_, &tx), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  // A matcher on the IP protocol alone: no IPv4 or IPv6 spec can say it.
  MatchParam proto = Param(kOuterBytes);
  Bytes(proto)[0x10] = 0xff;
  matcher_ = Matcher(proto);
  ASSERT_NE(matcher_, nullptr) << strerror(errno);
  MatchParam value = Param(kOuterBytes);
  Bytes(value)[0x10] = IPPROTO_UDP;
  errno = 0;
  EXPECT_EQ(Flow(matcher_, value), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  mlx5dv_flow_action_attr drop{};
  drop.type = MLX5DV_FLOW_ACTION_DROP;
  errno = 0;
  EXPECT_EQ(mlx5dv_create_flow(matcher_, value.head(), 1, &drop), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  errno = 0;
  EXPECT_EQ(mlx5dv_create_flow(matcher_, value.head(), 0, nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  // None of them made a rule: nothing reaches b.
  EXPECT_FALSE(Reaches(Frame(kMacB, 5000, 80, 7)));
}

}  // namespace
}  // namespace devx_it
