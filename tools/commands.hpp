// Subcommands of the `symphony` tool. Each add_<name>() registers one
// subcommand on the app; its callback stores the process exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace symphony::tools {

// Prints the paper's worked example (§3.3) as scheduled by the real engine.
CLI::App* add_example(CLI::App& app, int& exit_code);

// Runs a simulator experiment config: one run, a goodput search or a
// minimum-GPU search.
CLI::App* add_simulate(CLI::App& app, int& exit_code);

}  // namespace symphony::tools
