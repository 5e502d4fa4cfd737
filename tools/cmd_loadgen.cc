// `symphony loadgen --scheduler HOST:PORT --config workload.yaml`: a cluster
// frontend that offers the workload of a simulator-style config in real time,
// then prints the outcome report of `serve` and, with --json FILE, writes it
// (symphony::cluster::run_cluster_load, cluster/load.hpp).
#include <nlohmann/json.hpp>

#include <cstdio>

#include "commands.hpp"
#include "symphony/cluster/load.hpp"

namespace symphony::tools {
namespace {

int run_loadgen(const cluster::ClusterLoadOptions& a, const std::string& json_out) {
  JsonReport json_report(json_out);  // first: with --json -, stdout carries the report alone
  Result<nlohmann::json> report = cluster::run_cluster_load(a);
  if (!report.ok()) {
    print_error("loadgen", "%s\n", report.status().message().c_str());
    return report.status().code() == Errc::kFailedPrecondition ? 1 : 2;
  }
  if (json_report.enabled()) {
    if (!json_report.write("loadgen", report->dump(2) + "\n")) return 1;
    if (!a.quiet && !json_report.to_stdout()) std::fprintf(stderr, "wrote %s\n", json_out.c_str());
  }
  return 0;
}

}  // namespace

CLI::App* add_loadgen(CLI::App& app, int& exit_code) {
  static cluster::ClusterLoadOptions a;
  static std::string json_out;
  auto* cmd = app.add_subcommand("loadgen",
                                 "A cluster frontend that offers a config's workload and reports outcomes");
  cmd->add_option("--scheduler", a.scheduler,
                  "the scheduler's HOST:PORT (not needed when the config lists cluster.schedulers)");
  cmd->add_option("config,--config", a.config,
                  "workload.yaml (a simulator config; its models must be the cluster's)")
      ->required();
  cmd->add_option("--duration", a.duration_s, "seconds of load (default: the config's duration_s)");
  cmd->add_option("--warmup", a.warmup_s,
                  "seconds not counted at the start (default: the config's warmup_s)");
  cmd->add_option("--rate", a.rate, "total offered requests/s (scales the config's rates)");
  add_json_option(cmd, json_out);
  cmd->add_option("--token", a.token, "the cluster token (default: SYMPHONY_CLUSTER_TOKEN or the config's)");
  cmd->add_option("--name", a.name, "this frontend's name in the scheduler's logs");
  cmd->add_option("--input-bytes", a.input_bytes, "bytes of input per request");
  cmd->add_option("--max-pending", a.max_pending, "requests in flight at once (input slots)");
  cmd->add_option("--seed", a.seed, "workload seed (default: the config's)");
  cmd->add_option("--priority", a.priority,
                  "each request's priority (Triton's: 1 the highest, 0 the model's default): N, or a mix "
                  "N:share,N:share (e.g. 1:0.2,2:0.8); the report then counts outcomes by priority");
  cmd->add_option("--connect-timeout", a.connect_timeout_s, "seconds to wait for the scheduler");
  cmd->add_flag(
      "--check-outputs,!--no-check-outputs", a.check_outputs,
      "count outputs that are not the hash of their input (what emulated backends return; default on)");
  cmd->add_flag("--quiet", a.quiet, "no progress lines");
  cmd->add_flag("--verbose", a.verbose, "log each connection's UCX transports");
  cmd->callback([&exit_code] { exit_code = run_loadgen(a, json_out); });
  return cmd;
}

}  // namespace symphony::tools
