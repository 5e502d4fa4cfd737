// The learned delays (symphony/delay_learner.hpp): the windowed estimators,
// and the learner as the cluster's scheduler and serve feed it, on explicit
// time points.
#include "symphony/delay_learner.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace symphony {
namespace {

TimePoint at_ms(std::int64_t ms) { return TimePoint::from_ns(ms * 1'000'000); }
TimePoint at_s(double s) { return TimePoint::epoch() + Duration::from_seconds(s); }

TEST(WindowedPercentileTest, HighPercentileOfTheRecentWindow) {
  WindowedPercentile w(100, Duration::seconds(5));
  EXPECT_EQ(w.percentile(0.99, at_s(0)), Duration::zero());
  for (int i = 1; i <= 100; ++i) w.add(at_s(0), Duration::microseconds(i));
  EXPECT_EQ(w.percentile(0.99, at_s(1)), Duration::microseconds(99));
  EXPECT_EQ(w.percentile(0.5, at_s(1)), Duration::microseconds(50));
  EXPECT_EQ(w.percentile(1.0, at_s(1)), Duration::microseconds(100));
  // The window slides: 100 new small samples push the old ones out.
  for (int i = 0; i < 100; ++i) w.add(at_s(2), Duration::microseconds(7));
  EXPECT_EQ(w.percentile(0.99, at_s(2)), Duration::microseconds(7));
  EXPECT_EQ(w.recent(at_s(2)), 100u);
  EXPECT_EQ(w.total(), 200u);
  w.add(at_s(2), Duration::microseconds(-5));  // a negative sample counts as zero
  EXPECT_EQ(w.percentile(0.0001, at_s(2)), Duration::zero());
}

TEST(WindowedPercentileTest, OldSamplesAreForgottenEvenWithoutNewOnes) {
  // A burst of slow samples, then silence: the estimate must not stay high.
  WindowedPercentile w(1000, Duration::seconds(5));
  for (int i = 0; i < 50; ++i) w.add(at_s(0), Duration::milliseconds(40));
  EXPECT_EQ(w.percentile(0.99, at_s(4)), Duration::milliseconds(40));
  EXPECT_EQ(w.percentile(0.99, at_s(6)), Duration::zero());
  w.add(at_s(6), Duration::microseconds(70));
  EXPECT_EQ(w.percentile(0.99, at_s(6)), Duration::microseconds(70));
}

TEST(BatchCostFitTest, SeparatesTheFixedPartFromThePerItemCost) {
  BatchCostFit f(1000, Duration::seconds(5));
  EXPECT_EQ(f.fit(0.99, at_s(0)).fixed, Duration::zero());
  // cost = 100 us + 10 us per item, with up to 20 us of noise.
  for (int i = 0; i < 1000; ++i) {
    const std::uint32_t b = 1 + static_cast<std::uint32_t>(i % 32);
    f.add(at_s(0), b, Duration::microseconds(100 + 10 * b + (i * 7919) % 21));
  }
  const BatchCostFit::Fit fit = f.fit(0.99, at_s(1));
  EXPECT_NEAR(fit.per_item.to_us(), 10.0, 0.5);
  EXPECT_NEAR(fit.fixed.to_us(), 120.0, 6.0);  // the high percentile of 100 + noise
  // One batch size only: all of it is fixed.
  BatchCostFit g(10, Duration::seconds(5));
  for (int i = 0; i < 10; ++i) g.add(at_s(0), 16, Duration::microseconds(300));
  EXPECT_EQ(g.fit(0.99, at_s(1)).per_item, Duration::zero());
  EXPECT_EQ(g.fit(0.99, at_s(1)).fixed, Duration::microseconds(300));
  EXPECT_EQ(g.fit(0.99, at_s(9)).fixed, Duration::zero());  // forgotten
}

DelayLearner::Options opts() {
  DelayLearner::Options o;
  o.window = 100;
  o.max_age = Duration::seconds(5);
  o.floors.ctrl = Duration::microseconds(20);
  o.tightest_slo = Duration::milliseconds(20);
  return o;
}

TEST(DelayLearner, LearnsAHighPercentileAboveTheFloorsAndCommitsWhatTheCallerApplied) {
  std::vector<std::string> logs;
  DelayLearner l(opts(), [&](const std::string& m) { logs.push_back(m); });
  EXPECT_EQ(l.learned().delays.ctrl, Duration::microseconds(20));  // the floors before any sample
  for (int i = 0; i < 50; ++i)
    l.on_batch(at_ms(i), Duration::microseconds(100), 0, {}, Duration::microseconds(10));
  const std::optional<Delays> d = l.update(at_ms(60));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->ctrl, Duration::microseconds(100));
  EXPECT_EQ(d->resp, Duration::microseconds(110));
  EXPECT_EQ(l.learned().delays.ctrl, Duration::microseconds(20));  // not committed yet
  l.commit(*d);
  EXPECT_EQ(l.learned().delays.ctrl, Duration::microseconds(100));
  EXPECT_EQ(l.learned().samples, 50u);
  // Below the floor: the floor.
  DelayLearner low(opts(), [](const std::string&) {});
  for (int i = 0; i < 50; ++i) low.on_backend_rtt(at_ms(i), Duration::microseconds(10));
  EXPECT_FALSE(low.update(at_ms(60)).has_value());  // 5 us learned: still the 20 us floor, nothing moved
}

TEST(DelayLearner, IgnoresSmallMovesAndForgetsOldSamples) {
  DelayLearner l(opts(), [](const std::string&) {});
  for (int i = 0; i < 50; ++i) l.on_batch(at_ms(i), Duration::microseconds(200), 0, {}, {});
  std::optional<Delays> d = l.update(at_ms(60));
  ASSERT_TRUE(d);
  l.commit(*d);
  for (int i = 0; i < 100; ++i) l.on_batch(at_ms(100 + i), Duration::microseconds(204), 0, {}, {});
  EXPECT_FALSE(l.update(at_ms(210)).has_value());  // 2 %: noise
  // Five seconds later with no traffic, the samples are too old: back to the floor.
  d = l.update(at_ms(6000));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->ctrl, Duration::microseconds(20));
}

TEST(DelayLearner, CapsAtAQuarterOfTheTightestSloAndSaysSo) {
  std::vector<std::string> logs;
  DelayLearner l(opts(), [&](const std::string& m) { logs.push_back(m); });
  for (int i = 0; i < 50; ++i) l.on_batch(at_ms(i), Duration::milliseconds(30), 0, {}, {});
  const std::optional<Delays> d = l.update(at_ms(60));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->ctrl, Duration::milliseconds(5));
  EXPECT_EQ(d->resp, Duration::milliseconds(5));
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_NE(logs[0].find("capped"), std::string::npos);
}

TEST(DelayLearner, LearnsTheDataDelayPerRequestFromReads) {
  DelayLearner l(opts(), [](const std::string&) {});
  // Reads of b requests take 10 us + 3 us * b.
  for (int i = 0; i < 60; ++i) {
    const std::uint32_t b = 1 + static_cast<std::uint32_t>(i % 8);
    l.on_batch(at_ms(i), Duration::microseconds(50), b, Duration::microseconds(10 + 3 * b), {});
  }
  const std::optional<Delays> d = l.update(at_ms(70));
  ASSERT_TRUE(d);
  EXPECT_NEAR(d->data.to_us(), 3.0, 0.5);
  EXPECT_NEAR(d->ctrl.to_us(), 60.0, 2.0);  // 50 us one way plus the fixed part of the reads
}

TEST(DelayLearner, LearnsServesStagingCostAsAFixedPartAndAPartPerRequest) {
  // In one process: staging b requests and launching takes 40 us + 20 us * b;
  // d_resp stays at its floor, the safety margin as configured.
  DelayLearner::Options o = opts();
  o.floors.safety_margin = Duration::milliseconds(1);
  DelayLearner l(o, [](const std::string&) {});
  for (int i = 0; i < 64; ++i) {
    const std::uint32_t b = 1 + static_cast<std::uint32_t>(i % 16);
    l.on_dispatch(at_ms(i), b, Duration::microseconds(40 + 20 * b));
  }
  const std::optional<Delays> d = l.update(at_ms(70));
  ASSERT_TRUE(d);
  EXPECT_NEAR(d->data.to_us(), 20.0, 0.5);
  EXPECT_NEAR(d->ctrl.to_us(), 40.0, 2.0);
  EXPECT_EQ(d->resp, Duration::zero());
  EXPECT_EQ(d->safety_margin, Duration::milliseconds(1));
  EXPECT_EQ(l.learned().samples, 64u);
  // A tighter model arrives: the cap follows it.
  l.commit(*d);
  for (int i = 0; i < 64; ++i) l.on_dispatch(at_ms(100 + i), 1, Duration::milliseconds(3));
  l.set_tightest_slo(Duration::milliseconds(4));
  const std::optional<Delays> capped = l.update(at_ms(170));
  ASSERT_TRUE(capped);
  EXPECT_EQ(capped->ctrl, Duration::milliseconds(1));
}

TEST(DelayLearner, LearnsServesReplyPathAsTheResponseDelay) {
  // In one process: replies leave the front 100 us after their batch's end,
  // one 5 ms after. Ten of them are too few to tell a p99 from the slowest:
  // d_resp stays at its floor. With 110, d_resp is their p99; d_ctrl and
  // d_data stay at their floors (no batch was staged ahead).
  DelayLearner::Options o = opts();
  o.window = 2000;
  o.floors.resp = Duration::microseconds(50);
  o.min_resp_samples = 100;
  DelayLearner l(o, [](const std::string&) {});
  for (int i = 0; i < 10; ++i)
    l.on_reply(at_ms(i), i == 5 ? Duration::milliseconds(5) : Duration::microseconds(100));
  std::optional<Delays> d = l.update(at_ms(10));
  EXPECT_FALSE(d) << "d_resp moved on " << l.learned().resp_samples << " samples";
  for (int i = 10; i < 110; ++i) l.on_reply(at_ms(i), Duration::microseconds(100));
  d = l.update(at_ms(110));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->resp, Duration::microseconds(100));
  EXPECT_EQ(d->ctrl, o.floors.ctrl);
  EXPECT_EQ(d->data, o.floors.data);
  l.commit(*d);
  EXPECT_EQ(l.learned().resp_samples, 110u);
  EXPECT_EQ(l.learned().samples, 0u);
  // A flood: the way out queues for 2 ms; then quiet again, the floor.
  for (int i = 0; i < 200; ++i) l.on_reply(at_ms(200 + i), Duration::milliseconds(2));
  d = l.update(at_ms(400));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->resp, Duration::milliseconds(2));
  l.commit(*d);
  d = l.update(at_ms(400) + Duration::seconds(6));  // every sample older than max_age
  ASSERT_TRUE(d);
  EXPECT_EQ(d->resp, Duration::microseconds(50));
}

TEST(DelayLearnerTest, TheCapIsAQuarterOfTheTightestSloNeverBelowTheFloors) {
  DelayLearner::Options o;
  o.floors.ctrl = Duration::microseconds(500);
  DelayLearner l(o, [](const std::string&) {});
  EXPECT_EQ(l.cap(), Duration::infinite()) << "no model served: no cap";
  l.set_tightest_slo(Duration::milliseconds(40));
  EXPECT_EQ(l.cap(), Duration::milliseconds(10));
  l.set_tightest_slo(Duration::milliseconds(1));
  EXPECT_EQ(l.cap(), Duration::microseconds(500)) << "a floor the config set stays";
}

}  // namespace
}  // namespace symphony
