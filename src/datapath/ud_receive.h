// What a UD receive shows of the packet its message came in. Every UD
// message of this device is a RoCE v2 packet, or is delivered on one host as
// if it had been one: the first 40 bytes of the receive buffer hold its IP
// header (the GRH), and the completion's sl says which kind of IP header that
// is, as mlx5 reports it. Both carriers (shm_responder.cc, wire_responder.cc)
// take it from here, so a program sees the same on one host and across hosts.
#pragma once

#include <cstdint>

#include "roce/ip_udp.h"

namespace softverbs::datapath {

// The completion's sl of a UD receive, as mlx5 reports a RoCE packet's type
// for a UD (or DC) responder: its CQE's flags_rqpn[27:24], which libmlx5
// hands to wc.sl. Bit 3: the packet had a UDP header (RoCE v2); bits 2:0:
// the L3 header, 1 IPv6, 2 IPv4 (0 would be a RoCE v1 GRH). UCX's UD
// transport reads it to find the destination address in the GRH
// (uct_ud_iface_check_grh), and drops every packet whose address it does not
// find there: with sl 0 it looked for an IPv6 address where an IPv4 packet's
// header is, and a two-host ud_verbs job timed out.
constexpr uint8_t UdReceiveSl(bool ipv6) {
  return 0x8 | (ipv6 ? 0x1 : 0x2);
}

// Whether a UD message from sgid to dgid goes as IPv6 (else IPv4: both are
// IPv4-mapped GIDs), as the network transport would send it.
bool UdMessageIsIpv6(const uint8_t sgid[16], const uint8_t dgid[16]);

// Writes the GRH of a UD message of payload_bytes (with an immediate or not)
// from sgid to dgid over the AH's path, delivered on one host, as the
// network transport writes it for the same packet (roce::WriteGrh; the
// path's traffic class and hop limit, flow label 0): between IPv4 addresses
// (IPv4-mapped GIDs) 20 zero bytes, then the IPv4 header; otherwise the IPv6
// header. Returns whether it is IPv6 (UdReceiveSl's argument).
bool WriteUdReceiveGrh(const uint8_t sgid[16], const uint8_t dgid[16],
                       const roce::PathIpFields& path, uint32_t payload_bytes, bool with_immediate,
                       uint8_t grh[40]);

}  // namespace softverbs::datapath
