// One simulation experiment as plain data (models, GPUs, delays, policies, timing noise, a workload),
// and run_experiment(), which runs it and returns a RunSummary (metrics.hpp). It picks the Scheduler's
// instantiation for the spec's exec policy, gathering and timing model at run time (visit_policy,
// policy.hpp), so one spec runs under every policy on identical code; the paper's peers run on their
// own engines (peers/). Searches (search.hpp) call it with another rate scale or GPU count and the
// same seed (docs/architecture.md#simulator).
//
// Guarantees: deterministic (same spec, scale, GPU count and seed: the same summary); allocation only
// while setting up a run and summarizing it; requests that do not fit the request pool (sized from the
// workload) are dropped with reason queue_full and show up in the metrics, never silently.
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

#include "symphony/batch_bounds.hpp"
#include "symphony/policy.hpp"
#include "symphony/sim/experiment_spec.hpp"
#include "symphony/sim/metrics.hpp"
#include "symphony/sim/peers/peer_experiment.hpp"
#include "symphony/sim/simulator.hpp"
#include "symphony/sim/workload.hpp"
#include "symphony/status.hpp"
#include "symphony/types.hpp"

namespace symphony::sim {

namespace detail {

template <class Exec, class Gather, class Timing, class Obs>
Result<RunResult> run_with(const ExperimentSpec& e, double scale, std::uint32_t gpus, Exec exec,
                           Gather gather, Timing timing, Obs* obs) {
  const Duration duration = e.duration;
  Metrics metrics(metrics_config(e, gpus));
  TeeSink<Obs> sink{metrics, obs};

  SchedulerConfig sc;
  sc.max_models = static_cast<std::uint32_t>(e.models.size());
  sc.max_gpus = gpus;
  sc.max_requests = e.max_requests ? e.max_requests : pool_size(e, scale);
  sc.max_outstanding_per_gpu = e.max_outstanding_per_gpu;
  sc.delays = e.planned_delays();
  sc.recalibration = e.recalibration;
  using Sim = Simulator<TeeSink<Obs>, Exec, Gather, Timing>;
  SYMPHONY_ASSIGN_OR_RETURN(std::unique_ptr<Sim> created,
                            Sim::create(sc, sink, std::move(exec), std::move(gather), std::move(timing)));
  Sim& sim = *created;
  if (e.delay_jitter.enabled())
    sim.set_network(NetworkJitter(e.delay_jitter, e.delays, e.seed ^ 0x6e657477ULL));
  for (const ModelConfig& m : e.models) SYMPHONY_RETURN_IF_ERROR(sim.scheduler().add_model(m));
  for (std::uint32_t g = 0; g < gpus; ++g) SYMPHONY_RETURN_IF_ERROR(sim.scheduler().add_gpu());

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
    SYMPHONY_RETURN_IF_ERROR(w.validate());
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
  // NoisyTiming draws the same jitter as LogNormalTiming from the same seed.
  if (e.noise().beyond_lognormal())
    return run_with(e, scale, gpus, std::move(exec), std::move(gather),
                    NoisyTiming(e.noise(), e.seed ^ 0x7a3d1f), obs);
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
  SYMPHONY_RETURN_IF_ERROR(e.validate());
  if (!(rate_scale > 0) || !std::isfinite(rate_scale))
    return Status(Errc::kInvalidArgument, "rate scale must be a positive finite number");
  if (e.policy.is_peer()) return run_peer_experiment(e, rate_scale, gpus, obs);
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
