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

#include <cstddef>
#include <cstdint>
#include <span>

namespace softverbs::roce {

// ip_udp: the IPv4 (20 bytes, no options) or IPv6 (40) header followed by
// the UDP header, as on the wire; roce: the BTH up to the end of the pad,
// without the ICRC. The caller checks the sizes (roce at least a BTH).
uint32_t ComputeIcrc(std::span<const uint8_t> ip_udp, std::span<const uint8_t> roce);

// The IPv4 identification. The ICRC covers it, but a UDP socket never shows
// the receiver the IP header it came with. Linux sends an unconnected DF
// socket's datagrams with ID 0 and the segments of one UDP GSO send with IDs
// 0, 1, 2, ... (inet_gso_segment): softverbs' own packets have an ID below
// kIcrcIpv4Ids, the most segments its carrier sends at once (Linux's
// UDP_MAX_SEGMENTS since 6.11 and the stable kernels of late 2024; 64 before,
// which the carrier finds out by the kernel's EINVAL). rxe (__ip_select_ident)
// and RoCE NICs take theirs from a per-destination counter: any 16-bit value
// (ipv4_id_history.h decides when to believe one). CRC-32 is linear: the ICRC
// with ID `id` is the ICRC with ID 0 xor Ipv4IdIcrcDelta(id, roce_bytes),
// which depends only on the ID and on the bytes after it (roce_bytes: the BTH
// up to the pad, as ComputeIcrc's roce).
inline constexpr int kIcrcIpv4IdBits = 7;
inline constexpr uint32_t kIcrcIpv4Ids = 1u << kIcrcIpv4IdBits;
static_assert(kIcrcIpv4Ids <= 255, "icrc.cc's index of small IDs holds an ID + 1 in a byte");
uint32_t Ipv4IdIcrcDelta(uint16_t id, size_t roce_bytes);
// Whether delta is Ipv4IdIcrcDelta(id, roce_bytes) for some 16-bit id (the
// sixteen deltas of the ID's bits are independent, so at most one); *id
// receives it. A corrupted packet's delta is such a one with probability
// 2^-16, and one with an id below kIcrcIpv4Ids with probability 2^-25.
bool Ipv4IdOfIcrcDelta(uint32_t delta, size_t roce_bytes, uint16_t* id);

// A run of IPv4 packets back to back (BTH up to and with the ICRC; each
// `segment` bytes but the last, which may be shorter), whose packet k has an
// ICRC made for ID from_id + k: each ICRC is made anew for ID k, as the
// first packet of a GSO send of its own (the carrier's part of a run that
// an older kernel refused whole).
void RenumberIpv4Run(uint8_t* run, size_t bytes, size_t segment, uint16_t from_id);

// The ICRC's four bytes on the wire.
void StoreIcrc(uint32_t icrc, uint8_t out[4]);
uint32_t LoadIcrc(const uint8_t in[4]);

}  // namespace softverbs::roce
