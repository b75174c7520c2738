// Where registered memory's descriptors live (docs/datapath.md, "One
// descriptor per backing"): each converted range holds a memfd, placed above
// the application's descriptors, with the soft RLIMIT_NOFILE raised to make
// room. A binary of its own: the library fixes that place when it first
// keeps a descriptor - the memfds made ahead for a context's registrations,
// asked for by its first PD - which must come after this test lowered the
// limit.
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "test_env.h"

namespace softverbs::it {
namespace {

// The process's open descriptors: all of them, and those of backings.
void Descriptors(std::vector<int>* all, std::vector<int>* backings) {
  DIR* d = opendir("/proc/self/fd");
  ASSERT_NE(d, nullptr);
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const int fd = atoi(e->d_name);
    if (fd == dirfd(d)) continue;
    all->push_back(fd);
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    if (readlink(link.c_str(), target, sizeof(target) - 1) > 0 && strstr(target, "softverbs-mr")) {
      backings->push_back(fd);
    }
  }
  closedir(d);
}

// An application at a low soft limit registers more separate ranges than its
// limit has descriptors: every one is backed (none reached through
// /proc/self/mem, 10x slower, atomics not atomic across processes), the
// backings' descriptors sit at or above FD_SETSIZE, and the application
// still has every descriptor its own limit gave it, below it.
TEST(MrDescriptors, RegistrationsPastTheSoftLimitAreBackedAboveTheApplicationsDescriptors) {
  // The context first (its descriptors are the application's), its PD
  // once the limit is low.
  ibv_context* ctx = OpenDevice();
  ASSERT_NE(ctx, nullptr);
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  std::vector<int> open_now, ignored;
  Descriptors(&open_now, &ignored);
  constexpr int kSpare = 12;  // descriptors the application has left under its limit
  constexpr int kPages = 64;  // more ranges than that
  // The library's own readers, each opened once and kept: /proc/self/maps
  // (PROCMAP_QUERY, Linux 6.11 and later) and /proc/self/pagemap.
  constexpr int kLibraryReaders = 2;
  // The limit that leaves exactly kSpare free numbers below it, whatever
  // this process inherited (a descriptor above it does not count).
  rlimit tight = saved;
  {
    std::vector<bool> taken;
    for (int fd : open_now) {
      if (static_cast<size_t>(fd) >= taken.size()) taken.resize(fd + 1);
      taken[fd] = true;
    }
    int free_numbers = 0, fd = 0;
    for (; free_numbers < kSpare; ++fd) {
      if (static_cast<size_t>(fd) >= taken.size() || !taken[fd]) ++free_numbers;
    }
    tight.rlim_cur = static_cast<rlim_t>(fd);
  }
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < FD_SETSIZE + 2 * kPages) {
    GTEST_SKIP() << "the hard RLIMIT_NOFILE (" << saved.rlim_max
                 << ") leaves no room above FD_SETSIZE";
  }
  ASSERT_LE(tight.rlim_cur, saved.rlim_cur) << "too many descriptors open already";
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<char*> pages;
  for (int i = 0; i < kPages; ++i) {
    auto* p = static_cast<char*>(
        mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(p, MAP_FAILED);
    p[0] = static_cast<char>(i);
    pages.push_back(p);
  }
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ASSERT_NE(pd, nullptr) << strerror(errno);
  std::vector<ibv_mr*> mrs;
  int backed = 0;
  for (int i = 0; i < kPages; ++i) {
    ibv_mr* mr = ibv_reg_mr(pd, pages[i], page, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_NE(mr, nullptr) << "registration " << i << ": " << strerror(errno);
    mrs.push_back(mr);
    if (PageIsBacked(pages[i])) ++backed;
  }
  // The application's spare descriptors are all still there, below its
  // limit, but for the library's two readers.
  std::vector<int> opened;
  for (int i = 0; i < kSpare - kLibraryReaders; ++i) {
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0) << "descriptor " << i << " of the application's " << kSpare << ": "
                     << strerror(errno);
    if (fd < 0) break;
    EXPECT_LT(static_cast<rlim_t>(fd), tight.rlim_cur);
    opened.push_back(fd);
  }
  std::vector<int> all, backings;
  Descriptors(&all, &backings);
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  for (int fd : opened) close(fd);
  for (ibv_mr* mr : mrs) EXPECT_EQ(ibv_dereg_mr(mr), 0);
  setrlimit(RLIMIT_NOFILE, &saved);
  EXPECT_EQ(backed, kPages);
  // The ranges' memfds, and the library's memfds made ahead for the next
  // small registrations (abi/ibverbs/ready_backings.h: 16 at most).
  EXPECT_GE(backings.size(), static_cast<size_t>(kPages));
  EXPECT_LE(backings.size(), static_cast<size_t>(kPages) + 16);
  for (int fd : backings) EXPECT_GE(fd, FD_SETSIZE) << "a backing's descriptor";
  EXPECT_GT(now.rlim_cur, tight.rlim_cur) << "the soft limit was raised to make room";
  EXPECT_EQ(now.rlim_max, saved.rlim_max) << "never the hard limit";
  for (int i = 0; i < kPages; ++i) EXPECT_EQ(pages[i][0], static_cast<char>(i));
  for (char* p : pages) munmap(p, page);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_close_device(ctx), 0);
}

}  // namespace
}  // namespace softverbs::it
