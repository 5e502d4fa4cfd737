// The analytical bounds against the paper's table of staggered execution
// (§5.3): batch sizes and throughputs of ResNet50 and InceptionResNetV2 on 8
// GPUs.
#include "symphony/batch_bounds.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace symphony::sim {
namespace {

LatencyProfile linear(double alpha_ms, double beta_ms, std::uint32_t max_batch = 64) {
  return *LatencyProfile::linear(Duration::from_ms(alpha_ms), Duration::from_ms(beta_ms), max_batch);
}

TEST(BoundsTest, ResNet50MatchesThePaperTable) {
  const LatencyProfile p = linear(1.053, 5.072);
  const BatchBound s = staggered_bound(p, Duration::milliseconds(25), 8);
  EXPECT_EQ(s.batch, 16u);
  EXPECT_EQ(std::lround(s.throughput_rps), 5839);
  const BatchBound n = no_coordination_bound(p, Duration::milliseconds(25), 8);
  EXPECT_EQ(n.batch, 7u);
  EXPECT_EQ(std::lround(n.throughput_rps), 4501);
}

TEST(BoundsTest, InceptionResNetV2MatchesThePaperTable) {
  const LatencyProfile p = linear(5.090, 18.368);
  const BatchBound s = staggered_bound(p, Duration::milliseconds(70), 8);
  EXPECT_EQ(s.batch, 8u);
  EXPECT_EQ(std::lround(s.throughput_rps), 1083);
  const BatchBound n = no_coordination_bound(p, Duration::milliseconds(70), 8);
  EXPECT_EQ(n.batch, 3u);
  EXPECT_EQ(static_cast<int>(n.throughput_rps), 713);  // 713.5: the paper truncates
}

TEST(BoundsTest, EdgesOfTheInequalities) {
  // l(b) = b + 5 ms; N = 3: (4/3) l(b) <= 12 -> l(b) <= 9 -> b = 4, exactly on the edge.
  const LatencyProfile p = linear(1, 5, 32);
  EXPECT_EQ(staggered_bound(p, Duration::milliseconds(12), 3).batch, 4u);
  EXPECT_EQ(no_coordination_bound(p, Duration::milliseconds(12), 3).batch, 1u);
  EXPECT_EQ(no_coordination_bound(p, Duration::milliseconds(11), 3).batch, 0u);  // 2 l(1) = 12 > 11
  EXPECT_EQ(no_coordination_bound(p, Duration::milliseconds(11), 3).throughput_rps, 0.0);
  // max_batch caps the bound.
  EXPECT_EQ(staggered_bound(p, Duration::milliseconds(1000), 8, 16).batch, 16u);
  EXPECT_EQ(staggered_bound(p, Duration::milliseconds(1000), 8).batch, 32u);
}

TEST(BoundsTest, FluidCapacityWeighsModelsByShare) {
  const LatencyProfile a = linear(1, 5, 32), b = linear(2, 2, 32);
  // With one model it is the staggered throughput.
  std::vector<ModelShare> one = {{&a, Duration::milliseconds(12), 1.0}};
  EXPECT_DOUBLE_EQ(fluid_capacity(one, 3), staggered_bound(a, Duration::milliseconds(12), 3).throughput_rps);
  // Two models, half the requests each: GPU-seconds per request average.
  std::vector<ModelShare> two = {{&a, Duration::milliseconds(12), 0.5},
                                 {&b, Duration::milliseconds(12), 0.5}};
  const BatchBound ba = staggered_bound(a, Duration::milliseconds(12), 3);
  const BatchBound bb = staggered_bound(b, Duration::milliseconds(12), 3);
  const double per_request =
      0.5 * ba.latency.to_seconds() / ba.batch + 0.5 * bb.latency.to_seconds() / bb.batch;
  EXPECT_NEAR(fluid_capacity(two, 3), 3 / per_request, 1e-9);
}

}  // namespace
}  // namespace symphony::sim
