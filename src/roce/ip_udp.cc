#include "roce/ip_udp.h"

#include <cstring>

#include "roce/ip_headers.h"

namespace softverbs::roce {

uint32_t ChecksumAdd(uint32_t sum, const uint8_t* p, size_t n) {
  for (size_t i = 0; i + 1 < n; i += 2) sum += uint32_t{p[i]} << 8 | p[i + 1];
  if (n % 2) sum += uint32_t{p[n - 1]} << 8;
  return sum;
}
uint16_t ChecksumFold(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

size_t IpUdpBytes(bool ipv6) {
  return (ipv6 ? sizeof(Ipv6Header) : sizeof(Ipv4Header)) + sizeof(UdpHeader);
}

void WriteIpUdp(const Endpoints& ends, size_t roce_bytes, uint8_t* out) {
  const size_t udp_len = sizeof(UdpHeader) + roce_bytes;
  size_t ip_len;
  if (ends.ipv6) {
    auto* ip = reinterpret_cast<Ipv6Header*>(out);
    ip->version_class_flow.set(uint32_t{6} << 28 | uint32_t{ends.traffic_class} << 20 |
                               (ends.flow_label & 0xfffff));
    ip->payload_length.set(udp_len);
    ip->next_header = kIpProtoUdp;
    ip->hop_limit = ends.hop_limit;
    std::memcpy(ip->src, ends.src, 16);
    std::memcpy(ip->dst, ends.dst, 16);
    ip_len = sizeof(Ipv6Header);
  } else {
    auto* ip = reinterpret_cast<Ipv4Header*>(out);
    ip->version_ihl = 0x45;
    ip->tos = ends.traffic_class;
    ip->total_length.set(sizeof(Ipv4Header) + udp_len);
    ip->id.set(ends.ipv6 ? 0 : ends.ipv4_id);
    ip->flags_fragment.set(kIpv4DontFragment);
    ip->ttl = ends.hop_limit;
    ip->protocol = kIpProtoUdp;
    ip->checksum.set(0);
    std::memcpy(ip->src, ends.src, 4);
    std::memcpy(ip->dst, ends.dst, 4);
    ip_len = sizeof(Ipv4Header);
  }
  auto* udp = reinterpret_cast<UdpHeader*>(out + ip_len);
  udp->src_port.set(ends.src_port);
  udp->dst_port.set(ends.dst_port);
  udp->length.set(udp_len);
  udp->checksum.set(0);
}

void WriteGrh(const Endpoints& ends, size_t roce_bytes, uint8_t grh[40]) {
  uint8_t ip_udp[sizeof(Ipv6Header) + sizeof(UdpHeader)];
  WriteIpUdp(ends, roce_bytes, ip_udp);
  if (ends.ipv6) {
    std::memcpy(grh, ip_udp, sizeof(Ipv6Header));
    return;
  }
  auto* ip = reinterpret_cast<Ipv4Header*>(ip_udp);
  ip->checksum.set(ChecksumFold(ChecksumAdd(0, ip_udp, sizeof(Ipv4Header))));
  std::memset(grh, 0, 40 - sizeof(Ipv4Header));
  std::memcpy(grh + 40 - sizeof(Ipv4Header), ip_udp, sizeof(Ipv4Header));
}

}  // namespace softverbs::roce
