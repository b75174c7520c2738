// The IP and UDP headers under a RoCEv2 packet (IBA Annex A17.4: UDP
// destination port 4791), laid out byte for byte with big-endian fields
// (byte_order.h). softverbs builds IPv4 headers without options.
#pragma once

#include <cstdint>

#include "roce/byte_order.h"

namespace softverbs::roce {

inline constexpr uint16_t kRoceV2Port = 4791;  // IANA's UDP port of RoCEv2
inline constexpr uint8_t kIpProtoUdp = 17;

// IPv4 header without options (RFC 791, 20 bytes).
struct Ipv4Header {
  uint8_t version_ihl;  // version 4 (bits 7..4), header length in words, 5 (bits 3..0)
  uint8_t tos;          // DSCP and ECN; variant for the ICRC
  Be16 total_length;    // header + UDP + RoCE bytes
  Be16 id;              // identification (icrc.h): 0 from a DF socket, k in a GSO run
  Be16 flags_fragment;  // DF (0x4000) set; no fragments
  uint8_t ttl;          // time to live; variant for the ICRC
  uint8_t protocol;     // 17, UDP
  Be16 checksum;        // header checksum; variant for the ICRC
  uint8_t src[4];       // source address
  uint8_t dst[4];       // destination address
};
static_assert(sizeof(Ipv4Header) == 20);
inline constexpr uint16_t kIpv4DontFragment = 0x4000;

// IPv6 fixed header (RFC 8200, 40 bytes).
struct Ipv6Header {
  // Version 6 (bits 31..28), traffic class (27..20), flow label (19..0);
  // class and label are variant for the ICRC.
  Be32 version_class_flow;
  Be16 payload_length;  // UDP + RoCE bytes
  uint8_t next_header;  // 17, UDP
  uint8_t hop_limit;    // variant for the ICRC
  uint8_t src[16];
  uint8_t dst[16];
};
static_assert(sizeof(Ipv6Header) == 40);

// UDP header (RFC 768, 8 bytes).
struct UdpHeader {
  Be16 src_port;  // flow entropy: from the QP (flow.h)
  Be16 dst_port;  // 4791
  Be16 length;    // UDP header + RoCE bytes
  Be16 checksum;  // filled by BuildPacket (by the kernel for the carrier); variant for the ICRC
};
static_assert(sizeof(UdpHeader) == 8);

}  // namespace softverbs::roce
