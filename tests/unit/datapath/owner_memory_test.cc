// Reaching an owner's bytes through its /proc/<pid>/mem (owner_memory.h):
// a page the kernel cannot reach for now - here, as under an owner's
// conversion (abi/ibverbs/write_hold.h), an empty page registered with a
// user-mode-only userfaultfd: the kernel's own accesses answer EIO - is
// reached once the userfaultfd lets it go, if this process waits for
// conversions, and fails at once if not; an owner whose address space is
// gone fails at once either way.
#include "datapath/owner_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "kernel_held_page.h"

namespace softverbs::datapath {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

class OwnerMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    fd_ = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd_, 0);
    ASSERT_TRUE(held_.ok()) << held_.error();
  }
  void TearDown() override {
    WaitForOwnerConversions(false);
    close(fd_);
  }
  // Lets the kernel reach the page again.
  void Release() { held_.Release(); }
  uint64_t va() const { return reinterpret_cast<uintptr_t>(held_.page()) + 64; }

  int fd_ = -1;
  testing::KernelHeldPage held_;
};

TEST_F(OwnerMemory, WithoutWaitingAnUnreachablePageFailsAtOnce) {
  WaitForOwnerConversions(false);
  uint64_t v = 7;
  const auto start = steady_clock::now();
  EXPECT_FALSE(WriteOwnerMemory(fd_, &v, 8, va()));
  EXPECT_FALSE(ReadOwnerMemory(fd_, &v, 8, va()));
  EXPECT_LT(steady_clock::now() - start, milliseconds(100));
}

TEST_F(OwnerMemory, WaitingAPageIsReachedOnceItCanBe) {
  WaitForOwnerConversions(true);
  std::thread settle([&] {
    std::this_thread::sleep_for(milliseconds(30));
    Release();
  });
  const uint64_t v = 0x1122334455667788;
  const auto start = steady_clock::now();
  EXPECT_TRUE(WriteOwnerMemory(fd_, &v, 8, va()));
  EXPECT_GE(steady_clock::now() - start, milliseconds(25));
  settle.join();
  uint64_t back = 0;
  EXPECT_TRUE(ReadOwnerMemory(fd_, &back, 8, va()));
  EXPECT_EQ(back, v);
  EXPECT_EQ(memcmp(held_.page() + 64, &v, 8), 0);
}

TEST_F(OwnerMemory, AnOwnerThatIsGoneFailsAtOnceEvenWaiting) {
  WaitForOwnerConversions(true);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c = 0;
    _exit(read(ready[0], &c, 1) == 1 ? 0 : 1);
  }
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/mem", child);
  const int mem = open(path, O_RDWR | O_CLOEXEC);
  ASSERT_GE(mem, 0);
  ASSERT_EQ(write(ready[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  uint64_t v = 1;
  const auto start = steady_clock::now();
  EXPECT_FALSE(WriteOwnerMemory(mem, &v, 8, va()));
  EXPECT_FALSE(ReadOwnerMemory(mem, &v, 8, va()));
  EXPECT_LT(steady_clock::now() - start, milliseconds(100));
  close(mem);
  close(ready[0]);
  close(ready[1]);
}

}  // namespace
}  // namespace softverbs::datapath
