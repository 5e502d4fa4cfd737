// The metrics sink and its histogram: each metric from hand-made events.
#include "symphony/sim/metrics.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace symphony::sim {
namespace {

TimePoint ms(double v) { return TimePoint::epoch() + Duration::from_ms(v); }

RequestOutcome ran(ModelId m, double arrival, double exec, double finish, std::uint32_t batch,
                   Outcome o = Outcome::kOk) {
  RequestOutcome r;
  r.model = m;
  r.outcome = o;
  r.arrival = ms(arrival);
  r.deadline = ms(arrival + 100);
  r.exec = ms(exec);
  r.finish = ms(finish);
  r.batch_size = batch;
  r.gpu = 0;
  return r;
}

RequestOutcome dropped(ModelId m, double arrival, DropReason why) {
  RequestOutcome r;
  r.model = m;
  r.outcome = Outcome::kDropped;
  r.reason = why;
  r.arrival = ms(arrival);
  r.finish = ms(arrival);
  r.exec = TimePoint::infinite();
  return r;
}

Dispatch batch(ModelId m, GpuId g, std::uint32_t size, double at) {
  Dispatch d;
  d.model = m;
  d.gpu = g;
  d.size = size;
  d.dispatched_at = ms(at);
  return d;
}

MetricsConfig config(double begin_ms, double end_ms, std::uint32_t gpus = 2) {
  MetricsConfig c;
  c.max_batch = {8, 4};
  c.num_gpus = gpus;
  c.begin = ms(begin_ms);
  c.end = ms(end_ms);
  return c;
}

TEST(MetricsTest, CountsOutcomesAndDropReasonsInsideTheWindowOnly) {
  Metrics m(config(100, 1100));
  m.on_outcome(ran(0, 50, 60, 70, 1));  // before the window: ignored
  m.on_outcome(ran(0, 200, 210, 220, 2));
  m.on_outcome(ran(0, 300, 310, 420, 2, Outcome::kLate));
  m.on_outcome(dropped(0, 400, DropReason::kExpired));
  m.on_outcome(dropped(0, 500, DropReason::kInfeasible));
  m.on_outcome(dropped(0, 600, DropReason::kExpired));
  m.on_outcome(ran(0, 700, 710, 720, 1, Outcome::kError));
  m.on_outcome(ran(1, 800, 810, 820, 4));
  m.on_outcome(ran(1, 1100, 1110, 1120, 4));  // at the window's end: ignored
  const RunSummary s = m.summary();
  const ModelStats& a = s.models[0];
  EXPECT_EQ(a.counts.sent, 6u);
  EXPECT_EQ(a.counts.ok, 1u);
  EXPECT_EQ(a.counts.late, 1u);
  EXPECT_EQ(a.counts.errors, 1u);
  EXPECT_EQ(a.counts.dropped, 3u);
  EXPECT_EQ(a.counts.dropped_by_reason[static_cast<int>(DropReason::kExpired)], 2u);
  EXPECT_EQ(a.counts.dropped_by_reason[static_cast<int>(DropReason::kInfeasible)], 1u);
  EXPECT_DOUBLE_EQ(a.counts.bad_rate(), 5.0 / 6);
  EXPECT_DOUBLE_EQ(a.goodput_rps, 1.0);  // one ok request in a 1 s window
  EXPECT_DOUBLE_EQ(a.offered_rps, 6.0);
  EXPECT_EQ(s.models[1].counts.sent, 1u);
  EXPECT_DOUBLE_EQ(s.models[1].counts.bad_rate(), 0.0);
  EXPECT_EQ(s.total.counts.sent, 7u);
  EXPECT_EQ(s.total.counts.ok, 2u);
  EXPECT_DOUBLE_EQ(s.total.counts.bad_rate(), 5.0 / 7);
  EXPECT_DOUBLE_EQ(s.worst_bad_rate, 5.0 / 6);
}

TEST(MetricsTest, LatencyAndQueueingPercentilesOfRequestsThatRan) {
  Metrics m(config(0, 10000));
  for (int i = 1; i <= 100; ++i) m.on_outcome(ran(0, 10.0 * i, 10.0 * i + i * 0.1, 10.0 * i + i, 1));
  m.on_outcome(dropped(0, 5, DropReason::kExpired));  // no latency for drops
  const RunSummary s = m.summary();
  const ModelStats& a = s.models[0];
  EXPECT_EQ(a.latency.count, 100u);
  EXPECT_NEAR(a.latency.p50.to_ms(), 50, 0.1);
  EXPECT_NEAR(a.latency.p90.to_ms(), 90, 0.2);
  EXPECT_NEAR(a.latency.p99.to_ms(), 99, 0.2);
  EXPECT_NEAR(a.latency.max.to_ms(), 100, 1e-9);
  EXPECT_NEAR(a.latency.mean.to_ms(), 50.5, 1e-6);
  EXPECT_NEAR(a.queueing.p50.to_ms(), 5.0, 0.01);
  EXPECT_NEAR(a.queueing.max.to_ms(), 10.0, 1e-9);
}

TEST(MetricsTest, BatchHistogramsMedianAndMean) {
  Metrics m(config(0, 1000));
  // Batches dispatched in the window: sizes 1, 4, 4, 8 (model 0).
  for (std::uint32_t b : {1u, 4u, 4u, 8u}) m.on_dispatch(batch(0, 0, b, 10));
  m.on_dispatch(batch(0, 0, 8, 2000));  // outside the window
  // Requests: 1 ran in a batch of 1, 8 in batches of 4, 8 in a batch of 8.
  m.on_outcome(ran(0, 1, 2, 3, 1));
  for (int i = 0; i < 8; ++i) m.on_outcome(ran(0, 1, 2, 3, 4));
  for (int i = 0; i < 8; ++i) m.on_outcome(ran(0, 1, 2, 3, 8));
  const RunSummary s = m.summary();
  const ModelStats& a = s.models[0];
  EXPECT_EQ(a.batches_by_size[1], 1u);
  EXPECT_EQ(a.batches_by_size[4], 2u);
  EXPECT_EQ(a.batches_by_size[8], 1u);
  EXPECT_DOUBLE_EQ(a.mean_batch, 17.0 / 4);
  EXPECT_EQ(a.requests_by_size[4], 8u);
  EXPECT_DOUBLE_EQ(a.median_batch, 4);  // request 9 of 17 ran in a batch of 4
  m.on_outcome(ran(0, 1, 2, 3, 8));
  m.on_outcome(ran(0, 1, 2, 3, 8));
  EXPECT_DOUBLE_EQ(m.summary().models[0].median_batch, 8);  // request 10 of 19
}

TEST(MetricsTest, BusyFractionIsClippedToTheWindowAndCountsUsedGpus) {
  Metrics m(config(100, 600, 3));
  m.on_execute(batch(0, 0, 1, 0), ms(50), ms(150));   // 50 ms inside
  m.on_execute(batch(0, 0, 1, 0), ms(200), ms(400));  // 200 ms
  m.on_execute(batch(0, 1, 1, 0), ms(550), ms(700));  // 50 ms inside
  m.on_execute(batch(0, 2, 1, 0), ms(700), ms(800));  // outside
  const RunSummary s = m.summary();
  EXPECT_DOUBLE_EQ(s.gpu_busy_fraction[0], 250.0 / 500);
  EXPECT_DOUBLE_EQ(s.gpu_busy_fraction[1], 50.0 / 500);
  EXPECT_DOUBLE_EQ(s.gpu_busy_fraction[2], 0.0);
  EXPECT_DOUBLE_EQ(s.busy_fraction, 300.0 / 500 / 3);
  EXPECT_EQ(s.gpus_used, 2u);
}

TEST(MetricsTest, AutoscaleAdviceAddsForBadRateAndReleasesIdleGpus) {
  MetricsConfig c = config(0, 2000, 4);
  c.autoscale_window = Duration::seconds(1);
  Metrics m(c);
  // Window 0: 10 requests, 2 bad -> r = 0.2 -> add 4 * 0.2 / 0.8 = 1 GPU.
  for (int i = 0; i < 8; ++i) m.on_outcome(ran(0, 10.0 * i, 10.0 * i, 10.0 * i + 1, 1));
  m.on_outcome(dropped(0, 90, DropReason::kExpired));
  m.on_outcome(ran(0, 95, 96, 300, 1, Outcome::kLate));
  for (int g = 0; g < 4; ++g) m.on_execute(batch(0, static_cast<GpuId>(g), 1, 0), ms(0), ms(1000));
  // Window 1: all ok, one GPU busy a quarter of the time; a batch spanning the border counts in both.
  m.on_outcome(ran(0, 1500, 1500, 1501, 1));
  m.on_execute(batch(0, 0, 1, 0), ms(1900), ms(2150));
  m.on_execute(batch(0, 0, 1, 0), ms(1000), ms(1000));  // zero length: not "used"
  const RunSummary s = m.summary();
  ASSERT_EQ(s.autoscale.size(), 2u);
  const AutoscaleSample& w0 = s.autoscale[0];
  EXPECT_EQ(w0.arrived, 10u);
  EXPECT_EQ(w0.bad, 2u);
  EXPECT_DOUBLE_EQ(w0.bad_rate, 0.2);
  EXPECT_DOUBLE_EQ(w0.busy_fraction, 1.0);
  EXPECT_EQ(w0.gpus_used, 4u);
  EXPECT_DOUBLE_EQ(w0.add_gpus, 1.0);
  EXPECT_EQ(w0.advice, 1);
  const AutoscaleSample& w1 = s.autoscale[1];
  EXPECT_DOUBLE_EQ(w1.bad_rate, 0.0);
  EXPECT_DOUBLE_EQ(w1.busy_fraction, 100.0 / 4000);
  EXPECT_EQ(w1.gpus_used, 1u);
  EXPECT_DOUBLE_EQ(w1.release_gpus, 4 * (1 - 0.025));
  EXPECT_EQ(w1.advice, -3);
  EXPECT_EQ(w1.begin, ms(1000));
  EXPECT_EQ(w1.end, ms(2000));
}

TEST(MetricsTest, AutoscaleWindowsSlideByTheStep) {
  MetricsConfig c = config(0, 3000, 2);
  c.autoscale_window = Duration::seconds(2);
  c.autoscale_step = Duration::seconds(1);
  Metrics m(c);
  for (int i = 0; i < 4; ++i) m.on_outcome(ran(0, 100.0 * i, 100.0 * i, 100.0 * i + 1, 1));
  m.on_execute(batch(0, 0, 1, 0), ms(0), ms(1000));
  for (int i = 0; i < 3; ++i) m.on_outcome(ran(0, 1100.0 + 100 * i, 1100.0 + 100 * i, 1101.0 + 100 * i, 1));
  m.on_outcome(dropped(0, 1900, DropReason::kExpired));
  m.on_execute(batch(0, 1, 1, 0), ms(1500), ms(2000));
  for (int i = 0; i < 2; ++i) m.on_outcome(ran(0, 2100.0 + 100 * i, 2100.0 + 100 * i, 2101.0 + 100 * i, 1));
  const RunSummary s = m.summary();
  ASSERT_EQ(s.autoscale.size(), 3u);
  // [0, 1 s): shorter than the window at the start.
  EXPECT_EQ(s.autoscale[0].begin, ms(0));
  EXPECT_EQ(s.autoscale[0].end, ms(1000));
  EXPECT_EQ(s.autoscale[0].arrived, 4u);
  EXPECT_DOUBLE_EQ(s.autoscale[0].busy_fraction, 0.5);
  EXPECT_EQ(s.autoscale[0].gpus_used, 1u);
  // [0, 2 s): 8 requests, 1 bad; 1.5 GPU-seconds busy of 4; both GPUs used.
  EXPECT_EQ(s.autoscale[1].arrived, 8u);
  EXPECT_DOUBLE_EQ(s.autoscale[1].bad_rate, 0.125);
  EXPECT_DOUBLE_EQ(s.autoscale[1].busy_fraction, 0.375);
  EXPECT_EQ(s.autoscale[1].gpus_used, 2u);
  EXPECT_DOUBLE_EQ(s.autoscale[1].add_gpus, 2 * 0.125 / 0.875);
  EXPECT_EQ(s.autoscale[1].advice, 1);
  // [1 s, 3 s): 6 requests, 1 bad; 0.5 GPU-seconds busy of 4; one GPU used.
  EXPECT_EQ(s.autoscale[2].begin, ms(1000));
  EXPECT_EQ(s.autoscale[2].arrived, 6u);
  EXPECT_DOUBLE_EQ(s.autoscale[2].bad_rate, 1.0 / 6);
  EXPECT_DOUBLE_EQ(s.autoscale[2].busy_fraction, 0.125);
  EXPECT_EQ(s.autoscale[2].gpus_used, 1u);
}

}  // namespace
}  // namespace symphony::sim
