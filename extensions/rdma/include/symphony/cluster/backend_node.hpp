// BackendNode: a GPU host of the cluster (`symphony backend`; paper §4.1).
//
// It registers its devices and models with the scheduler, connects to every
// frontend the scheduler announces (receiving the frontend's input-pool rkey
// once per connection), and for each Batch it gets: reads the requests'
// inputs from the frontends with one-sided ucp_get_nbx (adjacent ranges of a
// frontend coalesced into one read), runs the batch on the device's executor
// (the runtime's Executor interface through BackendDevices: EmulatedExecutor
// for `emulated:N`, the server's CPU and CUDA executors for TorchScript
// models, backend_torch.hpp),
// pushes the outputs to the frontends (one Outputs message per frontend) and
// reports the batch's end and timings to the scheduler (BatchDone). Times are
// sent as intervals measured here (no clock is shared with the scheduler).
//
// An emulated device runs a batch for exactly the l(b) the scheduler
// predicted (the paper's emulated GPUs) and returns, as each request's
// output, the FNV-1a hash of the input it read (8 bytes, zero-padded to
// output_bytes): a frontend can check that its input really travelled.
//
// Frontends are known by their incarnation: the scheduler's frontend ids
// (slot, generation) are resolved when a Batch comes, since they belong to
// the scheduler session that sent it.
//
// Failures: a lost scheduler is reconnected and the devices register again
// (as new GPUs). With one scheduler (after a backoff) the frontends are
// forgotten and inputs not yet read skipped. With hot spares (`schedulers`:
// the next one at once) frontend connections and every batch survive: the
// batches finish and push their outputs, their BatchDone goes to no one
// (the new primary does not know them), and the registration with the new
// primary carries their requests and those of batches ended in the last
// 2 s (Register.carried), so that it does not run them again when their
// frontends resubmit them. A frontend that leaves (or whose connection
// fails) has its requests skipped. Malformed messages and requests naming unknown
// frontends, devices or addresses outside a frontend's pool are refused with
// a logged reason (the requests get an error output when their frontend is
// reachable).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "symphony/cluster/backend_devices.hpp"
#include "symphony/cluster/node_metrics.hpp"
#include "symphony/cluster/transport.hpp"
#include "symphony/status.hpp"

namespace symphony::cluster {

struct BackendOptions {
  HostPort scheduler;
  // Every scheduler (cluster.schedulers: the primary and its hot spares);
  // when not empty it replaces `scheduler`.
  std::vector<HostPort> schedulers;
  std::string token;                   // empty: SYMPHONY_CLUSTER_TOKEN
  std::string devices = "emulated:1";  // emulated:N, when `device_set` is not given
  double emulated_slowdown = 1.0;      // make_emulated_devices' slowdown
  // The devices (make_emulated_devices, make_torch_devices); null: made from `devices`.
  std::unique_ptr<BackendDevices> device_set;
  std::string name;                 // in logs; default backend-<pid>
  std::uint32_t output_bytes = 16;  // per request, >= 8
  std::string exec_log;             // append "<frontend incarnation> <request id>" per executed request
  std::string ucx_tls = "tcp";
  Duration inject_delay = Duration::zero();  // experiments only (TransportOptions::inject_delay)
  bool verbose = false;
  std::function<void(std::string_view)> log;  // default: stderr with a time stamp
};

class BackendNode {
 public:
  static Result<std::unique_ptr<BackendNode>> create(BackendOptions opts);
  ~BackendNode();
  BackendNode(const BackendNode&) = delete;
  BackendNode& operator=(const BackendNode&) = delete;

  // Says goodbye and stops (batches in flight are abandoned). Idempotent.
  void stop();
  // Counters and input-read latencies (p50/p99/p99.9 per batch) as JSON.
  nlohmann::json report() const;
  // The counters /metrics shows (node_metrics.hpp), at this moment (any thread).
  BackendMetricsSnapshot metrics_snapshot() const;

  class Impl;

 private:
  explicit BackendNode(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace symphony::cluster
