// A log-linear histogram of non-negative integer durations (nanoseconds) for
// latency percentiles: fixed memory, O(1) record, bounded relative error.
//
// Values below 512 ns have a bucket each; above, every power-of-two range is
// split into 256 equal buckets, so a reported percentile is within 0.2 % of
// the exact one (it is the bucket's midpoint, clamped to the observed min and
// max). Values from 2^42 ns (73 minutes) on share the last bucket.
//
// Guarantees: construction allocates one array of kBuckets counters; record()
// and merge() never allocate; percentile() is O(kBuckets).
//
//   DurationHistogram h;
//   h.record(Duration::milliseconds(3));
//   h.percentile(0.99);  // about 3 ms
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "symphony/time.hpp"

namespace symphony::sim {

class DurationHistogram {
 public:
  static constexpr int kSubBits = 8;  // 256 buckets per power of two
  static constexpr int kMaxBits = 42;
  static constexpr std::uint32_t kLinear = 2u << kSubBits;  // 512 exact buckets
  static constexpr std::uint32_t kBuckets = kLinear + (kMaxBits - kSubBits - 1) * (1u << kSubBits);

  DurationHistogram() : counts_(kBuckets) {}

  // Negative durations count as zero.
  void record(Duration d) noexcept { record_ns(d.ns()); }
  void record_ns(std::int64_t v) noexcept {
    if (v < 0) v = 0;
    ++counts_[index(static_cast<std::uint64_t>(v))];
    if (n_ == 0 || v < min_) min_ = v;
    if (n_ == 0 || v > max_) max_ = v;
    ++n_;
    sum_ += static_cast<double>(v);
  }

  void merge(const DurationHistogram& o) noexcept {
    if (o.n_ == 0) return;
    for (std::uint32_t i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
    min_ = n_ == 0 ? o.min_ : std::min(min_, o.min_);
    max_ = n_ == 0 ? o.max_ : std::max(max_, o.max_);
    n_ += o.n_;
    sum_ += o.sum_;
  }

  std::uint64_t count() const noexcept { return n_; }
  Duration min() const noexcept { return Duration::nanoseconds(min_); }
  Duration max() const noexcept { return Duration::nanoseconds(max_); }
  Duration mean() const noexcept {
    return n_ ? Duration::nanoseconds(static_cast<std::int64_t>(sum_ / static_cast<double>(n_) + 0.5))
              : Duration::zero();
  }

  // The q-quantile (0 <= q <= 1) by nearest rank: a value v such that at
  // least a fraction q of the samples is <= v (within the bucket precision).
  // Zero when empty.
  Duration percentile(double q) const noexcept {
    if (n_ == 0) return Duration::zero();
    q = std::clamp(q, 0.0, 1.0);
    auto rank = static_cast<std::uint64_t>(q * static_cast<double>(n_) + 0.5 - 1e-9);
    rank = std::clamp<std::uint64_t>(rank, 1, n_);
    std::uint64_t seen = 0;
    for (std::uint32_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= rank) {
        const std::int64_t lo = lower_bound(i), hi = upper_bound(i);
        return Duration::nanoseconds(std::clamp(lo + (hi - lo) / 2, min_, max_));
      }
    }
    return Duration::nanoseconds(max_);
  }

  // Bucket boundaries, for tests.
  static std::uint32_t index(std::uint64_t v) noexcept {
    if (v < kLinear) return static_cast<std::uint32_t>(v);
    const int msb = static_cast<int>(std::bit_width(v)) - 1;  // >= kSubBits + 1
    if (msb >= kMaxBits) return kBuckets - 1;
    const int shift = msb - kSubBits;                         // >= 1
    const auto top = static_cast<std::uint32_t>(v >> shift);  // in [256, 511]
    return kLinear + static_cast<std::uint32_t>(shift - 1) * (1u << kSubBits) + (top - (1u << kSubBits));
  }
  static std::int64_t lower_bound(std::uint32_t i) noexcept {
    if (i < kLinear) return i;
    const std::uint32_t k = i - kLinear;
    const int shift = static_cast<int>(k >> kSubBits) + 1;
    const std::uint64_t top = (k & ((1u << kSubBits) - 1)) + (1u << kSubBits);
    return static_cast<std::int64_t>(top << shift);
  }
  static std::int64_t upper_bound(std::uint32_t i) noexcept {
    if (i < kLinear) return i;
    if (i == kBuckets - 1) return std::int64_t{1} << 62;
    return lower_bound(i + 1) - 1;
  }

 private:
  std::vector<std::uint32_t> counts_;
  std::uint64_t n_ = 0;
  std::int64_t min_ = 0, max_ = 0;
  double sum_ = 0;
};

}  // namespace symphony::sim
