// Writes a pcap of RoCE v2 packets built by src/roce - every opcode of the
// opcode table, over IPv4 and then IPv6 (test_frames.h) - and the table of
// what each frame holds, for independent tools to check (check_tshark.py,
// check_icrc_scapy.py).
//
//   roce_write_pcap FILE.pcap FILE.tsv
#include <cstdio>
#include <cstring>
#include <vector>

#include "roce/packet.h"
#include "roce/pcap.h"
#include "test_frames.h"

namespace {
using namespace softverbs::roce;

Endpoints EndpointsOf(const test::TestFrame& frame) {
  Endpoints e;
  e.ipv6 = frame.ipv6;
  if (frame.ipv6) {
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
  e.src_port = test::SourcePortOf(frame);
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
  const std::vector<test::TestFrame> frames = test::AllTestFrames();
  for (const test::TestFrame& frame : frames) {
    std::vector<uint8_t> buf(frame.payload.size() + 128);
    WireError error;
    const size_t len = BuildPacket(EndpointsOf(frame), frame.fields, frame.payload, buf, &error);
    if (len == 0) {
      std::fprintf(stderr, "opcode 0x%02x: %s\n", frame.fields.opcode, WireErrorName(error));
      return 1;
    }
    if (!pcap.Write(std::span(buf).first(len), 1700000000ull * 1000000 + frame.number)) {
      std::perror(argv[1]);
      return 1;
    }
  }
  if (!test::WriteTestFrames(tsv, frames) || !pcap.Close() || std::fclose(tsv) != 0) {
    std::perror("write");
    return 1;
  }
  std::printf("%zu frames\n", frames.size());
  return 0;
}
