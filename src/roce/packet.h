// Whole RoCEv2 packets as they appear on the wire from the IP header on:
// IPv4 or IPv6, UDP to port 4791, the transport part (transport.h) and the
// ICRC (icrc.h). The builder fills every length and checksum; the parser
// checks them and names the first thing wrong (wire_error.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "roce/transport.h"
#include "roce/wire_error.h"

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

// Builds a whole packet into out. Returns its length, or 0 with *error.
size_t BuildPacket(const Endpoints& ends, const TransportFields& fields,
                   std::span<const uint8_t> payload, std::span<uint8_t> out, WireError* error);

struct ParsedPacket {
  Endpoints ends;
  TransportFields fields;
  std::span<const uint8_t> payload;  // inside the parsed buffer, without pad
};

// Parses and checks a whole packet (IP header first): IP version, IPv4
// options, protocol, port, lengths, BTH version, opcode, header sizes and
// the ICRC. The IP and UDP checksums are left to the kernel that received it;
// bytes past the IP header's length (link padding) are ignored.
WireError ParsePacket(std::span<const uint8_t> packet, ParsedPacket* out);

// The transport part of a packet received on a UDP socket (BTH up to the
// ICRC included), with the IP/UDP headers it came with (ip_udp, e.g. made
// again by WriteIpUdp from the socket's addresses) for the ICRC.
// IPv4: ip_udp's ID (0) may differ from the one the ICRC was made for (a
// socket does not show it): an ICRC made for an ID below kIcrcIpv4Ids is
// accepted, one made for another ID only when other_ids (the receiving
// carrier's history of its sources) accepts it (icrc.h). *ipv4_id, when
// given, receives the ID.
class Ipv4IdHistory;
WireError ParseRoce(std::span<const uint8_t> ip_udp, std::span<const uint8_t> roce,
                    TransportFields* fields, std::span<const uint8_t>* payload,
                    uint16_t* ipv4_id = nullptr, Ipv4IdHistory* other_ids = nullptr);

}  // namespace softverbs::roce
