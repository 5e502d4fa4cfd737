// Latency profiles l(b): how long a batch of b requests of a model runs.
//
// A profile is either linear, l(b) = alpha*b + beta (the paper's fit, §2.1),
// or a table of measured points. Tables may be sparse (a profiler measures a
// geometric grid of batch sizes); missing sizes are linearly interpolated
// between neighbouring points, never filled with a sentinel. Sizes below the
// first measured point take the first point's latency (a safe upper bound for a
// non-decreasing profile). Tables must be non-empty, use batch sizes >= 1 in
// increasing order and be monotone non-decreasing; anything else is rejected
// with a message naming the offending entry.
//
// Guarantees: construction allocates one dense table of max_batch+1 entries;
// latency(b) is O(1), largest_batch_within(budget) is O(log max_batch); both
// are noexcept and allocation-free.
//
//   auto p = LatencyProfile::linear(Duration::from_ms(1.053), Duration::from_ms(5.072), 64);
//   p->latency(16);                                       // 21.92 ms
//   p->largest_batch_within(Duration::milliseconds(20));  // 14
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "symphony/status.hpp"
#include "symphony/time.hpp"

namespace symphony {

// One measured point of a latency table.
struct ProfilePoint {
  std::uint32_t batch = 0;
  Duration latency;
};

// A profile's l(b) table without the profile: what the scheduling policies
// read on every arrival. It is two words that the model's slot holds, so
// that planning a batch reads the table directly instead of first loading the
// profile object (with many models, one cold line fewer per request). Valid
// while the profile lives; recalibration rewrites the table in place.
class LatencyView {
 public:
  LatencyView() = default;

  std::uint32_t max_batch() const noexcept { return max_batch_; }

  // REQUIRES: 1 <= b <= max_batch().
  Duration latency(std::uint32_t b) const noexcept {
    SYMPHONY_ASSERT(b >= 1 && b <= max_batch_);
    return table_[b];
  }

  // l(b), or infinity when b exceeds max_batch (a batch that cannot exist).
  Duration latency_or_infinite(std::uint32_t b) const noexcept {
    return b <= max_batch_ ? table_[b] : Duration::infinite();
  }

  // Returns the largest b in [1, limit] with l(b) <= budget, or 0 when even
  // l(1) exceeds the budget. limit is clamped to max_batch().
  std::uint32_t largest_batch_within(Duration budget, std::uint32_t limit = ~0u) const noexcept {
    std::uint32_t hi = std::min(limit, max_batch_);
    if (hi == 0 || table_[1] > budget) return 0;
    if (table_[hi] <= budget) return hi;
    std::uint32_t lo = 1;  // table_[lo] <= budget < table_[hi]
    while (hi - lo > 1) {
      const std::uint32_t mid = lo + (hi - lo) / 2;
      if (table_[mid] <= budget)
        lo = mid;
      else
        hi = mid;
    }
    return lo;
  }

 private:
  friend class LatencyProfile;
  LatencyView(const Duration* table, std::uint32_t max_batch) noexcept
      : table_(table), max_batch_(max_batch) {}

  const Duration* table_ = nullptr;  // table_[b] = l(b); table_[0] unused
  std::uint32_t max_batch_ = 0;
};

class LatencyProfile {
 public:
  // An empty profile (max_batch() == 0): a placeholder that every consumer
  // rejects. Build real ones with linear() or from_table().
  LatencyProfile() : table_(1) {}

  // Largest max_batch a profile accepts; far beyond any real model.
  static constexpr std::uint32_t kMaxBatchLimit = 1u << 16;

  // l(b) = alpha*b + beta for 1 <= b <= max_batch.
  static Result<LatencyProfile> linear(Duration alpha, Duration beta, std::uint32_t max_batch) {
    if (max_batch == 0 || max_batch > kMaxBatchLimit)
      return Status(Errc::kInvalidArgument, "max_batch must be in [1, " + std::to_string(kMaxBatchLimit) +
                                                "], got " + std::to_string(max_batch));
    if (alpha < Duration::zero() || beta < Duration::zero())
      return Status(Errc::kInvalidArgument, "linear profile needs alpha >= 0 and beta >= 0, got alpha=" +
                                                format_ms(alpha) + " ms, beta=" + format_ms(beta) + " ms");
    if (alpha + beta <= Duration::zero())
      return Status(Errc::kInvalidArgument, "linear profile has l(1) = 0; a batch must take time");
    LatencyProfile p;
    p.alpha_ = alpha;
    p.beta_ = beta;
    p.table_.resize(max_batch + 1);
    for (std::uint32_t b = 1; b <= max_batch; ++b) p.table_[b] = alpha * b + beta;
    return p;
  }

  // A table of measured points, interpolated between points. max_batch = 0
  // means "the largest batch in the table"; a larger value extrapolates with
  // the slope of the last two points.
  static Result<LatencyProfile> from_table(std::span<const ProfilePoint> points,
                                           std::uint32_t max_batch = 0) {
    if (points.empty()) return Status(Errc::kInvalidArgument, "latency table is empty");
    for (std::size_t i = 0; i < points.size(); ++i) {
      const auto& p = points[i];
      if (p.batch == 0)
        return Status(Errc::kInvalidArgument,
                      "latency table entry " + std::to_string(i) + " has batch size 0; sizes start at 1");
      if (p.batch > kMaxBatchLimit)
        return Status(Errc::kInvalidArgument, "latency table entry " + std::to_string(i) +
                                                  " has batch size " + std::to_string(p.batch) +
                                                  " above the limit " + std::to_string(kMaxBatchLimit));
      if (p.latency <= Duration::zero())
        return Status(Errc::kInvalidArgument,
                      "latency table entry for batch " + std::to_string(p.batch) + " is not positive");
      if (i > 0 && p.batch <= points[i - 1].batch)
        return Status(Errc::kInvalidArgument, "latency table batch sizes must increase: batch " +
                                                  std::to_string(p.batch) + " follows batch " +
                                                  std::to_string(points[i - 1].batch));
      if (i > 0 && p.latency < points[i - 1].latency)
        return Status(Errc::kInvalidArgument, "latency table is not monotone: l(" + std::to_string(p.batch) +
                                                  ") = " + format_ms(p.latency) + " ms < l(" +
                                                  std::to_string(points[i - 1].batch) +
                                                  ") = " + format_ms(points[i - 1].latency) + " ms");
    }
    const std::uint32_t last = points.back().batch;
    if (max_batch == 0) max_batch = last;
    if (max_batch > kMaxBatchLimit)
      return Status(Errc::kInvalidArgument, "max_batch " + std::to_string(max_batch) + " above the limit " +
                                                std::to_string(kMaxBatchLimit));
    LatencyProfile p;
    p.table_.resize(max_batch + 1);
    std::size_t seg = 0;  // points[seg] <= b < points[seg+1]
    for (std::uint32_t b = 1; b <= max_batch; ++b) {
      while (seg + 1 < points.size() && points[seg + 1].batch <= b) ++seg;
      const auto& lo = points[seg];
      if (b <= points.front().batch) {
        p.table_[b] = points.front().latency;
      } else if (seg + 1 < points.size()) {
        const auto& hi = points[seg + 1];
        p.table_[b] = lo.latency + (hi.latency - lo.latency) * (b - lo.batch) / (hi.batch - lo.batch);
      } else if (points.size() >= 2) {  // beyond the last point: extend the last segment
        const auto& a = points[points.size() - 2];
        p.table_[b] = lo.latency + (lo.latency - a.latency) * (b - lo.batch) / (lo.batch - a.batch);
      } else {
        p.table_[b] = lo.latency;
      }
    }
    p.fit_linear();
    return p;
  }

  std::uint32_t max_batch() const noexcept { return static_cast<std::uint32_t>(table_.size()) - 1; }

  // The table as a view (LatencyView); valid while this profile lives.
  LatencyView view() const noexcept { return {table_.data(), max_batch()}; }

  // REQUIRES: 1 <= b <= max_batch().
  Duration latency(std::uint32_t b) const noexcept { return view().latency(b); }

  // l(b), or infinity when b exceeds max_batch (a batch that cannot exist).
  Duration latency_or_infinite(std::uint32_t b) const noexcept { return view().latency_or_infinite(b); }

  // Returns the largest b in [1, limit] with l(b) <= budget, or 0 when even
  // l(1) exceeds the budget. limit is clamped to max_batch().
  std::uint32_t largest_batch_within(Duration budget, std::uint32_t limit = ~0u) const noexcept {
    return view().largest_batch_within(budget, limit);
  }

  // Least-squares fit of l(b) = alpha*b + beta over every batch size (exact
  // for linear profiles). Used for reports and the analytical bound.
  Duration alpha() const noexcept { return alpha_; }
  Duration beta() const noexcept { return beta_; }

  std::span<const Duration> dense_table() const noexcept { return {table_.data() + 1, max_batch()}; }

  // Overwrites this profile with base's l(b) times scale(b) for every b
  // (rounded to the nanosecond, at least 1 ns, made monotone non-decreasing)
  // and refits alpha and beta. Online recalibration (profile_calibrator.hpp)
  // uses it. REQUIRES: max_batch() == base.max_batch(). O(max_batch), no
  // allocation.
  template <class Scale>
  void assign_scaled(const LatencyProfile& base, Scale&& scale) noexcept {
    SYMPHONY_ASSERT(max_batch() == base.max_batch());
    std::int64_t prev = 1;
    for (std::uint32_t b = 1; b <= max_batch(); ++b) {
      const double v = static_cast<double>(base.table_[b].ns()) * static_cast<double>(scale(b));
      prev = std::max(prev, static_cast<std::int64_t>(v + 0.5));
      table_[b] = Duration::nanoseconds(prev);
    }
    fit_linear();
  }

 private:
  void fit_linear() {
    const double n = max_batch();
    if (n < 2) {
      alpha_ = Duration::zero();
      beta_ = table_[1];
      return;
    }
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (std::uint32_t b = 1; b <= max_batch(); ++b) {
      const double x = b, y = static_cast<double>(table_[b].ns());
      sx += x;
      sy += y;
      sxx += x * x;
      sxy += x * y;
    }
    const double a = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    const double c = (sy - a * sx) / n;
    alpha_ = Duration::nanoseconds(static_cast<std::int64_t>(a + 0.5));
    beta_ = Duration::nanoseconds(static_cast<std::int64_t>(c + 0.5));
  }

  std::vector<Duration> table_;  // table_[b] = l(b); table_[0] unused
  Duration alpha_, beta_;
};

}  // namespace symphony
