// One simulation experiment as plain data, and the function that runs it:
// models, GPUs, delays, policies, timing noise and a workload go in; a
// RunSummary (metrics.hpp) comes out.
//
// The exec policy (deferred, eager, timeout), the gathering policy (sliding
// window, target batch) and the timing model (exact, log-normal noise) are
// template parameters of the Scheduler; run_experiment() picks the matching
// instantiation at run time (visit_policy, policy.hpp), so one spec can be
// run under every policy on identical code. Searches (search.hpp) call it repeatedly with a different
// rate scale or GPU count and the same seed.
//
// The request pool is sized from the workload (peak rate times the longest
// SLO, with a wide margin for bursts); if it still fills up, the requests
// that do not fit are dropped with reason queue_full and show up in the
// metrics, never silently.
//
// Guarantees: deterministic (same spec, scale, GPU count and seed: the same
// summary); allocation only while setting up a run and summarizing it.
//
//   ExperimentSpec e;  e.models = {...};  e.loads = {...};  e.gpus = 8;
//   e.duration = Duration::seconds(20);  e.warmup = Duration::seconds(2);
//   Result<RunSummary> r = run_experiment(e);
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "symphony/policy.hpp"
#include "symphony/sim/bounds.hpp"
#include "symphony/sim/metrics.hpp"
#include "symphony/sim/simulator.hpp"
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
  // Exec and gathering policy (policy.hpp). Under timeout:<f>slo each
  // model's ModelConfig::timeout must be set (model_timeout()); the spec's
  // own policy.timeout is k for models without one.
  PolicySpec policy;
  double noise_sigma = 0;  // > 0: batches run l(b) * exp(N(0, sigma))
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

template <class Exec, class Gather, class Timing, class Obs>
Result<RunResult> run_with(const ExperimentSpec& e, double scale, std::uint32_t gpus, Exec exec,
                           Gather gather, Timing timing, Obs* obs) {
  MetricsConfig mc;
  for (const ModelConfig& m : e.models)
    mc.max_batch.push_back(m.max_batch ? m.max_batch : m.profile.max_batch());
  mc.num_gpus = gpus;
  Duration duration = e.duration;
  mc.begin = TimePoint::epoch() + e.warmup;
  mc.end = TimePoint::epoch() + duration;
  mc.autoscale_window = e.autoscale_window;
  mc.autoscale_step = e.autoscale_step;
  mc.max_bad_rate = e.max_bad_rate;
  Metrics metrics(std::move(mc));
  TeeSink<Obs> sink{metrics, obs};

  SchedulerConfig sc;
  sc.max_models = static_cast<std::uint32_t>(e.models.size());
  sc.max_gpus = gpus;
  sc.max_requests = e.max_requests ? e.max_requests : pool_size(e, scale);
  sc.max_outstanding_per_gpu = e.max_outstanding_per_gpu;
  sc.delays = e.delays;
  using Sim = Simulator<TeeSink<Obs>, Exec, Gather, Timing>;
  Result<std::unique_ptr<Sim>> created =
      Sim::create(sc, sink, std::move(exec), std::move(gather), std::move(timing));
  if (!created.ok()) return created.status();
  Sim& sim = **created;
  for (const ModelConfig& m : e.models)
    if (Result<ModelId> id = sim.scheduler().add_model(m); !id.ok()) return id.status();
  for (std::uint32_t g = 0; g < gpus; ++g)
    if (Result<GpuId> id = sim.scheduler().add_gpu(); !id.ok()) return id.status();

  RunResult out;
  if (!e.trace.empty()) {
    TraceArrivals src(e.trace, scale, duration);
    out.events = sim.run(src);
  } else {
    WorkloadSpec w;
    w.models = e.loads;
    w.duration = duration;
    w.seed = e.seed;
    w.rate_scale = scale;
    if (Status s = w.validate(); !s.ok()) return s;
    WorkloadArrivals src(w);
    out.events = sim.run(src);
    out.requests = src.count();
  }
  if (!e.trace.empty()) {
    for (const TraceRecord& r : e.trace)
      if (static_cast<double>(r.time.ns()) / scale < static_cast<double>(duration.ns())) ++out.requests;
  }
  out.summary = metrics.summary();
  return out;
}

template <class Exec, class Gather, class Obs>
Result<RunResult> run_timing(const ExperimentSpec& e, double scale, std::uint32_t gpus, Exec exec,
                             Gather gather, Obs* obs) {
  if (e.noise_sigma > 0)
    return run_with(e, scale, gpus, std::move(exec), std::move(gather),
                    LogNormalTiming(e.noise_sigma, e.seed ^ 0x7a3d1f), obs);
  return run_with(e, scale, gpus, std::move(exec), std::move(gather), ExactTiming{}, obs);
}

}  // namespace detail

// Runs the experiment with every rate multiplied by `rate_scale` (a trace is
// compressed by it) on `gpus` GPUs (0: the spec's count). `obs`, if given,
// sees every dispatch, execution and outcome.
template <class Obs = NullObserver>
Result<RunResult> run_experiment(const ExperimentSpec& e, double rate_scale = 1.0, std::uint32_t gpus = 0,
                                 Obs* obs = nullptr) {
  if (Status s = e.validate(); !s.ok()) return s;
  if (!(rate_scale > 0) || !std::isfinite(rate_scale))
    return Status(Errc::kInvalidArgument, "rate scale must be a positive finite number");
  if (gpus == 0) gpus = e.gpus;
  return visit_policy(e.policy, [&](auto exec, auto gather) {
    return detail::run_timing(e, rate_scale, gpus, std::move(exec), gather, obs);
  });
}

// fluid_capacity() of the experiment's models with their shares of the
// offered rate, on `gpus` GPUs (0: the spec's count).
inline double experiment_capacity(const ExperimentSpec& e, std::uint32_t gpus = 0) {
  if (gpus == 0) gpus = e.gpus;
  std::vector<double> rate(e.models.size(), 0.0);
  if (!e.trace.empty()) {
    for (const TraceRecord& r : e.trace) rate[r.model] += 1;
  } else {
    for (std::size_t i = 0; i < e.loads.size(); ++i) rate[i] = e.loads[i].rate;
  }
  double total = 0;
  for (double r : rate) total += r;
  if (total <= 0) return 0;
  std::vector<ModelShare> shares;
  for (std::size_t i = 0; i < e.models.size(); ++i)
    shares.push_back({&e.models[i].profile, e.models[i].slo, rate[i] / total,
                      e.models[i].max_batch ? e.models[i].max_batch : ~0u});
  return fluid_capacity(shares, gpus);
}

}  // namespace symphony::sim
