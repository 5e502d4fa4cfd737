// The `subclusters:` section of a config (docs/simulator.md, docs/cluster.md)
// as settings of symphony::partition: how many sub-clusters, their GPUs, the
// epoch, and how the models are placed every epoch (method, limits, caps,
// disruption bound, the models' memory); and the partitioner (the core's
// contract, symphony/partitioner.hpp) that the simulator and a cluster's
// scheduler call with it. symphony::config parses the section; the solver
// is wired in here, so that neither caller depends on it.
//
// Not part of the core: errors are a Status (kInvalidArgument).
//
//   SYMPHONY_ASSIGN_OR_RETURN(symphony::Partitioner p,
//                             partition::make_partitioner(config.subclusters.value(), config.spec, 8));
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "symphony/experiment_spec.hpp"
#include "symphony/partition/problem.hpp"
#include "symphony/partitioner.hpp"
#include "symphony/status.hpp"
#include "symphony/subcluster.hpp"

namespace symphony::partition {

// What partitioning knows of a model besides its rate (MiB; docs/partition.md).
struct ModelMemory {
  double static_mib = 0;   // weights, on every backend of its sub-cluster
  double dynamic_mib = 0;  // runtime memory at its largest batch
  double move_cost = 1;    // c_i: loading it into, or unloading it from, a sub-cluster
};

// What the partitioner balances: the models' request rates (the paper's r_i),
// or their GPU time (rate x the GPU seconds a request costs at the staggered
// bound's batch on a sub-cluster of the mean size), which is what equal
// sub-clusters need balanced when models differ in cost.
enum class Balance : std::uint8_t { kRate, kGpuTime };
const char* to_string(Balance b);

struct SubClusterConfig {
  SubClusterSpec spec;             // count, gpus, epoch, max_disruption, series_step
  std::string method = "greedy";   // partition::Method: greedy, milp or random
  double time_limit_s = 10;        // CPU seconds per solve
  std::int64_t node_limit = -1;    // milp: branch-and-bound nodes (-1: none)
  std::int64_t sample_limit = -1;  // random: assignments drawn (-1: none)
  bool warm_start = false;         // milp: start from greedy's solution
  std::uint64_t seed = 1;
  double memory_cap_mib = std::numeric_limits<double>::infinity();  // S_max of every sub-cluster
  double rate_cap_rps = std::numeric_limits<double>::infinity();    // R_max of every sub-cluster
  double memory_weight = 1;                                         // w
  double cost_scale = 1;                                            // c_ij = move_cost x cost_scale
  Balance balance = Balance::kRate;
  // An epoch moves models only when that lowers the objective (the worst
  // sub-cluster's deviation, as a fraction of an average one's load) or the
  // RMS of all the deviations by at least this much
  // (partition::EpochPartitioner); 0: any improvement.
  double min_improvement = 0.05;
  std::string model_memory;         // the table as the config names it ("": none)
  std::string model_memory_file;    // the file it was read from
  std::vector<ModelMemory> memory;  // per model (parallel to the spec's models)
};

// The partitioner of `c` for the experiment `e`: symphony::partition every
// epoch (EpochPartitioner), with the rule that a solve that finds nothing
// keeps the current assignment. Its report lines and numbers hold no CPU
// times, so a run stays deterministic where the solver is (greedy; milp and
// random when they stop on their node or sample limits).
// kInvalidArgument when the method is unknown or unavailable (milp without
// CBC), naming subclusters.method, or a model's memory or a cap is malformed.
Result<symphony::Partitioner> make_partitioner(const SubClusterConfig& c, const ExperimentSpec& e,
                                               std::uint32_t gpus);

}  // namespace symphony::partition
