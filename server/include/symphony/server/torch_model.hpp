// A TorchScript model loaded for serving: one replica per device, warmed up,
// with its input spec.
//
// Guarantees:
//  - load() reports a missing file, a file that is not TorchScript, an input
//    spec the model rejects, or a device it cannot run on, as a Status naming
//    the model and the path;
//  - run_batch() on replica d may be called from one thread per replica at a
//    time (each device's executor thread); different replicas run in parallel;
//  - exceptions from the model become an error Status with the model's message.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <torch/csrc/jit/api/module.h>

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "symphony/profile_io/profile_file.hpp"
#include "symphony/server/batch_staging.hpp"
#include "symphony/server/cuda_graphs.hpp"
#include "symphony/server/device.hpp"
#include "symphony/server/input_spec.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"

namespace symphony::server {

// One request's inputs as handed to a batch.
struct RequestInputs {
  const std::vector<at::Tensor>* tensors = nullptr;
  bool batched = false;  // the request used a leading batch dimension of one
};

class TorchModel {
 public:
  struct Options {
    std::string name;
    std::string path;               // TorchScript file
    std::vector<InputSpec> inputs;  // a dimension of -1 takes any size
    // The samples warm-up, the load check and the profiler run (fixed dims,
    // one per input); empty: `inputs`, every -1 as 1.
    std::vector<InputSpec> profile_inputs;
    std::vector<c10::Device> devices{c10::Device(c10::kCPU)};
    int warmup_iterations = 3;
    // Freeze the module and run libtorch's optimize_for_inference passes on
    // each replica (conv-bn folding, oneDNN on CPU). Modules the passes
    // cannot handle are served as they are.
    bool optimize = true;
    std::uint32_t warmup_batch = 1;  // the largest batch used to warm up
    // The longest a batch of the load check may run (the Server: the slack
    // of the models served beside it). Its batches of `warmup_batch` shrink
    // to what batch 1's time, scaled up, says fits; batch 1 always runs.
    Duration run_limit = Duration::infinite();
    // How the model takes and gives tensors when not as served (a model
    // repository's `reshape` and `max_batch_size: 0`, docs/repository.md).
    // Input i's samples reach forward() in the shape input_reshapes[i], and
    // output j's samples are answered in the shape output_reshapes[j]
    // (nullopt or absent: as they are). batch_dimension false: forward()
    // takes one sample without a batch dimension (batches are of one) and
    // its outputs get the dimension back.
    std::vector<std::optional<std::vector<std::int64_t>>> input_reshapes, output_reshapes;
    bool batch_dimension = true;
    // Where the load's own runs (the load check, warm-up, profiling) go: the
    // gate gets the replica, the batch size and the run, and calls the run
    // once the device has room for it (the Server leases the device from its
    // schedule), or returns why not. Empty: at once.
    std::function<Status(std::size_t replica, std::uint32_t batch, const std::function<void()>& run)>
        run_gate;
    // CUDA graphs on CUDA replicas (cuda_graphs.hpp, capture_graphs()):
    // unset auto, true on, false off.
    std::optional<bool> cuda_graphs;
    // TorchScript's executor for forward: true the profiling executor
    // (torch's default: it profiles the first run and optimizes the graph in
    // the second), false the simple one (the graph as frozen and optimized
    // at load; the first run costs half as much on a CPU). Unset: simple on
    // CPU replicas, profiling on CUDA ones (docs/serving.md#torchscripts-executor).
    std::optional<bool> jit_profiling;
    // How a replica's graphs are captured, on every replica, CUDA or not
    // (tests); empty: capture_replica_graphs() on the CUDA replicas.
    std::function<Result<CapturedGraphs>(TorchModel&, std::size_t replica,
                                         const std::vector<std::uint32_t>& sizes)>
        graph_capture;
  };

  static Result<std::unique_ptr<TorchModel>> load(Options opts);

  const std::string& name() const noexcept { return opts_.name; }
  const std::string& path() const noexcept { return opts_.path; }
  const std::vector<InputSpec>& inputs() const noexcept { return opts_.inputs; }
  // The inputs warm-up and profiling run with: `inputs` when they are fixed.
  const std::vector<InputSpec>& profile_inputs() const noexcept { return opts_.profile_inputs; }
  std::size_t replicas() const noexcept { return replicas_.size(); }
  // Whether the replicas run the frozen, optimized module (else: why not).
  bool optimized() const noexcept { return optimized_; }
  const std::string& optimize_note() const noexcept { return optimize_note_; }
  // Whether TorchScript runs the replica's forward with its profiling
  // executor (Options::jit_profiling), as torch reports it.
  bool profiling_executor(std::size_t replica) const;
  // Batches of each size a warm-up runs on the replica: 3 under the
  // profiling executor (it optimizes a shape's graph after its first runs),
  // 1 under the simple one (only a shape's first run is slow).
  int warm_up_rounds(std::size_t replica) const { return profiling_executor(replica) ? 3 : 1; }
  c10::Device device(std::size_t replica) const { return opts_.devices[replica]; }

  // Checks one request; see validate_request().
  Status validate(const std::vector<at::Tensor>& inputs, bool* batched,
                  std::int64_t* samples = nullptr) const {
    return validate_request(opts_.name, opts_.inputs, inputs, batched, samples);
  }

  // Gathers the requests' samples into a batch (stage_samples(): a view
  // when they are adjacent, else one copy each into the replica's reused
  // buffer; then to the replica's device), runs forward and splits every
  // output tensor back, one IValue per request (a Tensor, or a tuple when
  // the model returns one), on the CPU.
  // Samples of different shapes (inputs with a -1) run as one forward per
  // shape (shape_groups()), one after another. With `errors`, a shape whose
  // forward fails fails only its requests: (*errors)[i] says why, their
  // outputs are none, and the others are answered; without, it fails the
  // batch. The batch fails when every shape's forward failed.
  Result<std::vector<c10::IValue>> run_batch(std::size_t replica, const std::vector<RequestInputs>& requests,
                                             std::vector<std::string>* errors = nullptr);

  // run_batch() in two steps, so that an executor can form the next batch
  // while this one runs (CpuExecutor's overlap): stage() gathers every shape
  // group's inputs onto the replica's device in buffer set `set` (0 or 1:
  // each replica keeps two, so the batch staged in one may run while the
  // next is staged in the other; a set is reused only by the batch after
  // next, once this one's outputs are out of it); run_staged() runs them and
  // splits the outputs as run_batch() does. Same threading rule per set.
  struct StagedBatch {
    struct Group {
      std::vector<std::size_t> requests;  // indices into the batch's requests
      std::vector<at::Tensor> inputs;     // the batch, on the replica's device
      Status error;                       // it could not be formed: its requests fail
    };
    std::vector<Group> groups;
    std::size_t set = 0;
  };
  StagedBatch stage(std::size_t replica, const std::vector<RequestInputs>& requests, std::size_t set = 0);
  Result<std::vector<c10::IValue>> run_staged(std::size_t replica, StagedBatch&& staged,
                                              const std::vector<RequestInputs>& requests,
                                              std::vector<std::string>* errors = nullptr);

  // Runs forward on a ready-made batch (the profiler and warm-up), in the
  // served shapes: the Options' reshapes apply here.
  Result<c10::IValue> forward(std::size_t replica, std::vector<at::Tensor> batch);
  // forward() for the load's own runs: through Options::run_gate, and ended
  // on the device (synchronized) when it returns; *ran, if given, is how long
  // it took, and *refused whether the error is the gate's (not the model's).
  Result<c10::IValue> load_forward(std::size_t replica, std::vector<at::Tensor> batch,
                                   double* ran_ns = nullptr, bool* refused = nullptr);

  // The load's own run of a batch of b on `replica`, through
  // Options::run_gate (at once without one).
  Status load_run(std::size_t replica, std::uint32_t b, const std::function<void()>& run);

  // Captures a CUDA graph of the forward per batch size up to max_batch on
  // each CUDA replica (after warm_up_sizes(), as Options::cuda_graphs asks)
  // and plans which batch sizes replay one (GraphPlan). Never fails: a model
  // or a replica that cannot be captured runs ordinary launches, and
  // graphs_notes() say why, a line per replica (none when graphs are off
  // or, in auto, no replica is CUDA).
  void capture_graphs(std::uint32_t max_batch);
  const std::vector<std::string>& graphs_notes() const noexcept { return graphs_notes_; }
  // The replica's graphs and the captured size a batch of b replays (0 and
  // null: launches). The caller runs replay() on the replica's stream.
  std::uint32_t graph_size(std::size_t replica, std::uint32_t b) const noexcept {
    return replica < graph_plans_.size() ? graph_plans_[replica].size_for(b) : 0;
  }
  ReplicaGraphs* graphs(std::size_t replica) const noexcept {
    return replica < graphs_.size() ? graphs_[replica].get() : nullptr;
  }
  // Batches run by replaying a graph (the executor counts them).
  void count_graph_batch() noexcept { graph_batches_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t graph_batches() const noexcept { return graph_batches_.load(std::memory_order_relaxed); }

  // Runs `rounds` batches of every size 1..max_batch on every replica: the
  // first calls of a shape are slow (TorchScript profiles, then optimizes
  // the graph; kernels are selected per shape), and the first request must
  // not pay for them (0: warm_up_rounds()). Learns the outputs (outputs())
  // from the first batch.
  Status warm_up_sizes(std::uint32_t max_batch, int rounds = 0);

  // The model's outputs as a batch of one returned them: names ("output", or
  // "output0".. for a tuple or list), dtypes, and shapes beyond the batch
  // dimension. Empty before warm_up_sizes().
  const std::vector<InputSpec>& outputs() const noexcept { return outputs_; }

  // How batches were formed (staging: batch_staging.hpp), over every replica.
  StagingCounters::Snapshot staging() const noexcept { return staging_.snapshot(); }
  StagingCounters* staging_counters() noexcept { return &staging_; }  // executors that stage themselves

  // A batch of b random samples per input at the profile dims (normal for
  // floating types, small integers otherwise), on `device`.
  std::vector<at::Tensor> dummy_batch(std::uint32_t b, c10::Device device) const;

 private:
  explicit TorchModel(Options o) : opts_(std::move(o)) {}
  Options opts_;
  std::vector<torch::jit::Module> replicas_;
  bool optimized_ = false;
  std::string optimize_note_;
  std::vector<InputSpec> outputs_;
  bool adapted_ = false;  // some reshape applies, or no batch dimension
  // Per replica, per buffer set (StagedBatch::set), per input: the buffer
  // its batches are gathered into.
  std::vector<std::array<std::vector<at::Tensor>, 2>> staging_buffers_;
  StagingCounters staging_;
  // Per replica (empty: none captured).
  std::vector<std::unique_ptr<ReplicaGraphs>> graphs_;
  std::vector<GraphPlan> graph_plans_;
  std::vector<std::string> graphs_notes_;
  std::atomic<std::uint64_t> graph_batches_{0};
  at::Tensor to_model(std::size_t input, const at::Tensor& x) const;
  // One shape group of a batch: gathered into `buffers`; run (from buffer
  // set `set`) and split.
  Status stage_group(std::size_t replica, const std::vector<RequestInputs>& group,
                     std::vector<at::Tensor>& buffers, std::vector<at::Tensor>* inputs);
  Result<std::vector<c10::IValue>> run_group(std::size_t replica, std::vector<at::Tensor>&& inputs,
                                             std::size_t set, const std::vector<RequestInputs>& group);
  c10::IValue from_model(c10::IValue out) const;
};

// The libtorch device for a CPU or CUDA DeviceSpec (CPU devices are all
// c10::kCPU; each runs on its own executor thread).
c10::Device torch_device(const DeviceSpec& d);

// Sets libtorch's intra-op thread count (Debian's libtorch starts with 1).
void set_cpu_threads(int threads);

// "models/resnet18.pt" -> "resnet18".
std::string model_name_from_path(const std::string& path);

// Where a model's profile for a device lives by default:
// "<dir>/<stem>.<device>.profile.yaml", e.g. "models/resnet18.cpu0.profile.yaml"
// (profile_io::default_profile_path, whose rule the cluster reads too).
inline std::string default_profile_path(const std::string& model_path, const DeviceSpec& d) {
  return profile_io::default_profile_path(model_path, d.to_string());
}

// The requests of a batch grouped by their samples' shapes, each group in
// batch order, groups by their first request: one group (0..n-1) when every
// sample has the same shapes (always, for inputs without a -1).
std::vector<std::vector<std::size_t>> shape_groups(const std::vector<RequestInputs>& requests);

// Splits a batched model output into one IValue per request (tensors and
// tuples/lists of tensors; anything else is an error naming the type).
Result<std::vector<c10::IValue>> split_output(const c10::IValue& out,
                                              const std::vector<RequestInputs>& requests,
                                              std::string_view model);

}  // namespace symphony::server
