// `symphony partition models.csv --subclusters L`: partitions the models of a
// table across L sub-clusters (the MILP with CBC, greedy or random search)
// under a CPU-time limit, optionally against a current assignment with a
// disruption bound; prints the assignment and the imbalance factors and, with
// --json FILE, writes the JSON report. Formats: docs/partition.md.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "symphony/partition/partition.hpp"
#include "symphony/status.hpp"

namespace symphony::tools {
namespace {

namespace part = symphony::partition;

struct Options {
  std::string models;
  std::size_t subclusters = 0;
  double time_limit = 10;
  std::string current;
  std::string method = "milp";
  double max_disruption = part::kUnlimited;
  std::vector<double> rate_cap;
  std::vector<double> memory_cap;
  std::vector<double> cost_scale;
  double memory_weight = 1;
  std::uint64_t seed = 1;
  std::int64_t node_limit = -1;
  std::int64_t sample_limit = -1;
  bool warm_start = false;
  bool solver_log = false;
  std::string json;
  bool quiet = false;
};

// A per-sub-cluster option: one value for all, or exactly L values.
Result<std::vector<double>> per_subcluster(const std::vector<double>& v, std::size_t L, double fallback,
                                           const char* name) {
  if (v.empty()) return std::vector<double>(L, fallback);
  if (v.size() == 1) return std::vector<double>(L, v[0]);
  if (v.size() != L) {
    return Status(Errc::kInvalidArgument, std::string(name) + ": give one value or one per sub-cluster (" +
                                              std::to_string(L) + "), got " + std::to_string(v.size()));
  }
  return v;
}

std::string num(double v, int precision = 1) {
  if (std::isinf(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", precision, v);
  return buf;
}

std::string table(const part::Problem& p, const part::Solution& r) {
  std::ostringstream s;
  s << r.message() << "\n";
  if (!r.has_solution()) return s.str();
  const part::Evaluation& e = r.evaluation;
  char line[256];
  std::snprintf(line, sizeof line, "%-10s %6s %12s %10s %12s %12s %12s %10s\n", "subcluster", "models",
                "rate_rps", "rate_cap", "static_mib", "max_dyn_mib", "memory_mib", "mem_cap");
  s << line;
  for (std::size_t j = 0; j < e.loads.size(); ++j) {
    const part::SubClusterLoad& l = e.loads[j];
    std::snprintf(line, sizeof line, "%-10zu %6zu %12s %10s %12s %12s %12s %10s\n", j, l.models,
                  num(l.rate).c_str(), num(p.subclusters[j].rate_cap, 0).c_str(),
                  num(l.static_memory).c_str(), num(l.max_dynamic_memory).c_str(), num(l.memory()).c_str(),
                  num(p.subclusters[j].memory_cap, 0).c_str());
    s << line;
  }
  s << "imbalance (max-min)/avg: rate " << num(e.rate_imbalance, 4) << ", memory "
    << num(e.memory_imbalance, 4) << "\n";
  s << "objective " << num(r.objective, 6) << " (rate spread " << num(e.rate_spread, 4) << " + "
    << p.memory_weight << " x memory spread " << num(e.memory_spread, 4) << "), bound "
    << (std::isnan(r.bound) ? "-" : num(r.bound, 6)) << ", gap "
    << (std::isnan(r.gap) ? "-" : num(100 * r.gap, 2) + " %") << ", " << num(r.cpu_seconds, 2) << " CPU s"
    << (r.time_limit_hit ? " (time limit)" : "") << "\n";
  if (!p.current.empty() || std::isfinite(p.max_disruption)) {
    s << "moves " << e.moves.size() << ", disruption " << num(e.disruption, 2) << " (bound "
      << (std::isinf(p.max_disruption) ? std::string("none") : num(p.max_disruption, 2)) << ")\n";
  }
  s << "assignment:\n";
  for (std::size_t j = 0; j < e.loads.size(); ++j) {
    s << "  " << j << ":";
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (r.assignment[i] == static_cast<int>(j)) s << " " << p.models[i].name;
    }
    s << "\n";
  }
  return s.str();
}

int run(const Options& o) {
  JsonReport json(o.json);
  try {
    part::Problem p;
    Result<std::vector<part::Model>> models = part::read_models_csv(o.models);
    if (!models.ok()) return exit_for("partition", models.status());
    p.models = std::move(*models);
    const std::size_t L = o.subclusters;
    const auto rate = per_subcluster(o.rate_cap, L, part::kUnlimited, "--rate-cap");
    const auto memory = per_subcluster(o.memory_cap, L, part::kUnlimited, "--memory-cap");
    const auto scale = per_subcluster(o.cost_scale, L, 1, "--cost-scale");
    for (const auto* caps : {&rate, &memory, &scale}) {
      if (!caps->ok()) {
        print_error("partition", "%s\n", caps->status().message().c_str());
        return 2;
      }
    }
    for (std::size_t j = 0; j < L; ++j) p.subclusters.push_back({(*rate)[j], (*memory)[j], (*scale)[j]});
    if (!o.current.empty()) {
      Result<part::CurrentAssignment> read = part::read_assignment_json(o.current, p.models, L);
      if (!read.ok()) return exit_for("partition", read.status());
      part::CurrentAssignment& cur = *read;
      p.current = std::move(cur.current);
      p.pinned = std::move(cur.pinned);
      p.permitted = std::move(cur.permitted);
      if (!cur.unknown_models.empty()) {
        print_error("partition", "%s: %zu model(s) not in %s (they left; ignored), e.g. '%s'\n",
                    o.current.c_str(), cur.unknown_models.size(), o.models.c_str(),
                    cur.unknown_models[0].c_str());
      }
    }
    p.max_disruption = o.max_disruption;
    p.memory_weight = o.memory_weight;
    part::Options so;
    const Result<part::Method> method = part::parse_method(o.method);
    if (!method.ok()) return exit_for("partition", method.status());
    so.method = *method;
    so.time_limit = o.time_limit;
    so.seed = o.seed;
    so.node_limit = o.node_limit;
    so.sample_limit = o.sample_limit;
    so.warm_start = o.warm_start;
    so.solver_log = o.solver_log;
    const Result<part::Solution> solved = part::solve(p, so);
    if (!solved.ok()) return exit_for("partition", solved.status());
    const part::Solution& r = *solved;
    if (!o.quiet) std::cout << table(p, r);
    if (json.enabled() && !json.write("partition", part::to_json(p, r).dump(2) + "\n")) return 2;
    if (!r.has_solution()) {
      print_error("partition", "%s\n", r.message().c_str());
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {  // nlohmann::json's, e.g. a model name that is not UTF-8
    print_error("partition", "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace

CLI::App* add_partition(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "partition",
      "Partition models across sub-clusters (MILP with CBC, greedy or random search); see docs/partition.md");
  static Options o;
  cmd->add_option("models", o.models, "model table (CSV: name,rate,static_mib,dynamic_mib[,move_cost])")
      ->required();
  cmd->add_option("-L,--subclusters", o.subclusters, "number of sub-clusters")
      ->required()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 16));
  cmd->add_option("--time-limit", o.time_limit, "CPU seconds for the whole solve (default 10, the paper's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--current", o.current, "current assignment (JSON; a previous --json report works)");
  cmd->add_option("--method", o.method, "milp (default), greedy or random")
      ->check(CLI::IsMember({"milp", "greedy", "random"}));
  cmd->add_option("--max-disruption", o.max_disruption,
                  "bound on the move cost against --current (a move costs move_cost x 2, a new model x 1)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--rate-cap", o.rate_cap,
                  "per-sub-cluster rate cap in r/s: one value or L, comma-separated")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--memory-cap", o.memory_cap,
                  "per-backend memory in MiB (static + largest dynamic): one value or L, comma-separated")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--cost-scale", o.cost_scale,
                  "per-sub-cluster multiplier of move costs (e.g. its backends): one value or L")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--memory-weight", o.memory_weight,
                  "weight w of the memory spread in the objective (default 1)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", o.seed, "random seed (CBC, random search; default 1)");
  cmd->add_option("--node-limit", o.node_limit, "milp: branch-and-bound node limit (deterministic budget)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--sample-limit", o.sample_limit,
                  "random: number of assignments drawn (deterministic budget)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--warm-start", o.warm_start, "milp: start CBC from the greedy solution");
  cmd->add_flag("--solver-log", o.solver_log, "milp: print CBC's log");
  add_json_option(cmd, o.json);
  cmd->add_flag("-q,--quiet", o.quiet, "print nothing but errors");
  cmd->callback([&exit_code] { exit_code = run(o); });
  return cmd;
}

}  // namespace symphony::tools
