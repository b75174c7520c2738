// Big-endian (network order) integer fields of wire headers. Each holds its
// bytes as they are on the wire, has alignment 1 (so a header struct is laid
// out byte for byte, with no padding) and converts explicitly with get() and
// set(): a header field is never read in host order by accident.
#pragma once

#include <cstddef>
#include <cstdint>

namespace softverbs::roce {

template <size_t N>
struct BigEndian {
  static_assert(N >= 1 && N <= 8);
  uint8_t bytes[N];

  constexpr uint64_t get() const {
    uint64_t v = 0;
    for (size_t i = 0; i < N; ++i) v = (v << 8) | bytes[i];
    return v;
  }
  // Keeps the low N bytes of v.
  constexpr void set(uint64_t v) {
    for (size_t i = N; i-- > 0;) {
      bytes[i] = static_cast<uint8_t>(v);
      v >>= 8;
    }
  }
};

using Be16 = BigEndian<2>;
using Be24 = BigEndian<3>;
using Be32 = BigEndian<4>;
using Be64 = BigEndian<8>;
static_assert(sizeof(Be16) == 2 && alignof(Be16) == 1);
static_assert(sizeof(Be24) == 3 && alignof(Be24) == 1);
static_assert(sizeof(Be32) == 4 && alignof(Be32) == 1);
static_assert(sizeof(Be64) == 8 && alignof(Be64) == 1);

}  // namespace softverbs::roce
