// The result of a simulation run (RunResult) and the pieces every engine that
// runs an experiment (the core's ExperimentSpec, symphony/experiment_spec.hpp)
// shares: the tee of metrics and observer, and the request pool's size.
// run_experiment() (experiment.hpp) runs a spec on our Scheduler or, for the
// peers of the paper's evaluation, on their engines (peers/peer_experiment.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "symphony/experiment_spec.hpp"
#include "symphony/sim/metrics.hpp"
#include "symphony/sim/network.hpp"
#include "symphony/sim/noise.hpp"
#include "symphony/sim/workload.hpp"
#include "symphony/status.hpp"
#include "symphony/types.hpp"

namespace symphony::sim {

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
  for (const ModelConfig& m : e.models)
    mc.max_batch.push_back(m.max_batch ? m.max_batch : m.profile.max_batch());
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
