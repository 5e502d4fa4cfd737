// The greedy heuristic: keep the current placements that still fit, place
// the rest largest first into the least loaded sub-cluster that fits within
// the caps and the disruption bound, then apply improving moves (one model to
// another sub-cluster) and swaps (two models exchange sub-clusters) until none
// improves the MILP's objective (ties broken by the sum of squared
// deviations, so it can leave plateaus of the max) or time runs out.
// Deterministic: no randomness, ties broken by index.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "internal.hpp"

namespace symphony::partition::detail {

namespace {

constexpr double kEps = 1e-10;

// Loads of every sub-cluster under a partial assignment, updated move by move.
class State {
 public:
  explicit State(const Problem& p)
      : p_(p),
        a_(p.size(), kUnplaced),
        rate_(p.num_subclusters(), 0.0),
        stat_(p.num_subclusters(), 0.0),
        dyn_(p.num_subclusters()),
        d1_(p.num_subclusters(), 0.0),
        d2_(p.num_subclusters(), 0.0) {}

  int at(std::size_t i) const { return a_[i]; }
  const std::vector<int>& assignment() const { return a_; }
  double rate(std::size_t j) const { return rate_[j]; }
  double static_memory(std::size_t j) const { return stat_[j]; }
  double max_dynamic(std::size_t j) const { return d1_[j]; }
  // The largest dynamic memory of sub-cluster j without model i (which is in j).
  double max_dynamic_without(std::size_t j, std::size_t i) const {
    return p_.models[i].dynamic_memory >= d1_[j] ? d2_[j] : d1_[j];
  }
  double memory(std::size_t j) const { return stat_[j] + d1_[j]; }
  double cost() const { return cost_; }
  const std::multiset<double>& dynamics(std::size_t j) const { return dyn_[j]; }

  // Cost of model i at sub-cluster j (kUnplaced: 0).
  double cost_at(std::size_t i, int j) const {
    return j == kUnplaced ? 0.0 : p_.placement_cost(i, static_cast<std::size_t>(j));
  }

  void place(std::size_t i, int j) {
    const Model& m = p_.models[i];
    if (a_[i] != kUnplaced) {
      const auto k = static_cast<std::size_t>(a_[i]);
      rate_[k] -= m.rate;
      stat_[k] -= m.static_memory;
      dyn_[k].erase(dyn_[k].find(m.dynamic_memory));
      refresh(k);
    }
    cost_ += cost_at(i, j) - cost_at(i, a_[i]);
    a_[i] = j;
    if (j != kUnplaced) {
      const auto k = static_cast<std::size_t>(j);
      rate_[k] += m.rate;
      stat_[k] += m.static_memory;
      dyn_[k].insert(m.dynamic_memory);
      refresh(k);
    }
  }

  // Whether model i (not in j) can join sub-cluster j within its caps.
  bool fits(std::size_t i, std::size_t j) const {
    const Model& m = p_.models[i];
    const SubCluster& s = p_.subclusters[j];
    return within(rate_[j] + m.rate, s.rate_cap) &&
           within(stat_[j] + m.static_memory + std::max(d1_[j], m.dynamic_memory), s.memory_cap);
  }
  bool over_caps(std::size_t j) const {
    const SubCluster& s = p_.subclusters[j];
    return !within(rate_[j], s.rate_cap) || !within(memory(j), s.memory_cap);
  }

 private:
  void refresh(std::size_t k) {
    const auto& d = dyn_[k];
    if (d.empty()) {
      d1_[k] = d2_[k] = 0;
      return;
    }
    auto it = d.rbegin();
    d1_[k] = *it;
    ++it;
    d2_[k] = it == d.rend() ? 0.0 : *it;
  }

  const Problem& p_;
  std::vector<int> a_;
  std::vector<double> rate_, stat_;
  std::vector<std::multiset<double>> dyn_;
  std::vector<double> d1_, d2_;  // the two largest dynamic memories per sub-cluster
  double cost_ = 0;
};

// Normalised signed deviations of one quantity, with the three largest |dev|
// for O(1) "max over the others" queries.
struct Deviations {
  std::vector<double> dev;
  std::size_t top[3] = {0, 0, 0};
  std::size_t ntop = 0;

  void compute(const std::vector<double>& values, double avg) {
    const std::size_t L = values.size();
    dev.assign(L, 0.0);
    if (avg > 0) {
      for (std::size_t j = 0; j < L; ++j) dev[j] = values[j] / avg - 1;
    }
    std::vector<std::size_t> idx(L);
    std::iota(idx.begin(), idx.end(), 0);
    ntop = std::min<std::size_t>(3, L);
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(ntop), idx.end(),
                      [&](std::size_t x, std::size_t y) { return std::abs(dev[x]) > std::abs(dev[y]); });
    for (std::size_t k = 0; k < ntop; ++k) top[k] = idx[k];
  }
  double max_except(std::size_t a, std::size_t b) const {
    for (std::size_t k = 0; k < ntop; ++k) {
      if (top[k] != a && top[k] != b) return std::abs(dev[top[k]]);
    }
    return 0;
  }
  double max() const { return ntop ? std::abs(dev[top[0]]) : 0; }
  double sum_squares() const {
    double s = 0;
    for (double d : dev) s += d * d;
    return s;
  }
};

class Greedy {
 public:
  Greedy(const Problem& p, const CpuDeadline& deadline)
      : p_(p), deadline_(deadline), st_(p), avg_(averages(p)), w_(weights(p)) {}

  MethodOutput run() {
    MethodOutput out;
    if (!construct(out)) return out;
    improve(out);
    out.assignment = st_.assignment();
    out.status = SolveStatus::kFeasible;
    return out;
  }

 private:
  // Size of a model in the objective's terms: its share of an average sub-cluster.
  double key(std::size_t i) const {
    const Model& m = p_.models[i];
    return (avg_.rate > 0 ? w_.rate * m.rate / avg_.rate : 0.0) +
           (avg_.static_memory > 0 ? w_.memory * m.static_memory / avg_.static_memory : 0.0);
  }
  double load(std::size_t j) const {
    return (avg_.rate > 0 ? w_.rate * st_.rate(j) / avg_.rate : 0.0) +
           (avg_.static_memory > 0 ? w_.memory * st_.static_memory(j) / avg_.static_memory : 0.0);
  }

  bool construct(MethodOutput& out) {
    const std::size_t n = p_.size();
    const std::size_t L = p_.num_subclusters();
    // Current placements stay, where the model may stay.
    for (std::size_t i = 0; i < n; ++i) {
      const int j = p_.current_of(i);
      if (j != kUnplaced && (p_.is_pinned(i) || p_.permits(i, static_cast<std::size_t>(j)))) st_.place(i, j);
    }
    // Sub-clusters over their caps (the rates changed) give up models: the
    // largest rate first for the rate cap, the largest memory saving first
    // for the memory cap. Pinned models stay (their sub-cluster may stay over).
    std::vector<std::vector<std::size_t>> members(L);
    for (std::size_t i = 0; i < n; ++i) {
      if (st_.at(i) != kUnplaced && !p_.is_pinned(i))
        members[static_cast<std::size_t>(st_.at(i))].push_back(i);
    }
    for (std::size_t j = 0; j < L; ++j) {
      const SubCluster& s = p_.subclusters[j];
      while (st_.over_caps(j) && !members[j].empty()) {
        auto& mem = members[j];
        const bool rate_over = !within(st_.rate(j), s.rate_cap);
        auto saving = [&](std::size_t i) {
          return rate_over ? p_.models[i].rate
                           : p_.models[i].static_memory + st_.max_dynamic(j) - st_.max_dynamic_without(j, i);
        };
        const auto victim = std::max_element(mem.begin(), mem.end(), [&](std::size_t x, std::size_t y) {
          return saving(x) < saving(y) || (saving(x) == saving(y) && x > y);
        });
        st_.place(*victim, kUnplaced);
        mem.erase(victim);
      }
      if (st_.over_caps(j)) {
        out.note =
            "greedy: sub-cluster " + std::to_string(j) + " is over its caps with its pinned models alone";
        return false;
      }
    }
    // The rest, largest first, into the least loaded sub-cluster that fits.
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < n; ++i) {
      if (st_.at(i) == kUnplaced) order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t x, std::size_t y) { return key(x) > key(y); });
    for (std::size_t i : order) {
      int best = kUnplaced;
      for (std::size_t j = 0; j < L; ++j) {
        if (!p_.permits(i, j) || !st_.fits(i, j)) continue;
        if (!within(st_.cost() + st_.cost_at(i, static_cast<int>(j)), p_.max_disruption)) continue;
        if (best == kUnplaced || load(j) < load(static_cast<std::size_t>(best)) - kEps)
          best = static_cast<int>(j);
      }
      if (best == kUnplaced) {
        out.note = "greedy found no sub-cluster for model '" + p_.models[i].name +
                   "' within the caps and the disruption bound";
        return false;
      }
      st_.place(i, best);
    }
    return true;
  }

  void refresh_deviations() {
    const std::size_t L = p_.num_subclusters();
    std::vector<double> r(L), s(L);
    for (std::size_t j = 0; j < L; ++j) {
      r[j] = st_.rate(j);
      s[j] = st_.static_memory(j);
    }
    dr_.compute(r, avg_.rate);
    ds_.compute(s, avg_.static_memory);
  }

  // Objective and tie-breaker after shifting x (normalised rate) and y
  // (normalised static memory) from sub-cluster a to b.
  std::pair<double, double> after(std::size_t a, std::size_t b, double x, double y) const {
    const double ra = dr_.dev[a] - x, rb = dr_.dev[b] + x;
    const double sa = ds_.dev[a] - y, sb = ds_.dev[b] + y;
    const double f = w_.rate * std::max({dr_.max_except(a, b), std::abs(ra), std::abs(rb)}) +
                     w_.memory * std::max({ds_.max_except(a, b), std::abs(sa), std::abs(sb)});
    const double ss = ss_ +
                      w_.rate * (ra * ra + rb * rb - dr_.dev[a] * dr_.dev[a] - dr_.dev[b] * dr_.dev[b]) +
                      w_.memory * (sa * sa + sb * sb - ds_.dev[a] * ds_.dev[a] - ds_.dev[b] * ds_.dev[b]);
    return {f, ss};
  }
  bool better(std::pair<double, double> c, std::pair<double, double> than) const {
    return c.first < than.first - kEps || (c.first <= than.first + kEps && c.second < than.second - kEps);
  }
  double nr(std::size_t i) const { return avg_.rate > 0 ? p_.models[i].rate / avg_.rate : 0.0; }
  double ns(std::size_t i) const {
    return avg_.static_memory > 0 ? p_.models[i].static_memory / avg_.static_memory : 0.0;
  }

  bool move_ok(std::size_t i, std::size_t b) const {
    return !p_.is_pinned(i) && p_.permits(i, b) && st_.fits(i, b) &&
           within(st_.cost() - st_.cost_at(i, st_.at(i)) + st_.cost_at(i, static_cast<int>(b)),
                  p_.max_disruption);
  }
  bool swap_ok(std::size_t i, std::size_t k) const {
    if (p_.is_pinned(i) || p_.is_pinned(k)) return false;
    const auto a = static_cast<std::size_t>(st_.at(i)), b = static_cast<std::size_t>(st_.at(k));
    if (!p_.permits(i, b) || !p_.permits(k, a)) return false;
    const Model& mi = p_.models[i];
    const Model& mk = p_.models[k];
    const SubCluster& ca = p_.subclusters[a];
    const SubCluster& cb = p_.subclusters[b];
    if (!within(st_.rate(a) - mi.rate + mk.rate, ca.rate_cap)) return false;
    if (!within(st_.rate(b) - mk.rate + mi.rate, cb.rate_cap)) return false;
    if (!within(st_.static_memory(a) - mi.static_memory + mk.static_memory +
                    std::max(st_.max_dynamic_without(a, i), mk.dynamic_memory),
                ca.memory_cap)) {
      return false;
    }
    if (!within(st_.static_memory(b) - mk.static_memory + mi.static_memory +
                    std::max(st_.max_dynamic_without(b, k), mi.dynamic_memory),
                cb.memory_cap)) {
      return false;
    }
    const double cost = st_.cost() - st_.cost_at(i, st_.at(i)) - st_.cost_at(k, st_.at(k)) +
                        st_.cost_at(i, st_.at(k)) + st_.cost_at(k, st_.at(i));
    return within(cost, p_.max_disruption);
  }

  void improve(MethodOutput& out) {
    const std::size_t n = p_.size();
    const std::size_t L = p_.num_subclusters();
    if (L < 2) return;
    std::size_t swap_start = 0;
    std::uint64_t checks = 0;
    auto out_of_time = [&] {
      if ((++checks & 1023) != 0) return false;
      return deadline_.expired();
    };
    for (;;) {
      if (deadline_.expired()) {
        out.time_limit_hit = true;
        return;
      }
      refresh_deviations();
      ss_ = w_.rate * dr_.sum_squares() + w_.memory * ds_.sum_squares();
      const std::pair<double, double> now{w_.rate * dr_.max() + w_.memory * ds_.max(), ss_};
      // Best single move.
      std::pair<double, double> best = now;
      std::size_t bi = n, bb = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const auto a = static_cast<std::size_t>(st_.at(i));
        for (std::size_t b = 0; b < L; ++b) {
          if (b == a || !move_ok(i, b)) continue;
          const auto c = after(a, b, nr(i), ns(i));
          if (better(c, best)) {
            best = c;
            bi = i;
            bb = b;
          }
        }
      }
      if (bi < n) {
        st_.place(bi, static_cast<int>(bb));
        ++out.work;
        continue;
      }
      // First improving swap, scanning from where the last one was found.
      bool swapped = false;
      for (std::size_t t = 0; t < n && !swapped; ++t) {
        const std::size_t i = (swap_start + t) % n;
        const auto a = static_cast<std::size_t>(st_.at(i));
        for (std::size_t k = i + 1; k < n; ++k) {
          if (out_of_time()) {
            out.time_limit_hit = true;
            return;
          }
          const auto b = static_cast<std::size_t>(st_.at(k));
          if (a == b) continue;
          const auto c = after(a, b, nr(i) - nr(k), ns(i) - ns(k));
          if (!better(c, now) || !swap_ok(i, k)) continue;
          st_.place(i, static_cast<int>(b));
          st_.place(k, static_cast<int>(a));
          ++out.work;
          swap_start = i;
          swapped = true;
          break;
        }
      }
      if (!swapped) return;  // a local optimum
    }
  }

  const Problem& p_;
  const CpuDeadline& deadline_;
  State st_;
  Averages avg_;
  Weights w_;
  Deviations dr_, ds_;
  double ss_ = 0;
};

}  // namespace

MethodOutput solve_greedy(const Problem& p, const Options& /*o*/, const CpuDeadline& deadline) {
  return Greedy(p, deadline).run();
}

}  // namespace symphony::partition::detail
