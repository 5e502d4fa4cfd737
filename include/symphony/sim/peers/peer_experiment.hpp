// Runs an ExperimentSpec under one of the peers (Clockwork, Nexus, Shepherd
// Flex) instead of our Scheduler, on the same emulated GPUs, workload,
// timing noise and metrics, returning the same RunResult, so the goodput and
// minimum-GPU searches (search.hpp) drive it unchanged.
//
// The spec's models, loads or trace, GPU count, delays, noise, duration,
// warm-up, seed, autoscaling windows and bad-rate threshold apply; its exec
// and gathering policies do not (each peer has its own rules), nor do
// max_outstanding_per_gpu and per-model max_queue/target_batch/timeout. The
// request pool is sized as for our engine; a full pool drops with reason
// queue_full.
//
// The peer spelling (`--peer` today, a kind of the policy language later):
//   clockwork[:slack_ms=<x>,horizon_ms=<x>,window=<n>,percentile=<p>]
//   nexus[:frontends=<n>,epoch_s=<x>,fill=<0|1>]
//   shepherd[:lambda=<x>]
//
//   Result<RunResult> r = run_peer_experiment(spec, *parse_peer("nexus:frontends=8"));
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "symphony/model_shard.hpp"
#include "symphony/sim/experiment.hpp"
#include "symphony/sim/peers/clockwork.hpp"
#include "symphony/sim/peers/nexus.hpp"
#include "symphony/sim/peers/shepherd.hpp"

namespace symphony::sim {

enum class PeerKind : std::uint8_t { kClockwork, kNexus, kShepherd };

struct PeerSpec {
  PeerKind kind = PeerKind::kClockwork;
  ClockworkOptions clockwork;
  NexusOptions nexus;
  ShepherdOptions shepherd;
};

namespace detail {
inline std::string peer_number(double v) {  // the shortest of %g and %.17g that reads back exactly
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
}  // namespace detail

// Parses a peer spelling (above). Options may come in any order and subset;
// the others keep the defaults. Errors name the part that is wrong.
inline Result<PeerSpec> parse_peer(std::string_view text) {
  const std::string usage =
      " (expected clockwork[:slack_ms=<x>,horizon_ms=<x>,window=<n>,percentile=<p>], "
      "nexus[:frontends=<n>,epoch_s=<x>,fill=<0|1>] or shepherd[:lambda=<x>])";
  auto fail = [&usage](std::initializer_list<std::string_view> parts, bool with_usage) {
    std::string m;
    for (std::string_view p : parts) m.append(p);
    if (with_usage) m.append(usage);
    return Status(Errc::kInvalidArgument, std::move(m));
  };
  PeerSpec p;
  const std::size_t colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  if (name == "clockwork")
    p.kind = PeerKind::kClockwork;
  else if (name == "nexus")
    p.kind = PeerKind::kNexus;
  else if (name == "shepherd")
    p.kind = PeerKind::kShepherd;
  else
    return fail({"unknown peer '", text, "'"}, true);
  if (colon == std::string_view::npos) return p;
  std::string_view rest = text.substr(colon + 1);
  for (;;) {
    const std::size_t comma = std::min(rest.find(','), rest.size());
    const std::string_view item = rest.substr(0, comma);
    const std::size_t eq = item.find('=');
    const std::string key(item.substr(0, eq));
    const std::string value(eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1));
    char* end = nullptr;
    const double x = std::strtod(value.c_str(), &end);
    const bool number = !value.empty() && *end == '\0' && std::isfinite(x);
    auto bad = [&](std::string_view want) {
      return fail({"peer option '", key, "' needs ", want, ", got '", value, "'"}, false);
    };
    auto whole = [&](double lo) { return number && x >= lo && x == std::floor(x) && x <= 1e6; };
    switch (p.kind) {
      case PeerKind::kClockwork:
        if (key == "slack_ms") {
          if (!number || x < 0) return bad("a number >= 0");
          p.clockwork.slack = Duration::from_ms(x);
        } else if (key == "horizon_ms") {
          if (!number || x < 0) return bad("a number >= 0");
          p.clockwork.horizon = Duration::from_ms(x);
        } else if (key == "window") {
          if (!whole(1)) return bad("a whole number >= 1");
          p.clockwork.window = static_cast<std::uint32_t>(x);
        } else if (key == "percentile") {
          if (!number || !(x > 0) || x > 1) return bad("a number in (0, 1]");
          p.clockwork.percentile = x;
        } else {
          return fail({"unknown clockwork option '", item, "'"}, true);
        }
        break;
      case PeerKind::kNexus:
        if (key == "frontends") {
          if (!whole(1)) return bad("a whole number >= 1");
          p.nexus.frontends = static_cast<std::uint32_t>(x);
        } else if (key == "epoch_s") {
          if (!number || !(x > 0)) return bad("a number > 0");
          p.nexus.epoch = Duration::from_seconds(x);
        } else if (key == "fill") {
          if (!number || (x != 0 && x != 1)) return bad("0 or 1");
          p.nexus.fill = x == 1;
        } else {
          return fail({"unknown nexus option '", item, "'"}, true);
        }
        break;
      case PeerKind::kShepherd:
        if (key == "lambda") {
          if (!number || !(x > 1)) return bad("a number > 1");
          p.shepherd.lambda = x;
        } else {
          return fail({"unknown shepherd option '", item, "'"}, true);
        }
        break;
    }
    if (comma == rest.size()) break;
    rest = rest.substr(comma + 1);
  }
  return p;
}

// The spelling parse_peer() reads back to the same spec: the bare name for
// the defaults, else every option.
inline std::string peer_name(const PeerSpec& p) {
  using detail::peer_number;
  switch (p.kind) {
    case PeerKind::kClockwork: {
      const ClockworkOptions d, &o = p.clockwork;
      if (o.slack == d.slack && o.horizon == d.horizon && o.window == d.window &&
          o.percentile == d.percentile)
        return "clockwork";
      return "clockwork:slack_ms=" + peer_number(o.slack.to_ms()) +
             ",horizon_ms=" + peer_number(o.horizon.to_ms()) + ",window=" + std::to_string(o.window) +
             ",percentile=" + peer_number(o.percentile);
    }
    case PeerKind::kNexus: {
      const NexusOptions d, &o = p.nexus;
      if (o.frontends == d.frontends && o.epoch == d.epoch && o.fill == d.fill) return "nexus";
      return "nexus:frontends=" + std::to_string(o.frontends) +
             ",epoch_s=" + peer_number(o.epoch.to_seconds()) + ",fill=" + (o.fill ? "1" : "0");
    }
    case PeerKind::kShepherd:
      if (p.shepherd.lambda == ShepherdOptions{}.lambda) return "shepherd";
      return "shepherd:lambda=" + peer_number(p.shepherd.lambda);
  }
  return "?";
}

namespace detail {

// The offered rate of every model at the start of the run (Nexus's first
// plan): a model's rate x scale x its schedule's scale at time 0, or for a
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
    if (Status s = w.validate(); !s.ok()) return s;
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
  }
  return out;
}

template <class Timing, class Obs>
Result<RunResult> run_peer_with(const ExperimentSpec& e, const PeerSpec& peer, double scale,
                                std::uint32_t gpus, Timing timing, Obs* obs) {
  MetricsConfig mc;
  for (const ModelConfig& m : e.models)
    mc.max_batch.push_back(m.max_batch ? m.max_batch : m.profile.max_batch());
  mc.num_gpus = gpus;
  mc.begin = TimePoint::epoch() + e.warmup;
  mc.end = TimePoint::epoch() + e.duration;
  mc.autoscale_window = e.autoscale_window;
  mc.autoscale_step = e.autoscale_step;
  mc.max_bad_rate = e.max_bad_rate;
  Metrics metrics(std::move(mc));
  TeeSink<Obs> sink{metrics, obs};
  const std::uint32_t pool = e.max_requests ? e.max_requests : pool_size(e, scale);
  switch (peer.kind) {
    case PeerKind::kClockwork: {
      ClockworkEngine<TeeSink<Obs>, Timing> engine(e.models, gpus, e.delays, pool, peer.clockwork, sink,
                                                   std::move(timing));
      return run_peer_engine<decltype(engine), Obs>(engine, e, scale, metrics);
    }
    case PeerKind::kNexus: {
      const std::vector<double> rates = initial_rates(e, scale, peer.nexus.epoch);
      NexusEngine<TeeSink<Obs>, Timing> engine(e.models, gpus, e.delays, pool, peer.nexus, rates,
                                               TimePoint::epoch() + e.duration, e.seed, sink,
                                               std::move(timing));
      return run_peer_engine<decltype(engine), Obs>(engine, e, scale, metrics);
    }
    case PeerKind::kShepherd: {
      ShepherdEngine<TeeSink<Obs>, Timing> engine(e.models, gpus, e.delays, pool, peer.shepherd, sink,
                                                  std::move(timing));
      return run_peer_engine<decltype(engine), Obs>(engine, e, scale, metrics);
    }
  }
  return Status(Errc::kInvalidArgument, "unknown peer");
}

}  // namespace detail

// Checks a peer's options (parse_peer() only produces valid ones).
inline Status validate_peer(const PeerSpec& p) {
  if (p.clockwork.window == 0) return Status(Errc::kInvalidArgument, "clockwork: window must be at least 1");
  if (!(p.clockwork.percentile > 0) || p.clockwork.percentile > 1)
    return Status(Errc::kInvalidArgument, "clockwork: percentile must be in (0, 1]");
  if (p.clockwork.slack < Duration::zero() || p.clockwork.horizon < Duration::zero())
    return Status(Errc::kInvalidArgument, "clockwork: slack and horizon must not be negative");
  if (p.nexus.frontends == 0) return Status(Errc::kInvalidArgument, "nexus: frontends must be at least 1");
  if (p.nexus.epoch <= Duration::zero())
    return Status(Errc::kInvalidArgument, "nexus: epoch must be positive");
  if (!(p.shepherd.lambda > 1)) return Status(Errc::kInvalidArgument, "shepherd: lambda must be above 1");
  return {};
}

// Runs the experiment under `peer` with every rate multiplied by
// `rate_scale` (a trace is compressed by it) on `gpus` GPUs (0: the spec's
// count); `obs`, if given, sees every dispatch, execution and outcome. The
// same contract as run_experiment().
template <class Obs = NullObserver>
Result<RunResult> run_peer_experiment(const ExperimentSpec& e, const PeerSpec& peer, double rate_scale = 1.0,
                                      std::uint32_t gpus = 0, Obs* obs = nullptr) {
  if (Status s = e.validate(); !s.ok()) return s;
  if (Status s = validate_peer(peer); !s.ok()) return s;
  if (!(rate_scale > 0) || !std::isfinite(rate_scale))
    return Status(Errc::kInvalidArgument, "rate scale must be a positive finite number");
  if (gpus == 0) gpus = e.gpus;
  for (const ModelConfig& m : e.models)
    if (Status s = ModelShard<>::validate(m); !s.ok()) return s;
  if (e.noise_sigma > 0)
    return detail::run_peer_with(e, peer, rate_scale, gpus, LogNormalTiming(e.noise_sigma, e.seed ^ 0x7a3d1f),
                                 obs);
  return detail::run_peer_with(e, peer, rate_scale, gpus, ExactTiming{}, obs);
}

}  // namespace symphony::sim
