// Timing noise beyond log-normal jitter, for showing what online
// recalibration (profile_calibrator.hpp) does: a device that drifts (it runs
// `factor` times slower during episodes, e.g. 1.2 for a while: another
// tenant, a throttling GPU) and heavy tails (a batch now and then runs
// `outlier_factor` times as long, e.g. 3x: a stall).
//
// NoisyTiming multiplies the offline l(b) of each batch by
//   exp(N(0, sigma)) x drift(start) x (outlier ? outlier_factor : 1),
// where drift(start) is the product of the factors of the episodes active
// when the batch starts. The log-normal draws are the very stream of
// LogNormalTiming with the same seed; outliers draw from a second stream, so
// adding them does not change the jitter of the other batches. Same seed,
// same batches: the same durations. The Simulator passes each batch's start
// (the five-argument actual()); an engine that does not (the peers) gets the
// three-argument one, which has no drift and is refused by the experiments
// (ExperimentSpec::validate).
//
//   NoisyTiming t(NoiseSpec{.sigma = 0.05, .drift = {{10s, 10s, 0s, 1.2}}}, seed);
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "symphony/noise_spec.hpp"
#include "symphony/sim/random.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony::sim {

class NoisyTiming {
 public:
  NoisyTiming(NoiseSpec spec, std::uint64_t seed)
      : spec_(std::move(spec)), jitter_(seed), outliers_(seed ^ 0x0ddba11ULL) {}

  double drift(TimePoint t) const noexcept {
    double f = 1.0;
    for (const DriftEpisode& d : spec_.drift)
      if (d.active(t)) f *= d.factor;
    return f;
  }

  Duration actual(ModelId, std::uint32_t, Duration predicted, GpuId, TimePoint start) noexcept {
    double f = spec_.sigma > 0 ? jitter_.lognormal(0.0, spec_.sigma) : 1.0;
    f *= drift(start);
    if (spec_.outlier_probability > 0 && outliers_.uniform() < spec_.outlier_probability)
      f *= spec_.outlier_factor;
    return Duration::nanoseconds(static_cast<std::int64_t>(static_cast<double>(predicted.ns()) * f + 0.5));
  }

  // Without the start: jitter and outliers only (see the file comment).
  Duration actual(ModelId m, std::uint32_t b, Duration predicted) noexcept {
    return actual(m, b, predicted, kNoGpu, TimePoint::neg_infinite());
  }

  const NoiseSpec& spec() const noexcept { return spec_; }

 private:
  NoiseSpec spec_;
  Rng jitter_;
  Rng outliers_;
};

}  // namespace symphony::sim
