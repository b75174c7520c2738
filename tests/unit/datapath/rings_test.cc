// The CQ ring (many producers, one consumer) and the receive queue (one
// producer, many claimers) under real threads on a memfd mapping.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "datapath/cq_ring.h"
#include "datapath/recv_queue.h"
#include "datapath/shm.h"

namespace softverbs::datapath {
namespace {

TEST(CqRing, KeepsOrderAndRefusesWhenFull) {
  int fd = CreateSharedFile("t", CqFileSize(4));
  ASSERT_GE(fd, 0);
  SharedMapping m;
  ASSERT_EQ(m.Map(fd), 0);
  InitCqFile(m.base(), 4, 1);
  CqRing ring(m.base());
  const uint32_t cap = ring.header()->capacity;
  for (uint32_t i = 0; i < cap; ++i) {
    Completion c{};
    c.wr_id = i;
    ASSERT_TRUE(ring.Push(c));
  }
  Completion extra{};
  EXPECT_FALSE(ring.Push(extra));
  EXPECT_EQ(ring.header()->overruns.load(), 1u);
  for (uint32_t i = 0; i < cap; ++i) {
    Completion c;
    ASSERT_TRUE(ring.Peek(&c));
    EXPECT_EQ(c.wr_id, i);
    ring.Pop();
  }
  Completion none;
  EXPECT_FALSE(ring.Peek(&none));
  close(fd);
}

TEST(CqRing, ManyProducersLoseNothing) {
  int fd = CreateSharedFile("t", CqFileSize(1024));
  SharedMapping m;
  ASSERT_EQ(m.Map(fd), 0);
  InitCqFile(m.base(), 1024, 1);
  CqRing ring(m.base());
  constexpr int kPerThread = 20000, kThreads = 3;
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread;) {
        Completion c{};
        c.wr_id = (uint64_t(t) << 32) | i;
        if (ring.Push(c)) ++i;
      }
    });
  }
  std::vector<int> next(kThreads, 0);
  for (int got = 0; got < kPerThread * kThreads;) {
    Completion c;
    if (!ring.Peek(&c)) continue;
    ring.Pop();
    int t = static_cast<int>(c.wr_id >> 32);
    // Each producer's completions arrive in its order.
    ASSERT_EQ(static_cast<int>(c.wr_id & 0xffffffff), next[t]);
    next[t]++;
    ++got;
  }
  for (auto& p : producers) p.join();
  close(fd);
}

TEST(CqRing, ArmFiresOnce) {
  int fd = CreateSharedFile("t", CqFileSize(4));
  SharedMapping m;
  ASSERT_EQ(m.Map(fd), 0);
  InitCqFile(m.base(), 4, 1);
  CqRing ring(m.base());
  EXPECT_FALSE(ring.TakeArm(false));
  ring.header()->armed.store(2);  // solicited only
  EXPECT_FALSE(ring.TakeArm(false));
  EXPECT_TRUE(ring.TakeArm(true));
  EXPECT_FALSE(ring.TakeArm(true));
  EXPECT_EQ(ring.header()->events_raised.load(), 1u);
  close(fd);
}

TEST(RecvQueue, EveryWqeClaimedExactlyOnce) {
  int fd = CreateSharedFile("t", RecvQueueFileSize(256, 2));
  SharedMapping m;
  ASSERT_EQ(m.Map(fd), 0);
  InitRecvQueueFile(m.base(), 256, 2);
  RecvQueue rq(m.base());
  constexpr uint64_t kTotal = 100000;
  std::atomic<bool> done{false};
  std::vector<std::vector<uint64_t>> claimed(3);
  std::vector<std::thread> claimers;
  for (int t = 0; t < 3; ++t) {
    claimers.emplace_back([&, t] {
      ClaimedRecv r;
      while (!done.load() || rq.Count() > 0) {
        if (rq.Claim(&r)) {
          EXPECT_EQ(r.num_sge, 1u);
          EXPECT_EQ(r.sge[0].addr, r.wr_id * 3);  // never a torn copy
          claimed[t].push_back(r.wr_id);
        }
      }
    });
  }
  for (uint64_t i = 0; i < kTotal;) {
    RecvSge sge{i * 3, 8, 1};
    if (rq.Post(i, &sge, 1)) ++i;
  }
  done = true;
  for (auto& c : claimers) c.join();
  std::set<uint64_t> all;
  size_t n = 0;
  for (auto& v : claimed) {
    n += v.size();
    all.insert(v.begin(), v.end());
  }
  EXPECT_EQ(n, kTotal);
  EXPECT_EQ(all.size(), kTotal);
  close(fd);
}

TEST(RecvQueue, FullQueueRefusesPost) {
  int fd = CreateSharedFile("t", RecvQueueFileSize(4, 1));
  SharedMapping m;
  ASSERT_EQ(m.Map(fd), 0);
  InitRecvQueueFile(m.base(), 4, 1);
  RecvQueue rq(m.base());
  RecvSge sge{0, 1, 1};
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(rq.Post(i, &sge, 1));
  EXPECT_FALSE(rq.Post(9, &sge, 1));
  close(fd);
}

}  // namespace
}  // namespace softverbs::datapath
