// solve(): validation, the pre-solve infeasibility checks, the chosen method
// under the CPU-time limit, evaluation of its assignment, and for an
// infeasible MILP the constraint families its infeasibility involves.
#include "symphony/partition/solver.hpp"

#include <cmath>
#include <sstream>

#include "internal.hpp"

namespace symphony::partition {

const char* to_string(Method m) {
  switch (m) {
    case Method::kMilp:
      return "milp";
    case Method::kGreedy:
      return "greedy";
    case Method::kRandom:
      return "random";
  }
  return "?";
}

Result<Method> parse_method(const std::string& text) {
  if (text == "milp") return Method::kMilp;
  if (text == "greedy") return Method::kGreedy;
  if (text == "random") return Method::kRandom;
  return detail::invalid("unknown method '" + text + "' (expected milp, greedy or random)");
}

const char* to_string(SolveStatus s) {
  switch (s) {
    case SolveStatus::kOptimal:
      return "optimal";
    case SolveStatus::kFeasible:
      return "feasible";
    case SolveStatus::kInfeasible:
      return "infeasible";
    case SolveStatus::kNoSolution:
      return "no_solution";
  }
  return "?";
}

bool milp_available() {
#ifdef SYMPHONY_PARTITION_HAVE_CBC
  return true;
#else
  return false;
#endif
}

std::string Solution::message() const {
  std::ostringstream s;
  s << to_string(method) << ": " << to_string(status);
  if (has_solution()) {
    s << ", objective " << detail::fmt(objective);
    if (!std::isnan(gap)) s << ", gap " << detail::fmt(100 * gap) << " %";
  }
  for (std::size_t k = 0; k < conflicts.size(); ++k) s << (k ? "; " : ": ") << conflicts[k].message;
  if (!has_solution() && conflicts.empty()) {
    if (status == SolveStatus::kNoSolution)
      s << " within " << (time_limit_hit ? "the time limit" : "the work limit");
    if (!note.empty()) s << " (" << note << ")";
  }
  return s.str();
}

namespace {

#ifdef SYMPHONY_PARTITION_HAVE_CBC
std::vector<Constraint> families(const Problem& p) {
  std::vector<Constraint> f;
  bool rate = false, memory = false;
  for (const SubCluster& s : p.subclusters) {
    rate = rate || std::isfinite(s.rate_cap);
    memory = memory || std::isfinite(s.memory_cap);
  }
  if (rate) f.push_back(Constraint::kRateCap);
  if (memory) f.push_back(Constraint::kMemoryCap);
  if (std::isfinite(p.max_disruption)) f.push_back(Constraint::kDisruption);
  return f;
}

std::string plural_name(Constraint c) {
  switch (c) {
    case Constraint::kRateCap:
      return "the rate caps";
    case Constraint::kMemoryCap:
      return "the memory caps (static plus the largest dynamic memory)";
    case Constraint::kDisruption:
      return "the disruption bound";
  }
  return "?";
}

Problem without(const Problem& p, Constraint c) {
  Problem q = p;
  for (SubCluster& s : q.subclusters) {
    if (c == Constraint::kRateCap) s.rate_cap = kUnlimited;
    if (c == Constraint::kMemoryCap) s.memory_cap = kUnlimited;
  }
  if (c == Constraint::kDisruption) q.max_disruption = kUnlimited;
  return q;
}

// The solver proved infeasibility with no pinned cause: re-solve without each
// constraint family in turn to tell which ones the conflict involves.
Result<Conflict> diagnose(const Problem& p, const Options& o, const detail::CpuDeadline& deadline) {
  const std::vector<Constraint> present = families(p);
  Conflict c;
  std::ostringstream msg;
  msg << "the MILP solver proved that no assignment of the " << p.size() << " models to the "
      << p.num_subclusters() << " sub-clusters satisfies ";
  for (std::size_t k = 0; k < present.size(); ++k) {
    msg << (k == 0 ? "" : (k + 1 == present.size() ? " and " : ", ")) << plural_name(present[k]);
  }
  if (present.size() <= 1) {
    c.constraints = present;
    c.message = msg.str();
    return c;
  }
  msg << " together";
  for (std::size_t k = 0; k < present.size(); ++k) {
    const double share = deadline.remaining() / static_cast<double>(present.size() - k);
    const detail::CpuDeadline part(detail::process_cpu_seconds(), std::max(0.0, share));
    SYMPHONY_ASSIGN_OR_RETURN(const detail::MethodOutput r,
                              detail::solve_milp_feasibility(without(p, present[k]), o, part));
    msg << "; without " << plural_name(present[k]) << " ";
    if (!r.assignment.empty()) {
      msg << "an assignment exists";
      c.constraints.push_back(present[k]);
    } else if (r.status == SolveStatus::kInfeasible) {
      msg << "there is still none";
    } else {
      msg << "undetermined in the time left";
    }
  }
  if (c.constraints.empty()) c.constraints = present;
  c.message = msg.str();
  return c;
}
#endif

}  // namespace

Result<Solution> solve(const Problem& p, const Options& o) {
  const double start = detail::process_cpu_seconds();
  SYMPHONY_RETURN_IF_ERROR(validate(p));
  if (std::isnan(o.time_limit) || !(o.time_limit > 0)) {
    return detail::invalid("the time limit must be > 0 CPU seconds, got " + detail::fmt(o.time_limit));
  }
  if (o.method == Method::kMilp && !milp_available()) {
    return detail::invalid(
        "this build has no MILP solver: CBC was not found at configure time "
        "(install coinor-libcbc-dev and reconfigure with -DSYMPHONY_WITH_CBC=ON)");
  }
  Solution r;
  r.method = o.method;
  r.conflicts = find_conflicts(p);
  if (!r.conflicts.empty()) {
    r.status = SolveStatus::kInfeasible;
    r.cpu_seconds = detail::process_cpu_seconds() - start;
    return r;
  }
  const detail::CpuDeadline deadline(start, o.time_limit);
  detail::MethodOutput out;
  switch (o.method) {
    case Method::kGreedy:
      out = detail::solve_greedy(p, o, deadline);
      break;
    case Method::kRandom:
      out = detail::solve_random(p, o, deadline);
      break;
    case Method::kMilp: {
#ifdef SYMPHONY_PARTITION_HAVE_CBC
      SYMPHONY_ASSIGN_OR_RETURN(out, detail::solve_milp(p, o, deadline));
      if (out.status == SolveStatus::kInfeasible) {
        SYMPHONY_ASSIGN_OR_RETURN(Conflict c, diagnose(p, o, deadline));
        out.conflicts.push_back(std::move(c));
      }
#endif
      break;
    }
  }
  detail::relabel_towards_current(p, out.assignment);
  r.status = out.status;
  r.work = out.work;
  r.time_limit_hit = out.time_limit_hit;
  r.conflicts = std::move(out.conflicts);
  r.note = std::move(out.note);
  r.bound = out.bound;
  if (!out.assignment.empty()) {
    SYMPHONY_ASSIGN_OR_RETURN(Evaluation e, evaluate(p, out.assignment));
    if (e.feasible()) {
      r.assignment = std::move(out.assignment);
      r.evaluation = std::move(e);
      r.objective = r.evaluation.objective;
      if (!std::isnan(r.bound)) {
        r.gap = r.status == SolveStatus::kOptimal || r.objective <= 1e-12
                    ? 0.0
                    : std::max(0.0, (r.objective - r.bound) / r.objective);
      }
    } else {
      // Not expected: the methods check the same constraints.
      r.status = SolveStatus::kNoSolution;
      r.note = "the " + std::string(to_string(o.method)) +
               " assignment violates a constraint: " + e.violations.front();
    }
  }
  r.cpu_seconds = detail::process_cpu_seconds() - start;
  return r;
}

}  // namespace symphony::partition
