// How good an assignment of models to sub-clusters is, and whether it is
// allowed: per-sub-cluster loads, the paper's imbalance factors
// ((max - min) / avg of rate and of static memory across sub-clusters), the
// MILP's objective, the moves against the current assignment and their cost,
// and every violated constraint. Every method's result is measured by this
// one function, so MILP, greedy and random search compare like with like.
//
//   Result<partition::Evaluation> e = partition::evaluate(problem, assignment);
//   if (e.ok() && !e->feasible()) std::puts(e->violations.front().c_str());
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "symphony/partition/problem.hpp"
#include "symphony/status.hpp"

namespace symphony::partition {

struct SubClusterLoad {
  std::size_t models = 0;
  double rate = 0;                // sum of r_i
  double static_memory = 0;       // sum of s_i
  double max_dynamic_memory = 0;  // max of d_i
  // What each backend of the sub-cluster needs: static plus the largest dynamic.
  double memory() const { return static_memory + max_dynamic_memory; }
};

// A model whose sub-cluster changes: from kUnplaced for a new model.
struct Move {
  std::size_t model = 0;
  int from = kUnplaced;
  int to = 0;
  double cost = 0;  // c_{i,from} + c_{i,to} (c_{i,to} alone for a new model)
};

struct Evaluation {
  std::vector<SubClusterLoad> loads;    // one per sub-cluster
  double rate_imbalance = 0;            // (max - min) / avg of the rates; 0 when all rates are 0
  double memory_imbalance = 0;          // the same for static memory
  double rate_spread = 0;               // max_j |R_j - avg| / avg: the MILP's Delta R, normalised
  double memory_spread = 0;             // max_j |S_j - avg| / avg: Delta S, normalised
  double objective = 0;                 // rate_spread + w * memory_spread
  double disruption = 0;                // sum_ij c_ij |x_ij - x'_ij|
  std::vector<Move> moves;              // in model order
  std::vector<std::string> violations;  // every violated cap or bound; empty: feasible

  bool feasible() const { return violations.empty(); }
};

// Relative tolerance of the caps and the disruption bound (solvers work in
// floating point; a load within this fraction of its cap is within it).
inline constexpr double kCapTolerance = 1e-7;

// Measures an assignment (a sub-cluster index per model); kInvalidArgument
// when the assignment's size is not the number of models or an entry is out
// of [0, num_subclusters).
// REQUIRES: validate(p) passes.
Result<Evaluation> evaluate(const Problem& p, std::span<const int> assignment);

}  // namespace symphony::partition
