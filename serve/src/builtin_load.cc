// The built-in load of `symphony serve` and its report (builtin_load.hpp).
#include "symphony/serve/builtin_load.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "symphony/metrics/outcome_report.hpp"
#include "symphony/metrics/profile_metrics.hpp"
#include "symphony/serve/app.hpp"
#include "symphony/server/input_spec.hpp"
#include "symphony/load/open_loop.hpp"

namespace symphony::serve {

using json = nlohmann::json;
using server::DeviceModelEstimate;
using server::DeviceStats;
using server::ModelStats;
using server::ServerStats;

namespace {

void sleep_until(TimePoint t) {
  std::this_thread::sleep_until(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(t.ns())));
}

// The in-process server as a load target: each request goes to infer_async
// with one of a few random inputs per model, and its outcome into the model's
// tally. Generating tensors at the request rate would measure the generator.
class ServerTarget final : public load::LoadTarget {
 public:
  ServerTarget(server::Server& server, const config::ServeConfig& cfg,
               std::vector<std::unique_ptr<LoadTally>>& t, std::shared_ptr<front::HostMemoryPool> input_pool)
      : server_(server), cfg_(cfg), tallies_(t), input_pool_(std::move(input_pool)) {
    for (const config::ServeModelConfig& mc : cfg.models) {
      std::vector<std::vector<at::Tensor>> pool;
      for (int k = 0; k < 8; ++k) {
        std::vector<at::Tensor> in;
        // A -1 input's samples are at its profile dims (the size most
        // requests have), else of size 1.
        for (std::size_t i = 0; i < mc.inputs.size(); ++i) {
          auto s =
              server::parse_input_spec(i < mc.profile_inputs.size() ? mc.profile_inputs[i] : mc.inputs[i]);
          in.push_back(torch::randn(wildcards_as_one(s->shape)).to(s->dtype));
        }
        pool.push_back(std::move(in));
      }
      pools_.push_back(std::move(pool));
    }
  }

  Status send(const load::LoadRequest& r, load::Done done) override {
    LoadTally& t = *tallies_[r.model];
    if (r.counted) t.tally.sent();  // a refusal counts as sent and ends in `refused`
    const auto& pool = pools_[r.model];
    const std::vector<at::Tensor>& sample = pool[r.model_seq % pool.size()];
    std::vector<at::Tensor> landed;
    if (input_pool_) {  // as a transport lands a request's bytes: once, into a block
      landed = sample;
      SYMPHONY_RETURN_IF_ERROR(land_in_pool(*input_pool_, landed));
    }
    return server_.infer_async(cfg_.models[r.model].name, input_pool_ ? landed : sample, std::nullopt,
                               [&t, counted = r.counted, done](server::InferResult&& res) {
                                 if (counted) t.tally.record(res.outcome, res.reason, res.latency);
                                 done();
                               });
  }

  void refused(const load::LoadRequest& r, const Status& why) override {
    if (!r.counted) return;
    LoadTally& t = *tallies_[r.model];
    t.refused.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(t.mu);
    t.last_refusal = why.message();
  }

 private:
  server::Server& server_;
  const config::ServeConfig& cfg_;
  std::vector<std::unique_ptr<LoadTally>>& tallies_;
  std::vector<std::vector<std::vector<at::Tensor>>> pools_;  // [model][sample][input]
  std::shared_ptr<front::HostMemoryPool> input_pool_;        // null: the samples as they are
};

std::string batch_histogram(const std::map<std::uint32_t, std::uint64_t>& h) {
  std::string s;
  for (const auto& [b, n] : h) s += (s.empty() ? "" : " ") + std::to_string(b) + ":" + std::to_string(n);
  return s.empty() ? "-" : s;
}

std::map<std::uint32_t, std::uint64_t> diff(const std::map<std::uint32_t, std::uint64_t>& a,
                                            const std::map<std::uint32_t, std::uint64_t>& b) {
  std::map<std::uint32_t, std::uint64_t> out;
  for (const auto& [k, v] : a) {
    const auto it = b.find(k);
    const std::uint64_t before = it == b.end() ? 0 : it->second;
    if (v > before) out[k] = v - before;
  }
  return out;
}

double mean_batch(const std::map<std::uint32_t, std::uint64_t>& h) {
  std::uint64_t n = 0, r = 0;
  for (const auto& [b, c] : h) {
    n += c;
    r += std::uint64_t{b} * c;
  }
  return n ? static_cast<double>(r) / static_cast<double>(n) : 0;
}

json histogram_json(const std::map<std::uint32_t, std::uint64_t>& h) {
  json j = json::object();
  for (const auto& [b, n] : h) j[std::to_string(b)] = n;
  return j;
}

// l(b) in ms at powers of two and at the largest batch: {"1": .., "2": .., ..}.
json profile_points(const LatencyProfile& p, std::uint32_t max_batch) {
  json j = json::object();
  for (std::uint32_t b : metrics::profile_batch_sizes(std::min(max_batch, p.max_batch())))
    j[std::to_string(b)] = p.latency(b).to_ms();
  return j;
}

json scale_points(const LatencyProfile& in_use, const LatencyProfile& offline, std::uint32_t max_batch) {
  json j = json::object();
  const std::uint32_t top = std::min({max_batch, in_use.max_batch(), offline.max_batch()});
  for (std::uint32_t b : metrics::profile_batch_sizes(top))
    j[std::to_string(b)] = metrics::profile_scale(in_use, offline, b);
  return j;
}

std::uint32_t estimate_top(const DeviceModelEstimate& e, const std::vector<ModelStats>& models) {
  std::uint32_t top = e.estimate.max_batch();
  for (const ModelStats& m : models)
    if (m.name == e.model) top = std::min(top, m.max_batch);
  return top;
}

const ModelStats* find_model(const ServerStats& s, const std::string& name) {
  for (const ModelStats& m : s.models)
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace

LoadRun run_builtin_load(server::Server& srv, const config::ServeConfig& cfg,
                         const std::function<void(const std::string&)>& progress,
                         std::shared_ptr<front::HostMemoryPool> pool) {
  LoadRun run;
  for (const auto& m : cfg.models) {
    run.tallies.push_back(std::make_unique<LoadTally>());
    run.tallies.back()->name = m.name;
    run.tallies.back()->rate = m.rate;
  }
  // Every model's arrivals, in one stream from the core's arrival engine.
  WorkloadSpec spec;
  spec.seed = cfg.seed;
  spec.duration = Duration::from_seconds(cfg.duration_s);
  for (const auto& m : cfg.models) spec.models.push_back(ModelLoad{m.rate, cfg.arrival_process, {}, {}});
  const TimePoint start = SteadyClock{}.now() + Duration::milliseconds(50);
  const load::LoadWindow window =
      load::LoadWindow::starting(start, Duration::from_seconds(cfg.warmup_s), spec.duration);
  const TimePoint measure_from = window.measure_from, end = window.end;
  ServerTarget target(srv, cfg, run.tallies, std::move(pool));
  load::OpenLoop loop(spec, window, target);
  std::thread driver([&] { loop.run(); });
  // Live progress, once a second, and the snapshot at the end of warm-up.
  bool have_warmup = false;
  std::uint64_t last_ok = 0, last_sent = 0;
  TimePoint last = start;
  for (TimePoint t = start + Duration::seconds(1);; t += Duration::seconds(1)) {
    const TimePoint wake = min(t, end);
    sleep_until(wake);
    if (!have_warmup && wake >= measure_from) {
      run.at_warmup = srv.stats();
      have_warmup = true;
    }
    const ServerStats now = srv.stats();
    const double dt = (wake - last).to_seconds();
    if (progress && dt > 0) {
      std::string per;
      Duration p99;
      for (const auto& m : now.models) {
        char buf[64];
        std::snprintf(buf, sizeof buf, " %s b=%.1f", m.label.c_str(), m.mean_batch);
        per += buf;
        p99 = max(p99, m.p99);
      }
      char line[160];
      std::snprintf(line, sizeof line, "[%5.1f/%.0f s] offered %6.1f r/s  good %6.1f r/s  p99 %6.1f ms |",
                    (wake - start).to_seconds(), cfg.duration_s,
                    static_cast<double>(now.sent - last_sent) / dt,
                    static_cast<double>(now.ok - last_ok) / dt, p99.to_ms());
      progress(line + per);
    }
    last_ok = now.ok;
    last_sent = now.sent;
    last = wake;
    if (wake >= end) break;
  }
  driver.join();
  srv.stop(StopMode::kDrain);  // every request ends (and its done() has run)
  run.at_end = srv.stats();
  run.window_s = cfg.duration_s - cfg.warmup_s;
  return run;
}

json server_counts_json(const ServerStats& stats) {
  json out;
  out["models"] = json::object();
  OutcomeCounts total;
  const double secs = stats.elapsed.to_seconds();
  for (const ModelStats& m : stats.models) {
    json jm = metrics::outcome_json(m.counts, secs);
    jm["batch_histogram"] = histogram_json(m.batches);
    jm["latency_count"] = m.latency.count();
    jm["refusal_latency_ms"] = metrics::percentiles_ms_json(m.refusal_latency);
    jm["refused_at_submit"] = m.refused_at_submit;
    jm["model"] = m.model;
    jm["version"] = m.version;
    if (!m.loaded) jm["loaded"] = false;                    // unloaded while serving: its final counts
    for (std::size_t l = 0; l < m.by_priority.size(); ++l)  // Triton's priority l + 1
      jm["by_priority"][std::to_string(l + 1)] = metrics::outcome_json(m.by_priority[l], secs);
    out["models"][m.label] = jm;
    total += m.counts;
  }
  out.update(metrics::outcome_json(total, secs));
  out.erase("dropped_by_reason");
  out["seconds"] = secs;
  // What batches were dispatched ahead by (ServerOptions::overlap).
  out["dispatch"] = {{"overlap", stats.overlap},
                     {"d_ctrl_us", stats.delays.ctrl.to_us()},
                     {"d_data_us", stats.delays.data.to_us()},
                     {"samples", stats.dispatch_samples}};
  return out;
}

namespace {

// How each model's batches were formed (batch_staging.hpp) and how long they
// ran against the offline profile they were planned with, in all and per
// batch size: since `at_warmup` (null: since start). Printed, and as JSON by
// model.
json batches_report(const ServerStats& fin, const ServerStats* at_warmup) {
  std::printf("\n%-20s %9s %9s %15s %15s %15s\n", "model batches", "inputs", "as views", "copied/sample",
              "staging/input", "ran/profile");
  json staging = json::object();
  for (const ModelStats& m : fin.models) {
    const ModelStats* w = at_warmup ? find_model(*at_warmup, m.name) : nullptr;
    server::StagingCounters::Snapshot st = m.staging;
    if (w) {
      st.batches -= w->staging.batches;
      st.views -= w->staging.views;
      st.samples -= w->staging.samples;
      st.bytes_copied -= w->staging.bytes_copied;
      st.staging_ns -= w->staging.staging_ns;
    }
    double ran_ns = 0, planned_ns = 0;
    json by_size = json::object();
    for (const auto& [size, d] : m.batch_exec) {
      const Duration before = w && w->batch_exec.count(size) ? w->batch_exec.at(size) : Duration();
      const std::uint64_t nb = m.batches.at(size) - (w && w->batches.count(size) ? w->batches.at(size) : 0);
      const double ran = static_cast<double>((d - before).ns());
      const double planned =
          static_cast<double>(nb) * static_cast<double>(m.offline_profile.latency(size).ns());
      ran_ns += ran;
      planned_ns += planned;
      if (planned > 0) by_size[std::to_string(size)] = ran / planned;
    }
    const double per_sample =
        st.samples ? static_cast<double>(st.bytes_copied) / static_cast<double>(st.samples) : 0;
    const double per_input_us =
        st.batches ? static_cast<double>(st.staging_ns) / 1e3 / static_cast<double>(st.batches) : 0;
    const double ratio = planned_ns > 0 ? ran_ns / planned_ns : 0;
    char views[32];
    std::snprintf(views, sizeof views, "%.0f%%",
                  st.batches ? 100.0 * static_cast<double>(st.views) / static_cast<double>(st.batches) : 0.0);
    std::printf("%-20s %9llu %9s %13.0f B %12.1f us %15.2f\n", m.label.c_str(),
                static_cast<unsigned long long>(st.batches), views, per_sample, per_input_us, ratio);
    staging[m.label] = {{"inputs", st.batches},
                        {"views", st.views},
                        {"samples", st.samples},
                        {"bytes_copied", st.bytes_copied},
                        {"staging_us", static_cast<double>(st.staging_ns) / 1e3},
                        {"graph_batches", m.graph_batches - (w ? w->graph_batches : 0)},
                        {"ran_over_profile", ratio},
                        {"ran_over_profile_by_batch", by_size}};
  }
  return staging;
}

}  // namespace

json load_report(const LoadRun& run, const config::ServeConfig& cfg) {
  const ServerStats& fin = run.at_end;
  const double window = run.window_s;
  json report;
  report["policy"] = cfg.policy.to_string();
  report["gather"] = std::string(to_string(cfg.policy.gather));
  report["duration_s"] = window;
  report["warmup_s"] = cfg.warmup_s;
  OutcomeCounts total;
  std::uint64_t refused_total = 0;
  std::vector<metrics::OutcomeRow> rows;
  for (std::size_t i = 0; i < run.tallies.size(); ++i) {
    LoadTally& t = *run.tallies[i];
    const ModelStats* fs = find_model(fin, t.name);
    if (!fs) fs = &fin.models[0];
    const ModelStats* before = find_model(run.at_warmup, t.name);
    const auto hist = diff(fs->batches, before ? before->batches : std::map<std::uint32_t, std::uint64_t>{});
    const OutcomeCounts c = t.tally.counts();
    const std::uint64_t refused = t.refused.load();
    const LatencyHistogram lat = t.tally.latency();
    const Duration p50 = lat.percentile(0.5), p99 = lat.percentile(0.99);
    rows.push_back({t.name, c, refused, 0, p50, p99, mean_batch(hist), batch_histogram(hist)});
    json jm = metrics::outcome_json(c, window);
    metrics::add_drops(jm, "refused", refused);
    jm["rate"] = t.rate;
    jm["latency_ms"] = {{"p50", p50.to_ms()}, {"p99", p99.to_ms()}};
    jm["mean_batch"] = mean_batch(hist);
    jm["batch_histogram"] = histogram_json(hist);
    jm["slo_ms"] = cfg.models[i].slo.to_ms();
    jm["max_batch"] = fs->max_batch;
    jm["l1_ms"] = fs->l1.to_ms();
    jm["profile"] = {{"recalibrating", fs->recalibrating},
                     {"samples", fs->recalibration_samples},
                     {"updates", fs->recalibration_updates},
                     {"offline_ms", profile_points(fs->offline_profile, fs->max_batch)},
                     {"in_use_ms", profile_points(fs->profile_in_use, fs->max_batch)},
                     {"scale", scale_points(fs->profile_in_use, fs->offline_profile, fs->max_batch)}};
    report["models"][t.name] = jm;
    total += c;
    refused_total += refused;
  }
  metrics::print_outcome_table(stdout, "model", rows, window, "batch sizes (size:count)");
  for (const auto& tp : run.tallies) {
    LoadTally& t = *tp;
    const OutcomeCounts c = t.tally.counts();
    if (const std::uint64_t refused = t.refused.load()) {
      std::lock_guard<std::mutex> lock(t.mu);
      std::printf("  %s: %llu refused at infer(), e.g. %s\n", t.name.c_str(),
                  static_cast<unsigned long long>(refused), t.last_refusal.c_str());
    }
    if (c.dropped) std::printf("  %s: dropped: %s\n", t.name.c_str(), metrics::drops_text(c).c_str());
  }
  // The profile each model is planned with at the end against its offline one.
  std::printf("\n%-20s %13s %23s %23s %9s %8s\n", "model profile", "recalibrated", "l(1) ms offline->now",
              "l(max) ms offline->now", "measured", "updates");
  for (const ModelStats& m : fin.models) {
    const std::uint32_t top = std::min(m.max_batch, m.profile_in_use.max_batch());
    if (top == 0) continue;
    char l1[32], lmax[32];
    std::snprintf(l1, sizeof l1, "%.2f -> %.2f", m.offline_profile.latency(1).to_ms(),
                  m.profile_in_use.latency(1).to_ms());
    std::snprintf(lmax, sizeof lmax, "%.2f -> %.2f", m.offline_profile.latency(top).to_ms(),
                  m.profile_in_use.latency(top).to_ms());
    std::printf("%-20s %13s %23s %23s %9llu %8llu\n", m.label.c_str(), m.recalibrating ? "yes" : "no", l1,
                lmax, static_cast<unsigned long long>(m.recalibration_samples),
                static_cast<unsigned long long>(m.recalibration_updates));
  }
  // How the batches were formed and how long they ran against the profile
  // they were planned with (the measured window).
  report["staging"] = batches_report(fin, &run.at_warmup);
  std::printf("\n%-20s %10s %9s\n", "device", "busy", "batches");
  for (std::size_t d = 0; d < fin.devices.size(); ++d) {
    const DeviceStats& ds = fin.devices[d];
    const DeviceStats* w = d < run.at_warmup.devices.size() ? &run.at_warmup.devices[d] : nullptr;
    const double busy = ((ds.busy - (w ? w->busy : Duration())).to_seconds()) / window;
    const std::uint64_t nb = ds.batches - (w ? w->batches : 0);
    std::printf("%-20s %9.1f%% %9llu\n", ds.name.c_str(), 100 * std::min(1.0, busy),
                static_cast<unsigned long long>(nb));
    json jd;
    jd["name"] = ds.name;
    jd["busy_fraction"] = std::min(1.0, busy);
    jd["batches"] = nb;
    if (ds.cuda_timed) {  // CUDA devices; over the whole run, warm-up included
      auto p50_p99 = [](Duration a, Duration b) { return json{{"p50", a.to_us()}, {"p99", b.to_us()}}; };
      jd["dispatch_overhead_us"] = {{"mean", ds.dispatch_overhead_mean.to_us()},
                                    {"p50", ds.dispatch_overhead_p50.to_us()},
                                    {"p99", ds.dispatch_overhead_p99.to_us()},
                                    {"queued", p50_p99(ds.queued_p50, ds.queued_p99)},
                                    {"staging", p50_p99(ds.staging_p50, ds.staging_p99)},
                                    {"enqueueing", p50_p99(ds.enqueueing_p50, ds.enqueueing_p99)}};
      jd["idle_gap_us"] = {{"back_to_back", ds.back_to_back},
                           {"mean", ds.idle_gap_mean.to_us()},
                           {"p50", ds.idle_gap_p50.to_us()},
                           {"p99", ds.idle_gap_p99.to_us()}};
      jd["planned_gap_us"] = {{"planned_back_to_back", ds.planned_back_to_back},
                              {"p50", ds.planned_gap_p50.to_us()},
                              {"p99", ds.planned_gap_p99.to_us()}};
      std::printf(
          "%-20s dispatch overhead p50 %.1f us, p99 %.1f us (p50s: queued %.1f, staging %.1f, "
          "enqueueing %.1f); idle gap p50 %.1f us, p99 %.1f us (%llu back to back); "
          "planned back to back: p50 %.1f us, p99 %.1f us (%llu)\n",
          "", ds.dispatch_overhead_p50.to_us(), ds.dispatch_overhead_p99.to_us(), ds.queued_p50.to_us(),
          ds.staging_p50.to_us(), ds.enqueueing_p50.to_us(), ds.idle_gap_p50.to_us(), ds.idle_gap_p99.to_us(),
          static_cast<unsigned long long>(ds.back_to_back), ds.planned_gap_p50.to_us(),
          ds.planned_gap_p99.to_us(), static_cast<unsigned long long>(ds.planned_back_to_back));
    }
    for (const DeviceModelEstimate& e : ds.models) {
      const std::uint32_t top = estimate_top(e, fin.models);
      jd["models"][e.model] = {{"samples", e.samples},
                               {"estimate_ms", profile_points(e.estimate, top)},
                               {"scale", scale_points(e.estimate, e.offline, top)}};
    }
    report["devices"].push_back(jd);
  }
  if (fin.overlap)
    std::printf(
        "\ndispatched ahead by %.1f us + %.2f us per request (learned from %llu batches' staging "
        "and launch)\n",
        fin.delays.ctrl.to_us(), fin.delays.data.to_us(),
        static_cast<unsigned long long>(fin.dispatch_samples));
  const std::uint64_t dropped = total.dropped + refused_total;
  const double goodput = static_cast<double>(total.ok) / window;
  std::printf(
      "\ntotal: sent %llu, ok %llu, late %llu, dropped %llu, errors %llu; goodput %.1f r/s over %.0f s\n",
      static_cast<unsigned long long>(total.sent), static_cast<unsigned long long>(total.ok),
      static_cast<unsigned long long>(total.late), static_cast<unsigned long long>(dropped),
      static_cast<unsigned long long>(total.errors), goodput, window);
  report["sent"] = total.sent;
  report["ok"] = total.ok;
  report["late"] = total.late;
  report["dropped"] = dropped;
  report["errors"] = total.errors;
  report["goodput_rps"] = goodput;
  report["bad_rate"] = total.bad_rate();
  report["server"] = server_counts_json(fin);
  return report;
}

nlohmann::json served_report(const server::ServerStats& fin) {
  nlohmann::json report = nlohmann::json::object();
  std::printf("\n%-20s %10s %9s\n", "device", "busy", "batches");
  for (const server::DeviceStats& ds : fin.devices) {
    std::printf("%-20s %9.1f%% %9llu\n", ds.name.c_str(), 100 * std::min(1.0, ds.busy_fraction),
                static_cast<unsigned long long>(ds.batches));
    report["devices"].push_back(
        {{"name", ds.name}, {"busy_fraction", std::min(1.0, ds.busy_fraction)}, {"batches", ds.batches}});
  }
  report["staging"] = batches_report(fin, nullptr);
  report["server"] = server_counts_json(fin);
  return report;
}

}  // namespace symphony::serve
