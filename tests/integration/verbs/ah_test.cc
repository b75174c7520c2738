// Address handles: RoCE needs a GRH, the sgid_index must exist, and AHs can
// be built from a received work completion.
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "test_env.h"

namespace softverbs::it {
namespace {

class AhTest : public ContextTest {
 protected:
  void ExpectCreateFails(ibv_ah_attr attr, int err, const char* what) {
    size_t before = MyObjectCount("ah");
    errno = 0;
    ibv_ah* ah = ibv_create_ah(pd_, &attr);
    EXPECT_EQ(ah, nullptr) << what;
    EXPECT_EQ(errno, err) << what;
    if (ah) ibv_destroy_ah(ah);
    EXPECT_EQ(MyObjectCount("ah"), before) << what;
  }
};

TEST_F(AhTest, CreateAndDestroyWithGrh) {
  ibv_ah_attr attr = LoopbackAh(ctx_);
  ibv_ah* ah = ibv_create_ah(pd_, &attr);
  ASSERT_NE(ah, nullptr) << strerror(errno);
  EXPECT_EQ(ah->pd, pd_);
  EXPECT_EQ(ah->context, ctx_);
  EXPECT_EQ(MyObjectCount("ah"), 1u);
  EXPECT_EQ(ibv_dealloc_pd(pd_), EBUSY) << "the AH holds the PD";
  EXPECT_EQ(ibv_destroy_ah(ah), 0);
  EXPECT_EQ(MyObjectCount("ah"), 0u);
}

TEST_F(AhTest, RoceRequiresGrh) {
  ibv_ah_attr attr = LoopbackAh(ctx_);
  attr.is_global = 0;
  attr.dlid = 1;
  ExpectCreateFails(attr, EINVAL, "no GRH on RoCE");
}

TEST_F(AhTest, SgidIndexMustBeInTheTable) {
  ibv_port_attr port{};
  ASSERT_EQ(ibv_query_port(ctx_, 1, &port), 0);
  ibv_ah_attr attr = LoopbackAh(ctx_);
  attr.grh.sgid_index = static_cast<uint8_t>(port.gid_tbl_len);
  ExpectCreateFails(attr, EINVAL, "sgid_index beyond gid_tbl_len");
  attr.grh.sgid_index = 255;
  ExpectCreateFails(attr, EINVAL, "sgid_index 255");
}

TEST_F(AhTest, PortMustExist) {
  ibv_ah_attr attr = LoopbackAh(ctx_);
  attr.port_num = 2;
  ExpectCreateFails(attr, EINVAL, "port 2");
}

TEST_F(AhTest, InitAhFromWcAnswersTheSender) {
  int v2 = RoceV2GidIndex(ctx_);
  ASSERT_GE(v2, 0);
  ibv_gid local{};
  ASSERT_EQ(ibv_query_gid(ctx_, 1, v2, &local), 0);
  ibv_grh grh{};
  grh.version_tclass_flow = htonl((6u << 28) | (0x12u << 20) | 0x345);
  grh.hop_limit = 64;
  grh.dgid = local;
  memset(grh.sgid.raw, 0, 16);
  grh.sgid.raw[10] = grh.sgid.raw[11] = 0xff;
  grh.sgid.raw[12] = 192;
  grh.sgid.raw[13] = 0;
  grh.sgid.raw[14] = 2;
  grh.sgid.raw[15] = 77;
  ibv_wc wc{};
  wc.wc_flags = IBV_WC_GRH;
  wc.sl = 0;
  ibv_ah_attr attr{};
  ASSERT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, &grh, &attr), 0);
  EXPECT_EQ(attr.is_global, 1);
  EXPECT_EQ(attr.port_num, 1);
  EXPECT_EQ(memcmp(attr.grh.dgid.raw, grh.sgid.raw, 16), 0) << "reply goes to the source";
  EXPECT_EQ(attr.grh.sgid_index, v2) << "from the GID the datagram reached";
  EXPECT_EQ(attr.grh.flow_label, 0x345u);
  EXPECT_EQ(attr.grh.traffic_class, 0x12);
  ibv_ah* ah = ibv_create_ah_from_wc(pd_, &wc, &grh, 1);
  ASSERT_NE(ah, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_destroy_ah(ah), 0);
}

TEST_F(AhTest, InitAhFromWcRejectsBadInput) {
  ibv_wc wc{};
  ibv_grh grh{};
  ibv_ah_attr attr{};
  errno = 0;
  EXPECT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, &grh, &attr), -1) << "no IBV_WC_GRH on RoCE";
  EXPECT_EQ(errno, EINVAL);
  wc.wc_flags = IBV_WC_GRH;
  errno = 0;
  EXPECT_EQ(ibv_init_ah_from_wc(ctx_, 2, &wc, &grh, &attr), -1) << "port 2";
  EXPECT_EQ(errno, EINVAL);
  // A GRH whose destination is not one of our GIDs.
  grh.dgid.raw[0] = 0x20;
  grh.dgid.raw[15] = 0x99;
  EXPECT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, &grh, &attr), -1);
  EXPECT_EQ(ibv_create_ah_from_wc(pd_, &wc, &grh, 1), nullptr);
  EXPECT_EQ(MyObjectCount("ah"), 0u);
}

}  // namespace
}  // namespace softverbs::it
