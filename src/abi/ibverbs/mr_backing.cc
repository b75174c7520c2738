#include "abi/ibverbs/mr_backing.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "abi/ibverbs/descriptor_floor.h"
#include "abi/ibverbs/raw_memory_calls.h"
#include "abi/ibverbs/ready_backings.h"
#include "abi/ibverbs/self_maps.h"
#include "abi/ibverbs/write_hold.h"
#include "common/log.h"
#include "common/no_destructor.h"

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
  uint64_t last_used;      // registry clock, for dropping the least recently used idle ones
  uint64_t memfd_dev = 0;  // st_dev of the memfd: with inode, its name to the device
  // The contexts (Context::keeper) whose device keeps the memfd: their
  // registrations of the range name it instead of passing it.
  std::vector<uint64_t> kept_by{};
};

std::mutex g_mutex;
NoDestructor<std::vector<Backing>> g_backings;
uint64_t g_next_id = 1;
uint64_t g_clock = 0;
// A dropped entry whose memfd a device keeps for some contexts: each of
// them tells its device (forget_backings), in batches. The library closes
// its own descriptor just before the first of them does: a device's is
// then the last, whose close frees the memfd's pages - in the daemon's
// release thread, not in the application (a few microseconds for a memfd
// of one page, 9 ms for 64 MiB; until session 33 the library closed its
// own after the devices answered, and the registration that sent the batch
// paid for freeing all of it). Not at the drop itself: a close costs about
// 0.4 us even when it is not the last, and a program that maps, registers
// and unmaps fresh buffers drops one at nearly every registration.
struct DroppedBacking {
  int fd;  // -1: closed already
  protocol::BackingName name;
  uint64_t bytes;                 // the range's
  std::vector<uint64_t> keepers;  // the contexts yet to tell their device
};
NoDestructor<std::vector<DroppedBacking>> g_dropped;
// A context tells its device once this many memfds, or bytes, wait for it:
// a program that maps, registers and unmaps a fresh buffer each time drops
// a stale range at nearly every registration, and a call each would cost
// its registrations a round trip. What waits stays allocated meanwhile,
// bounded by these.
constexpr size_t kForgetBatchNames = protocol::ForgetBackingsRequest::kMaxNames;
constexpr uint64_t kForgetBatchBytes = 16ull << 20;

// A memfd offered to the device (context keeper's) whose conversion failed:
// the device is told to forget it with the next batch (under g_mutex).
void ForgetOfferedOnFailure(int fd, uint64_t bytes, uint64_t keeper) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return;
  g_dropped->push_back(
      {-1, {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)}, bytes, {keeper}});
}

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

// The pages a range of v can be replaced in: huge pages (hugetlb) only
// whole - a remap of part of one fails with EINVAL.
uint64_t ReplaceablePage(const Vma& v) {
  return std::max(v.page_size, PageSize());
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

// A run of pages [first, last), by index in the range.
struct PageRun {
  uint64_t first;
  uint64_t last;
};

// The pages of a range to copy, as runs, and the scratch memory to find
// them, all set up before the write hold is taken (write_hold.h). While the
// hold lasts the registering thread writes only its stack (which the hold
// checks is not in the range) and these arrays: inline for a small range,
// else in a mapping of their own - not in the range, which was mapped
// already. Never the heap: a thread the hold stops may hold the allocator's
// lock, and the heap page may be in the range itself.
class PageRuns {
 public:
  explicit PageRuns(uint64_t pages)
      : pages_(pages), entry_capacity_(std::min<uint64_t>(kEntriesPerRead, pages)) {
    const uint64_t most_runs = (pages + 1) / 2;  // every other page
    if (entry_capacity_ <= kInlineEntries && most_runs <= kInlineRuns) return;
    const size_t bytes = entry_capacity_ * sizeof(uint64_t) + most_runs * sizeof(PageRun);
    void* m = RawMmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      entries_ = nullptr;  // no scan: every page is copied (All)
      return;
    }
    mapped_bytes_ = bytes;
    entries_ = static_cast<uint64_t*>(m);
    runs_ = reinterpret_cast<PageRun*>(entries_ + entry_capacity_);
  }
  ~PageRuns() {
    if (mapped_bytes_ != 0) RawMunmap(entries_, mapped_bytes_);
  }
  PageRuns(const PageRuns&) = delete;
  PageRuns& operator=(const PageRuns&) = delete;

  // Every page, one run.
  void All() {
    runs_[0] = {0, pages_};
    count_ = 1;
  }
  // The runs of the pages of the range at `begin` that hold data
  // (/proc/self/pagemap: bit 63 present, bit 62 swapped; only for anonymous
  // memory). False when pagemap cannot be read.
  bool FindPagesWithData(uint64_t begin, uint64_t page_size, int pagemap_fd) {
    if (pagemap_fd < 0 || entries_ == nullptr) return false;
    count_ = 0;
    for (uint64_t i = 0; i < pages_; i += entry_capacity_) {
      const uint64_t n = std::min<uint64_t>(entry_capacity_, pages_ - i);
      const off_t at = static_cast<off_t>((begin / page_size + i) * sizeof(uint64_t));
      if (pread(pagemap_fd, entries_, n * sizeof(uint64_t), at) !=
          static_cast<ssize_t>(n * sizeof(uint64_t))) {
        return false;
      }
      for (uint64_t j = 0; j < n; ++j) {
        if (!(entries_[j] & (3ull << 62))) continue;
        if (count_ > 0 && runs_[count_ - 1].last == i + j) {
          runs_[count_ - 1].last++;
        } else {
          runs_[count_++] = {i + j, i + j + 1};
        }
      }
    }
    return true;
  }
  // Whether one run holds every page.
  bool Whole() const { return count_ == 1 && runs_[0].first == 0 && runs_[0].last == pages_; }
  const PageRun* begin() const { return runs_; }
  const PageRun* end() const { return runs_ + count_; }

 private:
  static constexpr uint64_t kEntriesPerRead = 4096;  // pagemap entries a pread reads at most
  static constexpr uint64_t kInlineEntries = 64;
  static constexpr uint64_t kInlineRuns = 32;
  uint64_t pages_;
  uint64_t entry_capacity_;
  uint64_t inline_entries_[kInlineEntries];
  PageRun inline_runs_[kInlineRuns];
  uint64_t* entries_ = inline_entries_;
  PageRun* runs_ = inline_runs_;
  size_t count_ = 0;
  size_t mapped_bytes_ = 0;
};

// The copy's piece where the old pages are freed as it goes (CreateBacking).
constexpr uint64_t kCopyPieceBytes = 256 * 1024;

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
//
// With an offer the memfd goes to the device once the range is copied into
// it (BackingOffer), and *offered says whether it went: the device takes it
// while the range is remapped, and is awake for the registration's call
// right after (offered before the copy, it was asleep again after a copy of
// more than its spin: the call of a first registration of 1 MiB waited
// 34-44 us for its wake-up). If the conversion then fails, the device is
// told to forget it with the next batch of dropped backings (under
// g_mutex).
//
// A ready memfd (ready_backings.h) was made, sealed and offered before: it
// is used as it is (at offset 0, as a new one would be).
int CreateBacking(uint64_t begin, uint64_t end, bool anonymous, const BackingOffer* offer,
                  uint64_t keeper, bool* offered, const ReadyBacking* ready) {
  *offered = ready != nullptr;
  const size_t size = end - begin;
  const uint64_t page = PageSize();
  int fd = ready ? ready->fd : MakeSealedMemfd(size);
  if (fd < 0) return -1;
  // A failure once the hold is taken releases it first: the forgetting
  // allocates, and the range may hold the heap (write_hold.h).
  auto fail = [&] {
    if (*offered) ForgetOfferedOnFailure(fd, size, keeper);
    close(fd);
    return -1;
  };
  PageRuns pages(size / page);
  const int pagemap = anonymous ? PagemapFd() : -1;  // opened (once) before the hold
  // From the look at which pages hold data until the range maps the memfd,
  // another thread's write to the range waits (write_hold.h): otherwise it
  // could land in a page after the copy took it, and the remap drop it.
  // Nothing in between allocates or logs.
  WriteHold hold(begin, end);
  // A range of one page under a hold of the signals alone is copied
  // without the look: the read (0.5 us) costs what copying the page costs
  // when it was never touched, and registered memory nearly always was.
  // Under the userfaultfd the look stays: the copy's read of a page never
  // touched would meet its missing-page mode from the kernel and fail
  // (EFAULT), leaving the range unbacked.
  const bool look = !(size == page && hold.signals_only());
  if (!look || !pages.FindPagesWithData(begin, page, pagemap)) pages.All();
  // Where nobody but this thread can reach the range until the remap (the
  // hold is its signals alone), a range of more than one piece is copied
  // piece by piece and each piece's old pages are freed once copied: the
  // next piece's new memfd pages are then those pages, still in this CPU's
  // cache, rather than cold ones, and the remap has nothing left to free
  // ("Registration cost" in docs/datapath.md).
  const bool free_copied = anonymous && hold.signals_only() && size > kCopyPieceBytes;
  const uint64_t piece = free_copied ? std::max(kCopyPieceBytes, page) : UINT64_MAX;
  uint64_t freed_end = begin;  // [begin, freed_end): copied (old pages freed or not)
  // A failure after pages were freed: their bytes are in the memfd, which
  // the range then maps privately there (as a range no MR registers any
  // more, Privatize), the rest of it untouched.
  auto fail_keeping_bytes = [&] {
    if (freed_end > begin) {
      RawMmap(reinterpret_cast<void*>(begin), freed_end - begin, PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_FIXED, fd, 0);
    }
    hold.Release();
    return fail();
  };
  for (auto [first, last] : pages) {
    for (uint64_t at = begin + first * page, stop = begin + last * page; at < stop;) {
      const uint64_t n = std::min(piece, stop - at);
      if (!CopyIntoFile(fd, reinterpret_cast<const char*>(at), n, static_cast<off_t>(at - begin))) {
        return fail_keeping_bytes();
      }
      at += n;
      if (free_copied && RawMadvise(reinterpret_cast<void*>(at - n), n, MADV_DONTNEED) == 0) {
        freed_end = at;
      }
    }
  }
  if (offer && !ready) *offered = offer->send(offer->context, fd);
  // Every page held data (the common case): the remap maps them all at once
  // (MAP_POPULATE: for reading, as below, a shared mapping), one system call
  // less. Else only the pages that hold data, once the hold is released.
  const bool populate_all = pages.Whole();
  void* placed = RawMmap(reinterpret_cast<void*>(begin), size, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_FIXED | (populate_all ? MAP_POPULATE : 0), fd, 0);
  if (placed == MAP_FAILED) return fail_keeping_bytes();
  hold.Replaced();
  hold.Release();
#ifdef MADV_POPULATE_READ
  if (!populate_all) {
    for (auto [first, last] : pages) {
      RawMadvise(reinterpret_cast<void*>(begin + first * page), (last - first) * page,
                 MADV_POPULATE_READ);
    }
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

// Maps every part of b's range that still maps b's memfd again
// MAP_PRIVATE, from the same memfd: the same bytes, copy-on-write from now
// on. A range no MR registers any more must not stay shared, or a fork
// shares it with the child - the heap included, whose allocator then
// corrupts both (docs/datapath.md, "Fork"). No write is lost: the page
// tables switch in one mmap, and a write before it is in the memfd page
// the private mapping reads.
void Privatize(SelfMaps& maps, const Backing& b) {
  for (uint64_t at = b.begin; at < b.end;) {
    Vma v;
    if (!maps.At(at, &v) || v.start >= b.end) return;
    const uint64_t lo = std::max(at, v.start);
    const uint64_t hi = std::min(b.end, v.end);
    if (v.shared && v.inode == b.inode && v.dev_major == b.dev_major &&
        v.dev_minor == b.dev_minor && v.start - v.offset == b.begin) {
      const int prot = (v.readable ? PROT_READ : 0) | (v.writable ? PROT_WRITE : 0);
      RawMmap(reinterpret_cast<void*>(lo), hi - lo, prot, MAP_PRIVATE | MAP_FIXED, b.fd,
              static_cast<off_t>(lo - b.begin));
      maps.Forget();
    }
    at = hi;
  }
}

// Forgets entry i (under g_mutex). What of its range still maps its memfd
// stays the application's memory, private from now on (Privatize). Its
// descriptor is closed when the devices that keep the memfd are told to
// forget it (DroppedBacking), or now if none does or close_now (a process
// out of descriptors).
void Drop(SelfMaps& maps, size_t i, bool close_now = false) {
  const Backing& b = (*g_backings)[i];
  Privatize(maps, b);
  if (b.kept_by.empty() || close_now) close(b.fd);
  if (!b.kept_by.empty()) {
    g_dropped->push_back(
        {close_now ? -1 : b.fd, {b.memfd_dev, b.inode}, b.end - b.begin, b.kept_by});
  }
  g_backings->erase(g_backings->begin() + static_cast<std::ptrdiff_t>(i));
}

// An entry whose range no longer maps it: idle ones are dropped, used ones
// stay for their MRs but are no longer found by address.
void Detach(SelfMaps& maps, size_t i) {
  if ((*g_backings)[i].refs == 0) {
    Drop(maps, i);
  } else {
    (*g_backings)[i].detached = true;
  }
}

// Forgets every idle entry (their pages stay mapped: the application's
// memory) and answers how many: for a process out of file descriptors,
// whose next registration needs one more than the cache of idle ranges
// holds.
size_t DropAllIdle(SelfMaps& maps) {
  size_t dropped = 0;
  for (size_t i = 0; i < g_backings->size();) {
    if ((*g_backings)[i].refs == 0) {
      Drop(maps, i, /*close_now=*/true);
      ++dropped;
    } else {
      ++i;
    }
  }
  return dropped;
}

// Keeps the idle entries within bounds, least recently used out first.
void TrimIdle(SelfMaps& maps) {
  for (;;) {
    size_t idle = 0, oldest = g_backings->size();
    uint64_t bytes = 0;
    for (size_t i = 0; i < g_backings->size(); ++i) {
      const Backing& b = (*g_backings)[i];
      if (b.refs != 0) continue;
      ++idle;
      bytes += b.end - b.begin;
      if (oldest == g_backings->size() || b.last_used < (*g_backings)[oldest].last_used) oldest = i;
    }
    if (idle <= kMaxIdleBackings && bytes <= kMaxIdleBytes) return;
    Drop(maps, oldest);
  }
}

// Checks a few idle entries again (round robin) and drops those whose range
// maps something else now, so that the pages of ranges the application
// unmapped are not held for long. Called when a new backing is made (when
// memory grows), not on the cheap paths (reuse, dereg).
void CheckSomeIdle(SelfMaps& maps) {
  static size_t next_check = 0;
  for (int n = 0; n < kIdleChecksPerBacking && !g_backings->empty(); ++n) {
    const size_t i = next_check++ % g_backings->size();
    const Backing& b = (*g_backings)[i];
    if (b.refs == 0 && !StillMapped(maps, b, b.begin, b.end)) Drop(maps, i);
  }
}

// Fork. An idle backing's range is memory no MR registers any more, yet it
// is MAP_SHARED: a child would share it with its parent - the heap included,
// whose allocator then corrupts both. Before fork every idle entry is
// dropped, which maps what of its range still maps its memfd MAP_PRIVATE
// (Privatize): copy-on-write in parent and child as fork promises. Ranges
// of live MRs stay shared (docs/datapath.md, "Fork").
void PrivatizeIdleBeforeFork() {
  g_mutex.lock();  // released by AfterForkInParent / AfterForkInChild
  SelfMaps maps;
  for (size_t i = g_backings->size(); i-- > 0;) {
    if ((*g_backings)[i].refs == 0) Drop(maps, i);
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
NoDestructor<std::vector<Snapshot>>
    g_snapshots;  // between the prepare and the parent/child handlers

void SnapshotLiveRanges() {
  g_snapshots->clear();
  if (g_fork_initialized) return;
  for (const Backing& b : *g_backings) {
    if (b.detached || b.refs == 0) continue;
    const size_t len = b.end - b.begin;
    void* copy = RawMmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED) continue;  // this range stays shared: no better choice
    memcpy(copy, reinterpret_cast<const void*>(b.begin), len);
    g_snapshots->push_back({b.begin, len, copy});
  }
}

void BeforeFork() {
  PrivatizeIdleBeforeFork();  // takes g_mutex
  LockReadyBackingsForFork();
  SnapshotLiveRanges();
}

void AfterForkInParent() {
  for (const Snapshot& s : *g_snapshots) RawMunmap(s.copy, s.len);
  g_snapshots->clear();
  UnlockReadyBackingsInParent();
  g_mutex.unlock();
}

void AfterForkInChild() {
  for (const Snapshot& s : *g_snapshots) {
    if (RawMremap(s.copy, s.len, s.len, MREMAP_MAYMOVE | MREMAP_FIXED,
                  reinterpret_cast<void*>(s.begin)) == MAP_FAILED) {
      RawMunmap(s.copy, s.len);
    }
  }
  g_snapshots->clear();
  for (const Backing& b : *g_backings) close(b.fd);
  g_backings->clear();  // the child registered nothing
  for (const DroppedBacking& d : *g_dropped) {
    if (d.fd >= 0) close(d.fd);
  }
  g_dropped->clear();  // the parent tells its devices
  DropReadyBackingsInChild();
  g_mutex.unlock();
}

void InstallForkHandlers() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(BeforeFork, AfterForkInParent, AfterForkInChild); });
}

}  // namespace

MrBacking AcquireMrBacking(SelfMaps& maps, void* addr, size_t length, uint64_t keeper,
                           const BackingOffer* offer) {
  InstallForkHandlers();
  const uint64_t start = reinterpret_cast<uint64_t>(addr);
  // The whole pages of the range - of private huge pages, which are
  // replaced, whole huge pages: the rest (parts of pages shared with memory
  // not registered) stays where it is. Shared memory is not replaced (a
  // SysV segment of huge pages is mapped by peers as it is).
  // (Asked at the first whole page, which the look for a backing asks
  // next: an extra query at `start` cost a registration of a malloc'ed
  // buffer 0.4 us.)
  uint64_t page = PageSize();
  const uint64_t first_page = (start + page - 1) & ~(page - 1);
  if (Vma first; maps.At(first_page, &first) && first.start <= first_page && !first.shared) {
    page = ReplaceablePage(first);
  }
  const uint64_t begin = (start + page - 1) & ~(page - 1);
  const uint64_t end = (start + length) & ~(page - 1);
  if (end <= begin) return {};
  std::lock_guard lock(g_mutex);
  for (size_t i = 0; i < g_backings->size();) {
    Backing& b = (*g_backings)[i];
    if (b.detached || b.end <= begin || end <= b.begin) {
      ++i;
      continue;
    }
    if (!StillMapped(maps, b, std::max(b.begin, begin), std::min(b.end, end))) {
      Detach(maps, i);  // the application remapped (part of) it
      continue;
    }
    if (b.begin <= begin && end <= b.end) {
      b.refs++;
      b.last_used = ++g_clock;
      MrBacking found{b.id, b.fd, begin, end, begin - b.begin};
      found.name = {b.memfd_dev, b.inode};
      found.device_keeps =
          keeper != 0 && std::find(b.kept_by.begin(), b.kept_by.end(), keeper) != b.kept_by.end();
      return found;
    }
    if (b.refs == 0) {
      // An idle backing in the way: forget it (its pages stay mapped and
      // are copied into the new backing like any others).
      Drop(maps, i);
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
  // A range of one SysV segment is backed by the segment itself (see the
  // header): nothing to copy, and the sharing stays.
  Vma v;
  if (maps.At(begin, &v) && v.start <= begin && end <= v.end && v.sysv_shm &&
      v.inode <= static_cast<uint64_t>(INT32_MAX)) {
    MrBacking segment;
    segment.begin = begin;
    segment.end = end;
    segment.offset = v.offset + (begin - v.start);
    segment.shmid = static_cast<int>(v.inode);
    return segment;
  }
  // Nor memory the application maps shared otherwise (a MAP_SHARED mapping
  // of a file, of POSIX shm, of shared anonymous memory): the remap would
  // put this process on a copy and end the sharing - another process's
  // later writes would no longer be seen here, nor ours there. Only a range
  // registration itself converted before (kept mapped after its backing was
  // forgotten) may be converted again.
  if (!maps.Covered(begin, end, [](const Vma& v) { return !v.shared || v.registration_backing; })) {
    Log("ibv_reg_mr: [%#llx, %#llx) is shared memory (MAP_SHARED): left where it is; peers "
        "reach it through /proc/self/mem (slower)",
        static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end));
    return {};
  }
  // Nor a range over pages of two sizes (part of it in huge pages): it could
  // not be replaced whole.
  if (!maps.Covered(begin, end, [&](const Vma& v) { return ReplaceablePage(v) == page; })) {
    Log("ibv_reg_mr: [%#llx, %#llx) spans pages of different sizes: left where it is; peers "
        "reach it through /proc/self/mem (slower)",
        static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end));
    return {};
  }
  const bool anonymous = maps.Covered(begin, end, [](const Vma& v) { return v.anonymous(); });
  if (keeper == 0) offer = nullptr;  // nobody to keep it for
  // A small range takes a memfd made ahead for the context, if one is ready.
  ReadyBacking ready;
  bool wake_maker = false;
  const bool have_ready = offer && offer->wake_maker && end - begin <= kReadyBackingBytes &&
                          TakeReadyBacking(keeper, &ready, &wake_maker);
  if (wake_maker) offer->wake_maker(offer->context);
  if (have_ready && offer->wake_device) offer->wake_device(offer->context);
  bool offered = false;
  int fd =
      CreateBacking(begin, end, anonymous, offer, keeper, &offered, have_ready ? &ready : nullptr);
  if (fd < 0 && !have_ready && (errno == EMFILE || errno == ENFILE) && DropAllIdle(maps) > 0) {
    // Out of descriptors at memfd_create, before any change: the ranges
    // kept converted give theirs back and the registration tries again.
    fd = CreateBacking(begin, end, anonymous, offer, keeper, &offered, nullptr);
  }
  maps.Forget();  // [begin, end) maps the memfd now
  struct stat st {};
  if (have_ready && fd >= 0) {
    st.st_dev = static_cast<dev_t>(ready.name.dev);
    st.st_ino = static_cast<ino_t>(ready.name.ino);
  } else if (fd >= 0 && fstat(fd, &st) != 0) {
    close(fd);  // (an offered one stays with the device until the context closes)
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
            ++g_clock,
            static_cast<uint64_t>(st.st_dev)};
  if (offered) b.kept_by.push_back(keeper);  // named by the registration (ESTALE: passed)
  CheckSomeIdle(maps);
  g_backings->push_back(b);
  TrimIdle(maps);
  MrBacking made{b.id, fd, begin, end, 0};
  made.name = {b.memfd_dev, b.inode};
  made.device_keeps = offered;
  return made;
}

bool MemoryIsAccessible(SelfMaps& maps, uintptr_t addr, size_t length, bool need_write) {
  if (addr + length < addr) return false;
  return maps.Covered(addr, addr + length,
                      [&](const Vma& v) { return v.readable && (v.writable || !need_write); });
}

void ReleaseMrBacking(uint64_t id) {
  if (id == 0) return;
  std::lock_guard lock(g_mutex);
  SelfMaps maps;  // asked only if an entry is dropped
  for (size_t i = 0; i < g_backings->size(); ++i) {
    Backing& b = (*g_backings)[i];
    if (b.id != id) continue;
    if (--b.refs == 0) {
      if (b.detached) {
        Drop(maps, i);
      } else {
        b.last_used = ++g_clock;
      }
    }
    break;
  }
  TrimIdle(maps);
}

void NoteBackingKept(uint64_t id, uint64_t keeper, bool kept) {
  if (id == 0 || keeper == 0) return;
  std::lock_guard lock(g_mutex);
  for (Backing& b : *g_backings) {
    if (b.id != id) continue;
    const bool listed = std::find(b.kept_by.begin(), b.kept_by.end(), keeper) != b.kept_by.end();
    if (kept && !listed) b.kept_by.push_back(keeper);
    if (!kept) std::erase(b.kept_by, keeper);
    return;
  }
}

std::vector<protocol::BackingName> ForgottenBackings(uint64_t keeper) {
  std::lock_guard lock(g_mutex);
  std::vector<protocol::BackingName> names;
  uint64_t bytes = 0;
  for (const DroppedBacking& d : *g_dropped) {
    if (std::find(d.keepers.begin(), d.keepers.end(), keeper) == d.keepers.end()) continue;
    names.push_back(d.name);
    bytes += d.bytes;
  }
  if (names.size() < kForgetBatchNames && bytes < kForgetBatchBytes) return {};
  // Closed before any device is told (DroppedBacking): the devices' copies
  // keep each memfd, and its name, until they forget it.
  for (DroppedBacking& d : *g_dropped) {
    if (d.fd >= 0 && std::find(d.keepers.begin(), d.keepers.end(), keeper) != d.keepers.end()) {
      close(d.fd);
      d.fd = -1;
    }
  }
  return names;
}

void NoteBackingsForgotten(uint64_t keeper, const std::vector<protocol::BackingName>& names) {
  std::lock_guard lock(g_mutex);
  std::erase_if(*g_dropped, [&](DroppedBacking& d) {
    const bool told = std::any_of(names.begin(), names.end(), [&](const protocol::BackingName& n) {
      return n.dev == d.name.dev && n.ino == d.name.ino;
    });
    return told && std::erase(d.keepers, keeper) > 0 && d.keepers.empty();
  });
}

void ForgetKeeper(uint64_t keeper) {
  DropReadyBackings(keeper);
  std::lock_guard lock(g_mutex);
  for (Backing& b : *g_backings) std::erase(b.kept_by, keeper);
  std::erase_if(*g_dropped, [&](DroppedBacking& d) {
    if (std::erase(d.keepers, keeper) == 0 || !d.keepers.empty()) return false;
    if (d.fd >= 0) close(d.fd);
    return true;
  });
}

}  // namespace softverbs::provider
