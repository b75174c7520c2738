#include "daemon/background_release.h"

#include <stdlib.h>
#include <sys/shm.h>
#include <unistd.h>

#include <chrono>
#include <vector>

namespace softverbs::daemon {

namespace {

// Test hook: SOFTVERBS_TEST_RELEASE_DELAY_MS=<n> makes the release thread
// wait n ms before each batch it was handed (a closed connection's kept
// memfds are one), so that a test can see requests answered while a
// release is still to come. Read once.
std::chrono::milliseconds DelayForTests() {
  static const long ms = [] {
    const char* v = getenv("SOFTVERBS_TEST_RELEASE_DELAY_MS");
    return v ? strtol(v, nullptr, 10) : 0L;
  }();
  return std::chrono::milliseconds(ms);
}

}  // namespace

BackgroundRelease::~BackgroundRelease() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void BackgroundRelease::Close(int fd, uint64_t bytes) {
  if (fd < 0) return;
  if (bytes < kMinBytes) {
    close(fd);
    return;
  }
  const Item item{fd, nullptr};
  Hand({&item, 1});
}

void BackgroundRelease::CloseAll(std::span<const int> fds, uint64_t bytes) {
  if (fds.size() == 1) return Close(fds[0], bytes);
  if (fds.empty()) return;
  std::vector<Item> items;
  items.reserve(fds.size());
  for (int fd : fds) {
    if (fd >= 0) items.push_back({fd, nullptr});
  }
  Hand(items);
}

void BackgroundRelease::Detach(const void* base, uint64_t bytes) {
  if (bytes < kMinBytes) {
    shmdt(base);
    return;
  }
  const Item item{-1, base};
  Hand({&item, 1});
}

void BackgroundRelease::Hand(std::span<const Item> items) {
  {
    std::lock_guard lock(mutex_);
    const size_t first = items_.size();
    items_.insert(items_.end(), items.begin(), items.end());
    if (items_.size() > first) items_[first].first_of_batch = true;
    if (!thread_.joinable()) thread_ = std::thread(&BackgroundRelease::Run, this);
  }
  wake_.notify_one();
}

void BackgroundRelease::Run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !items_.empty(); });
    if (items_.empty()) return;  // stopping, nothing left
    const Item item = items_.front();
    items_.pop_front();
    const bool stopping = stopping_;
    lock.unlock();
    if (DelayForTests().count() > 0 && !stopping && item.first_of_batch) {
      std::this_thread::sleep_for(DelayForTests());
    }
    Release(item);
    lock.lock();
  }
}

void BackgroundRelease::Release(const Item& item) {
  if (item.fd >= 0) {
    close(item.fd);
  } else {
    shmdt(item.base);
  }
}

}  // namespace softverbs::daemon
