// Re-partitioning at an epoch (paper §4.4; appendix "Disruption
// Minimization"): the models' sizes and move costs and the sub-clusters' caps
// stay from epoch to epoch; the measured rates, the current assignment and
// the disruption bound C_max change. EpochPartitioner holds what stays and
// turns one epoch's inputs into a plan: the assignment to apply from now on
// and the solver's result behind it. The simulator (simtool) and a scheduler
// process call it the same way.
//
// The plan's rules:
//  - when the solver finds nothing, keep the current assignment (every model
//    stays where it is; nothing moves), and say why. At the first placement
//    (no model placed yet) there is nothing to keep, so the plan has no
//    assignment and the caller must stop;
//  - when every model is placed and the current assignment is still feasible,
//    keep it unless the solver's gains at least `min_improvement`: lowers the
//    objective (the worst sub-cluster's deviation from the mean, a fraction
//    of the mean) or the RMS of all the sub-clusters' deviations by that much
//    (0.05: 5 % of an average sub-cluster's load). Rates measured over an
//    epoch are noisy; without this a small model can move back and forth
//    every epoch, each move a load and a drain. 0 takes any improvement.
// A solver that finds an assignment with nothing to move returns the current
// one, so "no change" costs nothing.
//
// Not part of the core: plain values, errors are exceptions (InputError for a
// malformed problem, as solve()).
//
//   partition::EpochPartitioner ep(models, partition::uniform_subclusters(4, kUnlimited, 4096), options);
//   partition::EpochPlan plan = ep.plan(rates, current, /*max_disruption=*/4);
//   if (plan.assignment.empty()) fail(plan.result.message());
#pragma once

#include <span>
#include <string>
#include <vector>

#include "symphony/partition/problem.hpp"
#include "symphony/partition/solver.hpp"

namespace symphony::partition {

struct EpochPlan {
  std::vector<int> assignment;  // the assignment from this epoch on; empty: none (first placement failed)
  bool kept = false;            // the solver found nothing and the current assignment stays
  bool held = false;   // the solver's assignment gained less than min_improvement: the current one stays
  double gain = 0;     // when held: the larger decrease, of the objective or of the RMS deviation
  Evaluation current;  // of the current assignment under this epoch's rates, when held
  Solution result;     // the solver's answer
};

class EpochPartitioner {
 public:
  // `models` give names, memory and move costs (their rates are ignored).
  // Throws InputError when a model or sub-cluster is malformed, or
  // min_improvement is negative or not finite.
  EpochPartitioner(std::vector<Model> models, std::vector<SubCluster> subclusters, Options options,
                   double memory_weight = 1, double min_improvement = 0);

  std::size_t num_models() const { return models_.size(); }
  std::size_t num_subclusters() const { return subclusters_.size(); }
  const Options& options() const { return options_; }
  double min_improvement() const { return min_improvement_; }

  // The problem of one epoch: these rates (requests/s, one per model), the
  // current assignment (one per model, kUnplaced for a model placed nowhere;
  // empty: none placed) and the bound (kUnlimited: none).
  Problem problem(std::span<const double> rates, std::span<const int> current, double max_disruption) const;

  // Solves the epoch's problem under the options and applies the rule above.
  EpochPlan plan(std::span<const double> rates, std::span<const int> current, double max_disruption) const;

 private:
  std::vector<Model> models_;
  std::vector<SubCluster> subclusters_;
  Options options_;
  double memory_weight_;
  double min_improvement_;
};

}  // namespace symphony::partition
