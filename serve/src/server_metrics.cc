// The in-process server's Prometheus families (server_metrics.hpp).
#include "symphony/serve/server_metrics.hpp"

#include <algorithm>
#include <map>

#include "symphony/metrics/exposition.hpp"
#include "symphony/metrics/outcome_report.hpp"
#include "symphony/metrics/profile_metrics.hpp"

namespace symphony::serve {

using metrics::Labels;
using server::DeviceModelEstimate;
using server::DeviceStats;
using server::ModelStats;
using server::ServerStats;

namespace {

const ModelStats* find_model(const std::vector<ModelStats>& models, const std::string& name) {
  for (const ModelStats& m : models)
    if (m.name == name) return &m;
  return nullptr;
}

// Cumulative buckets at powers of two up to the model's max batch.
void write_batch_histogram(metrics::Writer& w, const ModelStats& ms) {
  std::vector<std::pair<double, std::uint64_t>> buckets;
  std::uint64_t count = 0;
  double sum = 0;
  for (const auto& [size, n] : ms.batches) {
    count += n;
    sum += static_cast<double>(size) * static_cast<double>(n);
  }
  std::uint64_t below = 0;
  auto it = ms.batches.begin();
  for (std::uint32_t le = 1; le < std::max<std::uint32_t>(ms.max_batch, 1) * 2; le *= 2) {
    for (; it != ms.batches.end() && it->first <= le; ++it) below += it->second;
    buckets.emplace_back(static_cast<double>(le), below);
    if (le >= ms.max_batch) break;
  }
  w.histogram("symphony_batch_size", "Sizes of the batches run since start.",
              metrics::model_labels(ms.model, ms.version), buckets, sum, count);
}

}  // namespace

ServerMetrics::ServerMetrics(const server::Server& server, Duration autoscale_window, double max_bad_rate)
    : server_(server), max_bad_rate_(max_bad_rate), window_(autoscale_window) {}

void ServerMetrics::collect(metrics::Writer& w) {
  const ServerStats now = server_.stats();
  const double elapsed = now.elapsed.to_seconds();
  for (const ModelStats& ms : now.models) {
    // Series name the model as clients do, and its version (one entry per
    // version: an unloaded version keeps its final counts).
    const Labels m = metrics::model_labels(ms.model, ms.version);
    w.counter("symphony_requests_sent_total", "Requests the server accepted since start.", m,
              static_cast<double>(ms.counts.sent));
    metrics::write_outcome_metrics(w, "symphony_requests", "Server", ms.model, ms.counts, ms.version);
    for (std::size_t l = 0; l < ms.by_priority.size(); ++l) {  // models with priority levels
      const Labels level{{"priority", std::to_string(l + 1)}};
      Labels sent = m;
      sent.insert(sent.end(), level.begin(), level.end());
      w.counter("symphony_priority_requests_sent_total",
                "Requests the server accepted since start, by priority.", sent,
                static_cast<double>(ms.by_priority[l].sent));
      metrics::write_outcome_metrics(w, "symphony_priority_requests", "Server", ms.model, ms.by_priority[l],
                                     ms.version, level);
    }
    w.counter("symphony_requests_late_by_deadline_total",
              "Late requests still answered by the client's own deadline (a budget longer than the SLO).", m,
              static_cast<double>(ms.counts.late_by_deadline));
    w.gauge("symphony_goodput_rps", "Requests ok per second since start.", m,
            elapsed > 0 ? static_cast<double>(ms.counts.ok) / elapsed : 0.0);
    w.histogram_from("symphony_request_latency_seconds",
                     "Latency of ok and late requests since start, from submission to the outcome.", m,
                     ms.latency, metrics::kLatencyBucketsSeconds);
    w.histogram_from("symphony_refusal_latency_seconds",
                     "Time to refuse the requests refused on arrival (overload, queue_full, infeasible) "
                     "since start, from submission to the outcome.",
                     m, ms.refusal_latency, metrics::kDelayBucketsSeconds);
    w.counter("symphony_refusals_at_submit_total",
              "Of the requests refused on arrival, those refused on the thread that submitted them, "
              "before they reached the scheduler.",
              m, static_cast<double>(ms.refused_at_submit));
    const std::uint64_t ended = ms.counts.ended();
    w.gauge("symphony_queue_depth", "Requests inside the server (queued or running) now.", m,
            static_cast<double>(ms.counts.sent > ended ? ms.counts.sent - ended : 0));
    write_batch_histogram(w, ms);
    if (ms.staging.batches > 0) {  // libtorch models (batch_staging.hpp)
      w.counter("symphony_staged_samples_total",
                "Samples gathered into batches' inputs since start (per input).", m,
                static_cast<double>(ms.staging.samples));
      w.counter(
          "symphony_staged_bytes_copied_total",
          "Bytes copied to gather batches' inputs since start (samples already adjacent are not copied).", m,
          static_cast<double>(ms.staging.bytes_copied));
      w.counter("symphony_staging_seconds_total", "Time spent gathering batches' inputs since start.", m,
                static_cast<double>(ms.staging.staging_ns) / 1e9);
      w.counter("symphony_cuda_graph_batches_total",
                "Batches run by replaying a CUDA graph of the model's forward since start.", m,
                static_cast<double>(ms.graph_batches));
    }
    if (!ms.loaded) continue;  // no profile planned with any more
    metrics::write_profile_metrics(w, ms.model,
                                   CalibrationSnapshot{ms.recalibrating,
                                                       ms.offline_profile,
                                                       ms.profile_in_use,
                                                       ms.recalibration_samples,
                                                       ms.recalibration_updates,
                                                       {}},
                                   ms.max_batch, ms.version);
  }
  Duration busy_total;
  for (const DeviceStats& ds : now.devices) {
    const Labels l{{"device", ds.name}};
    busy_total += ds.busy;
    w.counter("symphony_device_busy_seconds_total", "Seconds the device spent running batches since start.",
              l, ds.busy.to_seconds());
    w.counter("symphony_device_batches_total", "Batches the device ran since start.", l,
              static_cast<double>(ds.batches));
    w.gauge("symphony_device_busy_fraction", "Busy share of the device's time since start.", l,
            elapsed > 0 ? std::min(1.0, ds.busy.to_seconds() / elapsed) : 0.0);
    for (const DeviceModelEstimate& e : ds.models) {
      // Reported up to the model's max batch, within the estimate. One per
      // (model, version): a version reloading has its old server model's
      // estimate too, under a name no entry keeps.
      const ModelStats* ms = find_model(now.models, e.model);
      if (!ms) continue;  // removed between the two reads, or the same version reloading
      metrics::write_device_profile_metrics(w, ds.name, ms->model, e.samples, e.offline, e.estimate,
                                            std::min(e.estimate.max_batch(), ms->max_batch), ms->version);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  const AutoscaleSignal sig = window_.observe(
      {SteadyClock{}.now(), now.ok + now.late + now.dropped + now.errors, now.late + now.dropped + now.errors,
       busy_total, static_cast<std::uint32_t>(now.devices.size())});
  const AutoscaleAdvice adv = autoscale_advice(sig, max_bad_rate_);
  w.gauge("symphony_autoscale_advice_gpus",
          "GPUs to add (> 0) or release (< 0) by the paper's rule over the recent window.", {}, adv.advice);
  w.gauge("symphony_autoscale_bad_rate", "Bad rate (late, dropped, error over ended) in the recent window.",
          {}, sig.bad_rate());
  w.gauge("symphony_autoscale_busy_fraction", "Mean busy fraction of the devices in the recent window.", {},
          sig.busy_fraction);
  w.gauge("symphony_autoscale_gpus", "Devices in service.", {}, sig.gpus);
  w.gauge("symphony_autoscale_window_seconds", "Span the autoscaling signal covers.", {},
          window_.last_span().to_seconds());
  metrics::write_delays(w, now.delays,
                        "Delays the server plans with: d_ctrl and d_data (per request) learned from the "
                        "batches' staging and launch when they overlap, d_resp from the replies' way out "
                        "of the front, each floored by the config, and the safety margin.");
}

}  // namespace symphony::serve
