// The appendix's MILP (see solver.hpp for the formulation), built as an
// OsiClp problem and solved by CBC's standard driver (CbcMain0/CbcMain1: the
// `cbc` program's preprocessing, cuts and heuristics) under a CPU-time limit.
#include <CbcModel.hpp>
#include <CbcSolver.hpp>
#include <CoinError.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <exception>
#include <mutex>
#include <numeric>
#include <string>

#include "internal.hpp"

namespace symphony::partition::detail {

namespace {

// CBC's driver keeps process-wide state: one solve at a time.
std::mutex& cbc_mutex() {
  static std::mutex m;
  return m;
}

int no_callback(CbcModel* /*model*/, int /*where_from*/) { return 0; }

// Column indices of the model.
struct Columns {
  std::size_t n = 0, L = 0;
  int dr = -1, ds = -1;  // spreads; -1: not in the model
  std::vector<int> dyn;  // D_j; -1: none for j
  int x(std::size_t i, std::size_t j) const { return static_cast<int>(i * L + j); }
};

// Builds and solves the MILP; `feasibility_only` drops the objective (any
// feasible assignment ends the search); `start` (may be renumbered) is CBC's
// first incumbent.
MethodOutput solve_milp_impl(const Problem& p, const Options& o, const CpuDeadline& deadline,
                             bool feasibility_only, std::vector<int>* start) {
  const std::size_t n = p.size();
  const std::size_t L = p.num_subclusters();
  const Averages avg = averages(p);
  const Weights w = weights(p);
  double max_need = 0;
  bool any_dynamic = false;
  for (const Model& m : p.models) {
    max_need = std::max(max_need, m.static_memory + m.dynamic_memory);
    any_dynamic = any_dynamic || m.dynamic_memory > 0;
  }
  // Rows are normalised by the averages (scales near 1 for the LP).
  const double rate_scale = avg.rate > 0 ? avg.rate : 1.0;
  const double mem_scale = avg.static_memory > 0 ? avg.static_memory : std::max(1.0, max_need);

  Columns col;
  col.n = n;
  col.L = L;
  std::vector<double> lb, ub, obj;
  std::vector<std::string> names;
  auto add_column = [&](double l, double u, double c, std::string name) {
    lb.push_back(l);
    ub.push_back(u);
    obj.push_back(c);
    names.push_back(std::move(name));
    return static_cast<int>(lb.size() - 1);
  };
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < L; ++j) {
      add_column(0, p.allowed(i, j) ? 1 : 0, 0, "x_" + std::to_string(i) + "_" + std::to_string(j));
    }
  }
  if (w.rate > 0) col.dr = add_column(0, COIN_DBL_MAX, feasibility_only ? 0 : w.rate, "dR");
  if (w.memory > 0) col.ds = add_column(0, COIN_DBL_MAX, feasibility_only ? 0 : w.memory, "dS");
  col.dyn.assign(L, -1);
  if (any_dynamic) {
    for (std::size_t j = 0; j < L; ++j) {
      if (std::isfinite(p.subclusters[j].memory_cap))
        col.dyn[j] = add_column(0, COIN_DBL_MAX, 0, "D_" + std::to_string(j));
    }
  }

  // Symmetry breaking: with identical sub-clusters and a disruption bound
  // that does not tell them apart, the k-th largest model goes to 0..k
  // (not with a pinned or restricted model, which tells them apart).
  bool placed_any = false;
  for (std::size_t i = 0; i < n; ++i) placed_any = placed_any || p.current_of(i) != kUnplaced;
  if (identical_subclusters(p) && (!placed_any || !std::isfinite(p.max_disruption)) && !p.any_pinned()) {
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    auto size = [&](std::size_t i) {
      return p.models[i].rate / rate_scale + p.models[i].static_memory / mem_scale;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return size(a) > size(b); });
    for (std::size_t k = 0; k < std::min(n, L); ++k) {
      for (std::size_t j = k + 1; j < L; ++j) ub[static_cast<std::size_t>(col.x(order[k], j))] = 0;
    }
    // A start must obey the same rule: number its sub-clusters in the order
    // the models above first use them (the k-th model sees at most k + 1).
    if (start != nullptr && !start->empty()) {
      std::vector<int> label(L, -1);
      int next = 0;
      for (std::size_t i : order) {
        int& l = label[static_cast<std::size_t>((*start)[i])];
        if (l < 0) l = next++;
      }
      for (std::size_t j = 0; j < L; ++j) {
        if (label[j] < 0) label[j] = next++;
      }
      for (int& j : *start) j = label[static_cast<std::size_t>(j)];
    }
  }

  // Rows in compressed form, handed to CBC at once (appending rows to a
  // CoinPackedMatrix one by one is quadratic).
  struct Row {
    std::vector<int> index;
    std::vector<double> value;
    void insert(int i, double v) {
      index.push_back(i);
      value.push_back(v);
    }
    int getNumElements() const { return static_cast<int>(index.size()); }
  };
  std::vector<CoinBigIndex> starts{0};
  std::vector<int> indices;
  std::vector<double> elements;
  std::vector<double> row_lb, row_ub;
  auto add_row = [&](const Row& v, double l, double u) {
    indices.insert(indices.end(), v.index.begin(), v.index.end());
    elements.insert(elements.end(), v.value.begin(), v.value.end());
    starts.push_back(static_cast<CoinBigIndex>(indices.size()));
    row_lb.push_back(l);
    row_ub.push_back(u);
  };
  // Each model in exactly one sub-cluster.
  for (std::size_t i = 0; i < n; ++i) {
    Row v;
    for (std::size_t j = 0; j < L; ++j) v.insert(col.x(i, j), 1.0);
    add_row(v, 1, 1);
  }
  for (std::size_t j = 0; j < L; ++j) {
    const SubCluster& s = p.subclusters[j];
    Row rate, stat;
    for (std::size_t i = 0; i < n; ++i) {
      if (p.models[i].rate > 0) rate.insert(col.x(i, j), p.models[i].rate / rate_scale);
      if (p.models[i].static_memory > 0) stat.insert(col.x(i, j), p.models[i].static_memory / mem_scale);
    }
    // Rate cap.
    if (std::isfinite(s.rate_cap) && rate.getNumElements() > 0)
      add_row(rate, -COIN_DBL_MAX, s.rate_cap / rate_scale);
    // Memory cap: static plus the largest dynamic, D_j >= d_i x_ij.
    if (std::isfinite(s.memory_cap)) {
      Row mem = stat;
      if (col.dyn[j] >= 0) {
        mem.insert(col.dyn[j], 1.0);
        for (std::size_t i = 0; i < n; ++i) {
          if (p.models[i].dynamic_memory <= 0 || ub[static_cast<std::size_t>(col.x(i, j))] == 0) continue;
          Row d;
          d.insert(col.dyn[j], 1.0);
          d.insert(col.x(i, j), -p.models[i].dynamic_memory / mem_scale);
          add_row(d, 0, COIN_DBL_MAX);
        }
      }
      if (mem.getNumElements() > 0) add_row(mem, -COIN_DBL_MAX, s.memory_cap / mem_scale);
    }
    // Balance: |sum_i r_i x_ij / Rbar - 1| <= dR, and the same for memory.
    if (col.dr >= 0) {
      Row lo = rate, hi = rate;
      lo.insert(col.dr, 1.0);
      hi.insert(col.dr, -1.0);
      add_row(lo, 1, COIN_DBL_MAX);
      add_row(hi, -COIN_DBL_MAX, 1);
    }
    if (col.ds >= 0) {
      Row lo = stat, hi = stat;
      lo.insert(col.ds, 1.0);
      hi.insert(col.ds, -1.0);
      add_row(lo, 1, COIN_DBL_MAX);
      add_row(hi, -COIN_DBL_MAX, 1);
    }
  }
  // Disruption: sum_ij c_ij |x_ij - x'_ij| <= C_max, linear because x' is
  // fixed: c_ij x_ij where x'_ij = 0, c_ij (1 - x_ij) where x'_ij = 1.
  if (std::isfinite(p.max_disruption)) {
    Row v;
    double constant = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const int from = p.current_of(i);
      for (std::size_t j = 0; j < L; ++j) {
        const double c = p.cost(i, j);
        if (c == 0) continue;
        if (static_cast<int>(j) == from) {
          constant += c;
          v.insert(col.x(i, j), -c);
        } else {
          v.insert(col.x(i, j), c);
        }
      }
    }
    if (v.getNumElements() > 0) add_row(v, -COIN_DBL_MAX, p.max_disruption - constant);
  }

  OsiClpSolverInterface solver;
  std::vector<int> lengths(row_lb.size());
  for (std::size_t r = 0; r < lengths.size(); ++r) lengths[r] = static_cast<int>(starts[r + 1] - starts[r]);
  const CoinPackedMatrix matrix(false, static_cast<int>(lb.size()), static_cast<int>(row_lb.size()),
                                static_cast<CoinBigIndex>(elements.size()), elements.data(), indices.data(),
                                starts.data(), lengths.data());
  solver.loadProblem(matrix, lb.data(), ub.data(), obj.data(), row_lb.data(), row_ub.data());
  for (std::size_t i = 0; i < n * L; ++i) solver.setInteger(static_cast<int>(i));
  const bool with_start = start != nullptr && !start->empty();
  if (with_start) {  // CBC matches a start's values by column name
    for (std::size_t c = 0; c < names.size(); ++c) solver.setColName(static_cast<int>(c), names[c]);
  }
  solver.setObjSense(1.0);
  if (!o.solver_log) solver.messageHandler()->setLogLevel(0);

  MethodOutput out;
  std::lock_guard<std::mutex> lock(cbc_mutex());
  CbcModel model(solver);
  if (with_start) {
    std::vector<std::pair<std::string, double>> mip_start;
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < L; ++j) {
        mip_start.emplace_back(names[static_cast<std::size_t>(col.x(i, j))],
                               (*start)[i] == static_cast<int>(j) ? 1 : 0);
      }
    }
    model.setMIPStart(mip_start);
  }
  CbcSolverUsefulData data;
  data.noPrinting_ = !o.solver_log;
  data.useSignalHandler_ = false;
  CbcMain0(model, data);
  if (!o.solver_log) model.messageHandler()->setLogLevel(0);

  const double seconds = std::max(0.01, deadline.remaining());
  // 0 makes CBC and CLP seed from the time of day: keep the seed in [1, INT_MAX).
  const std::string seed = std::to_string(1 + o.seed % static_cast<std::uint64_t>(INT_MAX - 1));
  const std::string seconds_text = std::to_string(seconds);
  const std::string log_level = o.solver_log ? "1" : "0";
  // CBC's defaults but for preprocessing: on 800 models x 20 sub-clusters its
  // row strengthening alone used the whole 10 s and the search found no
  // solution; without it the feasibility pump finds one within about a
  // second (bench/results/partition.md). The LP bound of this model is 0
  // (fractional assignments balance perfectly), so preprocessing and cuts
  // cannot tighten it anyway.
  // clang-format off
  std::vector<std::string> args = {"symphony-partition",
                                   "-log", log_level,
                                   "-timeMode", "cpu",
                                   "-seconds", seconds_text,
                                   "-randomCbcSeed", seed,
                                   "-randomSeed", seed,
                                   "-ratioGap", "0",
                                   "-allowableGap", "1e-9",
                                   "-preprocess", "off"};
  // clang-format on
  if (o.node_limit >= 0) {
    args.push_back("-maxNodes");
    args.push_back(std::to_string(o.node_limit));
  }
  args.push_back("-solve");
  args.push_back("-quit");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  CbcMain1(static_cast<int>(argv.size()), argv.data(), model, no_callback, data);

  out.work = model.getNodeCount();
  out.time_limit_hit = model.isSecondsLimitReached() || model.secondaryStatus() == 4;
  const double* x = model.bestSolution();
  if (x != nullptr && model.getNumCols() >= static_cast<int>(n * L)) {
    out.assignment.assign(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      double best = -1;
      for (std::size_t j = 0; j < L; ++j) {
        const double v = x[col.x(i, j)];
        if (v > best) {
          best = v;
          out.assignment[i] = static_cast<int>(j);
        }
      }
    }
    out.status = model.isProvenOptimal() ? SolveStatus::kOptimal : SolveStatus::kFeasible;
  } else if (model.isProvenInfeasible()) {
    out.status = SolveStatus::kInfeasible;
  } else {
    out.status = SolveStatus::kNoSolution;
  }
  if (!feasibility_only) {
    const double bound = model.getBestPossibleObjValue();
    if (std::isfinite(bound) && std::abs(bound) < 1e50) out.bound = std::max(0.0, bound);
  }
  return out;
}

// solve_milp_impl with CBC's exceptions (CoinError, or a standard one such
// as std::bad_alloc) caught at the call into it, as kInternal.
Result<MethodOutput> cbc_solve(const Problem& p, const Options& o, const CpuDeadline& deadline,
                               bool feasibility_only, std::vector<int>* start) {
  try {
    return solve_milp_impl(p, o, deadline, feasibility_only, start);
  } catch (const CoinError& e) {
    return Status(Errc::kInternal,
                  "CBC failed: " + e.className() + "::" + e.methodName() + ": " + e.message());
  } catch (const std::exception& e) {
    return Status(Errc::kInternal, std::string("CBC failed: ") + e.what());
  }
}

}  // namespace

Result<MethodOutput> solve_milp(const Problem& p, const Options& o, const CpuDeadline& deadline) {
  std::vector<int> start;
  std::string note;
  if (o.warm_start) {
    // The greedy solution as CBC's first incumbent, out of a quarter of the time.
    const CpuDeadline greedy_deadline(process_cpu_seconds(), std::max(0.0, deadline.remaining() / 4));
    MethodOutput g = solve_greedy(p, o, greedy_deadline);
    if (!g.assignment.empty()) start = std::move(g.assignment);
  }
  return cbc_solve(p, o, deadline, false, &start);
}

Result<MethodOutput> solve_milp_feasibility(const Problem& p, const Options& o, const CpuDeadline& deadline) {
  return cbc_solve(p, o, deadline, true, nullptr);
}

}  // namespace symphony::partition::detail
