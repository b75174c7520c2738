#include "abi/ibverbs/mlx5_alloc_type.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>

#include "abi/ibverbs/reject.h"
#include "common/personality.h"

namespace softverbs::provider {

namespace {

// One 2 MiB huge page, taken and given back as libmlx5's alloc_huge_buf
// takes one.
bool HugePageAvailable() {
  constexpr size_t kHugePage = 2u << 20;
  const int id = shmget(IPC_PRIVATE, kHugePage, SHM_HUGETLB | IPC_CREAT | SHM_R | SHM_W);
  if (id < 0) return false;
  shmctl(id, IPC_RMID, nullptr);
  return true;
}

}  // namespace

int CheckMlx5AllocType(const char* component, const char* verb) {
  if (ActivePersonality().personality != Personality::kMlx5) return 0;
  char name[32];
  snprintf(name, sizeof(name), "MLX_%s_ALLOC_TYPE", component);
  const char* type = getenv(name);
  if (!type || strcmp(type, "HUGE") != 0 || HugePageAvailable()) return 0;
  return Reject(ENOMEM, "%s: %s=HUGE, but no huge page can be had (shmget SHM_HUGETLB: %s)", verb,
                name, strerror(errno));
}

}  // namespace softverbs::provider
