// Whether the calling process may use raw Ethernet: the kernel lets a
// process create a raw packet QP or a flow steering rule only with
// CAP_NET_RAW (rdma_uattrs_has_raw_cap), since both see and send the port's
// frames; softverbs asks the same, so a program that runs here runs with the
// same rights on hardware.
#pragma once

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace softverbs::provider {

inline bool HasNetRawCapability() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  return (data[CAP_NET_RAW / 32].effective & (1u << (CAP_NET_RAW % 32))) != 0;
}

}  // namespace softverbs::provider
