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
#include <string>
#include <unistd.h>

#include "commands.hpp"
#include "front_cli.hpp"
#include "progress.hpp"
#include "symphony/cluster/cluster_config.hpp"
#include "symphony/cluster/frontend_service.hpp"
#include "symphony/cluster/node_common.hpp"
#include "symphony/cluster/transport.hpp"
#include "symphony/front/front_metrics.hpp"
#include "symphony/front/listeners.hpp"
#include "symphony/metrics/endpoint.hpp"
#include "symphony/metrics/exposition.hpp"

namespace symphony::tools {
namespace {

using json = nlohmann::json;

struct FrontendArgs {
  std::string config;
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

// The registered pool is max_pending x the largest input, allocated and
// touched at start: refuse sizes that cannot be meant.
constexpr std::uint64_t kMaxPoolBytes = std::uint64_t{4} << 30;

int run_frontend(const FrontendArgs& a) {
  JsonReport json_report(a.json);  // first: with --json -, stdout carries the report alone
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // before any thread: they all inherit it

  if (!a.front.any()) {
    print_error("frontend", "give --http HOST:PORT and/or --grpc HOST:PORT (where protocol clients connect)\n");
    return 2;
  }
  cluster::ClusterConfig cfg;
  try {
    cfg = cluster::load_cluster_config(a.config, a.token.empty());
  } catch (const config::ConfigError& e) {
    print_error("frontend", "%s\n", e.what());
    return 2;
  }
  // The schedulers: the config's list (hot spares) or --scheduler.
  std::string scheduler_desc = a.scheduler;
  if (!cfg.cluster.schedulers.empty()) {
    scheduler_desc.clear();
    for (const std::string& s : cfg.cluster.schedulers) scheduler_desc += (scheduler_desc.empty() ? "" : ",") + s;
  } else if (a.scheduler.empty()) {
    print_error("frontend", "give --scheduler HOST:PORT or a config with cluster.schedulers\n");
    return 2;
  } else if (Result<cluster::HostPort> hp = cluster::HostPort::parse(a.scheduler); !hp.ok()) {
    print_error("frontend", "--scheduler: %s\n", hp.status().message().c_str());
    return 2;
  }
  if (!a.metrics.empty())
    if (auto p = metrics::parse_listen_address(a.metrics); !p.ok()) {
      print_error("frontend", "--metrics: %s\n", p.status().message().c_str());
      return 2;
    }
  if (a.front.max_inflight == 0 || a.front.max_inflight > (1u << 20)) {
    print_error("frontend", "--max-inflight must be in [1, 1048576], got %u\n", a.front.max_inflight);
    return 2;
  }
  if (a.max_input_bytes == 0) {
    print_error("frontend", "--max-input-bytes must be positive\n");
    return 2;
  }

  std::vector<cluster::ServedModel> models = cluster::served_models(cfg);
  // The largest input: the declared models' own, and --max-input-bytes for opaque ones.
  std::uint64_t max_input = 0;
  bool any_opaque = false;
  for (const cluster::ServedModel& m : models) {
    if (m.opaque) any_opaque = true;
    max_input = std::max<std::uint64_t>(max_input, m.input_bytes);
    if (m.input_bytes > cfg.cluster.max_input_bytes) {
      print_error("frontend",
                  "%s: model '%s' takes %llu bytes of input, more than cluster.max_input_bytes (%u) lets the "
                  "scheduler accept\n",
                  a.config.c_str(), m.name.c_str(), static_cast<unsigned long long>(m.input_bytes),
                  cfg.cluster.max_input_bytes);
      return 2;
    }
  }
  if (any_opaque) max_input = std::max<std::uint64_t>(max_input, std::min(a.max_input_bytes, cfg.cluster.max_input_bytes));
  // Slots go to models in runs of 64 (the client's allocator): room for one
  // half-used run per model beside the front's in-flight bound.
  const std::uint64_t slots = std::uint64_t{a.front.max_inflight} + 64 * models.size();
  if (slots > (1u << 24) || slots * max_input > kMaxPoolBytes) {
    print_error("frontend",
                "--max-inflight %u with inputs of up to %llu bytes needs %.1f GiB of registered memory (at most %.0f); "
                "lower --max-inflight%s\n",
                a.front.max_inflight, static_cast<unsigned long long>(max_input),
                static_cast<double>(slots * max_input) / (1u << 30), static_cast<double>(kMaxPoolBytes) / (1u << 30),
                any_opaque ? " or --max-input-bytes" : "");
    return 2;
  }

  const std::string name = a.name.empty() ? "frontend-" + std::to_string(getpid()) : a.name;
  cluster::ClientOptions co;
  co.scheduler = a.scheduler;
  co.schedulers = cfg.cluster.schedulers;
  co.token = a.token.empty() ? cluster::effective_token(cfg.cluster) : a.token;
  co.name = name;
  co.max_pending = static_cast<std::uint32_t>(slots);
  co.max_input_bytes = static_cast<std::uint32_t>(max_input);
  co.ucx_tls = cfg.cluster.ucx_tls;
  co.inject_delay = cfg.cluster.inject_delay;
  co.verbose = a.verbose;
  co.log = cluster::stderr_logger(name);
  auto client = cluster::Client::connect(co);
  if (!client.ok()) {
    print_error("frontend", "%s\n", client.status().message().c_str());
    return 1;
  }
  cluster::ClusterService service(**client, models, co.max_input_bytes, scheduler_desc);
  front::FrontOptions fo;
  fo.server_name = "symphony";
  fo.max_inflight = a.front.max_inflight;
  front::Front front(service, fo);
  auto listeners = front::Listeners::start(front, a.front.listen_options());
  if (!listeners.ok()) {
    print_error("frontend", "%s\n", listeners.status().message().c_str());
    return 2;
  }
  std::unique_ptr<metrics::Endpoint> endpoint;
  if (!a.metrics.empty()) {
    const cluster::Client* c = client->get();
    const std::string sched = scheduler_desc;
    auto ep = metrics::Endpoint::start(
        a.metrics,
        [&front, c](metrics::Writer& w) {
          front::write_front_metrics(front.counters(), w, /*outcomes=*/true);
          const cluster::ClientStats s = c->stats();
          w.gauge("symphony_frontend_scheduler_connected", "1 while a scheduler has accepted this frontend.", {},
                  s.connected ? 1 : 0);
          w.counter("symphony_frontend_scheduler_losses_total", "Times the scheduler was lost.", {},
                    static_cast<double>(s.scheduler_losses));
          w.counter("symphony_frontend_cancels_total",
                    "Cancellations sent to the scheduler (callers gone while their request was pending).", {},
                    static_cast<double>(s.cancels));
        },
        [&front, c, sched]() -> std::string {
          if (front.ready()) return "";
          if (!c->connected()) return "not connected to the scheduler at " + sched;
          return c->backends() == 0 ? "no backend has connected to this frontend yet" : "stopping";
        });
    if (!ep.ok()) {
      print_error("frontend", "--metrics: %s\n", ep.status().message().c_str());
      return 2;
    }
    endpoint = std::move(*ep);
    std::fprintf(stderr, "metrics: listening on http://%s/metrics\n", endpoint->address().c_str());
  }
  if (!a.front.port_file.empty())
    if (Status s = (*listeners)->write_port_file(a.front.port_file); !s.ok()) {
      print_error("frontend", "%s\n", s.message().c_str());
      return 2;
    }
  std::string opaque;
  for (const cluster::ServedModel& m : models)
    if (m.opaque) opaque += (opaque.empty() ? "" : ", ") + m.name;
  std::fprintf(stderr, "front: listening on %s (Open Inference Protocol; docs/front.md), scheduler %s, %zu models%s\n",
               (*listeners)->where().c_str(), scheduler_desc.c_str(), models.size(),
               opaque.empty() ? "" : ("; opaque (one BYTES input, no cluster.models entry): " + opaque).c_str());
  std::fprintf(stderr, "serving until SIGINT or SIGTERM (Ctrl-C)\n");

  const TimePoint start = SteadyClock{}.now();
  const TimePoint end = start + Duration::from_seconds(a.duration_s > 0 ? a.duration_s : 1e9);
  ProgressLine progress;
  FrontProgress rates;
  int sig = -1;
  while (sig < 0 && SteadyClock{}.now() < end) {
    timespec one_second{1, 0};
    sig = sigtimedwait(&stop_signals, nullptr, &one_second);
    if (sig < 0 && !a.quiet) progress.update(rates.line(front.counters(), 1.0));
  }
  progress.finish();
  std::fprintf(stderr, "%s: stopping (new requests get 503; pending ones end)\n",
               sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "--duration");
  front.begin_stop();
  Duration longest = Duration::zero();
  for (const cluster::ServedModel& m : models) longest = max(longest, m.slo);
  const Duration drain = a.drain_s >= 0 ? Duration::from_seconds(a.drain_s) : longest + Duration::seconds(3);
  if (!(*client)->drain(drain))
    std::fprintf(stderr, "%llu requests still pending after %.1f s: they end with 503 (the frontend is stopping)\n",
                 static_cast<unsigned long long>((*client)->stats().in_flight), drain.to_seconds());
  (*client)->close();  // ends what is left (503) and leaves the cluster
  (*listeners)->stop();
  endpoint.reset();

  const std::vector<cluster::ServedModelStats> stats = service.stats();
  const ModelLatencyOf latency = [&stats](const std::string& model) -> std::optional<ModelLatency> {
    for (const cluster::ServedModelStats& s : stats) {
      if (s.model != model || s.latency.count() == 0) continue;
      std::uint64_t n = 0, sum = 0;
      json hist = json::object();
      for (const auto& [b, k] : s.requests_by_batch_size) {
        n += k;
        sum += b * k;
        hist[std::to_string(b)] = k;
      }
      ModelLatency l{s.latency.percentile(0.5), s.latency.percentile(0.99),
                     n ? static_cast<double>(sum) / static_cast<double>(n) : 0.0, json::object()};
      l.extra["requests_by_batch_size"] = hist;
      return l;
    }
    return std::nullopt;
  };
  json report = front_report(front.counters(), latency, (SteadyClock{}.now() - start).to_seconds(),
                             (*listeners)->http_address(), (*listeners)->grpc_address(), (*listeners)->where());
  const cluster::ClientStats cs = (*client)->stats();
  report["config"] = a.config;
  report["scheduler"] = scheduler_desc;
  report["name"] = name;
  report["client"] = {{"sent", cs.sent},
                      {"ok", cs.ok},
                      {"late", cs.late},
                      {"dropped", cs.dropped},
                      {"errors", cs.errors},
                      {"in_flight_at_end", cs.in_flight},
                      {"cancels", cs.cancels},
                      {"duplicate_outcomes", cs.duplicate_outcomes},
                      {"duplicate_outputs", cs.duplicate_outputs},
                      {"unknown_ids", cs.unknown_ids},
                      {"scheduler_losses", cs.scheduler_losses},
                      {"resubmitted", cs.resubmitted},
                      {"welcomes", cs.welcomes}};
  std::printf("cluster client: sent %llu, scheduler lost %llu times, joined %llu times, %llu cancels sent\n",
              static_cast<unsigned long long>(cs.sent), static_cast<unsigned long long>(cs.scheduler_losses),
              static_cast<unsigned long long>(cs.welcomes), static_cast<unsigned long long>(cs.cancels));
  if (json_report.enabled() && !json_report.write("frontend", report.dump(2) + "\n")) return 1;
  return 0;
}

}  // namespace

CLI::App* add_frontend(CLI::App& app, int& exit_code) {
  static FrontendArgs a;
  auto* cmd = app.add_subcommand(
      "frontend",
      "Serve the Open Inference Protocol (KServe v2) over HTTP and gRPC in front of a cluster (docs/cluster.md)");
  cmd->add_option("config,--config", a.config, "cluster.yaml: the models, their SLOs and cluster.models' tensors")
      ->required();
  cmd->add_option("--scheduler", a.scheduler,
                  "the scheduler's HOST:PORT (not needed when the config lists cluster.schedulers)");
  add_front_options(cmd, a.front,
                    "protocol requests in the cluster at once; more get 429 at once (default 4096; the registered "
                    "input pool holds about this many inputs)");
  cmd->add_option("--metrics", a.metrics,
                  "serve Prometheus /metrics (the front's counters), /healthz, /readyz on HOST:PORT (docs/metrics.md)");
  add_json_option(cmd, a.json);
  cmd->add_option("--token", a.token, "the cluster token (default: SYMPHONY_CLUSTER_TOKEN or the config's)");
  cmd->add_option("--name", a.name, "name in the scheduler's logs (default frontend-<pid>)");
  cmd->add_option("--max-input-bytes", a.max_input_bytes,
                  "largest input of a model without cluster.models inputs (one BYTES element; default 4096)");
  cmd->add_option("--drain", a.drain_s,
                  "seconds to wait at the stop for pending requests (default: the longest SLO + 3); the rest get 503")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--duration", a.duration_s, "stop after this many seconds (default: until SIGINT/SIGTERM)");
  cmd->add_flag("--quiet", a.quiet, "no progress line");
  cmd->add_flag("--verbose", a.verbose, "log each connection's UCX transports");
  cmd->footer(
      "Every protocol request gets exactly one response; the report (printed, and --json FILE) counts them like "
      "serve's: sent == ok + late + dropped + errors per model.");
  cmd->callback([&exit_code] { exit_code = run_frontend(a); });
  return cmd;
}

}  // namespace symphony::tools
