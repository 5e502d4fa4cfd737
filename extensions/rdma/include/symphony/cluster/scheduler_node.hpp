// SchedulerNode: the cluster's one scheduler process (`symphony scheduler`;
// paper §4.1-4.2, docs/architecture.md#cluster).
//
// It is the existing Runtime (model-shard threads + one RankThread) fed from
// the network: frontends submit request metadata (id, model, remaining
// budget, input address) in coalesced Submit messages; one RemoteExecutor per
// backend GPU sends each granted batch (request ids, their frontend, input
// address and length) to its backend, which reads the inputs from the
// frontends itself and reports the batch's end. The scheduler never touches
// tensors.
//
//  - Deadlines travel as remaining budgets: a request's deadline here is
//    arrival + budget - (the frontend's one-way delay, half a high percentile
//    of its ping round trips); no clock is shared between hosts.
//  - d_ctrl, d_data and d_resp are learned online as a high percentile of a
//    recent window (cluster.delay_percentile over cluster.delay_window
//    samples; the config's `delays` are floors) and handed to the runtime
//    with Runtime::set_delays every cluster.delay_update:
//      one way = (batch round trip - time spent at the backend) / 2,
//      a batch's input reads fitted as fixed + per_request * b (the slope
//      by least squares, the fixed part as a high percentile of the rest),
//      d_ctrl = one way + fixed, d_data = per_request,
//      d_resp = output sends of a batch + one way.
//  - Failures. Every connection is heartbeat-checked (a peer silent for
//    cluster.heartbeat_timeout is lost, besides UCX's own errors). A lost
//    backend's batches in flight are reported to the runtime as errors naming
//    the backend (its frontends get the error), and its GPUs are retired at
//    once (Runtime::retire_gpu); a restarted backend registers as new GPUs.
//    A lost frontend's requests are filtered out of batches when they are
//    dispatched (they never run) and dropped; a batch keeps its other
//    requests. Peers without the cluster token, speaking another protocol
//    version, or sending malformed messages are refused with a logged reason.
//  - Drops and errors go back to the frontends (coalesced Outcomes); ok and
//    late are decided by the frontends, which get the outputs from the
//    backends directly and are the authority on every request's outcome.
//
//  - Sub-clusters (paper §4.4; the config's `subclusters:` section, absent:
//    one runtime over every GPU, as before). One runtime (model shards + a
//    RankThread) per sub-cluster, with no communication between them; every
//    runtime knows every model (same ids) but gets requests only of the
//    models routed to it. A backend GPU joins the sub-cluster furthest below
//    its share (subclusters.gpus, else equal shares) when it registers and
//    stays there. The initial placement partitions the config's expected
//    rates; every subclusters.epoch_s the rates measured over the epoch
//    (EpochRateMeter) are re-partitioned within max_disruption
//    (symphony::partition through partition::make_partitioner, on a worker
//    thread) and the models whose sub-cluster changed move
//    (SubClusterPlacement): the new sub-cluster's devices are sent a
//    Placement that loads the model; once every one of them has confirmed
//    it (PlacementDone), the model's new requests go to the new runtime; the
//    old runtime keeps its queued and running requests of the model until
//    every one has ended (a per-sub-cluster, per-model count of requests
//    not yet ended), and only then are its devices sent a Placement that
//    unloads it. A request is submitted to exactly one runtime, so no move
//    can lose or repeat one.
//  - Autoscaling advice (autoscale.hpp) per sub-cluster and for the cluster
//    (combine_signals) over windows of one epoch (cluster.autoscale window
//    of the simulator config when there are no epochs): requests routed to
//    the sub-cluster, those of them that ended late, dropped or with an
//    error, and the busy share of its GPUs (the backends' execution times).
//    In report() under "subclusters", and as a plain snapshot
//    (partition_snapshot()) for other renderers.
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
  bool verbose = false;                       // log every peer's transports and every delay update
  std::function<void(std::string_view)> log;  // default: stderr with a time stamp
};

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
