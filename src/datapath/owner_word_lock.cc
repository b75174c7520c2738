#include "datapath/owner_word_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <mutex>

#include "datapath/bounded_wait.h"
#include "datapath/owner_memory.h"

namespace softverbs::datapath {

namespace {

// The threads of this process: record locks do not tell them apart.
std::mutex g_mutex;

int SetLock(int fd, uint64_t va, short type) {
  struct flock l {};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = static_cast<off_t>(va);
  l.l_len = 8;
  return fcntl(fd, F_SETLK, &l);
}

// A child forked while another thread held the mutex would find it held for
// ever: fork waits for it (an atomic in progress, bounded) and both sides
// let it go.
void LockForFork() {
  g_mutex.lock();
}
void UnlockAfterFork() {
  g_mutex.unlock();
}

}  // namespace

OwnerWordLock::OwnerWordLock(int mem_fd, uint64_t va) : fd_(mem_fd), va_(va) {
  static std::once_flag atfork_once;
  std::call_once(atfork_once,
                 [] { pthread_atfork(LockForFork, UnlockAfterFork, UnlockAfterFork); });
  g_mutex.lock();
  // Not F_SETLKW: a holder that is stopped must not stop this thread (the
  // device's, or an application's) for ever.
  // A holder is inside a read-modify-write: microseconds.
  BoundedWait wait(WaitsForOwnerConversions() ? kOwnerWordLockWaitMs : kOwnerWordLockTryMs);
  for (;;) {
    if (SetLock(fd_, va_, F_WRLCK) == 0) {
      held_ = recorded_ = true;
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EACCES) {
      held_ = true;  // the file takes no record locks: as before they existed
      return;
    }
    if (!wait.Pause()) {
      errno = EAGAIN;
      return;
    }
  }
}

OwnerWordLock::~OwnerWordLock() {
  const int error = errno;  // why the atomic under the lock failed, if it did
  if (recorded_) SetLock(fd_, va_, F_UNLCK);
  g_mutex.unlock();
  errno = error;
}

void CloseOwnerMemFd(int fd) {
  if (fd < 0) return;
  std::lock_guard lock(g_mutex);
  close(fd);
}

}  // namespace softverbs::datapath
