#include "abi/ibverbs/write_hold.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "abi/ibverbs/descriptor_floor.h"
#include "abi/ibverbs/live_mr_ranges.h"
#include "common/log.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1  // Linux 5.11
#endif

namespace softverbs::provider {
namespace {

constexpr int kUnopened = -1;
constexpr int kUnavailable = -2;

// The process's userfaultfd, made at the first hold. Holds are taken under
// the registry's lock (mr_backing.cc), one at a time. A forked child must
// not use its parent's: the descriptor stands for the parent's address
// space, and a registration through it would protect the parent's pages.
std::atomic<int> g_uffd{kUnopened};

// The process's /proc/self/task, opened at the first hold: its link count
// is the number of the process's threads plus two, fresh at every fstat.
// A fork child opens its own.
int g_task_dir = kUnopened;
// The library's threads that write no memory of the process now, counted
// by themselves (QuietLibraryThread).
std::atomic<int> g_quiet_threads{0};
// Held by a hold that blocks signals only (it took every other thread for
// quiet) for as long as it holds, and by a quiet thread while it becomes a
// writer: no thread starts writing under such a hold.
std::mutex g_unheld_mutex;

void ForgetInChild() {
  const int fd = g_uffd.exchange(kUnopened);
  if (fd >= 0) close(fd);
  if (g_task_dir >= 0) close(g_task_dir);
  g_task_dir = kUnopened;
  new (&g_unheld_mutex) std::mutex;  // another thread may have held it at the fork
  g_quiet_threads.store(0, std::memory_order_release);  // the child has none of them
}

// Before the first hold and the first quiet thread: a quiet thread may hold
// g_unheld_mutex at a fork.
void InstallForkHandler() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, ForgetInChild); });
}

// Whether the calling thread is the only one that may write the
// application's memory: the process's threads less the library's quiet
// ones. Errs towards "no": a quiet thread counts itself only once it runs
// and uncounts itself before it ends, so while it starts or ends it is
// counted as a writer. (Under the registry's lock, as every hold.)
bool CallerIsTheOnlyWriter(uint64_t begin, uint64_t end) {
  // Peers write an MR's unbacked pages through /proc/<pid>/mem: held, such
  // a write fails and is made again after the conversion (live_mr_ranges.h).
  if (AnyMrCovers(begin, end)) return false;
  if (g_task_dir == kUnopened) {
    const int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    g_task_dir = fd >= 0 ? MoveAboveApplication(fd) : kUnavailable;
  }
  struct stat st {};
  if (g_task_dir < 0 || fstat(g_task_dir, &st) != 0 || st.st_nlink < 3) return false;
  const int64_t threads = static_cast<int64_t>(st.st_nlink) - 2;
  return threads - g_quiet_threads.load(std::memory_order_acquire) == 1;
}

int OpenUffd() {
  const int fd =
      static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
  if (fd < 0) return -1;
  uffdio_api api{};
  api.api = UFFD_API;
  if (ioctl(fd, UFFDIO_API, &api) != 0 || !(api.ioctls & (1ull << _UFFDIO_REGISTER))) {
    const int saved = errno != 0 ? errno : EOPNOTSUPP;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

int Uffd() {
  int fd = g_uffd.load(std::memory_order_acquire);
  if (fd != kUnopened) return fd;
  InstallForkHandler();
  fd = OpenUffd();
  if (fd >= 0) fd = MoveAboveApplication(fd);
  if (fd < 0 && (errno == EMFILE || errno == ENFILE)) return -1;  // out of descriptors: next time
  if (fd < 0) {
    Log("ibv_reg_mr: no userfaultfd (%s): a thread that writes a range while another thread "
        "registers it may lose that write",
        strerror(errno));
    fd = kUnavailable;
  }
  g_uffd.store(fd, std::memory_order_release);
  return fd;
}

// The highest address of the calling thread's stack (found once a thread;
// UINT64_MAX if unknown).
uint64_t StackTop() {
  thread_local uint64_t top = 0;
  if (top != 0) return top;
  top = UINT64_MAX;
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    void* addr = nullptr;
    size_t size = 0;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0 && addr != nullptr) {
      top = reinterpret_cast<uint64_t>(addr) + size;
    }
    pthread_attr_destroy(&attr);
  }
  return top;
}

// Whether [begin, end) holds memory the holding thread itself writes while
// it holds: its stack from a little above here (the frames of the
// conversion that holds) down to well below, and its thread-local storage
// (errno, the thread control block). Such a range is converted unheld: the
// thread would otherwise wait for itself. None of it reaches past the top
// of the thread's stack mapping (a thread's stack, TLS and control block
// are one mapping, and it is often right below the memory the program
// mapped just before it started the thread).
bool WrittenByHolder(uint64_t begin, uint64_t end) {
  constexpr uint64_t kStackAbove = 16 << 10;
  constexpr uint64_t kStackBelow = 256 << 10;
  constexpr uint64_t kTlsAround = 8 << 10;
  const uint64_t top = StackTop();
  const auto within = [&](uint64_t at, uint64_t below, uint64_t above) {
    if (top > at) above = std::min(above, top - at);
    return at + above > begin && (at < below || at - below < end);
  };
  const char here = 0;
  return within(reinterpret_cast<uint64_t>(&here), kStackBelow, kStackAbove) ||
         within(reinterpret_cast<uint64_t>(&errno), kTlsAround, kTlsAround) ||
         within(reinterpret_cast<uint64_t>(__builtin_thread_pointer()), kTlsAround, kTlsAround);
}

}  // namespace

QuietLibraryThread::QuietLibraryThread() {
  InstallForkHandler();
  Quiet();
}

QuietLibraryThread::~QuietLibraryThread() {
  WillWrite();
}

void QuietLibraryThread::Quiet() {
  if (quiet_) return;
  quiet_ = true;
  g_quiet_threads.fetch_add(1, std::memory_order_acq_rel);
}

void QuietLibraryThread::WillWrite() {
  if (!quiet_) return;
  std::lock_guard lock(g_unheld_mutex);
  quiet_ = false;
  g_quiet_threads.fetch_sub(1, std::memory_order_acq_rel);
}

WriteHold::WriteHold(uint64_t begin, uint64_t end) : begin_(begin), end_(end) {
  if (end <= begin || WrittenByHolder(begin, end)) return;
  const int fd = Uffd();
  if (fd < 0) return;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &saved_mask_);
  // Nobody else to hold: the signals blocked are the whole hold (a handler
  // of this thread's is the only other writer there could be), and no
  // quiet thread starts writing until it is released.
  g_unheld_mutex.lock();
  if (CallerIsTheOnlyWriter(begin, end)) {
    held_ = true;
    signals_only_ = true;
    return;
  }
  g_unheld_mutex.unlock();
  uffdio_register reg{};
  reg.range.start = begin;
  reg.range.len = end - begin;
  // MISSING too: a page the pagemap finds empty is not copied, and a first
  // touch of it must not fill the old mapping's page either.
  reg.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP;
  if (ioctl(fd, UFFDIO_REGISTER, &reg) != 0) {
    pthread_sigmask(SIG_SETMASK, &saved_mask_, nullptr);
    return;
  }
  uffdio_writeprotect wp{};
  wp.range = reg.range;
  wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
  if (!(reg.ioctls & (1ull << _UFFDIO_WRITEPROTECT)) || ioctl(fd, UFFDIO_WRITEPROTECT, &wp) != 0) {
    ioctl(fd, UFFDIO_UNREGISTER, &reg.range);
    pthread_sigmask(SIG_SETMASK, &saved_mask_, nullptr);
    return;
  }
  held_ = true;
}

void WriteHold::Release() {
  if (!held_) return;
  held_ = false;
  if (signals_only_) {
    g_unheld_mutex.unlock();
    pthread_sigmask(SIG_SETMASK, &saved_mask_, nullptr);
    return;
  }
  const int fd = g_uffd.load(std::memory_order_acquire);
  uffdio_range range{begin_, end_ - begin_};
  if (!replaced_) {
    uffdio_writeprotect wp{};
    wp.range = range;
    wp.mode = 0;  // lifts the protection
    ioctl(fd, UFFDIO_WRITEPROTECT, &wp);
    ioctl(fd, UFFDIO_UNREGISTER, &range);
  }
  // The threads waiting in a fault on the range make their access again:
  // on the memfd's mapping, or (not replaced) on the old one, unprotected.
  ioctl(fd, UFFDIO_WAKE, &range);
  pthread_sigmask(SIG_SETMASK, &saved_mask_, nullptr);
}

}  // namespace softverbs::provider
