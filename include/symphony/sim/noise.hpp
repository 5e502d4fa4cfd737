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

#include "symphony/sim/random.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony::sim {

// The device runs `factor` times as long from `at` for `length`, and again
// every `every` after that when `every` is positive.
struct DriftEpisode {
  Duration at;
  Duration length;
  Duration every;  // zero: once
  double factor = 1.0;

  bool active(TimePoint t) const noexcept {
    if (t == TimePoint::neg_infinite()) return false;
    const Duration since = t.since_epoch() - at;
    if (since < Duration::zero()) return false;
    const std::int64_t into = every > Duration::zero() ? since.ns() % every.ns() : since.ns();
    return into < length.ns();
  }
};

struct NoiseSpec {
  double sigma = 0;                  // log-normal jitter: exp(N(0, sigma))
  std::vector<DriftEpisode> drift;   // slow (or fast) spells of the device
  double outlier_probability = 0;    // of a batch running outlier_factor x as long
  double outlier_factor = 3.0;

  // Whether anything beyond log-normal jitter is asked for.
  bool beyond_lognormal() const noexcept { return !drift.empty() || outlier_probability > 0; }

  Status validate() const {
    if (!(sigma >= 0)) return Status(Errc::kInvalidArgument, "noise sigma must not be negative");
    if (!(outlier_probability >= 0 && outlier_probability <= 1))
      return Status(Errc::kInvalidArgument, "noise outlier probability must be in [0, 1]");
    if (!(outlier_factor > 0)) return Status(Errc::kInvalidArgument, "noise outlier factor must be positive");
    for (std::size_t i = 0; i < drift.size(); ++i) {
      const DriftEpisode& d = drift[i];
      const std::string who = "noise drift episode " + std::to_string(i);
      if (d.at < Duration::zero() || d.length <= Duration::zero() || d.every < Duration::zero())
        return Status(Errc::kInvalidArgument, who + ": needs at >= 0, a positive length and every >= 0");
      if (d.every > Duration::zero() && d.every < d.length)
        return Status(Errc::kInvalidArgument, who + ": every must be at least the length");
      if (!(d.factor > 0)) return Status(Errc::kInvalidArgument, who + ": factor must be positive");
    }
    return {};
  }
};

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
    if (spec_.outlier_probability > 0 && outliers_.uniform() < spec_.outlier_probability) f *= spec_.outlier_factor;
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
