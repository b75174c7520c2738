// Bit-by-bit CRCs for the tests of signature keys: written from the
// algorithms' definitions, independent of the device's byte-at-a-time
// tables (datapath/block_signature.cc), so a test compares the device's
// signatures against another computation of them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace softverbs_test {

// CRC-16/T10-DIF: polynomial 0x8bb7, most significant bit first, seed 0, no
// final inversion.
inline uint16_t BitwiseT10Dif(const uint8_t* p, size_t n) {
  uint16_t c = 0;
  for (size_t i = 0; i < n; ++i) {
    c ^= static_cast<uint16_t>(p[i] << 8);
    for (int k = 0; k < 8; ++k) {
      c = (c & 0x8000) ? static_cast<uint16_t>(c << 1 ^ 0x8bb7) : static_cast<uint16_t>(c << 1);
    }
  }
  return c;
}

// CRC-32 (IEEE 802.3): reflected 0xedb88320, all-ones seed, final inversion.
inline uint32_t BitwiseCrc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0xedb88320u : c >> 1;
  }
  return ~c;
}

}  // namespace softverbs_test
