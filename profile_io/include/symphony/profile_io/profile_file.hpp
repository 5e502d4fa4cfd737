// Latency profile files: what `symphony profile` writes, `symphony serve`
// reuses and `symphony simulate` can simulate with (YAML).
//
//   model: resnet18
//   device: cpu:0
//   inputs: [float32[3,112,112]]
//   max_batch: 32
//   alpha_ms: 1.234
//   beta_ms: 4.567
//   stopped_because: reached max_batch 32
//   points:            # [batch, median ms, p90 ms, p99 ms]
//     - [1, 5.81, 5.93, 6.02]
//     - [2, 7.02, 7.18, 7.30]
//
// Files with three numbers per point ([batch, median, p99], older ones) are
// read with p90 = p99.
//
// Not part of the core (it reads files, with yaml-cpp): library
// symphony::profile_io (profile_io/), used by the server and the simulator
// tool.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "symphony/latency_profile.hpp"
#include "symphony/status.hpp"

namespace symphony::profile_io {

// Which column of a measured profile the scheduler uses as l(b).
enum class ProfileColumn : std::uint8_t { kMedian, kP90, kP99 };
// "median", "p90" or "p99".
Result<ProfileColumn> parse_profile_column(std::string_view text);
std::string_view to_string(ProfileColumn c);

struct ProfilePointStats {
  std::uint32_t batch = 0;
  Duration median;
  Duration p90;
  Duration p99;
};

struct MeasuredProfile {
  std::string model;
  std::string device;
  std::vector<std::string> inputs;  // the input specs it was measured with
  std::vector<ProfilePointStats> points;
  std::uint32_t max_batch = 0;  // the largest batch that ran
  Duration alpha, beta;         // least-squares fit of the medians
  std::string stopped_because;  // why the grid ended where it did

  // The profile the scheduler uses, from one column.
  Result<LatencyProfile> to_latency_profile(ProfileColumn column = ProfileColumn::kP90) const;
};

Status write_profile_file(const std::string& path, const MeasuredProfile& p);
// Reads a profile file; errors name the file and the key.
Result<MeasuredProfile> read_profile_file(const std::string& path);

// Where a model's profile for a device lives by default, beside the model:
// "<dir>/<stem>.<device>.profile.yaml" with the device's colon dropped, e.g.
// ("models/resnet18.pt", "cpu:0") -> "models/resnet18.cpu0.profile.yaml".
// `symphony profile` and `serve` write it there; serve and the cluster's
// scheduler read it.
std::string default_profile_path(const std::string& model_path, std::string_view device);

// The profile files beside a model, of any device (the files
// default_profile_path names), sorted.
std::vector<std::string> profile_files_beside(const std::string& model_path);

}  // namespace symphony::profile_io
