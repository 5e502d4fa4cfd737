// Network delays drawn per dispatch (sim/network.hpp): the distribution has
// the configured median and tail, the scheduler plans with its percentile,
// the simulator really applies the drawn delays, and runs stay deterministic.
#include "symphony/sim/network.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "symphony/sim/experiment.hpp"

namespace symphony::sim {
namespace {

TEST(NetworkJitterTest, NormalQuantile) {
  EXPECT_NEAR(normal_quantile(0.5), 0.0, 1e-9);
  EXPECT_NEAR(normal_quantile(0.99), 2.326348, 1e-5);
  EXPECT_NEAR(normal_quantile(0.9999), 3.719016, 1e-5);
  EXPECT_NEAR(normal_quantile(0.01), -2.326348, 1e-5);
}

TEST(NetworkJitterTest, TailOfTheDrawnDelaysIsTheConfiguredOne) {
  // TCP in the paper: median 3 ms, 99.99th percentile 12x the median.
  DelayJitter j;
  j.sigma = DelayJitter::sigma_for_tail(0.9999, 12);
  EXPECT_NEAR(j.sigma, std::log(12.0) / 3.719016, 1e-5);
  Delays med;
  med.ctrl = Duration::milliseconds(3);
  NetworkJitter n(j, med, 7);
  std::vector<double> ms;
  const int draws = 1'000'000;
  for (int i = 0; i < draws; ++i) ms.push_back(n.actual(1).to_ms());
  std::sort(ms.begin(), ms.end());
  EXPECT_NEAR(ms[draws / 2], 3.0, 0.03);
  const double p9999 = ms[static_cast<std::size_t>(0.9999 * draws)];
  EXPECT_NEAR(p9999 / 3.0, 12.0, 1.5);
  EXPECT_GT(ms.back(), ms[draws / 2]);
}

TEST(NetworkJitterTest, PlansWithThePercentileAndIsExactWithoutSigma) {
  Delays med;
  med.ctrl = Duration::milliseconds(2);
  med.data = Duration::microseconds(10);
  med.resp = Duration::milliseconds(1);
  DelayJitter none;
  EXPECT_FALSE(none.enabled());
  EXPECT_EQ(none.planned(med).ctrl, med.ctrl);
  DelayJitter j{0.5, 0.99};
  const double q = std::exp(0.5 * 2.326348);
  EXPECT_NEAR(j.planned(med).ctrl.to_ms(), 2 * q, 1e-4);
  EXPECT_NEAR(j.planned(med).data.to_ms(), 0.01 * q, 1e-6);
  EXPECT_EQ(j.planned(med).resp, med.resp) << "d_resp stays fixed";
  EXPECT_FALSE((DelayJitter{0.5, 1.0}.validate().ok()));
  EXPECT_FALSE((DelayJitter{-1, 0.9}.validate().ok()));
}

ExperimentSpec resnet(double rate) {
  ExperimentSpec e;
  ModelConfig m;
  m.name = "resnet50";
  m.profile = *LatencyProfile::linear(Duration::from_ms(1.053), Duration::from_ms(5.072), 64);
  m.slo = Duration::milliseconds(50);
  e.models = {m};
  ModelLoad l;
  l.rate = rate;
  e.loads = {l};
  e.gpus = 4;
  e.duration = Duration::seconds(3);
  e.warmup = Duration::milliseconds(500);
  e.delays.ctrl = Duration::milliseconds(3);
  e.delays.data = Duration::microseconds(20);
  return e;
}

// The delay each batch really had: start - dispatch, for batches whose GPU
// was idle (start is then dispatch + the drawn delay).
struct DelayLog {
  std::vector<double> delay_ms, planned_ms;
  std::vector<TimePoint> gpu_end = std::vector<TimePoint>(64, TimePoint::neg_infinite());
  void on_dispatch(const Dispatch&) {}
  void on_execute(const Dispatch& d, TimePoint s, TimePoint e) {
    if (gpu_end[d.gpu] < d.dispatched_at) {
      delay_ms.push_back((s - d.dispatched_at).to_ms());
      planned_ms.push_back(d.delay.to_ms());
    }
    gpu_end[d.gpu] = e;
  }
  void on_outcome(const RequestOutcome&) {}
};

TEST(NetworkJitterTest, TheSimulatorAppliesTheDrawnDelaysDeterministically) {
  ExperimentSpec exact = resnet(800);
  DelayLog le;
  const RunResult a = *run_experiment(exact, 1.0, 0, &le);
  ASSERT_FALSE(le.delay_ms.empty());
  for (std::size_t i = 0; i < le.delay_ms.size(); ++i) EXPECT_NEAR(le.delay_ms[i], le.planned_ms[i], 1e-6);

  ExperimentSpec jit = exact;
  jit.delay_jitter = DelayJitter{DelayJitter::sigma_for_tail(0.9999, 12), 0.99};
  DelayLog l1, l2;
  const RunResult b = *run_experiment(jit, 1.0, 0, &l1);
  const RunResult c = *run_experiment(jit, 1.0, 0, &l2);
  EXPECT_EQ(l1.delay_ms, l2.delay_ms) << "same seed, same delays";
  EXPECT_EQ(b.summary.total.counts.ok, c.summary.total.counts.ok);
  EXPECT_EQ(a.requests, b.requests) << "the workload does not change";
  ASSERT_GT(l1.delay_ms.size(), 100u);
  // Planned with the 99th percentile: the scheduler's delay(b) is ~4.7x the
  // median; the real ones are spread around the median, a few beyond.
  const double planned_ctrl = jit.planned_delays().ctrl.to_ms();
  EXPECT_NEAR(planned_ctrl, 3 * std::exp(jit.delay_jitter.sigma * 2.326348), 1e-3);
  std::vector<double> d = l1.delay_ms;
  std::sort(d.begin(), d.end());
  const double median = d[d.size() / 2];
  EXPECT_GT(median, 2.5);
  EXPECT_LT(median, 4.5);
  std::size_t beyond = 0;
  for (std::size_t i = 0; i < l1.delay_ms.size(); ++i) beyond += l1.delay_ms[i] > l1.planned_ms[i];
  EXPECT_GT(beyond, 0u);
  EXPECT_LT(beyond, l1.delay_ms.size() / 20);
  jit.seed = 2;
  DelayLog l3;
  (void)*run_experiment(jit, 1.0, 0, &l3);
  EXPECT_NE(l1.delay_ms, l3.delay_ms);
}

TEST(NetworkJitterTest, PeersRefuseJitter) {
  ExperimentSpec e = resnet(100);
  e.delay_jitter.sigma = 0.3;
  e.policy = *parse_policy("nexus");
  EXPECT_FALSE(e.validate().ok());
}

}  // namespace
}  // namespace symphony::sim
