// The InfiniBand transport headers a RoCEv2 packet carries after its UDP
// header (IBA 9.2-9.3; RoCEv2 is IBA Annex A17). Every multi-byte field is
// big-endian on the wire and held as such (byte_order.h). Which of them a
// packet carries is decided by its BTH opcode (datapath/ibta_opcode.h).
#pragma once

#include <cstdint>

#include "roce/byte_order.h"

namespace softverbs::roce {

// Base Transport Header, on every packet (IBA 9.2, 12 bytes).
struct Bth {
  uint8_t opcode;  // transport (bits 7..5) | operation (bits 4..0)
  // SE (bit 7): solicited event; M (bit 6): migration state; PadCnt
  // (bits 5..4): bytes of pad after the payload (to a 4-byte multiple);
  // TVer (bits 3..0): transport header version, 0.
  uint8_t se_m_pad_tver;
  Be16 pkey;  // partition key; 0xffff the default partition
  // FECN (bit 7), BECN (bit 6): congestion notification (RoCEv2 A17.9);
  // bits 5..0 reserved. IBA 1.2 calls the whole byte resv8a; the ICRC
  // treats it as variant (all ones).
  uint8_t fecn_becn_resv6;
  Be24 dest_qp;          // destination QP number
  uint8_t ackreq_resv7;  // A (bit 7): acknowledge request; bits 6..0 reserved
  Be24 psn;              // packet sequence number
};
static_assert(sizeof(Bth) == 12);

inline constexpr uint8_t kBthSolicited = 0x80;
inline constexpr uint8_t kBthMigReq = 0x40;
inline constexpr uint8_t kBthPadShift = 4;
inline constexpr uint8_t kBthPadMask = 0x30;
inline constexpr uint8_t kBthTverMask = 0x0f;
inline constexpr uint8_t kBthFecn = 0x80;
inline constexpr uint8_t kBthBecn = 0x40;
inline constexpr uint8_t kBthAckReq = 0x80;
inline constexpr uint8_t kBthTver = 0;  // the only transport version

// XRC Extended Transport Header: first after the BTH on XRC requests
// (IBA 9.3.8, 4 bytes).
struct XrcEth {
  uint8_t resv8;
  Be24 xrc_srq;  // the XRC SRQ at the responder that receives the message
};
static_assert(sizeof(XrcEth) == 4);

// Datagram Extended Transport Header, on every UD packet (IBA 9.3.3, 8 bytes).
struct Deth {
  Be32 qkey;  // must match the receiving QP's Q_Key
  uint8_t resv8;
  Be24 src_qp;  // the sending QP (the receiver's wc.src_qp)
};
static_assert(sizeof(Deth) == 8);

// RDMA Extended Transport Header: first packet of an RDMA WRITE and the
// READ request (IBA 9.3.4, 16 bytes).
struct Reth {
  Be64 va;       // remote virtual address
  Be32 rkey;     // remote key
  Be32 dma_len;  // length of the whole RDMA operation in bytes
};
static_assert(sizeof(Reth) == 16);

// Atomic Extended Transport Header: COMPARE_SWAP and FETCH_ADD requests
// (IBA 9.3.5, 28 bytes).
struct AtomicEth {
  Be64 va;        // remote virtual address (8-byte aligned)
  Be32 rkey;      // remote key
  Be64 swap_add;  // value to swap in (COMPARE_SWAP) or add (FETCH_ADD)
  Be64 compare;   // value to compare with (COMPARE_SWAP; 0 for FETCH_ADD)
};
static_assert(sizeof(AtomicEth) == 28);

// ACK Extended Transport Header: ACKs and READ responses (IBA 9.3.6, 4 bytes).
struct Aeth {
  // Bits 6..5: 0 ACK, 1 RNR NAK, 3 NAK; bits 4..0: credit count (ACK),
  // RNR timer (RNR NAK) or NAK code (0 PSN sequence error, 1 invalid
  // request, 2 remote access error, 3 remote operational error, 4 invalid
  // RD request).
  uint8_t syndrome;
  Be24 msn;  // message sequence number of the last completed message
};
static_assert(sizeof(Aeth) == 4);

inline constexpr uint8_t kAethAck = 0x00;
inline constexpr uint8_t kAethRnrNak = 0x20;
inline constexpr uint8_t kAethNak = 0x60;
inline constexpr uint8_t kAethTypeMask = 0x60;

// Atomic ACK Extended Transport Header: the ATOMIC_ACKNOWLEDGE's original
// remote value (IBA 9.3.7, 8 bytes).
struct AtomicAckEth {
  Be64 orig;
};
static_assert(sizeof(AtomicAckEth) == 8);

// Immediate Data Extended Transport Header (IBA 9.3.2, 4 bytes): the
// immediate of *_WITH_IMMEDIATE, delivered as is in the receiver's
// wc.imm_data (which is network order too).
struct ImmDt {
  Be32 imm;
};
static_assert(sizeof(ImmDt) == 4);

// Invalidate Extended Transport Header: SEND with invalidate (IBA 9.3.9,
// 4 bytes).
struct Ieth {
  Be32 rkey;  // the responder's rkey to invalidate (wc.invalidated_rkey)
};
static_assert(sizeof(Ieth) == 4);

// Invariant CRC after the payload and pad of every packet (IBA 7.8.1,
// A17.2.8); stored least-significant byte first, as rxe and RoCE NICs do.
inline constexpr size_t kIcrcBytes = 4;

}  // namespace softverbs::roce
