// Sub-cluster labels: when the sub-clusters are identical, any permutation of
// an assignment's labels is the same partition with the same objective, so
// the labels can be chosen to keep as many models as possible where they
// are now (an assignment problem between new and current labels).
#include <algorithm>
#include <limits>
#include <tuple>

#include "internal.hpp"

namespace symphony::partition::detail {

bool identical_subclusters(const Problem& p) {
  const SubCluster& s0 = p.subclusters.front();
  return !p.any_restricted() &&
         std::all_of(p.subclusters.begin(), p.subclusters.end(), [&](const SubCluster& s) {
           return s.rate_cap == s0.rate_cap && s.memory_cap == s0.memory_cap && s.cost_scale == s0.cost_scale;
         });
}

namespace {

// What keeping a pinned model's label counts for: more than any move saves.
constexpr double kPinnedSaving = 1e12;

// Hungarian algorithm (shortest augmenting paths with potentials), O(L^3):
// the permutation `to` minimising sum_a cost[a][to[a]].
std::vector<std::size_t> min_cost_permutation(const std::vector<std::vector<double>>& cost) {
  const std::size_t n = cost.size();
  const double inf = std::numeric_limits<double>::infinity();
  // 1-based; column 0 is the virtual start.
  std::vector<double> u(n + 1, 0), v(n + 1, 0);
  std::vector<std::size_t> match(n + 1, 0), way(n + 1, 0);
  for (std::size_t row = 1; row <= n; ++row) {
    match[0] = row;
    std::size_t col0 = 0;
    std::vector<double> minv(n + 1, inf);
    std::vector<bool> used(n + 1, false);
    do {
      used[col0] = true;
      const std::size_t r = match[col0];
      double delta = inf;
      std::size_t col1 = 0;
      for (std::size_t c = 1; c <= n; ++c) {
        if (used[c]) continue;
        const double cur = cost[r - 1][c - 1] - u[r] - v[c];
        if (cur < minv[c]) {
          minv[c] = cur;
          way[c] = col0;
        }
        if (minv[c] < delta) {
          delta = minv[c];
          col1 = c;
        }
      }
      for (std::size_t c = 0; c <= n; ++c) {
        if (used[c]) {
          u[match[c]] += delta;
          v[c] -= delta;
        } else {
          minv[c] -= delta;
        }
      }
      col0 = col1;
    } while (match[col0] != 0);
    do {
      const std::size_t col1 = way[col0];
      match[col0] = match[col1];
      col0 = col1;
    } while (col0 != 0);
  }
  std::vector<std::size_t> to(n);
  for (std::size_t c = 1; c <= n; ++c) to[match[c] - 1] = c - 1;
  return to;
}

}  // namespace

void relabel_towards_current(const Problem& p, std::vector<int>& a) {
  const std::size_t L = p.num_subclusters();
  if (p.current.empty() || a.empty() || L < 2 || !identical_subclusters(p)) return;
  // kept[x][y]: the move cost saved by calling new sub-cluster x "y".
  std::vector<std::vector<double>> saved(L, std::vector<double>(L, 0.0));
  bool any = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const int cur = p.current_of(i);
    if (cur == kUnplaced) continue;
    const auto x = static_cast<std::size_t>(a[i]);
    const auto y = static_cast<std::size_t>(cur);
    // A pinned model (where the solver left it) keeps its label whatever
    // the others save.
    saved[x][y] += p.is_pinned(i) ? kPinnedSaving : 2 * p.cost(i, y);
    any = true;
  }
  if (!any) return;
  std::vector<std::size_t> to(L);
  if (L <= 512) {
    std::vector<std::vector<double>> cost(L, std::vector<double>(L));
    for (std::size_t x = 0; x < L; ++x) {
      for (std::size_t y = 0; y < L; ++y) cost[x][y] = -saved[x][y];
    }
    to = min_cost_permutation(cost);
  } else {
    // Many sub-clusters: greedy matching by the largest saving.
    std::vector<std::tuple<double, std::size_t, std::size_t>> pairs;
    for (std::size_t x = 0; x < L; ++x) {
      for (std::size_t y = 0; y < L; ++y) {
        if (saved[x][y] > 0) pairs.emplace_back(-saved[x][y], x, y);
      }
    }
    std::sort(pairs.begin(), pairs.end());
    std::vector<bool> x_done(L, false), y_done(L, false);
    std::fill(to.begin(), to.end(), L);
    for (const auto& [s, x, y] : pairs) {
      if (x_done[x] || y_done[y]) continue;
      x_done[x] = y_done[y] = true;
      to[x] = y;
    }
    std::size_t y = 0;
    for (std::size_t x = 0; x < L; ++x) {
      if (to[x] != L) continue;
      while (y_done[y]) ++y;
      y_done[y] = true;
      to[x] = y;
    }
  }
  for (int& j : a) j = static_cast<int>(to[static_cast<std::size_t>(j)]);
}

}  // namespace symphony::partition::detail
