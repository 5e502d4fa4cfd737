// LatencyHistogram: bucket layout, percentiles against exact ones, merging.
#include "symphony/runtime/latency_histogram.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace symphony {
namespace {

TEST(LatencyHistogramTest, SmallValuesAreExact) {
  for (std::uint64_t v = 0; v < LatencyHistogram::kSubBuckets; ++v) {
    EXPECT_EQ(LatencyHistogram::index_of(v), v);
    EXPECT_EQ(LatencyHistogram::upper_bound_of(LatencyHistogram::index_of(v)), v);
  }
}

TEST(LatencyHistogramTest, BucketsAreContiguousAndNarrow) {
  // Every value lies in a bucket whose upper bound is >= it and within 1/64.
  std::mt19937_64 rng(1);
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t v = rng() >> (rng() % 64);
    const std::size_t idx = LatencyHistogram::index_of(v);
    ASSERT_LT(idx, LatencyHistogram::kBuckets);
    const std::uint64_t hi = LatencyHistogram::upper_bound_of(idx);
    ASSERT_GE(hi, v);
    ASSERT_LE(static_cast<double>(hi - v), static_cast<double>(v) / 64.0 + 1.0) << v;
    if (idx > 0) {
      ASSERT_LT(LatencyHistogram::upper_bound_of(idx - 1), v) << v;
    }
  }
  EXPECT_EQ(LatencyHistogram::index_of(~std::uint64_t{0}), LatencyHistogram::kBuckets - 1);
}

TEST(LatencyHistogramTest, PercentilesMatchExactOnesWithinPrecision) {
  std::mt19937_64 rng(2);
  std::lognormal_distribution<double> dist(10.0, 1.5);  // ~ tens of microseconds, heavy tail
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
    const auto got = static_cast<double>(h.percentile(q).ns());
    EXPECT_NEAR(got, exact, exact / 64.0 + 1.0) << "q=" << q;
  }
  EXPECT_EQ(h.count(), v.size());
  EXPECT_EQ(h.max().ns(), v.back());
  EXPECT_EQ(h.min().ns(), v.front());
  EXPECT_EQ(h.percentile(1.0).ns(), v.back());
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
  a.clear();
  EXPECT_EQ(a.count(), 0u);
}

}  // namespace
}  // namespace symphony
