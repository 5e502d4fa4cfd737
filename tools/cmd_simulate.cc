// `symphony simulate <config.yaml>`: runs a simulator experiment (a run, a
// goodput search or a minimum-GPU search), prints a per-model table and, with
// --json FILE, writes the JSON report. The config format and the report are
// in docs/simulator.md.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "commands.hpp"
#include "progress.hpp"
#include "symphony/policy.hpp"
#include "symphony/simtool/simulate.hpp"

namespace symphony::tools {
namespace {

// Prints one progress line per search step on stderr.
class StderrProgress : public simtool::Progress {
 public:
  void on_step(const std::string& search, const sim::SearchStep& s, std::size_t i) override {
    const bool rate = search == "goodput";
    char buf[200];
    std::snprintf(buf, sizeof buf, "[%s] run %zu: %s %.*f%s -> worst bad rate %.3f %% (%s)", search.c_str(),
                  i + 1, rate ? "rate" : "gpus", rate ? 1 : 0, s.x, rate ? " r/s" : "",
                  100 * s.worst_bad_rate, s.pass ? "pass" : "fail");
    line_.update(buf);
  }

 private:
  ProgressLine line_;
};

struct Options {
  std::string config;
  std::string json;
  std::string policy;
  std::string gather;
  bool goodput = false;
  double min_gpus = 0;
  std::string trace_out;
  std::string out;  // deprecated -o: where the table (or, with a bare --json, the report) goes
  std::uint64_t seed = 0;
  bool seed_set = false;
  std::uint32_t gpus = 0;
  double rate = 0;
  bool quiet = false;
};

int run(Options o) {
  // The deprecated -o FILE, as it was: `-o F` writes the table to F, and
  // `--json -o F` the report alone.
  std::string table_out;
  bool table = true;
  if (!o.out.empty()) {
    deprecated_alias_notice("simulate", "-o");
    if (o.json.empty()) {
      table_out = o.out;
    } else if (o.json == "-") {
      o.json = o.out;
      table = false;
    } else {
      print_error("simulate", "-o and --json FILE: give --json FILE alone\n");
      return 2;
    }
  }
  JsonReport json(o.json);
  Result<config::Config> c = config::load_config(o.config);
  if (!c.ok()) return exit_for("simulate", c.status());
  config::Overrides ov;
  if (!o.policy.empty()) ov.policy = o.policy;
  if (!o.gather.empty()) ov.gather = o.gather;
  if (o.seed_set) ov.seed = o.seed;
  if (o.gpus) ov.gpus = o.gpus;
  if (o.rate > 0) ov.rate = o.rate;
  if (Status s = config::apply_overrides(*c, ov); !s.ok()) return exit_for("simulate", s);
  simtool::SimulateOptions so;
  so.mode =
      o.goodput ? simtool::Mode::kGoodput : (o.min_gpus > 0 ? simtool::Mode::kMinGpus : simtool::Mode::kRun);
  so.min_gpus_rate = o.min_gpus;
  std::ofstream trace;
  if (!o.trace_out.empty()) {
    trace.open(o.trace_out);
    if (!trace) return print_error("simulate", "%s: cannot write the trace\n", o.trace_out.c_str()), 2;
    so.trace_out = &trace;
  }
  StderrProgress progress;
  const Result<nlohmann::json> report = simtool::simulate(*c, so, o.quiet ? nullptr : &progress);
  if (!report.ok()) return exit_for("simulate", report.status());
  if (!table_out.empty()) {
    std::ofstream f(table_out);
    f << simtool::format_table(*report);
    if (!f) return print_error("simulate", "%s: cannot write the report\n", table_out.c_str()), 2;
  } else if (table) {
    std::cout << simtool::format_table(*report);
  }
  // A model name that is not UTF-8 is written replaced, not thrown on.
  if (json.enabled() &&
      !json.write("simulate", report->dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"))
    return 2;
  return 0;
}

}  // namespace

CLI::App* add_simulate(CLI::App& app, int& exit_code) {
  auto* cmd =
      app.add_subcommand("simulate", "Simulate a workload on emulated GPUs; search goodput or minimum GPUs");
  static Options o;
  cmd->add_option("config,--config", o.config, "experiment config (YAML, see docs/simulator.md)")->required();
  add_json_option(cmd, o.json);
  cmd->add_option("--policy", o.policy,
                  std::string(kPolicyHelp) + " (overrides the config; docs/policies.md)");
  cmd->add_option("--gather", o.gather, std::string(kGatherHelp) + " (overrides the config)");
  auto* goodput =
      cmd->add_flag("--goodput", o.goodput, "search the goodput (highest rate with <= 1 % bad per model)");
  auto* min_gpus =
      cmd->add_option("--min-gpus", o.min_gpus, "search the minimum number of GPUs serving this rate (r/s)")
          ->check(CLI::PositiveNumber)
          ->excludes(goodput);
  cmd->add_option("--trace-out", o.trace_out,
                  "write every batch and request of the reported run to this CSV");
  cmd->add_option(
         "-o,--out", o.out,
         "deprecated: write the table (with a bare --json, the report) to this file; use --json FILE")
      ->group("Deprecated");
  cmd->add_option("--seed", o.seed, "random seed (overrides the config)")->each([](const std::string&) {
    o.seed_set = true;
  });
  cmd->add_option("--gpus", o.gpus, "number of GPUs (overrides the config)")->check(CLI::Range(1u, 1u << 20));
  // The searches set the rate themselves: a --rate beside them would be ignored.
  cmd->add_option("--rate", o.rate,
                  "total offered rate in r/s (scales the config's rates; not with a search)")
      ->check(CLI::PositiveNumber)
      ->excludes(goodput)
      ->excludes(min_gpus);
  cmd->add_flag("-q,--quiet", o.quiet, "no progress lines on stderr");
  cmd->callback([&exit_code] { exit_code = run(o); });
  return cmd;
}

}  // namespace symphony::tools
