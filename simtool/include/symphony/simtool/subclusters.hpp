// The report's sub-cluster parts of a simulation (docs/simulator.md): the
// epochs, per-sub-cluster summaries and autoscaling advice, and the
// per-model series. The `subclusters:` section itself and the partitioner
// the simulator calls with it are symphony::partition's
// (partition/subclusters.hpp).
//
// Not part of the core: uses nlohmann-json.
#pragma once

#include <nlohmann/json.hpp>

#include "symphony/experiment_spec.hpp"
#include "symphony/partition/subclusters.hpp"
#include "symphony/sim/subcluster_experiment.hpp"

namespace symphony::simtool {

// The report's `subclusters` object: settings, epochs (rates, the solver's
// answer, moves and their drain times) and one summary per sub-cluster with
// its autoscaling windows.
nlohmann::json subclusters_json(const partition::SubClusterConfig& c, const ExperimentSpec& e,
                                const sim::SubClusterRunResult& r);

// The report's `series` object: per model and step, requests arrived, ok and
// bad (counted by arrival time).
nlohmann::json series_json(const ExperimentSpec& e, const sim::ModelSeries& s);

}  // namespace symphony::simtool
