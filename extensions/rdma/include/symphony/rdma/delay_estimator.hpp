// WindowedPercentile: a high percentile of the last N samples of a delay, as
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

}  // namespace symphony::rdma
