// WindowedPercentile (and BatchCostFit): a high percentile of the last N samples of a delay, as
// the paper's scheduler estimates network delays ("the high percentile bound
// of network latency", §5 "Impact of network").
//
// Guarantees: add() is O(1) and allocation-free (a ring of N samples);
// percentile() is O(N) (a copy and nth_element), meant to run every few
// hundred milliseconds, not per sample. Single-threaded.
//
//   WindowedPercentile w(1000);
//   w.add(Duration::microseconds(80));
//   Duration d = w.percentile(0.99);
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "symphony/time.hpp"

namespace symphony::rdma {

class WindowedPercentile {
 public:
  // REQUIRES: window >= 1.
  explicit WindowedPercentile(std::uint32_t window) : ring_(window) {}

  void add(Duration d) noexcept {
    ring_[next_] = d.ns() < 0 ? 0 : d.ns();
    next_ = next_ + 1 == ring_.size() ? 0 : next_ + 1;
    if (count_ < ring_.size()) ++count_;
    ++total_;
  }

  // The q-quantile (0 < q <= 1, nearest rank) of the samples in the window;
  // zero when there are none.
  Duration percentile(double q) const {
    if (count_ == 0) return Duration::zero();
    scratch_.assign(ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(count_));
    std::size_t rank = static_cast<std::size_t>(q * static_cast<double>(count_) + 0.999999);
    rank = std::clamp<std::size_t>(rank, 1, count_) - 1;
    std::nth_element(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(rank), scratch_.end());
    return Duration::nanoseconds(scratch_[rank]);
  }

  std::size_t size() const noexcept { return count_; }
  std::uint64_t total() const noexcept { return total_; }

 private:
  std::vector<std::int64_t> ring_;
  mutable std::vector<std::int64_t> scratch_;
  std::size_t next_ = 0;
  std::size_t count_ = 0;
  std::uint64_t total_ = 0;
};

// A high-percentile fit of a per-batch cost that grows with the batch size,
// cost(b) ~ fixed + per_item * b, over the last N batches: per_item is the
// least-squares slope (never negative) and fixed the q-quantile of what
// remains (cost - per_item * b, never negative). The scheduler fits a batch's
// input reads this way: with adjacent inputs read in one go, most of a small
// batch's read time is a round trip, not a cost per request, and charging it
// per request would make large batches look far slower to start than they
// are.
//
// Guarantees: add() O(1), no allocation; fit() O(N). Single-threaded.
class BatchCostFit {
 public:
  struct Fit {
    Duration fixed;
    Duration per_item;
  };

  // REQUIRES: window >= 1.
  explicit BatchCostFit(std::uint32_t window) : b_(window), cost_(window), resid_(window) {}

  void add(std::uint32_t items, Duration cost) noexcept {
    b_[next_] = static_cast<double>(items);
    cost_[next_] = static_cast<double>(cost.ns() < 0 ? 0 : cost.ns());
    next_ = next_ + 1 == b_.size() ? 0 : next_ + 1;
    if (count_ < b_.size()) ++count_;
  }

  Fit fit(double q) const {
    if (count_ == 0) return {};
    double mb = 0, mc = 0;
    for (std::size_t i = 0; i < count_; ++i) {
      mb += b_[i];
      mc += cost_[i];
    }
    mb /= static_cast<double>(count_);
    mc /= static_cast<double>(count_);
    double cov = 0, var = 0;
    for (std::size_t i = 0; i < count_; ++i) {
      cov += (b_[i] - mb) * (cost_[i] - mc);
      var += (b_[i] - mb) * (b_[i] - mb);
    }
    const double slope = var > 0 ? std::max(0.0, cov / var) : 0.0;
    for (std::size_t i = 0; i < count_; ++i) resid_[i] = cost_[i] - slope * b_[i];
    std::size_t rank = static_cast<std::size_t>(q * static_cast<double>(count_) + 0.999999);
    rank = std::clamp<std::size_t>(rank, 1, count_) - 1;
    std::nth_element(resid_.begin(), resid_.begin() + static_cast<std::ptrdiff_t>(rank),
                     resid_.begin() + static_cast<std::ptrdiff_t>(count_));
    return {Duration::nanoseconds(static_cast<std::int64_t>(std::max(0.0, resid_[rank]))),
            Duration::nanoseconds(static_cast<std::int64_t>(slope + 0.5))};
  }

  std::size_t size() const noexcept { return count_; }

 private:
  std::vector<double> b_, cost_;
  mutable std::vector<double> resid_;
  std::size_t next_ = 0;
  std::size_t count_ = 0;
};

}  // namespace symphony::rdma
