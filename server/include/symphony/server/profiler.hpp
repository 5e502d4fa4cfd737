// Measures a model's latency profile l(b) on a device, and reads and writes
// profile files.
//
// The profiler runs a geometric grid of batch sizes (four per octave: 1, 2,
// 3, ..., 8, 10, 12, 14, 16, 20, 24, 28, 32, ... and max_batch): first a warm-up
// that grows the batch until the device runs out of memory (the largest size
// that ran is the model's max_batch from then on) or a batch takes longer than
// `max_latency`; then `repeats` rounds, each visiting every size once in a
// shuffled order, the way serving switches sizes from batch to batch. It
// records the median, 90th and 99th percentile per size, each made monotone by
// a least-squares fit (sizes between grid points are interpolated by
// LatencyProfile), and fits alpha and beta.
//
// A batch is timed the way its executor times a served one
// (docs/serving.md#profiles): on a CPU device, b samples landed side by side
// as the host memory pool lands requests that arrive one after another are
// gathered (TorchModel::run_batch: a view where they fill their blocks, else
// one copy each into the replica's reused buffer), run and split per
// request; with `overlap`, the longer of the staging and the rest, as
// CpuExecutor's staging thread reports it. On a CUDA device, the forward
// alone on a batch already on the device (the launcher's staging and copies
// are its dispatch delay, learned apart).
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
#include "symphony/profile_io/profile_file.hpp"
#include "symphony/status.hpp"

namespace symphony::server {

class TorchModel;
using profile_io::MeasuredProfile;
using profile_io::ProfileColumn;
using profile_io::ProfilePointStats;

struct ProfileOptions {
  std::uint32_t max_batch = 64;
  int repeats = 20;                             // timed rounds (each runs every size once)
  int warmup = 3;                               // untimed runs per batch size
  Duration max_latency = Duration::seconds(5);  // stop growing beyond this
  // No size runs that is expected to take longer than this (the size before
  // it, scaled up) or that did (it is left out); batch 1 always runs. The
  // server sets it while other models serve on the device: their slack.
  Duration run_limit = Duration::infinite();
  // The CPU executor stages each batch on a thread of its own
  // (ServerOptions::overlap on): a batch's time is the longer of its staging
  // and its forward, not their sum.
  bool overlap = false;
  // Called after each measurement round: (largest batch, round, rounds).
  std::function<void(std::uint32_t, std::size_t, std::size_t)> progress;
};

// The grid: 2^k * (1, 1.25, 1.5, 1.75) below max_batch, and max_batch.
std::vector<std::uint32_t> profile_grid(std::uint32_t max_batch);

// Profiles replica `replica` of the model.
Result<profile_io::MeasuredProfile> profile_model(TorchModel& model, std::size_t replica,
                                                  const ProfileOptions& opts);

// The profile a model served on several devices is planned with: for each b
// up to the smallest max batch, the largest l(b) of `profiles` (any of the
// devices may run a batch). REQUIRES: profiles not empty.
LatencyProfile slowest_profile(const std::vector<LatencyProfile>& profiles);

}  // namespace symphony::server
