// The gathering policies (GetBatch): batch sizes, drops and their reasons.
#include "symphony/gather_policy.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace symphony {
namespace {

using namespace symphony::literals;

TimePoint at(Duration d) { return TimePoint::epoch() + d; }

struct Fixture {
  LatencyProfile profile = *LatencyProfile::linear(1_ms, 5_ms, 32);  // l(b) = b + 5 ms
  Delays delays;
  std::vector<Request> nodes = std::vector<Request>(64);
  ModelQueue q;
  std::uint64_t seq = 0;
  std::vector<std::pair<std::uint64_t, DropReason>> dropped;

  Request& push(Duration deadline, std::uint64_t tag) {
    Request& r = nodes[tag];
    r.deadline = at(deadline);
    r.arrival = TimePoint::epoch();
    r.tag = tag;
    r.seq = seq++;
    q.push(r);
    return r;
  }
  GatherInputs inputs(Duration now, TimePoint gpu_free = TimePoint::neg_infinite(),
                      std::uint32_t target = 1) {
    return {at(now), gpu_free, &delays, profile.view(), profile.max_batch(), target};
  }
  template <class P>
  GatherResult gather(const P& p, const GatherInputs& in) {
    return p.gather(q, in, [&](Request& r, DropReason why) { dropped.emplace_back(r.tag, why); });
  }
};

TEST(SlidingWindowGatherTest, TakesTheLargestBatchThatMeetsTheHeadDeadline) {
  Fixture f;
  for (std::uint64_t i = 0; i < 10; ++i) f.push(12_ms, i);
  const GatherResult r = f.gather(SlidingWindowGather{}, f.inputs(0_ms));
  EXPECT_EQ(r.size, 7u);  // l(7) = 12 ms
  EXPECT_EQ(r.exec_deadline, at(12_ms));
  EXPECT_TRUE(f.dropped.empty());
  // A GPU that frees at 5 ms leaves room for l(b) <= 7 ms: b = 2.
  EXPECT_EQ(f.gather(SlidingWindowGather{}, f.inputs(0_ms, at(5_ms))).size, 2u);
  // Fewer requests than fit: all of them.
  Fixture g;
  for (std::uint64_t i = 0; i < 3; ++i) g.push(50_ms, i);
  EXPECT_EQ(g.gather(SlidingWindowGather{}, g.inputs(0_ms)).size, 3u);
}

TEST(SlidingWindowGatherTest, DropsHeadsThatCannotFinishAloneWithReason) {
  Fixture f;
  f.push(5_ms, 0);   // l(1) = 6 ms > 5: infeasible now
  f.push(14_ms, 1);  // at now = 9 ms: 9 + 6 = 15 > 14, expired too
  f.push(30_ms, 2);
  f.push(30_ms, 3);
  const GatherResult r = f.gather(SlidingWindowGather{}, f.inputs(9_ms));
  ASSERT_EQ(f.dropped.size(), 2u);
  EXPECT_EQ(f.dropped[0], std::make_pair(std::uint64_t{0}, DropReason::kExpired));
  EXPECT_EQ(f.dropped[1], std::make_pair(std::uint64_t{1}, DropReason::kExpired));
  EXPECT_EQ(r.size, 2u);
  EXPECT_EQ(f.q.size(), 2u);
}

TEST(SlidingWindowGatherTest, DelaysAndMarginShrinkTheWindow) {
  Fixture f;
  f.delays.ctrl = 1_ms;
  f.delays.data = Duration::from_ms(0.5);
  f.delays.resp = 1_ms;
  f.delays.safety_margin = 1_ms;
  for (std::uint64_t i = 0; i < 20; ++i) f.push(14_ms, i);
  // d = 14 - 1 - 1 = 12; 1 + 0.5 b + b + 5 <= 12  =>  b <= 4.
  const GatherResult r = f.gather(SlidingWindowGather{}, f.inputs(0_ms));
  EXPECT_EQ(r.exec_deadline, at(12_ms));
  EXPECT_EQ(r.size, 4u);
}

TEST(SlidingWindowGatherTest, TheMarginIsUsedUpBeforeARequestIsDropped) {
  Fixture f;
  f.delays.safety_margin = 2_ms;
  for (std::uint64_t i = 0; i < 3; ++i) f.push(7_ms, i);  // l(1) = 6 ms fits by 7, not by 7 - 2
  const GatherResult r = f.gather(SlidingWindowGather{}, f.inputs(0_ms));
  EXPECT_TRUE(f.dropped.empty()) << "the head can still make its deadline";
  EXPECT_EQ(r.exec_deadline, at(7_ms)) << "sized against the deadline itself";
  EXPECT_TRUE(r.past_margin);
  EXPECT_EQ(r.size, 2u);  // l(2) = 7 ms
  // With room for the margin, batches are sized against deadline - margin.
  Fixture g;
  g.delays.safety_margin = 2_ms;
  for (std::uint64_t i = 0; i < 8; ++i) g.push(12_ms, i);
  const GatherResult q = g.gather(SlidingWindowGather{}, g.inputs(0_ms));
  EXPECT_EQ(q.exec_deadline, at(10_ms));
  EXPECT_FALSE(q.past_margin);
  EXPECT_EQ(q.size, 5u);  // l(5) = 10 ms
  // Past the deadline itself, the head is dropped.
  Fixture h;
  h.delays.safety_margin = 2_ms;
  h.push(5_ms, 0);
  EXPECT_EQ(h.gather(SlidingWindowGather{}, h.inputs(0_ms)).size, 0u);
  EXPECT_EQ(h.dropped.size(), 1u);
}

// GatherInputs::late_planned: a late grant's planned batch goes into the
// margin, as far as the deadline itself allows, and a batch that meets the
// margin anyway, or the deadline when nothing meets the margin, is not cut
// down to it.
TEST(SlidingWindowGatherTest, ALateGrantsPlannedBatchGoesIntoTheMargin) {
  const auto size_for = [](std::uint32_t planned, Duration deadline, std::uint32_t requests) {
    Fixture f;
    f.delays.safety_margin = 2_ms;
    for (std::uint64_t i = 0; i < requests; ++i) f.push(deadline, i);
    GatherInputs in = f.inputs(1_ms);
    in.late_planned = planned;
    const GatherResult r = f.gather(SlidingWindowGather{}, in);
    EXPECT_TRUE(f.dropped.empty());
    return std::make_pair(r.size, r.past_margin);
  };
  // Deadline 12 ms, now 1 ms: 4 meet the margin (1 + l(4) = 10), 6 the deadline (1 + l(6) = 12).
  EXPECT_EQ(size_for(0, 12_ms, 8), std::make_pair(4u, false));
  EXPECT_EQ(size_for(3, 12_ms, 8), std::make_pair(4u, false));
  EXPECT_EQ(size_for(5, 12_ms, 8), std::make_pair(5u, true));
  EXPECT_EQ(size_for(8, 12_ms, 8), std::make_pair(6u, true));
  // Deadline 8 ms: none meets the margin, 2 the deadline, planned 1 or not.
  EXPECT_EQ(size_for(0, 8_ms, 3), std::make_pair(2u, true));
  EXPECT_EQ(size_for(1, 8_ms, 3), std::make_pair(2u, true));
}

TEST(SlidingWindowGatherTest, AgreesWithBruteForceOnRandomInputs) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 2000; ++trial) {
    Fixture f;
    f.profile =
        *LatencyProfile::linear(Duration::microseconds(static_cast<std::int64_t>(rng() % 3000)),
                                Duration::microseconds(100 + static_cast<std::int64_t>(rng() % 9000)), 32);
    f.delays.ctrl = Duration::microseconds(static_cast<std::int64_t>(rng() % 500));
    f.delays.data = Duration::microseconds(static_cast<std::int64_t>(rng() % 300));
    const auto n = static_cast<std::uint64_t>(1 + rng() % 40);
    const Duration dl = Duration::microseconds(static_cast<std::int64_t>(rng() % 60000));
    for (std::uint64_t i = 0; i < n; ++i) f.push(dl, i);
    const TimePoint gpu_free = rng() % 2
                                   ? TimePoint::neg_infinite()
                                   : at(Duration::microseconds(static_cast<std::int64_t>(rng() % 10000)));
    const GatherInputs in = f.inputs(0_ms, gpu_free);
    std::uint32_t expect = 0;
    for (std::uint32_t b = 1; b <= std::min<std::uint64_t>(n, 32); ++b)
      if (max(in.now + f.delays.delay(b), gpu_free) + f.profile.latency(b) <= at(dl)) expect = b;
    const GatherResult r = f.gather(SlidingWindowGather{}, in);
    if (expect == 0) {
      EXPECT_EQ(r.size, 0u);
      EXPECT_EQ(f.dropped.size(), n) << "every request is infeasible";
    } else {
      ASSERT_EQ(r.size, expect) << "trial " << trial;
    }
  }
}

TEST(TargetBatchGatherTest, ShedsAHeadWhenALaterHeadReachesTheTarget) {
  Fixture f;
  f.push(8_ms, 0);  // alone it allows b = 3 (l(3) = 8 ms)
  for (std::uint64_t i = 1; i <= 5; ++i) f.push(20_ms, i);
  const GatherResult r = f.gather(TargetBatchGather{}, f.inputs(0_ms, TimePoint::neg_infinite(), 4));
  ASSERT_EQ(f.dropped.size(), 1u);
  EXPECT_EQ(f.dropped[0], std::make_pair(std::uint64_t{0}, DropReason::kBatchPolicy));
  EXPECT_EQ(r.size, 5u);
  EXPECT_EQ(r.exec_deadline, at(20_ms));
}

TEST(TargetBatchGatherTest, KeepsTheHeadWhenSheddingCannotReachTheTarget) {
  Fixture f;
  f.push(8_ms, 0);
  f.push(20_ms, 1);
  f.push(20_ms, 2);
  f.push(20_ms, 3);  // shedding the head leaves 3 < target 4
  const GatherResult r = f.gather(TargetBatchGather{}, f.inputs(0_ms, TimePoint::neg_infinite(), 4));
  EXPECT_TRUE(f.dropped.empty());
  EXPECT_EQ(r.size, 3u);
  EXPECT_EQ(r.exec_deadline, at(8_ms));
}

TEST(TargetBatchGatherTest, KeepsAMoreImportantHeadUnlessItsBatchIsTooSmall) {
  // Two levels: a low head (alone: b = 3), a high one (b = 4), then 20 low
  // ones due at 20 ms (b = 15).
  struct Queue : Fixture {
    explicit Queue(std::uint32_t levels) {
      push(8_ms, 0).priority = levels - 1;
      push(9_ms, 1).priority = 0;
      for (std::uint64_t i = 2; i < 22; ++i) push(20_ms, i).priority = levels - 1;
    }
    GatherResult run(std::uint32_t target, std::uint32_t levels) {
      GatherInputs in = inputs(0_ms, TimePoint::neg_infinite(), target);
      in.lowest_level = levels - 1;
      return gather(TargetBatchGather{}, in);
    }
  };
  // Target 5: the low head is shed, the high one kept in its batch of 4.
  Queue a(2);
  GatherResult r = a.run(5, 2);
  ASSERT_EQ(a.dropped.size(), 1u);
  EXPECT_EQ(a.dropped[0], std::make_pair(std::uint64_t{0}, DropReason::kBatchPolicy));
  EXPECT_EQ(r.size, 4u);
  EXPECT_EQ(r.exec_deadline, at(9_ms));
  // With one level the same queue sheds both heads for a batch of 15.
  Queue b(1);
  r = b.run(5, 1);
  EXPECT_EQ(b.dropped.size(), 2u);
  EXPECT_EQ(r.size, 15u);
  // Target 9: a batch of 4 is under half of it, so the high head goes too.
  Queue c(2);
  r = c.run(9, 2);
  EXPECT_EQ(c.dropped.size(), 2u);
  EXPECT_EQ(r.size, 15u);
  EXPECT_EQ(r.exec_deadline, at(20_ms));
}

TEST(TargetBatchGatherTest, DefaultTargetIsTheNoCoordinationBatch) {
  const LatencyProfile p = *LatencyProfile::linear(Duration::from_ms(1.053), Duration::from_ms(5.072), 64);
  EXPECT_EQ(default_target_batch(p, 25_ms, 64), 7u);  // the paper's "no coordination" batch for ResNet50
}

}  // namespace
}  // namespace symphony
