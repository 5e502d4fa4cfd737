#include "symphony/runtime/spsc_ring.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

namespace symphony {
namespace {

TEST(SpscRingTest, CapacityIsRoundedUpToAPowerOfTwo) {
  EXPECT_EQ(SpscRing<int>(1).capacity(), 2u);
  EXPECT_EQ(SpscRing<int>(5).capacity(), 8u);
  EXPECT_EQ(SpscRing<int>(64).capacity(), 64u);
}

TEST(SpscRingTest, FifoUntilFullThenRefuses) {
  SpscRing<int> r(4);
  EXPECT_EQ(r.try_pop(), std::nullopt);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(r.try_push(i));
  EXPECT_FALSE(r.try_push(99));
  EXPECT_EQ(r.size_approx(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r.try_pop(), i);
  EXPECT_EQ(r.try_pop(), std::nullopt);
  // Wraps around many times.
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(r.try_push(i));
    ASSERT_EQ(*r.front(), i);
    r.pop();
  }
  EXPECT_TRUE(r.empty_approx());
}

// Counts live instances so that leaks and double destruction show.
struct Tracked {
  static inline std::atomic<int> live{0};
  int v;
  explicit Tracked(int x) : v(x) { ++live; }
  Tracked(Tracked&& o) noexcept : v(o.v) { ++live; }
  Tracked(const Tracked&) = delete;
  ~Tracked() { --live; }
};

TEST(SpscRingTest, ConstructsAndDestroysEveryElementOnce) {
  Tracked::live = 0;
  {
    SpscRing<Tracked> r(8);
    for (int i = 0; i < 6; ++i) ASSERT_TRUE(r.try_push(Tracked(i)));
    EXPECT_EQ(Tracked::live.load(), 6);
    {
      auto x = r.try_pop();
      EXPECT_EQ(x->v, 0);
    }
    EXPECT_EQ(Tracked::live.load(), 5);
  }  // the destructor destroys what is left
  EXPECT_EQ(Tracked::live.load(), 0);
}

TEST(SpscRingTest, MoveOnlyElements) {
  SpscRing<std::unique_ptr<int>> r(2);
  ASSERT_TRUE(r.try_push(std::make_unique<int>(5)));
  auto p = r.try_pop();
  ASSERT_TRUE(p && *p);
  EXPECT_EQ(**p, 5);
}

TEST(SpscRingTest, TwoThreadsTransferEverythingInOrder) {
  constexpr std::uint64_t kItems = 1'000'000;
  SpscRing<std::uint64_t> r(1024);
  std::thread producer([&] {
    for (std::uint64_t i = 0; i < kItems;)
      if (r.try_push(i)) ++i;
  });
  std::uint64_t expect = 0, sum = 0;
  while (expect < kItems) {
    if (auto v = r.try_pop()) {
      ASSERT_EQ(*v, expect);
      sum += *v;
      ++expect;
    }
  }
  producer.join();
  EXPECT_EQ(sum, kItems * (kItems - 1) / 2);
  EXPECT_TRUE(r.empty_approx());
}

}  // namespace
}  // namespace symphony
