// The BTH opcode of IBTA packets (IBA 9.2, table 38; RoCEv2 carries the same
// BTH): the high three bits name the transport, the low five the operation.
// Only what the opcode table (opcodes.h) needs to name the wire counterpart
// of each work-request opcode; a packet carrier parses and builds with it.
#pragma once

#include <cstdint>

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
  kSendLastWithInvalidate = 0x16,
  kSendOnlyWithInvalidate = 0x17,
  kNone = 0xff,  // no packet of this kind (e.g. no FIRST for a one-packet request)
};

// The BTH opcode byte of an operation on a transport.
constexpr uint8_t IbtaOpcode(IbtaTransport t, IbtaOperation op) {
  return static_cast<uint8_t>(static_cast<uint8_t>(t) | static_cast<uint8_t>(op));
}

}  // namespace softverbs::datapath
