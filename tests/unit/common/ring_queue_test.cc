// common/ring_queue.h: first in, first out, indexed from the front, also
// when the array grows while its elements wrap around its end.
#include "common/ring_queue.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>

namespace softverbs {
namespace {

TEST(RingQueue, KeepsOrderAcrossWrapAndGrowth) {
  RingQueue<int> q;
  std::deque<int> model;
  int next = 0;
  // Pops and pushes in an uneven rhythm, so the front moves around the
  // array and the array grows (16, 32, 64, ...) while the queue wraps.
  for (int round = 0; round < 400; ++round) {
    for (int i = 0; i < 3 + round % 5; ++i) {
      q.push_back(next);
      model.push_back(next++);
    }
    for (int i = 0; i < 2 + round % 3 && !model.empty(); ++i) {
      ASSERT_EQ(q.front(), model.front());
      q.pop_front();
      model.pop_front();
    }
    ASSERT_EQ(q.size(), model.size());
    for (size_t i = 0; i < model.size(); ++i) ASSERT_EQ(q[i], model[i]) << "index " << i;
  }
  int sum = 0;
  q.ForEach([&](int& v) { sum += v; });
  int model_sum = 0;
  for (int v : model) model_sum += v;
  EXPECT_EQ(sum, model_sum);
  while (!q.empty()) q.pop_front();
  EXPECT_EQ(q.size(), 0u);
}

TEST(RingQueue, DropsWhatAPoppedElementHolds) {
  RingQueue<std::shared_ptr<int>> q;
  auto held = std::make_shared<int>(7);
  q.push_back(held);
  EXPECT_EQ(held.use_count(), 2);
  q.pop_front();
  EXPECT_EQ(held.use_count(), 1);
}

}  // namespace
}  // namespace softverbs
