// SchedulerNode: the cluster's one scheduler process (`symphony scheduler`;
// paper §4.1-4.2, DESIGN.md §3 "Cluster").
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
// Threads: the transport's progress thread (every message, the heartbeats,
// the delay learning), the runtime's threads (dispatch to RemoteExecutors,
// outcomes to the sink), and whoever calls stop().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "symphony/rdma/cluster_config.hpp"
#include "symphony/rdma/transport.hpp"
#include "symphony/status.hpp"

namespace symphony::rdma {

struct SchedulerOptions {
  HostPort listen{"0.0.0.0", 0};
  ClusterConfig config;
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

  class Impl;

 private:
  explicit SchedulerNode(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace symphony::rdma
