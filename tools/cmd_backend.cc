// `symphony backend --scheduler HOST:PORT --devices emulated:N | cpu[:N] |
// cuda[:i] [--model NAME:PATH:SPEC ...] [--model-repository DIR]`: a GPU host of the cluster
// (extensions/rdma/.../backend_node.hpp; TorchScript models need the server
// library). With hot-spare schedulers, --config's cluster.schedulers
// replaces --scheduler. Runs until SIGINT
// or SIGTERM (or --duration); --json FILE writes its counters and input-read
// latencies as JSON on exit.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "commands.hpp"
#include "symphony/cluster/backend_node.hpp"
#include "symphony/metrics/endpoint.hpp"
#ifdef SYMPHONY_HAVE_CLUSTER_TORCH
#include "symphony/cluster/backend_torch.hpp"
#endif
#include "symphony/cluster/cluster_config.hpp"
#include "symphony/cluster/cluster_repository.hpp"
#include "symphony/cluster/node_common.hpp"

namespace symphony::tools {
namespace {

struct BackendArgs {
  std::string scheduler;
  std::string devices = "emulated:1";
  std::string config;
  std::string token;
  std::string name;
  std::string exec_log;
  std::string json;
  std::string report;               // deprecated --report FILE: --json FILE
  std::vector<std::string> models;  // NAME:PATH:SPEC[+SPEC]
  std::string model_repository;
  int cpu_threads = 1;
  double emulated_slowdown = 1.0;
  std::uint32_t output_bytes = 16;
  std::string metrics;
  double duration_s = 0;
  bool verbose = false;
};

int run_backend(BackendArgs a) {
  if (!a.report.empty()) {
    deprecated_alias_notice("backend", "--report");
    if (!a.json.empty()) {
      print_error("backend", "--report and --json: give --json FILE alone\n");
      return 2;
    }
    a.json = a.report;
  }
  JsonReport json(a.json);
  const sigset_t set = block_stop_signals();  // before any thread: they all inherit it
  cluster::BackendOptions o;
  o.token = a.token;
  std::optional<cluster::ClusterRepository> repo;  // its files, without the profiles
  std::map<std::string, std::uint32_t> max_batch;  // by model: the largest batch the config plans
  if (!a.model_repository.empty()) {
    Result<cluster::ClusterRepository> r = cluster::read_cluster_repository(a.model_repository, {});
    if (!r.ok()) return print_error("backend", "%s\n", r.status().message().c_str()), 2;
    repo = std::move(*r);
  }
  if (!a.config.empty()) {
    // Emulated devices run the scheduler's models (its Welcome) and read
    // only the config's cluster: section (the token, the UCX settings and
    // cluster.schedulers), so a repository cluster's cluster.yaml, which has
    // no models:, serves them too.
    cluster::ClusterSettings settings;
    if (a.devices.rfind("emulated", 0) == 0 && a.models.empty() && !repo) {
      Result<cluster::ClusterSettings> s = cluster::load_cluster_settings(a.config, a.token.empty());
      if (!s.ok()) {
        print_error("backend", "%s\n", s.status().message().c_str());
        return 2;
      }
      settings = std::move(*s);
    } else {
      const Result<cluster::ClusterConfig> loaded =
          cluster::load_cluster_config(a.config, a.token.empty(), repo ? &*repo : nullptr);
      if (!loaded.ok()) {
        print_error("backend", "%s\n", loaded.status().message().c_str());
        return 2;
      }
      for (const ModelConfig& m : loaded->sim.spec.models) {
        const std::uint32_t profiled = m.profile.max_batch();
        max_batch[m.name] = m.max_batch == 0 ? profiled
                            : profiled == 0  ? m.max_batch
                                             : std::min(m.max_batch, profiled);
      }
      settings = loaded->cluster;
    }
    if (o.token.empty()) o.token = cluster::effective_token(settings);
    o.ucx_tls = settings.ucx_tls;
    o.inject_delay = settings.inject_delay;
    for (const std::string& s : settings.schedulers) {
      Result<cluster::HostPort> hp = cluster::HostPort::parse(s);
      if (!hp.ok()) {
        print_error("backend", "%s: cluster.schedulers entry '%s': %s\n", a.config.c_str(), s.c_str(),
                    hp.status().message().c_str());
        return 2;
      }
      o.schedulers.push_back(*hp);
    }
  }
  if (!o.schedulers.empty()) {
    if (!a.scheduler.empty())
      std::fprintf(stderr,
                   "symphony backend: --scheduler %s ignored: %s gives cluster.schedulers, which win\n",
                   a.scheduler.c_str(), a.config.c_str());
  } else if (a.scheduler.empty()) {
    print_error("backend", "give --scheduler HOST:PORT or a config with cluster.schedulers\n");
    return 2;
  } else {
    Result<cluster::HostPort> hp = cluster::HostPort::parse(a.scheduler);
    if (!hp.ok()) {
      print_error("backend", "--scheduler: %s\n", hp.status().message().c_str());
      return 2;
    }
    o.scheduler = *hp;
  }
  o.devices = a.devices;
  o.name = a.name;
  o.model_repository = a.model_repository;
  if (a.devices.rfind("emulated", 0) != 0) {
#ifdef SYMPHONY_HAVE_CLUSTER_TORCH
    Result<std::vector<cluster::TorchModelSpec>> specs =
        cluster::torch_model_specs(a.models, repo ? &*repo : nullptr);
    if (!specs.ok()) return print_error("backend", "%s\n", specs.status().message().c_str()), 2;
    for (cluster::TorchModelSpec& m : *specs)  // warm-up sizes: the config's plan, else the repository's
      if (const auto it = max_batch.find(m.name); it != max_batch.end() && it->second > 0)
        m.max_batch = it->second;
    std::vector<std::string> notes;
    Result<std::unique_ptr<cluster::BackendDevices>> d = cluster::make_torch_devices(
        a.devices, *specs, a.cpu_threads, a.name.empty() ? "backend" : a.name, &notes);
    if (!d.ok()) {
      print_error("backend", "%s\n", d.status().message().c_str());
      return 2;
    }
    o.device_set = std::move(*d);
    const auto log = cluster::stderr_logger(a.name.empty() ? "backend" : a.name);
    for (const std::string& n : notes) log(n);
#else
    print_error("backend",
                "--devices %s needs the server library (libtorch); this build has emulated:N only\n",
                a.devices.c_str());
    return 2;
#endif
  } else if (!a.models.empty() || repo) {
    print_error(
        "backend",
        "emulated devices run no model: drop --model / --model-repository or use --devices cpu|cuda\n");
    return 2;
  }
  if (a.emulated_slowdown != 1.0 && a.devices.rfind("emulated", 0) != 0) {
    print_error("backend", "--emulated-slowdown applies to emulated devices only (--devices emulated:N)\n");
    return 2;
  }
  o.emulated_slowdown = a.emulated_slowdown;
  o.exec_log = a.exec_log;
  o.output_bytes = a.output_bytes;
  o.verbose = a.verbose;
  o.log = cluster::stderr_logger(a.name.empty() ? "backend" : a.name);
  if (!a.metrics.empty()) {  // checked before anything starts
    if (auto p = metrics::parse_listen_address(a.metrics); !p.ok()) {
      print_error("backend", "--metrics: %s\n", p.status().message().c_str());
      return 2;
    }
  }
  Result<std::unique_ptr<cluster::BackendNode>> node = cluster::BackendNode::create(std::move(o));
  if (!node.ok()) {
    print_error("backend", "%s\n", node.status().message().c_str());
    return 2;
  }
  std::unique_ptr<metrics::Endpoint> endpoint;
  if (!a.metrics.empty()) {
    const cluster::BackendNode* n = node->get();
    auto ep = metrics::Endpoint::start(
        a.metrics, [n](metrics::Writer& w) { cluster::write_backend_metrics(n->metrics_snapshot(), w); },
        [n] { return cluster::backend_not_ready(n->metrics_snapshot()); });
    if (!ep.ok()) {
      print_error("backend", "--metrics: %s\n", ep.status().message().c_str());
      return 2;
    }
    endpoint = std::move(*ep);
    std::fprintf(stderr, "metrics: listening on http://%s/metrics\n", endpoint->address().c_str());
  }
  const TimePoint end = SteadyClock{}.now() + Duration::from_seconds(a.duration_s > 0 ? a.duration_s : 1e9);
  for (;;) {
    const Duration left = end - SteadyClock{}.now();
    if (left <= Duration::zero()) break;
    const Duration step = min(left, Duration::seconds(1));
    timespec ts{static_cast<time_t>(step.ns() / 1000000000), static_cast<long>(step.ns() % 1000000000)};
    if (sigtimedwait(&set, nullptr, &ts) > 0) break;
  }
  (*node)->stop();
  endpoint.reset();
  if (json.enabled() && !json.write("backend", (*node)->report().dump(2) + "\n")) return 1;
  return 0;
}

}  // namespace

CLI::App* add_backend(CLI::App& app, int& exit_code) {
  static BackendArgs a;
  auto* cmd = app.add_subcommand("backend",
                                 "Run a cluster backend: register devices with the scheduler, run batches");
  cmd->add_option("--scheduler", a.scheduler,
                  "the scheduler's HOST:PORT (required unless --config lists cluster.schedulers, which then "
                  "replace it)");
  cmd->add_option("--devices", a.devices,
                  "emulated:N (N emulated GPUs: each batch runs l(b) of the profile), or cpu[:N] / "
                  "cuda[:i,...] with --model");
  cmd->add_option("--model", a.models,
                  "NAME:PATH:SPEC[+SPEC...]: a TorchScript model for cpu/cuda devices, e.g. "
                  "resnet18:models/resnet18.pt:float32[3,64,64] (repeat for more models)");
  cmd->add_option("--model-repository", a.model_repository,
                  "a model repository in Triton's layout (DIR/<model>/config.pbtxt): load every model's "
                  "highest version from it, for cpu/cuda devices (docs/cluster.md)");
  cmd->add_option("--cpu-threads", a.cpu_threads, "libtorch intra-op threads per CPU device");
  cmd->add_option(
      "--emulated-slowdown", a.emulated_slowdown,
      "emulated devices run each batch this many times l(b) of the profile, in [0.1, 10] (default 1): "
      "a device slower or faster than profiled, which online recalibration follows");
  cmd->add_option("config,--config", a.config,
                  "cluster.yaml (for the token, the UCX settings and cluster.schedulers)");
  cmd->add_option("--token", a.token, "the cluster token (default: SYMPHONY_CLUSTER_TOKEN or the config's)");
  cmd->add_option("--name", a.name, "name in logs (default backend-<pid>)");
  cmd->add_option("--output-bytes", a.output_bytes, "bytes of output per request (>= 8)");
  cmd->add_option("--exec-log", a.exec_log,
                  "append '<frontend incarnation> <request id>' per executed request");
  add_json_option(cmd, a.json);
  add_deprecated_json_alias(cmd, "--report", a.report);
  cmd->add_option(
         "--metrics", a.metrics,
         "serve Prometheus /metrics, /healthz, /readyz on HOST:PORT (port 0: any free port, printed; "
         "docs/metrics.md)")
      ->envname("SYMPHONY_METRICS");
  cmd->add_option("--duration", a.duration_s, "stop after this many seconds (default: until SIGINT/SIGTERM)");
  cmd->add_flag("--verbose", a.verbose, "log each connection's UCX transports");
  cmd->footer("The --json report, written on exit, holds the counters and the input-read latencies.");
  cmd->callback([&exit_code] { exit_code = run_backend(a); });
  return cmd;
}

}  // namespace symphony::tools
