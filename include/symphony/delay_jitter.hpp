// How the real network delays of dispatches spread around the configured
// medians (a log-normal factor of spread sigma), and which percentile of
// them a scheduler plans with ("the high percentile bound of network
// latency"). The simulator draws delays from it (sim/network.hpp); configs
// describe it (`delays.distribution`).
//
//   DelayJitter j{.sigma = 0.668, .plan_percentile = 0.99};
//   Delays planned = j.planned(medians);           // what the scheduler gets
#pragma once

#include <cmath>
#include <cstdint>

#include "symphony/status.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony {

// z with P(N(0,1) <= z) = p, for p in (0, 1) (bisection on erfc; exact to
// about 1e-12, deterministic).
inline double normal_quantile(double p) noexcept {
  double lo = -40, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

struct DelayJitter {
  double sigma = 0;               // 0: the delays are exact (no jitter)
  double plan_percentile = 0.99;  // the scheduler plans with this percentile

  bool enabled() const noexcept { return sigma > 0; }

  // sigma such that the `percentile` of a median-1 log-normal is `ratio`.
  static double sigma_for_tail(double percentile, double ratio) noexcept {
    return std::log(ratio) / normal_quantile(percentile);
  }

  // The factor the scheduler plans with (1 without jitter).
  double plan_factor() const noexcept {
    return enabled() ? std::exp(sigma * normal_quantile(plan_percentile)) : 1.0;
  }

  // The delays the scheduler plans with, given the medians.
  Delays planned(const Delays& medians) const noexcept {
    Delays d = medians;
    const double q = plan_factor();
    d.ctrl =
        Duration::nanoseconds(static_cast<std::int64_t>(static_cast<double>(medians.ctrl.ns()) * q + 0.5));
    d.data =
        Duration::nanoseconds(static_cast<std::int64_t>(static_cast<double>(medians.data.ns()) * q + 0.5));
    return d;
  }

  Status validate() const {
    if (!(sigma >= 0) || !std::isfinite(sigma))
      return Status(Errc::kInvalidArgument, "delay jitter sigma must be a finite number >= 0");
    if (!(plan_percentile > 0 && plan_percentile < 1))
      return Status(Errc::kInvalidArgument, "delays.plan_percentile must be in (0, 1)");
    return {};
  }
};

}  // namespace symphony
