// The scheduler's and backends' /metrics families rendered from snapshots
// (node_metrics.hpp): derived values (queue depth, autoscaling advice over
// the window, busy fractions), the models' profile recalibration, and
// readiness, on a fixed clock.
#include "symphony/cluster/node_metrics.hpp"

#include <gtest/gtest.h>

#include <string>

namespace symphony::cluster {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

SchedulerMetricsSnapshot scheduler_at(double s, std::uint64_t ok, std::uint64_t expired, Duration busy) {
  SchedulerMetricsSnapshot x;
  x.at = TimePoint::from_ns(0) + Duration::from_seconds(s);
  x.elapsed = Duration::from_seconds(s);
  SchedulerMetricsSnapshot::Model m;
  m.name = "resnet";
  m.accepted = ok + expired + 3;  // 3 still queued
  m.outcomes[static_cast<std::size_t>(Outcome::kOk)] = ok;
  m.outcomes[static_cast<std::size_t>(Outcome::kDropped)] = expired;
  m.drops[static_cast<std::size_t>(DropReason::kExpired)] = expired;
  x.models.push_back(m);
  x.gpus.push_back({0, "b1", "b1/emulated:0", true, busy, 10});
  x.gpus.push_back({1, "b1", "b1/emulated:1", true, Duration::zero(), 0});
  x.delays.ctrl = Duration::microseconds(250);
  return x;
}

TEST(SchedulerMetricsTest, ModelsWithPriorityLevelsCountEachLevel) {
  SchedulerMetricsSnapshot x = scheduler_at(10, 900, 100, Duration::seconds(5));
  metrics::AutoscaleTracker window(Duration::seconds(10));
  metrics::Writer plain;
  write_scheduler_metrics(x, window, plain);
  EXPECT_EQ(plain.text().find("symphony_priority_requests"), std::string::npos);  // one level: no series
  SchedulerMetricsSnapshot::Model& m = x.models[0];
  m.by_priority.resize(2);
  m.by_priority[0].accepted = 600;  // Triton's priority 1: all ok
  m.by_priority[0].outcomes[static_cast<std::size_t>(Outcome::kOk)] = 600;
  m.by_priority[1].accepted = 403;  // priority 2: the drops
  m.by_priority[1].outcomes[static_cast<std::size_t>(Outcome::kOk)] = 300;
  m.by_priority[1].outcomes[static_cast<std::size_t>(Outcome::kDropped)] = 100;
  metrics::Writer w;
  write_scheduler_metrics(x, window, w);
  const std::string t = w.text();
  EXPECT_TRUE(has_line(t, "symphony_priority_requests_accepted_total{model=\"resnet\",priority=\"1\"} 600"))
      << t;
  EXPECT_TRUE(has_line(t, "symphony_priority_requests_accepted_total{model=\"resnet\",priority=\"2\"} 403"))
      << t;
  EXPECT_TRUE(has_line(
      t, "symphony_priority_requests_total{model=\"resnet\",priority=\"2\",outcome=\"dropped\"} 100"))
      << t;
  EXPECT_TRUE(
      has_line(t, "symphony_priority_requests_total{model=\"resnet\",priority=\"1\",outcome=\"ok\"} 600"))
      << t;
}

TEST(SchedulerMetricsTest, QueueDepthDelaysPartitionAndAdviceOverTheWindow) {
  metrics::AutoscaleTracker window(Duration::seconds(10));
  (void)window.observe({TimePoint::from_ns(0), 0, 0, Duration::zero(), 0});
  metrics::Writer w;
  // 10 s: 900 ok, 100 expired -> bad rate 10 % on 2 GPUs -> add ceil(2 * 0.1 / 0.9) = 1.
  write_scheduler_metrics(scheduler_at(10, 900, 100, Duration::seconds(5)), window, w);
  const std::string t = w.text();
  EXPECT_TRUE(has_line(t, "symphony_queue_depth{model=\"resnet\"} 3")) << t;
  EXPECT_TRUE(has_line(t, "symphony_requests_dropped_total{model=\"resnet\",reason=\"expired\"} 100")) << t;
  EXPECT_TRUE(has_line(t, "symphony_goodput_rps{model=\"resnet\"} 90")) << t;
  EXPECT_TRUE(has_line(t, "symphony_delay_seconds{kind=\"ctrl\"} 0.00025")) << t;
  EXPECT_TRUE(has_line(t, "symphony_partition_epoch 0")) << t;
  EXPECT_TRUE(has_line(t, "symphony_subclusters 1")) << t;
  EXPECT_TRUE(has_line(t, "symphony_autoscale_advice_gpus{subcluster=\"0\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "symphony_autoscale_advice_gpus{subcluster=\"all\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "symphony_autoscale_busy_fraction{subcluster=\"all\"} 0.25")) << t;
  // 25 s: the window is [15 s, 25 s] against the totals at 10 s: 1000 more
  // ok, none bad, 0.5 s busy on 2 GPUs over 15 s -> release floor(2 * (1 - 1/60)) = 1.
  metrics::Writer w2;
  write_scheduler_metrics(scheduler_at(25, 1900, 100, Duration::from_seconds(5.5)), window, w2);
  const std::string t2 = w2.text();
  EXPECT_TRUE(has_line(t2, "symphony_autoscale_bad_rate{subcluster=\"all\"} 0")) << t2;
  EXPECT_TRUE(has_line(t2, "symphony_autoscale_advice_gpus{subcluster=\"all\"} -1")) << t2;
  EXPECT_TRUE(has_line(t2, "symphony_autoscale_window_seconds 15")) << t2;
}

// Each frontend's one-way delay and replies' way out (told, and as planned
// with after the cap), named by its Hello's name or else its address.
TEST(SchedulerMetricsTest, EachFrontendsDelaysTakenOffItsTargets) {
  SchedulerMetricsSnapshot x = scheduler_at(10, 900, 100, Duration::seconds(5));
  x.frontend_delays.push_back({"fe1", "10.0.0.1:8000", Duration::microseconds(400), Duration::milliseconds(3),
                               Duration::milliseconds(3), false});
  x.frontend_delays.push_back({"", "10.0.0.2:8000", Duration::milliseconds(6), Duration::milliseconds(8),
                               Duration::milliseconds(4), true});
  metrics::AutoscaleTracker window(Duration::seconds(10));
  metrics::Writer w;
  write_scheduler_metrics(x, window, w);
  const std::string t = w.text();
  EXPECT_TRUE(has_line(
      t,
      "symphony_frontend_delay_seconds{frontend=\"fe1\",address=\"10.0.0.1:8000\",kind=\"one_way\"} 0.0004"))
      << t;
  EXPECT_TRUE(
      has_line(t,
               "symphony_frontend_delay_seconds{frontend=\"fe1\",address=\"10.0.0.1:8000\",kind=\"reply_"
               "path\"} 0.003"))
      << t;
  EXPECT_TRUE(has_line(t, "symphony_frontend_delay_capped{frontend=\"fe1\",address=\"10.0.0.1:8000\"} 0"))
      << t;
  EXPECT_TRUE(has_line(t,
                       "symphony_frontend_delay_seconds{frontend=\"10.0.0.2:8000\",address=\"10.0.0.2:8000\","
                       "kind=\"reply_path_told\"} 0.008"))
      << t;
  EXPECT_TRUE(has_line(t,
                       "symphony_frontend_delay_seconds{frontend=\"10.0.0.2:8000\",address=\"10.0.0.2:8000\","
                       "kind=\"reply_path\"} 0.004"))
      << t;
  EXPECT_TRUE(
      has_line(t, "symphony_frontend_delay_capped{frontend=\"10.0.0.2:8000\",address=\"10.0.0.2:8000\"} 1"))
      << t;
}

TEST(SchedulerMetricsTest, SubClustersGetTheirOwnAdviceAndTheClusterTheCombinedSignal) {
  metrics::AutoscaleTracker window(Duration::seconds(10));
  SchedulerMetricsSnapshot x = scheduler_at(10, 900, 100, Duration::seconds(5));
  x.subclusters = 2;
  x.partition_epoch = 3;
  x.partition_moves = 2;
  x.drains_pending = 1;
  x.subs_window_s = 1.5;
  // Sub-cluster 0: 1000 arrived, 100 bad on 3 GPUs -> add ceil(3 * 0.1 / 0.9) = 1.
  // Sub-cluster 1: 1000 arrived, none bad, 1 GPU 50 % busy -> release floor(0.5) = 0.
  // The cluster: 2000 arrived, 100 bad (5 %) on 4 GPUs -> add ceil(4 * 0.05 / 0.95) = 1.
  x.subs.push_back({0, 3, 2, 1, AutoscaleSignal{3, 1000, 100, 0.9}});
  x.subs.push_back({1, 1, 1, 0, AutoscaleSignal{1, 1000, 0, 0.5}});
  metrics::Writer w;
  write_scheduler_metrics(x, window, w);
  const std::string t = w.text();
  EXPECT_TRUE(has_line(t, "symphony_subclusters 2")) << t;
  EXPECT_TRUE(has_line(t, "symphony_partition_epoch 3")) << t;
  EXPECT_TRUE(has_line(t, "symphony_partition_moves_total 2")) << t;
  EXPECT_TRUE(has_line(t, "symphony_partition_drains_pending 1")) << t;
  EXPECT_TRUE(has_line(t, "symphony_subcluster_gpus{subcluster=\"0\"} 3")) << t;
  EXPECT_TRUE(has_line(t, "symphony_subcluster_models{subcluster=\"1\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "symphony_subcluster_models_draining{subcluster=\"0\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "symphony_autoscale_advice_gpus{subcluster=\"0\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "symphony_autoscale_advice_gpus{subcluster=\"1\"} 0")) << t;
  EXPECT_TRUE(has_line(t, "symphony_autoscale_bad_rate{subcluster=\"all\"} 0.05")) << t;
  EXPECT_TRUE(has_line(t, "symphony_autoscale_gpus{subcluster=\"all\"} 4")) << t;
  EXPECT_TRUE(has_line(t, "symphony_autoscale_advice_gpus{subcluster=\"all\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "symphony_autoscale_window_seconds 1.5")) << t;
}

TEST(SchedulerMetricsTest, TheAdviceUsesTheConfigsMaxBadRate) {
  metrics::AutoscaleTracker window(Duration::seconds(10));
  SchedulerMetricsSnapshot x = scheduler_at(10, 900, 100, Duration::seconds(5));
  x.subclusters = 2;
  // 10 % bad on 3 GPUs: above the default 1 %, an extra GPU; within a 20 % bound, none.
  x.subs.push_back({0, 3, 2, 0, AutoscaleSignal{3, 1000, 100, 0.9}});
  x.subs.push_back({1, 1, 1, 0, AutoscaleSignal{1, 1000, 0, 1.0}});
  metrics::Writer strict;
  write_scheduler_metrics(x, window, strict);
  EXPECT_TRUE(has_line(strict.text(), "symphony_autoscale_advice_gpus{subcluster=\"0\"} 1")) << strict.text();
  x.max_bad_rate = 0.2;
  metrics::Writer loose;
  write_scheduler_metrics(x, window, loose);
  EXPECT_TRUE(has_line(loose.text(), "symphony_autoscale_advice_gpus{subcluster=\"0\"} 0")) << loose.text();
}

TEST(SchedulerMetricsTest, EachModelsProfileRecalibration) {
  metrics::AutoscaleTracker window(Duration::seconds(10));
  SchedulerMetricsSnapshot x = scheduler_at(10, 900, 100, Duration::seconds(5));
  // resnet: recalibrated from backend timings twice its offline profile.
  auto offline = LatencyProfile::linear(Duration::milliseconds(1), Duration::milliseconds(4), 12);
  ASSERT_TRUE(offline.ok());
  auto c = ProfileCalibrator::create(*offline, RecalibrationOptions::on());
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 16; ++i) (void)c->observe(4, Duration::nanoseconds(offline->latency(4).ns() * 2));
  x.models[0].max_batch = 12;
  x.models[0].calibration = c->snapshot();
  // bert: not recalibrated; gpt: no runtime knows it (no families).
  SchedulerMetricsSnapshot::Model bert;
  bert.name = "bert";
  bert.max_batch = 4;
  bert.calibration = CalibrationSnapshot{false, *offline, *offline, 0, 0, {}};
  x.models.push_back(bert);
  SchedulerMetricsSnapshot::Model gpt;
  gpt.name = "gpt";
  x.models.push_back(gpt);
  metrics::Writer w;
  write_scheduler_metrics(x, window, w);
  const std::string t = w.text();
  EXPECT_TRUE(has_line(t, "symphony_profile_recalibrating{model=\"resnet\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "symphony_profile_recalibration_samples_total{model=\"resnet\"} 16")) << t;
  EXPECT_TRUE(has_line(t, "symphony_profile_recalibration_updates_total{model=\"resnet\"} 2")) << t;
  // Two updates of at most +25 % each: 1.25^2.
  EXPECT_TRUE(has_line(t, "symphony_profile_scale{model=\"resnet\",batch=\"12\"} 1.5625")) << t;
  EXPECT_TRUE(has_line(
      t, "symphony_profile_latency_seconds{model=\"resnet\",batch=\"12\",profile=\"offline\"} 0.016"))
      << t;
  EXPECT_TRUE(
      has_line(t, "symphony_profile_latency_seconds{model=\"resnet\",batch=\"12\",profile=\"in_use\"} 0.025"))
      << t;
  EXPECT_TRUE(has_line(t, "symphony_profile_recalibrating{model=\"bert\"} 0")) << t;
  EXPECT_TRUE(has_line(t, "symphony_profile_scale{model=\"bert\",batch=\"4\"} 1")) << t;
  EXPECT_EQ(t.find("{model=\"bert\",batch=\"8\""), std::string::npos) << t;  // its max batch is 4
  EXPECT_EQ(t.find("symphony_profile_recalibrating{model=\"gpt\"}"), std::string::npos) << t;
  EXPECT_TRUE(has_line(t, "symphony_queue_depth{model=\"gpt\"} 0")) << t;
}

TEST(SchedulerMetricsTest, EachModelsRefusalLatencyInTheDelayBuckets) {
  metrics::AutoscaleTracker window(Duration::seconds(10));
  SchedulerMetricsSnapshot x = scheduler_at(10, 900, 100, Duration::seconds(5));
  x.models[0].refusal_latency.record(Duration::microseconds(40));
  x.models[0].refusal_latency.record(Duration::microseconds(300));
  x.models[0].refusal_latency.record(Duration::milliseconds(3));
  metrics::Writer w;
  write_scheduler_metrics(x, window, w);
  const std::string t = w.text();
  EXPECT_TRUE(has_line(t, "symphony_refusal_latency_seconds_bucket{model=\"resnet\",le=\"5e-05\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "symphony_refusal_latency_seconds_bucket{model=\"resnet\",le=\"0.001\"} 2")) << t;
  EXPECT_TRUE(has_line(t, "symphony_refusal_latency_seconds_bucket{model=\"resnet\",le=\"0.1\"} 3")) << t;
  EXPECT_TRUE(has_line(t, "symphony_refusal_latency_seconds_count{model=\"resnet\"} 3")) << t;
}

TEST(SchedulerMetricsTest, ReadyOnlyWithALiveGpuAndNotStopping) {
  SchedulerMetricsSnapshot s;
  EXPECT_EQ(scheduler_not_ready(s), "no backend GPU registered");
  s.gpus.push_back({0, "b1", "d", false, Duration::zero(), 0});
  EXPECT_EQ(scheduler_not_ready(s), "no backend GPU registered");
  s.gpus[0].alive = true;
  EXPECT_EQ(scheduler_not_ready(s), "");
  s.stopping = true;
  EXPECT_EQ(scheduler_not_ready(s), "the scheduler is stopping");
}

TEST(BackendMetricsTest, BatchesByOutcomeBusyAndModelLoads) {
  BackendMetricsSnapshot s;
  s.elapsed = Duration::seconds(4);
  s.model_loads = 2;
  s.models = {"a", "b"};
  s.devices.push_back({"cpu:0", Duration::seconds(1), 7, 1, 2, 30});
  metrics::Writer w;
  write_backend_metrics(s, w);
  const std::string t = w.text();
  EXPECT_TRUE(has_line(t, "symphony_backend_batches_total{device=\"cpu:0\",outcome=\"ok\"} 7")) << t;
  EXPECT_TRUE(has_line(t, "symphony_backend_batches_total{device=\"cpu:0\",outcome=\"error\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "symphony_backend_batches_total{device=\"cpu:0\",outcome=\"skipped\"} 2")) << t;
  EXPECT_TRUE(has_line(t, "symphony_backend_busy_fraction{device=\"cpu:0\"} 0.25")) << t;
  EXPECT_TRUE(has_line(t, "symphony_backend_model_loads_total 2")) << t;
  EXPECT_TRUE(has_line(t, "symphony_backend_model{model=\"b\"} 1")) << t;
  EXPECT_EQ(backend_not_ready(s), "not registered with the scheduler");
  s.registered = true;
  EXPECT_EQ(backend_not_ready(s), "");
}

}  // namespace
}  // namespace symphony::cluster
