// A firmware on a fake device, two clients, and builders for the command
// boxes of the spec (offsets typed from shared/spec/devx-prm.md).
#ifndef SOFTVERBS_TESTS_UNIT_DEVX_DEVX_FIXTURE_H_
#define SOFTVERBS_TESTS_UNIT_DEVX_DEVX_FIXTURE_H_

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "fake_device_objects.h"
#include "firmware.h"
#include "prm_test_box.h"

namespace softverbs::devx::testing {

// The shared box helpers, declared here so that they hide, as local
// declarations would, anything of src/ by the same name.
using ::softverbs::prm_test::Box;
using ::softverbs::prm_test::ReadBits;
using ::softverbs::prm_test::WriteBits;
using enum ::softverbs::prm_test::Opcode;
using ::softverbs::prm_test::kCqcByte;
using ::softverbs::prm_test::kMkcByte;
using ::softverbs::prm_test::kQpcByte;

// Status codes (spec §1.3).
enum : uint8_t {
  kOk = 0x00,
  kBadOp = 0x02,
  kBadParam = 0x03,
  kBadResource = 0x05,
  kBadInputLength = 0x50,
  kBadOutputLength = 0x51,
  kBadQpState = 0x10,
  kLimitsExceeded = 0x08,
};

inline constexpr size_t kQpcPrimaryPathBit = 0xc0;

struct Reply {
  int error = 0;
  std::vector<uint8_t> out;
  ObjectHandle handle = 0;

  uint8_t status() const { return static_cast<uint8_t>(ReadBits(out, 0x00, 8)); }
  uint32_t syndrome() const { return static_cast<uint32_t>(ReadBits(out, 0x20, 32)); }
  uint64_t Get(size_t offset, size_t width) const { return ReadBits(out, offset, width); }
  // The 24-bit number at DW2[23:0] of a create answer.
  uint32_t number() const { return static_cast<uint32_t>(Get(0x48, 24)); }
};

class DevxTest : public ::testing::Test {
 public:
  // --- builders ---
  static Box CreateCqBox(uint32_t buffer_umem, uint32_t dbr_umem, uint32_t log_cq_size = 8,
                         uint32_t eqn = 0);
  static Box CreateQpBox(uint32_t pdn, uint32_t send_cqn, uint32_t recv_cqn, uint32_t dbr_umem,
                         uint32_t wq_umem);
  static Box QpCommandBox(uint16_t opcode, uint32_t qpn);
  static Box CreateMkeyBox(uint32_t pdn, uint32_t umem, uint64_t length);

 protected:
  Reply Run(EntryPoint entry_point, const CallerContext& caller, const Box& in,
            size_t out_bytes = 16, ObjectHandle handle = 0) {
    Reply reply;
    reply.out.assign(out_bytes, 0xee);
    reply.handle = handle;
    reply.error = firmware_.Execute(entry_point, caller, in.bytes, reply.out, &reply.handle);
    return reply;
  }
  Reply Create(const CallerContext& caller, const Box& in, size_t out_bytes = 16) {
    return Run(EntryPoint::kObjCreate, caller, in, out_bytes);
  }
  Reply General(const CallerContext& caller, const Box& in, size_t out_bytes) {
    return Run(EntryPoint::kGeneralCmd, caller, in, out_bytes);
  }
  Reply Modify(const CallerContext& caller, ObjectHandle handle, const Box& in,
               size_t out_bytes = 16) {
    return Run(EntryPoint::kObjModify, caller, in, out_bytes, handle);
  }
  Reply Query(const CallerContext& caller, ObjectHandle handle, const Box& in, size_t out_bytes) {
    return Run(EntryPoint::kObjQuery, caller, in, out_bytes, handle);
  }

  // A DEVX context's verbs resources and its DEVX CQ and QP, as the
  // rdma-core test builds them.
  struct QpSetup {
    uint32_t pdn, cqn, qpn, dbr_umem, wq_umem;
    ObjectHandle cq, qp;
  };
  QpSetup MakeQp(const CallerContext& caller);
  uint32_t QpState(const CallerContext& caller, const QpSetup& setup);

  FakeDeviceObjects device_;
  Firmware firmware_{device_};
  CallerContext alice_{1, 11};
  CallerContext bob_{2, 22};
};

inline Box DevxTest::CreateCqBox(uint32_t buffer_umem, uint32_t dbr_umem, uint32_t log_cq_size,
                                 uint32_t eqn) {
  Box box(0x110, kCreateCq);
  box.SetIn(kCqcByte, 0x63, 5, log_cq_size)  // log_cq_size
      .SetIn(kCqcByte, 0x68, 24, 1)          // uar_page
      .SetIn(kCqcByte, 0xa0, 32, eqn)        // c_eqn
      .SetIn(kCqcByte, 0x20, 32, dbr_umem)   // dbr_umem_id
      .Set(0x2c0, 32, buffer_umem);          // cq_umem_id
  return box;
}

// The CREATE_QP the rdma-core DEVX test sends (spec §4.2 step 10).
inline Box DevxTest::CreateQpBox(uint32_t pdn, uint32_t send_cqn, uint32_t recv_cqn,
                                 uint32_t dbr_umem, uint32_t wq_umem) {
  Box box(0x110 + 8, kCreateQp);
  box.SetIn(kQpcByte, 0x08, 8, 0)            // st = RC
      .SetIn(kQpcByte, 0x13, 2, 3)           // pm_state = migrated
      .SetIn(kQpcByte, 0x28, 24, pdn)        // pd
      .SetIn(kQpcByte, 0x49, 4, 10)          // log_rq_size
      .SetIn(kQpcByte, 0x4d, 3, 0)           // log_rq_stride
      .SetIn(kQpcByte, 0x51, 4, 12)          // log_sq_size
      .SetIn(kQpcByte, 0x58, 2, 1)           // ts_format
      .SetIn(kQpcByte, 0x68, 24, 1)          // uar_page
      .SetIn(kQpcByte, 0x3e8, 24, send_cqn)  // cqn_snd
      .SetIn(kQpcByte, 0x4e8, 24, recv_cqn)  // cqn_rcv
      .SetIn(kQpcByte, 0x720, 32, dbr_umem)  // dbr_umem_id
      .Set(0x840, 32, wq_umem);              // wq_umem_id
  return box;
}

inline Box DevxTest::QpCommandBox(uint16_t opcode, uint32_t qpn) {
  Box box(0x110, opcode);
  box.Set(0x48, 24, qpn);
  return box;
}

inline Box DevxTest::CreateMkeyBox(uint32_t pdn, uint32_t umem, uint64_t length) {
  Box box(0x110, kCreateMkey);
  box.SetIn(kMkcByte, 0x16, 2, 1)           // access_mode_1_0 = MTT
      .SetIn(kMkcByte, 0x14, 1, 1)          // lw
      .SetIn(kMkcByte, 0x15, 1, 1)          // lr
      .SetIn(kMkcByte, 0x20, 24, 0xffffff)  // qpn: none
      .SetIn(kMkcByte, 0x38, 8, 0x5a)       // mkey_7_0
      .SetIn(kMkcByte, 0x68, 24, pdn)       // pd
      .SetIn(kMkcByte, 0xc0, 64, length)    // len
      .Set(0x320, 32, umem);                // mkey_umem_id
  return box;
}

inline DevxTest::QpSetup DevxTest::MakeQp(const CallerContext& caller) {
  QpSetup setup{};
  setup.pdn = device_.AddVerbsObject(ResourceKind::kPd, caller.client);
  setup.dbr_umem = device_.AddVerbsObject(ResourceKind::kUmem, caller.client);
  setup.wq_umem = device_.AddVerbsObject(ResourceKind::kUmem, caller.client);
  const uint32_t cq_umem = device_.AddVerbsObject(ResourceKind::kUmem, caller.client);
  Reply cq = Create(caller, CreateCqBox(cq_umem, setup.dbr_umem));
  EXPECT_EQ(cq.error, 0);
  setup.cqn = cq.number();
  setup.cq = cq.handle;
  Reply qp =
      Create(caller, CreateQpBox(setup.pdn, setup.cqn, setup.cqn, setup.dbr_umem, setup.wq_umem));
  EXPECT_EQ(qp.error, 0);
  setup.qpn = qp.number();
  setup.qp = qp.handle;
  return setup;
}

inline uint32_t DevxTest::QpState(const CallerContext& caller, const QpSetup& setup) {
  Reply reply = Query(caller, setup.qp, QpCommandBox(kQueryQp, setup.qpn), 272);
  EXPECT_EQ(reply.error, 0);
  return static_cast<uint32_t>(reply.Get(kQpcByte * 8 + 0x00, 4));
}

}  // namespace softverbs::devx::testing

#endif  // SOFTVERBS_TESTS_UNIT_DEVX_DEVX_FIXTURE_H_
