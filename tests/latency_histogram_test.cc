// LatencyHistogram: bucket layout, the percentile convention against exact
// nearest-rank quantiles, merging, and the cumulative counts of exports.
#include "symphony/latency_histogram.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace symphony {
namespace {

TEST(LatencyHistogramTest, BucketsTileTheLine) {
  for (std::uint32_t i = 0; i + 1 < LatencyHistogram::kBuckets; ++i) {
    ASSERT_EQ(LatencyHistogram::upper_bound(i) + 1, LatencyHistogram::lower_bound(i + 1)) << i;
    ASSERT_EQ(LatencyHistogram::index(static_cast<std::uint64_t>(LatencyHistogram::lower_bound(i))), i);
  }
  for (std::uint64_t v = 0; v < LatencyHistogram::kLinear; ++v) EXPECT_EQ(LatencyHistogram::index(v), v);
  EXPECT_EQ(LatencyHistogram::index(~std::uint64_t{0}), LatencyHistogram::kBuckets - 1);
}

TEST(LatencyHistogramTest, BucketsAreNarrow) {
  // Every value lies in a bucket at most 1/256 of its lower bound wide.
  std::mt19937_64 rng(1);
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t v = rng() >> (23 + rng() % 41);  // below 2^41: the last bucket is open-ended
    const std::uint32_t idx = LatencyHistogram::index(v);
    const auto lo = static_cast<std::uint64_t>(LatencyHistogram::lower_bound(idx));
    const auto hi = static_cast<std::uint64_t>(LatencyHistogram::upper_bound(idx));
    ASSERT_LE(lo, v);
    ASSERT_GE(hi, v);
    ASSERT_LE(static_cast<double>(hi - lo), static_cast<double>(lo) / 256.0) << v;
  }
}

TEST(LatencyHistogramTest, PercentilesAreNearestRankWithinPrecision) {
  LatencyHistogram h;
  for (int v = 1; v <= 1000; ++v) h.record(Duration::microseconds(v * 37));
  EXPECT_EQ(h.count(), 1000u);
  for (double q : {0.5, 0.9, 0.99, 0.999, 1.0}) {
    const double exact = 37.0 * std::ceil(q * 1000 - 1e-9);
    EXPECT_NEAR(h.percentile(q).to_us(), exact, exact * 0.002 + 1e-3) << q;
  }
  EXPECT_EQ(h.min(), Duration::microseconds(37));
  EXPECT_EQ(h.max(), Duration::microseconds(37000));
  EXPECT_NEAR(h.percentile(0.0).to_us(), h.min().to_us(), 37 * 0.002);
  EXPECT_NEAR(h.mean().to_us(), 37 * 500.5, 0.01);
}

TEST(LatencyHistogramTest, PercentilesOfAHeavyTailMatchExactOnes) {
  std::mt19937_64 rng(2);
  std::lognormal_distribution<double> dist(10.0, 1.5);  // tens of microseconds, heavy tail
  LatencyHistogram h;
  std::vector<std::int64_t> v;
  for (int i = 0; i < 200000; ++i) {
    const auto x = static_cast<std::int64_t>(dist(rng));
    v.push_back(x);
    h.record(Duration::nanoseconds(x));
  }
  std::sort(v.begin(), v.end());
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    const auto exact =
        static_cast<double>(v[static_cast<std::size_t>(q * static_cast<double>(v.size())) - 1]);
    EXPECT_NEAR(static_cast<double>(h.percentile(q).ns()), exact, exact * 0.002 + 1.0) << "q=" << q;
  }
  EXPECT_EQ(h.count(), v.size());
  EXPECT_EQ(h.max().ns(), v.back());
  EXPECT_EQ(h.min().ns(), v.front());
}

TEST(LatencyHistogramTest, SmallValuesAreExact) {
  LatencyHistogram h;
  for (int v : {3, 3, 7, 100, 511}) h.record_ns(v);
  EXPECT_EQ(h.percentile(0.2).ns(), 3);
  EXPECT_EQ(h.percentile(0.6).ns(), 7);
  EXPECT_EQ(h.percentile(0.8).ns(), 100);
  EXPECT_EQ(h.percentile(0.9).ns(), 100);  // rank round(4.5) = 4: halves round down
  EXPECT_EQ(h.percentile(0.95).ns(), 511);
}

TEST(LatencyHistogramTest, MergeAddsAndNegativeCountsAsZero) {
  LatencyHistogram a, b;
  a.record(Duration::microseconds(10));
  b.record(Duration::microseconds(30));
  b.record(-Duration::microseconds(5));
  a.merge(b);
  EXPECT_EQ(a.count(), 3u);
  EXPECT_EQ(a.min(), Duration::zero());
  EXPECT_EQ(a.max(), Duration::microseconds(30));
  EXPECT_EQ(a.percentile(0.0), Duration::zero());
  LatencyHistogram empty;
  EXPECT_EQ(empty.percentile(0.99), Duration::zero());
  EXPECT_EQ(empty.mean(), Duration::zero());
  a.merge(empty);
  EXPECT_EQ(a.count(), 3u);
  a.clear();
  EXPECT_EQ(a.count(), 0u);
  EXPECT_EQ(a.percentile(0.5), Duration::zero());
}

TEST(LatencyHistogramTest, CountAtOrBelowCountsWholeBuckets) {
  LatencyHistogram h;
  for (int v : {100, 200, 300}) h.record(Duration::microseconds(v));
  EXPECT_EQ(h.count_at_or_below(-Duration::microseconds(1)), 0u);
  EXPECT_EQ(h.count_at_or_below(Duration::microseconds(50)), 0u);
  EXPECT_EQ(h.count_at_or_below(Duration::microseconds(250)), 2u);
  EXPECT_EQ(h.count_at_or_below(Duration::seconds(1)), 3u);
  // A bound inside 300 us's bucket but below the bucket's end leaves it out.
  const std::uint32_t i = LatencyHistogram::index(300000);
  const Duration inside = Duration::nanoseconds(LatencyHistogram::upper_bound(i) - 1);
  EXPECT_EQ(h.count_at_or_below(inside), 2u);
  EXPECT_EQ(h.count_at_or_below(Duration::nanoseconds(LatencyHistogram::upper_bound(i))), 3u);
}

}  // namespace
}  // namespace symphony
