#include "symphony/arrival_estimate.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "symphony/sim/random.hpp"

namespace symphony {
namespace {

using namespace symphony::literals;

TimePoint at(Duration d) { return TimePoint::epoch() + d; }

TEST(ArrivalGapEstimatorTest, KnowsNothingBeforeTwoArrivals) {
  ArrivalGapEstimator e;
  EXPECT_EQ(e.typical_gap(), Duration::zero());
  e.on_arrival(at(5_ms));
  EXPECT_EQ(e.typical_gap(), Duration::zero());
  EXPECT_EQ(e.mean_gap(), Duration::zero());
}

TEST(ArrivalGapEstimatorTest, EvenlySpacedArrivalsHaveTheirGap) {
  ArrivalGapEstimator e;
  for (int i = 0; i < 10; ++i) e.on_arrival(at(Duration::milliseconds(4 * i)));
  EXPECT_EQ(e.mean_gap(), 4_ms);
  EXPECT_EQ(e.typical_gap(), 4_ms);  // E[g^2] / E[g] = 16 / 4
}

TEST(ArrivalGapEstimatorTest, BurstsMakeTheWaitLongerThanTheMeanGap) {
  // Bursts of 10 simultaneous requests every 20 ms: the mean gap is 2 ms, but
  // every moment lies in a 20 ms silence.
  ArrivalGapEstimator e;
  for (int burst = 0; burst < 200; ++burst)
    for (int k = 0; k < 10; ++k) e.on_arrival(at(Duration::milliseconds(20 * burst)));
  EXPECT_NEAR(e.mean_gap().to_ms(), 2.0, 0.3);
  EXPECT_NEAR(e.typical_gap().to_ms(), 20.0, 3.0);
}

TEST(ArrivalGapEstimatorTest, PoissonArrivalsHaveTwoMeanGaps) {
  // Exponential gaps: E[g^2] / E[g] = 2 / rate = 4 ms for a mean gap of 2 ms.
  sim::Rng rng(7);
  ArrivalGapEstimator e;
  double t = 0, sum = 0;
  int n = 0;
  for (int i = 0; i < 20000; ++i) {
    t += rng.exponential(2.0);
    e.on_arrival(at(Duration::from_ms(t)));
    if (i > 1000) sum += e.typical_gap().to_ms(), ++n;
  }
  EXPECT_NEAR(sum / n, 4.0, 0.4);
}

TEST(ArrivalGapEstimatorTest, FollowsARateChangeWithinAFewHundredArrivals) {
  ArrivalGapEstimator e;
  for (int i = 0; i < 500; ++i) e.on_arrival(at(Duration::milliseconds(10 * i)));
  EXPECT_EQ(e.typical_gap(), 10_ms);
  const TimePoint t0 = at(Duration::milliseconds(5000));
  for (int i = 1; i <= 600; ++i) e.on_arrival(t0 + Duration::milliseconds(i));
  EXPECT_NEAR(e.typical_gap().to_ms(), 1.0, 0.05);
}

TEST(ArrivalGapEstimatorTest, OutOfOrderArrivalsCountAsZeroGaps) {
  ArrivalGapEstimator e;
  e.on_arrival(at(10_ms));
  e.on_arrival(at(4_ms));  // earlier than the last one (another client's clock)
  EXPECT_EQ(e.typical_gap(), Duration::zero());
  e.on_arrival(at(14_ms));  // 4 ms after the latest seen, not after 4 ms
  EXPECT_GT(e.typical_gap(), Duration::zero());
  EXPECT_LE(e.mean_gap(), 4_ms);
}

TEST(ArrivalGapEstimatorTest, ArrivalsLearntOfLaterCountAsEvenlySpread) {
  // Ten arrivals 1 ms apart, then 200 reported at once over the next 100 ms:
  // the same estimate as 200 arrivals 0.5 ms apart, one by one.
  ArrivalGapEstimator one, folded;
  TimePoint t = at(Duration::zero());
  for (int i = 0; i < 10; ++i, t = t + 1_ms) {
    one.on_arrival(t);
    folded.on_arrival(t);
  }
  const TimePoint last = t - 1_ms;
  for (int i = 1; i <= 200; ++i) one.on_arrival(last + Duration::microseconds(500 * i));
  folded.on_arrivals(last + 100_ms, 200);
  EXPECT_NEAR(static_cast<double>(folded.mean_gap().ns()), static_cast<double>(one.mean_gap().ns()), 1000);
  EXPECT_NEAR(static_cast<double>(folded.typical_gap().ns()), static_cast<double>(one.typical_gap().ns()),
              1000);
  EXPECT_LT(folded.mean_gap(), 600_us);
}

}  // namespace
}  // namespace symphony
