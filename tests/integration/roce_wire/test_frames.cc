#include "test_frames.h"

#include <algorithm>
#include <cinttypes>

#include "datapath/ibta_opcode.h"
#include "roce/aeth.h"
#include "roce/flow.h"
#include "roce/segment.h"

namespace softverbs::roce::test {
namespace dp = softverbs::datapath;

std::vector<TestFrame> AllTestFrames() {
  std::vector<TestFrame> frames;
  uint32_t frame = 0;
  for (bool ipv6 : {false, true}) {
    for (int op = 0; op < 256; ++op) {
      const auto opcode = static_cast<uint8_t>(op);
      if (!dp::IbtaOpcodeValid(opcode)) continue;
      ++frame;
      const auto& row = dp::IbtaOperationRow(dp::OperationOfOpcode(opcode));
      TransportFields f;
      f.opcode = opcode;
      f.dest_qp = 0x100 + frame;
      f.psn = 0x1000 + frame;
      f.ack_req = frame % 2;
      f.xrc_srq = 0x200 + frame;
      f.qkey = 0x30000 + frame;
      f.src_qp = 0x400 + frame;
      f.va = 0x7f0000000000 + 0x1000 * frame;
      f.rkey = 0x5000 + frame;
      f.dma_len = 64 * frame;
      f.swap_add = 0x6000 + frame;
      f.compare =
          dp::OperationOfOpcode(opcode) == dp::IbtaOperation::kCompareSwap ? 0x7000 + frame : 0;
      f.syndrome = static_cast<uint8_t>(frame % 32);  // an ACK with a credit count
      f.msn = 0x800 + frame;
      f.atomic_orig = 0x9000 + frame;
      f.imm = 0xa0000 + frame;
      f.invalidate_rkey = 0xb000 + frame;
      // 1..9 bytes: every pad count occurs.
      std::vector<uint8_t> payload(row.payload ? 1 + frame % 9 : 0);
      for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(frame + i);
      frames.push_back({frame, ipv6, f, std::move(payload)});
    }
    // Then whole RC messages of 2.5 KiB at a 1024-byte MTU, as the
    // requester and responder segment them (segment.h): 1024 + 1024 + 512.
    constexpr uint32_t kMtu = 1024, kLength = 2560;
    const uint32_t n = PacketsOf(kLength, kMtu);
    for (uint32_t wr : {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_SEND_WITH_INV, IBV_WR_RDMA_WRITE,
                        IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ}) {
      for (uint32_t i = 0; i < n; ++i) {
        ++frame;
        // A READ's message is its response.
        const dp::IbtaOperation op = wr == IBV_WR_RDMA_READ
                                         ? ReadResponseOperation(i, n)
                                         : RequestOperation(dp::WrOpcode(wr), i, n);
        TransportFields f;
        f.opcode = dp::IbtaOpcode(dp::IbtaTransport::kRc, op);
        f.dest_qp = 0x100 + wr;
        f.psn = 0x1000 + frame;
        f.ack_req = i + 1 == n;
        f.src_qp = 0x400 + wr;
        f.va = 0x7f0000000000;
        f.rkey = 0x5000 + wr;
        f.dma_len = kLength;
        f.syndrome = kUnlimitedCredits;
        f.msn = wr;
        f.imm = 0xa0000 + frame;
        f.invalidate_rkey = 0xb000 + wr;
        std::vector<uint8_t> payload(std::min(kMtu, kLength - i * kMtu));
        for (size_t k = 0; k < payload.size(); ++k) payload[k] = static_cast<uint8_t>(frame ^ k);
        frames.push_back({frame, ipv6, f, std::move(payload)});
      }
    }
  }
  return frames;
}

uint16_t SourcePortOf(const TestFrame& frame) {
  return SourcePortOfQpn(frame.fields.src_qp);
}

bool WriteTestFrames(std::FILE* tsv, const std::vector<TestFrame>& frames) {
  bool ok = std::fprintf(tsv,
                         "frame\tipv6\topcode\tname\tdest_qp\tpsn\theaders\tva\trkey\tdma_len\t"
                         "swap_add\tcompare\tsyndrome\tmsn\tatomic_orig\timm\tinvalidate_rkey\t"
                         "qkey\tsrc_qp\txrc_srq\tpayload_len\tsrc_port\n") > 0;
  for (const TestFrame& t : frames) {
    const TransportFields& f = t.fields;
    const auto& row = dp::IbtaOperationRow(dp::OperationOfOpcode(f.opcode));
    // The header bits of ibta_opcode.h, plus DETH (0x40) and XRCETH (0x80).
    const unsigned headers =
        row.headers | (CarriesDeth(f.opcode) ? 0x40 : 0) | (CarriesXrcEth(f.opcode) ? 0x80 : 0);
    ok = ok && std::fprintf(tsv,
                            "%u\t%d\t%u\t%s\t%u\t%u\t%u\t%" PRIu64 "\t%u\t%u\t%" PRIu64 "\t%" PRIu64
                            "\t%u\t%u\t%" PRIu64 "\t%u\t%u\t%u\t%u\t%u\t%zu\t%u\n",
                            t.number, t.ipv6, f.opcode, row.name, f.dest_qp, f.psn, headers, f.va,
                            f.rkey, f.dma_len, f.swap_add, f.compare, f.syndrome, f.msn,
                            f.atomic_orig, f.imm, f.invalidate_rkey, f.qkey, f.src_qp, f.xrc_srq,
                            t.payload.size(), SourcePortOf(t)) > 0;
  }
  return ok;
}

}  // namespace softverbs::roce::test
