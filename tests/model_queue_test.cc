// ModelQueue: EDF order, ties broken by arrival, iteration from the head,
// erasing from anywhere.
#include "symphony/model_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>
#include <vector>

namespace symphony {
namespace {

using namespace symphony::literals;

struct Fixture {
  std::vector<Request> nodes = std::vector<Request>(256);
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

// Pushes mostly in deadline order (appended below the last request) with
// some out of order, equal deadlines, pops and walks from the head, against a
// sorted reference: the queue's order never depends on which path a push took.
TEST(ModelQueueTest, AppendsAndInsertsKeepEdfOrderAgainstAReference) {
  Fixture f;
  std::mt19937_64 rng(7);
  std::vector<std::tuple<std::int64_t, std::uint64_t, std::uint64_t>> ref;  // deadline, seq, tag
  std::vector<std::uint64_t> free_tags;
  for (std::uint64_t t = 0; t < f.nodes.size(); ++t) free_tags.push_back(t);
  std::int64_t last = 0;
  for (int step = 0; step < 20000; ++step) {
    const auto op = rng() % 10;
    if (op < 6 && !free_tags.empty()) {
      const std::uint64_t tag = free_tags.back();
      free_tags.pop_back();
      // 70 %: due after the last push (or equal); otherwise anywhere.
      const std::int64_t d = rng() % 10 < 7 ? last + static_cast<std::int64_t>(rng() % 3)
                                            : static_cast<std::int64_t>(rng() % (last + 5));
      last = std::max(last, d);
      ref.emplace_back(d, f.seq, tag);
      f.push(Duration::microseconds(d), tag);
    } else if (op < 9) {
      Request* r = f.q.pop_front();
      if (ref.empty()) {
        ASSERT_EQ(r, nullptr);
        continue;
      }
      const auto it = std::min_element(ref.begin(), ref.end());
      ASSERT_NE(r, nullptr);
      ASSERT_EQ(r->tag, std::get<2>(*it)) << "step " << step;
      free_tags.push_back(r->tag);
      ref.erase(it);
    } else {
      std::vector<std::uint64_t> walk, want;
      for (Request* r = f.q.front(); r; r = f.q.next(*r)) walk.push_back(r->tag);
      std::vector sorted = ref;
      std::sort(sorted.begin(), sorted.end());
      for (const auto& e : sorted) want.push_back(std::get<2>(e));
      ASSERT_EQ(walk, want) << "step " << step;
    }
    ASSERT_EQ(f.q.size(), ref.size());
  }
}

std::vector<std::uint64_t> walk(ModelQueue& q) {
  std::vector<std::uint64_t> order;
  for (Request* r = q.front(); r; r = q.next(*r)) order.push_back(r->tag);
  return order;
}

TEST(ModelQueueTest, EraseRemovesTheHeadTheMiddleAndTheLast) {
  Fixture f;
  for (std::uint64_t i = 0; i < 5; ++i)
    f.push(Duration::milliseconds(10 * static_cast<std::int64_t>(i + 1)), i);
  f.q.erase(f.nodes[2]);
  EXPECT_EQ(walk(f.q), (std::vector<std::uint64_t>{0, 1, 3, 4}));
  f.q.erase(f.nodes[0]);
  EXPECT_EQ(f.q.front()->tag, 1u);
  f.q.erase(f.nodes[4]);
  EXPECT_EQ(walk(f.q), (std::vector<std::uint64_t>{1, 3}));
  EXPECT_EQ(f.q.size(), 2u);
  f.q.erase(f.nodes[1]);
  f.q.erase(f.nodes[3]);
  EXPECT_TRUE(f.q.empty());
  EXPECT_EQ(f.q.front(), nullptr);
}

// After the last request is erased, a push due after every remaining one
// appends below the new last request (a stale last request would lose it).
TEST(ModelQueueTest, EraseOfTheLastRequestKeepsAppendsInOrder) {
  Fixture f;
  f.push(10_ms, 0);
  f.push(20_ms, 1);
  f.push(30_ms, 2);
  f.q.erase(f.nodes[2]);
  f.push(25_ms, 3);  // after 1, before the erased 2
  f.push(40_ms, 4);
  EXPECT_EQ(walk(f.q), (std::vector<std::uint64_t>{0, 1, 3, 4}));
  // Erasing the only request, then pushing again.
  Fixture g;
  g.push(10_ms, 0);
  g.q.erase(g.nodes[0]);
  EXPECT_TRUE(g.q.empty());
  g.push(5_ms, 1);
  g.push(6_ms, 2);
  EXPECT_EQ(walk(g.q), (std::vector<std::uint64_t>{1, 2}));
}

// Pushes (mostly appends), pops, erases of random requests and walks against
// a sorted reference.
TEST(ModelQueueTest, ErasesMixedWithPushesAndPopsKeepEdfOrderAgainstAReference) {
  Fixture f;
  std::mt19937_64 rng(11);
  std::vector<std::tuple<std::int64_t, std::uint64_t, std::uint64_t>> ref;  // deadline, seq, tag
  std::vector<std::uint64_t> free_tags;
  for (std::uint64_t t = 0; t < f.nodes.size(); ++t) free_tags.push_back(t);
  std::int64_t last = 0;
  for (int step = 0; step < 20000; ++step) {
    const auto op = rng() % 10;
    if (op < 5 && !free_tags.empty()) {
      const std::uint64_t tag = free_tags.back();
      free_tags.pop_back();
      const std::int64_t d = rng() % 10 < 7 ? last + static_cast<std::int64_t>(rng() % 3)
                                            : static_cast<std::int64_t>(rng() % (last + 5));
      last = std::max(last, d);
      ref.emplace_back(d, f.seq, tag);
      f.push(Duration::microseconds(d), tag);
    } else if (op < 7) {
      Request* r = f.q.pop_front();
      if (ref.empty()) {
        ASSERT_EQ(r, nullptr);
        continue;
      }
      const auto it = std::min_element(ref.begin(), ref.end());
      ASSERT_NE(r, nullptr);
      ASSERT_EQ(r->tag, std::get<2>(*it)) << "step " << step;
      free_tags.push_back(r->tag);
      ref.erase(it);
    } else if (op < 9) {
      if (ref.empty()) continue;
      // Half the time the last request (the queue's tail), else any.
      auto it = rng() % 2 ? std::max_element(ref.begin(), ref.end())
                          : ref.begin() + static_cast<std::ptrdiff_t>(rng() % ref.size());
      const std::uint64_t tag = std::get<2>(*it);
      f.q.erase(f.nodes[tag]);
      free_tags.push_back(tag);
      ref.erase(it);
    } else {
      std::vector sorted = ref;
      std::sort(sorted.begin(), sorted.end());
      std::vector<std::uint64_t> want;
      for (const auto& e : sorted) want.push_back(std::get<2>(e));
      ASSERT_EQ(walk(f.q), want) << "step " << step;
    }
    ASSERT_EQ(f.q.size(), ref.size());
  }
}

}  // namespace
}  // namespace symphony
