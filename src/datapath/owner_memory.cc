#include "datapath/owner_memory.h"

#include <errno.h>
#include <unistd.h>

#include <atomic>
#include <optional>

#include "datapath/bounded_wait.h"
#include "datapath/placement_order.h"

namespace softverbs::datapath {

namespace {

std::atomic<bool> g_wait_for_conversions{false};

// Moves n bytes with io(done, left) -> what pread/pwrite return, going on
// after a short count and, where this process waits for conversions, after
// EIO until kOwnerMemorySettleMs have passed.
template <typename Io>
bool Transfer(uint64_t n, Io io) {
  std::optional<BoundedWait> wait;  // started at the first failure: none on the fast path
  for (uint64_t done = 0; done < n;) {
    const ssize_t k = io(done, n - done);
    if (k > 0) {
      done += static_cast<uint64_t>(k);
      continue;
    }
    if (k == 0) {
      errno = ESRCH;  // the owner's address space is gone
      return false;
    }
    if (errno == EINTR) continue;
    if (errno != EIO || !g_wait_for_conversions.load(std::memory_order_relaxed)) return false;
    if (!wait) wait.emplace(kOwnerMemorySettleMs);
    if (!wait->Pause()) {
      errno = EIO;
      return false;
    }
  }
  return true;
}

}  // namespace

void WaitForOwnerConversions(bool wait) {
  g_wait_for_conversions.store(wait, std::memory_order_relaxed);
}

bool WaitsForOwnerConversions() {
  return g_wait_for_conversions.load(std::memory_order_relaxed);
}

bool ReadOwnerMemory(int fd, void* buf, uint64_t n, uint64_t va) {
  auto* out = static_cast<uint8_t*>(buf);
  return Transfer(n, [&](uint64_t done, uint64_t left) {
    return pread(fd, out + done, left, static_cast<off_t>(va + done));
  });
}

bool WriteOwnerMemory(int fd, const void* buf, uint64_t n, uint64_t va) {
  const auto* in = static_cast<const uint8_t*>(buf);
  const auto write = [&](uint64_t first, uint64_t count) {
    return Transfer(count, [&](uint64_t done, uint64_t left) {
      return pwrite(fd, in + first + done, left, static_cast<off_t>(va + first + done));
    });
  };
  // The last word in a write of its own, after the rest: the kernel's copy
  // into the page has no order of its own (placement_order.h).
  if (n <= kOrderedLastWord) return write(0, n);
  return write(0, n - kOrderedLastWord) && write(n - kOrderedLastWord, kOrderedLastWord);
}

}  // namespace softverbs::datapath
