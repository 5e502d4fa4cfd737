// Sub-clusters in simtool (subclusters.hpp): the model memory table, the
// partitioner the simulator calls every epoch, and the report's parts.
#include "symphony/simtool/subclusters.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "csv.hpp"
#include "symphony/partition/epoch.hpp"
#include "symphony/sim/bounds.hpp"

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
// A number for a status line: three significant digits.
std::string fmt_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}
json seconds(TimePoint t) { return t.is_infinite() ? json(nullptr) : num(t.to_ms() / 1e3); }

// GPU seconds a request of model m costs at the staggered bound's batch on
// `gpus` GPUs (l(b) / b); 0 when not even a batch of one fits its SLO.
double gpu_seconds_per_request(const ModelConfig& m, std::uint32_t gpus) {
  const std::uint32_t mb = m.max_batch ? m.max_batch : m.profile.max_batch();
  const sim::BatchBound b = sim::staggered_bound(m.profile, m.slo, std::max<std::uint32_t>(gpus, 1), mb);
  if (b.batch == 0) return m.profile.latency(1).to_seconds();
  return b.latency.to_seconds() / b.batch;
}

json window_json(const sim::AutoscaleWindow& w) {
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

const char* to_string(Balance b) { return b == Balance::kGpuTime ? "gpu_time" : "rate"; }

std::vector<std::pair<std::string, ModelMemory>> read_model_memory(const std::string& path) {
  const detail::Csv csv = detail::read_csv(path, "model memory table");
  const int c_name = csv.column("name", true), c_static = csv.column("static_mib", true),
            c_dynamic = csv.column("dynamic_mib", true), c_cost = csv.column("move_cost", false);
  std::vector<std::pair<std::string, ModelMemory>> out;
  for (const auto& [line, row] : csv.rows) {
    if (static_cast<std::size_t>(c_name) >= row.size() || row[static_cast<std::size_t>(c_name)].empty())
      csv.fail(line, "missing model name");
    ModelMemory m;
    m.static_mib = csv.number(line, row, c_static, "static_mib");
    m.dynamic_mib = csv.number(line, row, c_dynamic, "dynamic_mib");
    if (c_cost >= 0) m.move_cost = csv.number(line, row, c_cost, "move_cost");
    const std::string& name = row[static_cast<std::size_t>(c_name)];
    if (m.static_mib < 0 || m.dynamic_mib < 0 || m.move_cost < 0)
      csv.fail(line, "model '" + name + "': static_mib, dynamic_mib and move_cost must be >= 0");
    for (const auto& [other, _] : out)
      if (other == name) csv.fail(line, "model '" + name + "' appears twice");
    out.emplace_back(name, m);
  }
  return out;
}

sim::Partitioner make_partitioner(const SubClusterConfig& c, const sim::ExperimentSpec& e,
                                  std::uint32_t gpus) {
  partition::Options o;
  try {
    o.method = partition::parse_method(c.method);
  } catch (const partition::InputError& err) {
    throw ConfigError(std::string("subclusters.method: ") + err.what());
  }
  if (o.method == partition::Method::kMilp && !partition::milp_available())
    throw ConfigError(
        "subclusters.method: milp needs CBC, which this build does not have (install coinor-libcbc-dev and "
        "reconfigure); use greedy");
  o.time_limit = c.time_limit_s;
  o.node_limit = c.node_limit;
  o.sample_limit = c.sample_limit;
  o.warm_start = c.warm_start;
  o.seed = c.seed;
  std::vector<partition::Model> models;
  std::vector<double> weight;  // what one request/s of a model counts in the balance
  const std::uint32_t mean_gpus = std::max<std::uint32_t>(1, gpus / std::max<std::uint32_t>(c.spec.count, 1));
  for (std::size_t i = 0; i < e.models.size(); ++i) {
    const ModelMemory mem = i < c.memory.size() ? c.memory[i] : ModelMemory{};
    models.push_back({e.models[i].name, 0, mem.static_mib, mem.dynamic_mib, mem.move_cost});
    weight.push_back(c.balance == Balance::kGpuTime ? gpu_seconds_per_request(e.models[i], mean_gpus) : 1.0);
  }
  auto ep = std::make_shared<const partition::EpochPartitioner>(
      std::move(models),
      partition::uniform_subclusters(c.spec.count, c.rate_cap_rps, c.memory_cap_mib, c.cost_scale), o,
      c.memory_weight, c.min_improvement);
  return [ep, weight](const sim::EpochRequest& r) -> Result<sim::EpochDecision> {
    std::vector<double> load(r.rates.size());
    for (std::size_t i = 0; i < load.size(); ++i) load[i] = r.rates[i] * weight[i];
    partition::EpochPlan plan;
    try {
      plan = ep->plan(load, r.current, r.max_disruption);
    } catch (const partition::InputError& err) {
      return Status(Errc::kInvalidArgument, err.what());
    }
    sim::EpochDecision d;
    d.assignment = std::move(plan.assignment);
    const partition::Result& res = plan.result;
    d.status = res.message();
    if (plan.kept) d.status = "kept the current assignment: " + d.status;
    if (plan.held) {
      // The stats describe the assignment in force: the current one.
      const partition::Evaluation& ev = plan.current;
      d.status = "kept the current assignment: the solver's gains " + fmt_number(plan.gain) +
                 " (objective or RMS deviation), below min_improvement " + fmt_number(ep->min_improvement()) +
                 " (" + d.status + ")";
      d.stats = {{"objective", ev.objective},
                 {"rate_imbalance", ev.rate_imbalance},
                 {"memory_imbalance", ev.memory_imbalance},
                 {"disruption", 0.0},
                 {"proposed_objective", res.objective}};
    } else if (res.has_solution()) {
      const partition::Evaluation& ev = res.evaluation;
      d.stats = {{"objective", res.objective},
                 {"rate_imbalance", ev.rate_imbalance},
                 {"memory_imbalance", ev.memory_imbalance},
                 {"disruption", ev.disruption}};
      if (!std::isnan(res.gap)) d.stats.emplace_back("gap", res.gap);
    }
    return d;
  };
}

json subclusters_json(const SubClusterConfig& c, const sim::ExperimentSpec& e,
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
    for (const sim::AutoscaleWindow& w : s.autoscale) windows.push_back(window_json(w));
    subs.push_back(json{{"gpus", r.gpus[j]},
                        {"models_at_end", std::move(models)},
                        {"offered_rps", num(s.total.offered_rps)},
                        {"goodput_rps", num(s.total.goodput_rps)},
                        {"bad_rate", num(s.total.bad_rate)},
                        {"arrived", s.total.arrived},
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
              {"balance", to_string(c.balance)},
              {"model_memory", c.model_memory},
              {"moves", moves},
              {"epochs", std::move(epochs)},
              {"per_subcluster", std::move(subs)}};
}

json series_json(const sim::ExperimentSpec& e, const sim::ModelSeries& s) {
  json models = json::array();
  for (ModelId m = 0; m < s.models(); ++m) {
    json arrived = json::array(), ok = json::array(), bad = json::array();
    for (std::size_t k = 0; k < s.steps(); ++k) {
      const sim::ModelSeries::Cell& c = s.cell(k, m);
      arrived.push_back(c.arrived);
      ok.push_back(c.ok);
      bad.push_back(c.bad());
    }
    models.push_back(json{{"name", e.models[m].name},
                          {"arrived", std::move(arrived)},
                          {"ok", std::move(ok)},
                          {"bad", std::move(bad)}});
  }
  return json{{"step_s", num(s.step().to_seconds())}, {"models", std::move(models)}};
}

}  // namespace symphony::simtool
