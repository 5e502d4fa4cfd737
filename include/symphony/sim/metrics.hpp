// The simulator's metrics sink: what happened to every request, batch and GPU, summarized per model and
// in total (docs/simulator.md#what-is-measured). Requests count when they *arrive* inside the
// measurement window [begin, end), GPU busy time when it falls inside it. It reports outcomes (ok /
// late / error / dropped by reason), bad rate, goodput, latency and queueing-delay percentiles, batch
// sizes, per-GPU busy fraction and GPUs used, and autoscaling advice over sliding windows of
// `autoscale_window` every `autoscale_step` (autoscale_advice() of symphony/autoscale.hpp).
//
// Guarantees: all storage is allocated by the constructor (O(models * (histogram + max_batch) + GPUs +
// steps * GPUs / 64)); the sink callbacks never allocate and cost O(1) (on_execute O(steps a batch
// spans)); summary() costs O(steps * (window / step) * GPUs / 64) for the autoscaling series.
//
//   Metrics m(MetricsConfig{...});
//   auto sim = Simulator<Metrics>::create(cfg, m);  ...  sim->run(src);
//   RunSummary s = m.summary();
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "symphony/autoscale.hpp"
#include "symphony/latency_histogram.hpp"
#include "symphony/outcome_tally.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony::sim {

struct MetricsConfig {
  std::vector<std::uint32_t> max_batch;  // per model (index = ModelId)
  std::uint32_t num_gpus = 1;
  TimePoint begin = TimePoint::epoch();  // measurement window over arrivals and GPU time
  TimePoint end = TimePoint::epoch();
  Duration autoscale_window;   // zero: no autoscaling series
  Duration autoscale_step;     // zero: the window (consecutive windows); else it must divide the window
  double max_bad_rate = 0.01;  // the autoscaler's "bad rate above threshold"
};

// Latency or queueing-delay percentiles.
struct Percentiles {
  std::uint64_t count = 0;
  Duration mean, p50, p90, p99, p999, max;
};

struct ModelStats {
  // `sent` counts the requests that arrived in the window; each has ended,
  // so counts.bad_rate() is (late + errors + dropped) / arrived.
  OutcomeCounts counts;
  double offered_rps = 0;  // arrived / window
  double goodput_rps = 0;  // ok / window
  Percentiles latency, queueing;
  std::vector<std::uint64_t> batches_by_size;   // [b]: batches of size b dispatched in the window
  std::vector<std::uint64_t> requests_by_size;  // [b]: window requests that ran in a batch of size b
  double median_batch = 0;                      // request-weighted: the batch size the median request ran in
  double mean_batch = 0;  // per batch: mean size of the batches dispatched in the window
};

struct AutoscaleSample {
  TimePoint begin;  // the window is [begin, end)
  TimePoint end;
  std::uint64_t arrived = 0, bad = 0;
  double bad_rate = 0;
  double busy_fraction = 0;  // mean over all GPUs
  std::uint32_t gpus_used = 0;
  double add_gpus = 0;      // N*r/(1-r) (infinite when r = 1)
  double release_gpus = 0;  // N*f
  int advice = 0;           // +k: add k GPUs, -k: release k, 0: keep
};

struct RunSummary {
  Duration window;                        // end - begin
  std::vector<ModelStats> models;         // index = ModelId
  ModelStats total;                       // sums; percentiles over all requests
  double worst_bad_rate = 0;              // max over models that saw requests
  std::vector<double> gpu_busy_fraction;  // per GPU
  double busy_fraction = 0;               // mean over GPUs
  std::uint32_t gpus_used = 0;
  std::vector<AutoscaleSample> autoscale;
};

class Metrics {
 public:
  explicit Metrics(MetricsConfig cfg) : cfg_(std::move(cfg)) {
    const std::size_t m = cfg_.max_batch.size();
    models_.resize(m);
    for (std::size_t i = 0; i < m; ++i) {
      models_[i].batches_by_size.assign(cfg_.max_batch[i] + 1, 0);
      models_[i].requests_by_size.assign(cfg_.max_batch[i] + 1, 0);
    }
    busy_ns_.assign(cfg_.num_gpus, 0);
    if (cfg_.autoscale_window > Duration::zero() && cfg_.end > TimePoint::epoch()) {
      if (cfg_.autoscale_step <= Duration::zero() || cfg_.autoscale_step > cfg_.autoscale_window)
        cfg_.autoscale_step = cfg_.autoscale_window;
      const std::int64_t w = cfg_.autoscale_step.ns();
      const std::size_t n = static_cast<std::size_t>((cfg_.end.ns() + w - 1) / w);
      buckets_.resize(n);
      gpu_words_ = (cfg_.num_gpus + 63) / 64;
      bucket_gpus_.assign(n * gpu_words_, 0);
    }
  }

  const MetricsConfig& config() const noexcept { return cfg_; }

  // ---- SchedulerSink ----
  void on_dispatch(const Dispatch& d) noexcept {
    if (d.dispatched_at >= cfg_.begin && d.dispatched_at < cfg_.end && d.model < models_.size() &&
        d.size < models_[d.model].batches_by_size.size())
      ++models_[d.model].batches_by_size[d.size];
  }

  void on_outcome(const RequestOutcome& o) noexcept {
    if (!buckets_.empty()) {
      const std::size_t k = bucket_of(o.arrival);
      if (k < buckets_.size()) {
        ++buckets_[k].arrived;
        if (o.outcome != Outcome::kOk) ++buckets_[k].bad;
      }
    }
    if (o.arrival < cfg_.begin || o.arrival >= cfg_.end || o.model >= models_.size()) return;
    Acc& m = models_[o.model];
    ++m.counts.sent;
    m.counts.add(o.outcome, o.reason);
    if (o.outcome == Outcome::kDropped) return;
    m.latency.record(o.finish - o.arrival);
    m.queueing.record(o.exec - o.arrival);
    if (o.batch_size < m.requests_by_size.size()) ++m.requests_by_size[o.batch_size];
  }

  // ---- Simulator execution hook: a batch really ran on `d.gpu` in [start, end) ----
  void on_execute(const Dispatch& d, TimePoint start, TimePoint end) noexcept {
    if (d.gpu >= busy_ns_.size()) return;
    const TimePoint a = max(start, cfg_.begin), b = min(end, cfg_.end);
    if (b > a) busy_ns_[d.gpu] += (b - a).ns();
    if (buckets_.empty()) return;
    const std::int64_t w = cfg_.autoscale_step.ns();
    for (std::size_t k = bucket_of(start); k < buckets_.size(); ++k) {
      const TimePoint ws = TimePoint::from_ns(static_cast<std::int64_t>(k) * w);
      const TimePoint we = ws + cfg_.autoscale_step;
      const TimePoint x = max(start, ws), y = min(end, we);
      if (y > x) {
        buckets_[k].busy_ns += (y - x).ns();
        bucket_gpus_[k * gpu_words_ + d.gpu / 64] |= std::uint64_t{1} << (d.gpu % 64);
      }
      if (end <= we) break;
    }
  }

  // Summarizes everything recorded so far. Allocates (off the hot path).
  RunSummary summary() const {
    RunSummary s;
    s.window = cfg_.end - cfg_.begin;
    const double secs = std::max(s.window.to_seconds(), 1e-12);
    LatencyHistogram all_latency, all_queueing;
    std::uint32_t total_max_batch = 0;
    for (const Acc& a : models_)
      total_max_batch =
          std::max<std::uint32_t>(total_max_batch, static_cast<std::uint32_t>(a.batches_by_size.size()));
    s.total.batches_by_size.assign(std::max<std::uint32_t>(total_max_batch, 1), 0);
    s.total.requests_by_size.assign(std::max<std::uint32_t>(total_max_batch, 1), 0);
    for (const Acc& a : models_) {
      ModelStats m = stats_of(a, secs);
      s.worst_bad_rate = std::max(s.worst_bad_rate, m.counts.bad_rate());
      s.total.counts += m.counts;
      for (std::size_t b = 0; b < a.batches_by_size.size(); ++b) {
        s.total.batches_by_size[b] += a.batches_by_size[b];
        s.total.requests_by_size[b] += a.requests_by_size[b];
      }
      all_latency.merge(a.latency);
      all_queueing.merge(a.queueing);
      s.models.push_back(std::move(m));
    }
    finish_rates(s.total, secs);
    s.total.latency = percentiles(all_latency);
    s.total.queueing = percentiles(all_queueing);
    batch_stats(s.total);

    double busy_sum = 0;
    for (std::int64_t ns : busy_ns_) {
      const double f =
          static_cast<double>(ns) / static_cast<double>(std::max<std::int64_t>(s.window.ns(), 1));
      s.gpu_busy_fraction.push_back(f);
      busy_sum += f;
      if (ns > 0) ++s.gpus_used;
    }
    s.busy_fraction = busy_ns_.empty() ? 0 : busy_sum / static_cast<double>(busy_ns_.size());

    const double n = cfg_.num_gpus;
    const std::size_t per_window = static_cast<std::size_t>(std::max<std::int64_t>(
        1, cfg_.autoscale_window.ns() / std::max<std::int64_t>(cfg_.autoscale_step.ns(), 1)));
    std::vector<std::uint64_t> used(gpu_words_);
    for (std::size_t k = 0; k < buckets_.size(); ++k) {
      const std::size_t first = k + 1 >= per_window ? k + 1 - per_window : 0;
      AutoscaleSample a;
      a.begin = TimePoint::from_ns(static_cast<std::int64_t>(first) * cfg_.autoscale_step.ns());
      a.end = TimePoint::from_ns(static_cast<std::int64_t>(k + 1) * cfg_.autoscale_step.ns());
      std::int64_t busy_ns = 0;
      std::fill(used.begin(), used.end(), 0);
      for (std::size_t j = first; j <= k; ++j) {
        a.arrived += buckets_[j].arrived;
        a.bad += buckets_[j].bad;
        busy_ns += buckets_[j].busy_ns;
        for (std::size_t q = 0; q < gpu_words_; ++q) used[q] |= bucket_gpus_[j * gpu_words_ + q];
      }
      for (std::uint64_t word : used) a.gpus_used += static_cast<std::uint32_t>(std::popcount(word));
      a.bad_rate = a.arrived ? static_cast<double>(a.bad) / static_cast<double>(a.arrived) : 0.0;
      a.busy_fraction = static_cast<double>(busy_ns) / (n * static_cast<double>((a.end - a.begin).ns()));
      const AutoscaleAdvice adv = autoscale_advice(n, a.bad_rate, a.busy_fraction, cfg_.max_bad_rate);
      a.add_gpus = adv.add_gpus;
      a.release_gpus = adv.release_gpus;
      a.advice = adv.advice;
      s.autoscale.push_back(a);
    }
    return s;
  }

 private:
  struct Acc {
    OutcomeCounts counts;
    LatencyHistogram latency, queueing;
    std::vector<std::uint64_t> batches_by_size, requests_by_size;
  };
  // One autoscaling step.
  struct Bucket {
    std::uint64_t arrived = 0, bad = 0;
    std::int64_t busy_ns = 0;
  };

  std::size_t bucket_of(TimePoint t) const noexcept {
    if (t < TimePoint::epoch()) return 0;
    return static_cast<std::size_t>(t.ns() / cfg_.autoscale_step.ns());
  }

  static Percentiles percentiles(const LatencyHistogram& h) {
    Percentiles p;
    p.count = h.count();
    p.mean = h.mean();
    p.p50 = h.percentile(0.50);
    p.p90 = h.percentile(0.90);
    p.p99 = h.percentile(0.99);
    p.p999 = h.percentile(0.999);
    p.max = h.max();
    return p;
  }

  static void finish_rates(ModelStats& m, double secs) {
    m.offered_rps = static_cast<double>(m.counts.sent) / secs;
    m.goodput_rps = static_cast<double>(m.counts.ok) / secs;
  }

  static void batch_stats(ModelStats& m) {
    std::uint64_t reqs = 0, batches = 0, batch_reqs = 0;
    for (std::size_t b = 0; b < m.requests_by_size.size(); ++b) reqs += m.requests_by_size[b];
    for (std::size_t b = 0; b < m.batches_by_size.size(); ++b) {
      batches += m.batches_by_size[b];
      batch_reqs += m.batches_by_size[b] * b;
    }
    m.mean_batch = batches ? static_cast<double>(batch_reqs) / static_cast<double>(batches) : 0.0;
    m.median_batch = 0;
    if (reqs) {
      const std::uint64_t half = (reqs + 1) / 2;
      std::uint64_t seen = 0;
      for (std::size_t b = 0; b < m.requests_by_size.size(); ++b) {
        seen += m.requests_by_size[b];
        if (seen >= half) {
          m.median_batch = static_cast<double>(b);
          break;
        }
      }
    }
  }

  static ModelStats stats_of(const Acc& a, double secs) {
    ModelStats m;
    m.counts = a.counts;
    finish_rates(m, secs);
    m.latency = percentiles(a.latency);
    m.queueing = percentiles(a.queueing);
    m.batches_by_size = a.batches_by_size;
    m.requests_by_size = a.requests_by_size;
    batch_stats(m);
    return m;
  }

  MetricsConfig cfg_;
  std::vector<Acc> models_;
  std::vector<std::int64_t> busy_ns_;
  std::vector<Bucket> buckets_;
  std::vector<std::uint64_t> bucket_gpus_;  // per bucket, a bit per GPU that was busy in it
  std::size_t gpu_words_ = 0;
};

}  // namespace symphony::sim
