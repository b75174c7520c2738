// Test-side PRM box helpers, written independently of src/devx/prm_bits.h:
// a PRM bit offset counts from the MSB of byte 0, so bit i of the box is bit
// (7 - i % 8) of byte i / 8. Offsets in the tests are typed from the spec.
#ifndef SOFTVERBS_TESTS_UNIT_DEVX_TEST_BOX_H_
#define SOFTVERBS_TESTS_UNIT_DEVX_TEST_BOX_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace softverbs::devx::testing {

inline uint64_t ReadBits(const std::vector<uint8_t>& box, size_t offset, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i) {
    const size_t bit = offset + i;
    const uint8_t byte = bit / 8 < box.size() ? box[bit / 8] : 0;
    value = (value << 1) | ((byte >> (7 - bit % 8)) & 1u);
  }
  return value;
}

inline void WriteBits(std::vector<uint8_t>& box, size_t offset, size_t width, uint64_t value) {
  for (size_t i = 0; i < width; ++i) {
    const size_t bit = offset + i;
    if (bit / 8 >= box.size()) return;  // a deliberately short box
    const uint8_t mask = static_cast<uint8_t>(1u << (7 - bit % 8));
    const bool set = (value >> (width - 1 - i)) & 1u;
    box[bit / 8] = set ? (box[bit / 8] | mask) : (box[bit / 8] & ~mask);
  }
}

// A command box under construction.
struct Box {
  explicit Box(size_t bytes) : bytes(bytes, 0) {}
  Box(size_t size, uint16_t opcode, uint16_t op_mod = 0) : bytes(size, 0) {
    Set(0x00, 16, opcode);
    Set(0x30, 16, op_mod);
  }
  Box& Set(size_t offset, size_t width, uint64_t value) {
    WriteBits(bytes, offset, width, value);
    return *this;
  }
  // A field inside an embedded context that starts at `byte`.
  Box& SetIn(size_t byte, size_t offset, size_t width, uint64_t value) {
    return Set(byte * 8 + offset, width, value);
  }
  uint64_t Get(size_t offset, size_t width) const { return ReadBits(bytes, offset, width); }

  std::vector<uint8_t> bytes;
};

}  // namespace softverbs::devx::testing

#endif  // SOFTVERBS_TESTS_UNIT_DEVX_TEST_BOX_H_
