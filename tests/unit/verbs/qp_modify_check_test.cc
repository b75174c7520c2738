// Value checks, check order, XRC stripping and explanations of CheckModifyQp.
// The mask/transition table itself is covered exhaustively by
// qp_state_table_test.cc.
#include "verbs/qp_modify_check.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "modify_request_fixture.h"
#include "verbs/qp_names.h"

namespace softverbs::verbs {
namespace {

using fixtures::kDeviceLimits;
using fixtures::kRocePort;
using fixtures::ValidAttr;

constexpr uint32_t kResetToInitMask =
    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr uint32_t kInitToRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                    IBV_QP_MIN_RNR_TIMER;
constexpr uint32_t kRtrToRtsMask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

constexpr PortLimits kIbPort{.pkey_table_len = 4,
                             .gid_table_len = 2,
                             .max_mtu = IBV_MTU_4096,
                             .link_layer = IBV_LINK_LAYER_INFINIBAND};

// One RC transition (cur -> attr.qp_state) with a valid request whose fields
// a test then spoils one at a time.
class RcModifyTest : public ::testing::Test {
 protected:
  ModifyVerdict Check(ibv_qp_state cur, ibv_qp_state next, uint32_t mask,
                      const PortLimits& port = kRocePort) {
    attr_.qp_state = next;
    return CheckModifyQp(IBV_QPT_RC, cur, attr_, mask, kDeviceLimits, port);
  }
  ModifyVerdict ToInit(uint32_t extra = 0) {
    return Check(IBV_QPS_RESET, IBV_QPS_INIT, kResetToInitMask | extra);
  }
  ModifyVerdict ToRtr(uint32_t extra = 0, const PortLimits& port = kRocePort) {
    return Check(IBV_QPS_INIT, IBV_QPS_RTR, kInitToRtrMask | extra, port);
  }
  ModifyVerdict ToRts(uint32_t extra = 0) {
    return Check(IBV_QPS_RTR, IBV_QPS_RTS, kRtrToRtsMask | extra);
  }

  ibv_qp_attr attr_ = ValidAttr();
};

// Expects EINVAL with exactly `why`.
#define EXPECT_REJECTED(verdict_expr, why_text) \
  do {                                          \
    const ModifyVerdict v = (verdict_expr);     \
    EXPECT_EQ(v.err, EINVAL);                   \
    EXPECT_EQ(v.why, why_text);                 \
  } while (0)

#define EXPECT_ACCEPTED(verdict_expr)       \
  do {                                      \
    const ModifyVerdict v = (verdict_expr); \
    EXPECT_EQ(v.err, 0) << v.why;           \
    EXPECT_TRUE(v.ok());                    \
  } while (0)

TEST_F(RcModifyTest, ValidConnectionSequence) {
  EXPECT_ACCEPTED(ToInit());
  EXPECT_ACCEPTED(ToRtr());
  EXPECT_ACCEPTED(ToRts());
  const ModifyVerdict v = ToRts();
  EXPECT_EQ(v.cur, IBV_QPS_RTR);
  EXPECT_EQ(v.next, IBV_QPS_RTS);
  EXPECT_EQ(v.effective_mask, kRtrToRtsMask);
  EXPECT_EQ(v.warning, "");
}

// --- port_num / pkey_index / qp_access_flags ---

TEST_F(RcModifyTest, PortNumMustBeAPortOfTheDevice) {
  attr_.port_num = 0;
  EXPECT_REJECTED(ToInit(), "port_num 0 is not a port of the device (valid: 1..1)");
  attr_.port_num = 2;
  EXPECT_REJECTED(ToInit(), "port_num 2 is not a port of the device (valid: 1..1)");
}

TEST_F(RcModifyTest, PkeyIndexMustBeInsideTheTable) {
  attr_.pkey_index = 1;
  EXPECT_REJECTED(ToInit(), "pkey_index 1 is outside the port's P_Key table (length 1)");
  attr_.pkey_index = 3;
  EXPECT_ACCEPTED(Check(IBV_QPS_RESET, IBV_QPS_INIT, kResetToInitMask, kIbPort));
}

TEST_F(RcModifyTest, AccessFlagsToleratesEveryDefinedFlag) {
  attr_.qp_access_flags = 0;
  EXPECT_ACCEPTED(ToInit());
  // Linux keeps qp_access_flags unchecked; apps pass LOCAL_WRITE and MR flags.
  attr_.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                          IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND |
                          IBV_ACCESS_RELAXED_ORDERING;
  EXPECT_ACCEPTED(ToInit());
}

TEST_F(RcModifyTest, AccessFlagsRejectsUndefinedBits) {
  attr_.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | (1u << 15);
  EXPECT_REJECTED(ToInit(), "qp_access_flags 0x8002 has bits 0x8000 that are not ibv_access_flags");
}

// --- address vector (IBV_QP_AV) ---

TEST_F(RcModifyTest, AvPortMustBeAPortOfTheDevice) {
  attr_.ah_attr.port_num = 0;
  EXPECT_REJECTED(ToRtr(), "ah_attr.port_num 0 is not a port of the device (valid: 1..1)");
}

TEST_F(RcModifyTest, RoceAvNeedsGrh) {
  attr_.ah_attr.is_global = 0;
  EXPECT_REJECTED(ToRtr(), "ah_attr.is_global must be 1 on a RoCE port (RoCE requires a GRH)");
  EXPECT_ACCEPTED(ToRtr(0, kIbPort));  // InfiniBand routes by LID
}

TEST_F(RcModifyTest, AvSgidIndexMustBeInsideTheGidTable) {
  attr_.ah_attr.grh.sgid_index = 4;
  EXPECT_REJECTED(ToRtr(), "ah_attr.grh.sgid_index 4 is outside the port's GID table (length 4)");
  attr_.ah_attr.grh.sgid_index = 3;
  EXPECT_ACCEPTED(ToRtr());
}

// --- path_mtu ---

TEST_F(RcModifyTest, PathMtuMustBeAnIbvMtu) {
  attr_.path_mtu = static_cast<ibv_mtu>(0);
  EXPECT_REJECTED(ToRtr(), "path_mtu 0 is not an ibv_mtu (1..5 = 256..4096 bytes)");
  attr_.path_mtu = static_cast<ibv_mtu>(6);
  EXPECT_REJECTED(ToRtr(), "path_mtu 6 is not an ibv_mtu (1..5 = 256..4096 bytes)");
}

// The bound is the port's max_mtu (rxe_qp_chk_attr, mlx5), not its active
// MTU: the fixture's port has max_mtu 1024 here.
TEST_F(RcModifyTest, PathMtuMustNotExceedMaxMtu) {
  attr_.path_mtu = IBV_MTU_4096;
  EXPECT_REJECTED(ToRtr(), "path_mtu 5 (4096) is above the port's max MTU 1024");
  attr_.path_mtu = IBV_MTU_2048;
  EXPECT_REJECTED(ToRtr(), "path_mtu 4 (2048) is above the port's max MTU 1024");
  attr_.path_mtu = IBV_MTU_1024;
  EXPECT_ACCEPTED(ToRtr());
  attr_.path_mtu = IBV_MTU_256;
  EXPECT_ACCEPTED(ToRtr());
}

// --- timers and retry counts ---

TEST_F(RcModifyTest, MinRnrTimerFitsFiveBits) {
  attr_.min_rnr_timer = 31;
  EXPECT_ACCEPTED(ToRtr());
  attr_.min_rnr_timer = 32;
  EXPECT_REJECTED(ToRtr(), "min_rnr_timer 32 is above 31");
}

TEST_F(RcModifyTest, TimeoutFitsFiveBits) {
  attr_.timeout = 31;
  EXPECT_ACCEPTED(ToRts());
  attr_.timeout = 32;
  EXPECT_REJECTED(ToRts(), "timeout 32 is above 31");
}

TEST_F(RcModifyTest, RetryCountsFitThreeBits) {
  attr_.retry_cnt = 8;
  EXPECT_REJECTED(ToRts(), "retry_cnt 8 is above 7");
  attr_.retry_cnt = 7;
  attr_.rnr_retry = 8;
  EXPECT_REJECTED(ToRts(), "rnr_retry 8 is above 7");
  attr_.rnr_retry = 7;  // 7 = retry forever
  EXPECT_ACCEPTED(ToRts());
}

// --- RDMA read / atomic depths ---

TEST_F(RcModifyTest, MaxRdAtomicIsBoundedByInitiatorDepth) {
  attr_.max_rd_atomic = kDeviceLimits.max_qp_init_rd_atom;
  EXPECT_ACCEPTED(ToRts());
  attr_.max_rd_atomic = kDeviceLimits.max_qp_init_rd_atom + 1;  // still <= max_qp_rd_atom
  EXPECT_REJECTED(ToRts(), "max_rd_atomic 9 is above the device's max_qp_init_rd_atom 8");
}

TEST_F(RcModifyTest, MaxDestRdAtomicIsBoundedByResponderDepth) {
  attr_.max_dest_rd_atomic = kDeviceLimits.max_qp_rd_atom;
  EXPECT_ACCEPTED(ToRtr());
  attr_.max_dest_rd_atomic = kDeviceLimits.max_qp_rd_atom + 1;
  EXPECT_REJECTED(ToRtr(), "max_dest_rd_atomic 17 is above the device's max_qp_rd_atom 16");
}

// --- PSNs: masked to 24 bits with a warning, as Linux does ---

TEST_F(RcModifyTest, OversizedRqPsnIsAcceptedWithWarning) {
  attr_.rq_psn = 0x1000000;
  const ModifyVerdict v = ToRtr();
  EXPECT_EQ(v.err, 0);
  EXPECT_EQ(v.warning, "rq_psn 0x1000000 does not fit 24 bits; masked to 0x0 as Linux does");
  EXPECT_EQ(attr_.rq_psn & kPsnMask, 0u);
}

TEST_F(RcModifyTest, OversizedSqPsnIsAcceptedWithWarning) {
  attr_.sq_psn = 0xff123456;
  const ModifyVerdict v = ToRts();
  EXPECT_EQ(v.err, 0);
  EXPECT_EQ(v.warning, "sq_psn 0xff123456 does not fit 24 bits; masked to 0x123456 as Linux does");
}

TEST_F(RcModifyTest, PsnOutsideTheMaskIsNotLookedAt) {
  attr_.sq_psn = 0xffffffff;  // IBV_QP_SQ_PSN is not in the INIT->RTR mask
  EXPECT_EQ(ToRtr().warning, "");
}

// --- alternate path and path migration ---

TEST_F(RcModifyTest, AltPathIsChecked) {
  attr_.alt_port_num = 2;
  EXPECT_REJECTED(ToRtr(IBV_QP_ALT_PATH),
                  "alt_port_num 2 is not a port of the device (valid: 1..1)");
  attr_.alt_port_num = 1;
  attr_.alt_ah_attr.is_global = 0;
  EXPECT_REJECTED(ToRtr(IBV_QP_ALT_PATH),
                  "alt_ah_attr.is_global must be 1 on a RoCE port (RoCE requires a GRH)");
  attr_.alt_ah_attr.is_global = 1;
  attr_.alt_pkey_index = 1;
  EXPECT_REJECTED(ToRtr(IBV_QP_ALT_PATH),
                  "alt_pkey_index 1 is outside the port's P_Key table (length 1)");
  attr_.alt_pkey_index = 0;
  attr_.alt_timeout = 32;
  EXPECT_REJECTED(ToRtr(IBV_QP_ALT_PATH), "alt_timeout 32 is above 31");
  attr_.alt_timeout = 31;
  EXPECT_ACCEPTED(ToRtr(IBV_QP_ALT_PATH));
}

TEST_F(RcModifyTest, AltPortMustMatchAltAvPort) {
  attr_.alt_ah_attr.port_num = 0;
  EXPECT_REJECTED(ToRtr(IBV_QP_ALT_PATH),
                  "alt_ah_attr.port_num 0 is not a port of the device (valid: 1..1)");
}

TEST_F(RcModifyTest, AltPathValuesIgnoredWithoutTheBit) {
  attr_.alt_port_num = 9;
  attr_.alt_timeout = 99;
  EXPECT_ACCEPTED(ToRtr());
}

TEST_F(RcModifyTest, PathMigStateMustBeAnIbvMigState) {
  attr_.path_mig_state = IBV_MIG_ARMED;
  EXPECT_ACCEPTED(ToRts(IBV_QP_PATH_MIG_STATE));
  attr_.path_mig_state = static_cast<ibv_mig_state>(3);
  EXPECT_REJECTED(ToRts(IBV_QP_PATH_MIG_STATE),
                  "path_mig_state 3 is not an ibv_mig_state (MIGRATED, REARM, ARMED)");
}

TEST(UdModifyTest, QkeyAcceptsAnyValue) {
  ibv_qp_attr attr = ValidAttr();
  attr.qp_state = IBV_QPS_INIT;
  attr.qkey = 0xffffffff;
  const ModifyVerdict v = CheckModifyQp(
      IBV_QPT_UD, IBV_QPS_RESET, attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY,
      kDeviceLimits, kRocePort);
  EXPECT_TRUE(v.ok()) << v.why;
}

// --- order of checks ---

TEST_F(RcModifyTest, UnsupportedMaskBitsComeFirstAsEopnotsupp) {
  attr_.port_num = 0;  // would be EINVAL
  const ModifyVerdict v = ToInit(IBV_QP_RATE_LIMIT);
  EXPECT_EQ(v.err, EOPNOTSUPP);
  EXPECT_EQ(v.why,
            "attr_mask bits IBV_QP_RATE_LIMIT are outside ibv_modify_qp's set "
            "(IBV_QP_STATE..IBV_QP_DEST_QPN)");
  EXPECT_EQ(v.effective_mask, kResetToInitMask | IBV_QP_RATE_LIMIT);
  EXPECT_EQ(ToInit(1u << 21).err, EOPNOTSUPP);
  EXPECT_EQ(ToInit(1u << 31).err, EOPNOTSUPP);
}

TEST_F(RcModifyTest, StateValuesAboveErrAreEinval) {
  attr_.qp_state = IBV_QPS_UNKNOWN;
  EXPECT_REJECTED(
      CheckModifyQp(IBV_QPT_RC, IBV_QPS_RTS, attr_, IBV_QP_STATE, kDeviceLimits, kRocePort),
      "qp_state 7 is not a QP state (0..6 = RESET..ERR)");
  attr_.qp_state = IBV_QPS_RTS;
  attr_.cur_qp_state = static_cast<ibv_qp_state>(9);
  EXPECT_REJECTED(CheckModifyQp(IBV_QPT_RC, IBV_QPS_RTS, attr_, IBV_QP_STATE | IBV_QP_CUR_STATE,
                                kDeviceLimits, kRocePort),
                  "cur_qp_state 9 is not a QP state (0..6 = RESET..ERR)");
}

TEST_F(RcModifyTest, StateValuesAreIgnoredWithoutTheirBits) {
  attr_.qp_state = IBV_QPS_UNKNOWN;
  attr_.cur_qp_state = IBV_QPS_UNKNOWN;
  EXPECT_ACCEPTED(CheckModifyQp(IBV_QPT_RC, IBV_QPS_RTS, attr_, IBV_QP_MIN_RNR_TIMER, kDeviceLimits,
                                kRocePort));
}

TEST_F(RcModifyTest, CorruptCurrentStateIsEinval) {
  attr_.qp_state = IBV_QPS_ERR;
  EXPECT_REJECTED(CheckModifyQp(IBV_QPT_RC, static_cast<ibv_qp_state>(12), attr_, IBV_QP_STATE,
                                kDeviceLimits, kRocePort),
                  "the QP's current state 12 is not a QP state");
}

TEST_F(RcModifyTest, TableIsCheckedBeforeValues) {
  attr_.port_num = 9;
  EXPECT_REJECTED(Check(IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PORT),
                  "RESET->INIT on RC requires IBV_QP_ACCESS_FLAGS|IBV_QP_PKEY_INDEX");
}

TEST(QpTypeTest, TypesWithoutRulesAreEinval) {
  ibv_qp_attr attr = ValidAttr();
  attr.qp_state = IBV_QPS_INIT;
  const ModifyVerdict v = CheckModifyQp(IBV_QPT_DRIVER, IBV_QPS_RESET, attr, kResetToInitMask,
                                        kDeviceLimits, kRocePort);
  EXPECT_EQ(v.err, EINVAL);
  EXPECT_EQ(v.why, "QP type 255 (DRIVER) has no modify rules");
}

// --- mlx5's DC QPs: the driver's cells, not the IBA table's ---

ModifyVerdict CheckDc(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next, uint32_t mask) {
  ibv_qp_attr attr = ValidAttr();
  attr.qp_state = next;
  return CheckModifyQp(type, cur, attr, mask, kDeviceLimits, kRocePort);
}

constexpr uint32_t kDciToRts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                               IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

TEST(DcModifyTest, DciTakesModifyDciQpIsOksMasks) {
  constexpr uint32_t kToInit = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  EXPECT_ACCEPTED(CheckDc(kQptDcIni, IBV_QPS_RESET, IBV_QPS_INIT, kToInit));
  EXPECT_REJECTED(CheckDc(kQptDcIni, IBV_QPS_RESET, IBV_QPS_INIT, kToInit | IBV_QP_ACCESS_FLAGS),
                  "RESET->INIT on DCI does not accept IBV_QP_ACCESS_FLAGS");
  EXPECT_ACCEPTED(CheckDc(kQptDcIni, IBV_QPS_INIT, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PORT));
  EXPECT_ACCEPTED(CheckDc(kQptDcIni, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_PATH_MTU));
  // UCX's dc_mlx5 gives its DCIs a default path.
  EXPECT_ACCEPTED(
      CheckDc(kQptDcIni, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_AV));
  EXPECT_REJECTED(CheckDc(kQptDcIni, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_STATE),
                  "INIT->RTR on DCI requires IBV_QP_PATH_MTU");
  EXPECT_REJECTED(CheckDc(kQptDcIni, IBV_QPS_INIT, IBV_QPS_RTR,
                          IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN),
                  "INIT->RTR on DCI does not accept IBV_QP_DEST_QPN");
  EXPECT_ACCEPTED(CheckDc(kQptDcIni, IBV_QPS_RTR, IBV_QPS_RTS, kDciToRts));
  EXPECT_ACCEPTED(
      CheckDc(kQptDcIni, IBV_QPS_RTS, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER));
  EXPECT_REJECTED(CheckDc(kQptDcIni, IBV_QPS_RTS, IBV_QPS_SQD, IBV_QP_STATE),
                  "RTS->SQD is not a valid transition of an mlx5 DCI");
  EXPECT_ACCEPTED(CheckDc(kQptDcIni, IBV_QPS_RTS, IBV_QPS_ERR, IBV_QP_STATE));
  EXPECT_ACCEPTED(CheckDc(kQptDcIni, IBV_QPS_ERR, IBV_QPS_RESET, IBV_QP_STATE));
  EXPECT_REJECTED(CheckDc(kQptDcIni, IBV_QPS_RESET, IBV_QPS_ERR, IBV_QP_STATE),
                  "RESET->ERR is not a valid transition of an mlx5 DCI");
}

TEST(DcModifyTest, DctTakesModifyDctsTwoCells) {
  constexpr uint32_t kToInit = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  constexpr uint32_t kToRtr = IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU;
  EXPECT_ACCEPTED(CheckDc(kQptDcTgt, IBV_QPS_RESET, IBV_QPS_INIT, kToInit));
  EXPECT_REJECTED(CheckDc(kQptDcTgt, IBV_QPS_RESET, IBV_QPS_INIT, kToInit & ~IBV_QP_ACCESS_FLAGS),
                  "RESET->INIT on DCT requires IBV_QP_ACCESS_FLAGS");
  EXPECT_ACCEPTED(CheckDc(kQptDcTgt, IBV_QPS_INIT, IBV_QPS_RTR, kToRtr));
  EXPECT_REJECTED(CheckDc(kQptDcTgt, IBV_QPS_INIT, IBV_QPS_RTR, kToRtr | IBV_QP_PKEY_INDEX),
                  "INIT->RTR on DCT does not accept IBV_QP_PKEY_INDEX");
  for (ibv_qp_state next : {IBV_QPS_RTS, IBV_QPS_ERR, IBV_QPS_RESET}) {
    EXPECT_EQ(CheckDc(kQptDcTgt, IBV_QPS_RTR, next, IBV_QP_STATE).err, EINVAL) << next;
  }
  EXPECT_EQ(CheckDc(kQptDcTgt, IBV_QPS_INIT, IBV_QPS_INIT, IBV_QP_STATE).err, EINVAL);
}

// --- IBV_QP_CUR_STATE ---

TEST_F(RcModifyTest, CurStateOnlyFromRtrRtsSqdSqe) {
  attr_.cur_qp_state = IBV_QPS_INIT;
  EXPECT_REJECTED(Check(IBV_QPS_INIT, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_CUR_STATE),
                  "IBV_QP_CUR_STATE is only allowed from RTR/RTS/SQD/SQE, not INIT");
}

TEST_F(RcModifyTest, AssertedCurStateIsTheStartingState) {
  // Linux trusts cur_qp_state: an RTR QP asserted to be in RTS is checked as
  // RTS->RTS, which needs no SQ_PSN.
  attr_.cur_qp_state = IBV_QPS_RTS;
  const ModifyVerdict v = Check(IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_CUR_STATE);
  EXPECT_TRUE(v.ok()) << v.why;
  EXPECT_EQ(v.cur, IBV_QPS_RTS);
  EXPECT_EQ(v.next, IBV_QPS_RTS);
}

TEST_F(RcModifyTest, CurStateNotAcceptedFromSqeOnRc) {
  attr_.cur_qp_state = IBV_QPS_SQE;
  EXPECT_REJECTED(Check(IBV_QPS_SQE, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_CUR_STATE),
                  "SQE->RTS on RC does not accept IBV_QP_CUR_STATE");
}

// --- XRC mask stripping ---

ModifyVerdict CheckType(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next, uint32_t mask,
                        ibv_qp_attr attr = ValidAttr()) {
  attr.qp_state = next;
  return CheckModifyQp(type, cur, attr, mask, kDeviceLimits, kRocePort);
}

TEST(XrcStripTest, XrcSendAcceptsRcStyleRtrMask) {
  for (ibv_qp_type type : {IBV_QPT_XRC_SEND, static_cast<ibv_qp_type>(5)}) {
    const ModifyVerdict v = CheckType(type, IBV_QPS_INIT, IBV_QPS_RTR, kInitToRtrMask);
    EXPECT_TRUE(v.ok()) << v.why;
    EXPECT_EQ(v.effective_mask,
              kInitToRtrMask & ~(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
  }
}

TEST(XrcStripTest, XrcRecvAcceptsRcStyleRtsMask) {
  const ModifyVerdict v = CheckType(IBV_QPT_XRC_RECV, IBV_QPS_RTR, IBV_QPS_RTS, kRtrToRtsMask);
  EXPECT_TRUE(v.ok()) << v.why;
  EXPECT_EQ(v.effective_mask, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN);
}

TEST(XrcStripTest, StrippedAttributesAreNotValueChecked) {
  ibv_qp_attr attr = ValidAttr();
  attr.retry_cnt = 99;
  attr.rnr_retry = 99;
  attr.max_rd_atomic = 200;
  EXPECT_TRUE(CheckType(IBV_QPT_XRC_RECV, IBV_QPS_RTR, IBV_QPS_RTS, kRtrToRtsMask, attr).ok());
  EXPECT_EQ(CheckType(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, kRtrToRtsMask, attr).err, EINVAL);
}

TEST(XrcStripTest, StrippedRequiredBitsStillRequiredElsewhere) {
  // XRC_RECV's INIT->RTR requires MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER (not stripped for it).
  const ModifyVerdict v =
      CheckType(IBV_QPT_XRC_RECV, IBV_QPS_INIT, IBV_QPS_RTR,
                kInitToRtrMask & ~(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
  EXPECT_EQ(v.err, EINVAL);
  EXPECT_EQ(v.why, "INIT->RTR on XRC_RECV requires IBV_QP_MIN_RNR_TIMER|IBV_QP_MAX_DEST_RD_ATOMIC");
}

TEST(XrcStripTest, StripFunction) {
  EXPECT_EQ(StripXrcModifyMask(IBV_QPT_XRC_SEND, 0xffffffff), 0xffffffffu & ~0x28000u);
  EXPECT_EQ(StripXrcModifyMask(static_cast<ibv_qp_type>(5), 0xffffffff), 0xffffffffu & ~0x28000u);
  EXPECT_EQ(StripXrcModifyMask(IBV_QPT_XRC_RECV, 0xffffffff), 0xffffffffu & ~0x2C00u);
  EXPECT_EQ(StripXrcModifyMask(IBV_QPT_RC, 0xffffffff), 0xffffffffu);
  EXPECT_EQ(StripXrcModifyMask(IBV_QPT_DRIVER, 0x2C00), 0x2C00u);
}

// --- explanations ---

TEST_F(RcModifyTest, ExplainsMissingBit) {
  EXPECT_REJECTED(Check(IBV_QPS_RESET, IBV_QPS_INIT, kResetToInitMask & ~IBV_QP_PORT),
                  "RESET->INIT on RC requires IBV_QP_PORT");
}

TEST_F(RcModifyTest, ExplainsExtraBit) {
  EXPECT_REJECTED(ToInit(IBV_QP_QKEY | IBV_QP_SQ_PSN),
                  "RESET->INIT on RC does not accept IBV_QP_QKEY|IBV_QP_SQ_PSN");
}

TEST_F(RcModifyTest, ExplainsQpResizeIsNotAModify) {
  EXPECT_REJECTED(Check(IBV_QPS_RTS, IBV_QPS_RTS, IBV_QP_CAP),
                  "RTS->RTS on RC does not accept IBV_QP_CAP");
}

TEST_F(RcModifyTest, ExplainsInvalidTransition) {
  EXPECT_REJECTED(Check(IBV_QPS_RESET, IBV_QPS_RTR, kInitToRtrMask),
                  "RESET->RTR is not a valid QP state transition");
  EXPECT_REJECTED(Check(IBV_QPS_RESET, IBV_QPS_ERR, IBV_QP_STATE),
                  "RESET->ERR is not a valid QP state transition");
  EXPECT_REJECTED(Check(IBV_QPS_RTS, IBV_QPS_SQE, IBV_QP_STATE),
                  "RTS->SQE is not a valid QP state transition");
}

TEST_F(RcModifyTest, ExplainsModifyWithoutStateInRtr) {
  EXPECT_REJECTED(Check(IBV_QPS_RTR, IBV_QPS_RTR, IBV_QP_MIN_RNR_TIMER),
                  "RTR->RTR (no IBV_QP_STATE: the QP stays in RTR) is not a valid QP state "
                  "transition");
}

TEST_F(RcModifyTest, SuccessHasNoExplanation) {
  const ModifyVerdict v = ToInit();
  EXPECT_EQ(v.why, "");
  EXPECT_EQ(v.warning, "");
}

}  // namespace
}  // namespace softverbs::verbs
