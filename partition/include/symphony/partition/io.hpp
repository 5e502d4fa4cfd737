// The files of `symphony partition` (docs/partition.md): the model table
// (CSV: name, rate, static and dynamic memory in MiB, optional move cost), the
// assignment (JSON: {"subclusters": L, "assignment": {"<model>": j, ...}},
// optionally "pinned": [names] and "permitted": {"<model>": [j, ...]}), and
// the JSON report, which is itself a valid assignment file, so one epoch's
// output is the next epoch's --current (and so is an epoch of a cluster
// scheduler's report, with its pins and per-model sub-clusters).
//
// Errors are Status(kInvalidArgument) whose message names the file, line and
// column ("models.csv:4:9: rate: not a number: 'fast'"; "<file>: ..." where
// no position is known).
//
//   SYMPHONY_ASSIGN_OR_RETURN(std::vector<partition::Model> models, partition::read_models_csv("models.csv"));
//   SYMPHONY_ASSIGN_OR_RETURN(partition::CurrentAssignment cur,
//                             partition::read_assignment_json("now.json", models, 4));
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "symphony/partition/problem.hpp"
#include "symphony/partition/solver.hpp"
#include "symphony/status.hpp"

namespace symphony::partition {

// Parses a model table. Header line required (columns in any order):
// name, rate (requests/s), static_mib, dynamic_mib, and optionally
// move_cost (default 1). Lines starting with '#' and blank lines are
// skipped; fields are trimmed; no quoting. `origin` names the text in errors.
Result<std::vector<Model>> parse_models_csv(std::string_view text, const std::string& origin);
Result<std::vector<Model>> read_models_csv(const std::string& path);

// A current assignment read against a model table.
struct CurrentAssignment {
  std::vector<int> current;                  // per model (Problem::current); kUnplaced where absent
  std::vector<std::string> unknown_models;   // names in the file that are not in the table
  std::size_t placed = 0;                    // models of the table the file places
  std::vector<bool> pinned;                  // Problem::pinned; empty: the file pins none
  std::vector<std::vector<bool>> permitted;  // Problem::permitted; empty: the file restricts none
};

// Parses an assignment file for `models` partitioned across
// `num_subclusters` sub-clusters: every sub-cluster index must be an integer
// in [0, num_subclusters) (and below the file's own "subclusters", when it
// has one). Models of the table missing from the file are new (kUnplaced);
// names in the file missing from the table are returned, not an error (they
// left the cluster). "pinned" lists models that stay where "assignment"
// places them; "permitted" maps a model to the sub-clusters it may go to
// (names not in the table are ignored in both). Other keys are ignored (a
// report can be read back).
Result<CurrentAssignment> parse_assignment_json(std::string_view text, const std::string& origin,
                                                const std::vector<Model>& models,
                                                std::size_t num_subclusters);
Result<CurrentAssignment> read_assignment_json(const std::string& path, const std::vector<Model>& models,
                                               std::size_t num_subclusters);

// The JSON report of a solve: method, status, objective, bound, gap, CPU time,
// the assignment (readable back as an assignment file, with the problem's
// pins and per-model sub-clusters where it has any), the imbalance factors,
// per-sub-cluster loads, the moves and the disruption, and the conflicts of
// an infeasible problem.
nlohmann::json to_json(const Problem& p, const Solution& r);

}  // namespace symphony::partition
