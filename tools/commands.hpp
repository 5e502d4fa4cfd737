// Subcommands of the `symphony` tool. Each add_<name>() registers one
// subcommand on the app; its callback stores the process exit code.
#pragma once

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "json_report.hpp"

namespace symphony::tools {

// Prints the paper's worked example (§3.3) as scheduled by the real engine.
CLI::App* add_example(CLI::App& app, int& exit_code);

// Runs a simulator experiment config: one run, a goodput search or a
// minimum-GPU search.
CLI::App* add_simulate(CLI::App& app, int& exit_code);

// Runs the multi-threaded runtime in scheduler-only mode with emulated GPUs
// and open-loop load generators; prints throughput, goodput, bad rate and
// dispatch lag.
CLI::App* add_stress(CLI::App& app, int& exit_code);

// Partitions models across sub-clusters (MILP with CBC, greedy or random
// search) and prints the assignment and its imbalance factors.
CLI::App* add_partition(CLI::App& app, int& exit_code);
#ifdef SYMPHONY_HAVE_RDMA
// The cluster (extensions/rdma): the scheduler process, a backend, and a
// load-generating frontend.
CLI::App* add_scheduler(CLI::App& app, int& exit_code);
CLI::App* add_backend(CLI::App& app, int& exit_code);
CLI::App* add_loadgen(CLI::App& app, int& exit_code);
#endif
#ifdef SYMPHONY_HAVE_CLUSTER_FRONT
// The cluster's protocol frontend: the Open Inference Protocol over HTTP and
// gRPC, submitted through the cluster client.
CLI::App* add_frontend(CLI::App& app, int& exit_code);
#endif

#ifdef SYMPHONY_HAVE_FRONT_CLIENT
// Drives an Open Inference Protocol endpoint (HTTP or gRPC) with generated
// load and reports each request's outcome like serve.
CLI::App* add_load(CLI::App& app, int& exit_code);
#endif

#ifdef SYMPHONY_HAVE_SERVER
// Measures a TorchScript model's latency profile on a device.
CLI::App* add_profile(CLI::App& app, int& exit_code);
// Serves TorchScript models under generated load and reports.
CLI::App* add_serve(CLI::App& app, int& exit_code);
#endif

}  // namespace symphony::tools
