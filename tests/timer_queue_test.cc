#include "symphony/timer_queue.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "support/set_timer_queue.hpp"

namespace symphony {
namespace {

TimePoint t_ns(std::int64_t ns) { return TimePoint::from_ns(ns); }

template <class Q>
class TimerQueueTest : public ::testing::Test {};
using Queues = ::testing::Types<SplayTimerQueue, HeapTimerQueue, SetTimerQueue>;
TYPED_TEST_SUITE(TimerQueueTest, Queues);

TYPED_TEST(TimerQueueTest, FiresInDeadlineOrder) {
  TypeParam q(16);
  std::vector<TimerNode> n(5);
  const std::int64_t when[] = {50, 10, 40, 20, 30};
  for (int i = 0; i < 5; ++i) {
    n[i].owner = static_cast<std::uint32_t>(i);
    q.arm(n[i], t_ns(when[i]));
  }
  EXPECT_EQ(q.size(), 5u);
  EXPECT_EQ(q.next_time(), t_ns(10));
  EXPECT_EQ(q.pop_expired(t_ns(9)), nullptr);
  std::vector<std::uint32_t> order;
  while (TimerNode* e = q.pop_expired(t_ns(100))) {
    EXPECT_FALSE(e->armed);
    order.push_back(e->owner);
  }
  EXPECT_EQ(order, (std::vector<std::uint32_t>{1, 3, 4, 2, 0}));
  EXPECT_EQ(q.next_time(), TimePoint::infinite());
}

TYPED_TEST(TimerQueueTest, TiesFireInArmOrder) {
  TypeParam q(16);
  std::vector<TimerNode> n(6);
  for (int i = 0; i < 6; ++i) {
    n[i].owner = static_cast<std::uint32_t>(i);
    q.arm(n[i], t_ns(7));
  }
  q.arm(n[0], t_ns(7));  // re-arming moves it behind the others
  std::vector<std::uint32_t> order;
  while (TimerNode* e = q.pop_expired(t_ns(7))) order.push_back(e->owner);
  EXPECT_EQ(order, (std::vector<std::uint32_t>{1, 2, 3, 4, 5, 0}));
}

TYPED_TEST(TimerQueueTest, RearmAndCancel) {
  TypeParam q(16);
  TimerNode a, b, c;
  q.arm(a, t_ns(10));
  q.arm(b, t_ns(20));
  q.arm(c, t_ns(30));
  q.arm(a, t_ns(25));  // later
  q.arm(c, t_ns(5));   // earlier
  q.cancel(b);
  q.cancel(b);  // cancelling twice is harmless
  EXPECT_FALSE(b.armed);
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.pop_expired(t_ns(100)), &c);
  EXPECT_EQ(q.pop_expired(t_ns(100)), &a);
  EXPECT_EQ(q.pop_expired(t_ns(100)), nullptr);
}

// Random arm/re-arm/cancel/pop against a std::map reference.
TYPED_TEST(TimerQueueTest, MatchesReferenceUnderRandomOperations) {
  constexpr int kTimers = 64;
  TypeParam q(kTimers);
  std::vector<TimerNode> n(kTimers);
  for (int i = 0; i < kTimers; ++i) n[i].owner = static_cast<std::uint32_t>(i);
  std::map<std::pair<std::int64_t, std::uint64_t>, int> ref;  // (when, arm order) -> timer
  std::vector<std::pair<std::int64_t, std::uint64_t>> key(kTimers, {-1, 0});
  std::uint64_t order = 0;
  std::int64_t now = 0;
  std::mt19937_64 rng(3);
  for (int step = 0; step < 100'000; ++step) {
    const int i = static_cast<int>(rng() % kTimers);
    const auto op = rng() % 4;
    if (op <= 1) {
      const std::int64_t when = now + static_cast<std::int64_t>(rng() % 50);
      if (key[i].first >= 0) ref.erase(key[i]);
      key[i] = {when, order++};
      ref[key[i]] = i;
      q.arm(n[i], t_ns(when));
    } else if (op == 2) {
      if (key[i].first >= 0) ref.erase(key[i]);
      key[i] = {-1, 0};
      q.cancel(n[i]);
    } else {
      now += static_cast<std::int64_t>(rng() % 10);
      while (TimerNode* e = q.pop_expired(t_ns(now))) {
        ASSERT_FALSE(ref.empty());
        ASSERT_LE(ref.begin()->first.first, now);
        ASSERT_EQ(static_cast<int>(e->owner), ref.begin()->second);
        key[e->owner] = {-1, 0};
        ref.erase(ref.begin());
      }
      ASSERT_TRUE(ref.empty() || ref.begin()->first.first > now);
    }
    ASSERT_EQ(q.size(), ref.size());
    ASSERT_EQ(q.next_time(), ref.empty() ? TimePoint::infinite() : t_ns(ref.begin()->first.first));
  }
}

TEST(HeapTimerQueueTest, DoesNotGrowBeyondItsReservation) {
  HeapTimerQueue q(8);
  std::vector<TimerNode> n(8);
  for (int round = 0; round < 100; ++round) {
    for (auto& x : n) q.arm(x, t_ns(round));
    while (q.pop_expired(t_ns(round))) {
    }
  }
  EXPECT_EQ(q.size(), 0u);
}

TEST(HeapTimerQueueTest, GrowsPastItsReservationAndKeepsTheOrder) {
  HeapTimerQueue q(2);
  std::vector<TimerNode> n(100);
  for (std::uint32_t i = 0; i < n.size(); ++i) {
    n[i].owner = i;
    q.arm(n[i], t_ns(static_cast<std::int64_t>((i * 37) % 10)));  // ten of each time, armed in id order
  }
  ASSERT_EQ(q.size(), n.size());
  std::int64_t last_time = -1;
  std::uint32_t last_owner = 0;
  while (TimerNode* e = q.pop_expired(t_ns(100))) {
    const std::int64_t t = e->when.ns();
    ASSERT_GE(t, last_time);
    if (t == last_time) {
      EXPECT_GT(e->owner, last_owner);  // ties fire in arm order
    }
    last_time = t;
    last_owner = e->owner;
  }
  EXPECT_TRUE(q.empty());
}

// The array both 4-ary heaps (this one, sim::CompletionQueue) keep: the four
// children of every node start a cache line, before and after it grows, and
// push / remove_at keep the heap order.
TEST(LineHeapTest, ChildrenShareALineAndTheOrderHolds) {
  struct E {
    std::int64_t key;
    std::int64_t pad;
  };
  detail::LineHeap<E> h(16);
  auto before = [](const E& a, const E& b) { return a.key < b.key; };
  auto place = [&](std::uint32_t i, const E& e) { h[i] = e; };
  auto lines_ok = [&] {
    for (std::uint32_t i = 0; 4 * i + 1 < h.capacity(); ++i)
      if (reinterpret_cast<std::uintptr_t>(&h[4 * i + 1]) % 64 != 0) return false;
    return true;
  };
  EXPECT_TRUE(lines_ok());
  std::mt19937_64 rng(3);
  std::multiset<std::int64_t> ref;
  for (int i = 0; i < 1000; ++i) {  // grows 16 -> 1024
    const auto k = static_cast<std::int64_t>(rng() % 100);
    h.push(E{k, 0}, before, place);
    ref.insert(k);
  }
  EXPECT_GE(h.capacity(), 1000u);
  EXPECT_TRUE(lines_ok());
  for (int i = 0; i < 300; ++i) {  // remove from the middle too
    const std::uint32_t at = static_cast<std::uint32_t>(rng() % h.size());
    ref.erase(ref.find(h[at].key));
    h.remove_at(at, before, place);
  }
  while (h.size() > 0) {
    ASSERT_EQ(h[0].key, *ref.begin());
    ref.erase(ref.begin());
    h.remove_at(0, before, place);
  }
  EXPECT_TRUE(ref.empty());
}

}  // namespace
}  // namespace symphony
