// evaluate(): loads, imbalance factors, objective, moves and violations of an
// assignment; the one yardstick for every method.
#include "symphony/partition/evaluation.hpp"

#include <algorithm>
#include <cmath>

#include "internal.hpp"

namespace symphony::partition {

namespace detail {

Averages averages(const Problem& p) {
  Averages a;
  for (const Model& m : p.models) {
    a.rate += m.rate;
    a.static_memory += m.static_memory;
  }
  const auto L = static_cast<double>(p.num_subclusters());
  a.rate /= L;
  a.static_memory /= L;
  return a;
}

Weights weights(const Problem& p) {
  const Averages a = averages(p);
  return {a.rate > 0 ? 1.0 : 0.0, a.static_memory > 0 ? p.memory_weight : 0.0};
}

}  // namespace detail

namespace {

// (max - min) / avg and max |x - avg| / avg of one quantity across sub-clusters.
struct Spread {
  double imbalance = 0;
  double deviation = 0;
};

Spread spread(const std::vector<double>& v, double avg) {
  if (!(avg > 0)) return {};
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  double dev = 0;
  for (double x : v) dev = std::max(dev, std::abs(x - avg));
  return {(*hi - *lo) / avg, dev / avg};
}

}  // namespace

Result<Evaluation> evaluate(const Problem& p, std::span<const int> assignment) {
  const std::size_t L = p.num_subclusters();
  if (assignment.size() != p.size()) {
    return detail::invalid("the assignment has " + std::to_string(assignment.size()) + " entries for " +
                           std::to_string(p.size()) + " models");
  }
  for (std::size_t i = 0; i < assignment.size(); ++i) {
    if (assignment[i] < 0 || assignment[i] >= static_cast<int>(L)) {
      return detail::invalid("model '" + p.models[i].name + "': sub-cluster " +
                             std::to_string(assignment[i]) + " is out of range (there are " +
                             std::to_string(L) + " sub-clusters)");
    }
  }
  Evaluation e;
  e.loads.resize(L);
  for (std::size_t i = 0; i < p.size(); ++i) {
    const Model& m = p.models[i];
    const auto j = static_cast<std::size_t>(assignment[i]);
    SubClusterLoad& l = e.loads[j];
    ++l.models;
    l.rate += m.rate;
    l.static_memory += m.static_memory;
    l.max_dynamic_memory = std::max(l.max_dynamic_memory, m.dynamic_memory);
    const int from = p.current_of(i);
    if (from != assignment[i]) {
      const double c = p.placement_cost(i, j);
      e.moves.push_back({i, from, assignment[i], c});
      e.disruption += c;
    }
  }
  std::vector<double> rates(L), statics(L);
  for (std::size_t j = 0; j < L; ++j) {
    rates[j] = e.loads[j].rate;
    statics[j] = e.loads[j].static_memory;
  }
  const detail::Averages avg = detail::averages(p);
  const Spread r = spread(rates, avg.rate);
  const Spread s = spread(statics, avg.static_memory);
  e.rate_imbalance = r.imbalance;
  e.memory_imbalance = s.imbalance;
  e.rate_spread = r.deviation;
  e.memory_spread = s.deviation;
  const detail::Weights w = detail::weights(p);
  e.objective = w.rate * r.deviation + w.memory * s.deviation;

  for (std::size_t j = 0; j < L; ++j) {
    const SubClusterLoad& l = e.loads[j];
    const SubCluster& sc = p.subclusters[j];
    if (!detail::within(l.rate, sc.rate_cap)) {
      e.violations.push_back("sub-cluster " + std::to_string(j) + ": rate " + detail::fmt(l.rate) +
                             " exceeds its rate cap " + detail::fmt(sc.rate_cap));
    }
    if (!detail::within(l.memory(), sc.memory_cap)) {
      e.violations.push_back("sub-cluster " + std::to_string(j) + ": memory " + detail::fmt(l.memory()) +
                             " (static " + detail::fmt(l.static_memory) + " + largest dynamic " +
                             detail::fmt(l.max_dynamic_memory) + ") exceeds its memory cap " +
                             detail::fmt(sc.memory_cap));
    }
  }
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p.is_pinned(i) && assignment[i] != p.current_of(i))
      e.violations.push_back("model '" + p.models[i].name + "' is pinned to sub-cluster " +
                             std::to_string(p.current_of(i)) + " but placed in " +
                             std::to_string(assignment[i]));
    if (!p.permits(i, static_cast<std::size_t>(assignment[i])))
      e.violations.push_back("model '" + p.models[i].name + "' is placed in sub-cluster " +
                             std::to_string(assignment[i]) + ", where it may not go");
  }
  if (!detail::within(e.disruption, p.max_disruption)) {
    e.violations.push_back("disruption " + detail::fmt(e.disruption) + " exceeds the bound " +
                           detail::fmt(p.max_disruption));
  }
  return e;
}

}  // namespace symphony::partition
