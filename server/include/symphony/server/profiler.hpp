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
// A profile file (YAML) records all of it; `symphony serve` reuses it instead
// of profiling again:
//
//   model: resnet18
//   device: cpu:0
//   inputs: [float32[3,112,112]]
//   max_batch: 32
//   alpha_ms: 1.234
//   beta_ms: 4.567
//   points:            # [batch, median ms, p99 ms]
//     - [1, 5.81, 6.02]
//     - [2, 7.02, 7.30]
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "symphony/latency_profile.hpp"
#include "symphony/status.hpp"

namespace symphony::server {

class TorchModel;

struct ProfilePointStats {
  std::uint32_t batch = 0;
  Duration median;
  Duration p99;
};

struct MeasuredProfile {
  std::string model;
  std::string device;
  std::vector<std::string> inputs;  // the input specs it was measured with
  std::vector<ProfilePointStats> points;
  std::uint32_t max_batch = 0;      // the largest batch that ran
  Duration alpha, beta;             // least-squares fit of the medians
  std::string stopped_because;      // why the grid ended where it did

  // The profile the scheduler uses: from the p99 column (use_p99) or medians.
  Result<LatencyProfile> to_latency_profile(bool use_p99 = true) const;
};

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

Status write_profile_file(const std::string& path, const MeasuredProfile& p);
// Reads a profile file; errors name the file and the key.
Result<MeasuredProfile> read_profile_file(const std::string& path);

}  // namespace symphony::server
