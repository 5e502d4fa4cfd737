// BackendNode: a GPU host of the cluster (`symphony backend`; paper §4.1).
// Its role, sessions, failures and hot-spare handover:
// docs/architecture.md#cluster; devices and options: docs/cluster.md.
//
// Contract:
//  - it registers its devices and models with the scheduler and connects to
//    every frontend the scheduler announces, known by their incarnation;
//  - for each Batch: reads the inputs from the frontends (one-sided, adjacent
//    ranges coalesced), runs it on the device's executor (BackendDevices),
//    pushes the outputs to the frontends and reports its end and timings to
//    the scheduler (BatchDone), as intervals measured here;
//  - an emulated device runs exactly the predicted l(b) and answers each
//    request with the FNV-1a hash of its input (8 bytes, zero-padded);
//  - a ModelLoad (a model loaded while the cluster serves) reads the model's
//    folder from the repository, loads and warms it up on a thread of its
//    own while batches run, and answers ModelLoadDone (ready, or why not); a
//    ModelUnload frees a model on that thread, in the order both came;
//  - malformed messages and requests naming unknown frontends, devices or
//    addresses outside a pool are refused with a logged reason.
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
  // The model repository this backend read at start (--model-repository):
  // a ModelLoad reads its model's folder from here (docs/cluster.md#model-control).
  std::string model_repository;
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
