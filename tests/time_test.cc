#include "symphony/time.hpp"

#include <gtest/gtest.h>

namespace symphony {
namespace {

using namespace symphony::literals;

TEST(DurationTest, ConvertsUnitsExactly) {
  EXPECT_EQ(Duration::microseconds(3).ns(), 3000);
  EXPECT_EQ(Duration::milliseconds(2).ns(), 2'000'000);
  EXPECT_EQ(Duration::seconds(1).ns(), 1'000'000'000);
  EXPECT_EQ((5_ms).ns(), 5'000'000);
  EXPECT_EQ((1.053_ms).ns(), 1'053'000);
  EXPECT_DOUBLE_EQ((1500_us).to_ms(), 1.5);
}

TEST(DurationTest, FromMsRoundsToTheNearestNanosecond) {
  EXPECT_EQ(Duration::from_ms(0.75).ns(), 750'000);
  EXPECT_EQ(Duration::from_ms(1e-6 * 0.4).ns(), 0);
  EXPECT_EQ(Duration::from_ms(1e-6 * 0.6).ns(), 1);
  EXPECT_EQ(Duration::from_ms(-1e-6 * 0.6).ns(), -1);
  EXPECT_EQ(Duration::from_seconds(0.001).ns(), 1'000'000);
}

TEST(DurationTest, ArithmeticAndOrdering) {
  EXPECT_EQ(3_ms + 2_ms, 5_ms);
  EXPECT_EQ(3_ms - 5_ms, -(2_ms));
  EXPECT_EQ(2_ms * 3, 6_ms);
  EXPECT_EQ(6_ms / 4, 1500_us);
  EXPECT_LT(1_ms, 2_ms);
  EXPECT_EQ(max(1_ms, 2_ms), 2_ms);
  EXPECT_EQ(min(1_ms, 2_ms), 1_ms);
}

TEST(TimePointTest, InfinityLeavesRoomForArithmetic) {
  const TimePoint inf = TimePoint::infinite();
  EXPECT_TRUE(inf.is_infinite());
  EXPECT_GT(inf + Duration::seconds(3600 * 24 * 365), inf);  // no wrap-around
  EXPECT_LT(TimePoint::neg_infinite() - Duration::seconds(3600), TimePoint::epoch());
  EXPECT_EQ((inf - TimePoint::epoch()).ns(), Duration::kInfiniteNs);
}

TEST(TimePointTest, DifferencesAreDurations) {
  const TimePoint a = TimePoint::from_ns(1000), b = TimePoint::from_ns(250);
  EXPECT_EQ(a - b, Duration::nanoseconds(750));
  EXPECT_EQ(b + Duration::nanoseconds(750), a);
  EXPECT_EQ(max(a, b), a);
}

TEST(VirtualClockTest, MovesOnlyWhenTold) {
  VirtualClock c;
  EXPECT_EQ(c.now(), TimePoint::epoch());
  c.advance(5_ms);
  EXPECT_EQ(c.now(), TimePoint::epoch() + 5_ms);
  c.advance_to(TimePoint::epoch() + 7_ms);
  EXPECT_EQ(c.now().ns(), 7'000'000);
  EXPECT_EQ(c.now(), c.now());
}

TEST(FormatTest, MillisecondsAndSecondsAreExactWithoutTrailingZeros) {
  EXPECT_EQ(format_ms(5_ms), "5");
  EXPECT_EQ(format_ms(Duration::from_ms(6.125)), "6.125");
  EXPECT_EQ(format_ms(1_ns), "0.000001");
  EXPECT_EQ(format_ms(Duration::zero()), "0");
  EXPECT_EQ(format_ms(Duration::nanoseconds(-1'500'000)), "-1.5");
  EXPECT_EQ(format_ms(Duration::nanoseconds(123'456'789'012)), "123456.789012");
  EXPECT_EQ(format_seconds(Duration::from_seconds(1.5)), "1.5");
  EXPECT_EQ(format_seconds(10_s), "10");
  EXPECT_EQ(format_seconds(1_ns), "0.000000001");
  EXPECT_EQ(format_seconds(Duration::nanoseconds(-2)), "-0.000000002");
}

TEST(SteadyClockTest, IsMonotone) {
  SteadyClock c;
  TimePoint prev = c.now();
  for (int i = 0; i < 1000; ++i) {
    const TimePoint t = c.now();
    EXPECT_GE(t, prev);
    prev = t;
  }
}

}  // namespace
}  // namespace symphony
