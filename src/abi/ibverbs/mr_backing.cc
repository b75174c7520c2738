#include "abi/ibverbs/mr_backing.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <utility>
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

// One line of /proc/self/maps.
struct MapRange {
  uint64_t start;
  uint64_t end;
  bool readable;
  bool writable;
  bool anonymous;  // private anonymous memory: a page never touched reads as zeros
};

std::vector<MapRange> ReadSelfMaps() {
  std::vector<MapRange> out;
  FILE* f = fopen("/proc/self/maps", "re");
  if (!f) return out;
  char line[512];
  while (fgets(line, sizeof(line), f)) {
    unsigned long long start = 0, end = 0, inode = 0;
    char perms[8] = {};
    char path[256] = {};
    if (sscanf(line, "%llx-%llx %7s %*s %*s %llu %255s", &start, &end, perms, &inode, path) < 4) {
      continue;
    }
    const bool anonymous = inode == 0 && perms[3] == 'p' && (path[0] == 0 || path[0] == '[');
    out.push_back({start, end, perms[0] == 'r', perms[1] == 'w', anonymous});
    // A line longer than the buffer: skip its remainder.
    while (!strchr(line, '\n') && fgets(line, sizeof(line), f)) {
    }
  }
  fclose(f);
  return out;
}

// Whether [begin, end) lies in mappings that all satisfy pred.
template <typename Pred>
bool RangeCovered(const std::vector<MapRange>& maps, uint64_t begin, uint64_t end, Pred pred) {
  uint64_t at = begin;
  for (const MapRange& m : maps) {  // sorted by address
    if (m.end <= at) continue;
    if (m.start > at || !pred(m)) return false;
    at = m.end;
    if (at >= end) return true;
  }
  return at >= end;
}

// Pages of [begin, end) that hold data, as runs of page indexes [first, last).
// /proc/self/pagemap: bit 63 present, bit 62 swapped. Only for anonymous
// memory; nullopt when pagemap cannot be read.
std::optional<std::vector<std::pair<uint64_t, uint64_t>>> PagesWithData(uint64_t begin,
                                                                        uint64_t end,
                                                                        uint64_t page) {
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  std::vector<uint64_t> entries(4096);
  const uint64_t pages = (end - begin) / page;
  for (uint64_t i = 0; i < pages; i += entries.size()) {
    const uint64_t n = std::min<uint64_t>(entries.size(), pages - i);
    const off_t at = static_cast<off_t>((begin / page + i) * sizeof(uint64_t));
    if (pread(fd, entries.data(), n * sizeof(uint64_t), at) !=
        static_cast<ssize_t>(n * sizeof(uint64_t))) {
      close(fd);
      return std::nullopt;
    }
    for (uint64_t j = 0; j < n; ++j) {
      if (!(entries[j] & (3ull << 62))) continue;
      if (!runs.empty() && runs.back().second == i + j) {
        runs.back().second++;
      } else {
        runs.push_back({i + j, i + j + 1});
      }
    }
  }
  close(fd);
  return runs;
}

// Copies [begin, end) into a new memfd and maps it over the same addresses.
// Only pages that hold data are copied (and allocated in the memfd): a
// large buffer that was never touched costs neither time nor memory.
int CreateBacking(uint64_t begin, uint64_t end, bool anonymous) {
  const size_t size = end - begin;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
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
  std::vector<std::pair<uint64_t, uint64_t>> runs{{0, size / page}};
  if (anonymous) {
    if (auto with_data = PagesWithData(begin, end, page)) runs = std::move(*with_data);
  }
  for (auto [first, last] : runs) {
    char* dst = static_cast<char*>(scratch) + first * page;
    const size_t bytes = (last - first) * page;
#ifdef MADV_POPULATE_WRITE
    madvise(dst, bytes, MADV_POPULATE_WRITE);  // much faster than first-touch faults
#endif
    memcpy(dst, reinterpret_cast<void*>(begin + first * page), bytes);
  }
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
  // Only read-write memory is backed: remapping would make read-only pages
  // writable. The rest is reached through /proc/self/mem.
  const std::vector<MapRange> maps = ReadSelfMaps();
  if (!RangeCovered(maps, begin, end, [](const MapRange& m) { return m.readable && m.writable; })) {
    return {};
  }
  const bool anonymous =
      RangeCovered(maps, begin, end, [](const MapRange& m) { return m.anonymous; });
  int fd = CreateBacking(begin, end, anonymous);
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

bool MemoryIsAccessible(uintptr_t addr, size_t length, bool need_write) {
  if (addr + length < addr) return false;
  return RangeCovered(ReadSelfMaps(), addr, addr + length,
                      [&](const MapRange& m) { return m.readable && (m.writable || !need_write); });
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
