// Key checks and the split of an MR range into mapped and /proc/self/mem
// pieces.
#include "datapath/memory.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <sys/shm.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace softverbs::datapath {
namespace {

void Publish(MrEntry* e, uint32_t key, uint32_t access) {
  e->access = access;
  e->owner = 3;
  e->pdn = 7;
  e->iova = 0x1000;
  e->length = 0x100;
  e->addr = 0x50000;
  e->rkey = key | 0x80000000u;
  e->lkey = key;
}

TEST(CheckMrAccess, EveryRule) {
  MrEntry e{};
  Publish(&e, 0x100, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  uint64_t va = 0;
  const uint32_t rkey = 0x80000100u;
  EXPECT_EQ(CheckMrAccess(e, rkey, true, 7, 3, IBV_ACCESS_REMOTE_READ, 0x1010, 16, &va),
            MrCheck::kOk);
  EXPECT_EQ(va, 0x50010u);
  EXPECT_EQ(CheckMrAccess(e, 0x100, true, 7, 3, 0, 0x1010, 16, &va), MrCheck::kBadKey);
  EXPECT_EQ(CheckMrAccess(e, rkey, true, 8, 3, 0, 0x1010, 16, &va), MrCheck::kBadPd);
  EXPECT_EQ(CheckMrAccess(e, rkey, true, 7, 4, 0, 0x1010, 16, &va), MrCheck::kBadOwner);
  EXPECT_EQ(CheckMrAccess(e, rkey, true, 7, 3, IBV_ACCESS_REMOTE_WRITE, 0x1010, 16, &va),
            MrCheck::kNoAccess);
  EXPECT_EQ(CheckMrAccess(e, rkey, true, 7, 3, 0, 0x10f8, 16, &va), MrCheck::kOutOfRange);
  EXPECT_EQ(CheckMrAccess(e, rkey, true, 7, 3, 0, 0xff0, 16, &va), MrCheck::kOutOfRange);
  e.rkey = 0;  // invalidated
  EXPECT_EQ(CheckMrAccess(e, rkey, true, 7, 3, 0, 0x1010, 16, &va), MrCheck::kBadKey);
}

TEST(AddMrPieces, HeadMiddleTail) {
  uint8_t backed[8192];
  MrMapping m;
  m.backed = backed;
  m.backed_begin = 0x10000;
  m.backed_end = 0x12000;
  m.mem_fd = 5;
  MrEntry e{};  // a peer's mapping: the entry's own range is not read
  PieceList list;
  ASSERT_TRUE(AddMrPieces(m, e, 0xff00, 0x2200, &list));
  ASSERT_EQ(list.count, 3);
  EXPECT_EQ(list.piece[0].ptr, nullptr);
  EXPECT_EQ(list.piece[0].len, 0x100u);
  EXPECT_EQ(list.piece[1].ptr, backed);
  EXPECT_EQ(list.piece[1].len, 0x2000u);
  EXPECT_EQ(list.piece[2].ptr, nullptr);
  EXPECT_EQ(list.piece[2].va, 0x12000u);
  EXPECT_EQ(list.bytes, 0x2200u);
}

// The owner reaches every byte of its MR directly; the bytes outside the
// backed pages carry its /proc/self/mem too, which an atomic there locks.
TEST(AddMrPieces, TheOwnersPiecesOutsideItsBackingCarryItsLockFile) {
  MrMapping m;
  m.local = true;
  m.mem_fd = 5;
  MrEntry e{};
  e.backed_begin = 0x10000;
  e.backed_end = 0x12000;
  PieceList list;
  ASSERT_TRUE(AddMrPieces(m, e, 0xff00, 0x2200, &list));
  ASSERT_EQ(list.count, 3);
  EXPECT_EQ(list.piece[0].ptr, reinterpret_cast<uint8_t*>(0xff00));
  EXPECT_EQ(list.piece[0].mem_fd, 5);
  EXPECT_EQ(list.piece[1].ptr, reinterpret_cast<uint8_t*>(0x10000));
  EXPECT_EQ(list.piece[1].mem_fd, -1);
  EXPECT_EQ(list.piece[2].ptr, reinterpret_cast<uint8_t*>(0x12000));
  EXPECT_EQ(list.piece[2].mem_fd, 5);
  EXPECT_EQ(list.bytes, 0x2200u);
}

TEST(CopyPieces, ThroughProcSelfMem) {
  // Our own /proc/self/mem stands in for an owner's.
  int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  char target[32] = {};
  const char src[] = "partial page bytes";
  PieceList dst, from;
  dst.Add({nullptr, fd, reinterpret_cast<uint64_t>(target), sizeof(src)});
  from.Add({reinterpret_cast<uint8_t*>(const_cast<char*>(src)), -1, 0, sizeof(src)});
  ASSERT_TRUE(CopyPieces(dst, from));
  EXPECT_STREQ(target, src);
  uint64_t word = 5, old = 0;
  MemPiece p{nullptr, fd, reinterpret_cast<uint64_t>(&word), 8};
  ASSERT_TRUE(AtomicFetchAdd(p, 3, &old));
  EXPECT_EQ(old, 5u);
  EXPECT_EQ(word, 8u);
  close(fd);
}

}  // namespace
}  // namespace softverbs::datapath

namespace softverbs::datapath {
namespace {

// A SysV segment is attached only within the IPC namespace its id is of
// (elsewhere the same id may name another segment), and whole.
TEST(SharedMappingSegment, AttachesOnlyInItsOwnIpcNamespace) {
  const int id = shmget(IPC_PRIVATE, 8192, IPC_CREAT | 0600);
  ASSERT_GE(id, 0);
  SharedMapping m;
  EXPECT_EQ(m.Attach(id, IpcNamespaceId() + 1), EXDEV);
  EXPECT_EQ(m.base(), nullptr);
  EXPECT_EQ(m.Attach(id, 0), EXDEV);
  ASSERT_EQ(m.Attach(id, IpcNamespaceId()), 0);
  EXPECT_NE(m.base(), nullptr);
  EXPECT_EQ(m.size(), 8192u);
  shmctl(id, IPC_RMID, nullptr);  // gone once m lets go
  m.Reset();
  EXPECT_EQ(m.base(), nullptr);
}

// UseBacking takes a backing only if the MR's backed range lies inside it.
TEST(UseBacking, RefusesABackedRangePastTheMapping) {
  const int id = shmget(IPC_PRIVATE, 8192, IPC_CREAT | 0600);
  ASSERT_GE(id, 0);
  SharedMapping m;
  ASSERT_EQ(m.Attach(id, IpcNamespaceId()), 0);
  shmctl(id, IPC_RMID, nullptr);
  MrEntry e{};
  e.backed_begin = 0x10000;
  e.backed_end = 0x11000;
  e.backed_offset = 0x1000;
  MrMapping inside;
  UseBacking(m, e, &inside);
  EXPECT_EQ(inside.backed, static_cast<uint8_t*>(m.base()) + 0x1000);
  EXPECT_EQ(inside.backed_begin, 0x10000u);
  e.backed_offset = 0x1001;  // one byte past the end
  MrMapping past;
  UseBacking(m, e, &past);
  EXPECT_EQ(past.backed, nullptr);
  EXPECT_EQ(past.backed_end, 0u);
}

}  // namespace
}  // namespace softverbs::datapath
