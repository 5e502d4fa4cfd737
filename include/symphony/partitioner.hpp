// The partitioner contract of sub-clusters (subcluster.hpp): what a
// partitioner is asked at an epoch (the rates, the current assignment, the
// disruption bound) and what it answers (an assignment and a line for the
// report). The simulator (sim/subcluster.hpp) and a cluster's scheduler call
// one; symphony::partition makes one from a `subclusters:` config
// (partition/subclusters.hpp: make_partitioner), so that neither caller
// depends on a solver.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "symphony/status.hpp"
#include "symphony/subcluster.hpp"
#include "symphony/time.hpp"

namespace symphony {

// What the partitioner is asked at an epoch.
struct EpochRequest {
  std::uint32_t epoch = 0;    // 0: the initial placement, at time 0
  TimePoint time;             // when the new assignment takes effect
  Duration measured_over;     // the interval the rates were measured over; zero at epoch 0 (expected rates)
  std::vector<double> rates;  // per model, requests per second
  std::vector<int> current;   // per model, its sub-cluster now (kNoSubCluster at epoch 0)
  double max_disruption = INFINITY;  // C_max; unbounded at epoch 0
  std::vector<std::uint32_t> gpus;   // per sub-cluster
  // Per model, whether it stays in its current sub-cluster (placed by the
  // devices it may run on): it counts in that sub-cluster's load and is not
  // moved. Empty: none.
  std::vector<bool> pinned;
  // Per model, per sub-cluster, whether it may go there (a model that runs
  // on some devices only goes where one of them is). Empty, or an empty
  // row: anywhere.
  std::vector<std::vector<bool>> permitted;
};

// The partitioner's answer.
struct EpochDecision {
  std::vector<int> assignment;  // per model, in [0, L); empty: keep the current one (not at epoch 0)
  std::string status;           // one line for the report ("greedy: feasible, objective 0.01")
  std::vector<std::pair<std::string, double>> stats;  // numbers for the report (objective, imbalance, ...)
};

using Partitioner = std::function<Result<EpochDecision>(const EpochRequest&)>;

}  // namespace symphony
