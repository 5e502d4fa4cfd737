// Re-partitioning at an epoch (paper §4.4; appendix "Disruption Minimization"). EpochPartitioner holds
// what stays from epoch to epoch (the models' sizes and move costs, the sub-clusters' caps, the options)
// and turns one epoch's measured rates, current assignment and bound C_max into a plan: the assignment
// to apply from now on and the solver's result behind it (docs/partition.md#the-library).
//
// The plan's rules:
//  - when the solver finds nothing, keep the current assignment and say why; at the first placement
//    there is nothing to keep: the plan has no assignment and the caller must stop;
//  - when every model is placed and the current assignment is still feasible, keep it unless the
//    solver's lowers the objective or the RMS of the sub-clusters' deviations by `min_improvement`.
// Not part of the core: plain values; errors are a Status (kInvalidArgument for a malformed problem,
// as solve() returns them).
//
//   SYMPHONY_ASSIGN_OR_RETURN(partition::EpochPartitioner ep,
//                             partition::EpochPartitioner::create(models, uniform_subclusters(4, kUnlimited, 4096),
//                                                                 options));
//   SYMPHONY_ASSIGN_OR_RETURN(partition::EpochPlan plan, ep.plan(rates, current, /*max_disruption=*/4));
//   if (plan.assignment.empty()) fail(plan.result.message());
#pragma once

#include <span>
#include <string>
#include <vector>

#include "symphony/partition/problem.hpp"
#include "symphony/partition/solver.hpp"
#include "symphony/status.hpp"

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
  // kInvalidArgument when a model or sub-cluster is malformed, or
  // min_improvement is negative or not finite.
  static Result<EpochPartitioner> create(std::vector<Model> models, std::vector<SubCluster> subclusters,
                                         Options options, double memory_weight = 1,
                                         double min_improvement = 0);

  std::size_t num_models() const { return models_.size(); }
  std::size_t num_subclusters() const { return subclusters_.size(); }
  const Options& options() const { return options_; }
  double min_improvement() const { return min_improvement_; }

  // The problem of one epoch: these rates (requests/s, one per model), the
  // current assignment (one per model, kUnplaced for a model placed nowhere;
  // empty: none placed), the bound (kUnlimited: none) and the models that
  // stay where they are (Problem::pinned; empty: none) and the sub-clusters
  // each may go to (Problem::permitted; empty: any); kInvalidArgument when
  // the sizes are not one per model.
  Result<Problem> problem(std::span<const double> rates, std::span<const int> current, double max_disruption,
                          const std::vector<bool>& pinned = {},
                          const std::vector<std::vector<bool>>& permitted = {}) const;

  // Solves the epoch's problem under the options and applies the rule above;
  // solve()'s errors.
  Result<EpochPlan> plan(std::span<const double> rates, std::span<const int> current, double max_disruption,
                         const std::vector<bool>& pinned = {},
                         const std::vector<std::vector<bool>>& permitted = {}) const;

 private:
  EpochPartitioner(std::vector<Model> models, std::vector<SubCluster> subclusters, Options options,
                   double memory_weight, double min_improvement);

  std::vector<Model> models_;
  std::vector<SubCluster> subclusters_;
  Options options_;
  double memory_weight_;
  double min_improvement_;
};

}  // namespace symphony::partition
