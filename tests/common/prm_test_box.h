// The tests' own PRM command boxes, written independently of src/devx (so a
// bit-order mistake there cannot hide in the tests too): a field at bit
// offset `offset` of width `width` counts from the most significant bit of
// byte 0, all big-endian, so bit i of the box is bit (7 - i % 8) of byte
// i / 8. Offsets and opcodes are typed from shared/spec/devx-prm.md. Shared by
// the firmware's unit tests (tests/unit/devx) and the DEVX end-to-end tests
// (tests/integration/devx).
#ifndef SOFTVERBS_TESTS_COMMON_PRM_TEST_BOX_H_
#define SOFTVERBS_TESTS_COMMON_PRM_TEST_BOX_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace softverbs::prm_test {

// Bits past the end of a (deliberately short) box read as 0.
inline uint64_t ReadBits(const std::vector<uint8_t>& box, size_t offset, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i) {
    const size_t bit = offset + i;
    const uint8_t byte = bit / 8 < box.size() ? box[bit / 8] : 0;
    value = (value << 1) | ((byte >> (7 - bit % 8)) & 1u);
  }
  return value;
}

// Bits past the end of a (deliberately short) box are dropped.
inline void WriteBits(std::vector<uint8_t>& box, size_t offset, size_t width, uint64_t value) {
  for (size_t i = 0; i < width; ++i) {
    const size_t bit = offset + i;
    if (bit / 8 >= box.size()) return;
    const uint8_t mask = static_cast<uint8_t>(1u << (7 - bit % 8));
    const bool set = (value >> (width - 1 - i)) & 1u;
    box[bit / 8] = set ? (box[bit / 8] | mask) : (box[bit / 8] & ~mask);
  }
}

// A command box under construction: opcode in DW0[31:16], op_mod in
// DW1[15:0].
struct Box {
  explicit Box(size_t size) : bytes(size, 0) {}
  Box(size_t size, uint16_t opcode, uint16_t op_mod = 0) : bytes(size, 0) {
    Set(0x00, 16, opcode);
    Set(0x30, 16, op_mod);
  }
  Box& Set(size_t offset, size_t width, uint64_t value) {
    WriteBits(bytes, offset, width, value);
    return *this;
  }
  // A field inside an embedded context that starts at byte `byte`.
  Box& SetIn(size_t byte, size_t offset, size_t width, uint64_t value) {
    return Set(byte * 8 + offset, width, value);
  }
  uint64_t Get(size_t offset, size_t width) const { return ReadBits(bytes, offset, width); }
  void* data() { return bytes.data(); }
  size_t size() const { return bytes.size(); }

  std::vector<uint8_t> bytes;
};

// Opcodes (spec §2.2, §3).
enum Opcode : uint16_t {
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

// Byte offsets of the embedded contexts (cqc, qpc, mkc) in their command
// boxes.
inline constexpr size_t kCqcByte = 0x10;
inline constexpr size_t kQpcByte = 0x18;
inline constexpr size_t kMkcByte = 0x10;

}  // namespace softverbs::prm_test

#endif  // SOFTVERBS_TESTS_COMMON_PRM_TEST_BOX_H_
