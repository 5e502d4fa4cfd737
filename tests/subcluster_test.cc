// The autoscaling advice of the paper's §3.5 on small hand-worked numbers,
// per sub-cluster and for the cluster.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "symphony/autoscale.hpp"

namespace symphony {
namespace {

// Paper §3.5: bad rate r -> ask for N r / (1 - r) GPUs; idle fraction f -> release N f.
TEST(SubClusterAutoscaleTest, AddsNrOverOneMinusRWhenTheBadRateIsAboveTheThreshold) {
  // 24 GPUs, 1000 requests of which 50 bad: r = 0.05, 24 * 0.05 / 0.95 = 1.263 -> +2.
  const AutoscaleAdvice a = autoscale_advice(AutoscaleSignal{24, 1000, 50, 0.99}, 0.01);
  EXPECT_DOUBLE_EQ(a.bad_rate, 0.05);
  EXPECT_NEAR(a.add_gpus, 24 * 0.05 / 0.95, 1e-12);
  EXPECT_EQ(a.advice, 2);
  // 100 GPUs, r = 0.2: exactly 25 more, not 26 (no rounding up of an exact answer).
  EXPECT_EQ(autoscale_advice(100, 0.2, 1.0, 0.01).advice, 25);
  // Everything bad: the rule has no answer; the advice doubles the cluster.
  const AutoscaleAdvice all = autoscale_advice(AutoscaleSignal{8, 10, 10, 1.0}, 0.01);
  EXPECT_TRUE(std::isinf(all.add_gpus));
  EXPECT_EQ(all.advice, 8);
}

TEST(SubClusterAutoscaleTest, ReleasesTheIdleShareWhenTheBadRateIsWithinTheThreshold) {
  // 24 GPUs 30 % busy: f = 0.7, 16.8 -> release 16.
  const AutoscaleAdvice a = autoscale_advice(AutoscaleSignal{24, 1000, 10, 0.3}, 0.01);
  EXPECT_DOUBLE_EQ(a.bad_rate, 0.01);  // at the threshold, not above it
  EXPECT_NEAR(a.release_gpus, 16.8, 1e-9);
  EXPECT_EQ(a.advice, -16);
  // Exactly half idle on 10 GPUs: 5, despite floating point (0.5 * 10).
  EXPECT_EQ(autoscale_advice(10, 0.0, 0.5, 0.01).advice, -5);
  // Fully busy and in time: keep.
  EXPECT_EQ(autoscale_advice(10, 0.0, 1.0, 0.01).advice, 0);
  // No traffic at all: every GPU can go.
  EXPECT_EQ(autoscale_advice(AutoscaleSignal{6, 0, 0, 0.0}, 0.01).advice, -6);
}

TEST(SubClusterAutoscaleTest, TheClusterSignalAddsCountsAndWeighsBusyByGpus) {
  // Sub-cluster 0: 8 GPUs, overloaded; sub-cluster 1: 24 GPUs, a quarter busy.
  const std::vector<AutoscaleSignal> parts = {{8, 900, 90, 1.0}, {24, 100, 0, 0.25}};
  const AutoscaleSignal c = combine_signals(parts);
  EXPECT_EQ(c.gpus, 32u);
  EXPECT_EQ(c.arrived, 1000u);
  EXPECT_EQ(c.bad, 90u);
  EXPECT_DOUBLE_EQ(c.busy_fraction, (8 * 1.0 + 24 * 0.25) / 32);
  // Per sub-cluster: +1 (8 * 0.1 / 0.9 = 0.89) and -18; the cluster as a whole: 32 * 0.09 / 0.91 = 3.16 ->
  // +4.
  EXPECT_EQ(autoscale_advice(parts[0], 0.01).advice, 1);
  EXPECT_EQ(autoscale_advice(parts[1], 0.01).advice, -18);
  EXPECT_EQ(autoscale_advice(c, 0.01).advice, 4);
  EXPECT_EQ(combine_signals({}).busy_fraction, 0.0);
}

}  // namespace
}  // namespace symphony
