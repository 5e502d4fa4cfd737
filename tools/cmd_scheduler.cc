// `symphony scheduler --listen HOST:PORT --config cluster.yaml`: the
// cluster's scheduler process (extensions/rdma/.../scheduler_node.hpp).
//
// Runs until SIGINT or SIGTERM (or --duration), then ends every request and
// says goodbye to its peers. With --json FILE it writes its counters and the
// delays it learned as JSON every second and on exit (with --json -, once on
// exit, to standard output). --port-file writes the bound port (useful with
// port 0) once it listens. --metrics HOST:PORT (or
// the config's cluster.metrics) serves /metrics, /healthz and /readyz
// (docs/metrics.md). With cluster.schedulers (hot spares,
// docs/cluster.md#hot-spare-schedulers) --listen must be one of the listed
// addresses; a primary deposed by a scheduler of a higher term stops and
// exits with status 3 (restarted, it rejoins as a spare).
// Its flags are defined in scheduler_cli.cc.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "commands.hpp"
#include "scheduler_cli.hpp"
#include "symphony/cluster/cluster_repository.hpp"
#include "symphony/cluster/node_common.hpp"
#include "symphony/cluster/scheduler_node.hpp"
#include "symphony/config/config.hpp"
#include "symphony/metrics/endpoint.hpp"
#include "symphony/policy.hpp"

namespace symphony::tools {
namespace {

// Writes the report atomically (a reader never sees half a file).
bool write_report(const cluster::SchedulerNode& node, const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << node.report().dump(2) << "\n";
    if (!f) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

// Waits for SIGINT/SIGTERM, or until `seconds` (> 0) pass; refreshes the
// report every second meanwhile.
void wait_for_stop(const sigset_t& set, double seconds, const cluster::SchedulerNode& node,
                   const std::string& report) {
  const TimePoint end = SteadyClock{}.now() + Duration::from_seconds(seconds > 0 ? seconds : 1e9);
  for (;;) {
    const Duration left = end - SteadyClock{}.now();
    if (left <= Duration::zero()) return;
    const Duration step = min(left, Duration::seconds(1));
    timespec ts{static_cast<time_t>(step.ns() / 1000000000), static_cast<long>(step.ns() % 1000000000)};
    if (sigtimedwait(&set, nullptr, &ts) > 0) return;
    if (!report.empty()) (void)write_report(node, report);
  }
}

int run_scheduler(SchedulerArgs a) {
  if (!a.report.empty()) {
    deprecated_alias_notice("scheduler", "--report");
    if (!a.json.empty()) {
      print_error("scheduler", "--report and --json: give --json FILE alone\n");
      return 2;
    }
    a.json = a.report;
  }
  JsonReport json(a.json);
  const sigset_t stop_set = block_stop_signals();
  cluster::SchedulerOptions o;
  Result<cluster::HostPort> hp = cluster::HostPort::parse(a.listen);
  if (!hp.ok()) {
    print_error("scheduler", "--listen: %s\n", hp.status().message().c_str());
    return 2;
  }
  o.listen = *hp;
  std::optional<cluster::ClusterRepository> repo;  // with the profiles the scheduler plans with
  if (!a.model_repository.empty()) {
    auto r = cluster::read_cluster_repository(a.model_repository, {true, a.profile_device});
    if (!r.ok()) return print_error("scheduler", "%s\n", r.status().message().c_str()), 2;
    repo = std::move(*r);
  } else if (!a.profile_device.empty()) {
    return print_error("scheduler", "--profile-device needs --model-repository DIR\n"), 2;
  }
  if (a.model_control_mode != "none" && a.model_repository.empty())
    return print_error("scheduler", "--model-control-mode %s needs --model-repository DIR\n",
                       a.model_control_mode.c_str()),
           2;
  if (!(a.repository_poll_secs > 0) || !std::isfinite(a.repository_poll_secs))
    return print_error("scheduler", "--repository-poll-secs must be a positive number of seconds\n"), 2;
  o.model_control = a.model_control_mode != "none";
  o.spare_models = a.spare_models;
  if (a.model_control_mode == "poll") o.repository_poll = Duration::from_seconds(a.repository_poll_secs);
  o.model_repository = a.model_repository;
  o.profile_device = a.profile_device;
  Result<cluster::ClusterConfig> loaded =
      cluster::load_cluster_config(a.config, true, repo ? &*repo : nullptr);
  Status read = loaded.status();
  if (read.ok()) o.config = std::move(*loaded);
  if (read.ok() && !a.policy.empty()) {
    config::Overrides ov;
    ov.policy = a.policy;
    read = config::apply_overrides(o.config.sim, ov);  // the policy language's errors, naming --policy
  }
  if (!read.ok()) {
    print_error("scheduler", "%s\n", read.message().c_str());
    return 2;
  }
  if (const std::vector<std::string>& list = o.config.cluster.schedulers; !list.empty()) {
    Result<std::uint32_t> self = cluster::scheduler_index(list, a.listen);
    if (!self.ok()) return print_error("scheduler", "%s\n", self.status().message().c_str()), 2;
    o.self = *self;
    // Deposed by a scheduler of a higher term: stop like on SIGTERM, exit 3;
    // if the stop has not ended the process 3 s later, exit 3 anyway (its
    // peers are gone already and its queues are stale).
    o.on_deposed = [](const std::string&) {
      kill(getpid(), SIGTERM);
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::seconds(3));
        std::fprintf(stderr, "scheduler: deposed; the stop took over 3 s, exiting now\n");
        std::fflush(nullptr);
        _exit(3);
      }).detach();
    };
  }
  o.verbose = a.verbose;
  o.log = cluster::stderr_logger("scheduler");
  if (Status s = check_runs_in_core(o.config.sim.spec.policy); !s.ok()) {
    print_error("scheduler", "%s\n", s.message().c_str());
    return 2;
  }
  const std::string metrics_at = a.metrics.empty() ? o.config.cluster.metrics : a.metrics;
  if (!metrics_at.empty()) {  // checked before anything starts
    if (auto p = metrics::parse_listen_address(metrics_at); !p.ok()) {
      print_error("scheduler", "--metrics / cluster.metrics: %s\n", p.status().message().c_str());
      return 2;
    }
  }
  if (!(a.autoscale_window_s > 0)) {
    print_error("scheduler", "--autoscale-window must be a positive number of seconds\n");
    return 2;
  }
  Result<std::unique_ptr<cluster::SchedulerNode>> node = cluster::SchedulerNode::create(std::move(o));
  if (!node.ok()) {
    print_error("scheduler", "%s\n", node.status().message().c_str());
    return 1;
  }
  metrics::AutoscaleTracker window(Duration::from_seconds(a.autoscale_window_s));
  std::mutex window_mu;
  (void)window.observe({SteadyClock{}.now(), 0, 0, Duration::zero(), 0});  // the start: nothing ended yet
  std::unique_ptr<metrics::Endpoint> endpoint;
  if (!metrics_at.empty()) {
    const cluster::SchedulerNode* n = node->get();
    auto ep = metrics::Endpoint::start(
        metrics_at,
        [n, &window, &window_mu](metrics::Writer& w) {
          std::lock_guard<std::mutex> lock(window_mu);  // scrapes may run on several server threads
          cluster::write_scheduler_metrics(n->metrics_snapshot(), window, w);
        },
        [n] { return n->not_ready(); });
    if (!ep.ok()) {
      print_error("scheduler", "--metrics / cluster.metrics: %s\n", ep.status().message().c_str());
      return 2;
    }
    endpoint = std::move(*ep);
    std::fprintf(stderr, "metrics: listening on http://%s/metrics\n", endpoint->address().c_str());
  }
  if (!a.port_file.empty()) {
    const std::string tmp = a.port_file + ".tmp";
    std::ofstream(tmp) << (*node)->port() << "\n";
    std::rename(tmp.c_str(), a.port_file.c_str());  // atomically: a reader never sees half a number
  }
  // A file is rewritten every second; standard output gets one report, on exit.
  wait_for_stop(stop_set, a.duration_s, **node, json.to_stdout() ? std::string() : a.json);
  (*node)->stop();
  const bool deposed = (*node)->deposed();
  endpoint.reset();
  if (json.to_stdout())
    return json.write("scheduler", (*node)->report().dump(2) + "\n") ? (deposed ? 3 : 0) : 1;
  if (json.enabled() && !write_report(**node, a.json)) {
    print_error("scheduler", "cannot write the report to %s\n", a.json.c_str());
    return 1;
  }
  if (deposed)
    std::fprintf(stderr,
                 "scheduler: deposed by a scheduler of a higher term; restart it to rejoin as a spare\n");
  return deposed ? 3 : 0;
}

}  // namespace

CLI::App* add_scheduler(CLI::App& app, int& exit_code) {
  static SchedulerArgs a;
  auto* cmd =
      app.add_subcommand("scheduler", "Run the cluster's scheduler (frontends and backends connect to it)");
  add_scheduler_options(cmd, a);
  cmd->callback([&exit_code] { exit_code = run_scheduler(a); });
  return cmd;
}

}  // namespace symphony::tools
