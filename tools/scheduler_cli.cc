// The options of `symphony scheduler` (scheduler_cli.hpp).
#include "scheduler_cli.hpp"

#include "json_report.hpp"
#include "symphony/policy.hpp"

namespace symphony::tools {

void add_scheduler_options(CLI::App* cmd, SchedulerArgs& a) {
  cmd->add_option("--listen", a.listen,
                  "HOST:PORT to listen on (port 0: any; see --port-file); with cluster.schedulers, its entry "
                  "(exit status 3: deposed by another scheduler; restart it as a spare)");
  cmd->add_option("config,--config", a.config, "cluster.yaml: the models, the policy and the cluster section")
      ->required();
  cmd->add_option("--model-control-mode", a.model_control_mode,
                  "none (default: the models are fixed at start), explicit (the frontends' repository "
                  "load and unload requests load, reload and unload models while the cluster serves) or "
                  "poll (the scheduler rescans the repository and does so itself; "
                  "docs/cluster.md#model-control)")
      ->check(CLI::IsMember({"none", "poll", "explicit"}));
  cmd->add_option("--repository-poll-secs", a.repository_poll_secs,
                  "poll mode: seconds between rescans of the repository (default 15)");
  cmd->add_option("--spare-models", a.spare_models,
                  "with --model-control-mode explicit or poll: how many models loaded while the cluster "
                  "serves it has room for, beyond those of its start (default 32; reserved at start; an "
                  "unloaded model's room goes to the next load that needs it, and a reload's replaced "
                  "version gives its back)");
  cmd->add_option("--model-repository", a.model_repository,
                  "take the models, SLOs and profiles from a Triton-layout repository, not the config's "
                  "models: (docs/cluster.md#running-from-a-model-repository)");
  cmd->add_option("--profile-device", a.profile_device,
                  "with --model-repository: read each model's <stem>.<device>.profile.yaml of this device "
                  "(cpu:0, cuda:0; default: the one profile beside each model file)");
  cmd->add_option("--policy", a.policy,
                  std::string(kPolicyHelp) + " (overrides the config; docs/policies.md)");
  cmd->add_option("--port-file", a.port_file, "write the bound port to this file once listening");
  add_json_option(cmd, a.json);
  add_deprecated_json_alias(cmd, "--report", a.report);
  cmd->add_option(
         "--metrics", a.metrics,
         "serve Prometheus /metrics, /healthz, /readyz on HOST:PORT (port 0: any free port, printed; "
         "overrides the config's cluster.metrics; docs/metrics.md)")
      ->envname("SYMPHONY_METRICS");
  cmd->add_option("--autoscale-window", a.autoscale_window_s,
                  "seconds of recent history the autoscaling advice in /metrics covers (default 30)");
  cmd->add_option("--duration", a.duration_s, "stop after this many seconds (default: until SIGINT/SIGTERM)");
  cmd->add_flag("--verbose", a.verbose, "log each connection's UCX transports and every delay update");
  cmd->footer(
      "The --json report holds the counters and the learned delays; a FILE is rewritten (atomically) "
      "every second and on exit.");
}

}  // namespace symphony::tools
