// Writes a pcap of RoCE v2 packets built by src/roce - every opcode of the
// opcode table, over IPv4 and then IPv6 - and a table of what each frame
// holds, for independent tools to check (check_tshark.py, check_icrc_scapy.py).
//
//   roce_write_pcap FILE.pcap FILE.tsv
//
// Each frame's fields get distinct values derived from its number, so a
// dissector reading a header at the wrong offset shows.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

#include "datapath/ibta_opcode.h"
#include "roce/flow.h"
#include "roce/packet.h"
#include "roce/pcap.h"

namespace {
namespace dp = softverbs::datapath;
using namespace softverbs::roce;

Endpoints EndpointsOf(bool ipv6, uint32_t qpn) {
  Endpoints e;
  e.ipv6 = ipv6;
  if (ipv6) {
    e.src[0] = e.dst[0] = 0xfe;
    e.src[1] = e.dst[1] = 0x80;
    e.src[15] = 1;
    e.dst[15] = 2;
    e.flow_label = 0x1234;
  } else {
    const uint8_t a[4] = {198, 51, 100, 1}, b[4] = {198, 51, 100, 2};
    std::memcpy(e.src, a, 4);
    std::memcpy(e.dst, b, 4);
  }
  e.src_port = SourcePortOfQpn(qpn);
  return e;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s FILE.pcap FILE.tsv\n", argv[0]);
    return 2;
  }
  PcapWriter pcap;
  if (!pcap.Open(argv[1])) {
    std::perror(argv[1]);
    return 1;
  }
  std::FILE* tsv = std::fopen(argv[2], "w");
  if (!tsv) {
    std::perror(argv[2]);
    return 1;
  }
  std::fprintf(tsv,
               "frame\tipv6\topcode\tname\tdest_qp\tpsn\theaders\tva\trkey\tdma_len\tswap_add\t"
               "compare\tsyndrome\tmsn\tatomic_orig\timm\tinvalidate_rkey\tqkey\tsrc_qp\txrc_srq\t"
               "payload_len\n");
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
      f.compare = (row.headers & dp::kHeaderAtomicEth) &&
                          dp::OperationOfOpcode(opcode) == dp::IbtaOperation::kCompareSwap
                      ? 0x7000 + frame
                      : 0;
      f.syndrome = static_cast<uint8_t>(frame % 32);  // an ACK with a credit count
      f.msn = 0x800 + frame;
      f.atomic_orig = 0x9000 + frame;
      f.imm = 0xa0000 + frame;
      f.invalidate_rkey = 0xb000 + frame;
      std::vector<uint8_t> payload(row.payload ? 1 + frame % 9 : 0);
      for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(frame + i);
      std::vector<uint8_t> buf(512);
      WireError error;
      const size_t len = BuildPacket(EndpointsOf(ipv6, f.src_qp), f, payload, buf, &error);
      if (len == 0) {
        std::fprintf(stderr, "opcode 0x%02x: %s\n", opcode, WireErrorName(error));
        return 1;
      }
      if (!pcap.Write(std::span(buf).first(len), 1700000000ull * 1000000 + frame)) {
        std::perror(argv[1]);
        return 1;
      }
      std::fprintf(
          tsv,
          "%u\t%d\t%u\t%s\t%u\t%u\t%u\t%" PRIu64 "\t%u\t%u\t%" PRIu64 "\t%" PRIu64
          "\t%u\t%u\t%" PRIu64 "\t%u\t%u\t%u\t%u\t%u\t%zu\n",
          frame, ipv6, opcode, row.name, f.dest_qp, f.psn,
          row.headers | (CarriesDeth(opcode) ? 0x40 : 0) | (CarriesXrcEth(opcode) ? 0x80 : 0), f.va,
          f.rkey, f.dma_len, f.swap_add, f.compare, f.syndrome, f.msn, f.atomic_orig, f.imm,
          f.invalidate_rkey, f.qkey, f.src_qp, f.xrc_srq, payload.size());
    }
  }
  if (!pcap.Close() || std::fclose(tsv) != 0) {
    std::perror("close");
    return 1;
  }
  std::printf("%u frames\n", frame);
  return 0;
}
