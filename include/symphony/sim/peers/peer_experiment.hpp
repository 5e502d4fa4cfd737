// Runs an ExperimentSpec under one of the peers (Clockwork, Nexus, Shepherd
// Flex, Triton's dynamic batcher) instead of our Scheduler, on the same emulated GPUs, workload,
// timing noise and metrics, returning the same RunResult, so the goodput and
// minimum-GPU searches (search.hpp) drive it unchanged.
//
// The spec's models, loads or trace, GPU count, delays, noise, duration,
// warm-up, seed, autoscaling windows and bad-rate threshold apply; its exec
// and gathering policies do not (each peer has its own rules), nor do
// max_outstanding_per_gpu and per-model target_batch/timeout (max_queue is
// Triton's max_queue_size under the Triton peer, which also takes the
// spec's triton_queues and the arrivals' priority levels). The
// request pool is sized as for our engine; a full pool drops with reason
// queue_full.
//
// The peer is the spec's policy, a peer kind of the policy language
// (policy.hpp): clockwork[:...], nexus[:...], shepherd[:...], triton[:...].
//
//   spec.policy = *parse_policy("nexus:frontends=8");
//   Result<RunResult> r = run_experiment(spec);  // experiment.hpp calls run_peer_experiment
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "symphony/model_state.hpp"
#include "symphony/policy.hpp"
#include "symphony/sim/experiment_spec.hpp"
#include "symphony/sim/peers/clockwork.hpp"
#include "symphony/sim/peers/nexus.hpp"
#include "symphony/sim/peers/shepherd.hpp"
#include "symphony/sim/peers/triton.hpp"

namespace symphony::sim {

namespace detail {

// The offered rate of every model at the start of the run (Nexus's first
// plan, Triton's placement=disjoint): a model's rate x scale x its schedule's scale at time 0, or for a
// trace the requests of its first epoch.
inline std::vector<double> initial_rates(const ExperimentSpec& e, double scale, Duration epoch) {
  std::vector<double> rates(e.models.size(), 0.0);
  if (!e.trace.empty()) {
    const Duration first = min(epoch, e.duration);
    for (const TraceRecord& r : e.trace)
      if (static_cast<double>(r.time.ns()) / scale < static_cast<double>(first.ns()))
        rates[r.model] += 1 / first.to_seconds();
    return rates;
  }
  for (std::size_t i = 0; i < e.loads.size(); ++i) {
    double s = 1.0;
    for (const RateChange& c : e.loads[i].rate_changes)
      if (c.at <= Duration::zero()) s = c.scale;
    rates[i] = e.loads[i].rate * scale * s;
  }
  return rates;
}

template <class Engine, class Obs>
Result<RunResult> run_peer_engine(Engine& engine, const ExperimentSpec& e, double scale, Metrics& metrics) {
  RunResult out;
  if (!e.trace.empty()) {
    TraceArrivals src(e.trace, scale, e.duration);
    out.events = drive_peer(engine, src);
    for (const TraceRecord& r : e.trace)
      if (static_cast<double>(r.time.ns()) / scale < static_cast<double>(e.duration.ns())) ++out.requests;
  } else {
    WorkloadSpec w;
    w.models = e.loads;
    w.duration = e.duration;
    w.seed = e.seed;
    w.rate_scale = scale;
    SYMPHONY_RETURN_IF_ERROR(w.validate());
    WorkloadArrivals src(w);
    out.events = drive_peer(engine, src);
    out.requests = src.count();
  }
  out.summary = metrics.summary();
  const PeerStats& st = engine.stats();
  out.engine_stats = {{"decisions", static_cast<double>(st.decisions)}};
  if (st.preemptions || st.preempted_gpu_time > Duration::zero()) {
    out.engine_stats.emplace_back("preemptions", static_cast<double>(st.preemptions));
    out.engine_stats.emplace_back("preempted_gpu_s", st.preempted_gpu_time.to_seconds());
  }
  if (st.plans) {
    out.engine_stats.emplace_back("plans", static_cast<double>(st.plans));
    out.engine_stats.emplace_back("planned_gpus", st.planned_gpus);
    out.engine_stats.emplace_back("overloaded_plans", static_cast<double>(st.overloaded_plans));
    if (st.plan_scale_min > 0) out.engine_stats.emplace_back("plan_scale_min", st.plan_scale_min);
    out.engine_stats.emplace_back("route_changes", static_cast<double>(st.route_changes));
    out.engine_stats.emplace_back("plans_triggered", static_cast<double>(st.plans_triggered));
  }
  return out;
}

template <class Timing, class Obs>
Result<RunResult> run_peer_with(const ExperimentSpec& e, const PolicySpec& peer, double scale,
                                std::uint32_t gpus, Timing timing, Obs* obs) {
  Metrics metrics(detail::metrics_config(e, gpus));
  TeeSink<Obs> sink{metrics, obs};
  const std::uint32_t pool = e.max_requests ? e.max_requests : pool_size(e, scale);
  switch (peer.exec) {
    case ExecKind::kClockwork: {
      ClockworkEngine<TeeSink<Obs>, Timing> engine(e.models, gpus, e.delays, pool, peer.clockwork, sink,
                                                   std::move(timing));
      return run_peer_engine<decltype(engine), Obs>(engine, e, scale, metrics);
    }
    case ExecKind::kNexus: {
      const std::vector<double> rates = initial_rates(e, scale, peer.nexus.epoch);
      NexusEngine<TeeSink<Obs>, Timing> engine(e.models, gpus, e.delays, pool, peer.nexus, rates,
                                               TimePoint::epoch() + e.duration, e.seed, sink,
                                               std::move(timing));
      return run_peer_engine<decltype(engine), Obs>(engine, e, scale, metrics);
    }
    case ExecKind::kShepherd: {
      ShepherdEngine<TeeSink<Obs>, Timing> engine(e.models, gpus, e.delays, pool, peer.shepherd, sink,
                                                  std::move(timing));
      return run_peer_engine<decltype(engine), Obs>(engine, e, scale, metrics);
    }
    case ExecKind::kTriton: {
      // Placed once, for the rates offered at the start: a static config.
      const std::vector<double> rates = initial_rates(e, scale, Duration::seconds(10));
      TritonEngine<TeeSink<Obs>, Timing> engine(e.models, gpus, e.delays, pool, peer.triton, rates, sink,
                                                std::move(timing));
      for (ModelId m = 0; m < e.triton_queues.size() && m < e.models.size(); ++m)
        engine.set_model_queue_policy(m, e.triton_queues[m]);
      return run_peer_engine<decltype(engine), Obs>(engine, e, scale, metrics);
    }
    default:
      break;
  }
  return Status(Errc::kInvalidArgument, "policy '" + peer.to_string() + "' is not a peer");
}

}  // namespace detail

// Checks a peer's options (parse_policy() only produces valid ones).
inline Status validate_peer(const PolicySpec& p) {
  if (p.clockwork.window == 0) return Status(Errc::kInvalidArgument, "clockwork: window must be at least 1");
  if (!(p.clockwork.percentile > 0) || p.clockwork.percentile > 1)
    return Status(Errc::kInvalidArgument, "clockwork: percentile must be in (0, 1]");
  if (p.clockwork.slack < Duration::zero() || p.clockwork.horizon < Duration::zero())
    return Status(Errc::kInvalidArgument, "clockwork: slack and horizon must not be negative");
  if (p.nexus.frontends == 0) return Status(Errc::kInvalidArgument, "nexus: frontends must be at least 1");
  if (p.nexus.epoch <= Duration::zero())
    return Status(Errc::kInvalidArgument, "nexus: epoch must be positive");
  if (!(p.shepherd.lambda > 1)) return Status(Errc::kInvalidArgument, "shepherd: lambda must be above 1");
  if (p.triton.count == 0) return Status(Errc::kInvalidArgument, "triton: count must be at least 1");
  if (p.triton.max_queue_delay < Duration::zero() || p.triton.queue_timeout < Duration::zero())
    return Status(Errc::kInvalidArgument, "triton: max_queue_delay and queue_timeout must not be negative");
  return {};
}

// Runs the experiment under its peer policy (e.policy.is_peer()) with every
// rate multiplied by `rate_scale` (a trace is compressed by it) on `gpus`
// GPUs (0: the spec's count); `obs`, if given, sees every dispatch, execution
// and outcome. The same contract as run_experiment(), which calls it.
template <class Obs = NullObserver>
Result<RunResult> run_peer_experiment(const ExperimentSpec& e, double rate_scale = 1.0,
                                      std::uint32_t gpus = 0, Obs* obs = nullptr) {
  const PolicySpec& peer = e.policy;
  SYMPHONY_RETURN_IF_ERROR(e.validate());
  if (!peer.is_peer())
    return Status(Errc::kInvalidArgument, "policy '" + peer.to_string() + "' is not a peer");
  SYMPHONY_RETURN_IF_ERROR(validate_peer(peer));
  if (!(rate_scale > 0) || !std::isfinite(rate_scale))
    return Status(Errc::kInvalidArgument, "rate scale must be a positive finite number");
  if (gpus == 0) gpus = e.gpus;
  for (const ModelConfig& m : e.models) SYMPHONY_RETURN_IF_ERROR(ModelState<>::validate(m));
  if (e.noise_sigma > 0)
    return detail::run_peer_with(e, peer, rate_scale, gpus, LogNormalTiming(e.noise_sigma, e.seed ^ 0x7a3d1f),
                                 obs);
  return detail::run_peer_with(e, peer, rate_scale, gpus, ExactTiming{}, obs);
}

}  // namespace symphony::sim
