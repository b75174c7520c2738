// Releases the device does off its serving thread. Dropping the last
// reference to a registration's memory - the memfd the device held for an
// MR, a SysV segment it kept attached - frees the pages in the call that
// drops it: about 9 ms per 64 MiB on the VMs this was measured on, 0.3 s
// for a 2 GiB registration of a process that was killed. The daemon serves
// every client in one thread, so each of them waited that long for its
// next answer. Large releases are handed to a thread of their own instead,
// and so are batches (freeing even one page of a memfd takes a few
// microseconds: its inode goes too); a single small one is done at once (a
// handoff costs a wake-up).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <thread>

namespace softverbs::daemon {

class BackgroundRelease {
 public:
  // Releases of at least this many bytes go to the thread.
  static constexpr uint64_t kMinBytes = uint64_t{1} << 20;

  BackgroundRelease() = default;
  BackgroundRelease(const BackgroundRelease&) = delete;
  BackgroundRelease& operator=(const BackgroundRelease&) = delete;
  // Finishes what was handed over, then ends the thread.
  ~BackgroundRelease();

  // Closes fd, a descriptor of `bytes` bytes of memory (a memfd).
  void Close(int fd, uint64_t bytes);
  // Closes fds, descriptors of memfds of `bytes` bytes in all: in the
  // thread (one handoff) if there are several or they are large.
  void CloseAll(std::span<const int> fds, uint64_t bytes);
  // Detaches the SysV segment of `bytes` bytes attached at base.
  void Detach(const void* base, uint64_t bytes);

 private:
  struct Item {
    int fd;                       // >= 0: close it
    const void* base;             // else: shmdt it
    bool first_of_batch = false;  // the first of one Hand's items (the test delay's unit)
  };
  void Hand(std::span<const Item> items);
  void Run();
  static void Release(const Item& item);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Item> items_;  // under mutex_
  bool stopping_ = false;   // under mutex_
  std::thread thread_;      // started at the first handoff
};

}  // namespace softverbs::daemon
