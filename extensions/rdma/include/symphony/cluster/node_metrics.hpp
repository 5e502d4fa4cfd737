// What the cluster's scheduler and backends expose on /metrics
// (docs/metrics.md): plain snapshots of their counters, taken by the nodes
// (SchedulerNode::metrics_snapshot, BackendNode::metrics_snapshot), and the
// functions that render them as Prometheus families. Rendering lives apart
// from the nodes so that the nodes only count; the snapshot is the one
// interface between them.
//
//   metrics::AutoscaleTracker window(Duration::seconds(30));
//   auto ep = metrics::Endpoint::start("127.0.0.1:0", [&](metrics::Writer& w) {
//     write_scheduler_metrics(node->metrics_snapshot(), window, w);
//   });
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "symphony/autoscale.hpp"
#include "symphony/latency_histogram.hpp"
#include "symphony/metrics/autoscale_tracker.hpp"
#include "symphony/metrics/exposition.hpp"
#include "symphony/profile_calibrator.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony::cluster {

struct SchedulerMetricsSnapshot {
  struct Model {
    std::string name;
    std::uint64_t accepted = 0;                          // taken into the runtime
    std::array<std::uint64_t, 4> outcomes{};             // by Outcome, as the scheduler decided them
    std::array<std::uint64_t, kNumDropReasons> drops{};  // by DropReason
    // Requests refused on arrival: their Submit's arrival to the refusal's send.
    LatencyHistogram refusal_latency;
    std::uint32_t max_batch = 0;
    // With priority_levels of 2 or more: per level (index 0 is Triton's
    // priority 1), accepted and outcomes by Outcome.
    struct Level {
      std::uint64_t accepted = 0;
      std::array<std::uint64_t, 4> outcomes{};
    };
    std::vector<Level> by_priority;
    // Online recalibration, from the sub-cluster runtime that has measured
    // the model most (the report's `recalibration`); nullopt: none knows it.
    std::optional<CalibrationSnapshot> calibration;
  };
  struct Gpu {
    GpuId id = kNoGpu;
    std::string backend, device;
    bool alive = true;
    Duration busy;  // execution time its backend reported
    std::uint64_t batches = 0;
  };
  TimePoint at;
  Duration elapsed;  // since the scheduler started
  std::uint64_t submitted = 0, accepted = 0;
  std::uint64_t refused_unknown_model = 0, refused_bad_input = 0, refused_no_slot = 0;
  std::vector<Model> models;
  std::vector<Gpu> gpus;
  Delays delays;  // as handed to the runtime (learned, or the config's floors)
  std::uint64_t delay_samples = 0;
  double delay_percentile = 0;
  bool delays_learned = false;
  // Sub-cluster partitioning (the scheduler's PartitionSnapshot): without a
  // subclusters: section one sub-cluster, epoch 0, no moves, and `subs`
  // empty (the autoscaling advice then comes from the recent window).
  struct SubCluster {
    std::uint32_t id = 0;
    std::uint32_t gpus = 0;                  // in service now
    std::uint32_t models = 0, draining = 0;  // owned; moved away and still ending here
    AutoscaleSignal signal;                  // its last complete epoch window
  };
  std::uint32_t subclusters = 1;
  std::uint64_t partition_epoch = 0, partition_moves = 0;
  std::uint64_t loads_pending = 0, drains_pending = 0;
  double subs_window_s = 0;    // the span of the sub-clusters' signals
  double max_bad_rate = 0.01;  // the autoscaling advice's threshold (the config's max_bad_rate)
  std::vector<SubCluster> subs;
  std::uint32_t frontends = 0;  // connected now
  // Each connected frontend's times that come off its requests' targets:
  // its one-way delay (half a high percentile of its ping round trips) and
  // its replies' way out as it told it (p99) and as planned with (both
  // capped together at DelayLearner::cap(); capped: the two exceed it).
  struct Frontend {
    std::string name, address;
    Duration one_way, reply_path_told, reply_path;
    bool capped = false;
  };
  std::vector<Frontend> frontend_delays;  // as of the scheduler's last tick
  bool stopping = false;
};

// Appends the scheduler's families to `w`; `window` turns the cumulative
// totals into the recent window of the autoscaling advice.
void write_scheduler_metrics(const SchedulerMetricsSnapshot& s, metrics::AutoscaleTracker& window,
                             metrics::Writer& w);
// "" when the scheduler can take work (a GPU registered, not stopping),
// else why not.
std::string scheduler_not_ready(const SchedulerMetricsSnapshot& s);

struct BackendMetricsSnapshot {
  struct Device {
    std::string name;
    Duration busy;                                                         // executing batches
    std::uint64_t batches_ok = 0, batches_error = 0, batches_skipped = 0;  // skipped: no request ran
    std::uint64_t requests = 0;
  };
  std::string name;
  Duration elapsed;
  bool registered = false;
  std::uint64_t registrations = 0;  // with the scheduler, reconnections included
  std::uint64_t model_loads = 0;    // models loaded on its devices (emulated: none)
  std::vector<std::string> models;  // the models its devices can run (emulated: every one)
  std::vector<Device> devices;
  std::uint64_t skipped_requests = 0, failed_requests = 0, refused = 0;
  std::uint64_t reads = 0, read_bytes = 0;
  // Sub-cluster placements from the scheduler (docs/cluster.md): messages,
  // models loaded and unloaded by them, batches refused as not placed.
  std::uint64_t placements = 0, placement_loads = 0, placement_unloads = 0, batches_not_placed = 0;
};

void write_backend_metrics(const BackendMetricsSnapshot& s, metrics::Writer& w);
std::string backend_not_ready(const BackendMetricsSnapshot& s);

}  // namespace symphony::cluster
