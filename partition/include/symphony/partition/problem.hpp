// The sub-cluster partitioning problem (paper §4.4, appendix "Global
// Partitioning Algorithm"): which models go to which sub-cluster, so that
// every backend of a sub-cluster can hold all of its models, request rate and
// static memory are balanced across sub-clusters, and a re-partition moves
// little compared with the current assignment.
//
// A Problem holds the appendix's inputs: per model i its rate r_i, static
// memory s_i (weights, resident on every backend of its sub-cluster) and
// dynamic memory d_i (runtime memory while it executes, of which a backend
// needs only the largest of its models'); per sub-cluster j its rate cap
// R_max,j (what its dispatcher takes) and memory cap S_max,j (memory of each
// of its backends); the current assignment x' and the move costs c_ij with
// the disruption bound C_max. Units are the caller's: memory caps in the
// unit of the models' memory sizes, rate caps in the unit of their rates
// (the CSV reader uses MiB and requests/s).
//
// Not part of the core: plain values; a malformed problem or option is a
// Status (kInvalidArgument) whose message names the model and the field.
//
//   partition::Problem p;
//   p.models = {{"resnet50", 400, 98, 160}, {"bert", 50, 420, 390}};
//   p.subclusters = partition::uniform_subclusters(2, /*rate_cap=*/1000, /*memory_cap=*/11264);
//   for (const auto& c : partition::find_conflicts(p)) std::puts(c.message.c_str());
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "symphony/status.hpp"

namespace symphony::partition {

// No cap, no disruption bound.
inline constexpr double kUnlimited = std::numeric_limits<double>::infinity();
// The current sub-cluster of a model that has none (a new model).
inline constexpr int kUnplaced = -1;

struct Model {
  std::string name;           // unique within a Problem
  double rate = 0;            // r_i: requests per second
  double static_memory = 0;   // s_i: weights, loaded on every backend of its sub-cluster
  double dynamic_memory = 0;  // d_i: runtime memory (activations, workspace) while it executes
  double move_cost = 1;       // loading it into, or unloading it from, one sub-cluster costs
                              // move_cost * SubCluster::cost_scale
};

struct SubCluster {
  double rate_cap = kUnlimited;    // R_max,j: the most requests/s its dispatcher takes
  double memory_cap = kUnlimited;  // S_max,j: memory of each of its backends
  double cost_scale = 1;           // c_ij = Model::move_cost * cost_scale (e.g. its number of backends)
};

// L sub-clusters with the same caps.
std::vector<SubCluster> uniform_subclusters(std::size_t count, double rate_cap = kUnlimited,
                                            double memory_cap = kUnlimited, double cost_scale = 1);

struct Problem {
  std::vector<Model> models;
  std::vector<SubCluster> subclusters;
  // x': the current sub-cluster of each model (parallel to `models`), kUnplaced for
  // a model that has none yet; empty: no current assignment (every model is new).
  std::vector<int> current;
  // Per model (parallel to `models`), whether it stays in its current
  // sub-cluster whatever the balance (a model placed by the devices it may
  // run on, not by the partition): it counts in its sub-cluster's load and
  // is never moved. Empty: none is. A pinned model needs a current one.
  std::vector<bool> pinned;
  // Per model (parallel to `models`), per sub-cluster (parallel to
  // `subclusters`), whether it may go there: a model that runs on some
  // devices only (an instance_group) goes only where one of them is. Empty,
  // or an empty row: anywhere. A row needs one sub-cluster it may go to.
  std::vector<std::vector<bool>> permitted;
  // C_max: bound on sum_ij c_ij |x_ij - x'_ij|. Moving a model from j to k costs
  // c_ij + c_ik (an unload and a load); placing a new model in k costs c_ik.
  double max_disruption = kUnlimited;
  // w: weight of the memory spread against the rate spread in the objective
  // (both are normalised by their averages; see solver.hpp).
  double memory_weight = 1;

  std::size_t size() const { return models.size(); }
  std::size_t num_subclusters() const { return subclusters.size(); }
  // The current sub-cluster of model i, or kUnplaced.
  int current_of(std::size_t i) const { return current.empty() ? kUnplaced : current[i]; }
  // c_ij.
  double cost(std::size_t i, std::size_t j) const { return models[i].move_cost * subclusters[j].cost_scale; }
  // What placing model i in sub-cluster j costs against the current
  // assignment: 0 where it is now, else the load in j plus the unload from
  // where it is (if anywhere).
  double placement_cost(std::size_t i, std::size_t j) const;
  // Whether model i alone fits sub-cluster j (rate and memory caps).
  bool fits_alone(std::size_t i, std::size_t j) const;
  bool is_pinned(std::size_t i) const { return !pinned.empty() && pinned[i]; }
  bool any_pinned() const { return std::find(pinned.begin(), pinned.end(), true) != pinned.end(); }
  // Whether model i is restricted to some sub-clusters, and whether it may go to j.
  bool restricted(std::size_t i) const { return !permitted.empty() && !permitted[i].empty(); }
  bool permits(std::size_t i, std::size_t j) const { return !restricted(i) || permitted[i][j]; }
  bool any_restricted() const;
  // Whether model i may go to sub-cluster j: it fits there alone, it is
  // permitted there, and it is not pinned to another.
  bool allowed(std::size_t i, std::size_t j) const {
    return fits_alone(i, j) && permits(i, j) && (!is_pinned(i) || current_of(i) == static_cast<int>(j));
  }
};

// Checks that the problem is well formed: kInvalidArgument for a malformed
// one (negative rate, duplicate name, current sub-cluster out of range, ...),
// the message naming the model and the field.
Status validate(const Problem& p);

// The constraint families of the MILP that can make a problem infeasible
// (each model in exactly one sub-cluster always holds).
enum class Constraint { kRateCap, kMemoryCap, kDisruption };
const char* to_string(Constraint c);

// One reason the problem has no feasible assignment.
struct Conflict {
  std::vector<Constraint> constraints;  // the families involved
  std::optional<std::size_t> model;     // the model it is pinned to, where one is
  std::string message;                  // names the model, the constraint and the numbers
};

// The causes of infeasibility found by cheap checks, before any solver runs:
// a model that fits no sub-cluster alone (larger than every memory cap, a
// rate over every rate cap; a pinned one: its own; a restricted one: those
// it may go to), the total rate over the
// sum of the rate caps, the total static memory plus the largest dynamic
// memory over the sum of the memory caps, and a disruption bound below what
// the new models and the models that cannot stay where they are must cost. Empty does not mean
// feasible (bin packing is hard); the solver may still prove infeasibility.
// REQUIRES: validate(p) passes.
std::vector<Conflict> find_conflicts(const Problem& p);

}  // namespace symphony::partition
