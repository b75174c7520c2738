// The DEVX end-to-end tests' output boxes, statuses and builders of the
// command boxes, on the shared box helpers (tests/common/prm_test_box.h).
// Offsets are typed from shared/spec/devx-prm.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "prm_test_box.h"

namespace devx_it {

// The shared box helpers, declared here so that they hide, as local
// declarations would, anything of src/ by the same name.
using ::softverbs::prm_test::Box;
using ::softverbs::prm_test::ReadBits;
using ::softverbs::prm_test::WriteBits;
using enum ::softverbs::prm_test::Opcode;
using ::softverbs::prm_test::kCqcByte;
using ::softverbs::prm_test::kMkcByte;
using ::softverbs::prm_test::kQpcByte;

// An output box, pre-filled with a sentinel so "untouched" is visible.
struct Out {
  explicit Out(size_t size) : b(size, 0xee) {}
  uint8_t status() const { return static_cast<uint8_t>(ReadBits(b, 0x00, 8)); }
  uint32_t syndrome() const { return static_cast<uint32_t>(ReadBits(b, 0x20, 32)); }
  uint32_t number() const { return static_cast<uint32_t>(ReadBits(b, 0x48, 24)); }  // DW2[23:0]
  uint64_t Get(size_t off, size_t w) const { return ReadBits(b, off, w); }
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

inline constexpr size_t kPrimaryPath = 0xc0;  // bit offset of the path inside qpc
inline constexpr size_t kCreateOut = 16;
inline constexpr size_t kQueryQpOut = 272;

inline Box CreateCqBox(uint32_t cq_umem, uint32_t dbr_umem, uint32_t eqn, uint32_t log_size = 8) {
  Box box(0x110, kCreateCq);
  box.SetIn(kCqcByte, 0x63, 5, log_size)    // log_cq_size
      .SetIn(kCqcByte, 0x68, 24, 1)         // uar_page
      .SetIn(kCqcByte, 0xa0, 32, eqn)       // c_eqn (all of DW5)
      .SetIn(kCqcByte, 0x20, 32, dbr_umem)  // dbr_umem_id
      .Set(0x2c0, 32, cq_umem);             // cq_umem_id (DW22)
  return box;
}

inline Box CreateQpBox(uint32_t pdn, uint32_t send_cqn, uint32_t recv_cqn, uint32_t dbr_umem,
                       uint32_t wq_umem) {
  Box box(0x110 + 8, kCreateQp);
  box.SetIn(kQpcByte, 0x08, 8, 0)            // st = RC
      .SetIn(kQpcByte, 0x13, 2, 3)           // pm_state = migrated
      .SetIn(kQpcByte, 0x28, 24, pdn)        // pd
      .SetIn(kQpcByte, 0x49, 4, 10)          // log_rq_size
      .SetIn(kQpcByte, 0x51, 4, 12)          // log_sq_size
      .SetIn(kQpcByte, 0x68, 24, 1)          // uar_page
      .SetIn(kQpcByte, 0x3e8, 24, send_cqn)  // cqn_snd
      .SetIn(kQpcByte, 0x4e8, 24, recv_cqn)  // cqn_rcv
      .SetIn(kQpcByte, 0x720, 32, dbr_umem)  // dbr_umem_id
      .Set(0x840, 32, wq_umem);              // wq_umem_id (DW66)
  return box;
}

inline Box QpBox(uint16_t opcode, uint32_t qpn) {
  Box box(0x110, opcode);
  box.Set(0x48, 24, qpn);
  return box;
}

inline Box Rst2InitBox(uint32_t qpn) {
  Box box = QpBox(kRst2Init, qpn);
  box.SetIn(kQpcByte, 0x490, 1, 1)                   // rre
      .SetIn(kQpcByte, 0x491, 1, 1)                  // rwe
      .SetIn(kQpcByte, kPrimaryPath + 0x128, 8, 1);  // vhca_port_num
  return box;
}

inline Box Init2RtrBox(uint32_t qpn, uint32_t remote_qpn, uint32_t mtu = 3) {
  Box box = QpBox(kInit2Rtr, qpn);
  box.SetIn(kQpcByte, 0x40, 3, mtu)           // mtu
      .SetIn(kQpcByte, 0x43, 5, 20)           // log_msg_max
      .SetIn(kQpcByte, 0xa8, 24, remote_qpn)  // remote_qpn
      .SetIn(kQpcByte, 0x4a8, 24, 0x123)      // next_rcv_psn
      .SetIn(kQpcByte, kPrimaryPath + 0x128, 8, 1)
      .SetIn(kQpcByte, kPrimaryPath + 0x58, 8, 64);  // hop_limit
  return box;
}

inline Box Rtr2RtsBox(uint32_t qpn) {
  Box box = QpBox(kRtr2Rts, qpn);
  box.SetIn(kQpcByte, 0x38d, 3, 7)                  // retry_count
      .SetIn(kQpcByte, 0x390, 3, 7)                 // rnr_retry
      .SetIn(kQpcByte, 0x3c8, 24, 0x456)            // next_send_psn
      .SetIn(kQpcByte, kPrimaryPath + 0x40, 5, 14)  // ack_timeout
      .SetIn(kQpcByte, kPrimaryPath + 0x128, 8, 1);
  return box;
}

inline Box CreateMkeyBox(uint32_t pdn, uint32_t umem, uint64_t length) {
  Box box(0x110, kCreateMkey);
  box.SetIn(kMkcByte, 0x16, 2, 1)           // access_mode_1_0 = MTT
      .SetIn(kMkcByte, 0x14, 1, 1)          // lw
      .SetIn(kMkcByte, 0x15, 1, 1)          // lr
      .SetIn(kMkcByte, 0x20, 24, 0xffffff)  // qpn: none
      .SetIn(kMkcByte, 0x38, 8, 0x5a)       // mkey_7_0
      .SetIn(kMkcByte, 0x68, 24, pdn)       // pd
      .SetIn(kMkcByte, 0xc0, 64, length)    // len
      .Set(0x320, 32, umem);                // mkey_umem_id (DW25)
  return box;
}

// QUERY_HCA_CAP: op_mod = type << 1 | current.
inline Box QueryHcaCapBox(uint16_t type) {
  return Box(16, kQueryHcaCap, static_cast<uint16_t>(type << 1 | 1));
}

}  // namespace devx_it
