// One number space of the device (QP numbers, MR key indexes): a cursor
// that hands out the next number of [first, last] that is not taken,
// wrapping at the end. Verbs and DEVX draw from the same space, so a number
// is never given to two objects, and both skip what the caller says is
// taken (in use, or its data-path slot still held: docs/datapath.md).
#pragma once

#include <cstdint>

namespace softverbs::daemon {

class NumberSpace {
 public:
  constexpr NumberSpace(uint32_t first, uint32_t last) : first_(first), last_(last), next_(first) {}

  // The next number not taken (taken(n) false), or 0 when every number of
  // the space is. Looks at each number at most once.
  template <typename Taken>
  uint32_t Allocate(Taken taken) {
    for (uint64_t tries = 0; tries <= uint64_t{last_} - first_; ++tries) {
      const uint32_t n = next_;
      next_ = n >= last_ ? first_ : n + 1;
      if (!taken(n)) return n;
    }
    return 0;
  }

 private:
  uint32_t first_;
  uint32_t last_;
  uint32_t next_;
};

}  // namespace softverbs::daemon
