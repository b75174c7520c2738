// libFuzzer target: the RoCE v2 parser (src/roce) on arbitrary bytes, which
// is what a UDP socket on port 4791 may receive from anyone. The input is
// parsed as a whole IP packet, as a transport part without ICRC (so the
// fuzzer reaches the header checks behind the ICRC), as the UDP payload a
// carrier's socket receives over IPv4 (the ICRC's IPv4 ID solved, and
// believed or not by a history kept across inputs), and as the text of
// SOFTVERBS_ROCE_FAULTS. A packet the parser accepts is built again from
// its fields and must parse to the same fields. Any out-of-bounds access,
// undefined behaviour or crash is a finding (ASan/UBSan abort).
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "roce/fault_config.h"
#include "roce/ipv4_id_history.h"
#include "roce/packet.h"

using namespace softverbs::roce;

namespace {

bool SameFields(const TransportFields& a, const TransportFields& b) {
  return a.opcode == b.opcode && a.solicited == b.solicited && a.migreq == b.migreq &&
         a.fecn == b.fecn && a.becn == b.becn && a.ack_req == b.ack_req && a.pkey == b.pkey &&
         a.dest_qp == b.dest_qp && a.psn == b.psn && a.xrc_srq == b.xrc_srq && a.qkey == b.qkey &&
         a.src_qp == b.src_qp && a.va == b.va && a.rkey == b.rkey && a.dma_len == b.dma_len &&
         a.swap_add == b.swap_add && a.compare == b.compare && a.syndrome == b.syndrome &&
         a.msn == b.msn && a.atomic_orig == b.atomic_orig && a.imm == b.imm &&
         a.invalidate_rkey == b.invalidate_rkey;
}

void RoundTrip(const Endpoints& ends, const TransportFields& fields,
               std::span<const uint8_t> payload) {
  std::vector<uint8_t> buf(payload.size() + 256);
  WireError error;
  const size_t len = BuildPacket(ends, fields, payload, buf, &error);
  if (len == 0) __builtin_trap();  // what parsed must build
  ParsedPacket again;
  if (ParsePacket(std::span(buf).first(len), &again) != WireError::kOk) __builtin_trap();
  if (!SameFields(again.fields, fields) || again.payload.size() != payload.size() ||
      (!payload.empty() && std::memcmp(again.payload.data(), payload.data(), payload.size()) != 0))
    __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> input(data, size);
  ParsedPacket packet;
  if (ParsePacket(input, &packet) == WireError::kOk) {
    RoundTrip(packet.ends, packet.fields, packet.payload);
  }
  TransportFields fields;
  std::span<const uint8_t> payload;
  if (ParseTransport(input, &fields, &payload) == WireError::kOk) {
    Endpoints ends;
    ends.ipv6 = size % 2;
    RoundTrip(ends, fields, payload);
  }
  if (size <= 65535 - 28) {
    static Ipv4IdHistory history;
    Endpoints v4;
    const uint8_t a[4] = {198, 51, 100, 1}, b[4] = {198, 51, 100, 2};
    std::memcpy(v4.src, a, 4);
    std::memcpy(v4.dst, b, 4);
    v4.src_port = static_cast<uint16_t>(0xc000 | (size & 0xff));
    uint8_t ip_udp[48];
    WriteIpUdp(v4, size, ip_udp);
    uint16_t id = 0;
    (void)ParseRoce(std::span(ip_udp, IpUdpBytes(false)), input, &fields, &payload, &id, &history);
  }
  (void)WireErrorName(static_cast<WireError>(size % 16));
  FaultConfig config;
  std::string error;
  (void)ParseFaultConfig(std::string_view(reinterpret_cast<const char*>(data), size), &config,
                         &error);
  return 0;
}
