// Whole RoCEv2 packets as they appear on the wire from the IP header on:
// IPv4 or IPv6, UDP to port 4791, the transport part (transport.h) and the
// ICRC (icrc.h). The builder fills every length and checksum; the parser
// checks them and names the first thing wrong (wire_error.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "roce/ip_udp.h"
#include "roce/transport.h"
#include "roce/wire_error.h"

namespace softverbs::roce {

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
