// QUERY_HCA_CAP, QUERY_HCA_VPORT_CONTEXT, QUERY_ADAPTER, NOP: answers come
// from DeviceCaps (the numbers ibv_query_device reports).
#include <gtest/gtest.h>

#include "devx_fixture.h"

namespace softverbs::devx::testing {
namespace {

constexpr size_t kCapBit = 0x10 * 8;  // capability starts at out byte 0x10

TEST_F(DevxTest, GeneralCapsFollowDeviceCaps) {
  Reply reply = General(alice_, Box(16, kQueryHcaCap, 0x01), 16 + 4096);
  ASSERT_EQ(reply.error, 0);
  auto cap = [&](size_t offset, size_t width) { return reply.Get(kCapBit + offset, width); };
  EXPECT_EQ(cap(0x20, 1), 1u);          // hca_cap_2
  EXPECT_EQ(cap(0x30, 16), 3u);         // vhca_id
  EXPECT_EQ(cap(0x88, 8), 15u);         // log_max_qp_sz: max_qp_wr 2^15
  EXPECT_EQ(cap(0x9b, 5), 16u);         // log_max_qp: 2^16
  EXPECT_EQ(cap(0xc8, 8), 22u);         // log_max_cq_sz: max_cqe 2^22 - 1
  EXPECT_EQ(cap(0xdb, 5), 16u);         // log_max_cq
  EXPECT_EQ(cap(0xea, 6), 20u);         // log_max_mkey
  EXPECT_EQ(cap(0x170, 16), 256u);      // gid_table_size
  EXPECT_EQ(cap(0x1b6, 2), 1u);         // port_type: Ethernet
  EXPECT_EQ(cap(0x1b8, 8), 1u);         // num_ports
  EXPECT_EQ(cap(0x1c3, 5), 31u);        // log_max_msg
  EXPECT_EQ(cap(0x21e, 1), 1u);         // atomic
  EXPECT_EQ(cap(0x23f, 1), 1u);         // rc
  EXPECT_EQ(cap(0x258, 8), 12u);        // log_pg_sz: 4 KiB
  EXPECT_EQ(cap(0x32b, 5), 16u);        // log_max_pd
  EXPECT_NE(cap(0x463, 5), 0u);         // log_max_uctx: DEVX enabled
  EXPECT_EQ(cap(0x470, 16), 4u);        // max_num_eqs
  EXPECT_EQ(cap(0x4e0, 32), 1000000u);  // device_frequency_khz
}

TEST_F(DevxTest, MaxAndCurrentCapsAgree) {
  Reply current = General(alice_, Box(16, kQueryHcaCap, 0x01), 16 + 4096);
  Reply max = General(alice_, Box(16, kQueryHcaCap, 0x00), 16 + 4096);
  ASSERT_EQ(current.error, 0);
  ASSERT_EQ(max.error, 0);
  EXPECT_EQ(current.out, max.out);
}

TEST_F(DevxTest, InfinibandPortIsReportedAsPortTypeZero) {
  device_.caps.port.ethernet = false;
  Reply reply = General(alice_, Box(16, kQueryHcaCap, 0x01), 16 + 2048);
  ASSERT_EQ(reply.error, 0);
  EXPECT_EQ(reply.Get(kCapBit + 0x1b6, 2), 0u);
}

TEST_F(DevxTest, GeneralCaps2GateTheDbrLessTest) {
  Reply reply = General(alice_, Box(16, kQueryHcaCap, 0x41), 16 + 2048);
  ASSERT_EQ(reply.error, 0);
  EXPECT_EQ(reply.Get(kCapBit + 0x2e1, 1), 1u);  // send_dbr_mode_no_dbr_ext
  device_.caps.send_dbr_less = false;
  reply = General(alice_, Box(16, kQueryHcaCap, 0x41), 16 + 2048);
  EXPECT_EQ(reply.Get(kCapBit + 0x2e1, 1), 0u);
}

TEST_F(DevxTest, AbsentCapabilityTypesAreAllZero) {
  Reply reply = General(alice_, Box(16, kQueryHcaCap, (0x02 << 1) | 1), 16 + 256);  // ODP
  ASSERT_EQ(reply.error, 0);
  for (size_t i = 16; i < reply.out.size(); ++i) EXPECT_EQ(reply.out[i], 0);
}

TEST_F(DevxTest, UnknownCapabilityTypeIsBadParam) {
  Reply reply = General(alice_, Box(16, kQueryHcaCap, (0x3f << 1) | 1), 16 + 256);
  EXPECT_EQ(reply.error, EREMOTEIO);
  EXPECT_EQ(reply.status(), kBadParam);
}

TEST_F(DevxTest, OtherFunctionIsBadParam) {
  Box box(16, kQueryHcaCap, 1);
  box.Set(0x40, 1, 1);
  Reply reply = General(alice_, box, 16 + 256);
  EXPECT_EQ(reply.error, EREMOTEIO);
  EXPECT_EQ(reply.status(), kBadParam);
}

TEST_F(DevxTest, VportContextReportsTheLidAtContextBit0x300) {
  device_.caps.port.ethernet = false;
  device_.caps.port.lid = 0x1234;
  device_.caps.port.sm_lid = 0x1;
  Reply reply = General(alice_, Box(16, kQueryHcaVportContext), 528);
  ASSERT_EQ(reply.error, 0);
  constexpr size_t kCtx = 0x10 * 8;
  EXPECT_EQ(reply.Get(kCtx + 0x300, 16), 0x1234u);  // lid
  EXPECT_EQ(reply.Get(kCtx + 0x320, 16), 0x1u);     // sm_lid
  EXPECT_EQ(reply.Get(kCtx + 0x118, 4), 4u);        // port_state ACTIVE
  EXPECT_EQ(reply.Get(kCtx + 0x101, 1), 1u);        // has_smi on IB
  EXPECT_EQ(reply.Get(kCtx + 0x180, 64), device_.caps.port.port_guid);
}

TEST_F(DevxTest, VportContextRejectsOtherVportsAndPorts) {
  Box port2(16, kQueryHcaVportContext);
  port2.Set(0x4c, 4, 2);
  EXPECT_EQ(General(alice_, port2, 528).status(), kBadParam);
  Box other(16, kQueryHcaVportContext);
  other.Set(0x40, 1, 1);
  EXPECT_EQ(General(alice_, other, 528).status(), kBadParam);
  Box port1(16, kQueryHcaVportContext);
  port1.Set(0x4c, 4, 1);
  EXPECT_EQ(General(alice_, port1, 528).error, 0);
}

TEST_F(DevxTest, QueryAdapterNamesTheVendor) {
  Reply reply = General(alice_, Box(16, kQueryAdapter), 0x110);
  ASSERT_EQ(reply.error, 0);
  EXPECT_EQ(reply.Get(0x80 + 0xc8, 24), 0x02c9u);
}

TEST_F(DevxTest, NopSucceeds) {
  Reply reply = General(alice_, Box(16, kNop), 16);
  EXPECT_EQ(reply.error, 0);
  EXPECT_EQ(reply.status(), kOk);
}

}  // namespace
}  // namespace softverbs::devx::testing
