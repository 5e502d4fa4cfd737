// simulate(): runs a Config once or searches over it, and builds the JSON
// report (simulate.hpp).
#include "symphony/simtool/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "symphony/batch_bounds.hpp"
#include "symphony/sim/experiment.hpp"
#include "symphony/sim/subcluster_experiment.hpp"
#include "symphony/simtool/subclusters.hpp"

namespace symphony::simtool {
using namespace symphony::sim;
using config::Config;
namespace {

using nlohmann::json;

// Rounds to 6 significant digits: short, stable output.
double r6(double v) {
  if (!std::isfinite(v) || v == 0) return v;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return std::strtod(buf, nullptr);
}
json num(double v) { return std::isfinite(v) ? json(r6(v)) : json(nullptr); }
json ms(Duration d) { return num(d.to_ms()); }

// Writes every batch and request of a run as CSV rows.
class CsvTrace {
 public:
  CsvTrace(std::ostream& out, const std::vector<ModelConfig>& models) : out_(out), models_(models) {
    out_ << "kind,model,gpu,size,dispatch_ms,start_ms,end_ms,exec_ms,outcome,reason,arrival_ms,deadline_ms,"
            "latency_ms,queueing_ms\n";
  }
  void on_dispatch(const Dispatch&) {}
  void on_execute(const Dispatch& d, TimePoint start, TimePoint end) {
    char buf[256];
    std::snprintf(buf, sizeof buf, ",%u,%u,%.6f,%.6f,%.6f,%.6f,,,,,,\n", d.gpu, d.size,
                  d.dispatched_at.to_ms(), start.to_ms(), end.to_ms(), (end - start).to_ms());
    out_ << "batch," << models_[d.model].name << buf;
  }
  void on_outcome(const RequestOutcome& o) {
    char buf[320];
    const bool ran = o.outcome != Outcome::kDropped;
    std::string gpu = ran ? std::to_string(o.gpu) : "";
    std::string size = ran ? std::to_string(o.batch_size) : "";
    char queueing[48] = "";
    if (ran) std::snprintf(queueing, sizeof queueing, "%.6f", (o.exec - o.arrival).to_ms());
    std::snprintf(buf, sizeof buf, ",%s,%s,,,,,%s,%s,%.6f,%.6f,%.6f,%s\n", gpu.c_str(), size.c_str(),
                  std::string(to_string(o.outcome)).c_str(),
                  o.outcome == Outcome::kDropped ? std::string(to_string(o.reason)).c_str() : "",
                  o.arrival.to_ms(), o.deadline.to_ms(), (o.finish - o.arrival).to_ms(), queueing);
    out_ << "request," << models_[o.model].name << buf;
  }

 private:
  std::ostream& out_;
  const std::vector<ModelConfig>& models_;
};

// A config the simulator cannot run (kInvalidArgument, as the config's
// readers say it).
Status cannot_run(std::string message) { return Status(Errc::kInvalidArgument, std::move(message)); }

// A run that failed: kInternal, which callers tell from a config they cannot run.
Status run_failed(const Status& s) { return Status(Errc::kInternal, "simulation failed: " + s.to_string()); }

// One run of the config's experiment; with sub-clusters, their details go to
// `detail` when it is given.
Result<RunResult> run_once(const Config& c, double scale, std::uint32_t gpus, std::ostream* trace,
                           SubClusterRunResult* detail = nullptr) {
  const ExperimentSpec& e = c.spec;
  if (c.subclusters) {
    // Its errors (kInvalidArgument) are a config the simulator cannot run, as every other.
    SYMPHONY_ASSIGN_OR_RETURN(const Partitioner part, partition::make_partitioner(*c.subclusters, e, gpus));
    Result<SubClusterRunResult> r = [&] {
      if (trace) {
        CsvTrace t(*trace, e.models);
        return run_subcluster_experiment(e, c.subclusters->spec, part, scale, gpus, &t);
      }
      return run_subcluster_experiment<NullObserver>(e, c.subclusters->spec, part, scale, gpus, nullptr);
    }();
    if (!r.ok()) return run_failed(r.status());
    RunResult out = std::move(r->cluster);
    if (detail) *detail = std::move(*r);
    return out;
  }
  Result<RunResult> r = [&] {
    if (trace) {
      CsvTrace t(*trace, e.models);
      return run_experiment(e, scale, gpus, &t);
    }
    return run_experiment<NullObserver>(e, scale, gpus, nullptr);
  }();
  if (!r.ok()) return run_failed(r.status());
  return std::move(*r);
}

// The runs of a search. The searches (sim/search.hpp) cannot stop early, so
// the first failed run ends a search in effect: later steps fail at once, are
// not reported, and simulate() returns that run's error.
class SearchRuns {
 public:
  template <class Run>
  RunResult operator()(Run&& run) {
    if (failed_.ok()) {
      Result<RunResult> r = run();
      if (r.ok()) return std::move(*r);
      failed_ = r.status();
    }
    RunResult none;
    none.summary.worst_bad_rate = std::numeric_limits<double>::infinity();
    return none;
  }
  bool failed() const { return !failed_.ok(); }
  const Status& status() const { return failed_; }

 private:
  Status failed_;
};

// The report's sub-cluster parts of the reported run (a second run at the same
// point for a search, whose runs keep only their summaries).
Status add_subclusters(json& report, const Config& c, double scale, std::uint32_t gpus,
                       SubClusterRunResult* have = nullptr) {
  if (!c.subclusters) return Status();
  SubClusterRunResult again;
  if (!have) {
    SYMPHONY_RETURN_IF_ERROR(run_once(c, scale, gpus, nullptr, &again));
    have = &again;
  }
  report["subclusters"] = subclusters_json(*c.subclusters, c.spec, *have);
  report["series"] = series_json(c.spec, have->series);
  return Status();
}

json percentiles_json(const Percentiles& p) {
  return json{{"count", p.count}, {"mean", ms(p.mean)}, {"p50", ms(p.p50)}, {"p90", ms(p.p90)},
              {"p99", ms(p.p99)}, {"p999", ms(p.p999)}, {"max", ms(p.max)}};
}

json histogram_json(const std::vector<std::uint64_t>& h) {
  json o = json::object();
  for (std::size_t b = 0; b < h.size(); ++b)
    if (h[b]) o[std::to_string(b)] = h[b];
  return o;
}

// The simulator's keys (docs/simulator.md): "arrived" for sent, "error" for
// errors, and every reason listed, zero or not.
json outcomes_json(const OutcomeCounts& c) {
  json dropped = json::object();
  for (int r = 1; r < kNumDropReasons; ++r)
    dropped[std::string(to_string(static_cast<DropReason>(r)))] =
        c.dropped_by_reason[static_cast<std::size_t>(r)];
  return json{{"arrived", c.sent}, {"ok", c.ok},           {"late", c.late},
              {"error", c.errors}, {"dropped", c.dropped}, {"dropped_by_reason", dropped}};
}

json bound_json(const BatchBound& b) {
  return json{{"batch", b.batch}, {"latency_ms", ms(b.latency)}, {"throughput_rps", num(b.throughput_rps)}};
}

json stats_json(const ModelStats& m) {
  return json{{"offered_rps", num(m.offered_rps)},
              {"goodput_rps", num(m.goodput_rps)},
              {"ok_rps", num(m.goodput_rps)},
              {"bad_rate", num(m.counts.bad_rate())},
              {"outcomes", outcomes_json(m.counts)},
              {"latency_ms", percentiles_json(m.latency)},
              {"queueing_ms", percentiles_json(m.queueing)},
              {"median_batch", num(m.median_batch)},
              {"mean_batch", num(m.mean_batch)},
              {"batches_by_size", histogram_json(m.batches_by_size)},
              {"requests_by_size", histogram_json(m.requests_by_size)}};
}

// The report of one run (the run at the configured rate, at the goodput, or
// at the minimum GPU count).
json run_json(const Config& c, const RunResult& run, std::uint32_t gpus) {
  const RunSummary& s = run.summary;
  const ExperimentSpec& e = c.spec;
  json models = json::array();
  for (std::size_t i = 0; i < s.models.size(); ++i) {
    const ModelConfig& m = e.models[i];
    json j = stats_json(s.models[i]);
    j["name"] = m.name;
    j["source"] = c.model_info[i].source;
    j["slo_ms"] = ms(m.slo);
    j["max_batch"] = m.max_batch ? m.max_batch : m.profile.max_batch();
    j["alpha_ms"] = ms(m.profile.alpha());
    j["beta_ms"] = ms(m.profile.beta());
    if (m.timeout && e.policy.exec == ExecKind::kTimeout) j["timeout_ms"] = ms(*m.timeout);
    const std::uint32_t mb = m.max_batch ? m.max_batch : m.profile.max_batch();
    j["bounds"] = json{{"staggered", bound_json(staggered_bound(m.profile, m.slo, gpus, mb))},
                       {"no_coordination", bound_json(no_coordination_bound(m.profile, m.slo, gpus, mb))}};
    models.push_back(std::move(j));
  }
  json busy = json::array();
  for (double f : s.gpu_busy_fraction) busy.push_back(num(f));
  json windows = json::array();
  for (const AutoscaleSample& w : s.autoscale)
    windows.push_back(json{{"begin_s", num(w.begin.to_ms() / 1e3)},
                           {"end_s", num(w.end.to_ms() / 1e3)},
                           {"arrived", w.arrived},
                           {"bad_rate", num(w.bad_rate)},
                           {"busy_fraction", num(w.busy_fraction)},
                           {"gpus_used", w.gpus_used},
                           {"add_gpus", num(w.add_gpus)},
                           {"release_gpus", num(w.release_gpus)},
                           {"advice", w.advice}});
  json r = stats_json(s.total);
  r["gpus"] = gpus;
  r["gpus_used"] = s.gpus_used;
  r["gpu_busy_fraction"] = num(s.busy_fraction);
  r["gpu_busy_fraction_per_gpu"] = std::move(busy);
  r["worst_model_bad_rate"] = num(s.worst_bad_rate);
  r["window_s"] = num(s.window.to_seconds());
  r["models"] = std::move(models);
  const Duration step = e.autoscale_step > Duration::zero() ? e.autoscale_step : e.autoscale_window;
  r["autoscale"] = json{{"window_s", num(e.autoscale_window.to_seconds())},
                        {"step_s", num(step.to_seconds())},
                        {"windows", std::move(windows)}};
  r["simulated_requests"] = run.requests;
  r["events"] = run.events;
  if (!run.engine_stats.empty()) {
    json st = json::object();
    for (const auto& [k, v] : run.engine_stats) st[k] = num(v);
    r["engine_stats"] = std::move(st);
  }
  return r;
}

json steps_json(const std::vector<SearchStep>& steps, const char* x_name) {
  json a = json::array();
  for (const SearchStep& s : steps)
    a.push_back(json{{x_name, num(s.x)}, {"worst_bad_rate", num(s.worst_bad_rate)}, {"pass", s.pass}});
  return a;
}

json drift_json(const ExperimentSpec& e) {
  json a = json::array();
  for (const DriftEpisode& d : e.drift)
    a.push_back(json{{"at_s", num(d.at.to_seconds())},
                     {"length_s", num(d.length.to_seconds())},
                     {"every_s", num(d.every.to_seconds())},
                     {"factor", num(d.factor)}});
  return a;
}

json config_json(const Config& c) {
  const ExperimentSpec& e = c.spec;
  return json{{"name", c.name},
              {"seed", e.seed},
              {"gpus", e.gpus},
              {"policy", e.policy.to_string()},
              {"gather", e.policy.is_peer() ? std::string("own") : std::string(to_string(e.policy.gather))},
              {"workload", c.workload_desc},
              {"models", e.models.size()},
              {"offered_rps", num(e.base_rate())},
              {"duration_s", num(e.duration.to_seconds())},
              {"warmup_s", num(e.warmup.to_seconds())},
              {"noise_sigma", num(e.noise_sigma)},
              {"noise_drift", drift_json(e)},
              {"noise_outliers",
               json{{"probability", num(e.outlier_probability)}, {"factor", num(e.outlier_factor)}}},
              {"recalibrate", e.recalibration.enabled},
              {"max_bad_rate", num(e.max_bad_rate)},
              {"delays_ms", json{{"ctrl", ms(e.delays.ctrl)},
                                 {"data", ms(e.delays.data)},
                                 {"resp", ms(e.delays.resp)},
                                 {"safety_margin", ms(e.delays.safety_margin)}}},
              {"delay_distribution", e.delay_jitter.enabled()
                                         ? json{{"kind", "lognormal"},
                                                {"sigma", num(e.delay_jitter.sigma)},
                                                {"plan_percentile", num(e.delay_jitter.plan_percentile)},
                                                {"planned_ms", json{{"ctrl", ms(e.planned_delays().ctrl)},
                                                                    {"data", ms(e.planned_delays().data)}}}}
                                         : json("exact")}};
}

}  // namespace

Result<json> simulate(const Config& c, const SimulateOptions& opt, Progress* progress) {
  const ExperimentSpec& e = c.spec;
  const double base = e.base_rate();
  json report;
  report["config"] = config_json(c);
  auto bad = [](const RunResult& r) { return r.summary.worst_bad_rate; };

  if (c.subclusters && e.policy.is_peer())
    return cannot_run(
        c.origin + ": subclusters: policy '" + e.policy.to_string() +
        "' is a peer of the paper's evaluation, which has no sub-clusters; use deferred, eager or timeout");

  if (opt.mode == Mode::kRun) {
    SubClusterRunResult detail;
    SYMPHONY_ASSIGN_OR_RETURN(const RunResult run, run_once(c, 1.0, e.gpus, opt.trace_out, &detail));
    report.update(run_json(c, run, e.gpus));
    SYMPHONY_RETURN_IF_ERROR(add_subclusters(report, c, 1.0, e.gpus, &detail));
    report["mode"] = "run";
    return report;
  }
  if (!(base > 0)) return cannot_run(c.origin + ": workload: a search needs a positive offered rate");
  SearchRuns runs;

  if (opt.mode == Mode::kGoodput) {
    GoodputSearchOptions so;
    so.max_bad_rate = e.max_bad_rate;
    so.rel_tolerance = c.goodput.tolerance;
    so.max_steps = c.goodput.max_steps;
    so.start = c.goodput.start_rps > 0 ? c.goodput.start_rps : experiment_capacity(e);
    if (!(so.start > 0)) so.start = base;
    auto res = find_goodput(
        [&](double x) { return runs([&] { return run_once(c, x / base, e.gpus, nullptr); }); }, bad, so,
        [&](const SearchStep& s, std::size_t i) {
          if (progress && !runs.failed()) progress->on_step("goodput", s, i);
        });
    SYMPHONY_RETURN_IF_ERROR(runs.status());
    if (res.at_goodput) {
      const RunResult& run = *res.at_goodput;
      if (opt.trace_out) SYMPHONY_RETURN_IF_ERROR(run_once(c, res.goodput / base, e.gpus, opt.trace_out));
      report.update(run_json(c, run, e.gpus));
      SYMPHONY_RETURN_IF_ERROR(add_subclusters(report, c, res.goodput / base, e.gpus));
    }
    report["mode"] = "goodput";
    report["goodput_rps"] = num(res.goodput);
    report["search"] = json{{"kind", "goodput"},
                            {"start_rps", num(so.start)},
                            {"tolerance", num(so.rel_tolerance)},
                            {"goodput_rps", num(res.goodput)},
                            {"lowest_failing_rps", num(res.lowest_failing)},
                            {"steps", steps_json(res.steps, "rate_rps")}};
    return report;
  }

  // Minimum GPUs for a target rate.
  const double target = opt.min_gpus_rate > 0 ? opt.min_gpus_rate : c.min_gpus.rate;
  if (!(target > 0))
    return cannot_run(
        c.origin + ": search.min_gpus.rate: a minimum-GPU search needs a target rate (or --min-gpus <rate>)");
  MinGpusSearchOptions so;
  so.max_bad_rate = e.max_bad_rate;
  so.max_gpus = c.min_gpus.max_gpus;
  const double per_gpu = experiment_capacity(e) / e.gpus;
  so.start = per_gpu > 0
                 ? static_cast<std::uint32_t>(std::min(std::ceil(target / per_gpu), double(so.max_gpus)))
                 : e.gpus;
  const double scale = target / base;
  auto res = find_min_gpus(
      [&](std::uint32_t n) {
        if (c.subclusters &&
            n < c.subclusters->spec.count) {  // too few GPUs for the sub-clusters: a failing run
          RunResult none;
          none.summary.worst_bad_rate = 1;
          return none;
        }
        return runs([&] { return run_once(c, scale, n, nullptr); });
      },
      bad, so,
      [&](const SearchStep& s, std::size_t i) {
        if (progress && !runs.failed()) progress->on_step("min_gpus", s, i);
      });
  SYMPHONY_RETURN_IF_ERROR(runs.status());
  if (res.at_min) {
    if (opt.trace_out) SYMPHONY_RETURN_IF_ERROR(run_once(c, scale, res.gpus, opt.trace_out));
    report.update(run_json(c, *res.at_min, res.gpus));
    SYMPHONY_RETURN_IF_ERROR(add_subclusters(report, c, scale, res.gpus));
  }
  report["mode"] = "min_gpus";
  report["min_gpus"] = res.gpus;
  report["search"] =
      json{{"kind", "min_gpus"},      {"rate_rps", num(target)}, {"start_gpus", so.start},
           {"max_gpus", so.max_gpus}, {"min_gpus", res.gpus},    {"steps", steps_json(res.steps, "gpus")}};
  return report;
}

std::string format_table(const json& r) {
  std::ostringstream out;
  char buf[512];
  const json& cfg = r.at("config");
  std::snprintf(buf, sizeof buf, "%s: %s, %s, %s gathering, %d GPUs, %s\n",
                cfg.at("name").get<std::string>().c_str(), r.at("mode").get<std::string>().c_str(),
                cfg.at("policy").get<std::string>().c_str(), cfg.at("gather").get<std::string>().c_str(),
                r.value("gpus", cfg.at("gpus").get<int>()), cfg.at("workload").get<std::string>().c_str());
  out << buf;
  if (r.contains("search")) {
    const json& s = r.at("search");
    if (s.at("kind") == "goodput")
      std::snprintf(buf, sizeof buf, "goodput %.1f r/s (lowest failing rate %.1f r/s, %zu runs)\n",
                    s.at("goodput_rps").get<double>(), s.at("lowest_failing_rps").get<double>(),
                    s.at("steps").size());
    else
      std::snprintf(buf, sizeof buf, "minimum GPUs for %.1f r/s: %u (%zu runs)\n",
                    s.at("rate_rps").get<double>(), s.at("min_gpus").get<unsigned>(), s.at("steps").size());
    out << buf;
  }
  if (!r.contains("models")) {
    out << "no passing run\n";
    return out.str();
  }
  auto f = [](const json& j) { return j.is_null() ? NAN : j.get<double>(); };
  std::snprintf(buf, sizeof buf, "%-22s %9s %9s %9s %8s %8s %7s %7s %9s %9s\n", "model", "slo_ms", "offered",
                "ok_rps", "bad%", "p99_ms", "med_b", "mean_b", "stag_b", "stag_rps");
  out << buf;
  for (const json& m : r.at("models")) {
    const json& st = m.at("bounds").at("staggered");
    std::snprintf(buf, sizeof buf, "%-22s %9.2f %9.1f %9.1f %8.3f %8.2f %7.0f %7.2f %9u %9.1f\n",
                  m.at("name").get<std::string>().substr(0, 22).c_str(), f(m.at("slo_ms")),
                  f(m.at("offered_rps")), f(m.at("ok_rps")), 100 * f(m.at("bad_rate")),
                  f(m.at("latency_ms").at("p99")), f(m.at("median_batch")), f(m.at("mean_batch")),
                  st.at("batch").get<unsigned>(), f(st.at("throughput_rps")));
    out << buf;
  }
  std::snprintf(buf, sizeof buf, "%-22s %9s %9.1f %9.1f %8.3f %8.2f %7.0f %7.2f\n", "total", "",
                f(r.at("offered_rps")), f(r.at("ok_rps")), 100 * f(r.at("bad_rate")),
                f(r.at("latency_ms").at("p99")), f(r.at("median_batch")), f(r.at("mean_batch")));
  out << buf;
  std::snprintf(buf, sizeof buf,
                "GPU busy %.1f %% (mean over %u GPUs), %u GPUs used; worst model bad rate %.3f %%\n",
                100 * f(r.at("gpu_busy_fraction")), r.at("gpus").get<unsigned>(),
                r.at("gpus_used").get<unsigned>(), 100 * f(r.at("worst_model_bad_rate")));
  out << buf;
  if (r.contains("subclusters")) {
    const json& sc = r.at("subclusters");
    std::snprintf(buf, sizeof buf, "%u sub-clusters (%s), %zu epochs, %llu moves after the first placement\n",
                  sc.at("count").get<unsigned>(), sc.at("method").get<std::string>().c_str(),
                  sc.at("epochs").size(),
                  static_cast<unsigned long long>(sc.at("moves").get<std::uint64_t>()));
    out << buf;
    std::snprintf(buf, sizeof buf, "%-10s %5s %9s %9s %8s %7s %5s  %s\n", "subcluster", "gpus", "offered",
                  "ok_rps", "bad%", "busy%", "used", "models at the end");
    out << buf;
    std::size_t j = 0;
    for (const json& s : sc.at("per_subcluster")) {
      std::string names;
      for (const json& m : s.at("models_at_end")) names += (names.empty() ? "" : " ") + m.get<std::string>();
      std::snprintf(buf, sizeof buf, "%-10zu %5u %9.1f %9.1f %8.3f %7.1f %5u  ", j++,
                    s.at("gpus").get<unsigned>(), f(s.at("offered_rps")), f(s.at("goodput_rps")),
                    100 * f(s.at("bad_rate")), 100 * f(s.at("gpu_busy_fraction")),
                    s.at("gpus_used").get<unsigned>());
      out << buf << names << "\n";
    }
  }
  return out.str();
}

}  // namespace symphony::simtool
