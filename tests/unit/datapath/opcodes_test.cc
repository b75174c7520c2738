// The opcode table (datapath/opcodes.h): the rows agree with the verbs
// enums and with what each QP type may post.
#include "datapath/opcodes.h"

#include <gtest/gtest.h>

namespace softverbs::datapath {
namespace {

TEST(OpcodeTable, SendOpsFlagsPerQpType) {
  constexpr uint64_t kSend = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
  constexpr uint64_t kWrite = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
  constexpr uint64_t kReadAtomic = IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                                   IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
                                   IBV_QP_EX_WITH_ATOMIC_WRITE;
  constexpr uint64_t kWindows = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;
  EXPECT_EQ(SendOpsFlagsOf(IBV_QPT_RC),
            kSend | kWrite | kReadAtomic | kWindows | IBV_QP_EX_WITH_SEND_WITH_INV);
  EXPECT_EQ(SendOpsFlagsOf(IBV_QPT_XRC_SEND), kSend | kWrite | kReadAtomic | kWindows);
  EXPECT_EQ(SendOpsFlagsOf(IBV_QPT_UC), kSend | kWrite | kWindows);
  EXPECT_EQ(SendOpsFlagsOf(IBV_QPT_UD), kSend);
  EXPECT_EQ(SendOpsFlagsOf(IBV_QPT_XRC_RECV), 0u);
  EXPECT_EQ(SendOpsFlagsOf(IBV_QPT_RAW_PACKET), static_cast<uint64_t>(IBV_QP_EX_WITH_SEND));
}

TEST(OpcodeTable, RowsFollowTheirOpcode) {
  for (uint32_t op = IBV_WR_RDMA_WRITE; op <= IBV_WR_TSO; ++op) {
    const WrOpcodeInfo& row = WrOpcode(op);
    EXPECT_NE(row.action, WrAction::kUnknown) << op;
    // The send_ops flag of opcode n is bit n (verbs.h numbers both alike).
    EXPECT_EQ(row.send_ops_flag, 1ull << op) << row.name;
    EXPECT_EQ(row.immediate, (row.headers & kHeaderImmDt) != 0) << row.name;
    EXPECT_EQ(row.invalidate, (row.headers & kHeaderIeth) != 0) << row.name;
    // A result written locally needs a packet back; nothing inline then.
    if (row.writes_local) {
      EXPECT_FALSE(row.inline_allowed) << row.name;
    }
  }
  // DRIVER1 and the numbers rdma-core 44 leaves unused are no opcodes.
  for (uint32_t op = IBV_WR_DRIVER1; op < IBV_WR_ATOMIC_WRITE; ++op) {
    EXPECT_EQ(WrOpcode(op).action, WrAction::kUnknown) << op;
    EXPECT_EQ(WrOpcode(op).qp_types, 0u) << op;
  }
  // ATOMIC WRITE: an 8-byte write with remote write access, reliable QPs only.
  const WrOpcodeInfo& atomic_write = WrOpcode(IBV_WR_ATOMIC_WRITE);
  EXPECT_EQ(atomic_write.action, WrAction::kWrite);
  EXPECT_TRUE(atomic_write.atomic_write);
  EXPECT_EQ(atomic_write.remote_access, uint32_t{IBV_ACCESS_REMOTE_WRITE});
  EXPECT_EQ(atomic_write.send_wc, IBV_WC_ATOMIC_WRITE);
  EXPECT_EQ(atomic_write.send_ops_flag, uint64_t{IBV_QP_EX_WITH_ATOMIC_WRITE});
  EXPECT_EQ(atomic_write.qp_types, kReliableRequesters);
  EXPECT_EQ(WrOpcode(1000).qp_types, 0u);
}

TEST(OpcodeTable, CompletionOpcodesAndReceives) {
  EXPECT_EQ(WrOpcode(IBV_WR_RDMA_WRITE_WITH_IMM).send_wc, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(WrOpcode(IBV_WR_RDMA_WRITE_WITH_IMM).recv_wc, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_TRUE(WrOpcode(IBV_WR_RDMA_WRITE_WITH_IMM).consumes_recv);
  EXPECT_FALSE(WrOpcode(IBV_WR_RDMA_WRITE).consumes_recv);
  EXPECT_EQ(WrOpcode(IBV_WR_SEND_WITH_IMM).recv_wc, IBV_WC_RECV);
  EXPECT_EQ(WrOpcode(IBV_WR_RDMA_READ).send_wc, IBV_WC_RDMA_READ);
  EXPECT_EQ(WrOpcode(IBV_WR_ATOMIC_CMP_AND_SWP).send_wc, IBV_WC_COMP_SWAP);
  EXPECT_EQ(WrOpcode(IBV_WR_ATOMIC_FETCH_AND_ADD).send_wc, IBV_WC_FETCH_ADD);
  EXPECT_EQ(WrOpcode(IBV_WR_RDMA_READ).remote_access, unsigned(IBV_ACCESS_REMOTE_READ));
  EXPECT_EQ(WrOpcode(IBV_WR_ATOMIC_FETCH_AND_ADD).remote_access,
            unsigned(IBV_ACCESS_REMOTE_ATOMIC));
}

TEST(OpcodeTable, WireCounterparts) {
  // IBA table 38: RC SEND Only 0x04, RC RDMA WRITE Only with Immediate
  // 0x0B, UD SEND Only with Immediate 0x65, XRC Compare&Swap 0xB3.
  EXPECT_EQ(IbtaOpcode(TransportOf(IBV_QPT_RC), WrOpcode(IBV_WR_SEND).wire_only), 0x04);
  EXPECT_EQ(IbtaOpcode(TransportOf(IBV_QPT_RC), WrOpcode(IBV_WR_RDMA_WRITE_WITH_IMM).wire_only),
            0x0b);
  EXPECT_EQ(IbtaOpcode(TransportOf(IBV_QPT_UD), WrOpcode(IBV_WR_SEND_WITH_IMM).wire_only), 0x65);
  EXPECT_EQ(
      IbtaOpcode(TransportOf(IBV_QPT_XRC_SEND), WrOpcode(IBV_WR_ATOMIC_CMP_AND_SWP).wire_only),
      0xb3);
  EXPECT_EQ(IbtaOpcode(TransportOf(IBV_QPT_UC), WrOpcode(IBV_WR_RDMA_READ).wire_only), 0x2c);
  EXPECT_EQ(WrOpcode(IBV_WR_RDMA_READ).wire_first, IbtaOperation::kNone);
}

}  // namespace
}  // namespace softverbs::datapath
