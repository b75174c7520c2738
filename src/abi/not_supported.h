// The "not supported" answers of the drop-in libraries' weak stubs, one per
// return convention of the real libraries (docs/abi.md). errno is set in all
// of them, since many callers print strerror(errno) whatever the convention.
#pragma once

#include <cerrno>
#include <cstddef>

// A weak, exported definition: a real implementation elsewhere in the same
// library replaces it at link time.
#define SOFTVERBS_WEAK_EXPORT __attribute__((weak, visibility("default")))

namespace softverbs::abi {

// "Returns the errno value" (most int-returning verbs).
inline int ErrnoValueNotSupported() {
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

// "Returns -1 and sets errno".
inline int MinusOneNotSupported() {
  errno = EOPNOTSUPP;
  return -1;
}

// "Returns NULL and sets errno".
inline std::nullptr_t NullNotSupported() {
  errno = EOPNOTSUPP;
  return nullptr;
}

}  // namespace softverbs::abi
