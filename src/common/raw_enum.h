// A C enum field of a caller's struct, read as the integer it holds.
//
// C++ may load an enum object only if its value lies in the enum's range
// (the smallest bit-field that holds every enumerator). Applications - and
// fuzzers - put anything in ibv_qp_attr.qp_state, ibv_send_wr.opcode and
// the like, so client input is read as bytes, checked as an integer, and
// used as the enum only after the check (the UBSan build, ctest
// sanitize.integration, aborts on the other way round).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace softverbs {

template <typename E>
uint32_t RawEnum(const E& field) {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(uint32_t));
  uint32_t v;
  memcpy(&v, &field, sizeof(v));
  return v;
}

}  // namespace softverbs
