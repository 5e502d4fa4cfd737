// `symphony serve`'s command line: the flags it takes (ServeArgs) and their
// definitions and help (add_serve_options), apart from running the serve
// application with them (cmd_serve.cc).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "front_cli.hpp"

namespace symphony::tools {

// The flags of `symphony serve`, as given.
struct ServeArgs {
  std::string config, policy, gather, devices;
  std::string recalibrate;  // on | off: overrides the config
  std::string overlap;      // auto | on | off: overrides the config
  double duration_s = 0;
  std::string json_out;
  std::string metrics;          // overrides the config's `metrics:`
  double metrics_linger_s = 0;  // keep /metrics up this long after the report
  double autoscale_window_s = 30;
  bool quiet = false;
  FrontArgs front;       // --http, --grpc, --port-file, ...
  bool no_load = false;  // serve protocol requests even when the config has load:
  // A model repository in Triton's layout (docs/repository.md).
  std::string model_repository;
  std::string model_control_mode = "none";
  std::vector<std::string> load_models;
  double repository_poll_secs = 15;
  double default_slo_ms = 100;
  // --pinned-memory-pool-byte-size; kUnset: the config's.
  static constexpr std::uint64_t kUnset = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t pinned_pool_bytes = kUnset;
};

// Adds the options of `symphony serve` (the config, --model-repository, the
// overrides of the config, the front's options, ...) to `cmd`; the parse
// stores them in `a`, which outlives it.
void add_serve_options(CLI::App* cmd, ServeArgs& a);

}  // namespace symphony::tools
