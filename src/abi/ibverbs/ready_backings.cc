#include "abi/ibverbs/ready_backings.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "abi/ibverbs/descriptor_floor.h"
#include "abi/ibverbs/self_maps.h"
#include "common/no_destructor.h"
#include "common/unix_socket.h"

namespace softverbs::provider {

namespace {

struct Stock {
  uint64_t keeper;
  std::vector<ReadyBacking> ready;
  bool asked = false;  // a take found it empty or low: the maker runs
};

std::mutex g_stock_mutex;
// A memfd made ahead landed where the application may need its descriptor
// (descriptor_floor.h, SpareDescriptor): none are made from then on.
std::atomic<bool> g_no_room{false};
NoDestructor<std::vector<Stock>> g_stocks;

Stock* StockOf(uint64_t keeper) {  // under g_stock_mutex
  for (Stock& s : *g_stocks) {
    if (s.keeper == keeper) return &s;
  }
  return nullptr;
}

size_t ReadyCount(uint64_t keeper) {
  std::lock_guard lock(g_stock_mutex);
  const Stock* s = StockOf(keeper);
  return s ? s->ready.size() : 0;
}

Stock& MadeStockOf(uint64_t keeper) {  // under g_stock_mutex
  if (Stock* s = StockOf(keeper)) return *s;
  g_stocks->push_back({keeper, {}});
  return g_stocks->back();
}

// Whether the maker should run for s (it is then asked, until it has run).
bool AskIfLow(Stock& s) {  // under g_stock_mutex
  if (s.ready.size() > kReadyBackingsLow || s.asked) return false;
  s.asked = true;
  return true;
}

}  // namespace

int MakeSealedMemfd(uint64_t size) {
  int fd = memfd_create(kBackingMemfdName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  // Every descriptor below the soft limit is taken: room above it (the
  // descriptor is moved there at once).
  if (fd < 0 && errno == EMFILE && RaiseSoftDescriptorLimit()) {
    fd = memfd_create(kBackingMemfdName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  }
  if (fd < 0) return -1;
  fd = MoveAboveApplication(fd);
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

bool TakeReadyBacking(uint64_t keeper, ReadyBacking* out, bool* wake) {
  *wake = false;
  if (keeper == 0 || g_no_room.load(std::memory_order_relaxed)) return false;
  std::lock_guard lock(g_stock_mutex);
  Stock& s = MadeStockOf(keeper);
  const bool took = !s.ready.empty();
  if (took) {
    *out = s.ready.back();
    s.ready.pop_back();
  }
  *wake = AskIfLow(s);
  return took;
}

bool AskForReadyBackings(uint64_t keeper) {
  if (keeper == 0 || g_no_room.load(std::memory_order_relaxed)) return false;
  std::lock_guard lock(g_stock_mutex);
  return AskIfLow(MadeStockOf(keeper));
}

void MakeReadyBackings(uint64_t keeper, bool (*offer)(void* context, const int* fds, size_t count),
                       void* context) {
  for (;;) {
    const size_t have = ReadyCount(keeper);
    if (have >= kReadyBackingsKept) break;
    const size_t want = std::min(kReadyBackingsKept - have, kMaxFdsPerMessage);
    ReadyBacking made[kMaxFdsPerMessage];
    int fds[kMaxFdsPerMessage];
    size_t count = 0;
    while (count < want) {
      const int fd = MakeSealedMemfd(kReadyBackingBytes);
      // Its first page allocated already (most registrations are small, and
      // allocating a page costs them a microsecond): what a registration of
      // up to a page copies then only writes.
      if (fd >= 0) fallocate(fd, 0, 0, static_cast<off_t>(sysconf(_SC_PAGESIZE)));
      struct stat st {};
      if (fd >= 0 && !SpareDescriptor(fd)) g_no_room.store(true, std::memory_order_relaxed);
      if (fd < 0 || g_no_room.load(std::memory_order_relaxed) || fstat(fd, &st) != 0) {
        if (fd >= 0) close(fd);
        break;
      }
      made[count] = {fd, {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)}};
      fds[count++] = fd;
    }
    const bool went = count > 0 && offer(context, fds, count);
    std::lock_guard lock(g_stock_mutex);
    Stock* s = StockOf(keeper);
    if (!went || !s) {  // (no stock: cannot be, the context joins its watcher first)
      for (size_t i = 0; i < count; ++i) close(fds[i]);
      break;
    }
    s->ready.insert(s->ready.end(), made, made + count);
    if (count < want) break;  // out of descriptors or memory: later
  }
  std::lock_guard lock(g_stock_mutex);
  if (Stock* s = StockOf(keeper)) s->asked = false;
}

void DropReadyBackings(uint64_t keeper) {
  std::lock_guard lock(g_stock_mutex);
  std::erase_if(*g_stocks, [&](const Stock& s) {
    if (s.keeper != keeper) return false;
    for (const ReadyBacking& r : s.ready) close(r.fd);
    return true;
  });
}

void LockReadyBackingsForFork() {
  g_stock_mutex.lock();
}

void UnlockReadyBackingsInParent() {
  g_stock_mutex.unlock();
}

void DropReadyBackingsInChild() {
  for (const Stock& s : *g_stocks) {
    for (const ReadyBacking& r : s.ready) close(r.fd);
  }
  g_stocks->clear();
  g_stock_mutex.unlock();
}

}  // namespace softverbs::provider
