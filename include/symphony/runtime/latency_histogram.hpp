// LatencyHistogram: percentiles of non-negative durations in fixed memory.
//
// The runtime records one dispatch lag per batch and the stress tool one
// latency per request, millions per second, on the recording thread with no
// allocation. A log-linear layout (HdrHistogram's idea) keeps the relative
// error of every recorded value below 1/kSubBuckets (under 0.8 %): values
// below kSubBuckets ns are exact; above, each power-of-two range is split into
// kSubBuckets/2 equal buckets.
//
// Guarantees: record() is O(1), noexcept, allocation-free; the storage (about
// 30 KiB) is allocated once by the constructor; percentile() is O(buckets);
// single-threaded (merge() per-thread copies to combine them).
//
//   LatencyHistogram h;
//   h.record(Duration::microseconds(12));
//   h.percentile(0.99);  // an upper bound of the p99, within 0.8 %
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "symphony/time.hpp"

namespace symphony {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 7;
  static constexpr std::uint64_t kSubBuckets = std::uint64_t{1} << kSubBits;  // 128
  static constexpr std::size_t kBuckets = kSubBuckets + (64 - kSubBits) * (kSubBuckets / 2);

  LatencyHistogram() : counts_(kBuckets, 0) {}

  // Records one value; negative durations count as zero.
  void record(Duration d) noexcept { record_ns(d.ns() < 0 ? 0 : static_cast<std::uint64_t>(d.ns())); }

  void record_ns(std::uint64_t v) noexcept {
    ++counts_[index_of(v)];
    ++count_;
    sum_ += v;
    max_ = std::max(max_, v);
    min_ = std::min(min_, v);
  }

  // Adds every value recorded in `o`.
  void merge(const LatencyHistogram& o) noexcept {
    for (std::size_t i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
    count_ += o.count_;
    sum_ += o.sum_;
    max_ = std::max(max_, o.max_);
    min_ = std::min(min_, o.min_);
  }

  void clear() noexcept {
    std::fill(counts_.begin(), counts_.end(), 0);
    count_ = 0;
    sum_ = 0;
    max_ = 0;
    min_ = ~std::uint64_t{0};
  }

  std::uint64_t count() const noexcept { return count_; }
  Duration max() const noexcept { return ns(count_ ? max_ : 0); }
  Duration min() const noexcept { return ns(count_ ? min_ : 0); }
  Duration mean() const noexcept { return ns(count_ ? sum_ / count_ : 0); }

  // The smallest bucket bound at or above which lies a fraction q of the
  // values (q in [0, 1]); never above max(). Zero when empty.
  Duration percentile(double q) const noexcept {
    if (count_ == 0) return Duration::zero();
    q = std::clamp(q, 0.0, 1.0);
    auto rank = static_cast<std::uint64_t>(q * static_cast<double>(count_) + 0.5);
    rank = std::clamp<std::uint64_t>(rank, 1, count_);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= rank) return ns(std::min(upper_bound_of(i), max_));
    }
    return ns(max_);
  }

  // The bucket a value falls in, and the largest value of a bucket (tests).
  static std::size_t index_of(std::uint64_t v) noexcept {
    if (v < kSubBuckets) return static_cast<std::size_t>(v);
    const int shift = static_cast<int>(std::bit_width(v)) - kSubBits;  // >= 1
    const std::uint64_t mantissa = v >> shift;                         // in [kSubBuckets/2, kSubBuckets)
    return static_cast<std::size_t>(kSubBuckets + static_cast<std::uint64_t>(shift - 1) * (kSubBuckets / 2) +
                                    (mantissa - kSubBuckets / 2));
  }
  static std::uint64_t upper_bound_of(std::size_t i) noexcept {
    if (i < kSubBuckets) return i;
    const std::uint64_t k = i - kSubBuckets;
    const int shift = static_cast<int>(k / (kSubBuckets / 2)) + 1;
    const std::uint64_t mantissa = k % (kSubBuckets / 2) + kSubBuckets / 2;
    return ((mantissa + 1) << shift) - 1;
  }

 private:
  static Duration ns(std::uint64_t v) noexcept { return Duration::nanoseconds(static_cast<std::int64_t>(v)); }

  std::vector<std::uint64_t> counts_;
  std::uint64_t count_ = 0;
  std::uint64_t sum_ = 0;
  std::uint64_t max_ = 0;
  std::uint64_t min_ = ~std::uint64_t{0};
};

}  // namespace symphony
