// The report's sub-cluster parts (subclusters.hpp).
#include "symphony/simtool/subclusters.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace symphony::simtool {
using nlohmann::json;

namespace {

// Rounds to 6 significant digits, as the rest of the report (simulate.cc).
double r6(double v) {
  if (!std::isfinite(v) || v == 0) return v;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return std::strtod(buf, nullptr);
}
json num(double v) { return std::isfinite(v) ? json(r6(v)) : json(nullptr); }
json seconds(TimePoint t) { return t.is_infinite() ? json(nullptr) : num(t.to_ms() / 1e3); }

json window_json(const sim::AutoscaleSample& w) {
  return json{{"begin_s", num(w.begin.to_ms() / 1e3)},
              {"end_s", num(w.end.to_ms() / 1e3)},
              {"arrived", w.arrived},
              {"bad_rate", num(w.bad_rate)},
              {"busy_fraction", num(w.busy_fraction)},
              {"gpus_used", w.gpus_used},
              {"add_gpus", num(w.add_gpus)},
              {"release_gpus", num(w.release_gpus)},
              {"advice", w.advice}};
}

}  // namespace

json subclusters_json(const partition::SubClusterConfig& c, const ExperimentSpec& e,
                      const sim::SubClusterRunResult& r) {
  json epochs = json::array();
  std::uint64_t moves = 0;
  for (const sim::EpochRecord& ep : r.epochs) {
    json mv = json::array();
    for (std::size_t k = 0; k < ep.moves.size(); ++k) {
      const ModelMove& m = ep.moves[k];
      mv.push_back(json{{"model", e.models[m.model].name},
                        {"from", m.from == kNoSubCluster ? json(nullptr) : json(m.from)},
                        {"to", m.to},
                        {"drained_s", seconds(ep.drained_at[k])}});
    }
    if (ep.epoch > 0) moves += ep.moves.size();
    json rates = json::array();
    for (double x : ep.rates) rates.push_back(num(x));
    json stats = json::object();
    for (const auto& [k, v] : ep.stats) stats[k] = num(v);
    epochs.push_back(json{{"epoch", ep.epoch},
                          {"time_s", seconds(ep.time)},
                          {"rates_rps", std::move(rates)},
                          {"status", ep.status},
                          {"stats", std::move(stats)},
                          {"moves", std::move(mv)},
                          {"assignment", ep.assignment}});
  }
  json subs = json::array();
  const std::vector<int> last = r.epochs.empty() ? std::vector<int>{} : r.epochs.back().assignment;
  for (std::size_t j = 0; j < r.subclusters.size(); ++j) {
    const sim::RunSummary& s = r.subclusters[j];
    json models = json::array();
    for (std::size_t i = 0; i < last.size(); ++i)
      if (last[i] == static_cast<int>(j)) models.push_back(e.models[i].name);
    json windows = json::array();
    for (const sim::AutoscaleSample& w : s.autoscale) windows.push_back(window_json(w));
    subs.push_back(json{{"gpus", r.gpus[j]},
                        {"models_at_end", std::move(models)},
                        {"offered_rps", num(s.total.offered_rps)},
                        {"goodput_rps", num(s.total.goodput_rps)},
                        {"bad_rate", num(s.total.counts.bad_rate())},
                        {"arrived", s.total.counts.sent},
                        {"gpu_busy_fraction", num(s.busy_fraction)},
                        {"gpus_used", s.gpus_used},
                        {"autoscale", json{{"windows", std::move(windows)}}}});
  }
  return json{{"count", c.spec.count},
              {"gpus", r.gpus},
              {"epoch_s", num(c.spec.epoch.to_seconds())},
              {"method", c.method},
              {"time_limit_s", num(c.time_limit_s)},
              {"node_limit", c.node_limit},
              {"sample_limit", c.sample_limit},
              {"warm_start", c.warm_start},
              {"max_disruption", num(c.spec.max_disruption)},
              {"min_improvement", num(c.min_improvement)},
              {"memory_cap_mib", num(c.memory_cap_mib)},
              {"rate_cap_rps", num(c.rate_cap_rps)},
              {"memory_weight", num(c.memory_weight)},
              {"cost_scale", num(c.cost_scale)},
              {"balance", partition::to_string(c.balance)},
              {"model_memory", c.model_memory},
              {"moves", moves},
              {"epochs", std::move(epochs)},
              {"per_subcluster", std::move(subs)}};
}

json series_json(const ExperimentSpec& e, const sim::ModelSeries& s) {
  json models = json::array();
  for (ModelId m = 0; m < s.models(); ++m) {
    json arrived = json::array(), ok = json::array(), bad = json::array();
    for (std::size_t k = 0; k < s.steps(); ++k) {
      const sim::ModelSeries::Cell& c = s.cell(k, m);
      arrived.push_back(c.sent);
      ok.push_back(c.ok);
      bad.push_back(c.ended() - c.ok);
    }
    models.push_back(json{{"name", e.models[m].name},
                          {"arrived", std::move(arrived)},
                          {"ok", std::move(ok)},
                          {"bad", std::move(bad)}});
  }
  return json{{"step_s", num(s.step().to_seconds())}, {"models", std::move(models)}};
}

}  // namespace symphony::simtool
