// The scheduler's JSON report and /metrics snapshot (node_impl.hpp).
#include "scheduler/node_impl.hpp"

#include "symphony/metrics/outcome_report.hpp"

namespace symphony::cluster {

// ---- report --------------------------------------------------------------------------

nlohmann::json SchedulerNode::Impl::report() const {
  using nlohmann::json;
  const SchedulerCounters::Values n = counts_since_base();
  const std::vector<ModelConfig> ms = models_now();
  json r;
  r["submitted"] = n.submitted;
  r["accepted"] = n.accepted;
  r["refused_requests"] = {
      {"unknown_model", n.unknown_model}, {"bad_input", n.bad_input}, {"no_slot", n.no_slot}};
  // Cancel messages: the ids frontends withdrew, and those still known here
  // (handed to the runtime: dropped as cancelled if still queued, else they ran).
  r["cancels"] = {{"received", n.cancels}, {"handed_to_runtime", n.cancels_handed}};
  r["leases"] = {{"granted", n.leases_granted},
                 {"refused", n.leases_refused},
                 {"waited_ms", static_cast<double>(n.lease_wait_ns) / 1e6},
                 {"ran_ms", static_cast<double>(n.lease_ran_ns) / 1e6}};
  json drops = json::object();
  std::uint64_t dropped = 0;
  for (int i = 1; i < kNumDropReasons; ++i) {
    const std::uint64_t v = n.drops[static_cast<std::size_t>(i)];
    dropped += v;
    if (v) drops[std::string(to_string(static_cast<DropReason>(i)))] = v;
  }
  r["at_scheduler"] = {{"ok", n.outcome(Outcome::kOk)},
                       {"late", n.outcome(Outcome::kLate)},
                       {"dropped", dropped},
                       {"dropped_by_reason", drops},
                       {"errors", n.outcome(Outcome::kError)},
                       {"filtered_frontend_gone", n.filtered}};
  // Models of several priority levels: their requests by Triton's priority
  // (level + 1), as serve's by_priority.
  for (std::size_t i = 0; i < n.models.size() && i < ms.size(); ++i)
    for (std::size_t l = 0; l < n.models[i].by_level.size(); ++l) {
      const SchedulerCounters::Values::Model::Level& c = n.models[i].by_level[l];
      r["by_priority"][ms[i].name][std::to_string(l + 1)] = {{"accepted", c.accepted},
                                                             {"ok", c.outcome(Outcome::kOk)},
                                                             {"late", c.outcome(Outcome::kLate)},
                                                             {"dropped", c.outcome(Outcome::kDropped)},
                                                             {"errors", c.outcome(Outcome::kError)}};
    }
  // Per model: how long its refusals on arrival took, from their Submit's
  // arrival here to the send of the refusal.
  r["refusal_latency_ms"] = json::object();
  for (std::size_t i = 0; i < ms.size(); ++i)
    r["refusal_latency_ms"][ms[i].name] =
        metrics::percentiles_ms_json(n_->refusal_latency(static_cast<ModelId>(i)));
  r["batches"] = {{"sent", n.batches},
                  {"partially_filtered", n.batches_partial},
                  {"fully_filtered", n.batches_empty},
                  {"failed_to_send", n.batches_failed},
                  {"lost_with_backend", n.batches_lost},
                  {"unknown_batch_done", n.batch_done_unknown}};
  {
    // Per model: the profile planned with now against the config's, at b = 1
    // and at the largest batch (online recalibration from backend timings).
    json models = json::object();
    for (std::size_t i = 0; i < ms.size(); ++i) {
      std::optional<ModelCalibration> mc = calibration_of(static_cast<ModelId>(i));
      if (!mc) continue;
      const CalibrationSnapshot& c = mc->snapshot;
      const std::uint32_t top = c.offline.max_batch();
      if (top == 0) continue;
      models[ms[i].name] = {
          {"subcluster", mc->subcluster},
          {"samples", c.samples},
          {"updates", c.updates},
          {"l1_ms", {{"offline", c.offline.latency(1).to_ms()}, {"in_use", c.in_use.latency(1).to_ms()}}},
          {"lmax_ms",
           {{"batch", top},
            {"offline", c.offline.latency(top).to_ms()},
            {"in_use", c.in_use.latency(top).to_ms()}}}};
    }
    r["recalibration"] = {{"enabled", set_.recalibrate}, {"models", models}};
  }
  r["peers"] = {{"frontends_joined", n.frontends_joined}, {"frontends_lost", n.frontends_lost},
                {"backends_joined", n.backends_joined},   {"backends_lost", n.backends_lost},
                {"refused_token", n.refused_token},       {"refused_protocol", n.refused_protocol},
                {"refused_other", n.refused_other},       {"bad_messages", n.bad_messages}};
  r["messages"] = {{"submit", n.submit_messages}, {"outcomes", n.outcome_messages}};
  // When this scheduler last became primary (its start, or a takeover) and
  // its first batch after that (for the failover experiments).
  r["primary"] = {{"term", term_now_.load()},
                  {"since_unix_ms", took_over_unix_ms_.load()},
                  {"first_dispatch_after_ms",
                   first_dispatch_ns_.load() > 0 && took_over_ns_.load() > 0
                       ? static_cast<double>(first_dispatch_ns_.load() - took_over_ns_.load()) / 1e6
                       : -1.0}};
  {
    std::lock_guard<std::mutex> lock(warm_mu_);
    if (!took_over_with_.is_null()) r["primary"]["took_over_with"] = took_over_with_;
  }
  if (standby())
    r["standby"] = {{"schedulers", schedulers_},
                    {"self", self_},
                    {"deposed", deposed_.load()},
                    {"takeovers", n.takeovers},
                    {"clients_sent_on", n.refused_spare},
                    {"resubmitted", n.resubmitted},
                    {"resubmitted_already_running", n.resubmitted_running}};
  {
    const DelayLearner::Learned l = delays_->learned();
    r["delays_us"] = {{"ctrl", l.delays.ctrl.to_us()}, {"data", l.delays.data.to_us()},
                      {"resp", l.delays.resp.to_us()}, {"safety_margin", l.delays.safety_margin.to_us()},
                      {"batch_samples", l.samples},    {"percentile", set_.delay_percentile},
                      {"learned", set_.learn_delays}};
  }
  const double cpu = cpu_seconds() - cpu_at_start_;
  const double wall = (SteadyClock{}.now() - started_).to_seconds();
  const std::uint64_t sub = n.submitted;
  r["subclusters"] = subs_->to_json(started_);
  r["cpu_seconds"] = cpu;
  r["wall_seconds"] = wall;
  r["cpu_us_per_request"] = sub ? cpu * 1e6 / static_cast<double>(sub) : 0.0;
  return r;
}

std::optional<SchedulerNode::Impl::ModelCalibration> SchedulerNode::Impl::calibration_of(ModelId m) const {
  std::optional<ModelCalibration> best;
  for (std::uint32_t j = 0; j < runtimes_.size(); ++j) {
    Result<CalibrationSnapshot> c = runtimes_[j]->calibration(m);
    if (c.ok() && (!best || c->samples > best->snapshot.samples)) best = ModelCalibration{j, std::move(*c)};
  }
  return best;
}

SchedulerMetricsSnapshot SchedulerNode::Impl::metrics_snapshot() const {
  const SchedulerCounters::Values n = counts_since_base();
  const std::vector<ModelConfig> ms = models_now();
  SchedulerMetricsSnapshot s;
  s.at = SteadyClock{}.now();
  s.elapsed = s.at - started_;
  s.submitted = n.submitted;
  s.accepted = n.accepted;
  s.refused_unknown_model = n.unknown_model;
  s.refused_bad_input = n.bad_input;
  s.refused_no_slot = n.no_slot;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    SchedulerMetricsSnapshot::Model m;
    m.name = ms[i].name;
    m.accepted = n.models[i].accepted;
    m.outcomes = n.models[i].outcomes;
    m.drops = n.models[i].drops;
    for (const SchedulerCounters::Values::Model::Level& l : n.models[i].by_level)
      m.by_priority.push_back({l.accepted, l.outcomes});
    m.refusal_latency = n_->refusal_latency(static_cast<ModelId>(i));
    m.max_batch = ms[i].max_batch ? ms[i].max_batch : ms[i].profile.max_batch();
    if (std::optional<ModelCalibration> mc = calibration_of(static_cast<ModelId>(i)))
      m.calibration = std::move(mc->snapshot);
    s.models.push_back(std::move(m));
  }
  {
    std::lock_guard<std::mutex> lock(gpus_mu_);
    s.gpus = gpu_table_;
    s.frontend_delays = frontend_table_;
  }
  for (auto& g : s.gpus)
    if (g.id < n.gpus.size()) {
      g.busy = n.gpus[g.id].busy;
      g.batches = n.gpus[g.id].batches;
    }
  {
    const DelayLearner::Learned l = delays_->learned();
    s.delays = l.delays;
    s.delay_samples = l.samples;
  }
  s.delay_percentile = set_.delay_percentile;
  s.delays_learned = set_.learn_delays;
  s.frontends = frontends_alive_.load(std::memory_order_relaxed);
  s.stopping = stopping_.load();
  const PartitionSnapshot part = partition_snapshot();
  s.subclusters = part.subclusters;
  s.partition_epoch = part.epoch;
  s.partition_moves = part.moves;
  s.loads_pending = part.loads_pending;
  s.drains_pending = part.drains_pending;
  s.subs_window_s = part.window_s;
  s.max_bad_rate = part.max_bad_rate;
  if (subs_->managed())
    for (const SubClusterSnapshot& sc : part.subs)
      s.subs.push_back({sc.id, sc.gpus, static_cast<std::uint32_t>(sc.models.size()),
                        static_cast<std::uint32_t>(sc.draining.size()), sc.signal});
  return s;
}

}  // namespace symphony::cluster
