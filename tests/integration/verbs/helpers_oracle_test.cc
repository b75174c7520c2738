// The pure helpers of libibverbs (*_str, the rate conversions) against the
// real ones: Debian's libibverbs.so.1 (libibverbs1, which ibverbs-utils
// brings), loaded into a link-map namespace of its own with dlmopen so that
// its symbols and ours do not meet. Every value in and around each enum.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <string>

namespace softverbs::it {
namespace {

constexpr const char* kRealLibibverbs = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";

class HelpersOracleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    real_ = dlmopen(LM_ID_NEWLM, kRealLibibverbs, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(real_, nullptr) << "Debian's libibverbs (package libibverbs1, installed with "
                                 "ibverbs-utils by scripts/install-deps.sh): "
                              << dlerror();
  }
  void TearDown() override {
    if (real_) dlclose(real_);
  }
  template <typename Fn>
  Fn Real(const char* name) {
    void* sym = dlsym(real_, name);
    EXPECT_NE(sym, nullptr) << name;
    return reinterpret_cast<Fn>(sym);
  }
  void* real_ = nullptr;
};

template <typename Enum>
void CompareStrings(const char* (*ours)(Enum), const char* (*real)(Enum), int from, int to,
                    const char* name) {
  ASSERT_NE(real, nullptr);
  for (int v = from; v <= to; ++v) {
    EXPECT_STREQ(ours(static_cast<Enum>(v)), real(static_cast<Enum>(v))) << name << "(" << v << ")";
  }
}

TEST_F(HelpersOracleTest, StringsAreTheRealOnes) {
  CompareStrings(ibv_node_type_str, Real<const char* (*)(ibv_node_type)>("ibv_node_type_str"), -2,
                 12, "ibv_node_type_str");
  CompareStrings(ibv_port_state_str, Real<const char* (*)(ibv_port_state)>("ibv_port_state_str"),
                 -2, 12, "ibv_port_state_str");
  CompareStrings(ibv_event_type_str, Real<const char* (*)(ibv_event_type)>("ibv_event_type_str"),
                 -2, 30, "ibv_event_type_str");
  CompareStrings(ibv_wc_status_str, Real<const char* (*)(ibv_wc_status)>("ibv_wc_status_str"), -2,
                 30, "ibv_wc_status_str");
}

TEST_F(HelpersOracleTest, RateConversionsAreTheRealOnes) {
  auto real_to_mult = Real<int (*)(ibv_rate)>("ibv_rate_to_mult");
  auto real_from_mult = Real<ibv_rate (*)(int)>("mult_to_ibv_rate");
  auto real_to_mbps = Real<int (*)(ibv_rate)>("ibv_rate_to_mbps");
  auto real_from_mbps = Real<ibv_rate (*)(int)>("mbps_to_ibv_rate");
  ASSERT_TRUE(real_to_mult && real_from_mult && real_to_mbps && real_from_mbps);
  for (int r = -2; r <= 40; ++r) {
    const auto rate = static_cast<ibv_rate>(r);
    EXPECT_EQ(ibv_rate_to_mult(rate), real_to_mult(rate)) << "ibv_rate_to_mult(" << r << ")";
    const int mbps = real_to_mbps(rate);
    EXPECT_EQ(ibv_rate_to_mbps(rate), mbps) << "ibv_rate_to_mbps(" << r << ")";
    for (int m : {mbps - 1, mbps, mbps + 1}) {
      EXPECT_EQ(mbps_to_ibv_rate(m), real_from_mbps(m)) << "mbps_to_ibv_rate(" << m << ")";
    }
  }
  for (int mult = -2; mult <= 512; ++mult) {
    EXPECT_EQ(mult_to_ibv_rate(mult), real_from_mult(mult)) << "mult_to_ibv_rate(" << mult << ")";
  }
}

}  // namespace
}  // namespace softverbs::it
