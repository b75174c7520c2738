// The tests' own PRM box builder (independent of src/devx): a field at bit
// offset `off` of width `w` counts from the most significant bit of byte 0,
// all big-endian (spec §0). Offsets in the tests are typed from
// shared/spec/devx-prm.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace devx_it {

inline uint64_t GetBits(const std::vector<uint8_t>& box, size_t off, size_t w) {
  uint64_t v = 0;
  for (size_t i = 0; i < w; ++i) {
    const size_t bit = off + i;
    const uint8_t byte = bit / 8 < box.size() ? box[bit / 8] : 0;
    v = (v << 1) | ((byte >> (7 - bit % 8)) & 1u);
  }
  return v;
}

inline void PutBits(std::vector<uint8_t>& box, size_t off, size_t w, uint64_t v) {
  for (size_t i = 0; i < w; ++i) {
    const size_t bit = off + i;
    if (bit / 8 >= box.size()) return;
    const auto mask = static_cast<uint8_t>(0x80u >> (bit % 8));
    if ((v >> (w - 1 - i)) & 1u) {
      box[bit / 8] |= mask;
    } else {
      box[bit / 8] &= static_cast<uint8_t>(~mask);
    }
  }
}

struct Box {
  explicit Box(size_t size, uint16_t opcode = 0, uint16_t op_mod = 0) : b(size, 0) {
    Set(0x00, 16, opcode);
    Set(0x30, 16, op_mod);
  }
  Box& Set(size_t off, size_t w, uint64_t v) {
    PutBits(b, off, w, v);
    return *this;
  }
  // A field of an embedded context starting at byte `ctx`.
  Box& Ctx(size_t ctx, size_t off, size_t w, uint64_t v) { return Set(ctx * 8 + off, w, v); }
  uint64_t Get(size_t off, size_t w) const { return GetBits(b, off, w); }
  void* data() { return b.data(); }
  size_t size() const { return b.size(); }

  std::vector<uint8_t> b;
};

// An output box, pre-filled with a sentinel so "untouched" is visible.
struct Out {
  explicit Out(size_t size) : b(size, 0xee) {}
  uint8_t status() const { return static_cast<uint8_t>(GetBits(b, 0x00, 8)); }
  uint32_t syndrome() const { return static_cast<uint32_t>(GetBits(b, 0x20, 32)); }
  uint32_t number() const { return static_cast<uint32_t>(GetBits(b, 0x48, 24)); }  // DW2[23:0]
  uint64_t Get(size_t off, size_t w) const { return GetBits(b, off, w); }
  bool Untouched() const {
    for (uint8_t c : b) {
      if (c != 0xee) return false;
    }
    return true;
  }
  void* data() { return b.data(); }
  size_t size() const { return b.size(); }

  std::vector<uint8_t> b;
};

// Opcodes (spec §2.2, §3).
enum : uint16_t {
  kQueryHcaCap = 0x100,
  kQueryAdapter = 0x101,
  kCreateMkey = 0x200,
  kQueryMkey = 0x201,
  kCreateCq = 0x400,
  kQueryCq = 0x402,
  kCreateQp = 0x500,
  kRst2Init = 0x502,
  kInit2Rtr = 0x503,
  kRtr2Rts = 0x504,
  kRts2Rts = 0x505,
  k2Err = 0x507,
  k2Rst = 0x50a,
  kQueryQp = 0x50b,
  kQueryHcaVportContext = 0x762,
  kAllocPd = 0x800,
  kNop = 0x80d,
  kAllocTransportDomain = 0x816,
  kCreateTir = 0x900,
  kAllocFlowCounter = 0x939,
  kQueryFlowCounter = 0x93b,
};

// Firmware statuses (spec §1.3).
enum : uint8_t {
  kStatusOk = 0x00,
  kStatusBadOp = 0x02,
  kStatusBadParam = 0x03,
  kStatusBadResource = 0x05,
  kStatusBadQpState = 0x10,
  kStatusBadOutputLength = 0x51,
};

// QP states in qpc.state (spec §3.4).
enum : uint32_t { kQpRst = 0, kQpInit = 1, kQpRtr = 2, kQpRts = 3, kQpErr = 6 };

inline constexpr size_t kCqcByte = 0x10;
inline constexpr size_t kQpcByte = 0x18;
inline constexpr size_t kMkcByte = 0x10;
inline constexpr size_t kPrimaryPath = 0xc0;  // bit offset of the path inside qpc
inline constexpr size_t kCreateOut = 16;
inline constexpr size_t kQueryQpOut = 272;

inline Box CreateCqBox(uint32_t cq_umem, uint32_t dbr_umem, uint32_t eqn, uint32_t log_size = 8) {
  Box box(0x110, kCreateCq);
  box.Ctx(kCqcByte, 0x63, 5, log_size)    // log_cq_size
      .Ctx(kCqcByte, 0x68, 24, 1)         // uar_page
      .Ctx(kCqcByte, 0xa0, 32, eqn)       // c_eqn (all of DW5)
      .Ctx(kCqcByte, 0x20, 32, dbr_umem)  // dbr_umem_id
      .Set(0x2c0, 32, cq_umem);           // cq_umem_id (DW22)
  return box;
}

inline Box CreateQpBox(uint32_t pdn, uint32_t send_cqn, uint32_t recv_cqn, uint32_t dbr_umem,
                       uint32_t wq_umem) {
  Box box(0x110 + 8, kCreateQp);
  box.Ctx(kQpcByte, 0x08, 8, 0)            // st = RC
      .Ctx(kQpcByte, 0x13, 2, 3)           // pm_state = migrated
      .Ctx(kQpcByte, 0x28, 24, pdn)        // pd
      .Ctx(kQpcByte, 0x49, 4, 10)          // log_rq_size
      .Ctx(kQpcByte, 0x51, 4, 12)          // log_sq_size
      .Ctx(kQpcByte, 0x68, 24, 1)          // uar_page
      .Ctx(kQpcByte, 0x3e8, 24, send_cqn)  // cqn_snd
      .Ctx(kQpcByte, 0x4e8, 24, recv_cqn)  // cqn_rcv
      .Ctx(kQpcByte, 0x720, 32, dbr_umem)  // dbr_umem_id
      .Set(0x840, 32, wq_umem);            // wq_umem_id (DW66)
  return box;
}

inline Box QpBox(uint16_t opcode, uint32_t qpn) {
  Box box(0x110, opcode);
  box.Set(0x48, 24, qpn);
  return box;
}

inline Box Rst2InitBox(uint32_t qpn) {
  Box box = QpBox(kRst2Init, qpn);
  box.Ctx(kQpcByte, 0x490, 1, 1)                   // rre
      .Ctx(kQpcByte, 0x491, 1, 1)                  // rwe
      .Ctx(kQpcByte, kPrimaryPath + 0x128, 8, 1);  // vhca_port_num
  return box;
}

inline Box Init2RtrBox(uint32_t qpn, uint32_t remote_qpn, uint32_t mtu = 3) {
  Box box = QpBox(kInit2Rtr, qpn);
  box.Ctx(kQpcByte, 0x40, 3, mtu)           // mtu
      .Ctx(kQpcByte, 0x43, 5, 20)           // log_msg_max
      .Ctx(kQpcByte, 0xa8, 24, remote_qpn)  // remote_qpn
      .Ctx(kQpcByte, 0x4a8, 24, 0x123)      // next_rcv_psn
      .Ctx(kQpcByte, kPrimaryPath + 0x128, 8, 1)
      .Ctx(kQpcByte, kPrimaryPath + 0x58, 8, 64);  // hop_limit
  return box;
}

inline Box Rtr2RtsBox(uint32_t qpn) {
  Box box = QpBox(kRtr2Rts, qpn);
  box.Ctx(kQpcByte, 0x38d, 3, 7)                  // retry_count
      .Ctx(kQpcByte, 0x390, 3, 7)                 // rnr_retry
      .Ctx(kQpcByte, 0x3c8, 24, 0x456)            // next_send_psn
      .Ctx(kQpcByte, kPrimaryPath + 0x40, 5, 14)  // ack_timeout
      .Ctx(kQpcByte, kPrimaryPath + 0x128, 8, 1);
  return box;
}

inline Box CreateMkeyBox(uint32_t pdn, uint32_t umem, uint64_t length) {
  Box box(0x110, kCreateMkey);
  box.Ctx(kMkcByte, 0x16, 2, 1)           // access_mode_1_0 = MTT
      .Ctx(kMkcByte, 0x14, 1, 1)          // lw
      .Ctx(kMkcByte, 0x15, 1, 1)          // lr
      .Ctx(kMkcByte, 0x20, 24, 0xffffff)  // qpn: none
      .Ctx(kMkcByte, 0x38, 8, 0x5a)       // mkey_7_0
      .Ctx(kMkcByte, 0x68, 24, pdn)       // pd
      .Ctx(kMkcByte, 0xc0, 64, length)    // len
      .Set(0x320, 32, umem);              // mkey_umem_id (DW25)
  return box;
}

// QUERY_HCA_CAP: op_mod = type << 1 | current.
inline Box QueryHcaCapBox(uint16_t type) {
  return Box(16, kQueryHcaCap, static_cast<uint16_t>(type << 1 | 1));
}

}  // namespace devx_it
