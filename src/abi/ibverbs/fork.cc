// Fork support. softverbs registers memory by mapping shared memory over the
// application's pages; ibv_fork_init makes registered ranges MADV_DONTFORK as
// rdma-core does, so a child never shares a parent's registered pages.
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>

#include "abi/ibverbs/exports.h"

namespace softverbs::provider {
std::atomic<bool> g_fork_initialized{false};
}

using softverbs::provider::g_fork_initialized;

namespace {
int AdviseRange(void* base, size_t size, int advice) {
  const uintptr_t page = sysconf(_SC_PAGESIZE);
  uintptr_t start = reinterpret_cast<uintptr_t>(base) & ~(page - 1);
  uintptr_t end = (reinterpret_cast<uintptr_t>(base) + size + page - 1) & ~(page - 1);
  if (madvise(reinterpret_cast<void*>(start), end - start, advice) != 0) return errno;
  return 0;
}
}  // namespace

SV_EXPORT int ibv_fork_init(void) {
  g_fork_initialized = true;
  return 0;
}

SV_EXPORT ibv_fork_status ibv_is_fork_initialized(void) {
  return g_fork_initialized ? IBV_FORK_ENABLED : IBV_FORK_DISABLED;
}

SV_EXPORT int ibv_dontfork_range(void* base, size_t size) {
  return g_fork_initialized ? AdviseRange(base, size, MADV_DONTFORK) : 0;
}

SV_EXPORT int ibv_dofork_range(void* base, size_t size) {
  return g_fork_initialized ? AdviseRange(base, size, MADV_DOFORK) : 0;
}
