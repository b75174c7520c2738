// The rules a memory registration must follow before any memory is touched:
// length (1..max_mr_size, no wrap-around) and access flags (known bits,
// remote write/atomic need local write, no on-demand paging). The library
// checks them before it builds the MR's shared backing (a copy of the whole
// range), the daemon checks them again as the kernel would.
#ifndef SOFTVERBS_VERBS_MR_RULES_H_
#define SOFTVERBS_VERBS_MR_RULES_H_

#include <cstdint>
#include <string>

namespace softverbs::verbs {

struct MrRuleVerdict {
  int err = 0;      // 0 or a positive errno
  std::string why;  // the rule that was broken
  bool ok() const { return err == 0; }
};

// Access bits a memory region may carry (the kernel's IB_ACCESS_SUPPORTED).
uint32_t SupportedMrAccess();

MrRuleVerdict CheckMrRange(uint64_t addr, uint64_t length, uint64_t max_mr_size);
MrRuleVerdict CheckMrAccess(uint32_t access);

// An implicit on-demand MR: ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND
// | ...) covers the whole address space (rdma-core's implicit ODP).
bool IsImplicitOdp(uint64_t addr, uint64_t length, uint32_t access);

// Range and access of a new registration: CheckMrRange and CheckMrAccess,
// except that an implicit ODP MR has no range to check.
MrRuleVerdict CheckMrRegistration(uint64_t addr, uint64_t length, uint32_t access,
                                  uint64_t max_mr_size);

// Access bits a DEVX UMEM may carry (mlx5dv_devx_umem_reg; spec §2.6).
uint32_t SupportedUmemAccess();

// Size and access of a UMEM registration, as the kernel checks them before
// it pins anything: known bits, REMOTE_WRITE needs LOCAL_WRITE
// (ib_check_mr_access), a size of at least 1 and no wrap-around
// (ib_umem_get). All EINVAL.
MrRuleVerdict CheckUmemRegistration(uint64_t addr, uint64_t size, uint32_t access);

}  // namespace softverbs::verbs

#endif  // SOFTVERBS_VERBS_MR_RULES_H_
