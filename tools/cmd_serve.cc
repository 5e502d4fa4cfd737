// `symphony serve <config.yaml>` and `symphony serve --model-repository DIR
// [config.yaml]`: parses the flags (serve_cli.hpp) and runs the serve application
// (symphony/serve/app.hpp): the models on the configured devices (the YAML's
// `models:`, a model repository's, or both; docs/repository.md),
// the protocol front (--http, --grpc) until SIGINT/SIGTERM, or the config's
// built-in load for its duration with a live progress line; then the report
// (tables on standard output, --json for the JSON). With --metrics (or the
// config's `metrics:`) it serves /metrics, /healthz and /readyz throughout.
// Given neither a config nor a repository, it serves /mnt/models when that
// folder exists (where KServe mounts a model's storage; docs/deploy.md).
#include <csignal>
#include <cstdio>
#include <limits>

#include "commands.hpp"
#include "front_cli.hpp"
#include "progress.hpp"
#include "serve_cli.hpp"
#include "symphony/serve/app.hpp"
#include "symphony/serve/builtin_load.hpp"
#include "symphony/config/serve_config.hpp"
#include "symphony/triton_batcher.hpp"

namespace symphony::tools {
namespace {

using json = nlohmann::json;
using config::ServeConfig;
using serve::ServeApp;

// Applies the command line's overrides to the config; exit code 2 on a bad one.
int apply_overrides(const ServeArgs& a, ServeConfig& cfg) {
  if (!a.policy.empty()) {
    auto p = parse_policy(a.policy);
    if (p.ok() && !check_runs_in_runtime(*p).ok()) p = check_runs_in_runtime(*p);
    if (!p.ok()) return print_error("serve", "--policy: %s\n", p.status().message().c_str()), 2;
    cfg.policy = *p;
  }
  if (!a.gather.empty()) {
    auto g = parse_gather(a.gather);
    if (!g.ok()) return print_error("serve", "--gather: %s\n", g.status().message().c_str()), 2;
    cfg.policy.gather = *g;
  }
  if (!a.devices.empty()) cfg.devices = a.devices;
  if (!a.metrics.empty()) cfg.metrics = a.metrics;
  if (!(a.autoscale_window_s > 0))
    return print_error("serve", "--autoscale-window must be a positive number of seconds\n"), 2;
  if (!a.recalibrate.empty()) cfg.recalibration.enabled = a.recalibrate == "on";
  if (!a.overlap.empty()) cfg.overlap = a.overlap;
  if (a.pinned_pool_bytes != ServeArgs::kUnset) cfg.pinned_memory_pool_byte_size = a.pinned_pool_bytes;
  if (a.duration_s > 0) {
    cfg.duration_s = a.duration_s;
    cfg.warmup_s = std::min(cfg.warmup_s, a.duration_s / 4);
  }
  return 0;
}

int run_serve(ServeArgs a) {
  JsonReport json_report(a.json_out);  // first: with --json -, stdout carries the report alone
  std::string note;
  auto sources = serve::serve_repository(!a.config.empty(), a.model_repository, a.model_control_mode,
                                         a.load_models, a.repository_poll_secs, a.default_slo_ms, &note);
  if (!sources.ok()) return print_error("serve", "%s\n", sources.status().message().c_str()), 2;
  if (!note.empty()) std::fprintf(stderr, "serve: %s\n", note.c_str());
  const bool repository = sources->has_value();
  serve::RepositoryOptions repo;
  if (repository) {
    repo = std::move(**sources);
    repo.log = [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); };
  }
  // No file: the config's defaults (models from the repository alone).
  Result<ServeConfig> cfg = a.config.empty()
                                ? config::parse_serve_config("", "(none)", "", false)
                                : config::load_serve_config(a.config, /*models_required=*/!repository);
  if (!cfg.ok()) return print_error("serve", "%s\n", cfg.status().message().c_str()), 2;
  if (int rc = apply_overrides(a, *cfg)) return rc;
  // With load: the built-in generator drives the models for the configured
  // time; without it (or with --no-load) serve answers protocol requests.
  const bool generate = cfg->has_load && !a.no_load;
  if (!generate && !a.front.any())
    return print_error(
               "serve",
               "%s has no load: section%s, so serve answers Open Inference Protocol requests: give --http "
               "HOST:PORT and/or --grpc HOST:PORT (docs/front.md)\n",
               a.config.empty() ? "--model-repository" : a.config.c_str(),
               a.no_load ? " in use (--no-load)" : ""),
           2;
  // Serving until a signal: blocked before any thread starts (front_cli.hpp).
  sigset_t stop_signals{};
  if (!generate) stop_signals = block_stop_signals();
  auto created = ServeApp::create(serve::server_options(*cfg));
  if (!created.ok()) return print_error("serve", "%s\n", created.status().message().c_str()), 2;
  ServeApp& app = **created;
  if (!cfg->metrics.empty()) {
    if (Status s = app.start_metrics({cfg->metrics, Duration::from_seconds(a.autoscale_window_s), 0.01});
        !s.ok())
      return print_error("serve", "--metrics / metrics: %s\n", s.message().c_str()), 2;
    std::fprintf(stderr, "metrics: listening on %s\n", app.metrics_url().c_str());
  }
  std::fprintf(stderr, "devices: %s; policy: %s; gathering: %s\n",
               server::device_names(app.server().devices()).c_str(), cfg->policy.to_string().c_str(),
               cfg->policy.is_peer() ? "Triton's own" : std::string(to_string(cfg->policy.gather)).c_str());
  Result<std::vector<server::ModelOptions>> models = serve::config_models(*cfg);
  if (!models.ok()) return print_error("serve", "%s\n", models.status().message().c_str()), 2;
  for (const server::ModelOptions& m : *models)
    if (Status s = app.add_model(m); !s.ok()) return print_error("serve", "%s\n", s.message().c_str()), 1;
  if (repository) {
    std::fprintf(stderr, "model repository: %s (model control: %s)\n", repo.dir.c_str(),
                 a.model_control_mode.c_str());
    if (Status s = app.serve_repository(repo); !s.ok())
      return print_error("serve", "%s\n", s.message().c_str()), 2;
  }
  if (Status s = app.start(); !s.ok()) return print_error("serve", "%s\n", s.message().c_str()), 1;
  if (Status s = app.start_input_pool(cfg->pinned_memory_pool_byte_size); !s.ok()) {
    app.stop(StopMode::kCancel);
    return print_error("serve", "--pinned-memory-pool-byte-size: %s\n", s.message().c_str()), 2;
  }
  if (const auto pool = app.input_pool())
    std::fprintf(stderr, "host memory pool: %s, %s (%s; docs/front.md#the-host-memory-pool)\n",
                 front::byte_size_string(pool->byte_size()).c_str(),
                 pool->pinned() ? "pinned" : "plain memory (no CUDA device)",
                 cfg->pinned_memory_pool_byte_size
                     ? "as given"
                     : "default: each model's max batch x sample bytes x 8, grown as models are loaded");
  if (a.front.any()) {
    if (Status s = app.start_front({a.front.listen_options(), a.front.max_inflight, a.front.port_file});
        !s.ok()) {
      app.stop(StopMode::kCancel);
      return print_error("serve", "%s\n", s.message().c_str()), 2;
    }
    std::fprintf(
        stderr, "front: listening on %s (Open Inference Protocol; docs/front.md)%s\n",
        app.listeners()->where().c_str(),
        app.listeners()->http_max_connections()
            ? (", up to " + std::to_string(app.listeners()->http_max_connections()) + " HTTP connections")
                  .c_str()
            : "");
  }
  json report;
  if (generate) {
    std::fprintf(stderr, "sending for %.0f s (the first %.0f s are warm-up)\n", cfg->duration_s,
                 cfg->warmup_s);
    ProgressLine progress;
    const serve::LoadRun run = serve::run_builtin_load(
        app.server(), *cfg,
        [&](const std::string& line) {
          if (!a.quiet) progress.update(line);
        },
        app.input_pool());
    progress.finish();
    app.stop(StopMode::kDrain);
    report = serve::load_report(run, *cfg);
    if (app.front()) report["front"] = app.front_report(run.at_end, run.at_end.elapsed.to_seconds());
  } else {
    std::fprintf(stderr, "serving until SIGINT or SIGTERM (Ctrl-C)\n");
    const int sig =
        wait_for_stop(stop_signals, app.front(), a.quiet, std::numeric_limits<double>::infinity());
    std::fprintf(stderr, "%s: stopping (new requests get 503; queued ones run or expire)\n",
                 sig == SIGINT ? "SIGINT" : "SIGTERM");
    app.stop(StopMode::kDrain);
    const server::ServerStats fin = app.stats();
    report = app.front_report(fin, fin.elapsed.to_seconds());
    report.update(serve::served_report(fin));
  }
  report["host_memory_pool"] = app.input_pool_report();
  report["config"] = a.config;
  if (repository) report["model_repository"] = repo.dir;
  if (json_report.enabled() && !json_report.write("serve", report.dump(2) + "\n")) return 1;
  if (!app.metrics_url().empty() && a.metrics_linger_s > 0) {
    // Until the linger ends or SIGINT/SIGTERM: a last scrape sees the final counts.
    std::fflush(stdout);
    std::fprintf(stderr, "metrics: serving the final counts for %.0f s more (SIGINT/SIGTERM to stop)\n",
                 a.metrics_linger_s);
    stop_signals = block_stop_signals();
    (void)wait_for_stop(stop_signals, app.front(), /*quiet=*/true, a.metrics_linger_s);
  }
  return 0;
}

}  // namespace

CLI::App* add_serve(CLI::App& app, int& exit_code) {
  static ServeArgs a;
  auto* cmd = app.add_subcommand("serve",
                                 "Serve TorchScript models on the configured devices: to Open Inference "
                                 "Protocol clients (--http, --grpc), "
                                 "under the config's generated load, or both");
  add_serve_options(cmd, a);
  cmd->callback([&exit_code] { exit_code = run_serve(a); });
  return cmd;
}

}  // namespace symphony::tools
