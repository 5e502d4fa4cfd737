// Solving the partitioning problem: the appendix's MILP with COIN-OR CBC, a
// greedy heuristic and the paper's random-search baseline, behind one call
// with the same inputs, outputs and time limit, so a scheduler or the
// simulator can re-partition every epoch and an evaluation compares like
// with like. The formulation: docs/partition.md#the-problem-and-the-methods.
//
// Contract:
//  - Options::time_limit is CPU seconds of the calling process for the whole
//    call (docs/partition.md#time);
//  - greedy is deterministic; the MILP and random search are when they stop
//    on their work limits or finish in time (docs/partition.md#determinism);
//  - solve() may be called from any thread; MILP solves are serialised on one
//    process-wide mutex (CBC's driver keeps global state);
//  - errors are a Status: kInvalidArgument for a malformed problem or option,
//    kInternal when CBC throws (caught at the call into it). No solution is
//    not an error: it is a Solution without an assignment, saying why.
//
//   partition::Options o;
//   o.method = partition::Method::kMilp;
//   o.time_limit = 10;
//   SYMPHONY_ASSIGN_OR_RETURN(partition::Solution r, partition::solve(problem, o));
//   if (!r.has_solution()) std::puts(r.message().c_str());
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "symphony/partition/evaluation.hpp"
#include "symphony/partition/problem.hpp"
#include "symphony/status.hpp"

namespace symphony::partition {

enum class Method {
  kMilp,    // the appendix's MILP, solved by CBC under the time limit
  kGreedy,  // largest first into the least loaded sub-cluster that fits, then
            // improving moves and swaps until none helps or time runs out
  kRandom,  // the paper's baseline: random assignments, the best feasible one
};
const char* to_string(Method m);
// "milp", "greedy" or "random"; kInvalidArgument otherwise.
Result<Method> parse_method(const std::string& text);

enum class SolveStatus {
  kOptimal,     // proven optimal (within CBC's tolerances)
  kFeasible,    // a feasible assignment, optimality not proven (see gap)
  kInfeasible,  // proven to have no feasible assignment (see conflicts)
  kNoSolution,  // none found within the limits; feasibility unknown
};
const char* to_string(SolveStatus s);

struct Options {
  Method method = Method::kMilp;
  double time_limit = 10;  // CPU seconds for the whole call; > 0
  std::uint64_t seed = 1;  // CBC's random seeds, random search's samples
  // Work limits that make a run deterministic; < 0: none.
  std::int64_t node_limit = -1;    // milp: branch-and-bound nodes
  std::int64_t sample_limit = -1;  // random: assignments drawn
  // milp: give CBC the greedy solution as a start (spends greedy's CPU time
  // out of the same limit). Off by default: the paper's MILP starts cold.
  bool warm_start = false;
  bool solver_log = false;  // milp: CBC's log on stdout
};

struct Solution {
  Method method = Method::kMilp;
  SolveStatus status = SolveStatus::kNoSolution;
  std::vector<int> assignment;  // sub-cluster per model; empty without a solution
  Evaluation evaluation;        // of `assignment` (default without a solution)
  double objective = std::numeric_limits<double>::quiet_NaN();  // dR + w dS; NaN without a solution
  // Best proven lower bound on the objective (milp), NaN where none was computed.
  double bound = std::numeric_limits<double>::quiet_NaN();
  // (objective - bound) / objective; 0 when optimal, NaN without a bound.
  double gap = std::numeric_limits<double>::quiet_NaN();
  double cpu_seconds = 0;  // CPU time the call used
  bool time_limit_hit = false;
  // Work done: milp nodes, random samples drawn, greedy improving steps.
  std::int64_t work = 0;
  // Why there is no solution: pinned causes from find_conflicts(), or the
  // constraint families the solver's infeasibility proof involves.
  std::vector<Conflict> conflicts;
  std::string note;  // anything else worth saying (e.g. greedy gave up)

  bool has_solution() const { return !assignment.empty(); }
  // One line: the status and, without a solution, why.
  std::string message() const;
};

// Whether this build has the MILP (CBC was found at configure time).
bool milp_available();

// Partitions p.models across p.subclusters with o.method under o.time_limit.
// Infeasibility found before solving (find_conflicts) returns kInfeasible
// at once, whatever the method. kInvalidArgument for a malformed problem or
// options, and for Method::kMilp in a build without CBC; kInternal when CBC
// throws.
Result<Solution> solve(const Problem& p, const Options& o);

}  // namespace symphony::partition
