// WindowedPercentile and BatchCostFit: high percentiles of recent delay
// samples, as the paper's scheduler estimates network delays ("the high
// percentile bound of network latency", §5 "Impact of network").
//
// A window holds the last N samples and forgets those older than a maximum
// age: a burst of slow samples cannot stay in the estimate once traffic has
// stopped (a scheduler that planned with a stale, huge delay would drop every
// request as infeasible, dispatch nothing, and never measure again).
//
// Guarantees: add() is O(1) and allocation-free (rings of N samples);
// percentile() and fit() are O(N) (a copy and nth_element), meant to run
// every few hundred milliseconds, not per sample. Single-threaded.
//
//   WindowedPercentile w(1000, Duration::seconds(5));
//   w.add(now, Duration::microseconds(80));
//   Duration d = w.percentile(0.99, now);
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "symphony/time.hpp"

namespace symphony::cluster {

class WindowedPercentile {
 public:
  // REQUIRES: window >= 1, max_age > 0.
  WindowedPercentile(std::uint32_t window, Duration max_age)
      : ring_(window), at_(window), max_age_(max_age) {}

  void add(TimePoint now, Duration d) noexcept {
    ring_[next_] = d.ns() < 0 ? 0 : d.ns();
    at_[next_] = now;
    next_ = next_ + 1 == ring_.size() ? 0 : next_ + 1;
    if (count_ < ring_.size()) ++count_;
    ++total_;
  }

  // The q-quantile (0 < q <= 1, nearest rank) of the samples at most max_age
  // old at `now`; zero when there are none.
  Duration percentile(double q, TimePoint now) const {
    scratch_.clear();
    for (std::size_t i = 0; i < count_; ++i)
      if (now - at_[i] <= max_age_) scratch_.push_back(ring_[i]);
    if (scratch_.empty()) return Duration::zero();
    std::size_t rank = static_cast<std::size_t>(q * static_cast<double>(scratch_.size()) + 0.999999);
    rank = std::clamp<std::size_t>(rank, 1, scratch_.size()) - 1;
    std::nth_element(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(rank), scratch_.end());
    return Duration::nanoseconds(scratch_[rank]);
  }

  // Samples at most max_age old at `now`.
  std::size_t recent(TimePoint now) const noexcept {
    std::size_t n = 0;
    for (std::size_t i = 0; i < count_; ++i) n += now - at_[i] <= max_age_;
    return n;
  }
  std::uint64_t total() const noexcept { return total_; }

 private:
  std::vector<std::int64_t> ring_;
  std::vector<TimePoint> at_;
  mutable std::vector<std::int64_t> scratch_;
  Duration max_age_;
  std::size_t next_ = 0;
  std::size_t count_ = 0;
  std::uint64_t total_ = 0;
};

// A high-percentile fit of a per-batch cost that grows with the batch size,
// cost(b) ~ fixed + per_item * b, over the recent batches: per_item is the
// least-squares slope (never negative) and fixed the q-quantile of what
// remains (cost - per_item * b, never negative). The scheduler fits a batch's
// input reads this way: with adjacent inputs read in one go, most of a small
// batch's read time is a round trip, not a cost per request, and charging it
// per request would make large batches look far slower to start than they
// are.
class BatchCostFit {
 public:
  struct Fit {
    Duration fixed;
    Duration per_item;
  };

  // REQUIRES: window >= 1, max_age > 0.
  BatchCostFit(std::uint32_t window, Duration max_age)
      : b_(window), cost_(window), at_(window), max_age_(max_age) {}

  void add(TimePoint now, std::uint32_t items, Duration cost) noexcept {
    b_[next_] = static_cast<double>(items);
    cost_[next_] = static_cast<double>(cost.ns() < 0 ? 0 : cost.ns());
    at_[next_] = now;
    next_ = next_ + 1 == b_.size() ? 0 : next_ + 1;
    if (count_ < b_.size()) ++count_;
  }

  // The fit over the samples at most max_age old at `now` (zero without any).
  Fit fit(double q, TimePoint now) const {
    idx_.clear();
    for (std::size_t i = 0; i < count_; ++i)
      if (now - at_[i] <= max_age_) idx_.push_back(i);
    if (idx_.empty()) return {};
    const auto n = static_cast<double>(idx_.size());
    double mb = 0, mc = 0;
    for (std::size_t i : idx_) {
      mb += b_[i];
      mc += cost_[i];
    }
    mb /= n;
    mc /= n;
    double cov = 0, var = 0;
    for (std::size_t i : idx_) {
      cov += (b_[i] - mb) * (cost_[i] - mc);
      var += (b_[i] - mb) * (b_[i] - mb);
    }
    const double slope = var > 0 ? std::max(0.0, cov / var) : 0.0;
    resid_.clear();
    for (std::size_t i : idx_) resid_.push_back(cost_[i] - slope * b_[i]);
    std::size_t rank = static_cast<std::size_t>(q * n + 0.999999);
    rank = std::clamp<std::size_t>(rank, 1, resid_.size()) - 1;
    std::nth_element(resid_.begin(), resid_.begin() + static_cast<std::ptrdiff_t>(rank), resid_.end());
    return {Duration::nanoseconds(static_cast<std::int64_t>(std::max(0.0, resid_[rank]))),
            Duration::nanoseconds(static_cast<std::int64_t>(slope + 0.5))};
  }

 private:
  std::vector<double> b_, cost_;
  std::vector<TimePoint> at_;
  mutable std::vector<double> resid_;
  mutable std::vector<std::size_t> idx_;
  Duration max_age_;
  std::size_t next_ = 0;
  std::size_t count_ = 0;
};

}  // namespace symphony::cluster
