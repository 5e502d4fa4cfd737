// LatencyHistogram: percentiles of non-negative durations in fixed memory, the one histogram behind
// every latency figure Symphony reports, so that their percentiles compare. Log-linear buckets
// (HdrHistogram's idea; docs/architecture.md#core): exact below 512 ns, then 256 buckets per power of two.
//
// percentile(q) is the value of rank r = max(1, round(q * n)) among the n recorded values in ascending
// order (halves down: the nearest-rank quantile), reported as the midpoint of that value's bucket,
// clamped to [min(), max()]: within 0.2 % of the exact value, exact below 512 ns.
//
// Guarantees: the constructor allocates the counters once (70 KiB); record() and merge() are O(1) /
// O(buckets), noexcept and never allocate; percentile() is O(buckets); single-threaded (merge
// per-thread copies).
//
//   LatencyHistogram h;  h.record(Duration::milliseconds(3));  h.percentile(0.99);  // about 3 ms
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "symphony/time.hpp"

namespace symphony {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 8;  // 256 buckets per power of two
  static constexpr int kMaxBits = 42;
  static constexpr std::uint32_t kLinear = 2u << kSubBits;  // 512 exact buckets
  static constexpr std::uint32_t kBuckets = kLinear + (kMaxBits - kSubBits - 1) * (1u << kSubBits);

  LatencyHistogram() : counts_(kBuckets) {}

  // Records one value; negative durations count as zero.
  void record(Duration d) noexcept { record_ns(d.ns()); }
  void record_ns(std::int64_t v) noexcept {
    if (v < 0) v = 0;
    ++counts_[index(static_cast<std::uint64_t>(v))];
    if (n_ == 0 || v < min_) min_ = v;
    if (n_ == 0 || v > max_) max_ = v;
    ++n_;
    sum_ += static_cast<double>(v);
  }

  // Adds every value recorded in `o`.
  void merge(const LatencyHistogram& o) noexcept {
    if (o.n_ == 0) return;
    for (std::uint32_t i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
    min_ = n_ == 0 ? o.min_ : std::min(min_, o.min_);
    max_ = n_ == 0 ? o.max_ : std::max(max_, o.max_);
    n_ += o.n_;
    sum_ += o.sum_;
  }

  void clear() noexcept {
    std::fill(counts_.begin(), counts_.end(), 0);
    n_ = 0;
    min_ = max_ = 0;
    sum_ = 0;
  }

  std::uint64_t count() const noexcept { return n_; }
  // Zero when empty.
  Duration min() const noexcept { return Duration::nanoseconds(min_); }
  Duration max() const noexcept { return Duration::nanoseconds(max_); }
  // The sum of the recorded values, in nanoseconds (exact below 2^53 ns).
  double sum_ns() const noexcept { return sum_; }
  Duration mean() const noexcept {
    return n_ ? Duration::nanoseconds(static_cast<std::int64_t>(sum_ / static_cast<double>(n_) + 0.5))
              : Duration::zero();
  }

  // The q-quantile (q in [0, 1]) by the convention above; zero when empty.
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

  // How many recorded values are <= `bound`, to the bucket: values in the
  // bucket that holds `bound` count only if the whole bucket is <= it
  // (cumulative buckets of an exported histogram).
  std::uint64_t count_at_or_below(Duration bound) const noexcept {
    if (bound < Duration::zero()) return 0;
    const auto b = static_cast<std::uint64_t>(bound.ns());
    std::uint32_t last = index(b);
    if (static_cast<std::uint64_t>(upper_bound(last)) > b) {
      if (last == 0) return 0;
      --last;
    }
    std::uint64_t seen = 0;
    for (std::uint32_t i = 0; i <= last; ++i) seen += counts_[i];
    return seen;
  }

  // Bucket boundaries (tests).
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
  std::vector<std::uint64_t> counts_;
  std::uint64_t n_ = 0;
  std::int64_t min_ = 0, max_ = 0;
  double sum_ = 0;
};

}  // namespace symphony
