// Measures a model's latency profile l(b) on a device, and reads and writes
// profile files.
//
// The profiler runs a geometric grid of batch sizes (1, 2, 4, ... and
// max_batch), each `repeats` times after a warm-up, and records the median
// and the 99th percentile. Sizes between grid points are interpolated by
// LatencyProfile. It fits alpha and beta, and stops growing the batch when the
// device runs out of memory (the largest size that ran is the model's
// max_batch from then on) or a batch takes longer than `max_latency`.
//
// A profile file (symphony/profile_io.hpp) records all of it; `symphony serve`
// reuses it instead of profiling again, and `symphony simulate` can simulate
// with it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "symphony/latency_profile.hpp"
#include "symphony/profile_io.hpp"
#include "symphony/status.hpp"

namespace symphony::server {

class TorchModel;
using symphony::MeasuredProfile;
using symphony::ProfilePointStats;

struct ProfileOptions {
  std::uint32_t max_batch = 64;
  int repeats = 15;                       // timed runs per batch size
  int warmup = 3;                         // untimed runs per batch size
  Duration max_latency = Duration::seconds(5);  // stop growing beyond this
  // Called after each batch size: (batch, index, grid size).
  std::function<void(std::uint32_t, std::size_t, std::size_t)> progress;
};

// The grid: 1, 2, 4, ... below max_batch, and max_batch.
std::vector<std::uint32_t> profile_grid(std::uint32_t max_batch);

// Profiles replica `replica` of the model.
Result<MeasuredProfile> profile_model(TorchModel& model, std::size_t replica, const ProfileOptions& opts);


}  // namespace symphony::server
