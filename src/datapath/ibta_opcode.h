// The BTH opcode of IBTA packets (IBA 9.2, table 38; RoCEv2 carries the same
// BTH): the high three bits name the transport, the low five the operation.
// One row per operation says which extended headers its packets carry, on
// which transports it exists and whether it carries payload: the work-request
// opcode table (opcodes.h) names the wire counterpart of each work request
// with it, and the RoCE packet builder and parser (src/roce) are driven by it.
#pragma once

#include <cstdint>
#include <iterator>

namespace softverbs::datapath {

// Transport, bits 7..5 of the BTH opcode.
enum class IbtaTransport : uint8_t {
  kRc = 0x00,
  kUc = 0x20,
  kRd = 0x40,
  kUd = 0x60,
  kCnp = 0x80,
  kXrc = 0xa0,
};

// Operation, bits 4..0 of the BTH opcode.
enum class IbtaOperation : uint8_t {
  kSendFirst = 0x00,
  kSendMiddle = 0x01,
  kSendLast = 0x02,
  kSendLastWithImm = 0x03,
  kSendOnly = 0x04,
  kSendOnlyWithImm = 0x05,
  kWriteFirst = 0x06,
  kWriteMiddle = 0x07,
  kWriteLast = 0x08,
  kWriteLastWithImm = 0x09,
  kWriteOnly = 0x0a,
  kWriteOnlyWithImm = 0x0b,
  kReadRequest = 0x0c,
  kReadResponseFirst = 0x0d,
  kReadResponseMiddle = 0x0e,
  kReadResponseLast = 0x0f,
  kReadResponseOnly = 0x10,
  kAcknowledge = 0x11,
  kAtomicAcknowledge = 0x12,
  kCompareSwap = 0x13,
  kFetchAdd = 0x14,
  kResync = 0x15,  // RD only; softverbs has no RD
  kSendLastWithInvalidate = 0x16,
  kSendOnlyWithInvalidate = 0x17,
  kFlush = 0x1c,        // IBA 1.5 RDMA FLUSH; not spoken by softverbs (docs/roce.md)
  kAtomicWrite = 0x1d,  // IBA 1.5 ATOMIC WRITE
  kNone = 0xff,         // no packet of this kind (e.g. no FIRST for a one-packet request)
};

// The BTH opcode byte of an operation on a transport.
constexpr uint8_t IbtaOpcode(IbtaTransport t, IbtaOperation op) {
  return static_cast<uint8_t>(static_cast<uint8_t>(t) | static_cast<uint8_t>(op));
}
constexpr IbtaTransport TransportOfOpcode(uint8_t opcode) {
  return static_cast<IbtaTransport>(opcode & 0xe0);
}
constexpr IbtaOperation OperationOfOpcode(uint8_t opcode) {
  return static_cast<IbtaOperation>(opcode & 0x1f);
}

// Extended transport headers a packet carries after the BTH (IBA 9.3). The
// transport adds its own: XRCETH first on XRC requests, DETH on every UD
// packet. Order on the wire (IBA 9.2): BTH [XRCETH] [DETH] [RETH|AtomicETH]
// [AETH] [AtomicAckETH] [ImmDt|IETH] payload.
enum WireHeader : uint8_t {
  kHeaderReth = 1 << 0,          // RDMA ETH: virtual address, rkey, length
  kHeaderAtomicEth = 1 << 1,     // atomic ETH: address, rkey, swap/add, compare
  kHeaderImmDt = 1 << 2,         // immediate data
  kHeaderIeth = 1 << 3,          // invalidate ETH: the rkey to invalidate
  kHeaderAeth = 1 << 4,          // ACK ETH: syndrome and MSN (responses)
  kHeaderAtomicAckEth = 1 << 5,  // atomic ACK ETH: the original remote value
};

// A set of transports (bit 1 << (transport >> 5)).
using TransportSet = uint8_t;
constexpr TransportSet TransportBit(IbtaTransport t) {
  return static_cast<TransportSet>(1u << (static_cast<uint8_t>(t) >> 5));
}
inline constexpr TransportSet kOnRcXrc =
    TransportBit(IbtaTransport::kRc) | TransportBit(IbtaTransport::kXrc);
inline constexpr TransportSet kOnRcUcXrc = kOnRcXrc | TransportBit(IbtaTransport::kUc);
inline constexpr TransportSet kOnAll = kOnRcUcXrc | TransportBit(IbtaTransport::kUd);

// Where a packet sits in its message.
enum class IbtaSegment : uint8_t { kFirst, kMiddle, kLast, kOnly };

struct IbtaOperationInfo {
  const char* name = nullptr;   // IBA's name, e.g. "SEND_FIRST" (nullptr: no such operation)
  TransportSet transports = 0;  // transports this operation exists on (RD aside)
  uint8_t headers = 0;          // WireHeader bits after the BTH (and XRCETH/DETH)
  bool payload = false;         // carries a payload (else headers only)
  bool response = false;        // sent by the responder (no XRCETH on XRC)
  IbtaSegment segment = IbtaSegment::kOnly;
};

// One row per operation value 0x00..0x1d (IBA table 38 and 9.2's header
// lists, IBA 1.5's two additions; rxe's rxe_opcode.c says the same).
inline constexpr IbtaOperationInfo kIbtaOperationRows[] = {
    {"SEND_FIRST", kOnRcUcXrc, 0, true, false, IbtaSegment::kFirst},
    {"SEND_MIDDLE", kOnRcUcXrc, 0, true, false, IbtaSegment::kMiddle},
    {"SEND_LAST", kOnRcUcXrc, 0, true, false, IbtaSegment::kLast},
    {"SEND_LAST_WITH_IMMEDIATE", kOnRcUcXrc, kHeaderImmDt, true, false, IbtaSegment::kLast},
    {"SEND_ONLY", kOnAll, 0, true, false, IbtaSegment::kOnly},
    {"SEND_ONLY_WITH_IMMEDIATE", kOnAll, kHeaderImmDt, true, false, IbtaSegment::kOnly},
    {"RDMA_WRITE_FIRST", kOnRcUcXrc, kHeaderReth, true, false, IbtaSegment::kFirst},
    {"RDMA_WRITE_MIDDLE", kOnRcUcXrc, 0, true, false, IbtaSegment::kMiddle},
    {"RDMA_WRITE_LAST", kOnRcUcXrc, 0, true, false, IbtaSegment::kLast},
    {"RDMA_WRITE_LAST_WITH_IMMEDIATE", kOnRcUcXrc, kHeaderImmDt, true, false, IbtaSegment::kLast},
    {"RDMA_WRITE_ONLY", kOnRcUcXrc, kHeaderReth, true, false, IbtaSegment::kOnly},
    {"RDMA_WRITE_ONLY_WITH_IMMEDIATE", kOnRcUcXrc, kHeaderReth | kHeaderImmDt, true, false,
     IbtaSegment::kOnly},
    {"RDMA_READ_REQUEST", kOnRcXrc, kHeaderReth, false, false, IbtaSegment::kOnly},
    {"RDMA_READ_RESPONSE_FIRST", kOnRcXrc, kHeaderAeth, true, true, IbtaSegment::kFirst},
    {"RDMA_READ_RESPONSE_MIDDLE", kOnRcXrc, 0, true, true, IbtaSegment::kMiddle},
    {"RDMA_READ_RESPONSE_LAST", kOnRcXrc, kHeaderAeth, true, true, IbtaSegment::kLast},
    {"RDMA_READ_RESPONSE_ONLY", kOnRcXrc, kHeaderAeth, true, true, IbtaSegment::kOnly},
    {"ACKNOWLEDGE", kOnRcXrc, kHeaderAeth, false, true, IbtaSegment::kOnly},
    {"ATOMIC_ACKNOWLEDGE", kOnRcXrc, kHeaderAeth | kHeaderAtomicAckEth, false, true,
     IbtaSegment::kOnly},
    {"COMPARE_SWAP", kOnRcXrc, kHeaderAtomicEth, false, false, IbtaSegment::kOnly},
    {"FETCH_ADD", kOnRcXrc, kHeaderAtomicEth, false, false, IbtaSegment::kOnly},
    {"RESYNC", 0, 0, false, false, IbtaSegment::kOnly},  // RD only
    {"SEND_LAST_WITH_INVALIDATE", kOnRcXrc, kHeaderIeth, true, false, IbtaSegment::kLast},
    {"SEND_ONLY_WITH_INVALIDATE", kOnRcXrc, kHeaderIeth, true, false, IbtaSegment::kOnly},
    {},  // 0x18-0x1b: reserved
    {},
    {},
    {},
    {"FLUSH", 0, 0, false, false, IbtaSegment::kOnly},  // IBA 1.5; not spoken here
    // IBA 1.5 (rxe's IB_OPCODE_RC_ATOMIC_WRITE): RETH and 8 bytes of payload
    // that the responder stores at once; answered by a RDMA READ RESPONSE
    // ONLY without payload.
    {"ATOMIC_WRITE", kOnRcXrc, kHeaderReth, true, false, IbtaSegment::kOnly},
};
static_assert(std::size(kIbtaOperationRows) ==
              static_cast<uint8_t>(IbtaOperation::kAtomicWrite) + 1);

inline constexpr IbtaOperationInfo kNoIbtaOperation{};

// The row of an operation; values past the table get a row with no transport.
constexpr const IbtaOperationInfo& IbtaOperationRow(IbtaOperation op) {
  const auto i = static_cast<uint8_t>(op);
  return i < std::size(kIbtaOperationRows) ? kIbtaOperationRows[i] : kNoIbtaOperation;
}

// Whether a BTH opcode byte names an operation that exists on its transport
// (RD and CNP are not spoken by softverbs: no).
constexpr bool IbtaOpcodeValid(uint8_t opcode) {
  return (IbtaOperationRow(OperationOfOpcode(opcode)).transports &
          TransportBit(TransportOfOpcode(opcode))) != 0;
}

}  // namespace softverbs::datapath
