// ibv_fork_init, ibv_is_fork_initialized and RDMAV_FORK_SAFE, as rdma-core
// has them (docs/status.md). Their state is the process's, set once: every
// case runs in a child forked from a parent that never touched the device.
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "test_env.h"

// Exported by libibverbs (IBVERBS_1.0), declared in rdma-core's private
// headers only.
extern "C" int ibv_dontfork_range(void* base, size_t size);

namespace softverbs::it {
namespace {

// Runs body in a forked child; the child's exit status is the number of
// the first check that failed (0: all held).
int InChild(const std::function<int()>& body) {
  const pid_t child = fork();
  if (child == 0) _exit(body());
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// Whether the mapping that holds p has the "dc" VmFlag (MADV_DONTFORK:
// not copied into a child).
bool DontFork(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long begin = 0, end = 0;
    if (sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 && line.find('-') < 16) {
      inside = addr >= begin && addr < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line.find(" dc") != std::string::npos;
    }
  }
  return false;
}

// Registers one touched page of fresh memory on the device; returns it
// (nullptr if any step failed).
ibv_mr* RegisterAPage(void** page_out) {
  ibv_context* ctx = OpenDevice();
  ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
  if (!pd) return nullptr;
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return nullptr;
  memset(page, 1, 4096);
  *page_out = page;
  return ibv_reg_mr(pd, page, 4096, IBV_ACCESS_LOCAL_WRITE);
}

// The write hold's userfaultfd (src/abi/ibverbs/write_hold.h) stands for
// the address space of the process that made it: a child that registers
// memory after a fork makes its own. Through its parent's, the child's
// registration would write-protect the parent's pages at the same
// addresses, and the parent's next write there would wait for ever.
TEST(Fork, AChildsRegistrationDoesNotHoldItsParentsWrites) {
  EXPECT_EQ(InChild([] {
              void* page = nullptr;
              if (!RegisterAPage(&page)) return 1;  // this process has its userfaultfd now
              constexpr size_t kLen = 16 * 4096;
              char* buf = static_cast<char*>(
                  mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
              if (buf == MAP_FAILED) return 2;
              memset(buf, 1, kLen);
              const int child = InChild([buf] {
                ibv_context* ctx = OpenDevice();
                ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
                if (!pd) return 1;
                return ibv_reg_mr(pd, buf, kLen, IBV_ACCESS_LOCAL_WRITE) ? 0 : 2;
              });
              if (child != 0) return 10 + child;
              std::atomic<bool> written{false};
              std::thread writer([&] {
                memset(buf, 2, kLen);
                written = true;
              });
              for (int i = 0; i < 500 && !written; ++i) usleep(10000);  // 5 s at most
              if (!written) {
                writer.detach();  // waits for ever; the process exits around it
                return 3;
              }
              writer.join();
              return 0;
            }),
            0);
}

// A context's watch thread makes memfds ahead for small registrations
// (src/abi/ibverbs/ready_backings.h) and, while it makes them, holds locks
// a registration takes too. A fork at any moment of that leaves the child
// none of the parent's memfds (they were offered for the parent's
// contexts) and no lock held: each child registers a small range of its
// own, backed, within the alarm's time.
TEST(Fork, AForkWhileMemfdsAreMadeAheadLeavesTheChildRegistering) {
  EXPECT_EQ(InChild([] {
              ibv_context* ctx = OpenDevice();
              ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
              if (!pd) return 1;
              for (int round = 0; round < 40; ++round) {
                // Small fresh ranges: their registrations take memfds made
                // ahead and wake the watch thread to make more.
                void* page =
                    mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (page == MAP_FAILED) return 2;
                memset(page, 1, 4096);
                ibv_mr* mr = ibv_reg_mr(pd, page, 4096, IBV_ACCESS_LOCAL_WRITE);
                if (!mr) return 3;
                const int child = InChild([] {
                  alarm(10);  // a lock left held: SIGALRM, not a hang
                  void* mine = nullptr;
                  ibv_mr* own = RegisterAPage(&mine);
                  if (!own) return 1;
                  if (!PageIsBacked(mine)) return 2;
                  return ibv_dereg_mr(own) == 0 ? 0 : 3;
                });
                if (child != 0) return 10 + (child < 0 ? 9 : child);
                if (ibv_dereg_mr(mr) != 0) return 4;
                munmap(page, 4096);
              }
              return 0;
            }),
            0);
}

// softverbs gives a child copies of live MRs' pages without ibv_fork_init,
// as a kernel with copy-on-fork does, where libibverbs answers UNNEEDED.
TEST(Fork, StatusIsUnneeded) {
  EXPECT_EQ(InChild([] { return ibv_is_fork_initialized() == IBV_FORK_UNNEEDED ? 0 : 1; }), 0);
}

// Before any registration ibv_fork_init succeeds (twice), and ranges
// registered afterwards are not copied into children.
TEST(Fork, InitBeforeRegistrationMakesRangesDontFork) {
  EXPECT_EQ(InChild([] {
              if (ibv_fork_init() != 0) return 1;
              if (ibv_fork_init() != 0) return 2;
              void* page = nullptr;
              ibv_mr* mr = RegisterAPage(&page);
              if (!mr) return 3;
              if (!DontFork(page)) return 4;
              if (ibv_is_fork_initialized() != IBV_FORK_UNNEEDED) return 5;
              return 0;
            }),
            0);
}

// After a registration it is too late: EINVAL (rdma-core's too_late), and
// the ranges stay copied into children.
TEST(Fork, InitAfterARegistrationIsEinval) {
  EXPECT_EQ(InChild([] {
              void* page = nullptr;
              ibv_mr* mr = RegisterAPage(&page);
              if (!mr) return 1;
              if (ibv_fork_init() != EINVAL) return 2;
              if (DontFork(page)) return 3;
              return 0;
            }),
            0);
}

// ibv_dontfork_range before ibv_fork_init makes it too late as well.
TEST(Fork, InitAfterDontforkRangeIsEinval) {
  EXPECT_EQ(InChild([] {
              char buf[64];
              if (ibv_dontfork_range(buf, sizeof(buf)) != 0) return 1;
              return ibv_fork_init() == EINVAL ? 0 : 2;
            }),
            0);
}

// RDMAV_FORK_SAFE (or IBV_FORK_SAFE), any value but "0", calls
// ibv_fork_init when the device list is first read.
TEST(Fork, EnvironmentCallsInit) {
  for (const char* name : {"RDMAV_FORK_SAFE", "IBV_FORK_SAFE"}) {
    EXPECT_EQ(InChild([name] {
                setenv(name, "1", 1);
                void* page = nullptr;
                ibv_mr* mr = RegisterAPage(&page);
                if (!mr) return 1;
                if (!DontFork(page)) return 2;
                return ibv_fork_init() == 0 ? 0 : 3;
              }),
              0)
        << name;
  }
  EXPECT_EQ(InChild([] {
              setenv("RDMAV_FORK_SAFE", "0", 1);
              void* page = nullptr;
              ibv_mr* mr = RegisterAPage(&page);
              if (!mr) return 1;
              return DontFork(page) ? 2 : 0;
            }),
            0)
      << "RDMAV_FORK_SAFE=0";
}

}  // namespace
}  // namespace softverbs::it
