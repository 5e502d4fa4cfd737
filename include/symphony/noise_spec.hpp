// A device's timing noise as plain data: log-normal jitter of each batch,
// spells when the device runs `factor` times slower (drift), and rare
// batches that run `outlier_factor` times as long. The simulator applies it
// (sim/noise.hpp: NoisyTiming); configs describe it (`noise:`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "symphony/status.hpp"
#include "symphony/time.hpp"

namespace symphony {

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
  double sigma = 0;                 // log-normal jitter: exp(N(0, sigma))
  std::vector<DriftEpisode> drift;  // slow (or fast) spells of the device
  double outlier_probability = 0;   // of a batch running outlier_factor x as long
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

}  // namespace symphony
