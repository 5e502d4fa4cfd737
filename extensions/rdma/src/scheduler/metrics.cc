// The scheduler's /metrics families (node_metrics.hpp, docs/metrics.md),
// rendered from a SchedulerMetricsSnapshot.
#include <algorithm>
#include <string>

#include "symphony/autoscale.hpp"
#include "symphony/cluster/node_metrics.hpp"
#include "symphony/metrics/profile_metrics.hpp"

namespace symphony::cluster {

using metrics::Labels;

void write_scheduler_metrics(const SchedulerMetricsSnapshot& s, metrics::AutoscaleTracker& window,
                             metrics::Writer& w) {
  const double elapsed = s.elapsed.to_seconds();
  w.gauge("symphony_up", "1 while the process serves metrics.", {{"role", "scheduler"}}, 1);
  w.counter("symphony_scheduler_requests_submitted_total", "Requests frontends submitted.", {},
            static_cast<double>(s.submitted));
  const std::pair<const char*, std::uint64_t> refused[] = {{"unknown_model", s.refused_unknown_model},
                                                           {"bad_input", s.refused_bad_input},
                                                           {"no_slot", s.refused_no_slot}};
  for (const auto& [why, n] : refused)
    w.counter("symphony_scheduler_requests_refused_total",
              "Requests refused at submission (an error or a queue-full drop sent back at once), by reason.",
              {{"reason", why}}, static_cast<double>(n));
  std::uint64_t ended = 0, bad = 0;
  for (const SchedulerMetricsSnapshot::Model& m : s.models) {
    const Labels l{{"model", m.name}};
    w.counter("symphony_requests_accepted_total", "Requests taken into the scheduler's queues.", l,
              static_cast<double>(m.accepted));
    static constexpr const char* kOutcome[4] = {"ok", "late", "dropped", "error"};
    std::uint64_t m_ended = 0;
    for (std::size_t o = 0; o < 4; ++o) {
      w.counter("symphony_requests_total",
                "Accepted requests by outcome as the scheduler decided it (ok and late by the batch's "
                "reported end; "
                "the frontends have the final word on ok and late).",
                {{"model", m.name}, {"outcome", kOutcome[o]}}, static_cast<double>(m.outcomes[o]));
      m_ended += m.outcomes[o];
    }
    for (std::size_t p = 0; p < m.by_priority.size(); ++p) {  // models with priority levels
      const std::string level = std::to_string(p + 1);
      w.counter("symphony_priority_requests_accepted_total",
                "Requests taken into the scheduler's queues, by priority.",
                {{"model", m.name}, {"priority", level}}, static_cast<double>(m.by_priority[p].accepted));
      for (std::size_t o = 0; o < 4; ++o)
        w.counter("symphony_priority_requests_total",
                  "Accepted requests by priority and outcome as the scheduler decided it.",
                  {{"model", m.name}, {"priority", level}, {"outcome", kOutcome[o]}},
                  static_cast<double>(m.by_priority[p].outcomes[o]));
    }
    for (int r = 1; r < kNumDropReasons; ++r)
      w.counter("symphony_requests_dropped_total", "Dropped requests by reason.",
                {{"model", m.name}, {"reason", std::string(to_string(static_cast<DropReason>(r)))}},
                static_cast<double>(m.drops[static_cast<std::size_t>(r)]));
    w.histogram_from("symphony_refusal_latency_seconds",
                     "Time to refuse the requests refused on arrival (overload, queue_full, infeasible) "
                     "since start, from their Submit's arrival at the scheduler to the refusal's send.",
                     l, m.refusal_latency, metrics::kDelayBucketsSeconds);
    w.gauge("symphony_goodput_rps", "Requests ok per second since the scheduler started.", l,
            elapsed > 0 ? static_cast<double>(m.outcomes[0]) / elapsed : 0.0);
    w.gauge("symphony_queue_depth", "Accepted requests without an outcome yet (queued or in a batch).", l,
            static_cast<double>(m.accepted > m_ended ? m.accepted - m_ended : 0));
    if (m.calibration) metrics::write_profile_metrics(w, m.name, *m.calibration, m.max_batch);
    ended += m_ended;
    bad += m_ended - m.outcomes[0];
  }
  Duration busy;
  std::uint32_t alive = 0;
  for (const SchedulerMetricsSnapshot::Gpu& g : s.gpus) {
    const Labels l{{"gpu", std::to_string(g.id)}, {"backend", g.backend}, {"device", g.device}};
    w.gauge("symphony_gpu_up", "1 while the GPU is in service, 0 once its backend was lost.", l,
            g.alive ? 1 : 0);
    w.counter("symphony_gpu_busy_seconds_total", "Execution time the GPU's backend reported for its batches.",
              l, g.busy.to_seconds());
    w.counter("symphony_gpu_batches_total", "Batches the GPU reported done.", l,
              static_cast<double>(g.batches));
    w.gauge("symphony_gpu_busy_fraction", "Busy share of the GPU since the scheduler started.", l,
            elapsed > 0 ? std::min(1.0, g.busy.to_seconds() / elapsed) : 0.0);
    if (g.alive) {
      busy += g.busy;
      ++alive;
    }
  }
  w.gauge("symphony_frontends", "Frontends connected now.", {}, s.frontends);
  for (const SchedulerMetricsSnapshot::Frontend& f : s.frontend_delays) {
    const std::string who = f.name.empty() ? f.address : f.name;
    const std::pair<const char*, Duration> times[] = {
        {"one_way", f.one_way}, {"reply_path_told", f.reply_path_told}, {"reply_path", f.reply_path}};
    for (const auto& [kind, d] : times)
      w.gauge(
          "symphony_frontend_delay_seconds",
          "A frontend's times taken off its requests' targets: one_way (half a high percentile of its ping "
          "round trips), its replies' way out as it told it (reply_path_told, p99) and as planned with "
          "(reply_path); one_way + reply_path at most a quarter of the tightest SLO.",
          {{"frontend", who}, {"address", f.address}, {"kind", kind}}, d.to_seconds());
    w.gauge("symphony_frontend_delay_capped",
            "1 while a frontend's one-way delay and replies' way out exceed their cap together.",
            {{"frontend", who}, {"address", f.address}}, f.capped ? 1 : 0);
  }

  // Autoscaling advice. Without sub-clusters: over the recent window, for the
  // one sub-cluster and the cluster (the same signal). With them: each
  // sub-cluster's last complete epoch window, and the cluster's from those.
  const AutoscaleSignal sig = window.observe({s.at, ended, bad, busy, alive});
  std::vector<std::pair<std::string, AutoscaleSignal>> scopes;
  if (s.subs.empty()) {
    scopes = {{"0", sig}, {"all", sig}};
  } else {
    std::vector<AutoscaleSignal> parts;
    for (const auto& sc : s.subs) {
      scopes.emplace_back(std::to_string(sc.id), sc.signal);
      parts.push_back(sc.signal);
    }
    scopes.emplace_back("all", combine_signals(parts));
  }
  for (const auto& [sub, x] : scopes) {
    const Labels l{{"subcluster", sub}};
    const AutoscaleAdvice adv = autoscale_advice(x, s.max_bad_rate);
    w.gauge(
        "symphony_autoscale_advice_gpus",
        "GPUs to add (> 0) or release (< 0) by the paper's rule over the recent window (subcluster=\"all\": "
        "the cluster).",
        l, adv.advice);
    w.gauge("symphony_autoscale_bad_rate", "Bad rate (late, dropped, error over ended) in the recent window.",
            l, x.bad_rate());
    w.gauge("symphony_autoscale_busy_fraction", "Mean busy fraction of the GPUs in the recent window.", l,
            x.busy_fraction);
    w.gauge("symphony_autoscale_gpus", "GPUs in service.", l, x.gpus);
  }
  w.gauge("symphony_autoscale_window_seconds", "Span the autoscaling signal covers.", {},
          s.subs.empty() ? window.last_span().to_seconds() : s.subs_window_s);

  // The learned delays (the delay estimator; d_ctrl, d_data, d_resp of docs/architecture.md#delays).
  metrics::write_delays(w, s.delays,
                        "Delays the scheduler plans with: d_ctrl, d_data (per request), d_resp (learned, "
                        "floored by the config) and the safety margin.");
  w.gauge("symphony_delay_samples", "Batch round trips the delay estimator has seen.", {},
          static_cast<double>(s.delay_samples));
  w.gauge("symphony_delay_learned", "1 when delays are learned online, 0 when the config's are used.", {},
          s.delays_learned ? 1 : 0);
  w.gauge("symphony_delay_percentile", "The percentile of recent samples the delays are set to.", {},
          s.delay_percentile);

  // Sub-cluster partitioning (docs/cluster.md): one sub-cluster without a
  // subclusters: section.
  w.gauge("symphony_subclusters", "Sub-clusters the models are partitioned into.", {}, s.subclusters);
  for (const auto& sc : s.subs) {
    const Labels l{{"subcluster", std::to_string(sc.id)}};
    w.gauge("symphony_subcluster_gpus", "GPUs in service in the sub-cluster.", l, sc.gpus);
    w.gauge("symphony_subcluster_models", "Models the sub-cluster owns (their new requests go there).", l,
            sc.models);
    w.gauge("symphony_subcluster_models_draining",
            "Models moved away from the sub-cluster whose requests there have not all ended.", l,
            sc.draining);
  }
  w.gauge("symphony_partition_loads_pending", "Moves whose new sub-cluster has not confirmed the load yet.",
          {}, static_cast<double>(s.loads_pending));
  w.gauge("symphony_partition_drains_pending", "Moves whose old sub-cluster still has requests of the model.",
          {}, static_cast<double>(s.drains_pending));
  w.gauge("symphony_partition_epoch", "The current partitioning epoch (0: never re-partitioned).", {},
          static_cast<double>(s.partition_epoch));
  w.counter("symphony_partition_moves_total", "Models moved between sub-clusters by re-partitioning.", {},
            static_cast<double>(s.partition_moves));
}

std::string scheduler_not_ready(const SchedulerMetricsSnapshot& s) {
  if (s.stopping) return "the scheduler is stopping";
  for (const SchedulerMetricsSnapshot::Gpu& g : s.gpus)
    if (g.alive) return "";
  return "no backend GPU registered";
}

}  // namespace symphony::cluster
