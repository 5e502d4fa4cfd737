// An experiment as plain data: the models, the workload offered to them
// (workload.hpp), the cluster's GPUs, the network delays and their spread
// (delay_jitter.hpp), the exec and gathering policy, the device's timing
// noise (noise_spec.hpp), online recalibration, and what is measured. The
// simulator runs it (sim/experiment.hpp); a cluster's scheduler and load
// generator read the same description from cluster.yaml (symphony::config),
// the scheduler for its models, policy, delay floors and the rates it places
// the models by before it has measured any (expected_rates()).
//
// Plain values; validate() names the first bad field.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "symphony/delay_jitter.hpp"
#include "symphony/noise_spec.hpp"
#include "symphony/policy.hpp"
#include "symphony/profile_calibrator.hpp"
#include "symphony/status.hpp"
#include "symphony/triton_batcher.hpp"
#include "symphony/types.hpp"
#include "symphony/workload.hpp"

namespace symphony {

struct ExperimentSpec {
  std::vector<ModelConfig> models;  // index = ModelId; ModelConfig::timeout overrides `timeout`
  std::vector<ModelLoad> loads;     // one per model (synthetic workload)
  std::vector<TraceRecord> trace;   // when non-empty, replayed instead of `loads`
  std::uint32_t gpus = 1;
  Delays delays;
  // Per-dispatch network delays (delay_jitter.hpp): with jitter, delays.ctrl and
  // delays.data are the medians of the real delays and the scheduler plans
  // with planned_delays(). Our scheduler only.
  DelayJitter delay_jitter;
  // Exec and gathering policy (policy.hpp). Under timeout:<f>slo each
  // model's ModelConfig::timeout must be set (model_timeout()); the spec's
  // own policy.timeout is k for models without one.
  PolicySpec policy;
  double noise_sigma = 0;  // > 0: batches run l(b) * exp(N(0, sigma))
  // Beyond the jitter (noise_spec.hpp): spells when the device runs slower, and
  // rare batches that run outlier_factor times as long. Our scheduler only.
  std::vector<DriftEpisode> drift;
  double outlier_probability = 0;
  double outlier_factor = 3.0;
  // Online recalibration of the models' profiles from the simulated batch
  // durations (profile_calibrator.hpp); off unless enabled. Our scheduler only.
  RecalibrationOptions recalibration;
  Duration duration;  // arrivals in [0, duration)
  Duration warmup;    // arrivals before it are not measured
  Duration autoscale_window = Duration::seconds(1);
  Duration autoscale_step;  // zero: the window (consecutive windows)
  std::uint64_t seed = 1;
  double max_bad_rate = 0.01;
  std::uint32_t max_outstanding_per_gpu = 4;
  std::uint32_t max_requests = 0;  // request pool; 0: sized from the workload
  // Each model's own queue policies under the Triton peer (a config's
  // default_queue_policy and priority_queue_policy); empty, or a model's
  // entry empty: the policy's options. The Triton peer only.
  std::vector<TritonModelQueuePolicy> triton_queues;

  Status validate() const {
    if (models.empty()) return Status(Errc::kInvalidArgument, "an experiment needs at least one model");
    if (trace.empty() && loads.size() != models.size())
      return Status(Errc::kInvalidArgument, "one load per model is needed (" + std::to_string(models.size()) +
                                                " models, " + std::to_string(loads.size()) + " loads)");
    if (gpus == 0) return Status(Errc::kInvalidArgument, "gpus must be at least 1");
    if (duration <= Duration::zero()) return Status(Errc::kInvalidArgument, "duration must be positive");
    if (warmup < Duration::zero() || warmup >= duration)
      return Status(Errc::kInvalidArgument, "warmup must be >= 0 and shorter than the duration");
    if (noise_sigma < 0) return Status(Errc::kInvalidArgument, "noise sigma must not be negative");
    SYMPHONY_RETURN_IF_ERROR(noise().validate());
    SYMPHONY_RETURN_IF_ERROR(recalibration.validate());
    SYMPHONY_RETURN_IF_ERROR(delay_jitter.validate());
    if (policy.is_peer() && delay_jitter.enabled())
      return Status(
          Errc::kInvalidArgument,
          "delay jitter (delays.sigma / delays.tail) runs on our scheduler only, not on the peer '" +
              policy.to_string() + "'");
    if (policy.is_peer() && (noise().beyond_lognormal() || recalibration.enabled))
      return Status(Errc::kInvalidArgument,
                    "noise drift, outliers and recalibration run on our scheduler only, not on the peer '" +
                        policy.to_string() + "'");
    if (policy.timeout < Duration::zero())
      return Status(Errc::kInvalidArgument, "timeout must not be negative");
    if (autoscale_step < Duration::zero() || autoscale_step > autoscale_window ||
        (autoscale_step > Duration::zero() && autoscale_window.ns() % autoscale_step.ns() != 0))
      return Status(Errc::kInvalidArgument, "the autoscaling step must divide the autoscaling window");
    for (const TraceRecord& r : trace)
      if (r.model >= models.size())
        return Status(Errc::kInvalidArgument, "trace names model id " + std::to_string(r.model) +
                                                  " but only " + std::to_string(models.size()) +
                                                  " models exist");
    return {};
  }

  // The delays the scheduler plans with: `delays`, or with jitter their
  // plan_percentile (delay_jitter.hpp).
  Delays planned_delays() const noexcept { return delay_jitter.planned(delays); }

  // The timing noise as one spec (noise_spec.hpp).
  NoiseSpec noise() const { return NoiseSpec{noise_sigma, drift, outlier_probability, outlier_factor}; }

  // Total offered rate at scale 1 (requests per second, before rate changes).
  double base_rate() const {
    if (!trace.empty())
      return static_cast<double>(trace.size()) / std::max(trace.back().time.to_seconds(), 1e-9);
    double r = 0;
    for (const ModelLoad& l : loads) r += l.rate;
    return r;
  }
};

// Each model's expected rate over [0, over) at `scale` (epoch 0's input).
inline std::vector<double> expected_rates(const ExperimentSpec& e, double scale, Duration over) {
  std::vector<double> rates(e.models.size(), 0.0);
  const double secs = over.to_seconds();
  if (!(secs > 0)) return rates;
  if (!e.trace.empty()) {
    for (const TraceRecord& r : e.trace)
      if (static_cast<double>(r.time.ns()) / scale < static_cast<double>(over.ns())) rates[r.model] += 1;
    for (double& r : rates) r /= secs;
  } else {
    for (std::size_t i = 0; i < e.loads.size(); ++i)
      rates[i] = expected_requests(e.loads[i], over) / secs * scale;
  }
  return rates;
}

}  // namespace symphony
