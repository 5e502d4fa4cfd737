// `symphony scheduler`'s command line: the flags it takes (SchedulerArgs)
// and their definitions and help (add_scheduler_options), apart from
// running the scheduler with them (cmd_scheduler.cc).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace symphony::tools {

// The flags of `symphony scheduler`, as given.
struct SchedulerArgs {
  std::string listen = "0.0.0.0:7000";
  std::string config;
  std::string port_file;
  std::string json;
  std::string report;  // deprecated --report FILE: --json FILE
  std::string policy;
  std::string metrics;
  std::string model_repository;
  std::string model_control_mode = "none";
  double repository_poll_secs = 15;
  std::uint32_t spare_models = 32;
  std::string profile_device;
  double autoscale_window_s = 30;
  double duration_s = 0;
  bool verbose = false;
};

// Adds the options of `symphony scheduler` (--listen, --config, ...) and its
// help footer to `cmd`; the parse stores them in `a`, which outlives it.
void add_scheduler_options(CLI::App* cmd, SchedulerArgs& a);

}  // namespace symphony::tools
