// `symphony frontend --config cluster.yaml --scheduler HOST:PORT --http
// HOST:PORT --grpc HOST:PORT`: the cluster's protocol frontend. It serves
// the Open Inference Protocol (KServe v2) over HTTP and gRPC and submits
// each request through the cluster client (extensions/rdma/.../
// frontend_service.hpp), so that clients we did not write (curl, grpcio,
// `symphony load`) use a Symphony cluster. Any number may run.
//
// It keeps trying the scheduler as the client does (backoff 50 ms to 2 s);
// until a scheduler has accepted it and a backend has connected to it,
// /v2/health/ready answers 503. SIGINT or SIGTERM stops it
// gracefully: new requests get 503, pending ones end (within --drain; then
// 503), the last responses are written, and it prints the report of what it
// answered (the keys of serve's front report; --json FILE).
#include <csignal>
#include <cstdio>
#include <optional>
#include <string>

#include "commands.hpp"
#include "front_cli.hpp"
#include "symphony/cluster/cluster_config.hpp"
#include "symphony/cluster/cluster_repository.hpp"
#include "symphony/cluster/frontend_app.hpp"

namespace symphony::tools {
namespace {

using json = nlohmann::json;

struct FrontendArgs {
  std::string config;
  std::string model_repository;
  std::string scheduler;
  FrontArgs front;  // --http, --grpc, --port-file, --max-inflight, ...
  std::string metrics;
  std::string json;
  std::string token;
  std::string name;
  std::uint32_t max_input_bytes = 4096;
  double drain_s = -1;
  double duration_s = 0;
  bool quiet = false;
  bool verbose = false;

  FrontendArgs() { front.max_inflight = 4096; }  // the input pool is this many inputs
};

int run_frontend(const FrontendArgs& a) {
  JsonReport json_report(a.json);  // first: with --json -, stdout carries the report alone
  const sigset_t stop_signals = block_stop_signals();  // before any thread: they all inherit it

  if (!a.front.any())
    return print_error("frontend",
                       "give --http HOST:PORT and/or --grpc HOST:PORT (where protocol clients connect)\n"),
           2;
  cluster::FrontendOptions o;
  std::optional<cluster::ClusterRepository> repo;  // names and tensors, without the profiles
  if (!a.model_repository.empty()) {
    Result<cluster::ClusterRepository> r = cluster::read_cluster_repository(a.model_repository, {});
    if (!r.ok()) return print_error("frontend", "%s\n", r.status().message().c_str()), 2;
    repo = std::move(*r);
  }
  Result<cluster::ClusterConfig> loaded =
      cluster::load_cluster_config(a.config, a.token.empty(), repo ? &*repo : nullptr);
  if (!loaded.ok()) return print_error("frontend", "%s\n", loaded.status().message().c_str()), 2;
  o.config = std::move(*loaded);
  o.config_path = a.config;
  o.scheduler = a.scheduler;
  o.listen = a.front.listen_options();
  o.max_inflight = a.front.max_inflight;
  o.port_file = a.front.port_file;
  o.metrics = a.metrics;
  o.token = a.token;
  o.name = a.name;
  o.max_input_bytes = a.max_input_bytes;
  o.verbose = a.verbose;
  auto started = cluster::FrontendApp::start(std::move(o));
  if (!started.ok()) {
    print_error("frontend", "%s\n", started.status().message().c_str());
    return started.status().code() == Errc::kFailedPrecondition ? 1 : 2;
  }
  cluster::FrontendApp& app = **started;
  if (!app.metrics_address().empty())
    std::fprintf(stderr, "metrics: listening on http://%s/metrics\n", app.metrics_address().c_str());
  std::fprintf(stderr, "front: listening on %s\n", app.describe().c_str());
  std::fprintf(stderr, "serving until SIGINT or SIGTERM (Ctrl-C)\n");

  const TimePoint start = SteadyClock{}.now();
  const int sig = wait_for_stop(stop_signals, &app.front(), a.quiet, a.duration_s > 0 ? a.duration_s : 1e9);
  std::fprintf(stderr, "%s: stopping (new requests get 503; pending ones end)\n",
               sig == SIGINT    ? "SIGINT"
               : sig == SIGTERM ? "SIGTERM"
                                : "--duration");
  app.stop(a.drain_s >= 0 ? Duration::from_seconds(a.drain_s) : app.longest_slo() + Duration::seconds(3));
  const json report = app.report((SteadyClock{}.now() - start).to_seconds());
  if (json_report.enabled() && !json_report.write("frontend", report.dump(2) + "\n")) return 1;
  return 0;
}

}  // namespace

CLI::App* add_frontend(CLI::App& app, int& exit_code) {
  static FrontendArgs a;
  auto* cmd = app.add_subcommand("frontend",
                                 "Serve the Open Inference Protocol (KServe v2) over HTTP and gRPC in front "
                                 "of a cluster (docs/cluster.md)");
  cmd->add_option("config,--config", a.config,
                  "cluster.yaml: the models, their SLOs and cluster.models' tensors")
      ->required();
  cmd->add_option("--model-repository", a.model_repository,
                  "take the models, their SLOs and tensors from a Triton-layout repository, not the config's "
                  "models: and cluster.models (docs/cluster.md#running-from-a-model-repository)");
  cmd->add_option("--scheduler", a.scheduler,
                  "the scheduler's HOST:PORT (not needed when the config lists cluster.schedulers)");
  add_front_options(
      cmd, a.front,
      "protocol requests in the cluster at once; more get 429 at once (default 4096; the registered "
      "input pool holds about this many inputs)");
  cmd->add_option(
         "--metrics", a.metrics,
         "serve Prometheus /metrics (the front's counters), /healthz, /readyz on HOST:PORT (docs/metrics.md)")
      ->envname("SYMPHONY_METRICS");
  add_json_option(cmd, a.json);
  cmd->add_option("--token", a.token, "the cluster token (default: SYMPHONY_CLUSTER_TOKEN or the config's)");
  cmd->add_option("--name", a.name, "name in the scheduler's logs (default frontend-<pid>)");
  cmd->add_option("--max-input-bytes", a.max_input_bytes,
                  "largest input of a model without cluster.models inputs (one BYTES element; default 4096)");
  cmd->add_option(
         "--drain", a.drain_s,
         "seconds to wait at the stop for pending requests (default: the longest SLO + 3); the rest get 503")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--duration", a.duration_s, "stop after this many seconds (default: until SIGINT/SIGTERM)");
  cmd->add_flag("--quiet", a.quiet, "no progress line");
  cmd->add_flag("--verbose", a.verbose, "log each connection's UCX transports");
  cmd->footer(
      "Every protocol request gets exactly one response; the report (printed, and --json FILE) counts them "
      "like "
      "serve's: sent == ok + late + dropped + errors per model.");
  cmd->callback([&exit_code] { exit_code = run_frontend(a); });
  return cmd;
}

}  // namespace symphony::tools
