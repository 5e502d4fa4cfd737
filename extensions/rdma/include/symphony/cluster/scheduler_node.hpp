// SchedulerNode: the cluster's one scheduler process (`symphony scheduler`;
// paper §4.1-4.4). Design: docs/architecture.md#cluster (roles, sessions,
// clocks and delays, failures, hot spares, sub-clusters); formulas and the
// config: docs/cluster.md.
//
// Contract:
//  - it runs the core's Runtime (one per sub-cluster) fed from the network:
//    it takes request metadata from frontends and sends batches to backends,
//    never tensors;
//  - every request submitted ends exactly once: ok and late are decided by
//    the frontends, drops and errors are sent to them (Outcomes);
//  - deadlines come as remaining budgets (no clock is shared between hosts);
//    d_ctrl, d_data and d_resp are learned online, the config's as floors;
//  - lost backends fail their batches in flight and retire their GPUs; lost
//    frontends' requests never run; bad peers are refused with a reason.
//
// Threads: the transport's progress thread (every message, the heartbeats,
// the delay learning), the runtime's threads (dispatch to RemoteExecutors,
// outcomes to the sink), and whoever calls stop().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "symphony/autoscale.hpp"
#include "symphony/cluster/cluster_config.hpp"
#include "symphony/cluster/node_metrics.hpp"
#include "symphony/cluster/transport.hpp"
#include "symphony/status.hpp"

namespace symphony::cluster {

// One sub-cluster as the scheduler sees it at the end of the last
// autoscaling window (SchedulerNode::partition_snapshot()).
struct SubClusterSnapshot {
  std::uint32_t id = 0;
  std::uint32_t gpus = 0;             // GPUs in service now
  std::vector<std::string> models;    // owned: their new requests come here
  std::vector<std::string> draining;  // moved away, requests still ending here
  AutoscaleSignal signal;             // the last complete window
  AutoscaleAdvice advice;             // autoscale_advice(signal, max_bad_rate)
};

// The partition and autoscaling state of the scheduler (a copy; any thread).
struct PartitionSnapshot {
  std::uint32_t subclusters = 1;     // L
  bool epochs = false;               // re-partitioned every epoch_s (false: placed once)
  double epoch_s = 0;                // the epoch (0: none)
  double window_s = 0;               // the autoscaling window
  std::uint64_t epoch = 0;           // the epochs re-partitioned so far (0: the initial placement)
  std::uint64_t moves = 0;           // models moved, all epochs
  std::uint64_t loads_pending = 0;   // moves whose new sub-cluster has not confirmed the load
  std::uint64_t drains_pending = 0;  // moves whose old sub-cluster still has requests of the model
  std::uint64_t windows = 0;         // autoscaling windows completed
  double max_bad_rate = 0.01;
  std::vector<SubClusterSnapshot> subs;
  AutoscaleSignal cluster_signal;  // combine_signals over the sub-clusters
  AutoscaleAdvice cluster_advice;
};

struct SchedulerOptions {
  HostPort listen{"0.0.0.0", 0};
  ClusterConfig config;
  // With cluster.schedulers (hot spares, docs/cluster.md#hot-spare-schedulers):
  // this scheduler's index in that list. It starts as a spare; see deposed().
  std::uint32_t self = 0;
  // Called once (on the network thread) when another scheduler of a higher
  // term deposed this primary: it has stopped acting; the caller should stop
  // it and exit (restarted, it rejoins as a spare).
  std::function<void(const std::string&)> on_deposed;
  // --model-control-mode explicit: a frontend's ModelControl unloads, loads
  // (a folder of the repository the cluster does not serve) or reloads (new
  // files) a model while the cluster serves (docs/cluster.md#model-control);
  // false (none): refused, the models are fixed at start.
  bool model_control = false;
  // The model repository the roles read (--model-repository), and the
  // device whose profiles the scheduler plans with (--profile-device): a
  // load of a model the cluster does not serve reads its folder from here.
  std::string model_repository;
  std::string profile_device;
  // Room for models loaded while the cluster serves (model_control): model
  // ids beyond those of the config, reserved at start (--spare-models); a
  // reload's or unload's freed id is used again. With the config's models at
  // most wire::kMaxModels.
  std::uint32_t spare_models = 32;
  // --model-control-mode poll (with model_control): rescan the repository
  // this often, loading, reloading and unloading what changed; the
  // frontends' load and unload requests are refused. Zero: no poll.
  Duration repository_poll = Duration::zero();
  bool verbose = false;                       // log every peer's transports and every delay update
  std::function<void(std::string_view)> log;  // default: stderr with a time stamp
};

// This scheduler's index in cluster.schedulers (SchedulerOptions::self):
// the entry equal to its --listen, or, when it listens on a wildcard host
// (0.0.0.0, ::), the one entry with its port. Errors (kInvalidArgument) list
// the entries.
Result<std::uint32_t> scheduler_index(const std::vector<std::string>& schedulers, const std::string& listen);

class SchedulerNode {
 public:
  // Starts the runtime and the listener.
  static Result<std::unique_ptr<SchedulerNode>> create(SchedulerOptions opts);
  ~SchedulerNode();
  SchedulerNode(const SchedulerNode&) = delete;
  SchedulerNode& operator=(const SchedulerNode&) = delete;

  // The port the listener is bound to.
  std::uint16_t port() const;
  // Ends every request (queued ones dropped with reason shutdown, in-flight
  // batches given up to 2 s), says goodbye to every peer, closes. Idempotent.
  void stop();
  // Counters, learned delays and runtime statistics as JSON (any thread).
  nlohmann::json report() const;
  // The counters /metrics shows (node_metrics.hpp), at this moment (any thread).
  SchedulerMetricsSnapshot metrics_snapshot() const;
  // "" when the scheduler can take work, else why not (/readyz; any thread).
  // Reads only what the answer needs: no runtime or calibration statistics.
  std::string not_ready() const;
  // Sub-clusters, moves and autoscaling advice (any thread).
  PartitionSnapshot partition_snapshot() const;
  // Whether a scheduler of a higher term deposed this one (any thread).
  bool deposed() const;

  class Impl;

 private:
  explicit SchedulerNode(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace symphony::cluster
