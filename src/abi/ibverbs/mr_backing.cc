#include "abi/ibverbs/mr_backing.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "common/log.h"
#include "datapath/shm.h"

namespace softverbs::provider {

extern std::atomic<bool> g_fork_initialized;  // fork.cc

namespace {

struct Backing {
  uint64_t id;
  uint64_t begin;
  uint64_t end;
  int fd;
  int refs;
};

std::mutex g_mutex;
std::vector<Backing> g_backings;
uint64_t g_next_id = 1;

// Copies [begin, end) into a new memfd and maps it over the same addresses.
int CreateBacking(uint64_t begin, uint64_t end) {
  const size_t size = end - begin;
  int fd = memfd_create("softverbs-mr", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    return -1;
  }
  void* scratch = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (scratch == MAP_FAILED) {
    close(fd);
    return -1;
  }
#ifdef MADV_POPULATE_WRITE
  madvise(scratch, size, MADV_POPULATE_WRITE);  // much faster than first-touch faults
#endif
  memcpy(scratch, reinterpret_cast<void*>(begin), size);
  void* placed = mmap(reinterpret_cast<void*>(begin), size, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_FIXED, fd, 0);
  munmap(scratch, size);
  if (placed == MAP_FAILED) {
    close(fd);
    return -1;
  }
  if (g_fork_initialized) madvise(placed, size, MADV_DONTFORK);
  return fd;
}

}  // namespace

MrBacking AcquireMrBacking(void* addr, size_t length) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t start = reinterpret_cast<uint64_t>(addr);
  const uint64_t begin = (start + page - 1) & ~(page - 1);
  const uint64_t end = (start + length) & ~(page - 1);
  if (end <= begin) return {};
  std::lock_guard lock(g_mutex);
  for (Backing& b : g_backings) {
    if (b.begin <= begin && end <= b.end) {
      b.refs++;
      return {b.id, b.fd, begin, end, begin - b.begin};
    }
    if (begin < b.end && b.begin < end) {
      Log("ibv_reg_mr: [%#llx, %#llx) overlaps another registration's pages without covering "
          "them; peers reach it through /proc/self/mem (slower)",
          static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end));
      return {};
    }
  }
  int fd = CreateBacking(begin, end);
  if (fd < 0) {
    Log("ibv_reg_mr: cannot back [%#llx, %#llx) with shared memory: %s",
        static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end),
        strerror(errno));
    return {};
  }
  Backing b{g_next_id++, begin, end, fd, 1};
  g_backings.push_back(b);
  return {b.id, fd, begin, end, 0};
}

void ReleaseMrBacking(uint64_t id) {
  if (id == 0) return;
  std::lock_guard lock(g_mutex);
  for (auto it = g_backings.begin(); it != g_backings.end(); ++it) {
    if (it->id != id) continue;
    if (--it->refs == 0) {
      // The pages stay mapped (the application still owns its memory); only
      // the registry forgets them.
      close(it->fd);
      g_backings.erase(it);
    }
    return;
  }
}

}  // namespace softverbs::provider
