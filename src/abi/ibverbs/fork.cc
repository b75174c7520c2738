// Fork support. softverbs registers memory by mapping shared memory over the
// application's pages. Without ibv_fork_init a child gets private copies of
// the live MRs' ranges (mr_backing.cc), as Linux 5.13 and later give a child
// copies of pinned pages: so ibv_is_fork_initialized answers
// IBV_FORK_UNNEEDED, as libibverbs does on such a kernel. ibv_fork_init
// makes registered ranges MADV_DONTFORK as rdma-core does (the child gets
// nothing there); as in rdma-core it must come before the first
// registration (or ibv_dontfork_range) and answers EINVAL after one, and
// RDMAV_FORK_SAFE / IBV_FORK_SAFE (any value but "0") call it when the
// device list is first read.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>

#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/fork_state.h"

namespace softverbs::provider {
std::atomic<bool> g_fork_initialized{false};
namespace {
// A registration or ibv_dontfork_range came first (rdma-core's too_late).
std::atomic<bool> g_fork_too_late{false};

bool EnvSet(const char* name) {
  const char* v = getenv(name);
  return v && strcmp(v, "0") != 0;
}
}  // namespace

void NoteRangeRegistered() {
  if (!g_fork_initialized.load(std::memory_order_relaxed)) {
    g_fork_too_late.store(true, std::memory_order_relaxed);
  }
}

void ForkInitFromEnvironment() {
  if ((EnvSet("RDMAV_FORK_SAFE") || EnvSet("IBV_FORK_SAFE")) && ibv_fork_init() != 0) {
    fprintf(stderr, "libibverbs: Warning: fork()-safety requested but init failed\n");
  }
}
}  // namespace softverbs::provider

using softverbs::provider::g_fork_initialized;
using softverbs::provider::g_fork_too_late;

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
  if (g_fork_initialized) return 0;
  if (g_fork_too_late) return EINVAL;
  g_fork_initialized = true;
  return 0;
}

SV_EXPORT ibv_fork_status ibv_is_fork_initialized(void) {
  return IBV_FORK_UNNEEDED;
}

SV_EXPORT int ibv_dontfork_range(void* base, size_t size) {
  if (!g_fork_initialized) {
    softverbs::provider::NoteRangeRegistered();
    return 0;
  }
  return AdviseRange(base, size, MADV_DONTFORK);
}

SV_EXPORT int ibv_dofork_range(void* base, size_t size) {
  if (!g_fork_initialized) {
    softverbs::provider::NoteRangeRegistered();
    return 0;
  }
  return AdviseRange(base, size, MADV_DOFORK);
}
