// ModelQueue: EDF order, ties broken by arrival, iteration from the head.
#include "symphony/model_queue.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace symphony {
namespace {

using namespace symphony::literals;

struct Fixture {
  std::vector<Request> nodes = std::vector<Request>(16);
  ModelQueue q;
  std::uint64_t seq = 0;
  void push(Duration deadline, std::uint64_t tag) {
    Request& r = nodes[tag];
    r.deadline = TimePoint::epoch() + deadline;
    r.tag = tag;
    r.seq = seq++;
    q.push(r);
  }
};

TEST(ModelQueueTest, OrdersByDeadlineThenArrival) {
  Fixture f;
  f.push(30_ms, 0);
  f.push(10_ms, 1);
  f.push(20_ms, 2);
  f.push(10_ms, 3);  // same deadline as 1, arrived later
  EXPECT_EQ(f.q.size(), 4u);
  std::vector<std::uint64_t> order;
  while (Request* r = f.q.pop_front()) order.push_back(r->tag);
  EXPECT_EQ(order, (std::vector<std::uint64_t>{1, 3, 2, 0}));
  EXPECT_TRUE(f.q.empty());
}

TEST(ModelQueueTest, NextWalksFromTheHeadWithoutRemoving) {
  Fixture f;
  for (std::uint64_t i = 0; i < 5; ++i) f.push(Duration::milliseconds(50 - static_cast<std::int64_t>(i)), i);
  std::vector<std::uint64_t> order;
  for (Request* r = f.q.front(); r; r = f.q.next(*r)) order.push_back(r->tag);
  EXPECT_EQ(order, (std::vector<std::uint64_t>{4, 3, 2, 1, 0}));
  EXPECT_EQ(f.q.size(), 5u);
}

}  // namespace
}  // namespace symphony
