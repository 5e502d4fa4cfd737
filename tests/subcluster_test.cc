// The solver-free pieces of sub-clusters and autoscaling: SubClusterPlacement
// (owners, loads, drains, reclaims), EpochRateMeter, diff_assignments, and
// the autoscaling advice of the paper's §3.5 on small hand-worked numbers.
#include "symphony/subcluster.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "symphony/autoscale.hpp"

namespace symphony {
namespace {

using Kind = PlacementStep::Kind;
using Presence = SubClusterPlacement::Presence;

TEST(SubClusterPlacementTest, InitialPlacementLoadsEveryModelWhereItIsAssigned) {
  SubClusterPlacement p(3, 2);
  EXPECT_EQ(p.owner(0), kNoSubCluster);
  const std::vector<PlacementStep> steps = p.apply(std::vector<int>{1, 0, 1});
  const std::vector<PlacementStep> want = {{Kind::kLoad, 0, 1}, {Kind::kLoad, 1, 0}, {Kind::kLoad, 2, 1}};
  EXPECT_EQ(steps, want);
  EXPECT_EQ(p.assignment(), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(p.presence(1, 0), Presence::kOwned);
  EXPECT_EQ(p.presence(0, 0), Presence::kAbsent);
  EXPECT_TRUE(p.draining(0).empty());
  EXPECT_TRUE(p.draining(1).empty());
}

TEST(SubClusterPlacementTest, AMoveLoadsInTheNewSubClusterAndDrainsTheOld) {
  SubClusterPlacement p(3, 2);
  p.apply(std::vector<int>{0, 0, 1});
  const std::vector<PlacementStep> steps = p.apply(std::vector<int>{0, 1, 1});
  const std::vector<PlacementStep> want = {{Kind::kLoad, 1, 1}, {Kind::kDrain, 1, 0}};
  EXPECT_EQ(steps, want);
  // New requests of model 1 go to sub-cluster 1 at once; sub-cluster 0 still holds it.
  EXPECT_EQ(p.owner(1), 1);
  EXPECT_EQ(p.presence(1, 1), Presence::kOwned);
  EXPECT_EQ(p.presence(0, 1), Presence::kDraining);
  EXPECT_EQ(p.draining(0), std::vector<ModelId>{1});
  // Only a draining model can be drained, and only once.
  EXPECT_FALSE(p.drained(1, 1));
  EXPECT_FALSE(p.drained(0, 0));
  EXPECT_TRUE(p.drained(0, 1));
  EXPECT_FALSE(p.drained(0, 1));
  EXPECT_EQ(p.presence(0, 1), Presence::kAbsent);
  EXPECT_TRUE(p.draining(0).empty());
}

TEST(SubClusterPlacementTest, MovingBackBeforeTheDrainEndsReclaimsWithoutALoad) {
  SubClusterPlacement p(2, 3);
  p.apply(std::vector<int>{0, 2});
  p.apply(std::vector<int>{1, 2});  // 0: 0 -> 1, sub-cluster 0 drains it
  const std::vector<PlacementStep> steps = p.apply(std::vector<int>{0, 2});
  const std::vector<PlacementStep> want = {{Kind::kReclaim, 0, 0}, {Kind::kDrain, 0, 1}};
  EXPECT_EQ(steps, want);
  EXPECT_EQ(p.presence(0, 0), Presence::kOwned);
  EXPECT_EQ(p.presence(1, 0), Presence::kDraining);
  EXPECT_TRUE(p.draining(0).empty());
  EXPECT_EQ(p.draining(1), std::vector<ModelId>{0});
  // The same assignment again changes nothing.
  EXPECT_TRUE(p.apply(std::vector<int>{0, 2}).empty());
}

TEST(SubClusterPlacementTest, DiffListsTheModelsThatMoveInModelOrder) {
  const std::vector<int> a = {kNoSubCluster, 0, 1, 2}, b = {3, 0, 2, 1};
  const std::vector<ModelMove> want = {{0, kNoSubCluster, 3}, {2, 1, 2}, {3, 2, 1}};
  EXPECT_EQ(diff_assignments(a, b), want);
  EXPECT_TRUE(diff_assignments(b, b).empty());
}

TEST(EpochRateMeterTest, RatesAreArrivalsOverTheEpochAndTheCountRestarts) {
  EpochRateMeter m(3);
  for (int i = 0; i < 30; ++i) m.count(0);
  for (int i = 0; i < 3; ++i) m.count(2);
  const std::vector<double> r = m.take(TimePoint::epoch() + Duration::seconds(2));
  EXPECT_EQ(r, (std::vector<double>{15.0, 0.0, 1.5}));
  EXPECT_EQ(m.since(), TimePoint::epoch() + Duration::seconds(2));
  EXPECT_EQ(m.count_of(0), 0u);
  m.count(1);
  EXPECT_EQ(m.take(TimePoint::epoch() + Duration::milliseconds(2500)), (std::vector<double>{0.0, 2.0, 0.0}));
  // An empty interval measures nothing.
  EXPECT_EQ(m.take(TimePoint::epoch() + Duration::milliseconds(2500)), (std::vector<double>{0.0, 0.0, 0.0}));
}

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
