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
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "symphony/runtime/executor.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"

namespace symphony::cluster {

struct ClusterRepositoryModel;  // cluster_repository.hpp

// What the models the cluster serves can wait while a load's run holds a
// device (wire::ModelLoad's run limit; infinite: none is served), and the
// one that can wait least (BackendDevices::add_model).
struct LoadRunLimit {
  Duration limit = Duration::infinite();
  std::string tightest;
};

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
  // Runs `run`, one of a load's own runs on `device` (its load check, a
  // warm-up batch) expected to take about `expected` (infinite: not known),
  // once the scheduler holds the device for it in a gap of its schedule
  // (wire::LeaseRequest), or returns why not.
  using LeasedRun =
      std::function<Status(std::size_t device, Duration expected, const std::function<void()>& run)>;
  // A load while the cluster serves (wire::ModelLoad,
  // docs/cluster.md#model-control): loads version `m` of a repository model
  // on the devices its instance_group allows and warms it up at batches 1
  // to `max_batch` as at start, each of its runs through `leased` (empty:
  // at once), then runs its batches. Fails once its leased runs show a
  // batch of one longer than `limit` (server::LoadRuns::batch_of_one: its
  // first run not counted). Blocks: called on a thread of its own while the
  // devices serve. A model of that name loaded already: ok at once. `held`,
  // if given, gets what the leased runs did, for the log ("19 of its runs
  // held their device ...", server::LoadRuns::held), or stays empty when
  // none was leased. The default (emulated devices, which run any model)
  // loads nothing.
  virtual Status add_model(const ClusterRepositoryModel& m, std::uint32_t max_batch,
                           const LeasedRun& leased = {}, const LoadRunLimit& limit = {},
                           std::string* held = nullptr) {
    (void)m;
    (void)max_batch;
    (void)leased;
    (void)limit;
    (void)held;
    return {};
  }
  // The models held whose copy is of version `m` as its files are now: the
  // same model file, unchanged since it was read (size and modification
  // time), the same tensors and devices, warmed up to at least `max_batch`
  // (0: m's). A load of `m` may take one of them (rename_model) rather than
  // load a second copy. The default (emulated devices) holds none.
  virtual std::vector<std::string> copies_of(const ClusterRepositoryModel& m, std::uint32_t max_batch) const {
    (void)m;
    (void)max_batch;
    return {};
  }
  // Holds model `from` under the name `to` from now on (a batch of `from`
  // still running keeps its copy). Returns false, changing nothing, when
  // there is no `from` or `to` is held already. Called on the thread that
  // calls add_model, or while it waits.
  virtual bool rename_model(const std::string& from, const std::string& to) {
    (void)from;
    (void)to;
    return false;
  }
  // Frees model `name` (loaded at start or by add_model): its replicas on
  // every device go; a batch of it still running keeps its replica until
  // its outputs are taken. Returns whether there was such a model. Called
  // on the thread that calls add_model, or while it waits. The default
  // (emulated devices) holds nothing.
  virtual bool remove_model(const std::string& name) {
    (void)name;
    return false;
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
