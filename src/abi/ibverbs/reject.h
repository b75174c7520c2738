// Rejections that explain themselves. Every path on which a verb refuses its
// input (or cannot do what it was asked) returns through one of these, which
// writes one line on the log channel (common/log.h, SOFTVERBS_LOG) naming the
// verb and the rule that was broken, then answers in the verb's convention:
//
//   return Reject(EINVAL, "ibv_modify_srq: attr is NULL");         // errno value
//   return RejectMinusOne(EINVAL, "ibv_query_gid: ...");            // -1 + errno
//   return RejectNull(EINVAL, "ibv_create_qp: attr is NULL");       // NULL + errno
//   return RejectErrno(EINVAL, "mlx5dv_init_obj: ...");             // errno value + errno
//
// They are cold and out of line, so the success paths of post and poll gain
// no work: the formatting happens only when a call is rejected, and nothing
// is formatted while the channel is off beyond the cached "enabled" check.
// Usable from every drop-in library: the line goes through libibverbs'
// softverbs_vlog, one sink per process.
#pragma once

#include <cerrno>
#include <cstdarg>
#include <cstddef>

#include "abi/ibverbs/softverbs_private.h"

#define SOFTVERBS_REJECT_ATTRS __attribute__((cold, noinline, format(printf, 2, 3)))

namespace softverbs::abi {

// Explains and returns err; errno is left alone ("returns the errno value").
SOFTVERBS_REJECT_ATTRS inline int Reject(int err, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  softverbs_vlog(fmt, ap);
  va_end(ap);
  return err;
}

// Explains, sets errno and returns -1.
SOFTVERBS_REJECT_ATTRS inline int RejectMinusOne(int err, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  softverbs_vlog(fmt, ap);
  va_end(ap);
  errno = err;
  return -1;
}

// Explains, sets errno and returns NULL (converts to any pointer type).
SOFTVERBS_REJECT_ATTRS inline std::nullptr_t RejectNull(int err, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  softverbs_vlog(fmt, ap);
  va_end(ap);
  errno = err;
  return nullptr;
}

// Explains, sets errno and returns err (mlx5dv's convention: the errno value,
// with errno set for callers that print it).
SOFTVERBS_REJECT_ATTRS inline int RejectErrno(int err, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  softverbs_vlog(fmt, ap);
  va_end(ap);
  errno = err;
  return err;
}

}  // namespace softverbs::abi

namespace softverbs::provider {
using abi::Reject;
using abi::RejectErrno;
using abi::RejectMinusOne;
using abi::RejectNull;
}  // namespace softverbs::provider
