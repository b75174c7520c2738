#include "roce/packet.h"

#include <cstring>

#include "roce/cm_mad.h"
#include "roce/headers.h"
#include "roce/icrc.h"
#include "roce/ip_headers.h"
#include "roce/ipv4_id_history.h"

namespace softverbs::roce {
namespace {

// The UDP checksum with its pseudo-header (RFC 768 / RFC 8200 8.1).
uint16_t UdpChecksum(const Endpoints& ends, const uint8_t* udp, size_t udp_len) {
  const size_t addr_len = ends.ipv6 ? 16 : 4;
  uint32_t sum = ChecksumAdd(0, ends.src, addr_len);
  sum = ChecksumAdd(sum, ends.dst, addr_len);
  sum += kIpProtoUdp + static_cast<uint32_t>(udp_len);
  sum = ChecksumAdd(sum, udp, udp_len);
  const uint16_t c = ChecksumFold(sum);
  return c == 0 ? 0xffff : c;  // 0 means "no checksum"
}

}  // namespace

size_t BuildPacket(const Endpoints& ends, const TransportFields& fields,
                   std::span<const uint8_t> payload, std::span<uint8_t> out, WireError* error) {
  const size_t head = IpUdpBytes(ends.ipv6);
  if (out.size() < head + kIcrcBytes) {
    *error = WireError::kBufferTooSmall;
    return 0;
  }
  const size_t transport =
      BuildTransport(fields, payload, out.subspan(head, out.size() - head - kIcrcBytes), error);
  if (transport == 0) return 0;
  WriteIpUdp(ends, transport + kIcrcBytes, out.data());
  StoreIcrc(ComputeIcrc(out.first(head), out.subspan(head, transport)),
            out.data() + head + transport);
  // Checksums last: the ICRC sees them masked, the UDP checksum covers the ICRC.
  const size_t ip_len = head - sizeof(UdpHeader);
  auto* udp = reinterpret_cast<UdpHeader*>(out.data() + ip_len);
  udp->checksum.set(
      UdpChecksum(ends, out.data() + ip_len, sizeof(UdpHeader) + transport + kIcrcBytes));
  if (!ends.ipv6) {
    reinterpret_cast<Ipv4Header*>(out.data())
        ->checksum.set(ChecksumFold(ChecksumAdd(0, out.data(), sizeof(Ipv4Header))));
  }
  *error = WireError::kOk;
  return head + transport + kIcrcBytes;
}

WireError ParseRoce(std::span<const uint8_t> ip_udp, std::span<const uint8_t> roce,
                    TransportFields* fields, std::span<const uint8_t>* payload, uint16_t* ipv4_id,
                    Ipv4IdHistory* other_ids) {
  if (roce.size() < sizeof(Bth) + kIcrcBytes) return WireError::kTooShort;
  const auto body = roce.first(roce.size() - kIcrcBytes);
  const WireError e = ParseTransport(body, fields, payload);
  if (e != WireError::kOk) return e;
  const uint32_t computed = ComputeIcrc(ip_udp, body);
  const uint32_t received = LoadIcrc(roce.data() + body.size());
  // IPv4: the ICRC may have been made with an ID other than the 0 of ip_udp
  // (icrc.h: a receiving socket does not see it).
  const bool ipv4 = ip_udp.size() == sizeof(Ipv4Header) + sizeof(UdpHeader);
  const auto* ip = reinterpret_cast<const Ipv4Header*>(ip_udp.data());
  uint16_t id = ipv4 ? ip->id.get() : 0;
  if (computed != received) {
    if (!ipv4 || id != 0 || !Ipv4IdOfIcrcDelta(computed ^ received, body.size(), &id)) {
      return WireError::kBadIcrc;
    }
    if (id >= kIcrcIpv4Ids) {
      uint32_t src;
      std::memcpy(&src, ip->src, sizeof(src));
      const auto* udp = reinterpret_cast<const UdpHeader*>(ip_udp.data() + sizeof(Ipv4Header));
      if (!other_ids ||
          !other_ids->Accept(src, udp->src_port.get(), id, fields->dest_qp == kGsiQpn)) {
        return WireError::kBadIcrc;
      }
    }
  }
  if (ipv4_id) *ipv4_id = id;
  return WireError::kOk;
}

WireError ParsePacket(std::span<const uint8_t> packet, ParsedPacket* out) {
  if (packet.empty()) return WireError::kTooShort;
  Endpoints& ends = out->ends;
  ends = Endpoints{};
  const uint8_t version = packet[0] >> 4;
  size_t ip_len;
  size_t ip_total;  // the packet's length according to its IP header
  if (version == 4) {
    if (packet.size() < sizeof(Ipv4Header)) return WireError::kTooShort;
    const auto* ip = reinterpret_cast<const Ipv4Header*>(packet.data());
    if ((ip->version_ihl & 0x0f) != 5) return WireError::kIpOptions;
    if (ip->protocol != kIpProtoUdp) return WireError::kNotUdp;
    ends.traffic_class = ip->tos;
    ends.hop_limit = ip->ttl;
    std::memcpy(ends.src, ip->src, 4);
    std::memcpy(ends.dst, ip->dst, 4);
    ip_len = sizeof(Ipv4Header);
    ip_total = ip->total_length.get();
  } else if (version == 6) {
    if (packet.size() < sizeof(Ipv6Header)) return WireError::kTooShort;
    const auto* ip = reinterpret_cast<const Ipv6Header*>(packet.data());
    if (ip->next_header != kIpProtoUdp) return WireError::kNotUdp;
    ends.ipv6 = true;
    const uint32_t vcf = static_cast<uint32_t>(ip->version_class_flow.get());
    ends.traffic_class = static_cast<uint8_t>(vcf >> 20);
    ends.flow_label = vcf & 0xfffff;
    ends.hop_limit = ip->hop_limit;
    std::memcpy(ends.src, ip->src, 16);
    std::memcpy(ends.dst, ip->dst, 16);
    ip_len = sizeof(Ipv6Header);
    ip_total = sizeof(Ipv6Header) + ip->payload_length.get();
  } else {
    return WireError::kNotIp;
  }
  if (packet.size() < ip_len + sizeof(UdpHeader)) return WireError::kTooShort;
  const auto* udp = reinterpret_cast<const UdpHeader*>(packet.data() + ip_len);
  ends.src_port = static_cast<uint16_t>(udp->src_port.get());
  ends.dst_port = static_cast<uint16_t>(udp->dst_port.get());
  if (ends.dst_port != kRoceV2Port) return WireError::kNotRoce;
  if (ip_total > packet.size()) return WireError::kTooShort;
  // Bytes past the IP length are the link's padding (short Ethernet frames).
  packet = packet.first(ip_total);
  if (ip_total < ip_len + sizeof(UdpHeader) || udp->length.get() != ip_total - ip_len)
    return WireError::kBadLength;
  const size_t head = ip_len + sizeof(UdpHeader);
  return ParseRoce(packet.first(head), packet.subspan(head), &out->fields, &out->payload);
}

}  // namespace softverbs::roce
