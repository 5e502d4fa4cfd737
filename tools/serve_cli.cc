// The options of `symphony serve` (serve_cli.hpp).
#include "serve_cli.hpp"

#include "json_report.hpp"
#include "symphony/policy.hpp"

namespace symphony::tools {

void add_serve_options(CLI::App* cmd, ServeArgs& a) {
  cmd->add_option(
      "config,--config", a.config,
      "serve config (YAML); optional with --model-repository (then it sets devices, policy, delays, "
      "...)");
  cmd->add_option("--model-repository", a.model_repository,
                  "serve the models of a model repository in Triton's layout (DIR/<model>/config.pbtxt, "
                  "DIR/<model>/<version>/model.pt; docs/repository.md); without it and without a config: "
                  "/mnt/models when it exists (KServe's mount)");
  cmd->add_option("--model-control-mode", a.model_control_mode,
                  "none | poll | explicit (default none): none and poll load every model at start and refuse "
                  "load/unload requests; poll also rescans the repository; explicit loads --load-model and "
                  "what clients ask for")
      ->check(CLI::IsMember({"none", "poll", "explicit"}));
  cmd->add_option("--load-model", a.load_models,
                  "explicit mode: a model to load at start (repeatable; '*' alone: every model)")
      ->allow_extra_args(false);
  cmd->add_option("--repository-poll-secs", a.repository_poll_secs,
                  "poll mode: seconds between rescans of the repository (default 15)");
  cmd->add_option("--default-slo-ms", a.default_slo_ms,
                  "the latency SLO of a repository model whose config has no symphony.slo_ms parameter "
                  "(default 100)");
  cmd->add_option("--policy", a.policy,
                  std::string(kPolicyHelp) +
                      "; serve also runs triton[:...], Triton's dynamic batcher (overrides the config; "
                      "docs/policies.md, docs/serving.md)");
  cmd->add_option("--gather", a.gather, std::string(kGatherHelp) + " (overrides the config)");
  cmd->add_option(
      "--devices", a.devices,
      "auto | cpu[:N] | cuda[:i],... | emulated:N | cuda-emulated[:i],... (overrides the config)");
  cmd->add_option("--pinned-memory-pool-byte-size", a.pinned_pool_bytes,
                  "bytes of the host memory pool requests' inputs land in at arrival (Triton's flag; pinned "
                  "when a device is a CUDA GPU); a request it cannot hold gets 429 / RESOURCE_EXHAUSTED. "
                  "0: each model's max batch x sample bytes x 8, at least 64 MiB, grown as models are "
                  "loaded while serving, up to 4 GiB (overrides the config's pinned_memory_pool_byte_size)");
  cmd->add_option("--duration", a.duration_s, "seconds of load (overrides the config)");
  cmd->add_option(
         "--recalibrate", a.recalibrate,
         "on | off: whether model profiles follow measured batch times (overrides the config's recalibrate)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option(
         "--overlap", a.overlap,
         "auto | on | off: dispatch each batch ahead by its learned staging and launch cost, so that "
         "it overlaps the batch before (auto: on when every device is a CUDA GPU; overrides the "
         "config's overlap; docs/serving.md)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  add_json_option(cmd, a.json_out);
  cmd->add_option(
         "--metrics", a.metrics,
         "serve Prometheus /metrics, /healthz, /readyz on HOST:PORT (port 0: any free port, printed; "
         "overrides the config's metrics:; docs/metrics.md)")
      ->envname("SYMPHONY_METRICS");
  cmd->add_option("--metrics-linger", a.metrics_linger_s,
                  "keep the metrics endpoint up this many seconds after the report (SIGINT/SIGTERM ends it)");
  cmd->add_option("--autoscale-window", a.autoscale_window_s,
                  "seconds of recent history the autoscaling advice in /metrics covers (default 30)");
  cmd->add_flag("--quiet", a.quiet, "no progress line");
  add_front_options(cmd, a.front,
                    "protocol requests inside the server at once; more get 429 at once (default 8192)");
  cmd->add_flag("--no-load", a.no_load,
                "ignore the config's load: section and serve protocol requests until SIGINT/SIGTERM");
}

}  // namespace symphony::tools
