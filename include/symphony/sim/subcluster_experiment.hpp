// An experiment (ExperimentSpec) run on a cluster split into sub-clusters with epochs
// (sim/subcluster.hpp), and everything measured about it: the whole cluster's RunSummary (as
// run_experiment's, over the cluster's GPU ids), one summary per sub-cluster, the epochs (rates, the
// partitioner's answers, the moves and their drains) and per-model time series (sim/series.hpp).
// The partitioner is a callback (partitioner.hpp): the core has no solver. At epoch 0 it gets each
// model's expected rate (docs/simulator.md#sub-clusters-and-epochs-subclusters).
//
// Guarantees: with one sub-cluster the run is event for event run_experiment()'s (same summary);
// deterministic for a deterministic partitioner (same spec, scale, GPU count, seed and partitioner
// answers: the same result); allocation at set-up, at epochs and when summarizing.
//
//   SubClusterSpec sc;  sc.count = 4;  sc.epoch = Duration::seconds(300);  sc.max_disruption = 4;
//   Result<SubClusterRunResult> r = run_subcluster_experiment(e, sc, my_partitioner);
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "symphony/experiment_spec.hpp"
#include "symphony/policy.hpp"
#include "symphony/sim/experiment.hpp"
#include "symphony/sim/series.hpp"
#include "symphony/sim/subcluster.hpp"
#include "symphony/subcluster.hpp"

namespace symphony::sim {

struct SubClusterRunResult {
  RunResult cluster;                    // the whole cluster (cluster GPU ids)
  std::vector<std::uint32_t> gpus;      // per sub-cluster
  std::vector<RunSummary> subclusters;  // per sub-cluster: its GPUs (local ids), the requests it ended
  std::vector<EpochRecord> epochs;      // epoch 0 is the initial placement
  ModelSeries series;
};

namespace detail {

// Feeds the cluster's metrics, the sub-cluster's metrics (its local GPU ids),
// the series and the observer.
template <class Obs>
struct SubClusterTee {
  Metrics& cluster;
  std::vector<Metrics>& subs;
  ModelSeries& series;
  const std::vector<GpuId>& first;
  Obs* obs;
  void on_dispatch(SubClusterId j, const Dispatch& d) {
    cluster.on_dispatch(d);
    subs[j].on_dispatch(d);
    if (obs) obs->on_dispatch(d);
  }
  void on_execute(SubClusterId j, const Dispatch& d, TimePoint s, TimePoint e) {
    cluster.on_execute(d, s, e);
    Dispatch local = d;
    local.gpu = d.gpu - first[j];
    subs[j].on_execute(local, s, e);
    if (obs) obs->on_execute(d, s, e);
  }
  void on_outcome(SubClusterId j, const RequestOutcome& o) {
    cluster.on_outcome(o);
    subs[j].on_outcome(o);
    series.on_outcome(o);
    if (obs) obs->on_outcome(o);
  }
};

template <class Exec, class Gather, class Timing, class Obs>
Result<SubClusterRunResult> run_subclusters_with(const ExperimentSpec& e, const SubClusterSpec& sc,
                                                 const Partitioner& partitioner, double scale,
                                                 const std::vector<std::uint32_t>& split, Exec exec,
                                                 Gather gather, Timing timing, Obs* obs) {
  std::uint32_t gpus = 0;
  for (std::uint32_t g : split) gpus += g;
  Metrics cluster(detail::metrics_config(e, gpus));
  std::vector<Metrics> subs;
  std::vector<GpuId> first;
  GpuId next = 0;
  for (std::uint32_t n : split) {
    subs.emplace_back(detail::metrics_config(e, n));
    first.push_back(next);
    next += n;
  }
  Duration step = sc.series_step;
  if (step <= Duration::zero())
    step = e.autoscale_step > Duration::zero() ? e.autoscale_step : e.autoscale_window;
  if (step <= Duration::zero()) step = e.duration;
  ModelSeries series(e.models.size(), step, TimePoint::epoch() + e.duration);
  SubClusterTee<Obs> sink{cluster, subs, series, first, obs};

  SchedulerConfig cfg;
  cfg.max_requests = e.max_requests ? e.max_requests : pool_size(e, scale);
  cfg.max_outstanding_per_gpu = e.max_outstanding_per_gpu;
  cfg.delays = e.delays;
  SubClusterLayout layout;
  layout.gpus = split;
  layout.epoch = sc.epoch;
  layout.max_disruption = sc.max_disruption;
  const Duration first_epoch = sc.epoch > Duration::zero() ? min(sc.epoch, e.duration) : e.duration;
  using Sim = SubClusterSimulator<SubClusterTee<Obs>, Exec, Gather, Timing>;
  SYMPHONY_ASSIGN_OR_RETURN(
      std::unique_ptr<Sim> created,
      Sim::create(cfg, layout, e.models, partitioner, expected_rates(e, scale, first_epoch), sink,
                  std::move(exec), std::move(gather), std::move(timing)));
  Sim& sim = *created;

  SubClusterRunResult out;
  if (!e.trace.empty()) {
    TraceArrivals src(e.trace, scale, e.duration);
    out.cluster.events = sim.run(src);
    for (const TraceRecord& r : e.trace)
      if (static_cast<double>(r.time.ns()) / scale < static_cast<double>(e.duration.ns()))
        ++out.cluster.requests;
  } else {
    WorkloadSpec w;
    w.models = e.loads;
    w.duration = e.duration;
    w.seed = e.seed;
    w.rate_scale = scale;
    SYMPHONY_RETURN_IF_ERROR(w.validate());
    WorkloadArrivals src(w);
    out.cluster.events = sim.run(src);
    out.cluster.requests = src.count();
  }
  if (!sim.status().ok()) return sim.status();
  out.cluster.summary = cluster.summary();
  out.gpus = split;
  for (const Metrics& m : subs) out.subclusters.push_back(m.summary());
  out.epochs = sim.epochs();
  out.series = std::move(series);
  return out;
}

}  // namespace detail

// Runs the experiment on `gpus` GPUs (0: the spec's count) split into the
// spec's sub-clusters, every rate multiplied by `rate_scale`. `obs`, if
// given, sees every dispatch, execution and outcome with cluster ids.
// REQUIRES nothing; errors name the problem (bad split, a peer policy, a
// failing partitioner).
template <class Obs = NullObserver>
Result<SubClusterRunResult> run_subcluster_experiment(const ExperimentSpec& e, const SubClusterSpec& sc,
                                                      const Partitioner& partitioner, double rate_scale = 1.0,
                                                      std::uint32_t gpus = 0, Obs* obs = nullptr) {
  SYMPHONY_RETURN_IF_ERROR(e.validate());
  if (!(rate_scale > 0) || !std::isfinite(rate_scale))
    return Status(Errc::kInvalidArgument, "rate scale must be a positive finite number");
  if (e.policy.is_peer())
    return Status(Errc::kInvalidArgument,
                  "policy '" + e.policy.to_string() +
                      "' is a peer of the paper's evaluation, which has no sub-clusters; "
                      "use deferred, eager or timeout");
  if (e.noise().beyond_lognormal() || e.recalibration.enabled || e.delay_jitter.enabled())
    return Status(
        Errc::kInvalidArgument,
        "noise drift, outliers, recalibration and delay jitter are not simulated with sub-clusters (yet)");
  if (sc.epoch < Duration::zero()) return Status(Errc::kInvalidArgument, "the epoch must not be negative");
  if (!(sc.max_disruption >= 0)) return Status(Errc::kInvalidArgument, "the disruption bound must be >= 0");
  if (gpus == 0) gpus = e.gpus;
  SYMPHONY_ASSIGN_OR_RETURN(std::vector<std::uint32_t> split, sc.split(gpus));
  return visit_policy(e.policy, [&](auto exec, auto gather) -> Result<SubClusterRunResult> {
    if (e.noise_sigma > 0)
      return detail::run_subclusters_with(e, sc, partitioner, rate_scale, split, std::move(exec), gather,
                                          LogNormalTiming(e.noise_sigma, e.seed ^ 0x7a3d1f), obs);
    return detail::run_subclusters_with(e, sc, partitioner, rate_scale, split, std::move(exec), gather,
                                        ExactTiming{}, obs);
  });
}

}  // namespace symphony::sim
