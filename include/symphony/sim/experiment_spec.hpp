// One simulation experiment as plain data (ExperimentSpec), the result of a
// run (RunResult), and the pieces every engine that runs one shares: the
// tee of metrics and observer, and the request pool's size. run_experiment()
// (experiment.hpp) runs a spec on our Scheduler or, for the peers of the
// paper's evaluation, on their engines (peers/peer_experiment.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "symphony/policy.hpp"
#include "symphony/profile_calibrator.hpp"
#include "symphony/sim/metrics.hpp"
#include "symphony/sim/network.hpp"
#include "symphony/sim/noise.hpp"
#include "symphony/sim/workload.hpp"
#include "symphony/status.hpp"
#include "symphony/types.hpp"

namespace symphony::sim {

struct ExperimentSpec {
  std::vector<ModelConfig> models;  // index = ModelId; ModelConfig::timeout overrides `timeout`
  std::vector<ModelLoad> loads;     // one per model (synthetic workload)
  std::vector<TraceRecord> trace;   // when non-empty, replayed instead of `loads`
  std::uint32_t gpus = 1;
  Delays delays;
  // Per-dispatch network delays (network.hpp): with jitter, delays.ctrl and
  // delays.data are the medians of the real delays and the scheduler plans
  // with planned_delays(). Our scheduler only.
  DelayJitter delay_jitter;
  // Exec and gathering policy (policy.hpp). Under timeout:<f>slo each
  // model's ModelConfig::timeout must be set (model_timeout()); the spec's
  // own policy.timeout is k for models without one.
  PolicySpec policy;
  double noise_sigma = 0;  // > 0: batches run l(b) * exp(N(0, sigma))
  // Beyond the jitter (noise.hpp): spells when the device runs slower, and
  // rare batches that run outlier_factor times as long. Our scheduler only.
  std::vector<DriftEpisode> drift;
  double outlier_probability = 0;
  double outlier_factor = 3.0;
  // Online recalibration of the models' profiles from the simulated batch
  // durations (profile_calibrator.hpp); off unless enabled. Our scheduler only.
  RecalibrationOptions recalibration;
  Duration duration;       // arrivals in [0, duration)
  Duration warmup;         // arrivals before it are not measured
  Duration autoscale_window = Duration::seconds(1);
  Duration autoscale_step;  // zero: the window (consecutive windows)
  std::uint64_t seed = 1;
  double max_bad_rate = 0.01;
  std::uint32_t max_outstanding_per_gpu = 4;
  std::uint32_t max_requests = 0;  // request pool; 0: sized from the workload

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
    if (Status s = noise().validate(); !s.ok()) return s;
    if (Status s = recalibration.validate(); !s.ok()) return s;
    if (Status s = delay_jitter.validate(); !s.ok()) return s;
    if (policy.is_peer() && delay_jitter.enabled())
      return Status(Errc::kInvalidArgument,
                    "delay jitter (delays.sigma / delays.tail) runs on our scheduler only, not on the peer '" +
                        policy.to_string() + "'");
    if (policy.is_peer() && (noise().beyond_lognormal() || recalibration.enabled))
      return Status(Errc::kInvalidArgument,
                    "noise drift, outliers and recalibration run on our scheduler only, not on the peer '" +
                        policy.to_string() + "'");
    if (policy.timeout < Duration::zero()) return Status(Errc::kInvalidArgument, "timeout must not be negative");
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
  // plan_percentile (network.hpp).
  Delays planned_delays() const noexcept { return delay_jitter.planned(delays); }

  // The timing noise as one spec (noise.hpp).
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

// Receives every dispatch, execution and outcome of a run besides the metrics
// (for trace files). The default ignores them.
struct NullObserver {
  void on_dispatch(const Dispatch&) noexcept {}
  void on_execute(const Dispatch&, TimePoint, TimePoint) noexcept {}
  void on_outcome(const RequestOutcome&) noexcept {}
};

struct RunResult {
  RunSummary summary;
  std::uint64_t requests = 0;  // simulated requests (all, not only the window's)
  std::uint64_t events = 0;    // simulator events processed
  // Counters particular to the engine that ran, as (name, value): a peer's
  // preemptions or plans (sim/peers/); empty for our Scheduler.
  std::vector<std::pair<std::string, double>> engine_stats;
};

namespace detail {

template <class Obs>
struct TeeSink {
  Metrics& metrics;
  Obs* obs;
  void on_dispatch(const Dispatch& d) {
    metrics.on_dispatch(d);
    if (obs) obs->on_dispatch(d);
  }
  void on_execute(const Dispatch& d, TimePoint s, TimePoint e) {
    metrics.on_execute(d, s, e);
    if (obs) obs->on_execute(d, s, e);
  }
  void on_outcome(const RequestOutcome& o) {
    metrics.on_outcome(o);
    if (obs) obs->on_outcome(o);
  }
};

// A request pool that holds the queues at the workload's peak: four times
// (peak rate x longest SLO) over all models, plus slack.
// The metrics of a run of `e` on `gpus` GPUs (its warm-up, duration and
// autoscaling settings; per-model max batch as the scheduler uses it).
inline MetricsConfig metrics_config(const ExperimentSpec& e, std::uint32_t gpus) {
  MetricsConfig mc;
  for (const ModelConfig& m : e.models) mc.max_batch.push_back(m.max_batch ? m.max_batch : m.profile.max_batch());
  mc.num_gpus = gpus;
  mc.begin = TimePoint::epoch() + e.warmup;
  mc.end = TimePoint::epoch() + e.duration;
  mc.autoscale_window = e.autoscale_window;
  mc.autoscale_step = e.autoscale_step;
  mc.max_bad_rate = e.max_bad_rate;
  return mc;
}

inline std::uint32_t pool_size(const ExperimentSpec& e, double scale) {
  double need = 0;
  if (!e.trace.empty()) {
    // Most requests in any window as long as the longest SLO.
    Duration longest;
    for (const ModelConfig& m : e.models) longest = max(longest, m.slo);
    for (const TraceRecord& r : e.trace)
      if (r.slo) longest = max(longest, *r.slo);
    const auto window = static_cast<std::int64_t>(static_cast<double>(longest.ns()) * scale);
    std::size_t j = 0, most = 0;
    for (std::size_t i = 0; i < e.trace.size(); ++i) {
      while (e.trace[i].time.ns() - e.trace[j].time.ns() > window) ++j;
      most = std::max(most, i - j + 1);
    }
    need = 4.0 * static_cast<double>(most);
  } else {
    for (std::size_t i = 0; i < e.loads.size(); ++i) {
      const ModelLoad& l = e.loads[i];
      double peak = 1.0;
      for (const RateChange& c : l.rate_changes) peak = std::max(peak, c.scale);
      Duration slo = e.models[i].slo;
      for (const SloOverride& o : l.slo_overrides) slo = max(slo, o.slo);
      need += 4.0 * l.rate * scale * peak * slo.to_seconds() + 64;
    }
  }
  need += 4096;
  return static_cast<std::uint32_t>(std::min(need, double(1u << 22)));
}

}  // namespace detail
}  // namespace symphony::sim
