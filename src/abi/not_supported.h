// The "not supported" answers of the drop-in libraries' weak stubs, one per
// return convention of the real libraries (docs/abi.md). errno is set in all
// of them, since many callers print strerror(errno) whatever the convention.
// Each also says so on the log channel (SOFTVERBS_LOG): "<fn> is not
// supported by softverbs", where <fn> is the calling stub, found by
// __builtin_FUNCTION() as a default argument, so the stubs stay one-liners.
#pragma once

#include <cerrno>
#include <cstddef>

#include "abi/ibverbs/reject.h"

// A weak, exported definition: a real implementation elsewhere in the same
// library replaces it at link time.
#define SOFTVERBS_WEAK_EXPORT __attribute__((weak, visibility("default")))

namespace softverbs::abi {

// "Returns the errno value" (most int-returning verbs).
inline int ErrnoValueNotSupported(const char* fn = __builtin_FUNCTION()) {
  return Reject(EOPNOTSUPP, "%s is not supported by softverbs", fn);
}

// "Returns -1 and sets errno".
inline int MinusOneNotSupported(const char* fn = __builtin_FUNCTION()) {
  return RejectMinusOne(EOPNOTSUPP, "%s is not supported by softverbs", fn);
}

// "Returns NULL and sets errno".
inline std::nullptr_t NullNotSupported(const char* fn = __builtin_FUNCTION()) {
  return RejectNull(EOPNOTSUPP, "%s is not supported by softverbs", fn);
}

}  // namespace softverbs::abi
