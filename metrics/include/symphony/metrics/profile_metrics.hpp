// The families of online profile recalibration (profile_calibrator.hpp;
// docs/metrics.md "Profile recalibration"), written per model by
// `symphony serve` and the cluster's scheduler from the model's
// CalibrationSnapshot: whether it recalibrates, its offline profile and the
// one the scheduler plans with now at batch sizes 1, 2, 4, ... and the max
// batch, their ratio, and the measurements and updates so far; and serve's
// per-device estimates of each model's profile.
//
//   metrics::write_profile_metrics(w, "resnet", *runtime.calibration(id), 32);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "symphony/metrics/exposition.hpp"
#include "symphony/profile_calibrator.hpp"

namespace symphony::metrics {

// The batch sizes the profile families are written at: 1, 2, 4, ... below
// `top`, and `top` itself. Empty when top is 0.
std::vector<std::uint32_t> profile_batch_sizes(std::uint32_t top);

// l(b) of `p` over l(b) of `base` (1 where base's is 0): the scale the
// families and the reports show. REQUIRES: b within both profiles.
double profile_scale(const LatencyProfile& p, const LatencyProfile& base, std::uint32_t b);

// Appends the model's samples of symphony_profile_recalibrating,
// symphony_profile_latency_seconds{batch, profile="offline"|"in_use"},
// symphony_profile_scale{batch}, symphony_profile_recalibration_samples_total
// and symphony_profile_recalibration_updates_total. The batch sizes go up to
// the model's `max_batch`, within both profiles. A {version} label follows
// {model} when `version` is not empty (model_labels).
void write_profile_metrics(Writer& w, const std::string& model, const CalibrationSnapshot& c,
                           std::uint32_t max_batch, const std::string& version = {});

// Appends one device's own estimate of a model's profile: `symphony serve`
// measures each device apart (its JSON report's devices[].models), while the
// scheduler plans with the model's one profile above. Writes
// symphony_device_profile_latency_seconds{device, model, batch} (the device's
// l(b)), symphony_device_profile_scale{device, model, batch} (estimate over
// offline) and symphony_device_profile_samples_total{device, model}, at the
// batch sizes of write_profile_metrics.
void write_device_profile_metrics(Writer& w, const std::string& device, const std::string& model,
                                  std::uint64_t samples, const LatencyProfile& offline,
                                  const LatencyProfile& estimate, std::uint32_t max_batch,
                                  const std::string& version = {});

}  // namespace symphony::metrics
