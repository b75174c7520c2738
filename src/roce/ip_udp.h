// The IP and UDP headers of a RoCEv2 packet (IPv4 or IPv6, UDP to port
// 4791), and the GRH a UD receive buffer gets for them. Header-only structs
// and these few functions: the drop-in library links this part (the GRH of
// a UD message on one host is written as the network's would be), never the
// rest of src/roce.
#pragma once

#include <cstddef>
#include <cstdint>

namespace softverbs::roce {

// The IP and UDP side of a packet.
struct Endpoints {
  bool ipv6 = false;
  uint8_t src[16] = {};  // IPv4: the first 4 bytes
  uint8_t dst[16] = {};
  uint16_t src_port = 0;  // flow.h: SourcePortOfQpn
  uint16_t dst_port = 4791;
  uint8_t traffic_class = 0;  // IPv4 TOS / IPv6 traffic class
  uint8_t hop_limit = 64;     // IPv4 TTL / IPv6 hop limit
  uint32_t flow_label = 0;    // IPv6 only, 20 bits
  // IPv4 identification: 0 as sent (a GSO run's segments get 1, 2, ...);
  // as received, the one the ICRC was made for (icrc.h).
  uint16_t ipv4_id = 0;
};

// The IP header fields a packet's path sets: the address vector's GRH
// traffic class and hop limit (IPv4: TOS and TTL), as a NIC puts them in
// the packets of a QP's path or of a UD AH.
struct PathIpFields {
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 64;
};

// The hop limit (TTL) a packet goes with for an address vector's hop limit:
// its own, except 0, which a UDP socket cannot send over IPv4 (IP_TTL takes
// 1-255) and which would not cross a router: the default of 64 then (the
// hop limit rdma_cm puts in the paths it resolves).
constexpr uint8_t HopLimitOnTheWire(uint8_t av_hop_limit) {
  return av_hop_limit ? av_hop_limit : 64;
}

// Bytes of the IP and UDP headers (28 for IPv4, 48 for IPv6).
size_t IpUdpBytes(bool ipv6);

// Writes the IP and UDP headers of a packet whose transport part plus ICRC
// is roce_bytes long, checksums zero (as the ICRC sees them after masking
// and as a socket's kernel would fill them). out holds IpUdpBytes.
void WriteIpUdp(const Endpoints& ends, size_t roce_bytes, uint8_t* out);

// The 40-byte GRH a UD receive buffer starts with for a packet that came
// with these IP headers (roce_bytes after its UDP header), as rxe writes it
// (union rdma_network_hdr): IPv6: the IPv6 header; IPv4: 20 zero bytes,
// then the IPv4 header (ID 0, DF, checksum filled).
void WriteGrh(const Endpoints& ends, size_t roce_bytes, uint8_t grh[40]);

// The Internet checksum (RFC 1071): the one's complement sum of n bytes as
// big-endian 16-bit words, added to sum; and the final fold and complement.
uint32_t ChecksumAdd(uint32_t sum, const uint8_t* p, size_t n);
uint16_t ChecksumFold(uint32_t sum);

}  // namespace softverbs::roce
