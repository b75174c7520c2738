#include "verbs/mr_rules.h"

#include <errno.h>
#include <infiniband/verbs.h>

#include <cstdio>

namespace softverbs::verbs {

uint32_t SupportedMrAccess() {
  return IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
         IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
         IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING |
         IBV_ACCESS_OPTIONAL_RANGE;
}

MrRuleVerdict CheckMrRange(uint64_t addr, uint64_t length, uint64_t max_mr_size) {
  if (length == 0) return {EINVAL, "MR length is 0"};
  if (length > max_mr_size) {
    return {EINVAL, "MR length " + std::to_string(length) + " is above max_mr_size " +
                        std::to_string(max_mr_size)};
  }
  if (addr + length < addr) return {EINVAL, "MR range wraps around"};
  return {};
}

MrRuleVerdict CheckMrAccess(uint32_t access) {
  if (access & ~SupportedMrAccess()) {
    char hex[16];
    snprintf(hex, sizeof(hex), "%#x", access);
    return {EINVAL, std::string("access flags ") + hex + " contain bits no MR may carry"};
  }
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(access & IBV_ACCESS_LOCAL_WRITE)) {
    return {EINVAL, "IBV_ACCESS_REMOTE_WRITE/REMOTE_ATOMIC require IBV_ACCESS_LOCAL_WRITE"};
  }
  return {};
}

bool IsImplicitOdp(uint64_t addr, uint64_t length, uint32_t access) {
  return addr == 0 && length == UINT64_MAX && (access & IBV_ACCESS_ON_DEMAND);
}

MrRuleVerdict CheckMrRegistration(uint64_t addr, uint64_t length, uint32_t access,
                                  uint64_t max_mr_size) {
  if (MrRuleVerdict v = CheckMrAccess(access); !v.ok()) return v;
  if (IsImplicitOdp(addr, length, access)) return {};
  return CheckMrRange(addr, length, max_mr_size);
}

uint32_t SupportedUmemAccess() {
  return IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
}

MrRuleVerdict CheckUmemRegistration(uint64_t addr, uint64_t size, uint32_t access) {
  if (access & ~SupportedUmemAccess()) {
    return {EINVAL, "only LOCAL_WRITE, REMOTE_WRITE and REMOTE_READ are allowed"};
  }
  if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
    return {EINVAL, "REMOTE_WRITE needs LOCAL_WRITE"};
  }
  if (size == 0) return {EINVAL, "size is 0"};
  if (addr + size < addr) return {EINVAL, "range wraps around"};
  return {};
}

}  // namespace softverbs::verbs
