// The owner's word lock (src/datapath/owner_word_lock.h): a POSIX record lock
// on 8 bytes of an owner's /proc/<pid>/mem, here our own. Other processes
// are kept out while it is held, a holder that dies leaves nothing locked,
// and a holder that is stopped is waited for a bounded time.
#include "datapath/owner_word_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>

#include "datapath/owner_memory.h"

namespace softverbs::datapath {
namespace {

uint64_t g_word = 0;

// Whether another process holds a record lock on g_word in fd's file, seen
// from a forked child (a process sees no conflict with its own locks). A
// raw fork: the lock's fork handler would wait for the lock this thread
// holds (the library never forks inside an atomic).
bool LockedForOthers(int fd) {
  const pid_t child = static_cast<pid_t>(syscall(SYS_fork));
  if (child == 0) {
    struct flock l {};
    l.l_type = F_WRLCK;
    l.l_whence = SEEK_SET;
    l.l_start = static_cast<off_t>(reinterpret_cast<uintptr_t>(&g_word));
    l.l_len = 8;
    if (fcntl(fd, F_GETLK, &l) != 0) _exit(2);
    _exit(l.l_type == F_UNLCK ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 1;
}

double SecondsSince(const timespec& t0) {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9;
}

// A child that takes the lock on g_word, says so through the pipe and then
// waits (to be killed or stopped).
pid_t HolderChild(int fd) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t child = fork();
  if (child == 0) {
    OwnerWordLock lock(fd, reinterpret_cast<uintptr_t>(&g_word));
    if (!lock.held() || write(ready[1], "h", 1) != 1) _exit(1);
    for (;;) pause();
  }
  char c = 0;
  close(ready[1]);
  const bool held = read(ready[0], &c, 1) == 1;
  close(ready[0]);
  return held ? child : -1;
}

TEST(OwnerWordLock, KeepsOtherProcessesOutWhileHeld) {
  const int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  {
    OwnerWordLock lock(fd, reinterpret_cast<uintptr_t>(&g_word));
    ASSERT_TRUE(lock.held());
    EXPECT_TRUE(LockedForOthers(fd));
  }
  EXPECT_FALSE(LockedForOthers(fd));
  CloseOwnerMemFd(fd);
}

TEST(OwnerWordLock, AHolderThatDiesLeavesTheWordFree) {
  const int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const pid_t holder = HolderChild(fd);
  ASSERT_GT(holder, 0);
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  timespec t0{};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  {
    OwnerWordLock lock(fd, reinterpret_cast<uintptr_t>(&g_word));
    EXPECT_TRUE(lock.held());
  }
  EXPECT_LT(SecondsSince(t0), 0.5);
  CloseOwnerMemFd(fd);
}

TEST(OwnerWordLock, AStoppedHolderIsWaitedForABoundedTime) {
  WaitForOwnerConversions(true);  // as the library's executors
  const int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const pid_t holder = HolderChild(fd);
  ASSERT_GT(holder, 0);
  kill(holder, SIGSTOP);
  timespec t0{};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  bool held = true;
  {
    OwnerWordLock lock(fd, reinterpret_cast<uintptr_t>(&g_word));
    held = lock.held();
  }
  const double waited = SecondsSince(t0);
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  WaitForOwnerConversions(false);
  EXPECT_FALSE(held);
  EXPECT_GE(waited, kOwnerWordLockWaitMs / 1000.0);
  EXPECT_LT(waited, kOwnerWordLockWaitMs / 1000.0 + 2);
  CloseOwnerMemFd(fd);
}

// The device's one thread serves every QP: it does not wait for a stopped
// holder in place but gives up soon with EAGAIN, which its transport takes
// as an access to try again later (owner_memory.h).
TEST(OwnerWordLock, WithoutWaitingInPlaceAHeldWordIsGivenUpSoonWithEagain) {
  ASSERT_FALSE(WaitsForOwnerConversions());
  const int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const pid_t holder = HolderChild(fd);
  ASSERT_GT(holder, 0);
  kill(holder, SIGSTOP);
  timespec t0{};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  bool held = true;
  int error = 0;
  {
    OwnerWordLock lock(fd, reinterpret_cast<uintptr_t>(&g_word));
    held = lock.held();
    error = errno;
  }
  const double waited = SecondsSince(t0);
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  EXPECT_FALSE(held);
  EXPECT_EQ(error, EAGAIN);
  EXPECT_TRUE(OwnerAccessMayClear(error));
  EXPECT_LT(waited, 0.5);
  CloseOwnerMemFd(fd);
}

}  // namespace
}  // namespace softverbs::datapath
