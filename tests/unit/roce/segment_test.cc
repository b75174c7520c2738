// Messages as packets (src/roce/segment.h) and the AETH / PSN helpers
// (src/roce/aeth.h): every work request's packet sequence is made of
// operations that exist on its QP's transport, sit at the right place in
// the message (the table's FIRST/MIDDLE/LAST/ONLY), carry the headers the
// work request needs where they belong, and pass the responder's sequence
// check.
#include "roce/segment.h"

#include <gtest/gtest.h>

#include <vector>

#include "roce/aeth.h"

namespace softverbs::roce {
namespace {
namespace dp = softverbs::datapath;
using dp::IbtaOperation;
using dp::IbtaSegment;

std::vector<IbtaOperation> Sequence(uint32_t wr_opcode, uint32_t n) {
  std::vector<IbtaOperation> ops;
  for (uint32_t i = 0; i < n; ++i) ops.push_back(RequestOperation(dp::WrOpcode(wr_opcode), i, n));
  return ops;
}

TEST(RoceSegment, MtuAndPacketCount) {
  EXPECT_EQ(MtuBytes(IBV_MTU_256), 256u);
  EXPECT_EQ(MtuBytes(IBV_MTU_1024), 1024u);
  EXPECT_EQ(MtuBytes(IBV_MTU_4096), 4096u);
  EXPECT_EQ(MtuBytes(0), 0u);
  EXPECT_EQ(MtuBytes(6), 0u);
  EXPECT_EQ(PacketsOf(0, 1024), 1u);
  EXPECT_EQ(PacketsOf(1, 1024), 1u);
  EXPECT_EQ(PacketsOf(1024, 1024), 1u);
  EXPECT_EQ(PacketsOf(1025, 1024), 2u);
  EXPECT_EQ(PacketsOf(1u << 31, 256), 1u << 23);
}

TEST(RoceSegment, NamedSequences) {
  using O = IbtaOperation;
  EXPECT_EQ(Sequence(IBV_WR_SEND, 1), std::vector<O>{O::kSendOnly});
  EXPECT_EQ(Sequence(IBV_WR_SEND_WITH_IMM, 3),
            (std::vector<O>{O::kSendFirst, O::kSendMiddle, O::kSendLastWithImm}));
  EXPECT_EQ(Sequence(IBV_WR_SEND_WITH_INV, 2),
            (std::vector<O>{O::kSendFirst, O::kSendLastWithInvalidate}));
  EXPECT_EQ(Sequence(IBV_WR_RDMA_WRITE, 3),
            (std::vector<O>{O::kWriteFirst, O::kWriteMiddle, O::kWriteLast}));
  EXPECT_EQ(Sequence(IBV_WR_RDMA_WRITE_WITH_IMM, 1), std::vector<O>{O::kWriteOnlyWithImm});
  EXPECT_EQ(Sequence(IBV_WR_RDMA_WRITE_WITH_IMM, 2),
            (std::vector<O>{O::kWriteFirst, O::kWriteLastWithImm}));
  EXPECT_EQ(Sequence(IBV_WR_RDMA_READ, 1), std::vector<O>{O::kReadRequest});
  EXPECT_EQ(Sequence(IBV_WR_LOCAL_INV, 1), std::vector<O>{O::kNone});
  EXPECT_EQ(ReadResponseOperation(0, 1), O::kReadResponseOnly);
  EXPECT_EQ(ReadResponseOperation(0, 3), O::kReadResponseFirst);
  EXPECT_EQ(ReadResponseOperation(1, 3), O::kReadResponseMiddle);
  EXPECT_EQ(ReadResponseOperation(2, 3), O::kReadResponseLast);
}

TEST(RoceSegment, EverySequenceIsValidOnItsTransport) {
  for (uint32_t wr = IBV_WR_RDMA_WRITE; wr <= IBV_WR_TSO; ++wr) {
    const dp::WrOpcodeInfo& info = dp::WrOpcode(wr);
    if (info.wire_only == IbtaOperation::kNone) continue;
    // Multi-packet only for opcodes with a FIRST (SEND, WRITE).
    const uint32_t max_n = info.wire_first == IbtaOperation::kNone ? 1 : 5;
    for (uint32_t qpt : {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_XRC_SEND}) {
      if (info.qp_types != 0 && !dp::WrOpcodeAllowed(info, qpt)) continue;
      // UD messages are one packet.
      const uint32_t n_limit = qpt == IBV_QPT_UD ? 1 : max_n;
      for (uint32_t n = 1; n <= n_limit; ++n) {
        const std::vector<IbtaOperation> ops = Sequence(wr, n);
        uint8_t headers = 0;
        for (uint32_t i = 0; i < n; ++i) {
          const auto& row = dp::IbtaOperationRow(ops[i]);
          const uint8_t opcode = dp::IbtaOpcode(dp::TransportOf(qpt), ops[i]);
          // SEND_WITH_INV and TSO are named but no QP type posts them: RC/XRC only.
          if (info.qp_types == 0 && qpt != IBV_QPT_RC && qpt != IBV_QPT_XRC_SEND) continue;
          EXPECT_TRUE(dp::IbtaOpcodeValid(opcode)) << info.name << " qpt " << qpt << " n " << n;
          const IbtaSegment want = n == 1      ? IbtaSegment::kOnly
                                   : i == 0    ? IbtaSegment::kFirst
                                   : i + 1 < n ? IbtaSegment::kMiddle
                                               : IbtaSegment::kLast;
          EXPECT_EQ(row.segment, want) << info.name << " packet " << i << " of " << n;
          if (i > 0) {
            EXPECT_TRUE(MayFollow(ops[i - 1], ops[i])) << info.name;
          }
          headers |= row.headers;
        }
        // The message as a whole carries the work request's headers:
        // RETH/AtomicETH on the first packet, ImmDt/IETH on the last.
        if (info.qp_types != 0 || qpt == IBV_QPT_RC) {
          EXPECT_EQ(headers, info.headers) << info.name << " n " << n;
          EXPECT_EQ(
              dp::IbtaOperationRow(ops.front()).headers & (dp::kHeaderReth | dp::kHeaderAtomicEth),
              info.headers & (dp::kHeaderReth | dp::kHeaderAtomicEth));
          EXPECT_EQ(dp::IbtaOperationRow(ops.back()).headers & (dp::kHeaderImmDt | dp::kHeaderIeth),
                    info.headers & (dp::kHeaderImmDt | dp::kHeaderIeth));
        }
        // A new message may follow the end of this one.
        EXPECT_TRUE(MayFollow(ops.back(), IbtaOperation::kSendOnly));
        EXPECT_TRUE(MayFollow(ops.back(), IbtaOperation::kWriteFirst));
      }
    }
  }
}

TEST(RoceSegment, SequenceCheck) {
  using O = IbtaOperation;
  EXPECT_TRUE(MayFollow(O::kSendFirst, O::kSendMiddle));
  EXPECT_TRUE(MayFollow(O::kSendMiddle, O::kSendLastWithInvalidate));
  EXPECT_TRUE(MayFollow(O::kWriteFirst, O::kWriteLastWithImm));
  EXPECT_TRUE(MayFollow(O::kReadResponseFirst, O::kReadResponseLast));
  EXPECT_TRUE(MayFollow(O::kWriteLast, O::kReadRequest));
  EXPECT_TRUE(MayFollow(O::kCompareSwap, O::kSendOnly));
  EXPECT_FALSE(MayFollow(O::kSendFirst, O::kWriteMiddle));  // another message's MIDDLE
  EXPECT_FALSE(MayFollow(O::kSendFirst, O::kSendOnly));     // the message did not end
  EXPECT_FALSE(MayFollow(O::kWriteMiddle, O::kReadRequest));
  EXPECT_FALSE(MayFollow(O::kSendOnly, O::kSendMiddle));  // MIDDLE without FIRST
  EXPECT_FALSE(MayFollow(O::kSendLast, O::kWriteLast));
  EXPECT_FALSE(MayFollow(O::kReadResponseFirst, O::kAcknowledge));
  EXPECT_FALSE(MayFollow(O::kResync, O::kSendOnly));
  EXPECT_FALSE(MayFollow(O::kNone, O::kSendOnly));
}

TEST(RoceAeth, Syndromes) {
  EXPECT_EQ(AckSyndrome(), 0x1f);  // unlimited credits, as rxe
  EXPECT_EQ(AckTypeOf(AckSyndrome(4)), AckType::kAck);
  EXPECT_EQ(SyndromeValue(AckSyndrome(4)), 4);
  EXPECT_EQ(RnrNakSyndrome(12), 0x2c);
  EXPECT_EQ(AckTypeOf(0x2c), AckType::kRnrNak);
  EXPECT_EQ(SyndromeValue(0x2c), 12);
  EXPECT_EQ(NakSyndrome(NakCode::kPsnSequenceError), 0x60);
  EXPECT_EQ(NakSyndrome(NakCode::kRemoteAccessError), 0x62);
  EXPECT_EQ(AckTypeOf(0x62), AckType::kNak);
  EXPECT_EQ(static_cast<NakCode>(SyndromeValue(0x63)), NakCode::kRemoteOperationalError);
}

TEST(RoceAeth, PsnArithmeticWraps) {
  EXPECT_EQ(PsnAdd(0xffffff, 1), 0u);
  EXPECT_EQ(PsnAdd(0xfffffe, 5), 3u);
  EXPECT_EQ(PsnDiff(0, 0xffffff), 1);
  EXPECT_EQ(PsnDiff(0xffffff, 0), -1);
  EXPECT_EQ(PsnDiff(10, 10), 0);
  EXPECT_EQ(PsnDiff(5, 0xfffffa), 11);
  EXPECT_EQ(PsnDiff(0x7fffff, 0), 0x7fffff);
  EXPECT_EQ(PsnDiff(0x800000, 0), -0x800000);
}

}  // namespace
}  // namespace softverbs::roce
