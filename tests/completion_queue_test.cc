// CompletionQueue: the simulators' batches in flight, earliest end first and
// equal ends in push order, checked against a sorted reference.
#include "symphony/sim/completion_queue.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <utility>

namespace symphony::sim {
namespace {

TimePoint t_ns(std::int64_t ns) { return TimePoint::from_ns(ns); }

TEST(CompletionQueueTest, PopsByEndThenPushOrder) {
  CompletionQueue<int> q(4);
  q.push(t_ns(30), 1);
  q.push(t_ns(10), 2);
  q.push(t_ns(30), 3);
  q.push(t_ns(10), 4);
  q.push(t_ns(20), 5);  // past the reservation: grows
  ASSERT_EQ(q.size(), 5u);
  EXPECT_EQ(q.next_end(), t_ns(10));
  const int want[] = {2, 4, 5, 1, 3};
  for (int w : want) {
    const auto [end, p] = q.pop();
    EXPECT_EQ(p, w);
  }
  EXPECT_TRUE(q.empty());
}

TEST(CompletionQueueTest, MatchesASortedReferenceUnderRandomPushesAndPops) {
  std::mt19937_64 rng(7);
  CompletionQueue<std::uint64_t> q(16);
  std::map<std::pair<std::int64_t, std::uint64_t>, std::uint64_t> ref;  // (end, push#) -> payload
  std::uint64_t pushes = 0;
  for (int step = 0; step < 200000; ++step) {
    if (ref.size() < 3000 && rng() % 2 == 0) {
      const auto end = static_cast<std::int64_t>(rng() % 500);  // many equal ends
      const std::uint64_t payload = rng();
      q.push(t_ns(end), payload);
      ref[{end, pushes++}] = payload;
    } else if (!ref.empty()) {
      ASSERT_EQ(q.next_end(), t_ns(ref.begin()->first.first));
      const auto [end, p] = q.pop();
      ASSERT_EQ(end, t_ns(ref.begin()->first.first));
      ASSERT_EQ(p, ref.begin()->second);
      ref.erase(ref.begin());
    }
    ASSERT_EQ(q.size(), ref.size());
  }
}

}  // namespace
}  // namespace symphony::sim
