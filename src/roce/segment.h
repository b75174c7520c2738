// Messages as packets (IBA 9.2, 9.8.3): how many packets a message of a
// given length takes at a path MTU, which IBTA operation each packet of a
// request or READ response carries (from the opcode tables), and which
// operation may follow which within a message - the responder's check of
// the packet sequence.
#pragma once

#include <cstdint>

#include "datapath/ibta_opcode.h"
#include "datapath/opcodes.h"

namespace softverbs::roce {

// Bytes of an ibv_mtu (IBV_MTU_256 = 1 .. IBV_MTU_4096 = 5); 0 if invalid.
constexpr uint32_t MtuBytes(uint32_t ibv_mtu) {
  return ibv_mtu >= 1 && ibv_mtu <= 5 ? 128u << ibv_mtu : 0;
}

// Packets of a message of length bytes (at least one: an empty message is
// one packet).
constexpr uint32_t PacketsOf(uint64_t length, uint32_t mtu_bytes) {
  return length == 0 ? 1 : static_cast<uint32_t>((length + mtu_bytes - 1) / mtu_bytes);
}

// The operation of packet i (0-based) of n of a request of this
// work-request opcode (RDMA READ and atomics: one packet, whatever the
// length). kNone for an opcode without packets.
datapath::IbtaOperation RequestOperation(const datapath::WrOpcodeInfo& wr, uint32_t i, uint32_t n);

// The operation of packet i of n of a READ response.
datapath::IbtaOperation ReadResponseOperation(uint32_t i, uint32_t n);

// Whether operation next may follow operation prev on a QP's packet stream
// (both requests, or both responses): after a FIRST or MIDDLE, only a
// MIDDLE or LAST of the same message kind; after anything else, only a
// FIRST or ONLY (IBA 9.8.3.1; rxe's check_op_seq says the same).
bool MayFollow(datapath::IbtaOperation prev, datapath::IbtaOperation next);

}  // namespace softverbs::roce
