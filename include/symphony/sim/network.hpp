// Network delays that vary from batch to batch (a TCP network's heavy tail), for the simulator
// (docs/simulator.md#network-delays-delays). By default every dispatch takes exactly the configured
// d_ctrl + d_data*b, as the scheduler plans; with a DelayJitter, ctrl and data are the *medians*, each
// dispatch draws ctrl x exp(N(0, sigma)) + data x b x exp(N(0, sigma)), and the scheduler plans with
// ctrl x q and data x q, q = exp(sigma x z(plan_percentile)). d_resp and the safety margin stay fixed.
// A tail ("the `percentile` of the delay is `ratio` times its median") may be given instead of sigma.
//
// Guarantees: deterministic: the draws come from their own generator (seeded from the run's seed), one
// pair per dispatch in dispatch order, so the same run draws the same delays; the workload and the
// timing noise are unchanged.
//
//   DelayJitter j{.sigma = 0.668, .plan_percentile = 0.99};
//   Delays planned = j.planned(medians);           // what the scheduler gets
//   NetworkJitter n(j, medians, seed);  Duration real = n.actual(batch_size);
#pragma once

#include <cmath>
#include <cstdint>

#include "symphony/delay_jitter.hpp"
#include "symphony/sim/random.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony::sim {

class NetworkJitter {
 public:
  NetworkJitter(DelayJitter j, Delays medians, std::uint64_t seed) : j_(j), medians_(medians), rng_(seed) {}

  // The real delay of one dispatch of a batch of b.
  Duration actual(std::uint32_t b) noexcept {
    const double fc = rng_.lognormal(0.0, j_.sigma);
    const double fd = rng_.lognormal(0.0, j_.sigma);
    const double ns = static_cast<double>(medians_.ctrl.ns()) * fc +
                      static_cast<double>(medians_.data.ns()) * static_cast<double>(b) * fd;
    return Duration::nanoseconds(static_cast<std::int64_t>(ns + 0.5));
  }

  const DelayJitter& jitter() const noexcept { return j_; }

 private:
  DelayJitter j_;
  Delays medians_;
  Rng rng_;
};

}  // namespace symphony::sim
