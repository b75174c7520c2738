// The transport part of a RoCEv2 packet - BTH, the extended headers its
// opcode carries, payload and pad - built from and parsed into host-order
// fields. Which headers a packet has comes from the opcode table
// (datapath/ibta_opcode.h) and the transport: XRCETH on XRC requests, DETH
// on UD packets. The ICRC after the pad needs the IP and UDP headers:
// packet.h adds and checks it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "roce/wire_error.h"

namespace softverbs::roce {

// Every field a packet's transport headers may carry, in host order. Only
// those of the headers its opcode carries are written or read.
struct TransportFields {
  // BTH
  uint8_t opcode = 0;  // transport | operation (datapath::IbtaOpcode)
  bool solicited = false;
  bool migreq = false;
  bool fecn = false;
  bool becn = false;
  bool ack_req = false;
  uint16_t pkey = 0xffff;
  uint32_t dest_qp = 0;  // 24 bits
  uint32_t psn = 0;      // 24 bits
  // XRCETH (XRC requests)
  uint32_t xrc_srq = 0;
  // DETH (UD)
  uint32_t qkey = 0;
  uint32_t src_qp = 0;
  // RETH or AtomicETH (they never come together)
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_len = 0;   // RETH
  uint64_t swap_add = 0;  // AtomicETH
  uint64_t compare = 0;   // AtomicETH
  // AETH
  uint8_t syndrome = 0;
  uint32_t msn = 0;  // 24 bits
  // AtomicAckETH
  uint64_t atomic_orig = 0;
  // ImmDt, as a number (wc.imm_data is its big-endian form)
  uint32_t imm = 0;
  // IETH
  uint32_t invalidate_rkey = 0;
};

// Bytes of BTH and extended headers of a packet with this opcode (0 when
// the opcode is not valid).
size_t TransportHeaderBytes(uint8_t opcode);

// Whether packets of this opcode carry XRCETH / DETH.
bool CarriesXrcEth(uint8_t opcode);
bool CarriesDeth(uint8_t opcode);

// Bytes of pad after a payload of this length (to a multiple of 4).
constexpr size_t PadBytes(size_t payload_len) {
  return (4 - payload_len % 4) % 4;
}

// Writes BTH, extended headers, payload and pad into out. Returns the bytes
// written, or 0 with *error (kBadOpcode, kUnexpectedPayload for a payload
// on an opcode without one, kBufferTooSmall).
size_t BuildTransport(const TransportFields& fields, std::span<const uint8_t> payload,
                      std::span<uint8_t> out, WireError* error);

// Reads the transport part (BTH up to the end of the pad, without ICRC):
// the fields of its headers and the payload without pad.
WireError ParseTransport(std::span<const uint8_t> in, TransportFields* fields,
                         std::span<const uint8_t>* payload);

}  // namespace softverbs::roce
