#include "abi/ibverbs/mr_backing.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "abi/ibverbs/self_maps.h"
#include "common/log.h"

namespace softverbs::provider {

extern std::atomic<bool> g_fork_initialized;  // fork.cc

namespace {

// A backing: [begin, end) of this process maps `fd` from offset 0. It stays
// in the registry after its last MR is gone (refs 0, "idle"), so that
// registering the range again, as MPI and UCX do for every large message,
// finds it converted: no copy and no new memfd. Before any reuse the
// mapping is checked (SelfMaps: still this memfd at the same offsets, read
// and write), so memory the application unmapped and mapped anew is never
// mistaken for the backing.
struct Backing {
  uint64_t id;
  uint64_t begin;
  uint64_t end;
  int fd;
  int refs;        // MRs using it; 0: idle, kept for the next registration
  bool detached;   // its range maps something else now: only its MRs know it
  uint64_t inode;  // of the memfd, to recognise its mapping
  uint32_t dev_major;
  uint32_t dev_minor;
  uint64_t last_used;  // registry clock, for dropping the least recently used idle ones
};

std::mutex g_mutex;
std::vector<Backing> g_backings;
uint64_t g_next_id = 1;
uint64_t g_clock = 0;

// What idle backings may hold. An idle backing's memfd keeps its pages even
// if the application unmapped the range (its mapping is what the application
// sees; the descriptor is what keeps them), so the cache is bounded, and a
// few idle entries are re-checked whenever a new backing is made (stale ones
// dropped).
constexpr size_t kMaxIdleBackings = 256;
constexpr uint64_t kMaxIdleBytes = 256ull << 20;
constexpr int kIdleChecksPerBacking = 4;

uint64_t PageSize() {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// The backing's own calls to mmap, munmap and madvise go straight to the
// kernel: an application that hooks those libc functions to track its
// memory (UCX's ucm, for its registration cache) must not take the remap of
// a range onto its backing, which keeps every byte where it was, for an
// unmap of the application's memory.
void* RawMmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  const long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
  if (r < 0 && r > -4096) {
    errno = static_cast<int>(-r);
    return MAP_FAILED;
  }
  return reinterpret_cast<void*>(r);
}

int RawMadvise(void* addr, size_t len, int advice) {
  return static_cast<int>(syscall(SYS_madvise, addr, len, advice));
}

// /proc/self/pagemap, opened once (reopened in a forked child, whose pages
// it must describe).
std::atomic<int> g_pagemap_fd{-1};

void ForgetPagemapInChild() {
  const int fd = g_pagemap_fd.exchange(-1);
  if (fd >= 0) close(fd);
}

int PagemapFd() {  // under g_mutex
  int fd = g_pagemap_fd.load();
  if (fd >= 0) return fd;
  static std::once_flag atfork_once;
  std::call_once(atfork_once, [] { pthread_atfork(nullptr, nullptr, ForgetPagemapInChild); });
  fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) g_pagemap_fd.store(fd);
  return fd;
}

// Pages of [begin, end) that hold data, as runs of page indexes [first, last).
// /proc/self/pagemap: bit 63 present, bit 62 swapped. Only for anonymous
// memory; nullopt when pagemap cannot be read.
std::optional<std::vector<std::pair<uint64_t, uint64_t>>> PagesWithData(uint64_t begin,
                                                                        uint64_t end) {
  const uint64_t page = PageSize();
  const int fd = PagemapFd();
  if (fd < 0) return std::nullopt;
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  std::vector<uint64_t> entries(std::min<uint64_t>(4096, (end - begin) / page));
  const uint64_t pages = (end - begin) / page;
  for (uint64_t i = 0; i < pages; i += entries.size()) {
    const uint64_t n = std::min<uint64_t>(entries.size(), pages - i);
    const off_t at = static_cast<off_t>((begin / page + i) * sizeof(uint64_t));
    if (pread(fd, entries.data(), n * sizeof(uint64_t), at) !=
        static_cast<ssize_t>(n * sizeof(uint64_t))) {
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
  return runs;
}

// Writes [from, from+bytes) of this process into the memfd at offset `at`.
// The range is whole pages, which hold bytes of other objects than the
// buffer registered (and, in a program built with AddressSanitizer, its
// red zones): the raw system call, not libc's pwrite, which a sanitizer
// checks as if the range were one object of the program's.
bool CopyIntoFile(int fd, const char* from, size_t bytes, off_t at) {
  while (bytes > 0) {
    const ssize_t n = syscall(SYS_pwrite64, fd, from, bytes, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    from += n;
    at += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

// Where the backings' descriptors live: above the application's. Each
// backing holds a descriptor while it lives (in use, or idle), and an
// application registering many ranges would otherwise find its own
// descriptors taken (EMFILE at its soft RLIMIT_NOFILE) and its registrations
// unbacked. So a backing's descriptor is moved at or above the larger of
// FD_SETSIZE and the soft limit the process had at its first registration,
// and the soft limit - never the hard one - is raised, kDescriptorStep at a
// time, to make room there. The application keeps every descriptor its own
// limit gave it, all below FD_SETSIZE if they were (select() works on
// them); it is handed descriptors above its old limit only where it would
// have had EMFILE instead. Where there is no room above the floor (the
// hard limit is not above it: soft and hard limits equal, as in some
// containers) the descriptor stays where memfd_create put it.
constexpr rlim_t kDescriptorStep = 1024;

struct DescriptorFloor {
  rlim_t floor = FD_SETSIZE;
  bool room_above = false;  // the hard limit was above the floor
};

const DescriptorFloor& Floor() {  // under g_mutex
  static const DescriptorFloor f = [] {
    DescriptorFloor d;
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return d;
    if (limit.rlim_cur != RLIM_INFINITY) d.floor = std::max<rlim_t>(d.floor, limit.rlim_cur);
    d.room_above = limit.rlim_max > d.floor;
    return d;
  }();
  return f;
}

// Raises the soft RLIMIT_NOFILE to make room above the floor. Whether it did.
bool RaiseSoftDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return false;
  const rlim_t base = std::max(limit.rlim_cur, Floor().floor);
  limit.rlim_cur =
      limit.rlim_max - base < kDescriptorStep ? limit.rlim_max : base + kDescriptorStep;
  return setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

// Moves fd at or above the floor (closing the original). Answers the
// descriptor to use: fd itself when there is no room above the floor.
int MoveAboveApplication(int fd) {
  if (!Floor().room_above) return fd;
  const int floor = static_cast<int>(std::min<rlim_t>(Floor().floor, INT32_MAX));
  if (fd >= floor) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, floor);
  if (moved < 0 && (errno == EINVAL || errno == EMFILE) && RaiseSoftDescriptorLimit()) {
    moved = fcntl(fd, F_DUPFD_CLOEXEC, floor);
  }
  if (moved < 0) return fd;
  close(fd);
  return moved;
}

// Copies [begin, end) into a new memfd and maps it over the same addresses.
// Only pages that hold data are copied (and allocated in the memfd): a
// large buffer that was never touched costs neither time nor memory. The
// copy is a pwrite from the range itself (one pass, no second mapping to
// fault in and tear down); the pages that hold data are then mapped at once:
// the application touched them before, and without it its next touch of
// each page would fault again (about 3 us a page here). They are populated
// for reading (MADV_POPULATE_READ), which maps them writable all the same -
// a shared mapping of shmem needs no write notification, so its page
// protection is writable from the first fault - and lets the kernel map the
// pages around each one in the same fault (fault-around, 16 by default),
// where populating for writing faults page by page (1 MiB: 123 -> 69 us).
int CreateBacking(uint64_t begin, uint64_t end, bool anonymous) {
  const size_t size = end - begin;
  const uint64_t page = PageSize();
  int fd = memfd_create("softverbs-mr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  // Every descriptor below the soft limit is taken: room above it (the
  // descriptor is moved there at once).
  if (fd < 0 && errno == EMFILE && RaiseSoftDescriptorLimit()) {
    fd = memfd_create("softverbs-mr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  }
  if (fd < 0) return -1;
  fd = MoveAboveApplication(fd);
  // Peers and the device map it: nobody may shrink it under them (SIGBUS);
  // the device refuses a backing without this seal.
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    close(fd);
    return -1;
  }
  std::vector<std::pair<uint64_t, uint64_t>> runs{{0, size / page}};
  if (anonymous) {
    if (auto with_data = PagesWithData(begin, end)) runs = std::move(*with_data);
  }
  for (auto [first, last] : runs) {
    if (!CopyIntoFile(fd, reinterpret_cast<const char*>(begin + first * page),
                      (last - first) * page, static_cast<off_t>(first * page))) {
      close(fd);
      return -1;
    }
  }
  void* placed = RawMmap(reinterpret_cast<void*>(begin), size, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_FIXED, fd, 0);
  if (placed == MAP_FAILED) {
    close(fd);
    return -1;
  }
#ifdef MADV_POPULATE_READ
  for (auto [first, last] : runs) {
    RawMadvise(reinterpret_cast<void*>(begin + first * page), (last - first) * page,
               MADV_POPULATE_READ);
  }
#endif
  if (g_fork_initialized) RawMadvise(placed, size, MADV_DONTFORK);
  return fd;
}

// Whether [begin, end) still maps b's memfd at b's offsets, readable and
// writable.
bool StillMapped(SelfMaps& maps, const Backing& b, uint64_t begin, uint64_t end) {
  return maps.Covered(begin, end, [&](const Vma& v) {
    return v.shared && v.readable && v.writable && v.inode == b.inode &&
           v.dev_major == b.dev_major && v.dev_minor == b.dev_minor &&
           v.start - v.offset == b.begin;
  });
}

// Forgets entry i (under g_mutex). Its mapping, if any, stays: the
// application's memory.
void Drop(size_t i) {
  close(g_backings[i].fd);
  g_backings.erase(g_backings.begin() + static_cast<std::ptrdiff_t>(i));
}

// An entry whose range no longer maps it: idle ones are dropped, used ones
// stay for their MRs but are no longer found by address.
void Detach(size_t i) {
  if (g_backings[i].refs == 0) {
    Drop(i);
  } else {
    g_backings[i].detached = true;
  }
}

// Forgets every idle entry (their pages stay mapped: the application's
// memory) and answers how many: for a process out of file descriptors,
// whose next registration needs one more than the cache of idle ranges
// holds.
size_t DropAllIdle() {
  size_t dropped = 0;
  for (size_t i = 0; i < g_backings.size();) {
    if (g_backings[i].refs == 0) {
      Drop(i);
      ++dropped;
    } else {
      ++i;
    }
  }
  return dropped;
}

// Keeps the idle entries within bounds, least recently used out first.
void TrimIdle() {
  for (;;) {
    size_t idle = 0, oldest = g_backings.size();
    uint64_t bytes = 0;
    for (size_t i = 0; i < g_backings.size(); ++i) {
      const Backing& b = g_backings[i];
      if (b.refs != 0) continue;
      ++idle;
      bytes += b.end - b.begin;
      if (oldest == g_backings.size() || b.last_used < g_backings[oldest].last_used) oldest = i;
    }
    if (idle <= kMaxIdleBackings && bytes <= kMaxIdleBytes) return;
    Drop(oldest);
  }
}

// Checks a few idle entries again (round robin) and drops those whose range
// maps something else now, so that the pages of ranges the application
// unmapped are not held for long. Called when a new backing is made (when
// memory grows), not on the cheap paths (reuse, dereg).
void CheckSomeIdle(SelfMaps& maps) {
  static size_t next_check = 0;
  for (int n = 0; n < kIdleChecksPerBacking && !g_backings.empty(); ++n) {
    const size_t i = next_check++ % g_backings.size();
    const Backing& b = g_backings[i];
    if (b.refs == 0 && !StillMapped(maps, b, b.begin, b.end)) Drop(i);
  }
}

// Fork. An idle backing's range is memory no MR registers any more, yet it
// is MAP_SHARED: a child would share it with its parent - the heap included,
// whose allocator then corrupts both. Before fork every idle range that
// still maps its memfd is mapped again MAP_PRIVATE from the same memfd: the
// same bytes (nothing copied, and no write lost: the page tables switch in
// one mmap), but copy-on-write in parent and child as fork promises; the
// entry is dropped (its pages are private now). Ranges of live MRs stay
// shared (docs/datapath.md, "Fork").
void PrivatizeIdleBeforeFork() {
  g_mutex.lock();  // released by AfterForkInParent / AfterForkInChild
  SelfMaps maps;
  for (size_t i = g_backings.size(); i-- > 0;) {
    const Backing& b = g_backings[i];
    if (b.refs != 0 || b.detached) continue;
    if (StillMapped(maps, b, b.begin, b.end)) {
      RawMmap(reinterpret_cast<void*>(b.begin), b.end - b.begin, PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_FIXED, b.fd, 0);
      maps.Forget();
    }
    Drop(i);
  }
}

// Live MRs' ranges (MAP_SHARED over their memfd) are copied just before
// fork into private snapshots that the child maps over the ranges, as the
// kernel gives a child copies of pinned pages (Linux 5.13 and later): the
// child has none of the parent's MRs, and its writes there - a heap
// buffer's neighbours, the allocator's own metadata - must not reach the
// parent, nor the parent's later ones reach it. With ibv_fork_init the
// ranges are MADV_DONTFORK: the child gets nothing there, nothing to copy.
struct Snapshot {
  uint64_t begin;
  size_t len;
  void* copy;
};
std::vector<Snapshot> g_snapshots;  // between the prepare and the parent/child handlers

void SnapshotLiveRanges() {
  g_snapshots.clear();
  if (g_fork_initialized) return;
  for (const Backing& b : g_backings) {
    if (b.detached || b.refs == 0) continue;
    const size_t len = b.end - b.begin;
    void* copy = RawMmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED) continue;  // this range stays shared: no better choice
    memcpy(copy, reinterpret_cast<const void*>(b.begin), len);
    g_snapshots.push_back({b.begin, len, copy});
  }
}

void BeforeFork() {
  PrivatizeIdleBeforeFork();  // takes g_mutex
  SnapshotLiveRanges();
}

void AfterForkInParent() {
  for (const Snapshot& s : g_snapshots) syscall(SYS_munmap, s.copy, s.len);
  g_snapshots.clear();
  g_mutex.unlock();
}

void AfterForkInChild() {
  for (const Snapshot& s : g_snapshots) {
    if (syscall(SYS_mremap, s.copy, s.len, s.len, MREMAP_MAYMOVE | MREMAP_FIXED, s.begin) == -1) {
      syscall(SYS_munmap, s.copy, s.len);
    }
  }
  g_snapshots.clear();
  for (const Backing& b : g_backings) close(b.fd);
  g_backings.clear();  // the child registered nothing
  g_mutex.unlock();
}

void InstallForkHandlers() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(BeforeFork, AfterForkInParent, AfterForkInChild); });
}

}  // namespace

MrBacking AcquireMrBacking(SelfMaps& maps, void* addr, size_t length) {
  InstallForkHandlers();
  const uint64_t page = PageSize();
  const uint64_t start = reinterpret_cast<uint64_t>(addr);
  const uint64_t begin = (start + page - 1) & ~(page - 1);
  const uint64_t end = (start + length) & ~(page - 1);
  if (end <= begin) return {};
  std::lock_guard lock(g_mutex);
  for (size_t i = 0; i < g_backings.size();) {
    Backing& b = g_backings[i];
    if (b.detached || b.end <= begin || end <= b.begin) {
      ++i;
      continue;
    }
    if (!StillMapped(maps, b, std::max(b.begin, begin), std::min(b.end, end))) {
      Detach(i);  // the application remapped (part of) it
      continue;
    }
    if (b.begin <= begin && end <= b.end) {
      b.refs++;
      b.last_used = ++g_clock;
      return {b.id, b.fd, begin, end, begin - b.begin};
    }
    if (b.refs == 0) {
      // An idle backing in the way: forget it (its pages stay mapped and
      // are copied into the new backing like any others).
      Drop(i);
      continue;
    }
    Log("ibv_reg_mr: [%#llx, %#llx) overlaps another registration's pages without covering "
        "them; peers reach it through /proc/self/mem (slower)",
        static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end));
    return {};
  }
  // Only read-write memory is backed: remapping would make read-only pages
  // writable. The rest is reached through /proc/self/mem.
  if (!maps.Covered(begin, end, [](const Vma& v) { return v.readable && v.writable; })) {
    return {};
  }
  const bool anonymous = maps.Covered(begin, end, [](const Vma& v) { return v.anonymous(); });
  int fd = CreateBacking(begin, end, anonymous);
  if (fd < 0 && (errno == EMFILE || errno == ENFILE) && DropAllIdle() > 0) {
    // Out of descriptors at memfd_create, before any change: the ranges
    // kept converted give theirs back and the registration tries again.
    fd = CreateBacking(begin, end, anonymous);
  }
  maps.Forget();  // [begin, end) maps the memfd now
  struct stat st {};
  if (fd >= 0 && fstat(fd, &st) != 0) {
    close(fd);
    fd = -1;
  }
  if (fd < 0) {
    Log("ibv_reg_mr: cannot back [%#llx, %#llx) with shared memory: %s",
        static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end),
        strerror(errno));
    return {};
  }
  Backing b{g_next_id++,
            begin,
            end,
            fd,
            1,
            false,
            static_cast<uint64_t>(st.st_ino),
            major(st.st_dev),
            minor(st.st_dev),
            ++g_clock};
  CheckSomeIdle(maps);
  g_backings.push_back(b);
  TrimIdle();
  return {b.id, fd, begin, end, 0};
}

bool MemoryIsAccessible(SelfMaps& maps, uintptr_t addr, size_t length, bool need_write) {
  if (addr + length < addr) return false;
  return maps.Covered(addr, addr + length,
                      [&](const Vma& v) { return v.readable && (v.writable || !need_write); });
}

void ReleaseMrBacking(uint64_t id) {
  if (id == 0) return;
  std::lock_guard lock(g_mutex);
  for (size_t i = 0; i < g_backings.size(); ++i) {
    Backing& b = g_backings[i];
    if (b.id != id) continue;
    if (--b.refs == 0) {
      if (b.detached) {
        Drop(i);
      } else {
        b.last_used = ++g_clock;
      }
    }
    break;
  }
  TrimIdle();
}

}  // namespace softverbs::provider
