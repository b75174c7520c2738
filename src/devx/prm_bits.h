// Big-endian bit-field access for mlx5 PRM command boxes.
//
// A PRM box is a sequence of big-endian 32-bit dwords. A field is named by
// its bit offset counted from the most significant bit of dword 0 and its
// width, the same convention the PRM tables (and the spec's "off" column) use.
// A field of width <= 32 never crosses a dword boundary in the PRM; wider
// fields are dword aligned and are read in 32-bit pieces.
//
// Reads past the end of a box return zero bits and writes past the end are
// dropped. That is deliberate: the firmware must behave like hardware when a
// caller passes a short input box (missing bytes read as zero) or a short
// output box (the answer is truncated), and callers check lengths explicitly
// only where the PRM says a short box is an error.
#ifndef SOFTVERBS_DEVX_PRM_BITS_H_
#define SOFTVERBS_DEVX_PRM_BITS_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace softverbs::devx {

// A PRM field: bit offset from the MSB of dword 0, and width in bits.
struct Field {
  uint32_t offset;
  uint32_t width;

  // First byte after the field; a box must be at least this long to hold it.
  constexpr size_t EndByte() const { return (offset + width + 7) / 8; }
  // The same field inside a sub-structure that starts at `base_bits`.
  constexpr Field At(uint32_t base_bits) const { return {base_bits + offset, width}; }
};

// A byte-aligned field given in bytes (for 64-bit values and byte arrays).
constexpr Field ByteField(uint32_t byte_offset, uint32_t byte_width) {
  return {byte_offset * 8, byte_width * 8};
}

namespace prm_bits_internal {

inline uint32_t LoadDword(std::span<const uint8_t> box, size_t dword) {
  uint32_t value = 0;
  for (size_t i = 0; i < 4; ++i) {
    const size_t byte = dword * 4 + i;
    value = (value << 8) | (byte < box.size() ? box[byte] : 0u);
  }
  return value;
}

inline void StoreDword(std::span<uint8_t> box, size_t dword, uint32_t value) {
  for (size_t i = 0; i < 4; ++i) {
    const size_t byte = dword * 4 + i;
    if (byte < box.size()) box[byte] = static_cast<uint8_t>(value >> (24 - 8 * i));
  }
}

constexpr uint32_t Mask(uint32_t width) {
  return width >= 32 ? 0xffffffffu : ((1u << width) - 1u);
}

}  // namespace prm_bits_internal

// Reads a field of width 1..32 that lies within one dword.
inline uint32_t GetField(std::span<const uint8_t> box, Field field) {
  using namespace prm_bits_internal;
  const uint32_t dword = LoadDword(box, field.offset / 32);
  const uint32_t shift = 32 - (field.offset % 32) - field.width;
  return (dword >> shift) & Mask(field.width);
}

// Writes a field of width 1..32 that lies within one dword; extra high bits of
// `value` are discarded, neighbouring bits are preserved.
inline void SetField(std::span<uint8_t> box, Field field, uint32_t value) {
  using namespace prm_bits_internal;
  const size_t index = field.offset / 32;
  const uint32_t shift = 32 - (field.offset % 32) - field.width;
  const uint32_t mask = Mask(field.width) << shift;
  const uint32_t old = LoadDword(box, index);
  StoreDword(box, index, (old & ~mask) | ((value << shift) & mask));
}

// Reads a dword-aligned 64-bit field.
inline uint64_t GetField64(std::span<const uint8_t> box, Field field) {
  const uint64_t high = GetField(box, {field.offset, 32});
  return (high << 32) | GetField(box, {field.offset + 32, 32});
}

inline void SetField64(std::span<uint8_t> box, Field field, uint64_t value) {
  SetField(box, {field.offset, 32}, static_cast<uint32_t>(value >> 32));
  SetField(box, {field.offset + 32, 32}, static_cast<uint32_t>(value));
}

// Copies a field of any width (for instance a 352-bit address path) from one
// box to another, piece by piece so that no piece crosses a dword boundary.
inline void CopyField(std::span<uint8_t> dst, std::span<const uint8_t> src, Field field) {
  uint32_t offset = field.offset;
  uint32_t remaining = field.width;
  while (remaining > 0) {
    const uint32_t room = 32 - offset % 32;
    const uint32_t piece = remaining < room ? remaining : room;
    SetField(dst, {offset, piece}, GetField(src, {offset, piece}));
    offset += piece;
    remaining -= piece;
  }
}

// The part of `box` starting at `byte_offset` (empty when the box is shorter):
// embedded contexts (qpc, cqc, mkc) are addressed relative to their start.
template <typename Byte>
std::span<Byte> SubBox(std::span<Byte> box, size_t byte_offset) {
  return byte_offset >= box.size() ? std::span<Byte>() : box.subspan(byte_offset);
}

}  // namespace softverbs::devx

#endif  // SOFTVERBS_DEVX_PRM_BITS_H_
