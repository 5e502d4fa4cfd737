// The paper's random-search baseline (appendix "Effectiveness of Cluster
// Partitioning"): draw a random partition, check it against every
// constraint, score it with the MILP's objective, repeat until the time (or
// sample) limit, return the best feasible one.
//
// Draws are uniform (every model to a uniformly random sub-cluster) as in the
// paper. With a current assignment and a finite disruption bound a uniform
// draw would almost never respect the bound, so draws start from the current
// assignment (new models to random sub-clusters) and move a uniformly random
// number of randomly chosen models to random sub-clusters, skipping moves
// that would exceed the bound.
#include <algorithm>
#include <cmath>
#include <random>

#include "internal.hpp"

namespace symphony::partition::detail {

namespace {

// A uniform integer in [0, n), the same on every platform (unlike
// std::uniform_int_distribution).
std::size_t uniform(std::mt19937_64& rng, std::size_t n) {
  const std::uint64_t range = n;
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % range;
  std::uint64_t x;
  do x = rng();
  while (x >= limit);
  return static_cast<std::size_t>(x % range);
}

}  // namespace

MethodOutput solve_random(const Problem& p, const Options& o, const CpuDeadline& deadline) {
  const std::size_t n = p.size();
  const std::size_t L = p.num_subclusters();
  const Averages avg = averages(p);
  const Weights w = weights(p);
  const bool perturb = std::isfinite(p.max_disruption) && !p.current.empty();
  std::mt19937_64 rng(o.seed);
  // Where each model may be drawn to (validate() leaves every model one).
  std::vector<std::vector<std::size_t>> may_go(n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < L; ++j)
      if (p.permits(i, j)) may_go[i].push_back(j);
  const auto draw = [&](std::size_t i) {
    return static_cast<int>(may_go[i][uniform(rng, may_go[i].size())]);
  };

  MethodOutput out;
  std::vector<int> a(n), best;
  double best_f = kUnlimited;
  std::vector<double> rate(L), stat(L), dyn(L);
  for (;;) {
    if (o.sample_limit >= 0 && out.work >= o.sample_limit) break;
    if ((out.work & 63) == 0 && deadline.expired()) {
      out.time_limit_hit = true;
      break;
    }
    ++out.work;
    double cost = 0;
    if (!perturb) {
      for (std::size_t i = 0; i < n; ++i) a[i] = p.is_pinned(i) ? p.current_of(i) : draw(i);
      if (std::isfinite(p.max_disruption)) {
        for (std::size_t i = 0; i < n; ++i) cost += p.placement_cost(i, static_cast<std::size_t>(a[i]));
      }
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        a[i] = p.current_of(i);
        // New, or where it may no longer be.
        if (a[i] == kUnplaced || (!p.is_pinned(i) && !p.permits(i, static_cast<std::size_t>(a[i])))) {
          a[i] = draw(i);
          cost += p.placement_cost(i, static_cast<std::size_t>(a[i]));
        }
      }
      const std::size_t moves = uniform(rng, n + 1);
      for (std::size_t t = 0; t < moves; ++t) {
        const std::size_t i = uniform(rng, n);
        const std::size_t b = uniform(rng, L);
        if (p.is_pinned(i) || !p.permits(i, b)) continue;
        const double c = cost - p.placement_cost(i, static_cast<std::size_t>(a[i])) + p.placement_cost(i, b);
        if (within(c, p.max_disruption)) {
          a[i] = static_cast<int>(b);
          cost = c;
        }
      }
    }
    if (!within(cost, p.max_disruption)) continue;
    std::fill(rate.begin(), rate.end(), 0.0);
    std::fill(stat.begin(), stat.end(), 0.0);
    std::fill(dyn.begin(), dyn.end(), 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      const auto j = static_cast<std::size_t>(a[i]);
      const Model& m = p.models[i];
      rate[j] += m.rate;
      stat[j] += m.static_memory;
      dyn[j] = std::max(dyn[j], m.dynamic_memory);
    }
    bool ok = true;
    double dev_r = 0, dev_s = 0;
    for (std::size_t j = 0; j < L && ok; ++j) {
      const SubCluster& s = p.subclusters[j];
      ok = within(rate[j], s.rate_cap) && within(stat[j] + dyn[j], s.memory_cap);
      if (avg.rate > 0) dev_r = std::max(dev_r, std::abs(rate[j] / avg.rate - 1));
      if (avg.static_memory > 0) dev_s = std::max(dev_s, std::abs(stat[j] / avg.static_memory - 1));
    }
    if (!ok) continue;
    const double f = w.rate * dev_r + w.memory * dev_s;
    if (f < best_f) {
      best_f = f;
      best = a;
    }
  }
  if (!best.empty()) {
    out.assignment = std::move(best);
    out.status = SolveStatus::kFeasible;
  } else {
    out.note = "random search drew " + std::to_string(out.work) + " assignments and none was feasible";
  }
  return out;
}

}  // namespace symphony::partition::detail
