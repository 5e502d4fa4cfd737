// The time scale of a model's arrivals as a waiting candidate sees it,
// estimated from the model's recent inter-arrival gaps g.
//
// The deferred policy (exec_policy.hpp) widens a candidate's schedulable
// window to this scale. A candidate waits at some moment between two
// arrivals; the gap that contains a random moment is longer on average than
// the mean gap, because long gaps cover more moments (the inspection
// paradox): its expected length is the length-biased mean E[g^2] / E[g], and
// the expected time from the moment to the next arrival is half of it. For
// evenly spaced arrivals it is the gap itself; for Poisson arrivals, two mean
// gaps (2 / lambda); for bursty arrivals (many requests close together, then
// long silences) about the length of a silence, however short the mean gap.
// E[g] and E[g^2] are exponentially weighted moving averages with weight
// 1/SYMPHONY_ARRIVAL_MEMORY for the newest gap.
//
// Guarantees: O(1) per arrival, no allocation, deterministic (the same
// arrival times give the same estimate).
//
//   ArrivalGapEstimator e;
//   e.on_arrival(t0);  e.on_arrival(t1);  ...
//   Duration g = e.typical_gap();  // zero until two arrivals were seen
#pragma once

#include <cmath>
#include <cstdint>

#include "symphony/time.hpp"

// Weight 1/SYMPHONY_ARRIVAL_MEMORY of the newest gap in the moving averages.
#ifndef SYMPHONY_ARRIVAL_MEMORY
#define SYMPHONY_ARRIVAL_MEMORY 64
#endif

namespace symphony {

class ArrivalGapEstimator {
 public:
  static constexpr double kMemory = SYMPHONY_ARRIVAL_MEMORY;
  static_assert(SYMPHONY_ARRIVAL_MEMORY >= 1, "ArrivalGapEstimator: SYMPHONY_ARRIVAL_MEMORY must be >= 1");

  // Records an arrival at `t`. Arrivals out of order count as a zero gap.
  void on_arrival(TimePoint t) noexcept {
    if (last_ != TimePoint::neg_infinite()) {
      const double g = static_cast<double>(max(t - last_, Duration::zero()).ns());
      if (gaps_ == 0) {
        mean_ = g;
        mean_sq_ = g * g;
      } else {
        mean_ += (g - mean_) / kMemory;
        mean_sq_ += (g * g - mean_sq_) / kMemory;
      }
      if (gaps_ < ~std::uint32_t{0}) ++gaps_;
    }
    last_ = max(last_, t);
  }

  // Records `k` arrivals spread evenly over the time since the last one, the
  // last at `t` (arrivals counted elsewhere and learnt of later: the
  // runtime's refusals on the submitting threads). O(1).
  void on_arrivals(TimePoint t, std::uint32_t k) noexcept {
    if (k == 0) return;
    if (last_ == TimePoint::neg_infinite() || k == 1) {
      on_arrival(t);
      return;
    }
    const double g = static_cast<double>(max(t - last_, Duration::zero()).ns()) / k;
    const double keep = std::pow(1 - 1 / kMemory, static_cast<double>(k));  // the EWMA after k equal gaps
    if (gaps_ == 0) {
      mean_ = g;
      mean_sq_ = g * g;
    } else {
      mean_ = g + (mean_ - g) * keep;
      mean_sq_ = g * g + (mean_sq_ - g * g) * keep;
    }
    gaps_ = gaps_ > ~std::uint32_t{0} - k ? ~std::uint32_t{0} : gaps_ + k;
    last_ = max(last_, t);
  }

  // Returns the length-biased mean gap E[g^2] / E[g]: the expected length of
  // the gap between two arrivals that contains a random moment. Zero before
  // the first gap or while every gap was zero.
  Duration typical_gap() const noexcept {
    if (gaps_ == 0 || mean_ <= 0) return Duration::zero();
    return Duration::nanoseconds(static_cast<std::int64_t>(mean_sq_ / mean_ + 0.5));
  }

  // Whether a gap has been seen (two arrivals): before, nothing is known of
  // the arrivals, and typical_gap() is zero.
  bool has_history() const noexcept { return gaps_ > 0; }

  // Returns the moving average of the gaps (1 / rate); zero before the first gap.
  Duration mean_gap() const noexcept { return Duration::nanoseconds(static_cast<std::int64_t>(mean_ + 0.5)); }

 private:
  TimePoint last_ = TimePoint::neg_infinite();
  double mean_ = 0;     // ns
  double mean_sq_ = 0;  // ns^2
  std::uint32_t gaps_ = 0;
};

}  // namespace symphony
