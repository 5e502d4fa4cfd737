// The scheduler's units that need no transport: the counters, the delay
// learner and the in-flight table (virtual time: explicit TimePoints).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scheduler/counters.hpp"
#include "scheduler/delay_learner.hpp"
#include "scheduler/inflight.hpp"

namespace symphony::rdma {
namespace {

TimePoint at_ms(std::int64_t ms) { return TimePoint::from_ns(ms * 1'000'000); }

TEST(SchedulerCounters, EachOutcomeCountedOnceTotalsAreSumsOverModels) {
  SchedulerCounters c(2, 4);
  c.accepted(0);
  c.accepted(0);
  c.accepted(1);
  c.outcome(0, Outcome::kOk, DropReason::kNone);
  c.outcome(0, Outcome::kDropped, DropReason::kQueueFull);
  c.outcome(1, Outcome::kLate, DropReason::kNone);
  c.outcome(1, Outcome::kError, DropReason::kNone);
  c.gpu_ran(3, Duration::microseconds(250));
  c.gpu_ran(3, Duration::nanoseconds(-5));  // a clock step at the backend: counts the batch, no time
  c.gpu_ran(4, Duration::microseconds(1));  // past the table: ignored
  const SchedulerCounters::Values v = c.values();
  EXPECT_EQ(v.accepted, 3u);
  EXPECT_EQ(v.models[0].accepted, 2u);
  EXPECT_EQ(v.outcome(Outcome::kOk), 1u);
  EXPECT_EQ(v.outcome(Outcome::kLate), 1u);
  EXPECT_EQ(v.outcome(Outcome::kError), 1u);
  EXPECT_EQ(v.outcome(Outcome::kDropped), 1u);
  EXPECT_EQ(v.drops[static_cast<std::size_t>(DropReason::kQueueFull)], 1u);
  EXPECT_EQ(v.models[0].drops[static_cast<std::size_t>(DropReason::kQueueFull)], 1u);
  EXPECT_EQ(v.models[1].drops[static_cast<std::size_t>(DropReason::kQueueFull)], 0u);
  EXPECT_EQ(v.gpus[3].batches, 2u);
  EXPECT_EQ(v.gpus[3].busy, Duration::microseconds(250));
  EXPECT_EQ(v.gpus[0].batches, 0u);
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
  for (int i = 0; i < 50; ++i) l.on_batch(at_ms(i), Duration::microseconds(100), 0, {}, Duration::microseconds(10));
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

class RecordingPort final : public CompletionPort {
 public:
  void report(BatchCompletion c) override { got.push_back(std::move(c)); }
  std::vector<BatchCompletion> got;
};

TEST(InflightTable, EachBatchEndsOnceByItsBackendOrWithAnError) {
  RecordingPort port;
  InflightTable t;
  t.add(10, {1, 0, 0, at_ms(0), &port, 4, true});
  t.add(11, {2, 1, 1, at_ms(0), &port, 4, true});
  t.add(12, {3, 1, 2, at_ms(0), &port, 4, true});
  EXPECT_FALSE(t.take(10, 1).has_value());  // another backend's batch: not taken
  EXPECT_FALSE(t.take(99, 0).has_value());  // unknown
  const std::optional<InflightTable::Batch> b = t.take(10, 0);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->local, 1u);
  EXPECT_FALSE(t.take(10, 0).has_value());  // once
  EXPECT_EQ(t.fail_backend(1, at_ms(5), "backend 'b1' lost"), 2u);
  ASSERT_EQ(port.got.size(), 2u);
  for (const BatchCompletion& c : port.got) {
    EXPECT_EQ(c.status, BatchStatus::kError);
    EXPECT_EQ(c.error, "backend 'b1' lost");
  }
  EXPECT_EQ(t.size(), 0u);
  t.add(13, {4, 0, 0, at_ms(6), &port, 1, false});
  t.fail_all(at_ms(7), "the scheduler is stopping");
  EXPECT_EQ(port.got.size(), 3u);
  EXPECT_EQ(t.size(), 0u);
}

}  // namespace
}  // namespace symphony::rdma
