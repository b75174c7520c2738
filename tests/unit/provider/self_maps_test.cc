// The registration's view of its own mappings (src/abi/ibverbs/self_maps.h):
// shared mappings are told apart by name - registration's own memfds may be
// converted again, the application's shared memory must not be (docs/
// datapath.md, "Registered memory"). Both readers: PROCMAP_QUERY on this
// kernel (SelfMaps::At) and the text of /proc/self/maps (ParseMapsLine, the
// fallback of kernels before 6.11).
#include "abi/ibverbs/self_maps.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

namespace softverbs::provider {
namespace {

TEST(ParseMapsLine, TellsRegistrationsOwnMemfdsFromOtherSharedMemory) {
  Vma v;
  ASSERT_TRUE(ParseMapsLine(
      "7f2d31abb000-7f2d31acb000 rw-s 00000000 00:01 3422673    /memfd:softverbs-mr (deleted)\n",
      &v));
  EXPECT_EQ(v.start, 0x7f2d31abb000u);
  EXPECT_EQ(v.end, 0x7f2d31acb000u);
  EXPECT_TRUE(v.readable && v.writable && v.shared);
  EXPECT_EQ(v.inode, 3422673u);
  EXPECT_TRUE(v.registration_backing);
  ASSERT_TRUE(
      ParseMapsLine("7f2d31abb000-7f2d31acb000 rw-s 00000000 00:01 3421692  /dev/zero "
                    "(deleted)\n",
                    &v));
  EXPECT_TRUE(v.shared);
  EXPECT_FALSE(v.registration_backing);
  ASSERT_TRUE(ParseMapsLine(
      "7f2d31abb000-7f2d31acb000 rw-s 00000000 00:01 3421693  /memfd:softverbs-mrx (deleted)\n",
      &v));
  EXPECT_FALSE(v.registration_backing);
  // Private: made private before a fork, never "ours" to convert again as shared.
  ASSERT_TRUE(ParseMapsLine(
      "7f2d31abb000-7f2d31acb000 rw-p 00000000 00:01 3422673  /memfd:softverbs-mr (deleted)\n",
      &v));
  EXPECT_FALSE(v.shared);
  EXPECT_FALSE(v.registration_backing);
  // A SysV segment: its id is the inode.
  ASSERT_TRUE(ParseMapsLine(
      "7f2d31abb000-7f2d31acb000 rw-s 00002000 00:01 14155831  /SYSV00000000 (deleted)\n", &v));
  EXPECT_TRUE(v.sysv_shm);
  EXPECT_FALSE(v.registration_backing);
  EXPECT_EQ(v.inode, 14155831u);
  EXPECT_EQ(v.offset, 0x2000u);
  ASSERT_TRUE(ParseMapsLine(
      "7f2d31abb000-7f2d31acb000 rw-s 00000000 00:01 3422673    /memfd:softverbs-mr (deleted)\n",
      &v));
  EXPECT_FALSE(v.sysv_shm);
  ASSERT_TRUE(ParseMapsLine("55d0c1a00000-55d0c1a21000 rw-p 00000000 00:00 0 \n", &v));
  EXPECT_TRUE(v.anonymous());
  EXPECT_EQ(v.page_size, 0u);  // the text does not say: base pages
  EXPECT_FALSE(ParseMapsLine("not a mapping\n", &v));
}

// MAP_PRIVATE | MAP_HUGETLB: hugetlbfs's inode, yet anonymous memory (an
// untouched page reads as zeros), in pages of the default huge page size.
TEST(ParseMapsLine, TellsPrivateAnonymousHugePages) {
  Vma v;
  ASSERT_TRUE(ParseMapsLine(
      "7fd2fc600000-7fd2fc800000 rw-p 00000000 00:11 1085117    /anon_hugepage (deleted)\n", &v));
  EXPECT_TRUE(v.anon_hugepage);
  EXPECT_TRUE(v.anonymous());
  EXPECT_EQ(v.inode, 1085117u);
  unsigned long long kib = 0;
  if (FILE* f = fopen("/proc/meminfo", "re")) {
    char line[128];
    while (fgets(line, sizeof(line), f)) sscanf(line, "Hugepagesize: %llu kB", &kib);
    fclose(f);
  }
  EXPECT_EQ(v.page_size, kib * 1024);
  // Shared huge pages (MAP_SHARED | MAP_HUGETLB) are not private memory.
  ASSERT_TRUE(ParseMapsLine(
      "7fd2fc600000-7fd2fc800000 rw-s 00000000 00:11 1085118    /anon_hugepage (deleted)\n", &v));
  EXPECT_FALSE(v.anon_hugepage);
  EXPECT_FALSE(v.anonymous());
}

// The kernel's answer says the page size of every mapping (huge pages:
// integration.it_pd_mr_huge_pages, which reserves them).
TEST(SelfMaps, TellsThePageSize) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* small = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(small, MAP_FAILED);
  SelfMaps maps;
  Vma v;
  ASSERT_TRUE(maps.At(reinterpret_cast<uint64_t>(small), &v));
  EXPECT_TRUE(v.page_size == page || v.page_size == 0) << v.page_size;  // 0: the text
  EXPECT_FALSE(v.anon_hugepage);
  EXPECT_TRUE(v.anonymous());
  munmap(small, page);
}

TEST(SelfMaps, TellsRegistrationsOwnMemfdsFromOtherSharedMemory) {
  const size_t len = 4 * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* shared = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  const int fd = memfd_create(kBackingMemfdName, MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(len)), 0);
  void* ours = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(ours, MAP_FAILED);
  SelfMaps maps;
  Vma v;
  ASSERT_TRUE(maps.At(reinterpret_cast<uint64_t>(shared), &v));
  EXPECT_TRUE(v.shared);
  EXPECT_FALSE(v.registration_backing);
  ASSERT_TRUE(maps.At(reinterpret_cast<uint64_t>(ours), &v));
  EXPECT_TRUE(v.shared);
  EXPECT_TRUE(v.registration_backing);
  munmap(ours, len);
  munmap(shared, len);
  close(fd);
}

TEST(SelfMaps, TellsASysvSegmentAndItsId) {
  const size_t len = 4 * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const int id = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
  ASSERT_GE(id, 0);
  void* segment = shmat(id, nullptr, 0);
  shmctl(id, IPC_RMID, nullptr);  // gone with its last attachment
  ASSERT_NE(segment, reinterpret_cast<void*>(-1));
  void* shared = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  SelfMaps maps;
  Vma v;
  ASSERT_TRUE(maps.At(reinterpret_cast<uint64_t>(segment) + len / 2, &v));
  EXPECT_TRUE(v.shared);
  EXPECT_TRUE(v.sysv_shm);
  EXPECT_EQ(v.inode, static_cast<uint64_t>(id));
  EXPECT_EQ(v.start, reinterpret_cast<uint64_t>(segment));
  ASSERT_TRUE(maps.At(reinterpret_cast<uint64_t>(shared), &v));
  EXPECT_FALSE(v.sysv_shm);
  munmap(shared, len);
  shmdt(segment);
}

}  // namespace
}  // namespace softverbs::provider
