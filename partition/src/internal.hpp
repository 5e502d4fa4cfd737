// Internals shared by the partitioning methods: tolerant cap checks, number
// formatting for messages, the CPU clock and the method entry points.
#pragma once

#include <time.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "symphony/partition/evaluation.hpp"
#include "symphony/partition/problem.hpp"
#include "symphony/partition/solver.hpp"
#include "symphony/status.hpp"

namespace symphony::partition::detail {

inline constexpr int kMaxSubclusters = 1 << 16;

// Whether v <= cap within the relative tolerance (and absolute 1e-9).
inline bool within(double v, double cap) { return v <= cap + kCapTolerance * std::abs(cap) + 1e-9; }

// A malformed problem or option.
inline Status invalid(std::string message) { return Status(Errc::kInvalidArgument, std::move(message)); }

// A number for a message: up to 6 significant digits, "unlimited" for inf.
inline std::string fmt(double v) {
  if (std::isinf(v)) return v > 0 ? "unlimited" : "-unlimited";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// CPU time of the whole process, in seconds (what CBC's default time mode counts).
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// A CPU-time deadline.
class CpuDeadline {
 public:
  CpuDeadline(double start, double limit) : start_(start), end_(start + limit) {}
  double remaining() const { return end_ - process_cpu_seconds(); }
  bool expired() const { return process_cpu_seconds() >= end_; }
  double elapsed() const { return process_cpu_seconds() - start_; }

 private:
  double start_;
  double end_;
};

// What a method returns before solve() evaluates it.
struct MethodOutput {
  std::vector<int> assignment;  // empty: none found
  SolveStatus status = SolveStatus::kNoSolution;
  double bound = std::nan("");
  std::int64_t work = 0;
  bool time_limit_hit = false;
  std::vector<Conflict> conflicts;
  std::string note;
};

MethodOutput solve_greedy(const Problem& p, const Options& o, const CpuDeadline& deadline);
MethodOutput solve_random(const Problem& p, const Options& o, const CpuDeadline& deadline);
// Only in builds with CBC; kInternal when CBC throws.
Result<MethodOutput> solve_milp(const Problem& p, const Options& o, const CpuDeadline& deadline);
// Only in builds with CBC: whether any assignment satisfies the constraints
// (objective zero; the first feasible solution ends the search).
Result<MethodOutput> solve_milp_feasibility(const Problem& p, const Options& o, const CpuDeadline& deadline);

// Whether every sub-cluster has the same caps and cost scale and no model
// is restricted to some of them (then labels are interchangeable).
bool identical_subclusters(const Problem& p);

// With identical sub-clusters and a current assignment, renames the
// sub-clusters of `a` (a permutation: same partition, same objective) so
// that the move cost against the current assignment is least.
void relabel_towards_current(const Problem& p, std::vector<int>& a);

// Averages used to normalise: sum / L, or 0.
struct Averages {
  double rate = 0;
  double static_memory = 0;
};
Averages averages(const Problem& p);

// The objective's weights on the normalised spreads: 1 and w, or 0 for a
// quantity whose average is 0 (nothing to balance).
struct Weights {
  double rate = 1;
  double memory = 1;
};
Weights weights(const Problem& p);

}  // namespace symphony::partition::detail
