#include "abi/ibverbs/live_mr_ranges.h"

#include <pthread.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "common/no_destructor.h"

namespace softverbs::provider {
namespace {

std::mutex g_mutex;
// begin -> end of every live MR (the same range once per MR).
NoDestructor<std::multimap<uint64_t, uint64_t>> g_ranges;
// The longest range ever noted: a range that covers `at` begins at most
// this far below it. Never shrinks (a longer look is only slower).
uint64_t g_longest = 0;
int64_t g_umems = 0;

// Fork: the child has none of the parent's MRs or umems.
void LockForFork() {
  g_mutex.lock();
}
void UnlockInParent() {
  g_mutex.unlock();
}
void ForgetInChild() {
  g_ranges->clear();
  g_longest = 0;
  g_umems = 0;
  g_mutex.unlock();
}

void InstallForkHandlers() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(LockForFork, UnlockInParent, ForgetInChild); });
}

}  // namespace

void NoteMrRange(uint64_t addr, uint64_t length) {
  InstallForkHandlers();
  std::lock_guard lock(g_mutex);
  const uint64_t end = addr + length < addr ? UINT64_MAX : addr + length;
  g_ranges->emplace(addr, end);
  g_longest = std::max(g_longest, end - addr);
}

void ForgetMrRange(uint64_t addr, uint64_t length) {
  std::lock_guard lock(g_mutex);
  const uint64_t end = addr + length < addr ? UINT64_MAX : addr + length;
  auto [first, last] = g_ranges->equal_range(addr);
  for (auto it = first; it != last; ++it) {
    if (it->second == end) {
      g_ranges->erase(it);
      return;
    }
  }
}

void NoteUmems(int delta) {
  InstallForkHandlers();
  std::lock_guard lock(g_mutex);
  g_umems += delta;
}

bool AnyMrCovers(uint64_t begin, uint64_t end) {
  std::lock_guard lock(g_mutex);
  if (g_umems > 0) return true;
  const uint64_t from = begin > g_longest ? begin - g_longest : 0;
  for (auto it = g_ranges->lower_bound(from); it != g_ranges->end() && it->first < end; ++it) {
    if (it->second > begin) return true;
  }
  return false;
}

}  // namespace softverbs::provider
