// `symphony loadgen` as a library: a cluster frontend (Client) that offers
// the workload of a simulator-style config (per-model rates, Poisson / gamma /
// uniform arrivals, Zipf popularity, rate changes, SLO overrides, or a trace)
// in real time through the load generator (symphony/load/open_loop.hpp, the
// cluster client as its target), prints the outcome table and returns the
// JSON report.
//
// Requests count when they are sent at or after the warm-up; every counted
// request ends exactly once at this frontend (sent == ok + late + dropped +
// errors). Emulated backends answer each request with the hash of its input:
// the report counts answers that do not match (output_mismatch). Same config
// and seed: the same requests at the same offsets as the simulator's.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>

#include "symphony/status.hpp"

namespace symphony::cluster {

struct ClusterLoadOptions {
  std::string scheduler;  // HOST:PORT; empty: the config's cluster.schedulers
  std::string config;     // the workload's config (its models must be the cluster's)
  std::string token;      // empty: SYMPHONY_CLUSTER_TOKEN or the config's
  std::string name = "loadgen";
  double duration_s = 0;  // 0: the config's duration
  double warmup_s = -1;   // < 0: the config's warm-up, at most a quarter of the duration
  double rate = 0;        // total offered requests/s, scaling the config's (0: as configured)
  double connect_timeout_s = 10;
  std::uint32_t input_bytes = 64;
  std::uint32_t max_pending = 65536;
  std::uint64_t seed = 0;  // 0: the config's
  // Each request's Triton priority, "N" or a mix "N:share,N:share"
  // (load/priority_mix.hpp); empty: none (the models' defaults). The report
  // then counts each model's outcomes by priority (by_priority).
  std::string priority;
  bool quiet = false;
  bool verbose = false;
  bool check_outputs = true;
};

// Runs the load: connects, offers the workload, drains, prints the outcome
// table to stdout (progress and warnings to stderr) and returns the report.
// Errors: kFailedPrecondition when the cluster was not ready within the
// connect timeout; any other code for a bad config, option or cluster
// (`symphony loadgen` exits 1 and 2 for them).
Result<nlohmann::json> run_cluster_load(const ClusterLoadOptions& options);

}  // namespace symphony::cluster
