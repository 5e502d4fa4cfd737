#include "symphony/latency_profile.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace symphony {
namespace {

using namespace symphony::literals;

TEST(LatencyProfileTest, LinearProfileIsAlphaBPlusBeta) {
  auto p = LatencyProfile::linear(Duration::from_ms(1.053), Duration::from_ms(5.072), 64);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->max_batch(), 64u);
  EXPECT_EQ(p->latency(1), Duration::from_ms(6.125));
  EXPECT_EQ(p->latency(16), Duration::from_ms(1.053 * 16 + 5.072));
  EXPECT_EQ(p->alpha(), Duration::from_ms(1.053));
  EXPECT_EQ(p->beta(), Duration::from_ms(5.072));
  EXPECT_EQ(p->latency_or_infinite(65), Duration::infinite());
}

TEST(LatencyProfileTest, LargestBatchWithinBudget) {
  auto p = *LatencyProfile::linear(1_ms, 5_ms, 32);  // l(b) = b + 5 ms
  EXPECT_EQ(p.largest_batch_within(4_ms), 0u);       // below l(1)
  EXPECT_EQ(p.largest_batch_within(6_ms), 1u);       // exactly l(1)
  EXPECT_EQ(p.largest_batch_within(9_ms), 4u);
  EXPECT_EQ(p.largest_batch_within(Duration::from_ms(8.999)), 3u);
  EXPECT_EQ(p.largest_batch_within(1000_ms), 32u);    // capped at max_batch
  EXPECT_EQ(p.largest_batch_within(1000_ms, 7), 7u);  // and at the limit
  EXPECT_EQ(p.largest_batch_within(1000_ms, 0), 0u);
  // Every answer agrees with a linear scan.
  for (int us = 0; us < 40'000; us += 37) {
    const Duration budget = Duration::microseconds(us);
    std::uint32_t expect = 0;
    for (std::uint32_t b = 1; b <= 32; ++b)
      if (p.latency(b) <= budget) expect = b;
    ASSERT_EQ(p.largest_batch_within(budget), expect) << us << " us";
  }
}

TEST(LatencyProfileTest, SparseTablesAreInterpolated) {
  const std::vector<ProfilePoint> pts{{1, 6_ms}, {2, 7_ms}, {4, 9_ms}, {8, 17_ms}};
  auto p = LatencyProfile::from_table(pts);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->max_batch(), 8u);
  EXPECT_EQ(p->latency(1), 6_ms);
  EXPECT_EQ(p->latency(3), 8_ms);   // midway between 2 and 4
  EXPECT_EQ(p->latency(6), 13_ms);  // midway between 4 and 8
  EXPECT_EQ(p->latency(8), 17_ms);
}

TEST(LatencyProfileTest, TableEdgesAreConservative) {
  // Sizes below the first point take its latency; beyond the last point the
  // last segment is extended when a larger max_batch is asked for.
  const std::vector<ProfilePoint> pts{{4, 10_ms}, {8, 14_ms}};
  auto p = *LatencyProfile::from_table(pts, 12);
  EXPECT_EQ(p.latency(1), 10_ms);
  EXPECT_EQ(p.latency(3), 10_ms);
  EXPECT_EQ(p.latency(6), 12_ms);
  EXPECT_EQ(p.latency(12), 18_ms);
  // A single point is flat.
  const std::vector<ProfilePoint> one{{1, 3_ms}};
  auto q = *LatencyProfile::from_table(one, 4);
  EXPECT_EQ(q.latency(4), 3_ms);
}

TEST(LatencyProfileTest, FitRecoversLinearTables) {
  std::vector<ProfilePoint> pts;
  for (std::uint32_t b = 1; b <= 32; b *= 2) pts.push_back({b, Duration::from_ms(0.5 * b + 4)});
  auto p = *LatencyProfile::from_table(pts);
  EXPECT_NEAR(p.alpha().to_ms(), 0.5, 1e-6);
  EXPECT_NEAR(p.beta().to_ms(), 4.0, 1e-6);
}

TEST(LatencyProfileTest, RejectsBadTablesWithClearErrors) {
  auto expect_error = [](std::vector<ProfilePoint> pts, const std::string& needle) {
    auto p = LatencyProfile::from_table(pts);
    ASSERT_FALSE(p.ok()) << needle;
    EXPECT_EQ(p.status().code(), Errc::kInvalidArgument);
    EXPECT_NE(p.status().message().find(needle), std::string::npos) << p.status().message();
  };
  expect_error({}, "empty");
  expect_error({{1, 5_ms}, {2, 4_ms}}, "not monotone: l(2) = 4 ms < l(1) = 5 ms");
  expect_error({{0, 5_ms}}, "batch size 0");
  expect_error({{2, 5_ms}, {2, 6_ms}}, "must increase");
  expect_error({{1, 5_ms}, {4, 6_ms}, {3, 7_ms}}, "must increase");
  expect_error({{1, Duration::zero()}}, "not positive");
  EXPECT_FALSE(LatencyProfile::linear(1_ms, 1_ms, 0).ok());
  EXPECT_FALSE(LatencyProfile::linear(-(1_ms), 1_ms, 4).ok());
  EXPECT_FALSE(LatencyProfile::linear(Duration::zero(), Duration::zero(), 4).ok());
  EXPECT_FALSE(LatencyProfile::linear(1_ms, 1_ms, LatencyProfile::kMaxBatchLimit + 1).ok());
}

TEST(LatencyProfileTest, DefaultProfileIsEmpty) {
  LatencyProfile p;
  EXPECT_EQ(p.max_batch(), 0u);
  EXPECT_EQ(p.largest_batch_within(1000_ms), 0u);
}

}  // namespace
}  // namespace symphony
