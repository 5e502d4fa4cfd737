// BackendDevices: what runs a backend's batches, behind the runtime's
// Executor interface (one Executor per device).
//
// The backend (backend_node.hpp) reads a batch's inputs, hands them to
// prepare(), calls executor(d).execute() and, once the executor has reported
// the batch, collects each request's output with take_outputs().
//
//  - make_emulated_devices("emulated:N"): EmulatedGpus, each batch running
//    for exactly the l(b) the scheduler predicted; no outputs of their own
//    (the backend answers each request with its input's hash).
//  - make_torch_devices (backend_torch.hpp, when the server library is
//    built): TorchScript models on the server's CpuExecutor (and
//    CudaStreamExecutor where CUDA is built), inputs and outputs as raw
//    tensor bytes.
//
// Thread roles: prepare(), take_outputs() and executor() are called on the
// backend's network thread; the executors report from their own threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "symphony/runtime/executor.hpp"
#include "symphony/status.hpp"

namespace symphony::cluster {

struct ClusterRepositoryModel;  // cluster_repository.hpp

class BackendDevices {
 public:
  virtual ~BackendDevices() = default;
  // One name per device ("host/cpu:0").
  virtual const std::vector<std::string>& names() const = 0;
  // The models these devices can run; empty: any model (emulated devices).
  virtual std::vector<std::string> models() const = 0;
  virtual Executor& executor(std::size_t device) = 0;
  // Before the batch runs: its model and each request's input bytes (valid
  // until take_outputs). An error fails the batch before it runs.
  virtual Status prepare(BatchId batch, const std::string& model,
                         std::vector<std::span<const std::uint8_t>> inputs) {
    (void)batch;
    (void)model;
    (void)inputs;
    return {};
  }
  // After the batch was reported: each request's output, in input order, or
  // nullopt when the devices compute none (the backend then answers with
  // the input's hash). Forgets the batch.
  virtual std::optional<std::vector<std::vector<std::uint8_t>>> take_outputs(BatchId batch) {
    (void)batch;
    return std::nullopt;
  }
  // Sub-clusters: the scheduler places `model` on `device` (its batches come
  // next) or takes it away. The default checks that the devices can run the
  // model (models() empty: any) and keeps nothing: devices whose models are
  // loaded at start-up (TorchScript) hold them all and only stop being sent
  // their batches.
  virtual Status load_model(std::size_t device, const std::string& model) {
    (void)device;
    const std::vector<std::string> have = models();
    if (!have.empty() && std::find(have.begin(), have.end(), model) == have.end())
      return Status(Errc::kNotFound, "this backend has no model '" + model + "'");
    return {};
  }
  virtual void unload_model(std::size_t device, const std::string& model) {
    (void)device;
    (void)model;
  }
  // A load while the cluster serves (wire::ModelLoad,
  // docs/cluster.md#model-control): loads version `m` of a repository model
  // on the devices its instance_group allows and warms it up at batches 1
  // to `max_batch` as at start, then runs its batches. Blocks: called on a
  // thread of its own while the devices serve. A model of that name loaded
  // already: ok at once. The default (emulated devices, which run any
  // model) loads nothing.
  virtual Status add_model(const ClusterRepositoryModel& m, std::uint32_t max_batch) {
    (void)m;
    (void)max_batch;
    return {};
  }
  // Stops the devices; no executor reports after it returns.
  virtual void stop() {}
};

// "emulated:N": N emulated GPUs named `prefix`/emulated:i. Each batch runs
// `slowdown` times l(b) of the profile (1: as profiled; in [0.1, 10]): a
// device slower or faster than its profile, as online recalibration sees one.
Result<std::unique_ptr<BackendDevices>> make_emulated_devices(const std::string& spec,
                                                              const std::string& prefix,
                                                              double slowdown = 1.0);

}  // namespace symphony::cluster
