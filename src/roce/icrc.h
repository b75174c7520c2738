// The Invariant CRC of RoCEv2 packets (IBA A17.2.8 with 7.8.1): CRC-32
// (the Ethernet/zlib polynomial) over
//   8 bytes of 0xff (the masked LRH the RoCEv2 packet does not have),
//   the IP header with its variant fields set to all ones
//     (IPv4: TOS, TTL, header checksum; IPv6: traffic class, flow label,
//     hop limit),
//   the UDP header with its checksum set to all ones,
//   the BTH with its resv8a byte (FECN, BECN, reserved) set to all ones,
//   everything after the BTH up to the ICRC (headers, payload, pad),
// stored after the pad least-significant byte first. Computed with zlib's
// crc32, which gives the same value as rxe_icrc.c and scapy's RoCE layer
// (checked by tests/roce_wire).
#pragma once

#include <cstdint>
#include <span>

namespace softverbs::roce {

// ip_udp: the IPv4 (20 bytes, no options) or IPv6 (40) header followed by
// the UDP header, as on the wire; roce: the BTH up to the end of the pad,
// without the ICRC. The caller checks the sizes (roce at least a BTH).
uint32_t ComputeIcrc(std::span<const uint8_t> ip_udp, std::span<const uint8_t> roce);

// The ICRC's four bytes on the wire.
void StoreIcrc(uint32_t icrc, uint8_t out[4]);
uint32_t LoadIcrc(const uint8_t in[4]);

}  // namespace softverbs::roce
