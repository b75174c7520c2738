// The tag list of a tag-matching SRQ (datapath/tag_matching.h) on its own:
// posting order, masks, stale handles, phase synchronisation, and a holder
// of the list's lock that dies holding it.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "datapath/tag_matching.h"

namespace softverbs::datapath {
namespace {

class TagListTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kTags = 4;
  void SetUp() override {
    bytes_ = sizeof(RecvQueueHeader) + TmListBytes(kTags);
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    base_ = static_cast<uint8_t*>(p);
    auto* rq = reinterpret_cast<RecvQueueHeader*>(base_);
    rq->tm_tags = kTags;
    rq->tm_offset = sizeof(RecvQueueHeader);
    InitTagList(reinterpret_cast<TmListHeader*>(base_ + rq->tm_offset), kTags);
  }
  void TearDown() override { munmap(base_, bytes_); }
  TagList List() { return TagList(reinterpret_cast<RecvQueueHeader*>(base_)); }
  TmListHeader* Header() {
    return reinterpret_cast<TmListHeader*>(base_ + sizeof(RecvQueueHeader));
  }

  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
};

TEST_F(TagListTest, OldestMatchingTagWinsAndStaleHandlesMiss) {
  TagList list = List();
  ASSERT_TRUE(list.valid());
  RecvSge sge{0x1000, 64, 7};
  uint32_t h1 = 0, h2 = 0, h3 = 0;
  ASSERT_EQ(list.Add(1, 0x15, 0x0f, &sge, 1, &h1), 0);  // matches any tag ending in 5
  ASSERT_EQ(list.Add(2, 0x25, 0xff, &sge, 1, &h2), 0);
  TmTag got{};
  ASSERT_TRUE(list.Match(0x25, &got));
  EXPECT_EQ(got.recv_wr_id, 1u) << "the oldest tag whose masked bits agree";
  ASSERT_TRUE(list.Match(0x25, &got));
  EXPECT_EQ(got.recv_wr_id, 2u);
  EXPECT_FALSE(list.Match(0x25, &got)) << "each tag matches once";
  EXPECT_FALSE(list.Remove(h1)) << "a consumed tag cannot be removed";
  ASSERT_EQ(list.Add(3, 0x35, 0xff, &sge, 1, &h3), 0);
  EXPECT_NE(h3, h1);
  EXPECT_FALSE(list.Remove(h1)) << "a stale handle does not name the slot's new tag";
  EXPECT_TRUE(list.Remove(h3));
}

TEST_F(TagListTest, FullListAndPhaseSynchronisation) {
  TagList list = List();
  RecvSge sge{0x1000, 64, 7};
  uint32_t h = 0;
  for (uint32_t i = 0; i < kTags; ++i) ASSERT_EQ(list.Add(i, i, ~0ull, &sge, 1, &h), 0);
  EXPECT_EQ(list.Add(9, 9, ~0ull, &sge, 1, &h), ENOMEM);
  list.CountUnexpected();
  EXPECT_TRUE(list.SyncRequired());
  TmTag got{};
  EXPECT_FALSE(list.Match(2, &got)) << "matching waits for software to sync";
  list.Sync(1);
  EXPECT_FALSE(list.SyncRequired());
  EXPECT_TRUE(list.Match(2, &got));
}

TEST_F(TagListTest, ALockHolderThatDiesDoesNotHoldTheList) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pthread_mutex_lock(&Header()->lock);  // and die holding it
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  TagList list = List();
  RecvSge sge{0x1000, 64, 7};
  uint32_t h = 0;
  EXPECT_EQ(list.Add(1, 1, ~0ull, &sge, 1, &h), 0) << "the next taker recovers the lock";
  TmTag got{};
  EXPECT_TRUE(list.Match(1, &got));
}

}  // namespace
}  // namespace softverbs::datapath
