#include "verbs/qp_names.h"

#include <gtest/gtest.h>

namespace softverbs::verbs {
namespace {

TEST(QpNames, States) {
  EXPECT_EQ(QpStateName(IBV_QPS_RESET), "RESET");
  EXPECT_EQ(QpStateName(IBV_QPS_INIT), "INIT");
  EXPECT_EQ(QpStateName(IBV_QPS_RTR), "RTR");
  EXPECT_EQ(QpStateName(IBV_QPS_RTS), "RTS");
  EXPECT_EQ(QpStateName(IBV_QPS_SQD), "SQD");
  EXPECT_EQ(QpStateName(IBV_QPS_SQE), "SQE");
  EXPECT_EQ(QpStateName(IBV_QPS_ERR), "ERR");
  EXPECT_EQ(QpStateName(IBV_QPS_UNKNOWN), "UNKNOWN");
  EXPECT_EQ(QpStateName(static_cast<ibv_qp_state>(42)), "UNKNOWN");
}

TEST(QpNames, Types) {
  EXPECT_EQ(QpTypeName(IBV_QPT_RC), "RC");
  EXPECT_EQ(QpTypeName(IBV_QPT_UC), "UC");
  EXPECT_EQ(QpTypeName(IBV_QPT_UD), "UD");
  EXPECT_EQ(QpTypeName(kLegacyQptXrc), "XRC");
  EXPECT_EQ(QpTypeName(IBV_QPT_RAW_PACKET), "RAW_PACKET");
  EXPECT_EQ(QpTypeName(IBV_QPT_XRC_SEND), "XRC_SEND");
  EXPECT_EQ(QpTypeName(IBV_QPT_XRC_RECV), "XRC_RECV");
  EXPECT_EQ(QpTypeName(IBV_QPT_DRIVER), "DRIVER");
  EXPECT_EQ(QpTypeName(static_cast<ibv_qp_type>(7)), "UNKNOWN");
}

TEST(QpNames, MaskBits) {
  EXPECT_EQ(QpAttrMaskBitName(IBV_QP_STATE), "IBV_QP_STATE");
  EXPECT_EQ(QpAttrMaskBitName(IBV_QP_PORT), "IBV_QP_PORT");
  EXPECT_EQ(QpAttrMaskBitName(IBV_QP_MAX_DEST_RD_ATOMIC), "IBV_QP_MAX_DEST_RD_ATOMIC");
  EXPECT_EQ(QpAttrMaskBitName(IBV_QP_DEST_QPN), "IBV_QP_DEST_QPN");
  EXPECT_EQ(QpAttrMaskBitName(IBV_QP_RATE_LIMIT), "IBV_QP_RATE_LIMIT");
  EXPECT_EQ(QpAttrMaskBitName(1u << 21), "");                    // never exposed
  EXPECT_EQ(QpAttrMaskBitName(IBV_QP_STATE | IBV_QP_PORT), "");  // not one bit
  for (uint32_t bit = 1; bit <= IBV_QP_DEST_QPN; bit <<= 1) {
    EXPECT_FALSE(QpAttrMaskBitName(bit).empty()) << bit;
  }
}

TEST(QpNames, MaskToString) {
  EXPECT_EQ(QpAttrMaskToString(0), "0");
  EXPECT_EQ(QpAttrMaskToString(IBV_QP_PORT | IBV_QP_STATE), "IBV_QP_STATE|IBV_QP_PORT");
  EXPECT_EQ(QpAttrMaskToString(IBV_QP_CAP | (1u << 22)), "IBV_QP_CAP|0x400000");
  EXPECT_EQ(QpAttrMaskToString(1u << 31), "0x80000000");
}

TEST(QpNames, Mtus) {
  EXPECT_EQ(MtuName(IBV_MTU_256), "256");
  EXPECT_EQ(MtuName(IBV_MTU_1024), "1024");
  EXPECT_EQ(MtuName(IBV_MTU_4096), "4096");
  EXPECT_EQ(MtuName(static_cast<ibv_mtu>(0)), "invalid");
  EXPECT_EQ(MtuName(static_cast<ibv_mtu>(6)), "invalid");
}

}  // namespace
}  // namespace softverbs::verbs
