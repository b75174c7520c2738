// Rejections that explain themselves. Every path on which a verb refuses its
// input (or cannot do what it was asked) returns through one of these, which
// writes one line on the log channel (common/log.h, SOFTVERBS_LOG) naming the
// verb and the rule that was broken, then answers in the verb's convention:
//
//   return Reject(EINVAL, "ibv_modify_srq: attr is NULL");         // errno value
//   return RejectMinusOne(EINVAL, "ibv_query_gid: ...");            // -1 + errno
//   return RejectNull(EINVAL, "ibv_create_qp: attr is NULL");       // NULL + errno
//
// errno is set in all three: under rdma-core a verb that returns the errno
// value has errno set too when the kernel refused its command (the failed
// write or ioctl), and programs print strerror(errno) after one.
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

// Explains only, errno untouched: for a refusal whose answer follows a
// convention of its own (rdma_getaddrinfo's EAI_* codes).
__attribute__((cold, noinline, format(printf, 1, 2))) inline void Explain(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  softverbs_vlog(fmt, ap);
  va_end(ap);
}

// Explains, sets errno and returns err ("returns the errno value").
SOFTVERBS_REJECT_ATTRS inline int Reject(int err, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  softverbs_vlog(fmt, ap);
  va_end(ap);
  errno = err;
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

}  // namespace softverbs::abi

namespace softverbs::provider {
using abi::Reject;
using abi::RejectMinusOne;
using abi::RejectNull;
}  // namespace softverbs::provider
