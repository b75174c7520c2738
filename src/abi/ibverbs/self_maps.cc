#include "abi/ibverbs/self_maps.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace softverbs::provider {
namespace {

// PROCMAP_QUERY (include/uapi/linux/fs.h since Linux 6.11; Debian 12's
// headers predate it). The caller fills size, query_flags and query_addr;
// the kernel fills the vma_* fields, inode and device, and the name into
// vma_name_addr when vma_name_size is set.
// Build ids are not asked for.
struct ProcmapQuery {
  uint64_t size;
  uint64_t query_flags;
  uint64_t query_addr;
  uint64_t vma_start;
  uint64_t vma_end;
  uint64_t vma_flags;
  uint64_t vma_page_size;
  uint64_t vma_offset;
  uint64_t inode;
  uint32_t dev_major;
  uint32_t dev_minor;
  uint32_t vma_name_size;
  uint32_t build_id_size;
  uint64_t vma_name_addr;
  uint64_t build_id_addr;
};
static_assert(sizeof(ProcmapQuery) == 104);
constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQuery);
constexpr uint64_t kVmaReadable = 0x01;
constexpr uint64_t kVmaWritable = 0x02;
constexpr uint64_t kVmaShared = 0x08;
constexpr uint64_t kCoveringOrNextVma = 0x10;

// The /proc/self/maps descriptor the ioctl goes to: opened once, reopened in
// a forked child (the open file names the parent's address space).
// -1 not open yet, -2 the kernel has no PROCMAP_QUERY.
std::atomic<int> g_maps_fd{-1};
std::mutex g_open_mutex;

void ForgetMapsInChild() {
  const int fd = g_maps_fd.exchange(-1);
  if (fd >= 0) close(fd);
}

int MapsFd() {
  int fd = g_maps_fd.load(std::memory_order_acquire);
  if (fd != -1) return fd;
  std::lock_guard lock(g_open_mutex);
  fd = g_maps_fd.load(std::memory_order_acquire);
  if (fd != -1) return fd;
  static std::once_flag atfork_once;
  std::call_once(atfork_once, [] { pthread_atfork(nullptr, nullptr, ForgetMapsInChild); });
  fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -2;  // the text fallback will fail the same way
  g_maps_fd.store(fd, std::memory_order_release);
  return fd;
}

// Whether a mapping's name (as /proc/self/maps shows it) is a memfd of
// registration's.
bool IsRegistrationBacking(const char* name) {
  char expected[64];
  snprintf(expected, sizeof(expected), "/memfd:%s", kBackingMemfdName);
  const size_t n = strlen(expected);
  return strncmp(name, expected, n) == 0 && (name[n] == '\0' || name[n] == ' ' || name[n] == '\n');
}

// Whether a mapping's name is a SysV segment's ("/SYSV" and its key in hex).
bool IsSysvShm(const char* name) {
  return strncmp(name, "/SYSV", 5) == 0;
}

// Whether a mapping's name is that of private anonymous huge pages.
bool IsAnonHugepage(const char* name) {
  return strncmp(name, "/anon_hugepage", 14) == 0;
}

// The default huge page size (/proc/meminfo's Hugepagesize), read once: the
// page size of "/anon_hugepage" mappings for the text of /proc/self/maps,
// which does not say (MAP_HUGE_1GB mappings of a 2 MiB default are then
// taken for 2 MiB ones: their replacement fails, and they are not backed).
uint64_t DefaultHugePageSize() {
  static const uint64_t size = [] {
    uint64_t kib = 0;
    if (FILE* f = fopen("/proc/meminfo", "re")) {
      char line[128];
      while (fgets(line, sizeof(line), f)) {
        unsigned long long v = 0;
        if (sscanf(line, "Hugepagesize: %llu kB", &v) == 1) kib = v;
      }
      fclose(f);
    }
    return kib * 1024;
  }();
  return size;
}

std::vector<Vma> ReadMapsText() {
  std::vector<Vma> out;
  FILE* f = fopen("/proc/self/maps", "re");
  if (!f) return out;
  char line[512];
  while (fgets(line, sizeof(line), f)) {
    Vma v;
    if (ParseMapsLine(line, &v)) out.push_back(v);
    // A line longer than the buffer: skip its remainder.
    while (!strchr(line, '\n') && fgets(line, sizeof(line), f)) {
    }
  }
  fclose(f);
  return out;
}

}  // namespace

bool ParseMapsLine(const char* line, Vma* out) {
  unsigned long long start = 0, end = 0, offset = 0, inode = 0;
  unsigned major = 0, minor = 0;
  char perms[8] = {};
  int name_at = 0;
  if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &offset, &major, &minor,
             &inode, &name_at) != 7) {
    return false;
  }
  Vma v;
  v.start = start;
  v.end = end;
  v.readable = perms[0] == 'r';
  v.writable = perms[1] == 'w';
  v.shared = perms[3] == 's';
  v.offset = offset;
  v.inode = inode;
  v.dev_major = major;
  v.dev_minor = minor;
  v.registration_backing = v.shared && IsRegistrationBacking(line + name_at);
  v.sysv_shm = v.shared && IsSysvShm(line + name_at);
  v.anon_hugepage = !v.shared && IsAnonHugepage(line + name_at);
  if (v.anon_hugepage) v.page_size = DefaultHugePageSize();
  *out = v;
  return true;
}

bool SelfMaps::At(uint64_t addr, Vma* out) {
  if (have_last_ && last_.start <= addr && addr < last_.end) {
    *out = last_;
    return true;
  }
  const int fd = MapsFd();
  if (fd >= 0) {
    // The name comes in the same query (a second one for shared mappings
    // cost a registration of a converted range 0.5 us): is it ours, or a
    // SysV segment? Both names are short; a longer one (ENAMETOOLONG: a file
    // deep in a tree) is neither, and the query goes again without it.
    char name[128] = {};
    ProcmapQuery q{};
    q.size = sizeof(q);
    q.query_flags = kCoveringOrNextVma;
    q.query_addr = addr;
    q.vma_name_addr = reinterpret_cast<uint64_t>(name);
    q.vma_name_size = sizeof(name);
    int r = ioctl(fd, kProcmapQuery, &q);
    bool have_name = r == 0;
    if (r != 0 && errno == ENAMETOOLONG) {
      q.vma_name_addr = 0;
      q.vma_name_size = 0;
      r = ioctl(fd, kProcmapQuery, &q);
    }
    if (r == 0) {
      out->start = q.vma_start;
      out->end = q.vma_end;
      out->readable = q.vma_flags & kVmaReadable;
      out->writable = q.vma_flags & kVmaWritable;
      out->shared = q.vma_flags & kVmaShared;
      out->offset = q.vma_offset;
      out->inode = q.inode;
      out->dev_major = q.dev_major;
      out->dev_minor = q.dev_minor;
      out->registration_backing = out->shared && have_name && IsRegistrationBacking(name);
      out->sysv_shm = out->shared && have_name && IsSysvShm(name);
      out->page_size = q.vma_page_size;
      out->anon_hugepage = !out->shared && have_name && IsAnonHugepage(name);
      if (out->start <= addr) {
        last_ = *out;
        have_last_ = true;
      }
      return true;
    }
    if (errno == ENOENT) return false;  // nothing at or above addr
    if (errno == ENOTTY || errno == EINVAL) {
      // A kernel before 6.11: the text from now on.
      int expected = fd;
      if (g_maps_fd.compare_exchange_strong(expected, -2)) close(fd);
    }
  }
  if (!loaded_) {
    text_ = ReadMapsText();
    loaded_ = true;
  }
  for (const Vma& v : text_) {  // sorted by address
    if (v.end > addr) {
      *out = v;
      return true;
    }
  }
  return false;
}

}  // namespace softverbs::provider
